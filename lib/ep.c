// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: endpoints and OOB messages. Receiving, RDMA posting and
 * completion polling are inline in clanq.h; here are the calls that
 * enter the driver.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <clanq.h>

#include "fork.h"

int clanq_ep_create(struct clanq_dev *dev, struct clanq_ep *ep,
		    unsigned int oob_slots)
{
	struct clanq_ep_attr attr = { .oob_slots = oob_slots };

	return clanq_ep_create_attr(dev, ep, &attr);
}

int clanq_ep_create_attr(struct clanq_dev *dev, struct clanq_ep *ep,
			 const struct clanq_ep_attr *attr)
{
	return clanq_ep_create_flags(dev, ep, attr, 0);
}

int clanq_ep_create_flags(struct clanq_dev *dev, struct clanq_ep *ep,
			  const struct clanq_ep_attr *attr, uint32_t flags)
{
	struct clanq_ioc_ep_create c;
	struct clanq_ioc_ep_destroy d;
	void *seg;
	int err;

	memset(&c, 0, sizeof(c));
	c.oob_slots = attr->oob_slots;
	c.rq_slots = attr->rq_slots;
	c.cq_slots = attr->cq_slots;
	c.tw_slots = attr->tw_slots;
	/* the driver judges the flags: it refuses what it does not know */
	c.flags = flags;
	if (attr->service) {
		c.flags |= CLANQ_EP_SERVICE;
		c.addr.id = attr->service;
	}
	if (clanq_ioctl(dev->fd, CLANQ_IOC_EP_CREATE, &c) < 0)
		return -errno;
	seg = mmap(NULL, c.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   dev->fd, (off_t)c.mmap_offset);
	if (seg == MAP_FAILED) {
		err = -errno;
		goto destroy;
	}
	/* the inline recv/post/poll copy whole slots into fixed-size structs */
	if (c.oob.slot_size == sizeof(struct clanq_oob_msg))
		err = clanq_q_init(&ep->oob, seg, c.mmap_size, &c.oob);
	else
		err = -EPROTO;
	if (!err && c.rq.slot_size == sizeof(struct clanq_rdma_req))
		err = clanq_q_init(&ep->rq, seg, c.mmap_size, &c.rq);
	else
		err = -EPROTO;
	if (!err && c.cq.slot_size == sizeof(struct clanq_rdma_comp))
		err = clanq_q_init(&ep->cq, seg, c.mmap_size, &c.cq);
	else
		err = -EPROTO;
	if (err || c.counters + sizeof(*ep->counters) > c.mmap_size ||
	    c.need_wakeup % 4 || c.need_wakeup + sizeof(uint32_t) > c.mmap_size ||
	    c.tw_fired % 8 || c.tw_slots % 64 ||
	    (uint64_t)c.tw_fired + c.tw_slots / 8 > c.mmap_size) {
		err = -EPROTO;		/* the driver described nonsense */
		munmap(seg, c.mmap_size);
		goto destroy;
	}
	ep->fd = dev->fd;
	ep->rq_batch = 0;
	ep->addr = c.addr;
	ep->seg = seg;
	ep->seg_size = c.mmap_size;
	ep->counters = (const struct clanq_ep_counters *)((char *)seg + c.counters);
	ep->need_wakeup = (const uint32_t *)((char *)seg + c.need_wakeup);
	ep->tw_fired = (uint64_t *)((char *)seg + c.tw_fired);
	ep->tw_words = c.tw_slots / 64;
	return 0;

destroy:
	memset(&d, 0, sizeof(d));
	d.id = c.addr.id;
	clanq_ioctl(dev->fd, CLANQ_IOC_EP_DESTROY, &d);
	return err;
}

