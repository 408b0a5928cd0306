// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for include/clanq/queue.h, the SPSC queue shared by the
 * driver and libclanq, built here as user space C11: two threads, a
 * producer and a consumer, move millions of messages through one queue.
 *
 * CLANQ_STRESS_MSGS overrides the number of messages each two-thread
 * stress test moves (default 10,000,000; 3,000,000 under TSan, see
 * STRESS_DEFAULT_MSGS).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <clanq.h>
#include <clanq/queue.h>

#include "queue_fixture.h"

/* =====================================================================
 * Two-thread stress
 *
 * A message fills its slot: word 0 is its sequence number, the last word
 * a 64-bit hash of everything before it, the words between a payload
 * derived from the sequence number. The consumer demands that every
 * sequence number be exactly the previous one plus one (nothing lost,
 * duplicated or reordered) and that every hash match (nothing torn,
 * stale or overwritten while being read).
 */

/*
 * 10M messages per stress test took 62-64 s under ThreadSanitizer on
 * the 2-core development machine (about 5.5 s per million over the four
 * tests), against 12 s for the whole ASan run; TSan builds default to
 * fewer so that they can run on every change. CLANQ_STRESS_MSGS=10000000
 * restores the full count.
 */
#ifdef HAVE_TSAN
#define STRESS_DEFAULT_MSGS	3000000ull
#else
#define STRESS_DEFAULT_MSGS	10000000ull
#endif
#define STRESS_MAX_SLOT		512u
#define SPINS_BEFORE_YIELD	1024u	/* then the peer is likely off-CPU */
#define STALL_SECONDS		30.0

static uint64_t stress_msgs = STRESS_DEFAULT_MSGS;

enum io_mode {
	IO_COPY,	/* clanq_q_put() / clanq_q_get() */
	IO_INPLACE,	/* prod_slot + publish(1) / cons_slot + release(1) */
	IO_BATCH,	/* up to batch slots per publish / release */
};

static const char *const io_names[] = { "copy", "in-place", "batch" };

struct stress_cfg {
	uint32_t nr_slots;
	uint32_t slot_size;
	enum io_mode prod_mode;
	enum io_mode cons_mode;
	uint32_t batch;
};

enum stress_err {
	SE_NONE,
	SE_SEQ,		/* lost, duplicated or reordered */
	SE_CSUM,	/* payload does not match its hash */
	SE_LOST,	/* producer done, queue empty, messages missing */
	SE_STALL_PROD,	/* producer made no progress for STALL_SECONDS */
	SE_STALL_CONS,
};

struct stress {
	struct seg *s;
	const struct stress_cfg *cfg;
	uint64_t msgs;
	int stop;			/* atomic: someone found a failure */
	int prod_done;			/* atomic: every message published */
	int err;			/* atomic: first enum stress_err */
	uint64_t err_want, err_got;	/* by the thread that set err */
	uint64_t produced;		/* by the producer thread */
	uint64_t consumed;		/* by the consumer thread */
};

