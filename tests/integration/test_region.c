// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Regions, export/import, revocation and isolation, through the real
 * driver:
 *  - every malformed region, export, import, close and mmap request is
 *    refused with the errno the ABI documents (raw ioctls, so each field
 *    is tested on its own), next to a well-formed twin that succeeds;
 *  - revocation: PIO writers (and a process that inherited their mapping
 *    by fork) die of SIGBUS when the exporter frees the region; RDMA
 *    requests in flight and queued complete with -ENXIO, in order, and
 *    the engine goes on serving an unrelated endpoint;
 *  - processes SIGKILLed with transfers in flight, apertures mapped and
 *    regions registered leave the others unaffected;
 *  - a hostile process scribbling on its own endpoint segment while the
 *    engine works on it hurts nobody but itself;
 *  - registered memory is charged to RLIMIT_MEMLOCK, and given back;
 *  - an owner's mapping of a freed region stays valid until unmapped.
 * A "good" process, on the same NIC as the trouble, moves data with the
 * RDMA engine and checks every byte and every completion throughout.
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2; kmemleak
 * and the kernel log are checked by the harness afterwards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

static size_t page;

/* how long a child may live at most: a backstop, never the normal path */
#define CHILD_MAX_NS	(120 * ITEST_NS_PER_S)

static void *shared_alloc(size_t size)
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
static void adopt(pid_t pid)
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
static bool died_of(int status, int sig, const char *who)
{
	if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == sig)
		return true;
	fprintf(stderr, "%s: expected death by %s\n", who, strsignal(sig));
	itest_status_ok(status, who);
	return false;
}

/* Wait until *w reaches want (a shared counter), while pid lives. */
static void wait_for(const __u32 *w, __u32 want, pid_t pid, const char *who)
{
	__u64 end = clanq_now_ns() + 30 * ITEST_NS_PER_S;

	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < want) {
		if (!itest_still_running(pid, who))
			fail_msg("%s ended early", who);
		if (clanq_now_ns() > end)
			fail_msg("%s: %u of %u after 30 s", who,
				 __atomic_load_n(w, __ATOMIC_ACQUIRE), want);
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
}

static __u32 load32(const __u32 *w)
{
	return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static void store32(__u32 *w, __u32 v)
{
	__atomic_store_n(w, v, __ATOMIC_RELEASE);
}

/* Words of a pseudo-random pattern, a function of seed alone. */
static void fill_pattern(void *p, size_t len, __u64 seed)
{
	__u64 s = seed | 1, *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = itest_rand(&s);
}

static bool all_bytes(const void *p, size_t len, unsigned char v)
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
	__u64 seed;
	__u32 rounds;		/* rounds done and verified */
	__u32 stop;		/* set by the parent */
};

static void good_worker(void *arg)
{
	struct good_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = 16, .cq_slots = 16 };
	struct clanq_region src, dst;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_dev d0, d1;
	struct clanq_ep ep;
	struct clanq_ap ap;
	__u64 rnd = sh->seed, key, cookie = 0, reqs = 0, bytes = 0;
	__u64 end = clanq_now_ns() + CHILD_MAX_NS;
	__u32 round;

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
		__u64 len, src_off, dst_off, done, piece;
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

static pid_t good_start(struct good_sh *sh, __u64 *rnd)
{
	pid_t pid;

	sh->seed = itest_rand(rnd);
	pid = itest_fork(good_worker, sh);
	assert_true(pid > 0);
	wait_for(&sh->rounds, 1, pid, "good");
	return pid;
}

/* The good process must have done `more` rounds since `since`. */
static void good_progress(struct good_sh *sh, pid_t pid, __u32 since,
			  __u32 more)
{
	wait_for(&sh->rounds, since + more, pid, "good");
}

static void good_finish(struct good_sh *sh, pid_t pid)
{
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "good"));
	printf("region: good process: %u verified rounds\n", sh->rounds);
}

/*
 * 1. ABI garbage.
 */

static int create_err(int fd, __u64 addr, __u64 size, __u32 flags)
{
	struct clanq_ioc_region_create c;
	struct clanq_ioc_region_free f;
	int err;

	memset(&c, 0, sizeof(c));
	c.addr = addr;
	c.size = size;
	c.flags = flags;
	err = itest_ioctl_err(fd, CLANQ_IOC_REGION_CREATE, &c);
	if (!err) {		/* unexpected: do not leave it behind */
		memset(&f, 0, sizeof(f));
		f.id = c.id;
		ioctl(fd, CLANQ_IOC_REGION_FREE, &f);
	}
	return err;
}

static void malformed_region_creation_is_refused(void **state)
{
	unsigned long max_region = itest_param("max_region_bytes");
	unsigned long max_ctx = itest_param("max_ctx_bytes");
	struct clanq_ioc_region_create c;
	struct clanq_region r;
	struct clanq_dev dev;
	void *buf;
	unsigned int i;
	int fd;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	fd = dev.fd;
	buf = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);

	/* the well-formed twins of what follows */
	assert_int_equal(create_err(fd, 0, page, 0), 0);
	assert_int_equal(create_err(fd, (uintptr_t)buf, page,
				    CLANQ_REGION_REGISTER), 0);

	/* sizes: 0, past max_region_bytes, wrapping when rounded to pages */
	assert_int_equal(create_err(fd, 0, 0, 0), EINVAL);
	assert_int_equal(create_err(fd, 0, max_region + 1, 0), EINVAL);
	assert_int_equal(create_err(fd, 0, ~0ull, 0), EINVAL);
	assert_int_equal(create_err(fd, 0, ~0ull - page + 2, 0), EINVAL);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 0,
				    CLANQ_REGION_REGISTER), EINVAL);
	assert_int_equal(create_err(fd, (uintptr_t)buf, max_region + 1,
				    CLANQ_REGION_REGISTER), EINVAL);
	/* a size the driver allows, but this context's budget does not */
	if (max_region > max_ctx)
		assert_int_equal(create_err(fd, 0, max_ctx + page, 0), ENOMEM);

	/* flags, reserved words, out fields, an address for an allocation */
	assert_int_equal(create_err(fd, 0, page, 1u << 1), EINVAL);
	assert_int_equal(create_err(fd, 0, page, 0x80000000u), EINVAL);
	assert_int_equal(create_err(fd, (uintptr_t)buf, page, 0), EINVAL);
	for (i = 0; i < ARRAY_SIZE(c.reserved); i++) {
		memset(&c, 0, sizeof(c));
		c.size = page;
		c.reserved[i] = 1ull << 40;
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_REGION_CREATE, &c),
				 EINVAL);
	}

	/* nothing was created by any of the refusals */
	assert_int_equal(clanq_region_alloc(&dev, &r, page), 0);
	assert_int_equal(clanq_region_free(&r), 0);
	munmap(buf, 4 * page);
	assert_int_equal(clanq_close(&dev), 0);
}

static void registering_memory_that_cannot_be_pinned_is_refused(void **state)
{
	struct clanq_dev dev;
	char *buf, *ro;
	int fd;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	fd = dev.fd;
	buf = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	ro = mmap(NULL, 2 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED);

	/* a hole in the middle: the first pages pin, the third cannot */
	assert_int_equal(munmap(buf + 2 * page, page), 0);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 2 * page,
				    CLANQ_REGION_REGISTER), 0);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 3 * page,
				    CLANQ_REGION_REGISTER), EFAULT);
	assert_int_equal(create_err(fd, (uintptr_t)(buf + 2 * page), 1,
				    CLANQ_REGION_REGISTER), EFAULT);
	/* read-only memory: the engine would write into it */
	assert_int_equal(create_err(fd, (uintptr_t)ro, page,
				    CLANQ_REGION_REGISTER), EFAULT);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 4 * page,
				    CLANQ_REGION_REGISTER), EFAULT);
	/* address 0 (the ABI's "no memory"), and ranges that wrap */
	assert_int_equal(create_err(fd, 0, page, CLANQ_REGION_REGISTER), EINVAL);
	assert_int_equal(create_err(fd, ~0ull - page + 1, 2 * page,
				    CLANQ_REGION_REGISTER), EINVAL);
	assert_int_equal(create_err(fd, ~0ull, 2, CLANQ_REGION_REGISTER),
			 EINVAL);
	/* kernel addresses are not the caller's memory */
	assert_int_equal(create_err(fd, 0xffff888000000000ull, page,
				    CLANQ_REGION_REGISTER), EINVAL);

	munmap(buf, 4 * page);
	munmap(ro, 2 * page);
	assert_int_equal(clanq_close(&dev), 0);
}

