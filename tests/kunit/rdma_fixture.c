// SPDX-License-Identifier: GPL-2.0
/*
 * The fixture the clanq_rdma_* suites share: see rdma_fixture.h.
 */
#include <kunit/test.h>
#include <linux/highmem.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "rdma_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

#define TEST_NIC_INDEX	9
#define TEST_NODE	0x7e59u
#define EXPORTER_NODE	0u	/* clanq0 of the loaded module */

/* rdma_max_xfer for the tests that do not split: nothing reaches it */
#define NO_SPLIT_XFER	(1024u * 1024u)

KUNIT_DEFINE_ACTION_WRAPPER(region_put_action, clanq_kregion_put,
			    struct clanq_kregion *);
KUNIT_DEFINE_ACTION_WRAPPER(region_mem_put_action, clanq_kregion_mem_put,
			    struct clanq_kregion *);
KUNIT_DEFINE_ACTION_WRAPPER(ap_put_action, clanq_kap_put, struct clanq_kap *);
KUNIT_DEFINE_ACTION_WRAPPER(vfree_action, vfree, const void *);

/*
 * Each test: a fresh NIC and a context on it (kunit_util.h), an exporter
 * context on clanq0, and an rdma_max_xfer no test message reaches.
 * Cleanup puts the exporter first (its regions are revoked while the
 * requester's apertures still hold them), then the requester, then the
 * NIC.
 */
int rdma_test_init(struct kunit *test)
{
	struct rdma_env *e = kunit_kzalloc(test, sizeof(*e), GFP_KERNEL);
	struct nic_fixture *f;

	KUNIT_ASSERT_NOT_NULL(test, e);
	nic_fixture_init(test, TEST_NIC_INDEX, TEST_NODE);
	f = test->priv;
	e->nic = &f->nic;
	e->ctx = f->ctx;
	e->peer = clanq_nic_by_node(EXPORTER_NODE);
	KUNIT_ASSERT_NOT_NULL_MSG(test, e->peer,
				  "no clanq NIC has node %u: load clanq.ko with node_base=0",
				  EXPORTER_NODE);
	e->exp = ctx_add(test, e->peer);
	max_xfer_set(test, NO_SPLIT_XFER);
	test->priv = e;
	return 0;
}

/* A zeroed buffer, freed at cleanup. */
static u8 *test_buf(struct kunit *test, size_t len)
{
	u8 *p = vzalloc(len);

	KUNIT_ASSERT_NOT_NULL(test, p);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, vfree_action, p),
			0);
	return p;
}

/* Bytes that say where they are: a shifted copy never matches. */
static void pattern_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (u8)((i ^ (i >> 8) ^ (i >> 16)) * 31 + seed);
}

/*
 * Regions.
 */

/* An allocated region of @ctx; @ctx's release frees it if the test does not. */
u32 region_alloc(struct kunit *test, struct clanq_ctx *ctx, u64 size)
{
	struct clanq_ioc_region_create c = { .size = size };

	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_create(ctx, &c), 0);
	KUNIT_ASSERT_NE(test, c.id, 0);
	return c.id;
}

void region_free(struct kunit *test, struct clanq_ctx *ctx, u32 id)
{
	struct clanq_ioc_region_free fr = { .id = id };

	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_free(ctx, &fr), 0);
}

/*
 * Region @id of @ctx, referenced until cleanup, and its memory held as
 * an owner's mapping would hold it: its pages stay readable after the
 * region is freed (importers hold no memory).
 */
struct clanq_kregion *region_pin(struct kunit *test,
				 struct clanq_ctx *ctx, u32 id)
{
	struct clanq_kregion *r = clanq_kregion_lookup_owned(ctx, id);

	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, region_put_action,
							r), 0);
	KUNIT_ASSERT_TRUE(test, clanq_kregion_mem_get(r));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, region_mem_put_action,
							r), 0);
	return r;
}

