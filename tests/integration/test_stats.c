// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Counters where users look (driver/stats.c): the NIC's identity, limits
 * and counters in sysfs, /sys/class/misc/clanqN/; CLANQ_IOC_EP_STATS
 * per context and endpoint, each user seeing its own uid's; clanqstat
 * printing what the test itself caused; limits changed at run time,
 * refused with a message naming the parameter. Runs in the VM as root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>
#include <clanq/admin.h>

#include "itest.h"

#define SYSFS "/sys/class/misc"

static void read_sysfs(unsigned int nic, const char *file, char *buf, size_t len)
{
	char path[128];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), SYSFS "/clanq%u/%s", nic, file);
	f = fopen(path, "r");
	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

static unsigned long long sysfs_u64(unsigned int nic, const char *file)
{
	char buf[64], *end;
	unsigned long long v;

	read_sysfs(nic, file, buf, sizeof(buf));
	v = strtoull(buf, &end, 10);
	if (end == buf || *end)
		fail_msg("clanq%u/%s: '%s' is not a number", nic, file, buf);
	return v;
}

static void identity_is_the_devices(void **state)
{
	struct clanq_nic_info q0, q1;
	struct clanq_dev d0, d1;
	struct clanq_ep ep;
	unsigned long long ctxs, eps;
	char buf[256], want[32];

	(void)state;
	assert_int_equal(clanq_open_nic(&d0, 0), 0);
	assert_int_equal(clanq_open_nic(&d1, 1), 0);
	assert_int_equal(clanq_query(&d0, &q0), 0);
	assert_int_equal(clanq_query(&d1, &q1), 0);
	assert_int_equal(sysfs_u64(0, "node"), q0.node);
	assert_int_equal(sysfs_u64(1, "node"), q1.node);
	assert_int_equal(sysfs_u64(0, "abi_version"), CLANQ_ABI_VERSION);
	/* the verbs wire when its module is loaded (as the test VM does) */
	read_sysfs(0, "wire", buf, sizeof(buf));
	assert_string_equal(buf, access("/sys/module/clanq_verbs", F_OK) ?
			    "loop" : "loop verbs");
	/* the VM loads two NICs: each is the other's only peer */
	snprintf(want, sizeof(want), "%u", q1.node);
	read_sysfs(0, "peers", buf, sizeof(buf));
	assert_string_equal(buf, want);
	snprintf(want, sizeof(want), "%u", q0.node);
	read_sysfs(1, "peers", buf, sizeof(buf));
	assert_string_equal(buf, want);

	ctxs = sysfs_u64(0, "contexts");
	eps = sysfs_u64(0, "endpoints");
	assert_true(ctxs >= 1);
	assert_int_equal(clanq_ep_create(&d0, &ep, 0), 0);
	assert_int_equal(sysfs_u64(0, "endpoints"), eps + 1);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(sysfs_u64(0, "endpoints"), eps);
	assert_int_equal(clanq_close(&d1), 0);
	assert_int_equal(clanq_close(&d0), 0);
	assert_int_equal(sysfs_u64(0, "contexts"), ctxs - 1);

	/* read-only: not even root writes a counter */
	assert_int_equal(open(SYSFS "/clanq0/statistics/oob_sent", O_WRONLY), -1);
	assert_int_equal(open(SYSFS "/clanq0/limits/max_eps", O_WRONLY), -1);
}

/* /dev/kmsg from its end: what the kernel says from now on */
static int kmsg_from_now(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_true(lseek(fd, 0, SEEK_END) >= 0);
	return fd;
}

static bool kmsg_says(int fd, const char *what)
{
	char rec[1024];
	ssize_t n;

	for (;;) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)	/* overwritten: go on reading */
			continue;
		if (n <= 0)
			return false;
		rec[n] = 0;
		if (strstr(rec, what))
			return true;
	}
}

/*
 * A limit lowered at run time holds from the next call, shows in the
 * NIC's limits/, and a call it refuses says which parameter to raise.
 * (The notice is rate-limited per call site: an earlier test may have
 * used up the burst, so one retry after the 5 s window.)
 */
