// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * shm_pingpong: the physical limit for a round trip between two
 * processes on one machine: a message copied into shared memory, a
 * sequence word release-stored after it, the peer spinning on that word,
 * copying the message out and back the same way. No library, no driver,
 * no system call. clanq-echo-client prints the same columns, so the two
 * can be read side by side (make run does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "shm_mailbox.h"
#include "../examples/example.h"

#define MAX_SIZES	16

static void usage(void)
{
	printf("usage: %s [-m MSGS] [-S SIZES]\n"
	       "Round trips between two processes through shared memory, spinning.\n\n"
	       "  -m, --msgs M       round trips per size (default 10000)\n"
	       "  -S, --sizes LIST   message sizes, e.g. 8,1k (default 8)\n"
	       "  -h, --help         this text\n", ex_prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "msgs", required_argument, NULL, 'm' },
		{ "sizes", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long long sizes[MAX_SIZES] = { 8 }, msgs = 10000, max = 0;
	unsigned int nr_sizes = 1;
	struct mailbox *ping, *pong;
	unsigned char *out, *in;
	size_t box;
	double *v;
	pid_t pid;
	int opt, status;

	ex_prog = "shm_pingpong";
	while ((opt = getopt_long(argc, argv, "m:S:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'm': msgs = ex_parse_num("--msgs", optarg, 1, 1ull << 28); break;
		case 'S': nr_sizes = ex_parse_list("--sizes", optarg, 1, 1ull << 28,
						   sizes, MAX_SIZES); break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	if (optind < argc)
		ex_usage_error("unexpected argument '%s'", argv[optind]);
	for (unsigned int i = 0; i < nr_sizes; i++)
		max = sizes[i] > max ? sizes[i] : max;
	box = mailbox_size(max);
	ping = mmap(NULL, 2 * box, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	out = malloc(max);
	in = malloc(max);
	v = calloc(msgs, sizeof(*v));
	if (ping == MAP_FAILED || !out || !in || !v)
		ex_fail("memory", -ENOMEM);
	pong = (struct mailbox *)((char *)ping + box);

	pid = fork();
	if (pid < 0)
		ex_fail("fork", -errno);
	if (pid == 0) {	/* the echo side: every message back as it came */
		unsigned char *buf = malloc(max);

		for (uint64_t seq = 1; buf; seq++) {
			size_t len = mailbox_get(ping, buf, max, seq);

			if (!len)
				_exit(0);
			mailbox_put(pong, buf, len, seq);
		}
		_exit(1);
	}

	printf("# shm_pingpong: two processes, shared memory, spinning (the physical limit)\n");
	printf("%-8s %-10s %-12s %-10s %-10s %-10s %-10s %-10s %s\n", "#bytes",
	       "#iter", "t_min[usec]", "t_typical", "t_avg", "t_99%", "t_99.9%",
	       "t_max", "syscalls/rt");
	uint64_t seq = 0;

	for (unsigned int s = 0; s < nr_sizes; s++) {
		size_t len = sizes[s];
		unsigned long long warm = msgs / 10 < 100 ? msgs / 10 : 100;
		struct lat l;

		for (unsigned long long i = 0; i < warm + msgs; i++) {
			uint64_t t0;

			memset(out, (int)(i & 0xff), len);
			t0 = clanq_now_ns();
			mailbox_put(ping, out, len, ++seq);
			if (mailbox_get(pong, in, max, seq) != len || memcmp(in, out, len)) {
				fprintf(stderr, "%s: the answer differs\n", ex_prog);
				kill(pid, SIGKILL);
				return EX_FAIL;
			}
			if (i >= warm)
				v[i - warm] = (double)(clanq_now_ns() - t0) / 1000.0;
		}
		l = lat_stats(v, (unsigned int)msgs);
		printf("%-8zu %-10llu %-12.2f %-10.2f %-10.2f %-10.2f %-10.2f %-10.2f %.3f\n",
		       len, msgs, l.min, l.med, l.avg, l.p99, l.p999, l.max, 0.0);
		fflush(stdout);
	}
	mailbox_put(ping, out, 0, ++seq);	/* length 0: the end */
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : EX_FAIL;
}
