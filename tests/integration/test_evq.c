// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The unified event queue through the real driver: one event per
 * registration until it is taken, cookies, registration on arrival,
 * blocking waits (woken, timed out, interrupted), the evq fd in epoll, a
 * server fed by several client processes, every malformed request
 * refused, a hostile owner of the shared ring, and the central promise:
 * taking events and messages makes no system call at all, shown with the
 * driver's own entry counter and under seccomp strict mode.
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

#define TAG		0x65767121u

/*
 * An evq and its endpoints in one context on node 0; a sender in another
 * context on node 1.
 */
struct fix {
	struct clanq_dev dev;
	struct clanq_dev tx_dev;
	struct clanq_evq evq;
	struct clanq_ep tx;
};

static void fix_open(struct fix *f, unsigned int max_regs)
{
	assert_int_equal(clanq_open_nic(&f->dev, 0), 0);
	assert_int_equal(clanq_open_nic(&f->tx_dev, 1), 0);
	assert_int_equal(clanq_evq_create(&f->dev, &f->evq, max_regs), 0);
	assert_int_equal(clanq_ep_create(&f->tx_dev, &f->tx, 0), 0);
}

static void fix_close(struct fix *f)
{
	assert_int_equal(clanq_ep_destroy(&f->tx), 0);
	assert_int_equal(clanq_evq_destroy(&f->evq), 0);
	assert_int_equal(clanq_close(&f->tx_dev), 0);
	assert_int_equal(clanq_close(&f->dev), 0);
}

static void send_seq(struct clanq_ep *from, struct clanq_addr dst, __u32 seq)
{
	assert_int_equal(itest_send(from, dst, ITEST_TYPE, TAG, seq), 0);
}

static int do_register(struct clanq_evq *evq, struct clanq_ep *ep,
		       __u64 cookie)
{
	int reg = clanq_evq_register(evq, ep, CLANQ_EV_OOB, cookie);

	assert_true(reg >= 0);
	return reg;
}

/*
 * The usual fixture: an evq for 4 registrations, and one endpoint of 16
 * slots registered on it with cookie. Return: its registration index.
 */
static int fix_open_ep(struct fix *f, struct clanq_ep *ep, __u64 cookie)
{
	fix_open(f, 4);
	assert_int_equal(clanq_ep_create(&f->dev, ep, 16), 0);
	return do_register(&f->evq, ep, cookie);
}

/* The endpoint first, then the fixture. */
static void fix_close_ep(struct fix *f, struct clanq_ep *ep)
{
	assert_int_equal(clanq_ep_destroy(ep), 0);
	fix_close(f);
}

/* the next event, within ITEST_RECV_TIMEOUT */
static void take_event(struct clanq_evq *evq, struct clanq_event *ev)
{
	assert_int_equal(clanq_evq_wait(evq, ev, ITEST_RECV_TIMEOUT), 0);
	assert_int_equal(ev->events, CLANQ_EV_OOB);
}

static void take_event_of(struct clanq_evq *evq, int reg, __u64 cookie)
{
	struct clanq_event ev = { 0 };

	take_event(evq, &ev);
	assert_int_equal(ev.cookie, cookie);
	assert_int_equal(ev.reg, reg);
}

static void expect_no_event(struct clanq_evq *evq)
{
	struct clanq_event ev = { 0 };
	int r = clanq_evq_wait(evq, &ev, ITEST_QUIET_NS);

	if (r == 0)
		fail_msg("unexpected event: reg %u, events %#x, cookie %#llx",
			 ev.reg, ev.events, (unsigned long long)ev.cookie);
	assert_int_equal(r, -ETIMEDOUT);
}

/* Take exactly n messages, seq first.., from src; then the queue is empty. */
static void drain(struct clanq_ep *ep, struct clanq_addr src, __u32 first,
		  unsigned int n)
{
	struct clanq_oob_msg m;
	const char *why;
	unsigned int i;

	for (i = 0; i < n; i++) {
		assert_int_equal(clanq_oob_recv(ep, &m), 0);
		why = itest_check(&m, src, ITEST_TYPE, TAG, first + i);
		if (why)
			fail_msg("message %u: %s", first + i, why);
	}
	assert_int_equal(clanq_oob_recv(ep, &m), -EAGAIN);
}

static void set_pending(struct clanq_evq *evq, __u64 v)
{
	__u32 w;

	for (w = 0; w < evq->nr_words; w++)
		__atomic_store_n(&evq->pending[w], v, __ATOMIC_SEQ_CST);
}

/*
 * Delivery.
 */

