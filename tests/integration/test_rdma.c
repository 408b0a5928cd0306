// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * RDMA and PIO through the real driver, between processes, within a node
 * (both on /dev/clanq0) and across nodes (exporter on /dev/clanq1):
 *
 *  - RDMA writes of 0 bytes to several MiB, at odd sizes and unaligned
 *    source and destination offsets, from allocated and registered
 *    regions into allocated and registered regions, land exactly where
 *    asked: the exporter compares its whole region after each one;
 *  - PIO through a mapped aperture does the same, and a read-only import
 *    cannot be made writable by any route;
 *  - eight endpoints in four processes posting at once get every
 *    completion exactly once, in order;
 *  - each malformed request completes with the status the ABI names and
 *    holds up nothing queued behind it;
 *  - kicks are rare under a stream of posts, and exactly one wakes an
 *    idle engine;
 *  - polling the completion queue makes no system call (entry counter and
 *    seccomp strict mode);
 *  - a full completion queue stalls its endpoint, only it, and loses
 *    nothing.
 *
 * Data checks: source bytes are a pattern of (seed, source offset) with
 * the top bit clear, background bytes a pattern of the region offset with
 * the top bit set. A byte written one place too far (or too early) can
 * therefore never look like background, and a byte from the wrong source
 * offset almost never looks like the right one.
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
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

#define KiB		1024ull
#define MiB		(1024 * KiB)
#define PAGE		4096ull

/* a completion that should come has this long (TCG + KASAN: generous) */
#define COMP_TIMEOUT	(20 * ITEST_NS_PER_S)
/* a whole multi-process run has this long */
#define RUN_TIMEOUT	(120 * ITEST_NS_PER_S)

#define RW		(PROT_READ | PROT_WRITE)
#define REQ_DONE	(CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL)

/*
 * Patterns.
 */

#define BG_SEED		0xb6b6b6b6b6b6b6b6ull
#define TOP		0x80

