// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for what one write may cost (driver/tripwire.c, issue 28):
 * a write that touches thousands of persistent tripwires, with threads
 * asleep on some of them, fires every one exactly once while the walk
 * holds the region's tw.lock for at most CLANQ_TW_VISITS_PER_HOLD of
 * them at a time; a walk that lets go of the lock resumes correctly while
 * another thread disarms, re-arms and destroys tripwires under it; and
 * the wait entries a user adds to an endpoint's wait queue with
 * CLANQ_TW_WAIT_OOB are counted (max_oob_waiters) and not woken by the
 * endpoint's tripwire fires.
 *
 * The fixture is the RDMA suites' (rdma_fixture.h), as tripwire_kunit.c
 * uses it: the watched region is the exporter's on clanq0, exported; the
 * requester has an aperture onto all of it (AP_FLUSH) and a source region
 * (writes through the receive path, clanq_rx_write()).
 */
#include <kunit/test.h>
#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/sched.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"
#include "rdma_fixture.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
MODULE_IMPORT_NS(CLANQ_WIRE);

#define WALK_LEN	(16u * 1024u)
#define PERSISTENT	(CLANQ_TW_PERSISTENT | CLANQ_TW_ARMED)
/* the attack of issue 28: thousands of tripwires on the same 8 bytes */
#define NR_EPS		20u	/* more than CLANQ_TW_EPS_PER_WALK */
#define PER_EP		256u
#define NR_TWS		(NR_EPS * PER_EP)
#define NR_SLEEPERS	8u
#define WAIT_NS		(20ull * NSEC_PER_SEC)

struct walk_ep {
	struct clanq_kep *ep;
	unsigned long *fired;
	struct clanq_ep_counters *counters;
};

struct walk_env {
	struct rdma_env *e;
	struct dst d;
	struct src s;
};

static int walk_test_init(struct kunit *test)
{
	struct walk_env *t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, t);
	rdma_test_init(test);
	t->e = test->priv;
	t->d = dst_create(test, t->e, WALK_LEN, 0, WALK_LEN, CLANQ_RIGHT_WRITE);
	t->s = src_create(test, t->e, WALK_LEN, 0x3c);
	test->priv = t;
	return 0;
}

static void walk_ep_create(struct kunit *test, struct walk_env *t,
			   u32 tw_slots, struct walk_ep *we)
{
	struct clanq_ioc_ep_create c;
	struct clanq_ctx *ctx = t->e->exp;
	u8 *seg;

	mutex_lock(&ctx->lock);
	we->ep = clanq_kep_create(ctx, 8, 8, 8, tw_slots, 0);
	if (!IS_ERR(we->ep))
		clanq_kep_describe(we->ep, &c);
	mutex_unlock(&ctx->lock);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, we->ep);
	seg = we->ep->shm->vaddr;
	we->fired = (unsigned long *)(seg + c.tw_fired);
	we->counters = (struct clanq_ep_counters *)(seg + c.counters);
}

/* A tripwire on [@off, @off + 8) owned by @ep: its id. */
static u32 tw_make(struct kunit *test, struct walk_env *t,
		   struct clanq_kep *ep, u64 off, u32 flags)
{
	struct clanq_ioc_tw_create c = {
		.ep = ep->id, .region = t->d.region, .off = off, .len = 8,
		.flags = flags,
	};
	int err = clanq_ioctl_tw_create(t->e->exp, &c);

	if (err == -ENOSPC)
		kunit_skip(test, "TW_CREATE: -ENOSPC, max_tripwires is below %u",
			   NR_TWS);
	KUNIT_ASSERT_EQ(test, err, 0);
	return c.id;
}

/* The driver's tripwire by id; the test owns it, so it stays. */
static struct clanq_ktw *ktw(struct walk_env *t, u32 id)
{
	return xa_load(&t->e->exp->tws, id);
}

