// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * tw_bench: tripwires, each number beside a baseline measured in the
 * same run on the same kernel.
 *
 *   pio     the cost of one PIO write (64 B and 8 B) through a mapped
 *           aperture, ns/write, one process, node 1 writing into node 0's
 *           regions:
 *             memcpy       plain stores into the mapping (ap->base), no
 *                          check: the baseline
 *             memcpy+mb    the same plus __atomic_thread_fence(SEQ_CST):
 *                          what the barrier of clanq_ap_flush() costs alone
 *             memcpy+mb+ld the same plus one load of the armed bitmap word
 *                          (address and mask worked out beforehand): the
 *                          "one barrier and one load" floor of the check
 *             ap_write_0   clanq_ap_write(), no tripwire armed on the region
 *             ap_write_1   one armed elsewhere in the region (the next
 *                          64-byte block: same word of the armed bitmap)
 *             ap_write_1000  1,000 armed elsewhere (blocks 1..1000)
 *             into_armed   a write into an armed (persistent) tripwire:
 *                          the AP_FLUSH system call and a fire, nobody
 *                          sleeping
 *           Methods interleave round by round (a change of load hits them
 *           all); each has its own region, so nothing is re-armed between
 *           rounds. Ratios are of medians, to memcpy.
 *   pingpong  round trips between two processes (fork), us/RT:
 *             pio_spin     each watches a uint64_t of its own region and
 *                          writes the peer's by PIO (clanq_ap_write());
 *                          both poll: no system call
 *             tw_block     the same, both block: clanq_tw_set_spin(0),
 *                          clanq_tw_wait_change() (TW_WAIT), the writer's
 *                          clanq_ap_write() fires the peer's tripwire
 *                          (AP_FLUSH)
 *             tw_rpc       tw_block, but the write and the wait for the
 *                          answer are one call, clanq_ap_write_wait():
 *                          the flush rides on TW_WAIT (one system call a
 *                          side per RT, where eventfd makes two)
 *             tw_block_to  tw_block with a 5 s timeout: an hrtimer a sleep
 *             tw_spinN     tw_block with an N us spin before blocking
 *             eventfd      blocking read()/write() on two eventfds
 *             pipe         blocking read()/write() on two pipes
 *             evq_block    OOB messages, clanq_evq_wait() with spin 0
 *             pio+efd      the words written by PIO as in tw_block (no
 *                          tripwire armed: no system call), the wake-up
 *                          by eventfd: what tripwires replace
 *             efd+ioctl    eventfd, plus one null clanq ioctl (QUERY) on
 *                          each side per RT: what entering the driver
 *                          costs in a blocking round trip
 *             efd+vfs      the same with an ioctl the eventfd refuses
 *                          (-ENOTTY): the VFS's ioctl path without the driver
 *             *_1cpu       both processes on one CPU (same-CPU wake-ups
 *                          are stable in the VM; cross-CPU ones bimodal)
 *           Ten rounds, every mode a 0.1 s slice a round. A sample is one
 *           RT (pio_spin: a batch). Per RT: driver entries
 *           (clanq_ctx_entries), voluntary and involuntary context
 *           switches of each side, fires and flushes; the share of RTs
 *           over 1 ms shows a busy host (a wake-up waiting for qemu's
 *           thread to get a host CPU), and a warning is printed then.
 *   cost    one-process costs that make up a blocking round trip: a clock
 *           read, a null system call, the VFS's and the driver's ioctl
 *           floors (-ENOTTY), a null ioctl (QUERY), AP_FLUSH that fires
 *           or finds nothing, TW_WAIT returning at once, and eventfd's
 *           write and read with nobody waiting.
 *
 * Output is perftest-style: '#' lines describe, tab-separated rows give
 * numbers; ratios are against baselines of the same run. There is no
 * pass/fail on timing: it fails (exit 1) only when something is wrong
 * functionally: a failed call, a wrong value, a wake-up lost (no round
 * trip for 5 s: the watchdog's 1 s tick, or -ETIMEDOUT for *_to).
 *
 *	tw_bench [-q] [-o pio|cost|pingpong]
 *	-q	quick run for the test list: fewer rounds, shorter slices
 *	-o	only that part (pingpong's breakdown then lacks the costs)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/admin.h>

#include "bench_stats.h"

#define NS_PER_S	1000000000ull
#define TIMEOUT_NS	(5 * NS_PER_S)	/* a wake-up this late is lost */
#define PIO_REGION	(128 * 1024)	/* > 1001 blocks of 64 B */
#define FAR_ARMED	1000u
#define STOP		(~0ull)		/* ping-pong: the initiator is done */

static struct {
	int quick;
	unsigned int pio_rounds;	/* pio: interleaved rounds */
	unsigned int pio_batch;		/* writes per timed batch */
	unsigned int sys_batch;		/* ... of those that are system calls */
	unsigned int pp_rounds;		/* ping-pong: every mode once a round */
	uint64_t pp_slice_ns;		/* each mode, each round, this long */
	unsigned int pp_batch;		/* round trips per timed sample */
	unsigned int pp_max;		/* samples per slice at most */
} cfg = {
	.pio_rounds = 200,
	.pio_batch = 1000,
	.sys_batch = 100,
	.pp_rounds = 10,
	.pp_slice_ns = 100000000ull,
	.pp_batch = 20,
	.pp_max = 20000,
};

static __attribute__((noreturn, format(printf, 1, 2))) void fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "tw_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void check(int err, const char *what)
{
	if (err < 0)
		fail("%s: %s", what, strerror(-err));
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);	/* best effort */
}

/* the first line of path starting with key, without it, or "?" */
static void read_line(const char *path, const char *key, char *buf, size_t size)
{
	char line[256];
	FILE *f = fopen(path, "r");

	snprintf(buf, size, "?");
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, strlen(key)))
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(buf, size, "%s", line + strlen(key));
		break;
	}
	if (f)
		fclose(f);
}

static void print_clocksource(const char *when)
{
	char buf[64] = "?";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			snprintf(buf, sizeof(buf), "?");
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	printf("# clocksource %s: %s\n", when, buf);
}

/*
 * Context switches of this process so far: voluntary ones (its sleeps)
 * and involuntary ones (preemptions) in *preempted.
 */
