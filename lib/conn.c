// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: connections. Connect and accept run the handshake of
 * handshake.h over the net's endpoint; each side then owns its receive
 * ring (a region, exported, with a tripwire on its header) and an
 * aperture onto the peer's, imported with CLANQ_AP_SINK and the net's
 * endpoint to notify, so that the peer's death is a notice, not a
 * SIGBUS and not a hang.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handshake.h"
#include "net_internal.h"

#define CLANQ_PAGE	4096u

/* Record bytes of a ring of at least want bytes: whole pages, header included. */
static int clanq_conn_ring_cap(uint64_t want, uint64_t max, uint64_t *cap)
{
	uint64_t size;

	if (!want)
		want = CLANQ_CONN_RING_DEFAULT;
	if (want > max || !clanq_ring_cap_ok(want))
		return -EINVAL;
	size = (want + CLANQ_RING_HDR + CLANQ_PAGE - 1) / CLANQ_PAGE * CLANQ_PAGE;
	*cap = size - CLANQ_RING_HDR;
	if (*cap > CLANQ_RING_CAP_MAX)
		*cap = CLANQ_RING_CAP_MAX;
	return 0;
}

/* Our receive ring: a region, exported, and a tripwire on its header. */
static int clanq_conn_rx_setup(struct clanq_conn *c, uint64_t want, uint64_t max,
			       uint64_t *key)
{
	struct clanq_net *net = c->net;
	uint64_t cap;
	int err;

	err = clanq_conn_ring_cap(want, max, &cap);
	if (err)
		return err;
	err = clanq_region_alloc(net->dev, &c->rx, CLANQ_RING_HDR + cap);
	if (err)
		return err;
	err = clanq_region_export(&c->rx, CLANQ_RIGHTS_ALL, key);
	if (err)
		goto err_region;
	/* one-shot, disarmed: the loop arms it before it blocks */
	err = clanq_tw_create(&net->ep, &c->tw, &c->rx, 0, sizeof(struct clanq_ring_hdr),
			      0);
	if (err)
		goto err_region;
	clanq_tw_set_spin(&c->tw, net->spin_ns);
	net->by_bit[c->tw.bit] = c;
	c->rx_hdr = c->rx.mem;
	c->rx_ring = (char *)c->rx.mem + CLANQ_RING_HDR;
	c->rx_cap = cap;
	return 0;

err_region:
	clanq_region_free(&c->rx);
	c->rx.mem = NULL;
	return err;
}

/* The aperture onto the peer's ring; PIO if it can be mapped. */
static int clanq_conn_tx_setup(struct clanq_conn *c, struct clanq_addr ring,
			       uint64_t key, uint64_t cap, uint32_t flags)
{
	struct clanq_net *net = c->net;
	struct clanq_ap_attr attr = {
		.flags = CLANQ_AP_SINK,
		.notify_ep = net->ep.addr.id,
		.notify_cookie = clanq_conn_notice_cookie(net, c->slot),
	};
	int err;

	if (!clanq_ring_cap_ok(cap) || !clanq_ring_max_msg(cap))
		return -EPROTO;
	err = clanq_ap_import_attr(net->dev, &c->tx, ring, key, 0,
				   CLANQ_RING_HDR + cap, CLANQ_RIGHTS_ALL, &attr);
	if (err)
		return err;
	err = flags & CLANQ_CONN_RDMA_ONLY ? -EOPNOTSUPP : clanq_ap_map(&c->tx);
	if (err && err != -EOPNOTSUPP) {
		clanq_ap_close(&c->tx);
		return err;
	}
	clanq_conn_tx_init(c, cap);
	return 0;
}

static void clanq_conn_init(struct clanq_net *net, struct clanq_conn *c,
			    const struct clanq_conn_opts *opts)
{
	memset(c, 0, sizeof(*c));
	c->net = net;
	c->tx.id = 0;
	c->rdma_threshold = opts && opts->rdma_threshold ? opts->rdma_threshold :
							   CLANQ_CONN_RDMA_DEFAULT;
	c->opt_flags = opts ? opts->flags : 0;
	c->interest = CLANQ_NET_IN | CLANQ_NET_OUT;
	c->send_timeout_ns = -1;
	c->recv_timeout_ns = -1;
	c->bulk_want = CLANQ_CONN_BULK_DEFAULT;
}

