// SPDX-License-Identifier: GPL-2.0
/*
 * The receive path: the one seam every wire delivers into (wire.c), so
 * that a message or a write behaves the same whatever carried it. A wire
 * sends its own way (struct clanq_wire_ops); what arrives ends here.
 *
 * clanq_rx_oob() is the receive path of an OOB message: the paper's
 * oob_q_put. The write index is kernel-private; the queue is full when
 * one free slot is left, and then the message is discarded and counted,
 * as the CLAN NIC did. Receiving is entirely at user level. The driver's
 * own notices (CLANQ_OOB_UNREACHABLE, CLANQ_OOB_REVOKED) are queued the
 * same way.
 *
 * clanq_rx_write() is the receive path of an RDMA write, whatever wire
 * carried it (wire.c): the one place a write is checked against
 * revocation, and where it fires the tripwires it touched (tripwire.c).
 * clanq_rx_written() is the same for a write a remote wire's NIC placed
 * itself. clanq_rx_read() and clanq_rx_atomic() are the exporter's side
 * of an RDMA read and of an atomic, checked against revocation the same
 * way; a read fires nothing, an atomic that changed its word fires the
 * tripwires on it as a write does.
 */
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/overflow.h>

#include "clanq_drv.h"

static int clanq_oob_put(struct clanq_nic *nic, struct clanq_kep *ep,
			 const struct clanq_oob_msg *msg);

/**
 * clanq_rx_oob() - the receive path of an OOB message
 * @nic: the destination NIC
 * @dst_id: the destination endpoint there, or a shared service: a member
 * @msg: the message, its source stamped by the sender's driver
 *
 * Return: 0 if queued; -ENOENT for no such endpoint, -ENOBUFS for a full
 * queue: both counted here, neither the sender's business (the wire
 * reports only what a NIC could know).
 */
int clanq_rx_oob(struct clanq_nic *nic, u32 dst_id,
		 const struct clanq_oob_msg *msg)
{
	struct clanq_kep *ep = clanq_kep_lookup_dst(nic, dst_id, msg);

	if (!ep) {
		atomic64_inc(&nic->stats.oob_no_ep);
		return -ENOENT;
	}
	return clanq_oob_put(nic, ep, msg);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_rx_oob);

/* Queue @msg on @ep, drop the caller's reference: as clanq_rx_oob(). */
static int clanq_oob_put(struct clanq_nic *nic, struct clanq_kep *ep,
			 const struct clanq_oob_msg *msg)
{
	struct clanq_kep_oob *oob = &ep->oob;
	unsigned long flags;
	bool queued = false, dead;

	spin_lock_irqsave(&oob->lock, flags);
	dead = oob->dead;
	if (!dead) {
		queued = clanq_q_put(&oob->q, msg);
		if (queued)
			clanq_count(&oob->delivered, &ep->counters->oob_delivered, 1);
		else
			clanq_count(&oob->dropped, &ep->counters->oob_dropped, 1);
	}
	spin_unlock_irqrestore(&oob->lock, flags);

	if (queued) {
		atomic64_inc(&nic->stats.oob_delivered);
		clanq_kep_raise(ep, CLANQ_EV_OOB);
	} else {
		atomic64_inc(dead ? &nic->stats.oob_no_ep : &nic->stats.oob_dropped);
	}
	clanq_kep_put(ep);
	if (dead)
		return -ENOENT;
	return queued ? 0 : -ENOBUFS;
}

/**
 * clanq_oob_unreachable() - tell a sender its message found nobody
 * @nic: the sender's NIC
 * @dst: where the message went
 * @msg: the message, its source stamped
 *
 * A wire calls it when the destination node had no endpoint @dst->id:
 * a CLANQ_OOB_UNREACHABLE notice goes back to the sending endpoint (the
 * network's "port unreachable"). A notice is never answered by another.
 */