/* Copy @len bytes to (@write) or from region @r at @off. */
void region_io(struct kunit *test, struct clanq_kregion *r, u64 off,
	       u8 *buf, u64 len, bool write)
{
	u64 a, end;
	size_t po, n;
	u8 *p;

	KUNIT_ASSERT_FALSE(test, check_add_overflow(off, len, &end));
	KUNIT_ASSERT_LE(test, end, r->len);
	while (len) {
		a = r->first + off;
		po = offset_in_page(a);
		n = min_t(u64, len, PAGE_SIZE - po);
		p = kmap_local_page(r->pages[a >> PAGE_SHIFT]);
		if (write)
			memcpy(p + po, buf, n);
		else
			memcpy(buf, p + po, n);
		kunmap_local(p);
		off += n;
		buf += n;
		len -= n;
	}
}

/*
 * Offset of the first byte where region @r differs from @want (r->len
 * bytes), or INTACT.
 */
long region_diff(struct kunit *test, struct clanq_kregion *r,
		 const u8 *want)
{
	u8 *got = test_buf(test, r->len);
	long at;

	region_io(test, r, 0, got, r->len, false);
	at = first_diff(got, want, r->len);
	kunit_release_action(test, vfree_action, got);
	return at;
}

struct src src_create(struct kunit *test, struct rdma_env *e, u64 len,
		      u8 seed)
{
	struct src s;

	s.id = region_alloc(test, e->ctx, len);
	s.r = region_pin(test, e->ctx, s.id);
	s.bytes = test_buf(test, len);
	pattern_fill(s.bytes, len, seed);
	region_io(test, s.r, 0, s.bytes, len, true);
	return s;
}

/* With both rights, an import may do atomics too (CLANQ_AP_ATOMIC). */
u32 ap_import(struct kunit *test, struct rdma_env *e, u32 region,
	      u64 key, u64 off, u64 len, u32 rights)
{
	return ap_import_flags(test, e, region, key, off, len, rights,
			       rights == CLANQ_RIGHTS_ALL ? CLANQ_AP_ATOMIC : 0);
}

u32 ap_import_flags(struct kunit *test, struct rdma_env *e, u32 region,
		    u64 key, u64 off, u64 len, u32 rights, u32 flags)
{
	struct clanq_ioc_ap_import im = {
		.region = { .node = e->peer->node, .id = region },
		.key = key,
		.offset = off,
		.len = len,
		.rights = rights,
		.flags = flags,
	};

	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_import(e->ctx, &im), 0);
	KUNIT_ASSERT_NE(test, im.id, 0);
	return im.id;
}

struct dst dst_create(struct kunit *test, struct rdma_env *e, u64 size,
		      u64 ap_off, u64 ap_len, u32 rights)
{
	struct clanq_ioc_region_export ex = { .rights = CLANQ_RIGHTS_ALL };
	struct dst d;

	d.region = region_alloc(test, e->exp, size);
	d.r = region_pin(test, e->exp, d.region);
	ex.id = d.region;
	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_export(e->exp, &ex), 0);
	d.key = ex.key;
	d.ap = ap_import(test, e, d.region, ex.key, ap_off, ap_len, rights);
	d.ap_off = ap_off;
	d.want = test_buf(test, size);
	return d;
}

/* What a completed write of @req from @s puts into @d. */
void dst_expect(struct dst *d, const struct src *s,
		const struct clanq_rdma_req *req, u64 len)
{
	memcpy(d->want + d->ap_off + req->dst_off, s->bytes + req->src_off, len);
}

void ap_close(struct kunit *test, struct clanq_ctx *ctx, u32 id)
{
	struct clanq_ioc_ap_close c = { .id = id };

	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_close(ctx, &c), 0);
}

/*
 * Endpoints, as the application sees them.
 */
