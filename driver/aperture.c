// SPDX-License-Identifier: GPL-2.0
/*
 * Apertures (paper section 2): an imported window onto a peer's exported
 * region, [off, off + len) with rights. The RDMA engine writes through
 * it (rdma.c); on the loop wire it can also be mapped, and then PIO is
 * plain CPU stores into the exporter's pages: distributed shared memory
 * on one host.
 *
 * PIO mappings are VM_PFNMAP and filled one page at a time by the fault
 * handler, which inserts the page while holding the region's revoke_sem
 * for reading. Revocation (the exporter frees the region, or the importer
 * closes the aperture) marks the region or aperture under revoke_sem for
 * writing, which waits out any fault in progress, and then zaps the
 * aperture's range in the importing context's address space: every later
 * access faults again, sees the mark, and gets SIGBUS. A fault can never
 * install a page after the zap. The PTEs are PFNMAP (they hold no page
 * reference), and the region's memory is released only after the
 * revocation and its zaps (clanq_kregion_free()), so no page is freed
 * while an importer maps it. The VMA holds the aperture, which holds the
 * region's struct, never its memory.
 *
 * The mapping covers whole pages, which may hold bytes outside the
 * window; it is offered only when all of them are the region's memory
 * (an allocated region, or registered memory whose first and last page
 * are inside the registration), so it never exposes the exporter's other
 * data. The key grants the whole region, so nothing beyond it leaks.
 *
 * Beside each PIO mapping, the importer can map the region's armed
 * bitmap (tripwire.c), read-only whatever the aperture's rights, so that
 * it can tell after its stores whether a tripwire waits for them. It is
 * mapped, faulted and revoked exactly as the PIO mapping is: it is the
 * exporter's memory, and goes with the region's.
 */
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/slab.h>

#include "clanq_drv.h"
#include "compat.h"

/*
 * What an aperture is charged: its struct, and for a CLANQ_AP_SINK one
 * the page its sink may become (clanq_kap_sink()), charged up front so
 * that the fault that allocates it cannot fail on the budget.
 */
static size_t clanq_kap_charge(const struct clanq_kap *ap)
{
	return sizeof(*ap) + (ap->sink ? PAGE_SIZE : 0);
}

static void clanq_kap_release(struct kref *ref)
{
	struct clanq_kap *ap = container_of(ref, struct clanq_kap, ref);

	clanq_kregion_put(ap->region);
	clanq_wire_put(ap->wire);
	if (ap->sink_page)
		__free_page(ap->sink_page);
	if (ap->budget)
		clanq_budget_put(ap->budget, clanq_kap_charge(ap));
	kfree_rcu(ap, rcu);
}

void clanq_kap_put(struct clanq_kap *ap)
{
	if (ap)
		kref_put(&ap->ref, clanq_kap_release);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kap_put);

/* An open aperture of @ctx by id, referenced; NULL if there is none. */
struct clanq_kap *clanq_kap_lookup(struct clanq_ctx *ctx, u32 id)
{
	struct clanq_kap *ap;

	rcu_read_lock();
	ap = xa_load(&ctx->aps, id);
	if (ap && !kref_get_unless_zero(&ap->ref))
		ap = NULL;
	rcu_read_unlock();
	return ap;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kap_lookup);

/*
 * An aperture has two mappings, the PIO window and its region's armed
 * bitmap, each under an mmap key of its own. One set of VMA operations
 * serves both and tells them apart by the key in the VMA's page offset
 * (the key is the offset's high part, mapkey.c; splits keep it).
 */
static bool clanq_kap_vma_armed(struct vm_area_struct *vma)
{
	struct clanq_kap *ap = vma->vm_private_data;

	return vma->vm_pgoff >> CLANQ_MAP_SHIFT == ap->armed_map.key;
}

static struct clanq_map *clanq_kap_vma_map(struct vm_area_struct *vma)
{
	struct clanq_kap *ap = vma->vm_private_data;

