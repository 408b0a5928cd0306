// SPDX-License-Identifier: GPL-2.0
/*
 * Shared segments: memory the driver and one application both see.
 *
 * Pages of our own, allocated with __GFP_ACCOUNT so the caller's memory
 * cgroup pays for them (vmalloc_user() memory is not accounted), vmap()ed
 * for the driver and inserted into the application's mapping with
 * vm_insert_pages(), as io_uring maps its rings since 6.10. The driver
 * writes through its vmap address, the application through its mapping.
 *
 * The segment is freed only when its owner object and every VMA mapping
 * it have dropped their references: the VMA's open/close
 * callbacks count fork and split copies, so a process still holding a
 * mapping after its endpoint is destroyed reads stale but valid memory,
 * never freed memory.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "clanq_drv.h"
#include "compat.h"

static int clanq_shm_map(struct clanq_map *map, struct vm_area_struct *vma)
{
	return clanq_shm_mmap(container_of(map, struct clanq_shm, map), vma);
}

/*
 * A zeroed segment of @size bytes (rounded up to pages), charged to
 * @ctx's budget: NULL if that would pass max_ctx_bytes or if memory is
 * short.
 */
static void clanq_shm_free_pages(struct clanq_shm *shm)
{
	unsigned long i;

	if (shm->vaddr && shm->vmapped)
		vunmap(shm->vaddr);
	for (i = 0; i < shm->nr_pages; i++)
		__free_page(shm->pages[i]);
	kvfree(shm->pages);
}

struct clanq_shm *clanq_shm_alloc(struct clanq_ctx *ctx, size_t size)
{
	struct clanq_budget *budget;
	struct clanq_shm *shm;
	size_t bytes = PAGE_ALIGN(size);
	unsigned long nr = bytes >> PAGE_SHIFT;

	budget = clanq_budget_charge(ctx, bytes);
	if (!budget)
		return NULL;
	shm = kzalloc(sizeof(*shm), GFP_KERNEL_ACCOUNT);
	if (!shm)
		goto err_budget;
	shm->pages = kvcalloc(nr, sizeof(*shm->pages), GFP_KERNEL_ACCOUNT);
	if (!shm->pages)
		goto err_shm;
	for (; shm->nr_pages < nr; shm->nr_pages++) {
		shm->pages[shm->nr_pages] = alloc_page(CLANQ_GFP_USER_PAGES);
		if (!shm->pages[shm->nr_pages])
			goto err_pages;
	}
	/*
	 * One page is already in the kernel's direct map (these pages are
	 * never highmem): no vmap(). Each region a connection exports has
	 * a one-page armed bitmap, and a vmap() costs a vmalloc area and,
	 * once freed, a lazy purge that flushes every CPU's TLB (and, with
	 * KASAN, its shadow): most of an export's time.
	 */
	if (nr == 1 && !PageHighMem(shm->pages[0])) {
		shm->vaddr = page_address(shm->pages[0]);
	} else {
		shm->vaddr = vmap(shm->pages, nr, VM_MAP, PAGE_KERNEL);
		if (!shm->vaddr)
			goto err_pages;
		shm->vmapped = true;
	}
	shm->size = bytes;
	shm->budget = budget;
	shm->map.mmap = clanq_shm_map;
	refcount_set(&shm->ref, 1);
	return shm;

err_pages:
	clanq_shm_free_pages(shm);
err_shm:
	kfree(shm);
err_budget:
	clanq_budget_put(budget, bytes);
	return NULL;
}

static void clanq_shm_get(struct clanq_shm *shm)
{
	refcount_inc(&shm->ref);
}

void clanq_shm_put(struct clanq_shm *shm)
{
	if (shm && refcount_dec_and_test(&shm->ref)) {
		clanq_shm_free_pages(shm);
		clanq_budget_put(shm->budget, shm->size);
		kfree(shm);
	}
}

static void clanq_shm_vm_open(struct vm_area_struct *vma)
{
	struct clanq_shm *shm = vma->vm_private_data;

	clanq_shm_get(shm);
	clanq_map_vma_open(&shm->map);
}

static void clanq_shm_vm_close(struct vm_area_struct *vma)
{
	struct clanq_shm *shm = vma->vm_private_data;

	clanq_map_vma_close(&shm->map);
	clanq_shm_put(shm);
}

static const struct vm_operations_struct clanq_shm_vm_ops = {
	.open	= clanq_shm_vm_open,
	.close	= clanq_shm_vm_close,
};

/*
 * Map all @nr driver @pages into @vma, or refuse: the length must be
 * exactly theirs (what the create call returned), and the mapping must
 * be shared (a private copy would silently stop seeing the driver's
 * writes). The page tables hold their own references on the pages. For
 * segments and allocated regions alike.
 */
int clanq_vma_insert_pages(struct vm_area_struct *vma, struct page **pages,
			   unsigned long nr)
{
	unsigned long n = nr;
	int err;

	/* VM_MAYSHARE: MAP_SHARED asked for, even on a read-only file */
	if (vma->vm_end - vma->vm_start != nr << PAGE_SHIFT ||
	    !(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	err = vm_insert_pages(vma, vma->vm_start, pages, &n);
	/* in a VMA sized for them, only a page table can fail: -EFAULT */
	return err == -EFAULT ? -ENOMEM : err;
}

int clanq_shm_mmap(struct clanq_shm *shm, struct vm_area_struct *vma)
{
	int err = clanq_vma_insert_pages(vma, shm->pages, shm->nr_pages);

	if (err)
		return err;
	vma->vm_private_data = shm;
	vma->vm_ops = &clanq_shm_vm_ops;
	clanq_shm_vm_open(vma);
	return 0;
}
