// SPDX-License-Identifier: GPL-2.0
/*
 * Endpoints: an address peers can name (node, id), an OOB receive queue
 * the application reads directly, RDMA request and completion queues it
 * shares with the engine (rdma.c), and the wait queue event sources are
 * raised on.
 *
 * The endpoint's shared segment holds the counters, the three queues,
 * the engine's need_wakeup flag and the fired bitmap of its tripwires
 * (tripwire.c), each index word on a line of its own. The
 * queues' geometry and the driver's indices live here, in kernel memory
 * (struct clanq_queue); the segment holds only their published mirrors,
 * which the driver writes and never reads back.
 *
 * A shared service (uapi.h, CLANQ_EP_SHARED) is a group of endpoints in
 * nic->eps at the service's number (struct clanq_kgroup); each member
 * also has an id of its own. Joining and leaving take clanq_group_lock
 * (inside ctx->lock: nothing takes a ctx->lock under it); a delivery
 * reads the members under RCU (clanq_kep_lookup_dst()) and pins the one
 * it picks, as any lookup pins an endpoint.
 */
#include <linux/jhash.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/slab.h>

#include "clanq_drv.h"

/*
 * Segment layout: counters, the OOB queue, the RDMA request and
 * completion queues, the need_wakeup word, the fired bitmap (tw_slots
 * bits, a multiple of 64, bounded by the caller). Returns the size, 0
 * if a queue's geometry is invalid.
 */
static u32 clanq_kep_layout(struct clanq_ioc_ep_create *c, u32 oob_slots,
			    u32 rq_slots, u32 cq_slots, u32 tw_slots)
{
	u32 at;

	at = clanq_q_layout(&c->oob, sizeof(struct clanq_ep_counters), oob_slots,
			    sizeof(struct clanq_oob_msg));
	if (at)
		at = clanq_q_layout(&c->rq, at, rq_slots,
				    sizeof(struct clanq_rdma_req));
	if (at)
		at = clanq_q_layout(&c->cq, at, cq_slots,
				    sizeof(struct clanq_rdma_comp));
	if (!at)
		return 0;
	c->counters = 0;
	c->need_wakeup = clanq_q_align(at);
	c->tw_slots = tw_slots;
	c->tw_fired = c->need_wakeup + CLANQ_Q_ALIGN;
	return c->tw_fired + tw_slots / 8;
}

static DEFINE_MUTEX(clanq_group_lock);

/*
 * Which of a group's @nr members a message goes to: a hash of its
 * source and of its flow key (uapi.h), so that every message of a flow
 * reaches the same member while the members stay the same. The seed is
 * the group's own: a sender cannot aim at a member.
 */
VISIBLE_IF_KUNIT
u32 clanq_kgroup_pick(const struct clanq_kgroup *g, u32 nr,
		      const struct clanq_oob_msg *msg)
{
	u32 key[2 + CLANQ_SHARED_KEY_BYTES / 4] = {
		msg->src.node, msg->src.id
	};

	/* a remote wire's length is the sender's word: bound it */
	memcpy(&key[2], msg->payload,
	       min_t(u32, msg->len, CLANQ_SHARED_KEY_BYTES));
	return reciprocal_scale(jhash2(key, ARRAY_SIZE(key), g->seed), nr);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kgroup_pick);

/*
 * @ep joins the group at @service, which it starts if there is none.
 * Refused (-EADDRINUSE) if the service is in use unshared or shared by
 * another user; -ENOSPC with CLANQ_SHARED_MAX members already.
 */