struct spinner {
	bool last_look;		/* consumer: producer done, look once more */
	uint64_t done;		/* progress when this wait began */
	uint32_t spins;		/* in this wait */
	double t_wait;		/* when this wait began to yield */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t msg_hash(const uint64_t *w, uint32_t n)
{
	uint64_t h = 0x243f6a8885a308d3ull;
	uint32_t i;

	for (i = 0; i < n; i++)
		h = mix64(h ^ w[i]);
	return h;
}

static void msg_fill(void *slot, uint32_t size, uint64_t seq)
{
	uint64_t *w = slot;
	uint32_t i, n = size / 8;

	w[0] = seq;
	for (i = 1; i < n - 1; i++)
		w[i] = seq * 0x100000001b3ull + i;
	w[n - 1] = msg_hash(w, n - 1);
}

static void stress_fail(struct stress *st, enum stress_err e, uint64_t want,
			uint64_t got)
{
	int none = SE_NONE;

	if (__atomic_compare_exchange_n(&st->err, &none, e, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		st->err_want = want;
		st->err_got = got;
	}
	__atomic_store_n(&st->stop, 1, __ATOMIC_RELAXED);
}

static bool msg_check(struct stress *st, const void *slot, uint64_t want)
{
	const uint64_t *w = slot;
	uint32_t n = st->cfg->slot_size / 8;

	if (w[0] != want) {
		stress_fail(st, SE_SEQ, want, w[0]);
		return false;
	}
	if (w[n - 1] != msg_hash(w, n - 1)) {
		stress_fail(st, SE_CSUM, want, w[n - 1]);
		return false;
	}
	return true;
}

/*
 * Called each time a side finds the queue full or empty. Pause while the
 * wait is short: the peer is running and the next handoff is a cache
 * miss away. A long wait means the peer is off-CPU (two cores, shared
 * with whatever else runs, and TSan's slowdown), so from then on yield
 * to it instead of burning the rest of the time slice. Yielding early
 * would put a system call into nearly every handoff of a 2-slot queue.
 * Returns false when the run is over (a failure here or elsewhere).
 */
static bool stress_wait(struct stress *st, struct spinner *sp,
			uint64_t done, enum stress_err stall)
{
	double now;

	if (__atomic_load_n(&st->stop, __ATOMIC_RELAXED))
		return false;
	/*
	 * A consumer that still finds the queue empty after seeing that the
	 * producer has published everything (acquire, pairing with the
	 * producer's release) has lost messages: say so now rather than
	 * wait for the stall timeout.
	 */
	if (stall == SE_STALL_CONS &&
	    __atomic_load_n(&st->prod_done, __ATOMIC_ACQUIRE)) {
		if (sp->last_look) {
			stress_fail(st, SE_LOST, done, 0);
			return false;
		}
		sp->last_look = true;
		return true;
	}
	if (done != sp->done) {
		sp->done = done;
		sp->spins = 0;
	}
	if (++sp->spins < SPINS_BEFORE_YIELD) {
		clanq_cpu_relax();
		return true;
	}
	sched_yield();
	if (sp->spins == SPINS_BEFORE_YIELD) {
		sp->t_wait = now_s();
	} else if (sp->spins % 1024 == 0) {
		now = now_s();
		if (now - sp->t_wait > STALL_SECONDS) {
			stress_fail(st, stall, done, 0);
			return false;
		}
	}
	return true;
}

static void *stress_producer(void *arg)
{
	struct stress *st = arg;
	struct clanq_queue *q = &st->s->p;
	const struct stress_cfg *cfg = st->cfg;
	struct spinner sp = { .done = 0 };
	uint64_t msg[STRESS_MAX_SLOT / 8];
	uint64_t seq = 0;
	uint32_t n, i;

	while (seq < st->msgs) {
		switch (cfg->prod_mode) {
		case IO_COPY:
			msg_fill(msg, cfg->slot_size, seq);
			while (!clanq_q_put(q, msg))
				if (!stress_wait(st, &sp, seq, SE_STALL_PROD))
					goto out;
			seq++;
			break;
		case IO_INPLACE:
			while (!clanq_q_prod_space(q))
				if (!stress_wait(st, &sp, seq, SE_STALL_PROD))
					goto out;
			msg_fill(clanq_q_prod_slot(q), cfg->slot_size, seq);
			clanq_q_prod_publish(q, 1);
			seq++;
			break;
		case IO_BATCH:
			while (!(n = clanq_q_prod_space(q)))
				if (!stress_wait(st, &sp, seq, SE_STALL_PROD))
					goto out;
			if (n > cfg->batch)
				n = cfg->batch;
			if (n > st->msgs - seq)
				n = st->msgs - seq;
			for (i = 0; i < n; i++)
				msg_fill(clanq_q_slot(q, q->own + i),
					 cfg->slot_size, seq + i);
			clanq_q_prod_publish(q, n);
			seq += n;
			break;
		}
	}
out:
	st->produced = seq;
	__atomic_store_n(&st->prod_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *stress_consumer(void *arg)
{
	struct stress *st = arg;
	struct clanq_queue *q = &st->s->c;
	const struct stress_cfg *cfg = st->cfg;
	struct spinner sp = { .done = 0 };
	uint64_t msg[STRESS_MAX_SLOT / 8];
	uint64_t seq = 0;
	uint32_t n, i;

	while (seq < st->msgs) {
		switch (cfg->cons_mode) {
		case IO_COPY:
			while (!clanq_q_get(q, msg))
				if (!stress_wait(st, &sp, seq, SE_STALL_CONS))
					goto out;
			if (!msg_check(st, msg, seq))
				goto out;
			seq++;
			break;
		case IO_INPLACE:
			while (!clanq_q_cons_avail(q))
				if (!stress_wait(st, &sp, seq, SE_STALL_CONS))
					goto out;
			if (!msg_check(st, clanq_q_cons_slot(q), seq))
				goto out;
			clanq_q_cons_release(q, 1);
			seq++;
			break;
		case IO_BATCH:
			while (!(n = clanq_q_cons_avail(q)))
				if (!stress_wait(st, &sp, seq, SE_STALL_CONS))
					goto out;
			if (n > cfg->batch)
				n = cfg->batch;
			for (i = 0; i < n; i++)
				if (!msg_check(st, clanq_q_slot(q, q->own + i),
					       seq + i))
					goto out;
			clanq_q_cons_release(q, n);
			seq += n;
			break;
		}
	}
out:
	st->consumed = seq;
	return NULL;
}

/*
 * One stress test: a queue of nr_slots x slot_size bytes, a producer
 * thread and a consumer thread moving stress_msgs messages through it in
 * the given modes, up to batch slots at a time in IO_BATCH.
 */
static void run_stress(uint32_t nr_slots, uint32_t slot_size,
		       enum io_mode prod_mode, enum io_mode cons_mode,
		       uint32_t batch)
{
	static const char *const errs[] = {
		[SE_NONE] = "none",
		[SE_SEQ] = "sequence gap (lost, duplicated or reordered)",
		[SE_CSUM] = "bad checksum (torn, stale or overwritten slot)",
		[SE_LOST] = "producer finished but message never arrived",
		[SE_STALL_PROD] = "producer stalled",
		[SE_STALL_CONS] = "consumer stalled",
	};
	const struct stress_cfg cfg = {
		.nr_slots = nr_slots, .slot_size = slot_size,
		.prod_mode = prod_mode, .cons_mode = cons_mode, .batch = batch,
	};
	struct stress st = { .cfg = &cfg, .msgs = stress_msgs };
	pthread_t prod, cons;
	unsigned char tail[STRESS_MAX_SLOT];
	double t0, t;

	assert_true(cfg.slot_size >= 16 && cfg.slot_size <= STRESS_MAX_SLOT);
	set_ctx("stress %u x %u, producer %s, consumer %s", cfg.nr_slots,
		cfg.slot_size, io_names[cfg.prod_mode],
		io_names[cfg.cons_mode]);
	st.s = seg_new(cfg.nr_slots, cfg.slot_size);

	t0 = now_s();
	assert_int_equal(pthread_create(&cons, NULL, stress_consumer, &st), 0);
	if (pthread_create(&prod, NULL, stress_producer, &st)) {
		stress_fail(&st, SE_STALL_PROD, 0, 0);
		pthread_join(cons, NULL);
		fail_msg("%s: pthread_create failed", ctx);
	}
	pthread_join(prod, NULL);
	pthread_join(cons, NULL);
	t = now_s() - t0;
	print_message("    %s: %" PRIu64 " msgs in %.2f s (%.2f M/s)\n", ctx,
		      st.consumed, t, st.consumed / t / 1e6);

	if (st.err != SE_NONE)
		fail_msg("%s: %s at message %" PRIu64 " (got %#" PRIx64 ")",
			 ctx, errs[st.err], st.err_want, st.err_got);
	check_eq(st.produced, st.msgs);
	check_eq(st.consumed, st.msgs);
	/* nothing extra either: both sides end at the same index */
	check(!clanq_q_get(&st.s->c, tail));
	check_eq(load_word(st.s->p.prod), load_word(st.s->c.cons));
	check_eq(load_word(st.s->p.prod), st.msgs & (cfg.nr_slots - 1));
	seg_check_free(st.s);
}

static void test_stress_2_slots_put_get_delivers_all_once_in_order(void **state)
{
	(void)state;
	/*
	 * One item in flight at most: every message is a handoff. 40-byte
	 * slots: a 24-byte payload.
	 */
	run_stress(2, 40, IO_COPY, IO_COPY, 1);
}

static void test_stress_4_slots_in_place_delivers_all_once_in_order(
	void **state)
{
	(void)state;
	run_stress(4, 64, IO_INPLACE, IO_INPLACE, 1);
}

static void test_stress_64_slots_batch_to_get_delivers_all_once_in_order(
	void **state)
{
	(void)state;
	run_stress(64, 72, IO_BATCH, IO_COPY, 16);
}

static void test_stress_1024_slots_batch_delivers_all_once_in_order(
	void **state)
{
	(void)state;
	run_stress(1024, 64, IO_BATCH, IO_BATCH, 64);
}

#define T(f)	cmocka_unit_test_teardown(f, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_stress_2_slots_put_get_delivers_all_once_in_order),
		T(test_stress_4_slots_in_place_delivers_all_once_in_order),
		T(test_stress_64_slots_batch_to_get_delivers_all_once_in_order),
		T(test_stress_1024_slots_batch_delivers_all_once_in_order),
	};
	const char *env = getenv("CLANQ_STRESS_MSGS");

	if (env && *env) {
		char *end;

		errno = 0;
		stress_msgs = strtoull(env, &end, 0);
		if (errno || *end || !stress_msgs || *env == '-') {
			fprintf(stderr, "CLANQ_STRESS_MSGS=%s: want a positive "
				"integer\n", env);
			return 2;
		}
	}
	print_message("stress tests: %" PRIu64 " messages each\n",
		      stress_msgs);
	return cmocka_run_group_tests_name("queue_stress", tests, NULL, NULL);
}
