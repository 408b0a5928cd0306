// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for include/clanq/queue.h, the SPSC queue shared by the
 * driver and libclanq, built here as user space C11: basic behaviour
 * and the cached peer index.
 *
 * Every test plays both sides through two private views (struct
 * clanq_queue) of one shared segment, as the driver and the application
 * do, or plays a hostile peer by writing the shared index words directly.
 * The segment sits between guard bytes, and every byte that is neither an
 * index word nor a slot is filled with a pattern that is checked after
 * each test: a queue that strays outside its slot array shows up even in
 * a plain build. Under AddressSanitizer those bytes are also poisoned, so
 * a stray read is caught as well.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <clanq.h>
#include <clanq/queue.h>

#include "queue_fixture.h"

/* =====================================================================
 * Basic behaviour
 */

static void test_empty_queue_get_fails_avail_is_zero_nothing_is_written(
	void **state)
{
	struct seg *s = seg_new(8, 64);
	unsigned char out[64];
	unsigned char want[64];

	(void)state;
	set_ctx("empty queue");
	memset(out, 0x3c, sizeof(out));
	memcpy(want, out, sizeof(out));

	assert_int_equal(clanq_q_cons_avail(&s->c), 0);
	assert_true(clanq_q_empty(&s->c));
	assert_false(clanq_q_get(&s->c, out));
	/* a failed get neither fills the buffer nor moves the cons word */
	assert_memory_equal(out, want, sizeof(out));
	assert_int_equal(load_word(s->c.cons), 0);
	assert_int_equal(s->c.own, 0);

	/* and a producer of an empty queue sees all but one slot free */
	assert_int_equal(clanq_q_prod_space(&s->p), 7);
	seg_check_free(s);
}

static void put_get_one(uint32_t nr, uint32_t size)
{
	struct seg *s = seg_new(nr, size);
	unsigned char *in = tmalloc(size);		/* exact: ASan */
	unsigned char *out = tmalloc(size + 16);
	unsigned int i;

	item_fill(in, size, 42);
	memset(out, 0x3c, size + 16);
	check(clanq_q_put(&s->p, in));
	check(!clanq_q_empty(&s->c));
	check_eq(clanq_q_cons_avail(&s->c), 1);
	check(clanq_q_get(&s->c, out));
	check(memcmp(in, out, size) == 0);
	/* get copies exactly one slot, not a byte more */
	for (i = size; i < size + 16; i++)
		check_eq(out[i], 0x3c);
	check(clanq_q_empty(&s->c));
	check(!clanq_q_get(&s->c, out));
	/* both index words moved to 1 and agree: empty again */
	check_eq(load_word(s->p.prod), 1 & (nr - 1));
	check_eq(load_word(s->c.cons), 1 & (nr - 1));
	tfree(in);
	tfree(out);
	seg_check_free(s);
}

static void test_put_then_get_returns_the_same_bytes(void **state)
{
	(void)state;
	each_geometry(put_get_one);
}

static void fifo_one(uint32_t nr, uint32_t size)
{
	struct seg *s = seg_new(nr, size);
	unsigned char *buf = tmalloc(size);
	uint32_t i, n = nr - 1;

	for (i = 0; i < n; i++) {
		item_fill(buf, size, 1000 + i);
		check(clanq_q_put(&s->p, buf));
	}
	for (i = 0; i < n; i++) {
		check(clanq_q_get(&s->c, buf));
		if (!item_is(buf, size, 1000 + i))
			fail_msg("%s: item %u out of order or corrupt", ctx,
				 i);
	}
	check(!clanq_q_get(&s->c, buf));
	tfree(buf);
	seg_check_free(s);
}

static void test_items_come_out_in_fifo_order(void **state)
{
	(void)state;
	each_geometry(fifo_one);
}

