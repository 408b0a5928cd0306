// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for include/clanq/queue.h, the SPSC queue shared by the
 * driver and libclanq, built here as user space C11: a hostile peer, and
 * the guard check that catches a stray byte.
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
 * A hostile peer: whatever it writes into its index word, the other side
 * stays inside its slot array and merely sees an empty or full queue.
 */

static void bad_values(uint32_t nr, uint32_t legit, uint32_t v[6])
{
	v[0] = nr;			/* one past the end */
	v[1] = 0xffffffffu;
	v[2] = nr;			/* mask + 1, spelled as in the doc */
	v[3] = 1u << 31;
	v[4] = nr * 2;
	/* right low bits, one bit too many: masking would accept it */
	v[5] = nr | ((legit + 1) & (nr - 1));
}

static void snapshot(struct seg *s, unsigned char *copy)
{
	memcpy(copy, s->base + s->qo.slots, s->slots_bytes);
}

static bool slots_unchanged(struct seg *s, const unsigned char *copy)
{
	return memcmp(copy, s->base + s->qo.slots, s->slots_bytes) == 0;
}

static void hostile_prod_one(uint32_t nr, uint32_t size)
{
	unsigned char *buf = tmalloc(size);
	unsigned char *out = tmalloc(size);
	uint32_t bad[6], start[2] = { 0, nr - 1 };
	unsigned int b, k;

	for (k = 0; k < ARRAY_SIZE(start); k++) {
		struct seg *s = seg_new(nr, size);

		advance(s, start[k], buf);
		for (b = 0; b < ARRAY_SIZE(bad); b++) {
			uint32_t cons_before;

			/* the consumer will be at own + 1 when it looks */
			bad_values(nr, s->c.own + 1, bad);
			set_ctx("nr_slots %u, slot_size %u, consumer at %u, "
				"prod = %#x", nr, size, s->c.own, bad[b]);

			/* one honest item first, which the cache holds */
			item_fill(buf, size, b);
			check(clanq_q_put(&s->p, buf));
			check_eq(clanq_q_cons_avail(&s->c), 1);
			store_word(s->c.prod, bad[b]);

			/* the item it already knows of is still delivered */
			check(clanq_q_get(&s->c, out));
			check(item_is(out, size, b));
			cons_before = load_word(s->c.cons);

			memset(out, 0x3c, size);
			check_eq(clanq_q_cons_avail(&s->c), 0);
			check(clanq_q_empty(&s->c));
			check(!clanq_q_get(&s->c, out));
			check(!clanq_q_get(&s->c, out));
			check_eq(clanq_q_cons_avail(&s->c), 0);
			check_eq(out[0], 0x3c);
			check_eq(out[size - 1], 0x3c);
			/* nothing was consumed, so cons did not move */
			check_eq(load_word(s->c.cons), cons_before);
			check(s->c.own <= s->c.mask);

			/*
			 * The producer's next publish rewrites prod with a sane
			 * value, and the queue works again.
			 */
			item_fill(buf, size, 100 + b);
			check(clanq_q_put(&s->p, buf));
			check_eq(clanq_q_cons_avail(&s->c), 1);
			check(clanq_q_get(&s->c, out));
			check(item_is(out, size, 100 + b));
		}
		seg_check_free(s);
	}
	tfree(buf);
	tfree(out);
}

static void test_out_of_range_prod_reads_as_empty_to_the_consumer(void **state)
{
	(void)state;
	each_geometry(hostile_prod_one);
}

