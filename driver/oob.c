// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-band messages (paper section 3.1).
 *
 * Sending is a system call: the message is copied in once, its source
 * address is stamped from the sending endpoint (the application cannot
 * forge it), and the wire that reaches the destination node carries it.
 *
 * Why a system call and not a queued request, as RDMA requests are: OOB
 * messages carry connection management and other rare control traffic.
 * A send queue pays off only while the driver is still busy with earlier
 * requests; for sparse traffic every send would find it idle and ring the
 * doorbell anyway, so the queue would save nothing, while adding a second
 * producer path to validate and a delivery that is no longer in the
 * sender's context (where the error for an unknown node belongs).
 *
 * clanq_rx_oob() is the receive path every wire ends in: the paper's
 * oob_q_put. The write index is kernel-private; the queue is full when
 * one free slot is left, and then the message is discarded and counted,
 * as the CLAN NIC did. Receiving is entirely at user level.
 */
#include "clanq_drv.h"

void clanq_oob_init(struct clanq_kep *ep)
{
	spin_lock_init(&ep->oob.lock);
}

/* The endpoint is going: deliveries in flight queue nothing more. */
void clanq_oob_kill(struct clanq_kep *ep)
{
	unsigned long flags;

	spin_lock_irqsave(&ep->oob.lock, flags);
	ep->oob.dead = true;
	spin_unlock_irqrestore(&ep->oob.lock, flags);
}

/* Unread messages? For evq registrations (CLANQ_EV_OOB). */
bool clanq_oob_pending(struct clanq_kep *ep)
{
	unsigned long flags;
	bool unread;

	/* nests inside ep->wq.lock: deliveries never hold both */
	spin_lock_irqsave(&ep->oob.lock, flags);
	/* the consumer's index is the application's: read once, check */
	unread = clanq_q_prod_unread(&ep->oob.q);
	spin_unlock_irqrestore(&ep->oob.lock, flags);
	return unread;
}

static int clanq_oob_put(struct clanq_nic *nic, struct clanq_kep *ep,
			 const struct clanq_oob_msg *msg);

/**
 * clanq_rx_oob() - the receive path of an OOB message
 * @nic: the destination NIC
 * @dst_id: the destination endpoint there
 * @msg: the message, its source stamped by the sender's driver
 *
 * Return: 0 if queued; -ENOENT for no such endpoint, -ENOBUFS for a full
 * queue: both counted here, neither the sender's business (the wire
 * reports only what a NIC could know).
 */
int clanq_rx_oob(struct clanq_nic *nic, u32 dst_id,
		 const struct clanq_oob_msg *msg)
{
	struct clanq_kep *ep = clanq_kep_lookup(nic, dst_id);

	if (!ep) {
		atomic64_inc(&nic->stats.oob_no_ep);
		return -ENOENT;
	}
	return clanq_oob_put(nic, ep, msg);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_rx_oob);

/* Queue @msg on @ep, drop the caller's reference: as clanq_rx_oob(). */
static int clanq_oob_put(struct clanq_nic *nic, struct clanq_kep *ep,
			 const struct clanq_oob_msg *msg)
{
	struct clanq_kep_oob *oob = &ep->oob;
	unsigned long flags;
	bool queued = false, dead;

	spin_lock_irqsave(&oob->lock, flags);
	dead = oob->dead;
	if (!dead) {
		queued = clanq_q_put(&oob->q, msg);
		if (queued)
			clanq_count(&oob->delivered, &ep->counters->oob_delivered, 1);
		else
			clanq_count(&oob->dropped, &ep->counters->oob_dropped, 1);
	}
	spin_unlock_irqrestore(&oob->lock, flags);

	if (queued) {
		atomic64_inc(&nic->stats.oob_delivered);
		clanq_kep_raise(ep, CLANQ_EV_OOB);
	} else {
		atomic64_inc(dead ? &nic->stats.oob_no_ep : &nic->stats.oob_dropped);
	}
	clanq_kep_put(ep);
	if (dead)
		return -ENOENT;
	return queued ? 0 : -ENOBUFS;
}

