// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for shared services (driver/endpoint.c, CLANQ_EP_SHARED):
 * a group of endpoints at one service number, each message to the
 * service delivered to one member by a hash of its source and flow key.
 *
 * Who joins (the same user only, never beside an unshared endpoint, at
 * most CLANQ_SHARED_MAX), that every copy of a flow's message reaches
 * one member while different flows spread, that a member leaving or its
 * context dying takes it out of the group and the last one takes the
 * group, and that joins and leaves racing deliveries are safe (KASAN,
 * lockdep and kmemleak watch that one).
 */
#include <kunit/test.h>
#include <linux/delay.h>
#include <linux/module.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

#define SH_INDEX	21
#define SH_NODE		0x5e00u
#define SERVICE		4242u
#define SLOTS		8
#define NR_FLOWS	256
#define NR_CHURN	2
#define CHURN_ROUNDS	100
#define CHURN_MSGS	4000

static int shared_test_init(struct kunit *test)
{
	return nic_fixture_init(test, SH_INDEX, SH_NODE);
}

/* A member of @service for @ctx, or the ERR_PTR the driver refused with. */
static struct clanq_kep *member_try(struct clanq_ctx *ctx, u32 service)
{
	struct clanq_kep *ep;

	mutex_lock(&ctx->lock);
	ep = clanq_kep_create_shared(ctx, SLOTS, CLANQ_DEFAULT_RDMA_SLOTS,
				     CLANQ_DEFAULT_RDMA_SLOTS,
				     CLANQ_DEFAULT_TW_SLOTS, service);
	mutex_unlock(&ctx->lock);
	return ep;
}

static struct clanq_kep *member_add(struct kunit *test, struct clanq_ctx *ctx)
{
	struct clanq_kep *ep = member_try(ctx, SERVICE);

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ep);
	return ep;
}

/* An unshared endpoint at @service, or the ERR_PTR. */
static struct clanq_kep *unshared_try(struct clanq_ctx *ctx, u32 service)
{
	struct clanq_kep *ep;

	mutex_lock(&ctx->lock);
	ep = clanq_kep_create(ctx, SLOTS, CLANQ_DEFAULT_RDMA_SLOTS,
			      CLANQ_DEFAULT_RDMA_SLOTS, CLANQ_DEFAULT_TW_SLOTS,
			      service);
	mutex_unlock(&ctx->lock);
	return ep;
}

/*
 * A CONNECT-like message of flow @flow from sender @sender: its first
 * CLANQ_SHARED_KEY_BYTES name the flow, the rest (@attempt) differs
 * from copy to copy, as a retransmission's attempt counter does.
 */
static void flow_msg(struct clanq_oob_msg *m, u32 sender, u32 flow,
		     u32 attempt)
{
	u32 i;

	memset(m, 0, sizeof(*m));
	m->type = CLANQ_OOB_TYPE_USER;
	m->len = CLANQ_OOB_PAYLOAD;
	m->src.node = PEER_NODE;
	m->src.id = sender;
	for (i = 0; i < CLANQ_SHARED_KEY_BYTES; i++)
		m->payload[i] = (u8)(flow * 13 + i);
	memcpy(m->payload + 4, &flow, sizeof(flow));
	for (; i < CLANQ_OOB_PAYLOAD; i++)
		m->payload[i] = (u8)(attempt + i);
}

/* Which member a delivery of @m to the service would reach (unpinned). */
static struct clanq_kep *picked(struct kunit *test, struct nic_fixture *f,
				const struct clanq_oob_msg *m)
{
	struct clanq_kep *ep = clanq_kep_lookup_dst(&f->nic, SERVICE, m);

	if (ep)
		clanq_kep_put(ep);	/* the group still holds it */
	return ep;
}

static u64 delivered(const struct clanq_kep *ep)
{
	return READ_ONCE(ep->counters->oob_delivered);
}

/*
 * Members of one user join one service, each with an id of its own; a
 * message to the service reaches a member, a lookup of the service by
 * id finds no endpoint, and each member is found by its own id.
 */
