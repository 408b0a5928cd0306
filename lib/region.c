// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: regions (memory the engine and peers may use) and apertures
 * (windows onto peers' regions). PIO through a mapped aperture, and the
 * look at the armed bitmap after it, are inline in clanq.h.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <clanq.h>

#include "fork.h"

static int clanq_region_create(struct clanq_dev *dev, struct clanq_region *r,
			       struct clanq_ioc_region_create *c)
{
	struct clanq_ioc_region_free f;
	void *mem = (void *)(uintptr_t)c->addr;
	int err;

	if (clanq_ioctl(dev->fd, CLANQ_IOC_REGION_CREATE, c) < 0)
		return -errno;
	if (c->mmap_size) {
		mem = mmap(NULL, c->mmap_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, dev->fd, (off_t)c->mmap_offset);
		if (mem == MAP_FAILED) {
			err = -errno;
			memset(&f, 0, sizeof(f));
			f.id = c->id;
			clanq_ioctl(dev->fd, CLANQ_IOC_REGION_FREE, &f);
			return err;
		}
	}
	r->fd = dev->fd;
	r->addr.node = dev->node;
	r->addr.id = c->id;
	r->mem = mem;
	r->size = c->size;
	r->map_size = c->mmap_size;
	return 0;
}

int clanq_region_alloc(struct clanq_dev *dev, struct clanq_region *r,
		       size_t size)
{
	struct clanq_ioc_region_create c;

	memset(&c, 0, sizeof(c));
	c.size = size;
	return clanq_region_create(dev, r, &c);
}

int clanq_region_register(struct clanq_dev *dev, struct clanq_region *r,
			  void *addr, size_t size)
{
	struct clanq_ioc_region_create c;

	memset(&c, 0, sizeof(c));
	c.flags = CLANQ_REGION_REGISTER;
	c.addr = (uint64_t)(uintptr_t)addr;
	c.size = size;
	return clanq_region_create(dev, r, &c);
}

int clanq_region_free(struct clanq_region *r)
{
	struct clanq_ioc_region_free f;
	int err = 0;

	memset(&f, 0, sizeof(f));
	f.id = r->addr.id;
	if (clanq_ioctl(r->fd, CLANQ_IOC_REGION_FREE, &f) < 0)
		err = -errno;
	if (r->map_size && r->mem)
		munmap(r->mem, r->map_size);
	r->mem = NULL;
	r->map_size = 0;
	return err;
}

int clanq_region_export_flags(struct clanq_region *r, uint32_t rights,
			      uint32_t flags, uint64_t *key)
{
	struct clanq_ioc_region_export e;

	memset(&e, 0, sizeof(e));
	e.id = r->addr.id;
	e.rights = rights;
	e.flags = flags;
	if (clanq_ioctl(r->fd, CLANQ_IOC_REGION_EXPORT, &e) < 0)
		return -errno;
	*key = e.key;
	return 0;
}

int clanq_region_export(struct clanq_region *r, uint32_t rights, uint64_t *key)
{
	return clanq_region_export_flags(r, rights, 0, key);
}

int clanq_ap_import(struct clanq_dev *dev, struct clanq_ap *ap,
		    struct clanq_addr region, uint64_t key, uint64_t offset,
		    uint64_t len, uint32_t rights)
{
	struct clanq_ap_attr none = { 0, 0, 0 };

	return clanq_ap_import_attr(dev, ap, region, key, offset, len, rights,
				    &none);
}

int clanq_ap_import_attr(struct clanq_dev *dev, struct clanq_ap *ap,
			 struct clanq_addr region, uint64_t key, uint64_t offset,
			 uint64_t len, uint32_t rights,
			 const struct clanq_ap_attr *attr)
{
	struct clanq_ioc_ap_import im;

	memset(&im, 0, sizeof(im));
	im.region = region;
	im.key = key;
	im.offset = offset;
	im.len = len;
	im.rights = rights;
	im.flags = attr->flags;
	im.notify_ep = attr->notify_ep;
	im.notify_cookie = attr->notify_cookie;
	if (clanq_ioctl(dev->fd, CLANQ_IOC_AP_IMPORT, &im) < 0)
		return -errno;
	memset(ap, 0, sizeof(*ap));
	ap->fd = dev->fd;
	ap->id = im.id;
	ap->rights = rights;
	ap->len = len;
	ap->mmap_offset = im.mmap_offset;
	ap->map_size = im.mmap_size;
	ap->map_delta = im.map_delta;
	ap->region_off = offset;
	ap->armed_mmap_offset = im.armed_mmap_offset;
	ap->armed_map_size = im.armed_mmap_size;
	return 0;
}

int clanq_ap_map(struct clanq_ap *ap)
{
	/* the bitmap has a bit for every 64 bytes of the window */
	uint64_t armed_bytes = ((ap->region_off + ap->len + 63) / 64 + 7) / 8;
	int prot = PROT_READ;
	void *map, *armed = NULL;
	int err;

	if (!ap->map_size || ap->map_delta >= ap->map_size ||
	    ap->len > ap->map_size - ap->map_delta)
		return -EOPNOTSUPP;
	if (ap->map)
		return 0;
	if (ap->armed_map_size) {
		if (ap->armed_map_size < armed_bytes)
			return -EPROTO;
		armed = mmap(NULL, ap->armed_map_size, PROT_READ, MAP_SHARED,
			     ap->fd, (off_t)ap->armed_mmap_offset);
		if (armed == MAP_FAILED)
			return -errno;
	}
	if (ap->rights & CLANQ_RIGHT_WRITE)
		prot |= PROT_WRITE;
	map = mmap(NULL, ap->map_size, prot, MAP_SHARED, ap->fd,
		   (off_t)ap->mmap_offset);
	if (map == MAP_FAILED) {
		err = -errno;
		if (armed)
			munmap(armed, ap->armed_map_size);
		return err;
	}
	ap->map = map;
	ap->base = (char *)map + ap->map_delta;
	ap->armed = armed;
	return 0;
}

int clanq_ap_flush_armed(struct clanq_ap *ap, uint64_t off, size_t len)
{
	struct clanq_ioc_ap_flush f;

	memset(&f, 0, sizeof(f));
	f.ap = ap->id;
	f.off = off;
	f.len = len;
	if (clanq_ioctl(ap->fd, CLANQ_IOC_AP_FLUSH, &f) < 0)
		return -errno;
	return 0;
}

int clanq_ap_close(struct clanq_ap *ap)
{
	struct clanq_ioc_ap_close c;
	int err = 0;

	if (ap->map)
		munmap(ap->map, ap->map_size);
	if (ap->armed)
		munmap((void *)ap->armed, ap->armed_map_size);
	ap->map = NULL;
	ap->base = NULL;
	ap->armed = NULL;
	memset(&c, 0, sizeof(c));
	c.id = ap->id;
	if (clanq_ioctl(ap->fd, CLANQ_IOC_AP_CLOSE, &c) < 0)
		err = -errno;
	return err;
}