static void test_consumer_sees_nothing_until_the_producer_publishes(
	void **state)
{
	struct seg *s = seg_new(8, 64);
	unsigned char out[64];

	(void)state;
	set_ctx("8 x 64 in place");
	assert_true(clanq_q_prod_space(&s->p) > 0);
	/* the put helpers and the in-place API agree on the next slot */
	assert_ptr_equal(clanq_q_prod_slot(&s->p), s->base + s->qo.slots);
	item_fill(clanq_q_prod_slot(&s->p), 64, 7);
	assert_int_equal(clanq_q_cons_avail(&s->c), 0);
	assert_false(clanq_q_get(&s->c, out));

	clanq_q_prod_publish(&s->p, 1);
	assert_int_equal(clanq_q_cons_avail(&s->c), 1);
	assert_ptr_equal(clanq_q_cons_slot(&s->c), s->base + s->qo.slots);
	assert_true(item_is(clanq_q_cons_slot(&s->c), 64, 7));
	clanq_q_cons_release(&s->c, 1);
	assert_int_equal(clanq_q_cons_avail(&s->c), 0);
	/* the next in-place slot is the next one in the array */
	assert_ptr_equal(clanq_q_prod_slot(&s->p),
			 s->base + s->qo.slots + 64);
	seg_check_free(s);
}

static void batch_one(uint32_t nr, uint32_t size)
{
	struct seg *s = seg_new(nr, size);
	uint64_t seq_in = 0, seq_out = 0;
	unsigned int round;

	/* several rounds, so batches straddle the index wrap */
	for (round = 0; round < 5; round++) {
		uint32_t space = clanq_q_prod_space(&s->p);
		uint32_t n, i, avail;

		check(space > 0 && space <= nr - 1);
		n = space > 3 ? space - round % 3 : space;
		for (i = 0; i < n; i++)
			item_fill(clanq_q_slot(&s->p, s->p.own + i), size,
				  seq_in + i);
		check_eq(clanq_q_cons_avail(&s->c), 0);
		clanq_q_prod_publish(&s->p, n);
		seq_in += n;

		avail = clanq_q_cons_avail(&s->c);
		check_eq(avail, n);
		for (i = 0; i < avail; i++)
			if (!item_is(clanq_q_slot(&s->c, s->c.own + i), size,
				     seq_out + i))
				fail_msg("%s: round %u, batch item %u wrong",
					 ctx, round, i);
		clanq_q_cons_release(&s->c, avail);
		seq_out += avail;
		check_eq(clanq_q_cons_avail(&s->c), 0);
		check_eq(load_word(s->c.cons), seq_out & (nr - 1));
	}
	seg_check_free(s);
}

static void test_batch_publish_and_release_move_n_slots_at_once(void **state)
{
	(void)state;
	each_geometry(batch_one);
}

static void capacity_one(uint32_t nr, uint32_t size)
{
	struct seg *s = seg_new(nr, size);
	unsigned char *buf = tmalloc(size);
	uint32_t phase, at = 0;
	uint32_t phases[] = { 0, 1, nr / 2, nr - 1 };
	unsigned int k, nr_phases = nr <= 64 ? nr : ARRAY_SIZE(phases);

	/* small queues: start full at every index; large: at the edges */
	for (k = 0; k < nr_phases; k++) {
		uint32_t i;

		phase = nr <= 64 ? k : phases[k];
		advance(s, (phase - at) & (nr - 1), buf);
		at = phase;
		check_eq(load_word(s->p.prod), phase);

		for (i = 0; i < nr - 1; i++) {
			item_fill(buf, size, i);
			if (!clanq_q_put(&s->p, buf))
				fail_msg("%s: phase %u: put %u of %u failed",
					 ctx, phase, i + 1, nr - 1);
		}
		item_fill(buf, size, 0xbad);
		if (clanq_q_put(&s->p, buf))
			fail_msg("%s: phase %u: put %u succeeded", ctx, phase,
				 nr);
		check_eq(clanq_q_prod_space(&s->p), 0);
		check_eq(clanq_q_cons_avail(&s->c), nr - 1);
		for (i = 0; i < nr - 1; i++) {
			check(clanq_q_get(&s->c, buf));
			if (!item_is(buf, size, i))
				fail_msg("%s: phase %u: item %u wrong", ctx,
					 phase, i);
		}
		check(!clanq_q_get(&s->c, buf));
		at = (at + nr - 1) & (nr - 1);
	}
	tfree(buf);
	seg_check_free(s);
}

