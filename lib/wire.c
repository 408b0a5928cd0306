// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: the NIC's wires to other hosts. The verbs wire's binding to
 * an RDMA device and its peers (CLANQ_IOC_WIRE_BIND, CLANQ_IOC_PEER_*):
 * administration, for clanqctl(8); binding and naming peers need
 * CAP_NET_ADMIN, listing them does not.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#include <clanq/admin.h>

#include "fork.h"

int clanq_wire_bind(const struct clanq_dev *dev, const char *rdma_dev,
		    unsigned int port)
{
	struct clanq_ioc_wire_bind a;

	memset(&a, 0, sizeof(a));
	if (rdma_dev) {
		size_t len = strlen(rdma_dev);

		/* no room for its NUL: the driver would refuse it as well */
		if (len >= sizeof(a.dev))
			return -EINVAL;
		memcpy(a.dev, rdma_dev, len);
	}
	a.port = port;
	if (clanq_ioctl(dev->fd, CLANQ_IOC_WIRE_BIND, &a) < 0)
		return -errno;
	return 0;
}

/* PEER_ADD and PEER_DEL take the same argument. */
static int peer_ioctl(const struct clanq_dev *dev, unsigned long cmd,
		      uint32_t node, uint32_t ipv4_be, unsigned int port)
{
	struct clanq_ioc_peer a;

	memset(&a, 0, sizeof(a));
	a.node = node;
	a.ipv4 = ipv4_be;
	a.port = port;
	if (clanq_ioctl(dev->fd, cmd, &a) < 0)
		return -errno;
	return 0;
}

int clanq_peer_add(const struct clanq_dev *dev, uint32_t node, uint32_t ipv4_be,
		   unsigned int port)
{
	return peer_ioctl(dev, CLANQ_IOC_PEER_ADD, node, ipv4_be, port);
}

int clanq_peer_del(const struct clanq_dev *dev, uint32_t node)
{
	return peer_ioctl(dev, CLANQ_IOC_PEER_DEL, node, 0, 0);
}

int clanq_peer_list(const struct clanq_dev *dev, struct clanq_peer_stat *recs,
		    unsigned int count, unsigned int *total)
{
	struct clanq_ioc_peer_list a;

	memset(&a, 0, sizeof(a));
	a.buf = (uintptr_t)recs;
	a.count = count;
	if (clanq_ioctl(dev->fd, CLANQ_IOC_PEER_LIST, &a) < 0)
		return -errno;
	if (total)
		*total = a.total;
	return (int)a.count;
}

int clanq_peer_describe(const struct clanq_peer_stat *p, char *buf, size_t len)
{
	static const char *const states[] = { "idle", "connecting", "up", "down" };
	char addr[INET_ADDRSTRLEN], err[80] = "";
	struct in_addr in = { .s_addr = p->ipv4 };

	if (!inet_ntop(AF_INET, &in, addr, sizeof(addr)))
		snprintf(addr, sizeof(addr), "?");
	if (p->last_error)
		snprintf(err, sizeof(err), " (last error: %s)", strerror(-p->last_error));
	return snprintf(buf, len,
			"peer %u %s:%u %s%s, connects %u, sent %llu, received %llu, send errors %llu",
			p->node, addr, p->port, p->state < 4 ? states[p->state] : "?",
			err, p->connects, (unsigned long long)p->oob_sent,
			(unsigned long long)p->oob_received,
			(unsigned long long)p->send_errors);
}
