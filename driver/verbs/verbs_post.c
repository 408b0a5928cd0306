// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire's traffic on a connection: posting sends (with the
 * WRITEs and REG_MRs that go ahead of them), their completions, and
 * receives.
 *
 * OOB messages are SENDs into receives posted ahead (CLANQ_V_SLOTS of
 * each per connection); every message is decoded and checked
 * (wire_msg.h) before the shared receive path, clanq_rx_oob(), sees it,
 * and its source node is the connection's, whatever it says. WRITEs and
 * REG_MRs are unsignaled; they take send queue entries (credits) that
 * come back with the SEND they went ahead of.
 */
#include <linux/ratelimit.h>
#include <linux/slab.h>

#include "verbs.h"

/*
 * What peers send that is dropped is logged under one budget, not one
 * per kind: a hostile peer sends every kind at once, and must not make
 * the console (a debug VM's serial one takes milliseconds a line) what
 * holds up everyone's receive completions. The counters count it all.
 */
static DEFINE_RATELIMIT_STATE(clanq_v_drop_rs, 5 * HZ, 5);
#define clanq_vdrop_notice(fmt, ...) do {				\
		if (__ratelimit(&clanq_v_drop_rs))			\
			pr_notice(fmt, ##__VA_ARGS__);			\
	} while (0)

int clanq_vconn_post_recv(struct clanq_vconn *conn, struct clanq_vbuf *b)
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

static int clanq_vconn_wc_err(const struct clanq_vconn *conn,
			      const struct ib_wc *wc)
{
	switch (wc->status) {
	case IB_WC_RETRY_EXC_ERR:
	case IB_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IB_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	case IB_WC_LOC_QP_OP_ERR:
		/*
		 * siw: the stream failed under the request (the peer's
		 * TERMINATE closed it, or a reset): the connection's end
		 */
		if (rdma_protocol_iwarp(conn->cm_id->device, conn->cm_id->port_num))
			return -ECONNRESET;
		return -EIO;
	default:
		return -EIO;
	}
}

/* A send slot and the entries that went ahead of it are free again. */
void clanq_vconn_give_back(struct clanq_vconn *conn, struct clanq_vbuf *b)
{
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	conn->tx_free[conn->nr_tx_free++] = b->idx;
	conn->nr_wr_free += b->credits;
	b->credits = 0;
	/* a chunk waits for this: under the lock it added itself with */
	if (!list_empty(&conn->waiting) && conn->state == CLANQ_PEER_UP)
		clanq_vwrite_retry_queue(conn, true);
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up(&conn->wq);
}

