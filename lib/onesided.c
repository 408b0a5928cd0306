// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: one-sided helpers over a connection (<clanq/net.h>, issue
 * 27): a region handed to the peer in one call each side, and tripwires
 * of a connection's own, reported by clanq_net_wait().
 *
 * Descriptors. A region goes to the peer as a REGION record of the
 * connection's ring (lib/ring.h), which no receive of a message takes
 * (they say -ENOMSG): a descriptor is never read as a message, nor a
 * message as a descriptor, and the order between them is the ring's.
 * The receiver copies the record out of the ring, hands its space back,
 * then checks every field (the peer is not trusted: decisions.md, "Trust
 * boundaries"); the driver checks the rest at the import (the key, the
 * rights the export grants, the window inside the region).
 *
 * Tripwires. A connection's tripwires are the net's endpoint's, beside
 * the one per connection on its ring: the endpoint has CLANQ_NET_TW_MAX
 * slots more than max_conns for them (lib/net.c), so they never take a
 * connection's. A fire sets its bit in the endpoint's fired bitmap and
 * posts an event on the net's evq; clanq_net_take_fired() finds the bit
 * in net->tw_by_bit, and the tripwire goes on its connection's fired
 * list, which clanq_net_report() reports as CLANQ_NET_TW until
 * clanq_conn_tw_fired() empties it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"

_Static_assert(sizeof(struct clanq_region_wire) == 48,
	       "the descriptor's size is the wire's (tests/unit/test_ring.c)");

/* A region this net exported for a descriptor: its key, its rights. */
struct clanq_net_export {
	int fd;
	uint32_t region;
	uint32_t rights;
	uint64_t key;
};

struct clanq_conn_tw {
	struct clanq_conn *c;
	struct clanq_tw tw;
	uint64_t cookie;
	struct clanq_conn_tw *next;		/* c->tws */
	struct clanq_conn_tw *next_fired;	/* c->tw_fired_head .. */
	bool fired;				/* on that list */
};

static struct clanq_net_export *clanq_net_export_find(struct clanq_net *net,
						       const struct clanq_region *r)
{
	uint32_t i;

	for (i = 0; i < net->nr_exports; i++)
		if (net->exports[i].fd == r->fd &&
		    net->exports[i].region == r->addr.id)
			return &net->exports[i];
	return NULL;
}

/*
 * r's export for a descriptor with rights: made now (the table grown
 * first, so a key is never lost to a failed allocation), or the one
 * this net made before.
 */
