// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the unified event queue (driver/evq.c): endpoints
 * registered on an evq post events to its ring when OOB messages reach
 * them, at most once per registration until the application dequeues the
 * event and clears the registration's pending bit.
 *
 * Every test gets a NIC of its own, with no device, and a context on it.
 * The test plays the application: it attaches to the evq's segment with
 * the layout clanq_kevq_create() publishes and dequeues as libclanq does
 * (clanq_kevq_poll() in include/clanq.h): take the event, clear its bit
 * with a fully ordered atomic, then drain the endpoint. It attaches to
 * endpoints the same way (see oob_kunit.c). What the driver did is judged
 * from the segments and the NIC's counters only.
 *
 * Guard bytes: the application may write any byte of the evq segment, and
 * the driver reads only the ring's consumer index and its own bits of the
 * pending map. So the hostile tests fill every other byte with GUARD_BYTE,
 * and the driver must never change one.
 */
#include <kunit/test.h>
#include <linux/bitmap.h>
#include <linux/bitops.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

MODULE_IMPORT_NS(CLANQ_KUNIT);

#define TEST_NIC_INDEX	8
#define TEST_NODE	0x7e58u
#define COOKIE(i)	(0xc0c0000000000000ull | ((u64)(i) << 8) | 0x5a)

/* Counts chosen for a KASAN + lockdep kernel under qemu TCG. */
#define EP_SLOTS		8
#define BURST			100
#define BURST_SLOTS		128
#define MANY_REGS		1000
#define NR_WAKERS		4
#define NR_WAKE_EPS		8
#define MSGS_PER_WAKER		1500
#define WAKE_EP_SLOTS		64
#define WAKE_BATCH		16	/* >= the ring of NR_WAKE_EPS regs */
#define HOSTILE_REGS		4	/* a ring of 8 slots */
#define HOSTILE_EP_SLOTS	64
#define WAIT_TIMEOUT		(60 * HZ)

KUNIT_DEFINE_ACTION_WRAPPER(evq_destroy_action, clanq_kevq_destroy,
			    struct clanq_kevq *);

/* An endpoint as its application sees it. */
struct uep {
	struct clanq_kep *ep;
	u32 id;
	struct clanq_ioc_ep_create c;
	struct clanq_queue q;		/* the OOB queue's consumer side */
	struct clanq_ep_counters *counters;
};

/* An evq as its application sees it. */
struct uevq {
	struct clanq_kevq *evq;
	u32 max_regs;
	struct clanq_ioc_evq_create c;	/* what EVQ_CREATE would return */
	u8 *seg;
	size_t size;
	struct clanq_queue ring;	/* the ring's consumer side */
	u32 *prod;			/* the driver's published index */
	u32 *cons;			/* the application's index word */
	u32 nr_slots;
	u32 mask;
	unsigned long *pending;		/* the map, c.nr_words 64-bit words */
	size_t pending_bytes;
};

/*
 * Each test: a fresh NIC and one context on it (kunit_util.h). Threads,
 * evqs and contexts a test adds are torn down first.
 */
static int evq_test_init(struct kunit *test)
{
	return nic_fixture_init(test, TEST_NIC_INDEX, TEST_NODE);
}

/* An endpoint of @ctx, owned by it, attached to as the library would. */
static struct uep *uep_create(struct kunit *test, struct clanq_ctx *ctx,
			      u32 slots)
{
	struct uep *u = kunit_kzalloc(test, sizeof(*u), GFP_KERNEL);
	void *seg;

	KUNIT_ASSERT_NOT_NULL(test, u);
	u->ep = ep_create(test, ctx, slots, &u->c);
	u->id = u->ep->id;
	seg = u->ep->shm->vaddr;
	KUNIT_ASSERT_EQ(test, u->c.mmap_size, u->ep->shm->size);
	KUNIT_ASSERT_LE(test, u->c.counters + sizeof(*u->counters),
			u->c.mmap_size);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&u->q, seg, u->c.mmap_size,
					   &u->c.oob), 0);
	u->counters = (struct clanq_ep_counters *)((u8 *)seg + u->c.counters);
	return u;
}

