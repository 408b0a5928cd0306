// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-band messages (paper section 3.1).
 *
 * Sending is a system call: the message is copied in once, its source
 * address is stamped from the sending endpoint (the application cannot
 * forge it), and the wire carries it to the destination node.
 *
 * Why a system call and not a queued request, as RDMA requests are: OOB
 * messages carry connection management and other rare control traffic.
 * A send queue pays off only while the driver is still busy with earlier
 * requests; for sparse traffic every send would find it idle and ring the
 * doorbell anyway, so the queue would save nothing, while adding a second
 * producer path to validate and a delivery that is no longer in the
 * sender's context (where the error for an unknown node belongs).
 *
 * clanq_oob_deliver() is the receive path every wire ends in: the
 * paper's oob_q_put. The write index is kernel-private; the queue is
 * full when one free slot is left, and then the message is discarded and
 * counted, as the CLAN NIC did. Receiving is entirely at user level.
 */
#include "clanq_drv.h"

/* Mirror a private count into the segment: written, never read back. */
static void clanq_ep_count(u64 *count, __u64 *mirror)
{
	WRITE_ONCE(*mirror, ++*count);
}

int clanq_oob_deliver(struct clanq_nic *nic, u32 dst_id,
		      const struct clanq_oob_msg *msg)
{
	struct clanq_ep *ep = clanq_ep_lookup(nic, dst_id);
	unsigned long flags;
	bool queued = false, dead;

	if (!ep) {
		atomic64_inc(&nic->stats.oob_no_ep);
		return -ENOENT;
	}
	spin_lock_irqsave(&ep->oob_lock, flags);
	dead = ep->dead;
	if (!dead) {
		queued = clanq_q_put(&ep->oob, msg);
		if (queued)
			clanq_ep_count(&ep->oob_delivered, &ep->counters->oob_delivered);
		else
			clanq_ep_count(&ep->oob_dropped, &ep->counters->oob_dropped);
	}
	spin_unlock_irqrestore(&ep->oob_lock, flags);

	if (queued) {
		atomic64_inc(&nic->stats.oob_delivered);
		clanq_ep_raise(ep, CLANQ_EV_OOB);
	} else {
		atomic64_inc(dead ? &nic->stats.oob_no_ep : &nic->stats.oob_dropped);
	}
	clanq_ep_put(ep);
	if (dead)
		return -ENOENT;
	return queued ? 0 : -ENOBUFS;
}
EXPORT_SYMBOL_CLANQ_KUNIT(clanq_oob_deliver);

int clanq_ioctl_oob_send(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_oob_send *s = arg;
	struct clanq_oob_msg msg;
	struct clanq_ep *ep;
	unsigned long flags;
	int err;

	if (s->flags || !clanq_zero(s->reserved, sizeof(s->reserved))) {
		clanq_uerr(ctx, "OOB_SEND: flags and reserved fields must be zero");
		return -EINVAL;
	}
	if (s->len > CLANQ_OOB_PAYLOAD) {
		clanq_uerr(ctx, "OOB_SEND: len %u > %u", s->len, CLANQ_OOB_PAYLOAD);
		return -EMSGSIZE;
	}
	ep = clanq_ep_lookup_owned(ctx, s->ep);
	if (!ep) {
		clanq_uerr(ctx, "OOB_SEND: no endpoint %u in this context", s->ep);
		return -ENOENT;
	}

	memset(&msg, 0, sizeof(msg));
	msg.type = s->type;
	msg.len = s->len;
	msg.src.node = ctx->nic->node;
	msg.src.id = ep->id;
	memcpy(msg.payload, s->payload, s->len);

	err = clanq_wire_send_oob(ctx->nic, &s->dst, &msg);
	if (!err) {
		spin_lock_irqsave(&ep->oob_lock, flags);
		clanq_ep_count(&ep->oob_sent, &ep->counters->oob_sent);
		spin_unlock_irqrestore(&ep->oob_lock, flags);
		atomic64_inc(&ctx->nic->stats.oob_sent);
	}
	clanq_ep_put(ep);
	return err;
}