static int tw_ctl(struct walk_env *t, int (*fn)(void *, void *), u32 id)
{
	struct clanq_ioc_tw_ctl c = { .id = id };

	return fn(t->e->exp, &c);
}

static void reset_hold_stats(struct clanq_kregion *r)
{
	spin_lock(&r->tw.lock);
	r->tw.most_visits = 0;
	r->tw.longest_hold_ns = 0;
	spin_unlock(&r->tw.lock);
}

/* A TW_WAIT in a thread of its own. */
/* Wait (at most 10 s) until @w sleeps in its TW_WAIT. */
static void await_asleep(struct kunit *test, struct walk_env *t,
			 struct tw_waiter *w)
{
	struct clanq_ktw *tw = ktw(t, w->w.id);
	unsigned int ms;

	KUNIT_ASSERT_NOT_NULL(test, tw);
	for (ms = 0; ms < 10000; ms += 20) {
		if (completion_done(&w->done))
			break;
		/* a look from outside, racy by nature: polled until it holds */
		if (waitqueue_active(&tw->wq) &&
		    (READ_ONCE(w->task->__state) & TASK_INTERRUPTIBLE))
			return;
		msleep(20);
	}
	KUNIT_FAIL(test, "waiter on tripwire %u never slept (ret %d)",
		   w->w.id, w->ret);
}

/*
 * The attack, measured: NR_TWS persistent tripwires of NR_EPS endpoints
 * on the same 8 bytes, NR_SLEEPERS threads in TW_WAIT (with
 * CLANQ_TW_WAIT_OOB) on some of them. One 8-byte write, then one flush of
 * the same bytes: every tripwire fires exactly once per write (its fires
 * count, its bit, its endpoint's counters, the NIC's), every sleeper
 * wakes with 0, and no hold of tw.lock visited more than
 * CLANQ_TW_VISITS_PER_HOLD tripwires or took more than an eighth of the
 * walk (in the best of three walks: the emulator's host may stall any
 * one hold).
 */