/*
 * The net's list of non-blocking connects in progress: ticked by the
 * loop for their retransmissions and timeouts (clanq_net_tick_connects()).
 */
static void clanq_connecting_add(struct clanq_conn *c)
{
	struct clanq_net *net = c->net;
	uint64_t due = clanq_hs_client_due(c->hs);

	c->prev_connecting = NULL;
	c->next_connecting = net->connecting;
	if (net->connecting)
		net->connecting->prev_connecting = c;
	net->connecting = c;
	c->in_connecting = true;
	if (net->connecting == c && !c->next_connecting)
		net->connect_due = due;
	else if (due < net->connect_due)
		net->connect_due = due;
}

static void clanq_connecting_del(struct clanq_conn *c)
{
	struct clanq_net *net = c->net;

	if (!c->in_connecting)
		return;
	if (c->prev_connecting)
		c->prev_connecting->next_connecting = c->next_connecting;
	else
		net->connecting = c->next_connecting;
	if (c->next_connecting)
		c->next_connecting->prev_connecting = c->prev_connecting;
	c->next_connecting = c->prev_connecting = NULL;
	c->in_connecting = false;
	/* net->connect_due may now be early: the next tick sets it right */
}

/* The bucket of accepted connections from (src, conn). */
static uint32_t *clanq_acc_bucket(struct clanq_net *net, struct clanq_addr src,
			       uint32_t conn)
{
	uint32_t h = src.node * 0x9e3779b1u ^ src.id * 0x85ebca6bu ^
		  conn * 0xc2b2ae35u;

	return &net->acc_head[(h ^ h >> 16) & net->acc_mask];
}

static void clanq_acc_add(struct clanq_conn *c)
{
	uint32_t *b = clanq_acc_bucket(c->net, c->peer, c->peer_slot);

	c->acc_next = *b;
	*b = c->slot + 1;
	c->accepted = true;
}

static void clanq_acc_del(struct clanq_conn *c)
{
	struct clanq_net *net = c->net;
	uint32_t *p = clanq_acc_bucket(net, c->peer, c->peer_slot);

	if (!c->accepted)
		return;
	while (*p && *p != c->slot + 1)
		p = &net->conns[*p - 1]->acc_next;
	if (*p)
		*p = c->acc_next;
	c->accepted = false;
}

/* Undo what is set up, in any state. */
static void clanq_conn_teardown(struct clanq_conn *c)
{
	struct clanq_net *net = c->net;

	clanq_net_unhot(net, c);
	clanq_connecting_del(c);
	clanq_acc_del(c);
	if (c->rx_hdr) {
		net->by_bit[c->tw.bit] = NULL;
		clanq_tw_destroy(&c->tw);
	}
	if (c->rx.mem)
		clanq_region_free(&c->rx);
	if (c->tx.id)
		clanq_ap_close(&c->tx);
	if (c->stage.mem)
		clanq_region_free(&c->stage);
	if (c->bulk.mem) {
		clanq_region_free(&c->bulk);
		net->bulk_bytes -= c->bulk_cap;
	}
	if (c->bulk_tx.id)
		clanq_ap_close(&c->bulk_tx);
	if (c->bulk_stage.mem)
		clanq_region_free(&c->bulk_stage);
	c->bulk.mem = NULL;
	c->bulk_tx.id = 0;
	c->bulk_stage.mem = NULL;
	free(c->hs);
	c->hs = NULL;
	c->rx_hdr = NULL;
	c->rx.mem = NULL;
	c->tx.id = 0;
	c->stage.mem = NULL;
	clanq_net_slot_put(net, c);
}

