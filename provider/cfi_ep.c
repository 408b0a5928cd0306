// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: passive and active FI_EP_MSG endpoints on clanq
 * connections, the connection manager's records, and progress.
 *
 * Connecting. The client's fi_connect() starts clanq_connect() with
 * CLANQ_CONN_NONBLOCK; once clanq has the connection open it sends a
 * CONNREQ record carrying the connection data. The server's listener
 * takes clanq's pending connections as they come (clanq_accept()), reads
 * their CONNREQ and reports FI_CONNREQ; fi_accept() answers ACCEPT (its
 * data: the client's FI_CONNECTED), fi_reject() REJECT and closes (the
 * client's fi_eq_readerr(): FI_ECONNREFUSED with the data). After that
 * every message is a DATA record: a header, then the application's bytes.
 *
 * Order. Sends go out in the order posted (one clanq connection, one
 * ring); a send without credit waits in the endpoint's queue, and the
 * sends after it queue behind it. Posted receives take the incoming
 * messages in order; a message with no receive posted stays in clanq's
 * ring, which holds back the sender (flow control, no drop, no RNR).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfi.h"

/* ---- the operations a provider without them answers --------------------- */

static ssize_t cfi_nosys(void)
{
	return -FI_ENOSYS;
}

/* tagged, collective: tables of cfi_nosys (none claimed) */
#define CFI_NOSYS_TABLE(name, type)					\
	static struct {							\
		size_t size;						\
		void *fn[24];						\
	} name = {							\
		.size = sizeof(type),					\
		.fn = { [0 ... 23] = (void *)cfi_nosys },		\
	}

CFI_NOSYS_TABLE(cfi_tagged_nosys, struct fi_ops_tagged);
CFI_NOSYS_TABLE(cfi_coll_nosys, struct fi_ops_collective);

/* ---- operations queues --------------------------------------------------- */

static struct cfi_op *cfi_op_get(struct cfi_ep *ep)
{
	struct cfi_op *op = ep->free_ops;

	if (op) {
		/* all but the iovs, which cfi_fill_iov() writes before use */
		ep->free_ops = op->next;
		memset(op, 0, offsetof(struct cfi_op, iov));
		memset(&op->iovcnt, 0, sizeof(*op) - offsetof(struct cfi_op, iovcnt));
		return op;
	}
	return calloc(1, sizeof(*op));
}

void cfi_op_put(struct cfi_ep *ep, struct cfi_op *op)
{
	free(op->copy);
	op->copy = NULL;
	cfi_rndv_unreg(op);	/* a rendezvous send that ended unanswered */
	op->next = ep->free_ops;
	ep->free_ops = op;
}

/*
 * op of ep ended (rx: a receive; else a send): its CQ entry if one is
 * wanted or it failed, and its count in the endpoint's counter either way
 */
static void cfi_complete_with(struct cfi_ep *ep, bool rx, bool comp,
			      const struct cfi_comp *c)
{
	struct cfi_cq *cq = rx ? ep->rcq : ep->tcq;

	if (cq && (comp || c->err))
		cfi_cq_push(cq, c);
	cfi_cntr_count(ep->cntrs[rx ? CFI_CNTR_RECV : CFI_CNTR_SEND], c->err);
}

void cfi_complete(struct cfi_ep *ep, bool rx, struct cfi_op *op,
		  size_t len, int err, size_t olen)
{
	struct cfi_comp c = {
		.context = op->context,
		.flags = op->flags,
		.len = len,
		/* fi_writedata()'s data took the receive: no bytes in it */
		.buf = op->iovcnt > 1 && !(op->flags & FI_RMA) ?
		       op->iov[1].iov_base : NULL,
		.data = op->data,
		.olen = olen,
		.err = err,
	};

	cfi_complete_with(ep, rx, op->comp, &c);
}

/*
 * Sends at the head of ep->aq whose turn came (a rendezvous until its
 * DONE, and what was sent after it): their completions, in order
 */
void cfi_tx_done(struct cfi_ep *ep)
{
	while (ep->aq.head && !ep->aq.head->reg) {
		struct cfi_op *op = cfi_opq_pop(&ep->aq);

		cfi_complete(ep, false, op, op->len, op->err, 0);
		cfi_op_put(ep, op);
	}
}

/*
 * A send that went out (or failed: err): complete it, or keep it for
 * its turn (ep->aq)
 */
static void cfi_sent(struct cfi_ep *ep, struct cfi_op *op, bool rndv, int err)
{
	op->err = err;
	if (op->internal) {
		cfi_op_put(ep, op);
	} else if (rndv || ep->aq.head) {
		cfi_opq_push(&ep->aq, op);
	} else {
		cfi_complete(ep, false, op, op->len, err, 0);
		cfi_op_put(ep, op);
	}
}

/*
 * Every operation still queued ends with FI_ECANCELED: sends sent and
 * waiting for their turn first (a rendezvous not answered: cancelled;
 * one sent after it: done), then those not sent, then the receives
 * (behind a rendezvous being read, once the engine let go of it).
 */
void cfi_flush(struct cfi_ep *ep)
{
	while (ep->aq.head) {
		struct cfi_op *op = cfi_opq_pop(&ep->aq);

		cfi_complete(ep, false, op, op->len, op->reg ? FI_ECANCELED : op->err, 0);
		cfi_op_put(ep, op);
	}
	while (ep->sq.head) {
		struct cfi_op *op = cfi_opq_pop(&ep->sq);

		if (op->comp)
			cfi_complete(ep, false, op, 0, FI_ECANCELED, 0);
		else	/* no CQ entry, as it was asked; still a count */
			cfi_cntr_count(ep->cntrs[CFI_CNTR_SEND], true);
		cfi_op_put(ep, op);
	}
	if (cfi_rndv_flush(ep))
		return;
	while (ep->rq.head) {
		struct cfi_op *op = cfi_opq_pop(&ep->rq);

		cfi_complete(ep, true, op, 0, FI_ECANCELED, 0);
		cfi_op_put(ep, op);
	}
}

/*
 * The connection ended: the peer shut it down (err 0), died or broke
 * the protocol. FI_SHUTDOWN on the endpoint's EQ, what is queued is
 * cancelled.
 */
void cfi_ep_lost(struct cfi_ep *ep, int err)
{
	(void)err;
	if (ep->conn)
		clanq_conn_close(ep->conn);
	ep->conn = NULL;
	ep->state = CFI_EP_SHUTDOWN;
	cfi_eq_push_cm(ep->eq, FI_SHUTDOWN, &ep->ep.fid, NULL, NULL, 0);
	cfi_flush(ep);
}

/* a CM record: header and up to CFI_CM_DATA_MAX bytes, never blocking */
static int cfi_send_cm(struct clanq_conn *c, uint8_t type, const void *data,
		       size_t len)
{
	struct cfi_hdr h = {
		.magic = CFI_HDR_MAGIC,
		.type = type,
		.len = (uint32_t)len,
	};
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)data, .iov_len = len },
	};

	return clanq_sendv(c, iov, len ? 2 : 1, CLANQ_MSG_DONTWAIT);
}

/*
 * Read a CM record of type want (or, for a client, ACCEPT or REJECT):
 * its type, and its data into data (*len). -EAGAIN if none yet, -EPROTO
 * for anything else, clanq's error or -ECONNRESET at end of stream.
 */
static int cfi_recv_cm(struct clanq_conn *c, uint8_t *type, void *data,
		       size_t *len)
{
	uint8_t buf[sizeof(struct cfi_hdr) + CFI_CM_DATA_MAX];
	struct cfi_hdr h;
	ssize_t n;

	n = clanq_recv(c, buf, sizeof(buf), CLANQ_MSG_DONTWAIT);
	if (n == 0)
		return -ECONNRESET;
	if (n == -EMSGSIZE)
		return -EPROTO;
	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof(h))
		return -EPROTO;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != CFI_HDR_MAGIC || h.len != (size_t)n - sizeof(h))
		return -EPROTO;
	*type = h.type;
	*len = h.len;
	memcpy(data, buf + sizeof(h), h.len);
	return 0;
}

