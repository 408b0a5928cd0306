// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for include/clanq/queue.h, the SPSC queue shared by the
 * driver and libclanq, built here as user space C11: layout and attach.
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
 * Layout and attach
 */

static void test_layout_gives_index_words_own_lines_before_slots(void **state)
{
	static const struct {
		uint32_t at, nr, size;
	} t[] = {
		{ 0, 2, 8 }, { 1, 4, 16 }, { 127, 64, 64 },
		{ 128, 1024, 72 }, { 129, 2, 4096 }, { 4000, 65536, 8 },
		{ 0, CLANQ_Q_MAX_SLOTS, 8 }, { 0, 1u << 18, 4096 },
	};
	unsigned int i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		struct clanq_queue_off qo;
		uint32_t end;

		set_ctx("at %u, nr_slots %u, slot_size %u", t[i].at, t[i].nr,
			t[i].size);
		/* garbage in qo must not survive: it is copied to user space */
		memset(&qo, 0xff, sizeof(qo));
		end = clanq_q_layout(&qo, t[i].at, t[i].nr, t[i].size);

		check(end != 0);
		check(qo.prod >= t[i].at);
		check(qo.prod - t[i].at < CLANQ_Q_ALIGN);
		check_eq(qo.prod % CLANQ_Q_ALIGN, 0);
		check_eq(qo.cons % CLANQ_Q_ALIGN, 0);
		check_eq(qo.slots % CLANQ_Q_ALIGN, 0);
		/* each index word alone on its CLANQ_Q_ALIGN block */
		check(qo.cons >= qo.prod + CLANQ_Q_ALIGN);
		check(qo.slots >= qo.cons + CLANQ_Q_ALIGN);
		check_eq(end, (uint64_t)qo.slots + (uint64_t)t[i].nr *
			 t[i].size);
		check_eq(qo.nr_slots, t[i].nr);
		check_eq(qo.slot_size, t[i].size);
		check_eq(qo.reserved, 0);
	}
}

static void test_layout_rejects_bad_geometry_by_returning_zero(void **state)
{
	static const struct {
		uint32_t at, nr, size;
		const char *why;
	} t[] = {
		{ 0, 0, 64, "no slots" },
		{ 0, 1, 64, "one slot cannot hold an item" },
		{ 0, 3, 64, "not a power of two" },
		{ 0, 6, 64, "not a power of two" },
		{ 0, 1000, 64, "not a power of two" },
		{ 0, CLANQ_Q_MAX_SLOTS + 1, 8, "not a power of two" },
		{ 0, CLANQ_Q_MAX_SLOTS << 1, 8, "too many slots" },
		{ 0, 0x80000000u, 8, "too many slots" },
		{ 0, 64, 0, "empty slots" },
		{ 0, 64, 4, "slot not a multiple of 8" },
		{ 0, 64, 12, "slot not a multiple of 8" },
		{ 0, 64, 4097, "slot not a multiple of 8" },
		{ 0, 64, CLANQ_Q_MAX_SLOT_SIZE + 8, "slot too big" },
		{ 0, 64, 8192, "slot too big" },
		{ 0, CLANQ_Q_MAX_SLOTS, CLANQ_Q_MAX_SLOT_SIZE, "4 GiB" },
		{ 0, 1u << 19, 4096, "ends past 2 GiB" },
		{ 0x7fffff00u, 2, 8, "ends past 2 GiB" },
		{ 0xffffffffu, 2, 8, "aligning at wraps 32 bits" },
	};
	unsigned int i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		struct clanq_queue_off qo;

		set_ctx("%s: at %#x, nr_slots %u, slot_size %u", t[i].why,
			t[i].at, t[i].nr, t[i].size);
		check_eq(clanq_q_layout(&qo, t[i].at, t[i].nr, t[i].size), 0);
	}
}

/* A valid layout with room to spare after the slots. */
#define INIT_NR		4u
#define INIT_SIZE	16u
#define INIT_SPARE	256u

static size_t init_fixture(struct clanq_queue_off *qo)
{
	uint32_t end = clanq_q_layout(qo, 0, INIT_NR, INIT_SIZE);

	assert_int_not_equal(end, 0);
	return end + INIT_SPARE;
}

static void test_init_attaches_to_what_layout_placed(void **state)
{
	struct clanq_queue_off qo;
	struct clanq_queue q;
	size_t seg_size = init_fixture(&qo);
	char *base = tmalloc(seg_size);

	(void)state;
	memset(&q, 0xff, sizeof(q));
	assert_int_equal(clanq_q_init(&q, base, seg_size, &qo), 0);
	assert_ptr_equal(q.prod, base + qo.prod);
	assert_ptr_equal(q.cons, base + qo.cons);
	assert_ptr_equal(q.slots, base + qo.slots);
	assert_int_equal(q.mask, INIT_NR - 1);
	assert_int_equal(q.slot_size, INIT_SIZE);
	assert_int_equal(q.own, 0);
	assert_int_equal(q.peer, 0);
	/* a segment that ends right after the slots is enough */
	assert_int_equal(clanq_q_init(&q, base, seg_size - INIT_SPARE, &qo),
			 0);
	tfree(base);
}

