// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * rdma_bench: the RDMA engine and PIO apertures beside memcpy, all
 * measured in one run on one kernel.
 *
 * Three processes on the loop wire:
 *   exporter  node 0 (/dev/clanq0): allocates a 4 MiB region, exports it,
 *             then sleeps on a pipe; on request it checksums a range of
 *             its own memory, which is how every transfer is verified
 *             where it landed, not through the writer's view of it.
 *   main      node 1 (/dev/clanq1): an aperture onto that region, mapped
 *             for PIO; a 4 MiB source region for the engine; one endpoint.
 *   flood     node 1, started for the starvation test only.
 *   fair flood node 1, a context of its own with many endpoints, started
 *             for the fairness test only.
 *
 *   bandwidth  for each size, 64 B .. 4 MiB:
 *                memcpy     one core copies between two private buffers
 *                           (the baseline)
 *                PIO        clanq_ap_write() of the same private buffer into
 *                           the mapped aperture: plain stores into node 0's
 *                           pages; only the stores are timed (how the
 *                           receiver learns of them is another matter)
 *                RDMA       one clanq_rdma_post() with SIGNAL, then polling
 *                           until its completion: end to end, one at a time
 *                RDMA_pipe  a stream of requests keeping the request queue
 *                           full, SIGNAL on every 16th and the last
 *              Each method is calibrated to run ~1/3 of the time budget,
 *              then three rounds interleave the methods (a change of load
 *              hits them all) and the best round counts. Every run writes
 *              a fresh pattern to bytes [0, size) of the region; the
 *              exporter's checksum of them must match, and the endpoint
 *              counters must account for every request and byte.
 *   per-transfer  PIO's mean time per write beside the distribution of
 *              single RDMA writes (post -> completion).
 *   crossover  the smallest size at which a typical (median) RDMA write
 *              takes less time than a PIO write of that size.
 *   kicks  a stream of back-to-back 256-byte requests, SIGNAL on every
 *              64th: kicks (ep->counters->rdma_kicks) and driver
 *              entries (clanq_ctx_entries) per request.
 *   starvation a victim endpoint pings: single 64-byte RDMA writes with
 *              SIGNAL, post->completion latency; alone (half before, half
 *              after), and while a flood process on the same NIC keeps its
 *              request queue full of 1 MiB writes. The engine serves queues round-robin
 *              and splits transfers (rdma_max_xfer, 64 KiB), so the victim
 *              should wait for at most one chunk, not for whole requests.
 *   fairness  the same victim, alone (half before, half after), and
 *              beside a flood process whose one context keeps cfg.fair_eps
 *              endpoints (1,000; -q: 200) busy with 4 KiB writes, each
 *              queue refilled every FAIR_SCAN_US. The engine serves
 *              contexts round-robin, then each context's queues, so the
 *              victim should wait for about one flood turn per write, not
 *              for one turn of every flood endpoint. Besides latency: the
 *              engine's turns while flooded (rdma_turns in debugfs,
 *              clanq/clanq1/stats) against the victim's requests
 *              (ep->counters->rdma_reqs): its share, and turns per write;
 *              and per write, the turns from just before its post to just
 *              after its completion was seen (the victim's wait, in turns).
 *
 * Output follows perftest: '#' lines describe, tab-separated rows give
 * numbers (bandwidth in MiB/s; latency in us as t_min t_typical(median)
 * t_avg t_99%), and ratios are against baselines of the same run.
 * Any failed call, wrong completion or data mismatch exits with 1.
 *
 *	rdma_bench [-q]
 *	-q	quick smoke test for make test: few sizes, small counts
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/admin.h>

#include "bench_stats.h"

#define KiB		1024ull
#define MiB		(1024ull * 1024ull)
#define NS_PER_S	1000000000ull

#define REGION_BYTES	(4 * MiB)	/* exporter's region, main's source */
#define MIN_SIZE	64ull
#define PIPE_SIGNAL	16u		/* pipelined stream: SIGNAL every 16th */
#define STREAM_SIZE	256ull		/* doorbell stream */
#define STREAM_SIGNAL	64u
#define PING_SIZE	64ull
#define FLOOD_OFF	(2 * MiB)	/* flood's window in the region */
#define FLOOD_SIZE	(1 * MiB)
#define FAIR_OFF	(3 * MiB)	/* the fair flood's window in the region */
#define FAIR_SIZE	(4 * KiB)	/* each of its writes */
#define FAIR_SLOTS	64u		/* its endpoints' queues (hold 63) */
#define FAIR_SIG	8u		/* SIGNAL on every 8th of its writes */
#define FAIR_SCAN_US	50000		/* it refills every queue this often */
#define RQ_SLOTS	256u
#define CQ_SLOTS	256u
#define ROUNDS		3u		/* bandwidth: best of, interleaved */
/* a completion or answer that should come has this long (TCG + KASAN) */
#define TIMEOUT_NS	(20 * NS_PER_S)
/*
 * Pollers spin this many pauses, then sleep 1 us on every step. The
 * engine is a kernel thread that needs a CPU too, and with two CPUs it
 * may share one with the poller. sched_yield() does not hand it the CPU
 * (EEVDF keeps running a yielder while the other task is not eligible),
 * so the engine would get its fair share in whole ticks; a sleep takes
 * the poller off the CPU, and with 1 ns of timer slack (main()) its own
 * timer brings it back within microseconds.
 */
#define SPINS_BEFORE_SLEEP 256u

enum { M_MEMCPY, M_PIO, M_RDMA, M_PIPE, NR_M };

static const char *const m_name[NR_M] = { "memcpy", "PIO", "RDMA", "RDMA_pipe" };

/* what -q changes */
static struct {
	int quick;
	unsigned int size_shift;	/* sizes grow by 1 << size_shift */
	uint64_t max_size;
	uint64_t target_ns;		/* each (size, method) runs this long */
	unsigned int stream_reqs;
	unsigned int pings;
	unsigned int flood_slots;
	unsigned int fair_eps;		/* the fair flood's endpoints */
} cfg = {
	.size_shift = 1,
	.max_size = REGION_BYTES,
	.target_ns = 90000000ull,
	.stream_reqs = 10000,
	.pings = 1000,
	.flood_slots = 64,
	.fair_eps = 1000,
};

/* everything main owns */
static struct {
	struct clanq_dev dev;		/* node 1 */
	struct clanq_region src;	/* the engine's source */
	struct clanq_ap ap;		/* onto the exporter's region, mapped */
	struct clanq_ep ep;
	char *src_buf, *dst_buf;	/* private memory: memcpy, PIO */
	struct clanq_addr exp_addr;	/* the exporter's region ... */
	uint64_t exp_key;		/* ... and its key */
	int cmd_fd, ans_fd;		/* pipes to and from the exporter */
	int stats_fd;			/* clanq1's stats in debugfs, or -1 */
	pid_t exp_pid, flood_pid;	/* the fairness test's flood too */
	uint64_t seed;			/* a fresh pattern for each run */
	uint64_t run;			/* cookies carry it in their top half */
	uint64_t entry_cost;		/* what a QUERY adds to the next one */
	double *lat_us;			/* single-shot RDMA: each transfer's us */
	uint64_t lat_nr, lat_cap;
} b = { .cmd_fd = -1, .ans_fd = -1, .stats_fd = -1 };

static __attribute__((noreturn, format(printf, 1, 2))) void fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "rdma_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	/* the children also die with us (PR_SET_PDEATHSIG); be explicit */
	if (b.flood_pid > 0)
		kill(b.flood_pid, SIGKILL);
	if (b.exp_pid > 0)
		kill(b.exp_pid, SIGKILL);
	exit(1);
}

