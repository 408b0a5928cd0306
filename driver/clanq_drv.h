/* SPDX-License-Identifier: GPL-2.0 */
/*
 * clanq driver internals: the objects every resource file shares.
 *
 * Names. Three layers, three vocabularies, so that every name has one
 * definition: the ABI's ioctl arguments are struct clanq_ioc_<cmd>; the
 * library's handles and calls are clanq_<obj>[_<verb>]; the driver's
 * objects are struct clanq_k<obj> with calls clanq_k<obj>_<verb> where
 * the library has an object of that name (as the kernel's kiocb twins
 * the ABI's iocb), and the handler of CLANQ_IOC_<CMD> is
 * clanq_ioctl_<cmd>. The receive path every wire shares is clanq_rx_*.
 *
 * Lifetimes (references, not hopes)
 *	clanq_nic   module load to unload. misc_deregister() runs before it
 *		    is freed, and an open file pins the module, so no context
 *		    outlives its NIC.
 *	clanq_ctx   one open() of /dev/clanqN, refcounted: the file holds one
 *		    reference and every evq file another, so the objects of a
 *		    context die when the last of its files is closed (which is
 *		    also what a killed process does). Listed on its NIC's
 *		    contexts from creation until its release begins.
 *	clanq_kep   owned by its context; found by peers through the NIC's
 *		    xarray under RCU, then pinned with a reference. Destroying
 *		    it removes it from the xarray first, so no new delivery
 *		    finds it; in-flight ones hold their reference.
 *	clanq_shm   a vmalloc_user() segment; referenced by its object and by
 *		    every VMA that maps it, so a mapping never outlives the
 *		    memory.
 *	clanq_kregion owned by its context, found by id through the
 *		    NIC's xarray under RCU and pinned with a kref. Freeing it
 *		    revokes it (apertures see "revoked", PIO mappings are
 *		    zapped); its pages go with the last reference (apertures,
 *		    VMAs, a request in the engine).
 *	clanq_kap   owned by the importing context; holds a reference on its
 *		    region. VMAs and the engine hold references on it.
 *	clanq_ktw   a tripwire, owned by its context; holds references on
 *		    its endpoint and region, and dies with either (or by
 *		    TW_DESTROY). Fires find it in its region's tree of armed
 *		    tripwires, under the region's tw.lock; a TW_WAIT
 *		    sleeper holds a reference, and so does a walk that lets
 *		    go of tw.lock to resume at it.
 *
 * Locks, outermost first
 *	nic->ctx_lock (mutex)	a NIC's contexts (debugfs.c walks them)
 *	ctx->lock (mutex)	a context's lists and every registration
 *	  region->revoke_sem	(write) revoking a region, closing an aperture
 *	    region->tw.lock	armed tripwires (and the armed bitmap); a
 *				fire's bookkeeping, a bounded batch per hold
 *				(read revoke_sem held)
 *	      ep->tw.lock	fired bitmap, tripwire counters
 *	    ep->wq.lock, tw->wq.lock	the fire's wake-ups, once tw.lock
 *				is dropped
 *	  region->ap_lock	a region's importers; zaps (i_mmap_rwsem) under it
 *	  engine->serve (mutex)	one engine turn; endpoint detach waits on it
 *	    region->revoke_sem	(read) one delivered chunk
 *	    engine->lock	the active-queue list (spin_lock_irq: never
 *				taken from interrupts)
 *	    ep->wq.lock		evq registrations' wake callbacks run under it
 *	      evq->lock		producer side of an evq ring
 *	      ep->oob.lock	producer side of an OOB queue (never held
 *				while raising: deliveries drop it first)
 *	mmap_lock -> ctx->lock (mmap) and mmap_lock -> region->revoke_sem
 *	(read, faults): neither ctx->lock nor revoke_sem is held across
 *	anything that takes mmap_lock, so regions are pinned before
 *	ctx->lock. The OOB and evq spinlocks are taken irqsave: a wire may
 *	deliver from a completion handler in softirq (the verbs wire does).
 *	The tripwire locks need not be: every fire holds the region's
 *	revoke_sem, a sleeping lock, so none runs in interrupt context.
 */
#ifndef _CLANQ_DRV_H
#define _CLANQ_DRV_H

#include <linux/atomic.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/rwsem.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <kunit/visibility.h>
#include <clanq/queue.h>

#define CLANQ_MAX_NICS	16

struct clanq_wire_ops;
struct clanq_user;

/* Module parameters (main.c): the limits a context lives within. */
extern unsigned int clanq_max_oob_slots;
extern unsigned int clanq_max_eps;
extern unsigned int clanq_max_evq_regs;
extern unsigned int clanq_max_ep_regs;
extern unsigned long clanq_max_ctx_bytes;
extern unsigned long clanq_max_user_bytes;
extern unsigned int clanq_max_rdma_slots;
extern unsigned int clanq_max_regions;
extern unsigned int clanq_max_aps;
extern unsigned long clanq_max_region_bytes;
extern unsigned int clanq_rdma_max_xfer;
extern unsigned int clanq_rdma_window;
extern bool clanq_rdma_inline;
extern unsigned int clanq_rdma_poll_us;
extern unsigned int clanq_max_tripwires;
extern unsigned int clanq_max_oob_waiters;

#define CLANQ_DEFAULT_OOB_SLOTS		64
#define CLANQ_DEFAULT_RDMA_SLOTS	64
#define CLANQ_DEFAULT_TW_SLOTS		64
#define CLANQ_MAX_TW_SLOTS		BIT(20)

