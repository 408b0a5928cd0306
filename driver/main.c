// SPDX-License-Identifier: GPL-2.0
/*
 * clanq: module entry, the misc devices' file operations, and the ioctl
 * dispatcher every resource's system calls go through.
 *
 * Ioctls follow one rule, enforced here and not in each handler: the
 * argument is copied into kernel memory once, the handler validates and
 * uses only that copy, and the result is copied back once. Commands are
 * matched on the full 32-bit number (type, nr, size and direction), so a
 * caller built against a different struct size gets -ENOTTY, never a
 * short or long copy.
 */
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/uaccess.h>

#include "clanq_drv.h"

static unsigned int nr_nics = 1;
module_param(nr_nics, uint, 0444);
MODULE_PARM_DESC(nr_nics, "Soft NICs (nodes) to create, 1.." __stringify(CLANQ_MAX_NICS));

static unsigned int node_base;
module_param(node_base, uint, 0444);
MODULE_PARM_DESC(node_base, "Node id of /dev/clanq0; clanqN is node_base + N");

unsigned int clanq_max_oob_slots = 4096;
module_param_named(max_oob_slots, clanq_max_oob_slots, uint, 0644);
MODULE_PARM_DESC(max_oob_slots, "Longest OOB receive queue an endpoint may ask for");

unsigned int clanq_max_eps = 4096;
module_param_named(max_eps, clanq_max_eps, uint, 0644);
MODULE_PARM_DESC(max_eps, "Endpoints one context may hold");

unsigned int clanq_max_evq_regs = 16384;
module_param_named(max_evq_regs, clanq_max_evq_regs, uint, 0644);
MODULE_PARM_DESC(max_evq_regs, "Registrations one event queue may hold");

unsigned long clanq_max_ctx_bytes = 64ul << 20;
module_param_named(max_ctx_bytes, clanq_max_ctx_bytes, ulong, 0644);
MODULE_PARM_DESC(max_ctx_bytes, "Driver memory (segments, allocated regions) one context may hold");

unsigned int clanq_max_rdma_slots = 4096;
module_param_named(max_rdma_slots, clanq_max_rdma_slots, uint, 0644);
MODULE_PARM_DESC(max_rdma_slots, "Longest RDMA request or completion queue an endpoint may ask for");

unsigned int clanq_max_regions = 4096;
module_param_named(max_regions, clanq_max_regions, uint, 0644);
MODULE_PARM_DESC(max_regions, "Regions one context may hold");

unsigned int clanq_max_aps = 4096;
module_param_named(max_aps, clanq_max_aps, uint, 0644);
MODULE_PARM_DESC(max_aps, "Apertures one context may hold");

unsigned long clanq_max_region_bytes = 256ul << 20;
module_param_named(max_region_bytes, clanq_max_region_bytes, ulong, 0644);
MODULE_PARM_DESC(max_region_bytes, "Largest region (allocated or registered)");

unsigned int clanq_rdma_max_xfer = 64u << 10;
module_param_named(rdma_max_xfer, clanq_rdma_max_xfer, uint, 0644);
MODULE_PARM_DESC(rdma_max_xfer, "Bytes the RDMA engine writes for one queue before it serves the next (at least 512)");
/* KUnit sets it to split transfers in a test, and restores it */
EXPORT_SYMBOL_CLANQ_KUNIT(clanq_rdma_max_xfer);

static int clanq_ioctl_query(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_query *q = arg;

	if (q->flags || !clanq_zero(q->reserved, sizeof(q->reserved))) {
		clanq_uerr(ctx, "QUERY: flags and reserved fields must be zero");
		return -EINVAL;
	}
	q->abi_version = CLANQ_ABI_VERSION;
	q->node = ctx->nic->node;
	q->nr_nics = clanq_nr_nics();
	/* this call is an entry too, but not one the caller was asking about */
	q->ctx_entries = atomic64_read(&ctx->entries) - 1;
	return 0;
}

/* Every ioctl argument struct, so one stack buffer fits them all. */
union clanq_ioctl_arg {
	struct clanq_query query;
	struct clanq_ep_create ep_create;
	struct clanq_ep_destroy ep_destroy;
	struct clanq_oob_send oob_send;
	struct clanq_evq_create evq_create;
	struct clanq_evq_reg evq_reg;
	struct clanq_evq_wait evq_wait;
	struct clanq_region_create region_create;
	struct clanq_region_free region_free;
	struct clanq_region_export region_export;
	struct clanq_ap_import ap_import;
	struct clanq_ap_close ap_close;
	struct clanq_rdma_kick rdma_kick;
};

