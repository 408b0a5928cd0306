// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Tripwires: a receiver blocked in clanq_tw_wait_change() wakes for the
 * writes that touch its word, RDMA or PIO, from its own node or the
 * other, and for nothing one byte beside; a PIO writer enters the driver
 * only when a tripwire is armed where it wrote (zero system calls
 * otherwise, one per fire); the owner's counters say what happened;
 * fires arrive on a unified event queue beside OOB and RDMA events; every
 * new ioctl refuses garbage with its exact errno; and processes killed
 * while waiting or while holding armed tripwires leave nothing behind.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "tw_fixture.h"

#define REGION		(2 * 4096)
/* the tripwire [TW_OFF, TW_OFF + TW_LEN) holds the watched word WORD */
#define TW_OFF		252
#define TW_LEN		16
#define WORD		256

/* a waiter that must not wake waits this long */
#define QUIET_WAIT_NS	(500 * ITEST_NS_PER_MS)
/* a waiter that must wake waits at most this long */
#define WAKE_WAIT_NS	(10 * ITEST_NS_PER_S)

static void assert_ok(const char *why)
{
	if (why)
		fail_msg("%s", why);
}

/*
 * A thread blocked in clanq_tw_wait_change().
 */

struct waiter {
	pthread_t thread;
	struct clanq_tw *tw;
	const volatile uint64_t *word;
	uint64_t old;
	int64_t timeout_ns;
	pid_t tid;		/* published by the thread */
	int done;		/* set when it returned */
	int rc;
	uint64_t ns;		/* how long it waited */
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;
	uint64_t t0;

