// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The verbs wire's administration (uapi clanq.h: CLANQ_IOC_WIRE_BIND,
 * CLANQ_IOC_PEER_ADD, _DEL, _LIST): every argument the driver must
 * refuse is refused with its errno and changes nothing; peers added are
 * listed exactly as given, in node order, in PEER_LIST and in sysfs
 * peers, and go when deleted; a user without CAP_NET_ADMIN may list but
 * not change; clanqctl says the same in words, with its exit codes.
 *
 * Runs in the VM as root, the module loaded with nr_nics=2 (both NICs
 * are nodes of this host) and no RDMA device: nothing here binds, so
 * nothing connects, and every peer stays idle.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
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

#define SYSFS		"/sys/class/misc"
#define NO_SUCH_DEV	"nosuchdev0"
#define KERNEL_ADDR	0xffff800000000000ull

/* 192.0.2.x (TEST-NET-1), network byte order */
#define TEST_NET(x)	htonl(0xc0000200u | (x))

static struct clanq_peer_stat recs[CLANQ_PEERS_MAX];

/* -errno of a raw ioctl, or 0 */
static int bind_ioctl(int fd, struct clanq_ioc_wire_bind *a)
{
	return -itest_ioctl_err(fd, CLANQ_IOC_WIRE_BIND, a);
}

static int peer_ioctl(int fd, unsigned long cmd, struct clanq_ioc_peer *a)
{
	return -itest_ioctl_err(fd, cmd, a);
}

static int list_ioctl(int fd, struct clanq_ioc_peer_list *a)
{
	return -itest_ioctl_err(fd, CLANQ_IOC_PEER_LIST, a);
}

static struct clanq_ioc_peer peer_arg(uint32_t node, uint32_t ipv4, uint32_t port)
{
	struct clanq_ioc_peer a;

	memset(&a, 0, sizeof(a));
	a.node = node;
	a.ipv4 = ipv4;
	a.port = port;
	return a;
}

/* A sysfs file of NIC nic, whole, with its newlines. */
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
}

static unsigned int count_lines(const char *s)
{
	unsigned int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Lines of s equal to line (without its newline). */
static unsigned int lines_equal(const char *s, const char *line)
{
	size_t len = strlen(line);
	unsigned int n = 0;

	while (*s) {
		const char *nl = strchr(s, '\n');
		size_t l = nl ? (size_t)(nl - s) : strlen(s);

		n += l == len && !memcmp(s, line, len);
		s += l + (nl != NULL);
	}
	return n;
}

/* Every peer of both NICs: what a failed earlier test may have left. */
static void forget_all_peers(void)
{
	struct clanq_dev dev;
	unsigned int total;
	int n;

	for (unsigned int nic = 0; nic < 2; nic++) {
		assert_int_equal(clanq_open_nic(&dev, nic), 0);
		n = clanq_peer_list(&dev, recs, CLANQ_PEERS_MAX, &total);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++)
			assert_int_equal(clanq_peer_del(&dev, recs[i].node), 0);
		assert_int_equal(clanq_peer_list(&dev, recs, 1, &total), 0);
		assert_int_equal(total, 0);
		assert_int_equal(clanq_close(&dev), 0);
	}
}

static int setup(void **state)
{
	(void)state;
	forget_all_peers();
	return 0;
}

static int teardown(void **state)
{
	itest_teardown(state);
	forget_all_peers();
	return 0;
}

/* The nodes of this host, and a base for nodes that are on none. */
struct nodes {
	uint32_t local[2];
	uint32_t remote;	/* remote .. remote + CLANQ_PEERS_MAX: not local */
};

static struct nodes host_nodes(void)
{
	struct clanq_dev d0, d1;
	struct nodes n;

