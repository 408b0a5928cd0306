// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Messages longer than a ring's record (lib/msg.c: a LARGE record and
 * its fragments), through the real driver, with the default rings:
 *
 *  1. every size around the eager limit and the ring's length, odd
 *     sizes, 1 MiB and 64 MiB, every byte checked, PIO and RDMA only,
 *     blocking and polling; a buffer one byte short (-EMSGSIZE, the
 *     message still there), clanq_recv_size(), clanq_recv_peek();
 *  2. clanq_sendv()/clanq_recvv() with odd, different splits;
 *  3. the largest message the VM's memory holds, up to the 1 GiB limit;
 *  4. the sender killed halfway through a 64 MiB message: the receiver
 *     gets -ECONNRESET, not a hang and not half a message;
 *  5. a hostile sender writing LARGE, FRAG and BULK records by hand
 *     through its aperture: bad lengths, fragments out of place, a FIN
 *     or a message inside a large one, pieces of a window never offered
 *     or outside the one offered; the receiver refuses (-EPROTO, -EPIPE)
 *     and allocates nothing for the length it was told (but its window);
 *  6. the bulk window: none asked for, an offer that cannot be imported,
 *     its credit scribbled on (test_bulk_window's comment);
 *  7. the net's budget of windows (test_bulk_budget).
 *
 * Runs in the test VM (nr_nics=2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <clanq/admin.h>
#include <clanq/net.h>

#include "itest.h"
#include "../../lib/net_internal.h"	/* the hostile sender's raw records */

#define SERVICE		4343
#define BIG		(64u << 20)
/*
 * How long an accept waits for a child: some fill tens of MiB before
 * they connect, which took over 10 s in the debug VM on a loaded host.
 */
#define ACCEPT_NS	(60 * ITEST_NS_PER_S)
#define MAX_SIZES	64
/* the 1 GiB message's sender repeats one block: odd, so no fragment lines up */
#define BLOCK		((1u << 20) + 7)

static uint8_t pat(uint32_t seq, uint64_t i)
{
	return (uint8_t)(seq * 131 + i * 7 + (i >> 9) * 13 + (i >> 17));
}

static void fill(uint8_t *p, uint64_t len, uint32_t seq)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = pat(seq, i);
}

/* The first byte that is not what seq's message holds there, or -1. */
static int64_t first_bad(const uint8_t *p, uint64_t len, uint32_t seq, uint64_t period)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != pat(seq, period ? i % period : i))
			return (int64_t)i;
	return -1;
}

