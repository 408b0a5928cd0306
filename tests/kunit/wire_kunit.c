// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the wire seam (driver/wire.c): a second wire, beside
 * the loop wire, is plugged in and carries OOB messages, imports and
 * RDMA writes to the node it reaches, ending in the shared receive path
 * (clanq_rx_oob(), clanq_rx_write()) as the loop wire does.
 *
 * The fake wire reaches FAKE_NODE, which is a KUnit NIC of the test's
 * own (no device, not among the module's NICs, so the loop wire does not
 * reach it). It counts what it was asked to carry and delivers it by
 * direct calls, as a remote wire's receive side would on the other
 * machine.
 */
#include <kunit/test.h>
#include <linux/highmem.h>
#include <linux/module.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
MODULE_IMPORT_NS(CLANQ_WIRE);

#define LOCAL_INDEX	11
#define LOCAL_NODE	0x3a10u
#define FAKE_INDEX	12
#define FAKE_NODE	0x3a11u		/* reached only by the fake wire */
#define NOWHERE_NODE	0x3a12u		/* reached by no wire */
#define REGION_LEN	8192u

/* What the fake wire reaches and what it carried (one test at a time). */
struct fake_wire {
	struct clanq_wire wire;
	struct clanq_nic *remote;	/* the NIC that is FAKE_NODE */
	unsigned int oobs, imports, writes;
	u64 bytes;
	/* complete writes later: keep the chunks in order, hold their requester */
	bool later;
	unsigned int nr_held;
	struct clanq_wire_write held[2 * CLANQ_RDMA_WINDOW];
};

static struct fake_wire *fake;

static bool fake_reaches(struct clanq_nic *src, u32 node)
{
	return node == FAKE_NODE;
}

static int fake_send_oob(struct clanq_nic *src, const struct clanq_addr *dst,
			 const struct clanq_oob_msg *msg)
{
	fake->oobs++;
	clanq_rx_oob(fake->remote, dst->id, msg);
	return 0;
}

static struct clanq_kregion *fake_import(struct clanq_nic *src,
					 const struct clanq_addr *region,
					 u64 key)
{
	struct clanq_kregion *r = clanq_kregion_lookup(fake->remote, region->id);

	fake->imports++;
	return r ?: ERR_PTR(-ENOENT);
}

static int fake_rdma_write(struct clanq_nic *src,
			   const struct clanq_wire_write *w)
{
	struct clanq_kap *ap = w->dst;

	fake->writes++;
	fake->bytes += w->len;
	if (fake->later) {
		if (WARN_ON(fake->nr_held == ARRAY_SIZE(fake->held)))
			return -ENOBUFS;
		refcount_inc(&w->ep->ref);
		fake->held[fake->nr_held++] = *w;
		return -EINPROGRESS;
	}
	return clanq_rx_write(ap->region, ap->off + w->dst_off, w->src,
			      w->src_off, w->len, ap, w->fired);
}

/*
 * The @i-th held chunk's send completion: deliver it (unless @status
 * says it failed on the way), tell the engine, let go of the requester.
 * A wire delivers in order; only the reports may come out of it.
 */
static void fake_complete_at(unsigned int i, int status)
{
	struct clanq_wire_write w;
	struct clanq_kap *ap;

	if (WARN_ON(i >= fake->nr_held))
		return;
	w = fake->held[i];
	ap = w.dst;
	memmove(&fake->held[i], &fake->held[i + 1],
		(fake->nr_held - i - 1) * sizeof(w));
	fake->nr_held--;
	if (!status)
		status = clanq_rx_write(ap->region, ap->off + w.dst_off, w.src,
					w.src_off, w.len, ap, NULL);
	clanq_engine_write_done(w.ep, w.chunk, status);
	clanq_kep_put(w.ep);
}

/* The oldest held chunk's completion. */
static void fake_complete(int status)
{
	fake_complete_at(0, status);
}

static const struct clanq_wire_ops fake_wire_ops = {
	.name		= "kunit-fake",
	.reaches	= fake_reaches,
	.send_oob	= fake_send_oob,
	.import		= fake_import,
	.rdma_write	= fake_rdma_write,
};

/*
 * The wire goes first at cleanup: the chunks it still holds fail, as a
 * remote wire's do when it goes, so that a test that stopped half way
 * (a failed assertion) leaves neither endpoints nor regions behind.
 */