static int clanq_net_export(struct clanq_net *net, struct clanq_region *r,
			    uint32_t rights, uint64_t *key)
{
	struct clanq_net_export *e = clanq_net_export_find(net, r);
	int err;

	if (e) {
		if (rights & ~e->rights)
			return -EACCES;
		*key = e->key;
		return 0;
	}
	if (net->nr_exports == net->exports_cap) {
		uint32_t cap = net->exports_cap ? net->exports_cap * 2 : 8;

		e = realloc(net->exports, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		net->exports = e;
		net->exports_cap = cap;
	}
	err = clanq_region_export(r, rights, key);
	if (err)
		return err;
	e = &net->exports[net->nr_exports++];
	e->fd = r->fd;
	e->region = r->addr.id;
	e->rights = rights;
	e->key = *key;
	return 0;
}

int clanq_conn_send_region(struct clanq_conn *c, const struct clanq_region *r,
			   uint64_t off, uint64_t len, uint32_t rights,
			   unsigned int flags)
{
	struct clanq_region_wire w;
	struct clanq_region rr;
	uint64_t key;
	int err;

	if (!c || !r || (flags & ~CLANQ_MSG_DONTWAIT) || !rights ||
	    (rights & ~CLANQ_RIGHTS_ALL) || !len || off > r->size ||
	    len > r->size - off || r->addr.node != c->net->ep.addr.node)
		return -EINVAL;
	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;	/* the parent's connection (lib/fork.c) */
	if (c->state == CLANQ_CONN_CONNECTING || !c->rx_hdr)
		return -ENOTCONN;
	if (clanq_ring_max_msg(c->tx_cap) < sizeof(w))
		return -EMSGSIZE;	/* a ring of less than 128 bytes */
	rr = *r;	/* clanq_region_export() takes it not const */
	err = clanq_net_export(c->net, &rr, rights, &key);
	if (err)
		return err;
	memset(&w, 0, sizeof(w));
	w.magic = CLANQ_REGION_MAGIC;
	w.version = CLANQ_REGION_VERSION;
	w.rights = (uint16_t)rights;
	w.node = r->addr.node;
	w.region = r->addr.id;
	w.key = key;
	w.off = off;
	w.len = len;
	return clanq_conn_send_rec(c, CLANQ_REC_REGION, &w, sizeof(w), flags);
}

/*
 * What the peer said, checked before anything is done with it: ours to
 * import (the peer's node), and a window and rights that mean something.
 */
static int clanq_region_wire_check(const struct clanq_conn *c,
				   const struct clanq_region_wire *w)
{
	if (w->magic != CLANQ_REGION_MAGIC || w->version != CLANQ_REGION_VERSION ||
	    w->reserved[0] || w->reserved[1])
		return -EBADMSG;
	/* a region of another node would make us a confused deputy */
	if (w->node != c->peer.node || !w->region)
		return -EBADMSG;
	if (!w->rights || (w->rights & ~CLANQ_RIGHTS_ALL))
		return -EBADMSG;
	if (!w->len || w->off > UINT64_MAX - w->len)
		return -EBADMSG;
	return 0;
}

int clanq_conn_recv_region(struct clanq_conn *c, struct clanq_ap *ap,
			   struct clanq_region_desc *desc, unsigned int flags,
			   int64_t timeout_ns)
{
	struct clanq_ap_attr attr = { 0 };
	bool map;
	struct clanq_region_wire w;
	struct clanq_addr where;
	struct clanq_rec h;
	const void *data;
	int64_t saved;
	int err;

	if (!c || !ap || (flags & ~(CLANQ_MSG_DONTWAIT | CLANQ_REGION_NOMAP)))
		return -EINVAL;
	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	saved = c->recv_timeout_ns;
	if (timeout_ns >= 0)
		c->recv_timeout_ns = timeout_ns;
	err = clanq_conn_head_rec(c, &h, &data, flags & CLANQ_MSG_DONTWAIT);
	c->recv_timeout_ns = saved;
	if (err == 0)
		return -EPIPE;		/* end of stream */
	if (err < 0)
		return err;
	if (h.type != CLANQ_REC_REGION) {
		/* a message (or a large one's head): it stays queued */
		c->peek_size = 0;
		return -ENOMSG;
	}
	/* copy, hand the space back, then check: the peer may write on */
	memcpy(&w, data, sizeof(w));
	clanq_conn_take_rec(c);
	err = clanq_region_wire_check(c, &w);
	if (err)
		return err;
	where.node = w.node;
	where.id = w.region;
	/* a mapping only with READ (uapi.h); its sink page only with one */
	map = !(flags & CLANQ_REGION_NOMAP) && (w.rights & CLANQ_RIGHT_READ);
	if (map)
		attr.flags = CLANQ_AP_SINK;
	err = clanq_ap_import_attr(c->net->dev, ap, where, w.key, w.off, w.len,
				   w.rights, &attr);
	if (err)
		return err;
	if (map && ap->map_size) {
		err = clanq_ap_map(ap);
		if (err) {
			clanq_ap_close(ap);
			return err;
		}
	}
	if (desc) {
		memset(desc, 0, sizeof(*desc));
		desc->node = w.node;
		desc->region = w.region;
		desc->key = w.key;
		desc->off = w.off;
		desc->len = w.len;
		desc->rights = w.rights;
	}
	return 0;
}

/*
 * Connection tripwires.
 */

/* Slots of the net's endpoint that are not the connections' rings'. */
static uint32_t clanq_net_tw_room(const struct clanq_net *net)
{
	uint32_t slots = net->ep.tw_words * 64, rings = (net->max_conns + 63) / 64 * 64;

	return slots > rings ? slots - rings : 0;
}

int clanq_conn_tw_create(struct clanq_conn *c, struct clanq_conn_tw **twp,
			 const struct clanq_region *r, uint64_t off, uint64_t len,
			 uint32_t flags, uint64_t cookie)
{
	struct clanq_net *net;
	struct clanq_conn_tw *t;
	int err;

	if (!c || !twp || !r || (flags & ~CLANQ_TW_FLAGS))
		return -EINVAL;
	net = c->net;
	if (clanq_inherited(net->ep.fd))
		return -CLANQ_FORK_ERR;
	if (c->state == CLANQ_CONN_CONNECTING || !c->rx_hdr)
		return -ENOTCONN;
	if (net->nr_conn_tws >= clanq_net_tw_room(net))
		return -ENOSPC;
	if (!net->tw_by_bit) {
		net->tw_by_bit = calloc((size_t)net->ep.tw_words * 64,
					sizeof(*net->tw_by_bit));
		if (!net->tw_by_bit)
			return -ENOMEM;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	err = clanq_tw_create(&net->ep, &t->tw, r, off, len, flags);
	if (err) {
		free(t);
		return err;
	}
	/* the driver gives a bit no live tripwire of the endpoint holds */
	if (net->by_bit[t->tw.bit]) {
		clanq_tw_destroy(&t->tw);
		free(t);
		return -EPROTO;
	}
	/*
	 * One of ours that held it died with its region (the driver kills
	 * a region's tripwires and frees their bits): the bit is this one's
	 * now, and the dead one's destroy must leave it alone.
	 */
	t->c = c;
	t->cookie = cookie;
	t->next = c->tws;
	c->tws = t;
	net->tw_by_bit[t->tw.bit] = t;
	net->nr_conn_tws++;
	*twp = t;
	return 0;
}

void clanq_conn_tw_on_fire(struct clanq_net *net, struct clanq_conn_tw *t)
{
	struct clanq_conn *c = t->c;

	if (!t->fired) {
		t->fired = true;
		t->next_fired = NULL;
		if (c->tw_fired_tail)
			c->tw_fired_tail->next_fired = t;
		else
			c->tw_fired_head = t;
		c->tw_fired_tail = t;
	}
	clanq_net_hot(net, c);	/* the loop reports it */
}

unsigned int clanq_conn_tw_fired(struct clanq_conn *c, struct clanq_conn_tw **tws,
				 unsigned int max)
{
	struct clanq_conn_tw *t;
	unsigned int n = 0;

	if (!c || !tws)
		return 0;
	while (n < max && (t = c->tw_fired_head)) {
		c->tw_fired_head = t->next_fired;
		if (!c->tw_fired_head)
			c->tw_fired_tail = NULL;
		t->fired = false;
		t->next_fired = NULL;
		tws[n++] = t;
	}
	return n;
}

uint64_t clanq_conn_tw_cookie(const struct clanq_conn_tw *t)
{
	return t->cookie;
}

int clanq_conn_tw_arm(struct clanq_conn_tw *t)
{
	return t ? clanq_tw_arm(&t->tw) : -EINVAL;
}

int clanq_conn_tw_disarm(struct clanq_conn_tw *t)
{
	return t ? clanq_tw_disarm(&t->tw) : -EINVAL;
}

int clanq_conn_tw_destroy(struct clanq_conn_tw *t)
{
	struct clanq_conn *c;
	struct clanq_conn_tw **p;
	struct clanq_net *net;
	int err;

	if (!t)
		return -EINVAL;
	c = t->c;
	net = c->net;
	for (p = &c->tws; *p; p = &(*p)->next) {
		if (*p == t) {
			*p = t->next;
			break;
		}
	}
	if (t->fired) {
		struct clanq_conn_tw *prev = NULL;

		for (p = &c->tw_fired_head; *p; prev = *p, p = &(*p)->next_fired) {
			if (*p == t) {
				*p = t->next_fired;
				if (c->tw_fired_tail == t)
					c->tw_fired_tail = prev;
				break;
			}
		}
	}
	if (net->tw_by_bit[t->tw.bit] == t)
		net->tw_by_bit[t->tw.bit] = NULL;
	net->nr_conn_tws--;
	/*
	 * Its region freed first took it with it: the driver says -ENOENT,
	 * and its bit may be another tripwire's by now. Otherwise no fire
	 * comes after the destroy, and a bit it left set in the bitmap
	 * would be taken for the next tripwire given it: cleared.
	 */
	err = clanq_tw_destroy(&t->tw);
	if (!err)
		clanq_tw_clear(&t->tw);
	free(t);
	return err == -ENOENT ? 0 : err;
}

void clanq_conn_tw_drop_all(struct clanq_conn *c)
{
	while (c->tws)
		(void)clanq_conn_tw_destroy(c->tws);
}

void clanq_net_onesided_free(struct clanq_net *net)
{
	free(net->tw_by_bit);
	free(net->exports);
	net->tw_by_bit = NULL;
	net->exports = NULL;
	net->nr_exports = net->exports_cap = 0;
}
