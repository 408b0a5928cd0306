// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: the connection handshake's state machines (handshake.h).
 * Pure functions of the messages and the clock, for host tests.
 */
#include <errno.h>
#include <string.h>

#include "handshake.h"
#include "ring.h"

enum clanq_hs_action clanq_hs_client_start(struct clanq_hs_client *hs,
					   struct clanq_addr dst, uint32_t conn,
					   uint64_t nonce, uint64_t now,
					   uint64_t timeout_ns)
{
	hs->state = CLANQ_HS_SENT;
	hs->err = 0;
	hs->dst = dst;
	hs->msg.magic = CLANQ_HS_MAGIC;
	hs->msg.conn = conn;
	hs->msg.nonce = nonce;
	hs->msg.attempt = 0;
	hs->msg.reserved = 0;
	memset(&hs->acc, 0, sizeof(hs->acc));
	hs->rto = CLANQ_HS_RTO_NS;
	hs->next_tx = now + hs->rto;
	hs->deadline = timeout_ns > ~0ull - now ? ~0ull : now + timeout_ns;
	return CLANQ_HS_SEND;
}

static enum clanq_hs_action clanq_hs_fail(struct clanq_hs_client *hs, int err)
{
	hs->state = CLANQ_HS_ERROR;
	hs->err = err;
	return CLANQ_HS_FAILED;
}

enum clanq_hs_action clanq_hs_client_fail(struct clanq_hs_client *hs, int err)
{
	if (hs->state != CLANQ_HS_SENT)
		return CLANQ_HS_NOTHING;
	return clanq_hs_fail(hs, err);
}

enum clanq_hs_action clanq_hs_client_tick(struct clanq_hs_client *hs, uint64_t now)
{
	if (hs->state != CLANQ_HS_SENT)
		return CLANQ_HS_NOTHING;
	if (now >= hs->deadline)
		return clanq_hs_fail(hs, -ETIMEDOUT);
	if (now < hs->next_tx)
		return CLANQ_HS_NOTHING;
	hs->msg.attempt++;
	hs->rto = hs->rto * 2 > CLANQ_HS_RTO_MAX_NS ? CLANQ_HS_RTO_MAX_NS :
						       hs->rto * 2;
	hs->next_tx = now + hs->rto;
	return CLANQ_HS_SEND;
}

uint64_t clanq_hs_client_due(const struct clanq_hs_client *hs)
{
	return hs->next_tx < hs->deadline ? hs->next_tx : hs->deadline;
}

/* Does this answer (conn, nonce, magic) belong to our attempt? */
static int clanq_hs_ours(const struct clanq_hs_client *hs,
			 const struct clanq_oob_msg *m, uint32_t magic,
			 uint32_t conn, uint64_t nonce, size_t size)
{
	return m->len == size && magic == CLANQ_HS_MAGIC &&
	       conn == hs->msg.conn && nonce == hs->msg.nonce &&
	       m->src.node == hs->dst.node;
}

enum clanq_hs_action clanq_hs_client_on_msg(struct clanq_hs_client *hs,
					    const struct clanq_oob_msg *m)
{
	struct clanq_hs_accept a;
	struct clanq_hs_refuse r;
	struct clanq_oob_unreachable u;
	struct clanq_hs_connect c;

	switch (m->type) {
	case CLANQ_HS_ACCEPT:
		memcpy(&a, m->payload, sizeof(a));
		if (!clanq_hs_ours(hs, m, a.magic, a.conn, a.nonce, sizeof(a)))
			return CLANQ_HS_IGNORED;
		/* a second ACCEPT (we retransmitted): the first one counts */
		if (hs->state != CLANQ_HS_SENT)
			return CLANQ_HS_IGNORED;
		if (!clanq_ring_cap_ok(a.ring_cap) || !a.ring.id ||
		    a.ring.node != m->src.node)
			return CLANQ_HS_IGNORED;
		hs->acc = a;
		hs->srv_ep = m->src;
		hs->state = CLANQ_HS_DONE;
		return CLANQ_HS_ESTABLISHED;
	case CLANQ_HS_REFUSE:
		memcpy(&r, m->payload, sizeof(r));
		if (!clanq_hs_ours(hs, m, r.magic, r.conn, r.nonce, sizeof(r)) ||
		    hs->state != CLANQ_HS_SENT)
			return CLANQ_HS_IGNORED;
		return clanq_hs_fail(hs, -ECONNREFUSED);
	case CLANQ_OOB_UNREACHABLE:
		/* the driver's: our CONNECT found no endpoint at the service */
		memcpy(&u, m->payload, sizeof(u));
		memcpy(&c, u.head, sizeof(c) < sizeof(u.head) ? sizeof(c) :
		       sizeof(u.head));
		if (m->len != sizeof(u) || u.type != CLANQ_HS_CONNECT ||
		    m->src.node != hs->dst.node || m->src.id != hs->dst.id ||
		    c.conn != hs->msg.conn || c.nonce != hs->msg.nonce ||
		    hs->state != CLANQ_HS_SENT)
			return CLANQ_HS_IGNORED;
		return clanq_hs_fail(hs, -ECONNREFUSED);
	default:
		return CLANQ_HS_IGNORED;
	}
}

int clanq_hs_parse_connect(const struct clanq_oob_msg *m,
			   struct clanq_hs_connect *c)
{
	if (m->type != CLANQ_HS_CONNECT || m->len != sizeof(*c))
		return -EINVAL;
	memcpy(c, m->payload, sizeof(*c));
	/* the ring must be on the node the message came from */
	if (c->magic != CLANQ_HS_MAGIC || c->reserved ||
	    c->ring.node != m->src.node || !c->ring.id ||
	    !clanq_ring_cap_ok(c->ring_cap) ||
	    (c->want_cap && !clanq_ring_cap_ok(c->want_cap)))
		return -EINVAL;
	return 0;
}

static int clanq_hs_same(const struct clanq_hs_pending *p,
			 const struct clanq_addr src,
			 const struct clanq_hs_connect *c)
{
	return p->src.node == src.node && p->src.id == src.id &&
	       p->c.conn == c->conn && p->c.nonce == c->nonce;
}

enum clanq_hs_verdict clanq_hs_backlog_add(struct clanq_hs_backlog *b,
					   const struct clanq_oob_msg *m)
{
	struct clanq_hs_connect c;
	uint32_t i;

	if (clanq_hs_parse_connect(m, &c))
		return CLANQ_HS_BAD;
	for (i = 0; i < b->count; i++)
		if (clanq_hs_same(&b->q[(b->head + i) % b->cap], m->src, &c))
			return CLANQ_HS_DUP;
	if (b->count == b->cap)
		return CLANQ_HS_FULL;
	b->q[(b->head + b->count) % b->cap].src = m->src;
	b->q[(b->head + b->count) % b->cap].c = c;
	b->count++;
	return CLANQ_HS_QUEUED;
}

int clanq_hs_backlog_take(struct clanq_hs_backlog *b, struct clanq_hs_pending *p)
{
	if (!b->count)
		return -EAGAIN;
	*p = b->q[b->head];
	b->head = (b->head + 1) % b->cap;
	b->count--;
	return 0;
}