void clanq_oob_unreachable(struct clanq_nic *nic, const struct clanq_addr *dst,
			   const struct clanq_oob_msg *msg)
{
	struct clanq_oob_unreachable *u;
	struct clanq_oob_msg n = {
		.type = CLANQ_OOB_UNREACHABLE,
		.len = sizeof(*u),
		.src = *dst,
	};

	static_assert(sizeof(*u) <= CLANQ_OOB_PAYLOAD);
	if (msg->type & CLANQ_OOB_NOTICE)
		return;
	u = (struct clanq_oob_unreachable *)n.payload;
	u->type = msg->type;
	u->len = msg->len;
	memcpy(u->head, msg->payload, sizeof(u->head));
	atomic64_inc(&nic->stats.oob_unreachable);
	clanq_rx_oob(nic, msg->src.id, &n);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_oob_unreachable);

/*
 * The region behind @ap was revoked: a CLANQ_OOB_REVOKED notice to the
 * endpoint named at import, if it is still of @ap's context. Called
 * with the region's ap_lock held: @ap is not closed, its context alive.
 */
void clanq_oob_notify_revoked(struct clanq_kap *ap)
{
	struct clanq_kep *ep = clanq_kep_lookup_owned(ap->ctx, ap->notify_ep);
	struct clanq_oob_revoked *rv;
	struct clanq_oob_msg n = {
		.type = CLANQ_OOB_REVOKED,
		.len = sizeof(*rv),
		.src = { clanq_kregion_node(ap->region), ap->region->id },
	};

	static_assert(sizeof(*rv) <= CLANQ_OOB_PAYLOAD);
	if (!ep)
		return;
	rv = (struct clanq_oob_revoked *)n.payload;
	rv->ap = ap->id;
	rv->cookie = ap->notify_cookie;
	clanq_oob_put(ap->ctx->nic, ep, &n);
}

/*
 * Copy @len bytes from @src at @src_off to @dst at @dst_off, page by
 * page. Both ranges were checked by the caller.
 */
static void clanq_kregion_copy(struct clanq_kregion *dst, u64 dst_off,
			       struct clanq_kregion *src, u64 src_off, u64 len)
{
	while (len) {
		u64 sa = src->first + src_off, da = dst->first + dst_off;
		size_t so = offset_in_page(sa), doff = offset_in_page(da);
		size_t n = min_t(u64, len, min(PAGE_SIZE - so, PAGE_SIZE - doff));
		struct page *sp = src->pages[sa >> PAGE_SHIFT];
		struct page *dp = dst->pages[da >> PAGE_SHIFT];
		void *s = kmap_local_page(sp);
		void *d = kmap_local_page(dp);

		/*
		 * A region may be written through its own aperture: the two
		 * ranges can overlap only within one page. memmove() is
		 * not the default: it is several times slower under TCG.
		 */
		if (sp == dp)
			memmove(d + doff, s + so, n);
		else
			memcpy(d + doff, s + so, n);
		kunmap_local(d);
		kunmap_local(s);
		flush_dcache_page(dp);
		src_off += n;
		dst_off += n;
		len -= n;
	}
}

/* Read @len bytes at @off of @r (checked by the caller) into @buf. */
static void clanq_kregion_read(struct clanq_kregion *r, u64 off, void *buf,
			       size_t len)
{
	while (len) {
		u64 a = r->first + off;
		size_t n = min_t(u64, len, PAGE_SIZE - offset_in_page(a));
		void *p = kmap_local_page(r->pages[a >> PAGE_SHIFT]);

		memcpy(buf, p + offset_in_page(a), n);
		kunmap_local(p);
		buf += n;
		off += n;
		len -= n;
	}
}

/*
 * The copy of clanq_rx_write(), in the order the ABI promises (uapi
 * clanq.h, "What a receiver may rely on"): everything of earlier writes
 * first, then every byte but the final word (the last aligned 8 bytes
 * inside the destination range), then the final word in one store. A
 * memcpy() alone promises no order: the kernel's may store a short
 * copy's tail before its head, which is what a receiver polling the
 * last word of a 64-byte write used to see. The final word is read from
 * the source before the rest is copied, so an overlapping write (a
 * region written through its own aperture) reads what a copy would.
 */
static void clanq_rx_copy(struct clanq_kregion *dst, u64 dst_off,
			  struct clanq_kregion *src, u64 src_off, u64 len)
{
	u64 da = dst->first + dst_off;
	u64 fw = round_down(da + len, 8);	/* the final word's end */
	u64 head, word;
	void *p;