static inline __u64 mix64(__u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline __u64 pat_word(__u64 seed, __u64 i)
{
	return mix64(seed ^ ((i >> 3) * 0x9e3779b97f4a7c15ull));
}

/* byte i of the pattern seed; top is 0 (data) or TOP (background) */
static inline __u8 pat_byte(__u64 seed, __u64 i, __u8 top)
{
	return (__u8)(((pat_word(seed, i) >> ((i & 7) * 8)) & 0x7f) | top);
}

/* p[k] = byte start + k of the pattern, for k < len */
static void pat_fill(__u8 *p, __u64 seed, __u64 start, size_t len, __u8 top)
{
	size_t k = 0;

	while (k < len) {
		__u64 i = start + k;
		__u64 w = pat_word(seed, i);
		unsigned int b;

		for (b = i & 7; b < 8 && k < len; b++, k++)
			p[k] = (__u8)(((w >> (b * 8)) & 0x7f) | top);
	}
}

/* The first k < len where p[k] is not byte start + k, or len. */
static size_t pat_diff(const __u8 *p, __u64 seed, __u64 start, size_t len,
		       __u8 top)
{
	size_t k = 0;

	while (k < len) {
		__u64 i = start + k;
		__u64 w = pat_word(seed, i);
		unsigned int b;

		for (b = i & 7; b < 8 && k < len; b++, k++)
			if (p[k] != (__u8)(((w >> (b * 8)) & 0x7f) | top))
				return k;
	}
	return len;
}

static void bg_fill(__u8 *p, __u64 start, size_t len)
{
	pat_fill(p, BG_SEED, start, len, TOP);
}

/* The first k < len where a[k] != b[k], or len. memcmp first: it is fast. */
static size_t mem_diff(const __u8 *a, const __u8 *b, size_t len)
{
	size_t k;

	if (!memcmp(a, b, len))
		return len;
	for (k = 0; k < len && a[k] == b[k]; k++)
		;
	return k;
}

/*
 * Region m[0, size), whose background is bg[0, size): is it background
 * outside [off, off + len) and pattern (seed, src_off..) inside? Return
 * NULL if so, else what is wrong (and where, in *at). The whole region
 * is compared every time, so a stray write anywhere is found.
 */
static const char *region_diff(const __u8 *m, const __u8 *bg, size_t size,
			       __u64 off, __u64 len, __u64 seed,
			       __u64 src_off, __u64 *at)
{
	size_t d;

	if (off > size || len > size - off) {
		*at = off;
		return "range outside the region";
	}
	d = mem_diff(m, bg, off);
	if (d < off) {
		*at = d;
		return "byte before the written range changed";
	}
	d = pat_diff(m + off, seed, src_off, len, 0);
	if (d < len) {
		*at = off + d;
		return "written byte wrong";
	}
	d = mem_diff(m + off + len, bg + off + len, size - off - len);
	if (d < size - off - len) {
		*at = off + len + d;
		return "byte after the written range changed";
	}
	return NULL;
}

static void *map_anon(size_t size)
{
	void *p = mmap(NULL, size, RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Completions and requests.
 */

static void expect_comp(struct clanq_ep *ep, __u64 cookie, int status,
			__u64 len)
{
	struct clanq_rdma_comp c;

	memset(&c, 0, sizeof(c));
	if (!itest_wait_comp(ep, &c, COMP_TIMEOUT))
		fail_msg("no completion for cookie %#llx within %lld s "
			 "(engine took %llu requests)",
			 (unsigned long long)cookie,
			 (long long)(COMP_TIMEOUT / ITEST_NS_PER_S),
			 (unsigned long long)itest_ctr(&ep->counters->rdma_reqs));
	if (c.cookie != cookie || c.status != status || c.len != len)
		fail_msg("completion: cookie %#llx status %d len %llu; "
			 "expected cookie %#llx status %d len %llu",
			 (unsigned long long)c.cookie, c.status,
			 (unsigned long long)c.len,
			 (unsigned long long)cookie, status,
			 (unsigned long long)len);
}

/* Nothing more on the completion queue (looked at for a while). */
static void expect_no_comp(struct clanq_ep *ep)
{
	__u64 end = clanq_now_ns() + ITEST_QUIET_NS;
	struct clanq_rdma_comp c;

	do {
		if (!clanq_rdma_poll(ep, &c))
			fail_msg("unexpected completion: cookie %#llx status %d len %llu",
				 (unsigned long long)c.cookie, c.status,
				 (unsigned long long)c.len);
		sched_yield();
	} while (clanq_now_ns() < end);
}

static bool wait_doorbell_set(const struct clanq_ep *ep)
{
	__u64 end = clanq_now_ns() + COMP_TIMEOUT;

	while (!__atomic_load_n(ep->need_wakeup, __ATOMIC_ACQUIRE)) {
		if (clanq_now_ns() > end)
			return false;
		sched_yield();
	}
	return true;
}

static unsigned long param_or(const char *name, unsigned long dflt)
{
	char path[128];
	unsigned long v = dflt;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/clanq/parameters/%s", name);
	f = fopen(path, "r");
	if (!f)
		return dflt;
	if (fscanf(f, "%lu", &v) != 1)
		v = dflt;
	fclose(f);
	return v;
}

static double mib_per_s(__u64 bytes, int64_t ns)
{
	return ns > 0 ? (double)bytes / MiB / ((double)ns / ITEST_NS_PER_S) : 0;
}

/*
 * The exporter: a child process on a given NIC with three exported
 * regions, all filled with background:
 *	XR_ALLOC  allocated (driver memory), DST_SIZE
 *	XR_REG    registered, its own page-aligned anonymous memory, DST_SIZE
 *	XR_ODD    registered, ODD_SIZE bytes starting ODD_SHIFT into a page:
 *	          its pages hold other memory too, so it cannot be mapped
 * On CHECK it compares the whole region with what the parent says it
 * wrote, answers, and restores the background where the write went.
 */

enum { XR_ALLOC, XR_REG, XR_ODD, XR_N };

static const char *const xr_name[XR_N] = { "allocated", "registered", "odd" };

#define DST_SIZE	(4 * MiB + 16 * KiB)
#define ODD_SHIFT	100ull
#define ODD_SIZE	(2 * PAGE + 77)
#define ODD_MAP		(3 * PAGE)

/* the parent's apertures onto XR_ALLOC and XR_REG: odd start, 4 KiB guards */
#define AP_OFF		(PAGE + 3)
#define AP_LEN		(4 * MiB + 8 * KiB + 1)

enum { XC_CHECK = 1, XC_QUIT };

struct xcmd {
	__u32 op;
	__u32 reg;
	__u64 off;		/* into the region */
	__u64 len;
	__u64 src_off;		/* the pattern's offset at off */
	__u64 seed;
};

struct xrep {
	__s32 ok;
	__u32 pad;
	__u64 at;
	char why[64];
};

struct xp_region {
	struct clanq_addr addr;
	__u64 key;
	__u64 size;
};

struct xp_hello {
	struct xp_region r[XR_N];
};

struct xp_args {
	unsigned int nic;
	int cmd_fd;
	int rep_fd;
};

struct exporter {
	pid_t pid;
	int cmd_fd;		/* parent writes */
	int rep_fd;		/* parent reads */
	struct xp_hello h;
};

static void exporter_main(void *arg)
{
	struct xp_args *a = arg;
	struct clanq_region r[XR_N];
	struct xp_hello h;
	struct clanq_dev dev;
	struct xcmd c;
	struct xrep rep;
	__u8 *regmem, *oddmem, *bgbuf;
	const char *why;
	unsigned int i;

	CHILD_CHECK_INT(clanq_open_nic(&dev, a->nic), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &r[XR_ALLOC], DST_SIZE), 0);
	regmem = map_anon(DST_SIZE);
	oddmem = map_anon(ODD_MAP);
	bgbuf = map_anon(DST_SIZE);	/* the background, for memcmp */
	CHILD_CHECK(regmem && oddmem && bgbuf);
	bg_fill(bgbuf, 0, DST_SIZE);
	memset(oddmem, 0x11, ODD_MAP);	/* not background, not pattern */
	bg_fill(regmem, 0, DST_SIZE);
	bg_fill(oddmem + ODD_SHIFT, 0, ODD_SIZE);
	CHILD_CHECK_INT(clanq_region_register(&dev, &r[XR_REG], regmem,
					      DST_SIZE), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &r[XR_ODD],
					      oddmem + ODD_SHIFT, ODD_SIZE), 0);
	CHILD_CHECK(r[XR_REG].mem == regmem);
	bg_fill(r[XR_ALLOC].mem, 0, DST_SIZE);
	memset(&h, 0, sizeof(h));
	for (i = 0; i < XR_N; i++) {
		CHILD_CHECK_INT(clanq_region_export(&r[i], CLANQ_RIGHTS_ALL,
						    &h.r[i].key), 0);
		h.r[i].addr = r[i].addr;
		h.r[i].size = r[i].size;
		CHILD_CHECK_INT(r[i].addr.node, a->nic);
	}
	CHILD_CHECK(itest_write_full(a->rep_fd, &h, sizeof(h)));

	for (;;) {
		CHILD_CHECK(itest_read_full(a->cmd_fd, &c, sizeof(c)));
		if (c.op == XC_QUIT)
			break;
		CHILD_CHECK_INT(c.op, XC_CHECK);
		CHILD_CHECK(c.reg < XR_N);
		memset(&rep, 0, sizeof(rep));
		why = region_diff(r[c.reg].mem, bgbuf, r[c.reg].size, c.off,
				  c.len, c.seed, c.src_off, &rep.at);
		rep.ok = !why;
		if (why) {
			snprintf(rep.why, sizeof(rep.why), "%s", why);
		} else {
			/* restore the background for the next write */
			memcpy((__u8 *)r[c.reg].mem + c.off, bgbuf + c.off,
			       c.len);
		}
		CHILD_CHECK(itest_write_full(a->rep_fd, &rep, sizeof(rep)));
	}
	/* the surroundings of the odd region were never written */
	for (i = 0; i < ODD_SHIFT; i++)
		CHILD_CHECK_INT(oddmem[i], 0x11);
	for (i = ODD_SHIFT + ODD_SIZE; i < ODD_MAP; i++)
		CHILD_CHECK_INT(oddmem[i], 0x11);
	for (i = 0; i < XR_N; i++)
		CHILD_CHECK_INT(clanq_region_free(&r[i]), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
	munmap(regmem, DST_SIZE);
	munmap(oddmem, ODD_MAP);
	munmap(bgbuf, DST_SIZE);
}

static void xp_start(struct exporter *x, unsigned int nic)
{
	struct xp_args a;
	int cmd[2], rep[2];

	assert_int_equal(pipe(cmd), 0);
	assert_int_equal(pipe(rep), 0);
	a.nic = nic;
	a.cmd_fd = cmd[0];
	a.rep_fd = rep[1];
	x->pid = itest_fork(exporter_main, &a);
	assert_true(x->pid > 0);
	close(cmd[0]);
	close(rep[1]);
	x->cmd_fd = cmd[1];
	x->rep_fd = rep[0];
	if (!itest_read_full(x->rep_fd, &x->h, sizeof(x->h))) {
		itest_status_ok(itest_wait(x->pid, ITEST_RECV_TIMEOUT),
				"exporter");
		fail_msg("the exporter did not start");
	}
}

/* The exporter confirms: region reg holds pattern (seed, src_off..) at
 * [off, off + len) and background everywhere else. */
static void xp_check(struct exporter *x, __u32 reg, __u64 off, __u64 len,
		     __u64 src_off, __u64 seed)
{
	struct xcmd c = {
		.op = XC_CHECK, .reg = reg, .off = off, .len = len,
		.src_off = src_off, .seed = seed,
	};
	struct xrep rep;

	assert_true(itest_write_full(x->cmd_fd, &c, sizeof(c)));
	if (!itest_read_full(x->rep_fd, &rep, sizeof(rep))) {
		itest_status_ok(itest_wait(x->pid, ITEST_RECV_TIMEOUT),
				"exporter");
		fail_msg("the exporter died");
	}
	if (!rep.ok)
		fail_msg("%s region (node %u), write of %llu bytes at %llu: "
			 "%s, at region offset %llu",
			 xr_name[reg], x->h.r[reg].addr.node,
			 (unsigned long long)len, (unsigned long long)off,
			 rep.why, (unsigned long long)rep.at);
}

static void xp_stop(struct exporter *x)
{
	struct xcmd c = { .op = XC_QUIT };

	assert_true(itest_write_full(x->cmd_fd, &c, sizeof(c)));
	close(x->cmd_fd);
	close(x->rep_fd);
	assert_true(itest_status_ok(itest_wait(x->pid, ITEST_RECV_TIMEOUT),
				    "exporter"));
}

/*
 * The importer: this process, on /dev/clanq0, with two source regions
 * (allocated, registered) and apertures onto the exporter's regions.
 */

enum { SRC_ALLOC, SRC_REG, SRC_N };

#define SRC_SIZE	(4 * MiB + 16 * KiB)

struct importer {
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_region src[SRC_N];
	__u8 *src_mem[SRC_N];
	__u8 *reg_mem;
	struct clanq_ap ap[XR_N];
	__u64 ap_off[XR_N];	/* where each aperture starts in its region */
	__u64 cookie;
};

static void imp_open(struct importer *im, const struct exporter *x,
		     __u32 rights)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	unsigned int i;

	memset(im, 0, sizeof(*im));
	assert_int_equal(clanq_open_nic(&im->dev, 0), 0);
	assert_int_equal(clanq_ep_create_attr(&im->dev, &im->ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&im->dev, &im->src[SRC_ALLOC],
					    SRC_SIZE), 0);
	im->reg_mem = map_anon(SRC_SIZE);
	assert_non_null(im->reg_mem);
	assert_int_equal(clanq_region_register(&im->dev, &im->src[SRC_REG],
					       im->reg_mem, SRC_SIZE), 0);
	im->src_mem[SRC_ALLOC] = im->src[SRC_ALLOC].mem;
	im->src_mem[SRC_REG] = im->reg_mem;
	for (i = 0; i < XR_N; i++) {
		__u64 off = i == XR_ODD ? 0 : AP_OFF;
		__u64 len = i == XR_ODD ? ODD_SIZE : AP_LEN;

		assert_int_equal(clanq_ap_import(&im->dev, &im->ap[i],
						 x->h.r[i].addr, x->h.r[i].key,
						 off, len, rights), 0);
		assert_int_equal(im->ap[i].len, len);
		im->ap_off[i] = off;
	}
	im->cookie = 0xc0de000000000000ull | (__u64)x->h.r[0].addr.node << 32;
}

static void imp_close(struct importer *im)
{
	unsigned int i;

	for (i = 0; i < XR_N; i++)
		assert_int_equal(clanq_ap_close(&im->ap[i]), 0);
	for (i = 0; i < SRC_N; i++)
		assert_int_equal(clanq_region_free(&im->src[i]), 0);
	assert_int_equal(clanq_ep_destroy(&im->ep), 0);
	assert_int_equal(clanq_close(&im->dev), 0);
	munmap(im->reg_mem, SRC_SIZE);
}

/*
 * One RDMA write of len bytes from source s at src_off to aperture d at
 * dst_off, checked by the exporter. Return: nanoseconds from post to
 * completion.
 */
static int64_t rdma_checked(struct importer *im, struct exporter *x,
			    unsigned int s, unsigned int d, __u64 src_off,
			    __u64 dst_off, __u64 len, __u64 seed)
{
	struct clanq_rdma_req req;
	__u64 cookie = im->cookie++;
	int64_t t0, dt;

	pat_fill(im->src_mem[s] + src_off, seed, src_off, len, 0);
	req = itest_rdma_req(im->src[s].addr.id, im->ap[d].id, src_off, dst_off, len,
		    cookie, REQ_DONE);
	t0 = clanq_now_ns();
	assert_int_equal(clanq_rdma_post(&im->ep, &req), 0);
	expect_comp(&im->ep, cookie, 0, len);
	dt = clanq_now_ns() - t0;
	xp_check(x, d, im->ap_off[d] + dst_off, len, src_off, seed);
	return dt;
}

struct xfer {
	__u64 len, src_off, dst_off;
};

/* sizes from 0 to a whole aperture, offsets odd, at both ends */
static const struct xfer xfers[] = {
	{ 0, 3, 5 },
	{ 1, 0, 0 },
	{ 1, 4095, AP_LEN - 1 },		/* the aperture's last byte */
	{ 3, 1, 4094 },
	{ 8, 7, 9 },
	{ 4095, 4097, 1 },
	{ 4096, 0, 4096 },
	{ 4097, 4095, AP_LEN - 4097 },		/* ends at the aperture's end */
	{ 65535, 3, 5 },
	{ 65536, 65536, 12289 },
	{ 65537, 1, 65535 },			/* past 64 KiB: split */
	{ 1 * MiB + 13, 12345, 777 },
	{ 4 * MiB, 5, 4093 },
	{ AP_LEN, 7, 0 },			/* the whole aperture */
};

/* A message of many requests: only its last is signaled. */
#define MSG_PARTS	37

/* Return: the bytes it wrote. */
static __u64 rdma_message(struct importer *im, struct exporter *x,
			  unsigned int s, unsigned int d, __u64 *rnd)
{
	__u64 src_off = 333, dst_off = 4099, total = 0, len = 0, seed;
	__u64 cookie0 = im->cookie;
	struct clanq_rdma_req req;
	unsigned int i;

	seed = itest_rand(rnd);
	for (i = 0; i < MSG_PARTS; i++) {
		len = 1 + itest_rand(rnd) % (48 * KiB);
		pat_fill(im->src_mem[s] + src_off + total, seed,
			 src_off + total, len, 0);
		req = itest_rdma_req(im->src[s].addr.id, im->ap[d].id, src_off + total,
			    dst_off + total, len, im->cookie++,
			    i == MSG_PARTS - 1 ? REQ_DONE : 0);
		assert_int_equal(clanq_rdma_post(&im->ep, &req), 0);
		total += len;
	}
	/* one completion, for the last part: an unsignaled one would come first */
	expect_comp(&im->ep, cookie0 + MSG_PARTS - 1, 0, len);
	expect_no_comp(&im->ep);
	xp_check(x, d, im->ap_off[d] + dst_off, total, src_off, seed);
	return total;
}

static void rdma_transfers(unsigned int exp_nic)
{
	struct importer im;
	struct exporter x;
	__u64 rnd = itest_seed("rdma transfers");
	__u64 reqs0, bytes0, sent = 0, big_bytes = 0, msg_bytes;
	int64_t big_ns = 0, dt;
	unsigned int i, s, d, n = 0;

	xp_start(&x, exp_nic);
	imp_open(&im, &x, CLANQ_RIGHT_WRITE);
	printf("rdma: node 0 -> node %u, rdma_max_xfer %lu\n", exp_nic,
	       param_or("rdma_max_xfer", 0));
	reqs0 = itest_ctr(&im.ep.counters->rdma_reqs);
	bytes0 = itest_ctr(&im.ep.counters->rdma_bytes);

	for (i = 0; i < ARRAY_SIZE(xfers); i++) {
		for (s = 0; s < SRC_N; s++) {
			for (d = XR_ALLOC; d <= XR_REG; d++) {
				/* MiB-sized ones: two of the four pairings */
				if (xfers[i].len > 64 * KiB && s == d)
					continue;
				dt = rdma_checked(&im, &x, s, d,
						  xfers[i].src_off,
						  xfers[i].dst_off,
						  xfers[i].len,
						  itest_rand(&rnd));
				if (xfers[i].len >= 4 * MiB) {
					big_bytes += xfers[i].len;
					big_ns += dt;
				}
				sent += xfers[i].len;
				n++;
			}
		}
	}
	/* a region whose pages it shares with other memory: RDMA still works */
	for (s = 0; s < SRC_N; s++) {
		rdma_checked(&im, &x, s, XR_ODD, 3, 0, ODD_SIZE,
			     itest_rand(&rnd));
		rdma_checked(&im, &x, s, XR_ODD, 4097, ODD_SIZE - 1, 1,
			     itest_rand(&rnd));
		rdma_checked(&im, &x, s, XR_ODD, 11, 4095, 4099,
			     itest_rand(&rnd));
		sent += ODD_SIZE + 1 + 4099;
		n += 3;
	}
	msg_bytes = rdma_message(&im, &x, SRC_REG, XR_ALLOC, &rnd);
	msg_bytes += rdma_message(&im, &x, SRC_ALLOC, XR_REG, &rnd);

	/* the counters saw every request and byte (and the message parts) */
	assert_int_equal(itest_ctr(&im.ep.counters->rdma_reqs) - reqs0,
			 n + 2 * MSG_PARTS);
	assert_int_equal(itest_ctr(&im.ep.counters->rdma_bytes) - bytes0,
			 sent + msg_bytes);
	assert_int_equal(itest_ctr(&im.ep.counters->rdma_errors), 0);
	printf("rdma: %u checked writes, %llu bytes; 4 MiB writes at %.1f MiB/s "
	       "(post to completion, informal)\n", n, (unsigned long long)sent,
	       mib_per_s(big_bytes, big_ns));

	imp_close(&im);
	xp_stop(&x);
}

static void rdma_writes_within_a_node_land_exactly_where_asked(void **state)
{
	(void)state;
	rdma_transfers(0);
}

static void rdma_writes_across_nodes_land_exactly_where_asked(void **state)
{
	(void)state;
	rdma_transfers(1);
}

/*
 * PIO.
 */

static const struct xfer pio_writes[] = {
	{ 1, 0, 0 },
	{ 1, 7, AP_LEN - 1 },
	{ 3, 1, 4094 },
	{ 63, 5, 4093 },			/* across a page boundary */
	{ 4095, 4097, 1 },
	{ 4097, 3, AP_LEN - 4097 },
	{ 65537, 1, 65535 },
	{ 1 * MiB + 1, 12345, 2 * MiB + 3 },
};

static void pio_transfers(unsigned int exp_nic)
{
	struct importer im;
	struct exporter x;
	__u64 rnd = itest_seed("pio");
	__u64 seed, bytes = 0;
	unsigned int i, d;
	int64_t t0, ns = 0;
	__u8 *buf;

	xp_start(&x, exp_nic);
	imp_open(&im, &x, CLANQ_RIGHTS_ALL);
	buf = im.reg_mem;	/* any memory will do as a PIO source */

	/* page-aligned regions can be mapped, at the right place */
	for (d = XR_ALLOC; d <= XR_REG; d++) {
		struct clanq_ap *ap = &im.ap[d];

		assert_true(ap->map_size > 0);
		assert_int_equal(clanq_ap_map(ap), 0);
		assert_non_null(ap->base);
		assert_int_equal(ap->base - (char *)ap->map, ap->map_delta);
		/*
		 * The pages the window needs and no more: a mapping from the
		 * region's start would show bytes the import did not grant.
		 */
		assert_int_equal(ap->map_delta, AP_OFF % PAGE);
		assert_int_equal(ap->map_size,
				 (AP_OFF % PAGE + AP_LEN + PAGE - 1) / PAGE * PAGE);
		/* what we see is the exporter's background, both ends */
		assert_int_equal(pat_diff((__u8 *)ap->base, BG_SEED, AP_OFF,
					  64 * KiB, TOP), 64 * KiB);
		assert_int_equal(pat_diff((__u8 *)ap->base + AP_LEN - 64 * KiB,
					  BG_SEED, AP_OFF + AP_LEN - 64 * KiB,
					  64 * KiB, TOP), 64 * KiB);
	}
	/* one whose pages hold other memory too cannot */
	assert_int_equal(im.ap[XR_ODD].map_size, 0);
	assert_int_equal(clanq_ap_map(&im.ap[XR_ODD]), -EOPNOTSUPP);
	assert_null(im.ap[XR_ODD].base);

	for (d = XR_ALLOC; d <= XR_REG; d++) {
		struct clanq_ap *ap = &im.ap[d];

		for (i = 0; i < ARRAY_SIZE(pio_writes); i++) {
			const struct xfer *w = &pio_writes[i];

			seed = itest_rand(&rnd);
			pat_fill(buf + w->src_off, seed, w->src_off, w->len, 0);
			t0 = clanq_now_ns();
			assert_int_equal(clanq_ap_write(ap, w->dst_off,
							buf + w->src_off,
							w->len), 0);
			ns += clanq_now_ns() - t0;
			bytes += w->len;
			/* visible through our own mapping, and to the owner */
			assert_int_equal(pat_diff((__u8 *)ap->base + w->dst_off,
						  seed, w->src_off, w->len, 0),
					 w->len);
			xp_check(&x, d, AP_OFF + w->dst_off, w->len,
				 w->src_off, seed);
		}
		/* outside the window: refused, nothing written */
		assert_int_equal(clanq_ap_write(ap, AP_LEN - 3, buf, 4), -ERANGE);
		assert_int_equal(clanq_ap_write(ap, AP_LEN + 1, buf, 0), -ERANGE);
		assert_int_equal(clanq_ap_write(ap, ~0ull, buf, 2), -ERANGE);
		assert_int_equal(clanq_ap_write(ap, 1, buf, ~(size_t)0),
				 -ERANGE);
		xp_check(&x, d, 0, 0, 0, 0);
	}
	/* and the same window works through the engine too */
	rdma_checked(&im, &x, SRC_ALLOC, XR_ALLOC, 17, 4093, 8191,
		     itest_rand(&rnd));
	printf("pio: node 0 -> node %u, %llu bytes at %.1f MiB/s (informal)\n",
	       exp_nic, (unsigned long long)bytes, mib_per_s(bytes, ns));

	imp_close(&im);
	xp_stop(&x);
}

static void pio_writes_within_a_node_land_exactly_where_asked(void **state)
{
	(void)state;
	pio_transfers(0);
}

static void pio_writes_across_nodes_land_exactly_where_asked(void **state)
{
	(void)state;
	pio_transfers(1);
}

static void a_read_only_import_cannot_be_written_by_pio(void **state)
{
	struct importer im;
	struct exporter x;
	struct clanq_rdma_req req;
	struct clanq_ap *ap;
	unsigned int d;
	__u8 b = 0x42;
	void *p;

	(void)state;
	xp_start(&x, 1);
	imp_open(&im, &x, CLANQ_RIGHT_READ);
	for (d = XR_ALLOC; d <= XR_REG; d++) {
		ap = &im.ap[d];
		/* it maps, read-only, and shows the exporter's bytes */
		assert_int_equal(clanq_ap_map(ap), 0);
		assert_int_equal(pat_diff((__u8 *)ap->base, BG_SEED, AP_OFF,
					  8 * KiB, TOP), 8 * KiB);
		/* the library refuses to store through it */
		assert_int_equal(clanq_ap_write(ap, 0, &b, 1), -ENXIO);
		/* a writable mapping is refused by the driver */
		p = mmap(NULL, ap->map_size, RW, MAP_SHARED, ap->fd,
			 (off_t)ap->mmap_offset);
		if (p != MAP_FAILED)
			fail_msg("read-only aperture mapped PROT_WRITE");
		assert_true(errno == EACCES || errno == EPERM);
		/* and so is making the read-only mapping writable */
		assert_int_equal(mprotect(ap->map, ap->map_size, RW), -1);
		assert_int_equal(errno, EACCES);
		/* a read-only shared mapping of it works */
		p = mmap(NULL, ap->map_size, PROT_READ, MAP_SHARED, ap->fd,
			 (off_t)ap->mmap_offset);
		assert_true(p != MAP_FAILED);
		assert_int_equal(munmap(p, ap->map_size), 0);
		/* nor can the engine write through it */
		pat_fill(im.src_mem[SRC_ALLOC], 1, 0, 16, 0);
		req = itest_rdma_req(im.src[SRC_ALLOC].addr.id, ap->id, 0, 0, 16,
			    im.cookie, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&im.ep, &req), 0);
		expect_comp(&im.ep, im.cookie++, -EACCES, 0);
		xp_check(&x, d, 0, 0, 0, 0);
	}
	imp_close(&im);
	xp_stop(&x);
}

