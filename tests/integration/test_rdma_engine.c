// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The RDMA engine through the real driver, from one endpoint:
 *
 *  - each malformed request completes with the status the ABI names and
 *    holds up nothing queued behind it;
 *  - kicks are rare under a stream of posts, and exactly one wakes an
 *    idle engine; one made while the engine is busy wakes nothing twice;
 *  - completions raise CLANQ_EV_RDMA events; a write within one region
 *    is a memmove;
 *  - a full completion queue stalls its endpoint, only it, and loses
 *    nothing;
 *  - an export's key can name its region (CLANQ_EXPORT_KEY_NAMES_REGION):
 *    a peer imports with the key alone, and a wrong secret in it is
 *    refused like any wrong key.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "rdma_fixture.h"


/*
 * Malformed requests.
 */

#define ERR_SRC		(64 * KiB)
#define ERR_DST		(64 * KiB)
#define ERR_AP_OFF	(PAGE + 1)
#define ERR_AP_LEN	(32 * KiB)
#define ERR_MAX		32
#define GOOD_LEN	33

struct bad {
	const char *what;
	struct clanq_rdma_req req;
	int status;
};

static void each_bad_request_completes_with_its_status_and_stalls_nothing(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 128, .cq_slots = 128 };
	struct clanq_dev a, b, c;
	struct clanq_region src, dst, gone, other;
	struct clanq_ap apw, apr, apg, apx;
	struct clanq_rdma_req base, good;
	struct clanq_rdma_comp comp;
	struct bad bads[ERR_MAX];
	struct clanq_ep ep;
	uint64_t kw, kg, seed = 0x5eed0f0bad, at;
	unsigned int n = 0, i;
	const char *why;
	uint8_t *expect;

	(void)state;
	/* a: the poster; b: the exporter, on node 1; c: a bystander on node 0 */
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_open_nic(&c, 0), 0);
	assert_int_equal(clanq_ep_create_attr(&a, &ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&a, &src, ERR_SRC), 0);
	pat_fill(src.mem, seed, 0, ERR_SRC, 0);
	assert_int_equal(clanq_region_alloc(&b, &dst, ERR_DST), 0);
	bg_fill(dst.mem, 0, ERR_DST);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHTS_ALL, &kw), 0);
	assert_int_equal(clanq_region_alloc(&b, &gone, ERR_DST), 0);
	assert_int_equal(clanq_region_export(&gone, CLANQ_RIGHTS_ALL, &kg), 0);
	assert_int_equal(clanq_region_alloc(&c, &other, PAGE), 0);

	assert_int_equal(clanq_ap_import(&a, &apw, dst.addr, kw, ERR_AP_OFF,
					 ERR_AP_LEN, CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_import(&a, &apr, dst.addr, kw, ERR_AP_OFF,
					 ERR_AP_LEN, CLANQ_RIGHT_READ), 0);
	/* the same window as apw's: only the revocation can be wrong */
	assert_int_equal(clanq_ap_import(&a, &apg, gone.addr, kg, ERR_AP_OFF,
					 ERR_AP_LEN, CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(clanq_ap_import(&a, &apx, dst.addr, kw, 0, PAGE,
					 CLANQ_RIGHT_WRITE), 0);
	/* apg's region goes away under it; apx is closed: its id names nothing */
	assert_int_equal(clanq_region_free(&gone), 0);
	assert_int_equal(clanq_ap_close(&apx), 0);

#define BAD(w, st, field, val)						\
	do {								\
		bads[n].what = (w);					\
		bads[n].req = base;					\
		bads[n].req.field = (val);				\
		bads[n].status = (st);					\
		n++;							\
	} while (0)

	/*
	 * Each bad request, were it carried out, would write a distinct
	 * 32-byte piece at 16 KiB + 64 i of the window, which the check of
	 * the whole region below would find.
	 */
	base = itest_rdma_req(src.addr.id, apw.id, 0, 0, 32, 0, CLANQ_RDMA_LAST);
	BAD("unknown flag", -EINVAL, flags, CLANQ_RDMA_LAST | (1u << 3));
	BAD("all flags", -EINVAL, flags, ~0u);
	BAD("unknown op", -EINVAL, op, CLANQ_RDMA_NR_OPS);
	BAD("op bit 31", -EINVAL, op, 1u << 31);
	BAD("WRITE with operand[0]", -EINVAL, operand[0], 1);
	BAD("WRITE with operand[1]", -EINVAL, operand[1], 1ull << 63);
	BAD("unknown region", -ENOENT, src_region, 0xfffffffeu);
	BAD("another context's region", -ENOENT, src_region, other.addr.id);
	BAD("unknown aperture", -ENOENT, dst_ap, 0xfffffffeu);
	BAD("closed aperture", -ENOENT, dst_ap, apx.id);
	BAD("read-only aperture", -EACCES, dst_ap, apr.id);
	BAD("revoked aperture", -ENXIO, dst_ap, apg.id);
	BAD("src_off + len past the region", -ERANGE, src_off, ERR_SRC - 31);
	BAD("src_off at the region's end", -ERANGE, src_off, ERR_SRC);
	BAD("src_off + len overflows", -ERANGE, src_off, ~0ull - 15);
	BAD("dst_off + len past the aperture", -ERANGE, dst_off, ERR_AP_LEN - 31);
	BAD("dst_off + len overflows", -ERANGE, dst_off, ~0ull - 15);
	BAD("len past both", -ERANGE, len, ERR_SRC + 1);
	BAD("len overflows", -ERANGE, len, ~0ull);
#undef BAD
	assert_true(n <= ERR_MAX);
	assert_true(2 * n < attr.cq_slots);

	/* bad, good, bad, good...: all in the queue before the engine looks */
	for (i = 0; i < n; i++) {
		struct clanq_rdma_req *r = &bads[i].req;

		r->cookie = 0xbad0000000000000ull | i;
		/* errors complete whether signaled or not */
		if (i % 2 && !(r->flags & ~CLANQ_RDMA_FLAGS))
			r->flags |= CLANQ_RDMA_SIGNAL;
		if (r->dst_off == 0)
			r->dst_off = 16 * KiB + 64 * i;
		if (r->src_off == 0)
			r->src_off = 8 * KiB + 64 * i;
		assert_int_equal(clanq_rdma_post(&ep, r), 0);
		good = itest_rdma_req(src.addr.id, apw.id, 100 + 64 * i, 1 + 64 * i,
			     GOOD_LEN, 0x6006000000000000ull | i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&ep, &good), 0);
	}
	for (i = 0; i < n; i++) {
		memset(&comp, 0, sizeof(comp));
		if (!itest_wait_comp(&ep, &comp, COMP_TIMEOUT))
			fail_msg("no completion for bad request %u (%s)", i,
				 bads[i].what);
		if (comp.cookie != bads[i].req.cookie ||
		    comp.status != bads[i].status || comp.len != 0)
			fail_msg("%s: completion cookie %#llx status %d len %llu; expected cookie %#llx status %d len 0",
				 bads[i].what, (unsigned long long)comp.cookie,
				 comp.status, (unsigned long long)comp.len,
				 (unsigned long long)bads[i].req.cookie,
				 bads[i].status);
		expect_comp(&ep, 0x6006000000000000ull | i, 0, GOOD_LEN);
	}
	expect_no_comp(&ep);
	assert_int_equal(itest_ctr(&ep.counters->rdma_errors), n);

	/* the good ones wrote, the bad ones nothing */
	expect = malloc(ERR_DST);
	assert_non_null(expect);
	bg_fill(expect, 0, ERR_DST);
	for (i = 0; i < n; i++)
		pat_fill(expect + ERR_AP_OFF + 1 + 64 * i, seed, 100 + 64 * i,
			 GOOD_LEN, 0);
	at = mem_diff(dst.mem, expect, ERR_DST);
	why = at < ERR_DST ? "region differs" : NULL;
	free(expect);
	if (why)
		fail_msg("%s at offset %llu", why, (unsigned long long)at);

	assert_int_equal(clanq_ap_close(&apw), 0);
	assert_int_equal(clanq_ap_close(&apr), 0);
	assert_int_equal(clanq_ap_close(&apg), 0);
	assert_int_equal(clanq_region_free(&src), 0);
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_region_free(&other), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&c), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

/*
 * Doorbells.
 */


#define STREAM_REQS	2000
#define STREAM_EVERY	64

static void a_stream_of_posts_rings_few_doorbells(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 256, .cq_slots = 64 };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct pair p;
	unsigned int i, got = 0, want = 0, full = 0;
	uint64_t q, e0, e1, reqs, bells, calls;
	uint64_t end, t0;
	int64_t dt;
	int r;

	(void)state;
	pair_open(&p, &attr);
	q = itest_query_cost(&p.a);

	e0 = itest_entries(&p.a);
	t0 = clanq_now_ns();
	end = t0 + RUN_TIMEOUT;
	for (i = 0; i < STREAM_REQS; i++) {
		bool sig = i % STREAM_EVERY == STREAM_EVERY - 1 ||
			   i == STREAM_REQS - 1;

		req = stream_req(&p, i, CLANQ_RDMA_LAST |
				 (sig ? CLANQ_RDMA_SIGNAL : 0));
		want += sig;
		while ((r = clanq_rdma_post(&p.ep, &req)) == -EAGAIN) {
			/* the queue is full: the engine is busy with it */
			full++;
			assert_true(clanq_now_ns() < end);
			clanq_cpu_relax();
		}
		assert_int_equal(r, 0);
		while (!clanq_rdma_poll(&p.ep, &c)) {
			assert_int_equal(c.status, 0);
			assert_int_equal(c.len, STREAM_LEN);
			got++;
		}
	}
	while (got < want) {
		memset(&c, 0, sizeof(c));
		if (!itest_wait_comp(&p.ep, &c, COMP_TIMEOUT))
			fail_msg("%u of %u completions", got, want);
		assert_int_equal(c.status, 0);
		got++;
	}
	/* the last completion is the last request's: all came in order */
	assert_int_equal(c.cookie, 0xd00b000000000000ull | (STREAM_REQS - 1));
	dt = clanq_now_ns() - t0;
	e1 = itest_entries(&p.a);
	expect_no_comp(&p.ep);

	reqs = itest_ctr(&p.ep.counters->rdma_reqs);
	bells = itest_ctr(&p.ep.counters->rdma_kicks);
	calls = e1 - e0 - q;
	printf("kicks/requests = %.4f (%llu/%llu); system calls/requests = %.4f (%llu); "
	       "queue full %u times; %.0f requests/s (informal)\n",
	       (double)bells / (double)reqs, (unsigned long long)bells,
	       (unsigned long long)reqs, (double)calls / (double)reqs,
	       (unsigned long long)calls, full,
	       STREAM_REQS / ((double)dt / ITEST_NS_PER_S));
	assert_int_equal(reqs, STREAM_REQS);
	/* the first post found the engine idle */
	assert_true(bells >= 1);
	/* every doorbell that woke the engine was a system call of ours */
	assert_true(bells <= calls);
	/* the point: most posts find the engine busy and make no call */
	assert_true(bells * 2 < reqs);
	assert_true(calls * 2 < reqs);
	stream_check(&p, STREAM_REQS);
	pair_close(&p);
}

