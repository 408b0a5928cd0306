/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Shared by the test_rdma_* programs: data patterns, completion checks,
 * and a pair (a poster on node 0, an exported region on node 1).
 * Include after cmocka.h and itest.h.
 *
 * Data checks: source bytes are a pattern of (seed, source offset) with
 * the top bit clear, background bytes a pattern of the region offset with
 * the top bit set. A byte written one place too far (or too early) can
 * therefore never look like background, and a byte from the wrong source
 * offset almost never looks like the right one.
 */
#ifndef CLANQ_RDMA_FIXTURE_H
#define CLANQ_RDMA_FIXTURE_H

#include <string.h>
#include <sys/mman.h>

#define KiB		1024ull
#define MiB		(1024 * KiB)
#define PAGE		4096ull

/* a completion that should come has this long (TCG + KASAN: generous) */
#define COMP_TIMEOUT	(20 * ITEST_NS_PER_S)
/* a whole multi-process run has this long */
#define RUN_TIMEOUT	(120 * ITEST_NS_PER_S)

#define RW		(PROT_READ | PROT_WRITE)
#define REQ_DONE	(CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL)

/*
 * Patterns.
 */

#define BG_SEED		0xb6b6b6b6b6b6b6b6ull
#define TOP		0x80

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline uint64_t pat_word(uint64_t seed, uint64_t i)
{
	return mix64(seed ^ ((i >> 3) * 0x9e3779b97f4a7c15ull));
}

/* byte i of the pattern seed; top is 0 (data) or TOP (background) */
static inline uint8_t pat_byte(uint64_t seed, uint64_t i, uint8_t top)
{
	return (uint8_t)(((pat_word(seed, i) >> ((i & 7) * 8)) & 0x7f) | top);
}

/* p[k] = byte start + k of the pattern, for k < len */
static inline void pat_fill(uint8_t *p, uint64_t seed, uint64_t start, size_t len, uint8_t top)
{
	size_t k = 0;

	while (k < len) {
		uint64_t i = start + k;
		uint64_t w = pat_word(seed, i);
		unsigned int b;

		for (b = i & 7; b < 8 && k < len; b++, k++)
			p[k] = (uint8_t)(((w >> (b * 8)) & 0x7f) | top);
	}
}

/* The first k < len where p[k] is not byte start + k, or len. */
static inline size_t pat_diff(const uint8_t *p, uint64_t seed, uint64_t start, size_t len,
			      uint8_t top)
{
	size_t k = 0;

	while (k < len) {
		uint64_t i = start + k;
		uint64_t w = pat_word(seed, i);
		unsigned int b;

		for (b = i & 7; b < 8 && k < len; b++, k++)
			if (p[k] != (uint8_t)(((w >> (b * 8)) & 0x7f) | top))
				return k;
	}
	return len;
}

static inline void bg_fill(uint8_t *p, uint64_t start, size_t len)
{
	pat_fill(p, BG_SEED, start, len, TOP);
}

/* The first k < len where a[k] != b[k], or len. memcmp first: it is fast. */
static inline size_t mem_diff(const uint8_t *a, const uint8_t *b, size_t len)
{
	size_t k;

	if (!memcmp(a, b, len))
		return len;
	for (k = 0; k < len && a[k] == b[k]; k++)
		;
	return k;
}

/*
 * Region m[0, size), whose background is bg[0, size): is it background
 * outside [off, off + len) and pattern (seed, src_off..) inside? Return
 * NULL if so, else what is wrong (and where, in *at). The whole region
 * is compared every time, so a stray write anywhere is found.
 */
static inline const char *region_diff(const uint8_t *m, const uint8_t *bg, size_t size,
				      uint64_t off, uint64_t len, uint64_t seed,
				      uint64_t src_off, uint64_t *at)
{
	size_t d;

	if (off > size || len > size - off) {
		*at = off;
		return "range outside the region";
	}
	d = mem_diff(m, bg, off);
	if (d < off) {
		*at = d;
		return "byte before the written range changed";
	}
	d = pat_diff(m + off, seed, src_off, len, 0);
	if (d < len) {
		*at = off + d;
		return "written byte wrong";
	}
	d = mem_diff(m + off + len, bg + off + len, size - off - len);
	if (d < size - off - len) {
		*at = off + len + d;
		return "byte after the written range changed";
	}
	return NULL;
}

