// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for OOB delivery (driver/oob.c, driver/rx.c) and the
 * endpoints it delivers to (driver/endpoint.c), through the driver's own
 * functions.
 *
 * Every test gets a NIC of its own, with no device, and a context on it.
 * The test plays the application: it attaches to an endpoint's segment
 * with the layout clanq_kep_describe() publishes, exactly as libclanq does
 * with its mapping, and consumes with the consumer side of
 * include/clanq/queue.h. What the driver did is judged from the segment
 * and the NIC's counters only, never from its private queue state.
 *
 * Guard bytes: the application may write any byte of its segment, and the
 * driver reads only the consumer index. So the test fills every byte that
 * is neither the counters, an index word nor a slot with GUARD_BYTE, and
 * the driver must never change one.
 */
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

#define TEST_NIC_INDEX	7
#define TEST_NODE	0x7e57u

/* Counts chosen for a KASAN + lockdep kernel under qemu TCG. */
#define ORDER_SLOTS		8
#define HOSTILE_SLOTS		8
#define HOSTILE_EXTRA		16
#define NR_SENDERS		4
#define MSGS_PER_SENDER		2000
#define CONCURRENT_SLOTS	64
#define NR_ID_EPS		8
#define WAIT_TIMEOUT		(60 * HZ)

KUNIT_DEFINE_ACTION_WRAPPER(ep_put_action, clanq_kep_put, struct clanq_kep *);

/* An endpoint as its application sees it. */
struct uep {
	struct clanq_kep *ep;
	u32 id;
	struct clanq_ioc_ep_create c;	/* what EP_CREATE would return */
	u8 *seg;
	size_t size;
	struct clanq_queue q;		/* the consumer's private state */
	struct clanq_ep_counters *counters;
	u32 *prod;			/* the driver's published index */
	u32 *cons;			/* the application's index word */
	u32 mask;
};

/* Each test: a fresh NIC and one context on it (kunit_util.h). */
static int oob_test_init(struct kunit *test)
{
	return nic_fixture_init(test, TEST_NIC_INDEX, TEST_NODE);
}

/*
 * An endpoint of @ctx with @slots OOB slots, attached to as the library
 * attaches to its mapping. The context owns it: its last put destroys it.
 */
static struct uep *uep_create(struct kunit *test, struct clanq_ctx *ctx,
			      u32 slots)
{
	struct uep *u = kunit_kzalloc(test, sizeof(*u), GFP_KERNEL);
	struct clanq_kep *ep;

	KUNIT_ASSERT_NOT_NULL(test, u);
	ep = ep_create(test, ctx, slots, &u->c);

	u->ep = ep;
	u->id = ep->id;
	u->seg = ep->shm->vaddr;
	u->size = ep->shm->size;
	KUNIT_ASSERT_EQ(test, u->c.addr.id, u->id);
	KUNIT_ASSERT_EQ(test, u->c.mmap_size, u->size);
	KUNIT_ASSERT_EQ(test, u->c.oob.nr_slots, slots);
	KUNIT_ASSERT_EQ(test, u->c.oob.slot_size,
			sizeof(struct clanq_oob_msg));
	KUNIT_ASSERT_LE(test, u->c.counters + sizeof(*u->counters), u->size);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&u->q, u->seg, u->size, &u->c.oob),
			0);
	u->counters = (struct clanq_ep_counters *)(u->seg + u->c.counters);
	u->prod = (u32 *)(u->seg + u->c.oob.prod);
	u->cons = (u32 *)(u->seg + u->c.oob.cons);
	u->mask = slots - 1;
	return u;
}

static int deliver(struct nic_fixture *f, u32 id, u32 tag, u32 seq)
{
	struct clanq_oob_msg msg;

	msg_fill(&msg, tag, seq);
	return clanq_rx_oob(&f->nic, id, &msg);
}

/* The application takes the next message, which must be (@tag, @seq). */
static void expect_get(struct kunit *test, struct uep *u, u32 tag, u32 seq)
{
	struct clanq_oob_msg got, want;

	msg_fill(&want, tag, seq);
	KUNIT_ASSERT_TRUE_MSG(test, clanq_q_get(&u->q, &got),
			      "queue empty, expected message %u", seq);
	KUNIT_EXPECT_MEMEQ_MSG(test, &got, &want, sizeof(got),
			       "expected message %u of sender %u", seq, tag);
}

static u64 ep_counter(const u64 *field)
{
	return READ_ONCE(*field);
}

