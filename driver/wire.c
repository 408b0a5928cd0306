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
 * A wire to other hosts (at most one) has the admin members of
 * struct clanq_wire_ops too: the NIC's binding and peer table are
 * clanq.ko's (peer.c), and the wire is told when they change. Every
 * wire is found one way, by a walk of the list under RCU that takes a
 * reference on its owner, whatever it is asked for: a wire whose module
 * is going is asked nothing, and one being asked cannot go.
 */
#include <linux/rculist.h>
#include <linux/sysfs.h>

#include "clanq_drv.h"

static LIST_HEAD(clanq_wires);
static DEFINE_MUTEX(clanq_wires_lock);	/* writers of clanq_wires */

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

/*
 * The wire to other hosts, its owner referenced (clanq_wire_put()), or
 * NULL if none is loaded.
 */
static const struct clanq_wire_ops *clanq_wire_remote(void)
{
	const struct clanq_wire_ops *ops = NULL;
	struct clanq_wire *wire;

	rcu_read_lock();
	list_for_each_entry_rcu(wire, &clanq_wires, node) {
		if (wire->ops->bind && try_module_get(wire->ops->owner)) {
			ops = wire->ops;
			break;
		}
	}
	rcu_read_unlock();
	return ops;
}

/* Called with nic->peers.lock held (peer.c). */
int clanq_nic_bind(struct clanq_nic *nic, const char *dev, u32 port,
		   const char **why)
{
	const struct clanq_wire_ops *ops;
	int err = 0;

	lockdep_assert_held(&nic->peers.lock);
	ops = clanq_wire_remote();
	if (ops) {
		err = ops->bind(nic, dev, port, why);
		clanq_wire_put(ops);
	} else if (dev[0]) {
		*why = "no wire to other hosts is loaded";
		err = -EOPNOTSUPP;
	}
	return err;
}

/* Called with nic->peers.lock held (peer.c). */
void clanq_wire_peer_gone(struct clanq_nic *nic, struct clanq_kpeer *peer)
{
	const struct clanq_wire_ops *ops;

	lockdep_assert_held(&nic->peers.lock);
	ops = clanq_wire_remote();
	if (ops) {
		ops->peer_gone(nic, peer);
		clanq_wire_put(ops);
	}
}

/*
 * Exported region @r is being freed; its owner's ctx->lock is held. A
 * wire to other hosts makes sure no peer writes into it any more.
 */
void clanq_wire_region_gone(struct clanq_kregion *r)
{
	const struct clanq_wire_ops *ops = clanq_wire_remote();

	if (ops) {
		ops->region_gone(r);
		clanq_wire_put(ops);
	}
}

/* The port a peer added with port 0 is reached at; 0 if no wire says. */
u32 clanq_wire_port(void)
{
	const struct clanq_wire_ops *ops = clanq_wire_remote();
	u32 port = 0;

	if (ops) {
		port = ops->port;
		clanq_wire_put(ops);
	}
	return port;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_wire_port);

/* The name of the wire that reaches @node from @nic, "-" if none does. */
void clanq_wire_name_of(struct clanq_nic *nic, u32 node, char *buf, size_t len)
{
	const struct clanq_wire_ops *ops = clanq_wire_route(nic, node);

	strscpy(buf, ops ? ops->name : "-", len);
	clanq_wire_put(ops);
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

/*
 * Add @wire's attributes to every NIC's sysfs directory: all of them or
 * none. The NICs are clanq.ko's, and outlive any wire module.
 */
static int clanq_wire_add_attrs(const struct clanq_wire_ops *ops)
{
	struct clanq_nic *nic;
	unsigned int i, j;
	int err;

	if (!ops->nic_attrs)
		return 0;
	for (i = 0; (nic = clanq_nic_by_index(i)); i++) {
		err = sysfs_create_group(&nic->misc.this_device->kobj,
					 ops->nic_attrs);
		if (err) {
			for (j = 0; j < i; j++)
				sysfs_remove_group(&clanq_nic_by_index(j)->misc.this_device->kobj,
						   ops->nic_attrs);
			return err;
		}
	}
	return 0;
}

static void clanq_wire_del_attrs(const struct clanq_wire_ops *ops)
{
	struct clanq_nic *nic;
	unsigned int i;

	if (!ops->nic_attrs)
		return;
	for (i = 0; (nic = clanq_nic_by_index(i)); i++)
		sysfs_remove_group(&nic->misc.this_device->kobj, ops->nic_attrs);
}

/* 0, or -EBUSY if @wire is for other hosts and one is already there. */
int clanq_wire_register(struct clanq_wire *wire)
{
	struct clanq_wire *w;
	int err = 0;

	mutex_lock(&clanq_wires_lock);
	if (wire->ops->bind) {
		list_for_each_entry(w, &clanq_wires, node)
			if (w->ops->bind)
				err = -EBUSY;
	}
	if (!err)
		err = clanq_wire_add_attrs(wire->ops);
	if (!err)
		list_add_tail_rcu(&wire->node, &clanq_wires);
	mutex_unlock(&clanq_wires_lock);
	return err;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_wire_register);

void clanq_wire_unregister(struct clanq_wire *wire)
{
	mutex_lock(&clanq_wires_lock);
	list_del_rcu(&wire->node);
	clanq_wire_del_attrs(wire->ops);
	mutex_unlock(&clanq_wires_lock);
	synchronize_rcu();
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_wire_unregister);
