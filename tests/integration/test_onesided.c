// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The one-sided helpers of <clanq/net.h> (issue 27, lib/onesided.c),
 * through the real driver and library, server on node 0 and client on
 * node 1 in one process:
 *
 *  1. a region descriptor's round trip: sent with a window and rights,
 *     imported and mapped on the other side in one call, the bytes
 *     seen both ways; the export reused and its rights held to; an
 *     unmapped import written by RDMA; bad arguments refused;
 *  2. a descriptor is not a message: clanq_recv(), clanq_recv_size()
 *     and clanq_recv_peek() meeting one say -ENOMSG and leave it
 *     queued, clanq_conn_recv_region() meeting a message says -ENOMSG
 *     and leaves that queued, and the ring's order holds between them;
 *  3. connection tripwires on 16 connections: each client's PIO write
 *     (and one RDMA write) into its window fires its tripwire, which
 *     clanq_net_wait() reports as CLANQ_NET_TW on that connection and
 *     no other; clanq_conn_tw_fired() says which of a connection's two
 *     fired; one-shot ones re-armed, a persistent one firing twice;
 *  4. hostile descriptors, every field bad in turn (white box: the
 *     client writes REGION records by hand): each refused with its
 *     errno and the connection still open; one of the wrong length
 *     resets the connection (-EPROTO);
 *  5. ordering and leaks: CLANQ_NET_TW_MAX tripwires on one connection,
 *     then -ENOSPC, and a new connection still gets its ring's
 *     tripwire; closing a connection with them all armed frees every
 *     one (three rounds reach the limit again each time); a write
 *     after the close reports nothing; a region freed under a peer's
 *     import (stores land in the sink page, no SIGBUS) and under our
 *     own tripwire, whose dead tripwire's bit a new one then gets.
 *
 * Mutants each caught (debug VM): 1 without msg.c's REGION case (the
 * receive resets, -EPROTO for -ENOMSG); 2 with net.c's take_fired()
 * dropping connection tripwires' bits (no CLANQ_NET_TW: tests 3, 5);
 * 3 without the descriptor's node check (test 4: the server's own
 * region imports); 4 with clanq_conn_tw_drop_all() doing nothing (test
 * 5: a fire after the close reaches a freed connection, SIGSEGV).
 *
 * Runs in the test VM (nr_nics=2): nodes 0 and 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <clanq/net.h>

#include "itest.h"
/* white box: REGION records written by hand (test 4) */
#include "../../lib/net_internal.h"

#define SVC_ROUND	4501
#define SVC_TW		4502
#define SVC_BAD		4503
#define SVC_ORDER	4504

#define TIMEOUT		(30 * ITEST_NS_PER_S)
#define QUIET		(50 * ITEST_NS_PER_MS)
#define NC		16

struct env {
	struct clanq_dev d0, d1;
	struct clanq_net *n0, *n1;	/* server (node 0), client (node 1) */
	struct clanq_listener *l;
};

static void env_open(struct env *e, unsigned int svc)
{
	memset(e, 0, sizeof(*e));
	assert_int_equal(clanq_open_nic(&e->d0, 0), 0);
	assert_int_equal(clanq_open_nic(&e->d1, 1), 0);
	assert_int_equal(clanq_net_open(&e->n0, &e->d0, NULL), 0);
	assert_int_equal(clanq_net_open(&e->n1, &e->d1, NULL), 0);
	assert_int_equal(clanq_listen(e->n0, &e->l, svc, 64), 0);
}

static void env_close(struct env *e)
{
	assert_int_equal(clanq_net_close(e->n1), 0);
	assert_int_equal(clanq_net_close(e->n0), 0);
	clanq_close(&e->d1);
	clanq_close(&e->d0);
}