/*
 * Eight endpoints in four processes, posting at once.
 */

#define MANY_PROCS	4
#define MANY_PER_PROC	2
#define MANY_EPS	(MANY_PROCS * MANY_PER_PROC)
#define MANY_REQS	300
#define MANY_SLICE	(1536 * KiB)
#define MANY_SRC	(160 * KiB)

struct many_plan {
	struct clanq_addr region;
	__u64 key;
	__u64 seed[MANY_EPS];
	__u64 sum[MANY_EPS];
	__u64 end[MANY_EPS];
	__u32 len[MANY_EPS][MANY_REQS];
	__u32 src_off[MANY_EPS][MANY_REQS];
	__u32 dst_off[MANY_EPS][MANY_REQS];
	int go;
};

struct many_args {
	struct many_plan *plan;
	unsigned int proc;
};

static __u64 many_cookie(unsigned int e, unsigned int k)
{
	return 0x3a00000000000000ull | (__u64)e << 32 | k;
}

static void many_child(void *arg)
{
	struct many_args *a = arg;
	struct many_plan *p = a->plan;
	struct clanq_ep_attr attr = { .rq_slots = 32, .cq_slots = 16 };
	struct clanq_ep ep[MANY_PER_PROC];
	struct clanq_region src[MANY_PER_PROC];
	struct clanq_ap ap[MANY_PER_PROC];
	unsigned int posted[MANY_PER_PROC] = { 0 }, done[MANY_PER_PROC] = { 0 };
	unsigned int j, e, all = 0;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct clanq_dev dev;
	__u64 end;
	int r;

	CHILD_CHECK_INT(clanq_open_nic(&dev, a->proc % 2), 0);
	for (j = 0; j < MANY_PER_PROC; j++) {
		e = a->proc * MANY_PER_PROC + j;
		CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep[j], &attr), 0);
		CHILD_CHECK_INT(clanq_region_alloc(&dev, &src[j], MANY_SRC), 0);
		pat_fill(src[j].mem, p->seed[e], 0, MANY_SRC, 0);
		CHILD_CHECK_INT(clanq_ap_import(&dev, &ap[j], p->region, p->key,
						(__u64)e * MANY_SLICE,
						MANY_SLICE,
						CLANQ_RIGHT_WRITE), 0);
	}
	end = clanq_now_ns() + COMP_TIMEOUT;
	while (!__atomic_load_n(&p->go, __ATOMIC_ACQUIRE)) {
		CHILD_CHECK(clanq_now_ns() < end);
		sched_yield();
	}

	end = clanq_now_ns() + RUN_TIMEOUT;
	while (all < MANY_PER_PROC) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("proc %u: completions %u, %u of %u after %lld s",
				   a->proc, done[0], done[1], MANY_REQS,
				   (long long)(RUN_TIMEOUT / ITEST_NS_PER_S));
		for (j = 0; j < MANY_PER_PROC; j++) {
			e = a->proc * MANY_PER_PROC + j;
			while (posted[j] < MANY_REQS) {
				unsigned int k = posted[j];

				req = itest_rdma_req(src[j].addr.id, ap[j].id,
					    p->src_off[e][k], p->dst_off[e][k],
					    p->len[e][k], many_cookie(e, k),
					    REQ_DONE);
				r = clanq_rdma_post(&ep[j], &req);
				if (r == -EAGAIN)
					break;
				CHILD_CHECK_INT(r, 0);
				posted[j]++;
			}
			while (!clanq_rdma_poll(&ep[j], &c)) {
				unsigned int k = done[j];

				if (k >= MANY_REQS)
					CHILD_FAIL("ep %u: completion %#llx after all %u",
						   e, (unsigned long long)c.cookie,
						   MANY_REQS);
				if (c.cookie != many_cookie(e, k) || c.status ||
				    c.len != p->len[e][k])
					CHILD_FAIL("ep %u: completion %u: cookie %#llx status %d len %llu, expected cookie %#llx len %u",
						   e, k, (unsigned long long)c.cookie,
						   c.status, (unsigned long long)c.len,
						   (unsigned long long)many_cookie(e, k),
						   p->len[e][k]);
				if (++done[j] == MANY_REQS)
					all++;
			}
		}
		sched_yield();
	}
	for (j = 0; j < MANY_PER_PROC; j++) {
		e = a->proc * MANY_PER_PROC + j;
		/* exactly once: nothing more comes */
		itest_sleep_ns(ITEST_QUIET_NS);
		CHILD_CHECK_INT(clanq_rdma_poll(&ep[j], &c), -EAGAIN);
		CHILD_CHECK_INT(itest_ctr(&ep[j].counters->rdma_reqs), MANY_REQS);
		CHILD_CHECK_INT(itest_ctr(&ep[j].counters->rdma_bytes), p->sum[e]);
		CHILD_CHECK_INT(itest_ctr(&ep[j].counters->rdma_errors), 0);
		CHILD_CHECK_INT(clanq_ap_close(&ap[j]), 0);
		CHILD_CHECK_INT(clanq_region_free(&src[j]), 0);
		CHILD_CHECK_INT(clanq_ep_destroy(&ep[j]), 0);
	}
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void eight_endpoints_in_four_processes_get_every_completion_once_in_order(void **state)
{
	struct many_args args[MANY_PROCS];
	pid_t pids[MANY_PROCS];
	struct many_plan *p;
	struct clanq_region dst;
	struct clanq_dev dev;
	__u64 rnd = itest_seed("many endpoints");
	__u64 total = 0, at, off;
	unsigned int e, k, i;
	const __u8 *m;
	char who[32];
	int64_t t0, dt;
	size_t d;

	(void)state;
	p = mmap(NULL, sizeof(*p), RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0, sizeof(*p));

	/*
	 * The plan: per endpoint, MANY_REQS writes of mixed sizes (mostly
	 * small, some past the 64 KiB split) packed into its slice with
	 * 0-2 byte gaps, from random source offsets.
	 */
	for (e = 0; e < MANY_EPS; e++) {
		p->seed[e] = itest_rand(&rnd);
		off = 0;
		for (k = 0; k < MANY_REQS; k++) {
			__u64 x = itest_rand(&rnd), len;

			if (x % 50 == 0)
				len = 65536 + (x >> 8) % 8192;
			else if (x % 16 == 0)
				len = 2049 + (x >> 8) % (14 * KiB);
			else
				len = 1 + (x >> 8) % 2048;
			off += (x >> 40) % 3;
			if (off + len > MANY_SLICE)
				len = 1;
			assert_true(off + len <= MANY_SLICE);
			p->len[e][k] = (__u32)len;
			p->dst_off[e][k] = (__u32)off;
			p->src_off[e][k] = (__u32)((x >> 24) % (MANY_SRC - len + 1));
			p->sum[e] += len;
			off += len;
		}
		p->end[e] = off;
		total += p->sum[e];
	}

	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_region_alloc(&dev, &dst, MANY_EPS * MANY_SLICE), 0);
	bg_fill(dst.mem, 0, MANY_EPS * MANY_SLICE);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &p->key), 0);
	p->region = dst.addr;

	for (i = 0; i < MANY_PROCS; i++) {
		args[i].plan = p;
		args[i].proc = i;
		pids[i] = itest_fork(many_child, &args[i]);
		assert_true(pids[i] > 0);
	}
	t0 = clanq_now_ns();
	__atomic_store_n(&p->go, 1, __ATOMIC_RELEASE);
	for (i = 0; i < MANY_PROCS; i++) {
		snprintf(who, sizeof(who), "poster %u", i);
		assert_true(itest_status_ok(itest_wait(pids[i], RUN_TIMEOUT +
						       COMP_TIMEOUT), who));
	}
	dt = clanq_now_ns() - t0;
	printf("many: %u endpoints x %u requests, %llu bytes in %.2f s (informal)\n",
	       MANY_EPS, MANY_REQS, (unsigned long long)total,
	       (double)dt / ITEST_NS_PER_S);

	/* every byte: gaps and tails background, writes their pattern */
	m = dst.mem;
	for (e = 0; e < MANY_EPS; e++) {
		__u64 base = (__u64)e * MANY_SLICE;

		at = 0;
		for (k = 0; k < MANY_REQS; k++) {
			off = p->dst_off[e][k];
			d = pat_diff(m + base + at, BG_SEED, base + at,
				     off - at, TOP);
			if (d < off - at)
				fail_msg("ep %u: gap before write %u changed at %llu",
					 e, k, (unsigned long long)(at + d));
			d = pat_diff(m + base + off, p->seed[e],
				     p->src_off[e][k], p->len[e][k], 0);
			if (d < p->len[e][k])
				fail_msg("ep %u: write %u (%u bytes at %llu) wrong at byte %zu",
					 e, k, p->len[e][k],
					 (unsigned long long)off, d);
			at = off + p->len[e][k];
		}
		assert_int_equal(at, p->end[e]);
		d = pat_diff(m + base + at, BG_SEED, base + at,
			     MANY_SLICE - at, TOP);
		if (d < MANY_SLICE - at)
			fail_msg("ep %u: tail changed at %llu", e,
				 (unsigned long long)(at + d));
	}
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(p, sizeof(*p));
}

