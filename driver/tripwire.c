// SPDX-License-Identifier: GPL-2.0
/*
 * Tripwires (paper sections 2 and 3.3): a range of a region that fires
 * when a write the NIC delivers touches it. The third NIC resource, and
 * what makes a blocking receive possible without a system call on the
 * sending side unless somebody actually waits.
 *
 * A tripwire belongs to an endpoint (its bit in the endpoint's fired
 * bitmap, its CLANQ_EV_TRIPWIRE events) and watches a range of a region
 * of the same context. A fire sets the bit, counts, raises the event,
 * wakes TW_WAIT, and disarms a one-shot tripwire.
 *
 * Finding the tripwires a write touches. The armed tripwires of a region
 * are in an interval tree (the kernel's own INTERVAL_TREE_DEFINE, as mmu
 * interval notifiers and i_mmap use), keyed on byte ranges: a write of
 * [lo, hi] finds the k armed ones it overlaps in O(log n + k), whatever
 * their lengths, and arming or disarming one is O(log n). The other
 * candidates were a sorted array or a bitmap per page: cheaper to search
 * within a page, but a tripwire spanning many pages would sit in every
 * one of them, and byte-granular ranges would still need a search inside
 * the page. The common case costs less still: with nothing armed, the
 * writer loads nr_armed and stops there.
 *
 * The armed bitmap. PIO on the loop wire is the importer's CPU storing
 * into the exporter's pages, and the driver never sees it. So an
 * exported region also has a bitmap, one bit per 64 bytes (a cache
 * line), set while an armed tripwire covers any byte of the block; it
 * is mapped read-only beside each PIO mapping of the region (aperture.c).
 * The writer checks it after its stores and makes a system call,
 * AP_FLUSH, only when a block it wrote is armed. The driver alone writes
 * the bitmap, under the region's tw.lock, and never reads it to decide
 * anything: AP_FLUSH walks the tree. A bit is cleared only when no
 * armed tripwire covers its block any more, never cleared and set
 * again, so a writer can never see a covered block as unarmed.
 *
 * What one write may cost. A write fires every armed tripwire it
 * touches, and a user can arm thousands on the same 8 bytes (persistent
 * ones stay armed), so a walk is bounded per hold of tw.lock, not per
 * write: one hold visits at most CLANQ_TW_VISITS_PER_HOLD tripwires and
 * collects at most CLANQ_TW_WAKES_PER_HOLD sleeping ones, doing only
 * O(1) bookkeeping for each (count, set the fired bit, disarm a one-shot
 * one, note its endpoint once); then the walk lets go of the lock, does
 * the wake-ups, and may reschedule before it takes the lock again. Every
 * wake-up runs outside tw.lock: a tripwire's sleepers once per fire, an
 * endpoint's event once per walk (or per CLANQ_TW_EPS_PER_WALK new
 * endpoints), whatever the number of its tripwires the walk fired. The
 * lock is a plain spinlock: every walk holds the region's revoke_sem, a
 * sleeping lock, so no fire comes from interrupt context, and interrupts
 * stay on throughout.
 *
 * Resuming. Where the walk lets go, it pins the next tripwire to visit
 * (pins, and a reference): a pinned tripwire disarmed meanwhile stays in
 * the tree, no longer armed (in_tree without armed), so the walk goes on
 * from it; the last walk to pass it takes it out. A tripwire armed while
 * the walk let go may fire or not (its waiter looks at the word after
 * arming, [F]); one armed throughout fires exactly once.
 *
 * Ordering: [F] of include/clanq/queue.h. A waiter arms (tree, nr_armed
 * and bitmap, under tw.lock), issues a full barrier and reads the
 * watched word; a writer stores the data, issues a full barrier, and
 * loads nr_armed (RDMA, clanq_rx_write()) or the bitmap (PIO, in
 * libclanq). One of them sees the other: the waiter sees the new value,
 * or the writer sees the tripwire armed and fires it.
 */
#include <linux/bitmap.h>
#include <linux/highmem.h>
#include <linux/interval_tree_generic.h>
#include <linux/ktime.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "clanq_drv.h"

#define CLANQ_TW_BLOCK		BIT_ULL(CLANQ_TW_BLOCK_SHIFT)

/* Each AP_FLUSH's own number, so an endpoint counts it once (never 0). */
static atomic64_t clanq_tw_flush_seq = ATOMIC64_INIT(0);
#define CLANQ_TW_START(tw)	((tw)->off)
#define CLANQ_TW_LAST(tw)	((tw)->last)

INTERVAL_TREE_DEFINE(struct clanq_ktw, rb, u64, subtree_last,
		     CLANQ_TW_START, CLANQ_TW_LAST, static, clanq_tw_tree)

static unsigned long clanq_tw_blk(u64 off)
{
	return off >> CLANQ_TW_BLOCK_SHIFT;
}

static void clanq_ktw_release(struct kref *ref)
{
	struct clanq_ktw *tw = container_of(ref, struct clanq_ktw, ref);

	/* a TW_CREATE that failed may have taken only some of these */
	clanq_kregion_put(tw->region);
	if (tw->ep)
		clanq_kep_put(tw->ep);
	if (tw->budget)
		clanq_budget_put(tw->budget, sizeof(*tw));
	kfree_rcu(tw, rcu);
}

