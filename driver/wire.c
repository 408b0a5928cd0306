// SPDX-License-Identifier: GPL-2.0
/*
 * Wires: how bytes travel between soft NICs.
 *
 * The application/driver interface never depends on the wire. Each wire
 * implements the send side (struct clanq_wire_ops: send an OOB message,
 * resolve an import, write one chunk of an RDMA request); every wire ends
 * in the same receive path (rx.c: clanq_rx_oob(), clanq_rx_write()),
 * where drops are counted, events raised and tripwires checked, so a
 * message or a write behaves the same whatever carried it.
 *
 * The wire is chosen by the destination node: the loop wire for NICs of
 * this kernel, then every registered wire in registration order. An
 * aperture remembers the wire its import came through, so the engine
 * writes through the same one.
 *
 * Wires are registered from process context. A wire in a module of its
 * own (the verbs wire, clanq_verbs.ko) names it as its owner: routing
 * walks the list under RCU and takes a reference on the owner, which the
 * caller drops with clanq_wire_put() when it is done with the wire (an
 * aperture, when it is released). A KUnit test's fake wire has no owner
 * and is unregistered only once the test no longer sends through it.
 *
 * A wire to other hosts may have admin hooks (struct clanq_wire_admin):
 * the NIC's binding and peer table are clanq.ko's (peer.c), and the
 * wire is told when they change. The hooks are called with the NIC's
 * peers.lock held, then clanq_wire_admin_lock.
 */
#include <linux/rculist.h>
#include <linux/sysfs.h>

#include "clanq_drv.h"

static LIST_HEAD(clanq_wires);
static DEFINE_SPINLOCK(clanq_wires_lock);	/* writers of clanq_wires */
static DEFINE_MUTEX(clanq_wire_admin_lock);
static struct clanq_wire *clanq_admin_wire;	/* under clanq_wire_admin_lock */

/*
 * The wire that reaches @node from @src, or NULL if none does; its
 * owner referenced (clanq_wire_put()). A wire whose module is going
 * reaches nothing.
 */
const struct clanq_wire_ops *clanq_wire_route(struct clanq_nic *src, u32 node)
{
	const struct clanq_wire_ops *ops = NULL;
	struct clanq_wire *wire;

	if (clanq_wire_loop.reaches(src, node))
		return &clanq_wire_loop;
	rcu_read_lock();
	list_for_each_entry_rcu(wire, &clanq_wires, node) {
		if (wire->ops->reaches(src, node) &&
		    try_module_get(wire->ops->owner)) {
			ops = wire->ops;
			break;
		}
	}
	rcu_read_unlock();
	return ops;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_wire_route);

void clanq_wire_put(const struct clanq_wire_ops *ops)
{
	if (ops)
		module_put(ops->owner);
}

/* Called with nic->peers.lock held (peer.c). */
int clanq_wire_bind(struct clanq_nic *nic, const char *dev, u32 port,
		    const char **why)
{
	int err = 0;

	lockdep_assert_held(&nic->peers.lock);
	mutex_lock(&clanq_wire_admin_lock);
	if (clanq_admin_wire) {
		err = clanq_admin_wire->admin->bind(nic, dev, port, why);
	} else if (dev[0]) {
		*why = "no wire to other hosts is loaded (modprobe clanq_verbs)";
		err = -EOPNOTSUPP;
	}
	mutex_unlock(&clanq_wire_admin_lock);
	return err;
}

/* Called with nic->peers.lock held (peer.c). */
void clanq_wire_peer_gone(struct clanq_nic *nic, struct clanq_peer *peer)
{
	lockdep_assert_held(&nic->peers.lock);
	mutex_lock(&clanq_wire_admin_lock);
	if (clanq_admin_wire)
		clanq_admin_wire->admin->peer_gone(nic, peer);
	mutex_unlock(&clanq_wire_admin_lock);
}

/*
 * Exported region @r is being freed; its owner's ctx->lock is held. A
 * wire to other hosts makes sure no peer writes into it any more.
 *
 * Not under clanq_wire_admin_lock: that is held while a binding waits
 * for connections to be torn down, which takes the RDMA CM's and the
 * provider's locks (siw: a socket's, under which mmap_lock is taken, and
 * ctx->lock under that). The wire is found as routing finds it, under
 * RCU, and held by its module while it works.
 */
void clanq_wire_region_gone(struct clanq_kregion *r)
{
	struct clanq_wire *wire, *found = NULL;

	rcu_read_lock();
	list_for_each_entry_rcu(wire, &clanq_wires, node) {
		if (wire->admin && wire->admin->region_gone &&
		    try_module_get(wire->ops->owner)) {
			found = wire;
			break;
		}
	}
	rcu_read_unlock();
	if (found) {
		found->admin->region_gone(r);
		module_put(found->ops->owner);
	}
}

/* sysfs "wire": the wires this node's traffic may take, in routing order */
ssize_t clanq_wire_names_show(char *buf)
{
	struct clanq_wire *wire;
	int len;

	len = sysfs_emit(buf, "%s", clanq_wire_loop.name);
	rcu_read_lock();
	list_for_each_entry_rcu(wire, &clanq_wires, node)
		len += sysfs_emit_at(buf, len, " %s", wire->ops->name);
	rcu_read_unlock();
	return len + sysfs_emit_at(buf, len, "\n");
}

void clanq_wire_register(struct clanq_wire *wire)
{
	if (wire->admin) {
		mutex_lock(&clanq_wire_admin_lock);
		WARN_ON(clanq_admin_wire);
		clanq_admin_wire = wire;
		mutex_unlock(&clanq_wire_admin_lock);
	}
	spin_lock(&clanq_wires_lock);
	list_add_tail_rcu(&wire->node, &clanq_wires);
	spin_unlock(&clanq_wires_lock);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_wire_register);

void clanq_wire_unregister(struct clanq_wire *wire)
{
	spin_lock(&clanq_wires_lock);
	list_del_rcu(&wire->node);
	spin_unlock(&clanq_wires_lock);
	synchronize_rcu();
	if (wire->admin) {
		mutex_lock(&clanq_wire_admin_lock);
		clanq_admin_wire = NULL;
		mutex_unlock(&clanq_wire_admin_lock);
	}
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_wire_unregister);
