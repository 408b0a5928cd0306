/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq: connections and messages, on the primitives of <clanq.h>.
 * Link with -lclanq.
 */
#ifndef _CLANQ_NET_H
#define _CLANQ_NET_H

#include <clanq.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Connections and messaging (paper sections 3.1 and 4): listen, connect,
 * accept and close over OOB messages (the protocol is the library's,
 * lib/handshake.h); messages through a ring in the receiver's region,
 * written by the sender through an aperture (the ring's layout is the
 * library's: lib/ring.h in the source).
 *
 * Threads. A clanq_net and everything on it (listeners, connections)
 * belongs to one thread at a time, as a UCX worker does: the calls below
 * share the net's endpoint and its connection table and take no lock.
 * A program with several threads opens a net per thread (each on its
 * own clanq_dev). Blocking calls wait in the driver without losing a
 * wake-up (tripwires, the event queue) after spinning the net's spin
 * time (clanq_net_set_spin()).
 *
 * Cost. An idle connection costs each side one region (its receive
 * ring, rounded up to pages), the driver's armed bitmap page of that
 * region, one tripwire, one aperture onto the peer's ring and its two
 * mappings; a default ring is one page. No thread, no timer.
 *
 * Peer death. Each side imports the other's ring with CLANQ_AP_SINK and
 * a notify endpoint (the net's): when the peer's process dies its
 * region is freed, the driver queues CLANQ_OOB_REVOKED on our net
 * endpoint (waking a receive blocked in TW_WAIT, CLANQ_TW_WAIT_OOB), and
 * our stores that raced with it land in a sink page. The connection is
 * then reset: data already in our ring is still delivered, then
 * -ECONNRESET. An orderly close writes a FIN record first: the peer
 * reads its data, then end of stream (0).
 */

#define CLANQ_NET_SPIN_NS_DEFAULT	15000	/**< as the paper's server; 0 on one CPU */
#define CLANQ_CONN_RING_DEFAULT		4032	/**< one page, less the ring's header */
#define CLANQ_CONN_TIMEOUT_NS_DEFAULT	(5ull * 1000 * 1000 * 1000)

/*
 * The three objects are the library's: it allocates them, and their
 * insides are not part of the ABI. What an application may read of them
 * it reads through the calls below.
 */
struct clanq_net;
struct clanq_listener;
struct clanq_conn;

/** What a net counts, for tools: never reset, the net's own. */
struct clanq_net_stats {
	uint64_t conns_opened, conns_closed, conns_reset;
	uint64_t connects_sent;	/**< CONNECT messages, retransmissions too */
	uint64_t accepts_sent, refused;
	uint64_t ignored;	/**< OOB messages stale, duplicated or forged */
	uint64_t probes;	/**< liveness probes after a lost notice */
	uint64_t arms;		/**< tripwires armed before blocking */
	uint64_t blocks;	/**< waits that went to the driver */
};

/** Attributes of a new net; zero picks the default. */
struct clanq_net_attr {
	unsigned int max_conns;	/**< connections at once (default 1024) */
	unsigned int oob_slots;	/**< its endpoint's OOB queue (default 256) */
};

/**
 * \brief Open a net on dev: an endpoint, an event queue, a connection
 * table; *netp gets it. dev stays open while the net is.
 * \return 0; -EINVAL; -ENOMEM; -errno from the driver.
 */
int clanq_net_open(struct clanq_net **netp, struct clanq_dev *dev,
		   const struct clanq_net_attr *attr);

/**
 * \brief Close a net: every listener and connection on it is closed,
 * and the net and they are freed.
 */
int clanq_net_close(struct clanq_net *net);

/**
 * \brief How long clanq_net_wait() and the blocking calls spin before
 * they wait in the driver (default CLANQ_NET_SPIN_NS_DEFAULT).
 */
void clanq_net_set_spin(struct clanq_net *net, uint64_t spin_ns);

/** \brief The net's counters, copied into *stats. */
void clanq_net_stats(const struct clanq_net *net, struct clanq_net_stats *stats);

/** \brief Connections on the net now, in any state. */
unsigned int clanq_net_nr_conns(const struct clanq_net *net);

/**
 * \brief The net's event queue, for the application's own endpoints:
 * their events come back from clanq_net_wait() as CLANQ_NET_OTHER.
 */
struct clanq_evq *clanq_net_evq(struct clanq_net *net);

/** \brief The address of the net's endpoint (handshakes, notices). */
struct clanq_addr clanq_net_addr(const struct clanq_net *net);

/**
 * \brief Listen on service (1 .. CLANQ_SERVICE_MAX) of net's node, with
 * room for backlog connections not yet accepted; more are refused.
 * *lp gets the listener.
 * \return 0; -EADDRINUSE; -EACCES below CLANQ_SERVICE_PRIV without
 *         CAP_NET_BIND_SERVICE; -EINVAL; -ENOMEM.
 */
int clanq_listen(struct clanq_net *net, struct clanq_listener **lp,
		 unsigned int service, unsigned int backlog);

/** \brief Stop listening: pending connections are refused; l is freed. */
int clanq_listener_close(struct clanq_listener *l);

/** What a listener counts. */
struct clanq_listener_stats {
	uint64_t refused;	/**< connections refused: backlog full, closing */
	uint64_t ignored;	/**< OOB messages stale, duplicated or forged */
};

/** \brief The listener's counters, copied into *stats. */
void clanq_listener_stats(const struct clanq_listener *l,
			  struct clanq_listener_stats *stats);

/** \brief The listener's address: (the net's node, its service). */
struct clanq_addr clanq_listener_addr(const struct clanq_listener *l);

/*
 * Several threads per service: each thread opens its own net and
 * listens on the same service with CLANQ_LISTEN_SHARED, as sockets do
 * with SO_REUSEPORT. The driver hands each connection attempt to one of
 * the listeners, by a hash of the connecting net's address and of the
 * attempt (every retransmission of it to the same listener); a thread
 * accepts, serves and closes its connections on its own net, with no
 * lock. All the listeners must ask to share and belong to one user;
 * up to CLANQ_SHARED_MAX of them. A listener that closes refuses what
 * it had pending; new attempts go to the others.
 */

#define CLANQ_LISTEN_SHARED	0x1u	/**< share the service (above) */
#define CLANQ_LISTEN_FLAGS	CLANQ_LISTEN_SHARED

/**
 * How to listen: clanq_listen_attr().
 *
 * max_rx_ring: the largest receive ring (record bytes) the server
 * allocates for a connection of this listener because the client asked
 * for it (struct clanq_conn_opts.tx_ring on the client's side). The
 * server decides its memory, not the client: a client that asks for
 * more gets this much; 0 means CLANQ_CONN_RING_DEFAULT, so a client
 * cannot make a default server allocate more than a page per
 * connection. The opts->rx_ring of clanq_accept() is the server's own
 * choice and is not capped by it. Otherwise a multiple of 8, at most
 * 1 GiB.
 */
struct clanq_listen_attr {
	uint32_t flags;		/**< CLANQ_LISTEN_* */
	uint32_t max_rx_ring;	/**< cap on what a client asks (0: the default ring) */
	uint32_t reserved[2];	/**< must be zero */
};

/**
 * \brief clanq_listen(), with attr (NULL: as clanq_listen()).
 * \return as clanq_listen(); -EADDRINUSE also if the service is in
 *         use unshared, or shared by another user; -ENOSPC with
 *         CLANQ_SHARED_MAX listeners on it already; -EINVAL for unknown
 *         flags, a max_rx_ring that is no ring size, or non-zero
 *         reserved words.
 */
int clanq_listen_attr(struct clanq_net *net, struct clanq_listener **lp,
		      unsigned int service, unsigned int backlog,
		      const struct clanq_listen_attr *attr);

/** Options of a connection; zero picks the default. */
struct clanq_conn_opts {
	uint64_t timeout_ns;	/**< connect gives up after (default 5 s) */
	uint32_t rx_ring;	/**< our receive ring's record bytes */
	uint32_t tx_ring;	/**< the peer's, that we write (asked for) */
	/**
	 * Messages of this many bytes or more go by the RDMA engine, the
	 * rest by PIO; an aperture that cannot be mapped takes RDMA always.
	 * 0: the default, CLANQ_CONN_RDMA_DEFAULT.
	 */
	uint32_t rdma_threshold;
	uint32_t flags;		/**< CLANQ_CONN_* */
};

/**
 * Do not map the peer's ring: every write goes through the RDMA engine,
 * as it must to a peer on another machine. For tests and measurements.
 */
#define CLANQ_CONN_RDMA_ONLY	0x1u

/**
 * Default RDMA threshold: on the loop wire PIO is one copy by the
 * sender's CPU, RDMA a copy into the staging region plus the engine's
 * copy, so PIO wins at every size (measured: README, clanq-stream); RDMA
 * is what apertures that cannot be mapped use.
 */
#define CLANQ_CONN_RDMA_DEFAULT		0xffffffffu

/** Flags for clanq_send(), clanq_sendv(), clanq_recv(), clanq_recv_peek(). */
#define CLANQ_MSG_DONTWAIT	0x1u	/**< -EAGAIN instead of blocking */

enum clanq_conn_state {
	CLANQ_CONN_CONNECTING = 1,
	CLANQ_CONN_OPEN,
	CLANQ_CONN_FIN,		/**< the peer closed: what is left, then 0 */
	CLANQ_CONN_RESET,	/**< the peer died or broke the protocol */
};

/**
 * \brief Connect to service on node: a handshake over OOB messages
 * (retransmitted when lost) exchanging the rings, then both sides can
 * send. Blocks up to opts->timeout_ns. *cp gets the connection.
 * \return 0; -ECONNREFUSED if nobody listens there or the backlog is
 *         full; -ETIMEDOUT; -EHOSTUNREACH for an unknown node; -ENOSPC
 *         at net's max_conns; -EINVAL for bad opts; -errno.
 */
int clanq_connect(struct clanq_net *net, struct clanq_conn **cp, uint32_t node,
		  unsigned int service, const struct clanq_conn_opts *opts);

/**
 * \brief Accept the oldest pending connection of l into *cp. Waits up
 * to timeout_ns (-1: for ever; 0: take one only if it is there).
 * \return 0; -ETIMEDOUT (-EAGAIN for timeout 0) with none; -ENOSPC at
 *         max_conns; -errno.
 */
int clanq_accept(struct clanq_listener *l, struct clanq_conn **cp,
		 const struct clanq_conn_opts *opts, int64_t timeout_ns);

/**
 * \brief Close: a FIN record to the peer (if its ring has room for it),
 * then the ring, the aperture and the tripwire go, and c is freed.
 * Never blocks.
 */
int clanq_conn_close(struct clanq_conn *c);

/**
 * \brief The longest message c can send: CLANQ_CONN_MSG_MAX, whatever
 * the rings (see clanq_conn_eager_max() for the longest in one record).
 */
size_t clanq_conn_max_msg(const struct clanq_conn *c);

/** \brief Where c stands (enum clanq_conn_state). */
enum clanq_conn_state clanq_conn_state(const struct clanq_conn *c);

/** \brief Why c was reset (-ECONNRESET, -EPROTO, ...); 0 if it was not. */
int clanq_conn_error(const struct clanq_conn *c);

/** \brief The address of the peer net's endpoint. */
struct clanq_addr clanq_conn_peer(const struct clanq_conn *c);

/**
 * \brief The application's word on c, 0 until set: what a server keeps
 * to find its own state from a struct clanq_net_event.
 */
uint64_t clanq_conn_get_cookie(const struct clanq_conn *c);
void clanq_conn_set_cookie(struct clanq_conn *c, uint64_t cookie);

/** What a connection counts, both directions. */
struct clanq_conn_stats {
	uint64_t msgs_in, msgs_out, bytes_in, bytes_out;
	uint64_t rdma_sends;	/**< records the RDMA engine carried (each piece of a large one) */
	uint64_t credit_waits;	/**< sends that found no room in the peer's ring */
};

/** \brief c's counters, copied into *stats. */
void clanq_conn_stats(const struct clanq_conn *c, struct clanq_conn_stats *stats);

/**
 * \brief Send one message of len bytes (1 .. clanq_conn_max_msg()).
 * Without credit it blocks (spins, then waits for the peer's credit in
 * the driver), or with CLANQ_MSG_DONTWAIT returns -EAGAIN. No system
 * call while the peer polls; one (the flush) when it is blocked.
 * A message longer than clanq_conn_eager_max() goes through the ring in
 * pieces: once its first is sent the call waits for room for the rest,
 * whatever the flags (an error then resets the connection).
 * \return 0; -EMSGSIZE; -EINVAL for len 0; -EAGAIN; -EPIPE after the
 *         peer closed; -ECONNRESET; -EPROTO if the peer broke the ring.
 */
int clanq_send(struct clanq_conn *c, const void *buf, size_t len,
	       unsigned int flags);

/** \brief clanq_send() of the concatenation of iov[0 .. iovcnt). */
int clanq_sendv(struct clanq_conn *c, const struct iovec *iov, int iovcnt,
		unsigned int flags);

/**
 * \brief Receive one message into buf (len bytes of room). Blocks (spin,
 * then the tripwire on our ring's tail) unless CLANQ_MSG_DONTWAIT.
 * A large message (longer than the peer's clanq_conn_eager_max()) is
 * copied into buf piece by piece as the peer sends them: once it has
 * begun the call waits for the rest, whatever the flags; a peer that
 * dies or closes first resets the connection (-ECONNRESET, -EPIPE).
 * \return its length (> 0); 0 at end of stream (the peer closed);
 *         -EMSGSIZE if it is longer than len (it stays queued:
 *         clanq_recv_size() says how long); -EAGAIN; -ECONNRESET;
 *         -EPROTO; -EINTR.
 */
ssize_t clanq_recv(struct clanq_conn *c, void *buf, size_t len,
		   unsigned int flags);

/**
 * \brief Zero copy: the next message, in place in the ring, until
 * clanq_recv_done(). The peer cannot overwrite it meanwhile without
 * breaking the protocol (it has no credit for that space). Only for a
 * message that fits in one record: a large one is never whole in the
 * ring, and is left queued with -EMSGSIZE (clanq_recv() takes it).
 * \return its length (> 0) with *data set; as clanq_recv() otherwise.
 */
ssize_t clanq_recv_peek(struct clanq_conn *c, const void **data,
			unsigned int flags);

/** \brief Done with the message clanq_recv_peek() returned. */
void clanq_recv_done(struct clanq_conn *c);

/** \brief Is a message (or the end) there to receive? No system call. */
bool clanq_conn_readable(struct clanq_conn *c);

/*
 * Messages of any size (lib/msg.c). A message longer than one record
 * of the peer's ring travels through that ring as a LARGE record and
 * fragments, copied straight from the sender's buffers into the
 * receiver's: neither side allocates anything for it, whatever the
 * peer claims.
 */
/** The longest message, whatever the rings: 1 GiB. */
#define CLANQ_CONN_MSG_MAX	0x40000000ull

/**
 * \brief The longest message c sends in one record of the peer's ring
 * (half the ring less 16 bytes): the eager size. Longer ones, up to
 * clanq_conn_max_msg(), go in pieces; clanq_recv_peek() sees only these.
 */
size_t clanq_conn_eager_max(const struct clanq_conn *c);

/**
 * \brief clanq_recv() into the concatenation of iov[0 .. iovcnt): the
 * message is scattered across them in order; the room is their sum.
 * \return as clanq_recv(); -EINVAL for a bad iov or flags.
 */
ssize_t clanq_recvv(struct clanq_conn *c, const struct iovec *iov, int iovcnt,
		    unsigned int flags);

/**
 * \brief The length of the next message, which stays queued: to size
 * the buffer for clanq_recv(). Blocks as clanq_recv() does.
 * \return its length (> 0); 0 at end of stream; -EAGAIN; -ECONNRESET;
 *         -EPROTO (a length the peer may not announce); -EINVAL.
 */
ssize_t clanq_recv_size(struct clanq_conn *c, unsigned int flags);

/** What clanq_net_wait() reports. */
#define CLANQ_NET_IN		0x01u	/**< a message, or end of stream */
#define CLANQ_NET_OUT		0x02u	/**< credit came back */
#define CLANQ_NET_HUP		0x04u	/**< reset (-ECONNRESET) */
#define CLANQ_NET_ACCEPT	0x08u	/**< a listener has a pending one */
#define CLANQ_NET_OTHER		0x10u	/**< an event of the application's */
#define CLANQ_NET_TW		0x20u	/**< a tripwire of the connection's fired */

struct clanq_net_event {
	uint32_t what;			/**< CLANQ_NET_* */
	struct clanq_conn *conn;	/**< IN, OUT, HUP, TW */
	struct clanq_listener *listener;	/**< ACCEPT */
	struct clanq_event ev;		/**< OTHER: as from clanq_net_evq() */
};

/**
 * \brief The server's loop: wait until connections can be read (or were
 * reset, or got credit back) or listeners have connections pending, and
 * report up to max of them. Polls the connections that were busy lately
 * for the net's spin time, then blocks on the net's evq in one system
 * call that also makes the flushes the idle ones' credit owes, arms
 * their tripwires and compares their rings' words with what it last
 * saw (CLANQ_EVQ_WAIT_ARM): a write in between is never slept through.
 * The application may register its own endpoints on that evq (their
 * events come back as CLANQ_NET_OTHER). A connection is reported IN
 * until it is drained, unless muted (clanq_conn_want()). Fair: ready
 * connections are reported round-robin whatever max is (see below).
 * \param timeout_ns  -1: no timeout; 0: look once.
 * \return the number of events (> 0); -ETIMEDOUT; -EINTR; -errno.
 */
int clanq_net_wait(struct clanq_net *net, struct clanq_net_event *evs,
		   unsigned int max, int64_t timeout_ns);

/**
 * \brief Before sleeping in poll(2) or epoll on the fd of
 * clanq_net_evq(net) rather than in clanq_net_wait(): look once, as
 * clanq_net_wait() with timeout 0, and if nothing is ready arm every
 * connection as clanq_net_wait() does before it blocks, in one system
 * call that does not sleep. After 0, whatever would have woken
 * clanq_net_wait() makes the fd readable: a message, credit, a reset,
 * a connection to accept, a tripwire, the application's own events.
 * Timed work is not announced: a non-blocking connect's retransmissions
 * and the net's probe passes happen in the net's calls, so a poll on
 * the fd should have a timeout while connects are under way. As
 * fi_trywait() and io_uring's "arm, then check again".
 * \return events (> 0) as clanq_net_wait(), which may be acted on as
 * its; 0: armed, sleep on the fd; -errno.
 */
int clanq_net_trywait(struct clanq_net *net, struct clanq_net_event *evs,
		      unsigned int max);

/**
 * \brief Handle what arrived on the net's endpoint (answers, notices)
 * without waiting. The blocking calls and clanq_net_wait() do it
 * themselves; sends and receives do it only when they cannot go on
 * alone (out of credit, and every 16th non-blocking receive that finds
 * its ring empty), so a loop that only polls its connections sees a
 * peer's death within those 16 looks, or sooner if it calls this.
 */
void clanq_net_progress(struct clanq_net *net);

/*
 * A fair loop, muting, timeouts and non-blocking connect.
 *
 * Fairness. clanq_net_wait() looks at the net's busy connections as a
 * ring and resumes, each call, just past the last one it looked at; a
 * connection that turns busy joins at the back of the round. So with R
 * connections ready, every one of them is reported within ceil(R / max)
 * calls, whatever max is, and again within as many after that while it
 * stays ready. Pending accepts and the application's own events take
 * at most half of max (with max 1, every other call), so with them the
 * bound is ceil(R / ceil(max / 2)) calls.
 */

/**
 * struct clanq_conn_opts.flags for clanq_connect(): return at once with
 * the connection in CLANQ_CONN_CONNECTING; its handshake goes on inside
 * clanq_net_wait() and clanq_net_progress() (retransmissions at their
 * due times, the timeout of opts->timeout_ns), and its end is an event
 * on it: CLANQ_NET_OUT once it is open ("you may send"), CLANQ_NET_HUP
 * if it failed, with clanq_conn_error() -ECONNREFUSED, -ETIMEDOUT,
 * -EHOSTUNREACH or -ECONNRESET, and state CLANQ_CONN_RESET (close it).
 * Sends and receives on it meanwhile say -ENOTCONN. As connect(2) with
 * O_NONBLOCK and EPOLLOUT.
 */
#define CLANQ_CONN_NONBLOCK	0x2u

/**
 * \brief What clanq_net_wait() reports of c: CLANQ_NET_IN, CLANQ_NET_OUT,
 * both (the default) or neither. A server whose answer waits for credit
 * mutes IN, so that the request it has not consumed does not make the
 * loop spin, and waits for OUT. Muted, c is armed as usual, so the loop
 * blocks; unmuted, it is looked at again at once, so what came
 * meanwhile is reported then. CLANQ_NET_HUP (a reset) is reported
 * whatever the mask says, as epoll reports EPOLLHUP.
 * \return 0; -EINVAL for other bits.
 */
int clanq_conn_want(struct clanq_conn *c, uint32_t what);

/**
 * \brief Deadlines of c's blocking sends (waiting for credit, or for the
 * engine's last RDMA write) and receives, in nanoseconds from the call,
 * as SO_SNDTIMEO and SO_RCVTIMEO: past them the call returns
 * -ETIMEDOUT. Negative: wait for ever (the default). 0: as
 * CLANQ_MSG_DONTWAIT, but -ETIMEDOUT rather than -EAGAIN.
 * \return 0.
 */
int clanq_conn_set_timeouts(struct clanq_conn *c, int64_t send_ns,
			    int64_t recv_ns);

/*
 * Large messages and the bulk window. A message longer than
 * clanq_conn_eager_max() goes in pieces: through the ring as
 * fragments, or, once the receiver offered its bulk window, through
 * that. A receiver offers one when the first message of at least
 * 16 KiB comes on the connection: a region of its own
 * (CLANQ_CONN_BULK_DEFAULT bytes unless clanq_conn_set_bulk() said
 * otherwise, charged to it like any region), which the sender imports
 * and writes pieces of up to a quarter of it into (PIO on one host; by
 * the RDMA engine across hosts, from the application's own pages for
 * the rest of a message of 1 MiB or more in one buffer, registered for
 * the send), the receiver copying each out while
 * the next comes. A window that cannot be made (the memory limit, the
 * net's CLANQ_NET_BULK_BUDGET) or used leaves large messages to
 * fragments: slower, never lost. Both sides need this library (0.4);
 * with an older peer, fragments.
 */
#define CLANQ_CONN_BULK_DEFAULT	(1024u * 1024)	/**< 1 MiB */
/**
 * The bulk windows of one net's connections add up to no more than
 * this: a connection past it keeps its large messages in fragments, so
 * peers that all send large messages cannot spend the context's memory
 * (its max_ctx_bytes) that new connections need.
 */
#define CLANQ_NET_BULK_BUDGET	(32u << 20)
#define CLANQ_CONN_BULK_MIN	(64u << 10)
#define CLANQ_CONN_BULK_MAX	(64u << 20)

/**
 * \brief The bulk window c offers its peer for large messages: bytes, a
 * multiple of 4096 from CLANQ_CONN_BULK_MIN to CLANQ_CONN_BULK_MAX, or
 * 0 for none (the peer sends fragments through the ring). Before the
 * first large message arrives.
 * \return 0; -EINVAL for another size; -EBUSY once the window was
 *         offered.
 */
int clanq_conn_set_bulk(struct clanq_conn *c, size_t bytes);

/*
 * One-sided helpers (lib/onesided.c): a region handed to the peer of a
 * connection in one call each side, and tripwires of a connection's own
 * whose fires clanq_net_wait() reports on it.
 *
 * A region descriptor travels through the connection's ring as a record
 * of its own type (CLANQ_REC_REGION of lib/ring.h), never as a message:
 * clanq_recv() and the other receives that meet one say -ENOMSG and
 * leave it queued, and clanq_conn_recv_region() that meets a message
 * says -ENOMSG and leaves that queued. Both sides need this library
 * (0.4): an older peer resets the connection (-EPROTO) on a descriptor.
 */

/** What a region descriptor says, as clanq_conn_recv_region() found it. */
struct clanq_region_desc {
	uint32_t node;		/**< the region's node: the peer's, checked */
	uint32_t region;	/**< its id on that node */
	uint64_t key;		/**< its export's key */
	uint64_t off, len;	/**< the window imported, in the region */
	uint32_t rights;	/**< CLANQ_RIGHT_* the window is imported with */
	uint32_t reserved;	/**< zero */
};

/**
 * \brief Hand [off, off + len) of region r (of c's net's context) to c's
 * peer with rights (CLANQ_RIGHT_READ, CLANQ_RIGHT_WRITE or both): the
 * region is exported the first time (with exactly these rights; later
 * sends reuse that export and may ask for those rights or fewer), and a
 * descriptor goes through c as a record (not a message). The key of an
 * export opens the whole region with the export's rights: the window
 * and rights of a descriptor are what the peer's library imports, not
 * a bound on a peer that imports by hand. flags: CLANQ_MSG_DONTWAIT.
 * \return 0; -EINVAL for no rights, other rights or flags, len 0, a
 *         window outside r; -EACCES for rights the export lacks; -EBUSY
 *         if r was exported otherwise (by the application, another net);
 *         -EMSGSIZE for a ring too small for it; as clanq_send().
 */
int clanq_conn_send_region(struct clanq_conn *c, const struct clanq_region *r,
			   uint64_t off, uint64_t len, uint32_t rights,
			   unsigned int flags);

/** For clanq_conn_recv_region(): import only, do not map for PIO. */
#define CLANQ_REGION_NOMAP	0x100u

/**
 * \brief Take the region descriptor at the head of c and import its
 * window into ap, then map it for PIO if it has CLANQ_RIGHT_READ and can
 * be mapped, unless CLANQ_REGION_NOMAP (an unmapped aperture takes
 * RDMA); a mapped one is imported with CLANQ_AP_SINK (stores after the
 * peer frees the region land in a sink page). desc (may be NULL) gets
 * what the descriptor said. Every field is the peer's word and is
 * checked: a descriptor that fails a check, or whose import the driver
 * refuses, is consumed and its error returned; c stays open. Blocks as
 * clanq_recv() does, up to timeout_ns (negative: c's receive timeout);
 * flags CLANQ_MSG_DONTWAIT, CLANQ_REGION_NOMAP.
 * \return 0; -ENOMSG if the head is a message (it stays queued);
 *         -EPIPE at end of stream; as clanq_recv(): -EAGAIN,
 *         -ETIMEDOUT, -ECONNRESET, -EPROTO; -EBADMSG for a descriptor
 *         with a bad magic, version, node, rights, length or window;
 *         -ENOENT, -EACCES, -ERANGE as clanq_ap_import().
 */
int clanq_conn_recv_region(struct clanq_conn *c, struct clanq_ap *ap,
			   struct clanq_region_desc *desc, unsigned int flags,
			   int64_t timeout_ns);

/** A tripwire of a connection's (the library's object). */
struct clanq_conn_tw;

/**
 * Connection tripwires a net holds, across its connections: the net's
 * endpoint has this many tripwire slots besides one per connection.
 */
#define CLANQ_NET_TW_MAX	256

/**
 * \brief A tripwire on [off, off + len) of region r (of c's net's
 * context), on the net's own endpoint: a write that lands there (PIO
 * and flush, RDMA) makes clanq_net_wait() report CLANQ_NET_TW on c,
 * until clanq_conn_tw_fired() takes it (whatever clanq_conn_want()
 * says, as a reset is). flags: CLANQ_TW_PERSISTENT
 * (stays armed), CLANQ_TW_ARMED (armed now; else clanq_conn_tw_arm()).
 * A one-shot tripwire is disarmed by its fire, as clanq_tw_create()'s.
 * cookie is the application's (clanq_conn_tw_cookie()). Closing c
 * destroys it.
 * \return 0; -ENOTCONN before c is open; -EINVAL as clanq_tw_create()
 *         and for unknown flags; -ENOSPC past CLANQ_NET_TW_MAX of the
 *         net, or the driver's max_tripwires (clanq_strerror_last()
 *         says which); -ENOMEM.
 */
int clanq_conn_tw_create(struct clanq_conn *c, struct clanq_conn_tw **twp,
			 const struct clanq_region *r, uint64_t off, uint64_t len,
			 uint32_t flags, uint64_t cookie);

/**
 * \brief Arm t again (a system call with a full barrier: look at the
 * watched bytes after it, a write before it fired nothing).
 */
int clanq_conn_tw_arm(struct clanq_conn_tw *t);

/** \brief Disarm t: writes no longer fire it. */
int clanq_conn_tw_disarm(struct clanq_conn_tw *t);

/** \brief Destroy t (a fire not yet taken goes with it); t is freed. */
int clanq_conn_tw_destroy(struct clanq_conn_tw *t);

/**
 * \brief Take up to max of c's tripwires that fired since they were
 * last taken, in the order the net found their fires, into tws: once taken, a tripwire is not
 * reported again until it fires again. No system call.
 * \return how many (0 .. max).
 */
unsigned int clanq_conn_tw_fired(struct clanq_conn *c, struct clanq_conn_tw **tws,
				 unsigned int max);

/** \brief The cookie t was created with. */
uint64_t clanq_conn_tw_cookie(const struct clanq_conn_tw *t);

#ifdef __cplusplus
}
#endif

#endif /* _CLANQ_NET_H */