static void *big_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Resident bytes of this process, now. */
static uint64_t rss_now(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * The sizes both sides go through, from the eager limit e (the longest
 * message in one record of a default ring): around e, around the ring's
 * length and its multiples of e, odd ones, 1 MiB, 64 MiB.
 */
static unsigned int make_sizes(uint64_t e, uint64_t *s)
{
	static const uint64_t fixed[] = {
		1, 2, 3, 7, 8, 9, 12345, 65535, 65536, 65537, 99991, 262147,
		1u << 20, (1u << 20) + 3, 4u << 20, BIG,
	};
	uint64_t ring = CLANQ_CONN_RING_DEFAULT;
	unsigned int n = 0, i;
	int d;

	for (d = -2; d <= 2; d++)
		s[n++] = e + d;
	for (i = 2; i <= 3; i++)
		for (d = -1; d <= 1; d++)
			s[n++] = i * e + d;
	for (d = -1; d <= 1; d++) {
		s[n++] = ring + d;
		s[n++] = 2 * ring + d;
	}
	for (i = 0; i < ARRAY_SIZE(fixed); i++)
		s[n++] = fixed[i];
	return n;
}

/* Odd pieces (some empty) of len bytes: iov[0 .. return). */
static int split(struct iovec *iov, uint8_t *base, uint64_t len, unsigned int salt)
{
	uint64_t off = 0, piece;
	int n = 0;

	for (unsigned int k = 0; off < len; k++) {
		piece = k % 11 == 5 ? 0 : 1 + (k * salt + 2 * k) % 5003;
		if (piece > len - off)
			piece = len - off;
		iov[n].iov_base = base + off;
		iov[n++].iov_len = piece;
		off += piece;
	}
	return n;
}

static int connect_retry(struct clanq_net *net, struct clanq_conn **c,
			 const struct clanq_conn_opts *o)
{
	int err;

	do {
		err = clanq_connect(net, c, 0, SERVICE, o);
	} while (err == -ECONNREFUSED && (itest_sleep_ns(10 * ITEST_NS_PER_MS), 1));
	return err;
}

/*
 * Close only once the receiver has it all: a FIN goes only if the ring
 * has room for it (closing never waits), and the last large message
 * fills the ring up to its end.
 */
static void wait_ack(struct clanq_conn *c)
{
	char ack;

	CHILD_CHECK_INT(clanq_recv(c, &ack, 1, 0), 1);
}

static int send_all(struct clanq_conn *c, const void *buf, uint64_t len, unsigned int flags)
{
	int err;

	do {
		err = clanq_send(c, buf, len, flags);
	} while (err == -EAGAIN);
	return err;
}

static ssize_t recv_all(struct clanq_conn *c, void *buf, uint64_t len, unsigned int flags)
{
	ssize_t n;

	do {
		n = clanq_recv(c, buf, len, flags);
	} while (n == -EAGAIN);
	return n;
}

/* the scatter phase's sizes: eager, just over, many pieces */
static uint64_t scatter_size(uint64_t e, unsigned int i)
{
	const uint64_t s[] = { 1, e, e + 1, 3 * e + 7, 65537, (1u << 20) + 3 };

	return i < ARRAY_SIZE(s) ? s[i] : 0;
}

#define NR_SCATTER	6

struct sizes_arg {
	struct clanq_conn_opts opts;
};

/* 1, 2. The sender: node 1, every size, then the scattered ones, then close. */
static void sizes_sender(void *p)
{
	const struct sizes_arg *a = p;
	uint64_t sizes[MAX_SIZES], len;
	struct iovec *iov = calloc(4096, sizeof(*iov));
	uint8_t *out = big_alloc(BIG + 16);
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	unsigned int n, i;
	int cnt;

	CHILD_CHECK(out && iov);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(connect_retry(net, &c, &a->opts), 0);
	CHILD_CHECK(clanq_conn_max_msg(c) == CLANQ_CONN_MSG_MAX);
	n = make_sizes(clanq_conn_eager_max(c), sizes);
	/* nothing, or more than the limit: refused, nothing sent */
	CHILD_CHECK_INT(clanq_send(c, out, 0, 0), -EINVAL);
	CHILD_CHECK_INT(clanq_send(c, out, CLANQ_CONN_MSG_MAX + 1, 0), -EMSGSIZE);
	for (i = 0; i < n; i++) {
		fill(out, sizes[i], i);
		CHILD_CHECK_INT(send_all(c, out, sizes[i], i % 2 ? CLANQ_MSG_DONTWAIT : 0), 0);
	}
	for (i = 0; i < NR_SCATTER; i++) {
		len = scatter_size(clanq_conn_eager_max(c), i);
		fill(out, len, 1000 + i);
		cnt = split(iov, out, len, 37 + 2 * i);
		CHILD_CHECK(cnt <= 4096);
		CHILD_CHECK_INT(clanq_sendv(c, iov, cnt, 0), 0);
	}
	/* RDMA only: the messages of 1 MiB and more went from their own pages */
	if (a->opts.flags & CLANQ_CONN_RDMA_ONLY)
		CHILD_CHECK(c->zc_sends >= 3 && c->zc_done == c->zc_sends && !c->bulk_tx.base);
	else
		CHILD_CHECK(c->zc_sends == 0 && c->bulk_tx.base);
	wait_ack(c);
	CHILD_CHECK_INT(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

static void run_sizes(uint32_t conn_flags)
{
	struct sizes_arg a = { { .flags = conn_flags } };
	struct iovec *iov = calloc(4096, sizeof(*iov));
	uint8_t *in = big_alloc(BIG + 16);
	uint64_t sizes[MAX_SIZES], len, e;
	struct clanq_conn_stats st;
	struct clanq_listener *l;
	const void *data;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	unsigned int n, i;
	ssize_t got;
	pid_t pid;
	int cnt;

	assert_non_null(in);
	assert_non_null(iov);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, 8), 0);
	pid = itest_fork(sizes_sender, &a);
	assert_int_equal(clanq_accept(l, &c, &a.opts, ACCEPT_NS), 0);
	/* the peer's ring is as long as ours: its eager limit is ours */
	e = clanq_conn_eager_max(c);
	assert_true(e >= 1000 && e < CLANQ_CONN_RING_DEFAULT);
	n = make_sizes(e, sizes);
	for (i = 0; i < n; i++) {
		len = sizes[i];
		if (i % 3 == 0)
			assert_int_equal(clanq_recv_size(c, 0), (ssize_t)len);
		if (i % 4 == 0 && len > 1) {
			/* one byte short: refused, and still there */
			assert_int_equal(clanq_recv(c, in, len - 1, 0), -EMSGSIZE);
			assert_int_equal(clanq_recv_size(c, 0), (ssize_t)len);
		}
		if (len > e) {
			/* not whole in the ring: peek leaves it for clanq_recv() */
			assert_int_equal(clanq_recv_peek(c, &data, 0), -EMSGSIZE);
			clanq_recv_done(c);
		}
		memset(in, 0xee, len + 16);
		got = recv_all(c, in, len + (i % 5 ? 0 : 9), i % 2 ? 0 : CLANQ_MSG_DONTWAIT);
		if (got != (ssize_t)len)
			fail_msg("size %llu (#%u): got %zd", (unsigned long long)len, i, got);
		if (first_bad(in, len, i, 0) >= 0)
			fail_msg("size %llu: byte %lld wrong", (unsigned long long)len,
				 (long long)first_bad(in, len, i, 0));
		assert_int_equal(in[len], 0xee);	/* and nothing past it */
	}
	for (i = 0; i < NR_SCATTER; i++) {
		len = scatter_size(e, i);
		memset(in, 0xee, len + 16);
		cnt = split(iov, in, len + 3, 53 + 2 * i);	/* 3 bytes of room more */
		got = clanq_recvv(c, iov, cnt, 0);
		if (got != (ssize_t)len)
			fail_msg("recvv %llu: got %zd", (unsigned long long)len, got);
		assert_int_equal(first_bad(in, len, 1000 + i, 0), -1);
		assert_int_equal(in[len], 0xee);
	}
	assert_int_equal(clanq_send(c, "k", 1, 0), 0);
	assert_int_equal(clanq_recv(c, in, BIG, 0), 0);	/* end of stream */
	clanq_conn_stats(c, &st);
	assert_int_equal(st.msgs_in, n + NR_SCATTER);
	/* the bulk window was offered and carried (at least) the 64 MiB */
	assert_non_null(c->bulk.mem);
	assert_int_equal(c->bulk_cap, CLANQ_CONN_BULK_DEFAULT);
	if (c->bulk_head < BIG)
		fail_msg("%llu bytes through the bulk window", (unsigned long long)c->bulk_head);
	assert_true(itest_status_ok(itest_wait(pid, 120 * ITEST_NS_PER_S), "sender"));
	assert_int_equal(clanq_conn_close(c), 0);
	assert_int_equal(clanq_listener_close(l), 0);
	clanq_net_close(net);
	clanq_close(&dev);
	munmap(in, BIG + 16);
	free(iov);
}

static void test_sizes_pio(void **state)
{
	(void)state;
	run_sizes(0);
}

static void test_sizes_rdma_only(void **state)
{
	(void)state;
	run_sizes(CLANQ_CONN_RDMA_ONLY);
}

/* 3. The largest message memory allows: the sender repeats one block. */
static void huge_sender(void *p)
{
	uint64_t len = *(const uint64_t *)p, off;
	uint8_t *block = malloc(BLOCK);
	struct iovec *iov = calloc(len / BLOCK + 1, sizeof(*iov));
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	int cnt = 0;

	CHILD_CHECK(block && iov);
	fill(block, BLOCK, 7);
	for (off = 0; off < len; off += BLOCK) {
		iov[cnt].iov_base = block;
		iov[cnt++].iov_len = len - off < BLOCK ? len - off : BLOCK;
	}
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(connect_retry(net, &c, NULL), 0);
	CHILD_CHECK_INT(clanq_sendv(c, iov, cnt, 0), 0);
	wait_ack(c);
	CHILD_CHECK_INT(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

static void test_largest(void **state)
{
	uint64_t avail_kb = 0, len = CLANQ_CONN_MSG_MAX, t0, ns;
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	char line[128];
	uint8_t *in;
	ssize_t got;
	FILE *f;
	pid_t pid;

	(void)state;
	f = fopen("/proc/meminfo", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", (unsigned long long *)&avail_kb) == 1)
			break;
	fclose(f);
	/* the receiver's buffer, and room to spare for the rest */
	while (len > BIG && len > avail_kb * 1024 * 8 / 10)
		len /= 2;
	printf("largest message: %llu MiB (%s; MemAvailable %llu MiB)\n",
	       (unsigned long long)(len >> 20),
	       len == CLANQ_CONN_MSG_MAX ? "the limit" : "what memory holds, not the limit",
	       (unsigned long long)(avail_kb >> 10));
	in = big_alloc(len);
	assert_non_null(in);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, 8), 0);
	pid = itest_fork(huge_sender, &len);
	assert_int_equal(clanq_accept(l, &c, NULL, ACCEPT_NS), 0);
	assert_int_equal(clanq_recv_size(c, 0), (ssize_t)len);
	t0 = clanq_now_ns();
	got = clanq_recv(c, in, len, 0);
	ns = clanq_now_ns() - t0;
	assert_int_equal(got, (ssize_t)len);
	printf("  received in %.2f s: %.0f MiB/s (debug kernel)\n", ns / 1e9,
	       (double)len / (1 << 20) / (ns / 1e9));
	assert_int_equal(first_bad(in, len, 7, BLOCK), -1);
	assert_int_equal(clanq_send(c, "k", 1, 0), 0);
	assert_int_equal(clanq_recv(c, in, len, 0), 0);
	assert_true(itest_status_ok(itest_wait(pid, 600 * ITEST_NS_PER_S), "sender"));
	assert_int_equal(clanq_conn_close(c), 0);
	assert_int_equal(clanq_listener_close(l), 0);
	clanq_net_close(net);
	clanq_close(&dev);
	munmap(in, len);
}

/* 4. Killed halfway through a 64 MiB message. */
static void dying_sender(void *p)
{
	const struct clanq_conn_opts *o = p;
	uint8_t *out = big_alloc(BIG);
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;

	CHILD_CHECK(out);
	fill(out, BIG, 3);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(connect_retry(net, &c, o), 0);
	CHILD_CHECK_INT(clanq_send(c, out, BIG, 0), 0);
	for (;;)	/* the killer comes before we get here, or the test fails */
		pause();
}

struct killer {
	struct clanq_conn *c;
	pid_t pid;
	uint64_t head_at_kill;
};

/* The bytes the receiver took: of its ring, and of its bulk window. */
static uint64_t taken(const struct clanq_conn *c)
{
	return __atomic_load_n(&c->rx_head, __ATOMIC_RELAXED) +
	       __atomic_load_n(&c->bulk_head, __ATOMIC_RELAXED);
}

/* Watches the receiver: half the message through, kill -9. */
static void *killer_thread(void *p)
{
	struct killer *k = p;
	uint64_t t0 = clanq_now_ns();

	while (taken(k->c) < BIG / 2) {
		if (clanq_now_ns() - t0 > 300 * ITEST_NS_PER_S)
			break;
		itest_sleep_ns(100 * 1000);
	}
	k->head_at_kill = taken(k->c);
	kill(k->pid, SIGKILL);
	return NULL;
}

static void run_killed(uint32_t conn_flags)
{
	struct clanq_conn_opts o = { .flags = conn_flags };
	uint8_t *in = big_alloc(BIG);
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct killer k;
	pthread_t th;
	uint64_t t0;
	ssize_t got;

	assert_non_null(in);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, 8), 0);
	k.pid = itest_fork(dying_sender, &o);
	assert_int_equal(clanq_accept(l, &k.c, &o, ACCEPT_NS), 0);
	assert_int_equal(clanq_recv_size(k.c, 0), BIG);
	assert_int_equal(pthread_create(&th, NULL, killer_thread, &k), 0);
	t0 = clanq_now_ns();
	got = clanq_recv(k.c, in, BIG, 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	printf("%s: killed at %llu of %u bytes (ring and window); the receiver: %zd after %.2f s\n",
	       conn_flags ? "RDMA only" : "PIO", (unsigned long long)k.head_at_kill, BIG,
	       got, (clanq_now_ns() - t0) / 1e9);
	assert_true(k.head_at_kill >= BIG / 2 && k.head_at_kill < BIG);
	assert_int_equal(got, -ECONNRESET);
	assert_int_equal(clanq_recv(k.c, in, BIG, 0), -ECONNRESET);
	assert_int_equal(clanq_conn_error(k.c), -ECONNRESET);
	itest_wait(k.pid, 10 * ITEST_NS_PER_S);
	assert_int_equal(clanq_conn_close(k.c), 0);
	assert_int_equal(clanq_listener_close(l), 0);
	clanq_net_close(net);
	clanq_close(&dev);
	munmap(in, BIG);
}

static void test_killed_mid_message(void **state)
{
	(void)state;
	run_killed(0);
	run_killed(CLANQ_CONN_RDMA_ONLY);
}

/* 5. A hostile sender: records written by hand into the peer's ring. */
enum hostile_case {
	H_HUGE,		/* LARGE of 1 TiB */
	H_OVER_LIMIT,	/* LARGE of the limit + 1, seen by peek */
	H_SMALL,	/* LARGE of no more than a record holds, seen by size */
	H_LONG_REC,	/* a LARGE record of 16 bytes */
	H_STRAY_FRAG,	/* a FRAG with no LARGE */
	H_FRAG_PAST,	/* fragments longer than announced */
	H_DATA_INSIDE,	/* a message inside a large one */
	H_FIN_INSIDE,	/* a FIN inside a large one */
	H_GIB_THEN_DATA,	/* a 1 GiB announcement, one fragment, then nonsense */
	H_STRAY_BULK,	/* a BULK piece of a window never offered */
	H_BULK_AT,	/* a piece that skips window bytes */
	H_BULK_PAST_END,	/* a piece across the window's end */
	H_BULK_LONG,	/* a piece longer than the message has left */
	H_BULK_RESERVED,	/* a reference with its reserved word set */
	NR_HOSTILE,
};

struct hostile_arg {
	int go[2];	/* parent to child: the case was checked */
};

static void raw_rec(struct clanq_conn *c, uint16_t type, uint32_t len,
		    const void *payload, uint32_t plen)
{
	uint64_t rec = clanq_rec_size(len), tail = c->tx_tail + rec;
	struct clanq_rec h = { len, type, 0 };
	char *r = c->tx.base + CLANQ_RING_HDR + c->tx_pos;

	CHILD_CHECK(c->tx_pos + rec <= c->tx_cap && plen <= len);
	memcpy(r, &h, sizeof(h));
	memcpy(r + CLANQ_REC_HDR, payload, plen);
	memcpy(r + rec - CLANQ_REC_TRAILER, &tail, sizeof(tail));
	__atomic_store_n((uint64_t *)c->tx.base, tail, __ATOMIC_RELEASE);
	c->tx_tail = tail;
	c->tx_pos += rec;
	CHILD_CHECK_INT(clanq_ap_flush(&c->tx, 0, 2 * sizeof(uint64_t)), 0);
}

static void raw_large(struct clanq_conn *c, uint64_t total)
{
	raw_rec(c, CLANQ_REC_LARGE, sizeof(total), &total, sizeof(total));
}

static void raw_bulk(struct clanq_conn *c, uint64_t at, uint32_t len, uint32_t reserved)
{
	struct clanq_bulk_ref r = { at, len, reserved };

	raw_rec(c, CLANQ_REC_BULK, sizeof(r), &r, sizeof(r));
}

static void hostile_sender(void *p)
{
	const struct hostile_arg *a = p;
	static uint8_t junk[4096];
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	uint32_t e;
	char token;

	memset(junk, 0x5a, sizeof(junk));
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	for (int k = 0; k < NR_HOSTILE; k++) {
		CHILD_CHECK_INT(connect_retry(net, &c, NULL), 0);
		CHILD_CHECK(c->tx.base);	/* PIO: the ring is ours to scribble on */
		e = (uint32_t)clanq_conn_eager_max(c);
		switch (k) {
		case H_HUGE:
			raw_large(c, 1ull << 40);
			break;
		case H_OVER_LIMIT:
			raw_large(c, CLANQ_CONN_MSG_MAX + 1);
			break;
		case H_SMALL:
			raw_large(c, e);
			break;
		case H_LONG_REC:
			raw_rec(c, CLANQ_REC_LARGE, 16, junk, 16);
			break;
		case H_STRAY_FRAG:
			raw_rec(c, CLANQ_REC_FRAG, 100, junk, 100);
			break;
		case H_FRAG_PAST:
			raw_large(c, e + 1);
			raw_rec(c, CLANQ_REC_FRAG, e, junk, e);
			raw_rec(c, CLANQ_REC_FRAG, 2, junk, 2);
			break;
		case H_DATA_INSIDE:
			raw_large(c, 3 * e);
			raw_rec(c, CLANQ_REC_FRAG, e, junk, e);
			raw_rec(c, CLANQ_REC_DATA, 5, junk, 5);
			break;
		case H_FIN_INSIDE:
			raw_large(c, 3 * e);
			raw_rec(c, CLANQ_REC_FRAG, e, junk, e);
			raw_rec(c, CLANQ_REC_FIN, 0, junk, 0);
			break;
		case H_GIB_THEN_DATA:
			raw_large(c, CLANQ_CONN_MSG_MAX);
			raw_rec(c, CLANQ_REC_FRAG, e, junk, e);
			raw_rec(c, CLANQ_REC_DATA, 8, junk, 8);
			break;
		/*
		 * A LARGE of 64 KiB and more makes the receiver offer its
		 * window (1 MiB) before it reads on; 3 e does not.
		 */
		case H_STRAY_BULK:
			raw_large(c, 3 * e);
			raw_bulk(c, 0, e, 0);
			break;
		case H_BULK_AT:
			raw_large(c, 256u << 10);
			raw_bulk(c, 0, 4096, 0);
			raw_bulk(c, 8192, 4096, 0);
			break;
		case H_BULK_PAST_END:
			raw_large(c, 4u << 20);
			raw_bulk(c, 0, CLANQ_CONN_BULK_DEFAULT + 4096, 0);
			break;
		case H_BULK_LONG:
			raw_large(c, 64u << 10);
			raw_bulk(c, 0, (64u << 10) + 8, 0);
			break;
		case H_BULK_RESERVED:
			raw_large(c, 64u << 10);
			raw_bulk(c, 0, 4096, 1);
			break;
		}
		CHILD_CHECK(itest_read_full(a->go[0], &token, 1));
		CHILD_CHECK_INT(clanq_conn_close(c), 0);
	}
	clanq_net_close(net);
	clanq_close(&dev);
}

static void test_hostile_sender(void **state)
{
	static const int want[NR_HOSTILE] = {
		[H_HUGE] = -EPROTO, [H_OVER_LIMIT] = -EPROTO, [H_SMALL] = -EPROTO,
		[H_LONG_REC] = -EPROTO, [H_STRAY_FRAG] = -EPROTO,
		[H_FRAG_PAST] = -EPROTO, [H_DATA_INSIDE] = -EPROTO,
		[H_FIN_INSIDE] = -EPIPE, [H_GIB_THEN_DATA] = -EPROTO,
		[H_STRAY_BULK] = -EPROTO, [H_BULK_AT] = -EPROTO,
		[H_BULK_PAST_END] = -EPROTO, [H_BULK_LONG] = -EPROTO,
		[H_BULK_RESERVED] = -EPROTO,
	};
	struct hostile_arg a;
	size_t room = CLANQ_CONN_MSG_MAX;
	uint8_t *in = big_alloc(room);	/* room for the 1 GiB claim, untouched */
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	const void *data;
	uint64_t rss0, rss1;
	ssize_t got;
	pid_t pid;
	char token = 'k';

	(void)state;
	assert_non_null(in);
	assert_int_equal(pipe(a.go), 0);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, 8), 0);
	pid = itest_fork(hostile_sender, &a);
	rss0 = rss_now();
	for (int k = 0; k < NR_HOSTILE; k++) {
		assert_int_equal(clanq_accept(l, &c, NULL, ACCEPT_NS), 0);
		if (k == H_OVER_LIMIT)
			got = clanq_recv_peek(c, &data, 0);
		else if (k == H_SMALL)
			got = clanq_recv_size(c, 0);
		else
			got = clanq_recv(c, in, room, 0);
		if (got != want[k])
			fail_msg("hostile case %d: got %zd, want %d", k, got, want[k]);
		assert_int_equal(clanq_conn_state(c), CLANQ_CONN_RESET);
		assert_int_equal(clanq_conn_error(c), want[k]);
		/* and it stays refused */
		assert_int_equal(clanq_recv(c, in, room, 0), want[k]);
		assert_true(itest_write_full(a.go[1], &token, 1));
		assert_int_equal(clanq_conn_close(c), 0);
	}
	rss1 = rss_now();
	printf("hostile sender: resident %llu KiB before, %llu KiB after\n",
	       (unsigned long long)(rss0 >> 10), (unsigned long long)(rss1 >> 10));
	/* a fragment or two of the 1 GiB claim touched, nothing like 1 GiB */
	assert_true(rss1 < rss0 + (8u << 20));
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S), "hostile sender"));
	assert_int_equal(clanq_listener_close(l), 0);
	clanq_net_close(net);
	clanq_close(&dev);
	munmap(in, room);
	close(a.go[0]);
	close(a.go[1]);
}