static void clanq_ktw_put(struct clanq_ktw *tw)
{
	kref_put(&tw->ref, clanq_ktw_release);
}

/* A tripwire of @ctx by id, referenced; NULL if there is none. */
static struct clanq_ktw *clanq_ktw_lookup(struct clanq_ctx *ctx, u32 id,
					  const char *cmd)
{
	struct clanq_ktw *tw;

	rcu_read_lock();
	tw = xa_load(&ctx->tws, id);
	if (tw && !kref_get_unless_zero(&tw->ref))
		tw = NULL;
	rcu_read_unlock();
	if (!tw)
		clanq_uerr(ctx, "%s: no tripwire %u in this context", cmd, id);
	return tw;
}

/*
 * The armed bitmap (under tw.lock). Set the blocks of an arming
 * tripwire; after a disarm, clear those of its blocks that no armed
 * tripwire covers any more. The tree yields overlapping tripwires in
 * order of their start, so one pass over them finds the gaps.
 */
static void clanq_tw_bitmap_set(struct clanq_kregion *r, struct clanq_ktw *tw)
{
	unsigned long b0 = clanq_tw_blk(tw->off), b1 = clanq_tw_blk(tw->last);

	if (r->tw.bitmap)
		bitmap_set(r->tw.bitmap->vaddr, b0, b1 - b0 + 1);
}

static void clanq_tw_bitmap_clear(struct clanq_kregion *r, unsigned long b0,
				  unsigned long b1)
{
	unsigned long *bits = r->tw.bitmap->vaddr;
	unsigned long next = b0;	/* blocks before it are settled */
	struct clanq_ktw *o;
	u64 lo = (u64)b0 << CLANQ_TW_BLOCK_SHIFT;
	u64 hi = ((u64)b1 << CLANQ_TW_BLOCK_SHIFT) | (CLANQ_TW_BLOCK - 1);

	for (o = clanq_tw_tree_iter_first(&r->tw.armed, lo, hi); o && next <= b1;
	     o = clanq_tw_tree_iter_next(o, lo, hi)) {
		unsigned long ob0 = max(clanq_tw_blk(o->off), b0);

		if (!o->armed)	/* pinned by a walk, covers nothing */
			continue;
		if (ob0 > next)
			bitmap_clear(bits, next, ob0 - next);
		next = max(next, min(clanq_tw_blk(o->last), b1) + 1);
	}
	if (next <= b1)
		bitmap_clear(bits, next, b1 - next + 1);
}

static void clanq_ktw_arm_locked(struct clanq_ktw *tw)
{
	struct clanq_kregion *r = tw->region;

	lockdep_assert_held(&r->tw.lock);
	if (tw->armed)
		return;
	if (!tw->in_tree)
		clanq_tw_tree_insert(tw, &r->tw.armed);
	tw->in_tree = true;
	tw->armed = true;
	WRITE_ONCE(r->tw.nr_armed, r->tw.nr_armed + 1);
	clanq_tw_bitmap_set(r, tw);
}

static void clanq_ktw_disarm_locked(struct clanq_ktw *tw)
{
	struct clanq_kregion *r = tw->region;

	lockdep_assert_held(&r->tw.lock);
	if (!tw->armed)
		return;
	/* a walk resumes here: it takes it out when it has gone past */
	if (!tw->pins) {
		clanq_tw_tree_remove(tw, &r->tw.armed);
		tw->in_tree = false;
	}
	tw->armed = false;
	WRITE_ONCE(r->tw.nr_armed, r->tw.nr_armed - 1);
	if (r->tw.bitmap)
		clanq_tw_bitmap_clear(r, clanq_tw_blk(tw->off),
				      clanq_tw_blk(tw->last));
}

/* Count one into one of @ep's tripwire counters and its mirror. */
static void clanq_kep_tw_count(struct clanq_kep *ep, u64 *count, __u64 *mirror)
{
	spin_lock(&ep->tw.lock);
	clanq_count(count, mirror, 1);
	spin_unlock(&ep->tw.lock);
}

/* An endpoint a walk fired tripwires of, and how many. */
struct clanq_tw_walk_ep {
	struct clanq_kep *ep;		/* referenced */
	unsigned int fires;
};

/* A walk over the armed tripwires a write touched (clanq_tw_walk()). */
struct clanq_tw_walk {
	struct clanq_kregion *r;
	u64 lo, hi;			/* the bytes written */
	u64 wlo, whi;			/* looked at: whole blocks for a flush */
	u64 flush;			/* the AP_FLUSH's number, or 0 */
	unsigned int fired;
	/* a flush: the endpoint of a tripwire it found but missed; referenced */
	struct clanq_kep *near;
	/* to count and raise once the lock is dropped */
	struct clanq_tw_walk_ep eps[CLANQ_TW_EPS_PER_WALK];
	unsigned int nr_eps;
	/* fired with sleepers, to wake once the lock is dropped; referenced */
	struct clanq_ktw *wake[CLANQ_TW_WAKES_PER_HOLD];
	unsigned int nr_wake;
	struct clanq_ktw *resumed;	/* where it resumed: its reference */
	/* the hold in progress: since when, and the tripwires it visited */
	ktime_t held_since;
	unsigned int held_visits;
};

