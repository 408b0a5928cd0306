// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the clanq queue (include/clanq/queue.h) as the kernel
 * uses it: the kernel is the producer or the consumer, and the other index
 * word and the slots belong to a user-space peer that may be hostile.
 *
 * Every test builds its own "shared segment" with vmalloc_user(), of
 * exactly the size it needs, so that KASAN's redzone starts right after
 * the last byte, and lays one queue out in it with clanq_q_layout(). Every
 * byte of the segment that is neither an index word nor a slot is a guard
 * byte: it holds GUARD_BYTE, and no queue operation may change it. Where a
 * test is about reads, the slot array ends the segment, so that a read
 * past the last slot is a KASAN report.
 *
 * Nothing here touches the clanq driver: the queue is header-only.
 */
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include <clanq/queue.h>

#include "kunit_util.h"

#define HEAD_GUARD	CLANQ_Q_ALIGN	/* bytes before the prod word */
#define TAIL_GUARD	68		/* bytes after the last slot */
#define NO_TAIL_GUARD	0		/* the last slot ends the segment */
#define POISON_BYTE	0x5a		/* item buffers, beyond slot_size */
#define POISON_LEN	16

/* Counts chosen for a KASAN + lockdep kernel under qemu TCG. */
#define FIFO_WRAPS		8
#define FIFO_MIN_ITEMS		64
#define RANDOM_ROUNDS		1000
#define BOUNDED_LOOP		64
#define CONCURRENT_OPS		100000

KUNIT_DEFINE_ACTION_WRAPPER(vfree_action, vfree, const void *);
KUNIT_DEFINE_ACTION_WRAPPER(kthread_stop_action, kthread_stop,
			    struct task_struct *);

/* A shared segment holding one queue, as both sides would map it. */
struct seg {
	struct clanq_queue_off qo;
	u8 *base;
	size_t size;
	u32 nr_slots;
	u32 slot_size;
	u32 mask;
	u32 *prod;	/* the shared index words */
	u32 *cons;
	u8 *slots;
	size_t slot_bytes;
};

struct geom {
	u32 nr_slots;
	u32 slot_size;
};

static const struct geom geoms[] = {
	{ 2, 8 },
	{ 4, 16 },
	{ 8, 8 },
	{ 16, 24 },
	{ 64, 64 },
	{ 256, 8 },
	{ 4, CLANQ_Q_MAX_SLOT_SIZE },
	{ 1024, 32 },
};

static void geom_desc(const struct geom *g, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%u slots of %u bytes",
		 g->nr_slots, g->slot_size);
}

KUNIT_ARRAY_PARAM(geom, geoms, geom_desc);

/* The geometry the random and concurrent tests use. */
static const struct geom small_geom = { 16, 24 };

/*
 * A fresh segment: guard bytes everywhere, then the index words and the
 * slots zeroed, as the creator leaves them before anyone attaches.
 */
static struct seg *seg_create(struct kunit *test, const struct geom *g,
			      size_t tail_guard)
{
	struct seg *s;
	u32 end;

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	end = clanq_q_layout(&s->qo, HEAD_GUARD, g->nr_slots, g->slot_size);
	KUNIT_ASSERT_NE(test, end, 0);

	s->size = (size_t)end + tail_guard;
	s->base = vmalloc_user(s->size);
	KUNIT_ASSERT_NOT_NULL(test, s->base);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, vfree_action,
							s->base), 0);

	s->nr_slots = g->nr_slots;
	s->slot_size = g->slot_size;
	s->mask = g->nr_slots - 1;
	s->prod = (u32 *)(s->base + s->qo.prod);
	s->cons = (u32 *)(s->base + s->qo.cons);
	s->slots = s->base + s->qo.slots;
	s->slot_bytes = (size_t)g->nr_slots * g->slot_size;

	memset(s->base, GUARD_BYTE, s->size);
	*s->prod = 0;
	*s->cons = 0;
	memset(s->slots, 0, s->slot_bytes);
	return s;
}

/* One side's private view of the queue in @s. */
static void seg_attach(struct kunit *test, struct seg *s,
		       struct clanq_queue *q)
{
	KUNIT_ASSERT_EQ(test, clanq_q_init(q, s->base, s->size, &s->qo), 0);
	KUNIT_ASSERT_PTR_EQ(test, q->slots, (void *)s->slots);
	KUNIT_ASSERT_PTR_EQ(test, q->prod, s->prod);
	KUNIT_ASSERT_PTR_EQ(test, q->cons, s->cons);
}

