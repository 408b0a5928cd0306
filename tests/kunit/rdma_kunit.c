// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the RDMA engine (driver/rdma.c): request validation,
 * round-robin turns, logical messages, splitting at rdma_max_xfer, the
 * doorbell protocol, a hostile application side, and revocation while a
 * request is in progress.
 *
 * Every test gets a NIC of its own, with no engine thread: the test steps
 * the engine by hand (clanq_engine_step(), one turn per call), so
 * what each turn did is observed exactly. The test plays the application
 * on its endpoints' segments, attached with the layout clanq_kep_describe()
 * publishes: producer of the request queue, consumer of the completion
 * queue (include/clanq/queue.h), as libclanq is. What the engine did is
 * judged from the segment, the NIC's counters and the destination bytes.
 *
 * Destinations. An import goes through the wire, which finds the
 * exporter's NIC by node among the module's NICs, and a KUnit NIC is not
 * one of them. So every destination region belongs to a context on the
 * module's own clanq0 (node 0, as the test VM loads clanq.ko): a peer
 * node, and the write crosses the loop wire as it does between
 * /dev/clanq1 and /dev/clanq0. clanq0's engine thread never sees the test
 * NIC's endpoints; the test's context there is gone when the test is.
 *
 * Region bytes are read and written through the regions' pages
 * (kmap_local_page()), which a reference keeps even once a region is
 * freed: so the tests can also show that nothing was written after a
 * revocation.
 */
#include <kunit/test.h>
#include <linux/highmem.h>
#include <linux/kref.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

MODULE_IMPORT_NS(CLANQ_KUNIT);

#define TEST_NIC_INDEX	9
#define TEST_NODE	0x7e59u
#define EXPORTER_NODE	0u	/* clanq0 of the loaded module */

/* The engine's per-turn request cap (CLANQ_RDMA_TURN_REQS in rdma.c). */
#define TURN_REQS	64
/* rdma_max_xfer for the tests that do not split: nothing reaches it */
#define NO_SPLIT_XFER	(1024u * 1024u)
/* rdma_max_xfer for the tests that split */
#define SPLIT_XFER	4096u

#define COOKIE(i)	(0xc00c1e0000000000ull | (u64)(i))
#define SIG_LAST	(CLANQ_RDMA_SIGNAL | CLANQ_RDMA_LAST)

KUNIT_DEFINE_ACTION_WRAPPER(region_put_action, clanq_kregion_put,
			    struct clanq_kregion *);
KUNIT_DEFINE_ACTION_WRAPPER(region_mem_put_action, clanq_kregion_mem_put,
			    struct clanq_kregion *);
KUNIT_DEFINE_ACTION_WRAPPER(ap_put_action, clanq_kap_put, struct clanq_kap *);
KUNIT_DEFINE_ACTION_WRAPPER(vfree_action, vfree, const void *);

/* The test NIC, its requester context, and the exporter on clanq0. */
struct rdma_env {
	struct clanq_nic *nic;	/* stepped by hand */
	struct clanq_ctx *ctx;	/* the requester */
	struct clanq_nic *peer;	/* clanq0 */
	struct clanq_ctx *exp;	/* the exporter of every destination */
};

static void max_xfer_restore(void *old)
{
	WRITE_ONCE(clanq_rdma_max_xfer, (unsigned int)(uintptr_t)old);
}

/* Set the module parameter rdma_max_xfer until the test ends. */
static void max_xfer_set(struct kunit *test, unsigned int bytes)
{
	void *old = (void *)(uintptr_t)READ_ONCE(clanq_rdma_max_xfer);

	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, max_xfer_restore,
							old), 0);
	WRITE_ONCE(clanq_rdma_max_xfer, bytes);
}

/*
 * Each test: a fresh NIC and a context on it (kunit_util.h), an exporter
 * context on clanq0, and an rdma_max_xfer no test message reaches.
 * Cleanup puts the exporter first (its regions are revoked while the
 * requester's apertures still hold them), then the requester, then the
 * NIC.
 */
static int rdma_test_init(struct kunit *test)
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
static u32 region_alloc(struct kunit *test, struct clanq_ctx *ctx, u64 size)
{
	struct clanq_ioc_region_create c = { .size = size };

	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_create(ctx, &c), 0);
	KUNIT_ASSERT_NE(test, c.id, 0);
	return c.id;
}

static void region_free(struct kunit *test, struct clanq_ctx *ctx, u32 id)
{
	struct clanq_ioc_region_free fr = { .id = id };

	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_free(ctx, &fr), 0);
}

/*
 * Region @id of @ctx, referenced until cleanup, and its memory held as
 * an owner's mapping would hold it: its pages stay readable after the
 * region is freed (importers hold no memory).
 */
