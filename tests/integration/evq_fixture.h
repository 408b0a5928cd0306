/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Shared by the test_evq_* programs: an evq and its endpoints in one
 * context on node 0, a sender in another, and the checks on events and
 * messages. Include after cmocka.h and itest.h.
 */
#ifndef CLANQ_EVQ_FIXTURE_H
#define CLANQ_EVQ_FIXTURE_H

#include <string.h>

#define TAG		0x65767121u

/*
 * An evq and its endpoints in one context on node 0; a sender in another
 * context on node 1.
 */
struct fix {
	struct clanq_dev dev;
	struct clanq_dev tx_dev;
	struct clanq_evq evq;
	struct clanq_ep tx;
};

static inline void fix_open(struct fix *f, unsigned int max_regs)
{
	assert_int_equal(clanq_open_nic(&f->dev, 0), 0);
	assert_int_equal(clanq_open_nic(&f->tx_dev, 1), 0);
	assert_int_equal(clanq_evq_create(&f->dev, &f->evq, max_regs), 0);
	assert_int_equal(clanq_ep_create(&f->tx_dev, &f->tx, 0), 0);
}

static inline void fix_close(struct fix *f)
{
	assert_int_equal(clanq_ep_destroy(&f->tx), 0);
	assert_int_equal(clanq_evq_destroy(&f->evq), 0);
	assert_int_equal(clanq_close(&f->tx_dev), 0);
	assert_int_equal(clanq_close(&f->dev), 0);
}

static inline void send_seq(struct clanq_ep *from, struct clanq_addr dst, uint32_t seq)
{
	assert_int_equal(itest_send(from, dst, ITEST_TYPE, TAG, seq), 0);
}

static inline int do_register(struct clanq_evq *evq, struct clanq_ep *ep,
			      uint64_t cookie)
{
	int reg = clanq_evq_register(evq, ep, CLANQ_EV_OOB, cookie);

	assert_true(reg >= 0);
	return reg;
}

/*
 * The usual fixture: an evq for 4 registrations, and one endpoint of 16
 * slots registered on it with cookie. Return: its registration index.
 */
static inline int fix_open_ep(struct fix *f, struct clanq_ep *ep, uint64_t cookie)
{
	fix_open(f, 4);
	assert_int_equal(clanq_ep_create(&f->dev, ep, 16), 0);
	return do_register(&f->evq, ep, cookie);
}

/* The endpoint first, then the fixture. */
static inline void fix_close_ep(struct fix *f, struct clanq_ep *ep)
{
	assert_int_equal(clanq_ep_destroy(ep), 0);
	fix_close(f);
}

/* the next event, within ITEST_RECV_TIMEOUT */
static inline void take_event(struct clanq_evq *evq, struct clanq_event *ev)
{
	assert_int_equal(clanq_evq_wait(evq, ev, ITEST_RECV_TIMEOUT), 0);
	assert_int_equal(ev->events, CLANQ_EV_OOB);
}

static inline void take_event_of(struct clanq_evq *evq, int reg, uint64_t cookie)
{
	struct clanq_event ev = { 0 };

	take_event(evq, &ev);
	assert_int_equal(ev.cookie, cookie);
	assert_int_equal(ev.reg, reg);
}

static inline void expect_no_event(struct clanq_evq *evq)
{
	struct clanq_event ev = { 0 };
	int r = clanq_evq_wait(evq, &ev, ITEST_QUIET_NS);

	if (r == 0)
		fail_msg("unexpected event: reg %u, events %#x, cookie %#llx",
			 ev.reg, ev.events, (unsigned long long)ev.cookie);
	assert_int_equal(r, -ETIMEDOUT);
}

/* Take exactly n messages, seq first.., from src; then the queue is empty. */
static inline void drain(struct clanq_ep *ep, struct clanq_addr src, uint32_t first,
			 unsigned int n)
{
	struct clanq_oob_msg m;
	const char *why;
	unsigned int i;

	for (i = 0; i < n; i++) {
		assert_int_equal(clanq_oob_recv(ep, &m), 0);
		why = itest_check(&m, src, ITEST_TYPE, TAG, first + i);
		if (why)
			fail_msg("message %u: %s", first + i, why);
	}
	assert_int_equal(clanq_oob_recv(ep, &m), -EAGAIN);
}

static inline void set_pending(struct clanq_evq *evq, uint64_t v)
{
	uint32_t w;

	for (w = 0; w < evq->nr_words; w++)
		__atomic_store_n(&evq->pending[w], v, __ATOMIC_SEQ_CST);
}

#endif /* CLANQ_EVQ_FIXTURE_H */