static void check(int err, const char *what)
{
	if (err < 0)
		fail("%s: %s", what, strerror(-err));
}

/* Spin, and once a wait has gone on for a while sleep on every step. */
static void spin(unsigned int *spins)
{
	static const struct timespec us = { .tv_nsec = 1000 };

	if (++*spins < SPINS_BEFORE_SLEEP)
		clanq_cpu_relax();
	else
		nanosleep(&us, NULL);
}

/* ---- patterns and checksums ---- */

/* xorshift64*: len is a multiple of 8 */
static void fill(void *p, uint64_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1, *w = p;

	for (uint64_t i = 0; i < len / 8; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		w[i] = x * 0x2545f4914f6cdd1dull;
	}
}

/* FNV-1a over 64-bit words; len is a multiple of 8 */
static uint64_t csum(const void *p, uint64_t len)
{
	const uint64_t *w = p;
	uint64_t h = 0xcbf29ce484222325ull ^ len;

	for (uint64_t i = 0; i < len / 8; i++)
		h = (h ^ w[i]) * 0x100000001b3ull;
	return h;
}

/* ---- pipes, bounded ---- */

static void xwrite(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		fail("pipe write: %s", strerror(errno));
}

/* Read exactly len bytes within TIMEOUT_NS; 0 on EOF before any byte. */
static int xread(int fd, void *buf, size_t len, int timeout)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < len) {
		ssize_t r;

		if (timeout && poll(&pfd, 1, (int)(TIMEOUT_NS / 1000000)) == 0)
			fail("no answer from the exporter");
		r = read(fd, (char *)buf + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (!got && r == 0)
				return 0;
			fail("pipe read: %s", r ? strerror(errno) : "EOF");
		}
		got += (size_t)r;
	}
	return 1;
}

/* ---- the exporter (node 0) ---- */

struct exp_hello {
	int err;
	struct clanq_addr addr;
	uint64_t key;
};

struct exp_cmd {
	uint64_t off, len;
};

/*
 * Answers checksum requests on its own memory until main closes the
 * command pipe. It sleeps in read() meanwhile, leaving both CPUs to main
 * and the engine.
 */
static int exporter(int cmd_fd, int ans_fd)
{
	struct exp_hello hello = { 0 };
	struct clanq_region r;
	struct clanq_dev dev;
	struct exp_cmd c;
	uint64_t sum;

	hello.err = clanq_open_nic(&dev, 0);
	if (!hello.err)
		hello.err = clanq_region_alloc(&dev, &r, REGION_BYTES);
	if (!hello.err)
		hello.err = clanq_region_export(&r, CLANQ_RIGHTS_ALL, &hello.key);
	if (!hello.err)
		hello.addr = r.addr;
	xwrite(ans_fd, &hello, sizeof(hello));
	if (hello.err)
		return 1;
	while (xread(cmd_fd, &c, sizeof(c), 0)) {
		if (c.off > REGION_BYTES || c.len > REGION_BYTES - c.off)
			return 1;
		sum = csum((char *)r.mem + c.off, c.len);
		xwrite(ans_fd, &sum, sizeof(sum));
	}
	if (clanq_region_free(&r) || clanq_close(&dev))
		return 1;
	return 0;
}

static void start_exporter(void)
{
	struct exp_hello hello;
	int cmd[2], ans[2];

	if (pipe(cmd) || pipe(ans))
		fail("pipe: %s", strerror(errno));
	b.exp_pid = fork();
	if (b.exp_pid < 0)
		fail("fork: %s", strerror(errno));
	if (b.exp_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(cmd[1]);
		close(ans[0]);
		_exit(exporter(cmd[0], ans[1]));
	}
	close(cmd[0]);
	close(ans[1]);
	b.cmd_fd = cmd[1];
	b.ans_fd = ans[0];
	if (!xread(b.ans_fd, &hello, sizeof(hello), 1))
		fail("exporter died while setting up");
	check(hello.err, "exporter: open /dev/clanq0, allocate and export a region");
	b.exp_addr = hello.addr;
	b.exp_key = hello.key;
}

/* The exporter's checksum of [off, off + len) of its region. */
static uint64_t exp_csum(uint64_t off, uint64_t len)
{
	struct exp_cmd c = { off, len };
	uint64_t sum;

	xwrite(b.cmd_fd, &c, sizeof(c));
	if (!xread(b.ans_fd, &sum, sizeof(sum), 1))
		fail("exporter died");
	return sum;
}

static int reap(pid_t pid, const char *who)
{
	uint64_t deadline = clanq_now_ns() + TIMEOUT_NS;
	int status;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (clanq_now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fprintf(stderr, "rdma_bench: %s did not finish\n", who);
			return -1;
		}
		usleep(1000);
	}
	if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "rdma_bench: %s failed (status %#x)\n", who, status);
		return -1;
	}
	return 0;
}

/* ---- RDMA helpers ---- */

struct ctrs {
	uint64_t reqs, bytes, errors, kicks;
};

static struct ctrs ctrs_read(const struct clanq_ep *ep)
{
	const struct clanq_ep_counters *c = ep->counters;
	struct ctrs r = {
		.reqs = __atomic_load_n(&c->rdma_reqs, __ATOMIC_ACQUIRE),
		.bytes = __atomic_load_n(&c->rdma_bytes, __ATOMIC_ACQUIRE),
		.errors = __atomic_load_n(&c->rdma_errors, __ATOMIC_ACQUIRE),
		.kicks = __atomic_load_n(&c->rdma_kicks, __ATOMIC_ACQUIRE),
	};

	return r;
}

/*
 * Check that the counters grew by exactly @reqs requests and @bytes
 * bytes, and no error, since *c0. The driver updates them before it posts
 * a completion, but the ABI does not promise that order: they get a
 * bounded while to catch up with the last completion.
 */
