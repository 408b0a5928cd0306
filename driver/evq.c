// SPDX-License-Identifier: GPL-2.0
/*
 * The unified event queue (paper section 3.4).
 *
 * An evq is a ring of struct clanq_event in a segment shared with the
 * application, plus a pending bitmap with one bit per registration.
 * Registering an endpoint hangs a wait-queue entry with our own wake
 * function (init_waitqueue_func_entry(), the generalised wait queue the
 * paper describes and epoll uses) on the endpoint's wait queue; raising
 * an event source there calls clanq_kevq_wake(), which posts at O(1) cost
 * whatever the number of registrations.
 *
 * At most once: a registration posts only if it sets its pending bit;
 * the application clears the bit when it dequeues the event, then drains
 * the source. So the ring, with room for every registration, cannot
 * overflow while the application plays by the rules. It may not: it can
 * clear bits at will, so the ring's producer still checks for room (the
 * queue's one-free-slot rule) and counts what it cannot post. The bitmap
 * is the application's memory: a bit in it is a hint, never an index.
 *
 * Index reuse: an unregistered index whose pending bit is still set may
 * have an event in the ring, which would carry the old cookie and, with
 * the bit set, silence the index's next owner. Such an index waits in
 * limbo until the application clears the bit (it has taken the event);
 * only then is it handed out again.
 *
 * Blocking: CLANQ_IOC_EVQ_WAIT takes the caller's consumer index and
 * sleeps only while the driver's private producer index still equals it
 * (as ef_vi does), so an event posted after the caller last looked is
 * never slept through. The evq fd is pollable on the same condition.
 * With CLANQ_EVQ_WAIT_ARM the same call first makes the caller's owed
 * flushes, arms its tripwires and compares their watched words
 * (clanq_tw_arm_vec()): a loop over many connections blocks in one
 * system call instead of a TW_ARM per connection and then EVQ_WAIT.
 */
#include <linux/anon_inodes.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "clanq_drv.h"

struct clanq_kevq {
	struct clanq_ctx *ctx;		/* holds a reference */
	struct clanq_shm *shm;
	spinlock_t lock;		/* producers of the ring */
	struct clanq_queue ring;	/* producer side; geometry private */
	unsigned long *pending;		/* in shm: the application's */
	u32 max_regs;			/* private bound on indices */
	struct clanq_kevq_reg **regs;	/* by index, under ctx->lock */
	struct ida ida;
	unsigned long *limbo;		/* freed indices awaiting their bit */
	wait_queue_head_t wq;		/* WAIT sleepers and poll */
};

struct clanq_kevq_reg {
	struct wait_queue_entry wait;	/* on ep->wq */
	struct clanq_kevq *evq;
	struct clanq_kep *ep;		/* holds a reference */
	struct list_head ep_node;	/* ep->regs */
	u32 index;			/* < evq->max_regs */
	u32 events;			/* CLANQ_EV_* it listens for */
	u64 cookie;
};

static bool clanq_kevq_ready(struct clanq_kevq *evq, u32 read_i)
{
	return READ_ONCE(evq->ring.own) != read_i;
}

static void clanq_kevq_post(struct clanq_kevq *evq, struct clanq_kevq_reg *reg,
			    u32 events)
{
	struct clanq_nic *nic = evq->ctx->nic;
	struct clanq_event ev = {
		.reg = reg->index,
		.events = events,
		.cookie = reg->cookie,
	};
	unsigned long flags;
	bool posted;

	/*
	 * [C] Fully ordered: pairs with clanq_q_mb() after the application's
	 * atomic clear of the bit in clanq_evq_poll(), before it drains the
	 * source. Either it sees the source's item, or we see the bit clear
	 * and post again.
	 */
	if (test_and_set_bit(reg->index, evq->pending))
		return;
	spin_lock_irqsave(&evq->lock, flags);
	posted = clanq_q_put(&evq->ring, &ev);
	spin_unlock_irqrestore(&evq->lock, flags);
	if (!posted) {
		/*
		 * Only an application that broke the rules gets here. Give
		 * the bit back, so the next arrival tries again instead of
		 * the registration falling silent for good. Posts for one
		 * registration are serialised by ep->wq.lock.
		 */
		clear_bit(reg->index, evq->pending);
		atomic64_inc(&nic->stats.evq_overflows);
		return;
	}
	atomic64_inc(&nic->stats.events);
	/* every post for an endpoint runs under its ep->wq.lock */
	clanq_count(&reg->ep->events, &reg->ep->counters->events, 1);
	/* [D] pairs with the smp_mb() in clanq_kevq_poll() and wait_event's */
	if (wq_has_sleeper(&evq->wq))
		wake_up_poll(&evq->wq, EPOLLIN | EPOLLRDNORM);
}

