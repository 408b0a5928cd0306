// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: rendezvous, a large message moved with one copy.
 *
 * Through the ring a message is copied twice: into the peer's ring and
 * out of it (cfi_ep.c). From fab->rndv_min bytes (FI_CLANQ_RNDV_SIZE)
 * the sender instead registers its buffer (pinned, RLIMIT_MEMLOCK) and
 * exports it for this message alone, with a 64-bit key and the READ
 * right only, and sends the header with CFI_HF_RNDV and a struct
 * cfi_rts naming it. The receiver imports it, the RDMA engine READs it
 * into the receive buffer (registered for the READ) and the receiver
 * answers CFI_H_DONE with the key; the sender then takes its
 * registration down and completes the send. Between processes of one
 * host the engine's READ is the one copy, page to page; between hosts
 * it is the wire's READ (rdma_rw).
 *
 * - Order. Messages are taken in order: the receive being read stays
 *   at the head of the receive queue until its last READ completed, and
 *   what comes after it waits in the ring. Sends after a rendezvous go
 *   out at once, but complete after it (ep->aq): FI_ORDER_STRICT.
 * - A receive buffer that cannot be registered (several iovs, the
 *   memlock limit) is read through the endpoint's bounce region,
 *   CFI_RNDV_CHUNK bytes a READ, each copied out: two copies, as
 *   through the ring, never a failure.
 * - A sender that cannot register sends the message in pieces instead.
 * - The peer is not trusted. The receiver imports only from the peer's
 *   own node, only what the receive will hold, with READ rights: a
 *   forged cfi_rts can name nothing but a region some process exported
 *   with that key, and the import checks the key, the rights and the
 *   range. A DONE that matches no rendezvous in flight breaks the
 *   protocol: the connection is reset (-EPROTO). A receiver that never
 *   answers holds the sender's pages only while the connection lives.
 * - A send completes once the peer has read it: that needs the peer to
 *   take what was sent before it, as any message does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfi.h"

/* ---- the sender ------------------------------------------------------------ */

/* A send's registration, if it has one, goes (its peer's READs fail). */
void cfi_rndv_unreg(struct cfi_op *op)
{
	if (!op->reg)
		return;
	if (op->reg->mem)
		clanq_region_free(op->reg);
	free(op->reg);
	op->reg = NULL;
}

/*
 * Send op as a rendezvous: 1 once its header went (op waits for the
 * DONE), 0 if it is not one (the caller sends it in pieces), -EAGAIN
 * (no room: the registration is kept for the next try) or why not.
 */
int cfi_rndv_send(struct cfi_ep *ep, struct cfi_op *op)
{
	struct cfi_fabric *fab = ep->fab;
	struct cfi_rts rts = { 0 };
	struct iovec v[2];
	int ret;

	if (op->rndv_off || op->done || op->iovcnt != 2)
		goto off;
	if (!op->reg) {
		op->reg = calloc(1, sizeof(*op->reg));
		if (!op->reg)
			goto off;
		ret = clanq_region_register(&fab->dev, op->reg, op->iov[1].iov_base,
					    op->iov[1].iov_len);
		if (!ret)
			ret = clanq_region_export(op->reg, CLANQ_RIGHT_READ, &op->key);
		if (ret) {
			CFI_INFO(FI_LOG_EP_DATA,
				 "rendezvous of %zu bytes: %s; sending it in pieces\n",
				 op->len, clanq_strerror_last(&fab->dev));
			goto off;
		}
	}
	op->hdr.flags |= CFI_HF_RNDV;
	op->hdr.len = (uint32_t)op->len;	/* <= CFI_MSG_MAX */
	rts.region = op->reg->addr.id;
	rts.key = op->key;
	v[0].iov_base = &op->hdr;
	v[0].iov_len = sizeof(op->hdr);
	v[1].iov_base = &rts;
	v[1].iov_len = sizeof(rts);
	ret = clanq_sendv(ep->conn, v, 2, CLANQ_MSG_DONTWAIT);
	return ret ? ret : 1;
off:
	cfi_rndv_unreg(op);
	op->rndv_off = true;
	op->hdr.flags &= (uint8_t)~CFI_HF_RNDV;
	return 0;
}

/*
 * A DONE came: the rendezvous at the head of ep->aq was read (h->len 0)
 * or failed at the receiver (its FI_E*). 0, or -EPROTO for one that
 * names no rendezvous of ours.
 */