/*
 * Fire @tw (armed, under its region's tw.lock), in O(1): count it, set
 * its bit, note its endpoint and its sleepers for after the lock, and
 * disarm it if it is one-shot. The bit is set before the event is raised
 * (after the lock), so whoever the event sends to the bitmap finds it
 * (the source is published before the evq's pending bit, [C]).
 *
 * Return: false, firing nothing, if the walk has no room left to note
 * the endpoint; the caller lets go of the lock and comes back.
 */
static bool clanq_ktw_fire_locked(struct clanq_tw_walk *w, struct clanq_ktw *tw)
{
	struct clanq_tw_walk_ep *we = NULL;
	unsigned int i;

	for (i = 0; i < w->nr_eps && !we; i++)
		if (w->eps[i].ep == tw->ep)
			we = &w->eps[i];
	if (!we) {
		if (w->nr_eps == CLANQ_TW_EPS_PER_WALK)
			return false;
		we = &w->eps[w->nr_eps++];
		clanq_kep_get(tw->ep);	/* @tw holds one while it is armed */
		we->ep = tw->ep;
		we->fires = 0;
	}
	WRITE_ONCE(tw->fires, tw->fires + 1);
	set_bit(tw->bit, tw->ep->tw.fired);
	we->fires++;
	w->fired++;
	/* the wait_event condition is tw->fires: wq_has_sleeper() orders it */
	if (wq_has_sleeper(&tw->wq)) {
		kref_get(&tw->ref);
		w->wake[w->nr_wake++] = tw;
	}
	if (!tw->persistent)
		clanq_ktw_disarm_locked(tw);
	return true;
}

/*
 * One hold of the region's tw.lock: visit the tripwires from @tw on, at
 * most CLANQ_TW_VISITS_PER_HOLD of them, until CLANQ_TW_WAKES_PER_HOLD
 * have sleepers to wake. A one-shot tripwire leaves the tree as it
 * fires, after its successor was found (which stays in the tree). A
 * disarmed one still in the tree was pinned by a walk: skipped, and
 * taken out by the last walk to pass it.
 *
 * Return: the tripwire to resume at, or NULL at the end of the walk.
 */
static struct clanq_ktw *clanq_tw_walk_hold(struct clanq_tw_walk *w,
					    struct clanq_ktw *tw)
{
	struct clanq_kregion *r = w->r;
	unsigned int visits = 0;
	struct clanq_ktw *next;

	lockdep_assert_held(&r->tw.lock);
	while (tw && visits < CLANQ_TW_VISITS_PER_HOLD &&
	       w->nr_wake < CLANQ_TW_WAKES_PER_HOLD) {
		next = clanq_tw_tree_iter_next(tw, w->wlo, w->whi);
		if (!tw->armed) {
			if (!tw->pins) {
				clanq_tw_tree_remove(tw, &r->tw.armed);
				tw->in_tree = false;
			}
		} else if (tw->last < w->lo || tw->off > w->hi) {
			if (!w->near) {
				clanq_kep_get(tw->ep);
				w->near = tw->ep;
			}
		} else if (!clanq_ktw_fire_locked(w, tw)) {
			break;
		}
		visits++;
		tw = next;
	}
	w->held_visits += visits;
	return tw;
}

/* Take the region's tw.lock for a walk: a hold starts. */
static void clanq_tw_walk_lock(struct clanq_tw_walk *w)
	__acquires(&w->r->tw.lock)
{
	spin_lock(&w->r->tw.lock);
	w->held_since = ktime_get();
	w->held_visits = 0;
}

/* Drop it: what the hold took is the region's record if it is the worst. */
static void clanq_tw_walk_unlock(struct clanq_tw_walk *w)
	__releases(&w->r->tw.lock)
{
	struct clanq_kregion *r = w->r;
	u64 ns = ktime_to_ns(ktime_sub(ktime_get(), w->held_since));

	r->tw.most_visits = max(r->tw.most_visits, w->held_visits);
	r->tw.longest_hold_ns = max(r->tw.longest_hold_ns, ns);
	spin_unlock(&r->tw.lock);
}

/*
 * Out of the lock: wake the sleepers noted; with @all (the walk is over)
 * or no room left for another endpoint, count and raise each endpoint
 * noted, once, however many of its tripwires fired. Counters may lag a
 * woken sleeper by the rest of the walk; the fired bit never does.
 */