static int free_err(int fd, __u32 id, __u32 flags, __u64 reserved)
{
	struct clanq_ioc_region_free f;

	memset(&f, 0, sizeof(f));
	f.id = id;
	f.flags = flags;
	f.reserved[1] = reserved;
	return itest_ioctl_err(fd, CLANQ_IOC_REGION_FREE, &f);
}

static int export_err(int fd, __u32 id, __u32 rights, __u64 *key)
{
	struct clanq_ioc_region_export e;
	int err;

	memset(&e, 0, sizeof(e));
	e.id = id;
	e.rights = rights;
	err = itest_ioctl_err(fd, CLANQ_IOC_REGION_EXPORT, &e);
	if (!err && key)
		*key = e.key;
	return err;
}

static void free_and_export_name_only_the_callers_own_regions(void **state)
{
	struct clanq_ioc_region_export e;
	struct clanq_dev a, b, a1;
	struct clanq_region r, s;
	__u64 key = 0, key2 = 0;	/* set by export_err() on success */
	struct clanq_ap ap;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 0), 0);	/* same node */
	assert_int_equal(clanq_open_nic(&a1, 1), 0);
	assert_int_equal(clanq_region_alloc(&a, &r, page), 0);
	assert_int_equal(clanq_region_alloc(&a, &s, page), 0);
	assert_int_equal(r.addr.node, 0);
	assert_true(r.addr.id != s.addr.id);

	/* unknown ids */
	assert_int_equal(free_err(a.fd, ~0u, 0, 0), ENOENT);
	assert_int_equal(free_err(a.fd, 0, 0, 0), ENOENT);
	assert_int_equal(export_err(a.fd, ~0u, CLANQ_RIGHT_WRITE, NULL), ENOENT);
	/* another context's region, on the same node or another */
	assert_int_equal(free_err(b.fd, r.addr.id, 0, 0), ENOENT);
	assert_int_equal(export_err(b.fd, r.addr.id, CLANQ_RIGHT_WRITE, NULL),
			 ENOENT);
	assert_int_equal(free_err(a1.fd, r.addr.id, 0, 0), ENOENT);
	assert_int_equal(export_err(a1.fd, r.addr.id, CLANQ_RIGHTS_ALL, NULL),
			 ENOENT);
	/* flags and reserved words, with an id that is fine */
	assert_int_equal(free_err(a.fd, r.addr.id, 1, 0), EINVAL);
	assert_int_equal(free_err(a.fd, r.addr.id, 0, 1), EINVAL);
	/* rights: none, unknown bits */
	assert_int_equal(export_err(a.fd, r.addr.id, 0, NULL), EINVAL);
	assert_int_equal(export_err(a.fd, r.addr.id, 1u << 2, NULL), EINVAL);
	assert_int_equal(export_err(a.fd, r.addr.id,
				    CLANQ_RIGHTS_ALL | 0x80000000u, NULL),
			 EINVAL);
	for (i = 0; i < ARRAY_SIZE(e.reserved); i++) {
		memset(&e, 0, sizeof(e));
		e.id = r.addr.id;
		e.rights = CLANQ_RIGHT_WRITE;
		e.reserved[i] = 1;
		assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_REGION_EXPORT, &e),
				 EINVAL);
	}

	/* none of that touched the region: it exports, once */
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHTS_ALL, &key), 0);
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHTS_ALL, NULL),
			 EBUSY);
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHT_READ, NULL),
			 EBUSY);
	assert_int_equal(export_err(a.fd, s.addr.id, CLANQ_RIGHTS_ALL, &key2), 0);
	assert_true(key != key2);
	/* a peer imports it with the key; the failed free did nothing */
	assert_int_equal(clanq_ap_import(&b, &ap, r.addr, key, 0, page,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);

	/* freed once; then it is unknown to free and export alike */
	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(free_err(a.fd, r.addr.id, 0, 0), ENOENT);
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHT_WRITE, NULL),
			 ENOENT);
	assert_int_equal(clanq_ap_import(&b, &ap, r.addr, key, 0, page,
					 CLANQ_RIGHTS_ALL), -ENOENT);
	assert_int_equal(clanq_region_free(&s), 0);
	assert_int_equal(clanq_close(&a1), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

static int import_err(int fd, struct clanq_addr region, __u64 key,
		      __u64 offset, __u64 len, __u32 rights)
{
	struct clanq_ioc_ap_import im;
	struct clanq_ioc_ap_close c;
	int err;

	memset(&im, 0, sizeof(im));
	im.region = region;
	im.key = key;
	im.offset = offset;
	im.len = len;
	im.rights = rights;
	err = itest_ioctl_err(fd, CLANQ_IOC_AP_IMPORT, &im);
	if (!err) {
		memset(&c, 0, sizeof(c));
		c.id = im.id;
		if (ioctl(fd, CLANQ_IOC_AP_CLOSE, &c) < 0)
			fail_msg("closing aperture %u: %s", im.id,
				 strerror(errno));
	}
	return err;
}

static int close_err(int fd, __u32 id, __u32 flags)
{
	struct clanq_ioc_ap_close c;

	memset(&c, 0, sizeof(c));
	c.id = id;
	c.flags = flags;
	return itest_ioctl_err(fd, CLANQ_IOC_AP_CLOSE, &c);
}

static void malformed_imports_and_closes_are_refused(void **state)
{
	/* not a page multiple: bounds are the size asked for, not mapped */
	const __u64 R = 2 * page + 1000;
	struct clanq_region rw, ro, wo, never;
	struct clanq_addr a, bad;
	struct clanq_dev exp, imp, other;
	struct clanq_ioc_ap_import im;
	struct clanq_ap ap;
	__u64 key, key_ro, key_wo;
	unsigned int i;
	int fd;

	(void)state;
	assert_int_equal(clanq_open_nic(&exp, 0), 0);
	assert_int_equal(clanq_open_nic(&imp, 1), 0);
	assert_int_equal(clanq_open_nic(&other, 1), 0);
	fd = imp.fd;
	assert_int_equal(clanq_region_alloc(&exp, &rw, R), 0);
	assert_int_equal(clanq_region_alloc(&exp, &ro, page), 0);
	assert_int_equal(clanq_region_alloc(&exp, &wo, page), 0);
	assert_int_equal(clanq_region_alloc(&exp, &never, page), 0);
	assert_int_equal(clanq_region_export(&rw, CLANQ_RIGHTS_ALL, &key), 0);
	assert_int_equal(clanq_region_export(&ro, CLANQ_RIGHT_READ, &key_ro), 0);
	assert_int_equal(clanq_region_export(&wo, CLANQ_RIGHT_WRITE, &key_wo), 0);
	a = rw.addr;

	/* the well-formed twins: all of it, and its very last byte */
	assert_int_equal(import_err(fd, a, key, 0, R, CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(import_err(fd, a, key, R - 1, 1, CLANQ_RIGHT_WRITE), 0);

	/* wrong keys read exactly as an unknown region does */
	assert_int_equal(import_err(fd, a, key ^ 1, 0, R, CLANQ_RIGHT_WRITE),
			 ENOENT);
	assert_int_equal(import_err(fd, a, key ^ (1ull << 63), 0, R,
				    CLANQ_RIGHT_WRITE), ENOENT);
	assert_int_equal(import_err(fd, a, 0, 0, R, CLANQ_RIGHT_WRITE), ENOENT);
	assert_int_equal(import_err(fd, a, key_ro, 0, page, CLANQ_RIGHT_READ),
			 ENOENT);
	bad = a;
	bad.id = ~0u;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 ENOENT);
	/* the right id on the wrong node */
	bad = a;
	bad.node = 1;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 ENOENT);
	/* nodes that do not exist (as CLANQ_IOC_OOB_SEND reports them) */
	bad = a;
	bad.node = 7;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 EHOSTUNREACH);
	bad.node = CLANQ_NODE_INVALID;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 EHOSTUNREACH);
	/* never exported: no key opens it, not even 0 */
	assert_int_equal(import_err(fd, never.addr, 0, 0, 1, CLANQ_RIGHT_READ),
			 ENOENT);
	assert_int_equal(import_err(fd, never.addr, key, 0, 1, CLANQ_RIGHT_READ),
			 ENOENT);

	/* rights beyond the export */
	assert_int_equal(import_err(fd, ro.addr, key_ro, 0, page,
				    CLANQ_RIGHT_READ), 0);
	assert_int_equal(import_err(fd, ro.addr, key_ro, 0, page,
				    CLANQ_RIGHT_WRITE), EACCES);
	assert_int_equal(import_err(fd, ro.addr, key_ro, 0, page,
				    CLANQ_RIGHTS_ALL), EACCES);
	assert_int_equal(import_err(fd, wo.addr, key_wo, 0, page,
				    CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(import_err(fd, wo.addr, key_wo, 0, page,
				    CLANQ_RIGHT_READ), EACCES);
	/* rights that mean nothing */
	assert_int_equal(import_err(fd, a, key, 0, R, 0), EINVAL);
	assert_int_equal(import_err(fd, a, key, 0, R, 1u << 2), EINVAL);
	assert_int_equal(import_err(fd, a, key, 0, R, CLANQ_RIGHTS_ALL | (1u << 31)),
			 EINVAL);

	/* ranges: past the end, straddling it, wrapping around */
	assert_int_equal(import_err(fd, a, key, 0, R + 1, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, R, 1, CLANQ_RIGHT_WRITE), ERANGE);
	assert_int_equal(import_err(fd, a, key, R - 1, 2, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, 2 * page, 1001,
				    CLANQ_RIGHT_WRITE), ERANGE);
	assert_int_equal(import_err(fd, a, key, ~0ull, 2, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, 1, ~0ull, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, ~0ull - page + 1, 2 * page,
				    CLANQ_RIGHT_WRITE), ERANGE);
	/* an empty window, inside the region or at its end */
	assert_int_equal(import_err(fd, a, key, 0, 0, CLANQ_RIGHT_WRITE), EINVAL);
	assert_int_equal(import_err(fd, a, key, R, 0, CLANQ_RIGHT_WRITE), EINVAL);

	/* flags and reserved words of an otherwise good import */
	memset(&im, 0, sizeof(im));
	im.region = a;
	im.key = key;
	im.len = 1;
	im.rights = CLANQ_RIGHT_WRITE;
	im.flags = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_IMPORT, &im), EINVAL);
	for (i = 0; i < ARRAY_SIZE(im.reserved); i++) {
		im.flags = 0;
		im.reserved[i] = 1;
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_IMPORT, &im),
				 EINVAL);
		im.reserved[i] = 0;
	}

	/* closes: unknown ids, another context's aperture, flags */
	assert_int_equal(clanq_ap_import(&imp, &ap, a, key, 0, R,
					 CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(close_err(fd, ~0u, 0), ENOENT);
	assert_int_equal(close_err(fd, 0, 0), ENOENT);
	assert_int_equal(close_err(other.fd, ap.id, 0), ENOENT);
	assert_int_equal(close_err(exp.fd, ap.id, 0), ENOENT);
	assert_int_equal(close_err(fd, ap.id, 1), EINVAL);
	assert_int_equal(clanq_ap_close(&ap), 0);	/* still there */
	assert_int_equal(close_err(fd, ap.id, 0), ENOENT);	/* and gone */

	assert_int_equal(clanq_region_free(&rw), 0);
	assert_int_equal(clanq_region_free(&ro), 0);
	assert_int_equal(clanq_region_free(&wo), 0);
	assert_int_equal(clanq_region_free(&never), 0);
	assert_int_equal(clanq_close(&other), 0);
	assert_int_equal(clanq_close(&imp), 0);
	assert_int_equal(clanq_close(&exp), 0);
}

static int mmap_err(int fd, size_t len, int prot, int flags, __u64 off)
{
	void *p = mmap(NULL, len, prot, flags, fd, (off_t)off);

	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

/* Every wrong way to map what (fd, off, size) names, and the right one. */
static void mmap_variants_refused(int fd, __u64 off, size_t size, int prot)
{
	assert_int_equal(mmap_err(fd, size, prot, MAP_SHARED, off), 0);
	assert_int_equal(mmap_err(fd, size + page, prot, MAP_SHARED, off), EINVAL);
	if (size > page)
		assert_int_equal(mmap_err(fd, size - page, prot, MAP_SHARED, off),
				 EINVAL);
	assert_int_equal(mmap_err(fd, size, prot, MAP_SHARED, off + page), EINVAL);
	assert_int_equal(mmap_err(fd, size, prot, MAP_SHARED, off + 1000 * page),
			 EINVAL);
	assert_int_equal(mmap_err(fd, size, prot, MAP_PRIVATE, off), EINVAL);
}

static void wrong_mappings_of_regions_and_apertures_are_refused(void **state)
{
	struct clanq_dev exp, imp, fresh;
	struct clanq_ioc_region_create c;
	struct clanq_ap ap, ap_ro, ap_wo, sub;
	struct clanq_region r;
	unsigned char *p, *mem;
	__u64 key;
	size_t i;

	(void)state;
	assert_int_equal(clanq_open_nic(&exp, 0), 0);
	assert_int_equal(clanq_open_nic(&imp, 1), 0);
	assert_int_equal(clanq_open_nic(&fresh, 1), 0);

	/* the owner's mapping of a region, created raw for its offset */
	memset(&c, 0, sizeof(c));
	c.size = 3 * page - 10;
	assert_int_equal(itest_ioctl_err(exp.fd, CLANQ_IOC_REGION_CREATE, &c), 0);
	assert_int_equal(c.mmap_size, 3 * page);
	mmap_variants_refused(exp.fd, c.mmap_offset, c.mmap_size,
			      PROT_READ | PROT_WRITE);
	assert_int_equal(mmap_err(fresh.fd, c.mmap_size, PROT_READ, MAP_SHARED,
				  c.mmap_offset), EINVAL);
	assert_int_equal(mmap_err(imp.fd, c.mmap_size, PROT_READ, MAP_SHARED,
				  c.mmap_offset), EINVAL);
	mem = mmap(NULL, c.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   exp.fd, (off_t)c.mmap_offset);
	assert_true(mem != MAP_FAILED);
	assert_true(all_bytes(mem, c.mmap_size, 0));	/* zeroed */
	fill_pattern(mem, 3 * page, 0x5eed);
	memset(&r, 0, sizeof(r));
	r.fd = exp.fd;
	r.addr.node = exp.node;
	r.addr.id = c.id;
	r.mem = mem;
	r.size = c.size;
	r.map_size = c.mmap_size;
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHTS_ALL, &key), 0);

	/* an aperture onto all of it (the asked size, not the mapped one) */
	assert_int_equal(clanq_ap_import(&imp, &ap, r.addr, key, 0, r.size,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(ap.map_size, 3 * page);
	assert_int_equal(ap.map_delta, 0);
	mmap_variants_refused(imp.fd, ap.mmap_offset, ap.map_size,
			      PROT_READ | PROT_WRITE);
	/* another context's fd: the offset names nothing there */
	assert_int_equal(mmap_err(fresh.fd, ap.map_size, PROT_READ, MAP_SHARED,
				  ap.mmap_offset), EINVAL);
	assert_int_equal(clanq_ap_map(&ap), 0);
	assert_int_equal(memcmp(ap.base, mem, r.size), 0);

	/* an import without WRITE maps read-only, and stays read-only */
	assert_int_equal(clanq_ap_import(&imp, &ap_ro, r.addr, key, 0, r.size,
					 CLANQ_RIGHT_READ), 0);
	assert_int_equal(mmap_err(imp.fd, ap_ro.map_size, PROT_READ | PROT_WRITE,
				  MAP_SHARED, ap_ro.mmap_offset), EACCES);
	assert_int_equal(mmap_err(imp.fd, ap_ro.map_size, PROT_WRITE,
				  MAP_SHARED, ap_ro.mmap_offset), EACCES);
	assert_int_equal(clanq_ap_map(&ap_ro), 0);
	assert_int_equal(memcmp(ap_ro.base, mem, r.size), 0);
	assert_int_equal(mprotect(ap_ro.map, ap_ro.map_size,
				  PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(clanq_ap_write(&ap_ro, 0, "x", 1), -ENXIO);

	/*
	 * An import without READ cannot be mapped at all (a mapping can
	 * always be read): it is RDMA-only, and offers no offset to map.
	 */
	assert_int_equal(clanq_ap_import(&imp, &ap_wo, r.addr, key, 0, r.size,
					 CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(ap_wo.map_size, 0);
	assert_int_equal(ap_wo.mmap_offset, 0);
	assert_int_equal(clanq_ap_map(&ap_wo), -EOPNOTSUPP);
	assert_int_equal(clanq_ap_write(&ap_wo, 0, "x", 1), -ENXIO);
	assert_int_equal(clanq_ap_close(&ap_wo), 0);

	/*
	 * A window inside the region: whole pages are mapped, its first
	 * byte at map_delta; PIO through it lands in the owner's memory.
	 */
	assert_int_equal(clanq_ap_import(&imp, &sub, r.addr, key, page + 100,
					 200, CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(sub.map_size, page);
	assert_int_equal(sub.map_delta, 100);
	mmap_variants_refused(imp.fd, sub.mmap_offset, sub.map_size,
			      PROT_READ | PROT_WRITE);
	assert_int_equal(clanq_ap_map(&sub), 0);
	assert_int_equal(memcmp(sub.base, mem + page + 100, 200), 0);
	p = malloc(200);
	assert_non_null(p);
	for (i = 0; i < 200; i++)
		p[i] = (unsigned char)(i * 7 + 3);
	assert_int_equal(clanq_ap_write(&sub, 0, p, 200), 0);
	assert_int_equal(memcmp(mem + page + 100, p, 200), 0);
	assert_int_equal(memcmp(ap.base + page + 100, p, 200), 0);
	assert_int_equal(memcmp(ap_ro.base + page + 100, p, 200), 0);
	assert_int_equal(clanq_ap_write(&sub, 1, p, 200), -ERANGE);
	free(p);

	assert_int_equal(clanq_ap_close(&sub), 0);
	assert_int_equal(clanq_ap_close(&ap_ro), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&r), 0);	/* and unmaps mem */
	assert_int_equal(clanq_close(&fresh), 0);
	assert_int_equal(clanq_close(&imp), 0);
	assert_int_equal(clanq_close(&exp), 0);
}

static void kicks_name_only_the_callers_own_endpoints(void **state)
{
	struct clanq_ioc_rdma_kick k;
	struct clanq_dev a, b;
	struct clanq_ep ep;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 1), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_ep_create(&a, &ep, 0), 0);
	memset(&k, 0, sizeof(k));
	k.ep = ep.addr.id;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), 0);
	assert_int_equal(itest_ioctl_err(b.fd, CLANQ_IOC_RDMA_KICK, &k), ENOENT);
	k.ep = ~0u;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), ENOENT);
	k.ep = ep.addr.id;
	k.flags = 1;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), EINVAL);
	k.flags = 0;
	for (i = 0; i < ARRAY_SIZE(k.reserved); i++) {
		k.reserved[i] = 1;
		assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k),
				 EINVAL);
		k.reserved[i] = 0;
	}
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	k.ep = ep.addr.id;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), ENOENT);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

