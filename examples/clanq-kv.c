// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-kv: a key-value service (GET and PUT of 8 B .. 64 KiB values
 * under 16-byte keys, in memory), over clanq connections or, with --tcp,
 * over TCP sockets and epoll: the same protocol, the same server and
 * client logic, so the two can be compared in the same boot.
 *
 *   clanq-kv server [--nic N] [--service S] [--tcp [--port P]] ...
 *   clanq-kv client [--nic N] [--node N] [--service S] [--tcp [--port P]]
 *                   [--conns C] [--window W] [--get PCT] [--keys K]
 *                   [--sizes LIST] [--ops M | --seconds S]
 *
 * The server is one thread: over clanq one net, every connection on its
 * event queue (clanq_net_wait()); over TCP one epoll set. Requests on a
 * connection are answered in order. An answer that finds no room (no
 * credit in the peer's ring, a full socket buffer) is kept in the
 * connection's own buffer and that connection is read no further until
 * it has gone (over clanq it is muted, clanq_conn_want(), so that the
 * loop sleeps instead of seeing its requests again), so one slow client
 * never stalls the others.
 *
 * The client keeps up to W requests in flight on each of its C
 * connections and checks every answer. A key belongs to one connection
 * (key index modulo C) and one client (the key's first 8 bytes are the
 * client's id), and the server answers a connection's requests in order,
 * so the client knows the exact version every GET must return; a value's
 * length and every byte of it are derived from its key and version. It
 * first PUTs every key once (not measured), then runs the mix.
 *
 * The wire (both transports, little endian): a request is struct
 * kv_req followed by vlen value bytes (PUT), an answer struct kv_resp
 * followed by vlen value bytes (a GET's hit). Over clanq one message is
 * one request or answer; over TCP they follow each other in the stream.
 * The server trusts nothing of it: a request whose length, operation or
 * value size is wrong closes its connection.
 *
 * Exit status: 0 the job was done and every answer was right; 1 a
 * failure (a wrong answer, the peer gone, the driver); 2 bad arguments.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <clanq.h>
#include <clanq/admin.h>
#include <clanq/net.h>

#include "example.h"

#define KV_KEY_LEN	16
#define KV_VALUE_MIN	8u
#define KV_VALUE_MAX	(64u << 10)
#define KV_GET		1u
#define KV_PUT		2u
/* answers' status */
#define KV_OK		0u
#define KV_NOT_FOUND	1u
#define KV_FULL		2u	/* the server's --max-bytes: the PUT was not stored */
#define KV_TOO_BIG	3u	/* the value does not fit this connection's answers */

struct kv_req {
	uint32_t op;		/* KV_GET, KV_PUT */
	uint32_t vlen;		/* PUT: value bytes that follow; GET: 0 */
	uint64_t id;		/* the client's, sent back in the answer */
	uint64_t version;	/* PUT: the value's; GET: 0 */
	uint8_t key[KV_KEY_LEN];
};

struct kv_resp {
	uint32_t status;	/* KV_OK, ... */
	uint32_t vlen;		/* value bytes that follow (a GET's hit) */
	uint64_t id;		/* the request's */
	uint64_t version;	/* GET: the value's; PUT: the one stored */
};

#define KV_REQ_MAX	(sizeof(struct kv_req) + KV_VALUE_MAX)
#define KV_RESP_MAX	(sizeof(struct kv_resp) + KV_VALUE_MAX)
#define KV_SERVICE	8u
#define KV_PORT		7070u
#define KV_MAX_SIZES	16
#define KV_MAX_EVENTS	64

/*
 * Rings big enough for the largest request and answer (a 64 KiB value
 * and its header) in one record, on both sides: a record is at most half
 * its ring less 16 bytes of framing (clanq_conn_eager_max()), so this is
 * about 132 KiB per direction per connection where the default is one
 * page. Longer messages would go in pieces (any ring carries any size
 * now), but a piece-wise message is not peeked in place, and its send or
 * receive, once begun, waits for the rest whatever CLANQ_MSG_DONTWAIT
 * says: a one-thread server must never wait on one client. Drop this
 * (and the eager checks) once the library can go on with a large
 * message without blocking.
 */
static void kv_ring_opts(struct clanq_conn_opts *o)
{
	o->rx_ring = (uint32_t)(2 * (KV_REQ_MAX + 16));
	o->tx_ring = o->rx_ring;
}

/* A growable byte buffer: [off, len) holds what is still to use. */
struct kv_buf {
	uint8_t *p;
	size_t off, len, cap;
};

static void buf_reserve(struct kv_buf *b, size_t room)
{
	if (b->off && b->cap - b->len < room) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	if (b->cap - b->len < room) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *p;

		while (cap - b->len < room)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			ex_fail("memory", -ENOMEM);
		b->p = p;
		b->cap = cap;
	}
}

static void buf_append(struct kv_buf *b, const void *data, size_t len)
{
	buf_reserve(b, len);
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

/* iov's bytes from skip on, into b */
static void buf_append_iov(struct kv_buf *b, const struct iovec *iov, int n,
			   size_t skip)
{
	for (int i = 0; i < n; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		buf_append(b, (const uint8_t *)iov[i].iov_base + skip,
			   iov[i].iov_len - skip);
		skip = 0;
	}
}

static size_t iov_bytes(const struct iovec *iov, int n)
{
	size_t len = 0;

	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	return len;
}

static uint64_t kv_mix(uint64_t x)	/* splitmix64's finaliser */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void tcp_nodelay_nonblock(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static struct sockaddr_in tcp_addr(const char *addr, unsigned int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		ex_usage_error("--addr: '%s' is not an IPv4 address", addr);
	return sa;
}

/* ---- the server ---------------------------------------------------------- */

struct kv_item {
	struct kv_item *next;
	uint8_t key[KV_KEY_LEN];
	uint64_t version;
	uint32_t len, cap;
	uint8_t *value;
};

struct kv_sconn {
	struct clanq_conn *c;	/* clanq */
	int fd;			/* TCP */
	unsigned int id;	/* accept order */
	bool stalled;		/* out holds an answer that waits for room */
	struct kv_buf in;	/* TCP: bytes read, not yet a whole request */
	struct kv_buf out;	/* the answer (or its rest) that waits */
};

struct kv_server {
	bool tcp;
	struct clanq_net *net;
	struct clanq_listener *l;
	int epfd, lfd;
	unsigned int max_conns, verbose;
	/* the table: chained, a power of two of buckets, a random seed */
	struct kv_item **buckets;
	uint64_t nr_buckets, nr_items, bytes, max_bytes, seed;
	/* counters */
	unsigned int open, accepted, closed, reset, bad;
	uint64_t gets, hits, puts, full, too_big, stalls;
};

static uint64_t kv_hash(const struct kv_server *s, const uint8_t *key)
{
	uint64_t a, b;

	memcpy(&a, key, 8);
	memcpy(&b, key + 8, 8);
	/* seeded: a client cannot choose keys that all land in one chain */
	return kv_mix(a ^ s->seed) ^ kv_mix(b + s->seed);
}

static struct kv_item **kv_find(struct kv_server *s, const uint8_t *key)
{
	struct kv_item **p = &s->buckets[kv_hash(s, key) & (s->nr_buckets - 1)];

	while (*p && memcmp((*p)->key, key, KV_KEY_LEN))
		p = &(*p)->next;
	return p;
}

static void kv_grow(struct kv_server *s)
{
	uint64_t n = s->nr_buckets * 2;
	struct kv_item **b = calloc(n, sizeof(*b)), **old = s->buckets;

	if (!b)
		return;	/* longer chains, still right */
	for (uint64_t i = 0; i < s->nr_buckets; i++) {
		while (old[i]) {
			struct kv_item *it = old[i];
			uint64_t h = kv_hash(s, it->key) & (n - 1);

			old[i] = it->next;
			it->next = b[h];
			b[h] = it;
		}
	}
	free(old);
	s->buckets = b;
	s->nr_buckets = n;
}

/* PUT: 0, or KV_FULL at --max-bytes (the old value, if any, stays). */
static uint32_t kv_put(struct kv_server *s, const uint8_t *key, uint64_t version,
		       const uint8_t *value, uint32_t len)
{
	struct kv_item **p = kv_find(s, key), *it = *p;
	uint64_t more = it ? (len > it->cap ? len - it->cap : 0) : sizeof(*it) + len;
	uint8_t *v;

	if (s->bytes + more > s->max_bytes)
		return KV_FULL;
	if (!it) {
		it = calloc(1, sizeof(*it));
		v = malloc(len);
		if (!it || !v) {
			free(it);
			free(v);
			return KV_FULL;
		}
		memcpy(it->key, key, KV_KEY_LEN);
		it->value = v;
		it->cap = len;
		*p = it;
		s->nr_items++;
	} else if (len > it->cap) {
		v = realloc(it->value, len);
		if (!v)
			return KV_FULL;
		it->value = v;
		it->cap = len;
	}
	s->bytes += more;
	memcpy(it->value, value, len);
	it->len = len;
	it->version = version;
	if (s->nr_items > s->nr_buckets)
		kv_grow(s);
	return KV_OK;
}

/*
 * One request of len bytes: the answer's header in *resp, its value (a
 * GET's hit, max_answer bytes at most with the header) in *val. False
 * for a request that breaks the protocol: the caller drops the
 * connection.
 */
static bool kv_handle(struct kv_server *s, const uint8_t *msg, size_t len,
		      size_t max_answer, struct kv_resp *resp, const void **val)
{
	struct kv_req req;
	struct kv_item *it;
	uint32_t op, vlen;

	if (len < sizeof(req))
		return false;
	memcpy(&req, msg, sizeof(req));	/* read once: the peer's memory */
	op = le32toh(req.op);
	vlen = le32toh(req.vlen);
	if (len != sizeof(req) + vlen)
		return false;
	memset(resp, 0, sizeof(*resp));
	resp->id = req.id;
	*val = NULL;
	switch (op) {
	case KV_GET:
		if (vlen)
			return false;
		s->gets++;
		it = *kv_find(s, req.key);
		if (!it) {
			resp->status = htole32(KV_NOT_FOUND);
			return true;
		}
		s->hits++;
		resp->version = htole64(it->version);
		if (sizeof(*resp) + it->len > max_answer) {
			s->too_big++;
			resp->status = htole32(KV_TOO_BIG);
			return true;
		}
		resp->status = htole32(KV_OK);
		resp->vlen = htole32(it->len);
		*val = it->value;
		return true;
	case KV_PUT:
		if (vlen < KV_VALUE_MIN || vlen > KV_VALUE_MAX)
			return false;
		s->puts++;
		resp->status = htole32(kv_put(s, req.key, le64toh(req.version),
					      msg + sizeof(req), vlen));
		if (resp->status)
			s->full++;
		resp->version = req.version;
		return true;
	}
	return false;
}

static void sconn_gone(struct kv_server *s, struct kv_sconn *sc, const char *why)
{
	if (s->verbose)
		printf("  conn %u %s\n", sc->id, why);
	if (sc->c) {
		clanq_conn_close(sc->c);
	} else {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, sc->fd, NULL);
		close(sc->fd);
	}
	free(sc->in.p);
	free(sc->out.p);
	free(sc);
	s->open--;
	s->closed++;
}

static struct kv_sconn *sconn_new(struct kv_server *s)
{
	struct kv_sconn *sc = calloc(1, sizeof(*sc));

	if (!sc)
		ex_fail("memory", -ENOMEM);
	sc->fd = -1;
	sc->id = s->accepted++;
	s->open++;
	return sc;
}

/* -- over clanq -- */

/* The answer that waited: 0 sent, -EAGAIN still no room, -errno. */
static int clanq_flush_answer(struct kv_sconn *sc)
{
	int err;

	if (!sc->stalled)
		return 0;
	err = clanq_send(sc->c, sc->out.p, sc->out.len, CLANQ_MSG_DONTWAIT);
	if (err)
		return err;
	sc->out.len = 0;
	sc->stalled = false;
	/* its requests may be reported again */
	return clanq_conn_want(sc->c, CLANQ_NET_IN | CLANQ_NET_OUT);
}

/* Answer what sc has, in order, until it is drained or an answer waits. */
static void clanq_serve(struct kv_server *s, struct kv_sconn *sc)
{
	/* the client's ring, whatever it asked for: an answer in one record */
	size_t max_answer = clanq_conn_eager_max(sc->c);
	const void *data, *val;
	struct kv_resp resp;
	struct iovec iov[2];
	ssize_t n;
	int err;

	err = clanq_flush_answer(sc);
	if (err == -EAGAIN)
		return;
	for (;;) {
		if (err) {
			s->reset++;
			sconn_gone(s, sc, "reset");
			return;
		}
		n = clanq_recv_peek(sc->c, &data, CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n == 0) {
			sconn_gone(s, sc, "closed");
			return;
		}
		if (n < 0 && n != -EMSGSIZE) {
			err = (int)n;
			continue;
		}
		/* -EMSGSIZE: longer than our ring's record, so than any request */
		if (n < 0 || !kv_handle(s, data, (size_t)n, max_answer, &resp, &val)) {
			s->bad++;
			sconn_gone(s, sc, "broke the protocol");
			return;
		}
		iov[0] = (struct iovec){ &resp, sizeof(resp) };
		iov[1] = (struct iovec){ (void *)val, le32toh(resp.vlen) };
		err = clanq_sendv(sc->c, iov, val ? 2 : 1, CLANQ_MSG_DONTWAIT);
		if (err == -EAGAIN) {
			/* keep the answer, free the request's room in our ring */
			buf_append_iov(&sc->out, iov, val ? 2 : 1, 0);
			sc->stalled = true;
			s->stalls++;
			/*
			 * Muted for requests until the answer has gone: the
			 * loop sleeps rather than report them again and again
			 */
			err = clanq_conn_want(sc->c, CLANQ_NET_OUT) ?: -EAGAIN;
		}
		clanq_recv_done(sc->c);
		if (err == -EAGAIN)
			return;	/* CLANQ_NET_OUT says when to go on */
	}
}

static void clanq_accept_all(struct kv_server *s)
{
	struct clanq_conn_opts o = { 0 };
	struct clanq_conn *c;
	struct kv_sconn *sc;
	int err;

	kv_ring_opts(&o);
	for (;;) {
		if (s->open >= s->max_conns)
			return;	/* they wait in the backlog */
		err = clanq_accept(s->l, &c, &o, 0);
		if (err == -EAGAIN)
			return;
		if (err) {
			/* at max_conns, or a driver limit: the rest wait */
			fprintf(stderr, "%s: accept: %s\n", ex_prog, strerror(-err));
			return;
		}
		sc = sconn_new(s);
		sc->c = c;
		clanq_conn_set_cookie(c, (uint64_t)(uintptr_t)sc);
	}
}

static void clanq_server_step(struct kv_server *s, int64_t timeout_ns)
{
	struct clanq_net_event evs[KV_MAX_EVENTS];
	int n = clanq_net_wait(s->net, evs, KV_MAX_EVENTS, timeout_ns);

	if (n == -EINTR || n == -ETIMEDOUT)
		return;
	if (n < 0)
		ex_fail("wait", n);
	for (int i = 0; i < n; i++) {
		if (evs[i].what & CLANQ_NET_ACCEPT)
			clanq_accept_all(s);
		else if (evs[i].conn)
			clanq_serve(s, (struct kv_sconn *)(uintptr_t)
				    clanq_conn_get_cookie(evs[i].conn));
	}
}

/* -- over TCP -- */

static void tcp_want(struct kv_server *s, struct kv_sconn *sc, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = sc };

	epoll_ctl(s->epfd, EPOLL_CTL_MOD, sc->fd, &ev);
}

/* writev what it can; the rest into sc->out. 0, or -errno. */
static int tcp_answer(struct kv_server *s, struct kv_sconn *sc,
		      const struct iovec *iov, int n)
{
	size_t len = iov_bytes(iov, n);
	ssize_t w = writev(sc->fd, iov, n);

	if (w < 0 && errno != EAGAIN)
		return -errno;
	if (w < 0)
		w = 0;
	if ((size_t)w < len) {
		buf_append_iov(&sc->out, iov, n, (size_t)w);
		sc->stalled = true;
		s->stalls++;
		tcp_want(s, sc, EPOLLOUT);	/* and read no more till it is out */
	}
	return 0;
}

/* The whole requests in sc->in, in order, until one's answer waits. */
static int tcp_serve_buffered(struct kv_server *s, struct kv_sconn *sc)
{
	struct kv_buf *b = &sc->in;
	struct kv_resp resp;
	struct iovec iov[2];
	const void *val;
	struct kv_req req;
	int err;

	while (!sc->stalled && b->len - b->off >= sizeof(req)) {
		size_t need;

		memcpy(&req, b->p + b->off, sizeof(req));
		if (le32toh(req.vlen) > KV_VALUE_MAX)
			return -EPROTO;	/* before we wait for that much */
		need = sizeof(req) + le32toh(req.vlen);
		if (b->len - b->off < need) {
			buf_reserve(b, need - (b->len - b->off));
			break;
		}
		if (!kv_handle(s, b->p + b->off, need, SIZE_MAX, &resp, &val))
			return -EPROTO;
		iov[0] = (struct iovec){ &resp, sizeof(resp) };
		iov[1] = (struct iovec){ (void *)val, le32toh(resp.vlen) };
		/* answered (or copied) before the request's bytes are reused */
		err = tcp_answer(s, sc, iov, val ? 2 : 1);
		b->off += need;
		if (err)
			return err;
	}
	if (b->off == b->len)
		b->off = b->len = 0;
	return 0;
}

static void tcp_serve(struct kv_server *s, struct kv_sconn *sc, uint32_t events)
{
	ssize_t n;
	int err = 0;

	if (sc->stalled) {
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		n = write(sc->fd, sc->out.p + sc->out.off, sc->out.len - sc->out.off);
		if (n < 0 && errno != EAGAIN) {
			err = -errno;
			goto gone;
		}
		if (n > 0)
			sc->out.off += (size_t)n;
		if (sc->out.off < sc->out.len)
			return;
		sc->out.off = sc->out.len = 0;
		sc->stalled = false;
		tcp_want(s, sc, EPOLLIN);
		/* what came meanwhile is already in sc->in */
		err = tcp_serve_buffered(s, sc);
		if (err)
			goto gone;
		return;
	}
	buf_reserve(&sc->in, 16384);
	n = read(sc->fd, sc->in.p + sc->in.len, sc->in.cap - sc->in.len);
	if (n == 0) {
		sconn_gone(s, sc, "closed");
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		err = -errno;
		goto gone;
	}
	sc->in.len += (size_t)n;
	err = tcp_serve_buffered(s, sc);
	if (!err)
		return;
gone:
	if (err == -EPROTO) {
		s->bad++;
		sconn_gone(s, sc, "broke the protocol");
	} else {
		s->reset++;
		sconn_gone(s, sc, "reset");
	}
}

static void tcp_accept_all(struct kv_server *s)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct kv_sconn *sc;
	int fd;

	for (;;) {
		if (s->open >= s->max_conns)
			return;	/* they wait in the backlog */
		fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				fprintf(stderr, "%s: accept: %s\n", ex_prog, strerror(errno));
			return;
		}
		tcp_nodelay_nonblock(fd);
		sc = sconn_new(s);
		sc->fd = fd;
		ev.data.ptr = sc;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev))
			ex_fail("epoll_ctl", -errno);
	}
}