/*
 * An evq of the fixture's context for @max_regs registrations, attached
 * to as libclanq attaches (lib/evq.c), with the same checks; destroyed at
 * cleanup unless the test does it first.
 */
static struct uevq *uevq_create(struct kunit *test, struct nic_fixture *f,
				u32 max_regs)
{
	struct uevq *q = kunit_kzalloc(test, sizeof(*q), GFP_KERNEL);
	struct clanq_kevq *evq;

	KUNIT_ASSERT_NOT_NULL(test, q);
	q->c.max_regs = max_regs;
	evq = clanq_kevq_create(f->ctx, max_regs, &q->c);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evq);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							evq_destroy_action,
							evq), 0);
	q->evq = evq;
	q->max_regs = max_regs;
	q->seg = clanq_kevq_seg_for_kunit(evq);
	q->size = q->c.mmap_size;
	KUNIT_ASSERT_EQ(test, q->c.max_regs, max_regs);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&q->ring, q->seg, q->size,
					   &q->c.ring), 0);
	KUNIT_ASSERT_EQ(test, q->c.ring.slot_size,
			sizeof(struct clanq_event));
	/* room for one event of every registration */
	KUNIT_ASSERT_GT(test, q->c.ring.nr_slots, max_regs);
	KUNIT_ASSERT_EQ(test, q->c.pending % 8, 0);
	KUNIT_ASSERT_GE(test, (u64)q->c.nr_words * 64, max_regs);
	q->pending_bytes = (size_t)q->c.nr_words * 8;
	KUNIT_ASSERT_LE(test, q->c.pending + q->pending_bytes, q->size);

	q->prod = (u32 *)(q->seg + q->c.ring.prod);
	q->cons = (u32 *)(q->seg + q->c.ring.cons);
	q->nr_slots = q->c.ring.nr_slots;
	q->mask = q->nr_slots - 1;
	q->pending = (unsigned long *)(q->seg + q->c.pending);
	return q;
}

/* Register @u on @q for OOB events; the index, which must be valid. */
static u32 reg_oob(struct kunit *test, struct uevq *q, struct uep *u,
		   u64 cookie)
{
	int index = clanq_kevq_register_ep(q->evq, u->id, CLANQ_EV_OOB,
					  cookie);

	KUNIT_ASSERT_GE_MSG(test, index, 0, "register endpoint %u", u->id);
	KUNIT_ASSERT_LT(test, index, q->max_regs);
	return index;
}

static int deliver(struct nic_fixture *f, u32 id, u32 seq)
{
	struct clanq_oob_msg msg;

	msg_fill(&msg, 0, seq);
	return clanq_rx_oob(&f->nic, id, &msg);
}

/* Deliver @n messages to @u, all of which must be queued. */
static void deliver_n(struct kunit *test, struct nic_fixture *f,
		      struct uep *u, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ_MSG(test, deliver(f, u->id, i), 0,
				    "message %u to endpoint %u", i, u->id);
}

/* The application drains @u's OOB queue: how many messages it took. */
static u32 drain(struct uep *u)
{
	struct clanq_oob_msg m;
	u32 n = 0;

	while (clanq_q_get(&u->q, &m))
		n++;
	return n;
}

/* Clear @reg's pending bit as the library does: a fully ordered atomic. */
static void ack(struct uevq *q, u32 reg)
{
	clear_bit(reg, q->pending);
	/* pairs with the driver's test_and_set_bit, before the drain */
	smp_mb__after_atomic();
}

/* The next event must be for registration @reg with @cookie. */
static void expect_event(struct kunit *test, struct uevq *q, u32 reg,
			 u64 cookie)
{
	struct clanq_event ev;

	KUNIT_ASSERT_TRUE_MSG(test, clanq_q_get(&q->ring, &ev),
			      "no event, expected one for registration %u",
			      reg);
	KUNIT_EXPECT_EQ(test, ev.reg, reg);
	KUNIT_EXPECT_EQ(test, ev.events, CLANQ_EV_OOB);
	KUNIT_EXPECT_EQ(test, ev.cookie, cookie);
}