static void test_queue_of_n_slots_takes_exactly_n_minus_1_items(void **state)
{
	(void)state;
	each_geometry(capacity_one);
}

static void one_more_one(uint32_t nr, uint32_t size)
{
	struct seg *s = seg_new(nr, size);
	unsigned char *buf = tmalloc(size);
	uint64_t seq_in = 0, seq_out = 0;
	uint32_t i, steps = nr <= 1024 ? 2 * nr + 3 : 64;

	for (i = 0; i < nr - 1; i++) {
		item_fill(buf, size, seq_in++);
		check(clanq_q_put(&s->p, buf));
	}
	/* a full window slid around the ring, across the index wrap */
	for (i = 0; i < steps; i++) {
		item_fill(buf, size, 0xbad);
		if (clanq_q_put(&s->p, buf))
			fail_msg("%s: step %u: put into a full queue", ctx, i);
		check(clanq_q_get(&s->c, buf));
		if (!item_is(buf, size, seq_out++))
			fail_msg("%s: step %u: wrong item", ctx, i);
		item_fill(buf, size, seq_in++);
		if (!clanq_q_put(&s->p, buf))
			fail_msg("%s: step %u: put after a get failed", ctx,
				 i);
		item_fill(buf, size, 0xbad);
		if (clanq_q_put(&s->p, buf))
			fail_msg("%s: step %u: second put after one get",
				 ctx, i);
	}
	tfree(buf);
	seg_check_free(s);
}

static void test_after_one_get_from_full_exactly_one_more_put_succeeds(
	void **state)
{
	(void)state;
	each_geometry(one_more_one);
}

/* Indices as the peers publish them never leave [0, nr_slots). */
static void check_words(struct seg *s)
{
	check(load_word(s->p.prod) <= s->p.mask);
	check(load_word(s->c.cons) <= s->c.mask);
	check(s->p.own <= s->p.mask && s->c.own <= s->c.mask);
}

static void wrap_one(uint32_t nr, uint32_t size)
{
	struct seg *s = seg_new(nr, size);
	unsigned char *buf = tmalloc(size);
	uint64_t rng = nr * 31 + size;
	uint64_t seq_in = 0, seq_out = 0, total;
	unsigned int cycle, cycles = nr <= 64 ? nr + 3 : 3;

	/*
	 * Fill to full and drain to empty. Each cycle moves the indices by
	 * nr - 1, so for small queues the full point visits every slot and
	 * every cycle crosses the wrap.
	 */
	for (cycle = 0; cycle < cycles; cycle++) {
		/* bounded: a queue that never fills must fail, not hang */
		while (seq_in - seq_out < nr && clanq_q_prod_space(&s->p)) {
			item_fill(buf, size, seq_in);
			check(clanq_q_put(&s->p, buf));
			seq_in++;
		}
		check_eq(seq_in - seq_out, nr - 1);
		check_words(s);
		while (seq_out < seq_in && clanq_q_get(&s->c, buf)) {
			if (!item_is(buf, size, seq_out))
				fail_msg("%s: cycle %u: item %" PRIu64
					 " wrong", ctx, cycle, seq_out);
			seq_out++;
		}
		check_eq(seq_in, seq_out);
		check(!clanq_q_get(&s->c, buf));
		check_words(s);
	}

	/*
	 * Then random partial fills and drains, alternating the copying and
	 * in-place APIs, so that the two indices cross the wrap at every
	 * distance from each other.
	 */
	total = seq_in + (nr * 3 > 10000 ? nr * 3 : 10000);
	while (seq_out < total) {
		uint32_t k = 1 + rng_next(&rng) % (nr - 1);
		uint32_t j, avail;
		uint64_t in_before = seq_in, out_before = seq_out;

		for (j = 0; j < k && seq_in < total; j++) {
			if (!clanq_q_prod_space(&s->p))
				break;
			if (seq_in & 1) {
				item_fill(buf, size, seq_in);
				check(clanq_q_put(&s->p, buf));
			} else {
				item_fill(clanq_q_prod_slot(&s->p), size,
					  seq_in);
				clanq_q_prod_publish(&s->p, 1);
			}
			seq_in++;
		}
		check_words(s);
		avail = clanq_q_cons_avail(&s->c);
		check(avail <= seq_in - seq_out);
		k = avail ? 1 + rng_next(&rng) % avail : 0;
		for (j = 0; j < k; j++) {
			if (seq_out & 1) {
				check(clanq_q_get(&s->c, buf));
				check(item_is(buf, size, seq_out));
			} else {
				check(clanq_q_cons_avail(&s->c));
				check(item_is(clanq_q_cons_slot(&s->c), size,
					      seq_out));
				clanq_q_cons_release(&s->c, 1);
			}
			seq_out++;
		}
		check_words(s);
		/* room or items, one side must always be able to move */
		if (seq_in == in_before && seq_out == out_before)
			fail_msg("%s: stuck with %" PRIu64 " items queued",
				 ctx, seq_in - seq_out);
	}
	check(!clanq_q_get(&s->c, buf));
	tfree(buf);
	seg_check_free(s);
}

