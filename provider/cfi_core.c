// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: fi_prov_ini(), fi_getinfo(), fabric and domain.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "cfi.h"

#define CFI_MSG_CAPS	(FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM)
#define CFI_RMA_CAPS	(FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | \
			 FI_REMOTE_READ | FI_REMOTE_WRITE)
#define CFI_CAPS	(CFI_MSG_CAPS | CFI_RMA_CAPS)
#define CFI_TX_CAPS	(FI_MSG | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | \
			 FI_WRITE)
#define CFI_RX_CAPS	(FI_MSG | FI_RECV | FI_RMA | FI_ATOMIC | \
			 FI_REMOTE_READ | FI_REMOTE_WRITE)
#define CFI_ORDER	FI_ORDER_SAS

int cfi_enosys(void)
{
	return -FI_ENOSYS;
}

/* ---- addresses ---------------------------------------------------------- */

static const uint8_t cfi_addr_prefix[8] = CFI_ADDR_PREFIX;

/* a into addr (*addrlen bytes of room; set to what it needs) */
int cfi_addr_put(const struct cfi_addr *a, void *addr, size_t *addrlen)
{
	struct sockaddr_in6 s;
	uint32_t id = 0, node = htonl(a->node);
	size_t room;

	if (!addrlen)
		return -FI_EINVAL;
	memset(&s, 0, sizeof(s));
	s.sin6_family = AF_INET6;
	memcpy(s.sin6_addr.s6_addr, cfi_addr_prefix, sizeof(cfi_addr_prefix));
	if (a->service <= CLANQ_SERVICE_MAX)
		s.sin6_port = htons((uint16_t)a->service);
	else
		id = htonl(a->service);
	memcpy(s.sin6_addr.s6_addr + 8, &id, sizeof(id));
	memcpy(s.sin6_addr.s6_addr + 12, &node, sizeof(node));
	room = *addrlen;
	*addrlen = sizeof(s);
	if (room < sizeof(s) || !addr)
		return -FI_ETOOSMALL;
	memcpy(addr, &s, sizeof(s));
	return 0;
}

/* addr, if it is one of ours, into *a; else -FI_EINVAL */
int cfi_addr_get(const void *addr, size_t len, struct cfi_addr *a)
{
	struct sockaddr_in6 s;
	uint32_t id, node;

	if (!addr || len != sizeof(s))
		return -FI_EINVAL;
	memcpy(&s, addr, sizeof(s));
	if (s.sin6_family != AF_INET6 ||
	    memcmp(s.sin6_addr.s6_addr, cfi_addr_prefix, sizeof(cfi_addr_prefix)))
		return -FI_EINVAL;
	memcpy(&id, s.sin6_addr.s6_addr + 8, sizeof(id));
	memcpy(&node, s.sin6_addr.s6_addr + 12, sizeof(node));
	a->node = ntohl(node);
	a->service = id ? ntohl(id) : ntohs(s.sin6_port);
	return 0;
}

/* clanq's -errno to libfabric's: its codes are errno's where both have one */
int cfi_errno(int err)
{
	switch (err) {
	case -EHOSTUNREACH:
		return -FI_EHOSTUNREACH;
	case -ENOSPC:
		return -FI_ENOSPC;
	case -ECONNRESET:
	case -EPROTO:
		return -FI_ECONNRESET;
	case -EPIPE:
		return -FI_ESHUTDOWN;	/* the peer shut it down */
	default:
		return err < 0 ? err : -FI_EOTHER;
	}
}

/* a decimal number in [lo, hi], the whole string */
static int cfi_parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	unsigned long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/*
 * RMA is offered unless the hints rule it out: asked for other
 * capabilities only, or a registration mode that names keys the
 * application picks (mr_mode without FI_MR_PROV_KEY; FI_MR_SCALABLE) or
 * virtual addresses (FI_MR_BASIC). mr_mode 0 leaves it to us, as
 * libfabric's ofi_check_mr_mode() reads it.
 */
bool cfi_rma_wanted(const struct fi_info *h)
{
	int mr;

	if (!h)
		return true;
	if (h->caps && !(h->caps & CFI_RMA_CAPS))
		return false;
	if (!h->domain_attr)
		return true;
	mr = h->domain_attr->mr_mode;
	if (mr & (FI_MR_BASIC | FI_MR_SCALABLE))
		return false;
	return !mr || (mr & FI_MR_PROV_KEY);
}