static void fake_unregister(void *data)
{
	while (fake->nr_held)
		fake_complete(-ENXIO);
	clanq_wire_unregister(&fake->wire);
	fake = NULL;
}

/* The two NICs and their contexts. */
struct wire_env {
	struct clanq_nic *local;
	struct clanq_ctx *ctx;		/* on local */
	struct nic_fixture remote;	/* FAKE_NODE and a context on it */
};

/*
 * Each test: the local NIC and a context (kunit_util.h), the remote NIC
 * and a context, and the fake wire registered. Cleanup runs in reverse:
 * the wire goes first, then the remote, then the local NIC.
 */
static int wire_test_init(struct kunit *test)
{
	struct wire_env *e = kunit_kzalloc(test, sizeof(*e), GFP_KERNEL);
	struct nic_fixture *f;

	KUNIT_ASSERT_NOT_NULL(test, e);
	nic_fixture_init(test, LOCAL_INDEX, LOCAL_NODE);
	f = test->priv;
	e->local = &f->nic;
	e->ctx = f->ctx;
	KUNIT_ASSERT_EQ(test, clanq_nic_init(&e->remote.nic, FAKE_INDEX,
					     FAKE_NODE), 0);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, nic_fini_action,
							&e->remote.nic), 0);
	e->remote.ctx = ctx_add(test, &e->remote.nic);

	fake = kunit_kzalloc(test, sizeof(*fake), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fake);
	fake->remote = &e->remote.nic;
	fake->wire.ops = &fake_wire_ops;
	KUNIT_ASSERT_EQ(test, clanq_wire_register(&fake->wire), 0);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, fake_unregister,
							NULL), 0);
	test->priv = e;
	return 0;
}

/*
 * Routing: a node of this kernel goes by the loop wire, the fake node by
 * the fake wire, any other node by none; and once the wire is gone, its
 * node is unreachable again.
 */
static void route_picks_the_wire_that_reaches_the_node(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_nic *nic0 = clanq_nic_by_node(0);

	if (nic0)
		KUNIT_EXPECT_PTR_EQ(test, clanq_wire_route(e->local, 0),
				    &clanq_wire_loop);
	KUNIT_EXPECT_PTR_EQ(test, clanq_wire_route(e->local, FAKE_NODE),
			    &fake_wire_ops);
	KUNIT_EXPECT_NULL(test, clanq_wire_route(e->local, NOWHERE_NODE));
	kunit_release_action(test, fake_unregister, NULL);
	KUNIT_EXPECT_NULL(test, clanq_wire_route(e->local, FAKE_NODE));
}

/*
 * OOB_SEND to the fake node: the fake wire carries it (once), it lands
 * on the remote endpoint's queue with the source the sending driver
 * stamped, and the sender's counter moves. A node no wire reaches is
 * -EHOSTUNREACH, and nothing is carried.
 */
static void oob_send_goes_through_the_wire_of_the_destination(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_ioc_ep_create c_snd, c_rcv;
	struct clanq_kep *snd = ep_create(test, e->ctx, 8, &c_snd);
	struct clanq_kep *rcv = ep_create(test, e->remote.ctx, 8, &c_rcv);
	struct clanq_ioc_oob_send s = {
		.ep = snd->id,
		.dst = { .node = FAKE_NODE, .id = rcv->id },
		.type = CLANQ_OOB_TYPE_USER + 7,
		.len = 5,
		.payload = "hello",
	};
	struct clanq_oob_msg got;
	struct clanq_queue q;

	KUNIT_ASSERT_EQ(test, clanq_q_init(&q, rcv->shm->vaddr, rcv->shm->size,
					   &c_rcv.oob), 0);
	KUNIT_EXPECT_EQ(test, clanq_ioctl_oob_send(e->ctx, &s), 0);
	KUNIT_EXPECT_EQ(test, fake->oobs, 1);
	KUNIT_ASSERT_TRUE(test, clanq_q_get(&q, &got));
	KUNIT_EXPECT_EQ(test, got.type, CLANQ_OOB_TYPE_USER + 7);
	KUNIT_EXPECT_EQ(test, got.len, 5);
	KUNIT_EXPECT_EQ(test, got.src.node, LOCAL_NODE);
	KUNIT_EXPECT_EQ(test, got.src.id, snd->id);
	KUNIT_EXPECT_EQ(test, memcmp(got.payload, "hello", 5), 0);
	KUNIT_EXPECT_EQ(test, READ_ONCE(snd->counters->oob_sent), 1);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&q, &got));

	s.dst.node = NOWHERE_NODE;
	KUNIT_EXPECT_EQ(test, clanq_ioctl_oob_send(e->ctx, &s), -EHOSTUNREACH);
	KUNIT_EXPECT_EQ(test, fake->oobs, 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(snd->counters->oob_sent), 1);
}

