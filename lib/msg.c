// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: messages on a connection (the ring of lib/ring.h).
 *
 * Sending is plain stores into the peer's ring through the mapped
 * aperture (PIO), or, for messages of rdma_threshold bytes and more and
 * for apertures that cannot be mapped, a copy into the staging region
 * (a mirror of the peer's ring) and RDMA requests from it. Either way
 * the record goes first and the tail after it ([G] of ring.h); the only
 * system call is the flush a PIO writer owes when the peer armed its
 * tripwire, because it is blocked (clanq_ap_flush(): the futex idea),
 * and the doorbell when the engine went idle.
 *
 * Credit: the receiver hands back what it consumed through the
 * sender's hdr.credit: with its next PIO send, every quarter ring, before
 * it blocks, or when the sender asks (hdr.want) because it is short.
 *
 * A message longer than a record can be is a LARGE record (its length)
 * and FRAG records after it (ring.h), sent and received by the same
 * steps as any record: the same credit, want word and tripwire, so the
 * wake-up rules are those of every message (docs/decisions.md). Once
 * the receiver offered its bulk window (ring.h, CLANQ_REC_BULK), the
 * pieces go into it instead, each named by a BULK record in the ring,
 * the window's space coming back as hdr.bulk_credit by the same rules.
 */
#include <errno.h>
#include <string.h>

#include "net_internal.h"

/*
 * memcpy() for the path's own sizes: a message of up to 16 bytes is two
 * overlapping loads and stores inline (libc's call, dispatch and tail
 * were a third of a small message's instructions); longer ones are
 * libc's. Never reads or writes outside [0, len).
 */
static inline void clanq_copy(void *dst, const void *src, size_t len)
{
	char *d = dst;
	const char *s = src;
	uint64_t a, b;
	uint32_t x, y;

	if (len > 16) {
		memcpy(d, s, len);
	} else if (len >= 8) {
		memcpy(&a, s, 8);
		memcpy(&b, s + len - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + len - 8, &b, 8);
	} else if (len >= 4) {
		memcpy(&x, s, 4);
		memcpy(&y, s + len - 4, 4);
		memcpy(d, &x, 4);
		memcpy(d + len - 4, &y, 4);
	} else {
		for (size_t i = 0; i < len; i++)
			d[i] = s[i];
	}
}

/*
 * RDMA completions carry the connection's cookie; this bit marks a
 * FIN's, and this the last write of a zero-copy send.
 */
#define CLANQ_COOKIE_FIN	(1ull << 31)
#define CLANQ_COOKIE_ZC		(1ull << 30)
#define CLANQ_COOKIE_FLAGS	(CLANQ_COOKIE_FIN | CLANQ_COOKIE_ZC)

static struct clanq_ring_hdr *clanq_peer_hdr(struct clanq_conn *c)
{
	return (struct clanq_ring_hdr *)c->tx.base;
}

/* One RDMA completion of the net's endpoint: an error resets its connection. */
static void clanq_net_comp(struct clanq_net *net, const struct clanq_rdma_comp *comp)
{
	uint32_t slot = (uint32_t)comp->cookie & ~(uint32_t)CLANQ_COOKIE_FLAGS;
	struct clanq_conn *c = clanq_net_conn(net, slot);

	if (!c || clanq_conn_notice_cookie(net, slot) != (comp->cookie & ~CLANQ_COOKIE_FLAGS))
		return;
	if (comp->cookie & CLANQ_COOKIE_ZC)
		c->zc_done++;	/* an error resets c below: its waiter sees that */
	if (comp->status == -ENXIO)
		clanq_conn_on_revoked(c);
	else if (comp->status)
		clanq_conn_reset(c, comp->status);
}

void clanq_net_drain_rdma(struct clanq_net *net)
{
	struct clanq_rdma_comp comp;

	while (!clanq_rdma_poll(&net->ep, &comp))
		clanq_net_comp(net, &comp);
}

/* The staging region: the RDMA engine's source, a mirror of the peer's ring. */
static int clanq_conn_stage(struct clanq_conn *c)
{
	if (c->stage.mem)
		return 0;
	return clanq_region_alloc(c->net->dev, &c->stage,
				  CLANQ_RING_HDR + c->tx_cap);
}

/*
 * Queue one request from a staging region of ours to an aperture onto
 * the peer; when the queue is full, let the engine catch up.
 */
static int clanq_conn_post_to(struct clanq_conn *c, uint32_t src_region, uint32_t dst_ap,
			      uint64_t src_off, uint64_t dst_off, uint64_t len,
			      uint32_t flags, uint64_t cookie)
{
	struct clanq_ep *ep = &c->net->ep;
	struct clanq_rdma_req r = {
		.src_region = src_region,
		.dst_ap = dst_ap,
		.src_off = src_off,
		.dst_off = dst_off,
		.len = len,
		.cookie = cookie,
		.flags = flags,
	};
	int err;

	while ((err = clanq_rdma_post_init(ep, &r)) == -EAGAIN) {
		err = clanq_rdma_post_push(ep);
		if (err)
			return err;
		clanq_net_drain_rdma(c->net);
		clanq_cpu_relax();
	}
	return err;
}

/* The same, from the ring's staging region to the peer's ring. */
static int clanq_conn_post(struct clanq_conn *c, uint64_t src_off, uint64_t dst_off,
			   uint64_t len, uint32_t flags, uint64_t cookie)
{
	return clanq_conn_post_to(c, c->stage.addr.id, c->tx.id, src_off, dst_off, len,
				  flags, cookie);
}

/*
 * Write one word of the peer's header: by PIO with a release store, or
 * from the staging header by RDMA (a newer value read by the engine
 * later is as good: these words only grow), the request flagged and
 * named by @flags and @cookie. Flushes (PIO) only if the peer armed its
 * tripwire.
 */
static int clanq_conn_put_word_as(struct clanq_conn *c, size_t off, uint64_t v,
				  uint32_t flags, uint64_t cookie)
{
	int err;

	if (c->tx.base) {
		__atomic_store_n((uint64_t *)(c->tx.base + off), v, __ATOMIC_RELEASE);
		err = clanq_ap_flush(&c->tx, off, sizeof(v));
	} else {
		err = clanq_conn_stage(c);
		if (err)
			return err;
		memcpy((char *)c->stage.mem + off, &v, sizeof(v));
		err = clanq_conn_post(c, off, off, sizeof(v), flags, cookie);
		if (!err)
			err = clanq_rdma_post_push(&c->net->ep);
	}
	if (err == -ENXIO)
		clanq_conn_on_revoked(c);
	return err;
}

/* The same, unsignaled (by RDMA): credit, want and the bulk window's words. */
static int clanq_conn_put_word(struct clanq_conn *c, size_t off, uint64_t v)
{
	return clanq_conn_put_word_as(c, off, v, CLANQ_RDMA_LAST,
				      clanq_conn_notice_cookie(c->net, c->slot));
}

/*
 * Hand back what we consumed of a window of ours (the ring, or the bulk
 * window): the total, into the peer's header word at off, if it moved
 * since we last said (*returned).
 */
static int clanq_conn_hand_back(struct clanq_conn *c, size_t off, uint64_t consumed,
				uint64_t *returned)
{
	int err;

	if (consumed == *returned || c->state == CLANQ_CONN_RESET || !c->tx.id)
		return 0;
	err = clanq_conn_put_word(c, off, consumed);
	if (!err)
		*returned = consumed;
	return err;
}

/* Our bulk window's (ring.h, CLANQ_REC_BULK). */
static int clanq_conn_return_bulk(struct clanq_conn *c)
{
	return clanq_conn_hand_back(c, offsetof(struct clanq_ring_hdr, bulk_credit),
				    c->bulk_head, &c->bulk_returned);
}

int clanq_conn_return_credit(struct clanq_conn *c)
{
	if (c->bulk_head != c->bulk_returned)
		(void)clanq_conn_return_bulk(c);
	return clanq_conn_hand_back(c, offsetof(struct clanq_ring_hdr, credit),
				    c->rx_head, &c->rx_returned);
}

int clanq_conn_return_credit_owed(struct clanq_conn *c, struct clanq_evq_arm *fl)
{
	size_t off = offsetof(struct clanq_ring_hdr, credit);

	if (c->bulk_head != c->bulk_returned)
		(void)clanq_conn_return_bulk(c);	/* rare: no batching */
	if (c->rx_head == c->rx_returned || c->state == CLANQ_CONN_RESET ||
	    !c->tx.id)
		return 0;
	if (!c->tx.base || !c->tx.armed)
		return clanq_conn_return_credit(c);	/* RDMA, or nothing to look at */
	__atomic_store_n((uint64_t *)(c->tx.base + off), c->rx_head, __ATOMIC_RELEASE);
	c->rx_returned = c->rx_head;
	/* [F] of queue.h: our store, then our look at what is armed */
	clanq_q_mb();
	if (!clanq_ap_armed(&c->tx, off, sizeof(uint64_t)))
		return 0;
	memset(fl, 0, sizeof(*fl));
	fl->id = c->tx.id;
	fl->flags = CLANQ_EVQ_ARM_FLUSH;
	fl->off = off;
	fl->val = sizeof(uint64_t);
	return 1;
}

void clanq_conn_answer_want(struct clanq_conn *c)
{
	uint64_t w = __atomic_load_n(&c->rx_hdr->want, __ATOMIC_ACQUIRE);

	/* nothing to hand back yet: answer with the next consume */
	if (w != c->want_seen && (c->rx_head != c->rx_returned ||
				  c->bulk_head != c->bulk_returned) &&
	    !clanq_conn_return_credit(c))
		c->want_seen = w;
}

/* Past size bytes of our ring: a record, or a PAD up to its end. */
static inline void clanq_conn_rx_advance(struct clanq_conn *c, uint64_t size)
{
	c->rx_head += size;
	c->rx_pos += size;
	if (c->rx_pos >= c->rx_cap)	/* records never wrap: == */
		c->rx_pos = 0;
}

/*
 * The next record at our head, PADs skipped: 1 and *h for a message or
 * FIN (c->peek_size its bytes), -EAGAIN for none, -EPROTO for nonsense.
 * The peer's tail is loaded only when the records below the last one
 * loaded are used up: a batch costs one look at the shared header.
 */
static int clanq_conn_next(struct clanq_conn *c, struct clanq_rec *h)
{
	uint64_t tail, size;

	for (;;) {
		if (c->rx_head == c->rx_tail_seen) {
			/* [G] of ring.h: the tail, then the records below it */
			tail = __atomic_load_n(&c->rx_hdr->tail, __ATOMIC_ACQUIRE);
			if (tail == c->rx_head)
				return -EAGAIN;
			c->rx_tail_seen = tail;	/* checked below, record by record */
		}
		memcpy(h, c->rx_ring + c->rx_pos, sizeof(*h));
		switch (clanq_ring_check_at(c->rx_cap, c->rx_head, c->rx_pos,
					    c->rx_tail_seen, *h, &size)) {
		case CLANQ_REC_OK:
			break;
		case CLANQ_REC_NONE:
			return -EAGAIN;
		default:
			clanq_conn_reset(c, -EPROTO);
			return -EPROTO;
		}
		if (h->type != CLANQ_REC_PAD) {
			c->peek_size = size;
			c->peek_len = h->len;
			return 1;
		}
		clanq_conn_rx_advance(c, size);
	}
}

/* A record (or the FIN) is in our ring, unread. */
bool clanq_conn_has_data(struct clanq_conn *c)
{
	if (c->state == CLANQ_CONN_CONNECTING || !c->rx_hdr)
		return false;
	return __atomic_load_n(&c->rx_hdr->tail, __ATOMIC_ACQUIRE) != c->rx_head;
}

/*
 * The peer is gone and said, in our header's fin word (ring.h), that
 * its stream ends where we have read to: a FIN that found no room.
 */
bool clanq_conn_fin_in_hdr(struct clanq_conn *c)
{
	return __atomic_load_n(&c->peer_gone, __ATOMIC_ACQUIRE) && c->rx_hdr &&
	       __atomic_load_n(&c->rx_hdr->fin, __ATOMIC_ACQUIRE) == c->rx_head + 1 &&
	       !clanq_conn_has_data(c);
}

bool clanq_conn_readable(struct clanq_conn *c)
{
	if (c->state == CLANQ_CONN_RESET || c->fin_seen || c->peer_gone)
		return true;
	return clanq_conn_has_data(c);
}

/*
 * Consume the record at our head; credit goes back every quarter ring
 * (a sender waiting for it asks through hdr.want, which a receiver
 * answers when it finds its ring empty, and before it blocks).
 */
static void clanq_conn_skip(struct clanq_conn *c)
{
	clanq_conn_rx_advance(c, c->peek_size);
	c->peek_size = 0;
	if (clanq_ring_credit_due(c->rx_cap, c->rx_head, c->rx_returned))
		(void)clanq_conn_return_credit(c);
}

static void clanq_conn_consume(struct clanq_conn *c)
{
	c->msgs_in++;
	c->bytes_in += c->peek_len;
	clanq_conn_skip(c);
}

/*
 * Before a non-blocking call says -EAGAIN: has the net news (a notice
 * that the peer is gone) it has not handled? A look at its OOB queue,
 * no system call. Receives look every CLANQ_CONN_NEWS_EVERY empty polls:
 * the net's progress is clanq_net_wait()'s and clanq_net_progress()'s
 * work, not the data path's, and a peer's death is still seen within
 * microseconds by a receiver that only polls.
 */
#define CLANQ_CONN_NEWS_EVERY	16u

static bool clanq_conn_news(struct clanq_conn *c)
{
	struct clanq_net *net = c->net;

	if (clanq_q_empty(&net->ep.oob) &&
	    clanq_ep_dropped(&net->ep) == net->oob_dropped_seen)
		return false;
	clanq_net_progress(net);
	return true;
}

/*
 * The deadline of a wait that starts now and lasts timeout_ns (< 0: for
 * ever, ~0).
 */
static uint64_t clanq_conn_deadline(int64_t timeout_ns)
{
	uint64_t now;

	if (timeout_ns < 0)
		return ~0ull;
	now = clanq_now_ns();
	return (uint64_t)timeout_ns > ~0ull - now ? ~0ull : now + (uint64_t)timeout_ns;
}

/*
 * Wait until the word at addr moves from old, or the net has news, or
 * the deadline (absolute, ~0: none) passes: 0, -ETIMEDOUT, -errno.
 */
static int clanq_conn_block(struct clanq_conn *c, const uint64_t *addr, uint64_t old,
			    uint64_t deadline)
{
	struct clanq_net *net = c->net;
	/* a probe pass owed (lib/net.c, clanq_net_probe()) wakes us too */
	uint64_t now, wake = clanq_net_probe_wake(net, deadline);
	int64_t timeout = -1;
	int rc;

	if (wake != ~0ull) {
		now = clanq_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		if (now >= wake) {
			clanq_net_progress(net);
			return 0;
		}
		timeout = (int64_t)(wake - now);
	}
	net->stats.blocks++;
	rc = clanq_tw_wait_change_oob(&c->tw, addr, old, &net->ep, timeout);
	if (rc == 1 || (rc == -ETIMEDOUT && wake < deadline)) {
		clanq_net_progress(net);
		rc = 0;
	}
	return rc;
}

/*
 * Find the next message: 1 with *h; 0 at the end; -errno. Blocks
 * unless CLANQ_MSG_DONTWAIT.
 */
static int clanq_conn_wait_msg(struct clanq_conn *c, struct clanq_rec *h,
			       unsigned int flags)
{
	uint64_t tail, deadline = 0;	/* 0: not computed yet */
	int err;

	if (c->state == CLANQ_CONN_CONNECTING || !c->rx_hdr)
		return -ENOTCONN;
	for (;;) {
		if (c->state == CLANQ_CONN_RESET && c->error != -ECONNRESET)
			return c->error;
		err = clanq_conn_next(c, h);
		if (__builtin_expect(err == 1, 1)) {
			if (h->type != CLANQ_REC_FIN)
				return 1;
			c->fin_seen = true;
			if (c->state == CLANQ_CONN_OPEN)
				c->state = CLANQ_CONN_FIN;
			return 0;
		}
		if (err != -EAGAIN)
			return err;
		/* nothing there: now, and only now, what is not data */
		if (c->fin_seen)
			return 0;
		clanq_conn_answer_want(c);
		if (__atomic_load_n(&c->peer_gone, __ATOMIC_ACQUIRE)) {
			/* its last writes came before the notice: one more look */
			if (clanq_conn_has_data(c))
				continue;
			if (clanq_conn_fin_in_hdr(c)) {
				c->fin_seen = true;
				if (c->state == CLANQ_CONN_OPEN)
					c->state = CLANQ_CONN_FIN;
				return 0;
			}
			clanq_conn_reset(c, -ECONNRESET);
		}
		if (c->state == CLANQ_CONN_RESET)
			return c->error;
		if (flags & CLANQ_MSG_DONTWAIT) {
			if (!(++c->idle_polls % CLANQ_CONN_NEWS_EVERY) && clanq_conn_news(c))
				continue;
			return -EAGAIN;
		}
		/* a blocked reader must not keep its writer waiting */
		(void)clanq_conn_return_credit(c);
		/* the receive timeout runs from the first time we would block */
		if (!deadline)
			deadline = clanq_conn_deadline(c->recv_timeout_ns);
		tail = c->rx_head;
		err = clanq_conn_block(c, &c->rx_hdr->tail, tail, deadline);
		if (err)
			return err;
	}
}

/*
 * Where the next byte of a message goes to (receive) or comes from
 * (send) in an array of iovecs: lengths were summed by the caller, so
 * a copy of up to that sum never runs past the array.
 */
struct clanq_iov_cur {
	const struct iovec *iov;
	size_t off;		/* into *iov */
};

/*
 * len bytes between buf and the iovecs at cur: into them, or out (@out);
 * buf NULL: only past them (a zero-copy send's, which the engine reads).
 */
static void clanq_iov_copy(struct clanq_iov_cur *cur, char *buf, uint64_t len,
			   bool out)
{
	char *at;
	size_t n;

	while (len) {
		n = cur->iov->iov_len - cur->off;
		if (!n) {
			cur->iov++;
			cur->off = 0;
			continue;
		}
		if (n > len)
			n = len;
		at = (char *)cur->iov->iov_base + cur->off;
		if (buf) {
			memcpy(out ? buf : at, out ? at : buf, n);
			buf += n;
		}
		cur->off += n;
		len -= n;
	}
}

/* The iovecs take len bytes from src (receive). */
static void clanq_iov_put(struct clanq_iov_cur *cur, const char *src, uint64_t len)
{
	clanq_iov_copy(cur, (char *)src, len, false);
}

/* dst takes len bytes of the iovecs (send). */
static void clanq_iov_take(char *dst, struct clanq_iov_cur *cur, uint64_t len)
{
	clanq_iov_copy(cur, dst, len, true);
}

/* A message's bytes, and their room, add up to no more than this. */
#define CLANQ_IOV_SUM_MAX	(1ull << 40)

/* The sum of iov's lengths, saturated at CLANQ_IOV_SUM_MAX; -1: bad args. */
static int64_t clanq_iov_sum(const struct iovec *iov, int iovcnt)
{
	uint64_t sum = 0;
	int i;

	if (iovcnt < 0 || (iovcnt && !iov))
		return -1;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -1;
		if (iov[i].iov_len >= CLANQ_IOV_SUM_MAX - sum)
			return CLANQ_IOV_SUM_MAX;
		sum += iov[i].iov_len;
	}
	return (int64_t)sum;
}