struct fi_info *cfi_info_for(unsigned int nic, uint32_t node,
			     const struct fi_info *hints)
{
	struct fi_info *fi = fi_allocinfo();
	bool rma = cfi_rma_wanted(hints);
	char name[32];

	if (!fi)
		return NULL;
	snprintf(name, sizeof(name), "clanq%u", nic);
	fi->caps = rma ? CFI_CAPS : CFI_MSG_CAPS;
	fi->mode = 0;
	fi->addr_format = FI_SOCKADDR_IN6;

	fi->tx_attr->caps = CFI_TX_CAPS & fi->caps;
	fi->tx_attr->rma_iov_limit = rma ? 1 : 0;
	fi->tx_attr->msg_order = CFI_ORDER;
	fi->tx_attr->comp_order = FI_ORDER_STRICT;
	fi->tx_attr->inject_size = CFI_INJECT_MAX;
	fi->tx_attr->size = CFI_QUEUE_SIZE;
	fi->tx_attr->iov_limit = CFI_IOV_MAX;

	fi->rx_attr->caps = CFI_RX_CAPS & fi->caps;
	fi->rx_attr->msg_order = CFI_ORDER;
	fi->rx_attr->comp_order = FI_ORDER_STRICT;
	fi->rx_attr->size = CFI_QUEUE_SIZE;
	fi->rx_attr->iov_limit = CFI_IOV_MAX;

	fi->ep_attr->type = FI_EP_MSG;
	fi->ep_attr->protocol = FI_PROTO_UNSPEC;
	fi->ep_attr->protocol_version = 1;
	fi->ep_attr->max_msg_size = CFI_MSG_MAX;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;

	fi->domain_attr->name = strdup(name);
	fi->domain_attr->threading = FI_THREAD_SAFE;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
	fi->domain_attr->av_type = FI_AV_UNSPEC;
	/* keys are ours, and name the region (cfi_mr.c); no virtual addresses */
	fi->domain_attr->mr_mode = rma ? FI_MR_PROV_KEY : 0;
	fi->domain_attr->mr_key_size = rma ? sizeof(uint64_t) : 0;
	fi->domain_attr->mr_cnt = rma ? 1024 : 0;
	fi->domain_attr->cq_data_size = sizeof(uint64_t);
	fi->domain_attr->cq_cnt = 256;
	fi->domain_attr->cntr_cnt = 256;
	fi->domain_attr->ep_cnt = 1024;
	fi->domain_attr->tx_ctx_cnt = 1024;
	fi->domain_attr->rx_ctx_cnt = 1024;
	fi->domain_attr->max_ep_tx_ctx = 1;
	fi->domain_attr->max_ep_rx_ctx = 1;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
	fi->domain_attr->max_err_data = CFI_CM_DATA_MAX;

	fi->fabric_attr->name = strdup(name);
	/* prov_name: libfabric's core writes it (ours would be doubled) */
	fi->fabric_attr->prov_version = CFI_PROV_VERSION;
	if (!fi->domain_attr->name || !fi->fabric_attr->name) {
		fi_freeinfo(fi);
		return NULL;
	}
	(void)node;
	return fi;
}