/* Write @len bytes of @seed's pattern into region @r from offset 0. */
static void region_fill(struct clanq_kregion *r, u32 len, u8 seed)
{
	u32 i;

	for (i = 0; i < len; i++) {
		u8 *p = kmap_local_page(r->pages[i >> PAGE_SHIFT]);

		p[offset_in_page(i)] = (u8)(i * 7 + seed);
		kunmap_local(p);
	}
}

static u8 region_byte(struct clanq_kregion *r, u32 at)
{
	u8 *p = kmap_local_page(r->pages[at >> PAGE_SHIFT]);
	u8 b = p[offset_in_page(at)];

	kunmap_local(p);
	return b;
}

KUNIT_DEFINE_ACTION_WRAPPER(kregion_put_action, clanq_kregion_put,
			    struct clanq_kregion *);

static struct clanq_kregion *region_new(struct kunit *test,
					struct clanq_ctx *ctx)
{
	struct clanq_ioc_region_create c = { .size = REGION_LEN };
	struct clanq_kregion *r;

	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_create(ctx, &c), 0);
	r = clanq_kregion_lookup_owned(ctx, c.id);
	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, kregion_put_action,
							r), 0);
	return r;
}

/*
 * The requester's side of an RDMA path to the fake node: a source region
 * and an endpoint on the local NIC, an aperture onto a region exported
 * on the remote one, and the queues as the application sees them.
 * rdma_max_xfer is half the region, so a whole-region request is two
 * chunks.
 */
struct rdma_path {
	struct clanq_kregion *dst, *src;
	struct clanq_kep *ep;
	struct clanq_queue rq, cq;
	struct clanq_rdma_req req;	/* the whole region, SIGNAL | LAST */
	u32 ap;
	u64 key;			/* dst's export's */
};

static void rdma_path_init(struct kunit *test, struct wire_env *e,
			   struct rdma_path *p)
{
	struct clanq_ioc_region_export ex = { .rights = CLANQ_RIGHTS_ALL };
	struct clanq_ioc_ap_import im = {
		.region = { .node = FAKE_NODE },
		.len = REGION_LEN,
		.rights = CLANQ_RIGHT_WRITE,
	};
	struct clanq_ioc_ep_create c;
	struct clanq_kap *ap;

	max_xfer_set(test, REGION_LEN / 2);
	p->dst = region_new(test, e->remote.ctx);
	p->src = region_new(test, e->ctx);
	ex.id = p->dst->id;
	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_export(e->remote.ctx, &ex), 0);
	im.region.id = p->dst->id;
	im.key = ex.key;
	p->key = ex.key;
	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_import(e->ctx, &im), 0);
	KUNIT_EXPECT_EQ(test, fake->imports, 1);
	p->ap = im.id;
	ap = clanq_kap_lookup(e->ctx, im.id);
	KUNIT_ASSERT_NOT_NULL(test, ap);
	KUNIT_EXPECT_PTR_EQ(test, ap->wire, &fake_wire_ops);
	KUNIT_EXPECT_PTR_EQ(test, ap->region, p->dst);
	clanq_kap_put(ap);

	p->ep = ep_create(test, e->ctx, 8, &c);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&p->rq, p->ep->shm->vaddr,
					   p->ep->shm->size, &c.rq), 0);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&p->cq, p->ep->shm->vaddr,
					   p->ep->shm->size, &c.cq), 0);
	p->req = (struct clanq_rdma_req){
		.src_region = p->src->id, .dst_ap = im.id, .len = REGION_LEN,
		.cookie = 0xfa4e, .flags = CLANQ_RDMA_SIGNAL | CLANQ_RDMA_LAST,
	};
}

/* Post the whole-region request, pattern @seed in the source, and kick. */
static void rdma_path_post(struct kunit *test, struct rdma_path *p, u8 seed)
{
	region_fill(p->src, REGION_LEN, seed);
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p->rq, &p->req));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p->ep), 0);
}

