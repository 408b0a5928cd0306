// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the unified event queue (driver/evq.c), registrations:
 * what ends one (unregister, destroying its endpoint or the evq) and what
 * becomes of its index and references, and what register refuses.
 *
 * The fixture, and how every test runs: evq_fixture.h.
 */
#include <kunit/test.h>
#include <linux/bitops.h>
#include <linux/kref.h>
#include <linux/module.h>
#include <linux/refcount.h>
#include <linux/wait.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "evq_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

/*
 * Unregistering stops the events and gives back the endpoint's
 * reference; the index no longer names a registration.
 */
static void unregister_stops_events(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));

	KUNIT_EXPECT_EQ(test, refcount_read(&a->ep->ref), 2);
	deliver_n(test, f, a, 1);
	expect_event(test, q, ia, COOKIE(1));
	ack(q, ia);
	KUNIT_EXPECT_EQ(test, drain(a), 1);

	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), 0);
	KUNIT_EXPECT_EQ(test, refcount_read(&a->ep->ref), 1);
	deliver_n(test, f, a, 1);
	expect_no_event(test, q);
	KUNIT_EXPECT_FALSE(test, test_bit(ia, q->pending));
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);

	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), -ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, 2), -ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, U32_MAX),
			-ENOENT);
}

/*
 * Destroying an endpoint takes its registrations with it: its old id
 * raises nothing (and is -ENOENT), its index is free for a new one, and
 * the other registrations are untouched.
 */
static void endpoint_destroy_removes_its_registration(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *c = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));
	u32 ib = reg_oob(test, q, b, COOKIE(2));
	u32 old = a->id;

	ep_destroy(f->ctx, a->ep);	/* and its segment with it */

	KUNIT_EXPECT_EQ(test, deliver(f, old, 0), -ENOENT);
	expect_no_event(test, q);
	KUNIT_EXPECT_FALSE(test, test_bit(ia, q->pending));
	KUNIT_EXPECT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), -ENOENT);

	deliver_n(test, f, b, 1);
	expect_event(test, q, ib, COOKIE(2));

	/* a full evq of two: the third registration needs a's index */
	KUNIT_EXPECT_EQ(test, reg_oob(test, q, c, COOKIE(3)), ia);
	deliver_n(test, f, c, 1);
	expect_event(test, q, ia, COOKIE(3));
	expect_no_event(test, q);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 2);
}

/*
 * An unregistered index whose event is still in the ring is not handed
 * out again until the application has taken that event (cleared its
 * bit): the stale bit would silence the index's next owner, and the
 * stale event would carry the old cookie.
 */
static void an_index_with_an_untaken_event_is_not_reused_until_taken(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *c = uep_create(test, f->ctx, EP_SLOTS);
	u32 ia = reg_oob(test, q, a, COOKIE(1));
	u32 ib;

	deliver_n(test, f, a, 1);
	KUNIT_ASSERT_TRUE(test, test_bit(ia, q->pending));
	KUNIT_ASSERT_EQ(test, clanq_kevq_unregister_index(q->evq, ia), 0);

	/* an evq of two: b gets the other index, and c finds none free */
	ib = reg_oob(test, q, b, COOKIE(2));
	KUNIT_EXPECT_NE(test, ib, ia);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, c->id, CLANQ_EV_OOB,
						     COOKIE(3)), -ENOSPC);

	/* b is heard; the application takes the stale event, then b's */
	deliver_n(test, f, b, 1);
	expect_event(test, q, ia, COOKIE(1));
	ack(q, ia);
	expect_event(test, q, ib, COOKIE(2));
	ack(q, ib);
	KUNIT_EXPECT_EQ(test, drain(b), 1);

	/* taken: the index comes back, and its new owner is heard */
	KUNIT_EXPECT_EQ(test, reg_oob(test, q, c, COOKIE(3)), ia);
	deliver_n(test, f, c, 1);
	expect_event(test, q, ia, COOKIE(3));
	expect_no_event(test, q);
}