void clanq_conn_reset(struct clanq_conn *c, int err)
{
	if (c->state == CLANQ_CONN_RESET)
		return;
	c->state = CLANQ_CONN_RESET;
	c->error = err;
	c->net->stats.conns_reset++;
	clanq_net_hot(c->net, c);	/* the loop reports it */
}

/*
 * The peer's ring was freed: it closed (after its FIN, which is in our
 * ring before the notice could be sent) or it died.
 */
void clanq_conn_on_revoked(struct clanq_conn *c)
{
	/*
	 * Not a reset yet: a FIN, or data, may be in our ring unread (the
	 * peer wrote it before its region went, so before this notice).
	 * The reader decides, once it has drained the ring.
	 */
	c->peer_gone = true;
	clanq_net_hot(c->net, c);
}

void clanq_conn_probe(struct clanq_conn *c)
{
	if (c->state != CLANQ_CONN_OPEN || c->peer_gone || !c->tx.id)
		return;
	if (clanq_ap_flush_armed(&c->tx, 0, 8) == -ENXIO)
		clanq_conn_on_revoked(c);
}

static int clanq_conn_send_connect(struct clanq_conn *c)
{
	struct clanq_hs_client *hs = c->hs;
	int err;

	c->net->stats.connects_sent++;
	err = clanq_oob_send(&c->net->ep, hs->dst, CLANQ_HS_CONNECT, &hs->msg,
			     sizeof(hs->msg));
	return err;
}

static void clanq_conn_connect_done(struct clanq_conn *c);

void clanq_conn_hs_msg(struct clanq_conn *c, const struct clanq_oob_msg *m)
{
	struct clanq_hs_client *hs = c->hs;

	switch (clanq_hs_client_on_msg(hs, m)) {
	case CLANQ_HS_IGNORED:
		c->net->stats.ignored++;
		break;
	case CLANQ_HS_ESTABLISHED:
	case CLANQ_HS_FAILED:
		/* a blocking clanq_connect() looks at hs->state itself */
		if (c->nonblock)
			clanq_conn_connect_done(c);
		break;
	default:
		break;
	}
}

/*
 * The server's answer is in hs->acc: the aperture onto its ring, and
 * the connection is open. -errno (c is as it was) if the ring cannot
 * be imported.
 */
static int clanq_conn_established(struct clanq_conn *c)
{
	struct clanq_hs_client *hs = c->hs;
	struct clanq_net *net = c->net;
	int err;

	c->peer = hs->srv_ep;
	c->peer_slot = hs->acc.srv_conn;
	c->peer_nonce = hs->acc.srv_nonce;
	err = clanq_conn_tx_setup(c, hs->acc.ring, hs->acc.key, hs->acc.ring_cap,
				  c->opt_flags);
	if (err)
		/* the server's ring is already gone: it reset us */
		return err == -ENOENT ? -ECONNRESET : err;
	free(c->hs);
	c->hs = NULL;
	c->state = CLANQ_CONN_OPEN;
	net->stats.conns_opened++;
	clanq_net_hot(net, c);
	return 0;
}

/*
 * A non-blocking connect ended: open, and CLANQ_NET_OUT owed; or failed,
 * and the connection is reset with the reason, hot so that the loop
 * reports CLANQ_NET_HUP. Its ring and slot stay until it is closed.
 */
static void clanq_conn_connect_done(struct clanq_conn *c)
{
	struct clanq_hs_client *hs = c->hs;
	int err;

	clanq_connecting_del(c);
	err = hs->state == CLANQ_HS_DONE ? clanq_conn_established(c) :
	      hs->err ? hs->err : -ETIMEDOUT;
	if (!err) {
		c->connected_unreported = true;
		return;
	}
	free(c->hs);
	c->hs = NULL;
	c->connect_failed = true;
	c->state = CLANQ_CONN_RESET;
	c->error = err;
	clanq_net_hot(c->net, c);
}

