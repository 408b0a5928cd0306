// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Every allocation failure is survivable: syzkaller's fail-nth loop over
 * every driver entry point.
 *
 * For each entry point (an ioctl of the context fd or of the evq fd, an
 * mmap of each kind of mapping, the first touch of a PIO mapping, i.e.
 * the fault handler, and open() of /dev/clanq0), for n = 1, 2, 3, ...:
 * write n to /proc/thread-self/fail-nth, make the call, read fail-nth
 * back and write 0. A non-zero value means the call made fewer than n
 * fault-injectable allocations (failslab and fail_page_alloc, both set
 * up below so that only fail-nth triggers them, GFP_KERNEL included):
 * the loop ends, and that last call must have succeeded. Otherwise the
 * n-th allocation failed, and the call must have
 *	- returned its uninjected result (the allocation was optional, or
 *	  a retry hid it: a page fault that fails with VM_FAULT_OOM is
 *	  retried by the architecture's fault handler), or
 *	- failed with one of the errnos listed with the call (ENOMEM;
 *	  ENOSPC where the driver reports a failed xa_alloc as a full
 *	  table; EFAULT where pin_user_pages reports a page it could not
 *	  fault in, and where vm_insert_pages(), which maps an allocated
 *	  region, reports a page table it could not allocate),
 * and, whatever it returned, left nothing half-created: the same call
 * made again at once without injection returns its usual result, and
 * after each
 * iteration's clean-up (made without injection) this process has the
 * same open files, mappings and pinned pages, and both NICs count the
 * same contexts and endpoints, as before it. Every setup and clean-up
 * call (made without injection) must succeed, and so must the fixture's
 * final close of its contexts. Leaks of memory are found by the
 * harness's kmemleak step after the tests.
 *
 * Kernel log. An injected failure of a vmalloc() (shared segments,
 * kvcalloc fallbacks) makes warn_alloc() print "vmalloc error: ..."
 * with a stack dump, whose "Call Trace:" the harness would take for a
 * splat. While the loop runs, the console log level is lowered to 4
 * (errors and worse still reach the console: KASAN, BUG, Oops), and
 * this program reads every record of the kernel log itself from
 * /dev/kmsg: a stack dump that follows a warn_alloc() header is
 * expected; any other line the harness would call a splat (lockdep's
 * "WARNING: possible ..." included) is printed to stdout with the
 * records around it, so the harness sees it too, and fails the test.
 * Settings are restored when the program ends.
 *
 * Prints "failnth: P failure points over C calls" at the end.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

/* a call that still has allocations left after this many: a bug here */
#define MAX_NTH		4000

static size_t page;

/*
 * Fault injection and the kernel log.
 */

#define DBG "/sys/kernel/debug/"

struct knob {
	const char *path;
	const char *val;
	char saved[64];
	bool set;
};

static struct knob knobs[] = {
	{ .path = DBG "failslab/ignore-gfp-wait", .val = "N" },
	{ .path = DBG "failslab/probability", .val = "0" },
	{ .path = DBG "failslab/verbose", .val = "0" },
	{ .path = DBG "failslab/task-filter", .val = "N" },
	{ .path = DBG "fail_page_alloc/ignore-gfp-wait", .val = "N" },
	{ .path = DBG "fail_page_alloc/ignore-gfp-highmem", .val = "N" },
	{ .path = DBG "fail_page_alloc/min-order", .val = "0" },
	{ .path = DBG "fail_page_alloc/probability", .val = "0" },
	{ .path = DBG "fail_page_alloc/verbose", .val = "0" },
	{ .path = DBG "fail_page_alloc/task-filter", .val = "N" },
	/* console_loglevel only: the other three fields stay */
	{ .path = "/proc/sys/kernel/printk", .val = "4" },
};

static bool read_str(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n = 0;

	if (fd < 0)
		return false;
	while (got < len - 1) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	return n >= 0;
}

static bool write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val);
}

static void knobs_restore(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(knobs); i++) {
		if (!knobs[i].set)
			continue;
		/* printk: the first field is the console level */
		if (!write_str(knobs[i].path, knobs[i].saved))
			fprintf(stderr, "failnth: cannot restore %s\n", knobs[i].path);
		knobs[i].set = false;
	}
}

