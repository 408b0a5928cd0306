// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for lib/handshake.c, the connection handshake's state
 * machines: the client's (CONNECT retransmitted with a doubling RTO until
 * an ACCEPT, a REFUSE, the driver's UNREACHABLE notice or the deadline)
 * and the listener's backlog (CONNECTs parsed, duplicates recognised,
 * FULL at capacity, taken oldest first).
 *
 * Messages are built here as the driver would deliver them: src is
 * stamped by the driver, so a forger cannot pick it, but it can be any
 * endpoint a real peer has. Each forged message differs from a genuine
 * one in one field, so an ignored forgery is ignored for that field.
 *
 * Then a model: several clients, one listener, a network that loses,
 * duplicates and reorders, forged answers thrown in, and the verdict of
 * every state-machine call predicted by a reference. Last, the nonces'
 * pool (lib/net.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../lib/handshake.h"
#include "../../lib/net_internal.h"
#include "../../lib/ring.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static char ctx[240];

#define set_ctx(...)	snprintf(ctx, sizeof(ctx), __VA_ARGS__)

#define check(cond)							\
	do {								\
		if (!(cond))						\
			fail_msg("%s: %s", ctx, #cond);			\
	} while (0)

#define check_eq(a, b)							\
	do {								\
		long long a_ = (long long)(a), b_ = (long long)(b);	\
		if (a_ != b_)						\
			fail_msg("%s: %s == %s: %lld != %lld", ctx,	\
				 #a, #b, a_, b_);			\
	} while (0)

#define MS	(1000 * 1000ull)
#define SEC	(1000 * MS)

/* The server: node 5, the listener at service 9, its net endpoint 77. */
static const struct clanq_addr DST = { 5, 9 };
static const struct clanq_addr SRV_EP = { 5, 77 };
/* A client: node 2, its net endpoint 12, its ring region 1002. */
static const struct clanq_addr CLI_EP = { 2, 12 };
static const struct clanq_addr CLI_RING = { 2, 1002 };

#define CONN	3u
#define NONCE	0x0123456789abcdefull

/* ---------------------------------------------------------------------
 * Messages as the driver delivers them.
 */
static struct clanq_oob_msg oob(uint32_t type, struct clanq_addr src,
				const void *payload, uint32_t len)
{
	struct clanq_oob_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.len = len;
	m.src = src;
	memcpy(m.payload, payload, len < sizeof(m.payload) ? len : sizeof(m.payload));
	return m;
}

static struct clanq_hs_accept accept_for(uint32_t conn, uint64_t nonce)
{
	struct clanq_hs_accept a;

	memset(&a, 0, sizeof(a));
	a.magic = CLANQ_HS_MAGIC;
	a.conn = conn;
	a.nonce = nonce;
	a.srv_conn = 41;
	a.ring_cap = 4032;
	a.ring.node = SRV_EP.node;
	a.ring.id = 5001;
	a.key = 0xfeedfacecafebeefull;
	a.srv_nonce = 0x5eed5eed5eed5eedull;
	return a;
}

static struct clanq_oob_msg accept_msg(struct clanq_hs_accept a)
{
	return oob(CLANQ_HS_ACCEPT, SRV_EP, &a, sizeof(a));
}

static struct clanq_hs_refuse refuse_for(uint32_t conn, uint64_t nonce)
{
	struct clanq_hs_refuse r;

	memset(&r, 0, sizeof(r));
	r.magic = CLANQ_HS_MAGIC;
	r.conn = conn;
	r.nonce = nonce;
	r.err = -ECONNREFUSED;
	return r;
}

/* A REFUSE comes from the listener (the service), an ACCEPT from the net ep. */
static struct clanq_oob_msg refuse_msg(struct clanq_hs_refuse r)
{
	return oob(CLANQ_HS_REFUSE, DST, &r, sizeof(r));
}

/* The driver's notice that what we sent to dst found nobody. */
static struct clanq_oob_msg unreachable_msg(struct clanq_addr dst, uint32_t type,
					    const void *sent, uint32_t len)
{
	struct clanq_oob_unreachable u;

	memset(&u, 0, sizeof(u));
	u.type = type;
	u.len = len;
	memcpy(u.head, sent, len < sizeof(u.head) ? len : sizeof(u.head));
	return oob(CLANQ_OOB_UNREACHABLE, dst, &u, sizeof(u));
}

static struct clanq_hs_connect connect_for(struct clanq_addr ring, uint32_t conn,
					   uint64_t nonce)
{
	struct clanq_hs_connect c;

	memset(&c, 0, sizeof(c));
	c.magic = CLANQ_HS_MAGIC;
	c.conn = conn;
	c.nonce = nonce;
	c.ring = ring;
	c.key = 0xabad1deaull ^ nonce;
	c.ring_cap = 4032;
	c.want_cap = 0;
	return c;
}

static struct clanq_oob_msg connect_msg(struct clanq_addr src,
					struct clanq_hs_connect c)
{
	return oob(CLANQ_HS_CONNECT, src, &c, sizeof(c));
}

/* ---------------------------------------------------------------------
 * The client.
 */

/* A client as clanq_connect() starts one: ring fields first, then start. */
static void client_start(struct clanq_hs_client *hs, uint32_t conn, uint64_t nonce,
			 uint64_t now, uint64_t timeout)
{
	memset(hs, 0x5a, sizeof(*hs));	/* start must not depend on old state */
	hs->msg.ring = CLI_RING;
	hs->msg.key = 0x1111222233334444ull;
	hs->msg.ring_cap = 4032;
	hs->msg.want_cap = 8128;
	assert_int_equal(clanq_hs_client_start(hs, DST, conn, nonce, now, timeout),
			 CLANQ_HS_SEND);
}

static void test_client_start_fills_the_connect(void **state)
{
	struct clanq_hs_client hs;
	struct clanq_hs_accept zero;

	(void)state;
	set_ctx("start");
	client_start(&hs, CONN, NONCE, 1000, 5 * SEC);
	memset(&zero, 0, sizeof(zero));
	check_eq(hs.state, CLANQ_HS_SENT);
	check_eq(hs.err, 0);
	check(hs.dst.node == DST.node && hs.dst.id == DST.id);
	check_eq(hs.msg.magic, CLANQ_HS_MAGIC);
	check_eq(hs.msg.conn, CONN);
	check(hs.msg.nonce == NONCE);
	check_eq(hs.msg.attempt, 0);
	check_eq(hs.msg.reserved, 0);
	/* the caller's ring fields are kept */
	check(hs.msg.ring.node == CLI_RING.node && hs.msg.ring.id == CLI_RING.id);
	check(hs.msg.key == 0x1111222233334444ull);
	check_eq(hs.msg.ring_cap, 4032);
	check_eq(hs.msg.want_cap, 8128);
	check(memcmp(&hs.acc, &zero, sizeof(zero)) == 0);
	/* the first retransmission is one RTO away */
	check(clanq_hs_client_due(&hs) == 1000 + CLANQ_HS_RTO_NS);
	/* a deadline before it comes first */
	client_start(&hs, CONN, NONCE, 1000, CLANQ_HS_RTO_NS / 2);
	check(clanq_hs_client_due(&hs) == 1000 + CLANQ_HS_RTO_NS / 2);
	/* a timeout that would run past 2^64 ends at 2^64 - 1 */
	client_start(&hs, CONN, NONCE, 1000, ~0ull - 10);
	check(hs.deadline == ~0ull);
	check(clanq_hs_client_due(&hs) == 1000 + CLANQ_HS_RTO_NS);
}

/*
 * Retransmissions: the first one RTO after the start, then the interval
 * doubles up to RTO_MAX; each one bumps attempt; between them, nothing;
 * at the deadline, -ETIMEDOUT and nothing more.
 */
static void test_client_retransmits_with_doubling_rto_until_the_deadline(void **state)
{
	static const uint64_t starts[] = { 0, 1000, 1ull << 62 };
	unsigned int s;

	(void)state;
	for (s = 0; s < ARRAY_SIZE(starts); s++) {
		uint64_t t0 = starts[s], timeout = 7 * SEC + 3 * MS, deadline = t0 + timeout;
		uint64_t next = t0 + CLANQ_HS_RTO_NS, rto = CLANQ_HS_RTO_NS;
		uint32_t attempt = 0;
		struct clanq_hs_client hs;

		client_start(&hs, CONN, NONCE, t0, timeout);
		while (next < deadline) {
			set_ctx("start %llu, attempt %u, due at %llu",
				(unsigned long long)t0, attempt, (unsigned long long)next);
			check(clanq_hs_client_due(&hs) == next);
			/* not yet: nothing, however often asked */
			check_eq(clanq_hs_client_tick(&hs, next - 1), CLANQ_HS_NOTHING);
			check_eq(clanq_hs_client_tick(&hs, next - rto / 2), CLANQ_HS_NOTHING);
			check_eq(hs.msg.attempt, attempt);
			/* due: one retransmission, the next one twice as far */
			check_eq(clanq_hs_client_tick(&hs, next), CLANQ_HS_SEND);
			check_eq(hs.msg.attempt, ++attempt);
			check_eq(hs.state, CLANQ_HS_SENT);
			check_eq(clanq_hs_client_tick(&hs, next), CLANQ_HS_NOTHING);
			rto = rto * 2 > CLANQ_HS_RTO_MAX_NS ? CLANQ_HS_RTO_MAX_NS : rto * 2;
			next += rto;
		}
		/* 20, 40, ... 640 ms, then every second: 7 + 4 in 7 s */
		set_ctx("start %llu: the deadline", (unsigned long long)t0);
		check_eq(attempt, 11);
		check(rto == CLANQ_HS_RTO_MAX_NS);
		check(clanq_hs_client_due(&hs) == deadline);
		check_eq(clanq_hs_client_tick(&hs, deadline - 1), CLANQ_HS_NOTHING);
		check_eq(clanq_hs_client_tick(&hs, deadline), CLANQ_HS_FAILED);
		check_eq(hs.state, CLANQ_HS_ERROR);
		check_eq(hs.err, -ETIMEDOUT);
		/* over: no more sends, no second failure */
		check_eq(clanq_hs_client_tick(&hs, deadline + 10 * SEC), CLANQ_HS_NOTHING);
		check_eq(hs.msg.attempt, attempt);
		check_eq(hs.err, -ETIMEDOUT);
	}
}

/* A late tick sends once and counts the next interval from now. */
static void test_client_late_tick_sends_once(void **state)
{
	struct clanq_hs_client hs;
	uint64_t t = 1000 + CLANQ_HS_RTO_NS + 500 * MS;

	(void)state;
	set_ctx("late");
	client_start(&hs, CONN, NONCE, 1000, 60 * SEC);
	check_eq(clanq_hs_client_tick(&hs, t), CLANQ_HS_SEND);
	check_eq(hs.msg.attempt, 1);
	check_eq(clanq_hs_client_tick(&hs, t), CLANQ_HS_NOTHING);
	check(clanq_hs_client_due(&hs) == t + 2 * CLANQ_HS_RTO_NS);
	/* a tick past the deadline fails rather than sends */
	check_eq(clanq_hs_client_tick(&hs, 1000 + 61 * SEC), CLANQ_HS_FAILED);
	check_eq(hs.err, -ETIMEDOUT);
	check_eq(hs.msg.attempt, 1);
}

/* A deadline before the first retransmission, and none at all. */
static void test_client_short_and_zero_timeouts(void **state)
{
	struct clanq_hs_client hs;

	(void)state;
	set_ctx("short timeout");
	client_start(&hs, CONN, NONCE, 1000, 5 * MS);
	check_eq(clanq_hs_client_tick(&hs, 1000 + 5 * MS - 1), CLANQ_HS_NOTHING);
	check_eq(clanq_hs_client_tick(&hs, 1000 + 5 * MS), CLANQ_HS_FAILED);
	check_eq(hs.err, -ETIMEDOUT);
	check_eq(hs.msg.attempt, 0);
	set_ctx("zero timeout");
	client_start(&hs, CONN, NONCE, 1000, 0);
	check(clanq_hs_client_due(&hs) == 1000);
	check_eq(clanq_hs_client_tick(&hs, 1000), CLANQ_HS_FAILED);
	check_eq(hs.err, -ETIMEDOUT);
}

/* After the end, whatever arrives is ignored and changes nothing. */
static void check_over(struct clanq_hs_client *hs, uint32_t conn, uint64_t nonce)
{
	struct clanq_hs_client before;
	struct clanq_hs_accept a = accept_for(conn, nonce);
	struct clanq_oob_msg m;

	memcpy(&before, hs, sizeof(before));
	a.srv_conn = 99;
	a.srv_nonce = 0x9999;
	m = accept_msg(a);
	check_eq(clanq_hs_client_on_msg(hs, &m), CLANQ_HS_IGNORED);
	m = refuse_msg(refuse_for(conn, nonce));
	check_eq(clanq_hs_client_on_msg(hs, &m), CLANQ_HS_IGNORED);
	m = unreachable_msg(DST, CLANQ_HS_CONNECT, &hs->msg, sizeof(hs->msg));
	check_eq(clanq_hs_client_on_msg(hs, &m), CLANQ_HS_IGNORED);
	check_eq(clanq_hs_client_tick(hs, hs->deadline + 1), CLANQ_HS_NOTHING);
	check_eq(clanq_hs_client_tick(hs, hs->next_tx), CLANQ_HS_NOTHING);
	check(memcmp(&before, hs, sizeof(before)) == 0);
}

static void test_client_accept_establishes_once(void **state)
{
	struct clanq_hs_client hs;
	struct clanq_hs_accept a = accept_for(CONN, NONCE), a2;
	struct clanq_oob_msg m;

	(void)state;
	set_ctx("accept");
	client_start(&hs, CONN, NONCE, 1000, 5 * SEC);
	check_eq(clanq_hs_client_tick(&hs, 1000 + CLANQ_HS_RTO_NS), CLANQ_HS_SEND);
	m = accept_msg(a);
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_ESTABLISHED);
	check_eq(hs.state, CLANQ_HS_DONE);
	check_eq(hs.err, 0);
	check(memcmp(&hs.acc, &a, sizeof(a)) == 0);
	check(hs.srv_ep.node == SRV_EP.node && hs.srv_ep.id == SRV_EP.id);
	/* the same ACCEPT again (we retransmitted): the first one counts */
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
	/* even one that says something else */
	a2 = a;
	a2.srv_conn = 7;
	a2.ring.id = 6000;
	a2.key = 1;
	a2.srv_nonce = 2;
	m = accept_msg(a2);
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
	check(memcmp(&hs.acc, &a, sizeof(a)) == 0);
	check_eq(hs.state, CLANQ_HS_DONE);
	check_over(&hs, CONN, NONCE);
}

/* The ACCEPT comes from the server's net endpoint: any id on that node. */
static void test_client_accept_from_any_endpoint_of_the_node(void **state)
{
	struct clanq_hs_client hs;
	struct clanq_oob_msg m = accept_msg(accept_for(CONN, NONCE));

	(void)state;
	set_ctx("srv ep");
	client_start(&hs, CONN, NONCE, 1000, 5 * SEC);
	m.src.id = 0x7fffffff;
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_ESTABLISHED);
	check_eq(hs.srv_ep.id, 0x7fffffff);
}

/*
 * Forged and stale ACCEPTs: each differs from the genuine one in one
 * field. Ignored, the state untouched; the genuine one still works.
 */
static void test_client_ignores_forged_accepts(void **state)
{
	struct clanq_hs_accept a, g = accept_for(CONN, NONCE);
	struct clanq_hs_client hs, before;
	struct clanq_oob_msg m;
	unsigned int i, forged = 0;

	(void)state;
	client_start(&hs, CONN, NONCE, 1000, 5 * SEC);
	memcpy(&before, &hs, sizeof(hs));
	for (i = 0; i < 64 + 32 + 32 + 20 + 16; i++) {
		a = g;
		m = accept_msg(a);
		if (i < 64) {
			a.nonce ^= 1ull << i;			/* wrong nonce */
			set_ctx("nonce bit %u", i);
		} else if (i < 96) {
			a.conn ^= 1u << (i - 64);		/* wrong conn */
			set_ctx("conn bit %u", i - 64);
		} else if (i < 128) {
			a.magic ^= 1u << (i - 96);		/* wrong magic */
			set_ctx("magic bit %u", i - 96);
		} else if (i < 148) {
			static const uint32_t lens[] = {
				0, 1, 8, 16, 24, 32, 40, 44, 45, 46, 47, 49, 50, 52,
				56, 63, 64, 4096, 0x80000000u, 0xffffffffu,
			};

			m.len = lens[i - 128];			/* wrong len */
			set_ctx("len %u", m.len);
		} else {
			switch (i - 148) {
			case 0: m.src.node = DST.node + 1; break;	/* another node */
			case 1: m.src.node = DST.node - 1; break;
			case 2: m.src.node = CLANQ_NODE_INVALID; break;
			case 3: m.src.node = CLI_EP.node; break;
			case 4: a.ring.node = DST.node + 1; break;	/* a ring elsewhere */
			case 5: a.ring.node = CLI_EP.node; break;
			case 6: a.ring_cap = 0; break;			/* bad ring_cap */
			case 7: a.ring_cap = 4033; break;
			case 8: a.ring_cap = 4036; break;
			case 9: a.ring_cap = 7; break;
			case 10: a.ring_cap = 0xffffffffu; break;
			case 11:					/* both off */
				m.src.node = 9;
				a.ring.node = 9;
				break;
			case 12: a.ring_cap = 8; break;		/* too small a ring */
			case 13: a.ring_cap = 56; break;
			case 14: a.ring_cap = (uint32_t)CLANQ_RING_CAP_MAX + 8; break;
			case 15: a.ring.id = 0; break;		/* no region */
			}
			set_ctx("field %u: src.node %u ring.node %u ring_cap %u", i - 148,
				m.src.node, a.ring.node, a.ring_cap);
		}
		memcpy(m.payload, &a, sizeof(a));
		check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
		check(memcmp(&before, &hs, sizeof(hs)) == 0);
		forged++;
	}
	set_ctx("genuine");
	check_eq(forged, 164);
	m = accept_msg(g);
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_ESTABLISHED);
}