static uint64_t sleeps(uint64_t *preempted)
{
	char line[128];
	uint64_t n = 0;
	FILE *f = fopen("/proc/self/status", "r");

	*preempted = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "voluntary_ctxt_switches:", 24))
			n = strtoull(line + 24, NULL, 10);
		else if (!strncmp(line, "nonvoluntary_ctxt_switches:", 27))
			*preempted = strtoull(line + 27, NULL, 10);
	}
	if (f)
		fclose(f);
	return n;
}

/* Driver entries of dev's context, less what asking adds. */
static uint64_t entries(const struct clanq_dev *dev)
{
	uint64_t e;

	check(clanq_ctx_entries(dev, &e), "clanq_ctx_entries");
	return e;
}

/* what one entries() adds to the next one's count (0 or 1) */
static uint64_t entry_cost(const struct clanq_dev *dev)
{
	uint64_t e = entries(dev);

	return entries(dev) - e;
}

static struct lat stats_of(double *v, unsigned int n)
{
	if (!n)
		fail("no samples");
	return lat_stats(v, n);
}

/* ---- pio: the cost of a write ---- */

enum { P_MEMCPY, P_FENCE, P_LEAN, P_AP0, P_AP1, P_AP1000, P_INTO, NR_P };

static const char *const p_name[NR_P] = {
	"memcpy", "memcpy+mb", "memcpy+mb+ld", "ap_write_0", "ap_write_1",
	"ap_write_1000", "into_armed",
};

/* node 0 owns the regions and tripwires, node 1 writes into them */
static struct {
	struct clanq_dev d0, d1;
	struct clanq_ep ep;		/* node 0: owns every tripwire */
	struct clanq_region r[4];	/* 0, 1 and 1000 armed; waits */
	struct clanq_ap ap[3];		/* node 1's apertures onto r[0..2] */
	struct clanq_tw near1, wait_tw;	/* r[1] block 1; r[3] word 0 */
	const uint32_t *lean_word;	/* P_LEAN: ap[0]'s bitmap word of block 0 */
	char src[64];
} p;

static void pio_setup(void)
{
	struct clanq_ep_attr attr = { .tw_slots = 1088 };
	struct clanq_tw tw;
	uint64_t key;

	check(clanq_open_nic(&p.d0, 0), "open /dev/clanq0");
	check(clanq_open_nic(&p.d1, 1), "open /dev/clanq1");
	check(clanq_ep_create_attr(&p.d0, &p.ep, &attr), "clanq_ep_create_attr (1088 tripwires)");
	for (int i = 0; i < 4; i++)
		check(clanq_region_alloc(&p.d0, &p.r[i], PIO_REGION), "clanq_region_alloc");
	/* r[3] exported too, as a watched region is: TW_WAIT sets its bitmap */
	check(clanq_region_export(&p.r[3], CLANQ_RIGHTS_ALL, &key), "clanq_region_export");
	for (int i = 0; i < 3; i++) {
		check(clanq_region_export(&p.r[i], CLANQ_RIGHTS_ALL, &key), "clanq_region_export");
		check(clanq_ap_import(&p.d1, &p.ap[i], p.r[i].addr, key, 0, PIO_REGION,
				      CLANQ_RIGHTS_ALL), "clanq_ap_import");
		check(clanq_ap_map(&p.ap[i]), "clanq_ap_map");
		memset(p.ap[i].base, 0, PIO_REGION);	/* fault it in */
	}
	/* persistent: a write into it (into_armed) leaves it armed */
	check(clanq_tw_create(&p.ep, &p.near1, &p.r[1], 64, 8,
			      CLANQ_TW_ARMED | CLANQ_TW_PERSISTENT), "clanq_tw_create");
	for (unsigned int k = 1; k <= FAR_ARMED; k++)
		check(clanq_tw_create(&p.ep, &tw, &p.r[2], 64ull * k, 8,
				      CLANQ_TW_ARMED | CLANQ_TW_PERSISTENT),
		      "clanq_tw_create (1000 armed)");
	check(clanq_tw_create(&p.ep, &p.wait_tw, &p.r[3], 0, 8, 0), "clanq_tw_create");
	for (unsigned int i = 0; i < sizeof(p.src); i++)
		p.src[i] = (char)i;
	p.lean_word = &p.ap[0].armed[(p.ap[0].region_off >> CLANQ_TW_BLOCK_SHIFT) / 32];
	/* the checks the rows below rely on */
	if (clanq_ap_armed(&p.ap[0], 0, 64) || clanq_ap_armed(&p.ap[1], 0, 64) ||
	    clanq_ap_armed(&p.ap[2], 0, 64) || !clanq_ap_armed(&p.ap[1], 64, 8) ||
	    !clanq_ap_armed(&p.ap[2], 64 * FAR_ARMED, 8))
		fail("the armed bitmap does not show what is armed");
}

/* n writes of size bytes by method m (size a constant where inlined) */
static inline __attribute__((always_inline)) void pio_loop(int m, uint64_t n,
							    const size_t size)
{
	struct clanq_ap *ap = &p.ap[m == P_AP1000 ? 2 : m >= P_AP1 ? 1 : 0];
	uint64_t off = m == P_INTO ? 64 : 0;

	for (uint64_t i = 0; i < n; i++) {
		switch (m) {
		case P_MEMCPY:
			memcpy(ap->base, p.src, size);
			break;
		case P_FENCE:
			memcpy(ap->base, p.src, size);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			break;
		case P_LEAN:	/* 64 B or 8 B at 0: block 0, bit 0 */
			memcpy(ap->base, p.src, size);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (__atomic_load_n(p.lean_word, __ATOMIC_RELAXED) & 1u)
				fail("block 0 of region 0 is armed");
			break;
		default:
			if (clanq_ap_write(ap, off, p.src, size))
				fail("clanq_ap_write failed");
			break;
		}
		/* every store must happen */
		__asm__ __volatile__("" : : "r"(ap->base) : "memory");
	}
}

static __attribute__((noinline)) void pio_run64(int m, uint64_t n)
{
	pio_loop(m, n, 64);
}

static __attribute__((noinline)) void pio_run8(int m, uint64_t n)
{
	pio_loop(m, n, 8);
}