/* The parts of @u's segment that are not guard bytes, in order. */
static void uep_spans(const struct uep *u, struct span s[4])
{
	s[0] = (struct span){ u->c.counters, sizeof(*u->counters) };
	s[1] = (struct span){ u->c.oob.prod, sizeof(u32) };
	s[2] = (struct span){ u->c.oob.cons, sizeof(u32) };
	s[3] = (struct span){ u->c.oob.slots,
			      (size_t)u->c.oob.nr_slots * u->c.oob.slot_size };
}

/* The application writes GUARD_BYTE into every byte the driver must not. */
static void uep_guard_fill(struct kunit *test, struct uep *u)
{
	struct span s[4];

	uep_spans(u, s);
	guard_fill(test, u->seg, u->size, s, ARRAY_SIZE(s));
}

/* Offset of the first guard byte the driver changed, or INTACT. */
static long uep_stray_byte(const struct uep *u)
{
	struct span s[4];

	uep_spans(u, s);
	return stray_byte(u->seg, u->size, s, ARRAY_SIZE(s));
}

/*
 * Messages come out whole and in order, across every position of the
 * ring: bursts of 1..nr_slots - 1 deliveries, each drained by the
 * application before the next.
 */
static void delivered_messages_come_out_whole_and_in_order(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uep *u = uep_create(test, f->ctx, ORDER_SLOTS);
	struct clanq_oob_msg out;
	u32 sent = 0, got = 0, round, n, i;

	for (round = 0; round < 4 * ORDER_SLOTS; round++) {
		n = (round * 3) % (ORDER_SLOTS - 1) + 1;
		for (i = 0; i < n; i++)
			KUNIT_ASSERT_EQ_MSG(test, deliver(f, u->id, 1, sent++),
					    0, "message %u", sent - 1);
		while (got < sent)
			expect_get(test, u, 1, got++);
		KUNIT_ASSERT_FALSE(test, clanq_q_get(&u->q, &out));
	}

	KUNIT_EXPECT_EQ(test, ep_counter(&u->counters->oob_delivered), sent);
	KUNIT_EXPECT_EQ(test, ep_counter(&u->counters->oob_dropped), 0);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_delivered), sent);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_dropped), 0);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_no_ep), 0);
}

static const u32 slot_counts[] = { 2, 8, 64 };

static void slots_desc(const u32 *slots, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%u slots", *slots);
}

KUNIT_ARRAY_PARAM(slots, slot_counts, slots_desc);

/*
 * Full is one free slot left: nr_slots - 1 messages fit, the next ones
 * are dropped (-ENOBUFS) and counted, in the endpoint's counters and the
 * NIC's, and never reach the application. One message consumed makes room
 * for exactly one more.
 */
static void queue_of_n_slots_takes_n_minus_one_then_drops_and_counts(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	const u32 n = *(const u32 *)test->param_value;
	struct uep *u = uep_create(test, f->ctx, n);
	struct clanq_ep_counters *ct = u->counters;
	struct clanq_oob_msg out;
	u32 seq = 0, i;

	for (i = 0; i < n - 1; i++)
		KUNIT_ASSERT_EQ_MSG(test, deliver(f, u->id, 0, seq++), 0,
				    "message %u of %u", i, n - 1);
	for (i = 0; i < 3; i++)
		KUNIT_EXPECT_EQ(test, deliver(f, u->id, 0, seq++), -ENOBUFS);

	KUNIT_EXPECT_EQ(test, ep_counter(&ct->oob_delivered), n - 1);
	KUNIT_EXPECT_EQ(test, ep_counter(&ct->oob_dropped), 3);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_delivered), n - 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_dropped), 3);

	/* one consumed: one more fits, and the one after is dropped */
	expect_get(test, u, 0, 0);
	KUNIT_EXPECT_EQ(test, deliver(f, u->id, 0, seq), 0);
	KUNIT_EXPECT_EQ(test, deliver(f, u->id, 0, seq + 1), -ENOBUFS);

	KUNIT_EXPECT_EQ(test, ep_counter(&ct->oob_delivered), n);
	KUNIT_EXPECT_EQ(test, ep_counter(&ct->oob_dropped), 4);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_delivered), n);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_dropped), 4);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_no_ep), 0);

	/* the application sees exactly the messages that were queued */
	for (i = 1; i < n - 1; i++)
		expect_get(test, u, 0, i);
	expect_get(test, u, 0, seq);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&u->q, &out));
}

/*
 * An id that names no endpoint of the NIC, never did or no longer does,
 * is -ENOENT and counted as such, and touches no other counter; a
 * destroyed endpoint's id is not handed to the next endpoint.
 */