static void expect_no_event(struct kunit *test, struct uevq *q)
{
	struct clanq_event ev = {};

	KUNIT_EXPECT_FALSE_MSG(test, clanq_q_get(&q->ring, &ev),
			       "unexpected event: registration %u, cookie %#llx",
			       ev.reg, ev.cookie);
}

/* Is any bit of the pending map at or above max_regs set? */
static bool stray_pending_bit(const struct uevq *q)
{
	unsigned long nbits = q->pending_bytes * BITS_PER_BYTE;

	return find_next_bit(q->pending, nbits, q->max_regs) < nbits;
}

/* The hostile application clears every bit without dequeuing anything. */
static void clear_all_bits(struct uevq *q)
{
	memset(q->pending, 0, q->pending_bytes);
	/* as ordered as the library's clear */
	smp_mb();
}

/* The parts of @q's segment that are not guard bytes, in order. */
static void uevq_spans(const struct uevq *q, struct span s[4])
{
	s[0] = (struct span){ q->c.ring.prod, sizeof(u32) };
	s[1] = (struct span){ q->c.ring.cons, sizeof(u32) };
	s[2] = (struct span){ q->c.ring.slots,
			      (size_t)q->nr_slots * q->c.ring.slot_size };
	s[3] = (struct span){ q->c.pending, q->pending_bytes };
}

static void uevq_guard_fill(struct kunit *test, struct uevq *q)
{
	struct span s[4];

	uevq_spans(q, s);
	guard_fill(test, q->seg, q->size, s, ARRAY_SIZE(s));
}

/* Offset of the first guard byte the driver changed, or INTACT. */
static long uevq_stray_byte(const struct uevq *q)
{
	struct span s[4];

	uevq_spans(q, s);
	return stray_byte(q->seg, q->size, s, ARRAY_SIZE(s));
}

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

/* Endpoints registered on @q, for the hostile tests. */
static void hostile_setup(struct kunit *test, struct nic_fixture *f,
			  struct uevq *q, struct uep **u, u32 *reg)
{
	u32 k;

	for (k = 0; k < HOSTILE_REGS; k++) {
		u[k] = uep_create(test, f->ctx, HOSTILE_EP_SLOTS);
		reg[k] = reg_oob(test, q, u[k], COOKIE(k));
	}
	uevq_guard_fill(test, q);
}

/*
 * The bitmap is the application's, and it may clear bits without
 * dequeuing: then every message posts again. The ring still takes only
 * nr_slots - 1 events; the rest are counted as overflows and written
 * nowhere, and no guard byte or stray bit of the map changes. Once the
 * application dequeues, events are posted again.
 */
static void ring_fills_to_capacity_then_counts_overflows(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, HOSTILE_REGS);
	struct uep *u[HOSTILE_REGS];
	u32 reg[HOSTILE_REGS], i, k, posted;

	hostile_setup(test, f, q, u, reg);
	for (i = 0; i < 3 * q->nr_slots; i++) {
		clear_all_bits(q);
		KUNIT_ASSERT_EQ(test, deliver(f, u[i % HOSTILE_REGS]->id, i), 0);
		posted = min(i + 1, q->mask);
		KUNIT_ASSERT_EQ(test, nic_stat(&f->nic.stats.events), posted);
		KUNIT_ASSERT_EQ(test, nic_stat(&f->nic.stats.evq_overflows),
				i + 1 - posted);
		KUNIT_ASSERT_LE(test, READ_ONCE(*q->prod), q->mask);
		KUNIT_ASSERT_FALSE(test, stray_pending_bit(q));
	}
	KUNIT_EXPECT_EQ(test, uevq_stray_byte(q), INTACT);

	/* the ring holds the first nr_slots - 1, in order */
	for (i = 0; i < q->mask; i++)
		expect_event(test, q, reg[i % HOSTILE_REGS],
			     COOKIE(i % HOSTILE_REGS));
	expect_no_event(test, q);

	/* dequeued: room again */
	clear_all_bits(q);
	for (k = 0; k < HOSTILE_REGS; k++)
		KUNIT_ASSERT_EQ(test, deliver(f, u[k]->id, k), 0);
	for (k = 0; k < HOSTILE_REGS; k++)
		expect_event(test, q, reg[k], COOKIE(k));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.evq_overflows),
			2 * q->nr_slots + 1);
	KUNIT_EXPECT_EQ(test, uevq_stray_byte(q), INTACT);
}

