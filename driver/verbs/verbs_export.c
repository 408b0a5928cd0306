// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire's exporter: a peer's import of one of this node's
 * regions.
 *
 * An importer asks over its connection (IMPORT, with the key); the
 * exporter checks it as a local import would, holds the region's memory
 * and registers it with fast registration work requests (REG_MR, one
 * memory region per up to the device's max_fast_reg_page_list_len
 * pages), posted on the QP the importer's writes arrive on, ahead of the
 * GRANTs that carry the rkeys. A WROTE after the importer's WRITEs (and
 * atomics) says which bytes changed, so that tripwires fire as on the
 * loop wire.
 *
 * The registrations allow what the export grants, whatever one import
 * asks (one registration serves every import of the region over the
 * connection): remote writes with CLANQ_RIGHT_WRITE, remote reads with
 * CLANQ_RIGHT_READ, and atomics with both when the device can
 * (atomic_cap IB_ATOMIC_HCA or better; the GRANT says so). So the
 * exporter's device enforces the rights: an importer's kernel that asks
 * beyond them is refused there, not only by the importer's own check.
 * Freeing the region deregisters its memory regions before REGION_FREE
 * returns (a write after that fails at the exporter's device, and the
 * importer sees -ENXIO) and tells the importers (REVOKED). On a device
 * whose deregistration does not wait for what it is doing with the
 * memory (siw), the pages stay referenced until the QP is gone, bounded
 * per connection (held_max_mb).
 */
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "verbs.h"

/* @exp's registrations go, and its immediate slot. */
static void clanq_vexport_dereg(struct clanq_vexport *exp)
{
	u16 i;

	if (exp->imm_slot)
		ida_free(&exp->conn->imm_slots, exp->imm_slot);
	exp->imm_slot = 0;
	for (i = 0; i < exp->nr_mrs; i++) {
		if (exp->mrs[i].mr)
			ib_dereg_mr(exp->mrs[i].mr);
		exp->mrs[i].mr = NULL;
	}
}

/* Take (@get) or drop references on the pages of @exp's tables: how many. */
static unsigned long clanq_vexport_pages(struct clanq_vexport *exp, bool get)
{
	struct sg_page_iter it;
	unsigned long n = 0;
	u16 i;

	for (i = 0; i < exp->nr_mrs; i++) {
		if (!exp->mrs[i].sgt.sgl)
			continue;
		for_each_sgtable_page(&exp->mrs[i].sgt, &it, 0) {
			if (get)
				get_page(sg_page_iter_page(&it));
			else
				put_page(sg_page_iter_page(&it));
			n++;
		}
	}
	return n;
}

/*
 * Deregistered (clanq_vexport_dereg()) and, for a device whose
 * deregistration does not fence its accesses, its QP gone: unmapped, and
 * the region's memory (or the pages held) let go.
 */
static void clanq_vexport_free(struct clanq_vexport *exp, struct ib_device *dev)
{
	struct clanq_vmr *m;
	u16 i;

	clanq_vexport_dereg(exp);
	for (i = 0; i < exp->nr_mrs; i++) {
		m = &exp->mrs[i];
		if (m->mapped)
			ib_dma_unmap_sg(dev, m->sgt.sgl, m->sgt.orig_nents,
					DMA_BIDIRECTIONAL);
		m->mapped = false;
	}
	if (exp->held) {
		clanq_vexport_pages(exp, false);
		atomic_long_sub(exp->held, &clanq_v_held_pages);
	}
	for (i = 0; i < exp->nr_mrs; i++)
		sg_free_table(&exp->mrs[i].sgt);
	if (exp->region) {
		clanq_kregion_mem_put(exp->region);
		clanq_kregion_put(exp->region);
	}
	kfree(exp);
}

/* The QP is gone: free what was granted over it, once nobody else is. */
void clanq_vexport_free_all(struct clanq_vconn *conn)
{
	struct clanq_vexport *exp, *next;
	unsigned long flags;
	LIST_HEAD(list);

	for (;;) {
		wait_event(conn->wq, !READ_ONCE(conn->exports_busy));
		spin_lock_irqsave(&conn->lock, flags);
		if (!conn->exports_busy) {
			list_splice_init(&conn->exports, &list);
			/* no device touches them now: the pages of revoked ones */
			list_splice_init(&conn->held, &list);
			conn->nr_held = 0;
			spin_unlock_irqrestore(&conn->lock, flags);
			break;
		}
		spin_unlock_irqrestore(&conn->lock, flags);
	}
	list_for_each_entry_safe(exp, next, &list, node)
		clanq_vexport_free(exp, conn->cm_id->device);
}