/* Counts an administrator reads in debugfs (nic.c). */
struct clanq_nic_stats {
	atomic64_t oob_sent;
	atomic64_t oob_delivered;
	atomic64_t oob_dropped;		/* receiver's queue full */
	atomic64_t oob_no_ep;		/* no such endpoint here */
	atomic64_t oob_unreachable;	/* notices sent back for those */
	atomic64_t events;		/* posted to evq rings */
	atomic64_t evq_overflows;	/* ring full: user cleared bits */
	atomic64_t evq_blocks;		/* WAIT calls that slept */
	atomic64_t entries;		/* ioctl/mmap/poll */
	atomic64_t rdma_reqs;		/* requests the engine took */
	atomic64_t rdma_bytes;		/* bytes it wrote */
	atomic64_t rdma_errors;		/* requests that completed with an error */
	atomic64_t rdma_kicks;	/* RDMA_KICK calls */
	atomic64_t rdma_turns;		/* queues served, one turn each */
	atomic64_t rdma_inline_turns;	/* of them, run by the doorbell's caller */
	atomic64_t rdma_splits;		/* turns that ended mid-request */
	atomic64_t rdma_fire_turns;	/* turns ended by the tripwires they fired */
	atomic64_t regions_revoked;	/* regions freed (their imports revoked) */
	atomic64_t tw_fires;		/* tripwires of this NIC's regions fired */
	atomic64_t tw_flushes;		/* AP_FLUSH calls made here */
	atomic64_t tw_spurious;		/* ... that fired nothing */
};

/*
 * The RDMA engine: one per NIC, beside the CPUs. It serves the contexts
 * with active request queues round-robin, and each context's active
 * queues round-robin, one turn at a time (rdma.c).
 */
struct clanq_engine {
	spinlock_t lock;		/* the lines, each clanq_kep_rdma.active */
	struct list_head active;	/* clanq_engine_ctx.node: contexts with work */
	wait_queue_head_t wq;		/* the engine thread sleeps here */
	struct mutex serve;		/* held for one turn */
	struct task_struct *task;	/* NULL for KUnit's NICs: stepped by hand */
};

/*
 * A context's line at its NIC's engine (rdma.c), under engine->lock:
 * listed on engine->active exactly while its queues line is not empty.
 */
struct clanq_engine_ctx {
	struct list_head node;		/* on engine->active */
	struct list_head queues;	/* clanq_kep_rdma.node: its queues in line */
};

/*
 * A node on another host, reached by the wire to other hosts (peer.c).
 * The entry is the NIC's; the connection and what it reports are the
 * wire's.
 */
struct clanq_kpeer {
	struct kref ref;
	struct rcu_head rcu;
	struct clanq_nic *nic;
	u32 node;
	__be32 ipv4;
	u32 port;		/* 0: the wire's own (clanq_wire_port()) */
	u32 state;		/* CLANQ_PEER_*, written by the wire */
	int last_error;		/* -errno of the last failure */
	atomic_t connects;
	atomic64_t oob_sent;
	atomic64_t oob_received;
	atomic64_t send_errors;
	void *conn;		/* the wire's, under its own lock */
};

/* A NIC's peers and the RDMA device its traffic to them leaves through. */
struct clanq_peers {
	struct mutex lock;	/* writers of xa and the binding; nests the wire's */
	struct xarray xa;	/* node -> clanq_kpeer */
	unsigned int nr;
	/*
	 * The binding: written under lock and bind_lock, read under either;
	 * the wire reads it under bind_lock alone, from the RDMA CM's
	 * handler, where taking lock would order it after the CM's mutexes
	 */
	spinlock_t bind_lock;
	char dev[CLANQ_WIRE_DEV_MAX];	/* "": unbound */
	u32 port;
	__be32 src_ipv4;	/* where traffic left from, once it did */
};

/* A soft NIC: one node of the clanq network, exposed as /dev/clanqN. */
struct clanq_nic {
	struct miscdevice misc;
	char name[16];
	unsigned int index;	/* N in /dev/clanqN */
	u32 node;		/* node id carried in every address */
	/* node-wide endpoint id -> clanq_kep; a shared service's group */
	struct xarray eps;
	u32 next_ep_id;		/* for xa_alloc_cyclic */
	struct xarray regions;	/* node-wide region id -> clanq_kregion */
	u32 next_region_id;
	struct clanq_engine engine;
	atomic_t nr_contexts;
	atomic64_t next_ctx_id;	/* clanq_ctx.id */
	/* its contexts, for debugfs (debugfs.c); taken before any ctx->lock */
	struct mutex ctx_lock;
	struct list_head contexts;	/* clanq_ctx.nic_node */
	struct clanq_nic_stats stats;
	struct clanq_peers peers;	/* on other hosts (peer.c) */
	struct dentry *debugfs;
};

/*
 * What a context's segments and allocated regions may add up to
 * (max_ctx_bytes), and, summed over the user's contexts, max_user_bytes
 * (account.c). Each piece of memory holds a reference and gives its bytes
 * back when it is freed, which may be after its object and even its
 * context are gone (it was still mapped): memory counts for as long as
 * it exists.
 */
struct clanq_budget {
	refcount_t ref;
	atomic_long_t bytes;
	struct clanq_user *user;	/* NULL: opened with CAP_IPC_LOCK */
};

/*
 * Pages a user's call makes the driver hold (segments, allocated regions):
 * charged to the caller's memory cgroup, zeroed, and failed with -ENOMEM
 * rather than by an OOM kill when the cgroup or the machine is full.
 */
#define CLANQ_GFP_USER_PAGES	(GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_RETRY_MAYFAIL)

/* A registered region's pins: the user's locked_vm, the mm's VmPin. */
struct clanq_pin {
	struct user_struct *user;	/* NULL: pinned with CAP_IPC_LOCK */
	struct mm_struct *mm;		/* grabbed */
	unsigned long pages;
};

/*
 * Something the application maps from its context fd: at page offset
 * key << CLANQ_MAP_SHIFT, so each object has a range of 2^CLANQ_MAP_SHIFT
 * pages (512 MiB) to itself and a revocation can zap exactly that range
 * of the context's address space. Keys have CLANQ_MAP_KEY_BITS bits, so
 * every offset fits the 32-bit page offset of a 32-bit process's mmap2.
 *
 * A key is not handed out again while any mapping of its old object
 * lives (the object may be gone, its mapping legitimately not): the
 * unpublished key stays in ctx->mmaps, retired, until the last VMA
 * closes, so no later object's revocation can zap a stale mapping.
 */
#define CLANQ_MAP_SHIFT		17
#define CLANQ_MAP_KEY_BITS	15

struct clanq_map {
	int (*mmap)(struct clanq_map *map, struct vm_area_struct *vma);
	struct clanq_ctx *ctx;	/* whose key it holds; NULL if none */
	u32 key;		/* in ctx->mmaps while published or retired */
	atomic_t vmas;		/* VMAs mapping it */
};

