/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq: administration: what a NIC is, its counters, and the
 * verbs wire's binding and peers (the tools' calls: clanq-info,
 * clanqstat, clanqctl). Link with -lclanq.
 */
#ifndef _CLANQ_ADMIN_H
#define _CLANQ_ADMIN_H

#include <clanq.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The NIC itself.
 */

/** What clanq_query() tells about a NIC and this context. */
struct clanq_nic_info {
	uint32_t abi_version;	/**< the driver's CLANQ_ABI_VERSION */
	uint32_t node;		/**< this NIC's node id */
	uint32_t nr_nics;	/**< soft NICs in the kernel */
	uint32_t reserved;
	uint64_t ctx_entries;	/**< driver entries of this context before this one */
};

/**
 * \brief Ask the driver what this device is (CLANQ_IOC_QUERY).
 * \param info  filled in on success
 * \return 0 or -errno.
 */
int clanq_query(const struct clanq_dev *dev, struct clanq_nic_info *info);

/*
 * Counters.
 */

/** \brief Driver entries (system calls) this context has made so far. */
int clanq_ctx_entries(const struct clanq_dev *dev, uint64_t *entries);

/**
 * \brief The NIC's contexts and endpoints with their counters
 *        (CLANQ_IOC_EP_STATS): those the caller's uid opened, or all of
 *        them with CAP_SYS_ADMIN. One record per context (ep 0), then
 *        one per endpoint of it; see struct clanq_ep_stat.
 * \param recs   room for @p count records (1..CLANQ_EP_STATS_MAX)
 * \param skip   records to pass over first (a cursor for the next call)
 * \param total  if not NULL: the records visible in all
 * \return records written, or -errno.
 */
int clanq_ep_stats(const struct clanq_dev *dev, struct clanq_ep_stat *recs,
		   unsigned int count, unsigned int skip, unsigned int *total);

/*
 * The verbs wire: the NIC's traffic to nodes on other hosts, over the
 * kernel's RDMA core (lib/wire.c; clanqctl(8) is the tool). Binding and
 * naming peers change what every user of the NIC reaches: they need
 * CAP_NET_ADMIN (-EPERM otherwise). Listing the peers does not.
 */

/**
 * \brief Send the NIC's traffic to other hosts through RDMA device
 *        @p rdma_dev, port @p port (CLANQ_IOC_WIRE_BIND); NULL or ""
 *        unbinds, which closes every connection of the NIC.
 * \param rdma_dev  the device's name as `rdma link` shows it, shorter
 *                  than CLANQ_WIRE_DEV_MAX bytes
 * \param port      the device's port, from 1 (ignored when unbinding)
 * \return 0; -EPERM without CAP_NET_ADMIN; -ENODEV if there is no such
 *         RDMA device; -EINVAL for a bad port or a name too long; -errno.
 */
int clanq_wire_bind(const struct clanq_dev *dev, const char *rdma_dev,
		    unsigned int port);

/**
 * \brief Reach node @p node at IPv4 address @p ipv4_be, port @p port
 *        (CLANQ_IOC_PEER_ADD). The connection is made on first use.
 * \param ipv4_be  network byte order (as inet_pton() writes it); not 0,
 *                 broadcast or multicast
 * \param port     1..65535; 0: the module's verbs_port
 * \return 0; -EPERM without CAP_NET_ADMIN; -EEXIST if @p node is a peer
 *         already; -EINVAL for a node of this host, CLANQ_NODE_INVALID,
 *         or a bad address or port; -ENOSPC past CLANQ_PEERS_MAX; -errno.
 */
int clanq_peer_add(const struct clanq_dev *dev, uint32_t node, uint32_t ipv4_be,
		   unsigned int port);

/**
 * \brief Forget peer @p node (CLANQ_IOC_PEER_DEL): its connection closes,
 *        and what was in flight to it completes with an error.
 * \return 0; -EPERM without CAP_NET_ADMIN; -ENOENT if it is no peer;
 *         -errno.
 */
int clanq_peer_del(const struct clanq_dev *dev, uint32_t node);

/**
 * \brief The NIC's peers with their connections' state and counters
 *        (CLANQ_IOC_PEER_LIST), in node order; see struct
 *        clanq_peer_stat. Any user may list them.
 * \param recs   room for @p count records (1..CLANQ_PEERS_MAX)
 * \param total  if not NULL: the peers in all
 * \return records written (min(@p count, total)), or -errno.
 */
int clanq_peer_list(const struct clanq_dev *dev, struct clanq_peer_stat *recs,
		    unsigned int count, unsigned int *total);

/**
 * \brief One peer record in words, on one line (no newline): "peer 20
 *        10.0.0.2:18525 up, connects 1, sent 5, received 5, send errors 0",
 *        with the last error after the state if there was one; what
 *        clanqctl and clanq-info print.
 * \return as snprintf(): the length it wanted.
 */
int clanq_peer_describe(const struct clanq_peer_stat *p, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* _CLANQ_ADMIN_H */
