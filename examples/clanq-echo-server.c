// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-echo-server: the paper's server. One thread, every connection on
 * one event queue (clanq_net_wait()), each message sent back as it came.
 * After each request it spins up to --spin-us (15 us) for the next one
 * before it arms the idle connections' tripwires and blocks.
 *
 * Messages are echoed in place (clanq_recv_peek(): no copy out of the
 * ring); a connection whose peer has no room for the answer keeps its
 * message until credit comes back (CLANQ_NET_OUT), so one slow client
 * never stalls the others.
 *
 * On SIGINT/SIGTERM, at --seconds or after --conns connections have come
 * and gone, it prints per-connection and total counters and exits 0.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/admin.h>
#include <clanq/net.h>

#include "example.h"

struct echo_conn {
	struct clanq_conn *c;	/* NULL while free */
	unsigned int id;	/* accept order */
	bool stalled;		/* an answer waits for credit */
	struct echo_conn *next_free;
};

struct server {
	struct clanq_net *net;
	struct clanq_listener *l;
	struct echo_conn *pool, *free;	/* max_conns of them */
	unsigned int max_conns;
	unsigned int open, accepted, closed, reset, verbose;
	uint64_t msgs, bytes, stalls, rdma, waits;
	/* totals of the connections that are gone */
	uint64_t gone_in, gone_out, gone_bytes;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(void)
{
	printf("usage: %s [options]\n"
	       "The paper's echo server: one thread, all connections on one event queue.\n\n"
	       "  -n, --nic N         serve on /dev/clanqN (default 0)\n"
	       "  -s, --service S     service number to listen on, 1..65535 (default 7)\n"
	       "  -c, --max-conns N   connections at once (default 1024)\n"
	       "  -b, --backlog N     connections waiting for accept (default 128)\n"
	       "      --spin-us US    spin this long for the next request before\n"
	       "                      blocking (default 15, as the paper's server)\n"
	       "  -t, --seconds S     stop after S seconds (default: run until a signal)\n"
	       "  -x, --conns N       stop once N connections have come and gone\n"
	       "  -v, --verbose       a line for every connection that closes\n"
	       "  -h, --help          this text\n\n"
	       "Prints per-connection and total counters on SIGINT/SIGTERM or exit.\n"
	       "Exit status: 0 served, 1 failed, 2 bad arguments.\n", ex_prog);
}

static void print_conn(const char *state, const struct echo_conn *e)
{
	struct clanq_addr peer = clanq_conn_peer(e->c);
	struct clanq_conn_stats st;

	clanq_conn_stats(e->c, &st);
	printf("  conn %-6u %-7s peer %u:%-5u in %-9llu out %-9llu bytes %-12llu "
	       "rdma %-6llu credit-waits %llu\n", e->id, state, peer.node,
	       peer.id, (unsigned long long)st.msgs_in,
	       (unsigned long long)st.msgs_out, (unsigned long long)st.bytes_in,
	       (unsigned long long)st.rdma_sends,
	       (unsigned long long)st.credit_waits);
}

static void conn_gone(struct server *s, struct echo_conn *e, const char *why)
{
	struct clanq_conn_stats st;

	if (s->verbose)
		print_conn(why, e);
	clanq_conn_stats(e->c, &st);
	s->gone_in += st.msgs_in;
	s->gone_out += st.msgs_out;
	s->gone_bytes += st.bytes_in;
	s->rdma += st.rdma_sends;
	clanq_conn_close(e->c);
	e->c = NULL;
	e->next_free = s->free;
	s->free = e;
	s->open--;
	s->closed++;
}

static void do_accept(struct server *s)
{
	struct echo_conn *e;
	int err;

	for (;;) {
		e = s->free;
		if (!e)
			return;	/* at max_conns: they wait in the backlog */
		err = clanq_accept(s->l, &e->c, NULL, 0);
		if (err == -EAGAIN)
			return;
		if (err) {
			fprintf(stderr, "%s: accept: %s\n", ex_prog, strerror(-err));
			return;
		}
		s->free = e->next_free;
		e->id = s->accepted++;
		e->stalled = false;
		clanq_conn_set_cookie(e->c, (uint64_t)(uintptr_t)e);
		s->open++;
	}
}

/* Echo what c has, in place, until it is drained or the answer stalls. */
static void do_echo(struct server *s, struct echo_conn *e)
{
	const void *data;
	ssize_t n;
	int err;

	for (;;) {
		n = clanq_recv_peek(e->c, &data, CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n == 0) {
			conn_gone(s, e, "closed");
			return;
		}
		if (n < 0) {
			if (n != -ECONNRESET)
				fprintf(stderr, "%s: conn %u: %s\n", ex_prog, e->id,
					strerror((int)-n));
			s->reset++;
			conn_gone(s, e, "reset");
			return;
		}
		err = clanq_send(e->c, data, (size_t)n, CLANQ_MSG_DONTWAIT);
		if (err == -EAGAIN) {
			/* keep it peeked; CLANQ_NET_OUT says when to retry */
			if (!e->stalled)
				s->stalls++;
			e->stalled = true;
			return;
		}
		e->stalled = false;
		clanq_recv_done(e->c);
		if (err) {
			s->reset++;
			conn_gone(s, e, "reset");
			return;
		}
		s->msgs++;
		s->bytes += (uint64_t)n;
	}
}

static void report(struct server *s, double secs, uint64_t entries)
{
	struct clanq_addr where = clanq_listener_addr(s->l);
	struct clanq_listener_stats ls;
	struct clanq_net_stats ns;
	struct rusage ru;
	double cpu_us;
	uint64_t in = s->gone_in, out = s->gone_out, bytes = s->gone_bytes;
	unsigned int shown = 0;

	getrusage(RUSAGE_SELF, &ru);
	cpu_us = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
		 (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
	clanq_net_stats(s->net, &ns);
	clanq_listener_stats(s->l, &ls);
	printf("# clanq-echo-server on node %u service %u: %.1f s\n",
	       where.node, where.id, secs);
	if (s->open)
		printf("# open connections%s:\n", s->open > 20 ? " (first 20)" : "");
	/* the pool holds every connection the server has open (all accepted) */
	for (uint32_t i = 0; i < s->max_conns; i++) {
		struct echo_conn *e = &s->pool[i];
		struct clanq_conn_stats st;

		if (!e->c || clanq_conn_state(e->c) == CLANQ_CONN_CONNECTING)
			continue;
		clanq_conn_stats(e->c, &st);
		in += st.msgs_in;
		out += st.msgs_out;
		bytes += st.bytes_in;
		if (shown++ < 20 || s->verbose)
			print_conn("open", e);
	}
	printf("total: %u accepted, %u open, %u closed (%u reset), %llu messages in, "
	       "%llu echoed, %llu bytes, %llu answers waited for credit\n",
	       s->accepted, s->open, s->closed, s->reset, (unsigned long long)in,
	       (unsigned long long)out, (unsigned long long)bytes,
	       (unsigned long long)s->stalls);
	printf("net: %llu tripwires armed, %llu blocks, %llu OOB messages ignored "
	       "(duplicates, stale, forged), "
	       "%llu refused\n", (unsigned long long)ns.arms,
	       (unsigned long long)ns.blocks,
	       (unsigned long long)(ns.ignored + ls.ignored),
	       (unsigned long long)(ns.refused + ls.refused));
	if (s->msgs)
		printf("per message: %.3f system calls (%llu driver entries, accepts "
		       "and closes included, for %llu messages); server CPU %.2f s "
		       "in all (spinning included)\n",
		       (double)entries / (double)s->msgs, (unsigned long long)entries,
		       (unsigned long long)s->msgs, cpu_us / 1e6);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "service", required_argument, NULL, 's' },
		{ "max-conns", required_argument, NULL, 'c' },
		{ "backlog", required_argument, NULL, 'b' },
		{ "spin-us", required_argument, NULL, 'S' },
		{ "seconds", required_argument, NULL, 't' },
		{ "conns", required_argument, NULL, 'x' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned int nic = 0, service = 7, max_conns = 1024, backlog = 128;
	unsigned long long spin_us = 15, seconds = 0, exit_after = 0;
	struct clanq_net_event evs[64];
	struct clanq_net_attr attr = { 0 };
	struct server s = { 0 };
	struct sigaction sa = { 0 };
	struct clanq_dev dev;
	uint64_t e0 = 0, e1 = 0, t0, deadline;
	int opt, err, n;

	ex_prog = "clanq-echo-server";
	while ((opt = getopt_long(argc, argv, "n:s:c:b:t:x:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'n': nic = (unsigned int)ex_parse_num("--nic", optarg, 0, 255); break;
		case 's': service = (unsigned int)ex_parse_num("--service", optarg, 1, 65535); break;
		case 'c': max_conns = (unsigned int)ex_parse_num("--max-conns", optarg, 1, 1u << 20); break;
		case 'b': backlog = (unsigned int)ex_parse_num("--backlog", optarg, 1, 65536); break;
		case 'S': spin_us = ex_parse_num("--spin-us", optarg, 0, 10000000); break;
		case 't': seconds = ex_parse_num("--seconds", optarg, 1, 1ull << 32); break;
		case 'x': exit_after = ex_parse_num("--conns", optarg, 1, 1ull << 32); break;
		case 'v': s.verbose = 1; break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	if (optind < argc)
		ex_usage_error("unexpected argument '%s'", argv[optind]);

	sa.sa_handler = on_signal;	/* no SA_RESTART: the wait returns -EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	attr.max_conns = max_conns;
	ex_open_net(&dev, &s.net, nic, &attr);
	clanq_net_set_spin(s.net, spin_us * 1000);
	err = clanq_listen(s.net, &s.l, service, backlog);
	if (err)
		ex_fail(err == -EADDRINUSE ? "listen: service taken" : "listen", err);
	s.max_conns = max_conns;
	s.pool = calloc(max_conns, sizeof(*s.pool));
	if (!s.pool)
		ex_fail("connection table", -ENOMEM);
	for (unsigned int i = max_conns; i-- > 0;) {
		s.pool[i].next_free = s.free;
		s.free = &s.pool[i];
	}
	printf("# clanq-echo-server: node %u service %u, up to %u connections, "
	       "spin %llu us\n", dev.node, service, max_conns, spin_us);
	fflush(stdout);

	(void)clanq_ctx_entries(&dev, &e0);
	t0 = clanq_now_ns();
	deadline = seconds ? t0 + seconds * 1000000000ull : ~0ull;
	while (!stop && (!exit_after || s.closed < exit_after)) {
		/* a clock read costs ~60 ns in the VM: only with a deadline */
		uint64_t now = seconds ? clanq_now_ns() : 0;

		if (now >= deadline)
			break;
		n = clanq_net_wait(s.net, evs, 64,
				   deadline == ~0ull ? -1 : (int64_t)(deadline - now));
		if (n == -EINTR || n == -ETIMEDOUT)
			continue;
		if (n < 0)
			ex_fail("wait", n);
		for (int i = 0; i < n; i++) {
			struct echo_conn *e;

			if (evs[i].what & CLANQ_NET_ACCEPT) {
				do_accept(&s);
				continue;
			}
			if (!evs[i].conn)
				continue;
			e = (struct echo_conn *)(uintptr_t)clanq_conn_get_cookie(evs[i].conn);
			if (e->stalled && !(evs[i].what & (CLANQ_NET_OUT | CLANQ_NET_HUP)))
				continue;	/* its answer still waits for credit */
			if (evs[i].what & (CLANQ_NET_IN | CLANQ_NET_OUT | CLANQ_NET_HUP))
				do_echo(&s, e);
		}
	}
	(void)clanq_ctx_entries(&dev, &e1);
	/* the entry counter counts our own read of it too: not a message's */
	report(&s, (double)(clanq_now_ns() - t0) / 1e9, e1 - e0 - 1);
	fflush(stdout);
	/* closes the open connections too: each peer reads end of stream */
	clanq_net_close(s.net);
	clanq_close(&dev);
	free(s.pool);
	return 0;
}
