// SPDX-License-Identifier: GPL-2.0
/*
 * Counters where users look for them: every NIC's identity, limits and
 * counters in sysfs under its misc device, /sys/class/misc/clanqN/
 * (docs/sysfs-clanq.rst), as /sys/class/net/<if>/statistics/ and
 * /sys/class/infiniband/<dev>/ports/N/counters/ are; and, per context and
 * per endpoint, CLANQ_IOC_EP_STATS, which shows a user the contexts its
 * own uid opened (all of them to CAP_SYS_ADMIN), as ss(8) shows its
 * sockets. clanqstat(8) reads both. debugfs (debugfs.c) keeps what only
 * the driver's developers need.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/device.h>
#include <linux/miscdevice.h>
#include <linux/pid.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>

#include "clanq_drv.h"

/*
 * @ep's counters, from the driver's private counts (the segment's
 * mirrors are the user's to scribble on), each under the lock its
 * writers hold, and how many OOB messages wait unread. Under
 * ep->ctx->lock (which keeps @ep alive). The engine's counts are read
 * without its serve mutex: a turn can be made long, and EP_STATS holds
 * the NIC's ctx_lock, which every open() and last close() takes (issue
 * 28), so they may be one chunk behind.
 */
void clanq_kep_read_counters(struct clanq_kep *ep, struct clanq_ep_counters *c,
			     u32 *oob_queued)
{
	struct clanq_engine *eng = &ep->nic->engine;
	struct clanq_queue *q = &ep->oob.q;
	unsigned long flags;

	spin_lock_irqsave(&ep->oob.lock, flags);
	/* the producer's view: a nonsense consumer index reads as full */
	*oob_queued = q->mask - clanq_q_prod_space_for(q, q->mask);
	c->oob_sent = ep->oob.sent;
	c->oob_delivered = ep->oob.delivered;
	c->oob_dropped = ep->oob.dropped;
	spin_unlock_irqrestore(&ep->oob.lock, flags);
	spin_lock_irqsave(&ep->wq.lock, flags);
	c->events = ep->events;
	spin_unlock_irqrestore(&ep->wq.lock, flags);
	spin_lock_irqsave(&ep->tw.lock, flags);
	c->tw_fires = ep->tw.fires;
	c->tw_flushes = ep->tw.flushes;
	c->tw_spurious = ep->tw.spurious;
	spin_unlock_irqrestore(&ep->tw.lock, flags);
	spin_lock_irq(&eng->lock);
	c->rdma_kicks = ep->rdma.kicks;
	spin_unlock_irq(&eng->lock);
	c->rdma_reqs = READ_ONCE(ep->rdma.reqs);
	c->rdma_bytes = READ_ONCE(ep->rdma.bytes);
	c->rdma_errors = READ_ONCE(ep->rdma.errors);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kep_read_counters);

/* ---- CLANQ_IOC_EP_STATS ------------------------------------------------ */

struct clanq_stats_walk {
	struct clanq_ep_stat *recs;
	u32 room, n, skip, total;
};

/* The next record is wanted: skip is used up and there is room. */
static bool clanq_stats_take(struct clanq_stats_walk *w)
{
	w->total++;
	if (w->skip) {
		w->skip--;
		return false;
	}
	return w->n < w->room;
}

/* The next record, with what every record says of its context. */
static struct clanq_ep_stat *clanq_stats_rec(struct clanq_stats_walk *w,
					     struct clanq_ctx *ctx)
{
	struct clanq_ep_stat *r = &w->recs[w->n++];

	r->ctx_id = ctx->id;
	r->ctx_entries = atomic64_read(&ctx->entries);
	r->pid = pid_vnr(ctx->pid);
	r->uid = from_kuid_munged(current_user_ns(), ctx->uid);
	strscpy(r->comm, ctx->comm, sizeof(r->comm));
	return r;
}