static void hostile_cons_one(uint32_t nr, uint32_t size)
{
	unsigned char *buf = tmalloc(size);
	unsigned char *copy = tmalloc(nr * (size_t)size);
	uint32_t bad[6], start[2] = { 0, nr - 1 };
	unsigned int b, k;

	for (k = 0; k < ARRAY_SIZE(start); k++) {
		struct seg *s = seg_new(nr, size);
		uint32_t i, legit;

		advance(s, start[k], buf);
		/*
		 * The producer consults cons only once its cache says full,
		 * so fill the queue first.
		 */
		for (i = 0; i < nr - 1; i++) {
			item_fill(buf, size, 100 + i);
			check(clanq_q_put(&s->p, buf));
		}
		legit = load_word(s->c.cons);
		bad_values(nr, legit, bad);
		for (b = 0; b < ARRAY_SIZE(bad); b++) {
			uint32_t prod_before = load_word(s->p.prod);

			set_ctx("nr_slots %u, slot_size %u, producer at %u, "
				"cons = %#x", nr, size, s->p.own, bad[b]);
			store_word(s->p.cons, bad[b]);
			snapshot(s, copy);

			item_fill(buf, size, 0xbad);
			check_eq(clanq_q_prod_space(&s->p), 0);
			check(!clanq_q_put(&s->p, buf));
			check(!clanq_q_put(&s->p, buf));
			check_eq(clanq_q_prod_space(&s->p), 0);
			/* a failed put writes neither a slot nor prod */
			check(slots_unchanged(s, copy));
			check_eq(load_word(s->p.prod), prod_before);
			check(s->p.own <= s->p.mask);
			store_word(s->p.cons, legit);
		}

		/*
		 * The honest consumer drains (its releases rewrite cons) and
		 * the producer can use the queue again.
		 */
		for (i = 0; i < nr - 1; i++) {
			check(clanq_q_get(&s->c, buf));
			check(item_is(buf, size, 100 + i));
		}
		check_eq(clanq_q_prod_space(&s->p), nr - 1);
		item_fill(buf, size, 3);
		check(clanq_q_put(&s->p, buf));
		check(clanq_q_get(&s->c, buf));
		check(item_is(buf, size, 3));
		seg_check_free(s);
	}
	tfree(buf);
	tfree(copy);
}

static void test_out_of_range_cons_reads_as_full_to_the_producer(void **state)
{
	(void)state;
	each_geometry(hostile_cons_one);
}

/*
 * A consumer index that moves backwards, or past what was produced, is
 * in range but a lie: the producer sees no progress, and never less
 * room than it had already proven (the RDMA engine counts on that room
 * for completions it owes). The honest index then counts again.
 */
static void lying_cons_one(uint32_t nr, uint32_t size)
{
	unsigned char *buf = tmalloc(size);
	struct seg *s = seg_new(nr, size);
	uint32_t i, room, legit, lies[2];
	unsigned int b;

	if (nr < 4)
		goto out;
	advance(s, nr / 2, buf);
	/* half full, a quarter consumed: the producer proves its room */
	for (i = 0; i < nr / 2; i++) {
		item_fill(buf, size, i);
		check(clanq_q_put(&s->p, buf));
	}
	for (i = 0; i < nr / 4; i++)
		check(clanq_q_get(&s->c, buf));
	room = clanq_q_prod_space_for(&s->p, nr - 1);
	check_eq(room, nr - 1 - (nr / 2 - nr / 4));
	legit = load_word(s->c.cons);
	lies[0] = (legit - 1) & s->p.mask;		/* backwards */
	lies[1] = (s->p.own + 1) & s->p.mask;		/* past the producer */
	for (b = 0; b < ARRAY_SIZE(lies); b++) {
		set_ctx("nr_slots %u, room %u, cons %u -> %u", nr, room, legit,
			lies[b]);
		store_word(s->p.cons, lies[b]);
		check_eq(clanq_q_prod_space_for(&s->p, nr - 1), room);
		check_eq(clanq_q_prod_space(&s->p), room);
	}
	store_word(s->p.cons, legit);
	for (i = nr / 4; i < nr / 2; i++)
		check(clanq_q_get(&s->c, buf));
	check_eq(clanq_q_prod_space_for(&s->p, nr - 1), nr - 1);
out:
	seg_check_free(s);
	tfree(buf);
}

static void test_a_consumer_that_lies_never_takes_back_room(void **state)
{
	(void)state;
	each_geometry(lying_cons_one);
}

/*
 * Random words, in range or not, written by a peer at random moments
 * between honest operations of both sides, including batches sized by
 * whatever the garbage made the other side believe. The other side may
 * see nonsense counts but never one above nr_slots - 1, and every access
 * stays in the slot array (the guard check, and ASan's poisoning).
 */
