// SPDX-License-Identifier: GPL-2.0
/*
 * Regions (paper section 2): memory the RDMA engine reads as a request's
 * source, and writes once a peer has imported it as an aperture.
 *
 * Two kinds, one shape (an array of pages, byte 0 at offset first of the
 * first page):
 *  - allocated: zeroed driver pages, charged to the context's budget
 *    (max_ctx_bytes), mapped by the owner from the context fd;
 *  - registered: the owner's own memory, pinned with FOLL_LONGTERM and
 *    charged to the user's RLIMIT_MEMLOCK (account.c) until
 *    the last reference goes. Pinning happens before ctx->lock is taken,
 *    because mmap() takes ctx->lock under mmap_lock.
 *
 * Every region gets a node-wide id, so an exported one can be named by a
 * peer; export adds 64 random bits of key and the rights an import may
 * ask for. Freeing revokes: under revoke_sem (write) the region is marked
 * revoked, which every later fault and delivered write sees under
 * revoke_sem (read); then the importers' PIO mappings are zapped
 * (aperture.c).
 *
 * Two lifetimes. The struct lives while anything refers to it (kref:
 * apertures, lookups, VMAs, the engine). The memory and its charges live
 * only while someone may still touch it (mem_ref): the owner until it
 * frees the region, the owner's mappings, and the engine while the region
 * is a request's source. Importers never hold the memory: after the
 * revocation nothing of theirs touches it, so an importer that never
 * closes its aperture cannot keep an exporter's pages pinned or its
 * budget spent.
 */
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>
#include <linux/hugetlb.h>

#include "clanq_drv.h"

/* The pages and their charges go; the geometry stays for the struct. */
static void clanq_kregion_release_mem(struct clanq_kregion *r)
{
	unsigned long i;

	if (r->registered) {
		unpin_user_pages_dirty_lock(r->pages, r->nr_pages, true);
		r->nr_pages = 0;
		clanq_pin_uncharge(&r->pin);
	} else if (r->pages) {
		for (i = 0; i < r->nr_pages; i++)
			__free_page(r->pages[i]);
	}
	/* its importers' mappings of it were zapped with the region's */
	clanq_shm_put(r->tw.bitmap);
	r->tw.bitmap = NULL;
	if (r->budget)
		clanq_budget_put(r->budget, r->charged << PAGE_SHIFT);
	r->budget = NULL;
	kvfree(r->pages);
	r->pages = NULL;
}

/* A hold on the memory, for as long as it may be touched; false if gone. */
bool clanq_kregion_mem_get(struct clanq_kregion *r)
{
	return refcount_inc_not_zero(&r->mem_ref);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kregion_mem_get);

void clanq_kregion_mem_put(struct clanq_kregion *r)
{
	if (refcount_dec_and_test(&r->mem_ref))
		clanq_kregion_release_mem(r);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kregion_mem_put);

static void clanq_kregion_release(struct kref *ref)
{
	struct clanq_kregion *r = container_of(ref, struct clanq_kregion, ref);

	WARN_ON(!list_empty(&r->aps));
	if (r->remote) {
		mutex_destroy(&r->ap_lock);
		r->remote_release(r);	/* the wire's: it embeds us */
		return;
	}
	/* still held only if creation failed: the owner's own hold */
	if (refcount_read(&r->mem_ref)) {
		WARN_ON(refcount_read(&r->mem_ref) != 1);
		clanq_kregion_release_mem(r);
	}
	mutex_destroy(&r->ap_lock);
	kfree_rcu(r, rcu);
}

/* Another reference on @r, which the caller holds. */
void clanq_kregion_get(struct clanq_kregion *r)
{
	kref_get(&r->ref);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kregion_get);

/*
 * A reference on @r, found where it may be on its way out (a list its
 * release takes it off): false if its last reference is gone.
 */
bool clanq_kregion_tryget(struct clanq_kregion *r)
{
	return kref_get_unless_zero(&r->ref);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kregion_tryget);

void clanq_kregion_put(struct clanq_kregion *r)
{
	if (r)
		kref_put(&r->ref, clanq_kregion_release);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kregion_put);

/* What every region starts with, local or remote: one reference, no users. */
static void clanq_kregion_init(struct clanq_kregion *r, struct clanq_nic *nic,
			       u64 len)
{
	kref_init(&r->ref);
	r->nic = nic;
	r->len = len;
	init_rwsem(&r->revoke_sem);
	mutex_init(&r->ap_lock);
	INIT_LIST_HEAD(&r->aps);
	INIT_LIST_HEAD(&r->ctx_node);
	clanq_kregion_tw_init(r);
}