static struct clanq_kregion *region_pin(struct kunit *test,
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
static void region_io(struct kunit *test, struct clanq_kregion *r, u64 off,
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
static long region_diff(struct kunit *test, struct clanq_kregion *r,
			const u8 *want)
{
	u8 *got = test_buf(test, r->len);
	long at;

	region_io(test, r, 0, got, r->len, false);
	at = first_diff(got, want, r->len);
	kunit_release_action(test, vfree_action, got);
	return at;
}

/* A source region of the requester: @len bytes of pattern @seed. */
struct src {
	u32 id;
	struct clanq_kregion *r;	/* pinned */
	u8 *bytes;		/* what it holds */
};

static struct src src_create(struct kunit *test, struct rdma_env *e, u64 len,
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

/*
 * A destination: a region of the exporter, exported, and the requester's
 * aperture onto [ap_off, ap_off + ap_len) of it. @want is what the test
 * expects the whole region to hold (zero until a write completes).
 */
struct dst {
	u32 region;		/* the exporter's id */
	struct clanq_kregion *r;	/* pinned: its pages, even once freed */
	u64 key;		/* its export key */
	u32 ap;			/* the requester's aperture */
	u64 ap_off;
	u8 *want;
};

static u32 ap_import(struct kunit *test, struct rdma_env *e, u32 region,
		     u64 key, u64 off, u64 len, u32 rights)
{
	struct clanq_ioc_ap_import im = {
		.region = { .node = e->peer->node, .id = region },
		.key = key,
		.offset = off,
		.len = len,
		.rights = rights,
	};

	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_import(e->ctx, &im), 0);
	KUNIT_ASSERT_NE(test, im.id, 0);
	return im.id;
}

static struct dst dst_create(struct kunit *test, struct rdma_env *e, u64 size,
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
static void dst_expect(struct dst *d, const struct src *s,
		       const struct clanq_rdma_req *req, u64 len)
{
	memcpy(d->want + d->ap_off + req->dst_off, s->bytes + req->src_off, len);
}

static void ap_close(struct kunit *test, struct clanq_ctx *ctx, u32 id)
{
	struct clanq_ioc_ap_close c = { .id = id };

	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_close(ctx, &c), 0);
}

/*
 * Endpoints, as the application sees them.
 */
struct uep {
	struct clanq_kep *ep;
	struct clanq_ioc_ep_create c;	/* what EP_CREATE would return */
	u8 *seg;
	struct clanq_queue rq;		/* requests: the application produces */
	struct clanq_queue cq;		/* completions: it consumes */
	u32 *need_wakeup;
	struct clanq_ep_counters *counters;
};

static struct uep *uep_create(struct kunit *test, struct clanq_ctx *ctx,
			      u32 rq_slots, u32 cq_slots)
{
	struct uep *u = kunit_kzalloc(test, sizeof(*u), GFP_KERNEL);
	struct clanq_kep *ep;
	size_t size;

	KUNIT_ASSERT_NOT_NULL(test, u);
	mutex_lock(&ctx->lock);
	ep = clanq_kep_create(ctx, 8, rq_slots, cq_slots);
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

static struct clanq_rdma_req mkreq(u32 src, u32 ap, u64 src_off, u64 dst_off,
				   u64 len, u64 cookie, u32 flags)
{
	return (struct clanq_rdma_req){
		.src_region = src, .dst_ap = ap, .src_off = src_off,
		.dst_off = dst_off, .len = len, .cookie = cookie,
		.flags = flags,
	};
}

static void post(struct kunit *test, struct uep *u,
		 const struct clanq_rdma_req *req)
{
	KUNIT_ASSERT_TRUE_MSG(test, clanq_q_put(&u->rq, req),
			      "request queue full at cookie %#llx", req->cookie);
}

static void kick(struct kunit *test, struct uep *u)
{
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(u->ep), 0);
}

/* Completions published and not yet taken (reads the engine's index). */
static u32 unread(struct uep *u)
{
	/* (C) of queue.h: the slots it covers are written */
	u32 prod = smp_load_acquire(u->cq.prod);

	return (prod - u->cq.own) & u->cq.mask;
}

/* Take the next completion, which must be (@cookie, @len, @status). */
static void expect_comp(struct kunit *test, struct uep *u, u64 cookie,
			u64 len, int status)
{
	struct clanq_rdma_comp c;

	KUNIT_ASSERT_TRUE_MSG(test, clanq_q_get(&u->cq, &c),
			      "no completion, expected cookie %#llx", cookie);
	KUNIT_EXPECT_EQ_MSG(test, c.cookie, cookie, "completion out of order");
	KUNIT_EXPECT_EQ_MSG(test, c.len, len, "cookie %#llx", cookie);
	KUNIT_EXPECT_EQ_MSG(test, c.status, status, "cookie %#llx", cookie);
	KUNIT_EXPECT_EQ(test, c.reserved0, 0);
	KUNIT_EXPECT_EQ(test, c.reserved, 0);
}

static u64 ctr(const __u64 *field)
{
	return READ_ONCE(*field);
}

static struct clanq_kep *step(struct rdma_env *e)
{
	return clanq_engine_step(e->nic);
}

/*
 * Step until no queue is active, at most @max turns; returns how many.
 * A queue whose turn ended on a LAST goes to the back of the line, and
 * is let go only by a turn that finds nothing to take: such turns are
 * what callers expect here, so they check that no completion appeared.
 */
static unsigned int settle(struct kunit *test, struct rdma_env *e,
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

/*
 * 1. Validation.
 */

#define V_SRC_LEN	9000u	/* ends mid-page */
#define V_DST_LEN	16384u
#define V_AP_OFF	1024u
#define V_AP_LEN	4096u	/* well inside its region */

/* Objects whose references a validation must leave as it found them. */
enum {
	V_SRC, V_SRC_B, V_AP_W, V_AP_RO, V_AP_REVOKED, V_AP_CLOSED, V_DST,
	V_DST_REVOKED, V_NR
};

struct vfix {
	struct clanq_ctx *ctx;
	struct src src;			/* the requester's */
	u32 src_b;			/* a region of another context */
	u32 src_freed;			/* the requester's, freed */
	struct dst w;			/* aperture with CLANQ_RIGHT_WRITE */
	u32 ro;				/* CLANQ_RIGHT_READ only, onto w's region */
	u32 revoked;			/* its exporter freed the region */
	u32 closed;			/* closed by the requester */
	struct clanq_kap *ap_w;
	struct kref *refs[V_NR];
	struct clanq_rdma_req base;	/* valid */
};

/* Pin aperture @id of @ctx until cleanup. */
static struct clanq_kap *ap_pin(struct kunit *test, struct clanq_ctx *ctx,
			       u32 id)
{
	struct clanq_kap *ap = clanq_kap_lookup(ctx, id);

	KUNIT_ASSERT_NOT_NULL(test, ap);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, ap_put_action,
							ap), 0);
	return ap;
}

static void vfix_init(struct kunit *test, struct rdma_env *e,
		      struct vfix *v)
{
	struct clanq_ctx *other = ctx_add(test, e->nic);
	struct dst gone;
	u32 id;

	v->ctx = e->ctx;
	v->src = src_create(test, e, V_SRC_LEN, 1);
	v->src_b = region_alloc(test, other, V_SRC_LEN);
	v->refs[V_SRC] = &v->src.r->ref;
	v->refs[V_SRC_B] = &region_pin(test, other, v->src_b)->ref;
	v->src_freed = region_alloc(test, e->ctx, V_SRC_LEN);
	region_free(test, e->ctx, v->src_freed);

	v->w = dst_create(test, e, V_DST_LEN, V_AP_OFF, V_AP_LEN,
			  CLANQ_RIGHT_WRITE);
	v->ap_w = ap_pin(test, e->ctx, v->w.ap);
	v->refs[V_AP_W] = &v->ap_w->ref;
	v->refs[V_DST] = &v->w.r->ref;

	/* read-only: a second import of the same region */
	v->ro = ap_import(test, e, v->w.region, v->w.key, V_AP_OFF, V_AP_LEN,
			  CLANQ_RIGHT_READ);
	v->refs[V_AP_RO] = &ap_pin(test, e->ctx, v->ro)->ref;

	/* revoked: the exporter frees the region behind it */
	gone = dst_create(test, e, V_DST_LEN, V_AP_OFF, V_AP_LEN,
			  CLANQ_RIGHTS_ALL);
	v->revoked = gone.ap;
	v->refs[V_AP_REVOKED] = &ap_pin(test, e->ctx, gone.ap)->ref;
	v->refs[V_DST_REVOKED] = &gone.r->ref;
	region_free(test, e->exp, gone.region);

	/* closed: by the requester; the pin keeps the object, not the id */
	id = dst_create(test, e, V_DST_LEN, 0, V_DST_LEN, CLANQ_RIGHTS_ALL).ap;
	v->refs[V_AP_CLOSED] = &ap_pin(test, e->ctx, id)->ref;
	ap_close(test, e->ctx, id);
	v->closed = id;

	v->base = mkreq(v->src.id, v->w.ap, 0, 0, 100, COOKIE(1), SIG_LAST);
}

/*
 * Validate @req; it must return @want. A success holds one reference on
 * the source region and one on the aperture (the test drops them); a
 * failure holds none and leaves the xfer's pointers NULL, since the
 * engine puts them again when it completes the request.
 */
static void vcheck(struct kunit *test, struct vfix *v,
		   const struct clanq_rdma_req *req, int want, const char *what)
{
	struct clanq_rdma_xfer x;
	unsigned int before[V_NR], mem_before, i;
	int got;

	memset(&x, 0, sizeof(x));
	for (i = 0; i < V_NR; i++)
		before[i] = kref_read(v->refs[i]);
	mem_before = refcount_read(&v->src.r->mem_ref);
	got = clanq_rdma_validate(v->ctx, req, &x);
	KUNIT_EXPECT_EQ_MSG(test, got, want, "%s", what);
	if (!got) {
		KUNIT_EXPECT_PTR_EQ_MSG(test, x.src, v->src.r, "%s", what);
		KUNIT_EXPECT_PTR_EQ_MSG(test, x.dst, v->ap_w, "%s", what);
		if (x.src == v->src.r && x.dst == v->ap_w) {
			KUNIT_EXPECT_EQ_MSG(test, kref_read(&x.src->ref),
					    before[V_SRC] + 1, "%s", what);
			KUNIT_EXPECT_EQ_MSG(test, kref_read(&x.dst->ref),
					    before[V_AP_W] + 1, "%s", what);
			KUNIT_EXPECT_EQ_MSG(test, refcount_read(&x.src->mem_ref),
					    mem_before + 1, "%s", what);
		}
		/* the engine also holds the source's memory while it works */
		clanq_kregion_mem_put(x.src);
		clanq_kregion_put(x.src);
		clanq_kap_put(x.dst);
	} else {
		KUNIT_EXPECT_NULL_MSG(test, x.src, "%s", what);
		KUNIT_EXPECT_NULL_MSG(test, x.dst, "%s", what);
	}
	for (i = 0; i < V_NR; i++)
		KUNIT_EXPECT_EQ_MSG(test, kref_read(v->refs[i]), before[i],
				    "%s: reference count of object %u", what, i);
	KUNIT_EXPECT_EQ_MSG(test, refcount_read(&v->src.r->mem_ref), mem_before,
			    "%s: the source's memory holds", what);
}

/* One field of the valid base request changed, then validated. */
#define VCASE(want, what, change)				\
	do {							\
		struct clanq_rdma_req r_ = v->base;		\
		change;						\
		vcheck(test, v, &r_, want, what);		\
	} while (0)

/*
 * Every field of a request is checked: unknown flag bits and non-zero
 * reserved words are -EINVAL; a source that is not a live region of the
 * requester (unknown, another context's, freed) and an aperture that is
 * not an open one of the requester are -ENOENT; an aperture without
 * CLANQ_RIGHT_WRITE is -EACCES; [off, off + len) past the source region
 * or past the aperture (even when still inside the region behind it), or
 * overflowing u64, is -ERANGE. Exact fits and len 0 at the very end are
 * valid. No failure holds a reference on anything (and kmemleak runs
 * after the suite).
 */
static void validation_checks_every_field_and_holds_nothing_on_failure(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct vfix *v = kunit_kzalloc(test, sizeof(*v), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, v);
	vfix_init(test, e, v);

	VCASE(0, "a valid request", (void)0);
	VCASE(0, "no flags", r_.flags = 0);
	VCASE(0, "LAST only", r_.flags = CLANQ_RDMA_LAST);
	VCASE(0, "SIGNAL only", r_.flags = CLANQ_RDMA_SIGNAL);
	VCASE(0, "exact fit at the ends of source and aperture",
	      (r_.src_off = V_SRC_LEN - 100, r_.dst_off = V_AP_LEN - 100));
	VCASE(0, "len 0 at the very ends",
	      (r_.src_off = V_SRC_LEN, r_.dst_off = V_AP_LEN, r_.len = 0));
	VCASE(0, "whole aperture", r_.len = V_AP_LEN);

	VCASE(-EINVAL, "flag bit 2", r_.flags |= 1u << 2);
	VCASE(-EINVAL, "flag bit 31", r_.flags |= 1u << 31);
	VCASE(-EINVAL, "all flag bits", r_.flags = ~0u);
	VCASE(-EINVAL, "reserved0 = 1", r_.reserved0 = 1);
	VCASE(-EINVAL, "reserved0 bit 31", r_.reserved0 = 1u << 31);
	VCASE(-EINVAL, "reserved[0] = 1", r_.reserved[0] = 1);
	VCASE(-EINVAL, "reserved[1] bit 63", r_.reserved[1] = 1ull << 63);

	VCASE(-ENOENT, "source region 0", r_.src_region = 0);
	VCASE(-ENOENT, "source region S32_MAX", r_.src_region = S32_MAX);
	VCASE(-ENOENT, "source region U32_MAX", r_.src_region = U32_MAX);
	VCASE(-ENOENT, "source region of another context",
	      r_.src_region = v->src_b);
	VCASE(-ENOENT, "source region freed", r_.src_region = v->src_freed);
	VCASE(-ENOENT, "aperture 0", r_.dst_ap = 0);
	VCASE(-ENOENT, "aperture U32_MAX", r_.dst_ap = U32_MAX);
	VCASE(-ENOENT, "aperture never imported", r_.dst_ap = v->w.ap + 1000);
	VCASE(-ENOENT, "aperture closed", r_.dst_ap = v->closed);

	VCASE(-EACCES, "aperture without CLANQ_RIGHT_WRITE", r_.dst_ap = v->ro);

	VCASE(-ERANGE, "source: one byte past the end",
	      r_.src_off = V_SRC_LEN - 99);
	VCASE(-ERANGE, "source: starts at the end", (r_.src_off = V_SRC_LEN,
						     r_.len = 1));
	VCASE(-ERANGE, "source: len = region + 1", (r_.len = V_SRC_LEN + 1,
						    r_.dst_off = 0));
	VCASE(-ERANGE, "aperture: one byte past it (inside the region)",
	      r_.dst_off = V_AP_LEN - 99);
	VCASE(-ERANGE, "aperture: len = aperture + 1 (inside the region)",
	      r_.len = V_AP_LEN + 1);
	VCASE(-ERANGE, "source: off U64_MAX, len 2", (r_.src_off = U64_MAX,
						      r_.len = 2));
	VCASE(-ERANGE, "source: off U64_MAX, len 1 (end wraps to 0)",
	      (r_.src_off = U64_MAX, r_.len = 1));
	VCASE(-ERANGE, "source: off U64_MAX - 1, len 2 (end wraps to 0)",
	      (r_.src_off = U64_MAX - 1, r_.len = 2));
	VCASE(-ERANGE, "source: off 1, len U64_MAX",
	      (r_.src_off = 1, r_.len = U64_MAX));
	VCASE(-ERANGE, "aperture: off U64_MAX, len 2", (r_.dst_off = U64_MAX,
							r_.len = 2));
	VCASE(-ERANGE, "aperture: off U64_MAX, len 1 (end wraps to 0)",
	      (r_.dst_off = U64_MAX, r_.len = 1));
	VCASE(-ERANGE, "aperture: off U64_MAX - 1, len 2 (end wraps to 0)",
	      (r_.dst_off = U64_MAX - 1, r_.len = 2));

	/*
	 * Liveness is not a field: it is checked once per chunk, where the
	 * write is delivered (clanq_rx_write()), and the next test sees
	 * such a request complete with -ENXIO through the engine.
	 */
	VCASE(0, "aperture onto a freed region: checked at delivery",
	      r_.dst_ap = v->revoked);
}

/*
 * Through the engine: every failed request completes, SIGNAL or not,
 * with its status and len 0; successful ones complete only if SIGNAL;
 * all in request order, in one turn (one message), and only the
 * successful ones write. The counters agree.
 */
static void failed_requests_complete_with_their_status_in_order(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct vfix *v = kunit_kzalloc(test, sizeof(*v), GFP_KERNEL);
	struct uep *u = uep_create(test, e->ctx, 16, 16);
	struct clanq_rdma_req req[9];
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, v);
	vfix_init(test, e, v);
	for (i = 0; i < ARRAY_SIZE(req); i++) {
		req[i] = v->base;
		req[i].cookie = COOKIE(i);
		req[i].flags = 0;
		req[i].src_off = 1000 * i;
		req[i].dst_off = 200 * i;
	}
	req[0].flags = CLANQ_RDMA_SIGNAL;
	req[1].flags = 1u << 5;			/* -EINVAL */
	req[2].src_region = v->src_b;		/* -ENOENT */
	/* req[3]: succeeds, no SIGNAL: no completion */
	req[4].dst_ap = v->ro;			/* -EACCES */
	req[5].dst_off = V_AP_LEN;		/* -ERANGE */
	req[6].dst_ap = v->revoked;		/* -ENXIO */
	req[7].dst_ap = v->closed;		/* -ENOENT */
	req[8].flags = SIG_LAST;
	for (i = 0; i < ARRAY_SIZE(req); i++)
		post(test, u, &req[i]);
	kick(test, u);

	KUNIT_EXPECT_PTR_EQ(test, step(e), u->ep);
	KUNIT_EXPECT_EQ(test, unread(u), 8);
	expect_comp(test, u, COOKIE(0), 100, 0);
	expect_comp(test, u, COOKIE(1), 0, -EINVAL);
	expect_comp(test, u, COOKIE(2), 0, -ENOENT);
	expect_comp(test, u, COOKIE(4), 0, -EACCES);
	expect_comp(test, u, COOKIE(5), 0, -ERANGE);
	expect_comp(test, u, COOKIE(6), 0, -ENXIO);
	expect_comp(test, u, COOKIE(7), 0, -ENOENT);
	expect_comp(test, u, COOKIE(8), 100, 0);
	settle(test, e, 1);
	KUNIT_EXPECT_EQ(test, unread(u), 0);

	dst_expect(&v->w, &v->src, &req[0], 100);
	dst_expect(&v->w, &v->src, &req[3], 100);
	dst_expect(&v->w, &v->src, &req[8], 100);
	KUNIT_EXPECT_EQ(test, region_diff(test, v->w.r, v->w.want), INTACT);

	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_reqs), 9);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_errors), 6);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_bytes), 300);
	KUNIT_EXPECT_EQ(test, nic_stat(&e->nic->stats.rdma_reqs), 9);
	KUNIT_EXPECT_EQ(test, nic_stat(&e->nic->stats.rdma_errors), 6);
	KUNIT_EXPECT_EQ(test, nic_stat(&e->nic->stats.rdma_bytes), 300);
}