	__atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	t0 = clanq_now_ns();
	w->rc = clanq_tw_wait_change(w->tw, (const uint64_t *)w->word, w->old, w->timeout_ns);
	w->ns = clanq_now_ns() - t0;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The scheduler state of a thread or process (R, S, D, ...), or 0. */
static char task_state(const char *path)
{
	char buf[512], *p;
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

static char thread_state(pid_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	return task_state(path);
}

static char proc_state(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return task_state(path);
}

/* Start a waiter and return once it sleeps in the driver. */
static void waiter_start(struct waiter *w, struct clanq_tw *tw,
			 const volatile uint64_t *word, int64_t timeout_ns)
{
	uint64_t end = clanq_now_ns() + 10 * ITEST_NS_PER_S;
	pid_t tid;

	memset(w, 0, sizeof(*w));
	w->tw = tw;
	w->word = word;
	w->old = *word;
	w->timeout_ns = timeout_ns;
	assert_int_equal(pthread_create(&w->thread, NULL, waiter_fn, w), 0);
	while (!(tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE)))
		sched_yield();
	/* spin 0: it goes straight into TW_WAIT, its only sleep */
	while (thread_state(tid) != 'S') {
		if (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE))
			fail_msg("waiter returned %d before it was woken", w->rc);
		if (clanq_now_ns() > end)
			fail_msg("waiter not asleep after 10 s");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
}

static int waiter_join(struct waiter *w)
{
	assert_int_equal(pthread_join(w->thread, NULL), 0);
	return w->rc;
}

static bool waiter_done(struct waiter *w)
{
	return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

/*
 * Wakes, and does not wake.
 */

enum how { PIO, RDMA };

/* Write len bytes at region offset off, by PIO or RDMA. */
static void write_at(struct tw_writer *w, enum how how, uint64_t off,
		     const void *src, size_t len)
{
	if (how == PIO)
		assert_int_equal(clanq_ap_write(&w->ap, off, src, len), 0);
	else
		assert_int_equal(tw_rdma_write(w, off, src, len,
					       20 * ITEST_NS_PER_S), 0);
}

static void wake_case(unsigned int writer_nic, enum how how)
{
	const struct clanq_ep_counters *c;
	uint64_t fires, flushes, spurious, v;
	volatile uint64_t *word;
	struct tw_writer w;
	struct tw_owner o;
	struct clanq_tw tw;
	struct waiter wt;
	uint8_t b = 0xa5;
	int side;

	assert_ok(tw_owner_open(&o, 0, REGION));
	assert_ok(tw_writer_open(&w, writer_nic, o.r.addr, o.key, REGION));
	assert_int_equal(clanq_tw_create(&o.ep, &tw, &o.r, TW_OFF, TW_LEN, 0), 0);
	clanq_tw_set_spin(&tw, 0);
	word = (volatile uint64_t *)((char *)o.r.mem + WORD);
	c = o.ep.counters;
	fires = itest_ctr(&c->tw_fires);
	flushes = itest_ctr(&c->tw_flushes);
	spurious = itest_ctr(&c->tw_spurious);

	/* one byte before the tripwire, then one byte after it: no wake */
	for (side = 0; side < 2; side++) {
		uint64_t off = side ? TW_OFF + TW_LEN : TW_OFF - 1;

		waiter_start(&wt, &tw, word, QUIET_WAIT_NS);
		write_at(&w, how, off, &b, 1);
		if (waiter_done(&wt))
			fail_msg("%s write one byte %s the tripwire woke the waiter (%d after %llu ns)",
				 how == PIO ? "PIO" : "RDMA",
				 side ? "after" : "before", wt.rc,
				 (unsigned long long)wt.ns);
		assert_int_equal(waiter_join(&wt), -ETIMEDOUT);
		assert_true(wt.ns >= (uint64_t)QUIET_WAIT_NS);
		assert_int_equal(((volatile uint8_t *)o.r.mem)[off], b);
		assert_false(clanq_tw_fired(&tw));
	}
	/* the waiter left it as it found it: disarmed */
	assert_false(clanq_ap_armed(&w.ap, WORD, 8));
	assert_int_equal(itest_ctr(&c->tw_fires), fires);
	assert_int_equal(itest_ctr(&c->tw_flushes), flushes);
	/* PIO: both bytes share a 64-byte block with the armed tripwire */
	assert_int_equal(itest_ctr(&c->tw_spurious),
			 spurious + (how == PIO ? 2 : 0));

	/* the word itself: wakes */
	v = 0x1234567800000000ull | writer_nic << 8 | how;
	waiter_start(&wt, &tw, word, WAKE_WAIT_NS);
	assert_true(clanq_ap_armed(&w.ap, WORD, 8));
	write_at(&w, how, WORD, &v, sizeof(v));
	/*
	 * At its timeout the library looks at the word once more, so a
	 * write slept through returns 0 too, but only then.
	 */
	if (waiter_join(&wt) != 0 || wt.ns >= (uint64_t)WAKE_WAIT_NS / 2)
		fail_msg("%s write of the word from node %u: the waiter returned %d after %llu ms",
			 how == PIO ? "PIO" : "RDMA", writer_nic, wt.rc,
			 (unsigned long long)(wt.ns / ITEST_NS_PER_MS));
	assert_int_equal(*word, v);
	assert_true(clanq_tw_fired(&tw));
	assert_int_equal(itest_ctr(&c->tw_fires), fires + 1);
	assert_int_equal(itest_ctr(&c->tw_flushes), flushes + (how == PIO));
	printf("tripwire: %s from node %u woke the waiter in %llu us\n",
	       how == PIO ? "PIO" : "RDMA", writer_nic,
	       (unsigned long long)(wt.ns / 1000));

	assert_int_equal(clanq_tw_destroy(&tw), 0);
	assert_ok(tw_writer_close(&w));
	assert_ok(tw_owner_close(&o));
}

static void a_pio_write_into_the_word_wakes_a_waiter_on_the_same_node(void **state)
{
	(void)state;
	wake_case(0, PIO);
}

static void a_pio_write_into_the_word_wakes_a_waiter_across_nodes(void **state)
{
	(void)state;
	wake_case(1, PIO);
}

static void an_rdma_write_into_the_word_wakes_a_waiter_on_the_same_node(void **state)
{
	(void)state;
	wake_case(0, RDMA);
}

static void an_rdma_write_into_the_word_wakes_a_waiter_across_nodes(void **state)
{
	(void)state;
	wake_case(1, RDMA);
}

/*
 * Destroying the tripwire, or freeing its region, wakes the waiter with
 * -EIDRM or -ENXIO.
 */
static void a_waiter_wakes_with_eidrm_on_destroy_and_enxio_on_region_free(void **state)
{
	volatile uint64_t *word;
	struct tw_owner o;
	struct clanq_tw tw;
	struct waiter wt;

	(void)state;
	assert_ok(tw_owner_open(&o, 0, REGION));
	word = (volatile uint64_t *)((char *)o.r.mem + WORD);
	assert_int_equal(clanq_tw_create(&o.ep, &tw, &o.r, TW_OFF, TW_LEN, 0), 0);
	clanq_tw_set_spin(&tw, 0);
	waiter_start(&wt, &tw, word, WAKE_WAIT_NS);
	assert_int_equal(clanq_tw_destroy(&tw), 0);
	assert_int_equal(waiter_join(&wt), -EIDRM);
	assert_true(wt.ns < (uint64_t)WAKE_WAIT_NS);
	assert_int_equal(clanq_tw_destroy(&tw), -ENOENT);

	assert_int_equal(clanq_tw_create(&o.ep, &tw, &o.r, TW_OFF, TW_LEN, 0), 0);
	clanq_tw_set_spin(&tw, 0);
	waiter_start(&wt, &tw, word, WAKE_WAIT_NS);
	{
		/* the region's memory stays mapped until clanq_region_free unmaps it */
		struct clanq_ioc_region_free f;

		memset(&f, 0, sizeof(f));
		f.id = o.r.addr.id;
		assert_int_equal(itest_ioctl_err(o.dev.fd, CLANQ_IOC_REGION_FREE, &f), 0);
	}
	assert_int_equal(waiter_join(&wt), -ENXIO);
	assert_int_equal(clanq_tw_arm(&tw), -ENOENT);
	munmap(o.r.mem, o.r.map_size);
	assert_int_equal(clanq_ep_destroy(&o.ep), 0);
	assert_int_equal(clanq_close(&o.dev), 0);
}

/*
 * System calls of a PIO writer.
 */

#define N_WRITES	1000
#define N_FIRES		200

static void a_pio_writer_enters_the_driver_only_when_a_tripwire_is_armed_where_it_wrote(void **state)
{
	const struct clanq_ep_counters *c;
	uint64_t q, e0, e1, v, fires0, flushes0, spurious0;
	struct clanq_tw tw, ptw;
	struct tw_writer w;
	struct tw_owner o;
	unsigned int i, fired = 0;

	(void)state;
	assert_ok(tw_owner_open(&o, 0, REGION));
	assert_ok(tw_writer_open(&w, 1, o.r.addr, o.key, REGION));
	assert_int_equal(clanq_tw_create(&o.ep, &tw, &o.r, WORD, 8, 0), 0);
	c = o.ep.counters;
	fires0 = itest_ctr(&c->tw_fires);
	flushes0 = itest_ctr(&c->tw_flushes);
	spurious0 = itest_ctr(&c->tw_spurious);
	q = itest_query_cost(&w.dev);

	/* nothing armed: not one system call */
	e0 = itest_entries(&w.dev);
	for (i = 0; i < N_WRITES; i++) {
		v = i;
		assert_int_equal(clanq_ap_write(&w.ap, WORD, &v, sizeof(v)), 0);
		assert_int_equal(clanq_ap_write(&w.ap, (i * 8) % REGION, &v,
						sizeof(v)), 0);
	}
	e1 = itest_entries(&w.dev);
	assert_int_equal(e1 - e0, q);
	assert_false(clanq_tw_fired(&tw));
	assert_int_equal(itest_ctr(&c->tw_fires), fires0);

	/* a one-shot tripwire armed N times: N writes, N entries */
	e0 = itest_entries(&w.dev);
	for (i = 0; i < N_FIRES; i++) {
		assert_int_equal(clanq_tw_arm(&tw), 0);
		assert_true(clanq_ap_armed(&w.ap, WORD, 8));
		v = 1000000 + i;
		assert_int_equal(clanq_ap_write(&w.ap, WORD, &v, sizeof(v)), 0);
		/* fired, and disarmed by it: the next write is free */
		assert_false(clanq_ap_armed(&w.ap, WORD, 8));
		assert_int_equal(clanq_ap_write(&w.ap, WORD, &v, sizeof(v)), 0);
		fired += clanq_tw_fired(&tw);
		clanq_tw_clear(&tw);
	}
	e1 = itest_entries(&w.dev);
	assert_int_equal(fired, N_FIRES);
	assert_int_equal(e1 - e0, N_FIRES + q);
	assert_int_equal(itest_ctr(&c->tw_fires), fires0 + N_FIRES);
	assert_int_equal(itest_ctr(&c->tw_flushes), flushes0 + N_FIRES);
	assert_int_equal(itest_ctr(&c->tw_spurious), spurious0);

	/*
	 * Spurious: armed on [WORD, WORD + 8); a write of the rest of its
	 * 64-byte block enters the driver, fires nothing and is counted;
	 * writes in the blocks beside it cost nothing.
	 */
	assert_int_equal(clanq_tw_arm(&tw), 0);
	e0 = itest_entries(&w.dev);
	v = 7;
	assert_int_equal(clanq_ap_write(&w.ap, WORD + 8, &v, sizeof(v)), 0);
	assert_int_equal(clanq_ap_write(&w.ap, WORD - 64 + 56, &v, sizeof(v)), 0);
	assert_int_equal(clanq_ap_write(&w.ap, WORD + 64, &v, sizeof(v)), 0);
	e1 = itest_entries(&w.dev);
	assert_int_equal(e1 - e0, 1 + q);
	assert_int_equal(itest_ctr(&c->tw_spurious), spurious0 + 1);
	assert_int_equal(itest_ctr(&c->tw_fires), fires0 + N_FIRES);
	assert_int_equal(itest_ctr(&c->tw_flushes), flushes0 + N_FIRES);
	assert_false(clanq_tw_fired(&tw));
	/* still armed: the real write fires it */
	assert_true(clanq_ap_armed(&w.ap, WORD, 8));
	assert_int_equal(clanq_ap_write(&w.ap, WORD, &v, sizeof(v)), 0);
	assert_true(clanq_tw_fired(&tw));
	assert_int_equal(itest_ctr(&c->tw_fires), fires0 + N_FIRES + 1);
	assert_int_equal(itest_ctr(&c->tw_flushes), flushes0 + N_FIRES + 1);

	/* persistent: every write fires it, one entry each */
	assert_int_equal(clanq_tw_create(&o.ep, &ptw, &o.r, 1024, 64,
					 CLANQ_TW_PERSISTENT | CLANQ_TW_ARMED), 0);
	e0 = itest_entries(&w.dev);
	for (i = 0; i < 10; i++)
		assert_int_equal(clanq_ap_write(&w.ap, 1024 + i, &v, 1), 0);
	e1 = itest_entries(&w.dev);
	assert_int_equal(e1 - e0, 10 + q);
	assert_int_equal(itest_ctr(&c->tw_fires), fires0 + N_FIRES + 11);
	assert_int_equal(itest_ctr(&c->tw_flushes), flushes0 + N_FIRES + 11);
	assert_int_equal(clanq_tw_disarm(&ptw), 0);
	assert_false(clanq_ap_armed(&w.ap, 1024, 64));
	e0 = itest_entries(&w.dev);
	assert_int_equal(clanq_ap_write(&w.ap, 1024, &v, 8), 0);
	e1 = itest_entries(&w.dev);
	assert_int_equal(e1 - e0, q);
	printf("tripwire: %u writes unarmed and %u after disarm: 0 system calls; %u fires: %u\n",
	       2 * N_WRITES, N_FIRES, N_FIRES, N_FIRES);

	assert_int_equal(clanq_tw_destroy(&ptw), 0);
	assert_int_equal(clanq_tw_destroy(&tw), 0);
	assert_ok(tw_writer_close(&w));
	assert_ok(tw_owner_close(&o));
}

/*
 * One flush that fires tripwires of two endpoints, interleaved in the
 * region, counts one flush on each.
 */
static void one_flush_firing_two_endpoints_tripwires_counts_one_flush_on_each(void **state)
{
	struct clanq_tw a1, b, a2;
	struct clanq_ep ep_b;
	struct tw_writer w;
	struct tw_owner o;
	uint8_t buf[24] = { 1 };

	(void)state;
	assert_ok(tw_owner_open(&o, 0, REGION));
	assert_int_equal(clanq_ep_create(&o.dev, &ep_b, 0), 0);
	assert_int_equal(clanq_tw_create(&o.ep, &a1, &o.r, 0, 8, CLANQ_TW_ARMED), 0);
	assert_int_equal(clanq_tw_create(&ep_b, &b, &o.r, 8, 8, CLANQ_TW_ARMED), 0);
	assert_int_equal(clanq_tw_create(&o.ep, &a2, &o.r, 16, 8, CLANQ_TW_ARMED), 0);
	assert_ok(tw_writer_open(&w, 1, o.r.addr, o.key, REGION));
	assert_int_equal(clanq_ap_write(&w.ap, 0, buf, sizeof(buf)), 0);
	assert_true(clanq_tw_fired(&a1) && clanq_tw_fired(&b) && clanq_tw_fired(&a2));
	assert_int_equal(itest_ctr(&o.ep.counters->tw_fires), 2);
	assert_int_equal(itest_ctr(&ep_b.counters->tw_fires), 1);
	assert_int_equal(itest_ctr(&ep_b.counters->tw_flushes), 1);
	assert_int_equal(itest_ctr(&o.ep.counters->tw_flushes), 1);
	assert_ok(tw_writer_close(&w));
	assert_int_equal(clanq_ep_destroy(&ep_b), 0);
	assert_ok(tw_owner_close(&o));
}

/*
 * The unified event queue: tripwire events beside OOB and RDMA events
 * of other endpoints.
 */
static void tripwire_events_arrive_on_a_unified_evq_beside_oob_and_rdma_events(void **state)
{
	const uint32_t mask = CLANQ_EV_TRIPWIRE | CLANQ_EV_OOB | CLANQ_EV_RDMA;
	struct clanq_ep ep_oob, ep_rdma, tx;
	struct clanq_dev tx_dev;
	struct clanq_rdma_comp comp;
	struct clanq_rdma_req req;
	struct clanq_tw tw_r, tw_p;
	struct clanq_region src;
	struct clanq_oob_msg m;
	struct clanq_event ev;
	struct clanq_evq evq;
	struct clanq_ap ap;
	struct tw_writer w;
	struct tw_owner o;
	uint64_t v = 0x5eed, taken = 0, end;
	unsigned int seen_tw = 0, seen_oob = 0, seen_rdma = 0;
	int reg[3];

	(void)state;
	assert_ok(tw_owner_open(&o, 0, REGION));
	assert_int_equal(clanq_ep_create(&o.dev, &ep_oob, 16), 0);
	assert_int_equal(clanq_ep_create(&o.dev, &ep_rdma, 0), 0);
	assert_int_equal(clanq_evq_create(&o.dev, &evq, 8), 0);
	reg[0] = clanq_evq_register(&evq, &o.ep, mask, 1);
	reg[1] = clanq_evq_register(&evq, &ep_oob, mask, 2);
	reg[2] = clanq_evq_register(&evq, &ep_rdma, mask, 3);
	assert_true(reg[0] >= 0 && reg[1] >= 0 && reg[2] >= 0);
	/* one tripwire for an RDMA write, one for a PIO write */
	assert_int_equal(clanq_tw_create(&o.ep, &tw_r, &o.r, 0, 8,
					 CLANQ_TW_ARMED), 0);
	assert_int_equal(clanq_tw_create(&o.ep, &tw_p, &o.r, 4096, 8,
					 CLANQ_TW_ARMED), 0);
	assert_int_not_equal(tw_r.bit, tw_p.bit);

	/* ep_rdma (same context) writes the first word by RDMA */
	assert_int_equal(clanq_region_alloc(&o.dev, &src, 4096), 0);
	memcpy(src.mem, &v, 8);
	assert_int_equal(clanq_ap_import(&o.dev, &ap, o.r.addr, o.key, 0,
					 REGION, CLANQ_RIGHT_WRITE), 0);
	req = itest_rdma_req(src.addr.id, ap.id, 0, 0, 8, 77,
			     CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
	assert_int_equal(clanq_rdma_post(&ep_rdma, &req), 0);
	/* node 1 writes the second by PIO and sends ep_oob a message */
	assert_ok(tw_writer_open(&w, 1, o.r.addr, o.key, REGION));
	assert_int_equal(clanq_ap_write(&w.ap, 4096, &v, 8), 0);
	assert_int_equal(clanq_open_nic(&tx_dev, 1), 0);
	assert_int_equal(clanq_ep_create(&tx_dev, &tx, 0), 0);
	assert_int_equal(itest_send(&tx, ep_oob.addr, ITEST_TYPE, 9, 1), 0);

	end = clanq_now_ns() + 20 * ITEST_NS_PER_S;
	while (!seen_tw || !seen_oob || !seen_rdma ||
	       taken != (1ull << (tw_r.bit % 64) | 1ull << (tw_p.bit % 64))) {
		int64_t left = (int64_t)(end - clanq_now_ns());

		if (left <= 0)
			fail_msg("after 20 s: events tw %u oob %u rdma %u, bits %#llx",
				 seen_tw, seen_oob, seen_rdma,
				 (unsigned long long)taken);
		if (clanq_evq_wait(&evq, &ev, left))
			continue;
		switch (ev.cookie) {
		case 1:
			assert_int_equal(ev.reg, reg[0]);
			assert_int_equal(ev.events, CLANQ_EV_TRIPWIRE);
			seen_tw++;
			/* the bit is there when the event is */
			assert_true(clanq_tw_fired(&tw_r) || clanq_tw_fired(&tw_p));
			taken |= clanq_ep_tw_take(&o.ep, tw_r.bit / 64);
			if (tw_p.bit / 64 != tw_r.bit / 64)
				taken |= clanq_ep_tw_take(&o.ep, tw_p.bit / 64);
			break;
		case 2:
			assert_int_equal(ev.reg, reg[1]);
			assert_int_equal(ev.events, CLANQ_EV_OOB);
			assert_int_equal(clanq_oob_recv(&ep_oob, &m), 0);
			assert_null(itest_check(&m, tx.addr, ITEST_TYPE, 9, 1));
			seen_oob++;
			break;
		case 3:
			assert_int_equal(ev.reg, reg[2]);
			assert_int_equal(ev.events, CLANQ_EV_RDMA);
			assert_int_equal(clanq_rdma_poll(&ep_rdma, &comp), 0);
			assert_int_equal(comp.cookie, 77);
			assert_int_equal(comp.status, 0);
			seen_rdma++;
			break;
		default:
			fail_msg("event with cookie %llu",
				 (unsigned long long)ev.cookie);
		}
	}
	assert_int_equal(seen_oob, 1);
	assert_int_equal(seen_rdma, 1);
	/* taken: the bits are clear now */
	assert_false(clanq_tw_fired(&tw_r));
	assert_false(clanq_tw_fired(&tw_p));
	assert_int_equal(clanq_ep_tw_take(&o.ep, tw_r.bit / 64), 0);
	assert_int_equal(itest_ctr(&o.ep.counters->tw_fires), 2);
	assert_int_equal(itest_ctr(&o.ep.counters->tw_flushes), 1);
	assert_int_equal(clanq_evq_wait(&evq, &ev, 0), -ETIMEDOUT);
	printf("tripwire: evq: %u tripwire, %u OOB, %u RDMA events\n",
	       seen_tw, seen_oob, seen_rdma);

	assert_int_equal(clanq_ep_destroy(&tx), 0);
	assert_int_equal(clanq_close(&tx_dev), 0);
	assert_ok(tw_writer_close(&w));
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&src), 0);
	assert_int_equal(clanq_evq_destroy(&evq), 0);
	assert_int_equal(clanq_ep_destroy(&ep_oob), 0);
	assert_int_equal(clanq_ep_destroy(&ep_rdma), 0);
	assert_ok(tw_owner_close(&o));
}

/*
 * Garbage for every new ioctl.
 */

static struct clanq_ioc_tw_create tw_create_arg(const struct tw_owner *o,
						uint64_t off, uint64_t len)
{
	struct clanq_ioc_tw_create c;

	memset(&c, 0, sizeof(c));
	c.ep = o->ep.addr.id;
	c.region = o->r.addr.id;
	c.off = off;
	c.len = len;
	return c;
}

static struct clanq_ioc_tw_ctl tw_ctl_arg(uint32_t id)
{
	struct clanq_ioc_tw_ctl t;