static bool knobs_setup(void)
{
	unsigned int i;
	char *nl;

	for (i = 0; i < ARRAY_SIZE(knobs); i++) {
		if (!read_str(knobs[i].path, knobs[i].saved, sizeof(knobs[i].saved))) {
			fprintf(stderr, "failnth: %s: %s\n", knobs[i].path,
				strerror(errno));
			knobs_restore();
			return false;
		}
		nl = strpbrk(knobs[i].saved, "\n\t ");
		if (nl)		/* printk: "7\t4\t1\t7": keep the first field */
			*nl = 0;
		if (!write_str(knobs[i].path, knobs[i].val)) {
			fprintf(stderr, "failnth: cannot write %s to %s: %s\n",
				knobs[i].val, knobs[i].path, strerror(errno));
			knobs_restore();
			return false;
		}
		knobs[i].set = true;
	}
	return true;
}

static int kmsg_fd = -1;
static bool kmsg_expect_trace;	/* a warn_alloc() header was the last header */
static unsigned int kmsg_splats, kmsg_alloc_reports, kmsg_lost;

/* the harness's splat patterns (tests/results.awk) */
static const char *const splat_pat[] = {
	"BUG:", "WARNING:", "Oops", "Call Trace", "Kernel panic", "UBSAN:",
	"KASAN:", "general protection fault", "unreferenced object",
	"suspected memory leak", "INFO: possible", "INFO: inconsistent",
	"INFO: suspicious", "DEBUG_LOCKS_WARN_ON", "rcu_sched self-detected stall",
	"rcu: INFO", "soft lockup", "blocked for more than",
};

#define KMSG_CTX	16	/* records kept to show before a splat */
#define KMSG_AFTER	60	/* records shown after one */

static char kmsg_ring[KMSG_CTX][256];
static unsigned int kmsg_ring_n, kmsg_show_after;

/* The console is quieted while we run: without kmsg nobody would look. */
static bool kmsg_open(void)
{
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kmsg_fd < 0) {
		fprintf(stderr, "failnth: /dev/kmsg: %s: cannot check the kernel log\n",
			strerror(errno));
		return false;
	}
	lseek(kmsg_fd, 0, SEEK_END);
	return true;
}

static void kmsg_record(const char *msg)
{
	unsigned int i;
	bool splat = false;

	if (strstr(msg, "vmalloc error:") || strstr(msg, "page allocation failure:")) {
		kmsg_expect_trace = true;
		kmsg_alloc_reports++;
	} else {
		for (i = 0; i < ARRAY_SIZE(splat_pat); i++)
			if (strstr(msg, splat_pat[i]))
				break;
		if (i < ARRAY_SIZE(splat_pat)) {
			if (!strcmp(splat_pat[i], "Call Trace") && kmsg_expect_trace)
				kmsg_expect_trace = false;	/* warn_alloc's dump */
			else
				splat = true;
		}
	}
	if (splat) {
		kmsg_expect_trace = false;
		if (!kmsg_splats++) {
			/* what led to it, for the console */
			for (i = kmsg_ring_n > KMSG_CTX ? kmsg_ring_n - KMSG_CTX : 0;
			     i < kmsg_ring_n; i++)
				printf("failnth: kernel:  %s\n", kmsg_ring[i % KMSG_CTX]);
		}
		printf("failnth: kernel: %s\n", msg);
		kmsg_show_after = KMSG_AFTER;
	} else if (kmsg_show_after) {
		kmsg_show_after--;
		printf("failnth: kernel:  %s\n", msg);
	}
	snprintf(kmsg_ring[kmsg_ring_n++ % KMSG_CTX], sizeof(kmsg_ring[0]), "%s", msg);
}