/* A connection: a non-blocking connect, the accept, the client's OUT. */
static void pair(struct env *e, struct clanq_conn **cc, struct clanq_conn **sc)
{
	struct clanq_conn_opts o = { .timeout_ns = TIMEOUT, .flags = CLANQ_CONN_NONBLOCK };
	struct clanq_net_event ev;

	assert_int_equal(clanq_connect(e->n1, cc, 0, clanq_listener_addr(e->l).id, &o), 0);
	assert_int_equal(clanq_accept(e->l, sc, NULL, TIMEOUT), 0);
	assert_int_equal(clanq_net_wait(e->n1, &ev, 1, TIMEOUT), 1);
	assert_ptr_equal(ev.conn, *cc);
	assert_int_equal(ev.what, CLANQ_NET_OUT);
	assert_int_equal(clanq_conn_state(*cc), CLANQ_CONN_OPEN);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

/* A write through a client's aperture: RDMA from src, waited for. */
static void rdma_write(struct clanq_dev *dev, const struct clanq_ap *ap, uint64_t ap_off,
		       const void *buf, size_t len)
{
	struct clanq_rdma_req q;
	struct clanq_rdma_comp comp;
	struct clanq_region src;
	struct clanq_ep ep;
	uint64_t end;

	assert_int_equal(clanq_ep_create(dev, &ep, 0), 0);
	assert_int_equal(clanq_region_alloc(dev, &src, 4096), 0);
	memcpy(src.mem, buf, len);
	memset(&q, 0, sizeof(q));
	q.src_region = src.addr.id;
	q.dst_ap = ap->id;
	q.dst_off = ap_off;
	q.len = len;
	q.cookie = 77;
	q.flags = CLANQ_RDMA_SIGNAL;
	assert_int_equal(clanq_rdma_post(&ep, &q), 0);
	end = clanq_now_ns() + TIMEOUT;
	while (clanq_rdma_poll(&ep, &comp)) {
		assert_true(clanq_now_ns() < end);
		sched_yield();
	}
	assert_int_equal(comp.status, 0);
	assert_int_equal(comp.cookie, 77);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_region_free(&src), 0);
}