static void pio_bench(size_t size)
{
	unsigned int rounds = cfg.pio_rounds;
	double *v = calloc((size_t)NR_P * rounds, sizeof(*v));
	uint64_t e0, fires0, flushes0, fires, flushes, writes = 0;
	struct lat l[NR_P];

	if (!v)
		fail("out of memory");
	/* warm up every path once */
	for (int m = 0; m < NR_P; m++)
		size == 64 ? pio_run64(m, 10) : pio_run8(m, 10);
	e0 = entries(&p.d1);
	fires0 = p.ep.counters->tw_fires;
	flushes0 = p.ep.counters->tw_flushes;
	for (unsigned int r = 0; r < rounds; r++) {
		for (int k = 0; k < NR_P; k++) {
			int m = (k + (int)r) % NR_P;	/* rotate the order */
			uint64_t n = m == P_INTO ? cfg.sys_batch : cfg.pio_batch;
			uint64_t t0 = clanq_now_ns();

			size == 64 ? pio_run64(m, n) : pio_run8(m, n);
			v[m * rounds + r] = (double)(clanq_now_ns() - t0) / (double)n;
			if (m == P_INTO)
				writes += n;
		}
	}
	/* only into_armed may have entered the driver, once a write */
	e0 = entries(&p.d1) - e0;
	e0 -= entry_cost(&p.d1);
	fires = __atomic_load_n(&p.ep.counters->tw_fires, __ATOMIC_ACQUIRE) - fires0;
	flushes = __atomic_load_n(&p.ep.counters->tw_flushes, __ATOMIC_ACQUIRE) - flushes0;
	if (e0 != writes || fires != writes || flushes != writes)
		fail("pio %zu B: %llu driver entries, %llu fires, %llu flushes; want %llu each (the into_armed writes)",
		     size, (unsigned long long)e0, (unsigned long long)fires,
		     (unsigned long long)flushes, (unsigned long long)writes);
	for (int m = 0; m < NR_P; m++)
		l[m] = stats_of(v + m * rounds, rounds);
	printf("# PIO write of %zu B through a mapped aperture, ns/write (%u rounds; batches of %u, into_armed %u)\n",
	       size, rounds, cfg.pio_batch, cfg.sys_batch);
	printf("#test\t\t\tt_min\tt_typical\tt_avg\tt_99%%\tratio\n");
	for (int m = 0; m < NR_P; m++)
		printf("pio%zu_%-14s\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\n", size, p_name[m],
		       l[m].min, l[m].med, l[m].avg, l[m].p99, l[m].med / l[P_MEMCPY].med);
	printf("pio%zu_ratio\t%.2f\t%.2f\t%.2f\t# ap_write with 0 / 1 / 1000 armed elsewhere over memcpy, medians (target 0 armed <= 1.05)\n",
	       size, l[P_AP0].med / l[P_MEMCPY].med, l[P_AP1].med / l[P_MEMCPY].med,
	       l[P_AP1000].med / l[P_MEMCPY].med);
	printf("pio%zu_parts_ns\t%.1f\t%.1f\t%.1f\t# medians: the barrier (memcpy+mb - memcpy), the load (memcpy+mb+ld - memcpy+mb), the rest of clanq_ap_write (ap_write_0 - memcpy+mb+ld)\n",
	       size, l[P_FENCE].med - l[P_MEMCPY].med, l[P_LEAN].med - l[P_FENCE].med,
	       l[P_AP0].med - l[P_LEAN].med);
	free(v);
}

/* ---- cost: the parts of a blocking round trip, one process ---- */

enum {
	C_CLOCK, C_GETPPID, C_IOCTL_EFD, C_IOCTL_BAD, C_QUERY, C_FLUSH_FIRE,
	C_FLUSH_NONE, C_WAIT_NOW, C_EFD_WRITE, C_EFD_READ, NR_C
};

static const char *const c_name[NR_C] = {
	"clock_read", "null_syscall", "ioctl_enotty", "clanq_enotty", "null_ioctl",
	"ap_flush_fire", "ap_flush_spurious", "tw_wait_at_once", "efd_write",
	"efd_read_at_once",
};

static const char *const c_what[NR_C] = {
	"clanq_now_ns(): clock_gettime(CLOCK_MONOTONIC)",
	"syscall(SYS_getppid)",
	"ioctl() of an eventfd (it has none): the VFS's ioctl path, -ENOTTY",
	"a clanq ioctl of an unknown number: the driver entered, counted, -ENOTTY",
	"clanq_query(): the QUERY ioctl (copy in, check, copy out)",
	"clanq_ap_write() 8 B into an armed tripwire: AP_FLUSH + fire, nobody sleeping",
	"clanq_ap_write() 8 B beside one (same block): AP_FLUSH, nothing fired",
	"TW_WAIT on a changed word: arm, barrier, read, disarm",
	"write() to an eventfd nobody waits on",
	"read() of an eventfd (semaphore) with a count: returns at once",
};

