/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq internals shared by net.c, conn.c and msg.c: the connection
 * table, resets, and the per-connection steps the net's loop runs.
 */
#ifndef _CLANQ_LIB_NET_INTERNAL_H
#define _CLANQ_LIB_NET_INTERNAL_H

#include <clanq.h>

/* Shared between the library's files, not part of its ABI. */
#pragma GCC visibility push(hidden)

/* The cookie of a revocation notice: slot and generation. */
static inline __u64 clanq_conn_cookie(const struct clanq_net *net, __u32 slot)
{
	return (__u64)net->gen[slot] << 32 | slot;
}

int clanq_net_slot_get(struct clanq_net *net, struct clanq_conn *c);
void clanq_net_slot_put(struct clanq_net *net, struct clanq_conn *c);
struct clanq_conn *clanq_net_conn(struct clanq_net *net, __u32 slot);
void clanq_net_hot(struct clanq_net *net, struct clanq_conn *c);
void clanq_net_unhot(struct clanq_net *net, struct clanq_conn *c);
int clanq_net_random(__u64 *v);
/* Take one event of net->evq and act on it (or stash the application's). */
void clanq_net_handle(struct clanq_net *net, const struct clanq_event *ev);
/* Wait for anything on the net until deadline (absolute, ~0: none). */
int clanq_net_block(struct clanq_net *net, __u64 deadline);
void clanq_listener_intake(struct clanq_listener *l);

/* conn.c */
void clanq_conn_reset(struct clanq_conn *c, int err);
void clanq_conn_on_revoked(struct clanq_conn *c);
void clanq_conn_hs_msg(struct clanq_conn *c, const struct clanq_oob_msg *m);
void clanq_conn_probe(struct clanq_conn *c);
/* an accepted connection this CONNECT belongs to: send its ACCEPT again */
bool clanq_conn_resend_accept(struct clanq_net *net, const struct clanq_addr src,
			      __u32 conn, __u64 nonce);

/* msg.c */
/* A record (or the FIN) is in our ring, unread (no system call). */
bool clanq_conn_has_data(struct clanq_conn *c);
/* Hand back the credit we owe, if any: before we block. */
int clanq_conn_return_credit(struct clanq_conn *c);
/* Answer the peer's hdr.want, if it moved. */
void clanq_conn_answer_want(struct clanq_conn *c);
int clanq_conn_write_fin(struct clanq_conn *c);
/* RDMA completions: errors reset their connections. */
void clanq_net_drain_rdma(struct clanq_net *net);

#pragma GCC visibility pop

#endif /* _CLANQ_LIB_NET_INTERNAL_H */