/**
 * clanq_kregion_remote_init() - a region on another host, as imported here
 * @r: zeroed, in the wire's own struct
 * @nic: the importer's NIC
 * @node: the exporter's node
 * @id: the region's id there
 * @len: its length
 * @key: the key the exporter checked
 * @rights: what it granted
 * @release: the wire's, called instead of freeing @r when the last
 *	     reference goes (with RCU: lookups may still look at it)
 *
 * Only an aperture holds it. It has no pages and no mappings; the engine
 * writes to it through the wire, which revokes it (clanq_kap_revoke_all())
 * when the exporter frees the region or the connection behind it ends.
 */
void clanq_kregion_remote_init(struct clanq_kregion *r, struct clanq_nic *nic,
			       u32 node, u32 id, u64 len, u64 key, u32 rights,
			       void (*release)(struct clanq_kregion *r))
{
	clanq_kregion_init(r, nic, len);
	r->id = id;
	r->remote = true;
	r->remote_node = node;
	r->remote_release = release;
	r->key = key;
	r->rights = rights;
	/* as REGION_EXPORT publishes them: clanq_kap_check() acquires */
	smp_store_release(&r->exported, true);
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kregion_remote_init);

/* Any region of @nic by id, referenced; NULL if there is none. */
struct clanq_kregion *clanq_kregion_lookup(struct clanq_nic *nic, u32 id)
{
	struct clanq_kregion *r;

	rcu_read_lock();
	r = xa_load(&nic->regions, id);
	if (r && !kref_get_unless_zero(&r->ref))
		r = NULL;
	rcu_read_unlock();
	return r;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_kregion_lookup);

/* A live region of @ctx itself: other contexts' ids read as absent. */
struct clanq_kregion *clanq_kregion_lookup_owned(struct clanq_ctx *ctx, u32 id)
{
	struct clanq_kregion *r = clanq_kregion_lookup(ctx->nic, id);

	if (r && (r->ctx != ctx || READ_ONCE(r->revoked))) {
		clanq_kregion_put(r);
		r = NULL;
	}
	return r;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_kregion_lookup_owned);

/*
 * The owner's mapping of an allocated region holds the struct and the
 * memory: the memory counts against the budget while it is mapped.
 */
static void clanq_kregion_vm_open(struct vm_area_struct *vma)
{
	struct clanq_kregion *r = vma->vm_private_data;

	kref_get(&r->ref);
	refcount_inc(&r->mem_ref);
	clanq_map_vma_open(&r->map);
}

static void clanq_kregion_vm_close(struct vm_area_struct *vma)
{
	struct clanq_kregion *r = vma->vm_private_data;

	clanq_map_vma_close(&r->map);
	clanq_kregion_mem_put(r);
	clanq_kregion_put(r);
}

static const struct vm_operations_struct clanq_kregion_vm_ops = {
	.open	= clanq_kregion_vm_open,
	.close	= clanq_kregion_vm_close,
};

/* Map all of an allocated region, shared, or refuse. */
static int clanq_kregion_mmap(struct clanq_map *map, struct vm_area_struct *vma)
{
	struct clanq_kregion *r = container_of(map, struct clanq_kregion, map);
	int err = clanq_vma_insert_pages(vma, r->pages, r->nr_pages);

	if (err)
		return err;
	vma->vm_private_data = r;
	vma->vm_ops = &clanq_kregion_vm_ops;
	clanq_kregion_vm_open(vma);
	return 0;
}

static int clanq_kregion_alloc_pages(struct clanq_ctx *ctx,
				     struct clanq_kregion *r, unsigned long nr)
{
	/* the owner maps it whole: it must fit its offset range (mapkey.c) */
	if (nr >= 1ul << CLANQ_MAP_SHIFT)
		return -EINVAL;
	r->budget = clanq_budget_charge(ctx, nr << PAGE_SHIFT);
	if (!r->budget)
		return -ENOMEM;
	r->charged = nr;
	for (; r->nr_pages < nr; r->nr_pages++) {
		r->pages[r->nr_pages] = alloc_page(CLANQ_GFP_USER_PAGES |
						   __GFP_HIGHMEM);
		if (!r->pages[r->nr_pages])
			return -ENOMEM;
	}
	r->map.mmap = clanq_kregion_mmap;
	return 0;
}

