// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the unified event queue (driver/evq.c), what deliveries
 * post: one event for the registration a message reached, no second one
 * until the application has cleared its bit, an event at once for messages
 * that arrived before the registration, one each for a thousand
 * registrations, and at most one per registration under concurrent wakers.
 *
 * The fixture, and how every test runs: evq_fixture.h.
 */
#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/bitmap.h>
#include <linux/bitops.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/string.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "evq_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

/* Counts chosen for a KASAN + lockdep kernel under qemu TCG. */
#define BURST			100
#define BURST_SLOTS		128
#define MANY_REGS		1000
#define NR_WAKERS		4
#define NR_WAKE_EPS		8
#define MSGS_PER_WAKER		1500
#define WAKE_EP_SLOTS		64
#define WAKE_BATCH		16	/* >= the ring of NR_WAKE_EPS regs */
#define WAIT_TIMEOUT		(60 * HZ)

/*
 * One message raises one event, on the registration of the endpoint it
 * reached and no other: its index, its cookie, CLANQ_EV_OOB, and that
 * registration's pending bit set.
 */
static void one_delivery_raises_one_event_for_its_registration(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 4);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));
	u32 ib = reg_oob(test, q, b, COOKIE(2));

	KUNIT_ASSERT_NE(test, ia, ib);
	expect_no_event(test, q);
	KUNIT_EXPECT_FALSE(test, test_bit(ia, q->pending));
	KUNIT_EXPECT_FALSE(test, test_bit(ib, q->pending));

	deliver_n(test, f, b, 1);

	KUNIT_EXPECT_TRUE(test, test_bit(ib, q->pending));
	KUNIT_EXPECT_FALSE(test, test_bit(ia, q->pending));
	expect_event(test, q, ib, COOKIE(2));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.evq_overflows), 0);
	KUNIT_EXPECT_EQ(test, READ_ONCE(b->counters->events), 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(a->counters->events), 0);
	KUNIT_EXPECT_FALSE(test, stray_pending_bit(q));
}

/*
 * At most once: while a registration's bit is set, however many messages
 * arrive, and whether or not its event has been dequeued, no second event
 * is posted. Once the application has dequeued, cleared the bit and
 * drained, the next message raises a new one.
 */
static void deliveries_raise_one_event_until_the_bit_is_cleared(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, BURST_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(7));

	deliver_n(test, f, a, BURST);
	expect_event(test, q, ia, COOKIE(7));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);

	/* dequeued, bit still set: still nothing new */
	deliver_n(test, f, a, 1);
	expect_no_event(test, q);
	KUNIT_EXPECT_TRUE(test, test_bit(ia, q->pending));

	ack(q, ia);
	KUNIT_EXPECT_EQ(test, drain(a), BURST + 1);
	expect_no_event(test, q);

	deliver_n(test, f, a, 1);
	expect_event(test, q, ia, COOKIE(7));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 2);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.evq_overflows), 0);
}

/*
 * Messages that arrived before the registration raise its event when it
 * is made; an endpoint with nothing unread (never received, or consumed
 * everything) raises none.
 */
static void registration_after_arrival_raises_an_event_at_once(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uep *early = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *empty = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *read = uep_create(test, f->ctx, EP_SLOTS);
	struct uevq *q;
	u32 i;

	deliver_n(test, f, early, 3);
	deliver_n(test, f, read, 2);
	KUNIT_EXPECT_EQ(test, drain(read), 2);

	q = uevq_create(test, f, 4);
	i = reg_oob(test, q, early, COOKIE(1));
	KUNIT_EXPECT_TRUE(test, test_bit(i, q->pending));
	expect_event(test, q, i, COOKIE(1));
	expect_no_event(test, q);

	i = reg_oob(test, q, empty, COOKIE(2));
	KUNIT_EXPECT_FALSE(test, test_bit(i, q->pending));
	i = reg_oob(test, q, read, COOKIE(3));
	KUNIT_EXPECT_FALSE(test, test_bit(i, q->pending));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);
}

/*
 * A thousand endpoints on one evq, one message each: exactly a thousand
 * events, one per registration index, each with its registration's
 * cookie, and no overflow.
 */