/* Slot @i as the test computes it, independently of clanq_q_slot(). */
static u8 *slot_at(const struct seg *s, u32 i)
{
	return s->slots + (size_t)(i & s->mask) * s->slot_size;
}

/* Offset of the first guard byte no longer GUARD_BYTE, or INTACT. */
static long first_damaged_guard(const struct seg *s)
{
	const struct span spans[] = {
		{ s->qo.prod, sizeof(u32) },
		{ s->qo.cons, sizeof(u32) },
		{ s->qo.slots, s->slot_bytes },
	};

	return stray_byte(s->base, s->size, spans, ARRAY_SIZE(spans));
}

/* An item buffer: slot_size bytes, then POISON_LEN bytes of poison. */
static u8 *item_alloc(struct kunit *test, const struct seg *s)
{
	u8 *item = kunit_kmalloc(test, s->slot_size + POISON_LEN, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, item);
	memset(item, POISON_BYTE, s->slot_size + POISON_LEN);
	return item;
}

/* Item number @seq: every 8-byte word says which item and which word. */
static void item_fill(u8 *item, u32 slot_size, u64 seq)
{
	u64 w;
	u32 i;

	for (i = 0; i < slot_size / 8; i++) {
		w = ((seq + 1) << 16) | i;
		memcpy(item + 8 * i, &w, sizeof(w));
	}
}

static bool poison_intact(const u8 *item, u32 slot_size)
{
	return !memchr_inv(item + slot_size, POISON_BYTE, POISON_LEN);
}

/*
 * What a hostile peer writes into the index word it owns, aimed at the
 * kernel's published index @kernel: in-range values next to it (a full or
 * an empty queue, cons or prod moving backwards), values with bits
 * outside the mask, and plain random words.
 */
static u32 hostile_index(u32 kernel, u32 mask)
{
	switch (get_random_u32_below(9)) {
	case 0:
		return kernel & mask;
	case 1:
		return (kernel + 1) & mask;
	case 2:
		return (kernel - 1) & mask;
	case 3:
		return mask + 1;
	case 4:
		return (mask + 1) << 1;
	case 5:
		return 0xffffffffu;
	case 6:
		return 0x80000000u;
	case 7:
		return get_random_u32() & mask;
	default:
		return get_random_u32();
	}
}

/* Put items until the queue reports full; return how many went in. */
static u32 put_until_full(struct clanq_queue *kp, u8 *item, u32 slot_size,
			  u64 *seq, u32 limit)
{
	u32 n;

	for (n = 0; n < limit; n++) {
		item_fill(item, slot_size, *seq);
		if (!clanq_q_put(kp, item))
			break;
		(*seq)++;
	}
	return n;
}

/*
 * Both sides in the kernel.
 */

static void queue_of_n_slots_holds_n_minus_one_items(struct kunit *test)
{
	const struct geom *g = test->param_value;
	struct seg *s = seg_create(test, g, TAIL_GUARD);
	struct clanq_queue kp, kc;
	u8 *item = item_alloc(test, s);
	u8 *out = item_alloc(test, s);
	u64 seq = 0;
	u32 n;

	seg_attach(test, s, &kp);
	seg_attach(test, s, &kc);

	KUNIT_EXPECT_TRUE(test, clanq_q_empty(&kc));
	KUNIT_EXPECT_EQ(test, clanq_q_prod_space(&kp), s->nr_slots - 1);

	KUNIT_EXPECT_EQ(test, put_until_full(&kp, item, s->slot_size, &seq,
					     2 * s->nr_slots),
			s->nr_slots - 1);
	KUNIT_EXPECT_EQ(test, clanq_q_prod_space(&kp), 0);
	KUNIT_EXPECT_EQ(test, clanq_q_cons_avail(&kc), s->nr_slots - 1);
	/* full is exactly "one free slot left" in the shared words */
	KUNIT_EXPECT_EQ(test, (*s->prod + 1) & s->mask, *s->cons);

	/* one get frees exactly one slot */
	KUNIT_EXPECT_TRUE(test, clanq_q_get(&kc, out));
	KUNIT_EXPECT_EQ(test, clanq_q_prod_space(&kp), 1);
	KUNIT_EXPECT_TRUE(test, clanq_q_put(&kp, item));
	KUNIT_EXPECT_FALSE(test, clanq_q_put(&kp, item));

	/* and the queue is back to holding nr_slots - 1 items */
	for (n = 0; n < 2 * s->nr_slots; n++)
		if (!clanq_q_get(&kc, out))
			break;
	KUNIT_EXPECT_EQ(test, n, s->nr_slots - 1);
	KUNIT_EXPECT_TRUE(test, clanq_q_empty(&kc));

	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
}