static void tcp_server_step(struct kv_server *s, int timeout_ms)
{
	struct epoll_event evs[KV_MAX_EVENTS];
	int n = epoll_wait(s->epfd, evs, KV_MAX_EVENTS, timeout_ms);

	if (n < 0 && errno == EINTR)
		return;
	if (n < 0)
		ex_fail("epoll_wait", -errno);
	for (int i = 0; i < n; i++) {
		if (!evs[i].data.ptr)
			tcp_accept_all(s);
		else
			tcp_serve(s, evs[i].data.ptr, evs[i].events);
	}
}

static void tcp_listen(struct kv_server *s, const char *addr, unsigned int port,
		       unsigned int backlog)
{
	struct sockaddr_in sa = tcp_addr(addr, port);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int one = 1;

	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		ex_fail("socket", -errno);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)))
		ex_fail(errno == EADDRINUSE ? "bind: port taken" : "bind", -errno);
	if (listen(s->lfd, (int)backlog))
		ex_fail("listen", -errno);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev))
		ex_fail("epoll", -errno);
}

struct kv_server_args {
	unsigned int nic, service, port, max_conns, backlog;
	const char *addr;
	unsigned long long spin_us, seconds, exit_after, max_bytes;
	bool tcp, verbose;
};

static int server(const struct kv_server_args *a)
{
	struct kv_server s = { .tcp = a->tcp, .lfd = -1, .epfd = -1 };
	struct clanq_net_attr attr = { .max_conns = a->max_conns };
	struct clanq_dev dev;
	uint64_t t0, deadline, now;
	int err;

	s.max_conns = a->max_conns;
	s.max_bytes = a->max_bytes;
	s.verbose = a->verbose;
	s.nr_buckets = 1024;
	s.buckets = calloc(s.nr_buckets, sizeof(*s.buckets));
	if (!s.buckets)
		ex_fail("memory", -ENOMEM);
	if (getrandom(&s.seed, sizeof(s.seed), 0) != sizeof(s.seed))
		s.seed = clanq_now_ns() ^ (uint64_t)getpid() << 32;
	if (a->tcp) {
		tcp_listen(&s, a->addr, a->port, a->backlog);
		printf("# clanq-kv server: TCP+epoll on %s port %u, up to %u connections\n",
		       a->addr, a->port, a->max_conns);
	} else {
		ex_open_net(&dev, &s.net, a->nic, &attr);
		clanq_net_set_spin(s.net, a->spin_us * 1000);
		err = clanq_listen(s.net, &s.l, a->service, a->backlog);
		if (err)
			ex_fail(err == -EADDRINUSE ? "listen: service taken" : "listen", err);
		printf("# clanq-kv server: clanq on node %u service %u, up to %u "
		       "connections, spin %llu us\n", dev.node, a->service,
		       a->max_conns, a->spin_us);
	}
	fflush(stdout);

	t0 = clanq_now_ns();
	deadline = a->seconds ? t0 + a->seconds * 1000000000ull : ~0ull;
	while (!ex_stop && (!a->exit_after || s.closed < a->exit_after)) {
		/* a clock read costs ~60 ns in the VM: only with a deadline */
		now = a->seconds ? clanq_now_ns() : 0;
		if (now >= deadline)
			break;
		if (a->tcp)
			tcp_server_step(&s, deadline == ~0ull ? -1 :
					(int)((deadline - now) / 1000000 + 1));
		else
			clanq_server_step(&s, deadline == ~0ull ? -1 :
					  (int64_t)(deadline - now));
	}
	printf("# clanq-kv server (%s): %.1f s\n", a->tcp ? "tcp" : "clanq",
	       (double)(clanq_now_ns() - t0) / 1e9);
	printf("total: %u accepted, %u open, %u closed (%u reset, %u broke the "
	       "protocol), %llu GETs (%llu hits), %llu PUTs (%llu refused: full), "
	       "%llu keys, %llu bytes stored, %llu answers waited for room\n",
	       s.accepted, s.open, s.closed, s.reset, s.bad,
	       (unsigned long long)s.gets, (unsigned long long)s.hits,
	       (unsigned long long)s.puts, (unsigned long long)s.full,
	       (unsigned long long)s.nr_items, (unsigned long long)s.bytes,
	       (unsigned long long)s.stalls);
	fflush(stdout);
	/* the peers read end of stream; the table goes with the process */
	if (a->tcp) {
		close(s.epfd);
		close(s.lfd);
	} else {
		clanq_net_close(s.net);
		clanq_close(&dev);
	}
	return 0;
}