/* 1 and 2. */
static void test_round_trip(void **state)
{
	struct clanq_region r, r2, r3, other;
	struct clanq_conn *cc, *sc;
	struct clanq_region_desc d, d2;
	struct clanq_ap ap, ap2;
	const void *peek;
	char buf[64];
	uint64_t k, t0;
	struct env e;

	(void)state;
	env_open(&e, SVC_ROUND);
	pair(&e, &cc, &sc);
	assert_int_equal(clanq_region_alloc(&e.d0, &r, 65536), 0);
	fill(r.mem, 65536, 3);

	/* bad arguments: nothing exported, nothing sent */
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 0, CLANQ_RIGHTS_ALL, 0), -EINVAL);
	assert_int_equal(clanq_conn_send_region(sc, &r, 65536, 1, CLANQ_RIGHTS_ALL, 0), -EINVAL);
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 65537, CLANQ_RIGHTS_ALL, 0), -EINVAL);
	assert_int_equal(clanq_conn_send_region(sc, &r, UINT64_MAX, 2, CLANQ_RIGHTS_ALL, 0), -EINVAL);
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 64, 0, 0), -EINVAL);
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 64, 0x4, 0), -EINVAL);
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 64, CLANQ_RIGHT_READ, 0x80), -EINVAL);
	assert_int_equal(clanq_region_alloc(&e.d1, &other, 4096), 0);
	assert_int_equal(clanq_conn_send_region(sc, &other, 0, 64, CLANQ_RIGHT_READ, 0), -EINVAL);
	assert_int_equal(clanq_conn_recv_region(cc, &ap, NULL, CLANQ_MSG_DONTWAIT, -1), -EAGAIN);
	assert_int_equal(clanq_conn_recv_region(cc, &ap, NULL, 0, 20 * ITEST_NS_PER_MS),
			 -ETIMEDOUT);
	assert_int_equal(clanq_conn_recv_region(cc, &ap, NULL, 0x4000, -1), -EINVAL);

	/* the round trip; the receives of messages leave it queued */
	t0 = clanq_now_ns();
	assert_int_equal(clanq_conn_send_region(sc, &r, 4096, 8192, CLANQ_RIGHTS_ALL, 0), 0);
	assert_int_equal(clanq_recv(cc, buf, sizeof(buf), 0), -ENOMSG);
	assert_int_equal(clanq_recv(cc, buf, sizeof(buf), CLANQ_MSG_DONTWAIT), -ENOMSG);
	assert_int_equal(clanq_recv_size(cc, 0), -ENOMSG);
	assert_int_equal(clanq_recv_peek(cc, &peek, 0), -ENOMSG);
	clanq_recv_done(cc);	/* nothing peeked: takes nothing */
	assert_int_equal(clanq_conn_state(cc), CLANQ_CONN_OPEN);
	assert_true(clanq_conn_readable(cc));
	assert_int_equal(clanq_conn_recv_region(cc, &ap, &d, 0, TIMEOUT), 0);
	printf("# descriptor, export to mapped import: %.1f us\n",
	       (clanq_now_ns() - t0) / 1e3);
	assert_int_equal(d.node, 0);
	assert_int_equal(d.region, r.addr.id);
	assert_int_equal(d.off, 4096);
	assert_int_equal(d.len, 8192);
	assert_int_equal(d.rights, CLANQ_RIGHTS_ALL);
	assert_int_equal(d.reserved, 0);
	assert_int_equal(ap.len, 8192);
	assert_non_null(ap.base);
	assert_memory_equal(ap.base, (char *)r.mem + 4096, 8192);
	assert_int_equal(clanq_ap_write(&ap, 100, "one-sided", 9), 0);
	assert_memory_equal((char *)r.mem + 4196, "one-sided", 9);
	/* nothing else there */
	assert_int_equal(clanq_conn_recv_region(cc, &ap2, NULL, CLANQ_MSG_DONTWAIT, -1), -EAGAIN);

	/* the export is reused: same key, fewer rights, not more */
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 64, CLANQ_RIGHT_READ, 0), 0);
	assert_int_equal(clanq_conn_recv_region(cc, &ap2, &d2, 0, TIMEOUT), 0);
	assert_int_equal(d2.key, d.key);
	assert_int_equal(d2.rights, CLANQ_RIGHT_READ);
	assert_memory_equal(ap2.base, r.mem, 64);
	assert_int_equal(clanq_ap_write(&ap2, 0, "x", 1), -ENXIO);	/* not writable */
	assert_int_equal(clanq_ap_close(&ap2), 0);
	assert_int_equal(clanq_region_alloc(&e.d0, &r3, 4096), 0);
	assert_int_equal(clanq_conn_send_region(sc, &r3, 0, 64, CLANQ_RIGHT_READ, 0), 0);
	assert_int_equal(clanq_conn_send_region(sc, &r3, 0, 64, CLANQ_RIGHTS_ALL, 0), -EACCES);
	assert_int_equal(clanq_conn_recv_region(cc, &ap2, NULL, 0, TIMEOUT), 0);
	assert_int_equal(clanq_ap_close(&ap2), 0);
	/* exported by the application: not ours to hand out */
	assert_int_equal(clanq_region_alloc(&e.d0, &r2, 4096), 0);
	assert_int_equal(clanq_region_export(&r2, CLANQ_RIGHT_READ, &k), 0);
	assert_int_equal(clanq_conn_send_region(sc, &r2, 0, 64, CLANQ_RIGHT_READ, 0), -EBUSY);

	/* the ring's order, messages and descriptors mixed */
	assert_int_equal(clanq_send(sc, "m1", 2, 0), 0);
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 4096, CLANQ_RIGHT_WRITE, 0), 0);
	assert_int_equal(clanq_send(sc, "m2", 2, 0), 0);
	assert_int_equal(clanq_conn_recv_region(cc, &ap2, NULL, 0, TIMEOUT), -ENOMSG);
	assert_int_equal(clanq_recv(cc, buf, sizeof(buf), 0), 2);
	assert_memory_equal(buf, "m1", 2);
	assert_int_equal(clanq_recv(cc, buf, sizeof(buf), 0), -ENOMSG);
	/* WRITE alone cannot be mapped: RDMA, as with CLANQ_REGION_NOMAP */
	assert_int_equal(clanq_conn_recv_region(cc, &ap2, &d2, 0, TIMEOUT), 0);
	assert_null(ap2.base);
	assert_int_equal(clanq_recv(cc, buf, sizeof(buf), 0), 2);
	assert_memory_equal(buf, "m2", 2);
	rdma_write(&e.d1, &ap2, 512, "by rdma", 7);
	assert_memory_equal((char *)r.mem + 512, "by rdma", 7);
	assert_int_equal(clanq_ap_close(&ap2), 0);
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 4096, CLANQ_RIGHTS_ALL, 0), 0);
	assert_int_equal(clanq_conn_recv_region(cc, &ap2, NULL, CLANQ_REGION_NOMAP, TIMEOUT), 0);
	assert_null(ap2.base);
	assert_int_equal(clanq_ap_close(&ap2), 0);

	/* the server's loop: a descriptor is IN, and -ENOMSG tells it apart */
	{
		struct clanq_net_event ev;

		assert_int_equal(clanq_conn_send_region(cc, &other, 0, 64, CLANQ_RIGHT_READ, 0), 0);
		assert_int_equal(clanq_net_wait(e.n0, &ev, 1, TIMEOUT), 1);
		assert_ptr_equal(ev.conn, sc);
		assert_int_equal(ev.what & CLANQ_NET_IN, CLANQ_NET_IN);
		assert_int_equal(clanq_recv(sc, buf, sizeof(buf), CLANQ_MSG_DONTWAIT), -ENOMSG);
		assert_int_equal(clanq_conn_recv_region(sc, &ap2, &d2, 0, TIMEOUT), 0);
		assert_int_equal(d2.node, 1);
		assert_int_equal(clanq_ap_close(&ap2), 0);
	}

	/* end of stream */
	assert_int_equal(clanq_conn_close(sc), 0);
	assert_int_equal(clanq_conn_recv_region(cc, &ap2, NULL, 0, TIMEOUT), -EPIPE);
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(clanq_region_free(&r2), 0);
	assert_int_equal(clanq_region_free(&r3), 0);
	assert_int_equal(clanq_region_free(&other), 0);
	env_close(&e);
}