static void cost_one(int c, uint64_t n, int efd)
{
	struct clanq_ioc_tw_wait w;
	struct clanq_ioc_query q;
	struct clanq_nic_info info;
	uint64_t x = 1;
	uint64_t sink = 0;

	switch (c) {
	case C_CLOCK:
		for (uint64_t i = 0; i < n; i++)
			sink += clanq_now_ns();
		__asm__ __volatile__("" : : "r"(sink));
		break;
	case C_GETPPID:
		for (uint64_t i = 0; i < n; i++)
			syscall(SYS_getppid);
		break;
	case C_IOCTL_EFD:
		for (uint64_t i = 0; i < n; i++)
			if (ioctl(efd, CLANQ_IOC_QUERY, &q) == 0 || errno != ENOTTY)
				fail("ioctl of an eventfd did not fail with ENOTTY");
		break;
	case C_IOCTL_BAD:
		for (uint64_t i = 0; i < n; i++)
			if (ioctl(p.d1.fd, _IOWR(CLANQ_IOC_MAGIC, 0x7f, struct clanq_ioc_query),
				  &q) == 0 || errno != ENOTTY)
				fail("an unknown clanq ioctl did not fail with ENOTTY");
		break;
	case C_QUERY:
		for (uint64_t i = 0; i < n; i++)
			check(clanq_query(&p.d1, &info), "clanq_query");
		break;
	case C_FLUSH_FIRE:
		for (uint64_t i = 0; i < n; i++)
			check(clanq_ap_write(&p.ap[1], 64, p.src, 8), "clanq_ap_write (armed)");
		break;
	case C_FLUSH_NONE:
		for (uint64_t i = 0; i < n; i++)
			check(clanq_ap_write(&p.ap[1], 72, p.src, 8), "clanq_ap_write (beside)");
		break;
	case C_WAIT_NOW:
		/* the word holds 0: waiting for it to leave 1 returns at once */
		for (uint64_t i = 0; i < n; i++) {
			memset(&w, 0, sizeof(w));
			w.id = p.wait_tw.id;
			w.off = 0;
			w.old = 1;
			w.timeout_ns = ~0ull;
			if (ioctl(p.d0.fd, CLANQ_IOC_TW_WAIT, &w) < 0)
				fail("TW_WAIT: %s", strerror(errno));
		}
		break;
	case C_EFD_WRITE:
		for (uint64_t i = 0; i < n; i++)
			if (write(efd, &x, 8) != 8)
				fail("eventfd write: %s", strerror(errno));
		break;
	case C_EFD_READ:
		for (uint64_t i = 0; i < n; i++)
			if (read(efd, &x, 8) != 8)
				fail("eventfd read: %s", strerror(errno));
		break;
	}
}

static double cost_med[NR_C];

static void cost_bench(void)
{
	unsigned int rounds = cfg.pio_rounds / 4 ? cfg.pio_rounds / 4 : 1;
	uint64_t n = cfg.sys_batch, efd_count = 0;
	double *v = calloc((size_t)NR_C * rounds, sizeof(*v));
	int efd = eventfd(0, EFD_SEMAPHORE);
	struct lat l;

	if (!v || efd < 0)
		fail("eventfd: %s", strerror(errno));
	for (int c = 0; c < NR_C; c++)
		if (c != C_EFD_READ)
			cost_one(c, 5, efd);
	efd_count = 5;
	for (unsigned int r = 0; r < rounds; r++) {
		for (int k = 0; k < NR_C; k++) {
			int c = (k + (int)r) % NR_C;
			uint64_t t0;

			/* a read must find a count: as many writes before it */
			if (c == C_EFD_READ && efd_count < n)
				fail("eventfd: count %llu", (unsigned long long)efd_count);
			t0 = clanq_now_ns();
			cost_one(c, n, efd);
			v[c * rounds + r] = (double)(clanq_now_ns() - t0) / (double)n;
			if (c == C_EFD_WRITE)
				efd_count += n;
			if (c == C_EFD_READ)
				efd_count -= n;
		}
		if (efd_count < n) {	/* the next round's read may come first */
			cost_one(C_EFD_WRITE, n, efd);
			efd_count += n;
		}
	}
	printf("# one-process costs, ns each (%u rounds of %llu, interleaved)\n", rounds,
	       (unsigned long long)n);
	printf("#test\t\t\tt_min\tt_typical\tt_avg\tt_99%%\n");
	for (int c = 0; c < NR_C; c++) {
		l = stats_of(v + c * rounds, rounds);
		cost_med[c] = l.med;
		printf("cost_%-18s\t%.0f\t%.0f\t%.0f\t%.0f\t# %s\n", c_name[c], l.min, l.med,
		       l.avg, l.p99, c_what[c]);
	}
	close(efd);
	free(v);
}

/* ---- ping-pong between two processes ---- */

enum kind {
	K_PIO_SPIN, K_TW, K_EFD, K_PIPE, K_EVQ, K_EFD_PIO, K_EFD_IOCTL, K_EFD_VFS,
	K_TW_RPC
};

/* eventfd, with or without clanq beside it */
static int is_efd(enum kind k)
{
	return k == K_EFD || k == K_EFD_PIO || k == K_EFD_IOCTL || k == K_EFD_VFS;
}

struct mode {
	const char *name;
	enum kind kind;
	uint64_t spin_ns;	/* K_TW: clanq_tw_set_spin() */
	int one_cpu;		/* both processes on CPU 0 */
	int timeout;		/* K_TW: wait with TIMEOUT_NS, not forever */
};

static const struct mode modes[] = {
	{ "pio_spin", K_PIO_SPIN, 0, 0, 0 },
	{ "tw_block", K_TW, 0, 0, 0 },
	{ "tw_block_to", K_TW, 0, 0, 1 },
	{ "tw_spin1us", K_TW, 1000, 0, 0 },
	{ "tw_spin5us", K_TW, 5000, 0, 0 },
	{ "tw_spin15us", K_TW, 15000, 0, 0 },
	{ "eventfd", K_EFD, 0, 0, 0 },
	{ "pipe", K_PIPE, 0, 0, 0 },
	{ "evq_block", K_EVQ, 0, 0, 0 },
	{ "tw_rpc", K_TW_RPC, 0, 0, 0 },
	{ "tw_rpc_1cpu", K_TW_RPC, 0, 1, 0 },
	{ "tw_block_1cpu", K_TW, 0, 1, 0 },
	{ "tw_to_1cpu", K_TW, 0, 1, 1 },
	{ "eventfd_1cpu", K_EFD, 0, 1, 0 },
	{ "pio+efd", K_EFD_PIO, 0, 0, 0 },
	{ "pio+efd_1cpu", K_EFD_PIO, 0, 1, 0 },
	{ "efd+ioctl_1cpu", K_EFD_IOCTL, 0, 1, 0 },
	{ "efd+vfs_1cpu", K_EFD_VFS, 0, 1, 0 },
};

/*
 * The lost wake-up detector. Blocking waits have no timeout (eventfd's
 * read() has none, and a timeout costs an hrtimer per sleep: that is
 * what tw_block_to measures); instead a 1 s interval timer checks that
 * round trips go on, and fails the run after TIMEOUT_NS without one.
 * TW_WAIT and EVQ_WAIT return -EINTR on the signal: waited for again.
 */
static volatile uint64_t progress;
static uint64_t watch_last, watch_idle;
static const char *watch_what = "";

