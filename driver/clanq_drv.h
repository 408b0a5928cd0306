/* SPDX-License-Identifier: GPL-2.0 */
/*
 * clanq driver internals: the objects every resource file shares.
 *
 * Lifetimes (references, not hopes)
 *	clanq_nic   module load to unload. misc_deregister() runs before it
 *		    is freed, and an open file pins the module, so no context
 *		    outlives its NIC.
 *	clanq_ctx   one open() of /dev/clanqN, refcounted: the file holds one
 *		    reference and every evq file another, so the objects of a
 *		    context die when the last of its files is closed (which is
 *		    also what a killed process does).
 *	clanq_ep    owned by its context; found by peers through the NIC's
 *		    xarray under RCU, then pinned with a reference. Destroying
 *		    it removes it from the xarray first, so no new delivery
 *		    finds it; in-flight ones hold their reference.
 *	clanq_shm   a vmalloc_user() segment; referenced by its object and by
 *		    every VMA that maps it, so a mapping never outlives the
 *		    memory.
 *	clanq_region  owned by its context, found by id through the NIC's
 *		    xarray under RCU and pinned with a kref. Freeing it
 *		    revokes it (apertures see "revoked", PIO mappings are
 *		    zapped); its pages go with the last reference (apertures,
 *		    VMAs, a request in the engine).
 *	clanq_ap    owned by the importing context; holds a reference on its
 *		    region. VMAs and the engine hold references on it.
 *
 * Locks, outermost first
 *	ctx->lock (mutex)	a context's lists and every registration
 *	  region->revoke_sem	(write) revoking a region, closing an aperture
 *	  region->ap_lock	a region's importers; zaps (i_mmap_rwsem) under it
 *	  engine->serve (mutex)	one engine turn; endpoint detach waits on it
 *	    region->revoke_sem	(read) one delivered chunk
 *	    engine->lock	the active-queue list (spin_lock_irq: never
 *				taken from interrupts)
 *	    ep->wq.lock		evq registrations' wake callbacks run under it
 *	      evq->lock		producer side of an evq ring
 *	      ep->oob_lock	producer side of an OOB queue (never held
 *				while raising: deliveries drop it first)
 *	mmap_lock -> ctx->lock (mmap) and mmap_lock -> region->revoke_sem
 *	(read, faults): neither ctx->lock nor revoke_sem is held across
 *	anything that takes mmap_lock, so regions are pinned before
 *	ctx->lock. The OOB and evq spinlocks are taken irqsave: the tcp
 *	wire will deliver from softirq.
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
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <clanq/queue.h>

#define CLANQ_MAX_NICS	16

/* Module parameters (main.c): the limits a context lives within. */
extern unsigned int clanq_max_oob_slots;
extern unsigned int clanq_max_eps;
extern unsigned int clanq_max_evq_regs;
extern unsigned long clanq_max_ctx_bytes;
extern unsigned int clanq_max_rdma_slots;
extern unsigned int clanq_max_regions;
extern unsigned int clanq_max_aps;
extern unsigned long clanq_max_region_bytes;
extern unsigned int clanq_rdma_max_xfer;

#define CLANQ_DEFAULT_OOB_SLOTS		64
#define CLANQ_DEFAULT_RDMA_SLOTS	64

/* Counts an administrator reads in debugfs (nic.c). */
struct clanq_nic_stats {
	atomic64_t oob_sent;
	atomic64_t oob_delivered;
	atomic64_t oob_dropped;		/* receiver's queue full */
	atomic64_t oob_no_ep;		/* no such endpoint here */
	atomic64_t events;		/* posted to evq rings */
	atomic64_t evq_overflows;	/* ring full: user cleared bits */
	atomic64_t evq_blocks;		/* WAIT calls that slept */
	atomic64_t entries;		/* ioctl/mmap/poll */
	atomic64_t rdma_reqs;		/* requests the engine took */
	atomic64_t rdma_bytes;		/* bytes it wrote */
	atomic64_t rdma_errors;		/* requests that completed with an error */
	atomic64_t rdma_doorbells;	/* RDMA_KICK calls */
	atomic64_t rdma_turns;		/* queues served, one turn each */
	atomic64_t rdma_splits;		/* turns that ended mid-request */
	atomic64_t regions_revoked;	/* regions freed (their imports revoked) */
};

/*
 * The RDMA engine: one per NIC, beside the CPUs. It serves the active
 * request queues round-robin, one turn each (rdma.c).
 */
