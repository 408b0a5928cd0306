// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq's own rows: the connection layer (PIO or RDMA rings), OOB
 * messages, the paper's single-threaded server.
 *
 * The server is a forked child on NIC cb.nic_b (node 0 in the VM), the
 * measuring side is this process on cb.nic_a (node 1): two nodes of one
 * soft NIC, as two hosts would be. The server is the paper's: one
 * thread, every connection on one event queue (clanq_net_wait()), each
 * message echoed in place (clanq_recv_peek()), spinning the net's spin
 * time (clanq_net_set_spin()) after the last message before it blocks; for the polled latency rows
 * it polls its one connection directly instead (srv_direct()), the
 * shape of the raw shared-memory echo they are compared with. Its
 * knobs and its counters live in shared memory (struct srv): the
 * parent changes the spin and asks for a snapshot of the server's
 * driver entries and CPU time between two measurements, so system calls
 * and CPU per message are the server's own, counted.
 */
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/admin.h>
#include <clanq/net.h>

#include "cb.h"

#define SERVICE		4000
#define WARM(n)		((n) / 10 < 100 ? (n) / 10 : 100)
#define LAT_RING	(16u << 10)
#define SPIN_FOREVER	(10ull * 1000 * 1000 * 1000)	/* polled: never blocks */

/* The server's shared page. */
struct srv {
	uint32_t ready;			/* listening */
	uint32_t stop;
	uint32_t snap_req, snap_ack;	/* a snapshot of the counters below */
	uint64_t spin_ns;		/* the server's net's spin, live */
	uint32_t max_conns;
	uint32_t conn_flags;		/* accept options (CLANQ_CONN_RDMA_ONLY) */
	uint32_t ring;			/* rx/tx ring bytes, 0: default */
	uint32_t sink;			/* 1: receive only (bw), do not echo */
	uint32_t direct;		/* 1: one connection, polled (lat) */
	/* snapshot */
	uint64_t entries, msgs, bytes;	/* entries: the server's own */
	uint64_t snaps;			/* snapshots taken */
	double cpu_us;
	/* bw receiver: first and last message */
	uint64_t t_first, t_last;
	int error;
};

struct echo_conn {
	struct clanq_conn *c;
	struct echo_conn *next_free;
	bool stalled;
};

static unsigned char *sink_buf;

static void srv_snapshot(struct srv *s, struct clanq_dev *dev, uint64_t msgs,
			 uint64_t bytes)
{
	struct rusage ru;
	uint64_t e = 0;

	(void)clanq_ctx_entries(dev, &e);
	getrusage(RUSAGE_SELF, &ru);
	/* not counting the snapshots' own reads of the counter */
	s->entries = e - ++s->snaps;
	s->msgs = msgs;
	s->bytes = bytes;
	s->cpu_us = cb_cpu_us(&ru);
	__atomic_store_n(&s->snap_ack, s->snap_req, __ATOMIC_RELEASE);
}