static void an_idle_engine_is_woken_by_exactly_one_doorbell(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_req req;
	struct pair p;
	uint64_t q, e0, e1;
	unsigned int i;

	(void)state;
	pair_open(&p, &attr);
	q = itest_query_cost(&p.a);
	/* a new endpoint: the engine is not looking at its queue */
	assert_int_not_equal(__atomic_load_n(p.ep.need_wakeup, __ATOMIC_ACQUIRE), 0);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_kicks), 0);

	for (i = 0; i < 3; i++) {
		/* idle again once the last request is done */
		assert_true(wait_doorbell_set(&p.ep));
		req = stream_req(&p, i, REQ_DONE);
		e0 = itest_entries(&p.a);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
		e1 = itest_entries(&p.a);
		/* exactly one system call: the doorbell */
		assert_int_equal(e1 - e0, q + 1);
		expect_comp(&p.ep, req.cookie, 0, STREAM_LEN);
		assert_int_equal(itest_ctr(&p.ep.counters->rdma_kicks), i + 1);
		assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), i + 1);
	}
	stream_check(&p, 3);
	pair_close(&p);
}

/*
 * rdma_inline: with nobody else in line, the doorbell's caller runs the
 * engine's turn itself, so a small write is done, and its completion
 * queued, when the post returns: no wake-up of the engine thread. With
 * rdma_inline=0 the thread does it, as before.
 */