/* An answer to an older connection in the same slot is not ours. */
static void test_client_ignores_answers_to_an_older_connection(void **state)
{
	struct clanq_hs_client hs;
	struct clanq_oob_msg m;
	struct clanq_hs_connect old;

	(void)state;
	set_ctx("old");
	client_start(&hs, CONN, NONCE - 1, 1000, 5 * SEC);
	old = hs.msg;
	client_start(&hs, CONN, NONCE, 2000, 5 * SEC);
	m = accept_msg(accept_for(CONN, NONCE - 1));
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
	m = refuse_msg(refuse_for(CONN, NONCE - 1));
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
	m = unreachable_msg(DST, CLANQ_HS_CONNECT, &old, sizeof(old));
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
	check_eq(hs.state, CLANQ_HS_SENT);
	m = accept_msg(accept_for(CONN, NONCE));
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_ESTABLISHED);
}

static void test_client_refused(void **state)
{
	struct clanq_hs_client hs, before;
	struct clanq_hs_refuse r;
	struct clanq_oob_msg m;
	unsigned int i;

	(void)state;
	/* forged: one field off each */
	client_start(&hs, CONN, NONCE, 1000, 5 * SEC);
	memcpy(&before, &hs, sizeof(hs));
	for (i = 0; i < 8; i++) {
		r = refuse_for(CONN, NONCE);
		m = refuse_msg(r);
		switch (i) {
		case 0: r.nonce ^= 1; break;
		case 1: r.nonce ^= 1ull << 63; break;
		case 2: r.conn ^= 1; break;
		case 3: r.magic ^= 1; break;
		case 4: m.len = sizeof(r) - 1; break;
		case 5: m.len = sizeof(r) + 8; break;
		case 6: m.src.node = DST.node + 1; break;
		case 7: m.src.node = CLANQ_NODE_INVALID; break;
		}
		memcpy(m.payload, &r, sizeof(r));
		set_ctx("forged REFUSE %u", i);
		check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
		check(memcmp(&before, &hs, sizeof(hs)) == 0);
	}
	/* genuine, after a retransmission */
	set_ctx("REFUSE");
	check_eq(clanq_hs_client_tick(&hs, 1000 + CLANQ_HS_RTO_NS), CLANQ_HS_SEND);
	m = refuse_msg(refuse_for(CONN, NONCE));
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_FAILED);
	check_eq(hs.state, CLANQ_HS_ERROR);
	check_eq(hs.err, -ECONNREFUSED);
	check_over(&hs, CONN, NONCE);
}