/*
 * Once ib_dereg_mr() returns, does @dev no longer touch the memory? rxe
 * waits for the references its requests hold on the MR, hardware fences
 * its DMA in the command that destroys the key. siw does not: a READ
 * response being sent holds its siw_mem, not the pages, and its tx
 * thread goes on copying from them (and a WRITE being placed, into
 * them) after the deregistration returned.
 */
static bool clanq_vexport_dereg_fences(struct ib_device *dev)
{
	return dev->ops.driver_id != RDMA_DRIVER_SIW;
}

/*
 * @exp, revoked (taken off conn->exports, deregistered): let its memory
 * go now if its device is done with it; else hold its pages (references
 * of our own: the region releases its memory and charges as usual, the
 * pages stay until the QP is gone, clanq_vexport_free_all()) and count
 * them. A connection holding more than held_max_mb ends: its teardown
 * gives them back: true if the connection is to end.
 */
static bool clanq_vexport_revoked(struct clanq_vexport *exp,
				  struct clanq_vconn *conn)
{
	struct ib_device *dev = conn->cm_id->device;
	unsigned long max = (unsigned long)READ_ONCE(clanq_v_held_max_mb) <<
			    (20 - PAGE_SHIFT);
	unsigned long n, total;

	if (clanq_vexport_dereg_fences(dev)) {
		clanq_vexport_free(exp, dev);
		return false;
	}
	clanq_vexport_dereg(exp);
	n = clanq_vexport_pages(exp, true);
	atomic_long_add(n, &clanq_v_held_pages);
	exp->held = n;
	clanq_kregion_mem_put(exp->region);
	clanq_kregion_put(exp->region);
	exp->region = NULL;
	spin_lock_irq(&conn->lock);
	list_add_tail(&exp->node, &conn->held);
	conn->nr_held += n;
	total = conn->nr_held;
	spin_unlock_irq(&conn->lock);
	if (total <= max)
		return false;
	pr_notice_ratelimited("%s: %s: peer %u: revoked regions hold %lu KiB until the queue pair goes, over held_max_mb: the connection ends\n",
			      conn->nic->name, clanq_vconn_devname(conn),
			      conn->peer->node, total << (PAGE_SHIFT - 10));
	return true;
}

/* The access of @r's registrations on @dev: what the export grants. */
static int clanq_vexport_access(struct ib_device *dev, u32 rights)
{
	int access = IB_ACCESS_LOCAL_WRITE;

	if (rights & CLANQ_RIGHT_WRITE)
		access |= IB_ACCESS_REMOTE_WRITE;
	if (rights & CLANQ_RIGHT_READ)
		access |= IB_ACCESS_REMOTE_READ;
	if (rights == CLANQ_RIGHTS_ALL && dev->attrs.atomic_cap >= IB_ATOMIC_HCA)
		access |= IB_ACCESS_REMOTE_ATOMIC;
	return access;
}

/*
 * Register @r with @conn's device: its pages in spans of at most the
 * device's fast registration list, each a memory region whose address is
 * the page-space offset of its first byte (wire_msg.h). Not posted yet.
 */
static struct clanq_vexport *clanq_vexport_new(struct clanq_vconn *conn,
					       struct clanq_kregion *r)
{
	struct ib_device *dev = conn->cm_id->device;
	u32 per = min_t(u32, dev->attrs.max_fast_reg_page_list_len,
			CLANQ_V_MR_PAGES);
	u64 span = (u64)per << PAGE_SHIFT, end = r->first + r->len, lo, hi;
	struct clanq_vexport *exp;
	unsigned long page0, pages;
	struct clanq_vmr *m;
	int nents, n, err;
	u16 i;

	if (!per)
		return ERR_PTR(-EOPNOTSUPP);
	if (DIV_ROUND_UP_ULL(end, span) > CLANQ_WMSG_MAX_MRS)
		return ERR_PTR(-E2BIG);
	n = DIV_ROUND_UP_ULL(end, span);
	exp = kzalloc(struct_size(exp, mrs, n), GFP_KERNEL);
	if (!exp)
		return ERR_PTR(-ENOMEM);
	exp->nr_mrs = n;
	exp->span = span;
	exp->conn = conn;
	exp->access = clanq_vexport_access(dev, r->rights);
	if (!clanq_kregion_mem_get(r)) {
		kfree(exp);
		return ERR_PTR(-ENOENT);
	}
	clanq_kregion_get(r);
	exp->region = r;
	/* a slot for writes with immediate; without one, WROTEs do */
	err = ida_alloc_range(&conn->imm_slots, 1, CLANQ_WMSG_IMM_MAX_SLOT,
			      GFP_KERNEL);
	exp->imm_slot = err > 0 ? err : 0;
	for (i = 0; i < n; i++) {
		m = &exp->mrs[i];
		lo = max_t(u64, (u64)i * span, r->first);
		hi = min_t(u64, (u64)(i + 1) * span, end);
		page0 = lo >> PAGE_SHIFT;
		pages = DIV_ROUND_UP_ULL(hi, PAGE_SIZE) - page0;
		err = sg_alloc_table_from_pages(&m->sgt, r->pages + page0, pages,
						offset_in_page(lo), hi - lo,
						GFP_KERNEL);
		if (err)
			goto fail;
		nents = ib_dma_map_sg(dev, m->sgt.sgl, m->sgt.orig_nents,
				      DMA_BIDIRECTIONAL);
		err = -ENOMEM;
		if (!nents)
			goto fail;
		m->mapped = true;
		m->mr = ib_alloc_mr(conn->pd, IB_MR_TYPE_MEM_REG, pages);
		if (IS_ERR(m->mr)) {
			err = PTR_ERR(m->mr);
			m->mr = NULL;
			goto fail;
		}
		err = -EINVAL;
		if (ib_map_mr_sg(m->mr, m->sgt.sgl, nents, NULL, PAGE_SIZE) != nents)
			goto fail;
		/* the same offset in its page as the DMA address it replaces */
		m->mr->iova = lo;
	}
	return exp;
fail:
	clanq_vexport_free(exp, dev);
	return ERR_PTR(err);
}