/* ---- progress ------------------------------------------------------------ */

static void cfi_pep_progress(struct cfi_pep *pep)
{
	struct clanq_conn_opts opts = {
		.rx_ring = pep->fab->ring,
		.tx_ring = pep->fab->ring,
	};
	struct cfi_connreq *r, **pr;
	struct clanq_conn *c;

	if (!pep->l)
		return;
	while (clanq_accept(pep->l, &c, &opts, 0) == 0) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			clanq_conn_close(c);
			break;
		}
		r->fid.fclass = FI_CLASS_CONNREQ;
		r->pep = pep;
		r->conn = c;
		r->next = pep->reqs;
		pep->reqs = r;
	}
	for (pr = &pep->reqs; (r = *pr);) {
		uint8_t data[CFI_CM_DATA_MAX], type;
		struct clanq_addr pa;
		struct cfi_addr a;
		struct fi_info *fi;
		size_t len;
		int ret;

		if (r->announced) {
			pr = &r->next;
			continue;
		}
		ret = cfi_recv_cm(r->conn, &type, data, &len);
		if (ret == -EAGAIN) {
			pr = &r->next;
			continue;
		}
		fi = ret || type != CFI_H_CONNREQ ? NULL : fi_dupinfo(pep->info);
		if (fi) {
			/*
			 * The client's node only: its net's id is no address
			 * to reach it at, and ofi_rxm puts the client's
			 * listening service in the port to find it.
			 */
			pa = clanq_conn_peer(r->conn);
			a.node = pa.node;
			a.service = 0;
			free(fi->dest_addr);
			fi->dest_addrlen = sizeof(struct sockaddr_in6);
			fi->dest_addr = malloc(fi->dest_addrlen);
			if (!fi->dest_addr ||
			    cfi_addr_put(&a, fi->dest_addr, &fi->dest_addrlen))
				fi->dest_addrlen = 0;
			fi->handle = &r->fid;
			if (!cfi_eq_push_cm(pep->eq, FI_CONNREQ, &pep->pep.fid,
					    fi, data, len)) {
				r->announced = true;
				pr = &r->next;
				continue;
			}
			fi->handle = NULL;
			fi_freeinfo(fi);
		}
		/* gone, or not one of ours, or no memory: refuse it */
		*pr = r->next;
		clanq_conn_close(r->conn);
		free(r);
	}
}

static void cfi_ep_connect_progress(struct cfi_ep *ep)
{
	uint8_t data[CFI_CM_DATA_MAX], type;
	size_t len;
	int ret;

	if (ep->state == CFI_EP_CONNECTING) {
		switch (clanq_conn_state(ep->conn)) {
		case CLANQ_CONN_CONNECTING:
			return;
		case CLANQ_CONN_OPEN:
			ret = cfi_send_cm(ep->conn, CFI_H_CONNREQ, ep->cm_data,
					  ep->cm_len);
			if (ret == -EAGAIN)
				return;
			if (ret)
				goto failed;
			ep->state = CFI_EP_WAIT_ACCEPT;
			break;
		default:
			ret = clanq_conn_error(ep->conn);
			goto failed;
		}
	}
	ret = cfi_recv_cm(ep->conn, &type, data, &len);
	if (ret == -EAGAIN)
		return;
	if (ret)
		goto failed;
	if (type == CFI_H_ACCEPT) {
		ep->state = CFI_EP_CONNECTED;
		cfi_eq_push_cm(ep->eq, FI_CONNECTED, &ep->ep.fid, NULL, data, len);
		return;
	}
	if (type == CFI_H_REJECT) {
		clanq_conn_close(ep->conn);
		ep->conn = NULL;
		ep->state = CFI_EP_SHUTDOWN;
		cfi_eq_push_err(ep->eq, &ep->ep.fid, ep->ep.fid.context,
				FI_ECONNREFUSED, data, len);
		return;
	}
	ret = -EPROTO;
failed:
	clanq_conn_close(ep->conn);
	ep->conn = NULL;
	ep->state = CFI_EP_SHUTDOWN;
	ret = ret ? -cfi_errno(ret) : FI_ECONNREFUSED;
	cfi_eq_push_err(ep->eq, &ep->ep.fid, ep->ep.fid.context, ret, NULL, 0);
}

/*
 * Send op now: a small message is gathered (header and bytes) and
 * handed to clanq_send(), whose common case is the library's straight
 * path (8-13% off fi_pingpong's 8 and 64 B round trips, A/B in one
 * boot); a longer one goes as it is, through clanq_sendv().
 */
#define CFI_SMALL	256u

/*
 * Pieces. A message longer than the connection's eager size goes as
 * records of up to that size, each with our header (CFI_HF_PIECE, the
 * whole length), one after another: each is a send that never waits,
 * so a sender short of credit stops between two pieces, keeps its
 * place (op->done) and goes on at the next progress, and fi_send()
 * never blocks. (libclanq's own large messages wait inside the call
 * for the receiver: two processes sending large messages to each other
 * before receiving would each hold its lock for ever.) The receiver
 * puts each piece where it belongs in the posted receive, dropping
 * what does not fit (FI_ETRUNC at the end), and completes it with the
 * last. Two copies, as for any message through the ring.
 */

/* v: our header, then len bytes of op's iovs from byte off. How many. */
static int cfi_iov_slice(const struct cfi_op *op, size_t off, size_t len,
			 struct iovec *v)
{
	int i, n = 1;

	v[0] = op->iov[0];
	for (i = 1; i < op->iovcnt && len; i++) {
		size_t have = op->iov[i].iov_len;

		if (off >= have) {
			off -= have;
			continue;
		}
		v[n].iov_base = (char *)op->iov[i].iov_base + off;
		v[n].iov_len = have - off < len ? have - off : len;
		len -= v[n].iov_len;
		off = 0;
		n++;
	}
	return n;
}

/*
 * len bytes at byte off of op's iovs (the application's: iov[0], our
 * header, is not counted), and buf: into them (put) or out of them
 * (get). What lies past their end is left out.
 */
static void cfi_iov_copy(const struct cfi_op *op, size_t off, uint8_t *buf,
			 size_t len, bool put)
{
	int i;

	for (i = 1; i < op->iovcnt && len; i++) {
		size_t have = op->iov[i].iov_len, k;
		char *at;

		if (off >= have) {
			off -= have;
			continue;
		}
		at = (char *)op->iov[i].iov_base + off;
		k = have - off < len ? have - off : len;
		if (put)
			memcpy(at, buf, k);
		else
			memcpy(buf, at, k);
		buf += k;
		len -= k;
		off = 0;
	}
}

/* len bytes of a received message at byte off into op's iovs: what fits */
void cfi_iov_put(struct cfi_op *op, size_t off, const uint8_t *src, size_t len)
{
	cfi_iov_copy(op, off, (uint8_t *)src, len, true);
}

/* len bytes of op's iovs from byte off, into dst */
void cfi_iov_get(const struct cfi_op *op, size_t off, void *dst, size_t len)
{
	cfi_iov_copy(op, off, dst, len, false);
}

/*
 * A small message (at most CFI_SMALL bytes in @iov) gathered behind its
 * header and sent whole, by the library's straight path: 0, or -EAGAIN
 * (no room) or why not.
 */