static void test_client_unreachable(void **state)
{
	struct clanq_hs_client hs, before;
	struct clanq_hs_connect c;
	struct clanq_oob_msg m;
	unsigned int i;

	(void)state;
	client_start(&hs, CONN, NONCE, 1000, 5 * SEC);
	memcpy(&before, &hs, sizeof(hs));
	for (i = 0; i < 12; i++) {
		c = hs.msg;
		m = unreachable_msg(DST, CLANQ_HS_CONNECT, &c, sizeof(c));
		switch (i) {
		case 0: c.conn ^= 1; break;		/* someone else's CONNECT */
		case 1: c.nonce ^= 1; break;
		case 2: c.nonce ^= 1ull << 63; break;
		case 3: c.conn = CONN + 1; c.nonce = NONCE + 1; break;
		case 4: m.src.node = DST.node + 1; break;	/* not our destination */
		case 5: m.src.id = DST.id + 1; break;
		case 6: m.src = CLI_EP; break;
		case 7: m.src = SRV_EP; break;
		case 8: m.len = sizeof(struct clanq_oob_unreachable) - 8; break;
		case 9: m.len = 0; break;
		}
		{
			struct clanq_oob_unreachable u;

			memcpy(&u, m.payload, sizeof(u));
			memcpy(u.head, &c, sizeof(u.head));
			if (i == 10)
				u.type = CLANQ_HS_ACCEPT;	/* not a CONNECT undelivered */
			if (i == 11)
				u.type = CLANQ_OOB_TYPE_USER;
			memcpy(m.payload, &u, sizeof(u));
		}
		set_ctx("UNREACHABLE not for us %u", i);
		check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
		check(memcmp(&before, &hs, sizeof(hs)) == 0);
	}
	/* the notice for a retransmission of ours (attempt is past the head) */
	set_ctx("UNREACHABLE");
	check_eq(clanq_hs_client_tick(&hs, 1000 + CLANQ_HS_RTO_NS), CLANQ_HS_SEND);
	check_eq(clanq_hs_client_tick(&hs, 1000 + 3 * CLANQ_HS_RTO_NS), CLANQ_HS_SEND);
	m = unreachable_msg(DST, CLANQ_HS_CONNECT, &hs.msg, sizeof(hs.msg));
	check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_FAILED);
	check_eq(hs.state, CLANQ_HS_ERROR);
	check_eq(hs.err, -ECONNREFUSED);
	check_over(&hs, CONN, NONCE);
}

