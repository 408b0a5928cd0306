// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire (clanq_verbs.ko): soft NICs on different hosts, over the
 * kernel's RDMA core, as NVMe-oF, RDS and NFS/RDMA ride on it. We write
 * no transport: a peer node is reached through the in-kernel RDMA CM, on
 * an RC queue pair, on whatever RDMA device the NIC is bound to: a real
 * RDMA NIC, or rdma_rxe (RoCE over any Ethernet) or siw (iWARP over TCP).
 *
 * Connections. A NIC connects to a peer node on first use and keeps one
 * RC QP to it ("active"); the peer accepts it ("passive") and answers on
 * it only what concerns the messages it carried (an OOB message that
 * found no endpoint comes back). Each direction of traffic thus has its
 * own QP and there is no race between two hosts connecting to each
 * other at once. The connection request carries a hello (wire_msg.h):
 * the passive side accepts only a node the NIC asked for has as a peer,
 * from that peer's address, on the device the NIC is bound to.
 *
 * OOB messages are SENDs into receives posted ahead (CLANQ_V_SLOTS of
 * each per connection); every message is decoded and checked
 * (wire_msg.h) before the shared receive path, clanq_rx_oob(), sees it,
 * and its source node is the connection's, whatever it says.
 *
 * Failures. A send or receive that completes with an error, a
 * disconnect, a rejected or unanswered request, or the device going
 * away ends the connection: its state goes DOWN with the error (what
 * clanqctl and PEER_LIST show), waiting senders are woken with it, and
 * a work item tears down the QP, CQ, PD and CM id, in that order (never
 * in the CM's handler, which cannot destroy its own id). The next send
 * to the peer makes a new connection. Sends already posted when a
 * connection fails are lost and counted (send_errors), as a NIC would.
 *
 * Regions. An importer asks the exporter over its connection (IMPORT,
 * with the key); the exporter checks it as a local import would, holds
 * the region's memory and registers it with fast registration work
 * requests (REG_MR, one memory region per up to the device's
 * max_fast_reg_page_list_len pages), posted on the QP the importer's
 * writes arrive on, ahead of the GRANTs that carry the rkeys. The
 * importer's aperture then holds a remote region
 * (clanq_kregion_remote_init()) that cannot be mapped: the engine's
 * chunks become RDMA WRITEs (the kernel's rdma_rw API, from the source
 * region's pages) followed, on the same QP, by a WROTE that tells the
 * exporter which bytes changed, so that its tripwires fire as on the
 * loop wire; the WROTE's completion completes the chunk. Freeing the
 * region deregisters its memory regions before REGION_FREE returns (a
 * write after that fails at the exporter's device, and the importer sees
 * -ENXIO) and tells the importers (REVOKED). An import lives as long as
 * the connection it was granted over: when that ends, it is revoked.
 *
 * Locking: clanq_v_lock (a spinlock) guards peer->conn and the list of
 * connections; conn->lock its state and free send slots; conn->post
 * (a mutex: siw's post_send sleeps) orders posting against teardown;
 * conn->cm_mutex orders the CM handler's setup against teardown. All
 * CM ids live in init_net.
 */
#include <linux/in.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

#include "clanq_drv.h"
#include "wire_msg.h"

MODULE_IMPORT_NS(CLANQ_WIRE);

#define CLANQ_V_SLOTS		128	/* sends, and receives, per connection */
/* send queue entries beside the SENDs: RDMA WRITEs, REG_MRs */
#define CLANQ_V_WR_CREDITS	256
#define CLANQ_V_MAX_SGE		32
#define CLANQ_V_MR_PAGES	512	/* pages per registration, at most */
#define CLANQ_V_RESOLVE_MS	2000
#define CLANQ_V_ACK_TIMEOUT	14	/* 4.096 us << 14: 67 ms per retry */

static unsigned int connect_ms = 5000;
module_param(connect_ms, uint, 0644);
MODULE_PARM_DESC(connect_ms, "How long a send waits for a connection to a peer to be made (milliseconds; default 5000)");

static unsigned int ack_ms = 3000;
module_param(ack_ms, uint, 0644);
MODULE_PARM_DESC(ack_ms, "How long sends may wait with not one of them acknowledged before the peer is taken for dead, checked at the next send; the provider's own retries decide first where they can (rxe restarts its retry timer at every send, so a steady sender would never see them run out) (milliseconds, 0: never; default 3000)");

struct clanq_vwrite;

struct clanq_vbuf {
	struct ib_cqe cqe;
	struct clanq_vconn *conn;
	void *data;
	u64 dma;
	u32 idx;
	/* a send: the entries posted ahead of it, given back with it */
	u32 credits;
	struct clanq_vwrite *write;	/* the chunk its WROTE ends */
};

/*
 * One chunk of an RDMA write on its way (the importer's): a piece per
 * registration of the destination it crosses, each an rdma_rw context
 * over the source region's pages.
 */
struct clanq_vwrite_piece {
	struct rdma_rw_ctx rw;
	struct sg_table sgt;
	bool rw_ready;
	u64 raddr;	/* page-space offset at the exporter */
	u32 rkey;
};

struct clanq_vwrite {
	struct clanq_kep *ep;		/* referenced until the engine is told */
	int status;
	struct work_struct done;	/* tells the engine (clanq_v_done_wq) */
	struct list_head orphan;	/* conn->orphans: half posted */
	unsigned int nr_pieces;
	struct clanq_vwrite_piece piece[] __counted_by(nr_pieces);
};

/*
 * A region of a peer's node imported here: what the aperture holds, and
 * where its bytes are on the exporter's device.
 */
struct clanq_vimport {
	struct clanq_kregion region;
	struct clanq_vconn *conn;	/* active, referenced: granted over it */
	struct list_head node;		/* conn->imports, under conn->lock */
	bool revoked;			/* under conn->lock */
	u64 span;
	u32 first;
	u16 nr_mrs;
	u32 rkeys[] __counted_by(nr_mrs);
};

/* An import asked for, its GRANTs (or REFUSE) coming in. */
struct clanq_vpending {
	struct list_head node;		/* conn->pending, under conn->lock */
	u32 req, id;
	struct completion done;
	bool settled;
	int err;
	u16 got;
	struct clanq_wmsg_rgn grant;	/* the first GRANT's geometry */
	DECLARE_BITMAP(have, CLANQ_WMSG_MAX_MRS);
	u32 rkeys[CLANQ_WMSG_MAX_MRS];
};

/* A registration of one span of an exported region. */
struct clanq_vmr {
	struct ib_mr *mr;
	struct sg_table sgt;
	bool mapped;
};

/* A region of this node granted to the peer of a passive connection. */
struct clanq_vexport {
	struct list_head node;		/* conn->exports, under conn->lock */
	struct clanq_kregion *region;	/* referenced, its memory held */
	u64 span;
	u16 nr_mrs;
	struct clanq_vmr mrs[] __counted_by(nr_mrs);
};

struct clanq_vconn {
	struct kref ref;
	struct clanq_nic *nic;		/* active: the sender's; passive: the one asked for */
	struct clanq_peer *peer;	/* referenced */
	bool active;
	char dev[CLANQ_WIRE_DEV_MAX];	/* active: the binding when it began */
	u32 port;

	struct mutex cm_mutex;		/* setup in the CM handler vs teardown */
	bool dead;			/* under cm_mutex: teardown began */
	struct rdma_cm_id *cm_id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	bool have_qp;
	u32 max_sge;			/* a WRITE's, as the QP was made */
	u8 *bufs;			/* rx[] then tx[] data, one mapping */
	u64 bufs_dma;
	bool mapped;

	spinlock_t lock;		/* state, error, tx_free, the lists below */
	u32 state;			/* CLANQ_PEER_* */
	int error;
	bool torn;			/* teardown queued */
	u32 nr_tx_free;
	u32 tx_free[CLANQ_V_SLOTS];
	u32 nr_wr_free;			/* of CLANQ_V_WR_CREDITS */
	struct ib_cqe wr_cqe;		/* WRITEs, REG_MRs: only errors complete */
	int wr_error;			/* the first of them to fail */
	u32 next_req;
	struct list_head pending;	/* active: clanq_vpending */
	struct list_head imports;	/* active: clanq_vimport */
	struct list_head exports;	/* passive: clanq_vexport */
	unsigned int exports_busy;	/* taken off exports, not yet freed */
	struct list_head orphans;	/* clanq_vwrite half posted */
	/* sends complete in order on an RC QP: when each in flight left */
	u32 tx_posted, tx_acked;
	unsigned long tx_when[CLANQ_V_SLOTS];
	unsigned long tx_last_ack;	/* jiffies of the last send completion */
	wait_queue_head_t wq;		/* state changes, free slots */
	struct mutex post;		/* posting vs. teardown */

	struct clanq_vbuf rx[CLANQ_V_SLOTS];
	struct clanq_vbuf tx[CLANQ_V_SLOTS];
	struct work_struct teardown;
	struct list_head node;		/* clanq_v_conns */
};

static DEFINE_SPINLOCK(clanq_v_lock);
static LIST_HEAD(clanq_v_conns);
static struct workqueue_struct *clanq_v_wq;
/* where finished chunks are told to the engine: never behind a teardown */
static struct workqueue_struct *clanq_v_done_wq;
/*
 * A grant (registering, posting) against a region's revocation, which
 * must not free an export a grant is still posting from
 */
static DEFINE_MUTEX(clanq_v_export_mutex);
static struct rdma_cm_id *clanq_v_listener;
static bool clanq_v_unloading;	/* our exit: devices are not going away */

#define CLANQ_V_BUFS_SIZE	(2 * CLANQ_V_SLOTS * CLANQ_WMSG_MAX)

static void clanq_vconn_wr_failed(struct ib_cq *cq, struct ib_wc *wc);
static void clanq_vconn_up(struct clanq_vconn *conn, struct rdma_cm_id *id);
static void clanq_v_granted(struct clanq_vconn *conn, u8 type,
			    const struct clanq_wmsg_rgn *g);

static void clanq_vconn_release(struct kref *ref)
{
	struct clanq_vconn *conn = container_of(ref, struct clanq_vconn, ref);

	clanq_peer_put(conn->peer);
	kfree(conn->bufs);
	kfree(conn);
}

static void clanq_vconn_put(struct clanq_vconn *conn)
{
	kref_put(&conn->ref, clanq_vconn_release);
}

static const char *clanq_v_devname(const struct clanq_vconn *conn)
{
	return conn->cm_id && conn->cm_id->device ? conn->cm_id->device->name :
	       conn->dev[0] ? conn->dev : "-";
}

/* An import asked for is answered, or will never be; conn->lock held. */
static void clanq_vpending_settle(struct clanq_vpending *p, int err)
{
	if (p->settled)
		return;
	p->settled = true;
	p->err = err;
	complete(&p->done);
}

/*
 * End @conn with @err: DOWN, waiters woken, teardown queued once. The
 * peer shows the state while this is its connection.
 */
static void clanq_vconn_kill(struct clanq_vconn *conn, int err)
{
	unsigned long flags;
	bool queue = false, first = false;

	struct clanq_vpending *p;

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state != CLANQ_PEER_DOWN) {
		conn->state = CLANQ_PEER_DOWN;
		conn->error = err;
		first = true;
	}
	list_for_each_entry(p, &conn->pending, node)
		clanq_vpending_settle(p, err ?: -ECONNRESET);
	if (!conn->torn) {
		conn->torn = true;
		queue = true;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up_all(&conn->wq);
	if (first && conn->active) {
		spin_lock_irqsave(&clanq_v_lock, flags);
		if (conn->peer->conn == conn)
			clanq_peer_set_state(conn->peer, CLANQ_PEER_DOWN, err);
		spin_unlock_irqrestore(&clanq_v_lock, flags);
		if (err && err != -ECONNABORTED)
			pr_notice_ratelimited("%s: %s: peer %u (%pI4:%u): connection down: %d\n",
					      conn->nic->name, clanq_v_devname(conn),
					      conn->peer->node, &conn->peer->ipv4,
					      conn->peer->port, err);
	}
	if (queue) {
		kref_get(&conn->ref);	/* the teardown's */
		queue_work(clanq_v_wq, &conn->teardown);
	}
}

static void clanq_vexport_free(struct clanq_vexport *exp, struct ib_device *dev)
{
	struct clanq_vmr *m;
	u16 i;

	for (i = 0; i < exp->nr_mrs; i++) {
		m = &exp->mrs[i];
		/* synchronous: no remote write lands in the pages after this */
		if (m->mr)
			ib_dereg_mr(m->mr);
		if (m->mapped)
			ib_dma_unmap_sg(dev, m->sgt.sgl, m->sgt.orig_nents,
					DMA_BIDIRECTIONAL);
		sg_free_table(&m->sgt);
	}
	clanq_kregion_mem_put(exp->region);
	clanq_kregion_put(exp->region);
	kfree(exp);
}

/* The QP is gone: free what was granted over it, once nobody else is. */
static void clanq_vconn_free_exports(struct clanq_vconn *conn)
{
	struct clanq_vexport *exp, *next;
	unsigned long flags;
	LIST_HEAD(list);

	for (;;) {
		wait_event(conn->wq, !READ_ONCE(conn->exports_busy));
		spin_lock_irqsave(&conn->lock, flags);
		if (!conn->exports_busy) {
			list_splice_init(&conn->exports, &list);
			spin_unlock_irqrestore(&conn->lock, flags);
			break;
		}
		spin_unlock_irqrestore(&conn->lock, flags);
	}
	list_for_each_entry_safe(exp, next, &list, node)
		clanq_vexport_free(exp, conn->cm_id->device);
}

static void clanq_vwrite_free(struct clanq_vwrite *wr, struct clanq_vconn *conn);

/* Chunks whose post failed half way: their WRs are flushed now. */
static void clanq_vconn_free_orphans(struct clanq_vconn *conn)
{
	struct clanq_vwrite *wr, *next;

	/* the engine was told when their post failed */
	list_for_each_entry_safe(wr, next, &conn->orphans, orphan) {
		list_del(&wr->orphan);
		clanq_vwrite_free(wr, conn);
	}
}

/*
 * Revoke the imports granted over @conn: all of them, or those of region
 * @id (the exporter said REVOKED). Each once; process context.
 */
static void clanq_vconn_revoke_imports(struct clanq_vconn *conn, bool one,
				       u32 id)
{
	struct clanq_vimport *imp, *found;
	unsigned long flags;

	do {
		found = NULL;
		spin_lock_irqsave(&conn->lock, flags);
		list_for_each_entry(imp, &conn->imports, node) {
			if (!imp->revoked && (!one || imp->region.id == id) &&
			    kref_get_unless_zero(&imp->region.ref)) {
				imp->revoked = true;
				found = imp;
				break;
			}
		}
		spin_unlock_irqrestore(&conn->lock, flags);
		if (found) {
			clanq_kap_revoke_all(&found->region);
			clanq_kregion_put(&found->region);
		}
	} while (found);
}

static void clanq_vconn_teardown(struct work_struct *work)
{
	struct clanq_vconn *conn = container_of(work, struct clanq_vconn, teardown);
	struct rdma_cm_id *id;
	unsigned long flags;

	/* from here on the CM handler sets nothing up */
	mutex_lock(&conn->cm_mutex);
	conn->dead = true;
	mutex_unlock(&conn->cm_mutex);
	/* and nobody posts */
	mutex_lock(&conn->post);
	mutex_unlock(&conn->post);

	id = conn->cm_id;
	if (id) {
		if (conn->have_qp) {
			rdma_disconnect(id);
			ib_drain_qp(id->qp);
			/* flushed: their mappings go with the QP's */
			clanq_vconn_free_orphans(conn);
			rdma_destroy_qp(id);
		}
		/* nothing the device does writes into them any more */
		clanq_vconn_free_exports(conn);
		if (conn->cq)
			ib_free_cq(conn->cq);
		if (conn->mapped)
			ib_dma_unmap_single(id->device, conn->bufs_dma,
					    CLANQ_V_BUFS_SIZE, DMA_BIDIRECTIONAL);
		if (conn->pd)
			ib_dealloc_pd(conn->pd);
		/* waits for a handler still running on it */
		rdma_destroy_id(id);
	}
	/* what was granted over it is gone with it */
	clanq_vconn_revoke_imports(conn, false, 0);
	spin_lock_irqsave(&clanq_v_lock, flags);
	list_del_init(&conn->node);
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	clanq_vconn_put(conn);	/* the teardown's */
	clanq_vconn_put(conn);	/* the list's */
}

static struct clanq_vconn *clanq_vconn_alloc(struct clanq_nic *nic,
					     struct clanq_peer *peer, bool active)
{
	struct clanq_vconn *conn;
	unsigned long flags;
	u32 i;

	conn = kzalloc(sizeof(*conn), GFP_KERNEL);
	if (!conn)
		return NULL;
	conn->bufs = kzalloc(CLANQ_V_BUFS_SIZE, GFP_KERNEL);
	if (!conn->bufs) {
		kfree(conn);
		return NULL;
	}
	kref_init(&conn->ref);		/* the list's */
	conn->nic = nic;
	kref_get(&peer->ref);
	conn->peer = peer;
	conn->active = active;
	mutex_init(&conn->cm_mutex);
	mutex_init(&conn->post);
	spin_lock_init(&conn->lock);
	init_waitqueue_head(&conn->wq);
	INIT_WORK(&conn->teardown, clanq_vconn_teardown);
	conn->state = CLANQ_PEER_CONNECTING;
	conn->nr_wr_free = CLANQ_V_WR_CREDITS;
	conn->wr_cqe.done = clanq_vconn_wr_failed;
	INIT_LIST_HEAD(&conn->pending);
	INIT_LIST_HEAD(&conn->imports);
	INIT_LIST_HEAD(&conn->exports);
	INIT_LIST_HEAD(&conn->orphans);
	for (i = 0; i < CLANQ_V_SLOTS; i++) {
		conn->rx[i].conn = conn;
		conn->rx[i].idx = i;
		conn->rx[i].data = conn->bufs + i * CLANQ_WMSG_MAX;
		conn->tx[i].conn = conn;
		conn->tx[i].idx = i;
		conn->tx[i].data = conn->bufs + (CLANQ_V_SLOTS + i) * CLANQ_WMSG_MAX;
		conn->tx_free[i] = i;
	}
	conn->nr_tx_free = CLANQ_V_SLOTS;
	spin_lock_irqsave(&clanq_v_lock, flags);
	list_add_tail(&conn->node, &clanq_v_conns);
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	return conn;
}

/* ---- completions (the CQ's work queue: process context) ---- */

static int clanq_vconn_post_recv(struct clanq_vconn *conn, struct clanq_vbuf *b)
{
	struct ib_sge sge = {
		.addr	= b->dma,
		.length	= CLANQ_WMSG_MAX,
		.lkey	= conn->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe		= &b->cqe,
		.sg_list	= &sge,
		.num_sge	= 1,
	};

	ib_dma_sync_single_for_device(conn->cm_id->device, b->dma,
				      CLANQ_WMSG_MAX, DMA_BIDIRECTIONAL);
	return ib_post_recv(conn->cm_id->qp, &wr, NULL);
}

static int clanq_vconn_wc_err(const struct ib_wc *wc)
{
	switch (wc->status) {
	case IB_WC_RETRY_EXC_ERR:
	case IB_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IB_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

/* Destroy @wr's rdma_rw contexts (the QP still exists) and source lists. */
static void clanq_vwrite_unmap(struct clanq_vwrite *wr, struct clanq_vconn *conn)
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

/* A send slot and the entries that went ahead of it are free again. */
static void clanq_vconn_give_back(struct clanq_vconn *conn, struct clanq_vbuf *b)
{
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	conn->tx_free[conn->nr_tx_free++] = b->idx;
	conn->nr_wr_free += b->credits;
	b->credits = 0;
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up(&conn->wq);
}

static void clanq_vconn_tx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct clanq_vbuf *b = container_of(wc->wr_cqe, struct clanq_vbuf, cqe);
	struct clanq_vconn *conn = b->conn;
	struct clanq_vwrite *wr = b->write;
	int err = wc->status == IB_WC_SUCCESS ? 0 : clanq_vconn_wc_err(wc);
	unsigned long flags;

	b->write = NULL;
	spin_lock_irqsave(&conn->lock, flags);
	conn->tx_acked++;
	conn->tx_last_ack = jiffies;
	spin_unlock_irqrestore(&conn->lock, flags);
	clanq_vconn_give_back(conn, b);
	if (err) {
		atomic64_inc(&conn->peer->send_errors);
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			clanq_vconn_kill(conn, err);
	}
	if (wr) {
		/*
		 * The WRITEs ahead of it failed first, if one did: say why.
		 * Otherwise the connection ended under it (iWARP reports
		 * a refused rkey by a TERMINATE, not on the WRITE), and the
		 * import with it: -ENXIO, but for a peer that stopped
		 * answering (-ETIMEDOUT).
		 */
		wr->status = !err ? 0 : READ_ONCE(conn->wr_error) ?:
			     err == -ETIMEDOUT ? err : -ENXIO;
		clanq_vwrite_unmap(wr, conn);
		/* an idle engine hears now; a busy one from the work queue */
		if (clanq_engine_write_done_now(wr->ep, wr->status)) {
			clanq_kep_put(wr->ep);
			kfree(wr);
		} else {
			queue_work(clanq_v_done_wq, &wr->done);
		}
	}
	clanq_vconn_put(conn);	/* the send's */
}

/*
 * A WRITE or REG_MR failed (they are unsignaled: only errors complete).
 * The QP is in error now and the rest is flushed: the connection ends,
 * and the send that follows says this error, not the flush.
 */
static void clanq_vconn_wr_failed(struct ib_cq *cq, struct ib_wc *wc)
{
	struct clanq_vconn *conn = container_of(wc->wr_cqe, struct clanq_vconn,
						wr_cqe);
	int err;

	if (wc->status == IB_WC_SUCCESS || wc->status == IB_WC_WR_FLUSH_ERR)
		return;
	/* the exporter's device refused the rkey: deregistered, revoked */
	err = wc->status == IB_WC_REM_ACCESS_ERR ? -ENXIO : clanq_vconn_wc_err(wc);
	cmpxchg(&conn->wr_error, 0, err);
	pr_notice_ratelimited("%s: %s: peer %u: an RDMA write or memory registration failed: %s\n",
			      conn->nic->name, clanq_v_devname(conn),
			      conn->peer->node, ib_wc_status_msg(wc->status));
	clanq_vconn_kill(conn, err);
}

/*
 * Have sends been waiting for ack_ms with not one completing? (A long
 * queue that drains slowly is progress, not a dead peer.) conn->lock held.
 */
static bool clanq_vconn_stalled(struct clanq_vconn *conn)
{
	unsigned int ms = READ_ONCE(ack_ms);
	unsigned long since;

	if (!ms || conn->tx_posted == conn->tx_acked)
		return false;
	since = conn->tx_when[conn->tx_acked % CLANQ_V_SLOTS];
	if (time_after(conn->tx_last_ack, since))
		since = conn->tx_last_ack;
	return time_after(jiffies, since + msecs_to_jiffies(ms));
}

static bool clanq_vconn_can_take(struct clanq_vconn *conn, u32 credits)
{
	return (READ_ONCE(conn->nr_tx_free) &&
		READ_ONCE(conn->nr_wr_free) >= credits) ||
	       READ_ONCE(conn->state) != CLANQ_PEER_UP;
}

/*
 * A send slot, and @credits send queue entries for what is posted ahead
 * of its SEND (WRITEs, a REG_MR). With @wait, a caller in process context
 * waits for them (connect_ms at most, and may be killed); without, a
 * full queue is -ENOBUFS.
 */
static struct clanq_vbuf *clanq_vconn_take(struct clanq_vconn *conn,
					   u32 credits, bool wait)
{
	long left, timeout = msecs_to_jiffies(READ_ONCE(connect_ms));
	struct clanq_vbuf *b;
	unsigned long flags;
	int err;

	if (wait) {
		left = wait_event_killable_timeout(conn->wq,
						   clanq_vconn_can_take(conn, credits),
						   timeout);
		if (left < 0)
			return ERR_PTR(left);
		if (!left) {
			/*
			 * Every send of the queue unacknowledged for connect_ms:
			 * the peer is gone (rxe re-arms its retransmit timer on
			 * each new send, so a steady sender never sees retries
			 * run out), and so is the connection.
			 */
			clanq_vconn_kill(conn, -ETIMEDOUT);
			return ERR_PTR(-ETIMEDOUT);
		}
	}
	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state != CLANQ_PEER_UP) {
		err = conn->error ?: -ECONNRESET;
		spin_unlock_irqrestore(&conn->lock, flags);
		return ERR_PTR(err);
	}
	if (clanq_vconn_stalled(conn)) {
		spin_unlock_irqrestore(&conn->lock, flags);
		clanq_vconn_kill(conn, -ETIMEDOUT);
		return ERR_PTR(-ETIMEDOUT);
	}
	if (!conn->nr_tx_free || conn->nr_wr_free < credits) {
		spin_unlock_irqrestore(&conn->lock, flags);
		return ERR_PTR(-ENOBUFS);
	}
	b = &conn->tx[conn->tx_free[--conn->nr_tx_free]];
	conn->nr_wr_free -= credits;
	b->credits = credits;
	conn->tx_when[conn->tx_posted++ % CLANQ_V_SLOTS] = jiffies;
	spin_unlock_irqrestore(&conn->lock, flags);
	return b;
}

/* @b's SEND of the @len bytes in its buffer, after @ahead if any. */
static struct ib_send_wr *clanq_vconn_send_wr(struct clanq_vconn *conn,
					      struct clanq_vbuf *b, size_t len,
					      struct ib_send_wr *wr,
					      struct ib_sge *sge)
{
	sge->addr = b->dma;
	sge->length = len;
	sge->lkey = conn->pd->local_dma_lkey;
	ib_dma_sync_single_for_device(conn->cm_id->device, b->dma, len,
				      DMA_BIDIRECTIONAL);
	b->cqe.done = clanq_vconn_tx_done;
	memset(wr, 0, sizeof(*wr));
	wr->wr_cqe = &b->cqe;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IB_WR_SEND;
	wr->send_flags = IB_SEND_SIGNALED;
	return wr;
}

/*
 * Post @head, a chain that ends in @b's SEND, with conn->post held and
 * the connection up. On an error nothing of it is posted, or the
 * connection is killed (and what went is flushed); @b is given back.
 */
static int clanq_vconn_post_locked(struct clanq_vconn *conn, struct clanq_vbuf *b,
				   struct ib_send_wr *head,
				   const struct ib_send_wr **bad)
{
	int err;

	lockdep_assert_held(&conn->post);
	*bad = head;
	if (READ_ONCE(conn->state) != CLANQ_PEER_UP)
		err = READ_ONCE(conn->error) ?: -ECONNRESET;
	else
		err = ib_post_send(conn->cm_id->qp, head, bad);
	if (!err) {
		kref_get(&conn->ref);	/* the send's, until it completes */
		return 0;
	}
	b->write = NULL;
	clanq_vconn_give_back(conn, b);
	if (*bad != head || READ_ONCE(conn->state) == CLANQ_PEER_UP)
		clanq_vconn_kill(conn, err);
	return err;
}

/* Send the @len bytes in @b's buffer, after @ahead (or NULL). */
static int clanq_vconn_post(struct clanq_vconn *conn, struct clanq_vbuf *b,
			    size_t len, struct ib_send_wr *ahead)
{
	const struct ib_send_wr *bad;
	struct ib_send_wr send;
	struct ib_sge sge;
	int err;

	clanq_vconn_send_wr(conn, b, len, &send, &sge);
	if (ahead)
		ahead->next = &send;
	mutex_lock(&conn->post);
	err = clanq_vconn_post_locked(conn, b, ahead ?: &send, &bad);
	mutex_unlock(&conn->post);
	return err;
}

/*
 * Post one message on @conn: an OOB message (@type CLANQ_WMSG_OOB) or one
 * coming back (CLANQ_WMSG_UNREACHABLE). With @wait, a caller in process
 * context waits for a free slot (and may be killed); without, a full
 * send queue is -ENOBUFS.
 */
static int clanq_vconn_send(struct clanq_vconn *conn, u8 type,
			    const struct clanq_addr *dst,
			    const struct clanq_oob_msg *msg, bool wait)
{
	struct clanq_vbuf *b = clanq_vconn_take(conn, 0, wait);

	if (IS_ERR(b))
		return PTR_ERR(b);
	return clanq_vconn_post(conn, b, clanq_wmsg_put_oob(b->data, type, dst, msg),
				NULL);
}

/* Post a region message of @type to the peer, after @ahead (or NULL). */
static int clanq_vconn_send_region(struct clanq_vconn *conn, u8 type,
				   const struct clanq_wmsg_rgn *r,
				   struct ib_send_wr *ahead, bool wait)
{
	struct clanq_vbuf *b = clanq_vconn_take(conn, ahead ? 1 : 0, wait);

	if (IS_ERR(b))
		return PTR_ERR(b);
	return clanq_vconn_post(conn, b,
				clanq_wmsg_put_region(b->data, type, conn->nic->node,
						      conn->peer->node, r),
				ahead);
}

/* ---- regions: the exporter's side ---- */

/*
 * Register @r with @conn's device: its pages in spans of at most the
 * device's fast registration list, each a memory region whose address is
 * the page-space offset of its first byte (wire_msg.h). Not posted yet.
 */
static struct clanq_vexport *clanq_vexport_new(struct clanq_vconn *conn,
					       struct clanq_kregion *r, int *err)
{
	struct ib_device *dev = conn->cm_id->device;
	u32 per = min_t(u32, dev->attrs.max_fast_reg_page_list_len,
			CLANQ_V_MR_PAGES);
	u64 span = (u64)per << PAGE_SHIFT, end = r->first + r->len, lo, hi;
	struct clanq_vexport *exp;
	unsigned long page0, pages;
	struct clanq_vmr *m;
	int nents, n;
	u16 i;

	*err = -EOPNOTSUPP;
	if (!per)
		return NULL;
	*err = -E2BIG;
	if (DIV_ROUND_UP_ULL(end, span) > CLANQ_WMSG_MAX_MRS)
		return NULL;
	n = DIV_ROUND_UP_ULL(end, span);
	*err = -ENOMEM;
	exp = kzalloc(struct_size(exp, mrs, n), GFP_KERNEL);
	if (!exp)
		return NULL;
	exp->nr_mrs = n;
	exp->span = span;
	*err = -ENOENT;
	if (!clanq_kregion_mem_get(r)) {
		kfree(exp);
		return NULL;
	}
	kref_get(&r->ref);
	exp->region = r;
	for (i = 0; i < n; i++) {
		m = &exp->mrs[i];
		lo = max_t(u64, (u64)i * span, r->first);
		hi = min_t(u64, (u64)(i + 1) * span, end);
		page0 = lo >> PAGE_SHIFT;
		pages = DIV_ROUND_UP_ULL(hi, PAGE_SIZE) - page0;
		*err = sg_alloc_table_from_pages(&m->sgt, r->pages + page0, pages,
						 offset_in_page(lo), hi - lo,
						 GFP_KERNEL);
		if (*err)
			goto fail;
		nents = ib_dma_map_sg(dev, m->sgt.sgl, m->sgt.orig_nents,
				      DMA_BIDIRECTIONAL);
		*err = -ENOMEM;
		if (!nents)
			goto fail;
		m->mapped = true;
		m->mr = ib_alloc_mr(conn->pd, IB_MR_TYPE_MEM_REG, pages);
		if (IS_ERR(m->mr)) {
			*err = PTR_ERR(m->mr);
			m->mr = NULL;
			goto fail;
		}
		*err = -EINVAL;
		if (ib_map_mr_sg(m->mr, m->sgt.sgl, nents, NULL, PAGE_SIZE) != nents)
			goto fail;
		/* the same offset in its page as the DMA address it replaces */
		m->mr->iova = lo;
	}
	*err = 0;
	return exp;
fail:
	clanq_vexport_free(exp, dev);
	return NULL;
}

/* Tell the importer no, with @err (its request is @q). */
static void clanq_v_refuse(struct clanq_vconn *conn,
			   const struct clanq_wmsg_rgn *q, int err)
{
	struct clanq_wmsg_rgn no = { .id = q->id, .req = q->req, .err = err };

	pr_notice_ratelimited("%s: %s: peer %u: import of region %u refused: %d\n",
			      conn->nic->name, clanq_v_devname(conn),
			      conn->peer->node, q->id, err);
	clanq_vconn_send_region(conn, CLANQ_WMSG_REFUSE, &no, NULL, false);
}

/*
 * The peer asks to write into region @q->id (CQ context, the QP alive):
 * checked as a local import is, registered once per connection, and
 * granted: each registration's REG_MR goes ahead of its GRANT, so the
 * rkey works before the importer can know it.
 */
static void clanq_v_grant(struct clanq_vconn *conn, const struct clanq_wmsg_rgn *q)
{
	struct clanq_kregion *r = clanq_kregion_lookup(conn->nic, q->id);
	struct clanq_vexport *exp, *fresh = NULL;
	struct clanq_wmsg_rgn g = { .id = q->id, .req = q->req };
	u32 rkeys[CLANQ_WMSG_MAX_MRS];
	struct ib_reg_wr reg;
	unsigned long flags;
	int err = -ENOENT;
	u16 i, n = 0;

	/* a wrong key, never exported, freed: all the same to a guesser */
	if (!r || !smp_load_acquire(&r->exported) || r->key != q->key ||
	    READ_ONCE(r->revoked))
		goto refuse;
	/* across hosts an aperture is only ever written through */
	err = -EACCES;
	if (!(r->rights & CLANQ_RIGHT_WRITE))
		goto refuse;
	mutex_lock(&clanq_v_export_mutex);
	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(exp, &conn->exports, node) {
		if (exp->region == r) {
			n = exp->nr_mrs;
			g.span = exp->span;
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
		fresh = clanq_vexport_new(conn, r, &err);
		if (!fresh)
			goto refuse_unlock;
		spin_lock_irqsave(&conn->lock, flags);
		list_add_tail(&fresh->node, &conn->exports);
		spin_unlock_irqrestore(&conn->lock, flags);
		n = fresh->nr_mrs;
		g.span = fresh->span;
		for (i = 0; i < n; i++)
			rkeys[i] = fresh->mrs[i].mr->rkey;
	}
	g.len = r->len;
	g.first = r->first;
	g.rights = r->rights;
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
				.access		= IB_ACCESS_LOCAL_WRITE |
						  IB_ACCESS_REMOTE_WRITE,
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
	clanq_v_refuse(conn, q, err);
}

/* The peer wrote [off, off + len) of a region we granted it: tripwires. */
static void clanq_v_wrote(struct clanq_vconn *conn, const struct clanq_wmsg_rgn *w)
{
	struct clanq_kregion *r = NULL;
	struct clanq_vexport *exp;
	unsigned long flags;
	int err = -ENOENT;

	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(exp, &conn->exports, node) {
		if (exp->region->id == w->id) {
			r = exp->region;
			kref_get(&r->ref);
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
				     conn->nic->name, clanq_v_devname(conn),
				     conn->peer->node, w->off, w->len, w->id, err);
}

/* A message @conn received, decoded: where it goes, if anywhere. */
static void clanq_vconn_deliver(struct clanq_vconn *conn, struct clanq_wmsg *m)
{
	struct clanq_peer *peer = conn->peer;
	struct clanq_addr dst = { m->dst_node, m->dst_id };

	switch (m->type) {
	case CLANQ_WMSG_OOB:
		/* the source is the connection's, not what the bytes say */
		if (conn->active || m->src_node != peer->node ||
		    m->dst_node != conn->nic->node)
			break;
		atomic64_inc(&peer->oob_received);
		if (clanq_rx_oob(conn->nic, m->dst_id, &m->oob) == -ENOENT)
			/* back on the same QP; dropped if it is full */
			clanq_vconn_send(conn, CLANQ_WMSG_UNREACHABLE, &dst,
					 &m->oob, false);
		return;
	case CLANQ_WMSG_UNREACHABLE:
		/* one of ours, to this peer, came back */
		if (!conn->active || m->dst_node != peer->node ||
		    m->src_node != conn->nic->node)
			break;
		clanq_oob_unreachable(conn->nic, &dst, &m->oob);
		return;
	case CLANQ_WMSG_IMPORT:
	case CLANQ_WMSG_WROTE:
		/* the importer's, on the connection it made to us */
		if (conn->active || m->src_node != peer->node ||
		    m->dst_node != conn->nic->node)
			break;
		if (m->type == CLANQ_WMSG_IMPORT)
			clanq_v_grant(conn, &m->rgn);
		else
			clanq_v_wrote(conn, &m->rgn);
		return;
	case CLANQ_WMSG_GRANT:
	case CLANQ_WMSG_REFUSE:
	case CLANQ_WMSG_REVOKED:
		/* the exporter's, back on the connection we made */
		if (!conn->active || m->src_node != peer->node ||
		    m->dst_node != conn->nic->node)
			break;
		if (m->type == CLANQ_WMSG_REVOKED)
			clanq_vconn_revoke_imports(conn, true, m->rgn.id);
		else
			clanq_v_granted(conn, m->type, &m->rgn);
		return;
	}
	pr_notice_ratelimited("%s: %s: peer %u: message type %u from node %u to %u: not this connection's; dropped\n",
			      conn->nic->name, clanq_v_devname(conn), peer->node,
			      m->type, m->src_node, m->dst_node);
}

static void clanq_vconn_rx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct clanq_vbuf *b = container_of(wc->wr_cqe, struct clanq_vbuf, cqe);
	struct clanq_vconn *conn = b->conn;
	struct clanq_wmsg m;
	int err;

	if (wc->status != IB_WC_SUCCESS) {
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			clanq_vconn_kill(conn, clanq_vconn_wc_err(wc));
		return;
	}
	/*
	 * The peer sends once it is established, and its first message may
	 * come before our CM hears the RTU: it is established here too, or
	 * our answer (an import's grant) would find the connection not up.
	 */
	if (!conn->active && READ_ONCE(conn->state) == CLANQ_PEER_CONNECTING)
		clanq_vconn_up(conn, conn->cm_id);
	ib_dma_sync_single_for_cpu(conn->cm_id->device, b->dma, CLANQ_WMSG_MAX,
				   DMA_BIDIRECTIONAL);
	err = clanq_wmsg_get(b->data, wc->byte_len, &m);
	if (err)
		pr_notice_ratelimited("%s: %s: peer %u: malformed message of %u bytes (%d); dropped\n",
				      conn->nic->name, clanq_v_devname(conn),
				      conn->peer->node, wc->byte_len, err);
	else
		clanq_vconn_deliver(conn, &m);
	if (READ_ONCE(conn->state) != CLANQ_PEER_DOWN) {
		err = clanq_vconn_post_recv(conn, b);
		if (err)
			clanq_vconn_kill(conn, err);
	}
}

/* ---- setup: the QP and its buffers, on the device the CM chose ---- */

static void clanq_vconn_qp_event(struct ib_event *ev, void *ctx)
{
	struct clanq_vconn *conn = ctx;

	if (ev->event == IB_EVENT_QP_FATAL || ev->event == IB_EVENT_QP_ACCESS_ERR)
		clanq_vconn_kill(conn, -EIO);
}

/* Called with cm_mutex held, from the CM handler. */
static int clanq_vconn_setup(struct clanq_vconn *conn, struct rdma_cm_id *id)
{
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr attr = {};
	u32 i;
	int err;

	conn->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(conn->pd)) {
		err = PTR_ERR(conn->pd);
		conn->pd = NULL;
		return err;
	}
	/* room for everything both queues may hold: flushed, all complete */
	conn->cq = ib_alloc_cq(dev, conn,
			       2 * (CLANQ_V_SLOTS + 1) + CLANQ_V_WR_CREDITS, 0,
			       IB_POLL_WORKQUEUE);
	if (IS_ERR(conn->cq)) {
		err = PTR_ERR(conn->cq);
		conn->cq = NULL;
		return err;
	}
	conn->bufs_dma = ib_dma_map_single(dev, conn->bufs, CLANQ_V_BUFS_SIZE,
					   DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(dev, conn->bufs_dma))
		return -ENOMEM;
	conn->mapped = true;

	attr.event_handler = clanq_vconn_qp_event;
	attr.qp_context = conn;
	attr.send_cq = conn->cq;
	attr.recv_cq = conn->cq;
	/* one more of each: ib_drain_qp() posts a marker */
	attr.cap.max_send_wr = CLANQ_V_SLOTS + CLANQ_V_WR_CREDITS + 1;
	attr.cap.max_recv_wr = CLANQ_V_SLOTS + 1;
	conn->max_sge = clamp_t(u32, dev->attrs.max_send_sge, 1, CLANQ_V_MAX_SGE);
	attr.cap.max_send_sge = conn->max_sge;
	attr.cap.max_recv_sge = 1;
	/* only SENDs complete: the WRITEs and REG_MRs ahead of them do not */
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	err = rdma_create_qp(id, conn->pd, &attr);
	if (err)
		return err;
	conn->have_qp = true;

	for (i = 0; i < CLANQ_V_SLOTS; i++) {
		conn->rx[i].dma = conn->bufs_dma + i * CLANQ_WMSG_MAX;
		conn->rx[i].cqe.done = clanq_vconn_rx_done;
		conn->tx[i].dma = conn->bufs_dma + (CLANQ_V_SLOTS + i) * CLANQ_WMSG_MAX;
	}
	for (i = 0; i < CLANQ_V_SLOTS; i++) {
		err = clanq_vconn_post_recv(conn, &conn->rx[i]);
		if (err)
			return err;
	}
	return 0;
}

static void clanq_v_kill_matching(bool (*match)(struct clanq_vconn *, const void *),
				  const void *arg, int err);

/* An older passive connection of @fresh's NIC from @fresh's peer? */
static bool clanq_v_superseded_by(struct clanq_vconn *conn, const void *fresh)
{
	const struct clanq_vconn *f = fresh;

	return conn != f && !conn->active && conn->nic == f->nic &&
	       conn->peer == f->peer;
}

static void clanq_vconn_up(struct clanq_vconn *conn, struct rdma_cm_id *id)
{
	struct sockaddr_in *src = (struct sockaddr_in *)&id->route.addr.src_addr;
	unsigned long flags;
	bool up = false;

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state == CLANQ_PEER_CONNECTING) {
		conn->state = CLANQ_PEER_UP;
		up = true;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up_all(&conn->wq);
	/*
	 * A peer keeps one connection to us per NIC: a new one supersedes
	 * what came before (from before its restart, or one it gave up on),
	 * which would otherwise linger, silent, until the peer is deleted.
	 */
	if (up && !conn->active)
		clanq_v_kill_matching(clanq_v_superseded_by, conn, -ECONNRESET);
	if (!up || !conn->active)
		return;
	if (src->sin_family == AF_INET) {
		spin_lock(&conn->nic->peers.bind_lock);
		conn->nic->peers.src_ipv4 = src->sin_addr.s_addr;
		spin_unlock(&conn->nic->peers.bind_lock);
	}
	spin_lock_irqsave(&clanq_v_lock, flags);
	if (conn->peer->conn == conn)
		clanq_peer_set_state(conn->peer, CLANQ_PEER_UP, 0);
	spin_unlock_irqrestore(&clanq_v_lock, flags);
}

/* ---- the passive side: a connection request from a peer ---- */

static int clanq_v_accept(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct sockaddr_in *from = (struct sockaddr_in *)&id->route.addr.dst_addr;
	struct rdma_conn_param param = {};
	struct clanq_vconn *conn;
	struct clanq_peer *peer;
	struct clanq_nic *nic;
	const char *why = NULL;
	u32 src_node, dst_node;
	bool bound;
	int err;

	if (clanq_whello_get(ev->param.conn.private_data,
			     ev->param.conn.private_data_len, &src_node, &dst_node)) {
		pr_notice_ratelimited("clanq: %s: connection request from %pISp: not a clanq hello; refused\n",
				      id->device->name, from);
		return -EPROTO;	/* the CM destroys the id */
	}
	nic = clanq_nic_by_node(dst_node);
	if (!nic) {
		pr_notice_ratelimited("clanq: %s: node %u at %pISp asked for node %u: not here; refused\n",
				      id->device->name, src_node, from, dst_node);
		return -ENOENT;
	}
	peer = clanq_peer_get(nic, src_node);
	if (!peer)
		why = "not a peer of it";
	else if (from->sin_family != AF_INET || from->sin_addr.s_addr != peer->ipv4)
		why = "not at the peer's address";
	spin_lock(&nic->peers.bind_lock);
	bound = !strcmp(nic->peers.dev, id->device->name) &&
		nic->peers.port == id->port_num;
	spin_unlock(&nic->peers.bind_lock);
	if (!why && !bound)
		why = "on a device or port the NIC is not bound to";
	if (why) {
		pr_notice_ratelimited("%s: %s: node %u at %pISp: %s; refused\n",
				      nic->name, id->device->name, src_node, from, why);
		if (peer)
			clanq_peer_put(peer);
		return -EPERM;
	}

	conn = clanq_vconn_alloc(nic, peer, false);
	clanq_peer_put(peer);
	if (!conn)
		return -ENOMEM;
	mutex_lock(&conn->cm_mutex);
	if (conn->dead) {
		/* the peer was deleted meanwhile: its teardown saw no id */
		mutex_unlock(&conn->cm_mutex);
		return -ECONNABORTED;	/* the CM destroys the id */
	}
	conn->cm_id = id;
	id->context = conn;
	err = clanq_vconn_setup(conn, id);
	if (!err) {
		param.rnr_retry_count = 7;
		err = rdma_accept(id, &param);
	}
	mutex_unlock(&conn->cm_mutex);
	if (err) {
		pr_notice_ratelimited("%s: %s: node %u: cannot accept its connection: %d\n",
				      nic->name, id->device->name, src_node, err);
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		clanq_vconn_kill(conn, err);
	}
	return 0;	/* the id is conn's now: its teardown destroys it */
}

/* ---- the active side ---- */

static int clanq_vconn_route_resolved(struct clanq_vconn *conn,
				      struct rdma_cm_id *id)
{
	struct rdma_conn_param param = {};
	struct clanq_whello hello;
	int err;

	if (strcmp(id->device->name, conn->dev) || id->port_num != conn->port) {
		pr_notice_ratelimited("%s: peer %u (%pI4): the route leaves through %s port %u, the NIC is bound to %s port %u\n",
				      conn->nic->name, conn->peer->node,
				      &conn->peer->ipv4, id->device->name,
				      id->port_num, conn->dev, conn->port);
		return -ENETUNREACH;
	}
	err = clanq_vconn_setup(conn, id);
	if (err)
		return err;
	clanq_whello_put(&hello, conn->nic->node, conn->peer->node);
	param.private_data = &hello;
	param.private_data_len = sizeof(hello);
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	return rdma_connect_locked(id, &param);
}

static int clanq_v_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct clanq_vconn *conn = id->context;
	int err = 0;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return clanq_v_accept(id, ev);
	if (!conn)
		return 0;	/* the listener's own events */

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rdma_resolve_route(id, CLANQ_V_RESOLVE_MS);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		mutex_lock(&conn->cm_mutex);
		err = conn->dead ? 0 : clanq_vconn_route_resolved(conn, id);
		mutex_unlock(&conn->cm_mutex);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		clanq_vconn_up(conn, id);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		err = -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		err = -ENETUNREACH;
		break;
	case RDMA_CM_EVENT_REJECTED:
		err = -ECONNREFUSED;
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		err = ev->status < 0 ? ev->status : -ETIMEDOUT;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_ADDR_CHANGE:
		err = -ECONNRESET;
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		err = -ENODEV;
		break;
	default:
		break;
	}
	if (err)
		clanq_vconn_kill(conn, err);
	return 0;	/* ids are destroyed by the teardown, never here */
}

/* Begin connecting @conn to its peer: an id, then address resolution. */
static int clanq_vconn_start(struct clanq_vconn *conn)
{
	struct sockaddr_in dst = {
		.sin_family	= AF_INET,
		.sin_port	= htons(conn->peer->port),
		.sin_addr.s_addr = conn->peer->ipv4,
	};
	struct rdma_cm_id *id;
	int err;

	mutex_lock(&conn->cm_mutex);
	if (conn->dead) {
		mutex_unlock(&conn->cm_mutex);
		return -ECONNABORTED;
	}
	id = rdma_create_id(&init_net, clanq_v_cm_handler, conn, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id)) {
		mutex_unlock(&conn->cm_mutex);
		return PTR_ERR(id);
	}
	conn->cm_id = id;
	mutex_unlock(&conn->cm_mutex);
	/* RoCE and IB: a dead peer is noticed in ~0.5 s, not minutes */
	rdma_set_ack_timeout(id, CLANQ_V_ACK_TIMEOUT);
	err = rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				CLANQ_V_RESOLVE_MS);
	return err;
}