/* Take the next completion, which must be (@len, @status). */
static void rdma_path_comp(struct kunit *test, struct rdma_path *p, u64 len,
			   int status)
{
	struct clanq_rdma_comp comp;

	KUNIT_ASSERT_TRUE(test, clanq_q_get(&p->cq, &comp));
	KUNIT_EXPECT_EQ(test, comp.cookie, 0xfa4e);
	KUNIT_EXPECT_EQ(test, comp.status, status);
	KUNIT_EXPECT_EQ(test, comp.len, len);
}

/* Index of the first byte of [from, to) of @r not holding @seed's pattern. */
static u32 region_check(struct clanq_kregion *r, u32 from, u32 to, u8 seed)
{
	for (; from < to; from++)
		if (region_byte(r, from) != (u8)(from * 7 + seed))
			break;
	return from;
}

/*
 * An import of a region on the fake node resolves through the fake wire
 * and remembers it; the engine then writes every chunk (split at
 * rdma_max_xfer) through that wire, and the bytes arrive through the
 * shared receive path. Closing the aperture between two chunks fences
 * the second there, as on the loop wire: the wire was asked, the receive
 * path refused, nothing was written.
 */
static void rdma_write_goes_through_the_wire_of_the_import(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_ioc_ap_close cl = { };
	struct clanq_rdma_comp comp;
	struct rdma_path p;

	rdma_path_init(test, e, &p);
	rdma_path_post(test, &p, 3);
	while (clanq_engine_step(e->local))
		;
	KUNIT_EXPECT_EQ(test, fake->writes, 2);
	KUNIT_EXPECT_EQ(test, fake->bytes, REGION_LEN);
	rdma_path_comp(test, &p, REGION_LEN, 0);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, REGION_LEN, 3), REGION_LEN);

	/* again, and the aperture closes after the first chunk */
	rdma_path_post(test, &p, 9);
	KUNIT_ASSERT_PTR_EQ(test, clanq_engine_step(e->local), p.ep);
	KUNIT_EXPECT_EQ(test, fake->writes, 3);
	cl.id = p.ap;
	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_close(e->ctx, &cl), 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_EXPECT_EQ(test, fake->writes, 4);
	rdma_path_comp(test, &p, REGION_LEN / 2, -ENXIO);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, REGION_LEN / 2, 9),
			REGION_LEN / 2);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, REGION_LEN / 2, REGION_LEN, 3),
			REGION_LEN);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
}

/*
 * A wire without rdma_read and rdma_atomic (this fake one) is never
 * asked: an import with CLANQ_AP_ATOMIC through it is refused
 * (-EOPNOTSUPP), a READ completes -EOPNOTSUPP, an atomic through an
 * import without the flag -EACCES, and a write after them still goes.
 */
static void ops_a_wire_lacks_complete_eopnotsupp(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_ioc_region_export ex = { .rights = CLANQ_RIGHTS_ALL };
	struct clanq_ioc_ap_import im = {
		.region = { .node = FAKE_NODE },
		.len = REGION_LEN,
		.rights = CLANQ_RIGHTS_ALL,
		.flags = CLANQ_AP_ATOMIC,
	};
	struct clanq_kregion *dst = region_new(test, e->remote.ctx);
	struct clanq_rdma_req rd, at;
	struct rdma_path p;

	rdma_path_init(test, e, &p);
	ex.id = dst->id;
	KUNIT_ASSERT_EQ(test, clanq_ioctl_region_export(e->remote.ctx, &ex), 0);
	im.region.id = dst->id;
	im.key = ex.key;
	KUNIT_EXPECT_EQ(test, clanq_ioctl_ap_import(e->ctx, &im), -EOPNOTSUPP);
	im.flags = 0;
	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_import(e->ctx, &im), 0);
	rd = p.req;
	rd.op = CLANQ_RDMA_OP_READ;
	rd.dst_ap = im.id;
	at = (struct clanq_rdma_req){
		.dst_ap = im.id, .len = 8, .op = CLANQ_RDMA_OP_FADD,
		.operand = { 1 }, .cookie = 0xfa4e,
		.flags = CLANQ_RDMA_SIGNAL | CLANQ_RDMA_LAST,
	};
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &rd));
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &at));
	rdma_path_post(test, &p, 5);
	while (clanq_engine_step(e->local))
		;
	rdma_path_comp(test, &p, 0, -EOPNOTSUPP);
	rdma_path_comp(test, &p, 0, -EACCES);
	rdma_path_comp(test, &p, REGION_LEN, 0);
	KUNIT_EXPECT_EQ(test, fake->writes, 2);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, REGION_LEN, 5), REGION_LEN);
}

