/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Helpers shared by the in-VM integration tests: declarations here, the
 * code in itest.c, which every test program links.
 *
 * Child processes
 *	cmocka's assert_*() must never run in a forked child: a failure
 *	longjmps into the child's copy of the test runner, which then runs
 *	the remaining tests a second time. Children check with CHILD_CHECK()
 *	and friends, which print what failed and leave with status 1; the
 *	parent collects the status with itest_wait() and asserts on it.
 *	Every child started by itest_fork() is remembered, and
 *	itest_teardown() (each test's teardown) kills and reaps whatever a
 *	failed test left running.
 *
 * Messages
 *	itest_send() sends a message whose length (8..48 bytes) and payload
 *	are a function of (tag, seq); itest_check() recomputes both on
 *	receipt, together with the type and the driver-stamped source.
 *
 * Time
 *	Everything runs under TCG emulation with KASAN and lockdep, 20-50x
 *	slower than native: every wait here is bounded, and the bounds are
 *	generous (a timeout is a failure, never the normal path).
 */
#ifndef CLANQ_ITEST_H
#define CLANQ_ITEST_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before any #include"
#endif

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/net.h>

#define ITEST_NS_PER_MS		1000000ll
#define ITEST_NS_PER_S		1000000000ll

/* a message that should arrive has this long to do so */
#define ITEST_RECV_TIMEOUT	(10 * ITEST_NS_PER_S)
/* a message that should not arrive is looked for this long */
#define ITEST_QUIET_NS		(50 * ITEST_NS_PER_MS)

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))

/* the message type itest_send() uses unless told otherwise */
#define ITEST_TYPE		(CLANQ_OOB_TYPE_USER + 0x42)

void itest_sleep_ns(int64_t ns);

/* A driver-written counter in a shared segment. */
static inline uint64_t itest_ctr(const __u64 *ctr)
{
	return __atomic_load_n(ctr, __ATOMIC_ACQUIRE);
}

/* A word of a shared segment, written as its (hostile) owner may. */
static inline void itest_store_u32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline bool itest_addr_eq(struct clanq_addr a, struct clanq_addr b)
{
	return a.node == b.node && a.id == b.id;
}

/* An address in one word, for atomic publication in shared memory. */
static inline uint64_t itest_addr_pack(struct clanq_addr a)
{
	return (uint64_t)a.node << 32 | a.id;
}

static inline struct clanq_addr itest_addr_unpack(uint64_t w)
{
	struct clanq_addr a = { .node = (uint32_t)(w >> 32), .id = (uint32_t)w };

	return a;
}

/* errno of a raw ioctl, or 0 if it succeeded */
int itest_ioctl_err(int fd, unsigned long cmd, void *arg);

/*
 * Failing in a child.
 */

__attribute__((noreturn, format(printf, 3, 4)))
void itest_child_fail(const char *file, int line, const char *fmt, ...);

#define CHILD_FAIL(...)	itest_child_fail(__FILE__, __LINE__, __VA_ARGS__)

