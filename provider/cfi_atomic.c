// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: atomics, the ones clanq's RDMA engine has: on one
 * 8-byte word of a peer's registration (8-byte aligned in it),
 * FI_UINT64 or FI_INT64,
 *   - fi_atomic(FI_SUM): fetch-and-add, the old value dropped;
 *   - fi_fetch_atomic(FI_SUM): fetch-and-add; (FI_ATOMIC_READ): an add
 *     of 0, which reads the word atomically;
 *   - fi_compare_atomic(FI_CSWAP): compare-and-swap.
 * The registration must grant FI_REMOTE_READ and FI_REMOTE_WRITE (the
 * import asks both, and CLANQ_AP_ATOMIC). Each is a request of the
 * engine (cfi_rma.c); the old value is copied to the result buffer when
 * its completion is taken, before the completion is reported, so result
 * buffers need no registration. Over the verbs wire, atomics need a
 * device that has them (rxe: yes; siw: no, the import is refused).
 */
#include <string.h>

#include "cfi.h"

/* count 1 of an 8-byte integer: what the engine operates on */
static int cfi_atomic_type(enum fi_datatype datatype, size_t count)
{
	if (datatype != FI_UINT64 && datatype != FI_INT64)
		return -FI_EOPNOTSUPP;
	return count == 1 ? 0 : -FI_EINVAL;
}

static ssize_t cfi_atomic_post(struct fid_ep *fep, uint32_t op,
			       uint64_t operand0, uint64_t operand1,
			       void *result, uint64_t addr, uint64_t key,
			       void *context, uint64_t flags)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct cfi_rma_req q = {
		.op = op, .len = sizeof(uint64_t), .addr = addr, .key = key,
		.context = context, .flags = flags, .result = result,
		.operand = { operand0, operand1 },
	};

	if (addr % sizeof(uint64_t))
		return -FI_EINVAL;
	return cfi_rma_submit(ep, &q);
}

static int cfi_load64(const void *p, uint64_t *v)
{
	if (!p)
		return -FI_EINVAL;
	memcpy(v, p, sizeof(*v));
	return 0;
}

/* fi_atomic() and fi_inject_atomic(): an add, the old value dropped */
static ssize_t cfi_atomic_add(struct fid_ep *fep, const void *buf, size_t count,
			      uint64_t addr, uint64_t key,
			      enum fi_datatype datatype, enum fi_op op,
			      void *context, uint64_t flags)
{
	uint64_t v;
	int ret = cfi_atomic_type(datatype, count);

	if (ret)
		return ret;
	if (op != FI_SUM)
		return -FI_EOPNOTSUPP;
	if (cfi_load64(buf, &v))
		return -FI_EINVAL;
	return cfi_atomic_post(fep, CLANQ_RDMA_OP_FADD, v, 0, NULL, addr, key,
			       context, flags);
}

static ssize_t cfi_atomic_write(struct fid_ep *fep, const void *buf,
				size_t count, void *desc, fi_addr_t dest_addr,
				uint64_t addr, uint64_t key,
				enum fi_datatype datatype, enum fi_op op,
				void *context)
{
	(void)desc;
	(void)dest_addr;
	return cfi_atomic_add(fep, buf, count, addr, key, datatype, op, context,
			      FI_COMPLETION);
}

static ssize_t cfi_atomic_inject(struct fid_ep *fep, const void *buf,
				 size_t count, fi_addr_t dest_addr,
				 uint64_t addr, uint64_t key,
				 enum fi_datatype datatype, enum fi_op op)
{
	(void)dest_addr;
	return cfi_atomic_add(fep, buf, count, addr, key, datatype, op, NULL,
			      FI_INJECT);
}

static ssize_t cfi_atomic_readwrite(struct fid_ep *fep, const void *buf,
				    size_t count, void *desc, void *result,
				    void *result_desc, fi_addr_t dest_addr,
				    uint64_t addr, uint64_t key,
				    enum fi_datatype datatype, enum fi_op op,
				    void *context)
{
	uint64_t v = 0;
	int ret = cfi_atomic_type(datatype, count);

	(void)desc;
	(void)result_desc;
	(void)dest_addr;
	if (ret)
		return ret;
	if (op != FI_SUM && op != FI_ATOMIC_READ)
		return -FI_EOPNOTSUPP;
	if (!result || (op == FI_SUM && cfi_load64(buf, &v)))
		return -FI_EINVAL;
	return cfi_atomic_post(fep, CLANQ_RDMA_OP_FADD, v, 0, result, addr, key,
			       context, FI_COMPLETION);
}