/* What the hints ask that no info of ours gives: -FI_ENODATA. */
static int cfi_check_hints(const struct fi_info *h)
{
	struct cfi_addr a;

	if (h->caps & ~CFI_CAPS)
		return -FI_ENODATA;
	if ((h->caps & CFI_RMA_CAPS) && !cfi_rma_wanted(h))
		return -FI_ENODATA;	/* RMA, with keys we cannot give */
	if (h->addr_format != FI_FORMAT_UNSPEC && h->addr_format != FI_SOCKADDR &&
	    h->addr_format != FI_SOCKADDR_IN6)
		return -FI_ENODATA;
	if (h->ep_attr) {
		const struct fi_ep_attr *a = h->ep_attr;

		if (a->type != FI_EP_UNSPEC && a->type != FI_EP_MSG)
			return -FI_ENODATA;
		if (a->protocol != FI_PROTO_UNSPEC)
			return -FI_ENODATA;
		if (a->max_msg_size > CFI_MSG_MAX)
			return -FI_ENODATA;
		if (a->tx_ctx_cnt > 1 || a->rx_ctx_cnt > 1)
			return -FI_ENODATA;
		if (a->auth_key_size)
			return -FI_ENODATA;
	}
	if (h->tx_attr) {
		const struct fi_tx_attr *t = h->tx_attr;

		if ((t->caps & ~CFI_CAPS) || (t->msg_order & ~CFI_ORDER) ||
		    t->inject_size > CFI_INJECT_MAX ||
		    t->size > CFI_QUEUE_SIZE || t->iov_limit > CFI_IOV_MAX ||
		    t->rma_iov_limit > 1)
			return -FI_ENODATA;
	}
	if (h->rx_attr) {
		const struct fi_rx_attr *r = h->rx_attr;

		if ((r->caps & ~CFI_CAPS) || (r->msg_order & ~CFI_ORDER) ||
		    r->size > CFI_QUEUE_SIZE || r->iov_limit > CFI_IOV_MAX ||
		    r->total_buffered_recv)
			return -FI_ENODATA;
	}
	if (h->domain_attr) {
		const struct fi_domain_attr *d = h->domain_attr;

		if (d->control_progress == FI_PROGRESS_AUTO ||
		    d->data_progress == FI_PROGRESS_AUTO)
			return -FI_ENODATA;
		if (d->cq_data_size > sizeof(uint64_t))
			return -FI_ENODATA;
		/* mr_mode: without FI_MR_PROV_KEY, no RMA (cfi_rma_wanted()) */
		if (d->caps & ~(uint64_t)(FI_LOCAL_COMM | FI_REMOTE_COMM))
			return -FI_ENODATA;
	}
	if (h->src_addr && cfi_addr_get(h->src_addr, h->src_addrlen, &a))
		return -FI_ENODATA;
	if (h->dest_addr && cfi_addr_get(h->dest_addr, h->dest_addrlen, &a))
		return -FI_ENODATA;
	return 0;
}

static int cfi_set_addr(void **p, size_t *len, const struct cfi_addr *a)
{
	free(*p);
	*len = sizeof(struct sockaddr_in6);
	*p = malloc(*len);
	if (!*p)
		return -FI_ENOMEM;
	return cfi_addr_put(a, *p, len);
}

/*
 * FI_CLANQ_NIC: the one NIC to offer, as FI_TCP_IFACE names the tcp
 * provider's interface; for programs that take the first fi_info
 * they are given (Open MPI's mtl ofi does), so that the processes of
 * one host can be spread over its NICs. *only is -1 when unset; a
 * value that names no NIC here offers nothing, and says why.
 */
static int cfi_only_nic(unsigned int nr, int *only)
{
	char *val = NULL;
	const char *num;
	uint32_t n;

	*only = -1;
	if (fi_param_get_str(&cfi_prov, "nic", &val) != FI_SUCCESS || !val || !*val)
		return 0;
	num = strncmp(val, "clanq", 5) ? val : val + 5;
	if (!nr || cfi_parse_u32(num, 0, nr - 1, &n)) {
		CFI_WARN(FI_LOG_CORE, "FI_CLANQ_NIC=%s: no such NIC (this host has %u)\n",
			 val, nr);
		return -FI_ENODATA;
	}
	*only = (int)n;
	return 0;
}

/*
 * FI_CLANQ_YIELD: after how many empty CQ reads in a row a reader that
 * spins (fi_cq_read() in a loop, as fi_pingpong and ofi_rxm do) calls
 * sched_yield(). Between hosts the bytes move through kernel work: the
 * RDMA core's (rxe's and siw's work items) and the verbs wire's
 * completion handlers. A reader spinning in user space on the CPU that
 * work is queued on holds it off until the scheduler's slice ends
 * (milliseconds under EEVDF), each way of each round trip. Unset or
 * empty: CFI_YIELD_AUTO when the NIC has peers on other hosts (its
 * reads go through the kernel anyway), else never, so that between the
 * processes of one host no read ever makes a system call; 0: never.
 * Read as a string, not as libfabric's int, whose strtol() would make
 * garbage 0 without a word: garbage is the default, with a warning.
 */
#define CFI_YIELD_AUTO	64
#define CFI_YIELD_MAX	(1u << 20)

/*
 * Provider parameter name (env, as the user sets it) as a number in
 * lo .. hi: true with *out set; false if it is unset or empty, or
 * garbage (with a warning saying what it should be), and the caller
 * takes its default.
 */
