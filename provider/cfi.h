/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq-fi.so: the clanq provider of libfabric, its internals.
 *
 * One fabric per clanq NIC (fabric and domain "clanq<N>"): the fabric
 * opens the NIC and one clanq_net on it, which its passive endpoints
 * listen on and its endpoints connect and accept on. A net belongs to
 * one thread at a time (clanq/net.h), so every call into the provider
 * takes the fabric's lock: FI_THREAD_SAFE. Progress is manual: reading
 * a CQ or an EQ moves everything of the fabric on (README.md).
 *
 * Every message on a clanq connection starts with a struct cfi_hdr: the
 * connection manager's records (CONNREQ, ACCEPT, REJECT with their
 * connection data) and the application's messages (remote CQ data).
 */
#ifndef _CLANQ_CFI_H
#define _CLANQ_CFI_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <clanq.h>
#include <clanq/admin.h>
#include <clanq/net.h>

#define CFI_PROV_NAME	"clanq"
#define CFI_PROV_VERSION FI_VERSION(0, 6)
#define CFI_FI_VERSION	FI_VERSION(1, 17)

#define CFI_IOV_MAX	4	/* the application's iovs per message */
#define CFI_INJECT_MAX	1024	/* tx_attr->inject_size */
#define CFI_CM_DATA_MAX	256	/* ep_attr->max_cm_data_size ... our own */
#define CFI_QUEUE_SIZE	1024	/* tx_attr->size, rx_attr->size */
#define CFI_MSG_MAX	(CLANQ_CONN_MSG_MAX - sizeof(struct cfi_hdr))
/*
 * Each connection's receive ring, by default: 64 pages less the ring's
 * header, so that messages up to 131,008 bytes go eager (one record,
 * half the ring less the record's and our headers) rather than as a
 * large message's pieces; FI_CLANQ_RING_SIZE picks another
 * (cfi_ring_size()). Measured: docs/decisions.md, "The provider's ring".
 */
#define CFI_RING_DEFAULT	(64u * 4096)
#define CFI_RING_MIN		(2u * 4096)
#define CFI_RING_MAX		(64u << 20)
#define CFI_RING_HDR		64u
#define CFI_BACKLOG	64
/* a passive endpoint without a service picks one from here */
#define CFI_AUTO_SERVICE_MIN	40000u
#define CFI_AUTO_SERVICE_SPAN	20000u

/*
 * An address as the provider thinks of it. libfabric sees it as
 * FI_SOCKADDR_IN6 (cfi_addr_put()): libfabric's utility providers,
 * ofi_rxm among them, take IP-family addresses only. The 16 bytes are
 * CFI_ADDR_PREFIX, a net's endpoint id (0 for a listener) and the node,
 * in network order; the port is a listener's service.
 */
struct cfi_addr {
	uint32_t node;		/* clanq node number */
	uint32_t service;	/* a listener's service, or a net's id */
};

#define CFI_ADDR_PREFIX	{ 0xfd, 'c', 'l', 'a', 'n', 'q', 0, 0 }

enum cfi_hdr_type {
	CFI_H_DATA = 1,
	CFI_H_CONNREQ,
	CFI_H_ACCEPT,
	CFI_H_REJECT,
	CFI_H_DONE,	/* a rendezvous read: len 0 or its FI_E*, data its key */
};

#define CFI_HDR_MAGIC	0x6366u	/* "cf" */
#define CFI_HF_DATA	0x1u	/* data is remote CQ data */
#define CFI_HF_RMA	0x2u	/* fi_writedata()'s data: its write landed */
/*
 * A piece of a message longer than the connection's eager size: len is
 * the whole message's length, the pieces follow each other in order,
 * nothing between them (cfi_ep.c, "Pieces").
 */
#define CFI_HF_PIECE	0x4u
/*
 * A rendezvous (cfi_rndv.c): the message stays in the sender's memory,
 * registered and exported for this message alone; a struct cfi_rts
 * follows the header, len is the message's length. The receiver reads
 * it with the engine and answers CFI_H_DONE.
 */
#define CFI_HF_RNDV	0x8u

/* RMA: requests in the engine per fabric; apertures kept per endpoint */
#define CFI_RMA_MAX	CFI_QUEUE_SIZE
#define CFI_RAP_MAX	16