struct clanq_engine {
	spinlock_t lock;		/* active, and each clanq_ep_rdma.active */
	struct list_head active;	/* clanq_ep_rdma.node: queues with work */
	wait_queue_head_t wq;		/* the engine thread sleeps here */
	struct mutex serve;		/* held for one turn */
	struct task_struct *task;	/* NULL for KUnit's NICs: stepped by hand */
};

/* A soft NIC: one node of the clanq network, exposed as /dev/clanqN. */
struct clanq_nic {
	struct miscdevice misc;
	char name[16];
	unsigned int index;	/* N in /dev/clanqN */
	u32 node;		/* node id carried in every address */
	struct xarray eps;	/* node-wide endpoint id -> clanq_ep */
	u32 next_ep_id;		/* for xa_alloc_cyclic */
	struct xarray regions;	/* node-wide region id -> clanq_region */
	u32 next_region_id;
	struct clanq_engine engine;
	atomic_t nr_contexts;
	struct clanq_nic_stats stats;
	struct dentry *debugfs;
};

/*
 * What a context's segments may add up to (max_ctx_bytes). Each segment
 * holds a reference and gives its bytes back when it is freed, which may
 * be after its object and even its context are gone (it was still
 * mapped): memory counts for as long as it exists.
 */
struct clanq_budget {
	refcount_t ref;
	atomic_long_t bytes;
};

/*
 * Something the application maps from its context fd: at page offset
 * key << CLANQ_MAP_SHIFT, so each object has a range of 2^CLANQ_MAP_SHIFT
 * pages to itself and a revocation can zap exactly that range of the
 * context's address space.
 */
#define CLANQ_MAP_SHIFT		24

struct clanq_map {
	int (*mmap)(struct clanq_map *map, struct vm_area_struct *vma);
	u32 key;		/* in ctx->mmaps while published */
};

static inline u64 clanq_map_offset(const struct clanq_map *map)
{
	return (u64)map->key << (CLANQ_MAP_SHIFT + PAGE_SHIFT);
}

/* One open file of a NIC: the owner of every object it creates. */
struct clanq_ctx {
	struct kref ref;
	struct clanq_nic *nic;
	pid_t tgid;		/* creator, for messages only */
	struct mutex lock;
	struct list_head eps;	/* clanq_ep.ctx_node */
	unsigned int nr_eps;
	struct clanq_budget *budget;
	struct xarray mmaps;	/* mmap key -> clanq_map */
	u32 next_mmap_key;
	/* the address space of its mappings, where revocation zaps */
	struct inode *inode;
	struct list_head regions;	/* clanq_region.ctx_node */
	unsigned int nr_regions;
	struct xarray aps;	/* aperture id -> clanq_ap */
	u32 next_ap_id;
	unsigned int nr_aps;
	atomic64_t entries;	/* driver entries, for CLANQ_IOC_QUERY */
};

/* A shared segment: memory both the driver and one application see. */
struct clanq_shm {
	refcount_t ref;
	void *vaddr;
	size_t size;		/* page multiple */
	struct clanq_budget *budget;	/* charged with size */
	struct clanq_map map;
};

/*
 * Memory the RDMA engine reads from and writes to: driver pages
 * (allocated) or the owner's pinned pages (registered). Byte 0 is at
 * offset first of pages[0].
 */
struct clanq_region {
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
	struct mm_struct *mm;	/* registered: whose pinned_vm we charged */
	unsigned long charged;	/* pages charged there */
	struct clanq_budget *budget;	/* allocated: charged nr_pages */
	struct clanq_map map;	/* allocated: the owner's mapping */
	bool exported;		/* key and rights are set (release/acquire) */
	u64 key;
	u32 rights;
	struct rw_semaphore revoke_sem;	/* write: revoke; read: use */
	bool revoked;
	struct mutex ap_lock;	/* aps, and the zaps run over it */
	struct list_head aps;	/* clanq_ap.region_node: importers */
};

/* An imported window onto a region: [off, off + len), with rights. */
struct clanq_ap {
	struct kref ref;
	struct rcu_head rcu;
	struct clanq_ctx *ctx;	/* importer; valid until closed */
	u32 id;			/* in ctx->aps */
	struct clanq_region *region;	/* referenced */
	u64 off, len;
	u32 rights;
	bool closed;		/* under region->revoke_sem */
	struct list_head region_node;	/* under region->ap_lock */
	/* PIO mapping: map_pages pages from region page map_page0 */
	struct clanq_map map;
	unsigned long map_page0, map_pages;
	u32 map_delta;
};