static struct ctrs ctrs_expect(const struct clanq_ep *ep, const struct ctrs *c0,
			       uint64_t reqs, uint64_t bytes, const char *what)
{
	uint64_t deadline = clanq_now_ns() + TIMEOUT_NS;
	struct ctrs c;

	for (;;) {
		c = ctrs_read(ep);
		if (c.errors != c0->errors || c.reqs - c0->reqs > reqs ||
		    c.bytes - c0->bytes > bytes)
			break;
		if (c.reqs - c0->reqs == reqs && c.bytes - c0->bytes == bytes)
			return c;
		if (clanq_now_ns() > deadline)
			break;
		usleep(100);
	}
	fail("%s: counters: %llu requests, %llu bytes, %llu errors; want %llu, %llu, 0",
	     what, (unsigned long long)(c.reqs - c0->reqs),
	     (unsigned long long)(c.bytes - c0->bytes),
	     (unsigned long long)(c.errors - c0->errors),
	     (unsigned long long)reqs, (unsigned long long)bytes);
}

/* Poll for a completion; a missing one is a failure after TIMEOUT_NS. */
static void wait_comp(struct clanq_ep *ep, struct clanq_rdma_comp *c, const char *what)
{
	unsigned int spins = 0;
	uint64_t deadline = 0;

	while (clanq_rdma_poll(ep, c)) {
		spin(&spins);
		if (spins < SPINS_BEFORE_SLEEP)
			continue;
		if (!deadline)
			deadline = clanq_now_ns() + TIMEOUT_NS;
		else if (clanq_now_ns() > deadline)
			fail("%s: no completion", what);
	}
}

static void check_comp(const struct clanq_rdma_comp *c, uint64_t cookie, uint64_t len,
		       const char *what)
{
	if (c->status || c->cookie != cookie || c->len != len)
		fail("%s: completion cookie %#llx len %llu status %d (%s); want cookie %#llx len %llu status 0",
		     what, (unsigned long long)c->cookie, (unsigned long long)c->len,
		     c->status, strerror(c->status < 0 ? -c->status : 0),
		     (unsigned long long)cookie, (unsigned long long)len);
}

static struct clanq_rdma_req rdma_req(const struct clanq_region *src,
				      const struct clanq_ap *ap, uint64_t dst_off,
				      uint64_t len)
{
	struct clanq_rdma_req r;

	memset(&r, 0, sizeof(r));
	r.src_region = src->addr.id;
	r.dst_ap = ap->id;
	r.dst_off = dst_off;
	r.len = len;
	return r;
}

/* One RDMA write of len bytes, posted and waited for. */
static void rdma_one(struct clanq_rdma_req *req, uint64_t cookie, const char *what)
{
	struct clanq_rdma_comp c;

	req->cookie = cookie;
	req->flags = CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL;
	check(clanq_rdma_post(&b.ep, req), what);
	wait_comp(&b.ep, &c, what);
	check_comp(&c, cookie, req->len, what);
}

/*
 * n requests of req->len bytes, back to back: post while the request
 * queue has room, SIGNAL on every sig-th (a power of two) and the last,
 * and take completions between refills. Completions come in
 * request order, so each one must carry the next signalled cookie.
 */
static void rdma_stream(struct clanq_ep *ep, struct clanq_rdma_req *req,
			uint64_t n, unsigned int sig, const char *what)
{
	uint64_t base = ++b.run << 32, posted = 0, done = 0;
	uint64_t deadline = 0;
	unsigned int spins = 0;
	struct clanq_rdma_comp c;
	int err;

	while (done < n) {
		int progress = 0;

		while (posted < n) {
			req->cookie = base + posted;
			req->flags = CLANQ_RDMA_LAST;
			if (posted % sig == sig - 1 || posted == n - 1)
				req->flags |= CLANQ_RDMA_SIGNAL;
			err = clanq_rdma_post(ep, req);
			if (err == -EAGAIN)
				break;
			check(err, what);
			posted++;
			progress = 1;
		}
		while (!clanq_rdma_poll(ep, &c)) {
			uint64_t want = done | (sig - 1);

			if (want > n - 1)
				want = n - 1;
			check_comp(&c, base + want, req->len, what);
			done = want + 1;
			progress = 1;
		}
		if (progress) {
			spins = 0;
			deadline = 0;
			continue;
		}
		spin(&spins);
		if (spins < SPINS_BEFORE_SLEEP)
			continue;
		if (!deadline)
			deadline = clanq_now_ns() + TIMEOUT_NS;
		else if (clanq_now_ns() > deadline)
			fail("%s: no completion after %llu of %llu requests", what,
			     (unsigned long long)done, (unsigned long long)n);
	}
}

/* ---- bandwidth ---- */

/* Room for n more per-transfer times of single-shot RDMA. */
static void lat_reserve(uint64_t n)
{
	if (b.lat_nr + n <= b.lat_cap)
		return;
	b.lat_cap = b.lat_nr + n;
	b.lat_us = realloc(b.lat_us, b.lat_cap * sizeof(*b.lat_us));
	if (!b.lat_us)
		fail("out of memory");
}

/* n transfers of size bytes by method m; the elapsed ns */
static uint64_t run_method(int m, uint64_t size, uint64_t n)
{
	struct clanq_rdma_req req = rdma_req(&b.src, &b.ap, 0, size);
	uint64_t t0;

	if (m == M_RDMA)
		lat_reserve(n);
	t0 = clanq_now_ns();
	switch (m) {
	case M_MEMCPY:
		for (uint64_t i = 0; i < n; i++) {
			memcpy(b.dst_buf, b.src_buf, size);
			/* the copies must happen, every one of them */
			__asm__ __volatile__("" : : "r"(b.dst_buf) : "memory");
		}
		break;
	case M_PIO:
		for (uint64_t i = 0; i < n; i++) {
			check(clanq_ap_write(&b.ap, 0, b.src_buf, size), "PIO");
			__asm__ __volatile__("" : : "r"(b.ap.base) : "memory");
		}
		break;
	case M_RDMA:
		b.run++;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t t1 = clanq_now_ns();

			rdma_one(&req, b.run << 32 | i, "RDMA");
			b.lat_us[b.lat_nr++] = (clanq_now_ns() - t1) / 1000.0;
		}
		break;
	case M_PIPE:
		rdma_stream(&b.ep, &req, n, PIPE_SIGNAL, "RDMA pipelined");
		break;
	}
	return clanq_now_ns() - t0;
}

/*
 * One checked run: a fresh pattern in the source (nothing has written it
 * yet, so stale data cannot pass), n transfers, then the data where they
 * landed and, for RDMA, the endpoint's counters. Returns the elapsed ns.
 */
static uint64_t run_checked(int m, uint64_t size, uint64_t n)
{
	struct ctrs c0 = ctrs_read(&b.ep);
	void *src = m == M_MEMCPY || m == M_PIO ? b.src_buf : b.src.mem;
	uint64_t t;

	fill(src, size, ++b.seed);
	t = run_method(m, size, n);
	if (m == M_MEMCPY) {
		if (memcmp(b.dst_buf, b.src_buf, size))
			fail("memcpy: data mismatch at %llu bytes", (unsigned long long)size);
	} else if (exp_csum(0, size) != csum(src, size)) {
		fail("%s: data at the exporter differ from the source at %llu bytes",
		     m_name[m], (unsigned long long)size);
	}
	if (m == M_RDMA || m == M_PIPE)
		ctrs_expect(&b.ep, &c0, n, n * size, m_name[m]);
	else if (ctrs_read(&b.ep).reqs != c0.reqs)
		fail("%s: the engine took requests nobody posted", m_name[m]);
	return t;
}

