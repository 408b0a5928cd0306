// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the RDMA engine (driver/rdma.c), its turns: contexts
 * with active queues are served round-robin, and each context's active
 * queues round-robin, so a context with many busy queues does not starve
 * another; a context leaves the engine's line with its last queue; a
 * turn serves one whole logical message
 * (up to TURN_REQS requests), a large request is split at rdma_max_xfer
 * and others pass it, and the doorbell protocol (the need_wakeup word,
 * kicks, a full completion queue).
 *
 * The fixture, and how every test runs: rdma_fixture.h.
 */
#include <kunit/test.h>
#include <linux/module.h>
#include <linux/string.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "rdma_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

/* The engine's per-turn request cap (CLANQ_RDMA_TURN_REQS in rdma.c). */
#define TURN_REQS	64

/*
 * Round-robin.
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
		u[i] = rdma_uep_create(test, e->ctx, 8, 8);
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
 * Fairness between contexts.
 */

#define FAIR_EPS	50
#define FAIR_REQS	7	/* what an 8-slot request queue holds */
#define FAIR_ROUNDS	60
#define FAIR_LEN	64

/* A second requester on the test NIC: an aperture onto @d's region. */
static struct clanq_ctx *requester_add(struct kunit *test, struct rdma_env *e,
				       const struct dst *d, u32 *src, u32 *ap)
{
	struct clanq_ctx *ctx = ctx_add(test, e->nic);
	struct clanq_ioc_ap_import im = {
		.region = { .node = e->peer->node, .id = d->region },
		.key = d->key,
		.len = PAGE_SIZE,
		.rights = CLANQ_RIGHT_WRITE,
	};

	*src = region_alloc(test, ctx, PAGE_SIZE);
	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_import(ctx, &im), 0);
	*ap = im.id;
	return ctx;
}

/*
 * A flood context keeps FAIR_EPS queues busy (unsignalled one-request
 * messages); a victim in a context of its own posts one signalled
 * 64-byte write at a time and kicks. Every time, the victim's write
 * completes within 2 turns of the kick: at most one flood turn first,
 * however many flood queues are in line (round-robin over queues would
 * make it wait for all FAIR_EPS of them). Between the victim's writes
 * the engine takes 0, 1 or 2 more turns, so the kicks land at every
 * point of the rotation, with the victim in line or let go. The flood's
 * turns still go round its queues in order, one request each.
 * The flood queues are still in line at the end: the contexts' release
 * detaches them, and the engine must be left with an empty line.
 */
