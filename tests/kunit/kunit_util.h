/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the clanq KUnit suites share (header-only).
 *
 * Guard bytes
 *	A segment is described by its spans: the parts the code under test
 *	may write, in order and not overlapping. Every other byte holds
 *	GUARD_BYTE, and the code under test must never change one.
 *
 * The driver fixture
 *	The suites that call the driver (oob, evq) give every test a NIC of
 *	its own, with no device, and a context on it; they create endpoints
 *	as EP_CREATE does, deliver messages whose every byte says which
 *	message it is, and start kernel threads that cleanup stops. (The
 *	queue suite uses only the guard bytes: it calls nothing of the
 *	driver.)
 */
#ifndef _CLANQ_KUNIT_UTIL_H
#define _CLANQ_KUNIT_UTIL_H

#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/string.h>
#include <linux/types.h>

#include "../driver/clanq_drv.h"

#define GUARD_BYTE	0xa5
#define INTACT		(-1L)		/* "no stray or differing byte" */

/* A part of a segment that is not guard bytes. */
struct span {
	size_t start;
	size_t len;
};

/* Write GUARD_BYTE into every byte of @seg outside the @n spans @s. */
static inline void guard_fill(struct kunit *test, u8 *seg, size_t size,
			      const struct span *s, size_t n)
{
	size_t at = 0, i;

	for (i = 0; i <= n; i++) {
		size_t end = i < n ? s[i].start : size;

		KUNIT_ASSERT_GE_MSG(test, end, at, "layout overlaps at %zu", at);
		memset(seg + at, GUARD_BYTE, end - at);
		if (i < n)
			at = s[i].start + s[i].len;
	}
}

/*
 * Offset of the first byte of @seg outside the @n spans @s that is no
 * longer GUARD_BYTE, or INTACT.
 */
static inline long stray_byte(const u8 *seg, size_t size,
			      const struct span *s, size_t n)
{
	size_t at = 0, i;
	const u8 *bad;

	for (i = 0; i <= n; i++) {
		size_t end = i < n ? s[i].start : size;

		bad = memchr_inv(seg + at, GUARD_BYTE, end - at);
		if (bad)
			return bad - seg;
		if (i < n)
			at = s[i].start + s[i].len;
	}
	return INTACT;
}

/* Offset of the first byte where @a and @b differ, or INTACT. */
static inline long first_diff(const void *a, const void *b, size_t len)
{
	const u8 *x = a, *y = b;
	size_t i;

	if (!memcmp(a, b, len))
		return INTACT;
	for (i = 0; i < len; i++)
		if (x[i] != y[i])
			return i;
	return INTACT;
}

/* A copy of the @size bytes at @seg, freed at cleanup. */
static inline u8 *snapshot(struct kunit *test, const u8 *seg, size_t size)
{
	u8 *copy = kunit_kmalloc(test, size, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, copy);
	memcpy(copy, seg, size);
	return copy;
}

/* Index values no queue or ring of @nr_slots slots can hold. */
static inline void out_of_range_values(u32 nr_slots, u32 v[8])
{
	v[0] = nr_slots;
	v[1] = nr_slots + 1;
	v[2] = nr_slots << 1;
	v[3] = 0x7fffffffu;
	v[4] = 0x80000000u;
	v[5] = 0x80000001u;
	v[6] = ~(nr_slots - 1);
	v[7] = 0xffffffffu;
}

/*
 * The driver fixture.
 */

#define PEER_NODE	0x9e11u		/* stamped into test messages */

KUNIT_DEFINE_ACTION_WRAPPER(nic_fini_action, clanq_nic_fini,
			    struct clanq_nic *);
KUNIT_DEFINE_ACTION_WRAPPER(ctx_put_action, clanq_ctx_put,
			    struct clanq_ctx *);
KUNIT_DEFINE_ACTION_WRAPPER(kthread_stop_put_action, kthread_stop_put,
			    struct task_struct *);

struct nic_fixture {
	struct clanq_nic nic;
	struct clanq_ctx *ctx;
};