/*
 * 2. Revocation under PIO.
 *
 * Writer A imports the parent's region on node 1, maps it and stores in
 * a loop; it forks writer B, which inherits the mapping (no import of
 * its own) and stores too. The parent is a child subreaper, so B is
 * reparented to it when A dies and can be reaped here. When the parent
 * frees the region both must die of SIGBUS: revocation reaches every
 * process that maps the aperture, not only the one that mapped it.
 */

#define PIO_BYTES	(16 * 4096u)
#define PIO_WORDS	512u		/* per writer */

struct pio_sh {
	__u64 region;			/* packed address */
	__u64 key;
	__u32 stores[2];		/* A, B: store loops done */
	__u32 pid_b;
	__u32 mapped;
};

static void pio_store_loop(struct pio_sh *sh, volatile __u64 *w, int who)
{
	__u64 end = clanq_now_ns() + 60 * ITEST_NS_PER_S;
	__u64 seq = 0;
	__u32 i;

	for (;;) {
		for (i = 0; i < PIO_WORDS; i++)
			w[i] = ++seq;
		__atomic_store_n(&sh->stores[who],
				 __atomic_load_n(&sh->stores[who],
						 __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELEASE);
		if (clanq_now_ns() > end)
			CHILD_FAIL("writer %c: stores still land 60 s on",
				   'A' + who);
	}
}

static void pio_writer(void *arg)
{
	struct pio_sh *sh = arg;
	struct clanq_dev dev;
	struct clanq_ap ap;
	__u64 data[4] = { 1, 2, 3, 4 };
	pid_t b;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, itest_addr_unpack(sh->region),
					sh->key, 0, PIO_BYTES, CLANQ_RIGHTS_ALL),
			0);
	CHILD_CHECK_INT(clanq_ap_map(&ap), 0);
	CHILD_CHECK_INT(clanq_ap_write(&ap, PIO_BYTES - sizeof(data), data,
				       sizeof(data)), 0);
	store32(&sh->mapped, 1);
	fflush(NULL);
	b = fork();
	CHILD_CHECK(b >= 0);
	if (b == 0) {
		__atomic_store_n(&sh->pid_b, (__u32)getpid(), __ATOMIC_RELEASE);
		pio_store_loop(sh, (volatile __u64 *)ap.base + PIO_WORDS, 1);
	}
	pio_store_loop(sh, (volatile __u64 *)ap.base, 0);
}