/*
 * 6. The bulk window's knobs and a receiver that lies about it: no
 * window (clanq_conn_set_bulk(0)) keeps large messages in fragments; a
 * window offered that cannot be imported leaves the sender on
 * fragments, the message whole; credit of the window that makes no
 * sense resets the sender (-EPROTO), as the ring's does.
 */
enum bulk_case { B_NONE, B_BAD_DESC, B_BAD_CREDIT, NR_BULK };

struct bulk_arg {
	int go[2];	/* parent to child */
	int done[2];	/* child to parent: what the sender saw */
};

static void bulk_sender(void *p)
{
	const struct bulk_arg *a = p;
	uint8_t *out = big_alloc(1u << 20);
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	char token;
	int err;

	CHILD_CHECK(out != NULL);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	for (int k = 0; k < NR_BULK; k++) {
		CHILD_CHECK_INT(connect_retry(net, &c, NULL), 0);
		CHILD_CHECK(itest_read_full(a->go[0], &token, 1));	/* the receiver is set */
		fill(out, 1u << 20, 50 + k);
		CHILD_CHECK_INT(clanq_send(c, out, 1u << 20, 0), 0);
		if (k == B_BAD_DESC) {
			/* it tried the window once, and went on in fragments */
			CHILD_CHECK(c->bulk_tx_refused && !c->bulk_tx.id);
		} else if (k == B_BAD_CREDIT) {
			CHILD_CHECK(c->bulk_tx.id != 0);
			CHILD_CHECK(itest_read_full(a->go[0], &token, 1));	/* scribbled */
			err = clanq_send(c, out, 1u << 20, 0);
			CHILD_CHECK_INT(err, -EPROTO);
		}
		token = 'd';
		CHILD_CHECK(itest_write_full(a->done[1], &token, 1));
		CHILD_CHECK(itest_read_full(a->go[0], &token, 1));
		CHILD_CHECK_INT(clanq_conn_close(c), 0);
	}
	clanq_net_close(net);
	clanq_close(&dev);
}