static void clanq_tw_walk_deliver(struct clanq_tw_walk *w, bool all)
{
	unsigned int i;

	if (all || w->nr_eps == CLANQ_TW_EPS_PER_WALK) {
		for (i = 0; i < w->nr_eps; i++) {
			struct clanq_kep *ep = w->eps[i].ep;

			spin_lock(&ep->tw.lock);
			clanq_count(&ep->tw.fires, &ep->counters->tw_fires,
				    w->eps[i].fires);
			if (w->flush && ep->tw.last_flush != w->flush) {
				ep->tw.last_flush = w->flush;
				clanq_count(&ep->tw.flushes,
					    &ep->counters->tw_flushes, 1);
			}
			spin_unlock(&ep->tw.lock);
			clanq_kep_raise(ep, CLANQ_EV_TRIPWIRE);
			clanq_kep_put(ep);
		}
		w->nr_eps = 0;
	}
	for (i = 0; i < w->nr_wake; i++) {
		wake_up(&w->wake[i]->wq);
		clanq_ktw_put(w->wake[i]);
	}
	w->nr_wake = 0;
	if (w->resumed) {
		clanq_ktw_put(w->resumed);
		w->resumed = NULL;
	}
	if (all && w->near) {
		if (w->flush && !w->fired)
			clanq_kep_tw_count(w->near, &w->near->tw.spurious,
					   &w->near->counters->tw_spurious);
		clanq_kep_put(w->near);
		w->near = NULL;
	}
}

/*
 * Fire the armed tripwires of @r that [lo, hi] touches. A flush (PIO)
 * is asked for whole 64-byte blocks: tripwires that share a block with
 * the write but not a byte are what made it ask, and are counted as
 * spurious on their endpoint when nothing else fired.
 *
 * Bounded per hold of tw.lock, not per write (see the top of the file):
 * between holds the walk pins the tripwire it resumes at, wakes what it
 * fired, and lets the scheduler in. Callers hold the region's revoke_sem
 * and may sleep.
 */
static unsigned int clanq_tw_walk(struct clanq_kregion *r, u64 lo, u64 hi,
				  bool flush)
{
	struct clanq_tw_walk w = {
		.r = r, .lo = lo, .hi = hi,
		.wlo = flush ? round_down(lo, CLANQ_TW_BLOCK) : lo,
		.whi = flush ? hi | (CLANQ_TW_BLOCK - 1) : hi,
		.flush = flush ? atomic64_inc_return(&clanq_tw_flush_seq) : 0,
	};
	struct clanq_ktw *tw;

	might_sleep();
	clanq_tw_walk_lock(&w);
	tw = clanq_tw_tree_iter_first(&r->tw.armed, w.wlo, w.whi);
	while (tw) {
		tw = clanq_tw_walk_hold(&w, tw);
		if (!tw)
			break;
		/* it stays in the tree, armed or not, until we pass it */
		tw->pins++;
		kref_get(&tw->ref);
		clanq_tw_walk_unlock(&w);
		clanq_tw_walk_deliver(&w, false);
		cond_resched();
		clanq_tw_walk_lock(&w);
		tw->pins--;
		w.resumed = tw;
	}
	clanq_tw_walk_unlock(&w);
	clanq_tw_walk_deliver(&w, true);
	if (w.fired)
		atomic64_add(w.fired, &r->nic->stats.tw_fires);
	return w.fired;
}

/**
 * clanq_tw_fire() - fire what a delivered write touched
 * @r: the destination region; the caller holds its revoke_sem (read) and
 *     saw it live
 * @off: into @r
 * @len: bytes written, > 0
 *
 * The receive path's tripwire check (clanq_rx_write()), after the copy
 * and [F]'s barrier, once it saw nr_armed non-zero.
 *
 * Return: the tripwires fired.
 */
unsigned int clanq_tw_fire(struct clanq_kregion *r, u64 off, u64 len)
{
	return clanq_tw_walk(r, off, off + len - 1, false);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_tw_fire);

/**
 * clanq_tw_flush() - fire what a PIO write touched (AP_FLUSH)
 * @r: the region; the caller holds its revoke_sem (read), saw it live
 * @off: into @r
 * @len: bytes the caller stored, > 0
 *
 * Return: the tripwires fired; 0 is a spurious flush.
 */
static unsigned int clanq_tw_flush(struct clanq_kregion *r, u64 off, u64 len)
{
	return clanq_tw_walk(r, off, off + len - 1, true);
}

/*
 * Kill @tw (under ctx->lock): nobody finds it, no write fires it, its
 * sleepers wake with @why, its bit may go to a new tripwire.
 */
static void clanq_ktw_destroy(struct clanq_ktw *tw, int why)
{
	struct clanq_kregion *r = tw->region;

	lockdep_assert_held(&tw->ctx->lock);
	xa_erase(&tw->ctx->tws, tw->id);
	list_del(&tw->ep_node);
	list_del(&tw->region_node);
	tw->ctx->nr_tws--;
	spin_lock(&r->tw.lock);
	clanq_ktw_disarm_locked(tw);
	WRITE_ONCE(tw->dead, why);
	spin_unlock(&r->tw.lock);
	wake_up_all(&tw->wq);
	ida_free(&tw->ep->tw.bits, tw->bit);
	clanq_ktw_put(tw);
}