/*
 * Malformed requests.
 */

#define ERR_SRC		(64 * KiB)
#define ERR_DST		(64 * KiB)
#define ERR_AP_OFF	(PAGE + 1)
#define ERR_AP_LEN	(32 * KiB)
#define ERR_MAX		32
#define GOOD_LEN	33

struct bad {
	const char *what;
	struct clanq_rdma_req req;
	int status;
};

static void each_bad_request_completes_with_its_status_and_stalls_nothing(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 128, .cq_slots = 128 };
	struct clanq_dev a, b, c;
	struct clanq_region src, dst, gone, other;
	struct clanq_ap apw, apr, apg, apx;
	struct clanq_rdma_req base, good;
	struct clanq_rdma_comp comp;
	struct bad bads[ERR_MAX];
	struct clanq_ep ep;
	__u64 kw, kg, seed = 0x5eed0f0bad, at;
	unsigned int n = 0, i;
	const char *why;
	__u8 *expect;

	(void)state;
	/* a: the poster; b: the exporter, on node 1; c: a bystander on node 0 */
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_open_nic(&c, 0), 0);
	assert_int_equal(clanq_ep_create_attr(&a, &ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&a, &src, ERR_SRC), 0);
	pat_fill(src.mem, seed, 0, ERR_SRC, 0);
	assert_int_equal(clanq_region_alloc(&b, &dst, ERR_DST), 0);
	bg_fill(dst.mem, 0, ERR_DST);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHTS_ALL, &kw), 0);
	assert_int_equal(clanq_region_alloc(&b, &gone, ERR_DST), 0);
	assert_int_equal(clanq_region_export(&gone, CLANQ_RIGHTS_ALL, &kg), 0);
	assert_int_equal(clanq_region_alloc(&c, &other, PAGE), 0);

	assert_int_equal(clanq_ap_import(&a, &apw, dst.addr, kw, ERR_AP_OFF,
					 ERR_AP_LEN, CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_import(&a, &apr, dst.addr, kw, ERR_AP_OFF,
					 ERR_AP_LEN, CLANQ_RIGHT_READ), 0);
	/* the same window as apw's: only the revocation can be wrong */
	assert_int_equal(clanq_ap_import(&a, &apg, gone.addr, kg, ERR_AP_OFF,
					 ERR_AP_LEN, CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(clanq_ap_import(&a, &apx, dst.addr, kw, 0, PAGE,
					 CLANQ_RIGHT_WRITE), 0);
	/* apg's region goes away under it; apx is closed: its id names nothing */
	assert_int_equal(clanq_region_free(&gone), 0);
	assert_int_equal(clanq_ap_close(&apx), 0);

#define BAD(w, st, field, val)						\
	do {								\
		bads[n].what = (w);					\
		bads[n].req = base;					\
		bads[n].req.field = (val);				\
		bads[n].status = (st);					\
		n++;							\
	} while (0)

	/*
	 * Each bad request, were it carried out, would write a distinct
	 * 32-byte piece at 16 KiB + 64 i of the window, which the check of
	 * the whole region below would find.
	 */
	base = itest_rdma_req(src.addr.id, apw.id, 0, 0, 32, 0, CLANQ_RDMA_LAST);
	BAD("unknown flag", -EINVAL, flags, CLANQ_RDMA_LAST | (1u << 2));
	BAD("all flags", -EINVAL, flags, ~0u);
	BAD("reserved0", -EINVAL, reserved0, 1);
	BAD("reserved[0]", -EINVAL, reserved[0], 1);
	BAD("reserved[1]", -EINVAL, reserved[1], 1ull << 63);
	BAD("unknown region", -ENOENT, src_region, 0xfffffffeu);
	BAD("another context's region", -ENOENT, src_region, other.addr.id);
	BAD("unknown aperture", -ENOENT, dst_ap, 0xfffffffeu);
	BAD("closed aperture", -ENOENT, dst_ap, apx.id);
	BAD("read-only aperture", -EACCES, dst_ap, apr.id);
	BAD("revoked aperture", -ENXIO, dst_ap, apg.id);
	BAD("src_off + len past the region", -ERANGE, src_off, ERR_SRC - 31);
	BAD("src_off at the region's end", -ERANGE, src_off, ERR_SRC);
	BAD("src_off + len overflows", -ERANGE, src_off, ~0ull - 15);
	BAD("dst_off + len past the aperture", -ERANGE, dst_off, ERR_AP_LEN - 31);
	BAD("dst_off + len overflows", -ERANGE, dst_off, ~0ull - 15);
	BAD("len past both", -ERANGE, len, ERR_SRC + 1);
	BAD("len overflows", -ERANGE, len, ~0ull);
#undef BAD
	assert_true(n <= ERR_MAX);
	assert_true(2 * n < attr.cq_slots);

	/* bad, good, bad, good...: all in the queue before the engine looks */
	for (i = 0; i < n; i++) {
		struct clanq_rdma_req *r = &bads[i].req;

		r->cookie = 0xbad0000000000000ull | i;
		/* errors complete whether signaled or not */
		if (i % 2 && !(r->flags & ~CLANQ_RDMA_FLAGS))
			r->flags |= CLANQ_RDMA_SIGNAL;
		if (r->dst_off == 0)
			r->dst_off = 16 * KiB + 64 * i;
		if (r->src_off == 0)
			r->src_off = 8 * KiB + 64 * i;
		assert_int_equal(clanq_rdma_post(&ep, r), 0);
		good = itest_rdma_req(src.addr.id, apw.id, 100 + 64 * i, 1 + 64 * i,
			     GOOD_LEN, 0x6006000000000000ull | i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&ep, &good), 0);
	}
	for (i = 0; i < n; i++) {
		memset(&comp, 0, sizeof(comp));
		if (!itest_wait_comp(&ep, &comp, COMP_TIMEOUT))
			fail_msg("no completion for bad request %u (%s)", i,
				 bads[i].what);
		if (comp.cookie != bads[i].req.cookie ||
		    comp.status != bads[i].status || comp.len != 0)
			fail_msg("%s: completion cookie %#llx status %d len %llu; expected cookie %#llx status %d len 0",
				 bads[i].what, (unsigned long long)comp.cookie,
				 comp.status, (unsigned long long)comp.len,
				 (unsigned long long)bads[i].req.cookie,
				 bads[i].status);
		expect_comp(&ep, 0x6006000000000000ull | i, 0, GOOD_LEN);
	}
	expect_no_comp(&ep);
	assert_int_equal(itest_ctr(&ep.counters->rdma_errors), n);

	/* the good ones wrote, the bad ones nothing */
	expect = malloc(ERR_DST);
	assert_non_null(expect);
	bg_fill(expect, 0, ERR_DST);
	for (i = 0; i < n; i++)
		pat_fill(expect + ERR_AP_OFF + 1 + 64 * i, seed, 100 + 64 * i,
			 GOOD_LEN, 0);
	at = mem_diff(dst.mem, expect, ERR_DST);
	why = at < ERR_DST ? "region differs" : NULL;
	free(expect);
	if (why)
		fail_msg("%s at offset %llu", why, (unsigned long long)at);

	assert_int_equal(clanq_ap_close(&apw), 0);
	assert_int_equal(clanq_ap_close(&apr), 0);
	assert_int_equal(clanq_ap_close(&apg), 0);
	assert_int_equal(clanq_region_free(&src), 0);
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_region_free(&other), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&c), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

/*
 * Doorbells.
 */

/* A poster on node 0 and a 256 KiB exported region on node 1. */
struct pair {
	struct clanq_dev a, b;
	struct clanq_ep ep;
	struct clanq_region src, dst;
	struct clanq_ap ap;
};

#define PAIR_SRC	(64 * KiB)
#define PAIR_DST	(256 * KiB)
#define PAIR_SEED	0x9a112ull

static void pair_open(struct pair *p, const struct clanq_ep_attr *attr)
{
	__u64 key;

	assert_int_equal(clanq_open_nic(&p->a, 0), 0);
	assert_int_equal(clanq_open_nic(&p->b, 1), 0);
	assert_int_equal(clanq_ep_create_attr(&p->a, &p->ep, attr), 0);
	assert_int_equal(clanq_region_alloc(&p->a, &p->src, PAIR_SRC), 0);
	pat_fill(p->src.mem, PAIR_SEED, 0, PAIR_SRC, 0);
	assert_int_equal(clanq_region_alloc(&p->b, &p->dst, PAIR_DST), 0);
	bg_fill(p->dst.mem, 0, PAIR_DST);
	assert_int_equal(clanq_region_export(&p->dst, CLANQ_RIGHT_WRITE, &key), 0);
	assert_int_equal(clanq_ap_import(&p->a, &p->ap, p->dst.addr, key, 0,
					 PAIR_DST, CLANQ_RIGHT_WRITE), 0);
}

static void pair_close(struct pair *p)
{
	assert_int_equal(clanq_ap_close(&p->ap), 0);
	assert_int_equal(clanq_region_free(&p->dst), 0);
	assert_int_equal(clanq_region_free(&p->src), 0);
	assert_int_equal(clanq_ep_destroy(&p->ep), 0);
	assert_int_equal(clanq_close(&p->b), 0);
	assert_int_equal(clanq_close(&p->a), 0);
}

/* Request i of a stream: small, at its own place in the destination. */
#define STREAM_LEN	64

static struct clanq_rdma_req stream_req(struct pair *p, unsigned int i,
					__u32 flags)
{
	return itest_rdma_req(p->src.addr.id, p->ap.id, (i * 61ull) % (PAIR_SRC - STREAM_LEN),
		     (__u64)i * STREAM_LEN, STREAM_LEN, 0xd00b000000000000ull | i,
		     flags);
}

/* The destination holds requests [0, n) of the stream, and nothing else. */
static void stream_check(struct pair *p, unsigned int n)
{
	const __u8 *m = p->dst.mem;
	unsigned int i;
	size_t d;

	for (i = 0; i < n; i++) {
		d = pat_diff(m + (size_t)i * STREAM_LEN, PAIR_SEED,
			     (i * 61ull) % (PAIR_SRC - STREAM_LEN), STREAM_LEN, 0);
		if (d < STREAM_LEN)
			fail_msg("stream request %u: byte %zu wrong", i, d);
	}
	d = pat_diff(m + (size_t)n * STREAM_LEN, BG_SEED, (__u64)n * STREAM_LEN,
		     PAIR_DST - (size_t)n * STREAM_LEN, TOP);
	assert_int_equal(d, PAIR_DST - (size_t)n * STREAM_LEN);
}

#define STREAM_REQS	2000
#define STREAM_EVERY	64

static void a_stream_of_posts_rings_few_doorbells(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 256, .cq_slots = 64 };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct pair p;
	unsigned int i, got = 0, want = 0, full = 0;
	__u64 q, e0, e1, reqs, bells, calls;
	__u64 end, t0;
	int64_t dt;
	int r;

	(void)state;
	pair_open(&p, &attr);
	q = itest_query_cost(&p.a);

	e0 = itest_entries(&p.a);
	t0 = clanq_now_ns();
	end = t0 + RUN_TIMEOUT;
	for (i = 0; i < STREAM_REQS; i++) {
		bool sig = i % STREAM_EVERY == STREAM_EVERY - 1 ||
			   i == STREAM_REQS - 1;

		req = stream_req(&p, i, CLANQ_RDMA_LAST |
				 (sig ? CLANQ_RDMA_SIGNAL : 0));
		want += sig;
		while ((r = clanq_rdma_post(&p.ep, &req)) == -EAGAIN) {
			/* the queue is full: the engine is busy with it */
			full++;
			assert_true(clanq_now_ns() < end);
			clanq_cpu_relax();
		}
		assert_int_equal(r, 0);
		while (!clanq_rdma_poll(&p.ep, &c)) {
			assert_int_equal(c.status, 0);
			assert_int_equal(c.len, STREAM_LEN);
			got++;
		}
	}
	while (got < want) {
		memset(&c, 0, sizeof(c));
		if (!itest_wait_comp(&p.ep, &c, COMP_TIMEOUT))
			fail_msg("%u of %u completions", got, want);
		assert_int_equal(c.status, 0);
		got++;
	}
	/* the last completion is the last request's: all came in order */
	assert_int_equal(c.cookie, 0xd00b000000000000ull | (STREAM_REQS - 1));
	dt = clanq_now_ns() - t0;
	e1 = itest_entries(&p.a);
	expect_no_comp(&p.ep);

	reqs = itest_ctr(&p.ep.counters->rdma_reqs);
	bells = itest_ctr(&p.ep.counters->rdma_kicks);
	calls = e1 - e0 - q;
	printf("kicks/requests = %.4f (%llu/%llu); system calls/requests = %.4f (%llu); "
	       "queue full %u times; %.0f requests/s (informal)\n",
	       (double)bells / (double)reqs, (unsigned long long)bells,
	       (unsigned long long)reqs, (double)calls / (double)reqs,
	       (unsigned long long)calls, full,
	       STREAM_REQS / ((double)dt / ITEST_NS_PER_S));
	assert_int_equal(reqs, STREAM_REQS);
	/* the first post found the engine idle */
	assert_true(bells >= 1);
	/* every doorbell that woke the engine was a system call of ours */
	assert_true(bells <= calls);
	/* the point: most posts find the engine busy and make no call */
	assert_true(bells * 2 < reqs);
	assert_true(calls * 2 < reqs);
	stream_check(&p, STREAM_REQS);
	pair_close(&p);
}

