// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: memory registration. A registration is a clanq region
 * over the application's memory (clanq_region_register(): pinned,
 * byte-exact), exported when a peer may reach it (FI_REMOTE_READ,
 * FI_REMOTE_WRITE) with a key that names the region
 * (CLANQ_EXPORT_KEY_NAMES_REGION): fi_mr_key() is all a peer is told, so
 * the key must carry the region's id as well as its secret. Keys are the
 * provider's (FI_MR_PROV_KEY); remote addresses are offsets into the
 * registration (no FI_MR_VIRT_ADDR).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cfi.h"

#define CFI_MR_ACCESS	(FI_SEND | FI_RECV | FI_READ | FI_WRITE | \
			 FI_REMOTE_READ | FI_REMOTE_WRITE)

static int cfi_mr_close(struct fid *fid)
{
	struct cfi_mr *mr = container_of(fid, struct cfi_mr, mr.fid);
	struct cfi_fabric *fab = mr->dom->fab;

	cfi_lock(fab);
	/* requests still using it complete -ENXIO: the engine says so */
	clanq_region_free(&mr->region);
	mr->dom->refs--;
	cfi_unlock(fab);
	free(mr);
	return 0;
}

static struct fi_ops cfi_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_mr_close,
	.bind = (void *)cfi_enosys,
	.control = (void *)cfi_enosys,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static int cfi_mr_new(struct cfi_domain *d, const struct iovec *iov,
		      size_t count, uint64_t access, uint64_t offset,
		      uint64_t flags, void *context, struct fid_mr **out)
{
	struct cfi_fabric *fab = d->fab;
	uint32_t rights = 0;
	struct cfi_mr *mr;
	int ret;

	if (!out || count != 1 || !iov || !iov[0].iov_base ||
	    !iov[0].iov_len || (access & ~CFI_MR_ACCESS) || offset || flags)
		return -FI_EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	if (access & FI_REMOTE_READ)
		rights |= CLANQ_RIGHT_READ;
	if (access & FI_REMOTE_WRITE)
		rights |= CLANQ_RIGHT_WRITE;
	cfi_lock(fab);
	ret = clanq_region_register(&fab->dev, &mr->region, iov[0].iov_base,
				    iov[0].iov_len);
	if (!ret && rights)
		ret = clanq_region_export_flags(&mr->region, rights,
						CLANQ_EXPORT_KEY_NAMES_REGION,
						&mr->mr.key);
	if (ret) {
		if (mr->region.mem)
			clanq_region_free(&mr->region);
		cfi_unlock(fab);
		CFI_WARN(FI_LOG_MR, "registering %zu bytes: %s\n",
			 iov[0].iov_len, clanq_strerror_last(&fab->dev));
		free(mr);
		return ret == -ENOMEM ? -FI_ENOMEM : cfi_errno(ret);
	}
	d->refs++;
	cfi_unlock(fab);
	mr->dom = d;
	mr->buf = iov[0].iov_base;
	mr->len = iov[0].iov_len;
	mr->access = access;
	mr->mr.fid.fclass = FI_CLASS_MR;
	mr->mr.fid.context = context;
	mr->mr.fid.ops = &cfi_mr_fi_ops;
	mr->mr.mem_desc = mr;
	*out = &mr->mr;
	return 0;
}

static int cfi_mr_reg(struct fid *fid, const void *buf, size_t len,
		      uint64_t access, uint64_t offset, uint64_t requested_key,
		      uint64_t flags, struct fid_mr **mr, void *context)
{
	struct cfi_domain *d = container_of(fid, struct cfi_domain, dom.fid);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	(void)requested_key;	/* FI_MR_PROV_KEY: the key is ours */
	if (fid->fclass != FI_CLASS_DOMAIN)
		return -FI_EINVAL;
	return cfi_mr_new(d, &iov, 1, access, offset, flags, context, mr);
}

static int cfi_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		       uint64_t access, uint64_t offset, uint64_t requested_key,
		       uint64_t flags, struct fid_mr **mr, void *context)
{
	struct cfi_domain *d = container_of(fid, struct cfi_domain, dom.fid);

	(void)requested_key;
	if (fid->fclass != FI_CLASS_DOMAIN)
		return -FI_EINVAL;
	return cfi_mr_new(d, iov, count, access, offset, flags, context, mr);
}

static int cfi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
			  uint64_t flags, struct fid_mr **mr)
{
	struct cfi_domain *d = container_of(fid, struct cfi_domain, dom.fid);

	if (fid->fclass != FI_CLASS_DOMAIN || !attr)
		return -FI_EINVAL;
	if (attr->iface != FI_HMEM_SYSTEM || attr->auth_key_size)
		return -FI_EINVAL;
	return cfi_mr_new(d, attr->mr_iov, attr->iov_count, attr->access,
			  attr->offset, flags, attr->context, mr);
}

struct fi_ops_mr cfi_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = cfi_mr_reg,
	.regv = cfi_mr_regv,
	.regattr = cfi_mr_regattr,
};

/*
 * The registration [buf, buf + len) lies in: desc's if given (checked),
 * else none (the caller registers it for the one request).
 */
struct cfi_mr *cfi_mr_of(void *desc, const void *buf, size_t len)
{
	struct cfi_mr *mr = desc;
	uintptr_t b = (uintptr_t)buf, m;

	if (!mr || mr->mr.mem_desc != mr)
		return NULL;
	m = (uintptr_t)mr->buf;
	if (b < m || b - m > mr->len || len > mr->len - (b - m))
		return NULL;
	return mr;
}