/* Wait for the one event on the server's net: conn and what. */
static struct clanq_conn *one_event(struct env *e, uint32_t what)
{
	struct clanq_net_event evs[8];
	int n = clanq_net_wait(e->n0, evs, 8, TIMEOUT);

	assert_int_equal(n, 1);
	assert_int_equal(evs[0].what, what);
	return evs[0].conn;
}

static void quiet(struct env *e)
{
	struct clanq_net_event evs[8];

	assert_int_equal(clanq_net_wait(e->n0, evs, 8, QUIET), -ETIMEDOUT);
}

/* 3. */
static void test_tw_events(void **state)
{
	struct clanq_conn *cc[NC], *sc[NC], *c;
	struct clanq_conn_tw *tw[NC], *tb, *persist, *got[4];
	struct clanq_region r;
	struct clanq_ap ap[NC];
	unsigned int i, k, order[NC];
	uint64_t v, fire_ns = 0;
	struct env e;

	(void)state;
	env_open(&e, SVC_TW);
	assert_int_equal(clanq_region_alloc(&e.d0, &r, NC * 128 + 64), 0);
	for (i = 0; i < NC; i++) {
		pair(&e, &cc[i], &sc[i]);
		clanq_conn_set_cookie(sc[i], i);
		assert_int_equal(clanq_conn_tw_create(sc[i], &tw[i], &r, i * 128, 64,
						      CLANQ_TW_ARMED, 1000 + i), 0);
		assert_int_equal(clanq_conn_tw_cookie(tw[i]), 1000 + i);
		assert_int_equal(clanq_conn_send_region(sc[i], &r, i * 128, 128,
							CLANQ_RIGHTS_ALL, 0), 0);
		assert_int_equal(clanq_conn_recv_region(cc[i], &ap[i], NULL, 0, TIMEOUT), 0);
	}
	/* the descriptors were IN on the clients, not the server: quiet */
	quiet(&e);
	/* a second one on connection 5, at the other half of its window */
	assert_int_equal(clanq_conn_tw_create(sc[5], &tb, &r, 5 * 128 + 64, 64,
					      CLANQ_TW_ARMED, 2005), 0);
	/* args */
	assert_int_equal(clanq_conn_tw_create(sc[5], &tb, &r, 0, 64, 0x80, 0), -EINVAL);
	assert_int_equal(clanq_conn_tw_create(sc[5], &tb, &r, 0, 4, 0, 0), -EINVAL);
	assert_int_equal(clanq_conn_tw_create(sc[5], &tb, &r, 1 << 20, 64, 0, 0), -ERANGE);
	assert_int_equal(clanq_conn_tw_fired(sc[5], got, 4), 0);

	/* each client's write fires its connection's tripwire, and only it */
	for (i = 0; i < NC; i++)
		order[i] = (i * 7 + 3) % NC;
	for (i = 0; i < NC; i++) {
		uint64_t t0 = clanq_now_ns();

		k = order[i];
		v = 0x1000 + k;
		if (k == 7)
			rdma_write(&e.d1, &ap[k], 8, &v, sizeof(v));
		else
			assert_int_equal(clanq_ap_write(&ap[k], 8, &v, sizeof(v)), 0);
		c = one_event(&e, CLANQ_NET_TW);
		assert_int_equal(clanq_conn_get_cookie(c), k);
		assert_int_equal(clanq_conn_tw_fired(c, got, 4), 1);
		assert_ptr_equal(got[0], tw[k]);
		assert_int_equal(clanq_conn_tw_cookie(got[0]), 1000 + k);
		assert_int_equal(clanq_conn_tw_fired(c, got, 4), 0);
		if (k != 7)	/* PIO: the RDMA one sets up an endpoint */
			fire_ns += clanq_now_ns() - t0;
		assert_memory_equal((char *)r.mem + k * 128 + 8, &v, sizeof(v));
		/* taken, one-shot and disarmed: nothing more, even on a write */
		assert_int_equal(clanq_ap_write(&ap[k], 16, &v, sizeof(v)), 0);
		quiet(&e);
	}

	printf("# PIO write, CLANQ_NET_TW, fired: %.1f us each (%u connections)\n",
	       fire_ns / 1e3 / (NC - 1), NC);

	/* connection 5's other tripwire: that one is named */
	v = 55;
	assert_int_equal(clanq_ap_write(&ap[5], 64 + 8, &v, sizeof(v)), 0);
	assert_ptr_equal(one_event(&e, CLANQ_NET_TW), sc[5]);
	assert_int_equal(clanq_conn_tw_fired(sc[5], got, 4), 1);
	assert_ptr_equal(got[0], tb);
	/* both, re-armed: reported until both are taken */
	assert_int_equal(clanq_conn_tw_arm(tw[5]), 0);
	assert_int_equal(clanq_conn_tw_arm(tb), 0);
	assert_int_equal(clanq_ap_write(&ap[5], 0, &v, sizeof(v)), 0);
	assert_int_equal(clanq_ap_write(&ap[5], 64, &v, sizeof(v)), 0);
	assert_ptr_equal(one_event(&e, CLANQ_NET_TW), sc[5]);
	assert_int_equal(clanq_conn_tw_fired(sc[5], got, 1), 1);
	assert_ptr_equal(got[0], tw[5]);
	assert_ptr_equal(one_event(&e, CLANQ_NET_TW), sc[5]);
	assert_int_equal(clanq_conn_tw_fired(sc[5], got, 4), 1);
	assert_ptr_equal(got[0], tb);
	quiet(&e);
	/* disarmed: no fire */
	assert_int_equal(clanq_conn_tw_arm(tb), 0);
	assert_int_equal(clanq_conn_tw_disarm(tb), 0);
	assert_int_equal(clanq_ap_write(&ap[5], 64, &v, sizeof(v)), 0);
	quiet(&e);
	assert_int_equal(clanq_conn_tw_destroy(tb), 0);

	/* persistent: fires again without a re-arm */
	assert_int_equal(clanq_conn_tw_create(sc[9], &persist, &r, 9 * 128 + 64, 64,
					      CLANQ_TW_ARMED | CLANQ_TW_PERSISTENT, 9009), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(clanq_ap_write(&ap[9], 64, &v, sizeof(v)), 0);
		assert_ptr_equal(one_event(&e, CLANQ_NET_TW), sc[9]);
		assert_int_equal(clanq_conn_tw_fired(sc[9], got, 4), 1);
		assert_ptr_equal(got[0], persist);
	}

	/* messages are still IN, beside the tripwires */
	assert_int_equal(clanq_send(cc[2], "hi", 2, 0), 0);
	assert_ptr_equal(one_event(&e, CLANQ_NET_IN), sc[2]);
	{
		char b[8];

		assert_int_equal(clanq_recv(sc[2], b, sizeof(b), 0), 2);
	}
	/* a fire on a muted connection is reported all the same */
	assert_int_equal(clanq_conn_want(sc[3], 0), 0);
	assert_int_equal(clanq_conn_tw_arm(tw[3]), 0);
	assert_int_equal(clanq_ap_write(&ap[3], 0, &v, sizeof(v)), 0);
	assert_ptr_equal(one_event(&e, CLANQ_NET_TW), sc[3]);
	assert_int_equal(clanq_conn_tw_fired(sc[3], got, 4), 1);

	for (i = 0; i < NC; i++) {
		assert_int_equal(clanq_ap_close(&ap[i]), 0);
		assert_int_equal(clanq_conn_close(cc[i]), 0);
	}
	assert_int_equal(clanq_region_free(&r), 0);
	env_close(&e);	/* the server's connections close with their tripwires */
}