void clanq_vconn_tx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct clanq_vbuf *b = container_of(wc->wr_cqe, struct clanq_vbuf, cqe);
	struct clanq_vconn *conn = b->conn;
	struct clanq_vwrite *wr = b->write;
	int err = wc->status == IB_WC_SUCCESS ? 0 : clanq_vconn_wc_err(conn, wc);
	unsigned long flags;

	/*
	 * A READ chunk's last READ or a WRITE with immediate completes here
	 * itself: the exporter's device refused its rkey (revoked), as
	 * clanq_vconn_wr_failed() says for the work requests ahead of a SEND
	 */
	if (wc->status == IB_WC_REM_ACCESS_ERR) {
		err = -ENXIO;
		cmpxchg(&conn->wr_error, 0, err);
	}
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
		 * a refused rkey by a TERMINATE, not on the WRITE; a READ
		 * chunk's own last READ completes here, a refused rkey
		 * among them), and the import with it: -ENXIO, but for a
		 * peer that stopped answering (-ETIMEDOUT).
		 */
		wr->status = !err ? 0 : READ_ONCE(conn->wr_error) ?:
			     err == -ETIMEDOUT ? err : -ENXIO;
		clanq_vwrite_unmap(wr, conn);
		/* an atomic's old value: in order, before this completion */
		if (!wr->status && wr->result)
			*wr->result = READ_ONCE(*wr->old);
		/* an idle engine hears now; a busy one from the work queue */
		if (clanq_engine_write_done_now(wr->ep, wr->chunk, wr->status)) {
			clanq_kep_put(wr->ep);
			clanq_vwrite_release(wr);
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
void clanq_vconn_wr_failed(struct ib_cq *cq, struct ib_wc *wc)
{
	struct clanq_vconn *conn = container_of(wc->wr_cqe, struct clanq_vconn,
						wr_cqe);
	int err;

	if (wc->status == IB_WC_SUCCESS || wc->status == IB_WC_WR_FLUSH_ERR)
		return;
	/* the exporter's device refused the rkey: deregistered, revoked */
	err = wc->status == IB_WC_REM_ACCESS_ERR ? -ENXIO : clanq_vconn_wc_err(conn, wc);
	/*
	 * The connection ended, or had ended already: this is what its end
	 * did to a request under way, not why (siw completes the WRITE it was
	 * sending when a TERMINATE came with a local QP error, not a flush);
	 * its chunk fails as every other one of it (-ENXIO)
	 */
	if (err == -ECONNRESET ||
	    (READ_ONCE(conn->state) == CLANQ_PEER_DOWN && err != -ENXIO)) {
		clanq_vconn_kill(conn, err);
		pr_debug_ratelimited("%s: %s: peer %u: an RDMA write or memory registration failed after the connection ended: %s\n",
				     conn->nic->name, clanq_vconn_devname(conn),
				     conn->peer->node, ib_wc_status_msg(wc->status));
		return;
	}
	cmpxchg(&conn->wr_error, 0, err);
	pr_notice_ratelimited("%s: %s: peer %u: an RDMA write or memory registration failed: %s\n",
			      conn->nic->name, clanq_vconn_devname(conn),
			      conn->peer->node, ib_wc_status_msg(wc->status));
	clanq_vconn_kill(conn, err);
}

/*
 * Have sends been waiting for clanq_v_ack_ms with not one completing? (A long
 * queue that drains slowly is progress, not a dead peer.) conn->lock held.
 */
bool clanq_vconn_stalled(struct clanq_vconn *conn)
{
	unsigned int ms = READ_ONCE(clanq_v_ack_ms);
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
 * waits for them (clanq_v_connect_ms at most, and may be killed); without, a
 * full queue is -ENOBUFS.
 */
struct clanq_vbuf *clanq_vconn_take(struct clanq_vconn *conn,
				    u32 credits, bool wait)
{
	long left, timeout = msecs_to_jiffies(READ_ONCE(clanq_v_connect_ms));
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
			 * Every send of the queue unacknowledged for clanq_v_connect_ms:
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
struct ib_send_wr *clanq_vconn_send_wr(struct clanq_vconn *conn,
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
int clanq_vconn_post_locked(struct clanq_vconn *conn, struct clanq_vbuf *b,
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
		clanq_vconn_get(conn);	/* the send's, until it completes */
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

	mutex_lock(&conn->post);
	/*
	 * The PD and the device are the connection's while it is up: the
	 * teardown frees them after it passed conn->post, and the state
	 * never comes back up. So the SEND is made here, not before the
	 * lock; down, clanq_vconn_post_locked() posts nothing and says so.
	 */
	if (READ_ONCE(conn->state) == CLANQ_PEER_UP) {
		clanq_vconn_send_wr(conn, b, len, &send, &sge);
		if (ahead)
			ahead->next = &send;
	}
	err = clanq_vconn_post_locked(conn, b, ahead ?: &send, &bad);
	mutex_unlock(&conn->post);
	return err;
}

/*
 * Remember the OOB message @msg to @dst, about to go on @conn (active)
 * as its seq, returned: only it may be answered by that seq.
 */
static u32 clanq_vconn_remember(struct clanq_vconn *conn,
				const struct clanq_addr *dst,
				const struct clanq_oob_msg *msg)
{
	struct clanq_vsent *s;
	unsigned long flags;
	u32 seq;

	spin_lock_irqsave(&conn->lock, flags);
	seq = conn->next_seq++;
	s = &conn->sent[seq % CLANQ_V_SENT];
	s->seq = seq;
	s->src_id = msg->src.id;
	s->dst_id = dst->id;
	s->type = msg->type;
	s->len = min_t(u32, msg->len, CLANQ_OOB_PAYLOAD);
	/* what went: zeros beyond it, as the receiver decoded it */
	memset(s->head, 0, sizeof(s->head));
	memcpy(s->head, msg->payload, min_t(u32, s->len, sizeof(s->head)));
	s->live = true;
	spin_unlock_irqrestore(&conn->lock, flags);
	return seq;
}

/* ... and forget it: it never went. */
static void clanq_vconn_forget(struct clanq_vconn *conn, u32 seq)
{
	struct clanq_vsent *s = &conn->sent[seq % CLANQ_V_SENT];
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	if (s->seq == seq)
		s->live = false;
	spin_unlock_irqrestore(&conn->lock, flags);
}

/*
 * Post one message on @conn: an OOB message (@type CLANQ_WMSG_OOB, which
 * an active connection remembers and numbers itself) or one coming back
 * (CLANQ_WMSG_UNREACHABLE, echoing the @seq of the one it answers). With
 * @wait, a caller in process context waits for a free slot (and may be
 * killed); without, a full send queue is -ENOBUFS.
 */
int clanq_vconn_send(struct clanq_vconn *conn, u8 type,
		     const struct clanq_addr *dst,
		     const struct clanq_oob_msg *msg, u32 seq, bool wait)
{
	struct clanq_vbuf *b = clanq_vconn_take(conn, 0, wait);
	bool mine = type == CLANQ_WMSG_OOB && conn->sent;
	int err;

	if (IS_ERR(b))
		return PTR_ERR(b);
	if (mine)
		seq = clanq_vconn_remember(conn, dst, msg);
	err = clanq_vconn_post(conn, b,
			       clanq_wmsg_put_oob(b->data, type, dst, msg, seq),
			       NULL);
	if (err && mine)
		clanq_vconn_forget(conn, seq);
	return err;
}

#ifdef CLANQ_TEST_KNOBS
/* Test builds: send @len bytes as they are (verbs_hostile.c's garbage). */
int clanq_vconn_send_raw(struct clanq_vconn *conn, const void *buf, size_t len)
{
	struct clanq_vbuf *b;

	if (!len || len > CLANQ_WMSG_MAX)
		return -EMSGSIZE;
	b = clanq_vconn_take(conn, 0, false);
	if (IS_ERR(b))
		return PTR_ERR(b);
	memcpy(b->data, buf, len);
	return clanq_vconn_post(conn, b, len, NULL);
}
#endif

/* Post a region message of @type to the peer, after @ahead (or NULL). */
int clanq_vconn_send_region(struct clanq_vconn *conn, u8 type,
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

/*
 * @m, an UNREACHABLE that came back on @conn (active), answers the OOB
 * message it names by seq: the one we sent as that seq, from the
 * endpoint and to the one it says, not answered before. That message
 * is taken (each is answered once) and written to @dst and @msg as our
 * record of it says; false if there is none.
 */
static bool clanq_vconn_answers(struct clanq_vconn *conn,
				const struct clanq_wmsg *m,
				struct clanq_addr *dst, struct clanq_oob_msg *msg)
{
	struct clanq_vsent *s = &conn->sent[m->seq % CLANQ_V_SENT];
	unsigned long flags;
	bool ok;

	spin_lock_irqsave(&conn->lock, flags);
	ok = s->live && s->seq == m->seq && s->src_id == m->oob.src.id &&
	     s->dst_id == m->dst_id;
	if (ok) {
		s->live = false;
		memset(msg, 0, sizeof(*msg));
		msg->src.node = conn->nic->node;
		msg->src.id = s->src_id;
		msg->type = s->type;
		msg->len = s->len;
		memcpy(msg->payload, s->head, sizeof(s->head));
		dst->node = conn->peer->node;
		dst->id = s->dst_id;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	return ok;
}

/* A message @conn received, decoded: where it goes, if anywhere. */
static void clanq_vconn_deliver(struct clanq_vconn *conn, struct clanq_wmsg *m)
{
	struct clanq_kpeer *peer = conn->peer;
	struct clanq_addr dst = { m->dst_node, m->dst_id };
	struct clanq_oob_msg sent;
	bool back;

	switch (m->type) {
	case CLANQ_WMSG_OOB:
		/* the source is the connection's, not what the bytes say */
		if (conn->active || m->src_node != peer->node ||
		    m->dst_node != conn->nic->node)
			break;
		atomic64_inc(&peer->oob_received);
		back = clanq_rx_oob(conn->nic, m->dst_id, &m->oob) == -ENOENT;
		/* back on the same QP, with its seq; dropped if it is full */
		if (back)
			clanq_vconn_send(conn, CLANQ_WMSG_UNREACHABLE, &dst,
					 &m->oob, m->seq, false);
		clanq_vhostile_saw(conn, m, back);
		return;
	case CLANQ_WMSG_UNREACHABLE:
		/* one of ours, to this peer, came back */
		if (!conn->active || m->dst_node != peer->node ||
		    m->src_node != conn->nic->node)
			break;
		/* test builds: the old rule, which the pair stage shows failing */
		if (clanq_v_trusting()) {
			clanq_oob_unreachable(conn->nic, &dst, &m->oob);
			return;
		}
		/*
		 * Only to the endpoint that sent the message it answers, once,
		 * saying what we sent: the peer names a message, never an
		 * endpoint of ours (issue 28, item 7)
		 */
		if (!clanq_vconn_answers(conn, m, &dst, &sent)) {
			atomic64_inc(&clanq_v_notices_forged);
			clanq_vdrop_notice("%s: %s: peer %u: UNREACHABLE for message %u from endpoint %u to %u: no such message of ours waits for one; dropped\n",
					   conn->nic->name, clanq_vconn_devname(conn),
					   peer->node, m->seq, m->oob.src.id, m->dst_id);
			return;
		}
		clanq_oob_unreachable(conn->nic, &dst, &sent);
		return;
	case CLANQ_WMSG_IMPORT:
	case CLANQ_WMSG_WROTE:
		/* the importer's, on the connection it made to us */
		if (conn->active || m->src_node != peer->node ||
		    m->dst_node != conn->nic->node)
			break;
		if (m->type == CLANQ_WMSG_IMPORT)
			clanq_vexport_grant(conn, &m->rgn);
		else
			clanq_vexport_wrote(conn, &m->rgn);
		return;
	case CLANQ_WMSG_GRANT:
	case CLANQ_WMSG_REFUSE:
	case CLANQ_WMSG_REVOKED:
		/* the exporter's, back on the connection we made */
		if (!conn->active || m->src_node != peer->node ||
		    m->dst_node != conn->nic->node)
			break;
		if (m->type == CLANQ_WMSG_REVOKED)
			clanq_vimport_revoke(conn, true, m->rgn.id);
		else
			clanq_vimport_granted(conn, m->type, &m->rgn);
		return;
	}
	atomic64_inc(&clanq_v_rx_misdirected);
	clanq_vdrop_notice("%s: %s: peer %u: message type %u from node %u to %u: not this connection's; dropped\n",
			   conn->nic->name, clanq_vconn_devname(conn), peer->node,
			   m->type, m->src_node, m->dst_node);
}

void clanq_vconn_rx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct clanq_vbuf *b = container_of(wc->wr_cqe, struct clanq_vbuf, cqe);
	struct clanq_vconn *conn = b->conn;
	struct clanq_wmsg m;
	int err;

	if (wc->status != IB_WC_SUCCESS) {
		/*
		 * A write with immediate that our device refused (its region
		 * was revoked: deregistered) completes the receive it took
		 * with this, and the QP is in error. The writer learns it
		 * from its own completion (-ENXIO) and ends the connection, as
		 * for a plain WRITE, which our side never sees: ending it here
		 * too would race that and tell the writer -ECONNRESET instead.
		 */
		if (wc->status != IB_WC_WR_FLUSH_ERR &&
		    wc->status != IB_WC_REM_ACCESS_ERR)
			clanq_vconn_kill(conn, clanq_vconn_wc_err(conn, wc));
		return;
	}
	/*
	 * The peer sends once it is established, and its first message may
	 * come before our CM hears the RTU: it is established here too, or
	 * our answer (an import's grant) would find the connection not up.
	 */
	if (!conn->active && READ_ONCE(conn->state) == CLANQ_PEER_CONNECTING)
		clanq_vconn_up(conn, conn->cm_id);
	/* a write that says itself what it wrote: nothing in the buffer */
	if (wc->opcode == IB_WC_RECV_RDMA_WITH_IMM) {
		clanq_vexport_wrote_imm(conn, be32_to_cpu(wc->ex.imm_data),
					wc->byte_len);
		goto again;
	}
	ib_dma_sync_single_for_cpu(conn->cm_id->device, b->dma, CLANQ_WMSG_MAX,
				   DMA_BIDIRECTIONAL);
	err = clanq_wmsg_get(b->data, wc->byte_len, &m);
	if (err) {
		atomic64_inc(&clanq_v_rx_malformed);
		clanq_vdrop_notice("%s: %s: peer %u: malformed message of %u bytes (%d); dropped\n",
				   conn->nic->name, clanq_vconn_devname(conn),
				   conn->peer->node, wc->byte_len, err);
	} else {
		clanq_vconn_deliver(conn, &m);
	}
again:
	/* a test build's deaf peer: the sender's next sends find no receive */
	if (READ_ONCE(conn->state) != CLANQ_PEER_DOWN && !clanq_v_deaf()) {
		err = clanq_vconn_post_recv(conn, b);
		if (err)
			clanq_vconn_kill(conn, err);
	}
}
