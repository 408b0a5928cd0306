// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire's connections: made through the RDMA CM, set up, torn
 * down.
 *
 * A NIC connects to a peer node on first use and keeps one RC QP to it
 * ("active"); the peer accepts it ("passive") and answers on it only
 * what concerns the messages it carried (an OOB message that found no
 * endpoint comes back). Each direction of traffic thus has its own QP
 * and there is no race between two hosts connecting to each other at
 * once. The connection request carries a hello (wire_msg.h): the passive
 * side accepts only a node the NIC asked for has as a peer, from that
 * peer's address, on the device the NIC is bound to.
 *
 * Failures. A send or receive that completes with an error, a
 * disconnect, a rejected or unanswered request, or the device going
 * away ends the connection: its state goes DOWN with the error (what
 * clanqctl and PEER_LIST show), waiting senders are woken with it, and
 * a work item tears down the QP, CQ, PD and CM id, in that order (never
 * in the CM's handler, which cannot destroy its own id). The next send
 * to the peer makes a new connection. Sends already posted when a
 * connection fails are lost and counted (send_errors), as a NIC would.
 */
#include <linux/in.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/ib_cm.h>

#include "verbs.h"

static void clanq_vconn_release(struct kref *ref)
{
	struct clanq_vconn *conn = container_of(ref, struct clanq_vconn, ref);

	clanq_kpeer_put(conn->peer);
	ida_destroy(&conn->imm_slots);
	kvfree(conn->sent);
	kfree(conn->bufs);
	kfree(conn);
}

void clanq_vconn_put(struct clanq_vconn *conn)
{
	kref_put(&conn->ref, clanq_vconn_release);
}

const char *clanq_vconn_devname(const struct clanq_vconn *conn)
{
	return conn->cm_id && conn->cm_id->device ? conn->cm_id->device->name :
	       conn->dev[0] ? conn->dev : "-";
}

/*
 * End @conn with @err: DOWN, waiters woken, teardown queued once. The
 * peer shows the state while this is its connection.
 */
void clanq_vconn_kill(struct clanq_vconn *conn, int err)
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
		clanq_vimport_settle(p, err ?: -ECONNRESET);
	if (!conn->torn) {
		conn->torn = true;
		queue = true;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up_all(&conn->wq);
	if (first && conn->active) {
		spin_lock_irqsave(&clanq_v_lock, flags);
		if (conn->peer->conn == conn)
			clanq_kpeer_set_state(conn->peer, CLANQ_PEER_DOWN, err);
		spin_unlock_irqrestore(&clanq_v_lock, flags);
		if (err && err != -ECONNABORTED)
			pr_notice_ratelimited("%s: %s: peer %u (%pI4:%u): connection down: %d\n",
					      conn->nic->name, clanq_vconn_devname(conn),
					      conn->peer->node, &conn->peer->ipv4,
					      conn->peer->port, err);
	}
	if (queue) {
		clanq_vconn_get(conn);	/* the teardown's */
		queue_work(clanq_v_wq, &conn->teardown);
	}
}

/* End every connection @match picks (their teardown is queued). */
static void clanq_vconn_kill_matching(bool (*match)(struct clanq_vconn *, const void *),
				      const void *arg, int err)
{
	struct clanq_vconn *conn, *found;
	unsigned long flags;

	do {
		found = NULL;
		spin_lock_irqsave(&clanq_v_lock, flags);
		list_for_each_entry(conn, &clanq_v_conns, node) {
			if (!READ_ONCE(conn->torn) && match(conn, arg)) {
				clanq_vconn_get(conn);
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
void clanq_vconn_kill_where(bool (*match)(struct clanq_vconn *, const void *),
			    const void *arg, int err)
{
	clanq_vconn_kill_matching(match, arg, err);
	flush_workqueue(clanq_v_wq);
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
	/* chunks still waiting for a slot: never posted, the engine hears */
	cancel_delayed_work_sync(&conn->retry);
	clanq_vwrite_fail_waiting(conn);

	id = conn->cm_id;
	if (id) {
		if (conn->have_qp) {
			rdma_disconnect(id);
			ib_drain_qp(id->qp);
			/* flushed: their mappings go with the QP's */
			clanq_vwrite_free_orphans(conn);
			rdma_destroy_qp(id);
		}
		/* nothing the device does writes into them any more */
		clanq_vexport_free_all(conn);
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
	clanq_vimport_revoke(conn, false, 0);
	spin_lock_irqsave(&clanq_v_lock, flags);
	list_del_init(&conn->node);
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	clanq_vconn_put(conn);	/* the teardown's */
	clanq_vconn_put(conn);	/* the list's */
}

static struct clanq_vconn *clanq_vconn_alloc(struct clanq_nic *nic,
					     struct clanq_kpeer *peer, bool active)
{
	struct clanq_vconn *conn;
	unsigned long flags;
	u32 i;

	conn = kzalloc(sizeof(*conn), GFP_KERNEL);
	if (!conn)
		return NULL;
	conn->bufs = kzalloc(CLANQ_V_BUFS_SIZE, GFP_KERNEL);
	/* what our OOB messages' UNREACHABLEs are checked against */
	if (active)
		conn->sent = kvcalloc(CLANQ_V_SENT, sizeof(*conn->sent), GFP_KERNEL);
	if (!conn->bufs || (active && !conn->sent)) {
		kvfree(conn->sent);
		kfree(conn->bufs);
		kfree(conn);
		return NULL;
	}
	kref_init(&conn->ref);		/* the list's */
	conn->nic = nic;
	clanq_kpeer_get(peer);
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
	INIT_LIST_HEAD(&conn->held);
	ida_init(&conn->imm_slots);
	INIT_LIST_HEAD(&conn->orphans);
	INIT_LIST_HEAD(&conn->waiting);
	INIT_DELAYED_WORK(&conn->retry, clanq_vwrite_retry);
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

static void clanq_vconn_qp_event(struct ib_event *ev, void *ctx)
{
	struct clanq_vconn *conn = ctx;

	/*
	 * siw raises QP_FATAL when its stream failed under a request (the
	 * peer's TERMINATE closed it, or a reset): the connection's end,
	 * as its CM says in DISCONNECTED, whichever comes first
	 */
	if (ev->event == IB_EVENT_QP_FATAL &&
	    rdma_protocol_iwarp(ev->device, ev->element.qp->port))
		clanq_vconn_kill(conn, -ECONNRESET);
	else if (ev->event == IB_EVENT_QP_FATAL ||
		 ev->event == IB_EVENT_QP_ACCESS_ERR)
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
	/*
	 * READs into a region's pages: on iWARP their sink is registered,
	 * from a pool of MRs rdma_rw keeps with the QP (and more send queue
	 * entries it adds itself); elsewhere this only adds entries
	 */
	attr.port_num = id->port_num;
	attr.cap.max_rdma_ctxs = CLANQ_V_RDMA_CTXS;
	/* only SENDs and READ chunks complete: what goes ahead of them does not */
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	err = rdma_create_qp(id, conn->pd, &attr);
	if (err)
		return err;
	conn->have_qp = true;
	/* iWARP has no immediate data: its writes keep the WROTE */
	conn->imm = !rdma_protocol_iwarp(dev, id->port_num);

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

/* An older passive connection of @fresh's NIC from @fresh's peer? */
static bool clanq_vconn_superseded_by(struct clanq_vconn *conn, const void *fresh)
{
	const struct clanq_vconn *f = fresh;

	return conn != f && !conn->active && conn->nic == f->nic &&
	       conn->peer == f->peer;
}

void clanq_vconn_up(struct clanq_vconn *conn, struct rdma_cm_id *id)
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
		clanq_vconn_kill_matching(clanq_vconn_superseded_by, conn, -ECONNRESET);
	if (!up || !conn->active)
		return;
	if (src->sin_family == AF_INET) {
		spin_lock(&conn->nic->peers.bind_lock);
		conn->nic->peers.src_ipv4 = src->sin_addr.s_addr;
		spin_unlock(&conn->nic->peers.bind_lock);
	}
	spin_lock_irqsave(&clanq_v_lock, flags);
	if (conn->peer->conn == conn)
		clanq_kpeer_set_state(conn->peer, CLANQ_PEER_UP, 0);
	spin_unlock_irqrestore(&clanq_v_lock, flags);
}

static int clanq_vconn_accept(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct sockaddr_in *from = (struct sockaddr_in *)&id->route.addr.dst_addr;
	struct rdma_conn_param param = {};
	struct clanq_vconn *conn;
	struct clanq_kpeer *peer;
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
	peer = clanq_kpeer_lookup(nic, src_node);
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
			clanq_kpeer_put(peer);
		return -EPERM;
	}

	conn = clanq_vconn_alloc(nic, peer, false);
	clanq_kpeer_put(peer);
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
		/* the READs and atomics each side may have in flight */
		param.responder_resources =
			min_t(u32, ev->param.conn.initiator_depth,
			      id->device->attrs.max_qp_rd_atom);
		param.initiator_depth =
			min_t(u32, ev->param.conn.responder_resources,
			      id->device->attrs.max_qp_init_rd_atom);
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
	/* READs and atomics in flight: as many as both ends allow */
	param.initiator_depth = min_t(u32, CLANQ_V_RD_ATOM,
				      id->device->attrs.max_qp_init_rd_atom);
	param.responder_resources = min_t(u32, CLANQ_V_RD_ATOM,
					  id->device->attrs.max_qp_rd_atom);
	return rdma_connect_locked(id, &param);
}

int clanq_vconn_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct clanq_vconn *conn = id->context;
	int err = 0;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return clanq_vconn_accept(id, ev);
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
		/* 0: added before this wire was loaded, so it is ours */
		.sin_port	= htons(conn->peer->port ?: clanq_v_port),
		.sin_addr.s_addr = conn->peer->ipv4,
	};
	struct rdma_cm_id *id;
	int err;

	mutex_lock(&conn->cm_mutex);
	if (conn->dead) {
		mutex_unlock(&conn->cm_mutex);
		return -ECONNABORTED;
	}
	id = rdma_create_id(&init_net, clanq_vconn_cm_handler, conn, RDMA_PS_TCP,
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
 * is none or the last one failed, then waited for (clanq_v_connect_ms at most).
 */
struct clanq_vconn *clanq_vconn_connect(struct clanq_nic *nic,
					struct clanq_kpeer *peer)
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
		clanq_vconn_get(conn);
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
		clanq_vconn_get(conn);
		spin_unlock_irqrestore(&clanq_v_lock, flags);
		clanq_vconn_kill(fresh, -ECONNABORTED);
		goto wait;
	}
	old = conn;
	clanq_vconn_get(fresh);		/* the peer's */
	peer->conn = fresh;
	clanq_kpeer_set_state(peer, CLANQ_PEER_CONNECTING, 0);
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	if (old)
		clanq_vconn_put(old);	/* was the peer's */
	conn = fresh;
	clanq_vconn_get(conn);		/* the caller's */
	err = clanq_vconn_start(conn);
	if (err)
		clanq_vconn_kill(conn, err);

wait:
	left = wait_event_killable_timeout(conn->wq, clanq_vconn_settled(conn),
					   msecs_to_jiffies(READ_ONCE(clanq_v_connect_ms)));
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