/* Types that are not answers: CONNECT, REVOKED, user types, nonsense. */
static void test_client_ignores_other_types(void **state)
{
	static const uint32_t types[] = {
		0, CLANQ_HS_CONNECT, 0x43, 0x3f, CLANQ_OOB_TYPE_USER,
		CLANQ_OOB_TYPE_USER + CLANQ_HS_ACCEPT, CLANQ_OOB_REVOKED,
		CLANQ_OOB_NOTICE, CLANQ_OOB_NOTICE | CLANQ_HS_ACCEPT, 0xffffffffu,
	};
	struct clanq_hs_client hs, before;
	struct clanq_oob_msg m = accept_msg(accept_for(CONN, NONCE));
	unsigned int i;

	(void)state;
	client_start(&hs, CONN, NONCE, 1000, 5 * SEC);
	memcpy(&before, &hs, sizeof(hs));
	for (i = 0; i < ARRAY_SIZE(types); i++) {
		set_ctx("type %#x", types[i]);
		m.type = types[i];
		check_eq(clanq_hs_client_on_msg(&hs, &m), CLANQ_HS_IGNORED);
		check(memcmp(&before, &hs, sizeof(hs)) == 0);
	}
}

/* ---------------------------------------------------------------------
 * The listener's backlog.
 */
static struct clanq_hs_pending backlog_q[64];

static struct clanq_hs_backlog backlog(uint32_t cap)
{
	struct clanq_hs_backlog b = { backlog_q, cap, 0, 0 };

	assert_true(cap <= ARRAY_SIZE(backlog_q));
	memset(backlog_q, 0x5a, sizeof(backlog_q));
	return b;
}

static bool same_backlog(const struct clanq_hs_backlog *a,
			 const struct clanq_hs_backlog *b)
{
	return a->q == b->q && a->cap == b->cap && a->head == b->head &&
	       a->count == b->count;
}

static bool same_pending(const struct clanq_hs_pending *p, struct clanq_addr src,
			 const struct clanq_hs_connect *c)
{
	return p->src.node == src.node && p->src.id == src.id &&
	       memcmp(&p->c, c, sizeof(*c)) == 0;
}

/* Every way a CONNECT can be malformed, one field at a time. */
#define NR_MALFORMED 24

static struct clanq_oob_msg malformed(unsigned int i, const char **what)
{
	struct clanq_hs_connect c = connect_for(CLI_RING, CONN, NONCE);
	struct clanq_oob_msg m;
	uint32_t len = sizeof(c), type = CLANQ_HS_CONNECT;
	struct clanq_addr src = CLI_EP;

	switch (i) {
	case 0: type = CLANQ_HS_ACCEPT; *what = "type ACCEPT"; break;
	case 1: type = CLANQ_HS_REFUSE; *what = "type REFUSE"; break;
	case 2: type = CLANQ_OOB_TYPE_USER | CLANQ_HS_CONNECT; *what = "user type"; break;
	case 3: type = CLANQ_OOB_UNREACHABLE; *what = "a notice"; break;
	case 4: len = sizeof(c) - 1; *what = "len - 1"; break;
	case 5: len = sizeof(c) - 8; *what = "len - 8"; break;
	case 6: len = 0; *what = "len 0"; break;
	case 7: len = 0xffffffffu; *what = "len 2^32-1"; break;
	case 8: c.magic ^= 1; *what = "magic"; break;
	case 9: c.magic = CLANQ_HS_MAGIC + 1; *what = "magic: another version"; break;
	case 10: c.reserved = 1; *what = "reserved"; break;
	case 11: c.reserved = 0x80000000u; *what = "reserved, top bit"; break;
	case 12: c.ring.node = CLI_EP.node + 1; *what = "ring on another node"; break;
	case 13: c.ring.node = DST.node; *what = "ring on the server's node"; break;
	case 14: c.ring.id = 0; *what = "ring id 0"; break;
	case 15: c.ring_cap = 0; *what = "ring_cap 0"; break;
	case 16: c.ring_cap = 56; *what = "ring_cap 56"; break;
	case 17: c.ring_cap = 4036; *what = "ring_cap not a multiple of 8"; break;
	case 18: c.ring_cap = 63; *what = "ring_cap 63"; break;
	case 19: c.want_cap = 56; *what = "want_cap 56"; break;
	case 20: c.want_cap = 4033; *what = "want_cap not a multiple of 8"; break;
	case 21: c.want_cap = 0xffffffffu; *what = "want_cap 2^32-1"; break;
	case 22: src.node = CLI_EP.node + 1; *what = "src on another node than the ring"; break;
	case 23: c.ring_cap = 0xfffffff9u; *what = "ring_cap 2^32-7"; break;
	}
	m = oob(type, src, &c, sizeof(c));
	m.len = len;
	return m;
}

static void test_parse_connect(void **state)
{
	struct clanq_hs_connect c = connect_for(CLI_RING, CONN, NONCE), got;
	struct clanq_oob_msg m;
	const char *what = "";
	unsigned int i;

	(void)state;
	set_ctx("well-formed");
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_parse_connect(&m, &got), 0);
	check(memcmp(&got, &c, sizeof(c)) == 0);
	/* what may be anything: conn, nonce, key, attempt; want_cap 0 or usable */
	c.conn = 0xffffffffu;
	c.nonce = 0;
	c.key = 0;
	c.attempt = 0xffffffffu;
	c.want_cap = 64;
	c.ring_cap = (uint32_t)CLANQ_RING_CAP_MAX;
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_parse_connect(&m, &got), 0);
	check(memcmp(&got, &c, sizeof(c)) == 0);
	c.ring_cap = 64;
	c.want_cap = (uint32_t)CLANQ_RING_CAP_MAX;
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_parse_connect(&m, &got), 0);
	for (i = 0; i < NR_MALFORMED; i++) {
		m = malformed(i, &what);
		set_ctx("malformed: %s", what);
		check_eq(clanq_hs_parse_connect(&m, &got), -EINVAL);
	}
	/* rings past CLANQ_RING_CAP_MAX: a record's 32-bit len would not fit */
	set_ctx("ring past the largest");
	c = connect_for(CLI_RING, CONN, NONCE);
	c.ring_cap = (uint32_t)CLANQ_RING_CAP_MAX + 8;
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_parse_connect(&m, &got), -EINVAL);
	c.ring_cap = 4032;
	c.want_cap = (uint32_t)CLANQ_RING_CAP_MAX + 8;
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_parse_connect(&m, &got), -EINVAL);
}