/*
 * 2. Round-robin.
 */

#define RR_EPS		3
#define RR_MSGS		6
#define RR_LEN		64

/*
 * Three endpoints with RR_MSGS one-request messages each, kicked A, B, C:
 * the turns go A, B, C, A, B, C, ..., each turn completes exactly one
 * request, of the endpoint it served, in that endpoint's order, and
 * writes exactly that request's bytes.
 */
static void active_queues_are_served_round_robin(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 2);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct clanq_rdma_req (*req)[RR_MSGS];
	struct uep *u[RR_EPS];
	unsigned int i, j, t, n;
	struct clanq_kep *got;

	req = kunit_kcalloc(test, RR_EPS, sizeof(*req), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, req);
	for (i = 0; i < RR_EPS; i++) {
		u[i] = uep_create(test, e->ctx, 8, 8);
		for (j = 0; j < RR_MSGS; j++) {
			n = (i * RR_MSGS + j) * RR_LEN;
			req[i][j] = mkreq(s.id, d.ap, n, n, RR_LEN,
					  COOKIE((i << 16) | j), SIG_LAST);
			post(test, u[i], &req[i][j]);
		}
	}
	for (i = 0; i < RR_EPS; i++)
		kick(test, u[i]);

	for (t = 0; t < RR_EPS * RR_MSGS; t++) {
		i = t % RR_EPS;
		j = t / RR_EPS;
		got = step(e);
		KUNIT_ASSERT_PTR_EQ_MSG(test, got, u[i]->ep,
					"turn %u: expected endpoint %u", t, i);
		for (n = 0; n < RR_EPS; n++)
			KUNIT_ASSERT_EQ_MSG(test, unread(u[n]), (u32)(n == i),
					    "turn %u: completions of endpoint %u",
					    t, n);
		expect_comp(test, u[i], COOKIE((i << 16) | j), RR_LEN, 0);
		dst_expect(&d, &s, &req[i][j], RR_LEN);
		KUNIT_ASSERT_EQ_MSG(test, region_diff(test, d.r, d.want),
				    INTACT, "after turn %u", t);
	}

	/* each queue's last turn ended on LAST: one empty turn lets it go */
	KUNIT_EXPECT_LE(test, settle(test, e, RR_EPS), RR_EPS);
	for (i = 0; i < RR_EPS; i++) {
		KUNIT_EXPECT_EQ(test, unread(u[i]), 0);
		KUNIT_EXPECT_EQ(test, READ_ONCE(*u[i]->need_wakeup), 1);
		KUNIT_EXPECT_EQ(test, ctr(&u[i]->counters->rdma_reqs), RR_MSGS);
	}
}

