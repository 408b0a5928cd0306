// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire's RDMA writes: one engine chunk into an imported region
 * becomes RDMA WRITEs (the kernel's rdma_rw API, from the source
 * region's pages), a piece per registration of the destination it
 * crosses, followed on the same QP by a WROTE that tells the exporter
 * which bytes changed; the WROTE's completion completes the chunk.
 *
 * A READ chunk is the same pieces the other way (rdma_rw, DMA_FROM_DEVICE,
 * into the requester's region) with no message after it: its last READ
 * is signaled on the send slot it took (clanq_vconn_take()), as a WROTE
 * would be, so one completion path (clanq_vconn_tx_done()) serves both,
 * and a slot's credits bound what is in flight. An atomic is one
 * IB_WR_ATOMIC_CMP_AND_SWP or _FETCH_AND_ADD into an 8-byte buffer of
 * its own, then a WROTE of its word: the exporter cannot see an atomic,
 * so it learns of it as of a write and fires the word's tripwires (also
 * for a compare-and-swap that did not swap: only the importer knows).
 * Send queue completions come in order, so when the WROTE's completes
 * the old value is in the buffer.
 *
 * Write with immediate. A write chunk that is one WRITE (one
 * registration of the exporter's, at most max_sge pages: every chunk of
 * a region under one registration span, so every small write), into a
 * region whose export has an immediate slot, starting in its first 4 MiB
 * (wire_msg.h), goes as one IB_WR_RDMA_WRITE_WITH_IMM instead of
 * WRITE + WROTE: the exporter's receive completion names the export and
 * the first byte, its byte_len the length, and it fires the tripwires
 * as for a WROTE. One message instead of two, and the importer's chunk
 * completes on the WRITE's own completion. Everything else (iWARP, which
 * has no immediate; chunks of several WRITEs; offsets past 4 MiB; more
 * than 1023 exports on a connection) keeps the WROTE.
 */
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/sizes.h>
#include <linux/workqueue.h>

#include "verbs.h"

/* Destroy @wr's rdma_rw contexts (the QP still exists) and source lists. */
void clanq_vwrite_unmap(struct clanq_vwrite *wr, struct clanq_vconn *conn)
{
	struct clanq_vwrite_piece *p;
	unsigned int i;

	for (i = 0; i < wr->nr_pieces; i++) {
		p = &wr->piece[i];
		if (p->rw_ready)
			rdma_rw_ctx_destroy(&p->rw, conn->cm_id->qp,
					    conn->cm_id->port_num, p->sgt.sgl,
					    p->sgt.orig_nents, wr->dir);
		p->rw_ready = false;
		sg_free_table(&p->sgt);
	}
	if (wr->old_mapped)
		ib_dma_unmap_single(conn->cm_id->device, wr->old_dma,
				    sizeof(*wr->old), DMA_FROM_DEVICE);
	wr->old_mapped = false;
}

/* @wr's memory, once unmapped. */
void clanq_vwrite_release(struct clanq_vwrite *wr)
{
	kfree(wr->old);
	kfree(wr);
}

/* The engine learns how the chunk went (clanq_v_done_wq). */
static void clanq_vwrite_done(struct work_struct *work)
{
	struct clanq_vwrite *wr = container_of(work, struct clanq_vwrite, done);

	clanq_engine_write_done(wr->ep, wr->chunk, wr->status);
	clanq_kep_put(wr->ep);
	clanq_vwrite_release(wr);
}

static void clanq_vwrite_free(struct clanq_vwrite *wr, struct clanq_vconn *conn)
{
	clanq_vwrite_unmap(wr, conn);
	clanq_vwrite_release(wr);
}

/* Chunks whose post failed half way: their WRs are flushed now. */
void clanq_vwrite_free_orphans(struct clanq_vconn *conn)
{
	struct clanq_vwrite *wr, *next;

	/* the engine was told when their post failed */
	list_for_each_entry_safe(wr, next, &conn->orphans, orphan) {
		list_del(&wr->orphan);
		clanq_vwrite_free(wr, conn);
	}
}