/**
 * clanq_oob_unreachable() - tell a sender its message found nobody
 * @nic: the sender's NIC
 * @dst: where the message went
 * @msg: the message, its source stamped
 *
 * A wire calls it when the destination node had no endpoint @dst->id:
 * a CLANQ_OOB_UNREACHABLE notice goes back to the sending endpoint (the
 * network's "port unreachable"). A notice is never answered by another.
 */
void clanq_oob_unreachable(struct clanq_nic *nic, const struct clanq_addr *dst,
			   const struct clanq_oob_msg *msg)
{
	struct clanq_oob_unreachable *u;
	struct clanq_oob_msg n = {
		.type = CLANQ_OOB_UNREACHABLE,
		.len = sizeof(*u),
		.src = *dst,
	};

	static_assert(sizeof(*u) <= CLANQ_OOB_PAYLOAD);
	if (msg->type & CLANQ_OOB_NOTICE)
		return;
	u = (struct clanq_oob_unreachable *)n.payload;
	u->type = msg->type;
	u->len = msg->len;
	memcpy(u->head, msg->payload, sizeof(u->head));
	atomic64_inc(&nic->stats.oob_unreachable);
	clanq_rx_oob(nic, msg->src.id, &n);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_oob_unreachable);

/*
 * The region behind @ap was revoked: a CLANQ_OOB_REVOKED notice to the
 * endpoint named at import, if it is still of @ap's context. Called
 * with the region's ap_lock held: @ap is not closed, its context alive.
 */
void clanq_oob_notify_revoked(struct clanq_kap *ap)
{
	struct clanq_kep *ep = clanq_kep_lookup_owned(ap->ctx, ap->notify_ep);
	struct clanq_oob_revoked *rv;
	struct clanq_oob_msg n = {
		.type = CLANQ_OOB_REVOKED,
		.len = sizeof(*rv),
		.src = { clanq_kregion_node(ap->region), ap->region->id },
	};

	static_assert(sizeof(*rv) <= CLANQ_OOB_PAYLOAD);
	if (!ep)
		return;
	rv = (struct clanq_oob_revoked *)n.payload;
	rv->ap = ap->id;
	rv->cookie = ap->notify_cookie;
	clanq_oob_put(ap->ctx->nic, ep, &n);
}

int clanq_ioctl_oob_send(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_oob_send *s = arg;
	const struct clanq_wire_ops *wire;
	struct clanq_oob_msg msg;
	struct clanq_kep *ep;
	unsigned long flags;
	int err;

	if (s->len > CLANQ_OOB_PAYLOAD) {
		clanq_uerr(ctx, "OOB_SEND: len %u > %u", s->len, CLANQ_OOB_PAYLOAD);
		return -EMSGSIZE;
	}
	if (s->type & CLANQ_OOB_NOTICE) {
		clanq_uerr(ctx, "OOB_SEND: type %#x: notice types are the driver's",
			   s->type);
		return -EINVAL;
	}
	ep = clanq_kep_lookup_owned(ctx, s->ep);
	if (!ep) {
		clanq_uerr(ctx, "OOB_SEND: no endpoint %u in this context", s->ep);
		return -ENOENT;
	}
	wire = clanq_wire_route(ctx->nic, s->dst.node);
	if (!wire) {
		clanq_kep_put(ep);
		return -EHOSTUNREACH;
	}

	memset(&msg, 0, sizeof(msg));
	msg.type = s->type;
	msg.len = s->len;
	msg.src.node = ctx->nic->node;
	msg.src.id = ep->id;
	memcpy(msg.payload, s->payload, s->len);

	err = wire->send_oob(ctx->nic, &s->dst, &msg);
	clanq_wire_put(wire);
	if (!err) {
		spin_lock_irqsave(&ep->oob.lock, flags);
		clanq_count(&ep->oob.sent, &ep->counters->oob_sent, 1);
		spin_unlock_irqrestore(&ep->oob.lock, flags);
		atomic64_inc(&ctx->nic->stats.oob_sent);
	}
	clanq_kep_put(ep);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_oob_send);