struct cfi_hdr {
	uint16_t magic;
	uint8_t type;		/* enum cfi_hdr_type */
	uint8_t flags;		/* CFI_HF_* */
	uint32_t len;		/* CM records: bytes of connection data after;
				 * CFI_HF_PIECE: the whole message's bytes */
	uint64_t data;
};

/* what follows a CFI_HF_RNDV header: where the message is */
struct cfi_rts {
	uint32_t region;	/* the sender's region, on the sender's node */
	uint32_t zero;
	uint64_t key;		/* its export's, for this message alone */
};

/*
 * Rendezvous: messages from this many bytes (and longer than the eager
 * size) go as one; FI_CLANQ_RNDV_SIZE picks another, 0 turns it off.
 * The receive reads through a bounce region of CFI_RNDV_CHUNK bytes
 * when its buffer cannot be registered (several iovs, RLIMIT_MEMLOCK).
 */
#define CFI_RNDV_DEFAULT	(64u << 10)
#define CFI_RNDV_CHUNK		(256u << 10)

struct cfi_fabric;
struct cfi_cq;
struct cfi_eq;

/* an operation waiting: a send without credit, a posted receive */
struct cfi_op {
	struct cfi_op *next;
	void *context;
	uint64_t flags;		/* the completion's FI_* flags */
	uint64_t data;		/* remote CQ data (sends) */
	/* not cleared by cfi_op_get(): cfi_fill_iov() writes what is used */
	struct iovec iov[CFI_IOV_MAX + 1];	/* [0]: the header (sends) */
	int iovcnt;
	size_t len;		/* the application's bytes */
	bool comp;		/* a completion is wanted */
	void *copy;		/* an injected send's own copy */
	struct cfi_hdr hdr;
	size_t done;		/* in pieces: the bytes sent, or received */
	size_t whole;		/* a receive in pieces: the message's bytes */
	/* a rendezvous send: its registration, exported (cfi_rndv.c) */
	struct clanq_region *reg;
	uint64_t key;		/* reg's export key */
	bool rndv_off;		/* could not register: pieces */
	bool internal;		/* a DONE: no completion, no count */
	int err;		/* in ep->aq: the completion's FI_E*, or 0 */
};

struct cfi_opq {
	struct cfi_op *head, *tail;
	size_t n;
};

struct cfi_comp {
	void *context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
	size_t olen;
	int err;		/* positive FI_E*; 0: success */
};

struct cfi_cq {
	struct fid_cq cq;
	struct cfi_fabric *fab;
	enum fi_cq_format format;
	struct cfi_comp *ring;	/* successes, grows */
	size_t cap, head, n;
	struct cfi_comp *errs;	/* error completions, grows */
	size_t ecap, ehead, en;
	enum fi_wait_obj wait_obj;	/* FI_WAIT_NONE or FI_WAIT_FD */
	bool armed;			/* slept for: kick at the next entry */
	unsigned int empty_reads;	/* in a row, toward fab->yield_after */
	int refs;
};

struct cfi_eq_ent {
	struct cfi_eq_ent *next;
	uint32_t event;
	bool err;
	struct fi_eq_err_entry e;	/* err: as fi_eq_readerr() gives it */
	fid_t fid;
	struct fi_info *info;
	size_t datalen;
	uint8_t data[CFI_CM_DATA_MAX];	/* connection data; written events */
	size_t wlen;			/* fi_eq_write()'s bytes, in data */
};

struct cfi_eq {
	struct fid_eq eq;
	struct cfi_fabric *fab;
	struct cfi_eq_ent *head, *tail;
	uint8_t errdata[CFI_CM_DATA_MAX];	/* the last readerr's */
	enum fi_wait_obj wait_obj;	/* FI_WAIT_NONE or FI_WAIT_FD */
	bool armed;			/* slept for: kick at the next entry */
	int refs;
};

/*
 * A counter: completions of the operations of the endpoints bound to it
 * (those with FI_SELECTIVE_COMPLETION's unreported ones too), successes
 * in value, failures in err. Increments happen where completions are
 * made, under the fabric's lock.
 */
struct cfi_cntr {
	struct fid_cntr cntr;
	struct cfi_fabric *fab;
	uint64_t value, err;
	uint64_t seen;			/* value + err when last read */
	enum fi_wait_obj wait_obj;	/* FI_WAIT_NONE or FI_WAIT_FD */
	bool armed;			/* slept for: kick at the next count */
	int refs;
};