static inline void *map_anon(size_t size)
{
	void *p = mmap(NULL, size, RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Completions and requests.
 */

static inline void expect_comp(struct clanq_ep *ep, uint64_t cookie, int status,
			       uint64_t len)
{
	struct clanq_rdma_comp c;

	memset(&c, 0, sizeof(c));
	if (!itest_wait_comp(ep, &c, COMP_TIMEOUT))
		fail_msg("no completion for cookie %#llx within %lld s "
			 "(engine took %llu requests)",
			 (unsigned long long)cookie,
			 (long long)(COMP_TIMEOUT / ITEST_NS_PER_S),
			 (unsigned long long)itest_ctr(&ep->counters->rdma_reqs));
	if (c.cookie != cookie || c.status != status || c.len != len)
		fail_msg("completion: cookie %#llx status %d len %llu; "
			 "expected cookie %#llx status %d len %llu",
			 (unsigned long long)c.cookie, c.status,
			 (unsigned long long)c.len,
			 (unsigned long long)cookie, status,
			 (unsigned long long)len);
}

/* Nothing more on the completion queue (looked at for a while). */
static inline void expect_no_comp(struct clanq_ep *ep)
{
	uint64_t end = clanq_now_ns() + ITEST_QUIET_NS;
	struct clanq_rdma_comp c;

	do {
		if (!clanq_rdma_poll(ep, &c))
			fail_msg("unexpected completion: cookie %#llx status %d len %llu",
				 (unsigned long long)c.cookie, c.status,
				 (unsigned long long)c.len);
		sched_yield();
	} while (clanq_now_ns() < end);
}

static inline bool wait_doorbell_set(const struct clanq_ep *ep)
{
	uint64_t end = clanq_now_ns() + COMP_TIMEOUT;

	while (!__atomic_load_n(ep->need_wakeup, __ATOMIC_ACQUIRE)) {
		if (clanq_now_ns() > end)
			return false;
		sched_yield();
	}
	return true;
}

static inline unsigned long param_or(const char *name, unsigned long dflt)
{
	char path[128];
	unsigned long v = dflt;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/clanq/parameters/%s", name);
	f = fopen(path, "r");
	if (!f)
		return dflt;
	if (fscanf(f, "%lu", &v) != 1)
		v = dflt;
	fclose(f);
	return v;
}

static inline double mib_per_s(uint64_t bytes, int64_t ns)
{
	return ns > 0 ? (double)bytes / MiB / ((double)ns / ITEST_NS_PER_S) : 0;
}

/* A poster on node 0 and a 256 KiB exported region on node 1. */
struct pair {
	struct clanq_dev a, b;
	struct clanq_ep ep;
	struct clanq_region src, dst;
	struct clanq_ap ap;
};

#define PAIR_SRC	(64 * KiB)
#define PAIR_DST	(256 * KiB)
#define PAIR_SEED	0x9a112ull

static inline void pair_open(struct pair *p, const struct clanq_ep_attr *attr)
{
	uint64_t key;

	assert_int_equal(clanq_open_nic(&p->a, 0), 0);
	assert_int_equal(clanq_open_nic(&p->b, 1), 0);
	assert_int_equal(clanq_ep_create_attr(&p->a, &p->ep, attr), 0);
	assert_int_equal(clanq_region_alloc(&p->a, &p->src, PAIR_SRC), 0);
	pat_fill(p->src.mem, PAIR_SEED, 0, PAIR_SRC, 0);
	assert_int_equal(clanq_region_alloc(&p->b, &p->dst, PAIR_DST), 0);
	bg_fill(p->dst.mem, 0, PAIR_DST);
	assert_int_equal(clanq_region_export(&p->dst, CLANQ_RIGHT_WRITE, &key), 0);
	assert_int_equal(clanq_ap_import(&p->a, &p->ap, p->dst.addr, key, 0,
					 PAIR_DST, CLANQ_RIGHT_WRITE), 0);
}

static inline void pair_close(struct pair *p)
{
	assert_int_equal(clanq_ap_close(&p->ap), 0);
	assert_int_equal(clanq_region_free(&p->dst), 0);
	assert_int_equal(clanq_region_free(&p->src), 0);
	assert_int_equal(clanq_ep_destroy(&p->ep), 0);
	assert_int_equal(clanq_close(&p->b), 0);
	assert_int_equal(clanq_close(&p->a), 0);
}

/* Request i of a stream: small, at its own place in the destination. */
#define STREAM_LEN	64

static inline struct clanq_rdma_req stream_req(struct pair *p, unsigned int i,
					       uint32_t flags)
{
	return itest_rdma_req(p->src.addr.id, p->ap.id, (i * 61ull) % (PAIR_SRC - STREAM_LEN),
		     (uint64_t)i * STREAM_LEN, STREAM_LEN, 0xd00b000000000000ull | i,
		     flags);
}

/* The destination holds requests [0, n) of the stream, and nothing else. */
static inline void stream_check(struct pair *p, unsigned int n)
{
	const uint8_t *m = p->dst.mem;
	unsigned int i;
	size_t d;

	for (i = 0; i < n; i++) {
		d = pat_diff(m + (size_t)i * STREAM_LEN, PAIR_SEED,
			     (i * 61ull) % (PAIR_SRC - STREAM_LEN), STREAM_LEN, 0);
		if (d < STREAM_LEN)
			fail_msg("stream request %u: byte %zu wrong", i, d);
	}
	d = pat_diff(m + (size_t)n * STREAM_LEN, BG_SEED, (uint64_t)n * STREAM_LEN,
		     PAIR_DST - (size_t)n * STREAM_LEN, TOP);
	assert_int_equal(d, PAIR_DST - (size_t)n * STREAM_LEN);
}

#endif /* CLANQ_RDMA_FIXTURE_H */