static void members_join_with_ids_of_their_own(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_ctx *ctx2 = ctx_add(test, &f->nic);
	struct clanq_kep *a = member_add(test, f->ctx);
	struct clanq_kep *b = member_add(test, ctx2);
	struct clanq_kep *c = member_add(test, f->ctx);
	struct clanq_oob_msg m;
	struct clanq_kep *ep;

	KUNIT_EXPECT_GT(test, a->id, CLANQ_SERVICE_MAX);
	KUNIT_EXPECT_GT(test, b->id, CLANQ_SERVICE_MAX);
	KUNIT_EXPECT_NE(test, a->id, b->id);
	KUNIT_EXPECT_NE(test, a->id, c->id);
	KUNIT_EXPECT_PTR_EQ(test, a->group, b->group);
	KUNIT_EXPECT_PTR_EQ(test, a->group, c->group);
	KUNIT_ASSERT_NOT_NULL(test, a->group);
	KUNIT_EXPECT_EQ(test, a->group->nr, 3);
	KUNIT_EXPECT_NULL(test, clanq_kep_lookup(&f->nic, SERVICE));

	ep = clanq_kep_lookup(&f->nic, b->id);
	KUNIT_EXPECT_PTR_EQ(test, ep, b);
	if (ep)
		clanq_kep_put(ep);

	flow_msg(&m, 1, 1, 0);
	KUNIT_EXPECT_EQ(test, clanq_rx_oob(&f->nic, SERVICE, &m), 0);
	KUNIT_EXPECT_EQ(test, delivered(a) + delivered(b) + delivered(c), 1);
}

/*
 * Every copy of a flow's message (same source, same first
 * CLANQ_SHARED_KEY_BYTES, any rest) reaches the same member; flows from
 * one sender spread over the members; what delivery counts agrees.
 */
static void a_flow_sticks_to_one_member_and_flows_spread(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_kep *ep[2] = { member_add(test, f->ctx),
				    member_add(test, f->ctx) };
	struct clanq_oob_msg m;
	struct clanq_kep *first, *again;
	u32 flow, attempt, to_a = 0;

	for (flow = 0; flow < NR_FLOWS; flow++) {
		flow_msg(&m, 7, flow, 0);
		first = picked(test, f, &m);
		KUNIT_ASSERT_TRUE(test, first == ep[0] || first == ep[1]);
		to_a += first == ep[0];
		for (attempt = 1; attempt < 4; attempt++) {
			flow_msg(&m, 7, flow, attempt);
			again = picked(test, f, &m);
			KUNIT_EXPECT_PTR_EQ_MSG(test, again, first,
						"flow %u attempt %u", flow,
						attempt);
		}
	}
	/* 256 fair coin flips: outside 64..192 once in ~10^15 */
	KUNIT_EXPECT_GT(test, to_a, NR_FLOWS / 4);
	KUNIT_EXPECT_LT(test, to_a, NR_FLOWS - NR_FLOWS / 4);

	/* delivery goes where the pick says (queues of 7: a few each) */
	flow_msg(&m, 7, 3, 0);
	first = picked(test, f, &m);
	KUNIT_EXPECT_EQ(test, clanq_rx_oob(&f->nic, SERVICE, &m), 0);
	flow_msg(&m, 7, 3, 9);
	KUNIT_EXPECT_EQ(test, clanq_rx_oob(&f->nic, SERVICE, &m), 0);
	KUNIT_EXPECT_EQ(test, delivered(first), 2);
	KUNIT_EXPECT_EQ(test, delivered(first == ep[0] ? ep[1] : ep[0]), 0);
}

/*
 * Another user cannot join (its context opened by another euid), an
 * unshared endpoint cannot take a shared service, and a shared one
 * cannot join a service held unshared: all -EADDRINUSE, explained.
 */
