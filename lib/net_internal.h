/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq internals shared by net.c, conn.c and msg.c: the connection
 * table, resets, and the per-connection steps the net's loop runs.
 */
#ifndef _CLANQ_LIB_NET_INTERNAL_H
#define _CLANQ_LIB_NET_INTERNAL_H

#include <clanq/net.h>

#include "fork.h"

#include "ring.h"

/*
 * The objects of <clanq/net.h>, which only the library sees. (The
 * native benchmark, bench/clanq-bench/native.c, and white-box tests
 * build with this header too.)
 */
/** One thread's connections on one NIC. */
struct clanq_net {
	struct clanq_dev *dev;
	struct clanq_ep ep;		/**< handshake answers, notices, tripwires */
	struct clanq_evq evq;		/**< everything the net waits for */
	int ep_reg;			/**< ep's registration on evq */
	struct clanq_conn **conns;	/**< by slot */
	struct clanq_conn **by_bit;	/**< by tripwire bit */
	uint32_t *gen;			/**< each slot's generation */
	uint32_t max_conns, nr_conns, free_hint;
	struct clanq_conn *hot;		/**< disarmed: polled while spinning */
	struct clanq_listener *listeners;
	uint64_t spin_ns;		/**< clanq_net_wait() and blocking calls */
	uint64_t oob_dropped_seen;	/**< the drop count the last probe pass saw */
	uint64_t probe_due;		/**< no probe pass before (clanq_net_probe()) */
	uint32_t *acc_head;		/**< accepted connections by client: slot + 1 */
	uint32_t acc_mask;
	struct clanq_event *stash;	/**< the application's events, taken early */
	uint32_t nr_stash, stash_cap;
	/*
	 * The next block's arms (CLANQ_EVQ_WAIT_ARM): what clanq_net_arm()
	 * listed for one system call, and the connections listed
	 */
	struct clanq_evq_arm *arms;	/**< CLANQ_EVQ_ARM_MAX of them */
	struct clanq_conn **arming;
	uint32_t nr_arms, nr_arming;
	bool no_arm_wait;		/**< the driver refused it: TW_ARM each */
	struct clanq_net_stats stats;
	/*
	 * The hot list is a ring (next_hot, prev_hot) and hot is its
	 * cursor: the connection the next scan looks at first. A scan
	 * leaves it just past the last connection it looked at, and a
	 * connection that turns hot joins just before it (the back of the
	 * round), so the loop serves ready connections round-robin.
	 */
	uint32_t nr_hot;
	bool others_last;		/**< max 1: accepts and OTHER every other call */
	/* non-blocking connects in progress, and the earliest due tick */
	struct clanq_conn *connecting;
	uint64_t connect_due;
	/*
	 * Nonces for connects and accepts: one getrandom() fills the pool
	 * for 32 of them (clanq_net_nonce()), a system call per connection
	 * less on each side.
	 */
	uint64_t nonces[32];
	uint32_t nr_nonces;		/**< left in nonces[], taken from the top */
	/* lib/onesided.c: connection tripwires by bit, regions exported */
	struct clanq_conn_tw **tw_by_bit;	/**< ep.tw_words * 64 of them */
	uint32_t nr_conn_tws;
	struct clanq_net_export *exports;
	uint32_t nr_exports, exports_cap;
	/* lib/msg.c: bytes of the bulk windows its connections offer */
	uint64_t bulk_bytes;
};

/** A listening service: a service number (endpoint id) on a node. */
struct clanq_listener {
	struct clanq_net *net;
	struct clanq_ep ep;		/**< at (node, service) */
	int ep_reg;			/**< its registration on net->evq */
	unsigned int service;
	uint32_t max_ring;		/**< largest receive ring a client may ask of it */
	void *backlog;			/**< lib/handshake.h */
	struct clanq_listener *next;
	uint64_t refused, ignored;
};