static int cfi_send_whole(struct cfi_ep *ep, const struct cfi_hdr *h,
			  const struct iovec *iov, size_t count)
{
	uint8_t buf[sizeof(struct cfi_hdr) + CFI_SMALL];
	size_t off = sizeof(*h), i;

	memcpy(buf, h, sizeof(*h));
	for (i = 0; i < count; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return clanq_send(ep->conn, buf, off, CLANQ_MSG_DONTWAIT);
}

static int cfi_send_now(struct cfi_ep *ep, struct cfi_op *op)
{
	size_t piece = clanq_conn_eager_max(ep->conn) - sizeof(struct cfi_hdr);
	struct iovec v[CFI_IOV_MAX + 1];
	size_t n;
	int ret;

	if (op->len <= CFI_SMALL)	/* iov[0] is the header */
		return cfi_send_whole(ep, &op->hdr, op->iov + 1, (size_t)op->iovcnt - 1);
	if (ep->fab->rndv_min && op->len >= ep->fab->rndv_min && !op->rndv_off) {
		ret = cfi_rndv_send(ep, op);
		if (ret)
			return ret;	/* 1: sent, it waits for its DONE */
	}
	if (op->len <= piece)
		return clanq_sendv(ep->conn, op->iov, op->iovcnt, CLANQ_MSG_DONTWAIT);
	op->hdr.flags |= CFI_HF_PIECE;
	op->hdr.len = (uint32_t)op->len;	/* <= CFI_MSG_MAX */
	while (op->done < op->len) {
		n = op->len - op->done < piece ? op->len - op->done : piece;
		ret = clanq_sendv(ep->conn, v, cfi_iov_slice(op, op->done, n, v),
				  CLANQ_MSG_DONTWAIT);
		if (ret)
			return ret;	/* -EAGAIN: on from here at the next progress */
		op->done += n;
	}
	return 0;
}

/*
 * A small send with nothing queued ahead of it, before any operation is
 * made for it. -EAGAIN: no room; the caller queues it.
 */
static int cfi_send_small(struct cfi_ep *ep, const struct iovec *iov,
			  size_t count, uint64_t data, uint64_t flags)
{
	struct cfi_hdr h = { .magic = CFI_HDR_MAGIC, .type = CFI_H_DATA };

	if (flags & FI_REMOTE_CQ_DATA) {
		h.flags = CFI_HF_DATA;
		h.data = data;
	}
	return cfi_send_whole(ep, &h, iov, count);
}

static void cfi_send_progress(struct cfi_ep *ep)
{
	while (ep->sq.head && ep->conn) {
		struct cfi_op *op = ep->sq.head;
		int ret = cfi_send_now(ep, op);

		if (ret == -EAGAIN)
			return;
		cfi_opq_pop(&ep->sq);
		cfi_sent(ep, op, ret == 1, ret < 0 ? -cfi_errno(ret) : 0);
		if (ret < 0) {
			cfi_ep_lost(ep, ret);
			return;
		}
	}
}

/* A message of no bytes, h, behind what is queued. Lock held. */
static int cfi_send_hdr(struct cfi_ep *ep, const struct cfi_hdr *h, bool internal)
{
	struct cfi_op *op;

	if (ep->state != CFI_EP_CONNECTED)
		return -FI_ESHUTDOWN;
	op = cfi_op_get(ep);
	if (!op)
		return -FI_ENOMEM;
	op->hdr = *h;
	op->iov[0].iov_base = &op->hdr;
	op->iov[0].iov_len = sizeof(op->hdr);
	op->iovcnt = 1;
	op->flags = FI_SEND | FI_MSG;
	op->internal = internal;
	cfi_opq_push(&ep->sq, op);
	cfi_send_progress(ep);
	return 0;
}

/*
 * fi_writedata()'s data, once its write completed: completing nothing
 * here (counted as a send)
 */
int cfi_send_notice(struct cfi_ep *ep, uint64_t data)
{
	struct cfi_hdr h = {
		.magic = CFI_HDR_MAGIC, .type = CFI_H_DATA,
		.flags = CFI_HF_DATA | CFI_HF_RMA, .data = data,
	};

	return cfi_send_hdr(ep, &h, false);
}

/* The provider's own record (a rendezvous's DONE): not the application's. */
int cfi_send_ctl(struct cfi_ep *ep, const struct cfi_hdr *h)
{
	return cfi_send_hdr(ep, h, true);
}

/* a message longer than the receive: FI_ETRUNC, what fits delivered */
static int cfi_recv_trunc(struct cfi_ep *ep, struct cfi_op *op)
{
	ssize_t sz = clanq_recv_size(ep->conn, CLANQ_MSG_DONTWAIT);
	struct cfi_hdr h;
	size_t off, left, i;
	uint8_t *tmp;
	ssize_t n;

	if (sz <= 0)
		return sz ? (int)sz : -ECONNRESET;
	tmp = malloc((size_t)sz);
	if (!tmp)
		return -EAGAIN;		/* try again later */
	n = clanq_recv(ep->conn, tmp, (size_t)sz, CLANQ_MSG_DONTWAIT);
	if (n != sz) {
		free(tmp);
		return n < 0 ? (int)n : -EPROTO;
	}
	if ((size_t)n < sizeof(h)) {
		free(tmp);
		return -EPROTO;
	}
	memcpy(&h, tmp, sizeof(h));
	if (h.magic == CFI_HDR_MAGIC && h.type == CFI_H_DATA && (h.flags & CFI_HF_RNDV)) {
		/* a rendezvous into less than its cfi_rts: what fits is read */
		struct cfi_rts rts;

		if ((size_t)n != sizeof(h) + sizeof(rts)) {
			free(tmp);
			return -EPROTO;
		}
		memcpy(&rts, tmp + sizeof(h), sizeof(rts));
		free(tmp);
		op->hdr = h;
		return cfi_rndv_recv(ep, op, &rts);
	}
	if (h.magic != CFI_HDR_MAGIC || h.type != CFI_H_DATA ||
	    ((h.flags & CFI_HF_PIECE) && h.len <= (size_t)n - sizeof(h))) {
		free(tmp);
		return -EPROTO;
	}
	if (h.flags & CFI_HF_PIECE) {	/* the first piece: more to come */
		op->hdr = h;
		op->whole = h.len;
		op->done = (size_t)n - sizeof(h);
		cfi_iov_put(op, 0, tmp + sizeof(h), op->done);
		free(tmp);
		return 0;
	}
	off = sizeof(h);
	left = (size_t)n - off;
	for (i = 1; i < (size_t)op->iovcnt && left; i++) {
		size_t k = op->iov[i].iov_len < left ? op->iov[i].iov_len : left;

		memcpy(op->iov[i].iov_base, tmp + off, k);
		off += k;
		left -= k;
	}
	free(tmp);
	if (h.flags & CFI_HF_DATA) {
		op->flags |= FI_REMOTE_CQ_DATA;
		op->data = h.data;
	}
	cfi_complete(ep, true, op, op->len, FI_ETRUNC, left);
	return 0;
}

/*
 * Into a small receive (its header and bytes fit here) a message is
 * taken by clanq_recv(), the library's straight path, and scattered;
 * into a larger one by clanq_recvv(). Either leaves a message longer
 * than the receive where it is, and says -EMSGSIZE (cfi_recv_trunc()).
 */
static ssize_t cfi_recv_now(struct cfi_ep *ep, struct cfi_op *op)
{
	uint8_t buf[sizeof(struct cfi_hdr) + CFI_SMALL];
	size_t room = sizeof(struct cfi_hdr) + op->len, off, k;
	ssize_t n;
	int i;

	if (room > sizeof(buf))
		return clanq_recvv(ep->conn, op->iov, op->iovcnt, CLANQ_MSG_DONTWAIT);
	n = clanq_recv(ep->conn, buf, room, CLANQ_MSG_DONTWAIT);
	if (n <= 0)
		return n;
	for (i = 0, off = 0; i < op->iovcnt && off < (size_t)n; i++, off += k) {
		k = op->iov[i].iov_len < (size_t)n - off ? op->iov[i].iov_len : (size_t)n - off;
		memcpy(op->iov[i].iov_base, buf + off, k);
	}
	return n;
}

/*
 * A look at the connection that finds nothing costs a check of its
 * ring; the receive itself, whose empty path also answers the peer's
 * requests for credit and looks for its end, runs when there is
 * something, and every CFI_IDLE_RECV_EVERY empty looks (a peer's death
 * is the net's news, which cfi_progress() takes every few calls).
 */
#define CFI_IDLE_RECV_EVERY	16u

/* The next piece of op's message, into its place: 0, -EAGAIN, or why not. */
static int cfi_recv_piece(struct cfi_ep *ep, struct cfi_op *op)
{
	const uint8_t *p;
	struct cfi_hdr h;
	size_t len;
	ssize_t n;

	n = clanq_recv_peek(ep->conn, (const void **)&p, CLANQ_MSG_DONTWAIT);
	if (n <= 0)
		return n ? (int)n : -ECONNRESET;
	if ((size_t)n <= sizeof(h))
		return -EPROTO;
	memcpy(&h, p, sizeof(h));
	len = (size_t)n - sizeof(h);
	if (h.magic != CFI_HDR_MAGIC || h.type != CFI_H_DATA || !(h.flags & CFI_HF_PIECE) ||
	    h.len != op->whole || len > op->whole - op->done)
		return -EPROTO;
	cfi_iov_put(op, op->done, p + sizeof(h), len);
	clanq_recv_done(ep->conn);
	op->done += len;
	return 0;
}

/* A receive whose last piece came: complete it, truncated if it was short. */
static void cfi_recv_pieces_done(struct cfi_ep *ep, struct cfi_op *op)
{
	size_t len = op->whole < op->len ? op->whole : op->len;

	cfi_opq_pop(&ep->rq);
	if (op->hdr.flags & CFI_HF_DATA) {
		op->flags |= FI_REMOTE_CQ_DATA;
		op->data = op->hdr.data;
	}
	cfi_complete(ep, true, op, len, op->whole > op->len ? FI_ETRUNC : 0, op->whole - len);
	cfi_op_put(ep, op);
}

static void cfi_recv_progress(struct cfi_ep *ep)
{
	bool took = false;
	ssize_t n;
	int ret;

	if (!clanq_conn_readable(ep->conn) && ++ep->idle_looks % CFI_IDLE_RECV_EVERY &&
	    !ep->rndv.op)
		return;
	ep->idle_looks = 0;
	while (ep->rq.head) {
		struct cfi_op *op = ep->rq.head;

		if (ep->rndv.op) {	/* the head, being read */
			if (!cfi_rndv_step(ep) || ep->state != CFI_EP_CONNECTED)
				return;
			continue;
		}
		if (op->whole) {	/* a message in pieces, begun */
			ret = cfi_recv_piece(ep, op);
			if (ret == -EAGAIN)
				return;
			if (ret) {
				cfi_ep_lost(ep, ret);
				return;
			}
			if (op->done == op->whole)
				cfi_recv_pieces_done(ep, op);
			continue;
		}
		n = cfi_recv_now(ep, op);
		if (n == -EAGAIN)
			return;
		if (n == -EMSGSIZE) {
			ret = cfi_recv_trunc(ep, op);
			if (ret == -EAGAIN)
				return;
			if (ret) {
				cfi_ep_lost(ep, ret);
				return;
			}
			if (!op->whole)
				cfi_op_put(ep, cfi_opq_pop(&ep->rq));
			continue;
		}
		if (n <= 0) {
			cfi_ep_lost(ep, (int)n);
			return;
		}
		if ((size_t)n < sizeof(op->hdr) || op->hdr.magic != CFI_HDR_MAGIC) {
			cfi_ep_lost(ep, -EPROTO);
			return;
		}
		if (op->hdr.type == CFI_H_DONE) {	/* for a send of ours */
			ret = (size_t)n == sizeof(op->hdr) ? cfi_rndv_done(ep, &op->hdr) : -EPROTO;
			if (ret) {
				cfi_ep_lost(ep, ret);
				return;
			}
			continue;
		}
		if (op->hdr.type != CFI_H_DATA) {
			cfi_ep_lost(ep, -EPROTO);
			return;
		}
		if (op->hdr.flags & CFI_HF_RNDV) {	/* into place by the engine */
			struct cfi_rts rts;

			ret = -EPROTO;
			if ((size_t)n == sizeof(op->hdr) + sizeof(rts)) {
				cfi_iov_get(op, 0, &rts, sizeof(rts));
				ret = cfi_rndv_recv(ep, op, &rts);
			}
			if (ret) {
				cfi_ep_lost(ep, ret);
				return;
			}
			continue;
		}
		if (op->hdr.flags & CFI_HF_PIECE) {	/* the first piece, in place */
			if (op->hdr.len <= (size_t)n - sizeof(op->hdr)) {
				cfi_ep_lost(ep, -EPROTO);
				return;
			}
			op->whole = op->hdr.len;
			op->done = (size_t)n - sizeof(op->hdr);
			continue;
		}
		cfi_opq_pop(&ep->rq);
		if (op->hdr.flags & CFI_HF_DATA) {
			op->flags |= FI_REMOTE_CQ_DATA;
			op->data = op->hdr.data;
		}
		if (op->hdr.flags & CFI_HF_RMA) {
			/* a remote write's data: the write landed before it */
			op->flags = FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE;
			n = sizeof(op->hdr);
		}
		cfi_complete(ep, true, op, (size_t)n - sizeof(op->hdr), 0, 0);
		cfi_op_put(ep, op);
		took = true;
	}
	/*
	 * Nothing posted: still see the peer's end (or death); not just
	 * after a message was taken, as the next look will
	 */
	if (took)
		return;
	/* answers to our rendezvous need no receive */
	while (ep->aq.head) {
		const struct cfi_hdr *p;
		struct cfi_hdr h;

		n = clanq_recv_peek(ep->conn, (const void **)&p, CLANQ_MSG_DONTWAIT);
		if (n != (ssize_t)sizeof(h))
			break;
		memcpy(&h, p, sizeof(h));
		if (h.magic != CFI_HDR_MAGIC || h.type != CFI_H_DONE)
			break;
		clanq_recv_done(ep->conn);
		ret = cfi_rndv_done(ep, &h);
		if (ret) {
			cfi_ep_lost(ep, ret);
			return;
		}
	}
	n = clanq_recv_size(ep->conn, CLANQ_MSG_DONTWAIT);
	if (n == 0 || (n < 0 && n != -EAGAIN && n != -ENOMSG))
		cfi_ep_lost(ep, (int)n);
}

void cfi_progress(struct cfi_fabric *fab, bool cm)
{
	struct cfi_pep *pep;
	struct cfi_ep *ep;

	if (fab->rdma_open)
		cfi_rma_progress(fab);
	for (ep = fab->eps; ep && !cm; ep = ep->next)
		cm = ep->state == CFI_EP_CONNECTING || ep->state == CFI_EP_WAIT_ACCEPT;
	/*
	 * The net's own messages (handshakes, new connections, notices of
	 * a peer's death): on every EQ read and while connections are being
	 * made, else every 8th look (clanq's receives look at them
	 * themselves every 16th empty one).
	 */
	if (cm || (++fab->progress_calls & 7) == 0) {
		clanq_net_progress(fab->net);
		for (pep = fab->peps; pep; pep = pep->next)
			cfi_pep_progress(pep);
	}
	for (ep = fab->eps; ep; ep = ep->next) {
		if (ep->state == CFI_EP_CONNECTING ||
		    ep->state == CFI_EP_WAIT_ACCEPT)
			cfi_ep_connect_progress(ep);
		if (ep->state != CFI_EP_CONNECTED)
			continue;
		if (ep->sq.head)
			cfi_send_progress(ep);
		if (ep->state == CFI_EP_CONNECTED)
			cfi_recv_progress(ep);
	}
}

/*
 * Before the blocking reads wait on the net: a connection with no
 * receive posted is muted for input, so that a message waiting for one
 * does not wake the wait at once, again and again (a reset still does;
 * the end of stream is seen at the next look, CFI_WAIT_SLICE_MS later).
 */
void cfi_before_wait(struct cfi_fabric *fab)
{
	struct cfi_ep *ep;
	uint32_t want;

	for (ep = fab->eps; ep; ep = ep->next) {
		if (ep->state != CFI_EP_CONNECTED || !ep->conn)
			continue;
		/* a rendezvous's answer comes in, receive or not */
		want = CLANQ_NET_OUT | (ep->rq.head || ep->aq.head ? CLANQ_NET_IN : 0);
		if (want != ep->want && !clanq_conn_want(ep->conn, want))
			ep->want = want;
	}
}

/* ---- passive endpoint ---------------------------------------------------- */

static int cfi_pep_close(struct fid *fid)
{
	struct cfi_pep *pep = container_of(fid, struct cfi_pep, pep.fid);
	struct cfi_fabric *fab = pep->fab;
	struct cfi_pep **pp;

	cfi_lock(fab);
	for (pp = &fab->peps; *pp; pp = &(*pp)->next) {
		if (*pp == pep) {
			*pp = pep->next;
			break;
		}
	}
	while (pep->reqs) {
		struct cfi_connreq *r = pep->reqs;

		pep->reqs = r->next;
		if (r->conn)
			clanq_conn_close(r->conn);
		/* an announced one's fi_info may still name it: keep it */
		if (r->announced)
			r->pep = NULL;
		else
			free(r);
	}
	if (pep->l)
		clanq_listener_close(pep->l);
	if (pep->eq)
		pep->eq->refs--;
	fab->refs--;
	cfi_unlock(fab);
	fi_freeinfo(pep->info);
	free(pep);
	return 0;
}

static int cfi_pep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct cfi_pep *pep = container_of(fid, struct cfi_pep, pep.fid);

	(void)flags;
	if (!bfid || bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	cfi_lock(pep->fab);
	if (pep->eq)
		pep->eq->refs--;
	pep->eq = container_of(bfid, struct cfi_eq, eq.fid);
	pep->eq->refs++;
	cfi_unlock(pep->fab);
	return 0;
}

static int cfi_getopt(fid_t fid, int level, int optname, void *optval,
		      size_t *optlen)
{
	(void)fid;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	if (optname != FI_OPT_CM_DATA_SIZE)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen || *optlen < sizeof(size_t)) {
		if (optlen)
			*optlen = sizeof(size_t);
		return -FI_ETOOSMALL;
	}
	*(size_t *)optval = CFI_CM_DATA_MAX;
	*optlen = sizeof(size_t);
	return 0;
}