static inline u64 clanq_map_offset(const struct clanq_map *map)
{
	return (u64)map->key << (CLANQ_MAP_SHIFT + PAGE_SHIFT);
}

/* One open file of a NIC: the owner of every object it creates. */
struct clanq_ctx {
	struct kref ref;
	struct clanq_nic *nic;
	struct list_head nic_node;	/* on nic->contexts, under its ctx_lock */
	pid_t tgid;		/* creator, for messages only */
	u64 id;			/* unique on its NIC, for CLANQ_IOC_EP_STATS */
	kuid_t uid;		/* the opener's euid: whose EP_STATS show it */
	/* the opener, for debugfs: its thread group and name */
	struct pid *pid;
	char comm[TASK_COMM_LEN];
	struct mutex lock;	/* its lists and counts, every registration */
	struct list_head eps;	/* clanq_kep.ctx_node */
	unsigned int nr_eps;
	struct clanq_budget *budget;
	struct xarray mmaps;	/* mmap key -> clanq_map */
	u32 next_mmap_key;
	/* the address space of its mappings, where revocation zaps */
	struct inode *inode;
	struct list_head regions;	/* clanq_kregion.ctx_node */
	unsigned int nr_regions;
	struct xarray aps;	/* aperture id -> clanq_kap */
	u32 next_ap_id;
	unsigned int nr_aps;
	struct xarray tws;	/* tripwire id -> clanq_ktw, under lock */
	u32 next_tw_id;
	unsigned int nr_tws;
	atomic_t nr_evqs;	/* evqs holding a reference, for debugfs */
	atomic64_t entries;	/* driver entries, for CLANQ_IOC_QUERY */
	/* the last refusal in words, for CLANQ_IOC_LAST_ERROR (context.c) */
	spinlock_t err_lock;
	u64 err_seq;
	int err;
	char err_msg[CLANQ_ERR_MAX];
	struct clanq_engine_ctx engine;	/* its line at the engine (rdma.c) */
};

/* A shared segment: memory both the driver and one application see. */
struct clanq_shm {
	refcount_t ref;
	void *vaddr;		/* vmap() of pages; one page: its direct map */
	struct page **pages;
	unsigned long nr_pages;
	size_t size;		/* page multiple */
	struct clanq_budget *budget;	/* charged with size */
	struct clanq_map map;
	bool vmapped;		/* vaddr is vmap()'s: vunmap() it */
};

/*
 * One hold of a region's tw.lock by a firing walk (tripwire.c): at most
 * this many tripwires visited (microseconds natively, well under a
 * millisecond in the emulator), and at most this many with sleepers to
 * wake once it is dropped. Endpoints are collected over the whole walk,
 * a few at a time.
 */
#define CLANQ_TW_VISITS_PER_HOLD	64
#define CLANQ_TW_WAKES_PER_HOLD		8
#define CLANQ_TW_EPS_PER_WALK		16

/*
 * A region's tripwires (tripwire.c). The armed ones are in an interval
 * tree, so a write finds those it touches in O(log n + hits); nr_armed
 * is the one load a write pays when none is armed.
 */
struct clanq_kregion_tw {
	spinlock_t lock;		/* armed, nr_armed, the armed bitmap */
	/* clanq_ktw.rb: the armed ones, and disarmed ones a walk resumes at */
	struct rb_root_cached armed;
	unsigned int nr_armed;		/* read unlocked by writers */
	struct list_head all;		/* clanq_ktw.region_node, ctx->lock */
	/* exported: one bit per 64 bytes, mapped read-only by importers */
	struct clanq_shm *bitmap;
	/* under lock: the most tripwires one hold visited, the longest hold */
	unsigned int most_visits;
	u64 longest_hold_ns;
};

/*
 * Memory the RDMA engine reads from and writes to: driver pages
 * (allocated) or the owner's pinned pages (registered). Byte 0 is at
 * offset first of pages[0].
 */
struct clanq_kregion {
	struct kref ref;	/* the struct */
	refcount_t mem_ref;	/* the memory: owner, its VMAs, engine as source */
	struct rcu_head rcu;
	struct clanq_nic *nic;
	struct clanq_ctx *ctx;	/* owner; compared, never followed */
	struct list_head ctx_node;
	u32 id;			/* node-wide */
	u64 len;
	u32 first;
	unsigned long nr_pages;	/* filled entries of pages */
	struct page **pages;
	bool registered;	/* pinned user memory, not driver pages */
	struct clanq_pin pin;	/* registered: the pins' charges */
	unsigned long charged;	/* allocated: pages charged to budget */
	struct clanq_budget *budget;	/* allocated: charged nr_pages */
	struct clanq_map map;	/* allocated: the owner's mapping */
	bool exported;		/* key and rights are set (release/acquire) */
	u64 key;
	u32 rights;
	struct rw_semaphore revoke_sem;	/* write: revoke; read: use */
	bool revoked;
	/*
	 * An import of a region on another host (clanq_kregion_remote_init()):
	 * no pages here, key and rights as the exporter granted them; nic is
	 * the importer's, the region is remote_node's. The wire that made it
	 * frees it (remote_release) when the last aperture lets go.
	 */
	bool remote;
	u32 remote_node;
	void (*remote_release)(struct clanq_kregion *r);
	/* remote: why atomics cannot go through it (naming the device), or NULL */
	const char *no_atomics;
	struct mutex ap_lock;	/* aps, and the zaps run over it */
	struct list_head aps;	/* clanq_kap.region_node: importers */
	unsigned int nr_aps;	/* on aps, under ap_lock */
	struct clanq_kregion_tw tw;
};