static int clanq_kgroup_join(struct clanq_kep *ep, u32 service)
{
	struct clanq_ctx *ctx = ep->ctx;
	struct clanq_nic *nic = ep->nic;
	struct clanq_kgroup *g, *fresh;
	void *entry;
	int err = 0;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	if (!fresh)
		return -ENOMEM;
	fresh->uid = ctx->uid;
	fresh->service = service;
	fresh->seed = get_random_u32();
	fresh->member[0] = ep;
	fresh->nr = 1;

	mutex_lock(&clanq_group_lock);
	entry = xa_load(&nic->eps, service);
	g = clanq_eps_group(entry);
	if (!entry) {
		/* an unshared EP_CREATE may take the number meanwhile */
		err = xa_insert(&nic->eps, service,
				xa_tag_pointer(fresh, CLANQ_EPS_GROUP_TAG),
				GFP_KERNEL_ACCOUNT);
		if (!err)
			swap(g, fresh);
	} else if (!g) {
		err = -EBUSY;
	} else if (!uid_eq(g->uid, ctx->uid)) {
		clanq_uerr(ctx, "EP_CREATE: service %u is shared by uid %u, not by uid %u",
			   service, from_kuid_munged(current_user_ns(), g->uid),
			   from_kuid_munged(current_user_ns(), ctx->uid));
		err = -EADDRINUSE;
	} else if (g->nr >= CLANQ_SHARED_MAX) {
		clanq_ulimit(ctx, "EP_CREATE: service %u has %u members already (CLANQ_SHARED_MAX)",
			     service, g->nr);
		err = -ENOSPC;
	} else {
		WRITE_ONCE(g->member[g->nr], ep);
		/* [G] the slot before the count that covers it */
		smp_store_release(&g->nr, g->nr + 1);
	}
	if (err == -EBUSY) {
		clanq_uerr(ctx, "EP_CREATE: service %u is in use unshared on this node",
			   service);
		err = -EADDRINUSE;
	}
	ep->group = err ? NULL : g;
	mutex_unlock(&clanq_group_lock);
	kfree(fresh);
	return err;
}

/*
 * @ep leaves its group, if it is in one; the group ends with its last
 * member. A delivery that read the members before may still pick @ep:
 * it finds @ep dead (or queues on it just before) as it would an
 * endpoint destroyed under it, and the sender retransmits or is told.
 */
static void clanq_kgroup_leave(struct clanq_kep *ep)
{
	struct clanq_kgroup *g = ep->group;
	u32 i, last;

	if (!g)
		return;
	mutex_lock(&clanq_group_lock);
	last = g->nr - 1;
	for (i = 0; i < last && g->member[i] != ep; i++)
		;
	/*
	 * The last member moves into the hole before the count shrinks:
	 * a reader with either count finds a live member in every slot it
	 * can pick ([G]). The slot past the count keeps a stale pointer,
	 * read only by those who read the old count, under RCU.
	 */
	WRITE_ONCE(g->member[i], g->member[last]);
	/* [G] pairs with the smp_load_acquire() in clanq_kep_lookup_dst() */
	smp_store_release(&g->nr, last);
	if (!last) {
		xa_erase(&ep->nic->eps, g->service);
		kfree_rcu(g, rcu);
	}
	ep->group = NULL;
	mutex_unlock(&clanq_group_lock);
}

/*
 * @service: the id asked for (1 .. CLANQ_SERVICE_MAX, checked by the
 * caller), or 0 for one the driver picks above them. @shared: join the
 * group at @service instead, with an id picked as for 0.
 */