/* Echo (or, for bw, consume) what e has; false when it is gone. */
static bool srv_serve(struct srv *s, struct echo_conn *e, uint64_t *msgs,
		      uint64_t *bytes)
{
	const void *data;
	ssize_t n;
	int err;

	for (;;) {
		if (s->sink)
			n = clanq_recv(e->c, sink_buf, 4u << 20, CLANQ_MSG_DONTWAIT);
		else
			n = clanq_recv_peek(e->c, &data, CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			return true;
		if (n <= 0)
			return false;
		if (s->sink) {
			s->t_last = cb_now_ns();
			if (!s->t_first)
				s->t_first = s->t_last;
			(*msgs)++;
			*bytes += (uint64_t)n;
			continue;
		}
		err = clanq_send(e->c, data, (size_t)n, CLANQ_MSG_DONTWAIT);
		if (err == -EAGAIN) {
			e->stalled = true;	/* CLANQ_NET_OUT: try again */
			return true;
		}
		e->stalled = false;
		clanq_recv_done(e->c);
		if (err)
			return false;
		(*msgs)++;
		*bytes += (uint64_t)n;
	}
}

/*
 * The polled latency rows' echo side: one connection, polled directly
 * (clanq_recv_peek(), clanq_send(), no clanq_net_wait()), the shape of
 * the raw shared-memory echo it is compared with. The paper's server
 * loop is what the idle and load rows measure.
 */
static int srv_direct(struct srv *s, struct clanq_dev *dev, struct clanq_listener *l,
		      const struct clanq_conn_opts *co)
{
	struct clanq_conn *c;
	uint64_t msgs = 0, bytes = 0;
	const void *data;
	ssize_t n;
	int err;

	do {
		err = clanq_accept(l, &c, co, 20 * 1000 * 1000);
		if (__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
			return 0;
	} while (err == -ETIMEDOUT);
	if (err)
		return err;
	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		if (__atomic_load_n(&s->snap_req, __ATOMIC_ACQUIRE) != s->snap_ack)
			srv_snapshot(s, dev, msgs, bytes);
		n = clanq_recv_peek(c, &data, CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			continue;
		if (n <= 0)
			break;
		do {
			err = clanq_send(c, data, (size_t)n, CLANQ_MSG_DONTWAIT);
		} while (err == -EAGAIN);
		clanq_recv_done(c);
		if (err)
			return err;
		msgs++;
		bytes += (uint64_t)n;
	}
	srv_snapshot(s, dev, msgs, bytes);
	clanq_conn_close(c);
	return 0;
}

static int srv_main(void *arg)
{
	struct srv *s = arg;
	struct clanq_conn_opts co = { .flags = s->conn_flags, .rx_ring = s->ring,
				      .tx_ring = s->ring };
	struct clanq_net_attr attr = { .max_conns = s->max_conns };
	struct echo_conn *pool, *free_list = NULL;
	struct clanq_net_event evs[64];
	uint64_t msgs = 0, bytes = 0;
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	int err;

	sink_buf = malloc(4u << 20);
	pool = calloc(s->max_conns, sizeof(*pool));
	if (!pool || !sink_buf) {
		s->error = -ENOMEM;
		__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
		return CB_FAIL;
	}
	for (unsigned int i = s->max_conns; i-- > 0;) {
		pool[i].next_free = free_list;
		free_list = &pool[i];
	}
	err = clanq_open_nic(&dev, cb.nic_b);
	if (!err)
		err = clanq_net_open(&net, &dev, &attr);
	if (!err)
		err = clanq_listen(net, &l, SERVICE, 1024);
	if (err) {
		s->error = err;
		__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
		return CB_FAIL;
	}
	__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
	if (s->direct) {
		err = srv_direct(s, &dev, l, &co);
		s->error = err;
		clanq_net_close(net);
		clanq_close(&dev);
		return err ? CB_FAIL : 0;
	}
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		int n;

		clanq_net_set_spin(net, __atomic_load_n(&s->spin_ns, __ATOMIC_RELAXED));
		if (__atomic_load_n(&s->snap_req, __ATOMIC_ACQUIRE) != s->snap_ack)
			srv_snapshot(s, &dev, msgs, bytes);
		/* a timeout, so that a snapshot or stop request is seen */
		n = clanq_net_wait(net, evs, 64, 20 * 1000 * 1000);
		if (n == -ETIMEDOUT || n == -EINTR)
			continue;
		if (n < 0) {
			s->error = n;
			return CB_FAIL;
		}
		for (int i = 0; i < n; i++) {
			struct echo_conn *e;

			if (evs[i].what & CLANQ_NET_ACCEPT) {
				while (free_list && !clanq_accept(l, &free_list->c, &co, 0)) {
					clanq_conn_set_cookie(free_list->c,
							      (uint64_t)(uintptr_t)free_list);
					free_list = free_list->next_free;
				}
				continue;
			}
			if (!evs[i].conn)
				continue;
			e = (struct echo_conn *)(uintptr_t)clanq_conn_get_cookie(evs[i].conn);
			if (e->stalled && !(evs[i].what & (CLANQ_NET_OUT | CLANQ_NET_HUP)))
				continue;
			if (!srv_serve(s, e, &msgs, &bytes)) {
				clanq_conn_close(e->c);
				e->c = NULL;
				e->stalled = false;
				e->next_free = free_list;
				free_list = e;
			}
		}
	}
	srv_snapshot(s, &dev, msgs, bytes);
	clanq_net_close(net);
	clanq_close(&dev);
	return 0;
}

struct server {
	struct srv *s;
	pid_t pid;
};

static int server_start(struct server *sv, uint32_t max_conns, uint64_t spin_ns,
			uint32_t conn_flags, uint32_t ring, bool sink, bool direct)
{
	sv->s = cb_shared(sizeof(*sv->s));
	sv->s->direct = direct;
	sv->s->max_conns = max_conns;
	sv->s->spin_ns = spin_ns;
	sv->s->conn_flags = conn_flags;
	sv->s->ring = ring;
	sv->s->sink = sink;
	sv->pid = cb_fork(srv_main, sv->s);
	cb_wait_child(&sv->s->ready, 1, sv->pid, "clanq server start");
	if (sv->s->error) {
		int err = sv->s->error;
		char path[32], why[256];

		snprintf(path, sizeof(path), CLANQ_DEV_PREFIX "%u", cb.nic_b);
		clanq_open_explain(path, err, why, sizeof(why));
		fprintf(stderr, "clanq-bench: clanq server on NIC %u: %s\n", cb.nic_b, why);
		cb_reap(sv->pid, NULL);
		cb_unshare(sv->s, sizeof(*sv->s));
		return err;
	}
	return 0;
}

/* The server's counters, now (it answers within its 20 ms wait). */
static void server_snapshot(struct server *sv)
{
	uint32_t req = sv->s->snap_req + 1;

	__atomic_store_n(&sv->s->snap_req, req, __ATOMIC_RELEASE);
	cb_wait_child(&sv->s->snap_ack, req, sv->pid, "clanq server counters");
}

static int server_stop(struct server *sv)
{
	int status;

	__atomic_store_n(&sv->s->stop, 1, __ATOMIC_RELEASE);
	status = cb_reap(sv->pid, NULL);
	cb_unshare(sv->s, sizeof(*sv->s));
	return status ? -EIO : 0;
}

/* The measuring side's net, on cb.nic_a. */
struct client {
	struct clanq_dev dev;
	struct clanq_net *net;
};

static int client_open(struct client *c, unsigned int max_conns, uint64_t spin_ns)
{
	struct clanq_net_attr attr = { .max_conns = max_conns };
	int err = clanq_open_nic(&c->dev, cb.nic_a);

	if (err) {
		fprintf(stderr, "clanq-bench: /dev/clanq%u: %s\n", cb.nic_a, strerror(-err));
		return err;
	}
	err = clanq_net_open(&c->net, &c->dev, &attr);
	if (err) {
		fprintf(stderr, "clanq-bench: net on NIC %u: %s\n", cb.nic_a, strerror(-err));
		clanq_close(&c->dev);
		return err;
	}
	clanq_net_set_spin(c->net, spin_ns);
	return 0;
}

static void client_close(struct client *c)
{
	clanq_net_close(c->net);
	clanq_close(&c->dev);
}

static int client_connect(struct client *c, struct clanq_conn **conn,
			  const struct clanq_conn_opts *co)
{
	int err = clanq_connect(c->net, conn, 0, SERVICE, co);

	if (err)
		fprintf(stderr, "clanq-bench: connect to node 0 service %u: %s\n", SERVICE,
			strerror(-err));
	return err;
}

/* A counter of /sys/kernel/debug/clanq/clanqN/stats (root), or -1. */
static long long nic_stat(unsigned int nic, const char *key)
{
	char path[64], name[64];
	long long value, found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/clanq/clanq%u/stats", nic);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", name, &value) == 2)
		if (!strcmp(name, key))
			found = value;
	fclose(f);
	return found;
}