/*
 * How many transfers of method m at size take one round's time: runs of
 * growing length (which also warm up) until one lasts that long.
 */
static uint64_t calibrate(int m, uint64_t size)
{
	uint64_t round_ns = cfg.target_ns / ROUNDS, n = 1, t, want;

	for (;;) {
		t = run_checked(m, size, n);
		if (t >= round_ns)
			return n;
		if (t < 1000)
			t = 1000;
		want = n * round_ns / t + n / 4 + 1;
		n = want > 64 * n ? 64 * n : want;
	}
}

struct bw_row {
	uint64_t size;
	double bw[NR_M];	/* MiB/s */
	double pio_us;		/* one PIO write, mean */
	struct lat rdma;	/* one RDMA write, post -> completion, us */
};

static unsigned int bandwidth(struct bw_row *rows)
{
	uint64_t s, n[NR_M];
	unsigned int nr = 0;
	int m;

	printf("# bandwidth vs size, MiB/s: best of %u rounds of ~%.1f ms, the methods interleaved; ratios against memcpy\n",
	       ROUNDS, cfg.target_ns / ROUNDS / 1e6);
	printf("#   memcpy     one core, between two private buffers\n");
	printf("#   PIO        clanq_ap_write() into an aperture (node 1) mapped onto node 0's region; the stores only\n");
	printf("#   RDMA       clanq_rdma_post() with SIGNAL, then poll until the completion; one at a time\n");
	printf("#   RDMA_pipe  back to back, request queue kept full (%u slots), SIGNAL every %u\n",
	       RQ_SLOTS - 1, PIPE_SIGNAL);
	printf("#   data checked by the exporter's checksum at every size; counters checked for RDMA\n");
	printf("#bytes\tmemcpy\tPIO\tRDMA\tRDMA_pipe\tPIO/memcpy\tRDMA/memcpy\tRDMA_pipe/memcpy\n");
	for (s = MIN_SIZE; s <= cfg.max_size; s <<= cfg.size_shift) {
		struct bw_row *r = &rows[nr++];

		r->size = s;
		for (m = 0; m < NR_M; m++)
			n[m] = calibrate(m, s);
		/* the rounds interleave the methods: load changes hit them all */
		b.lat_nr = 0;
		for (unsigned int round = 0; round < ROUNDS; round++) {
			for (m = 0; m < NR_M; m++) {
				double bw = (double)s * n[m] / run_checked(m, s, n[m]) *
					    NS_PER_S / MiB;

				if (!round || bw > r->bw[m])
					r->bw[m] = bw;
			}
		}
		r->rdma = lat_stats(b.lat_us, (unsigned int)b.lat_nr);
		r->pio_us = s / r->bw[M_PIO] / MiB * 1e6;
		printf("%llu\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\n",
		       (unsigned long long)s, r->bw[M_MEMCPY], r->bw[M_PIO],
		       r->bw[M_RDMA], r->bw[M_PIPE],
		       r->bw[M_PIO] / r->bw[M_MEMCPY],
		       r->bw[M_RDMA] / r->bw[M_MEMCPY],
		       r->bw[M_PIPE] / r->bw[M_MEMCPY]);
	}
	return nr;
}

/*
 * One transfer at a time: PIO's time is the mean of its tight loop (a
 * store loop has no tail worth the name); RDMA's are per transfer.
 */
static void per_transfer(const struct bw_row *rows, unsigned int nr)
{
	printf("# one transfer at a time, us: a PIO write (mean of the best round), an RDMA write post -> completion (all rounds)\n");
	printf("#bytes\tPIO\tRDMA_t_min\tt_typical\tt_avg\tt_99%%\n");
	for (unsigned int i = 0; i < nr; i++)
		printf("%llu\t%.3f\t%.1f\t%.1f\t%.1f\t%.1f\n",
		       (unsigned long long)rows[i].size, rows[i].pio_us,
		       rows[i].rdma.min, rows[i].rdma.med, rows[i].rdma.avg,
		       rows[i].rdma.p99);
}

/* The smallest size at which a typical RDMA write takes less than a PIO one. */
static void crossover(const struct bw_row *rows, unsigned int nr)
{
	unsigned int i, j;

	for (i = 0; i < nr && rows[i].rdma.med >= rows[i].pio_us; i++)
		;
	if (i == nr) {
		printf("crossover: none up to %llu bytes\t# RDMA t_typical vs PIO\n",
		       (unsigned long long)rows[nr - 1].size);
		return;
	}
	printf("crossover: %llu bytes\t# RDMA t_typical %.1f us < PIO %.1f us\n",
	       (unsigned long long)rows[i].size, rows[i].rdma.med, rows[i].pio_us);
	for (j = i + 1; j < nr && rows[j].rdma.med < rows[j].pio_us; j++)
		;
	if (j < nr)
		printf("# but PIO is ahead again at %llu bytes\n",
		       (unsigned long long)rows[j].size);
}

/* ---- kicks ---- */

static uint64_t entries(void)
{
	uint64_t e;

	check(clanq_ctx_entries(&b.dev, &e), "clanq_ctx_entries");
	return e;
}

static void kicks(void)
{
	struct clanq_rdma_req req = rdma_req(&b.src, &b.ap, 0, STREAM_SIZE);
	uint64_t n = cfg.stream_reqs, t;
	struct ctrs c0, c1;
	uint64_t e0, e1;

	fill(b.src.mem, STREAM_SIZE, ++b.seed);
	c0 = ctrs_read(&b.ep);
	e0 = entries();
	t = clanq_now_ns();
	rdma_stream(&b.ep, &req, n, STREAM_SIGNAL, "doorbell stream");
	t = clanq_now_ns() - t;
	e1 = entries() - e0 - b.entry_cost;
	c1 = ctrs_expect(&b.ep, &c0, n, n * STREAM_SIZE, "doorbell stream");
	if (exp_csum(0, STREAM_SIZE) != csum(b.src.mem, STREAM_SIZE))
		fail("doorbell stream: data at the exporter differ from the source");
	/* every doorbell was a driver entry of ours */
	if (c1.kicks - c0.kicks > e1)
		fail("doorbell stream: %llu kicks but only %llu driver entries",
		     (unsigned long long)(c1.kicks - c0.kicks),
		     (unsigned long long)e1);
	printf("# kicks: %llu back-to-back %llu-byte RDMA writes, SIGNAL on every %u-th;\n",
	       (unsigned long long)n, STREAM_SIZE, STREAM_SIGNAL);
	printf("# kicks = ep->counters->rdma_kicks, entries = the context's driver entries (clanq_ctx_entries)\n");
	printf("#test\treqs\tkicks\tkicks/req\tentries/req\treqs/s\n");
	printf("rdma_stream\t%llu\t%llu\t%.4f\t%.4f\t%.0f\n",
	       (unsigned long long)(c1.reqs - c0.reqs),
	       (unsigned long long)(c1.kicks - c0.kicks),
	       (double)(c1.kicks - c0.kicks) / (double)(c1.reqs - c0.reqs),
	       (double)e1 / (double)n, n * 1e9 / t);
}