int clanq_ep_destroy(struct clanq_ep *ep)
{
	struct clanq_ioc_ep_destroy d;
	int err = 0;

	memset(&d, 0, sizeof(d));
	d.id = ep->addr.id;
	if (clanq_ioctl(ep->fd, CLANQ_IOC_EP_DESTROY, &d) < 0)
		err = -errno;
	if (ep->seg)
		munmap(ep->seg, ep->seg_size);
	ep->seg = NULL;
	return err;
}

int clanq_oob_send(struct clanq_ep *ep, struct clanq_addr dst, uint32_t type,
		   const void *payload, size_t len)
{
	struct clanq_ioc_oob_send s;

	if (len > CLANQ_OOB_PAYLOAD)
		return -EMSGSIZE;
	memset(&s, 0, sizeof(s));
	s.ep = ep->addr.id;
	s.dst = dst;
	s.type = type;
	s.len = (uint32_t)len;
	if (len)
		memcpy(s.payload, payload, len);
	if (clanq_ioctl(ep->fd, CLANQ_IOC_OOB_SEND, &s) < 0)
		return -errno;
	return 0;
}

int clanq_rdma_kick(struct clanq_ep *ep)
{
	struct clanq_ioc_rdma_kick k;

	memset(&k, 0, sizeof(k));
	k.ep = ep->addr.id;
	if (clanq_ioctl(ep->fd, CLANQ_IOC_RDMA_KICK, &k) < 0)
		return -errno;
	return 0;
}

/*
 * READ and the atomics (LIBCLANQ_0.3). Out of line, unlike
 * clanq_rdma_post(): they are new symbols in their own version node, so
 * a program that uses them needs a library (and so a driver) that knows
 * them, and the loader says so rather than the engine completing the
 * request -EINVAL. The call costs a jump; the post itself is still the
 * inline producer and makes a system call only if the engine is idle.
 * What the library can see for itself (flags, alignment) is refused here
 * at once; the rest the engine checks and completes with its status.
 */
static int clanq_rdma_post_op(struct clanq_ep *ep, const struct clanq_ap *ap,
			      uint64_t ap_off, uint32_t op, uint64_t a, uint64_t b,
			      uint64_t cookie, uint32_t flags)
{
	struct clanq_rdma_req req;

	if (flags & ~CLANQ_RDMA_FLAGS || ap_off % CLANQ_RDMA_ATOMIC_LEN)
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	req.dst_ap = ap->id;
	req.dst_off = ap_off;
	req.len = CLANQ_RDMA_ATOMIC_LEN;
	req.cookie = cookie;
	req.flags = flags;
	req.op = op;
	req.operand[0] = a;
	req.operand[1] = b;
	return clanq_rdma_post(ep, &req);
}

int clanq_rdma_read(struct clanq_ep *ep, const struct clanq_ap *ap,
		    uint64_t ap_off, const struct clanq_region *dst,
		    uint64_t dst_off, uint64_t len, uint64_t cookie, uint32_t flags)
{
	struct clanq_rdma_req req;

	if (flags & ~CLANQ_RDMA_FLAGS)
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	req.src_region = dst->addr.id;
	req.src_off = dst_off;
	req.dst_ap = ap->id;
	req.dst_off = ap_off;
	req.len = len;
	req.cookie = cookie;
	req.flags = flags;
	req.op = CLANQ_RDMA_OP_READ;
	return clanq_rdma_post(ep, &req);
}

int clanq_rdma_cas(struct clanq_ep *ep, const struct clanq_ap *ap,
		   uint64_t ap_off, uint64_t compare, uint64_t swap, uint64_t cookie,
		   uint32_t flags)
{
	return clanq_rdma_post_op(ep, ap, ap_off, CLANQ_RDMA_OP_CAS, compare,
				  swap, cookie, flags);
}

int clanq_rdma_fadd(struct clanq_ep *ep, const struct clanq_ap *ap,
		    uint64_t ap_off, uint64_t add, uint64_t cookie, uint32_t flags)
{
	return clanq_rdma_post_op(ep, ap, ap_off, CLANQ_RDMA_OP_FADD, add, 0,
				  cookie, flags);
}