/* The two engines' doorbells and turns, summed: where an RDMA row's time goes. */
struct engine_stats {
	long long kicks, turns, inline_turns;
};

static struct engine_stats engine_stats(void)
{
	struct engine_stats e = { 0 };
	unsigned int nics[2] = { cb.nic_a, cb.nic_b };

	for (unsigned int i = 0; i < 2; i++) {
		e.kicks += nic_stat(nics[i], "rdma_kicks");
		e.turns += nic_stat(nics[i], "rdma_turns");
		e.inline_turns += nic_stat(nics[i], "rdma_inline_turns");
	}
	return e;
}

static uint64_t entries(struct clanq_dev *dev)
{
	uint64_t e = 0;

	(void)clanq_ctx_entries(dev, &e);
	return e;
}

static void fill(unsigned char *p, size_t len, uint64_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seq + i * 7);
}

/* One checked round trip: usec, or a negative errno. */
static double round_trip(struct clanq_conn *c, unsigned char *out, unsigned char *in,
			 size_t len, unsigned int flags)
{
	uint64_t t0 = cb_now_ns();
	ssize_t n;
	int err;

	do {
		err = clanq_send(c, out, len, flags);
	} while (err == -EAGAIN);
	if (err)
		return err;
	do {
		n = clanq_recv(c, in, len, flags);
	} while (n == -EAGAIN);
	if (n < 0)
		return (double)n;
	if ((size_t)n != len || memcmp(in, out, len))
		return -EIO;
	return (double)(cb_now_ns() - t0) / 1000.0;
}

/*
 * n round trips on conn (after a warm-up), into row r; server counters
 * around them give the both-ends system calls.
 */
static int measure_rt(struct server *sv, struct client *cl, struct clanq_conn *conn,
		      size_t len, unsigned int flags, double *v, struct cb_row *r)
{
	unsigned char *out = malloc(len), *in = malloc(len);
	struct engine_stats es0, es1;
	uint64_t e0, e1, se0;
	double cli, srv;
	int err = 0, n;

	if (!out || !in)
		cb_die("memory", -ENOMEM);
	for (unsigned long long i = 0; i < WARM(cb.iters) && !err; i++) {
		fill(out, len, i);
		double t = round_trip(conn, out, in, len, flags);

		err = t < 0 ? (int)t : 0;
	}
	server_snapshot(sv);
	se0 = sv->s->entries;
	es0 = engine_stats();
	e0 = entries(&cl->dev);
	for (unsigned long long i = 0; i < cb.iters && !err; i++) {
		fill(out, len, i + 1000);
		v[i] = round_trip(conn, out, in, len, flags);
		err = v[i] < 0 ? (int)v[i] : 0;
	}
	e1 = entries(&cl->dev);
	es1 = engine_stats();
	server_snapshot(sv);
	free(out);
	free(in);
	if (err) {
		fprintf(stderr, "clanq-bench: clanq round trip of %zu bytes: %s\n", len,
			err == -EIO ? "the answer differs" : strerror(-err));
		return err;
	}
	cb_row_lat(r, v, cb.iters);
	/* each entries() read is one entry, the snapshot's too */
	cli = (double)(e1 - e0 - 1) / (double)cb.iters;
	srv = (double)(sv->s->entries - se0) / (double)cb.iters;
	r->syscalls = cli + srv;
	/* each end's own: the blocking target is per side */
	n = snprintf(r->note, sizeof(r->note), "sys/rt: client %.2f, server %.2f", cli, srv);
	/* the engines' share (root: debugfs), for the rows that use them */
	if (es1.turns > es0.turns && es0.turns >= 0)
		snprintf(r->note + n, sizeof(r->note) - (size_t)n,
			 "; engine: %.2f kicks, %.2f turns/rt, %.0f%% inline",
			 (double)(es1.kicks - es0.kicks) / (double)cb.iters,
			 (double)(es1.turns - es0.turns) / (double)cb.iters,
			 100.0 * (double)(es1.inline_turns - es0.inline_turns) /
			 (double)(es1.turns - es0.turns));
	return 0;
}

/* ---- lat ---- */

struct lat_mode {
	const char *name;
	uint32_t conn_flags;
	bool block;
};

static int conn_lat(const struct lat_mode *m, const unsigned long long *sizes,
		    unsigned int nr, double *v)
{
	/* rings of 16 KiB: a 4 KiB message does not fit the one-page default */
	struct clanq_conn_opts co = { .flags = m->conn_flags, .rx_ring = LAT_RING,
				      .tx_ring = LAT_RING };
	struct clanq_conn *conn;
	struct server sv;
	struct client cl;
	int err;

	/* polled: one connection polled directly; blocking: the paper's loop */
	err = server_start(&sv, 4, m->block ? 0 : SPIN_FOREVER, m->conn_flags, LAT_RING,
			   false, !m->block);
	if (err)
		return err;
	err = client_open(&cl, 4, m->block ? 0 : SPIN_FOREVER);
	if (!err) {
		err = client_connect(&cl, &conn, &co);
		for (unsigned int s = 0; s < nr && !err; s++) {
			struct cb_row r;

			cb_progress("lat clanq/%s %llu B", m->name, sizes[s]);
			cb_row_init(&r, "lat", "clanq", m->name, sizes[s]);
			err = measure_rt(&sv, &cl, conn, sizes[s],
					 m->block ? 0 : CLANQ_MSG_DONTWAIT, v, &r);
			if (!err)
				cb_emit(&r);
		}
		client_close(&cl);
	}
	if (server_stop(&sv) && !err)
		err = -EIO;
	return err;
}

/*
 * OOB: one message each way, 8 bytes (a 48-byte payload at most); the
 * send is a system call by design (the paper's OOB messages), the
 * receive is not (poll) or waits on an event queue (block).
 */
struct oob_peer {
	uint32_t ready, stop;
	struct clanq_addr addr;
	bool block;
	uint64_t entries0, entries1;
	int error;
};

static int oob_wait(struct clanq_ep *ep, struct clanq_evq *evq, bool block,
		    struct clanq_oob_msg *msg, volatile uint32_t *stop)
{
	struct clanq_event ev;

