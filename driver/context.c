// SPDX-License-Identifier: GPL-2.0
/*
 * Contexts: one per open() of /dev/clanqN.
 *
 * Everything a process creates lives in its context. The context file and
 * each evq file hold a reference; when the last goes, the endpoints,
 * apertures and regions are destroyed, in that order (an endpoint's
 * request in the engine refers to both others). There is no other path
 * by which a process's objects are freed, so exit, kill and close all
 * take this one.
 *
 * Address space: every context has an inode of its own, from a small
 * pseudo filesystem, and the file's f_mapping points at it (as DRM does
 * with its anonymous inode), so that a mapping can be zapped in
 * whichever processes map it (mapkey.c).
 *
 * The mmap keys of the context's objects, and mmap() of the context fd,
 * are mapkey.c's.
 */
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/pid.h>
#include <linux/pseudo_fs.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "clanq_drv.h"

#define CLANQ_FS_MAGIC		0xc1a9c1a9

static struct vfsmount *clanq_mnt;

static int clanq_fs_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, CLANQ_FS_MAGIC) ? 0 : -ENOMEM;
}

/*
 * No .owner: the mount would pin the module for as long as it exists,
 * i.e. forever. It is internal (never registered, never mounted from
 * user space) and unmounted in module exit, when no context is left.
 */
static struct file_system_type clanq_fs_type = {
	.name			= "clanq",
	.init_fs_context	= clanq_fs_init_fs_context,
	.kill_sb		= kill_anon_super,
};

int clanq_fs_init(void)
{
	clanq_mnt = kern_mount(&clanq_fs_type);
	return PTR_ERR_OR_ZERO(clanq_mnt);
}

void clanq_fs_exit(void)
{
	kern_unmount(clanq_mnt);
}

VISIBLE_IF_KUNIT
struct clanq_ctx *clanq_ctx_create(struct clanq_nic *nic)
{
	struct clanq_ctx *ctx;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return NULL;
	ctx->budget = clanq_budget_create();
	if (!ctx->budget)
		goto err_ctx;
	ctx->inode = alloc_anon_inode(clanq_mnt->mnt_sb);
	if (IS_ERR(ctx->inode))
		goto err_budget;
	kref_init(&ctx->ref);
	ctx->nic = nic;
	ctx->tgid = task_tgid_vnr(current);
	ctx->id = atomic64_inc_return(&nic->next_ctx_id);
	ctx->uid = current_euid();
	ctx->pid = get_pid(task_tgid(current));
	get_task_comm(ctx->comm, current);
	mutex_init(&ctx->lock);
	spin_lock_init(&ctx->err_lock);
	INIT_LIST_HEAD(&ctx->eps);
	INIT_LIST_HEAD(&ctx->regions);
	clanq_engine_ctx_init(&ctx->engine);
	xa_init_flags(&ctx->mmaps, XA_FLAGS_ALLOC1);
	xa_init_flags(&ctx->aps, XA_FLAGS_ALLOC1);
	xa_init_flags(&ctx->tws, XA_FLAGS_ALLOC1);
	atomic_inc(&nic->nr_contexts);
	/* listed once whole: debugfs may lock it and look from now on */
	mutex_lock(&nic->ctx_lock);
	list_add_tail(&ctx->nic_node, &nic->contexts);
	mutex_unlock(&nic->ctx_lock);
	return ctx;

err_budget:
	clanq_budget_put(ctx->budget, 0);
err_ctx:
	kfree(ctx);
	return NULL;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ctx_create);

/*
 * Note why a call of @ctx is being refused, for CLANQ_IOC_LAST_ERROR
 * (clanq_uerr() and clanq_ulimit() call this). Formatted outside the
 * lock; any context, as the refusals are.
 */
void clanq_ctx_note(struct clanq_ctx *ctx, const char *fmt, ...)
{
	char msg[CLANQ_ERR_MAX];
	unsigned long flags;
	va_list args;

	va_start(args, fmt);
	vscnprintf(msg, sizeof(msg), fmt, args);
	va_end(args);
	spin_lock_irqsave(&ctx->err_lock, flags);
	memcpy(ctx->err_msg, msg, sizeof(msg));
	ctx->err = 0;
	ctx->err_seq++;
	spin_unlock_irqrestore(&ctx->err_lock, flags);
}

