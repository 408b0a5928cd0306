// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Regions, export/import and their mappings, through the real driver:
 * every malformed region, export, import, close and mmap request is
 * refused with the errno the ABI documents (raw ioctls, so each field
 * is tested on its own), next to a well-formed twin that succeeds; kicks
 * name only the caller's own endpoints.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2; kmemleak
 * and the kernel log are checked by the harness afterwards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "region_fixture.h"

/*
 * 1. ABI garbage.
 */

static int create_err(int fd, uint64_t addr, uint64_t size, uint32_t flags)
{
	struct clanq_ioc_region_create c;
	struct clanq_ioc_region_free f;
	int err;

	memset(&c, 0, sizeof(c));
	c.addr = addr;
	c.size = size;
	c.flags = flags;
	err = itest_ioctl_err(fd, CLANQ_IOC_REGION_CREATE, &c);
	if (!err) {		/* unexpected: do not leave it behind */
		memset(&f, 0, sizeof(f));
		f.id = c.id;
		ioctl(fd, CLANQ_IOC_REGION_FREE, &f);
	}
	return err;
}

static void malformed_region_creation_is_refused(void **state)
{
	unsigned long max_region = itest_param("max_region_bytes");
	unsigned long max_ctx = itest_param("max_ctx_bytes");
	struct clanq_ioc_region_create c;
	struct clanq_region r;
	struct clanq_dev dev;
	void *buf;
	unsigned int i;
	int fd;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	fd = dev.fd;
	buf = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);

	/* the well-formed twins of what follows */
	assert_int_equal(create_err(fd, 0, page, 0), 0);
	assert_int_equal(create_err(fd, (uintptr_t)buf, page,
				    CLANQ_REGION_REGISTER), 0);

	/* sizes: 0, past max_region_bytes, wrapping when rounded to pages */
	assert_int_equal(create_err(fd, 0, 0, 0), EINVAL);
	assert_int_equal(create_err(fd, 0, max_region + 1, 0), EINVAL);
	assert_int_equal(create_err(fd, 0, ~0ull, 0), EINVAL);
	assert_int_equal(create_err(fd, 0, ~0ull - page + 2, 0), EINVAL);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 0,
				    CLANQ_REGION_REGISTER), EINVAL);
	assert_int_equal(create_err(fd, (uintptr_t)buf, max_region + 1,
				    CLANQ_REGION_REGISTER), EINVAL);
	/* a size the driver allows, but this context's budget does not */
	if (max_region > max_ctx)
		assert_int_equal(create_err(fd, 0, max_ctx + page, 0), ENOMEM);

	/* flags, reserved words, out fields, an address for an allocation */
	assert_int_equal(create_err(fd, 0, page, 1u << 1), EINVAL);
	assert_int_equal(create_err(fd, 0, page, 0x80000000u), EINVAL);
	assert_int_equal(create_err(fd, (uintptr_t)buf, page, 0), EINVAL);
	for (i = 0; i < ARRAY_SIZE(c.reserved); i++) {
		memset(&c, 0, sizeof(c));
		c.size = page;
		c.reserved[i] = 1ull << 40;
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_REGION_CREATE, &c),
				 EINVAL);
	}

	/* nothing was created by any of the refusals */
	assert_int_equal(clanq_region_alloc(&dev, &r, page), 0);
	assert_int_equal(clanq_region_free(&r), 0);
	munmap(buf, 4 * page);
	assert_int_equal(clanq_close(&dev), 0);
}