/* an endpoint's counters, by what they count (fi_ep_bind()'s flags) */
enum cfi_cntr_kind {
	CFI_CNTR_SEND,		/* FI_SEND: sends, injects */
	CFI_CNTR_RECV,		/* FI_RECV: receives, fi_writedata()'s data */
	CFI_CNTR_READ,		/* FI_READ: RMA reads, fetching atomics */
	CFI_CNTR_WRITE,		/* FI_WRITE: RMA writes, other atomics */
	CFI_CNTR_KINDS
};

struct cfi_domain {
	struct fid_domain dom;
	struct cfi_fabric *fab;
	int refs;
};

/* a registration: a clanq region over the application's memory */
struct cfi_mr {
	struct fid_mr mr;	/* mr.key: the export's, naming the region */
	struct cfi_domain *dom;
	struct clanq_region region;
	void *buf;
	size_t len;
	uint64_t access;
};

/* an aperture onto a peer's registration, kept for the next request */
struct cfi_rap {
	uint64_t key;		/* the peer's fi_mr_key(); 0: slot free */
	uint32_t rights;	/* CLANQ_RIGHT_* it was imported with */
	uint64_t first, end;	/* its window [first, end) of the region */
	struct clanq_ap ap;
	unsigned int inflight;	/* requests through it in the engine */
	uint64_t used;		/* when it was last used, for eviction */
};

struct cfi_ep;

/*
 * The receive a rendezvous reads into: the head of the endpoint's
 * receive queue, which stays there until the last READ completed.
 */
struct cfi_rndv_rx {
	struct cfi_op *op;	/* NULL: none */
	struct clanq_ap ap;	/* the sender's registration, if imported */
	bool imported;
	struct clanq_region dst;	/* op's buffer, registered (dst.mem); or
					 * none: the bounce */
	uint64_t key;		/* echoed in the DONE */
	size_t want;		/* bytes to deliver: min(message, receive) */
	size_t done;		/* bytes read (and copied out) */
	size_t chunk;		/* the READ in flight: its bytes */
	int err;		/* positive FI_E*, or 0 */
	struct cfi_rma *slot;	/* the READ in flight, or NULL */
	bool cancelled;		/* the endpoint was shut down meanwhile */
};

/* an RMA request in the engine; its index is the request's cookie */
struct cfi_rma {
	struct cfi_rma *next_free;
	struct cfi_ep *ep;	/* NULL: the endpoint was closed meanwhile */
	struct cfi_rap *rap;
	void *context;
	uint64_t flags;		/* the completion's FI_* flags */
	size_t len;
	bool busy;
	bool comp;		/* a completion is wanted */
	bool notify;		/* fi_writedata(): send data once it landed */
	uint64_t data;
	void *result;		/* atomics: where the old word goes */
	struct clanq_region tmp;	/* registered for this request only */
	void *copy;		/* an injected write's own copy */
	bool rndv;		/* a rendezvous READ of ep (cfi_rndv.c) */
};

/* a connection accepted by clanq, not yet by the application */
struct cfi_connreq {
	struct fid fid;		/* fi_info->handle */
	struct cfi_connreq *next;
	struct cfi_pep *pep;
	struct clanq_conn *conn;
	bool announced;		/* FI_CONNREQ reported */
};

struct cfi_pep {
	struct fid_pep pep;
	struct cfi_fabric *fab;
	struct cfi_pep *next;
	struct fi_info *info;
	struct cfi_eq *eq;
	struct clanq_listener *l;
	uint32_t service;	/* from src_addr; 0 until listening if auto */
	struct cfi_connreq *reqs;
};

enum cfi_ep_state {
	CFI_EP_IDLE,		/* not enabled, or enabled and unconnected */
	CFI_EP_CONNECTING,	/* clanq's handshake */
	CFI_EP_WAIT_ACCEPT,	/* CONNREQ sent, no answer yet */
	CFI_EP_CONNECTED,
	CFI_EP_SHUTDOWN,	/* either side shut it down */
};