/* ---- the client ---------------------------------------------------------- */

struct kv_slot {
	uint64_t id, t0;
	uint64_t version;	/* PUT: the one written; GET: the one expected (0: none) */
	uint32_t key, op;
	bool measured;
};

struct kv_cconn {
	unsigned int idx;
	struct clanq_conn *c;	/* clanq */
	int fd;			/* TCP */
	struct kv_buf in, out;	/* TCP: answers' bytes read, a request's rest */
	bool blocked;		/* no room for a request: wait for OUT */
	struct kv_slot *win;	/* requests in flight, oldest at head */
	unsigned int head, inflight;
	uint64_t prefill_next;	/* the next key it PUTs before the run */
};

struct kv_client {
	bool tcp;
	struct clanq_net *net;
	struct clanq_dev dev;
	int epfd;
	struct kv_cconn *cc;
	unsigned int conns, window, get_pct, nr_sizes;
	uint64_t keys;
	unsigned long long sizes[KV_MAX_SIZES];
	uint64_t cid;		/* the client's id: every key's first 8 bytes */
	uint64_t rng;
	uint64_t *ver;		/* per key: the last version PUT (0: none) */
	uint8_t *val;		/* a value to send */
	bool prefilling, stopping;
	/* the run */
	uint64_t next_id, inflight, ops, ops_limit, deadline, t_start, t_end;
	uint64_t last_answer, gets, puts, misses, checked_bytes;
	uint64_t *lat_hist, lat_max;	/* ns, the counts of ops (KV_HIST_*) */
};