/*
 * The length a LARGE record at our head announces: > 0, or -EPROTO
 * (and the connection reset) if it is no length a sender may announce.
 */
static int64_t clanq_conn_large_len(struct clanq_conn *c)
{
	uint64_t total;

	memcpy(&total, c->rx_ring + c->rx_pos + CLANQ_REC_HDR, sizeof(total));
	if (!clanq_large_len_ok(c->rx_cap, total)) {
		clanq_conn_reset(c, -EPROTO);
		return -EPROTO;
	}
	return (int64_t)total;
}

/*
 * A large message of this many bytes or more makes the receiver offer
 * its bulk window, if it has none yet: below it, the fragments' cost is
 * not worth a window's memory.
 */
#define CLANQ_BULK_OFFER_MIN	(16u << 10)

/*
 * Offer the peer our bulk window (ring.h, CLANQ_REC_BULK): a region of
 * c->bulk_want bytes, exported, its key and then its descriptor written
 * into the peer's ring header (in that order: by PIO, release stores;
 * by RDMA, one queue). Tried once a connection: a window that cannot be
 * made (the context's memory limit, say) leaves large messages to
 * fragments, which is slower, not wrong.
 */
static void clanq_conn_bulk_offer(struct clanq_conn *c)
{
	uint64_t key;

	if (c->bulk.mem || c->bulk_refused || !c->bulk_want || !c->tx.id)
		return;
	c->bulk_refused = true;		/* until it is offered */
	/* the net's windows are bounded: peers cannot spend its memory */
	if (c->net->bulk_bytes + c->bulk_want > CLANQ_NET_BULK_BUDGET)
		return;
	if (clanq_region_alloc(c->net->dev, &c->bulk, c->bulk_want)) {
		c->bulk.mem = NULL;
		return;
	}
	if (clanq_region_export(&c->bulk, CLANQ_RIGHTS_ALL, &key) ||
	    clanq_conn_put_word(c, offsetof(struct clanq_ring_hdr, bulk_key), key) ||
	    clanq_conn_put_word(c, offsetof(struct clanq_ring_hdr, bulk_desc),
				clanq_bulk_desc(c->bulk.addr.id, c->bulk_want))) {
		clanq_region_free(&c->bulk);
		c->bulk.mem = NULL;
		return;
	}
	c->bulk_cap = c->bulk_want;
	c->net->bulk_bytes += c->bulk_cap;
	c->bulk_refused = false;
}