/* Called under ep->wq.lock with the events raised as the key. */
static int clanq_kevq_wake(struct wait_queue_entry *wait, unsigned int mode,
			   int sync, void *key)
{
	struct clanq_kevq_reg *reg = container_of(wait, struct clanq_kevq_reg, wait);
	u32 events = (__force u32)key_to_poll(key) & reg->events;	/* CLANQ_EV_* */

	if (events)
		clanq_kevq_post(reg->evq, reg, events);
	return 0;
}

/*
 * Unhook a registration. remove_wait_queue() takes ep->wq.lock, so once
 * it returns no wake callback for it is running or will run.
 */
static void clanq_kevq_reg_remove(struct clanq_kevq_reg *reg)
{
	struct clanq_kevq *evq = reg->evq;

	lockdep_assert_held(&evq->ctx->lock);
	remove_wait_queue(&reg->ep->wq, &reg->wait);
	list_del(&reg->ep_node);
	evq->regs[reg->index] = NULL;
	if (test_bit(reg->index, evq->pending))
		__set_bit(reg->index, evq->limbo);
	else
		ida_free(&evq->ida, reg->index);
	clanq_kep_put(reg->ep);
	kfree(reg);
}

/* Hand back the limbo indices whose events the application has taken. */
static void clanq_kevq_reclaim(struct clanq_kevq *evq)
{
	unsigned long i;

	lockdep_assert_held(&evq->ctx->lock);
	for_each_set_bit(i, evq->limbo, evq->max_regs) {
		if (test_bit(i, evq->pending))
			continue;
		__clear_bit(i, evq->limbo);
		ida_free(&evq->ida, i);
	}
}

void clanq_kevq_detach_ep(struct clanq_kep *ep)
{
	struct clanq_kevq_reg *reg, *tmp;

	list_for_each_entry_safe(reg, tmp, &ep->regs, ep_node)
		clanq_kevq_reg_remove(reg);
}

/*
 * What one wake-up may cost: every registration of an endpoint is an
 * entry on its wait queue, walked with interrupts off by each delivery
 * (in the RDMA engine's turn, too). So an endpoint is registered at most
 * once per evq (-EEXIST) and on at most max_ep_regs evqs (-ENOSPC): one
 * wake-up runs at most max_ep_regs callbacks, each posting at O(1).
 */
static int clanq_kevq_reg_check(struct clanq_kevq *evq, struct clanq_kep *ep)
{
	struct clanq_kevq_reg *reg;
	unsigned int n = 0;

	lockdep_assert_held(&evq->ctx->lock);
	list_for_each_entry(reg, &ep->regs, ep_node) {
		n++;
		if (reg->evq == evq) {
			clanq_uerr(evq->ctx, "EVQ_REGISTER: endpoint %u is on it already",
				   ep->id);
			return -EEXIST;
		}
	}
	if (n >= READ_ONCE(clanq_max_ep_regs)) {
		clanq_ulimit(evq->ctx, "endpoint %u is on %u evqs already: max_ep_regs",
			     ep->id, n);
		return -ENOSPC;
	}
	return 0;
}

/*
 * Watch @events of endpoint @ep_id (of the evq's context) on @evq.
 * Return: the registration index, or -errno.
 */
