// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the RDMA engine's operations beside WRITE (driver/rdma.c,
 * driver/rx.c): READ, CAS, FADD and the FENCE flag. Every new field is
 * refused with its errno and holds no reference; a READ is split and
 * scheduled as a write is and brings every byte; a READ whose region is
 * revoked between turns completes -ENXIO and brings no byte after it;
 * atomics return the old value in the completion.
 *
 * The fixture, and how every test runs: rdma_fixture.h.
 */
#include <kunit/test.h>
#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/refcount.h>
#include <linux/string.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "rdma_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

#define O_LEN		16384u
#define O_AP_OFF	1024u	/* 8-byte aligned */
#define O_AP_LEN	4096u

static struct clanq_rdma_req rd_req(u32 region, u32 ap, u64 region_off,
				    u64 ap_off, u64 len, u64 cookie, u32 flags)
{
	struct clanq_rdma_req r = mkreq(region, ap, region_off, ap_off, len,
					cookie, flags);

	r.op = CLANQ_RDMA_OP_READ;
	return r;
}

static struct clanq_rdma_req at_req(u32 op, u32 ap, u64 ap_off, u64 a, u64 b,
				    u64 cookie)
{
	struct clanq_rdma_req r = mkreq(0, ap, 0, ap_off, CLANQ_RDMA_ATOMIC_LEN,
					cookie, SIG_LAST);

	r.op = op;
	r.operand[0] = a;
	r.operand[1] = b;
	return r;
}

/* Validate @req: it must return @want, and a failure holds nothing. */
static void ocheck(struct kunit *test, struct clanq_ctx *ctx,
		   const struct clanq_rdma_req *req, int want, const char *what)
{
	struct clanq_rdma_xfer x;
	int got;

	memset(&x, 0, sizeof(x));
	got = clanq_rdma_validate(ctx, req, &x);
	KUNIT_EXPECT_EQ_MSG(test, got, want, "%s", what);
	if (got) {
		KUNIT_EXPECT_NULL_MSG(test, x.src, "%s", what);
		KUNIT_EXPECT_NULL_MSG(test, x.dst, "%s", what);
		return;
	}
	KUNIT_EXPECT_NOT_NULL_MSG(test, x.dst, "%s", what);
	if (req->op == CLANQ_RDMA_OP_CAS || req->op == CLANQ_RDMA_OP_FADD)
		KUNIT_EXPECT_NULL_MSG(test, x.src, "%s: an atomic holds no region",
				      what);
	if (x.src) {
		clanq_kregion_mem_put(x.src);
		clanq_kregion_put(x.src);
	}
	clanq_kap_put(x.dst);
}

#define OCASE(base, want, what, change)				\
	do {							\
		struct clanq_rdma_req r_ = (base);		\
		change;						\
		ocheck(test, e->ctx, &r_, want, what);		\
	} while (0)

/*
 * Every new field, every garbage value: an unknown op, operands an op
 * does not take, an atomic with a length other than 8, a region, a
 * region offset, a misaligned word, an aperture at a misaligned region
 * offset are -EINVAL; the rights each op needs (and, for atomics, an
 * import with CLANQ_AP_ATOMIC) are -EACCES; past the
 * aperture is -ERANGE. FENCE is a valid flag on every op.
 */
