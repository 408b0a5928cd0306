// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The RDMA fast path makes no system call: polling the completion queue
 * leaves the driver's entry counter alone, and posting and polling work
 * in seccomp strict mode.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "rdma_fixture.h"


/*
 * No system call on the fast path.
 */

#define POLLS		100000
#define FAST_REQS	32

static void polling_the_completion_queue_never_enters_the_driver(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct pair p;
	uint64_t q, e0, e1, e2, e3;
	unsigned int i, bad = 0, got = 0;
	uint64_t end;

	(void)state;
	pair_open(&p, &attr);
	q = itest_query_cost(&p.a);

	/* empty */
	e0 = itest_entries(&p.a);
	for (i = 0; i < POLLS; i++)
		bad += clanq_rdma_poll(&p.ep, &c) != -EAGAIN;
	e1 = itest_entries(&p.a);
	assert_int_equal(bad, 0);
	assert_int_equal(e1 - e0, q);

	/* completions waiting: taking them is not a system call either */
	for (i = 0; i < FAST_REQS; i++) {
		req = stream_req(&p, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
	}
	assert_true(itest_wait_ctr(&p.ep.counters->rdma_reqs, FAST_REQS));
	assert_true(wait_doorbell_set(&p.ep));	/* the engine is done */
	e2 = itest_entries(&p.a);
	end = clanq_now_ns() + COMP_TIMEOUT;
	for (i = 0; i < POLLS || got < FAST_REQS; i++) {
		if (!clanq_rdma_poll(&p.ep, &c)) {
			bad += c.cookie != (0xd00b000000000000ull | got) ||
			       c.status != 0 || c.len != STREAM_LEN;
			got++;
		}
		if (i % 1024 == 0)
			assert_true(clanq_now_ns() < end);
	}
	e3 = itest_entries(&p.a);
	assert_int_equal(bad, 0);
	assert_int_equal(got, FAST_REQS);
	assert_int_equal(e3 - e2, q);
	stream_check(&p, FAST_REQS);
	pair_close(&p);
}

/*
 * Polling and posting under seccomp strict mode: the child first hands
 * the engine several MiB of work (a system call to wake it is allowed
 * then), enters strict mode, and posts small requests while the engine is
 * still busy with its queue, then polls every completion. Each post is
 * made only while the doorbell word says the engine is looking at the
 * queue, so the only way it can enter the driver is a broken doorbell
 * (or a broken poll).
 */

#define STRICT_BIG	(4 * MiB)
#define STRICT_BIGS	8
#define STRICT_SMALL	64
#define STRICT_SLEN	100
#define STRICT_SRC	(STRICT_BIG + 64 * KiB)
#define STRICT_DST	(STRICT_BIG + 64 * KiB)
#define STRICT_SEED	0x57c7ull

struct strict_args {
	struct clanq_addr region;
	uint64_t key;
	int fd;
};

struct strict_report {
	uint32_t posted;	/* small requests posted in strict mode */
	uint32_t completions;
	uint32_t bad;
	uint32_t engine_idle;	/* doorbell found set before a post */
};

static struct clanq_rdma_req strict_req(uint32_t src, uint32_t ap, unsigned int i)
{
	if (i < STRICT_BIGS)
		return itest_rdma_req(src, ap, 0, 0, STRICT_BIG, i, REQ_DONE);
	i -= STRICT_BIGS;
	return itest_rdma_req(src, ap, STRICT_BIG + 7 + i * 128ull,
		     STRICT_BIG + 3 + i * 128ull, STRICT_SLEN, STRICT_BIGS + i,
		     REQ_DONE);
}

static void strict_child(void *arg)
{
	struct strict_args *a = arg;
	struct clanq_ep_attr attr = { .rq_slots = 128, .cq_slots = 128 };
	struct strict_report rep;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct clanq_region src;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_ap ap;
	unsigned int i, want;

	memset(&rep, 0, sizeof(rep));
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &src, STRICT_SRC), 0);
	pat_fill(src.mem, STRICT_SEED, 0, STRICT_SRC, 0);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, a->region, a->key, 0,
					STRICT_DST, CLANQ_RIGHT_WRITE), 0);
	for (i = 0; i < STRICT_BIGS; i++) {
		req = strict_req(src.addr.id, ap.id, i);
		CHILD_CHECK_INT(clanq_rdma_post(&ep, &req), 0);
	}
	alarm(30);		/* a lost completion ends in SIGALRM */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0)
		CHILD_FAIL("prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT): %s",
			   strerror(errno));

	for (i = 0; i < STRICT_SMALL; i++) {
		if (__atomic_load_n(ep.need_wakeup, __ATOMIC_ACQUIRE)) {
			rep.engine_idle = 1;
			break;
		}
		req = strict_req(src.addr.id, ap.id, STRICT_BIGS + i);
		if (clanq_rdma_post(&ep, &req) != 0)
			rep.bad++;
		rep.posted++;
	}
	want = STRICT_BIGS + rep.posted;
	while (rep.completions < want) {
		if (clanq_rdma_poll(&ep, &c)) {
			clanq_cpu_relax();
			continue;
		}
		req = strict_req(src.addr.id, ap.id, rep.completions);
		if (c.cookie != req.cookie || c.status || c.len != req.len)
			rep.bad++;
		rep.completions++;
	}
	/* nothing more */
	for (i = 0; i < POLLS; i++)
		rep.bad += clanq_rdma_poll(&ep, &c) != -EAGAIN;
	if (write(a->fd, &rep, sizeof(rep)) != sizeof(rep))
		syscall(SYS_exit, 2);
	syscall(SYS_exit, 0);
}