	/* pairs with the receiver's acquire of an earlier final word */
	smp_wmb();
	if (fw < da + 8) {
		clanq_kregion_copy(dst, dst_off, src, src_off, len);
		return;
	}
	fw -= 8;
	head = fw - da;
	clanq_kregion_read(src, src_off + head, &word, sizeof(word));
	clanq_kregion_copy(dst, dst_off, src, src_off, head);
	clanq_kregion_copy(dst, dst_off + head + 8, src, src_off + head + 8,
			   len - head - 8);
	/* the rest before the final word: its store is the release */
	smp_wmb();
	p = kmap_local_page(dst->pages[fw >> PAGE_SHIFT]);
	WRITE_ONCE(*(u64 *)(p + offset_in_page(fw)), word);
	kunmap_local(p);
	flush_dcache_page(dst->pages[fw >> PAGE_SHIFT]);
}

/*
 * After the bytes of a write landed in @dst: its tripwires, added to
 * *@fired when the caller counts them (the engine bounds a turn by them).
 */
static void clanq_rx_fire(struct clanq_kregion *dst, u64 dst_off, u64 len,
			  unsigned int *fired)
{
	unsigned int n = 0;

	/*
	 * [F] of queue.h: the data, then the look at what is armed, against
	 * a waiter's arm, then its look at the data.
	 */
	smp_mb();
	if (READ_ONCE(dst->tw.nr_armed))
		n = clanq_tw_fire(dst, dst_off, len);
	if (fired)
		*fired += n;
}

/**
 * clanq_rx_write() - the receive path of an RDMA write
 * @dst: the destination region
 * @dst_off: into @dst
 * @src: the source region; the caller holds its memory
 *	 (clanq_kregion_mem_get())
 * @src_off: into @src
 * @len: bytes
 * @via: the importer's aperture when the wire is local, so that closing
 *	 it fences writes as freeing the region does
 * @fired: if not NULL, the tripwires the write fired are added to it
 *
 * The one liveness check of the RDMA path. The destination is checked
 * under its revoke_sem (read): while it is held neither REGION_FREE nor
 * AP_CLOSE completes, so a write that started is finished before they
 * return. The source is checked too, without its own revoke_sem (taking
 * two could deadlock two engines against two revocations), so after its
 * REGION_FREE at most the chunk in progress still reads it; its memory
 * stays held until then.
 *
 * Return: 0, -ERANGE outside either region, or -ENXIO if the destination
 * was revoked, the aperture closed or the source freed; on an error
 * nothing was written.
 */
int clanq_rx_write(struct clanq_kregion *dst, u64 dst_off,
		   struct clanq_kregion *src, u64 src_off, u64 len,
		   const struct clanq_kap *via, unsigned int *fired)
{
	u64 dend, send;
	int err = 0;

	/* the engine validated the request; a wire's own bounds come here */
	if (check_add_overflow(dst_off, len, &dend) || dend > dst->len ||
	    check_add_overflow(src_off, len, &send) || send > src->len)
		return -ERANGE;
	down_read(&dst->revoke_sem);
	if (dst->revoked || (via && via->closed) || READ_ONCE(src->revoked)) {
		err = -ENXIO;
	} else if (len) {
		clanq_rx_copy(dst, dst_off, src, src_off, len);
		clanq_rx_fire(dst, dst_off, len, fired);
	}
	up_read(&dst->revoke_sem);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_rx_write);

/**
 * clanq_rx_written() - the receive path of a write another NIC placed
 * @dst: the destination region, exported
 * @dst_off: into @dst
 * @len: bytes
 *
 * A remote wire's NIC wrote the bytes into @dst's pages itself (an RDMA
 * WRITE, before the message that says so arrived): what is left of the
 * receive path is what clanq_rx_write() does after its copy.
 *
 * Return: 0, -ERANGE outside the region, -ENXIO if it was revoked.
 */
int clanq_rx_written(struct clanq_kregion *dst, u64 dst_off, u64 len)
{
	u64 dend;
	int err = 0;

	if (check_add_overflow(dst_off, len, &dend) || dend > dst->len)
		return -ERANGE;
	down_read(&dst->revoke_sem);
	if (dst->revoked)
		err = -ENXIO;
	else if (len)
		clanq_rx_fire(dst, dst_off, len, NULL);
	up_read(&dst->revoke_sem);
	return err;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_rx_written);

