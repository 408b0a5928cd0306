// SPDX-License-Identifier: GPL-2.0
/*
 * The loop wire: NICs in the same kernel. Delivery is a direct call into
 * the destination NIC's receive path, in the sender's context.
 *
 * What the wire reports to the sender is what a real NIC could know: the
 * node is unknown (-EHOSTUNREACH) or the message left. Whether the
 * receiver had an endpoint and room for it is the receiver's to count.
 */
#include "clanq_drv.h"

int clanq_wire_send_oob(struct clanq_nic *src, const struct clanq_addr *dst,
			const struct clanq_oob_msg *msg)
{
	struct clanq_nic *nic = clanq_nic_by_node(dst->node);

	if (!nic)
		return -EHOSTUNREACH;
	clanq_oob_deliver(nic, dst->id, msg);
	return 0;
}

/*
 * Resolve an import: the exporter's region, referenced, or NULL with
 * *err set. On the loop wire the aperture then points straight at it,
 * which is what lets it be mapped for PIO.
 */
struct clanq_region *clanq_wire_import(struct clanq_nic *src,
				       const struct clanq_addr *region, int *err)
{
	struct clanq_nic *nic = clanq_nic_by_node(region->node);
	struct clanq_region *r;

	if (!nic) {
		*err = -EHOSTUNREACH;
		return NULL;
	}
	r = clanq_region_lookup(nic, region->id);
	*err = r ? 0 : -ENOENT;
	return r;
}

/*
 * An RDMA write of @len bytes from @from at @from_off to @dst at @dst_off
 * (offsets into the aperture's window): here a direct call into the
 * receive path of the exporter's NIC.
 */
int clanq_wire_rdma_write(struct clanq_nic *src, struct clanq_ap *dst,
			  u64 dst_off, struct clanq_region *from, u64 from_off,
			  u64 len)
{
	return clanq_region_deliver_write(dst->region, dst->off + dst_off, from,
					  from_off, len, dst);
}