static void items_come_out_in_order_across_wrap_arounds(struct kunit *test)
{
	const struct geom *g = test->param_value;
	struct seg *s = seg_create(test, g, TAIL_GUARD);
	struct clanq_queue kp, kc;
	u8 *item = item_alloc(test, s);
	u8 *out = item_alloc(test, s);
	u8 *want = item_alloc(test, s);
	u64 target = max_t(u64, (u64)FIFO_WRAPS * s->nr_slots, FIFO_MIN_ITEMS);
	u64 put = 0, got = 0, step;
	u32 i, n;
	bool ok;

	seg_attach(test, s, &kp);
	seg_attach(test, s, &kc);

	/*
	 * Bursts of 0..nr_slots puts and gets in a fixed irregular pattern,
	 * so the queue is seen empty, partly filled and full at every
	 * position of the ring. A put succeeds exactly when fewer than
	 * nr_slots - 1 items are queued, a get exactly when any is.
	 */
	for (step = 0; got < target && step < 64 * target; step++) {
		n = (step * 5 + 3) % (s->nr_slots + 1);
		for (i = 0; i < n; i++) {
			item_fill(item, s->slot_size, put);
			ok = clanq_q_put(&kp, item);
			KUNIT_ASSERT_EQ_MSG(test, ok, put - got < s->mask,
					    "put #%llu with %llu queued",
					    put, put - got);
			put += ok;
		}
		KUNIT_ASSERT_EQ(test, *s->prod, (u32)put & s->mask);

		n = (step * 3 + 1) % (s->nr_slots + 1);
		for (i = 0; i < n; i++) {
			ok = clanq_q_get(&kc, out);
			KUNIT_ASSERT_EQ_MSG(test, ok, got < put,
					    "get #%llu with %llu queued",
					    got, put - got);
			if (!ok)
				continue;
			item_fill(want, s->slot_size, got);
			KUNIT_ASSERT_EQ_MSG(test,
					    first_diff(out, want, s->slot_size),
					    INTACT, "item #%llu", got);
			KUNIT_ASSERT_TRUE(test,
					  poison_intact(out, s->slot_size));
			got++;
		}
		KUNIT_ASSERT_EQ(test, *s->cons, (u32)got & s->mask);
	}

	KUNIT_EXPECT_GE(test, got, target);
	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
}

static void full_put_and_empty_get_change_nothing(struct kunit *test)
{
	const struct geom *g = test->param_value;
	struct seg *s = seg_create(test, g, TAIL_GUARD);
	struct clanq_queue kp, kc;
	u8 *item = item_alloc(test, s);
	u8 *out = item_alloc(test, s);
	u8 *before;
	u64 seq = 0;
	int i;

	seg_attach(test, s, &kp);
	seg_attach(test, s, &kc);

	before = snapshot(test, s->base, s->size);
	for (i = 0; i < 3; i++)
		KUNIT_EXPECT_FALSE(test, clanq_q_get(&kc, out));
	KUNIT_EXPECT_NULL(test, memchr_inv(out, POISON_BYTE,
					   s->slot_size + POISON_LEN));
	KUNIT_EXPECT_EQ(test, first_diff(s->base, before, s->size), INTACT);

	put_until_full(&kp, item, s->slot_size, &seq, s->nr_slots);
	before = snapshot(test, s->base, s->size);
	item_fill(item, s->slot_size, ~0ull);
	for (i = 0; i < 3; i++)
		KUNIT_EXPECT_FALSE(test, clanq_q_put(&kp, item));
	KUNIT_EXPECT_EQ(test, first_diff(s->base, before, s->size), INTACT);
}

/*
 * Hostile consumer: user space owns cons, the kernel produces.
 */

/*
 * Whatever in-range value cons holds, forwards or backwards of where it
 * was, a producer that has run out of proven space puts exactly until its
 * index is one behind cons, and writes only its own word and the slots it
 * filled.
 */