static void an_idle_engine_is_woken_by_exactly_one_doorbell(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_req req;
	struct pair p;
	__u64 q, e0, e1;
	unsigned int i;

	(void)state;
	pair_open(&p, &attr);
	q = itest_query_cost(&p.a);
	/* a new endpoint: the engine is not looking at its queue */
	assert_int_not_equal(__atomic_load_n(p.ep.need_wakeup, __ATOMIC_ACQUIRE), 0);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_kicks), 0);

	for (i = 0; i < 3; i++) {
		/* idle again once the last request is done */
		assert_true(wait_doorbell_set(&p.ep));
		req = stream_req(&p, i, REQ_DONE);
		e0 = itest_entries(&p.a);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
		e1 = itest_entries(&p.a);
		/* exactly one system call: the doorbell */
		assert_int_equal(e1 - e0, q + 1);
		expect_comp(&p.ep, req.cookie, 0, STREAM_LEN);
		assert_int_equal(itest_ctr(&p.ep.counters->rdma_kicks), i + 1);
		assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), i + 1);
	}
	stream_check(&p, 3);
	pair_close(&p);
}

/*
 * A region written through its own aperture, the two ranges overlapping
 * within a page: the result is memmove()'s, in both directions (a plain
 * forward copy would smear the pattern when the target is above).
 */