/* Endpoint side: the fired bitmap at @fired_off of its segment. */
void clanq_kep_tw_init(struct clanq_kep *ep, u32 slots, u32 fired_off)
{
	spin_lock_init(&ep->tw.lock);
	ida_init(&ep->tw.bits);
	atomic_set(&ep->tw.oob_waiters, 0);
	INIT_LIST_HEAD(&ep->tw.all);
	ep->tw.slots = slots;
	ep->tw.fired = ep->shm->vaddr + fired_off;
}

/* The endpoint is being destroyed: its tripwires go with it. */
void clanq_kep_tw_kill(struct clanq_kep *ep)
{
	struct clanq_ktw *tw, *tmp;

	list_for_each_entry_safe(tw, tmp, &ep->tw.all, ep_node)
		clanq_ktw_destroy(tw, -EIDRM);
	ida_destroy(&ep->tw.bits);
}

void clanq_kregion_tw_init(struct clanq_kregion *r)
{
	spin_lock_init(&r->tw.lock);
	r->tw.armed = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&r->tw.all);
}

/* Pages of @r's armed bitmap, from its length alone. */
unsigned long clanq_kregion_tw_pages(const struct clanq_kregion *r)
{
	u64 nbits = DIV_ROUND_UP(r->len, CLANQ_TW_BLOCK);

	return PAGE_ALIGN(BITS_TO_LONGS(nbits) * sizeof(long)) >> PAGE_SHIFT;
}

/*
 * The region is being exported (under ctx->lock): give it the armed
 * bitmap its importers will map, showing what is armed already.
 */
int clanq_kregion_tw_export(struct clanq_ctx *ctx, struct clanq_kregion *r)
{
	u64 nbits = DIV_ROUND_UP(r->len, CLANQ_TW_BLOCK);
	struct clanq_shm *bitmap;
	struct clanq_ktw *tw;

	/* bitmap_set() counts bits in an unsigned int */
	if (nbits > U32_MAX) {
		clanq_uerr(ctx, "REGION_EXPORT: region %u: %llu bytes: too large to arm",
			   r->id, r->len);
		return -EFBIG;
	}
	bitmap = clanq_shm_alloc(ctx, clanq_kregion_tw_pages(r) << PAGE_SHIFT);
	if (!bitmap) {
		clanq_uerr(ctx, "REGION_EXPORT: region %u: no memory for its armed bitmap",
			   r->id);
		return -ENOMEM;
	}
	spin_lock(&r->tw.lock);
	r->tw.bitmap = bitmap;
	for (tw = clanq_tw_tree_iter_first(&r->tw.armed, 0, U64_MAX); tw;
	     tw = clanq_tw_tree_iter_next(tw, 0, U64_MAX))
		if (tw->armed)
			clanq_tw_bitmap_set(r, tw);
	spin_unlock(&r->tw.lock);
	return 0;
}

/*
 * The region is being freed, after its revocation (under ctx->lock): no
 * write reaches it any more, and its tripwires die, waking their
 * sleepers with -ENXIO.
 */
void clanq_kregion_tw_kill(struct clanq_kregion *r)
{
	struct clanq_ktw *tw, *tmp;

	list_for_each_entry_safe(tw, tmp, &r->tw.all, region_node)
		clanq_ktw_destroy(tw, -ENXIO);
}

/* Resolve TW_CREATE's endpoint, region and range (under ctx->lock). */
static int clanq_ktw_resolve(struct clanq_ctx *ctx,
			     const struct clanq_ioc_tw_create *c,
			     struct clanq_ktw *tw)
{
	u64 end;

	tw->ep = clanq_kep_lookup_owned(ctx, c->ep);
	if (!tw->ep) {
		clanq_uerr(ctx, "TW_CREATE: no endpoint %u in this context", c->ep);
		return -ENOENT;
	}
	tw->region = clanq_kregion_lookup_owned(ctx, c->region);
	if (!tw->region) {
		clanq_uerr(ctx, "TW_CREATE: no region %u in this context", c->region);
		return -ENOENT;
	}
	if (check_add_overflow(c->off, c->len, &end) || end > tw->region->len) {
		clanq_uerr(ctx, "TW_CREATE: [%llu, +%llu) is outside region %u's %llu bytes",
			   c->off, c->len, c->region, tw->region->len);
		return -ERANGE;
	}
	tw->off = c->off;
	tw->last = end - 1;
	if (ctx->nr_tws >= READ_ONCE(clanq_max_tripwires)) {
		clanq_ulimit(ctx, "TW_CREATE: context has %u tripwires already: max_tripwires",
			     ctx->nr_tws);
		return -ENOSPC;
	}
	tw->budget = clanq_budget_charge(ctx, sizeof(*tw));
	if (!tw->budget)
		return -ENOMEM;
	return 0;
}