/* Tell the importer no, with @err (its request is @q). */
static void clanq_vexport_refuse(struct clanq_vconn *conn,
				 const struct clanq_wmsg_rgn *q, int err)
{
	struct clanq_wmsg_rgn no = { .id = q->id, .req = q->req, .err = err };

	pr_notice_ratelimited("%s: %s: peer %u: import of region %u refused: %d\n",
			      conn->nic->name, clanq_vconn_devname(conn),
			      conn->peer->node, q->id, err);
	clanq_vconn_send_region(conn, CLANQ_WMSG_REFUSE, &no, NULL, false);
}

/*
 * The peer asks to write into region @q->id (CQ context, the QP alive):
 * checked as a local import is, registered once per connection, and
 * granted: each registration's REG_MR goes ahead of its GRANT, so the
 * rkey works before the importer can know it.
 */
void clanq_vexport_grant(struct clanq_vconn *conn, const struct clanq_wmsg_rgn *q)
{
	struct clanq_kregion *r = clanq_kregion_lookup(conn->nic, q->id);
	struct clanq_vexport *exp, *fresh = NULL;
	struct clanq_wmsg_rgn g = { .id = q->id, .req = q->req };
	u32 rkeys[CLANQ_WMSG_MAX_MRS];
	struct ib_reg_wr reg;
	unsigned long flags;
	int err = -ENOENT, access = 0;
	u32 slot = 0;
	u16 i, n = 0;

	/* a wrong key, never exported, freed: all the same to a guesser */
	if (!r || !smp_load_acquire(&r->exported) || r->key != q->key ||
	    READ_ONCE(r->revoked))
		goto refuse;
	mutex_lock(&clanq_v_export_mutex);
	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(exp, &conn->exports, node) {
		if (exp->region == r) {
			n = exp->nr_mrs;
			g.span = exp->span;
			access = exp->access;
			slot = exp->imm_slot;
			for (i = 0; i < n; i++)
				rkeys[i] = exp->mrs[i].mr->rkey;
			break;
		}
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (!n) {
		/*
		 * Freed meanwhile? Its revocation ran before we took the
		 * mutex (revoked is set first), or it waits for us and finds
		 * ours on the list.
		 */
		err = -ENOENT;
		if (READ_ONCE(r->revoked))
			goto refuse_unlock;
		fresh = clanq_vexport_new(conn, r);
		if (IS_ERR(fresh)) {
			err = PTR_ERR(fresh);
			goto refuse_unlock;
		}
		spin_lock_irqsave(&conn->lock, flags);
		list_add_tail(&fresh->node, &conn->exports);
		spin_unlock_irqrestore(&conn->lock, flags);
		n = fresh->nr_mrs;
		g.span = fresh->span;
		access = fresh->access;
		slot = fresh->imm_slot;
		for (i = 0; i < n; i++)
			rkeys[i] = fresh->mrs[i].mr->rkey;
	}
	g.len = r->len;
	g.first = r->first;
	g.rights = r->rights;
	g.flags = (access & IB_ACCESS_REMOTE_ATOMIC ? CLANQ_WMSG_GRANT_ATOMIC : 0) |
		  slot << CLANQ_WMSG_GRANT_SLOT_SHIFT;
	g.nr_mrs = n;
	for (i = 0; i < n; i++) {
		g.mr = i;
		g.rkey = rkeys[i];
		if (fresh) {
			reg = (struct ib_reg_wr){
				.wr.opcode	= IB_WR_REG_MR,
				.wr.wr_cqe	= &conn->wr_cqe,
				.mr		= fresh->mrs[i].mr,
				.key		= rkeys[i],
				.access		= fresh->access,
			};
		}
		/* a full queue: the importer's wait for the rest times out */
		if (clanq_vconn_send_region(conn, CLANQ_WMSG_GRANT, &g,
					    fresh ? &reg.wr : NULL, false))
			break;
	}
	mutex_unlock(&clanq_v_export_mutex);
	clanq_kregion_put(r);
	return;
refuse_unlock:
	mutex_unlock(&clanq_v_export_mutex);
refuse:
	clanq_kregion_put(r);
	clanq_vexport_refuse(conn, q, err);
}

/*
 * The peer wrote [off, off + len) of a region we granted it (WRITEs, or
 * an atomic on a word): tripwires.
 */
void clanq_vexport_wrote(struct clanq_vconn *conn, const struct clanq_wmsg_rgn *w)
{
	struct clanq_kregion *r = NULL;
	struct clanq_vexport *exp;
	unsigned long flags;
	int err = -ENOENT;

	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(exp, &conn->exports, node) {
		if (exp->region->id == w->id) {
			r = exp->region;
			clanq_kregion_get(r);
			break;
		}
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (r) {
		err = clanq_rx_written(r, w->off, w->len);
		clanq_kregion_put(r);
	}
	/*
	 * Revoked meanwhile (the WRITE landed before the deregistration, the
	 * WROTE after) is no news; a region never granted fires nothing
	 */
	if (err && err != -ENXIO)
		pr_debug_ratelimited("%s: %s: peer %u: wrote [%llu, +%llu) of region %u: not one it was granted (%d)\n",
				     conn->nic->name, clanq_vconn_devname(conn),
				     conn->peer->node, w->off, w->len, w->id, err);
}

/*
 * A WRITE_WITH_IMM of @len bytes landed: the immediate names the export
 * (its slot on @conn) and the first byte (clanq_wmsg_imm()). Tripwires,
 * as for a WROTE.
 */
void clanq_vexport_wrote_imm(struct clanq_vconn *conn, u32 imm, u32 len)
{
	struct clanq_wmsg_rgn w = { .len = len };
	struct clanq_vexport *exp;
	unsigned long flags;
	u32 slot;

	clanq_wmsg_imm_get(imm, &slot, &w.off);
	w.id = U32_MAX;		/* no region has it: dropped if no slot matches */
	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(exp, &conn->exports, node) {
		if (slot && exp->imm_slot == slot) {
			w.id = exp->region->id;
			break;
		}
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (w.id == U32_MAX || !len) {
		pr_debug_ratelimited("%s: %s: peer %u: a write with immediate %#x, %u bytes: no such export\n",
				     conn->nic->name, clanq_vconn_devname(conn),
				     conn->peer->node, imm, len);
		return;
	}
	clanq_vexport_wrote(conn, &w);
}

/* The next export of @r over any connection, taken off its list; or NULL. */
static struct clanq_vexport *clanq_vexport_take(struct clanq_kregion *r,
						struct clanq_vconn **connp)
{
	struct clanq_vexport *exp, *found = NULL;
	struct clanq_vconn *conn;

	spin_lock_irq(&clanq_v_lock);
	list_for_each_entry(conn, &clanq_v_conns, node) {
		if (conn->active || conn->nic != r->nic)
			continue;
		spin_lock(&conn->lock);
		list_for_each_entry(exp, &conn->exports, node) {
			if (exp->region == r) {
				list_del_init(&exp->node);
				conn->exports_busy++;
				found = exp;
				break;
			}
		}
		spin_unlock(&conn->lock);
		if (found) {
			clanq_vconn_get(conn);
			*connp = conn;
			break;
		}
	}
	spin_unlock_irq(&clanq_v_lock);
	return found;
}

/*
 * Exported region @r is being freed (its owner's ctx->lock held): every
 * registration of it goes (no write lands after, and no READ brings a
 * byte of it: on siw the pages wait for the QP, clanq_vexport_revoked()),
 * then the importer hears REVOKED, if its connection can still carry it.
 */
void clanq_vexport_region_gone(struct clanq_kregion *r)
{
	struct clanq_wmsg_rgn rv = { .id = r->id };
	struct clanq_vexport *exp;
	struct clanq_vconn *conn;
	bool over;

	mutex_lock(&clanq_v_export_mutex);
	while ((exp = clanq_vexport_take(r, &conn))) {
		over = clanq_vexport_revoked(exp, conn);
		spin_lock_irq(&conn->lock);
		conn->exports_busy--;
		spin_unlock_irq(&conn->lock);
		wake_up_all(&conn->wq);
		if (over)
			clanq_vconn_kill(conn, -ENOBUFS);
		else
			clanq_vconn_send_region(conn, CLANQ_WMSG_REVOKED, &rv,
						NULL, false);
		clanq_vconn_put(conn);
	}
	mutex_unlock(&clanq_v_export_mutex);
}
