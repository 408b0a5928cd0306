/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq internals: the connection handshake, as pure state machines
 * (no system call, no driver), so that host tests can feed them lost,
 * duplicated, reordered and forged messages. lib/net.c and lib/conn.c
 * drive them with real OOB messages and the clock.
 *
 * The protocol (OOB messages, types below CLANQ_OOB_TYPE_USER):
 *
 *   client net ep                     server: listener ep, net ep
 *   CONNECT(conn, nonce, ring, key, cap, want) --> listener (node, service)
 *        ... retransmitted every rto (doubling) until an answer or timeout
 *                                     accept(): import the client's ring,
 *                                     export its own
 *   <-- ACCEPT(conn, nonce, srv_conn, srv_nonce, ring, key, cap)  (net ep)
 *   <-- REFUSE(conn, nonce, err)      backlog full
 *   <-- CLANQ_OOB_UNREACHABLE         (driver) nobody has that service
 *
 * Each side ends up with an aperture onto the other's ring, which is
 * what the messages carry: a region address, its key and its size. The
 * client's 64-bit random nonce, echoed by every answer, makes an answer
 * to an older connection in the same slot (or a guess) fall on deaf
 * ears; the driver stamps every message's source, so the answer must
 * also come from the node connected to. The server's nonce does the
 * same for its side. A retransmitted CONNECT whose connection was
 * accepted meanwhile gets the same ACCEPT again: the client may have
 * lost it.
 */
#ifndef _CLANQ_LIB_HANDSHAKE_H
#define _CLANQ_LIB_HANDSHAKE_H

#include <clanq.h>

/* Shared between the library's files, not part of its ABI. */
#pragma GCC visibility push(hidden)

#define CLANQ_HS_CONNECT	0x40
#define CLANQ_HS_ACCEPT		0x41
#define CLANQ_HS_REFUSE		0x42
#define CLANQ_HS_MAGIC		0x716e6c01u	/* "lnq", version 1 */

struct clanq_hs_connect {
	uint32_t magic;
	uint32_t conn;		/* the client's connection slot */
	uint64_t nonce;		/* the client's, random */
	struct clanq_addr ring;	/* the client's receive ring */
	uint64_t key;
	uint32_t ring_cap;	/* its record bytes */
	uint32_t want_cap;	/* asked of the server's receive ring */
	uint32_t attempt;	/* 0, then one more per retransmission */
	uint32_t reserved;
};

struct clanq_hs_accept {
	uint32_t magic;
	uint32_t conn;		/* the client's, echoed */
	uint64_t nonce;		/* the client's, echoed */
	uint32_t srv_conn;
	uint32_t ring_cap;	/* the server's receive ring */
	struct clanq_addr ring;
	uint64_t key;
	uint64_t srv_nonce;
};

struct clanq_hs_refuse {
	uint32_t magic;
	uint32_t conn;
	uint64_t nonce;
	int32_t err;		/* -ECONNREFUSED */
	uint32_t reserved;
};

_Static_assert(sizeof(struct clanq_hs_connect) <= CLANQ_OOB_PAYLOAD, "connect");
_Static_assert(sizeof(struct clanq_hs_accept) <= CLANQ_OOB_PAYLOAD, "accept");
_Static_assert(sizeof(struct clanq_hs_refuse) <= CLANQ_OOB_PAYLOAD, "refuse");

/* What the client's state machine wants done. */
enum clanq_hs_action {
	CLANQ_HS_NOTHING,	/* wait on */
	CLANQ_HS_IGNORED,	/* not for us: stale, duplicate or forged */
	CLANQ_HS_SEND,		/* (re)send the CONNECT in hs->msg */
	CLANQ_HS_ESTABLISHED,	/* hs->acc holds the server's answer */
	CLANQ_HS_FAILED,	/* hs->err says why */
};

enum clanq_hs_state {
	CLANQ_HS_SENT = 1,
	CLANQ_HS_DONE,
	CLANQ_HS_ERROR,
};

struct clanq_hs_client {
	enum clanq_hs_state state;
	int err;
	struct clanq_addr dst;		/* (node, service) */
	struct clanq_hs_connect msg;	/* what we send */
	struct clanq_hs_accept acc;	/* what we got */
	struct clanq_addr srv_ep;	/* where the ACCEPT came from */
	uint64_t next_tx, deadline, rto;
};

#define CLANQ_HS_RTO_NS		(20 * 1000 * 1000ull)	/* first retransmission */
#define CLANQ_HS_RTO_MAX_NS	(1000 * 1000 * 1000ull)

/* Start: the caller filled hs->msg's ring fields; returns CLANQ_HS_SEND. */
enum clanq_hs_action clanq_hs_client_start(struct clanq_hs_client *hs,
					   struct clanq_addr dst, uint32_t conn,
					   uint64_t nonce, uint64_t now,
					   uint64_t timeout_ns);
/* Time passes: CLANQ_HS_SEND when a retransmission is due, FAILED at the end. */
enum clanq_hs_action clanq_hs_client_tick(struct clanq_hs_client *hs, uint64_t now);
/* A message arrived on the client's net endpoint for this connection. */
enum clanq_hs_action clanq_hs_client_on_msg(struct clanq_hs_client *hs,
					    const struct clanq_oob_msg *m);
/* The CONNECT could not be sent again (err): FAILED with it. */
enum clanq_hs_action clanq_hs_client_fail(struct clanq_hs_client *hs, int err);
/* When the next tick is due (for a blocking wait). */
uint64_t clanq_hs_client_due(const struct clanq_hs_client *hs);

/* A listener's backlog: CONNECTs not yet accepted, oldest first. */
struct clanq_hs_pending {
	struct clanq_addr src;		/* the client's net endpoint */
	struct clanq_hs_connect c;
};

struct clanq_hs_backlog {
	struct clanq_hs_pending *q;
	uint32_t cap, head, count;
};

enum clanq_hs_verdict {
	CLANQ_HS_QUEUED,	/* a new CONNECT, in the backlog */
	CLANQ_HS_DUP,		/* one already in the backlog */
	CLANQ_HS_FULL,		/* refuse it */
	CLANQ_HS_BAD,		/* not a CONNECT, or nonsense: ignore */
};

/* Is m a well-formed CONNECT? Fills *c. */
int clanq_hs_parse_connect(const struct clanq_oob_msg *m,
			   struct clanq_hs_connect *c);
enum clanq_hs_verdict clanq_hs_backlog_add(struct clanq_hs_backlog *b,
					   const struct clanq_oob_msg *m);
/* Take the oldest pending CONNECT: 0, or -EAGAIN if there is none. */
int clanq_hs_backlog_take(struct clanq_hs_backlog *b, struct clanq_hs_pending *p);

#pragma GCC visibility pop

#endif /* _CLANQ_LIB_HANDSHAKE_H */
