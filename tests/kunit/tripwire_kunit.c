// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for tripwires (driver/tripwire.c): which armed tripwires a
 * delivered write (clanq_rx_write()) or a PIO flush (AP_FLUSH) fires,
 * one-shot and persistent ones, arming, disarming, destroying, the
 * fired bitmap and the armed bitmap under a hostile application, the
 * armed bitmap's upkeep, the region freed under armed tripwires, ten
 * thousand of them on one region, TW_WAIT, and garbage into the
 * handlers.
 *
 * The fixture is the RDMA suites' (rdma_fixture.h): the region the
 * tripwires watch belongs to the exporter context on clanq0 and is
 * exported, so it has an armed bitmap; the requester context on the
 * test NIC has an aperture onto all of it (for AP_FLUSH) and a source
 * region (for writes). The endpoint that owns the tripwires is the
 * exporter's. A write is a call of the receive path, clanq_rx_write(),
 * as the loop wire makes it. What the driver did is judged from the
 * endpoint's segment (the fired bitmap, the counters), the armed bitmap,
 * the NICs' counters and what the handlers return.
 */
#include <kunit/test.h>
#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/rbtree.h>
#include <linux/string.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "rdma_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

#define REGION_LEN	(16u * 1024u)
#define NR_BLOCKS	(REGION_LEN >> CLANQ_TW_BLOCK_SHIFT)
#define TW_SLOTS	128u
#define PERSISTENT	(CLANQ_TW_PERSISTENT | CLANQ_TW_ARMED)
#define ONE_SHOT	CLANQ_TW_ARMED

/* The watched region, its aperture, the source, the owning endpoint. */
struct tw_env {
	struct rdma_env *e;
	struct dst d;		/* e->exp's region, e->ctx's aperture on all of it */
	struct src s;		/* e->ctx's: what writes copy */
	struct clanq_kep *ep;	/* e->exp's: owns the tripwires */
	struct clanq_ioc_ep_create c;
	u8 *seg;		/* the endpoint's segment, as the application maps it */
	unsigned long *fired;	/* in seg */
	struct clanq_ep_counters *counters;	/* in seg */
	unsigned long *armed;	/* the region's armed bitmap */
};

/* A tripwire as TW_CREATE described it. */
struct tw {
	u32 id;
	u32 bit;
};

/* An endpoint of @ctx owning up to @tw_slots tripwires, as EP_CREATE makes it. */
static struct clanq_kep *tw_ep_create(struct kunit *test,
				      struct clanq_ctx *ctx, u32 tw_slots,
				      struct clanq_ioc_ep_create *c)
{
	struct clanq_kep *ep;

	mutex_lock(&ctx->lock);
	ep = clanq_kep_create(ctx, 8, 8, 8, tw_slots, 0);
	if (!IS_ERR(ep))
		clanq_kep_describe(ep, c);
	mutex_unlock(&ctx->lock);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ep);
	KUNIT_ASSERT_EQ(test, c->tw_slots, tw_slots);
	KUNIT_ASSERT_LE(test, (size_t)c->tw_fired + tw_slots / 8, ep->shm->size);
	KUNIT_ASSERT_EQ(test, c->tw_fired % 8, 0);
	return ep;
}

static int tw_test_init(struct kunit *test)
{
	struct tw_env *t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, t);
	rdma_test_init(test);
	t->e = test->priv;
	t->d = dst_create(test, t->e, REGION_LEN, 0, REGION_LEN,
			  CLANQ_RIGHT_WRITE);
	t->s = src_create(test, t->e, REGION_LEN, 0x3c);
	t->ep = tw_ep_create(test, t->e->exp, TW_SLOTS, &t->c);
	t->seg = t->ep->shm->vaddr;
	t->fired = (unsigned long *)(t->seg + t->c.tw_fired);
	t->counters = (struct clanq_ep_counters *)(t->seg + t->c.counters);
	KUNIT_ASSERT_NOT_NULL(test, t->d.r->tw.bitmap);
	t->armed = t->d.r->tw.bitmap->vaddr;
	test->priv = t;
	return 0;
}

/*
 * Handlers, as the exporter (tripwires) or the requester (AP_FLUSH)
 * calls them.
 */

static int tw_create_on(struct clanq_ctx *ctx, struct clanq_kep *ep,
			u32 region, u64 off, u64 len, u32 flags, struct tw *tw)
{
	struct clanq_ioc_tw_create c = {
		.ep = ep->id, .region = region, .off = off, .len = len,
		.flags = flags,
	};
	int err = clanq_ioctl_tw_create(ctx, &c);

	tw->id = c.id;
	tw->bit = c.bit;
	return err;
}

/* A tripwire on [@off, @off + @len) of the region, owned by t->ep. */
static struct tw tw_new(struct kunit *test, struct tw_env *t, u64 off,
			u64 len, u32 flags)
{
	struct tw tw;

	KUNIT_ASSERT_EQ_MSG(test, tw_create_on(t->e->exp, t->ep, t->d.region,
					       off, len, flags, &tw), 0,
			    "TW_CREATE [%llu, +%llu)", off, len);
	KUNIT_ASSERT_NE(test, tw.id, 0);
	KUNIT_ASSERT_LT(test, tw.bit, t->ep->tw.slots);
	return tw;
}

static int tw_ctl(struct clanq_ctx *ctx, int (*fn)(void *, void *), u32 id)
{
	struct clanq_ioc_tw_ctl c = { .id = id };

	return fn(ctx, &c);
}

static int tw_arm(struct tw_env *t, u32 id)
{
	return tw_ctl(t->e->exp, clanq_ioctl_tw_arm, id);
}

static int tw_disarm(struct tw_env *t, u32 id)
{
	return tw_ctl(t->e->exp, clanq_ioctl_tw_disarm, id);
}

static int tw_destroy(struct tw_env *t, u32 id)
{
	return tw_ctl(t->e->exp, clanq_ioctl_tw_destroy, id);
}

static int tw_wait(struct clanq_ctx *ctx, u32 id, u64 off, u64 old,
		   u64 timeout_ns)
{
	struct clanq_ioc_tw_wait w = {
		.id = id, .off = off, .old = old, .timeout_ns = timeout_ns,
	};

	return clanq_ioctl_tw_wait(ctx, &w);
}

/* AP_FLUSH of [@off, @off + @len) of aperture @ap; *@fired what it said. */
static int ap_flush(struct tw_env *t, u32 ap, u64 off, u64 len, u32 *fired)
{
	struct clanq_ioc_ap_flush f = {
		.ap = ap, .off = off, .len = len, .fired = 0xdead,
	};
	int err = clanq_ioctl_ap_flush(t->e->ctx, &f);

	*fired = f.fired;
	return err;
}

/* Deliver an RDMA write of @len bytes at @off of region @r. */
static int write_to(struct tw_env *t, struct clanq_kregion *r, u64 off,
		    u64 len)
{
	return clanq_rx_write(r, off, t->s.r, 0, len, NULL, NULL);
}

static void write_at(struct kunit *test, struct tw_env *t, u64 off, u64 len)
{
	KUNIT_ASSERT_EQ_MSG(test, write_to(t, t->d.r, off, len), 0,
			    "write [%llu, +%llu)", off, len);
}

/*
 * What the application sees.
 */

/* test_bit(), as a function: KUnit's messages show the call, not its expansion */
static bool bit_set(const unsigned long *map, unsigned long bit)
{
	return test_bit(bit, map);
}

static bool is_fired(struct tw_env *t, u32 bit)
{
	return test_bit(bit, t->fired);
}

static unsigned int nr_fired(struct tw_env *t)
{
	return bitmap_weight(t->fired, t->ep->tw.slots);
}

static void clear_fired(struct tw_env *t)
{
	bitmap_zero(t->fired, t->ep->tw.slots);
}

static unsigned int nr_armed(struct clanq_kregion *r)
{
	return READ_ONCE(r->tw.nr_armed);
}

/*
 * The armed bitmap @bm of a REGION_LEN region holds exactly the @want
 * bits, and nothing past them: read from its page, as an importer's
 * mapping reads it, so the driver's address for it must be that page's.
 */