static uint64_t cl_rand(struct kv_client *cl)
{
	cl->rng += 0x9e3779b97f4a7c15ull;
	return kv_mix(cl->rng);
}

static void cl_fail(struct kv_client *cl, struct kv_cconn *cc, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: connection %u: ", ex_prog, cc->idx);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (after %llu answers)\n", (unsigned long long)cl->ops);
	exit(EX_FAIL);
}

static uint64_t value_seed(const struct kv_client *cl, uint32_t key, uint64_t version)
{
	return kv_mix(kv_mix(cl->cid ^ key) + version);
}

static uint32_t value_len(const struct kv_client *cl, uint32_t key, uint64_t version)
{
	return (uint32_t)cl->sizes[value_seed(cl, key, version) % cl->nr_sizes];
}

/* The value of (key, version): len bytes, a word at a time. */
static void value_fill(const struct kv_client *cl, uint32_t key, uint64_t version,
		       uint8_t *p, uint32_t len)
{
	uint64_t x = value_seed(cl, key, version), w;

	for (uint32_t i = 0; i < len; i += 8) {
		x += 0x9e3779b97f4a7c15ull;
		w = kv_mix(x);
		memcpy(p + i, &w, len - i < 8 ? len - i : 8);
	}
}

/* -1 if p holds the value of (key, version), else the first wrong byte */
static long value_check(const struct kv_client *cl, uint32_t key, uint64_t version,
			const uint8_t *p, uint32_t len)
{
	uint64_t x = value_seed(cl, key, version), w;

	for (uint32_t i = 0; i < len; i += 8) {
		x += 0x9e3779b97f4a7c15ull;
		w = kv_mix(x);
		if (memcmp(p + i, &w, len - i < 8 ? len - i : 8))
			for (uint32_t j = 0; j < 8; j++)
				if (p[i + j] != ((const uint8_t *)&w)[j])
					return (long)(i + j);
	}
	return -1;
}

static void key_bytes(const struct kv_client *cl, uint32_t key, uint8_t *out)
{
	uint64_t a = htole64(cl->cid), b = htole64(key);

	memcpy(out, &a, 8);
	memcpy(out + 8, &b, 8);
}