/* Under ctx->lock: its own record, then its endpoints'. */
static void clanq_stats_ctx(struct clanq_stats_walk *w, struct clanq_ctx *ctx)
{
	struct clanq_ep_stat *r;
	struct clanq_kep *ep;

	/* only the records returned cost more than a count */
	if (w->skip > ctx->nr_eps || w->n == w->room) {
		u32 all = 1 + ctx->nr_eps;

		w->total += all;
		w->skip -= min(w->skip, all);
		return;
	}
	if (clanq_stats_take(w))
		clanq_stats_rec(w, ctx)->nr_eps = ctx->nr_eps;
	list_for_each_entry(ep, &ctx->eps, ctx_node) {
		if (!clanq_stats_take(w))
			continue;
		r = clanq_stats_rec(w, ctx);
		r->ep = ep->id;
		r->oob_slots = ep->oob.q.mask + 1;
		clanq_kep_read_counters(ep, &r->c, &r->oob_queued);
	}
}

int clanq_ioctl_ep_stats(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj, *c;
	struct clanq_ioc_ep_stats *a = arg;
	struct clanq_nic *nic = ctx->nic;
	/* noaudit: a user asking for its own is no denial worth logging */
	bool all = ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);
	kuid_t me = current_euid();
	struct clanq_stats_walk w = { .room = a->count, .skip = a->skip };
	int err = 0;

	if (!a->count || a->count > CLANQ_EP_STATS_MAX) {
		clanq_uerr(ctx, "EP_STATS: count %u, must be 1..%u", a->count,
			   CLANQ_EP_STATS_MAX);
		return -EINVAL;
	}
	w.recs = kvcalloc(a->count, sizeof(*w.recs), GFP_KERNEL_ACCOUNT);
	if (!w.recs)
		return -ENOMEM;
	/* walk the contexts; copy to user space only once nothing is held */
	mutex_lock(&nic->ctx_lock);
	list_for_each_entry(c, &nic->contexts, nic_node) {
		if (!all && !uid_eq(c->uid, me))
			continue;
		mutex_lock(&c->lock);
		clanq_stats_ctx(&w, c);
		mutex_unlock(&c->lock);
	}
	mutex_unlock(&nic->ctx_lock);
	if (w.n && copy_to_user(u64_to_user_ptr(a->buf), w.recs,
				array_size(w.n, sizeof(*w.recs))))
		err = -EFAULT;
	kvfree(w.recs);
	a->count = w.n;
	a->total = w.total;
	return err;
}

/* ---- sysfs: /sys/class/misc/clanqN/ ------------------------------------ */

/* The NIC of a sysfs attribute's device: ours, and a wire's (wire.c). */
struct clanq_nic *clanq_dev_nic(struct device *dev)
{
	/* misc_register() makes the miscdevice the device's drvdata */
	return clanq_nic_from_misc(dev_get_drvdata(dev));
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_dev_nic);

static ssize_t node_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%u\n", clanq_dev_nic(dev)->node);
}
static DEVICE_ATTR_RO(node);

static ssize_t wire_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	return clanq_wire_names_show(buf);
}
static DEVICE_ATTR_RO(wire);

/*
 * The nodes this one reaches: the other NICs of this kernel (loop wire)
 * on one line, then a line per peer on another host (peer.c).
 */
static ssize_t peers_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct clanq_nic *nic = clanq_dev_nic(dev), *peer;
	unsigned int i, n = clanq_nr_nics();
	int len = 0;

	for (i = 0; i < n; i++) {
		peer = clanq_nic_by_index(i);
		if (peer && peer != nic)
			len += sysfs_emit_at(buf, len, "%s%u", len ? " " : "",
					     peer->node);
	}
	len += sysfs_emit_at(buf, len, "\n");
	return clanq_peers_show(nic, buf, len);
}
static DEVICE_ATTR_RO(peers);