static void expect_armed_bits(struct kunit *test, const struct clanq_shm *bm,
			      const unsigned long *want, const char *when)
{
	const size_t used = BITS_TO_LONGS(NR_BLOCKS) * sizeof(long);
	const unsigned long *bits;
	unsigned long b;

	KUNIT_ASSERT_EQ(test, bm->nr_pages, 1);
	bits = kmap_local_page(bm->pages[0]);
	for (b = 0; b < NR_BLOCKS; b++) {
		bool got = test_bit(b, bits), set = test_bit(b, want);

		KUNIT_EXPECT_EQ_MSG(test, got, set, "%s: block %lu, word %#lx",
				    when, b, bits[BIT_WORD(b)]);
	}
	KUNIT_EXPECT_NULL_MSG(test, memchr_inv((u8 *)bits + used, 0,
					       bm->size - used), "%s", when);
	kunmap_local(bits);
}

/*
 * Range matching.
 */

struct range_case {
	u64 off, len;
	bool fires;
	const char *what;
};

/*
 * A write fires a tripwire [1024, 1087] iff it shares a byte with it:
 * the bytes either side do not, its first and last byte do, and so does
 * a write covering it, or inside it. Each fire sets the bit and counts
 * once, on the endpoint and on the region's NIC.
 */
static void write_fires_at_every_edge(struct kunit *test)
{
	static const struct range_case cases[] = {
		{ 960, 64, false, "ends one byte before it" },
		{ 1088, 64, false, "starts one byte after its last" },
		{ 1023, 1, false, "the byte before it" },
		{ 1088, 1, false, "the byte after it" },
		{ 1024, 64, true, "covers it exactly" },
		{ 1000, 25, true, "ends on its first byte" },
		{ 1087, 10, true, "starts on its last byte" },
		{ 1024, 1, true, "its first byte" },
		{ 1087, 1, true, "its last byte" },
		{ 1040, 8, true, "inside it" },
		{ 0, REGION_LEN, true, "the whole region" },
	};
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 1024, 64, PERSISTENT);
	u64 fires = 0;
	s64 nic0 = nic_stat(&t->e->peer->stats.tw_fires);
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct range_case *c = &cases[i];

		clear_fired(t);
		write_at(test, t, c->off, c->len);
		fires += c->fires;
		KUNIT_EXPECT_EQ_MSG(test, is_fired(t, tw.bit), c->fires,
				    "write %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, nr_fired(t), c->fires,
				    "write %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, ctr(&t->counters->tw_fires), fires,
				    "write %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, nic_stat(&t->e->peer->stats.tw_fires),
				    nic0 + fires, "write %s", c->what);
	}
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_flushes), 0);
}

/*
 * An atomic fires the tripwires on its word when it changes it: a FADD
 * (even of 0: it is a write) and a CAS that swapped; a CAS that found
 * another value wrote nothing and fires nothing. The word beside the
 * tripwire fires nothing. A READ of the tripwire's bytes fires nothing.
 */
static void an_atomic_fires_its_word_and_a_read_fires_nothing(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 1024, 64, PERSISTENT);
	u64 add[2] = { 5, 0 }, cas[2] = { 999, 1 }, old = 0;

	clear_fired(t);
	KUNIT_ASSERT_EQ(test, clanq_rx_atomic(t->d.r, 1016, CLANQ_RDMA_OP_FADD,
					      add, &old, NULL, NULL), 0);
	KUNIT_EXPECT_EQ_MSG(test, nr_fired(t), 0, "FADD of the word before it");
	KUNIT_ASSERT_EQ(test, clanq_rx_atomic(t->d.r, 1088, CLANQ_RDMA_OP_FADD,
					      add, &old, NULL, NULL), 0);
	KUNIT_EXPECT_EQ_MSG(test, nr_fired(t), 0, "FADD of the word after it");
	KUNIT_ASSERT_EQ(test, clanq_rx_atomic(t->d.r, 1080, CLANQ_RDMA_OP_CAS,
					      cas, &old, NULL, NULL), 0);
	KUNIT_EXPECT_EQ(test, old, 0);
	KUNIT_EXPECT_EQ_MSG(test, nr_fired(t), 0, "CAS that did not swap");
	KUNIT_ASSERT_EQ(test, clanq_rx_read(t->d.r, 0, t->s.r, 0, REGION_LEN,
					    NULL), 0);
	KUNIT_EXPECT_EQ_MSG(test, nr_fired(t), 0, "READ of the whole region");
	cas[0] = 0;
	KUNIT_ASSERT_EQ(test, clanq_rx_atomic(t->d.r, 1080, CLANQ_RDMA_OP_CAS,
					      cas, &old, NULL, NULL), 0);
	KUNIT_EXPECT_TRUE_MSG(test, is_fired(t, tw.bit), "CAS that swapped");
	clear_fired(t);
	add[0] = 0;
	KUNIT_ASSERT_EQ(test, clanq_rx_atomic(t->d.r, 1024, CLANQ_RDMA_OP_FADD,
					      add, &old, NULL, NULL), 0);
	KUNIT_EXPECT_TRUE_MSG(test, is_fired(t, tw.bit), "FADD of 0");
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 2);
}

/*
 * A flush is byte-precise too, although the armed bitmap made the writer
 * ask for whole 64-byte blocks: the tripwire [1030, 1079] fires iff the
 * flushed bytes touch it, and a flush of its block that misses its
 * bytes fires nothing and counts as spurious, on its endpoint and on the
 * flushing NIC.
 */
static void flush_fires_at_every_edge(struct kunit *test)
{
	static const struct range_case cases[] = {
		{ 1022, 8, false, "ends one byte before it" },
		{ 1080, 8, false, "starts one byte after its last" },
		{ 1029, 1, false, "the byte before it" },
		{ 1080, 1, false, "the byte after it" },
		{ 1030, 50, true, "covers it exactly" },
		{ 1025, 6, true, "ends on its first byte" },
		{ 1079, 5, true, "starts on its last byte" },
		{ 1030, 1, true, "its first byte" },
		{ 1079, 1, true, "its last byte" },
		{ 1040, 8, true, "inside it" },
	};
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 1030, 50, PERSISTENT);
	struct clanq_nic_stats *st = &t->e->nic->stats;
	s64 flushes0 = nic_stat(&st->tw_flushes);
	s64 spurious0 = nic_stat(&st->tw_spurious);
	u64 fires = 0, misses = 0;
	unsigned int i;
	u32 fired;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct range_case *c = &cases[i];

		clear_fired(t);
		KUNIT_ASSERT_EQ(test, ap_flush(t, t->d.ap, c->off, c->len,
					       &fired), 0);
		fires += c->fires;
		misses += !c->fires;
		KUNIT_EXPECT_EQ_MSG(test, fired, c->fires, "flush %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, is_fired(t, tw.bit), c->fires,
				    "flush %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, ctr(&t->counters->tw_fires), fires,
				    "flush %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, ctr(&t->counters->tw_flushes), fires,
				    "flush %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, ctr(&t->counters->tw_spurious), misses,
				    "flush %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, nic_stat(&st->tw_flushes),
				    flushes0 + i + 1, "flush %s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, nic_stat(&st->tw_spurious),
				    spurious0 + misses, "flush %s", c->what);
	}
}

/*
 * A write that overlaps several tripwires fires all of them, one-shot,
 * persistent, long or short, and only them: not one that starts on the
 * byte after the write, nor one far away. The flush of an aperture that
 * starts inside the region fires at the region offset it names.
 */