static void test_backlog_is_fifo(void **state)
{
	struct clanq_hs_backlog b = backlog(4);
	struct clanq_hs_connect c[3];
	struct clanq_hs_pending p, untouched;
	struct clanq_addr src[3] = { { 2, 12 }, { 3, 12 }, { 2, 13 } };
	struct clanq_oob_msg m;
	unsigned int i;

	(void)state;
	set_ctx("fifo");
	for (i = 0; i < 3; i++) {
		struct clanq_addr ring = { src[i].node, 2000 + i };

		c[i] = connect_for(ring, 10 + i, NONCE * (i + 1));
		m = connect_msg(src[i], c[i]);
		check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
		check_eq(b.count, i + 1);
	}
	for (i = 0; i < 3; i++) {
		check_eq(clanq_hs_backlog_take(&b, &p), 0);
		check(same_pending(&p, src[i], &c[i]));
	}
	memset(&p, 0x77, sizeof(p));
	untouched = p;
	check_eq(clanq_hs_backlog_take(&b, &p), -EAGAIN);
	check(memcmp(&p, &untouched, sizeof(p)) == 0);
	check_eq(b.count, 0);
}

static void test_backlog_recognises_duplicates(void **state)
{
	struct clanq_hs_backlog b = backlog(3);
	struct clanq_hs_connect c = connect_for(CLI_RING, CONN, NONCE), d;
	struct clanq_hs_pending p;
	struct clanq_oob_msg m;
	struct clanq_addr src2 = { CLI_EP.node, CLI_EP.id + 1 };

	(void)state;
	set_ctx("dup");
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
	/* the same CONNECT, and a retransmission of it (attempt, even key, differ) */
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_DUP);
	d = c;
	d.attempt = 5;
	d.key ^= 1;
	d.ring_cap = 8128;
	m = connect_msg(CLI_EP, d);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_DUP);
	check_eq(b.count, 1);
	/* a new nonce from the same endpoint and slot: a new connection */
	d = c;
	d.nonce ^= 1;
	m = connect_msg(CLI_EP, d);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
	/* the same slot and nonce from another endpoint: another client */
	m = connect_msg(src2, c);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
	check_eq(b.count, 3);
	/* full: a duplicate is still a duplicate (no REFUSE for a pending client) */
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_DUP);
	m = connect_msg(src2, c);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_DUP);
	/* another slot, same nonce: new, and no room */
	d = c;
	d.conn ^= 1;
	m = connect_msg(CLI_EP, d);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_FULL);
	/* the first one kept what it first said */
	check_eq(clanq_hs_backlog_take(&b, &p), 0);
	check(same_pending(&p, CLI_EP, &c));
	/*
	 * Once taken, the backlog no longer knows it: a retransmission is the
	 * listener's to answer (clanq_conn_resend_accept), before the backlog.
	 */
	m = connect_msg(CLI_EP, c);
	check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
}

static void test_backlog_full_refuses_and_keeps_what_it_has(void **state)
{
	static const uint32_t caps[] = { 1, 2, 3, 7, 64 };
	unsigned int k, i;

	(void)state;
	for (k = 0; k < ARRAY_SIZE(caps); k++) {
		struct clanq_hs_backlog b = backlog(caps[k]), saved;
		struct clanq_hs_pending q[64], p;
		struct clanq_hs_connect c;
		struct clanq_oob_msg m;

		set_ctx("cap %u", caps[k]);
		for (i = 0; i < caps[k]; i++) {
			c = connect_for(CLI_RING, i, NONCE + i);
			m = connect_msg(CLI_EP, c);
			check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
		}
		saved = b;
		memcpy(q, backlog_q, sizeof(q));
		for (i = 0; i < 10; i++) {
			c = connect_for(CLI_RING, 1000 + i, NONCE);
			m = connect_msg(CLI_EP, c);
			check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_FULL);
		}
		check(same_backlog(&saved, &b));
		check(memcmp(q, backlog_q, sizeof(q)) == 0);
		/* one out, one in */
		check_eq(clanq_hs_backlog_take(&b, &p), 0);
		check_eq(p.c.conn, 0);
		check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
		check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_DUP);
		c = connect_for(CLI_RING, 2000, NONCE);
		m = connect_msg(CLI_EP, c);
		check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_FULL);
		for (i = 1; i < caps[k]; i++) {
			check_eq(clanq_hs_backlog_take(&b, &p), 0);
			check_eq(p.c.conn, i);
		}
		check_eq(clanq_hs_backlog_take(&b, &p), 0);
		check_eq(p.c.conn, 1009);
		check_eq(clanq_hs_backlog_take(&b, &p), -EAGAIN);
	}
}

/* A malformed CONNECT is BAD, empty backlog or full, and changes nothing. */
static void test_backlog_ignores_malformed(void **state)
{
	unsigned int fill, i;

	(void)state;
	for (fill = 0; fill <= 3; fill++) {
		struct clanq_hs_backlog b = backlog(3), saved;
		struct clanq_hs_pending q[64];
		struct clanq_oob_msg m;
		const char *what = "";

		for (i = 0; i < fill; i++) {
			m = connect_msg(CLI_EP, connect_for(CLI_RING, i, NONCE));
			assert_int_equal(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
		}
		/* CONN, NONCE from CLI_EP is pending when fill > CONN */
		saved = b;
		memcpy(q, backlog_q, sizeof(q));
		for (i = 0; i < NR_MALFORMED; i++) {
			m = malformed(i, &what);
			set_ctx("%u pending: %s", fill, what);
			check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_BAD);
			check(same_backlog(&saved, &b));
			check(memcmp(q, backlog_q, sizeof(q)) == 0);
		}
	}
}

/* Many add/take cycles: the ring of pending CONNECTs wraps, against a FIFO. */
static uint64_t xs;