/**
 * clanq_rx_read() - the exporter's side of an RDMA read
 * @src: the exported region read from
 * @src_off: into @src
 * @dst: the requester's local region the bytes land in; the caller holds
 *	 its memory (clanq_kregion_mem_get())
 * @dst_off: into @dst
 * @len: bytes
 * @via: the importer's aperture when the wire is local
 *
 * As clanq_rx_write() with the roles turned: the exported region is
 * checked under its revoke_sem (read), so its memory cannot be released
 * while a chunk is read from it, and a chunk that finds it revoked reads
 * nothing: a READ racing a REGION_FREE returns no byte of freed memory.
 * Fires no tripwire.
 *
 * Return: 0, -ERANGE outside either region, or -ENXIO if @src was
 * revoked, the aperture closed or @dst freed.
 */
int clanq_rx_read(struct clanq_kregion *src, u64 src_off,
		  struct clanq_kregion *dst, u64 dst_off, u64 len,
		  const struct clanq_kap *via)
{
	u64 dend, send;
	int err = 0;

	if (check_add_overflow(dst_off, len, &dend) || dend > dst->len ||
	    check_add_overflow(src_off, len, &send) || send > src->len)
		return -ERANGE;
	down_read(&src->revoke_sem);
	if (src->revoked || (via && via->closed) || READ_ONCE(dst->revoked))
		err = -ENXIO;
	else if (len)
		clanq_kregion_copy(dst, dst_off, src, src_off, len);
	up_read(&src->revoke_sem);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_rx_read);

/**
 * clanq_rx_atomic() - the exporter's side of an atomic
 * @dst: the exported region
 * @dst_off: of the word in @dst
 * @op: CLANQ_RDMA_OP_CAS or CLANQ_RDMA_OP_FADD
 * @operand: the request's two operands
 * @old: the word's value before
 * @via: the importer's aperture when the wire is local
 * @fired: as clanq_rx_write()'s
 *
 * With the CPU's atomic instructions on the kernel's mapping of the
 * page: atomic against every other atomic on the word, through the
 * engine or a PIO mapping. The word must be 8-byte aligned in memory,
 * which also keeps it inside one page.
 *
 * Return: 0, -ERANGE outside the region, -EINVAL misaligned or an
 * unknown @op, -ENXIO if @dst was revoked or the aperture closed.
 */
int clanq_rx_atomic(struct clanq_kregion *dst, u64 dst_off, u32 op,
		    const u64 *operand, u64 *old, const struct clanq_kap *via,
		    unsigned int *fired)
{
	u64 end, a;
	bool wrote = false;
	struct page *pg;
	u64 *word;
	void *p;
	int err = 0;

	if (check_add_overflow(dst_off, (u64)CLANQ_RDMA_ATOMIC_LEN, &end) ||
	    end > dst->len)
		return -ERANGE;
	a = dst->first + dst_off;
	if (!IS_ALIGNED(a, CLANQ_RDMA_ATOMIC_LEN) ||
	    (op != CLANQ_RDMA_OP_CAS && op != CLANQ_RDMA_OP_FADD))
		return -EINVAL;
	down_read(&dst->revoke_sem);
	if (dst->revoked || (via && via->closed)) {
		err = -ENXIO;
		goto out;
	}
	pg = dst->pages[a >> PAGE_SHIFT];
	p = kmap_local_page(pg);
	word = p + offset_in_page(a);
	if (op == CLANQ_RDMA_OP_CAS) {
		*old = cmpxchg64(word, operand[0], operand[1]);
		wrote = *old == operand[0];
	} else {
		*old = atomic64_fetch_add(operand[0], (atomic64_t *)word);
		wrote = true;
	}
	kunmap_local(p);
	if (wrote) {
		flush_dcache_page(pg);
		clanq_rx_fire(dst, dst_off, CLANQ_RDMA_ATOMIC_LEN, fired);
	}
out:
	up_read(&dst->revoke_sem);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_rx_atomic);