static void a_write_fires_every_tripwire_it_overlaps(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct tw a = tw_new(test, t, 100, 8, ONE_SHOT);
	struct tw b = tw_new(test, t, 104, 100, PERSISTENT);
	struct tw c = tw_new(test, t, 0, REGION_LEN, PERSISTENT);
	struct tw d = tw_new(test, t, 200, 8, ONE_SHOT);
	struct tw e = tw_new(test, t, 8000, 8, PERSISTENT);
	u32 ap, fired;

	write_at(test, t, 104, 96);		/* [104, 199] */
	KUNIT_EXPECT_TRUE(test, is_fired(t, a.bit));
	KUNIT_EXPECT_TRUE(test, is_fired(t, b.bit));
	KUNIT_EXPECT_TRUE(test, is_fired(t, c.bit));
	KUNIT_EXPECT_FALSE(test, is_fired(t, d.bit));
	KUNIT_EXPECT_FALSE(test, is_fired(t, e.bit));
	KUNIT_EXPECT_EQ(test, nr_fired(t), 3);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 3);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 4);	/* a went */

	/* an aperture on [4096, 12288): its byte 3904 is region byte 8000 */
	clear_fired(t);
	ap = ap_import(test, t->e, t->d.region, t->d.key, 4096, 8192,
		       CLANQ_RIGHT_WRITE);
	KUNIT_ASSERT_EQ(test, ap_flush(t, ap, 8000 - 4096, 8, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 2);
	KUNIT_EXPECT_TRUE(test, is_fired(t, c.bit));
	KUNIT_EXPECT_TRUE(test, is_fired(t, e.bit));
	KUNIT_EXPECT_EQ(test, nr_fired(t), 2);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 5);
	/* one flush, however many it fired */
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_flushes), 1);
}

/*
 * A flush counts once in the tw_flushes of every endpoint whose
 * tripwires it fired, however many of them it fired and in whatever
 * order the walk meets them (here A, B, A).
 */
static void a_flush_counts_once_per_endpoint(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct clanq_ioc_ep_create c2;
	struct clanq_kep *ep2 = tw_ep_create(test, t->e->exp, 64, &c2);
	struct clanq_ep_counters *ctr2 = (struct clanq_ep_counters *)
		((u8 *)ep2->shm->vaddr + c2.counters);
	struct tw b;
	u32 fired;

	tw_new(test, t, 0, 8, PERSISTENT);
	KUNIT_ASSERT_EQ(test, tw_create_on(t->e->exp, ep2, t->d.region, 8, 8,
					   PERSISTENT, &b), 0);
	tw_new(test, t, 16, 8, PERSISTENT);
	KUNIT_ASSERT_EQ(test, ap_flush(t, t->d.ap, 0, 24, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 3);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 2);
	KUNIT_EXPECT_EQ(test, ctr(&ctr2->tw_fires), 1);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_flushes), 1);
	KUNIT_EXPECT_EQ(test, ctr(&ctr2->tw_flushes), 1);
}

KUNIT_DEFINE_ACTION_WRAPPER(kevq_destroy_action, clanq_kevq_destroy,
			    struct clanq_kevq *);

/*
 * An evq of @ctx, destroyed at cleanup, its ring in @ring, and @ep
 * registered on it for @events.
 */
static struct clanq_kevq *evq_on(struct kunit *test, struct clanq_ctx *ctx,
				 struct clanq_kep *ep, u32 events,
				 struct clanq_queue *ring, int *reg)
{
	struct clanq_ioc_evq_create c = { .max_regs = 4 };
	struct clanq_kevq *evq = clanq_kevq_create(ctx, 4, &c);

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evq);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							kevq_destroy_action,
							evq), 0);
	KUNIT_ASSERT_EQ(test, clanq_q_init(ring, clanq_kevq_seg_for_kunit(evq),
					   c.mmap_size, &c.ring), 0);
	*reg = clanq_kevq_register_ep(evq, ep->id, events, 0x7717 + events);
	KUNIT_ASSERT_GE(test, *reg, 0);
	return evq;
}

/*
 * A fire raises CLANQ_EV_TRIPWIRE on its endpoint's registrations: one
 * event where tripwires are watched, none where only OOB messages are,
 * none before the fire.
 */
static void a_fire_raises_a_tripwire_event(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct clanq_queue ring, oob_ring;
	struct clanq_event ev = {};
	int reg, oob_reg;

	evq_on(test, t->e->exp, t->ep, CLANQ_EV_TRIPWIRE, &ring, &reg);
	evq_on(test, t->e->exp, t->ep, CLANQ_EV_OOB, &oob_ring, &oob_reg);
	tw_new(test, t, 64, 8, PERSISTENT);
	write_at(test, t, 0, 64);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&ring, &ev));

	write_at(test, t, 64, 8);
	KUNIT_ASSERT_TRUE(test, clanq_q_get(&ring, &ev));
	KUNIT_EXPECT_EQ(test, ev.reg, reg);
	KUNIT_EXPECT_EQ(test, ev.events, CLANQ_EV_TRIPWIRE);
	KUNIT_EXPECT_EQ(test, ev.cookie, 0x7717 + CLANQ_EV_TRIPWIRE);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&ring, &ev));
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&oob_ring, &ev));
}

/*
 * A one-byte write inside a tripwire three pages long fires it; a
 * second one does not, as the tripwire was one-shot.
 */