/* The call the last note was for returned @err (the ioctl dispatcher). */
void clanq_ctx_noted(struct clanq_ctx *ctx, int err)
{
	unsigned long flags;

	spin_lock_irqsave(&ctx->err_lock, flags);
	ctx->err = err;
	spin_unlock_irqrestore(&ctx->err_lock, flags);
}

int clanq_ioctl_last_error(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_last_error *e = arg;
	unsigned long flags;

	spin_lock_irqsave(&ctx->err_lock, flags);
	e->seq = ctx->err_seq;
	e->err = ctx->err;
	memcpy(e->msg, ctx->err_msg, sizeof(e->msg));
	spin_unlock_irqrestore(&ctx->err_lock, flags);
	return 0;
}

void clanq_ctx_get(struct clanq_ctx *ctx)
{
	kref_get(&ctx->ref);
}

static void clanq_ctx_release(struct kref *ref)
{
	struct clanq_ctx *ctx = container_of(ref, struct clanq_ctx, ref);
	struct clanq_kregion *r, *rtmp;
	struct clanq_kep *ep, *tmp;
	struct clanq_kap *ap;
	unsigned long id;

	/*
	 * Off the NIC's list first: a debugfs reader holding nic->ctx_lock
	 * may still be looking at us, so we wait for it here. After that,
	 * no file refers to ctx any more: nobody else can take the lock.
	 */
	mutex_lock(&ctx->nic->ctx_lock);
	list_del(&ctx->nic_node);
	mutex_unlock(&ctx->nic->ctx_lock);
	mutex_lock(&ctx->lock);
	list_for_each_entry_safe(ep, tmp, &ctx->eps, ctx_node)
		clanq_kep_destroy(ep);
	xa_for_each(&ctx->aps, id, ap)
		clanq_kap_close(ap);
	list_for_each_entry_safe(r, rtmp, &ctx->regions, ctx_node)
		clanq_kregion_free(r);
	mutex_unlock(&ctx->lock);
	WARN_ON(!xa_empty(&ctx->mmaps));
	xa_destroy(&ctx->mmaps);
	xa_destroy(&ctx->aps);
	/* every tripwire died with its endpoint */
	WARN_ON(!xa_empty(&ctx->tws));
	xa_destroy(&ctx->tws);
	/* no VMA is left: each holds the file, which holds ctx */
	iput(ctx->inode);
	/* segments still mapped keep the budget (and their charge) alive */
	clanq_budget_put(ctx->budget, 0);
	mutex_destroy(&ctx->lock);
	put_pid(ctx->pid);
	atomic_dec(&ctx->nic->nr_contexts);
	kfree(ctx);
}

void clanq_ctx_put(struct clanq_ctx *ctx)
{
	kref_put(&ctx->ref, clanq_ctx_release);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_ctx_put);

/* A driver entry: what the no-system-call tests count (CLANQ_IOC_QUERY). */
void clanq_ctx_count_entry(struct clanq_ctx *ctx)
{
	atomic64_inc(&ctx->entries);
	atomic64_inc(&ctx->nic->stats.entries);
}

static long clanq_fop_ioctl(struct file *file, unsigned int cmd,
			    unsigned long uarg)
{
	struct clanq_ctx *ctx = file->private_data;

	clanq_ctx_count_entry(ctx);
	return clanq_ctx_ioctl(ctx, cmd, uarg);
}

static int clanq_fop_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct clanq_ctx *ctx = file->private_data;

	clanq_ctx_count_entry(ctx);
	return clanq_ctx_mmap(ctx, vma);
}

static int clanq_fop_open(struct inode *inode, struct file *file)
{
	/* the misc core leaves our miscdevice in private_data */
	struct clanq_nic *nic = clanq_nic_from_misc(file->private_data);
	struct clanq_ctx *ctx;

	ctx = clanq_ctx_create(nic);
	if (!ctx)
		return -ENOMEM;
	file->private_data = ctx;
	/* our mappings live in the context's own address space (above) */
	file->f_mapping = ctx->inode->i_mapping;
	return nonseekable_open(inode, file);
}

static int clanq_fop_release(struct inode *inode, struct file *file)
{
	clanq_ctx_put(file->private_data);
	return 0;
}

/* /dev/clanqN: each open() is a context. */
const struct file_operations clanq_fops = {
	.owner		= THIS_MODULE,
	.open		= clanq_fop_open,
	.release	= clanq_fop_release,
	.unlocked_ioctl	= clanq_fop_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= clanq_fop_mmap,
};