	for (;;) {
		if (!clanq_oob_recv(ep, msg))
			return 0;
		if (stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE))
			return -ECANCELED;
		if (block) {
			int err = clanq_evq_wait(evq, &ev, 20 * 1000 * 1000);

			if (err && err != -ETIMEDOUT && err != -EINTR)
				return err;
		}
	}
}

static int oob_open(unsigned int nic, struct clanq_dev *dev, struct clanq_ep *ep,
		    struct clanq_evq *evq)
{
	int err = clanq_open_nic(dev, nic);

	if (!err)
		err = clanq_ep_create(dev, ep, 64);
	if (!err)
		err = clanq_evq_create(dev, evq, 1);
	if (!err)
		err = clanq_evq_register(evq, ep, CLANQ_EV_OOB, 0);
	if (!err)
		clanq_evq_set_spin(evq, 0);	/* block at once: the wake-up is measured */
	return err < 0 ? err : 0;
}

static int oob_echo(void *arg)
{
	struct oob_peer *p = arg;
	struct clanq_oob_msg msg;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_evq evq;
	int err = oob_open(cb.nic_b, &dev, &ep, &evq);

	p->addr = ep.addr;
	p->error = err;
	__atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
	if (err)
		return CB_FAIL;
	p->entries0 = entries(&dev);
	while (!(err = oob_wait(&ep, &evq, p->block, &msg, &p->stop))) {
		if (msg.len == 0)	/* a marker: counters, now */
			p->entries0 = entries(&dev);
		err = clanq_oob_send(&ep, msg.src, msg.type, msg.payload, msg.len);
		if (err)
			break;
		p->entries1 = entries(&dev);
	}
	clanq_close(&dev);
	return err == -ECANCELED ? 0 : CB_FAIL;
}

static int oob_lat(bool block, double *v)
{
	struct oob_peer *p = cb_shared(sizeof(*p));
	unsigned char out[8], zero[1] = { 0 };
	struct clanq_oob_msg msg;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_evq evq;
	uint64_t e0, e1;
	struct cb_row r;
	pid_t pid;
	int err;

	p->block = block;
	pid = cb_fork(oob_echo, p);
	cb_wait_child(&p->ready, 1, pid, "OOB echo start");
	err = p->error ? p->error : oob_open(cb.nic_a, &dev, &ep, &evq);
	if (err) {
		fprintf(stderr, "clanq-bench: OOB endpoints: %s\n", strerror(-err));
		cb_kill(pid);
		return err;
	}
	cb_progress("lat clanq/oob-%s 8 B", block ? "block" : "poll");
	/* the marker (length 0): the echo side's counters start after it */
	err = clanq_oob_send(&ep, p->addr, CLANQ_OOB_TYPE_USER, zero, 0);
	if (!err)
		err = oob_wait(&ep, &evq, block, &msg, NULL);
	for (unsigned long long i = 0; i < WARM(cb.iters) && !err; i++) {
		err = clanq_oob_send(&ep, p->addr, CLANQ_OOB_TYPE_USER, out, 8);
		if (!err)
			err = oob_wait(&ep, &evq, block, &msg, NULL);
	}
	e0 = entries(&dev);
	for (unsigned long long i = 0; i < cb.iters && !err; i++) {
		uint64_t t0 = cb_now_ns();

		memcpy(out, &i, 8);
		err = clanq_oob_send(&ep, p->addr, CLANQ_OOB_TYPE_USER, out, 8);
		if (!err)
			err = oob_wait(&ep, &evq, block, &msg, NULL);
		if (!err && (msg.len != 8 || memcmp(msg.payload, out, 8)))
			err = -EIO;
		v[i] = (double)(cb_now_ns() - t0) / 1000.0;
	}
	e1 = entries(&dev);
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
	if (cb_reap(pid, NULL) && !err)
		err = -EIO;
	if (!err) {
		cb_row_init(&r, "lat", "clanq", block ? "oob-block" : "oob-poll", 8);
		cb_row_lat(&r, v, cb.iters);
		/* the echo side's count ends at its last send (entries1) */
		r.syscalls = (double)(e1 - e0 - 1 + p->entries1 - p->entries0 - 1) /
			     (double)cb.iters;
		snprintf(r.note, sizeof(r.note), "send is a system call by design");
		cb_emit(&r);
	} else {
		fprintf(stderr, "clanq-bench: OOB round trip: %s\n", strerror(-err));
	}
	clanq_close(&dev);
	cb_unshare(p, sizeof(*p));
	return err;
}

/* A module parameter: read into old (if not NULL), then write value. */
static int set_param(const char *name, const char *value, char *old, size_t size)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/clanq/parameters/%s", name);
	if (old) {
		f = fopen(path, "r");
		if (!f || !fgets(old, (int)size, f)) {
			if (f)
				fclose(f);
			return -errno ? -errno : -EIO;
		}
		fclose(f);
		old[strcspn(old, "\n")] = 0;
	}
	f = fopen(path, "w");
	if (!f)
		return -errno;
	if (fputs(value, f) < 0) {
		fclose(f);
		return -EIO;
	}
	return fclose(f) ? -errno : 0;
}

/*
 * The RDMA engine's doorbell, before and after: the engine thread woken
 * for every post (rdma_inline=0), the turn run inline by the post's
 * kick (the default), and the engine polling 50 us before it lets go
 * (rdma_poll_us=50, rdma_inline=0). Root only (module parameters).
 */