int clanq_kevq_register_ep(struct clanq_kevq *evq, u32 ep_id, u32 events,
			   u64 cookie)
{
	struct clanq_ctx *ctx = evq->ctx;
	struct clanq_kevq_reg *reg;
	unsigned long flags;
	u32 pending;
	struct clanq_kep *ep;
	int index;

	if (!events || (events & ~CLANQ_EV_ALL))
		return -EINVAL;
	reg = kzalloc(sizeof(*reg), GFP_KERNEL_ACCOUNT);
	if (!reg)
		return -ENOMEM;

	mutex_lock(&ctx->lock);
	ep = clanq_kep_lookup_owned(ctx, ep_id);
	if (!ep) {
		mutex_unlock(&ctx->lock);
		kfree(reg);
		return -ENOENT;
	}
	index = clanq_kevq_reg_check(evq, ep);
	if (!index) {
		clanq_kevq_reclaim(evq);
		index = ida_alloc_max(&evq->ida, evq->max_regs - 1,
				      GFP_KERNEL_ACCOUNT);
	}
	if (index < 0) {
		mutex_unlock(&ctx->lock);
		clanq_kep_put(ep);
		kfree(reg);
		return index;
	}
	reg->evq = evq;
	reg->ep = ep;			/* the lookup's reference */
	reg->index = index;
	reg->events = events;
	reg->cookie = cookie;
	init_waitqueue_func_entry(&reg->wait, clanq_kevq_wake);
	evq->regs[index] = reg;
	list_add_tail(&reg->ep_node, &ep->regs);
	/*
	 * Hook in and look for what arrived before we listened, both under
	 * the wait queue's lock, as wake callbacks run: a delivery either
	 * queued before our look (we post) or finds us hooked (it posts).
	 */
	spin_lock_irqsave(&ep->wq.lock, flags);
	__add_wait_queue(&ep->wq, &reg->wait);
	/*
	 * [E] Our entry before our look at the sources, against a
	 * producer's publish before its wq_has_sleeper() (clanq_kep_raise()):
	 * the Dekker pairing of queue.h. OOB gets it from oob.lock, which its
	 * producers hold while publishing; the RDMA engine shares no lock
	 * with us, so the barrier must be ours.
	 */
	smp_mb();
	pending = clanq_kep_pending(ep, reg->events);
	if (pending)
		clanq_kevq_post(evq, reg, pending);
	spin_unlock_irqrestore(&ep->wq.lock, flags);
	mutex_unlock(&ctx->lock);
	return index;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kevq_register_ep);

VISIBLE_IF_KUNIT
int clanq_kevq_unregister_index(struct clanq_kevq *evq, u32 index)
{
	int err = -ENOENT;

	mutex_lock(&evq->ctx->lock);
	if (index < evq->max_regs && evq->regs[index]) {
		clanq_kevq_reg_remove(evq->regs[index]);
		err = 0;
	}
	mutex_unlock(&evq->ctx->lock);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kevq_unregister_index);

static int clanq_ioctl_evq_register(void *obj, void *arg)
{
	struct clanq_kevq *evq = obj;
	struct clanq_ioc_evq_reg *r = arg;
	int index;

	if (r->reg || !r->events || (r->events & ~CLANQ_EV_ALL)) {
		clanq_uerr(evq->ctx,
			   "EVQ_REGISTER: events %#x, reg %u: want CLANQ_EV_* bits, reg 0",
			   r->events, r->reg);
		return -EINVAL;
	}
	index = clanq_kevq_register_ep(evq, r->ep, r->events, r->cookie);
	if (index < 0)
		return index;
	r->reg = index;
	return 0;
}

static int clanq_ioctl_evq_unregister(void *obj, void *arg)
{
	struct clanq_kevq *evq = obj;
	struct clanq_ioc_evq_reg *r = arg;

	return clanq_kevq_unregister_index(evq, r->reg);
}

/* Entries of CLANQ_EVQ_WAIT_ARM that need no allocation. */
#define CLANQ_KEVQ_ARMS_ON_STACK	8