/* ---- starvation ---- */

/* A page shared by main and the flood. */
/*
 * Fork a flood process running fn(sh); return its pid once it has set
 * *ready (its queues are full and the engine works on them).
 */
static pid_t flood_start(int (*fn)(void *), void *sh, const int *ready,
			 const char *what)
{
	uint64_t deadline;
	pid_t pid = fork();

	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(fn(sh));
	}
	deadline = clanq_now_ns() + TIMEOUT_NS;
	while (!__atomic_load_n(ready, __ATOMIC_ACQUIRE)) {
		if (clanq_now_ns() > deadline || waitpid(pid, NULL, WNOHANG))
			fail("the %s did not get going", what);
		usleep(1000);
	}
	return pid;
}

struct flood_shared {
	int stop;		/* main -> flood: drain and leave */
	int measuring;		/* main -> flood: the victim is pinging */
	int ready;		/* flood -> main: its queue was full, and served */
	uint64_t sum;		/* flood -> main: checksum of what it writes */
	/* flood -> main, while measuring */
	uint64_t min_queued;	/* fewest requests queued at a refill */
	unsigned int refills;
	uint64_t t_first, b_first, t_last, b_last;	/* completions seen */
};

/* The flood's exit status after a failure, with what failed. */
static __attribute__((format(printf, 1, 2))) int flood_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rdma_bench: flood: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/*
 * The flood: a second process on node 1 that keeps its request queue
 * full of 1 MiB writes into [FLOOD_OFF, FLOOD_OFF + FLOOD_SIZE) of the
 * region, SIGNAL on every sig-th. It sleeps on an event queue (no spin)
 * until a completion comes, then refills, so it takes no CPU from the
 * victim or the engine. Before each refill it notes how many requests
 * were still queued: the fewest over the victim's run says whether the
 * engine always had flood work beside the victim's. On stop it lets every
 * posted request complete, so it leaves nothing in flight.
 */
static int flood(void *arg)
{
	struct flood_shared *sh = arg;
	struct clanq_ep_attr attr = {
		.rq_slots = cfg.flood_slots, .cq_slots = cfg.flood_slots,
	};
	/* a power of two well below the queue's capacity */
	const unsigned int sig = cfg.flood_slots >= 16 ? cfg.flood_slots / 8 : 1;
	uint64_t posted = 0, done = 0, deadline = clanq_now_ns() + 10 * TIMEOUT_NS;
	struct clanq_rdma_req req;
	struct clanq_rdma_comp c;
	struct clanq_region src;
	struct clanq_event ev;
	struct clanq_evq evq;
	struct clanq_dev dev;
	struct clanq_ap ap;
	struct clanq_ep ep;
	int err, stopping = 0;

	err = clanq_open_nic(&dev, 1);
	if (!err)
		err = clanq_region_alloc(&dev, &src, FLOOD_SIZE);
	if (!err)
		err = clanq_ap_import(&dev, &ap, b.exp_addr, b.exp_key, FLOOD_OFF,
				      FLOOD_SIZE, CLANQ_RIGHT_WRITE);
	if (!err)
		err = clanq_ep_create_attr(&dev, &ep, &attr);
	if (!err)
		err = clanq_evq_create(&dev, &evq, 1);
	if (!err)
		err = clanq_evq_register(&evq, &ep, CLANQ_EV_RDMA, 0);
	if (err < 0)
		return flood_fail("set-up: %s", strerror(-err));
	clanq_evq_set_spin(&evq, 0);
	fill(src.mem, FLOOD_SIZE, 0xf100d);
	sh->sum = csum(src.mem, FLOOD_SIZE);
	sh->min_queued = UINT64_MAX;
	req = rdma_req(&src, &ap, 0, FLOOD_SIZE);

	for (;;) {
		int measuring = __atomic_load_n(&sh->measuring, __ATOMIC_ACQUIRE);
		int took = 0;

		if (__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE))
			stopping = 1;
		if (measuring && !stopping) {
			uint64_t queued = ep.rq.mask - clanq_q_prod_space(&ep.rq);

			if (queued < sh->min_queued)
				sh->min_queued = queued;
			sh->refills++;
		}
		/*
		 * Refill; once stopping, only up to a signalled request, whose
		 * completion then says that all are done.
		 */
		while (!stopping || posted % sig) {
			req.cookie = posted;
			req.flags = CLANQ_RDMA_LAST;
			if (posted % sig == sig - 1)
				req.flags |= CLANQ_RDMA_SIGNAL;
			err = clanq_rdma_post(&ep, &req);
			if (err == -EAGAIN) {
				if (!stopping && done)
					__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
				break;
			}
			if (err)
				return flood_fail("post: %s", strerror(-err));
			posted++;
		}
		while (!clanq_rdma_poll(&ep, &c)) {
			if (c.status || c.len != FLOOD_SIZE || c.cookie != (done | (sig - 1)))
				return flood_fail("completion cookie %llu len %llu status %d, want cookie %llu",
						  (unsigned long long)c.cookie,
						  (unsigned long long)c.len, c.status,
						  (unsigned long long)(done | (sig - 1)));
			done = c.cookie + 1;
			took = 1;
			if (measuring) {
				sh->t_last = clanq_now_ns();
				sh->b_last = done * FLOOD_SIZE;
				if (!sh->t_first) {
					sh->t_first = sh->t_last;
					sh->b_first = sh->b_last;
				}
			}
		}
		if (stopping && !(posted % sig) && done >= posted)
			break;
		if (clanq_now_ns() > deadline)
			return flood_fail("still running after %llu s (done %llu of %llu)",
					  (unsigned long long)(10 * TIMEOUT_NS / NS_PER_S),
					  (unsigned long long)done, (unsigned long long)posted);
		if (took)
			continue;
		/*
		 * Sleep until a completion raises an event; the timeout only
		 * bounds how late a stop is seen.
		 */
		err = clanq_evq_wait(&evq, &ev, 20 * 1000000ll);
		if (err && err != -ETIMEDOUT)
			return flood_fail("clanq_evq_wait: %s", strerror(-err));
	}
	if (__atomic_load_n(&ep.counters->rdma_errors, __ATOMIC_ACQUIRE))
		return flood_fail("the endpoint counted errors");
	if (clanq_evq_destroy(&evq) || clanq_ep_destroy(&ep) || clanq_ap_close(&ap) ||
	    clanq_region_free(&src) || clanq_close(&dev))
		return flood_fail("tear-down");
	return 0;
}