/* Each case mutates a valid fixture; expect is 0 or -EINVAL. */
struct init_case {
	const char *why;
	void (*mutate)(struct clanq_queue_off *qo, size_t *seg_size);
	int expect;
};

static void run_init_cases(const struct init_case *t, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct clanq_queue_off qo;
		struct clanq_queue q;
		size_t seg_size = init_fixture(&qo);
		char *base = tmalloc(seg_size);

		t[i].mutate(&qo, &seg_size);
		set_ctx("%s (prod %#x cons %#x slots %#x nr %u size %u "
			"reserved %u seg_size %#zx)", t[i].why, qo.prod,
			qo.cons, qo.slots, qo.nr_slots, qo.slot_size,
			qo.reserved, seg_size);
		check_eq(clanq_q_init(&q, base, seg_size, &qo), t[i].expect);
		tfree(base);
	}
}

static void m_seg_one_short(struct clanq_queue_off *qo, size_t *seg)
{
	*seg = qo->slots + (size_t)qo->nr_slots * qo->slot_size - 1;
}

static void m_seg_eight_short(struct clanq_queue_off *qo, size_t *seg)
{
	*seg = qo->slots + (size_t)qo->nr_slots * qo->slot_size - 8;
}

static void m_prod_at_end(struct clanq_queue_off *qo, size_t *seg)
{
	qo->prod = *seg;
}

static void m_prod_straddles_end(struct clanq_queue_off *qo, size_t *seg)
{
	*seg -= 2;
	qo->prod = *seg - 2;
}

static void m_prod_last_word(struct clanq_queue_off *qo, size_t *seg)
{
	qo->prod = *seg - 4;
}

static void m_cons_at_end(struct clanq_queue_off *qo, size_t *seg)
{
	qo->cons = *seg;
}

static void m_cons_last_word(struct clanq_queue_off *qo, size_t *seg)
{
	qo->cons = *seg - 4;
}

static void m_prod_wraps_32(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->prod = 0xfffffffcu;		/* prod + 4 is 0 in 32 bits */
}

static void m_cons_wraps_32(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->cons = 0xfffffffcu;
}

static void m_slots_past_end(struct clanq_queue_off *qo, size_t *seg)
{
	qo->slots = *seg - (size_t)qo->nr_slots * qo->slot_size + 8;
}

static void m_slots_far_away(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slots = 0x80000000u;
}

static void test_init_rejects_offsets_outside_the_segment(void **state)
{
	static const struct init_case t[] = {
		{ "segment one byte short", m_seg_one_short, -EINVAL },
		{ "segment one slot word short", m_seg_eight_short, -EINVAL },
		{ "prod just past the end", m_prod_at_end, -EINVAL },
		{ "prod straddles the end", m_prod_straddles_end, -EINVAL },
		{ "prod in the last word", m_prod_last_word, 0 },
		{ "cons just past the end", m_cons_at_end, -EINVAL },
		{ "cons in the last word", m_cons_last_word, 0 },
		{ "prod + 4 wraps 32 bits", m_prod_wraps_32, -EINVAL },
		{ "cons + 4 wraps 32 bits", m_cons_wraps_32, -EINVAL },
		{ "slots run past the end", m_slots_past_end, -EINVAL },
		{ "slots past the end", m_slots_far_away, -EINVAL },
	};

	(void)state;
	run_init_cases(t, ARRAY_SIZE(t));
}

static size_t slots_end(const struct clanq_queue_off *qo)
{
	return qo->slots + (size_t)qo->nr_slots * qo->slot_size;
}

static void m_prod_is_cons(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->prod = qo->cons;
}

static void m_prod_first_slot(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->prod = qo->slots;
}

static void m_prod_last_slot_word(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->prod = slots_end(qo) - 4;
}

static void m_prod_mid_slots(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->prod = qo->slots + INIT_SIZE + 4;
}

static void m_cons_first_slot(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->cons = qo->slots;
}

static void m_cons_mid_slots(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->cons = qo->slots + 8;
}

static void m_slots_over_prod(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slots = qo->prod;
}

static void m_prod_right_after_slots(struct clanq_queue_off *qo,
				     size_t *seg)
{
	(void)seg;
	qo->prod = slots_end(qo);
}

static void m_prod_right_before_slots(struct clanq_queue_off *qo,
				      size_t *seg)
{
	(void)seg;
	qo->prod = qo->slots - 4;
}

static void m_cons_next_to_prod(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->cons = qo->prod + 4;
}

