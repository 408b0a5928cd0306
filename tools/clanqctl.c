// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanqctl: a clanq NIC's wires to other hosts, as `ip` and `rdma link`
 * show and set a machine's: the verbs wire's RDMA device (bind, unbind)
 * and the peers it reaches (peer add, del, show).
 *
 * The binding comes from sysfs, /sys/class/misc/clanqN/verbs, the peers
 * and their connections' state from CLANQ_IOC_PEER_LIST: both for every
 * user. Binding and naming peers (CLANQ_IOC_WIRE_BIND, PEER_ADD,
 * PEER_DEL) need CAP_NET_ADMIN.
 *
 * Exit status: 0; 1 the driver refused or a NIC could not be read; 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clanq.h>
#include <clanq/admin.h>

#include "clanqctl.h"

#define SYSFS	"/sys/class/misc"

static const char *prog = "clanqctl";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-d NIC] [show]\n"
		"       %s [-d NIC] bind DEV [port N]\n"
		"       %s [-d NIC] unbind\n"
		"       %s [-d NIC] peer add NODE ADDR[:PORT]\n"
		"       %s [-d NIC] peer del NODE\n"
		"       %s [-d NIC] peer [show]\n"
		"  A clanq NIC's verbs wire: the RDMA device its traffic to other\n"
		"  hosts leaves through, and the nodes on other hosts it reaches.\n"
		"  -d, --device NIC  clanqN, N or " CLANQ_DEV_PREFIX "N (default: every NIC\n"
		"                    for show, clanq0 for a change)\n"
		"  show              per NIC: node id, verbs binding, peers and their state\n"
		"  bind DEV [port N] traffic to other hosts through RDMA device DEV\n"
		"                    (as `rdma link` names it), port N (default 1)\n"
		"  unbind            no verbs wire: every connection to other hosts closes\n"
		"  peer add NODE ADDR[:PORT]\n"
		"                    node NODE is a clanq NIC at IPv4 ADDR, port PORT\n"
		"                    (default: the verbs wire's, clanq_verbs port=)\n"
		"  peer del NODE     forget it; its connection closes\n"
		"  peer [show]       the peers only\n"
		"bind, unbind, peer add and peer del need CAP_NET_ADMIN.\n"
		"Exit status: 0; 1 an error; 2 usage.\n",
		prog, prog, prog, prog, prog, prog);
}

/* A usage error: say what, then exit 2. */
__attribute__((noreturn, format(printf, 1, 2)))
static void bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(%s --help: usage)\n", prog);
	exit(2);
}

static int open_nic(unsigned int index, struct clanq_dev *dev)
{
	char path[32], why[256];
	int err;

	snprintf(path, sizeof(path), CLANQ_DEV_PREFIX "%u", index);
	err = clanq_open(dev, path);
	if (err) {
		clanq_open_explain(path, err, why, sizeof(why));
		fprintf(stderr, "%s: %s\n", prog, why);
	}
	return err;
}

/* A file of the NIC's sysfs directory, its first line. */
static int read_sysfs(unsigned int index, const char *file, char *buf, size_t len)
{
	char path[128];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), SYSFS "/clanq%u/%s", index, file);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Why the driver refused a change, in words; NULL: strerror() will do. */
static const char *change_refused(int err)
{
	switch (err) {
	case -EPERM:
		return "needs CAP_NET_ADMIN (run as root)";
	case -ENOTTY:
		return "this clanq.ko has no verbs wire (an older driver?)";
	}
	return NULL;
}

/* "clanqctl: peer add 20: node 20 is already a peer of clanq0 (File exists)" */
static void report(const char *what, const char *why, int err)
{
	if (err == -EPERM)	/* the advice says it all */
		fprintf(stderr, "%s: %s: %s\n", prog, what, why);
	else
		fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, why, strerror(-err));
}

/* --- show ------------------------------------------------------------------ */

static struct clanq_peer_stat peers[CLANQ_PEERS_MAX];

static void show_peer(const struct clanq_peer_stat *p)
{
	char line[256];

	clanq_peer_describe(p, line, sizeof(line));
	printf("    %s\n", line);
}