/* Page-space bytes [pos, pos + len) of @src's, for one rdma_rw context. */
static int clanq_vwrite_sg(struct clanq_vwrite_piece *p, struct clanq_kregion *src,
			   u64 src_off, u64 len)
{
	u64 at = src->first + src_off;
	unsigned long page0 = at >> PAGE_SHIFT;
	unsigned int pages = DIV_ROUND_UP_ULL(offset_in_page(at) + len, PAGE_SIZE);

	return sg_alloc_table_from_pages(&p->sgt, src->pages + page0, pages,
					 offset_in_page(at), len, GFP_KERNEL);
}

/*
 * The send queue entries rdma_rw may take for @nents entries of one
 * piece, at most: a WRITE per max_sge of them; a READ per entry (its
 * max_sge is the device's max_sge_rd), and on iWARP, where a READ's sink
 * must be registered, a REG_MR and a LOCAL_INV beside it.
 */
static u32 clanq_vwrite_credits(struct clanq_vconn *conn,
				enum dma_data_direction dir, u32 nents)
{
	if (dir == DMA_TO_DEVICE)
		return DIV_ROUND_UP(nents, conn->max_sge);
	if (rdma_protocol_iwarp(conn->cm_id->device, conn->cm_id->port_num))
		return 3 * nents;
	return nents;
}

/*
 * Where the piece of a chunk that starts at page-space offset @pos ends
 * (@end: the chunk's): at the next registration of the exporter's; and
 * a short READ over iWARP at the next 4 KiB (a page of the exporter's,
 * or a fraction of one): siw copies a READ response of at most 32 bytes
 * as if it were in one page (CLANQ_V_IW_SHORT_READ), so one that
 * crossed a page would bring bytes from beside it.
 */
static u64 clanq_vwrite_stop(const struct clanq_vimport *imp,
			     enum dma_data_direction dir, u64 pos, u64 end)
{
	u64 stop = min(end, (div64_u64(pos, imp->span) + 1) * imp->span);

	if (dir == DMA_FROM_DEVICE && stop - pos <= CLANQ_V_IW_SHORT_READ &&
	    rdma_protocol_iwarp(imp->conn->cm_id->device,
				imp->conn->cm_id->port_num))
		stop = min(stop, round_down(pos, SZ_4K) + SZ_4K);
	return stop;
}

/*
 * The pieces of a chunk of @w->len bytes at page-space offset @off of
 * @imp: one per registration it crosses (clanq_vwrite_stop()), each a
 * table of the local region's pages (@dir: written from, or read into);
 * the send queue entries they take in *@credits. @n 0: an atomic, no
 * pieces.
 */
static struct clanq_vwrite *clanq_vwrite_new(struct clanq_vimport *imp,
					     const struct clanq_wire_write *w,
					     u64 off, enum dma_data_direction dir,
					     u32 *credits)
{
	u64 end = off + w->len, pos, stop;
	struct clanq_vwrite_piece *p;
	struct clanq_vwrite *wr;
	unsigned int i, n = 0;
	int err;

	if (w->op == CLANQ_RDMA_OP_WRITE || w->op == CLANQ_RDMA_OP_READ)
		for (pos = off; pos < end; n++)
			pos = clanq_vwrite_stop(imp, dir, pos, end);
	wr = kzalloc(struct_size(wr, piece, n), GFP_KERNEL);
	if (!wr)
		return ERR_PTR(-ENOMEM);
	wr->nr_pieces = n;
	wr->dir = dir;
	INIT_WORK(&wr->done, clanq_vwrite_done);
	INIT_LIST_HEAD(&wr->orphan);
	*credits = 0;
	for (i = 0, pos = off; i < n; i++, pos = stop) {
		p = &wr->piece[i];
		stop = clanq_vwrite_stop(imp, dir, pos, end);
		p->raddr = pos;
		p->rkey = imp->rkeys[div64_u64(pos, imp->span)];
		err = clanq_vwrite_sg(p, w->src, w->src_off + (pos - off), stop - pos);
		if (err)
			goto fail;
		/* rdma_rw's count, at most */
		*credits += clanq_vwrite_credits(imp->conn, dir, p->sgt.orig_nents);
	}
	if (*credits > CLANQ_V_WR_CREDITS) {
		pr_notice_ratelimited("%s: a chunk of %llu bytes takes %u RDMA work requests, more than %u: lower clanq's rdma_max_xfer\n",
				      imp->conn->nic->name, w->len, *credits,
				      CLANQ_V_WR_CREDITS);
		err = -EMSGSIZE;
		goto fail;
	}
	return wr;
fail:
	clanq_vwrite_unmap(wr, imp->conn);	/* no rw context yet: tables only */
	clanq_vwrite_release(wr);
	return ERR_PTR(err);
}

