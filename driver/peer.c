// SPDX-License-Identifier: GPL-2.0
/*
 * Peers: the nodes on other hosts a NIC reaches, at an IPv4 address and
 * port, and the device its traffic to them leaves through (the binding).
 *
 * The table is the NIC's, here in clanq.ko, so that naming a peer does
 * not need the wire that carries traffic to it (for example the verbs
 * wire, clanq_verbs.ko), and outlives that wire's module. The wire is a
 * struct clanq_wire_ops with the admin members (wire.c); it keeps its
 * connection in peer->conn and reports its state and counts in the
 * peer, which is what PEER_LIST and sysfs show.
 *
 * Writers (the admin ioctls, the wire coming and going) hold the NIC's
 * peers.lock, a mutex, under which the wire is told; readers on the
 * send path look a peer up under RCU and take a reference. A peer is
 * freed after a grace period, once its last reference is gone.
 */
#include <linux/inet.h>
#include <linux/in.h>
#include <linux/capability.h>
#include <linux/uaccess.h>

#include "clanq_drv.h"

static const char *const clanq_peer_states[] = {
	[CLANQ_PEER_IDLE]	= "idle",
	[CLANQ_PEER_CONNECTING]	= "connecting",
	[CLANQ_PEER_UP]		= "up",
	[CLANQ_PEER_DOWN]	= "down",
};

void clanq_peers_init(struct clanq_nic *nic)
{
	mutex_init(&nic->peers.lock);
	spin_lock_init(&nic->peers.bind_lock);
	xa_init(&nic->peers.xa);
}

/* The NIC goes: the wire has dropped its connections already. */
void clanq_peers_fini(struct clanq_nic *nic)
{
	struct clanq_kpeer *peer;
	unsigned long node;

	xa_for_each(&nic->peers.xa, node, peer) {
		xa_erase(&nic->peers.xa, node);
		clanq_kpeer_put(peer);
	}
	xa_destroy(&nic->peers.xa);
}

static void clanq_kpeer_release(struct kref *ref)
{
	struct clanq_kpeer *peer = container_of(ref, struct clanq_kpeer, ref);

	kfree_rcu(peer, rcu);
}

void clanq_kpeer_put(struct clanq_kpeer *peer)
{
	kref_put(&peer->ref, clanq_kpeer_release);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kpeer_put);

/* Another reference on @peer, which the caller holds. */
void clanq_kpeer_get(struct clanq_kpeer *peer)
{
	kref_get(&peer->ref);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kpeer_get);

/* @node's peer entry on @nic, referenced, or NULL. Any context. */
struct clanq_kpeer *clanq_kpeer_lookup(struct clanq_nic *nic, u32 node)
{
	struct clanq_kpeer *peer;

	rcu_read_lock();
	peer = xa_load(&nic->peers.xa, node);
	if (peer && !kref_get_unless_zero(&peer->ref))
		peer = NULL;
	rcu_read_unlock();
	return peer;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kpeer_lookup);

/* Is @node a peer of @nic? For routing: no reference taken. */
bool clanq_kpeer_known(struct clanq_nic *nic, u32 node)
{
	bool known;

	rcu_read_lock();
	known = xa_load(&nic->peers.xa, node);
	rcu_read_unlock();
	return known;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kpeer_known);

void clanq_kpeer_set_state(struct clanq_kpeer *peer, u32 state, int err)
{
	WRITE_ONCE(peer->state, state);
	if (err)
		WRITE_ONCE(peer->last_error, err);
	if (state == CLANQ_PEER_UP)
		atomic_inc(&peer->connects);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kpeer_set_state);

/*
 * An address a peer can be at: one host, so not 0.0.0.0, not a
 * broadcast or multicast address.
 */
static bool clanq_kpeer_addr_ok(__be32 ip)
{
	return !ipv4_is_zeronet(ip) && !ipv4_is_lbcast(ip) &&
	       !ipv4_is_multicast(ip);
}

/*
 * clanq_kpeer_check() - is @p a peer that may be added to @nic?
 *
 * Return: 0, or -EINVAL with what was wrong in *@why.
 */