int clanq_ioctl_tw_create(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_tw_create *c = arg;
	struct clanq_ktw *tw;
	int bit, err;

	if (c->len < CLANQ_TW_MIN_LEN) {
		clanq_uerr(ctx, "TW_CREATE: len %llu: want at least %u bytes",
			   c->len, CLANQ_TW_MIN_LEN);
		return -EINVAL;
	}
	tw = kzalloc(sizeof(*tw), GFP_KERNEL_ACCOUNT);
	if (!tw)
		return -ENOMEM;
	kref_init(&tw->ref);
	tw->ctx = ctx;
	tw->persistent = c->flags & CLANQ_TW_PERSISTENT;
	init_waitqueue_head(&tw->wq);

	mutex_lock(&ctx->lock);
	err = clanq_ktw_resolve(ctx, c, tw);
	if (err)
		goto err_unlock;
	bit = ida_alloc_max(&tw->ep->tw.bits, tw->ep->tw.slots - 1,
			    GFP_KERNEL_ACCOUNT);
	if (bit < 0) {
		err = bit;
		if (err == -ENOSPC)
			clanq_uerr(ctx, "TW_CREATE: endpoint %u owns %u tripwires, its tw_slots",
				   c->ep, tw->ep->tw.slots);
		goto err_unlock;
	}
	tw->bit = bit;
	/* fully formed before it is published: lookups do not lock */
	err = xa_alloc_cyclic(&ctx->tws, &tw->id, tw, XA_LIMIT(1, S32_MAX),
			      &ctx->next_tw_id, GFP_KERNEL_ACCOUNT);
	if (err < 0) {
		ida_free(&tw->ep->tw.bits, bit);
		goto err_unlock;
	}
	/* a new tripwire has not fired, whatever its bit's last owner did */
	spin_lock(&tw->ep->tw.lock);
	clear_bit(bit, tw->ep->tw.fired);
	spin_unlock(&tw->ep->tw.lock);
	list_add_tail(&tw->ep_node, &tw->ep->tw.all);
	list_add_tail(&tw->region_node, &tw->region->tw.all);
	ctx->nr_tws++;
	if (c->flags & CLANQ_TW_ARMED) {
		spin_lock(&tw->region->tw.lock);
		clanq_ktw_arm_locked(tw);
		spin_unlock(&tw->region->tw.lock);
		smp_mb();	/* [F], as TW_ARM */
	}
	c->id = tw->id;
	c->bit = bit;
	mutex_unlock(&ctx->lock);
	return 0;

err_unlock:
	mutex_unlock(&ctx->lock);
	/* what resolve took goes with the last reference */
	clanq_ktw_put(tw);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_tw_create);

/* Arm or disarm: -ENOENT if the tripwire is gone meanwhile. */
static int clanq_ktw_set_armed(struct clanq_ctx *ctx, u32 id, bool arm)
{
	struct clanq_ktw *tw = clanq_ktw_lookup(ctx, id, arm ? "TW_ARM" : "TW_DISARM");
	struct clanq_kregion *r;
	int err = 0;

	if (!tw)
		return -ENOENT;
	r = tw->region;
	spin_lock(&r->tw.lock);
	if (tw->dead)
		err = -ENOENT;
	else if (arm)
		clanq_ktw_arm_locked(tw);
	else
		clanq_ktw_disarm_locked(tw);
	spin_unlock(&r->tw.lock);
	if (arm) {
		/*
		 * [F] The caller re-reads the watched word when we return:
		 * that load must not pass the arming stores (a return to
		 * user space is no full barrier).
		 */
		smp_mb();
	}
	clanq_ktw_put(tw);
	return err;
}

int clanq_ioctl_tw_arm(void *obj, void *arg)
{
	struct clanq_ioc_tw_ctl *t = arg;

	return clanq_ktw_set_armed(obj, t->id, true);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_tw_arm);

int clanq_ioctl_tw_disarm(void *obj, void *arg)
{
	struct clanq_ioc_tw_ctl *t = arg;

	return clanq_ktw_set_armed(obj, t->id, false);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_tw_disarm);

int clanq_ioctl_tw_destroy(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_tw_ctl *t = arg;
	struct clanq_ktw *tw;

	mutex_lock(&ctx->lock);
	tw = clanq_ktw_lookup(ctx, t->id, "TW_DESTROY");
	if (tw) {
		if (!tw->dead)
			clanq_ktw_destroy(tw, -EIDRM);
		clanq_ktw_put(tw);
	}
	mutex_unlock(&ctx->lock);
	return tw ? 0 : -ENOENT;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_tw_destroy);

/*
 * AP_FLUSH, and TW_WAIT's flush before it waits: fire what [off, off +
 * len) of aperture @id touches. *fired: how many.
 */
static int clanq_kap_flush(struct clanq_ctx *ctx, u32 id, u64 off, u64 len,
			   unsigned int *fired, const char *cmd)
{
	struct clanq_kap *ap = clanq_kap_lookup(ctx, id);
	struct clanq_kregion *r;
	int err = 0;
	u64 end;

	*fired = 0;
	if (!ap) {
		clanq_uerr(ctx, "%s: no aperture %u in this context", cmd, id);
		return -ENOENT;
	}
	if (!(ap->rights & CLANQ_RIGHT_WRITE)) {
		clanq_uerr(ctx, "%s: aperture %u was imported without CLANQ_RIGHT_WRITE",
			   cmd, id);
		err = -EACCES;
		goto out;
	}
	if (check_add_overflow(off, len, &end) || end > ap->len) {
		clanq_uerr(ctx, "%s: [%llu, +%llu) is outside aperture %u's %llu bytes",
			   cmd, off, len, id, ap->len);
		err = -ERANGE;
		goto out;
	}
	r = ap->region;
	if (len) {
		down_read(&r->revoke_sem);
		if (r->revoked || ap->closed)
			err = -ENXIO;
		else if (READ_ONCE(r->tw.nr_armed))
			*fired = clanq_tw_flush(r, ap->off + off, len);
		up_read(&r->revoke_sem);
	}
	if (err || !len)
		goto out;
	atomic64_inc(&ctx->nic->stats.tw_flushes);
	if (!*fired)
		atomic64_inc(&ctx->nic->stats.tw_spurious);
out:
	clanq_kap_put(ap);
	return err;
}