static void another_user_or_an_unshared_endpoint_is_refused(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_ctx *other = ctx_add(test, &f->nic);
	struct clanq_kep *a = member_add(test, f->ctx);
	struct clanq_kep *ep;

	other->uid = KUIDT_INIT(__kuid_val(f->ctx->uid) + 1000);
	ep = member_try(other, SERVICE);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ep), -EADDRINUSE);
	KUNIT_EXPECT_EQ(test, a->group->nr, 1);
	KUNIT_EXPECT_EQ(test, other->nr_eps, 0);

	ep = unshared_try(f->ctx, SERVICE);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ep), -EADDRINUSE);

	ep = unshared_try(f->ctx, SERVICE + 1);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ep);
	ep = member_try(f->ctx, SERVICE + 1);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(ep), -EADDRINUSE);
	KUNIT_EXPECT_EQ(test, f->ctx->nr_eps, 2);
}

/* CLANQ_SHARED_MAX members, then -ENOSPC; one leaves, one may join. */
static void a_group_holds_at_most_shared_max(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_kep *ep[CLANQ_SHARED_MAX], *more;
	u32 i;

	for (i = 0; i < CLANQ_SHARED_MAX; i++)
		ep[i] = member_add(test, f->ctx);
	more = member_try(f->ctx, SERVICE);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(more), -ENOSPC);
	ep_destroy(f->ctx, ep[5]);
	more = member_try(f->ctx, SERVICE);
	KUNIT_EXPECT_FALSE(test, IS_ERR_OR_NULL(more));
}

/*
 * A member that leaves gets nothing more, the others get all; the last
 * one takes the group: the service is free again (unshared too), and a
 * message to it finds nobody. kmemleak would see a group left behind.
 */
static void leaving_members_and_the_last_one_free_the_group(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_kep *a = member_add(test, f->ctx);
	struct clanq_kep *b = member_add(test, f->ctx);
	struct clanq_oob_msg m;
	struct clanq_kep *ep;
	u32 flow;

	ep_destroy(f->ctx, a);
	KUNIT_EXPECT_EQ(test, b->group->nr, 1);
	for (flow = 0; flow < NR_FLOWS; flow++) {
		flow_msg(&m, 7, flow, 0);
		KUNIT_EXPECT_PTR_EQ(test, picked(test, f, &m), b);
	}
	ep_destroy(f->ctx, b);
	KUNIT_EXPECT_NULL(test, xa_load(&f->nic.eps, SERVICE));
	flow_msg(&m, 7, 0, 0);
	KUNIT_EXPECT_EQ(test, clanq_rx_oob(&f->nic, SERVICE, &m), -ENOENT);

	ep = unshared_try(f->ctx, SERVICE);
	KUNIT_EXPECT_FALSE(test, IS_ERR_OR_NULL(ep));
	if (!IS_ERR_OR_NULL(ep))
		KUNIT_EXPECT_EQ(test, ep->id, SERVICE);
}

/* A dying process: its context's teardown takes its members out. */
static void a_dying_context_leaves_the_group(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_ctx *dying = clanq_ctx_create(&f->nic);
	struct clanq_kep *a = member_add(test, f->ctx);
	struct clanq_oob_msg m;
	u32 flow;

	KUNIT_ASSERT_NOT_NULL(test, dying);
	member_add(test, dying);
	member_add(test, dying);
	KUNIT_EXPECT_EQ(test, a->group->nr, 3);
	clanq_ctx_put(dying);
	KUNIT_EXPECT_EQ(test, a->group->nr, 1);
	for (flow = 0; flow < NR_FLOWS; flow++) {
		flow_msg(&m, 9, flow, 0);
		KUNIT_EXPECT_PTR_EQ(test, picked(test, f, &m), a);
	}
}

/* Joins and leaves racing deliveries: each thread on a context of its own. */
struct churn {
	struct clanq_ctx *ctx;
	struct completion *go;
	atomic_t *running;
	u32 joined;
	int err;
};

static int churn_fn(void *data)
{
	struct churn *c = data;
	struct clanq_kep *ep;
	u32 i;

	while (!wait_for_completion_timeout(c->go, HZ / 10))
		if (kthread_should_stop())
			goto out;
	for (i = 0; i < CHURN_ROUNDS && !kthread_should_stop(); i++) {
		ep = member_try(c->ctx, SERVICE);
		if (IS_ERR(ep)) {
			c->err = PTR_ERR(ep);
			break;
		}
		c->joined++;
		cond_resched();
		mutex_lock(&c->ctx->lock);
		clanq_kep_destroy(ep);
		mutex_unlock(&c->ctx->lock);
	}
out:
	/* the counts above before "done": pairs with the test's barrier */
	smp_mb__before_atomic();
	atomic_dec(c->running);
	return 0;
}