	assert_int_equal(clanq_open_nic(&d0, 0), 0);
	assert_int_equal(clanq_open_nic(&d1, 1), 0);
	assert_int_equal(d0.nr_nics, 2);
	n.local[0] = d0.node;
	n.local[1] = d1.node;
	n.remote = (d0.node > d1.node ? d0.node : d1.node) + 1000;
	clanq_close(&d1);
	clanq_close(&d0);
	return n;
}

static unsigned int peers_total(const struct clanq_dev *dev)
{
	unsigned int total = 0xdead;
	int n = clanq_peer_list(dev, recs, CLANQ_PEERS_MAX, &total);

	assert_int_equal(n, (int)total);
	return total;
}

/*
 * 1. WIRE_BIND: garbage, a name that is not NUL-terminated, a device
 * that does not exist: refused, and the NIC stays unbound; unbinding an
 * unbound NIC succeeds.
 */
static void bind_refuses_garbage_and_unknown_devices(void **state)
{
	struct clanq_ioc_wire_bind a;
	struct clanq_dev dev;
	char buf[256], name[CLANQ_WIRE_DEV_MAX + 1];

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	read_sysfs(0, "verbs", buf, sizeof(buf));
	assert_string_equal(buf, "unbound\n");

	/* unbinding what is not bound: 0, as often as asked */
	memset(&a, 0, sizeof(a));
	assert_int_equal(bind_ioctl(dev.fd, &a), 0);
	assert_int_equal(bind_ioctl(dev.fd, &a), 0);
	assert_int_equal(clanq_wire_bind(&dev, NULL, 0), 0);
	assert_int_equal(clanq_wire_bind(&dev, "", 1), 0);

	/* no such RDMA device (the VM has none) */
	memset(&a, 0, sizeof(a));
	strcpy(a.dev, NO_SUCH_DEV);
	a.port = 1;
	assert_int_equal(bind_ioctl(dev.fd, &a), -ENODEV);
	assert_int_equal(clanq_wire_bind(&dev, NO_SUCH_DEV, 1), -ENODEV);

	/* flags and reserved words must be zero: checked before the lookup */
	a.flags = 1;
	assert_int_equal(bind_ioctl(dev.fd, &a), -EINVAL);
	a.flags = 0x80000000u;
	assert_int_equal(bind_ioctl(dev.fd, &a), -EINVAL);
	a.flags = 0;
	a.reserved[0] = 1;
	assert_int_equal(bind_ioctl(dev.fd, &a), -EINVAL);
	a.reserved[0] = 0;
	a.reserved[1] = 1ull << 63;
	assert_int_equal(bind_ioctl(dev.fd, &a), -EINVAL);
	a.reserved[1] = 0;
	/* an unbind with garbage is garbage too */
	memset(&a, 0, sizeof(a));
	a.flags = 1;
	assert_int_equal(bind_ioctl(dev.fd, &a), -EINVAL);

	/* 64 bytes without a NUL: not a name */
	memset(&a, 0, sizeof(a));
	memset(a.dev, 'r', sizeof(a.dev));
	a.port = 1;
	assert_int_equal(bind_ioctl(dev.fd, &a), -EINVAL);
	/* the library refuses it without asking */
	memset(name, 'r', sizeof(name));
	name[CLANQ_WIRE_DEV_MAX] = 0;
	assert_int_equal(clanq_wire_bind(&dev, name, 1), -EINVAL);
	/* 63 bytes and the NUL: a name, of no device */
	name[CLANQ_WIRE_DEV_MAX - 1] = 0;
	assert_int_equal(clanq_wire_bind(&dev, name, 1), -ENODEV);

	/* a wrong size is another command */
	assert_int_equal(itest_ioctl_err(dev.fd, _IOWR(CLANQ_IOC_MAGIC, 0x15, uint64_t), &a),
			 ENOTTY);

	/* nothing of that bound anything */
	read_sysfs(0, "verbs", buf, sizeof(buf));
	assert_string_equal(buf, "unbound\n");
	read_sysfs(1, "verbs", buf, sizeof(buf));
	assert_string_equal(buf, "unbound\n");
	assert_int_equal(clanq_close(&dev), 0);
}