long clanq_ioctl_dispatch(const struct clanq_ioctl_desc *table, size_t n,
			  void *obj, unsigned int cmd, unsigned long uarg)
{
	void __user *uptr = (void __user *)uarg;
	const struct clanq_ioctl_desc *desc;
	union clanq_ioctl_arg arg;
	unsigned int nr = _IOC_NR(cmd);
	size_t size = _IOC_SIZE(cmd);
	int ret;

	if (_IOC_TYPE(cmd) != CLANQ_IOC_MAGIC || nr >= n)
		return -ENOTTY;
	desc = &table[array_index_nospec(nr, n)];
	if (!desc->fn || desc->cmd != cmd)
		return -ENOTTY;
	/* cmd matched a table entry, so size is that of a union member */
	if (WARN_ON_ONCE(size > sizeof(arg)))
		return -ENOTTY;

	if (copy_from_user(&arg, uptr, size))
		return -EFAULT;
	ret = desc->fn(obj, &arg);
	if (ret)
		return ret;
	if (copy_to_user(uptr, &arg, size))
		return -EFAULT;
	return 0;
}

/* indexed by _IOC_NR(); .cmd must then match all 32 bits */
static const struct clanq_ioctl_desc clanq_ioctls[] = {
	[_IOC_NR(CLANQ_IOC_QUERY)] = { CLANQ_IOC_QUERY, clanq_ioctl_query },
	[_IOC_NR(CLANQ_IOC_EP_CREATE)] = { CLANQ_IOC_EP_CREATE, clanq_ioctl_ep_create },
	[_IOC_NR(CLANQ_IOC_EP_DESTROY)] = { CLANQ_IOC_EP_DESTROY, clanq_ioctl_ep_destroy },
	[_IOC_NR(CLANQ_IOC_OOB_SEND)] = { CLANQ_IOC_OOB_SEND, clanq_ioctl_oob_send },
	[_IOC_NR(CLANQ_IOC_EVQ_CREATE)] = { CLANQ_IOC_EVQ_CREATE, clanq_ioctl_evq_create },
	[_IOC_NR(CLANQ_IOC_REGION_CREATE)] = { CLANQ_IOC_REGION_CREATE, clanq_ioctl_region_create },
	[_IOC_NR(CLANQ_IOC_REGION_FREE)] = { CLANQ_IOC_REGION_FREE, clanq_ioctl_region_free },
	[_IOC_NR(CLANQ_IOC_REGION_EXPORT)] = { CLANQ_IOC_REGION_EXPORT, clanq_ioctl_region_export },
	[_IOC_NR(CLANQ_IOC_AP_IMPORT)] = { CLANQ_IOC_AP_IMPORT, clanq_ioctl_ap_import },
	[_IOC_NR(CLANQ_IOC_AP_CLOSE)] = { CLANQ_IOC_AP_CLOSE, clanq_ioctl_ap_close },
	[_IOC_NR(CLANQ_IOC_RDMA_KICK)] = { CLANQ_IOC_RDMA_KICK, clanq_ioctl_rdma_kick },
};

static void clanq_count_entry(struct clanq_ctx *ctx)
{
	atomic64_inc(&ctx->entries);
	atomic64_inc(&ctx->nic->stats.entries);
}

static long clanq_ioctl(struct file *file, unsigned int cmd, unsigned long uarg)
{
	struct clanq_ctx *ctx = file->private_data;

	clanq_count_entry(ctx);
	return clanq_ioctl_dispatch(clanq_ioctls, ARRAY_SIZE(clanq_ioctls), ctx,
				    cmd, uarg);
}

static int clanq_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct clanq_ctx *ctx = file->private_data;

	clanq_count_entry(ctx);
	return clanq_ctx_mmap(ctx, vma);
}

static int clanq_open(struct inode *inode, struct file *file)
{
	/* the misc core leaves our miscdevice in private_data */
	struct clanq_nic *nic = clanq_nic_from_misc(file->private_data);
	struct clanq_ctx *ctx;

	ctx = clanq_ctx_create(nic);
	if (!ctx)
		return -ENOMEM;
	file->private_data = ctx;
	/* our mappings live in the context's own address space (context.c) */
	file->f_mapping = ctx->inode->i_mapping;
	return nonseekable_open(inode, file);
}

static int clanq_release(struct inode *inode, struct file *file)
{
	clanq_ctx_put(file->private_data);
	return 0;
}

const struct file_operations clanq_fops = {
	.owner		= THIS_MODULE,
	.open		= clanq_open,
	.release	= clanq_release,
	.unlocked_ioctl	= clanq_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= clanq_mmap,
};

static int __init clanq_init(void)
{
	int err;

	if (nr_nics < 1 || nr_nics > CLANQ_MAX_NICS) {
		pr_err("clanq: nr_nics=%u, must be 1..%u\n", nr_nics,
		       CLANQ_MAX_NICS);
		return -EINVAL;
	}
	if (node_base > CLANQ_NODE_INVALID - nr_nics) {
		pr_err("clanq: node_base=%u leaves no room for %u node ids\n",
		       node_base, nr_nics);
		return -EINVAL;
	}
	err = clanq_fs_init();
	if (err)
		return err;
	err = clanq_nics_create(nr_nics, node_base);
	if (err)
		clanq_fs_exit();
	return err;
}

static void __exit clanq_exit(void)
{
	clanq_nics_destroy();
	clanq_fs_exit();
	/* endpoints are freed after an RCU grace period */
	rcu_barrier();
}

module_init(clanq_init);
module_exit(clanq_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("clanq: CLAN-style user-level networking over a soft NIC");
MODULE_AUTHOR("The clanq developers");
