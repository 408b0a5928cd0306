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
 *
 * Locks, outermost first
 *	ctx->lock (mutex)	a context's lists and every registration
 *	ep->wq.lock		evq registrations' wake callbacks run under it
 *	  evq->lock		producer side of an evq ring
 *	  ep->oob_lock		producer side of an OOB queue (never held
 *				while raising: deliveries drop it first)
 *	All spinlocks are taken irqsave: the tcp wire delivers from softirq.
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

#define CLANQ_DEFAULT_OOB_SLOTS	64

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
};

/* A soft NIC: one node of the clanq network, exposed as /dev/clanqN. */
struct clanq_nic {
	struct miscdevice misc;
	char name[16];
	unsigned int index;	/* N in /dev/clanqN */
	u32 node;		/* node id carried in every address */
	struct xarray eps;	/* node-wide endpoint id -> clanq_ep */
	u32 next_ep_id;		/* for xa_alloc_cyclic */
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

/* One open file of a NIC: the owner of every object it creates. */
struct clanq_ctx {
	struct kref ref;
	struct clanq_nic *nic;
	pid_t tgid;		/* creator, for messages only */
	struct mutex lock;
	struct list_head eps;	/* clanq_ep.ctx_node */
	unsigned int nr_eps;
	struct clanq_budget *budget;
	struct xarray mmaps;	/* mmap key (pgoff) -> clanq_shm */
	atomic64_t entries;	/* driver entries, for CLANQ_IOC_QUERY */
};

/* A shared segment: memory both the driver and one application see. */
struct clanq_shm {
	refcount_t ref;
	void *vaddr;
	size_t size;		/* page multiple */
	struct clanq_budget *budget;	/* charged with size */
};

struct clanq_ep {
	struct clanq_ctx *ctx;	/* owner; valid while on ctx->eps */
	struct clanq_nic *nic;
	u32 id;
	refcount_t ref;
	struct rcu_head rcu;
	struct list_head ctx_node;
	struct clanq_shm *shm;
	u32 mmap_key;
	struct clanq_ep_counters *counters;	/* in shm: written only */

	spinlock_t oob_lock;	/* producers of the OOB queue */
	struct clanq_queue oob;	/* producer side; geometry private */
	bool dead;		/* destroyed: deliver nothing more */
	u64 oob_sent, oob_delivered, oob_dropped;
	atomic64_t events;

	wait_queue_head_t wq;	/* evq registrations hang here */
	struct list_head regs;	/* clanq_reg.ep_node, under ctx->lock */
};

/* shm.c */
struct clanq_shm *clanq_shm_alloc(struct clanq_ctx *ctx, size_t size);
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
int clanq_ctx_mmap_add(struct clanq_ctx *ctx, struct clanq_shm *shm, u32 *key);
void clanq_ctx_mmap_del(struct clanq_ctx *ctx, u32 key);

/* endpoint.c */
struct clanq_ep *clanq_ep_create(struct clanq_ctx *ctx, u32 oob_slots);
void clanq_ep_describe(struct clanq_ep *ep, struct clanq_ep_create *c);
void clanq_ep_destroy(struct clanq_ep *ep);
struct clanq_ep *clanq_ep_lookup(struct clanq_nic *nic, u32 id);
struct clanq_ep *clanq_ep_lookup_owned(struct clanq_ctx *ctx, u32 id);
void clanq_ep_put(struct clanq_ep *ep);
void clanq_ep_raise(struct clanq_ep *ep, u32 events);
bool clanq_ep_pending(struct clanq_ep *ep, u32 events);
int clanq_ioctl_ep_create(void *ctx, void *arg);
int clanq_ioctl_ep_destroy(void *ctx, void *arg);

/* oob.c: the send system call and the shared receive path */
int clanq_oob_deliver(struct clanq_nic *nic, u32 dst_id,
		      const struct clanq_oob_msg *msg);
int clanq_ioctl_oob_send(void *ctx, void *arg);

/* wire_loop.c: NICs of this kernel */
int clanq_wire_send_oob(struct clanq_nic *src, const struct clanq_addr *dst,
			const struct clanq_oob_msg *msg);

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
