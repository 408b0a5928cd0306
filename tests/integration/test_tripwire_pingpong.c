// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The lost-wake-up hunt ([F] of include/clanq/queue.h): two processes,
 * one per node (and per vCPU), ping-pong a counter through tripwires,
 * blocking between messages (spin 0). Each side watches a uint64_t word in
 * its own region with a tripwire its own endpoint owns, and writes the
 * peer's word by PIO (clanq_ap_write: stores, barrier, armed bitmap,
 * AP_FLUSH only if armed). A write slept through is a wait that times
 * out: a failure, with the round and the values, never a hang (and a
 * watchdog alarm backs that up). The mixed variant sends one direction
 * by RDMA (CLANQ_RDMA_LAST, no completion), the receive path's check.
 * The rpc variant has side 0 make its write and its wait one call,
 * clanq_ap_write_wait(): the flush rides on TW_WAIT (CLANQ_TW_WAIT_FLUSH)
 * whenever side 1 is already waiting.
 *
 *	test_tripwire_pingpong [-n PIO_ROUNDS] [-m MIXED_ROUNDS]
 *			       [-r RPC_ROUNDS] [-t SECONDS]
 *
 * (a count of 0 leaves that variant out). The defaults are the issue's:
 * 1,000,000 PIO round trips, 20,000 mixed and 20,000 rpc. Under TCG with the debug
 * kernel a round trip takes 0.67 to 5.4 ms, depending on what else the
 * host runs (3.6 ms and up mixed), so 1M would take 11 to 90 minutes,
 * and no fixed count fits a bounded time: -t ends a variant after that
 * many seconds, at whatever round it reached (side 0 then writes STOP | i,
 * a last tripwire write, and both sides end), and it passes if it did at
 * least MIN_ROUNDS. tests/vm/tests.list gives the PIO variant 10
 * minutes, the others 2.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>
#include <clanq/admin.h>

#include "itest.h"
#include "tw_fixture.h"

#define REGION		4096
#define WORD		512
/* a reply that takes this long was slept through */
#define WAIT_NS		(5 * ITEST_NS_PER_S)
/* the whole run beyond its budget, whatever happens */
#define WATCHDOG_SLACK_S	120
/* side 0's last write, when the time budget is spent: stop after round i */
#define STOP		(1ull << 63)
/* a run cut short by its time budget has done at least this many */
#define MIN_ROUNDS	1000

static unsigned long pio_rounds = 1000000;
static unsigned long mixed_rounds = 20000;
static unsigned long rpc_rounds = 20000;
/* -t: stop after this many seconds, whatever the count (0: never) */
static unsigned long budget_s;

struct side_sh {
	uint64_t region;	/* packed address, 0 until published */
	uint64_t key;
	uint64_t rounds;	/* completed, for the report */
	uint64_t fires;		/* its tripwire's fires */
	uint64_t done;
};

struct pp_sh {
	struct side_sh side[2];
	unsigned long rounds;
	uint64_t budget_ns;	/* 0: none */
	int rdma;		/* side 0 writes by RDMA */
	int rpc;		/* side 0 writes and waits in one call */
	int stopped;		/* the budget, not the count, ended it */
};

static uint64_t wait_published(const uint64_t *w)
{
	uint64_t end = clanq_now_ns() + 20 * ITEST_NS_PER_S;
	uint64_t v;

	while (!(v = __atomic_load_n(w, __ATOMIC_ACQUIRE))) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("the peer never got there");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	return v;
}

/*
 * A wait that returned 0 only when its timeout was up: the word had
 * changed, but no fire woke us (the library looks once more at the
 * timeout). That is the write slept through, whoever it delays after.
 */
static void lost_wakeup(unsigned int s, uint64_t round, int r, uint64_t ns)
{
	if (r == 0 && ns >= WAIT_NS / 2)
		CHILD_FAIL("side %u: round %llu: a lost wake-up: the word changed, but the wait ended only after %llu ms (timeout %lld ms)",
			   s, (unsigned long long)round,
			   (unsigned long long)(ns / ITEST_NS_PER_MS),
			   (long long)(WAIT_NS / ITEST_NS_PER_MS));
}