/* An imported window onto a region: [off, off + len), with rights. */
struct clanq_kap {
	struct kref ref;
	struct rcu_head rcu;
	struct clanq_ctx *ctx;	/* importer; valid until closed */
	u32 id;			/* in ctx->aps */
	struct clanq_kregion *region;	/* referenced */
	const struct clanq_wire_ops *wire;	/* that reaches the exporter */
	u64 off, len;
	u32 rights;
	bool atomic;		/* imported with CLANQ_AP_ATOMIC */
	bool closed;		/* under region->revoke_sem */
	struct list_head region_node;	/* under region->ap_lock */
	/* PIO mapping: map_pages pages from region page map_page0 */
	struct clanq_map map;
	unsigned long map_page0, map_pages;
	u32 map_delta;
	/* with a PIO mapping: the region's armed bitmap, read-only */
	struct clanq_map armed_map;
	unsigned long armed_pages;
	/* CLANQ_AP_SINK: where faults go once revoked (allocated then) */
	bool sink;
	struct page *sink_page;
	/* told of the revocation: an endpoint of ctx, 0 for none */
	u32 notify_ep;
	u64 notify_cookie;
	struct clanq_budget *budget;	/* charged with the struct */
};

/* A request the engine has taken: its private copy, resolved. */
struct clanq_rdma_xfer {
	struct clanq_rdma_req req;
	struct clanq_kregion *src;	/* referenced, and its memory held */
	struct clanq_kap *dst;		/* referenced */
	u64 done;			/* bytes given to the wire so far */
	u64 result;			/* CAS, FADD: the word's old value */
};

/*
 * Chunks of one queue a wire may hold at once (rdma.c, "The window"):
 * small writes, reads and atomics, enough to keep a link between hosts
 * busy, without making an endpoint's state large.
 */
#define CLANQ_RDMA_WINDOW	16

/* A chunk given to a wire, retired in the order it was given. */
struct clanq_rdma_chunk {
	/* its request, with references of its own (the request's for its last) */
	struct clanq_rdma_xfer x;
	u64 len;
	int status;		/* once landed */
	bool landed;
	bool final;		/* its request's last chunk: completes it */
};

/* An endpoint's OOB receive queue (oob.c). */
struct clanq_kep_oob {
	spinlock_t lock;	/* the queue's producers, and dead */
	struct clanq_queue q;	/* producer side; geometry private */
	bool dead;		/* destroyed: deliver nothing more */
	u64 sent, delivered, dropped;	/* mirrored in the counters */
};

/* An endpoint's side of the RDMA engine (rdma.c). */
struct clanq_kep_rdma {
	struct clanq_queue rq;	/* consumer side; geometry private */
	struct clanq_queue cq;	/* producer side; geometry private */
	u32 *need_wakeup;	/* in shm: the engine's sleep flag; written only */
	struct list_head node;	/* on ctx->engine.queues */
	/* the engine has it: listed or in a turn (for good once detached) */
	bool active;
	bool busy;		/* cur is being cut into chunks (engine->serve) */
	/* the window holds the next chunk back: off the line until one retires */
	bool parked;		/* engine->serve */
	bool detached;		/* engine->serve: the endpoint is gone */
	/* the window (engine->serve): chunks [retired, issued) are on wires */
	u32 issued, retired;
	u32 reqs_out;		/* requests taken, not yet completed */
	u64 out_bytes;		/* of the chunks out */
	/* the request at the window's head: bytes landed, its first error */
	u64 head_done;
	int head_status;
	u64 last_take_ns;	/* when a request was last taken (engine->serve) */
	/* the last inline turn: when it ended, how long it took (engine->serve) */
	u64 inline_end_ns, inline_ns;
	struct clanq_rdma_xfer cur;
	struct clanq_rdma_chunk window[CLANQ_RDMA_WINDOW];
	/* mirrored; written under engine->serve, read with READ_ONCE() */
	u64 reqs, bytes, errors;
	u64 kicks;			/* mirrored; under engine->lock */
};

/* An endpoint's tripwires (tripwire.c). */
struct clanq_kep_tw {
	spinlock_t lock;	/* fired bits and counters */
	unsigned long *fired;	/* in shm: set, never read */
	u32 slots;		/* bits in fired */
	struct ida bits;
	struct list_head all;	/* clanq_ktw.ep_node, under ctx->lock */
	u64 fires, flushes, spurious;	/* mirrored; under lock */
	u64 last_flush;		/* the AP_FLUSH it was counted for; lock */
	atomic_t oob_waiters;	/* TW_WAIT entries on wq (CLANQ_TW_WAIT_OOB) */
};

struct clanq_kep {
	struct clanq_ctx *ctx;	/* owner; valid while on ctx->eps */
	struct clanq_nic *nic;
	u32 id;
	refcount_t ref;
	struct rcu_head rcu;
	struct list_head ctx_node;
	struct clanq_shm *shm;
	struct clanq_ep_counters *counters;	/* in shm: written only */

	wait_queue_head_t wq;	/* evq registrations hang here */
	struct list_head regs;	/* clanq_kevq_reg.ep_node, under ctx->lock */
	u64 events;		/* posted to evqs; under wq.lock */

	struct clanq_kep_oob oob;
	struct clanq_kep_rdma rdma;
	struct clanq_kep_tw tw;
	struct clanq_kgroup *group;	/* a shared service's; group lock */
};

/*
 * A shared service (uapi.h, CLANQ_EP_SHARED): the endpoints serving one
 * service number, published in nic->eps at that number as a tagged
 * entry (clanq_eps_group()), so that a service is either one endpoint
 * or one group, never both. Members change under clanq_group_lock
 * (endpoint.c); deliveries read them under RCU: member[0 .. nr - 1],
 * nr published after the slot it covers.
 */
struct clanq_kgroup {
	struct rcu_head rcu;
	kuid_t uid;		/* every member's context's */
	u32 service;
	u32 seed;		/* of the member hash */
	u32 nr;
	struct clanq_kep *member[CLANQ_SHARED_MAX];
};

#define CLANQ_EPS_GROUP_TAG	1

/* The group an entry of nic->eps is, or NULL if it is an endpoint. */
static inline struct clanq_kgroup *clanq_eps_group(void *entry)
{
	if (xa_pointer_tag(entry) != CLANQ_EPS_GROUP_TAG)
		return NULL;
	return xa_untag_pointer(entry);
}

/*
 * A tripwire: region bytes [off, last] that fire their endpoint's bit
 * when a delivered write touches them while armed.
 */
