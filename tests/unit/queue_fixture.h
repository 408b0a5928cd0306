/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Shared by the test_queue_* programs: failure context, geometries,
 * items, guarded test memory and segments, and the teardown that checks
 * them. Include after cmocka.h and clanq/queue.h.
 */
#ifndef CLANQ_QUEUE_FIXTURE_H
#define CLANQ_QUEUE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>


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

static inline void each_geometry(void (*fn)(uint32_t nr_slots, uint32_t slot_size))
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
static inline uint64_t mix64(uint64_t z)
{
	/* splitmix64's finaliser: every input bit affects every output */
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void item_fill(void *buf, uint32_t size, uint64_t seq)
{
	unsigned char *p = buf;
	uint32_t i;

	for (i = 0; i < size; i += 8) {
		uint64_t w = mix64(seq * 0x10001ull + i);

		memcpy(p + i, &w, 8);
	}
}

static inline bool item_is(const void *buf, uint32_t size, uint64_t seq)
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

static inline void *tmalloc(size_t size)
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

static inline void tfree(void *p)
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

static inline void outside_queue(const struct seg *s, struct span r[4])
{
	const struct clanq_queue_off *qo = &s->qo;

	r[0] = (struct span){ 0, GUARD + qo->prod };
	r[1] = (struct span){ GUARD + qo->prod + 4, GUARD + qo->cons };
	r[2] = (struct span){ GUARD + qo->cons + 4, GUARD + qo->slots };
	r[3] = (struct span){ GUARD + qo->slots + s->slots_bytes,
			      s->buf_size };
}

#ifdef HAVE_ASAN
static inline void seg_poison(struct seg *s, bool on)
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
static inline void seg_poison(struct seg *s, bool on)
{
	(void)s;
	(void)on;
}
#endif

static inline struct seg *seg_new(uint32_t nr_slots, uint32_t slot_size)
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
static inline long seg_stray_write(struct seg *s)
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

static inline void seg_free(struct seg *s)
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
static inline void seg_check_free(struct seg *s)
{
	long bad = seg_stray_write(s);

	if (bad >= 0)
		fail_msg("%s: byte %ld of the buffer (segment offset %ld) "
			 "outside the queue was overwritten", ctx, bad,
			 bad - (long)GUARD);
	seg_free(s);
}

static inline int teardown(void **state)
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

static inline uint32_t load_word(const __u32 *w)
{
	return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static inline void store_word(__u32 *w, uint32_t v)
{
	__atomic_store_n(w, v, __ATOMIC_RELEASE);
}

/* A small deterministic generator: failures must be reproducible. */
static inline uint64_t rng_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return mix64(*state);
}

/* Move both indices forward by n through a drained queue. */
static inline void advance(struct seg *s, uint32_t n, unsigned char *buf)
{
	uint32_t size = s->qo.slot_size;

	while (n--) {
		item_fill(buf, size, 0xdead);
		check(clanq_q_put(&s->p, buf));
		check(clanq_q_get(&s->c, buf));
	}
}

#endif /* CLANQ_QUEUE_FIXTURE_H */