	memset(&t, 0, sizeof(t));
	t.id = id;
	return t;
}

static struct clanq_ioc_tw_wait tw_wait_arg(uint32_t id, uint64_t off)
{
	struct clanq_ioc_tw_wait t;

	memset(&t, 0, sizeof(t));
	t.id = id;
	t.off = off;
	t.old = 0;
	t.timeout_ns = 1;
	return t;
}

static struct clanq_ioc_ap_flush ap_flush_arg(uint32_t ap, uint64_t off, uint64_t len)
{
	struct clanq_ioc_ap_flush f;

	memset(&f, 0, sizeof(f));
	f.ap = ap;
	f.off = off;
	f.len = len;
	return f;
}

static const unsigned long tw_ctl_cmds[] = {
	CLANQ_IOC_TW_ARM, CLANQ_IOC_TW_DISARM, CLANQ_IOC_TW_DESTROY,
};

static void tw_create_refuses_garbage(struct tw_owner *o, struct tw_owner *other)
{
	struct clanq_ioc_tw_create c;
	int fd = o->dev.fd;

	c = tw_create_arg(o, 0, 8);
	c.reserved0 = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), EINVAL);
	c = tw_create_arg(o, 0, 8);
	c.reserved[1] = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), EINVAL);
	c = tw_create_arg(o, 0, 8);
	c.flags = CLANQ_TW_FLAGS + 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), EINVAL);
	c.flags = 1u << 31;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), EINVAL);
	/* bad ids */
	c = tw_create_arg(o, 0, 8);
	c.ep = 0x7ffffff0u;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ENOENT);
	c = tw_create_arg(o, 0, 8);
	c.region = 0x7ffffff0u;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ENOENT);
	/* another context's region, another context's endpoint */
	c = tw_create_arg(o, 0, 8);
	c.region = other->r.addr.id;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ENOENT);
	c = tw_create_arg(o, 0, 8);
	c.ep = other->ep.addr.id;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ENOENT);
	/* lengths and ranges */
	c = tw_create_arg(o, 0, CLANQ_TW_MIN_LEN - 1);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), EINVAL);
	c = tw_create_arg(o, 0, 0);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), EINVAL);
	c = tw_create_arg(o, ~0ull - 3, 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ERANGE);
	c = tw_create_arg(o, 8, ~0ull);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ERANGE);
	c = tw_create_arg(o, REGION - 7, 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ERANGE);
	c = tw_create_arg(o, 0, REGION + 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), ERANGE);
	/* the edge is fine */
	c = tw_create_arg(o, REGION - 8, 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_CREATE, &c), 0);
	{
		struct clanq_ioc_tw_ctl t = tw_ctl_arg(c.id);

		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_DESTROY, &t), 0);
	}
}