/*
 * 3. Logical messages.
 */

/*
 * A turn serves one logical message, all of it: A's three-request
 * message completes in A's first turn, before B's turn; A's second
 * message waits for A's next turn, after B.
 */
static void a_turn_serves_one_whole_logical_message(struct kunit *test)
{
	static const u32 flags[] = { CLANQ_RDMA_SIGNAL, CLANQ_RDMA_SIGNAL,
				     SIG_LAST, CLANQ_RDMA_SIGNAL, SIG_LAST };
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 3);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct uep *a = uep_create(test, e->ctx, 8, 8);
	struct uep *b = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req ra[ARRAY_SIZE(flags)], rb;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(flags); i++) {
		ra[i] = mkreq(s.id, d.ap, 100 * i, 100 * i, 100, COOKIE(i),
			      flags[i]);
		post(test, a, &ra[i]);
	}
	rb = mkreq(s.id, d.ap, 2000, 2000, 100, COOKIE(100), SIG_LAST);
	post(test, b, &rb);
	kick(test, a);
	kick(test, b);

	KUNIT_ASSERT_PTR_EQ(test, step(e), a->ep);
	KUNIT_EXPECT_EQ(test, unread(a), 3);
	KUNIT_EXPECT_EQ(test, unread(b), 0);
	for (i = 0; i < 3; i++) {
		expect_comp(test, a, COOKIE(i), 100, 0);
		dst_expect(&d, &s, &ra[i], 100);
	}
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);

	KUNIT_ASSERT_PTR_EQ(test, step(e), b->ep);
	KUNIT_EXPECT_EQ(test, unread(a), 0);
	expect_comp(test, b, COOKIE(100), 100, 0);
	dst_expect(&d, &s, &rb, 100);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);

	KUNIT_ASSERT_PTR_EQ(test, step(e), a->ep);
	KUNIT_EXPECT_EQ(test, unread(a), 2);
	KUNIT_EXPECT_EQ(test, unread(b), 0);
	for (i = 3; i < ARRAY_SIZE(flags); i++) {
		expect_comp(test, a, COOKIE(i), 100, 0);
		dst_expect(&d, &s, &ra[i], 100);
	}
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);

	settle(test, e, 2);
	KUNIT_EXPECT_EQ(test, unread(a), 0);
	KUNIT_EXPECT_EQ(test, unread(b), 0);
}