static void delivery_to_unknown_or_destroyed_endpoint_is_enoent(struct kunit *test)
{
	static const u32 never[] = { 0, 1, 2, S32_MAX, U32_MAX };
	struct nic_fixture *f = test->priv;
	struct clanq_nic_stats *st = &f->nic.stats;
	struct uep *u, *next;
	u32 i, old;

	for (i = 0; i < ARRAY_SIZE(never); i++)
		KUNIT_EXPECT_EQ_MSG(test, deliver(f, never[i], 0, i), -ENOENT,
				    "id %#x", never[i]);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->oob_no_ep), ARRAY_SIZE(never));

	u = uep_create(test, f->ctx, ORDER_SLOTS);
	old = u->id;
	KUNIT_EXPECT_EQ(test, deliver(f, old, 0, 0), 0);
	KUNIT_EXPECT_EQ(test, deliver(f, old + 1, 0, 0), -ENOENT);
	ep_destroy(f->ctx, u->ep);	/* and its segment with it */

	KUNIT_EXPECT_NULL(test, clanq_kep_lookup(&f->nic, old));
	KUNIT_EXPECT_EQ(test, deliver(f, old, 0, 1), -ENOENT);

	next = uep_create(test, f->ctx, ORDER_SLOTS);
	KUNIT_EXPECT_NE(test, next->id, old);
	KUNIT_EXPECT_EQ(test, deliver(f, old, 0, 2), -ENOENT);

	KUNIT_EXPECT_EQ(test, nic_stat(&st->oob_no_ep),
			ARRAY_SIZE(never) + 3);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->oob_delivered), 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&st->oob_dropped), 0);
	KUNIT_EXPECT_EQ(test, ep_counter(&next->counters->oob_delivered), 0);
	KUNIT_EXPECT_TRUE(test, clanq_q_empty(&next->q));
}

/*
 * The consumer index is the application's, and it may write nonsense
 * there. A value outside [0, nr_slots) never proves a slot free: the
 * driver queues at most the nr_slots - 1 messages it knew had room, then
 * drops and counts every delivery while the value stays, writing nothing
 * but the drop counter; it never writes outside the counters, its index
 * word and the slots; and a sane value ("all consumed") lets messages in
 * again.
 */
static void out_of_range_consumer_index_makes_delivery_drop_in_bounds(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	const u32 attempts = 4 * HOSTILE_SLOTS;
	u64 delivered = 0, dropped = 0;
	struct clanq_ep_counters *want;
	u32 bad[8], ok, i, v;
	u8 *expected;
	int r;

	out_of_range_values(HOSTILE_SLOTS, bad);
	for (v = 0; v < ARRAY_SIZE(bad); v++) {
		struct uep *u = uep_create(test, f->ctx, HOSTILE_SLOTS);

		uep_guard_fill(test, u);
		WRITE_ONCE(*u->cons, bad[v]);
		for (ok = 0, i = 0; i < attempts; i++) {
			r = deliver(f, u->id, v, i);
			KUNIT_ASSERT_TRUE_MSG(test, r == 0 || r == -ENOBUFS,
					      "cons %#x: %d", bad[v], r);
			ok += !r;
			KUNIT_ASSERT_LE(test, READ_ONCE(*u->prod), u->mask);
		}
		KUNIT_EXPECT_LE_MSG(test, ok, u->mask, "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ(test, ep_counter(&u->counters->oob_delivered),
				ok);
		KUNIT_EXPECT_EQ(test, ep_counter(&u->counters->oob_dropped),
				attempts - ok);
		delivered += ok;
		dropped += attempts - ok;

		/* now provably full: a drop writes only its counter */
		expected = snapshot(test, u->seg, u->size);
		for (i = 0; i < HOSTILE_EXTRA; i++)
			KUNIT_EXPECT_EQ_MSG(test, deliver(f, u->id, v, i),
					    -ENOBUFS, "cons %#x", bad[v]);
		dropped += HOSTILE_EXTRA;
		want = (struct clanq_ep_counters *)(expected + u->c.counters);
		want->oob_dropped += HOSTILE_EXTRA;
		KUNIT_EXPECT_EQ_MSG(test, first_diff(u->seg, expected, u->size),
				    INTACT, "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ_MSG(test, uep_stray_byte(u), INTACT,
				    "cons %#x", bad[v]);
		KUNIT_EXPECT_EQ(test, READ_ONCE(*u->cons), bad[v]);

		/* a sane index again: everything consumed */
		WRITE_ONCE(*u->cons, READ_ONCE(*u->prod));
		for (i = 0; i < u->mask; i++)
			KUNIT_EXPECT_EQ(test, deliver(f, u->id, v, i), 0);
		KUNIT_EXPECT_EQ(test, deliver(f, u->id, v, i), -ENOBUFS);
		delivered += u->mask;
		dropped++;
		KUNIT_EXPECT_EQ(test, uep_stray_byte(u), INTACT);
	}

	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_delivered),
			delivered);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_dropped), dropped);
}

