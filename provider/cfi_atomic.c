// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: atomics, the ones clanq's RDMA engine has: on one
 * 8-byte word of a peer's registration (8-byte aligned in it),
 * FI_UINT64 or FI_INT64,
 *   - fi_atomic(FI_SUM): fetch-and-add, the old value dropped;
 *   - fi_fetch_atomic(FI_SUM): fetch-and-add; (FI_ATOMIC_READ): an add
 *     of 0, which reads the word atomically;
 *   - fi_compare_atomic(FI_CSWAP): compare-and-swap;
 * and their iov and msg forms, with one fi_ioc of one element each.
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

/* where and for whom: the peer's word, the completion's context and flags */
struct cfi_atomic_to {
	uint64_t addr, key;
	void *context;
	uint64_t flags;		/* FI_COMPLETION, FI_INJECT, FI_FENCE, ... */
	uint64_t data;		/* FI_REMOTE_CQ_DATA's (the msg forms) */
};

static ssize_t cfi_atomic_post(struct fid_ep *fep, uint32_t op,
			       uint64_t operand0, uint64_t operand1,
			       void *result, const struct cfi_atomic_to *to)
{
	struct cfi_ep *ep = container_of(fep, struct cfi_ep, ep);
	struct cfi_rma_req q = {
		.op = op, .len = sizeof(uint64_t), .addr = to->addr,
		.key = to->key, .context = to->context, .flags = to->flags,
		.data = to->data, .result = result,
		.operand = { operand0, operand1 },
	};
	uint64_t addr = to->addr;

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
			      enum fi_datatype datatype, enum fi_op op,
			      const struct cfi_atomic_to *to)
{
	uint64_t v;
	int ret = cfi_atomic_type(datatype, count);

	if (ret)
		return ret;
	if (op != FI_SUM)
		return -FI_EOPNOTSUPP;
	if (cfi_load64(buf, &v))
		return -FI_EINVAL;
	return cfi_atomic_post(fep, CLANQ_RDMA_OP_FADD, v, 0, NULL, to);
}

/* fi_fetch_atomic(): an add, or an add of 0 that reads (FI_ATOMIC_READ) */
static ssize_t cfi_atomic_fetch(struct fid_ep *fep, const void *buf,
				size_t count, void *result,
				enum fi_datatype datatype, enum fi_op op,
				const struct cfi_atomic_to *to)
{
	uint64_t v = 0;
	int ret = cfi_atomic_type(datatype, count);

	if (ret)
		return ret;
	if (op != FI_SUM && op != FI_ATOMIC_READ)
		return -FI_EOPNOTSUPP;
	if (!result || (op == FI_SUM && cfi_load64(buf, &v)))
		return -FI_EINVAL;
	return cfi_atomic_post(fep, CLANQ_RDMA_OP_FADD, v, 0, result, to);
}

/* fi_compare_atomic(): compare-and-swap */
static ssize_t cfi_atomic_cas(struct fid_ep *fep, const void *buf,
			      size_t count, const void *compare, void *result,
			      enum fi_datatype datatype, enum fi_op op,
			      const struct cfi_atomic_to *to)
{
	uint64_t swap, cmp;
	int ret = cfi_atomic_type(datatype, count);

	if (ret)
		return ret;
	if (op != FI_CSWAP)
		return -FI_EOPNOTSUPP;
	if (!result || cfi_load64(buf, &swap) || cfi_load64(compare, &cmp))
		return -FI_EINVAL;
	return cfi_atomic_post(fep, CLANQ_RDMA_OP_CAS, cmp, swap, result, to);
}

static ssize_t cfi_atomic_write(struct fid_ep *fep, const void *buf,
				size_t count, void *desc, fi_addr_t dest_addr,
				uint64_t addr, uint64_t key,
				enum fi_datatype datatype, enum fi_op op,
				void *context)
{
	struct cfi_atomic_to to = { addr, key, context, FI_COMPLETION, 0 };

	(void)desc;
	(void)dest_addr;
	return cfi_atomic_add(fep, buf, count, datatype, op, &to);
}

