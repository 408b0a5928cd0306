/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the clanq_evq_* suites share (evq_fixture.c), the KUnit tests for
 * the unified event queue (driver/evq.c): endpoints registered on an evq
 * post events to its ring when OOB messages reach them, at most once per
 * registration until the application dequeues the event and clears the
 * registration's pending bit.
 *
 *	evq_events_kunit.c	clanq_evq_events: what a delivery posts, one
 *				event per registration, under concurrent
 *				wakers too
 *	evq_hostile_kunit.c	clanq_evq_hostile: a hostile application
 *				(its pending map, its ring index)
 *	evq_register_kunit.c	clanq_evq_register: registration and its
 *				end (unregister, endpoint or evq destroyed)
 *
 * Every test gets a NIC of its own, with no device, and a context on it.
 * The test plays the application: it attaches to the evq's segment with
 * the layout clanq_kevq_create() publishes and dequeues as libclanq does
 * (clanq_kevq_poll() in include/clanq.h): take the event, clear its bit
 * with a fully ordered atomic, then drain the endpoint. It attaches to
 * endpoints the same way (see oob_kunit.c). What the driver did is judged
 * from the segments and the NIC's counters only.
 */
#ifndef _CLANQ_EVQ_FIXTURE_H
#define _CLANQ_EVQ_FIXTURE_H

#include <kunit/test.h>
#include <linux/types.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

#define COOKIE(i)	(0xc0c0000000000000ull | ((u64)(i) << 8) | 0x5a)

/* Counts chosen for a KASAN + lockdep kernel under qemu TCG. */
#define EP_SLOTS		8

/* An endpoint as its application sees it. */
struct uep {
	struct clanq_kep *ep;
	u32 id;
	struct clanq_ioc_ep_create c;
	struct clanq_queue q;		/* the OOB queue's consumer side */
	struct clanq_ep_counters *counters;
};

/* An evq as its application sees it. */
struct uevq {
	struct clanq_kevq *evq;
	u32 max_regs;
	struct clanq_ioc_evq_create c;	/* what EVQ_CREATE would return */
	u8 *seg;
	size_t size;
	struct clanq_queue ring;	/* the ring's consumer side */
	u32 *prod;			/* the driver's published index */
	u32 *cons;			/* the application's index word */
	u32 nr_slots;
	u32 mask;
	unsigned long *pending;		/* the map, c.nr_words 64-bit words */
	size_t pending_bytes;
};

int evq_test_init(struct kunit *test);
struct uep *uep_create(struct kunit *test, struct clanq_ctx *ctx,
		       u32 slots);
struct uevq *uevq_create(struct kunit *test, struct nic_fixture *f,
			 u32 max_regs);
void uevq_destroy(struct kunit *test, struct uevq *q);
u32 reg_oob(struct kunit *test, struct uevq *q, struct uep *u,
	    u64 cookie);
int deliver(struct nic_fixture *f, u32 id, u32 seq);
void deliver_n(struct kunit *test, struct nic_fixture *f,
	       struct uep *u, u32 n);
u32 drain(struct uep *u);
void ack(struct uevq *q, u32 reg);
void expect_event(struct kunit *test, struct uevq *q, u32 reg,
		  u64 cookie);
void expect_no_event(struct kunit *test, struct uevq *q);
bool stray_pending_bit(const struct uevq *q);

#endif /* _CLANQ_EVQ_FIXTURE_H */