static struct clanq_kep *__clanq_kep_create(struct clanq_ctx *ctx,
					    u32 oob_slots, u32 rq_slots,
					    u32 cq_slots, u32 tw_slots,
					    u32 service, bool shared)
{
	struct clanq_nic *nic = ctx->nic;
	struct clanq_ioc_ep_create c;
	struct clanq_kep *ep;
	u32 size;
	int err;

	lockdep_assert_held(&ctx->lock);
	if (ctx->nr_eps >= READ_ONCE(clanq_max_eps)) {
		clanq_ulimit(ctx, "EP_CREATE: context has %u endpoints already: max_eps",
			     READ_ONCE(clanq_max_eps));
		return ERR_PTR(-ENOSPC);
	}
	size = clanq_kep_layout(&c, oob_slots, rq_slots, cq_slots, tw_slots);
	if (!size)
		return ERR_PTR(-EINVAL);

	ep = kzalloc(sizeof(*ep), GFP_KERNEL_ACCOUNT);
	if (!ep)
		return ERR_PTR(-ENOMEM);
	ep->ctx = ctx;
	ep->nic = nic;
	refcount_set(&ep->ref, 1);
	init_waitqueue_head(&ep->wq);
	INIT_LIST_HEAD(&ep->regs);
	clanq_oob_init(ep);

	err = -ENOMEM;
	ep->shm = clanq_shm_alloc(ctx, size);
	if (!ep->shm)
		goto err_free;
	ep->counters = ep->shm->vaddr;
	/* geometry from our own layout, checked against the real size */
	err = clanq_q_init(&ep->oob.q, ep->shm->vaddr, ep->shm->size, &c.oob);
	if (WARN_ON(err))
		goto err_shm;
	clanq_rdma_init(ep, &c.rq, &c.cq, c.need_wakeup);
	clanq_kep_tw_init(ep, tw_slots, c.tw_fired);
	err = clanq_ctx_mmap_add(ctx, &ep->shm->map);
	if (err)
		goto err_shm;
	/*
	 * Cyclic ids: a stale address held by a peer names nobody for a
	 * long while rather than a new endpoint at once. Published last:
	 * once in the xarray, the endpoint can receive.
	 */
	if (service && !shared) {
		ep->id = service;
		err = xa_insert(&nic->eps, service, ep, GFP_KERNEL_ACCOUNT);
		if (err == -EBUSY) {
			clanq_uerr(ctx, "EP_CREATE: service %u is in use on this node",
				   service);
			err = -EADDRINUSE;
		}
	} else {
		/*
		 * A member's id is only reserved (NULL) until it has joined:
		 * while a failure can still free it, nobody may find it.
		 */
		err = xa_alloc_cyclic(&nic->eps, &ep->id, shared ? NULL : ep,
				      XA_LIMIT(CLANQ_SERVICE_MAX + 1, S32_MAX),
				      &nic->next_ep_id, GFP_KERNEL_ACCOUNT);
	}
	if (err < 0)
		goto err_mmap;
	if (shared) {
		err = clanq_kgroup_join(ep, service);
		if (err) {
			xa_erase(&nic->eps, ep->id);
			goto err_mmap;
		}
		/* into the reserved slot: allocates nothing, cannot fail */
		WARN_ON(xa_err(xa_store(&nic->eps, ep->id, ep,
					GFP_KERNEL_ACCOUNT)));
	}
	list_add_tail(&ep->ctx_node, &ctx->eps);
	ctx->nr_eps++;
	return ep;

err_mmap:
	clanq_ctx_mmap_del(ctx, &ep->shm->map);
err_shm:
	clanq_shm_put(ep->shm);
err_free:
	kfree(ep);
	return ERR_PTR(err);
}

VISIBLE_IF_KUNIT
struct clanq_kep *clanq_kep_create(struct clanq_ctx *ctx, u32 oob_slots,
				   u32 rq_slots, u32 cq_slots, u32 tw_slots,
				   u32 service)
{
	return __clanq_kep_create(ctx, oob_slots, rq_slots, cq_slots, tw_slots,
				  service, false);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kep_create);

/* A member of the shared service @service (1 .. CLANQ_SERVICE_MAX). */
VISIBLE_IF_KUNIT
struct clanq_kep *clanq_kep_create_shared(struct clanq_ctx *ctx, u32 oob_slots,
					  u32 rq_slots, u32 cq_slots,
					  u32 tw_slots, u32 service)
{
	return __clanq_kep_create(ctx, oob_slots, rq_slots, cq_slots, tw_slots,
				  service, true);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kep_create_shared);

static void clanq_kep_free_rcu(struct rcu_head *rcu)
{
	kfree(container_of(rcu, struct clanq_kep, rcu));
}

/* Another reference on @ep, which the caller holds. */
void clanq_kep_get(struct clanq_kep *ep)
{
	refcount_inc(&ep->ref);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kep_get);

void clanq_kep_put(struct clanq_kep *ep)
{
	if (refcount_dec_and_test(&ep->ref)) {
		clanq_shm_put(ep->shm);
		/* lookups under RCU may still be looking at it */
		call_rcu(&ep->rcu, clanq_kep_free_rcu);
	}
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kep_put);

/*
 * Destroy: no new delivery finds it (xarray), none in flight queues
 * anything more (dead), the engine lets go of it, no evq hears of it
 * (registrations), and the application can map it no more. Existing
 * mappings keep the segment.
 */
void clanq_kep_destroy(struct clanq_kep *ep)
{
	struct clanq_ctx *ctx = ep->ctx;

	lockdep_assert_held(&ctx->lock);
	clanq_kgroup_leave(ep);
	xa_erase(&ep->nic->eps, ep->id);
	clanq_kep_tw_kill(ep);
	clanq_oob_kill(ep);
	clanq_engine_detach_ep(ep);
	clanq_kevq_detach_ep(ep);
	clanq_ctx_mmap_del(ctx, &ep->shm->map);
	list_del(&ep->ctx_node);
	ctx->nr_eps--;
	clanq_kep_put(ep);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kep_destroy);