int cfi_rndv_done(struct cfi_ep *ep, const struct cfi_hdr *h)
{
	struct cfi_op *op = ep->aq.head;

	if (!op || !op->reg || op->key != h->data || h->len > FI_ERRNO_MAX) {
		CFI_WARN(FI_LOG_EP_DATA, "a rendezvous answer for none of ours: reset\n");
		return -EPROTO;
	}
	cfi_rndv_unreg(op);
	op->err = (int)h->len;
	cfi_tx_done(ep);
	return 0;
}

/* ---- the receiver ---------------------------------------------------------- */

/*
 * A failed import or READ, as the receive's error: the sender's memory
 * gone (-ENOENT at the import, -ENXIO at the READ) means the sender died
 * or closed, or named memory it never had: the receive is cancelled
 * (FI_ECANCELED), as those behind it are when the connection ends.
 */
static int cfi_rndv_errno(int err)
{
	return err == -ENOENT || err == -ENXIO ? FI_ECANCELED : -cfi_errno(err);
}

/* the next READ: into the registered buffer, or a chunk into the bounce */
static int cfi_rndv_post(struct cfi_ep *ep)
{
	struct cfi_rndv_rx *x = &ep->rndv;
	struct cfi_fabric *fab = ep->fab;
	const struct clanq_region *dst = x->dst.mem ? &x->dst : &ep->bounce;
	uint64_t dst_off = x->dst.mem ? x->done : 0;
	size_t left = x->want - x->done;
	struct cfi_rma *r;
	int ret;

	x->chunk = x->dst.mem || left < CFI_RNDV_CHUNK ? left : CFI_RNDV_CHUNK;
	r = cfi_rma_take(fab);
	if (!r)
		return -EAGAIN;		/* the engine is full: at the next look */
	r->ep = ep;
	r->rndv = true;
	ret = clanq_rdma_read(&fab->rdma, &x->ap, x->done, dst, dst_off, x->chunk,
			      (uint64_t)(r - fab->rma), CLANQ_RDMA_SIGNAL | CLANQ_RDMA_LAST);
	if (ret) {
		cfi_rma_release(fab, r);
		return ret;
	}
	x->slot = r;
	return 0;
}

/*
 * A rendezvous's header and cfi_rts came into op, the head of the
 * receive queue: start reading. It stays op's until cfi_rndv_step()
 * says it ended. 0, or -EPROTO for a header that makes no sense.
 */
int cfi_rndv_recv(struct cfi_ep *ep, struct cfi_op *op, const struct cfi_rts *rts)
{
	struct cfi_rndv_rx *x = &ep->rndv;
	struct cfi_fabric *fab = ep->fab;
	struct clanq_addr region;
	int ret;

	if (!rts->region || rts->zero || !op->hdr.len || op->hdr.len > CFI_MSG_MAX)
		return -EPROTO;
	memset(x, 0, sizeof(*x));
	x->op = op;
	x->key = rts->key;
	op->whole = op->hdr.len;
	x->want = op->whole < op->len ? op->whole : op->len;
	if (!x->want)
		return 0;		/* nothing fits: done, truncated */
	ret = cfi_rdma_open(fab);
	if (!ret) {
		region.node = ep->peer.node;
		region.id = rts->region;
		ret = clanq_ap_import(&fab->dev, &x->ap, region, rts->key, 0, x->want,
				      CLANQ_RIGHT_READ);
		if (ret)
			CFI_WARN(FI_LOG_EP_DATA, "rendezvous of %zu bytes: %s\n",
				 op->whole, clanq_strerror_last(&fab->dev));
	}
	if (ret) {
		x->err = cfi_rndv_errno(ret);
		return 0;
	}
	x->imported = true;
	/*
	 * One READ into the receive buffer itself if it can be registered
	 * (x->dst.mem set), else READs through the bounce region
	 */
	if ((op->iovcnt != 2 ||
	     clanq_region_register(&fab->dev, &x->dst, op->iov[1].iov_base, x->want)) &&
	    !ep->bounce.mem && clanq_region_alloc(&fab->dev, &ep->bounce, CFI_RNDV_CHUNK))
		x->err = FI_ENOMEM;
	if (!x->err) {
		ret = cfi_rndv_post(ep);
		if (ret && ret != -EAGAIN)
			x->err = -cfi_errno(ret);
	}
	return 0;
}

/*
 * The rendezvous ended (read, failed or cancelled): the receive
 * completes, then the sender is answered (a failed answer resets the
 * connection, which flushes what is queued behind: this one first).
 */