static void registering_memory_that_cannot_be_pinned_is_refused(void **state)
{
	struct clanq_dev dev;
	char *buf, *ro;
	int fd;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	fd = dev.fd;
	buf = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	ro = mmap(NULL, 2 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED);

	/* a hole in the middle: the first pages pin, the third cannot */
	assert_int_equal(munmap(buf + 2 * page, page), 0);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 2 * page,
				    CLANQ_REGION_REGISTER), 0);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 3 * page,
				    CLANQ_REGION_REGISTER), EFAULT);
	assert_int_equal(create_err(fd, (uintptr_t)(buf + 2 * page), 1,
				    CLANQ_REGION_REGISTER), EFAULT);
	/* read-only memory: the engine would write into it */
	assert_int_equal(create_err(fd, (uintptr_t)ro, page,
				    CLANQ_REGION_REGISTER), EFAULT);
	assert_int_equal(create_err(fd, (uintptr_t)buf, 4 * page,
				    CLANQ_REGION_REGISTER), EFAULT);
	/* address 0 (the ABI's "no memory"), and ranges that wrap */
	assert_int_equal(create_err(fd, 0, page, CLANQ_REGION_REGISTER), EINVAL);
	assert_int_equal(create_err(fd, ~0ull - page + 1, 2 * page,
				    CLANQ_REGION_REGISTER), EINVAL);
	assert_int_equal(create_err(fd, ~0ull, 2, CLANQ_REGION_REGISTER),
			 EINVAL);
	/* kernel addresses are not the caller's memory */
	assert_int_equal(create_err(fd, 0xffff888000000000ull, page,
				    CLANQ_REGION_REGISTER), EINVAL);

	munmap(buf, 4 * page);
	munmap(ro, 2 * page);
	assert_int_equal(clanq_close(&dev), 0);
}

static int free_err(int fd, uint32_t id, uint32_t flags, uint64_t reserved)
{
	struct clanq_ioc_region_free f;

	memset(&f, 0, sizeof(f));
	f.id = id;
	f.flags = flags;
	f.reserved[1] = reserved;
	return itest_ioctl_err(fd, CLANQ_IOC_REGION_FREE, &f);
}

static int export_err(int fd, uint32_t id, uint32_t rights, uint64_t *key)
{
	struct clanq_ioc_region_export e;
	int err;

	memset(&e, 0, sizeof(e));
	e.id = id;
	e.rights = rights;
	err = itest_ioctl_err(fd, CLANQ_IOC_REGION_EXPORT, &e);
	if (!err && key)
		*key = e.key;
	return err;
}