static void producer_fills_exactly_to_one_slot_before_cons(struct kunit *test)
{
	const struct geom *g = test->param_value;
	struct seg *s = seg_create(test, g, TAIL_GUARD);
	u32 half = s->nr_slots / 2;
	const u32 moves[] = {	/* how cons moves, modulo nr_slots */
		1,		/* one item consumed */
		0,		/* nothing consumed */
		-1u,		/* one back: "everything consumed" */
		2, -2u, half, -half, 3, 0, -3u, 1,
	};
	struct clanq_queue kp;
	u8 *item = item_alloc(test, s);
	u32 cons = 0, own, n, j, r;
	u64 seq = 0, first;

	seg_attach(test, s, &kp);

	/* start full, with the producer's cache used up */
	put_until_full(&kp, item, s->slot_size, &seq, s->nr_slots);

	for (r = 0; r < ARRAY_SIZE(moves) + 16; r++) {
		own = *s->prod;
		if (r < ARRAY_SIZE(moves))
			cons = (cons + moves[r]) & s->mask;
		else
			cons = get_random_u32() & s->mask;
		WRITE_ONCE(*s->cons, cons);

		first = seq;
		n = put_until_full(&kp, item, s->slot_size, &seq,
				   2 * s->nr_slots);
		KUNIT_EXPECT_EQ_MSG(test, n, (cons - own - 1) & s->mask,
				    "cons %u, prod was %u", cons, own);
		KUNIT_EXPECT_EQ(test, *s->prod, (cons - 1) & s->mask);
		KUNIT_EXPECT_EQ(test, *s->cons, cons);
		for (j = 0; j < n; j++) {
			item_fill(item, s->slot_size, first + j);
			KUNIT_EXPECT_EQ(test, first_diff(slot_at(s, own + j),
							 item, s->slot_size),
					INTACT);
		}
		KUNIT_ASSERT_EQ(test, first_damaged_guard(s), INTACT);
	}
}

/*
 * A cons value with bits outside the mask never grants space, and is not
 * read modulo nr_slots either: the producer puts at most the
 * nr_slots - 1 items it knew were free at creation, then reports full,
 * writes nothing while cons stays nonsense, and resumes once cons is in
 * range again.
 */
static void producer_reports_full_for_out_of_range_cons(struct kunit *test)
{
	const struct geom *g = test->param_value;
	u32 bad[8], own, n;
	u64 seq = 0;
	size_t v;
	int i;

	out_of_range_values(g->nr_slots, bad);
	for (v = 0; v < ARRAY_SIZE(bad); v++) {
		struct seg *s = seg_create(test, g, TAIL_GUARD);
		struct clanq_queue kp;
		u8 *item = item_alloc(test, s);
		u8 *before;

		seg_attach(test, s, &kp);

		/* nonsense from the start: a bounded loop of puts ends */
		WRITE_ONCE(*s->cons, bad[v]);
		n = put_until_full(&kp, item, s->slot_size, &seq,
				   4 * s->nr_slots);
		KUNIT_EXPECT_LE_MSG(test, n, s->mask, "cons %#x", bad[v]);

		/*
		 * Stop the producer at bad & mask, where bad read modulo
		 * nr_slots would mean "everything consumed".
		 */
		WRITE_ONCE(*s->cons, (bad[v] + 1) & s->mask);
		put_until_full(&kp, item, s->slot_size, &seq, s->nr_slots);
		KUNIT_ASSERT_EQ(test, *s->prod, bad[v] & s->mask);

		WRITE_ONCE(*s->cons, bad[v]);
		before = snapshot(test, s->base, s->size);
		for (i = 0; i < BOUNDED_LOOP; i++) {
			KUNIT_ASSERT_FALSE_MSG(test, clanq_q_put(&kp, item),
					       "cons %#x", bad[v]);
			KUNIT_ASSERT_EQ(test, clanq_q_prod_space(&kp), 0);
		}
		KUNIT_EXPECT_EQ(test, first_diff(s->base, before, s->size),
				INTACT);

		/* a sane value again: "everything consumed" */
		own = *s->prod;
		WRITE_ONCE(*s->cons, own);
		KUNIT_EXPECT_EQ(test, put_until_full(&kp, item, s->slot_size,
						     &seq, 2 * s->nr_slots),
				s->mask);
		KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
	}
}

/*
 * Random and adversarial cons values, also rewritten between the puts of
 * a batch: each batch is exactly the space the cons value read at its
 * start proves, every put lands in the next slot, and a put reports full
 * only when cons is out of range or one ahead of prod.
 */