/** A connection: allocated by connect or accept, freed by close. */
struct clanq_conn {
	struct clanq_net *net;
	uint32_t slot;			/**< in net->conns */
	uint32_t peer_slot;
	enum clanq_conn_state state;
	int error;			/**< why it was reset */
	struct clanq_addr peer;		/**< the peer net's endpoint */
	uint64_t nonce, peer_nonce;
	uint64_t cookie;		/**< the application's */
	/* receive side: our ring, the peer writes it */
	struct clanq_region rx;
	struct clanq_tw tw;		/**< on rx's header */
	struct clanq_ring_hdr *rx_hdr;
	char *rx_ring;
	uint64_t rx_key;
	uint64_t rx_cap, rx_head, rx_returned, want_seen;
	uint64_t rx_pos;		/**< rx_head % rx_cap, kept: no division */
	uint64_t rx_tail_seen;		/**< the peer's tail as last loaded and checked */
	uint64_t peek_size;		/**< record bytes of the peeked message */
	uint32_t peek_len;		/**< its payload bytes */
	uint32_t idle_polls;		/**< empty non-blocking receives: news every 16th */
	bool armed, hot, fin_seen;
	bool peer_gone;			/**< its ring was revoked: closed or died */
	bool accepted;			/**< in net->acc_head */
	uint32_t acc_next;		/**< next in its acc_head chain: slot + 1 */
	/* send side: the peer's ring, through an aperture */
	struct clanq_ap tx;
	uint64_t tx_cap, tx_tail, tx_want;
	uint64_t tx_want_at;		/**< credit + 1 a DONTWAIT send asked at */
	uint64_t tx_pos;		/**< tx_tail % tx_cap */
	uint64_t tx_limit;		/**< credit + tx_cap as last loaded: write below it */
	const uint32_t *tx_armed;	/**< the armed word of the peer's ring header */
	uint32_t tx_armed_bit;		/**< and its bit ([F]: is the peer blocked?) */
	uint64_t tx_rdma_tail;		/**< tail of our last RDMA send, till seen */
	uint32_t rdma_threshold;
	struct clanq_region stage;	/**< RDMA source, mirrors the peer's ring */
	bool closing;
	struct clanq_conn *next_hot;
	void *hs;			/**< connecting: lib/handshake.h */
	struct clanq_conn *prev_hot;	/**< the hot ring's other direction */
	uint32_t interest;		/**< CLANQ_NET_IN | OUT: what the loop reports */
	uint32_t opt_flags;		/**< opts->flags of connect or accept */
	/* deadlines of blocking sends and receives: < 0 none (the default) */
	int64_t send_timeout_ns, recv_timeout_ns;
	uint64_t send_deadline;		/**< this send's, once computed (0: not yet) */
	unsigned int send_flags;	/**< this send's CLANQ_MSG_* */
	/* non-blocking connect (CLANQ_CONN_NONBLOCK) */
	struct clanq_conn *next_connecting, *prev_connecting;
	bool nonblock, in_connecting;
	bool connected_unreported;	/**< CLANQ_NET_OUT owed for "connected" */
	bool connect_failed;		/**< RESET by its handshake: never opened */
	/* counts */
	uint64_t msgs_in, msgs_out, bytes_in, bytes_out, rdma_sends, credit_waits;
	/* lib/onesided.c: its tripwires, and those fired, not yet taken */
	struct clanq_conn_tw *tws;
	struct clanq_conn_tw *tw_fired_head, *tw_fired_tail;
	/*
	 * lib/msg.c: the bulk window of large messages (ring.h,
	 * CLANQ_REC_BULK). Receive side: ours, made when the first large
	 * message comes (bulk_want bytes; 0: none), and what we consumed
	 * of it and handed back. Send side: the peer's, imported when it
	 * offers one, by PIO or from a staging mirror by RDMA.
	 */
	struct clanq_region bulk;
	uint64_t bulk_cap, bulk_head, bulk_returned;
	uint32_t bulk_want;
	bool bulk_refused;		/**< could not make ours: fragments */
	bool bulk_tx_refused;		/**< could not use the peer's: fragments */
	bool bulk_tx_rdma;		/**< the peer's is written by RDMA */
	struct clanq_ap bulk_tx;
	struct clanq_region bulk_stage;	/**< RDMA source, mirrors the peer's window */
	uint64_t bulk_tx_cap, bulk_tail;
	uint64_t bulk_want_at;		/**< as tx_want_at, for the bulk window */
	uint64_t zc_done;		/**< zero-copy sends whose last write completed */
	uint64_t zc_sends;		/**< large messages sent from registered memory */
};


/* Shared between the library's files, not part of its ABI. */
#pragma GCC visibility push(hidden)

/*
 * An internal send flag (above every public CLANQ_MSG_*): do not wait
 * for credit, but do wait (bounded) for our last RDMA send's tail before
 * a PIO store. The FIN of a close, which must not be lost to -EAGAIN.
 */
#define CLANQ_MSG_SETTLE	0x40000000u

/*
 * Another: this record goes by RDMA even if it could go by PIO (a BULK
 * record after the piece it names, which went by RDMA: one queue keeps
 * them in order).
 */
#define CLANQ_MSG_RDMA		0x20000000u

/*
 * How long a PIO send waits for the engine to have written the tail of
 * our last RDMA send, without a send timeout: the engine on one host
 * takes microseconds, an emulated one with a large record up to a
 * second; a peer that scribbles the word must not hold us for ever.
 */
#define CLANQ_CONN_SETTLE_NS	(30 * 1000 * 1000 * 1000ull)

/*
 * What tx_armed points at when the aperture has no armed bitmap: a word
 * of each file's own (static: the native benchmark builds this header
 * against the shared library too, which exports no internals).
 */
static const uint32_t clanq_conn_never_armed;

/*
 * The send side's state once c->tx (the aperture onto the peer's ring,
 * mapped or not) is set up: the ring is empty, all of it is credit, and
 * the word of the region's armed bitmap that says whether the peer
 * sleeps on its ring's header (block 0 of the window) is found once.
 */