/*
 * CLANQ_EVQ_WAIT_ARM: copy the caller's entries once (bounded), then
 * clanq_tw_arm_vec(). Return: words that changed, or -errno.
 */
static int clanq_kevq_arm(struct clanq_kevq *evq, const struct clanq_ioc_evq_wait *w)
{
	struct clanq_evq_arm v_stack[CLANQ_KEVQ_ARMS_ON_STACK], *v = v_stack;
	struct clanq_ktw *tws_stack[CLANQ_KEVQ_ARMS_ON_STACK], **tws = tws_stack;
	void *buf = NULL;
	int ret;

	if (!w->nr_arms || w->nr_arms > CLANQ_EVQ_ARM_MAX || w->changed) {
		clanq_uerr(evq->ctx, "EVQ_WAIT: nr_arms %u (want 1 .. %u), changed %u (want 0)",
			   w->nr_arms, CLANQ_EVQ_ARM_MAX, w->changed);
		return -EINVAL;
	}
	if (w->nr_arms > CLANQ_KEVQ_ARMS_ON_STACK) {
		/* entries, then pointers: 24 bytes each keeps those aligned */
		buf = kvmalloc_array(w->nr_arms, sizeof(*v) + sizeof(*tws),
				     GFP_KERNEL_ACCOUNT);
		if (!buf)
			return -ENOMEM;
		v = buf;
		tws = (struct clanq_ktw **)(v + w->nr_arms);
	}
	if (copy_from_user(v, u64_to_user_ptr(w->arms), w->nr_arms * sizeof(*v)))
		ret = -EFAULT;
	else
		ret = clanq_tw_arm_vec(evq->ctx, v, w->nr_arms, tws);
	kvfree(buf);
	return ret;
}

static int clanq_ioctl_evq_wait(void *obj, void *arg)
{
	struct clanq_kevq *evq = obj;
	struct clanq_ioc_evq_wait *w = arg;
	long ret;

	if (w->read_i > evq->ring.mask) {
		clanq_uerr(evq->ctx, "EVQ_WAIT: read_i %u is not an index of a %u-slot ring",
			   w->read_i, evq->ring.mask + 1);
		return -EINVAL;
	}
	if (!(w->flags & CLANQ_EVQ_WAIT_ARM)) {
		/* without the flag they are reserved words, as they were */
		if (w->arms || w->nr_arms || w->changed) {
			clanq_uerr(evq->ctx, "EVQ_WAIT: reserved fields must be zero");
			return -EINVAL;
		}
	} else {
		ret = clanq_kevq_arm(evq, w);
		if (ret < 0)
			return ret;
		w->changed = ret;
		if (ret)
			return 0;	/* a word moved: the caller looks again */
	}
	if (clanq_kevq_ready(evq, w->read_i))
		return 0;
	atomic64_inc(&evq->ctx->nic->stats.evq_blocks);
	/* [D] wait_event's set_current_state() pairs with clanq_kevq_post() */
	if (w->timeout_ns == U64_MAX)
		ret = wait_event_interruptible(evq->wq,
					       clanq_kevq_ready(evq, w->read_i));
	else
		ret = wait_event_interruptible_hrtimeout(evq->wq,
							 clanq_kevq_ready(evq, w->read_i),
							 ns_to_ktime(min_t(u64, w->timeout_ns,
									   KTIME_MAX)));
	if (ret == -ETIME)
		return -ETIMEDOUT;
	if (ret == -ERESTARTSYS)
		return -EINTR;	/* never restarted: the timeout would be lost */
	return ret;
}

