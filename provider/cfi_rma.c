// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: RMA (fi_write, fi_read, fi_writedata and their
 * variants) on clanq's RDMA engine.
 *
 * - One engine endpoint per fabric, opened at the first request and
 *   registered on the net's event queue, so that a completion wakes the
 *   blocking reads and makes the FI_WAIT_FD fd readable like a message.
 *   Every request asks for a completion (CLANQ_RDMA_SIGNAL); its cookie
 *   is its slot in the fabric's table, never a pointer, and a cookie
 *   that names no request in flight is ignored with a warning.
 * - The remote side: the peer's key names its region (cfi_mr.c), the
 *   connection names its node. An endpoint keeps up to CFI_RAP_MAX
 *   apertures, one per key and rights; a request outside a kept window
 *   imports the union of the two (both lie in the region, so it does
 *   too), and the least recently used idle aperture makes room.
 * - The local side: the registration in desc, or, without one, the
 *   buffer registered for this request alone (an injected write: a copy
 *   of it), freed at its completion.
 * - fi_writedata(): once the write completed, a zero-length message of
 *   the connection carries the data (CFI_HF_RMA); it takes the peer's
 *   next posted receive, as libfabric's FI_RX_CQ_DATA describes. The
 *   connection's order puts it after everything sent before it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cfi.h"

#define CFI_RMA_FLAGS	(FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA | \
			 FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | \
			 FI_DELIVERY_COMPLETE | FI_FENCE)

/* ---- the fabric's engine endpoint ---------------------------------------- */

int cfi_rdma_open(struct cfi_fabric *fab)
{
	struct clanq_ep_attr attr = {
		.rq_slots = 2 * CFI_RMA_MAX, .cq_slots = 2 * CFI_RMA_MAX,
	};
	unsigned int i;
	int ret;

	if (fab->rdma_open)
		return 0;
	fab->rma = calloc(CFI_RMA_MAX, sizeof(*fab->rma));
	if (!fab->rma)
		return -FI_ENOMEM;
	ret = clanq_ep_create_attr(&fab->dev, &fab->rdma, &attr);
	if (!ret) {
		ret = clanq_evq_register(clanq_net_evq(fab->net), &fab->rdma,
					 CLANQ_EV_RDMA, 0);
		if (ret < 0)
			clanq_ep_destroy(&fab->rdma);
	}
	if (ret < 0) {
		CFI_WARN(FI_LOG_EP_DATA, "the RDMA engine's endpoint: %s\n",
			 clanq_strerror_last(&fab->dev));
		free(fab->rma);
		fab->rma = NULL;
		return cfi_errno(ret);
	}
	for (i = CFI_RMA_MAX; i--;) {
		fab->rma[i].next_free = fab->rma_free;
		fab->rma_free = &fab->rma[i];
	}
	fab->rdma_open = true;
	return 0;
}

/* A free request slot, taken (busy), or NULL: all are in the engine. */
struct cfi_rma *cfi_rma_take(struct cfi_fabric *fab)
{
	struct cfi_rma *r = fab->rma_free;

	if (r) {
		fab->rma_free = r->next_free;
		r->busy = true;
	}
	return r;
}

void cfi_rma_release(struct cfi_fabric *fab, struct cfi_rma *r)
{
	if (r->tmp.mem)
		clanq_region_free(&r->tmp);
	free(r->copy);
	memset(r, 0, sizeof(*r));
	r->next_free = fab->rma_free;
	fab->rma_free = r;
}

void cfi_rma_progress(struct cfi_fabric *fab)
{
	struct clanq_rdma_comp c;
	struct cfi_rma *r;
	struct cfi_ep *ep;

	if (!fab->rdma_open)
		return;
	while (!clanq_rdma_poll(&fab->rdma, &c)) {
		if (c.cookie >= CFI_RMA_MAX || !fab->rma[c.cookie].busy) {
			CFI_WARN(FI_LOG_EP_DATA, "completion %llu names no request\n",
				 (unsigned long long)c.cookie);
			continue;
		}
		r = &fab->rma[c.cookie];
		ep = r->ep;
		if (r->rndv) {		/* the slot may serve its next READ */
			cfi_rma_release(fab, r);
			if (ep)
				cfi_rndv_read_done(ep, c.status);
			continue;
		}
		if (ep) {
			struct cfi_comp comp = {
				.context = r->context,
				.flags = r->flags,
				.len = c.status ? 0 : r->len,
				.err = c.status ? -cfi_errno(c.status) : 0,
			};

			r->rap->inflight--;
			if (r->result && !c.status)
				memcpy(r->result, &c.value, sizeof(c.value));
			if (ep->tcq && (r->comp || c.status))
				cfi_cq_push(ep->tcq, &comp);
			cfi_cntr_count(ep->cntrs[r->flags & FI_READ ? CFI_CNTR_READ :
						 CFI_CNTR_WRITE], c.status);
			if (r->notify && !c.status && cfi_send_notice(ep, r->data))
				CFI_WARN(FI_LOG_EP_DATA, "fi_writedata's data lost\n");
		}
		cfi_rma_release(fab, r);
	}
}