static ssize_t cfi_atomic_inject(struct fid_ep *fep, const void *buf,
				 size_t count, fi_addr_t dest_addr,
				 uint64_t addr, uint64_t key,
				 enum fi_datatype datatype, enum fi_op op)
{
	struct cfi_atomic_to to = { addr, key, NULL, FI_INJECT, 0 };

	(void)dest_addr;
	return cfi_atomic_add(fep, buf, count, datatype, op, &to);
}

static ssize_t cfi_atomic_readwrite(struct fid_ep *fep, const void *buf,
				    size_t count, void *desc, void *result,
				    void *result_desc, fi_addr_t dest_addr,
				    uint64_t addr, uint64_t key,
				    enum fi_datatype datatype, enum fi_op op,
				    void *context)
{
	struct cfi_atomic_to to = { addr, key, context, FI_COMPLETION, 0 };

	(void)desc;
	(void)result_desc;
	(void)dest_addr;
	return cfi_atomic_fetch(fep, buf, count, result, datatype, op, &to);
}

static ssize_t cfi_atomic_compwrite(struct fid_ep *fep, const void *buf,
				    size_t count, void *desc,
				    const void *compare, void *compare_desc,
				    void *result, void *result_desc,
				    fi_addr_t dest_addr, uint64_t addr,
				    uint64_t key, enum fi_datatype datatype,
				    enum fi_op op, void *context)
{
	struct cfi_atomic_to to = { addr, key, context, FI_COMPLETION, 0 };

	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	(void)dest_addr;
	return cfi_atomic_cas(fep, buf, count, compare, result, datatype, op, &to);
}

/*
 * The iov and msg forms: one fi_ioc of one element each, the same word;
 * the rest is what the engine cannot do in one request (-FI_EINVAL).
 * An ioc's buffer and count: NULL if there is not exactly one element.
 */
static const void *cfi_ioc_one(const struct fi_ioc *iov, size_t count)
{
	return iov && count == 1 && iov[0].count == 1 && iov[0].addr ?
	       iov[0].addr : NULL;
}

/* the msg forms' target: one fi_rma_ioc of one element */
static int cfi_msg_to(const struct fi_msg_atomic *msg, uint64_t flags,
		      struct cfi_atomic_to *to)
{
	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov ||
	    msg->rma_iov[0].count != 1)
		return -FI_EINVAL;
	to->addr = msg->rma_iov[0].addr;
	to->key = msg->rma_iov[0].key;
	to->context = msg->context;
	to->flags = flags;
	to->data = msg->data;
	return 0;
}

static ssize_t cfi_atomic_writev(struct fid_ep *fep, const struct fi_ioc *iov,
				 void **desc, size_t count, fi_addr_t dest_addr,
				 uint64_t addr, uint64_t key,
				 enum fi_datatype datatype, enum fi_op op,
				 void *context)
{
	struct cfi_atomic_to to = { addr, key, context, FI_COMPLETION, 0 };
	const void *buf = cfi_ioc_one(iov, count);

	(void)desc;
	(void)dest_addr;
	if (!buf)
		return -FI_EINVAL;
	return cfi_atomic_add(fep, buf, 1, datatype, op, &to);
}

static ssize_t cfi_atomic_writemsg(struct fid_ep *fep,
				   const struct fi_msg_atomic *msg,
				   uint64_t flags)
{
	struct cfi_atomic_to to;
	const void *buf;

	if (cfi_msg_to(msg, flags, &to))
		return -FI_EINVAL;
	buf = cfi_ioc_one(msg->msg_iov, msg->iov_count);
	if (!buf)
		return -FI_EINVAL;
	return cfi_atomic_add(fep, buf, 1, msg->datatype, msg->op, &to);
}

/* an FI_ATOMIC_READ's operand is ignored: any iov, or none, will do */
static ssize_t cfi_atomic_fetchv(struct fid_ep *fep, const struct fi_ioc *iov,
				 size_t count, struct fi_ioc *resultv,
				 size_t result_count, enum fi_datatype datatype,
				 enum fi_op op, const struct cfi_atomic_to *to)
{
	const void *buf = cfi_ioc_one(iov, count);
	void *result = (void *)cfi_ioc_one(resultv, result_count);

	if ((!buf && op != FI_ATOMIC_READ) || !result)
		return -FI_EINVAL;
	return cfi_atomic_fetch(fep, buf, 1, result, datatype, op, to);
}

