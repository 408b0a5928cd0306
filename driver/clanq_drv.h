/* SPDX-License-Identifier: GPL-2.0 */
/*
 * clanq driver internals: the objects every resource file shares.
 *
 * Lifetime: a clanq_nic lives from module load to unload; its misc device
 * is deregistered before it is freed, and the misc core holds the module
 * while any file is open, so an open context never outlives its NIC. A
 * clanq_ctx is one open() of /dev/clanqN and owns everything created
 * through that file.
 */
#ifndef _CLANQ_DRV_H
#define _CLANQ_DRV_H

#include <linux/atomic.h>
#include <linux/miscdevice.h>
#include <linux/types.h>
#include <uapi/clanq.h>

#define CLANQ_MAX_NICS	16

/* A soft NIC: one node of the clanq network, exposed as /dev/clanqN. */
struct clanq_nic {
	struct miscdevice misc;
	char name[16];
	unsigned int index;	/* N in /dev/clanqN */
	u32 node;		/* node id carried in every address */
	atomic_t nr_contexts;
	atomic64_t nr_ioctls;	/* driver entries through ioctl */
};

/* One open file of a NIC: the owner of every object it creates. */
struct clanq_ctx {
	struct clanq_nic *nic;
	pid_t tgid;		/* creator, for messages only */
};

/* nic.c */
int clanq_nics_create(unsigned int nr, u32 node_base);
void clanq_nics_destroy(void);
unsigned int clanq_nr_nics(void);
struct clanq_nic *clanq_nic_from_misc(struct miscdevice *misc);

/* context.c */
struct clanq_ctx *clanq_ctx_create(struct clanq_nic *nic);
void clanq_ctx_destroy(struct clanq_ctx *ctx);

/* main.c */
extern const struct file_operations clanq_fops;

/*
 * Anything user space can trigger is logged rate-limited, and says which
 * device and which call refused what.
 */
#define clanq_uerr(ctx, fmt, ...)					\
({									\
	const struct clanq_ctx *__ctx = (ctx);				\
	pr_notice_ratelimited("%s: pid %d: " fmt "\n",			\
			      __ctx->nic->name, __ctx->tgid, ##__VA_ARGS__);	\
})

#endif /* _CLANQ_DRV_H */