static void new_fields_are_checked_and_hold_nothing_on_failure(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct src s = src_create(test, e, O_LEN, 3);
	struct dst all = dst_create(test, e, O_LEN, O_AP_OFF, O_AP_LEN,
				    CLANQ_RIGHTS_ALL);
	u32 ro = ap_import(test, e, all.region, all.key, O_AP_OFF, O_AP_LEN,
			   CLANQ_RIGHT_READ);
	u32 wo = ap_import(test, e, all.region, all.key, O_AP_OFF, O_AP_LEN,
			   CLANQ_RIGHT_WRITE);
	u32 odd = ap_import(test, e, all.region, all.key, O_AP_OFF + 4,
			    O_AP_LEN, CLANQ_RIGHTS_ALL);
	u32 noat = ap_import_flags(test, e, all.region, all.key, O_AP_OFF,
				   O_AP_LEN, CLANQ_RIGHTS_ALL, 0);
	struct clanq_rdma_req rd = rd_req(s.id, all.ap, 0, 0, 100, 1, SIG_LAST);
	struct clanq_rdma_req cas = at_req(CLANQ_RDMA_OP_CAS, all.ap, 8, 1, 2, 2);
	struct clanq_rdma_req fadd = at_req(CLANQ_RDMA_OP_FADD, all.ap, 8, 1, 0, 3);
	u32 ops[] = { CLANQ_RDMA_OP_CAS, CLANQ_RDMA_OP_FADD };
	unsigned int i;

	OCASE(rd, 0, "a valid READ", (void)0);
	OCASE(rd, 0, "READ, FENCE", r_.flags |= CLANQ_RDMA_FENCE);
	OCASE(rd, 0, "READ of the whole aperture", r_.len = O_AP_LEN);
	OCASE(rd, 0, "READ through a read-only aperture", r_.dst_ap = ro);
	OCASE(rd, 0, "READ without CLANQ_AP_ATOMIC", r_.dst_ap = noat);
	OCASE(rd, -EACCES, "READ through a write-only aperture", r_.dst_ap = wo);
	OCASE(rd, -EINVAL, "READ with operand[0]", r_.operand[0] = 1);
	OCASE(rd, -EINVAL, "READ with operand[1]", r_.operand[1] = 1ull << 63);
	OCASE(rd, -ERANGE, "READ one byte past the aperture",
	      r_.dst_off = O_AP_LEN - 99);
	OCASE(rd, -ERANGE, "READ past the region", r_.src_off = O_LEN - 99);
	OCASE(rd, -ERANGE, "READ, off U64_MAX", r_.dst_off = U64_MAX);
	OCASE(rd, -ENOENT, "READ into no region", r_.src_region = 0);
	OCASE(rd, -EINVAL, "op 4", r_.op = CLANQ_RDMA_NR_OPS);
	OCASE(rd, -EINVAL, "op U32_MAX", r_.op = U32_MAX);

	OCASE(cas, 0, "a valid CAS", (void)0);
	OCASE(cas, 0, "CAS, FENCE", r_.flags |= CLANQ_RDMA_FENCE);
	OCASE(cas, 0, "CAS of the aperture's last word", r_.dst_off = O_AP_LEN - 8);
	OCASE(fadd, 0, "a valid FADD", (void)0);
	OCASE(fadd, 0, "FADD of U64_MAX", r_.operand[0] = U64_MAX);
	OCASE(fadd, -EINVAL, "FADD with operand[1]", r_.operand[1] = 1);
	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		struct clanq_rdma_req a = at_req(ops[i], all.ap, 8, 0, 0, 4);

		OCASE(a, -EINVAL, "atomic, len 0", r_.len = 0);
		OCASE(a, -EINVAL, "atomic, len 4", r_.len = 4);
		OCASE(a, -EINVAL, "atomic, len 16", r_.len = 16);
		OCASE(a, -EINVAL, "atomic, len U64_MAX", r_.len = U64_MAX);
		OCASE(a, -EINVAL, "atomic naming a region", r_.src_region = s.id);
		OCASE(a, -EINVAL, "atomic with a region offset", r_.src_off = 8);
		OCASE(a, -EINVAL, "atomic at offset 1", r_.dst_off = 1);
		OCASE(a, -EINVAL, "atomic at offset 12", r_.dst_off = 12);
		OCASE(a, -EINVAL, "atomic at U64_MAX", r_.dst_off = U64_MAX);
		OCASE(a, -ERANGE, "atomic just past the aperture",
		      r_.dst_off = O_AP_LEN);
		OCASE(a, -ERANGE, "atomic at U64_MAX - 7", r_.dst_off = U64_MAX - 7);
		OCASE(a, -EACCES, "atomic, read-only aperture", r_.dst_ap = ro);
		OCASE(a, -EACCES, "atomic, write-only aperture", r_.dst_ap = wo);
		OCASE(a, -EACCES, "atomic, both rights, no CLANQ_AP_ATOMIC",
		      r_.dst_ap = noat);
		OCASE(a, -EINVAL, "atomic, aperture at region offset 1028",
		      r_.dst_ap = odd);
		OCASE(a, -ENOENT, "atomic, aperture 0", r_.dst_ap = 0);
	}
}