static uint64_t mix_nonce(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rnd(void)
{
	xs ^= xs >> 12;
	xs ^= xs << 25;
	xs ^= xs >> 27;
	return xs * 0x2545f4914f6cdd1dull;
}

static void test_backlog_wraps_around(void **state)
{
	static const uint32_t caps[] = { 1, 2, 3, 5, 7, 16, 64 };
	static struct clanq_hs_pending ref[1 << 16];
	unsigned int k, op;

	(void)state;
	xs = 42;
	for (k = 0; k < ARRAY_SIZE(caps); k++) {
		struct clanq_hs_backlog b = backlog(caps[k]);
		unsigned int rh = 0, rt = 0, wraps = 0;
		uint32_t serial = 0;

		for (op = 0; op < 30000; op++) {
			struct clanq_hs_pending p;
			struct clanq_oob_msg m;
			unsigned int r = rnd() % 100;

			set_ctx("cap %u op %u", caps[k], op);
			if (r < 50) {
				/* a new one */
				struct clanq_addr src = { 1 + (uint32_t)(rnd() % 3), 10 + (uint32_t)(rnd() % 3) };
				struct clanq_addr ring = { src.node, 100 + serial };
				struct clanq_hs_connect c = connect_for(ring, serial % 4, mix_nonce(serial));

				serial++;
				m = connect_msg(src, c);
				if (rt - rh == caps[k]) {
					check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_FULL);
				} else {
					check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_QUEUED);
					ref[rt++ % ARRAY_SIZE(ref)] = (struct clanq_hs_pending){ src, c };
				}
			} else if (r < 65 && rt != rh) {
				/* a retransmission of a pending one */
				struct clanq_hs_pending *o = &ref[(rh + rnd() % (rt - rh)) % ARRAY_SIZE(ref)];
				struct clanq_hs_connect c = o->c;

				c.attempt++;
				m = connect_msg(o->src, c);
				check_eq(clanq_hs_backlog_add(&b, &m), CLANQ_HS_DUP);
			} else {
				if (rt == rh) {
					check_eq(clanq_hs_backlog_take(&b, &p), -EAGAIN);
					continue;
				}
				check_eq(clanq_hs_backlog_take(&b, &p), 0);
				check(same_pending(&p, ref[rh % ARRAY_SIZE(ref)].src,
						   &ref[rh % ARRAY_SIZE(ref)].c));
				rh++;
				if (b.head == 0)
					wraps++;
			}
			check_eq(b.count, rt - rh);
			check(b.head < b.cap);
		}
		set_ctx("cap %u", caps[k]);
		check(wraps > 100);
		check(serial > 10000);
	}
}

/* =====================================================================
 * The model: clients, a listener and a network that loses, duplicates
 * and reorders.
 *
 * Each client makes a few connections in turn from the same slot, each
 * with a new nonce, so answers to the older ones are still about. The
 * listener does what lib/net.c's intake and accept do, around the
 * backlog: a CONNECT whose connection it already accepted gets that
 * ACCEPT again; otherwise the backlog decides (a FULL is answered with
 * a REFUSE). One difference: clanq_listener_intake() looks for an
 * accepted connection only when the CONNECT's attempt is not 0, and on
 * a network that reorders (this one) an attempt-0 CONNECT can arrive
 * after its retransmission was accepted: it would be queued and
 * accepted a second time. The loop wire delivers in order today, so
 * that is reported rather than modelled. For a while, in some runs,
 * nobody listens, and the driver answers CONNECTs with UNREACHABLE.
 * Forged answers, each wrong in one field, are thrown in for the
 * clients.
 *
 * Every verdict is predicted: the backlog's by a reference FIFO, the
 * client's by what the message is (a genuine answer to its current
 * attempt while it waits, or anything else). At the end: each
 * connection was taken from the backlog at most once, each client that
 * got ESTABLISHED holds exactly what the server sent for that attempt,
 * and every connection the server accepted is either established at
 * its client or ended there with a failure.
 */
#define NCLI		6
#define NCONNS		3	/* connections each client makes, one after another */
#define NET_MAX		4096
#define SRV_MAX		(NCLI * NCONNS * 2)

enum kind { K_CONNECT, K_ACCEPT, K_REFUSE, K_UNREACH, K_FORGED };

struct net_msg {
	struct clanq_oob_msg m;
	int to;			/* -1: the listener; else a client */
	enum kind kind;
	uint64_t nonce;		/* the attempt a genuine answer is for */
};

struct srv_rec {
	struct clanq_addr src;
	uint32_t conn;
	uint64_t nonce;
	struct clanq_hs_accept a;
	int client;
	bool established;	/* its client got it */
};

struct cli {
	struct clanq_addr ep, ring;
	uint32_t conn;
	struct clanq_hs_client hs;
	bool active;
	unsigned int started;
	uint64_t nonce;
	uint64_t failed[NCONNS];	/* nonces of attempts that ended in failure */
	unsigned int nfailed;
};

struct world {
	uint64_t now, rng;
	unsigned int loss_pct, dup_pct, take_pct, forge_pct;
	uint64_t down_until;	/* nobody listens before this */
	struct net_msg net[NET_MAX];
	unsigned int nnet;
	struct clanq_hs_backlog b;
	struct clanq_hs_pending q[8];
	struct clanq_hs_pending ref[1024];	/* what the backlog must hold */
	unsigned int ref_head, ref_tail;
	struct srv_rec srv[SRV_MAX];
	unsigned int nsrv;
	struct cli cli[NCLI];
	/* what happened */
	unsigned long sent, lost, dups, delivered, queued, dup_verdicts, full,
		bad, resent, taken, established, refused, unreachable, timedout,
		ignored, forged;
};

static struct world W;

static uint64_t wrnd(void)
{
	W.rng ^= W.rng >> 12;
	W.rng ^= W.rng << 25;
	W.rng ^= W.rng >> 27;
	return W.rng * 0x2545f4914f6cdd1dull;
}

static bool chance(unsigned int pct)
{
	return wrnd() % 100 < pct;
}

static void net_put(const struct net_msg *n)
{
	check(W.nnet < NET_MAX);
	W.net[W.nnet++] = *n;
}

/* A send: maybe lost, maybe duplicated; order is the delivery's business. */
static void net_send(struct clanq_oob_msg m, int to, enum kind kind, uint64_t nonce)
{
	struct net_msg n = { m, to, kind, nonce };

	W.sent++;
	if (chance(W.loss_pct)) {
		W.lost++;
		return;
	}
	net_put(&n);
	while (chance(W.dup_pct)) {
		W.dups++;
		net_put(&n);
	}
}

static int client_of(struct clanq_addr src)
{
	unsigned int i;

	for (i = 0; i < NCLI; i++)
		if (W.cli[i].ep.node == src.node && W.cli[i].ep.id == src.id)
			return (int)i;
	fail_msg("%s: no client at %u:%u", ctx, src.node, src.id);
	return -1;
}

static struct srv_rec *srv_find(struct clanq_addr src, uint32_t conn, uint64_t nonce)
{
	unsigned int i;

	for (i = 0; i < W.nsrv; i++)
		if (W.srv[i].src.node == src.node && W.srv[i].src.id == src.id &&
		    W.srv[i].conn == conn && W.srv[i].nonce == nonce)
			return &W.srv[i];
	return NULL;
}

static bool ref_has(struct clanq_addr src, const struct clanq_hs_connect *c)
{
	unsigned int i;

	for (i = W.ref_head; i != W.ref_tail; i++) {
		const struct clanq_hs_pending *p = &W.ref[i % ARRAY_SIZE(W.ref)];

		if (p->src.node == src.node && p->src.id == src.id &&
		    p->c.conn == c->conn && p->c.nonce == c->nonce)
			return true;
	}
	return false;
}

/* ---- the listener ---- */

static void listener_on_connect(const struct net_msg *n)
{
	const struct clanq_oob_msg *m = &n->m;
	struct clanq_hs_connect c;
	struct srv_rec *s;
	enum clanq_hs_verdict v;

	if (W.now < W.down_until) {
		/* nobody at the service: the driver's notice goes back */
		struct clanq_oob_msg u = unreachable_msg(DST, m->type, m->payload, m->len);

		W.unreachable++;
		net_send(u, client_of(m->src), K_UNREACH, n->nonce);
		return;
	}
	check_eq(clanq_hs_parse_connect(m, &c), 0);	/* clients send only good ones */
	/* one accepted already: its ACCEPT again (the first may be lost) */
	s = srv_find(m->src, c.conn, c.nonce);
	if (s) {
		W.resent++;
		net_send(accept_msg(s->a), s->client, K_ACCEPT, s->nonce);
		return;
	}
	v = clanq_hs_backlog_add(&W.b, m);
	if (ref_has(m->src, &c)) {
		check_eq(v, CLANQ_HS_DUP);
		W.dup_verdicts++;
	} else if (W.ref_tail - W.ref_head == W.b.cap) {
		check_eq(v, CLANQ_HS_FULL);
		W.full++;
		net_send(refuse_msg(refuse_for(c.conn, c.nonce)), client_of(m->src),
			 K_REFUSE, c.nonce);
	} else {
		check_eq(v, CLANQ_HS_QUEUED);
		W.queued++;
		W.ref[W.ref_tail++ % ARRAY_SIZE(W.ref)] =
			(struct clanq_hs_pending){ m->src, c };
	}
	check_eq(W.b.count, W.ref_tail - W.ref_head);
}

