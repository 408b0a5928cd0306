// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The unified event queue through the real driver, delivering: one event
 * per registration until it is taken, cookies, registration on arrival,
 * blocking waits (woken, timed out, interrupted), the evq fd in epoll, and
 * a server fed by several client processes.
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
 * Delivery.
 */

static void each_endpoint_raises_one_event_carrying_its_cookie(void **state)
{
	static const uint64_t cookies[3] = {
		0, 0xc0ffee0000000001ull, 0xffffffffffffffffull,
	};
	struct clanq_ep eps[3];
	struct clanq_event ev = { 0 };
	bool seen[3] = { false };
	int regs[3];
	struct fix f;
	unsigned int i, k;

	(void)state;
	fix_open(&f, 8);
	for (i = 0; i < 3; i++) {
		assert_int_equal(clanq_ep_create(&f.dev, &eps[i], 16), 0);
		regs[i] = do_register(&f.evq, &eps[i], cookies[i]);
		assert_true(regs[i] < 8);
		for (k = 0; k < i; k++)
			assert_int_not_equal(regs[i], regs[k]);
	}
	expect_no_event(&f.evq);	/* nothing queued yet */

	for (i = 0; i < 3; i++)
		send_seq(&f.tx, eps[i].addr, i);
	for (k = 0; k < 3; k++) {
		take_event(&f.evq, &ev);
		for (i = 0; i < 3 && ev.cookie != cookies[i]; i++)
			;
		assert_true(i < 3);
		assert_false(seen[i]);
		seen[i] = true;
		assert_int_equal(ev.reg, regs[i]);
	}
	expect_no_event(&f.evq);
	for (i = 0; i < 3; i++) {
		drain(&eps[i], f.tx.addr, i, 1);
		assert_true(itest_wait_ctr(&eps[i].counters->events, 1));
	}
	for (i = 0; i < 3; i++)
		assert_int_equal(clanq_ep_destroy(&eps[i]), 0);
	fix_close(&f);
}

static void messages_arriving_before_the_event_is_taken_raise_no_second_event(void **state)
{
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	int reg;
	uint32_t i;

	(void)state;
	reg = fix_open_ep(&f, &ep, 0xabc);

	for (i = 0; i < 10; i++)
		send_seq(&f.tx, ep.addr, i);
	assert_true(itest_wait_arrivals(&ep, 10));
	take_event_of(&f.evq, reg, 0xabc);
	assert_int_equal(clanq_evq_poll(&f.evq, &ev), -EAGAIN);
	expect_no_event(&f.evq);
	drain(&ep, f.tx.addr, 0, 10);

	/* taken and drained: the next message raises the next event */
	send_seq(&f.tx, ep.addr, 10);
	take_event_of(&f.evq, reg, 0xabc);
	drain(&ep, f.tx.addr, 10, 1);
	expect_no_event(&f.evq);
	assert_int_equal(clanq_ep_dropped(&ep), 0);

	fix_close_ep(&f, &ep);
}

static void a_message_arriving_after_the_event_was_taken_raises_a_new_one(void **state)
{
	struct clanq_ep ep;
	struct fix f;
	int reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 77);

	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 77);
	/* not drained yet: still, the bit is clear, so this one is news */
	send_seq(&f.tx, ep.addr, 1);
	take_event_of(&f.evq, reg, 77);
	drain(&ep, f.tx.addr, 0, 2);
	expect_no_event(&f.evq);

	fix_close_ep(&f, &ep);
}