/*
 * READs of every length from 0 to a few chunks, at odd offsets on both
 * sides, split at SPLIT_XFER: every byte arrives, the bytes beside the
 * range are untouched, the completion says the length, and a split READ
 * takes a turn per chunk as a write does.
 */
static void reads_bring_every_byte_split_like_writes(struct kunit *test)
{
	static const u64 lens[] = { 0, 1, 7, 8, 15, 16, 17, 4095, 4096, 4097,
				    3 * SPLIT_XFER + 5 };
	struct rdma_env *e = test->priv;
	u64 big = 4 * SPLIT_XFER;
	struct dst d = dst_create(test, e, big, 0, big, CLANQ_RIGHT_READ);
	struct src s = src_create(test, e, big, 0);
	struct src pat = src_create(test, e, big, 77);	/* the pattern */
	struct uep *u = rdma_uep_create(test, e->ctx, 8, 8);
	u8 *got = kunit_kzalloc(test, big, GFP_KERNEL);
	u8 *zero = kunit_kzalloc(test, big, GFP_KERNEL);
	unsigned int i, turns, chunks;

	KUNIT_ASSERT_NOT_NULL(test, got);
	KUNIT_ASSERT_NOT_NULL(test, zero);
	max_xfer_set(test, SPLIT_XFER);
	region_io(test, d.r, 0, pat.bytes, big, true);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		u64 len = lens[i], aoff = 3 + i * 2, roff = 5 + i;
		struct clanq_rdma_req r = rd_req(s.id, d.ap, roff, aoff, len,
						 COOKIE(i), SIG_LAST);

		region_io(test, s.r, 0, zero, big, true);
		post(test, u, &r);
		kick(test, u);
		turns = settle(test, e, 16);
		chunks = max_t(u64, 1, DIV_ROUND_UP(len, SPLIT_XFER));
		KUNIT_EXPECT_EQ_MSG(test, turns, chunks + 1,
				    "len %llu: one turn a chunk, one to let go", len);
		expect_comp(test, u, COOKIE(i), len, 0);
		region_io(test, s.r, 0, got, big, false);
		KUNIT_EXPECT_EQ_MSG(test, first_diff(got + roff, pat.bytes + aoff,
						     len), INTACT, "len %llu", len);
		KUNIT_EXPECT_NULL_MSG(test, memchr_inv(got, 0, roff),
				      "len %llu: bytes before", len);
		KUNIT_EXPECT_NULL_MSG(test, memchr_inv(got + roff + len, 0,
						       big - roff - len),
				      "len %llu: bytes after", len);
	}
	/* and the exporter's region was only read */
	KUNIT_EXPECT_EQ(test, region_diff(test, d.r, pat.bytes), INTACT);
}

/*
 * A READ split across turns whose region is freed by its exporter (or
 * whose aperture is closed, or whose local region is freed) between
 * turns completes -ENXIO with the bytes read so far, and no byte lands
 * after: what the exporter's pages held after the revocation (here
 * rewritten, as a reuse would) never reaches the requester.
 */
