// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs wire's importer: a region of a peer's node, asked for and
 * granted over the connection to it.
 *
 * The importer's aperture holds a remote region
 * (clanq_kregion_remote_init()) that cannot be mapped: the engine's
 * chunks go to write.c. An import lives as long as the connection it
 * was granted over: when that ends, or the exporter says REVOKED, it
 * is revoked.
 */
#include <linux/slab.h>

#include "verbs.h"

/* An import asked for is answered, or will never be; conn->lock held. */
void clanq_vimport_settle(struct clanq_vpending *p, int err)
{
	if (p->settled)
		return;
	p->settled = true;
	p->err = err;
	complete(&p->done);
}

/*
 * Revoke the imports granted over @conn: all of them, or those of region
 * @id (the exporter said REVOKED). Each once; process context.
 */
void clanq_vimport_revoke(struct clanq_vconn *conn, bool one,
			  u32 id)
{
	struct clanq_vimport *imp, *found;
	unsigned long flags;

	do {
		found = NULL;
		spin_lock_irqsave(&conn->lock, flags);
		list_for_each_entry(imp, &conn->imports, node) {
			if (!imp->revoked && (!one || imp->region.id == id) &&
			    clanq_kregion_tryget(&imp->region)) {
				imp->revoked = true;
				found = imp;
				break;
			}
		}
		spin_unlock_irqrestore(&conn->lock, flags);
		if (found) {
			clanq_kap_revoke_all(&found->region);
			clanq_kregion_put(&found->region);
		}
	} while (found);
}