static void each_endpoint_raises_one_event_carrying_its_cookie(void **state)
{
	static const __u64 cookies[3] = {
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
	__u32 i;

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
	__u64 q, e0, e1;
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
	__u16 dest[FANIN_CLIENTS][FANIN_MSGS];
	__u64 client[FANIN_CLIENTS];	/* packed address, once published */
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
	static __u32 planned[FANIN_EPS], got[FANIN_EPS];
	__u64 seen[(FANIN_TOTAL + 63) / 64];
	__u64 reg_used[(FANIN_EPS + 63) / 64];
	struct fanin_args args[FANIN_CLIENTS];
	pid_t pids[FANIN_CLIENTS];
	int status[FANIN_CLIENTS];
	struct fanin_plan *plan;
	struct clanq_oob_msg m;
	struct clanq_event ev = { 0 };
	struct clanq_dev dev;
	struct clanq_evq evq;
	unsigned int i, c, s, received = 0, events = 0, targets = 0, quiet = 0;
	__u64 rnd = itest_seed("fan-in");
	__u64 deadline;
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
				__u64 x = itest_rand(&rnd);

				i = x & 1 ? (x >> 1) % FANIN_HOT
					  : (x >> 1) % FANIN_EPS;
			} while (planned[i] == FANIN_SLOTS - 1);
			targets += !planned[i]++;
			plan->dest[c][s] = (__u16)i;
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

/*
 * Malformed requests on the context fd (EVQ_CREATE) and the evq fd.
 */

static int raw_evq_create(int fd, __u32 max_regs, struct clanq_ioc_evq_create *c)
{
	memset(c, 0, sizeof(*c));
	c->max_regs = max_regs;
	return itest_ioctl_err(fd, CLANQ_IOC_EVQ_CREATE, c);
}

static void evq_create_refuses_bad_max_regs_flags_and_reserved_fields(void **state)
{
	static const __u32 bad[] = { 0, 1u << 30, 0x80000000u, 0xffffffffu };
	static const __u32 good[] = { 1, 64, 65, 1000 };
	struct clanq_ioc_evq_create c;
	struct clanq_evq evq;
	struct clanq_dev dev;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(raw_evq_create(dev.fd, bad[i], &c), EINVAL);
	memset(&c, 0, sizeof(c));
	c.max_regs = 4;
	c.flags = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EVQ_CREATE, &c),
			 EINVAL);
	memset(&c, 0, sizeof(c));
	c.max_regs = 4;
	c.reserved0 = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EVQ_CREATE, &c),
			 EINVAL);
	for (i = 0; i < ARRAY_SIZE(c.reserved); i++) {
		memset(&c, 0, sizeof(c));
		c.max_regs = 4;
		c.reserved[i] = 1ull << (i * 23 % 64);
		assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EVQ_CREATE,
						 &c), EINVAL);
	}

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(raw_evq_create(dev.fd, good[i], &c), 0);
		assert_true(c.fd >= 0);
		assert_true(c.nr_words >= (good[i] + 63) / 64);
		assert_true(c.ring.nr_slots >= 2);
		assert_true(c.ring.slot_size >= sizeof(struct clanq_event));
		assert_true(c.mmap_size >= (__u64)c.ring.slots +
					   (__u64)c.ring.nr_slots * c.ring.slot_size);
		assert_true(c.mmap_size >= (__u64)c.pending + c.nr_words * 8ull);
		assert_int_equal(close(c.fd), 0);
	}
	assert_int_equal(clanq_evq_create(&dev, &evq, 0), -EINVAL);
	assert_int_equal(clanq_close(&dev), 0);
}