/*
 * Side s's wait of round i, begun at @since, returned @r: fail on a
 * timeout, an error, or a word that is neither @expect nor (side 1
 * only) side 0's STOP | i. Returns the word, read once.
 */
static uint64_t waited(unsigned int s, uint64_t round, int r, uint64_t since,
		    const volatile uint64_t *word, uint64_t expect)
{
	uint64_t got;

	lost_wakeup(s, round, r, clanq_now_ns() - since);
	got = *word;
	if (r == -ETIMEDOUT)
		CHILD_FAIL("side %u: round %llu: no write from side %u within %lld s (word holds %llu)",
			   s, (unsigned long long)round, 1 - s,
			   (long long)(WAIT_NS / ITEST_NS_PER_S),
			   (unsigned long long)got);
	if (r)
		CHILD_FAIL("side %u: round %llu: the wait: %d",
			   s, (unsigned long long)round, r);
	if (got != expect && !(s == 1 && got == (STOP | round)))
		CHILD_FAIL("side %u: round %llu: word %llu, expected %llu",
			   s, (unsigned long long)round,
			   (unsigned long long)got, (unsigned long long)expect);
	return got;
}

static void pin_to_cpu(unsigned int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHILD_CHECK_INT(sched_setaffinity(0, sizeof(set), &set), 0);
}