static void test_bulk_window(void **state)
{
	uint8_t *in = big_alloc(1u << 20);
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	struct bulk_arg a;
	uint64_t *word;
	char token = 'g';
	pid_t pid;

	(void)state;
	assert_non_null(in);
	assert_int_equal(pipe(a.go), 0);
	assert_int_equal(pipe(a.done), 0);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, 8), 0);
	pid = itest_fork(bulk_sender, &a);
	/* the child's ends: a child that fails is an end of file, not a hang */
	close(a.go[0]);
	close(a.done[1]);
	for (int k = 0; k < NR_BULK; k++) {
		assert_int_equal(clanq_accept(l, &c, NULL, ACCEPT_NS), 0);
		assert_non_null(c->tx.base);
		/* sizes that are no window */
		assert_int_equal(clanq_conn_set_bulk(c, 4096), -EINVAL);
		assert_int_equal(clanq_conn_set_bulk(c, CLANQ_CONN_BULK_MIN + 1), -EINVAL);
		assert_int_equal(clanq_conn_set_bulk(c, CLANQ_CONN_BULK_MAX + 4096), -EINVAL);
		assert_int_equal(clanq_conn_set_bulk(NULL, 0), -EINVAL);
		if (k != B_BAD_CREDIT)
			assert_int_equal(clanq_conn_set_bulk(c, 0), 0);
		if (k == B_BAD_DESC) {
			/* an offer of a region that is not there (not ours: none) */
			word = (uint64_t *)(c->tx.base + offsetof(struct clanq_ring_hdr, bulk_key));
			__atomic_store_n(word, 0x1234, __ATOMIC_RELAXED);
			word = (uint64_t *)(c->tx.base + offsetof(struct clanq_ring_hdr, bulk_desc));
			__atomic_store_n(word, clanq_bulk_desc(0x7fffff, 1u << 20), __ATOMIC_RELEASE);
		}
		assert_true(itest_write_full(a.go[1], &token, 1));
		memset(in, 0, 1u << 20);
		assert_int_equal(clanq_recv(c, in, 1u << 20, 0), 1u << 20);
		assert_int_equal(first_bad(in, 1u << 20, 50 + k, 0), -1);
		if (k == B_BAD_CREDIT) {
			assert_non_null(c->bulk.mem);
			assert_true(c->bulk_head > 0);
			assert_int_equal(clanq_conn_set_bulk(c, 0), -EBUSY);
			word = (uint64_t *)(c->tx.base + offsetof(struct clanq_ring_hdr,
								  bulk_credit));
			__atomic_store_n(word, 1ull << 40, __ATOMIC_RELEASE);
			assert_true(itest_write_full(a.go[1], &token, 1));
		} else {
			/* fragments only: no window made */
			assert_null(c->bulk.mem);
		}
		assert_true(itest_read_full(a.done[0], &token, 1));
		assert_true(itest_write_full(a.go[1], &token, 1));
		assert_int_equal(clanq_conn_close(c), 0);
	}
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S), "bulk sender"));
	assert_int_equal(clanq_listener_close(l), 0);
	clanq_net_close(net);
	clanq_close(&dev);
	munmap(in, 1u << 20);
	close(a.go[1]);
	close(a.done[0]);
}