#define CAP_MSG_REQS	100
#define CAP_LEN		16

/*
 * A message longer than TURN_REQS requests (small ones: the byte budget
 * is far away) yields after TURN_REQS of them; B is served; A's next
 * turn finishes the message.
 */
static void a_turn_ends_after_64_requests_even_inside_a_message(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 4);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct uep *a = uep_create(test, e->ctx, 128, 128);
	struct uep *b = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req req;
	unsigned int i;

	for (i = 0; i < CAP_MSG_REQS; i++) {
		req = mkreq(s.id, d.ap, CAP_LEN * i, CAP_LEN * i, CAP_LEN,
			    COOKIE(i), i == CAP_MSG_REQS - 1 ? SIG_LAST :
			    CLANQ_RDMA_SIGNAL);
		post(test, a, &req);
		dst_expect(&d, &s, &req, CAP_LEN);
	}
	req = mkreq(s.id, d.ap, 3000, 3000, 100, COOKIE(1000), SIG_LAST);
	post(test, b, &req);
	dst_expect(&d, &s, &req, 100);
	kick(test, a);
	kick(test, b);

	KUNIT_ASSERT_PTR_EQ(test, step(e), a->ep);
	KUNIT_EXPECT_EQ(test, unread(a), TURN_REQS);
	KUNIT_EXPECT_EQ(test, unread(b), 0);
	for (i = 0; i < TURN_REQS; i++)
		expect_comp(test, a, COOKIE(i), CAP_LEN, 0);

	KUNIT_ASSERT_PTR_EQ(test, step(e), b->ep);
	KUNIT_EXPECT_EQ(test, unread(a), 0);
	expect_comp(test, b, COOKIE(1000), 100, 0);

	KUNIT_ASSERT_PTR_EQ(test, step(e), a->ep);
	KUNIT_EXPECT_EQ(test, unread(a), CAP_MSG_REQS - TURN_REQS);
	for (i = TURN_REQS; i < CAP_MSG_REQS; i++)
		expect_comp(test, a, COOKIE(i), CAP_LEN, 0);

	settle(test, e, 2);
	KUNIT_EXPECT_EQ(test, unread(a), 0);
	KUNIT_EXPECT_EQ(test, unread(b), 0);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
}

/*
 * 4. Splitting.
 */

#define BIG		(64u << 10)
#define BIG_SRC_OFF	100u	/* not page aligned on either side */
#define BIG_AP_OFF	1000u
#define BIG_DST_OFF	37u

/*
 * With rdma_max_xfer = 4096, A's one 64 KiB request takes 16 turns of
 * exactly 4096 bytes each (the destination shows each turn's progress,
 * no more), while B's 100-byte request, kicked after A, completes in
 * the turn right after A's first: long before A's. The bytes arrive
 * intact across unaligned page boundaries.
 */