static void a_limit_changed_at_run_time_holds_and_is_named(void **state)
{
	unsigned long saved = itest_param("max_eps");
	struct clanq_ep eps[3];
	struct clanq_dev dev;
	bool said = false;
	int kmsg, i, try;

	(void)state;
	assert_int_equal(sysfs_u64(0, "limits/max_eps"), saved);
	assert_int_equal(sysfs_u64(1, "limits/max_region_bytes"),
			 itest_param("max_region_bytes"));
	itest_param_set("max_eps", 2);
	assert_int_equal(sysfs_u64(0, "limits/max_eps"), 2);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(clanq_ep_create(&dev, &eps[i], 0), 0);
	for (try = 0; try < 2 && !said; try++) {
		if (try)
			itest_sleep_ns(5500 * ITEST_NS_PER_MS);
		kmsg = kmsg_from_now();
		assert_int_equal(clanq_ep_create(&dev, &eps[2], 0), -ENOSPC);
		said = kmsg_says(kmsg, "max_eps");
		close(kmsg);
	}
	assert_true(said);
	itest_param_set("max_eps", saved);
	assert_int_equal(clanq_ep_create(&dev, &eps[2], 0), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

/* Every record EP_STATS shows this process on @dev's NIC. */
static int own_records(const struct clanq_dev *dev, struct clanq_ep_stat *recs,
		       unsigned int room)
{
	unsigned int total = 0;
	int n = clanq_ep_stats(dev, recs, room, 0, &total);

	assert_true(n >= 0);
	assert_int_equal((unsigned int)n, total);
	return n;
}

static const struct clanq_ep_stat *find_ep(const struct clanq_ep_stat *recs,
					   int n, uint32_t ep)
{
	for (int i = 0; i < n; i++)
		if (recs[i].ep == ep)
			return &recs[i];
	return NULL;
}

#define N_MSGS 37

/*
 * Counters count what happened: N messages sent from a to b show as N
 * in the NIC's statistics/, in EP_STATS (equal to the endpoints' own
 * mirrors) and in clanqstat's output.
 */
static void counters_count_what_the_test_caused(void **state)
{
	static struct clanq_ep_stat recs[64];
	const struct clanq_ep_stat *ra, *rb;
	unsigned long long sent0, delivered0, sent, entries0;
	struct clanq_oob_msg m;
	struct clanq_dev dev;
	struct clanq_ep a, b;
	char cmd[128], line[512];
	bool seen_a = false, seen_b = false, seen_nic = false;
	unsigned long long v;
	unsigned int ep_id;
	int i, n;
	FILE *p;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_ep_create(&dev, &a, 64), 0);
	assert_int_equal(clanq_ep_create(&dev, &b, 64), 0);
	sent0 = sysfs_u64(0, "statistics/oob_sent");
	delivered0 = sysfs_u64(0, "statistics/oob_delivered");
	entries0 = sysfs_u64(0, "statistics/driver_entries");
	for (i = 0; i < N_MSGS; i++)
		assert_int_equal(clanq_oob_send(&a, b.addr, ITEST_TYPE, &i, sizeof(i)), 0);
	for (i = 0; i < N_MSGS; i++)
		assert_int_equal(itest_recv(&b, &m, ITEST_RECV_TIMEOUT), 0);
	sent = sysfs_u64(0, "statistics/oob_sent");
	assert_int_equal(sent - sent0, N_MSGS);
	assert_int_equal(sysfs_u64(0, "statistics/oob_delivered") - delivered0, N_MSGS);
	assert_true(sysfs_u64(0, "statistics/driver_entries") - entries0 >= N_MSGS);

	/* EP_STATS: the driver's counts, equal to the mirrors */
	n = own_records(&dev, recs, 64);
	ra = find_ep(recs, n, a.addr.id);
	rb = find_ep(recs, n, b.addr.id);
	assert_non_null(ra);
	assert_non_null(rb);
	assert_int_equal(ra->c.oob_sent, N_MSGS);
	assert_int_equal(rb->c.oob_delivered, N_MSGS);
	assert_int_equal(rb->oob_queued, 0);
	assert_int_equal(rb->oob_slots, 64);
	assert_memory_equal(&ra->c, a.counters, sizeof(ra->c));
	assert_memory_equal(&rb->c, b.counters, sizeof(rb->c));
	assert_int_equal(ra->pid, getpid());
	assert_int_equal(ra->uid, 0);
	assert_string_equal(ra->comm, "test_stats");
	/*
	 * the context's own record comes first, and counts both (contexts
	 * of earlier tests may still be listed: closed, but their segments
	 * are mapped until this process exits)
	 */
	for (i = 0; i < n && (recs[i].ep || recs[i].ctx_id != ra->ctx_id); i++)
		;
	assert_true(i < n);
	assert_int_equal(recs[i].nr_eps, 2);
	assert_int_equal(recs[i + 1].ctx_id, ra->ctx_id);
	assert_int_equal(recs[i + 1].ep, a.addr.id);
	assert_int_equal(recs[i + 2].ep, b.addr.id);

	/* clanqstat: the NIC's counters and the endpoints, as sysfs has them */
	p = popen("clanqstat -d clanq0", "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, " oob_sent %llu", &v) == 1) {
			assert_int_equal(v, sent);
			seen_nic = true;
		}
	assert_int_equal(pclose(p), 0);
	assert_true(seen_nic);
	snprintf(cmd, sizeof(cmd), "clanqstat -d 0 -e");
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long c[4];
		int pid;

		/* NIC PID COMM EP SVC SLOTS QUEUED oob_sent oob_delivered ... */
		if (sscanf(line, "clanq0 %d test_stats %u %*s %*u %*u %llu %llu %llu %llu",
			   &pid, &ep_id, &c[0], &c[1], &c[2], &c[3]) != 6)
			continue;
		assert_int_equal(pid, getpid());
		if (ep_id == a.addr.id) {
			assert_int_equal(c[0], N_MSGS);
			seen_a = true;
		} else if (ep_id == b.addr.id) {
			assert_int_equal(c[1], N_MSGS);
			seen_b = true;
		}
	}
	assert_int_equal(pclose(p), 0);
	assert_true(seen_a && seen_b);
	assert_int_equal(clanq_close(&dev), 0);
}

