// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Helpers shared by the in-VM integration tests (see itest.h), linked
 * into every test program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>
#include <clanq/admin.h>

#include "itest.h"

void itest_sleep_ns(int64_t ns)
{
	struct timespec ts = {
		.tv_sec = ns / ITEST_NS_PER_S,
		.tv_nsec = ns % ITEST_NS_PER_S,
	};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* errno of a raw ioctl, or 0 if it succeeded */
int itest_ioctl_err(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? errno : 0;
}

/*
 * Failing in a child.
 */

__attribute__((noreturn, format(printf, 3, 4)))
void itest_child_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: [child %d] ", file, line, (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(1);
}

/*
 * Child processes.
 */

pid_t itest_children[ITEST_MAX_CHILDREN];

void itest_forget(pid_t pid)
{
	int i;

	for (i = 0; i < ITEST_MAX_CHILDREN; i++)
		if (itest_children[i] == pid)
			itest_children[i] = 0;
}

/*
 * cmocka catches SIGSEGV, SIGBUS and friends to report a test's crash,
 * and a forked child inherits the handlers: a child's SIGBUS would
 * longjmp into its copy of the test runner and run the remaining tests
 * again. Children put the defaults back, so a fault kills them, as it
 * would any application, and the parent sees WTERMSIG.
 */
void itest_default_signals(void)
{
	static const int sigs[] = { SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGSYS };
	unsigned int i;

	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
}

/* Run fn(arg) in a child that leaves with status 0 when fn returns. */
pid_t itest_fork(void (*fn)(void *arg), void *arg)
{
	pid_t pid;
	int i;

	fflush(NULL);		/* or the child's exit would print it again */
	pid = fork();
	if (pid == 0) {
		itest_default_signals();
		fn(arg);
		_exit(0);
	}
	for (i = 0; pid > 0 && i < ITEST_MAX_CHILDREN; i++) {
		if (!itest_children[i]) {
			itest_children[i] = pid;
			break;
		}
	}
	return pid;
}

/*
 * Wait up to timeout_ns for a child; past that, SIGKILL it.
 * Return: its wait status, or -1 if it had to be killed or could not be
 * waited for.
 */
int itest_wait(pid_t pid, int64_t timeout_ns)
{
	uint64_t end = clanq_now_ns() + timeout_ns;
	int status;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, "waitpid(%d): %s\n", (int)pid,
				strerror(errno));
			itest_forget(pid);
			return -1;
		}
		if (clanq_now_ns() > end) {
			fprintf(stderr, "child %d still running after %lld ms: killed\n",
				(int)pid, (long long)(timeout_ns / ITEST_NS_PER_MS));
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			itest_forget(pid);
			return -1;
		}
		itest_sleep_ns(2 * ITEST_NS_PER_MS);
	}
	itest_forget(pid);
	return status;
}