/* accept(): the oldest pending CONNECT becomes a connection, once */
static void listener_accept_one(void)
{
	struct clanq_hs_pending p;
	struct srv_rec *s;
	const struct clanq_hs_pending *r;

	if (W.ref_head == W.ref_tail) {
		check_eq(clanq_hs_backlog_take(&W.b, &p), -EAGAIN);
		return;
	}
	check_eq(clanq_hs_backlog_take(&W.b, &p), 0);
	r = &W.ref[W.ref_head++ % ARRAY_SIZE(W.ref)];
	check(same_pending(&p, r->src, &r->c));
	/* exactly once: never a second connection for the same attempt */
	check(srv_find(p.src, p.c.conn, p.c.nonce) == NULL);
	check(W.nsrv < SRV_MAX);
	s = &W.srv[W.nsrv];
	s->src = p.src;
	s->conn = p.c.conn;
	s->nonce = p.c.nonce;
	s->client = client_of(p.src);
	s->a = accept_for(p.c.conn, p.c.nonce);
	s->a.srv_conn = W.nsrv;
	s->a.srv_nonce = wrnd();
	s->a.ring.id = 5000 + W.nsrv;
	s->a.key = wrnd();
	s->established = false;
	W.nsrv++;
	W.taken++;
	net_send(accept_msg(s->a), s->client, K_ACCEPT, s->nonce);
}

/* ---- the clients ---- */

/* A genuine answer to client i's current attempt, with one field wrong. */
static void forge_for(int i)
{
	struct cli *cl = &W.cli[i];
	struct clanq_hs_accept a = accept_for(cl->conn, cl->nonce);
	struct clanq_hs_refuse r = refuse_for(cl->conn, cl->nonce);
	struct clanq_hs_connect c = cl->hs.msg;
	struct clanq_oob_msg m;
	unsigned int f = (unsigned int)(wrnd() % 13);

	switch (f) {
	case 0: a.nonce ^= 1ull << (wrnd() % 64); break;
	case 1: a.conn ^= 1u << (wrnd() % 32); break;
	case 2: a.magic ^= 1u << (wrnd() % 32); break;
	case 3: a.ring.node ^= 1u << (wrnd() % 32); break;
	case 4: a.ring_cap = (uint32_t)(wrnd() % 2 ? 0 : 4032 + 1 + wrnd() % 7); break;
	case 5: r.nonce ^= 1ull << (wrnd() % 64); break;
	case 6: r.conn ^= 1u << (wrnd() % 32); break;
	case 7: r.magic ^= 1u << (wrnd() % 32); break;
	case 8: c.nonce ^= 1ull << (wrnd() % 64); break;
	case 9: c.conn ^= 1u << (wrnd() % 32); break;
	default: break;
	}
	if (f <= 4)
		m = accept_msg(a);
	else if (f <= 7)
		m = refuse_msg(r);
	else
		m = unreachable_msg(DST, CLANQ_HS_CONNECT, &c, sizeof(c));
	switch (f) {
	case 10: m.src.node ^= 1u << (wrnd() % 32); break;	/* from elsewhere */
	case 11: m.len = (uint32_t)(wrnd() % sizeof(m.payload)); break;
	case 12: m.src.id ^= 1u << (wrnd() % 32);		/* another service */
		m = unreachable_msg(m.src, CLANQ_HS_CONNECT, &c, sizeof(c));
		break;
	}
	W.forged++;
	net_put(&(struct net_msg){ m, i, K_FORGED, 0 });
}

static void client_on_msg(const struct net_msg *n)
{
	struct cli *cl = &W.cli[n->to];
	struct clanq_hs_client before;
	enum clanq_hs_action act, want;
	bool ours = cl->active && n->kind != K_FORGED && n->nonce == cl->nonce;

	memcpy(&before, &cl->hs, sizeof(before));
	act = clanq_hs_client_on_msg(&cl->hs, &n->m);
	want = !ours ? CLANQ_HS_IGNORED :
	       n->kind == K_ACCEPT ? CLANQ_HS_ESTABLISHED : CLANQ_HS_FAILED;
	if (act != want)
		fail_msg("%s: client %d (nonce %llx, %s) got kind %d for nonce %llx: %d, want %d",
			 ctx, n->to, (unsigned long long)cl->nonce,
			 cl->active ? "waiting" : "done", n->kind,
			 (unsigned long long)n->nonce, act, want);
	if (act == CLANQ_HS_IGNORED) {
		W.ignored++;
		check(memcmp(&before, &cl->hs, sizeof(before)) == 0);
		return;
	}
	cl->active = false;
	if (act == CLANQ_HS_ESTABLISHED) {
		struct srv_rec *s = srv_find(cl->ep, cl->conn, cl->nonce);

		check(s != NULL);
		check(memcmp(&cl->hs.acc, &s->a, sizeof(s->a)) == 0);
		check_eq(cl->hs.state, CLANQ_HS_DONE);
		check(!s->established);
		s->established = true;
		W.established++;
	} else {
		check_eq(cl->hs.state, CLANQ_HS_ERROR);
		check_eq(cl->hs.err, -ECONNREFUSED);
		cl->failed[cl->nfailed++] = cl->nonce;
		W.refused++;
	}
}

static void client_step(int i, uint64_t timeout)
{
	struct cli *cl = &W.cli[i];
	enum clanq_hs_action act;

	if (!cl->active) {
		if (cl->started < NCONNS && chance(10)) {
			cl->nonce = wrnd();
			cl->started++;
			cl->active = true;
			memset(&cl->hs, 0, sizeof(cl->hs));
			cl->hs.msg.ring = cl->ring;
			cl->hs.msg.key = wrnd();
			cl->hs.msg.ring_cap = 4032;
			check_eq(clanq_hs_client_start(&cl->hs, DST, cl->conn, cl->nonce,
						       W.now, timeout), CLANQ_HS_SEND);
			net_send(connect_msg(cl->ep, cl->hs.msg), -1, K_CONNECT, cl->nonce);
		}
		return;
	}
	act = clanq_hs_client_tick(&cl->hs, W.now);
	if (act == CLANQ_HS_SEND) {
		net_send(connect_msg(cl->ep, cl->hs.msg), -1, K_CONNECT, cl->nonce);
	} else if (act == CLANQ_HS_FAILED) {
		check(W.now >= cl->hs.deadline);
		check_eq(cl->hs.err, -ETIMEDOUT);
		cl->active = false;
		cl->failed[cl->nfailed++] = cl->nonce;
		W.timedout++;
	} else {
		check_eq(act, CLANQ_HS_NOTHING);
	}
}