static void producer_stays_in_bounds_for_random_cons(struct kunit *test)
{
	struct seg *s = seg_create(test, &small_geom, TAIL_GUARD);
	struct clanq_queue kp;
	u8 *item = item_alloc(test, s);
	u32 own, cons, space, i, r, ok = 0, full = 0;
	u64 seq = 0;

	seg_attach(test, s, &kp);
	put_until_full(&kp, item, s->slot_size, &seq, s->nr_slots);

	for (r = 0; r < RANDOM_ROUNDS; r++) {
		own = *s->prod;
		cons = hostile_index(own, s->mask);
		WRITE_ONCE(*s->cons, cons);
		space = clanq_q_prod_space(&kp);
		KUNIT_ASSERT_EQ_MSG(test, space,
				    cons > s->mask ? 0 : (cons - own - 1) & s->mask,
				    "cons %#x, prod %u", cons, own);

		for (i = 0; i < space; i++) {
			WRITE_ONCE(*s->cons, hostile_index(own + i, s->mask));
			item_fill(item, s->slot_size, seq++);
			KUNIT_ASSERT_TRUE(test, clanq_q_put(&kp, item));
			KUNIT_ASSERT_EQ(test, first_diff(slot_at(s, own + i),
							 item, s->slot_size),
					INTACT);
			KUNIT_ASSERT_EQ(test, *s->prod, (own + i + 1) & s->mask);
		}
		KUNIT_ASSERT_EQ(test, first_damaged_guard(s), INTACT);
	}

	/* a bounded loop of puts against a cons rewritten before each */
	for (i = 0; i < BOUNDED_LOOP; i++) {
		own = *s->prod;
		cons = hostile_index(own, s->mask);
		WRITE_ONCE(*s->cons, cons);
		if (clanq_q_put(&kp, item)) {
			ok++;
			KUNIT_ASSERT_EQ(test, *s->prod, (own + 1) & s->mask);
		} else {
			full++;
			KUNIT_ASSERT_TRUE_MSG(test, cons > s->mask ||
					      cons == ((own + 1) & s->mask),
					      "full with cons %#x, prod %u",
					      cons, own);
			KUNIT_ASSERT_EQ(test, *s->prod, own);
		}
	}
	KUNIT_EXPECT_EQ(test, ok + full, BOUNDED_LOOP);
	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
}

/*
 * Hostile producer: user space owns prod and fills the slots, the kernel
 * consumes (the RDMA request queue direction).
 */

/*
 * Whatever in-range value prod holds, forwards or backwards of where it
 * was, a consumer that has drained what it knew of takes exactly the items
 * from its index up to prod (so at most nr_slots - 1), each copied from
 * the slot it belongs to.
 */
static void consumer_takes_exactly_the_items_before_prod(struct kunit *test)
{
	const struct geom *g = test->param_value;
	struct seg *s = seg_create(test, g, NO_TAIL_GUARD);
	u32 half = s->nr_slots / 2;
	const u32 moves[] = {	/* how prod moves, modulo nr_slots */
		1,		/* one item published */
		0,		/* nothing published */
		-1u,		/* one back: "a full queue" */
		2, -2u, half, -half, 3, 0, -3u, 1,
	};
	struct clanq_queue kc;
	u8 *out = item_alloc(test, s);
	u8 *want = item_alloc(test, s);
	u32 prod = 0, own, n, j, r;
	u64 tag;

	seg_attach(test, s, &kc);

	for (r = 0; r < ARRAY_SIZE(moves) + 16; r++) {
		own = *s->cons;
		if (r < ARRAY_SIZE(moves))
			prod = (prod + moves[r]) & s->mask;
		else
			prod = get_random_u32() & s->mask;
		/* every slot gets an item naming this round and that slot */
		tag = (u64)r << 32;
		for (j = 0; j < s->nr_slots; j++)
			item_fill(slot_at(s, j), s->slot_size, tag | j);
		WRITE_ONCE(*s->prod, prod);

		KUNIT_EXPECT_EQ_MSG(test, clanq_q_cons_avail(&kc),
				    (prod - own) & s->mask,
				    "prod %u, cons was %u", prod, own);
		for (n = 0; n < 2 * s->nr_slots; n++) {
			if (!clanq_q_get(&kc, out))
				break;
			item_fill(want, s->slot_size,
				  tag | ((own + n) & s->mask));
			KUNIT_EXPECT_EQ(test,
					first_diff(out, want, s->slot_size),
					INTACT);
			KUNIT_EXPECT_TRUE(test,
					  poison_intact(out, s->slot_size));
		}
		KUNIT_EXPECT_EQ_MSG(test, n, (prod - own) & s->mask,
				    "prod %u, cons was %u", prod, own);
		KUNIT_EXPECT_LE(test, n, s->mask);
		KUNIT_EXPECT_EQ(test, *s->cons, prod);
		KUNIT_EXPECT_EQ(test, *s->prod, prod);
		KUNIT_ASSERT_EQ(test, first_damaged_guard(s), INTACT);
	}
}