static int rdma_engine_rows(double *v)
{
	static const unsigned long long sizes[] = { 8, 64 };
	static const struct {
		struct lat_mode m;
		const char *inl, *poll_us;
	} variants[] = {
		{ { "rdma-poll-woken", CLANQ_CONN_RDMA_ONLY, false }, "0", "0" },
		{ { "rdma-poll-enginepoll50", CLANQ_CONN_RDMA_ONLY, false }, "0", "50" },
	};
	char inl[16], poll_us[16];
	int err = 0;

	if (set_param("rdma_inline", "1", inl, sizeof(inl)) ||
	    set_param("rdma_poll_us", "0", poll_us, sizeof(poll_us))) {
		cb_skip("lat", "clanq", "rdma-poll-woken",
			"needs root (/sys/module/clanq/parameters)");
		return 0;
	}
	for (unsigned int i = 0; i < 2 && !err; i++) {
		set_param("rdma_inline", variants[i].inl, NULL, 0);
		set_param("rdma_poll_us", variants[i].poll_us, NULL, 0);
		err = conn_lat(&variants[i].m, sizes, cb.quick ? 1 : 2, v);
	}
	set_param("rdma_inline", inl, NULL, 0);
	set_param("rdma_poll_us", poll_us, NULL, 0);
	return err;
}

static int onesided_lat(double *v);

int clanq_lat(void)
{
	static const struct lat_mode modes[] = {
		{ "pio-poll", 0, false },
		{ "pio-block", 0, true },
		{ "rdma-poll", CLANQ_CONN_RDMA_ONLY, false },
		{ "rdma-block", CLANQ_CONN_RDMA_ONLY, true },
	};
	unsigned long long sizes[8];
	unsigned int nr = cb_lat_sizes(sizes);
	double *v;
	int err = 0;

	if (!cb_wanted("clanq"))
		return 0;
	v = calloc(cb.iters, sizeof(*v));
	if (!v)
		cb_die("memory", -ENOMEM);
	for (unsigned int m = 0; m < 4 && !err; m++)
		err = conn_lat(&modes[m], sizes, nr, v);
	if (!err)
		err = rdma_engine_rows(v);
	if (!err)
		err = onesided_lat(v);
	if (!err)
		err = oob_lat(false, v);
	if (!err)
		err = oob_lat(true, v);
	free(v);
	return err;
}

/*
 * ---- bw: one way, the ring's credit as flow control ----
 *
 * The pio and rdma rows give each connection rings of 4 messages, so a
 * message is one record; the -default rows (64 KiB and up) keep the
 * library's one-page rings, so a message goes in pieces: through the
 * receiver's bulk window once it is offered (lib/msg.c), which is what
 * a service that did not size its rings gets.
 */
static int conn_bw(const char *mode, uint32_t conn_flags, bool default_ring)
{
	unsigned long long sizes[32];
	unsigned int nr = cb_sizes(default_ring ? 64u << 10 : 8, 4ull << 20, sizes, 32);
	unsigned char *buf = malloc(4u << 20);
	int err = 0;

	if (!buf)
		cb_die("memory", -ENOMEM);
	memset(buf, 0xa5, 4u << 20);
	for (unsigned int s = 0; s < nr && !err; s++) {
		size_t len = sizes[s];
		/* room for 4 messages in flight, at least a page */
		uint32_t ring = len * 4 + 256 < 4096 || default_ring ? 0 :
				(uint32_t)(len * 4 + 256);
		struct clanq_conn_opts co = { .flags = conn_flags, .rx_ring = ring,
					      .tx_ring = ring };
		struct clanq_conn *conn;
		uint64_t e0, e1, n = 0, t0;
		struct server sv;
		struct client cl;
		struct cb_row r;

		cb_progress("bw clanq/%s %zu B", mode, len);
		err = server_start(&sv, 2, SPIN_FOREVER, conn_flags, ring, true, false);
		if (err)
			break;
		err = client_open(&cl, 2, SPIN_FOREVER);
		if (err) {
			server_stop(&sv);
			break;
		}
		err = client_connect(&cl, &conn, &co);
		if (!err) {
			server_snapshot(&sv);
			uint64_t se0 = sv.s->entries;

			e0 = entries(&cl.dev);
			t0 = cb_now_ns();
			do {
				for (unsigned int i = 0; i < 64 && !err; i++, n++)
					err = clanq_send(conn, buf, len, 0);
			} while (!err && (double)(cb_now_ns() - t0) < cb.seconds * 1e9);
			e1 = entries(&cl.dev);
			/* the receiver's count: wait until it has them all */
			while (!err) {
				server_snapshot(&sv);
				if (sv.s->msgs == n)
					break;
			}
			if (!err) {
				double secs = (double)(sv.s->t_last - sv.s->t_first) / 1e9;

				cb_row_init(&r, "bw", "clanq", mode, len);
				r.iters = n;
				/* first to last arrival: n - 1 messages' worth */
				r.bw_mibs = secs > 0 ? (double)(n - 1) * (double)len / secs /
						       (1 << 20) : -1;
				r.mpps = secs > 0 ? (double)(n - 1) / secs / 1e6 : -1;
				r.syscalls = (double)(e1 - e0 - 1 + sv.s->entries - se0) /
					     (double)n;
				snprintf(r.note, sizeof(r.note), default_ring ?
					 "default rings: pieces, bulk window" :
					 "receiver copies out");
				cb_emit(&r);
			}
			if (err)
				fprintf(stderr, "clanq-bench: bw %s %zu B: %s\n", mode, len,
					strerror(-err));
			clanq_conn_close(conn);
		}
		client_close(&cl);
		if (server_stop(&sv) && !err)
			err = -EIO;
	}
	free(buf);
	return err;
}

/*
 * The RDMA engine alone (the paper's Figure 4 RDMA line): a source
 * region on this side written into a region the peer exported, through
 * an aperture, one request per message, SIGNAL on every 16th; no ring,
 * no copy out. The exporter only waits.
 */
#define RAW_BYTES	(4u << 20)

struct raw_peer {
	uint32_t ready, stop;
	struct clanq_addr addr;
	uint64_t key;
	int error;
};