static void a_read_revoked_between_turns_brings_nothing_after(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	u64 big = 4 * SPLIT_XFER;
	struct dst d = dst_create(test, e, big, 0, big, CLANQ_RIGHT_READ);
	struct src s = src_create(test, e, big, 0);
	struct src pat = src_create(test, e, big, 91);
	struct uep *u = rdma_uep_create(test, e->ctx, 8, 8);
	u8 *got = kunit_kzalloc(test, big, GFP_KERNEL);
	u8 *poison = kunit_kzalloc(test, big, GFP_KERNEL);
	struct clanq_rdma_req r = rd_req(s.id, d.ap, 0, 0, big, COOKIE(1),
					 SIG_LAST);

	KUNIT_ASSERT_NOT_NULL(test, got);
	KUNIT_ASSERT_NOT_NULL(test, poison);
	max_xfer_set(test, SPLIT_XFER);
	region_io(test, d.r, 0, pat.bytes, big, true);
	region_io(test, s.r, 0, poison, big, true);	/* zeroes */
	post(test, u, &r);
	kick(test, u);
	KUNIT_ASSERT_PTR_EQ(test, step(e), u->ep);
	KUNIT_ASSERT_EQ(test, unread(u), 0);
	region_free(test, e->exp, d.region);
	/* the freed region's pages (still pinned by the test) change */
	memset(poison, 0xa5, big);
	region_io(test, d.r, 0, poison, big, true);
	KUNIT_ASSERT_PTR_EQ(test, step(e), u->ep);
	expect_comp(test, u, COOKIE(1), SPLIT_XFER, -ENXIO);
	settle(test, e, 1);
	region_io(test, s.r, 0, got, big, false);
	KUNIT_EXPECT_EQ(test, first_diff(got, pat.bytes, SPLIT_XFER), INTACT);
	KUNIT_EXPECT_NULL_MSG(test, memchr_inv(got + SPLIT_XFER, 0,
					       big - SPLIT_XFER),
			      "a byte arrived after the revocation");
}

/* The word at @off of region @r. */
static u64 word_at(struct kunit *test, struct clanq_kregion *r, u64 off)
{
	u64 w;

	region_io(test, r, off, (u8 *)&w, sizeof(w), false);
	return w;
}

/*
 * CAS and FADD through the engine: the completion carries the old value
 * (len 8), the word changes as the op says and its neighbours do not;
 * a CAS that does not match changes nothing; FADD wraps mod 2^64. An
 * atomic on a revoked region completes -ENXIO with value 0. Requests of
 * one queue run in order, so a FENCEd READ after them sees their result.
 */
static void atomics_return_the_old_value(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct dst d = dst_create(test, e, O_LEN, O_AP_OFF, O_AP_LEN,
				  CLANQ_RIGHTS_ALL);
	struct dst gone = dst_create(test, e, O_LEN, 0, O_LEN, CLANQ_RIGHTS_ALL);
	struct src s = src_create(test, e, O_LEN, 0);
	struct uep *u = rdma_uep_create(test, e->ctx, 16, 16);
	struct clanq_rdma_req *r = kunit_kcalloc(test, 8, sizeof(*r), GFP_KERNEL);
	struct clanq_rdma_comp c;
	u64 init = 0x1122334455667788ull, w;
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, r);
	region_io(test, d.r, O_AP_OFF + 64, (u8 *)&init, sizeof(init), true);
	region_free(test, e->exp, gone.region);
	r[0] = at_req(CLANQ_RDMA_OP_CAS, d.ap, 64, 1, 2, COOKIE(0));	/* no */
	r[1] = at_req(CLANQ_RDMA_OP_CAS, d.ap, 64, init, 42, COOKIE(1));
	r[2] = at_req(CLANQ_RDMA_OP_FADD, d.ap, 64, 8, 0, COOKIE(2));
	r[3] = at_req(CLANQ_RDMA_OP_FADD, d.ap, 64, U64_MAX, 0, COOKIE(3));
	r[4] = at_req(CLANQ_RDMA_OP_FADD, d.ap, 64, 0, 0, COOKIE(4));
	r[5] = at_req(CLANQ_RDMA_OP_FADD, gone.ap, 64, 1, 0, COOKIE(5));
	r[6] = rd_req(s.id, d.ap, 0, 64, 8, COOKIE(6),
		      SIG_LAST | CLANQ_RDMA_FENCE);
	r[7] = at_req(CLANQ_RDMA_OP_FADD, d.ap, O_AP_LEN - 8, 3, 0, COOKIE(7));
	for (i = 0; i < 8; i++)
		post(test, u, &r[i]);
	kick(test, u);
	settle(test, e, 16);
	KUNIT_ASSERT_EQ(test, unread(u), 8);
	{
		static const int status[8] = { 0, 0, 0, 0, 0, -ENXIO, 0, 0 };
		static const u64 len[8] = { 8, 8, 8, 8, 8, 0, 8, 8 };
		const u64 value[8] = { init, init, 42, 50, 49, 0, 0, 0 };

		for (i = 0; i < 8; i++) {
			KUNIT_ASSERT_TRUE(test, clanq_q_get(&u->cq, &c));
			KUNIT_EXPECT_EQ_MSG(test, c.cookie, COOKIE(i), "order");
			KUNIT_EXPECT_EQ_MSG(test, c.status, status[i], "req %u", i);
			KUNIT_EXPECT_EQ_MSG(test, c.value, value[i], "req %u", i);
			KUNIT_EXPECT_EQ_MSG(test, c.len, len[i], "req %u", i);
			KUNIT_EXPECT_EQ(test, c.reserved0, 0);
		}
	}
	KUNIT_EXPECT_EQ(test, word_at(test, d.r, O_AP_OFF + 64), 49);
	KUNIT_EXPECT_EQ(test, word_at(test, d.r, O_AP_OFF + 56), 0);
	KUNIT_EXPECT_EQ(test, word_at(test, d.r, O_AP_OFF + 72), 0);
	KUNIT_EXPECT_EQ(test, word_at(test, d.r, O_AP_OFF + O_AP_LEN - 8), 3);
	region_io(test, s.r, 0, (u8 *)&w, sizeof(w), false);
	KUNIT_EXPECT_EQ_MSG(test, w, 49, "the fenced READ saw the atomics");
	KUNIT_EXPECT_EQ(test, word_at(test, gone.r, 64), 0);
	KUNIT_EXPECT_EQ(test, ctr(&u->counters->rdma_errors), 1);
}