static bool clanq_vconn_settled(struct clanq_vconn *conn)
{
	return READ_ONCE(conn->state) != CLANQ_PEER_CONNECTING;
}

/*
 * The connection to @peer, referenced, once it is up: made now if there
 * is none or the last one failed, then waited for (connect_ms at most).
 */
static struct clanq_vconn *clanq_vconn_get(struct clanq_nic *nic,
					   struct clanq_peer *peer)
{
	struct clanq_vconn *conn, *old = NULL, *fresh = NULL;
	unsigned long flags;
	char dev[CLANQ_WIRE_DEV_MAX];
	u32 port;
	long left;
	int err;

	spin_lock_irqsave(&clanq_v_lock, flags);
	conn = peer->conn;
	if (conn && READ_ONCE(conn->state) != CLANQ_PEER_DOWN) {
		kref_get(&conn->ref);
		spin_unlock_irqrestore(&clanq_v_lock, flags);
		goto wait;
	}
	spin_unlock_irqrestore(&clanq_v_lock, flags);

	spin_lock(&nic->peers.bind_lock);
	strscpy(dev, nic->peers.dev, sizeof(dev));
	port = nic->peers.port;
	spin_unlock(&nic->peers.bind_lock);
	if (!dev[0]) {
		pr_notice_ratelimited("%s: peer %u: the NIC is not bound to an RDMA device (clanqctl bind)\n",
				      nic->name, peer->node);
		return ERR_PTR(-ENETUNREACH);
	}
	fresh = clanq_vconn_alloc(nic, peer, true);
	if (!fresh)
		return ERR_PTR(-ENOMEM);
	strscpy(fresh->dev, dev, sizeof(fresh->dev));
	fresh->port = port;