static bool cfi_param_u32(const char *name, const char *env, const char *what,
			  uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *val = NULL;

	if (fi_param_get_str(&cfi_prov, name, &val) != FI_SUCCESS || !val || !*val)
		return false;
	if (!cfi_parse_u32(val, lo, hi, out))
		return true;
	CFI_WARN(FI_LOG_CORE, "%s=%s: not %s (%u..%u); the default\n",
		 env, val, what, lo, hi);
	return false;
}

static unsigned int cfi_yield_after(const struct clanq_dev *dev)
{
	struct clanq_peer_stat rec;
	unsigned int total = 0;
	uint32_t n;

	if (cfi_param_u32("yield", "FI_CLANQ_YIELD", "a count of reads", 0,
			  CFI_YIELD_MAX, &n))
		return n;
	if (clanq_peer_list(dev, &rec, 1, &total) < 0)
		return 0;
	return total ? CFI_YIELD_AUTO : 0;
}

/*
 * FI_CLANQ_RING_SIZE: bytes of each connection's receive ring, its
 * header included, rounded down to pages (CFI_RING_MIN .. CFI_RING_MAX).
 * Messages up to about half of it go eager, through the ring; longer
 * ones go as pieces. Both sides' settings count: a listener caps what a
 * client asks at its own (clanq_listen_attr.max_rx_ring). Garbage is
 * the default, with a warning.
 */
static uint32_t cfi_ring_size(void)
{
	uint32_t n;

	if (cfi_param_u32("ring_size", "FI_CLANQ_RING_SIZE", "a ring size in bytes",
			  CFI_RING_MIN, CFI_RING_MAX, &n))
		return (n & ~4095u) - CFI_RING_HDR;
	return CFI_RING_DEFAULT - CFI_RING_HDR;
}

/*
 * FI_CLANQ_RNDV_SIZE: messages of this many bytes and more go as a
 * rendezvous (cfi_rndv.c), whatever the eager size; 0: never. Garbage
 * is the default, with a warning.
 */
static size_t cfi_rndv_size(void)
{
	uint32_t n;

	if (cfi_param_u32("rndv_size", "FI_CLANQ_RNDV_SIZE", "a size in bytes", 0,
			  CFI_MSG_MAX, &n))
		return n;
	return CFI_RNDV_DEFAULT;
}

static int cfi_getinfo(uint32_t version, const char *node, const char *service,
		       uint64_t flags, const struct fi_info *hints,
		       struct fi_info **info)
{
	struct cfi_addr src = { 0 }, dst = { 0 };
	bool has_src = false, has_dst = false, src_any_node = true;
	struct fi_info *head = NULL, **tail = &head;
	struct clanq_dev dev;
	unsigned int nic, nr;
	int ret, only;
	uint32_t v;

	if (!info)
		return -FI_EINVAL;
	*info = NULL;
	/* addresses: node a clanq node number, service a clanq service */
	if (node || service) {
		uint32_t n = 0, s = 0;

		if (node && cfi_parse_u32(node, 0, UINT32_MAX - 1, &n))
			return -FI_ENODATA;
		if (service && cfi_parse_u32(service, 1, CLANQ_SERVICE_MAX, &s))
			return -FI_ENODATA;
		if ((flags & FI_SOURCE) || !node) {
			src.node = n;
			src.service = s;
			has_src = true;
			src_any_node = !node;
		} else {
			dst.node = n;
			dst.service = s;
			has_dst = true;
			if (!service)
				return -FI_ENODATA;	/* whom to connect to? */
		}
	}
	if (hints) {
		ret = cfi_check_hints(hints);
		if (ret)
			return ret;
		if (hints->src_addr && !has_src) {
			cfi_addr_get(hints->src_addr, hints->src_addrlen, &src);
			has_src = true;
			src_any_node = false;
		}
		if (hints->dest_addr && !has_dst) {
			cfi_addr_get(hints->dest_addr, hints->dest_addrlen, &dst);
			has_dst = true;
		}
	}