/* One NIC: node, binding (unless peers_only), peers. 0 or 1. */
static int show_nic(unsigned int index, bool peers_only)
{
	struct ctl_verbs v;
	struct clanq_dev dev;
	unsigned int total = 0;
	char line[256];
	const char *why;
	int n, err, status = 0;

	if (open_nic(index, &dev))
		return 1;
	printf("clanq%u: node %u\n", index, dev.node);
	if (!peers_only) {
		err = read_sysfs(index, "verbs", line, sizeof(line));
		why = err ? strerror(-err) : ctl_parse_verbs(line, &v);
		if (why) {
			fprintf(stderr, "%s: %s/clanq%u/verbs: %s\n", prog, SYSFS, index, why);
			printf("    verbs ?\n");
			status = 1;
		} else if (!v.bound) {
			printf("    verbs unbound\n");
		} else if (!strcmp(v.from, "-")) {
			printf("    verbs %s port %u (no connection made yet)\n",
			       v.dev, v.port);
		} else {
			printf("    verbs %s port %u, from %s\n", v.dev, v.port, v.from);
		}
	}
	n = clanq_peer_list(&dev, peers, CLANQ_PEERS_MAX, &total);
	if (n < 0) {
		fprintf(stderr, "%s: clanq%u: listing the peers: %s (%s)\n", prog, index,
			n == -ENOTTY ? "this clanq.ko has no verbs wire" : "refused",
			strerror(-n));
		printf("    peers ?\n");
		status = 1;
	} else if (!n) {
		printf("    no peers\n");
	} else {
		for (int i = 0; i < n; i++)
			show_peer(&peers[i]);
	}
	clanq_close(&dev);
	return status;
}

static int cmd_show(int nic, bool peers_only)
{
	struct clanq_dev dev;
	unsigned int nr;
	int status = 0;

	if (nic >= 0)
		return show_nic((unsigned int)nic, peers_only);
	/* every NIC: clanq0 says how many there are */
	if (open_nic(0, &dev))
		return 1;
	nr = dev.nr_nics;
	clanq_close(&dev);
	for (unsigned int i = 0; i < nr; i++)
		status |= show_nic(i, peers_only);
	return status;
}

/* --- changes --------------------------------------------------------------- */

static int cmd_bind(unsigned int nic, const char *rdma_dev, unsigned int port)
{
	struct clanq_dev dev;
	char what[128];
	const char *why;
	int err;

	if (open_nic(nic, &dev))
		return 1;
	err = clanq_wire_bind(&dev, rdma_dev, port);
	clanq_close(&dev);
	if (!err)
		return 0;
	if (rdma_dev)
		snprintf(what, sizeof(what), "bind %s port %u", rdma_dev, port);
	else
		snprintf(what, sizeof(what), "unbind");
	why = change_refused(err);
	if (!why && err == -ENODEV)
		why = "no such RDMA device (`rdma link` lists them)";
	if (!why && err == -EINVAL && rdma_dev)
		why = "the device has no such port (`rdma link` lists them)";
	if (!why)
		why = "refused";
	report(what, why, err);
	return 1;
}

/* The local NIC whose node is @node, or -1. */
static int local_nic_of(uint32_t node, unsigned int nr_nics)
{
	unsigned long long v;
	char buf[32], *end;

	for (unsigned int i = 0; i < nr_nics; i++) {
		if (read_sysfs(i, "node", buf, sizeof(buf)))
			continue;
		v = strtoull(buf, &end, 10);
		if (end != buf && !*end && v == node)
			return (int)i;
	}
	return -1;
}

static int cmd_peer_add(unsigned int nic, const char *node_s, uint32_t node,
			uint32_t ipv4_be, unsigned int port)
{
	struct clanq_dev dev;
	char what[128], why_buf[128];
	const char *why;
	int err, local;

	if (open_nic(nic, &dev))
		return 1;
	err = clanq_peer_add(&dev, node, ipv4_be, port);
	local = err == -EINVAL ? local_nic_of(node, dev.nr_nics) : -1;
	clanq_close(&dev);
	if (!err)
		return 0;
	snprintf(what, sizeof(what), "peer add %s", node_s);
	why = change_refused(err);
	if (!why) {
		switch (err) {
		case -EEXIST:
			snprintf(why_buf, sizeof(why_buf), "node %u is already a peer of clanq%u",
				 node, nic);
			break;
		case -ENOSPC:
			snprintf(why_buf, sizeof(why_buf), "clanq%u has %u peers, the most it may",
				 nic, CLANQ_PEERS_MAX);
			break;
		case -EINVAL:
			if (local >= 0)
				snprintf(why_buf, sizeof(why_buf),
					 "node %u is clanq%d, a NIC of this host", node, local);
			else
				snprintf(why_buf, sizeof(why_buf),
					 "node %u or its address is not one a peer can have", node);
			break;
		default:
			snprintf(why_buf, sizeof(why_buf), "refused");
		}
		why = why_buf;
	}
	report(what, why, err);
	return 1;
}

