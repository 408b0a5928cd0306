// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * What an RDMA receiver may rely on (uapi clanq.h, above struct
 * clanq_rdma_req), tested as a receiver uses it, across nodes:
 *
 *  - within one request, the final word (the last naturally aligned
 *    8 bytes wholly inside it) becomes visible last, with release
 *    semantics: a receiver that sees its new value with an acquire load
 *    sees every other byte of the request;
 *  - the requests of one queue become visible in queue order: a later
 *    request's final word seen, every byte of the earlier ones is there.
 *
 * Three parties run at once on the VM's two vCPUs:
 *  - the receiver, a process on node 1, owns an allocated, exported
 *    region cut into NSLOT slots, all "poison" (0xee) to begin with. It
 *    spins with acquire loads on the final word of the next request it
 *    expects (sometimes of one up to PROBE_MAX further on), and the
 *    moment it sees the request's sequence word there, compares every
 *    byte of that request and of every earlier unchecked one with what
 *    was sent. Then it poisons them again and tells the sender the slots
 *    are free (a counter in memory the two processes share);
 *  - the sender, a process on node 0, imports the region and keeps its
 *    request queue full of RDMA writes, one a slot, posting without
 *    waiting for each and recycling source slots as completions (one in
 *    SIG_EVERY requests is signaled, and ends a message) come back;
 *  - the engine of node 0, a kernel thread, does the copies.
 *
 * Request j: its slot is j % NSLOT; its size, the shifts of both ends
 * into their slots (0..7: unaligned too) and the offset of its payload in
 * a pattern buffer are functions of (seed, j). Every byte but the final
 * word is a pattern byte (top bit clear, never poison); the final word
 * holds SEQ_WORD(j), which no earlier content of the slot can equal.
 * Sizes: mostly 64 bytes, then 8..128, around 4 KiB, and past 64 KiB
 * (the engine splits those at rdma_max_xfer, 64 KiB by default, so the
 * final word may lie in a later chunk than most of the request, or
 * straddle two).
 *
 * A request whose bytes are not all there when its final word (or a
 * later request's) is seen is a violation; the receiver then waits to
 * see whether the bytes arrive late (an ordering failure) or never
 * (corruption), and prints the first few. Expected: none.
 *
 * Usage: test_rdma_order [-n WRITES] [-t SECONDS]: WRITES (default a
 * million), posting for at most SECONDS (0: no cap; what ran is checked
 * and reported either way).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "rdma_fixture.h"

static unsigned long n_writes = 1000000;
static unsigned long budget_s;

/*
 * Slots: a class each, by slot number, so that a slot's size is bounded.
 * The layout is the same in the destination and the source region.
 */
#define NSLOT		256
#define SMALL_CAP	192		/* up to 128 + 7 */
#define PAGE_CAP	4224		/* up to 4160 + 7 */
#define HUGE_CAP	(2 * 65536 + 128)	/* up to 128 KiB + 19 + 7 */

enum { K_SMALL, K_PAGE, K_HUGE };

static unsigned int slot_kind(unsigned int s)
{
	if (s % 128 == 127)
		return K_HUGE;
	if (s % 16 == 15)
		return K_PAGE;
	return K_SMALL;
}

static const uint64_t small_lens[] = {
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	8, 9, 12, 15, 16, 24, 40, 56, 72, 100, 127, 128,
};
static const uint64_t page_lens[] = {
	4096, 4095, 4097, 4104, 2053, 1000, 4160, 520,
};
static const uint64_t huge_lens[] = {
	65536 + 8, 65536 + 4, 65536 + 12, 65536 + 19, 65536, 65535,
	65537, 131072 + 8,
};

#define POISON		0xee
#define SEQ_WORD(j)	(0xc1a5000000000000ull | (uint64_t)(j))

/* the pattern buffer: request j's payload starts at its pat_off */
#define PAT_SIZE	(256 * KiB)
#define PAT_SEED	0x0bde5ull

/* How far ahead the receiver may look: less than NSLOT. */
#define PROBE_MAX	48

/* nothing seen for this long: the run is stuck */
#define STALL_NS	(60 * ITEST_NS_PER_S)
/* a byte found missing is waited for this long before "never" */
#define LATE_NS		(2 * ITEST_NS_PER_S)

#define RQ_SLOTS	64
#define REPORT_MAX	8

struct layout {
	uint64_t base[NSLOT];
	uint64_t size;		/* of either region */
};

struct wreq {
	uint64_t slot;
	uint64_t len;
	uint64_t dst_off;	/* into the region (= the aperture) */
	uint64_t src_off;
	uint64_t fw;		/* the final word's offset in the request */
	uint64_t pat_off;
	unsigned int kind;
};

/* shared between the processes (MAP_SHARED before the forks) */
struct ctl {
	uint64_t checked;	/* receiver: requests [0, checked) done */
	uint64_t total;		/* sender: how many it posted, once done; ~0 before */
	uint64_t abort;		/* either: stop */
	uint64_t posted;
	/* the receiver's findings */
	uint64_t violations;	/* requests with bytes missing when looked at */
	uint64_t v_final;	/* ... when their own final word was seen */
	uint64_t v_order;	/* ... when a later request's was */
	uint64_t v_late;	/* missing bytes that arrived later */
	uint64_t v_never;	/* ... that never did (corruption) */
	uint64_t v_kind[3];
	uint64_t waited;	/* requests whose final word was polled for */
	uint64_t probes_ahead;	/* looks at a later request first */
	uint64_t bytes;
	int64_t t_start, t_end;
	/* the receiver's region */
	struct clanq_addr addr;
	uint64_t key;
	uint64_t seed;
};

static void layout_init(struct layout *l)
{
	static const uint64_t cap[] = { SMALL_CAP, PAGE_CAP, HUGE_CAP };
	uint64_t off = 0;
	unsigned int s;

	for (s = 0; s < NSLOT; s++) {
		l->base[s] = off;
		off += cap[slot_kind(s)];
	}
	l->size = (off + PAGE - 1) / PAGE * PAGE;
}

/* The final word of [a, a + len) (a 8-aligned base + shift): its offset. */
static bool final_word(uint64_t a, uint64_t len, uint64_t *fw)
{
	uint64_t end = (a + len) & ~7ull;

	if (len < 8 || end < 8 || end - 8 < ((a + 7) & ~7ull))
		return false;
	*fw = end - 8 - a;
	return true;
}

static void wreq_of(const struct layout *l, uint64_t seed, uint64_t j,
		    struct wreq *w)
{
	uint64_t h = mix64(seed ^ (j * 0x9e3779b97f4a7c15ull));
	uint64_t h2 = mix64(h ^ 0x5851f42d4c957f2dull);
	uint64_t shift = h >> 61;	/* 0..7 */

	w->slot = j % NSLOT;
	w->kind = slot_kind(w->slot);
	switch (w->kind) {
	case K_HUGE:
		w->len = huge_lens[h % ARRAY_SIZE(huge_lens)];
		break;
	case K_PAGE:
		w->len = page_lens[h % ARRAY_SIZE(page_lens)];
		break;
	default:
		w->len = small_lens[h % ARRAY_SIZE(small_lens)];
		break;
	}
	/* an unaligned start where the request keeps a final word */
	if (!final_word(shift, w->len, &w->fw))
		shift = 0;
	if (!final_word(shift, w->len, &w->fw))
		abort();	/* len >= 8 at shift 0 always has one */
	w->dst_off = l->base[w->slot] + shift;
	w->src_off = l->base[w->slot] + ((h >> 53) & 7);
	w->pat_off = h2 % (PAT_SIZE - w->len);
}

static uint64_t ld_acq(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void st_rel(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/*
 * The receiver.
 */

struct rx_args {
	struct ctl *ctl;
	int hello_fd;		/* writes: the region's address is in ctl */
	int go_fd;		/* reads: the sender is done with it */
	int other_fds[2];	/* the parent's ends: closed */
};

/* Fail in a child, telling the other child to stop first. */
#define SIDE_FAIL(c, ...)						\
	do {								\
		st_rel(&(c)->abort, 1);					\
		CHILD_FAIL(__VA_ARGS__);				\
	} while (0)

/*
 * First index where m (request w at the destination) differs, or len;
 * *bad says how many bytes do, *got what the first one held.
 */
static uint64_t req_diff(const uint8_t *m, const uint8_t *pat, const struct wreq *w,
		      uint64_t j, uint64_t *bad, uint8_t *got)
{
	const uint8_t *d = m + w->dst_off;
	const uint8_t *p = pat + w->pat_off;
	uint64_t seqw = SEQ_WORD(j), first = w->len, k;

	*bad = 0;
	if (!memcmp(d, p, w->fw) && !memcmp(d + w->fw, &seqw, 8) &&
	    !memcmp(d + w->fw + 8, p + w->fw + 8, w->len - w->fw - 8))
		return w->len;
	for (k = 0; k < w->len; k++) {
		uint8_t want = k >= w->fw && k < w->fw + 8 ?
			((const uint8_t *)&seqw)[k - w->fw] : p[k];

		uint8_t b = __atomic_load_n(&d[k], __ATOMIC_RELAXED);

		if (b != want) {
			if (first == w->len) {
				first = k;
				*got = b;
			}
			(*bad)++;
		}
	}
	return first;
}

static void rx_violation(struct ctl *c, const uint8_t *m, const uint8_t *pat,
			 const struct wreq *w, uint64_t j, uint64_t seen,
			 uint64_t first, uint64_t bad, uint8_t got)
{
	uint64_t end = clanq_now_ns() + LATE_NS, nbad = bad, k;
	bool late = false;
	uint8_t b;

	c->violations++;
	if (j == seen)
		c->v_final++;
	else
		c->v_order++;
	c->v_kind[w->kind]++;
	/* the bytes come later (order), or never (corruption)? */
	while (clanq_now_ns() < end) {
		if (req_diff(m, pat, w, j, &k, &b) == w->len) {
			late = true;
			break;
		}
		sched_yield();
	}
	if (late)
		c->v_late++;
	else
		c->v_never++;
	if (c->violations > REPORT_MAX)
		return;
	printf("VIOLATION: request %llu (len %llu at region offset %llu, final "
	       "word at +%llu) seen %s: %llu bytes missing, first at +%llu "
	       "(%#x there, expected %#x); %s\n",
	       (unsigned long long)j, (unsigned long long)w->len,
	       (unsigned long long)w->dst_off, (unsigned long long)w->fw,
	       j == seen ? "by its own final word" : "by a later request's",
	       (unsigned long long)nbad, (unsigned long long)first, got,
	       first >= w->fw && first < w->fw + 8 ?
	       ((const uint8_t *)&(uint64_t){ SEQ_WORD(j) })[first - w->fw] :
	       pat[w->pat_off + first],
	       late ? "they arrived later" : "they never arrived");
	if (j != seen)
		printf("           (request %llu's final word was seen)\n",
		       (unsigned long long)seen);
}

static void receiver_main(void *arg)
{
	struct rx_args *a = arg;
	struct ctl *c = a->ctl;
	struct clanq_region r;
	struct clanq_dev dev;
	struct layout l;
	struct wreq w;
	uint64_t next = 0, total = ~0ull, rnd, key, bad, first, seen, j;
	uint8_t *m, *pat, got = 0;
	char go;

	close(a->other_fds[0]);
	close(a->other_fds[1]);
	layout_init(&l);
	pat = map_anon(PAT_SIZE);
	CHILD_CHECK(pat);
	pat_fill(pat, PAT_SEED, 0, PAT_SIZE, 0);
	rnd = c->seed | 1;
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &r, l.size), 0);
	m = r.mem;
	memset(m, POISON, l.size);
	CHILD_CHECK_INT(clanq_region_export(&r, CLANQ_RIGHT_WRITE, &key), 0);
	c->addr = r.addr;
	c->key = key;
	CHILD_CHECK(itest_write_full(a->hello_fd, "h", 1));

	c->t_start = clanq_now_ns();
	while (next < total) {
		uint64_t d = 0, spins = 0, t_seen = 0;
		const volatile uint64_t *word;

		/* mostly the next request; now and then one further on */
		if (itest_rand(&rnd) % 4 == 0) {
			d = itest_rand(&rnd) % (PROBE_MAX + 1);
			if (d)
				c->probes_ahead++;
		}
		for (;;) {
			if (total != ~0ull && next + d >= total) {
				if (next >= total)
					break;
				d = total - 1 - next;
			}
			wreq_of(&l, c->seed, next + d, &w);
			word = (const volatile uint64_t *)(m + w.dst_off + w.fw);
			/* the guarantee's side of it: an acquire load */
			if (__atomic_load_n(word, __ATOMIC_ACQUIRE) ==
			    SEQ_WORD(next + d))
				break;
			if (++spins % 1024)
				continue;
			if (ld_acq(&c->abort))
				SIDE_FAIL(c, "the sender gave up");
			total = ld_acq(&c->total);
			if (!t_seen)
				t_seen = clanq_now_ns();
			else if (clanq_now_ns() - t_seen > STALL_NS)
				SIDE_FAIL(c, "request %llu not seen within %lld s "
					   "(%llu posted)",
					   (unsigned long long)(next + d),
					   (long long)(STALL_NS / ITEST_NS_PER_S),
					   (unsigned long long)ld_acq(&c->posted));
		}
		if (next >= total)
			break;
		if (spins)
			c->waited++;
		seen = next + d;
		/* every byte of [next, seen] must be there now */
		for (j = next; j <= seen; j++) {
			wreq_of(&l, c->seed, j, &w);
			first = req_diff(m, pat, &w, j, &bad, &got);
			if (first < w.len)
				rx_violation(c, m, pat, &w, j, seen, first, bad,
					     got);
			c->bytes += w.len;
		}
		for (j = next; j <= seen; j++) {
			wreq_of(&l, c->seed, j, &w);
			memset(m + w.dst_off, POISON, w.len);
		}
		next = seen + 1;
		/* the slots are free: the poison before the sender's reuse */
		st_rel(&c->checked, next);
	}
	c->t_end = clanq_now_ns();
	/* keep the region until the sender has closed its aperture */
	CHILD_CHECK(itest_read_full(a->go_fd, &go, 1));
	CHILD_CHECK_INT(clanq_region_free(&r), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
	munmap(pat, PAT_SIZE);
}

/*
 * The sender.
 */

/*
 * One request in SIG_EVERY is signaled and ends a message: the engine
 * serves up to a message a turn, so chunks end wherever a turn's budget
 * runs out, not only at a request's rdma_max_xfer.
 */
#define SIG_EVERY	16

static bool signaled(uint64_t j)
{
	return j % SIG_EVERY == SIG_EVERY - 1 || j + 1 == n_writes;
}

struct tx_args {
	struct ctl *ctl;
	int done_fd;		/* writes: aperture closed */
};

static void sender_main(void *arg)
{
	struct tx_args *a = arg;
	struct ctl *c = a->ctl;
	struct clanq_ep_attr attr = { .rq_slots = RQ_SLOTS, .cq_slots = RQ_SLOTS };
	uint64_t j = 0, done = 0, checked = 0, seqw, idle_since = 0;
	uint64_t deadline = budget_s ? clanq_now_ns() + budget_s * ITEST_NS_PER_S : 0;
	struct clanq_region src;
	struct clanq_rdma_comp cp;
	struct clanq_rdma_req req;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_ap ap;
	struct layout l;
	struct wreq w;
	bool stop = false;
	uint8_t *pat, *s;
	int err;

	layout_init(&l);
	pat = map_anon(PAT_SIZE);
	CHILD_CHECK(pat);
	pat_fill(pat, PAT_SEED, 0, PAT_SIZE, 0);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &src, l.size), 0);
	s = src.mem;
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, c->addr, c->key, 0, l.size,
					CLANQ_RIGHT_WRITE), 0);

	while (!stop || done < j) {
		bool progress = false;

		/* fill the queue: as many as the slots allow */
		while (!stop) {
			/* a cap ends after a signaled request */
			if (j == n_writes ||
			    (deadline && j % 256 == 0 &&
			     clanq_now_ns() > deadline)) {
				stop = true;
				break;
			}
			/* source slot: its last request completed */
			if (j >= done + NSLOT)
				break;
			/* destination slot: its last request checked */
			if (j >= checked + NSLOT) {
				checked = ld_acq(&c->checked);
				if (j >= checked + NSLOT)
					break;
			}
			wreq_of(&l, c->seed, j, &w);
			memcpy(s + w.src_off, pat + w.pat_off, w.len);
			seqw = SEQ_WORD(j);
			memcpy(s + w.src_off + w.fw, &seqw, 8);
			req = itest_rdma_req(src.addr.id, ap.id, w.src_off,
					     w.dst_off, w.len, j,
					     signaled(j) ? REQ_DONE : 0);
			if (clanq_rdma_post_init(&ep, &req))
				break;	/* the queue is full */
			j++;
			progress = true;
		}
		err = clanq_rdma_post_push(&ep);
		if (err)
			SIDE_FAIL(c, "push: %d", err);
		st_rel(&c->posted, j);
		while (!clanq_rdma_poll(&ep, &cp)) {
			uint64_t want = done | (SIG_EVERY - 1);

			if (want >= n_writes)
				want = n_writes - 1;
			wreq_of(&l, c->seed, want, &w);
			if (cp.cookie != want || cp.status || cp.len != w.len)
				SIDE_FAIL(c, "completion: cookie %llu status %d "
					   "len %llu; expected %llu, 0, %llu",
					   (unsigned long long)cp.cookie,
					   cp.status, (unsigned long long)cp.len,
					   (unsigned long long)want,
					   (unsigned long long)w.len);
			done = want + 1;
			progress = true;
		}
		if (progress) {
			idle_since = 0;
			continue;
		}
		if (ld_acq(&c->abort))
			SIDE_FAIL(c, "the receiver gave up");
		if (!idle_since) {
			idle_since = clanq_now_ns();
		} else if (clanq_now_ns() - idle_since > STALL_NS) {
			SIDE_FAIL(c, "no progress for %lld s: %llu posted, %llu "
				   "completed, %llu checked",
				   (long long)(STALL_NS / ITEST_NS_PER_S),
				   (unsigned long long)j,
				   (unsigned long long)done,
				   (unsigned long long)ld_acq(&c->checked));
		}
		sched_yield();
	}
	st_rel(&c->total, j);
	CHILD_CHECK_INT(itest_ctr(&ep.counters->rdma_errors), 0);
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK(itest_write_full(a->done_fd, "d", 1));
	CHILD_CHECK_INT(clanq_region_free(&src), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
	munmap(pat, PAT_SIZE);
}