/* A REGION record written by hand: the peer's hostile descriptor. */
static int inject(struct clanq_conn *cc, const struct clanq_region_wire *w, size_t len)
{
	return clanq_conn_send_rec(cc, CLANQ_REC_REGION, w, len, 0);
}

/* 4. */
static void test_hostile(void **state)
{
	struct clanq_region r, ro, mine;
	struct clanq_conn *cc, *sc, *cc2, *sc2;
	struct clanq_region_wire good, w;
	uint64_t key, key_ro, key_mine;
	struct clanq_ap ap;
	char b[8];
	struct env e;
	struct {
		const char *what;
		int err;
	} cases[] = {
		{ "magic", -EBADMSG }, { "version", -EBADMSG },
		{ "reserved", -EBADMSG }, { "another node", -EBADMSG },
		{ "region 0", -EBADMSG }, { "no rights", -EBADMSG },
		{ "unknown right", -EBADMSG }, { "all bits", -EBADMSG },
		{ "len 0", -EBADMSG }, { "window wraps", -EBADMSG },
		{ "key", -ENOENT }, { "no region", -ENOENT },
		{ "past the end", -ERANGE }, { "rights not exported", -EACCES },
	};

	(void)state;
	env_open(&e, SVC_BAD);
	pair(&e, &cc, &sc);
	/* the client's (node 1) regions it describes; one of the server's own */
	assert_int_equal(clanq_region_alloc(&e.d1, &r, 8192), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHTS_ALL, &key), 0);
	assert_int_equal(clanq_region_alloc(&e.d1, &ro, 4096), 0);
	assert_int_equal(clanq_region_export(&ro, CLANQ_RIGHT_READ, &key_ro), 0);
	assert_int_equal(clanq_region_alloc(&e.d0, &mine, 4096), 0);
	assert_int_equal(clanq_region_export(&mine, CLANQ_RIGHTS_ALL, &key_mine), 0);
	memset(&good, 0, sizeof(good));
	good.magic = CLANQ_REGION_MAGIC;
	good.version = CLANQ_REGION_VERSION;
	good.rights = CLANQ_RIGHTS_ALL;
	good.node = 1;
	good.region = r.addr.id;
	good.key = key;
	good.off = 0;
	good.len = 4096;
	/* the well-formed one imports */
	assert_int_equal(inject(cc, &good, sizeof(good)), 0);
	assert_int_equal(clanq_conn_recv_region(sc, &ap, NULL, 0, TIMEOUT), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);

	for (unsigned int i = 0; i < ARRAY_SIZE(cases); i++) {
		w = good;
		switch (i) {
		case 0: w.magic ^= 1; break;
		case 1: w.version = 2; break;
		case 2: w.reserved[1] = 1; break;
		/* the server's own region, with its real key: a confused deputy */
		case 3: w.node = 0; w.region = mine.addr.id; w.key = key_mine; break;
		case 4: w.region = 0; break;
		case 5: w.rights = 0; break;
		case 6: w.rights = 0x4; break;
		case 7: w.rights = 0xffff; break;
		case 8: w.len = 0; break;
		case 9: w.off = UINT64_MAX - 10; w.len = 100; break;
		case 10: w.key ^= 0x5a5a; break;
		case 11: w.region = 0x7ffffff0; break;
		case 12: w.off = 4096; w.len = 8192; break;
		case 13: w.region = ro.addr.id; w.key = key_ro; break;
		}
		assert_int_equal(inject(cc, &w, sizeof(w)), 0);
		memset(&ap, 0, sizeof(ap));
		if (clanq_conn_recv_region(sc, &ap, NULL, 0, TIMEOUT) != cases[i].err)
			fail_msg("descriptor with a bad %s: not %d", cases[i].what,
				 cases[i].err);
		assert_int_equal(clanq_conn_state(sc), CLANQ_CONN_OPEN);
	}
	/* still a connection: a message, then the good one again */
	assert_int_equal(clanq_send(cc, "ok", 2, 0), 0);
	assert_int_equal(clanq_recv(sc, b, sizeof(b), 0), 2);
	assert_int_equal(inject(cc, &good, sizeof(good)), 0);
	assert_int_equal(clanq_conn_recv_region(sc, &ap, NULL, 0, TIMEOUT), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);

	/* a REGION record of another length breaks the ring's protocol */
	pair(&e, &cc2, &sc2);
	assert_int_equal(inject(cc2, &good, sizeof(good) - 8), 0);
	assert_int_equal(clanq_conn_recv_region(sc2, &ap, NULL, 0, TIMEOUT), -EPROTO);
	assert_int_equal(clanq_conn_state(sc2), CLANQ_CONN_RESET);
	assert_int_equal(clanq_recv(sc2, b, sizeof(b), 0), -EPROTO);

	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(clanq_region_free(&ro), 0);
	assert_int_equal(clanq_region_free(&mine), 0);
	env_close(&e);
}