/* @err for a chunk; a connection that ended took the import with it. */
static int clanq_vwrite_err(const struct clanq_vconn *conn, int err)
{
	return READ_ONCE(conn->state) == CLANQ_PEER_UP ? err : -ENXIO;
}

/*
 * Post @wr's WRITEs (or its atomic) and then @send, @b's WROTE, with
 * conn->post held; or, @send NULL, @wr's READs, the last signaled on
 * @b's completion. Takes @wr and @b whatever happens: 0 once posted (the
 * completion tells the engine); else -errno, with @b given back and @wr
 * freed, or, if some of its work requests went, left for the teardown
 * to free once they are flushed.
 */
static int clanq_vwrite_post(struct clanq_vconn *conn, struct clanq_vimport *imp,
			     struct clanq_kap *ap, struct clanq_kep *ep,
			     struct clanq_vwrite *wr, struct clanq_vbuf *b,
			     struct ib_send_wr *send)
{
	struct ib_send_wr *head = send, *x;
	const struct ib_send_wr *bad;
	struct clanq_vwrite_piece *p;
	unsigned int i, count = 0;
	int err = -ENXIO;

	lockdep_assert_held(&conn->post);
	if (READ_ONCE(conn->state) != CLANQ_PEER_UP)
		goto unposted;	/* the QP may be gone */
	b->cqe.done = clanq_vconn_tx_done;
	for (i = wr->nr_pieces; i-- > 0; ) {
		p = &wr->piece[i];
		err = rdma_rw_ctx_init(&p->rw, conn->cm_id->qp, conn->cm_id->port_num,
				       p->sgt.sgl, p->sgt.orig_nents, 0, p->raddr,
				       p->rkey, wr->dir);
		if (err < 0)
			goto unposted;
		count += err;
		p->rw_ready = true;
		/* a READ chunk: its very last work request completes it */
		head = rdma_rw_ctx_wrs(&p->rw, conn->cm_id->qp, conn->cm_id->port_num,
				       !send && !head ? &b->cqe : NULL, head);
	}
	if (wr->old) {
		wr->atomic.wr.next = head;
		head = &wr->atomic.wr;
		count++;
	}
	/* what rdma_rw made fits what was taken (a READ also has the slot's) */
	err = -EMSGSIZE;
	if (WARN_ON_ONCE(!head || count > b->credits + !send))
		goto unposted;
	/*
	 * One WRITE, and the exporter gave a slot: it says what it wrote
	 * itself (WRITE_WITH_IMM, taking the peer's receive the WROTE would
	 * have), on the send slot's completion; the WROTE is not sent.
	 */
	if (wr->imm && send && count == 1 && head->next == send &&
	    head->opcode == IB_WR_RDMA_WRITE) {
		head->opcode = IB_WR_RDMA_WRITE_WITH_IMM;
		head->ex.imm_data = cpu_to_be32(wr->imm);
		head->send_flags |= IB_SEND_SIGNALED;
		head->wr_cqe = &b->cqe;
		head->next = NULL;
		send = NULL;
	}
	/* unsignaled; should one fail, the connection learns why */
	for (x = head; x && x != send; x = x->next)
		if (x->wr_cqe != &b->cqe)
			x->wr_cqe = &conn->wr_cqe;
	/* a revocation waits for us; one before us is seen */
	down_read(&imp->region.revoke_sem);
	if (imp->region.revoked || ap->closed) {
		up_read(&imp->region.revoke_sem);
		err = -ENXIO;
		goto unposted;
	}
	clanq_kep_get(ep);
	wr->ep = ep;
	b->write = wr;
	err = clanq_vconn_post_locked(conn, b, head, &bad);
	up_read(&imp->region.revoke_sem);
	if (!err)
		return 0;
	/* clanq_vconn_post_locked() gave @b back */
	clanq_kep_put(wr->ep);
	wr->ep = NULL;
	if (bad != head) {
		/* some WRITEs went: freed once flushed, by the teardown */
		spin_lock_irq(&conn->lock);
		list_add_tail(&wr->orphan, &conn->orphans);
		spin_unlock_irq(&conn->lock);
		return -ENXIO;
	}
	clanq_vwrite_free(wr, conn);
	return clanq_vwrite_err(conn, err);

unposted:
	b->write = NULL;
	clanq_vconn_give_back(conn, b);
	clanq_vwrite_free(wr, conn);
	return err;
}

