// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-echo-client: N connections to an echo server, M messages of each
 * size S, one at a time in turn over the connections; every answer is
 * checked byte for byte. Prints round-trip statistics (perftest-style
 * columns) and the system calls (driver entries) each round trip cost.
 *
 * --poll: both calls with CLANQ_MSG_DONTWAIT in a loop: no system call.
 * --block: the receive blocks at once (no spin) on the tripwire on our
 * ring's tail: the wake-up path, as a server's idle clients see it.
 * --idle N holds N more connections open, unused, while it measures
 * (the paper's Figure 5), and says what an idle connection costs.
 */
#define _GNU_SOURCE
#include <getopt.h>

#include <clanq.h>
#include <clanq/admin.h>
#include <clanq/net.h>

#include "example.h"
#include "../bench/bench_stats.h"

#define MAX_SIZES	16

struct client {
	struct clanq_net *net;
	struct clanq_conn **conns;
	unsigned int nr;
	unsigned int flags;	/* CLANQ_MSG_DONTWAIT when polling */
	uint8_t *out, *in;
};

static void usage(void)
{
	printf("usage: %s [options]\n"
	       "Round trips to clanq-echo-server, checked, with statistics.\n\n"
	       "  -n, --nic N          our /dev/clanqN (default 0)\n"
	       "  -N, --node NODE      the server's node (default 0)\n"
	       "  -s, --service S      the server's service (default 7)\n"
	       "  -c, --conns N        connections to use in turn (default 1)\n"
	       "  -m, --msgs M         round trips per size (default 10000)\n"
	       "  -S, --sizes LIST     message sizes, e.g. 8,1k (default 8)\n"
	       "  -p, --poll           poll (no system call; the default)\n"
	       "  -B, --block          block in the driver for every answer\n"
	       "      --idle N         hold N more connections open, idle\n"
	       "      --ring BYTES     each side's receive ring (default: one page)\n"
	       "      --rdma-threshold B  messages of B bytes or more by RDMA\n"
	       "      --rdma-only      every message by the RDMA engine\n"
	       "  -h, --help           this text\n\n"
	       "A refused connect is retried for 5 s (a server that is starting).\n"
	       "Exit status: 0 every answer right, 1 failed, 2 bad arguments.\n",
	       ex_prog);
}

static void fill(uint8_t *p, size_t len, uint64_t seq)
{
	uint64_t x = seq * 0x9e3779b97f4a7c15ull + len;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

/* One round trip on c: ns from the send to the answer's arrival. */
static uint64_t round_trip(struct client *cl, struct clanq_conn *c, size_t len)
{
	uint64_t t0, t1;
	ssize_t n;
	int err;

	t0 = clanq_now_ns();
	do {
		err = clanq_send(c, cl->out, len, cl->flags);
	} while (err == -EAGAIN);
	if (err)
		ex_fail("send", err);
	do {
		n = clanq_recv(c, cl->in, len, cl->flags);
	} while (n == -EAGAIN);
	t1 = clanq_now_ns();
	if (n == 0)
		ex_fail("recv: the server closed the connection", -EPIPE);
	if (n < 0)
		ex_fail("recv", (int)n);
	if ((size_t)n != len || memcmp(cl->in, cl->out, len)) {
		fprintf(stderr, "%s: the answer differs from the request (%zd of %zu bytes)\n",
			ex_prog, n, len);
		exit(EX_FAIL);
	}
	return t1 - t0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "node", required_argument, NULL, 'N' },
		{ "service", required_argument, NULL, 's' },
		{ "conns", required_argument, NULL, 'c' },
		{ "msgs", required_argument, NULL, 'm' },
		{ "sizes", required_argument, NULL, 'S' },
		{ "poll", no_argument, NULL, 'p' },
		{ "block", no_argument, NULL, 'B' },
		{ "idle", required_argument, NULL, 'I' },
		{ "ring", required_argument, NULL, 'R' },
		{ "rdma-threshold", required_argument, NULL, 'T' },
		{ "rdma-only", no_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long long sizes[MAX_SIZES] = { 8 }, msgs = 10000, idle = 0;
	unsigned int nic = 0, node = 0, service = 7, conns = 1, nr_sizes = 1;
	struct clanq_conn_opts co = { 0 };
	struct clanq_net_attr attr = { 0 };
	struct clanq_conn **idle_conns = NULL;
	struct client cl = { .flags = CLANQ_MSG_DONTWAIT };
	struct clanq_dev dev;
	size_t max_size = 0;
	double *v;
	int opt, err;

	ex_prog = "clanq-echo-client";
	while ((opt = getopt_long(argc, argv, "n:N:s:c:m:S:pBh", opts, NULL)) != -1) {
		switch (opt) {
		case 'n': nic = (unsigned int)ex_parse_num("--nic", optarg, 0, 255); break;
		case 'N': node = (unsigned int)ex_parse_num("--node", optarg, 0, 1u << 30); break;
		case 's': service = (unsigned int)ex_parse_num("--service", optarg, 1, 65535); break;
		case 'c': conns = (unsigned int)ex_parse_num("--conns", optarg, 1, 1u << 16); break;
		case 'm': msgs = ex_parse_num("--msgs", optarg, 1, 1ull << 28); break;
		case 'S': nr_sizes = ex_parse_list("--sizes", optarg, 1, 1ull << 29,
						   sizes, MAX_SIZES); break;
		case 'p': cl.flags = CLANQ_MSG_DONTWAIT; break;
		case 'B': cl.flags = 0; break;
		case 'I': idle = ex_parse_num("--idle", optarg, 0, 1u << 20); break;
		case 'R': co.rx_ring = co.tx_ring = (uint32_t)ex_parse_num("--ring", optarg,
									 64, 1u << 30); break;
		case 'T': co.rdma_threshold = (uint32_t)ex_parse_num("--rdma-threshold", optarg,
								    1, 1u << 30); break;
		case 'O': co.flags |= CLANQ_CONN_RDMA_ONLY; break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	if (optind < argc)
		ex_usage_error("unexpected argument '%s'", argv[optind]);
	for (unsigned int i = 0; i < nr_sizes; i++)
		if (sizes[i] > max_size)
			max_size = sizes[i];

	attr.max_conns = (unsigned int)(conns + idle);
	ex_open_net(&dev, &cl.net, nic, &attr);
	if (!cl.flags)
		clanq_net_set_spin(cl.net, 0);	/* --block: every answer through the driver */
	cl.conns = calloc(conns, sizeof(*cl.conns));
	idle_conns = calloc(idle ? idle : 1, sizeof(*idle_conns));
	cl.out = malloc(max_size);
	cl.in = malloc(max_size);
	v = calloc(msgs, sizeof(*v));
	if (!cl.conns || !idle_conns || !cl.out || !cl.in || !v)
		ex_fail("memory", -ENOMEM);

	for (unsigned int i = 0; i < conns; i++) {
		err = ex_connect(cl.net, &cl.conns[i], node, service, &co);
		if (err)
			ex_fail(err == -ECONNREFUSED ? "connect: refused (is the server there?)" :
				"connect", err);
		if (clanq_conn_max_msg(cl.conns[i]) < max_size) {
			fprintf(stderr, "%s: %zu bytes do not fit the ring (at most %zu: "
				"--ring %zu or more)\n", ex_prog, max_size,
				clanq_conn_max_msg(cl.conns[i]), 2 * max_size + 64);
			return EX_USAGE;
		}
	}
	if (idle) {
		/* what the idle ones cost, both ends (the server may be here too) */
		unsigned long long avail0 = ex_meminfo_kib("MemAvailable"), rss0 = ex_rss_kib();
		struct clanq_conn_opts io = { 0 };
		uint64_t t0 = clanq_now_ns();

		for (unsigned long long i = 0; i < idle; i++) {
			err = ex_connect(cl.net, &idle_conns[i], node, service, &io);
			if (err) {
				fprintf(stderr, "%s: idle connection %llu of %llu: %s\n",
					ex_prog, i + 1, idle, strerror(-err));
				return EX_FAIL;
			}
			if (idle >= 2000 && !((i + 1) % 1000))
				fprintf(stderr, "#   %llu of %llu idle connections, %.1f s\n",
					i + 1, idle, (double)(clanq_now_ns() - t0) / 1e9);
		}
		printf("# %llu idle connections opened in %.2f s: %.1f KiB of this kernel's "
		       "memory each (both ends, MemAvailable), %.1f KiB of this process's "
		       "(VmRSS)\n", idle, (double)(clanq_now_ns() - t0) / 1e9,
		       (double)(long long)(avail0 - ex_meminfo_kib("MemAvailable")) / (double)idle,
		       (double)(long long)(ex_rss_kib() - rss0) / (double)idle);
	}

	printf("# clanq-echo-client: node %u -> node %u service %u, %u connection%s%s, "
	       "%s, %s\n", dev.node, node, service, conns, conns > 1 ? "s" : "",
	       idle ? " (and the idle ones)" : "",
	       cl.flags ? "polling" : "blocking (no spin)",
	       co.flags & CLANQ_CONN_RDMA_ONLY ? "RDMA only" :
	       co.rdma_threshold ? "RDMA from the threshold" : "PIO");
	printf("%-8s %-10s %-12s %-10s %-10s %-10s %-10s %-10s %s\n", "#bytes",
	       "#iter", "t_min[usec]", "t_typical", "t_avg", "t_99%", "t_99.9%",
	       "t_max", "syscalls/rt");
	for (unsigned int s = 0; s < nr_sizes; s++) {
		size_t len = sizes[s];
		unsigned long long warm = msgs / 10 < 100 ? msgs / 10 : 100;
		uint64_t e0, e1;
		struct lat l;

		for (unsigned long long i = 0; i < warm; i++) {
			fill(cl.out, len, i);
			round_trip(&cl, cl.conns[i % conns], len);
		}
		(void)clanq_ctx_entries(&dev, &e0);
		for (unsigned long long i = 0; i < msgs; i++) {
			fill(cl.out, len, i + warm);
			v[i] = (double)round_trip(&cl, cl.conns[i % conns], len) / 1000.0;
		}
		(void)clanq_ctx_entries(&dev, &e1);
		l = lat_stats(v, (unsigned int)msgs);
		/* e1 - e0 counts our own second read of the counter */
		printf("%-8zu %-10llu %-12.2f %-10.2f %-10.2f %-10.2f %-10.2f %-10.2f %.3f\n",
		       len, msgs, l.min, l.med, l.avg, l.p99, l.p999, l.max,
		       (double)(e1 - e0 - 1) / (double)msgs);
		fflush(stdout);
	}

	for (unsigned int i = 0; i < conns; i++)
		clanq_conn_close(cl.conns[i]);
	clanq_net_close(cl.net);	/* and the idle ones */
	clanq_close(&dev);
	free(v);
	free(cl.in);
	free(cl.out);
	free(idle_conns);
	free(cl.conns);
	return 0;
}
