// SPDX-License-Identifier: GPL-2.0
/*
 * The soft NIC: one node of the clanq network per /dev/clanqN.
 *
 * A real CLAN NIC is one node on a switched network. Here one kernel may
 * host several, so that multi-node scenarios run on one host (and in one
 * test VM); each gets its own node id, and every address names a node.
 * The NIC's identity, limits and counters are in sysfs,
 * /sys/class/misc/clanqN/ (stats.c), and again in debugfs
 * clanq/clanqN/stats; what each of its contexts holds in
 * clanq/clanqN/objects (debugfs.c).
 */
#include <linux/debugfs.h>
#include <linux/fault-inject.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "clanq_drv.h"

/*
 * fail_load=<interval>,<probability>,<space>,<times>, the kernel's fault
 * injection syntax (as fail_make_request=), on kernels built with
 * CONFIG_FAULT_INJECTION: fails steps of bringing the NICs up, in order
 * (build NIC 0 .. N-1, then register each), so that a test can show that
 * a load failing at any step leaves nothing behind.
 */
#ifdef CONFIG_FAULT_INJECTION
static char *fail_load;
module_param(fail_load, charp, 0400);
MODULE_PARM_DESC(fail_load, "Testing: fail NIC bring-up steps (interval,probability,space,times)");
static DECLARE_FAULT_ATTR(clanq_fail_load);

static void clanq_load_faults_init(void)
{
	if (!fail_load)
		return;
	setup_fault_attr(&clanq_fail_load, fail_load);
	clanq_fail_load.verbose = 0;	/* a stack dump would read as a splat */
}

static int clanq_load_step(void)
{
	return fail_load && should_fail(&clanq_fail_load, 1) ? -ENOMEM : 0;
}
#else
static void clanq_load_faults_init(void) { }
static int clanq_load_step(void) { return 0; }
#endif

static struct clanq_nic **clanq_nics;
static unsigned int clanq_nics_nr;
static struct dentry *clanq_debugfs;

/* Published with release once every NIC is built (clanq_nics_create()). */
unsigned int clanq_nr_nics(void)
{
	/* pairs with the release in clanq_nics_create() */
	return smp_load_acquire(&clanq_nics_nr);
}

struct clanq_nic *clanq_nic_from_misc(struct miscdevice *misc)
{
	return container_of(misc, struct clanq_nic, misc);
}

/* /dev/clanq@index, or NULL; as clanq_nic_by_node() */
struct clanq_nic *clanq_nic_by_index(unsigned int index)
{
	return index < clanq_nr_nics() ? clanq_nics[index] : NULL;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_nic_by_index);

/*
 * The NICs are fixed from module load to unload: no lock needed. The
 * acquire pairs with the release that publishes the table.
 */
struct clanq_nic *clanq_nic_by_node(u32 node)
{
	unsigned int i, n = clanq_nr_nics();

	for (i = 0; i < n; i++)
		if (clanq_nics[i]->node == node)
			return clanq_nics[i];
	return NULL;
}
EXPORT_SYMBOL_CLANQ_WIRE(clanq_nic_by_node);