static void thousands_on_one_word_fire_once_in_bounded_holds(struct kunit *test)
{
	struct walk_env *t = test->priv;
	struct walk_ep *eps = kunit_kcalloc(test, NR_EPS, sizeof(*eps), GFP_KERNEL);
	u32 *ids = kunit_kcalloc(test, NR_TWS, sizeof(*ids), GFP_KERNEL);
	struct tw_waiter *w[NR_SLEEPERS];
	struct clanq_kregion *r = t->d.r;
	s64 nic0 = nic_stat(&t->e->peer->stats.tw_fires);
	struct clanq_ioc_ap_flush f = { .ap = t->d.ap, .off = 0, .len = 8 };
	u64 walk_ns, best_hold = 0, best_walk = 1;
	unsigned int i, round, bad = 0;
	ktime_t t0;

	KUNIT_ASSERT_NOT_NULL(test, eps);
	KUNIT_ASSERT_NOT_NULL(test, ids);
	for (i = 0; i < NR_EPS; i++)
		walk_ep_create(test, t, round_up(PER_EP, 64), &eps[i]);
	for (i = 0; i < NR_TWS; i++) {
		/* endpoints interleaved: the walk meets them in turn */
		ids[i] = tw_make(test, t, eps[i % NR_EPS].ep, 0, PERSISTENT);
		if (!(i % 256))
			cond_resched();
	}
	KUNIT_ASSERT_EQ(test, READ_ONCE(r->tw.nr_armed), NR_TWS);
	for (i = 0; i < NR_SLEEPERS; i++)
		w[i] = tw_waiter_start(test, t->e->exp, ids[i * (NR_TWS / NR_SLEEPERS)],
				       0, 0, CLANQ_TW_WAIT_OOB, WAIT_NS);
	for (i = 0; i < NR_SLEEPERS; i++)
		await_asleep(test, t, w[i]);

	for (round = 0; round < 3; round++) {
		reset_hold_stats(r);
		t0 = ktime_get();
		if (round < 2)
			KUNIT_ASSERT_EQ(test, clanq_rx_write(r, 0, t->s.r, 0, 8,
							     NULL, NULL), 0);
		else
			KUNIT_ASSERT_EQ(test, clanq_ioctl_ap_flush(t->e->ctx, &f), 0);
		walk_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
		kunit_info(test, "walk %u: %u fires in %llu us, longest hold %llu us, most visits in a hold %u",
			   round, NR_TWS, walk_ns / 1000,
			   r->tw.longest_hold_ns / 1000, r->tw.most_visits);
		KUNIT_EXPECT_LE_MSG(test, r->tw.most_visits,
				    CLANQ_TW_VISITS_PER_HOLD, "walk %u", round);
		if (!round || r->tw.longest_hold_ns * best_walk <
			      best_hold * walk_ns) {
			best_hold = r->tw.longest_hold_ns;
			best_walk = walk_ns;
		}
		if (round == 0) {
			for (i = 0; i < NR_SLEEPERS; i++) {
				KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&w[i]->done,
										    10 * HZ));
				KUNIT_EXPECT_EQ(test, w[i]->ret, 0);
			}
		}
		if (round == 2)
			KUNIT_EXPECT_EQ(test, f.fired, NR_TWS);
		/* exactly once each, per write */
		for (i = 0, bad = 0; i < NR_TWS; i++)
			bad += READ_ONCE(ktw(t, ids[i])->fires) != round + 1;
		KUNIT_EXPECT_EQ_MSG(test, bad, 0,
				    "walk %u: tripwires that did not fire exactly once",
				    round);
		for (i = 0; i < NR_EPS; i++) {
			KUNIT_EXPECT_EQ_MSG(test, bitmap_weight(eps[i].fired, PER_EP),
					    PER_EP, "walk %u, endpoint %u", round, i);
			KUNIT_EXPECT_EQ_MSG(test, ctr(&eps[i].counters->tw_fires),
					    (round + 1) * PER_EP,
					    "walk %u, endpoint %u", round, i);
			KUNIT_EXPECT_EQ_MSG(test, ctr(&eps[i].counters->tw_flushes),
					    round == 2, "walk %u, endpoint %u", round, i);
			bitmap_zero(eps[i].fired, PER_EP);
		}
		KUNIT_EXPECT_EQ(test, nic_stat(&t->e->peer->stats.tw_fires),
				nic0 + (round + 1) * NR_TWS);
		KUNIT_EXPECT_EQ(test, READ_ONCE(r->tw.nr_armed), NR_TWS);
	}
	KUNIT_EXPECT_LT_MSG(test, best_hold * 8, best_walk,
			    "the longest hold of tw.lock, %llu us, is over an eighth of its walk's %llu us",
			    best_hold / 1000, best_walk / 1000);
}

/* A thread that disarms, re-arms and destroys tripwires under the walks. */
struct churn {
	struct walk_env *t;
	const u32 *ids;		/* the odd-numbered of them are its own */
	unsigned int n;
	atomic_t stop;
	unsigned int rounds;
	unsigned int pinned_seen;	/* disarmed while a walk held them */
	unsigned int destroyed;
	struct completion done;
};

static int churn_fn(void *data)
{
	struct churn *c = data;
	struct clanq_kregion *r = c->t->d.r;
	unsigned int i;

	while (!atomic_read(&c->stop)) {
		for (i = 1; i < c->n; i += 2) {
			struct clanq_ktw *tw;

			if (tw_ctl(c->t, clanq_ioctl_tw_disarm, c->ids[i]))
				continue;	/* destroyed */
			rcu_read_lock();
			tw = xa_load(&c->t->e->exp->tws, c->ids[i]);
			if (tw) {
				spin_lock(&r->tw.lock);
				c->pinned_seen += tw->in_tree && !tw->armed;
				spin_unlock(&r->tw.lock);
			}
			rcu_read_unlock();
			if (i % 97 == 1 && c->rounds % 3 == 0) {
				tw_ctl(c->t, clanq_ioctl_tw_destroy, c->ids[i]);
				c->destroyed++;
			} else {
				tw_ctl(c->t, clanq_ioctl_tw_arm, c->ids[i]);
			}
		}
		c->rounds++;
		cond_resched();
	}
	complete(&c->done);
	return 0;
}