/*
 * 2. PEER_ADD: a node of this host, CLANQ_NODE_INVALID, an address no
 * peer can have, a port past 65535, garbage: -EINVAL, and no peer. A
 * node added twice: -EEXIST; deleted when it is none: -ENOENT.
 */
static void peer_add_and_del_refuse_what_the_rules_forbid(void **state)
{
	struct nodes n = host_nodes();
	struct clanq_ioc_peer a;
	struct clanq_dev dev;
	uint32_t bad_ips[] = {
		0, 0xffffffffu, htonl(0xe0000001u) /* 224.0.0.1 */,
		htonl(0xefffffffu) /* 239.255.255.255 */, htonl(0xe00000fbu),
	};
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);

	/* this host's nodes, its own and the other NIC's, from either NIC */
	for (i = 0; i < 2; i++) {
		a = peer_arg(n.local[i], TEST_NET(1), 0);
		assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);
		assert_int_equal(clanq_peer_add(&dev, n.local[i], TEST_NET(1), 4000), -EINVAL);
	}
	a = peer_arg(CLANQ_NODE_INVALID, TEST_NET(1), 0);
	assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);

	/* addresses: unspecified, broadcast, multicast */
	for (i = 0; i < ARRAY_SIZE(bad_ips); i++) {
		a = peer_arg(n.remote, bad_ips[i], 0);
		assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);
	}
	/* ports */
	a = peer_arg(n.remote, TEST_NET(1), 70000);
	assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);
	a.port = 65536;
	assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);
	a.port = UINT32_MAX;
	assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);
	/* flags and reserved words */
	a = peer_arg(n.remote, TEST_NET(1), 0);
	a.flags = 1;
	assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);
	a.flags = 0;
	a.reserved[1] = 1;
	assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EINVAL);
	assert_int_equal(peers_total(&dev), 0);

	/* added once; a second time, even elsewhere: -EEXIST */
	assert_int_equal(clanq_peer_add(&dev, n.remote, TEST_NET(1), 65535), 0);
	assert_int_equal(clanq_peer_add(&dev, n.remote, TEST_NET(1), 65535), -EEXIST);
	assert_int_equal(clanq_peer_add(&dev, n.remote, TEST_NET(2), 0), -EEXIST);
	assert_int_equal(peers_total(&dev), 1);
	assert_int_equal(recs[0].ipv4, TEST_NET(1));	/* the first stands */
	assert_int_equal(recs[0].port, 65535);

	/* deleted once; then it is no peer */
	assert_int_equal(clanq_peer_del(&dev, n.remote + 1), -ENOENT);
	assert_int_equal(clanq_peer_del(&dev, n.local[1]), -ENOENT);
	assert_int_equal(clanq_peer_del(&dev, n.remote), 0);
	assert_int_equal(clanq_peer_del(&dev, n.remote), -ENOENT);
	a = peer_arg(n.remote, 0, 0);
	assert_int_equal(peer_ioctl(dev.fd, CLANQ_IOC_PEER_DEL, &a), -ENOENT);
	assert_int_equal(peers_total(&dev), 0);

	/* wrong sizes are other commands */
	assert_int_equal(itest_ioctl_err(dev.fd, _IOWR(CLANQ_IOC_MAGIC, 0x16, uint64_t), &a),
			 ENOTTY);
	assert_int_equal(itest_ioctl_err(dev.fd, _IOWR(CLANQ_IOC_MAGIC, 0x17, uint64_t), &a),
			 ENOTTY);
	assert_int_equal(clanq_close(&dev), 0);
}

/*
 * 3. PEER_LIST: a count of 0 or past CLANQ_PEERS_MAX, garbage, a buffer
 * it may not write: refused, with a peer there to be written.
 */