static void evq_register_refuses_bad_masks_reserved_fields_and_foreign_endpoints(void **state)
{
	static const __u32 bad_events[] = {
		0, 1u << 3, 1u << 31, CLANQ_EV_OOB | 1u << 7,
	};
	struct clanq_ioc_evq_reg good, r;
	struct clanq_dev other_dev;
	struct clanq_ep ep, other;
	struct fix f;
	unsigned int i;
	int fd, reg;

	(void)state;
	fix_open(&f, 4);
	fd = clanq_evq_fd(&f.evq);
	assert_int_equal(clanq_ep_create(&f.dev, &ep, 16), 0);
	/* another context of the same node: a distinct, valid id there */
	assert_int_equal(clanq_open_nic(&other_dev, 0), 0);
	assert_int_equal(clanq_ep_create(&other_dev, &other, 16), 0);

	memset(&good, 0, sizeof(good));
	good.ep = ep.addr.id;
	good.events = CLANQ_EV_OOB;
	good.cookie = 1;

	for (i = 0; i < ARRAY_SIZE(bad_events); i++) {
		r = good;
		r.events = bad_events[i];
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r),
				 EINVAL);
	}
	r = good;
	r.flags = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), EINVAL);
	for (i = 0; i < ARRAY_SIZE(r.reserved); i++) {
		r = good;
		r.reserved[i] = 1ull << (i * 29 % 64);
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r),
				 EINVAL);
	}
	r = good;
	r.ep = other.addr.id;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), ENOENT);
	r.ep = 0;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), ENOENT);
	r.ep = 0xffffffffu;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), ENOENT);
	assert_int_equal(clanq_evq_register(&f.evq, &other, CLANQ_EV_OOB, 1),
			 -ENOENT);

	/* none of those registered anything: one event, the good one's */
	reg = do_register(&f.evq, &ep, 2);
	send_seq(&f.tx, ep.addr, 0);
	send_seq(&f.tx, other.addr, 0);
	take_event_of(&f.evq, reg, 2);
	expect_no_event(&f.evq);
	drain(&ep, f.tx.addr, 0, 1);
	drain(&other, f.tx.addr, 0, 1);

	assert_int_equal(clanq_ep_destroy(&other), 0);
	assert_int_equal(clanq_close(&other_dev), 0);
	fix_close_ep(&f, &ep);
}

static int raw_unregister(int fd, __u32 reg, __u32 flags, __u64 reserved0)
{
	struct clanq_ioc_evq_reg r;

	memset(&r, 0, sizeof(r));
	r.reg = reg;
	r.flags = flags;
	r.reserved[0] = reserved0;
	return itest_ioctl_err(fd, CLANQ_IOC_EVQ_UNREGISTER, &r);
}

static void evq_unregister_refuses_indexes_that_are_not_registered(void **state)
{
	static const __u32 out_of_range[] = { 4, 64, 1000, 0xffffffffu };
	struct clanq_ep ep;
	struct fix f;
	unsigned int i;
	int fd, reg, err;

	(void)state;
	reg = fix_open_ep(&f, &ep, 5);
	fd = clanq_evq_fd(&f.evq);
	assert_true(reg < 4);

	assert_int_equal(raw_unregister(fd, (reg + 1) % 4, 0, 0), ENOENT);
	for (i = 0; i < ARRAY_SIZE(out_of_range); i++) {
		err = raw_unregister(fd, out_of_range[i], 0, 0);
		assert_true(err == EINVAL || err == ENOENT);
	}
	assert_int_equal(raw_unregister(fd, reg, 1, 0), EINVAL);
	assert_int_equal(raw_unregister(fd, reg, 0, 1), EINVAL);
	err = clanq_evq_unregister(&f.evq, -1);
	assert_true(err == -EINVAL || err == -ENOENT);

	/* still registered after all that */
	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 5);
	drain(&ep, f.tx.addr, 0, 1);

	assert_int_equal(clanq_evq_unregister(&f.evq, reg), 0);
	assert_int_equal(clanq_evq_unregister(&f.evq, reg), -ENOENT);
	/* gone: messages still arrive, events do not */
	send_seq(&f.tx, ep.addr, 1);
	expect_no_event(&f.evq);
	assert_true(itest_wait_arrivals(&ep, 2));
	drain(&ep, f.tx.addr, 1, 1);

	fix_close_ep(&f, &ep);
}

static void an_evq_holds_max_regs_registrations_then_refuses_with_enospc(void **state)
{
	struct clanq_ep eps[3];
	struct fix f;
	int r0, r1, r2;
	unsigned int i;

	(void)state;
	fix_open(&f, 2);
	for (i = 0; i < 3; i++)
		assert_int_equal(clanq_ep_create(&f.dev, &eps[i], 16), 0);
	r0 = do_register(&f.evq, &eps[0], 100);
	r1 = do_register(&f.evq, &eps[1], 101);
	assert_true(r0 < 2 && r1 < 2 && r0 != r1);
	assert_int_equal(clanq_evq_register(&f.evq, &eps[2], CLANQ_EV_OOB, 102),
			 -ENOSPC);

	assert_int_equal(clanq_evq_unregister(&f.evq, r0), 0);
	r2 = do_register(&f.evq, &eps[2], 102);
	assert_true(r2 < 2 && r2 != r1);

	send_seq(&f.tx, eps[0].addr, 0);	/* unregistered: no event */
	send_seq(&f.tx, eps[2].addr, 0);
	take_event_of(&f.evq, r2, 102);
	expect_no_event(&f.evq);
	drain(&eps[2], f.tx.addr, 0, 1);
	assert_true(itest_wait_arrivals(&eps[0], 1));
	drain(&eps[0], f.tx.addr, 0, 1);

	for (i = 0; i < 3; i++)
		assert_int_equal(clanq_ep_destroy(&eps[i]), 0);
	fix_close(&f);
}