static void a_write_inside_a_long_tripwire_fires_it(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 100, 3 * PAGE_SIZE, ONE_SHOT);

	write_at(test, t, 100 + PAGE_SIZE + 5, 1);
	KUNIT_EXPECT_TRUE(test, is_fired(t, tw.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	clear_fired(t);
	write_at(test, t, 100 + 2 * PAGE_SIZE, 1);
	KUNIT_EXPECT_FALSE(test, is_fired(t, tw.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
}

/*
 * Arming.
 */

/*
 * A one-shot tripwire fires once and is disarmed; a persistent one
 * fires at every write. TW_ARM arms a fired one-shot tripwire again, and
 * it fires again; TW_DISARM stops fires. Arming an armed tripwire or
 * disarming a disarmed one changes nothing.
 */
static void one_shot_fires_once_persistent_always(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct tw o = tw_new(test, t, 0, 64, ONE_SHOT);
	struct tw p = tw_new(test, t, 64, 64, PERSISTENT);

	write_at(test, t, 0, 128);
	KUNIT_EXPECT_TRUE(test, is_fired(t, o.bit));
	KUNIT_EXPECT_TRUE(test, is_fired(t, p.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 2);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);

	clear_fired(t);
	write_at(test, t, 0, 128);
	KUNIT_EXPECT_FALSE(test, is_fired(t, o.bit));
	KUNIT_EXPECT_TRUE(test, is_fired(t, p.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 3);

	/* re-armed after its fire, the one-shot one fires again, once */
	KUNIT_EXPECT_EQ(test, tw_arm(t, o.id), 0);
	KUNIT_EXPECT_EQ(test, tw_arm(t, o.id), 0);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 2);
	clear_fired(t);
	write_at(test, t, 0, 128);
	KUNIT_EXPECT_TRUE(test, is_fired(t, o.bit));
	KUNIT_EXPECT_TRUE(test, is_fired(t, p.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 5);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);

	/* disarmed, neither fires */
	KUNIT_EXPECT_EQ(test, tw_disarm(t, p.id), 0);
	KUNIT_EXPECT_EQ(test, tw_disarm(t, p.id), 0);
	KUNIT_EXPECT_EQ(test, tw_arm(t, o.id), 0);
	KUNIT_EXPECT_EQ(test, tw_disarm(t, o.id), 0);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	clear_fired(t);
	write_at(test, t, 0, 128);
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 5);

	/* and a persistent one armed again fires at every write again */
	KUNIT_EXPECT_EQ(test, tw_arm(t, p.id), 0);
	write_at(test, t, 64, 1);
	write_at(test, t, 127, 1);
	KUNIT_EXPECT_TRUE(test, is_fired(t, p.bit));
	KUNIT_EXPECT_FALSE(test, is_fired(t, o.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 7);
}

/*
 * Destroying an armed tripwire: no write fires it afterwards, its id is
 * gone (-ENOENT), and the references it held are dropped. Its bit is
 * left as it was (the application clears bits) but goes to the next
 * tripwire, which starts with it cleared.
 */
static void destroy_while_armed_stops_fires_and_frees_the_bit(struct kunit *test)
{
	struct tw_env *t = test->priv;
	unsigned int ep_refs = refcount_read(&t->ep->ref);
	unsigned int r_refs = kref_read(&t->d.r->ref);
	struct tw tw = tw_new(test, t, 256, 64, PERSISTENT), tw2;

	KUNIT_EXPECT_EQ(test, refcount_read(&t->ep->ref), ep_refs + 1);
	KUNIT_EXPECT_EQ(test, kref_read(&t->d.r->ref), r_refs + 1);
	write_at(test, t, 300, 8);
	KUNIT_ASSERT_TRUE(test, is_fired(t, tw.bit));

	KUNIT_EXPECT_EQ(test, tw_destroy(t, tw.id), 0);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	KUNIT_EXPECT_FALSE(test, bit_set(t->armed, 256 >> CLANQ_TW_BLOCK_SHIFT));
	KUNIT_EXPECT_EQ(test, t->e->exp->nr_tws, 0);
	KUNIT_EXPECT_EQ(test, refcount_read(&t->ep->ref), ep_refs);
	KUNIT_EXPECT_EQ(test, kref_read(&t->d.r->ref), r_refs);
	write_at(test, t, 256, 64);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
	KUNIT_EXPECT_TRUE(test, is_fired(t, tw.bit));	/* not the driver's to clear */
	KUNIT_EXPECT_EQ(test, tw_arm(t, tw.id), -ENOENT);
	KUNIT_EXPECT_EQ(test, tw_disarm(t, tw.id), -ENOENT);
	KUNIT_EXPECT_EQ(test, tw_destroy(t, tw.id), -ENOENT);
	KUNIT_EXPECT_EQ(test, tw_wait(t->e->exp, tw.id, 256, 0, 1000), -ENOENT);

	/* the bit is reused, and starts cleared */
	tw2 = tw_new(test, t, 256, 64, 0);
	KUNIT_EXPECT_EQ(test, tw2.bit, tw.bit);
	KUNIT_EXPECT_NE(test, tw2.id, tw.id);
	KUNIT_EXPECT_FALSE(test, is_fired(t, tw2.bit));
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	write_at(test, t, 256, 64);
	KUNIT_EXPECT_FALSE(test, is_fired(t, tw2.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
}

/*
 * Destroying the endpoint kills its tripwires: no write fires them, their
 * ids are gone, their references on the region dropped; another
 * endpoint's tripwire on the same bytes still fires.
 */
static void endpoint_destroy_kills_its_tripwires(struct kunit *test)
{
	struct tw_env *t = test->priv;
	unsigned int r_refs = kref_read(&t->d.r->ref);
	struct clanq_ioc_ep_create c2;
	struct clanq_kep *ep2 = tw_ep_create(test, t->e->exp, 64, &c2);
	struct tw mine = tw_new(test, t, 512, 8, PERSISTENT), a, b;

	KUNIT_ASSERT_EQ(test, tw_create_on(t->e->exp, ep2, t->d.region, 512, 8,
					   PERSISTENT, &a), 0);
	KUNIT_ASSERT_EQ(test, tw_create_on(t->e->exp, ep2, t->d.region, 4096,
					   4096, ONE_SHOT, &b), 0);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 3);
	KUNIT_EXPECT_EQ(test, kref_read(&t->d.r->ref), r_refs + 3);

	ep_destroy(t->e->exp, ep2);	/* and its segment */
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);
	KUNIT_EXPECT_EQ(test, kref_read(&t->d.r->ref), r_refs + 1);
	KUNIT_EXPECT_EQ(test, t->e->exp->nr_tws, 1);
	KUNIT_EXPECT_EQ(test, tw_arm(t, a.id), -ENOENT);
	KUNIT_EXPECT_EQ(test, tw_arm(t, b.id), -ENOENT);
	KUNIT_EXPECT_EQ(test, tw_destroy(t, b.id), -ENOENT);
	/* b's blocks are no longer armed, mine's still are */
	KUNIT_EXPECT_FALSE(test, bit_set(t->armed, 4096 >> CLANQ_TW_BLOCK_SHIFT));
	KUNIT_EXPECT_TRUE(test, bit_set(t->armed, 512 >> CLANQ_TW_BLOCK_SHIFT));
	write_at(test, t, 0, REGION_LEN);
	KUNIT_EXPECT_TRUE(test, is_fired(t, mine.bit));
	KUNIT_EXPECT_EQ(test, nr_fired(t), 1);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
}

/*
 * A hostile application.
 */

/*
 * Whatever the application scribbled into its fired bitmap and its
 * counters, a fire sets exactly its tripwire's bit, leaves every other
 * bit and every other byte of the segment as it found them, and the
 * counter says how many fires there were (the driver never reads the
 * segment back).
 */
static void hostile_fired_bitmap_only_gets_the_right_bit_set(struct kunit *test)
{
	static const u64 patterns[] = {
		~0ull, 0x5a5a5a5a5a5a5a5aull, 0xdeadbeefcafef00dull, 0,
	};
	struct tw_env *t = test->priv;
	struct tw other = tw_new(test, t, 0, 8, 0);
	struct tw tw = tw_new(test, t, 1024, 8, PERSISTENT);
	size_t size = t->ep->shm->size;
	u64 *words = (u64 *)t->fired;
	struct clanq_ep_counters *want_ctr;
	unsigned int i, w;
	u8 *want;

	KUNIT_ASSERT_NE(test, tw.bit, other.bit);
	for (i = 0; i < ARRAY_SIZE(patterns); i++) {
		for (w = 0; w < TW_SLOTS / 64; w++)
			words[w] = patterns[i] ^ ((u64)w << 32);
		if (i)	/* the all-ones one keeps the bit set */
			__clear_bit(tw.bit, t->fired);
		WRITE_ONCE(t->counters->tw_fires, patterns[i] ^ 0x77);
		WRITE_ONCE(t->counters->tw_flushes, patterns[i]);
		want = snapshot(test, t->seg, size);
		want_ctr = (struct clanq_ep_counters *)(want + t->c.counters);

		write_at(test, t, 1020, 8);
		__set_bit(tw.bit, (unsigned long *)(want + t->c.tw_fired));
		want_ctr->tw_fires = i + 1;
		KUNIT_EXPECT_EQ_MSG(test, first_diff(t->seg, want, size), INTACT,
				    "pattern %#llx", patterns[i]);
		KUNIT_EXPECT_EQ_MSG(test, ctr(&t->counters->tw_fires), i + 1,
				    "pattern %#llx", patterns[i]);
	}
	KUNIT_EXPECT_EQ(test, t->ep->tw.fires, ARRAY_SIZE(patterns));
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);
}

/*
 * The armed bitmap is a hint the driver never reads to decide. All set:
 * a flush of bytes no tripwire covers fires nothing and counts as
 * spurious (on the endpoint only when an armed tripwire shares the
 * flushed block). All clear: a flush of an armed tripwire still fires it,
 * as does a write.
 */
static void hostile_armed_bitmap_changes_no_decision(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 4096 + 16, 8, PERSISTENT);
	struct clanq_nic_stats *st = &t->e->nic->stats;
	size_t bytes = t->d.r->tw.bitmap->size;
	s64 flushes0 = nic_stat(&st->tw_flushes);
	s64 spurious0 = nic_stat(&st->tw_spurious);
	u32 fired;

	memset(t->armed, 0xff, bytes);
	KUNIT_ASSERT_EQ(test, ap_flush(t, t->d.ap, 0, 64, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 0);
	KUNIT_ASSERT_EQ(test, ap_flush(t, t->d.ap, 8192, 4096, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 0);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_spurious), 0);
	/* its block, not its bytes */
	KUNIT_ASSERT_EQ(test, ap_flush(t, t->d.ap, 4096, 16, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 0);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_spurious), 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->tw_flushes), flushes0 + 3);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->tw_spurious), spurious0 + 3);
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 0);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_flushes), 0);

	memset(t->armed, 0, bytes);
	KUNIT_ASSERT_EQ(test, ap_flush(t, t->d.ap, 4096, 64, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 1);
	KUNIT_EXPECT_TRUE(test, is_fired(t, tw.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_flushes), 1);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_spurious), 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->tw_spurious), spurious0 + 3);
	write_at(test, t, 4096 + 23, 1);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 2);
}

