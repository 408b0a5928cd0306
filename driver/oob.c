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
 * Receiving is rx.c's (clanq_rx_oob()), whatever wire carried the message.
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
