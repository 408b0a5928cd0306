// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA engine (paper sections 2 and 3.2): request queues in, one
 * engine per NIC, completion queues out.
 *
 * Request queue (application -> engine). The application produces
 * struct clanq_rdma_req slots; the engine is the consumer, with its index
 * and the geometry private (queue.h). Each slot is copied into the
 * engine's private clanq_rdma_xfer before anything looks at it, then
 * validated once: ids are looked up in the requester's own context,
 * rights and bounds are checked with overflow-safe arithmetic. A bad
 * request completes with an error status and the queue moves on.
 *
 * Need-wakeup. The segment's need_wakeup word is the engine's sleep
 * flag (AF_XDP's XDP_RING_NEED_WAKEUP): set while the engine is not
 * looking at the queue. The engine sets it, issues a full barrier and
 * looks at the queue once more before letting the queue go
 * (clanq_rdma_requeue()); the application publishes a request, issues a
 * full barrier and rings the doorbell (CLANQ_IOC_RDMA_KICK) only if the
 * flag is set. At least one of them sees the other's store (queue.h,
 * pairing [A]), so a request is never left unseen, and a stream of
 * requests rings once. The kernel never reads the flag back: its own
 * state is clanq_kep_rdma.active, under engine->lock, which the kick and
 * the final look both take, so a kick cannot slip between them.
 *
 * Completion queue (engine -> application). A request is taken only
 * while the completion queue has a free slot for it and for every
 * request taken before it and not yet completed (the window below may
 * hold several), so a completion always has room: none is dropped. A
 * full completion queue stops that queue, nobody else's; freeing a slot
 * rings the doorbell from clanq_rdma_poll() if requests are waiting
 * (pairing [B] of queue.h).
 *
 * The copy. The engine does not touch memory itself: each chunk goes to
 * the wire that reaches the aperture's exporter (wire.c), and every wire
 * ends in clanq_rx_write() (rx.c), the receive path, which checks
 * that source and destination are still live, copies, and checks
 * tripwires. Validation here checks only the request's fields.
 *
 * Operations. A READ goes the other way (aperture -> the request's
 * region) and is chunked, split and scheduled exactly as a write is; it
 * ends in clanq_rx_read(). CAS and FADD are one 8-byte chunk each and
 * end in clanq_rx_atomic(); the old value travels in the xfer
 * (clanq_rdma_xfer.result) to the completion.
 *
 * The engine is a kernel thread per NIC, not a workqueue: it is one
 * serial resource, as a NIC's DMA engine is, and the round-robin over
 * active queues is its whole state machine. A thread keeps that in one
 * place and in one loop, sleeps on its wait queue when no queue is
 * active, shows up as clanqN-rdma with its own CPU time, and does not
 * compete with unrelated work items on a shared pool. KUnit's NICs have
 * no thread and step the engine by hand (clanq_engine_step()).
 *
 * The window. A wire may take a chunk and complete it later
 * (-EINPROGRESS: a remote one, on its send completion). The engine then
 * goes on with the queue's next chunks, up to rdma_window of them
 * out at once, as long as they go through the same aperture: one
 * connection carries them, and RC lands a QP's requests in the order
 * they were posted, so "requests land in queue order" holds without the
 * engine waiting a round trip per chunk (a small message over another
 * host was two round trips, record and tail, and a fetch-and-add stream
 * one per atomic). A chunk through another aperture, a FENCE request
 * and anything past a full window wait until the window has room or is
 * empty: the queue is parked, off the line and still "active", and the
 * wire's report (clanq_engine_write_done(), naming the chunk) puts it
 * back in line. Reports may come in any order (a wire's handler that
 * finds the engine busy defers its report); chunks retire in the order
 * they were given out, and the request a final chunk ends completes
 * then, with the bytes that landed before its first error. Each chunk
 * out holds references of its own on the regions it touches (the final
 * one the request's), so an endpoint that goes, or a request cut short
 * by an error, leaves every chunk a wire holds valid until it reports.
 * A wire that completes at once (the loop wire) has its chunk retired
 * before the next is cut: nothing changes for it.

 * Scheduling. A turn serves one logical message (requests up to one
 * flagged LAST), so a message's requests stay together; it ends early
 * after rdma_max_xfer bytes (the rest of the request waits for the
 * queue's next turn, so one large transfer cannot monopolise the engine)
 * or after CLANQ_RDMA_TURN_REQS requests, or once its writes fired
 * CLANQ_RDMA_TURN_FIRES tripwires. Firing is work a user can multiply
 * without moving bytes: one 8-byte write can cover thousands of
 * persistent tripwires (issue 28: 64 such writes made a turn of ~1 s,
 * and every other user of the NIC waited for it). The chunk that crosses
 * the bound still fires every tripwire it touched: a turn is at most one
 * chunk's fires past it, as it is at most one request past the bytes.
 *
 * Turns go round-robin at two levels: over the contexts with active
 * queues (engine->active), then over each context's active queues
 * (clanq_engine_ctx.queues). A turn takes the first context, serves its
 * first queue, and sends that queue to the back of its context's line
 * and the context to the back of the engine's. A kick lines a queue up
 * behind its context's others; a context already in line keeps its
 * place. So with C contexts in line, a victim whose one queue is kicked
 * waits for the turn in progress and at most C - 1 more turns, one per
 * other context, each at most rdma_max_xfer bytes and
 * CLANQ_RDMA_TURN_REQS requests, however many endpoints the other
 * contexts keep busy. (A context with k queues in line serves each of
 * them once in k of its turns.) Round-robin over queues alone gave a
 * process with a thousand busy endpoints a thousand turns for its
 * neighbour's one.
 *
 * Why contexts and not users: a context is what the driver already has
 * (one open() of the device, owner of its endpoints), and its line
 * lives and dies with it. A user who opens many contexts gets a turn
 * for each, as a process with many endpoints used to; what bounds that
 * is max_eps per context and the files a user may open, not this
 * scheduler. Fairness between users would need state keyed by uid
 * (ucounts) that outlives any one context: not done.
 */
#include <linux/ktime.h>
#include <linux/kthread.h>
#include <linux/overflow.h>
#include <linux/sched.h>

#include "clanq_drv.h"

/* A turn ends after this many requests, even inside one message. */
#define CLANQ_RDMA_TURN_REQS	64
/* ... or once its writes and atomics fired this many tripwires */
#define CLANQ_RDMA_TURN_FIRES	256u
/* rdma_max_xfer is read through this floor: 0 would stop all progress. */
#define CLANQ_RDMA_MIN_XFER	512u

/* Attach @ep's RDMA queues, laid out in its segment by endpoint.c. */
void clanq_rdma_init(struct clanq_kep *ep, const struct clanq_queue_off *rq,
		     const struct clanq_queue_off *cq, u32 need_wakeup)
{
	struct clanq_kep_rdma *rd = &ep->rdma;
	void *seg = ep->shm->vaddr;

	/* our own layout, checked against the segment by clanq_q_init() */
	WARN_ON(clanq_q_init(&rd->rq, seg, ep->shm->size, rq));
	WARN_ON(clanq_q_init(&rd->cq, seg, ep->shm->size, cq));
	rd->need_wakeup = (u32 *)((char *)seg + need_wakeup);
	WRITE_ONCE(*rd->need_wakeup, 1);	/* idle: the first post rings */
	INIT_LIST_HEAD(&rd->node);
}

/* A new context's line at the engine: empty, and not in line itself. */
void clanq_engine_ctx_init(struct clanq_engine_ctx *ec)
{
	INIT_LIST_HEAD(&ec->node);
	INIT_LIST_HEAD(&ec->queues);
}

/* Unread completions? For evq registrations (CLANQ_EV_RDMA). */
bool clanq_rdma_pending(struct clanq_kep *ep)
{
	struct clanq_queue *cq = &ep->rdma.cq;
	/* the engine moves own under engine->serve, which we cannot take */
	u32 prod = READ_ONCE(cq->own);
	u32 cons = smp_load_acquire(cq->cons);	/* the application's: check */

	return !(cons & ~cq->mask) && cons != prod;
}

static void clanq_rdma_xfer_put(struct clanq_rdma_xfer *x)
{
	if (x->src)
		clanq_kregion_mem_put(x->src);
	clanq_kregion_put(x->src);
	clanq_kap_put(x->dst);
	x->src = NULL;
	x->dst = NULL;
}

/**
 * clanq_rdma_validate() - check a request the engine has copied
 * @ctx: the requester's context
 * @req: the private copy
 * @x: on success, holds references on the source region and aperture
 *
 * The request's fields only: whether the regions behind it are still
 * live is checked once per chunk, where the write is delivered
 * (clanq_rx_write()), since they can be freed at any moment after this.
 *
 * Return: 0 or the status the request completes with.
 */
VISIBLE_IF_KUNIT
int clanq_rdma_validate(struct clanq_ctx *ctx, const struct clanq_rdma_req *req,
			struct clanq_rdma_xfer *x)
{
	static const u32 need[CLANQ_RDMA_NR_OPS] = {
		[CLANQ_RDMA_OP_WRITE] = CLANQ_RIGHT_WRITE,
		[CLANQ_RDMA_OP_READ] = CLANQ_RIGHT_READ,
		[CLANQ_RDMA_OP_CAS] = CLANQ_RIGHTS_ALL,
		[CLANQ_RDMA_OP_FADD] = CLANQ_RIGHTS_ALL,
	};
	u32 op = req->op;
	bool atomic = op == CLANQ_RDMA_OP_CAS || op == CLANQ_RDMA_OP_FADD;
	u64 end;
	int status = 0;

	if (req->flags & ~CLANQ_RDMA_FLAGS) {
		clanq_uerr(ctx, "RDMA: flags %#x: unknown bits %#x", req->flags,
			   req->flags & ~CLANQ_RDMA_FLAGS);
		return -EINVAL;
	}
	if (op >= CLANQ_RDMA_NR_OPS) {
		clanq_uerr(ctx, "RDMA: op %u: no such operation", op);
		return -EINVAL;
	}
	/* CAS takes both operands, FADD the first, WRITE and READ none */
	if ((op != CLANQ_RDMA_OP_CAS && req->operand[1]) ||
	    (!atomic && req->operand[0])) {
		clanq_uerr(ctx, "RDMA: op %u: operands %#llx, %#llx it does not take",
			   op, req->operand[0], req->operand[1]);
		return -EINVAL;
	}
	if (atomic && (req->len != CLANQ_RDMA_ATOMIC_LEN || req->src_region ||
		       req->src_off ||
		       !IS_ALIGNED(req->dst_off, CLANQ_RDMA_ATOMIC_LEN))) {
		clanq_uerr(ctx, "RDMA: atomic: len %llu region %u+%llu at %llu: want 8, 0+0, x8",
			   req->len, req->src_region, req->src_off, req->dst_off);
		return -EINVAL;
	}
	if (!atomic) {
		x->src = clanq_kregion_lookup_owned(ctx, req->src_region);
		/* the memory too: the owner may free the region mid-request */
		if (x->src && !clanq_kregion_mem_get(x->src)) {
			clanq_kregion_put(x->src);
			x->src = NULL;
		}
	}
	x->dst = clanq_kap_lookup(ctx, req->dst_ap);
	if ((!atomic && !x->src) || !x->dst) {
		status = -ENOENT;
	} else if ((x->dst->rights & need[op]) != need[op] ||
		   (atomic && !x->dst->atomic)) {
		clanq_uerr(ctx, "RDMA: op %u, aperture %u: rights %#x%s, the op needs %#x%s",
			   op, req->dst_ap, x->dst->rights,
			   x->dst->atomic ? " ATOMIC" : "", need[op],
			   atomic ? " ATOMIC" : "");
		status = -EACCES;
	} else if ((!atomic &&
		    (check_add_overflow(req->src_off, req->len, &end) ||
		     end > x->src->len)) ||
		   check_add_overflow(req->dst_off, req->len, &end) ||
		   end > x->dst->len) {
		status = -ERANGE;
	} else if (atomic && !IS_ALIGNED(x->dst->off, CLANQ_RDMA_ATOMIC_LEN)) {
		/* the word's offset in the region, which only we know whole */
		clanq_uerr(ctx, "RDMA: atomic: aperture %u at region offset %llu: misaligned",
			   req->dst_ap, x->dst->off);
		status = -EINVAL;
	}
	if (status)
		clanq_rdma_xfer_put(x);
	return status;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_rdma_validate);

/* Post a completion; the turn made sure there is room. */
static void clanq_rdma_complete(struct clanq_kep *ep,
				const struct clanq_rdma_req *req, u64 len,
				int status, u64 value)
{
	struct clanq_kep_rdma *rd = &ep->rdma;
	struct clanq_rdma_comp c = {
		.cookie = req->cookie,
		.len = len,
		.status = status,
		.value = value,
	};

	if (status) {
		clanq_count(&rd->errors, &ep->counters->rdma_errors, 1);
		atomic64_inc(&ep->nic->stats.rdma_errors);
	}
	/* cannot fail: the consumer index is read only when the cache says full */
	if (WARN_ON_ONCE(!clanq_q_put(&rd->cq, &c)))
		return;
	clanq_kep_raise(ep, CLANQ_EV_RDMA);
}

/* The window's entry for chunk @seq of @rd's queue. */
static struct clanq_rdma_chunk *clanq_rdma_slot(struct clanq_kep_rdma *rd,
						u32 seq)
{
	return &rd->window[seq % CLANQ_RDMA_WINDOW];
}

/* Chunks given to wires and not yet retired. */
static u32 clanq_rdma_out(const struct clanq_kep_rdma *rd)
{
	return rd->issued - rd->retired;
}

/*
 * Retire the landed chunks at the window's head, in the order they were
 * given out: count their bytes, and complete (if asked, or failed) the
 * request a final one ends, with the bytes that landed before its first
 * error. A chunk that lands before an older one waits for it, so
 * completions come in queue order. A detached endpoint's only let go.
 */
static void clanq_rdma_retire(struct clanq_kep *ep)
{
	struct clanq_kep_rdma *rd = &ep->rdma;
	struct clanq_rdma_chunk *c;
	int status;

	while (rd->retired != rd->issued) {
		c = clanq_rdma_slot(rd, rd->retired);
		if (!c->landed)
			break;
		rd->retired++;
		rd->out_bytes -= c->len;
		c->landed = false;
		if (!rd->head_status) {
			rd->head_status = c->status;
			if (!c->status && c->len && !rd->detached) {
				rd->head_done += c->len;
				clanq_count(&rd->bytes, &ep->counters->rdma_bytes,
					    c->len);
				atomic64_add(c->len, &ep->nic->stats.rdma_bytes);
			}
		}
		if (c->final) {
			status = rd->head_status;
			if (!rd->detached &&
			    (status || (c->x.req.flags & CLANQ_RDMA_SIGNAL)))
				clanq_rdma_complete(ep, &c->x.req, rd->head_done,
						    status, status ? 0 : c->x.result);
			rd->reqs_out--;
			rd->head_done = 0;
			rd->head_status = 0;
		}
		clanq_rdma_xfer_put(&c->x);
	}
}

/*
 * The window's next entry, for the request in progress: the request
 * itself, moved out of cur, for its @final chunk; else a copy holding
 * references of its own, so that each chunk keeps what it touches until
 * it is retired, whatever becomes of the others or of the endpoint.
 */
static struct clanq_rdma_chunk *clanq_rdma_issue(struct clanq_kep_rdma *rd,
						 u64 len, bool final)
{
	struct clanq_rdma_chunk *c = clanq_rdma_slot(rd, rd->issued++);
	struct clanq_rdma_xfer *x = &rd->cur;

	c->x = *x;
	if (final) {
		x->src = NULL;
		x->dst = NULL;
		rd->busy = false;
	} else {
		/* cur holds both: these cannot fail */
		clanq_kregion_get(x->src);
		refcount_inc(&x->src->mem_ref);
		kref_get(&x->dst->ref);
	}
	c->len = len;
	rd->out_bytes += len;
	c->final = final;
	c->status = 0;
	c->landed = false;
	return c;
}

/* The request in progress ends here with @status, in queue order. */
static void clanq_rdma_end_here(struct clanq_kep *ep, int status)
{
	struct clanq_rdma_chunk *c = clanq_rdma_issue(&ep->rdma, 0, true);

	c->status = status;
	c->landed = true;
	clanq_rdma_retire(ep);
}

/*
 * Completion slots for @n more requests beyond those taken and not yet
 * completed: each of those may complete (an error always does), so a
 * request is taken only when there is room for all of them.
 */
static bool clanq_rdma_cq_room(struct clanq_kep_rdma *rd, u32 n)
{
	u32 need = rd->reqs_out + n;

	return clanq_q_prod_space_for(&rd->cq, need) >= need;
}

/*
 * Take the next request: copy, validate. false if there is none to take.
 * The window has room for an entry (a request that fails validation
 * takes one too, to complete in its place).
 */
static bool clanq_rdma_take(struct clanq_kep *ep)
{
	struct clanq_kep_rdma *rd = &ep->rdma;
	struct clanq_rdma_xfer *x = &rd->cur;
	int status;

	/* room for its completion first: then it can never be dropped */
	if (!clanq_rdma_cq_room(rd, 1) || !clanq_q_get(&rd->rq, &x->req))
		return false;
	clanq_count(&rd->reqs, &ep->counters->rdma_reqs, 1);
	atomic64_inc(&ep->nic->stats.rdma_reqs);
	if (READ_ONCE(clanq_rdma_poll_us))
		rd->last_take_ns = ktime_get_ns();
	x->done = 0;
	x->result = 0;
	rd->busy = true;
	rd->reqs_out++;
	status = clanq_rdma_validate(ep->ctx, &x->req, x);
	if (status)
		clanq_rdma_end_here(ep, status);
	return true;
}

/* rdma_window, read through its bounds */
static u32 clanq_rdma_window_size(void)
{
	return clamp(READ_ONCE(clanq_rdma_window), 1u, CLANQ_RDMA_WINDOW);
}

/*
 * Does the window hold back the next chunk of @x, @len bytes (@first:
 * its request's first)? Only chunks that a wire lands in the order it
 * took them may be out together: those to one aperture, which one
 * connection carries (RC keeps a QP's requests in order). A chunk to
 * another aperture could land before the ones out, so it waits for the
 * window to empty, as does a FENCE request. And the chunks out are small
 * ones: at most rdma_window of them and rdma_max_xfer bytes in all, the
 * bytes a turn may move, so a large transfer still has one chunk out at
 * a time (over rxe, 16 READs of 64 KiB out per queue cut bandwidth to a
 * third: a long burst of responses is where a soft device drops and
 * waits for its retry timer).
 */
static bool clanq_rdma_window_holds(struct clanq_kep_rdma *rd,
				    const struct clanq_rdma_xfer *x, u64 len,
				    bool first)
{
	u64 bytes = max(READ_ONCE(clanq_rdma_max_xfer), CLANQ_RDMA_MIN_XFER);
	u32 out = clanq_rdma_out(rd);

	if (!out)
		return false;
	if (out >= clanq_rdma_window_size() || rd->out_bytes + len > bytes ||
	    (first && (x->req.flags & CLANQ_RDMA_FENCE)))
		return true;
	/* the newest chunk out: not retired, so its reference holds */
	return clanq_rdma_slot(rd, rd->issued - 1)->x.dst != x->dst;
}

/*
 * The bytes of the next chunk of a request with @rem bytes left, at most
 * @budget. A chunk that is not the last leaves at least 16 bytes: 16
 * consecutive bytes always hold an aligned word, so the last chunk holds
 * the request's final word whole, and clanq_rx_copy() stores it after
 * every other byte (uapi clanq.h, "What a receiver may rely on"). Split
 * anywhere, a request's tail past its final word, or part of the word,
 * would land in a later chunk than the word. 0: end the turn here; the
 * next one's budget (at least CLANQ_RDMA_MIN_XFER) takes the rest whole.
 */
static u64 clanq_rdma_chunk_len(u64 rem, u64 budget)
{
	if (rem <= budget || rem - budget >= 16)
		return min(rem, budget);
	return rem > 16 ? rem - 16 : 0;
}

/*
 * One chunk through the aperture's wire, as its op says. An atomic is one
 * 8-byte chunk: clanq_rdma_chunk_len() never splits 8 bytes, it waits
 * for the next turn's budget. A wire without the op: -EOPNOTSUPP.
 */
static int clanq_rdma_do(struct clanq_nic *nic, const struct clanq_wire_write *w)
{
	const struct clanq_wire_ops *wire = w->dst->wire;

	switch (w->op) {
	case CLANQ_RDMA_OP_WRITE:
		return wire->rdma_write(nic, w);
	case CLANQ_RDMA_OP_READ:
		return wire->rdma_read ? wire->rdma_read(nic, w) : -EOPNOTSUPP;
	default:
		return wire->rdma_atomic ? wire->rdma_atomic(nic, w) : -EOPNOTSUPP;
	}
}

/* What a turn leaves its queue with. */
enum clanq_rdma_turn {
	CLANQ_TURN_IDLE,	/* nothing the engine can take now: let go */
	CLANQ_TURN_MORE,	/* maybe more: the back of the line */
	CLANQ_TURN_PARKED,	/* the window holds it back: off the line */
};

/*
 * One turn for @ep: one logical message, at most rdma_max_xfer bytes,
 * CLANQ_RDMA_TURN_REQS requests and (a chunk past) CLANQ_RDMA_TURN_FIRES
 * tripwires fired.
 */
static enum clanq_rdma_turn clanq_rdma_turn(struct clanq_kep *ep)
{
	struct clanq_kep_rdma *rd = &ep->rdma;
	struct clanq_rdma_xfer *x = &rd->cur;
	u64 budget = max(READ_ONCE(clanq_rdma_max_xfer), CLANQ_RDMA_MIN_XFER);
	struct clanq_rdma_chunk *c;
	struct clanq_wire_write w;
	unsigned int taken = 0, fired = 0;
	bool final, last;
	int status;

	for (;;) {
		if (fired >= CLANQ_RDMA_TURN_FIRES) {
			atomic64_inc(&ep->nic->stats.rdma_fire_turns);
			return CLANQ_TURN_MORE;
		}
		if (!rd->busy) {
			if (taken == CLANQ_RDMA_TURN_REQS)
				return CLANQ_TURN_MORE;
			/* no entry, or room only the requests out may need */
			if (clanq_rdma_out(rd) >= clanq_rdma_window_size() ||
			    (clanq_rdma_out(rd) && !clanq_rdma_cq_room(rd, 1)))
				return CLANQ_TURN_PARKED;
			/* chunks out: their reports look again, no doorbell */
			if (!clanq_rdma_take(ep))
				return clanq_rdma_out(rd) ? CLANQ_TURN_PARKED :
							    CLANQ_TURN_IDLE;
			taken++;
			if (!rd->busy) {	/* failed validation: completed */
				if (x->req.flags & CLANQ_RDMA_LAST)
					return CLANQ_TURN_MORE;
				continue;
			}
		}
		last = x->req.flags & CLANQ_RDMA_LAST;
		if (rd->head_status) {
			/* a chunk of it failed: it ends, with that error */
			if (clanq_rdma_out(rd) >= CLANQ_RDMA_WINDOW)
				return CLANQ_TURN_PARKED;
			clanq_rdma_end_here(ep, 0);
			if (last)
				return CLANQ_TURN_MORE;
			continue;
		}
		w = (struct clanq_wire_write){
			.ep = ep,
			.dst = x->dst,
			.dst_off = x->req.dst_off + x->done,
			.src = x->src,
			.src_off = x->req.src_off + x->done,
			.len = clanq_rdma_chunk_len(x->req.len - x->done,
						    budget),
			.op = x->req.op,
			.operand = { x->req.operand[0], x->req.operand[1] },
			.chunk = rd->issued,
			.fired = &fired,
		};
		if (!w.len && x->done < x->req.len) {
			if (x->done)
				atomic64_inc(&ep->nic->stats.rdma_splits);
			return CLANQ_TURN_MORE;
		}
		if (clanq_rdma_window_holds(rd, x, w.len, !x->done))
			return CLANQ_TURN_PARKED;
		final = x->done + w.len == x->req.len;
		x->done += w.len;
		c = clanq_rdma_issue(rd, w.len, final);
		w.result = &c->x.result;
		status = clanq_rdma_do(ep->nic, &w);
		if (status != -EINPROGRESS) {
			c->status = status;
			c->landed = true;
			clanq_rdma_retire(ep);
		}
		if (!status || status == -EINPROGRESS)
			budget -= w.len;
		/*
		 * A message out on a wire, and nothing posted behind it:
		 * parked, its report looks again (lining up would cost a
		 * turn that, in a ping-pong, finds nothing)
		 */
		if (final && last)
			return status == -EINPROGRESS &&
			       !clanq_q_cons_avail(&rd->rq) ?
			       CLANQ_TURN_PARKED : CLANQ_TURN_MORE;
		if (!budget) {
			if (rd->busy)
				atomic64_inc(&ep->nic->stats.rdma_splits);
			return CLANQ_TURN_MORE;
		}
	}
}

/*
 * Line @ep's queue up at the back of its context's line, and the context
 * at the back of the engine's if it was not in line: one already in line
 * keeps its place. The endpoint is not detached, so its context is live.
 */
static void clanq_engine_line_up(struct clanq_engine *eng, struct clanq_kep *ep)
{
	struct clanq_engine_ctx *ec = &ep->ctx->engine;

	lockdep_assert_held(&eng->lock);
	list_add_tail(&ep->rdma.node, &ec->queues);
	if (list_empty(&ec->node))
		list_add_tail(&ec->node, &eng->active);
}

/*
 * The poll window (rdma_poll_us, io_uring's sq_thread_idle): a queue
 * that had a request within it stays in line although it is empty, and
 * its sleep flag stays clear, so a ping-pong's next post needs no
 * doorbell. Off by default: the engine thread then spins on a CPU the
 * application's own pollers may need (on two CPUs, measured in
 * clanq-bench: docs/decisions.md).
 */
static bool clanq_rdma_polling(struct clanq_kep_rdma *rd)
{
	u64 window = min(READ_ONCE(clanq_rdma_poll_us), 10000u) * NSEC_PER_USEC;

	return window && ktime_get_ns() - rd->last_take_ns < window;
}

/*
 * After a turn: back of the line, or let go. Letting go is the engine's
 * half of the sleep-flag pattern: set the flag, full barrier, look again.
 */
static void clanq_rdma_requeue(struct clanq_engine *eng, struct clanq_kep *ep,
			       bool more)
{
	struct clanq_kep_rdma *rd = &ep->rdma;

	/* only the engine thread polls: a caller's inline turn lets go */
	if (!more && current == eng->task)
		more = clanq_rdma_polling(rd);
	spin_lock_irq(&eng->lock);
	if (!more) {
		WRITE_ONCE(*rd->need_wakeup, 1);
		/*
		 * [A] pairs with clanq_q_mb() in clanq_rdma_post_push(),
		 * [B] with the one in clanq_rdma_poll()
		 */
		smp_mb();
		more = clanq_q_cons_avail(&rd->rq) && clanq_q_prod_space(&rd->cq);
		if (more)
			WRITE_ONCE(*rd->need_wakeup, 0);
	}
	if (more)
		clanq_engine_line_up(eng, ep);
	else
		rd->active = false;
	spin_unlock_irq(&eng->lock);
}

/*
 * One turn, with engine->serve held (clanq_engine_step()). A turn run
 * inline by a doorbell (@inline_turn) that ended at a message boundary
 * does not line its queue up again: it lets go with the sleep-flag
 * pattern, which looks at the queue once more. Lining it up would wake
 * the thread for a turn that, in a ping-pong, finds nothing (measured:
 * four turns and two wake-ups per round trip instead of two turns).
 */
static struct clanq_kep *__clanq_engine_step(struct clanq_nic *nic, bool inline_turn)
{
	struct clanq_engine *eng = &nic->engine;
	struct clanq_engine_ctx *ec;
	struct clanq_kep *ep = NULL;

	lockdep_assert_held(&eng->serve);
	spin_lock_irq(&eng->lock);
	ec = list_first_entry_or_null(&eng->active, struct clanq_engine_ctx, node);
	if (ec) {
		ep = list_first_entry(&ec->queues, struct clanq_kep, rdma.node);
		list_del_init(&ep->rdma.node);	/* still active: ours */
		if (list_empty(&ec->queues))
			list_del_init(&ec->node);
		else
			list_move_tail(&ec->node, &eng->active);
	}
	spin_unlock_irq(&eng->lock);
	if (ep) {
		enum clanq_rdma_turn turn = clanq_rdma_turn(ep);

		atomic64_inc(&nic->stats.rdma_turns);
		/* parked: clanq_engine_write_done() puts it back in line */
		if (turn == CLANQ_TURN_PARKED)
			ep->rdma.parked = true;
		else
			clanq_rdma_requeue(eng, ep, turn == CLANQ_TURN_MORE &&
					   (!inline_turn || ep->rdma.busy));
	}
	return ep;
}

/**
 * clanq_engine_step() - serve one turn of the first queue in line
 * @nic: whose engine
 *
 * The first context in line, its first queue: the queue leaves its
 * context's line for the turn, the context goes to the back of the
 * engine's (or out of it, with no queue left in line).
 *
 * Return: the endpoint served (for its identity only: no reference), or
 * NULL if no queue was active.
 */
VISIBLE_IF_KUNIT
struct clanq_kep *clanq_engine_step(struct clanq_nic *nic)
{
	struct clanq_kep *ep;

	mutex_lock(&nic->engine.serve);
	ep = __clanq_engine_step(nic, false);
	mutex_unlock(&nic->engine.serve);
	return ep;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_engine_step);

static bool clanq_engine_idle(struct clanq_engine *eng)
{
	bool idle;

	spin_lock_irq(&eng->lock);
	idle = list_empty(&eng->active);
	spin_unlock_irq(&eng->lock);
	return idle;
}

/*
 * The doorbell (CLANQ_IOC_RDMA_KICK): make the engine look at @ep's queue.
 *
 * Inline turn. Waking the engine thread costs a cross-CPU wake-up, most
 * of a small write's latency (in the VM about 40 of 43 us for 64 bytes).
 * When this queue is the only one in line and nobody is serving, there
 * is nobody to be unfair to: the caller runs that first turn itself, in
 * its own system call and on its own CPU time, bounded like any turn by
 * rdma_max_xfer bytes and CLANQ_RDMA_TURN_REQS requests. Whatever is left
 * (a long request, queues kicked meanwhile) goes to the thread as
 * before. KUnit's NICs have no thread: they step by hand, never inline.
 *
 * A stream is not inlined. A caller that posts one request after the
 * other would ring for each (the inline turn empties the queue and lets
 * go) and copy each itself, where the thread drains the queue beside it
 * while its posts need no doorbell. So a kick that comes sooner after
 * this queue's last inline turn than that turn took (the caller has
 * done little else since: a stream; a ping-pong's kick comes a round
 * trip later) wakes the thread as before. The rule needs no constant:
 * it scales with the turn's own cost on this machine.
 */
VISIBLE_IF_KUNIT
int clanq_engine_kick(struct clanq_kep *ep)
{
	struct clanq_nic *nic = ep->nic;
	struct clanq_engine *eng = &nic->engine;
	struct clanq_kep_rdma *rd = &ep->rdma;
	bool wake = false, alone = false;

	spin_lock_irq(&eng->lock);
	clanq_count(&rd->kicks, &ep->counters->rdma_kicks, 1);
	/* not active: not detached either, so ep->ctx is live */
	if (!rd->active) {
		rd->active = true;
		WRITE_ONCE(*rd->need_wakeup, 0);
		clanq_engine_line_up(eng, ep);
		wake = true;
		alone = list_is_singular(&eng->active) &&
			list_is_singular(&ep->ctx->engine.queues);
	}
	spin_unlock_irq(&eng->lock);
	atomic64_inc(&nic->stats.rdma_kicks);
	if (alone && eng->task && READ_ONCE(clanq_rdma_inline) &&
	    mutex_trylock(&eng->serve)) {
		u64 t0 = ktime_get_ns();

		/* rd's inline_* are under engine->serve */
		if (t0 - rd->inline_end_ns >= rd->inline_ns) {
			/* the first in line: this queue, or one that came since */
			if (__clanq_engine_step(nic, true))
				atomic64_inc(&nic->stats.rdma_inline_turns);
			rd->inline_end_ns = ktime_get_ns();
			rd->inline_ns = rd->inline_end_ns - t0;
		}
		mutex_unlock(&eng->serve);
		wake = !clanq_engine_idle(eng);
	}
	if (wake)
		wake_up(&eng->wq);
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_engine_kick);

/*
 * After a chunk landed: the thread, if a queue is in line. Waking it
 * with none would cost a context switch for a look at an empty line.
 */
static void clanq_engine_wake(struct clanq_engine *eng)
{
	if (!clanq_engine_idle(eng))
		wake_up(&eng->wq);
}

/* clanq_engine_write_done()'s work, with eng->serve held. */
static void clanq_engine_chunk_landed(struct clanq_kep *ep, u32 chunk, int status)
{
	struct clanq_kep_rdma *rd = &ep->rdma;
	struct clanq_rdma_chunk *c = clanq_rdma_slot(rd, chunk);
	u32 retired = rd->retired;

	lockdep_assert_held(&ep->nic->engine.serve);
	/* a chunk out, reported once: anything else is the wire's bug */
	if (WARN_ON_ONCE(chunk - rd->retired >= clanq_rdma_out(rd) || c->landed))
		return;
	c->status = status;
	c->landed = true;
	clanq_rdma_retire(ep);
	/*
	 * A queue the window held back goes back in line once a chunk
	 * retired, if it has a request with chunks left; else it lets go
	 * (the sleep-flag pattern looks at the queue once more, so a
	 * request posted meanwhile is lined up): waking the thread for a
	 * turn that, in a ping-pong, finds nothing cost a context switch
	 * per write on a CPU the next write's receive path needs. A queue
	 * not held back is in line, or idle with nothing to take.
	 */
	if (!rd->parked || rd->retired == retired || rd->detached)
		return;
	/*
	 * Parked with nothing to take while chunks are out: the reports
	 * look for new requests, so the application need not ring. A
	 * request missed here (no barrier) is seen by a later report; the
	 * last one lets go with the full sleep-flag pattern.
	 */
	if (!rd->busy && clanq_rdma_out(rd) && !clanq_q_cons_avail(&rd->rq))
		return;
	rd->parked = false;
	clanq_rdma_requeue(&ep->nic->engine, ep,
			   rd->busy || clanq_rdma_polling(rd));
}

/**
 * clanq_engine_write_done() - a chunk a wire took is written, or failed
 * @ep: the requester (clanq_wire_write.ep), referenced by the wire
 * @chunk: which (clanq_wire_write.chunk)
 * @status: 0 once written, or -errno
 *
 * For a wire whose rdma_write returned -EINPROGRESS; process context.
 * Retires the chunk, completing its request if it is over, once every
 * chunk given out before it is done too, and puts a queue the window
 * held back in line again. An endpoint destroyed meanwhile only has its
 * chunk dropped.
 */
void clanq_engine_write_done(struct clanq_kep *ep, u32 chunk, int status)
{
	struct clanq_engine *eng = &ep->nic->engine;

	mutex_lock(&eng->serve);
	clanq_engine_chunk_landed(ep, chunk, status);
	mutex_unlock(&eng->serve);
	clanq_engine_wake(eng);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_engine_write_done);

/**
 * clanq_engine_write_done_now() - clanq_engine_write_done() if it can be
 * done without waiting for the engine
 * @ep: as there
 * @chunk: as there
 * @status: as there
 *
 * For a wire's completion handler, which must not wait for an engine
 * that may itself be waiting for that handler (for room on a send
 * queue): false if the engine is busy, and then the wire calls
 * clanq_engine_write_done() from elsewhere. Chunks may so be reported
 * out of order; the window puts them back in it.
 */
bool clanq_engine_write_done_now(struct clanq_kep *ep, u32 chunk, int status)
{
	struct clanq_engine *eng = &ep->nic->engine;

	if (!mutex_trylock(&eng->serve))
		return false;
	clanq_engine_chunk_landed(ep, chunk, status);
	mutex_unlock(&eng->serve);
	clanq_engine_wake(eng);
	return true;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_engine_write_done_now);

/*
 * The endpoint is going: wait for a turn in progress, take it off the
 * engine for good, drop the request in progress (chunks of it that a
 * wire still holds keep their own references, and are dropped as they
 * are reported). The engine never looks at its queues again. Its
 * context leaves the engine's line with its last queue in line, so
 * once all its endpoints are detached
 * (clanq_ctx_release() destroys them first) the context may go too.
 */
void clanq_engine_detach_ep(struct clanq_kep *ep)
{
	struct clanq_engine *eng = &ep->nic->engine;
	struct clanq_engine_ctx *ec = &ep->ctx->engine;
	struct clanq_kep_rdma *rd = &ep->rdma;

	mutex_lock(&eng->serve);
	spin_lock_irq(&eng->lock);
	if (!list_empty(&rd->node)) {
		list_del_init(&rd->node);
		if (list_empty(&ec->queues))
			list_del_init(&ec->node);
	}
	/* never listed again, so it stays "active": a kick queues nothing */
	rd->active = true;
	spin_unlock_irq(&eng->lock);
	rd->detached = true;
	rd->parked = false;
	if (rd->busy) {
		clanq_rdma_xfer_put(&rd->cur);
		rd->busy = false;
	}
	mutex_unlock(&eng->serve);
}

int clanq_ioctl_rdma_kick(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_rdma_kick *k = arg;
	struct clanq_kep *ep;
	int err;

	ep = clanq_kep_lookup_owned(ctx, k->ep);
	if (!ep) {
		clanq_uerr(ctx, "RDMA_KICK: no endpoint %u in this context", k->ep);
		return -ENOENT;
	}
	err = clanq_engine_kick(ep);
	clanq_kep_put(ep);
	return err;
}

static int clanq_engine_thread(void *arg)
{
	struct clanq_nic *nic = arg;
	struct clanq_engine *eng = &nic->engine;

	while (!kthread_should_stop()) {
		wait_event_interruptible(eng->wq, !clanq_engine_idle(eng) ||
					 kthread_should_stop());
		while (clanq_engine_step(nic))
			cond_resched();
	}
	return 0;
}

void clanq_engine_init(struct clanq_engine *eng)
{
	spin_lock_init(&eng->lock);
	INIT_LIST_HEAD(&eng->active);
	init_waitqueue_head(&eng->wq);
	mutex_init(&eng->serve);
}

int clanq_engine_start(struct clanq_nic *nic)
{
	struct task_struct *t;

	t = kthread_run(clanq_engine_thread, nic, "%s-rdma", nic->name);
	if (IS_ERR(t))
		return PTR_ERR(t);
	nic->engine.task = t;
	return 0;
}

void clanq_engine_stop(struct clanq_nic *nic)
{
	if (nic->engine.task)
		kthread_stop(nic->engine.task);
	nic->engine.task = NULL;
	WARN_ON(!list_empty(&nic->engine.active));
}