static void an_idle_engine_runs_the_turn_in_the_doorbell(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_req req;
	struct clanq_rdma_comp c;
	long long t0, t1;
	struct pair p;
	unsigned int i;

	(void)state;
	pair_open(&p, &attr);
	itest_param_set("rdma_inline", 1);
	for (i = 0; i < 3; i++) {
		assert_true(wait_doorbell_set(&p.ep));
		/* idle for a while: a post right after the last is a stream */
		usleep(5000);
		req = stream_req(&p, i, REQ_DONE);
		t0 = itest_nic_stat(0, "rdma_inline_turns");
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
		/* already there: no spinning, no waiting */
		assert_int_equal(clanq_rdma_poll(&p.ep, &c), 0);
		assert_int_equal(c.cookie, req.cookie);
		assert_int_equal(c.status, 0);
		t1 = itest_nic_stat(0, "rdma_inline_turns");
		assert_true(t0 >= 0);
		assert_int_equal(t1 - t0, 1);
	}
	/* off: the engine thread serves it, the caller does not */
	itest_param_set("rdma_inline", 0);
	assert_true(wait_doorbell_set(&p.ep));
	req = stream_req(&p, 3, REQ_DONE);
	t0 = itest_nic_stat(0, "rdma_inline_turns");
	assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
	expect_comp(&p.ep, req.cookie, 0, STREAM_LEN);
	assert_int_equal(itest_nic_stat(0, "rdma_inline_turns"), t0);
	itest_param_set("rdma_inline", 1);
	stream_check(&p, 4);
	pair_close(&p);
}

