// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire's RDMA writes: one engine chunk into an imported region
 * becomes RDMA WRITEs (the kernel's rdma_rw API, from the source
 * region's pages), a piece per registration of the destination it
 * crosses, followed on the same QP by a WROTE that tells the exporter
 * which bytes changed; the WROTE's completion completes the chunk.
 */
#include <linux/scatterlist.h>
#include <linux/slab.h>
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
					    p->sgt.orig_nents, DMA_TO_DEVICE);
		p->rw_ready = false;
		sg_free_table(&p->sgt);
	}
}

/* The engine learns how the chunk went (clanq_v_done_wq). */
static void clanq_vwrite_done(struct work_struct *work)
{
	struct clanq_vwrite *wr = container_of(work, struct clanq_vwrite, done);

	clanq_engine_write_done(wr->ep, wr->status);
	clanq_kep_put(wr->ep);
	kfree(wr);
}

static void clanq_vwrite_free(struct clanq_vwrite *wr, struct clanq_vconn *conn)
{
	clanq_vwrite_unmap(wr, conn);
	kfree(wr);
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
 * The pieces of a chunk of @w->len bytes at page-space offset @off of
 * @imp: one per registration it crosses, each a table of the source's
 * pages; the send queue entries their WRITEs take in *@credits.
 */
static struct clanq_vwrite *clanq_vwrite_new(struct clanq_vimport *imp,
					     const struct clanq_wire_write *w,
					     u64 off, u32 *credits)
{
	u64 end = off + w->len, pos, stop;
	struct clanq_vwrite_piece *p;
	struct clanq_vwrite *wr;
	unsigned int i, n;
	int err;

	n = div64_u64(end - 1, imp->span) - div64_u64(off, imp->span) + 1;
	wr = kzalloc(struct_size(wr, piece, n), GFP_KERNEL);
	if (!wr)
		return ERR_PTR(-ENOMEM);
	wr->nr_pieces = n;
	INIT_WORK(&wr->done, clanq_vwrite_done);
	INIT_LIST_HEAD(&wr->orphan);
	*credits = 0;
	for (i = 0, pos = off; i < n; i++, pos = stop) {
		p = &wr->piece[i];
		stop = min(end, (div64_u64(pos, imp->span) + 1) * imp->span);
		p->raddr = pos;
		p->rkey = imp->rkeys[div64_u64(pos, imp->span)];
		err = clanq_vwrite_sg(p, w->src, w->src_off + (pos - off), stop - pos);
		if (err)
			goto fail;
		/* rdma_rw's count, at most: a WRITE per max_sge entries */
		*credits += DIV_ROUND_UP(p->sgt.orig_nents, imp->conn->max_sge);
	}
	if (*credits > CLANQ_V_WR_CREDITS) {
		pr_notice_ratelimited("%s: a chunk of %llu bytes takes %u RDMA WRITEs, more than %u: lower clanq's rdma_max_xfer\n",
				      imp->conn->nic->name, w->len, *credits,
				      CLANQ_V_WR_CREDITS);
		err = -EMSGSIZE;
		goto fail;
	}
	return wr;
fail:
	clanq_vwrite_unmap(wr, imp->conn);	/* no rw context yet: tables only */
	kfree(wr);
	return ERR_PTR(err);
}

/*
 * Post @wr's WRITEs and then @send, @b's WROTE, with conn->post held.
 * Takes @wr and @b whatever happens: 0 once posted (the WROTE's
 * completion tells the engine); else -errno, with @b given back and @wr
 * freed, or, if some of its WRITEs went, left for the teardown to free
 * once they are flushed.
 */
static int clanq_vwrite_post(struct clanq_vconn *conn, struct clanq_vimport *imp,
			     struct clanq_kap *ap, struct clanq_kep *ep,
			     struct clanq_vwrite *wr, struct clanq_vbuf *b,
			     struct ib_send_wr *send)
{
	struct ib_send_wr *head = send, *x;
	const struct ib_send_wr *bad;
	struct clanq_vwrite_piece *p;
	unsigned int i;
	int err = -ENXIO;

	lockdep_assert_held(&conn->post);
	if (READ_ONCE(conn->state) != CLANQ_PEER_UP)
		goto unposted;	/* the QP may be gone */
	for (i = wr->nr_pieces; i-- > 0; ) {
		p = &wr->piece[i];
		err = rdma_rw_ctx_init(&p->rw, conn->cm_id->qp, conn->cm_id->port_num,
				       p->sgt.sgl, p->sgt.orig_nents, 0, p->raddr,
				       p->rkey, DMA_TO_DEVICE);
		if (err < 0)
			goto unposted;
		p->rw_ready = true;
		head = rdma_rw_ctx_wrs(&p->rw, conn->cm_id->qp, conn->cm_id->port_num,
				       NULL, head);
	}
	/* unsignaled; should one fail, the connection learns why */
	for (x = head; x != send; x = x->next)
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
	clanq_vwrite_unmap(wr, conn);
	kfree(wr);
	return READ_ONCE(conn->state) == CLANQ_PEER_UP ? err : -ENXIO;

unposted:
	b->write = NULL;
	clanq_vconn_give_back(conn, b);
	clanq_vwrite_unmap(wr, conn);
	kfree(wr);
	return err;
}

/*
 * One chunk to another host's region: RDMA WRITEs from the source pages,
 * a piece per registration it crosses, then the WROTE, all one chain on
 * the connection the import was granted over. The WROTE's completion
 * tells the engine (clanq_vconn_tx_done()).
 */
int clanq_vwrite_chunk(struct clanq_nic *src, const struct clanq_wire_write *w)
{
	struct clanq_kap *ap = w->dst;
	struct clanq_wmsg_rgn msg = {};
	struct clanq_vimport *imp;
	struct clanq_vconn *conn;
	struct clanq_vwrite *wr;
	struct ib_send_wr send;
	struct clanq_vbuf *b;
	struct ib_sge sge;
	u32 credits;
	u64 off;
	int err;

	if (WARN_ON_ONCE(!ap->region->remote))
		return -EINVAL;
	imp = container_of(ap->region, struct clanq_vimport, region);
	conn = imp->conn;
	if (READ_ONCE(imp->region.revoked) || READ_ONCE(ap->closed) ||
	    READ_ONCE(conn->state) != CLANQ_PEER_UP)
		return -ENXIO;
	if (!w->len)
		return 0;
	/* page space of the destination; the engine checked the window */
	off = imp->first + ap->off + w->dst_off;
	wr = clanq_vwrite_new(imp, w, off, &credits);
	if (IS_ERR(wr)) {
		err = PTR_ERR(wr);
		goto failed;
	}
	b = clanq_vconn_take(conn, credits, true);
	if (IS_ERR(b)) {
		clanq_vwrite_unmap(wr, conn);
		kfree(wr);
		err = PTR_ERR(b);
		goto failed;
	}
	msg.id = imp->region.id;
	msg.off = off - imp->first;
	msg.len = w->len;
	clanq_vconn_send_wr(conn, b, clanq_wmsg_put_region(b->data, CLANQ_WMSG_WROTE,
							   src->node, imp->region.remote_node,
							   &msg),
			    &send, &sge);
	mutex_lock(&conn->post);
	err = clanq_vwrite_post(conn, imp, ap, w->ep, wr, b, &send);
	mutex_unlock(&conn->post);
	return err ?: -EINPROGRESS;

failed:
	/* a connection that ended took the import with it */
	return READ_ONCE(conn->state) == CLANQ_PEER_UP ? err : -ENXIO;
}