/* true if status says "exited with 0"; otherwise print what happened */
bool itest_status_ok(int status, const char *who)
{
	if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	if (status < 0)
		fprintf(stderr, "%s: did not finish in time\n", who);
	else if (WIFEXITED(status))
		fprintf(stderr, "%s: exited with status %d\n", who,
			WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "%s: killed by signal %d (%s)\n", who,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		fprintf(stderr, "%s: wait status %#x\n", who, status);
	return false;
}

/* Has pid (not started by itest_fork) not finished yet? If it has, say how. */
bool itest_still_running(pid_t pid, const char *who)
{
	int status;
	pid_t r = waitpid(pid, &status, WNOHANG);

	if (r == 0)
		return true;
	if (r == pid) {
		itest_forget(pid);
		itest_status_ok(status, who);
	}
	return false;
}

/* cmocka teardown: no child of a failed test outlives it */
int itest_teardown(void **state)
{
	int i, status;

	(void)state;
	for (i = 0; i < ITEST_MAX_CHILDREN; i++) {
		if (!itest_children[i])
			continue;
		kill(itest_children[i], SIGKILL);
		while (waitpid(itest_children[i], &status, 0) < 0 &&
		       errno == EINTR)
			;
		itest_children[i] = 0;
	}
	return 0;
}

/* Whole reads and writes on pipes; false on EOF or error. */
bool itest_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

bool itest_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/*
 * Randomness: xorshift64*, seeded from CLANQ_TEST_SEED if set (the seed
 * in use is printed, so a failing run can be repeated).
 */
uint64_t itest_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

uint64_t itest_seed(const char *who)
{
	const char *env = getenv("CLANQ_TEST_SEED");
	uint64_t seed;

	if (env)
		seed = strtoull(env, NULL, 0);
	else
		seed = (uint64_t)clanq_now_ns() ^ ((uint64_t)getpid() << 32);
	if (!seed)
		seed = 1;
	printf("%s: CLANQ_TEST_SEED=%#llx\n", who, (unsigned long long)seed);
	return seed;
}

/*
 * Messages.
 */

uint32_t itest_len(uint32_t tag, uint32_t seq)
{
	return 8 + (tag + seq) % (CLANQ_OOB_PAYLOAD - 8 + 1);
}

uint8_t itest_byte(uint32_t tag, uint32_t seq, uint32_t i)
{
	return (uint8_t)(tag * 13u + seq * 31u + i * 7u + 1u);
}

void itest_fill(uint8_t *payload, uint32_t tag, uint32_t seq)
{
	uint32_t len = itest_len(tag, seq), i;

	memcpy(payload, &tag, 4);
	memcpy(payload + 4, &seq, 4);
	for (i = 8; i < len; i++)
		payload[i] = itest_byte(tag, seq, i);
}

int itest_send(struct clanq_ep *ep, struct clanq_addr dst,
	       uint32_t type, uint32_t tag, uint32_t seq)
{
	uint8_t payload[CLANQ_OOB_PAYLOAD];

	itest_fill(payload, tag, seq);
	return clanq_oob_send(ep, dst, type, payload, itest_len(tag, seq));
}

uint32_t itest_tag(const struct clanq_oob_msg *m)
{
	uint32_t tag;

	memcpy(&tag, m->payload, 4);
	return tag;
}

uint32_t itest_seq(const struct clanq_oob_msg *m)
{
	uint32_t seq;

	memcpy(&seq, m->payload + 4, 4);
	return seq;
}

/*
 * Is m what itest_send(<ep at src>, .., type, tag, seq) sent?
 * Return: NULL if so, else what differs. Pure computation: usable under
 * seccomp strict mode.
 */
const char *itest_check(const struct clanq_oob_msg *m,
			struct clanq_addr src, uint32_t type,
			uint32_t tag, uint32_t seq)
{
	uint32_t i;

	if (m->type != type)
		return "wrong type";
	if (!itest_addr_eq(m->src, src))
		return "wrong source address";
	if (m->len != itest_len(tag, seq))
		return "wrong length";
	if (itest_tag(m) != tag)
		return "wrong tag";
	if (itest_seq(m) != seq)
		return "wrong sequence number";
	for (i = 8; i < m->len; i++)
		if (m->payload[i] != itest_byte(tag, seq, i))
			return "payload corrupted";
	return NULL;
}

/* The next message on ep, spinning (and yielding now and then). */
int itest_recv(struct clanq_ep *ep, struct clanq_oob_msg *m,
	       int64_t timeout_ns)
{
	uint64_t end = 0;
	unsigned int spins = 0;

	while (clanq_oob_recv(ep, m) != 0) {
		if (++spins % 256)
			continue;
		if (!end)
			end = clanq_now_ns() + timeout_ns;
		else if (clanq_now_ns() > end)
			return -ETIMEDOUT;
		sched_yield();
	}
	return 0;
}

/* true if nothing arrives on ep for ITEST_QUIET_NS */
bool itest_quiet(struct clanq_ep *ep)
{
	struct clanq_oob_msg m;

	return itest_recv(ep, &m, ITEST_QUIET_NS) == -ETIMEDOUT;
}

/*
 * Wait until ep's counters account for n messages put on or dropped
 * from its queue, whether delivery is synchronous or not.
 */
bool itest_wait_arrivals(const struct clanq_ep *ep, uint64_t n)
{
	const struct clanq_ep_counters *c = ep->counters;
	uint64_t end = clanq_now_ns() + ITEST_RECV_TIMEOUT;

	while (itest_ctr(&c->oob_delivered) + itest_ctr(&c->oob_dropped) < n) {
		if (clanq_now_ns() > end)
			return false;
		sched_yield();
	}
	return true;
}

/* Wait until a driver-written counter reads want. */
bool itest_wait_ctr(const __u64 *ctr, uint64_t want)
{
	uint64_t end = clanq_now_ns() + ITEST_RECV_TIMEOUT;

	while (itest_ctr(ctr) != want) {
		if (clanq_now_ns() > end)
			return false;
		sched_yield();
	}
	return true;
}

/*
 * RDMA requests and completions (no asserts: usable in children).
 */

struct clanq_rdma_req itest_rdma_req(uint32_t src, uint32_t ap,
				     uint64_t src_off, uint64_t dst_off,
				     uint64_t len, uint64_t cookie, uint32_t flags)
{
	struct clanq_rdma_req r;

	memset(&r, 0, sizeof(r));
	r.src_region = src;
	r.dst_ap = ap;
	r.src_off = src_off;
	r.dst_off = dst_off;
	r.len = len;
	r.cookie = cookie;
	r.flags = flags;
	return r;
}

/* The next completion of ep, spinning then yielding; false on timeout. */
bool itest_wait_comp(struct clanq_ep *ep,
		     struct clanq_rdma_comp *c, int64_t timeout_ns)
{
	uint64_t end = 0;
	unsigned int spins = 0;

	while (clanq_rdma_poll(ep, c)) {
		if (++spins % 256) {
			clanq_cpu_relax();
			continue;
		}
		if (!end)
			end = clanq_now_ns() + timeout_ns;
		else if (clanq_now_ns() > end)
			return false;
		sched_yield();
	}
	return true;
}

unsigned long itest_read_ul(const char *path, const char *key)
{
	size_t klen = key ? strlen(key) : 0;
	unsigned long v = ~0ul;
	char line[256];
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (!key) {
			v = strtoul(line, NULL, 10);
			break;
		}
		if (!strncmp(line, key, klen) && line[klen] == ' ') {
			v = strtoul(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

unsigned int itest_eps_until_refused(struct clanq_dev *dev, struct clanq_ep *eps,
				     unsigned int max, int *err)
{
	unsigned int n;

	*err = 0;
	for (n = 0; n < max; n++) {
		*err = clanq_ep_create(dev, &eps[n], 2);
		if (*err)
			break;
	}
	return n;
}

/* Driver entries (system calls) of dev's context so far. */
uint64_t itest_entries(const struct clanq_dev *dev)
{
	uint64_t n = 0;

	assert_int_equal(clanq_ctx_entries(dev, &n), 0);
	return n;
}

/*
 * What one itest_entries() call adds to the answer of the next: 0 if
 * queries are not counted, 1 if each is counted for the ones after it.
 */
uint64_t itest_query_cost(const struct clanq_dev *dev)
{
	uint64_t a = itest_entries(dev);
	uint64_t b = itest_entries(dev);

	assert_true(b - a <= 1);
	return b - a;
}

/* A module parameter of the loaded driver. */
unsigned long itest_param(const char *name)
{
	return itest_module_param("clanq", name, ~0ul);
}

/* A module parameter of module @mod, or @absent if it is not loaded. */
unsigned long itest_module_param(const char *mod, const char *name,
				 unsigned long absent)
{
	char path[128];
	char buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/%s", mod);
	if (absent != ~0ul && access(path, F_OK))
		return absent;
	snprintf(path, sizeof(path), "/sys/module/%s/parameters/%s", mod, name);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	/* a bool parameter reads Y or N */
	if (buf[0] == 'Y' || buf[0] == 'N')
		return buf[0] == 'Y';
	assert_true(buf[0] >= '0' && buf[0] <= '9');
	return strtoul(buf, NULL, 10);
}

/* In a child: drop to the unprivileged user nobody, for good. */
void itest_become_nobody(void)
{
	CHILD_CHECK_INT(setresgid(ITEST_NOBODY, ITEST_NOBODY, ITEST_NOBODY), 0);
	CHILD_CHECK_INT(setresuid(ITEST_NOBODY, ITEST_NOBODY, ITEST_NOBODY), 0);
}

/* Set a module parameter of the loaded driver, and check it took. */
void itest_param_set(const char *name, unsigned long v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/clanq/parameters/%s", name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fprintf(f, "%lu\n", v) > 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(itest_param(name), v);
}

/* One counter of /sys/kernel/debug/clanq/clanqN/stats, or -1. */
long long itest_nic_stat(unsigned int nic, const char *key)
{
	char path[64], name[64];
	long long value, found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/clanq/clanq%u/stats", nic);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", name, &value) == 2)
		if (!strcmp(name, key))
			found = value;
	fclose(f);
	return found;
}

void itest_echo_drain(struct clanq_conn *c, uint32_t *echoed, uint32_t *errors)
{
	static __thread uint8_t buf[64 << 10];
	ssize_t n;

	for (;;) {
		n = clanq_recv(c, buf, sizeof(buf), CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n > 0 && !clanq_send(c, buf, (size_t)n, 0)) {
			__atomic_add_fetch(echoed, 1, __ATOMIC_RELEASE);
			continue;
		}
		if (n != 0)
			__atomic_add_fetch(errors, 1, __ATOMIC_RELEASE);
		clanq_conn_close(c);
		return;
	}
}
