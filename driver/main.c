// SPDX-License-Identifier: GPL-2.0
/*
 * clanq: module entry. The module parameters (the limits every context
 * lives within), and bringing the NICs up and down. Each NIC resource
 * has a file of its own; the system calls go through ioctl.c.
 *
 * Every limit is mode 0644: root may change it at run time in
 * /sys/module/clanq/parameters/, and it holds from the next call on
 * (each is read once per check, with READ_ONCE); what is already held
 * above a lowered limit stays. A call a limit refuses says so at notice
 * level, rate-limited, naming the parameter (clanq_ulimit()).
 */
#include <linux/module.h>

#include "clanq_drv.h"

static unsigned int nr_nics = 1;
module_param(nr_nics, uint, 0444);
MODULE_PARM_DESC(nr_nics, "Soft NICs (nodes) to create: /dev/clanq0.. (count, 1.."
		 __stringify(CLANQ_MAX_NICS) "; default 1; at load only)");

static unsigned int node_base;
module_param(node_base, uint, 0444);
MODULE_PARM_DESC(node_base, "Node id of /dev/clanq0; clanqN is node_base + N (default 0; at load only)");

unsigned int clanq_max_oob_slots = 4096;
module_param_named(max_oob_slots, clanq_max_oob_slots, uint, 0644);
MODULE_PARM_DESC(max_oob_slots, "Longest OOB receive queue an endpoint may ask for (messages of 64 bytes; default 4096)");

unsigned int clanq_max_eps = 4096;
module_param_named(max_eps, clanq_max_eps, uint, 0644);
MODULE_PARM_DESC(max_eps, "Endpoints one context may hold (count; default 4096)");

unsigned int clanq_max_evq_regs = 16384;
module_param_named(max_evq_regs, clanq_max_evq_regs, uint, 0644);
MODULE_PARM_DESC(max_evq_regs, "Registrations one event queue may hold (count; default 16384)");

unsigned int clanq_max_ep_regs = 16;
module_param_named(max_ep_regs, clanq_max_ep_regs, uint, 0644);
MODULE_PARM_DESC(max_ep_regs, "Event queues one endpoint may be registered on, which bounds the cost of one wake-up (count; default 16)");

unsigned int clanq_max_tripwires = 16384;
module_param_named(max_tripwires, clanq_max_tripwires, uint, 0644);
MODULE_PARM_DESC(max_tripwires, "Tripwires one context may hold, and one endpoint may own; each is also charged to max_ctx_bytes and max_user_bytes (count; default 16384)");

unsigned int clanq_max_oob_waiters = 1024;
module_param_named(max_oob_waiters, clanq_max_oob_waiters, uint, 0644);
MODULE_PARM_DESC(max_oob_waiters, "Threads one endpoint may have blocked in TW_WAIT with CLANQ_TW_WAIT_OOB: each is an entry its every wake-up walks (count; default 1024)");
EXPORT_SYMBOL_IF_KUNIT(clanq_max_oob_waiters);

unsigned long clanq_max_ctx_bytes = 128ul << 20;
module_param_named(max_ctx_bytes, clanq_max_ctx_bytes, ulong, 0644);
MODULE_PARM_DESC(max_ctx_bytes, "Driver memory one context may hold: segments, allocated regions, apertures, tripwires (bytes; default 134217728 = 128 MiB)");

unsigned long clanq_max_user_bytes = 256ul << 20;
module_param_named(max_user_bytes, clanq_max_user_bytes, ulong, 0644);
MODULE_PARM_DESC(max_user_bytes, "Driver memory all contexts of one user may hold, as for max_ctx_bytes; CAP_IPC_LOCK is exempt (bytes; default 268435456 = 256 MiB)");

unsigned int clanq_max_rdma_slots = 4096;
module_param_named(max_rdma_slots, clanq_max_rdma_slots, uint, 0644);
MODULE_PARM_DESC(max_rdma_slots, "Longest RDMA request or completion queue an endpoint may ask for (entries; default 4096)");

unsigned int clanq_max_regions = 65536;
module_param_named(max_regions, clanq_max_regions, uint, 0644);
MODULE_PARM_DESC(max_regions, "Regions one context may hold (count; default 65536)");

unsigned int clanq_max_aps = 65536;
module_param_named(max_aps, clanq_max_aps, uint, 0644);
MODULE_PARM_DESC(max_aps, "Apertures one context may hold (count; default 65536)");

unsigned long clanq_max_region_bytes = 256ul << 20;
module_param_named(max_region_bytes, clanq_max_region_bytes, ulong, 0644);
MODULE_PARM_DESC(max_region_bytes, "Largest region, allocated or registered (bytes; default 268435456 = 256 MiB)");

unsigned int clanq_rdma_max_xfer = 64u << 10;
module_param_named(rdma_max_xfer, clanq_rdma_max_xfer, uint, 0644);
MODULE_PARM_DESC(rdma_max_xfer, "Bytes the RDMA engine writes for one queue before it serves the next (bytes, at least 512; default 65536)");
/* KUnit sets it to split transfers in a test, and restores it */
EXPORT_SYMBOL_IF_KUNIT(clanq_rdma_max_xfer);

unsigned int clanq_rdma_window = CLANQ_RDMA_WINDOW;
module_param_named(rdma_window, clanq_rdma_window, uint, 0644);
MODULE_PARM_DESC(rdma_window, "Chunks of one queue the RDMA engine lets a wire to another host hold at once (1..16; default 16; 1: one chunk at a time, a round trip each)");
/* KUnit narrows it in a test, and restores it */
EXPORT_SYMBOL_IF_KUNIT(clanq_rdma_window);

bool clanq_rdma_inline = true;
module_param_named(rdma_inline, clanq_rdma_inline, bool, 0644);
MODULE_PARM_DESC(rdma_inline, "The RDMA doorbell runs the engine's turn in the caller when no other queue waits, instead of waking the engine thread (default Y)");

unsigned int clanq_rdma_poll_us;
module_param_named(rdma_poll_us, clanq_rdma_poll_us, uint, 0644);
MODULE_PARM_DESC(rdma_poll_us, "How long the RDMA engine keeps polling a queue after its last request before it lets go and needs a doorbell again (microseconds, at most 10000; default 0: at once)");

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