/*
 * Long-term pins of a shared file mapping are unsafe: the file system
 * may write the page back, or truncate it, under the pin. 6.5 and later
 * refuse them in GUP (except shmem and hugetlb); 6.1 does not, so we say
 * it ourselves, on every kernel, with a message that says why. Holes are
 * left to the pin, which fails on them.
 */
static int clanq_kregion_check_vmas(struct clanq_ctx *ctx, unsigned long start,
				    unsigned long end)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	unsigned long addr = start;
	int err = 0;

	mmap_read_lock(mm);
	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start >= end)
			break;
		if (vma->vm_file && (vma->vm_flags & VM_SHARED) &&
		    !shmem_file(vma->vm_file) && !is_vm_hugetlb_page(vma)) {
			/* anonymous memory, shmem and memfd can be */
			clanq_uerr(ctx, "REGION_CREATE: %#lx: shared file mapping: no pin",
				   max(addr, vma->vm_start));
			err = -EOPNOTSUPP;
			break;
		}
		addr = vma->vm_end;
	}
	mmap_read_unlock(mm);
	return err;
}

/* Pin the caller's pages [start, start + nr pages), within RLIMIT_MEMLOCK. */
static int clanq_kregion_pin(struct clanq_ctx *ctx, struct clanq_kregion *r,
			     unsigned long start, unsigned long nr)
{
	int got, err;

	if (!current->mm)
		return -EFAULT;
	err = clanq_kregion_check_vmas(ctx, start, start + (nr << PAGE_SHIFT));
	if (err)
		return err;
	err = clanq_pin_charge(ctx, &r->pin, nr);
	if (err)
		return err;
	r->registered = true;
	while (r->nr_pages < nr) {
		got = pin_user_pages_fast(start + (r->nr_pages << PAGE_SHIFT),
					  min(nr - r->nr_pages, 1024ul),
					  FOLL_WRITE | FOLL_LONGTERM,
					  r->pages + r->nr_pages);
		if (got <= 0) {
			clanq_uerr(ctx, "REGION_CREATE: cannot pin %#lx: not mapped writable (%d)",
				   start + (r->nr_pages << PAGE_SHIFT), got);
			return got ? got : -EFAULT;
		}
		r->nr_pages += got;
	}
	return 0;
}

static struct clanq_kregion *clanq_kregion_new(struct clanq_ctx *ctx,
					       const struct clanq_ioc_region_create *c)
{
	bool reg = c->flags & CLANQ_REGION_REGISTER;
	u32 first = reg ? offset_in_page(c->addr) : 0;
	struct clanq_kregion *r;
	unsigned long nr;
	int err;

	nr = DIV_ROUND_UP(first + c->size, PAGE_SIZE);	/* size is bounded */
	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r)
		return ERR_PTR(-ENOMEM);
	clanq_kregion_init(r, ctx->nic, c->size);
	refcount_set(&r->mem_ref, 1);	/* the owner's, until it frees */
	r->ctx = ctx;
	r->first = first;
	r->pages = kvcalloc(nr, sizeof(*r->pages), GFP_KERNEL_ACCOUNT);
	err = -ENOMEM;
	if (r->pages)
		err = reg ? clanq_kregion_pin(ctx, r, c->addr & PAGE_MASK, nr) :
			    clanq_kregion_alloc_pages(ctx, r, nr);
	if (err) {
		clanq_kregion_put(r);
		return ERR_PTR(err);
	}
	return r;
}