/*
 * Walks that let go of the lock, against a thread that disarms, re-arms
 * and destroys half the tripwires meanwhile: the other half, armed
 * throughout, fires exactly once per write (a churned one once per
 * arming: re-armed behind the walk, it may fire again); and once all is
 * quiet the tree holds exactly the armed
 * tripwires, none pinned (a walk took out what it pinned), and the
 * armed bitmap still covers the word.
 */
static void a_walk_resumes_while_tripwires_come_and_go(struct kunit *test)
{
	const unsigned int n = 2048;
	struct walk_env *t = test->priv;
	struct walk_ep we;
	u32 *ids = kunit_kcalloc(test, n, sizeof(*ids), GFP_KERNEL);
	struct churn *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	struct clanq_kregion *r = t->d.r;
	unsigned int i, writes, bad = 0, in_tree = 0;
	struct clanq_ktw *tw;

	KUNIT_ASSERT_NOT_NULL(test, ids);
	KUNIT_ASSERT_NOT_NULL(test, c);
	walk_ep_create(test, t, n, &we);
	for (i = 0; i < n; i++) {
		ids[i] = tw_make(test, t, we.ep, 0, PERSISTENT);
		if (!(i % 256))
			cond_resched();
	}
	c->t = t;
	c->ids = ids;
	c->n = n;
	init_completion(&c->done);
	thread_start(test, churn_fn, c, "tw-churn", 0);
	/* until the churn went round three times (it destroys in the first) */
	for (writes = 0; writes < 20 || (READ_ONCE(c->rounds) < 3 && writes < 2000);
	     writes++) {
		KUNIT_ASSERT_EQ(test, clanq_rx_write(r, 0, t->s.r, 0, 8, NULL,
						     NULL), 0);
		cond_resched();
	}
	atomic_set(&c->stop, 1);
	KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&c->done, 30 * HZ));
	kunit_info(test, "%u writes, %u churn rounds, %u tripwires seen pinned while disarmed, %u destroyed",
		   writes, c->rounds, c->pinned_seen, c->destroyed);

	for (i = 0; i < n; i += 2) {
		tw = ktw(t, ids[i]);
		bad += !tw || READ_ONCE(tw->fires) != writes;
	}
	KUNIT_EXPECT_EQ_MSG(test, bad, 0, "armed throughout, not fired exactly once per write");
	bad = 0;

	spin_lock(&r->tw.lock);
	for (tw = rb_entry_safe(rb_first_cached(&r->tw.armed), struct clanq_ktw, rb);
	     tw; tw = rb_entry_safe(rb_next(&tw->rb), struct clanq_ktw, rb)) {
		in_tree++;
		bad += !tw->armed || !tw->in_tree || tw->pins;
	}
	spin_unlock(&r->tw.lock);
	KUNIT_EXPECT_EQ_MSG(test, bad, 0, "in the tree disarmed, or pinned");
	KUNIT_EXPECT_EQ(test, in_tree, READ_ONCE(r->tw.nr_armed));
	KUNIT_EXPECT_EQ(test, in_tree, n - c->destroyed);
	KUNIT_EXPECT_TRUE(test, test_bit(0, (unsigned long *)r->tw.bitmap->vaddr));
}

static void max_oob_waiters_restore(void *old)
{
	WRITE_ONCE(clanq_max_oob_waiters, (unsigned int)(uintptr_t)old);
}

