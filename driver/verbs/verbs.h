/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The verbs wire's insides (clanq_verbs.ko), shared by its files:
 *
 *	verbs_main.c		the module, its parameters, the wire's operations
 *			and administration, RDMA devices coming and going
 *	verbs_conn.c		a connection's life: the RDMA CM, set-up, teardown
 *	verbs_post.c		posting sends and receives, their completions, and
 *			delivering what arrives
 *	verbs_export.c	the exporter's side of a region: register, grant,
 *			WROTE, revoke
 *	verbs_import.c	the importer's side: ask, collect the grants, the
 *			remote region an aperture holds
 *	verbs_write.c		an RDMA write chunk: WRITEs then its WROTE; a
 *			READ chunk; an atomic then its WROTE
 *	wire_msg.h	what goes on the wire, and its checks
 *
 * Files here include clanq_drv.h (the core, through ../) and this
 * header; nothing in the core includes a header of this directory.
 */
#ifndef _CLANQ_VERBS_H
#define _CLANQ_VERBS_H

#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

#include "../clanq_drv.h"
#include "wire_msg.h"

#define CLANQ_V_SLOTS		128	/* sends, and receives, per connection */
/* send queue entries beside the SENDs: RDMA WRITEs, REG_MRs */
#define CLANQ_V_WR_CREDITS	256
#define CLANQ_V_MAX_SGE		32
/* READs and atomics in flight per connection, at most (the CM's depths) */
#define CLANQ_V_RD_ATOM		16
/* rdma_rw contexts with a registration (iWARP READs) at once, per QP */
#define CLANQ_V_RDMA_CTXS	64
#define CLANQ_V_MR_PAGES	512	/* pages per registration, at most */
#define CLANQ_V_RESOLVE_MS	2000
#define CLANQ_V_ACK_TIMEOUT	14	/* 4.096 us << 14: 67 ms per retry */
/* chunks waiting for a send slot: how often to look whether the peer stalled */
#define CLANQ_V_RETRY_MS	100
/*
 * siw sends a READ response of at most 32 bytes (MAX_HDR_INLINE) from
 * one page even when it crosses a page boundary (siw_try_1seg(), 6.12):
 * a READ that short goes as a READ per 4 KiB page of the exporter's
 */
#define CLANQ_V_IW_SHORT_READ	64

#define CLANQ_V_BUFS_SIZE	(2 * CLANQ_V_SLOTS * CLANQ_WMSG_MAX)

/*
 * The OOB messages an active connection carried last, by seq (a power of
 * two, twice the send slots): what an UNREACHABLE may answer. A notice
 * for one older than that, or for none, or a second one, is dropped.
 */
#define CLANQ_V_SENT		256
/* seqs wrap at 2^32: each keeps its record's index across the wrap */
static_assert((CLANQ_V_SENT & (CLANQ_V_SENT - 1)) == 0);

/*
 * One of them: whom it was from and for, and what its notice says
 * (built from this, not from the peer's echo of it).
 */
struct clanq_vsent {
	u32 seq;
	u32 src_id, dst_id;
	u32 type, len;
	bool live;		/* sent, not answered yet */
	u8 head[sizeof_field(struct clanq_oob_unreachable, head)];
};

struct clanq_vbuf {
	struct ib_cqe cqe;
	struct clanq_vconn *conn;
	void *data;
	u64 dma;
	u32 idx;
	/* a send: the entries posted ahead of it, given back with it */
	u32 credits;
	struct clanq_vwrite *write;	/* the chunk its WROTE ends */
};

/*
 * One chunk of an RDMA write on its way (the importer's): a piece per
 * registration of the destination it crosses, each an rdma_rw context
 * over the source region's pages.
 */
struct clanq_vwrite_piece {
	struct rdma_rw_ctx rw;
	struct sg_table sgt;
	bool rw_ready;
	u64 raddr;	/* page-space offset at the exporter */
	u32 rkey;
};

