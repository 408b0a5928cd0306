// SPDX-License-Identifier: GPL-2.0
/*
 * The ioctl dispatcher every system call of every clanq file goes
 * through, and the context's own table.
 *
 * One rule, enforced here and not in each handler: the argument is
 * copied into kernel memory once, checked for what every command shares
 * (flag bits it does not define, reserved words that are not zero), and
 * the handler validates and uses only that copy; the result is copied
 * back once. Commands are matched on the full 32-bit number (type, nr,
 * size and direction), so a caller built against a different struct size
 * gets -ENOTTY, never a short or long copy.
 */
#include <linux/build_bug.h>
#include <linux/nospec.h>
#include <linux/stddef.h>
#include <linux/uaccess.h>

#include "clanq_drv.h"

/* The prologue every command shares: flags it defines, reserved zero. */
static int clanq_ioctl_check(const struct clanq_ioctl_desc *desc,
			     struct clanq_ctx *ctx, const void *arg,
			     size_t size)
{
	u32 flags;

	if (desc->flags_off != CLANQ_IOCTL_FLAGS_NONE) {
		memcpy(&flags, arg + desc->flags_off, sizeof(flags));
		if (flags & ~desc->flags_ok) {
			clanq_uerr(ctx, "%s: flags %#x: unknown bits %#x",
				   desc->name, flags, flags & ~desc->flags_ok);
			return -EINVAL;
		}
	}
	if (!clanq_zero(arg + desc->reserved_off, size - desc->reserved_off)) {
		clanq_uerr(ctx, "%s: reserved fields must be zero", desc->name);
		return -EINVAL;
	}
	return 0;
}

/**
 * clanq_ioctl_dispatch() - run one ioctl of a clanq file
 * @table: the file's commands, indexed by _IOC_NR()
 * @n: entries in @table
 * @obj: what the handlers act on (a context, an evq)
 * @ctx: the context @obj belongs to, for messages
 * @cmd: as passed to ioctl()
 * @uarg: the user's argument pointer
 *
 * Return: the handler's result, -ENOTTY for a command not in @table,
 * -EFAULT, or -EINVAL from the shared prologue.
 */
long clanq_ioctl_dispatch(const struct clanq_ioctl_desc *table, size_t n,
			  void *obj, struct clanq_ctx *ctx, unsigned int cmd,
			  unsigned long uarg)
{
	void __user *uptr = (void __user *)uarg;
	const struct clanq_ioctl_desc *desc;
	union clanq_ioctl_arg arg;
	unsigned int nr = _IOC_NR(cmd);
	size_t size = _IOC_SIZE(cmd);
	u64 seq;
	int ret;

	if (_IOC_TYPE(cmd) != CLANQ_IOC_MAGIC || nr >= n)
		return -ENOTTY;
	desc = &table[array_index_nospec(nr, n)];
	if (!desc->fn || desc->cmd != cmd)
		return -ENOTTY;
	/* cmd matched a table entry, so size is that of a union member */
	if (WARN_ON_ONCE(size > sizeof(arg) || desc->reserved_off > size))
		return -ENOTTY;

	if (copy_from_user(&arg, uptr, size))
		return -EFAULT;
	seq = READ_ONCE(ctx->err_seq);
	ret = clanq_ioctl_check(desc, ctx, &arg, size);
	if (!ret)
		ret = desc->fn(obj, &arg);
	if (ret) {
		/* the refusal said why (CLANQ_IOC_LAST_ERROR): and with what */
		if (READ_ONCE(ctx->err_seq) != seq)
			clanq_ctx_noted(ctx, ret);
		return ret;
	}
	if (copy_to_user(uptr, &arg, size))
		return -EFAULT;
	return 0;
}

static int clanq_ioctl_query(void *obj, void *arg)
{
	struct clanq_ctx *ctx = obj;
	struct clanq_ioc_query *q = arg;

	q->abi_version = CLANQ_ABI_VERSION;
	q->node = ctx->nic->node;
	q->nr_nics = clanq_nr_nics();
	/* this call is an entry too, but not one the caller was asking about */
	q->ctx_entries = atomic64_read(&ctx->entries) - 1;
	return 0;
}

/* The context fd's commands; the evq fd has its own table (evq.c). */
static const struct clanq_ioctl_desc clanq_ctx_ioctls[] = {
	CLANQ_IOCTL(QUERY, query, clanq_ioctl_query, 0, reserved),
	CLANQ_IOCTL(EP_CREATE, ep_create, clanq_ioctl_ep_create, CLANQ_EP_FLAGS,
		    reserved),
	CLANQ_IOCTL(EP_DESTROY, ep_destroy, clanq_ioctl_ep_destroy, 0, reserved),
	CLANQ_IOCTL(OOB_SEND, oob_send, clanq_ioctl_oob_send, 0, reserved),
	CLANQ_IOCTL(EVQ_CREATE, evq_create, clanq_ioctl_evq_create, 0, reserved0),
	CLANQ_IOCTL(REGION_CREATE, region_create, clanq_ioctl_region_create,
		    CLANQ_REGION_REGISTER, reserved),
	CLANQ_IOCTL(REGION_FREE, region_free, clanq_ioctl_region_free, 0, reserved),
	CLANQ_IOCTL(REGION_EXPORT, region_export, clanq_ioctl_region_export,
		    CLANQ_EXPORT_FLAGS, reserved0),
	CLANQ_IOCTL(AP_IMPORT, ap_import, clanq_ioctl_ap_import, CLANQ_AP_FLAGS,
		    reserved0),
	CLANQ_IOCTL(AP_CLOSE, ap_close, clanq_ioctl_ap_close, 0, reserved),
	CLANQ_IOCTL(RDMA_KICK, rdma_kick, clanq_ioctl_rdma_kick, 0, reserved),
	CLANQ_IOCTL(TW_CREATE, tw_create, clanq_ioctl_tw_create, CLANQ_TW_FLAGS,
		    reserved0),
	CLANQ_IOCTL(TW_ARM, tw_ctl, clanq_ioctl_tw_arm, 0, reserved),
	CLANQ_IOCTL(TW_DISARM, tw_ctl, clanq_ioctl_tw_disarm, 0, reserved),
	CLANQ_IOCTL(TW_DESTROY, tw_ctl, clanq_ioctl_tw_destroy, 0, reserved),
	CLANQ_IOCTL(TW_WAIT, tw_wait, clanq_ioctl_tw_wait, CLANQ_TW_WAIT_FLAGS,
		    reserved0),
	CLANQ_IOCTL(AP_FLUSH, ap_flush, clanq_ioctl_ap_flush, 0, reserved0),
	CLANQ_IOCTL(EP_STATS, ep_stats, clanq_ioctl_ep_stats, 0, reserved),
	CLANQ_IOCTL(WIRE_BIND, wire_bind, clanq_ioctl_wire_bind, 0, reserved),
	CLANQ_IOCTL(PEER_ADD, peer, clanq_ioctl_peer_add, 0, reserved),
	CLANQ_IOCTL(PEER_DEL, peer, clanq_ioctl_peer_del, 0, reserved),
	CLANQ_IOCTL(PEER_LIST, peer_list, clanq_ioctl_peer_list, 0, reserved0),
	CLANQ_IOCTL(LAST_ERROR, last_error, clanq_ioctl_last_error, 0, reserved),
};

long clanq_ctx_ioctl(struct clanq_ctx *ctx, unsigned int cmd, unsigned long uarg)
{
	return clanq_ioctl_dispatch(clanq_ctx_ioctls, ARRAY_SIZE(clanq_ctx_ioctls),
				    ctx, ctx, cmd, uarg);
}
