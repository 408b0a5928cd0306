// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The central promise of the unified event queue: taking events and
 * messages makes no system call at all, shown with the driver's own
 * entry counter and under seccomp strict mode.
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "evq_fixture.h"

/*
 * No system call on the fast path.
 */

#define POLLS		100000
#define FAST_MSGS	10

static void polling_endpoints_and_the_evq_never_enters_the_driver(void **state)
{
	struct clanq_oob_msg m;
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct pollfd pfd;
	struct fix f;
	uint64_t q, e0, e1, e2, e3;
	unsigned int i, bad = 0, events = 0, msgs = 0;

	(void)state;
	fix_open(&f, 4);
	assert_int_equal(clanq_ep_create(&f.dev, &ep, 64), 0);
	do_register(&f.evq, &ep, 0xfa57);
	q = itest_query_cost(&f.dev);

	/* nothing queued */
	e0 = itest_entries(&f.dev);
	for (i = 0; i < POLLS; i++) {
		bad += clanq_oob_recv(&ep, &m) != -EAGAIN;
		bad += clanq_evq_poll(&f.evq, &ev) != -EAGAIN;
		bad += clanq_ep_dropped(&ep) != 0;
	}
	e1 = itest_entries(&f.dev);
	assert_int_equal(bad, 0);
	assert_int_equal(e1 - e0, q);

	/* real events and messages, sent by another context */
	for (i = 0; i < FAST_MSGS; i++)
		send_seq(&f.tx, ep.addr, i);
	assert_true(itest_wait_arrivals(&ep, FAST_MSGS));
	for (i = 0; i < POLLS; i++) {
		if (!clanq_evq_poll(&f.evq, &ev)) {
			events++;
			bad += ev.cookie != 0xfa57;
		}
		while (clanq_oob_recv(&ep, &m) == 0)
			bad += itest_check(&m, f.tx.addr, ITEST_TYPE, TAG,
					   msgs++) != NULL;
	}
	e2 = itest_entries(&f.dev);
	assert_int_equal(bad, 0);
	assert_int_equal(msgs, FAST_MSGS);
	assert_true(events >= 1);
	assert_int_equal(e2 - e1, q);

	/* and the counter does count: one poll() on the evq fd is one entry */
	pfd.fd = clanq_evq_fd(&f.evq);
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	e3 = itest_entries(&f.dev);
	assert_int_equal(e3 - e2, q + 1);

	fix_close_ep(&f, &ep);
}

#define STRICT_MSGS	256
#define STRICT_BATCH	16
#define STRICT_COOKIE	0x5ec0000000000001ull

struct strict_args {
	struct clanq_addr sender;
	int fd;				/* to the parent */
};

struct strict_report {
	uint32_t received;
	uint32_t events;
	uint32_t bad_events;
	uint32_t bad_msgs;
	uint64_t dropped;
};

/*
 * Set up, then enter seccomp strict mode: read, write, exit and
 * sigreturn only; anything else is SIGKILL. Then take events and messages
 * until all have come. No printf, no malloc, no clock_gettime (whose vDSO
 * may fall back to a system call on the VM's clocksource), and the exit
 * is the thread-exit system call, not glibc's exit_group.
 */
static void strict_child(void *arg)
{
	struct strict_args *a = arg;
	struct strict_report rep;
	struct clanq_oob_msg m;
	struct clanq_event ev = { 0 };
	struct clanq_dev dev;
	struct clanq_evq evq;
	struct clanq_ep ep;
	int reg;

	memset(&rep, 0, sizeof(rep));
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ep_create(&dev, &ep, 64), 0);
	CHILD_CHECK_INT(clanq_evq_create(&dev, &evq, 4), 0);
	reg = clanq_evq_register(&evq, &ep, CLANQ_EV_OOB, STRICT_COOKIE);
	CHILD_CHECK(reg >= 0);
	CHILD_CHECK(itest_write_full(a->fd, &ep.addr, sizeof(ep.addr)));
	alarm(20);		/* a lost event ends in SIGALRM, not a hang */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0)
		CHILD_FAIL("prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT): %s",
			   strerror(errno));

	while (rep.received < STRICT_MSGS) {
		if (clanq_evq_poll(&evq, &ev)) {
			clanq_cpu_relax();
			continue;
		}
		rep.events++;
		if (ev.cookie != STRICT_COOKIE || ev.events != CLANQ_EV_OOB ||
		    ev.reg != (uint32_t)reg)
			rep.bad_events++;
		while (clanq_oob_recv(&ep, &m) == 0) {
			if (itest_check(&m, a->sender, ITEST_TYPE, TAG,
					rep.received))
				rep.bad_msgs++;
			rep.received++;
			if (rep.received % STRICT_BATCH == 0 &&
			    write(a->fd, "+", 1) != 1)
				rep.bad_msgs++;
		}
	}
	rep.dropped = clanq_ep_dropped(&ep);
	if (write(a->fd, &rep, sizeof(rep)) != sizeof(rep))
		syscall(SYS_exit, 2);
	syscall(SYS_exit, 0);
}

static void polling_endpoints_and_the_evq_works_in_seccomp_strict_mode(void **state)
{
	struct strict_report rep;
	struct strict_args a;
	struct clanq_addr child;
	struct clanq_dev dev;
	struct clanq_ep tx;
	bool reported;
	unsigned int b, i;
	int fds[2], status;
	char ack;
	pid_t pid;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_ep_create(&dev, &tx, 0), 0);
	assert_int_equal(pipe(fds), 0);
	a.sender = tx.addr;
	a.fd = fds[1];
	pid = itest_fork(strict_child, &a);
	assert_true(pid > 0);
	close(fds[1]);
	assert_true(itest_read_full(fds[0], &child, sizeof(child)));
	assert_int_equal(child.node, 1);

	/* in batches the child acknowledges: its queue never overflows */
	for (b = 0; b < STRICT_MSGS / STRICT_BATCH; b++) {
		for (i = 0; i < STRICT_BATCH; i++)
			send_seq(&tx, child, b * STRICT_BATCH + i);
		if (!itest_read_full(fds[0], &ack, 1))
			break;		/* the child died: its status says why */
	}
	reported = itest_read_full(fds[0], &rep, sizeof(rep));
	close(fds[0]);
	status = itest_wait(pid, ITEST_RECV_TIMEOUT);
	if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		fprintf(stderr,
			"strict child: SIGKILL: a forbidden system call?\n");
	assert_true(itest_status_ok(status, "strict child"));
	assert_true(reported);
	assert_int_equal(rep.received, STRICT_MSGS);
	assert_int_equal(rep.bad_msgs, 0);
	assert_int_equal(rep.bad_events, 0);
	assert_true(rep.events >= 1);
	assert_true(rep.events <= STRICT_MSGS);
	assert_int_equal(rep.dropped, 0);
	assert_int_equal(itest_ctr(&tx.counters->oob_sent), STRICT_MSGS);

	assert_int_equal(clanq_ep_destroy(&tx), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(polling_endpoints_and_the_evq_never_enters_the_driver),
		T(polling_endpoints_and_the_evq_works_in_seccomp_strict_mode),
	};

	return cmocka_run_group_tests_name("evq_nosyscall", tests, NULL, NULL);
}