static int clanq_kpeer_check(struct clanq_nic *nic,
			     const struct clanq_ioc_peer *p, const char **why)
{
	if (p->node == CLANQ_NODE_INVALID) {
		*why = "node 0xffffffff names no node";
		return -EINVAL;
	}
	if (clanq_nic_by_node(p->node)) {
		*why = "node is one of this host's NICs (the loop wire's)";
		return -EINVAL;
	}
	if (!clanq_kpeer_addr_ok((__force __be32)p->ipv4)) {
		*why = "address is 0.0.0.0, broadcast or multicast";
		return -EINVAL;
	}
	if (p->port > 65535) {
		*why = "port > 65535";
		return -EINVAL;
	}
	return 0;
}

/* clanq_kpeer_add() - add @p to @nic's peers. Exported for KUnit. */
VISIBLE_IF_KUNIT
int clanq_kpeer_add(struct clanq_nic *nic, const struct clanq_ioc_peer *p,
		    const char **why)
{
	struct clanq_kpeer *peer;
	int err;

	err = clanq_kpeer_check(nic, p, why);
	if (err)
		return err;
	peer = kzalloc(sizeof(*peer), GFP_KERNEL);
	if (!peer)
		return -ENOMEM;
	kref_init(&peer->ref);
	peer->nic = nic;
	peer->node = p->node;
	peer->ipv4 = (__force __be32)p->ipv4;
	/* 0: the wire's, if one is loaded; else the wire's when it is */
	peer->port = p->port ?: clanq_wire_port();

	mutex_lock(&nic->peers.lock);
	if (nic->peers.nr >= CLANQ_PEERS_MAX) {
		*why = "the NIC has CLANQ_PEERS_MAX peers";
		err = -ENOSPC;
	} else {
		err = xa_insert(&nic->peers.xa, p->node, peer, GFP_KERNEL);
		if (err == -EBUSY) {
			*why = "node is a peer already";
			err = -EEXIST;
		} else if (err) {
			*why = "no memory";
		} else {
			nic->peers.nr++;
		}
	}
	mutex_unlock(&nic->peers.lock);
	if (err)
		kfree(peer);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kpeer_add);

/*
 * clanq_kpeer_del() - forget @node; its connection is closed first, so
 * nothing in flight outlives the entry without an error. Exported for
 * KUnit.
 */
VISIBLE_IF_KUNIT
int clanq_kpeer_del(struct clanq_nic *nic, u32 node)
{
	struct clanq_kpeer *peer;

	mutex_lock(&nic->peers.lock);
	peer = xa_load(&nic->peers.xa, node);
	if (!peer) {
		mutex_unlock(&nic->peers.lock);
		return -ENOENT;
	}
	xa_erase(&nic->peers.xa, node);
	nic->peers.nr--;
	clanq_wire_peer_gone(nic, peer);
	mutex_unlock(&nic->peers.lock);
	clanq_kpeer_put(peer);
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kpeer_del);

static void clanq_kpeer_stat(const struct clanq_kpeer *peer,
			     struct clanq_peer_stat *st)
{
	memset(st, 0, sizeof(*st));
	st->node = peer->node;
	st->ipv4 = (__force u32)peer->ipv4;
	st->port = peer->port;
	st->state = READ_ONCE(peer->state);
	st->last_error = READ_ONCE(peer->last_error);
	st->connects = atomic_read(&peer->connects);
	st->oob_sent = atomic64_read(&peer->oob_sent);
	st->oob_received = atomic64_read(&peer->oob_received);
	st->send_errors = atomic64_read(&peer->send_errors);
}

/*
 * clanq_kpeer_list() - up to @count peers of @nic in node order into
 * @recs, their number in all in *@total. Exported for KUnit.
 */
VISIBLE_IF_KUNIT
u32 clanq_kpeer_list(struct clanq_nic *nic, struct clanq_peer_stat *recs,
		     u32 count, u32 *total)
{
	struct clanq_kpeer *peer;
	unsigned long node;
	u32 n = 0;

	mutex_lock(&nic->peers.lock);
	xa_for_each(&nic->peers.xa, node, peer) {
		if (n == count)
			break;
		clanq_kpeer_stat(peer, &recs[n++]);
	}
	*total = nic->peers.nr;
	mutex_unlock(&nic->peers.lock);
	return n;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kpeer_list);