static void an_overlapping_write_within_one_region_is_a_memmove(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 8, .cq_slots = 8 };
	static const struct { __u64 src, dst, len; } cases[] = {
		{ 0, 8, 1000 },		/* target above the source */
		{ 140, 100, 2000 },	/* target below */
		{ 1, 2, PAGE - 2 },	/* one byte apart, almost the page */
	};
	unsigned char want[PAGE];
	struct clanq_rdma_req req;
	struct clanq_region r;
	struct clanq_dev d;
	struct clanq_ep ep;
	struct clanq_ap ap;
	unsigned int i;
	__u64 key;

	(void)state;
	assert_int_equal(clanq_open_nic(&d, 0), 0);
	assert_int_equal(clanq_ep_create_attr(&d, &ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&d, &r, PAGE), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHT_WRITE, &key), 0);
	assert_int_equal(clanq_ap_import(&d, &ap, r.addr, key, 0, PAGE,
					 CLANQ_RIGHT_WRITE), 0);
	for (i = 0; i < PAGE; i++)
		((unsigned char *)r.mem)[i] = (unsigned char)(i * 13 + 1);
	memcpy(want, r.mem, PAGE);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		memmove(want + cases[i].dst, want + cases[i].src, cases[i].len);
		req = itest_rdma_req(r.addr.id, ap.id, cases[i].src, cases[i].dst,
			    cases[i].len, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&ep, &req), 0);
		expect_comp(&ep, i, 0, cases[i].len);
		assert_memory_equal(r.mem, want, PAGE);
	}
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&d), 0);
}