	spin_lock_irqsave(&clanq_v_lock, flags);
	conn = peer->conn;
	if (conn && READ_ONCE(conn->state) != CLANQ_PEER_DOWN) {
		/* another sender made one meanwhile */
		kref_get(&conn->ref);
		spin_unlock_irqrestore(&clanq_v_lock, flags);
		clanq_vconn_kill(fresh, -ECONNABORTED);
		goto wait;
	}
	old = conn;
	kref_get(&fresh->ref);		/* the peer's */
	peer->conn = fresh;
	clanq_peer_set_state(peer, CLANQ_PEER_CONNECTING, 0);
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	if (old)
		clanq_vconn_put(old);	/* was the peer's */
	conn = fresh;
	kref_get(&conn->ref);		/* the caller's */
	err = clanq_vconn_start(conn);
	if (err)
		clanq_vconn_kill(conn, err);

wait:
	left = wait_event_killable_timeout(conn->wq, clanq_vconn_settled(conn),
					   msecs_to_jiffies(READ_ONCE(connect_ms)));
	err = 0;
	if (left < 0)
		err = left;
	else if (READ_ONCE(conn->state) == CLANQ_PEER_CONNECTING)
		err = -ETIMEDOUT;
	else if (READ_ONCE(conn->state) != CLANQ_PEER_UP)
		err = READ_ONCE(conn->error) ?: -ECONNRESET;
	if (err) {
		clanq_vconn_put(conn);
		return ERR_PTR(err);
	}
	return conn;
}