/*
 * A prod value with bits outside the mask reads as "empty", and is not
 * read modulo nr_slots either: a get copies nothing out and writes
 * nothing to the segment, and consuming resumes once prod is in range
 * again.
 */
static void consumer_reports_empty_for_out_of_range_prod(struct kunit *test)
{
	const struct geom *g = test->param_value;
	struct seg *s = seg_create(test, g, NO_TAIL_GUARD);
	struct clanq_queue kc;
	u8 *out = item_alloc(test, s);
	u8 *before;
	u32 bad[8], own;
	size_t v;
	int i;

	seg_attach(test, s, &kc);
	out_of_range_values(g->nr_slots, bad);
	get_random_bytes(s->slots, s->slot_bytes);

	for (v = 0; v < ARRAY_SIZE(bad); v++) {
		/*
		 * Move the consumer to bad + 1, where bad read modulo
		 * nr_slots would mean "a full queue".
		 */
		WRITE_ONCE(*s->prod, (bad[v] + 1) & s->mask);
		while (clanq_q_get(&kc, out))
			;
		KUNIT_ASSERT_EQ(test, *s->cons, (bad[v] + 1) & s->mask);

		memset(out, POISON_BYTE, s->slot_size + POISON_LEN);
		WRITE_ONCE(*s->prod, bad[v]);
		before = snapshot(test, s->base, s->size);
		for (i = 0; i < BOUNDED_LOOP; i++) {
			KUNIT_ASSERT_EQ_MSG(test, clanq_q_cons_avail(&kc), 0,
					    "prod %#x", bad[v]);
			KUNIT_ASSERT_TRUE(test, clanq_q_empty(&kc));
			KUNIT_ASSERT_FALSE(test, clanq_q_get(&kc, out));
		}
		KUNIT_EXPECT_NULL(test, memchr_inv(out, POISON_BYTE,
						   s->slot_size + POISON_LEN));
		KUNIT_EXPECT_EQ(test, first_diff(s->base, before, s->size),
				INTACT);
	}

	/* a sane value again: "a full queue" */
	own = *s->cons;
	WRITE_ONCE(*s->prod, (own - 1) & s->mask);
	KUNIT_EXPECT_EQ(test, clanq_q_cons_avail(&kc), s->mask);
	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
}

/*
 * Random and adversarial prod values, also rewritten between the gets of
 * a batch, and random garbage in the slots: each batch is exactly what
 * avail() reported from the prod value it read (never more than
 * nr_slots - 1), every get copies exactly slot_size bytes of the next
 * slot, and a get reports empty only when prod is out of range or equal
 * to cons.
 */
static void consumer_stays_in_bounds_for_random_prod(struct kunit *test)
{
	struct seg *s = seg_create(test, &small_geom, NO_TAIL_GUARD);
	struct clanq_queue kc;
	u8 *out = item_alloc(test, s);
	u8 *want = item_alloc(test, s);
	u32 own, prod, avail, i, r, got = 0, empty = 0;

	seg_attach(test, s, &kc);

	for (r = 0; r < RANDOM_ROUNDS; r++) {
		own = *s->cons;
		get_random_bytes(s->slots, s->slot_bytes);
		prod = hostile_index(own, s->mask);
		WRITE_ONCE(*s->prod, prod);
		avail = clanq_q_cons_avail(&kc);
		KUNIT_ASSERT_EQ_MSG(test, avail,
				    prod > s->mask ? 0 : (prod - own) & s->mask,
				    "prod %#x, cons %u", prod, own);
		KUNIT_ASSERT_LE(test, avail, s->mask);

		for (i = 0; i < avail; i++) {
			WRITE_ONCE(*s->prod, hostile_index(own + i, s->mask));
			memcpy(want, slot_at(s, own + i), s->slot_size);
			KUNIT_ASSERT_TRUE(test, clanq_q_get(&kc, out));
			KUNIT_ASSERT_EQ(test,
					first_diff(out, want, s->slot_size),
					INTACT);
			KUNIT_ASSERT_TRUE(test,
					  poison_intact(out, s->slot_size));
			KUNIT_ASSERT_EQ(test, *s->cons, (own + i + 1) & s->mask);
		}
		KUNIT_ASSERT_EQ(test, first_damaged_guard(s), INTACT);
	}

	/* a bounded loop of gets against a prod rewritten before each */
	for (i = 0; i < BOUNDED_LOOP; i++) {
		own = *s->cons;
		prod = hostile_index(own, s->mask);
		WRITE_ONCE(*s->prod, prod);
		if (clanq_q_get(&kc, out)) {
			got++;
			KUNIT_ASSERT_EQ(test, *s->cons, (own + 1) & s->mask);
		} else {
			empty++;
			KUNIT_ASSERT_TRUE_MSG(test, prod > s->mask || prod == own,
					      "empty with prod %#x, cons %u",
					      prod, own);
			KUNIT_ASSERT_EQ(test, *s->cons, own);
		}
		KUNIT_ASSERT_TRUE(test, poison_intact(out, s->slot_size));
	}
	KUNIT_EXPECT_EQ(test, got + empty, BOUNDED_LOOP);
	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
}