/* A request of @len bytes at @off of the path's region and aperture. */
static struct clanq_rdma_req rdma_path_req(const struct rdma_path *p, u64 off,
					   u64 len)
{
	struct clanq_rdma_req r = p->req;

	r.src_off = off;
	r.dst_off = off;
	r.len = len;
	return r;
}

/* Post @n requests of @len bytes, one after the other, and kick. */
static void rdma_path_post_small(struct kunit *test, struct rdma_path *p,
				 u32 n, u64 len, u8 seed)
{
	struct clanq_rdma_req r;
	u32 i;

	region_fill(p->src, REGION_LEN, seed);
	for (i = 0; i < n; i++) {
		r = rdma_path_req(p, i * len, len);
		KUNIT_ASSERT_TRUE(test, clanq_q_put(&p->rq, &r));
	}
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p->ep), 0);
}

/*
 * Small requests a wire completes later (-EINPROGRESS) go out together,
 * one message a turn: the wire holds both before either lands. With
 * chunks out and nothing more to take the queue is parked: it does not
 * ask for a doorbell (need_wakeup stays clear), the reports look again.
 * No completion appears out of order, whatever order the wire reports
 * in; the last report lets go (need_wakeup set). A request of two
 * chunks of rdma_max_xfer has one out at a time: the window holds small
 * chunks, rdma_max_xfer bytes in all.
 */
static void writes_that_complete_later_go_out_together(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_rdma_comp comp;
	struct clanq_rdma_req r;
	struct rdma_path p;

	rdma_path_init(test, e, &p);
	fake->later = true;
	rdma_path_post_small(test, &p, 2, 64, 5);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 2);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*p.ep->rdma.need_wakeup), 0);
	KUNIT_EXPECT_PTR_EQ(test, fake->held[0].ep, p.ep);
	KUNIT_EXPECT_EQ(test, fake->held[0].dst_off, 0);
	KUNIT_EXPECT_EQ(test, fake->held[1].dst_off, 64);
	KUNIT_EXPECT_EQ(test, fake->held[1].chunk, fake->held[0].chunk + 1);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, 1, 5), 0);

	/* the second is reported first: it waits for the first */
	fake_complete_at(1, 0);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
	KUNIT_EXPECT_EQ(test, READ_ONCE(*p.ep->rdma.need_wakeup), 0);
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	rdma_path_comp(test, &p, 64, 0);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, 128, 5), 128);
	KUNIT_EXPECT_NULL(test, clanq_engine_step(e->local));
	KUNIT_EXPECT_EQ(test, READ_ONCE(*p.ep->rdma.need_wakeup), 1);

	/* one that ends no message: the same, parked with nothing to take */
	r = rdma_path_req(&p, 0, 64);
	r.flags = CLANQ_RDMA_SIGNAL;
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &r));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*p.ep->rdma.need_wakeup), 0);
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*p.ep->rdma.need_wakeup), 1);

	/* two chunks of rdma_max_xfer: the second goes once the first is back */
	rdma_path_post(test, &p, 6);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 1);
	fake_complete(0);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 1);
	KUNIT_EXPECT_EQ(test, fake->held[0].dst_off, REGION_LEN / 2);
	fake_complete(0);
	rdma_path_comp(test, &p, REGION_LEN, 0);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, REGION_LEN, 6), REGION_LEN);
	KUNIT_EXPECT_EQ(test, READ_ONCE(p.ep->counters->rdma_bytes),
			128 + 64 + REGION_LEN);
}

/*
 * The window holds rdma_window chunks (CLANQ_RDMA_WINDOW by default):
 * of 20 small requests 16 go, then the queue is parked (need_wakeup
 * clear, a kick does not line it up), and each one that retires lets
 * one more go; 20 completions in order. With rdma_window 1, one at a
 * time.
 */