static ssize_t abi_version_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", CLANQ_ABI_VERSION);
}
static DEVICE_ATTR_RO(abi_version);

static ssize_t contexts_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  atomic_read(&clanq_dev_nic(dev)->nr_contexts));
}
static DEVICE_ATTR_RO(contexts);

static ssize_t endpoints_show(struct device *dev, struct device_attribute *attr,
			      char *buf)
{
	struct clanq_nic *nic = clanq_dev_nic(dev);
	struct clanq_kep *ep;
	unsigned long id;
	unsigned int n = 0;

	xa_for_each(&nic->eps, id, ep)
		n += !clanq_eps_group(ep);	/* a shared service's group */
	return sysfs_emit(buf, "%u\n", n);
}
static DEVICE_ATTR_RO(endpoints);

static struct attribute *clanq_nic_attrs[] = {
	&dev_attr_node.attr,
	&dev_attr_wire.attr,
	&dev_attr_peers.attr,
	&dev_attr_abi_version.attr,
	&dev_attr_contexts.attr,
	&dev_attr_endpoints.attr,
	NULL,
};

static const struct attribute_group clanq_nic_group = {
	.attrs = clanq_nic_attrs,
};

/*
 * limits/: the module parameters in force, beside the NIC they bound
 * (the same values as /sys/module/clanq/parameters/, which is where
 * root changes them).
 */
