// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq across namespaces and cgroups (clanq(7) NAMESPACES AND CGROUPS),
 * through the real driver, with "containers" made here with unshare(2):
 *  - a network namespace does not isolate clanq (its NICs are the
 *    host's, as an RDMA device is): a container (its own network
 *    namespace, its own uid) connects to a server on the host and to one
 *    in another container, every byte echoed checked, by PIO and by the
 *    RDMA engine;
 *  - a container's root is nobody to the NIC: in a user namespace of its
 *    own, its capabilities are the namespace's, and the driver asks the
 *    init namespace (capable()): no PEER_ADD, no privileged service, no
 *    module parameter; its memory counts against max_user_bytes under
 *    its kernel uid, which another container of the same kernel uid
 *    shares and one of another does not (needs CONFIG_USER_NS: skipped
 *    where the kernel has none, as the debug VM's);
 *  - a memory cgroup pays for what its processes make the driver
 *    allocate: a container in a cgroup with memory.max allocating regions
 *    sees them charged there and is refused (-ENOMEM) at the bound, or at
 *    worst is killed by its own cgroup's OOM killer; a process outside it
 *    is never touched.
 *
 * Runs in the test VM (nr_nics=2), as root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <clanq/admin.h>
#include <clanq/net.h>

#include "itest.h"

#define KUID_A		1001
#define KUID_B		1002
#define SVC_HOST	4500
#define SVC_B		4501
#define MSGS		24
#define MAX_LEN		6000
#define TIMEOUT		(20 * ITEST_NS_PER_S)

static void *shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

static int put_file(const char *path, const char *what)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, what, strlen(what));
	if (n != (ssize_t)strlen(what)) {
		n = n < 0 ? -errno : -EIO;
		close(fd);
		return (int)n;
	}
	return close(fd) ? -errno : 0;
}

/*
 * In a child: a container of kernel uid @kuid with a network namespace
 * of its own, and with @userns a user namespace of its own too, in which
 * it is root (uid 0, every capability of that namespace). Returns
 * -errno if the kernel makes no user namespace (-EINVAL without
 * CONFIG_USER_NS).
 */
static int enter_container(uid_t kuid, bool userns)
{
	char map[32];

	CHILD_CHECK_INT(unshare(CLONE_NEWNET), 0);
	CHILD_CHECK_INT(setresgid(kuid, kuid, kuid), 0);
	CHILD_CHECK_INT(setresuid(kuid, kuid, kuid), 0);
	if (!userns)
		return 0;
	/* or /proc/self is root's, and we may not write our maps */
	CHILD_CHECK_INT(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
	if (unshare(CLONE_NEWUSER))
		return -errno;
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned int)kuid);
	CHILD_CHECK_INT(put_file("/proc/self/setgroups", "deny"), 0);
	CHILD_CHECK_INT(put_file("/proc/self/gid_map", map), 0);
	CHILD_CHECK_INT(put_file("/proc/self/uid_map", map), 0);
	CHILD_CHECK(getuid() == 0 && geteuid() == 0);
	return 0;
}

/*
 * Networks: a server on the host, one in container B, a client in
 * container A.
 */

struct net_sh {
	uint32_t ready;		/* servers listening */
	uint32_t stop;
	uint32_t echoed[2];	/* host, B */
	uint32_t errors[2];
};

static size_t msg_len(uint32_t conn, uint32_t seq)
{
	return 1 + (conn * 1031 + seq * 977) % MAX_LEN;
}

static void fill(uint8_t *p, size_t len, uint32_t conn, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(conn * 31 + seq * 131 + i * 7);
}