/*
 * The armed bitmap's upkeep: arming sets exactly the 64-byte blocks a
 * tripwire covers; a block two armed tripwires share stays set until the
 * last of them is disarmed; a fire that disarms clears them; a region
 * exported with tripwires armed already shows them.
 */
static void armed_bitmap_covers_exactly_the_armed_blocks(struct kunit *test)
{
	struct tw_env *t = test->priv;
	unsigned long *want = kunit_kzalloc(test, BITS_TO_LONGS(NR_BLOCKS) *
					    sizeof(long), GFP_KERNEL);
	struct clanq_ioc_region_export ex = { .rights = CLANQ_RIGHTS_ALL };
	const struct clanq_shm *bm = t->d.r->tw.bitmap;
	struct tw t1, t2, t3, t4, t5, t6, t7, t8;
	struct clanq_kregion *r2;

	KUNIT_ASSERT_NOT_NULL(test, want);
	/*
	 * One page, so the driver writes it through its direct map: no
	 * vmap() per export (a connection's ring is exported per connect).
	 */
	KUNIT_ASSERT_EQ(test, bm->nr_pages, 1);
	KUNIT_EXPECT_FALSE(test, bm->vmapped);
	KUNIT_EXPECT_PTR_EQ(test, bm->vaddr, page_address(bm->pages[0]));
	expect_armed_bits(test, bm, want, "nothing armed");

	t1 = tw_new(test, t, 100, 200, ONE_SHOT);	/* blocks 1..4 */
	bitmap_set(want, 1, 4);
	expect_armed_bits(test, bm, want, "t1 armed");
	t2 = tw_new(test, t, 250, 150, 0);		/* blocks 3..6 */
	expect_armed_bits(test, bm, want, "t2 created, not armed");
	KUNIT_EXPECT_EQ(test, tw_arm(t, t2.id), 0);
	bitmap_set(want, 3, 4);
	expect_armed_bits(test, bm, want, "t2 armed");
	t3 = tw_new(test, t, 64, 64, ONE_SHOT);		/* block 1 exactly */
	expect_armed_bits(test, bm, want, "t3 armed");

	KUNIT_EXPECT_EQ(test, tw_disarm(t, t1.id), 0);
	__clear_bit(2, want);
	expect_armed_bits(test, bm, want, "t1 disarmed");
	KUNIT_EXPECT_EQ(test, tw_disarm(t, t3.id), 0);
	__clear_bit(1, want);
	expect_armed_bits(test, bm, want, "t3 disarmed");

	t4 = tw_new(test, t, 640, 8, ONE_SHOT);		/* block 10 */
	t5 = tw_new(test, t, 680, 8, ONE_SHOT);		/* block 10 */
	__set_bit(10, want);
	expect_armed_bits(test, bm, want, "t4, t5 armed");
	KUNIT_EXPECT_EQ(test, tw_disarm(t, t4.id), 0);
	expect_armed_bits(test, bm, want, "t4 disarmed, t5 armed");
	KUNIT_EXPECT_EQ(test, tw_disarm(t, t5.id), 0);
	__clear_bit(10, want);
	expect_armed_bits(test, bm, want, "t4, t5 disarmed");

	KUNIT_EXPECT_EQ(test, tw_destroy(t, t2.id), 0);
	bitmap_clear(want, 3, 4);
	expect_armed_bits(test, bm, want, "t2 destroyed");

	/* across a block boundary; and the region's last block */
	t6 = tw_new(test, t, 1020, 8, ONE_SHOT);	/* blocks 15, 16 */
	t7 = tw_new(test, t, REGION_LEN - 8, 8, ONE_SHOT);
	bitmap_set(want, 15, 2);
	__set_bit(NR_BLOCKS - 1, want);
	expect_armed_bits(test, bm, want, "t6, t7 armed");
	write_at(test, t, 1024, 1);			/* t6 fires */
	KUNIT_EXPECT_TRUE(test, is_fired(t, t6.bit));
	bitmap_clear(want, 15, 2);
	expect_armed_bits(test, bm, want, "t6 fired");
	write_at(test, t, REGION_LEN - 1, 1);		/* t7 fires */
	KUNIT_EXPECT_TRUE(test, is_fired(t, t7.bit));
	__clear_bit(NR_BLOCKS - 1, want);
	expect_armed_bits(test, bm, want, "t7 fired");

	/* armed before the export, shown by it */
	ex.id = region_alloc(test, t->e->exp, REGION_LEN);
	r2 = region_pin(test, t->e->exp, ex.id);
	KUNIT_ASSERT_EQ(test, tw_create_on(t->e->exp, t->ep, ex.id, 4000, 200,
					   ONE_SHOT, &t8), 0);
	KUNIT_EXPECT_NULL(test, r2->tw.bitmap);
	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_export(t->e->exp, &ex), 0);
	KUNIT_ASSERT_NOT_NULL(test, r2->tw.bitmap);
	bitmap_zero(want, NR_BLOCKS);
	bitmap_set(want, 4000 >> 6, (4199 >> 6) - (4000 >> 6) + 1);
	bm = r2->tw.bitmap;
	expect_armed_bits(test, bm, want, "armed before the export");
}

/*
 * Revocation.
 */

/* A TW_WAIT in a thread of its own. */
/* Wait (at most 10 s) until region @r has @n armed tripwires. */
static void await_armed(struct kunit *test, struct clanq_kregion *r,
			unsigned int n)
{
	unsigned int ms;

	for (ms = 0; nr_armed(r) != n && ms < 10000; ms += 20)
		msleep(20);
	KUNIT_ASSERT_EQ(test, nr_armed(r), n);
}

/*
 * Freeing the region under armed tripwires kills them all: a waiter
 * wakes with -ENXIO, their ids are gone (-ENOENT to every command),
 * their references and bits are given back, and no write or flush
 * reaches the region or fires anything.
 */
static void region_free_kills_its_tripwires(struct kunit *test)
{
	struct tw_env *t = test->priv;
	unsigned int ep_refs = refcount_read(&t->ep->ref);
	struct tw a = tw_new(test, t, 0, 8, ONE_SHOT);
	struct tw b = tw_new(test, t, 64, 64, PERSISTENT);
	struct tw c = tw_new(test, t, 128, 8, 0);
	struct tw ids[] = { a, b, c }, n;
	struct clanq_kregion *r2;
	struct tw_waiter *w;
	unsigned int i;
	u32 fired;

	KUNIT_EXPECT_EQ(test, refcount_read(&t->ep->ref), ep_refs + 3);
	w = tw_waiter_start(test, t->e->exp, c.id, 128, 0, 0,
			    20ull * NSEC_PER_SEC);
	await_armed(test, t->d.r, 3);

	region_free(test, t->e->exp, t->d.region);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&w->done, 10 * HZ));
	KUNIT_EXPECT_EQ(test, w->ret, -ENXIO);
	for (i = 0; i < ARRAY_SIZE(ids); i++) {
		KUNIT_EXPECT_EQ_MSG(test, tw_arm(t, ids[i].id), -ENOENT, "tw %u", i);
		KUNIT_EXPECT_EQ_MSG(test, tw_disarm(t, ids[i].id), -ENOENT, "tw %u", i);
		KUNIT_EXPECT_EQ_MSG(test, tw_wait(t->e->exp, ids[i].id, 128, 0, 1000),
				    -ENOENT, "tw %u", i);
		KUNIT_EXPECT_EQ_MSG(test, tw_destroy(t, ids[i].id), -ENOENT, "tw %u", i);
	}
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	KUNIT_EXPECT_TRUE(test, RB_EMPTY_ROOT(&t->d.r->tw.armed.rb_root));
	KUNIT_EXPECT_TRUE(test, list_empty(&t->d.r->tw.all));
	KUNIT_EXPECT_EQ(test, t->e->exp->nr_tws, 0);
	KUNIT_EXPECT_EQ(test, refcount_read(&t->ep->ref), ep_refs);

	KUNIT_EXPECT_EQ(test, write_to(t, t->d.r, 0, 256), -ENXIO);
	KUNIT_EXPECT_EQ(test, ap_flush(t, t->d.ap, 0, 256, &fired), -ENXIO);
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 0);

	/* the bits are free: a tripwire on another region gets the first */
	n.id = region_alloc(test, t->e->exp, PAGE_SIZE);
	r2 = region_pin(test, t->e->exp, n.id);
	KUNIT_ASSERT_EQ(test, tw_create_on(t->e->exp, t->ep, n.id, 0, 8,
					   ONE_SHOT, &n), 0);
	KUNIT_EXPECT_EQ(test, n.bit, 0);
	KUNIT_EXPECT_EQ(test, write_to(t, r2, 0, 8), 0);
	KUNIT_EXPECT_TRUE(test, is_fired(t, n.bit));
}