/*
 * The OOB wait's entries: at most max_oob_waiters per endpoint (the
 * next TW_WAIT with CLANQ_TW_WAIT_OOB is refused with -ENOSPC, one
 * without it is not), given back when the waits end; asleep, they are
 * not woken by their endpoint's other tripwires firing (their task does
 * not run), only by an OOB message, which ends their wait with 0.
 */
static void oob_waiters_are_counted_and_sleep_through_other_fires(struct kunit *test)
{
	struct walk_env *t = test->priv;
	struct clanq_oob_msg msg = { .len = 8 };
	struct walk_ep we;
	struct tw_waiter *w[2];
	struct clanq_ioc_tw_wait third = {
		.off = 64, .flags = CLANQ_TW_WAIT_OOB, .timeout_ns = NSEC_PER_MSEC,
	};
	unsigned long nvcsw[2];
	void *old_max = (void *)(uintptr_t)clanq_max_oob_waiters;
	u32 watched;
	unsigned int i;

	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, max_oob_waiters_restore,
							old_max), 0);
	WRITE_ONCE(clanq_max_oob_waiters, 2);
	walk_ep_create(test, t, 64, &we);
	watched = tw_make(test, t, we.ep, 64, 0);
	tw_make(test, t, we.ep, 1024, PERSISTENT);	/* another, fired below */
	for (i = 0; i < 2; i++)
		w[i] = tw_waiter_start(test, t->e->exp, watched, 64, 0,
				       CLANQ_TW_WAIT_OOB, WAIT_NS);
	for (i = 0; i < 2; i++)
		await_asleep(test, t, w[i]);
	KUNIT_EXPECT_EQ(test, atomic_read(&we.ep->tw.oob_waiters), 2);

	third.id = watched;
	KUNIT_EXPECT_EQ(test, clanq_ioctl_tw_wait(t->e->exp, &third), -ENOSPC);
	third.flags = 0;
	KUNIT_EXPECT_EQ(test, clanq_ioctl_tw_wait(t->e->exp, &third), -ETIMEDOUT);

	for (i = 0; i < 2; i++)
		nvcsw[i] = READ_ONCE(w[i]->task->nvcsw);
	for (i = 0; i < 50; i++)
		KUNIT_ASSERT_EQ(test, clanq_rx_write(t->d.r, 1024, t->s.r, 0, 8,
						     NULL, NULL), 0);
	KUNIT_EXPECT_EQ(test, ctr(&we.counters->tw_fires), 50);
	for (i = 0; i < 2; i++) {
		KUNIT_EXPECT_FALSE(test, completion_done(&w[i]->done));
		KUNIT_EXPECT_LE_MSG(test, READ_ONCE(w[i]->task->nvcsw) - nvcsw[i], 2,
				    "waiter %u woke for fires of another tripwire", i);
	}

	KUNIT_ASSERT_EQ(test, clanq_rx_oob(t->e->peer, we.ep->id, &msg), 0);
	for (i = 0; i < 2; i++) {
		KUNIT_ASSERT_TRUE(test, wait_for_completion_timeout(&w[i]->done, 10 * HZ));
		KUNIT_EXPECT_EQ(test, w[i]->ret, 0);
	}
	KUNIT_EXPECT_EQ(test, atomic_read(&we.ep->tw.oob_waiters), 0);
	KUNIT_EXPECT_EQ(test, READ_ONCE(ktw(t, watched)->fires), 0);
}

/*
 * Fires bound an engine turn as bytes do (issue 28, item 3): a turn whose
 * writes fired CLANQ_RDMA_TURN_FIRES (256) tripwires ends after that
 * chunk, even inside a logical message. 64 writes of 8 bytes, one
 * message, onto a word under FIRE_TWS persistent tripwires: without the
 * bound one turn serves all 64 (64 * FIRE_TWS fires, the ~1 s turn of the
 * issue); with it, a turn serves the writes up to the first that reaches
 * 256 fires. Phase 1: 100 tripwires, 3 writes a turn; phase 2: 1,024,
 * one write a turn. Every write still fires every tripwire.
 */
