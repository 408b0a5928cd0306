// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * EVQ_WAIT with CLANQ_EVQ_WAIT_ARM (issue 24, part 3): the blocking
 * receive of a loop over many connections in one system call. It makes
 * the listed flushes, arms the listed tripwires, compares their watched
 * words, and returns at once if one moved (changed says how many), else
 * sleeps on the evq; garbage (counts, pointers, entries, ids) is refused
 * with its exact errno before anything is armed or slept; and the net's
 * server loop, clanq_net_wait(), built on it, answers a blocking echo
 * with at most two system calls a round trip at each end.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>
#include <clanq/admin.h>
#include <clanq/net.h>

#include "itest.h"
#include "tw_fixture.h"

#define REGION		(2 * 4096)
/* the tripwire [TW_OFF, TW_OFF + TW_LEN) holds the words WORD and WORD2 */
#define TW_OFF		64
#define TW_LEN		64
#define WORD		64
#define WORD2		72
/* a call that must not sleep is given this long, and must return well before */
#define LONG_NS		(10 * ITEST_NS_PER_S)
#define QUICK_NS	(2 * ITEST_NS_PER_S)
#define SERVICE		4242
#define ECHO_WARM	20
#define ECHO_RTS	200

static void assert_ok(const char *why)
{
	if (why)
		fail_msg("%s", why);
}

/* The owner's side: a tripwire on its region, its endpoint on an evq. */
struct env {
	struct tw_owner o;
	struct tw_writer w;	/* NIC 1, PIO onto the owner's region */
	struct clanq_tw tw;
	struct clanq_evq evq;
	int reg;
};

static void env_open(struct env *e)
{
	assert_ok(tw_owner_open(&e->o, 0, REGION));
	assert_int_equal(clanq_tw_create(&e->o.ep, &e->tw, &e->o.r, TW_OFF, TW_LEN, 0), 0);
	assert_int_equal(clanq_evq_create(&e->o.dev, &e->evq, 4), 0);
	e->reg = clanq_evq_register(&e->evq, &e->o.ep, CLANQ_EV_TRIPWIRE, 7);
	assert_true(e->reg >= 0);
	assert_ok(tw_writer_open(&e->w, 1, e->o.r.addr, e->o.key, REGION));
}

static void env_close(struct env *e)
{
	assert_ok(tw_writer_close(&e->w));
	assert_int_equal(clanq_evq_destroy(&e->evq), 0);
	assert_int_equal(clanq_tw_destroy(&e->tw), 0);
	assert_ok(tw_owner_close(&e->o));
}

static uint64_t *word(struct env *e, uint64_t off)
{
	return (uint64_t *)((char *)e->o.r.mem + off);
}

/* Is the tripwire armed, as a PIO writer sees it? */
static bool armed(struct env *e)
{
	return clanq_ap_armed(&e->w.ap, WORD, 8);
}

static struct clanq_evq_arm tw_arm(const struct clanq_tw *tw, uint64_t off, uint64_t val)
{
	struct clanq_evq_arm a;

	memset(&a, 0, sizeof(a));
	a.id = tw->id;
	a.off = off;
	a.val = val;
	return a;
}

static struct clanq_ioc_evq_wait arm_arg(const struct clanq_evq *evq,
					 const struct clanq_evq_arm *a, uint32_t n,
					 uint64_t timeout_ns)
{
	struct clanq_ioc_evq_wait w;

	memset(&w, 0, sizeof(w));
	w.timeout_ns = timeout_ns;
	w.read_i = evq->ring.own;
	w.flags = CLANQ_EVQ_WAIT_ARM;
	w.arms = (uint64_t)(uintptr_t)a;
	w.nr_arms = n;
	return w;
}

/* EVQ_WAIT: its errno (0 for success); *ns how long it took. */
static int evq_wait(struct clanq_evq *evq, struct clanq_ioc_evq_wait *w, uint64_t *ns)
{
	uint64_t t0 = clanq_now_ns();
	int err = itest_ioctl_err(clanq_evq_fd(evq), CLANQ_IOC_EVQ_WAIT, w);

	*ns = clanq_now_ns() - t0;
	return err;
}

/* A call that must be refused with err, at once, with nothing armed. */
static void refused(struct env *e, struct clanq_ioc_evq_wait *w, int err)
{
	uint64_t ns;

	assert_int_equal(evq_wait(&e->evq, w, &ns), err);
	assert_true(ns < QUICK_NS);
	assert_false(armed(e));
}

/*
 * 1. A word that moved before the call: it returns at once, says how
 * many moved, and leaves every listed tripwire armed.
 */