/* ---- regions: the importer's side ---- */

/* A GRANT or REFUSE for one of our pending imports (CQ context). */
static void clanq_v_granted(struct clanq_vconn *conn, u8 type,
			    const struct clanq_wmsg_rgn *g)
{
	struct clanq_vpending *p;
	unsigned long flags;
	bool bad = true;

	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(p, &conn->pending, node) {
		if (p->req != g->req || p->id != g->id || p->settled)
			continue;
		if (type == CLANQ_WMSG_REFUSE) {
			clanq_vpending_settle(p, g->err);
			bad = false;
			break;
		}
		/* every GRANT of a region says the same but for its rkey */
		if (p->got && (g->len != p->grant.len || g->span != p->grant.span ||
			       g->first != p->grant.first ||
			       g->rights != p->grant.rights ||
			       g->nr_mrs != p->grant.nr_mrs))
			break;
		if (test_and_set_bit(g->mr, p->have))
			break;
		if (!p->got)
			p->grant = *g;
		p->rkeys[g->mr] = g->rkey;
		if (++p->got == g->nr_mrs)
			clanq_vpending_settle(p, 0);
		bad = false;
		break;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (bad)
		pr_notice_ratelimited("%s: %s: peer %u: %s for region %u (request %u): not asked for, or not like the others; dropped\n",
				      conn->nic->name, clanq_v_devname(conn),
				      conn->peer->node,
				      type == CLANQ_WMSG_GRANT ? "grant" : "refusal",
				      g->id, g->req);
}

/* The last aperture let go of the import (clanq_kregion_put()). */
static void clanq_vimport_release(struct clanq_kregion *r)
{
	struct clanq_vimport *imp = container_of(r, struct clanq_vimport, region);
	struct clanq_vconn *conn = imp->conn;
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	list_del(&imp->node);
	spin_unlock_irqrestore(&conn->lock, flags);
	clanq_vconn_put(conn);
	kfree_rcu(imp, region.rcu);
}

/* The errors an exporter may give for an import; anything else is -EIO. */
static int clanq_v_refusal(int err)
{
	switch (err) {
	case -ENOENT:
	case -EACCES:
	case -E2BIG:
	case -ENOMEM:
	case -EOPNOTSUPP:
	case -ETIMEDOUT:
	case -ECONNRESET:
		return err;
	default:
		return -EIO;
	}
}

/* ---- the wire's operations ---- */

static bool clanq_v_reaches(struct clanq_nic *src, u32 node)
{
	return clanq_peer_known(src, node);
}

static int clanq_v_send_oob(struct clanq_nic *src, const struct clanq_addr *dst,
			    const struct clanq_oob_msg *msg)
{
	struct clanq_peer *peer = clanq_peer_get(src, dst->node);
	struct clanq_vconn *conn;
	int err;

	if (!peer)
		return -EHOSTUNREACH;
	conn = clanq_vconn_get(src, peer);
	if (IS_ERR(conn)) {
		err = PTR_ERR(conn);
		goto out;
	}
	err = clanq_vconn_send(conn, CLANQ_WMSG_OOB, dst, msg, true);
	if (!err)
		atomic64_inc(&peer->oob_sent);
	clanq_vconn_put(conn);
out:
	clanq_peer_put(peer);
	return err;
}

/*
 * Ask the exporter for region @addr (the key checked there), over the
 * connection to its node, and wait for its answer (connect_ms at most).
 */
static struct clanq_kregion *clanq_v_import(struct clanq_nic *src,
					    const struct clanq_addr *addr,
					    u64 key, int *err)
{
	struct clanq_peer *peer = clanq_peer_get(src, addr->node);
	struct clanq_vimport *imp = NULL;
	struct clanq_wmsg_rgn q = { .id = addr->id, .key = key };
	struct clanq_vpending *p;
	struct clanq_vconn *conn;
	unsigned long flags;
	long left;

	*err = -EHOSTUNREACH;
	if (!peer)
		return NULL;
	conn = clanq_vconn_get(src, peer);
	clanq_peer_put(peer);
	if (IS_ERR(conn)) {
		*err = PTR_ERR(conn);
		return NULL;
	}
	*err = -ENOMEM;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		goto out;
	init_completion(&p->done);
	p->id = addr->id;
	spin_lock_irqsave(&conn->lock, flags);
	p->req = ++conn->next_req;
	list_add_tail(&p->node, &conn->pending);
	if (conn->state != CLANQ_PEER_UP)
		clanq_vpending_settle(p, conn->error ?: -ECONNRESET);
	spin_unlock_irqrestore(&conn->lock, flags);

	q.req = p->req;
	*err = clanq_vconn_send_region(conn, CLANQ_WMSG_IMPORT, &q, NULL, true);
	left = *err ? 1 : wait_for_completion_killable_timeout(&p->done,
				msecs_to_jiffies(READ_ONCE(connect_ms)));
	spin_lock_irqsave(&conn->lock, flags);
	list_del(&p->node);
	if (!*err)
		*err = left < 0 ? left : !p->settled ? -ETIMEDOUT :
		       p->err ? clanq_v_refusal(p->err) : 0;
	spin_unlock_irqrestore(&conn->lock, flags);
	if (*err)
		goto out_free;

	imp = kzalloc(struct_size(imp, rkeys, p->grant.nr_mrs), GFP_KERNEL_ACCOUNT);
	*err = -ENOMEM;
	if (!imp)
		goto out_free;
	imp->nr_mrs = p->grant.nr_mrs;
	imp->span = p->grant.span;
	imp->first = p->grant.first;
	memcpy(imp->rkeys, p->rkeys, imp->nr_mrs * sizeof(u32));
	clanq_kregion_remote_init(&imp->region, src, addr->node, addr->id,
				  p->grant.len, key, p->grant.rights,
				  clanq_vimport_release);
	imp->conn = conn;		/* our reference */
	kfree(p);
	/*
	 * On the list before the connection ends, it is revoked by the
	 * teardown; after, it is refused here (release takes it off).
	 */
	spin_lock_irqsave(&conn->lock, flags);
	list_add_tail(&imp->node, &conn->imports);
	*err = conn->state == CLANQ_PEER_UP ? 0 : conn->error ?: -ECONNRESET;
	spin_unlock_irqrestore(&conn->lock, flags);
	if (*err) {
		clanq_kregion_put(&imp->region);
		return NULL;
	}
	return &imp->region;

out_free:
	kfree(p);
out:
	clanq_vconn_put(conn);
	return NULL;
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
 * One chunk to another host's region: RDMA WRITEs from the source pages,
 * a piece per registration it crosses, then the WROTE, all one chain on
 * the connection the import was granted over. The WROTE's completion
 * tells the engine (clanq_vconn_tx_done()).
 */
static int clanq_v_rdma_write(struct clanq_nic *src,
			      const struct clanq_wire_write *w)
{
	struct clanq_kap *ap = w->dst;
	struct clanq_vimport *imp;
	struct clanq_vconn *conn;
	struct clanq_wmsg_rgn msg = {};
	struct clanq_vwrite_piece *p;
	struct clanq_vwrite *wr;
	struct ib_send_wr send, *head, *x;
	const struct ib_send_wr *bad;
	struct ib_sge sge;
	struct clanq_vbuf *b;
	u64 off, end, pos, stop;
	u32 credits = 0;
	unsigned int i, n;
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
	end = off + w->len;
	n = div64_u64(end - 1, imp->span) - div64_u64(off, imp->span) + 1;
	wr = kzalloc(struct_size(wr, piece, n), GFP_KERNEL);
	if (!wr)
		return -ENOMEM;
	wr->nr_pieces = n;
	INIT_WORK(&wr->done, clanq_vwrite_done);
	INIT_LIST_HEAD(&wr->orphan);
	for (i = 0, pos = off; i < n; i++, pos = stop) {
		p = &wr->piece[i];
		stop = min(end, (div64_u64(pos, imp->span) + 1) * imp->span);
		p->raddr = pos;
		p->rkey = imp->rkeys[div64_u64(pos, imp->span)];
		err = clanq_vwrite_sg(p, w->src, w->src_off + (pos - off), stop - pos);
		if (err)
			goto err_free;
		/* rdma_rw's count, at most: a WRITE per max_sge entries */
		credits += DIV_ROUND_UP(wr->piece[i].sgt.orig_nents, conn->max_sge);
	}
	if (credits > CLANQ_V_WR_CREDITS) {
		pr_notice_ratelimited("%s: a chunk of %llu bytes takes %u RDMA WRITEs, more than %u: lower clanq's rdma_max_xfer\n",
				      src->name, w->len, credits, CLANQ_V_WR_CREDITS);
		err = -EMSGSIZE;
		goto err_free;
	}
	b = clanq_vconn_take(conn, credits, true);
	if (IS_ERR(b)) {
		err = PTR_ERR(b);
		goto err_free;
	}
	msg.id = imp->region.id;
	msg.off = off - imp->first;
	msg.len = w->len;
	clanq_vconn_send_wr(conn, b, clanq_wmsg_put_region(b->data, CLANQ_WMSG_WROTE,
							   src->node, imp->region.remote_node,
							   &msg),
			    &send, &sge);

	mutex_lock(&conn->post);
	err = -ENXIO;
	if (READ_ONCE(conn->state) != CLANQ_PEER_UP)
		goto err_unlock;	/* the QP may be gone */
	head = &send;
	for (i = n; i-- > 0; ) {
		p = &wr->piece[i];
		err = rdma_rw_ctx_init(&p->rw, conn->cm_id->qp, conn->cm_id->port_num,
				       p->sgt.sgl, p->sgt.orig_nents, 0, p->raddr,
				       p->rkey, DMA_TO_DEVICE);
		if (err < 0)
			goto err_unlock;
		p->rw_ready = true;
		head = rdma_rw_ctx_wrs(&p->rw, conn->cm_id->qp, conn->cm_id->port_num,
				       NULL, head);
	}
	/* unsignaled; should one fail, the connection learns why */
	for (x = head; x != &send; x = x->next)
		x->wr_cqe = &conn->wr_cqe;
	refcount_inc(&w->ep->ref);
	wr->ep = w->ep;
	b->write = wr;
	/* a revocation waits for us; one before us is seen */
	down_read(&imp->region.revoke_sem);
	if (imp->region.revoked || ap->closed) {
		up_read(&imp->region.revoke_sem);
		clanq_kep_put(wr->ep);
		err = -ENXIO;
		goto err_unlock;
	}
	err = clanq_vconn_post_locked(conn, b, head, &bad);
	up_read(&imp->region.revoke_sem);
	if (!err) {
		mutex_unlock(&conn->post);
		return -EINPROGRESS;
	}
	clanq_kep_put(wr->ep);
	if (bad != head) {
		/* some WRITEs went: freed once flushed, by the teardown */
		wr->ep = NULL;
		spin_lock_irq(&conn->lock);
		list_add_tail(&wr->orphan, &conn->orphans);
		spin_unlock_irq(&conn->lock);
		mutex_unlock(&conn->post);
		return -ENXIO;
	}
	clanq_vwrite_unmap(wr, conn);
	mutex_unlock(&conn->post);
	kfree(wr);
	return READ_ONCE(conn->state) == CLANQ_PEER_UP ? err : -ENXIO;

err_unlock:
	b->write = NULL;
	clanq_vconn_give_back(conn, b);
	clanq_vwrite_unmap(wr, conn);
	mutex_unlock(&conn->post);
	kfree(wr);
	return err;
err_free:
	for (i = 0; i < n; i++)
		sg_free_table(&wr->piece[i].sgt);
	kfree(wr);
	/* a connection that ended took the import with it */
	return READ_ONCE(conn->state) == CLANQ_PEER_UP ? err : -ENXIO;
}

static const struct clanq_wire_ops clanq_v_ops = {
	.name		= "verbs",
	.owner		= THIS_MODULE,
	.reaches	= clanq_v_reaches,
	.send_oob	= clanq_v_send_oob,
	.import		= clanq_v_import,
	.rdma_write	= clanq_v_rdma_write,
};

/* ---- administration (peer.c calls these with nic->peers.lock held) ---- */

/* End every connection @match picks (their teardown is queued). */
static void clanq_v_kill_matching(bool (*match)(struct clanq_vconn *, const void *),
				  const void *arg, int err)
{
	struct clanq_vconn *conn, *found;
	unsigned long flags;

	do {
		found = NULL;
		spin_lock_irqsave(&clanq_v_lock, flags);
		list_for_each_entry(conn, &clanq_v_conns, node) {
			if (!READ_ONCE(conn->torn) && match(conn, arg)) {
				kref_get(&conn->ref);
				found = conn;
				break;
			}
		}
		spin_unlock_irqrestore(&clanq_v_lock, flags);
		if (found) {
			clanq_vconn_kill(found, err);
			clanq_vconn_put(found);
		}
	} while (found);
}

/* ... and wait until they are torn down (never from a CM handler). */
static void clanq_v_kill_where(bool (*match)(struct clanq_vconn *, const void *),
			       const void *arg, int err)
{
	clanq_v_kill_matching(match, arg, err);
	flush_workqueue(clanq_v_wq);
}

static bool clanq_v_of_nic(struct clanq_vconn *conn, const void *nic)
{
	return conn->nic == nic;
}

static bool clanq_v_of_peer(struct clanq_vconn *conn, const void *peer)
{
	return conn->peer == peer;
}

static bool clanq_v_on_device(struct clanq_vconn *conn, const void *dev)
{
	return conn->cm_id && conn->cm_id->device == dev;
}

static bool clanq_v_any(struct clanq_vconn *conn, const void *unused)
{
	return true;
}

/* The peer no longer holds its connection: the next use makes one. */
static void clanq_v_forget(struct clanq_peer *peer)
{
	struct clanq_vconn *conn;
	unsigned long flags;

	spin_lock_irqsave(&clanq_v_lock, flags);
	conn = peer->conn;
	peer->conn = NULL;
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	if (conn)
		clanq_vconn_put(conn);
}

static void clanq_v_forget_nic(struct clanq_nic *nic, u32 state)
{
	struct clanq_peer *peer;
	unsigned long node;

	xa_for_each(&nic->peers.xa, node, peer) {
		clanq_v_forget(peer);
		WRITE_ONCE(peer->state, state);
	}
}

static int clanq_v_bind(struct clanq_nic *nic, const char *dev, u32 port,
			const char **why)
{
	struct ib_device *ibdev;

	if (dev[0]) {
		ibdev = ib_device_get_by_name(dev, RDMA_DRIVER_UNKNOWN);
		if (!ibdev) {
			*why = "no RDMA device of that name";
			return -ENODEV;
		}
		if (!rdma_is_port_valid(ibdev, port)) {
			ib_device_put(ibdev);
			*why = "the device has no such port";
			return -EINVAL;
		}
		ib_device_put(ibdev);
	}
	/* a new binding: what went through the old one ends */
	clanq_v_kill_where(clanq_v_of_nic, nic, -ECONNABORTED);
	clanq_v_forget_nic(nic, CLANQ_PEER_IDLE);
	return 0;
}

static void clanq_v_peer_gone(struct clanq_nic *nic, struct clanq_peer *peer)
{
	clanq_v_kill_where(clanq_v_of_peer, peer, -ECONNABORTED);
	clanq_v_forget(peer);
}

/* The next export of @r over any connection, taken off its list; or NULL. */
static struct clanq_vexport *clanq_v_take_export(struct clanq_kregion *r,
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
			kref_get(&conn->ref);
			*connp = conn;
			break;
		}
	}
	spin_unlock_irq(&clanq_v_lock);
	return found;
}