void cfi_rma_ep_close(struct cfi_ep *ep)
{
	struct cfi_fabric *fab = ep->fab;
	unsigned int i;

	/* requests in flight complete into the void; their apertures go */
	for (i = 0; fab->rdma_open && i < CFI_RMA_MAX; i++)
		if (fab->rma[i].busy && fab->rma[i].ep == ep)
			fab->rma[i].ep = NULL;
	for (i = 0; i < CFI_RAP_MAX; i++)
		if (ep->raps[i].key)
			clanq_ap_close(&ep->raps[i].ap);
}

void cfi_rma_fabric_close(struct cfi_fabric *fab)
{
	unsigned int i;

	if (!fab->rdma_open)
		return;
	clanq_ep_destroy(&fab->rdma);
	for (i = 0; i < CFI_RMA_MAX; i++)
		if (fab->rma[i].busy)
			cfi_rma_release(fab, &fab->rma[i]);
	free(fab->rma);
	fab->rma = NULL;
	fab->rdma_open = false;
}

/* ---- apertures onto the peer's registrations ----------------------------- */

/* clanq's refusal of an import, in libfabric's words */
static int cfi_import_errno(int err)
{
	switch (err) {
	case -ENOENT:
		return -FI_EKEYREJECTED;	/* no such key, or revoked */
	case -ERANGE:
		return -FI_EINVAL;		/* outside the registration */
	default:
		return cfi_errno(err);
	}
}

static int cfi_rap_get(struct cfi_ep *ep, uint64_t key, uint64_t addr,
		       size_t len, uint32_t rights, struct cfi_rap **out)
{
	struct clanq_ap_attr attr = {
		.flags = rights & CFI_RAP_ATOMIC ? CLANQ_AP_ATOMIC : 0,
	};
	struct cfi_rap *same = NULL, *slot = NULL, *r;
	struct clanq_addr region;
	uint64_t first, end;
	unsigned int i;
	int ret;

	if (!key || addr > UINT64_MAX - len)
		return -FI_EINVAL;
	for (i = 0; i < CFI_RAP_MAX; i++) {
		r = &ep->raps[i];
		if (r->key != key || r->rights != rights)
			continue;
		if (addr >= r->first && addr + len <= r->end) {
			r->used = ++ep->rap_clock;
			*out = r;
			return 0;
		}
		same = r;
	}
	first = addr;
	end = addr + len;
	if (same) {
		first = same->first < first ? same->first : first;
		end = same->end > end ? same->end : end;
		if (!same->inflight)
			slot = same;
	}
	for (i = 0; !slot && i < CFI_RAP_MAX; i++) {
		r = &ep->raps[i];
		if (!r->key)
			slot = r;
		else if (!r->inflight && (!slot || r->used < slot->used))
			slot = r;
	}
	for (i = 0; !slot && i < CFI_RAP_MAX; i++)
		if (!ep->raps[i].inflight)
			slot = &ep->raps[i];
	if (!slot)
		return -FI_EAGAIN;	/* every one is in use: later */
	if (slot->key) {
		clanq_ap_close(&slot->ap);
		slot->key = 0;
	}
	region.node = ep->peer.node;
	region.id = (uint32_t)(key >> 32);
	ret = clanq_ap_import_attr(&ep->fab->dev, &slot->ap, region, key, first,
				   end - first, rights & CLANQ_RIGHTS_ALL, &attr);
	if (ret) {
		CFI_WARN(FI_LOG_EP_DATA, "key %#llx [%llu, +%zu): %s\n",
			 (unsigned long long)key, (unsigned long long)addr,
			 len, clanq_strerror_last(&ep->fab->dev));
		return cfi_import_errno(ret);
	}
	slot->key = key;
	slot->rights = rights;
	slot->first = first;
	slot->end = end;
	slot->inflight = 0;
	slot->used = ++ep->rap_clock;
	*out = slot;
	return 0;
}

/* ---- requests ------------------------------------------------------------- */

