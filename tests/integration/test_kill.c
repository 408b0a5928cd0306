// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Processes killed at random points while others keep working.
 *
 * A steady pair (node 0 <-> node 1) ping-pongs OOB messages for the whole
 * run, sleeping in its evqs between messages, and checks every message.
 * Meanwhile a series of victims each open contexts on both NICs, create
 * endpoints and evqs, register, send among themselves and to two sink
 * endpoints, wait, tear down in several ways (or not at all), and start
 * again, until a SIGKILL after 0-20 ms catches them wherever they are:
 * in an ioctl, an mmap, a blocking wait, or the middle of a teardown.
 * While a victim runs, the test also sends to the victim's endpoints, so
 * deliveries race with their destruction. The steady pair must finish
 * every round trip; every victim must die of the SIGKILL and of nothing
 * else. kmemleak and the kernel log are checked by the harness afterwards.
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
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

#define VICTIMS		30
#define MAX_DELAY_MS	20
#define VICTIM_EPS	4

#define STEADY_MIN	300		/* round trips, at least */
#define STEADY_MAX	1000000

#define TYPE_PING	(CLANQ_OOB_TYPE_USER + 1)
#define TYPE_PONG	(CLANQ_OOB_TYPE_USER + 2)
#define TYPE_STOP	(CLANQ_OOB_TYPE_USER + 3)
#define TAG_PING	0x70696e67u
#define TAG_PONG	0x706f6e67u
#define TAG_STOP	0x73746f70u
#define TAG_VICTIM	0x76696374u
#define TAG_PARENT	0x70726e74u

/* Shared by the parent, the steady pair and the victims. */
struct shared {
	uint64_t addr_a, addr_b;	/* packed, 0 until published */
	uint32_t rounds_a, rounds_b;	/* round trips completed */
	int stop;			/* set by the parent: finish up */
	uint64_t victim[VICTIM_EPS];	/* the current victim's endpoints */
};

static uint64_t wait_published(const uint64_t *w)
{
	uint64_t end = clanq_now_ns() + ITEST_RECV_TIMEOUT;
	uint64_t v;

	while (!(v = __atomic_load_n(w, __ATOMIC_ACQUIRE))) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("the peer never published its address");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	return v;
}

/*
 * The next message on ep, sleeping in the evq while the queue is empty.
 * The queue is always looked at before sleeping, so a message is never
 * left behind a taken event.
 */
static int steady_recv(struct clanq_evq *evq, struct clanq_ep *ep,
		       struct clanq_oob_msg *m)
{
	uint64_t end = clanq_now_ns() + ITEST_RECV_TIMEOUT;
	struct clanq_event ev;
	int r;

	while (clanq_oob_recv(ep, m) != 0) {
		int64_t left = end - clanq_now_ns();

		if (left <= 0)
			return -ETIMEDOUT;
		r = clanq_evq_wait(evq, &ev, left);
		if (r < 0 && r != -EINTR && r != -ETIMEDOUT)
			return r;
		if (r == 0 && (ev.cookie != ep->addr.id ||
			       ev.events != CLANQ_EV_OOB))
			CHILD_FAIL("event for cookie %llu, events %#x",
				   (unsigned long long)ev.cookie, ev.events);
	}
	return 0;
}

struct steady {
	struct clanq_dev dev;
	struct clanq_evq evq;
	struct clanq_ep ep;
};

/*
 * Open one side of the pair on node nic, publish its address in *mine and
 * return the peer's, once it is published in *theirs.
 */
static struct clanq_addr steady_open(struct steady *s, unsigned int nic,
				     uint64_t *mine, const uint64_t *theirs)
{
	CHILD_CHECK_INT(clanq_open_nic(&s->dev, nic), 0);
	CHILD_CHECK_INT(clanq_ep_create(&s->dev, &s->ep, 16), 0);
	CHILD_CHECK_INT(clanq_evq_create(&s->dev, &s->evq, 4), 0);
	CHILD_CHECK(clanq_evq_register(&s->evq, &s->ep, CLANQ_EV_OOB,
				       s->ep.addr.id) >= 0);
	__atomic_store_n(mine, itest_addr_pack(s->ep.addr), __ATOMIC_RELEASE);
	return itest_addr_unpack(wait_published(theirs));
}

/* Close one side, which sent and received the counts given. */
static void steady_close(struct steady *s, uint64_t sent, uint64_t delivered)
{
	CHILD_CHECK_INT(itest_ctr(&s->ep.counters->oob_sent), sent);
	CHILD_CHECK_INT(itest_ctr(&s->ep.counters->oob_delivered), delivered);
	CHILD_CHECK_INT(clanq_ep_dropped(&s->ep), 0);
	CHILD_CHECK_INT(clanq_evq_destroy(&s->evq), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&s->ep), 0);
	CHILD_CHECK_INT(clanq_close(&s->dev), 0);
}