/*
 * RDMA completions are events: a CLANQ_EV_RDMA registration hears of a
 * completion posted later, and one made while a completion waits unread
 * hears of it at once, with the RDMA bit in the event's hint.
 */
static void rdma_completions_raise_evq_events(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_req req;
	struct clanq_event ev;
	struct clanq_evq evq;
	struct pair p;
	unsigned int i;
	int reg;

	(void)state;
	pair_open(&p, &attr);
	assert_int_equal(clanq_evq_create(&p.a, &evq, 4), 0);
	for (i = 0; i < 2; i++) {
		req = stream_req(&p, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
		if (i == 0) {
			/* the engine lets the queue go after completing */
			assert_true(wait_doorbell_set(&p.ep));
			reg = clanq_evq_register(&evq, &p.ep, CLANQ_EV_RDMA,
						 0xc0ffee);
			assert_true(reg >= 0);
		}
		memset(&ev, 0, sizeof(ev));
		assert_int_equal(clanq_evq_wait(&evq, &ev, COMP_TIMEOUT), 0);
		assert_int_equal(ev.reg, reg);
		assert_int_equal(ev.cookie, 0xc0ffee);
		assert_int_equal(ev.events, CLANQ_EV_RDMA);
		expect_comp(&p.ep, req.cookie, 0, STREAM_LEN);
	}
	/* one event per batch: nothing more is queued */
	assert_int_equal(clanq_evq_wait(&evq, &ev, 0), -ETIMEDOUT);
	assert_int_equal(clanq_evq_destroy(&evq), 0);
	stream_check(&p, 2);
	pair_close(&p);
}

/*
 * rdma_kicks counts KICK calls, i.e. system calls (uapi header). A
 * kick made while the engine is still working through the queue is
 * counted, but must not put the queue on the engine twice: every request
 * completes exactly once and nothing more arrives.
 */
#define BUSY_REQS	4
#define BUSY_LEN	(4 * MiB)

static void a_doorbell_rung_while_the_engine_is_busy_wakes_nothing_twice(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_region src, dst;
	struct clanq_rdma_req req;
	struct clanq_dev a, b;
	struct clanq_ep ep;
	struct clanq_ap ap;
	__u64 key, bytes, bells;
	__u32 bell_word;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_ep_create_attr(&a, &ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&a, &src, BUSY_LEN), 0);
	assert_int_equal(clanq_region_alloc(&b, &dst, BUSY_LEN), 0);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &key), 0);
	assert_int_equal(clanq_ap_import(&a, &ap, dst.addr, key, 0, BUSY_LEN,
					 CLANQ_RIGHT_WRITE), 0);
	pat_fill(src.mem, 0xb05e, 0, BUSY_LEN, 0);

	/* 16 MiB of work, split into 64 KiB turns: the engine stays busy */
	for (i = 0; i < BUSY_REQS; i++) {
		req = itest_rdma_req(src.addr.id, ap.id, 0, 0, BUSY_LEN, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&ep, &req), 0);
	}
	bell_word = __atomic_load_n(ep.need_wakeup, __ATOMIC_ACQUIRE);
	assert_int_equal(clanq_rdma_kick(&ep), 0);
	bytes = itest_ctr(&ep.counters->rdma_bytes);
	for (i = 0; i < BUSY_REQS; i++)
		expect_comp(&ep, i, 0, BUSY_LEN);
	bells = itest_ctr(&ep.counters->rdma_kicks);
	printf("busy kick: doorbell word %u, %llu of %llu bytes done after it, "
	       "rdma_kicks %llu\n", bell_word, (unsigned long long)bytes,
	       (unsigned long long)BUSY_REQS * BUSY_LEN,
	       (unsigned long long)bells);
	/* the first post's kick and ours: both were system calls */
	assert_int_equal(bells, 2);
	if (bell_word != 0 || bytes == BUSY_REQS * BUSY_LEN)
		printf("busy kick: the engine was idle around the kick\n");
	/* a second listing of the queue would show up as extra work */
	itest_sleep_ns(50 * ITEST_NS_PER_MS);
	{
		struct clanq_rdma_comp extra;

		assert_int_equal(clanq_rdma_poll(&ep, &extra), -EAGAIN);
	}
	assert_int_equal(itest_ctr(&ep.counters->rdma_reqs), BUSY_REQS);
	assert_int_equal(pat_diff(dst.mem, 0xb05e, 0, BUSY_LEN, 0), BUSY_LEN);

	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&src), 0);
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

/*
 * No system call on the fast path.
 */

#define POLLS		100000
#define FAST_REQS	32

static void polling_the_completion_queue_never_enters_the_driver(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct pair p;
	__u64 q, e0, e1, e2, e3;
	unsigned int i, bad = 0, got = 0;
	__u64 end;

	(void)state;
	pair_open(&p, &attr);
	q = itest_query_cost(&p.a);

	/* empty */
	e0 = itest_entries(&p.a);
	for (i = 0; i < POLLS; i++)
		bad += clanq_rdma_poll(&p.ep, &c) != -EAGAIN;
	e1 = itest_entries(&p.a);
	assert_int_equal(bad, 0);
	assert_int_equal(e1 - e0, q);

	/* completions waiting: taking them is not a system call either */
	for (i = 0; i < FAST_REQS; i++) {
		req = stream_req(&p, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
	}
	assert_true(itest_wait_ctr(&p.ep.counters->rdma_reqs, FAST_REQS));
	assert_true(wait_doorbell_set(&p.ep));	/* the engine is done */
	e2 = itest_entries(&p.a);
	end = clanq_now_ns() + COMP_TIMEOUT;
	for (i = 0; i < POLLS || got < FAST_REQS; i++) {
		if (!clanq_rdma_poll(&p.ep, &c)) {
			bad += c.cookie != (0xd00b000000000000ull | got) ||
			       c.status != 0 || c.len != STREAM_LEN;
			got++;
		}
		if (i % 1024 == 0)
			assert_true(clanq_now_ns() < end);
	}
	e3 = itest_entries(&p.a);
	assert_int_equal(bad, 0);
	assert_int_equal(got, FAST_REQS);
	assert_int_equal(e3 - e2, q);
	stream_check(&p, FAST_REQS);
	pair_close(&p);
}

/*
 * Polling and posting under seccomp strict mode: the child first hands
 * the engine several MiB of work (a system call to wake it is allowed
 * then), enters strict mode, and posts small requests while the engine is
 * still busy with its queue, then polls every completion. Each post is
 * made only while the doorbell word says the engine is looking at the
 * queue, so the only way it can enter the driver is a broken doorbell
 * (or a broken poll).
 */

#define STRICT_BIG	(4 * MiB)
#define STRICT_BIGS	8
#define STRICT_SMALL	64
#define STRICT_SLEN	100
#define STRICT_SRC	(STRICT_BIG + 64 * KiB)
#define STRICT_DST	(STRICT_BIG + 64 * KiB)
#define STRICT_SEED	0x57c7ull

struct strict_args {
	struct clanq_addr region;
	__u64 key;
	int fd;
};

struct strict_report {
	__u32 posted;		/* small requests posted in strict mode */
	__u32 completions;
	__u32 bad;
	__u32 engine_idle;	/* doorbell found set before a post */
};

static struct clanq_rdma_req strict_req(__u32 src, __u32 ap, unsigned int i)
{
	if (i < STRICT_BIGS)
		return itest_rdma_req(src, ap, 0, 0, STRICT_BIG, i, REQ_DONE);
	i -= STRICT_BIGS;
	return itest_rdma_req(src, ap, STRICT_BIG + 7 + i * 128ull,
		     STRICT_BIG + 3 + i * 128ull, STRICT_SLEN, STRICT_BIGS + i,
		     REQ_DONE);
}

static void strict_child(void *arg)
{
	struct strict_args *a = arg;
	struct clanq_ep_attr attr = { .rq_slots = 128, .cq_slots = 128 };
	struct strict_report rep;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct clanq_region src;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_ap ap;
	unsigned int i, want;

	memset(&rep, 0, sizeof(rep));
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &src, STRICT_SRC), 0);
	pat_fill(src.mem, STRICT_SEED, 0, STRICT_SRC, 0);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, a->region, a->key, 0,
					STRICT_DST, CLANQ_RIGHT_WRITE), 0);
	for (i = 0; i < STRICT_BIGS; i++) {
		req = strict_req(src.addr.id, ap.id, i);
		CHILD_CHECK_INT(clanq_rdma_post(&ep, &req), 0);
	}
	alarm(30);		/* a lost completion ends in SIGALRM */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0)
		CHILD_FAIL("prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT): %s",
			   strerror(errno));

	for (i = 0; i < STRICT_SMALL; i++) {
		if (__atomic_load_n(ep.need_wakeup, __ATOMIC_ACQUIRE)) {
			rep.engine_idle = 1;
			break;
		}
		req = strict_req(src.addr.id, ap.id, STRICT_BIGS + i);
		if (clanq_rdma_post(&ep, &req) != 0)
			rep.bad++;
		rep.posted++;
	}
	want = STRICT_BIGS + rep.posted;
	while (rep.completions < want) {
		if (clanq_rdma_poll(&ep, &c)) {
			clanq_cpu_relax();
			continue;
		}
		req = strict_req(src.addr.id, ap.id, rep.completions);
		if (c.cookie != req.cookie || c.status || c.len != req.len)
			rep.bad++;
		rep.completions++;
	}
	/* nothing more */
	for (i = 0; i < POLLS; i++)
		rep.bad += clanq_rdma_poll(&ep, &c) != -EAGAIN;
	if (write(a->fd, &rep, sizeof(rep)) != sizeof(rep))
		syscall(SYS_exit, 2);
	syscall(SYS_exit, 0);
}