static void a_context_with_many_busy_queues_does_not_starve_another(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 8);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct dst dv = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				   CLANQ_RIGHT_WRITE);
	unsigned int i, j, r, turns, next = 0, victim_turns = 0, max_wait = 0;
	s64 turns0 = nic_stat(&e->nic->stats.rdma_turns);
	struct clanq_rdma_req req;
	struct clanq_ctx *vctx;
	struct uep **f, *v;
	struct clanq_kep *got;
	u32 vsrc, vap;

	f = kunit_kcalloc(test, FAIR_EPS, sizeof(*f), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, f);
	for (i = 0; i < FAIR_EPS; i++) {
		f[i] = rdma_uep_create(test, e->ctx, 8, 8);
		req = mkreq(s.id, d.ap, FAIR_LEN * i, FAIR_LEN * i, FAIR_LEN,
			    COOKIE(i), CLANQ_RDMA_LAST);
		for (j = 0; j < FAIR_REQS; j++)
			post(test, f[i], &req);
		dst_expect(&d, &s, &req, FAIR_LEN);
		kick(test, f[i]);
	}
	vctx = requester_add(test, e, &dv, &vsrc, &vap);
	v = rdma_uep_create(test, vctx, 8, 8);

	/* the flood is under way before the victim's first kick */
	for (i = 0; i < 3; i++, next++)
		KUNIT_ASSERT_PTR_EQ(test, step(e), f[next % FAIR_EPS]->ep);

	for (r = 0; r < FAIR_ROUNDS; r++) {
		req = mkreq(vsrc, vap, 0, 0, FAIR_LEN, COOKIE(r), SIG_LAST);
		post(test, v, &req);
		kick(test, v);
		for (turns = 0; !unread(v); ) {
			got = step(e);
			turns++;
			KUNIT_ASSERT_LE_MSG(test, turns, 2u,
					    "round %u: the victim waits behind the flood's queues",
					    r);
			if (got == v->ep) {
				victim_turns++;
				continue;
			}
			KUNIT_ASSERT_PTR_EQ_MSG(test, got, f[next % FAIR_EPS]->ep,
						"round %u: flood turn %u out of order",
						r, next);
			next++;
		}
		max_wait = max(max_wait, turns);
		expect_comp(test, v, COOKIE(r), FAIR_LEN, 0);
		/* move the next kick to another point of the rotation */
		for (i = 0; i < r % 3; i++) {
			got = step(e);
			if (got == v->ep) {
				victim_turns++;
				KUNIT_ASSERT_EQ(test, unread(v), 0);
				continue;
			}
			KUNIT_ASSERT_PTR_EQ_MSG(test, got, f[next % FAIR_EPS]->ep,
						"round %u: flood turn %u out of order",
						r, next);
			next++;
		}
	}
	/* no flood queue ran dry: every flood turn served one request */
	KUNIT_ASSERT_LT(test, next, FAIR_EPS * FAIR_REQS);
	KUNIT_EXPECT_EQ(test, nic_stat(&e->nic->stats.rdma_turns) - turns0,
			(s64)(next + victim_turns));
	KUNIT_EXPECT_EQ(test, ctr(&v->counters->rdma_reqs), FAIR_ROUNDS);
	for (i = 0; i < FAIR_EPS; i++) {
		KUNIT_EXPECT_EQ(test, ctr(&f[i]->counters->rdma_reqs),
				next / FAIR_EPS + (i < next % FAIR_EPS));
		KUNIT_EXPECT_EQ(test, ctr(&f[i]->counters->rdma_errors), 0);
	}
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, d.want), INTACT);
	kunit_info(test, "victim: %u writes in %u turns of %u, waited at most %u turns\n",
		   FAIR_ROUNDS, victim_turns, next + victim_turns, max_wait);
}

/*
 * A context leaves the engine's line with its last queue in line, and
 * only then: B's one queue destroyed while in line takes B out, and B
 * can be freed at once (KASAN would see a step touch it); A, with two
 * queues in line, stays in line when one of them goes, and its other
 * queue is served; with that one gone too, the engine has nothing.
 */
static void a_context_leaves_the_line_with_its_last_queue(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, PAGE_SIZE, 9);
	struct dst d = dst_create(test, e, PAGE_SIZE, 0, PAGE_SIZE,
				  CLANQ_RIGHT_WRITE);
	struct uep *a0 = rdma_uep_create(test, e->ctx, 8, 8);
	struct uep *a1 = rdma_uep_create(test, e->ctx, 8, 8);
	struct clanq_kep *a0_ep = a0->ep, *a1_ep = a1->ep;
	struct clanq_rdma_req req;
	struct clanq_ctx *bctx;
	unsigned int i;
	struct uep *b;
	u32 bsrc, bap;

	bctx = requester_add(test, e, &d, &bsrc, &bap);
	b = rdma_uep_create(test, bctx, 8, 8);
	req = mkreq(s.id, d.ap, 0, 0, FAIR_LEN, COOKIE(0), CLANQ_RDMA_LAST);
	for (i = 0; i < 4; i++) {
		post(test, a0, &req);
		post(test, a1, &req);
	}
	req = mkreq(bsrc, bap, 0, 0, FAIR_LEN, COOKIE(1), CLANQ_RDMA_LAST);
	post(test, b, &req);
	kick(test, a0);
	kick(test, a1);
	kick(test, b);

	/* the line: A (a0, a1), B (b) */
	ep_destroy(bctx, b->ep);
	kunit_release_action(test, ctx_put_action, bctx);
	KUNIT_ASSERT_PTR_EQ(test, step(e), a0_ep);
	KUNIT_ASSERT_PTR_EQ(test, step(e), a1_ep);
	KUNIT_ASSERT_PTR_EQ(test, step(e), a0_ep);

	ep_destroy(e->ctx, a0_ep);
	KUNIT_ASSERT_PTR_EQ(test, step(e), a1_ep);
	KUNIT_ASSERT_PTR_EQ(test, step(e), a1_ep);
	ep_destroy(e->ctx, a1_ep);
	KUNIT_EXPECT_NULL(test, step(e));
	KUNIT_EXPECT_TRUE(test, list_empty(&e->nic->engine.active));
}