/* Read every new record; true if none was an unexpected splat. */
static bool kmsg_scan(void)
{
	unsigned int before = kmsg_splats;
	char buf[2048], *msg, *nl;
	ssize_t n;

	if (kmsg_fd < 0)
		return false;	/* unchecked is not clean */
	for (;;) {
		n = read(kmsg_fd, buf, sizeof(buf) - 1);
		if (n < 0 && errno == EPIPE) {	/* overwritten before we read it */
			kmsg_lost++;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		buf[n] = 0;
		/* "prio,seq,usec,flags;text\n" then " KEY=value" lines */
		msg = strchr(buf, ';');
		if (!msg)
			continue;
		msg++;
		nl = strchr(msg, '\n');
		if (nl)
			*nl = 0;
		kmsg_record(msg);
	}
	fflush(stdout);
	return kmsg_splats == before;
}

/*
 * fail-nth.
 */

static int nth_fd = -1;

static void nth_set(unsigned int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", n);

	assert_int_equal(pwrite(nth_fd, buf, (size_t)len, 0), len);
}

/* What is left of the count: 0 if the failure was injected. */
static unsigned int nth_left(void)
{
	char buf[16];
	ssize_t n = pread(nth_fd, buf, sizeof(buf) - 1, 0);

	assert_true(n > 0);
	buf[n] = 0;
	return (unsigned int)strtoul(buf, NULL, 10);
}

/*
 * What must be the same before and after each iteration.
 */

struct snap {
	long fds, maps, pinned_kb;
	long contexts[2], endpoints[2];
};

static long count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	long n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static long file_field(const char *path, const char *key, bool lines)
{
	char buf[16384], *p;
	long n = 0;

	assert_true(read_str(path, buf, sizeof(buf)));
	if (lines) {
		for (p = buf; (p = strchr(p, '\n')); p++)
			n++;
		return n;
	}
	for (p = buf; p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (!strncmp(p, key, strlen(key)))
			return strtol(p + strlen(key), NULL, 10);
	}
	fail_msg("%s: no \"%s\"", path, key);
	return -1;
}

static void snap_take(struct snap *s)
{
	char path[64];
	int i;

	s->fds = count_dir("/proc/self/fd");
	s->maps = file_field("/proc/self/maps", NULL, true);
	s->pinned_kb = file_field("/proc/self/status", "VmPin:", false);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), DBG "clanq/clanq%d/stats", i);
		s->contexts[i] = file_field(path, "contexts ", false);
		s->endpoints[i] = file_field(path, "endpoints ", false);
	}
}

static bool snap_same(const struct snap *a, const struct snap *b, const char *what,
		      unsigned int n)
{
	if (!memcmp(a, b, sizeof(*a)))
		return true;
	printf("failnth: %s n=%u left something behind: fds %ld -> %ld, mappings %ld -> %ld, VmPin %ld -> %ld kB, "
	       "contexts %ld,%ld -> %ld,%ld, endpoints %ld,%ld -> %ld,%ld\n",
	       what, n, a->fds, b->fds, a->maps, b->maps, a->pinned_kb, b->pinned_kb,
	       a->contexts[0], a->contexts[1], b->contexts[0], b->contexts[1],
	       a->endpoints[0], a->endpoints[1], b->endpoints[0], b->endpoints[1]);
	return false;
}

/*
 * The fixture: three contexts (two on node 0, one on node 1), an
 * endpoint in each, an evq, an exported region of a mapped by a, and
 * b's aperture onto it. All raw: the library would hide the offsets.
 */

struct fx {
	int a, b, a1;
	struct clanq_ioc_ep_create ep_a, ep_b, ep_1;
	struct clanq_ioc_evq_create evq;
	struct clanq_ioc_region_create reg;
	uint64_t key;
	volatile uint8_t *reg_mem;
	struct clanq_ioc_ap_import ap;
	uint8_t *pinned;	/* touched memory to register */
	/* what one iteration made */
	int fd;
	void *map;
	size_t map_size;
	uint32_t id, id2;
	int reg_index;
	uint32_t touch;
};

static struct fx fx;

static int xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static void ep_create(int fd, struct clanq_ioc_ep_create *c)
{
	memset(c, 0, sizeof(*c));
	c->oob_slots = 8;
	c->rq_slots = 8;
	c->cq_slots = 8;
	assert_int_equal(xioctl(fd, CLANQ_IOC_EP_CREATE, c), 0);
}

static void ep_destroy(int fd, uint32_t id)
{
	struct clanq_ioc_ep_destroy d = { .id = id };

	assert_int_equal(xioctl(fd, CLANQ_IOC_EP_DESTROY, &d), 0);
}

static void region_alloc(int fd, struct clanq_ioc_region_create *c)
{
	memset(c, 0, sizeof(*c));
	c->size = page;
	assert_int_equal(xioctl(fd, CLANQ_IOC_REGION_CREATE, c), 0);
}

static void region_free(int fd, uint32_t id)
{
	struct clanq_ioc_region_free f = { .id = id };

	assert_int_equal(xioctl(fd, CLANQ_IOC_REGION_FREE, &f), 0);
}

static int ap_import(int fd, struct clanq_ioc_ap_import *im, uint32_t node)
{
	memset(im, 0, sizeof(*im));
	im->region.node = node;
	im->region.id = fx.reg.id;
	im->key = fx.key;
	im->len = page;
	im->rights = CLANQ_RIGHTS_ALL;
	return xioctl(fd, CLANQ_IOC_AP_IMPORT, im);
}