static void registering_an_endpoint_that_holds_messages_raises_an_event_at_once(void **state)
{
	struct clanq_ep full, empty;
	struct clanq_event ev = { 0 };
	struct fix f;
	int reg;

	(void)state;
	fix_open(&f, 4);
	assert_int_equal(clanq_ep_create(&f.dev, &full, 16), 0);
	assert_int_equal(clanq_ep_create(&f.dev, &empty, 16), 0);
	send_seq(&f.tx, full.addr, 0);
	send_seq(&f.tx, full.addr, 1);
	assert_true(itest_wait_arrivals(&full, 2));

	reg = do_register(&f.evq, &full, 0xf011);
	/* raised by the registration itself: no wait needed */
	assert_int_equal(clanq_evq_poll(&f.evq, &ev), 0);
	assert_int_equal(ev.reg, reg);
	assert_int_equal(ev.cookie, 0xf011);
	assert_int_equal(ev.events, CLANQ_EV_OOB);
	drain(&full, f.tx.addr, 0, 2);

	/* an empty endpoint raises nothing by being registered */
	do_register(&f.evq, &empty, 0xe);
	expect_no_event(&f.evq);

	assert_int_equal(clanq_ep_destroy(&full), 0);
	assert_int_equal(clanq_ep_destroy(&empty), 0);
	fix_close(&f);
}

/*
 * Blocking.
 */

struct late_sender_args {
	struct clanq_addr dst;
};