static void returns_at_once_when_a_word_already_moved(void **state)
{
	struct clanq_ioc_evq_wait w;
	struct clanq_evq_arm a[3];
	struct env e;
	uint64_t ns;

	(void)state;
	env_open(&e);
	*word(&e, WORD) = 5;
	*word(&e, WORD2) = 9;
	a[0] = tw_arm(&e.tw, WORD, 4);
	w = arm_arg(&e.evq, a, 1, LONG_NS);
	assert_int_equal(evq_wait(&e.evq, &w, &ns), 0);
	assert_true(ns < QUICK_NS);
	assert_int_equal(w.changed, 1);
	assert_true(armed(&e));
	assert_int_equal(clanq_tw_disarm(&e.tw), 0);
	assert_false(armed(&e));

	/* two of three moved; one tripwire listed three times */
	a[0] = tw_arm(&e.tw, WORD, 5);
	a[1] = tw_arm(&e.tw, WORD2, 8);
	a[2] = tw_arm(&e.tw, WORD + 16, 1);
	w = arm_arg(&e.evq, a, 3, LONG_NS);
	assert_int_equal(evq_wait(&e.evq, &w, &ns), 0);
	assert_true(ns < QUICK_NS);
	assert_int_equal(w.changed, 2);
	assert_true(armed(&e));
	env_close(&e);
}

/* 2. Nothing moved: it arms, and sleeps until the time is up. */
static void arms_and_sleeps_when_nothing_moved(void **state)
{
	struct clanq_ioc_evq_wait w;
	struct clanq_evq_arm a[2];
	struct clanq_event ev;
	struct env e;
	uint64_t ns;

	(void)state;
	env_open(&e);
	*word(&e, WORD) = 3;
	a[0] = tw_arm(&e.tw, WORD, 3);
	a[1] = tw_arm(&e.tw, WORD2, 0);
	w = arm_arg(&e.evq, a, 2, 50 * ITEST_NS_PER_MS);
	assert_int_equal(evq_wait(&e.evq, &w, &ns), ETIMEDOUT);
	assert_true(ns >= 50 * ITEST_NS_PER_MS);
	assert_true(armed(&e));
	assert_false(clanq_tw_fired(&e.tw));
	assert_int_equal(clanq_evq_poll(&e.evq, &ev), -EAGAIN);
	env_close(&e);
}

/*
 * 3. A write after the arming wakes the sleeper: the PIO writer sees the
 * tripwire armed and flushes, which fires it, which posts the event.
 */
struct sleeper {
	struct env *e;
	struct clanq_ioc_evq_wait w;
	struct clanq_evq_arm a;
	int err, done;
	uint64_t ns;
};

