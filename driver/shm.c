// SPDX-License-Identifier: GPL-2.0
/*
 * Shared segments: memory the driver and one application both see.
 *
 * The driver writes through its vmalloc address, the application through
 * its mapping. The segment is freed only when its owner object and every
 * VMA mapping it have dropped their references: the VMA's open/close
 * callbacks count fork and split copies, so a process still holding a
 * mapping after its endpoint is destroyed reads stale but valid memory,
 * never freed memory.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "clanq_drv.h"

/* Give back @bytes and one reference; the last reference frees it. */
void clanq_budget_put(struct clanq_budget *budget, size_t bytes)
{
	atomic_long_sub(bytes, &budget->bytes);
	if (refcount_dec_and_test(&budget->ref))
		kfree(budget);
}

/*
 * Charge @bytes to @ctx's budget: the budget, with a reference the
 * caller gives back with clanq_budget_put(budget, bytes), or NULL if
 * that would pass max_ctx_bytes (logged).
 */
struct clanq_budget *clanq_budget_charge(struct clanq_ctx *ctx, size_t bytes)
{
	struct clanq_budget *budget = ctx->budget;

	if (atomic_long_add_return(bytes, &budget->bytes) > clanq_max_ctx_bytes) {
		atomic_long_sub(bytes, &budget->bytes);
		clanq_uerr(ctx, "%zu more bytes would pass max_ctx_bytes (%lu)",
			   bytes, clanq_max_ctx_bytes);
		return NULL;
	}
	refcount_inc(&budget->ref);
	return budget;
}

static int clanq_shm_map(struct clanq_map *map, struct vm_area_struct *vma)
{
	return clanq_shm_mmap(container_of(map, struct clanq_shm, map), vma);
}

/*
 * A zeroed segment of @size bytes (rounded up to pages), charged to
 * @ctx's budget: NULL if that would pass max_ctx_bytes or if memory is
 * short.
 */
struct clanq_shm *clanq_shm_alloc(struct clanq_ctx *ctx, size_t size)
{
	struct clanq_budget *budget;
	struct clanq_shm *shm;
	size_t bytes = PAGE_ALIGN(size);

	budget = clanq_budget_charge(ctx, bytes);
	if (!budget)
		return NULL;
	shm = kzalloc(sizeof(*shm), GFP_KERNEL_ACCOUNT);
	if (shm)
		shm->vaddr = vmalloc_user(bytes);	/* zeroed, VM_USERMAP */
	if (!shm || !shm->vaddr) {
		kfree(shm);
		clanq_budget_put(budget, bytes);
		return NULL;
	}
	shm->size = bytes;
	shm->budget = budget;
	shm->map.mmap = clanq_shm_map;
	refcount_set(&shm->ref, 1);
	return shm;
}

static void clanq_shm_get(struct clanq_shm *shm)
{
	refcount_inc(&shm->ref);
}

void clanq_shm_put(struct clanq_shm *shm)
{
	if (shm && refcount_dec_and_test(&shm->ref)) {
		vfree(shm->vaddr);
		clanq_budget_put(shm->budget, shm->size);
		kfree(shm);
	}
}

static void clanq_shm_vm_open(struct vm_area_struct *vma)
{
	clanq_shm_get(vma->vm_private_data);
}

static void clanq_shm_vm_close(struct vm_area_struct *vma)
{
	clanq_shm_put(vma->vm_private_data);
}

static const struct vm_operations_struct clanq_shm_vm_ops = {
	.open	= clanq_shm_vm_open,
	.close	= clanq_shm_vm_close,
};

/*
 * Map the whole segment, or refuse: the length must be exactly the size
 * the create call returned, and the mapping must be shared (a private
 * copy would silently stop seeing the driver's writes).
 */
int clanq_shm_mmap(struct clanq_shm *shm, struct vm_area_struct *vma)
{
	int err;

	if (vma->vm_end - vma->vm_start != shm->size)
		return -EINVAL;
	/* VM_MAYSHARE: MAP_SHARED asked for, even on a read-only file */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	err = remap_vmalloc_range(vma, shm->vaddr, 0);
	if (err)
		return err;
	vma->vm_private_data = shm;
	vma->vm_ops = &clanq_shm_vm_ops;
	clanq_shm_get(shm);
	return 0;
}