void clanq_net_tick_connects(struct clanq_net *net)
{
	struct clanq_conn *c, *next;
	uint64_t now, due = ~0ull;

	if (!net->connecting)
		return;
	now = clanq_now_ns();
	if (now < net->connect_due)
		return;
	for (c = net->connecting; c; c = next) {
		next = c->next_connecting;
		switch (clanq_hs_client_tick(c->hs, now)) {
		case CLANQ_HS_SEND:
			/* no route any more: fail; a full queue: the next is due */
			if (clanq_conn_send_connect(c) == -EHOSTUNREACH) {
				clanq_hs_client_fail(c->hs, -EHOSTUNREACH);
				clanq_conn_connect_done(c);
				continue;
			}
			break;
		case CLANQ_HS_FAILED:
			clanq_conn_connect_done(c);
			continue;
		default:
			break;
		}
		if (clanq_hs_client_due(c->hs) < due)
			due = clanq_hs_client_due(c->hs);
	}
	net->connect_due = due;
}

static int clanq_conn_connect(struct clanq_net *net, struct clanq_conn *c, uint32_t node,
			      unsigned int service, const struct clanq_conn_opts *opts)
{
	uint64_t timeout = opts && opts->timeout_ns ? opts->timeout_ns :
						   CLANQ_CONN_TIMEOUT_NS_DEFAULT;
	struct clanq_addr dst = { node, service };
	struct clanq_hs_client *hs;
	uint64_t key, nonce, now;
	int err;

	if ((opts && (opts->flags & ~(CLANQ_CONN_RDMA_ONLY | CLANQ_CONN_NONBLOCK))) ||
	    !service || service > CLANQ_SERVICE_MAX)
		return -EINVAL;
	if (opts && opts->tx_ring && !clanq_ring_cap_ok(opts->tx_ring))
		return -EINVAL;
	clanq_conn_init(net, c, opts);
	err = clanq_net_slot_get(net, c);
	if (err)
		return err;
	hs = calloc(1, sizeof(*hs));
	if (!hs) {
		err = -ENOMEM;
		goto err_slot;
	}
	c->hs = hs;
	c->state = CLANQ_CONN_CONNECTING;
	err = clanq_net_nonce(net, &nonce);
	if (err)
		goto err_teardown;
	err = clanq_conn_rx_setup(c, opts ? opts->rx_ring : 0, CLANQ_RING_CAP_MAX,
				  &key);
	if (err)
		goto err_teardown;
	c->nonce = nonce;
	c->rx_key = key;
	hs->msg.ring = c->rx.addr;
	hs->msg.key = key;
	hs->msg.ring_cap = (uint32_t)c->rx_cap;
	hs->msg.want_cap = opts ? opts->tx_ring : 0;
	now = clanq_now_ns();
	clanq_hs_client_start(hs, dst, c->slot, nonce, now, timeout);
	err = clanq_conn_send_connect(c);
	if (!err && (c->opt_flags & CLANQ_CONN_NONBLOCK)) {
		/* the rest is the loop's: clanq_net_tick_connects(), hs_msg */
		c->nonblock = true;
		clanq_connecting_add(c);
		return 0;
	}
	while (!err && hs->state == CLANQ_HS_SENT) {
		err = clanq_net_block(net, clanq_hs_client_due(hs));
		if (err == -ETIMEDOUT)
			err = 0;
		if (err)
			break;
		clanq_net_progress(net);
		if (hs->state != CLANQ_HS_SENT)
			break;
		if (clanq_hs_client_tick(hs, clanq_now_ns()) == CLANQ_HS_SEND)
			err = clanq_conn_send_connect(c);
	}
	if (!err && hs->state == CLANQ_HS_ERROR)
		err = hs->err;
	if (!err)
		err = clanq_conn_established(c);
	if (err)
		goto err_teardown;
	return 0;

err_teardown:
	clanq_conn_teardown(c);
	return err;
err_slot:
	clanq_net_slot_put(net, c);
	return err;
}