struct clanq_vwrite {
	struct clanq_kep *ep;		/* referenced until the engine is told */
	u32 chunk;			/* the engine's name for it */
	int status;
	struct work_struct done;	/* tells the engine (clanq_v_done_wq) */
	struct list_head orphan;	/* conn->orphans: half posted */
	/*
	 * Waiting for a send slot (conn->waiting), not yet posted: what the
	 * post needs, and the requester, referenced (@waiter) until it is
	 * posted or fails.
	 */
	struct list_head waiting;
	struct clanq_kep *waiter;
	struct clanq_vimport *imp;
	struct clanq_kap *ap;
	u32 src_node;
	u32 credits;
	bool wrote;
	u64 off, len;			/* the WROTE's bytes, page space */
	unsigned long since;		/* jiffies: when it began to wait */
	/* DMA_TO_DEVICE: WRITEs from the source; DMA_FROM_DEVICE: READs into it */
	enum dma_data_direction dir;
	/* an atomic: its work request, and where the old value lands */
	struct ib_atomic_wr atomic;
	struct ib_sge old_sge;
	u64 *old;			/* kmalloc()ed; NULL but for atomics */
	u64 old_dma;
	bool old_mapped;
	u64 *result;			/* the engine's: *old is copied there */
	/* a WRITE chunk: its immediate, if its one WRITE may carry it (or 0) */
	u32 imm;
	unsigned int nr_pieces;
	struct clanq_vwrite_piece piece[] __counted_by(nr_pieces);
};

/*
 * A region of a peer's node imported here: what the aperture holds, and
 * where its bytes are on the exporter's device.
 */
struct clanq_vimport {
	struct clanq_kregion region;
	struct clanq_vconn *conn;	/* active, referenced: granted over it */
	struct list_head node;		/* conn->imports, under conn->lock */
	bool revoked;			/* under conn->lock */
	u64 span;
	u32 first;
	u32 imm_slot;			/* the exporter's, for WRITE_WITH_IMM; 0: none */
	/* why it cannot do atomics (region.no_atomics points here), or "" */
	char no_atomics[64];
	u16 nr_mrs;
	u32 rkeys[] __counted_by(nr_mrs);
};

/* An import asked for, its GRANTs (or REFUSE) coming in. */
struct clanq_vpending {
	struct list_head node;		/* conn->pending, under conn->lock */
	u32 req, id;
	struct completion done;
	bool settled;
	bool answered;			/* by the exporter: GRANTs, or REFUSE */
	int err;
	u16 got;
	struct clanq_wmsg_rgn grant;	/* the first GRANT's geometry */
	DECLARE_BITMAP(have, CLANQ_WMSG_MAX_MRS);
	u32 rkeys[CLANQ_WMSG_MAX_MRS];
};

/* A registration of one span of an exported region. */
struct clanq_vmr {
	struct ib_mr *mr;
	struct sg_table sgt;
	bool mapped;
};

/*
 * A region of this node granted to the peer of a passive connection.
 * Revoked on a device whose deregistration does not fence its own
 * accesses (siw), it moves to conn->held: deregistered, the region let
 * go, its pages held by references of their own until the QP is gone.
 */
struct clanq_vexport {
	struct list_head node;		/* conn->exports or ->held, conn->lock */
	struct clanq_kregion *region;	/* referenced, its memory held; NULL held */
	unsigned long held;		/* pages referenced here, once held */
	struct clanq_vconn *conn;	/* the one it was granted over */
	u64 span;
	int access;			/* IB_ACCESS_* of its registrations */
	u32 imm_slot;			/* in conn->imm_slots; 0: none */
	u16 nr_mrs;
	struct clanq_vmr mrs[] __counted_by(nr_mrs);
};

struct clanq_vconn {
	struct kref ref;
	struct clanq_nic *nic;		/* active: the sender's; passive: the one asked for */
	struct clanq_kpeer *peer;	/* referenced */
	bool active;
	char dev[CLANQ_WIRE_DEV_MAX];	/* active: the binding when it began */
	u32 port;

	struct mutex cm_mutex;		/* setup in the CM handler vs teardown */
	bool dead;			/* under cm_mutex: teardown began */
	struct rdma_cm_id *cm_id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	bool have_qp;
	u32 max_sge;			/* a WRITE's, as the QP was made */
	u8 *bufs;			/* rx[] then tx[] data, one mapping */
	u64 bufs_dma;
	bool mapped;