static void deliver_one(void)
{
	unsigned int k = (unsigned int)(wrnd() % W.nnet);
	struct net_msg n = W.net[k];

	W.net[k] = W.net[--W.nnet];
	W.delivered++;
	if (n.to < 0)
		listener_on_connect(&n);
	else
		client_on_msg(&n);
}

static bool all_done(void)
{
	unsigned int i;

	for (i = 0; i < NCLI; i++)
		if (W.cli[i].active || W.cli[i].started < NCONNS)
			return false;
	return true;
}

static void run_hs_model(uint64_t seed, unsigned int loss, unsigned int dup,
			 unsigned int bcap, uint64_t down, struct world *tot)
{
	uint64_t timeout = 3 * SEC;
	unsigned int i, step, d;

	memset(&W, 0, sizeof(W));
	W.rng = seed * 0x9e3779b97f4a7c15ull | 1;
	W.loss_pct = loss;
	W.dup_pct = dup;
	W.take_pct = 10 + (unsigned int)(wrnd() % 40);
	W.forge_pct = 5;
	W.now = 1000 * SEC;
	W.down_until = W.now + down;
	W.b = (struct clanq_hs_backlog){ W.q, bcap, 0, 0 };
	check(bcap <= ARRAY_SIZE(W.q));
	for (i = 0; i < NCLI; i++) {
		W.cli[i].ep = (struct clanq_addr){ 1 + i % 3, 10 + i };
		W.cli[i].ring = (struct clanq_addr){ 1 + i % 3, 1000 + i };
		W.cli[i].conn = i % 2;	/* slots collide across clients */
	}
	for (step = 0; !all_done() || W.nnet; step++) {
		set_ctx("seed %llu loss %u dup %u backlog %u down %llu ms: step %u",
			(unsigned long long)seed, loss, dup, bcap,
			(unsigned long long)(down / MS), step);
		check(step < 100000);
		W.now += wrnd() % (20 * MS);
		for (i = 0; i < NCLI; i++)
			client_step((int)i, timeout);
		for (d = (unsigned int)(wrnd() % 4); d > 0 && W.nnet; d--)
			deliver_one();
		if (W.now >= W.down_until && chance(W.take_pct))
			listener_accept_one();
		if (chance(W.forge_pct))
			forge_for((int)(wrnd() % NCLI));
	}
	/* every connection the server made is established, or its client gave up */
	set_ctx("seed %llu loss %u dup %u backlog %u: end", (unsigned long long)seed,
		loss, dup, bcap);
	for (i = 0; i < W.nsrv; i++) {
		struct srv_rec *s = &W.srv[i];
		struct cli *cl = &W.cli[s->client];
		bool failed = false;

		for (d = 0; d < cl->nfailed; d++)
			failed |= cl->failed[d] == s->nonce;
		check(s->established != failed);
	}
	/* a network that loses nothing, a listener always there, room: all connect */
	if (!loss && !down && bcap >= NCLI)
		check_eq(W.established, NCLI * NCONNS);
	tot->sent += W.sent;
	tot->lost += W.lost;
	tot->dups += W.dups;
	tot->queued += W.queued;
	tot->dup_verdicts += W.dup_verdicts;
	tot->full += W.full;
	tot->resent += W.resent;
	tot->taken += W.taken;
	tot->established += W.established;
	tot->refused += W.refused;
	tot->unreachable += W.unreachable;
	tot->timedout += W.timedout;
	tot->ignored += W.ignored;
	tot->forged += W.forged;
}

static void test_model_clients_listener_and_a_bad_network(void **state)
{
	static const unsigned int losses[] = { 0, 10, 40 };
	static const unsigned int dups[] = { 0, 25 };
	static const unsigned int bcaps[] = { 1, 2, 8 };
	static const uint64_t downs[] = { 0, 400 * MS };
	static struct world tot;
	unsigned int l, d, b, w, seed = 0;

	(void)state;
	memset(&tot, 0, sizeof(tot));
	for (l = 0; l < ARRAY_SIZE(losses); l++)
		for (d = 0; d < ARRAY_SIZE(dups); d++)
			for (b = 0; b < ARRAY_SIZE(bcaps); b++)
				for (w = 0; w < ARRAY_SIZE(downs); w++)
					for (unsigned int s = 0; s < 8; s++)
						run_hs_model(++seed, losses[l], dups[d],
							     bcaps[b], downs[w], &tot);
	print_message("model: %lu sent, %lu lost, %lu duplicated; listener: %lu queued, "
		      "%lu DUP, %lu FULL, %lu ACCEPTs resent, %lu taken; clients: "
		      "%lu established, %lu refused, %lu timed out; %lu UNREACHABLE, "
		      "%lu forged, %lu ignored\n", tot.sent, tot.lost, tot.dups,
		      tot.queued, tot.dup_verdicts, tot.full, tot.resent, tot.taken,
		      tot.established, tot.refused, tot.timedout, tot.unreachable,
		      tot.forged, tot.ignored);
	/* the runs went through every case */
	set_ctx("totals");
	check(tot.established > 1000);
	check(tot.dup_verdicts > 100);
	check(tot.full > 100);
	check(tot.resent > 100);
	check(tot.refused > 100);
	check(tot.timedout > 0);
	check(tot.unreachable > 100);
	check(tot.forged > 1000);
}

/*
 * Nonces (lib/net.c): every connect and accept takes one from its net's
 * pool, 32 to a getrandom(). 100 of them are all different and none is
 * 0, and they took four fills, not one each.
 */
static void test_nonces_are_new_per_connection(void **state)
{
	struct clanq_net *net = calloc(1, sizeof(*net));
	uint64_t v[100];
	unsigned int i, j;

	(void)state;
	assert_non_null(net);
	for (i = 0; i < ARRAY_SIZE(v); i++) {
		assert_int_equal(clanq_net_nonce(net, &v[i]), 0);
		assert_true(v[i] != 0);
		for (j = 0; j < i; j++)
			assert_true(v[i] != v[j]);
	}
	/* fills at the 1st, 33rd, 65th and 97th: 28 left */
	assert_int_equal(net->nr_nonces, 4 * 32 - ARRAY_SIZE(v));
	free(net);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_start_fills_the_connect),
		cmocka_unit_test(test_client_retransmits_with_doubling_rto_until_the_deadline),
		cmocka_unit_test(test_client_late_tick_sends_once),
		cmocka_unit_test(test_client_short_and_zero_timeouts),
		cmocka_unit_test(test_client_accept_establishes_once),
		cmocka_unit_test(test_client_accept_from_any_endpoint_of_the_node),
		cmocka_unit_test(test_client_ignores_forged_accepts),
		cmocka_unit_test(test_client_ignores_answers_to_an_older_connection),
		cmocka_unit_test(test_client_refused),
		cmocka_unit_test(test_client_unreachable),
		cmocka_unit_test(test_client_ignores_other_types),
		cmocka_unit_test(test_parse_connect),
		cmocka_unit_test(test_backlog_is_fifo),
		cmocka_unit_test(test_backlog_recognises_duplicates),
		cmocka_unit_test(test_backlog_full_refuses_and_keeps_what_it_has),
		cmocka_unit_test(test_backlog_ignores_malformed),
		cmocka_unit_test(test_backlog_wraps_around),
		cmocka_unit_test(test_model_clients_listener_and_a_bad_network),
		cmocka_unit_test(test_nonces_are_new_per_connection),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