static int raw_exporter(void *arg)
{
	struct raw_peer *p = arg;
	struct clanq_region r;
	struct clanq_dev dev;
	int err = clanq_open_nic(&dev, cb.nic_b);

	if (!err)
		err = clanq_region_alloc(&dev, &r, RAW_BYTES);
	if (!err)
		/* both rights: the one-sided rows read it and add to it too */
		err = clanq_region_export(&r, CLANQ_RIGHTS_ALL, &p->key);
	p->addr = r.addr;
	p->error = err;
	__atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
	if (err)
		return CB_FAIL;
	cb_spin_until(&p->stop, 1);
	clanq_close(&dev);
	return 0;
}

static int raw_stream(struct clanq_ep *ep, struct clanq_rdma_req *req, uint64_t *n_out,
		      uint64_t *ns_out)
{
	uint64_t posted = 0, done = 0, t0 = cb_now_ns(), end = t0 + (uint64_t)(cb.seconds * 1e9);
	uint64_t n = UINT64_MAX;
	struct clanq_rdma_comp c;
	int err;

	while (done < n) {
		while (posted < n) {
			req->cookie = posted;
			req->flags = CLANQ_RDMA_LAST;
			if (posted % 16 == 15)
				req->flags |= CLANQ_RDMA_SIGNAL;
			err = clanq_rdma_post(ep, req);
			if (err == -EAGAIN)
				break;
			if (err)
				return err;
			posted++;
		}
		while (!clanq_rdma_poll(ep, &c)) {
			if (c.status || c.cookie % 16 != 15 || c.len != req->len)
				return c.status ? c.status : -EIO;
			done = c.cookie + 1;
		}
		/* time is up: finish on a signalled request */
		if (n == UINT64_MAX && cb_now_ns() > end)
			n = (posted + 15) & ~15ull;
		clanq_cpu_relax();
	}
	*n_out = n;
	*ns_out = cb_now_ns() - t0;
	return 0;
}

static int raw_rdma_bw(void)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct raw_peer *p = cb_shared(sizeof(*p));
	unsigned long long sizes[32];
	unsigned int nr = cb_sizes(8, 4ull << 20, sizes, 32);
	struct clanq_region src;
	struct clanq_dev dev;
	struct clanq_ap ap;
	struct clanq_ep ep;
	pid_t pid;
	int err;

	pid = cb_fork(raw_exporter, p);
	cb_wait_child(&p->ready, 1, pid, "RDMA exporter start");
	err = p->error ? p->error : clanq_open_nic(&dev, cb.nic_a);
	if (err) {
		fprintf(stderr, "clanq-bench: bw clanq/rdma-write: set-up: %s\n", strerror(-err));
		cb_kill(pid);
		cb_unshare(p, sizeof(*p));
		return err;
	}
	err = clanq_region_alloc(&dev, &src, RAW_BYTES);
	if (!err)
		err = clanq_ap_import(&dev, &ap, p->addr, p->key, 0, RAW_BYTES, CLANQ_RIGHT_WRITE);
	if (!err)
		err = clanq_ep_create_attr(&dev, &ep, &attr);
	if (!err)
		memset(src.mem, 0x3c, RAW_BYTES);
	for (unsigned int s = 0; s < nr && !err; s++) {
		struct clanq_rdma_req req = { .src_region = src.addr.id, .dst_ap = ap.id,
					      .len = sizes[s] };
		uint64_t n, ns, e0, e1;
		struct cb_row r;

		cb_progress("bw clanq/rdma-write %llu B", sizes[s]);
		e0 = entries(&dev);
		err = raw_stream(&ep, &req, &n, &ns);
		e1 = entries(&dev);
		if (err)
			break;
		cb_row_init(&r, "bw", "clanq", "rdma-write", sizes[s]);
		r.iters = n;
		r.bw_mibs = (double)n * (double)sizes[s] / ((double)ns / 1e9) / (1 << 20);
		r.mpps = (double)n / ((double)ns / 1e3);
		r.syscalls = (double)(e1 - e0 - 1) / (double)n;
		snprintf(r.note, sizeof(r.note), "engine only: region to region, no ring");
		cb_emit(&r);
	}
	if (err)
		fprintf(stderr, "clanq-bench: bw clanq/rdma-write: %s\n", strerror(-err));
	clanq_close(&dev);
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
	if (cb_reap(pid, NULL) && !err)
		err = -EIO;
	cb_unshare(p, sizeof(*p));
	return err;
}

/*
 * One-sided (the exporter's CPU not involved), one request at a time,
 * polled, from post to completion: a WRITE, a READ and a fetch-and-add
 * through the engine, beside each other (and beside shm/cas-pingpong,
 * the CPU's own lock cmpxchg between two processes). The aperture is
 * imported with CLANQ_AP_ATOMIC.
 */
static int raw_open(struct raw_peer **pp, pid_t *pid, struct clanq_dev *dev,
		    struct clanq_region *local, struct clanq_ap *ap, struct clanq_ep *ep)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_ap_attr aa = { .flags = CLANQ_AP_ATOMIC };
	struct raw_peer *p = cb_shared(sizeof(*p));
	int err;

	*pp = p;
	*pid = cb_fork(raw_exporter, p);
	cb_wait_child(&p->ready, 1, *pid, "RDMA exporter start");
	err = p->error ? p->error : clanq_open_nic(dev, cb.nic_a);
	if (err) {
		cb_kill(*pid);
		cb_unshare(p, sizeof(*p));
		*pp = NULL;	/* nothing left for raw_close() */
		return err;
	}
	err = clanq_region_alloc(dev, local, RAW_BYTES);
	if (!err)
		err = clanq_ap_import_attr(dev, ap, p->addr, p->key, 0, RAW_BYTES,
					   CLANQ_RIGHTS_ALL, &aa);
	if (!err)
		err = clanq_ep_create_attr(dev, ep, &attr);
	if (!err)
		memset(local->mem, 0x3c, RAW_BYTES);
	return err;
}

static int raw_close(struct raw_peer *p, pid_t pid, struct clanq_dev *dev, int err)
{
	clanq_close(dev);
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
	if (cb_reap(pid, NULL) && !err)
		err = -EIO;
	cb_unshare(p, sizeof(*p));
	return err;
}