static void thousand_registrations_each_raise_exactly_one_event(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, MANY_REGS);
	struct clanq_kep **ep = kunit_kcalloc(test, MANY_REGS, sizeof(*ep),
					     GFP_KERNEL);
	u32 *owner = kunit_kcalloc(test, MANY_REGS, sizeof(*owner),
				   GFP_KERNEL);
	unsigned long *seen = kunit_kcalloc(test, BITS_TO_LONGS(MANY_REGS),
					    sizeof(long), GFP_KERNEL);
	struct clanq_ioc_ep_create c;
	struct clanq_event ev;
	u32 k, n;
	int index;

	KUNIT_ASSERT_NOT_NULL(test, ep);
	KUNIT_ASSERT_NOT_NULL(test, owner);
	KUNIT_ASSERT_NOT_NULL(test, seen);
	for (k = 0; k < MANY_REGS; k++) {
		ep[k] = ep_create(test, f->ctx, 2, &c);
		index = clanq_kevq_register_ep(q->evq, ep[k]->id, CLANQ_EV_OOB,
					       COOKIE(k));
		KUNIT_ASSERT_GE_MSG(test, index, 0, "registration %u", k);
		KUNIT_ASSERT_LT(test, index, MANY_REGS);
		owner[index] = k;
	}

	for (k = 0; k < MANY_REGS; k++)
		KUNIT_ASSERT_EQ(test, deliver(f, ep[k]->id, k), 0);

	for (n = 0; n < MANY_REGS && clanq_q_get(&q->ring, &ev); n++) {
		KUNIT_ASSERT_LT(test, ev.reg, MANY_REGS);
		KUNIT_ASSERT_FALSE_MSG(test, __test_and_set_bit(ev.reg, seen),
				       "second event for registration %u",
				       ev.reg);
		KUNIT_EXPECT_EQ(test, ev.cookie, COOKIE(owner[ev.reg]));
		KUNIT_EXPECT_EQ(test, ev.events, CLANQ_EV_OOB);
	}
	KUNIT_EXPECT_EQ(test, n, MANY_REGS);
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), MANY_REGS);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.evq_overflows), 0);
}

/*
 * Many concurrent wakers: kthreads (senders, see kunit_util.h) delivering
 * to endpoints registered on one evq while the test thread plays the
 * application.
 */

/* The application's side of the concurrent test. */
struct app {
	struct uevq *q;
	struct uep *by_reg[NR_WAKE_EPS];
	u64 cookie[NR_WAKE_EPS];
	bool outstanding[NR_WAKE_EPS];	/* event taken, bit not yet cleared */
	u32 next[NR_WAKE_EPS][NR_WAKERS];	/* per endpoint and sender */
	u32 got[NR_WAKERS];
	u64 events;
};

/* Does the ring, beyond what the application took, hold an event for @reg? */
static bool ring_holds(struct kunit *test, struct uevq *q, u32 reg)
{
	struct clanq_event ev;
	u32 prod, i;

	/* (C) in queue.h: the slots before prod are published and stable */
	prod = smp_load_acquire(q->prod);

	KUNIT_ASSERT_LE(test, prod, q->mask);
	for (i = q->ring.own; i != prod; i = (i + 1) & q->mask) {
		memcpy(&ev, q->seg + q->c.ring.slots + (size_t)i * sizeof(ev),
		       sizeof(ev));
		if (ev.reg == reg)
			return true;
	}
	return false;
}

/* Drain @u, reached through registration @reg, checking every message. */
static void app_drain(struct kunit *test, struct app *app, u32 reg)
{
	struct clanq_oob_msg m, want;
	u32 tag, seq;

	while (clanq_q_get(&app->by_reg[reg]->q, &m)) {
		tag = m.src.id;
		seq = msg_seq(&m);
		KUNIT_ASSERT_LT_MSG(test, tag, NR_WAKERS, "type %#x", m.type);
		KUNIT_ASSERT_LT(test, seq, MSGS_PER_WAKER);
		msg_fill(&want, tag, seq);
		KUNIT_ASSERT_MEMEQ(test, &m, &want, sizeof(m));
		KUNIT_ASSERT_GE_MSG(test, seq, app->next[reg][tag],
				    "registration %u, sender %u: message %u out of order",
				    reg, tag, seq);
		app->next[reg][tag] = seq + 1;
		app->got[tag]++;
	}
}

/*
 * Take every event in the ring (so that a second event for one index
 * would be seen), then for each: check that the ring holds no other event
 * for its index, clear the bit, drain the endpoint.
 */
static u32 app_round(struct kunit *test, struct app *app)
{
	struct clanq_event ev[WAKE_BATCH];
	u32 n, i, reg;

	for (n = 0; n < WAKE_BATCH && clanq_q_get(&app->q->ring, &ev[n]); n++) {
		reg = ev[n].reg;
		KUNIT_ASSERT_LT(test, reg, NR_WAKE_EPS);
		KUNIT_ASSERT_NOT_NULL(test, app->by_reg[reg]);
		KUNIT_ASSERT_EQ(test, ev[n].cookie, app->cookie[reg]);
		KUNIT_ASSERT_EQ(test, ev[n].events, CLANQ_EV_OOB);
		KUNIT_ASSERT_FALSE_MSG(test, app->outstanding[reg],
				       "two events for registration %u in the ring",
				       reg);
		app->outstanding[reg] = true;
	}
	for (i = 0; i < n; i++) {
		reg = ev[i].reg;
		KUNIT_ASSERT_FALSE_MSG(test, ring_holds(test, app->q, reg),
				       "event for registration %u posted while its bit was set",
				       reg);
		ack(app->q, reg);
		app->outstanding[reg] = false;
		app_drain(test, app, reg);
	}
	app->events += n;
	return n;
}