/* A request the engine has taken: its private copy, resolved. */
struct clanq_rdma_xfer {
	struct clanq_rdma_req req;
	struct clanq_region *src;	/* referenced, and its memory held */
	struct clanq_ap *dst;		/* referenced */
	u64 done;			/* bytes written so far */
};

/* An endpoint's side of the RDMA engine. */
struct clanq_ep_rdma {
	struct clanq_queue rq;	/* consumer side; geometry private */
	struct clanq_queue cq;	/* producer side; geometry private */
	u32 *doorbell;		/* in shm: written, never read */
	struct list_head node;	/* on engine->active */
	/* the engine has it: listed or in a turn (for good once detached) */
	bool active;
	bool busy;		/* cur is in progress (engine->serve) */
	struct clanq_rdma_xfer cur;
	u64 reqs, bytes, errors, doorbells;
};

struct clanq_ep {
	struct clanq_ctx *ctx;	/* owner; valid while on ctx->eps */
	struct clanq_nic *nic;
	u32 id;
	refcount_t ref;
	struct rcu_head rcu;
	struct list_head ctx_node;
	struct clanq_shm *shm;
	struct clanq_ep_counters *counters;	/* in shm: written only */

	spinlock_t oob_lock;	/* producers of the OOB queue */
	struct clanq_queue oob;	/* producer side; geometry private */
	bool dead;		/* destroyed: deliver nothing more */
	u64 oob_sent, oob_delivered, oob_dropped;
	atomic64_t events;

	wait_queue_head_t wq;	/* evq registrations hang here */
	struct list_head regs;	/* clanq_reg.ep_node, under ctx->lock */

	struct clanq_ep_rdma rdma;
};

/* shm.c */
struct clanq_shm *clanq_shm_alloc(struct clanq_ctx *ctx, size_t size);
struct clanq_budget *clanq_budget_charge(struct clanq_ctx *ctx, size_t bytes);
void clanq_budget_put(struct clanq_budget *budget, size_t bytes);
void clanq_shm_put(struct clanq_shm *shm);
int clanq_shm_mmap(struct clanq_shm *shm, struct vm_area_struct *vma);

/* nic.c */
int clanq_nics_create(unsigned int nr, u32 node_base);
void clanq_nics_destroy(void);
unsigned int clanq_nr_nics(void);
struct clanq_nic *clanq_nic_from_misc(struct miscdevice *misc);
struct clanq_nic *clanq_nic_by_node(u32 node);
int clanq_nic_init(struct clanq_nic *nic, unsigned int index, u32 node);
void clanq_nic_fini(struct clanq_nic *nic);

/* context.c */
struct clanq_ctx *clanq_ctx_create(struct clanq_nic *nic);
void clanq_ctx_get(struct clanq_ctx *ctx);
void clanq_ctx_put(struct clanq_ctx *ctx);
int clanq_ctx_mmap(struct clanq_ctx *ctx, struct vm_area_struct *vma);
int clanq_ctx_mmap_add(struct clanq_ctx *ctx, struct clanq_map *map);
void clanq_ctx_mmap_del(struct clanq_ctx *ctx, struct clanq_map *map);
void clanq_ctx_zap(struct clanq_ctx *ctx, const struct clanq_map *map,
		   unsigned long pages);
int clanq_fs_init(void);
void clanq_fs_exit(void);

/* endpoint.c */
struct clanq_ep *clanq_ep_create(struct clanq_ctx *ctx, u32 oob_slots,
				 u32 rq_slots, u32 cq_slots);
void clanq_ep_describe(struct clanq_ep *ep, struct clanq_ep_create *c);
void clanq_ep_destroy(struct clanq_ep *ep);
struct clanq_ep *clanq_ep_lookup(struct clanq_nic *nic, u32 id);
struct clanq_ep *clanq_ep_lookup_owned(struct clanq_ctx *ctx, u32 id);
void clanq_ep_put(struct clanq_ep *ep);
void clanq_ep_raise(struct clanq_ep *ep, u32 events);
u32 clanq_ep_pending(struct clanq_ep *ep, u32 events);
int clanq_ioctl_ep_create(void *ctx, void *arg);
int clanq_ioctl_ep_destroy(void *ctx, void *arg);

/* oob.c: the send system call and the shared receive path */
int clanq_oob_deliver(struct clanq_nic *nic, u32 dst_id,
		      const struct clanq_oob_msg *msg);
int clanq_ioctl_oob_send(void *ctx, void *arg);

/* wire_loop.c: NICs of this kernel */
int clanq_wire_send_oob(struct clanq_nic *src, const struct clanq_addr *dst,
			const struct clanq_oob_msg *msg);
