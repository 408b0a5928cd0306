/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * clanq: the application/driver ABI.
 *
 * One header, shared by the driver and by libclanq. Conventions:
 *  - fixed-width fields, explicit padding, no pointers (addresses travel
 *    as __u64), so 32- and 64-bit user space see one layout;
 *  - every ioctl CLANQ_IOC_<CMD> is _IOWR on one struct clanq_ioc_<cmd>
 *    (the library's calls and the driver's objects have names of their
 *    own, so each name has one definition); flag bits not defined here
 *    and the fields named "reserved", which close every such struct,
 *    must be zero, and are rejected with -EINVAL otherwise, so they can
 *    be given a meaning later;
 *  - shared-memory layouts are never a struct to mirror: the kernel
 *    publishes offsets (struct clanq_queue_off) when it creates an object,
 *    as io_uring publishes sq_off/cq_off.
 */
#ifndef _UAPI_CLANQ_H
#define _UAPI_CLANQ_H

#include <linux/types.h>
#include <linux/ioctl.h>

/* Bumped on every incompatible change; the library refuses a mismatch. */
#define CLANQ_ABI_VERSION	4

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
struct clanq_ioc_query {
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

/*
 * Notices: OOB messages the driver itself puts on an endpoint's queue,
 * with CLANQ_OOB_NOTICE set in the type (OOB_SEND refuses such a type,
 * so a peer cannot forge one). They travel like any OOB message: a full
 * queue drops them, and counts it in oob_dropped.
 *
 * CLANQ_OOB_UNREACHABLE: a message this endpoint sent found no endpoint
 * at its destination (nobody has that id, or it was destroyed): src is
 * that destination, the payload a struct clanq_oob_unreachable. The
 * network's "port unreachable"; a connect to a service nobody serves is
 * refused by it.
 *
 * CLANQ_OOB_REVOKED: the region behind an aperture imported with
 * notify_ep set to this endpoint was freed (its owner freed it, or
 * died): src is the region's address, the payload a struct
 * clanq_oob_revoked. How a survivor learns that its peer is gone.
 */
#define CLANQ_OOB_NOTICE	0x80000000u
#define CLANQ_OOB_UNREACHABLE	(CLANQ_OOB_NOTICE | 1)
#define CLANQ_OOB_REVOKED	(CLANQ_OOB_NOTICE | 2)

struct clanq_oob_msg {
	__u32 type;
	__u32 len;		/* payload bytes that mean something */
	struct clanq_addr src;	/* stamped by the driver */
	__u8 payload[CLANQ_OOB_PAYLOAD];
};

/* The payload of a CLANQ_OOB_UNREACHABLE notice. */
struct clanq_oob_unreachable {
	__u32 type;		/* the undelivered message's */
	__u32 len;		/* the undelivered message's */
	__u8 head[40];		/* the first 40 bytes of its payload */
};

/* The payload of a CLANQ_OOB_REVOKED notice. */
struct clanq_oob_revoked {
	__u32 ap;		/* the aperture, of the endpoint's context */
	__u32 reserved;
	__u64 cookie;		/* notify_cookie, as given to AP_IMPORT */
	__u64 reserved2[4];
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
	__u64 rdma_reqs;	/* RDMA requests the engine took */
	__u64 rdma_bytes;	/* bytes those requests wrote */
	__u64 rdma_errors;	/* requests completed with an error status */
	__u64 rdma_kicks;	/* CLANQ_IOC_RDMA_KICK calls (system calls) */
	__u64 tw_fires;		/* this endpoint's tripwires that fired */
	/* AP_FLUSH calls (system calls) that fired one of them */
	__u64 tw_flushes;
	/*
	 * AP_FLUSH calls that found one of them armed in the 64-byte blocks
	 * written, but not in the bytes written: the armed bitmap's
	 * granularity cost the writer a system call for nothing
	 */
	__u64 tw_spurious;
};

/*
 * CLANQ_IOC_EP_CREATE: an endpoint with an OOB receive queue, an RDMA
 * request queue and an RDMA completion queue. Its shared segment is
 * mmapped (shared, read-write) from the context fd at mmap_offset,
 * exactly mmap_size bytes. The application writes only the OOB and
 * completion queues' consumer indices and the request queue's producer
 * index and slots; the driver trusts nothing in the segment.
 *
 * The need_wakeup word is the engine's "sleep flag" (DESIGN section 3,
 * AF_XDP's XDP_RING_NEED_WAKEUP): non-zero while the engine is not
 * looking at the request queue. After publishing a request the
 * application issues a full barrier and, only if the word is set, rings
 * the doorbell: CLANQ_IOC_RDMA_KICK.
 *
 * The fired bitmap holds one bit per tripwire of the endpoint (tw_slots
 * of them, as __u64 words at offset tw_fired): the driver only sets
 * bits, the application polls the words and clears bits itself.
 */
#define CLANQ_EP_SERVICE	0x1u	/* addr.id in: a service number */
#define CLANQ_EP_SHARED		0x2u	/* with SERVICE: join its group */
#define CLANQ_EP_FLAGS		(CLANQ_EP_SERVICE | CLANQ_EP_SHARED)
/*
 * A shared service (CLANQ_EP_SERVICE | CLANQ_EP_SHARED), as SO_REUSEPORT:
 * up to CLANQ_SHARED_MAX endpoints, each of them asking for sharing and
 * all of one user (the euid that opened the first one's context), serve
 * one service number; else -EADDRINUSE. Each member has an id of its own
 * (addr.id out, above CLANQ_SERVICE_MAX: what it sends from, what it is
 * destroyed by). An OOB message to (node, service) goes to one member,
 * picked by a hash of its source address and of its first
 * CLANQ_SHARED_KEY_BYTES payload bytes (zero-padded): a protocol puts
 * what names a flow there (a connection's id, as ports in a TCP header),
 * so that every message of a flow, retransmissions included, reaches the
 * same member while the members stay the same. A member that is
 * destroyed leaves; the group ends with its last member. A service in
 * use unshared cannot be shared, nor the other way round.
 */
#define CLANQ_SHARED_MAX	64u
#define CLANQ_SHARED_KEY_BYTES	16u
/*
 * Service numbers: endpoint ids 1 .. CLANQ_SERVICE_MAX are never handed
 * out by the driver; an endpoint takes one by asking for it (EP_CREATE
 * with CLANQ_EP_SERVICE and addr.id), so that peers can name it without
 * being told its id, as a TCP port is named. Below CLANQ_SERVICE_PRIV
 * that needs CAP_NET_BIND_SERVICE (-EACCES); one in use is -EADDRINUSE.
 */
#define CLANQ_SERVICE_MAX	65535u
#define CLANQ_SERVICE_PRIV	1024u

struct clanq_ioc_ep_create {
	__u32 oob_slots;	/* in: power of two; 0 = driver default */
	__u32 flags;		/* in: CLANQ_EP_* */
	__u32 rq_slots;		/* in: power of two; 0 = driver default */
	__u32 cq_slots;		/* in: power of two; 0 = driver default */
	/* out: node-wide address; in: addr.id with CLANQ_EP_SERVICE */
	struct clanq_addr addr;
	__u64 mmap_offset;	/* out */
	__u64 mmap_size;	/* out */
	struct clanq_queue_off oob;	/* out: OOB queue, driver produces */
	struct clanq_queue_off rq;	/* out: RDMA requests, application produces */
	struct clanq_queue_off cq;	/* out: RDMA completions, driver produces */
	__u32 counters;		/* out: offset of struct clanq_ep_counters */
	__u32 need_wakeup;	/* out: offset of the engine's __u32 sleep flag */
	/*
	 * in: tripwires the endpoint can own, a multiple of 64; 0 = driver
	 * default. out: that number
	 */
	__u32 tw_slots;
	__u32 tw_fired;		/* out: offset of the fired bitmap */
	__u64 reserved[3];
};

/* CLANQ_IOC_EP_DESTROY: by id; only the owning context may. */
struct clanq_ioc_ep_destroy {
	__u32 id;
	__u32 flags;
	__u64 reserved[2];
};

/*
 * CLANQ_IOC_OOB_SEND: send one OOB message from a local endpoint. Like a
 * NIC, the sender is not told whether the receiver's queue had room:
 * drops are counted at the receiver. An unknown node is -EHOSTUNREACH.
 */
struct clanq_ioc_oob_send {
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
#define CLANQ_EV_OOB		0x1u	/* OOB message arrived */
#define CLANQ_EV_RDMA		0x2u	/* RDMA completion posted */
#define CLANQ_EV_TRIPWIRE	0x4u	/* one of its tripwires fired */
#define CLANQ_EV_ALL		(CLANQ_EV_OOB | CLANQ_EV_RDMA | CLANQ_EV_TRIPWIRE)

struct clanq_event {
	__u32 reg;		/* registration: its bit in the pending map */
	/* CLANQ_EV_* that raised it: a hint, drain every source */
	__u32 events;
	__u64 cookie;		/* the registration's cookie */
};

struct clanq_ioc_evq_create {
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
struct clanq_ioc_evq_reg {
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
 *
 * CLANQ_EVQ_WAIT_ARM: the blocking receive of a loop over many
 * connections, in one system call. arms is the user address of nr_arms
 * (1 .. CLANQ_EVQ_ARM_MAX) struct clanq_evq_arm, which the driver
 * copies once. It makes their flushes first, in order (what AP_FLUSH
 * does; the first that fails ends the call with its error, nothing
 * armed); then arms every tripwire (of the evq's context; it stays
 * armed until it fires, as after TW_ARM), issues a full barrier, and
 * reads every watched word. If any no longer holds its val, it returns 0
 * at once with changed set to how many; otherwise it waits as above,
 * changed 0. An entry that names no tripwire (-ENOENT) or a word
 * outside it or unaligned (-EINVAL) fails the call before anything is
 * done. Without the flag, arms, nr_arms and changed are reserved words
 * and must be zero; with it, changed must be zero on the way in.
 *
 * A write the caller missed is never slept through ([F] of
 * include/clanq/queue.h): the writer stores, issues a full barrier and
 * looks at the armed bitmap (or the RDMA engine at its tripwires); the
 * driver arms, issues a full barrier and reads the word. Either the
 * writer sees the tripwire armed and fires it (an event on this evq),
 * or the driver sees the new value and does not sleep.
 */
#define CLANQ_EVQ_WAIT_ARM	0x1u
#define CLANQ_EVQ_WAIT_FLAGS	CLANQ_EVQ_WAIT_ARM
#define CLANQ_EVQ_ARM_MAX	1024

/* CLANQ_EVQ_ARM_FLUSH: not a tripwire but a flush, as AP_FLUSH's. */
#define CLANQ_EVQ_ARM_FLUSH	0x1u
#define CLANQ_EVQ_ARM_FLAGS	CLANQ_EVQ_ARM_FLUSH

struct clanq_evq_arm {
	__u32 id;		/* a tripwire; with CLANQ_EVQ_ARM_FLUSH an aperture */
	__u32 flags;		/* CLANQ_EVQ_ARM_* */
	/*
	 * The watched __u64 (8-byte aligned, inside the tripwire), into its
	 * region; with CLANQ_EVQ_ARM_FLUSH, into the aperture.
	 */
	__u64 off;
	/*
	 * Its value when the caller last looked; with CLANQ_EVQ_ARM_FLUSH,
	 * the bytes stored at off.
	 */
	__u64 val;
};

struct clanq_ioc_evq_wait {
	__u64 timeout_ns;	/* in: ~0 = no timeout */
	__u32 read_i;		/* in */
	__u32 flags;		/* in: CLANQ_EVQ_WAIT_* */
	union {
		__u64 reserved[2];	/* without CLANQ_EVQ_WAIT_ARM: zero */
		struct {
			__u64 arms;	/* in: address of struct clanq_evq_arm[] */
			__u32 nr_arms;	/* in */
			__u32 changed;	/* out: words that no longer held val */
		};
	};
};

/*
 * Regions: memory of this context that the RDMA engine may read (as a
 * request's source) and that peers may write once it is exported.
 *
 * Allocated regions are zeroed driver memory, mapped by the owner from
 * the context fd at mmap_offset (exactly mmap_size bytes, shared).
 * Registered regions (CLANQ_REGION_REGISTER) are the caller's own memory
 * at addr, pinned and charged to RLIMIT_MEMLOCK until freed; they need
 * no mapping (mmap_offset and mmap_size are 0).
 *
 * Every region has a node-wide id. Freeing it revokes every aperture
 * onto it: later requests through them complete with -ENXIO, and PIO
 * mappings of it are zapped (a later access is SIGBUS). The memory
 * itself goes only when nothing refers to it any more.
 */
#define CLANQ_REGION_REGISTER	0x1u

struct clanq_ioc_region_create {
	__u64 addr;		/* in: REGISTER: the memory; else 0 */
	__u64 size;		/* in: bytes, > 0 */
	__u32 flags;		/* in: CLANQ_REGION_* */
	__u32 id;		/* out: node-wide region id */
	__u64 mmap_offset;	/* out: allocated regions */
	__u64 mmap_size;	/* out: allocated regions, size rounded up to pages */
	__u64 reserved[2];
};

/* CLANQ_IOC_REGION_FREE: by id; only the owning context may. */
struct clanq_ioc_region_free {
	__u32 id;
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

/* Rights an export grants and an import asks for. */
#define CLANQ_RIGHT_READ	0x1u	/* map it (PIO needs it) */
#define CLANQ_RIGHT_WRITE	0x2u	/* RDMA or PIO writes */
#define CLANQ_RIGHTS_ALL	(CLANQ_RIGHT_READ | CLANQ_RIGHT_WRITE)

/*
 * CLANQ_IOC_REGION_EXPORT: let peers import the region, with these
 * rights, if they name it with the returned key (64 random bits). A
 * region is exported once; its key lives as long as it does.
 *
 * With CLANQ_EXPORT_KEY_NAMES_REGION the key is the region's id in its
 * top 32 bits and 32 random, non-zero bits below: one 64-bit word names
 * the region and holds its secret, for interfaces that pass a peer no
 * more than that (libfabric's fi_mr_key(), a verbs rkey's place). The
 * secret is then 32 bits, not 64 (a verbs rkey has 8 or fewer); every
 * guess still costs the guesser an import.
 */
#define CLANQ_EXPORT_KEY_NAMES_REGION	0x1u
#define CLANQ_EXPORT_FLAGS		CLANQ_EXPORT_KEY_NAMES_REGION

struct clanq_ioc_region_export {
	__u32 id;		/* in */
	__u32 rights;		/* in: non-empty subset of CLANQ_RIGHTS_ALL */
	__u64 key;		/* out */
	__u32 flags;		/* in: CLANQ_EXPORT_* (was reserved, zero) */
	__u32 reserved0;
	__u64 reserved;
};

/*
 * CLANQ_IOC_AP_IMPORT: an aperture onto [offset, offset + len) of an
 * exported region, named by (node, id) and key. A wrong key, an unknown
 * region and a region that was never exported all read -ENOENT, so a
 * guesser learns nothing; an unknown node is -EHOSTUNREACH. rights must
 * be a non-empty subset of the export's (-EACCES beyond it), len > 0,
 * and the window inside the region (-ERANGE).
 *
 * When the exporter is in this kernel (the loop wire), the aperture can
 * also be mapped for PIO: mmap the context fd at mmap_offset, exactly
 * mmap_size bytes; the aperture's first byte is at map_delta in the
 * mapping. The mapping covers whole pages, which is allowed only when
 * those pages hold nothing but the region's memory; otherwise mmap_size
 * is 0 and writes go through the RDMA engine. A mapping can always be
 * read, so it is offered only to imports with CLANQ_RIGHT_READ (a
 * write-only import is RDMA-only); PROT_WRITE (also by a later
 * mprotect) needs CLANQ_RIGHT_WRITE as well: -EACCES otherwise.
 *
 * With a PIO mapping comes the region's armed bitmap (see Tripwires),
 * mapped read-only (shared, PROT_READ only) at armed_mmap_offset, exactly
 * armed_mmap_size bytes. Bit b of it (as __u64 words, bit b % 64 of word
 * b / 64) covers region bytes [b * 64, b * 64 + 63]: the aperture's byte
 * x is region byte offset + x.
 */
/*
 * CLANQ_AP_SINK: once the region is revoked, the PIO mapping does not
 * raise SIGBUS but maps a page of the aperture's own where stores are
 * discarded (and reads see them): as a NIC drops writes to a peer that
 * went away. For libraries that learn of the revocation by a notice and
 * must not be killed by a store that raced with it. The page is charged
 * to the importer at import (max_ctx_bytes, max_user_bytes), whether or
 * not it is ever needed.
 */
#define CLANQ_AP_SINK		0x1u
/*
 * CLANQ_AP_ATOMIC: the aperture will do CAS and FADD (they need it, with
 * both rights). Across hosts the import is refused with -EOPNOTSUPP if
 * either host's RDMA device has no atomics (siw), so that an application
 * learns it once, at import, not from each request.
 */
#define CLANQ_AP_ATOMIC		0x2u
#define CLANQ_AP_FLAGS		(CLANQ_AP_SINK | CLANQ_AP_ATOMIC)

struct clanq_ioc_ap_import {
	struct clanq_addr region;	/* in: exporter's node and region id */
	__u64 key;		/* in */
	__u64 offset;		/* in: into the region */
	__u64 len;		/* in: > 0 */
	__u32 rights;		/* in: CLANQ_RIGHT_* */
	__u32 id;		/* out: aperture id, of this context */
	__u64 mmap_offset;	/* out */
	__u64 mmap_size;	/* out: 0 if it cannot be mapped */
	__u32 map_delta;	/* out */
	__u32 flags;		/* in: CLANQ_AP_* */
	__u64 armed_mmap_offset;	/* out: with a PIO mapping */
	__u64 armed_mmap_size;	/* out: 0 without one */
	__u64 notify_cookie;	/* in: returned in the notice */
	/* in: an endpoint of this context told of a revocation, or 0 */
	__u32 notify_ep;
	__u32 reserved0;
	__u64 reserved[2];
};

/* CLANQ_IOC_AP_CLOSE: by id; its PIO mappings are zapped. */
struct clanq_ioc_ap_close {
	__u32 id;
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

/*
 * RDMA requests (application -> engine), one slot each, in the
 * endpoint's request queue. The engine copies a slot before it looks at
 * it and validates the copy. Requests of one logical message (up to and
 * including the one flagged LAST) are served together, unless they pass
 * the engine's transfer limit, when they are split across turns.
 *
 * Operations (op; 0 is WRITE, so a request written before there were
 * others means what it always meant). A request names a region of this
 * context (src_region, src_off: the local side, whatever the direction)
 * and an aperture (dst_ap, dst_off: the remote side):
 *  CLANQ_RDMA_OP_WRITE  len bytes, region -> aperture. Needs the
 *	aperture's CLANQ_RIGHT_WRITE. Fires the tripwires it touches.
 *  CLANQ_RDMA_OP_READ   len bytes, aperture -> region. Needs
 *	CLANQ_RIGHT_READ. Fires no tripwire (not even in the region the
 *	bytes land in). The bytes are in the region when the completion
 *	is seen; until then the region's range holds no defined value.
 *  CLANQ_RDMA_OP_CAS    compare-and-swap of the 8-byte word at dst_off:
 *	if it holds operand[0], it becomes operand[1].
 *  CLANQ_RDMA_OP_FADD   fetch-and-add: the word at dst_off becomes
 *	itself plus operand[0] (mod 2^64); operand[1] must be 0.
 *  For CAS and FADD: len is 8, src_region and src_off are 0 (the old
 *  value comes back in the completion's value, not in a region), the
 *  word's offset in the exported region (the import's offset + dst_off)
 *  is a multiple of 8, and the aperture was imported with
 *  CLANQ_AP_ATOMIC and both CLANQ_RIGHT_READ and CLANQ_RIGHT_WRITE (an
 *  atomic reads the word and may change it). An
 *  atomic that changed the word fires its tripwires like a write; a CAS
 *  that did not swap wrote nothing and fires none. The exporter's memory
 *  must be 8-byte aligned there too: a region registered at an address
 *  that makes the word misaligned refuses atomics (-EINVAL).
 *  For WRITE and READ, operand[] is 0.
 *
 * Atomicity. CAS and FADD are atomic against every other clanq atomic on
 * that word, from any endpoint, node or host, and on the loop wire also
 * against the CPU's own atomic instructions on the word through a PIO
 * mapping (the engine uses them on the same memory). A WRITE (RDMA or a
 * plain PIO store) that races with an atomic on the same word leaves the
 * word undefined: either may win, and a WRITE's bytes are not stored as
 * one word. Across hosts (the verbs wire) an atomic is atomic against
 * other atomics through the same device kind; against the exporter's CPU
 * it is atomic only if that host's device reports IB_ATOMIC_GLOB, and
 * undefined otherwise, as verbs define it. Atomics across hosts need
 * devices with IB_ATOMIC_HCA or better on both hosts: an import with
 * CLANQ_AP_ATOMIC is refused with -EOPNOTSUPP otherwise (siw has none).
 *
 * What a receiver may rely on (every wire keeps it):
 *  - the requests of one queue become visible at the destination in
 *    queue order: everything a WRITE (or an atomic) wrote is visible
 *    before anything a later WRITE or atomic of that queue writes;
 *  - within one WRITE, the last naturally aligned 8 bytes wholly
 *    inside it (its "final word") become visible last, with release
 *    semantics: a receiver that sees the final word's new value with an
 *    acquire load (or a load, then a read barrier) sees every other byte
 *    of the request. So polling the last word of a message works, as on
 *    many RDMA NICs, provided that word is 8-byte aligned and changes.
 *  A WRITE shorter than 8 bytes, or with no aligned word inside it, has
 *  no final word: its bytes land in no defined order.
 *
 * What the requester may rely on:
 *  - completions come in queue order;
 *  - a READ's bytes, and an atomic's old value, are there when its
 *    completion is seen (acquire, as every completion);
 *  - without CLANQ_RDMA_FENCE, a request may start before an earlier
 *    READ or atomic of its queue has finished at the target: a WRITE
 *    may land before an earlier READ of the same bytes has read them,
 *    as verbs allow. With FENCE it starts only after every earlier
 *    READ and atomic of its queue completed (verbs' IB_SEND_FENCE).
 *    WRITEs and atomics are ordered among themselves without it, and a
 *    READ sees what the same queue's earlier WRITEs and atomics wrote.
 *    (The engine has several requests of a queue out at once only
 *    through one aperture, where one connection keeps their order, and
 *    a FENCE request waits for every one out: it costs a round trip to
 *    another host when requests are out, nothing otherwise.)
 */
#define CLANQ_RDMA_LAST		0x1u	/* last of a logical message */
#define CLANQ_RDMA_SIGNAL	0x2u	/* complete even on success */
#define CLANQ_RDMA_FENCE	0x4u	/* after earlier READs and atomics */
#define CLANQ_RDMA_FLAGS	(CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL | \
				 CLANQ_RDMA_FENCE)

#define CLANQ_RDMA_OP_WRITE	0u	/* region -> aperture */
#define CLANQ_RDMA_OP_READ	1u	/* aperture -> region */
#define CLANQ_RDMA_OP_CAS	2u	/* compare-and-swap an 8-byte word */
#define CLANQ_RDMA_OP_FADD	3u	/* fetch-and-add an 8-byte word */
#define CLANQ_RDMA_NR_OPS	4u

/* The size of the word CAS and FADD work on, and its alignment. */
#define CLANQ_RDMA_ATOMIC_LEN	8u

struct clanq_rdma_req {
	__u32 src_region;	/* a region of this context (0: atomics) */
	__u32 dst_ap;		/* an aperture of this context */
	__u64 src_off;		/* into the region */
	__u64 dst_off;		/* into the aperture */
	__u64 len;		/* bytes; 0 is a valid no-op (atomics: 8) */
	__u64 cookie;		/* returned in the completion */
	__u32 flags;		/* CLANQ_RDMA_* */
	__u32 op;		/* CLANQ_RDMA_OP_* (was reserved0) */
	/* CAS: compare, swap; FADD: add, 0; WRITE, READ: 0, 0 */
	__u64 operand[2];
};

/*
 * RDMA completions (engine -> application), in request order. A request
 * completes when it is flagged SIGNAL, or when it fails:
 *	-EINVAL   unknown flags or op, operands an op does not take,
 *		  an atomic that is not 8 bytes, names a region, or is
 *		  misaligned
 *	-ENOENT   no such region or aperture in this context
 *	-EACCES   the aperture lacks the rights the op needs (WRITE:
 *		  CLANQ_RIGHT_WRITE; READ: CLANQ_RIGHT_READ; atomics: both,
 *		  and the import's CLANQ_AP_ATOMIC)
 *	-ERANGE   outside the region or the aperture (or overflowing)
 *	-ENXIO    the region behind the aperture, or the local region, was
 *		  freed (a READ racing that returns no byte of it)
 *	-EOPNOTSUPP  the wire to the aperture's host cannot do the op
 * The engine takes a request only while the completion queue has room,
 * so no completion is ever dropped: a full completion queue stalls that
 * endpoint's requests, nobody else's.
 */
struct clanq_rdma_comp {
	__u64 cookie;
	__u64 len;		/* bytes written (READ: read) */
	__s32 status;		/* 0 or -errno */
	__u32 reserved0;
	__u64 value;		/* CAS, FADD: the word's old value; else 0 */
};

/*
 * CLANQ_IOC_RDMA_KICK: the doorbell. The engine looks at ep's queue.
 * Needed only while the endpoint's need_wakeup word is set.
 */
struct clanq_ioc_rdma_kick {
	__u32 ep;		/* in: an endpoint of this context */
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

/*
 * Tripwires (paper sections 2 and 3.3): a range of a region of this
 * context, at least CLANQ_TW_MIN_LEN bytes, that fires when a write the
 * NIC delivers touches it: an RDMA write, or PIO through an aperture.
 * A fire sets the tripwire's bit in its endpoint's fired bitmap, raises
 * CLANQ_EV_TRIPWIRE on the endpoint's evq registrations, wakes
 * TW_WAIT, and disarms the tripwire unless it is CLANQ_TW_PERSISTENT.
 *
 * PIO through a mapped aperture lands in memory without the driver, so
 * the writer checks the region's armed bitmap after its stores, with a
 * full barrier between, and calls CLANQ_IOC_AP_FLUSH only if a bit of
 * the blocks it wrote is set (the futex idea: a system call only when
 * somebody waits). The driver keeps the real state; the bitmap is a
 * hint it never reads. A waiter pairs with it by arming, then a full
 * barrier, then re-reading the watched word: TW_ARM ends with that
 * barrier, and TW_WAIT does all three (include/clanq/queue.h, [F]).
 */
#define CLANQ_TW_PERSISTENT	0x1u	/* stays armed when it fires */
#define CLANQ_TW_ARMED		0x2u	/* TW_CREATE: armed at once */
#define CLANQ_TW_FLAGS		(CLANQ_TW_PERSISTENT | CLANQ_TW_ARMED)
#define CLANQ_TW_MIN_LEN	8
#define CLANQ_TW_BLOCK_SHIFT	6		/* armed bitmap: 64 bytes a bit */

struct clanq_ioc_tw_create {
	__u32 ep;		/* in: the owner, an endpoint of this context */
	__u32 region;		/* in: a region of this context */
	__u64 off;		/* in: into the region */
	__u64 len;		/* in: >= CLANQ_TW_MIN_LEN, inside the region */
	__u32 flags;		/* in: CLANQ_TW_* */
	__u32 id;		/* out: of this context */
	__u32 bit;		/* out: its bit in the endpoint's fired bitmap */
	__u32 reserved0;
	__u64 reserved[2];
};

/* CLANQ_IOC_TW_ARM, _DISARM, _DESTROY: by id. */
struct clanq_ioc_tw_ctl {
	__u32 id;
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

/*
 * CLANQ_IOC_TW_WAIT: the blocking receive. Arms the tripwire (if it is
 * not armed), issues a full barrier, reads the __u64 at region offset
 * off (8-byte aligned, inside the tripwire) and returns 0 at once if it
 * no longer holds old; otherwise sleeps until the tripwire fires (0),
 * the time is up (-ETIMEDOUT), a signal (-EINTR), the tripwire is
 * destroyed (-EIDRM) or its region freed (-ENXIO). It leaves the
 * tripwire armed or not as it found it.
 *
 * With CLANQ_TW_WAIT_FLUSH it first does what AP_FLUSH does for
 * [flush_off, flush_off + flush_len) of aperture flush_ap, and returns
 * its error without waiting if it fails: a request and the wait for its
 * reply in one system call.
 */
#define CLANQ_TW_WAIT_FLUSH	0x1u
/*
 * CLANQ_TW_WAIT_OOB: also return (0) while the tripwire's endpoint has
 * an OOB message queued, so one blocked receive sees a notice too.
 */
#define CLANQ_TW_WAIT_OOB	0x2u
#define CLANQ_TW_WAIT_FLAGS	(CLANQ_TW_WAIT_FLUSH | CLANQ_TW_WAIT_OOB)

struct clanq_ioc_tw_wait {
	__u32 id;
	__u32 flags;		/* in: CLANQ_TW_WAIT_* */
	__u64 off;		/* in: the watched word, into the region */
	__u64 old;		/* in: its value when the caller last looked */
	__u64 timeout_ns;	/* in: ~0 = no timeout */
	__u64 flush_off;	/* in, with CLANQ_TW_WAIT_FLUSH: into the aperture */
	__u64 flush_len;	/* in, with CLANQ_TW_WAIT_FLUSH */
	__u32 flush_ap;		/* in, with CLANQ_TW_WAIT_FLUSH */
	__u32 reserved0;
	__u64 reserved[2];
};

/*
 * CLANQ_IOC_AP_FLUSH: "I stored [off, off + len) of this aperture
 * through its mapping": fire the tripwires armed there. Needs
 * CLANQ_RIGHT_WRITE.
 */
struct clanq_ioc_ap_flush {
	__u32 ap;		/* in: an aperture of this context */
	__u32 flags;		/* in: must be zero */
	__u64 off;		/* in: into the aperture */
	__u64 len;		/* in */
	__u32 fired;		/* out: tripwires it fired */
	__u32 reserved0;
	__u64 reserved[2];
};

/*
 * CLANQ_IOC_EP_STATS: the contexts of this NIC and their endpoints with
 * their counters, for clanqstat(8): those opened by the caller's
 * effective uid, or every one with CAP_SYS_ADMIN. One record per
 * context (ep 0), followed by one per endpoint of it. The walk is not a
 * snapshot: between two calls contexts and endpoints come and go, so
 * paging with skip may miss a record or show one twice, never a torn one.
 * The counters are the driver's own, not the segment's mirrors.
 */
struct clanq_ep_stat {
	__u64 ctx_id;		/* the context's, unique on this NIC until unload */
	__u64 ctx_entries;	/* its driver entries (ioctl, mmap, poll) */
	__s32 pid;		/* its opener, in the caller's pid namespace; 0: not visible */
	__u32 uid;		/* its opener's effective uid, in the caller's namespace */
	__u32 ep;		/* 0: the context's own record; else the endpoint's id */
	__u32 nr_eps;		/* context record: its endpoints; endpoint: 0 */
	__u32 oob_slots;	/* endpoint: its OOB queue's length */
	__u32 oob_queued;	/* endpoint: messages on it, unread */
	char comm[16];		/* the opener's name at open(), NUL-terminated */
	struct clanq_ep_counters c;	/* endpoint: its counters; context: zero */
	__u64 reserved[2];
};

#define CLANQ_EP_STATS_MAX	1024	/* records one call may return */

struct clanq_ioc_ep_stats {
	__u64 buf;		/* in: user address of count struct clanq_ep_stat */
	__u32 count;		/* in: room in buf, 1..CLANQ_EP_STATS_MAX; out: written */
	__u32 skip;		/* in: visible records to pass over first */
	__u32 total;		/* out: visible records in all, now */
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

/*
 * The verbs wire: this NIC's traffic to nodes on other hosts rides the
 * kernel's RDMA core (an RDMA NIC, or rdma_rxe / siw on any Ethernet).
 * Binding a NIC and naming its peers change what every user of the NIC
 * reaches, so they need CAP_NET_ADMIN; listing the peers does not.
 * clanqctl(8) is the tool.
 *
 * CLANQ_IOC_WIRE_BIND: traffic to other hosts leaves through RDMA device
 * @dev (its name, as `rdma link` shows it), port @port. An empty @dev
 * unbinds, which closes every connection of the NIC.
 */
#define CLANQ_WIRE_DEV_MAX	64

struct clanq_ioc_wire_bind {
	char dev[CLANQ_WIRE_DEV_MAX];	/* in: NUL-terminated; "" unbinds */
	__u32 port;		/* in: the device's port, from 1 */
	__u32 flags;		/* in: must be zero */
	__u64 reserved[2];
};

/*
 * CLANQ_IOC_PEER_ADD, CLANQ_IOC_PEER_DEL: node @node is reached at the
 * IPv4 address @ipv4, TCP/UDP port @port (where its clanq listens). A
 * node may be added once, and never one of this host's. Deleting a peer
 * closes its connection; what was in flight completes with an error.
 */
struct clanq_ioc_peer {
	__u32 node;
	__u32 ipv4;		/* network byte order */
	__u32 port;		/* 0: the module's verbs_port; else 1..65535 */
	__u32 flags;		/* must be zero */
	__u64 reserved[2];
};

/* A peer's connection: made on first use, made again after a failure. */
#define CLANQ_PEER_IDLE		0	/* none yet */
#define CLANQ_PEER_CONNECTING	1
#define CLANQ_PEER_UP		2
#define CLANQ_PEER_DOWN		3	/* failed or closed; made on next use */

struct clanq_peer_stat {
	__u32 node;
	__u32 ipv4;		/* network byte order */
	__u32 port;
	__u32 state;		/* CLANQ_PEER_* */
	__s32 last_error;	/* -errno of the last failure; 0: none */
	__u32 connects;		/* connections established to it */
	__u64 oob_sent;		/* messages that left for it */
	__u64 oob_received;	/* messages that came from it */
	__u64 send_errors;	/* sends that completed with an error */
	__u64 reserved[2];
};

/* CLANQ_IOC_PEER_LIST: any user; the peers of this NIC, in node order. */
struct clanq_ioc_peer_list {
	__u64 buf;		/* in: user address of count struct clanq_peer_stat */
	__u32 count;		/* in: room in buf, 1..CLANQ_PEERS_MAX; out: written */
	__u32 total;		/* out: peers in all */
	__u32 flags;		/* in: must be zero */
	__u32 reserved0;
	__u64 reserved[2];
};

#define CLANQ_PEERS_MAX		1024	/* peers of one NIC */

/*
 * CLANQ_IOC_LAST_ERROR: why this context's last refused call was refused,
 * in words: the command, what was wrong, and for a limit its name and
 * the numbers ("EP_CREATE: context has 64 endpoints already: max_eps").
 * Every refusal that returns -errno for a reason the driver can name is
 * noted (the kernel log says it too, at debug level, or notice level for
 * a limit). The note is the context's, not the thread's: with threads
 * sharing a context, ask right after the refusal. Any context may ask;
 * asking clears nothing.
 */
#define CLANQ_ERR_MAX		160	/* bytes of msg, its NUL included */

struct clanq_ioc_last_error {
	__u64 seq;		/* out: refusals noted so far; 0: none, msg "" */
	__s32 err;		/* out: the last one's -errno (0: none) */
	__u32 flags;		/* in: must be zero */
	char msg[CLANQ_ERR_MAX];	/* out: NUL-terminated */
	__u64 reserved[2];	/* in: must be zero */
};

#define CLANQ_IOC_MAGIC		0xC1
#define CLANQ_IOC_QUERY		_IOWR(CLANQ_IOC_MAGIC, 0x00, struct clanq_ioc_query)
#define CLANQ_IOC_EP_CREATE	_IOWR(CLANQ_IOC_MAGIC, 0x01, struct clanq_ioc_ep_create)
#define CLANQ_IOC_EP_DESTROY	_IOWR(CLANQ_IOC_MAGIC, 0x02, struct clanq_ioc_ep_destroy)
#define CLANQ_IOC_OOB_SEND	_IOWR(CLANQ_IOC_MAGIC, 0x03, struct clanq_ioc_oob_send)
#define CLANQ_IOC_EVQ_CREATE	_IOWR(CLANQ_IOC_MAGIC, 0x04, struct clanq_ioc_evq_create)
#define CLANQ_IOC_REGION_CREATE	_IOWR(CLANQ_IOC_MAGIC, 0x05, struct clanq_ioc_region_create)
#define CLANQ_IOC_REGION_FREE	_IOWR(CLANQ_IOC_MAGIC, 0x06, struct clanq_ioc_region_free)
#define CLANQ_IOC_REGION_EXPORT	_IOWR(CLANQ_IOC_MAGIC, 0x07, struct clanq_ioc_region_export)
#define CLANQ_IOC_AP_IMPORT	_IOWR(CLANQ_IOC_MAGIC, 0x08, struct clanq_ioc_ap_import)
#define CLANQ_IOC_AP_CLOSE	_IOWR(CLANQ_IOC_MAGIC, 0x09, struct clanq_ioc_ap_close)
#define CLANQ_IOC_RDMA_KICK	_IOWR(CLANQ_IOC_MAGIC, 0x0a, struct clanq_ioc_rdma_kick)
#define CLANQ_IOC_TW_CREATE	_IOWR(CLANQ_IOC_MAGIC, 0x0b, struct clanq_ioc_tw_create)
#define CLANQ_IOC_TW_ARM	_IOWR(CLANQ_IOC_MAGIC, 0x0c, struct clanq_ioc_tw_ctl)
#define CLANQ_IOC_TW_DISARM	_IOWR(CLANQ_IOC_MAGIC, 0x0d, struct clanq_ioc_tw_ctl)
#define CLANQ_IOC_TW_DESTROY	_IOWR(CLANQ_IOC_MAGIC, 0x0e, struct clanq_ioc_tw_ctl)
#define CLANQ_IOC_TW_WAIT	_IOWR(CLANQ_IOC_MAGIC, 0x0f, struct clanq_ioc_tw_wait)
#define CLANQ_IOC_AP_FLUSH	_IOWR(CLANQ_IOC_MAGIC, 0x13, struct clanq_ioc_ap_flush)
#define CLANQ_IOC_EP_STATS	_IOWR(CLANQ_IOC_MAGIC, 0x14, struct clanq_ioc_ep_stats)
#define CLANQ_IOC_WIRE_BIND	_IOWR(CLANQ_IOC_MAGIC, 0x15, struct clanq_ioc_wire_bind)
#define CLANQ_IOC_PEER_ADD	_IOWR(CLANQ_IOC_MAGIC, 0x16, struct clanq_ioc_peer)
#define CLANQ_IOC_PEER_DEL	_IOWR(CLANQ_IOC_MAGIC, 0x17, struct clanq_ioc_peer)
#define CLANQ_IOC_PEER_LIST	_IOWR(CLANQ_IOC_MAGIC, 0x18, struct clanq_ioc_peer_list)
#define CLANQ_IOC_LAST_ERROR	_IOWR(CLANQ_IOC_MAGIC, 0x19, struct clanq_ioc_last_error)
/* on the evq fd */
#define CLANQ_IOC_EVQ_REGISTER	_IOWR(CLANQ_IOC_MAGIC, 0x10, struct clanq_ioc_evq_reg)
#define CLANQ_IOC_EVQ_UNREGISTER _IOWR(CLANQ_IOC_MAGIC, 0x11, struct clanq_ioc_evq_reg)
#define CLANQ_IOC_EVQ_WAIT	_IOWR(CLANQ_IOC_MAGIC, 0x12, struct clanq_ioc_evq_wait)

#endif /* _UAPI_CLANQ_H */