/* Side s (0 serves first) on node s, on vCPU s. */
static void side(struct pp_sh *sh, unsigned int s)
{
	struct side_sh *me = &sh->side[s], *peer = &sh->side[1 - s];
	bool rdma = sh->rdma && s == 0;
	struct clanq_rdma_req req;
	volatile uint64_t *word;
	struct clanq_tw tw;
	struct clanq_ap rpc_ap;		/* rpc: in the tripwire's context */
	struct tw_writer w;
	struct tw_owner o;
	const char *why;
	uint64_t i, v, expect, t0, t, tw0, peer_region, e0 = 0, e1 = 0;
	int r;

	alarm(budget_s + WATCHDOG_SLACK_S);
	pin_to_cpu(s);
	why = tw_owner_open(&o, s, REGION);
	if (why)
		CHILD_FAIL("side %u: %s", s, why);
	CHILD_CHECK_INT(clanq_tw_create(&o.ep, &tw, &o.r, WORD, 8, 0), 0);
	clanq_tw_set_spin(&tw, 0);
	word = (volatile uint64_t *)((char *)o.r.mem + WORD);
	__atomic_store_n(&me->key, o.key, __ATOMIC_RELAXED);
	__atomic_store_n(&me->region, itest_addr_pack(o.r.addr), __ATOMIC_RELEASE);
	/* the key after the region: its release store published both */
	peer_region = wait_published(&peer->region);
	why = tw_writer_open(&w, s, itest_addr_unpack(peer_region),
			     __atomic_load_n(&peer->key, __ATOMIC_RELAXED), REGION);
	if (why)
		CHILD_FAIL("side %u: %s", s, why);
	req = itest_rdma_req(w.src.addr.id, w.ap.id, 0, WORD, 8, 0,
			     CLANQ_RDMA_LAST);
	/*
	 * TW_WAIT flushes an aperture of its own context only: the rpc
	 * side imports the peer's region once more, there.
	 */
	if (sh->rpc && s == 0) {
		CHILD_CHECK_INT(clanq_ap_import(&o.dev, &rpc_ap, itest_addr_unpack(peer_region),
						__atomic_load_n(&peer->key, __ATOMIC_RELAXED),
						0, REGION, CLANQ_RIGHTS_ALL), 0);
		CHILD_CHECK_INT(clanq_ap_map(&rpc_ap), 0);
	}

	/*
	 * Round i: side 0 writes i + 1 to side 1's word and waits for its
	 * own to become i + 1; side 1 waits for i + 1, then writes it back.
	 */
	CHILD_CHECK_INT(clanq_ctx_entries(&o.dev, &e0), 0);
	t0 = clanq_now_ns();
	for (i = 0; i < sh->rounds; i++) {
		expect = i + 1;
		/* the time is up: side 0 writes STOP | i instead, and both end */
		if (s == 0 && sh->budget_ns && clanq_now_ns() - t0 > sh->budget_ns) {
			sh->stopped = 1;
			expect = STOP | i;
		}
		if (s == 1) {
			tw0 = clanq_now_ns();
			r = clanq_tw_wait_change(&tw, (const uint64_t *)word, i, WAIT_NS);
			if (waited(1, i, r, tw0, word, expect) == (STOP | i))
				break;
		}
		v = expect;
		if (rdma) {
			memcpy(w.src.mem, &v, 8);
			req.cookie = i;
			r = clanq_rdma_post(&w.ep, &req);
			if (r)
				CHILD_FAIL("side 0: round %llu: clanq_rdma_post: %d",
					   (unsigned long long)i, r);
		} else if (!(sh->rpc && s == 0 && !(expect & STOP))) {
			r = clanq_ap_write(&w.ap, WORD, &v, 8);
			if (r)
				CHILD_FAIL("side %u: round %llu: clanq_ap_write: %d",
					   s, (unsigned long long)i, r);
		}
		if (expect & STOP)
			break;
		if (s == 0) {
			tw0 = clanq_now_ns();
			if (sh->rpc)
				r = clanq_ap_write_wait(&rpc_ap, WORD, &v, 8, &tw,
							(const uint64_t *)word, i, WAIT_NS);
			else
				r = clanq_tw_wait_change(&tw, (const uint64_t *)word, i,
							 WAIT_NS);
			waited(0, i, r, tw0, word, expect);
		}
		__atomic_store_n(&me->rounds, i + 1, __ATOMIC_RELAXED);
	}
	t = clanq_now_ns() - t0;
	CHILD_CHECK_INT(clanq_ctx_entries(&o.dev, &e1), 0);
	/*
	 * The rpc side's write and wait are one system call when side 1
	 * waits (and only a TW_WAIT when it does not yet): not two. One more
	 * now and then, when the answer beat the block and the flush was
	 * still owed; the -1 is the entries query itself.
	 */
	if (sh->rpc && s == 0 && i) {
		printf("pingpong (rpc): side 0 made %.2f system calls per round trip\n",
		       (double)(e1 - e0 - 1) / (double)i);
		if ((e1 - e0 - 1) * 4 > i * 5)
			CHILD_FAIL("side 0: %llu system calls for %llu round trips: the flush did not ride on the wait",
				   (unsigned long long)(e1 - e0 - 1), (unsigned long long)i);
	}
	__atomic_store_n(&me->rounds, i, __ATOMIC_RELAXED);
	me->fires = itest_ctr(&o.ep.counters->tw_fires);
	if (s == 0)
		printf("pingpong%s: %llu round trips in %.2f s: %.1f us per round trip\n",
		       sh->rdma ? " (mixed: RDMA one way, PIO back)" : "",
		       (unsigned long long)i, (double)t / ITEST_NS_PER_S,
		       i ? (double)t / 1000 / (double)i : 0.0);
	CHILD_CHECK_INT(itest_ctr(&w.ep.counters->rdma_errors), 0);
	/* both done before either tears down */
	__atomic_store_n(&me->done, 1, __ATOMIC_RELEASE);
	wait_published(&peer->done);
	CHILD_CHECK_INT(clanq_tw_destroy(&tw), 0);
	if (sh->rpc && s == 0)
		CHILD_CHECK_INT(clanq_ap_close(&rpc_ap), 0);
	why = tw_writer_close(&w);
	if (!why)
		why = tw_owner_close(&o);
	if (why)
		CHILD_FAIL("side %u: %s", s, why);
}

static void side0(void *arg)
{
	side(arg, 0);
}

static void side1(void *arg)
{
	side(arg, 1);
}