/*
 * Any endpoint of @nic, pinned; NULL if there is none by that id. A
 * shared service is no endpoint: its members are found by their own ids.
 */
struct clanq_kep *clanq_kep_lookup(struct clanq_nic *nic, u32 id)
{
	struct clanq_kep *ep;
	void *entry;

	rcu_read_lock();
	entry = xa_load(&nic->eps, id);
	ep = clanq_eps_group(entry) ? NULL : entry;
	if (ep && !refcount_inc_not_zero(&ep->ref))
		ep = NULL;
	rcu_read_unlock();
	return ep;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kep_lookup);

/*
 * Where @msg, sent to @id, goes: the endpoint @id, or the member of the
 * shared service @id its source and flow key pick; pinned, or NULL.
 */
struct clanq_kep *clanq_kep_lookup_dst(struct clanq_nic *nic, u32 id,
				       const struct clanq_oob_msg *msg)
{
	struct clanq_kgroup *g;
	struct clanq_kep *ep;
	void *entry;
	u32 nr;

	rcu_read_lock();
	entry = xa_load(&nic->eps, id);
	g = clanq_eps_group(entry);
	if (g) {
		/* [G] pairs with the stores in join and leave */
		nr = smp_load_acquire(&g->nr);
		entry = nr ? READ_ONCE(g->member[clanq_kgroup_pick(g, nr, msg)]) :
			     NULL;
	}
	ep = entry;
	if (ep && !refcount_inc_not_zero(&ep->ref))
		ep = NULL;
	rcu_read_unlock();
	return ep;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kep_lookup_dst);

/* An endpoint of @ctx itself: ids of other contexts read as absent. */
struct clanq_kep *clanq_kep_lookup_owned(struct clanq_ctx *ctx, u32 id)
{
	struct clanq_kep *ep = clanq_kep_lookup(ctx->nic, id);

	if (ep && ep->ctx != ctx) {
		clanq_kep_put(ep);
		ep = NULL;
	}
	return ep;
}

/*
 * Tell every registration of @ep that @events happened. The full barrier
 * in wq_has_sleeper() orders the caller's queue publication before the
 * check for registrations (the sleep-flag pattern of queue.h): a
 * registration being added concurrently either is seen here or sees the
 * item when it checks for pending sources (clanq_kep_pending()).
 */
void clanq_kep_raise(struct clanq_kep *ep, u32 events)
{
	/* the key carries CLANQ_EV_* bits; only our own callbacks read it */
	/* [E] pairs with the smp_mb() in clanq_kevq_register_ep() */
	if (wq_has_sleeper(&ep->wq))
		wake_up_poll(&ep->wq, (__force __poll_t)events);
}

/*
 * Which of @events does @ep have something for now? (OOB: unread
 * messages; RDMA: unread completions.)
 */
u32 clanq_kep_pending(struct clanq_kep *ep, u32 events)
{
	u32 pending = 0;

	if ((events & CLANQ_EV_RDMA) && clanq_rdma_pending(ep))
		pending |= CLANQ_EV_RDMA;
	if ((events & CLANQ_EV_OOB) && clanq_oob_pending(ep))
		pending |= CLANQ_EV_OOB;
	return pending;
}

/* What the application needs to map and use @ep. */
VISIBLE_IF_KUNIT
void clanq_kep_describe(struct clanq_kep *ep, struct clanq_ioc_ep_create *c)
{
	c->addr.node = ep->nic->node;
	c->addr.id = ep->id;
	c->mmap_offset = clanq_map_offset(&ep->shm->map);
	c->mmap_size = ep->shm->size;
	clanq_kep_layout(c, ep->oob.q.mask + 1, ep->rdma.rq.mask + 1,
			 ep->rdma.cq.mask + 1, ep->tw.slots);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kep_describe);