static void a_large_request_is_split_and_others_pass_it(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, BIG + PAGE_SIZE, 5);
	struct dst d = dst_create(test, e, BIG + 2 * PAGE_SIZE, BIG_AP_OFF,
				  BIG + PAGE_SIZE, CLANQ_RIGHT_WRITE);
	struct dst db = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				   CLANQ_RIGHT_WRITE);
	struct uep *a = uep_create(test, e->ctx, 8, 8);
	struct uep *b = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req ra, rb;
	unsigned int a_turns = 0, turns = 0, b_done_at = 0;
	s64 splits = nic_stat(&e->nic->stats.rdma_splits);
	struct clanq_kep *got;

	max_xfer_set(test, SPLIT_XFER);
	ra = mkreq(s.id, d.ap, BIG_SRC_OFF, BIG_DST_OFF, BIG, COOKIE(1),
		   SIG_LAST);
	rb = mkreq(s.id, db.ap, 7, 9, 100, COOKIE(2), SIG_LAST);
	post(test, a, &ra);
	post(test, b, &rb);
	kick(test, a);
	kick(test, b);

	while (!unread(a)) {
		got = step(e);
		turns++;
		KUNIT_ASSERT_LE_MSG(test, turns, 64u,
				    "A not complete after %u turns", turns);
		KUNIT_ASSERT_TRUE_MSG(test, got == a->ep || got == b->ep,
				      "turn %u served no queue", turns);
		if (got == b->ep) {
			if (unread(b)) {
				KUNIT_EXPECT_EQ(test, b_done_at, 0);
				b_done_at = turns;
				expect_comp(test, b, COOKIE(2), 100, 0);
			}
			continue;
		}
		a_turns++;
		if (unread(a))
			break;
		/* exactly a_turns * SPLIT_XFER bytes written so far */
		memset(d.want, 0, d.r->len);
		dst_expect(&d, &s, &ra, a_turns * SPLIT_XFER);
		KUNIT_ASSERT_EQ_MSG(test, region_diff(test, d.r, d.want),
				    INTACT, "after A's turn %u", a_turns);
	}
	expect_comp(test, a, COOKIE(1), BIG, 0);
	KUNIT_EXPECT_EQ(test, a_turns, BIG / SPLIT_XFER);
	KUNIT_EXPECT_EQ_MSG(test, b_done_at, 2,
			    "B should complete in the turn after A's first");
	dst_expect(&d, &s, &ra, BIG);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
	dst_expect(&db, &s, &rb, 100);
	KUNIT_EXPECT_EQ(test, region_diff(test, db.r, db.want), INTACT);

	settle(test, e, 2);
	KUNIT_EXPECT_EQ(test, unread(a), 0);
	KUNIT_EXPECT_EQ(test, unread(b), 0);
	KUNIT_EXPECT_EQ(test, ctr(&a->counters->rdma_reqs), 1);
	KUNIT_EXPECT_EQ(test, ctr(&a->counters->rdma_bytes), BIG);
	KUNIT_EXPECT_EQ(test, nic_stat(&e->nic->stats.rdma_splits) - splits,
			BIG / SPLIT_XFER - 1);
	kunit_info(test, "A: %u turns; B done at turn %u of %u\n", a_turns,
		   b_done_at, turns);
}

/*
 * 5. Doorbells.
 */

/*
 * The doorbell word reads 1 while the engine is not looking at the
 * queue: from creation, and again once a turn found the queue drained.
 * A post alone wakes nothing (the engine does not poll idle queues); a
 * kick clears the word and queues the endpoint. A kick of an active
 * endpoint does not queue it twice; every kick is a system call, and
 * counts in the endpoint's rdma_kicks and the NIC's (uapi).
 */
static void doorbell_word_follows_the_engine_and_kicks_queue_once(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 6);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct uep *a = uep_create(test, e->ctx, 8, 8);
	struct uep *b = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req req = mkreq(s.id, d.ap, 0, 0, 64, COOKIE(1),
					  SIG_LAST);

	KUNIT_EXPECT_EQ(test, READ_ONCE(*a->need_wakeup), 1);
	KUNIT_EXPECT_NULL(test, step(e));

	post(test, a, &req);
	KUNIT_EXPECT_NULL_MSG(test, step(e), "the engine served a queue nobody kicked");
	KUNIT_EXPECT_EQ(test, unread(a), 0);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*a->need_wakeup), 1);

	kick(test, a);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*a->need_wakeup), 0);
	KUNIT_EXPECT_EQ(test, ctr(&a->counters->rdma_kicks), 1);
	kick(test, a);		/* active already */
	KUNIT_EXPECT_EQ(test, READ_ONCE(*a->need_wakeup), 0);
	KUNIT_EXPECT_EQ(test, ctr(&a->counters->rdma_kicks), 2);
	KUNIT_EXPECT_EQ(test, nic_stat(&e->nic->stats.rdma_kicks), 2);

	KUNIT_EXPECT_PTR_EQ(test, step(e), a->ep);
	expect_comp(test, a, COOKIE(1), 64, 0);
	/* one more turn at most, finding the queue empty, then nothing */
	KUNIT_EXPECT_LE(test, settle(test, e, 1), 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*a->need_wakeup), 1);
	KUNIT_EXPECT_EQ(test, unread(a), 0);

	/* twice-kicked A and once-kicked B: each listed once */
	req.cookie = COOKIE(2);
	post(test, a, &req);
	req.cookie = COOKIE(3);
	post(test, b, &req);
	kick(test, a);
	kick(test, a);
	kick(test, b);
	KUNIT_EXPECT_PTR_EQ(test, step(e), a->ep);
	KUNIT_EXPECT_PTR_EQ(test, step(e), b->ep);
	expect_comp(test, a, COOKIE(2), 64, 0);
	expect_comp(test, b, COOKIE(3), 64, 0);
	/* at most the two empty turns that let them go */
	KUNIT_EXPECT_LE(test, settle(test, e, 2), 2);
	KUNIT_EXPECT_EQ(test, unread(a), 0);
	KUNIT_EXPECT_EQ(test, unread(b), 0);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*a->need_wakeup), 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*b->need_wakeup), 1);
	KUNIT_EXPECT_EQ(test, ctr(&a->counters->rdma_reqs), 2);
	KUNIT_EXPECT_EQ(test, ctr(&b->counters->rdma_reqs), 1);
	KUNIT_EXPECT_EQ(test, ctr(&a->counters->rdma_kicks), 4);
	KUNIT_EXPECT_EQ(test, ctr(&b->counters->rdma_kicks), 1);
}

#define FULL_CQ_SLOTS	4	/* holds 3 */
#define FULL_REQS	7

/*
 * A request is taken only while the completion queue has room: with a
 * CQ of 4 slots (3 usable) and 7 signalled requests, the engine takes 3
 * and lets the queue go (doorbell 1, not requeued: steps return NULL).
 * A kick without room takes nothing. Consuming alone resumes nothing;
 * consuming and kicking takes exactly as many requests as slots were
 * freed. In the end every request completed once, in order.
 */