static void pio_writers_die_of_sigbus_when_the_exporter_frees_the_region(void **state)
{
	struct clanq_region r, r2;
	struct clanq_dev dev, dev1;
	struct clanq_ap ap;
	struct pio_sh *sh;
	volatile __u64 *w;
	__u64 key, key2, before[2];
	int64_t t_free, t_a, t_b;
	pid_t a, b;
	int status, i;

	(void)state;
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	sh = shared_alloc(sizeof(*sh));
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_region_alloc(&dev, &r, PIO_BYTES), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHTS_ALL, &key), 0);
	sh->region = itest_addr_pack(r.addr);
	sh->key = key;

	a = itest_fork(pio_writer, sh);
	assert_true(a > 0);
	wait_for(&sh->stores[1], 100, a, "writer A");
	b = (pid_t)__atomic_load_n(&sh->pid_b, __ATOMIC_ACQUIRE);
	assert_true(b > 0);
	adopt(b);
	wait_for(&sh->stores[0], 100, a, "writer A");

	/* distributed shared memory: their stores are in the owner's pages */
	w = r.mem;
	assert_int_equal(w[PIO_BYTES / 8 - 1], 4);
	for (i = 0; i < 2; i++)
		before[i] = w[i * PIO_WORDS];
	itest_sleep_ns(5 * ITEST_NS_PER_MS);
	for (i = 0; i < 2; i++)
		assert_true(w[i * PIO_WORDS] > before[i]);

	t_free = clanq_now_ns();
	assert_int_equal(clanq_region_free(&r), 0);
	status = itest_wait(a, 10 * ITEST_NS_PER_S);
	t_a = clanq_now_ns();
	assert_true(died_of(status, SIGBUS, "writer A"));
	/* A is gone: B, orphaned, is ours now */
	status = itest_wait(b, 10 * ITEST_NS_PER_S);
	t_b = clanq_now_ns();
	assert_true(died_of(status, SIGBUS, "writer B (forked)"));
	printf("region: PIO writers died of SIGBUS %.1f ms and %.1f ms after the free (%u and %u store loops)\n",
	       (double)(t_a - t_free) / ITEST_NS_PER_MS,
	       (double)(t_b - t_free) / ITEST_NS_PER_MS,
	       sh->stores[0], sh->stores[1]);

	/* the old (node, id, key) names nothing now */
	assert_int_equal(clanq_open_nic(&dev1, 1), 0);
	assert_int_equal(clanq_ap_import(&dev1, &ap, r.addr, key, 0, PIO_BYTES,
					 CLANQ_RIGHT_WRITE), -ENOENT);
	assert_int_equal(clanq_ap_import(&dev, &ap, r.addr, key, 0, 1,
					 CLANQ_RIGHT_READ), -ENOENT);

	/* the exporter is unaffected: it exports, imports and stores again */
	assert_int_equal(clanq_region_alloc(&dev, &r2, PIO_BYTES), 0);
	assert_int_equal(clanq_region_export(&r2, CLANQ_RIGHTS_ALL, &key2), 0);
	assert_int_equal(clanq_ap_import(&dev1, &ap, r2.addr, key2, 0, PIO_BYTES,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_map(&ap), 0);
	assert_int_equal(clanq_ap_write(&ap, 8, &key2, sizeof(key2)), 0);
	assert_memory_equal((char *)r2.mem + 8, &key2, sizeof(key2));
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&r2), 0);
	assert_int_equal(clanq_close(&dev1), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(sh, sizeof(*sh));
}