static void tw_ctl_and_wait_refuse_garbage(struct tw_owner *o,
					   struct tw_owner *other,
					   const struct clanq_tw *tw,
					   const struct clanq_tw *other_tw)
{
	struct clanq_ioc_tw_wait wt;
	struct clanq_ioc_tw_ctl t;
	int fd = o->dev.fd;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(tw_ctl_cmds); i++) {
		t = tw_ctl_arg(tw->id);
		t.flags = 1;
		assert_int_equal(itest_ioctl_err(fd, tw_ctl_cmds[i], &t), EINVAL);
		t = tw_ctl_arg(tw->id);
		t.reserved[0] = 1;
		assert_int_equal(itest_ioctl_err(fd, tw_ctl_cmds[i], &t), EINVAL);
		t = tw_ctl_arg(tw->id);
		t.reserved[1] = ~0ull;
		assert_int_equal(itest_ioctl_err(fd, tw_ctl_cmds[i], &t), EINVAL);
		t = tw_ctl_arg(0);
		assert_int_equal(itest_ioctl_err(fd, tw_ctl_cmds[i], &t), ENOENT);
		t = tw_ctl_arg(0x7ffffff0u);
		assert_int_equal(itest_ioctl_err(fd, tw_ctl_cmds[i], &t), ENOENT);
		/* another context's tripwire, by its id */
		t = tw_ctl_arg(other_tw->id);
		assert_int_equal(itest_ioctl_err(fd, tw_ctl_cmds[i], &t), ENOENT);
	}
	/* the other context's tripwire was not touched */
	t = tw_ctl_arg(other_tw->id);
	assert_int_equal(itest_ioctl_err(other->dev.fd, CLANQ_IOC_TW_ARM, &t), 0);

	/* TW_WAIT (the tripwire is [TW_OFF, TW_OFF + TW_LEN), word WORD) */
	wt = tw_wait_arg(tw->id, WORD);
	wt.flags = ~CLANQ_TW_WAIT_FLUSH;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	wt = tw_wait_arg(tw->id, WORD);
	wt.reserved0 = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	/* its flush is refused as AP_FLUSH would be, and nothing is waited for */
	wt = tw_wait_arg(tw->id, WORD);
	wt.flags = CLANQ_TW_WAIT_FLUSH;
	wt.flush_ap = 0;
	wt.flush_len = 8;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), ENOENT);
	wt.flush_ap = 0x7fffffff;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), ENOENT);
	wt = tw_wait_arg(tw->id, WORD);
	wt.reserved[0] = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	wt = tw_wait_arg(tw->id, WORD);
	wt.reserved[1] = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	wt = tw_wait_arg(0x7ffffff0u, WORD);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), ENOENT);
	wt = tw_wait_arg(other_tw->id, WORD);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), ENOENT);
	/* unaligned, inside the tripwire */
	wt = tw_wait_arg(tw->id, WORD + 1);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	wt = tw_wait_arg(tw->id, WORD + 4);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	/* aligned, outside it (before, straddling the end, after) */
	wt = tw_wait_arg(tw->id, WORD - 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	wt = tw_wait_arg(tw->id, WORD + 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	wt = tw_wait_arg(tw->id, WORD + 64);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	wt = tw_wait_arg(tw->id, ~7ull);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), EINVAL);
	/* good ones: a changed word at once, an unchanged one times out */
	wt = tw_wait_arg(tw->id, WORD);
	wt.old = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), 0);
	wt = tw_wait_arg(tw->id, WORD);
	wt.timeout_ns = ITEST_NS_PER_MS;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_TW_WAIT, &wt), ETIMEDOUT);
	/* and left it disarmed, as it found it */
	/* the library refuses a word outside the tripwire itself */
	assert_int_equal(clanq_tw_wait_change((struct clanq_tw *)tw,
					      (const uint64_t *)((char *)o->r.mem + WORD + 8),
					      0, 0), -EINVAL);
}