int clanq_ioctl_region_create(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_region_create *c = arg;
	bool reg = c->flags & CLANQ_REGION_REGISTER;
	struct clanq_nic *nic = ctx->nic;
	struct clanq_kregion *r;
	u64 end;
	int err;

	unsigned long max_bytes = READ_ONCE(clanq_max_region_bytes);

	if (!c->size) {
		clanq_uerr(ctx, "REGION_CREATE: size 0");
		return -EINVAL;
	}
	if (c->size > max_bytes) {
		clanq_ulimit(ctx, "REGION_CREATE: size %llu is over max_region_bytes (%lu)",
			     c->size, max_bytes);
		return -EINVAL;
	}
	if (reg ? !c->addr || check_add_overflow(c->addr, c->size, &end) ||
	    end > TASK_SIZE : c->addr) {
		clanq_uerr(ctx, "REGION_CREATE: addr %#llx size %llu is not %s",
			   c->addr, c->size, reg ? "user memory" : "0 for an allocation");
		return -EINVAL;
	}

	r = clanq_kregion_new(ctx, c);
	if (IS_ERR(r))
		return PTR_ERR(r);

	mutex_lock(&ctx->lock);
	err = -ENOSPC;
	if (ctx->nr_regions >= READ_ONCE(clanq_max_regions)) {
		clanq_ulimit(ctx, "REGION_CREATE: context has %u regions already: max_regions",
			     ctx->nr_regions);
		goto err_unlock;
	}
	if (r->map.mmap) {
		err = clanq_ctx_mmap_add(ctx, &r->map);
		if (err)
			goto err_unlock;
	}
	/* cyclic, as endpoint ids: a stale id names nobody for a long while */
	err = xa_alloc_cyclic(&nic->regions, &r->id, r, XA_LIMIT(1, S32_MAX),
			      &nic->next_region_id, GFP_KERNEL_ACCOUNT);
	if (err < 0) {
		if (r->map.mmap)
			clanq_ctx_mmap_del(ctx, &r->map);
		goto err_unlock;
	}
	list_add_tail(&r->ctx_node, &ctx->regions);
	ctx->nr_regions++;
	c->id = r->id;
	c->mmap_offset = 0;
	c->mmap_size = 0;
	if (r->map.mmap) {
		c->mmap_offset = clanq_map_offset(&r->map);
		c->mmap_size = (u64)r->nr_pages << PAGE_SHIFT;
	}
	mutex_unlock(&ctx->lock);
	return 0;

err_unlock:
	mutex_unlock(&ctx->lock);
	clanq_kregion_put(r);
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_region_create);

/*
 * Unpublish, revoke, drop the owner's reference. Peers no longer find it,
 * the owner can no longer map it; mappings and requests that still hold
 * references keep the pages.
 */
void clanq_kregion_free(struct clanq_kregion *r)
{
	struct clanq_ctx *ctx = r->ctx;

	lockdep_assert_held(&ctx->lock);
	xa_erase(&r->nic->regions, r->id);
	if (r->map.mmap)
		clanq_ctx_mmap_del(ctx, &r->map);
	list_del_init(&r->ctx_node);
	ctx->nr_regions--;
	clanq_kap_revoke_all(r);
	/* importers on other hosts: no write lands once this returns */
	if (smp_load_acquire(&r->exported))
		clanq_wire_region_gone(r);
	clanq_kregion_tw_kill(r);
	atomic64_inc(&r->nic->stats.regions_revoked);
	/* revoked: no importer touches the memory any more */
	clanq_kregion_mem_put(r);
	clanq_kregion_put(r);
}

int clanq_ioctl_region_free(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_region_free *f = arg;
	struct clanq_kregion *r;

	mutex_lock(&ctx->lock);
	r = clanq_kregion_lookup_owned(ctx, f->id);
	if (r) {
		clanq_kregion_free(r);
		clanq_kregion_put(r);
	}
	mutex_unlock(&ctx->lock);
	if (!r)
		clanq_uerr(ctx, "REGION_FREE: no region %u in this context", f->id);
	return r ? 0 : -ENOENT;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_region_free);

int clanq_ioctl_region_export(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_region_export *e = arg;
	struct clanq_kregion *r;
	int err = 0;

	if (!e->rights || (e->rights & ~CLANQ_RIGHTS_ALL)) {
		clanq_uerr(ctx, "REGION_EXPORT: rights %#x: want some of %#x",
			   e->rights, CLANQ_RIGHTS_ALL);
		return -EINVAL;
	}
	mutex_lock(&ctx->lock);
	r = clanq_kregion_lookup_owned(ctx, e->id);
	if (!r)
		err = -ENOENT;
	else if (r->exported)
		err = -EBUSY;
	else
		err = clanq_kregion_tw_export(ctx, r);	/* it says why */
	if (!err) {
		/* never 0, so a zeroed import struct names nothing */
		do {
			r->key = get_random_u64();
		} while (!r->key);
		/* ids stay below 2^31 (REGION_CREATE): no two keys alike */
		if (e->flags & CLANQ_EXPORT_KEY_NAMES_REGION)
			r->key = (u64)r->id << 32 |
				 (lower_32_bits(r->key) ?: 1);
		r->rights = e->rights;
		e->key = r->key;
		/* importers read key and rights after seeing exported */
		smp_store_release(&r->exported, true);
	}
	mutex_unlock(&ctx->lock);
	clanq_kregion_put(r);
	if (err == -EBUSY || err == -ENOENT)
		clanq_uerr(ctx, "REGION_EXPORT: region %u: %s", e->id,
			   err == -EBUSY ? "exported already" : "not in this context");
	return err;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ioctl_region_export);