/*
 * The victim: 64-byte RDMA writes with SIGNAL, one at a time, each with
 * its own sequence number in the payload. Latency = post -> completion,
 * in us. After each completion the payload must already be in the
 * exporter's memory (read here through the aperture's mapping, which is
 * those very pages). With @turns, also the engine's turns (rdma_turns)
 * from just before each post to just after its completion was seen.
 */
static int64_t nic_turns(void);
static pid_t engine_pid(void);

static void victim(double *v, double *turns, unsigned int n)
{
	struct clanq_rdma_req req = rdma_req(&b.src, &b.ap, 0, PING_SIZE);
	uint64_t *payload = b.src.mem;

	b.run++;
	for (unsigned int i = 0; i < n; i++) {
		uint64_t t0;
		int64_t t;

		for (unsigned int w = 0; w < PING_SIZE / 8; w++)
			payload[w] = b.run << 32 | (uint64_t)i << 8 | w;
		t = turns ? nic_turns() : 0;
		t0 = clanq_now_ns();
		rdma_one(&req, b.run << 32 | i, "victim");
		v[i] = (clanq_now_ns() - t0) / 1000.0;
		if (turns)
			turns[i] = (double)(nic_turns() - t);
		if (memcmp(b.ap.base, payload, PING_SIZE))
			fail("victim: ping %u completed, but its data are not at the exporter", i);
	}
}

static void lat_row(const char *name, struct lat l)
{
	printf("%-16s\t%.1f\t%.1f\t%.1f\t%.1f\n", name, l.min, l.med, l.avg, l.p99);
}

/* engine_mibs: the pipelined RDMA bandwidth, the engine's alone */
static void starvation(double engine_mibs)
{
	unsigned int half = cfg.pings / 2;
	double *v = calloc(2 * cfg.pings, sizeof(*v)), *w = v + cfg.pings;
	struct ctrs c0 = ctrs_read(&b.ep);
	double req_us = FLOOD_SIZE / MiB / engine_mibs * 1e6;
	struct lat alone, flooded;
	struct flood_shared *sh;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		  -1, 0);
	if (!v || sh == MAP_FAILED)
		fail("out of memory");
	memset(sh, 0, sizeof(*sh));

	/* alone before and after the flood: a change of load hits both */
	victim(v, NULL, half);

	/* until the flood's queue is full and the engine works on it */
	b.flood_pid = flood_start(flood, sh, &sh->ready, "flood");
	__atomic_store_n(&sh->measuring, 1, __ATOMIC_RELEASE);
	victim(w, NULL, cfg.pings);
	__atomic_store_n(&sh->measuring, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	if (reap(b.flood_pid, "flood"))
		fail("the flood failed");
	b.flood_pid = 0;
	victim(v + half, NULL, cfg.pings - half);
	alone = lat_stats(v, cfg.pings);
	flooded = lat_stats(w, cfg.pings);
	ctrs_expect(&b.ep, &c0, 2ull * cfg.pings, 2ull * cfg.pings * PING_SIZE, "victim");
	if (exp_csum(FLOOD_OFF, FLOOD_SIZE) != sh->sum)
		fail("flood: data at the exporter differ from the source");

	printf("# starvation: a victim's single %llu-byte RDMA writes with SIGNAL, post -> completion, us (%u each),\n",
	       PING_SIZE, cfg.pings);
	printf("# alone (half before, half after), and beside a flood process on the same NIC keeping %u x %llu MiB writes queued\n",
	       cfg.flood_slots - 1, FLOOD_SIZE / MiB);
	printf("#test\t\t\tt_min\tt_typical\tt_avg\tt_99%%\n");
	lat_row("victim_alone", alone);
	lat_row("victim_flooded", flooded);
	printf("starve_ratio\t%.2f\t%.2f\t# flooded / alone: median, 99%%\n",
	       flooded.med / alone.med, flooded.p99 / alone.p99);
	if (sh->t_last > sh->t_first)
		printf("flood_MiB/s\t%.0f\t# beside the victim\n",
		       (sh->b_last - sh->b_first) / (double)MiB /
		       ((sh->t_last - sh->t_first) / 1e9));
	if (sh->refills)
		printf("flood_queued\t%llu\t# fewest of its writes queued at any refill (%u refills)%s\n",
		       (unsigned long long)sh->min_queued, sh->refills,
		       sh->min_queued ? "" : ": it ran dry, the flooded numbers are optimistic");
	/*
	 * Starved = made to wait for whole flood writes rather than for
	 * one chunk of one: the flood adds (median) at least half of one.
	 */
	printf("starved\t%s\t# the flood adds %.0f us to the median; one whole %llu MiB write takes the engine %.0f us (RDMA_pipe rate)\n",
	       flooded.med - alone.med < req_us / 2 ? "no" : "YES",
	       flooded.med - alone.med, FLOOD_SIZE / MiB, req_us);
	munmap(sh, sizeof(*sh));
	free(v);
}

/* ---- fairness ---- */

/* A page shared by main and the fair flood. */
struct fair_shared {
	int stop;		/* main -> flood: leave */
	int measuring;		/* main -> flood: the victim is pinging */
	int ready;		/* flood -> main: every queue full and kicked */
	unsigned int eps;	/* flood -> main: endpoints it keeps busy */
	uint64_t sum;		/* flood -> main: checksum of what it writes */
	/* flood -> main, while measuring */
	uint64_t scans;		/* refills of every queue */
	uint64_t dry;		/* queues found empty at a refill */
};

/*
 * The fair flood: one context on node 1 with cfg.fair_eps endpoints
 * (fewer if the context's limits say so), each request queue kept full
 * of FAIR_SIZE writes into [FAIR_OFF, FAIR_OFF + FAIR_SIZE), SIGNAL on
 * every FAIR_SIG-th. It refills every queue, then sleeps FAIR_SCAN_US:
 * a queue holds 63 writes, so it runs dry only if the engine gets round
 * all of them 63 times within one sleep (counted), and a refill of a
 * queue that did not run dry needs no kick: the flood takes little CPU
 * from the victim (a flood that kicks 1,000 queues per refill measures
 * the CPU scheduler, not the engine).
 * It leaves by exiting: the context's release detaches what is queued.
 */