static void *sleeper_fn(void *arg)
{
	struct sleeper *s = arg;

	s->err = evq_wait(&s->e->evq, &s->w, &s->ns);
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void a_write_after_the_arming_wakes_the_sleeper(void **state)
{
	struct sleeper s;
	struct clanq_event ev;
	struct env e;
	uint64_t v = 11, t0;
	pthread_t t;

	(void)state;
	env_open(&e);
	memset(&s, 0, sizeof(s));
	s.e = &e;
	s.a = tw_arm(&e.tw, WORD, 0);
	s.w = arm_arg(&e.evq, &s.a, 1, LONG_NS);
	assert_int_equal(pthread_create(&t, NULL, sleeper_fn, &s), 0);
	/* armed: from here a write either fires it or is seen by the compare */
	t0 = clanq_now_ns();
	while (!armed(&e) && clanq_now_ns() - t0 < LONG_NS)
		itest_sleep_ns(ITEST_NS_PER_MS);
	assert_true(armed(&e));
	itest_sleep_ns(20 * ITEST_NS_PER_MS);	/* most likely asleep by now */
	assert_false(__atomic_load_n(&s.done, __ATOMIC_ACQUIRE));
	assert_int_equal(clanq_ap_write(&e.w.ap, WORD, &v, sizeof(v)), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(s.err, 0);
	assert_true(s.ns < LONG_NS);
	/* it slept and was woken by the event; or it saw the word move */
	if (!s.w.changed) {
		assert_true(clanq_tw_fired(&e.tw));
		assert_int_equal(clanq_evq_poll(&e.evq, &ev), 0);
		assert_int_equal(ev.reg, e.reg);
		assert_int_equal(ev.cookie, 7);
	}
	env_close(&e);
}

/*
 * 4. The flushes come first: a writer that stored into a word the owner
 * sleeps on, and owes the flush, makes it in its own block.
 */
static void the_listed_flushes_are_made_before_the_wait(void **state)
{
	struct clanq_ioc_evq_wait w;
	struct clanq_evq_arm f;
	struct clanq_evq wevq;
	struct clanq_event ev;
	struct env e;
	uint64_t v = 21, ns;

	(void)state;
	env_open(&e);
	assert_int_equal(clanq_evq_create(&e.w.dev, &wevq, 2), 0);
	assert_int_equal(clanq_tw_arm(&e.tw), 0);
	assert_int_equal(clanq_ap_store(&e.w.ap, WORD, &v, sizeof(v)), 1);	/* owed */
	assert_false(clanq_tw_fired(&e.tw));
	memset(&f, 0, sizeof(f));
	f.id = e.w.ap.id;
	f.flags = CLANQ_EVQ_ARM_FLUSH;
	f.off = WORD;
	f.val = sizeof(v);
	w = arm_arg(&wevq, &f, 1, 20 * ITEST_NS_PER_MS);
	assert_int_equal(evq_wait(&wevq, &w, &ns), ETIMEDOUT);	/* nothing for the writer */
	assert_true(clanq_tw_fired(&e.tw));
	assert_int_equal(clanq_evq_poll(&e.evq, &ev), 0);
	assert_int_equal(ev.reg, e.reg);
	assert_int_equal(clanq_evq_destroy(&wevq), 0);
	env_close(&e);
}

/* 5. Vectors up to CLANQ_EVQ_ARM_MAX entries, on the stack or not. */
static void vectors_of_every_allowed_length_are_taken(void **state)
{
	static struct clanq_evq_arm a[CLANQ_EVQ_ARM_MAX];
	static const uint32_t lens[] = { 1, 8, 9, 100, CLANQ_EVQ_ARM_MAX };
	struct clanq_ioc_evq_wait w;
	struct env e;
	unsigned int i, k;
	uint64_t ns;

	(void)state;
	env_open(&e);
	*word(&e, WORD) = 1;
	for (k = 0; k < ARRAY_SIZE(lens); k++) {
		for (i = 0; i < lens[k]; i++)
			a[i] = tw_arm(&e.tw, WORD + (i % 8) * 8, i % 8 ? 0 : 2);
		w = arm_arg(&e.evq, a, lens[k], LONG_NS);
		assert_int_equal(evq_wait(&e.evq, &w, &ns), 0);
		assert_true(ns < QUICK_NS);
		assert_int_equal(w.changed, (lens[k] + 7) / 8);	/* the WORD ones */
		assert_true(armed(&e));
		assert_int_equal(clanq_tw_disarm(&e.tw), 0);
	}
	env_close(&e);
}

/*
 * 6. Garbage: the exact errno, at once, nothing armed, nothing slept;
 * and without the flag its words are reserved, as they were.
 */
static void garbage_is_refused_before_anything_is_armed(void **state)
{
	struct clanq_evq_arm a[2], *tail;
	struct clanq_ioc_evq_wait w, good;
	struct tw_owner other;
	struct clanq_tw other_tw;
	struct clanq_ap ro;
	long page = sysconf(_SC_PAGESIZE);
	struct env e;
	char *m;

	(void)state;
	env_open(&e);
	assert_ok(tw_owner_open(&other, 0, REGION));
	/* ids are the context's own: make the other's differ from ours */
	for (;;) {
		assert_int_equal(clanq_tw_create(&other.ep, &other_tw, &other.r,
						 TW_OFF, TW_LEN, 0), 0);
		if (other_tw.id > e.tw.id + 8)
			break;
		assert_int_equal(clanq_tw_destroy(&other_tw), 0);
	}
	a[0] = tw_arm(&e.tw, WORD, 0);
	good = arm_arg(&e.evq, a, 1, LONG_NS);

	/* flags, and the words without the flag */
	w = good;
	w.flags = 0x2;
	refused(&e, &w, EINVAL);
	w.flags = ~0u;
	refused(&e, &w, EINVAL);
	w = good;
	w.flags = 0;
	refused(&e, &w, EINVAL);	/* arms and nr_arms set: reserved */
	w.arms = 0;
	refused(&e, &w, EINVAL);	/* nr_arms */
	w.nr_arms = 0;
	w.changed = 1;
	refused(&e, &w, EINVAL);
	/* counts */
	w = good;
	w.nr_arms = 0;
	refused(&e, &w, EINVAL);
	w.nr_arms = CLANQ_EVQ_ARM_MAX + 1;
	refused(&e, &w, EINVAL);
	w.nr_arms = ~0u;
	refused(&e, &w, EINVAL);
	w = good;
	w.changed = 1;
	refused(&e, &w, EINVAL);
	w = good;
	w.read_i = e.evq.ring.mask + 1;
	refused(&e, &w, EINVAL);
	/* pointers */
	w = good;
	w.arms = 0;
	refused(&e, &w, EFAULT);
	w.arms = 8;
	refused(&e, &w, EFAULT);
	w.arms = ~0ull - 7;
	refused(&e, &w, EFAULT);
	w.arms = 0xffff888000000000ull;	/* the kernel's direct map */
	refused(&e, &w, EFAULT);
	/* a vector whose second entry runs into a page we may not read */
	m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m + page, page, PROT_NONE), 0);
	tail = (struct clanq_evq_arm *)(m + page - sizeof(*tail));
	*tail = a[0];
	w = good;
	w.arms = (uint64_t)(uintptr_t)tail;
	w.nr_arms = 2;
	refused(&e, &w, EFAULT);
	w.nr_arms = 1;		/* the one entry that is readable: taken */
	w.timeout_ns = ITEST_NS_PER_MS;
	assert_int_equal(itest_ioctl_err(clanq_evq_fd(&e.evq), CLANQ_IOC_EVQ_WAIT, &w),
			 ETIMEDOUT);
	assert_true(armed(&e));
	assert_int_equal(clanq_tw_disarm(&e.tw), 0);
	assert_int_equal(munmap(m, 2 * page), 0);

	/* entries: flags, ids, words; a good one before a bad one is not armed */
	w = good;
	w.nr_arms = 2;
	a[1] = tw_arm(&e.tw, WORD, 0);
	a[1].flags = 0x2;
	refused(&e, &w, EINVAL);
	a[1].flags = ~0u;
	refused(&e, &w, EINVAL);
	a[1] = tw_arm(&e.tw, WORD, 0);
	a[1].id = 0;
	refused(&e, &w, ENOENT);
	a[1].id = 0x7ffffff0u;
	refused(&e, &w, ENOENT);
	a[1] = tw_arm(&other_tw, WORD, 0);	/* another context's */
	refused(&e, &w, ENOENT);
	a[1] = tw_arm(&e.tw, WORD + 1, 0);	/* unaligned */
	refused(&e, &w, EINVAL);
	a[1].off = WORD + 4;
	refused(&e, &w, EINVAL);
	a[1].off = TW_OFF - 8;			/* before, after, far */
	refused(&e, &w, EINVAL);
	a[1].off = TW_OFF + TW_LEN;
	refused(&e, &w, EINVAL);
	a[1].off = REGION;
	refused(&e, &w, EINVAL);
	a[1].off = ~7ull;			/* off + 8 overflows */
	refused(&e, &w, EINVAL);
	/* flushes: refused as AP_FLUSH would refuse them */
	memset(&a[1], 0, sizeof(a[1]));
	a[1].flags = CLANQ_EVQ_ARM_FLUSH;
	a[1].val = 8;
	a[1].id = 0x7ffffff0u;
	refused(&e, &w, ENOENT);
	a[1].id = e.w.ap.id;			/* the writer's, not this context's */
	refused(&e, &w, ENOENT);
	assert_int_equal(clanq_ap_import(&e.o.dev, &ro, other.r.addr, other.key, 0,
					 REGION, CLANQ_RIGHT_READ), 0);
	a[1].id = ro.id;			/* read-only */
	refused(&e, &w, EACCES);
	assert_int_equal(clanq_ap_close(&ro), 0);
	assert_int_equal(clanq_ap_import(&e.o.dev, &ro, other.r.addr, other.key, 0,
					 REGION, CLANQ_RIGHTS_ALL), 0);
	a[1].id = ro.id;
	a[1].off = REGION;
	refused(&e, &w, ERANGE);
	a[1].off = 8;
	a[1].val = ~0ull;
	refused(&e, &w, ERANGE);
	assert_int_equal(clanq_ap_close(&ro), 0);
	a[1].id = ro.id;			/* closed */
	a[1].val = 8;
	refused(&e, &w, ENOENT);

	/* the other context is untouched: its tripwire is still there */
	assert_int_equal(clanq_tw_destroy(&other_tw), 0);
	assert_ok(tw_owner_close(&other));
	env_close(&e);
}