static void test_fill_and_drain_across_index_wrap_keeps_order_and_data(
	void **state)
{
	(void)state;
	each_geometry(wrap_one);
}

/* =====================================================================
 * The cached peer index
 */

static void test_consumer_avail_picks_up_a_plain_store_to_prod(void **state)
{
	struct seg *s = seg_new(8, 16);
	unsigned char out[16];
	uint32_t i;

	(void)state;
	set_ctx("8 x 16");
	/* a producer at its simplest: write slots, then store prod */
	for (i = 0; i < 3; i++)
		item_fill(clanq_q_slot(&s->p, i), 16, i);
	store_word(s->p.prod, 3);
	assert_int_equal(clanq_q_cons_avail(&s->c), 3);
	for (i = 0; i < 3; i++) {
		assert_true(clanq_q_get(&s->c, out));
		assert_true(item_is(out, 16, i));
	}
	assert_int_equal(clanq_q_cons_avail(&s->c), 0);

	/* seven more, wrapping: prod goes 3 -> 2 */
	for (i = 3; i < 10; i++)
		item_fill(clanq_q_slot(&s->p, i), 16, i);
	store_word(s->p.prod, 10 & 7);
	assert_int_equal(clanq_q_cons_avail(&s->c), 7);
	for (i = 3; i < 10; i++) {
		assert_true(clanq_q_get(&s->c, out));
		assert_true(item_is(out, 16, i));
	}
	assert_false(clanq_q_get(&s->c, out));
	assert_int_equal(load_word(s->c.cons), 2);
	seg_check_free(s);
}

static void test_consumer_rereads_prod_only_when_its_cache_says_empty(
	void **state)
{
	struct seg *s = seg_new(8, 16);
	unsigned char buf[16];
	uint32_t i;

	(void)state;
	set_ctx("8 x 16");
	for (i = 0; i < 5; i++)
		item_fill(clanq_q_slot(&s->p, i), 16, i);
	store_word(s->p.prod, 3);
	assert_int_equal(clanq_q_cons_avail(&s->c), 3);
	/*
	 * Two more are published, but the consumer still has three it
	 * knows of: it must not touch the producer's line for them.
	 */
	store_word(s->p.prod, 5);
	assert_int_equal(clanq_q_cons_avail(&s->c), 3);
	assert_true(clanq_q_get(&s->c, buf));
	assert_int_equal(clanq_q_cons_avail(&s->c), 2);
	assert_true(clanq_q_get(&s->c, buf));
	assert_true(clanq_q_get(&s->c, buf));
	assert_true(item_is(buf, 16, 2));
	/* cache exhausted: now it looks, and finds the other two */
	assert_int_equal(clanq_q_cons_avail(&s->c), 2);
	assert_true(clanq_q_get(&s->c, buf));
	assert_true(item_is(buf, 16, 3));
	seg_check_free(s);
}