/*
 * Exported region @r is being freed (its owner's ctx->lock held): every
 * registration of it goes (synchronously: no write lands after), then the
 * importer hears REVOKED, if its connection can still carry it.
 */
static void clanq_v_region_gone(struct clanq_kregion *r)
{
	struct clanq_wmsg_rgn rv = { .id = r->id };
	struct clanq_vexport *exp;
	struct clanq_vconn *conn;

	mutex_lock(&clanq_v_export_mutex);
	while ((exp = clanq_v_take_export(r, &conn))) {
		clanq_vexport_free(exp, conn->cm_id->device);
		spin_lock_irq(&conn->lock);
		conn->exports_busy--;
		spin_unlock_irq(&conn->lock);
		wake_up_all(&conn->wq);
		clanq_vconn_send_region(conn, CLANQ_WMSG_REVOKED, &rv, NULL, false);
		clanq_vconn_put(conn);
	}
	mutex_unlock(&clanq_v_export_mutex);
}

static const struct clanq_wire_admin clanq_v_admin = {
	.bind		= clanq_v_bind,
	.peer_gone	= clanq_v_peer_gone,
	.region_gone	= clanq_v_region_gone,
};

static struct clanq_wire clanq_v_wire = {
	.ops	= &clanq_v_ops,
	.admin	= &clanq_v_admin,
};

