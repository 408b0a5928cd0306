// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-echo-server: the paper's server. One thread, every connection on
 * one event queue (clanq_net_wait()), each message sent back as it came.
 * After each request it spins up to --spin-us (15 us) for the next one
 * before it arms the idle connections' tripwires and blocks.
 *
 * With --threads N, N such threads, each with a net (and a context) of
 * its own, listen on the one service with CLANQ_LISTEN_SHARED: the
 * driver spreads the connections over them (as SO_REUSEPORT does), and
 * no thread ever takes a lock or touches another's connections.
 *
 * Messages are echoed in place (clanq_recv_peek(): no copy out of the
 * ring); a connection whose peer has no room for the answer keeps its
 * message until credit comes back (CLANQ_NET_OUT), muted for its
 * requests meanwhile (clanq_conn_want()), so one slow client never
 * stalls the others and never makes the loop spin.
 *
 * On SIGINT/SIGTERM, at --seconds or after --conns connections have come
 * and gone, it prints per-connection and total counters and exits 0.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
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
	pthread_t thread;
	unsigned int index;	/* of --threads */
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_listener *l;
	uint64_t entries;	/* driver entries while it served */
	double secs;
	struct echo_conn *pool, *free;	/* max_conns of them */
	unsigned int max_conns;
	unsigned int open, accepted, closed, reset, verbose;
	uint64_t msgs, bytes, stalls, rdma, waits;
	/* totals of the connections that are gone */
	uint64_t gone_in, gone_out, gone_bytes;
};

static volatile sig_atomic_t stop;

/* what every thread serves by, set before they start */
static struct {
	unsigned int nic, service, max_conns, backlog, threads, max_ring;
	unsigned long long spin_us, seconds, exit_after;
} cfg = { .service = 7, .max_conns = 1024, .backlog = 128, .threads = 1,
	  .spin_us = 15, .max_ring = 256u << 10 };
static unsigned long long closed_total;	/* by every thread, atomic */

/*
 * --work-ns: CPU work per message before its answer, standing for what
 * a real service computes (a lookup, a parse): rounds of an LCG,
 * calibrated once at start, so that it costs CPU, not wall time.
 */
static uint64_t work_rounds;
static volatile uint64_t work_sink;