bool clanq_conn_resend_accept(struct clanq_net *net, const struct clanq_addr src,
			      uint32_t conn, uint64_t nonce)
{
	struct clanq_hs_accept a;
	struct clanq_conn *c;
	uint32_t i;

	for (i = *clanq_acc_bucket(net, src, conn); i; i = c->acc_next) {
		c = net->conns[i - 1];
		if (c->peer.node != src.node || c->peer.id != src.id ||
		    c->peer_slot != conn || c->peer_nonce != nonce)
			continue;
		memset(&a, 0, sizeof(a));
		a.magic = CLANQ_HS_MAGIC;
		a.conn = conn;
		a.nonce = nonce;
		a.srv_conn = c->slot;
		a.ring_cap = (uint32_t)c->rx_cap;
		a.ring = c->rx.addr;
		a.key = c->rx_key;
		a.srv_nonce = c->nonce;
		net->stats.accepts_sent++;
		(void)clanq_oob_send(&net->ep, src, CLANQ_HS_ACCEPT, &a, sizeof(a));
		return true;
	}
	return false;
}

/*
 * Accept one pending CONNECT: 0, or -errno to drop it and go on.
 *
 * Nothing the CONNECT claims is believed before the client has proved
 * that it exists (issue 28, item 6): anyone may send a CONNECT, naming
 * any ring, but only the process that exported that ring knows its key.
 * So the client's ring is imported (and validated) first, which for a
 * forged CONNECT fails at once in the driver, and only then does the
 * server allocate, export and arm its own. And the client does not size
 * the server's memory (item 5): its ask is honoured up to the
 * listener's cap (clanq_listen_attr.max_rx_ring); the server's own
 * opts->rx_ring wins over both.
 */
static int clanq_accept_one(struct clanq_listener *l, struct clanq_conn *c,
			    const struct clanq_hs_pending *p,
			    const struct clanq_conn_opts *opts)
{
	struct clanq_net *net = l->net;
	uint64_t want;
	struct clanq_hs_accept a;
	uint64_t key, nonce;
	int err;

	if (opts && opts->rx_ring)
		want = opts->rx_ring;
	else
		want = p->c.want_cap < l->max_ring ? p->c.want_cap : l->max_ring;
	clanq_conn_init(net, c, opts);
	err = clanq_net_slot_get(net, c);
	if (err)
		return err;
	c->peer = p->src;
	c->peer_slot = p->c.conn;
	c->peer_nonce = p->c.nonce;
	err = clanq_conn_tx_setup(c, p->c.ring, p->c.key, p->c.ring_cap,
				  opts ? opts->flags : 0);
	if (err)
		goto err_teardown;	/* forged, or the client gave up: no ring */
	err = clanq_net_nonce(net, &nonce);
	if (!err)
		err = clanq_conn_rx_setup(c, want, CLANQ_RING_CAP_MAX, &key);
	if (err)
		goto err_teardown;
	c->nonce = nonce;
	c->rx_key = key;
	memset(&a, 0, sizeof(a));
	a.magic = CLANQ_HS_MAGIC;
	a.conn = p->c.conn;
	a.nonce = p->c.nonce;
	a.srv_conn = c->slot;
	a.ring_cap = (uint32_t)c->rx_cap;
	a.ring = c->rx.addr;
	a.key = key;
	a.srv_nonce = nonce;
	net->stats.accepts_sent++;
	err = clanq_oob_send(&net->ep, p->src, CLANQ_HS_ACCEPT, &a, sizeof(a));
	if (err)
		goto err_teardown;
	clanq_acc_add(c);
	c->state = CLANQ_CONN_OPEN;
	net->stats.conns_opened++;
	clanq_net_hot(net, c);
	return 0;

err_teardown:
	clanq_conn_teardown(c);
	return err;
}

int clanq_connect(struct clanq_net *net, struct clanq_conn **cp, uint32_t node,
		  unsigned int service, const struct clanq_conn_opts *opts)
{
	struct clanq_conn *c;
	int err;

	if (clanq_inherited(net->ep.fd))
		return -CLANQ_FORK_ERR;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	err = clanq_conn_connect(net, c, node, service, opts);
	if (err) {
		free(c);
		return err;
	}
	*cp = c;
	return 0;
}