static void ap_close(int fd, uint32_t id)
{
	struct clanq_ioc_ap_close c = { .id = id };

	assert_int_equal(xioctl(fd, CLANQ_IOC_AP_CLOSE, &c), 0);
}

/*
 * Where the mappings made under injection go: alone in a 512 GiB slot
 * of the address space (one top-level page-table entry), so that
 * populating them, at mmap or at the first fault, allocates every lower
 * level of page table afresh; munmap frees those tables again.
 */
#define LONELY		((void *)0x600000000000ul)

static void *lonely_mmap(size_t size, int prot, int flags, int fd, uint64_t off)
{
	void *p = mmap(LONELY, size, prot, flags | MAP_FIXED_NOREPLACE, fd,
		       (off_t)off);

	if (p != MAP_FAILED && p != LONELY) {	/* an old kernel: a hint */
		munmap(p, size);
		fail_msg("mmap did not place the mapping at %p", LONELY);
	}
	return p;
}

static int do_mmap(int fd, size_t size, uint64_t off)
{
	fx.map = lonely_mmap(size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	fx.map_size = size;
	if (fx.map == MAP_FAILED) {
		fx.map = NULL;
		return -errno;
	}
	return 0;
}

static void undo_mmap(int r)
{
	if (!r)
		assert_int_equal(munmap(fx.map, fx.map_size), 0);
	fx.map = NULL;
}

static int fx_setup(void **state)
{
	struct clanq_ioc_region_export e;
	uint32_t node;

	(void)state;
	fx.a = open(CLANQ_DEV_PREFIX "0", O_RDWR | O_CLOEXEC);
	fx.b = open(CLANQ_DEV_PREFIX "0", O_RDWR | O_CLOEXEC);
	fx.a1 = open(CLANQ_DEV_PREFIX "1", O_RDWR | O_CLOEXEC);
	assert_true(fx.a >= 0 && fx.b >= 0 && fx.a1 >= 0);
	ep_create(fx.a, &fx.ep_a);
	ep_create(fx.b, &fx.ep_b);
	ep_create(fx.a1, &fx.ep_1);
	memset(&fx.evq, 0, sizeof(fx.evq));
	fx.evq.max_regs = 4;
	assert_int_equal(xioctl(fx.a, CLANQ_IOC_EVQ_CREATE, &fx.evq), 0);
	region_alloc(fx.a, &fx.reg);
	fx.reg_mem = mmap(NULL, fx.reg.mmap_size, PROT_READ | PROT_WRITE,
			  MAP_SHARED, fx.a, (off_t)fx.reg.mmap_offset);
	assert_true(fx.reg_mem != MAP_FAILED);
	memset(&e, 0, sizeof(e));
	e.id = fx.reg.id;
	e.rights = CLANQ_RIGHTS_ALL;
	assert_int_equal(xioctl(fx.a, CLANQ_IOC_REGION_EXPORT, &e), 0);
	fx.key = e.key;
	node = fx.ep_a.addr.node;
	assert_int_equal(ap_import(fx.b, &fx.ap, node), 0);
	assert_true(fx.ap.mmap_size > 0);
	fx.pinned = mmap(NULL, page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(fx.pinned != MAP_FAILED);
	memset(fx.pinned, 0x5a, page);
	return 0;
}

static int fx_teardown(void **state)
{
	(void)state;
	munmap(fx.pinned, page);
	munmap((void *)fx.reg_mem, fx.reg.mmap_size);
	/* the contexts can still be closed, with everything still in them */
	assert_int_equal(close(fx.evq.fd), 0);
	assert_int_equal(close(fx.a1), 0);
	assert_int_equal(close(fx.b), 0);
	assert_int_equal(close(fx.a), 0);
	return 0;
}

/*
 * The calls. before() and after() run without injection; after() undoes
 * whatever before() and a successful call made (r is the call's result).
 */

static int call_open(void)
{
	fx.fd = open(CLANQ_DEV_PREFIX "0", O_RDWR | O_CLOEXEC);
	return fx.fd < 0 ? -errno : 0;
}

static void after_open(int r)
{
	struct clanq_ioc_query q;

	if (r)
		return;
	/* a context made under injection works */
	memset(&q, 0, sizeof(q));
	assert_int_equal(xioctl(fx.fd, CLANQ_IOC_QUERY, &q), 0);
	assert_int_equal(q.abi_version, CLANQ_ABI_VERSION);
	assert_int_equal(close(fx.fd), 0);
}

static int call_query(void)
{
	struct clanq_ioc_query q;

	memset(&q, 0, sizeof(q));
	return xioctl(fx.a, CLANQ_IOC_QUERY, &q);
}

static struct clanq_ioc_ep_create new_ep;

static int call_ep_create(void)
{
	memset(&new_ep, 0, sizeof(new_ep));
	new_ep.oob_slots = 8;
	new_ep.rq_slots = 8;
	new_ep.cq_slots = 8;
	return xioctl(fx.a, CLANQ_IOC_EP_CREATE, &new_ep);
}

static void after_ep_create(int r)
{
	if (r)
		return;
	/* an endpoint made under injection can be mapped and destroyed */
	assert_int_equal(do_mmap(fx.a, new_ep.mmap_size, new_ep.mmap_offset), 0);
	undo_mmap(0);
	ep_destroy(fx.a, new_ep.addr.id);
}

static void before_ep_destroy(void)
{
	ep_create(fx.a, &new_ep);
}

static int call_ep_destroy(void)
{
	struct clanq_ioc_ep_destroy d = { .id = new_ep.addr.id };

	return xioctl(fx.a, CLANQ_IOC_EP_DESTROY, &d);
}

static void after_ep_destroy(int r)
{
	if (r)
		ep_destroy(fx.a, new_ep.addr.id);
}

static int send_to(const struct clanq_ioc_ep_create *dst)
{
	struct clanq_ioc_oob_send s;

	memset(&s, 0, sizeof(s));
	s.ep = fx.ep_a.addr.id;
	s.dst = dst->addr;
	s.type = ITEST_TYPE;
	s.len = 8;
	return xioctl(fx.a, CLANQ_IOC_OOB_SEND, &s);
}

static int call_oob_send_node(void)
{
	return send_to(&fx.ep_b);
}

static int call_oob_send_other(void)
{
	return send_to(&fx.ep_1);
}

static struct clanq_ioc_evq_create new_evq;

static int call_evq_create(void)
{
	memset(&new_evq, 0, sizeof(new_evq));
	new_evq.max_regs = 4;
	return xioctl(fx.a, CLANQ_IOC_EVQ_CREATE, &new_evq);
}

static void after_evq_create(int r)
{
	if (r)
		return;
	assert_int_equal(do_mmap(new_evq.fd, new_evq.mmap_size, 0), 0);
	undo_mmap(0);
	assert_int_equal(close(new_evq.fd), 0);
}

static struct clanq_ioc_region_create new_reg;

static int call_region_alloc(void)
{
	memset(&new_reg, 0, sizeof(new_reg));
	new_reg.size = 2 * page;
	return xioctl(fx.a, CLANQ_IOC_REGION_CREATE, &new_reg);
}

static void after_region_create(int r)
{
	if (!r)
		region_free(fx.a, new_reg.id);
}

static int call_region_register(void)
{
	memset(&new_reg, 0, sizeof(new_reg));
	new_reg.addr = (uintptr_t)fx.pinned;
	new_reg.size = page;
	new_reg.flags = CLANQ_REGION_REGISTER;
	return xioctl(fx.a, CLANQ_IOC_REGION_CREATE, &new_reg);
}

/* memory never touched: pinning it faults it in, under injection too */
static void before_region_register_fresh(void)
{
	fx.map = lonely_mmap(page, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(fx.map != MAP_FAILED);
}

static int call_region_register_fresh(void)
{
	memset(&new_reg, 0, sizeof(new_reg));
	new_reg.addr = (uintptr_t)fx.map;
	new_reg.size = page;
	new_reg.flags = CLANQ_REGION_REGISTER;
	return xioctl(fx.a, CLANQ_IOC_REGION_CREATE, &new_reg);
}

static void after_region_register_fresh(int r)
{
	after_region_create(r);
	assert_int_equal(munmap(fx.map, page), 0);
	fx.map = NULL;
}

static void before_region(void)
{
	region_alloc(fx.a, &new_reg);
}

static int call_region_free(void)
{
	struct clanq_ioc_region_free f = { .id = new_reg.id };

	return xioctl(fx.a, CLANQ_IOC_REGION_FREE, &f);
}

static void after_region_free(int r)
{
	if (r)
		region_free(fx.a, new_reg.id);
}

static int call_region_export(void)
{
	struct clanq_ioc_region_export e;

	memset(&e, 0, sizeof(e));
	e.id = new_reg.id;
	e.rights = CLANQ_RIGHT_WRITE;
	return xioctl(fx.a, CLANQ_IOC_REGION_EXPORT, &e);
}

static void after_region_export(int r)
{
	(void)r;
	region_free(fx.a, new_reg.id);
}

static struct clanq_ioc_ap_import new_ap;

static int call_ap_import_node(void)
{
	return ap_import(fx.b, &new_ap, fx.ep_a.addr.node);
}

static void after_ap_import_node(int r)
{
	if (r)
		return;
	assert_true(new_ap.mmap_size > 0);
	assert_int_equal(do_mmap(fx.b, new_ap.mmap_size, new_ap.mmap_offset), 0);
	undo_mmap(0);
	ap_close(fx.b, new_ap.id);
}

static int call_ap_import_other(void)
{
	return ap_import(fx.a1, &new_ap, fx.ep_a.addr.node);
}

static void after_ap_import_other(int r)
{
	if (!r)
		ap_close(fx.a1, new_ap.id);
}

static void before_ap_close(void)
{
	assert_int_equal(ap_import(fx.b, &new_ap, fx.ep_a.addr.node), 0);
}

static int call_ap_close(void)
{
	struct clanq_ioc_ap_close c = { .id = new_ap.id };

	return xioctl(fx.b, CLANQ_IOC_AP_CLOSE, &c);
}

static void after_ap_close(int r)
{
	if (r)
		ap_close(fx.b, new_ap.id);
}

static int call_rdma_kick(void)
{
	struct clanq_ioc_rdma_kick k;

	memset(&k, 0, sizeof(k));
	k.ep = fx.ep_a.addr.id;
	return xioctl(fx.a, CLANQ_IOC_RDMA_KICK, &k);
}

static int evq_register(void)
{
	struct clanq_ioc_evq_reg r;
	int err;

	memset(&r, 0, sizeof(r));
	r.ep = fx.ep_a.addr.id;
	r.events = CLANQ_EV_ALL;
	r.cookie = 7;
	err = xioctl(fx.evq.fd, CLANQ_IOC_EVQ_REGISTER, &r);
	fx.reg_index = (int)r.reg;
	return err;
}

static void evq_unregister(int index)
{
	struct clanq_ioc_evq_reg r;

	memset(&r, 0, sizeof(r));
	r.reg = (uint32_t)index;
	assert_int_equal(xioctl(fx.evq.fd, CLANQ_IOC_EVQ_UNREGISTER, &r), 0);
}

static void after_evq_register(int r)
{
	if (!r)
		evq_unregister(fx.reg_index);
}

static void before_evq_unregister(void)
{
	assert_int_equal(evq_register(), 0);
}

static int call_evq_unregister(void)
{
	struct clanq_ioc_evq_reg r;

	memset(&r, 0, sizeof(r));
	r.reg = (uint32_t)fx.reg_index;
	return xioctl(fx.evq.fd, CLANQ_IOC_EVQ_UNREGISTER, &r);
}

static void after_evq_unregister(int r)
{
	if (r)
		evq_unregister(fx.reg_index);
}

static int call_evq_wait(void)
{
	struct clanq_ioc_evq_wait w;

	/* nothing is registered: no event comes, the wait times out */
	memset(&w, 0, sizeof(w));
	w.timeout_ns = 1000;
	return xioctl(fx.evq.fd, CLANQ_IOC_EVQ_WAIT, &w);
}

static int call_mmap_ep(void)
{
	return do_mmap(fx.a, fx.ep_a.mmap_size, fx.ep_a.mmap_offset);
}

static int call_mmap_evq(void)
{
	return do_mmap(fx.evq.fd, fx.evq.mmap_size, 0);
}

static int call_mmap_region(void)
{
	return do_mmap(fx.a, fx.reg.mmap_size, fx.reg.mmap_offset);
}

static int call_mmap_ap(void)
{
	return do_mmap(fx.b, fx.ap.mmap_size, fx.ap.mmap_offset);
}

static void before_touch(void)
{
	assert_int_equal(call_mmap_ap(), 0);
	fx.touch++;
}

/* the fault handler: a PIO store to a fresh mapping of the aperture */
static int call_touch_ap(void)
{
	*(volatile uint32_t *)((char *)fx.map + fx.ap.map_delta) = 0xfa110000u + fx.touch;
	return 0;
}

static void after_touch(int r)
{
	uint32_t v;

	memcpy(&v, (const void *)fx.reg_mem, sizeof(v));
	assert_int_equal(v, 0xfa110000u + fx.touch);
	undo_mmap(r);
}

/*
 * The table.
 */

#define ERRS(...)	((const int[]){ __VA_ARGS__, 0 })

struct point {
	const char *name;
	int (*call)(void);
	void (*before)(void);
	void (*after)(int r);
	int ok;			/* the result of an uninjected call */
	const int *errs;	/* errnos accepted from an injected failure */
};

/* clanq_ctx_mmap_add() reports any xa_alloc failure as -ENOSPC */
#define E_MEM		ERRS(ENOMEM)
#define E_MEM_MAPKEY	ERRS(ENOMEM, ENOSPC)

static const struct point points[] = {
	{ "open /dev/clanq0", call_open, NULL, after_open, 0, E_MEM },
	{ "QUERY", call_query, NULL, NULL, 0, E_MEM },
	{ "EP_CREATE", call_ep_create, NULL, after_ep_create, 0, E_MEM_MAPKEY },
	{ "EP_DESTROY", call_ep_destroy, before_ep_destroy, after_ep_destroy, 0, E_MEM },
	{ "OOB_SEND, same node", call_oob_send_node, NULL, NULL, 0, E_MEM },
	{ "OOB_SEND, other node", call_oob_send_other, NULL, NULL, 0, E_MEM },
	{ "EVQ_CREATE", call_evq_create, NULL, after_evq_create, 0, E_MEM },
	{ "REGION_CREATE, allocated", call_region_alloc, NULL, after_region_create,
	  0, E_MEM_MAPKEY },
	{ "REGION_CREATE, registered", call_region_register, NULL, after_region_create,
	  0, ERRS(ENOMEM, EFAULT) },
	{ "REGION_CREATE, registered, untouched memory", call_region_register_fresh,
	  before_region_register_fresh, after_region_register_fresh, 0,
	  ERRS(ENOMEM, EFAULT) },
	{ "REGION_FREE", call_region_free, before_region, after_region_free, 0, E_MEM },
	{ "REGION_EXPORT", call_region_export, before_region, after_region_export,
	  0, E_MEM },
	{ "AP_IMPORT, same node", call_ap_import_node, NULL, after_ap_import_node,
	  0, E_MEM_MAPKEY },
	{ "AP_IMPORT, other node", call_ap_import_other, NULL, after_ap_import_other,
	  0, E_MEM_MAPKEY },
	{ "AP_CLOSE", call_ap_close, before_ap_close, after_ap_close, 0, E_MEM },
	{ "RDMA_KICK", call_rdma_kick, NULL, NULL, 0, E_MEM },
	{ "EVQ_REGISTER", evq_register, NULL, after_evq_register, 0, E_MEM },
	{ "EVQ_UNREGISTER", call_evq_unregister, before_evq_unregister,
	  after_evq_unregister, 0, E_MEM },
	{ "EVQ_WAIT", call_evq_wait, NULL, NULL, -ETIMEDOUT, E_MEM },
	{ "mmap endpoint segment", call_mmap_ep, NULL, undo_mmap, 0, E_MEM },
	{ "mmap evq segment", call_mmap_evq, NULL, undo_mmap, 0, E_MEM },
	/* vm_insert_pages() reports a failed PUD/PMD allocation as -EFAULT */
	{ "mmap allocated region", call_mmap_region, NULL, undo_mmap, 0,
	  ERRS(ENOMEM, EFAULT) },
	{ "mmap aperture", call_mmap_ap, NULL, undo_mmap, 0, E_MEM },
	{ "first touch of a PIO mapping", call_touch_ap, before_touch, after_touch,
	  0, E_MEM },
};

static unsigned int total_points, total_calls;

static bool accepted(const struct point *p, int r)
{
	const int *e;

	if (r == p->ok)
		return true;
	for (e = p->errs; *e; e++)
		if (r == -*e)
			return true;
	return false;
}

static void run_point(void **state)
{
	const struct point *p = *state;
	unsigned int n, left, here = 0, optional = 0, nomem = 0;
	struct snap s0, s1;
	int r;

	snap_take(&s0);		/* warm-up: stdio's buffers exist from here on */
	for (n = 1; n <= MAX_NTH; n++) {
		snap_take(&s0);
		if (p->before)
			p->before();
		nth_set(n);
		r = p->call();
		left = nth_left();
		nth_set(0);
		if (left) {
			/* fewer than n allocations: nothing was injected */
			if (r != p->ok)
				fail_msg("%s: %d without injection, expected %d", p->name,
					 r, p->ok);
		} else {
			here++;
			if (!accepted(p, r))
				fail_msg("%s: allocation %u failed: the call returned %d (%s)",
					 p->name, n, r, r < 0 ? strerror(-r) : "?");
			if (r == p->ok)
				optional++;
			else if (r == -ENOMEM)
				nomem++;
			else
				printf("failnth: %s: allocation %u failed: %s\n",
				       p->name, n, strerror(-r));
		}
		if (p->after)
			p->after(r);
		if (!left && r != p->ok) {
			/* the same call, uninjected, works after the failure */
			if (p->before)
				p->before();
			r = p->call();
			if (r != p->ok)
				fail_msg("%s: %d after allocation %u had failed, expected %d",
					 p->name, r, n, p->ok);
			if (p->after)
				p->after(r);
		}
		snap_take(&s1);
		if (!snap_same(&s0, &s1, p->name, n))
			fail_msg("%s: allocation %u failed and left state behind", p->name, n);
		if (!kmsg_scan())
			fail_msg("%s: the kernel log has a report after allocation %u failed",
				 p->name, n);
		if (left)
			break;
	}
	if (n > MAX_NTH)
		fail_msg("%s: still allocating after %u injected failures", p->name, MAX_NTH);
	total_points += here;
	total_calls++;
	printf("failnth: %-44s %3u failure points: %u ENOMEM, %u succeeded\n",
	       p->name, here, nomem, optional);
	fflush(stdout);
}

/*
 * What the counters above cannot see: a failure path that kept its
 * charge against the context's budget (max_ctx_bytes). Context a took
 * most of the failures; it holds an endpoint segment, an evq segment
 * and a one-page region, exported (so with its armed bitmap), so exactly the rest of its budget must still
 * be there to allocate, and not a page more.
 */
static void budget_is_intact(void **state)
{
	unsigned long max_ctx = itest_param("max_ctx_bytes");
	/* the region is exported: its armed bitmap (one page) is a's too */
	uint64_t held = fx.ep_a.mmap_size + fx.evq.mmap_size + fx.reg.mmap_size +
		     page;
	struct clanq_ioc_region_create c;

	(void)state;
	assert_true(held < max_ctx);
	memset(&c, 0, sizeof(c));
	c.size = max_ctx - held + page;
	assert_int_equal(xioctl(fx.a, CLANQ_IOC_REGION_CREATE, &c), -ENOMEM);
	memset(&c, 0, sizeof(c));
	c.size = max_ctx - held;
	assert_int_equal(xioctl(fx.a, CLANQ_IOC_REGION_CREATE, &c), 0);
	region_free(fx.a, c.id);
	printf("failnth: context budget intact (%llu of %lu bytes held)\n",
	       (unsigned long long)held, max_ctx);
}

static int group_setup(void **state)
{
	if (access("/proc/thread-self/fail-nth", W_OK) ||
	    access(DBG "failslab", F_OK) || access(DBG "fail_page_alloc", F_OK)) {
		printf("failnth: this kernel has no fail-nth, failslab or fail_page_alloc\n");
		return -1;
	}
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (nth_fd < 0 || !kmsg_open() || !knobs_setup())
		return -1;
	atexit(knobs_restore);
	return fx_setup(state);
}

static int group_teardown(void **state)
{
	bool log_ok;

	fx_teardown(state);
	log_ok = kmsg_scan();
	knobs_restore();
	printf("failnth: %u failure points over %u calls\n", total_points, total_calls);
	printf("failnth: kernel log: %u allocation-failure reports (expected), %u unexpected reports%s\n",
	       kmsg_alloc_reports, kmsg_splats,
	       kmsg_lost ? ", some records lost (buffer overrun)" : "");
	return log_ok && !kmsg_splats && !kmsg_lost ? 0 : -1;
}

int main(void)
{
	struct CMUnitTest tests[ARRAY_SIZE(points) + 1];
	unsigned int i;

	page = (size_t)sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < ARRAY_SIZE(points); i++) {
		memset(&tests[i], 0, sizeof(tests[i]));
		tests[i].name = points[i].name;
		tests[i].test_func = run_point;
		tests[i].initial_state = (void *)&points[i];
	}
	memset(&tests[i], 0, sizeof(tests[i]));
	tests[i].name = "the budget of the context that took the failures is intact";
	tests[i].test_func = budget_is_intact;
	return _cmocka_run_group_tests("failnth", tests, ARRAY_SIZE(tests),
				       group_setup, group_teardown);
}