/*
 * The BULK record at our head: its piece of our window into cur, the
 * window's space handed back every quarter of it. The reference is
 * copied out of the ring, then checked (the sender writes on): it must
 * name the next bytes of a window we offered, within the credit we
 * gave, no more than the message has left (left). *n: its bytes.
 */
static int clanq_conn_take_bulk(struct clanq_conn *c, struct clanq_iov_cur *cur,
				uint64_t left, uint64_t *n)
{
	struct clanq_bulk_ref ref;

	memcpy(&ref, c->rx_ring + c->rx_pos + CLANQ_REC_HDR, sizeof(ref));
	if (!c->bulk.mem ||
	    !clanq_bulk_ref_ok(&ref, c->bulk_cap, c->bulk_head, c->bulk_returned, left))
		return -EPROTO;
	clanq_iov_put(cur, (char *)c->bulk.mem + c->bulk_head % c->bulk_cap, ref.len);
	c->bulk_head += ref.len;
	*n = ref.len;
	clanq_conn_skip(c);
	if (c->bulk_head - c->bulk_returned >= c->bulk_cap / 4)
		(void)clanq_conn_return_bulk(c);
	return 0;
}

/*
 * The rest of a large message whose LARGE record is at our head, into
 * cur (room bytes). Its fragments follow it; once the first is taken
 * the message is committed, so the rest is waited for even under
 * CLANQ_MSG_DONTWAIT (a signal does not stop it either): the sender
 * sends them back to back. If the peer dies or closes first, or writes
 * anything else, the connection is reset: a message is never reported
 * whole that was not.
 */