	spinlock_t lock;		/* state, error, tx_free, the lists below */
	u32 state;			/* CLANQ_PEER_* */
	int error;
	bool torn;			/* teardown queued */
	u32 nr_tx_free;
	u32 tx_free[CLANQ_V_SLOTS];
	u32 nr_wr_free;			/* of CLANQ_V_WR_CREDITS */
	struct ib_cqe wr_cqe;		/* WRITEs, REG_MRs: only errors complete */
	int wr_error;			/* the first of them to fail */
	u32 next_req;
	/* active: the OOB messages sent last, by seq (an UNREACHABLE's check) */
	u32 next_seq;
	struct clanq_vsent *sent;
	struct list_head pending;	/* active: clanq_vpending */
	struct list_head imports;	/* active: clanq_vimport */
	struct list_head exports;	/* passive: clanq_vexport */
	/* passive: revoked exports whose pages the device may still touch */
	struct list_head held;
	unsigned long nr_held;		/* their pages */
	struct ida imm_slots;		/* passive: the exports' immediate slots */
	bool imm;			/* active: WRITE_WITH_IMM may be used */
	unsigned int exports_busy;	/* taken off exports, not yet freed */
	struct list_head orphans;	/* clanq_vwrite half posted */
	/*
	 * clanq_vwrite that found no send slot, in the order they came: the
	 * engine does not wait for a slot (it would stall every queue of the
	 * NIC behind one slow peer), the chunk waits here and @retry posts
	 * it when a slot comes back (clanq_vconn_give_back())
	 */
	struct list_head waiting;
	struct delayed_work retry;
	/* sends complete in order on an RC QP: when each in flight left */
	u32 tx_posted, tx_acked;
	unsigned long tx_when[CLANQ_V_SLOTS];
	unsigned long tx_last_ack;	/* jiffies of the last send completion */
	wait_queue_head_t wq;		/* state changes, free slots */
	struct mutex post;		/* posting vs. teardown */

	struct clanq_vbuf rx[CLANQ_V_SLOTS];
	struct clanq_vbuf tx[CLANQ_V_SLOTS];
	struct work_struct teardown;
	struct list_head node;		/* clanq_v_conns */
};

/* verbs_main.c: the module's parameters and the state its files share */
extern unsigned int clanq_v_port;
extern unsigned int clanq_v_connect_ms;
extern unsigned int clanq_v_ack_ms;
extern bool clanq_v_write_imm;
extern unsigned int clanq_v_held_max_mb;
/* pages of revoked exports held on every connection (clanq_vexport.held) */
extern atomic_long_t clanq_v_held_pages;
/* what a peer sent that was dropped: the read-only parameters of the same names */
extern atomic64_t clanq_v_notices_forged;
extern atomic64_t clanq_v_rx_malformed;
extern atomic64_t clanq_v_rx_misdirected;
#ifdef CLANQ_TEST_KNOBS
extern bool clanq_v_test_deaf;
#define clanq_v_deaf()	READ_ONCE(clanq_v_test_deaf)
extern bool clanq_v_test_trust;
#define clanq_v_trusting()	READ_ONCE(clanq_v_test_trust)
/* verbs_hostile.c: a hostile peer, in test builds only */
void clanq_vhostile_saw(struct clanq_vconn *conn, const struct clanq_wmsg *m,
			bool unreachable);
void clanq_vhostile_stop(void);
int clanq_vconn_send_raw(struct clanq_vconn *conn, const void *buf, size_t len);
#else
#define clanq_v_deaf()	false
#define clanq_v_trusting()	false
static inline void clanq_vhostile_saw(struct clanq_vconn *conn,
				      const struct clanq_wmsg *m, bool unreachable)
{
}

static inline void clanq_vhostile_stop(void)
{
}
#endif
/* guards peer->conn and clanq_v_conns */
extern spinlock_t clanq_v_lock;
extern struct list_head clanq_v_conns;
/* teardowns */
extern struct workqueue_struct *clanq_v_wq;
/* where finished chunks are told to the engine: never behind a teardown */
extern struct workqueue_struct *clanq_v_done_wq;
/*
 * A grant (registering, posting) against a region's revocation, which
 * must not free an export a grant is still posting from
 */