static void cfi_rndv_finish(struct cfi_ep *ep)
{
	struct cfi_rndv_rx *x = &ep->rndv;
	struct cfi_op *op = x->op;
	struct cfi_hdr h = {
		.magic = CFI_HDR_MAGIC, .type = CFI_H_DONE,
		.len = (uint32_t)x->err, .data = x->key,
	};
	int err = x->cancelled ? FI_ECANCELED : x->err;
	size_t len = err ? 0 : x->want;
	bool answer = !x->cancelled;

	if (x->imported)
		clanq_ap_close(&x->ap);
	if (x->dst.mem)
		clanq_region_free(&x->dst);
	memset(x, 0, sizeof(*x));
	cfi_opq_pop(&ep->rq);	/* op: the head, all along */
	if (op->hdr.flags & CFI_HF_DATA) {
		op->flags |= FI_REMOTE_CQ_DATA;
		op->data = op->hdr.data;
	}
	if (!err && op->whole > op->len)
		cfi_complete(ep, true, op, len, FI_ETRUNC, op->whole - op->len);
	else
		cfi_complete(ep, true, op, len, err, 0);
	cfi_op_put(ep, op);
	if (answer && ep->conn && ep->state == CFI_EP_CONNECTED && cfi_send_ctl(ep, &h))
		CFI_WARN(FI_LOG_EP_DATA, "a rendezvous answer lost\n");
}

/*
 * At the receive queue's look: true if the rendezvous at its head ended
 * now (the next message may be taken), false while it is being read.
 */
bool cfi_rndv_step(struct cfi_ep *ep)
{
	struct cfi_rndv_rx *x = &ep->rndv;
	int ret;

	if (x->slot)
		return false;
	if (!x->err && x->done < x->want) {
		/* the engine was full at the last try */
		ret = cfi_rndv_post(ep);
		if (!ret || ret == -EAGAIN)
			return false;
		x->err = -cfi_errno(ret);
	}
	cfi_rndv_finish(ep);
	if (ep->state == CFI_EP_SHUTDOWN)
		cfi_flush(ep);		/* what waited behind it */
	return true;
}

/* The engine completed a READ of ep's rendezvous: the next, or the end. */
void cfi_rndv_read_done(struct cfi_ep *ep, int status)
{
	struct cfi_rndv_rx *x = &ep->rndv;
	struct cfi_op *op = x->op;

	x->slot = NULL;
	if (status) {
		CFI_WARN(FI_LOG_EP_DATA, "rendezvous READ: %s\n", strerror(-status));
		x->err = x->err ? x->err : cfi_rndv_errno(status);
	} else if (!x->dst.mem) {
		/* from the bounce into the receive's place */
		cfi_iov_put(op, x->done, ep->bounce.mem, x->chunk);
	}
	if (!x->err)
		x->done += x->chunk;
	cfi_rndv_step(ep);
}

/*
 * The endpoint is shut down: the rendezvous being read ends with
 * FI_ECANCELED once the engine let go of the receive buffer; one not
 * being read ends now. True while the engine still has it (the
 * receive queue waits behind it).
 */
bool cfi_rndv_flush(struct cfi_ep *ep)
{
	if (!ep->rndv.op)
		return false;
	ep->rndv.cancelled = true;
	if (ep->rndv.slot)
		return true;
	cfi_rndv_finish(ep);
	return false;
}

/*
 * The endpoint closes: the sender's registration is revoked (a READ of
 * it fails from its next chunk), and the receive buffer is not let go
 * before the engine is done with it: the application may free it once
 * fi_close() returned. No completion: the endpoint is gone. Called with
 * the fabric's lock held and the endpoint off the fabric's list, so the
 * lock is let go while it naps: nobody else can reach the endpoint, and
 * the slot's completion, taken by whoever reads next, goes to nobody.
 */
void cfi_rndv_close(struct cfi_ep *ep)
{
	struct cfi_rndv_rx *x = &ep->rndv;
	struct cfi_fabric *fab = ep->fab;
	struct cfi_rma *r = x->slot;
	int ms;

	if (x->imported)
		clanq_ap_close(&x->ap);
	if (r) {
		r->ep = NULL;
		/* ours while busy, a rendezvous READ's, and nobody's */
		for (ms = 0; r->busy && r->rndv && !r->ep && ms < 5000; ms++) {
			cfi_rma_progress(fab);
			if (!r->busy)
				break;
			cfi_unlock(fab);
			usleep(1000);
			cfi_lock(fab);
		}
		if (r->busy && r->rndv && !r->ep)
			CFI_WARN(FI_LOG_EP_DATA, "a rendezvous READ outlived its endpoint\n");
	}
	if (x->dst.mem)
		clanq_region_free(&x->dst);
	if (ep->bounce.mem)
		clanq_region_free(&ep->bounce);
	memset(x, 0, sizeof(*x));
}
