// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: regions (memory the engine and peers may use) and apertures
 * (windows onto peers' regions). PIO through a mapped aperture is inline
 * in clanq.h.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <clanq.h>

static int clanq_region_create(struct clanq_dev *dev, struct clanq_region *r,
			       struct clanq_ioc_region_create *c)
{
	struct clanq_ioc_region_free f;
	void *mem = (void *)(uintptr_t)c->addr;
	int err;

	if (ioctl(dev->fd, CLANQ_IOC_REGION_CREATE, c) < 0)
		return -errno;
	if (c->mmap_size) {
		mem = mmap(NULL, c->mmap_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, dev->fd, (off_t)c->mmap_offset);
		if (mem == MAP_FAILED) {
			err = -errno;
			memset(&f, 0, sizeof(f));
			f.id = c->id;
			ioctl(dev->fd, CLANQ_IOC_REGION_FREE, &f);
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
	c.addr = (__u64)(uintptr_t)addr;
	c.size = size;
	return clanq_region_create(dev, r, &c);
}

int clanq_region_free(struct clanq_region *r)
{
	struct clanq_ioc_region_free f;
	int err = 0;

	memset(&f, 0, sizeof(f));
	f.id = r->addr.id;
	if (ioctl(r->fd, CLANQ_IOC_REGION_FREE, &f) < 0)
		err = -errno;
	if (r->map_size && r->mem)
		munmap(r->mem, r->map_size);
	r->mem = NULL;
	r->map_size = 0;
	return err;
}

int clanq_region_export(struct clanq_region *r, __u32 rights, __u64 *key)
{
	struct clanq_ioc_region_export e;

	memset(&e, 0, sizeof(e));
	e.id = r->addr.id;
	e.rights = rights;
	if (ioctl(r->fd, CLANQ_IOC_REGION_EXPORT, &e) < 0)
		return -errno;
	*key = e.key;
	return 0;
}

int clanq_ap_import(struct clanq_dev *dev, struct clanq_ap *ap,
		    struct clanq_addr region, __u64 key, __u64 offset,
		    __u64 len, __u32 rights)
{
	struct clanq_ioc_ap_import im;

	memset(&im, 0, sizeof(im));
	im.region = region;
	im.key = key;
	im.offset = offset;
	im.len = len;
	im.rights = rights;
	if (ioctl(dev->fd, CLANQ_IOC_AP_IMPORT, &im) < 0)
		return -errno;
	memset(ap, 0, sizeof(*ap));
	ap->fd = dev->fd;
	ap->id = im.id;
	ap->rights = rights;
	ap->len = len;
	ap->mmap_offset = im.mmap_offset;
	ap->map_size = im.mmap_size;
	ap->map_delta = im.map_delta;
	return 0;
}

int clanq_ap_map(struct clanq_ap *ap)
{
	int prot = PROT_READ;
	void *map;

	if (!ap->map_size || ap->map_delta >= ap->map_size ||
	    ap->len > ap->map_size - ap->map_delta)
		return -EOPNOTSUPP;
	if (ap->map)
		return 0;
	if (ap->rights & CLANQ_RIGHT_WRITE)
		prot |= PROT_WRITE;
	map = mmap(NULL, ap->map_size, prot, MAP_SHARED, ap->fd,
		   (off_t)ap->mmap_offset);
	if (map == MAP_FAILED)
		return -errno;
	ap->map = map;
	ap->base = (char *)map + ap->map_delta;
	return 0;
}

int clanq_ap_close(struct clanq_ap *ap)
{
	struct clanq_ioc_ap_close c;
	int err = 0;

	if (ap->map)
		munmap(ap->map, ap->map_size);
	ap->map = NULL;
	ap->base = NULL;
	memset(&c, 0, sizeof(c));
	c.id = ap->id;
	if (ioctl(ap->fd, CLANQ_IOC_AP_CLOSE, &c) < 0)
		err = -errno;
	return err;
}