/* Which of the hostile endpoints registration @index belongs to. */
static u32 reg_owner(const u32 *reg, u32 index)
{
	u32 k;

	for (k = 0; k < HOSTILE_REGS; k++)
		if (reg[k] == index)
			break;
	return k;
}

/*
 * Garbage in the ring's consumer index, with bits cleared all the while:
 * the driver posts at most the nr_slots - 1 events it knew had room, then
 * counts every post as an overflow and writes nothing while the value
 * stays, never outside the ring. With a sane index again, the application
 * finds exactly the events that were posted, each well formed.
 */
static void out_of_range_ring_index_turns_posts_into_overflows(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, HOSTILE_REGS);
	struct clanq_nic_stats *st = &f->nic.stats;
	struct uep *u[HOSTILE_REGS];
	u32 reg[HOSTILE_REGS], bad[8], i, k, v;
	s64 events, overflows, posted;
	struct clanq_event ev;
	u8 *before;

	hostile_setup(test, f, q, u, reg);
	out_of_range_values(q->nr_slots, bad);
	for (v = 0; v < ARRAY_SIZE(bad); v++) {
		events = nic_stat(&st->events);
		overflows = nic_stat(&st->evq_overflows);
		WRITE_ONCE(*q->cons, bad[v]);
		for (i = 0; i < q->nr_slots; i++) {
			clear_all_bits(q);
			KUNIT_ASSERT_EQ(test, deliver(f, u[i % HOSTILE_REGS]->id,
						      i), 0);
			KUNIT_ASSERT_LE(test, READ_ONCE(*q->prod), q->mask);
		}
		posted = nic_stat(&st->events) - events;
		KUNIT_EXPECT_LE_MSG(test, posted, q->mask, "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ(test, nic_stat(&st->evq_overflows) - overflows,
				q->nr_slots - posted);

		/* now provably full: nothing but the map changes */
		before = snapshot(test, q->seg, q->size);
		for (i = 0; i < q->nr_slots; i++) {
			clear_all_bits(q);
			KUNIT_ASSERT_EQ(test, deliver(f, u[i % HOSTILE_REGS]->id,
						      i), 0);
		}
		KUNIT_EXPECT_EQ_MSG(test, nic_stat(&st->events) - events,
				    posted, "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ(test, nic_stat(&st->evq_overflows) - overflows,
				2 * q->nr_slots - posted);
		KUNIT_EXPECT_EQ_MSG(test, first_diff(q->seg, before,
						     q->c.pending),
				    INTACT, "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ(test, READ_ONCE(*q->cons), bad[v]);
		KUNIT_EXPECT_FALSE(test, stray_pending_bit(q));
		KUNIT_EXPECT_EQ(test, uevq_stray_byte(q), INTACT);

		/* the application's own index again */
		WRITE_ONCE(*q->cons, q->ring.own);
		for (i = 0; i < posted; i++) {
			KUNIT_ASSERT_TRUE(test, clanq_q_get(&q->ring, &ev));
			k = reg_owner(reg, ev.reg);
			KUNIT_ASSERT_LT_MSG(test, k, HOSTILE_REGS,
					    "event for registration %u", ev.reg);
			KUNIT_EXPECT_EQ(test, ev.cookie, COOKIE(k));
			KUNIT_EXPECT_EQ(test, ev.events, CLANQ_EV_OOB);
		}
		expect_no_event(test, q);
	}
}

/*
 * A map with every bit set says "every registration has an event
 * outstanding": no delivery and no registration posts anything, and
 * nothing in the segment changes. Clearing one bit lets exactly that
 * registration post again.
 */