static int cfi_setopt(fid_t fid, int level, int optname, const void *optval,
		      size_t optlen)
{
	(void)fid;
	(void)level;
	(void)optname;
	(void)optval;
	(void)optlen;
	return -FI_ENOPROTOOPT;
}

static int cfi_pep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct cfi_pep *pep = container_of(fid, struct cfi_pep, pep.fid);
	struct cfi_addr a = { pep->fab->dev.node, pep->service };

	return cfi_addr_put(&a, addr, addrlen);
}

static int cfi_pep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct cfi_pep *pep = container_of(fid, struct cfi_pep, pep.fid);
	struct cfi_addr a;
	int ret = 0;

	if (cfi_addr_get(addr, addrlen, &a))
		return -FI_EINVAL;
	if (a.node != pep->fab->dev.node || a.service > CLANQ_SERVICE_MAX)
		return -FI_EINVAL;
	cfi_lock(pep->fab);
	if (pep->l)
		ret = -FI_EOPBADSTATE;
	else
		pep->service = a.service;
	cfi_unlock(pep->fab);
	return ret;
}

static int cfi_listen(struct fid_pep *fpep)
{
	struct cfi_pep *pep = container_of(fpep, struct cfi_pep, pep);
	struct cfi_fabric *fab = pep->fab;
	struct clanq_listen_attr la = { .max_rx_ring = fab->ring };
	uint32_t s, k;
	int ret;

	cfi_lock(fab);
	if (pep->l) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	if (!pep->eq) {
		ret = -FI_ENOEQ;
		goto out;
	}
	if (pep->service) {
		ret = clanq_listen_attr(fab->net, &pep->l, pep->service,
					CFI_BACKLOG, &la);
	} else {
		/* no service asked: one of ours, free on this node */
		ret = -EADDRINUSE;
		for (k = 0; k < 256 && ret == -EADDRINUSE; k++) {
			s = CFI_AUTO_SERVICE_MIN +
			    ((uint32_t)getpid() * 131 + k * 7919) %
			    CFI_AUTO_SERVICE_SPAN;
			ret = clanq_listen_attr(fab->net, &pep->l, s,
						CFI_BACKLOG, &la);
			if (!ret)
				pep->service = s;
		}
	}
	if (ret) {
		pep->l = NULL;
		ret = ret == -EADDRINUSE ? -FI_EADDRINUSE : cfi_errno(ret);
		goto out;
	}
	pep->next = fab->peps;
	fab->peps = pep;
out:
	cfi_unlock(fab);
	return ret;
}