static void test_init_rejects_overlapping_index_words_and_slots(void **state)
{
	static const struct init_case t[] = {
		{ "prod == cons", m_prod_is_cons, -EINVAL },
		{ "prod on the first slot", m_prod_first_slot, -EINVAL },
		{ "prod on the last slot word", m_prod_last_slot_word,
		  -EINVAL },
		{ "prod inside a slot", m_prod_mid_slots, -EINVAL },
		{ "cons on the first slot", m_cons_first_slot, -EINVAL },
		{ "cons inside a slot", m_cons_mid_slots, -EINVAL },
		{ "slots start on prod", m_slots_over_prod, -EINVAL },
		/* adjacency is not overlap: these must still attach */
		{ "prod right after the slots", m_prod_right_after_slots, 0 },
		{ "prod right before the slots", m_prod_right_before_slots,
		  0 },
		{ "cons right after prod", m_cons_next_to_prod, 0 },
	};

	(void)state;
	run_init_cases(t, ARRAY_SIZE(t));
}

static void m_prod_unaligned(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->prod += 2;
}

static void m_cons_unaligned(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->cons += 1;
}

static void m_slots_unaligned(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slots += 4;
}

static void m_reserved_1(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->reserved = 1;
}

static void m_reserved_top(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->reserved = 0x80000000u;
}

static void m_nr_0(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->nr_slots = 0;
}

static void m_nr_1(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->nr_slots = 1;
}

static void m_nr_3(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->nr_slots = 3;
}

static void m_nr_huge(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->nr_slots = CLANQ_Q_MAX_SLOTS << 1;
}

static void m_size_0(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slot_size = 0;
}

static void m_size_12(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slot_size = 12;
}

static void m_size_huge(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slot_size = CLANQ_Q_MAX_SLOT_SIZE * 2;
}

static void test_init_rejects_bad_alignment_geometry_or_reserved(void **state)
{
	static const struct init_case t[] = {
		{ "prod not 4-aligned", m_prod_unaligned, -EINVAL },
		{ "cons not 4-aligned", m_cons_unaligned, -EINVAL },
		{ "slots not 8-aligned", m_slots_unaligned, -EINVAL },
		{ "reserved = 1", m_reserved_1, -EINVAL },
		{ "reserved top bit", m_reserved_top, -EINVAL },
		{ "nr_slots 0", m_nr_0, -EINVAL },
		{ "nr_slots 1", m_nr_1, -EINVAL },
		{ "nr_slots 3", m_nr_3, -EINVAL },
		{ "nr_slots above max", m_nr_huge, -EINVAL },
		{ "slot_size 0", m_size_0, -EINVAL },
		{ "slot_size 12", m_size_12, -EINVAL },
		{ "slot_size above max", m_size_huge, -EINVAL },
	};

	(void)state;
	run_init_cases(t, ARRAY_SIZE(t));
}

/*
 * Slot ranges whose end is small only if computed in 32 bits: a check
 * done in uint32_t would accept them and hand out slots gigabytes away.
 */
static void m_slots_sum_wraps(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slots = 0xfffff000u;
	qo->nr_slots = 2;
	qo->slot_size = 0x1000;		/* slots + 0x2000 = 0x1000 */
}

static void m_slots_product_wraps(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->nr_slots = CLANQ_Q_MAX_SLOTS;
	qo->slot_size = CLANQ_Q_MAX_SLOT_SIZE;	/* product is 2^32 */
}

static void m_slots_near_top(struct clanq_queue_off *qo, size_t *seg)
{
	(void)seg;
	qo->slots = 0xfffffff8u;
	qo->nr_slots = CLANQ_Q_MAX_SLOTS;
	qo->slot_size = CLANQ_Q_MAX_SLOT_SIZE;
}

static void test_init_rejects_slot_ranges_that_overflow(void **state)
{
	static const struct init_case t[] = {
		{ "slots + bytes wraps 32 bits", m_slots_sum_wraps, -EINVAL },
		{ "nr_slots * slot_size wraps 32 bits", m_slots_product_wraps,
		  -EINVAL },
		{ "both near the top", m_slots_near_top, -EINVAL },
	};

	(void)state;
	run_init_cases(t, ARRAY_SIZE(t));
}

#define T(f)	cmocka_unit_test_teardown(f, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_layout_gives_index_words_own_lines_before_slots),
		T(test_layout_rejects_bad_geometry_by_returning_zero),
		T(test_init_attaches_to_what_layout_placed),
		T(test_init_rejects_offsets_outside_the_segment),
		T(test_init_rejects_overlapping_index_words_and_slots),
		T(test_init_rejects_bad_alignment_geometry_or_reserved),
		T(test_init_rejects_slot_ranges_that_overflow),
	};

	return cmocka_run_group_tests_name("queue_layout", tests, NULL, NULL);
}
