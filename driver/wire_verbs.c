// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire (clanq_verbs.ko): soft NICs on different hosts, over the
 * kernel's RDMA core (DESIGN section 1). We write no transport: a peer
 * node is reached through the in-kernel RDMA CM, on an RC queue pair,
 * on whatever RDMA device the NIC is bound to: a real RDMA NIC, or
 * rdma_rxe (RoCE over any Ethernet) or siw (iWARP over TCP).
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
 * What is not here yet: RDMA writes to regions of other hosts (import
 * returns -EOPNOTSUPP), and with them tripwires fired by remote writes.
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
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "clanq_drv.h"
#include "wire_msg.h"

MODULE_IMPORT_NS(CLANQ_WIRE);

#define CLANQ_V_SLOTS		128	/* sends, and receives, per connection */
#define CLANQ_V_RESOLVE_MS	2000
#define CLANQ_V_ACK_TIMEOUT	14	/* 4.096 us << 14: 67 ms per retry */

static unsigned int connect_ms = 5000;
module_param(connect_ms, uint, 0644);
MODULE_PARM_DESC(connect_ms, "How long a send waits for a connection to a peer to be made (milliseconds; default 5000)");

static unsigned int ack_ms = 3000;
module_param(ack_ms, uint, 0644);
MODULE_PARM_DESC(ack_ms, "How long sends may wait with not one of them acknowledged before the peer is taken for dead, checked at the next send; the provider's own retries decide first where they can (rxe restarts its retry timer at every send, so a steady sender would never see them run out) (milliseconds, 0: never; default 3000)");

struct clanq_vbuf {
	struct ib_cqe cqe;
	struct clanq_vconn *conn;
	void *data;
	u64 dma;
	u32 idx;
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
	u8 *bufs;			/* rx[] then tx[] data, one mapping */
	u64 bufs_dma;
	bool mapped;

	spinlock_t lock;		/* state, error, tx_free */
	u32 state;			/* CLANQ_PEER_* */
	int error;
	bool torn;			/* teardown queued */
	u32 nr_tx_free;
	u32 tx_free[CLANQ_V_SLOTS];
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
static struct rdma_cm_id *clanq_v_listener;
static bool clanq_v_unloading;	/* our exit: devices are not going away */

#define CLANQ_V_BUFS_SIZE	(2 * CLANQ_V_SLOTS * CLANQ_WMSG_MAX)

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

/*
 * End @conn with @err: DOWN, waiters woken, teardown queued once. The
 * peer shows the state while this is its connection.
 */
static void clanq_vconn_kill(struct clanq_vconn *conn, int err)
{
	unsigned long flags;
	bool queue = false, first = false;

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state != CLANQ_PEER_DOWN) {
		conn->state = CLANQ_PEER_DOWN;
		conn->error = err;
		first = true;
	}
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
			rdma_destroy_qp(id);
		}
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

static void clanq_vconn_tx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct clanq_vbuf *b = container_of(wc->wr_cqe, struct clanq_vbuf, cqe);
	struct clanq_vconn *conn = b->conn;
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	conn->tx_free[conn->nr_tx_free++] = b->idx;
	conn->tx_acked++;
	conn->tx_last_ack = jiffies;
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up(&conn->wq);
	if (wc->status != IB_WC_SUCCESS) {
		atomic64_inc(&conn->peer->send_errors);
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			clanq_vconn_kill(conn, clanq_vconn_wc_err(wc));
	}
	clanq_vconn_put(conn);	/* the send's */
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

static bool clanq_vconn_can_send(struct clanq_vconn *conn)
{
	return READ_ONCE(conn->nr_tx_free) ||
	       READ_ONCE(conn->state) != CLANQ_PEER_UP;
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
	struct ib_sge sge;
	struct ib_send_wr wr = {};
	struct clanq_vbuf *b;
	unsigned long flags;
	long left, timeout = msecs_to_jiffies(READ_ONCE(connect_ms));
	int err;

	if (wait) {
		left = wait_event_killable_timeout(conn->wq, clanq_vconn_can_send(conn),
						   timeout);
		if (left < 0)
			return left;
		if (!left) {
			/*
			 * Every send of the queue unacknowledged for connect_ms:
			 * the peer is gone (rxe re-arms its retransmit timer on
			 * each new send, so a steady sender never sees retries
			 * run out), and so is the connection.
			 */
			clanq_vconn_kill(conn, -ETIMEDOUT);
			return -ETIMEDOUT;
		}
	}
	mutex_lock(&conn->post);
	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state != CLANQ_PEER_UP) {
		err = conn->error ?: -ECONNRESET;
		spin_unlock_irqrestore(&conn->lock, flags);
		mutex_unlock(&conn->post);
		return err;
	}
	if (clanq_vconn_stalled(conn)) {
		spin_unlock_irqrestore(&conn->lock, flags);
		mutex_unlock(&conn->post);
		clanq_vconn_kill(conn, -ETIMEDOUT);
		return -ETIMEDOUT;
	}
	if (!conn->nr_tx_free) {
		spin_unlock_irqrestore(&conn->lock, flags);
		mutex_unlock(&conn->post);
		return -ENOBUFS;
	}
	b = &conn->tx[conn->tx_free[--conn->nr_tx_free]];
	conn->tx_when[conn->tx_posted++ % CLANQ_V_SLOTS] = jiffies;
	spin_unlock_irqrestore(&conn->lock, flags);

	sge.addr = b->dma;
	sge.length = clanq_wmsg_put_oob(b->data, type, dst, msg);
	sge.lkey = conn->pd->local_dma_lkey;
	ib_dma_sync_single_for_device(conn->cm_id->device, b->dma, sge.length,
				      DMA_BIDIRECTIONAL);
	b->cqe.done = clanq_vconn_tx_done;
	wr.wr_cqe = &b->cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED;
	kref_get(&conn->ref);	/* the send's, until it completes */
	err = ib_post_send(conn->cm_id->qp, &wr, NULL);
	mutex_unlock(&conn->post);
	if (err) {
		spin_lock_irqsave(&conn->lock, flags);
		conn->tx_free[conn->nr_tx_free++] = b->idx;
		spin_unlock_irqrestore(&conn->lock, flags);
		clanq_vconn_put(conn);
		clanq_vconn_kill(conn, err);
	}
	return err;
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
	conn->cq = ib_alloc_cq(dev, conn, 2 * (CLANQ_V_SLOTS + 1), 0,
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
	attr.cap.max_send_wr = CLANQ_V_SLOTS + 1;
	attr.cap.max_recv_wr = CLANQ_V_SLOTS + 1;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_ALL_WR;
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

static struct clanq_kregion *clanq_v_import(struct clanq_nic *src,
					    const struct clanq_addr *region,
					    int *err)
{
	*err = -EOPNOTSUPP;
	return NULL;
}

static int clanq_v_rdma_write(struct clanq_nic *src,
			      const struct clanq_wire_write *w)
{
	return -EOPNOTSUPP;	/* no aperture is ever imported through us */
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

static const struct clanq_wire_admin clanq_v_admin = {
	.bind		= clanq_v_bind,
	.peer_gone	= clanq_v_peer_gone,
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
	WARN_ON(!list_empty(&clanq_v_conns));
}

module_init(clanq_verbs_init);
module_exit(clanq_verbs_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("clanq: the verbs wire (soft NICs on other hosts, over the kernel's RDMA core)");
MODULE_AUTHOR("The clanq developers");