static int cfi_reject(struct fid_pep *fpep, fid_t handle, const void *param,
		      size_t paramlen)
{
	struct cfi_pep *pep = container_of(fpep, struct cfi_pep, pep);
	struct cfi_connreq *r, **pr;
	int ret = -FI_ENOENT;

	if (!handle || handle->fclass != FI_CLASS_CONNREQ ||
	    paramlen > CFI_CM_DATA_MAX || (paramlen && !param))
		return -FI_EINVAL;
	cfi_lock(pep->fab);
	for (pr = &pep->reqs; (r = *pr); pr = &r->next) {
		if (&r->fid != handle || !r->announced)
			continue;
		*pr = r->next;
		cfi_send_cm(r->conn, CFI_H_REJECT, param, paramlen);
		clanq_conn_close(r->conn);
		free(r);
		ret = 0;
		break;
	}
	cfi_unlock(pep->fab);
	return ret;
}

static struct fi_ops cfi_pep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_pep_close,
	.bind = cfi_pep_bind,
	.control = (void *)cfi_enosys,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static struct fi_ops_ep cfi_pep_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = (void *)cfi_nosys,
	.getopt = cfi_getopt,
	.setopt = cfi_setopt,
	.tx_ctx = (void *)cfi_enosys,
	.rx_ctx = (void *)cfi_enosys,
	.rx_size_left = (void *)cfi_nosys,
	.tx_size_left = (void *)cfi_nosys,
};

static struct fi_ops_cm cfi_pep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cfi_pep_setname,
	.getname = cfi_pep_getname,
	.getpeer = (void *)cfi_enosys,
	.connect = (void *)cfi_enosys,
	.listen = cfi_listen,
	.accept = (void *)cfi_enosys,
	.reject = cfi_reject,
	.shutdown = (void *)cfi_enosys,
	.join = (void *)cfi_enosys,
};

int cfi_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
		   struct fid_pep **fpep, void *context)
{
	struct cfi_fabric *fab = container_of(fabric, struct cfi_fabric, fab);
	struct cfi_pep *pep;
	struct cfi_addr a = { 0 };

	if (!info || !fpep)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_MSG &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	if (info->src_addr) {
		if (cfi_addr_get(info->src_addr, info->src_addrlen, &a))
			return -FI_EINVAL;
		if (a.node != fab->dev.node || a.service > CLANQ_SERVICE_MAX)
			return -FI_EINVAL;
	}
	pep = calloc(1, sizeof(*pep));
	if (!pep)
		return -FI_ENOMEM;
	pep->info = fi_dupinfo(info);
	if (!pep->info) {
		free(pep);
		return -FI_ENOMEM;
	}
	pep->fab = fab;
	pep->service = a.service;
	pep->pep.fid.fclass = FI_CLASS_PEP;
	pep->pep.fid.context = context;
	pep->pep.fid.ops = &cfi_pep_fi_ops;
	pep->pep.ops = &cfi_pep_ep_ops;
	pep->pep.cm = &cfi_pep_cm_ops;
	cfi_lock(fab);
	fab->refs++;
	cfi_unlock(fab);
	*fpep = &pep->pep;
	return 0;
}

