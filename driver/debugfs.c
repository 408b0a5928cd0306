// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs clanq/clanqN/objects: what every context of a NIC holds.
 *
 * Root only (0400): it names processes. One line per object: a type
 * word, then "key value" pairs separated by single blanks, an object's
 * first pair its id; a context's objects follow its own line, each
 * indented by one blank. Tools find a field by its key (keys may be
 * added, never renamed or reordered). No value holds a blank: comm's
 * blanks and backslashes are escaped in octal, as /proc/mounts does.
 *
 *	ctx pid 812 entries 57 eps 2 regions 2 aps 1 tws 1 evqs 1 comm server
 *	 ep id 65541 service 0 oob_slots 256 oob_queued 0 oob_sent 3 ...
 *	 region id 7 len 4032 registered 0 exported 1 rights rw imports 1
 *	 ap id 1 node 1 region 9 off 0 len 4032 rights rw sink 1 notify_ep 65541 pio 1 revoked 0
 *
 * ctx: pid is the opener's thread group in the reader's pid namespace
 * (0 if it is not visible there), comm the opener's name at open();
 * entries its driver entries; tws and evqs are counts only. ep: its
 * node-wide id, service 1 for a listener's id (1..CLANQ_SERVICE_MAX),
 * its OOB queue and counters. region: its node-wide id, whether it is
 * exported (and its rights) and how many apertures, of any context,
 * import it. ap: the region it imports (node, id), its window and
 * rights, CLANQ_AP_SINK, the endpoint told of a revocation (0: none),
 * whether it can be mapped, and whether the region was revoked.
 *
 * Bounded: a seq_file iterator with one record per line, so one read()
 * holds the locks for one buffer's worth of lines (a page, or what the
 * caller asked for, whichever is less), never for a whole NIC of
 * 10,000+ regions. Between read()s nothing is held; the next one finds
 * its place again by position, walking the contexts by their counts (as
 * /proc/net/tcp does), so an object created or freed meanwhile may make
 * a line be missed or shown twice; a line is never torn.
 *
 * Locks: nic->ctx_lock keeps the list, and every context on it from its
 * release (context.c); the current context's ctx->lock its objects and
 * their counts; each line takes what its counters are under (the OOB
 * queue's, the wait queue's and the tripwires' spinlocks, the engine's
 * serve mutex, a region's ap_lock), all inside ctx->lock in the order of
 * clanq_drv.h. The copy to user space comes after stop(): no page fault
 * (mmap_lock) under any of them.
 */
#include <linux/debugfs.h>
#include <linux/pid.h>
#include <linux/seq_file.h>

#include "clanq_drv.h"

enum clanq_obj_kind {
	CLANQ_OBJ_CTX,
	CLANQ_OBJ_EP,
	CLANQ_OBJ_REGION,
	CLANQ_OBJ_AP,
};

struct clanq_objects_iter {
	struct clanq_nic *nic;
	struct clanq_ctx *ctx;		/* its lock held; NULL for none */
	enum clanq_obj_kind kind;	/* of the current line */
	struct clanq_kep *ep;
	struct clanq_kregion *region;
	struct clanq_kap *ap;
	unsigned long ap_id;		/* ap's index in ctx->aps */
};

/* Lines of @ctx: its own and one per object. Under its lock. */
static loff_t clanq_objects_lines(const struct clanq_ctx *ctx)
{
	return 1 + (loff_t)ctx->nr_eps + ctx->nr_regions + ctx->nr_aps;
}

/* Make the first object of the current context of @kind or later current. */
static bool clanq_objects_seek(struct clanq_objects_iter *it,
			       enum clanq_obj_kind kind)
{
	struct clanq_ctx *ctx = it->ctx;

	switch (kind) {
	case CLANQ_OBJ_CTX:
		it->kind = kind;
		return true;
	case CLANQ_OBJ_EP:
		it->ep = list_first_entry_or_null(&ctx->eps, struct clanq_kep,
						  ctx_node);
		if (it->ep) {
			it->kind = kind;
			return true;
		}
		fallthrough;
	case CLANQ_OBJ_REGION:
		it->region = list_first_entry_or_null(&ctx->regions,
						      struct clanq_kregion,
						      ctx_node);
		if (it->region) {
			it->kind = CLANQ_OBJ_REGION;
			return true;
		}
		fallthrough;
	case CLANQ_OBJ_AP:
		it->ap_id = 0;
		it->ap = xa_find(&ctx->aps, &it->ap_id, ULONG_MAX, XA_PRESENT);
		it->kind = CLANQ_OBJ_AP;
		return it->ap;
	}
	return false;
}

/* The next line of the current context; false at its end. */
static bool clanq_objects_step(struct clanq_objects_iter *it)
{
	struct clanq_ctx *ctx = it->ctx;

	switch (it->kind) {
	case CLANQ_OBJ_CTX:
		return clanq_objects_seek(it, CLANQ_OBJ_EP);
	case CLANQ_OBJ_EP:
		if (list_is_last(&it->ep->ctx_node, &ctx->eps))
			return clanq_objects_seek(it, CLANQ_OBJ_REGION);
		it->ep = list_next_entry(it->ep, ctx_node);
		return true;
	case CLANQ_OBJ_REGION:
		if (list_is_last(&it->region->ctx_node, &ctx->regions))
			return clanq_objects_seek(it, CLANQ_OBJ_AP);
		it->region = list_next_entry(it->region, ctx_node);
		return true;
	case CLANQ_OBJ_AP:
		it->ap = xa_find_after(&ctx->aps, &it->ap_id, ULONG_MAX,
				       XA_PRESENT);
		return it->ap;
	}
	return false;
}

/*
 * Leave the current context (unlock it) for @ctx, an entry of the NIC's
 * list or its head: lock it and make its own line current. False at the
 * list's end.
 */
static bool clanq_objects_enter(struct clanq_objects_iter *it,
				struct clanq_ctx *ctx)
{
	if (it->ctx)
		mutex_unlock(&it->ctx->lock);
	it->ctx = NULL;
	if (list_entry_is_head(ctx, &it->nic->contexts, nic_node))
		return false;
	mutex_lock(&ctx->lock);
	it->ctx = ctx;
	return clanq_objects_seek(it, CLANQ_OBJ_CTX);
}

static void *clanq_objects_start(struct seq_file *m, loff_t *pos)
{
	struct clanq_objects_iter *it = m->private;
	struct clanq_nic *nic = it->nic;
	loff_t skip = *pos;
	bool more;

	mutex_lock(&nic->ctx_lock);
	it->ctx = NULL;
	more = clanq_objects_enter(it, list_first_entry(&nic->contexts,
							struct clanq_ctx,
							nic_node));
	/* whole contexts by their counts, then line by line */
	while (more && skip >= clanq_objects_lines(it->ctx)) {
		skip -= clanq_objects_lines(it->ctx);
		more = clanq_objects_enter(it, list_next_entry(it->ctx, nic_node));
	}
	while (more && skip--)
		more = clanq_objects_step(it);
	return more ? it : NULL;
}

static void *clanq_objects_next(struct seq_file *m, void *v, loff_t *pos)
{
	struct clanq_objects_iter *it = v;

	++*pos;
	if (clanq_objects_step(it) ||
	    clanq_objects_enter(it, list_next_entry(it->ctx, nic_node)))
		return it;
	return NULL;
}

static void clanq_objects_stop(struct seq_file *m, void *v)
{
	struct clanq_objects_iter *it = m->private;

	if (it->ctx)
		mutex_unlock(&it->ctx->lock);
	it->ctx = NULL;
	mutex_unlock(&it->nic->ctx_lock);
}

static void clanq_objects_show_ctx(struct seq_file *m, struct clanq_ctx *ctx)
{
	seq_printf(m, "ctx pid %d entries %lld eps %u regions %u aps %u tws %u evqs %d comm ",
		   pid_vnr(ctx->pid), atomic64_read(&ctx->entries), ctx->nr_eps,
		   ctx->nr_regions, ctx->nr_aps, ctx->nr_tws,
		   atomic_read(&ctx->nr_evqs));
	seq_escape(m, ctx->comm, " \t\n\\");
	seq_putc(m, '\n');
}

static void clanq_objects_show_ep(struct seq_file *m, struct clanq_kep *ep)
{
	struct clanq_ep_counters c;
	u32 queued;

	clanq_kep_read_counters(ep, &c, &queued);
	seq_printf(m, " ep id %u service %d oob_slots %u oob_queued %u oob_sent %llu oob_delivered %llu oob_dropped %llu",
		   ep->id, ep->id <= CLANQ_SERVICE_MAX, ep->oob.q.mask + 1,
		   queued, c.oob_sent, c.oob_delivered, c.oob_dropped);
	seq_printf(m, " events %llu tw_slots %u tw_fires %llu rdma_reqs %llu rdma_errors %llu\n",
		   c.events, ep->tw.slots, c.tw_fires, c.rdma_reqs, c.rdma_errors);
}

static const char *clanq_objects_rights(u32 rights)
{
	switch (rights & CLANQ_RIGHTS_ALL) {
	case CLANQ_RIGHT_READ:
		return "r";
	case CLANQ_RIGHT_WRITE:
		return "w";
	case CLANQ_RIGHTS_ALL:
		return "rw";
	}
	return "-";
}

static void clanq_objects_show_region(struct seq_file *m,
				      struct clanq_kregion *r)
{
	unsigned int imports;

	mutex_lock(&r->ap_lock);
	imports = r->nr_aps;
	mutex_unlock(&r->ap_lock);
	/* exported and rights change under the owner's lock, which we hold */
	seq_printf(m, " region id %u len %llu registered %d exported %d rights %s imports %u\n",
		   r->id, r->len, r->registered, r->exported,
		   clanq_objects_rights(r->exported ? r->rights : 0), imports);
}

static void clanq_objects_show_ap(struct seq_file *m, struct clanq_kap *ap)
{
	struct clanq_kregion *r = ap->region;	/* referenced */

	seq_printf(m, " ap id %u node %u region %u off %llu len %llu rights %s sink %d notify_ep %u pio %d revoked %d\n",
		   ap->id, r->nic->node, r->id, ap->off, ap->len,
		   clanq_objects_rights(ap->rights), ap->sink, ap->notify_ep,
		   ap->map_pages != 0, READ_ONCE(r->revoked));
}

static int clanq_objects_show(struct seq_file *m, void *v)
{
	struct clanq_objects_iter *it = v;

	switch (it->kind) {
	case CLANQ_OBJ_CTX:
		clanq_objects_show_ctx(m, it->ctx);
		break;
	case CLANQ_OBJ_EP:
		clanq_objects_show_ep(m, it->ep);
		break;
	case CLANQ_OBJ_REGION:
		clanq_objects_show_region(m, it->region);
		break;
	case CLANQ_OBJ_AP:
		clanq_objects_show_ap(m, it->ap);
		break;
	}
	return 0;
}

static const struct seq_operations clanq_objects_sops = {
	.start	= clanq_objects_start,
	.next	= clanq_objects_next,
	.stop	= clanq_objects_stop,
	.show	= clanq_objects_show,
};

static int clanq_objects_open(struct inode *inode, struct file *file)
{
	struct clanq_objects_iter *it;

	it = __seq_open_private(file, &clanq_objects_sops, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->nic = inode->i_private;
	return 0;
}

const struct file_operations clanq_objects_fops = {
	.owner		= THIS_MODULE,
	.open		= clanq_objects_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= seq_release_private,
};