	ret = clanq_open_nic(&dev, 0);
	if (ret)
		return -FI_ENODATA;	/* no clanq here: nothing to offer */
	nr = dev.nr_nics;
	clanq_close(&dev);
	ret = cfi_only_nic(nr, &only);
	if (ret)
		return ret;
	for (nic = 0; nic < nr; nic++) {
		struct fi_info *fi;
		char name[32];

		if (only >= 0 && nic != (unsigned int)only)
			continue;
		if (clanq_open_nic(&dev, nic))
			continue;
		v = dev.node;
		clanq_close(&dev);
		snprintf(name, sizeof(name), "clanq%u", nic);
		if (has_src && !src_any_node && src.node != v)
			continue;
		if (hints && hints->domain_attr && hints->domain_attr->name &&
		    strcmp(hints->domain_attr->name, name))
			continue;
		if (hints && hints->fabric_attr && hints->fabric_attr->name &&
		    strcmp(hints->fabric_attr->name, name))
			continue;
		fi = cfi_info_for(nic, v, hints);
		if (!fi)
			goto nomem;
		fi->fabric_attr->api_version = version;
		if (has_src) {
			struct cfi_addr a = { v, src.service };

			if (cfi_set_addr(&fi->src_addr, &fi->src_addrlen, &a))
				goto nomem_fi;
		}
		if (has_dst && cfi_set_addr(&fi->dest_addr, &fi->dest_addrlen, &dst))
			goto nomem_fi;
		*tail = fi;
		tail = &fi->next;
		continue;
nomem_fi:
		fi_freeinfo(fi);
		goto nomem;
	}
	if (!head)
		return -FI_ENODATA;
	*info = head;
	return 0;
nomem:
	fi_freeinfo(head);
	return -FI_ENOMEM;
}

/* ---- domain ------------------------------------------------------------- */

static int cfi_domain_close(struct fid *fid)
{
	struct cfi_domain *d = container_of(fid, struct cfi_domain, dom.fid);
	struct cfi_fabric *fab = d->fab;

	cfi_lock(fab);
	if (d->refs) {
		cfi_unlock(fab);
		return -FI_EBUSY;
	}
	fab->refs--;
	cfi_unlock(fab);
	free(d);
	return 0;
}

static struct fi_ops cfi_domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_domain_close,
	.bind = (void *)cfi_enosys,
	.control = (void *)cfi_enosys,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static struct fi_ops_domain cfi_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = (void *)cfi_enosys,
	.cq_open = cfi_cq_open,
	.endpoint = cfi_endpoint,
	.scalable_ep = (void *)cfi_enosys,
	.cntr_open = cfi_cntr_open,
	.poll_open = (void *)cfi_enosys,
	.stx_ctx = (void *)cfi_enosys,
	.srx_ctx = (void *)cfi_enosys,
	.query_atomic = cfi_query_atomic,
	.query_collective = (void *)cfi_enosys,
	.endpoint2 = (void *)cfi_enosys,
};

static int cfi_domain_open(struct fid_fabric *fabric, struct fi_info *info,
			   struct fid_domain **dom, void *context)
{
	struct cfi_fabric *fab = container_of(fabric, struct cfi_fabric, fab);
	struct cfi_domain *d;
	char name[32];

	if (!info || !dom)
		return -FI_EINVAL;
	snprintf(name, sizeof(name), "clanq%u", fab->nic);
	if (info->domain_attr && info->domain_attr->name &&
	    strcmp(info->domain_attr->name, name))
		return -FI_EINVAL;
	if (info->domain_attr &&
	    (info->domain_attr->data_progress == FI_PROGRESS_AUTO ||
	     info->domain_attr->control_progress == FI_PROGRESS_AUTO))
		return -FI_EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	d->fab = fab;
	d->dom.fid.fclass = FI_CLASS_DOMAIN;
	d->dom.fid.context = context;
	d->dom.fid.ops = &cfi_domain_fi_ops;
	d->dom.ops = &cfi_domain_ops;
	d->dom.mr = &cfi_mr_ops;
	cfi_lock(fab);
	fab->refs++;
	cfi_unlock(fab);
	*dom = &d->dom;
	return 0;
}

/* ---- fabric ------------------------------------------------------------- */

static int cfi_fabric_close(struct fid *fid)
{
	struct cfi_fabric *fab = container_of(fid, struct cfi_fabric, fab.fid);

	cfi_lock(fab);
	if (fab->refs) {
		cfi_unlock(fab);
		return -FI_EBUSY;
	}
	cfi_unlock(fab);
	cfi_rma_fabric_close(fab);
	close(fab->wait_fd);
	close(fab->kick_fd);
	clanq_net_close(fab->net);
	clanq_close(&fab->dev);
	pthread_mutex_destroy(&fab->lock);
	free(fab);
	return 0;
}