static void a_receiver_polling_final_words_never_sees_them_early(void **state)
{
	struct ctl *c;
	struct rx_args ra;
	struct tx_args ta;
	int hello[2], go[2], st_rx, st_tx;
	pid_t rx, tx;
	long long splits0, splits;
	int64_t wait_ns, ns;
	char ch;

	(void)state;
	c = mmap(NULL, sizeof(*c), RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(c != MAP_FAILED);
	memset(c, 0, sizeof(*c));
	c->total = ~0ull;
	c->seed = itest_seed("rdma order");
	printf("rdma order: %lu writes node 0 -> node 1, time cap %lu s, "
	       "rdma_max_xfer %lu\n", n_writes, budget_s,
	       param_or("rdma_max_xfer", 0));
	splits0 = itest_nic_stat(0, "rdma_splits");

	assert_int_equal(pipe(hello), 0);
	assert_int_equal(pipe(go), 0);
	ra = (struct rx_args){ .ctl = c, .hello_fd = hello[1], .go_fd = go[0],
			       .other_fds = { hello[0], go[1] } };
	rx = itest_fork(receiver_main, &ra);
	assert_true(rx > 0);
	close(hello[1]);
	close(go[0]);
	if (!itest_read_full(hello[0], &ch, 1)) {
		itest_status_ok(itest_wait(rx, ITEST_RECV_TIMEOUT), "receiver");
		fail_msg("the receiver did not start");
	}
	ta = (struct tx_args){ .ctl = c, .done_fd = go[1] };
	tx = itest_fork(sender_main, &ta);
	assert_true(tx > 0);
	close(go[1]);

	/* a cap: the time it has plus the stall bounds; else generous */
	wait_ns = (budget_s ? (int64_t)budget_s : 3600) * ITEST_NS_PER_S +
		  3 * STALL_NS;
	st_tx = itest_wait(tx, wait_ns);
	st_rx = itest_wait(rx, 3 * STALL_NS);
	close(hello[0]);
	ns = c->t_end - c->t_start;
	splits = itest_nic_stat(0, "rdma_splits");
	printf("rdma order: %llu writes checked (%llu bytes) in %.1f s, "
	       "%.0f writes/s; the receiver polled for %llu of them, looked "
	       "ahead first %llu times; %lld requests split by the engine\n",
	       (unsigned long long)ld_acq(&c->checked),
	       (unsigned long long)c->bytes, (double)ns / ITEST_NS_PER_S,
	       ns > 0 ? (double)ld_acq(&c->checked) * ITEST_NS_PER_S / ns : 0,
	       (unsigned long long)c->waited,
	       (unsigned long long)c->probes_ahead,
	       splits0 >= 0 && splits >= 0 ? splits - splits0 : -1ll);
	printf("rdma order: %llu violations (%llu seen by their own final word, "
	       "%llu by a later request's; %llu late, %llu never; small %llu, "
	       "page %llu, huge %llu)\n",
	       (unsigned long long)c->violations,
	       (unsigned long long)c->v_final, (unsigned long long)c->v_order,
	       (unsigned long long)c->v_late, (unsigned long long)c->v_never,
	       (unsigned long long)c->v_kind[K_SMALL],
	       (unsigned long long)c->v_kind[K_PAGE],
	       (unsigned long long)c->v_kind[K_HUGE]);
	assert_true(itest_status_ok(st_tx, "sender"));
	assert_true(itest_status_ok(st_rx, "receiver"));
	assert_int_equal(ld_acq(&c->checked), ld_acq(&c->total));
	assert_true(c->total > 0);
	if (!budget_s)
		assert_int_equal(c->total, n_writes);
	assert_int_equal(c->violations, 0);
	munmap(c, sizeof(*c));
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		T(a_receiver_polling_final_words_never_sees_them_early),
	};
	int opt;

	while ((opt = getopt(argc, argv, "n:t:")) != -1) {
		switch (opt) {
		case 'n':
			n_writes = strtoul(optarg, NULL, 0);
			break;
		case 't':
			budget_s = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [-n WRITES] [-t SECONDS]\n",
				argv[0]);
			return 2;
		}
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