/*
 * A wire without READ or atomics (the KUnit fake wire has only writes)
 * completes them -EOPNOTSUPP: tested in wire_kunit.c. Here: the loop
 * wire has both, and rx's own checks refuse what validation cannot
 * see, a misaligned word in memory and an unknown op.
 */
static void rx_atomic_refuses_what_validation_cannot_see(struct kunit *test)
{
	struct rdma_env *e = test->priv;
	struct dst d = dst_create(test, e, O_LEN, 0, O_LEN, CLANQ_RIGHTS_ALL);
	u64 ops[2] = { 1, 0 }, old = 7;

	KUNIT_EXPECT_EQ(test, clanq_rx_atomic(d.r, 4, CLANQ_RDMA_OP_FADD, ops,
					      &old, NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_rx_atomic(d.r, 8, CLANQ_RDMA_OP_READ, ops,
					      &old, NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_rx_atomic(d.r, O_LEN - 4, CLANQ_RDMA_OP_FADD,
					      ops, &old, NULL, NULL), -ERANGE);
	KUNIT_EXPECT_EQ(test, clanq_rx_atomic(d.r, U64_MAX - 3,
					      CLANQ_RDMA_OP_FADD, ops, &old,
					      NULL, NULL), -ERANGE);
	KUNIT_EXPECT_EQ(test, old, 7);
	KUNIT_EXPECT_EQ(test, clanq_rx_atomic(d.r, O_LEN - 8, CLANQ_RDMA_OP_FADD,
					      ops, &old, NULL, NULL), 0);
	KUNIT_EXPECT_EQ(test, old, 0);
	KUNIT_EXPECT_EQ(test, word_at(test, d.r, O_LEN - 8), 1);
}

static struct kunit_case clanq_rdma_ops_cases[] = {
	KUNIT_CASE(new_fields_are_checked_and_hold_nothing_on_failure),
	KUNIT_CASE(reads_bring_every_byte_split_like_writes),
	KUNIT_CASE(a_read_revoked_between_turns_brings_nothing_after),
	KUNIT_CASE(atomics_return_the_old_value),
	KUNIT_CASE(rx_atomic_refuses_what_validation_cannot_see),
	{}
};

static struct kunit_suite clanq_rdma_ops_suite = {
	.name = "clanq_rdma_ops",
	.init = rdma_test_init,
	.test_cases = clanq_rdma_ops_cases,
};

kunit_test_suites(&clanq_rdma_ops_suite);