#define CLANQ_LIMIT_ATTR(name, var, fmt)				\
static ssize_t limit_##name##_show(struct device *dev,			\
				   struct device_attribute *attr,	\
				   char *buf)				\
{									\
	return sysfs_emit(buf, fmt "\n", READ_ONCE(var));		\
}									\
static struct device_attribute dev_attr_limit_##name =			\
	__ATTR(name, 0444, limit_##name##_show, NULL)

CLANQ_LIMIT_ATTR(max_eps, clanq_max_eps, "%u");
CLANQ_LIMIT_ATTR(max_oob_slots, clanq_max_oob_slots, "%u");
CLANQ_LIMIT_ATTR(max_rdma_slots, clanq_max_rdma_slots, "%u");
CLANQ_LIMIT_ATTR(max_evq_regs, clanq_max_evq_regs, "%u");
CLANQ_LIMIT_ATTR(max_ep_regs, clanq_max_ep_regs, "%u");
CLANQ_LIMIT_ATTR(max_tripwires, clanq_max_tripwires, "%u");
CLANQ_LIMIT_ATTR(max_oob_waiters, clanq_max_oob_waiters, "%u");
CLANQ_LIMIT_ATTR(max_regions, clanq_max_regions, "%u");
CLANQ_LIMIT_ATTR(max_aps, clanq_max_aps, "%u");
CLANQ_LIMIT_ATTR(max_region_bytes, clanq_max_region_bytes, "%lu");
CLANQ_LIMIT_ATTR(max_ctx_bytes, clanq_max_ctx_bytes, "%lu");
CLANQ_LIMIT_ATTR(max_user_bytes, clanq_max_user_bytes, "%lu");
CLANQ_LIMIT_ATTR(rdma_max_xfer, clanq_rdma_max_xfer, "%u");

static struct attribute *clanq_limit_attrs[] = {
	&dev_attr_limit_max_eps.attr,
	&dev_attr_limit_max_oob_slots.attr,
	&dev_attr_limit_max_rdma_slots.attr,
	&dev_attr_limit_max_evq_regs.attr,
	&dev_attr_limit_max_ep_regs.attr,
	&dev_attr_limit_max_tripwires.attr,
	&dev_attr_limit_max_oob_waiters.attr,
	&dev_attr_limit_max_regions.attr,
	&dev_attr_limit_max_aps.attr,
	&dev_attr_limit_max_region_bytes.attr,
	&dev_attr_limit_max_ctx_bytes.attr,
	&dev_attr_limit_max_user_bytes.attr,
	&dev_attr_limit_rdma_max_xfer.attr,
	NULL,
};

static const struct attribute_group clanq_limit_group = {
	.name = "limits",
	.attrs = clanq_limit_attrs,
};

/* statistics/: one file per NIC counter, as /sys/class/net/<if>/statistics/ */
#define CLANQ_STAT_ATTR(name, field)					\
static ssize_t stat_##name##_show(struct device *dev,			\
				  struct device_attribute *attr,	\
				  char *buf)				\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  atomic64_read(&clanq_dev_nic(dev)->stats.field)); \
}									\
static struct device_attribute dev_attr_stat_##name =			\
	__ATTR(name, 0444, stat_##name##_show, NULL)

CLANQ_STAT_ATTR(oob_sent, oob_sent);
CLANQ_STAT_ATTR(oob_delivered, oob_delivered);
CLANQ_STAT_ATTR(oob_dropped, oob_dropped);
CLANQ_STAT_ATTR(oob_no_endpoint, oob_no_ep);
CLANQ_STAT_ATTR(oob_unreachable, oob_unreachable);
CLANQ_STAT_ATTR(events, events);
CLANQ_STAT_ATTR(evq_overflows, evq_overflows);
CLANQ_STAT_ATTR(evq_blocks, evq_blocks);
CLANQ_STAT_ATTR(driver_entries, entries);
CLANQ_STAT_ATTR(rdma_reqs, rdma_reqs);
CLANQ_STAT_ATTR(rdma_bytes, rdma_bytes);
CLANQ_STAT_ATTR(rdma_errors, rdma_errors);
CLANQ_STAT_ATTR(rdma_kicks, rdma_kicks);
CLANQ_STAT_ATTR(rdma_turns, rdma_turns);
CLANQ_STAT_ATTR(rdma_inline_turns, rdma_inline_turns);
CLANQ_STAT_ATTR(rdma_splits, rdma_splits);
CLANQ_STAT_ATTR(rdma_fire_turns, rdma_fire_turns);
CLANQ_STAT_ATTR(regions_revoked, regions_revoked);
CLANQ_STAT_ATTR(tw_fires, tw_fires);
CLANQ_STAT_ATTR(tw_flushes, tw_flushes);
CLANQ_STAT_ATTR(tw_spurious, tw_spurious);

static struct attribute *clanq_stat_attrs[] = {
	&dev_attr_stat_oob_sent.attr,
	&dev_attr_stat_oob_delivered.attr,
	&dev_attr_stat_oob_dropped.attr,
	&dev_attr_stat_oob_no_endpoint.attr,
	&dev_attr_stat_oob_unreachable.attr,
	&dev_attr_stat_events.attr,
	&dev_attr_stat_evq_overflows.attr,
	&dev_attr_stat_evq_blocks.attr,
	&dev_attr_stat_driver_entries.attr,
	&dev_attr_stat_rdma_reqs.attr,
	&dev_attr_stat_rdma_bytes.attr,
	&dev_attr_stat_rdma_errors.attr,
	&dev_attr_stat_rdma_kicks.attr,
	&dev_attr_stat_rdma_turns.attr,
	&dev_attr_stat_rdma_inline_turns.attr,
	&dev_attr_stat_rdma_splits.attr,
	&dev_attr_stat_rdma_fire_turns.attr,
	&dev_attr_stat_regions_revoked.attr,
	&dev_attr_stat_tw_fires.attr,
	&dev_attr_stat_tw_flushes.attr,
	&dev_attr_stat_tw_spurious.attr,
	NULL,
};

static const struct attribute_group clanq_stat_group = {
	.name = "statistics",
	.attrs = clanq_stat_attrs,
};

/* misc_register() creates them with the device, atomically for udev */
const struct attribute_group *clanq_nic_groups[] = {
	&clanq_nic_group,
	&clanq_limit_group,
	&clanq_stat_group,
	NULL,
};
