// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire (clanq_verbs.ko): soft NICs on different hosts, over the
 * kernel's RDMA core, as NVMe-oF, RDS and NFS/RDMA ride on it. We write
 * no transport: a peer node is reached through the in-kernel RDMA CM, on
 * an RC queue pair, on whatever RDMA device the NIC is bound to: a real
 * RDMA NIC, or rdma_rxe (RoCE over any Ethernet) or siw (iWARP over TCP).
 *
 * This file is the module: its parameters, the listener, the wire's
 * operations as the core calls them, what the wire does when the NIC's
 * peers or binding change (called with nic->peers.lock held), and RDMA
 * devices going away. verbs.h says which file holds what.
 *
 * Locking: clanq_v_lock (a spinlock) guards peer->conn and the list of
 * connections; conn->lock its state and free send slots; conn->post
 * (a mutex: siw's post_send sleeps) orders posting against teardown;
 * conn->cm_mutex orders the CM handler's setup against teardown. All
 * CM ids live in init_net.
 */
#include <linux/in.h>
#include <linux/module.h>
#include <linux/workqueue.h>

#include "verbs.h"

MODULE_IMPORT_NS(CLANQ_WIRE);

unsigned int clanq_v_port = 18525;
module_param_named(port, clanq_v_port, uint, 0444);
MODULE_PARM_DESC(port, "Port the wire listens on, and the one a peer added with port 0 is reached at (1..65535; default 18525)");

unsigned int clanq_v_connect_ms = 5000;
module_param_named(connect_ms, clanq_v_connect_ms, uint, 0644);
MODULE_PARM_DESC(connect_ms, "How long a send waits for a connection to a peer to be made (milliseconds; default 5000)");

unsigned int clanq_v_ack_ms = 3000;
module_param_named(ack_ms, clanq_v_ack_ms, uint, 0644);
MODULE_PARM_DESC(ack_ms, "How long sends may wait with not one of them acknowledged before the peer is taken for dead, checked at the next send; the provider's own retries decide first where they can (rxe restarts its retry timer at every send, so a steady sender would never see them run out) (milliseconds, 0: never; default 3000)");

bool clanq_v_write_imm = true;
module_param_named(write_imm, clanq_v_write_imm, bool, 0644);
MODULE_PARM_DESC(write_imm, "Tell the exporter what a write changed in the write itself (RDMA WRITE with immediate) where it can, instead of a second message after it (default on; iWARP devices never can)");

unsigned int clanq_v_held_max_mb = 64;
module_param_named(held_max_mb, clanq_v_held_max_mb, uint, 0644);
MODULE_PARM_DESC(held_max_mb, "How much memory of revoked regions one connection may hold until its queue pair is gone, on a device whose deregistration does not wait for its own accesses (siw); past it the connection ends (MiB; default 64)");

atomic_long_t clanq_v_held_pages = ATOMIC_LONG_INIT(0);

static int clanq_v_held_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lu\n",
			  atomic_long_read(&clanq_v_held_pages) << (PAGE_SHIFT - 10));
}

static const struct kernel_param_ops clanq_v_held_ops = {
	.get = clanq_v_held_get,
};

module_param_cb(held_kb, &clanq_v_held_ops, NULL, 0444);
MODULE_PARM_DESC(held_kb, "Read only: memory of revoked regions held now for connections whose device may still touch it (KiB)");

/*
 * What peers sent that was dropped, on every connection: UNREACHABLEs
 * that answer no message of ours (forged, or a second answer), messages
 * that do not decode, and messages of a type or nodes their connection
 * does not carry
 */
atomic64_t clanq_v_notices_forged = ATOMIC64_INIT(0);
atomic64_t clanq_v_rx_malformed = ATOMIC64_INIT(0);
atomic64_t clanq_v_rx_misdirected = ATOMIC64_INIT(0);

static int clanq_v_count_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read((atomic64_t *)kp->arg));
}

static const struct kernel_param_ops clanq_v_count_ops = {
	.get = clanq_v_count_get,
};

module_param_cb(notices_forged, &clanq_v_count_ops, &clanq_v_notices_forged, 0444);
MODULE_PARM_DESC(notices_forged, "Read only: UNREACHABLE messages from peers that answered no OOB message of ours (forged, too late or a second answer), dropped");
module_param_cb(rx_malformed, &clanq_v_count_ops, &clanq_v_rx_malformed, 0444);
MODULE_PARM_DESC(rx_malformed, "Read only: messages from peers that did not decode (wire_msg.h), dropped");
module_param_cb(rx_misdirected, &clanq_v_count_ops, &clanq_v_rx_misdirected, 0444);
MODULE_PARM_DESC(rx_misdirected, "Read only: messages from peers of a type or between nodes their connection does not carry, dropped");

#ifdef CLANQ_TEST_KNOBS
/* tests/integration/test_verbs.c "deaf": a hostile peer, in test builds only */
bool clanq_v_test_deaf;
module_param_named(test_deaf, clanq_v_test_deaf, bool, 0644);
MODULE_PARM_DESC(test_deaf, "Test builds only: take no more messages (receives are not posted again), as a peer that stops acknowledging does");