/*
 * Destroying an evq with live registrations unhooks them all: deliveries
 * afterwards queue their messages and raise nothing, the endpoints get
 * their references back and the context its own.
 */
static void evq_destroy_with_live_registrations_then_delivery_is_safe(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 4);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);

	KUNIT_EXPECT_EQ(test, kref_read(&f->ctx->ref), 2);
	reg_oob(test, q, a, COOKIE(1));
	reg_oob(test, q, b, COOKIE(2));
	/* once per evq: a second registration would double every wake-up */
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, b->id, CLANQ_EV_OOB,
						     COOKIE(3)), -EEXIST);
	deliver_n(test, f, a, 1);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);

	uevq_destroy(test, q);

	KUNIT_EXPECT_EQ(test, kref_read(&f->ctx->ref), 1);
	KUNIT_EXPECT_EQ(test, refcount_read(&a->ep->ref), 1);
	KUNIT_EXPECT_EQ(test, refcount_read(&b->ep->ref), 1);
	/* no registration's entry hangs on a's wait queue any more */
	KUNIT_EXPECT_FALSE(test, waitqueue_active(&a->ep->wq));
	/* nor on b's */
	KUNIT_EXPECT_FALSE(test, waitqueue_active(&b->ep->wq));
	deliver_n(test, f, a, 2);
	deliver_n(test, f, b, 2);
	KUNIT_EXPECT_EQ(test, drain(a), 3);
	KUNIT_EXPECT_EQ(test, drain(b), 2);
	KUNIT_EXPECT_EQ(test, nic_stat(&f->nic.stats.events), 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(a->counters->events), 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(b->counters->events), 0);
}

/*
 * A registration needs a non-empty mask of known events and an endpoint of
 * the evq's own context, and an evq holds at most max_regs of them: the
 * ring's room for one event each depends on it.
 */
static void register_refuses_bad_masks_foreign_endpoints_and_overfill(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct uevq *q = uevq_create(test, f, 2);
	struct uep *a = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *b = uep_create(test, f->ctx, EP_SLOTS);
	struct uep *c = uep_create(test, f->ctx, EP_SLOTS);
	struct clanq_ctx *other = ctx_add(test, &f->nic);
	struct uep *foreign = uep_create(test, other, EP_SLOTS);

	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, a->id, 0, 1),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, a->id,
						     CLANQ_EV_ALL + 1, 1),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, a->id,
						     CLANQ_EV_OOB | (1u << 31),
						     1),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, foreign->id,
						     CLANQ_EV_OOB, 1),
			-ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, 0, CLANQ_EV_OOB,
						     1),
			-ENOENT);

	reg_oob(test, q, a, COOKIE(1));
	reg_oob(test, q, b, COOKIE(2));
	KUNIT_EXPECT_EQ(test, clanq_kevq_register_ep(q->evq, c->id,
						     CLANQ_EV_OOB, 3),
			-ENOSPC);
	KUNIT_EXPECT_EQ(test, refcount_read(&c->ep->ref), 1);
	KUNIT_EXPECT_EQ(test, refcount_read(&foreign->ep->ref), 1);

	/* a foreign endpoint's messages raise nothing here */
	deliver_n(test, f, foreign, 1);
	expect_no_event(test, q);
}

static struct kunit_case clanq_evq_register_cases[] = {
	KUNIT_CASE(unregister_stops_events),
	KUNIT_CASE(endpoint_destroy_removes_its_registration),
	KUNIT_CASE(an_index_with_an_untaken_event_is_not_reused_until_taken),
	KUNIT_CASE(evq_destroy_with_live_registrations_then_delivery_is_safe),
	KUNIT_CASE(register_refuses_bad_masks_foreign_endpoints_and_overfill),
	{}
};

static struct kunit_suite clanq_evq_register_suite = {
	.name = "clanq_evq_register",
	.init = evq_test_init,
	.test_cases = clanq_evq_register_cases,
};

kunit_test_suites(&clanq_evq_register_suite);