static void destroying_an_endpoint_removes_its_registration(void **state)
{
	struct clanq_ep gone, kept;
	struct fix f;
	int r0, r1;

	(void)state;
	fix_open(&f, 1);
	assert_int_equal(clanq_ep_create(&f.dev, &gone, 16), 0);
	assert_int_equal(clanq_ep_create(&f.dev, &kept, 16), 0);
	r0 = do_register(&f.evq, &gone, 10);
	assert_int_equal(clanq_ep_destroy(&gone), 0);

	assert_int_equal(raw_unregister(clanq_evq_fd(&f.evq), r0, 0, 0), ENOENT);
	/* its place is free again (max_regs is 1) */
	r1 = do_register(&f.evq, &kept, 11);
	send_seq(&f.tx, kept.addr, 0);
	take_event_of(&f.evq, r1, 11);
	drain(&kept, f.tx.addr, 0, 1);

	assert_int_equal(clanq_ep_destroy(&kept), 0);
	fix_close(&f);
}

static void closing_an_evq_leaves_its_endpoints_working(void **state)
{
	struct clanq_evq evq2;
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	int reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 1);
	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 1);

	/* closed with a live registration */
	assert_int_equal(clanq_evq_destroy(&f.evq), 0);
	send_seq(&f.tx, ep.addr, 1);
	send_seq(&f.tx, ep.addr, 2);
	assert_true(itest_wait_arrivals(&ep, 3));
	drain(&ep, f.tx.addr, 0, 3);

	/* a new evq picks the endpoint up, queued message and all */
	send_seq(&f.tx, ep.addr, 3);
	assert_true(itest_wait_arrivals(&ep, 4));
	assert_int_equal(clanq_evq_create(&f.dev, &evq2, 4), 0);
	reg = do_register(&evq2, &ep, 2);
	assert_int_equal(clanq_evq_poll(&evq2, &ev), 0);
	assert_int_equal(ev.cookie, 2);
	assert_int_equal(ev.reg, reg);
	drain(&ep, f.tx.addr, 3, 1);

	f.evq = evq2;		/* fix_close() destroys it */
	fix_close_ep(&f, &ep);
}

static void evq_wait_refuses_a_read_index_outside_the_ring(void **state)
{
	struct clanq_ioc_evq_wait w, good;
	struct clanq_ep ep;
	struct fix f;
	unsigned int i;
	__u32 nr;
	int fd, reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 3);
	fd = clanq_evq_fd(&f.evq);
	nr = f.evq.ring.mask + 1;

	memset(&good, 0, sizeof(good));
	good.timeout_ns = 0;
	good.read_i = f.evq.ring.own;

	w = good;
	w.read_i = nr;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	w.read_i = 2 * nr - 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	w.read_i = 0xffffffffu;
	w.timeout_ns = ITEST_NS_PER_S;	/* refused, so never sleeps */
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	w = good;
	w.flags = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	for (i = 0; i < ARRAY_SIZE(w.reserved); i++) {
		w = good;
		w.reserved[i] = 1ull << (i * 37 % 64);
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w),
				 EINVAL);
	}

	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 3);
	drain(&ep, f.tx.addr, 0, 1);
	fix_close_ep(&f, &ep);
}

