// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the RDMA engine (driver/rdma.c) against what the
 * application does behind its back: out-of-range queue indices, a request
 * slot rewritten while the request is in progress, and the source or
 * destination revoked, or the endpoint destroyed, in mid-request; and
 * counters read while a turn it made long runs.
 *
 * The fixture, and how every test runs: rdma_fixture.h.
 */
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/string.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "rdma_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

/*
 * A hostile application.
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
	struct uep *u = rdma_uep_create(test, e->ctx, 8, 8);
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
	struct uep *u = rdma_uep_create(test, e->ctx, 8, FULL_CQ_SLOTS);
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
	struct uep *u = rdma_uep_create(test, e->ctx, 8, 8);
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
 * Revocation while a request is in progress.
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
	struct uep *u = rdma_uep_create(test, e->ctx, 8, 8);
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
	struct uep *u = rdma_uep_create(test, e->ctx, 8, 8);
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

/* Reads an endpoint's counters as EP_STATS does, in a thread of its own. */
struct counters_reader {
	struct clanq_kep *ep;
	struct clanq_ep_counters c;
	u32 queued;
	struct completion done;
};

static int counters_reader_fn(void *arg)
{
	struct counters_reader *r = arg;

	mutex_lock(&r->ep->ctx->lock);
	clanq_kep_read_counters(r->ep, &r->c, &r->queued);
	mutex_unlock(&r->ep->ctx->lock);
	complete(&r->done);
	return 0;
}

/*
 * A turn a user can make long must not hold up EP_STATS, which holds the
 * NIC's ctx_lock (every open() and last close() waits on it): the
 * counters are read without the engine's serve mutex. Here a turn never
 * ends (the test holds serve) and the read still returns.
 */
static void counters_are_read_while_a_turn_runs(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct uep *u = rdma_uep_create(test, e->ctx, 8, 8);
	struct counters_reader *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	struct task_struct *t;
	bool done;

	KUNIT_ASSERT_NOT_NULL(test, r);
	r->ep = u->ep;
	init_completion(&r->done);
	mutex_lock(&e->nic->engine.serve);
	t = kthread_run(counters_reader_fn, r, "clanq-kunit-stats");
	if (IS_ERR(t)) {
		mutex_unlock(&e->nic->engine.serve);
		KUNIT_FAIL(test, "kthread_run: %ld", PTR_ERR(t));
		return;
	}
	done = wait_for_completion_timeout(&r->done, HZ);
	mutex_unlock(&e->nic->engine.serve);
	/* a reader that waited for the turn ends once it does */
	if (!done)
		wait_for_completion(&r->done);
	KUNIT_EXPECT_TRUE_MSG(test, done,
			      "reading the counters waited for the engine's turn");
	KUNIT_EXPECT_EQ(test, r->c.rdma_reqs, 0ull);
}

static struct kunit_case clanq_rdma_hostile_cases[] = {
	KUNIT_CASE(out_of_range_request_producer_index_reads_as_empty),
	KUNIT_CASE(out_of_range_completion_consumer_index_reads_as_full),
	KUNIT_CASE(rewriting_a_taken_request_slot_changes_nothing),
	KUNIT_CASE_PARAM(revocation_between_turns_completes_with_enxio,
			 revoke_gen_params),
	KUNIT_CASE(destroying_an_endpoint_mid_request_drops_its_references),
	KUNIT_CASE(counters_are_read_while_a_turn_runs),
	{}
};

static struct kunit_suite clanq_rdma_hostile_suite = {
	.name = "clanq_rdma_hostile",
	.init = rdma_test_init,
	.test_cases = clanq_rdma_hostile_cases,
};

kunit_test_suites(&clanq_rdma_hostile_suite);