/* ---- RDMA devices: one going away ends what runs over it ---- */

static int clanq_v_add_one(struct ib_device *dev)
{
	return 0;
}

/*
 * Clients are removed in the reverse order of registration, so this runs
 * before the RDMA CM's own removal, which waits for every id on the
 * device to be destroyed: ours are, here.
 */
static void clanq_v_remove_one(struct ib_device *dev, void *client_data)
{
	if (!READ_ONCE(clanq_v_unloading))
		pr_info("clanq: %s is going away: closing the connections over it\n",
			dev->name);
	clanq_v_kill_where(clanq_v_on_device, dev, -ENODEV);
}

static struct ib_client clanq_v_client = {
	.name	= "clanq",
	.add	= clanq_v_add_one,
	.remove	= clanq_v_remove_one,
};

static int clanq_v_listen(void)
{
	struct sockaddr_in any = {
		.sin_family	= AF_INET,
		.sin_port	= htons(READ_ONCE(clanq_verbs_port)),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct rdma_cm_id *id;
	int err;

	id = rdma_create_id(&init_net, clanq_v_cm_handler, NULL, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	err = rdma_bind_addr(id, (struct sockaddr *)&any);
	if (!err)
		err = rdma_listen(id, 64);
	if (err) {
		pr_err("clanq_verbs: cannot listen on port %u: %d\n",
		       clanq_verbs_port, err);
		rdma_destroy_id(id);
		return err;
	}
	clanq_v_listener = id;
	return 0;
}

static int __init clanq_verbs_init(void)
{
	int err;

	if (!clanq_verbs_port || clanq_verbs_port > 65535) {
		pr_err("clanq_verbs: clanq's verbs_port=%u, must be 1..65535\n",
		       clanq_verbs_port);
		return -EINVAL;
	}
	clanq_v_wq = alloc_workqueue("clanq_verbs", WQ_UNBOUND, 0);
	if (!clanq_v_wq)
		return -ENOMEM;
	clanq_v_done_wq = alloc_workqueue("clanq_verbs_done", WQ_UNBOUND, 0);
	if (!clanq_v_done_wq) {
		destroy_workqueue(clanq_v_wq);
		return -ENOMEM;
	}
	err = ib_register_client(&clanq_v_client);
	if (err)
		goto err_wq;
	err = clanq_v_listen();
	if (err)
		goto err_client;
	clanq_wire_register(&clanq_v_wire);
	return 0;

err_client:
	ib_unregister_client(&clanq_v_client);
err_wq:
	destroy_workqueue(clanq_v_done_wq);
	destroy_workqueue(clanq_v_wq);
	return err;
}

static void __exit clanq_verbs_exit(void)
{
	unsigned int i;
	struct clanq_nic *nic;

	/* nobody routes through us now (and nobody holds us: we are unloading) */
	WRITE_ONCE(clanq_v_unloading, true);
	clanq_wire_unregister(&clanq_v_wire);
	rdma_destroy_id(clanq_v_listener);
	clanq_v_kill_where(clanq_v_any, NULL, -ECONNABORTED);
	for (i = 0; (nic = clanq_nic_by_index(i)); i++) {
		mutex_lock(&nic->peers.lock);
		clanq_v_forget_nic(nic, CLANQ_PEER_IDLE);
		mutex_unlock(&nic->peers.lock);
	}
	ib_unregister_client(&clanq_v_client);
	destroy_workqueue(clanq_v_wq);
	/* the engine was told of every chunk: nothing holds us after */
	destroy_workqueue(clanq_v_done_wq);
	WARN_ON(!list_empty(&clanq_v_conns));
}

module_init(clanq_verbs_init);
module_exit(clanq_verbs_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("clanq: the verbs wire (soft NICs on other hosts, over the kernel's RDMA core)");
MODULE_AUTHOR("The clanq developers");