static int fair_flood(void *arg)
{
	struct fair_shared *sh = arg;
	struct clanq_ep_attr attr = {
		.oob_slots = 2, .rq_slots = FAIR_SLOTS, .cq_slots = FAIR_SLOTS,
	};
	static const struct timespec nap = { .tv_nsec = FAIR_SCAN_US * 1000 };
	uint64_t deadline = clanq_now_ns() + 10 * TIMEOUT_NS;
	unsigned int n = cfg.fair_eps, i;
	struct clanq_rdma_req req;
	struct clanq_rdma_comp c;
	struct clanq_region src;
	struct clanq_dev dev;
	struct clanq_ap ap;
	struct clanq_ep *ep = calloc(n, sizeof(*ep));
	uint64_t *posted = calloc(n, sizeof(*posted));
	uint64_t *done = calloc(n, sizeof(*done));
	int err;

	if (!ep || !posted || !done)
		return flood_fail("fair: out of memory");
	err = clanq_open_nic(&dev, 1);
	if (!err)
		err = clanq_region_alloc(&dev, &src, FAIR_SIZE);
	if (!err)
		err = clanq_ap_import(&dev, &ap, b.exp_addr, b.exp_key, FAIR_OFF,
				      FAIR_SIZE, CLANQ_RIGHT_WRITE);
	if (err < 0)
		return flood_fail("fair: set-up: %s", strerror(-err));
	for (i = 0; i < n; i++) {
		err = clanq_ep_create_attr(&dev, &ep[i], &attr);
		if (err == -ENOSPC || err == -ENOMEM)
			break;		/* the context's limit: as many as it allows */
		if (err)
			return flood_fail("fair: endpoint %u: %s", i, strerror(-err));
	}
	if (i < 2)
		return flood_fail("fair: only %u endpoints", i);
	n = i;
	sh->eps = n;
	fill(src.mem, FAIR_SIZE, 0xfa1e);
	sh->sum = csum(src.mem, FAIR_SIZE);
	req = rdma_req(&src, &ap, 0, FAIR_SIZE);

	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		int measuring = __atomic_load_n(&sh->measuring, __ATOMIC_ACQUIRE);

		for (i = 0; i < n; i++) {
			while (!clanq_rdma_poll(&ep[i], &c)) {
				if (c.status || c.len != FAIR_SIZE ||
				    c.cookie != (done[i] | (FAIR_SIG - 1)))
					return flood_fail("fair: endpoint %u: completion cookie %llu len %llu status %d, want cookie %llu",
							  i, (unsigned long long)c.cookie,
							  (unsigned long long)c.len, c.status,
							  (unsigned long long)(done[i] | (FAIR_SIG - 1)));
				done[i] = c.cookie + 1;
			}
			if (measuring && clanq_q_prod_space(&ep[i].rq) == ep[i].rq.mask)
				sh->dry++;
			for (;;) {
				req.cookie = posted[i];
				req.flags = CLANQ_RDMA_LAST;
				if (posted[i] % FAIR_SIG == FAIR_SIG - 1)
					req.flags |= CLANQ_RDMA_SIGNAL;
				err = clanq_rdma_post(&ep[i], &req);
				if (err == -EAGAIN)
					break;
				if (err)
					return flood_fail("fair: post: %s", strerror(-err));
				posted[i]++;
			}
		}
		if (measuring)
			sh->scans++;
		__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
		if (clanq_now_ns() > deadline)
			return flood_fail("fair: still running after %llu s",
					  (unsigned long long)(10 * TIMEOUT_NS / NS_PER_S));
		nanosleep(&nap, NULL);
	}
	for (i = 0; i < n; i++)
		if (__atomic_load_n(&ep[i].counters->rdma_errors, __ATOMIC_ACQUIRE))
			return flood_fail("fair: endpoint %u counted errors", i);
	return 0;
}

/*
 * rdma_turns of node 1's NIC, from debugfs (b.stats_fd, opened once), or
 * -1 if it cannot be read.
 */
static int64_t nic_turns(void)
{
	char buf[2048], *p;
	ssize_t n;

	if (b.stats_fd < 0)
		return -1;
	n = pread(b.stats_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "rdma_turns ");
	return p ? strtoll(p + strlen("rdma_turns "), NULL, 10) : -1;
}

static void fairness(void)
{
	unsigned int half = cfg.pings / 2;
	double *v = calloc(3 * cfg.pings, sizeof(*v)), *w = v + cfg.pings;
	double *wt = w + cfg.pings;
	struct ctrs c0 = ctrs_read(&b.ep), c1, c2;
	struct lat alone, flooded, waited;
	struct fair_shared *sh;
	int64_t t1, t2, turns;
	uint64_t reqs;
	cpu_set_t self_was, eng_was, cpu;
	pid_t eng = engine_pid();
	int pinned = 0;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		  -1, 0);
	if (!v || sh == MAP_FAILED)
		fail("out of memory");
	memset(sh, 0, sizeof(*sh));

	if (eng > 0 && sysconf(_SC_NPROCESSORS_ONLN) >= 2 &&
	    !sched_getaffinity(0, sizeof(self_was), &self_was) &&
	    !sched_getaffinity(eng, sizeof(eng_was), &eng_was)) {
		CPU_ZERO(&cpu);
		CPU_SET(1, &cpu);
		pinned = !sched_setaffinity(eng, sizeof(cpu), &cpu);
		CPU_ZERO(&cpu);
		CPU_SET(0, &cpu);
		pinned = pinned && !sched_setaffinity(0, sizeof(cpu), &cpu);
	}
	victim(v, NULL, half);

	b.flood_pid = flood_start(fair_flood, sh, &sh->ready,
				  "fair flood");
	__atomic_store_n(&sh->measuring, 1, __ATOMIC_RELEASE);
	c1 = ctrs_read(&b.ep);
	b.stats_fd = open("/sys/kernel/debug/clanq/clanq1/stats", O_RDONLY);
	t1 = nic_turns();
	victim(w, t1 >= 0 ? wt : NULL, cfg.pings);
	t2 = nic_turns();
	c2 = ctrs_read(&b.ep);
	__atomic_store_n(&sh->measuring, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	if (reap(b.flood_pid, "fair flood"))
		fail("the fair flood failed");
	b.flood_pid = 0;
	victim(v + half, NULL, cfg.pings - half);
	if (eng > 0) {
		sched_setaffinity(eng, sizeof(eng_was), &eng_was);
		sched_setaffinity(0, sizeof(self_was), &self_was);
	}
	alone = lat_stats(v, cfg.pings);
	flooded = lat_stats(w, cfg.pings);
	ctrs_expect(&b.ep, &c0, 2ull * cfg.pings, 2ull * cfg.pings * PING_SIZE, "victim");
	if (exp_csum(FAIR_OFF, FAIR_SIZE) != sh->sum)
		fail("fair flood: data at the exporter differ from the source");

	printf("# fairness: the victim's single %llu-byte RDMA writes with SIGNAL, post -> completion, us (%u each),\n",
	       PING_SIZE, cfg.pings);
	printf("# alone (half before, half after), and beside a flood process (a context of its own) keeping %u endpoints busy\n",
	       sh->eps);
	printf("# with %llu KiB writes (%u queued on each, refilled every %u ms); turns = rdma_turns of clanq1 while flooded;\n",
	       FAIR_SIZE / KiB, FAIR_SLOTS - 1, FAIR_SCAN_US / 1000);
	printf("# %s\n", pinned ? "the engine thread pinned to CPU 1, the victim and the flood to CPU 0" :
	       "not pinned: the victim may share a CPU with the engine thread, and wait for the scheduler");
	printf("#test\t\t\tt_min\tt_typical\tt_avg\tt_99%%\n");
	lat_row("fair_alone", alone);
	lat_row("fair_flooded", flooded);
	printf("fair_ratio\t%.2f\t%.2f\t# flooded / alone: median, 99%%\n",
	       flooded.med / alone.med, flooded.p99 / alone.p99);
	reqs = c2.reqs - c1.reqs;
	turns = t1 >= 0 && t2 >= 0 ? t2 - t1 : -1;
	if (turns > 0) {
		printf("#test\t\tvictim_reqs\tturns\tshare\tturns/req\n");
		printf("fair_turns\t%llu\t%lld\t%.2f%%\t%.1f\t# the victim's requests / the engine's turns; %u flood endpoints\n",
		       (unsigned long long)reqs, (long long)turns,
		       100.0 * (double)reqs / (double)turns,
		       (double)turns / (double)reqs, sh->eps);
		waited = lat_stats(wt, cfg.pings);
		printf("#test\t\t\tmin\ttypical\tavg\t99%%\n");
		printf("fair_wait_turns \t%.0f\t%.0f\t%.1f\t%.0f\t# engine turns from just before a victim post to just after its completion was seen\n",
		       waited.min, waited.med, waited.avg, waited.p99);
	} else {
		printf("fair_turns\t%llu\t?\t# no debugfs: the engine's turns unknown\n",
		       (unsigned long long)reqs);
	}
	if (sh->scans)
		printf("fair_dry\t%llu\t# flood queues found empty at a refill (%llu refills of %u queues)%s\n",
		       (unsigned long long)sh->dry, (unsigned long long)sh->scans, sh->eps,
		       sh->dry ? ": the flood ran dry at times, the flooded numbers are optimistic" : "");
	if (b.stats_fd >= 0)
		close(b.stats_fd);
	b.stats_fd = -1;
	munmap(sh, sizeof(*sh));
	free(v);
}