/* node 0: pings until told to stop (and STEADY_MIN at least) */
static void steady_a(void *arg)
{
	struct shared *sh = arg;
	struct clanq_oob_msg m;
	struct clanq_addr b;
	struct steady s;
	const char *why;
	uint32_t seq;

	b = steady_open(&s, 0, &sh->addr_a, &sh->addr_b);
	for (seq = 0; seq < STEADY_MAX; seq++) {
		if (seq >= STEADY_MIN &&
		    __atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE))
			break;
		CHILD_CHECK_INT(itest_send(&s.ep, b, TYPE_PING, TAG_PING, seq),
				0);
		CHILD_CHECK_INT(steady_recv(&s.evq, &s.ep, &m), 0);
		why = itest_check(&m, b, TYPE_PONG, TAG_PONG, seq);
		if (why)
			CHILD_FAIL("pong %u: %s", seq, why);
		__atomic_store_n(&sh->rounds_a, seq + 1, __ATOMIC_RELEASE);
	}
	CHILD_CHECK_INT(itest_send(&s.ep, b, TYPE_STOP, TAG_STOP, seq), 0);
	steady_close(&s, seq + 1, seq);
}

/* node 1: answers every ping, until the stop message */
static void steady_b(void *arg)
{
	struct shared *sh = arg;
	struct clanq_oob_msg m;
	struct clanq_addr a;
	struct steady s;
	const char *why;
	uint32_t seq;

	a = steady_open(&s, 1, &sh->addr_b, &sh->addr_a);
	for (seq = 0;; seq++) {
		CHILD_CHECK_INT(steady_recv(&s.evq, &s.ep, &m), 0);
		if (m.type == TYPE_STOP) {
			why = itest_check(&m, a, TYPE_STOP, TAG_STOP, seq);
			if (why)
				CHILD_FAIL("stop after %u: %s", seq, why);
			break;
		}
		why = itest_check(&m, a, TYPE_PING, TAG_PING, seq);
		if (why)
			CHILD_FAIL("ping %u: %s", seq, why);
		CHILD_CHECK_INT(itest_send(&s.ep, a, TYPE_PONG, TAG_PONG, seq),
				0);
		__atomic_store_n(&sh->rounds_b, seq + 1, __ATOMIC_RELEASE);
	}
	steady_close(&s, seq, seq + 1);
}

/*
 * A victim: everything the API offers, over and over, until killed.
 */

struct victim_args {
	struct shared *sh;
	struct clanq_addr sink[2];
	uint64_t seed;
};

static void drain_ep(struct clanq_ep *ep)
{
	struct clanq_oob_msg m;

	while (clanq_oob_recv(ep, &m) == 0)
		CHILD_CHECK(m.type == ITEST_TYPE);
}

static void drain_events(struct clanq_evq *evq, struct clanq_ep *eps)
{
	struct clanq_event ev;

	while (!clanq_evq_poll(evq, &ev)) {
		CHILD_CHECK(ev.cookie < VICTIM_EPS);
		drain_ep(&eps[ev.cookie]);
	}
}

/* Teardown, endpoints first: then each node's evq and its context. */
static void destroy_eps_then_evqs(struct clanq_ep *eps, struct clanq_evq *evq,
				  struct clanq_dev *dev)
{
	unsigned int i, n;

	for (i = 0; i < VICTIM_EPS; i++)
		CHILD_CHECK_INT(clanq_ep_destroy(&eps[i]), 0);
	for (n = 0; n < 2; n++) {
		CHILD_CHECK_INT(clanq_evq_destroy(&evq[n]), 0);
		CHILD_CHECK_INT(clanq_close(&dev[n]), 0);
	}
}

