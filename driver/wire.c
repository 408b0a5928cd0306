// SPDX-License-Identifier: GPL-2.0
/*
 * Wires: how bytes travel between soft NICs (DESIGN section 1).
 *
 * The application/driver interface never depends on the wire. Each wire
 * implements the send side (struct clanq_wire_ops: send an OOB message,
 * resolve an import, write one chunk of an RDMA request); every wire ends
 * in the same receive path (clanq_rx_oob() in oob.c, clanq_rx_write() in
 * region.c), where drops are counted, events raised and, later,
 * tripwires checked, so a message or a write behaves the same whatever
 * carried it.
 *
 * The wire is chosen by the destination node: the loop wire for NICs of
 * this kernel, then every registered wire in registration order. An
 * aperture remembers the wire its import came through, so the engine
 * writes through the same one.
 *
 * Wires are registered from process context and live as long as what
 * they are part of (the module; a KUnit test's fake wire is
 * unregistered only once the test no longer sends through it). Routing
 * walks the list under RCU.
 */
#include <linux/rculist.h>
#include <linux/sysfs.h>

#include "clanq_drv.h"

static LIST_HEAD(clanq_wires);
static DEFINE_SPINLOCK(clanq_wires_lock);	/* writers of clanq_wires */

/* The wire that reaches @node, or NULL if none does. */
const struct clanq_wire_ops *clanq_wire_route(u32 node)
{
	const struct clanq_wire_ops *ops = NULL;
	struct clanq_wire *wire;

	if (clanq_wire_loop.reaches(node))
		return &clanq_wire_loop;
	rcu_read_lock();
	list_for_each_entry_rcu(wire, &clanq_wires, node) {
		if (wire->ops->reaches(node)) {
			ops = wire->ops;
			break;
		}
	}
	rcu_read_unlock();
	return ops;
}
EXPORT_SYMBOL_CLANQ_KUNIT(clanq_wire_route);

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
	spin_lock(&clanq_wires_lock);
	list_add_tail_rcu(&wire->node, &clanq_wires);
	spin_unlock(&clanq_wires_lock);
}
EXPORT_SYMBOL_CLANQ_KUNIT(clanq_wire_register);

void clanq_wire_unregister(struct clanq_wire *wire)
{
	spin_lock(&clanq_wires_lock);
	list_del_rcu(&wire->node);
	spin_unlock(&clanq_wires_lock);
	synchronize_rcu();
}
EXPORT_SYMBOL_CLANQ_KUNIT(clanq_wire_unregister);
