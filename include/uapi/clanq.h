/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * clanq: the application/driver ABI.
 *
 * One header, shared by the driver and by libclanq. Conventions:
 *  - fixed-width fields, explicit padding, no pointers (addresses travel
 *    as __u64), so 32- and 64-bit user space see one layout;
 *  - every ioctl is _IOWR on one struct; fields named "reserved" and
 *    flag bits not defined here must be zero, and are rejected with
 *    -EINVAL otherwise, so they can be given a meaning later;
 *  - shared-memory layouts are never a struct to mirror: the kernel
 *    publishes offsets (struct clanq_queue_off) when it creates an object,
 *    as io_uring publishes sq_off/cq_off.
 */
#ifndef _UAPI_CLANQ_H
#define _UAPI_CLANQ_H

#include <linux/types.h>
#include <linux/ioctl.h>

/* Bumped on every incompatible change; the library refuses a mismatch. */
#define CLANQ_ABI_VERSION	1

/* /dev/clanq0 ... /dev/clanqN-1, one per soft NIC (node). */
#define CLANQ_DEV_PREFIX	"/dev/clanq"

/* Node ids are 32 bits; this one never names a NIC. */
#define CLANQ_NODE_INVALID	0xffffffffu

/*
 * Where one asynchronous queue lives inside a shared segment. All offsets
 * are from the start of the segment's mmap. The producer's and consumer's
 * index words are on separate cache lines; both hold values in
 * [0, nr_slots). See include/clanq/queue.h for the protocol.
 */
struct clanq_queue_off {
	__u32 prod;		/* producer's index (write_i, or its mirror) */
	__u32 cons;		/* consumer's index (read_i, or its mirror) */
	__u32 slots;		/* slot 0 */
	__u32 nr_slots;		/* a power of two, >= 2 */
	__u32 slot_size;	/* bytes, a multiple of 8 */
	__u32 reserved;
};

/* A full address: a peer names an endpoint (or region) by node and id. */
struct clanq_addr {
	__u32 node;
	__u32 id;
};

/*
 * CLANQ_IOC_QUERY: what this device is. Any context may issue it; it is
 * how the library checks the ABI version before anything else.
 */
struct clanq_query {
	__u32 abi_version;	/* out: CLANQ_ABI_VERSION */
	__u32 node;		/* out: this NIC's node id */
	__u32 nr_nics;		/* out: soft NICs in this kernel */
	__u32 flags;		/* in: must be zero */
	/*
	 * out: driver entries (ioctl, mmap, poll) of this context before
	 * this one: what "no system call on the fast path" is checked
	 * against
	 */
	__u64 ctx_entries;
	__u64 reserved[3];	/* in: must be zero */
};

/*
 * Out-of-band messages: fixed-size, 64 bytes. The driver stamps src; the
 * sender cannot forge it. Types below CLANQ_OOB_TYPE_USER belong to the
 * library's connection protocol.
 */
#define CLANQ_OOB_PAYLOAD	48
#define CLANQ_OOB_TYPE_USER	0x100

struct clanq_oob_msg {
	__u32 type;
	__u32 len;		/* payload bytes that mean something */
	struct clanq_addr src;	/* stamped by the driver */
	__u8 payload[CLANQ_OOB_PAYLOAD];
};

/*
 * Per-endpoint counters, in the endpoint's shared segment. The driver
 * only writes them (mirrors of its private counts), never reads them.
 */
struct clanq_ep_counters {
	__u64 oob_sent;		/* accepted from this endpoint by the wire */
	__u64 oob_delivered;	/* put on this endpoint's OOB queue */
	__u64 oob_dropped;	/* discarded because the queue was full */
	__u64 events;		/* events this endpoint raised on evqs */
	__u64 reserved[4];
};

/*
 * CLANQ_IOC_EP_CREATE: an endpoint with an OOB receive queue. Its shared
 * segment is mmapped (shared, read-write) from the context fd at
 * mmap_offset, exactly mmap_size bytes. The application writes only the
 * OOB queue's consumer index; the driver trusts nothing in the segment.
 */
struct clanq_ep_create {
	__u32 oob_slots;	/* in: power of two; 0 = driver default */
	__u32 flags;		/* in: must be zero */
	struct clanq_addr addr;	/* out: node-wide address */
	__u64 mmap_offset;	/* out */
	__u64 mmap_size;	/* out */
	struct clanq_queue_off oob;	/* out: OOB queue, driver produces */
	__u32 counters;		/* out: offset of struct clanq_ep_counters */
	__u32 reserved0;
	__u64 reserved[4];
};