static void watchdog(int sig)
{
	static const char msg[] = "tw_bench: no round trip for 5 s: a lost wake-up\n";

	(void)sig;
	if (progress != watch_last) {
		watch_last = progress;
		watch_idle = 0;
		return;
	}
	if (++watch_idle < TIMEOUT_NS / NS_PER_S)
		return;
	if (write(2, watch_what, strlen(watch_what)) < 0 || write(2, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

static void watchdog_set(const char *what, int on)
{
	struct itimerval it = { { on, 0 }, { on, 0 } };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog;
	sa.sa_flags = SA_RESTART;	/* read() and write() go on */
	sigaction(SIGALRM, &sa, NULL);
	watch_what = what;
	watch_last = progress;
	watch_idle = 0;
	setitimer(ITIMER_REAL, &it, NULL);
}

#define NR_MODES	(sizeof(modes) / sizeof(modes[0]))

/* what one side counted over its timed loop */
struct side_stats {
	uint64_t entries, sleeps, preempted, fires, flushes, spurious;
};

/* a page shared by the two sides of one slice */
struct pp_shared {
	struct clanq_addr addr[2];	/* region (K_PIO_SPIN, K_TW) or endpoint */
	uint64_t key[2];
	int ready;
	uint64_t rts;			/* initiator -> responder: round trips */
	struct side_stats st[2];
};

static void ready_add(struct pp_shared *sh)
{
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
}

static void ready_wait(struct pp_shared *sh, int v)
{
	uint64_t deadline = clanq_now_ns() + 4 * TIMEOUT_NS;

	while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < v) {
		if (clanq_now_ns() > deadline)
			fail("the peer never got ready");
		usleep(100);
	}
}

/* one side's objects */
struct side {
	int id;				/* 0: initiator, 1: responder */
	const struct mode *mode;
	struct pp_shared *sh;
	struct clanq_dev dev;
	struct clanq_region r;		/* K_PIO_SPIN, K_TW: own word at 0 */
	struct clanq_ap ap;		/* onto the peer's region */
	struct clanq_ep ep;
	struct clanq_tw tw;
	struct clanq_evq evq;
	int fd_in, fd_out;		/* K_EFD, K_PIPE */
	uint64_t pending;		/* K_TW_RPC: sent with the next wait */
	int has_pending;
	uint64_t e0, s0, p0, f0, fl0, sp0;
};

static void side_setup(struct side *s)
{
	struct pp_shared *sh = s->sh;
	int peer = !s->id;

	if (s->mode->kind == K_EFD || s->mode->kind == K_PIPE || s->mode->kind == K_EFD_VFS)
		return;
	check(clanq_open_nic(&s->dev, (unsigned int)s->id), "clanq_open_nic");
	check(clanq_ep_create(&s->dev, &s->ep, 16), "clanq_ep_create");
	if (s->mode->kind == K_EVQ) {
		check(clanq_evq_create(&s->dev, &s->evq, 1), "clanq_evq_create");
		check(clanq_evq_register(&s->evq, &s->ep, CLANQ_EV_OOB, 0), "clanq_evq_register");
		clanq_evq_set_spin(&s->evq, 0);
		sh->addr[s->id] = s->ep.addr;
		ready_add(sh);
		ready_wait(sh, 2);
		return;
	}
	check(clanq_region_alloc(&s->dev, &s->r, 4096), "clanq_region_alloc");
	check(clanq_region_export(&s->r, CLANQ_RIGHTS_ALL, &sh->key[s->id]), "clanq_region_export");
	check(clanq_tw_create(&s->ep, &s->tw, &s->r, 0, 8, 0), "clanq_tw_create");
	clanq_tw_set_spin(&s->tw, s->mode->spin_ns);
	sh->addr[s->id] = s->r.addr;
	ready_add(sh);
	ready_wait(sh, 2);
	check(clanq_ap_import(&s->dev, &s->ap, sh->addr[peer], sh->key[peer], 0, 64,
			      CLANQ_RIGHTS_ALL), "clanq_ap_import");
	check(clanq_ap_map(&s->ap), "clanq_ap_map");
	ready_add(sh);
	ready_wait(sh, 4);
}

static void side_begin(struct side *s)
{
	s->s0 = sleeps(&s->p0);
	if (s->mode->kind == K_EFD || s->mode->kind == K_PIPE ||
	    s->mode->kind == K_EFD_VFS)
		return;
	s->e0 = entries(&s->dev);
	s->f0 = __atomic_load_n(&s->ep.counters->tw_fires, __ATOMIC_ACQUIRE);
	s->fl0 = __atomic_load_n(&s->ep.counters->tw_flushes, __ATOMIC_ACQUIRE);
	s->sp0 = __atomic_load_n(&s->ep.counters->tw_spurious, __ATOMIC_ACQUIRE);
}

static void side_end(struct side *s)
{
	struct side_stats *st = &s->sh->st[s->id];
	uint64_t p;

	st->sleeps = sleeps(&p) - s->s0;
	st->preempted = p - s->p0;
	if (s->mode->kind == K_EFD || s->mode->kind == K_PIPE ||
	    s->mode->kind == K_EFD_VFS)
		return;
	st->entries = entries(&s->dev) - s->e0;
	st->entries -= entry_cost(&s->dev);
	st->fires = __atomic_load_n(&s->ep.counters->tw_fires, __ATOMIC_ACQUIRE) - s->f0;
	st->flushes = __atomic_load_n(&s->ep.counters->tw_flushes, __ATOMIC_ACQUIRE) - s->fl0;
	st->spurious = __atomic_load_n(&s->ep.counters->tw_spurious, __ATOMIC_ACQUIRE) - s->sp0;
}

static void side_teardown(struct side *s)
{
	if (s->mode->kind == K_EFD || s->mode->kind == K_PIPE ||
	    s->mode->kind == K_EFD_VFS)
		return;
	if (s->mode->kind == K_EVQ) {
		check(clanq_evq_destroy(&s->evq), "clanq_evq_destroy");
	} else {
		check(clanq_ap_close(&s->ap), "clanq_ap_close");
		check(clanq_tw_destroy(&s->tw), "clanq_tw_destroy");
		check(clanq_region_free(&s->r), "clanq_region_free");
	}
	check(clanq_ep_destroy(&s->ep), "clanq_ep_destroy");
	check(clanq_close(&s->dev), "clanq_close");
}

static void side_send(struct side *s, uint64_t val)
{
	switch (s->mode->kind) {
	case K_TW_RPC:
		if (val != STOP) {	/* nothing waits after STOP */
			s->pending = val;
			s->has_pending = 1;
			break;
		}
		/* fall through */
	case K_PIO_SPIN:
	case K_TW:
		check(clanq_ap_write(&s->ap, 0, &val, sizeof(val)), "clanq_ap_write");
		break;
	case K_EFD_PIO:
		check(clanq_ap_write(&s->ap, 0, &val, sizeof(val)), "clanq_ap_write");
		/* fall through */
	case K_EFD:
	case K_EFD_IOCTL:
	case K_EFD_VFS:
		if (s->mode->kind == K_EFD_IOCTL) {
			struct clanq_nic_info info;

			check(clanq_query(&s->dev, &info), "clanq_query");
		} else if (s->mode->kind == K_EFD_VFS) {
			struct clanq_ioc_query q;

			if (ioctl(s->fd_out, CLANQ_IOC_QUERY, &q) == 0 || errno != ENOTTY)
				fail("ioctl of an eventfd did not fail with ENOTTY");
		}
		val = val == STOP ? 2 : 1;
		if (write(s->fd_out, &val, 8) != 8)
			fail("eventfd write: %s", strerror(errno));
		break;
	case K_PIPE: {
		char c = val == STOP ? 'q' : 'p';

		if (write(s->fd_out, &c, 1) != 1)
			fail("pipe write: %s", strerror(errno));
		break;
	}
	case K_EVQ:
		check(clanq_oob_send(&s->ep, s->sh->addr[!s->id], CLANQ_OOB_TYPE_USER,
				     &val, sizeof(val)), "clanq_oob_send");
		break;
	}
}

/*
 * Wait for the next value after old; returns it (STOP included). The
 * words carry the round trip's number, so a value out of order is
 * caught.
 */
static uint64_t side_recv(struct side *s, uint64_t old)
{
	volatile uint64_t *word = (volatile uint64_t *)s->r.mem;
	uint64_t val = 0, deadline = 0;
	struct clanq_oob_msg msg;
	struct clanq_event ev;
	unsigned int spins = 0;
	char c;

	switch (s->mode->kind) {
	case K_PIO_SPIN:
		while ((val = __atomic_load_n(word, __ATOMIC_ACQUIRE)) == old) {
			clanq_cpu_relax();
			if (++spins % 4096)
				continue;
			if (!deadline)
				deadline = clanq_now_ns() + TIMEOUT_NS;
			else if (clanq_now_ns() > deadline)
				fail("%s: no write within %llu s", s->mode->name,
				     (unsigned long long)(TIMEOUT_NS / NS_PER_S));
		}
		break;
	case K_TW:
	case K_TW_RPC: {
		int err;

		if (s->has_pending) {
			s->has_pending = 0;
			err = clanq_ap_write_wait(&s->ap, 0, &s->pending, sizeof(s->pending),
						  &s->tw, (const uint64_t *)word, old, -1);
			if (err != -EINTR)
				check(err, "clanq_ap_write_wait");
		}
		do {
			err = clanq_tw_wait_change(&s->tw, (const uint64_t *)word, old,
						   s->mode->timeout ? (int64_t)TIMEOUT_NS : -1);
		} while (err == -EINTR);	/* the watchdog's tick */

		if (err == -ETIMEDOUT)
			fail("%s: side %d: clanq_tw_wait_change() timed out after %llu s: a lost wake-up",
			     s->mode->name, s->id, (unsigned long long)(TIMEOUT_NS / NS_PER_S));
		check(err, "clanq_tw_wait_change");
		val = __atomic_load_n(word, __ATOMIC_ACQUIRE);
		break;
	}
	case K_EFD:
	case K_EFD_IOCTL:
	case K_EFD_VFS:
		if (read(s->fd_in, &val, 8) != 8)
			fail("eventfd read: %s", strerror(errno));
		return val == 2 ? STOP : old + 1;
	case K_EFD_PIO:
		if (read(s->fd_in, &val, 8) != 8)
			fail("eventfd read: %s", strerror(errno));
		if (val == 2)
			return STOP;
		val = __atomic_load_n(word, __ATOMIC_ACQUIRE);
		break;
	case K_PIPE:
		if (read(s->fd_in, &c, 1) != 1)
			fail("pipe read: %s", strerror(errno));
		return c == 'q' ? STOP : old + 1;
	case K_EVQ:
		for (;;) {
			int err = clanq_evq_wait(&s->evq, &ev, -1);

			if (err == -EINTR)
				continue;	/* the watchdog's tick */
			if (err == -ETIMEDOUT)
				fail("%s: clanq_evq_wait() timed out: a lost wake-up",
				     s->mode->name);
			check(err, "clanq_evq_wait");
			if (!clanq_oob_recv(&s->ep, &msg))
				break;
		}
		memcpy(&val, msg.payload, sizeof(val));
		break;
	}
	if (val != STOP && val != old + 1)
		fail("%s: side %d read %llu after %llu", s->mode->name, s->id,
		     (unsigned long long)val, (unsigned long long)old);
	return val;
}

/* the responder: echo every value until STOP */
static int responder(struct side *s)
{
	uint64_t last = 0, val;

	side_setup(s);
	side_begin(s);
	watchdog_set("responder: ", 1);
	while ((val = side_recv(s, last)) != STOP) {
		side_send(s, val);
		last = val;
		progress++;
	}
	watchdog_set("", 0);
	side_end(s);
	side_teardown(s);
	return 0;
}

static int reap(pid_t pid)
{
	uint64_t deadline = clanq_now_ns() + 4 * TIMEOUT_NS;
	int status;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (clanq_now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(1000);
	}
	return r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* per mode, over all its slices */
struct mode_result {
	double *v;
	unsigned int n, slow;		/* samples; of them, over 1 ms */
	uint64_t rts;
	struct side_stats st[2];
};

/* One slice of one mode: fork the responder, time batches of round trips. */
static void pp_slice(const struct mode *m, struct mode_result *res)
{
	struct pp_shared *sh;
	struct side a = { .id = 0, .mode = m }, b = { .id = 1, .mode = m };
	int ab[2] = { -1, -1 }, ba[2] = { -1, -1 };
	/* one RT a sample (a clock read is ~0.07 us), but batches of spins */
	unsigned int batch = m->kind == K_PIO_SPIN ? cfg.pp_batch : 1;
	uint64_t k = 0, start, t0, t1;
	unsigned int s;
	pid_t pid;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		  -1, 0);
	if (sh == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	memset(sh, 0, sizeof(*sh));
	a.sh = b.sh = sh;
	if (is_efd(m->kind)) {
		ab[0] = ab[1] = eventfd(0, 0);
		ba[0] = ba[1] = eventfd(0, 0);
		if (ab[0] < 0 || ba[0] < 0)
			fail("eventfd: %s", strerror(errno));
	} else if (m->kind == K_PIPE) {
		if (pipe(ab) || pipe(ba))
			fail("pipe: %s", strerror(errno));
	}
	a.fd_out = ab[1];
	a.fd_in = ba[0];
	b.fd_in = ab[0];
	b.fd_out = ba[1];

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin(0);
		_exit(responder(&b));
	}
	pin(m->one_cpu ? 0 : 1);
	side_setup(&a);
	side_begin(&a);
	watchdog_set("initiator: ", 1);
	start = t0 = clanq_now_ns();
	for (s = 0; s < cfg.pp_max; s++) {
		for (unsigned int i = 0; i < batch; i++) {
			side_send(&a, ++k);
			if (side_recv(&a, k - 1) != k)
				fail("%s: the echo of %llu did not come back",
				     m->name, (unsigned long long)k);
		}
		progress++;
		t1 = clanq_now_ns();
		res->v[res->n] = (double)(t1 - t0) / 1000.0 / batch;
		res->slow += res->v[res->n++] > 1000.0;
		t0 = t1;
		if (t1 - start > cfg.pp_slice_ns && s >= 2)
			break;
	}
	watchdog_set("", 0);
	side_end(&a);
	side_send(&a, STOP);
	if (reap(pid))
		fail("%s: the responder failed or hung", m->name);
	side_teardown(&a);
	res->rts += k;
	for (int i = 0; i < 2; i++) {
		res->st[i].entries += sh->st[i].entries;
		res->st[i].sleeps += sh->st[i].sleeps;
		res->st[i].preempted += sh->st[i].preempted;
		res->st[i].fires += sh->st[i].fires;
		res->st[i].flushes += sh->st[i].flushes;
		res->st[i].spurious += sh->st[i].spurious;
	}
	if (is_efd(m->kind)) {
		close(ab[0]);
		close(ba[0]);
	} else if (m->kind == K_PIPE) {
		close(ab[0]);
		close(ab[1]);
		close(ba[0]);
		close(ba[1]);
	}
	munmap(sh, sizeof(*sh));
}

static int mode_index(const char *name)
{
	for (unsigned int i = 0; i < NR_MODES; i++)
		if (!strcmp(modes[i].name, name))
			return (int)i;
	fail("no mode %s", name);
}

static void pp_bench(void)
{
	struct mode_result res[NR_MODES];
	struct lat l[NR_MODES];
	int tw, efd, tw1, efd1;
	double per;

	memset(res, 0, sizeof(res));
	for (unsigned int i = 0; i < NR_MODES; i++) {
		res[i].v = calloc((size_t)cfg.pp_rounds * cfg.pp_max, sizeof(double));
		if (!res[i].v)
			fail("out of memory");
	}
	for (unsigned int r = 0; r < cfg.pp_rounds; r++)
		for (unsigned int k = 0; k < NR_MODES; k++)
			pp_slice(&modes[(k + r) % NR_MODES], &res[(k + r) % NR_MODES]);

	printf("# ping-pong between two processes, us per round trip (%u rounds of %.1f s a mode; a sample is one RT, pio_spin's %u RTs)\n",
	       cfg.pp_rounds, cfg.pp_slice_ns / 1e9, cfg.pp_batch);
	printf("# waits have no timeout (a watchdog catches lost wake-ups), but *_to's: clanq_tw_wait_change() with a %llu s timeout\n",
	       (unsigned long long)(TIMEOUT_NS / NS_PER_S));
	printf("# initiator node 0 on CPU 1, responder node 1 on CPU 0 (*_1cpu: both on CPU 0); per RT, for each side (init/resp):\n");
	printf("# ent = driver entries, slp = voluntary context switches (sleeps), pre = involuntary ones (preemptions),\n");
	printf("# fire = fires of its tripwire, flush = AP_FLUSH calls (the peer's) that fired it\n");
	printf("#test\t\tt_min\tt_typical\tt_avg\tt_99%%\t>1ms%%\tRTs\tent_i\tent_r\tslp_i\tslp_r\tpre_i\tpre_r\tfire_i\tfire_r\tflush_i\tflush_r\n");
	for (unsigned int i = 0; i < NR_MODES; i++) {
		struct mode_result *m = &res[i];

		l[i] = stats_of(m->v, m->n);
		per = m->rts ? 1.0 / (double)m->rts : 0;
		printf("%-14s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%llu\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n",
		       modes[i].name, l[i].min, l[i].med, l[i].avg, l[i].p99,
		       100.0 * m->slow / m->n, (unsigned long long)m->rts,
		       m->st[0].entries * per, m->st[1].entries * per,
		       m->st[0].sleeps * per, m->st[1].sleeps * per,
		       m->st[0].preempted * per, m->st[1].preempted * per,
		       m->st[0].fires * per, m->st[1].fires * per,
		       m->st[0].flushes * per, m->st[1].flushes * per);
	}
	tw = mode_index("tw_block");
	efd = mode_index("eventfd");
	if (res[efd].slow * 20 > res[efd].n)
		printf("# the host was busy: %.0f%% of eventfd's cross-CPU round trips took over 1 ms (a wake-up waited for the host's scheduler); cross-CPU ratios mean little, the *_1cpu ones still do\n",
		       100.0 * res[efd].slow / res[efd].n);
	tw1 = mode_index("tw_block_1cpu");
	efd1 = mode_index("eventfd_1cpu");
	printf("tw_block_ratio\t%.2f\t%.2f\t# tw_block / eventfd: median, avg (target <= 1.0)\n",
	       l[tw].med / l[efd].med, l[tw].avg / l[efd].avg);
	printf("tw_1cpu_ratio\t%.2f\t%.2f\t# tw_block_1cpu / eventfd_1cpu: median, avg\n",
	       l[tw1].med / l[efd1].med, l[tw1].avg / l[efd1].avg);
	printf("tw_rpc_ratio\t%.2f\t%.2f\t# tw_rpc / eventfd, tw_rpc_1cpu / eventfd_1cpu, medians: write and wait in one call\n",
	       l[mode_index("tw_rpc")].med / l[efd].med,
	       l[mode_index("tw_rpc_1cpu")].med / l[efd1].med);
	printf("tw_to_ratio\t%.2f\t%.2f\t# with a timeout (an hrtimer a sleep): tw_block_to / eventfd, tw_to_1cpu / eventfd_1cpu, medians\n",
	       l[mode_index("tw_block_to")].med / l[efd].med,
	       l[mode_index("tw_to_1cpu")].med / l[efd1].med);
	printf("pio_efd_ratio\t%.2f\t%.2f\t# tw_block / pio+efd, tw_block_1cpu / pio+efd_1cpu, medians: tripwires against PIO + an eventfd doorbell\n",
	       l[tw].med / l[mode_index("pio+efd")].med,
	       l[tw1].med / l[mode_index("pio+efd_1cpu")].med);
	printf("efd_ioctl_1cpu\t%.1f\t# efd+ioctl_1cpu - eventfd_1cpu, us per RT (medians): 2 null ioctls in a blocking RT; 2 alone cost %.1f\n",
	       l[mode_index("efd+ioctl_1cpu")].med - l[efd1].med, 2 * cost_med[C_QUERY] / 1000.0);
	printf("efd_vfs_1cpu\t%.1f\t# efd+vfs_1cpu - eventfd_1cpu, us per RT (medians): 2 ioctls the VFS refuses; 2 alone cost %.1f\n",
	       l[mode_index("efd+vfs_1cpu")].med - l[efd1].med, 2 * cost_med[C_IOCTL_EFD] / 1000.0);
	printf("pio_spin_ratio\t%.3f\t# pio_spin / eventfd, medians\n",
	       l[mode_index("pio_spin")].med / l[efd].med);
	printf("pipe_ratio\t%.2f\t# pipe / eventfd, medians\n",
	       l[mode_index("pipe")].med / l[efd].med);
	printf("evq_ratio\t%.2f\t# evq_block / eventfd, medians\n",
	       l[mode_index("evq_block")].med / l[efd].med);

	/*
	 * Where a blocking round trip goes: each side makes, per RT, one
	 * send (AP_FLUSH + fire, or an eventfd write) and one receive
	 * (TW_WAIT, or a read); what the same calls cost with nobody to
	 * wake or nothing to wait for is the software path; the rest is
	 * waking and scheduling.
	 */
	{
		double tw_path = 2 * (cost_med[C_FLUSH_FIRE] + cost_med[C_WAIT_NOW] +
				      2 * cost_med[C_CLOCK]) / 1000.0;
		double efd_path = 2 * (cost_med[C_EFD_WRITE] + cost_med[C_EFD_READ]) / 1000.0;

		printf("# breakdown, us per RT (medians): path = 2 x (send + receive) as costed alone; rest = RT - path: waking and scheduling\n");
		printf("#test\t\tRT\tpath\trest\n");
		printf("bd_tw_block\t%.1f\t%.1f\t%.1f\t# path = 2 x (ap_flush_fire + tw_wait_at_once + 2 clock reads in clanq_tw_wait_change)\n",
		       l[tw].med, tw_path, l[tw].med - tw_path);
		printf("bd_eventfd\t%.1f\t%.1f\t%.1f\t# path = 2 x (efd_write + efd_read_at_once)\n",
		       l[efd].med, efd_path, l[efd].med - efd_path);
		printf("bd_tw_1cpu\t%.1f\t%.1f\t%.1f\n", l[tw1].med, tw_path, l[tw1].med - tw_path);
		printf("bd_eventfd_1cpu\t%.1f\t%.1f\t%.1f\n", l[efd1].med, efd_path,
		       l[efd1].med - efd_path);
	}
	for (unsigned int i = 0; i < NR_MODES; i++)
		free(res[i].v);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	uint64_t t0;
	int opt;

	while ((opt = getopt(argc, argv, "qo:")) != -1) {
		if (opt == 'o' && (!strcmp(optarg, "pio") || !strcmp(optarg, "cost") ||
				   !strcmp(optarg, "pingpong"))) {
			only = optarg;
			continue;
		}
		if (opt != 'q') {
			fprintf(stderr, "usage: tw_bench [-q] [-o pio|cost|pingpong]\n");
			return 2;
		}
		cfg.quick = 1;
		cfg.pio_rounds = 40;
		cfg.pio_batch = 500;
		cfg.sys_batch = 50;
		cfg.pp_rounds = 2;
		cfg.pp_slice_ns = 100000000ull;
		cfg.pp_batch = 10;
		cfg.pp_max = 5000;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	t0 = clanq_now_ns();
	{
		char vendor[64], idle[64];

		read_line("/proc/cpuinfo", "vendor_id\t: ", vendor, sizeof(vendor));
		read_line("/sys/devices/system/cpu/cpuidle/current_driver", "", idle, sizeof(idle));
		printf("# tw_bench%s: %ld CPUs, %s, cpuidle driver %s\n", cfg.quick ? " -q" : "",
		       sysconf(_SC_NPROCESSORS_ONLN), vendor, idle);
	}
	print_clocksource("at start");

	pio_setup();
	if (!only || !strcmp(only, "pio")) {
		pio_bench(64);
		pio_bench(8);
	}
	if (!only || !strcmp(only, "cost"))
		cost_bench();
	if (!only || !strcmp(only, "pingpong"))
		pp_bench();

	print_clocksource("at end");
	printf("# tw_bench: %.1f s\n", (clanq_now_ns() - t0) / 1e9);
	return 0;
}