/* A GRANT or REFUSE for one of our pending imports (CQ context). */
void clanq_vimport_granted(struct clanq_vconn *conn, u8 type,
			   const struct clanq_wmsg_rgn *g)
{
	struct clanq_vpending *p;
	unsigned long flags;
	bool bad = true;

	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(p, &conn->pending, node) {
		if (p->req != g->req || p->id != g->id || p->settled)
			continue;
		if (type == CLANQ_WMSG_REFUSE) {
			p->answered = true;
			clanq_vimport_settle(p, g->err);
			bad = false;
			break;
		}
		/* every GRANT of a region says the same but for its rkey */
		if (p->got && (g->len != p->grant.len || g->span != p->grant.span ||
			       g->first != p->grant.first ||
			       g->rights != p->grant.rights ||
			       g->nr_mrs != p->grant.nr_mrs))
			break;
		if (test_and_set_bit(g->mr, p->have))
			break;
		if (!p->got)
			p->grant = *g;
		p->rkeys[g->mr] = g->rkey;
		if (++p->got == g->nr_mrs) {
			p->answered = true;
			clanq_vimport_settle(p, 0);
		}
		bad = false;
		break;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (bad)
		pr_notice_ratelimited("%s: %s: peer %u: %s for region %u (request %u): not asked for, or not like the others; dropped\n",
				      conn->nic->name, clanq_vconn_devname(conn),
				      conn->peer->node,
				      type == CLANQ_WMSG_GRANT ? "grant" : "refusal",
				      g->id, g->req);
}

/* The last aperture let go of the import (clanq_kregion_put()). */
static void clanq_vimport_release(struct clanq_kregion *r)
{
	struct clanq_vimport *imp = container_of(r, struct clanq_vimport, region);
	struct clanq_vconn *conn = imp->conn;
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	list_del(&imp->node);
	spin_unlock_irqrestore(&conn->lock, flags);
	clanq_vconn_put(conn);
	kfree_rcu(imp, region.rcu);
}

/* The errors an exporter may give for an import; anything else is -EIO. */
static int clanq_vimport_refusal(int err)
{
	switch (err) {
	case -ENOENT:
	case -EACCES:
	case -E2BIG:
	case -ENOMEM:
	case -EOPNOTSUPP:
	case -ETIMEDOUT:
	case -ECONNRESET:
		return err;
	default:
		return -EIO;
	}
}

/*
 * Ask the exporter for region @addr (the key checked there), over the
 * connection to its node, and wait for its answer (clanq_v_connect_ms at
 * most). *@ended: it failed because that connection ended under it
 * (the exporter did not refuse).
 */
static struct clanq_kregion *clanq_vimport_ask(struct clanq_nic *src,
					       const struct clanq_addr *addr,
					       u64 key, bool *ended)
{
	struct clanq_kpeer *peer = clanq_kpeer_lookup(src, addr->node);
	struct clanq_vimport *imp = NULL;
	struct clanq_wmsg_rgn q = { .id = addr->id, .key = key };
	struct clanq_vpending *p;
	struct clanq_vconn *conn;
	unsigned long flags;
	long left;
	int err;

	if (!peer)
		return ERR_PTR(-EHOSTUNREACH);
	conn = clanq_vconn_connect(src, peer);
	clanq_kpeer_put(peer);
	if (IS_ERR(conn))
		return ERR_CAST(conn);
	err = -ENOMEM;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		goto out;
	init_completion(&p->done);
	p->id = addr->id;
	spin_lock_irqsave(&conn->lock, flags);
	p->req = ++conn->next_req;
	list_add_tail(&p->node, &conn->pending);
	if (conn->state != CLANQ_PEER_UP)
		clanq_vimport_settle(p, conn->error ?: -ECONNRESET);
	spin_unlock_irqrestore(&conn->lock, flags);

	q.req = p->req;
	err = clanq_vconn_send_region(conn, CLANQ_WMSG_IMPORT, &q, NULL, true);
	left = err ? 1 : wait_for_completion_killable_timeout(&p->done,
				msecs_to_jiffies(READ_ONCE(clanq_v_connect_ms)));
	spin_lock_irqsave(&conn->lock, flags);
	list_del(&p->node);
	if (!err)
		err = left < 0 ? left : !p->settled ? -ETIMEDOUT :
		       p->err ? clanq_vimport_refusal(p->err) : 0;
	/* ended, not for a peer that stopped answering: the answer is no */
	*ended = err && p->settled && !p->answered &&
		 conn->state != CLANQ_PEER_UP && conn->error != -ETIMEDOUT;
	spin_unlock_irqrestore(&conn->lock, flags);
	if (err)
		goto out_free;

	imp = kzalloc(struct_size(imp, rkeys, p->grant.nr_mrs), GFP_KERNEL_ACCOUNT);
	err = -ENOMEM;
	if (!imp)
		goto out_free;
	imp->nr_mrs = p->grant.nr_mrs;
	imp->span = p->grant.span;
	imp->first = p->grant.first;
	imp->imm_slot = (p->grant.flags & CLANQ_WMSG_GRANT_SLOT_MASK) >>
			CLANQ_WMSG_GRANT_SLOT_SHIFT;
	memcpy(imp->rkeys, p->rkeys, imp->nr_mrs * sizeof(u32));
	clanq_kregion_remote_init(&imp->region, src, addr->node, addr->id,
				  p->grant.len, key, p->grant.rights,
				  clanq_vimport_release);
	/* an import asking for atomics (CLANQ_AP_ATOMIC) is refused for this */
	if (conn->cm_id->device->attrs.atomic_cap < IB_ATOMIC_HCA)
		snprintf(imp->no_atomics, sizeof(imp->no_atomics),
			 "%s has no atomics (atomic_cap %d)",
			 clanq_vconn_devname(conn),
			 conn->cm_id->device->attrs.atomic_cap);
	else if (!(p->grant.flags & CLANQ_WMSG_GRANT_ATOMIC))
		snprintf(imp->no_atomics, sizeof(imp->no_atomics),
			 "node %u's RDMA device has no atomics",
			 addr->node);
	if (imp->no_atomics[0])
		imp->region.no_atomics = imp->no_atomics;
	imp->conn = conn;		/* our reference */
	kfree(p);
	/*
	 * On the list before the connection ends, it is revoked by the
	 * teardown; after, it is refused here (release takes it off).
	 */
	spin_lock_irqsave(&conn->lock, flags);
	list_add_tail(&imp->node, &conn->imports);
	err = conn->state == CLANQ_PEER_UP ? 0 : conn->error ?: -ECONNRESET;
	spin_unlock_irqrestore(&conn->lock, flags);
	if (err) {
		*ended = true;
		clanq_kregion_put(&imp->region);
		return ERR_PTR(err);
	}
	return &imp->region;

out_free:
	kfree(p);
out:
	clanq_vconn_put(conn);
	return ERR_PTR(err);
}

/*
 * An import of region @addr: asked over the connection to its node, and
 * once more over a new one if that connection ended under the request
 * (it was up when asked: on iWARP a revocation that raced a write resets
 * it a moment after the writes failed, and the next import must not get
 * that reset instead of the exporter's answer).
 */
struct clanq_kregion *clanq_vimport_new(struct clanq_nic *src,
					const struct clanq_addr *addr,
					u64 key)
{
	struct clanq_kregion *r;
	bool ended = false;

	r = clanq_vimport_ask(src, addr, key, &ended);
	if (IS_ERR(r) && ended && !fatal_signal_pending(current))
		r = clanq_vimport_ask(src, addr, key, &ended);
	return r;
}