static struct fi_ops cfi_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_fabric_close,
	.bind = (void *)cfi_enosys,
	.control = (void *)cfi_enosys,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static struct fi_ops_fabric cfi_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = cfi_domain_open,
	.passive_ep = cfi_passive_ep,
	.eq_open = cfi_eq_open,
	.wait_open = (void *)cfi_enosys,
	.trywait = cfi_trywait,
	.domain2 = (void *)cfi_enosys,
};

/* the fabric's wait fd: an epoll of its net's evq fd and its kick */
static int cfi_wait_fd_open(struct cfi_fabric *fab)
{
	struct epoll_event ev = { .events = EPOLLIN };

	fab->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fab->kick_fd < 0)
		return -errno;
	fab->wait_fd = epoll_create1(EPOLL_CLOEXEC);
	if (fab->wait_fd < 0 ||
	    epoll_ctl(fab->wait_fd, EPOLL_CTL_ADD, fab->kick_fd, &ev) ||
	    epoll_ctl(fab->wait_fd, EPOLL_CTL_ADD,
		      clanq_evq_fd(clanq_net_evq(fab->net)), &ev)) {
		int err = -errno;

		if (fab->wait_fd >= 0)
			close(fab->wait_fd);
		close(fab->kick_fd);
		return err;
	}
	return 0;
}

int cfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context)
{
	struct cfi_fabric *fab;
	uint32_t nic;
	int ret;

	if (!attr || !fabric || !attr->name ||
	    strncmp(attr->name, "clanq", 5) ||
	    cfi_parse_u32(attr->name + 5, 0, 1023, &nic))
		return -FI_EINVAL;
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	ret = clanq_open_nic(&fab->dev, nic);
	if (ret) {
		free(fab);
		return ret == -ENOENT || ret == -ENODEV ? -FI_ENODEV : cfi_errno(ret);
	}
	ret = clanq_net_open(&fab->net, &fab->dev, NULL);
	if (ret) {
		clanq_close(&fab->dev);
		free(fab);
		return cfi_errno(ret);
	}
	ret = cfi_wait_fd_open(fab);
	if (ret) {
		clanq_net_close(fab->net);
		clanq_close(&fab->dev);
		free(fab);
		return ret;
	}
	pthread_mutex_init(&fab->lock, NULL);
	fab->nic = nic;
	fab->yield_after = cfi_yield_after(&fab->dev);
	fab->ring = cfi_ring_size();
	fab->rndv_min = cfi_rndv_size();
	fab->fab.fid.fclass = FI_CLASS_FABRIC;
	fab->fab.fid.context = context;
	fab->fab.fid.ops = &cfi_fabric_fi_ops;
	fab->fab.ops = &cfi_fabric_ops;
	fab->fab.api_version = attr->api_version;
	*fabric = &fab->fab;
	return 0;
}

static void cfi_cleanup(void)
{
}

struct fi_provider cfi_prov = {
	.version = CFI_PROV_VERSION,
	.fi_version = CFI_FI_VERSION,
	.name = CFI_PROV_NAME,
	.getinfo = cfi_getinfo,
	.fabric = cfi_fabric_open,
	.cleanup = cfi_cleanup,
};

FI_EXT_INI
{
	fi_param_define(&cfi_prov, "nic", FI_PARAM_STRING,
			"the one clanq NIC to offer, clanqN or N (default: all of them)");
	fi_param_define(&cfi_prov, "yield", FI_PARAM_STRING,
			"empty CQ reads in a row before a sched_yield(); "
			"0: never (default: 64 on a NIC with peers on "
			"other hosts, else never)");
	fi_param_define(&cfi_prov, "ring_size", FI_PARAM_STRING,
			"bytes of each connection's receive ring, rounded down "
			"to pages; messages up to about half of it go eager "
			"(default: 262144)");
	fi_param_define(&cfi_prov, "rndv_size", FI_PARAM_STRING,
			"messages of this many bytes and more go as a "
			"rendezvous, read by the receiver's RDMA engine from "
			"the sender's memory: one copy; 0: never "
			"(default: 65536)");
	return &cfi_prov;
}