/* A request as a driver might take it off a queue, and its check. */
struct fake_req {
	u64 addr;
	u32 len;
	u32 flags;
};

#define FAKE_REQ_MAX_LEN	4096u

static bool fake_req_valid(const struct fake_req *req)
{
	return req->len <= FAKE_REQ_MAX_LEN && !req->flags;
}

/*
 * clanq_q_get() hands the kernel a private copy: once that copy is
 * validated, the peer rewriting the slot changes nothing the kernel acts
 * on.
 */
static void consumer_validates_a_copy_the_peer_cannot_change(struct kunit *test)
{
	const struct geom g = { 4, sizeof(struct fake_req) };
	struct seg *s = seg_create(test, &g, NO_TAIL_GUARD);
	struct fake_req req = { .addr = 0x1000, .len = 64 };
	struct fake_req *slot = (struct fake_req *)slot_at(s, 0);
	struct fake_req copy;
	struct clanq_queue kc;

	seg_attach(test, s, &kc);

	/* the peer publishes one valid request */
	memcpy(slot, &req, sizeof(req));
	WRITE_ONCE(*s->prod, 1);

	KUNIT_ASSERT_TRUE(test, clanq_q_get(&kc, &copy));
	KUNIT_ASSERT_TRUE(test, fake_req_valid(&copy));

	/* ... and rewrites it after the kernel has checked its copy */
	WRITE_ONCE(slot->len, 0xffffffffu);
	WRITE_ONCE(slot->flags, 0xdeadu);
	WRITE_ONCE(slot->addr, 0);

	KUNIT_EXPECT_FALSE(test, fake_req_valid(slot));
	KUNIT_EXPECT_TRUE(test, fake_req_valid(&copy));
	KUNIT_EXPECT_EQ(test, first_diff(&copy, &req, sizeof(req)), INTACT);
	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
}

/*
 * A concurrent hostile peer: a kthread that keeps rewriting the index
 * word the peer owns and random words of the slots.
 */

struct scribbler {
	struct seg *s;
	u32 *word;		/* the peer's index word */
	const u32 *aim;		/* the kernel's published index */
	struct completion started;
	unsigned long writes;
};

static int scribbler_fn(void *data)
{
	struct scribbler *sc = data;
	u64 *words = (u64 *)sc->s->slots;
	u32 nr_words = sc->s->slot_bytes / sizeof(u64);

	while (!kthread_should_stop()) {
		WRITE_ONCE(*sc->word,
			   hostile_index(READ_ONCE(*sc->aim), sc->s->mask));
		WRITE_ONCE(words[get_random_u32_below(nr_words)],
			   get_random_u64());
		if (!sc->writes++)
			complete(&sc->started);
		cond_resched();
	}
	return 0;
}

/* Start a scribbler on @word; the test's cleanup stops it if it fails. */
static struct task_struct *scribbler_start(struct kunit *test,
					   struct scribbler *sc, struct seg *s,
					   u32 *word, const u32 *aim)
{
	struct task_struct *task;

	sc->s = s;
	sc->word = word;
	sc->aim = aim;
	init_completion(&sc->started);
	task = kthread_run(scribbler_fn, sc, "clanq-scribbler");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							kthread_stop_action,
							task), 0);
	KUNIT_ASSERT_NE(test, wait_for_completion_timeout(&sc->started,
							  30 * HZ), 0);
	return task;
}

static int scribbler_stop(struct kunit *test, struct task_struct *task)
{
	kunit_remove_action(test, kthread_stop_action, task);
	return kthread_stop(task);
}