/*
 * 3. Revocation under RDMA.
 *
 * The streamer (node 1) keeps its request queue full of 256 KiB writes
 * into the parent's 1 MiB region (node 0), every one signalled, all
 * from one pattern. Once they flow, and the pattern is seen in the
 * region, the parent frees the region with requests queued and one
 * being copied (256 KiB is split in rdma_max_xfer pieces), then says
 * so. The streamer checks every completion, in order: success, then
 * -ENXIO from some point on and never success again; every request
 * posted after the free returned fails with -ENXIO having written
 * nothing. Meanwhile the good process shares node 1's engine with it.
 */

#define STREAM_BYTES	(1024u * 1024)
#define STREAM_LEN	(256u * 1024)
#define STREAM_RQ	64
#define STREAM_MAX	65536		/* a backstop: the deadline is the bound */
#define STREAM_AFTER	32		/* requests posted after the free */

struct stream_sh {
	__u64 region;
	__u64 key;
	__u64 seed;
	__u32 freed;			/* parent: REGION_FREE returned */
	__u32 posted, completed;
	__u32 ok, enxio_before, enxio_after, partial;
};

static void streamer(void *arg)
{
	static bool after[STREAM_MAX];
	struct stream_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = STREAM_RQ,
				      .cq_slots = 2 * STREAM_RQ };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_region src;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_ap ap;
	__u32 posted = 0, done = 0, n_after = 0;
	bool failing = false;
	__u64 end = clanq_now_ns() + CHILD_MAX_NS;
	int r;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &src, STREAM_LEN), 0);
	fill_pattern(src.mem, STREAM_LEN, sh->seed);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, itest_addr_unpack(sh->region),
					sh->key, 0, STREAM_BYTES,
					CLANQ_RIGHT_WRITE), 0);
	for (;;) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("streamer: %u posted, %u completed after %lld s",
				   posted, done,
				   (long long)(CHILD_MAX_NS / ITEST_NS_PER_S));
		/* keep the queue full, until enough went in after the free */
		while (n_after < STREAM_AFTER && posted < STREAM_MAX) {
			bool was_freed = load32(&sh->freed);

			q = itest_rdma_req(src.addr.id, ap.id, 0,
				     (__u64)(posted % 4) * STREAM_LEN,
				     STREAM_LEN, posted,
				     CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
			r = clanq_rdma_post(&ep, &q);
			if (r == -EAGAIN)
				break;
			CHILD_CHECK_INT(r, 0);
			after[posted++] = was_freed;
			n_after += was_freed;
			store32(&sh->posted, posted);
		}
		if (posted == STREAM_MAX)
			CHILD_FAIL("streamer: %u requests, %u after the free",
				   posted, n_after);
		while (!clanq_rdma_poll(&ep, &c)) {
			if (c.cookie != done)
				CHILD_FAIL("streamer: completion %llu, expected %u",
					   (unsigned long long)c.cookie, done);
			if (after[done]) {
				if (c.status != -ENXIO || c.len)
					CHILD_FAIL("streamer: request %u, posted after the free: status %d len %llu",
						   done, c.status,
						   (unsigned long long)c.len);
				sh->enxio_after++;
			} else if (c.status == 0) {
				if (failing)
					CHILD_FAIL("streamer: request %u succeeded after a revoked one",
						   done);
				if (c.len != STREAM_LEN)
					CHILD_FAIL("streamer: request %u wrote %llu bytes",
						   done, (unsigned long long)c.len);
				sh->ok++;
			} else if (c.status == -ENXIO) {
				if (c.len > STREAM_LEN)
					CHILD_FAIL("streamer: request %u: -ENXIO after %llu bytes",
						   done, (unsigned long long)c.len);
				sh->partial += c.len != 0;
				failing = true;
				sh->enxio_before++;
			} else {
				CHILD_FAIL("streamer: request %u: status %d",
					   done, c.status);
			}
			store32(&sh->completed, ++done);
		}
		if (n_after >= STREAM_AFTER && done == posted)
			break;
		sched_yield();
	}
	CHILD_CHECK(failing);
	/* the engine's account agrees: every request taken, these failed */
	CHILD_CHECK_INT(itest_wait_ctr(&ep.counters->rdma_reqs, posted), 1);
	CHILD_CHECK_INT(itest_wait_ctr(&ep.counters->rdma_errors,
				       sh->enxio_before + sh->enxio_after), 1);
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK_INT(clanq_region_free(&src), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void wait_queued(struct stream_sh *sh, pid_t pid)
{
	__u64 end = clanq_now_ns() + 30 * ITEST_NS_PER_S;

	while (load32(&sh->posted) - load32(&sh->completed) < STREAM_RQ / 4) {
		if (!itest_still_running(pid, "streamer"))
			fail_msg("streamer ended early");
		if (clanq_now_ns() > end)
			fail_msg("streamer: its queue never filled");
		sched_yield();
	}
}

static void rdma_in_flight_completes_with_enxio_when_the_region_is_freed(void **state)
{
	struct good_sh *good = shared_alloc(sizeof(*good));
	struct stream_sh *sh = shared_alloc(sizeof(*sh));
	__u64 rnd = itest_seed("region rdma revoke"), key;
	struct clanq_dev dev, dev1;
	struct clanq_region r;
	struct clanq_ap ap;
	__u32 queued, good_at_free;
	unsigned char *expect;
	pid_t pid_good, pid;
	unsigned int i;

	(void)state;
	pid_good = good_start(good, &rnd);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_region_alloc(&dev, &r, STREAM_BYTES), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHT_WRITE, &key), 0);
	sh->region = itest_addr_pack(r.addr);
	sh->key = key;
	sh->seed = itest_rand(&rnd);
	pid = itest_fork(streamer, sh);
	assert_true(pid > 0);

	/* flowing: every quarter of the region holds the pattern */
	wait_for(&sh->completed, 8, pid, "streamer");
	expect = malloc(STREAM_LEN);
	assert_non_null(expect);
	fill_pattern(expect, STREAM_LEN, sh->seed);
	for (i = 0; i < 4; i++)
		assert_int_equal(memcmp((char *)r.mem + i * STREAM_LEN, expect,
					STREAM_LEN), 0);
	free(expect);

	/* free it with a queue behind the request being copied */
	wait_queued(sh, pid);
	queued = load32(&sh->posted) - load32(&sh->completed);
	good_at_free = load32(&good->rounds);
	assert_int_equal(clanq_region_free(&r), 0);
	store32(&sh->freed, 1);

	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "streamer"));
	/* some requests were queued when it went, and failed */
	assert_true(sh->enxio_before >= 1);
	assert_int_equal(sh->enxio_after, STREAM_AFTER);
	printf("region: RDMA revoked with ~%u requests queued: %u succeeded, %u failed -ENXIO (%u partly written), %u posted after the free failed -ENXIO\n",
	       queued, sh->ok, sh->enxio_before, sh->partial, sh->enxio_after);

	/* the engine still serves the unrelated endpoint */
	good_progress(good, pid_good, good_at_free, 3);
	good_finish(good, pid_good);

	assert_int_equal(clanq_open_nic(&dev1, 1), 0);
	assert_int_equal(clanq_ap_import(&dev1, &ap, r.addr, key, 0, STREAM_BYTES,
					 CLANQ_RIGHT_WRITE), -ENOENT);
	assert_int_equal(clanq_close(&dev1), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(sh, sizeof(*sh));
	munmap(good, sizeof(*good));
}