/*
 * Concurrent senders: kthreads delivering to one endpoint at once while
 * the test thread consumes.
 */

/*
 * Take every message queued; each must be whole, from a known sender,
 * and later in that sender's sequence than the last one taken from it.
 */
static u32 drain_checked(struct kunit *test, struct uep *u, u32 *next,
			 u32 *got)
{
	struct clanq_oob_msg m, want;
	u32 n = 0, tag, seq;

	while (clanq_q_get(&u->q, &m)) {
		tag = m.src.id;
		seq = msg_seq(&m);
		KUNIT_ASSERT_LT_MSG(test, tag, NR_SENDERS, "type %#x", m.type);
		KUNIT_ASSERT_LT(test, seq, MSGS_PER_SENDER);
		msg_fill(&want, tag, seq);
		KUNIT_ASSERT_MEMEQ_MSG(test, &m, &want, sizeof(m),
				       "sender %u message %u", tag, seq);
		KUNIT_ASSERT_GE_MSG(test, seq, next[tag],
				    "sender %u: message %u out of order", tag,
				    seq);
		next[tag] = seq + 1;
		got[tag]++;
		n++;
	}
	return n;
}

/*
 * Every message of every sender is accounted exactly once, as delivered
 * (then consumed once, in its sender's order) or dropped, and the
 * endpoint's counters and the NIC's agree with the senders' own counts.
 */
static void concurrent_deliveries_are_each_counted_once_in_sender_order(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uep *u = uep_create(test, f->ctx, CONCURRENT_SLOTS);
	struct sender *s = kunit_kcalloc(test, NR_SENDERS, sizeof(*s),
					 GFP_KERNEL);
	struct completion *go = kunit_kzalloc(test, sizeof(*go), GFP_KERNEL);
	atomic_t *running = kunit_kzalloc(test, sizeof(*running), GFP_KERNEL);
	struct task_struct *task[NR_SENDERS];
	u32 next[NR_SENDERS] = {}, got[NR_SENDERS] = {};
	u64 delivered = 0, dropped = 0;
	unsigned long deadline;
	u32 t;

	KUNIT_ASSERT_NOT_NULL(test, s);
	KUNIT_ASSERT_NOT_NULL(test, go);
	KUNIT_ASSERT_NOT_NULL(test, running);
	init_completion(go);
	atomic_set(running, NR_SENDERS);
	for (t = 0; t < NR_SENDERS; t++) {
		s[t] = (struct sender){ .nic = &f->nic, .dst = &u->id,
					.nr_dst = 1, .nr_msgs = MSGS_PER_SENDER,
					.tag = t, .go = go,
					.running = running };
		task[t] = thread_start(test, sender_fn, &s[t], "oob", t);
	}

	complete_all(go);
	deadline = jiffies + WAIT_TIMEOUT;
	while (atomic_read_acquire(running)) {
		if (!drain_checked(test, u, next, got))
			usleep_range(20, 100);
		KUNIT_ASSERT_TRUE_MSG(test, time_before(jiffies, deadline),
				      "senders still running after %u s",
				      WAIT_TIMEOUT / HZ);
	}
	for (t = 0; t < NR_SENDERS; t++)
		kunit_release_action(test, kthread_stop_put_action, task[t]);
	drain_checked(test, u, next, got);

	senders_check(test, s, NR_SENDERS, got, &delivered, &dropped);
	KUNIT_EXPECT_EQ(test, ep_counter(&u->counters->oob_delivered),
			delivered);
	KUNIT_EXPECT_EQ(test, ep_counter(&u->counters->oob_dropped), dropped);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_delivered),
			delivered);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_dropped), dropped);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_no_ep), 0);
	kunit_info(test, "%llu delivered, %llu dropped\n", delivered, dropped);
}

/*
 * Endpoint ids belong to the NIC, not the context: endpoints of two
 * contexts get distinct non-zero ids, their published address is
 * (node, id), a lookup finds each one by its id alone and pins it, and a
 * message to an id reaches that endpoint and no other.
 */