/*
 * Batch posting (ef_vi's init/push split): requests written with
 * clanq_rdma_post_init() make no system call and are invisible to the
 * engine; the queue's last free slot refuses with -EAGAIN (one slot stays
 * free); clanq_rdma_post_push() hands them all over with one doorbell,
 * and they complete in order. A push with nothing written does nothing.
 */
static void a_batch_pushed_at_once_rings_one_doorbell(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_req req;
	struct pair p;
	uint64_t q, e0, e1;
	unsigned int i;

	(void)state;
	pair_open(&p, &attr);
	q = itest_query_cost(&p.a);
	assert_int_not_equal(__atomic_load_n(p.ep.need_wakeup, __ATOMIC_ACQUIRE), 0);

	e0 = itest_entries(&p.a);
	for (i = 0; i < 63; i++) {
		req = stream_req(&p, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post_init(&p.ep, &req), 0);
	}
	req = stream_req(&p, 63, REQ_DONE);
	assert_int_equal(clanq_rdma_post_init(&p.ep, &req), -EAGAIN);
	e1 = itest_entries(&p.a);
	assert_int_equal(e1 - e0, q);		/* no system call */
	expect_no_comp(&p.ep);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), 0);

	e0 = itest_entries(&p.a);
	assert_int_equal(clanq_rdma_post_push(&p.ep), 0);
	e1 = itest_entries(&p.a);
	assert_int_equal(e1 - e0, q + 1);	/* the one doorbell */
	for (i = 0; i < 63; i++)
		expect_comp(&p.ep, 0xd00b000000000000ull | i, 0, STREAM_LEN);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_kicks), 1);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), 63);
	stream_check(&p, 63);

	e0 = itest_entries(&p.a);
	assert_int_equal(clanq_rdma_post_push(&p.ep), 0);
	e1 = itest_entries(&p.a);
	assert_int_equal(e1 - e0, q);
	pair_close(&p);
}

/*
 * A region written through its own aperture, the two ranges overlapping
 * within a page: the result is memmove()'s, in both directions (a plain
 * forward copy would smear the pattern when the target is above).
 */
static void an_overlapping_write_within_one_region_is_a_memmove(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 8, .cq_slots = 8 };
	static const struct { uint64_t src, dst, len; } cases[] = {
		{ 0, 8, 1000 },		/* target above the source */
		{ 140, 100, 2000 },	/* target below */
		{ 1, 2, PAGE - 2 },	/* one byte apart, almost the page */
	};
	unsigned char want[PAGE];
	struct clanq_rdma_req req;
	struct clanq_region r;
	struct clanq_dev d;
	struct clanq_ep ep;
	struct clanq_ap ap;
	unsigned int i;
	uint64_t key;

	(void)state;
	assert_int_equal(clanq_open_nic(&d, 0), 0);
	assert_int_equal(clanq_ep_create_attr(&d, &ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&d, &r, PAGE), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHT_WRITE, &key), 0);
	assert_int_equal(clanq_ap_import(&d, &ap, r.addr, key, 0, PAGE,
					 CLANQ_RIGHT_WRITE), 0);
	for (i = 0; i < PAGE; i++)
		((unsigned char *)r.mem)[i] = (unsigned char)(i * 13 + 1);
	memcpy(want, r.mem, PAGE);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		memmove(want + cases[i].dst, want + cases[i].src, cases[i].len);
		req = itest_rdma_req(r.addr.id, ap.id, cases[i].src, cases[i].dst,
			    cases[i].len, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&ep, &req), 0);
		expect_comp(&ep, i, 0, cases[i].len);
		assert_memory_equal(r.mem, want, PAGE);
	}
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&d), 0);
}