/* Send one request: 0; -EAGAIN (nothing sent, wait for room); -errno. */
static int cc_send(struct kv_client *cl, struct kv_cconn *cc,
		   const struct iovec *iov, int n)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = cc };
	size_t len;
	ssize_t w;

	if (!cl->tcp)
		return clanq_sendv(cc->c, iov, n, CLANQ_MSG_DONTWAIT);
	len = iov_bytes(iov, n);
	w = writev(cc->fd, iov, n);
	if (w < 0 && errno != EAGAIN)
		return -errno;
	if (w < 0) {
		epoll_ctl(cl->epfd, EPOLL_CTL_MOD, cc->fd, &ev);
		return -EAGAIN;
	}
	if ((size_t)w < len) {
		/* it is sent, in part: the rest goes when there is room */
		buf_append_iov(&cc->out, iov, n, (size_t)w);
		cc->blocked = true;
		epoll_ctl(cl->epfd, EPOLL_CTL_MOD, cc->fd, &ev);
	}
	return 0;
}

/* What cc sends next: false for nothing now. */
static bool next_request(struct kv_client *cl, struct kv_cconn *cc,
			 uint32_t *op, uint32_t *key)
{
	if (cl->prefilling) {
		if (cc->prefill_next >= cl->keys)
			return false;
		*op = KV_PUT;
		*key = (uint32_t)cc->prefill_next;
		return true;
	}
	if (cl->stopping)
		return false;
	if (cl->ops_limit && cl->ops + cl->inflight >= cl->ops_limit)
		return false;
	/* cc's keys: idx, idx + conns, ... */
	*key = (uint32_t)(cc->idx + cl->conns *
			  (cl_rand(cl) % ((cl->keys - cc->idx + cl->conns - 1) / cl->conns)));
	*op = cl_rand(cl) % 100 < cl->get_pct ? KV_GET : KV_PUT;
	return true;
}

/* Keep cc's window full. */
static void cc_fill(struct kv_client *cl, struct kv_cconn *cc)
{
	struct kv_req req;
	struct iovec iov[2];
	struct kv_slot *sl;
	uint32_t op, key, vlen = 0;
	uint64_t version;
	int err;

	while (!cc->blocked && cc->inflight < cl->window && next_request(cl, cc, &op, &key)) {
		memset(&req, 0, sizeof(req));
		req.op = htole32(op);
		req.id = htole64(cl->next_id);
		key_bytes(cl, key, req.key);
		version = op == KV_PUT ? cl->ver[key] + 1 : cl->ver[key];
		iov[0] = (struct iovec){ &req, sizeof(req) };
		if (op == KV_PUT) {
			vlen = value_len(cl, key, version);
			value_fill(cl, key, version, cl->val, vlen);
			req.vlen = htole32(vlen);
			req.version = htole64(version);
			iov[1] = (struct iovec){ cl->val, vlen };
		}
		sl = &cc->win[(cc->head + cc->inflight) % cl->window];
		sl->t0 = clanq_now_ns();
		err = cc_send(cl, cc, iov, op == KV_PUT ? 2 : 1);
		if (err == -EAGAIN) {
			cc->blocked = true;	/* CLANQ_NET_OUT (EPOLLOUT) clears it */
			return;
		}
		if (err)
			cl_fail(cl, cc, "send: %s", strerror(-err));
		sl->id = cl->next_id++;
		sl->op = op;
		sl->key = key;
		sl->version = version;
		sl->measured = !cl->prefilling;
		if (op == KV_PUT)
			cl->ver[key] = version;
		if (cl->prefilling)
			cc->prefill_next += cl->conns;
		cc->inflight++;
		cl->inflight++;
	}
}

/*
 * Latencies in a log-linear histogram, as HdrHistogram keeps them: 64
 * buckets for each power of two of nanoseconds, so a percentile is off
 * by 1/64 (1.6 %) at most, and millions of requests cost 30 KiB, not a
 * sort of millions of samples at the end (seconds under emulation).
 */
#define KV_HIST_SUB	64u
#define KV_HIST_BUCKETS	(KV_HIST_SUB * 59)

static unsigned int hist_bucket(uint64_t ns)
{
	unsigned int e;

	if (ns < KV_HIST_SUB)
		return (unsigned int)ns;
	e = 63 - (unsigned int)__builtin_clzll(ns);	/* >= 6 */
	return (e - 5) * KV_HIST_SUB + (unsigned int)((ns >> (e - 6)) & (KV_HIST_SUB - 1));
}

/* the middle of bucket b, in ns */
static double hist_value(unsigned int b)
{
	unsigned int e = b / KV_HIST_SUB + 5, sub = b % KV_HIST_SUB;

	if (b < KV_HIST_SUB)
		return b;
	return (double)((uint64_t)(KV_HIST_SUB + sub) << (e - 6)) +
	       (double)(1ull << (e - 6)) / 2;
}

/* The q-quantile (0 < q <= 1) of the ops' latencies, in us */
static double hist_quantile(const struct kv_client *cl, double q)
{
	uint64_t want = (uint64_t)(q * (double)cl->ops + 0.999999), seen = 0;

	if (!want)
		want = 1;
	for (unsigned int b = 0; b < KV_HIST_BUCKETS; b++) {
		seen += cl->lat_hist[b];
		if (seen >= want)	/* the middle, but never past the max */
			return (hist_value(b) < (double)cl->lat_max ? hist_value(b) :
				(double)cl->lat_max) / 1000.0;
	}
	return (double)cl->lat_max / 1000.0;
}

static void record_latency(struct kv_client *cl, uint64_t ns)
{
	cl->lat_hist[hist_bucket(ns)]++;
	if (ns > cl->lat_max)
		cl->lat_max = ns;
}

/* One answer of len bytes on cc: checked against the oldest request. */
static void on_answer(struct kv_client *cl, struct kv_cconn *cc,
		      const uint8_t *msg, size_t len)
{
	uint64_t now = clanq_now_ns(), version;
	struct kv_slot *sl = &cc->win[cc->head];
	uint32_t status, vlen;
	struct kv_resp r;
	long bad;

	if (!cc->inflight)
		cl_fail(cl, cc, "an answer to no request");
	if (len < sizeof(r))
		cl_fail(cl, cc, "an answer of %zu bytes, shorter than its header", len);
	memcpy(&r, msg, sizeof(r));
	status = le32toh(r.status);
	vlen = le32toh(r.vlen);
	version = le64toh(r.version);
	if (le64toh(r.id) != sl->id)
		cl_fail(cl, cc, "answer %llu where %llu was due",
			(unsigned long long)le64toh(r.id), (unsigned long long)sl->id);
	if (len != sizeof(r) + vlen)
		cl_fail(cl, cc, "an answer of %zu bytes says %u value bytes", len, vlen);
	if (status == KV_FULL)
		cl_fail(cl, cc, "PUT of key %u: the server is full (its --max-bytes)", sl->key);
	if (sl->op == KV_PUT) {
		if (status != KV_OK || vlen || version != sl->version)
			cl_fail(cl, cc, "PUT of key %u version %llu: status %u, version %llu",
				sl->key, (unsigned long long)sl->version, status,
				(unsigned long long)version);
		cl->puts += sl->measured;
	} else if (!sl->version) {
		if (status != KV_NOT_FOUND || vlen)
			cl_fail(cl, cc, "GET of key %u, never written: status %u, %u bytes",
				sl->key, status, vlen);
		cl->misses++;
		cl->gets += sl->measured;
	} else {
		if (status == KV_TOO_BIG)
			cl_fail(cl, cc, "GET of key %u: the value does not fit the "
				"connection's answers", sl->key);
		if (status != KV_OK || version != sl->version)
			cl_fail(cl, cc, "GET of key %u: status %u, version %llu where "
				"%llu was written last", sl->key, status,
				(unsigned long long)version,
				(unsigned long long)sl->version);
		if (vlen != value_len(cl, sl->key, version))
			cl_fail(cl, cc, "GET of key %u version %llu: %u bytes, not %u",
				sl->key, (unsigned long long)version, vlen,
				value_len(cl, sl->key, version));
		bad = value_check(cl, sl->key, version, msg + sizeof(r), vlen);
		if (bad >= 0)
			cl_fail(cl, cc, "GET of key %u version %llu: byte %ld of %u is wrong",
				sl->key, (unsigned long long)version, bad, vlen);
		cl->checked_bytes += vlen;
		cl->gets += sl->measured;
	}
	if (sl->measured) {
		record_latency(cl, now - sl->t0);
		cl->ops++;
		cl->t_end = now;
	}
	cl->last_answer = now;
	cc->head = (cc->head + 1) % cl->window;
	cc->inflight--;
	cl->inflight--;
}