struct uep *rdma_uep_create(struct kunit *test, struct clanq_ctx *ctx,
			    u32 rq_slots, u32 cq_slots)
{
	struct uep *u = kunit_kzalloc(test, sizeof(*u), GFP_KERNEL);
	struct clanq_kep *ep;
	size_t size;

	KUNIT_ASSERT_NOT_NULL(test, u);
	mutex_lock(&ctx->lock);
	ep = clanq_kep_create(ctx, 8, rq_slots, cq_slots,
			      CLANQ_DEFAULT_TW_SLOTS, 0);
	if (!IS_ERR(ep))
		clanq_kep_describe(ep, &u->c);
	mutex_unlock(&ctx->lock);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ep);
	u->ep = ep;
	u->seg = ep->shm->vaddr;
	size = ep->shm->size;
	KUNIT_ASSERT_EQ(test, u->c.mmap_size, size);
	KUNIT_ASSERT_EQ(test, u->c.rq.nr_slots, rq_slots);
	KUNIT_ASSERT_EQ(test, u->c.cq.nr_slots, cq_slots);
	KUNIT_ASSERT_EQ(test, u->c.rq.slot_size, sizeof(struct clanq_rdma_req));
	KUNIT_ASSERT_EQ(test, u->c.cq.slot_size,
			sizeof(struct clanq_rdma_comp));
	KUNIT_ASSERT_EQ(test, clanq_q_init(&u->rq, u->seg, size, &u->c.rq), 0);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&u->cq, u->seg, size, &u->c.cq), 0);
	KUNIT_ASSERT_LE(test, (size_t)u->c.need_wakeup + sizeof(u32), size);
	KUNIT_ASSERT_LE(test, u->c.counters + sizeof(*u->counters), size);
	u->need_wakeup = (u32 *)(u->seg + u->c.need_wakeup);
	u->counters = (struct clanq_ep_counters *)(u->seg + u->c.counters);
	return u;
}

struct clanq_rdma_req mkreq(u32 src, u32 ap, u64 src_off, u64 dst_off,
			    u64 len, u64 cookie, u32 flags)
{
	return (struct clanq_rdma_req){
		.src_region = src, .dst_ap = ap, .src_off = src_off,
		.dst_off = dst_off, .len = len, .cookie = cookie,
		.flags = flags,
	};
}

void post(struct kunit *test, struct uep *u,
	  const struct clanq_rdma_req *req)
{
	KUNIT_ASSERT_TRUE_MSG(test, clanq_q_put(&u->rq, req),
			      "request queue full at cookie %#llx", req->cookie);
}

void kick(struct kunit *test, struct uep *u)
{
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(u->ep), 0);
}

/* Completions published and not yet taken (reads the engine's index). */
u32 unread(struct uep *u)
{
	/* (C) of queue.h: the slots it covers are written */
	u32 prod = smp_load_acquire(u->cq.prod);

	return (prod - u->cq.own) & u->cq.mask;
}

/* Take the next completion, which must be (@cookie, @len, @status). */
void expect_comp(struct kunit *test, struct uep *u, u64 cookie,
		 u64 len, int status)
{
	struct clanq_rdma_comp c;

	KUNIT_ASSERT_TRUE_MSG(test, clanq_q_get(&u->cq, &c),
			      "no completion, expected cookie %#llx", cookie);
	KUNIT_EXPECT_EQ_MSG(test, c.cookie, cookie, "completion out of order");
	KUNIT_EXPECT_EQ_MSG(test, c.len, len, "cookie %#llx", cookie);
	KUNIT_EXPECT_EQ_MSG(test, c.status, status, "cookie %#llx", cookie);
	KUNIT_EXPECT_EQ(test, c.reserved0, 0);
	KUNIT_EXPECT_EQ(test, c.value, 0);
}

u64 ctr(const __u64 *field)
{
	return READ_ONCE(*field);
}

struct clanq_kep *step(struct rdma_env *e)
{
	return clanq_engine_step(e->nic);
}

/*
 * Step until no queue is active, at most @max turns; returns how many.
 * A queue whose turn ended on a LAST goes to the back of the line, and
 * is let go only by a turn that finds nothing to take: such turns are
 * what callers expect here, so they check that no completion appeared.
 */
unsigned int settle(struct kunit *test, struct rdma_env *e,
		    unsigned int max)
{
	unsigned int n = 0;

	while (step(e)) {
		n++;
		KUNIT_ASSERT_LE_MSG(test, n, max,
				    "engine still has active queues after %u turns",
				    max);
	}
	return n;
}

/* Pin aperture @id of @ctx until cleanup. */
struct clanq_kap *ap_pin(struct kunit *test, struct clanq_ctx *ctx,
			 u32 id)
{
	struct clanq_kap *ap = clanq_kap_lookup(ctx, id);

	KUNIT_ASSERT_NOT_NULL(test, ap);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, ap_put_action,
							ap), 0);
	return ap;
}
