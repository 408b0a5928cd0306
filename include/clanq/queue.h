/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * clanq asynchronous queue: the one lock-free circular buffer shared by the
 * driver and the application (Riddoch & Pope, section 3). This file is
 * compiled into the kernel module and into libclanq; there is no second
 * copy.
 *
 * Shape
 *	nr_slots fixed-size slots, nr_slots a power of two. Two index words
 *	in the shared segment, each in [0, nr_slots): prod (the paper's
 *	write_i, or its published mirror lazy_write_i) and cons (read_i).
 *	Empty when prod == cons; full when one free slot is left, i.e.
 *	(prod + 1) % nr_slots == cons. No flag, no lock: each side writes
 *	only its own word and reads the other's.
 *
 * Private state
 *	Each side keeps its own index and the geometry (slot base, mask,
 *	slot size) in struct clanq_queue, in memory the other side cannot
 *	see. The kernel therefore never reads back its own index from the
 *	shared segment, and never derives an address from anything user
 *	space wrote: the peer's index is read once, checked against the
 *	private mask, and a value with bits outside it is taken to mean
 *	"empty" (to a consumer) or "full" (to a producer). A hostile peer
 *	can waste its own queue, never make the kernel step outside it.
 *
 *	Each side also caches the peer's index it last read ("peer"), as
 *	AF_XDP's cached_prod/cached_cons do, and reloads it only when the
 *	cache says empty/full: the peer's cache line is touched once per
 *	batch, not once per slot.
 *
 * Ordering (every pairing in the protocol; nothing else needs a barrier)
 *
 *	producer				consumer
 *	--------				--------
 *	c = load_acquire(cons)		(A)	p = load_acquire(prod)		(C)
 *	if slot free: write slot		if p != own: read slot
 *	store_release(prod, own + 1)	(B)	store_release(cons, own + 1)	(D)
 *
 *	(B) pairs with (C): a consumer that sees the new prod sees the
 *	    slot's contents written before it.
 *	(D) pairs with (A): a producer that sees the new cons knows the
 *	    consumer has finished reading that slot, so it may overwrite it.
 *
 *	The kernel uses smp_load_acquire()/smp_store_release(); user space
 *	the C11 __atomic builtins with the same semantics.
 *
 *	Sleeping (kicks, blocking waits) adds one more pairing, the
 *	store-buffer (Dekker) pattern. The sleeper stores "I sleep", issues
 *	clanq_q_mb(), then re-reads prod; the waker publishes prod (B),
 *	issues clanq_q_mb(), then reads the sleep flag. With a full barrier
 *	on both sides at least one of them sees the other's store, so an
 *	item can never be published unseen while its consumer goes to
 *	sleep. A release/acquire pair does not give this: it orders a store
 *	before a later store, never a store before a later load.
 *
 * Every full-barrier pairing in clanq
 *	Each is that store-barrier-load pattern, once on each side; each
 *	call site carries its letter ("[A] pairs with ..."). Nothing else
 *	in clanq relies on a full barrier.
 *
 *	[A] RDMA need-wakeup: a posted request is never left unseen.
 *	    app	   clanq_rdma_post_push(): publish rq prod; mb; load need_wakeup
 *	    engine clanq_rdma_requeue(): store need_wakeup; mb; load rq prod
 *	[B] RDMA completion room: an engine stopped on a full completion
 *	    queue is woken when a slot is freed.
 *	    app	   clanq_rdma_poll(): release cq cons; mb; load need_wakeup
 *	    engine clanq_rdma_requeue(): store need_wakeup; mb; load cq cons
 *	[C] evq pending bit: what arrives after the application took an
 *	    event is either drained by it or raises a new event.
 *	    app	   clanq_evq_poll(): clear bit (RMW); mb; caller drains
 *	    driver clanq_kevq_post(): source published; test_and_set_bit()
 *	[D] evq sleepers: an event is never slept through.
 *	    driver clanq_kevq_post(): publish ring prod; wq_has_sleeper()
 *	    driver clanq_kevq_poll(): poll_wait(); smp_mb(); load prod, and
 *		   EVQ_WAIT: wait_event's set_current_state(); load prod
 *	[E] evq registration: a source raised while a registration is
 *	    being hooked is either seen by the raise or by the registration.
 *	    driver clanq_kep_raise(): source published; wq_has_sleeper()
 *	    driver clanq_kevq_register_ep(): hook entry; smp_mb(); look
 *	[F] tripwires: a write into a watched word is never slept through.
 *	    The store-buffer pattern once more, with the data as the item
 *	    and "armed" as the sleep flag; two writers, one waiter:
 *	    PIO	   clanq_ap_flush(): stores into the aperture; mb; load the
 *		   region's armed bitmap; AP_FLUSH only if a block is set
 *	    RDMA   clanq_rx_write(): copy; smp_mb(); load tw.nr_armed; fire
 *		   under tw.lock only if non-zero
 *	    waiter TW_WAIT (clanq_ioctl_tw_wait()): arm under tw.lock (the
 *		   tree, nr_armed, the bitmap); smp_mb(); load the word;
 *		   sleep only if it still holds the old value. TW_ARM
 *		   and TW_CREATE(ARMED) end with the same smp_mb(), so a
 *		   user-space re-check after them is the waiter's load.
 *	    Either the waiter sees the new value (and does not sleep), or
 *	    the writer sees the tripwire armed and fires it, waking it.
 *	    Without the writer's barrier its look may pass its stores (x86
 *	    too: store then load is the one reordering TSO allows); without
 *	    the waiter's, its look may pass the arming. Either way both miss
 *	    and the waiter sleeps through the write. The blocking ping-pongs
 *	    of tests/integration/test_tripwire_pingpong.c turn exactly those
 *	    two reorderings, made by hand (look before the stores, read the
 *	    word before arming), into a failure within a few dozen rounds;
 *	    the barriers' absence alone they did not catch in 75,000 rounds
 *	    on x86 under TCG (the store buffer's window is short, and the
 *	    kernel side's down_read() is a locked instruction, a full
 *	    barrier there anyway): weakly ordered CPUs need them more.
 *	[G] connection rings (lib/ring.h): a message, then the
 *	    ring's tail. Publication, not a sleep flag: release/acquire.
 *	    PIO	   lib/msg.c clanq_conn_write_pio(): the record's stores;
 *		   release-store hdr.tail through the aperture
 *	    RDMA   the record's request, then the tail's, in one queue: the
 *		   engine makes requests of a queue visible in order and a
 *		   request's final word last (driver/region.c
 *		   clanq_rx_copy(): smp_wmb(); copy; smp_wmb(); the word)
 *	    reader clanq_conn_next(): acquire-load hdr.tail; read records
 *		   below it. Credit flows back the same way (the reader's
 *		   release-store of hdr.credit after its reads; the
 *		   writer's acquire-load before it writes over them). A
 *		   blocked reader is woken by [F]: the tail is in the
 *		   tripwire's range, and the writer's flush is [F]'s look.
 *	The doorbell itself (RDMA_KICK against the engine's last look) is
 *	ordered by engine->lock, not by a barrier pair (driver/rdma.c).
 *
 * Copy, then validate
 *	clanq_q_get() copies a slot out before the caller looks at it. The
 *	kernel validates only its private copy and never re-reads the slot,
 *	so user space rewriting the slot meanwhile changes nothing.
 */
#ifndef _CLANQ_QUEUE_H
#define _CLANQ_QUEUE_H

#include <clanq/uapi.h>

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/errno.h>
#include <linux/log2.h>
#include <linux/overflow.h>
#include <linux/string.h>
#include <asm/barrier.h>
/* (A) and (C) in the table above */
#define clanq_q_load_acquire(p)		smp_load_acquire(p)
/* (B) and (D) in the table above */
#define clanq_q_store_release(p, v)	smp_store_release(p, v)
/* the sleep-flag (Dekker) pattern above */
#define clanq_q_mb()			smp_mb()
#else
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#define clanq_q_load_acquire(p)		__atomic_load_n(p, __ATOMIC_ACQUIRE)
#define clanq_q_store_release(p, v)	__atomic_store_n(p, v, __ATOMIC_RELEASE)
#define clanq_q_mb()			__atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/*
 * Alignment of each index word and of the slots. Two 64-byte lines, not
 * one: x86's adjacent-line prefetcher pairs lines, and the two sides
 * would otherwise still fight over the pair.
 */
#define CLANQ_Q_ALIGN		128u

/* Largest queue and slot the layout helper accepts. */
#define CLANQ_Q_MAX_SLOTS	(1024u * 1024u)
#define CLANQ_Q_MAX_SLOT_SIZE	4096u

struct clanq_queue {
	void *slots;		/* slot 0 */
	__u32 *prod;		/* shared: producer's index word */
	__u32 *cons;		/* shared: consumer's index word */
	__u32 mask;		/* nr_slots - 1 */
	__u32 slot_size;
	__u32 own;		/* this side's index, always <= mask */
	__u32 peer;		/* peer's index as last read and checked */
};

static inline __u64 clanq_q_align(__u64 x)
{
	return (x + CLANQ_Q_ALIGN - 1) & ~(__u64)(CLANQ_Q_ALIGN - 1);
}

static inline bool clanq_q_geometry_ok(__u32 nr_slots, __u32 slot_size)
{
	return nr_slots >= 2 && nr_slots <= CLANQ_Q_MAX_SLOTS &&
	       (nr_slots & (nr_slots - 1)) == 0 &&
	       slot_size >= 8 && slot_size <= CLANQ_Q_MAX_SLOT_SIZE &&
	       slot_size % 8 == 0;
}

/**
 * clanq_q_layout() - place a queue in a segment being laid out
 * @qo: filled with the queue's offsets
 * @at: first free offset in the segment
 * @nr_slots: capacity (power of two; one slot always stays free)
 * @slot_size: bytes per slot (multiple of 8)
 *
 * Return: the first free offset after the queue, or 0 if the geometry is
 * invalid. Both index words start a line of their own.
 */
static inline __u32 clanq_q_layout(struct clanq_queue_off *qo, __u32 at,
				   __u32 nr_slots, __u32 slot_size)
{
	__u64 prod = clanq_q_align(at);
	__u64 end = prod + 2 * CLANQ_Q_ALIGN + (__u64)nr_slots * slot_size;

	/* Segments are mmapped with 32-bit offsets; keep well inside that. */
	if (!clanq_q_geometry_ok(nr_slots, slot_size) || end > 0x7fffffffu)
		return 0;
	memset(qo, 0, sizeof(*qo));
	qo->prod = (__u32)prod;
	qo->cons = qo->prod + CLANQ_Q_ALIGN;
	qo->slots = qo->cons + CLANQ_Q_ALIGN;
	qo->nr_slots = nr_slots;
	qo->slot_size = slot_size;
	return (__u32)end;
}

/**
 * clanq_q_init() - attach to a queue inside a mapped segment
 * @q: private queue state, filled in
 * @base: start of the segment
 * @seg_size: size of the segment in bytes
 * @qo: where the queue lives (from clanq_q_layout() or the kernel)
 *
 * The queue starts empty with both indices zero: the creator zeroes the
 * segment before anyone attaches. The offsets are checked against the
 * segment size even though, in the library, the kernel supplied them.
 *
 * Return: 0, or -EINVAL if the offsets do not describe a queue inside
 * the segment.
 */
static inline int clanq_q_init(struct clanq_queue *q, void *base,
			       size_t seg_size,
			       const struct clanq_queue_off *qo)
{
	size_t bytes, end;

	if (!clanq_q_geometry_ok(qo->nr_slots, qo->slot_size) ||
	    qo->prod % 4 || qo->cons % 4 || qo->slots % 8 || qo->reserved ||
	    (size_t)qo->prod + 4 > seg_size ||
	    (size_t)qo->cons + 4 > seg_size)
		return -EINVAL;
	bytes = (size_t)qo->nr_slots * qo->slot_size;
	if (__builtin_add_overflow((size_t)qo->slots, bytes, &end) ||
	    end > seg_size)
		return -EINVAL;
	/* the index words must not overlap the slots */
	if ((qo->prod >= qo->slots && qo->prod < end) ||
	    (qo->cons >= qo->slots && qo->cons < end) ||
	    qo->prod == qo->cons)
		return -EINVAL;

	q->slots = (char *)base + qo->slots;
	q->prod = (__u32 *)((char *)base + qo->prod);
	q->cons = (__u32 *)((char *)base + qo->cons);
	q->mask = qo->nr_slots - 1;
	q->slot_size = qo->slot_size;
	q->own = 0;
	q->peer = 0;
	return 0;
}

static inline void *clanq_q_slot(const struct clanq_queue *q, __u32 i)
{
	return (char *)q->slots + (size_t)(i & q->mask) * q->slot_size;
}

/*
 * Producer side.
 */

/**
 * clanq_q_prod_space_for() - free slots, as the producer can prove
 * @n: how many the caller needs
 *
 * Reads the consumer's index (A) only when the cached copy shows fewer
 * than @n free. A consumer index outside [0, nr_slots) reads as "full".
 * One that moved backwards, or past what was produced, reads as no
 * progress: the cached copy stays, so space already proven (and counted
 * on: the RDMA engine takes a request only with room for the completions
 * of all those out) is never taken back by a consumer that lies.
 */
static inline __u32 clanq_q_prod_space_for(struct clanq_queue *q, __u32 n)
{
	__u32 space = (q->peer - q->own - 1) & q->mask;
	__u32 cons;

	if (space >= n)
		return space;
	cons = clanq_q_load_acquire(q->cons);		/* (A) */
	if (cons & ~q->mask)
		return 0;
	if (((cons - q->peer) & q->mask) > ((q->own - q->peer) & q->mask))
		return space;
	q->peer = cons;
	return (cons - q->own - 1) & q->mask;
}

/* Free slots, rereading the consumer's index only when the cache says full. */
static inline __u32 clanq_q_prod_space(struct clanq_queue *q)
{
	return clanq_q_prod_space_for(q, 1);
}

/* The slot the next put will fill; valid only if clanq_q_prod_space() > 0. */
static inline void *clanq_q_prod_slot(const struct clanq_queue *q)
{
	return clanq_q_slot(q, q->own);
}

/*
 * The slot @i puts after the next one will fill, for a batch written in
 * place and published at once; valid only if clanq_q_prod_space() > @i.
 */
static inline void *clanq_q_prod_slot_at(const struct clanq_queue *q, __u32 i)
{
	return clanq_q_slot(q, q->own + i);
}

/* Publish @n slots filled in place since the last publish. */
static inline void clanq_q_prod_publish(struct clanq_queue *q, __u32 n)
{
	q->own = (q->own + n) & q->mask;
	clanq_q_store_release(q->prod, q->own);		/* (B) */
}

/**
 * clanq_q_put() - copy one item in and publish it
 * Return: true if queued, false if the queue is full (the caller decides
 * whether that is a drop, and counts it).
 */
static inline bool clanq_q_put(struct clanq_queue *q, const void *item)
{
	if (!clanq_q_prod_space(q))
		return false;
	memcpy(clanq_q_prod_slot(q), item, q->slot_size);
	clanq_q_prod_publish(q, 1);
	return true;
}

/**
 * clanq_q_prod_unread() - has the consumer left anything unread?
 *
 * For a producer deciding whether to raise an event for items already
 * queued. Reads the consumer's index once; a nonsense value reads as
 * "nothing unread", so a hostile consumer only silences itself.
 */
static inline bool clanq_q_prod_unread(struct clanq_queue *q)
{
	__u32 cons = clanq_q_load_acquire(q->cons);

	return !(cons & ~q->mask) && cons != q->own;
}

/*
 * Consumer side.
 */

/**
 * clanq_q_cons_avail() - filled slots, as the consumer can prove
 *
 * Reads the producer's index (C) only when the cached copy says empty. A
 * producer index outside [0, nr_slots) reads as "empty".
 */
static inline __u32 clanq_q_cons_avail(struct clanq_queue *q)
{
	__u32 avail = (q->peer - q->own) & q->mask;
	__u32 prod;

	if (avail)
		return avail;
	prod = clanq_q_load_acquire(q->prod);		/* (C) */
	if (prod & ~q->mask)
		return 0;
	q->peer = prod;
	return (prod - q->own) & q->mask;
}

/* The slot the next get will read; valid only if clanq_q_cons_avail() > 0. */
static inline const void *clanq_q_cons_slot(const struct clanq_queue *q)
{
	return clanq_q_slot(q, q->own);
}

/* Hand @n consumed slots back to the producer. */
static inline void clanq_q_cons_release(struct clanq_queue *q, __u32 n)
{
	q->own = (q->own + n) & q->mask;
	clanq_q_store_release(q->cons, q->own);		/* (D) */
}

/**
 * clanq_q_get() - copy one item out and free its slot
 * Return: true if an item was copied to @item, false if the queue is empty.
 */
static inline bool clanq_q_get(struct clanq_queue *q, void *item)
{
	if (!clanq_q_cons_avail(q))
		return false;
	memcpy(item, clanq_q_cons_slot(q), q->slot_size);
	clanq_q_cons_release(q, 1);
	return true;
}

/* Non-consuming check, for a poll loop: no shared write at all. */
static inline bool clanq_q_empty(struct clanq_queue *q)
{
	return clanq_q_cons_avail(q) == 0;
}

#endif /* _CLANQ_QUEUE_H */
