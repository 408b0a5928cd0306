// SPDX-License-Identifier: GPL-2.0
/*
 * clanq: module entry, the misc devices' file operations, and the ioctl
 * dispatcher that every resource's system calls go through.
 *
 * Ioctls follow one rule, enforced here and not in each handler: the
 * argument is copied into kernel memory once, the handler validates and
 * uses only that copy, and the result is copied back once. Commands are
 * matched on the full 32-bit number (type, nr, size and direction), so a
 * caller built against a different struct size gets -ENOTTY, never a
 * short or long copy.
 */
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "clanq_drv.h"

static unsigned int nr_nics = 1;
module_param(nr_nics, uint, 0444);
MODULE_PARM_DESC(nr_nics, "Soft NICs (nodes) to create, 1.." __stringify(CLANQ_MAX_NICS));

static unsigned int node_base;
module_param(node_base, uint, 0444);
MODULE_PARM_DESC(node_base, "Node id of /dev/clanq0; clanqN is node_base + N");

static int clanq_ioctl_query(struct clanq_ctx *ctx, void *arg)
{
	struct clanq_query *q = arg;

	if (q->flags) {
		clanq_uerr(ctx, "QUERY: unknown flags %#x", q->flags);
		return -EINVAL;
	}
	if (memchr_inv(q->reserved, 0, sizeof(q->reserved))) {
		clanq_uerr(ctx, "QUERY: reserved fields must be zero");
		return -EINVAL;
	}
	q->abi_version = CLANQ_ABI_VERSION;
	q->node = ctx->nic->node;
	q->nr_nics = clanq_nr_nics();
	return 0;
}

/* Every ioctl argument struct, so one stack buffer fits them all. */
union clanq_ioctl_arg {
	struct clanq_query query;
};

struct clanq_ioctl_desc {
	unsigned int cmd;
	int (*fn)(struct clanq_ctx *ctx, void *arg);
};

/* indexed by _IOC_NR(); .cmd must then match all 32 bits */
static const struct clanq_ioctl_desc clanq_ioctls[] = {
	[_IOC_NR(CLANQ_IOC_QUERY)] = { CLANQ_IOC_QUERY, clanq_ioctl_query },
};

static long clanq_ioctl(struct file *file, unsigned int cmd, unsigned long uarg)
{
	struct clanq_ctx *ctx = file->private_data;
	void __user *uptr = (void __user *)uarg;
	const struct clanq_ioctl_desc *desc;
	union clanq_ioctl_arg arg;
	unsigned int nr = _IOC_NR(cmd);
	size_t size = _IOC_SIZE(cmd);
	int ret;

	atomic64_inc(&ctx->nic->nr_ioctls);
	if (_IOC_TYPE(cmd) != CLANQ_IOC_MAGIC || nr >= ARRAY_SIZE(clanq_ioctls))
		return -ENOTTY;
	desc = &clanq_ioctls[array_index_nospec(nr, ARRAY_SIZE(clanq_ioctls))];
	if (!desc->fn || desc->cmd != cmd)
		return -ENOTTY;
	/* cmd matched a table entry, so size is that of a union member */
	if (WARN_ON_ONCE(size > sizeof(arg)))
		return -ENOTTY;

	if (copy_from_user(&arg, uptr, size))
		return -EFAULT;
	ret = desc->fn(ctx, &arg);
	if (ret)
		return ret;
	if (copy_to_user(uptr, &arg, size))
		return -EFAULT;
	return 0;
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
	return nonseekable_open(inode, file);
}

static int clanq_release(struct inode *inode, struct file *file)
{
	clanq_ctx_destroy(file->private_data);
	return 0;
}

const struct file_operations clanq_fops = {
	.owner		= THIS_MODULE,
	.open		= clanq_open,
	.release	= clanq_release,
	.unlocked_ioctl	= clanq_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
};

static int __init clanq_init(void)
{
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
	return clanq_nics_create(nr_nics, node_base);
}

static void __exit clanq_exit(void)
{
	clanq_nics_destroy();
}

module_init(clanq_init);
module_exit(clanq_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("clanq: CLAN-style user-level networking over a soft NIC");
MODULE_AUTHOR("The clanq developers");