static void victim(void *arg)
{
	struct victim_args *a = arg;
	uint64_t rnd = a->seed;
	/* one in four ends up asleep in a wait with no timeout */
	bool sleeper = itest_rand(&rnd) % 4 == 0;
	unsigned int iter;

	for (iter = 0;; iter++) {
		struct clanq_ep eps[VICTIM_EPS];
		struct clanq_dev dev[2];
		struct clanq_evq evq[2];
		struct clanq_event ev;
		int regs[VICTIM_EPS];
		unsigned int i, j, n;
		int r;

		for (n = 0; n < 2; n++) {
			CHILD_CHECK_INT(clanq_open_nic(&dev[n], n), 0);
			CHILD_CHECK_INT(clanq_evq_create(&dev[n], &evq[n], 4), 0);
		}
		/* endpoint i lives on node i % 2, and is evq[i % 2]'s */
		for (i = 0; i < VICTIM_EPS; i++) {
			n = i % 2;
			CHILD_CHECK_INT(clanq_ep_create(&dev[n], &eps[i],
							8u << (itest_rand(&rnd) % 3)),
					0);
			regs[i] = clanq_evq_register(&evq[n], &eps[i],
						     CLANQ_EV_OOB, i);
			CHILD_CHECK(regs[i] >= 0);
			__atomic_store_n(&a->sh->victim[i],
					 itest_addr_pack(eps[i].addr),
					 __ATOMIC_RELEASE);
		}
		for (i = 0; i < VICTIM_EPS; i++) {
			for (j = 0; j < VICTIM_EPS; j++)
				CHILD_CHECK_INT(itest_send(&eps[i], eps[j].addr,
							   ITEST_TYPE,
							   TAG_VICTIM, j), 0);
			CHILD_CHECK_INT(itest_send(&eps[i], a->sink[i % 2],
						   ITEST_TYPE, TAG_VICTIM, i), 0);
		}
		for (n = 0; n < 2; n++)
			drain_events(&evq[n], eps);

		if (sleeper) {
			/* woken by the parent's messages; killed in here */
			for (;;) {
				r = clanq_evq_wait(&evq[0], &ev, -1);
				CHILD_CHECK(r == 0 || r == -EINTR);
				if (r == 0) {
					CHILD_CHECK(ev.cookie < VICTIM_EPS);
					drain_ep(&eps[ev.cookie]);
					drain_events(&evq[0], eps);
				}
			}
		}
		r = clanq_evq_wait(&evq[iter % 2], &ev, ITEST_NS_PER_MS);
		CHILD_CHECK(r == 0 || r == -ETIMEDOUT);
		if (r == 0) {
			CHILD_CHECK(ev.cookie < VICTIM_EPS);
			drain_ep(&eps[ev.cookie]);
		}

		switch (iter % 3) {
		case 0:		/* everything, one by one */
			for (i = 0; i < VICTIM_EPS; i++)
				CHILD_CHECK_INT(clanq_evq_unregister(&evq[i % 2],
								     regs[i]), 0);
			destroy_eps_then_evqs(eps, evq, dev);
			break;
		case 1:		/* evqs first, with live registrations */
			for (n = 0; n < 2; n++)
				CHILD_CHECK_INT(clanq_evq_destroy(&evq[n]), 0);
			for (i = 0; i < VICTIM_EPS; i++)
				CHILD_CHECK_INT(clanq_ep_destroy(&eps[i]), 0);
			for (n = 0; n < 2; n++)
				CHILD_CHECK_INT(clanq_close(&dev[n]), 0);
			break;
		default:	/* nothing: left for the kill to clean up */
			if (iter < 9)
				break;
			/* (enough left over: endpoints first, registered) */
			destroy_eps_then_evqs(eps, evq, dev);
			break;
		}
	}
}

/* a victim must die of our SIGKILL, and of nothing else */
static bool killed_by_us(int status)
{
	if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		return true;
	itest_status_ok(status, "victim");
	return false;
}

static unsigned int sink_drain(struct clanq_ep *sink)
{
	struct clanq_oob_msg m;
	const char *why;
	unsigned int n = 0;

	while (clanq_oob_recv(sink, &m) == 0) {
		why = itest_check(&m, m.src, ITEST_TYPE, TAG_VICTIM,
				  itest_seq(&m));
		if (why)
			fail_msg("sink: message from %u:%u: %s", m.src.node,
				 m.src.id, why);
		n++;
	}
	return n;
}