ssize_t cfi_rma_submit(struct cfi_ep *ep, const struct cfi_rma_req *q)
{
	struct cfi_fabric *fab = ep->fab;
	bool write = q->op == CLANQ_RDMA_OP_WRITE;
	bool atomic = q->op == CLANQ_RDMA_OP_CAS || q->op == CLANQ_RDMA_OP_FADD;
	bool inject = q->flags & FI_INJECT;
	struct clanq_rdma_req req;
	struct cfi_rap *rap = NULL;
	void *buf = q->buf;
	struct cfi_mr *mr;
	struct cfi_rma *r;
	uint32_t rights;
	ssize_t ret;

	if ((q->flags & ~CFI_RMA_FLAGS) || (q->len && !buf && !atomic) ||
	    q->len > CFI_MSG_MAX || (inject && q->len > CFI_INJECT_MAX) ||
	    (inject && !write && !atomic))
		return -FI_EINVAL;
	rights = atomic ? CLANQ_RIGHTS_ALL | CFI_RAP_ATOMIC :
		 write ? CLANQ_RIGHT_WRITE : CLANQ_RIGHT_READ;
	cfi_lock(fab);
	if (ep->state != CFI_EP_CONNECTED) {
		ret = ep->state == CFI_EP_SHUTDOWN ? -FI_ESHUTDOWN : -FI_ENOTCONN;
		goto out;
	}
	ret = cfi_rdma_open(fab);
	if (ret)
		goto out;
	if (!fab->rma_free) {
		ret = -FI_EAGAIN;
		goto out;
	}
	ret = cfi_rap_get(ep, q->key, q->addr, q->len ? q->len : 1, rights, &rap);
	if (ret)
		goto out;
	r = cfi_rma_take(fab);
	r->ep = ep;
	r->rap = rap;
	r->context = q->context;
	r->flags = (atomic ? FI_ATOMIC : FI_RMA) |
		   (write || (atomic && !q->result) ? FI_WRITE : FI_READ);
	r->len = q->len;
	r->comp = !inject && cfi_tx_comp(ep, q->flags);
	r->notify = q->flags & FI_REMOTE_CQ_DATA;
	r->data = q->data;
	r->result = q->result;

	memset(&req, 0, sizeof(req));
	mr = atomic ? NULL : cfi_mr_of(q->desc, buf, q->len);
	if (atomic) {
		/* the engine takes the operands and hands back the old word */
		req.operand[0] = q->operand[0];
		req.operand[1] = q->operand[1];
	} else if (mr) {
		req.src_region = mr->region.addr.id;
		req.src_off = (uintptr_t)buf - (uintptr_t)mr->buf;
	} else if (q->len) {
		/* unregistered: pinned for this request alone */
		if (inject) {
			r->copy = malloc(q->len);
			if (!r->copy) {
				ret = -FI_EAGAIN;
				goto undo;
			}
			memcpy(r->copy, buf, q->len);
			buf = r->copy;
		}
		ret = clanq_region_register(&fab->dev, &r->tmp, buf, q->len);
		if (ret) {
			ret = ret == -ENOMEM ? -FI_EAGAIN : cfi_errno(ret);
			goto undo;
		}
		req.src_region = r->tmp.addr.id;
	} else {
		/* nothing to move: the engine's no-op, for its completion */
		ret = clanq_region_register(&fab->dev, &r->tmp, &r->data, 1);
		if (ret) {
			ret = cfi_errno(ret);
			goto undo;
		}
		req.src_region = r->tmp.addr.id;
	}
	req.op = q->op;
	req.dst_ap = rap->ap.id;
	req.dst_off = q->addr - rap->first;
	req.len = q->len;
	req.cookie = (uint64_t)(r - fab->rma);
	req.flags = CLANQ_RDMA_SIGNAL | CLANQ_RDMA_LAST |
		    (q->flags & FI_FENCE ? CLANQ_RDMA_FENCE : 0);
	ret = clanq_rdma_post(&fab->rdma, &req);
	if (ret) {
		ret = ret == -EAGAIN ? -FI_EAGAIN : cfi_errno(ret);
		goto undo;
	}
	rap->inflight++;
	goto out;
undo:
	cfi_rma_release(fab, r);
out:
	cfi_unlock(fab);
	return ret;
}

/* the RMA calls' common case */
static ssize_t cfi_rma_post(struct cfi_ep *ep, uint32_t op, void *buf,
			    size_t len, void *desc, uint64_t addr, uint64_t key,
			    void *context, uint64_t data, uint64_t flags)
{
	struct cfi_rma_req q = {
		.op = op, .buf = buf, .len = len, .desc = desc, .addr = addr,
		.key = key, .context = context, .data = data, .flags = flags,
	};

	return cfi_rma_submit(ep, &q);
}

static struct cfi_ep *cfi_ep_of(struct fid_ep *fep)
{
	return container_of(fep, struct cfi_ep, ep);
}

static ssize_t cfi_read(struct fid_ep *fep, void *buf, size_t len, void *desc,
			fi_addr_t src_addr, uint64_t addr, uint64_t key,
			void *context)
{
	(void)src_addr;
	return cfi_rma_post(cfi_ep_of(fep), CLANQ_RDMA_OP_READ, buf, len, desc,
			    addr, key, context, 0, FI_COMPLETION);
}