/* The watched word, read under revoke_sem: -ENXIO once it is freed. */
static int clanq_tw_read(struct clanq_kregion *r, u64 off, u64 *val)
{
	u64 at = r->first + off;
	int err = -ENXIO;
	void *p;

	down_read(&r->revoke_sem);
	if (!r->revoked) {
		p = kmap_local_page(r->pages[at >> PAGE_SHIFT]);
		*val = READ_ONCE(*(u64 *)(p + offset_in_page(at)));
		kunmap_local(p);
		err = 0;
	}
	up_read(&r->revoke_sem);
	return err;
}

static bool clanq_ktw_woken(struct clanq_ktw *tw, u64 fires, bool oob)
{
	return READ_ONCE(tw->fires) != fires || READ_ONCE(tw->dead) ||
	       (oob && clanq_oob_pending(tw->ep));
}

/*
 * The OOB wait's entry on its endpoint's wait queue: wakes its sleeper
 * for the events that can end the wait (an OOB message or notice), not
 * for the endpoint's other events. A tripwire's fire wakes its own
 * sleepers on tw->wq, so a write that fires thousands of tripwires of
 * the endpoint does not wake every OOB sleeper of it each time.
 */
static int clanq_ktw_oob_wake(struct wait_queue_entry *wait, unsigned int mode,
			      int sync, void *key)
{
	if (key && !((__force u32)key_to_poll(key) & CLANQ_EV_OOB))
		return 0;
	return default_wake_function(wait, mode, sync, key);
}

/*
 * Sleep until @tw fires past @fires or dies, or with @oob until its
 * endpoint has an OOB message: 0 or -errno. For @oob a second entry on
 * the endpoint's wait queue (clanq_ktw_oob_wake()) wakes us when the
 * endpoint raises CLANQ_EV_OOB (clanq_kep_raise()); the condition is
 * checked after the task state is set, so an arrival between the check
 * and schedule() is not slept through.
 *
 * Every wake-up of the endpoint walks those entries with interrupts
 * off, whoever raises it, so they are counted: at most max_oob_waiters
 * per endpoint (-ENOSPC), as max_ep_regs bounds its evq registrations.
 */
static int clanq_ktw_sleep(struct clanq_ctx *ctx, struct clanq_ktw *tw,
			   u64 fires, u64 timeout_ns, bool oob)
{
	struct wait_queue_entry ep_wait;
	long ret;

	if (oob) {
		if (atomic_inc_return(&tw->ep->tw.oob_waiters) >
		    READ_ONCE(clanq_max_oob_waiters)) {
			atomic_dec(&tw->ep->tw.oob_waiters);
			clanq_ulimit(ctx, "TW_WAIT: endpoint %u: %u OOB waiters: max_oob_waiters",
				     tw->ep->id, READ_ONCE(clanq_max_oob_waiters));
			return -ENOSPC;
		}
		init_waitqueue_func_entry(&ep_wait, clanq_ktw_oob_wake);
		ep_wait.private = current;
		add_wait_queue(&tw->ep->wq, &ep_wait);
	}
	if (timeout_ns == U64_MAX)
		ret = wait_event_interruptible(tw->wq,
					       clanq_ktw_woken(tw, fires, oob));
	else
		ret = wait_event_interruptible_hrtimeout(tw->wq,
							 clanq_ktw_woken(tw, fires, oob),
							 ns_to_ktime(min_t(u64, timeout_ns,
									   KTIME_MAX)));
	if (oob) {
		remove_wait_queue(&tw->ep->wq, &ep_wait);
		atomic_dec(&tw->ep->tw.oob_waiters);
	}
	if (ret == -ETIME)
		return -ETIMEDOUT;
	if (ret == -ERESTARTSYS)
		return -EINTR;	/* never restarted: the timeout would be lost */
	return READ_ONCE(tw->dead);
}

/* A watched word: an aligned __u64 inside @tw. 0 or -EINVAL. */
static int clanq_ktw_word_check(struct clanq_ctx *ctx, struct clanq_ktw *tw,
				u64 off, const char *cmd)
{
	u64 end;

	if (check_add_overflow(off, (u64)sizeof(u64), &end) ||
	    off < tw->off || end - 1 > tw->last || (tw->region->first + off) % 8) {
		clanq_uerr(ctx, "%s: word at %llu: want an aligned __u64 in [%llu, %llu]",
			   cmd, off, tw->off, tw->last);
		return -EINVAL;
	}
	return 0;
}