static void a_full_window_parks_the_queue_until_a_chunk_retires(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_rdma_comp comp;
	struct clanq_rdma_req r;
	struct rdma_path p;
	u32 i;

	rdma_path_init(test, e, &p);
	fake->later = true;
	rdma_path_post_small(test, &p, 20, 64, 8);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, CLANQ_RDMA_WINDOW);
	KUNIT_EXPECT_EQ(test, READ_ONCE(*p.ep->rdma.need_wakeup), 0);
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	KUNIT_EXPECT_NULL(test, clanq_engine_step(e->local));
	for (i = 0; i < 20; i++) {
		KUNIT_EXPECT_EQ(test, fake->held[0].dst_off, i * 64);
		fake_complete(0);
		rdma_path_comp(test, &p, 64, 0);
		while (clanq_engine_step(e->local))
			;
		KUNIT_EXPECT_EQ(test, fake->nr_held,
				min(20 - i - 1, CLANQ_RDMA_WINDOW));
	}
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
	KUNIT_EXPECT_EQ(test, READ_ONCE(*p.ep->rdma.need_wakeup), 1);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, 20 * 64, 8), 20 * 64);

	/*
	 * The count holds even where the bytes would not: 15 small requests
	 * and a first chunk of 3,136 fill the window and rdma_max_xfer;
	 * rdma_max_xfer raised, the last 64 bytes still wait for a slot.
	 */
	region_fill(p.src, REGION_LEN, 10);
	for (i = 0; i < CLANQ_RDMA_WINDOW - 1; i++) {
		r = rdma_path_req(&p, i * 64, 64);
		r.flags = CLANQ_RDMA_SIGNAL;
		KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &r));
	}
	r = rdma_path_req(&p, i * 64, REGION_LEN / 2 - i * 64 + 64);
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &r));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	KUNIT_ASSERT_PTR_EQ(test, clanq_engine_step(e->local), p.ep);
	KUNIT_ASSERT_EQ(test, fake->nr_held, CLANQ_RDMA_WINDOW);
	max_xfer_set(test, REGION_LEN);
	while (clanq_engine_step(e->local))
		;
	KUNIT_EXPECT_EQ(test, fake->nr_held, CLANQ_RDMA_WINDOW);
	fake_complete(0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_EXPECT_EQ(test, fake->nr_held, CLANQ_RDMA_WINDOW);
	while (fake->nr_held)
		fake_complete(0);
	for (i = 0; i < CLANQ_RDMA_WINDOW - 1; i++)
		rdma_path_comp(test, &p, 64, 0);
	rdma_path_comp(test, &p, r.len, 0);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, REGION_LEN / 2 + 64, 10),
			REGION_LEN / 2 + 64);

	rdma_window_set(test, 1);
	rdma_path_post_small(test, &p, 3, 64, 9);
	for (i = 0; i < 3; i++) {
		while (clanq_engine_step(e->local))
			;
		KUNIT_EXPECT_EQ(test, fake->nr_held, 1);
		fake_complete(0);
		rdma_path_comp(test, &p, 64, 0);
	}
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, 3 * 64, 9), 3 * 64);
}

/*
 * Only chunks to one aperture are out together (one connection keeps
 * them in order): a request through a second aperture onto the same
 * region waits until the window is empty, and so does a FENCE request
 * through the first. Then each goes out.
 */
static void another_aperture_or_a_fence_waits_for_an_empty_window(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_ioc_ap_import im = {
		.region = { .node = FAKE_NODE },
		.len = REGION_LEN,
		.rights = CLANQ_RIGHT_WRITE,
	};
	struct clanq_rdma_req other, fence;
	struct rdma_path p;

	rdma_path_init(test, e, &p);
	fake->later = true;
	im.region.id = p.dst->id;
	im.key = p.key;
	KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_import(e->ctx, &im), 0);
	other = rdma_path_req(&p, 128, 64);
	other.dst_ap = im.id;
	fence = rdma_path_req(&p, 192, 64);
	fence.flags |= CLANQ_RDMA_FENCE;

	region_fill(p.src, REGION_LEN, 2);
	rdma_path_post_small(test, &p, 2, 64, 2);
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &other));
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &fence));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 2);
	fake_complete(0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_EXPECT_EQ(test, fake->nr_held, 1);
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	rdma_path_comp(test, &p, 64, 0);
	/* empty: the other aperture's goes, and the fence waits for it */
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 1);
	KUNIT_EXPECT_EQ(test, fake->held[0].dst->id, im.id);
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 1);
	KUNIT_EXPECT_EQ(test, fake->held[0].dst->id, p.ap);
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, 256, 2), 256);
}

