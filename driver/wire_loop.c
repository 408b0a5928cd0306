// SPDX-License-Identifier: GPL-2.0
/*
 * The loop wire: NICs in the same kernel. Sending is a direct call into
 * the destination NIC's receive path, in the sender's context; an
 * aperture points straight at the exporter's region, which is what lets
 * it be mapped for PIO. The source NIC, which a remote wire sends from,
 * is not needed here.
 *
 * What the wire reports to the sender is what a real NIC could know: the
 * node is unknown (-EHOSTUNREACH) or the message left. Whether the
 * receiver had an endpoint and room for it is the receiver's to count.
 */
#include "clanq_drv.h"

static bool clanq_loop_reaches(struct clanq_nic *src, u32 node)
{
	return clanq_nic_by_node(node);
}

static int clanq_loop_send_oob(struct clanq_nic *src,
			       const struct clanq_addr *dst,
			       const struct clanq_oob_msg *msg)
{
	struct clanq_nic *nic = clanq_nic_by_node(dst->node);

	if (!nic)
		return -EHOSTUNREACH;
	if (clanq_rx_oob(nic, dst->id, msg) == -ENOENT)
		clanq_oob_unreachable(src, dst, msg);
	return 0;
}

static struct clanq_kregion *clanq_loop_import(struct clanq_nic *src,
					       const struct clanq_addr *region,
					       u64 key)
{
	struct clanq_nic *nic = clanq_nic_by_node(region->node);
	struct clanq_kregion *r;

	if (!nic)
		return ERR_PTR(-EHOSTUNREACH);
	r = clanq_kregion_lookup(nic, region->id);
	return r ?: ERR_PTR(-ENOENT);
}

/* The aperture is the importer's, so closing it fences writes too. */
static int clanq_loop_rdma_write(struct clanq_nic *src,
				 const struct clanq_wire_write *w)
{
	struct clanq_kap *ap = w->dst;

	return clanq_rx_write(ap->region, ap->off + w->dst_off, w->src,
			      w->src_off, w->len, ap, w->fired);
}

/* A read: the exporter's region into the requester's (w->src). */
static int clanq_loop_rdma_read(struct clanq_nic *src,
				const struct clanq_wire_write *w)
{
	struct clanq_kap *ap = w->dst;

	return clanq_rx_read(ap->region, ap->off + w->dst_off, w->src,
			     w->src_off, w->len, ap);
}

static int clanq_loop_rdma_atomic(struct clanq_nic *src,
				  const struct clanq_wire_write *w)
{
	struct clanq_kap *ap = w->dst;

	return clanq_rx_atomic(ap->region, ap->off + w->dst_off, w->op,
			       w->operand, w->result, ap, w->fired);
}

const struct clanq_wire_ops clanq_wire_loop = {
	.name		= "loop",
	.reaches	= clanq_loop_reaches,
	.send_oob	= clanq_loop_send_oob,
	.import		= clanq_loop_import,
	.rdma_write	= clanq_loop_rdma_write,
	.rdma_read	= clanq_loop_rdma_read,
	.rdma_atomic	= clanq_loop_rdma_atomic,
};
EXPORT_SYMBOL_IF_KUNIT(clanq_wire_loop);