/* ---- active endpoint: connection management ------------------------------ */

static int cfi_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct cfi_ep *ep = container_of(fid, struct cfi_ep, ep.fid);
	struct clanq_addr na = clanq_net_addr(ep->fab->net);
	struct cfi_addr a = { na.node, na.id };

	return cfi_addr_put(&a, addr, addrlen);
}

static int cfi_ep_getpeer(struct fid_ep *fep, void *addr, size_t *addrlen)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct cfi_addr a;
	int ret;

	cfi_lock(ep->fab);
	a = ep->peer;
	ret = ep->state == CFI_EP_CONNECTED ? 0 : -FI_ENOTCONN;
	cfi_unlock(ep->fab);
	return ret ? ret : cfi_addr_put(&a, addr, addrlen);
}

static int cfi_connect(struct fid_ep *fep, const void *addr, const void *param,
		       size_t paramlen)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct clanq_conn_opts opts = {
		.rx_ring = ep->fab->ring,
		.tx_ring = ep->fab->ring,
		.flags = CLANQ_CONN_NONBLOCK,
	};
	struct cfi_addr a;
	int ret;

	if (paramlen > CFI_CM_DATA_MAX || (paramlen && !param))
		return -FI_EINVAL;
	if (!addr) {
		if (!ep->info->dest_addr)
			return -FI_EINVAL;
		addr = ep->info->dest_addr;
	}
	/* fi_connect() says no length: ours is a sockaddr_in6 */
	if (cfi_addr_get(addr, sizeof(struct sockaddr_in6), &a) ||
	    !a.service || a.service > CLANQ_SERVICE_MAX)
		return -FI_EINVAL;
	cfi_lock(ep->fab);
	if (!ep->enabled || ep->state != CFI_EP_IDLE || ep->req) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	ret = clanq_connect(ep->fab->net, &ep->conn, a.node, a.service, &opts);
	if (ret) {
		ep->conn = NULL;
		ret = cfi_errno(ret);
		goto out;
	}
	memcpy(ep->cm_data, param, paramlen);
	ep->cm_len = paramlen;
	ep->peer = a;
	ep->want = CLANQ_NET_IN | CLANQ_NET_OUT;
	ep->state = CFI_EP_CONNECTING;
	cfi_ep_connect_progress(ep);
out:
	cfi_unlock(ep->fab);
	return ret;
}

static int cfi_accept(struct fid_ep *fep, const void *param, size_t paramlen)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct cfi_connreq *r, **pr;
	struct clanq_addr pa;
	int ret;

	if (paramlen > CFI_CM_DATA_MAX || (paramlen && !param))
		return -FI_EINVAL;
	cfi_lock(ep->fab);
	r = ep->req;
	if (!ep->enabled || ep->state != CFI_EP_IDLE || !r) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	if (!r->pep || !r->conn) {	/* its listener was closed */
		ret = -FI_ECONNABORTED;
		goto out;
	}
	ret = cfi_send_cm(r->conn, CFI_H_ACCEPT, param, paramlen);
	if (ret) {
		ret = cfi_errno(ret);
		goto out;
	}
	for (pr = &r->pep->reqs; *pr; pr = &(*pr)->next) {
		if (*pr == r) {
			*pr = r->next;
			break;
		}
	}
	ep->conn = r->conn;
	ep->want = CLANQ_NET_IN | CLANQ_NET_OUT;
	ep->req = NULL;
	free(r);
	pa = clanq_conn_peer(ep->conn);
	ep->peer.node = pa.node;
	ep->peer.service = pa.id;
	ep->state = CFI_EP_CONNECTED;
	cfi_eq_push_cm(ep->eq, FI_CONNECTED, &ep->ep.fid, NULL, NULL, 0);
out:
	cfi_unlock(ep->fab);
	return ret;
}

static int cfi_shutdown(struct fid_ep *fep, uint64_t flags)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	int ret = 0;

	(void)flags;
	cfi_lock(ep->fab);
	switch (ep->state) {
	case CFI_EP_CONNECTING:
	case CFI_EP_WAIT_ACCEPT:
	case CFI_EP_CONNECTED:
		/* what is queued to send goes first, as far as credit allows */
		if (ep->state == CFI_EP_CONNECTED)
			cfi_send_progress(ep);
		if (ep->conn)
			clanq_conn_close(ep->conn);
		ep->conn = NULL;
		ep->state = CFI_EP_SHUTDOWN;
		cfi_flush(ep);
		break;
	case CFI_EP_SHUTDOWN:
		break;
	default:
		ret = -FI_EOPBADSTATE;
	}
	cfi_unlock(ep->fab);
	return ret;
}

/* ---- active endpoint: the fid -------------------------------------------- */

static int cfi_ep_close(struct fid *fid)
{
	struct cfi_ep *ep = container_of(fid, struct cfi_ep, ep.fid);
	struct cfi_fabric *fab = ep->fab;
	struct cfi_ep **pp;
	struct cfi_op *op;
	int k;

	cfi_lock(fab);
	for (pp = &fab->eps; *pp; pp = &(*pp)->next) {
		if (*pp == ep) {
			*pp = ep->next;
			break;
		}
	}
	if (ep->conn)
		clanq_conn_close(ep->conn);
	ep->conn = NULL;
	/* an unanswered request handed to this endpoint: refused */
	if (ep->req && !ep->req->pep)
		free(ep->req);
	cfi_rndv_close(ep);
	cfi_rma_ep_close(ep);
	while (ep->aq.head)
		cfi_op_put(ep, cfi_opq_pop(&ep->aq));
	while (ep->sq.head)
		cfi_op_put(ep, cfi_opq_pop(&ep->sq));
	while (ep->rq.head)
		cfi_op_put(ep, cfi_opq_pop(&ep->rq));
	while ((op = ep->free_ops)) {
		ep->free_ops = op->next;
		free(op);
	}
	if (ep->eq)
		ep->eq->refs--;
	if (ep->tcq)
		ep->tcq->refs--;
	if (ep->rcq)
		ep->rcq->refs--;
	for (k = 0; k < CFI_CNTR_KINDS; k++)
		if (ep->cntrs[k])
			ep->cntrs[k]->refs--;
	ep->dom->refs--;
	cfi_unlock(fab);
	fi_freeinfo(ep->info);
	free(ep);
	return 0;
}