/*
 * RDMA completions are events: a CLANQ_EV_RDMA registration hears of a
 * completion posted later, and one made while a completion waits unread
 * hears of it at once, with the RDMA bit in the event's hint.
 */
static void rdma_completions_raise_evq_events(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_rdma_req req;
	struct clanq_event ev;
	struct clanq_evq evq;
	struct pair p;
	unsigned int i;
	int reg;

	(void)state;
	pair_open(&p, &attr);
	assert_int_equal(clanq_evq_create(&p.a, &evq, 4), 0);
	for (i = 0; i < 2; i++) {
		req = stream_req(&p, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
		if (i == 0) {
			/* the engine lets the queue go after completing */
			assert_true(wait_doorbell_set(&p.ep));
			reg = clanq_evq_register(&evq, &p.ep, CLANQ_EV_RDMA,
						 0xc0ffee);
			assert_true(reg >= 0);
		}
		memset(&ev, 0, sizeof(ev));
		assert_int_equal(clanq_evq_wait(&evq, &ev, COMP_TIMEOUT), 0);
		assert_int_equal(ev.reg, reg);
		assert_int_equal(ev.cookie, 0xc0ffee);
		assert_int_equal(ev.events, CLANQ_EV_RDMA);
		expect_comp(&p.ep, req.cookie, 0, STREAM_LEN);
	}
	/* one event per batch: nothing more is queued */
	assert_int_equal(clanq_evq_wait(&evq, &ev, 0), -ETIMEDOUT);
	assert_int_equal(clanq_evq_destroy(&evq), 0);
	stream_check(&p, 2);
	pair_close(&p);
}

/*
 * rdma_kicks counts KICK calls, i.e. system calls (uapi header). A
 * kick made while the engine is still working through the queue is
 * counted, but must not put the queue on the engine twice: every request
 * completes exactly once and nothing more arrives.
 */
#define BUSY_REQS	4
#define BUSY_LEN	(4 * MiB)

static void a_doorbell_rung_while_the_engine_is_busy_wakes_nothing_twice(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	struct clanq_region src, dst;
	struct clanq_rdma_req req;
	struct clanq_dev a, b;
	struct clanq_ep ep;
	struct clanq_ap ap;
	uint64_t key, bytes, bells;
	uint32_t bell_word;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_ep_create_attr(&a, &ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&a, &src, BUSY_LEN), 0);
	assert_int_equal(clanq_region_alloc(&b, &dst, BUSY_LEN), 0);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &key), 0);
	assert_int_equal(clanq_ap_import(&a, &ap, dst.addr, key, 0, BUSY_LEN,
					 CLANQ_RIGHT_WRITE), 0);
	pat_fill(src.mem, 0xb05e, 0, BUSY_LEN, 0);

	/* 16 MiB of work, split into 64 KiB turns: the engine stays busy */
	for (i = 0; i < BUSY_REQS; i++) {
		req = itest_rdma_req(src.addr.id, ap.id, 0, 0, BUSY_LEN, i, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&ep, &req), 0);
	}
	bell_word = __atomic_load_n(ep.need_wakeup, __ATOMIC_ACQUIRE);
	assert_int_equal(clanq_rdma_kick(&ep), 0);
	bytes = itest_ctr(&ep.counters->rdma_bytes);
	for (i = 0; i < BUSY_REQS; i++)
		expect_comp(&ep, i, 0, BUSY_LEN);
	bells = itest_ctr(&ep.counters->rdma_kicks);
	printf("busy kick: doorbell word %u, %llu of %llu bytes done after it, "
	       "rdma_kicks %llu\n", bell_word, (unsigned long long)bytes,
	       (unsigned long long)BUSY_REQS * BUSY_LEN,
	       (unsigned long long)bells);
	/* the first post's kick and ours: both were system calls */
	assert_int_equal(bells, 2);
	if (bell_word != 0 || bytes == BUSY_REQS * BUSY_LEN)
		printf("busy kick: the engine was idle around the kick\n");
	/* a second listing of the queue would show up as extra work */
	itest_sleep_ns(50 * ITEST_NS_PER_MS);
	{
		struct clanq_rdma_comp extra;

		assert_int_equal(clanq_rdma_poll(&ep, &extra), -EAGAIN);
	}
	assert_int_equal(itest_ctr(&ep.counters->rdma_reqs), BUSY_REQS);
	assert_int_equal(pat_diff(dst.mem, 0xb05e, 0, BUSY_LEN, 0), BUSY_LEN);

	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&src), 0);
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

