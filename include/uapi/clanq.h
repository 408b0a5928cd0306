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

/*
 * CLANQ_IOC_QUERY: what this device is. Any context may issue it; it is
 * how the library checks the ABI version before anything else.
 */
struct clanq_query {
	__u32 abi_version;	/* out: CLANQ_ABI_VERSION */
	__u32 node;		/* out: this NIC's node id */
	__u32 nr_nics;		/* out: soft NICs in this kernel */
	__u32 flags;		/* in: must be zero */
	__u64 reserved[4];	/* in: must be zero */
};

#define CLANQ_IOC_MAGIC		0xC1
#define CLANQ_IOC_QUERY		_IOWR(CLANQ_IOC_MAGIC, 0x00, struct clanq_query)

#endif /* _UAPI_CLANQ_H */
