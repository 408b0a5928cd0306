/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq: the application library.
 *
 * Conventions (as liburing and ef_vi): names are clanq_<object>_<verb>;
 * every call returns >= 0 on success or a negative errno; the caller owns
 * every struct and passes it explicitly; the library has no global state.
 * Fast-path calls are static inline in this header and make no system
 * call; everything else is in lib/. Taking from a queue (clanq_oob_recv,
 * clanq_rdma_poll, clanq_evq_poll) returns 0 with the item, or -EAGAIN
 * when there is none, as liburing's io_uring_peek_cqe() does.
 *
 * The ABI's ioctl arguments are struct clanq_ioc_<cmd> (clanq/uapi.h)
 * and the driver's objects struct clanq_k<obj>: the names here are the
 * library's alone.
 *
 * Threads. The library takes no lock; each side of each queue is owned
 * by exactly one thread at a time (the queues are single-producer,
 * single-consumer, and each side's index is private state). On one
 * endpoint, these may run concurrently, each in one thread:
 *  - the poster: clanq_rdma_post_init(), clanq_rdma_post_push(),
 *    clanq_rdma_post() (the request queue's producer side, and
 *    ep->rq_batch);
 *  - the poller: clanq_rdma_poll() (the completion queue's consumer
 *    side; it reads only the request queue's shared index words, never
 *    the poster's private state, see clanq_rdma_rq_unread());
 *  - the OOB receiver: clanq_oob_recv() (the OOB queue's consumer side).
 * Any of them may be the same thread; two threads must never call the
 * same one of these on one endpoint at once (two posters, two pollers:
 * serialise them yourself). clanq_oob_send(), clanq_rdma_kick() and
 * clanq_ep_dropped() are system calls or atomic reads and may be called
 * from any thread. An event queue has one consumer thread:
 * clanq_evq_poll() and clanq_evq_wait() must not run concurrently on
 * one evq; clanq_evq_register()/unregister() are system calls and may.
 * Creating and destroying an object (clanq_ep_create(), _destroy(),
 * clanq_evq_create(), _destroy(), clanq_close()) must not overlap any
 * other call on that object.
 */
#ifndef _CLANQ_H
#define _CLANQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>
#include <sys/uio.h>

#include <clanq/uapi.h>
#include <clanq/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A handle on one soft NIC: an open context of /dev/clanqN. */
struct clanq_dev {
	int fd;			/**< the context's file descriptor */
	uint32_t node;		/**< this NIC's node id */
	uint32_t nr_nics;	/**< soft NICs in the kernel */
};

/**
 * \brief Open a context on a NIC and check the ABI.
 * \param dev   filled in on success
 * \param path  device node; NULL means CLANQ_DEV_PREFIX "0"
 * \return 0; -ENOENT if there is no such device; -EPROTO if the driver
 *         speaks another ABI version; another -errno from open/ioctl.
 */
int clanq_open(struct clanq_dev *dev, const char *path);

/**
 * \brief Open /dev/clanq<index>.
 * \return as clanq_open().
 */
int clanq_open_nic(struct clanq_dev *dev, unsigned int index);

/**
 * \brief Say why clanq_open() of @p path failed with @p err, for a person.
 *
 * For -EACCES it names the device's mode and group and the group to join
 * (a site that restricts clanq to group "clanq", clanq(7)); for -ENOENT
 * that the module is not loaded or the NIC does not exist; for -EPROTO
 * that the library and the driver speak different ABI versions.
 * \param path  as given to clanq_open(); NULL means CLANQ_DEV_PREFIX "0"
 * \param err   its negative errno
 * \param buf   filled with one NUL-terminated sentence, truncated to @p len
 * \return the sentence's length, as snprintf().
 */
int clanq_open_explain(const char *path, int err, char *buf, size_t len);

/**
 * \brief clanq_open_explain() for clanq_open_nic() of NIC @p index: the
 * same sentence about CLANQ_DEV_PREFIX "<index>".
 */
int clanq_open_nic_explain(unsigned int index, int err, char *buf, size_t len);

/**
 * \brief Why the driver refused the last refused call of @p dev's
 * context, in words: the command, what was wrong, and for a limit its
 * name and numbers ("EP_CREATE: context has 64 endpoints already:
 * max_eps"). One system call (CLANQ_IOC_LAST_ERROR); errno is kept.
 *
 * The note is the context's: with threads sharing @p dev, ask right after
 * the refusal, and compare the -errno returned with the one you got.
 * \param buf  filled with the NUL-terminated words ("" if none),
 *             truncated to @p len
 * \return the refusal's negative errno; 0 if the driver refused nothing
 *         of this context (or cannot say: an older driver).
 */
int clanq_last_error(const struct clanq_dev *dev, char *buf, size_t len);

/**
 * \brief clanq_last_error()'s words alone, in a buffer of the calling
 * thread's that the next call overwrites; "" if there are none.
 */
const char *clanq_strerror_last(const struct clanq_dev *dev);

/**
 * \brief Close a context; every object created through it is freed.
 * \return 0, or -errno from close().
 */
int clanq_close(struct clanq_dev *dev);

/*
 * Endpoints and out-of-band messages (paper section 3.1).
 */

/**
 * An endpoint: an OOB receive queue the application reads directly, and
 * the RDMA request and completion queues it shares with the engine.
 * One poster, one poller and one OOB receiver thread may use it at once
 * (see "Threads" at the top of this file).
 */
struct clanq_ep {
	int fd;				/**< the context it lives in */
	struct clanq_addr addr;		/**< node-wide address, for peers */
	void *seg;			/**< shared segment */
	size_t seg_size;
	struct clanq_queue oob;		/**< consumer side, private */
	struct clanq_queue rq;		/**< RDMA requests: producer side */
	struct clanq_queue cq;		/**< RDMA completions: consumer side */
	const uint32_t *need_wakeup;	/**< engine's sleep flag (driver-written) */
	uint32_t rq_batch;		/**< requests written, not yet pushed */
	const struct clanq_ep_counters *counters; /**< driver-written */
	uint64_t *tw_fired;		/**< fired bitmap: its tripwires' bits */
	uint32_t tw_words;		/**< words in tw_fired */
};

/** Queue lengths of a new endpoint; 0 picks the driver's default. */
struct clanq_ep_attr {
	unsigned int oob_slots;		/**< OOB receive queue */
	unsigned int rq_slots;		/**< RDMA request queue */
	unsigned int cq_slots;		/**< RDMA completion queue */
	unsigned int tw_slots;		/**< tripwires it can own: a multiple of 64 */
	/**
	 * 0: the driver picks the id. Else a service number (1 ..
	 * CLANQ_SERVICE_MAX) peers can name without being told it;
	 * below CLANQ_SERVICE_PRIV it needs CAP_NET_BIND_SERVICE.
	 */
	unsigned int service;
};

/**
 * \brief Create an endpoint and map its shared segment.
 * \param oob_slots  OOB queue length (power of two); 0: driver default.
 *                   One slot always stays free, so it holds oob_slots-1.
 * \return 0; -EINVAL for a bad length; -ENOSPC past the context's limit.
 */
int clanq_ep_create(struct clanq_dev *dev, struct clanq_ep *ep,
		    unsigned int oob_slots);

/**
 * \brief Create an endpoint with the queue lengths in attr (powers of
 * two; each queue holds one item fewer than its length), and with
 * attr->service, at that id.
 * \return as clanq_ep_create(); -EADDRINUSE if the service is taken;
 *         -EACCES below CLANQ_SERVICE_PRIV without CAP_NET_BIND_SERVICE.
 */
int clanq_ep_create_attr(struct clanq_dev *dev, struct clanq_ep *ep,
			 const struct clanq_ep_attr *attr);

/**
 * \brief Create an endpoint as clanq_ep_create_attr(), with flags for
 * the driver: CLANQ_EP_SHARED joins the shared service attr->service
 * (its group of up to CLANQ_SHARED_MAX endpoints, all of one user and
 * all asking to share, as SO_REUSEPORT; clanq/uapi.h says which member
 * a message goes to). The endpoint's own address (ep->addr) is then an
 * id of its own, not the service.
 * \param flags  0 or CLANQ_EP_SHARED (with a service)
 * \return as clanq_ep_create_attr(); -EADDRINUSE if the service is in
 *         use unshared or shared by another user; -ENOSPC with
 *         CLANQ_SHARED_MAX members already; -EINVAL for unknown flags
 *         or CLANQ_EP_SHARED without a service.
 */
int clanq_ep_create_flags(struct clanq_dev *dev, struct clanq_ep *ep,
			  const struct clanq_ep_attr *attr, uint32_t flags);

/**
 * \brief Destroy an endpoint: nothing more is delivered to it, its
 * registrations go, and its mapping is removed.
 * \return 0 or -errno.
 */
int clanq_ep_destroy(struct clanq_ep *ep);

/**
 * \brief Send an OOB message (a system call). The driver stamps the source
 * address. Delivery is not confirmed: a full receiver discards and counts.
 * \param len  payload bytes, <= CLANQ_OOB_PAYLOAD
 * \return 0; -EMSGSIZE; -EHOSTUNREACH for an unknown node; -errno.
 */
int clanq_oob_send(struct clanq_ep *ep, struct clanq_addr dst, uint32_t type,
		   const void *payload, size_t len);

/**
 * \brief Take the next OOB message, entirely at user level (no system
 * call): the paper's oob_q_get without blocking. One receiver thread per
 * endpoint (it owns the OOB queue's consumer side).
 * \return 0 with *msg filled, or -EAGAIN if the queue is empty.
 */
static inline int clanq_oob_recv(struct clanq_ep *ep, struct clanq_oob_msg *msg)
{
	return clanq_q_get(&ep->oob, msg) ? 0 : -EAGAIN;
}

/** \brief Messages discarded at this endpoint because its queue was full. */
static inline uint64_t clanq_ep_dropped(const struct clanq_ep *ep)
{
	return __atomic_load_n(&ep->counters->oob_dropped, __ATOMIC_RELAXED);
}

/*
 * Regions and apertures (paper section 2).
 */

/** A region: memory of this context the RDMA engine and peers may use. */
struct clanq_region {
	int fd;				/**< the context it lives in */
	struct clanq_addr addr;		/**< node-wide (node, id), for peers */
	void *mem;			/**< the memory: mapped or registered */
	size_t size;			/**< bytes asked for */
	size_t map_size;		/**< bytes mapped (allocated regions) */
};

/**
 * \brief Allocate a zeroed region of size bytes and map it at r->mem.
 * \return 0; -EINVAL for size 0 or above the driver's limit; -ENOMEM
 *         past the context's memory limit.
 */
int clanq_region_alloc(struct clanq_dev *dev, struct clanq_region *r,
		       size_t size);

/**
 * \brief Register the caller's memory [addr, addr + size) as a region. The
 * pages are pinned, and charged to RLIMIT_MEMLOCK, until it is freed.
 * \return 0; -ENOMEM past RLIMIT_MEMLOCK; -EFAULT for memory that is not
 *         mapped writable; -EINVAL.
 */
int clanq_region_register(struct clanq_dev *dev, struct clanq_region *r,
			  void *addr, size_t size);

/**
 * \brief Free a region: every aperture onto it is revoked (PIO mappings
 * are zapped; requests through them fail with -ENXIO).
 */
int clanq_region_free(struct clanq_region *r);

/**
 * \brief Export a region with rights (CLANQ_RIGHT_*); peers import it by
 * r->addr and *key.
 * \return 0; -EBUSY if it was exported already; -EINVAL.
 */
int clanq_region_export(struct clanq_region *r, uint32_t rights, uint64_t *key);

/**
 * \brief clanq_region_export() with flags: CLANQ_EXPORT_KEY_NAMES_REGION
 * makes the key the region's id in its top 32 bits over 32 random
 * bits, so that the key alone names the region on its node (a peer
 * imports with id = key >> 32): for interfaces that hand a peer one
 * 64-bit word, as libfabric's fi_mr_key() does. The secret is 32 bits
 * then, not 64.
 * \return as clanq_region_export(); -EINVAL for unknown flags.
 */
int clanq_region_export_flags(struct clanq_region *r, uint32_t rights,
			      uint32_t flags, uint64_t *key);

/** An aperture: a window onto a peer's exported region. */
struct clanq_ap {
	int fd;				/**< the context it lives in */
	uint32_t id;			/**< for clanq_rdma_req.dst_ap */
	uint32_t rights;		/**< CLANQ_RIGHT_* it was imported with */
	uint64_t len;			/**< bytes in the window */
	uint64_t mmap_offset;		/**< where to map it, if it can be */
	size_t map_size;		/**< 0: no PIO, use RDMA */
	uint32_t map_delta;		/**< first byte's offset in the mapping */
	void *map;			/**< after clanq_ap_map() */
	char *base;			/**< the window's byte 0, when mapped */
	uint64_t region_off;		/**< the window's byte 0 in the region */
	uint64_t armed_mmap_offset;	/**< the region's armed bitmap */
	size_t armed_map_size;		/**< 0: none (no PIO mapping) */
	/**
	 * The armed bitmap, read-only, after clanq_ap_map(): bit b (bit
	 * b % 32 of word b / 32) is set while a tripwire is armed on region
	 * bytes [64 b, 64 b + 63]. The ABI's uint64_t words, read 32 bits at a
	 * time (a 32-bit process can load them atomically): the same bits on
	 * a little-endian CPU, the only kind the driver builds for.
	 */
	const uint32_t *armed;
};

/**
 * \brief Import [offset, offset + len) of the region (node, id) with key.
 * \return 0; -ENOENT for a wrong key or region; -EACCES for rights the
 *         export does not grant; -ERANGE outside the region.
 */
int clanq_ap_import(struct clanq_dev *dev, struct clanq_ap *ap,
		    struct clanq_addr region, uint64_t key, uint64_t offset,
		    uint64_t len, uint32_t rights);

/** What else an import asks for (clanq_ap_import_attr()). */
struct clanq_ap_attr {
	uint32_t flags;		/**< CLANQ_AP_SINK, CLANQ_AP_ATOMIC */
	uint32_t notify_ep;	/**< endpoint id told of a revocation, or 0 */
	uint64_t notify_cookie;	/**< in that CLANQ_OOB_REVOKED notice */
};

/**
 * \brief clanq_ap_import(), and: with attr->notify_ep, a
 * CLANQ_OOB_REVOKED notice on that endpoint (of dev's context) when the
 * region is freed; with CLANQ_AP_SINK, stores through the mapping after
 * that land in a sink page instead of raising SIGBUS.
 * \return as clanq_ap_import(); -ENOENT for a notify_ep not of dev.
 */
int clanq_ap_import_attr(struct clanq_dev *dev, struct clanq_ap *ap,
			 struct clanq_addr region, uint64_t key, uint64_t offset,
			 uint64_t len, uint32_t rights,
			 const struct clanq_ap_attr *attr);

/**
 * \brief Map an aperture for PIO (read-write if imported with
 * CLANQ_RIGHT_WRITE): ap->base then points at its first byte. Only
 * imports with CLANQ_RIGHT_READ can be mapped. The region's armed
 * bitmap is mapped too (read-only), for clanq_ap_flush().
 * \return 0; -EOPNOTSUPP if it cannot be mapped (ap->map_size == 0).
 */
int clanq_ap_map(struct clanq_ap *ap);

/** \brief Unmap and close an aperture. */
int clanq_ap_close(struct clanq_ap *ap);

/**
 * \brief Is a tripwire armed on a block that [off, off + len) of a mapped
 * aperture touches? One load of the armed bitmap per 32 blocks (2 KiB);
 * the caller has checked the range.
 */
static inline bool clanq_armed_bits(const uint32_t *armed, uint64_t first,
				    uint64_t len)
{
	uint64_t b = first >> CLANQ_TW_BLOCK_SHIFT;
	uint64_t last = (first + len - 1) >> CLANQ_TW_BLOCK_SHIFT;
	uint32_t w, mask;

	/* the common case: every block written is in one word */
	if (__builtin_expect(b / 32 == last / 32, 1)) {
		w = __atomic_load_n(&armed[b / 32], __ATOMIC_RELAXED);
		return (w >> (b % 32)) & (~0u >> (31 - (last - b)));
	}
	for (;;) {
		w = __atomic_load_n(&armed[b / 32], __ATOMIC_RELAXED);
		mask = ~0u << (b % 32);
		if (last / 32 == b / 32)
			return w & mask & (~0u >> (31 - last % 32));
		if (w & mask)
			return true;
		b = (b / 32 + 1) * 32;
	}
}

/**
 * \brief Is a tripwire armed on a block that [off, off + len) of a mapped
 * aperture touches? One load of the armed bitmap per 32 blocks (2 KiB);
 * the caller has checked the range, len > 0.
 */
static inline bool clanq_ap_armed(const struct clanq_ap *ap, uint64_t off,
				  size_t len)
{
	return clanq_armed_bits(ap->armed, ap->region_off + off, len);
}

/** \brief The system call behind clanq_ap_flush(): CLANQ_IOC_AP_FLUSH. */
int clanq_ap_flush_armed(struct clanq_ap *ap, uint64_t off, size_t len);

/**
 * \brief "I stored [off, off + len) through the mapping": fire the
 * tripwires armed there. A full barrier and a look at the armed bitmap;
 * the system call only if a block written is armed (the futex idea),
 * so a write nobody waits for costs no system call. Call it after the
 * stores it covers, from the thread that made them.
 * \return 0; -ERANGE outside the window; -errno from the system call.
 */
static inline int clanq_ap_flush(struct clanq_ap *ap, uint64_t off, size_t len)
{
	if (off > ap->len || len > ap->len - off)
		return -ERANGE;
	if (!len || !ap->armed)
		return 0;
	/* [F] of queue.h: our stores, then our look at what is armed */
	clanq_q_mb();
	if (!clanq_ap_armed(ap, off, len))
		return 0;
	return clanq_ap_flush_armed(ap, off, len);
}

/**
 * \brief PIO without the system call: copy len bytes to offset off of a
 * mapped aperture with plain CPU stores, then look (after a full
 * barrier) whether a tripwire is armed where they landed. If one is,
 * the caller owes a flush: clanq_ap_flush_armed(), or the one that
 * clanq_ap_write_wait() folds into its wait.
 * \return 0; 1 if a flush is owed; -ERANGE outside the window; -ENXIO
 *         if it is not mapped for writing.
 */
static inline int clanq_ap_store(struct clanq_ap *ap, uint64_t off,
				 const void *src, size_t len)
{
	/*
	 * What the check needs, read before the stores: the compiler must
	 * assume they may alias *ap, and would load it all again after.
	 */
	char *base = ap->base;
	const uint32_t *armed = ap->armed;
	uint64_t first = ap->region_off + off, win = ap->len;

	if (!base || !(ap->rights & CLANQ_RIGHT_WRITE))
		return -ENXIO;
	if (off > win || len > win - off)
		return -ERANGE;
	memcpy(base + off, src, len);
	if (!len || !armed)
		return 0;
	/* [F] of queue.h: our stores, then our look at what is armed */
	clanq_q_mb();
	return clanq_armed_bits(armed, first, len);
}

/**
 * \brief PIO: copy len bytes to offset off of a mapped aperture, with
 * plain CPU stores, then clanq_ap_flush() them: no system call unless a
 * tripwire is armed where they landed. If the region is freed
 * meanwhile, the stores fault with SIGBUS.
 * \return 0; -ERANGE outside the window; -ENXIO if it is not mapped.
 */
static inline int clanq_ap_write(struct clanq_ap *ap, uint64_t off,
				 const void *src, size_t len)
{
	int owed = clanq_ap_store(ap, off, src, len);

	return owed > 0 ? clanq_ap_flush_armed(ap, off, len) : owed;
}

/*
 * RDMA (paper section 3.2): requests go to the engine through a queue,
 * completions come back through another; neither is a system call
 * unless the engine went idle.
 */

/**
 * \brief Ring the doorbell (a system call): make the engine look at ep's
 * request queue. Needed only while *ep->need_wakeup is set; the post
 * calls below ring it themselves.
 */
int clanq_rdma_kick(struct clanq_ep *ep);

/**
 * \brief Write one RDMA request into the request queue without handing
 * it to the engine yet (ef_vi's init/push split): a batch of them is
 * handed over by one clanq_rdma_post_push(). Poster thread only: the
 * post calls own the request queue's producer side.
 * \return 0; -EAGAIN if the request queue has no free slot.
 */
static inline int clanq_rdma_post_init(struct clanq_ep *ep,
				       const struct clanq_rdma_req *req)
{
	if (clanq_q_prod_space_for(&ep->rq, ep->rq_batch + 1) <= ep->rq_batch)
		return -EAGAIN;
	memcpy(clanq_q_prod_slot_at(&ep->rq, ep->rq_batch), req, sizeof(*req));
	ep->rq_batch++;
	return 0;
}

/**
 * \brief Hand every request written since the last push to the engine.
 * Makes a system call only when the engine has gone idle on this
 * endpoint (*ep->need_wakeup is set).
 * \return 0; -errno from the doorbell, in which case the requests are
 *         queued all the same (do not post them again; kick with
 *         clanq_rdma_kick()).
 */
static inline int clanq_rdma_post_push(struct clanq_ep *ep)
{
	if (!ep->rq_batch)
		return 0;
	clanq_q_prod_publish(&ep->rq, ep->rq_batch);
	ep->rq_batch = 0;
	/* [A] of queue.h: publish, barrier, look; pairs with the engine's */
	clanq_q_mb();
	if (__atomic_load_n(ep->need_wakeup, __ATOMIC_RELAXED))
		return clanq_rdma_kick(ep);
	return 0;
}

/**
 * \brief Queue one RDMA request (a write, or any op) and hand it to the
 * engine: init + push.
 * \return as clanq_rdma_post_init() and clanq_rdma_post_push().
 */
static inline int clanq_rdma_post(struct clanq_ep *ep,
				  const struct clanq_rdma_req *req)
{
	int err = clanq_rdma_post_init(ep, req);

	return err ? err : clanq_rdma_post_push(ep);
}

/**
 * \brief Queue an RDMA READ: len bytes from offset ap_off of aperture ap
 * into offset dst_off of region dst (of this context), and hand it to
 * the engine. Needs the aperture's CLANQ_RIGHT_READ. The bytes are there
 * when its completion is (ask for one with CLANQ_RDMA_SIGNAL); a later
 * request may start before they are unless it has CLANQ_RDMA_FENCE.
 * \return as clanq_rdma_post(); -EINVAL for unknown flags. What only
 *         the engine can check completes with its status.
 */
int clanq_rdma_read(struct clanq_ep *ep, const struct clanq_ap *ap,
		    uint64_t ap_off, const struct clanq_region *dst,
		    uint64_t dst_off, uint64_t len, uint64_t cookie, uint32_t flags);

/**
 * \brief Queue an atomic compare-and-swap of the 8-byte word at ap_off of
 * aperture ap (8-byte aligned, as is the word in the exporter's region):
 * if it holds compare, it becomes swap. The old value comes back in the
 * completion's value (ask for one with CLANQ_RDMA_SIGNAL). Needs an
 * aperture imported with CLANQ_RIGHT_READ, CLANQ_RIGHT_WRITE and
 * CLANQ_AP_ATOMIC (clanq_ap_import_attr()).
 * \return as clanq_rdma_post(); -EINVAL for unknown flags or a
 *         misaligned ap_off.
 */
int clanq_rdma_cas(struct clanq_ep *ep, const struct clanq_ap *ap,
		   uint64_t ap_off, uint64_t compare, uint64_t swap, uint64_t cookie,
		   uint32_t flags);

/**
 * \brief Queue an atomic fetch-and-add of add (mod 2^64) to the 8-byte
 * word at ap_off of aperture ap: as clanq_rdma_cas().
 */
int clanq_rdma_fadd(struct clanq_ep *ep, const struct clanq_ap *ap,
		    uint64_t ap_off, uint64_t add, uint64_t cookie, uint32_t flags);

/*
 * Are requests waiting in ep's request queue? For the poller thread
 * (clanq_rdma_poll), which must not touch the poster's private state:
 * ep->rq.own, rq.peer and rq_batch are written by the poster with plain
 * stores, so reading them here would be a data race (queue.h's
 * clanq_q_prod_unread() reads own). Instead both index words are read
 * from the shared segment with atomic loads: prod is what the poster
 * last published (its release store, (B) of queue.h), cons what the
 * engine last consumed. Requests written but not yet pushed are not
 * counted, rightly: the engine cannot see them either, and the push
 * rings the doorbell itself. Only the immutable geometry (the word
 * pointers, mask) of ep->rq is used, set once by clanq_ep_create().
 * A word with bits outside the mask reads as "nothing unread".
 */
static inline bool clanq_rdma_rq_unread(const struct clanq_ep *ep)
{
	uint32_t prod = clanq_q_load_acquire(ep->rq.prod);
	uint32_t cons = clanq_q_load_acquire(ep->rq.cons);

	return !((prod | cons) & ~ep->rq.mask) && prod != cons;
}

/**
 * \brief Take the next completion, at user level. The one system call it
 * may make: if the engine stopped because the completion queue was full
 * and requests are waiting, freeing a slot rings the doorbell (should
 * that fail, the next post or poll rings it again). Poller thread only
 * (it owns the completion queue's consumer side); it may run beside the
 * poster thread's post calls on the same endpoint.
 * \return 0 with *comp filled, or -EAGAIN if there is none.
 */
static inline int clanq_rdma_poll(struct clanq_ep *ep,
				  struct clanq_rdma_comp *comp)
{
	if (!clanq_q_get(&ep->cq, comp))
		return -EAGAIN;
	/* [B] of queue.h: free a slot, barrier, look; pairs with the engine's */
	clanq_q_mb();
	if (__atomic_load_n(ep->need_wakeup, __ATOMIC_RELAXED) &&
	    clanq_rdma_rq_unread(ep))
		(void)clanq_rdma_kick(ep);
	return 0;
}

/*
 * The unified event queue (paper section 3.4).
 */

#define CLANQ_EVQ_SPIN_NS_DEFAULT	15000	/**< as the paper's server; 0 on one CPU */

/** An event queue: events from many endpoints, dequeued at user level. */
struct clanq_evq {
	int fd;				/**< its own fd: poll/epoll it */
	void *seg;
	size_t seg_size;
	struct clanq_queue ring;	/**< consumer side, private */
	uint64_t *pending;		/**< one bit per registration */
	uint32_t nr_words;		/**< words in pending */
	uint64_t spin_ns;		/**< clanq_evq_wait() spins this long */
};

/**
 * \brief Create an event queue for up to max_regs registrations.
 * \return 0; -EINVAL if max_regs is 0 or above the driver's limit.
 */
int clanq_evq_create(struct clanq_dev *dev, struct clanq_evq *evq,
		     unsigned int max_regs);

/** \brief Close the event queue; its registrations go with it. */
int clanq_evq_destroy(struct clanq_evq *evq);

/**
 * \brief Deliver the events in mask (CLANQ_EV_*) of ep to evq. OOB
 * messages and completions already waiting raise an event at once;
 * tripwires that fired before the registration do not (the driver
 * never reads the fired bitmap): look at it after registering.
 * \return the registration index (>= 0), which events carry; -EINVAL,
 *         -ENOENT if ep is not of the evq's context, -ENOSPC when full.
 */
int clanq_evq_register(struct clanq_evq *evq, const struct clanq_ep *ep,
		       uint32_t mask, uint64_t cookie);

/**
 * \brief Remove a registration. Events of it may still be in the ring;
 * its index is handed out again only after such an event was taken.
 * Destroying an endpoint removes its registrations too, and their
 * indices may then come back for other endpoints.
 */
int clanq_evq_unregister(struct clanq_evq *evq, int reg);

/** \brief The fd to put in poll/epoll: readable while events are queued. */
static inline int clanq_evq_fd(const struct clanq_evq *evq)
{
	return evq->fd;
}

/** \brief Set how long clanq_evq_wait() spins before it blocks. */
static inline void clanq_evq_set_spin(struct clanq_evq *evq, uint64_t spin_ns)
{
	evq->spin_ns = spin_ns;
}

/**
 * \brief Take the next event, entirely at user level (no system call).
 *
 * Clears the registration's pending bit before returning, so the caller
 * must then drain every source of that registration: anything arriving
 * after the bit was cleared raises a new event. One consumer thread per
 * evq: clanq_evq_poll() and clanq_evq_wait() own the ring's consumer side.
 * \return 0 with *ev filled, or -EAGAIN if there is none.
 */
static inline int clanq_evq_poll(struct clanq_evq *evq, struct clanq_event *ev)
{
	uint32_t reg;

	if (!clanq_q_get(&evq->ring, ev))
		return -EAGAIN;
	reg = ev->reg;
	if (reg / 64 < evq->nr_words)
		__atomic_fetch_and(&evq->pending[reg / 64],
				   ~(1ull << (reg % 64)), __ATOMIC_SEQ_CST);
	/*
	 * [C] of queue.h: our clear must be ordered before the caller's
	 * next look at the source, against the driver's publish +
	 * test_and_set_bit. A seq_cst RMW followed by an acquire load is
	 * not enough in C11 (arm64 may hoist an LDAPR above it).
	 */
	clanq_q_mb();
	return 0;
}

/**
 * \brief Wait for the next event: poll, spin for spin_ns, then block in
 * the driver without losing a wake-up.
 * \param timeout_ns  -1: no timeout; 0: poll once.
 * \return 0 with *ev filled; -ETIMEDOUT when the time is up (at once
 *         for timeout_ns 0 and no event); -EINTR on a signal; -errno.
 */
int clanq_evq_wait(struct clanq_evq *evq, struct clanq_event *ev,
		   int64_t timeout_ns);

/*
 * Tripwires (paper sections 2 and 3.3).
 */

/**
 * A tripwire: a range of one of this context's regions that fires when a
 * write the NIC delivers touches it (an RDMA write, or PIO through an
 * aperture and clanq_ap_flush()). A fire sets its bit in its endpoint's
 * fired bitmap, raises CLANQ_EV_TRIPWIRE on the endpoint's event queue
 * registrations and wakes clanq_tw_wait_change(); a one-shot tripwire
 * (the default) is disarmed by it, a CLANQ_TW_PERSISTENT one stays armed.
 */
struct clanq_tw {
	int fd;				/**< the context it lives in */
	uint32_t id;
	uint32_t bit;			/**< in the endpoint's fired bitmap */
	uint64_t *fired_word;		/**< the bitmap word holding bit */
	char *mem;			/**< the region's memory */
	uint64_t off, len;		/**< the range, in the region */
	uint64_t spin_ns;		/**< clanq_tw_wait_change() spins this long */
};

/**
 * \brief Create a tripwire on [off, off + len) of region r, owned by ep
 * (both of this context). flags: CLANQ_TW_PERSISTENT, CLANQ_TW_ARMED.
 * \return 0; -EINVAL for len < CLANQ_TW_MIN_LEN; -ERANGE outside the
 *         region; -ENOENT; -ENOSPC past max_tripwires or ep's tw_slots.
 */
int clanq_tw_create(struct clanq_ep *ep, struct clanq_tw *tw,
		    const struct clanq_region *r, uint64_t off, uint64_t len,
		    uint32_t flags);

/**
 * \brief Arm (a system call, with a full barrier before it returns: a
 * re-check of the watched memory after it cannot miss a write that
 * did not fire it).
 */
int clanq_tw_arm(struct clanq_tw *tw);

/** \brief Disarm: writes no longer fire it. */
int clanq_tw_disarm(struct clanq_tw *tw);

/** \brief Destroy; a clanq_tw_wait_change() on it returns -EIDRM. */
int clanq_tw_destroy(struct clanq_tw *tw);

/** \brief Has it fired since its bit was last cleared? No system call. */
static inline bool clanq_tw_fired(const struct clanq_tw *tw)
{
	return __atomic_load_n(tw->fired_word, __ATOMIC_ACQUIRE) &
	       (1ull << (tw->bit % 64));
}

/**
 * \brief Clear its fired bit (no system call). Clear before looking at
 * what the tripwire watches: a fire after the clear sets it again.
 */
static inline void clanq_tw_clear(struct clanq_tw *tw)
{
	__atomic_fetch_and(tw->fired_word, ~(1ull << (tw->bit % 64)),
			   __ATOMIC_SEQ_CST);
}

/**
 * \brief Take word `word` of ep's fired bitmap: the bits of the
 * tripwires 64 * word ... 64 * word + 63 that fired, cleared in one
 * atomic exchange (no system call). For servers with many tripwires.
 */
static inline uint64_t clanq_ep_tw_take(struct clanq_ep *ep, unsigned int word)
{
	if (word >= ep->tw_words)
		return 0;
	/* a look first: an exchange is a locked bus cycle, and words are mostly 0 */
	if (!__atomic_load_n(&ep->tw_fired[word], __ATOMIC_ACQUIRE))
		return 0;
	return __atomic_exchange_n(&ep->tw_fired[word], 0, __ATOMIC_SEQ_CST);
}

/** \brief Set how long clanq_tw_wait_change() spins before it blocks. */
static inline void clanq_tw_set_spin(struct clanq_tw *tw, uint64_t spin_ns)
{
	tw->spin_ns = spin_ns;
}

/**
 * \brief The blocking receive: wait until the uint64_t at addr (8-byte
 * aligned, inside the tripwire's range) no longer holds old. Spins for
 * tw->spin_ns, then arms the tripwire, issues a full barrier, re-checks
 * and blocks in the driver (one system call, CLANQ_IOC_TW_WAIT), so a
 * write that lands meanwhile is never slept through. The tripwire is
 * left armed or not as it was found.
 * \param timeout_ns  -1: no timeout; 0: look once.
 * \return 0 once *addr != old; -ETIMEDOUT; -EINTR on a signal; -EIDRM if
 *         the tripwire was destroyed; -ENXIO if its region was freed;
 *         -EINVAL for a bad addr.
 */
int clanq_tw_wait_change(struct clanq_tw *tw, const uint64_t *addr,
			 uint64_t old, int64_t timeout_ns);

/**
 * \brief clanq_tw_wait_change(), and also return, with 1, as soon as
 * an OOB message waits on ep, which must be the tripwire's owner: one
 * blocked receive that a driver notice (CLANQ_OOB_REVOKED) wakes too.
 * \return 0 once *addr != old; 1 when ep has an OOB message; else as
 *         clanq_tw_wait_change().
 */
int clanq_tw_wait_change_oob(struct clanq_tw *tw, const uint64_t *addr,
			     uint64_t old, struct clanq_ep *ep,
			     int64_t timeout_ns);

/**
 * \brief A request and the wait for its answer: store len bytes at off
 * of aperture ap by PIO (as clanq_ap_write()), then wait until *addr !=
 * old (as clanq_tw_wait_change()). When a tripwire waits for the
 * stores, tw does not spin and ap and tw are of one context (one
 * clanq_dev), the flush and the block are one system call
 * (CLANQ_TW_WAIT_FLUSH), where an eventfd ping-pong needs two.
 * \return as clanq_tw_wait_change(); -ERANGE, -ENXIO as clanq_ap_write()
 *         (then nothing was waited for).
 */
int clanq_ap_write_wait(struct clanq_ap *ap, uint64_t off, const void *src,
			size_t len, struct clanq_tw *tw, const uint64_t *addr,
			uint64_t old, int64_t timeout_ns);

/*
 * Spinning: what a polling loop needs beside the queues.
 */

/**
 * \brief Tell the CPU we are spinning: a hint (x86 pause, arm64 yield),
 * no system call. Out of line (lib/spin.c): the instruction is per
 * architecture, and a spin loop does not miss a call's few cycles.
 */
void clanq_cpu_relax(void);

/**
 * \brief CLOCK_MONOTONIC in nanoseconds (vDSO: no system call on x86).
 * Out of line (lib/spin.c), so that this header asks for no POSIX
 * feature macro: it compiles as strict ISO C11 too.
 */
uint64_t clanq_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* _CLANQ_H */