static ssize_t clanq_recv_large(struct clanq_conn *c, struct clanq_iov_cur *cur,
				uint64_t room)
{
	int64_t total = clanq_conn_large_len(c);
	uint64_t left, n;
	struct clanq_rec h;
	int err;

	if (total < 0)
		return total;
	if ((uint64_t)total > room) {
		c->peek_size = 0;	/* queued: clanq_recv_done() must not take it */
		return -EMSGSIZE;
	}
	if ((uint64_t)total >= CLANQ_BULK_OFFER_MIN)
		clanq_conn_bulk_offer(c);
	clanq_conn_skip(c);
	for (left = (uint64_t)total; left; left -= n) {
		do {
			err = clanq_conn_wait_msg(c, &h, 0);
		} while (err == -EINTR);
		if (err == 1 && h.type == CLANQ_REC_BULK) {
			err = clanq_conn_take_bulk(c, cur, left, &n);
			if (!err)
				continue;
		} else if (err == 1 && (h.type != CLANQ_REC_FRAG || h.len > left)) {
			err = -EPROTO;
		} else if (!err) {
			err = -EPIPE;	/* a FIN in the middle */
		}
		if (err != 1) {
			clanq_conn_reset(c, err);
			return c->error;
		}
		clanq_iov_put(cur, c->rx_ring + c->rx_pos + CLANQ_REC_HDR, h.len);
		n = h.len;
		clanq_conn_skip(c);
	}
	c->msgs_in++;
	c->bytes_in += (uint64_t)total;
	return total;
}

/* The next message into cur (room bytes): a record's, or a large one. */
static ssize_t clanq_recv_cur(struct clanq_conn *c, struct clanq_iov_cur *cur,
			      uint64_t room, unsigned int flags)
{
	struct clanq_rec h;
	int err = clanq_conn_wait_msg(c, &h, flags);

	if (err <= 0)
		return err;
	switch (h.type) {
	case CLANQ_REC_DATA:
		if (h.len > room)
			return -EMSGSIZE;
		clanq_iov_put(cur, c->rx_ring + c->rx_pos + CLANQ_REC_HDR, h.len);
		clanq_conn_consume(c);
		return h.len;
	case CLANQ_REC_LARGE:
		return clanq_recv_large(c, cur, room);
	case CLANQ_REC_REGION:	/* not a message: clanq_conn_recv_region() */
		c->peek_size = 0;
		return -ENOMSG;
	default:		/* a FRAG with no LARGE before it */
		clanq_conn_reset(c, -EPROTO);
		return -EPROTO;
	}
}

static ssize_t __attribute__((noinline))
clanq_recv_slow(struct clanq_conn *c, void *buf, size_t len, unsigned int flags)
{
	struct iovec iov = { buf, len };
	struct clanq_iov_cur cur = { &iov, 0 };

	return clanq_recv_cur(c, &cur, len, flags);
}

ssize_t clanq_recvv(struct clanq_conn *c, const struct iovec *iov, int iovcnt,
		    unsigned int flags)
{
	int64_t room = clanq_iov_sum(iov, iovcnt);
	struct clanq_iov_cur cur = { iov, 0 };

	if (!c || room < 0 || (flags & ~CLANQ_MSG_DONTWAIT))
		return -EINVAL;
	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	return clanq_recv_cur(c, &cur, (uint64_t)room, flags);
}

ssize_t clanq_recv_size(struct clanq_conn *c, unsigned int flags)
{
	struct clanq_rec h;
	int64_t total;
	int err;

	if (!c || (flags & ~CLANQ_MSG_DONTWAIT))
		return -EINVAL;
	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	err = clanq_conn_wait_msg(c, &h, flags);
	if (err <= 0)
		return err;
	switch (h.type) {
	case CLANQ_REC_DATA:
		return h.len;
	case CLANQ_REC_LARGE:
		total = clanq_conn_large_len(c);
		c->peek_size = 0;
		return total;
	case CLANQ_REC_REGION:
		c->peek_size = 0;
		return -ENOMSG;
	default:
		clanq_conn_reset(c, -EPROTO);
		return -EPROTO;
	}
}

size_t clanq_conn_eager_max(const struct clanq_conn *c)
{
	return clanq_ring_max_msg(c->tx_cap);
}

/*
 * The common receive, alone: an open connection, and a whole message at
 * our head that fits buf. The peer's tail is loaded only when what it
 * said last is used up; tail and record are checked by
 * clanq_ring_check_at(), as the general path checks them. Anything
 * else, empty included, is the general path's.
 */
ssize_t clanq_recv(struct clanq_conn *c, void *buf, size_t len,
		   unsigned int flags)
{
	uint64_t head = c->rx_head, pos = c->rx_pos, n;
	struct clanq_rec h;

	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	if (__builtin_expect(c->state != CLANQ_CONN_OPEN, 0))
		return clanq_recv_slow(c, buf, len, flags);
	if (head == c->rx_tail_seen)
		/* [G] of ring.h: the tail, then the records below it */
		c->rx_tail_seen = __atomic_load_n(&c->rx_hdr->tail, __ATOMIC_ACQUIRE);
	memcpy(&h, c->rx_ring + pos, sizeof(h));
	if (__builtin_expect(clanq_ring_check_at(c->rx_cap, head, pos, c->rx_tail_seen,
						 h, &n) != CLANQ_REC_OK ||
			     h.type != CLANQ_REC_DATA || h.len > len, 0))
		return clanq_recv_slow(c, buf, len, flags);
	clanq_copy(buf, c->rx_ring + pos + CLANQ_REC_HDR, h.len);
	c->msgs_in++;
	c->bytes_in += h.len;
	clanq_conn_rx_advance(c, n);
	if (clanq_ring_credit_due(c->rx_cap, c->rx_head, c->rx_returned))
		(void)clanq_conn_return_credit(c);
	return h.len;
}

ssize_t clanq_recv_peek(struct clanq_conn *c, const void **data,
			unsigned int flags)
{
	struct clanq_rec h;
	int err;

	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	err = clanq_conn_wait_msg(c, &h, flags);
	if (err <= 0)
		return err;
	if (__builtin_expect(h.type != CLANQ_REC_DATA, 0)) {
		/* a large message is not in the ring whole: clanq_recv() it */
		if (h.type == CLANQ_REC_LARGE) {
			err = (int)clanq_conn_large_len(c);
			c->peek_size = 0;
			return err < 0 ? err : -EMSGSIZE;
		}
		if (h.type == CLANQ_REC_REGION) {
			c->peek_size = 0;
			return -ENOMSG;
		}
		clanq_conn_reset(c, -EPROTO);
		return -EPROTO;
	}
	*data = c->rx_ring + c->rx_pos + CLANQ_REC_HDR;
	return h.len;
}

void clanq_recv_done(struct clanq_conn *c)
{
	if (c->peek_size)
		clanq_conn_consume(c);
}