static void late_sender(void *arg)
{
	struct late_sender_args *a = arg;
	struct clanq_dev dev;
	struct clanq_ep ep;

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ep_create(&dev, &ep, 0), 0);
	itest_sleep_ns(50 * ITEST_NS_PER_MS);
	CHILD_CHECK_INT(itest_send(&ep, a->dst, ITEST_TYPE, TAG, 0), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void a_blocked_wait_wakes_when_another_process_sends(void **state)
{
	struct late_sender_args a;
	struct clanq_oob_msg m;
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	uint64_t q, e0, e1;
	int64_t t0, dt;
	int reg, r;
	pid_t pid;

	(void)state;
	reg = fix_open_ep(&f, &ep, 0xb10c);
	q = itest_query_cost(&f.dev);
	a.dst = ep.addr;

	e0 = itest_entries(&f.dev);
	t0 = clanq_now_ns();
	pid = itest_fork(late_sender, &a);
	assert_true(pid > 0);
	r = clanq_evq_wait(&f.evq, &ev, 5 * ITEST_NS_PER_S);
	dt = clanq_now_ns() - t0;
	e1 = itest_entries(&f.dev);
	assert_int_equal(r, 0);
	assert_int_equal(ev.reg, reg);
	assert_int_equal(ev.cookie, 0xb10c);
	assert_true(dt < 3 * ITEST_NS_PER_S);
	/* it slept in the driver, it did not just spin */
	assert_true(e1 - e0 >= q + 1);

	assert_true(itest_status_ok(itest_wait(pid, ITEST_RECV_TIMEOUT),
				    "late sender"));
	assert_int_equal(clanq_oob_recv(&ep, &m), 0);
	assert_int_equal(m.src.node, 1);
	fix_close_ep(&f, &ep);
}

static void a_wait_without_an_event_returns_etimedout_after_its_timeout(void **state)
{
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	int64_t t0, dt;

	(void)state;
	fix_open_ep(&f, &ep, 1);

	t0 = clanq_now_ns();
	assert_int_equal(clanq_evq_wait(&f.evq, &ev, 100 * ITEST_NS_PER_MS), -ETIMEDOUT);
	dt = clanq_now_ns() - t0;
	assert_true(dt >= 100 * ITEST_NS_PER_MS);
	assert_true(dt < 5 * ITEST_NS_PER_S);

	/* without the spin phase too */
	clanq_evq_set_spin(&f.evq, 0);
	t0 = clanq_now_ns();
	assert_int_equal(clanq_evq_wait(&f.evq, &ev, 100 * ITEST_NS_PER_MS), -ETIMEDOUT);
	dt = clanq_now_ns() - t0;
	assert_true(dt >= 100 * ITEST_NS_PER_MS);
	assert_true(dt < 5 * ITEST_NS_PER_S);

	/* 0: look once */
	assert_int_equal(clanq_evq_wait(&f.evq, &ev, 0), -ETIMEDOUT);

	fix_close_ep(&f, &ep);
}

static volatile sig_atomic_t signals_seen;

static void count_signal(int sig)
{
	(void)sig;
	signals_seen++;
}

static void signaller(void *arg)
{
	pid_t parent = getppid();
	int i;

	(void)arg;
	/* again and again, in case the first lands before the wait */
	for (i = 0; i < 100; i++) {
		itest_sleep_ns(50 * ITEST_NS_PER_MS);
		CHILD_CHECK_INT(kill(parent, SIGUSR1), 0);
	}
}

static void a_signal_interrupts_a_blocked_wait_with_eintr(void **state)
{
	struct sigaction sa, old;
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	int64_t t0, dt;
	int r, status;
	pid_t pid;

	(void)state;
	fix_open_ep(&f, &ep, 1);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = count_signal;	/* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	signals_seen = 0;

	t0 = clanq_now_ns();
	pid = itest_fork(signaller, NULL);
	assert_true(pid > 0);
	r = clanq_evq_wait(&f.evq, &ev, 5 * ITEST_NS_PER_S);
	dt = clanq_now_ns() - t0;
	kill(pid, SIGKILL);
	status = itest_wait(pid, ITEST_RECV_TIMEOUT);
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);

	assert_true(status >= 0);
	assert_int_equal(r, -EINTR);
	assert_true(signals_seen >= 1);
	assert_true(dt < 4 * ITEST_NS_PER_S);

	/* and the evq is fine afterwards */
	send_seq(&f.tx, ep.addr, 0);
	take_event(&f.evq, &ev);
	drain(&ep, f.tx.addr, 0, 1);
	fix_close_ep(&f, &ep);
}

static void the_evq_fd_is_readable_in_epoll_only_while_an_event_is_queued(void **state)
{
	struct epoll_event want, got[4];
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct pollfd pfd;
	struct fix f;
	int epfd, reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 0xe9);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	assert_true(epfd >= 0);
	memset(&want, 0, sizeof(want));
	want.events = EPOLLIN;
	want.data.u64 = 0x5eed;
	assert_int_equal(epoll_ctl(epfd, EPOLL_CTL_ADD, clanq_evq_fd(&f.evq),
				   &want), 0);
	pfd.fd = clanq_evq_fd(&f.evq);
	pfd.events = POLLIN;

	assert_int_equal(epoll_wait(epfd, got, 4, 0), 0);
	assert_int_equal(epoll_wait(epfd, got, 4, 50), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);

	send_seq(&f.tx, ep.addr, 0);
	assert_int_equal(epoll_wait(epfd, got, 4, 10000), 1);
	assert_true(got[0].events & EPOLLIN);
	assert_int_equal(got[0].data.u64, 0x5eed);
	assert_int_equal(poll(&pfd, 1, 0), 1);
	assert_true(pfd.revents & POLLIN);

	/* taken: nothing queued, not readable (level-triggered) */
	assert_int_equal(clanq_evq_poll(&f.evq, &ev), 0);
	assert_int_equal(ev.reg, reg);
	assert_int_equal(epoll_wait(epfd, got, 4, 0), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	drain(&ep, f.tx.addr, 0, 1);

	/* and readable again for the next one */
	send_seq(&f.tx, ep.addr, 1);
	assert_int_equal(epoll_wait(epfd, got, 4, 10000), 1);
	assert_int_equal(clanq_evq_poll(&f.evq, &ev), 0);
	drain(&ep, f.tx.addr, 1, 1);
	assert_int_equal(epoll_wait(epfd, got, 4, 0), 0);

	close(epfd);
	fix_close_ep(&f, &ep);
}

/*
 * One server, one evq, 1000 endpoints; three client processes.
 *
 * Where each message goes is planned before the clients start, so that
 * no endpoint is ever sent more than its queue holds (FANIN_SLOTS - 1):
 * a drop is then a bug, not bad luck. Half the messages go to a few
 * "hot" endpoints, so that events collapse and queues hold several
 * messages from several clients at once.
 */

#define FANIN_EPS	1000
#define FANIN_CLIENTS	3
#define FANIN_MSGS	300
#define FANIN_TOTAL	(FANIN_CLIENTS * FANIN_MSGS)
#define FANIN_SLOTS	16
#define FANIN_HOT	32
#define FANIN_TYPE	(CLANQ_OOB_TYPE_USER + 9)
#define FANIN_COOKIE	0xfa00000000000000ull

struct fanin_plan {
	struct clanq_addr server[FANIN_EPS];
	uint16_t dest[FANIN_CLIENTS][FANIN_MSGS];
	uint64_t client[FANIN_CLIENTS];	/* packed address, once published */
};

struct fanin_args {
	struct fanin_plan *plan;
	unsigned int c;
};

static void fanin_client(void *arg)
{
	struct fanin_args *a = arg;
	struct fanin_plan *plan = a->plan;
	struct clanq_dev dev;
	struct clanq_ep ep;
	unsigned int s;

	CHILD_CHECK_INT(clanq_open_nic(&dev, a->c % 2), 0);
	CHILD_CHECK_INT(clanq_ep_create(&dev, &ep, 8), 0);
	__atomic_store_n(&plan->client[a->c], itest_addr_pack(ep.addr),
			 __ATOMIC_RELEASE);
	for (s = 0; s < FANIN_MSGS; s++)
		CHILD_CHECK_INT(itest_send(&ep,
					   plan->server[plan->dest[a->c][s]],
					   FANIN_TYPE, a->c, s), 0);
	CHILD_CHECK_INT(itest_ctr(&ep.counters->oob_sent), FANIN_MSGS);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

/* Reap clients that are done; return how many are still running. */
static unsigned int fanin_reap(pid_t *pids, int *status)
{
	unsigned int c, running = 0;

	for (c = 0; c < FANIN_CLIENTS; c++) {
		if (!pids[c])
			continue;
		if (waitpid(pids[c], &status[c], WNOHANG) == pids[c]) {
			itest_forget(pids[c]);
			pids[c] = 0;
		} else {
			running++;
		}
	}
	return running;
}

static void a_1000_endpoint_server_gets_every_message_of_3_clients_exactly_once(void **state)
{
	static struct clanq_ep eps[FANIN_EPS];
	static int regs[FANIN_EPS];
	static uint32_t planned[FANIN_EPS], got[FANIN_EPS];
	uint64_t seen[(FANIN_TOTAL + 63) / 64];
	uint64_t reg_used[(FANIN_EPS + 63) / 64];
	struct fanin_args args[FANIN_CLIENTS];
	pid_t pids[FANIN_CLIENTS];
	int status[FANIN_CLIENTS];
	struct fanin_plan *plan;
	struct clanq_oob_msg m;
	struct clanq_event ev = { 0 };
	struct clanq_dev dev;
	struct clanq_evq evq;
	unsigned int i, c, s, received = 0, events = 0, targets = 0, quiet = 0;
	uint64_t rnd = itest_seed("fan-in");
	uint64_t deadline;
	const char *why;
	int r;

	(void)state;
	memset(seen, 0, sizeof(seen));
	memset(reg_used, 0, sizeof(reg_used));
	memset(planned, 0, sizeof(planned));
	memset(got, 0, sizeof(got));
	plan = mmap(NULL, sizeof(*plan), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(plan != MAP_FAILED);

	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_evq_create(&dev, &evq, FANIN_EPS), 0);
	for (i = 0; i < FANIN_EPS; i++) {
		assert_int_equal(clanq_ep_create(&dev, &eps[i], FANIN_SLOTS), 0);
		regs[i] = do_register(&evq, &eps[i], FANIN_COOKIE | i);
		assert_true(regs[i] < FANIN_EPS);
		assert_false(reg_used[regs[i] / 64] & 1ull << (regs[i] % 64));
		reg_used[regs[i] / 64] |= 1ull << (regs[i] % 64);
		plan->server[i] = eps[i].addr;
	}
	for (c = 0; c < FANIN_CLIENTS; c++) {
		for (s = 0; s < FANIN_MSGS; s++) {
			do {
				uint64_t x = itest_rand(&rnd);

				i = x & 1 ? (x >> 1) % FANIN_HOT
					  : (x >> 1) % FANIN_EPS;
			} while (planned[i] == FANIN_SLOTS - 1);
			targets += !planned[i]++;
			plan->dest[c][s] = (uint16_t)i;
		}
	}

	for (c = 0; c < FANIN_CLIENTS; c++) {
		args[c].plan = plan;
		args[c].c = c;
		pids[c] = itest_fork(fanin_client, &args[c]);
		assert_true(pids[c] > 0);
	}

	deadline = clanq_now_ns() + 60 * ITEST_NS_PER_S;
	while (received < FANIN_TOTAL && clanq_now_ns() < deadline) {
		r = clanq_evq_wait(&evq, &ev, 2 * ITEST_NS_PER_S);
		if (r == -EINTR)
			continue;
		if (r == -ETIMEDOUT) {
			/* all clients gone and still nothing: give up */
			if (!fanin_reap(pids, status) && ++quiet >= 2)
				break;
			continue;
		}
		assert_int_equal(r, 0);
		events++;
		assert_int_equal(ev.events, CLANQ_EV_OOB);
		assert_int_equal(ev.cookie & ~0xffffull, FANIN_COOKIE);
		i = ev.cookie & 0xffff;
		assert_true(i < FANIN_EPS);
		assert_int_equal(ev.reg, regs[i]);
		while (clanq_oob_recv(&eps[i], &m) == 0) {
			struct clanq_addr src;

			c = itest_tag(&m);
			s = itest_seq(&m);
			assert_true(c < FANIN_CLIENTS);
			assert_true(s < FANIN_MSGS);
			src = itest_addr_unpack(__atomic_load_n(&plan->client[c],
								__ATOMIC_ACQUIRE));
			why = itest_check(&m, src, FANIN_TYPE, c, s);
			if (why)
				fail_msg("client %u message %u: %s", c, s, why);
			/* arrived where it was sent */
			assert_int_equal(plan->dest[c][s], i);
			/* and only once */
			assert_false(seen[(c * FANIN_MSGS + s) / 64] &
				     1ull << ((c * FANIN_MSGS + s) % 64));
			seen[(c * FANIN_MSGS + s) / 64] |=
				1ull << ((c * FANIN_MSGS + s) % 64);
			got[i]++;
			received++;
		}
	}

	for (c = 0; c < FANIN_CLIENTS; c++) {
		if (pids[c])
			status[c] = itest_wait(pids[c], ITEST_RECV_TIMEOUT);
		assert_true(itest_status_ok(status[c], "client"));
	}
	assert_int_equal(received, FANIN_TOTAL);
	for (i = 0; i < FANIN_EPS; i++) {
		assert_int_equal(got[i], planned[i]);
		assert_int_equal(itest_ctr(&eps[i].counters->oob_delivered),
				 planned[i]);
		assert_int_equal(clanq_ep_dropped(&eps[i]), 0);
	}
	/* one event per message at most; every endpoint sent to raised one */
	assert_true(events >= targets);
	assert_true(events <= FANIN_TOTAL);
	/* what is left are late duplicates with nothing behind them */
	while (!clanq_evq_poll(&evq, &ev)) {
		i = ev.cookie & 0xffff;
		assert_true(i < FANIN_EPS);
		assert_int_equal(clanq_oob_recv(&eps[i], &m), -EAGAIN);
	}

	for (i = 0; i < FANIN_EPS; i++)
		assert_int_equal(clanq_ep_destroy(&eps[i]), 0);
	assert_int_equal(clanq_evq_destroy(&evq), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(plan, sizeof(*plan));
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(each_endpoint_raises_one_event_carrying_its_cookie),
		T(messages_arriving_before_the_event_is_taken_raise_no_second_event),
		T(a_message_arriving_after_the_event_was_taken_raises_a_new_one),
		T(registering_an_endpoint_that_holds_messages_raises_an_event_at_once),
		T(a_blocked_wait_wakes_when_another_process_sends),
		T(a_wait_without_an_event_returns_etimedout_after_its_timeout),
		T(a_signal_interrupts_a_blocked_wait_with_eintr),
		T(the_evq_fd_is_readable_in_epoll_only_while_an_event_is_queued),
		T(a_1000_endpoint_server_gets_every_message_of_3_clients_exactly_once),
	};

	return cmocka_run_group_tests_name("evq_delivery", tests, NULL, NULL);
}