/*
 * Many tripwires.
 */

#define MANY		10000u
#define MANY_SLOTS	10048u		/* MANY, rounded up to 64 */
#define MANY_STRIDE	16u		/* tripwire i: [16 i, 16 i + 7] */
#define MANY_LEN	(256u * 1024u)	/* [160000, MANY_LEN) is far from all */
#define MANY_FAR	(MANY_LEN - 4096u)
#define FEW		16u
#define TIMED_CALLS	200u

static unsigned int rb_height(const struct rb_node *n)
{
	if (!n)
		return 0;
	return 1 + max(rb_height(n->rb_left), rb_height(n->rb_right));
}

/* Nanoseconds of the fastest of 5 runs of TIMED_CALLS misses far away. */
static u64 time_far_misses(struct kunit *test, struct clanq_kregion *r)
{
	u64 best = U64_MAX, ns;
	unsigned int run, i, n = 0;
	ktime_t t0;

	for (run = 0; run < 5; run++) {
		down_read(&r->revoke_sem);
		t0 = ktime_get();
		for (i = 0; i < TIMED_CALLS; i++)
			n += clanq_tw_fire(r, MANY_FAR, 64);
		ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
		up_read(&r->revoke_sem);
		best = min(best, ns);
		cond_resched();
	}
	KUNIT_EXPECT_EQ(test, n, 0);
	return best;
}

/*
 * Ten thousand tripwires armed on one region: a write in the middle
 * fires exactly the one it touches, a write across three fires those
 * three, writes in a gap or far from all fire none. The walk is not
 * linear: the tree stays balanced, and a miss far away costs about what
 * it cost with sixteen armed.
 */
static void ten_thousand_tripwires_on_one_region(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct clanq_ioc_ep_create c;
	struct clanq_kep *ep = tw_ep_create(test, t->e->exp, MANY_SLOTS, &c);
	unsigned long *fired = (unsigned long *)((u8 *)ep->shm->vaddr +
						 c.tw_fired);
	struct clanq_ep_counters *ctrs = (struct clanq_ep_counters *)
		((u8 *)ep->shm->vaddr + c.counters);
	u32 *bits = kunit_kcalloc(test, MANY, sizeof(*bits), GFP_KERNEL);
	u32 *ids = kunit_kcalloc(test, MANY, sizeof(*ids), GFP_KERNEL);
	u32 region = region_alloc(test, t->e->exp, MANY_LEN);
	struct clanq_kregion *r = region_pin(test, t->e->exp, region);
	u64 few_ns, many_ns;
	unsigned int i, height;
	struct tw tw;
	int err;

	KUNIT_ASSERT_NOT_NULL(test, bits);
	KUNIT_ASSERT_NOT_NULL(test, ids);
	for (i = 0; i < MANY; i++) {
		err = tw_create_on(t->e->exp, ep, region, i * MANY_STRIDE, 8,
				   i < FEW ? ONE_SHOT : 0, &tw);
		if (err == -ENOSPC && i >= 16)
			kunit_skip(test, "TW_CREATE %u: -ENOSPC, max_tripwires is below %u",
				   i, MANY);
		KUNIT_ASSERT_EQ_MSG(test, err, 0, "tripwire %u", i);
		ids[i] = tw.id;
		bits[i] = tw.bit;
		if (!(i % 256))
			cond_resched();
	}
	KUNIT_ASSERT_EQ(test, nr_armed(r), FEW);
	few_ns = time_far_misses(test, r);
	for (i = FEW; i < MANY; i++) {
		KUNIT_ASSERT_EQ_MSG(test, tw_ctl(t->e->exp, clanq_ioctl_tw_arm,
						 ids[i]), 0, "tripwire %u", i);
		if (!(i % 256))
			cond_resched();
	}
	KUNIT_ASSERT_EQ(test, nr_armed(r), MANY);
	height = rb_height(r->tw.armed.rb_root.rb_node);
	KUNIT_EXPECT_LE(test, height, 2 * ilog2(MANY + 1) + 2);
	many_ns = time_far_misses(test, r);
	kunit_info(test, "far miss: %llu ns with %u armed, %llu ns with %u; tree height %u",
		   few_ns / TIMED_CALLS, FEW, many_ns / TIMED_CALLS, MANY, height);
	KUNIT_EXPECT_LT_MSG(test, many_ns, 20 * few_ns + 200 * NSEC_PER_USEC,
			    "a miss costs %llu ns with %u armed, %llu ns with %u",
			    many_ns / TIMED_CALLS, MANY, few_ns / TIMED_CALLS, FEW);

	/* the middle one, exactly */
	KUNIT_ASSERT_EQ(test, write_to(t, r, 5000 * MANY_STRIDE, 8), 0);
	KUNIT_EXPECT_TRUE(test, bit_set(fired, bits[5000]));
	KUNIT_EXPECT_EQ(test, bitmap_weight(fired, MANY_SLOTS), 1);
	KUNIT_EXPECT_EQ(test, ctr(&ctrs->tw_fires), 1);
	KUNIT_EXPECT_EQ(test, nr_armed(r), MANY - 1);

	/* [79988, 80035]: 4999, 5001, 5002 (5000 went with its fire) */
	bitmap_zero(fired, MANY_SLOTS);
	KUNIT_ASSERT_EQ(test, write_to(t, r, 4999 * MANY_STRIDE + 4,
				       3 * MANY_STRIDE), 0);
	KUNIT_EXPECT_TRUE(test, bit_set(fired, bits[4999]));
	KUNIT_EXPECT_TRUE(test, bit_set(fired, bits[5001]));
	KUNIT_EXPECT_TRUE(test, bit_set(fired, bits[5002]));
	KUNIT_EXPECT_EQ(test, bitmap_weight(fired, MANY_SLOTS), 3);
	KUNIT_EXPECT_EQ(test, ctr(&ctrs->tw_fires), 4);

	/* the gap between two, and far from all */
	bitmap_zero(fired, MANY_SLOTS);
	KUNIT_ASSERT_EQ(test, write_to(t, r, 5100 * MANY_STRIDE + 8, 8), 0);
	KUNIT_ASSERT_EQ(test, write_to(t, r, MANY_FAR, 4096), 0);
	KUNIT_EXPECT_EQ(test, bitmap_weight(fired, MANY_SLOTS), 0);
	KUNIT_EXPECT_EQ(test, ctr(&ctrs->tw_fires), 4);
	KUNIT_EXPECT_EQ(test, nr_armed(r), MANY - 4);

	/* the first and the last */
	KUNIT_ASSERT_EQ(test, write_to(t, r, 0, 1), 0);
	KUNIT_ASSERT_EQ(test, write_to(t, r, (MANY - 1) * MANY_STRIDE + 7, 1), 0);
	KUNIT_EXPECT_TRUE(test, bit_set(fired, bits[0]));
	KUNIT_EXPECT_TRUE(test, bit_set(fired, bits[MANY - 1]));
	KUNIT_EXPECT_EQ(test, bitmap_weight(fired, MANY_SLOTS), 2);
}

/*
 * TW_WAIT.
 */