/* The evq fd's commands. */
static const struct clanq_ioctl_desc clanq_kevq_ioctls[] = {
	CLANQ_IOCTL(EVQ_REGISTER, evq_reg, clanq_ioctl_evq_register, 0, reserved),
	CLANQ_IOCTL(EVQ_UNREGISTER, evq_reg, clanq_ioctl_evq_unregister, 0, reserved),
	/*
	 * Its reserved words are the arms with CLANQ_EVQ_WAIT_ARM, so the
	 * handler checks them, not the shared prologue.
	 */
	[_IOC_NR(CLANQ_IOC_EVQ_WAIT)] = {
		.cmd = CLANQ_IOC_EVQ_WAIT, .name = "EVQ_WAIT",
		.fn = clanq_ioctl_evq_wait, .flags_ok = CLANQ_EVQ_WAIT_FLAGS,
		.flags_off = offsetof(struct clanq_ioc_evq_wait, flags),
		.reserved_off = sizeof(struct clanq_ioc_evq_wait) +
				__CLANQ_IOCTL_CHECK(evq_wait),
	},
};

static long clanq_kevq_ioctl(struct file *file, unsigned int cmd,
			     unsigned long uarg)
{
	struct clanq_kevq *evq = file->private_data;

	clanq_ctx_count_entry(evq->ctx);
	return clanq_ioctl_dispatch(clanq_kevq_ioctls, ARRAY_SIZE(clanq_kevq_ioctls),
				    evq, evq->ctx, cmd, uarg);
}

static __poll_t clanq_kevq_poll(struct file *file, poll_table *pt)
{
	struct clanq_kevq *evq = file->private_data;
	u32 cons;

	clanq_ctx_count_entry(evq->ctx);
	poll_wait(file, &evq->wq, pt);
	/*
	 * [D] Pairs with the full barrier in wq_has_sleeper() after a post:
	 * either the poster sees our entry, or we see its event. Adding the
	 * entry is only a release, so the barrier must be ours to give.
	 */
	smp_mb();
	cons = READ_ONCE(*evq->ring.cons);	/* the application's: check */
	if (cons & ~evq->ring.mask)
		return EPOLLERR;
	return clanq_kevq_ready(evq, cons) ? EPOLLIN | EPOLLRDNORM : 0;
}

static int clanq_kevq_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct clanq_kevq *evq = file->private_data;

	clanq_ctx_count_entry(evq->ctx);
	if (vma->vm_pgoff)
		return -EINVAL;
	return clanq_shm_mmap(evq->shm, vma);
}

static void clanq_kevq_free(struct clanq_kevq *evq)
{
	ida_destroy(&evq->ida);
	bitmap_free(evq->limbo);
	kvfree(evq->regs);
	clanq_shm_put(evq->shm);
	kfree(evq);
}

/* Unhook every registration, free the evq, drop its context reference. */
VISIBLE_IF_KUNIT
void clanq_kevq_destroy(struct clanq_kevq *evq)
{
	struct clanq_ctx *ctx = evq->ctx;
	u32 i;

	mutex_lock(&ctx->lock);
	for (i = 0; i < evq->max_regs; i++)
		if (evq->regs[i])
			clanq_kevq_reg_remove(evq->regs[i]);
	mutex_unlock(&ctx->lock);
	clanq_kevq_free(evq);
	atomic_dec(&ctx->nr_evqs);
	clanq_ctx_put(ctx);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kevq_destroy);

static int clanq_kevq_release(struct inode *inode, struct file *file)
{
	clanq_kevq_destroy(file->private_data);
	return 0;
}

static const struct file_operations clanq_kevq_fops = {
	.owner		= THIS_MODULE,
	.release	= clanq_kevq_release,
	.unlocked_ioctl	= clanq_kevq_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.poll		= clanq_kevq_poll,
	.mmap		= clanq_kevq_mmap,
};

/*
 * The pending bitmap is shared as 64-bit words; the driver's bit
 * operations work on longs. Both number bits the same way only on
 * little-endian machines.
 */
#ifndef __LITTLE_ENDIAN
#error "clanq: the shared pending bitmap assumes a little-endian CPU"
#endif

static u32 clanq_kevq_pending_words(u32 max_regs)
{
	return DIV_ROUND_UP(max_regs, 64);
}