static int onesided_lat(double *v)
{
	static const struct { const char *mode; uint32_t op; } ops[] = {
		{ "rdma-1s-write", CLANQ_RDMA_OP_WRITE },
		{ "rdma-1s-read", CLANQ_RDMA_OP_READ },
		{ "rdma-1s-fadd", CLANQ_RDMA_OP_FADD },
	};
	unsigned long long sizes[8];
	unsigned int nr = cb_lat_sizes(sizes);
	struct clanq_region local;
	struct clanq_dev dev;
	struct raw_peer *p;
	struct clanq_ap ap;
	struct clanq_ep ep;
	pid_t pid;
	int err;

	err = raw_open(&p, &pid, &dev, &local, &ap, &ep);
	if (err) {
		fprintf(stderr, "clanq-bench: lat clanq/rdma-1s: set-up: %s\n", strerror(-err));
		return p ? raw_close(p, pid, &dev, err) : err;
	}
	for (unsigned int o = 0; o < 3 && !err; o++) {
		for (unsigned int s = 0; s < nr && !err; s++) {
			bool atomic = ops[o].op == CLANQ_RDMA_OP_FADD;
			struct clanq_rdma_req req = {
				.src_region = atomic ? 0 : local.addr.id, .dst_ap = ap.id,
				.len = atomic ? 8 : sizes[s], .op = ops[o].op,
				.operand = { atomic ? 1 : 0 },
				.flags = CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL,
			};
			unsigned long long warm = cb.iters / 10 + 1;
			struct clanq_rdma_comp c;
			uint64_t e0 = 0, e1;
			struct cb_row r;

			if (atomic && s)
				break;	/* one size: the word */
			cb_progress("lat clanq/%s %llu B", ops[o].mode, req.len);
			for (unsigned long long i = 0; i < warm + cb.iters && !err; i++) {
				uint64_t t0;

				if (i == warm)
					e0 = entries(&dev);
				req.cookie = i;
				t0 = cb_now_ns();
				err = clanq_rdma_post(&ep, &req);
				while (!err && clanq_rdma_poll(&ep, &c) == -EAGAIN)
					clanq_cpu_relax();
				if (!err && (c.status || c.cookie != i))
					err = c.status ? c.status : -EIO;
				if (i >= warm)
					v[i - warm] = (double)(cb_now_ns() - t0) / 1000.0;
			}
			if (err)
				break;
			e1 = entries(&dev);
			cb_row_init(&r, "lat", "clanq", ops[o].mode, req.len);
			cb_row_lat(&r, v, cb.iters);
			r.syscalls = (double)(e1 - e0 - 1) / (double)cb.iters;
			snprintf(r.note, sizeof(r.note),
				 "one op, post to completion, polled; no peer CPU");
			cb_emit(&r);
		}
	}
	if (err)
		fprintf(stderr, "clanq-bench: lat clanq/rdma-1s: %s\n", strerror(-err));
	return raw_close(p, pid, &dev, err);
}

/* READ bandwidth and the fetch-and-add rate, streamed as rdma-write is. */
static int raw_rdma_read_fadd(void)
{
	unsigned long long sizes[32];
	unsigned int nr = cb_sizes(8, 4ull << 20, sizes, 32);
	struct clanq_region local;
	struct clanq_dev dev;
	struct raw_peer *p;
	struct clanq_ap ap;
	struct clanq_ep ep;
	pid_t pid;
	int err;

	err = raw_open(&p, &pid, &dev, &local, &ap, &ep);
	if (err) {
		fprintf(stderr, "clanq-bench: bw clanq/rdma-read: set-up: %s\n", strerror(-err));
		return p ? raw_close(p, pid, &dev, err) : err;
	}
	for (unsigned int s = 0; s <= nr && !err; s++) {
		bool atomic = s == nr;
		struct clanq_rdma_req req = {
			.src_region = atomic ? 0 : local.addr.id, .dst_ap = ap.id,
			.len = atomic ? 8 : sizes[s],
			.op = atomic ? CLANQ_RDMA_OP_FADD : CLANQ_RDMA_OP_READ,
			.operand = { atomic ? 1 : 0 },
		};
		const char *mode = atomic ? "rdma-fadd" : "rdma-read";
		uint64_t n, ns, e0, e1;
		struct cb_row r;

		cb_progress("bw clanq/%s %llu B", mode, req.len);
		e0 = entries(&dev);
		err = raw_stream(&ep, &req, &n, &ns);
		e1 = entries(&dev);
		if (err)
			break;
		cb_row_init(&r, "bw", "clanq", mode, req.len);
		r.iters = n;
		r.bw_mibs = (double)n * (double)req.len / ((double)ns / 1e9) / (1 << 20);
		r.mpps = (double)n / ((double)ns / 1e3);
		r.syscalls = (double)(e1 - e0 - 1) / (double)n;
		snprintf(r.note, sizeof(r.note), atomic ?
			 "engine only: fetch-and-adds on one word, no ring" :
			 "engine only: the peer's region into ours, no ring");
		cb_emit(&r);
	}
	if (err)
		fprintf(stderr, "clanq-bench: bw clanq/rdma-read: %s\n", strerror(-err));
	return raw_close(p, pid, &dev, err);
}

int clanq_bw(void)
{
	int err;

	if (!cb_wanted("clanq"))
		return 0;
	err = conn_bw("pio", 0, false);
	if (!err)
		err = conn_bw("rdma", CLANQ_CONN_RDMA_ONLY, false);
	if (!err)
		err = conn_bw("pio-default", 0, true);
	if (!err)
		err = conn_bw("rdma-default", CLANQ_CONN_RDMA_ONLY, true);
	if (!err)
		err = raw_rdma_bw();
	if (!err)
		err = raw_rdma_read_fadd();
	return err;
}

/* ---- idle: one connection measured, the others held ---- */