/*
 * The watched word unchanged: TW_WAIT sleeps its timeout out
 * (-ETIMEDOUT) and leaves the tripwire as it found it, disarmed (or
 * armed, if it was). The word already different: it returns 0 at once.
 * A write to it while it sleeps wakes it with 0.
 */
static void tw_wait_times_out_or_returns_at_once(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 0, 64, 0), tw2;
	struct tw_waiter *w;
	ktime_t t0;
	u64 word;

	t0 = ktime_get();
	KUNIT_EXPECT_EQ(test, tw_wait(t->e->exp, tw.id, 8, 0,
				      5 * NSEC_PER_MSEC), -ETIMEDOUT);
	KUNIT_EXPECT_GE(test, ktime_to_ns(ktime_sub(ktime_get(), t0)),
			5 * NSEC_PER_MSEC);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	KUNIT_EXPECT_FALSE(test, bit_set(t->armed, 0));
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);

	/* armed before: still armed after */
	KUNIT_EXPECT_EQ(test, tw_arm(t, tw.id), 0);
	KUNIT_EXPECT_EQ(test, tw_wait(t->e->exp, tw.id, 56, 0,
				      5 * NSEC_PER_MSEC), -ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);
	KUNIT_EXPECT_EQ(test, tw_disarm(t, tw.id), 0);

	/* the word is not what the caller saw: no sleep (not 20 s) */
	t0 = ktime_get();
	KUNIT_EXPECT_EQ(test, tw_wait(t->e->exp, tw.id, 8, 1,
				      20ull * NSEC_PER_SEC), 0);
	KUNIT_EXPECT_LT(test, ktime_to_ns(ktime_sub(ktime_get(), t0)),
			5ull * NSEC_PER_SEC);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);

	/* a write wakes a sleeper: 0, the tripwire fired once */
	tw2 = tw_new(test, t, 2048, 8, 0);
	memcpy(&word, t->s.bytes, sizeof(word));
	KUNIT_ASSERT_NE(test, word, 0);
	w = tw_waiter_start(test, t->e->exp, tw2.id, 2048, 0, 0,
			    20ull * NSEC_PER_SEC);
	await_armed(test, t->d.r, 1);
	write_at(test, t, 2048, 8);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&w->done, 10 * HZ));
	KUNIT_EXPECT_EQ(test, w->ret, 0);
	KUNIT_EXPECT_TRUE(test, is_fired(t, tw2.bit));
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
}

/* clanq_tw_arm_vec() on @n (at most 4) entries, as EVQ_WAIT calls it. */
static int arm_vec(struct clanq_ctx *ctx, const struct clanq_evq_arm *v, u32 n)
{
	struct clanq_ktw *tws[4];

	return clanq_tw_arm_vec(ctx, v, n, tws);
}

/*
 * EVQ_WAIT's arms (CLANQ_EVQ_WAIT_ARM): every listed tripwire is armed
 * (again: no harm), the words that moved are counted, a write after the
 * arming fires, the listed flushes are made first; a bad entry anywhere
 * in the list (flags, id, another context's tripwire, a destroyed one,
 * a word outside or unaligned, a flush AP_FLUSH would refuse) fails the
 * call with nothing armed.
 */
static void arm_vec_arms_compares_and_refuses_garbage(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 0, 64, 0), tw2 = tw_new(test, t, 2048, 64, 0);
	struct clanq_evq_arm v[2] = {
		{ .id = tw.id, .off = 8, .val = 0 },
		{ .id = tw2.id, .off = 2048, .val = 0 },
	}, good = v[0], flush = {
		.id = t->d.ap, .flags = CLANQ_EVQ_ARM_FLUSH, .off = 8, .val = 8,
	};
	static const u64 bad_offs[] = { 4, 12, 56 + 4, 64, 2048, ~7ull, ~0ull };
	unsigned int i;

	/* the words are zero: nothing moved, both armed */
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), 0);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 2);
	KUNIT_EXPECT_TRUE(test, bit_set(t->armed, 0));
	KUNIT_EXPECT_TRUE(test, bit_set(t->armed, 2048 >> CLANQ_TW_BLOCK_SHIFT));
	/* armed again, no harm; a word the caller saw otherwise counts */
	v[0].val = 1;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), 1);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 2);
	/* a write after the arming fires its one-shot tripwire */
	write_at(test, t, 2048, 8);
	KUNIT_EXPECT_TRUE(test, is_fired(t, tw2.bit));
	KUNIT_EXPECT_FALSE(test, is_fired(t, tw.bit));
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);
	/* and that word moved now: counted, re-armed */
	v[0].val = 0;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), 1);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 2);
	/* a flush of the requester's (its context) fires what is armed there */
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->ctx, &flush, 1), 0);
	KUNIT_EXPECT_TRUE(test, is_fired(t, tw.bit));
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 1);
	KUNIT_EXPECT_EQ(test, tw_disarm(t, tw2.id), 0);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);

	/* garbage after a good entry: refused, nothing armed */
	v[0] = good;
	for (i = 0; i < ARRAY_SIZE(bad_offs); i++) {
		v[1] = good;
		v[1].off = bad_offs[i];
		KUNIT_EXPECT_EQ_MSG(test, arm_vec(t->e->exp, v, 2), -EINVAL,
				    "word at %llu", bad_offs[i]);
	}
	v[1] = good;
	v[1].flags = 0x2;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), -EINVAL);
	v[1].flags = ~0u;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), -EINVAL);
	v[1] = good;
	v[1].id = 0;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), -ENOENT);
	v[1].id = U32_MAX;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), -ENOENT);
	/* the exporter's tripwire, named in the requester's context */
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->ctx, &good, 1), -ENOENT);
	/* flushes as AP_FLUSH refuses them: no aperture, outside it */
	v[1] = flush;
	v[1].id = U32_MAX;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), -ENOENT);
	v[1] = flush;
	v[1].off = REGION_LEN;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->ctx, &v[1], 1), -ERANGE);
	v[1].off = 8;
	v[1].val = ~0ull;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->ctx, &v[1], 1), -ERANGE);
	/* a destroyed tripwire */
	KUNIT_EXPECT_EQ(test, tw_destroy(t, tw2.id), 0);
	v[1] = good;
	v[1].id = tw2.id;
	v[1].off = 2048;
	KUNIT_EXPECT_EQ(test, arm_vec(t->e->exp, v, 2), -ENOENT);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	KUNIT_EXPECT_FALSE(test, bit_set(t->armed, 0));
}

/*
 * Garbage into the handlers.
 */

/*
 * TW_CREATE refuses an endpoint or region of another context of the
 * NIC, or of none, a
 * length below CLANQ_TW_MIN_LEN and a range outside the region or
 * overflowing; a refused create takes no bit, no id, no reference.
 */
static void tw_create_refuses_garbage(struct kunit *test)
{
	struct tw_env *t = test->priv;
	struct clanq_ctx *other = ctx_add(test, t->e->peer);
	struct clanq_ioc_ep_create c;
	struct clanq_kep *foreign_ep = tw_ep_create(test, other, 64, &c);
	u32 foreign_rg = region_alloc(test, other, PAGE_SIZE);
	struct clanq_ctx *x = t->e->exp;
	unsigned int ep_refs = refcount_read(&t->ep->ref);
	unsigned int r_refs = kref_read(&t->d.r->ref);
	u32 rg = t->d.region;
	struct tw tw;

	KUNIT_EXPECT_EQ(test, tw_create_on(x, foreign_ep, rg, 0, 8, 0, &tw),
			-ENOENT);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, foreign_rg, 0, 8, 0, &tw),
			-ENOENT);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, 0, 0, 8, 0, &tw), -ENOENT);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, U32_MAX, 0, 8, 0, &tw),
			-ENOENT);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, rg, 0, 0, 0, &tw), -EINVAL);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, rg, 0, 7, 0, &tw), -EINVAL);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, rg, U64_MAX - 3, 8, 0, &tw),
			-ERANGE);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, rg, 8, U64_MAX - 3, 0, &tw),
			-ERANGE);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, rg, REGION_LEN - 7, 8, 0,
					   &tw), -ERANGE);
	KUNIT_EXPECT_EQ(test, tw_create_on(x, t->ep, rg, 0, REGION_LEN + 1, 0,
					   &tw), -ERANGE);
	KUNIT_EXPECT_EQ(test, x->nr_tws, 0);
	KUNIT_EXPECT_EQ(test, refcount_read(&t->ep->ref), ep_refs);
	KUNIT_EXPECT_EQ(test, kref_read(&t->d.r->ref), r_refs);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);

	/* the last 8 bytes are inside; the first bit is still free */
	tw = tw_new(test, t, REGION_LEN - 8, 8, ONE_SHOT);
	KUNIT_EXPECT_EQ(test, tw.bit, 0);
	tw = tw_new(test, t, 0, REGION_LEN, 0);
	KUNIT_EXPECT_EQ(test, tw.bit, 1);
}