/*
 * Under concurrent wakers the ring never holds two events for one
 * registration, never overflows, and loses no wake-up: once the wakers
 * are done and the application has handled every event, no endpoint has
 * an unread message; every message is accounted once, in sender order.
 */
static void concurrent_wakers_post_at_most_one_event_per_registration(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, NR_WAKE_EPS);
	struct app *app = kunit_kzalloc(test, sizeof(*app), GFP_KERNEL);
	struct sender *w = kunit_kcalloc(test, NR_WAKERS, sizeof(*w),
					 GFP_KERNEL);
	u32 *ids = kunit_kcalloc(test, NR_WAKE_EPS, sizeof(*ids), GFP_KERNEL);
	struct completion *go = kunit_kzalloc(test, sizeof(*go), GFP_KERNEL);
	atomic_t *running = kunit_kzalloc(test, sizeof(*running), GFP_KERNEL);
	struct task_struct *task[NR_WAKERS];
	u64 delivered = 0, dropped = 0, ep_events = 0;
	unsigned long deadline;
	u32 e, t, reg, rounds;
	struct uep *u;

	KUNIT_ASSERT_NOT_NULL(test, app);
	KUNIT_ASSERT_NOT_NULL(test, w);
	KUNIT_ASSERT_NOT_NULL(test, ids);
	KUNIT_ASSERT_NOT_NULL(test, go);
	KUNIT_ASSERT_NOT_NULL(test, running);
	KUNIT_ASSERT_LE(test, q->nr_slots, WAKE_BATCH);
	app->q = q;
	for (e = 0; e < NR_WAKE_EPS; e++) {
		u = uep_create(test, f->ctx, WAKE_EP_SLOTS);
		reg = reg_oob(test, q, u, COOKIE(e));
		app->by_reg[reg] = u;
		app->cookie[reg] = COOKIE(e);
		ids[e] = u->id;
	}

	init_completion(go);
	atomic_set(running, NR_WAKERS);
	for (t = 0; t < NR_WAKERS; t++) {
		w[t] = (struct sender){ .nic = &f->nic, .dst = ids,
					.nr_dst = NR_WAKE_EPS,
					.nr_msgs = MSGS_PER_WAKER, .tag = t,
					.go = go, .running = running };
		task[t] = thread_start(test, sender_fn, &w[t], "evq", t);
	}

	complete_all(go);
	deadline = jiffies + WAIT_TIMEOUT;
	while (atomic_read_acquire(running)) {
		if (!app_round(test, app))
			usleep_range(20, 100);
		KUNIT_ASSERT_TRUE_MSG(test, time_before(jiffies, deadline),
				      "wakers still running after %u s",
				      WAIT_TIMEOUT / HZ);
	}
	for (t = 0; t < NR_WAKERS; t++)
		kunit_release_action(test, kthread_stop_put_action, task[t]);

	/* nothing posts any more: what is left takes a bounded few rounds */
	for (rounds = 0; rounds < 4; rounds++)
		if (!app_round(test, app))
			break;
	expect_no_event(test, q);

	for (reg = 0; reg < NR_WAKE_EPS; reg++) {
		KUNIT_EXPECT_TRUE_MSG(test, clanq_q_empty(&app->by_reg[reg]->q),
				      "registration %u: unread messages, no event",
				      reg);
		KUNIT_EXPECT_FALSE(test, test_bit(reg, q->pending));
		ep_events += READ_ONCE(app->by_reg[reg]->counters->events);
	}
	senders_check(test, w, NR_WAKERS, app->got, &delivered, &dropped);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.evq_overflows), 0);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), app->events);
	KUNIT_EXPECT_EQ(test, ep_events, app->events);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_delivered), delivered);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_dropped), dropped);
	kunit_info(test, "%llu events, %llu delivered, %llu dropped\n",
		   app->events, delivered, dropped);
}

static struct kunit_case clanq_evq_events_cases[] = {
	KUNIT_CASE(one_delivery_raises_one_event_for_its_registration),
	KUNIT_CASE(deliveries_raise_one_event_until_the_bit_is_cleared),
	KUNIT_CASE(registration_after_arrival_raises_an_event_at_once),
	KUNIT_CASE(thousand_registrations_each_raise_exactly_one_event),
	KUNIT_CASE(concurrent_wakers_post_at_most_one_event_per_registration),
	{}
};

static struct kunit_suite clanq_evq_events_suite = {
	.name = "clanq_evq_events",
	.init = evq_test_init,
	.test_cases = clanq_evq_events_cases,
};

kunit_test_suites(&clanq_evq_events_suite);