static void an_evq_maps_only_whole_and_from_offset_0(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct clanq_ioc_evq_create c;
	struct clanq_dev dev;
	size_t size;
	void *p;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(raw_evq_create(dev.fd, 64, &c), 0);
	size = (size_t)c.mmap_size;
	assert_int_equal(size % page, 0);

	p = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd, 0);
	assert_true(p == MAP_FAILED);
	assert_int_equal(errno, EINVAL);
	if (size > page) {
		p = mmap(NULL, size - page, PROT_READ | PROT_WRITE, MAP_SHARED,
			 c.fd, 0);
		assert_true(p == MAP_FAILED);
		assert_int_equal(errno, EINVAL);
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd,
		 (off_t)page);
	assert_true(p == MAP_FAILED);
	assert_int_equal(errno, EINVAL);

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(munmap(p, size), 0);
	assert_int_equal(close(c.fd), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

/*
 * A hostile owner of the evq segment.
 */

static void scribbled_pending_bits_and_ring_indexes_cannot_hurt_the_kernel(void **state)
{
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	__u32 nr, i, n;
	__u64 sent = 0;
	int reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 0x5c);
	nr = f.evq.ring.mask + 1;

	/* every bit set: the driver takes every event as pending already */
	set_pending(&f.evq, ~0ull);
	for (i = 0; i < 3; i++)
		send_seq(&f.tx, ep.addr, (__u32)sent++);
	assert_true(itest_wait_arrivals(&ep, sent));
	expect_no_event(&f.evq);
	drain(&ep, f.tx.addr, 0, 3);

	/*
	 * Bits cleared behind the driver's back and events never taken:
	 * more events than the ring holds are attempted, and the ring
	 * keeps what fits and not one more.
	 */
	for (i = 0; i < nr + 16; i++) {
		set_pending(&f.evq, 0);
		send_seq(&f.tx, ep.addr, (__u32)sent);
		assert_true(itest_wait_arrivals(&ep, ++sent));
		drain(&ep, f.tx.addr, (__u32)sent - 1, 1);
	}
	for (n = 0; n <= nr && !clanq_evq_poll(&f.evq, &ev); n++) {
		assert_int_equal(ev.reg, reg);
		assert_int_equal(ev.cookie, 0x5c);
	}
	assert_true(n >= 1);
	assert_true(n <= nr - 1);

	/* garbage in both index words: sends go on, the kernel survives */
	itest_store_u32(f.evq.ring.prod, 0xffffffffu);
	itest_store_u32(f.evq.ring.cons, 0xffffffffu);
	for (i = 0; i < 4; i++) {
		set_pending(&f.evq, 0);
		send_seq(&f.tx, ep.addr, (__u32)sent);
		assert_true(itest_wait_arrivals(&ep, ++sent));
		drain(&ep, f.tx.addr, (__u32)sent - 1, 1);
	}

	/* the consumer's index restored, bits cleared: working again */
	itest_store_u32(f.evq.ring.cons, f.evq.ring.own);
	for (n = 0; n <= nr && !clanq_evq_poll(&f.evq, &ev); n++)
		;
	set_pending(&f.evq, 0);
	send_seq(&f.tx, ep.addr, (__u32)sent);
	take_event_of(&f.evq, reg, 0x5c);
	drain(&ep, f.tx.addr, (__u32)sent, 1);
	sent++;
	send_seq(&f.tx, ep.addr, (__u32)sent);
	take_event_of(&f.evq, reg, 0x5c);
	drain(&ep, f.tx.addr, (__u32)sent, 1);

	fix_close_ep(&f, &ep);
}

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
	__u64 q, e0, e1, e2, e3;
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
	__u32 received;
	__u32 events;
	__u32 bad_events;
	__u32 bad_msgs;
	__u64 dropped;
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
		    ev.reg != (__u32)reg)
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
		T(each_endpoint_raises_one_event_carrying_its_cookie),
		T(messages_arriving_before_the_event_is_taken_raise_no_second_event),
		T(a_message_arriving_after_the_event_was_taken_raises_a_new_one),
		T(registering_an_endpoint_that_holds_messages_raises_an_event_at_once),
		T(a_blocked_wait_wakes_when_another_process_sends),
		T(a_wait_without_an_event_returns_etimedout_after_its_timeout),
		T(a_signal_interrupts_a_blocked_wait_with_eintr),
		T(the_evq_fd_is_readable_in_epoll_only_while_an_event_is_queued),
		T(a_1000_endpoint_server_gets_every_message_of_3_clients_exactly_once),
		T(evq_create_refuses_bad_max_regs_flags_and_reserved_fields),
		T(evq_register_refuses_bad_masks_reserved_fields_and_foreign_endpoints),
		T(evq_unregister_refuses_indexes_that_are_not_registered),
		T(an_evq_holds_max_regs_registrations_then_refuses_with_enospc),
		T(destroying_an_endpoint_removes_its_registration),
		T(closing_an_evq_leaves_its_endpoints_working),
		T(evq_wait_refuses_a_read_index_outside_the_ring),
		T(an_evq_maps_only_whole_and_from_offset_0),
		T(scribbled_pending_bits_and_ring_indexes_cannot_hurt_the_kernel),
		T(polling_endpoints_and_the_evq_never_enters_the_driver),
		T(polling_endpoints_and_the_evq_works_in_seccomp_strict_mode),
	};

	return cmocka_run_group_tests_name("evq", tests, NULL, NULL);
}