/* Another context on @nic, put at cleanup. */
static inline struct clanq_ctx *ctx_add(struct kunit *test,
					struct clanq_nic *nic)
{
	struct clanq_ctx *ctx = clanq_ctx_create(nic);

	KUNIT_ASSERT_NOT_NULL(test, ctx);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, ctx_put_action,
							ctx), 0);
	return ctx;
}

/*
 * A suite's init: a fresh NIC (@index, @node) and one context on it, in
 * test->priv. Torn down by cleanup actions, which run after the test's
 * own (in reverse order), so that threads and objects a test adds go
 * before the context and the NIC.
 */
static inline int nic_fixture_init(struct kunit *test, unsigned int index,
				   u32 node)
{
	struct nic_fixture *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, f);
	KUNIT_ASSERT_EQ(test, clanq_nic_init(&f->nic, index, node), 0);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, nic_fini_action,
							&f->nic), 0);
	f->ctx = ctx_add(test, &f->nic);
	test->priv = f;
	return 0;
}

/*
 * An endpoint of @ctx with @slots OOB slots, described in @c as EP_CREATE
 * would. The context owns it: its last put destroys it.
 */
static inline struct clanq_kep *ep_create(struct kunit *test,
					  struct clanq_ctx *ctx, u32 slots,
					  struct clanq_ioc_ep_create *c)
{
	struct clanq_kep *ep;

	mutex_lock(&ctx->lock);
	ep = clanq_kep_create(ctx, slots, CLANQ_DEFAULT_RDMA_SLOTS,
			      CLANQ_DEFAULT_RDMA_SLOTS, CLANQ_DEFAULT_TW_SLOTS, 0);
	if (!IS_ERR(ep))
		clanq_kep_describe(ep, c);
	mutex_unlock(&ctx->lock);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ep);
	return ep;
}

static inline void ep_destroy(struct clanq_ctx *ctx, struct clanq_kep *ep)
{
	mutex_lock(&ctx->lock);
	clanq_kep_destroy(ep);
	mutex_unlock(&ctx->lock);
}

/* Message @seq from sender @tag: every byte says which message it is. */
static inline void msg_fill(struct clanq_oob_msg *m, u32 tag, u32 seq)
{
	u32 i;

	memset(m, 0, sizeof(*m));
	m->type = CLANQ_OOB_TYPE_USER + tag;
	m->len = CLANQ_OOB_PAYLOAD;
	m->src.node = PEER_NODE;
	m->src.id = tag;
	for (i = 0; i < CLANQ_OOB_PAYLOAD; i++)
		m->payload[i] = (u8)(seq * 31 + i * 7 + tag);
	memcpy(m->payload, &seq, sizeof(seq));
}

static inline u32 msg_seq(const struct clanq_oob_msg *m)
{
	u32 seq;

	memcpy(&seq, m->payload, sizeof(seq));
	return seq;
}

static inline void max_xfer_restore(void *old)
{
	WRITE_ONCE(clanq_rdma_max_xfer, (unsigned int)(uintptr_t)old);
}

/* Set the module parameter rdma_max_xfer until the test ends. */
static inline void max_xfer_set(struct kunit *test, unsigned int bytes)
{
	void *old = (void *)(uintptr_t)READ_ONCE(clanq_rdma_max_xfer);

	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, max_xfer_restore,
							old), 0);
	WRITE_ONCE(clanq_rdma_max_xfer, bytes);
}

static inline void rdma_window_restore(void *old)
{
	WRITE_ONCE(clanq_rdma_window, (unsigned int)(uintptr_t)old);
}

/* Set the module parameter rdma_window until the test ends. */
static inline void rdma_window_set(struct kunit *test, unsigned int chunks)
{
	void *old = (void *)(uintptr_t)READ_ONCE(clanq_rdma_window);

	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, rdma_window_restore,
							old), 0);
	WRITE_ONCE(clanq_rdma_window, chunks);
}

static inline s64 nic_stat(atomic64_t *counter)
{
	return atomic64_read(counter);
}