static void producer_stays_in_bounds_under_concurrent_scribbler(struct kunit *test)
{
	struct seg *s = seg_create(test, &small_geom, TAIL_GUARD);
	struct scribbler *sc = kunit_kzalloc(test, sizeof(*sc), GFP_KERNEL);
	struct task_struct *task;
	struct clanq_queue kp;
	u8 *item = item_alloc(test, s);
	u32 i, ok = 0, full = 0, stray = 0;

	KUNIT_ASSERT_NOT_NULL(test, sc);
	seg_attach(test, s, &kp);
	task = scribbler_start(test, sc, s, s->cons, s->prod);

	for (i = 0; i < CONCURRENT_OPS; i++) {
		item_fill(item, s->slot_size, i);
		if (clanq_q_put(&kp, item))
			ok++;
		else
			full++;
		if (READ_ONCE(*s->prod) > s->mask)
			stray++;
	}

	KUNIT_EXPECT_EQ(test, scribbler_stop(test, task), 0);
	KUNIT_EXPECT_GT(test, sc->writes, 0);
	KUNIT_EXPECT_EQ(test, ok + full, CONCURRENT_OPS);
	KUNIT_EXPECT_EQ(test, stray, 0);
	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
	kunit_info(test, "%u put, %u full, %lu peer writes\n",
		   ok, full, sc->writes);
}

static void consumer_stays_in_bounds_under_concurrent_scribbler(struct kunit *test)
{
	struct seg *s = seg_create(test, &small_geom, NO_TAIL_GUARD);
	struct scribbler *sc = kunit_kzalloc(test, sizeof(*sc), GFP_KERNEL);
	struct task_struct *task;
	struct clanq_queue kc;
	u8 *out = item_alloc(test, s);
	u32 i, got = 0, empty = 0, stray = 0, overrun = 0;

	KUNIT_ASSERT_NOT_NULL(test, sc);
	seg_attach(test, s, &kc);
	task = scribbler_start(test, sc, s, s->prod, s->cons);

	for (i = 0; i < CONCURRENT_OPS; i++) {
		if (clanq_q_get(&kc, out))
			got++;
		else
			empty++;
		if (READ_ONCE(*s->cons) > s->mask)
			stray++;
		if (!poison_intact(out, s->slot_size))
			overrun++;
	}

	KUNIT_EXPECT_EQ(test, scribbler_stop(test, task), 0);
	KUNIT_EXPECT_GT(test, sc->writes, 0);
	KUNIT_EXPECT_EQ(test, got + empty, CONCURRENT_OPS);
	KUNIT_EXPECT_EQ(test, stray, 0);
	KUNIT_EXPECT_EQ(test, overrun, 0);
	KUNIT_EXPECT_EQ(test, first_damaged_guard(s), INTACT);
	kunit_info(test, "%u got, %u empty, %lu peer writes\n",
		   got, empty, sc->writes);
}

static struct kunit_case clanq_queue_cases[] = {
	KUNIT_CASE_PARAM(queue_of_n_slots_holds_n_minus_one_items,
			 geom_gen_params),
	KUNIT_CASE_PARAM(items_come_out_in_order_across_wrap_arounds,
			 geom_gen_params),
	KUNIT_CASE_PARAM(full_put_and_empty_get_change_nothing,
			 geom_gen_params),
	KUNIT_CASE_PARAM(producer_fills_exactly_to_one_slot_before_cons,
			 geom_gen_params),
	KUNIT_CASE_PARAM(producer_reports_full_for_out_of_range_cons,
			 geom_gen_params),
	KUNIT_CASE(producer_stays_in_bounds_for_random_cons),
	KUNIT_CASE_PARAM(consumer_takes_exactly_the_items_before_prod,
			 geom_gen_params),
	KUNIT_CASE_PARAM(consumer_reports_empty_for_out_of_range_prod,
			 geom_gen_params),
	KUNIT_CASE(consumer_stays_in_bounds_for_random_prod),
	KUNIT_CASE(consumer_validates_a_copy_the_peer_cannot_change),
	KUNIT_CASE(producer_stays_in_bounds_under_concurrent_scribbler),
	KUNIT_CASE(consumer_stays_in_bounds_under_concurrent_scribbler),
	{}
};

static struct kunit_suite clanq_queue_suite = {
	.name = "clanq_queue",
	.test_cases = clanq_queue_cases,
};

kunit_test_suites(&clanq_queue_suite);

MODULE_DESCRIPTION("KUnit tests for clanq: the queue, OOB messages, event queues");
MODULE_LICENSE("GPL");
