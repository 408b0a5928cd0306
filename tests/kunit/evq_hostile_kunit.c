// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the unified event queue (driver/evq.c) against a hostile
 * application: one that clears pending bits without dequeuing (the ring
 * fills, then posts count as overflows), writes garbage into the ring's
 * consumer index, or sets every pending bit.
 *
 * Guard bytes: the application may write any byte of the evq segment, and
 * the driver reads only the ring's consumer index and its own bits of the
 * pending map. So the hostile tests fill every other byte with GUARD_BYTE,
 * and the driver must never change one.
 *
 * The fixture, and how every test runs: evq_fixture.h.
 */
#include <kunit/test.h>
#include <linux/bitops.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/string.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "evq_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

/* Counts chosen for a KASAN + lockdep kernel under qemu TCG. */
#define HOSTILE_REGS		4	/* a ring of 8 slots */
#define HOSTILE_EP_SLOTS	64

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

static struct kunit_case clanq_evq_hostile_cases[] = {
	KUNIT_CASE(ring_fills_to_capacity_then_counts_overflows),
	KUNIT_CASE(out_of_range_ring_index_turns_posts_into_overflows),
	KUNIT_CASE(all_pending_bits_set_posts_nothing),
	{}
};

static struct kunit_suite clanq_evq_hostile_suite = {
	.name = "clanq_evq_hostile",
	.init = evq_test_init,
	.test_cases = clanq_evq_hostile_cases,
};

kunit_test_suites(&clanq_evq_hostile_suite);