/*
 * 4. Processes killed with everything in flight.
 *
 * Each victim has, on node 1, an endpoint whose request queue it keeps
 * full of 256 KiB writes (from a registered and from an allocated
 * region, into the parent's region and into one of its own on node 0),
 * and PIO mappings of the parent's region from both nodes, which it
 * keeps storing into. It also exports a region the parent imports.
 * SIGKILL catches it at a random moment. The good process must not
 * notice; the parent must still be able to free the region the victim
 * had imported, and the victim's own export must be gone.
 */

#define VICTIMS		6
#define VICTIM_RQ	128
#define VICTIM_LEN	(256u * 1024)
#define VICTIM_DST	(1024u * 1024)

struct victim_sh {
	__u64 region, key;		/* the parent's */
	__u64 own, own_key;		/* the victim's, published */
	__u32 comps, stores;
};

static void victim(void *arg)
{
	struct victim_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = VICTIM_RQ,
				      .cq_slots = 2 * VICTIM_RQ };
	struct clanq_region reg, alloc, own;
	struct clanq_ap ap_x, ap_x0, ap_own;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_dev d0, d1;
	struct clanq_ep ep;
	struct clanq_addr x = itest_addr_unpack(sh->region);
	__u64 end = clanq_now_ns() + CHILD_MAX_NS;
	__u64 posted = 0, done = 0, key;
	char *buf;
	int r;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&d1, 1), 0);
	CHILD_CHECK_INT(clanq_open_nic(&d0, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&d1, &ep, &attr), 0);
	buf = mmap(NULL, 2 * VICTIM_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHILD_CHECK(buf != MAP_FAILED);
	fill_pattern(buf, 2 * VICTIM_LEN, 0x71c7);
	CHILD_CHECK_INT(clanq_region_register(&d1, &reg, buf, 2 * VICTIM_LEN), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d1, &alloc, VICTIM_LEN), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d0, &own, VICTIM_DST), 0);
	CHILD_CHECK_INT(clanq_region_export(&own, CLANQ_RIGHTS_ALL, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d1, &ap_own, own.addr, key, 0,
					VICTIM_DST, CLANQ_RIGHT_WRITE), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d1, &ap_x, x, sh->key, 0, VICTIM_DST,
					CLANQ_RIGHTS_ALL), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d0, &ap_x0, x, sh->key, 0, VICTIM_DST,
					CLANQ_RIGHTS_ALL), 0);
	CHILD_CHECK_INT(clanq_ap_map(&ap_x), 0);
	CHILD_CHECK_INT(clanq_ap_map(&ap_x0), 0);
	sh->own_key = key;
	__atomic_store_n(&sh->own, itest_addr_pack(own.addr), __ATOMIC_RELEASE);

	for (;;) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("victim: not killed after %lld s",
				   (long long)(CHILD_MAX_NS / ITEST_NS_PER_S));
		for (;;) {
			bool odd = posted & 1;

			q = itest_rdma_req(odd ? reg.addr.id : alloc.addr.id,
				     posted % 3 ? ap_x.id : ap_own.id,
				     odd ? VICTIM_LEN / 2 : 0,
				     (posted % 4) * VICTIM_LEN, VICTIM_LEN,
				     posted, CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
			r = clanq_rdma_post(&ep, &q);
			if (r == -EAGAIN)
				break;
			CHILD_CHECK_INT(r, 0);
			posted++;
		}
		while (!clanq_rdma_poll(&ep, &c)) {
			if (c.cookie != done || c.status || c.len != VICTIM_LEN)
				CHILD_FAIL("victim: completion %llu: cookie %llu status %d len %llu",
					   (unsigned long long)done,
					   (unsigned long long)c.cookie, c.status,
					   (unsigned long long)c.len);
			done++;
			store32(&sh->comps, (__u32)done);
		}
		/* PIO from both nodes, racing the engine's writes */
		((volatile __u64 *)ap_x.base)[posted % (VICTIM_DST / 8)] = posted;
		((volatile __u64 *)ap_x0.base)[done % (VICTIM_DST / 8)] = done;
		store32(&sh->stores, load32(&sh->stores) + 1);
	}
}

static void processes_killed_mid_transfer_leave_the_others_unaffected(void **state)
{
	struct good_sh *good = shared_alloc(sizeof(*good));
	struct victim_sh *sh = shared_alloc(sizeof(*sh));
	__u64 rnd = itest_seed("region kill"), key;
	struct clanq_dev dev, dev1;
	struct clanq_region x;
	struct clanq_ap ap_v;
	__u32 rounds_before, comps = 0;
	int64_t delay;
	pid_t pid_good, pid;
	unsigned int v;

	(void)state;
	pid_good = good_start(good, &rnd);
	rounds_before = load32(&good->rounds);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_open_nic(&dev1, 1), 0);
	for (v = 0; v < VICTIMS; v++) {
		memset(sh, 0, sizeof(*sh));
		assert_int_equal(clanq_region_alloc(&dev, &x, VICTIM_DST), 0);
		assert_int_equal(clanq_region_export(&x, CLANQ_RIGHTS_ALL, &key), 0);
		sh->region = itest_addr_pack(x.addr);
		sh->key = key;
		pid = itest_fork(victim, sh);
		assert_true(pid > 0);
		/* in the thick of it: completions and stores going on */
		wait_for(&sh->comps, 4, pid, "victim");
		wait_for(&sh->stores, 10, pid, "victim");
		assert_int_equal(clanq_ap_import(&dev1, &ap_v,
						 itest_addr_unpack(sh->own),
						 sh->own_key, 0, VICTIM_DST,
						 CLANQ_RIGHT_WRITE), 0);
		delay = (int64_t)(itest_rand(&rnd) % 21) * ITEST_NS_PER_MS;
		itest_sleep_ns(delay);
		kill(pid, SIGKILL);
		assert_true(died_of(itest_wait(pid, 20 * ITEST_NS_PER_S), SIGKILL,
				    "victim"));
		comps += load32(&sh->comps);
		assert_true(itest_still_running(pid_good, "good"));

		/* the region it had imported (twice) and mapped: ours to free */
		assert_int_equal(clanq_region_free(&x), 0);
		/* its own export went with it; our import of it closes */
		assert_int_equal(clanq_ap_import(&dev1, &ap_v,
						 itest_addr_unpack(sh->own),
						 sh->own_key, 0, 1,
						 CLANQ_RIGHT_WRITE), -ENOENT);
		assert_int_equal(clanq_ap_close(&ap_v), 0);
	}
	/* the good process went on through the kills, and goes on after */
	assert_true(load32(&good->rounds) > rounds_before);
	good_progress(good, pid_good, load32(&good->rounds), 3);
	printf("region: %u victims killed mid-transfer after %u completions in all; good process: %u rounds during the kills\n",
	       VICTIMS, comps, load32(&good->rounds) - rounds_before);
	good_finish(good, pid_good);
	assert_int_equal(clanq_close(&dev1), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(sh, sizeof(*sh));
	munmap(good, sizeof(*good));
}

/*
 * 5. A hostile process scribbles on its own endpoint segment: its request
 * queue's producer index and slots (while the engine works on them), its
 * completion queue's consumer index, the doorbell word, the counters and
 * the OOB indices, and rings the doorbell, its own and others'. The good
 * process on the same NIC goes on; the kernel survives; the hostile
 * process then tears down normally.
 */

#define HOSTILE_NS	(4 * ITEST_NS_PER_S)
#define HOSTILE_BYTES	(64u * 1024)

struct hostile_sh {
	__u64 seed;
	__u32 started;
	__u32 iters, kicks, comps, posts;
};

static bool documented_status(__s32 status)
{
	return status == 0 || status == -EINVAL || status == -ENOENT ||
	       status == -EACCES || status == -ERANGE || status == -ENXIO;
}

