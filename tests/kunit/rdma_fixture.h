/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the clanq_rdma_* suites share (rdma_fixture.c), the KUnit tests for
 * the RDMA engine (driver/rdma.c):
 *
 *	rdma_validate_kunit.c	clanq_rdma_validate: request validation, and
 *				failed requests through the engine
 *	rdma_engine_kunit.c	clanq_rdma_engine: round-robin turns, logical
 *				messages, splitting at rdma_max_xfer, the
 *				doorbell protocol
 *	rdma_hostile_kunit.c	clanq_rdma_hostile: a hostile application side,
 *				and revocation while a request is in progress
 *	rdma_ops_kunit.c	clanq_rdma_ops: READ, CAS, FADD and FENCE:
 *				their fields refused, reads split and revoked,
 *				atomics' old values
 *
 * Every test gets a NIC of its own, with no engine thread: the test steps
 * the engine by hand (clanq_engine_step(), one turn per call), so
 * what each turn did is observed exactly. The test plays the application
 * on its endpoints' segments, attached with the layout clanq_kep_describe()
 * publishes: producer of the request queue, consumer of the completion
 * queue (include/clanq/queue.h), as libclanq is. What the engine did is
 * judged from the segment, the NIC's counters and the destination bytes.
 *
 * Destinations. An import goes through the wire, which finds the
 * exporter's NIC by node among the module's NICs, and a KUnit NIC is not
 * one of them. So every destination region belongs to a context on the
 * module's own clanq0 (node 0, as the test VM loads clanq.ko): a peer
 * node, and the write crosses the loop wire as it does between
 * /dev/clanq1 and /dev/clanq0. clanq0's engine thread never sees the test
 * NIC's endpoints; the test's context there is gone when the test is.
 *
 * Region bytes are read and written through the regions' pages
 * (kmap_local_page()), which a reference keeps even once a region is
 * freed: so the tests can also show that nothing was written after a
 * revocation.
 */
#ifndef _CLANQ_RDMA_FIXTURE_H
#define _CLANQ_RDMA_FIXTURE_H

#include <kunit/test.h>
#include <linux/types.h>

#include "../driver/clanq_drv.h"

/* rdma_max_xfer for the tests that split */
#define SPLIT_XFER	4096u
/* A completion queue of 4 slots: it holds 3 */
#define FULL_CQ_SLOTS	4

#define COOKIE(i)	(0xc00c1e0000000000ull | (u64)(i))
#define SIG_LAST	(CLANQ_RDMA_SIGNAL | CLANQ_RDMA_LAST)

/* The test NIC, its requester context, and the exporter on clanq0. */
struct rdma_env {
	struct clanq_nic *nic;	/* stepped by hand */
	struct clanq_ctx *ctx;	/* the requester */
	struct clanq_nic *peer;	/* clanq0 */
	struct clanq_ctx *exp;	/* the exporter of every destination */
};

/*
 * Each test: rdma_test_init() is the suites' init.
 */
int rdma_test_init(struct kunit *test);

/*
 * Regions.
 */
u32 region_alloc(struct kunit *test, struct clanq_ctx *ctx, u64 size);
void region_free(struct kunit *test, struct clanq_ctx *ctx, u32 id);
struct clanq_kregion *region_pin(struct kunit *test,
				 struct clanq_ctx *ctx, u32 id);
void region_io(struct kunit *test, struct clanq_kregion *r, u64 off,
	       u8 *buf, u64 len, bool write);
long region_diff(struct kunit *test, struct clanq_kregion *r,
		 const u8 *want);

/* A source region of the requester: @len bytes of pattern @seed. */
struct src {
	u32 id;
	struct clanq_kregion *r;	/* pinned */
	u8 *bytes;		/* what it holds */
};

struct src src_create(struct kunit *test, struct rdma_env *e, u64 len,
		      u8 seed);

/*
 * A destination: a region of the exporter, exported, and the requester's
 * aperture onto [ap_off, ap_off + ap_len) of it. @want is what the test
 * expects the whole region to hold (zero until a write completes).
 */
struct dst {
	u32 region;		/* the exporter's id */
	struct clanq_kregion *r;	/* pinned: its pages, even once freed */
	u64 key;		/* its export key */
	u32 ap;			/* the requester's aperture */
	u64 ap_off;
	u8 *want;
};

u32 ap_import(struct kunit *test, struct rdma_env *e, u32 region,
	      u64 key, u64 off, u64 len, u32 rights);
u32 ap_import_flags(struct kunit *test, struct rdma_env *e, u32 region,
		    u64 key, u64 off, u64 len, u32 rights, u32 flags);
struct dst dst_create(struct kunit *test, struct rdma_env *e, u64 size,
		      u64 ap_off, u64 ap_len, u32 rights);
void dst_expect(struct dst *d, const struct src *s,
		const struct clanq_rdma_req *req, u64 len);
void ap_close(struct kunit *test, struct clanq_ctx *ctx, u32 id);
struct clanq_kap *ap_pin(struct kunit *test, struct clanq_ctx *ctx,
			 u32 id);

/*
 * Endpoints, as the application sees them.
 */
struct uep {
	struct clanq_kep *ep;
	struct clanq_ioc_ep_create c;	/* what EP_CREATE would return */
	u8 *seg;
	struct clanq_queue rq;		/* requests: the application produces */
	struct clanq_queue cq;		/* completions: it consumes */
	u32 *need_wakeup;
	struct clanq_ep_counters *counters;
};

struct uep *rdma_uep_create(struct kunit *test, struct clanq_ctx *ctx,
			    u32 rq_slots, u32 cq_slots);
struct clanq_rdma_req mkreq(u32 src, u32 ap, u64 src_off, u64 dst_off,
			    u64 len, u64 cookie, u32 flags);
void post(struct kunit *test, struct uep *u,
	  const struct clanq_rdma_req *req);
void kick(struct kunit *test, struct uep *u);
u32 unread(struct uep *u);
void expect_comp(struct kunit *test, struct uep *u, u64 cookie,
		 u64 len, int status);
u64 ctr(const __u64 *field);
struct clanq_kep *step(struct rdma_env *e);
unsigned int settle(struct kunit *test, struct rdma_env *e,
		    unsigned int max);

#endif /* _CLANQ_RDMA_FIXTURE_H */