static void a_steady_pair_completes_every_round_trip_while_other_processes_are_killed(void **state)
{
	struct clanq_dev sink_dev[2];
	struct clanq_ep sink[2];
	struct victim_args va;
	struct shared *sh;
	uint64_t rnd = itest_seed("kill");
	unsigned int v, i, n, sunk = 0, sent = 0;
	uint32_t rounds_before;
	uint64_t end;
	pid_t pid_a, pid_b, pid;
	int status;

	(void)state;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);

	/* the steady pair first: it inherits no context of ours */
	pid_a = itest_fork(steady_a, sh);
	assert_true(pid_a > 0);
	pid_b = itest_fork(steady_b, sh);
	assert_true(pid_b > 0);
	end = clanq_now_ns() + 20 * ITEST_NS_PER_S;
	while (__atomic_load_n(&sh->rounds_a, __ATOMIC_ACQUIRE) < 10) {
		assert_true(itest_still_running(pid_a, "steady a"));
		assert_true(itest_still_running(pid_b, "steady b"));
		assert_true(clanq_now_ns() < end);
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	rounds_before = __atomic_load_n(&sh->rounds_a, __ATOMIC_ACQUIRE);

	for (n = 0; n < 2; n++) {
		assert_int_equal(clanq_open_nic(&sink_dev[n], n), 0);
		assert_int_equal(clanq_ep_create(&sink_dev[n], &sink[n], 8), 0);
		va.sink[n] = sink[n].addr;
	}
	va.sh = sh;

	for (v = 0; v < VICTIMS; v++) {
		for (i = 0; i < VICTIM_EPS; i++)
			__atomic_store_n(&sh->victim[i], 0, __ATOMIC_RELEASE);
		va.seed = itest_rand(&rnd) | 1;
		pid = itest_fork(victim, &va);
		assert_true(pid > 0);

		end = clanq_now_ns() +
		      (int64_t)(itest_rand(&rnd) % (MAX_DELAY_MS + 1)) *
		      ITEST_NS_PER_MS;
		do {
			/* deliveries racing with the victim's teardowns */
			for (i = 0; i < VICTIM_EPS; i++) {
				uint64_t w = __atomic_load_n(&sh->victim[i],
							  __ATOMIC_ACQUIRE);

				if (!w)
					continue;
				assert_int_equal(itest_send(&sink[(i + v) % 2],
							    itest_addr_unpack(w),
							    ITEST_TYPE,
							    TAG_PARENT, sent++),
						 0);
			}
			for (n = 0; n < 2; n++)
				sunk += sink_drain(&sink[n]);
			itest_sleep_ns(ITEST_NS_PER_MS / 4);
		} while (clanq_now_ns() < end);

		kill(pid, SIGKILL);
		status = itest_wait(pid, ITEST_RECV_TIMEOUT);
		if (!killed_by_us(status))
			fail_msg("victim %u did not die of the SIGKILL", v);
		assert_true(itest_still_running(pid_a, "steady a"));
		assert_true(itest_still_running(pid_b, "steady b"));
	}
	for (n = 0; n < 2; n++)
		sunk += sink_drain(&sink[n]);

	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	assert_true(itest_status_ok(itest_wait(pid_a, 30 * ITEST_NS_PER_S),
				    "steady a"));
	assert_true(itest_status_ok(itest_wait(pid_b, 30 * ITEST_NS_PER_S),
				    "steady b"));
	assert_true(sh->rounds_a >= STEADY_MIN);
	assert_int_equal(sh->rounds_a, sh->rounds_b);
	printf("kill: %u victims killed\n", VICTIMS);
	printf("kill: steady pair: %u round trips, %u during the kills\n",
	       sh->rounds_a, sh->rounds_a - rounds_before);
	printf("kill: sinks took %u messages, %u sent to victims\n",
	       sunk, sent);

	for (n = 0; n < 2; n++) {
		assert_int_equal(clanq_ep_destroy(&sink[n]), 0);
		assert_int_equal(clanq_close(&sink_dev[n]), 0);
	}
	munmap(sh, sizeof(*sh));
}

static void new_contexts_work_on_both_nodes_after_the_kills(void **state)
{
	struct clanq_dev dev[2];
	struct clanq_evq evq[2];
	struct clanq_ep ep[2];
	struct clanq_oob_msg m;
	struct clanq_event ev;
	const char *why;
	unsigned int n;
	int reg[2];

	(void)state;
	for (n = 0; n < 2; n++) {
		assert_int_equal(clanq_open_nic(&dev[n], n), 0);
		assert_int_equal(clanq_ep_create(&dev[n], &ep[n], 0), 0);
		assert_int_equal(clanq_evq_create(&dev[n], &evq[n], 4), 0);
		reg[n] = clanq_evq_register(&evq[n], &ep[n], CLANQ_EV_OOB, n);
		assert_true(reg[n] >= 0);
	}
	for (n = 0; n < 2; n++)
		assert_int_equal(itest_send(&ep[n], ep[1 - n].addr, ITEST_TYPE,
					    TAG_PING, n), 0);
	for (n = 0; n < 2; n++) {
		assert_int_equal(clanq_evq_wait(&evq[n], &ev,
						ITEST_RECV_TIMEOUT), 0);
		assert_int_equal(ev.reg, reg[n]);
		assert_int_equal(ev.cookie, n);
		assert_int_equal(clanq_oob_recv(&ep[n], &m), 0);
		why = itest_check(&m, ep[1 - n].addr, ITEST_TYPE, TAG_PING,
				  1 - n);
		if (why)
			fail_msg("node %u: %s", n, why);
		assert_int_equal(clanq_ep_dropped(&ep[n]), 0);
	}
	for (n = 0; n < 2; n++) {
		assert_int_equal(clanq_evq_destroy(&evq[n]), 0);
		assert_int_equal(clanq_ep_destroy(&ep[n]), 0);
		assert_int_equal(clanq_close(&dev[n]), 0);
	}
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(a_steady_pair_completes_every_round_trip_while_other_processes_are_killed),
		T(new_contexts_work_on_both_nodes_after_the_kills),
	};

	return cmocka_run_group_tests_name("kill", tests, NULL, NULL);
}