/*
 * The engine thread of node 1's NIC (clanq1-rdma), or 0. The fairness
 * test pins it to CPU 1 and itself (and so the flood) to CPU 0: with two
 * CPUs, a victim that shares a CPU with the engine thread waits for the
 * scheduler, whole time slices of flood turns, and that is not what the
 * test measures.
 */
static pid_t engine_pid(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	char path[300], comm[32];
	pid_t pid = 0;
	FILE *f;

	while (d && !pid && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strcmp(comm, "clanq1-rdma\n"))
			pid = atoi(de->d_name);
		fclose(f);
	}
	if (d)
		closedir(d);
	return pid;
}

/* ---- set-up ---- */

static void *xalloc(size_t size)
{
	void *p = aligned_alloc(4096, size);

	if (!p)
		fail("out of memory");
	memset(p, 0, size);	/* fault it in now, not inside a timed loop */
	return p;
}

static void setup(void)
{
	struct clanq_ep_attr attr = { .rq_slots = RQ_SLOTS, .cq_slots = CQ_SLOTS };
	uint64_t e;

	start_exporter();
	check(clanq_open_nic(&b.dev, 1), "open /dev/clanq1");
	if (b.dev.node == b.exp_addr.node)
		fail("/dev/clanq0 and /dev/clanq1 are the same node");
	check(clanq_region_alloc(&b.dev, &b.src, REGION_BYTES), "clanq_region_alloc");
	check(clanq_ap_import(&b.dev, &b.ap, b.exp_addr, b.exp_key, 0, REGION_BYTES,
			      CLANQ_RIGHTS_ALL), "clanq_ap_import");
	check(clanq_ap_map(&b.ap), "clanq_ap_map (PIO on the loop wire)");
	check(clanq_ep_create_attr(&b.dev, &b.ep, &attr), "clanq_ep_create_attr");
	b.src_buf = xalloc(REGION_BYTES);
	b.dst_buf = xalloc(REGION_BYTES);
	memset(b.src.mem, 0, REGION_BYTES);
	memset(b.ap.base, 0, REGION_BYTES);	/* fault the mapping in */
	if (exp_csum(0, REGION_BYTES) != csum(b.ap.base, REGION_BYTES))
		fail("PIO: the exporter does not see the aperture's stores");
	/* what a query adds to the next one's count (0 or 1) */
	e = entries();
	b.entry_cost = entries() - e;
}

static void teardown(void)
{
	check(clanq_ep_destroy(&b.ep), "clanq_ep_destroy");
	check(clanq_ap_close(&b.ap), "clanq_ap_close");
	check(clanq_region_free(&b.src), "clanq_region_free");
	check(clanq_close(&b.dev), "clanq_close");
	close(b.cmd_fd);	/* the exporter's cue to free and leave */
	if (reap(b.exp_pid, "exporter"))
		fail("the exporter failed");
	b.exp_pid = 0;
	close(b.ans_fd);
}

static void print_param(const char *name)
{
	char path[128], buf[64] = "?";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/clanq/parameters/%s", name);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			snprintf(buf, sizeof(buf), "?");
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	printf(" %s=%s", name, buf);
}

int main(int argc, char **argv)
{
	struct bw_row rows[32];
	unsigned int nr;
	uint64_t t0;
	int opt;

	while ((opt = getopt(argc, argv, "q")) != -1) {
		if (opt != 'q') {
			fprintf(stderr, "usage: rdma_bench [-q]\n");
			return 2;
		}
		/* every path, tiny: 64 B, 4 KiB, 256 KiB (past one 64 KiB chunk) */
		cfg.quick = 1;
		cfg.size_shift = 6;
		cfg.max_size = 256 * KiB;
		cfg.target_ns = 2000000;
		cfg.stream_reqs = 1000;
		cfg.pings = 20;
		cfg.flood_slots = 8;
		cfg.fair_eps = 200;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	t0 = clanq_now_ns();
	signal(SIGPIPE, SIG_IGN);	/* a dead exporter is EPIPE, reported */
	prctl(PR_SET_TIMERSLACK, 1ul);	/* for spin()'s 1 us sleeps */

	setup();
	printf("# rdma_bench%s: node %u -> node %u on the loop wire;",
	       cfg.quick ? " -q" : "", b.dev.node, b.exp_addr.node);
	print_param("rdma_max_xfer");
	printf("\n");

	nr = bandwidth(rows);
	per_transfer(rows, nr);
	crossover(rows, nr);
	kicks();
	starvation(rows[nr - 1].bw[M_PIPE]);
	fairness();
	teardown();
	printf("# rdma_bench: %.1f s\n", (clanq_now_ns() - t0) / 1e9);
	return 0;
}