static void free_and_export_name_only_the_callers_own_regions(void **state)
{
	struct clanq_ioc_region_export e;
	struct clanq_dev a, b, a1;
	struct clanq_region r, s;
	uint64_t key = 0, key2 = 0;	/* set by export_err() on success */
	struct clanq_ap ap;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 0), 0);	/* same node */
	assert_int_equal(clanq_open_nic(&a1, 1), 0);
	assert_int_equal(clanq_region_alloc(&a, &r, page), 0);
	assert_int_equal(clanq_region_alloc(&a, &s, page), 0);
	assert_int_equal(r.addr.node, 0);
	assert_true(r.addr.id != s.addr.id);

	/* unknown ids */
	assert_int_equal(free_err(a.fd, ~0u, 0, 0), ENOENT);
	assert_int_equal(free_err(a.fd, 0, 0, 0), ENOENT);
	assert_int_equal(export_err(a.fd, ~0u, CLANQ_RIGHT_WRITE, NULL), ENOENT);
	/* another context's region, on the same node or another */
	assert_int_equal(free_err(b.fd, r.addr.id, 0, 0), ENOENT);
	assert_int_equal(export_err(b.fd, r.addr.id, CLANQ_RIGHT_WRITE, NULL),
			 ENOENT);
	assert_int_equal(free_err(a1.fd, r.addr.id, 0, 0), ENOENT);
	assert_int_equal(export_err(a1.fd, r.addr.id, CLANQ_RIGHTS_ALL, NULL),
			 ENOENT);
	/* flags and reserved words, with an id that is fine */
	assert_int_equal(free_err(a.fd, r.addr.id, 1, 0), EINVAL);
	assert_int_equal(free_err(a.fd, r.addr.id, 0, 1), EINVAL);
	/* rights: none, unknown bits */
	assert_int_equal(export_err(a.fd, r.addr.id, 0, NULL), EINVAL);
	assert_int_equal(export_err(a.fd, r.addr.id, 1u << 2, NULL), EINVAL);
	assert_int_equal(export_err(a.fd, r.addr.id,
				    CLANQ_RIGHTS_ALL | 0x80000000u, NULL),
			 EINVAL);
	/* flags: unknown bits; the reserved words after them */
	for (i = 0; i < 3; i++) {
		memset(&e, 0, sizeof(e));
		e.id = r.addr.id;
		e.rights = CLANQ_RIGHT_WRITE;
		if (i == 0)
			e.flags = ~CLANQ_EXPORT_FLAGS;
		else if (i == 1)
			e.reserved0 = 1;
		else
			e.reserved = 1ull << 63;
		assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_REGION_EXPORT, &e),
				 EINVAL);
	}

	/* none of that touched the region: it exports, once */
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHTS_ALL, &key), 0);
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHTS_ALL, NULL),
			 EBUSY);
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHT_READ, NULL),
			 EBUSY);
	assert_int_equal(export_err(a.fd, s.addr.id, CLANQ_RIGHTS_ALL, &key2), 0);
	assert_true(key != key2);
	/* a peer imports it with the key; the failed free did nothing */
	assert_int_equal(clanq_ap_import(&b, &ap, r.addr, key, 0, page,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);

	/* freed once; then it is unknown to free and export alike */
	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(free_err(a.fd, r.addr.id, 0, 0), ENOENT);
	assert_int_equal(export_err(a.fd, r.addr.id, CLANQ_RIGHT_WRITE, NULL),
			 ENOENT);
	assert_int_equal(clanq_ap_import(&b, &ap, r.addr, key, 0, page,
					 CLANQ_RIGHTS_ALL), -ENOENT);
	assert_int_equal(clanq_region_free(&s), 0);
	assert_int_equal(clanq_close(&a1), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

static int import_err(int fd, struct clanq_addr region, uint64_t key,
		      uint64_t offset, uint64_t len, uint32_t rights)
{
	struct clanq_ioc_ap_import im;
	struct clanq_ioc_ap_close c;
	int err;

	memset(&im, 0, sizeof(im));
	im.region = region;
	im.key = key;
	im.offset = offset;
	im.len = len;
	im.rights = rights;
	err = itest_ioctl_err(fd, CLANQ_IOC_AP_IMPORT, &im);
	if (!err) {
		memset(&c, 0, sizeof(c));
		c.id = im.id;
		if (ioctl(fd, CLANQ_IOC_AP_CLOSE, &c) < 0)
			fail_msg("closing aperture %u: %s", im.id,
				 strerror(errno));
	}
	return err;
}

static int close_err(int fd, uint32_t id, uint32_t flags)
{
	struct clanq_ioc_ap_close c;

	memset(&c, 0, sizeof(c));
	c.id = id;
	c.flags = flags;
	return itest_ioctl_err(fd, CLANQ_IOC_AP_CLOSE, &c);
}

static void malformed_imports_and_closes_are_refused(void **state)
{
	/* not a page multiple: bounds are the size asked for, not mapped */
	const uint64_t R = 2 * page + 1000;
	struct clanq_region rw, ro, wo, never;
	struct clanq_addr a, bad;
	struct clanq_dev exp, imp, other;
	struct clanq_ioc_ap_import im;
	struct clanq_ap ap;
	uint64_t key, key_ro, key_wo;
	unsigned int i;
	int fd;

	(void)state;
	assert_int_equal(clanq_open_nic(&exp, 0), 0);
	assert_int_equal(clanq_open_nic(&imp, 1), 0);
	assert_int_equal(clanq_open_nic(&other, 1), 0);
	fd = imp.fd;
	assert_int_equal(clanq_region_alloc(&exp, &rw, R), 0);
	assert_int_equal(clanq_region_alloc(&exp, &ro, page), 0);
	assert_int_equal(clanq_region_alloc(&exp, &wo, page), 0);
	assert_int_equal(clanq_region_alloc(&exp, &never, page), 0);
	assert_int_equal(clanq_region_export(&rw, CLANQ_RIGHTS_ALL, &key), 0);
	assert_int_equal(clanq_region_export(&ro, CLANQ_RIGHT_READ, &key_ro), 0);
	assert_int_equal(clanq_region_export(&wo, CLANQ_RIGHT_WRITE, &key_wo), 0);
	a = rw.addr;

	/* the well-formed twins: all of it, and its very last byte */
	assert_int_equal(import_err(fd, a, key, 0, R, CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(import_err(fd, a, key, R - 1, 1, CLANQ_RIGHT_WRITE), 0);

	/* wrong keys read exactly as an unknown region does */
	assert_int_equal(import_err(fd, a, key ^ 1, 0, R, CLANQ_RIGHT_WRITE),
			 ENOENT);
	assert_int_equal(import_err(fd, a, key ^ (1ull << 63), 0, R,
				    CLANQ_RIGHT_WRITE), ENOENT);
	assert_int_equal(import_err(fd, a, 0, 0, R, CLANQ_RIGHT_WRITE), ENOENT);
	assert_int_equal(import_err(fd, a, key_ro, 0, page, CLANQ_RIGHT_READ),
			 ENOENT);
	bad = a;
	bad.id = ~0u;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 ENOENT);
	/* the right id on the wrong node */
	bad = a;
	bad.node = 1;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 ENOENT);
	/* nodes that do not exist (as CLANQ_IOC_OOB_SEND reports them) */
	bad = a;
	bad.node = 7;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 EHOSTUNREACH);
	bad.node = CLANQ_NODE_INVALID;
	assert_int_equal(import_err(fd, bad, key, 0, 1, CLANQ_RIGHT_WRITE),
			 EHOSTUNREACH);
	/* never exported: no key opens it, not even 0 */
	assert_int_equal(import_err(fd, never.addr, 0, 0, 1, CLANQ_RIGHT_READ),
			 ENOENT);
	assert_int_equal(import_err(fd, never.addr, key, 0, 1, CLANQ_RIGHT_READ),
			 ENOENT);

	/* rights beyond the export */
	assert_int_equal(import_err(fd, ro.addr, key_ro, 0, page,
				    CLANQ_RIGHT_READ), 0);
	assert_int_equal(import_err(fd, ro.addr, key_ro, 0, page,
				    CLANQ_RIGHT_WRITE), EACCES);
	assert_int_equal(import_err(fd, ro.addr, key_ro, 0, page,
				    CLANQ_RIGHTS_ALL), EACCES);
	assert_int_equal(import_err(fd, wo.addr, key_wo, 0, page,
				    CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(import_err(fd, wo.addr, key_wo, 0, page,
				    CLANQ_RIGHT_READ), EACCES);
	/* rights that mean nothing */
	assert_int_equal(import_err(fd, a, key, 0, R, 0), EINVAL);
	assert_int_equal(import_err(fd, a, key, 0, R, 1u << 2), EINVAL);
	assert_int_equal(import_err(fd, a, key, 0, R, CLANQ_RIGHTS_ALL | (1u << 31)),
			 EINVAL);

	/* ranges: past the end, straddling it, wrapping around */
	assert_int_equal(import_err(fd, a, key, 0, R + 1, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, R, 1, CLANQ_RIGHT_WRITE), ERANGE);
	assert_int_equal(import_err(fd, a, key, R - 1, 2, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, 2 * page, 1001,
				    CLANQ_RIGHT_WRITE), ERANGE);
	assert_int_equal(import_err(fd, a, key, ~0ull, 2, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, 1, ~0ull, CLANQ_RIGHT_WRITE),
			 ERANGE);
	assert_int_equal(import_err(fd, a, key, ~0ull - page + 1, 2 * page,
				    CLANQ_RIGHT_WRITE), ERANGE);
	/* an empty window, inside the region or at its end */
	assert_int_equal(import_err(fd, a, key, 0, 0, CLANQ_RIGHT_WRITE), EINVAL);
	assert_int_equal(import_err(fd, a, key, R, 0, CLANQ_RIGHT_WRITE), EINVAL);

	/* flags and reserved words of an otherwise good import */
	memset(&im, 0, sizeof(im));
	im.region = a;
	im.key = key;
	im.len = 1;
	im.rights = CLANQ_RIGHT_WRITE;
	/* every flag bit nobody has defined */
	for (i = 0; i < 32; i++) {
		if (CLANQ_AP_FLAGS & (1u << i))
			continue;
		im.flags = 1u << i;
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_IMPORT, &im), EINVAL);
	}
	for (i = 0; i < ARRAY_SIZE(im.reserved); i++) {
		im.flags = 0;
		im.reserved[i] = 1;
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_AP_IMPORT, &im),
				 EINVAL);
		im.reserved[i] = 0;
	}

	/* closes: unknown ids, another context's aperture, flags */
	assert_int_equal(clanq_ap_import(&imp, &ap, a, key, 0, R,
					 CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(close_err(fd, ~0u, 0), ENOENT);
	assert_int_equal(close_err(fd, 0, 0), ENOENT);
	assert_int_equal(close_err(other.fd, ap.id, 0), ENOENT);
	assert_int_equal(close_err(exp.fd, ap.id, 0), ENOENT);
	assert_int_equal(close_err(fd, ap.id, 1), EINVAL);
	assert_int_equal(clanq_ap_close(&ap), 0);	/* still there */
	assert_int_equal(close_err(fd, ap.id, 0), ENOENT);	/* and gone */

	assert_int_equal(clanq_region_free(&rw), 0);
	assert_int_equal(clanq_region_free(&ro), 0);
	assert_int_equal(clanq_region_free(&wo), 0);
	assert_int_equal(clanq_region_free(&never), 0);
	assert_int_equal(clanq_close(&other), 0);
	assert_int_equal(clanq_close(&imp), 0);
	assert_int_equal(clanq_close(&exp), 0);
}

static int mmap_err(int fd, size_t len, int prot, int flags, uint64_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, (off_t)off);

	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

/* Every wrong way to map what (fd, off, size) names, and the right one. */
static void mmap_variants_refused(int fd, uint64_t off, size_t size, int prot)
{
	assert_int_equal(mmap_err(fd, size, prot, MAP_SHARED, off), 0);
	assert_int_equal(mmap_err(fd, size + page, prot, MAP_SHARED, off), EINVAL);
	if (size > page)
		assert_int_equal(mmap_err(fd, size - page, prot, MAP_SHARED, off),
				 EINVAL);
	assert_int_equal(mmap_err(fd, size, prot, MAP_SHARED, off + page), EINVAL);
	assert_int_equal(mmap_err(fd, size, prot, MAP_SHARED, off + 1000 * page),
			 EINVAL);
	assert_int_equal(mmap_err(fd, size, prot, MAP_PRIVATE, off), EINVAL);
}

static void wrong_mappings_of_regions_and_apertures_are_refused(void **state)
{
	struct clanq_dev exp, imp, fresh;
	struct clanq_ioc_region_create c;
	struct clanq_ap ap, ap_ro, ap_wo, sub;
	struct clanq_region r;
	unsigned char *p, *mem;
	uint64_t key;
	size_t i;

	(void)state;
	assert_int_equal(clanq_open_nic(&exp, 0), 0);
	assert_int_equal(clanq_open_nic(&imp, 1), 0);
	assert_int_equal(clanq_open_nic(&fresh, 1), 0);

	/* the owner's mapping of a region, created raw for its offset */
	memset(&c, 0, sizeof(c));
	c.size = 3 * page - 10;
	assert_int_equal(itest_ioctl_err(exp.fd, CLANQ_IOC_REGION_CREATE, &c), 0);
	assert_int_equal(c.mmap_size, 3 * page);
	mmap_variants_refused(exp.fd, c.mmap_offset, c.mmap_size,
			      PROT_READ | PROT_WRITE);
	assert_int_equal(mmap_err(fresh.fd, c.mmap_size, PROT_READ, MAP_SHARED,
				  c.mmap_offset), EINVAL);
	assert_int_equal(mmap_err(imp.fd, c.mmap_size, PROT_READ, MAP_SHARED,
				  c.mmap_offset), EINVAL);
	mem = mmap(NULL, c.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   exp.fd, (off_t)c.mmap_offset);
	assert_true(mem != MAP_FAILED);
	assert_true(all_bytes(mem, c.mmap_size, 0));	/* zeroed */
	fill_pattern(mem, 3 * page, 0x5eed);
	memset(&r, 0, sizeof(r));
	r.fd = exp.fd;
	r.addr.node = exp.node;
	r.addr.id = c.id;
	r.mem = mem;
	r.size = c.size;
	r.map_size = c.mmap_size;
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHTS_ALL, &key), 0);

	/* an aperture onto all of it (the asked size, not the mapped one) */
	assert_int_equal(clanq_ap_import(&imp, &ap, r.addr, key, 0, r.size,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(ap.map_size, 3 * page);
	assert_int_equal(ap.map_delta, 0);
	mmap_variants_refused(imp.fd, ap.mmap_offset, ap.map_size,
			      PROT_READ | PROT_WRITE);
	/* another context's fd: the offset names nothing there */
	assert_int_equal(mmap_err(fresh.fd, ap.map_size, PROT_READ, MAP_SHARED,
				  ap.mmap_offset), EINVAL);
	assert_int_equal(clanq_ap_map(&ap), 0);
	assert_int_equal(memcmp(ap.base, mem, r.size), 0);

	/* an import without WRITE maps read-only, and stays read-only */
	assert_int_equal(clanq_ap_import(&imp, &ap_ro, r.addr, key, 0, r.size,
					 CLANQ_RIGHT_READ), 0);
	assert_int_equal(mmap_err(imp.fd, ap_ro.map_size, PROT_READ | PROT_WRITE,
				  MAP_SHARED, ap_ro.mmap_offset), EACCES);
	assert_int_equal(mmap_err(imp.fd, ap_ro.map_size, PROT_WRITE,
				  MAP_SHARED, ap_ro.mmap_offset), EACCES);
	assert_int_equal(clanq_ap_map(&ap_ro), 0);
	assert_int_equal(memcmp(ap_ro.base, mem, r.size), 0);
	assert_int_equal(mprotect(ap_ro.map, ap_ro.map_size,
				  PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(clanq_ap_write(&ap_ro, 0, "x", 1), -ENXIO);

	/*
	 * An import without READ cannot be mapped at all (a mapping can
	 * always be read): it is RDMA-only, and offers no offset to map.
	 */
	assert_int_equal(clanq_ap_import(&imp, &ap_wo, r.addr, key, 0, r.size,
					 CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(ap_wo.map_size, 0);
	assert_int_equal(ap_wo.mmap_offset, 0);
	assert_int_equal(clanq_ap_map(&ap_wo), -EOPNOTSUPP);
	assert_int_equal(clanq_ap_write(&ap_wo, 0, "x", 1), -ENXIO);
	assert_int_equal(clanq_ap_close(&ap_wo), 0);

	/*
	 * A window inside the region: whole pages are mapped, its first
	 * byte at map_delta; PIO through it lands in the owner's memory.
	 */
	assert_int_equal(clanq_ap_import(&imp, &sub, r.addr, key, page + 100,
					 200, CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(sub.map_size, page);
	assert_int_equal(sub.map_delta, 100);
	mmap_variants_refused(imp.fd, sub.mmap_offset, sub.map_size,
			      PROT_READ | PROT_WRITE);
	assert_int_equal(clanq_ap_map(&sub), 0);
	assert_int_equal(memcmp(sub.base, mem + page + 100, 200), 0);
	p = malloc(200);
	assert_non_null(p);
	for (i = 0; i < 200; i++)
		p[i] = (unsigned char)(i * 7 + 3);
	assert_int_equal(clanq_ap_write(&sub, 0, p, 200), 0);
	assert_int_equal(memcmp(mem + page + 100, p, 200), 0);
	assert_int_equal(memcmp(ap.base + page + 100, p, 200), 0);
	assert_int_equal(memcmp(ap_ro.base + page + 100, p, 200), 0);
	assert_int_equal(clanq_ap_write(&sub, 1, p, 200), -ERANGE);
	free(p);

	assert_int_equal(clanq_ap_close(&sub), 0);
	assert_int_equal(clanq_ap_close(&ap_ro), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&r), 0);	/* and unmaps mem */
	assert_int_equal(clanq_close(&fresh), 0);
	assert_int_equal(clanq_close(&imp), 0);
	assert_int_equal(clanq_close(&exp), 0);
}

static void kicks_name_only_the_callers_own_endpoints(void **state)
{
	struct clanq_ioc_rdma_kick k;
	struct clanq_dev a, b;
	struct clanq_ep ep;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 1), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_ep_create(&a, &ep, 0), 0);
	memset(&k, 0, sizeof(k));
	k.ep = ep.addr.id;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), 0);
	assert_int_equal(itest_ioctl_err(b.fd, CLANQ_IOC_RDMA_KICK, &k), ENOENT);
	k.ep = ~0u;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), ENOENT);
	k.ep = ep.addr.id;
	k.flags = 1;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), EINVAL);
	k.flags = 0;
	for (i = 0; i < ARRAY_SIZE(k.reserved); i++) {
		k.reserved[i] = 1;
		assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k),
				 EINVAL);
		k.reserved[i] = 0;
	}
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	k.ep = ep.addr.id;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_RDMA_KICK, &k), ENOENT);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(malformed_region_creation_is_refused),
		T(registering_memory_that_cannot_be_pinned_is_refused),
		T(free_and_export_name_only_the_callers_own_regions),
		T(malformed_imports_and_closes_are_refused),
		T(wrong_mappings_of_regions_and_apertures_are_refused),
		T(kicks_name_only_the_callers_own_endpoints),
	};

	page = (size_t)sysconf(_SC_PAGESIZE);
	return cmocka_run_group_tests_name("region_abi", tests, NULL, NULL);
}