struct flow_sender {
	struct clanq_nic *nic;
	struct completion *go;
	atomic_t *running;
	u32 queued, refused, other;
};

static int flow_sender_fn(void *data)
{
	struct flow_sender *s = data;
	struct clanq_oob_msg m;
	u32 i;
	int r;

	while (!wait_for_completion_timeout(s->go, HZ / 10))
		if (kthread_should_stop())
			goto out;
	for (i = 0; i < CHURN_MSGS && !kthread_should_stop(); i++) {
		flow_msg(&m, 11, i, 0);
		r = clanq_rx_oob(s->nic, SERVICE, &m);
		if (!r || r == -ENOBUFS)
			s->queued++;
		else if (r == -ENOENT)
			s->refused++;	/* picked a member as it left */
		else
			s->other++;
		cond_resched();
	}
out:
	/* the counts above before "done": pairs with the test's barrier */
	smp_mb__before_atomic();
	atomic_dec(s->running);
	return 0;
}

static void joins_and_leaves_racing_deliveries_are_safe(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_kep *stay = member_add(test, f->ctx);
	struct churn c[NR_CHURN] = {};
	struct flow_sender s = { .nic = &f->nic };
	DECLARE_COMPLETION_ONSTACK(go);
	atomic_t running = ATOMIC_INIT(NR_CHURN + 1);
	unsigned long deadline = jiffies + 120 * HZ;
	u32 t;

	s.go = &go;
	s.running = &running;
	thread_start(test, flow_sender_fn, &s, "shsend", 0);
	for (t = 0; t < NR_CHURN; t++) {
		c[t].ctx = ctx_add(test, &f->nic);
		c[t].go = &go;
		c[t].running = &running;
		thread_start(test, churn_fn, &c[t], "shchurn", t);
	}
	complete_all(&go);
	while (atomic_read(&running) && time_before(jiffies, deadline))
		msleep(20);
	KUNIT_ASSERT_EQ(test, atomic_read(&running), 0);
	/* "done" before the threads' counts: pairs with theirs */
	smp_mb__after_atomic();

	for (t = 0; t < NR_CHURN; t++) {
		KUNIT_EXPECT_EQ_MSG(test, c[t].err, 0, "thread %u", t);
		KUNIT_EXPECT_EQ_MSG(test, c[t].joined, CHURN_ROUNDS, "thread %u", t);
		KUNIT_EXPECT_EQ(test, c[t].ctx->nr_eps, 0);
	}
	KUNIT_EXPECT_EQ(test, s.other, 0);
	KUNIT_EXPECT_EQ(test, s.queued + s.refused, CHURN_MSGS);
	/* the member that stayed is the group again, alone */
	KUNIT_EXPECT_EQ(test, stay->group->nr, 1);
	KUNIT_EXPECT_PTR_EQ(test, stay->group->member[0], stay);
}

static struct kunit_case clanq_shared_cases[] = {
	KUNIT_CASE(members_join_with_ids_of_their_own),
	KUNIT_CASE(a_flow_sticks_to_one_member_and_flows_spread),
	KUNIT_CASE(another_user_or_an_unshared_endpoint_is_refused),
	KUNIT_CASE(a_group_holds_at_most_shared_max),
	KUNIT_CASE(leaving_members_and_the_last_one_free_the_group),
	KUNIT_CASE(a_dying_context_leaves_the_group),
	KUNIT_CASE(joins_and_leaves_racing_deliveries_are_safe),
	{}
};

static struct kunit_suite clanq_shared_suite = {
	.name = "clanq_shared",
	.init = shared_test_init,
	.test_cases = clanq_shared_cases,
};

kunit_test_suites(&clanq_shared_suite);