static void ap_flush_and_the_armed_bitmap_refuse_garbage(struct tw_owner *o,
							 struct tw_writer *w)
{
	struct clanq_ioc_ap_flush f;
	struct clanq_ap ro;
	void *m;
	int fd = w->dev.fd;

	f = ap_flush_arg(w->ap.id, 0, 8);
	f.flags = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), EINVAL);
	f = ap_flush_arg(w->ap.id, 0, 8);
	f.reserved0 = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), EINVAL);
	f = ap_flush_arg(w->ap.id, 0, 8);
	f.reserved[1] = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), EINVAL);
	f = ap_flush_arg(0x7ffffff0u, 0, 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), ENOENT);
	/* another context's aperture */
	f = ap_flush_arg(w->ap.id, 0, 8);
	assert_int_equal(itest_ioctl_err(o->dev.fd, CLANQ_IOC_AP_FLUSH, &f),
			 ENOENT);
	/* beyond the window, and overflowing */
	f = ap_flush_arg(w->ap.id, REGION, 1);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), ERANGE);
	f = ap_flush_arg(w->ap.id, REGION - 7, 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), ERANGE);
	f = ap_flush_arg(w->ap.id, 8, ~0ull);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), ERANGE);
	f = ap_flush_arg(w->ap.id, ~0ull, 2);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), ERANGE);
	assert_int_equal(clanq_ap_flush(&w->ap, REGION, 1), -ERANGE);
	assert_int_equal(clanq_ap_flush_armed(&w->ap, REGION - 1, 2), -ERANGE);
	/* good ones: the whole window, and nothing */
	f = ap_flush_arg(w->ap.id, 0, REGION);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), 0);
	assert_int_equal(f.fired, 0);
	f = ap_flush_arg(w->ap.id, REGION, 0);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), 0);

	/* a read-only import: mapped, but no flush */
	assert_int_equal(clanq_ap_import(&w->dev, &ro, o->r.addr, o->key, 0,
					 REGION, CLANQ_RIGHT_READ), 0);
	f = ap_flush_arg(ro.id, 0, 8);
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_FLUSH, &f), EACCES);
	assert_int_equal(clanq_ap_flush_armed(&ro, 0, 8), -EACCES);
	assert_true(ro.armed_map_size > 0);

	/* the armed bitmap: read-only, whole, shared */
	m = mmap(NULL, ro.armed_map_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, (off_t)ro.armed_mmap_offset);
	assert_true(m == MAP_FAILED);
	assert_int_equal(errno, EACCES);
	m = mmap(NULL, ro.armed_map_size, PROT_WRITE, MAP_SHARED, fd,
		 (off_t)ro.armed_mmap_offset);
	assert_true(m == MAP_FAILED);
	assert_int_equal(errno, EACCES);
	m = mmap(NULL, w->ap.armed_map_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, (off_t)w->ap.armed_mmap_offset);
	assert_true(m == MAP_FAILED);
	assert_int_equal(errno, EACCES);
	m = mmap(NULL, ro.armed_map_size, PROT_READ, MAP_SHARED, fd,
		 (off_t)ro.armed_mmap_offset);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m, ro.armed_map_size, PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(munmap(m, ro.armed_map_size), 0);
	/* nor the writer's own, mapped by clanq_ap_map() */
	assert_int_equal(mprotect((void *)w->ap.armed, w->ap.armed_map_size,
				  PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(clanq_ap_close(&ro), 0);
}

static void every_new_ioctl_refuses_garbage_with_its_exact_errno(void **state)
{
	struct tw_owner o, other;
	struct clanq_tw tw, other_tw, many[64];
	struct clanq_ep_attr attr = { .tw_slots = 64 };
	struct clanq_ep small;
	struct tw_writer w;
	unsigned int i;

	(void)state;
	assert_ok(tw_owner_open(&o, 0, REGION));
	assert_ok(tw_owner_open(&other, 0, REGION));
	assert_int_equal(clanq_tw_create(&o.ep, &tw, &o.r, TW_OFF, TW_LEN, 0), 0);
	/* ids are the context's own: make the other's differ from ours */
	do {
		assert_int_equal(clanq_tw_create(&other.ep, &other_tw, &other.r,
						 TW_OFF, TW_LEN, 0), 0);
		if (other_tw.id > tw.id + 8)
			break;
		assert_int_equal(clanq_tw_destroy(&other_tw), 0);
	} while (1);
	assert_ok(tw_writer_open(&w, 1, o.r.addr, o.key, REGION));

	tw_create_refuses_garbage(&o, &other);
	tw_ctl_and_wait_refuse_garbage(&o, &other, &tw, &other_tw);
	assert_false(clanq_ap_armed(&w.ap, TW_OFF, TW_LEN));
	ap_flush_and_the_armed_bitmap_refuse_garbage(&o, &w);

	/* an endpoint owns at most its tw_slots */
	assert_int_equal(clanq_ep_create_attr(&o.dev, &small, &attr), 0);
	for (i = 0; i < 64; i++)
		assert_int_equal(clanq_tw_create(&small, &many[i], &o.r, i * 8,
						 8, 0), 0);
	assert_int_equal(clanq_tw_create(&small, &tw, &o.r, 0, 8, 0), -ENOSPC);
	assert_int_equal(clanq_tw_destroy(&many[5]), 0);
	assert_int_equal(clanq_tw_create(&small, &many[5], &o.r, 40, 8, 0), 0);
	/* a destroyed endpoint's tripwires are gone with it */
	assert_int_equal(clanq_ep_destroy(&small), 0);
	assert_int_equal(clanq_tw_arm(&many[0]), -ENOENT);

	/* a destroyed tripwire's id is refused */
	assert_int_equal(clanq_tw_destroy(&tw), 0);
	assert_int_equal(clanq_tw_destroy(&tw), -ENOENT);
	assert_int_equal(clanq_tw_wait_change(&tw, (const uint64_t *)
					      ((char *)o.r.mem + WORD), 0, -1),
			 -ENOENT);
	assert_int_equal(clanq_tw_destroy(&other_tw), 0);
	assert_int_equal(clanq_tw_arm(&other_tw), -ENOENT);
	assert_int_equal(clanq_tw_disarm(&other_tw), -ENOENT);
	assert_int_equal(clanq_tw_destroy(&other_tw), -ENOENT);

	assert_ok(tw_writer_close(&w));
	assert_ok(tw_owner_close(&other));
	assert_ok(tw_owner_close(&o));
}

/*
 * Killed processes leak nothing.
 */

#define USER_BUDGET	(256ul << 10)
#define KILL_ROUNDS	6

/*
 * How many one-page regions an unprivileged user can hold right now:
 * what the user's budget has left (the child exits with it).
 */
static void probe_child(void *arg)
{
	struct clanq_region r;
	struct clanq_dev dev;
	unsigned int n = 0;
	int err;

	(void)arg;
	itest_become_nobody();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	while (!(err = clanq_region_alloc(&dev, &r, 4096)))
		n++;
	CHILD_CHECK_INT(err, -ENOMEM);
	CHILD_CHECK_INT(clanq_close(&dev), 0);	/* and the mappings go with us */
	_exit(n > 200 ? 255 : (int)n);
}

static unsigned int user_budget_pages(void)
{
	int status;
	pid_t pid = itest_fork(probe_child, NULL);

	assert_true(pid > 0);
	status = itest_wait(pid, 60 * ITEST_NS_PER_S);
	assert_true(status >= 0 && WIFEXITED(status));
	assert_true(WEXITSTATUS(status) != 1 && WEXITSTATUS(status) != 255);
	return WEXITSTATUS(status);
}

/* Shared with the victims and the survivor. */
struct kill_sh {
	uint64_t region;	/* victim's / survivor's region, packed */
	uint64_t key;
	uint32_t ready;		/* victim: set up (armed, or about to wait) */
	uint32_t ack;		/* survivor: last value it saw */
	uint32_t stop;
};

/* A victim: sleeps in clanq_tw_wait_change() with no timeout. */
static void victim_waiter(void *arg)
{
	struct kill_sh *sh = arg;
	struct tw_owner o;
	struct clanq_tw tw;
	const char *why;
	int r;

	itest_become_nobody();
	why = tw_owner_open(&o, 0, REGION);
	if (why)
		CHILD_FAIL("%s", why);
	CHILD_CHECK_INT(clanq_tw_create(&o.ep, &tw, &o.r, TW_OFF, TW_LEN, 0), 0);
	clanq_tw_set_spin(&tw, 0);
	__atomic_store_n(&sh->key, o.key, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->region, itest_addr_pack(o.r.addr), __ATOMIC_RELAXED);
	__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
	r = clanq_tw_wait_change(&tw, (const uint64_t *)((char *)o.r.mem + WORD),
				 0, -1);
	CHILD_FAIL("clanq_tw_wait_change returned %d", r);
}

/*
 * A victim holding armed tripwires (one-shot and persistent, on two
 * regions, one exported, with an evq registration), asleep elsewhere.
 */
static void victim_holder(void *arg)
{
	struct kill_sh *sh = arg;
	struct clanq_region r2;
	struct clanq_evq evq;
	struct clanq_tw tw[8];
	struct tw_owner o;
	const char *why;
	unsigned int i;

	itest_become_nobody();
	why = tw_owner_open(&o, 0, REGION);
	if (why)
		CHILD_FAIL("%s", why);
	CHILD_CHECK_INT(clanq_region_alloc(&o.dev, &r2, 4096), 0);
	CHILD_CHECK_INT(clanq_evq_create(&o.dev, &evq, 2), 0);
	CHILD_CHECK(clanq_evq_register(&evq, &o.ep, CLANQ_EV_ALL, 1) >= 0);
	for (i = 0; i < 8; i++)
		CHILD_CHECK_INT(clanq_tw_create(&o.ep, &tw[i],
						i % 2 ? &r2 : &o.r, i * 64, 64,
						CLANQ_TW_ARMED |
						(i % 4 < 2 ? CLANQ_TW_PERSISTENT : 0)),
				0);
	__atomic_store_n(&sh->key, o.key, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->region, itest_addr_pack(o.r.addr), __ATOMIC_RELAXED);
	__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
}

/* The survivor: waits for the word to change, acks each value. */
static void survivor(void *arg)
{
	struct kill_sh *sh = arg;
	volatile uint64_t *word;
	struct tw_owner o;
	struct clanq_tw tw;
	const char *why;
	uint64_t seen = 0;
	int r;

	why = tw_owner_open(&o, 1, REGION);
	if (why)
		CHILD_FAIL("%s", why);
	CHILD_CHECK_INT(clanq_tw_create(&o.ep, &tw, &o.r, WORD, 8, 0), 0);
	clanq_tw_set_spin(&tw, 0);
	word = (volatile uint64_t *)((char *)o.r.mem + WORD);
	__atomic_store_n(&sh->key, o.key, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->region, itest_addr_pack(o.r.addr), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		r = clanq_tw_wait_change(&tw, (const uint64_t *)word, seen, 100 * ITEST_NS_PER_MS);
		if (r == -ETIMEDOUT)
			continue;
		CHILD_CHECK_INT(r, 0);
		seen = *word;
		__atomic_store_n(&sh->ack, (uint32_t)seen, __ATOMIC_RELEASE);
	}
	CHILD_CHECK_INT(clanq_tw_destroy(&tw), 0);
	why = tw_owner_close(&o);
	if (why)
		CHILD_FAIL("%s", why);
}

static uint64_t wait_nonzero64(const uint64_t *w, pid_t pid, const char *who)
{
	uint64_t end = clanq_now_ns() + 20 * ITEST_NS_PER_S, v;

	while (!(v = __atomic_load_n(w, __ATOMIC_ACQUIRE))) {
		if (!itest_still_running(pid, who))
			fail_msg("%s ended early", who);
		if (clanq_now_ns() > end)
			fail_msg("%s not ready after 20 s", who);
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	return v;
}

/* Wait for a debugfs counter to come back to want. */
static void wait_stat(unsigned int nic, const char *key, long long want)
{
	uint64_t end = clanq_now_ns() + 20 * ITEST_NS_PER_S;
	long long v;

	while ((v = itest_nic_stat(nic, key)) != want) {
		if (clanq_now_ns() > end)
			fail_msg("clanq%u %s is %lld, expected %lld", nic, key, v,
				 want);
		itest_sleep_ns(10 * ITEST_NS_PER_MS);
	}
}

/* Write v to the survivor's word by PIO; it must ack it. */
static void survivor_round(struct kill_sh *ssh, struct tw_writer *sw, uint64_t v,
			   pid_t spid)
{
	uint64_t end = clanq_now_ns() + 20 * ITEST_NS_PER_S;

	assert_int_equal(clanq_ap_write(&sw->ap, WORD, &v, sizeof(v)), 0);
	while (__atomic_load_n(&ssh->ack, __ATOMIC_ACQUIRE) != (uint32_t)v) {
		if (!itest_still_running(spid, "survivor"))
			fail_msg("survivor ended early");
		if (clanq_now_ns() > end)
			fail_msg("survivor did not see %llu in 20 s",
				 (unsigned long long)v);
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
}

static void processes_killed_waiting_or_holding_armed_tripwires_leak_nothing(void **state)
{
	unsigned long saved = itest_param("max_user_bytes");
	long long ctx0, ctx1, eps0, eps1;
	unsigned int pages0, pages1, round, flushed = 0;
	struct kill_sh *sh, *ssh;
	struct tw_writer w, sw;
	struct clanq_addr region;
	uint64_t v = 0, end;
	pid_t pid, spid;
	int status;

	(void)state;
	sh = mmap(NULL, 2 * sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	ssh = sh + 1;
	memset(sh, 0, 2 * sizeof(*sh));
	itest_param_set("max_user_bytes", USER_BUDGET);
	ctx0 = itest_nic_stat(0, "contexts");
	ctx1 = itest_nic_stat(1, "contexts");
	eps0 = itest_nic_stat(0, "endpoints");
	eps1 = itest_nic_stat(1, "endpoints");
	assert_true(ctx0 >= 0 && ctx1 >= 0 && eps0 >= 0 && eps1 >= 0);
	pages0 = user_budget_pages();
	assert_true(pages0 >= 32);

	/* the survivor (root, node 1), written from node 0 throughout */
	spid = itest_fork(survivor, ssh);
	assert_true(spid > 0);
	region = itest_addr_unpack(wait_nonzero64(&ssh->region, spid, "survivor"));
	assert_ok(tw_writer_open(&sw, 0, region, ssh->key, REGION));
	survivor_round(ssh, &sw, ++v, spid);

	for (round = 0; round < KILL_ROUNDS; round++) {
		bool waiting = round % 2 == 0;
		const char *who = waiting ? "waiting victim" : "holding victim";

		memset(sh, 0, sizeof(*sh));
		pid = itest_fork(waiting ? victim_waiter : victim_holder, sh);
		assert_true(pid > 0);
		end = clanq_now_ns() + 20 * ITEST_NS_PER_S;
		while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) {
			assert_true(itest_still_running(pid, who));
			assert_true(clanq_now_ns() < end);
			itest_sleep_ns(ITEST_NS_PER_MS);
		}
		/* node 1 maps the victim's region and sees its armed bits */
		region = itest_addr_unpack(sh->region);
		assert_ok(tw_writer_open(&w, 1, region, sh->key, REGION));
		end = clanq_now_ns() + 20 * ITEST_NS_PER_S;
		while (!clanq_ap_armed(&w.ap, waiting ? WORD : 0, 8) ||
		       (waiting && proc_state(pid) != 'S')) {
			assert_true(itest_still_running(pid, who));
			assert_true(clanq_now_ns() < end);
			itest_sleep_ns(ITEST_NS_PER_MS);
		}
		/* a write beside (no wake), a flush of the holder's persistent one */
		if (!waiting) {
			uint64_t x = round;

			assert_int_equal(clanq_ap_write(&w.ap, 8, &x, 8), 0);
			flushed++;
		}
		survivor_round(ssh, &sw, ++v, spid);
		assert_true(itest_still_running(pid, who));
		kill(pid, SIGKILL);
		status = itest_wait(pid, 20 * ITEST_NS_PER_S);
		assert_true(status >= 0 && WIFSIGNALED(status) &&
			    WTERMSIG(status) == SIGKILL);
		/* the victim's region is gone: our aperture onto it says so */
		end = clanq_now_ns() + 20 * ITEST_NS_PER_S;
		while (clanq_ap_flush_armed(&w.ap, 0, 8) != -ENXIO) {
			assert_true(clanq_now_ns() < end);
			itest_sleep_ns(ITEST_NS_PER_MS);
		}
		assert_ok(tw_writer_close(&w));
		survivor_round(ssh, &sw, ++v, spid);
	}

	/* everything the victims held is back */
	wait_stat(0, "contexts", ctx0 + 1);	/* sw: our writer onto the survivor */
	wait_stat(1, "contexts", ctx1 + 1);	/* the survivor */
	wait_stat(0, "endpoints", eps0 + 1);
	wait_stat(1, "endpoints", eps1 + 1);
	pages1 = user_budget_pages();
	assert_int_equal(pages1, pages0);
	itest_param_set("max_user_bytes", saved);

	/* the survivor still wakes, and ends cleanly */
	survivor_round(ssh, &sw, ++v, spid);
	__atomic_store_n(&ssh->stop, 1, __ATOMIC_RELEASE);
	assert_true(itest_status_ok(itest_wait(spid, 30 * ITEST_NS_PER_S),
				    "survivor"));
	assert_ok(tw_writer_close(&sw));
	wait_stat(0, "contexts", ctx0);
	wait_stat(1, "contexts", ctx1);
	wait_stat(0, "endpoints", eps0);
	wait_stat(1, "endpoints", eps1);
	printf("tripwire: %u victims killed (%u holding armed tripwires), user budget %u pages before and after, survivor woke %llu times\n",
	       KILL_ROUNDS, KILL_ROUNDS / 2, pages0, (unsigned long long)v);
	(void)flushed;
	munmap(sh, 2 * sizeof(*sh));
}

/*
 * A wait spins by default only where its thread may run on two CPUs: on
 * one, the spin holds the CPU its writer (or the wire's completion work)
 * needs, and only adds to the wait.
 */
static void waits_spin_by_default_only_on_more_than_one_cpu(void **state)
{
	uint64_t evq_spin[2], tw_spin[2];
	cpu_set_t saved, one;
	struct tw_owner o;
	struct clanq_evq evq;
	struct clanq_tw tw;
	int cpus, pass;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
	cpus = CPU_COUNT(&saved);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	assert_ok(tw_owner_open(&o, 0, REGION));
	for (pass = 0; pass < 2; pass++) {
		/* pass 0 pinned to one CPU, pass 1 as the test started */
		assert_int_equal(sched_setaffinity(0, sizeof(cpu_set_t),
						   pass ? &saved : &one), 0);
		assert_int_equal(clanq_evq_create(&o.dev, &evq, 1), 0);
		assert_int_equal(clanq_tw_create(&o.ep, &tw, &o.r, TW_OFF,
						 TW_LEN, 0), 0);
		evq_spin[pass] = evq.spin_ns;
		tw_spin[pass] = tw.spin_ns;
		assert_int_equal(clanq_tw_destroy(&tw), 0);
		assert_int_equal(clanq_evq_destroy(&evq), 0);
	}
	assert_ok(tw_owner_close(&o));
	assert_int_equal(evq_spin[0], 0);
	assert_int_equal(tw_spin[0], 0);
	if (cpus < 2) {
		print_message("one CPU: the spinning half is not run\n");
		return;
	}
	assert_int_equal(evq_spin[1], CLANQ_EVQ_SPIN_NS_DEFAULT);
	assert_int_equal(tw_spin[1], CLANQ_EVQ_SPIN_NS_DEFAULT);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(a_pio_write_into_the_word_wakes_a_waiter_on_the_same_node),
		T(a_pio_write_into_the_word_wakes_a_waiter_across_nodes),
		T(an_rdma_write_into_the_word_wakes_a_waiter_on_the_same_node),
		T(an_rdma_write_into_the_word_wakes_a_waiter_across_nodes),
		T(a_waiter_wakes_with_eidrm_on_destroy_and_enxio_on_region_free),
		T(a_pio_writer_enters_the_driver_only_when_a_tripwire_is_armed_where_it_wrote),
		T(one_flush_firing_two_endpoints_tripwires_counts_one_flush_on_each),
		T(tripwire_events_arrive_on_a_unified_evq_beside_oob_and_rdma_events),
		T(every_new_ioctl_refuses_garbage_with_its_exact_errno),
		T(processes_killed_waiting_or_holding_armed_tripwires_leak_nothing),
		T(waits_spin_by_default_only_on_more_than_one_cpu),
	};

	return cmocka_run_group_tests_name("tripwire", tests, NULL, NULL);
}