/*
 * Logical messages.
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
	struct uep *a = rdma_uep_create(test, e->ctx, 8, 8);
	struct uep *b = rdma_uep_create(test, e->ctx, 8, 8);
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
	struct uep *a = rdma_uep_create(test, e->ctx, 128, 128);
	struct uep *b = rdma_uep_create(test, e->ctx, 8, 8);
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
 * Splitting.
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
	struct uep *a = rdma_uep_create(test, e->ctx, 8, 8);
	struct uep *b = rdma_uep_create(test, e->ctx, 8, 8);
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
 * A request split across turns never leaves its last chunk shorter than
 * 16 bytes, so the final word (uapi: "What a receiver may rely on") is
 * written whole by the last turn, after every other byte. With
 * rdma_max_xfer = 4096, 2 * 4096 + 5 bytes go as 4096, 4085 and 16:
 * before the last turn the destination shows exactly the bytes of the
 * turns so far, and not the final word.
 */
static void a_split_never_separates_the_final_word_from_its_tail(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	const u64 len = 2 * SPLIT_XFER + 5;
	const u64 want[] = { SPLIT_XFER, 2 * SPLIT_XFER + 5 - 16, len };
	struct src s = src_create(test, e, len + PAGE_SIZE, 9);
	struct dst d = dst_create(test, e, len + 2 * PAGE_SIZE, BIG_AP_OFF,
				  len + PAGE_SIZE, CLANQ_RIGHT_WRITE);
	struct uep *a = rdma_uep_create(test, e->ctx, 8, 8);
	struct clanq_rdma_req r;
	unsigned int turn;

	max_xfer_set(test, SPLIT_XFER);
	r = mkreq(s.id, d.ap, BIG_SRC_OFF, BIG_DST_OFF, len, COOKIE(3), SIG_LAST);
	post(test, a, &r);
	kick(test, a);
	for (turn = 0; turn < ARRAY_SIZE(want); turn++) {
		KUNIT_ASSERT_PTR_EQ_MSG(test, step(e), a->ep, "turn %u", turn + 1);
		memset(d.want, 0, d.r->len);
		dst_expect(&d, &s, &r, want[turn]);
		KUNIT_ASSERT_EQ_MSG(test, region_diff(test, d.r, d.want), INTACT,
				    "after turn %u: %llu bytes expected", turn + 1,
				    want[turn]);
		KUNIT_ASSERT_EQ_MSG(test, unread(a), turn + 1 == ARRAY_SIZE(want),
				    "completion after turn %u", turn + 1);
	}
	expect_comp(test, a, COOKIE(3), len, 0);
}

/*
 * Doorbells.
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
	struct uep *a = rdma_uep_create(test, e->ctx, 8, 8);
	struct uep *b = rdma_uep_create(test, e->ctx, 8, 8);
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
	struct uep *u = rdma_uep_create(test, e->ctx, 8, FULL_CQ_SLOTS);
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

static struct kunit_case clanq_rdma_engine_cases[] = {
	KUNIT_CASE(active_queues_are_served_round_robin),
	KUNIT_CASE(a_context_with_many_busy_queues_does_not_starve_another),
	KUNIT_CASE(a_context_leaves_the_line_with_its_last_queue),
	KUNIT_CASE(a_turn_serves_one_whole_logical_message),
	KUNIT_CASE(a_turn_ends_after_64_requests_even_inside_a_message),
	KUNIT_CASE(a_large_request_is_split_and_others_pass_it),
	KUNIT_CASE(a_split_never_separates_the_final_word_from_its_tail),
	KUNIT_CASE(doorbell_word_follows_the_engine_and_kicks_queue_once),
	KUNIT_CASE(full_completion_queue_stops_the_queue_until_kicked),
	{}
};

static struct kunit_suite clanq_rdma_engine_suite = {
	.name = "clanq_rdma_engine",
	.init = rdma_test_init,
	.test_cases = clanq_rdma_engine_cases,
};

kunit_test_suites(&clanq_rdma_engine_suite);