int clanq_accept(struct clanq_listener *l, struct clanq_conn **cp,
		 const struct clanq_conn_opts *opts, int64_t timeout_ns)
{
	struct clanq_net *net = l->net;
	struct clanq_hs_pending p;
	struct clanq_conn *c;
	uint64_t deadline;
	int err;

	if ((opts && (opts->flags & ~CLANQ_CONN_RDMA_ONLY)) || !l->backlog)
		return -EINVAL;
	if (clanq_inherited(net->ep.fd))
		return -CLANQ_FORK_ERR;
	deadline = timeout_ns < 0 ? ~0ull : clanq_now_ns() + (uint64_t)timeout_ns;
	for (;;) {
		clanq_listener_intake(l);
		while (!clanq_hs_backlog_take(l->backlog, &p)) {
			c = calloc(1, sizeof(*c));
			err = c ? clanq_accept_one(l, c, &p, opts) : -ENOMEM;
			if (!err) {
				*cp = c;
				return 0;
			}
			free(c);
			if (err == -ENOSPC || err == -ENOMEM)
				return err;
			/* that client is gone, or sent nonsense: the next one */
			l->ignored++;
		}
		if (!timeout_ns)
			return -EAGAIN;
		err = clanq_net_block(net, deadline);
		if (err)
			return err;
	}
}

int clanq_conn_close(struct clanq_conn *c)
{
	struct clanq_net *net;

	if (!c)
		return -EINVAL;
	net = c->net;
	/* inherited: only the child's copies go, the parent's peer hears nothing */
	if (c->state == CLANQ_CONN_OPEN && !clanq_inherited(net->ep.fd))
		(void)clanq_conn_write_fin(c);
	if (c->state != CLANQ_CONN_CONNECTING && !c->connect_failed)
		net->stats.conns_closed++;
	clanq_conn_tw_drop_all(c);
	clanq_conn_teardown(c);
	free(c);
	return 0;
}

size_t clanq_conn_max_msg(const struct clanq_conn *c)
{
	(void)c;
	return CLANQ_CONN_MSG_MAX;	/* lib/msg.c: larger ones go in pieces */
}

enum clanq_conn_state clanq_conn_state(const struct clanq_conn *c)
{
	return c->state;
}

int clanq_conn_error(const struct clanq_conn *c)
{
	return c->state == CLANQ_CONN_RESET ? c->error : 0;
}

struct clanq_addr clanq_conn_peer(const struct clanq_conn *c)
{
	return c->peer;
}

uint64_t clanq_conn_get_cookie(const struct clanq_conn *c)
{
	return c->cookie;
}

void clanq_conn_set_cookie(struct clanq_conn *c, uint64_t cookie)
{
	c->cookie = cookie;
}

void clanq_conn_stats(const struct clanq_conn *c, struct clanq_conn_stats *stats)
{
	stats->msgs_in = c->msgs_in;
	stats->msgs_out = c->msgs_out;
	stats->bytes_in = c->bytes_in;
	stats->bytes_out = c->bytes_out;
	stats->rdma_sends = c->rdma_sends;
	stats->credit_waits = c->credit_waits;
}

int clanq_conn_set_timeouts(struct clanq_conn *c, int64_t send_ns, int64_t recv_ns)
{
	c->send_timeout_ns = send_ns;
	c->recv_timeout_ns = recv_ns;
	return 0;
}

int clanq_conn_set_bulk(struct clanq_conn *c, size_t bytes)
{
	if (!c)
		return -EINVAL;
	if (bytes && (bytes < CLANQ_CONN_BULK_MIN || bytes > CLANQ_CONN_BULK_MAX ||
		      bytes % 4096))
		return -EINVAL;
	if (c->bulk.mem || c->bulk_refused)
		return -EBUSY;		/* offered (or tried) already */
	c->bulk_want = (uint32_t)bytes;
	return 0;
}