int clanq_ioctl_ep_create(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_ep_create *c = arg;
	u32 slots = c->oob_slots ? c->oob_slots : CLANQ_DEFAULT_OOB_SLOTS;
	u32 rq = c->rq_slots ? c->rq_slots : CLANQ_DEFAULT_RDMA_SLOTS;
	u32 cq = c->cq_slots ? c->cq_slots : CLANQ_DEFAULT_RDMA_SLOTS;
	u32 tw = c->tw_slots ? c->tw_slots : CLANQ_DEFAULT_TW_SLOTS;
	/* a default endpoint is always possible; TW_CREATE counts the rest */
	u32 max_tw = clamp(round_up(READ_ONCE(clanq_max_tripwires), 64),
			   CLANQ_DEFAULT_TW_SLOTS, CLANQ_MAX_TW_SLOTS);
	struct clanq_kep *ep;
	u32 service = 0;

	u32 max_oob = READ_ONCE(clanq_max_oob_slots);
	u32 max_rdma = READ_ONCE(clanq_max_rdma_slots);

	if (slots < 2 || !is_power_of_2(slots)) {
		clanq_uerr(ctx, "EP_CREATE: oob_slots %u: want a power of two, at least 2",
			   c->oob_slots);
		return -EINVAL;
	}
	if (slots > max_oob) {
		clanq_ulimit(ctx, "EP_CREATE: oob_slots %u is over max_oob_slots (%u)",
			     slots, max_oob);
		return -EINVAL;
	}
	if (rq < 2 || !is_power_of_2(rq) || cq < 2 || !is_power_of_2(cq)) {
		clanq_uerr(ctx, "EP_CREATE: rq_slots %u, cq_slots %u: want powers of two, >= 2",
			   c->rq_slots, c->cq_slots);
		return -EINVAL;
	}
	if (rq > max_rdma || cq > max_rdma) {
		clanq_ulimit(ctx, "EP_CREATE: rq_slots %u, cq_slots %u: over max_rdma_slots (%u)",
			     rq, cq, max_rdma);
		return -EINVAL;
	}
	if (tw % 64) {
		clanq_uerr(ctx, "EP_CREATE: tw_slots %u: want a multiple of 64",
			   c->tw_slots);
		return -EINVAL;
	}
	if (tw > max_tw) {
		clanq_ulimit(ctx, "EP_CREATE: tw_slots %u is over %u (max_tripwires, rounded up)",
			     tw, max_tw);
		return -EINVAL;
	}
	if ((c->flags & CLANQ_EP_SHARED) && !(c->flags & CLANQ_EP_SERVICE)) {
		clanq_uerr(ctx, "EP_CREATE: CLANQ_EP_SHARED without CLANQ_EP_SERVICE");
		return -EINVAL;
	}
	if (c->flags & CLANQ_EP_SERVICE) {
		service = c->addr.id;
		if (!service || service > CLANQ_SERVICE_MAX) {
			clanq_uerr(ctx, "EP_CREATE: service %u: want 1..%u",
				   service, CLANQ_SERVICE_MAX);
			return -EINVAL;
		}
		if (service < CLANQ_SERVICE_PRIV &&
		    !capable(CAP_NET_BIND_SERVICE)) {
			clanq_uerr(ctx, "EP_CREATE: service %u < %u needs CAP_NET_BIND_SERVICE",
				   service, CLANQ_SERVICE_PRIV);
			return -EACCES;
		}
	}
	mutex_lock(&ctx->lock);
	/* the refusals are explained where they are decided */
	if (c->flags & CLANQ_EP_SHARED)
		ep = clanq_kep_create_shared(ctx, slots, rq, cq, tw, service);
	else
		ep = clanq_kep_create(ctx, slots, rq, cq, tw, service);
	if (IS_ERR(ep)) {
		mutex_unlock(&ctx->lock);
		return PTR_ERR(ep);
	}
	clanq_kep_describe(ep, c);
	mutex_unlock(&ctx->lock);
	return 0;
}

int clanq_ioctl_ep_destroy(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_ep_destroy *d = arg;
	struct clanq_kep *ep;

	mutex_lock(&ctx->lock);
	ep = clanq_kep_lookup_owned(ctx, d->id);
	if (ep) {
		clanq_kep_destroy(ep);
		clanq_kep_put(ep);
	}
	mutex_unlock(&ctx->lock);
	if (!ep)
		clanq_uerr(ctx, "EP_DESTROY: no endpoint %u in this context", d->id);
	return ep ? 0 : -ENOENT;
}