static void full_completion_queue_stops_the_queue_until_kicked(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 7);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct uep *u = uep_create(test, e->ctx, 8, FULL_CQ_SLOTS);
	struct clanq_rdma_req req;
	unsigned int i, next = 0;

	for (i = 0; i < FULL_REQS; i++) {
		req = mkreq(s.id, d.ap, 64 * i, 64 * i, 64, COOKIE(i),
			    SIG_LAST);
		post(test, u, &req);
		dst_expect(&d, &s, &req, 64);
	}
	kick(test, u);
	settle(test, e, 8);
	KUNIT_EXPECT_EQ(test, unread(u), 3);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_reqs), 3);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*u->rq.cons), 3);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*u->need_wakeup), 1);
	KUNIT_EXPECT_NULL(test, step(e));

	/* still full: a kick gets one look and nothing taken */
	kick(test, u);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*u->need_wakeup), 0);
	KUNIT_EXPECT_LE(test, settle(test, e, 1), 1);
	KUNIT_EXPECT_EQ(test, unread(u), 3);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_reqs), 3);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*u->need_wakeup), 1);

	/* one consumed: nothing resumes without a kick */
	expect_comp(test, u, COOKIE(next), 64, 0);
	next++;
	KUNIT_EXPECT_NULL(test, step(e));
	kick(test, u);
	settle(test, e, 4);
	KUNIT_EXPECT_EQ(test, unread(u), 3);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_reqs), 4);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*u->need_wakeup), 1);

	/* consume and kick until done; every completion once, in order */
	for (i = 0; i < 8 && next < FULL_REQS; i++) {
		while (unread(u)) {
			expect_comp(test, u, COOKIE(next), 64, 0);
			next++;
		}
		kick(test, u);
		settle(test, e, 8);
	}
	while (unread(u)) {
		expect_comp(test, u, COOKIE(next), 64, 0);
		next++;
	}
	KUNIT_EXPECT_EQ(test, next, FULL_REQS);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_reqs), FULL_REQS);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_errors), 0);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
}

/*
 * 6. A hostile application.
 */

/*
 * A request queue producer index outside [0, nr_slots) reads as empty:
 * the engine takes nothing (the slots hold valid requests), writes
 * nothing, lets the queue go; a sane index then lets the requests in.
 */
static void out_of_range_request_producer_index_reads_as_empty(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 8);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct uep *u = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req req[2];
	u32 bad[8], v;

	req[0] = mkreq(s.id, d.ap, 0, 0, 100, COOKIE(0), SIG_LAST);
	req[1] = mkreq(s.id, d.ap, 200, 200, 100, COOKIE(1), SIG_LAST);
	post(test, u, &req[0]);
	post(test, u, &req[1]);

	out_of_range_values(u->c.rq.nr_slots, bad);
	for (v = 0; v < ARRAY_SIZE(bad); v++) {
		WRITE_ONCE(*u->rq.prod, bad[v]);
		kick(test, u);
		settle(test, e, 2);
		KUNIT_EXPECT_EQ_MSG(test, ctr(&u->counters->rdma_reqs), 0,
				    "prod %#x", bad[v]);
		KUNIT_EXPECT_EQ_MSG(test, unread(u), 0, "prod %#x", bad[v]);
		KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(*u->rq.cons), 0,
				    "prod %#x", bad[v]);
		KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(*u->need_wakeup), 1,
				    "prod %#x", bad[v]);
	}
	/* nothing written: the destination is still all zero */
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);

	/* the index the application really published; (B) of queue.h */
	smp_store_release(u->rq.prod, u->rq.own);
	kick(test, u);
	settle(test, e, 3);
	expect_comp(test, u, COOKIE(0), 100, 0);
	expect_comp(test, u, COOKIE(1), 100, 0);
	dst_expect(&d, &s, &req[0], 100);
	dst_expect(&d, &s, &req[1], 100);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
}

/*
 * A completion queue consumer index outside [0, nr_slots) reads as full
 * once the engine has to look at it: nothing is taken, no completion
 * published, the queue let go; the real index then lets the request in.
 */
static void out_of_range_completion_consumer_index_reads_as_full(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 9);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct uep *u = uep_create(test, e->ctx, 8, FULL_CQ_SLOTS);
	struct clanq_rdma_req req;
	u32 bad[8], v, i, prod;

	/* fill the CQ once and consume it all: the engine's cache says full */
	for (i = 0; i < FULL_CQ_SLOTS - 1; i++) {
		req = mkreq(s.id, d.ap, 64 * i, 64 * i, 64, COOKIE(i),
			    SIG_LAST);
		post(test, u, &req);
	}
	kick(test, u);
	settle(test, e, 8);
	for (i = 0; i < FULL_CQ_SLOTS - 1; i++)
		expect_comp(test, u, COOKIE(i), 64, 0);
	prod = READ_ONCE(*u->cq.prod);

	req = mkreq(s.id, d.ap, 1000, 1000, 64, COOKIE(99), SIG_LAST);
	post(test, u, &req);
	out_of_range_values(u->c.cq.nr_slots, bad);
	for (v = 0; v < ARRAY_SIZE(bad); v++) {
		WRITE_ONCE(*u->cq.cons, bad[v]);
		kick(test, u);
		settle(test, e, 2);
		KUNIT_EXPECT_EQ_MSG(test, ctr(&u->counters->rdma_reqs),
				    FULL_CQ_SLOTS - 1, "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(*u->cq.prod), prod,
				    "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ_MSG(test, READ_ONCE(*u->need_wakeup), 1,
				    "cons %#x", bad[v]);
	}

	/* the index the application really consumed to; (D) of queue.h */
	smp_store_release(u->cq.cons, u->cq.own);
	kick(test, u);
	settle(test, e, 2);
	expect_comp(test, u, COOKIE(99), 64, 0);
	KUNIT_EXPECT_EQ(test, unread(u), 0);
}

/*
 * The engine works on its private copy: rewriting the request's slot
 * while the request is in progress (split across turns) changes nothing
 * -- not its destination, length, cookie, nor how often it is taken.
 */
static void rewriting_a_taken_request_slot_changes_nothing(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, 4 * SPLIT_XFER, 10);
	struct dst d = dst_create(test, e, 8 * SPLIT_XFER, 0, 8 * SPLIT_XFER,
				  CLANQ_RIGHT_WRITE);
	struct uep *u = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req req, evil;
	unsigned int i;

	max_xfer_set(test, SPLIT_XFER);
	req = mkreq(s.id, d.ap, 0, 0, 4 * SPLIT_XFER, COOKIE(1), SIG_LAST);
	post(test, u, &req);
	kick(test, u);
	KUNIT_ASSERT_PTR_EQ(test, step(e), u->ep);
	KUNIT_ASSERT_EQ(test, unread(u), 0);
	KUNIT_ASSERT_EQ(test, READ_ONCE(*u->rq.cons), 1);

	/* valid, so that a re-read would visibly do something else */
	evil = mkreq(s.id, d.ap, 0, 4 * SPLIT_XFER, 2 * SPLIT_XFER,
		     COOKIE(0xbad), SIG_LAST);
	memcpy(clanq_q_slot(&u->rq, 0), &evil, sizeof(evil));
	for (i = 0; i < 8 && !unread(u); i++)
		step(e);
	expect_comp(test, u, COOKIE(1), 4 * SPLIT_XFER, 0);
	settle(test, e, 2);
	KUNIT_EXPECT_EQ(test, unread(u), 0);
	dst_expect(&d, &s, &req, req.len);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_reqs), 1);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_bytes), 4 * SPLIT_XFER);
}