/* Segment layout: the ring, then the pending bitmap. 0 if impossible. */
static u32 clanq_kevq_layout(struct clanq_queue_off *ring, u32 *pending,
			     u32 max_regs)
{
	u32 end;

	/* a ring for max_regs + 1 must fit the queue's own bound */
	if (max_regs >= CLANQ_Q_MAX_SLOTS)
		return 0;
	end = clanq_q_layout(ring, 0, roundup_pow_of_two(max_regs + 1),
			     sizeof(struct clanq_event));
	if (!end)
		return 0;
	*pending = clanq_q_align(end);
	return *pending + clanq_kevq_pending_words(max_regs) * sizeof(u64);
}

/*
 * An evq of @ctx for @max_regs registrations, with no file yet; @c gets
 * the layout. Holds a reference on @ctx until clanq_kevq_destroy().
 */
VISIBLE_IF_KUNIT
struct clanq_kevq *clanq_kevq_create(struct clanq_ctx *ctx, u32 max_regs,
				     struct clanq_ioc_evq_create *c)
{
	struct clanq_kevq *evq;
	u32 size, pending;
	int err;

	if (!max_regs || max_regs > READ_ONCE(clanq_max_evq_regs))
		return ERR_PTR(-EINVAL);
	size = clanq_kevq_layout(&c->ring, &pending, max_regs);
	if (!size)
		return ERR_PTR(-EINVAL);
	evq = kzalloc(sizeof(*evq), GFP_KERNEL_ACCOUNT);
	if (!evq)
		return ERR_PTR(-ENOMEM);
	evq->max_regs = max_regs;
	spin_lock_init(&evq->lock);
	init_waitqueue_head(&evq->wq);
	ida_init(&evq->ida);
	evq->regs = kvcalloc(max_regs, sizeof(*evq->regs), GFP_KERNEL_ACCOUNT);
	evq->limbo = bitmap_zalloc(max_regs, GFP_KERNEL_ACCOUNT);
	evq->shm = clanq_shm_alloc(ctx, size);
	err = -ENOMEM;
	if (!evq->regs || !evq->limbo || !evq->shm)
		goto err_free;
	err = clanq_q_init(&evq->ring, evq->shm->vaddr, evq->shm->size, &c->ring);
	if (WARN_ON(err))
		goto err_free;
	evq->pending = evq->shm->vaddr + pending;
	evq->ctx = ctx;
	clanq_ctx_get(ctx);
	atomic_inc(&ctx->nr_evqs);
	c->max_regs = max_regs;
	c->nr_words = clanq_kevq_pending_words(max_regs);
	c->mmap_size = evq->shm->size;
	c->pending = pending;
	return evq;

err_free:
	clanq_kevq_free(evq);
	return ERR_PTR(err);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kevq_create);

#if IS_ENABLED(CONFIG_KUNIT)
/* For KUnit only: the shared segment, as the application would map it. */
void *clanq_kevq_seg_for_kunit(struct clanq_kevq *evq)
{
	return evq->shm->vaddr;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kevq_seg_for_kunit);
#endif

int clanq_ioctl_evq_create(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_evq_create *c = arg;
	struct clanq_kevq *evq;
	int fd;

	evq = clanq_kevq_create(ctx, c->max_regs, c);
	if (IS_ERR(evq)) {
		if (PTR_ERR(evq) == -EINVAL && c->max_regs)
			clanq_ulimit(ctx, "EVQ_CREATE: max_regs %u is over max_evq_regs (%u)",
				     c->max_regs, READ_ONCE(clanq_max_evq_regs));
		else if (PTR_ERR(evq) == -EINVAL)
			clanq_uerr(ctx, "EVQ_CREATE: max_regs 0");
		return PTR_ERR(evq);
	}
	/*
	 * Installed before the result is copied out: if that copy faults,
	 * the caller has an fd it does not know of, which its exit closes.
	 */
	fd = anon_inode_getfd("[clanq-evq]", &clanq_kevq_fops, evq,
			      O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		clanq_kevq_destroy(evq);
		return fd;
	}
	c->fd = fd;
	return 0;
}