/* -- over clanq -- */

static void clanq_drain(struct kv_client *cl, struct kv_cconn *cc)
{
	const void *data;
	ssize_t n;

	for (;;) {
		n = clanq_recv_peek(cc->c, &data, CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			break;
		if (n == 0)
			cl_fail(cl, cc, "the server closed the connection");
		if (n < 0)
			cl_fail(cl, cc, "%s%s", strerror((int)-n), n == -ECONNRESET ?
				" (the server is gone)" : "");
		on_answer(cl, cc, data, (size_t)n);
		clanq_recv_done(cc->c);
	}
	cc_fill(cl, cc);
}

static void clanq_client_step(struct kv_client *cl)
{
	struct clanq_net_event evs[KV_MAX_EVENTS];
	int n = clanq_net_wait(cl->net, evs, KV_MAX_EVENTS, 1000000000);

	if (n == -EINTR || n == -ETIMEDOUT)
		return;
	if (n < 0)
		ex_fail("wait", n);
	for (int i = 0; i < n; i++) {
		struct kv_cconn *cc;

		if (!evs[i].conn)
			continue;
		cc = (struct kv_cconn *)(uintptr_t)clanq_conn_get_cookie(evs[i].conn);
		if (evs[i].what & CLANQ_NET_OUT)
			cc->blocked = false;
		clanq_drain(cl, cc);
	}
}

/* -- over TCP -- */

static void tcp_client_event(struct kv_client *cl, struct kv_cconn *cc, uint32_t events)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = cc };
	struct kv_buf *b = &cc->in;
	struct kv_resp r;
	ssize_t n;

	if ((events & EPOLLOUT) && cc->out.len) {
		n = write(cc->fd, cc->out.p + cc->out.off, cc->out.len - cc->out.off);
		if (n < 0 && errno != EAGAIN)
			cl_fail(cl, cc, "send: %s", strerror(errno));
		if (n > 0)
			cc->out.off += (size_t)n;
		if (cc->out.off == cc->out.len)
			cc->out.off = cc->out.len = 0;
	}
	if ((events & EPOLLOUT) && !cc->out.len) {
		/* room again: no more EPOLLOUT till the next request waits */
		cc->blocked = false;
		epoll_ctl(cl->epfd, EPOLL_CTL_MOD, cc->fd, &ev);
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
		buf_reserve(b, 16384);
		n = read(cc->fd, b->p + b->len, b->cap - b->len);
		if (n == 0)
			cl_fail(cl, cc, "the server closed the connection");
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			cl_fail(cl, cc, "%s%s", strerror(errno), errno == ECONNRESET ?
				" (the server is gone)" : "");
		if (n > 0)
			b->len += (size_t)n;
		while (b->len - b->off >= sizeof(r)) {
			size_t need;

			memcpy(&r, b->p + b->off, sizeof(r));
			if (le32toh(r.vlen) > KV_VALUE_MAX)
				cl_fail(cl, cc, "an answer says %u value bytes", le32toh(r.vlen));
			need = sizeof(r) + le32toh(r.vlen);
			if (b->len - b->off < need) {
				buf_reserve(b, need - (b->len - b->off));
				break;
			}
			on_answer(cl, cc, b->p + b->off, need);
			b->off += need;
		}
		if (b->off == b->len)
			b->off = b->len = 0;
	}
	cc_fill(cl, cc);
}

static void tcp_client_step(struct kv_client *cl)
{
	struct epoll_event evs[KV_MAX_EVENTS];
	int n = epoll_wait(cl->epfd, evs, KV_MAX_EVENTS, 1000);

	if (n < 0 && errno == EINTR)
		return;
	if (n < 0)
		ex_fail("epoll_wait", -errno);
	for (int i = 0; i < n; i++)
		tcp_client_event(cl, evs[i].data.ptr, evs[i].events);
}