struct cfi_ep {
	struct fid_ep ep;
	struct cfi_fabric *fab;
	struct cfi_domain *dom;
	struct cfi_ep *next;
	struct fi_info *info;
	struct cfi_eq *eq;
	struct cfi_cq *tcq, *rcq;
	struct cfi_cntr *cntrs[CFI_CNTR_KINDS];
	uint64_t tflags, rflags;	/* bind flags: FI_SELECTIVE_COMPLETION */
	bool enabled;
	enum cfi_ep_state state;
	struct clanq_conn *conn;
	uint32_t want;			/* clanq_conn_want() of conn */
	unsigned int idle_looks;	/* empty looks at conn in a row */
	struct cfi_connreq *req;	/* from info->handle, until accepted */
	struct cfi_addr peer;
	struct cfi_opq sq, rq;
	/*
	 * Sent, completions not yet given: a rendezvous until its DONE, and
	 * every send after it, so that they complete in order
	 * (FI_ORDER_STRICT)
	 */
	struct cfi_opq aq;
	struct cfi_rndv_rx rndv;
	struct clanq_region bounce;	/* CFI_RNDV_CHUNK, at the first need */
	struct cfi_op *free_ops;
	size_t cm_len;			/* fi_connect()'s data */
	uint8_t cm_data[CFI_CM_DATA_MAX];
	struct cfi_rap raps[CFI_RAP_MAX];
	uint64_t rap_clock;
};

struct cfi_fabric {
	struct fid_fabric fab;
	pthread_mutex_t lock;
	unsigned int nic;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct cfi_ep *eps;
	struct cfi_pep *peps;
	int refs;
	/* sleeping (cfi_eq.c): the net's evq fd and kick_fd, in one epoll */
	int wait_fd;
	int kick_fd;			/* an eventfd */
	bool kicked;			/* written, not read yet */
	unsigned int cqs_armed;		/* CQs someone sleeps for */
	/* RMA: the engine's endpoint, opened at the first request */
	bool rdma_open;
	struct clanq_ep rdma;
	struct cfi_rma *rma;		/* [CFI_RMA_MAX] */
	struct cfi_rma *rma_free;
	/* empty CQ reads in a row before a sched_yield() (0: never) */
	unsigned int yield_after;
	unsigned int progress_calls;	/* cfi_progress(): when the net's turn comes */
	uint32_t ring;			/* each connection's receive ring (record bytes) */
	size_t rndv_min;		/* rendezvous from this many bytes; 0: never */
};

extern struct fi_provider cfi_prov;

/* cfi_core.c */
int cfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context);
int cfi_errno(int clanq_err);
struct fi_info *cfi_info_for(unsigned int nic, uint32_t node,
			     const struct fi_info *hints);
bool cfi_rma_wanted(const struct fi_info *hints);
int cfi_enosys(void);
int cfi_addr_put(const struct cfi_addr *a, void *addr, size_t *addrlen);
int cfi_addr_get(const void *addr, size_t len, struct cfi_addr *a);

/* cfi_mr.c */
extern struct fi_ops_mr cfi_mr_ops;
struct cfi_mr *cfi_mr_of(void *desc, const void *buf, size_t len);

/* cfi_rma.c */
#define CFI_RAP_ATOMIC	0x100u	/* with CLANQ_RIGHT_*: imported for atomics */

/* one request to the engine, as the RMA and atomic calls describe it */
struct cfi_rma_req {
	uint32_t op;		/* CLANQ_RDMA_OP_* */
	void *buf;		/* WRITE: the source; READ: the destination */
	size_t len;		/* atomics: 8 */
	void *desc;
	uint64_t addr, key;	/* the peer's registration, offset and key */
	void *context;
	uint64_t data;		/* FI_REMOTE_CQ_DATA's */
	uint64_t flags;		/* FI_* */
	uint64_t operand[2];	/* CAS: compare, swap; FADD: add */
	void *result;		/* atomics: the old word, or NULL */
};

extern struct fi_ops_rma cfi_rma_ops;

/* cfi_atomic.c */
extern struct fi_ops_atomic cfi_atomic_ops;
int cfi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
		     enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags);
ssize_t cfi_rma_submit(struct cfi_ep *ep, const struct cfi_rma_req *q);
void cfi_rma_progress(struct cfi_fabric *fab);
void cfi_rma_ep_close(struct cfi_ep *ep);
void cfi_rma_fabric_close(struct cfi_fabric *fab);
int cfi_rdma_open(struct cfi_fabric *fab);
struct cfi_rma *cfi_rma_take(struct cfi_fabric *fab);
void cfi_rma_release(struct cfi_fabric *fab, struct cfi_rma *r);