static void peer_list_refuses_bad_counts_and_buffers(void **state)
{
	struct nodes n = host_nodes();
	struct clanq_ioc_peer_list a;
	struct clanq_dev dev;
	void *ro;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_peer_add(&dev, n.remote, TEST_NET(3), 0), 0);

	memset(&a, 0, sizeof(a));
	a.buf = (uintptr_t)recs;
	assert_int_equal(list_ioctl(dev.fd, &a), -EINVAL);	/* count 0 */
	a.count = CLANQ_PEERS_MAX + 1;
	assert_int_equal(list_ioctl(dev.fd, &a), -EINVAL);
	a.count = UINT32_MAX;
	assert_int_equal(list_ioctl(dev.fd, &a), -EINVAL);
	assert_int_equal(clanq_peer_list(&dev, recs, 0, NULL), -EINVAL);
	assert_int_equal(clanq_peer_list(&dev, recs, CLANQ_PEERS_MAX + 1, NULL), -EINVAL);
	a.count = 4;
	a.flags = 1;
	assert_int_equal(list_ioctl(dev.fd, &a), -EINVAL);
	a.flags = 0;
	a.reserved0 = 1;
	assert_int_equal(list_ioctl(dev.fd, &a), -EINVAL);
	a.reserved0 = 0;
	a.reserved[0] = 1;
	assert_int_equal(list_ioctl(dev.fd, &a), -EINVAL);
	a.reserved[0] = 0;

	/* buffers it must not write */
	a.buf = 0;
	assert_int_equal(list_ioctl(dev.fd, &a), -EFAULT);
	assert_int_equal(clanq_peer_list(&dev, NULL, 4, NULL), -EFAULT);
	a.buf = KERNEL_ADDR;
	assert_int_equal(list_ioctl(dev.fd, &a), -EFAULT);
	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED);
	a.buf = (uintptr_t)ro;
	assert_int_equal(list_ioctl(dev.fd, &a), -EFAULT);
	munmap(ro, 4096);

	assert_int_equal(itest_ioctl_err(dev.fd, _IOWR(CLANQ_IOC_MAGIC, 0x18, uint64_t), &a),
			 ENOTTY);

	/* and after all that, a good call still works */
	memset(&a, 0, sizeof(a));
	a.buf = (uintptr_t)recs;
	a.count = 4;
	assert_int_equal(list_ioctl(dev.fd, &a), 0);
	assert_int_equal(a.count, 1);
	assert_int_equal(a.total, 1);
	assert_int_equal(recs[0].node, n.remote);
	assert_int_equal(clanq_peer_del(&dev, n.remote), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

/* The sysfs peers line of a verbs peer. */
static void peer_line(char *buf, size_t len, uint32_t node, uint32_t ipv4, uint32_t port,
		      const char *state)
{
	struct in_addr in = { .s_addr = ipv4 };
	char addr[INET_ADDRSTRLEN];

	assert_non_null(inet_ntop(AF_INET, &in, addr, sizeof(addr)));
	snprintf(buf, len, "%u verbs %s:%u %s", node, addr, port, state);
}

/*
 * The port a peer added with port 0 is reached at: the verbs wire's
 * (its module's port parameter), 0 while that is not loaded.
 */
static unsigned long wire_port(void)
{
	return itest_module_param("clanq_verbs", "port", 0);
}

/*
 * 4. What is added is listed as given, in node order, idle, a port of 0
 * as the wire's port (wire_port()); in PEER_LIST and in sysfs peers, after the
 * other local NIC's node; on that NIC only; and deleted, it is gone.
 */
static void peers_round_trip_through_list_and_sysfs(void **state)
{
	struct nodes n = host_nodes();
	unsigned long verbs_port = wire_port();
	struct {
		uint32_t node, ipv4, port, shown_port;
	} want[3] = {
		/* listed in this order; added 2, 0, 1 */
		{ n.remote, TEST_NET(10), 0, (uint32_t)verbs_port },
		{ n.remote + 5, TEST_NET(11), 1, 1 },
		{ n.remote + 70000, htonl(0x0a000001u), 65535, 65535 },
	};
	static const unsigned int order[] = { 2, 0, 1 };
	struct clanq_dev dev, dev1;
	char buf[4096], line[128], first[32];
	unsigned int total, i;

	(void)state;
	assert_true(verbs_port <= 65535);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_open_nic(&dev1, 1), 0);
	for (i = 0; i < 3; i++) {
		unsigned int k = order[i];

		assert_int_equal(clanq_peer_add(&dev, want[k].node, want[k].ipv4,
						want[k].port), 0);
	}

	/* everything at once */
	memset(recs, 0xa5, sizeof(recs));
	assert_int_equal(clanq_peer_list(&dev, recs, CLANQ_PEERS_MAX, &total), 3);
	assert_int_equal(total, 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(recs[i].node, want[i].node);
		assert_int_equal(recs[i].ipv4, want[i].ipv4);
		assert_int_equal(recs[i].port, want[i].shown_port);
		assert_int_equal(recs[i].state, CLANQ_PEER_IDLE);
		assert_int_equal(recs[i].last_error, 0);
		assert_int_equal(recs[i].connects, 0);
		assert_int_equal(recs[i].oob_sent, 0);
		assert_int_equal(recs[i].oob_received, 0);
		assert_int_equal(recs[i].send_errors, 0);
	}
	/* nothing past the records written */
	assert_int_equal(recs[3].node, 0xa5a5a5a5u);

	/* fewer than there are: the first in node order, and the total */
	memset(recs, 0xa5, sizeof(recs));
	assert_int_equal(clanq_peer_list(&dev, recs, 1, &total), 1);
	assert_int_equal(total, 3);
	assert_int_equal(recs[0].node, want[0].node);
	assert_int_equal(recs[1].node, 0xa5a5a5a5u);
	assert_int_equal(clanq_peer_list(&dev, recs, 2, NULL), 2);
	assert_int_equal(recs[1].node, want[1].node);

	/* peers are the NIC's: NIC 1 has none */
	assert_int_equal(peers_total(&dev1), 0);

	/* sysfs: the other local NIC first (as before), then one line each */
	read_sysfs(0, "peers", buf, sizeof(buf));
	snprintf(first, sizeof(first), "%u\n", n.local[1]);
	assert_true(!strncmp(buf, first, strlen(first)));
	assert_int_equal(count_lines(buf), 4);
	for (i = 0; i < 3; i++) {
		peer_line(line, sizeof(line), want[i].node, want[i].ipv4,
			  want[i].shown_port, "idle");
		if (lines_equal(buf, line) != 1)
			fail_msg("clanq0/peers has no line '%s' once:\n%s", line, buf);
	}
	read_sysfs(1, "peers", buf, sizeof(buf));
	snprintf(first, sizeof(first), "%u\n", n.local[0]);
	assert_string_equal(buf, first);

	/* deleted: gone from both */
	assert_int_equal(clanq_peer_del(&dev, want[1].node), 0);
	assert_int_equal(clanq_peer_list(&dev, recs, CLANQ_PEERS_MAX, &total), 2);
	assert_int_equal(recs[0].node, want[0].node);
	assert_int_equal(recs[1].node, want[2].node);
	read_sysfs(0, "peers", buf, sizeof(buf));
	assert_int_equal(count_lines(buf), 3);
	peer_line(line, sizeof(line), want[1].node, want[1].ipv4, 1, "idle");
	assert_int_equal(lines_equal(buf, line), 0);
	assert_int_equal(clanq_peer_del(&dev, want[0].node), 0);
	assert_int_equal(clanq_peer_del(&dev, want[2].node), 0);
	assert_int_equal(peers_total(&dev), 0);
	read_sysfs(0, "peers", buf, sizeof(buf));
	snprintf(first, sizeof(first), "%u\n", n.local[1]);
	assert_string_equal(buf, first);
	assert_int_equal(clanq_close(&dev1), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

/*
 * 5. CLANQ_PEERS_MAX peers fit, one more is -ENOSPC; all listed in one
 * call, in node order.
 */
static void one_peer_past_the_most_is_enospc(void **state)
{
	struct nodes n = host_nodes();
	struct clanq_dev dev;
	unsigned int total, i;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	/* added from the top down: the list sorts them */
	for (i = CLANQ_PEERS_MAX; i-- > 0;)
		assert_int_equal(clanq_peer_add(&dev, n.remote + i,
						TEST_NET(1 + i % 250), 0), 0);
	assert_int_equal(clanq_peer_add(&dev, n.remote + CLANQ_PEERS_MAX,
					TEST_NET(1), 0), -ENOSPC);
	/* full and a duplicate: refused, whichever rule says so */
	assert_true(clanq_peer_add(&dev, n.remote, TEST_NET(1), 0) < 0);
	assert_int_equal(clanq_peer_list(&dev, recs, CLANQ_PEERS_MAX, &total),
			 CLANQ_PEERS_MAX);
	assert_int_equal(total, CLANQ_PEERS_MAX);
	for (i = 0; i < CLANQ_PEERS_MAX; i++)
		assert_int_equal(recs[i].node, n.remote + i);
	/* one goes: one fits again */
	assert_int_equal(clanq_peer_del(&dev, n.remote + 7), 0);
	assert_int_equal(clanq_peer_add(&dev, n.remote + CLANQ_PEERS_MAX,
					TEST_NET(1), 0), 0);
	assert_int_equal(clanq_close(&dev), 0);
	/* teardown deletes them */
}

/* Run cmd (stderr too) into out; its exit status, or -1. No asserts. */
static int run(const char *cmd, char *out, size_t size)
{
	char full[512], drain[256];
	size_t n = 0, got;
	FILE *f;
	int st;

	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	f = popen(full, "r");
	if (!f)
		return -1;
	while (n + 1 < size && (got = fread(out + n, 1, size - 1 - n, f)) > 0)
		n += got;
	out[n] = '\0';
	while (fread(drain, 1, sizeof(drain), f) > 0)
		;
	st = pclose(f);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A clanqctl run: its status is want and its output holds what. */
static void ctl_says(const char *args, int want, const char *what)
{
	char cmd[256], out[8192];
	int st;

	snprintf(cmd, sizeof(cmd), "clanqctl %s", args);
	st = run(cmd, out, sizeof(out));
	if (st != want || (what && !strstr(out, what)))
		fail_msg("'%s': status %d (want %d), output:\n%s\n(want '%s' in it)",
			 cmd, st, want, out, what ? what : "");
}

struct nobody_arg {
	uint32_t node;		/* a peer root added */
	uint32_t other;		/* a node that is none */
};

/* The child: nobody may list, not bind, add or delete; clanqctl says so. */
static void nobody_child(void *p)
{
	const struct nobody_arg *arg = p;
	struct clanq_peer_stat got[4];
	struct clanq_ioc_wire_bind b;
	struct clanq_ioc_peer a;
	struct clanq_dev dev;
	unsigned int total;
	char cmd[128], out[4096];

	itest_become_nobody();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);

	memset(&b, 0, sizeof(b));
	strcpy(b.dev, NO_SUCH_DEV);
	b.port = 1;
	CHILD_CHECK_INT(bind_ioctl(dev.fd, &b), -EPERM);
	memset(&b, 0, sizeof(b));
	CHILD_CHECK_INT(bind_ioctl(dev.fd, &b), -EPERM);	/* unbind too */
	a = peer_arg(arg->other, TEST_NET(9), 0);
	CHILD_CHECK_INT(peer_ioctl(dev.fd, CLANQ_IOC_PEER_ADD, &a), -EPERM);
	a = peer_arg(arg->node, 0, 0);
	CHILD_CHECK_INT(peer_ioctl(dev.fd, CLANQ_IOC_PEER_DEL, &a), -EPERM);
	CHILD_CHECK_INT(clanq_peer_del(&dev, arg->node), -EPERM);

	/* listing is for everyone, and shows root's peer still there */
	CHILD_CHECK_INT(clanq_peer_list(&dev, got, 4, &total), 1);
	CHILD_CHECK_INT(total, 1);
	CHILD_CHECK_INT(got[0].node, arg->node);
	CHILD_CHECK_INT(got[0].state, CLANQ_PEER_IDLE);
	clanq_close(&dev);

	/* clanqctl: the same, in words */
	snprintf(cmd, sizeof(cmd), "clanqctl -d clanq0 peer add %u 192.0.2.9", arg->other);
	CHILD_CHECK_INT(run(cmd, out, sizeof(out)), 1);
	if (!strstr(out, "needs CAP_NET_ADMIN"))
		CHILD_FAIL("'%s' said: %s", cmd, out);
	snprintf(cmd, sizeof(cmd), "clanqctl -d 0 peer del %u", arg->node);
	CHILD_CHECK_INT(run(cmd, out, sizeof(out)), 1);
	if (!strstr(out, "needs CAP_NET_ADMIN"))
		CHILD_FAIL("'%s' said: %s", cmd, out);
	CHILD_CHECK_INT(run("clanqctl unbind", out, sizeof(out)), 1);
	if (!strstr(out, "needs CAP_NET_ADMIN"))
		CHILD_FAIL("'clanqctl unbind' said: %s", out);
	snprintf(cmd, sizeof(cmd), "clanqctl -d /dev/clanq0 peer show");
	CHILD_CHECK_INT(run(cmd, out, sizeof(out)), 0);
	snprintf(cmd, sizeof(cmd), "peer %u 192.0.2.8:", arg->node);
	if (!strstr(out, cmd))
		CHILD_FAIL("clanqctl peer show lists no '%s': %s", cmd, out);
}

/* 6. Without CAP_NET_ADMIN: -EPERM for every change, and a list. */
static void changes_need_cap_net_admin_listing_does_not(void **state)
{
	struct nodes n = host_nodes();
	struct nobody_arg arg = { .node = n.remote, .other = n.remote + 1 };
	struct clanq_dev dev;
	pid_t child;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_peer_add(&dev, arg.node, TEST_NET(8), 0), 0);
	child = itest_fork(nobody_child, &arg);
	assert_true(itest_status_ok(itest_wait(child, 60 * ITEST_NS_PER_S), "nobody"));
	/* nothing the child tried took */
	assert_int_equal(peers_total(&dev), 1);
	assert_int_equal(recs[0].node, arg.node);
	assert_int_equal(clanq_peer_del(&dev, arg.node), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

/* 7. clanqctl as root: its changes, its words for refusals, its usage. */
static void clanqctl_does_and_says(void **state)
{
	struct nodes n = host_nodes();
	unsigned long verbs_port = wire_port();
	struct clanq_dev dev;
	char args[128], want[160];
	unsigned int total;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);

	ctl_says("", 0, "verbs unbound");
	snprintf(want, sizeof(want), "clanq0: node %u", n.local[0]);
	ctl_says("show", 0, want);
	snprintf(want, sizeof(want), "clanq1: node %u", n.local[1]);
	ctl_says("show", 0, want);
	ctl_says("-d clanq1 show", 0, "no peers");

	/* add, with and without a port */
	snprintf(args, sizeof(args), "peer add %u 192.0.2.7:4000", n.remote);
	ctl_says(args, 0, NULL);
	snprintf(args, sizeof(args), "-d 0 peer add %u 192.0.2.8", n.remote + 1);
	ctl_says(args, 0, NULL);
	assert_int_equal(clanq_peer_list(&dev, recs, CLANQ_PEERS_MAX, &total), 2);
	assert_int_equal(recs[0].node, n.remote);
	assert_int_equal(recs[0].ipv4, TEST_NET(7));
	assert_int_equal(recs[0].port, 4000);
	assert_int_equal(recs[1].ipv4, TEST_NET(8));
	assert_int_equal(recs[1].port, verbs_port);
	snprintf(want, sizeof(want), "peer %u 192.0.2.7:4000 idle", n.remote);
	ctl_says("-d clanq0 peer", 0, want);
	ctl_says("peer show", 0, want);
	snprintf(want, sizeof(want), "peer %u 192.0.2.8:%lu idle", n.remote + 1, verbs_port);
	ctl_says("-d /dev/clanq0 show", 0, want);

	/* refusals, in words */
	snprintf(args, sizeof(args), "peer add %u 192.0.2.9", n.remote);
	snprintf(want, sizeof(want),
		 "clanqctl: peer add %u: node %u is already a peer of clanq0 (File exists)",
		 n.remote, n.remote);
	ctl_says(args, 1, want);
	snprintf(args, sizeof(args), "-d clanq1 peer add %u 192.0.2.9", n.local[0]);
	snprintf(want, sizeof(want), "node %u is clanq0, a NIC of this host", n.local[0]);
	ctl_says(args, 1, want);
	snprintf(args, sizeof(args), "peer del %u", n.remote + 2);
	snprintf(want, sizeof(want), "node %u is not a peer of clanq0", n.remote + 2);
	ctl_says(args, 1, want);
	ctl_says("bind " NO_SUCH_DEV, 1, "no such RDMA device");
	ctl_says("-d 1 bind " NO_SUCH_DEV " port 2", 1, "(No such device)");
	ctl_says("-d clanq7 show", 1, "no such NIC");
	ctl_says("unbind", 0, NULL);

	/* usage: 2, before the driver is asked */
	ctl_says("peer add 4294967295 192.0.2.1", 2, "not a node id");
	ctl_says("peer add 0x10 192.0.2.1", 2, "not a node id");
	ctl_says("peer add 10 224.0.0.1", 2, "multicast");
	ctl_says("peer add 10 255.255.255.255", 2, NULL);
	ctl_says("peer add 10 192.0.2.1:70000", 2, "not a port");
	ctl_says("peer add 10 192.0.2", 2, "not an IPv4 address");
	ctl_says("peer add 10", 2, NULL);
	ctl_says("peer del", 2, NULL);
	ctl_says("bind", 2, NULL);
	ctl_says("bind rxe0 port 0", 2, "not a port");
	ctl_says("-d eth0 show", 2, "not a NIC");
	ctl_says("frob", 2, "unknown command");
	ctl_says("--help", 0, "usage: clanqctl");

	/* deleted by clanqctl; nothing else changed */
	snprintf(args, sizeof(args), "peer del %u", n.remote);
	ctl_says(args, 0, NULL);
	snprintf(args, sizeof(args), "-d clanq0 peer del %u", n.remote + 1);
	ctl_says(args, 0, NULL);
	assert_int_equal(peers_total(&dev), 0);
	ctl_says("-d 0", 0, "no peers");
	assert_int_equal(clanq_close(&dev), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(bind_refuses_garbage_and_unknown_devices,
						setup, teardown),
		cmocka_unit_test_setup_teardown(peer_add_and_del_refuse_what_the_rules_forbid,
						setup, teardown),
		cmocka_unit_test_setup_teardown(peer_list_refuses_bad_counts_and_buffers,
						setup, teardown),
		cmocka_unit_test_setup_teardown(peers_round_trip_through_list_and_sysfs,
						setup, teardown),
		cmocka_unit_test_setup_teardown(one_peer_past_the_most_is_enospc,
						setup, teardown),
		cmocka_unit_test_setup_teardown(changes_need_cap_net_admin_listing_does_not,
						setup, teardown),
		cmocka_unit_test_setup_teardown(clanqctl_does_and_says, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