static int cfi_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct cfi_ep *ep = container_of(fid, struct cfi_ep, ep.fid);
	int ret = 0;

	if (!bfid)
		return -FI_EINVAL;
	cfi_lock(ep->fab);
	if (ep->enabled) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	switch (bfid->fclass) {
	case FI_CLASS_EQ:
		if (ep->eq)
			ep->eq->refs--;
		ep->eq = container_of(bfid, struct cfi_eq, eq.fid);
		ep->eq->refs++;
		break;
	case FI_CLASS_CQ: {
		struct cfi_cq *cq = container_of(bfid, struct cfi_cq, cq.fid);

		if (!(flags & (FI_TRANSMIT | FI_RECV)) ||
		    (flags & ~(uint64_t)(FI_TRANSMIT | FI_RECV |
					 FI_SELECTIVE_COMPLETION))) {
			ret = -FI_EINVAL;
			break;
		}
		if (flags & FI_TRANSMIT) {
			if (ep->tcq)
				ep->tcq->refs--;
			ep->tcq = cq;
			cq->refs++;
			ep->tflags = flags;
		}
		if (flags & FI_RECV) {
			if (ep->rcq)
				ep->rcq->refs--;
			ep->rcq = cq;
			cq->refs++;
			ep->rflags = flags;
		}
		break;
	}
	case FI_CLASS_CNTR: {
		static const uint64_t kinds[CFI_CNTR_KINDS] = {
			[CFI_CNTR_SEND] = FI_SEND, [CFI_CNTR_RECV] = FI_RECV,
			[CFI_CNTR_READ] = FI_READ, [CFI_CNTR_WRITE] = FI_WRITE,
		};
		struct cfi_cntr *cntr = cfi_cntr_of(bfid);
		int k;

		/* what a peer does to our registrations cannot be counted */
		if (flags & (FI_REMOTE_READ | FI_REMOTE_WRITE)) {
			ret = -FI_ENOSYS;
			break;
		}
		if (!cntr || cntr->fab != ep->fab ||
		    !(flags & (FI_SEND | FI_RECV | FI_READ | FI_WRITE)) ||
		    (flags & ~(uint64_t)(FI_SEND | FI_RECV | FI_READ | FI_WRITE))) {
			ret = -FI_EINVAL;
			break;
		}
		for (k = 0; k < CFI_CNTR_KINDS; k++) {
			if (!(flags & kinds[k]))
				continue;
			if (ep->cntrs[k])
				ep->cntrs[k]->refs--;
			ep->cntrs[k] = cntr;
			cntr->refs++;
		}
		break;
	}
	default:
		ret = -FI_EINVAL;
	}
out:
	cfi_unlock(ep->fab);
	return ret;
}

static int cfi_ep_control(struct fid *fid, int command, void *arg)
{
	struct cfi_ep *ep = container_of(fid, struct cfi_ep, ep.fid);
	int ret = 0;

	(void)arg;
	if (command != FI_ENABLE)
		return -FI_ENOSYS;
	cfi_lock(ep->fab);
	if (!ep->eq)
		ret = -FI_ENOEQ;
	else if (!ep->tcq || !ep->rcq)
		ret = -FI_ENOCQ;
	else
		ep->enabled = true;
	cfi_unlock(ep->fab);
	return ret;
}

static ssize_t cfi_cancel(fid_t fid, void *context)
{
	struct cfi_ep *ep = container_of(fid, struct cfi_ep, ep.fid);
	struct cfi_op **pp, *op, *prev = NULL;
	ssize_t ret = -FI_ENOENT;

	cfi_lock(ep->fab);
	for (pp = &ep->rq.head; (op = *pp); prev = op, pp = &op->next) {
		/* one whose pieces are coming in is no longer the caller's to take */
		if (op->context != context || op->whole)
			continue;
		*pp = op->next;
		if (ep->rq.tail == op)
			ep->rq.tail = prev;
		ep->rq.n--;
		cfi_complete(ep, true, op, 0, FI_ECANCELED, 0);
		cfi_op_put(ep, op);
		ret = 0;
		break;
	}
	cfi_unlock(ep->fab);
	return ret;
}

static ssize_t cfi_rx_size_left(struct fid_ep *fep)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);

	return CFI_QUEUE_SIZE - (ssize_t)ep->rq.n;
}

static ssize_t cfi_tx_size_left(struct fid_ep *fep)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);

	return CFI_QUEUE_SIZE - (ssize_t)ep->sq.n;
}

/* ---- active endpoint: messages ------------------------------------------- */

/*
 * The application's iov, checked: its bytes in *len, or -FI_EINVAL. A
 * sum past CFI_MSG_MAX stops there (the caller says -FI_EMSGSIZE), so
 * no garbage length wraps it.
 */
static int cfi_iov_len(const struct iovec *iov, size_t count, size_t *len)
{
	size_t i, n = 0;

	if (count > CFI_IOV_MAX || (count && !iov))
		return -FI_EINVAL;
	for (i = 0; i < count; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -FI_EINVAL;
		if (n > CFI_MSG_MAX || iov[i].iov_len > CFI_MSG_MAX - n)
			n = CFI_MSG_MAX + 1;
		else
			n += iov[i].iov_len;
	}
	*len = n;
	return 0;
}

static int cfi_fill_iov(struct cfi_op *op, const struct iovec *iov,
			size_t count)
{
	size_t i;
	int ret = cfi_iov_len(iov, count, &op->len);

	if (ret)
		return ret;
	op->iov[0].iov_base = &op->hdr;
	op->iov[0].iov_len = sizeof(op->hdr);
	for (i = 0; i < count; i++)
		op->iov[i + 1] = iov[i];
	op->iovcnt = (int)count + 1;
	return 0;
}

/* An operation for queue q over the application's iov, or why not. */
static ssize_t cfi_op_new(struct cfi_ep *ep, const struct cfi_opq *q,
			  const struct iovec *iov, size_t count,
			  struct cfi_op **opp)
{
	struct cfi_op *op;
	int ret;

	if (q->n >= CFI_QUEUE_SIZE)
		return -FI_EAGAIN;
	op = cfi_op_get(ep);
	if (!op)
		return -FI_ENOMEM;
	ret = cfi_fill_iov(op, iov, count);
	if (ret) {
		cfi_op_put(ep, op);
		return ret;
	}
	*opp = op;
	return 0;
}

/*
 * Post a send: at once if nothing is queued ahead of it and the peer's
 * ring has room, else queued (an injected one copied first).
 */
static ssize_t cfi_post_send(struct cfi_ep *ep, const struct iovec *iov,
			     size_t count, void *context, uint64_t data,
			     uint64_t flags, bool comp)
{
	struct cfi_op *op;
	bool inject = flags & FI_INJECT, tried = false;
	size_t len;
	ssize_t ret;
	int r;

	cfi_lock(ep->fab);
	if (ep->state != CFI_EP_CONNECTED) {
		ret = ep->state == CFI_EP_SHUTDOWN ? -FI_ESHUTDOWN : -FI_ENOTCONN;
		goto out;
	}
	ret = cfi_iov_len(iov, count, &len);
	if (ret)
		goto out;
	if (len > CFI_MSG_MAX) {
		ret = -FI_EMSGSIZE;
		goto out;
	}
	if (inject && len > CFI_INJECT_MAX) {
		ret = -FI_EINVAL;
		goto out;
	}
	if (!ep->sq.head && !ep->aq.head && len <= CFI_SMALL) {
		r = cfi_send_small(ep, iov, count, data, flags);
		if (r != -EAGAIN) {
			if (r) {
				ret = cfi_errno(r);
				cfi_ep_lost(ep, r);
				goto out;
			}
			cfi_complete_with(ep, false, comp, &(struct cfi_comp){
				.context = context,
				.flags = FI_SEND | FI_MSG,
				.len = len,
				.buf = count ? iov[0].iov_base : NULL,
			});
			ret = 0;
			goto out;
		}
		tried = true;	/* no room: queued below, as any other */
	}
	ret = cfi_op_new(ep, &ep->sq, iov, count, &op);
	if (ret)
		goto out;
	op->context = context;
	op->flags = FI_SEND | FI_MSG;
	op->comp = comp;
	op->hdr.magic = CFI_HDR_MAGIC;
	op->hdr.type = CFI_H_DATA;
	if (flags & FI_REMOTE_CQ_DATA) {
		op->hdr.flags = CFI_HF_DATA;
		op->hdr.data = data;
	}
	if (!ep->sq.head && !tried) {
		r = cfi_send_now(ep, op);
		if (r != -EAGAIN) {
			if (r < 0) {
				ret = cfi_errno(r);
				cfi_op_put(ep, op);
				cfi_ep_lost(ep, r);
				goto out;
			}
			cfi_sent(ep, op, r == 1, 0);
			ret = 0;
			goto out;
		}
	}
	if (inject) {
		size_t i, off = 0;
		uint8_t *p = malloc(op->len ? op->len : 1);

		if (!p) {
			ret = -FI_EAGAIN;
			goto put;
		}
		for (i = 1; i < (size_t)op->iovcnt; i++) {
			memcpy(p + off, op->iov[i].iov_base, op->iov[i].iov_len);
			off += op->iov[i].iov_len;
		}
		op->copy = p;
		op->iov[1].iov_base = p;
		op->iov[1].iov_len = op->len;
		op->iovcnt = 2;
	}
	cfi_opq_push(&ep->sq, op);
	ret = 0;
	goto out;
put:
	cfi_op_put(ep, op);
out:
	cfi_unlock(ep->fab);
	return ret;
}