int clanq_ioctl_tw_wait(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_tw_wait *w = arg;
	struct clanq_ktw *tw = clanq_ktw_lookup(ctx, w->id, "TW_WAIT");
	struct clanq_kregion *r;
	bool armed_here;
	u64 fires, val;
	unsigned int fired;
	int err;

	if (!tw)
		return -ENOENT;
	r = tw->region;
	err = clanq_ktw_word_check(ctx, tw, w->off, "TW_WAIT");
	if (err)
		goto out;
	/* the request first, then the wait for its answer */
	if (w->flags & CLANQ_TW_WAIT_FLUSH) {
		err = clanq_kap_flush(ctx, w->flush_ap, w->flush_off, w->flush_len,
				      &fired, "TW_WAIT");
		if (err)
			goto out;
	}
	spin_lock(&r->tw.lock);
	err = tw->dead;
	armed_here = !err && !tw->armed;
	if (armed_here)
		clanq_ktw_arm_locked(tw);
	fires = tw->fires;
	spin_unlock(&r->tw.lock);
	if (err)
		goto out;
	/* [F] armed, then look: pairs with the writer's store, mb, look */
	smp_mb();
	err = clanq_tw_read(r, w->off, &val);
	if (!err && val == w->old &&
	    !((w->flags & CLANQ_TW_WAIT_OOB) && clanq_oob_pending(tw->ep)))
		err = clanq_ktw_sleep(ctx, tw, fires, w->timeout_ns,
				      w->flags & CLANQ_TW_WAIT_OOB);
	/* leave it as we found it: disarmed, unless it was armed before */
	if (armed_here) {
		spin_lock(&r->tw.lock);
		if (!tw->dead)
			clanq_ktw_disarm_locked(tw);
		spin_unlock(&r->tw.lock);
	}
out:
	clanq_ktw_put(tw);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_tw_wait);

/**
 * clanq_tw_arm_vec() - EVQ_WAIT's arms (CLANQ_EVQ_WAIT_ARM)
 * @ctx: the evq's context
 * @v: @n entries, copied from the caller once; nothing here reads user
 *     memory again
 * @n: > 0
 * @tws: room for @n pointers
 *
 * Every entry is checked, and every tripwire looked up, before anything
 * is done. Then the flushes, in order (the request before the wait for
 * its answer, as TW_WAIT's); then every tripwire armed, [F]'s full
 * barrier, and each watched word read. A write either came before our
 * read (we see it) or its writer's look at the armed state comes after
 * our arming (it fires the tripwire, which raises the evq's event): the
 * caller sleeps through neither.
 *
 * Return: how many words no longer hold their val, or -errno.
 */
int clanq_tw_arm_vec(struct clanq_ctx *ctx, const struct clanq_evq_arm *v,
		     u32 n, struct clanq_ktw **tws)
{
	struct clanq_kregion *r;
	unsigned int fired;
	int err = 0, changed = 0;
	u32 i, got;
	u64 val;

	for (got = 0; got < n && !err; got++) {
		tws[got] = NULL;
		if (v[got].flags & ~CLANQ_EVQ_ARM_FLAGS) {
			clanq_uerr(ctx, "EVQ_WAIT: arm %u: flags %#x: unknown bits",
				   got, v[got].flags);
			err = -EINVAL;
		} else if (!(v[got].flags & CLANQ_EVQ_ARM_FLUSH)) {
			tws[got] = clanq_ktw_lookup(ctx, v[got].id, "EVQ_WAIT");
			err = tws[got] ? clanq_ktw_word_check(ctx, tws[got], v[got].off,
							      "EVQ_WAIT") : -ENOENT;
		}
	}
	for (i = 0; i < n && !err; i++)
		if (v[i].flags & CLANQ_EVQ_ARM_FLUSH)
			err = clanq_kap_flush(ctx, v[i].id, v[i].off, v[i].val,
					      &fired, "EVQ_WAIT");
	for (i = 0; i < n && !err; i++) {
		if (!tws[i])
			continue;
		r = tws[i]->region;
		spin_lock(&r->tw.lock);
		if (tws[i]->dead)
			err = -ENOENT;	/* destroyed since the lookup */
		else
			clanq_ktw_arm_locked(tws[i]);
		spin_unlock(&r->tw.lock);
	}
	if (!err)
		/* [F] armed, then look: pairs with the writer's store, mb, look */
		smp_mb();
	for (i = 0; i < n && !err; i++) {
		if (!tws[i])
			continue;
		err = clanq_tw_read(tws[i]->region, v[i].off, &val);
		if (!err && val != v[i].val)
			changed++;
	}
	for (i = 0; i < got; i++)
		if (tws[i])
			clanq_ktw_put(tws[i]);
	return err ? err : changed;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_tw_arm_vec);

int clanq_ioctl_ap_flush(void *obj, void *arg)
{
	struct clanq_ioc_ap_flush *f = arg;

	return clanq_kap_flush(obj, f->ap, f->off, f->len, &f->fired, "AP_FLUSH");
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_ap_flush);