static void endpoint_ids_are_node_wide_and_distinct_across_contexts(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_ctx *ctx[2] = { f->ctx, ctx_add(test, &f->nic) };
	struct uep *u[NR_ID_EPS];
	struct clanq_oob_msg out;
	struct clanq_kep *ep;
	u32 i, j;

	for (i = 0; i < NR_ID_EPS; i++)
		u[i] = uep_create(test, ctx[i % 2], ORDER_SLOTS);

	for (i = 0; i < NR_ID_EPS; i++) {
		KUNIT_EXPECT_NE(test, u[i]->id, 0);
		KUNIT_EXPECT_EQ(test, u[i]->c.addr.node, TEST_NODE);
		KUNIT_EXPECT_PTR_EQ(test, u[i]->ep->ctx, ctx[i % 2]);
		for (j = 0; j < i; j++)
			KUNIT_EXPECT_NE_MSG(test, u[i]->id, u[j]->id,
					    "endpoints %u and %u", j, i);

		ep = clanq_kep_lookup(&f->nic, u[i]->id);
		KUNIT_EXPECT_PTR_EQ(test, ep, u[i]->ep);
		if (!ep)
			continue;
		KUNIT_EXPECT_EQ(test, refcount_read(&ep->ref), 2);
		clanq_kep_put(ep);
		KUNIT_EXPECT_EQ(test, refcount_read(&ep->ref), 1);
	}

	for (i = 0; i < NR_ID_EPS; i++)
		KUNIT_EXPECT_EQ(test, deliver(f, u[i]->id, i, i), 0);
	for (i = 0; i < NR_ID_EPS; i++) {
		expect_get(test, u[i], i, i);
		KUNIT_EXPECT_FALSE(test, clanq_q_get(&u[i]->q, &out));
	}
}

/*
 * A lookup pins: destroying the endpoint meanwhile unpublishes it at once
 * (no lookup or delivery finds it) but frees nothing the pin still
 * reaches, segment included; the last put frees it (KASAN and kmemleak
 * watch both halves).
 */
static void destroy_while_pinned_by_lookup_is_safe(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uep *u = uep_create(test, f->ctx, ORDER_SLOTS);
	struct clanq_kep *pinned;

	pinned = clanq_kep_lookup(&f->nic, u->id);
	KUNIT_ASSERT_PTR_EQ(test, pinned, u->ep);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, ep_put_action,
							pinned), 0);
	KUNIT_EXPECT_EQ(test, refcount_read(&pinned->ref), 2);
	KUNIT_EXPECT_EQ(test, deliver(f, u->id, 0, 0), 0);

	ep_destroy(f->ctx, u->ep);

	KUNIT_EXPECT_NULL(test, clanq_kep_lookup(&f->nic, u->id));
	KUNIT_EXPECT_EQ(test, deliver(f, u->id, 0, 1), -ENOENT);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.oob_no_ep), 1);

	/* the pin still holds the endpoint and its segment */
	KUNIT_EXPECT_EQ(test, refcount_read(&pinned->ref), 1);
	KUNIT_EXPECT_EQ(test, pinned->id, u->id);
	KUNIT_EXPECT_TRUE(test, READ_ONCE(pinned->oob.dead));
	KUNIT_EXPECT_PTR_EQ(test, pinned->shm->vaddr, (void *)u->seg);
	KUNIT_EXPECT_EQ(test, ep_counter(&u->counters->oob_delivered), 1);
	expect_get(test, u, 0, 0);

	/* the last reference: frees the endpoint and its segment */
	kunit_release_action(test, ep_put_action, pinned);
	KUNIT_EXPECT_NULL(test, clanq_kep_lookup(&f->nic, u->id));
}

static struct kunit_case clanq_oob_cases[] = {
	KUNIT_CASE(delivered_messages_come_out_whole_and_in_order),
	KUNIT_CASE_PARAM(queue_of_n_slots_takes_n_minus_one_then_drops_and_counts,
			 slots_gen_params),
	KUNIT_CASE(delivery_to_unknown_or_destroyed_endpoint_is_enoent),
	KUNIT_CASE(out_of_range_consumer_index_makes_delivery_drop_in_bounds),
	KUNIT_CASE(concurrent_deliveries_are_each_counted_once_in_sender_order),
	KUNIT_CASE(endpoint_ids_are_node_wide_and_distinct_across_contexts),
	KUNIT_CASE(destroy_while_pinned_by_lookup_is_safe),
	{}
};

static struct kunit_suite clanq_oob_suite = {
	.name = "clanq_oob",
	.init = oob_test_init,
	.test_cases = clanq_oob_cases,
};

kunit_test_suites(&clanq_oob_suite);
