// SPDX-License-Identifier: GPL-2.0
/*
 * The mmap keys of a context: what mmap() of the context fd finds.
 *
 * Each mappable object (struct clanq_map) gets a key in the context's
 * xarray and owns the page offsets key << CLANQ_MAP_SHIFT onwards; mmap()
 * of the context fd there maps it. An offset that names nothing is not
 * found.
 *
 * The VMAs of the context's mappings are in its inode's i_mmap tree
 * (context.c), so revoking an aperture zaps exactly its page range with
 * unmap_mapping_range(), in whichever processes map it.
 */
#include <linux/mm.h>

#include "clanq_drv.h"

#define CLANQ_MMAP_KEYS		XA_LIMIT(1, (1u << CLANQ_MAP_KEY_BITS) - 1)
/* a 32-bit process names every object: mmap2 takes a 32-bit page offset */
static_assert(CLANQ_MAP_SHIFT + CLANQ_MAP_KEY_BITS <= 32);
/* an unpublished key, kept until its old object's last mapping goes */
#define CLANQ_MAP_RETIRED(map)	xa_tag_pointer(map, 1)

/*
 * Publish @map for mmap(). The xarray holds no reference: the owner
 * unpublishes it (under ctx->lock) before letting it go.
 */
int clanq_ctx_mmap_add(struct clanq_ctx *ctx, struct clanq_map *map)
{
	int err;

	lockdep_assert_held(&ctx->lock);
	map->ctx = ctx;
	err = xa_alloc_cyclic(&ctx->mmaps, &map->key, map, CLANQ_MMAP_KEYS,
			      &ctx->next_mmap_key, GFP_KERNEL_ACCOUNT);
	/* -EBUSY: every key is taken; -ENOMEM stays what it is */
	return err == -EBUSY ? -ENOSPC : min(err, 0);
}

/*
 * Unpublish @map: mmap() finds it no more. Its key is freed at once if
 * nothing maps it, else retired until clanq_map_vma_close() sees the
 * last mapping go. No VMA can appear meanwhile: new mappings come from
 * mmap(), which holds ctx->lock, and copies (fork, split) from a VMA.
 */
void clanq_ctx_mmap_del(struct clanq_ctx *ctx, struct clanq_map *map)
{
	lockdep_assert_held(&ctx->lock);
	if (atomic_read(&map->vmas)) {
		/* replacing an entry allocates nothing */
		xa_store(&ctx->mmaps, map->key, CLANQ_MAP_RETIRED(map), GFP_KERNEL);
	} else {
		xa_erase(&ctx->mmaps, map->key);
	}
}

/* A VMA of @map appeared (mmap, fork, split). */
void clanq_map_vma_open(struct clanq_map *map)
{
	atomic_inc(&map->vmas);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_map_vma_open);

/*
 * A VMA of @map went; the last one frees a retired key. Its file holds
 * the context, so ctx is alive; mmap_lock -> ctx->lock is the usual
 * order. Call it before dropping the VMA's reference on the object.
 */
void clanq_map_vma_close(struct clanq_map *map)
{
	struct clanq_ctx *ctx = map->ctx;

	if (!atomic_dec_and_test(&map->vmas) || !ctx)
		return;
	mutex_lock(&ctx->lock);
	/* retired by us: a key freed and handed out again holds another entry */
	if (xa_load(&ctx->mmaps, map->key) == CLANQ_MAP_RETIRED(map))
		xa_erase(&ctx->mmaps, map->key);
	mutex_unlock(&ctx->lock);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_map_vma_close);

/*
 * Remove every page of @map's first @pages pages from every process
 * mapping it: the next access faults, and the fault handler decides.
 */
void clanq_ctx_zap(struct clanq_ctx *ctx, const struct clanq_map *map,
		   unsigned long pages)
{
	unmap_mapping_range(ctx->inode->i_mapping, clanq_map_offset(map),
			    (loff_t)pages << PAGE_SHIFT, 1);
}

int clanq_ctx_mmap(struct clanq_ctx *ctx, struct vm_area_struct *vma)
{
	unsigned long key = vma->vm_pgoff >> CLANQ_MAP_SHIFT;
	struct clanq_map *map = NULL;
	int err = -EINVAL;

	/* the lock keeps the object from being unpublished and freed meanwhile */
	mutex_lock(&ctx->lock);
	/* a mapping starts at its object's first page */
	if (!(vma->vm_pgoff & ((1ul << CLANQ_MAP_SHIFT) - 1)) && key <= U32_MAX)
		map = xa_load(&ctx->mmaps, key);
	if (xa_pointer_tag(map))	/* retired: names nothing now */
		map = NULL;
	if (map)
		err = map->mmap(map, vma);
	mutex_unlock(&ctx->lock);
	if (err)
		clanq_uerr(ctx, "mmap: offset %#lx length %lu: %s (%d)",
			   vma->vm_pgoff << PAGE_SHIFT, vma->vm_end - vma->vm_start,
			   map ? "refused" : "names nothing", err);
	return err;
}
