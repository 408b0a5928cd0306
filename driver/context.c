// SPDX-License-Identifier: GPL-2.0
/*
 * Contexts: one per open() of /dev/clanqN.
 *
 * Everything a process creates lives in its context. The context file and
 * each evq file hold a reference; when the last goes, the endpoints are
 * destroyed. There is no other path by which a process's objects are
 * freed, so exit, kill and close all take this one.
 *
 * Mappings: each object with a segment gets a key in the context's
 * xarray; mmap() of the context fd at offset key << PAGE_SHIFT maps it.
 * Keys are small integers handed out by the driver, so an offset that
 * names nothing is simply not found.
 */
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "clanq_drv.h"

#define CLANQ_MMAP_KEYS	XA_LIMIT(1, 1u << 20)

struct clanq_ctx *clanq_ctx_create(struct clanq_nic *nic)
{
	struct clanq_ctx *ctx;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return NULL;
	ctx->budget = kzalloc(sizeof(*ctx->budget), GFP_KERNEL_ACCOUNT);
	if (!ctx->budget) {
		kfree(ctx);
		return NULL;
	}
	refcount_set(&ctx->budget->ref, 1);
	kref_init(&ctx->ref);
	ctx->nic = nic;
	ctx->tgid = task_tgid_vnr(current);
	mutex_init(&ctx->lock);
	INIT_LIST_HEAD(&ctx->eps);
	xa_init_flags(&ctx->mmaps, XA_FLAGS_ALLOC1);
	atomic_inc(&nic->nr_contexts);
	return ctx;
}
EXPORT_SYMBOL_CLANQ_KUNIT(clanq_ctx_create);

void clanq_ctx_get(struct clanq_ctx *ctx)
{
	kref_get(&ctx->ref);
}

static void clanq_ctx_release(struct kref *ref)
{
	struct clanq_ctx *ctx = container_of(ref, struct clanq_ctx, ref);
	struct clanq_ep *ep, *tmp;

	/* no file refers to ctx any more: nobody else can take the lock */
	mutex_lock(&ctx->lock);
	list_for_each_entry_safe(ep, tmp, &ctx->eps, ctx_node)
		clanq_ep_destroy(ep);
	mutex_unlock(&ctx->lock);
	WARN_ON(!xa_empty(&ctx->mmaps));
	xa_destroy(&ctx->mmaps);
	/* segments still mapped keep the budget (and their charge) alive */
	clanq_budget_put(ctx->budget, 0);
	mutex_destroy(&ctx->lock);
	atomic_dec(&ctx->nic->nr_contexts);
	kfree(ctx);
}

void clanq_ctx_put(struct clanq_ctx *ctx)
{
	kref_put(&ctx->ref, clanq_ctx_release);
}
EXPORT_SYMBOL_CLANQ_KUNIT(clanq_ctx_put);

/* Publish @shm for mmap(); the xarray holds a reference. */
int clanq_ctx_mmap_add(struct clanq_ctx *ctx, struct clanq_shm *shm, u32 *key)
{
	int err;

	refcount_inc(&shm->ref);
	err = xa_alloc(&ctx->mmaps, key, shm, CLANQ_MMAP_KEYS, GFP_KERNEL_ACCOUNT);
	if (err)
		clanq_shm_put(shm);
	return err;
}

void clanq_ctx_mmap_del(struct clanq_ctx *ctx, u32 key)
{
	clanq_shm_put(xa_erase(&ctx->mmaps, key));
}

int clanq_ctx_mmap(struct clanq_ctx *ctx, struct vm_area_struct *vma)
{
	struct clanq_shm *shm;
	int err = -EINVAL;

	/* the lock keeps the segment from being unpublished and freed meanwhile */
	mutex_lock(&ctx->lock);
	shm = vma->vm_pgoff <= U32_MAX ? xa_load(&ctx->mmaps, vma->vm_pgoff) : NULL;
	if (shm)
		err = clanq_shm_mmap(shm, vma);
	mutex_unlock(&ctx->lock);
	if (err)
		clanq_uerr(ctx, "mmap: offset %#lx length %lu names no segment of that size",
			   vma->vm_pgoff << PAGE_SHIFT, vma->vm_end - vma->vm_start);
	return err;
}