static ssize_t cfi_atomic_readwritev(struct fid_ep *fep,
				     const struct fi_ioc *iov, void **desc,
				     size_t count,
				     struct fi_ioc *resultv, void **result_desc,
				     size_t result_count, fi_addr_t dest_addr,
				     uint64_t addr, uint64_t key,
				     enum fi_datatype datatype, enum fi_op op,
				     void *context)
{
	struct cfi_atomic_to to = { addr, key, context, FI_COMPLETION, 0 };

	(void)desc;
	(void)result_desc;
	(void)dest_addr;
	return cfi_atomic_fetchv(fep, iov, count, resultv, result_count,
				 datatype, op, &to);
}

static ssize_t cfi_atomic_readwritemsg(struct fid_ep *fep,
				       const struct fi_msg_atomic *msg,
				       struct fi_ioc *resultv, void **result_desc,
				       size_t result_count, uint64_t flags)
{
	struct cfi_atomic_to to;

	(void)result_desc;
	if (cfi_msg_to(msg, flags, &to) || (flags & FI_INJECT))
		return -FI_EINVAL;	/* a result cannot be injected */
	return cfi_atomic_fetchv(fep, msg->msg_iov, msg->iov_count, resultv,
				 result_count, msg->datatype, msg->op, &to);
}

static ssize_t cfi_atomic_casv(struct fid_ep *fep, const struct fi_ioc *iov,
			       size_t count, const struct fi_ioc *comparev,
			       size_t compare_count, struct fi_ioc *resultv,
			       size_t result_count, enum fi_datatype datatype,
			       enum fi_op op, const struct cfi_atomic_to *to)
{
	const void *buf = cfi_ioc_one(iov, count);
	const void *compare = cfi_ioc_one(comparev, compare_count);
	void *result = (void *)cfi_ioc_one(resultv, result_count);

	if (!buf || !compare || !result)
		return -FI_EINVAL;
	return cfi_atomic_cas(fep, buf, 1, compare, result, datatype, op, to);
}

static ssize_t cfi_atomic_compwritev(struct fid_ep *fep,
				     const struct fi_ioc *iov, void **desc,
				     size_t count,
				     const struct fi_ioc *comparev,
				     void **compare_desc, size_t compare_count,
				     struct fi_ioc *resultv, void **result_desc,
				     size_t result_count, fi_addr_t dest_addr,
				     uint64_t addr, uint64_t key,
				     enum fi_datatype datatype, enum fi_op op,
				     void *context)
{
	struct cfi_atomic_to to = { addr, key, context, FI_COMPLETION, 0 };

	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	(void)dest_addr;
	return cfi_atomic_casv(fep, iov, count, comparev, compare_count, resultv,
			       result_count, datatype, op, &to);
}

static ssize_t cfi_atomic_compwritemsg(struct fid_ep *fep,
				       const struct fi_msg_atomic *msg,
				       const struct fi_ioc *comparev,
				       void **compare_desc, size_t compare_count,
				       struct fi_ioc *resultv, void **result_desc,
				       size_t result_count, uint64_t flags)
{
	struct cfi_atomic_to to;

	(void)compare_desc;
	(void)result_desc;
	if (cfi_msg_to(msg, flags, &to) || (flags & FI_INJECT))
		return -FI_EINVAL;
	return cfi_atomic_casv(fep, msg->msg_iov, msg->iov_count, comparev,
			       compare_count, resultv, result_count,
			       msg->datatype, msg->op, &to);
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

struct fi_ops_atomic cfi_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = cfi_atomic_write,
	.writev = cfi_atomic_writev,
	.writemsg = cfi_atomic_writemsg,
	.inject = cfi_atomic_inject,
	.readwrite = cfi_atomic_readwrite,
	.readwritev = cfi_atomic_readwritev,
	.readwritemsg = cfi_atomic_readwritemsg,
	.compwrite = cfi_atomic_compwrite,
	.compwritev = cfi_atomic_compwritev,
	.compwritemsg = cfi_atomic_compwritemsg,
	.writevalid = cfi_writevalid,
	.readwritevalid = cfi_readwritevalid,
	.compwritevalid = cfi_compwritevalid,
};
