// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * What one 8-byte write may cost everyone else (issue 28, item 2): an
 * owner arms 16,383 persistent tripwires on the same 8 bytes, with 0 or
 * 8 threads blocked in clanq_tw_wait_change_oob() on some of them; a
 * writer on the same CPU as a thread running a 1 ms timer stores the
 * word by PIO and flushes it (AP_FLUSH fires all of them). The figure
 * is how late the timer fires while the writes go on, beside how late it
 * fires when nothing happens, and how long the writer's call took.
 *
 * Before the fix the walk held the region's tw.lock with interrupts off
 * for all of it, waking the sleepers once per tripwire: the timer fired
 * 164 ms late with no sleepers and 1,846 ms late with 8 in the issue's
 * measurement (debug VM, TCG), 140 and 664 ms in this program's. The
 * bound asserted here is generous (the emulator's host may be busy);
 * the figures are printed.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "tw_fixture.h"

#define REGION		4096
#define WORD		256
#define NR_TWS		16383u
#define TW_SLOTS	16384u
#define MAX_SLEEPERS	8u
#define WRITES		5u
/*
 * The timer's lateness the test fails at: before the fix it was 140 ms
 * with no sleepers and 664 ms with 8 (this program, debug VM, TCG); a
 * walk bounded per hold should leave a few, and the emulator's host may
 * add tens more.
 */
#define LATE_BOUND_NS	(100 * ITEST_NS_PER_MS)

static void assert_ok(const char *why)
{
	if (why)
		fail_msg("%s", why);
}

static void pin_to_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/* A thread asking for a 1 ms timer again and again, on CPU 0. */
struct ticker {
	pthread_t thread;
	int stop;
	int64_t worst_late_ns;	/* reset by the test, under no lock: a figure */
	unsigned long ticks;
};

static void *ticker_fn(void *arg)
{
	struct ticker *tk = arg;
	struct timespec at;
	int64_t due, late;

	pin_to_cpu0();
	while (!__atomic_load_n(&tk->stop, __ATOMIC_ACQUIRE)) {
		due = (int64_t)clanq_now_ns() + ITEST_NS_PER_MS;
		at.tv_sec = due / ITEST_NS_PER_S;
		at.tv_nsec = due % ITEST_NS_PER_S;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
		late = (int64_t)clanq_now_ns() - due;
		if (late > __atomic_load_n(&tk->worst_late_ns, __ATOMIC_RELAXED))
			__atomic_store_n(&tk->worst_late_ns, late, __ATOMIC_RELAXED);
		__atomic_fetch_add(&tk->ticks, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* A receiver blocked on one of the tripwires, over and over. */
struct sleeper {
	pthread_t thread;
	struct clanq_tw *tw;
	struct clanq_ep *ep;
	const volatile uint64_t *word;
	int *stop;
	unsigned long wakes;
	int rc;
};

static void *sleeper_fn(void *arg)
{
	struct sleeper *s = arg;
	uint64_t old;
	int rc;

	while (!__atomic_load_n(s->stop, __ATOMIC_ACQUIRE)) {
		old = *s->word;
		rc = clanq_tw_wait_change_oob(s->tw, (const uint64_t *)s->word, old,
					      s->ep, 200 * ITEST_NS_PER_MS);
		if (rc < 0 && rc != -ETIMEDOUT) {
			s->rc = rc;
			break;
		}
		if (!rc)
			s->wakes++;
	}
	return NULL;
}

static int64_t run_storm(unsigned int nr_sleepers)
{
	struct clanq_ep_attr attr = { .tw_slots = TW_SLOTS };
	struct clanq_tw *tws = calloc(NR_TWS, sizeof(*tws));
	struct sleeper sl[MAX_SLEEPERS];
	struct ticker tk = { 0 };
	int64_t idle_late, worst_call = 0, t0, late;
	struct tw_owner o;
	struct tw_writer w;
	struct clanq_ep ep;
	int stop = 0;
	unsigned int i;
	uint64_t v;

	assert_non_null(tws);
	assert_ok(tw_owner_open(&o, 0, REGION));
	assert_int_equal(clanq_ep_create_attr(&o.dev, &ep, &attr), 0);
	for (i = 0; i < NR_TWS; i++)
		assert_int_equal(clanq_tw_create(&ep, &tws[i], &o.r, WORD, 8,
						 CLANQ_TW_PERSISTENT | CLANQ_TW_ARMED), 0);
	assert_ok(tw_writer_open(&w, 0, o.r.addr, o.key, REGION));

	for (i = 0; i < nr_sleepers; i++) {
		sl[i] = (struct sleeper){
			.tw = &tws[i * (NR_TWS / MAX_SLEEPERS)], .ep = &ep,
			.word = (const volatile uint64_t *)((char *)o.r.mem + WORD),
			.stop = &stop,
		};
		clanq_tw_set_spin(sl[i].tw, 0);
		assert_int_equal(pthread_create(&sl[i].thread, NULL, sleeper_fn,
						&sl[i]), 0);
	}
	pin_to_cpu0();
	assert_int_equal(pthread_create(&tk.thread, NULL, ticker_fn, &tk), 0);
	usleep(300 * 1000);	/* sleepers asleep, the timer ticking */
	__atomic_store_n(&tk.worst_late_ns, 0, __ATOMIC_RELAXED);
	usleep(300 * 1000);
	idle_late = __atomic_load_n(&tk.worst_late_ns, __ATOMIC_RELAXED);

	__atomic_store_n(&tk.worst_late_ns, 0, __ATOMIC_RELAXED);
	for (i = 0; i < WRITES; i++) {
		v = i + 1;
		t0 = (int64_t)clanq_now_ns();
		assert_int_equal(clanq_ap_write(&w.ap, WORD, &v, sizeof(v)), 0);
		t0 = (int64_t)clanq_now_ns() - t0;
		if (t0 > worst_call)
			worst_call = t0;
		usleep(100 * 1000);	/* the sleepers block again */
	}
	late = __atomic_load_n(&tk.worst_late_ns, __ATOMIC_RELAXED);

	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&tk.stop, 1, __ATOMIC_RELEASE);
	v = 0;
	assert_int_equal(clanq_ap_write(&w.ap, WORD, &v, sizeof(v)), 0);
	pthread_join(tk.thread, NULL);
	for (i = 0; i < nr_sleepers; i++) {
		pthread_join(sl[i].thread, NULL);
		assert_int_equal(sl[i].rc, 0);
		assert_true(sl[i].wakes >= 1);
	}
	printf("tw-storm: %u tripwires on one word, %u sleepers: the write's call took %.1f ms (longest of %u), another thread's 1 ms timer on its CPU fired up to %.1f ms late (idle: %.1f ms)\n",
	       NR_TWS, nr_sleepers, worst_call / 1e6, WRITES, late / 1e6,
	       idle_late / 1e6);
	fflush(stdout);

	assert_ok(tw_writer_close(&w));
	for (i = 0; i < NR_TWS; i++)
		assert_int_equal(clanq_tw_destroy(&tws[i]), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_ok(tw_owner_close(&o));
	free(tws);
	return late;
}

static void a_write_onto_16383_tripwires_keeps_a_timer_on_time(void **state)
{
	(void)state;
	assert_true(run_storm(0) < LATE_BOUND_NS);
}

static void and_with_8_sleepers_blocked_on_them(void **state)
{
	(void)state;
	assert_true(run_storm(MAX_SLEEPERS) < LATE_BOUND_NS);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(a_write_onto_16383_tripwires_keeps_a_timer_on_time),
		T(and_with_8_sleepers_blocked_on_them),
	};

	return cmocka_run_group_tests_name("tw-storm", tests, NULL, NULL);
}