static int cmd_peer_del(unsigned int nic, const char *node_s, uint32_t node)
{
	struct clanq_dev dev;
	char what[64], why_buf[96];
	const char *why;
	int err;

	if (open_nic(nic, &dev))
		return 1;
	err = clanq_peer_del(&dev, node);
	clanq_close(&dev);
	if (!err)
		return 0;
	snprintf(what, sizeof(what), "peer del %s", node_s);
	why = change_refused(err);
	if (!why) {
		if (err == -ENOENT)
			snprintf(why_buf, sizeof(why_buf), "node %u is not a peer of clanq%u",
				 node, nic);
		else
			snprintf(why_buf, sizeof(why_buf), "refused");
		why = why_buf;
	}
	report(what, why, err);
	return 1;
}

/* --- arguments ------------------------------------------------------------- */

/* argv[0..argc) after "peer" */
static int peer_command(int nic, int argc, char **argv)
{
	unsigned int index = nic < 0 ? 0 : (unsigned int)nic;
	unsigned int port;
	const char *why;
	uint32_t node, ipv4;

	if (!argc || !strcmp(argv[0], "show") || !strcmp(argv[0], "list")) {
		if (argc > 1)
			bad_usage("peer show: unexpected argument '%s'", argv[1]);
		return cmd_show(nic, true);
	}
	if (!strcmp(argv[0], "add")) {
		if (argc != 3)
			bad_usage("peer add: NODE ADDR[:PORT], e.g. 'peer add 20 192.0.2.7'");
		why = ctl_parse_node(argv[1], &node);
		if (why)
			bad_usage("peer add: NODE '%s': %s", argv[1], why);
		why = ctl_parse_addr(argv[2], &ipv4, &port);
		if (why)
			bad_usage("peer add %s: ADDR '%s': %s", argv[1], argv[2], why);
		return cmd_peer_add(index, argv[1], node, ipv4, port);
	}
	if (!strcmp(argv[0], "del") || !strcmp(argv[0], "delete")) {
		if (argc != 2)
			bad_usage("peer del: NODE, e.g. 'peer del 20'");
		why = ctl_parse_node(argv[1], &node);
		if (why)
			bad_usage("peer del: NODE '%s': %s", argv[1], why);
		return cmd_peer_del(index, argv[1], node);
	}
	bad_usage("peer: unknown command '%s' (add, del, show)", argv[0]);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned int index, port = 1;
	const char *why, *cmd;
	int c, nic = -1;

	/* '+': options end at the command, as ip's do */
	while ((c = getopt_long(argc, argv, "+d:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			why = ctl_parse_nic(optarg, &index);
			if (why)
				bad_usage("-d '%s': %s", optarg, why);
			nic = (int)index;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	cmd = argc ? argv[0] : "show";
	index = nic < 0 ? 0 : (unsigned int)nic;

	if (!strcmp(cmd, "show")) {
		if (argc > 1)
			bad_usage("show: unexpected argument '%s'", argv[1]);
		return cmd_show(nic, false);
	}
	if (!strcmp(cmd, "bind")) {
		if (argc != 2 && argc != 4)
			bad_usage("bind: DEV [port N], e.g. 'bind rxe0 port 1'");
		why = ctl_check_rdma_dev(argv[1]);
		if (why)
			bad_usage("bind: DEV '%s': %s", argv[1], why);
		if (argc == 4) {
			if (strcmp(argv[2], "port"))
				bad_usage("bind %s: unexpected argument '%s' (port N)",
					  argv[1], argv[2]);
			why = ctl_parse_port(argv[3], &port);
			if (why)
				bad_usage("bind %s: port '%s': %s", argv[1], argv[3], why);
		}
		return cmd_bind(index, argv[1], port);
	}
	if (!strcmp(cmd, "unbind")) {
		if (argc > 1)
			bad_usage("unbind: unexpected argument '%s'", argv[1]);
		return cmd_bind(index, NULL, 0);
	}
	if (!strcmp(cmd, "peer"))
		return peer_command(nic, argc - 1, argv + 1);
	bad_usage("unknown command '%s' (show, bind, unbind, peer)", cmd);
}
