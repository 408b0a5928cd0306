/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Shared by the test_tripwire* programs: an owner (a context with an
 * endpoint and an exported region the tripwires watch) and a writer (a
 * context on either NIC with an aperture onto that region, mapped for
 * PIO, and an endpoint and source region for RDMA writes). No asserts:
 * usable in children; each returns 0 or what failed.
 */
#ifndef CLANQ_TW_FIXTURE_H
#define CLANQ_TW_FIXTURE_H

#include <string.h>

struct tw_owner {
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_region r;
	uint64_t key;
};

struct tw_writer {
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_region src;	/* RDMA source */
	struct clanq_ap ap;		/* the owner's whole region */
	uint64_t cookie;
};

/* Open an owner on NIC nic with a size-byte region exported read-write. */
static inline const char *tw_owner_open(struct tw_owner *o, unsigned int nic,
					size_t size)
{
	memset(o, 0, sizeof(*o));
	if (clanq_open_nic(&o->dev, nic))
		return "owner: open";
	if (clanq_ep_create(&o->dev, &o->ep, 0))
		return "owner: ep_create";
	if (clanq_region_alloc(&o->dev, &o->r, size))
		return "owner: region_alloc";
	if (clanq_region_export(&o->r, CLANQ_RIGHTS_ALL, &o->key))
		return "owner: region_export";
	return NULL;
}

static inline const char *tw_owner_close(struct tw_owner *o)
{
	if (clanq_region_free(&o->r))
		return "owner: region_free";
	if (clanq_ep_destroy(&o->ep))
		return "owner: ep_destroy";
	if (clanq_close(&o->dev))
		return "owner: close";
	return NULL;
}

/* A writer on NIC nic onto region (addr, key) of size bytes. */
static inline const char *tw_writer_open(struct tw_writer *w, unsigned int nic,
					 struct clanq_addr region, uint64_t key,
					 size_t size)
{
	struct clanq_ep_attr attr = { .rq_slots = 16, .cq_slots = 16 };

	memset(w, 0, sizeof(*w));
	if (clanq_open_nic(&w->dev, nic))
		return "writer: open";
	if (clanq_ep_create_attr(&w->dev, &w->ep, &attr))
		return "writer: ep_create";
	if (clanq_region_alloc(&w->dev, &w->src, 4096))
		return "writer: region_alloc";
	if (clanq_ap_import(&w->dev, &w->ap, region, key, 0, size,
			    CLANQ_RIGHTS_ALL))
		return "writer: ap_import";
	if (clanq_ap_map(&w->ap))
		return "writer: ap_map";
	if (!w->ap.armed)
		return "writer: no armed bitmap beside the PIO mapping";
	return NULL;
}

static inline const char *tw_writer_close(struct tw_writer *w)
{
	if (clanq_ap_close(&w->ap))
		return "writer: ap_close";
	if (clanq_region_free(&w->src))
		return "writer: region_free";
	if (clanq_ep_destroy(&w->ep))
		return "writer: ep_destroy";
	if (clanq_close(&w->dev))
		return "writer: close";
	return NULL;
}

/*
 * RDMA-write len bytes of src to offset off of the owner's region and
 * wait for the completion: 0, or the completion's status, or -ETIMEDOUT.
 */
static inline int tw_rdma_write(struct tw_writer *w, uint64_t off,
				const void *src, size_t len, int64_t timeout_ns)
{
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	uint64_t cookie = ++w->cookie;
	int err;

	memcpy(w->src.mem, src, len);
	q = itest_rdma_req(w->src.addr.id, w->ap.id, 0, off, len, cookie,
			   CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
	err = clanq_rdma_post(&w->ep, &q);
	if (err)
		return err;
	if (!itest_wait_comp(&w->ep, &c, timeout_ns))
		return -ETIMEDOUT;
	if (c.cookie != cookie)
		return -EPROTO;
	if (c.status)
		return c.status;
	return c.len == len ? 0 : -EPROTO;
}

#endif /* CLANQ_TW_FIXTURE_H */