/*
 * TW_ARM, _DISARM, _DESTROY and _WAIT refuse ids of no tripwire of the
 * context; TW_WAIT refuses a word that is unaligned, outside the
 * tripwire, or whose offset overflows, and arms nothing for it.
 */
static void tw_commands_refuse_garbage(struct kunit *test)
{
	static const u32 bad_ids[] = { 0, 2, 12345, S32_MAX, U32_MAX };
	static const u64 bad_offs[] = {
		1028,		/* unaligned */
		1032 + 4,	/* unaligned */
		1016,		/* before the tripwire */
		1024 + 32,	/* its last 8 bytes start at 1048 */
		1052,		/* unaligned, and reaching past it */
		4096,		/* far outside */
		U64_MAX - 7,	/* end overflows */
		U64_MAX - 3,
	};
	struct tw_env *t = test->priv;
	struct tw tw = tw_new(test, t, 1024, 32, 0);	/* [1024, 1055] */
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad_ids); i++) {
		u32 id = bad_ids[i];

		KUNIT_EXPECT_EQ_MSG(test, tw_arm(t, id), -ENOENT, "id %u", id);
		KUNIT_EXPECT_EQ_MSG(test, tw_disarm(t, id), -ENOENT, "id %u", id);
		KUNIT_EXPECT_EQ_MSG(test, tw_destroy(t, id), -ENOENT, "id %u", id);
		KUNIT_EXPECT_EQ_MSG(test, tw_wait(t->e->exp, id, 1024, 0, 1000),
				    -ENOENT, "id %u", id);
	}
	/* another context has no tripwire of this one's */
	KUNIT_EXPECT_EQ(test, tw_ctl(t->e->ctx, clanq_ioctl_tw_arm, tw.id),
			-ENOENT);
	KUNIT_EXPECT_EQ(test, tw_wait(t->e->ctx, tw.id, 1024, 0, 1000), -ENOENT);

	for (i = 0; i < ARRAY_SIZE(bad_offs); i++)
		KUNIT_EXPECT_EQ_MSG(test, tw_wait(t->e->exp, tw.id, bad_offs[i],
						  0, 1000), -EINVAL,
				    "off %llu", bad_offs[i]);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	/* its first and last words are fine (and time out at once) */
	KUNIT_EXPECT_EQ(test, tw_wait(t->e->exp, tw.id, 1024, 0, 1000),
			-ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, tw_wait(t->e->exp, tw.id, 1048, 0, 1000),
			-ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, nr_armed(t->d.r), 0);
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);
}

/*
 * AP_FLUSH refuses an aperture that is not the context's, a range
 * outside the aperture's window (or overflowing), and an aperture
 * imported without CLANQ_RIGHT_WRITE (-EACCES); none of them fires or
 * counts anything. An empty flush fires nothing.
 */
static void ap_flush_refuses_garbage(struct kunit *test)
{
	static const struct { u64 off, len; } outside[] = {
		{ 4096, 1 }, { 4095, 2 }, { 0, 4097 }, { U64_MAX, 2 },
		{ 1, U64_MAX }, { U64_MAX, U64_MAX },
	};
	struct tw_env *t = test->priv;
	struct clanq_nic_stats *st = &t->e->nic->stats;
	struct clanq_ioc_ap_flush f = { .ap = t->d.ap, .len = 8 };
	u32 win = ap_import(test, t->e, t->d.region, t->d.key, 4096, 4096,
			    CLANQ_RIGHT_WRITE);
	u32 ro = ap_import(test, t->e, t->d.region, t->d.key, 0, REGION_LEN,
			   CLANQ_RIGHT_READ);
	s64 flushes0;
	unsigned int i;
	u32 fired;

	tw_new(test, t, 0, REGION_LEN, PERSISTENT);
	flushes0 = nic_stat(&st->tw_flushes);
	KUNIT_EXPECT_EQ(test, ap_flush(t, 0, 0, 8, &fired), -ENOENT);
	KUNIT_EXPECT_EQ(test, ap_flush(t, U32_MAX, 0, 8, &fired), -ENOENT);
	/* the exporter has no aperture of the requester's */
	KUNIT_EXPECT_EQ(test, clanq_ioctl_ap_flush(t->e->exp, &f), -ENOENT);
	for (i = 0; i < ARRAY_SIZE(outside); i++)
		KUNIT_EXPECT_EQ_MSG(test, ap_flush(t, win, outside[i].off,
						   outside[i].len, &fired),
				    -ERANGE, "[%llu, +%llu)", outside[i].off,
				    outside[i].len);
	KUNIT_EXPECT_EQ(test, ap_flush(t, ro, 0, 8, &fired), -EACCES);
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 0);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->tw_flushes), flushes0);

	/* empty: nothing fired, and no flush counted */
	KUNIT_EXPECT_EQ(test, ap_flush(t, win, 4096, 0, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 0);
	KUNIT_EXPECT_EQ(test, nr_fired(t), 0);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->tw_flushes), flushes0);
	/* the window's last byte is inside */
	KUNIT_EXPECT_EQ(test, ap_flush(t, win, 4095, 1, &fired), 0);
	KUNIT_EXPECT_EQ(test, fired, 1);
	KUNIT_EXPECT_EQ(test, ctr(&t->counters->tw_fires), 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->tw_flushes), flushes0 + 1);
}

static struct kunit_case clanq_tripwire_cases[] = {
	KUNIT_CASE(write_fires_at_every_edge),
	KUNIT_CASE(an_atomic_fires_its_word_and_a_read_fires_nothing),
	KUNIT_CASE(flush_fires_at_every_edge),
	KUNIT_CASE(a_write_fires_every_tripwire_it_overlaps),
	KUNIT_CASE(a_write_inside_a_long_tripwire_fires_it),
	KUNIT_CASE(a_flush_counts_once_per_endpoint),
	KUNIT_CASE(a_fire_raises_a_tripwire_event),
	KUNIT_CASE(one_shot_fires_once_persistent_always),
	KUNIT_CASE(destroy_while_armed_stops_fires_and_frees_the_bit),
	KUNIT_CASE(endpoint_destroy_kills_its_tripwires),
	KUNIT_CASE(hostile_fired_bitmap_only_gets_the_right_bit_set),
	KUNIT_CASE(hostile_armed_bitmap_changes_no_decision),
	KUNIT_CASE(armed_bitmap_covers_exactly_the_armed_blocks),
	KUNIT_CASE(region_free_kills_its_tripwires),
	KUNIT_CASE_SLOW(ten_thousand_tripwires_on_one_region),
	KUNIT_CASE(tw_wait_times_out_or_returns_at_once),
	KUNIT_CASE(arm_vec_arms_compares_and_refuses_garbage),
	KUNIT_CASE(tw_create_refuses_garbage),
	KUNIT_CASE(tw_commands_refuse_garbage),
	KUNIT_CASE(ap_flush_refuses_garbage),
	{}
};

static struct kunit_suite clanq_tripwire_suite = {
	.name = "clanq_tripwire",
	.init = tw_test_init,
	.test_cases = clanq_tripwire_cases,
};

kunit_test_suites(&clanq_tripwire_suite);