static inline void clanq_conn_tx_init(struct clanq_conn *c, uint64_t cap)
{
	uint64_t b = c->tx.region_off >> CLANQ_TW_BLOCK_SHIFT;

	c->tx_cap = cap;
	c->tx_tail = 0;
	c->tx_pos = 0;
	c->tx_limit = cap;
	c->tx_armed = c->tx.armed ? &c->tx.armed[b / 32] : &clanq_conn_never_armed;
	c->tx_armed_bit = 1u << (b % 32);
}

/*
 * Probe passes (clanq_net_probe()): at most one per this long, since a
 * peer that keeps our OOB queue full moves its drop counter at will.
 */
#define CLANQ_NET_PROBE_NS	(10 * 1000 * 1000ull)

/*
 * When a wait that ends at deadline must wake instead, to make the probe
 * pass a drop since the last one owes (not yet due then): every wait of
 * the library bounds itself by this, so a notice lost to a full queue is
 * still found, CLANQ_NET_PROBE_NS late at most.
 */
static inline uint64_t clanq_net_probe_wake(const struct clanq_net *net,
					    uint64_t deadline)
{
	if (clanq_ep_dropped(&net->ep) == net->oob_dropped_seen ||
	    net->probe_due >= deadline)
		return deadline;
	return net->probe_due;
}

/* The cookie of a revocation notice: slot and generation. */
static inline uint64_t clanq_conn_notice_cookie(const struct clanq_net *net, uint32_t slot)
{
	return (uint64_t)net->gen[slot] << 32 | slot;
}

int clanq_net_slot_get(struct clanq_net *net, struct clanq_conn *c);
void clanq_net_slot_put(struct clanq_net *net, struct clanq_conn *c);
struct clanq_conn *clanq_net_conn(struct clanq_net *net, uint32_t slot);
void clanq_net_hot(struct clanq_net *net, struct clanq_conn *c);
void clanq_net_unhot(struct clanq_net *net, struct clanq_conn *c);
/* A connection's nonce: from the net's pool, refilled when empty. */
int clanq_net_nonce(struct clanq_net *net, uint64_t *v);
/* Take one event of net->evq and act on it (or stash the application's). */
void clanq_net_handle(struct clanq_net *net, const struct clanq_event *ev);
/* Wait for anything on the net until deadline (absolute, ~0: none). */
int clanq_net_block(struct clanq_net *net, uint64_t deadline);
void clanq_listener_intake(struct clanq_listener *l);

/* conn.c */
void clanq_conn_reset(struct clanq_conn *c, int err);
void clanq_conn_on_revoked(struct clanq_conn *c);
void clanq_conn_hs_msg(struct clanq_conn *c, const struct clanq_oob_msg *m);
void clanq_conn_probe(struct clanq_conn *c);
/* an accepted connection this CONNECT belongs to: send its ACCEPT again */
bool clanq_conn_resend_accept(struct clanq_net *net, const struct clanq_addr src,
			      uint32_t conn, uint64_t nonce);
/*
 * Non-blocking connects: retransmit those due, fail those past their
 * timeout, and set net->connect_due to the next due time (~0: none).
 */
void clanq_net_tick_connects(struct clanq_net *net);

/* msg.c */
/* A record (or the FIN) is in our ring, unread (no system call). */
bool clanq_conn_has_data(struct clanq_conn *c);
/* The peer is gone, its end in our header where we have read to. */
bool clanq_conn_fin_in_hdr(struct clanq_conn *c);
/* Hand back the credit we owe, if any: before we block. */
int clanq_conn_return_credit(struct clanq_conn *c);
/*
 * The same, but a flush the store owes (the peer sleeps on its ring) is
 * described in *fl for the caller's next system call instead of made:
 * 1 if it is, 0 if none is owed, -errno.
 */
int clanq_conn_return_credit_owed(struct clanq_conn *c, struct clanq_evq_arm *fl);
/* Answer the peer's hdr.want, if it moved. */
void clanq_conn_answer_want(struct clanq_conn *c);
int clanq_conn_write_fin(struct clanq_conn *c);
/* RDMA completions: errors reset their connections. */
void clanq_net_drain_rdma(struct clanq_net *net);
/* lib/onesided.c's records (a region descriptor): as clanq_send() */
int clanq_conn_send_rec(struct clanq_conn *c, uint16_t type, const void *buf,
			size_t len, unsigned int flags);
/* the record at our head, in place: as clanq_conn_wait_msg() */
int clanq_conn_head_rec(struct clanq_conn *c, struct clanq_rec *h,
			const void **data, unsigned int flags);
void clanq_conn_take_rec(struct clanq_conn *c);

/* onesided.c */
/* a connection tripwire fired (its bit, taken): c reports CLANQ_NET_TW */
void clanq_conn_tw_on_fire(struct clanq_net *net, struct clanq_conn_tw *t);
/* c closes: its tripwires go */
void clanq_conn_tw_drop_all(struct clanq_conn *c);
/* the net closes: its tables go */
void clanq_net_onesided_free(struct clanq_net *net);

#pragma GCC visibility pop

#endif /* _CLANQ_LIB_NET_INTERNAL_H */