/* CLANQ_IOC_EP_DESTROY: by id; only the owning context may. */
struct clanq_ep_destroy {
	__u32 id;
	__u32 flags;
	__u64 reserved[2];
};

/*
 * CLANQ_IOC_OOB_SEND: send one OOB message from a local endpoint. Like a
 * NIC, the sender is not told whether the receiver's queue had room:
 * drops are counted at the receiver. An unknown node is -EHOSTUNREACH.
 */
struct clanq_oob_send {
	__u32 ep;		/* in: sending endpoint, of this context */
	__u32 flags;		/* in: must be zero */
	struct clanq_addr dst;	/* in */
	__u32 type;		/* in */
	__u32 len;		/* in: <= CLANQ_OOB_PAYLOAD */
	__u8 payload[CLANQ_OOB_PAYLOAD];
	__u64 reserved[2];
};

/*
 * Unified event queue (evq). Events from any endpoint source are posted
 * into one ring, at most once per registration until the application
 * dequeues the event and clears the registration's bit in the pending
 * bitmap. Its own fd: mmap (offset 0, exactly mmap_size), poll, and the
 * REGISTER/UNREGISTER/WAIT ioctls.
 */
#define CLANQ_EV_OOB		(1u << 0)	/* OOB message arrived */
#define CLANQ_EV_RDMA		(1u << 1)	/* RDMA completion (later) */
#define CLANQ_EV_TRIPWIRE	(1u << 2)	/* tripwire fired (later) */
#define CLANQ_EV_ALL		(CLANQ_EV_OOB | CLANQ_EV_RDMA | CLANQ_EV_TRIPWIRE)

struct clanq_event {
	__u32 reg;		/* registration: its bit in the pending map */
	/* CLANQ_EV_* that raised it: a hint, drain every source */
	__u32 events;
	__u64 cookie;		/* the registration's cookie */
};

struct clanq_evq_create {
	__u32 max_regs;		/* in: registrations it can hold */
	__u32 flags;		/* in: must be zero */
	__s32 fd;		/* out: the evq's file descriptor */
	__u32 nr_words;		/* out: 64-bit words in the pending map */
	__u64 mmap_size;	/* out */
	struct clanq_queue_off ring;	/* out: events, driver produces */
	__u32 pending;		/* out: offset of the pending bitmap */
	__u32 reserved0;
	__u64 reserved[4];
};

/* On the evq fd: watch sources of an endpoint of the evq's context. */
struct clanq_evq_reg {
	__u32 ep;		/* in: endpoint id */
	__u32 events;		/* in: CLANQ_EV_* mask, non-zero */
	__u64 cookie;		/* in: returned in each event */
	__u32 reg;		/* out (REGISTER), in (UNREGISTER): index */
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

/*
 * On the evq fd: sleep until the ring holds an event the caller has not
 * consumed. read_i is the caller's consumer index: the driver sleeps only
 * while its producer index still equals it, so an event posted between
 * the caller's last look and this call is never slept through.
 */
struct clanq_evq_wait {
	__u64 timeout_ns;	/* in: ~0 = no timeout */
	__u32 read_i;		/* in */
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

#define CLANQ_IOC_MAGIC		0xC1
#define CLANQ_IOC_QUERY		_IOWR(CLANQ_IOC_MAGIC, 0x00, struct clanq_query)
#define CLANQ_IOC_EP_CREATE	_IOWR(CLANQ_IOC_MAGIC, 0x01, struct clanq_ep_create)
#define CLANQ_IOC_EP_DESTROY	_IOWR(CLANQ_IOC_MAGIC, 0x02, struct clanq_ep_destroy)
#define CLANQ_IOC_OOB_SEND	_IOWR(CLANQ_IOC_MAGIC, 0x03, struct clanq_oob_send)
#define CLANQ_IOC_EVQ_CREATE	_IOWR(CLANQ_IOC_MAGIC, 0x04, struct clanq_evq_create)
/* on the evq fd */
#define CLANQ_IOC_EVQ_REGISTER	_IOWR(CLANQ_IOC_MAGIC, 0x10, struct clanq_evq_reg)
#define CLANQ_IOC_EVQ_UNREGISTER _IOWR(CLANQ_IOC_MAGIC, 0x11, struct clanq_evq_reg)
#define CLANQ_IOC_EVQ_WAIT	_IOWR(CLANQ_IOC_MAGIC, 0x12, struct clanq_evq_wait)

#endif /* _UAPI_CLANQ_H */
