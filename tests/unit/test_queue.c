// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for include/clanq/queue.h, the SPSC queue shared by the
 * driver and libclanq, built here as user space C11.
 *
 * Every test plays both sides through two private views (struct
 * clanq_queue) of one shared segment, as the driver and the application
 * do, or plays a hostile peer by writing the shared index words directly.
 * The segment sits between guard bytes, and every byte that is neither an
 * index word nor a slot is filled with a pattern that is checked after
 * each test: a queue that strays outside its slot array shows up even in
 * a plain build. Under AddressSanitizer those bytes are also poisoned, so
 * a stray read is caught as well.
 *
 * CLANQ_STRESS_MSGS overrides the number of messages each two-thread
 * stress test moves (default 10,000,000; 3,000,000 under TSan, see
 * STRESS_DEFAULT_MSGS).
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

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define HAVE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HAVE_TSAN 1
#endif
#endif

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------
 * Failure context
 *
 * Most tests loop over a table of geometries; cmocka's own asserts would
 * not say which one failed, so these name it.
 */
static char ctx[160];

#define set_ctx(...)	snprintf(ctx, sizeof(ctx), __VA_ARGS__)

#define check(cond)							\
	do {								\
		if (!(cond))						\
			fail_msg("%s: %s", ctx, #cond);			\
	} while (0)

#define check_eq(a, b)							\
	do {								\
		unsigned long long a_ = (a), b_ = (b);			\
		if (a_ != b_)						\
			fail_msg("%s: %s == %s: %llu != %llu", ctx,	\
				 #a, #b, a_, b_);			\
	} while (0)

/* ---------------------------------------------------------------------
 * Geometries
 *
 * Every slot size crossed with every capacity, except those over
 * MAX_QUEUE_BYTES: 65536 x 4096 is 256 MiB per queue, which buys no
 * coverage the smaller ones lack and would dominate the run time.
 */
static const uint32_t slot_sizes[] = { 8, 16, 64, 72, 4096 };
static const uint32_t capacities[] = { 2, 4, 64, 1024, 65536 };
#define MAX_QUEUE_BYTES	(8u << 20)

static void each_geometry(void (*fn)(uint32_t nr_slots, uint32_t slot_size))
{
	unsigned int i, j, ran = 0;

	for (i = 0; i < ARRAY_SIZE(capacities); i++) {
		for (j = 0; j < ARRAY_SIZE(slot_sizes); j++) {
			uint64_t bytes = (uint64_t)capacities[i] *
					 slot_sizes[j];

			if (bytes > MAX_QUEUE_BYTES)
				continue;
			set_ctx("nr_slots %u, slot_size %u", capacities[i],
				slot_sizes[j]);
			fn(capacities[i], slot_sizes[j]);
			ran++;
		}
	}
	/* the table must not silently shrink to nothing */
	assert_true(ran >= 20);
}

/* ---------------------------------------------------------------------
 * Items: every byte of a slot is a function of the item's sequence
 * number, so a wrong, stale or torn slot is caught.
 */
static uint64_t mix64(uint64_t z)
{
	/* splitmix64's finaliser: every input bit affects every output */
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void item_fill(void *buf, uint32_t size, uint64_t seq)
{
	unsigned char *p = buf;
	uint32_t i;

	for (i = 0; i < size; i += 8) {
		uint64_t w = mix64(seq * 0x10001ull + i);

		memcpy(p + i, &w, 8);
	}
}

static bool item_is(const void *buf, uint32_t size, uint64_t seq)
{
	const unsigned char *p = buf;
	uint32_t i;

	for (i = 0; i < size; i += 8) {
		uint64_t w = mix64(seq * 0x10001ull + i);

		if (memcmp(p + i, &w, 8))
			return false;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Test memory
 *
 * Allocations are tracked so that the teardown frees them even when a
 * failed assert long-jumps out of the test (LeakSanitizer would otherwise
 * bury the real failure under leak reports).
 */
#define MAX_LIVE	16

static void *live_mem[MAX_LIVE];

static void *tmalloc(size_t size)
{
	unsigned int i;
	void *p = malloc(size);

	assert_non_null(p);
	for (i = 0; i < MAX_LIVE; i++) {
		if (!live_mem[i]) {
			live_mem[i] = p;
			return p;
		}
	}
	fail_msg("too many live test allocations");
	return NULL;
}

static void tfree(void *p)
{
	unsigned int i;

	for (i = 0; i < MAX_LIVE; i++)
		if (live_mem[i] == p)
			live_mem[i] = NULL;
	free(p);
}

/* ---------------------------------------------------------------------
 * Segments
 *
 * A shared segment as the creator lays it out: a small header, then one
 * queue placed by clanq_q_layout(). The buffer holds GUARD bytes of
 * pattern on each side. Both views are kept on lines of their own so that
 * the two stress threads, each writing its own view, do not false-share.
 */
#define GUARD		1024u
#define SEG_HEADER	40u		/* forces layout to round up */
#define PATTERN		0xa5
#define STALE		0xee		/* slots never written by a test */

struct seg {
	_Alignas(CLANQ_Q_ALIGN) struct clanq_queue p;	/* producer's view */
	_Alignas(CLANQ_Q_ALIGN) struct clanq_queue c;	/* consumer's view */
	unsigned char *buf;		/* guard, segment, guard */
	size_t buf_size;
	unsigned char *base;		/* the segment */
	size_t size;
	struct clanq_queue_off qo;
	size_t slots_bytes;
};

static struct seg *live_seg[4];

/*
 * The bytes that are not queue memory, as [from, to) offsets into buf.
 * clanq_q_layout() always places prod, then cons, then the slots.
 */
struct span {
	size_t from, to;
};

static void outside_queue(const struct seg *s, struct span r[4])
{
	const struct clanq_queue_off *qo = &s->qo;

	r[0] = (struct span){ 0, GUARD + qo->prod };
	r[1] = (struct span){ GUARD + qo->prod + 4, GUARD + qo->cons };
	r[2] = (struct span){ GUARD + qo->cons + 4, GUARD + qo->slots };
	r[3] = (struct span){ GUARD + qo->slots + s->slots_bytes,
			      s->buf_size };
}

#ifdef HAVE_ASAN
static void seg_poison(struct seg *s, bool on)
{
	struct span r[4];
	unsigned int i;

	outside_queue(s, r);
	for (i = 0; i < ARRAY_SIZE(r); i++) {
		if (on)
			ASAN_POISON_MEMORY_REGION(s->buf + r[i].from,
						  r[i].to - r[i].from);
		else
			ASAN_UNPOISON_MEMORY_REGION(s->buf + r[i].from,
						    r[i].to - r[i].from);
	}
}
#else
static void seg_poison(struct seg *s, bool on)
{
	(void)s;
	(void)on;
}
#endif

static struct seg *seg_new(uint32_t nr_slots, uint32_t slot_size)
{
	struct seg *s;
	uint32_t end;
	unsigned int i;

	s = aligned_alloc(CLANQ_Q_ALIGN, sizeof(*s));
	assert_non_null(s);
	memset(s, 0, sizeof(*s));
	for (i = 0; i < ARRAY_SIZE(live_seg) && live_seg[i]; i++)
		;
	assert_true(i < ARRAY_SIZE(live_seg));
	live_seg[i] = s;

	end = clanq_q_layout(&s->qo, SEG_HEADER, nr_slots, slot_size);
	assert_int_not_equal(end, 0);
	s->size = end;
	s->slots_bytes = (size_t)nr_slots * slot_size;
	s->buf_size = 2 * GUARD + clanq_q_align(end);
	s->buf = aligned_alloc(CLANQ_Q_ALIGN, s->buf_size);
	assert_non_null(s->buf);
	s->base = s->buf + GUARD;

	/*
	 * Only the index words need be zero for the queue to start empty;
	 * everything else keeps the pattern so that a stray write shows.
	 */
	memset(s->buf, PATTERN, s->buf_size);
	memset(s->base + s->qo.slots, STALE, s->slots_bytes);
	memset(s->base + s->qo.prod, 0, 4);
	memset(s->base + s->qo.cons, 0, 4);

	assert_int_equal(clanq_q_init(&s->p, s->base, s->size, &s->qo), 0);
	assert_int_equal(clanq_q_init(&s->c, s->base, s->size, &s->qo), 0);
	seg_poison(s, true);
	return s;
}

/* Offset from buf of the first corrupted byte outside the queue, or -1. */
static long seg_stray_write(struct seg *s)
{
	struct span r[4];
	unsigned int i;
	size_t off;
	long bad = -1;

	outside_queue(s, r);
	seg_poison(s, false);
	for (i = 0; i < ARRAY_SIZE(r) && bad < 0; i++) {
		for (off = r[i].from; off < r[i].to; off++) {
			if (s->buf[off] != PATTERN) {
				bad = (long)off;
				break;
			}
		}
	}
	seg_poison(s, true);
	return bad;
}

static void seg_free(struct seg *s)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(live_seg); i++)
		if (live_seg[i] == s)
			live_seg[i] = NULL;
	if (s->buf) {
		seg_poison(s, false);
		free(s->buf);
	}
	free(s);
}

/* Check that nothing outside the queue was touched, then free. */
static void seg_check_free(struct seg *s)
{
	long bad = seg_stray_write(s);

	if (bad >= 0)
		fail_msg("%s: byte %ld of the buffer (segment offset %ld) "
			 "outside the queue was overwritten", ctx, bad,
			 bad - (long)GUARD);
	seg_free(s);
}

static int teardown(void **state)
{
	unsigned int i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(live_seg); i++)
		if (live_seg[i])
			seg_free(live_seg[i]);
	for (i = 0; i < MAX_LIVE; i++)
		if (live_mem[i])
			tfree(live_mem[i]);
	return 0;
}

static uint32_t load_word(const __u32 *w)
{
	return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static void store_word(__u32 *w, uint32_t v)
{
	__atomic_store_n(w, v, __ATOMIC_RELEASE);
}

/* A small deterministic generator: failures must be reproducible. */
static uint64_t rng_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return mix64(*state);
}

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
 * done in __u32 would accept them and hand out slots gigabytes away.
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

/* Move both indices forward by n through a drained queue. */
static void advance(struct seg *s, uint32_t n, unsigned char *buf)
{
	uint32_t size = s->qo.slot_size;

	while (n--) {
		item_fill(buf, size, 0xdead);
		check(clanq_q_put(&s->p, buf));
		check(clanq_q_get(&s->c, buf));
	}
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

/* =====================================================================
 * Two-thread stress
 *
 * A message fills its slot: word 0 is its sequence number, the last word
 * a 64-bit hash of everything before it, the words between a payload
 * derived from the sequence number. The consumer demands that every
 * sequence number be exactly the previous one plus one (nothing lost,
 * duplicated or reordered) and that every hash match (nothing torn,
 * stale or overwritten while being read).
 */

/*
 * 10M messages per stress test took 62-64 s under ThreadSanitizer on
 * the 2-core development machine (about 5.5 s per million over the four
 * tests), against 12 s for the whole ASan run; TSan builds default to
 * fewer so that they can run on every change. CLANQ_STRESS_MSGS=10000000
 * restores the full count.
 */
#ifdef HAVE_TSAN
#define STRESS_DEFAULT_MSGS	3000000ull
#else
#define STRESS_DEFAULT_MSGS	10000000ull
#endif
#define STRESS_MAX_SLOT		512u
#define SPINS_BEFORE_YIELD	1024u	/* then the peer is likely off-CPU */
#define STALL_SECONDS		30.0

static uint64_t stress_msgs = STRESS_DEFAULT_MSGS;

enum io_mode {
	IO_COPY,	/* clanq_q_put() / clanq_q_get() */
	IO_INPLACE,	/* prod_slot + publish(1) / cons_slot + release(1) */
	IO_BATCH,	/* up to batch slots per publish / release */
};

static const char *const io_names[] = { "copy", "in-place", "batch" };

struct stress_cfg {
	uint32_t nr_slots;
	uint32_t slot_size;
	enum io_mode prod_mode;
	enum io_mode cons_mode;
	uint32_t batch;
};

enum stress_err {
	SE_NONE,
	SE_SEQ,		/* lost, duplicated or reordered */
	SE_CSUM,	/* payload does not match its hash */
	SE_LOST,	/* producer done, queue empty, messages missing */
	SE_STALL_PROD,	/* producer made no progress for STALL_SECONDS */
	SE_STALL_CONS,
};

struct stress {
	struct seg *s;
	const struct stress_cfg *cfg;
	uint64_t msgs;
	int stop;			/* atomic: someone found a failure */
	int prod_done;			/* atomic: every message published */
	int err;			/* atomic: first enum stress_err */
	uint64_t err_want, err_got;	/* by the thread that set err */
	uint64_t produced;		/* by the producer thread */
	uint64_t consumed;		/* by the consumer thread */
};

struct spinner {
	bool last_look;		/* consumer: producer done, look once more */
	uint64_t done;		/* progress when this wait began */
	uint32_t spins;		/* in this wait */
	double t_wait;		/* when this wait began to yield */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t msg_hash(const uint64_t *w, uint32_t n)
{
	uint64_t h = 0x243f6a8885a308d3ull;
	uint32_t i;

	for (i = 0; i < n; i++)
		h = mix64(h ^ w[i]);
	return h;
}

static void msg_fill(void *slot, uint32_t size, uint64_t seq)
{
	uint64_t *w = slot;
	uint32_t i, n = size / 8;

	w[0] = seq;
	for (i = 1; i < n - 1; i++)
		w[i] = seq * 0x100000001b3ull + i;
	w[n - 1] = msg_hash(w, n - 1);
}

static void stress_fail(struct stress *st, enum stress_err e, uint64_t want,
			uint64_t got)
{
	int none = SE_NONE;

	if (__atomic_compare_exchange_n(&st->err, &none, e, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		st->err_want = want;
		st->err_got = got;
	}
	__atomic_store_n(&st->stop, 1, __ATOMIC_RELAXED);
}

static bool msg_check(struct stress *st, const void *slot, uint64_t want)
{
	const uint64_t *w = slot;
	uint32_t n = st->cfg->slot_size / 8;

	if (w[0] != want) {
		stress_fail(st, SE_SEQ, want, w[0]);
		return false;
	}
	if (w[n - 1] != msg_hash(w, n - 1)) {
		stress_fail(st, SE_CSUM, want, w[n - 1]);
		return false;
	}
	return true;
}

/*
 * Called each time a side finds the queue full or empty. Pause while the
 * wait is short: the peer is running and the next handoff is a cache
 * miss away. A long wait means the peer is off-CPU (two cores, shared
 * with whatever else runs, and TSan's slowdown), so from then on yield
 * to it instead of burning the rest of the time slice. Yielding early
 * would put a system call into nearly every handoff of a 2-slot queue.
 * Returns false when the run is over (a failure here or elsewhere).
 */
static bool stress_wait(struct stress *st, struct spinner *sp,
			uint64_t done, enum stress_err stall)
{
	double now;

	if (__atomic_load_n(&st->stop, __ATOMIC_RELAXED))
		return false;
	/*
	 * A consumer that still finds the queue empty after seeing that the
	 * producer has published everything (acquire, pairing with the
	 * producer's release) has lost messages: say so now rather than
	 * wait for the stall timeout.
	 */
	if (stall == SE_STALL_CONS &&
	    __atomic_load_n(&st->prod_done, __ATOMIC_ACQUIRE)) {
		if (sp->last_look) {
			stress_fail(st, SE_LOST, done, 0);
			return false;
		}
		sp->last_look = true;
		return true;
	}
	if (done != sp->done) {
		sp->done = done;
		sp->spins = 0;
	}
	if (++sp->spins < SPINS_BEFORE_YIELD) {
		clanq_cpu_relax();
		return true;
	}
	sched_yield();
	if (sp->spins == SPINS_BEFORE_YIELD) {
		sp->t_wait = now_s();
	} else if (sp->spins % 1024 == 0) {
		now = now_s();
		if (now - sp->t_wait > STALL_SECONDS) {
			stress_fail(st, stall, done, 0);
			return false;
		}
	}
	return true;
}

static void *stress_producer(void *arg)
{
	struct stress *st = arg;
	struct clanq_queue *q = &st->s->p;
	const struct stress_cfg *cfg = st->cfg;
	struct spinner sp = { .done = 0 };
	uint64_t msg[STRESS_MAX_SLOT / 8];
	uint64_t seq = 0;
	uint32_t n, i;

	while (seq < st->msgs) {
		switch (cfg->prod_mode) {
		case IO_COPY:
			msg_fill(msg, cfg->slot_size, seq);
			while (!clanq_q_put(q, msg))
				if (!stress_wait(st, &sp, seq, SE_STALL_PROD))
					goto out;
			seq++;
			break;
		case IO_INPLACE:
			while (!clanq_q_prod_space(q))
				if (!stress_wait(st, &sp, seq, SE_STALL_PROD))
					goto out;
			msg_fill(clanq_q_prod_slot(q), cfg->slot_size, seq);
			clanq_q_prod_publish(q, 1);
			seq++;
			break;
		case IO_BATCH:
			while (!(n = clanq_q_prod_space(q)))
				if (!stress_wait(st, &sp, seq, SE_STALL_PROD))
					goto out;
			if (n > cfg->batch)
				n = cfg->batch;
			if (n > st->msgs - seq)
				n = st->msgs - seq;
			for (i = 0; i < n; i++)
				msg_fill(clanq_q_slot(q, q->own + i),
					 cfg->slot_size, seq + i);
			clanq_q_prod_publish(q, n);
			seq += n;
			break;
		}
	}
out:
	st->produced = seq;
	__atomic_store_n(&st->prod_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *stress_consumer(void *arg)
{
	struct stress *st = arg;
	struct clanq_queue *q = &st->s->c;
	const struct stress_cfg *cfg = st->cfg;
	struct spinner sp = { .done = 0 };
	uint64_t msg[STRESS_MAX_SLOT / 8];
	uint64_t seq = 0;
	uint32_t n, i;

	while (seq < st->msgs) {
		switch (cfg->cons_mode) {
		case IO_COPY:
			while (!clanq_q_get(q, msg))
				if (!stress_wait(st, &sp, seq, SE_STALL_CONS))
					goto out;
			if (!msg_check(st, msg, seq))
				goto out;
			seq++;
			break;
		case IO_INPLACE:
			while (!clanq_q_cons_avail(q))
				if (!stress_wait(st, &sp, seq, SE_STALL_CONS))
					goto out;
			if (!msg_check(st, clanq_q_cons_slot(q), seq))
				goto out;
			clanq_q_cons_release(q, 1);
			seq++;
			break;
		case IO_BATCH:
			while (!(n = clanq_q_cons_avail(q)))
				if (!stress_wait(st, &sp, seq, SE_STALL_CONS))
					goto out;
			if (n > cfg->batch)
				n = cfg->batch;
			for (i = 0; i < n; i++)
				if (!msg_check(st, clanq_q_slot(q, q->own + i),
					       seq + i))
					goto out;
			clanq_q_cons_release(q, n);
			seq += n;
			break;
		}
	}
out:
	st->consumed = seq;
	return NULL;
}

/*
 * One stress test: a queue of nr_slots x slot_size bytes, a producer
 * thread and a consumer thread moving stress_msgs messages through it in
 * the given modes, up to batch slots at a time in IO_BATCH.
 */
static void run_stress(uint32_t nr_slots, uint32_t slot_size,
		       enum io_mode prod_mode, enum io_mode cons_mode,
		       uint32_t batch)
{
	static const char *const errs[] = {
		[SE_NONE] = "none",
		[SE_SEQ] = "sequence gap (lost, duplicated or reordered)",
		[SE_CSUM] = "bad checksum (torn, stale or overwritten slot)",
		[SE_LOST] = "producer finished but message never arrived",
		[SE_STALL_PROD] = "producer stalled",
		[SE_STALL_CONS] = "consumer stalled",
	};
	const struct stress_cfg cfg = {
		.nr_slots = nr_slots, .slot_size = slot_size,
		.prod_mode = prod_mode, .cons_mode = cons_mode, .batch = batch,
	};
	struct stress st = { .cfg = &cfg, .msgs = stress_msgs };
	pthread_t prod, cons;
	unsigned char tail[STRESS_MAX_SLOT];
	double t0, t;

	assert_true(cfg.slot_size >= 16 && cfg.slot_size <= STRESS_MAX_SLOT);
	set_ctx("stress %u x %u, producer %s, consumer %s", cfg.nr_slots,
		cfg.slot_size, io_names[cfg.prod_mode],
		io_names[cfg.cons_mode]);
	st.s = seg_new(cfg.nr_slots, cfg.slot_size);

	t0 = now_s();
	assert_int_equal(pthread_create(&cons, NULL, stress_consumer, &st), 0);
	if (pthread_create(&prod, NULL, stress_producer, &st)) {
		stress_fail(&st, SE_STALL_PROD, 0, 0);
		pthread_join(cons, NULL);
		fail_msg("%s: pthread_create failed", ctx);
	}
	pthread_join(prod, NULL);
	pthread_join(cons, NULL);
	t = now_s() - t0;
	print_message("    %s: %" PRIu64 " msgs in %.2f s (%.2f M/s)\n", ctx,
		      st.consumed, t, st.consumed / t / 1e6);

	if (st.err != SE_NONE)
		fail_msg("%s: %s at message %" PRIu64 " (got %#" PRIx64 ")",
			 ctx, errs[st.err], st.err_want, st.err_got);
	check_eq(st.produced, st.msgs);
	check_eq(st.consumed, st.msgs);
	/* nothing extra either: both sides end at the same index */
	check(!clanq_q_get(&st.s->c, tail));
	check_eq(load_word(st.s->p.prod), load_word(st.s->c.cons));
	check_eq(load_word(st.s->p.prod), st.msgs & (cfg.nr_slots - 1));
	seg_check_free(st.s);
}

static void test_stress_2_slots_put_get_delivers_all_once_in_order(void **state)
{
	(void)state;
	/*
	 * One item in flight at most: every message is a handoff. 40-byte
	 * slots: a 24-byte payload.
	 */
	run_stress(2, 40, IO_COPY, IO_COPY, 1);
}

static void test_stress_4_slots_in_place_delivers_all_once_in_order(
	void **state)
{
	(void)state;
	run_stress(4, 64, IO_INPLACE, IO_INPLACE, 1);
}

static void test_stress_64_slots_batch_to_get_delivers_all_once_in_order(
	void **state)
{
	(void)state;
	run_stress(64, 72, IO_BATCH, IO_COPY, 16);
}

static void test_stress_1024_slots_batch_delivers_all_once_in_order(
	void **state)
{
	(void)state;
	run_stress(1024, 64, IO_BATCH, IO_BATCH, 64);
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
		T(test_guard_check_catches_a_stray_byte_next_to_the_slots),
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
		T(test_out_of_range_prod_reads_as_empty_to_the_consumer),
		T(test_out_of_range_cons_reads_as_full_to_the_producer),
		T(test_random_peer_index_words_never_lead_outside_the_slots),
		T(test_stress_2_slots_put_get_delivers_all_once_in_order),
		T(test_stress_4_slots_in_place_delivers_all_once_in_order),
		T(test_stress_64_slots_batch_to_get_delivers_all_once_in_order),
		T(test_stress_1024_slots_batch_delivers_all_once_in_order),
	};
	const char *env = getenv("CLANQ_STRESS_MSGS");

	if (env && *env) {
		char *end;

		errno = 0;
		stress_msgs = strtoull(env, &end, 0);
		if (errno || *end || !stress_msgs || *env == '-') {
			fprintf(stderr, "CLANQ_STRESS_MSGS=%s: want a positive "
				"integer\n", env);
			return 2;
		}
	}
	print_message("stress tests: %" PRIu64 " messages each\n",
		      stress_msgs);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