/* The import behind @w's aperture, if it may still be used. */
static struct clanq_vimport *clanq_vwrite_import(const struct clanq_wire_write *w)
{
	struct clanq_kap *ap = w->dst;
	struct clanq_vimport *imp;

	if (WARN_ON_ONCE(!ap->region->remote))
		return ERR_PTR(-EINVAL);
	imp = container_of(ap->region, struct clanq_vimport, region);
	if (READ_ONCE(imp->region.revoked) || READ_ONCE(ap->closed) ||
	    READ_ONCE(imp->conn->state) != CLANQ_PEER_UP)
		return ERR_PTR(-ENXIO);
	return imp;
}

/*
 * Post @wr (its fields say what: clanq_vwrite_go()) on @b, a send slot of
 * its connection: its WRITEs with the WROTE after them, or a READ chunk
 * alone. Takes @wr and @b: 0 once posted, else -errno with both gone.
 */
static int clanq_vwrite_send(struct clanq_vwrite *wr, struct clanq_vbuf *b)
{
	struct clanq_vimport *imp = wr->imp;
	struct clanq_vconn *conn = imp->conn;
	struct clanq_wmsg_rgn msg = {};
	struct ib_send_wr send;
	struct ib_sge sge;
	int err;

	mutex_lock(&conn->post);
	/* up, or the PD may be gone: as clanq_vconn_post() */
	if (wr->wrote && READ_ONCE(conn->state) == CLANQ_PEER_UP) {
		msg.id = imp->region.id;
		msg.off = wr->off - imp->first;
		msg.len = wr->len;
		clanq_vconn_send_wr(conn, b,
				    clanq_wmsg_put_region(b->data, CLANQ_WMSG_WROTE,
							  wr->src_node,
							  imp->region.remote_node,
							  &msg),
				    &send, &sge);
	}
	err = clanq_vwrite_post(conn, imp, wr->ap, wr->waiter, wr, b,
				wr->wrote ? &send : NULL);
	mutex_unlock(&conn->post);
	return err;
}

/* Room on @conn for @credits entries and a slot? conn->lock held. */
static bool clanq_vwrite_room(const struct clanq_vconn *conn, u32 credits)
{
	return conn->nr_tx_free && conn->nr_wr_free >= credits;
}

/*
 * Post a chunk on @imp's connection: with a WROTE of [@off, + @len) of
 * the region after it (@wrote), or, a READ, alone. -EINPROGRESS once
 * posted or waiting; the engine hears how it went from the completion.
 *
 * The engine does not wait for a send slot: it serves every queue of
 * the NIC, and a peer that stops acknowledging would hold them all (up
 * to connect_ms per chunk). A chunk that finds no slot, or others
 * waiting before it, waits on conn->waiting, its queue parked as for a
 * chunk in flight, and clanq_vwrite_retry() posts it when a slot comes
 * back, or ends the connection when the peer has acknowledged nothing
 * for ack_ms (connect_ms, if ack_ms is 0).
 */
