// SPDX-License-Identifier: GPL-2.0
/*
 * The fixture the clanq_evq_* suites share: see evq_fixture.h.
 */
#include <kunit/test.h>
#include <linux/bitops.h>
#include <linux/module.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "evq_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

#define TEST_NIC_INDEX	8
#define TEST_NODE	0x7e58u

KUNIT_DEFINE_ACTION_WRAPPER(evq_destroy_action, clanq_kevq_destroy,
			    struct clanq_kevq *);

/*
 * Each test: a fresh NIC and one context on it (kunit_util.h). Threads,
 * evqs and contexts a test adds are torn down first.
 */
int evq_test_init(struct kunit *test)
{
	return nic_fixture_init(test, TEST_NIC_INDEX, TEST_NODE);
}

/* An endpoint of @ctx, owned by it, attached to as the library would. */
struct uep *uep_create(struct kunit *test, struct clanq_ctx *ctx,
		       u32 slots)
{
	struct uep *u = kunit_kzalloc(test, sizeof(*u), GFP_KERNEL);
	void *seg;

	KUNIT_ASSERT_NOT_NULL(test, u);
	u->ep = ep_create(test, ctx, slots, &u->c);
	u->id = u->ep->id;
	seg = u->ep->shm->vaddr;
	KUNIT_ASSERT_EQ(test, u->c.mmap_size, u->ep->shm->size);
	KUNIT_ASSERT_LE(test, u->c.counters + sizeof(*u->counters),
			u->c.mmap_size);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&u->q, seg, u->c.mmap_size,
					   &u->c.oob), 0);
	u->counters = (struct clanq_ep_counters *)((u8 *)seg + u->c.counters);
	return u;
}

/*
 * An evq of the fixture's context for @max_regs registrations, attached
 * to as libclanq attaches (lib/evq.c), with the same checks; destroyed at
 * cleanup unless the test does it first.
 */
struct uevq *uevq_create(struct kunit *test, struct nic_fixture *f,
			 u32 max_regs)
{
	struct uevq *q = kunit_kzalloc(test, sizeof(*q), GFP_KERNEL);
	struct clanq_kevq *evq;

	KUNIT_ASSERT_NOT_NULL(test, q);
	q->c.max_regs = max_regs;
	evq = clanq_kevq_create(f->ctx, max_regs, &q->c);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, evq);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							evq_destroy_action,
							evq), 0);
	q->evq = evq;
	q->max_regs = max_regs;
	q->seg = clanq_kevq_seg_for_kunit(evq);
	q->size = q->c.mmap_size;
	KUNIT_ASSERT_EQ(test, q->c.max_regs, max_regs);
	KUNIT_ASSERT_EQ(test, clanq_q_init(&q->ring, q->seg, q->size,
					   &q->c.ring), 0);
	KUNIT_ASSERT_EQ(test, q->c.ring.slot_size,
			sizeof(struct clanq_event));
	/* room for one event of every registration */
	KUNIT_ASSERT_GT(test, q->c.ring.nr_slots, max_regs);
	KUNIT_ASSERT_EQ(test, q->c.pending % 8, 0);
	KUNIT_ASSERT_GE(test, (u64)q->c.nr_words * 64, max_regs);
	q->pending_bytes = (size_t)q->c.nr_words * 8;
	KUNIT_ASSERT_LE(test, q->c.pending + q->pending_bytes, q->size);

	q->prod = (u32 *)(q->seg + q->c.ring.prod);
	q->cons = (u32 *)(q->seg + q->c.ring.cons);
	q->nr_slots = q->c.ring.nr_slots;
	q->mask = q->nr_slots - 1;
	q->pending = (unsigned long *)(q->seg + q->c.pending);
	return q;
}

/* Register @u on @q for OOB events; the index, which must be valid. */
u32 reg_oob(struct kunit *test, struct uevq *q, struct uep *u,
	    u64 cookie)
{
	int index = clanq_kevq_register_ep(q->evq, u->id, CLANQ_EV_OOB,
					  cookie);

	KUNIT_ASSERT_GE_MSG(test, index, 0, "register endpoint %u", u->id);
	KUNIT_ASSERT_LT(test, index, q->max_regs);
	return index;
}

int deliver(struct nic_fixture *f, u32 id, u32 seq)
{
	struct clanq_oob_msg msg;

	msg_fill(&msg, 0, seq);
	return clanq_rx_oob(&f->nic, id, &msg);
}

/* Deliver @n messages to @u, all of which must be queued. */
void deliver_n(struct kunit *test, struct nic_fixture *f,
	       struct uep *u, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ_MSG(test, deliver(f, u->id, i), 0,
				    "message %u to endpoint %u", i, u->id);
}

/* The application drains @u's OOB queue: how many messages it took. */
u32 drain(struct uep *u)
{
	struct clanq_oob_msg m;
	u32 n = 0;

	while (clanq_q_get(&u->q, &m))
		n++;
	return n;
}

/* Clear @reg's pending bit as the library does: a fully ordered atomic. */
void ack(struct uevq *q, u32 reg)
{
	clear_bit(reg, q->pending);
	/* pairs with the driver's test_and_set_bit, before the drain */
	smp_mb__after_atomic();
}

/* The next event must be for registration @reg with @cookie. */
void expect_event(struct kunit *test, struct uevq *q, u32 reg,
		  u64 cookie)
{
	struct clanq_event ev;

	KUNIT_ASSERT_TRUE_MSG(test, clanq_q_get(&q->ring, &ev),
			      "no event, expected one for registration %u",
			      reg);
	KUNIT_EXPECT_EQ(test, ev.reg, reg);
	KUNIT_EXPECT_EQ(test, ev.events, CLANQ_EV_OOB);
	KUNIT_EXPECT_EQ(test, ev.cookie, cookie);
}

void expect_no_event(struct kunit *test, struct uevq *q)
{
	struct clanq_event ev = {};

	KUNIT_EXPECT_FALSE_MSG(test, clanq_q_get(&q->ring, &ev),
			       "unexpected event: registration %u, cookie %#llx",
			       ev.reg, ev.cookie);
}

/* Is any bit of the pending map at or above max_regs set? */
bool stray_pending_bit(const struct uevq *q)
{
	unsigned long nbits = q->pending_bytes * BITS_PER_BYTE;

	return find_next_bit(q->pending, nbits, q->max_regs) < nbits;
}

/* Destroy @q's evq now, not at cleanup. */
void uevq_destroy(struct kunit *test, struct uevq *q)
{
	kunit_release_action(test, evq_destroy_action, q->evq);
}
