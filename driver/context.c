// SPDX-License-Identifier: GPL-2.0
/*
 * Contexts: one per open() of /dev/clanqN.
 *
 * Everything a process creates lives in its context and is torn down by
 * clanq_ctx_destroy() when the last reference to the file goes, which is
 * also what happens when the process is killed: there is no other path
 * by which a process's objects are freed.
 */
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "clanq_drv.h"

struct clanq_ctx *clanq_ctx_create(struct clanq_nic *nic)
{
	struct clanq_ctx *ctx;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return NULL;
	ctx->nic = nic;
	ctx->tgid = task_tgid_vnr(current);
	atomic_inc(&nic->nr_contexts);
	return ctx;
}

void clanq_ctx_destroy(struct clanq_ctx *ctx)
{
	atomic_dec(&ctx->nic->nr_contexts);
	kfree(ctx);
}