/*
 * A full completion queue.
 */

#define CQFULL_REQS	200
#define CQFULL_FIRST	20

static void a_full_completion_queue_stalls_only_its_endpoint_and_loses_nothing(void **state)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 4 };
	struct clanq_ep_attr other_attr = { .rq_slots = 16, .cq_slots = 16 };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req, oreq;
	struct clanq_ep other;
	struct pair p;
	unsigned int posted = 0, got = 0;
	uint64_t q, e0, e1;
	uint64_t end;
	int r;

	(void)state;
	pair_open(&p, &attr);
	assert_int_equal(clanq_ep_create_attr(&p.a, &other, &other_attr), 0);
	q = itest_query_cost(&p.a);

	for (posted = 0; posted < CQFULL_FIRST; posted++) {
		req = stream_req(&p, posted, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&p.ep, &req), 0);
	}
	/* the engine takes what the CQ has room for (3), then stops */
	end = clanq_now_ns() + COMP_TIMEOUT;
	while (itest_ctr(&p.ep.counters->rdma_reqs) < attr.cq_slots - 1) {
		assert_true(clanq_now_ns() < end);
		sched_yield();
	}
	itest_sleep_ns(100 * ITEST_NS_PER_MS);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), attr.cq_slots - 1);
	/* and stops looking at the queue: the next poll must ring */
	assert_true(wait_doorbell_set(&p.ep));
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), attr.cq_slots - 1);

	/* another endpoint of the same context is served meanwhile */
	oreq = stream_req(&p, CQFULL_REQS, REQ_DONE);
	oreq.dst_off = PAIR_DST - STREAM_LEN;
	assert_int_equal(clanq_rdma_post(&other, &oreq), 0);
	expect_comp(&other, oreq.cookie, 0, STREAM_LEN);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), attr.cq_slots - 1);

	/* polling frees room and rings the doorbell: the rest flows */
	e0 = itest_entries(&p.a);
	end = clanq_now_ns() + RUN_TIMEOUT;
	while (got < CQFULL_REQS) {
		assert_true(clanq_now_ns() < end);
		while (posted < CQFULL_REQS) {
			req = stream_req(&p, posted, REQ_DONE);
			r = clanq_rdma_post(&p.ep, &req);
			if (r == -EAGAIN)
				break;
			assert_int_equal(r, 0);
			posted++;
		}
		memset(&c, 0, sizeof(c));
		if (!itest_wait_comp(&p.ep, &c, COMP_TIMEOUT))
			fail_msg("%u of %u completions; the engine took %llu",
				 got, CQFULL_REQS,
				 (unsigned long long)itest_ctr(&p.ep.counters->rdma_reqs));
		if (c.cookie != (0xd00b000000000000ull | got) || c.status ||
		    c.len != STREAM_LEN)
			fail_msg("completion %u: cookie %#llx status %d len %llu",
				 got, (unsigned long long)c.cookie, c.status,
				 (unsigned long long)c.len);
		got++;
	}
	e1 = itest_entries(&p.a);
	expect_no_comp(&p.ep);
	printf("cq full: %u completions through a 4-slot CQ, %llu system calls, "
	       "%llu kicks\n", got, (unsigned long long)(e1 - e0 - q),
	       (unsigned long long)itest_ctr(&p.ep.counters->rdma_kicks));
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_reqs), CQFULL_REQS);
	assert_int_equal(itest_ctr(&p.ep.counters->rdma_errors), 0);
	/* the other endpoint's write landed at the end, all others in place */
	assert_int_equal(pat_diff((uint8_t *)p.dst.mem + PAIR_DST - STREAM_LEN,
				  PAIR_SEED, oreq.src_off, STREAM_LEN, 0),
			 STREAM_LEN);
	bg_fill((uint8_t *)p.dst.mem + PAIR_DST - STREAM_LEN,
		PAIR_DST - STREAM_LEN, STREAM_LEN);
	stream_check(&p, CQFULL_REQS);
	assert_int_equal(clanq_ep_destroy(&other), 0);
	pair_close(&p);
}