/*
 * 7. The net's budget of windows: 36 connections of one net, each
 * receiving a 64 KiB message; the first CLANQ_NET_BULK_BUDGET / 1 MiB
 * get a window, the rest stay on fragments, every byte still right;
 * closing one gives its window's budget back.
 */
#define NR_BUDGET	(CLANQ_NET_BULK_BUDGET / CLANQ_CONN_BULK_DEFAULT + 4)

static void budget_sender(void *p)
{
	const int *go = p;
	uint8_t *out = big_alloc(64u << 10);
	struct clanq_net_attr na = { .max_conns = NR_BUDGET + 8 };
	struct clanq_conn *c[NR_BUDGET + 1];
	struct clanq_dev dev;
	struct clanq_net *net;
	char token;

	CHILD_CHECK(out != NULL);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, &na), 0);
	for (unsigned int i = 0; i <= NR_BUDGET; i++) {
		CHILD_CHECK_INT(connect_retry(net, &c[i], NULL), 0);
		if (i == NR_BUDGET)	/* the last after one closed */
			CHILD_CHECK(itest_read_full(go[0], &token, 1));
		fill(out, 64u << 10, 200 + i);
		CHILD_CHECK_INT(clanq_send(c[i], out, 64u << 10, 0), 0);
	}
	CHILD_CHECK(itest_read_full(go[0], &token, 1));
	for (unsigned int i = 0; i <= NR_BUDGET; i++)
		CHILD_CHECK_INT(clanq_conn_close(c[i]), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

static void test_bulk_budget(void **state)
{
	struct clanq_net_attr na = { .max_conns = NR_BUDGET + 8 };
	uint8_t *in = big_alloc(64u << 10);
	struct clanq_conn *c[NR_BUDGET + 1];
	unsigned int windows = 0, i;
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	char token = 'g';
	int go[2];
	pid_t pid;

	(void)state;
	assert_non_null(in);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, &na), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, NR_BUDGET + 8), 0);
	pid = itest_fork(budget_sender, go);
	close(go[0]);
	for (i = 0; i <= NR_BUDGET; i++) {
		assert_int_equal(clanq_accept(l, &c[i], NULL, ACCEPT_NS), 0);
		if (i == NR_BUDGET) {
			/* one window's budget back: the last one gets it */
			assert_int_equal(clanq_conn_close(c[0]), 0);
			c[0] = NULL;
			assert_true(itest_write_full(go[1], &token, 1));
		}
		assert_int_equal(clanq_recv(c[i], in, 64u << 10, 0), 64u << 10);
		if (first_bad(in, 64u << 10, 200 + i, 0) >= 0)
			fail_msg("connection %u: byte %lld wrong", i,
				 (long long)first_bad(in, 64u << 10, 200 + i, 0));
		if (i < NR_BUDGET)
			windows += c[i]->bulk.mem != NULL;
	}
	printf("bulk budget: %u of %u connections got a window\n", windows,
	       (unsigned int)NR_BUDGET);
	assert_int_equal(windows, CLANQ_NET_BULK_BUDGET / CLANQ_CONN_BULK_DEFAULT);
	assert_non_null(c[NR_BUDGET]->bulk.mem);
	assert_int_equal(net->bulk_bytes, CLANQ_NET_BULK_BUDGET);
	assert_true(itest_write_full(go[1], &token, 1));
	for (i = 1; i <= NR_BUDGET; i++)
		assert_int_equal(clanq_conn_close(c[i]), 0);
	assert_int_equal(net->bulk_bytes, 0);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S), "budget sender"));
	assert_int_equal(clanq_listener_close(l), 0);
	clanq_net_close(net);
	clanq_close(&dev);
	munmap(in, 64u << 10);
	close(go[1]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_sizes_pio, itest_teardown),
		cmocka_unit_test_teardown(test_sizes_rdma_only, itest_teardown),
		cmocka_unit_test_teardown(test_killed_mid_message, itest_teardown),
		cmocka_unit_test_teardown(test_hostile_sender, itest_teardown),
		cmocka_unit_test_teardown(test_bulk_window, itest_teardown),
		cmocka_unit_test_teardown(test_bulk_budget, itest_teardown),
		cmocka_unit_test_teardown(test_largest, itest_teardown),
	};

	/* a test's name: only that one (the breakage runs pick theirs) */
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