/*
 * A chunk that fails on the wire completes its request with that status
 * and the bytes that landed before it, once every chunk of it is back,
 * in whatever order they are reported; the next request goes on. With
 * rdma_max_xfer 4 KiB, a request of 64 bytes and one of 4 KiB are three
 * chunks: 64, then 4,032 (the turn's budget), then 64 once the first is
 * back. A request whose chunk failed while its last was still to go
 * ends there: that one never goes.
 */
static void a_chunk_that_fails_completes_its_request_in_order(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_rdma_req a, b;
	struct clanq_rdma_comp comp;
	struct rdma_path p;

	rdma_path_init(test, e, &p);
	fake->later = true;
	a = rdma_path_req(&p, 0, 64);
	a.flags = CLANQ_RDMA_SIGNAL;	/* one message with b: one turn */
	b = rdma_path_req(&p, 64, 4096);

	/* b's first two chunks out together, the first fails: (0, -EIO) */
	region_fill(p.src, REGION_LEN, 6);
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &a));
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &b));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 2);
	KUNIT_EXPECT_EQ(test, fake->held[1].len, 4032);
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 2);
	KUNIT_EXPECT_EQ(test, fake->held[1].len, 64);
	fake_complete_at(1, 0);
	fake_complete(-EIO);
	rdma_path_comp(test, &p, 0, -EIO);
	KUNIT_EXPECT_EQ(test, READ_ONCE(p.ep->counters->rdma_errors), 1);

	/* the first of b's lands, its last fails: (4,032, -EIO) */
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &a));
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &b));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	while (clanq_engine_step(e->local))
		;
	fake_complete(0);
	fake_complete(-EIO);
	rdma_path_comp(test, &p, 4032, -EIO);

	/* b's first fails before its last went: that one never goes */
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &a));
	KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &b));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 2);
	fake_complete_at(1, -EIO);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
	fake_complete(0);
	rdma_path_comp(test, &p, 64, 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_EXPECT_EQ(test, fake->nr_held, 0);
	rdma_path_comp(test, &p, 0, -EIO);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
	KUNIT_EXPECT_EQ(test, fake->writes, 8);
	KUNIT_EXPECT_EQ(test, READ_ONCE(p.ep->counters->rdma_errors), 3);

	/* and the queue goes on */
	rdma_path_post(test, &p, 4);
	while (clanq_engine_step(e->local))
		;
	fake_complete(0);
	while (clanq_engine_step(e->local))
		;
	fake_complete(0);
	rdma_path_comp(test, &p, REGION_LEN, 0);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, REGION_LEN, 4), REGION_LEN);
}

/*
 * Every request out may complete (an error always does), so the engine
 * takes one only with completion slots for it and for all those out:
 * with 3 slots free it lets 3 single-chunk requests go and holds the
 * rest, even though the window has room. Once the application has read
 * its completions and rung, the rest go.
 */
static void the_completion_queue_keeps_room_for_every_request_out(struct kunit *test)
{
	const u32 cq_free = CLANQ_DEFAULT_RDMA_SLOTS - 1;
	struct wire_env *e = test->priv;
	struct clanq_rdma_comp comp;
	struct clanq_rdma_req small;
	struct rdma_path p;
	u32 i;

	rdma_path_init(test, e, &p);
	small = p.req;
	small.len = 64;
	region_fill(p.src, REGION_LEN, 1);
	/* completions nobody reads yet: 3 slots left */
	for (i = 0; i < cq_free - 3; i++)
		KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &small));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	fake->later = true;
	for (i = 0; i < 10; i++)
		KUNIT_ASSERT_TRUE(test, clanq_q_put(&p.rq, &small));
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 3);
	for (i = 0; i < 3; i++)
		fake_complete(0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_EXPECT_EQ(test, fake->nr_held, 0);
	for (i = 0; i < cq_free; i++)
		rdma_path_comp(test, &p, 64, 0);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
	/* read: the application rings, as clanq_rdma_poll() would */
	KUNIT_ASSERT_EQ(test, clanq_engine_kick(p.ep), 0);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 7);
	for (i = 0; i < 7; i++)
		fake_complete(0);
	for (i = 0; i < 7; i++)
		rdma_path_comp(test, &p, 64, 0);
	KUNIT_EXPECT_FALSE(test, clanq_q_get(&p.cq, &comp));
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, 64, 1), 64);
}