bool cfi_tx_comp(struct cfi_ep *ep, uint64_t flags)
{
	if (!(ep->tflags & FI_SELECTIVE_COMPLETION))
		return true;
	return flags & FI_COMPLETION;
}

static ssize_t cfi_post_recv(struct cfi_ep *ep, const struct iovec *iov,
			     size_t count, void *context, uint64_t flags)
{
	struct cfi_op *op;
	ssize_t ret;

	cfi_lock(ep->fab);
	if (!ep->enabled) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	if (ep->state == CFI_EP_SHUTDOWN) {
		ret = -FI_ESHUTDOWN;
		goto out;
	}
	ret = cfi_op_new(ep, &ep->rq, iov, count, &op);
	if (ret)
		goto out;
	op->context = context;
	op->flags = FI_RECV | FI_MSG;
	op->comp = !(ep->rflags & FI_SELECTIVE_COMPLETION) ||
		   (flags & FI_COMPLETION);
	cfi_opq_push(&ep->rq, op);
	/*
	 * Muted (cfi_before_wait()) for want of a receive, by a sleeper
	 * who will not hear the message that comes for this one: kick it.
	 */
	if (ep->rq.n == 1 && ep->want && !(ep->want & CLANQ_NET_IN))
		cfi_kick(ep->fab);
	if (ep->state == CFI_EP_CONNECTED && ep->rq.n == 1)
		cfi_recv_progress(ep);
out:
	cfi_unlock(ep->fab);
	return ret;
}

static ssize_t cfi_recv(struct fid_ep *fep, void *buf, size_t len, void *desc,
			fi_addr_t src, void *context)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	(void)desc;
	(void)src;
	return cfi_post_recv(ep, &iov, 1, context, FI_COMPLETION);
}

static ssize_t cfi_recvv(struct fid_ep *fep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src, void *context)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);

	(void)desc;
	(void)src;
	return cfi_post_recv(ep, iov, count, context, FI_COMPLETION);
}

static ssize_t cfi_recvmsg(struct fid_ep *fep, const struct fi_msg *msg,
			   uint64_t flags)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);

	if (!msg)
		return -FI_EINVAL;
	if (flags & ~(uint64_t)(FI_COMPLETION | FI_MULTI_RECV * 0 | FI_RECV))
		return -FI_EBADFLAGS;
	return cfi_post_recv(ep, msg->msg_iov, msg->iov_count, msg->context,
			     flags);
}

static ssize_t cfi_send(struct fid_ep *fep, const void *buf, size_t len,
			void *desc, fi_addr_t dest, void *context)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	(void)desc;
	(void)dest;
	return cfi_post_send(ep, &iov, 1, context, 0, 0,
			     cfi_tx_comp(ep, FI_COMPLETION));
}

static ssize_t cfi_sendv(struct fid_ep *fep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest,
			 void *context)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);

	(void)desc;
	(void)dest;
	return cfi_post_send(ep, iov, count, context, 0, 0,
			     cfi_tx_comp(ep, FI_COMPLETION));
}

#define CFI_SENDMSG_FLAGS	(FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA | \
				 FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | \
				 FI_INJECT_COMPLETE | FI_FENCE | FI_MORE | FI_SEND)

static ssize_t cfi_sendmsg(struct fid_ep *fep, const struct fi_msg *msg,
			   uint64_t flags)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);

	if (!msg)
		return -FI_EINVAL;
	if (flags & ~(uint64_t)CFI_SENDMSG_FLAGS)
		return -FI_EBADFLAGS;
	return cfi_post_send(ep, msg->msg_iov, msg->iov_count, msg->context,
			     msg->data, flags, cfi_tx_comp(ep, flags));
}

static ssize_t cfi_inject(struct fid_ep *fep, const void *buf, size_t len,
			  fi_addr_t dest)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	(void)dest;
	return cfi_post_send(ep, &iov, 1, NULL, 0, FI_INJECT, false);
}

static ssize_t cfi_senddata(struct fid_ep *fep, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest,
			    void *context)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	(void)desc;
	(void)dest;
	return cfi_post_send(ep, &iov, 1, context, data, FI_REMOTE_CQ_DATA,
			     cfi_tx_comp(ep, FI_COMPLETION));
}

static ssize_t cfi_injectdata(struct fid_ep *fep, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	(void)dest;
	return cfi_post_send(ep, &iov, 1, NULL, data,
			     FI_INJECT | FI_REMOTE_CQ_DATA, false);
}

static struct fi_ops cfi_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_ep_close,
	.bind = cfi_ep_bind,
	.control = cfi_ep_control,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static struct fi_ops_ep cfi_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cfi_cancel,
	.getopt = cfi_getopt,
	.setopt = cfi_setopt,
	.tx_ctx = (void *)cfi_enosys,
	.rx_ctx = (void *)cfi_enosys,
	.rx_size_left = cfi_rx_size_left,
	.tx_size_left = cfi_tx_size_left,
};

static struct fi_ops_cm cfi_ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = (void *)cfi_enosys,
	.getname = cfi_ep_getname,
	.getpeer = cfi_ep_getpeer,
	.connect = cfi_connect,
	.listen = (void *)cfi_enosys,
	.accept = cfi_accept,
	.reject = (void *)cfi_enosys,
	.shutdown = cfi_shutdown,
	.join = (void *)cfi_enosys,
};

static struct fi_ops_msg cfi_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = cfi_recv,
	.recvv = cfi_recvv,
	.recvmsg = cfi_recvmsg,
	.send = cfi_send,
	.sendv = cfi_sendv,
	.sendmsg = cfi_sendmsg,
	.inject = cfi_inject,
	.senddata = cfi_senddata,
	.injectdata = cfi_injectdata,
};

int cfi_endpoint(struct fid_domain *domain, struct fi_info *info,
		 struct fid_ep **fep, void *context)
{
	struct cfi_domain *d = container_of(domain, struct cfi_domain, dom);
	struct cfi_fabric *fab = d->fab;
	struct cfi_connreq *req = NULL;
	struct cfi_addr dest;
	struct cfi_ep *ep;

	if (!info || !fep)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_MSG &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	if (info->dest_addr &&
	    cfi_addr_get(info->dest_addr, info->dest_addrlen, &dest))
		return -FI_EINVAL;
	if (info->handle) {
		if (info->handle->fclass != FI_CLASS_CONNREQ)
			return -FI_EINVAL;
		req = container_of(info->handle, struct cfi_connreq, fid);
		if (!req->pep || req->pep->fab != fab)
			return -FI_EINVAL;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->info = fi_dupinfo(info);
	if (!ep->info) {
		free(ep);
		return -FI_ENOMEM;
	}
	ep->fab = fab;
	ep->dom = d;
	ep->req = req;
	ep->state = CFI_EP_IDLE;
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &cfi_ep_fi_ops;
	ep->ep.ops = &cfi_ep_ops;
	ep->ep.cm = &cfi_ep_cm_ops;
	ep->ep.msg = &cfi_msg_ops;
	ep->ep.rma = &cfi_rma_ops;
	ep->ep.tagged = (void *)&cfi_tagged_nosys;
	ep->ep.atomic = &cfi_atomic_ops;
	ep->ep.collective = (void *)&cfi_coll_nosys;
	cfi_lock(fab);
	d->refs++;
	ep->next = fab->eps;
	fab->eps = ep;
	cfi_unlock(fab);
	*fep = &ep->ep;
	return 0;
}