/*
 * Wait for cost bytes of credit in a window of the peer's of cap bytes
 * that we wrote tail bytes into, the peer's consumed total being the
 * word at *word (our ring's hdr.credit, or hdr.bulk_credit): 0 and
 * *credit; -EAGAIN (CLANQ_MSG_DONTWAIT); the connection's error.
 * Waiting bumps the peer's hdr.want first, so a peer that polls hands
 * back what it consumed at once. A CLANQ_MSG_DONTWAIT send that finds
 * too little bumps it too, once per credit value (*asked_at: the credit
 * it last asked at, plus one): a receiver hands back on its own only
 * every quarter window, and a record with the PAD before it can need
 * nearly the whole ring, so a sender that retried without asking could
 * wait for ever on a peer that has consumed everything.
 */
static int clanq_conn_wait_room(struct clanq_conn *c, const uint64_t *word,
				uint64_t cap, uint64_t tail, uint64_t cost,
				unsigned int flags, uint64_t *creditp,
				uint64_t *asked_at)
{
	uint64_t credit;
	int64_t space;
	bool asked = false;
	int err;

	/* this send's: clanq_conn_rdma_settle() waits by them too */
	c->send_flags = flags;
	c->send_deadline = 0;
	for (;;) {
		if (c->state == CLANQ_CONN_RESET)
			return c->error;
		if (c->state != CLANQ_CONN_OPEN || c->fin_seen)
			return c->state == CLANQ_CONN_FIN ? -EPIPE : -ENOTCONN;
		if (c->peer_gone)
			return -ECONNRESET;
		credit = __atomic_load_n(word, __ATOMIC_ACQUIRE);
		space = clanq_ring_space(cap, tail, credit);
		if (space < 0) {
			clanq_conn_reset(c, -EPROTO);
			return -EPROTO;
		}
		*creditp = credit;
		if ((uint64_t)space >= cost)
			return 0;
		if (!asked)
			c->credit_waits++;
		if (flags & CLANQ_MSG_DONTWAIT) {
			if (!asked && clanq_conn_news(c)) {
				asked = true;	/* counted once */
				continue;
			}
			if (*asked_at != credit + 1) {
				err = clanq_conn_put_word(c,
					offsetof(struct clanq_ring_hdr, want),
					++c->tx_want);
				if (err)
					return c->state == CLANQ_CONN_RESET ?
					       c->error : err;
				*asked_at = credit + 1;
			}
			return -EAGAIN;
		}
		if (!asked) {
			/* ours too: the peer may be waiting for it */
			(void)clanq_conn_return_credit(c);
			err = clanq_conn_put_word(c, offsetof(struct clanq_ring_hdr, want),
						  ++c->tx_want);
			if (err)
				return c->state == CLANQ_CONN_RESET ? c->error : err;
			asked = true;
			/* the flush's barrier ordered the store before this look */
			continue;
		}
		if (!c->send_deadline)
			c->send_deadline = clanq_conn_deadline(c->send_timeout_ns);
		err = clanq_conn_block(c, word, credit, c->send_deadline);
		if (err)
			return err;
		asked = false;
	}
}

/* Wait for cost bytes of the peer's ring: as clanq_conn_wait_room(). */
static int clanq_conn_wait_credit(struct clanq_conn *c, uint64_t cost,
				  unsigned int flags)
{
	uint64_t credit = 0;
	int err = clanq_conn_wait_room(c, &c->rx_hdr->credit, c->tx_cap, c->tx_tail,
				       cost, flags, &credit, &c->tx_want_at);

	/* credit only grows: what was checked last is the limit */
	if (credit + c->tx_cap > c->tx_limit)
		c->tx_limit = credit + c->tx_cap;
	return err;
}

/* Lay out [PAD] record trailer at ring (the peer's, or the stage's). */
static void clanq_conn_lay(char *ring, uint64_t pos, uint64_t pad, uint16_t type,
			   struct clanq_iov_cur *cur, uint64_t len,
			   uint64_t rec, uint64_t new_tail)
{
	struct clanq_rec h = { 0, CLANQ_REC_PAD, 0 };

	if (pad) {
		h.len = (uint32_t)(pad - CLANQ_REC_HDR);
		memcpy(ring + pos, &h, sizeof(h));
		pos = 0;
	}
	h.len = (uint32_t)len;
	h.type = type;
	memcpy(ring + pos, &h, sizeof(h));
	clanq_iov_take(ring + pos + CLANQ_REC_HDR, cur, len);
	memcpy(ring + pos + rec - CLANQ_REC_TRAILER, &new_tail, sizeof(new_tail));
}

/*
 * Before a PIO tail store: the engine must have written the tail of our
 * last RDMA send, or our PIO tail would cover records not there yet. We
 * read it back through the mapping: only we should write that word, but
 * the peer can (or its region is gone, and we read the sink), so the
 * wait is bounded: by this send's deadline (clanq_conn_set_timeouts()),
 * at most CLANQ_CONN_SETTLE_NS; with CLANQ_MSG_DONTWAIT it spins the
 * net's spin time, then says -EAGAIN (try again: no event says when).
 * Flags and deadline are this send's, as clanq_conn_wait_credit() left
 * them.
 */
static int clanq_conn_rdma_settle(struct clanq_conn *c)
{
	struct clanq_ring_hdr *ph = clanq_peer_hdr(c);
	bool dontwait = (c->send_flags & (CLANQ_MSG_DONTWAIT | CLANQ_MSG_SETTLE)) ==
			CLANQ_MSG_DONTWAIT;
	uint64_t start = 0, now, limit = ~0ull;
	unsigned int spins = 0;

	while (c->tx_rdma_tail &&
	       __atomic_load_n(&ph->tail, __ATOMIC_ACQUIRE) != c->tx_rdma_tail) {
		clanq_net_drain_rdma(c->net);
		if (c->state == CLANQ_CONN_RESET)
			return c->error;
		if (c->peer_gone)
			return -ECONNRESET;
		clanq_cpu_relax();
		if (++spins % 64)
			continue;
		/* now and then: the clock, and a notice that the peer is gone */
		(void)clanq_conn_news(c);
		now = clanq_now_ns();
		if (!start) {
			start = now;
			if (dontwait) {
				limit = now + c->net->spin_ns;
			} else {
				if (!c->send_deadline)
					c->send_deadline =
						clanq_conn_deadline(c->send_timeout_ns);
				limit = c->send_deadline;
			}
			if (limit > now + CLANQ_CONN_SETTLE_NS)
				limit = now + CLANQ_CONN_SETTLE_NS;
		}
		if (now >= limit)
			return dontwait ? -EAGAIN : -ETIMEDOUT;
	}
	c->tx_rdma_tail = 0;
	return 0;
}

/* PIO: the record, then the credit we owe and the tail, released ([G]). */
static int clanq_conn_write_pio(struct clanq_conn *c, uint64_t pad, uint16_t type,
				struct clanq_iov_cur *cur, uint64_t len,
				uint64_t rec, uint64_t new_tail)
{
	struct clanq_ring_hdr *ph = clanq_peer_hdr(c);
	int err = clanq_conn_rdma_settle(c);

	if (err)
		return err;
	clanq_conn_lay(c->tx.base + CLANQ_RING_HDR, c->tx_pos, pad,
		       type, cur, len, rec, new_tail);
	if (c->rx_head != c->rx_returned && c->state != CLANQ_CONN_RESET) {
		__atomic_store_n(&ph->credit, c->rx_head, __ATOMIC_RELEASE);
		c->rx_returned = c->rx_head;
	}
	__atomic_store_n(&ph->tail, new_tail, __ATOMIC_RELEASE);
	/* a system call only if the peer sleeps on it */
	err = clanq_ap_flush(&c->tx, 0, 2 * sizeof(uint64_t));
	if (err == -ENXIO) {
		clanq_conn_on_revoked(c);
		err = 0;	/* the loss is reported by the next call */
	}
	return err;
}