	return clanq_kap_vma_armed(vma) ? &ap->armed_map : &ap->map;
}

static void clanq_kap_vm_open(struct vm_area_struct *vma)
{
	struct clanq_kap *ap = vma->vm_private_data;

	kref_get(&ap->ref);
	clanq_map_vma_open(clanq_kap_vma_map(vma));
}

static void clanq_kap_vm_close(struct vm_area_struct *vma)
{
	struct clanq_kap *ap = vma->vm_private_data;

	clanq_map_vma_close(clanq_kap_vma_map(vma));
	clanq_kap_put(ap);
}

/*
 * The sink of a revoked CLANQ_AP_SINK aperture: one page of its own,
 * behind every page of both its mappings, so a store that raced with the
 * revocation lands there instead of killing the writer. Its own: a page
 * shared between apertures would let one process read what another
 * stored. Allocated at the first fault after the revocation.
 */
static struct page *clanq_kap_sink(struct clanq_kap *ap)
{
	struct page *page = READ_ONCE(ap->sink_page), *old;

	if (page)
		return page;
	page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
	if (!page)
		return NULL;
	old = cmpxchg(&ap->sink_page, NULL, page);
	if (old) {
		__free_page(page);
		page = old;
	}
	return page;
}

static vm_fault_t clanq_kap_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct clanq_kap *ap = vma->vm_private_data;
	struct clanq_kregion *r = ap->region;
	bool armed = clanq_kap_vma_armed(vma);
	/* the mapping starts at the object's first page (mapkey.c) */
	unsigned long idx = vmf->pgoff & ((1ul << CLANQ_MAP_SHIFT) - 1);
	vm_fault_t ret = VM_FAULT_SIGBUS;
	struct page *page;

	down_read(&r->revoke_sem);
	/* not revoked: the region's memory, bitmap included, is there */
	if (!r->revoked && !ap->closed &&
	    idx < (armed ? ap->armed_pages : ap->map_pages)) {
		page = armed ? r->tw.bitmap->pages[idx] :
			       r->pages[ap->map_page0 + idx];
		ret = vmf_insert_pfn(vma, vmf->address, page_to_pfn(page));
	} else if (r->revoked && !ap->closed && ap->sink) {
		page = clanq_kap_sink(ap);
		ret = page ? vmf_insert_pfn(vma, vmf->address, page_to_pfn(page)) :
			     VM_FAULT_OOM;
	}
	up_read(&r->revoke_sem);
	return ret;
}

static const struct vm_operations_struct clanq_kap_vm_ops = {
	.open	= clanq_kap_vm_open,
	.close	= clanq_kap_vm_close,
	.fault	= clanq_kap_fault,
};