static void polling_and_posting_work_in_seccomp_strict_mode(void **state)
{
	struct strict_report rep;
	struct strict_args a;
	struct clanq_region dst;
	struct clanq_dev dev;
	int fds[2], status;
	bool reported;
	unsigned int i;
	size_t d;
	pid_t pid;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	assert_int_equal(clanq_region_alloc(&dev, &dst, STRICT_DST), 0);
	bg_fill(dst.mem, 0, STRICT_DST);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &a.key), 0);
	a.region = dst.addr;
	assert_int_equal(pipe(fds), 0);
	a.fd = fds[1];
	pid = itest_fork(strict_child, &a);
	assert_true(pid > 0);
	close(fds[1]);
	reported = itest_read_full(fds[0], &rep, sizeof(rep));
	close(fds[0]);
	status = itest_wait(pid, RUN_TIMEOUT);
	if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		fprintf(stderr,
			"strict child: SIGKILL: a forbidden system call?\n");
	assert_true(itest_status_ok(status, "strict child"));
	assert_true(reported);
	printf("strict: %u of %u posts made in strict mode%s, %u completions\n",
	       rep.posted, STRICT_SMALL,
	       rep.engine_idle ? " (then the engine went idle)" : "",
	       rep.completions);
	assert_int_equal(rep.bad, 0);
	/* at least one post happened while the engine was busy */
	assert_true(rep.posted >= 1);
	assert_int_equal(rep.completions, STRICT_BIGS + rep.posted);

	/* what was posted arrived, and nothing else */
	d = pat_diff(dst.mem, STRICT_SEED, 0, STRICT_BIG, 0);
	if (d < STRICT_BIG)
		fail_msg("big write wrong at %zu", d);
	for (i = 0; i < STRICT_SMALL; i++) {
		const uint8_t *m = (const uint8_t *)dst.mem + STRICT_BIG + i * 128ull;

		d = pat_diff(m, BG_SEED, STRICT_BIG + i * 128ull, 3, TOP);
		assert_int_equal(d, 3);
		if (i < rep.posted)
			d = pat_diff(m + 3, STRICT_SEED,
				     STRICT_BIG + 7 + i * 128ull, STRICT_SLEN, 0);
		else
			d = pat_diff(m + 3, BG_SEED, STRICT_BIG + 3 + i * 128ull,
				     STRICT_SLEN, TOP);
		if (d < STRICT_SLEN)
			fail_msg("small write %u wrong at byte %zu", i, d);
		d = pat_diff(m + 3 + STRICT_SLEN, BG_SEED,
			     STRICT_BIG + 3 + STRICT_SLEN + i * 128ull,
			     128 - 3 - STRICT_SLEN, TOP);
		assert_int_equal(d, 128 - 3 - STRICT_SLEN);
	}
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(polling_the_completion_queue_never_enters_the_driver),
		T(polling_and_posting_work_in_seccomp_strict_mode),
	};

	return cmocka_run_group_tests_name("rdma_nosyscall", tests, NULL, NULL);
}