static void all_pending_bits_set_posts_nothing(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, HOSTILE_REGS);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *late = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));
	u8 *before;

	reg_oob(test, q, b, COOKIE(2));
	uevq_guard_fill(test, q);
	memset(q->pending, 0xff, q->pending_bytes);
	before = snapshot(test, q->seg, q->size);

	deliver_n(test, f, a, 3);
	deliver_n(test, f, b, 3);
	deliver_n(test, f, late, 2);
	reg_oob(test, q, late, COOKIE(3));

	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 0);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.evq_overflows), 0);
	KUNIT_EXPECT_EQ(test, first_diff(q->seg, before, q->size), INTACT);

	ack(q, ia);
	deliver_n(test, f, a, 1);
	expect_event(test, q, ia, COOKIE(1));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);
}

/*
 * Unregistering stops the events and gives back the endpoint's
 * reference; the index no longer names a registration.
 */
static void unregister_stops_events(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));

	KUNIT_EXPECT_EQ(test, refcount_read(&a->ep->ref), 2);
	deliver_n(test, f, a, 1);
	expect_event(test, q, ia, COOKIE(1));
	ack(q, ia);
	KUNIT_EXPECT_EQ(test, drain(a), 1);

	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), 0);
	KUNIT_EXPECT_EQ(test, refcount_read(&a->ep->ref), 1);
	deliver_n(test, f, a, 1);
	expect_no_event(test, q);
	KUNIT_EXPECT_FALSE(test, test_bit(ia, q->pending));
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);

	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), -ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, 2), -ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, U32_MAX),
			-ENOENT);
}

/*
 * Destroying an endpoint takes its registrations with it: its old id
 * raises nothing (and is -ENOENT), its index is free for a new one, and
 * the other registrations are untouched.
 */
static void endpoint_destroy_removes_its_registration(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *c = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));
	u32 ib = reg_oob(test, q, b, COOKIE(2));
	u32 old = a->id;

	ep_destroy(f->ctx, a->ep);	/* and its segment with it */

	KUNIT_EXPECT_EQ(test, deliver(f, old, 0), -ENOENT);
	expect_no_event(test, q);
	KUNIT_EXPECT_FALSE(test, test_bit(ia, q->pending));
	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), -ENOENT);

	deliver_n(test, f, b, 1);
	expect_event(test, q, ib, COOKIE(2));

	/* a full evq of two: the third registration needs a's index */
	KUNIT_EXPECT_EQ(test, reg_oob(test, q, c, COOKIE(3)), ia);
	deliver_n(test, f, c, 1);
	expect_event(test, q, ia, COOKIE(3));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 2);
}

/*
 * An unregistered index whose event is still in the ring is not handed
 * out again until the application has taken that event (cleared its
 * bit): the stale bit would silence the index's next owner, and the
 * stale event would carry the old cookie.
 */
static void an_index_with_an_untaken_event_is_not_reused_until_taken(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *c = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));
	u32 ib;

	deliver_n(test, f, a, 1);
	KUNIT_ASSERT_TRUE(test, test_bit(ia, q->pending));
	KUNIT_ASSERT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), 0);

	/* an evq of two: b gets the other index, and c finds none free */
	ib = reg_oob(test, q, b, COOKIE(2));
	KUNIT_EXPECT_NE(test, ib, ia);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, c->id, CLANQ_EV_OOB,
						    COOKIE(3)), -ENOSPC);

	/* b is heard; the application takes the stale event, then b's */
	deliver_n(test, f, b, 1);
	expect_event(test, q, ia, COOKIE(1));
	ack(q, ia);
	expect_event(test, q, ib, COOKIE(2));
	ack(q, ib);
	KUNIT_EXPECT_EQ(test, drain(b), 1);

	/* taken: the index comes back, and its new owner is heard */
	KUNIT_EXPECT_EQ(test, reg_oob(test, q, c, COOKIE(3)), ia);
	deliver_n(test, f, c, 1);
	expect_event(test, q, ia, COOKIE(3));
	expect_no_event(test, q);
}

/*
 * Destroying an evq with live registrations unhooks them all: deliveries
 * afterwards queue their messages and raise nothing, the endpoints get
 * their references back and the context its own.
 */