/*
 * The endpoint is destroyed while the chunks of its request are on the
 * wire: they stay with the engine until the wire reports them, in any
 * order, which then only drops them (no completion is posted into a
 * segment nobody owns).
 * The wire's reference kept the endpoint; kmemleak, after the suite,
 * sees that nothing was left behind.
 */
static void an_endpoint_destroyed_mid_write_is_dropped_when_the_wire_reports(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_kregion *src;
	struct rdma_path p;

	rdma_path_init(test, e, &p);
	src = p.src;
	fake->later = true;
	rdma_path_post_small(test, &p, 2, 64, 7);
	while (clanq_engine_step(e->local))
		;
	KUNIT_ASSERT_EQ(test, fake->nr_held, 2);
	/*
	 * The chunks out hold the source's memory, each its own: the
	 * owner's and 2 more. The endpoint goes; they stay until reported,
	 * and are let go in order.
	 */
	KUNIT_EXPECT_EQ(test, refcount_read(&src->mem_ref), 3);
	ep_destroy(e->ctx, p.ep);
	KUNIT_EXPECT_EQ(test, refcount_read(&src->mem_ref), 3);
	fake_complete_at(1, 0);
	KUNIT_EXPECT_EQ(test, refcount_read(&src->mem_ref), 3);
	fake_complete(0);
	KUNIT_EXPECT_EQ(test, refcount_read(&src->mem_ref), 1);
	KUNIT_EXPECT_NULL(test, clanq_engine_step(e->local));
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, 128, 7), 128);
}

/*
 * The endpoint is destroyed between two chunks of a request: the rest
 * never goes, and the chunk out keeps the source's memory until the
 * wire reports it.
 */
static void an_endpoint_destroyed_mid_request_sends_nothing_more(struct kunit *test)
{
	struct wire_env *e = test->priv;
	struct clanq_kregion *src;
	struct rdma_path p;

	rdma_path_init(test, e, &p);
	src = p.src;
	fake->later = true;
	rdma_path_post(test, &p, 3);
	KUNIT_ASSERT_PTR_EQ(test, clanq_engine_step(e->local), p.ep);
	KUNIT_ASSERT_EQ(test, fake->nr_held, 1);
	/* the owner's, the request's and the chunk's */
	KUNIT_EXPECT_EQ(test, refcount_read(&src->mem_ref), 3);
	ep_destroy(e->ctx, p.ep);
	KUNIT_EXPECT_EQ(test, refcount_read(&src->mem_ref), 2);
	KUNIT_EXPECT_NULL(test, clanq_engine_step(e->local));
	fake_complete(0);
	KUNIT_EXPECT_EQ(test, refcount_read(&src->mem_ref), 1);
	KUNIT_EXPECT_NULL(test, clanq_engine_step(e->local));
	KUNIT_EXPECT_EQ(test, fake->writes, 1);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, 0, REGION_LEN / 2, 3),
			REGION_LEN / 2);
	KUNIT_EXPECT_EQ(test, region_check(p.dst, REGION_LEN / 2,
					   REGION_LEN / 2 + 1, 3), REGION_LEN / 2);
}

static struct kunit_case clanq_wire_cases[] = {
	KUNIT_CASE(route_picks_the_wire_that_reaches_the_node),
	KUNIT_CASE(oob_send_goes_through_the_wire_of_the_destination),
	KUNIT_CASE(rdma_write_goes_through_the_wire_of_the_import),
	KUNIT_CASE(writes_that_complete_later_go_out_together),
	KUNIT_CASE(a_full_window_parks_the_queue_until_a_chunk_retires),
	KUNIT_CASE(another_aperture_or_a_fence_waits_for_an_empty_window),
	KUNIT_CASE(a_chunk_that_fails_completes_its_request_in_order),
	KUNIT_CASE(the_completion_queue_keeps_room_for_every_request_out),
	KUNIT_CASE(ops_a_wire_lacks_complete_eopnotsupp),
	KUNIT_CASE(an_endpoint_destroyed_mid_write_is_dropped_when_the_wire_reports),
	KUNIT_CASE(an_endpoint_destroyed_mid_request_sends_nothing_more),
	{}
};

static struct kunit_suite clanq_wire_suite = {
	.name = "clanq_wire",
	.init = wire_test_init,
	.test_cases = clanq_wire_cases,
};

kunit_test_suites(&clanq_wire_suite);