static void pingpong(unsigned long rounds, int rdma, int rpc)
{
	struct pp_sh *sh;
	pid_t a, b;
	int sa, sb;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	sh->rounds = rounds;
	sh->budget_ns = (uint64_t)budget_s * ITEST_NS_PER_S;
	sh->rdma = rdma;
	sh->rpc = rpc;
	a = itest_fork(side0, sh);
	assert_true(a > 0);
	b = itest_fork(side1, sh);
	assert_true(b > 0);
	sa = itest_wait(a, (budget_s + WATCHDOG_SLACK_S + 30) * ITEST_NS_PER_S);
	sb = itest_wait(b, 30 * ITEST_NS_PER_S);
	if (sa >= 0 && WIFSIGNALED(sa) && WTERMSIG(sa) == SIGALRM)
		fprintf(stderr, "side 0: watchdog: not done after %lu s\n",
			budget_s + WATCHDOG_SLACK_S);
	if (sb >= 0 && WIFSIGNALED(sb) && WTERMSIG(sb) == SIGALRM)
		fprintf(stderr, "side 1: watchdog: not done after %lu s\n",
			budget_s + WATCHDOG_SLACK_S);
	printf("pingpong: side 0 completed %llu, side 1 %llu of %lu rounds\n",
	       (unsigned long long)sh->side[0].rounds,
	       (unsigned long long)sh->side[1].rounds, rounds);
	/* a round whose write found the tripwire not yet armed is one the re-check caught */
	if (sh->side[0].fires || sh->side[1].fires)
		printf("pingpong: tripwire fires %llu / %llu (the other rounds: the write beat the arming, the waiter's re-check saw it)\n",
		       (unsigned long long)sh->side[0].fires,
		       (unsigned long long)sh->side[1].fires);
	assert_true(itest_status_ok(sa, "side 0"));
	assert_true(itest_status_ok(sb, "side 1"));
	assert_int_equal(sh->side[0].rounds, sh->side[1].rounds);
	if (sh->stopped) {
		printf("pingpong: the %lu s budget ended it after %llu of %lu round trips\n",
		       budget_s, (unsigned long long)sh->side[0].rounds, rounds);
		assert_true(sh->side[0].rounds >= MIN_ROUNDS);
	} else {
		assert_int_equal(sh->side[0].rounds, rounds);
	}
	/* a fire per write at most (and side 1's for the STOP) */
	assert_true(sh->side[0].fires <= sh->side[0].rounds);
	assert_true(sh->side[1].fires <= sh->side[1].rounds + 1);
	munmap(sh, sizeof(*sh));
}

static void a_million_blocking_pio_round_trips_lose_no_wake_up(void **state)
{
	(void)state;
	pingpong(pio_rounds, 0, 0);
}

static void blocking_round_trips_rdma_one_way_pio_back_lose_no_wake_up(void **state)
{
	(void)state;
	pingpong(mixed_rounds, 1, 0);
}

static void blocking_round_trips_with_the_flush_in_the_wait_lose_no_wake_up(void **state)
{
	(void)state;
	pingpong(rpc_rounds, 0, 1);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		T(a_million_blocking_pio_round_trips_lose_no_wake_up),
		T(blocking_round_trips_rdma_one_way_pio_back_lose_no_wake_up),
		T(blocking_round_trips_with_the_flush_in_the_wait_lose_no_wake_up),
	};
	struct CMUnitTest tests[ARRAY_SIZE(all)];
	size_t n = 0;
	int opt;

	while ((opt = getopt(argc, argv, "n:m:r:t:")) != -1) {
		switch (opt) {
		case 'n':
			pio_rounds = strtoul(optarg, NULL, 0);
			break;
		case 'm':
			mixed_rounds = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			rpc_rounds = strtoul(optarg, NULL, 0);
			break;
		case 't':
			budget_s = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [-n PIO_ROUNDS] [-m MIXED_ROUNDS] [-r RPC_ROUNDS] [-t SECONDS]\n",
				argv[0]);
			return 2;
		}
	}
	printf("pingpong: %lu PIO round trips, %lu mixed, %lu rpc, time budget %lu s\n",
	       pio_rounds, mixed_rounds, rpc_rounds, budget_s);
	/* a count of 0 leaves that variant out */
	if (pio_rounds)
		tests[n++] = all[0];
	if (mixed_rounds)
		tests[n++] = all[1];
	if (rpc_rounds)
		tests[n++] = all[2];
	return _cmocka_run_group_tests("tripwire_pingpong", tests, n, NULL, NULL);
}