/* A TCP connect, a refusal retried for 5 s as ex_connect() does: 0, -errno. */
static int tcp_connect(struct kv_client *cl, struct kv_cconn *cc,
		       const struct sockaddr_in *sa)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = cc };
	uint64_t until = clanq_now_ns() + 5000000000ull;
	int fd;

	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (!connect(fd, (const struct sockaddr *)sa, sizeof(*sa)))
			break;
		close(fd);
		if (errno != ECONNREFUSED || clanq_now_ns() > until)
			return -errno;
		usleep(20000);
	}
	tcp_nodelay_nonblock(fd);
	cc->fd = fd;
	if (epoll_ctl(cl->epfd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	return 0;
}

struct kv_client_args {
	unsigned int nic, node, service, port, conns, window, get_pct, nr_sizes;
	const char *addr;
	unsigned long long keys, ops, seconds, spin_us, sizes[KV_MAX_SIZES];
	bool tcp, spin_set;
};

static void client_connect(struct kv_client *cl, const struct kv_client_args *a)
{
	struct clanq_net_attr attr = { .max_conns = a->conns };
	struct clanq_conn_opts o = { 0 };
	struct sockaddr_in sa;
	int err;

	if (cl->tcp) {
		sa = tcp_addr(a->addr, a->port);
		cl->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (cl->epfd < 0)
			ex_fail("epoll", -errno);
	} else {
		ex_open_net(&cl->dev, &cl->net, a->nic, &attr);
		if (a->spin_set)
			clanq_net_set_spin(cl->net, a->spin_us * 1000);
		kv_ring_opts(&o);
	}
	for (unsigned int i = 0; i < cl->conns; i++) {
		struct kv_cconn *cc = &cl->cc[i];

		cc->idx = i;
		cc->fd = -1;
		cc->prefill_next = i;
		cc->win = calloc(cl->window, sizeof(*cc->win));
		if (!cc->win)
			ex_fail("memory", -ENOMEM);
		if (cl->tcp) {
			err = tcp_connect(cl, cc, &sa);
			if (err)
				ex_fail(err == -ECONNREFUSED ? "connect: refused (is the "
					"server there?)" : "connect", err);
			continue;
		}
		err = ex_connect(cl->net, &cc->c, a->node, a->service, &o);
		if (err)
			ex_fail(err == -ECONNREFUSED ? "connect: refused (is the server "
				"there?)" : "connect", err);
		if (clanq_conn_eager_max(cc->c) < KV_REQ_MAX) {
			fprintf(stderr, "%s: the server's ring takes %zu bytes in one "
				"record, not %zu\n", ex_prog,
				clanq_conn_eager_max(cc->c), KV_REQ_MAX);
			exit(EX_FAIL);
		}
		clanq_conn_set_cookie(cc->c, (uint64_t)(uintptr_t)cc);
	}
}

static bool prefill_left(const struct kv_client *cl)
{
	for (unsigned int i = 0; i < cl->conns; i++)
		if (cl->cc[i].prefill_next < cl->keys)
			return true;
	return false;
}

/* Until the phase is over and every answer is in, each checked as it comes. */
static void client_run_until_idle(struct kv_client *cl)
{
	for (unsigned int i = 0; i < cl->conns; i++)
		cc_fill(cl, &cl->cc[i]);
	cl->last_answer = clanq_now_ns();
	while (cl->inflight || (cl->prefilling ? prefill_left(cl) : !cl->stopping)) {
		uint64_t now;

		if (cl->tcp)
			tcp_client_step(cl);
		else
			clanq_client_step(cl);
		now = clanq_now_ns();
		if (!cl->prefilling && !cl->stopping &&
		    ((cl->deadline && now >= cl->deadline) || ex_stop ||
		     (cl->ops_limit && cl->ops + cl->inflight >= cl->ops_limit)))
			cl->stopping = true;
		if (cl->inflight && now - cl->last_answer > 10000000000ull) {
			fprintf(stderr, "%s: no answer for 10 s (%llu in flight)\n",
				ex_prog, (unsigned long long)cl->inflight);
			exit(EX_FAIL);
		}
		if (ex_stop && cl->prefilling)
			ex_fail("interrupted", -EINTR);
	}
}

static int client(const struct kv_client_args *a)
{
	struct kv_client cl = {
		.tcp = a->tcp, .conns = a->conns, .window = a->window,
		.get_pct = a->get_pct, .keys = a->keys, .nr_sizes = a->nr_sizes,
		.epfd = -1,
	};
	uint64_t e0 = 0, e1 = 0, t0;
	uint32_t max_size = 0;
	double secs;

	memcpy(cl.sizes, a->sizes, sizeof(cl.sizes));
	for (unsigned int i = 0; i < cl.nr_sizes; i++)
		if (cl.sizes[i] > max_size)
			max_size = (uint32_t)cl.sizes[i];
	if (getrandom(&cl.cid, sizeof(cl.cid), 0) != sizeof(cl.cid))
		cl.cid = clanq_now_ns() ^ (uint64_t)getpid() << 40;
	cl.rng = cl.cid;
	cl.cc = calloc(cl.conns, sizeof(*cl.cc));
	cl.ver = calloc(cl.keys, sizeof(*cl.ver));
	cl.val = malloc(max_size);
	cl.lat_hist = calloc(KV_HIST_BUCKETS, sizeof(*cl.lat_hist));
	if (!cl.cc || !cl.ver || !cl.val || !cl.lat_hist)
		ex_fail("memory", -ENOMEM);
	client_connect(&cl, a);
	printf("# clanq-kv client: %s, %u connections x %u in flight, %u%% GET, "
	       "%llu keys, values of", a->tcp ? "TCP+epoll" : "clanq", cl.conns,
	       cl.window, cl.get_pct, (unsigned long long)cl.keys);
	for (unsigned int i = 0; i < cl.nr_sizes; i++)
		printf("%s%llu", i ? "," : " ", cl.sizes[i]);
	printf(" bytes\n");
	fflush(stdout);

	t0 = clanq_now_ns();
	cl.prefilling = true;
	client_run_until_idle(&cl);
	printf("# prefill: %llu PUTs in %.2f s\n", (unsigned long long)cl.keys,
	       (double)(clanq_now_ns() - t0) / 1e9);
	fflush(stdout);	/* a script waits for this line */

	cl.prefilling = false;
	cl.ops_limit = a->ops;
	if (!a->ops && !a->seconds)
		cl.ops_limit = 100000;
	if (!cl.tcp)
		(void)clanq_ctx_entries(&cl.dev, &e0);
	cl.t_start = cl.t_end = clanq_now_ns();
	cl.deadline = a->seconds ? cl.t_start + a->seconds * 1000000000ull : 0;
	client_run_until_idle(&cl);
	if (!cl.tcp)
		(void)clanq_ctx_entries(&cl.dev, &e1);
	if (!cl.ops)
		ex_fail("no request was answered", -ETIMEDOUT);
	secs = (double)(cl.t_end - cl.t_start) / 1e9;
	if (secs <= 0)
		secs = 1e-9;	/* one answer within a clock tick */
	if (!cl.tcp)
		/* e1 - e0 counts our own second read of the counter */
		printf("# %.3f system calls per request\n",
		       (double)(e1 - e0 - 1) / (double)cl.ops);
	printf("# every answer checked: %llu GETs (%llu of keys never written), "
	       "%llu PUTs, %llu value bytes compared\n",
	       (unsigned long long)cl.gets, (unsigned long long)cl.misses,
	       (unsigned long long)cl.puts, (unsigned long long)cl.checked_bytes);
	printf("%-10s %-6s %-6s %-10s %-8s %-11s %-9s %-9s %-10s %s\n", "#transport",
	       "conns", "window", "ops", "seconds", "ops/s", "p50[us]", "p99[us]",
	       "p99.9[us]", "max[us]");
	printf("%-10s %-6u %-6u %-10llu %-8.2f %-11.0f %-9.2f %-9.2f %-10.2f %.2f\n",
	       cl.tcp ? "tcp" : "clanq", cl.conns, cl.window,
	       (unsigned long long)cl.ops, secs, (double)cl.ops / secs,
	       hist_quantile(&cl, 0.5), hist_quantile(&cl, 0.99),
	       hist_quantile(&cl, 0.999), (double)cl.lat_max / 1000.0);
	fflush(stdout);

	for (unsigned int i = 0; i < cl.conns; i++) {
		if (cl.tcp)
			close(cl.cc[i].fd);
		else
			clanq_conn_close(cl.cc[i].c);
		free(cl.cc[i].win);
		free(cl.cc[i].in.p);
		free(cl.cc[i].out.p);
	}
	if (cl.tcp) {
		close(cl.epfd);
	} else {
		clanq_net_close(cl.net);
		clanq_close(&cl.dev);
	}
	free(cl.lat_hist);
	free(cl.val);
	free(cl.ver);
	free(cl.cc);
	return 0;
}

static void usage(void)
{
	printf("usage: %s server [options]\n"
	       "       %s client [options]\n"
	       "A key-value service (GET, PUT; 8 B .. 64 KiB values) over clanq or TCP.\n\n"
	       "  -n, --nic N          our /dev/clanqN (default 0)\n"
	       "  -s, --service S      the server's service, 1..65535 (default %u)\n"
	       "  -T, --tcp            TCP sockets and epoll instead of clanq\n"
	       "  -A, --addr ADDR      TCP: the server's IPv4 address (default 127.0.0.1)\n"
	       "  -P, --port P         TCP: the server's port (default %u)\n"
	       "      --spin-us US     clanq: spin this long before blocking\n"
	       "                       (default: the library's, 15)\n"
	       "server:\n"
	       "      --max-conns N    connections at once (default 1024)\n"
	       "  -b, --backlog N      connections waiting for accept (default 128)\n"
	       "  -M, --max-bytes B    memory for keys and values (default 256m);\n"
	       "                       a PUT beyond it is refused\n"
	       "  -t, --seconds S      stop after S seconds (default: at a signal)\n"
	       "  -x, --exit-after N   stop once N connections have come and gone\n"
	       "  -v, --verbose        a line for every connection that goes\n"
	       "client:\n"
	       "  -N, --node NODE      the server's node (default 0)\n"
	       "  -c, --conns C        connections (default 4)\n"
	       "  -w, --window W       requests in flight per connection (default 1)\n"
	       "  -g, --get PCT        GETs in percent of requests (default 90)\n"
	       "  -k, --keys K         keys, each PUT once first (default 1000)\n"
	       "  -S, --sizes LIST     value sizes, 8..64k, e.g. 8,1k,64k (default 8)\n"
	       "  -m, --ops M          stop after M requests (default 100000)\n"
	       "  -t, --seconds S      stop after S seconds instead\n"
	       "  -h, --help           this text\n\n"
	       "The client checks every answer, and prints a line of columns:\n"
	       "transport conns window ops seconds ops/s p50 p99 p99.9 max (us).\n"
	       "Exit status: 0 done and every answer right, 1 failed, 2 bad arguments.\n",
	       ex_prog, ex_prog, KV_SERVICE, KV_PORT);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "service", required_argument, NULL, 's' },
		{ "tcp", no_argument, NULL, 'T' },
		{ "addr", required_argument, NULL, 'A' },
		{ "port", required_argument, NULL, 'P' },
		{ "spin-us", required_argument, NULL, 'U' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "exit-after", required_argument, NULL, 'x' },
		{ "backlog", required_argument, NULL, 'b' },
		{ "max-bytes", required_argument, NULL, 'M' },
		{ "seconds", required_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "node", required_argument, NULL, 'N' },
		{ "conns", required_argument, NULL, 'c' },
		{ "window", required_argument, NULL, 'w' },
		{ "get", required_argument, NULL, 'g' },
		{ "keys", required_argument, NULL, 'k' },
		{ "sizes", required_argument, NULL, 'S' },
		{ "ops", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct kv_server_args sa = {
		.service = KV_SERVICE, .port = KV_PORT, .max_conns = 1024,
		.backlog = 128, .addr = "127.0.0.1", .spin_us = 15,
		.max_bytes = 256ull << 20,
	};
	struct kv_client_args ca = {
		.service = KV_SERVICE, .port = KV_PORT, .conns = 4, .window = 1,
		.get_pct = 90, .keys = 1000, .addr = "127.0.0.1", .nr_sizes = 1,
		.sizes = { 8 },
	};
	const char *conns = NULL, *exit_after = NULL, *max_conns = NULL;
	bool is_server;
	int opt;

	ex_prog = "clanq-kv";
	/* the options may come before or after the role (GNU getopt permutes) */
	while ((opt = getopt_long(argc, argv, "n:s:TA:P:b:M:t:vx:N:c:w:g:k:S:m:h",
				  opts, NULL)) != -1) {
		switch (opt) {
		case 'n': sa.nic = ca.nic = (unsigned int)ex_parse_num("--nic", optarg, 0, 255); break;
		case 's': sa.service = ca.service = (unsigned int)ex_parse_num("--service",
						optarg, 1, CLANQ_SERVICE_MAX); break;
		case 'T': sa.tcp = ca.tcp = true; break;
		case 'A': sa.addr = ca.addr = optarg; break;
		case 'P': sa.port = ca.port = (unsigned int)ex_parse_num("--port", optarg,
								      1, 65535); break;
		case 'U': sa.spin_us = ca.spin_us = ex_parse_num("--spin-us", optarg, 0,
								 10000000);
			  ca.spin_set = true; break;
		case 'C': max_conns = optarg; break;
		case 'b': sa.backlog = (unsigned int)ex_parse_num("--backlog", optarg, 1,
								  65536); break;
		case 'M': sa.max_bytes = ex_parse_num("--max-bytes", optarg, 4096,
						      1ull << 40); break;
		case 't': sa.seconds = ca.seconds = ex_parse_num("--seconds", optarg, 1,
								 1ull << 32); break;
		case 'v': sa.verbose = true; break;
		case 'x': exit_after = optarg; break;
		case 'N': ca.node = (unsigned int)ex_parse_num("--node", optarg, 0,
							       0xfffffffeull); break;
		case 'c': conns = optarg; break;
		case 'w': ca.window = (unsigned int)ex_parse_num("--window", optarg, 1,
								 4096); break;
		case 'g': ca.get_pct = (unsigned int)ex_parse_num("--get", optarg, 0, 100); break;
		case 'k': ca.keys = ex_parse_num("--keys", optarg, 1, 1u << 30); break;
		case 'S': ca.nr_sizes = ex_parse_list("--sizes", optarg, KV_VALUE_MIN,
						      KV_VALUE_MAX, ca.sizes,
						      KV_MAX_SIZES); break;
		case 'm': ca.ops = ex_parse_num("--ops", optarg, 1, 1ull << 32); break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	is_server = ex_is_server(argc, argv);
	ex_catch_signals();
	/* a peer's reset is an error a write returns, not a signal */
	signal(SIGPIPE, SIG_IGN);

	if (is_server) {
		if (conns)
			ex_usage_error("server: --conns is the client's (the server "
				       "has --max-conns)");
		if (max_conns)
			sa.max_conns = (unsigned int)ex_parse_num("--max-conns",
								  max_conns, 1, 1u << 20);
		if (exit_after)
			sa.exit_after = ex_parse_num("--exit-after", exit_after, 1,
						     1ull << 32);
		return server(&sa);
	}
	if (max_conns || exit_after)
		ex_usage_error("client: --max-conns and --exit-after are the server's");
	if (conns)
		ca.conns = (unsigned int)ex_parse_num("--conns", conns, 1, 1u << 16);
	if (ca.keys < ca.conns)
		ex_usage_error("--keys: %llu keys for %u connections (one at least each)",
			       ca.keys, ca.conns);
	return client(&ca);
}