/*
 * RDMA: the record into the stage, then requests for [PAD header,]
 * record and tail (its trailer), in that order in one queue: the engine
 * makes them visible in that order.
 *
 * The credit we owe rides along only where it costs no request: by PIO
 * through the mapping. Without one (a peer on another host) it would be
 * a third request, and a wire such as verbs completes a queue's
 * requests one after the other, each a network round trip, before the
 * tail can go. It goes back by the receiver's other rules instead:
 * every quarter ring, before it blocks, and when the sender asks
 * (hdr.want), which every sender short of credit does, blocking or not
 * (clanq_conn_wait_room()).
 */
static int clanq_conn_write_rdma(struct clanq_conn *c, uint64_t pad, uint16_t type,
				 struct clanq_iov_cur *cur, uint64_t len,
				 uint64_t rec, uint64_t new_tail, uint64_t cookie)
{
	uint64_t pos = c->tx_pos;
	int err = clanq_conn_stage(c);

	if (err)
		return err;
	clanq_conn_lay((char *)c->stage.mem + CLANQ_RING_HDR, pos, pad, type,
		       cur, len, rec, new_tail);
	if (pad) {
		err = clanq_conn_post(c, CLANQ_RING_HDR + pos, CLANQ_RING_HDR + pos,
				      CLANQ_REC_HDR, 0, cookie);
		pos = 0;
	}
	if (!err)
		err = clanq_conn_post(c, CLANQ_RING_HDR + pos, CLANQ_RING_HDR + pos,
				      rec, 0, cookie);
	/*
	 * Credit is not ordered with our data, and a PIO store of it must
	 * never be overtaken by an older value the engine writes later:
	 * with a mapping it only ever goes by PIO.
	 */
	if (!err && c->tx.base)
		err = clanq_conn_return_credit(c);
	if (!err)
		err = clanq_conn_post(c, CLANQ_RING_HDR + pos + rec - CLANQ_REC_TRAILER,
				      0, sizeof(uint64_t), CLANQ_RDMA_LAST |
				      (cookie & CLANQ_COOKIE_FIN ? CLANQ_RDMA_SIGNAL : 0),
				      cookie);
	if (!err)
		err = clanq_rdma_post_push(&c->net->ep);
	c->rdma_sends++;
	if (c->tx.base)
		c->tx_rdma_tail = new_tail;
	return err;
}

/* Past cost bytes of the peer's ring: [a PAD and] a record. */
static inline void clanq_conn_tx_advance(struct clanq_conn *c, uint64_t cost)
{
	c->tx_tail += cost;
	c->tx_pos += cost;
	if (c->tx_pos >= c->tx_cap)	/* a record ends at the end at most */
		c->tx_pos -= c->tx_cap;
}

static int clanq_conn_write(struct clanq_conn *c, uint16_t type,
			    struct clanq_iov_cur *cur, uint64_t len,
			    unsigned int flags)
{
	uint64_t rec = clanq_rec_size(len), pad, cost, new_tail, cookie;
	int err;

	if (len > clanq_ring_max_msg(c->tx_cap))
		return -EMSGSIZE;
	cost = clanq_ring_cost_at(c->tx_cap, c->tx_pos, rec, &pad);
	err = clanq_conn_wait_credit(c, cost, flags);
	if (err)
		return err;
	new_tail = c->tx_tail + cost;
	if (c->tx.base && len < c->rdma_threshold && !(flags & CLANQ_MSG_RDMA)) {
		err = clanq_conn_write_pio(c, pad, type, cur, len, rec,
					   new_tail);
	} else {
		cookie = clanq_conn_notice_cookie(c->net, c->slot);
		if (type == CLANQ_REC_FIN)
			cookie |= CLANQ_COOKIE_FIN;
		err = clanq_conn_write_rdma(c, pad, type, cur, len, rec,
					    new_tail, cookie);
	}
	if (err)
		return err;
	clanq_conn_tx_advance(c, cost);
	if (type == CLANQ_REC_DATA) {
		c->msgs_out++;
		c->bytes_out += len;
	}
	return 0;
}

/*
 * The peer's bulk window, once it offered one (ring.h, CLANQ_REC_BULK):
 * imported on first sight, with the ring's notice (its loss is the
 * peer's: closed or dead), and mapped for PIO where the ring is. One
 * try a connection; true when it can be written.
 */
static bool clanq_conn_bulk_ready(struct clanq_conn *c)
{
	struct clanq_net *net = c->net;
	struct clanq_ap_attr attr = {
		.flags = CLANQ_AP_SINK,
		.notify_ep = net->ep.addr.id,
		.notify_cookie = clanq_conn_notice_cookie(net, c->slot),
	};
	struct clanq_addr where;
	uint64_t desc, key, cap;
	uint32_t region;
	int err;

	if (c->bulk_tx.id)
		return true;
	if (c->bulk_tx_refused)
		return false;
	desc = __atomic_load_n(&c->rx_hdr->bulk_desc, __ATOMIC_ACQUIRE);
	if (!desc)
		return false;
	c->bulk_tx_refused = true;	/* until it works */
	if (!clanq_bulk_desc_ok(desc, &region, &cap))
		return false;
	key = __atomic_load_n(&c->rx_hdr->bulk_key, __ATOMIC_RELAXED);
	/* the peer's node, whatever it wrote: never a third party's region */
	where.node = c->peer.node;
	where.id = region;
	err = clanq_ap_import_attr(net->dev, &c->bulk_tx, where, key, 0, cap,
				   CLANQ_RIGHTS_ALL, &attr);
	if (err) {
		c->bulk_tx.id = 0;
		return false;
	}
	err = c->tx.base ? clanq_ap_map(&c->bulk_tx) : -EOPNOTSUPP;
	if (err && err != -EOPNOTSUPP) {
		clanq_ap_close(&c->bulk_tx);
		c->bulk_tx.id = 0;
		return false;
	}
	c->bulk_tx_cap = cap;
	c->bulk_tx_refused = false;
	return true;
}

/*
 * One piece of a large message into the peer's bulk window, then the
 * BULK record naming it: at most a quarter of the window (so that the
 * receiver copies one out while we write the next), never across its
 * end, after the window's credit for it is there. By PIO if the window
 * is mapped and the piece is below the RDMA threshold, else from the
 * staging mirror by RDMA, its record by RDMA after it (one queue keeps
 * them in order). Fails before it takes bytes of cur, or (after) with
 * the connection reset; *n: the bytes taken.
 */
/* A zero-copy send's registration of the application's bytes. */
struct clanq_zc {
	struct clanq_region r;	/* r.mem NULL: none */
	uint64_t off;		/* its bytes already posted */
};

