// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the RDMA engine (driver/rdma.c), request validation:
 * every field of a request is checked, a failure holds no reference, and
 * failed requests complete with their status, in order, through the engine.
 *
 * The fixture, and how every test runs: rdma_fixture.h.
 */
#include <kunit/test.h>
#include <linux/kref.h>
#include <linux/module.h>
#include <linux/refcount.h>
#include <linux/string.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "rdma_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

/*
 * Validation.
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
		/* the aperture the request names: the writable one, or revoked */
		unsigned int ap = req->dst_ap == v->revoked ? V_AP_REVOKED : V_AP_W;

		KUNIT_EXPECT_PTR_EQ_MSG(test, x.src, v->src.r, "%s", what);
		KUNIT_ASSERT_NOT_NULL_MSG(test, x.dst, "%s", what);
		KUNIT_EXPECT_PTR_EQ_MSG(test, &x.dst->ref, v->refs[ap], "%s", what);
		if (x.src == v->src.r && &x.dst->ref == v->refs[ap]) {
			KUNIT_EXPECT_EQ_MSG(test, kref_read(&x.src->ref),
					    before[V_SRC] + 1, "%s", what);
			KUNIT_EXPECT_EQ_MSG(test, kref_read(&x.dst->ref),
					    before[ap] + 1, "%s", what);
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

	VCASE(-EINVAL, "flag bit 3", r_.flags |= 1u << 3);
	VCASE(0, "FENCE", r_.flags |= CLANQ_RDMA_FENCE);
	VCASE(-EINVAL, "flag bit 31", r_.flags |= 1u << 31);
	VCASE(-EINVAL, "all flag bits", r_.flags = ~0u);
	VCASE(-EINVAL, "op = 4 (unknown)", r_.op = CLANQ_RDMA_NR_OPS);
	VCASE(-EINVAL, "op bit 31", r_.op = 1u << 31);
	VCASE(-EINVAL, "WRITE with operand[0] = 1", r_.operand[0] = 1);
	VCASE(-EINVAL, "WRITE with operand[1] bit 63", r_.operand[1] = 1ull << 63);

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
	struct uep *u = rdma_uep_create(test, e->ctx, 16, 16);
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

static struct kunit_case clanq_rdma_validate_cases[] = {
	KUNIT_CASE(validation_checks_every_field_and_holds_nothing_on_failure),
	KUNIT_CASE(failed_requests_complete_with_their_status_in_order),
	{}
};

static struct kunit_suite clanq_rdma_validate_suite = {
	.name = "clanq_rdma_validate",
	.init = rdma_test_init,
	.test_cases = clanq_rdma_validate_cases,
};

kunit_test_suites(&clanq_rdma_validate_suite);
