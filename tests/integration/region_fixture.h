/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Shared by the test_region_* programs: shared memory, children that
 * must die of a signal, and the "good" process, which on the same NIC as
 * the trouble moves data with the RDMA engine and checks every byte and
 * every completion throughout. Include after cmocka.h and itest.h; each
 * program sets page in main().
 */
#ifndef CLANQ_REGION_FIXTURE_H
#define CLANQ_REGION_FIXTURE_H

#include <string.h>
#include <sys/mman.h>

static size_t page;

/* how long a child may live at most: a backstop, never the normal path */
#define CHILD_MAX_NS	(120 * ITEST_NS_PER_S)

static inline void *shared_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	memset(p, 0, size);
	return p;
}

/* children not started by itest_fork() put the signals back themselves */
#define default_signals()	itest_default_signals()

/* a child not started by itest_fork(), for itest_teardown() to kill */
static inline void adopt(pid_t pid)
{
	int i;

	for (i = 0; i < ITEST_MAX_CHILDREN; i++) {
		if (!itest_children[i]) {
			itest_children[i] = pid;
			return;
		}
	}
}

/* true if the child died of sig; otherwise say what happened */
static inline bool died_of(int status, int sig, const char *who)
{
	if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == sig)
		return true;
	fprintf(stderr, "%s: expected death by %s\n", who, strsignal(sig));
	itest_status_ok(status, who);
	return false;
}

/* Wait until *w reaches want (a shared counter), while pid lives. */
static inline void wait_for(const uint32_t *w, uint32_t want, pid_t pid, const char *who)
{
	uint64_t end = clanq_now_ns() + 30 * ITEST_NS_PER_S;

	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < want) {
		if (!itest_still_running(pid, who))
			fail_msg("%s ended early", who);
		if (clanq_now_ns() > end)
			fail_msg("%s: %u of %u after 30 s", who,
				 __atomic_load_n(w, __ATOMIC_ACQUIRE), want);
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
}

static inline uint32_t load32(const uint32_t *w)
{
	return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static inline void store32(uint32_t *w, uint32_t v)
{
	__atomic_store_n(w, v, __ATOMIC_RELEASE);
}

/* Words of a pseudo-random pattern, a function of seed alone. */
static inline void fill_pattern(void *p, size_t len, uint64_t seed)
{
	uint64_t s = seed | 1, *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = itest_rand(&s);
}

static inline bool all_bytes(const void *p, size_t len, unsigned char v)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != v)
			return false;
	return true;
}

/*
 * The good process: node 1 moves data with its RDMA engine into a
 * region of its own on node 0 and checks every byte, every completion
 * and, at the end, its counters. It is what "the others are
 * unaffected" is measured with, in every test where trouble is made on
 * node 1's engine.
 */

#define GOOD_BYTES	(256u * 1024)
#define GOOD_MIN_ROUNDS	3

struct good_sh {
	uint64_t seed;
	uint32_t rounds;	/* rounds done and verified */
	uint32_t stop;		/* set by the parent */
};