int clanq_idle(void)
{
	unsigned long long counts[8];
	unsigned int nr = cb_idle_counts(counts);
	unsigned long long max = counts[nr - 1];
	struct clanq_conn **conns;
	struct server sv;
	struct client cl;
	unsigned long long open = 0;
	double *v;
	int err;

	if (!cb_wanted("clanq"))
		return 0;
	conns = calloc(max, sizeof(*conns));
	v = calloc(cb.iters, sizeof(*v));
	if (!conns || !v)
		cb_die("memory", -ENOMEM);
	err = server_start(&sv, (uint32_t)max + 1, 0, 0, 0, false, false);
	if (err)
		goto out;
	err = client_open(&cl, (unsigned int)max + 1, SPIN_FOREVER);
	if (err)
		goto stop;
	for (unsigned int k = 0; k < nr && !err; k++) {
		/* conns[0] is measured; 1 .. N-1 are held, idle */
		while (open < counts[k] && !err) {
			if (!(open % 500))
				cb_progress("idle clanq: opening connection %llu of %llu",
					    open + 1, counts[k]);
			err = client_connect(&cl, &conns[open], NULL);
			open += !err;
		}
		for (unsigned int m = 0; m < 2 && !err; m++) {
			struct cb_row r;

			/* the paper's server spins 15 us, or blocks at once */
			__atomic_store_n(&sv.s->spin_ns, m ? 0 : CLANQ_NET_SPIN_NS_DEFAULT,
					 __ATOMIC_RELAXED);
			cb_progress("idle clanq/%s %llu connections", m ? "block" : "spin",
				    counts[k]);
			cb_row_init(&r, "idle", "clanq", m ? "block" : "spin", 8);
			r.param = counts[k];
			err = measure_rt(&sv, &cl, conns[0], 8, CLANQ_MSG_DONTWAIT, v, &r);
			if (!err)
				cb_emit(&r);
		}
	}
	client_close(&cl);
stop:
	if (server_stop(&sv) && !err)
		err = -EIO;
out:
	free(v);
	free(conns);
	return err;
}

/* ---- load: C clients, one message in flight each, blocking ---- */

struct load_client {
	uint32_t *start, *stop, *connected;
	uint64_t msgs, entries;
	int error;
};

static int load_client_main(void *arg)
{
	struct load_client *lc = arg;
	unsigned char out[8], in[8];
	struct clanq_conn *conn;
	struct client cl;
	uint64_t e0;
	int err;

	err = client_open(&cl, 2, 0);
	if (!err)
		err = client_connect(&cl, &conn, NULL);
	if (err) {
		lc->error = err;
		__atomic_fetch_add(lc->connected, 1, __ATOMIC_RELEASE);
		return CB_FAIL;
	}
	__atomic_fetch_add(lc->connected, 1, __ATOMIC_RELEASE);
	cb_spin_until(lc->start, 1);
	e0 = entries(&cl.dev);
	while (!__atomic_load_n(lc->stop, __ATOMIC_RELAXED)) {
		fill(out, 8, lc->msgs);
		double t = round_trip(conn, out, in, 8, 0);

		if (t < 0) {
			lc->error = (int)t;
			break;
		}
		lc->msgs++;
	}
	lc->entries = entries(&cl.dev) - e0 - 1;
	client_close(&cl);
	return lc->error ? CB_FAIL : 0;
}

int clanq_load(void)
{
	unsigned long long levels[8];
	unsigned int nr = cb_load_clients(levels);
	int err = 0;

	if (!cb_wanted("clanq"))
		return 0;
	for (unsigned int k = 0; k < nr && !err; k++) {
		unsigned int c = (unsigned int)levels[k];
		struct load_client *lc = cb_shared(sizeof(*lc) * c + 64);
		uint32_t *flags = (uint32_t *)(lc + c);
		uint64_t msgs = 0, se0, sm0, entries_sum = 0, client_msgs = 0;
		double cpu0, secs;
		pid_t pids[64];
		struct server sv;
		struct cb_row r;
		uint64_t t0;

		cb_progress("load clanq %u clients", c);
		err = server_start(&sv, c + 1, CLANQ_NET_SPIN_NS_DEFAULT, 0, 0, false, false);
		if (err) {
			cb_unshare(lc, sizeof(*lc) * c + 64);
			break;
		}
		for (unsigned int i = 0; i < c; i++) {
			lc[i].start = &flags[0];
			lc[i].stop = &flags[1];
			lc[i].connected = &flags[2];
			pids[i] = cb_fork(load_client_main, &lc[i]);
		}
		cb_spin_until(&flags[2], c);
		for (unsigned int i = 0; i < c && !err; i++)
			err = lc[i].error;
		usleep(100 * 1000);
		server_snapshot(&sv);
		se0 = sv.s->entries;
		sm0 = sv.s->msgs;
		cpu0 = sv.s->cpu_us;
		t0 = cb_now_ns();
		__atomic_store_n(&flags[0], 1, __ATOMIC_RELEASE);
		usleep((useconds_t)(cb.seconds * 1e6));
		server_snapshot(&sv);
		secs = (double)(cb_now_ns() - t0) / 1e9;
		msgs = sv.s->msgs - sm0;
		__atomic_store_n(&flags[1], 1, __ATOMIC_RELEASE);
		for (unsigned int i = 0; i < c; i++) {
			if (cb_reap(pids[i], NULL) && !err)
				err = lc[i].error ? lc[i].error : -EIO;
			entries_sum += lc[i].entries;
			client_msgs += lc[i].msgs;
		}
		if (!err && msgs) {
			cb_row_init(&r, "load", "clanq", "evq-spin15", 8);
			r.param = c;
			r.iters = msgs;
			r.mpps = (double)msgs / secs / 1e6;
			r.cpu_us = (sv.s->cpu_us - cpu0) / (double)msgs;
			/* the server's over its window, the clients' over theirs */
			r.syscalls = (double)(sv.s->entries - se0) / (double)msgs +
				     (double)entries_sum / (double)(client_msgs ? client_msgs : 1);
			cb_emit(&r);
		}
		if (server_stop(&sv) && !err)
			err = -EIO;
		cb_unshare(lc, sizeof(*lc) * c + 64);
	}
	return err;
}