/* Start @fn(@data); cleanup stops it, if the test does not first. */
static inline struct task_struct *thread_start(struct kunit *test,
					       int (*fn)(void *), void *data,
					       const char *what, u32 i)
{
	struct task_struct *task = kthread_run(fn, data, "clanq-%s/%u",
					       what, i);

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, task);
	/* the thread may end before it is stopped: keep its task_struct */
	get_task_struct(task);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							kthread_stop_put_action,
							task), 0);
	return task;
}

/* A thread blocked in TW_WAIT on tripwire @w.id: tw_waiter_start(). */
struct tw_waiter {
	struct clanq_ctx *ctx;
	struct clanq_ioc_tw_wait w;
	struct task_struct *task;
	int ret;			/* TW_WAIT's, once @done */
	struct completion done;
};

static inline int tw_waiter_fn(void *data)
{
	struct tw_waiter *w = data;

	w->ret = clanq_ioctl_tw_wait(w->ctx, &w->w);
	complete(&w->done);
	return 0;
}

/* TW_WAIT(@id, @off, @old, @flags) for up to @timeout_ns, in a thread. */
static inline struct tw_waiter *tw_waiter_start(struct kunit *test,
						struct clanq_ctx *ctx, u32 id,
						u64 off, u64 old, u32 flags,
						u64 timeout_ns)
{
	struct tw_waiter *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, w);
	w->ctx = ctx;
	w->w.id = id;
	w->w.off = off;
	w->w.old = old;
	w->w.flags = flags;
	w->w.timeout_ns = timeout_ns;
	init_completion(&w->done);
	w->task = thread_start(test, tw_waiter_fn, w, "tw-wait", id);
	return w;
}

/*
 * A sender: a kthread that, once @go completes, delivers @nr_msgs messages
 * as sender @tag, message seq to endpoint @dst[(@tag + seq) % @nr_dst],
 * and counts what each delivery returned.
 */
struct sender {
	struct clanq_nic *nic;
	const u32 *dst;		/* @nr_dst endpoint ids */
	u32 nr_dst;
	u32 nr_msgs;
	u32 tag;
	struct completion *go;
	atomic_t *running;	/* decremented when done */
	u32 delivered;		/* by return value */
	u32 dropped;
	u32 other;
};

static inline int sender_fn(void *data)
{
	struct sender *s = data;
	struct clanq_oob_msg msg;
	u32 seq;
	int r;

	/* all senders start together; a stop before "go" ends the wait */
	while (!wait_for_completion_timeout(s->go, HZ / 10))
		if (kthread_should_stop())
			goto out;
	for (seq = 0; seq < s->nr_msgs && !kthread_should_stop(); seq++) {
		msg_fill(&msg, s->tag, seq);
		r = clanq_rx_oob(s->nic,
				 s->dst[(s->tag + seq) % s->nr_dst], &msg);
		if (!r)
			s->delivered++;
		else if (r == -ENOBUFS)
			s->dropped++;
		else
			s->other++;
		cond_resched();
	}
out:
	/* orders the counts above before the test thread sees "done" */
	smp_mb__before_atomic();
	atomic_dec(s->running);
	return 0;
}

/*
 * Once the @n senders @s are done: each delivered or dropped every one of
 * its messages, and the application took @got[t] of sender t's, exactly
 * those delivered. Adds up the deliveries and drops in *@delivered and
 * *@dropped.
 */
static inline void senders_check(struct kunit *test, const struct sender *s,
				 u32 n, const u32 *got, u64 *delivered,
				 u64 *dropped)
{
	u32 t;

	for (t = 0; t < n; t++) {
		KUNIT_EXPECT_EQ_MSG(test, s[t].other, 0, "sender %u", t);
		KUNIT_EXPECT_EQ_MSG(test, s[t].delivered + s[t].dropped,
				    s[t].nr_msgs, "sender %u", t);
		KUNIT_EXPECT_EQ_MSG(test, got[t], s[t].delivered,
				    "sender %u", t);
		*delivered += s[t].delivered;
		*dropped += s[t].dropped;
	}
}

#endif /* _CLANQ_KUNIT_UTIL_H */