/* CLANQ_NET_TW_MAX on c, then -ENOSPC: how many it took. */
static unsigned int fill_tws(struct clanq_conn *c, const struct clanq_region *r)
{
	struct clanq_conn_tw *t;
	unsigned int n = 0;
	int err;

	while (!(err = clanq_conn_tw_create(c, &t, r, (n % 64) * 64, 64,
					    CLANQ_TW_ARMED, n)))
		n++;
	assert_int_equal(err, -ENOSPC);
	return n;
}

/* 5. */
static void test_order_and_leaks(void **state)
{
	struct clanq_conn *cc, *sc, *cc2, *sc2;
	struct clanq_conn_tw *t, *t2, *got[2];
	struct clanq_region r, r2;
	struct clanq_ap ap;
	uint64_t v = 1;
	struct env e;
	int err;

	(void)state;
	env_open(&e, SVC_ORDER);
	assert_int_equal(clanq_region_alloc(&e.d0, &r, 4096), 0);
	for (int round = 0; round < 3; round++) {
		pair(&e, &cc, &sc);
		assert_int_equal(fill_tws(sc, &r), CLANQ_NET_TW_MAX);
		/* the rings' slots are not the tripwires': a connection still comes */
		pair(&e, &cc2, &sc2);
		assert_int_equal(clanq_conn_tw_create(sc2, &t, &r, 0, 64, 0, 0), -ENOSPC);
		assert_int_equal(clanq_conn_close(cc2), 0);
		assert_int_equal(clanq_conn_close(sc2), 0);
		/* the peer writes while they are armed, then we close */
		assert_int_equal(clanq_conn_send_region(sc, &r, 0, 4096, CLANQ_RIGHTS_ALL, 0), 0);
		assert_int_equal(clanq_conn_recv_region(cc, &ap, NULL, 0, TIMEOUT), 0);
		assert_int_equal(clanq_ap_write(&ap, 0, &v, sizeof(v)), 0);
		assert_int_equal(clanq_conn_close(sc), 0);
		/* and after: nothing is reported (the connection is gone) */
		assert_int_equal(clanq_ap_write(&ap, 64, &v, sizeof(v)), 0);
		quiet(&e);
		assert_int_equal(clanq_ap_close(&ap), 0);
		assert_int_equal(clanq_conn_close(cc), 0);
	}

	/* a region freed under the peer's import: the sink, then -ENXIO */
	pair(&e, &cc, &sc);
	assert_int_equal(clanq_region_alloc(&e.d0, &r2, 4096), 0);
	assert_int_equal(clanq_conn_tw_create(sc, &t, &r2, 0, 64, CLANQ_TW_ARMED, 5), 0);
	assert_int_equal(clanq_conn_send_region(sc, &r2, 0, 4096, CLANQ_RIGHTS_ALL, 0), 0);
	assert_int_equal(clanq_conn_recv_region(cc, &ap, NULL, 0, TIMEOUT), 0);
	assert_int_equal(clanq_region_free(&r2), 0);
	/* our tripwire went with its region: no fire, destroy is clean */
	err = clanq_ap_write(&ap, 0, &v, sizeof(v));
	assert_true(err == 0 || err == -ENXIO);
	memset(ap.base, 0xab, 64);	/* no SIGBUS: the sink page */
	quiet(&e);
	assert_int_equal(clanq_conn_tw_fired(sc, got, 2), 0);
	/*
	 * The driver freed its bit with it: a new tripwire may get that bit
	 * while the dead one is still ours to destroy; the destroy must
	 * not take the bit (nor its fire) from the new one.
	 */
	assert_int_equal(clanq_conn_tw_create(sc, &t2, &r, 128, 64, CLANQ_TW_ARMED, 6), 0);
	assert_int_equal(clanq_conn_tw_destroy(t), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_conn_send_region(sc, &r, 0, 4096, CLANQ_RIGHTS_ALL, 0), 0);
	assert_int_equal(clanq_conn_recv_region(cc, &ap, NULL, 0, TIMEOUT), 0);
	assert_int_equal(clanq_ap_write(&ap, 128, &v, sizeof(v)), 0);
	assert_ptr_equal(one_event(&e, CLANQ_NET_TW), sc);
	assert_int_equal(clanq_conn_tw_fired(sc, got, 2), 1);
	assert_ptr_equal(got[0], t2);
	assert_int_equal(clanq_conn_tw_destroy(t2), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);
	/* the connection itself is untouched */
	assert_int_equal(clanq_send(cc, "ok", 2, 0), 0);
	assert_ptr_equal(one_event(&e, CLANQ_NET_IN), sc);
	assert_int_equal(clanq_conn_close(cc), 0);
	assert_int_equal(clanq_conn_close(sc), 0);
	/* the slots all came back */
	pair(&e, &cc, &sc);
	assert_int_equal(fill_tws(sc, &r), CLANQ_NET_TW_MAX);
	assert_int_equal(clanq_region_free(&r), 0);	/* under 256 tripwires */
	assert_int_equal(clanq_conn_close(sc), 0);
	assert_int_equal(clanq_conn_close(cc), 0);
	env_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_tw_events),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_order_and_leaks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
