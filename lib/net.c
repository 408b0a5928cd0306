// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: the net (one thread's connections on one NIC), listeners,
 * and the server's loop, clanq_net_wait().
 *
 * Everything a net waits for arrives through its event queue: its
 * endpoint's OOB messages (handshake answers, driver notices) and
 * tripwires (one per connection, on its ring's header), and each
 * listener's OOB messages (CONNECTs). A connection is either "hot"
 * (disarmed, on net->hot, polled by the loop) or armed (its peer's next
 * write fires its tripwire): so a peer writing to a connection we poll
 * makes no system call, and one we sleep on wakes us. The loop arms the
 * hot connections only when it is about to block, after its spin, in
 * the system call that blocks (clanq_net_block_armed()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>

#include "handshake.h"
#include "net_internal.h"
#include "spin.h"

#define CLANQ_NET_MAX_CONNS_DEFAULT	1024
#define CLANQ_NET_OOB_SLOTS_DEFAULT	256

static int clanq_net_random_fill(void *buf, size_t len)
{
	ssize_t n = getrandom(buf, len, 0);

	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? -errno : -EIO;
}

/*
 * A nonce has to be unguessable to everyone else and new per connection:
 * 32 from one getrandom() (256 bytes, the most it returns whole and
 * uninterrupted) are as good as a call each. A forked child never
 * connects or accepts on its parent's net (clanq_inherited()), so no two
 * processes draw from one pool.
 */
int clanq_net_nonce(struct clanq_net *net, uint64_t *v)
{
	int err;

	if (!net->nr_nonces) {
		err = clanq_net_random_fill(net->nonces, sizeof(net->nonces));
		if (err)
			return err;
		net->nr_nonces = sizeof(net->nonces) / sizeof(net->nonces[0]);
	}
	*v = net->nonces[--net->nr_nonces];
	return 0;
}

static int clanq_net_init(struct clanq_net *net, struct clanq_dev *dev,
			  const struct clanq_net_attr *attr)
{
	unsigned int max = attr && attr->max_conns ? attr->max_conns :
						     CLANQ_NET_MAX_CONNS_DEFAULT;
	struct clanq_ep_attr ea = {
		.oob_slots = attr && attr->oob_slots ? attr->oob_slots :
						       CLANQ_NET_OOB_SLOTS_DEFAULT,
		/*
		 * A tripwire per connection, its bit in the fired bitmap,
		 * and CLANQ_NET_TW_MAX for the connections' own (onesided.c)
		 */
		.tw_slots = (max + 63) / 64 * 64 + CLANQ_NET_TW_MAX,
	};
	int err;

	if (max > (1u << 20))
		return -EINVAL;
	memset(net, 0, sizeof(*net));
	net->dev = dev;
	net->max_conns = max;
	net->spin_ns = clanq_spin_default(CLANQ_NET_SPIN_NS_DEFAULT);
	net->conns = calloc(max, sizeof(*net->conns));
	net->by_bit = calloc(ea.tw_slots, sizeof(*net->by_bit));
	net->gen = calloc(max, sizeof(*net->gen));
	for (net->acc_mask = 1; net->acc_mask < max; net->acc_mask <<= 1)
		;
	net->acc_head = calloc(net->acc_mask, sizeof(*net->acc_head));
	net->acc_mask--;
	if (!net->conns || !net->by_bit || !net->gen || !net->acc_head) {
		err = -ENOMEM;
		goto err_free;
	}
	err = clanq_ep_create_attr(dev, &net->ep, &ea);
	if (err == -EINVAL) {
		/* over max_tripwires with them: no connection tripwires */
		ea.tw_slots -= CLANQ_NET_TW_MAX;
		err = clanq_ep_create_attr(dev, &net->ep, &ea);
	}
	if (err)
		goto err_free;
	/* a registration per listener, plus ours, plus the application's */
	err = clanq_evq_create(dev, &net->evq, 64);
	if (err)
		goto err_ep;
	clanq_evq_set_spin(&net->evq, 0);	/* we spin ourselves */
	net->ep_reg = clanq_evq_register(&net->evq, &net->ep,
					 CLANQ_EV_OOB | CLANQ_EV_TRIPWIRE,
					 (uint64_t)(uintptr_t)net);
	if (net->ep_reg < 0) {
		err = net->ep_reg;
		goto err_evq;
	}
	return 0;

err_evq:
	clanq_evq_destroy(&net->evq);
err_ep:
	clanq_ep_destroy(&net->ep);
err_free:
	free(net->conns);
	free(net->by_bit);
	free(net->gen);
	free(net->acc_head);
	return err;
}

int clanq_net_open(struct clanq_net **netp, struct clanq_dev *dev,
		   const struct clanq_net_attr *attr)
{
	struct clanq_net *net = calloc(1, sizeof(*net));
	int err;

	if (!net)
		return -ENOMEM;
	err = clanq_net_init(net, dev, attr);
	if (err) {
		free(net);
		return err;
	}
	*netp = net;
	return 0;
}

int clanq_net_close(struct clanq_net *net)
{
	uint32_t i;

	while (net->listeners)
		clanq_listener_close(net->listeners);
	for (i = 0; i < net->max_conns; i++)
		if (net->conns[i])
			clanq_conn_close(net->conns[i]);
	clanq_net_onesided_free(net);
	clanq_evq_destroy(&net->evq);
	clanq_ep_destroy(&net->ep);
	free(net->conns);
	free(net->by_bit);
	free(net->gen);
	free(net->acc_head);
	free(net->stash);
	free(net->arms);
	free(net->arming);
	free(net);
	return 0;
}

void clanq_net_set_spin(struct clanq_net *net, uint64_t spin_ns)
{
	net->spin_ns = spin_ns;
}

void clanq_net_stats(const struct clanq_net *net, struct clanq_net_stats *stats)
{
	*stats = net->stats;
}

unsigned int clanq_net_nr_conns(const struct clanq_net *net)
{
	return net->nr_conns;
}

struct clanq_evq *clanq_net_evq(struct clanq_net *net)
{
	return &net->evq;
}

struct clanq_addr clanq_net_addr(const struct clanq_net *net)
{
	return net->ep.addr;
}

int clanq_net_slot_get(struct clanq_net *net, struct clanq_conn *c)
{
	uint32_t i, s;

	if (net->nr_conns >= net->max_conns)
		return -ENOSPC;
	for (i = 0; i < net->max_conns; i++) {
		s = (net->free_hint + i) % net->max_conns;
		if (!net->conns[s]) {
			net->conns[s] = c;
			net->gen[s]++;
			net->nr_conns++;
			net->free_hint = s + 1;
			c->slot = s;
			return 0;
		}
	}
	return -ENOSPC;
}

void clanq_net_slot_put(struct clanq_net *net, struct clanq_conn *c)
{
	if (c->slot < net->max_conns && net->conns[c->slot] == c) {
		net->conns[c->slot] = NULL;
		net->gen[c->slot]++;	/* a late notice for it finds nobody */
		net->nr_conns--;
	}
}

struct clanq_conn *clanq_net_conn(struct clanq_net *net, uint32_t slot)
{
	return slot < net->max_conns ? net->conns[slot] : NULL;
}

/* Into the hot ring, at the back of the round: just before the cursor. */
void clanq_net_hot(struct clanq_net *net, struct clanq_conn *c)
{
	struct clanq_conn *first = net->hot;

	if (c->hot)
		return;
	c->hot = true;
	net->nr_hot++;
	if (!first) {
		c->next_hot = c->prev_hot = c;
		net->hot = c;
		return;
	}
	c->next_hot = first;
	c->prev_hot = first->prev_hot;
	first->prev_hot->next_hot = c;
	first->prev_hot = c;
}

void clanq_net_unhot(struct clanq_net *net, struct clanq_conn *c)
{
	if (!c->hot)
		return;
	if (c->next_hot == c) {
		net->hot = NULL;
	} else {
		c->prev_hot->next_hot = c->next_hot;
		c->next_hot->prev_hot = c->prev_hot;
		if (net->hot == c)
			net->hot = c->next_hot;
	}
	net->nr_hot--;
	c->hot = false;
	c->next_hot = c->prev_hot = NULL;
}

/* A notice for one of our connections: cookie = generation, slot. */
static void clanq_net_revoked(struct clanq_net *net, const struct clanq_oob_msg *m)
{
	struct clanq_oob_revoked rv;
	struct clanq_conn *c;

	memcpy(&rv, m->payload, sizeof(rv));
	c = clanq_net_conn(net, (uint32_t)rv.cookie);
	if (m->len != sizeof(rv) || !c ||
	    clanq_conn_notice_cookie(net, c->slot) != rv.cookie || rv.ap != c->tx.id) {
		net->stats.ignored++;
		return;
	}
	clanq_conn_on_revoked(c);
}

/*
 * A notice may have been dropped (our OOB queue was full): ask the
 * driver, one AP_FLUSH per connection, which peers are still there.
 *
 * At most one pass per CLANQ_NET_PROBE_NS (issue 28, item 7): anyone can
 * send to the net's endpoint, so a peer that keeps its queue full moves
 * the drop counter as often as it likes, and a pass per move would be
 * a system call per connection per message it sends. A drop seen before
 * the pass is due leaves it owed (the counter still differs from
 * oob_dropped_seen): the next call after probe_due makes it, and every
 * wait wakes by then (clanq_net_probe_wake()). Counted: stats.probes.
 */
static void clanq_net_probe(struct clanq_net *net)
{
	uint64_t dropped = clanq_ep_dropped(&net->ep), now;
	uint32_t i;

	if (dropped == net->oob_dropped_seen)
		return;
	now = clanq_now_ns();
	if (now < net->probe_due)
		return;
	net->oob_dropped_seen = dropped;
	net->probe_due = now + CLANQ_NET_PROBE_NS;
	net->stats.probes++;
	for (i = 0; i < net->max_conns; i++)
		if (net->conns[i])
			clanq_conn_probe(net->conns[i]);
}

/* The handshake answers and notices on the net's endpoint. */
static void clanq_net_drain_oob(struct clanq_net *net)
{
	struct clanq_oob_msg m;
	struct clanq_conn *c;
	uint32_t slot;

	while (!clanq_oob_recv(&net->ep, &m)) {
		switch (m.type) {
		case CLANQ_OOB_REVOKED:
			clanq_net_revoked(net, &m);
			continue;
		case CLANQ_HS_ACCEPT:
		case CLANQ_HS_REFUSE:
			/* both start with magic, then the client's slot */
			memcpy(&slot, m.payload + 4, sizeof(slot));
			break;
		case CLANQ_OOB_UNREACHABLE:
			/* the head of our CONNECT: magic, slot, ... */
			memcpy(&slot, m.payload + 8 + 4, sizeof(slot));
			break;
		default:
			net->stats.ignored++;
			continue;
		}
		c = clanq_net_conn(net, slot);
		if (c && c->hs)
			clanq_conn_hs_msg(c, &m);
		else
			net->stats.ignored++;
	}
	clanq_net_probe(net);
}

/* Tripwires that fired: those connections are disarmed now, and hot. */
static void clanq_net_take_fired(struct clanq_net *net)
{
	struct clanq_conn *c;
	uint64_t bits;
	uint32_t w;
	int b;

	for (w = 0; w < net->ep.tw_words; w++) {
		bits = clanq_ep_tw_take(&net->ep, w);
		while (bits) {
			b = __builtin_ctzll(bits);
			bits &= bits - 1;
			c = net->by_bit[w * 64 + b];
			if (c) {
				c->armed = false;
				clanq_net_hot(net, c);
			} else if (net->tw_by_bit && net->tw_by_bit[w * 64 + b]) {
				clanq_conn_tw_on_fire(net, net->tw_by_bit[w * 64 + b]);
			}
		}
	}
}

void clanq_net_progress(struct clanq_net *net)
{
	struct clanq_listener *l;

	if (clanq_inherited(net->ep.fd))
		return;
	clanq_net_drain_oob(net);
	clanq_net_take_fired(net);
	clanq_net_drain_rdma(net);
	for (l = net->listeners; l; l = l->next)
		clanq_listener_intake(l);
	clanq_net_tick_connects(net);
}

void clanq_net_handle(struct clanq_net *net, const struct clanq_event *ev)
{
	struct clanq_listener *l;
	struct clanq_event *s;

	if ((int)ev->reg == net->ep_reg) {
		clanq_net_drain_oob(net);
		clanq_net_take_fired(net);
		return;
	}
	for (l = net->listeners; l; l = l->next) {
		if ((int)ev->reg == l->ep_reg) {
			clanq_listener_intake(l);
			return;
		}
	}
	/* the application's: keep it for clanq_net_wait() */
	if (net->nr_stash == net->stash_cap) {
		uint32_t cap = net->stash_cap ? net->stash_cap * 2 : 16;

		s = realloc(net->stash, cap * sizeof(*s));
		if (!s)
			return;		/* its source is still there to drain */
		net->stash = s;
		net->stash_cap = cap;
	}
	net->stash[net->nr_stash++] = *ev;
}

/*
 * Wait in the driver for anything of the net (no spin: the callers
 * spin on what they wait for), handle it, and return. 0, -ETIMEDOUT at
 * the deadline, -EINTR.
 */
int clanq_net_block(struct clanq_net *net, uint64_t deadline)
{
	uint64_t now = clanq_now_ns(), wake = clanq_net_probe_wake(net, deadline);
	struct clanq_event ev;
	int err;

	if (wake < deadline && now >= wake) {
		clanq_net_probe(net);	/* owed and due */
		return 0;
	}
	if (deadline != ~0ull && now >= deadline)
		return -ETIMEDOUT;
	net->stats.blocks++;
	err = clanq_evq_wait(&net->evq, &ev,
			     wake == ~0ull ? -1 : (int64_t)(wake - now));
	if (err == -ETIMEDOUT && wake < deadline) {
		clanq_net_probe(net);
		return 0;
	}
	if (err)
		return err;
	clanq_net_handle(net, &ev);
	/* take whatever else came at once */
	while (!clanq_evq_poll(&net->evq, &ev))
		clanq_net_handle(net, &ev);
	return 0;
}

/*
 * Listeners.
 */

void clanq_listener_intake(struct clanq_listener *l)
{
	struct clanq_net *net = l->net;
	struct clanq_hs_backlog *b = l->backlog;
	struct clanq_hs_connect c;
	struct clanq_hs_refuse r;
	struct clanq_oob_msg m;

	while (!clanq_oob_recv(&l->ep, &m)) {
		if (clanq_hs_parse_connect(&m, &c)) {
			l->ignored++;
			net->stats.ignored++;
			continue;
		}
		/*
		 * A retransmission whose ACCEPT was lost, or (on a wire that
		 * reorders) the first copy after a retransmission was
		 * accepted: answer it again, do not accept it twice.
		 */
		if (clanq_conn_resend_accept(net, m.src, c.conn, c.nonce))
			continue;
		switch (clanq_hs_backlog_add(b, &m)) {
		case CLANQ_HS_QUEUED:
			break;
		case CLANQ_HS_DUP:
			net->stats.ignored++;
			break;
		case CLANQ_HS_FULL:
			memset(&r, 0, sizeof(r));
			r.magic = CLANQ_HS_MAGIC;
			r.conn = c.conn;
			r.nonce = c.nonce;
			r.err = -ECONNREFUSED;
			(void)clanq_oob_send(&l->ep, m.src, CLANQ_HS_REFUSE, &r,
					     sizeof(r));
			l->refused++;
			net->stats.refused++;
			break;
		case CLANQ_HS_BAD:
			l->ignored++;
			net->stats.ignored++;
			break;
		}
	}
}

/*
 * A shared listener (CLANQ_LISTEN_SHARED) is one member of the driver's
 * group for the service: each CONNECT reaches one member, the same one
 * for every copy of it (clanq/uapi.h: the hash covers the CONNECT's
 * first 16 bytes, its magic, conn and nonce), so the retransmissions
 * clanq_listener_intake() answers again come to the net that accepted.
 */
static int clanq_listener_init(struct clanq_net *net, struct clanq_listener *l,
			       unsigned int service, unsigned int backlog,
			       uint32_t flags, uint32_t max_rx_ring)
{
	struct clanq_ep_attr ea = { .oob_slots = 256, .service = service };
	struct clanq_hs_backlog *b;
	int err;

	if (!service || service > CLANQ_SERVICE_MAX || !backlog ||
	    backlog > 65536 || (flags & ~CLANQ_LISTEN_FLAGS) ||
	    (max_rx_ring && !clanq_ring_cap_ok(max_rx_ring)))
		return -EINVAL;
	memset(l, 0, sizeof(*l));
	b = calloc(1, sizeof(*b));
	if (b)
		b->q = calloc(backlog, sizeof(*b->q));
	if (!b || !b->q) {
		free(b);
		return -ENOMEM;
	}
	b->cap = backlog;
	l->net = net;
	l->service = service;
	l->backlog = b;
	/*
	 * What a client may ask of our memory: the server's word, not the
	 * client's (a CONNECT costs the client 44 bytes and no memory of its
	 * own worth mentioning; issue 28, item 5).
	 */
	l->max_ring = max_rx_ring ? max_rx_ring : CLANQ_CONN_RING_DEFAULT;
	err = clanq_ep_create_flags(net->dev, &l->ep, &ea,
				    flags & CLANQ_LISTEN_SHARED ?
				    CLANQ_EP_SHARED : 0);
	if (err)
		goto err_free;
	l->ep_reg = clanq_evq_register(&net->evq, &l->ep, CLANQ_EV_OOB,
				       (uint64_t)(uintptr_t)l);
	if (l->ep_reg < 0) {
		err = l->ep_reg;
		clanq_ep_destroy(&l->ep);
		goto err_free;
	}
	l->next = net->listeners;
	net->listeners = l;
	return 0;

err_free:
	free(b->q);
	free(b);
	return err;
}

int clanq_listen(struct clanq_net *net, struct clanq_listener **lp,
		 unsigned int service, unsigned int backlog)
{
	return clanq_listen_attr(net, lp, service, backlog, NULL);
}

int clanq_listen_attr(struct clanq_net *net, struct clanq_listener **lp,
		      unsigned int service, unsigned int backlog,
		      const struct clanq_listen_attr *attr)
{
	struct clanq_listener *l;
	uint32_t flags = attr ? attr->flags : 0;
	int err;

	if (attr && (attr->reserved[0] | attr->reserved[1]))
		return -EINVAL;
	if (clanq_inherited(net->ep.fd))
		return -CLANQ_FORK_ERR;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	err = clanq_listener_init(net, l, service, backlog, flags,
				  attr ? attr->max_rx_ring : 0);
	if (err) {
		free(l);
		return err;
	}
	*lp = l;
	return 0;
}

int clanq_listener_close(struct clanq_listener *l)
{
	struct clanq_net *net = l->net;
	struct clanq_hs_backlog *b = l->backlog;
	struct clanq_listener **p;
	struct clanq_hs_pending pend;
	struct clanq_hs_refuse r;

	for (p = &net->listeners; *p; p = &(*p)->next) {
		if (*p == l) {
			*p = l->next;
			break;
		}
	}
	clanq_listener_intake(l);
	while (!clanq_hs_backlog_take(b, &pend)) {
		memset(&r, 0, sizeof(r));
		r.magic = CLANQ_HS_MAGIC;
		r.conn = pend.c.conn;
		r.nonce = pend.c.nonce;
		r.err = -ECONNREFUSED;
		(void)clanq_oob_send(&l->ep, pend.src, CLANQ_HS_REFUSE, &r,
				     sizeof(r));
	}
	clanq_evq_unregister(&net->evq, l->ep_reg);
	clanq_ep_destroy(&l->ep);
	free(b->q);
	free(b);
	free(l);
	return 0;
}

void clanq_listener_stats(const struct clanq_listener *l,
			  struct clanq_listener_stats *stats)
{
	stats->refused = l->refused;
	stats->ignored = l->ignored;
}

struct clanq_addr clanq_listener_addr(const struct clanq_listener *l)
{
	/* a shared listener's endpoint has an id of its own */
	struct clanq_addr a = { .node = l->ep.addr.node, .id = l->service };

	return a;
}

/*
 * The server's loop.
 */

/*
 * Report what c has to say and the application wants to hear
 * (c->interest; a reset always); true if it said something.
 */
static bool clanq_net_report(struct clanq_conn *c, struct clanq_net_event *e)
{
	uint32_t what = 0;

	if (c->state == CLANQ_CONN_CONNECTING)
		return false;
	clanq_conn_answer_want(c);
	if ((c->interest & CLANQ_NET_IN) &&
	    (clanq_conn_has_data(c) || c->fin_seen || clanq_conn_fin_in_hdr(c)))
		what |= CLANQ_NET_IN;
	else if (c->state == CLANQ_CONN_RESET || c->peer_gone)
		what |= CLANQ_NET_HUP;
	if (c->tw_fired_head)
		what |= CLANQ_NET_TW;	/* whatever the mask: onesided.c */
	if (!(c->interest & CLANQ_NET_OUT)) {
		/* muted: the credit wait and "connected" wait for the unmute */
	} else if (c->connected_unreported) {
		what |= CLANQ_NET_OUT;
		c->connected_unreported = false;
	} else if (c->credit_waits && c->state == CLANQ_CONN_OPEN &&
		   clanq_ring_space(c->tx_cap, c->tx_tail,
				    __atomic_load_n(&c->rx_hdr->credit, __ATOMIC_ACQUIRE)) >=
		   (int64_t)(c->tx_cap / 2)) {
		what |= CLANQ_NET_OUT;
		c->credit_waits = 0;
	}
	if (!what)
		return false;
	memset(e, 0, sizeof(*e));
	e->what = what;
	e->conn = c;
	return true;
}

/*
 * The connections' part of a scan: round the hot ring from its cursor,
 * at most once, until evs is full; the cursor is left just past the
 * last connection looked at, so the next call starts where this one
 * stopped (fairness, <clanq/net.h>). A report never takes a connection
 * off the ring; one that turns hot meanwhile joins before the cursor,
 * so is looked at before the round ends.
 */
static unsigned int clanq_net_scan_conns(struct clanq_net *net,
					 struct clanq_net_event *evs,
					 unsigned int n, unsigned int max)
{
	struct clanq_conn *c = net->hot, *next;

	while (c && n < max) {
		next = c->next_hot;
		if (clanq_net_report(c, &evs[n]))
			n++;
		c = next;
		if (c == net->hot)
			return n;	/* round done: the cursor stays */
	}
	if (c)
		net->hot = c;
	return n;
}

/*
 * The listeners with pending connections and the application's events:
 * at most room of them.
 */
static unsigned int clanq_net_scan_others(struct clanq_net *net,
					  struct clanq_net_event *evs,
					  unsigned int n, unsigned int room)
{
	struct clanq_hs_backlog *b;
	struct clanq_listener *l;
	unsigned int max = n + room;

	while (n < max && net->nr_stash) {
		memset(&evs[n], 0, sizeof(evs[n]));
		evs[n].what = CLANQ_NET_OTHER;
		evs[n].ev = net->stash[0];
		memmove(net->stash, net->stash + 1,
			--net->nr_stash * sizeof(*net->stash));
		n++;
	}
	for (l = net->listeners; l && n < max; l = l->next) {
		b = l->backlog;
		if (b->count) {
			memset(&evs[n], 0, sizeof(evs[n]));
			evs[n].what = CLANQ_NET_ACCEPT;
			evs[n].listener = l;
			n++;
		}
	}
	return n;
}

/*
 * One look at everything, no system call: how many events in evs.
 * Accepts and the application's events take at most half of max, so
 * that they cannot starve the connections (with max 1: every other
 * call); the connections take what is left.
 */
static unsigned int clanq_net_scan(struct clanq_net *net,
				   struct clanq_net_event *evs, unsigned int max)
{
	struct clanq_event ev;
	unsigned int n = 0;

	while (!clanq_evq_poll(&net->evq, &ev))
		clanq_net_handle(net, &ev);
	if (net->connecting)
		clanq_net_tick_connects(net);
	/* a probe pass owed, whether or not anything arrived since */
	clanq_net_probe(net);
	if (max > 1) {
		n = clanq_net_scan_others(net, evs, 0, max / 2);
		return clanq_net_scan_conns(net, evs, n, max);
	}
	net->others_last = !net->others_last;
	if (net->others_last) {
		n = clanq_net_scan_conns(net, evs, 0, 1);
		return n ? n : clanq_net_scan_others(net, evs, 0, 1);
	}
	n = clanq_net_scan_others(net, evs, 0, 1);
	return n ? n : clanq_net_scan_conns(net, evs, 0, 1);
}

/*
 * After its arming: a connection that has something after all stays hot
 * and is reported (1); one with nothing leaves the hot list (0), since
 * its peer's next write fires its tripwire.
 */
static unsigned int clanq_net_settle(struct clanq_net *net, struct clanq_conn *c,
				     struct clanq_net_event *ev)
{
	if (clanq_net_report(c, ev))
		return 1;
	if (c->state != CLANQ_CONN_RESET && !c->peer_gone)
		clanq_net_unhot(net, c);
	return 0;
}

/* The most entries one connection lists: a flush, then three words. */
#define CLANQ_NET_ARMS_PER_CONN	4

/*
 * List c's arming for the block's system call: the flush its credit
 * owes, if any, then its tripwire with each word of its ring's header
 * that clanq_net_report() reads, at the value that means "nothing to
 * say": the tail at our head; the want word, while we still owe credit
 * (answered then); the credit word, while the application waits for
 * room (CLANQ_NET_OUT).
 *
 * Why no wake-up is lost. The scan looked at these words and found
 * nothing; the block arms in the driver, after it. A peer's write lands
 * either before the driver's read of the word or after it:
 *  - before: the driver reads the new value (the words only grow, so
 *    "moved" cannot be undone by a later write), does not sleep, and
 *    our look after the call reports it;
 *  - after: the driver armed, then issued a full barrier, then read;
 *    the writer stores, issues a full barrier, then loads the armed
 *    bitmap ([F] of queue.h; the RDMA engine loads nr_armed). Two
 *    stores each followed by a barrier and a load of the other's word:
 *    at least one load sees the other's store. The driver's read did
 *    not see the write, so the writer sees the tripwire armed and
 *    flushes, which fires it, which posts an event on our evq; the
 *    driver's sleep checks the evq's producer index against ours after
 *    it queued itself ([D]), so the event either stops the sleep or
 *    wakes it.
 * An event posted before the call (a fire, an OOB message) moved the
 * producer index past read_i, so the call does not sleep either.
 */
static void clanq_net_list(struct clanq_net *net, struct clanq_conn *c)
{
	struct clanq_evq_arm *a = &net->arms[net->nr_arms];
	unsigned int n = 0;

	if (clanq_conn_return_credit_owed(c, &a[n]) == 1)
		n++;
	/*
	 * Muted for IN with a record unread, the tail is compared with
	 * where it is, not with our head: the next write still wakes us,
	 * the record we will not be told of does not.
	 */
	a[n] = (struct clanq_evq_arm){ .id = c->tw.id,
		.off = offsetof(struct clanq_ring_hdr, tail),
		.val = c->interest & CLANQ_NET_IN ? c->rx_head :
			__atomic_load_n(&c->rx_hdr->tail, __ATOMIC_ACQUIRE) };
	n++;
	if (c->rx_head != c->rx_returned)
		a[n++] = (struct clanq_evq_arm){ .id = c->tw.id,
			.off = offsetof(struct clanq_ring_hdr, want),
			.val = __atomic_load_n(&c->rx_hdr->want, __ATOMIC_ACQUIRE) };
	if (c->credit_waits && (c->interest & CLANQ_NET_OUT))
		a[n++] = (struct clanq_evq_arm){ .id = c->tw.id,
			.off = offsetof(struct clanq_ring_hdr, credit),
			.val = __atomic_load_n(&c->rx_hdr->credit, __ATOMIC_ACQUIRE) };
	net->nr_arms += n;
	net->arming[net->nr_arming++] = c;
}

/*
 * About to block: every hot connection with nothing to say is armed,
 * after it hands back the credit it owes (a blocked reader must not
 * keep its peer waiting). Most are only listed here (clanq_net_list()),
 * and the block's one system call makes their flushes, arms them and
 * compares (clanq_net_block_armed()). The rest (no room left in the
 * list, or a driver without CLANQ_EVQ_WAIT_ARM) get a TW_ARM each,
 * which ends with a full barrier, so the look after it cannot miss a
 * write that did not fire it ([F] of queue.h).
 */
static unsigned int clanq_net_arm(struct clanq_net *net,
				  struct clanq_net_event *evs, unsigned int max)
{
	struct clanq_conn *c, *next;
	unsigned int n = 0, left = net->nr_hot;

	net->nr_arms = net->nr_arming = 0;
	if (!net->arms && !net->no_arm_wait) {
		net->arms = calloc(CLANQ_EVQ_ARM_MAX, sizeof(*net->arms));
		net->arming = calloc(CLANQ_EVQ_ARM_MAX, sizeof(*net->arming));
		if (!net->arms || !net->arming) {
			free(net->arms);
			free(net->arming);
			net->arms = NULL;
			net->arming = NULL;
		}
	}
	/* once round the ring from its cursor; settling may take c off it */
	for (c = net->hot; c && left; c = next, left--) {
		next = c->next_hot;
		/*
		 * No room left to report: the rest stay hot (the next scan
		 * looks at them, from here). Arming one and dropping it from
		 * the hot list unreported would lose a message that arrived
		 * before the arm: that write fired nothing, and none may
		 * follow.
		 */
		if (n >= max) {
			net->hot = c;
			break;
		}
		if (c->state == CLANQ_CONN_CONNECTING)
			continue;
		if (!c->armed && c->state != CLANQ_CONN_RESET && !c->peer_gone &&
		    net->arms && !net->no_arm_wait &&
		    net->nr_arms + CLANQ_NET_ARMS_PER_CONN <= CLANQ_EVQ_ARM_MAX) {
			clanq_net_list(net, c);
			continue;	/* hot until the block has armed it */
		}
		(void)clanq_conn_return_credit(c);
		if (!c->armed && c->state != CLANQ_CONN_RESET && !c->peer_gone) {
			if (clanq_tw_arm(&c->tw))
				continue;	/* stays hot: polled next time */
			c->armed = true;
			net->stats.arms++;
		}
		n += clanq_net_settle(net, c, &evs[n]);
	}
	return n;
}

/* The flushes a failed block did not make: each its own AP_FLUSH. */
static void clanq_net_flush_listed(struct clanq_net *net)
{
	struct clanq_conn *c;
	uint32_t i;

	for (i = 0; i < net->nr_arms; i++) {
		if (!(net->arms[i].flags & CLANQ_EVQ_ARM_FLUSH))
			continue;
		/* by aperture id: the listed connection it belongs to */
		for (uint32_t j = 0; j < net->nr_arming; j++) {
			c = net->arming[j];
			if (c->tx.id == net->arms[i].id &&
			    clanq_ap_flush_armed(&c->tx, net->arms[i].off,
						 net->arms[i].val) == -ENXIO)
				clanq_conn_on_revoked(c);
		}
	}
}

/*
 * Block with what clanq_net_arm() listed: one EVQ_WAIT that flushes,
 * arms, compares, and sleeps only if no word moved and no event is
 * queued (the lost-wakeup argument is at clanq_net_list() and in
 * include/clanq/uapi.h), until deadline; with nap false, never sleeps
 * (clanq_net_trywait()). Then the events, and the listed connections
 * settled as clanq_net_arm() settles those it arms itself: how many
 * events in evs, or -errno (-ETIMEDOUT: armed, nothing came).
 */
static int clanq_net_block_armed(struct clanq_net *net, struct clanq_net_event *evs,
				 unsigned int max, uint64_t deadline, bool nap)
{
	struct clanq_ioc_evq_wait w;
	struct clanq_event ev;
	uint64_t now = clanq_now_ns();
	unsigned int n = 0;
	uint32_t i;
	int err;

	if (nap && deadline != ~0ull && now >= deadline) {
		err = -ETIMEDOUT;
		goto unarmed;
	}
	memset(&w, 0, sizeof(w));
	if (!nap)
		w.timeout_ns = 0;	/* flush, arm, compare: no sleep */
	else
		w.timeout_ns = deadline == ~0ull ? ~0ull : deadline - now;
	w.read_i = net->evq.ring.own;
	w.flags = CLANQ_EVQ_WAIT_ARM;
	w.arms = (uint64_t)(uintptr_t)net->arms;
	w.nr_arms = net->nr_arms;
	if (nap)
		net->stats.blocks++;
	err = clanq_ioctl(net->evq.fd, CLANQ_IOC_EVQ_WAIT, &w) < 0 ? -errno : 0;
	if (err && err != -ETIMEDOUT && err != -EINTR) {
		/*
		 * Refused before it armed anything. A driver that does not
		 * know the flag says -EINVAL: TW_ARM each from now on.
		 * -ENXIO: a flush found its peer gone, which that flush,
		 * made again alone, reports to its connection.
		 */
		if (err == -EINVAL)
			net->no_arm_wait = true;
		if (err == -EINVAL || err == -ENXIO)
			err = 0;
		goto unarmed;
	}
	/* it armed them all before it compared or slept */
	for (i = 0; i < net->nr_arming; i++)
		net->arming[i]->armed = true;
	net->stats.arms += net->nr_arming;
	/* events after the arming: a fire makes its connection hot again */
	while (!clanq_evq_poll(&net->evq, &ev))
		clanq_net_handle(net, &ev);
	for (i = 0; i < net->nr_arming; i++) {
		struct clanq_conn *c = net->arming[i];

		/* no room to report: stays hot (and armed) for the next scan */
		if (n < max && c->armed)
			n += clanq_net_settle(net, c, &evs[n]);
	}
	net->nr_arms = net->nr_arming = 0;
	return n ? (int)n : err;

unarmed:
	/* the listed stay hot, unarmed; the flushes they owe are made now */
	clanq_net_flush_listed(net);
	net->nr_arms = net->nr_arming = 0;
	return err;
}

int clanq_net_wait(struct clanq_net *net, struct clanq_net_event *evs,
		   unsigned int max, int64_t timeout_ns)
{
	uint64_t start = clanq_now_ns(), now = start, deadline, wake;
	unsigned int n, spins = 0;
	int err;

	if (!max)
		return -EINVAL;
	if (clanq_inherited(net->ep.fd))
		return -CLANQ_FORK_ERR;
	deadline = timeout_ns < 0 ? ~0ull : start + (uint64_t)timeout_ns;
	for (;;) {
		n = clanq_net_scan(net, evs, max);
		if (n)
			return (int)n;
		if (now - start < net->spin_ns && now < deadline) {
			clanq_cpu_relax();
			if (!(++spins % 8))
				now = clanq_now_ns();
			continue;
		}
		if (now >= deadline)
			return -ETIMEDOUT;
		n = clanq_net_arm(net, evs, max);
		if (n) {
			/* not blocking after all: what the listed owe, now */
			clanq_net_flush_listed(net);
			net->nr_arms = net->nr_arming = 0;
			return (int)n;
		}
		/* a non-blocking connect's retransmission or timeout may be sooner */
		wake = net->connecting && net->connect_due < deadline ?
		       net->connect_due : deadline;
		/* and a probe pass owed (clanq_net_probe()) */
		wake = clanq_net_probe_wake(net, wake);
		if (net->nr_arming)
			/* one system call: flush, arm, compare, sleep */
			err = clanq_net_block_armed(net, evs, max, wake, true);
		else
			err = clanq_net_block(net, wake);
		if (err == -ETIMEDOUT && wake < deadline)
			err = 0;	/* the scan ticks the connects */
		if (err)
			return err;	/* > 0: events of the listed */
		now = clanq_now_ns();
		start = now - net->spin_ns;	/* no spin after a wake-up */
	}
}

int clanq_net_trywait(struct clanq_net *net, struct clanq_net_event *evs,
		      unsigned int max)
{
	unsigned int n;
	int err;

	if (!max)
		return -EINVAL;
	if (clanq_inherited(net->ep.fd))
		return -CLANQ_FORK_ERR;
	for (;;) {
		n = clanq_net_scan(net, evs, max);
		if (n)
			return (int)n;
		n = clanq_net_arm(net, evs, max);
		if (n) {
			clanq_net_flush_listed(net);
			net->nr_arms = net->nr_arming = 0;
			return (int)n;
		}
		if (!net->nr_arming)
			return 0;	/* all armed: what came since the scan is on the fd */
		err = clanq_net_block_armed(net, evs, max, 0, false);
		if (err == -ETIMEDOUT)
			return 0;	/* armed, and no word moved */
		if (err)
			return err;	/* > 0: events of the listed */
		/* a word moved, or the driver armed nothing: look again */
	}
}

int clanq_conn_want(struct clanq_conn *c, uint32_t what)
{
	uint32_t more;

	if (what & ~(CLANQ_NET_IN | CLANQ_NET_OUT))
		return -EINVAL;
	if (clanq_inherited(c->net->ep.fd))
		return -CLANQ_FORK_ERR;
	more = what & ~c->interest;
	c->interest = what;
	/*
	 * Unmuted: looked at by the next scan. What came while it was
	 * muted fired its tripwire then (or came before the arm, which
	 * compared the tail with where it was), and was not reported:
	 * nothing would look at it again without this.
	 */
	if (more && c->state != CLANQ_CONN_CONNECTING)
		clanq_net_hot(c->net, c);
	return 0;
}