static void hostile(void *arg)
{
	struct hostile_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 8 };
	struct clanq_region src, dst;
	struct clanq_ioc_rdma_kick k;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_dev d0, d1;
	struct clanq_ep ep;
	struct clanq_ap ap;
	__u64 rnd = sh->seed, key, *ctrs;
	__u32 *doorbell, nr_ctrs = sizeof(struct clanq_ep_counters) / 8;
	__u64 end;
	unsigned int n, i;
	int r;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&d1, 1), 0);
	CHILD_CHECK_INT(clanq_open_nic(&d0, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&d1, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d1, &src, HOSTILE_BYTES), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d0, &dst, HOSTILE_BYTES), 0);
	CHILD_CHECK_INT(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d1, &ap, dst.addr, key, 0,
					HOSTILE_BYTES, CLANQ_RIGHT_WRITE), 0);
	/* the segment is mapped read-write: the "const" is the library's */
	doorbell = (__u32 *)(uintptr_t)ep.need_wakeup;
	ctrs = (__u64 *)(uintptr_t)ep.counters;
	memset(&k, 0, sizeof(k));

	store32(&sh->started, 1);
	end = clanq_now_ns() + HOSTILE_NS;
	for (n = 0;; n++) {
		__u64 v = itest_rand(&rnd);
		__u32 slot = (__u32)(v >> 32) & ep.rq.mask;

		if (n % 64 == 0 && clanq_now_ns() > end)
			break;
		switch (v % 12) {
		case 0:		/* a plausible producer index, or garbage */
			itest_store_u32(ep.rq.prod, v & 0x100 ?
					(__u32)(v >> 40) & ep.rq.mask :
					(__u32)(v >> 16));
			break;
		case 1:		/* a slot of noise */
			for (i = 0; i < sizeof(q) / 8; i++)
				((__u64 *)clanq_q_slot(&ep.rq, slot))[i] =
					itest_rand(&rnd);
			break;
		case 2: {	/* a slot that nearly makes sense */
			__u64 w = itest_rand(&rnd);

			q = itest_rdma_req(w & 1 ? src.addr.id : (__u32)(w >> 8),
				     w & 2 ? ap.id : (__u32)(w >> 16),
				     w & 4 ? w % HOSTILE_BYTES : w >> 3,
				     w & 8 ? (w >> 7) % HOSTILE_BYTES : ~w,
				     w & 16 ? (w >> 11) % HOSTILE_BYTES :
				     w >> 20,
				     w, (__u32)(w >> 50) & 0xf);
			if ((w & 0xe0) == 0xe0)
				q.reserved[1] = w;
			memcpy(clanq_q_slot(&ep.rq, slot), &q, sizeof(q));
			break;
		}
		case 3:
			itest_store_u32(ep.cq.cons, v & 0x100 ?
					(__u32)(v >> 40) & ep.cq.mask :
					(__u32)(v >> 16));
			break;
		case 4:
			itest_store_u32(doorbell, (__u32)(v >> 16));
			break;
		case 5:
			__atomic_store_n(&ctrs[(v >> 8) % nr_ctrs],
					 itest_rand(&rnd), __ATOMIC_RELAXED);
			break;
		case 6:
			itest_store_u32(v & 0x100 ? ep.oob.prod : ep.oob.cons,
					(__u32)(v >> 20));
			break;
		case 7:		/* the doorbell, whatever the queue holds */
			k.ep = ep.addr.id;
			CHILD_CHECK_INT(itest_ioctl_err(d1.fd,
							CLANQ_IOC_RDMA_KICK, &k),
					0);
			sh->kicks++;
			break;
		case 8:		/* somebody else's, or nobody's */
			k.ep = (__u32)(v >> 16);
			r = itest_ioctl_err(d1.fd, CLANQ_IOC_RDMA_KICK, &k);
			CHILD_CHECK_INT(r, k.ep == ep.addr.id ? 0 : ENOENT);
			break;
		case 9:		/* honest work, as the library does it */
			q = itest_rdma_req(src.addr.id, ap.id, 0, 0,
				     (v >> 20) % HOSTILE_BYTES, n,
				     CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
			r = clanq_rdma_post(&ep, &q);
			CHILD_CHECK(r == 0 || r == -EAGAIN);
			sh->posts += r == 0;
			break;
		default:	/* whatever the engine made of it */
			for (i = 0; i < 16 && !clanq_rdma_poll(&ep, &c); i++) {
				if (!documented_status(c.status))
					CHILD_FAIL("hostile: completion status %d",
						   c.status);
				sh->comps++;
			}
			break;
		}
		sh->iters = n + 1;
	}
	/* and it leaves like anybody else */
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK_INT(clanq_region_free(&src), 0);
	CHILD_CHECK_INT(clanq_region_free(&dst), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&d0), 0);
	CHILD_CHECK_INT(clanq_close(&d1), 0);
}

static void a_hostile_segment_owner_hurts_nobody_but_itself(void **state)
{
	struct good_sh *good = shared_alloc(sizeof(*good));
	struct hostile_sh *sh = shared_alloc(sizeof(*sh));
	__u64 rnd = itest_seed("region hostile");
	__u32 before, during;
	pid_t pid_good, pid;

	(void)state;
	pid_good = good_start(good, &rnd);
	sh->seed = itest_rand(&rnd);
	pid = itest_fork(hostile, sh);
	assert_true(pid > 0);
	wait_for(&sh->started, 1, pid, "hostile");
	before = load32(&good->rounds);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "hostile"));
	during = load32(&good->rounds) - before;
	printf("region: hostile process: %u scribbles, %u own kicks, %u requests posted, %u completions taken; good process: %u rounds meanwhile\n",
	       sh->iters, sh->kicks, sh->posts, sh->comps, during);
	assert_true(sh->iters > 1000);
	assert_true(during >= 1);
	good_progress(good, pid_good, load32(&good->rounds), 3);
	good_finish(good, pid_good);
	munmap(sh, sizeof(*sh));
	munmap(good, sizeof(*good));
}

/*
 * 6. RLIMIT_MEMLOCK. The VM runs as root, whose CAP_IPC_LOCK lifts the
 * limit: the child drops it (raw capget/capset: no libcap in the VM)
 * before it lowers the limit.
 */

#define MEMLOCK_LIMIT	(256u * 1024)

static void drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
		.pid = 0,
	};
	struct __user_cap_data_struct data[2];
	__u32 bit = 1u << (CAP_IPC_LOCK % 32);
	unsigned int w = CAP_IPC_LOCK / 32;

	CHILD_CHECK_INT(syscall(SYS_capget, &hdr, data), 0);
	data[w].effective &= ~bit;
	data[w].permitted &= ~bit;
	data[w].inheritable &= ~bit;
	CHILD_CHECK_INT(syscall(SYS_capset, &hdr, data), 0);
	memset(data, 0, sizeof(data));
	CHILD_CHECK_INT(syscall(SYS_capget, &hdr, data), 0);
	CHILD_CHECK(!(data[w].effective & bit) && !(data[w].permitted & bit));
}