/* An echo server on (nic, service) until told to stop. */
static void echo_server(struct net_sh *sh, unsigned int who, unsigned int nic,
			unsigned int service)
{
	struct clanq_net_event evs[16];
	struct clanq_listener *l;
	struct clanq_conn *c;
	struct clanq_dev dev;
	struct clanq_net *net;
	int n, i;

	CHILD_CHECK_INT(clanq_open_nic(&dev, nic), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(clanq_listen(net, &l, service, 8), 0);
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		n = clanq_net_wait(net, evs, 16, 20 * ITEST_NS_PER_MS);
		for (i = 0; i < n; i++) {
			if (evs[i].what & CLANQ_NET_ACCEPT) {
				while (!clanq_accept(evs[i].listener, &c, NULL, 0))
					;
				continue;
			}
			if (evs[i].what & (CLANQ_NET_IN | CLANQ_NET_HUP))
				itest_echo_drain(evs[i].conn, &sh->echoed[who],
						 &sh->errors[who]);
		}
	}
	CHILD_CHECK_INT(clanq_net_close(net), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void container_b(void *arg)
{
	CHILD_CHECK_INT(enter_container(KUID_B, false), 0);
	echo_server(arg, 1, 1, SVC_B);
}

static void host_server(void *arg)
{
	echo_server(arg, 0, 0, SVC_HOST);
}

static void echo_rounds(struct clanq_conn *c, uint32_t id)
{
	static uint8_t out[MAX_LEN], in[MAX_LEN];
	uint32_t seq;
	size_t len;

	for (seq = 0; seq < MSGS; seq++) {
		len = msg_len(id, seq);
		fill(out, len, id, seq);
		CHILD_CHECK_INT(clanq_send(c, out, len, 0), 0);
		CHILD_CHECK_INT(clanq_recv(c, in, sizeof(in), 0), (ssize_t)len);
		CHILD_CHECK(!memcmp(in, out, len));
	}
}

static void container_a(void *arg)
{
	struct clanq_conn_opts pio = { .timeout_ns = TIMEOUT };
	struct clanq_conn_opts rdma = { .timeout_ns = TIMEOUT,
					.flags = CLANQ_CONN_RDMA_ONLY };
	struct net_sh *sh = arg;
	struct clanq_conn_stats st;
	struct clanq_conn *c;
	struct clanq_dev dev;
	struct clanq_net *net;
	uint64_t end = clanq_now_ns() + TIMEOUT;

	CHILD_CHECK_INT(enter_container(KUID_A, false), 0);
	while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < 2) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("the servers did not get going");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	/* to the host, and to the other container: PIO, then RDMA only */
	for (unsigned int k = 0; k < 4; k++) {
		CHILD_CHECK_INT(clanq_connect(net, &c, k % 2 ? 1 : 0,
					      k % 2 ? SVC_B : SVC_HOST,
					      k < 2 ? &pio : &rdma), 0);
		CHILD_CHECK_INT(clanq_conn_set_timeouts(c, TIMEOUT, TIMEOUT), 0);
		echo_rounds(c, k);
		clanq_conn_stats(c, &st);
		if (k >= 2)
			CHILD_CHECK(st.rdma_sends >= MSGS);
		CHILD_CHECK_INT(clanq_conn_close(c), 0);
	}
	CHILD_CHECK_INT(clanq_net_close(net), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void containers_reach_each_other_and_the_host(void **state)
{
	struct net_sh *sh = shared_alloc(sizeof(*sh));
	pid_t host, b, a;

	(void)state;
	host = itest_fork(host_server, sh);
	b = itest_fork(container_b, sh);
	a = itest_fork(container_a, sh);
	assert_true(host > 0 && b > 0 && a > 0);
	assert_true(itest_status_ok(itest_wait(a, 3 * TIMEOUT), "container A"));
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	assert_true(itest_status_ok(itest_wait(b, TIMEOUT), "container B"));
	assert_true(itest_status_ok(itest_wait(host, TIMEOUT), "host server"));
	assert_int_equal(sh->echoed[0], 2 * MSGS);
	assert_int_equal(sh->echoed[1], 2 * MSGS);
	assert_int_equal(sh->errors[0] + sh->errors[1], 0);
	munmap(sh, sizeof(*sh));
}

/*
 * A container's root.
 */

#define USER_BYTES	(4ul << 20)
#define NO_USERNS	77

/* max_user_bytes as it was, put back whatever a case did (0: untouched) */
static unsigned long saved_user_bytes;

static int restore_params(void **state)
{
	char v[32];

	if (saved_user_bytes) {
		snprintf(v, sizeof(v), "%lu\n", saved_user_bytes);
		put_file("/sys/module/clanq/parameters/max_user_bytes", v);
		saved_user_bytes = 0;
	}
	return itest_teardown(state);
}

struct root_sh {
	uint32_t regions;	/* what container A got under max_user_bytes */
	uint32_t holding;	/* A holds them */
	uint32_t release;
};

static void container_root(void *arg)
{
	struct root_sh *sh = arg;
	struct clanq_ep_attr attr = { .service = 80 };
	struct clanq_region r[8];
	struct clanq_dev dev;
	struct clanq_ep ep;
	char msg[CLANQ_ERR_MAX];
	unsigned int i;
	int err = 0;

	err = enter_container(KUID_A, true);
	if (err) {
		printf("no user namespace: %s\n", strerror(-err));
		fflush(stdout);
		_exit(NO_USERNS);
	}
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	/* root here, nobody to the NIC */
	CHILD_CHECK_INT(clanq_peer_add(&dev, 9, htonl(0x7f000001), 0), -EPERM);
	CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep, &attr), -EACCES);
	CHILD_CHECK_INT(put_file("/sys/module/clanq/parameters/max_user_bytes",
				 "1099511627776\n"), -EACCES);
	/* counted (no CAP_IPC_LOCK of the init namespace), as kernel uid 1001 */
	for (i = 0; i < 8; i++) {
		err = clanq_region_alloc(&dev, &r[i], 1ul << 20);
		if (err)
			break;
	}
	CHILD_CHECK_INT(err, -ENOMEM);
	CHILD_CHECK(i < 8);
	clanq_last_error(&dev, msg, sizeof(msg));
	CHILD_CHECK(strstr(msg, "uid 1001"));
	__atomic_store_n(&sh->regions, i, __ATOMIC_RELEASE);
	__atomic_store_n(&sh->holding, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sh->release, __ATOMIC_ACQUIRE))
		itest_sleep_ns(ITEST_NS_PER_MS);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

/* Another container: the same kernel uid shares the budget, another not. */
static void other_container(void *arg)
{
	uid_t kuid = (uid_t)(uintptr_t)arg;
	struct clanq_region r;
	struct clanq_dev dev;

	CHILD_CHECK_INT(enter_container(kuid, true), 0);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &r, 1ul << 20),
			kuid == KUID_A ? -ENOMEM : 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void a_containers_root_is_nobody_to_the_nic(void **state)
{
	struct root_sh *sh = shared_alloc(sizeof(*sh));
	uint64_t end = clanq_now_ns() + TIMEOUT;
	int status = -1;
	pid_t a, w = 0;

	(void)state;
	saved_user_bytes = itest_param("max_user_bytes");
	itest_param_set("max_user_bytes", USER_BYTES);
	a = itest_fork(container_root, sh);
	assert_true(a > 0);
	while (!__atomic_load_n(&sh->holding, __ATOMIC_ACQUIRE)) {
		w = waitpid(a, &status, WNOHANG);
		if (w == a || clanq_now_ns() > end)
			break;
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	if (!__atomic_load_n(&sh->holding, __ATOMIC_ACQUIRE)) {
		if (w == a)
			itest_forget(a);
		else
			status = itest_wait(a, TIMEOUT);
		if (WIFEXITED(status) && WEXITSTATUS(status) == NO_USERNS)
			skip();		/* CONFIG_USER_NS=n */
		fail_msg("container root: status %#x", status);
	}
	assert_true(sh->regions >= 1 && sh->regions <= USER_BYTES >> 20);
	assert_true(itest_status_ok(itest_wait(itest_fork(other_container,
							  (void *)(uintptr_t)KUID_A),
					      TIMEOUT), "same kernel uid"));
	assert_true(itest_status_ok(itest_wait(itest_fork(other_container,
							  (void *)(uintptr_t)KUID_B),
					      TIMEOUT), "another kernel uid"));
	__atomic_store_n(&sh->release, 1, __ATOMIC_RELEASE);
	assert_true(itest_status_ok(itest_wait(a, TIMEOUT), "container root"));
	munmap(sh, sizeof(*sh));
}

/*
 * A memory cgroup.
 */

#define CG_ROOT		"/tmp/clanq-cg-ns"
#define CG		CG_ROOT "/container"
#define CG_MAX		(8ul << 20)
#define CG_REGIONS	32

struct cg_sh {
	uint32_t joined;
	uint32_t got;		/* regions allocated */
	int32_t err;		/* the refusal */
	uint32_t holding;
	uint32_t release;
	char why[CLANQ_ERR_MAX];	/* the driver's note on the refusal */
};

static void cg_container(void *arg)
{
	static struct clanq_region r[CG_REGIONS];
	struct cg_sh *sh = arg;
	struct clanq_dev dev;
	volatile char stack[64 << 10];
	uint32_t i;
	int err = 0;

	/* what this process will touch, touched before it pays for it */
	memset((char *)stack, 0, sizeof(stack));
	CHILD_CHECK_INT(enter_container(KUID_A, false), 0);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	__atomic_store_n(&sh->joined, 1, __ATOMIC_RELEASE);
	/* the parent moves us into the cgroup */
	while (__atomic_load_n(&sh->joined, __ATOMIC_ACQUIRE) != 2)
		;
	for (i = 0; i < CG_REGIONS; i++) {
		err = clanq_region_alloc(&dev, &r[i], 1ul << 20);
		if (err)
			break;
	}
	sh->got = i;
	sh->err = err;
	clanq_last_error(&dev, sh->why, sizeof(sh->why));
	__atomic_store_n(&sh->holding, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sh->release, __ATOMIC_ACQUIRE))
		;
	_exit(clanq_close(&dev) ? 1 : 0);
}

static void bystander(void *arg)
{
	(void)arg;
	for (;;)
		pause();
}

static void a_memory_cgroup_pays_and_bounds(void **state)
{
	struct cg_sh *sh = shared_alloc(sizeof(*sh));
	uint64_t end = clanq_now_ns() + TIMEOUT;
	unsigned long current;
	char num[32];
	pid_t pid, by;
	int status;

	(void)state;
	/* the budgets allow all CG_REGIONS: only the cgroup can refuse */
	assert_true(itest_param("max_ctx_bytes") >= (CG_REGIONS + 1ul) << 20);
	saved_user_bytes = itest_param("max_user_bytes");
	itest_param_set("max_user_bytes", 1ul << 30);
	mkdir("/tmp", 0755);
	mkdir(CG_ROOT, 0755);
	assert_int_equal(mount("cgroup2", CG_ROOT, "cgroup2", 0, NULL), 0);
	assert_int_equal(put_file(CG_ROOT "/cgroup.subtree_control", "+memory"), 0);
	assert_true(mkdir(CG, 0755) == 0 || errno == EEXIST);
	snprintf(num, sizeof(num), "%lu", CG_MAX);
	assert_int_equal(put_file(CG "/memory.max", num), 0);
	put_file(CG "/memory.swap.max", "0");	/* absent without swap accounting */

	by = itest_fork(bystander, NULL);
	pid = itest_fork(cg_container, sh);
	assert_true(by > 0 && pid > 0);
	while (__atomic_load_n(&sh->joined, __ATOMIC_ACQUIRE) != 1)
		assert_true(clanq_now_ns() < end);
	snprintf(num, sizeof(num), "%d", pid);
	assert_int_equal(put_file(CG "/cgroup.procs", num), 0);
	__atomic_store_n(&sh->joined, 2, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sh->holding, __ATOMIC_ACQUIRE) &&
	       itest_still_running(pid, "container") && clanq_now_ns() < end)
		itest_sleep_ns(ITEST_NS_PER_MS);

	if (__atomic_load_n(&sh->holding, __ATOMIC_ACQUIRE)) {
		current = itest_read_ul(CG "/memory.current", NULL);
		printf("container: %u regions of 1 MiB, then %d (\"%s\"); memory.current %lu\n",
		       sh->got, sh->err, sh->why, current);
		/* refused at the bound, and what it got is charged here */
		assert_int_equal(sh->err, -ENOMEM);
		assert_null(strstr(sh->why, "max_"));
		assert_true(sh->got < CG_MAX >> 20);
		assert_true(current >= (unsigned long)sh->got << 20);
		__atomic_store_n(&sh->release, 1, __ATOMIC_RELEASE);
		assert_true(itest_status_ok(itest_wait(pid, TIMEOUT), "container"));
	} else {
		/* the cgroup's own OOM killer, on the cgroup's own process */
		status = itest_wait(pid, TIMEOUT);
		printf("container: killed (status %#x), oom_kill %lu\n", status,
		       itest_read_ul(CG "/memory.events", "oom_kill"));
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		assert_true(itest_read_ul(CG "/memory.events", "oom_kill") > 0);
	}
	assert_true(itest_read_ul(CG "/memory.peak", NULL) <= CG_MAX);
	/* nobody outside was touched */
	assert_true(itest_still_running(by, "bystander"));
	assert_int_equal(kill(by, SIGKILL), 0);
	itest_wait(by, TIMEOUT);
	rmdir(CG);
	umount(CG_ROOT);
	munmap(sh, sizeof(*sh));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(containers_reach_each_other_and_the_host,
					  itest_teardown),
		cmocka_unit_test_teardown(a_containers_root_is_nobody_to_the_nic,
					  restore_params),
		cmocka_unit_test_teardown(a_memory_cgroup_pays_and_bounds,
					  restore_params),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