static int clanq_conn_write_bulk(struct clanq_conn *c, struct clanq_iov_cur *cur,
				 uint64_t left, uint64_t *n, struct clanq_zc *zc)
{
	uint64_t cap = c->bulk_tx_cap, pos = c->bulk_tail % cap, len = cap / 4, credit;
	struct clanq_bulk_ref ref = { 0 };
	struct iovec rv = { &ref, sizeof(ref) };
	struct clanq_iov_cur rc;
	bool rdma;
	int err;

	if (len > left)
		len = left;
	if (len > cap - pos)
		len = cap - pos;
	rdma = !c->bulk_tx.base || len >= c->rdma_threshold;
	if (rdma && !zc && !c->bulk_stage.mem) {
		err = clanq_region_alloc(c->net->dev, &c->bulk_stage, cap);
		if (err) {
			c->bulk_stage.mem = NULL;
			return err;
		}
	}
	err = clanq_conn_wait_room(c, &c->rx_hdr->bulk_credit, cap, c->bulk_tail, len,
				   0, &credit, &c->bulk_want_at);
	if (err)
		return err;
	if (zc) {
		/* the engine reads the application's pages: the last one signals */
		clanq_iov_take(NULL, cur, len);
		err = clanq_conn_post_to(c, zc->r.addr.id, c->bulk_tx.id, zc->off, pos, len,
					 len == left ? CLANQ_RDMA_SIGNAL : 0,
					 clanq_conn_notice_cookie(c->net, c->slot) |
					 (len == left ? CLANQ_COOKIE_ZC : 0));
		zc->off += len;
	} else if (rdma) {
		clanq_iov_take((char *)c->bulk_stage.mem + pos, cur, len);
		err = clanq_conn_post_to(c, c->bulk_stage.addr.id, c->bulk_tx.id, pos, pos,
					 len, 0, clanq_conn_notice_cookie(c->net, c->slot));
	} else {
		clanq_iov_take(c->bulk_tx.base + pos, cur, len);
	}
	ref.at = c->bulk_tail;
	ref.len = (uint32_t)len;
	c->bulk_tail += len;
	*n = len;
	while (!err) {
		rc.iov = &rv;
		rc.off = 0;
		err = clanq_conn_write(c, CLANQ_REC_BULK, &rc, sizeof(ref),
				       rdma ? CLANQ_MSG_RDMA : 0);
		if (err != -EINTR)
			break;
		err = 0;	/* its bytes are taken: the record must follow */
	}
	if (err)
		clanq_conn_reset(c, err);
	return err;
}

/*
 * A message longer than a record: its LARGE record (as any send: no
 * credit and CLANQ_MSG_DONTWAIT, -EAGAIN and nothing sent), then its
 * bytes, waited for whatever the flags: as FRAGs, each as long as a
 * record can be, or, once the peer offered its bulk window, as pieces
 * of it named by BULK records. The receiver takes each out as it comes
 * and hands its space back, so the ring (or the window), and nothing
 * else, holds what is in flight. An error after the LARGE leaves the
 * peer with half a message: the connection is reset (the peer sees it
 * when we close).
 */
/*
 * Zero copy. Where the peer's window is written by the engine (another
 * host, or CLANQ_CONN_RDMA_ONLY), the rest of a message of at least
 * CLANQ_ZC_MIN bytes in one buffer is registered (pinned) and the engine
 * reads it from the application's pages: the copy into the staging
 * mirror goes, for two system calls (register, free) and a wait for the
 * last write's completion before the send returns (the buffer is the
 * application's again). Not worth it for less; where registration is
 * refused (RLIMIT_MEMLOCK), the staging mirror as before.
 */
#define CLANQ_ZC_MIN		(1u << 20)
/* The bound of that wait, as a FIN's (clanq_conn_write_fin()). */
#define CLANQ_ZC_WAIT_NS	(30 * 1000 * 1000 * 1000ull)

static void clanq_conn_zc_start(struct clanq_conn *c, const struct clanq_iov_cur *cur,
				uint64_t left, struct clanq_zc *zc)
{
	if (cur->iov->iov_len - cur->off < left ||
	    clanq_region_register(c->net->dev, &zc->r,
				  (char *)cur->iov->iov_base + cur->off, left))
		zc->r.mem = NULL;
	zc->off = 0;
}

/*
 * The last write of a zero-copy send completed (c->zc_done reaches
 * want), or the connection's error. Spins the net's spin time, then
 * waits for the net's events (a completion is one), bounded as a FIN's
 * wait: a peer that is gone completes the writes with an error sooner.
 */
static int clanq_conn_zc_wait(struct clanq_conn *c, uint64_t want)
{
	struct clanq_net *net = c->net;
	uint64_t start = clanq_now_ns(), now;
	int err;

	for (;;) {
		clanq_net_drain_rdma(net);
		if (c->state == CLANQ_CONN_RESET)
			return c->error;
		if (c->zc_done >= want)
			return 0;
		now = clanq_now_ns();
		if (now - start >= CLANQ_ZC_WAIT_NS)
			return -ETIMEDOUT;
		if (now - start < net->spin_ns) {
			clanq_cpu_relax();
			continue;
		}
		/* short: a completion that came before the wait is taken above */
		err = clanq_net_block(net, now + 1000 * 1000);
		if (err && err != -ETIMEDOUT && err != -EINTR)
			return err;
	}
}

static int clanq_conn_send_large(struct clanq_conn *c, struct clanq_iov_cur *cur,
				 uint64_t len, unsigned int flags)
{
	uint64_t frag_max = clanq_ring_max_msg(c->tx_cap), left, n = 0;
	struct iovec hv = { &len, sizeof(len) };
	struct clanq_iov_cur hc = { &hv, 0 };
	struct clanq_zc zc = { .r.mem = NULL };
	bool zc_tried = false;
	int err;

	err = clanq_conn_write(c, CLANQ_REC_LARGE, &hc, sizeof(len), flags);
	if (err)
		return err;
	for (left = len; left; left -= n) {
		if (clanq_conn_bulk_ready(c)) {
			if (!zc_tried && !c->bulk_tx.base && left >= CLANQ_ZC_MIN) {
				clanq_conn_zc_start(c, cur, left, &zc);
				zc_tried = true;
			}
			do {
				err = clanq_conn_write_bulk(c, cur, left, &n,
							    zc.r.mem ? &zc : NULL);
			} while (err == -EINTR);	/* before it takes bytes */
		} else {
			n = left < frag_max ? left : frag_max;
			do {
				err = clanq_conn_write(c, CLANQ_REC_FRAG, cur, n, 0);
			} while (err == -EINTR);	/* fails before it takes bytes */
		}
		if (err)
			break;
	}
	if (!err && zc.r.mem) {
		err = clanq_conn_zc_wait(c, ++c->zc_sends);
		if (!err && zc.off != (uint64_t)zc.r.size)
			err = -EIO;	/* cannot be: every byte went from it */
	}
	/* on an error, c is reset first: writes still queued fail, not read */
	if (err)
		clanq_conn_reset(c, err);
	if (zc.r.mem)
		clanq_region_free(&zc.r);
	if (err)
		return c->error;
	c->msgs_out++;
	c->bytes_out += len;
	return 0;
}

int clanq_sendv(struct clanq_conn *c, const struct iovec *iov, int iovcnt,
		unsigned int flags)
{
	int64_t len = clanq_iov_sum(iov, iovcnt);
	struct clanq_iov_cur cur = { iov, 0 };

	if (len <= 0 || (flags & ~CLANQ_MSG_DONTWAIT))
		return -EINVAL;
	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	if ((uint64_t)len > CLANQ_CONN_MSG_MAX)
		return -EMSGSIZE;
	if (c->state == CLANQ_CONN_CONNECTING || !c->rx_hdr)
		return -ENOTCONN;
	if ((uint64_t)len <= clanq_ring_max_msg(c->tx_cap))
		return clanq_conn_write(c, CLANQ_REC_DATA, &cur, (uint64_t)len, flags);
	return clanq_conn_send_large(c, &cur, (uint64_t)len, flags);
}

/*
 * For lib/onesided.c: one record of a type that is not a message (a
 * region descriptor), sent as clanq_send() sends a small message; and
 * the record at our head, found as clanq_recv() finds one (1 and *h;
 * 0 at the end; -errno), its payload in place, then taken.
 */