/* the pair stage's proof that verbs-hostile can fail: the old rule, on */
bool clanq_v_test_trust;
module_param_named(test_trust_notices, clanq_v_test_trust, bool, 0644);
MODULE_PARM_DESC(test_trust_notices, "Test builds only: deliver a peer's UNREACHABLE to the endpoint it names, unchecked (the rule before issue 28, which the pair stage shows failing)");
#endif

DEFINE_SPINLOCK(clanq_v_lock);
LIST_HEAD(clanq_v_conns);
struct workqueue_struct *clanq_v_wq;
/* where finished chunks are told to the engine: never behind a teardown */
struct workqueue_struct *clanq_v_done_wq;
/*
 * A grant (registering, posting) against a region's revocation, which
 * must not free an export a grant is still posting from
 */
DEFINE_MUTEX(clanq_v_export_mutex);
static struct rdma_cm_id *clanq_v_listener;
static bool clanq_v_unloading;	/* our exit: devices are not going away */

static bool clanq_v_reaches(struct clanq_nic *src, u32 node)
{
	return clanq_kpeer_known(src, node);
}

static int clanq_v_send_oob(struct clanq_nic *src, const struct clanq_addr *dst,
			    const struct clanq_oob_msg *msg)
{
	struct clanq_kpeer *peer = clanq_kpeer_lookup(src, dst->node);
	struct clanq_vconn *conn;
	int err;

	if (!peer)
		return -EHOSTUNREACH;
	conn = clanq_vconn_connect(src, peer);
	if (IS_ERR(conn)) {
		err = PTR_ERR(conn);
		goto out;
	}
	err = clanq_vconn_send(conn, CLANQ_WMSG_OOB, dst, msg, 0, true);
	if (!err)
		atomic64_inc(&peer->oob_sent);
	clanq_vconn_put(conn);
out:
	clanq_kpeer_put(peer);
	return err;
}

static bool clanq_v_of_nic(struct clanq_vconn *conn, const void *nic)
{
	return conn->nic == nic;
}

static bool clanq_v_of_peer(struct clanq_vconn *conn, const void *peer)
{
	return conn->peer == peer;
}

static bool clanq_v_on_device(struct clanq_vconn *conn, const void *dev)
{
	return conn->cm_id && conn->cm_id->device == dev;
}

static bool clanq_v_any(struct clanq_vconn *conn, const void *unused)
{
	return true;
}

/* The peer no longer holds its connection: the next use makes one. */
static void clanq_v_forget(struct clanq_kpeer *peer)
{
	struct clanq_vconn *conn;
	unsigned long flags;

	spin_lock_irqsave(&clanq_v_lock, flags);
	conn = peer->conn;
	peer->conn = NULL;
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	if (conn)
		clanq_vconn_put(conn);
}

static void clanq_v_forget_nic(struct clanq_nic *nic, u32 state)
{
	struct clanq_kpeer *peer;
	unsigned long node;

	xa_for_each(&nic->peers.xa, node, peer) {
		clanq_v_forget(peer);
		WRITE_ONCE(peer->state, state);
	}
}

static int clanq_v_bind(struct clanq_nic *nic, const char *dev, u32 port,
			const char **why)
{
	struct ib_device *ibdev;

	if (dev[0]) {
		ibdev = ib_device_get_by_name(dev, RDMA_DRIVER_UNKNOWN);
		if (!ibdev) {
			*why = "no RDMA device of that name";
			return -ENODEV;
		}
		if (!rdma_is_port_valid(ibdev, port)) {
			ib_device_put(ibdev);
			*why = "the device has no such port";
			return -EINVAL;
		}
		ib_device_put(ibdev);
	}
	/* a new binding: what went through the old one ends */
	clanq_vconn_kill_where(clanq_v_of_nic, nic, -ECONNABORTED);
	clanq_v_forget_nic(nic, CLANQ_PEER_IDLE);
	return 0;
}

static void clanq_v_peer_gone(struct clanq_nic *nic, struct clanq_kpeer *peer)
{
	clanq_vconn_kill_where(clanq_v_of_peer, peer, -ECONNABORTED);
	clanq_v_forget(peer);
}

/* sysfs clanqN/verbs: the NIC's binding, "unbound" or "dev port address" */
static ssize_t verbs_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct clanq_nic *nic = clanq_dev_nic(dev);
	ssize_t len;

	spin_lock(&nic->peers.bind_lock);
	if (!nic->peers.dev[0])
		len = sysfs_emit(buf, "unbound\n");
	else if (nic->peers.src_ipv4)
		len = sysfs_emit(buf, "%s %u %pI4\n", nic->peers.dev,
				 nic->peers.port, &nic->peers.src_ipv4);
	else
		len = sysfs_emit(buf, "%s %u -\n", nic->peers.dev, nic->peers.port);
	spin_unlock(&nic->peers.bind_lock);
	return len;
}
static DEVICE_ATTR_RO(verbs);