static int clanq_nic_stats_show(struct seq_file *m, void *unused)
{
	struct clanq_nic *nic = m->private;
	struct clanq_nic_stats *st = &nic->stats;
	struct clanq_kep *ep;
	unsigned long id;
	unsigned int n = 0;

	xa_for_each(&nic->eps, id, ep)
		n += !clanq_eps_group(ep);	/* a shared service's group */
	seq_printf(m, "node %u\ncontexts %d\nendpoints %u\n", nic->node,
		   atomic_read(&nic->nr_contexts), n);
	seq_printf(m, "oob_sent %lld\noob_delivered %lld\noob_dropped %lld\n",
		   atomic64_read(&st->oob_sent), atomic64_read(&st->oob_delivered),
		   atomic64_read(&st->oob_dropped));
	seq_printf(m, "oob_no_endpoint %lld\nevents %lld\nevq_overflows %lld\n",
		   atomic64_read(&st->oob_no_ep), atomic64_read(&st->events),
		   atomic64_read(&st->evq_overflows));
	seq_printf(m, "oob_unreachable %lld\n", atomic64_read(&st->oob_unreachable));
	seq_printf(m, "evq_blocks %lld\ndriver_entries %lld\n",
		   atomic64_read(&st->evq_blocks), atomic64_read(&st->entries));
	seq_printf(m, "rdma_reqs %lld\nrdma_bytes %lld\nrdma_errors %lld\n",
		   atomic64_read(&st->rdma_reqs), atomic64_read(&st->rdma_bytes),
		   atomic64_read(&st->rdma_errors));
	seq_printf(m, "rdma_kicks %lld\nrdma_turns %lld\nrdma_inline_turns %lld\nrdma_splits %lld\nrdma_fire_turns %lld\n",
		   atomic64_read(&st->rdma_kicks), atomic64_read(&st->rdma_turns),
		   atomic64_read(&st->rdma_inline_turns), atomic64_read(&st->rdma_splits),
		   atomic64_read(&st->rdma_fire_turns));
	seq_printf(m, "regions_revoked %lld\n", atomic64_read(&st->regions_revoked));
	seq_printf(m, "tw_fires %lld\ntw_flushes %lld\ntw_spurious %lld\n",
		   atomic64_read(&st->tw_fires), atomic64_read(&st->tw_flushes),
		   atomic64_read(&st->tw_spurious));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(clanq_nic_stats);

/* The NIC's state, without its device: what KUnit tests build on. */
VISIBLE_IF_KUNIT
int clanq_nic_init(struct clanq_nic *nic, unsigned int index, u32 node)
{
	memset(nic, 0, sizeof(*nic));
	nic->index = index;
	nic->node = node;
	snprintf(nic->name, sizeof(nic->name), "clanq%u", index);
	xa_init_flags(&nic->eps, XA_FLAGS_ALLOC1);
	xa_init_flags(&nic->regions, XA_FLAGS_ALLOC1);
	mutex_init(&nic->ctx_lock);
	INIT_LIST_HEAD(&nic->contexts);
	clanq_engine_init(&nic->engine);
	clanq_peers_init(nic);
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(clanq_nic_init);

VISIBLE_IF_KUNIT
void clanq_nic_fini(struct clanq_nic *nic)
{
	WARN_ON(!xa_empty(&nic->eps));
	WARN_ON(!xa_empty(&nic->regions));
	WARN_ON(!list_empty(&nic->contexts));
	xa_destroy(&nic->eps);
	xa_destroy(&nic->regions);
	mutex_destroy(&nic->ctx_lock);
	clanq_peers_fini(nic);
}
EXPORT_SYMBOL_IF_KUNIT(clanq_nic_fini);

static struct clanq_nic *clanq_nic_create(unsigned int index, u32 node)
{
	struct clanq_nic *nic;
	int err;

	nic = kzalloc(sizeof(*nic), GFP_KERNEL);
	if (!nic)
		return ERR_PTR(-ENOMEM);
	clanq_nic_init(nic, index, node);
	nic->misc.minor = MISC_DYNAMIC_MINOR;
	nic->misc.name = nic->name;
	nic->misc.fops = &clanq_fops;
	/*
	 * Open to every user, as /dev/infiniband/uverbs* usually is: what a
	 * context may allocate is bounded per context (module parameters),
	 * not gated by the device node's mode.
	 */
	nic->misc.mode = 0666;
	nic->misc.groups = clanq_nic_groups;	/* stats.c: sysfs */
	err = clanq_engine_start(nic);
	if (err) {
		pr_err("clanq: cannot start the RDMA engine of %s: %d\n", nic->name, err);
		kfree(nic);
		return ERR_PTR(err);
	}
	return nic;
}

/* Undo clanq_nic_create(); its device is not (or no longer) registered. */
static void clanq_nic_destroy(struct clanq_nic *nic)
{
	WARN_ON(atomic_read(&nic->nr_contexts));
	clanq_engine_stop(nic);
	clanq_nic_fini(nic);
	kfree(nic);
}

/* The device and its counters: what makes a built NIC reachable. */
static int clanq_nic_publish(struct clanq_nic *nic)
{
	int err = misc_register(&nic->misc);

	if (err) {
		pr_err("clanq: cannot register /dev/%s: %d\n", nic->name, err);
		return err;
	}
	nic->debugfs = debugfs_create_dir(nic->name, clanq_debugfs);
	debugfs_create_file("stats", 0444, nic->debugfs, nic,
			    &clanq_nic_stats_fops);
	/* root only: it names processes and what they hold */
	debugfs_create_file("objects", 0400, nic->debugfs, nic,
			    &clanq_objects_fops);
	pr_info("%s: soft NIC up, node %u\n", nic->name, nic->node);
	return 0;
}

/*
 * Runs from module exit (or a failed load) only, and the module cannot be
 * unloaded while a file is open, so no context still points at this NIC.
 */
static void clanq_nic_unpublish(struct clanq_nic *nic)
{
	debugfs_remove_recursive(nic->debugfs);
	nic->debugfs = NULL;
	misc_deregister(&nic->misc);
}

/*
 * Build every NIC, publish the table (release: a reader that sees the
 * count sees the NICs), and only then register the devices, so nothing
 * can be opened before every node it may address exists. A failure at
 * any step unwinds everything: nothing stays openable.
 */
int clanq_nics_create(unsigned int nr, u32 node_base)
{
	struct clanq_nic **nics;
	unsigned int i, built, published = 0;
	int err = 0;

	clanq_load_faults_init();
	nics = kcalloc(nr, sizeof(*nics), GFP_KERNEL);
	if (!nics)
		return -ENOMEM;
	for (built = 0; built < nr; built++) {
		err = clanq_load_step();
		nics[built] = err ? ERR_PTR(err) :
			      clanq_nic_create(built, node_base + built);
		if (IS_ERR(nics[built])) {
			err = PTR_ERR(nics[built]);
			goto err_destroy;
		}
	}
	clanq_nics = nics;
	/* the table and the NICs before the count: clanq_nr_nics() */
	smp_store_release(&clanq_nics_nr, nr);
	clanq_debugfs = debugfs_create_dir("clanq", NULL);
	for (; published < nr; published++) {
		err = clanq_load_step();
		if (!err)
			err = clanq_nic_publish(nics[published]);
		if (err)
			goto err_unpublish;
	}
	return 0;

err_unpublish:
	while (published)
		clanq_nic_unpublish(nics[--published]);
	debugfs_remove_recursive(clanq_debugfs);
	clanq_debugfs = NULL;
	WRITE_ONCE(clanq_nics_nr, 0);
	clanq_nics = NULL;
err_destroy:
	for (i = 0; i < built; i++)
		clanq_nic_destroy(nics[i]);
	kfree(nics);
	return err;
}

void clanq_nics_destroy(void)
{
	unsigned int i, n = clanq_nics_nr;

	for (i = n; i--; )
		clanq_nic_unpublish(clanq_nics[i]);
	debugfs_remove_recursive(clanq_debugfs);
	clanq_debugfs = NULL;
	WRITE_ONCE(clanq_nics_nr, 0);
	for (i = n; i--; )
		clanq_nic_destroy(clanq_nics[i]);
	kfree(clanq_nics);
	clanq_nics = NULL;
}