static void memlock_child(void *arg)
{
	struct rlimit rl = { MEMLOCK_LIMIT, MEMLOCK_LIMIT };
	const size_t half = MEMLOCK_LIMIT / 2;
	unsigned long big = itest_param("max_ctx_bytes") / 2 + 4096;
	struct clanq_region a, b, c, al;
	struct clanq_dev dev, imp;
	struct clanq_ap ap, apl;
	char *buf, *holey;
	unsigned int i;
	__u64 key;

	default_signals();
	(void)arg;
	drop_cap_ipc_lock();
	CHILD_CHECK_INT(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	buf = mmap(NULL, 4 * MEMLOCK_LIMIT, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHILD_CHECK(buf != MAP_FAILED);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);

	/* half the limit fits; the whole limit more does not */
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, half), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf + MEMLOCK_LIMIT,
					      MEMLOCK_LIMIT), -ENOMEM);
	/* freeing the first makes room for exactly the limit */
	CHILD_CHECK_INT(clanq_region_free(&a), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf + MEMLOCK_LIMIT,
					      MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &c, buf, page), -ENOMEM);
	CHILD_CHECK_INT(clanq_region_free(&b), 0);
	/* more than the limit in one go */
	CHILD_CHECK_INT(clanq_region_register(&dev, &c, buf, 2 * MEMLOCK_LIMIT),
			-ENOMEM);

	/* a registration that fails half-way (a hole) gives its charge back */
	holey = buf + 2 * MEMLOCK_LIMIT;
	CHILD_CHECK_INT(munmap(holey + half, page), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &c, holey, MEMLOCK_LIMIT),
			-EFAULT);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_free(&b), 0);

	/* every free gives its charge back */
	for (i = 0; i < 100; i++) {
		CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, half), 0);
		CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf + half, half),
				0);
		CHILD_CHECK_INT(clanq_region_register(&dev, &c,
						      buf + MEMLOCK_LIMIT, page),
				-ENOMEM);
		CHILD_CHECK_INT(clanq_region_free(&b), 0);
		CHILD_CHECK_INT(clanq_region_free(&a), 0);
	}

	/*
	 * An importer that never closes its aperture keeps neither the
	 * exporter's pins nor its budget: both come back at the free (with
	 * them held, the second registration / allocation would not fit).
	 */
	CHILD_CHECK_INT(clanq_open_nic(&imp, 1), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_export(&a, CLANQ_RIGHT_WRITE, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&imp, &ap, a.addr, key, 0, MEMLOCK_LIMIT,
					CLANQ_RIGHT_WRITE), 0);
	CHILD_CHECK_INT(clanq_region_free(&a), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_free(&b), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &al, big), 0);
	CHILD_CHECK_INT(clanq_region_export(&al, CLANQ_RIGHT_WRITE, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&imp, &apl, al.addr, key, 0, big,
					CLANQ_RIGHT_WRITE), 0);
	CHILD_CHECK_INT(clanq_region_free(&al), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &al, big), 0);
	CHILD_CHECK_INT(clanq_region_free(&al), 0);
	CHILD_CHECK_INT(clanq_ap_close(&apl), 0);
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK_INT(clanq_close(&imp), 0);

	/* and so does closing the context with the region still there */
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, MEMLOCK_LIMIT), 0);

	/* allocated regions are the driver's memory: max_ctx_bytes, not this */
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &al, 4 * MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_free(&al), 0);
	CHILD_CHECK_INT(clanq_region_free(&a), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void registered_memory_is_charged_to_rlimit_memlock_and_given_back(void **state)
{
	pid_t pid;

	(void)state;
	pid = itest_fork(memlock_child, NULL);
	assert_true(pid > 0);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "memlock"));
}

/*
 * 7. The owner frees a region it still maps: its mapping stays valid
 * (the memory goes at the unmap), while an importer's PIO mapping of
 * the same region is zapped: its next read is SIGBUS.
 */

#define OWNER_BYTES	(3 * 4096u)

struct owner_sh {
	__u64 region, key;
	__u32 published, reader_ok, freed;
};

static void owner_child(void *arg)
{
	struct owner_sh *sh = arg;
	struct clanq_ioc_region_create cr;
	struct clanq_ioc_region_free f;
	struct clanq_region others[4];
	struct clanq_ioc_region_export e;
	struct clanq_dev dev;
	__u64 end = clanq_now_ns() + 30 * ITEST_NS_PER_S;
	unsigned char *mem, *copy;
	unsigned int i;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	memset(&cr, 0, sizeof(cr));
	cr.size = OWNER_BYTES;
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_CREATE, &cr), 0);
	mem = mmap(NULL, cr.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   dev.fd, (off_t)cr.mmap_offset);
	CHILD_CHECK(mem != MAP_FAILED);
	fill_pattern(mem, OWNER_BYTES, 0x0ea7);
	copy = malloc(OWNER_BYTES);
	CHILD_CHECK(copy != NULL);
	memcpy(copy, mem, OWNER_BYTES);
	memset(&e, 0, sizeof(e));
	e.id = cr.id;
	e.rights = CLANQ_RIGHT_READ;
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_EXPORT, &e), 0);
	sh->region = itest_addr_pack((struct clanq_addr){ dev.node, cr.id });
	sh->key = e.key;
	store32(&sh->published, 1);
	while (!load32(&sh->reader_ok)) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("owner: the reader never mapped the region");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}

	/* freed by the ioctl alone: the library would also unmap */
	memset(&f, 0, sizeof(f));
	f.id = cr.id;
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_FREE, &f), 0);
	store32(&sh->freed, 1);
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_FREE, &f),
			ENOENT);

	/* still ours: the contents, then writes and reads */
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	/* new regions get fresh pages, never the ones still mapped here */
	for (i = 0; i < ARRAY_SIZE(others); i++) {
		CHILD_CHECK_INT(clanq_region_alloc(&dev, &others[i],
						   OWNER_BYTES), 0);
		memset(others[i].mem, 0xab, OWNER_BYTES);
	}
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	fill_pattern(mem, OWNER_BYTES, 0xbee5);
	fill_pattern(copy, OWNER_BYTES, 0xbee5);
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	for (i = 0; i < ARRAY_SIZE(others); i++) {
		CHILD_CHECK(all_bytes(others[i].mem, OWNER_BYTES, 0xab));
		CHILD_CHECK_INT(clanq_region_free(&others[i]), 0);
	}
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	CHILD_CHECK_INT(munmap(mem, cr.mmap_size), 0);
	free(copy);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void reader_child(void *arg)
{
	struct owner_sh *sh = arg;
	__u64 end = clanq_now_ns() + 30 * ITEST_NS_PER_S;
	struct clanq_dev dev;
	struct clanq_ap ap;
	volatile __u64 *w;
	__u64 sum = 0;
	unsigned int i;

	default_signals();
	while (!load32(&sh->published)) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("reader: nothing published");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, itest_addr_unpack(sh->region),
					sh->key, 0, OWNER_BYTES,
					CLANQ_RIGHT_READ), 0);
	CHILD_CHECK_INT(clanq_ap_map(&ap), 0);
	w = (volatile __u64 *)ap.base;
	for (i = 0; i < OWNER_BYTES / 8; i++)
		sum += w[i];
	CHILD_CHECK(sum != 0);
	store32(&sh->reader_ok, 1);
	while (!load32(&sh->freed)) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("reader: the owner never freed the region");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	/* zapped: this read faults, and the fault is SIGBUS */
	end = clanq_now_ns() + 5 * ITEST_NS_PER_S;
	for (i = 0;; i++) {
		sum += w[i % (OWNER_BYTES / 8)];
		if (i % 1024 == 0 && clanq_now_ns() > end)
			CHILD_FAIL("reader: the freed region is still readable (%llx)",
				   (unsigned long long)sum);
	}
}

static void an_owner_mapping_outlives_the_free_and_an_importers_does_not(void **state)
{
	struct owner_sh *sh = shared_alloc(sizeof(*sh));
	pid_t owner, reader;

	(void)state;
	reader = itest_fork(reader_child, sh);
	assert_true(reader > 0);
	owner = itest_fork(owner_child, sh);
	assert_true(owner > 0);
	assert_true(itest_status_ok(itest_wait(owner, 60 * ITEST_NS_PER_S),
				    "owner"));
	assert_true(died_of(itest_wait(reader, 20 * ITEST_NS_PER_S), SIGBUS,
			    "reader"));
	munmap(sh, sizeof(*sh));
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(malformed_region_creation_is_refused),
		T(registering_memory_that_cannot_be_pinned_is_refused),
		T(free_and_export_name_only_the_callers_own_regions),
		T(malformed_imports_and_closes_are_refused),
		T(wrong_mappings_of_regions_and_apertures_are_refused),
		T(kicks_name_only_the_callers_own_endpoints),
		T(pio_writers_die_of_sigbus_when_the_exporter_frees_the_region),
		T(rdma_in_flight_completes_with_enxio_when_the_region_is_freed),
		T(processes_killed_mid_transfer_leave_the_others_unaffected),
		T(a_hostile_segment_owner_hurts_nobody_but_itself),
		T(registered_memory_is_charged_to_rlimit_memlock_and_given_back),
		T(an_owner_mapping_outlives_the_free_and_an_importers_does_not),
	};

	page = (size_t)sysconf(_SC_PAGESIZE);
	return cmocka_run_group_tests_name("region", tests, NULL, NULL);
}