/* Map @pages pages of @ap's, whole and shared; writable only if @writable. */
static int clanq_kap_map_vma(struct clanq_kap *ap, struct vm_area_struct *vma,
			     unsigned long pages, bool writable)
{
	if (vma->vm_end - vma->vm_start != pages << PAGE_SHIFT ||
	    !(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (!writable) {
		if (vma->vm_flags & VM_WRITE)
			return -EACCES;
		vm_flags_clear(vma, VM_MAYWRITE);
	}
	if (READ_ONCE(ap->region->revoked))
		return -ENXIO;
	vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &clanq_kap_vm_ops;
	vma->vm_private_data = ap;
	clanq_kap_vm_open(vma);
	return 0;
}

static int clanq_kap_mmap(struct clanq_map *map, struct vm_area_struct *vma)
{
	struct clanq_kap *ap = container_of(map, struct clanq_kap, map);

	return clanq_kap_map_vma(ap, vma, ap->map_pages,
				 ap->rights & CLANQ_RIGHT_WRITE);
}

/*
 * The armed bitmap, read-only whatever the rights: it is the driver's
 * alone, so no importer can forge the hint other writers act on.
 */
static int clanq_kap_armed_mmap(struct clanq_map *map, struct vm_area_struct *vma)
{
	struct clanq_kap *ap = container_of(map, struct clanq_kap, armed_map);

	return clanq_kap_map_vma(ap, vma, ap->armed_pages, false);
}

/* Zap @ap's PIO mappings in every process of its context. */
static void clanq_kap_zap(struct clanq_kap *ap)
{
	if (ap->map_pages)
		clanq_ctx_zap(ap->ctx, &ap->map, ap->map_pages);
	if (ap->armed_map.mmap)
		clanq_ctx_zap(ap->ctx, &ap->armed_map, ap->armed_pages);
}

/*
 * Revoke every import of @r. Called once, by clanq_kregion_free(); the
 * write lock waits for faults and delivered writes in progress, and
 * every later one sees revoked.
 */
void clanq_kap_revoke_all(struct clanq_kregion *r)
{
	struct clanq_kap *ap;

	down_write(&r->revoke_sem);
	WRITE_ONCE(r->revoked, true);
	up_write(&r->revoke_sem);
	/* importers stay on the list, and their contexts alive, until closed */
	mutex_lock(&r->ap_lock);
	list_for_each_entry(ap, &r->aps, region_node) {
		clanq_kap_zap(ap);
		if (ap->notify_ep)
			clanq_oob_notify_revoked(ap);
	}
	mutex_unlock(&r->ap_lock);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kap_revoke_all);

/* Which pages a PIO mapping of [off, off + len) of @r would cover, if any. */
static void clanq_kap_place(struct clanq_kap *ap)
{
	struct clanq_kregion *r = ap->region;
	u64 start = r->first + ap->off;
	u64 lo = round_down(start, PAGE_SIZE);
	u64 hi = round_up(start + ap->len, PAGE_SIZE);
	/* registered memory: the first and last page may hold other data */
	u64 min = r->registered ? r->first : 0;
	u64 max = r->registered ? r->first + r->len : (u64)r->nr_pages << PAGE_SHIFT;

	/*
	 * A mapping is readable: no PIO onto a region the importer may not
	 * read, nor onto another host's (its writes go through the engine)
	 */
	if (!(ap->rights & CLANQ_RIGHT_READ) || r->remote)
		return;
	if (lo < min || hi > max || (hi - lo) >> PAGE_SHIFT >= 1ul << CLANQ_MAP_SHIFT)
		return;
	ap->map_page0 = lo >> PAGE_SHIFT;
	ap->map_pages = (hi - lo) >> PAGE_SHIFT;
	ap->map_delta = start - lo;
	ap->map.mmap = clanq_kap_mmap;
	/*
	 * Exported, so it has one (clanq_kregion_tw_export()); its size is
	 * the region's to say, not the bitmap's: the region may be freed
	 * under us, and its memory with it.
	 */
	ap->armed_pages = clanq_kregion_tw_pages(r);
	ap->armed_map.mmap = clanq_kap_armed_mmap;
}

/* Publish the PIO mapping and the armed bitmap, if there are. */
static int clanq_kap_publish_maps(struct clanq_ctx *ctx, struct clanq_kap *ap)
{
	int err = 0;

	if (ap->map.mmap)
		err = clanq_ctx_mmap_add(ctx, &ap->map);
	if (!err && ap->armed_map.mmap) {
		err = clanq_ctx_mmap_add(ctx, &ap->armed_map);
		if (err)
			clanq_ctx_mmap_del(ctx, &ap->map);
	}
	return err;
}

static void clanq_kap_unpublish_maps(struct clanq_ctx *ctx, struct clanq_kap *ap)
{
	if (ap->map.mmap)
		clanq_ctx_mmap_del(ctx, &ap->map);
	if (ap->armed_map.mmap)
		clanq_ctx_mmap_del(ctx, &ap->armed_map);
}

static int clanq_kap_check(struct clanq_ctx *ctx, const struct clanq_ioc_ap_import *im,
			   const struct clanq_wire_ops *wire, struct clanq_kregion *r)
{
	u64 end;

	/* wrong key, never exported, freed: all the same to a guesser */
	if (!smp_load_acquire(&r->exported) || r->key != im->key ||
	    READ_ONCE(r->revoked)) {
		clanq_uerr(ctx, "AP_IMPORT: no exported region %u:%u with that key",
			   im->region.node, im->region.id);
		return -ENOENT;
	}
	if (im->rights & ~r->rights) {
		clanq_uerr(ctx, "AP_IMPORT: rights %#x, the export grants %#x",
			   im->rights, r->rights);
		return -EACCES;
	}
	/* a device without atomics is a limit of the host's: said as one */
	if ((im->flags & CLANQ_AP_ATOMIC) && (!wire->rdma_atomic || r->no_atomics)) {
		clanq_ulimit(ctx, "AP_IMPORT: region %u:%u: CLANQ_AP_ATOMIC: %s",
			     im->region.node, im->region.id,
			     r->no_atomics ?: "its wire has no atomics");
		return -EOPNOTSUPP;
	}
	if (check_add_overflow(im->offset, im->len, &end) || end > r->len) {
		clanq_uerr(ctx, "AP_IMPORT: [%llu, +%llu) is outside the region's %llu bytes",
			   im->offset, im->len, r->len);
		return -ERANGE;
	}
	return 0;
}

int clanq_ioctl_ap_import(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_ap_import *im = arg;
	const struct clanq_wire_ops *wire;
	struct clanq_kregion *r;
	struct clanq_kap *ap;
	int err;

	if (!im->rights || (im->rights & ~CLANQ_RIGHTS_ALL) || !im->len) {
		clanq_uerr(ctx, "AP_IMPORT: rights %#x, len %llu: want len > 0, rights in %#x",
			   im->rights, im->len, CLANQ_RIGHTS_ALL);
		return -EINVAL;
	}
	wire = clanq_wire_route(ctx->nic, im->region.node);
	r = wire ? wire->import(ctx->nic, &im->region, im->key) :
		   ERR_PTR(-EHOSTUNREACH);
	if (IS_ERR(r)) {
		err = PTR_ERR(r);
		clanq_uerr(ctx, "AP_IMPORT: region %u:%u: %s (%d)", im->region.node,
			   im->region.id, err == -EHOSTUNREACH ? "no such node" :
			   err == -EOPNOTSUPP ? "its wire cannot import regions" :
			   err == -ENOENT ? "no such region" :
			   "its host did not grant the import", err);
		clanq_wire_put(wire);
		return err;
	}
	err = clanq_kap_check(ctx, im, wire, r);
	if (err) {
		clanq_kregion_put(r);
		clanq_wire_put(wire);
		return err;
	}
	if (im->notify_ep) {
		struct clanq_kep *ep = clanq_kep_lookup_owned(ctx, im->notify_ep);

		if (!ep) {
			clanq_uerr(ctx, "AP_IMPORT: notify_ep %u: no such endpoint in this context",
				   im->notify_ep);
			clanq_kregion_put(r);
			clanq_wire_put(wire);
			return -ENOENT;
		}
		clanq_kep_put(ep);
	}
	ap = kzalloc(sizeof(*ap), GFP_KERNEL_ACCOUNT);
	if (!ap) {
		clanq_kregion_put(r);
		clanq_wire_put(wire);
		return -ENOMEM;
	}
	/*
	 * Charged like a tripwire: an aperture holds no memory of its own
	 * beyond the struct (and a sink's page), but a connection takes one,
	 * and max_aps alone would let many contexts of one user hold a great
	 * many. The budget says which limit refused it.
	 */
	ap->sink = im->flags & CLANQ_AP_SINK;
	ap->budget = clanq_budget_charge(ctx, clanq_kap_charge(ap));
	if (!ap->budget) {
		kfree(ap);
		clanq_kregion_put(r);
		clanq_wire_put(wire);
		return -ENOMEM;
	}
	ap->atomic = im->flags & CLANQ_AP_ATOMIC;
	ap->notify_ep = im->notify_ep;
	ap->notify_cookie = im->notify_cookie;
	kref_init(&ap->ref);
	ap->ctx = ctx;
	ap->region = r;		/* our reference */
	ap->wire = wire;
	ap->off = im->offset;
	ap->len = im->len;
	ap->rights = im->rights;
	INIT_LIST_HEAD(&ap->region_node);
	clanq_kap_place(ap);

	mutex_lock(&ctx->lock);
	err = -ENOSPC;
	if (ctx->nr_aps >= READ_ONCE(clanq_max_aps)) {
		clanq_ulimit(ctx, "AP_IMPORT: context has %u apertures already: max_aps",
			     ctx->nr_aps);
		goto err_unlock;
	}
	err = clanq_kap_publish_maps(ctx, ap);
	if (err)
		goto err_unlock;
	err = xa_alloc_cyclic(&ctx->aps, &ap->id, ap, XA_LIMIT(1, S32_MAX),
			      &ctx->next_ap_id, GFP_KERNEL_ACCOUNT);
	if (err < 0) {
		clanq_kap_unpublish_maps(ctx, ap);
		goto err_unlock;
	}
	/* a revocation from now on sees us; one before it left revoked set */
	mutex_lock(&r->ap_lock);
	list_add_tail(&ap->region_node, &r->aps);
	r->nr_aps++;
	mutex_unlock(&r->ap_lock);
	ctx->nr_aps++;
	im->id = ap->id;
	im->mmap_offset = 0;
	im->mmap_size = 0;
	im->map_delta = 0;
	if (ap->map.mmap) {
		im->mmap_offset = clanq_map_offset(&ap->map);
		im->mmap_size = (u64)ap->map_pages << PAGE_SHIFT;
		im->map_delta = ap->map_delta;
	}
	im->armed_mmap_offset = 0;
	im->armed_mmap_size = 0;
	if (ap->armed_map.mmap) {
		im->armed_mmap_offset = clanq_map_offset(&ap->armed_map);
		im->armed_mmap_size = (u64)ap->armed_pages << PAGE_SHIFT;
	}
	mutex_unlock(&ctx->lock);
	return 0;

err_unlock:
	mutex_unlock(&ctx->lock);
	clanq_kap_put(ap);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_ap_import);

/*
 * Close: unpublish, mark closed (faults and the engine see it), leave the
 * region's importers, zap the mappings, drop the context's reference.
 */
void clanq_kap_close(struct clanq_kap *ap)
{
	struct clanq_ctx *ctx = ap->ctx;
	struct clanq_kregion *r = ap->region;

	lockdep_assert_held(&ctx->lock);
	xa_erase(&ctx->aps, ap->id);
	clanq_kap_unpublish_maps(ctx, ap);
	down_write(&r->revoke_sem);
	WRITE_ONCE(ap->closed, true);
	up_write(&r->revoke_sem);
	mutex_lock(&r->ap_lock);
	list_del_init(&ap->region_node);
	r->nr_aps--;
	mutex_unlock(&r->ap_lock);
	clanq_kap_zap(ap);
	ctx->nr_aps--;
	clanq_kap_put(ap);
}

int clanq_ioctl_ap_close(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_ap_close *c = arg;
	struct clanq_kap *ap;

	mutex_lock(&ctx->lock);
	ap = clanq_kap_lookup(ctx, c->id);
	if (ap) {
		clanq_kap_close(ap);
		clanq_kap_put(ap);
	}
	mutex_unlock(&ctx->lock);
	if (!ap)
		clanq_uerr(ctx, "AP_CLOSE: no aperture %u in this context", c->id);
	return ap ? 0 : -ENOENT;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_ap_close);