int clanq_conn_send_rec(struct clanq_conn *c, uint16_t type, const void *buf,
			size_t len, unsigned int flags)
{
	struct iovec iov = { (void *)buf, len };
	struct clanq_iov_cur cur = { &iov, 0 };

	if (c->state == CLANQ_CONN_CONNECTING || !c->rx_hdr)
		return -ENOTCONN;
	return clanq_conn_write(c, type, &cur, len, flags);
}

int clanq_conn_head_rec(struct clanq_conn *c, struct clanq_rec *h,
			const void **data, unsigned int flags)
{
	int err = clanq_conn_wait_msg(c, h, flags);

	if (err == 1)
		*data = c->rx_ring + c->rx_pos + CLANQ_REC_HDR;
	return err;
}

void clanq_conn_take_rec(struct clanq_conn *c)
{
	clanq_conn_skip(c);
}

/*
 * The common send, alone: an open connection whose peer's ring is
 * mapped, no RDMA send of ours in flight, a message of PIO size that
 * fits before the ring's end, and credit we know of. The record, the
 * credit we owe, the tail ([G]); then [F]: a full barrier and one look
 * at whether the peer sleeps on its ring. 1: not this case, the general
 * path takes it (waits for credit, pads, reports errors).
 */
static int clanq_send_pio_fast(struct clanq_conn *c, const void *buf, uint64_t len)
{
	struct clanq_ring_hdr *ph = clanq_peer_hdr(c);
	uint64_t rec = clanq_rec_size(len), pos = c->tx_pos, pad;
	uint64_t new_tail = c->tx_tail + rec;
	struct clanq_rec h = { (uint32_t)len, CLANQ_REC_DATA, 0 };
	char *r;

	if (len > clanq_ring_max_msg(c->tx_cap) ||
	    clanq_ring_cost_at(c->tx_cap, pos, rec, &pad) != rec)
		return 1;	/* too long, or a PAD first */
	if (new_tail > c->tx_limit) {
		uint64_t credit = __atomic_load_n(&c->rx_hdr->credit, __ATOMIC_ACQUIRE);

		if (clanq_ring_space(c->tx_cap, c->tx_tail, credit) < (int64_t)rec)
			return 1;
		c->tx_limit = credit + c->tx_cap;
	}
	r = c->tx.base + CLANQ_RING_HDR + pos;
	memcpy(r, &h, sizeof(h));
	clanq_copy(r + CLANQ_REC_HDR, buf, len);
	memcpy(r + rec - CLANQ_REC_TRAILER, &new_tail, sizeof(new_tail));
	if (c->rx_head != c->rx_returned) {
		__atomic_store_n(&ph->credit, c->rx_head, __ATOMIC_RELEASE);
		c->rx_returned = c->rx_head;
	}
	__atomic_store_n(&ph->tail, new_tail, __ATOMIC_RELEASE);
	c->tx_tail = new_tail;
	c->tx_pos = pos + rec == c->tx_cap ? 0 : pos + rec;
	c->msgs_out++;
	c->bytes_out += len;
	/* [F] of queue.h: our stores, then our look at what is armed */
	clanq_q_mb();
	if (__builtin_expect(__atomic_load_n(c->tx_armed, __ATOMIC_RELAXED) &
			     c->tx_armed_bit, 0) &&
	    clanq_ap_flush_armed(&c->tx, 0, 2 * sizeof(uint64_t)) == -ENXIO)
		clanq_conn_on_revoked(c);	/* the loss is reported by the next call */
	return 0;
}

static int __attribute__((noinline))
clanq_send_slow(struct clanq_conn *c, const void *buf, size_t len, unsigned int flags)
{
	struct iovec iov = { (void *)buf, len };

	return clanq_sendv(c, &iov, 1, flags);
}

int clanq_send(struct clanq_conn *c, const void *buf, size_t len,
	       unsigned int flags)
{
	/* the parent's ring is not this process's to write */
	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	if (__builtin_expect(c->state == CLANQ_CONN_OPEN && c->tx.base && len &&
			     len < c->rdma_threshold && !c->tx_rdma_tail &&
			     !c->fin_seen && !c->peer_gone &&
			     !(flags & ~CLANQ_MSG_DONTWAIT), 1) &&
	    !clanq_send_pio_fast(c, buf, len))
		return 0;
	return clanq_send_slow(c, buf, len, flags);
}

/*
 * Close: the end of the stream, after every byte sent before it, and
 * never a wait for the peer to read. A FIN record where the ring has
 * room; where it has none, the end goes into the peer's header instead
 * (its fin word, ring.h: 1 + our tail), which the peer takes for a FIN
 * once it has read everything and sees us gone: so a server that closes
 * a client that stopped reading does not stall its loop, and the client
 * still reads every message, then the end. A close must never cut off
 * what the engine still has queued for an RDMA send (the staging region
 * it reads from goes with the connection): by PIO the end is stored
 * once our last RDMA tail landed; by RDMA it is queued behind them, and
 * its completion, which comes after every write queued before it (a
 * ring's worth at most: microseconds on one host, seconds across an
 * emulated network), is waited for before the staging region goes,
 * bounded by CLANQ_FIN_WAIT_NS. A peer that is gone completes it with
 * an error sooner. A closer with data of its own unread aborts, as TCP
 * does: a FIN record if it has room, else the peer reads a reset.
 */
#define CLANQ_FIN_WAIT_NS	(30 * 1000 * 1000 * 1000ll)

/*
 * The end of the stream in the peer's header word (above): by PIO once
 * our last RDMA tail landed, by RDMA signaled as a FIN record would be.
 */
static int clanq_conn_put_fin_word(struct clanq_conn *c)
{
	int err;

	if (c->tx.base) {
		c->send_flags = CLANQ_MSG_SETTLE;
		c->send_deadline = clanq_now_ns() + CLANQ_FIN_WAIT_NS;
		err = clanq_conn_rdma_settle(c);
		if (err)
			return err;
	}
	return clanq_conn_put_word_as(c, offsetof(struct clanq_ring_hdr, fin),
				      c->tx_tail + 1, CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL,
				      clanq_conn_notice_cookie(c->net, c->slot) |
				      CLANQ_COOKIE_FIN);
}

/* The FIN record, or where it finds no room the fin word; -errno. */
static int clanq_conn_put_fin(struct clanq_conn *c)
{
	int err = clanq_conn_write(c, CLANQ_REC_FIN, NULL, 0,
				   CLANQ_MSG_DONTWAIT | CLANQ_MSG_SETTLE);

	if (err != -EAGAIN || c->peer_gone || clanq_conn_has_data(c))
		return err;
	return clanq_conn_put_fin_word(c);
}

int clanq_conn_write_fin(struct clanq_conn *c)
{
	struct clanq_net *net = c->net;
	struct clanq_rdma_comp comp;
	uint64_t deadline;
	int err;

	err = clanq_conn_put_fin(c);
	if (err || c->tx.base)
		return err;
	deadline = clanq_now_ns() + CLANQ_FIN_WAIT_NS;
	while (clanq_now_ns() < deadline) {
		if (!clanq_rdma_poll(&net->ep, &comp)) {
			if ((uint32_t)comp.cookie == (c->slot | CLANQ_COOKIE_FIN))
				return comp.status;
			clanq_net_comp(net, &comp);
			continue;
		}
		clanq_cpu_relax();
	}
	return -ETIMEDOUT;
}

_Static_assert(CLANQ_BULK_MIN == CLANQ_CONN_BULK_MIN && CLANQ_BULK_MAX == CLANQ_CONN_BULK_MAX &&
	       CLANQ_CONN_BULK_DEFAULT % 4096 == 0,
	       "ring.h's window limits are net.h's");