#define CHILD_CHECK(cond)						\
	do {								\
		if (!(cond))						\
			CHILD_FAIL("check failed: %s", #cond);		\
	} while (0)

#define CHILD_CHECK_INT(a, b)						\
	do {								\
		long long a_ = (long long)(a);				\
		long long b_ = (long long)(b);				\
									\
		if (a_ != b_)						\
			CHILD_FAIL("%s is %lld, expected %s (%lld)",	\
				   #a, a_, #b, b_);			\
	} while (0)

/*
 * Child processes.
 */

#define ITEST_MAX_CHILDREN	64

/* the children itest_fork() started, 0 where none */
extern pid_t itest_children[ITEST_MAX_CHILDREN];

void itest_forget(pid_t pid);

/*
 * cmocka catches SIGSEGV, SIGBUS and friends to report a test's crash,
 * and a forked child inherits the handlers: a child's SIGBUS would
 * longjmp into its copy of the test runner and run the remaining tests
 * again. Children put the defaults back, so a fault kills them, as it
 * would any application, and the parent sees WTERMSIG.
 */
void itest_default_signals(void);

/* Run fn(arg) in a child that leaves with status 0 when fn returns. */
pid_t itest_fork(void (*fn)(void *arg), void *arg);

/*
 * Wait up to timeout_ns for a child; past that, SIGKILL it.
 * Return: its wait status, or -1 if it had to be killed or could not be
 * waited for.
 */
int itest_wait(pid_t pid, int64_t timeout_ns);

/* true if status says "exited with 0"; otherwise print what happened */
bool itest_status_ok(int status, const char *who);

/* Has pid (not started by itest_fork) not finished yet? If it has, say how. */
bool itest_still_running(pid_t pid, const char *who);

/* cmocka teardown: no child of a failed test outlives it */
int itest_teardown(void **state);

/* Whole reads and writes on pipes; false on EOF or error. */
bool itest_read_full(int fd, void *buf, size_t len);

bool itest_write_full(int fd, const void *buf, size_t len);

/*
 * Randomness: xorshift64*, seeded from CLANQ_TEST_SEED if set (the seed
 * in use is printed, so a failing run can be repeated).
 */
uint64_t itest_rand(uint64_t *s);

uint64_t itest_seed(const char *who);

/*
 * Messages.
 */

uint32_t itest_len(uint32_t tag, uint32_t seq);

uint8_t itest_byte(uint32_t tag, uint32_t seq, uint32_t i);

void itest_fill(uint8_t *payload, uint32_t tag, uint32_t seq);

int itest_send(struct clanq_ep *ep, struct clanq_addr dst,
	       uint32_t type, uint32_t tag, uint32_t seq);

uint32_t itest_tag(const struct clanq_oob_msg *m);

uint32_t itest_seq(const struct clanq_oob_msg *m);

/*
 * Is m what itest_send(<ep at src>, .., type, tag, seq) sent?
 * Return: NULL if so, else what differs. Pure computation: usable under
 * seccomp strict mode.
 */
const char *itest_check(const struct clanq_oob_msg *m,
			struct clanq_addr src, uint32_t type,
			uint32_t tag, uint32_t seq);

/* The next message on ep, spinning (and yielding now and then). */
int itest_recv(struct clanq_ep *ep, struct clanq_oob_msg *m,
	       int64_t timeout_ns);

/* true if nothing arrives on ep for ITEST_QUIET_NS */
bool itest_quiet(struct clanq_ep *ep);

/*
 * Wait until ep's counters account for n messages put on or dropped
 * from its queue, whether delivery is synchronous or not.
 */
bool itest_wait_arrivals(const struct clanq_ep *ep, uint64_t n);

/* Wait until a driver-written counter reads want. */
bool itest_wait_ctr(const __u64 *ctr, uint64_t want);

/*
 * RDMA requests and completions (no asserts: usable in children).
 */

struct clanq_rdma_req itest_rdma_req(uint32_t src, uint32_t ap,
				     uint64_t src_off, uint64_t dst_off,
				     uint64_t len, uint64_t cookie, uint32_t flags);

/* The next completion of ep, spinning then yielding; false on timeout. */
bool itest_wait_comp(struct clanq_ep *ep,
		     struct clanq_rdma_comp *c, int64_t timeout_ns);

/*
 * Parent-only helpers: they assert, so they exist only where cmocka.h
 * was included first, and never run in a child.
 */
/*
 * An echo server's read of c: every message waiting goes back (up to
 * 64 KiB each); at end of stream or on an error c is closed. *echoed and
 * *errors count with atomic adds, so that forked workers can keep them
 * in shared memory. Never blocks.
 */
void itest_echo_drain(struct clanq_conn *c, uint32_t *echoed, uint32_t *errors);

#ifdef cmocka_unit_test

/*
 * The number in the file at path: its first line's (key NULL) or the
 * one after "key " at the start of a line (/proc, cgroup files); ~0ul
 * if there is none.
 */
unsigned long itest_read_ul(const char *path, const char *key);

/*
 * Create 2-slot endpoints into eps[0 .. max) until the driver refuses one
 * (a limit): how many it made, and the refusal in *err (0 if none was).
 */
unsigned int itest_eps_until_refused(struct clanq_dev *dev, struct clanq_ep *eps,
				     unsigned int max, int *err);

/* Driver entries (system calls) of dev's context so far. */
uint64_t itest_entries(const struct clanq_dev *dev);

/*
 * What one itest_entries() call adds to the answer of the next: 0 if
 * queries are not counted, 1 if each is counted for the ones after it.
 */
uint64_t itest_query_cost(const struct clanq_dev *dev);

/* A module parameter of the loaded driver. */
unsigned long itest_param(const char *name);

/* A module parameter of module @mod, or @absent if it is not loaded. */
unsigned long itest_module_param(const char *mod, const char *name,
				 unsigned long absent);

/* The unprivileged user the limit tests run as. */
#define ITEST_NOBODY	65534

/* In a child: drop to the unprivileged user nobody, for good. */
void itest_become_nobody(void);

/* Set a module parameter of the loaded driver, and check it took. */
void itest_param_set(const char *name, unsigned long v);

/* One counter of /sys/kernel/debug/clanq/clanqN/stats, or -1. */
long long itest_nic_stat(unsigned int nic, const char *key);

#endif /* cmocka_unit_test */

#endif /* CLANQ_ITEST_H */