struct clanq_ktw {
	struct kref ref;
	struct rcu_head rcu;
	struct clanq_budget *budget;	/* charged with the struct */
	struct clanq_ctx *ctx;	/* owner; compared, never followed */
	u32 id;			/* in ctx->tws */
	u32 bit;		/* in ep->tw.fired */
	struct clanq_kep *ep;	/* referenced */
	struct clanq_kregion *region;	/* referenced */
	u64 off, last;
	bool persistent;
	/* under region->tw.lock */
	struct rb_node rb;	/* in region->tw.armed while in_tree */
	u64 subtree_last;	/* the interval tree's */
	bool armed;
	bool in_tree;		/* armed, or disarmed while pinned */
	unsigned int pins;	/* walks that let go of the lock to resume here */
	int dead;		/* 0, or what TW_WAIT tells its sleepers */
	u64 fires;
	/* under ctx->lock */
	struct list_head ep_node, region_node;
	wait_queue_head_t wq;	/* TW_WAIT sleepers */
};

/*
 * Count @n into a private counter and mirror it into the segment, which
 * the driver writes and never reads back. The caller serialises the
 * counter's writers (the lock each counter's comment names); a reader
 * that only wants a recent value may READ_ONCE() it without that lock.
 */
static inline void clanq_count(u64 *count, __u64 *mirror, u64 n)
{
	WRITE_ONCE(*count, *count + n);
	WRITE_ONCE(*mirror, *count);
}

/* account.c: per-context, per-user and memlock accounting */
struct clanq_budget *clanq_budget_create(void);
struct clanq_budget *clanq_budget_charge(struct clanq_ctx *ctx, size_t bytes);
void clanq_budget_put(struct clanq_budget *budget, size_t bytes);
int clanq_pin_charge(struct clanq_ctx *ctx, struct clanq_pin *pin,
		     unsigned long nr);
void clanq_pin_uncharge(struct clanq_pin *pin);

/* shm.c */
struct clanq_shm *clanq_shm_alloc(struct clanq_ctx *ctx, size_t size);
void clanq_shm_put(struct clanq_shm *shm);
int clanq_shm_mmap(struct clanq_shm *shm, struct vm_area_struct *vma);
int clanq_vma_insert_pages(struct vm_area_struct *vma, struct page **pages,
			   unsigned long nr);

/* nic.c */
int clanq_nics_create(unsigned int nr, u32 node_base);
void clanq_nics_destroy(void);
unsigned int clanq_nr_nics(void);
struct clanq_nic *clanq_nic_from_misc(struct miscdevice *misc);
struct clanq_nic *clanq_nic_by_node(u32 node);
struct clanq_nic *clanq_nic_by_index(unsigned int index);

/* debugfs.c: clanq/clanqN/objects, every context's objects */
extern const struct file_operations clanq_objects_fops;

/* stats.c: sysfs and CLANQ_IOC_EP_STATS */
extern const struct attribute_group *clanq_nic_groups[];
void clanq_kep_read_counters(struct clanq_kep *ep, struct clanq_ep_counters *c,
			     u32 *oob_queued);
int clanq_ioctl_ep_stats(void *obj, void *arg);

/* context.c: contexts, their address space, the device's file operations */
extern const struct file_operations clanq_fops;
void clanq_ctx_get(struct clanq_ctx *ctx);
__printf(2, 3) void clanq_ctx_note(struct clanq_ctx *ctx, const char *fmt, ...);
void clanq_ctx_noted(struct clanq_ctx *ctx, int err);
int clanq_ioctl_last_error(void *obj, void *arg);
void clanq_ctx_put(struct clanq_ctx *ctx);
void clanq_ctx_count_entry(struct clanq_ctx *ctx);
int clanq_fs_init(void);
void clanq_fs_exit(void);

/* mapkey.c: the context's mmap keys, mmap() of the context fd */
int clanq_ctx_mmap_add(struct clanq_ctx *ctx, struct clanq_map *map);
void clanq_ctx_mmap_del(struct clanq_ctx *ctx, struct clanq_map *map);
void clanq_map_vma_open(struct clanq_map *map);
void clanq_map_vma_close(struct clanq_map *map);
void clanq_ctx_zap(struct clanq_ctx *ctx, const struct clanq_map *map,
		   unsigned long pages);
int clanq_ctx_mmap(struct clanq_ctx *ctx, struct vm_area_struct *vma);

/* ioctl.c: the dispatcher, and the context fd's commands */

/*
 * One command of a clanq file. The dispatcher copies the argument in,
 * refuses flag bits outside flags_ok and non-zero bytes from
 * reserved_off to the end of the struct (every clanq_ioc_* struct ends
 * with its reserved words), then calls fn, which sees only that copy.
 */
struct clanq_ioctl_desc {
	unsigned int cmd;
	const char *name;		/* "EP_CREATE": messages start with it */
	int (*fn)(void *obj, void *arg);
	u32 flags_ok;
	u16 flags_off;			/* of its __u32 flags, or ..._NONE */
	u16 reserved_off;
};

#define CLANQ_IOCTL_FLAGS_NONE	U16_MAX

/*
 * The dispatcher's copy of the argument, on its stack: the size of the
 * largest struct clanq_ioc_*, which every command checks it fits.
 */
union clanq_ioctl_arg {
	struct clanq_ioc_ep_create ep_create;
	struct clanq_ioc_last_error last_error;
};

/*
 * What the prologue relies on, checked as each command's entry is built:
 * its struct ends with its reserved words and fits union
 * clanq_ioctl_arg, and reserved words that start at reserved0 run on
 * into reserved.
 */