static int clanq_vwrite_go(struct clanq_nic *src, const struct clanq_wire_write *w,
			   struct clanq_vimport *imp, struct clanq_vwrite *wr,
			   u32 credits, bool wrote, u64 off, u64 len)
{
	struct clanq_vconn *conn = imp->conn;
	struct clanq_vbuf *b = ERR_PTR(-ENOBUFS);
	int err;

	wr->imp = imp;
	wr->ap = w->dst;
	wr->chunk = w->chunk;
	wr->src_node = src->node;
	wr->credits = credits;
	wr->wrote = wrote;
	wr->off = off;
	wr->len = len;
	clanq_kep_get(w->ep);
	wr->waiter = w->ep;

	spin_lock_irq(&conn->lock);
	if (list_empty(&conn->waiting) && clanq_vwrite_room(conn, credits)) {
		spin_unlock_irq(&conn->lock);
		b = clanq_vconn_take(conn, credits, false);
		spin_lock_irq(&conn->lock);
	}
	/* no slot (an OOB send may have taken the last): behind the others */
	if (PTR_ERR_OR_ZERO(b) == -ENOBUFS && conn->state == CLANQ_PEER_UP) {
		wr->since = jiffies;
		list_add_tail(&wr->waiting, &conn->waiting);
		/* a slot freed since is a retry at once */
		clanq_vwrite_retry_queue(conn, clanq_vwrite_room(conn, credits));
		spin_unlock_irq(&conn->lock);
		return -EINPROGRESS;
	}
	spin_unlock_irq(&conn->lock);
	if (IS_ERR(b)) {
		err = clanq_vwrite_err(conn, PTR_ERR(b));
		clanq_kep_put(wr->waiter);
		clanq_vwrite_free(wr, conn);
		return err;
	}
	err = clanq_vwrite_send(wr, b);
	clanq_kep_put(w->ep);	/* the post took its own, or failed */
	return err ?: -EINPROGRESS;
}

/*
 * Run clanq_vwrite_retry() now (@now), or look again in a while (a
 * pending look stays as it is). With conn->lock held and the connection
 * up: the teardown cancels the work after it marked the connection
 * down under that lock, so none is queued behind its back.
 */
void clanq_vwrite_retry_queue(struct clanq_vconn *conn, bool now)
{
	lockdep_assert_held(&conn->lock);
	if (now)
		mod_delayed_work(clanq_v_done_wq, &conn->retry, 0);
	else
		queue_delayed_work(clanq_v_done_wq, &conn->retry,
				   msecs_to_jiffies(CLANQ_V_RETRY_MS));
}

/*
 * The engine hears that a waiting chunk failed (@status), from the done
 * work as for a chunk that was posted: never from under conn->lock or a
 * teardown.
 */
static void clanq_vwrite_waited_in_vain(struct clanq_vwrite *wr,
					struct clanq_vconn *conn, int status)
{
	clanq_vwrite_unmap(wr, conn);	/* no rw context yet: tables only */
	wr->ep = wr->waiter;
	wr->waiter = NULL;
	wr->status = status;
	queue_work(clanq_v_done_wq, &wr->done);
}

/* Every chunk still waiting: the connection ended (its teardown). */
void clanq_vwrite_fail_waiting(struct clanq_vconn *conn)
{
	struct clanq_vwrite *wr, *next;
	LIST_HEAD(failed);
	int status;

	spin_lock_irq(&conn->lock);
	list_splice_init(&conn->waiting, &failed);
	status = conn->error == -ETIMEDOUT ? -ETIMEDOUT : -ENXIO;
	spin_unlock_irq(&conn->lock);
	list_for_each_entry_safe(wr, next, &failed, waiting) {
		list_del_init(&wr->waiting);
		clanq_vwrite_waited_in_vain(wr, conn, status);
	}
}

/*
 * Post the waiting chunks in order while slots last (clanq_v_done_wq,
 * queued by clanq_vconn_give_back() and clanq_vwrite_go()); with none
 * left, look again later, and end a connection whose peer has stopped
 * acknowledging: its teardown fails the chunks (-ETIMEDOUT).
 */
