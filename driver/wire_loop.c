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