#define FIRE_MSG	64u
static void a_turn_ends_once_its_writes_fired_enough(struct kunit *test)
{
	static const unsigned int nr_tws[] = { 100, 1024 }, per_turn[] = { 3, 1 };
	struct walk_env *t = test->priv;
	struct uep *u = rdma_uep_create(test, t->e->ctx, 128, 128);
	atomic64_t *fire_turns = &t->e->nic->stats.rdma_fire_turns;
	struct walk_ep we[4];
	struct clanq_rdma_req req;
	unsigned int phase, i, n = 0, turns;
	s64 fires0, fturns0;
	ktime_t t0;
	u64 first_ns;

	for (i = 0; i < ARRAY_SIZE(we); i++)
		walk_ep_create(test, t, 256, &we[i]);
	for (phase = 0; phase < ARRAY_SIZE(nr_tws); phase++) {
		for (; n < nr_tws[phase]; n++)
			tw_make(test, t, we[n % ARRAY_SIZE(we)].ep, 0, PERSISTENT);
		KUNIT_ASSERT_EQ(test, READ_ONCE(t->d.r->tw.nr_armed), n);
		for (i = 0; i < FIRE_MSG; i++) {
			req = mkreq(t->s.id, t->d.ap, 8 * i, 0, 8, COOKIE(i),
				    i == FIRE_MSG - 1 ? SIG_LAST : CLANQ_RDMA_SIGNAL);
			post(test, u, &req);
		}
		fires0 = nic_stat(&t->e->peer->stats.tw_fires);
		fturns0 = nic_stat(fire_turns);
		kick(test, u);

		t0 = ktime_get();
		KUNIT_ASSERT_PTR_EQ(test, step(t->e), u->ep);
		first_ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
		KUNIT_EXPECT_EQ_MSG(test, unread(u), per_turn[phase],
				    "%u tripwires: writes served by the first turn", n);
		for (turns = 1; unread(u) < FIRE_MSG; turns++) {
			KUNIT_ASSERT_LE(test, turns, FIRE_MSG);
			KUNIT_ASSERT_PTR_EQ(test, step(t->e), u->ep);
		}
		for (i = 0; i < FIRE_MSG; i++)
			expect_comp(test, u, COOKIE(i), 8, 0);
		settle(test, t->e, 2);
		KUNIT_EXPECT_EQ(test, turns, DIV_ROUND_UP(FIRE_MSG, per_turn[phase]));
		KUNIT_EXPECT_EQ(test, nic_stat(fire_turns) - fturns0, (s64)turns - 1);
		KUNIT_EXPECT_EQ_MSG(test, nic_stat(&t->e->peer->stats.tw_fires) - fires0,
				    (s64)FIRE_MSG * n, "every write fired every tripwire");
		kunit_info(test, "%u tripwires on the word: %u writes in %u turns, the first %llu us\n",
			   n, FIRE_MSG, turns, first_ns / 1000);
	}
}

static struct kunit_case clanq_tripwire_walk_cases[] = {
	KUNIT_CASE_SLOW(thousands_on_one_word_fire_once_in_bounded_holds),
	KUNIT_CASE_SLOW(a_walk_resumes_while_tripwires_come_and_go),
	KUNIT_CASE(oob_waiters_are_counted_and_sleep_through_other_fires),
	KUNIT_CASE(a_turn_ends_once_its_writes_fired_enough),
	{}
};

static struct kunit_suite clanq_tripwire_walk_suite = {
	.name = "clanq_tripwire_walk",
	.init = walk_test_init,
	.test_cases = clanq_tripwire_walk_cases,
};

kunit_test_suites(&clanq_tripwire_walk_suite);