/*
 * A key that names its region: what libfabric's fi_mr_key() hands a peer
 * (provider/cfi_mr.c) is all it gets to import with.
 */
static void a_key_that_names_its_region_is_enough_to_import(void **state)
{
	struct clanq_dev a, b;
	struct clanq_region r, plain, other;
	struct clanq_ap ap;
	struct clanq_addr named;
	uint64_t key, k2, ko;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_region_alloc(&b, &r, PAGE), 0);
	assert_int_equal(clanq_region_alloc(&b, &plain, PAGE), 0);
	assert_int_equal(clanq_region_alloc(&b, &other, PAGE), 0);

	/* garbage flags, and the reserved words, are refused */
	assert_int_equal(clanq_region_export_flags(&r, CLANQ_RIGHTS_ALL, 0x2, &key),
			 -EINVAL);
	assert_int_equal(clanq_region_export_flags(&r, CLANQ_RIGHTS_ALL, ~0u, &key),
			 -EINVAL);
	assert_int_equal(clanq_region_export_flags(&r, CLANQ_RIGHTS_ALL,
						   CLANQ_EXPORT_KEY_NAMES_REGION,
						   &key), 0);
	assert_int_equal(key >> 32, r.addr.id);
	assert_int_not_equal((uint32_t)key, 0);
	assert_int_equal(clanq_region_export_flags(&r, CLANQ_RIGHTS_ALL,
						   CLANQ_EXPORT_KEY_NAMES_REGION,
						   &k2), -EBUSY);
	assert_int_equal(clanq_region_export_flags(&other, CLANQ_RIGHT_READ,
						   CLANQ_EXPORT_KEY_NAMES_REGION,
						   &ko), 0);
	assert_int_equal(ko >> 32, other.addr.id);
	assert_int_equal(clanq_region_export(&plain, CLANQ_RIGHTS_ALL, &k2), 0);

	/* the node and the key: all an importer is told */
	named.node = r.addr.node;
	named.id = (uint32_t)(key >> 32);
	assert_int_equal(clanq_ap_import(&a, &ap, named, key, 0, PAGE,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_map(&ap), 0);
	assert_int_equal(clanq_ap_write(&ap, 100, "named", 5), 0);
	assert_memory_equal((char *)r.mem + 100, "named", 5);
	assert_int_equal(clanq_ap_close(&ap), 0);

	/* a wrong secret under the right id, or the right one under another */
	assert_int_equal(clanq_ap_import(&a, &ap, named, key ^ 1, 0, PAGE,
					 CLANQ_RIGHTS_ALL), -ENOENT);
	assert_int_equal(clanq_ap_import(&a, &ap, named, key ^ (1ull << 31), 0,
					 PAGE, CLANQ_RIGHTS_ALL), -ENOENT);
	named.id = other.addr.id;
	assert_int_equal(clanq_ap_import(&a, &ap, named, key, 0, PAGE,
					 CLANQ_RIGHT_READ), -ENOENT);
	/* the other's key opens it with its own rights only */
	assert_int_equal(clanq_ap_import(&a, &ap, named, ko, 0, PAGE,
					 CLANQ_RIGHTS_ALL), -EACCES);
	assert_int_equal(clanq_ap_import(&a, &ap, named, ko, 0, PAGE,
					 CLANQ_RIGHT_READ), 0);
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&plain), 0);

	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(clanq_region_free(&other), 0);
	clanq_close(&a);
	clanq_close(&b);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(each_bad_request_completes_with_its_status_and_stalls_nothing),
		T(a_stream_of_posts_rings_few_doorbells),
		T(an_idle_engine_is_woken_by_exactly_one_doorbell),
		T(an_idle_engine_runs_the_turn_in_the_doorbell),
		T(a_batch_pushed_at_once_rings_one_doorbell),
		T(a_doorbell_rung_while_the_engine_is_busy_wakes_nothing_twice),
		T(rdma_completions_raise_evq_events),
		T(an_overlapping_write_within_one_region_is_a_memmove),
		T(a_full_completion_queue_stalls_only_its_endpoint_and_loses_nothing),
		T(a_key_that_names_its_region_is_enough_to_import),
	};

	return cmocka_run_group_tests_name("rdma_engine", tests, NULL, NULL);
}