void clanq_vwrite_retry(struct work_struct *work)
{
	struct clanq_vconn *conn = container_of(to_delayed_work(work),
						struct clanq_vconn, retry);
	unsigned int connect_ms = READ_ONCE(clanq_v_connect_ms);
	struct clanq_vwrite *wr;
	struct clanq_kep *ep;
	struct clanq_vbuf *b;
	bool stalled;
	u32 chunk;
	int err;

	for (;;) {
		spin_lock_irq(&conn->lock);
		wr = list_first_entry_or_null(&conn->waiting, struct clanq_vwrite,
					      waiting);
		if (!wr || conn->state != CLANQ_PEER_UP) {
			/* none, or the teardown fails them */
			spin_unlock_irq(&conn->lock);
			return;
		}
		if (!clanq_vwrite_room(conn, wr->credits)) {
			stalled = clanq_vconn_stalled(conn) ||
				  (!READ_ONCE(clanq_v_ack_ms) &&
				   time_after(jiffies, wr->since +
					      msecs_to_jiffies(connect_ms)));
			if (!stalled)
				clanq_vwrite_retry_queue(conn, false);
			spin_unlock_irq(&conn->lock);
			if (stalled)
				clanq_vconn_kill(conn, -ETIMEDOUT);
			return;
		}
		list_del_init(&wr->waiting);
		spin_unlock_irq(&conn->lock);
		b = clanq_vconn_take(conn, wr->credits, false);
		if (IS_ERR(b)) {
			err = PTR_ERR(b);
			if (err == -ENOBUFS) {
				/* an OOB send took it: first in line again */
				spin_lock_irq(&conn->lock);
				list_add(&wr->waiting, &conn->waiting);
				spin_unlock_irq(&conn->lock);
				continue;
			}
			clanq_vwrite_waited_in_vain(wr, conn, clanq_vwrite_err(conn, err));
			continue;
		}
		ep = wr->waiter;
		chunk = wr->chunk;
		err = clanq_vwrite_send(wr, b);
		/* failed, @wr is gone: the engine hears it from us */
		if (err)
			clanq_engine_write_done(ep, chunk, err);
		clanq_kep_put(ep);	/* the post took its own */
	}
}

/* Page-space offset of @w's first byte at the exporter. */
static u64 clanq_vwrite_off(const struct clanq_vimport *imp,
			    const struct clanq_wire_write *w)
{
	/* the engine checked the window */
	return imp->first + w->dst->off + w->dst_off;
}

/*
 * What a WRITE or READ chunk starts with: its import (*@impp), the
 * page-space offset of its first byte (*@off) and its pieces, with the
 * credits they take; NULL for a chunk of no bytes, or an ERR_PTR.
 */
static struct clanq_vwrite *clanq_vwrite_begin(const struct clanq_wire_write *w,
					       enum dma_data_direction dir,
					       struct clanq_vimport **impp,
					       u64 *off, u32 *credits)
{
	struct clanq_vimport *imp = clanq_vwrite_import(w);
	struct clanq_vwrite *wr;

	if (IS_ERR(imp))
		return ERR_CAST(imp);
	if (!w->len)
		return NULL;
	*impp = imp;
	*off = clanq_vwrite_off(imp, w);
	wr = clanq_vwrite_new(imp, w, *off, dir, credits);
	return IS_ERR(wr) ? ERR_PTR(clanq_vwrite_err(imp->conn, PTR_ERR(wr))) : wr;
}

/*
 * One chunk to another host's region: RDMA WRITEs from the source pages,
 * a piece per registration it crosses, then the WROTE, all one chain on
 * the connection the import was granted over. The WROTE's completion
 * tells the engine (clanq_vconn_tx_done()).
 */