static inline void good_worker(void *arg)
{
	struct good_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = 16, .cq_slots = 16 };
	struct clanq_region src, dst;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_dev d0, d1;
	struct clanq_ep ep;
	struct clanq_ap ap;
	uint64_t rnd = sh->seed, key, cookie = 0, reqs = 0, bytes = 0;
	uint64_t end = clanq_now_ns() + CHILD_MAX_NS;
	uint32_t round;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&d1, 1), 0);
	CHILD_CHECK_INT(clanq_open_nic(&d0, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&d1, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d1, &src, GOOD_BYTES), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d0, &dst, GOOD_BYTES), 0);
	CHILD_CHECK_INT(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d1, &ap, dst.addr, key, 0, GOOD_BYTES,
					CLANQ_RIGHT_WRITE), 0);

	for (round = 0;; round++) {
		uint64_t len, src_off, dst_off, done, piece;
		unsigned int k, i;

		if (round >= GOOD_MIN_ROUNDS &&
		    __atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE))
			break;
		if (clanq_now_ns() > end)
			CHILD_FAIL("good: still running after %lld s",
				   (long long)(CHILD_MAX_NS / ITEST_NS_PER_S));
		/* a new pattern, a random window, split in 1..4 requests */
		fill_pattern(src.mem, GOOD_BYTES, itest_rand(&rnd));
		memset(dst.mem, 0xee, GOOD_BYTES);
		len = 1 + itest_rand(&rnd) % GOOD_BYTES;
		src_off = itest_rand(&rnd) % (GOOD_BYTES - len + 1);
		dst_off = itest_rand(&rnd) % (GOOD_BYTES - len + 1);
		k = 1 + itest_rand(&rnd) % 4;
		if (len < k)
			k = 1;
		for (i = 0, done = 0; i < k; i++, done += piece) {
			piece = i == k - 1 ? len - done : len / k;
			q = itest_rdma_req(src.addr.id, ap.id, src_off + done,
				     dst_off + done, piece, cookie + i,
				     CLANQ_RDMA_SIGNAL |
				     (i == k - 1 ? CLANQ_RDMA_LAST : 0));
			CHILD_CHECK_INT(clanq_rdma_post(&ep, &q), 0);
		}
		for (i = 0, done = 0; i < k; i++, done += piece) {
			piece = i == k - 1 ? len - done : len / k;
			if (!itest_wait_comp(&ep, &c, 20 * ITEST_NS_PER_S))
				CHILD_FAIL("good: round %u: no completion %u of %u in 20 s",
					   round, i, k);
			if (c.cookie != cookie + i || c.status != 0 ||
			    c.len != piece)
				CHILD_FAIL("good: round %u: completion cookie %llu status %d len %llu, expected %llu 0 %llu",
					   round, (unsigned long long)c.cookie,
					   c.status, (unsigned long long)c.len,
					   (unsigned long long)(cookie + i),
					   (unsigned long long)piece);
		}
		cookie += k;
		reqs += k;
		bytes += len;
		/* exactly the window, exactly the bytes */
		if (memcmp((char *)dst.mem + dst_off, (char *)src.mem + src_off,
			   len))
			CHILD_FAIL("good: round %u: data differs", round);
		if (!all_bytes(dst.mem, dst_off, 0xee) ||
		    !all_bytes((char *)dst.mem + dst_off + len,
			       GOOD_BYTES - dst_off - len, 0xee))
			CHILD_FAIL("good: round %u: bytes outside the window written",
				   round);
		__atomic_store_n(&sh->rounds, round + 1, __ATOMIC_RELEASE);
	}
	/* the engine's own account of this endpoint: nobody else's work */
	if (!itest_wait_ctr(&ep.counters->rdma_reqs, reqs) ||
	    !itest_wait_ctr(&ep.counters->rdma_bytes, bytes))
		CHILD_FAIL("good: counters say %llu requests %llu bytes, expected %llu %llu",
			   (unsigned long long)itest_ctr(&ep.counters->rdma_reqs),
			   (unsigned long long)itest_ctr(&ep.counters->rdma_bytes),
			   (unsigned long long)reqs, (unsigned long long)bytes);
	CHILD_CHECK_INT(itest_ctr(&ep.counters->rdma_errors), 0);
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK_INT(clanq_region_free(&src), 0);
	CHILD_CHECK_INT(clanq_region_free(&dst), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&d0), 0);
	CHILD_CHECK_INT(clanq_close(&d1), 0);
}

static inline pid_t good_start(struct good_sh *sh, uint64_t *rnd)
{
	pid_t pid;

	sh->seed = itest_rand(rnd);
	pid = itest_fork(good_worker, sh);
	assert_true(pid > 0);
	wait_for(&sh->rounds, 1, pid, "good");
	return pid;
}

/* The good process must have done `more` rounds since `since`. */
static inline void good_progress(struct good_sh *sh, pid_t pid, uint32_t since,
				 uint32_t more)
{
	wait_for(&sh->rounds, since + more, pid, "good");
}

static inline void good_finish(struct good_sh *sh, pid_t pid)
{
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "good"));
	printf("region: good process: %u verified rounds\n", sh->rounds);
}

#endif /* CLANQ_REGION_FIXTURE_H */