/*
 * 7. The server's loop: a blocking echo through clanq_net_wait() (spin
 * 0) costs the server its reply's flush and one EVQ_WAIT a round trip,
 * and the client its request's flush and one TW_WAIT; before issue 24
 * the server also made a TW_ARM (3 a round trip). Each end counts its
 * own context's entries.
 */
struct echo_sh {
	uint64_t client_calls;
	int ready;
};

static void echo_client(void *arg)
{
	struct echo_sh *sh = arg;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	uint64_t out, in, e0 = 0, e1;
	ssize_t n;
	int err;

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	clanq_net_set_spin(net, 0);
	do {
		err = clanq_connect(net, &c, 0, SERVICE, NULL);
	} while (err == -ECONNREFUSED && (itest_sleep_ns(10 * ITEST_NS_PER_MS), 1));
	CHILD_CHECK_INT(err, 0);
	for (unsigned int i = 0; i < ECHO_WARM + ECHO_RTS; i++) {
		if (i == ECHO_WARM)
			CHILD_CHECK_INT(clanq_ctx_entries(&dev, &e0), 0);
		out = i * 0x9e3779b97f4a7c15ull;
		CHILD_CHECK_INT(clanq_send(c, &out, sizeof(out), 0), 0);
		n = clanq_recv(c, &in, sizeof(in), 0);
		CHILD_CHECK_INT(n, (ssize_t)sizeof(in));
		CHILD_CHECK(in == out);
	}
	CHILD_CHECK_INT(clanq_ctx_entries(&dev, &e1), 0);
	__atomic_store_n(&sh->client_calls, e1 - e0 - 1, __ATOMIC_RELEASE);
	CHILD_CHECK_INT(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

static void a_blocking_echo_costs_at_most_two_system_calls_a_side(void **state)
{
	struct echo_sh *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct clanq_net_event evs[8];
	struct clanq_net_stats st;
	struct clanq_listener *l;
	struct clanq_conn *c = NULL;
	struct clanq_dev dev;
	struct clanq_net *net;
	unsigned int echoed = 0;
	uint64_t e0 = 0, e1, buf;
	bool done = false;
	pid_t pid;
	int n;

	(void)state;
	assert_true(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	clanq_net_set_spin(net, 0);	/* every wait blocks at once */
	assert_int_equal(clanq_listen(net, &l, SERVICE, 4), 0);
	pid = itest_fork(echo_client, sh);
	while (!done) {
		n = clanq_net_wait(net, evs, ARRAY_SIZE(evs), LONG_NS);
		assert_true(n > 0);	/* a lost wake-up is a timeout here */
		for (int i = 0; i < n; i++) {
			if (evs[i].what & CLANQ_NET_ACCEPT) {
				assert_null(c);
				assert_int_equal(clanq_accept(l, &c, NULL, 0), 0);
				continue;
			}
			for (;;) {
				ssize_t r = clanq_recv(evs[i].conn, &buf, sizeof(buf),
						       CLANQ_MSG_DONTWAIT);

				if (r == -EAGAIN)
					break;
				if (r <= 0) {
					done = true;
					break;
				}
				assert_int_equal(clanq_send(evs[i].conn, &buf, (size_t)r, 0), 0);
				if (++echoed == ECHO_WARM)
					assert_int_equal(clanq_ctx_entries(&dev, &e0), 0);
				if (echoed == ECHO_WARM + ECHO_RTS)
					assert_int_equal(clanq_ctx_entries(&dev, &e1), 0);
			}
		}
	}
	assert_int_equal(echoed, ECHO_WARM + ECHO_RTS);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S), "client"));
	clanq_net_stats(net, &st);
	/* from after the 20th answer to after the 220th: 200 round trips */
	printf("blocking echo through clanq_net_wait(): server %.2f, client %.2f "
	       "system calls a round trip; %llu blocks, %llu arms\n",
	       (double)(e1 - e0 - 1) / ECHO_RTS,
	       (double)sh->client_calls / ECHO_RTS,
	       (unsigned long long)st.blocks, (unsigned long long)st.arms);
	assert_true(e1 - e0 - 1 <= ECHO_RTS * 2 + ECHO_RTS / 8);
	assert_true(sh->client_calls <= ECHO_RTS * 2 + ECHO_RTS / 8);
	assert_int_equal(clanq_conn_close(c), 0);
	assert_int_equal(clanq_listener_close(l), 0);
	clanq_net_close(net);
	clanq_close(&dev);
	munmap(sh, sizeof(*sh));
}

int main(void)
{
#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)
	const struct CMUnitTest tests[] = {
		T(returns_at_once_when_a_word_already_moved),
		T(arms_and_sleeps_when_nothing_moved),
		T(a_write_after_the_arming_wakes_the_sleeper),
		T(the_listed_flushes_are_made_before_the_wait),
		T(vectors_of_every_allowed_length_are_taken),
		T(garbage_is_refused_before_anything_is_armed),
		T(a_blocking_echo_costs_at_most_two_system_calls_a_side),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