/*
 * 7. Revocation while a request is in progress.
 */

enum revoke_how { REVOKE_DST_REGION, REVOKE_AP_CLOSED, REVOKE_SRC_REGION };

static const enum revoke_how revoke_hows[] = {
	REVOKE_DST_REGION, REVOKE_AP_CLOSED, REVOKE_SRC_REGION,
};

static void revoke_desc(const enum revoke_how *how, char *desc)
{
	static const char * const names[] = {
		[REVOKE_DST_REGION] = "exporter frees the destination",
		[REVOKE_AP_CLOSED] = "requester closes the aperture",
		[REVOKE_SRC_REGION] = "requester frees the source",
	};

	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s", names[*how]);
}

KUNIT_ARRAY_PARAM(revoke, revoke_hows, revoke_desc);

/*
 * A request split across turns whose destination or source goes away
 * between two turns completes with -ENXIO and the bytes written so far;
 * nothing more reaches the destination's pages; the next request of the
 * queue is served normally.
 */
static void revocation_between_turns_completes_with_enxio(struct kunit *test)
{
	enum revoke_how how = *(const enum revoke_how *)test->param_value;
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, 4 * SPLIT_XFER, 11);
	struct src s2 = src_create(test, e, PAGE_SIZE, 12);
	struct dst d = dst_create(test, e, 4 * SPLIT_XFER, 0, 4 * SPLIT_XFER,
				  CLANQ_RIGHT_WRITE);
	struct dst d2 = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				   CLANQ_RIGHT_WRITE);
	struct uep *u = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req big, small;

	max_xfer_set(test, SPLIT_XFER);
	big = mkreq(s.id, d.ap, 0, 0, 4 * SPLIT_XFER, COOKIE(1), SIG_LAST);
	small = mkreq(s2.id, d2.ap, 0, 0, 100, COOKIE(2), SIG_LAST);
	post(test, u, &big);
	post(test, u, &small);
	kick(test, u);
	KUNIT_ASSERT_PTR_EQ(test, step(e), u->ep);
	KUNIT_ASSERT_EQ(test, unread(u), 0);

	switch (how) {
	case REVOKE_DST_REGION:
		region_free(test, e->exp, d.region);
		break;
	case REVOKE_AP_CLOSED:
		ap_close(test, e->ctx, d.ap);
		break;
	case REVOKE_SRC_REGION:
		region_free(test, e->ctx, s.id);
		break;
	}

	KUNIT_ASSERT_PTR_EQ(test, step(e), u->ep);
	KUNIT_EXPECT_EQ(test, unread(u), 1);
	expect_comp(test, u, COOKIE(1), SPLIT_XFER, -ENXIO);
	KUNIT_ASSERT_PTR_EQ(test, step(e), u->ep);
	expect_comp(test, u, COOKIE(2), 100, 0);
	settle(test, e, 1);

	dst_expect(&d, &s, &big, SPLIT_XFER);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
	dst_expect(&d2, &s2, &small, 100);
	KUNIT_EXPECT_EQ(test, region_diff(test, d2.r, d2.want), INTACT);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_errors), 1);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_bytes), SPLIT_XFER + 100);
}

/*
 * An endpoint destroyed while its request is in progress: the engine
 * forgets it (no further turn) and the request's references on the
 * source and the aperture are dropped.
 */
static void destroying_an_endpoint_mid_request_drops_its_references(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, 4 * SPLIT_XFER, 13);
	struct dst d = dst_create(test, e, 4 * SPLIT_XFER, 0, 4 * SPLIT_XFER,
				  CLANQ_RIGHT_WRITE);
	struct clanq_kap *ap = ap_pin(test, e->ctx, d.ap);
	struct uep *u = uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req req;
	unsigned int src_refs, ap_refs;

	max_xfer_set(test, SPLIT_XFER);
	req = mkreq(s.id, d.ap, 0, 0, 4 * SPLIT_XFER, COOKIE(1), SIG_LAST);
	post(test, u, &req);
	src_refs = kref_read(&s.r->ref);
	ap_refs = kref_read(&ap->ref);
	kick(test, u);
	KUNIT_ASSERT_PTR_EQ(test, step(e), u->ep);
	KUNIT_EXPECT_EQ(test, kref_read(&s.r->ref), src_refs + 1);
	KUNIT_EXPECT_EQ(test, kref_read(&ap->ref), ap_refs + 1);

	ep_destroy(e->ctx, u->ep);	/* and its segment: u is stale */
	KUNIT_EXPECT_NULL(test, step(e));
	KUNIT_EXPECT_EQ(test, kref_read(&s.r->ref), src_refs);
	KUNIT_EXPECT_EQ(test, kref_read(&ap->ref), ap_refs);
	dst_expect(&d, &s, &req, SPLIT_XFER);
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
}

static struct kunit_case clanq_rdma_cases[] = {
	KUNIT_CASE(validation_checks_every_field_and_holds_nothing_on_failure),
	KUNIT_CASE(failed_requests_complete_with_their_status_in_order),
	KUNIT_CASE(active_queues_are_served_round_robin),
	KUNIT_CASE(a_turn_serves_one_whole_logical_message),
	KUNIT_CASE(a_turn_ends_after_64_requests_even_inside_a_message),
	KUNIT_CASE(a_large_request_is_split_and_others_pass_it),
	KUNIT_CASE(doorbell_word_follows_the_engine_and_kicks_queue_once),
	KUNIT_CASE(full_completion_queue_stops_the_queue_until_kicked),
	KUNIT_CASE(out_of_range_request_producer_index_reads_as_empty),
	KUNIT_CASE(out_of_range_completion_consumer_index_reads_as_full),
	KUNIT_CASE(rewriting_a_taken_request_slot_changes_nothing),
	KUNIT_CASE_PARAM(revocation_between_turns_completes_with_enxio,
			 revoke_gen_params),
	KUNIT_CASE(destroying_an_endpoint_mid_request_drops_its_references),
	{}
};

static struct kunit_suite clanq_rdma_suite = {
	.name = "clanq_rdma",
	.init = rdma_test_init,
	.test_cases = clanq_rdma_cases,
};

kunit_test_suites(&clanq_rdma_suite);