static struct attribute *clanq_v_nic_attrs[] = {
	&dev_attr_verbs.attr,
	NULL
};

static const struct attribute_group clanq_v_nic_group = {
	.attrs	= clanq_v_nic_attrs,
};

/* not const: port is the module parameter's, set at load */
static struct clanq_wire_ops clanq_v_ops = {
	.name		= "verbs",
	.owner		= THIS_MODULE,
	.reaches	= clanq_v_reaches,
	.send_oob	= clanq_v_send_oob,
	.import		= clanq_vimport_new,
	.rdma_write	= clanq_vwrite_chunk,
	.rdma_read	= clanq_vread_chunk,
	.rdma_atomic	= clanq_vatomic,
	.bind		= clanq_v_bind,
	.peer_gone	= clanq_v_peer_gone,
	.region_gone	= clanq_vexport_region_gone,
	.nic_attrs	= &clanq_v_nic_group,
};

static struct clanq_wire clanq_v_wire = {
	.ops	= &clanq_v_ops,
};

static int clanq_v_add_one(struct ib_device *dev)
{
	return 0;
}

/*
 * Clients are removed in the reverse order of registration, so this runs
 * before the RDMA CM's own removal, which waits for every id on the
 * device to be destroyed: ours are, here.
 */
static void clanq_v_remove_one(struct ib_device *dev, void *client_data)
{
	if (!READ_ONCE(clanq_v_unloading))
		pr_info("clanq: %s is going away: closing the connections over it\n",
			dev->name);
	clanq_vconn_kill_where(clanq_v_on_device, dev, -ENODEV);
}

static struct ib_client clanq_v_client = {
	.name	= "clanq",
	.add	= clanq_v_add_one,
	.remove	= clanq_v_remove_one,
};

static int clanq_v_listen(void)
{
	struct sockaddr_in any = {
		.sin_family	= AF_INET,
		.sin_port	= htons(clanq_v_port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct rdma_cm_id *id;
	int err;

	id = rdma_create_id(&init_net, clanq_vconn_cm_handler, NULL, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	err = rdma_bind_addr(id, (struct sockaddr *)&any);
	if (!err)
		err = rdma_listen(id, 64);
	if (err) {
		pr_err("clanq_verbs: cannot listen on port %u: %d\n",
		       clanq_v_port, err);
		rdma_destroy_id(id);
		return err;
	}
	clanq_v_listener = id;
	return 0;
}

static int __init clanq_verbs_init(void)
{
	int err;

	if (!clanq_v_port || clanq_v_port > 65535) {
		pr_err("clanq_verbs: port=%u, must be 1..65535\n", clanq_v_port);
		return -EINVAL;
	}
	clanq_v_ops.port = clanq_v_port;
	clanq_v_wq = alloc_workqueue("clanq_verbs", WQ_UNBOUND, 0);
	if (!clanq_v_wq)
		return -ENOMEM;
	clanq_v_done_wq = alloc_workqueue("clanq_verbs_done", WQ_UNBOUND, 0);
	if (!clanq_v_done_wq) {
		destroy_workqueue(clanq_v_wq);
		return -ENOMEM;
	}
	err = ib_register_client(&clanq_v_client);
	if (err)
		goto err_wq;
	err = clanq_v_listen();
	if (err)
		goto err_client;
	err = clanq_wire_register(&clanq_v_wire);
	if (err) {
		pr_err("clanq_verbs: cannot register the wire: %d\n", err);
		goto err_listen;
	}
	return 0;

err_listen:
	rdma_destroy_id(clanq_v_listener);
err_client:
	ib_unregister_client(&clanq_v_client);
err_wq:
	destroy_workqueue(clanq_v_done_wq);
	destroy_workqueue(clanq_v_wq);
	return err;
}

static void __exit clanq_verbs_exit(void)
{
	unsigned int i;
	struct clanq_nic *nic;

	/* nobody routes through us now (and nobody holds us: we are unloading) */
	WRITE_ONCE(clanq_v_unloading, true);
	clanq_wire_unregister(&clanq_v_wire);
	clanq_vhostile_stop();
	rdma_destroy_id(clanq_v_listener);
	clanq_vconn_kill_where(clanq_v_any, NULL, -ECONNABORTED);
	for (i = 0; (nic = clanq_nic_by_index(i)); i++) {
		mutex_lock(&nic->peers.lock);
		clanq_v_forget_nic(nic, CLANQ_PEER_IDLE);
		mutex_unlock(&nic->peers.lock);
	}
	ib_unregister_client(&clanq_v_client);
	destroy_workqueue(clanq_v_wq);
	/* the engine was told of every chunk: nothing holds us after */
	destroy_workqueue(clanq_v_done_wq);
	WARN_ON(!list_empty(&clanq_v_conns));
}

module_init(clanq_verbs_init);
module_exit(clanq_verbs_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("clanq: the verbs wire (soft NICs on other hosts, over the kernel's RDMA core)");
MODULE_AUTHOR("The clanq developers");