struct peer_sync {
	int ready[2], done[2];
};

/* The child: nobody, one context with one endpoint; it checks its view. */
static void nobody_child(void *arg)
{
	struct peer_sync *s = arg;
	struct clanq_ep_stat recs[16];
	struct clanq_dev dev;
	struct clanq_ep ep;
	unsigned int total;
	char c = 0;
	int n, i;

	itest_become_nobody();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create(&dev, &ep, 0), 0);
	n = clanq_ep_stats(&dev, recs, 16, 0, &total);
	/* its own context and endpoint, nothing of root's */
	CHILD_CHECK_INT(n, 2);
	CHILD_CHECK_INT(total, 2);
	for (i = 0; i < n; i++) {
		CHILD_CHECK_INT(recs[i].uid, ITEST_NOBODY);
		CHILD_CHECK_INT(recs[i].pid, getpid());
	}
	CHILD_CHECK_INT(recs[1].ep, ep.addr.id);
	CHILD_CHECK(write(s->ready[1], &c, 1) == 1);
	CHILD_CHECK(read(s->done[0], &c, 1) == 1);
	exit(0);
}

/* A user sees the contexts its uid opened; root sees every one. */
static void a_user_sees_its_own_contexts_root_all(void **state)
{
	static struct clanq_ep_stat recs[256];
	struct peer_sync s;
	struct clanq_dev dev;
	struct clanq_ep ep;
	bool mine = false, theirs = false;
	pid_t child;
	char c = 0;
	int n, i, status;

	(void)state;
	assert_int_equal(pipe(s.ready), 0);
	assert_int_equal(pipe(s.done), 0);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_ep_create(&dev, &ep, 0), 0);
	child = itest_fork(nobody_child, &s);
	/* a child that dies before it is ready reads as EOF, not a hang */
	close(s.ready[1]);
	close(s.done[0]);
	assert_int_equal(read(s.ready[0], &c, 1), 1);
	n = own_records(&dev, recs, 256);
	for (i = 0; i < n; i++) {
		if (recs[i].ep == ep.addr.id && recs[i].pid == getpid())
			mine = true;
		if (recs[i].pid == child && recs[i].uid == ITEST_NOBODY)
			theirs = true;
	}
	assert_true(mine);
	assert_true(theirs);
	assert_int_equal(write(s.done[1], &c, 1), 1);
	status = itest_wait(child, 30 * ITEST_NS_PER_S);
	close(s.ready[0]);
	close(s.done[1]);
	assert_true(itest_status_ok(status, "nobody"));
	assert_int_equal(clanq_close(&dev), 0);
}