static ssize_t cfi_atomic_compwrite(struct fid_ep *fep, const void *buf,
				    size_t count, void *desc,
				    const void *compare, void *compare_desc,
				    void *result, void *result_desc,
				    fi_addr_t dest_addr, uint64_t addr,
				    uint64_t key, enum fi_datatype datatype,
				    enum fi_op op, void *context)
{
	uint64_t swap, cmp;
	int ret = cfi_atomic_type(datatype, count);

	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	(void)dest_addr;
	if (ret)
		return ret;
	if (op != FI_CSWAP)
		return -FI_EOPNOTSUPP;
	if (!result || cfi_load64(buf, &swap) || cfi_load64(compare, &cmp))
		return -FI_EINVAL;
	return cfi_atomic_post(fep, CLANQ_RDMA_OP_CAS, cmp, swap, result, addr,
			       key, context, FI_COMPLETION);
}

/* what the three kinds of call take: count 1 of the ops above */
static int cfi_atomic_valid(enum fi_datatype datatype, enum fi_op op,
			    size_t *count, int kind)
{
	static const enum fi_op ops[3][2] = {
		{ FI_SUM, FI_SUM },		/* write */
		{ FI_SUM, FI_ATOMIC_READ },	/* readwrite */
		{ FI_CSWAP, FI_CSWAP },		/* compwrite */
	};

	if (!count || cfi_atomic_type(datatype, 1) ||
	    (op != ops[kind][0] && op != ops[kind][1]))
		return -FI_EOPNOTSUPP;
	*count = 1;
	return 0;
}

static int cfi_writevalid(struct fid_ep *fep, enum fi_datatype datatype,
			  enum fi_op op, size_t *count)
{
	(void)fep;
	return cfi_atomic_valid(datatype, op, count, 0);
}

static int cfi_readwritevalid(struct fid_ep *fep, enum fi_datatype datatype,
			      enum fi_op op, size_t *count)
{
	(void)fep;
	return cfi_atomic_valid(datatype, op, count, 1);
}

static int cfi_compwritevalid(struct fid_ep *fep, enum fi_datatype datatype,
			      enum fi_op op, size_t *count)
{
	(void)fep;
	return cfi_atomic_valid(datatype, op, count, 2);
}

/* fi_query_atomic(): FI_FETCH_ATOMIC and FI_COMPARE_ATOMIC say which call */
int cfi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
		     enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags)
{
	size_t count;
	int kind = flags & FI_COMPARE_ATOMIC ? 2 : flags & FI_FETCH_ATOMIC ? 1 : 0;
	int ret;

	(void)domain;
	if (!attr || (flags & ~(uint64_t)(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC)) ||
	    (flags & FI_FETCH_ATOMIC && flags & FI_COMPARE_ATOMIC))
		return -FI_EINVAL;
	ret = cfi_atomic_valid(datatype, op, &count, kind);
	if (ret)
		return ret;
	attr->count = count;
	attr->size = sizeof(uint64_t);
	return 0;
}

static ssize_t cfi_atomic_nosys(void)
{
	return -FI_ENOSYS;	/* the iov and msg forms: not yet */
}

struct fi_ops_atomic cfi_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = cfi_atomic_write,
	.writev = (void *)cfi_atomic_nosys,
	.writemsg = (void *)cfi_atomic_nosys,
	.inject = cfi_atomic_inject,
	.readwrite = cfi_atomic_readwrite,
	.readwritev = (void *)cfi_atomic_nosys,
	.readwritemsg = (void *)cfi_atomic_nosys,
	.compwrite = cfi_atomic_compwrite,
	.compwritev = (void *)cfi_atomic_nosys,
	.compwritemsg = (void *)cfi_atomic_nosys,
	.writevalid = cfi_writevalid,
	.readwritevalid = cfi_readwritevalid,
	.compwritevalid = cfi_compwritevalid,
};