#define __CLANQ_IOCTL_CHECK(type)					\
	(BUILD_BUG_ON_ZERO(offsetofend(struct clanq_ioc_##type, reserved) !=	\
			   sizeof(struct clanq_ioc_##type)) +		\
	 BUILD_BUG_ON_ZERO(sizeof(struct clanq_ioc_##type) >		\
			   sizeof(union clanq_ioctl_arg)))
#define __CLANQ_IOCTL_RSV_reserved(type)	0
#define __CLANQ_IOCTL_RSV_reserved0(type)				\
	BUILD_BUG_ON_ZERO(offsetofend(struct clanq_ioc_##type, reserved0) !=	\
			  offsetof(struct clanq_ioc_##type, reserved))

#define __CLANQ_IOCTL(CMD, type, handler, ok, flags_at, rsv)		\
	[_IOC_NR(CLANQ_IOC_##CMD)] = {					\
		.cmd = CLANQ_IOC_##CMD, .name = #CMD, .fn = (handler),	\
		.flags_ok = (ok), .flags_off = (flags_at),		\
		.reserved_off = offsetof(struct clanq_ioc_##type, rsv) +	\
				__CLANQ_IOCTL_CHECK(type) +		\
				__CLANQ_IOCTL_RSV_##rsv(type),		\
	}
/*
 * A file's table of commands is the one list of them: each entry is
 * CLANQ_IOC_<CMD> on struct clanq_ioc_<type>, reserved from field rsv
 * ("reserved", or "reserved0" one word earlier) on.
 */
#define CLANQ_IOCTL(CMD, type, handler, ok, rsv)			\
	__CLANQ_IOCTL(CMD, type, handler, ok,				\
		      offsetof(struct clanq_ioc_##type, flags), rsv)
#define CLANQ_IOCTL_NO_FLAGS(CMD, type, handler, rsv)			\
	__CLANQ_IOCTL(CMD, type, handler, 0, CLANQ_IOCTL_FLAGS_NONE, rsv)

long clanq_ioctl_dispatch(const struct clanq_ioctl_desc *table, size_t n,
			  void *obj, struct clanq_ctx *ctx, unsigned int cmd,
			  unsigned long uarg);
long clanq_ctx_ioctl(struct clanq_ctx *ctx, unsigned int cmd, unsigned long uarg);

/* endpoint.c */
void clanq_kep_destroy(struct clanq_kep *ep);
struct clanq_kep *clanq_kep_lookup(struct clanq_nic *nic, u32 id);
struct clanq_kep *clanq_kep_lookup_owned(struct clanq_ctx *ctx, u32 id);
struct clanq_kep *clanq_kep_lookup_dst(struct clanq_nic *nic, u32 id,
				       const struct clanq_oob_msg *msg);
void clanq_kep_get(struct clanq_kep *ep);
void clanq_kep_put(struct clanq_kep *ep);
void clanq_kep_raise(struct clanq_kep *ep, u32 events);
u32 clanq_kep_pending(struct clanq_kep *ep, u32 events);
int clanq_ioctl_ep_create(void *obj, void *arg);
int clanq_ioctl_ep_destroy(void *obj, void *arg);

/* oob.c: the OOB queue, its send system call */
void clanq_oob_init(struct clanq_kep *ep);
void clanq_oob_kill(struct clanq_kep *ep);
bool clanq_oob_pending(struct clanq_kep *ep);
int clanq_ioctl_oob_send(void *obj, void *arg);

/* region.c: regions, their owner's mapping */
struct clanq_kregion *clanq_kregion_lookup(struct clanq_nic *nic, u32 id);
struct clanq_kregion *clanq_kregion_lookup_owned(struct clanq_ctx *ctx, u32 id);
void clanq_kregion_get(struct clanq_kregion *r);
bool clanq_kregion_tryget(struct clanq_kregion *r);
void clanq_kregion_put(struct clanq_kregion *r);
void clanq_kregion_free(struct clanq_kregion *r);
bool clanq_kregion_mem_get(struct clanq_kregion *r);
void clanq_kregion_mem_put(struct clanq_kregion *r);
int clanq_ioctl_region_create(void *obj, void *arg);
int clanq_ioctl_region_free(void *obj, void *arg);
int clanq_ioctl_region_export(void *obj, void *arg);
void clanq_kregion_remote_init(struct clanq_kregion *r, struct clanq_nic *nic,
			       u32 node, u32 id, u64 len, u64 key, u32 rights,
			       void (*release)(struct clanq_kregion *r));

/* aperture.c: imports, PIO mappings, revocation */
struct clanq_kap *clanq_kap_lookup(struct clanq_ctx *ctx, u32 id);
void clanq_kap_put(struct clanq_kap *ap);
void clanq_kap_close(struct clanq_kap *ap);
void clanq_kap_revoke_all(struct clanq_kregion *r);
int clanq_ioctl_ap_import(void *obj, void *arg);
int clanq_ioctl_ap_close(void *obj, void *arg);

/* tripwire.c: tripwires, their firing, the armed bitmap */
void clanq_kep_tw_init(struct clanq_kep *ep, u32 slots, u32 fired_off);
void clanq_kep_tw_kill(struct clanq_kep *ep);
void clanq_kregion_tw_init(struct clanq_kregion *r);
unsigned long clanq_kregion_tw_pages(const struct clanq_kregion *r);
int clanq_kregion_tw_export(struct clanq_ctx *ctx, struct clanq_kregion *r);
void clanq_kregion_tw_kill(struct clanq_kregion *r);
unsigned int clanq_tw_fire(struct clanq_kregion *r, u64 off, u64 len);
int clanq_ioctl_tw_create(void *obj, void *arg);
int clanq_ioctl_tw_arm(void *obj, void *arg);
int clanq_ioctl_tw_disarm(void *obj, void *arg);
int clanq_ioctl_tw_destroy(void *obj, void *arg);
int clanq_ioctl_tw_wait(void *obj, void *arg);
int clanq_tw_arm_vec(struct clanq_ctx *ctx, const struct clanq_evq_arm *v,
		     u32 n, struct clanq_ktw **tws);
int clanq_ioctl_ap_flush(void *obj, void *arg);

/* rdma.c: request queues, completions, the engine */
void clanq_rdma_init(struct clanq_kep *ep, const struct clanq_queue_off *rq,
		     const struct clanq_queue_off *cq, u32 need_wakeup);
bool clanq_rdma_pending(struct clanq_kep *ep);
int clanq_ioctl_rdma_kick(void *obj, void *arg);
void clanq_engine_init(struct clanq_engine *eng);
void clanq_engine_ctx_init(struct clanq_engine_ctx *ec);
int clanq_engine_start(struct clanq_nic *nic);
void clanq_engine_stop(struct clanq_nic *nic);
void clanq_engine_write_done(struct clanq_kep *ep, u32 chunk, int status);
bool clanq_engine_write_done_now(struct clanq_kep *ep, u32 chunk, int status);
void clanq_engine_detach_ep(struct clanq_kep *ep);

/* evq.c */
struct clanq_kevq;
int clanq_kevq_register_ep(struct clanq_kevq *evq, u32 ep_id, u32 events,
			   u64 cookie);
void clanq_kevq_detach_ep(struct clanq_kep *ep);
int clanq_ioctl_evq_create(void *obj, void *arg);

/*
 * wire.c, wire_loop.c: how bytes travel between NICs.
 *
 * The send side is per wire, a struct clanq_wire_ops, chosen by the
 * destination node (clanq_wire_route()). The receive path, clanq_rx_*,
 * is shared by every wire: whatever carried a message or a write, it
 * ends there, and so do the checks that come with it (tripwires, events).
 */
struct clanq_wire_write {
	struct clanq_kep *ep;		/* the requester */
	struct clanq_kap *dst;		/* the aperture written through */
	u64 dst_off;			/* into its window */
	/* the local region (READ: where the bytes land); its memory held */
	struct clanq_kregion *src;
	u64 src_off;
	u64 len;
	/* rdma_atomic: CLANQ_RDMA_OP_CAS or _FADD, the request's operands */
	u32 op;
	u64 operand[2];
	/* rdma_atomic: the old value goes here (the engine's, until done) */
	u64 *result;
	/* the chunk's name in its queue's window, for clanq_engine_write_done() */
	u32 chunk;
	/*
	 * A wire that fires the destination's tripwires before it returns
	 * (a local one) adds how many here: the engine bounds a turn by
	 * them as by bytes. NULL when nobody counts; the engine's, valid
	 * only during the call (a wire that completes later has no use for it).
	 */
	unsigned int *fired;
};

struct clanq_wire_ops {
	const char *name;
	struct module *owner;	/* held while a caller uses the wire */
	/* does this wire reach @node from @src? (asked in registration order) */
	bool (*reaches)(struct clanq_nic *src, u32 node);
	/* carry @msg, source already stamped: 0 once it left, or -errno */
	int (*send_oob)(struct clanq_nic *src, const struct clanq_addr *dst,
			const struct clanq_oob_msg *msg);
	/*
	 * The exported region behind an import, referenced, or an ERR_PTR.
	 * A local wire returns the region itself, which the caller checks
	 * against @key; a remote one has the exporter check it and returns
	 * a remote region (clanq_kregion_remote_init()) in its place.
	 */
	struct clanq_kregion *(*import)(struct clanq_nic *src,
					const struct clanq_addr *region,
					u64 key);
	/*
	 * One chunk of an RDMA write, at most rdma_max_xfer bytes, in the
	 * engine's thread: 0 once written, or -errno (-ENXIO: revoked).
	 * A wire whose writes complete later (a remote one, on its send
	 * completion) returns -EINPROGRESS instead, holding a reference on
	 * w->ep, and calls clanq_engine_write_done(w->ep, w->chunk,
	 * status) once, from process context, when it knows, in any order.
	 * Meanwhile the engine may give it the queue's next chunks to the
	 * same aperture (rdma.c, "The window"): a wire that takes them must
	 * land them in the order it took them, as an RC QP does. The engine
	 * keeps each chunk's regions (the source's memory too) until it is
	 * done, even if the endpoint goes.
	 */
	int (*rdma_write)(struct clanq_nic *src, const struct clanq_wire_write *w);
	/*
	 * One chunk of an RDMA read, aperture -> w->src, and one atomic
	 * (8 bytes at w->dst_off, old value into *w->result): as
	 * rdma_write, -EINPROGRESS included. NULL: the wire cannot, and
	 * the request completes -EOPNOTSUPP.
	 */
	int (*rdma_read)(struct clanq_nic *src, const struct clanq_wire_write *w);
	int (*rdma_atomic)(struct clanq_nic *src, const struct clanq_wire_write *w);

	/*
	 * A wire to other hosts also has these (at most one registered
	 * wire does): it carries the traffic of the NIC's peer table
	 * (peer.c) and is told when that or the NIC's binding changes
	 * (bind, peer_gone: called with nic->peers.lock held) or an
	 * exported region goes (region_gone: with its owner's ctx->lock
	 * held).
	 */
	/* the port a peer added with port 0 is reached at */
	u32 port;
	/* may @nic's traffic leave through @dev, @port? ("": unbind) */
	int (*bind)(struct clanq_nic *nic, const char *dev, u32 port,
		    const char **why);
	/* @peer leaves the table: close its connection, fail what is in flight */
	void (*peer_gone)(struct clanq_nic *nic, struct clanq_kpeer *peer);
	/*
	 * Exported region @r is being freed (clanq_kregion_free()): once this
	 * returns no peer may write into it, and its importers are told.
	 */
	void (*region_gone)(struct clanq_kregion *r);
	/* its attributes in every NIC's sysfs directory (or NULL) */
	const struct attribute_group *nic_attrs;
};

/* A wire beside the loop wire (registered by wire code, and by KUnit). */
struct clanq_wire {
	const struct clanq_wire_ops *ops;
	struct list_head node;
};

extern const struct clanq_wire_ops clanq_wire_loop;
const struct clanq_wire_ops *clanq_wire_route(struct clanq_nic *src, u32 node);
void clanq_wire_put(const struct clanq_wire_ops *ops);
int clanq_nic_bind(struct clanq_nic *nic, const char *dev, u32 port,
		   const char **why);
void clanq_wire_peer_gone(struct clanq_nic *nic, struct clanq_kpeer *peer);
void clanq_wire_region_gone(struct clanq_kregion *r);
u32 clanq_wire_port(void);
void clanq_wire_name_of(struct clanq_nic *nic, u32 node, char *buf, size_t len);
ssize_t clanq_wire_names_show(char *buf);
int clanq_wire_register(struct clanq_wire *wire);
void clanq_wire_unregister(struct clanq_wire *wire);

/* peer.c: the nodes on other hosts, and the binding */
void clanq_peers_init(struct clanq_nic *nic);
void clanq_peers_fini(struct clanq_nic *nic);
struct clanq_kpeer *clanq_kpeer_lookup(struct clanq_nic *nic, u32 node);
void clanq_kpeer_get(struct clanq_kpeer *peer);
void clanq_kpeer_put(struct clanq_kpeer *peer);
bool clanq_kpeer_known(struct clanq_nic *nic, u32 node);
void clanq_kpeer_set_state(struct clanq_kpeer *peer, u32 state, int err);
int clanq_peers_show(struct clanq_nic *nic, char *buf, int len);
int clanq_ioctl_wire_bind(void *obj, void *arg);
int clanq_ioctl_peer_add(void *obj, void *arg);
int clanq_ioctl_peer_del(void *obj, void *arg);
int clanq_ioctl_peer_list(void *obj, void *arg);

/* stats.c: sysfs, as a wire's attributes find their NIC */
struct clanq_nic *clanq_dev_nic(struct device *dev);

/* rx.c: the rx seam, the receive path every wire delivers into */
int clanq_rx_oob(struct clanq_nic *nic, u32 dst_id,
		 const struct clanq_oob_msg *msg);
void clanq_oob_unreachable(struct clanq_nic *nic, const struct clanq_addr *dst,
			   const struct clanq_oob_msg *msg);
void clanq_oob_notify_revoked(struct clanq_kap *ap);
int clanq_rx_write(struct clanq_kregion *dst, u64 dst_off,
		   struct clanq_kregion *src, u64 src_off, u64 len,
		   const struct clanq_kap *via, unsigned int *fired);
int clanq_rx_written(struct clanq_kregion *dst, u64 dst_off, u64 len);
int clanq_rx_read(struct clanq_kregion *src, u64 src_off,
		  struct clanq_kregion *dst, u64 dst_off, u64 len,
		  const struct clanq_kap *via);
int clanq_rx_atomic(struct clanq_kregion *dst, u64 dst_off, u32 op,
		    const u64 *operand, u64 *old, const struct clanq_kap *via,
		    unsigned int *fired);

/* The node a region lives on: its NIC's, or, imported, the exporter's. */
static inline u32 clanq_kregion_node(const struct clanq_kregion *r)
{
	return r->remote ? r->remote_node : r->nic->node;
}

/*
 * A refusal's log line, for the two below: __ctx is theirs. The line
 * says which device, which process and which call refused what.
 */
#define __clanq_ulog(log, fmt, ...)					\
	log("%s: pid %d: " fmt "\n", __ctx->nic->name, __ctx->tgid,	\
	    ##__VA_ARGS__)

/*
 * Anything user space can trigger is logged at debug level (dynamic
 * debug, as rxe and siw do), rate-limited even then, and noted for the
 * context (CLANQ_IOC_LAST_ERROR): clanq_uerr(ctx, fmt, args...).
 */
#define clanq_uerr(ctx, ...)						\
({									\
	struct clanq_ctx *__ctx = (ctx);				\
	clanq_ctx_note(__ctx, __VA_ARGS__);				\
	__clanq_ulog(pr_debug_ratelimited, __VA_ARGS__);		\
})

/*
 * A limit was reached: said at notice level (rate-limited), since the
 * administrator may want to raise it, and the message names it; noted
 * as clanq_uerr() notes.
 */
#define clanq_ulimit(ctx, ...)						\
({									\
	struct clanq_ctx *__ctx = (ctx);				\
	clanq_ctx_note(__ctx, __VA_ARGS__);				\
	__clanq_ulog(pr_notice_ratelimited, __VA_ARGS__);		\
})

/*
 * Driver internals the KUnit module (tests/kunit) calls are exported with
 * EXPORT_SYMBOL_IF_KUNIT() (<kunit/visibility.h>): into the namespace
 * EXPORTED_FOR_KUNIT_TESTING, and only when the kernel has KUnit. What a
 * wire in a module of its own (clanq_verbs.ko) calls is exported always:
 */
#define EXPORT_SYMBOL_CLANQ_WIRE(sym)	EXPORT_SYMBOL_NS_GPL(sym, CLANQ_WIRE)

/*
 * Called only from their own file and from the KUnit tests:
 * VISIBLE_IF_KUNIT, static when the kernel has no KUnit.
 */
#if IS_ENABLED(CONFIG_KUNIT)
/* nic.c */
int clanq_nic_init(struct clanq_nic *nic, unsigned int index, u32 node);
void clanq_nic_fini(struct clanq_nic *nic);
/* context.c */
struct clanq_ctx *clanq_ctx_create(struct clanq_nic *nic);
/* endpoint.c */
struct clanq_kep *clanq_kep_create(struct clanq_ctx *ctx, u32 oob_slots,
				   u32 rq_slots, u32 cq_slots, u32 tw_slots,
				   u32 service);
struct clanq_kep *clanq_kep_create_shared(struct clanq_ctx *ctx, u32 oob_slots,
					  u32 rq_slots, u32 cq_slots,
					  u32 tw_slots, u32 service);
u32 clanq_kgroup_pick(const struct clanq_kgroup *g, u32 nr,
		      const struct clanq_oob_msg *msg);
void clanq_kep_describe(struct clanq_kep *ep, struct clanq_ioc_ep_create *c);
/* rdma.c */
int clanq_rdma_validate(struct clanq_ctx *ctx, const struct clanq_rdma_req *req,
			struct clanq_rdma_xfer *x);
struct clanq_kep *clanq_engine_step(struct clanq_nic *nic);
int clanq_engine_kick(struct clanq_kep *ep);
/* evq.c */
struct clanq_kevq *clanq_kevq_create(struct clanq_ctx *ctx, u32 max_regs,
				     struct clanq_ioc_evq_create *c);
void clanq_kevq_destroy(struct clanq_kevq *evq);
int clanq_kevq_unregister_index(struct clanq_kevq *evq, u32 index);
/* for KUnit only: the shared segment, as the application would map it */
void *clanq_kevq_seg_for_kunit(struct clanq_kevq *evq);
/* peer.c */
int clanq_kpeer_add(struct clanq_nic *nic, const struct clanq_ioc_peer *p,
		    const char **why);
int clanq_kpeer_del(struct clanq_nic *nic, u32 node);
u32 clanq_kpeer_list(struct clanq_nic *nic, struct clanq_peer_stat *recs,
		     u32 count, u32 *total);
#endif

/* Reserved fields: every byte must be zero. */
static inline bool clanq_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

#endif /* _CLANQ_DRV_H */