/* Paging with skip walks the same records a single call returns. */
static void pages_add_up_to_the_whole(void **state)
{
	static struct clanq_ep_stat whole[64], page[3];
	struct clanq_ep eps[5];
	struct clanq_dev dev;
	unsigned int total, got = 0;
	int n, k, i;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(clanq_ep_create(&dev, &eps[i], 0), 0);
	n = own_records(&dev, whole, 64);
	assert_true(n >= 6);
	while (got < (unsigned int)n) {
		k = clanq_ep_stats(&dev, page, 3, got, &total);
		assert_true(k > 0 && k <= 3);
		assert_int_equal(total, n);
		/* our context's entries grow with every call: this one too */
		for (i = 0; i < k; i++) {
			if (page[i].pid == getpid())
				assert_true(page[i].ctx_entries >= whole[got + i].ctx_entries);
			page[i].ctx_entries = whole[got + i].ctx_entries;
		}
		assert_memory_equal(page, &whole[got], k * sizeof(page[0]));
		got += k;
	}
	/* past the end: nothing, and the total still */
	assert_int_equal(clanq_ep_stats(&dev, page, 3, n, &total), 0);
	assert_int_equal(total, n);
	assert_int_equal(clanq_ep_stats(&dev, page, 3, UINT32_MAX, &total), 0);
	assert_int_equal(total, n);
	assert_int_equal(clanq_close(&dev), 0);
}

/* 0, or the negative errno */
static int stats_ioctl(int fd, struct clanq_ioc_ep_stats *a)
{
	return -itest_ioctl_err(fd, CLANQ_IOC_EP_STATS, a);
}

/* Garbage in the argument: -EINVAL or -EFAULT, never a write elsewhere. */
static void garbage_is_refused(void **state)
{
	static struct clanq_ep_stat recs[4];
	struct clanq_ioc_ep_stats a;
	struct clanq_dev dev;
	struct clanq_ep ep;
	void *ro;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_ep_create(&dev, &ep, 0), 0);

	memset(&a, 0, sizeof(a));
	a.buf = (uintptr_t)recs;
	assert_int_equal(stats_ioctl(dev.fd, &a), -EINVAL);	/* count 0 */
	a.count = CLANQ_EP_STATS_MAX + 1;
	assert_int_equal(stats_ioctl(dev.fd, &a), -EINVAL);
	a.count = UINT32_MAX;
	assert_int_equal(stats_ioctl(dev.fd, &a), -EINVAL);
	a.count = 4;
	a.flags = 1;
	assert_int_equal(stats_ioctl(dev.fd, &a), -EINVAL);
	a.flags = 0;
	a.reserved[1] = 1;
	assert_int_equal(stats_ioctl(dev.fd, &a), -EINVAL);
	a.reserved[1] = 0;

	/* buffers it must not write */
	a.buf = 0;
	assert_int_equal(stats_ioctl(dev.fd, &a), -EFAULT);
	a.buf = 0xffff800000000000ull;	/* kernel space */
	assert_int_equal(stats_ioctl(dev.fd, &a), -EFAULT);
	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED);
	a.buf = (uintptr_t)ro;
	assert_int_equal(stats_ioctl(dev.fd, &a), -EFAULT);
	munmap(ro, 4096);

	/* a wrong size is another command */
	assert_int_equal(itest_ioctl_err(dev.fd, _IOWR(CLANQ_IOC_MAGIC, 0x14, uint64_t), &a),
			 ENOTTY);

	/* and after all that, a good call still works */
	memset(&a, 0, sizeof(a));
	a.buf = (uintptr_t)recs;
	a.count = 4;
	assert_int_equal(stats_ioctl(dev.fd, &a), 0);
	assert_true(a.count >= 2);
	assert_int_equal(clanq_close(&dev), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(identity_is_the_devices),
		cmocka_unit_test(a_limit_changed_at_run_time_holds_and_is_named),
		cmocka_unit_test(counters_count_what_the_test_caused),
		cmocka_unit_test_teardown(a_user_sees_its_own_contexts_root_all,
					  itest_teardown),
		cmocka_unit_test(pages_add_up_to_the_whole),
		cmocka_unit_test(garbage_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
