// SPDX-License-Identifier: GPL-2.0
/*
 * The soft NIC: one node of the clanq network per /dev/clanqN.
 *
 * A real CLAN NIC is one node on a switched network. Here one kernel may
 * host several, so that multi-node scenarios run on one host (and in one
 * test VM); each gets its own node id, and every address names a node.
 */
#include <linux/module.h>
#include <linux/slab.h>

#include "clanq_drv.h"

static struct clanq_nic **clanq_nics;
static unsigned int clanq_nics_nr;

unsigned int clanq_nr_nics(void)
{
	return clanq_nics_nr;
}

struct clanq_nic *clanq_nic_from_misc(struct miscdevice *misc)
{
	return container_of(misc, struct clanq_nic, misc);
}

static struct clanq_nic *clanq_nic_create(unsigned int index, u32 node)
{
	struct clanq_nic *nic;
	int err;

	nic = kzalloc(sizeof(*nic), GFP_KERNEL);
	if (!nic)
		return ERR_PTR(-ENOMEM);
	nic->index = index;
	nic->node = node;
	snprintf(nic->name, sizeof(nic->name), "clanq%u", index);
	atomic_set(&nic->nr_contexts, 0);
	atomic64_set(&nic->nr_ioctls, 0);

	nic->misc.minor = MISC_DYNAMIC_MINOR;
	nic->misc.name = nic->name;
	nic->misc.fops = &clanq_fops;
	/*
	 * Open to every user, as /dev/infiniband/uverbs* usually is: what a
	 * context may allocate or pin is bounded per context and accounted
	 * to its owner, not gated by the device node's mode.
	 */
	nic->misc.mode = 0666;
	err = misc_register(&nic->misc);
	if (err) {
		pr_err("clanq: cannot register /dev/%s: %d\n", nic->name, err);
		kfree(nic);
		return ERR_PTR(err);
	}
	pr_info("%s: soft NIC up, node %u\n", nic->name, node);
	return nic;
}

static void clanq_nic_destroy(struct clanq_nic *nic)
{
	/*
	 * misc_deregister() runs from module exit only, and the module cannot
	 * be unloaded while a file is open (fops->owner), so no context
	 * still points at this NIC.
	 */
	misc_deregister(&nic->misc);
	WARN_ON(atomic_read(&nic->nr_contexts));
	kfree(nic);
}

int clanq_nics_create(unsigned int nr, u32 node_base)
{
	unsigned int i;

	clanq_nics = kcalloc(nr, sizeof(*clanq_nics), GFP_KERNEL);
	if (!clanq_nics)
		return -ENOMEM;
	for (i = 0; i < nr; i++) {
		struct clanq_nic *nic = clanq_nic_create(i, node_base + i);

		if (IS_ERR(nic)) {
			clanq_nics_destroy();
			return PTR_ERR(nic);
		}
		clanq_nics[i] = nic;
		clanq_nics_nr = i + 1;
	}
	return 0;
}

void clanq_nics_destroy(void)
{
	while (clanq_nics_nr)
		clanq_nic_destroy(clanq_nics[--clanq_nics_nr]);
	kfree(clanq_nics);
	clanq_nics = NULL;
}