extern struct mutex clanq_v_export_mutex;

/* verbs_conn.c */
int clanq_vconn_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
const char *clanq_vconn_devname(const struct clanq_vconn *conn);
struct clanq_vconn *clanq_vconn_connect(struct clanq_nic *nic,
					struct clanq_kpeer *peer);
void clanq_vconn_kill(struct clanq_vconn *conn, int err);
void clanq_vconn_kill_where(bool (*match)(struct clanq_vconn *, const void *),
			    const void *arg, int err);
void clanq_vconn_put(struct clanq_vconn *conn);
void clanq_vconn_up(struct clanq_vconn *conn, struct rdma_cm_id *id);

/* Another reference on @conn, which the caller holds. */
static inline void clanq_vconn_get(struct clanq_vconn *conn)
{
	kref_get(&conn->ref);
}

/* verbs_post.c */
void clanq_vconn_give_back(struct clanq_vconn *conn, struct clanq_vbuf *b);
bool clanq_vconn_stalled(struct clanq_vconn *conn);
int clanq_vconn_post_locked(struct clanq_vconn *conn, struct clanq_vbuf *b,
			    struct ib_send_wr *head,
			    const struct ib_send_wr **bad);
int clanq_vconn_post_recv(struct clanq_vconn *conn, struct clanq_vbuf *b);
void clanq_vconn_rx_done(struct ib_cq *cq, struct ib_wc *wc);
int clanq_vconn_send(struct clanq_vconn *conn, u8 type,
		     const struct clanq_addr *dst,
		     const struct clanq_oob_msg *msg, u32 seq, bool wait);
int clanq_vconn_send_region(struct clanq_vconn *conn, u8 type,
			    const struct clanq_wmsg_rgn *r,
			    struct ib_send_wr *ahead, bool wait);
struct ib_send_wr *clanq_vconn_send_wr(struct clanq_vconn *conn,
				       struct clanq_vbuf *b, size_t len,
				       struct ib_send_wr *wr,
				       struct ib_sge *sge);
struct clanq_vbuf *clanq_vconn_take(struct clanq_vconn *conn,
				    u32 credits, bool wait);
void clanq_vconn_tx_done(struct ib_cq *cq, struct ib_wc *wc);
void clanq_vconn_wr_failed(struct ib_cq *cq, struct ib_wc *wc);

/* verbs_export.c */
void clanq_vexport_free_all(struct clanq_vconn *conn);
void clanq_vexport_grant(struct clanq_vconn *conn, const struct clanq_wmsg_rgn *q);
void clanq_vexport_region_gone(struct clanq_kregion *r);
void clanq_vexport_wrote(struct clanq_vconn *conn, const struct clanq_wmsg_rgn *w);
void clanq_vexport_wrote_imm(struct clanq_vconn *conn, u32 imm, u32 len);

/* verbs_import.c */
void clanq_vimport_granted(struct clanq_vconn *conn, u8 type,
			   const struct clanq_wmsg_rgn *g);
struct clanq_kregion *clanq_vimport_new(struct clanq_nic *src,
					const struct clanq_addr *addr,
					u64 key);
void clanq_vimport_revoke(struct clanq_vconn *conn, bool one,
			  u32 id);
void clanq_vimport_settle(struct clanq_vpending *p, int err);

/* verbs_write.c */
int clanq_vwrite_chunk(struct clanq_nic *src, const struct clanq_wire_write *w);
int clanq_vread_chunk(struct clanq_nic *src, const struct clanq_wire_write *w);
int clanq_vatomic(struct clanq_nic *src, const struct clanq_wire_write *w);
void clanq_vwrite_free_orphans(struct clanq_vconn *conn);
void clanq_vwrite_retry(struct work_struct *work);
void clanq_vwrite_retry_queue(struct clanq_vconn *conn, bool now);
void clanq_vwrite_fail_waiting(struct clanq_vconn *conn);
void clanq_vwrite_unmap(struct clanq_vwrite *wr, struct clanq_vconn *conn);
void clanq_vwrite_release(struct clanq_vwrite *wr);

#endif /* _CLANQ_VERBS_H */