/* the v forms: one iov */
static ssize_t cfi_rma_iov(struct fid_ep *fep, uint32_t op,
			   const struct iovec *iov, void **desc, size_t count,
			   uint64_t addr, uint64_t key, void *context)
{
	if (count != 1 || !iov)
		return -FI_EINVAL;
	return cfi_rma_post(cfi_ep_of(fep), op, iov[0].iov_base,
			    iov[0].iov_len, desc ? desc[0] : NULL, addr, key,
			    context, 0, FI_COMPLETION);
}

static ssize_t cfi_readv(struct fid_ep *fep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src_addr,
			 uint64_t addr, uint64_t key, void *context)
{
	(void)src_addr;
	return cfi_rma_iov(fep, CLANQ_RDMA_OP_READ, iov, desc, count, addr, key,
			   context);
}

static ssize_t cfi_rma_msg(struct fid_ep *fep, uint32_t op,
			   const struct fi_msg_rma *msg, uint64_t flags)
{
	if (!msg || msg->iov_count != 1 || !msg->msg_iov ||
	    msg->rma_iov_count != 1 || !msg->rma_iov ||
	    msg->rma_iov[0].len != msg->msg_iov[0].iov_len)
		return -FI_EINVAL;
	if (op == CLANQ_RDMA_OP_READ && (flags & (FI_REMOTE_CQ_DATA | FI_INJECT)))
		return -FI_EINVAL;
	return cfi_rma_post(cfi_ep_of(fep), op, msg->msg_iov[0].iov_base,
			    msg->msg_iov[0].iov_len,
			    msg->desc ? msg->desc[0] : NULL, msg->rma_iov[0].addr,
			    msg->rma_iov[0].key, msg->context, msg->data, flags);
}

static ssize_t cfi_readmsg(struct fid_ep *fep, const struct fi_msg_rma *msg,
			   uint64_t flags)
{
	return cfi_rma_msg(fep, CLANQ_RDMA_OP_READ, msg, flags);
}

static ssize_t cfi_write(struct fid_ep *fep, const void *buf, size_t len,
			 void *desc, fi_addr_t dest_addr, uint64_t addr,
			 uint64_t key, void *context)
{
	(void)dest_addr;
	return cfi_rma_post(cfi_ep_of(fep), CLANQ_RDMA_OP_WRITE, (void *)buf,
			    len, desc, addr, key, context, 0, FI_COMPLETION);
}

static ssize_t cfi_writev(struct fid_ep *fep, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t dest_addr,
			  uint64_t addr, uint64_t key, void *context)
{
	(void)dest_addr;
	return cfi_rma_iov(fep, CLANQ_RDMA_OP_WRITE, iov, desc, count, addr, key,
			   context);
}

static ssize_t cfi_writemsg(struct fid_ep *fep, const struct fi_msg_rma *msg,
			    uint64_t flags)
{
	return cfi_rma_msg(fep, CLANQ_RDMA_OP_WRITE, msg, flags);
}

static ssize_t cfi_inject_write(struct fid_ep *fep, const void *buf, size_t len,
				fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	(void)dest_addr;
	return cfi_rma_post(cfi_ep_of(fep), CLANQ_RDMA_OP_WRITE, (void *)buf,
			    len, NULL, addr, key, NULL, 0, FI_INJECT);
}

static ssize_t cfi_writedata(struct fid_ep *fep, const void *buf, size_t len,
			     void *desc, uint64_t data, fi_addr_t dest_addr,
			     uint64_t addr, uint64_t key, void *context)
{
	(void)dest_addr;
	return cfi_rma_post(cfi_ep_of(fep), CLANQ_RDMA_OP_WRITE, (void *)buf,
			    len, desc, addr, key, context, data,
			    FI_COMPLETION | FI_REMOTE_CQ_DATA);
}

static ssize_t cfi_inject_writedata(struct fid_ep *fep, const void *buf,
				    size_t len, uint64_t data,
				    fi_addr_t dest_addr, uint64_t addr,
				    uint64_t key)
{
	(void)dest_addr;
	return cfi_rma_post(cfi_ep_of(fep), CLANQ_RDMA_OP_WRITE, (void *)buf,
			    len, NULL, addr, key, NULL, data,
			    FI_INJECT | FI_REMOTE_CQ_DATA);
}

struct fi_ops_rma cfi_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = cfi_read,
	.readv = cfi_readv,
	.readmsg = cfi_readmsg,
	.write = cfi_write,
	.writev = cfi_writev,
	.writemsg = cfi_writemsg,
	.inject = cfi_inject_write,
	.writedata = cfi_writedata,
	.injectdata = cfi_inject_writedata,
};