/* cfi_rndv.c */
int cfi_rndv_send(struct cfi_ep *ep, struct cfi_op *op);
void cfi_rndv_unreg(struct cfi_op *op);
int cfi_rndv_done(struct cfi_ep *ep, const struct cfi_hdr *h);
int cfi_rndv_recv(struct cfi_ep *ep, struct cfi_op *op, const struct cfi_rts *rts);
bool cfi_rndv_step(struct cfi_ep *ep);
void cfi_rndv_read_done(struct cfi_ep *ep, int status);
bool cfi_rndv_flush(struct cfi_ep *ep);
void cfi_rndv_close(struct cfi_ep *ep);

/* cfi_eq.c */
int cfi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		struct fid_eq **eq, void *context);
int cfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		struct fid_cq **cq, void *context);
int cfi_cq_push(struct cfi_cq *cq, const struct cfi_comp *c);
int cfi_eq_push_cm(struct cfi_eq *eq, uint32_t event, fid_t fid,
		   struct fi_info *info, const void *data, size_t len);
int cfi_eq_push_err(struct cfi_eq *eq, fid_t fid, void *context, int err,
		    const void *data, size_t len);
int cfi_trywait(struct fid_fabric *fabric, struct fid **fids, int count);
void cfi_kick(struct cfi_fabric *fab);
void cfi_wake(struct cfi_fabric *fab, bool *armed, bool cq);
int cfi_wait_some(struct cfi_fabric *fab, bool *armed, bool cq,
		  uint64_t deadline);
uint64_t cfi_deadline(int timeout);
int cfi_wait_obj(enum fi_wait_obj asked, enum fi_wait_obj *wait_obj);
int cfi_wait_control(struct cfi_fabric *fab, enum fi_wait_obj wait_obj,
		     int command, void *arg);

/* cfi_cntr.c */
int cfi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		  struct fid_cntr **cntr, void *context);
struct cfi_cntr *cfi_cntr_of(struct fid *fid);
void cfi_cntr_count(struct cfi_cntr *cntr, bool failed);

/* cfi_ep.c */
int cfi_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
		   struct fid_pep **pep, void *context);
int cfi_endpoint(struct fid_domain *domain, struct fi_info *info,
		 struct fid_ep **ep, void *context);
void cfi_progress(struct cfi_fabric *fab, bool cm);
void cfi_before_wait(struct cfi_fabric *fab);
bool cfi_tx_comp(struct cfi_ep *ep, uint64_t flags);
int cfi_send_notice(struct cfi_ep *ep, uint64_t data);
int cfi_send_ctl(struct cfi_ep *ep, const struct cfi_hdr *h);
void cfi_op_put(struct cfi_ep *ep, struct cfi_op *op);
void cfi_complete(struct cfi_ep *ep, bool rx, struct cfi_op *op,
		  size_t len, int err, size_t olen);
void cfi_ep_lost(struct cfi_ep *ep, int err);
void cfi_flush(struct cfi_ep *ep);
void cfi_tx_done(struct cfi_ep *ep);
void cfi_iov_put(struct cfi_op *op, size_t off, const uint8_t *src, size_t len);
void cfi_iov_get(const struct cfi_op *op, size_t off, void *dst, size_t len);

static inline void cfi_opq_push(struct cfi_opq *q, struct cfi_op *op)
{
	op->next = NULL;
	if (q->tail)
		q->tail->next = op;
	else
		q->head = op;
	q->tail = op;
	q->n++;
}

static inline struct cfi_op *cfi_opq_pop(struct cfi_opq *q)
{
	struct cfi_op *op = q->head;

	q->head = op->next;
	if (!q->head)
		q->tail = NULL;
	q->n--;
	return op;
}

static inline void cfi_lock(struct cfi_fabric *fab)
{
	pthread_mutex_lock(&fab->lock);
}

static inline void cfi_unlock(struct cfi_fabric *fab)
{
	pthread_mutex_unlock(&fab->lock);
}

#define CFI_WARN(subsys, ...)	FI_WARN(&cfi_prov, subsys, __VA_ARGS__)
#define CFI_INFO(subsys, ...)	FI_INFO(&cfi_prov, subsys, __VA_ARGS__)

#endif /* _CLANQ_CFI_H */