int clanq_vwrite_chunk(struct clanq_nic *src, const struct clanq_wire_write *w)
{
	struct clanq_vimport *imp;
	struct clanq_vwrite *wr;
	u32 credits;
	u64 off;

	wr = clanq_vwrite_begin(w, DMA_TO_DEVICE, &imp, &off, &credits);
	if (IS_ERR_OR_NULL(wr))
		return PTR_ERR_OR_ZERO(wr);
	/* a slot, a first byte the immediate can name: no WROTE (if one WRITE) */
	if (imp->imm_slot && imp->conn->imm && READ_ONCE(clanq_v_write_imm) &&
	    off - imp->first < CLANQ_WMSG_IMM_OFF_LIMIT)
		wr->imm = clanq_wmsg_imm(imp->imm_slot, off - imp->first);
	return clanq_vwrite_go(src, w, imp, wr, credits, true, off, w->len);
}

/*
 * One chunk of a READ from another host's region into w->src: RDMA
 * READs, a piece per registration of the exporter's it crosses, the last
 * signaled. The exporter's registrations allow reads only if its export
 * grants CLANQ_RIGHT_READ (verbs_export.c): its device refuses the rest.
 */
int clanq_vread_chunk(struct clanq_nic *src, const struct clanq_wire_write *w)
{
	struct clanq_vimport *imp;
	struct clanq_vwrite *wr;
	u32 credits;
	u64 off;

	wr = clanq_vwrite_begin(w, DMA_FROM_DEVICE, &imp, &off, &credits);
	if (IS_ERR_OR_NULL(wr))
		return PTR_ERR_OR_ZERO(wr);
	return clanq_vwrite_go(src, w, imp, wr, credits, false, off, 0);
}

/*
 * An atomic on another host's word: IB_WR_ATOMIC_CMP_AND_SWP or
 * _FETCH_AND_ADD into a buffer of the chunk's own, then a WROTE of the
 * word. The import was refused unless both devices can
 * (clanq_vimport_new(), CLANQ_AP_ATOMIC); a device that cannot still
 * refuses the work request, and the chunk fails with the connection.
 */
int clanq_vatomic(struct clanq_nic *src, const struct clanq_wire_write *w)
{
	struct clanq_vimport *imp = clanq_vwrite_import(w);
	struct ib_device *dev;
	struct clanq_vwrite *wr;
	u32 credits;
	u64 off;

	if (IS_ERR(imp))
		return PTR_ERR(imp);
	off = clanq_vwrite_off(imp, w);
	/* the word in the exporter's memory, as IB atomics want it */
	if (!IS_ALIGNED(off, CLANQ_RDMA_ATOMIC_LEN) ||
	    w->len != CLANQ_RDMA_ATOMIC_LEN)
		return -EINVAL;
	wr = clanq_vwrite_new(imp, w, off, DMA_FROM_DEVICE, &credits);
	if (IS_ERR(wr))
		return PTR_ERR(wr);
	dev = imp->conn->cm_id->device;
	wr->old = kzalloc(sizeof(*wr->old), GFP_KERNEL);
	if (!wr->old) {
		clanq_vwrite_release(wr);
		return -ENOMEM;
	}
	wr->old_dma = ib_dma_map_single(dev, wr->old, sizeof(*wr->old),
					DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(dev, wr->old_dma)) {
		clanq_vwrite_release(wr);
		return -ENOMEM;
	}
	wr->old_mapped = true;
	wr->result = w->result;
	wr->old_sge = (struct ib_sge){
		.addr = wr->old_dma,
		.length = sizeof(*wr->old),
		.lkey = imp->conn->pd->local_dma_lkey,
	};
	wr->atomic = (struct ib_atomic_wr){
		.wr.opcode = w->op == CLANQ_RDMA_OP_CAS ?
			     IB_WR_ATOMIC_CMP_AND_SWP : IB_WR_ATOMIC_FETCH_AND_ADD,
		.wr.sg_list = &wr->old_sge,
		.wr.num_sge = 1,
		.remote_addr = off,
		.compare_add = w->operand[0],
		.swap = w->operand[1],
		.rkey = imp->rkeys[div64_u64(off, imp->span)],
	};
	return clanq_vwrite_go(src, w, imp, wr, 1, true, off,
			       CLANQ_RDMA_ATOMIC_LEN);
}