static void polling_and_posting_work_in_seccomp_strict_mode(void **state)
{
	struct strict_report rep;
	struct strict_args a;
	struct clanq_region dst;
	struct clanq_dev dev;
	int fds[2], status;
	bool reported;
	unsigned int i;
	size_t d;
	pid_t pid;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	assert_int_equal(clanq_region_alloc(&dev, &dst, STRICT_DST), 0);
	bg_fill(dst.mem, 0, STRICT_DST);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &a.key), 0);
	a.region = dst.addr;
	assert_int_equal(pipe(fds), 0);
	a.fd = fds[1];
	pid = itest_fork(strict_child, &a);
	assert_true(pid > 0);
	close(fds[1]);
	reported = itest_read_full(fds[0], &rep, sizeof(rep));
	close(fds[0]);
	status = itest_wait(pid, RUN_TIMEOUT);
	if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		fprintf(stderr,
			"strict child: SIGKILL: a forbidden system call?\n");
	assert_true(itest_status_ok(status, "strict child"));
	assert_true(reported);
	printf("strict: %u of %u posts made in strict mode%s, %u completions\n",
	       rep.posted, STRICT_SMALL,
	       rep.engine_idle ? " (then the engine went idle)" : "",
	       rep.completions);
	assert_int_equal(rep.bad, 0);
	/* at least one post happened while the engine was busy */
	assert_true(rep.posted >= 1);
	assert_int_equal(rep.completions, STRICT_BIGS + rep.posted);

	/* what was posted arrived, and nothing else */
	d = pat_diff(dst.mem, STRICT_SEED, 0, STRICT_BIG, 0);
	if (d < STRICT_BIG)
		fail_msg("big write wrong at %zu", d);
	for (i = 0; i < STRICT_SMALL; i++) {
		const __u8 *m = (const __u8 *)dst.mem + STRICT_BIG + i * 128ull;

		d = pat_diff(m, BG_SEED, STRICT_BIG + i * 128ull, 3, TOP);
		assert_int_equal(d, 3);
		if (i < rep.posted)
			d = pat_diff(m + 3, STRICT_SEED,
				     STRICT_BIG + 7 + i * 128ull, STRICT_SLEN, 0);
		else
			d = pat_diff(m + 3, BG_SEED, STRICT_BIG + 3 + i * 128ull,
				     STRICT_SLEN, TOP);
		if (d < STRICT_SLEN)
			fail_msg("small write %u wrong at byte %zu", i, d);
		d = pat_diff(m + 3 + STRICT_SLEN, BG_SEED,
			     STRICT_BIG + 3 + STRICT_SLEN + i * 128ull,
			     128 - 3 - STRICT_SLEN, TOP);
		assert_int_equal(d, 128 - 3 - STRICT_SLEN);
	}
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

/*
 * A full completion queue.
 */

#define CQFULL_REQS	200
#define CQFULL_FIRST	20

static void a_full_completion_queue_stalls_only_its_endpoint_and_loses_nothing(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 4 };
	struct clanq_ep_attr other_attr = { .rq_slots = 16, .cq_slots = 16 };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req, oreq;
	struct clanq_ep other;
	struct pair p;
	unsigned int posted = 0, got = 0;
	__u64 q, e0, e1;
	__u64 end;
	int r;

	(void)state;
	pair_open(&p, &attr);
	assert_int_equal(clanq_ep_create_attr(&p.a, &other, &other_attr), 0);
	q = itest_query_cost(&p.a);

	for (posted = 0; posted < CQFULL_FIRST; posted++) {
		req = stream_req(&p, posted, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
	}
	/* the engine takes what the CQ has room for (3), then stops */
	end = clanq_now_ns() + COMP_TIMEOUT;
	while (itest_ctr(&p.ep.counters->rdma_reqs) < attr.cq_slots - 1) {
		assert_true(clanq_now_ns() < end);
		sched_yield();
	}
	itest_sleep_ns(100 * ITEST_NS_PER_MS);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), attr.cq_slots - 1);
	/* and stops looking at the queue: the next poll must ring */
	assert_true(wait_doorbell_set(&p.ep));
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), attr.cq_slots - 1);

	/* another endpoint of the same context is served meanwhile */
	oreq = stream_req(&p, CQFULL_REQS, REQ_DONE);
	oreq.dst_off = PAIR_DST - STREAM_LEN;
	assert_int_equal(clanq_rdma_post(&other, &oreq), 0);
	expect_comp(&other, oreq.cookie, 0, STREAM_LEN);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), attr.cq_slots - 1);

	/* polling frees room and rings the doorbell: the rest flows */
	e0 = itest_entries(&p.a);
	end = clanq_now_ns() + RUN_TIMEOUT;
	while (got < CQFULL_REQS) {
		assert_true(clanq_now_ns() < end);
		while (posted < CQFULL_REQS) {
			req = stream_req(&p, posted, REQ_DONE);
			r = clanq_rdma_post(&p.ep, &req);
			if (r == -EAGAIN)
				break;
			assert_int_equal(r, 0);
			posted++;
		}
		memset(&c, 0, sizeof(c));
		if (!itest_wait_comp(&p.ep, &c, COMP_TIMEOUT))
			fail_msg("%u of %u completions; the engine took %llu",
				 got, CQFULL_REQS,
				 (unsigned long long)itest_ctr(&p.ep.counters->rdma_reqs));
		if (c.cookie != (0xd00b000000000000ull | got) || c.status ||
		    c.len != STREAM_LEN)
			fail_msg("completion %u: cookie %#llx status %d len %llu",
				 got, (unsigned long long)c.cookie, c.status,
				 (unsigned long long)c.len);
		got++;
	}
	e1 = itest_entries(&p.a);
	expect_no_comp(&p.ep);
	printf("cq full: %u completions through a 4-slot CQ, %llu system calls, "
	       "%llu kicks\n", got, (unsigned long long)(e1 - e0 - q),
	       (unsigned long long)itest_ctr(&p.ep.counters->rdma_kicks));
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), CQFULL_REQS);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_errors), 0);
	/* the other endpoint's write landed at the end, all others in place */
	assert_int_equal(pat_diff((__u8 *)p.dst.mem + PAIR_DST - STREAM_LEN,
				  PAIR_SEED, oreq.src_off, STREAM_LEN, 0),
			 STREAM_LEN);
	bg_fill((__u8 *)p.dst.mem + PAIR_DST - STREAM_LEN,
		PAIR_DST - STREAM_LEN, STREAM_LEN);
	stream_check(&p, CQFULL_REQS);
	assert_int_equal(clanq_ep_destroy(&other), 0);
	pair_close(&p);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(rdma_writes_within_a_node_land_exactly_where_asked),
		T(rdma_writes_across_nodes_land_exactly_where_asked),
		T(pio_writes_within_a_node_land_exactly_where_asked),
		T(pio_writes_across_nodes_land_exactly_where_asked),
		T(a_read_only_import_cannot_be_written_by_pio),
		T(eight_endpoints_in_four_processes_get_every_completion_once_in_order),
		T(each_bad_request_completes_with_its_status_and_stalls_nothing),
		T(a_stream_of_posts_rings_few_doorbells),
		T(an_idle_engine_is_woken_by_exactly_one_doorbell),
		T(a_doorbell_rung_while_the_engine_is_busy_wakes_nothing_twice),
		T(rdma_completions_raise_evq_events),
		T(an_overlapping_write_within_one_region_is_a_memmove),
		T(polling_the_completion_queue_never_enters_the_driver),
		T(polling_and_posting_work_in_seccomp_strict_mode),
		T(a_full_completion_queue_stalls_only_its_endpoint_and_loses_nothing),
	};

	return cmocka_run_group_tests_name("rdma", tests, NULL, NULL);
}