struct clanq_region *clanq_wire_import(struct clanq_nic *src,
				       const struct clanq_addr *region, int *err);
int clanq_wire_rdma_write(struct clanq_nic *src, struct clanq_ap *dst,
			  u64 dst_off, struct clanq_region *from, u64 from_off,
			  u64 len);

/* region.c: regions, their owner's mapping, the write receive path */
struct clanq_region *clanq_region_lookup(struct clanq_nic *nic, u32 id);
struct clanq_region *clanq_region_lookup_owned(struct clanq_ctx *ctx, u32 id);
void clanq_region_put(struct clanq_region *r);
void clanq_region_free(struct clanq_region *r);
bool clanq_region_mem_get(struct clanq_region *r);
void clanq_region_mem_put(struct clanq_region *r);
int clanq_region_deliver_write(struct clanq_region *dst, u64 dst_off,
			       struct clanq_region *src, u64 src_off, u64 len,
			       const struct clanq_ap *via);
int clanq_ioctl_region_create(void *ctx, void *arg);
int clanq_ioctl_region_free(void *ctx, void *arg);
int clanq_ioctl_region_export(void *ctx, void *arg);

/* aperture.c: imports, PIO mappings, revocation */
struct clanq_ap *clanq_ap_lookup(struct clanq_ctx *ctx, u32 id);
void clanq_ap_put(struct clanq_ap *ap);
void clanq_ap_close(struct clanq_ap *ap);
void clanq_region_revoke(struct clanq_region *r);
int clanq_ioctl_ap_import(void *ctx, void *arg);
int clanq_ioctl_ap_close(void *ctx, void *arg);

/* rdma.c: request queues, the engine, completions */
void clanq_rdma_ep_init(struct clanq_ep *ep, void *seg,
			const struct clanq_queue_off *rq,
			const struct clanq_queue_off *cq, u32 doorbell);
void clanq_rdma_detach_ep(struct clanq_ep *ep);
bool clanq_rdma_pending(struct clanq_ep *ep);
int clanq_rdma_validate(struct clanq_ctx *ctx, const struct clanq_rdma_req *req,
			struct clanq_rdma_xfer *x);
int clanq_rdma_kick(struct clanq_ep *ep);
struct clanq_ep *clanq_rdma_engine_step(struct clanq_nic *nic);
void clanq_engine_init(struct clanq_engine *eng);
int clanq_engine_start(struct clanq_nic *nic);
void clanq_engine_stop(struct clanq_nic *nic);
int clanq_ioctl_rdma_kick(void *ctx, void *arg);

/* evq.c */
struct clanq_evq;
struct clanq_evq *clanq_evq_create(struct clanq_ctx *ctx, u32 max_regs,
				   struct clanq_evq_create *c);
void clanq_evq_destroy(struct clanq_evq *evq);
void *clanq_evq_seg(struct clanq_evq *evq);
int clanq_evq_register_ep(struct clanq_evq *evq, u32 ep_id, u32 events,
			  u64 cookie);
int clanq_evq_unregister_index(struct clanq_evq *evq, u32 index);
int clanq_ioctl_evq_create(void *ctx, void *arg);
void clanq_evq_detach_ep(struct clanq_ep *ep);

/* main.c */
extern const struct file_operations clanq_fops;

/* An ioctl handler sees only its private copy of the argument. */
struct clanq_ioctl_desc {
	unsigned int cmd;
	int (*fn)(void *obj, void *arg);
};

long clanq_ioctl_dispatch(const struct clanq_ioctl_desc *table, size_t n,
			  void *obj, unsigned int cmd, unsigned long uarg);

/*
 * Anything user space can trigger is logged rate-limited, and says which
 * device and which call refused what.
 */
#define clanq_uerr(ctx, fmt, ...)					\
({									\
	const struct clanq_ctx *__ctx = (ctx);				\
	pr_notice_ratelimited("%s: pid %d: " fmt "\n",			\
			      __ctx->nic->name, __ctx->tgid, ##__VA_ARGS__);	\
})

/*
 * Driver internals the KUnit module (tests/kunit) calls: exported into a
 * namespace of their own, which only that module imports.
 */
#define EXPORT_SYMBOL_CLANQ_KUNIT(sym)	EXPORT_SYMBOL_NS_GPL(sym, CLANQ_KUNIT)

/* Reserved fields: every byte must be zero. */
static inline bool clanq_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

#endif /* _CLANQ_DRV_H */