static uint64_t work(uint64_t rounds, uint64_t x)
{
	while (rounds--)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static void work_calibrate(unsigned long long ns)
{
	uint64_t rounds = 1u << 20, t0 = clanq_now_ns(), t;

	work_sink = work(rounds, t0);
	t = clanq_now_ns() - t0;
	work_rounds = t ? (uint64_t)((double)rounds * (double)ns / (double)t) : rounds;
}

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
	       "  -R, --max-ring B    the largest receive ring a client may ask of the\n"
	       "                      server (its --ring; default 256k; the server\n"
	       "                      decides its memory, not the client)\n"
	       "      --spin-us US    spin this long for the next request before\n"
	       "                      blocking (default 15, as the paper's server)\n"
	       "  -T, --threads N     N threads, a net each, sharing the service\n"
	       "                      (CLANQ_LISTEN_SHARED; default 1: not shared)\n"
	       "      --work-ns NS    compute this long (CPU rounds, calibrated) for each\n"
	       "                      message before its answer (default 0)\n"
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
	__atomic_add_fetch(&closed_total, 1, __ATOMIC_RELAXED);
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
		if (work_rounds && !e->stalled)
			work_sink = work(work_rounds, (uint64_t)n);
		err = clanq_send(e->c, data, (size_t)n, CLANQ_MSG_DONTWAIT);
		if (err == -EAGAIN) {
			/*
			 * Keep it peeked; CLANQ_NET_OUT says when to retry.
			 * Muted for its requests meanwhile: the loop sleeps
			 * rather than report them again and again.
			 */
			if (!e->stalled) {
				s->stalls++;
				(void)clanq_conn_want(e->c, CLANQ_NET_OUT);
			}
			e->stalled = true;
			return;
		}
		if (e->stalled)
			(void)clanq_conn_want(e->c, CLANQ_NET_IN | CLANQ_NET_OUT);
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
	if (cfg.threads > 1)
		printf("# thread %u of %u:\n", s->index, cfg.threads);
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

/* Set up thread s's net and listener: 0, or the failure, said. */
static int serve_setup(struct server *s)
{
	struct clanq_listen_attr la = {
		.flags = cfg.threads > 1 ? CLANQ_LISTEN_SHARED : 0,
		.max_rx_ring = cfg.max_ring,
	};
	struct clanq_net_attr attr = { .max_conns = cfg.max_conns };
	int err;

	ex_open_net(&s->dev, &s->net, cfg.nic, &attr);
	clanq_net_set_spin(s->net, cfg.spin_us * 1000);
	err = clanq_listen_attr(s->net, &s->l, cfg.service, cfg.backlog, &la);
	if (err) {
		fprintf(stderr, "%s: listen: %s%s\n", ex_prog, strerror(-err),
			err == -EADDRINUSE ? " (service taken)" : "");
		return err;
	}
	s->max_conns = cfg.max_conns;
	s->pool = calloc(cfg.max_conns, sizeof(*s->pool));
	if (!s->pool)
		return -ENOMEM;
	for (unsigned int i = cfg.max_conns; i-- > 0;) {
		s->pool[i].next_free = s->free;
		s->free = &s->pool[i];
	}
	return 0;
}

/* One thread's loop, on its own net: nothing here is shared. */
static void *serve(void *arg)
{
	struct server *s = arg;
	struct clanq_net_event evs[64];
	uint64_t e0 = 0, e1 = 0, t0, deadline;
	int n;

	(void)clanq_ctx_entries(&s->dev, &e0);
	t0 = clanq_now_ns();
	deadline = cfg.seconds ? t0 + cfg.seconds * 1000000000ull : ~0ull;
	while (!stop && (!cfg.exit_after ||
			 __atomic_load_n(&closed_total, __ATOMIC_RELAXED) < cfg.exit_after)) {
		/* a clock read costs ~60 ns in the VM: only with a deadline */
		uint64_t now = cfg.seconds ? clanq_now_ns() : 0;
		int64_t timeout = deadline == ~0ull ? -1 : (int64_t)(deadline - now);

		if (now >= deadline)
			break;
		/*
		 * Another thread may end the run (--conns, or the signal
		 * came to it): look at least every 100 ms.
		 */
		if (cfg.threads > 1 && (timeout < 0 || timeout > 100000000))
			timeout = 100000000;
		n = clanq_net_wait(s->net, evs, 64, timeout);
		if (n == -EINTR || n == -ETIMEDOUT)
			continue;
		if (n < 0)
			ex_fail("wait", n);
		for (int i = 0; i < n; i++) {
			struct echo_conn *e;

			if (evs[i].what & CLANQ_NET_ACCEPT) {
				do_accept(s);
				continue;
			}
			if (!evs[i].conn)
				continue;
			e = (struct echo_conn *)(uintptr_t)clanq_conn_get_cookie(evs[i].conn);
			if (e->stalled && !(evs[i].what & (CLANQ_NET_OUT | CLANQ_NET_HUP)))
				continue;	/* its answer still waits for credit */
			if (evs[i].what & (CLANQ_NET_IN | CLANQ_NET_OUT | CLANQ_NET_HUP))
				do_echo(s, e);
		}
	}
	(void)clanq_ctx_entries(&s->dev, &e1);
	/* the entry counter counts our own read of it too: not a message's */
	s->entries = e1 - e0 - 1;
	s->secs = (double)(clanq_now_ns() - t0) / 1e9;
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "service", required_argument, NULL, 's' },
		{ "max-conns", required_argument, NULL, 'c' },
		{ "backlog", required_argument, NULL, 'b' },
		{ "max-ring", required_argument, NULL, 'R' },
		{ "spin-us", required_argument, NULL, 'S' },
		{ "threads", required_argument, NULL, 'T' },
		{ "work-ns", required_argument, NULL, 'W' },
		{ "seconds", required_argument, NULL, 't' },
		{ "conns", required_argument, NULL, 'x' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct sigaction sa = { 0 };
	struct server *srv;
	unsigned long long work_ns = 0;
	unsigned int verbose = 0, t;
	uint64_t msgs = 0;
	double secs = 0;
	int opt, err;

	ex_prog = "clanq-echo-server";
	while ((opt = getopt_long(argc, argv, "n:s:c:b:R:T:t:x:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'n': cfg.nic = (unsigned int)ex_parse_num("--nic", optarg, 0, 255); break;
		case 's': cfg.service = (unsigned int)ex_parse_num("--service", optarg, 1, 65535); break;
		case 'c': cfg.max_conns = (unsigned int)ex_parse_num("--max-conns", optarg, 1, 1u << 20); break;
		case 'b': cfg.backlog = (unsigned int)ex_parse_num("--backlog", optarg, 1, 65536); break;
		case 'R': cfg.max_ring = (uint32_t)ex_parse_num("--max-ring", optarg, 64, 1u << 30);
			  cfg.max_ring = (cfg.max_ring + 7) & ~7u; break;
		case 'S': cfg.spin_us = ex_parse_num("--spin-us", optarg, 0, 10000000); break;
		case 'T': cfg.threads = (unsigned int)ex_parse_num("--threads", optarg, 1,
								    CLANQ_SHARED_MAX); break;
		case 'W': work_ns = ex_parse_num("--work-ns", optarg, 0, 1000000000); break;
		case 't': cfg.seconds = ex_parse_num("--seconds", optarg, 1, 1ull << 32); break;
		case 'x': cfg.exit_after = ex_parse_num("--conns", optarg, 1, 1ull << 32); break;
		case 'v': verbose = 1; break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	if (optind < argc)
		ex_usage_error("unexpected argument '%s'", argv[optind]);

	sa.sa_handler = on_signal;	/* no SA_RESTART: the wait returns -EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (work_ns)
		work_calibrate(work_ns);
	srv = calloc(cfg.threads, sizeof(*srv));
	if (!srv)
		ex_fail("threads", -ENOMEM);
	for (t = 0; t < cfg.threads; t++) {
		srv[t].index = t;
		srv[t].verbose = verbose;
		err = serve_setup(&srv[t]);
		if (err == -ENOMEM)
			ex_fail("connection table", err);
		if (err)
			return EX_FAIL;
	}
	printf("# clanq-echo-server: node %u service %u, up to %u connections, "
	       "spin %llu us", srv[0].dev.node, cfg.service, cfg.max_conns,
	       cfg.spin_us);
	if (cfg.threads > 1)
		printf(", %u threads sharing the service (a net each)", cfg.threads);
	if (work_ns)
		printf(", %llu ns of work per message (%llu rounds)", work_ns,
		       (unsigned long long)work_rounds);
	printf("\n");
	fflush(stdout);

	/* thread 0 is this one; signals come to whichever: all look at stop */
	for (t = 1; t < cfg.threads; t++) {
		err = pthread_create(&srv[t].thread, NULL, serve, &srv[t]);
		if (err)
			ex_fail("thread", -err);
	}
	serve(&srv[0]);
	for (t = 1; t < cfg.threads; t++) {
		/* one thread's --seconds or --conns ends them all */
		stop = 1;
		pthread_join(srv[t].thread, NULL);
	}
	for (t = 0; t < cfg.threads; t++) {
		report(&srv[t], srv[t].secs, srv[t].entries);
		msgs += srv[t].msgs;
		if (srv[t].secs > secs)
			secs = srv[t].secs;
	}
	if (cfg.threads > 1)
		printf("all %u threads: %llu messages echoed in %.1f s\n",
		       cfg.threads, (unsigned long long)msgs, secs);
	fflush(stdout);
	for (t = 0; t < cfg.threads; t++) {
		/* closes the open connections too: each peer reads end of stream */
		clanq_net_close(srv[t].net);
		clanq_close(&srv[t].dev);
		free(srv[t].pool);
	}
	free(srv);
	return 0;
}