static void fuzz_one(uint32_t nr, uint32_t size)
{
	struct seg *s = seg_new(nr, size);
	unsigned char *buf = tmalloc(size);
	uint64_t rng = 0x5eed ^ ((uint64_t)nr << 16) ^ size;
	unsigned int step;

	for (step = 0; step < 3000; step++) {
		uint64_t r = rng_next(&rng);
		uint32_t n, i, v;

		switch (r % 8) {
		case 0:
		case 1:
			v = (uint32_t)(r >> 32);
			if (r & 0x100)
				v &= s->p.mask;		/* in range */
			store_word(r & 0x200 ? s->c.prod : s->p.cons, v);
			break;
		case 2:
			item_fill(buf, size, step);
			clanq_q_put(&s->p, buf);
			break;
		case 3:
			clanq_q_get(&s->c, buf);
			break;
		case 4:
			n = clanq_q_prod_space(&s->p);
			check(n <= s->p.mask);
			n = n < 64 ? n : 64;
			for (i = 0; i < n; i++)
				item_fill(clanq_q_slot(&s->p, s->p.own + i),
					  size, step);
			if (n)
				clanq_q_prod_publish(&s->p, n);
			break;
		case 5:
			n = clanq_q_cons_avail(&s->c);
			check(n <= s->c.mask);
			n = n < 64 ? n : 64;
			for (i = 0; i < n; i++)
				item_is(clanq_q_slot(&s->c, s->c.own + i),
					size, step);
			if (n)
				clanq_q_cons_release(&s->c, n);
			break;
		case 6:
			if (clanq_q_prod_space(&s->p)) {
				item_fill(clanq_q_prod_slot(&s->p), size, 1);
				clanq_q_prod_publish(&s->p, 1);
			}
			break;
		case 7:
			if (clanq_q_cons_avail(&s->c)) {
				item_is(clanq_q_cons_slot(&s->c), size, 1);
				clanq_q_cons_release(&s->c, 1);
			}
			break;
		}
		check(s->p.own <= s->p.mask && s->p.peer <= s->p.mask);
		check(s->c.own <= s->c.mask && s->c.peer <= s->c.mask);
	}
	tfree(buf);
	seg_check_free(s);
}

static void test_random_peer_index_words_never_lead_outside_the_slots(
	void **state)
{
	(void)state;
	each_geometry(fuzz_one);
}

/* The guard check above must itself be able to fail. */
static void test_guard_check_catches_a_stray_byte_next_to_the_slots(
	void **state)
{
	struct seg *s = seg_new(4, 64);
	unsigned char *before = s->base + s->qo.slots - 1;
	unsigned char *after = s->base + s->qo.slots + s->slots_bytes;

	(void)state;
	set_ctx("guard self-test");
#ifdef HAVE_ASAN
	assert_true(__asan_address_is_poisoned(before));
	assert_true(__asan_address_is_poisoned(after));
	assert_true(__asan_address_is_poisoned(s->base + s->qo.prod + 4));
	assert_false(__asan_address_is_poisoned(s->base + s->qo.slots));
	assert_false(__asan_address_is_poisoned(after - 1));
	assert_false(__asan_address_is_poisoned(s->base + s->qo.cons + 3));
#endif
	assert_int_equal(seg_stray_write(s), -1);
	seg_poison(s, false);
	*after ^= 1;
	seg_poison(s, true);
	assert_int_equal(seg_stray_write(s), after - s->buf);
	seg_poison(s, false);
	*after ^= 1;
	*before ^= 1;
	seg_poison(s, true);
	assert_int_equal(seg_stray_write(s), before - s->buf);
	seg_poison(s, false);
	*before ^= 1;
	seg_poison(s, true);
	seg_check_free(s);
}

#define T(f)	cmocka_unit_test_teardown(f, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_out_of_range_prod_reads_as_empty_to_the_consumer),
		T(test_out_of_range_cons_reads_as_full_to_the_producer),
		T(test_a_consumer_that_lies_never_takes_back_room),
		T(test_random_peer_index_words_never_lead_outside_the_slots),
		T(test_guard_check_catches_a_stray_byte_next_to_the_slots),
	};

	return cmocka_run_group_tests_name("queue_hostile", tests, NULL, NULL);
}