static void test_producer_space_picks_up_a_plain_store_to_cons(void **state)
{
	struct seg *s = seg_new(8, 16);
	unsigned char buf[16];
	uint32_t i;

	(void)state;
	set_ctx("8 x 16");
	for (i = 0; i < 7; i++) {
		item_fill(buf, 16, i);
		assert_true(clanq_q_put(&s->p, buf));
	}
	assert_int_equal(clanq_q_prod_space(&s->p), 0);
	/* a consumer at its simplest: read slots, then store cons */
	store_word(s->c.cons, 4);
	assert_int_equal(clanq_q_prod_space(&s->p), 4);
	for (i = 7; i < 11; i++) {
		item_fill(buf, 16, i);
		assert_true(clanq_q_put(&s->p, buf));
	}
	assert_false(clanq_q_put(&s->p, buf));
	/* the four new items landed in slots 7, 0, 1, 2 */
	assert_true(item_is(clanq_q_slot(&s->p, 7), 16, 7));
	assert_true(item_is(clanq_q_slot(&s->p, 0), 16, 8));
	assert_true(item_is(clanq_q_slot(&s->p, 2), 16, 10));
	assert_true(item_is(clanq_q_slot(&s->p, 3), 16, 3));
	seg_check_free(s);
}

static void test_producer_rereads_cons_only_when_its_cache_says_full(
	void **state)
{
	struct seg *s = seg_new(8, 16);
	unsigned char buf[16];
	uint32_t i;

	(void)state;
	set_ctx("8 x 16");
	item_fill(buf, 16, 0);
	for (i = 0; i < 3; i++)
		assert_true(clanq_q_put(&s->p, buf));
	assert_int_equal(clanq_q_prod_space(&s->p), 4);
	/* the consumer frees two slots; the producer still has four */
	assert_true(clanq_q_get(&s->c, buf));
	assert_true(clanq_q_get(&s->c, buf));
	assert_int_equal(load_word(s->c.cons), 2);
	assert_int_equal(clanq_q_prod_space(&s->p), 4);
	for (i = 0; i < 4; i++)
		assert_true(clanq_q_put(&s->p, buf));
	/* cache says full: now it looks, and finds the two */
	assert_int_equal(clanq_q_prod_space(&s->p), 2);
	assert_true(clanq_q_put(&s->p, buf));
	assert_true(clanq_q_put(&s->p, buf));
	assert_false(clanq_q_put(&s->p, buf));
	seg_check_free(s);
}

#define T(f)	cmocka_unit_test_teardown(f, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_empty_queue_get_fails_avail_is_zero_nothing_is_written),
		T(test_put_then_get_returns_the_same_bytes),
		T(test_items_come_out_in_fifo_order),
		T(test_consumer_sees_nothing_until_the_producer_publishes),
		T(test_batch_publish_and_release_move_n_slots_at_once),
		T(test_queue_of_n_slots_takes_exactly_n_minus_1_items),
		T(test_after_one_get_from_full_exactly_one_more_put_succeeds),
		T(test_fill_and_drain_across_index_wrap_keeps_order_and_data),
		T(test_consumer_avail_picks_up_a_plain_store_to_prod),
		T(test_consumer_rereads_prod_only_when_its_cache_says_empty),
		T(test_producer_space_picks_up_a_plain_store_to_cons),
		T(test_producer_rereads_cons_only_when_its_cache_says_full),
	};

	return cmocka_run_group_tests_name("queue_basic", tests, NULL, NULL);
}