/* sysfs "peers", after the loop wire's lines: "node wire a.b.c.d:port state" */
int clanq_peers_show(struct clanq_nic *nic, char *buf, int len)
{
	struct clanq_kpeer *peer;
	unsigned long node;
	char wire[16];

	mutex_lock(&nic->peers.lock);
	xa_for_each(&nic->peers.xa, node, peer) {
		clanq_wire_name_of(nic, peer->node, wire, sizeof(wire));
		len += sysfs_emit_at(buf, len, "%u %s %pI4:%u %s\n", peer->node,
				     wire, &peer->ipv4, peer->port,
				     clanq_peer_states[READ_ONCE(peer->state) & 3]);
	}
	mutex_unlock(&nic->peers.lock);
	return len;
}

/* ---- the ioctls ---- */

static bool clanq_kpeer_admin(struct clanq_ctx *ctx, const char *cmd)
{
	if (capable(CAP_NET_ADMIN))
		return true;
	clanq_uerr(ctx, "%s: needs CAP_NET_ADMIN", cmd);
	return false;
}

int clanq_ioctl_wire_bind(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_wire_bind *b = arg;
	struct clanq_nic *nic = ctx->nic;
	const char *why = NULL;
	int err;

	if (!clanq_kpeer_admin(ctx, "WIRE_BIND"))
		return -EPERM;
	if (!memchr(b->dev, 0, sizeof(b->dev))) {
		clanq_uerr(ctx, "WIRE_BIND: device name not NUL-terminated");
		return -EINVAL;
	}
	if (b->dev[0] && !b->port) {
		clanq_uerr(ctx, "WIRE_BIND: port 0: ports count from 1");
		return -EINVAL;
	}
	mutex_lock(&nic->peers.lock);
	err = clanq_nic_bind(nic, b->dev, b->port, &why);
	if (!err) {
		spin_lock(&nic->peers.bind_lock);
		strscpy(nic->peers.dev, b->dev, sizeof(nic->peers.dev));
		nic->peers.port = b->dev[0] ? b->port : 0;
		nic->peers.src_ipv4 = 0;
		spin_unlock(&nic->peers.bind_lock);
	}
	mutex_unlock(&nic->peers.lock);
	if (err)
		pr_notice_ratelimited("%s: WIRE_BIND %s port %u: %s\n", nic->name,
				      b->dev, b->port, why ?: "refused");
	return err;
}

int clanq_ioctl_peer_add(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_peer *p = arg;
	const char *why = "";
	int err;

	if (!clanq_kpeer_admin(ctx, "PEER_ADD"))
		return -EPERM;
	err = clanq_kpeer_add(ctx->nic, p, &why);
	if (err)
		clanq_uerr(ctx, "PEER_ADD: node %u at %pI4:%u: %s", p->node,
			   &p->ipv4, p->port, why);
	return err;
}

int clanq_ioctl_peer_del(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_peer *p = arg;
	int err;

	if (!clanq_kpeer_admin(ctx, "PEER_DEL"))
		return -EPERM;
	if (p->ipv4 || p->port) {
		clanq_uerr(ctx, "PEER_DEL: only the node is named; ipv4 and port must be 0");
		return -EINVAL;
	}
	err = clanq_kpeer_del(ctx->nic, p->node);
	if (err)
		clanq_uerr(ctx, "PEER_DEL: node %u is not a peer", p->node);
	return err;
}

int clanq_ioctl_peer_list(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_peer_list *l = arg;
	struct clanq_peer_stat *recs;
	u32 n, total;
	int err = 0;

	if (!l->count || l->count > CLANQ_PEERS_MAX) {
		clanq_uerr(ctx, "PEER_LIST: count %u: want 1..%u", l->count,
			   CLANQ_PEERS_MAX);
		return -EINVAL;
	}
	recs = kvcalloc(l->count, sizeof(*recs), GFP_KERNEL);
	if (!recs)
		return -ENOMEM;
	n = clanq_kpeer_list(ctx->nic, recs, l->count, &total);
	if (n && copy_to_user(u64_to_user_ptr(l->buf), recs, n * sizeof(*recs)))
		err = -EFAULT;
	kvfree(recs);
	l->count = n;
	l->total = total;
	return err;
}