static void evq_destroy_with_live_registrations_then_delivery_is_safe(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 4);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);

	KUNIT_EXPECT_EQ(test, kref_read(&f->ctx->ref), 2);
	reg_oob(test, q, a, COOKIE(1));
	reg_oob(test, q, b, COOKIE(2));
	reg_oob(test, q, b, COOKIE(3));
	deliver_n(test, f, a, 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);

	kunit_release_action(test, evq_destroy_action, q->evq);

	KUNIT_EXPECT_EQ(test, kref_read(&f->ctx->ref), 1);
	KUNIT_EXPECT_EQ(test, refcount_read(&a->ep->ref), 1);
	KUNIT_EXPECT_EQ(test, refcount_read(&b->ep->ref), 1);
	/* no registration's entry hangs on a's wait queue any more */
	KUNIT_EXPECT_FALSE(test, waitqueue_active(&a->ep->wq));
	/* nor on b's */
	KUNIT_EXPECT_FALSE(test, waitqueue_active(&b->ep->wq));
	deliver_n(test, f, a, 2);
	deliver_n(test, f, b, 2);
	KUNIT_EXPECT_EQ(test, drain(a), 3);
	KUNIT_EXPECT_EQ(test, drain(b), 2);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(a->counters->events), 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(b->counters->events), 0);
}

/*
 * A registration needs a non-empty mask of known events and an endpoint of
 * the evq's own context, and an evq holds at most max_regs of them: the
 * ring's room for one event each depends on it.
 */
static void register_refuses_bad_masks_foreign_endpoints_and_overfill(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *c = uep_create(test, f->ctx, EP_SLOTS);
	struct clanq_ctx *other = ctx_add(test, &f->nic);
	struct uep *foreign = uep_create(test, other, EP_SLOTS);

	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, a->id, 0, 1),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, a->id,
						    CLANQ_EV_ALL + 1, 1),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, a->id,
						    CLANQ_EV_OOB | (1u << 31),
						    1),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, foreign->id,
						    CLANQ_EV_OOB, 1),
			-ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, 0, CLANQ_EV_OOB,
						    1),
			-ENOENT);

	reg_oob(test, q, a, COOKIE(1));
	reg_oob(test, q, b, COOKIE(2));
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, c->id,
						    CLANQ_EV_OOB, 3),
			-ENOSPC);
	KUNIT_EXPECT_EQ(test, refcount_read(&c->ep->ref), 1);
	KUNIT_EXPECT_EQ(test, refcount_read(&foreign->ep->ref), 1);

	/* a foreign endpoint's messages raise nothing here */
	deliver_n(test, f, foreign, 1);
	expect_no_event(test, q);
}

static struct kunit_case clanq_evq_cases[] = {
	KUNIT_CASE(one_delivery_raises_one_event_for_its_registration),
	KUNIT_CASE(deliveries_raise_one_event_until_the_bit_is_cleared),
	KUNIT_CASE(registration_after_arrival_raises_an_event_at_once),
	KUNIT_CASE(thousand_registrations_each_raise_exactly_one_event),
	KUNIT_CASE(concurrent_wakers_post_at_most_one_event_per_registration),
	KUNIT_CASE(ring_fills_to_capacity_then_counts_overflows),
	KUNIT_CASE(out_of_range_ring_index_turns_posts_into_overflows),
	KUNIT_CASE(all_pending_bits_set_posts_nothing),
	KUNIT_CASE(unregister_stops_events),
	KUNIT_CASE(endpoint_destroy_removes_its_registration),
	KUNIT_CASE(an_index_with_an_untaken_event_is_not_reused_until_taken),
	KUNIT_CASE(evq_destroy_with_live_registrations_then_delivery_is_safe),
	KUNIT_CASE(register_refuses_bad_masks_foreign_endpoints_and_overfill),
	{}
};

static struct kunit_suite clanq_evq_suite = {
	.name = "clanq_evq",
	.init = evq_test_init,
	.test_cases = clanq_evq_cases,
};

kunit_test_suites(&clanq_evq_suite);
