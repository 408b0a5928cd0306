// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * RDMA READ, compare-and-swap and fetch-and-add through the real driver
 * and library (clanq_rdma_read/cas/fadd), within a node and across
 * nodes (the loop wire):
 *
 *  - READs of every size from 0 B to 4 MiB at odd offsets on both sides
 *    bring every byte, and touch nothing beside their range;
 *  - a READ racing the exporter's REGION_FREE completes whole or
 *    -ENXIO, and what it brought is the exporter's bytes and nothing
 *    else: never a byte of freed memory;
 *  - rights: a READ needs CLANQ_RIGHT_READ, an atomic both rights and
 *    an import with CLANQ_AP_ATOMIC;
 *    garbage in every new field is refused with its errno;
 *  - FADD from 8 endpoints in 8 processes on both nodes, N times each
 *    (-n, default 100,000), beside a ninth process adding through a PIO
 *    mapping with the CPU's own atomics: the counter ends exact, and no
 *    two FADDs saw the same old value;
 *  - a spinlock made of CAS guards a record that 4 processes on two
 *    nodes read (READ), change and write back (WRITE): no update lost,
 *    no torn record seen.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "rdma_fixture.h"

static unsigned long fadd_n = 100000;

/* Post with the library call @post, spinning while the queue is full. */
#define POST(post)							\
	({								\
		int e_;							\
		while ((e_ = (post)) == -EAGAIN)			\
			clanq_cpu_relax();				\
		e_;							\
	})

/* An import that may do atomics: both rights and CLANQ_AP_ATOMIC. */
static int import_atomic(struct clanq_dev *dev, struct clanq_ap *ap,
			 struct clanq_addr region, uint64_t key, uint64_t off,
			 uint64_t len)
{
	struct clanq_ap_attr attr = { .flags = CLANQ_AP_ATOMIC };

	return clanq_ap_import_attr(dev, ap, region, key, off, len,
				    CLANQ_RIGHTS_ALL, &attr);
}

/* The next completion; it must be @cookie. Usable in children. */
static struct clanq_rdma_comp comp_of(struct clanq_ep *ep, uint64_t cookie)
{
	struct clanq_rdma_comp c;

	memset(&c, 0, sizeof(c));
	if (!itest_wait_comp(ep, &c, COMP_TIMEOUT))
		CHILD_FAIL("no completion for cookie %#llx",
			   (unsigned long long)cookie);
	if (c.cookie != cookie)
		CHILD_FAIL("completion cookie %#llx, expected %#llx",
			   (unsigned long long)c.cookie,
			   (unsigned long long)cookie);
	return c;
}

/*
 * READs of every size.
 */

#define R_SIZE		(4 * MiB + 16 * KiB)
#define R_AP_OFF	(PAGE + 3)
#define R_AP_LEN	(4 * MiB + 8 * KiB + 1)
#define R_SEED		0x4eadull

static void reads_of_every_size(unsigned int exporter_node)
{
	static const uint64_t lens[] = {
		0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 511, 4095, 4096,
		4097, 65535, 65536, 65537, 65536 * 3 + 17, MiB + 13,
		4 * MiB - 1, 4 * MiB,
	};
	struct clanq_dev a, b;
	struct clanq_ep ep;
	struct clanq_region src, dst;
	struct clanq_ap ap;
	struct clanq_rdma_comp c;
	uint8_t *bg = map_anon(R_SIZE);
	const char *why;
	unsigned int i;
	uint64_t key, at;

	assert_non_null(bg);
	bg_fill(bg, 0, R_SIZE);
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, exporter_node), 0);
	assert_int_equal(clanq_ep_create(&a, &ep, 8), 0);
	assert_int_equal(clanq_region_alloc(&b, &src, R_SIZE), 0);
	pat_fill(src.mem, R_SEED, 0, R_SIZE, 0);
	assert_int_equal(clanq_region_export(&src, CLANQ_RIGHT_READ, &key), 0);
	assert_int_equal(clanq_ap_import(&a, &ap, src.addr, key, R_AP_OFF,
					 R_AP_LEN, CLANQ_RIGHT_READ), 0);
	assert_int_equal(clanq_region_alloc(&a, &dst, R_SIZE), 0);
	memcpy(dst.mem, bg, R_SIZE);

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint64_t len = lens[i];
		uint64_t aoff = (2 * i + 1) % (R_AP_LEN - len + 1);
		uint64_t doff = (5 * i + 3) % (R_SIZE - len + 1);

		assert_int_equal(POST(clanq_rdma_read(&ep, &ap, aoff, &dst, doff,
						      len, i, REQ_DONE)), 0);
		memset(&c, 0, sizeof(c));
		assert_true(itest_wait_comp(&ep, &c, COMP_TIMEOUT));
		assert_int_equal(c.cookie, i);
		assert_int_equal(c.status, 0);
		assert_int_equal(c.len, len);
		assert_int_equal(c.value, 0);
		why = region_diff(dst.mem, bg, R_SIZE, doff, len, R_SEED,
				  R_AP_OFF + aoff, &at);
		if (why)
			fail_msg("READ of %llu bytes from %llu to %llu: %s at %llu",
				 (unsigned long long)len,
				 (unsigned long long)aoff,
				 (unsigned long long)doff, why,
				 (unsigned long long)at);
		memcpy((uint8_t *)dst.mem + doff, bg + doff, len);
	}
	/* the exporter's region was only read */
	assert_int_equal(pat_diff(src.mem, R_SEED, 0, R_SIZE, 0), R_SIZE);
	assert_int_equal(ep.counters->rdma_errors, 0);
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&src), 0);
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
	munmap(bg, R_SIZE);
}

static void reads_within_a_node_bring_every_byte(void **state)
{
	(void)state;
	reads_of_every_size(0);
}

static void reads_across_nodes_bring_every_byte(void **state)
{
	(void)state;
	reads_of_every_size(1);
}

/*
 * READ racing a revocation.
 */

#define RV_SIZE		(1 * MiB)
#define RV_ROUNDS	24
#define RV_SEED		0x5eedull

/*
 * Each round the exporter (node 1, same process: another context) fills
 * a fresh region, the poster queues four 1 MiB READs of it (16 engine
 * turns each, the engine thread beside us), and after a delay that
 * grows round by round the exporter frees it. Every completion must be
 * whole (status 0, every byte) or -ENXIO with len bytes of the pattern
 * and background after them; after the first -ENXIO, no READ succeeds.
 */
static void a_read_racing_revocation_brings_no_freed_byte(void **state)
{
	struct clanq_dev a, b;
	struct clanq_ep_attr attr = { .oob_slots = 8, .rq_slots = 8,
				      .cq_slots = 8 };
	struct clanq_ep ep;
	struct clanq_region src, dst;
	struct clanq_ap ap;
	uint8_t *bg = map_anon(4 * RV_SIZE);
	unsigned int round, k, whole = 0, cut = 0, none = 0;
	uint64_t key;

	(void)state;
	assert_non_null(bg);
	bg_fill(bg, 0, 4 * RV_SIZE);
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_ep_create_attr(&a, &ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&a, &dst, 4 * RV_SIZE), 0);
	for (round = 0; round < RV_ROUNDS; round++) {
		bool revoked = false;

		memcpy(dst.mem, bg, 4 * RV_SIZE);
		assert_int_equal(clanq_region_alloc(&b, &src, RV_SIZE), 0);
		pat_fill(src.mem, RV_SEED + round, 0, RV_SIZE, 0);
		assert_int_equal(clanq_region_export(&src, CLANQ_RIGHT_READ,
						     &key), 0);
		assert_int_equal(clanq_ap_import(&a, &ap, src.addr, key, 0,
						 RV_SIZE, CLANQ_RIGHT_READ), 0);
		for (k = 0; k < 4; k++)
			assert_int_equal(POST(clanq_rdma_read(&ep, &ap, 0, &dst,
							      k * RV_SIZE, RV_SIZE,
							      k, REQ_DONE)), 0);
		itest_sleep_ns((int64_t)round * round * 20000);
		assert_int_equal(clanq_region_free(&src), 0);
		for (k = 0; k < 4; k++) {
			struct clanq_rdma_comp c = comp_of(&ep, k);
			const uint8_t *m = (const uint8_t *)dst.mem + k * RV_SIZE;
			size_t d;

			if (c.status == 0) {
				assert_false(revoked);
				assert_int_equal(c.len, RV_SIZE);
				whole++;
			} else {
				assert_int_equal(c.status, -ENXIO);
				assert_true(c.len < RV_SIZE);
				revoked = true;
				c.len ? cut++ : none++;
			}
			d = pat_diff(m, RV_SEED + round, 0, c.len, 0);
			if (d < c.len)
				fail_msg("round %u READ %u: byte %zu of %llu read is not the exporter's",
					 round, k, d, (unsigned long long)c.len);
			d = mem_diff(m + c.len, bg + k * RV_SIZE + c.len,
				     RV_SIZE - c.len);
			if (d < RV_SIZE - c.len)
				fail_msg("round %u READ %u: byte %llu changed after the %llu read (status %d)",
					 round, k, (unsigned long long)(c.len + d),
					 (unsigned long long)c.len, c.status);
		}
		assert_int_equal(clanq_ap_close(&ap), 0);
	}
	print_message("READs racing a free: %u whole, %u cut short, %u refused\n",
		      whole, cut, none);
	/* the race was run: some READ was refused */
	assert_true(cut + none > 0);
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
	munmap(bg, 4 * RV_SIZE);
}

/*
 * Rights and garbage.
 */

static void rights_and_garbage_are_refused(void **state)
{
	struct clanq_dev a, b;
	struct clanq_ep ep;
	struct clanq_region src, dst;
	struct clanq_ap ro, wo, rw, odd, noat;
	struct clanq_rdma_req req;
	struct clanq_rdma_comp c;
	uint64_t key, word;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_ep_create(&a, &ep, 8), 0);
	assert_int_equal(clanq_region_alloc(&b, &src, 2 * PAGE), 0);
	pat_fill(src.mem, 1, 0, 2 * PAGE, 0);
	assert_int_equal(clanq_region_export(&src, CLANQ_RIGHTS_ALL, &key), 0);
	assert_int_equal(clanq_ap_import(&a, &ro, src.addr, key, 0, PAGE,
					 CLANQ_RIGHT_READ), 0);
	assert_int_equal(clanq_ap_import(&a, &wo, src.addr, key, 0, PAGE,
					 CLANQ_RIGHT_WRITE), 0);
	assert_int_equal(import_atomic(&a, &rw, src.addr, key, PAGE, PAGE), 0);
	assert_int_equal(import_atomic(&a, &odd, src.addr, key, 4, PAGE), 0);
	assert_int_equal(clanq_ap_import(&a, &noat, src.addr, key, PAGE, PAGE,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_region_alloc(&a, &dst, PAGE), 0);
	memset(dst.mem, 0xee, PAGE);

	/* what the library refuses at once */
	assert_int_equal(clanq_rdma_read(&ep, &ro, 0, &dst, 0, 8, 0, 1u << 3),
			 -EINVAL);
	assert_int_equal(clanq_rdma_cas(&ep, &rw, 4, 0, 1, 0, REQ_DONE), -EINVAL);
	assert_int_equal(clanq_rdma_fadd(&ep, &rw, 1, 1, 0, REQ_DONE), -EINVAL);
	assert_int_equal(clanq_rdma_fadd(&ep, &rw, 0, 1, 0, ~0u), -EINVAL);

	/* rights, through the engine */
	assert_int_equal(POST(clanq_rdma_read(&ep, &wo, 0, &dst, 0, 64, 1,
					      REQ_DONE)), 0);
	c = comp_of(&ep, 1);
	assert_int_equal(c.status, -EACCES);
	assert_int_equal(POST(clanq_rdma_cas(&ep, &ro, 0, 0, 1, 2, REQ_DONE)), 0);
	assert_int_equal(comp_of(&ep, 2).status, -EACCES);
	assert_int_equal(POST(clanq_rdma_fadd(&ep, &wo, 0, 1, 3, REQ_DONE)), 0);
	assert_int_equal(comp_of(&ep, 3).status, -EACCES);
	/* both rights, but not imported for atomics */
	assert_int_equal(POST(clanq_rdma_cas(&ep, &noat, 0, 0, 1, 33, REQ_DONE)), 0);
	assert_int_equal(comp_of(&ep, 33).status, -EACCES);
	/* an aperture 4 bytes into the region: its words are misaligned */
	assert_int_equal(POST(clanq_rdma_fadd(&ep, &odd, 0, 1, 4, REQ_DONE)), 0);
	assert_int_equal(comp_of(&ep, 4).status, -EINVAL);
	assert_int_equal(POST(clanq_rdma_fadd(&ep, &rw, PAGE, 1, 5, REQ_DONE)), 0);
	assert_int_equal(comp_of(&ep, 5).status, -ERANGE);
	assert_int_equal(POST(clanq_rdma_read(&ep, &ro, 1, &dst, 0, PAGE, 6,
					      REQ_DONE)), 0);
	assert_int_equal(comp_of(&ep, 6).status, -ERANGE);
	assert_int_equal(POST(clanq_rdma_read(&ep, &ro, 0, &dst, 1, PAGE, 7,
					      REQ_DONE)), 0);
	assert_int_equal(comp_of(&ep, 7).status, -ERANGE);

	/* raw requests: every new field, garbage */
	for (i = 0; i < 9; i++) {
		req = itest_rdma_req(0, rw.id, 0, 8, 8, 100 + i, REQ_DONE);
		req.op = CLANQ_RDMA_OP_FADD;
		req.operand[0] = 1;
		switch (i) {
		case 0: req.op = CLANQ_RDMA_NR_OPS; break;
		case 1: req.op = ~0u; break;
		case 2: req.operand[1] = 1; break;		/* FADD takes one */
		case 3: req.len = 16; break;
		case 4: req.len = 0; break;
		case 5: req.src_region = dst.addr.id; break;
		case 6: req.src_off = 8; break;
		case 7: req.dst_off = 12; break;
		case 8: req.op = CLANQ_RDMA_OP_READ;		/* takes none */
			req.src_region = dst.addr.id; break;
		}
		assert_int_equal(POST(clanq_rdma_post(&ep, &req)), 0);
		c = comp_of(&ep, 100 + i);
		if (c.status != -EINVAL)
			fail_msg("garbage case %u: status %d, not -EINVAL", i,
				 c.status);
		assert_int_equal(c.len, 0);
		assert_int_equal(c.value, 0);
	}
	/* nothing of it reached either region */
	assert_int_equal(pat_diff(src.mem, 1, 0, 2 * PAGE, 0), 2 * PAGE);
	for (i = 0; i < PAGE; i++)
		assert_int_equal(((uint8_t *)dst.mem)[i], 0xee);

	/* and a good one, for contrast: the old value comes back */
	memcpy(&word, (uint8_t *)src.mem + PAGE + 8, 8);
	assert_int_equal(POST(clanq_rdma_fadd(&ep, &rw, 8, 5, 9, REQ_DONE)), 0);
	c = comp_of(&ep, 9);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.value, word);
	assert_int_equal(c.len, 8);
	assert_int_equal(*(uint64_t *)((uint8_t *)src.mem + PAGE + 8), word + 5);

	assert_int_equal(clanq_ap_close(&noat), 0);
	assert_int_equal(clanq_ap_close(&odd), 0);
	assert_int_equal(clanq_ap_close(&rw), 0);
	assert_int_equal(clanq_ap_close(&wo), 0);
	assert_int_equal(clanq_ap_close(&ro), 0);
	assert_int_equal(clanq_region_free(&src), 0);
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

/*
 * FADD from many endpoints.
 */

#define F_PROCS		8
#define F_DEPTH		16	/* requests in flight per endpoint */

struct fadd_arg {
	struct clanq_addr region;
	uint64_t key;
	unsigned int node;
	unsigned long n;
	bool pio;		/* add through a PIO mapping instead */
	uint64_t *seen;		/* shared: bit v set by whoever saw old value v */
	uint64_t nbits;
};

static void seen_mark(const struct fadd_arg *f, uint64_t v, bool pio)
{
	uint64_t bit;

	/* PIO adds count in the high half of the word: bits apart */
	if (pio)
		return;
	bit = v & 0xffffffffull;
	if (bit >= f->nbits)
		CHILD_FAIL("old value %#llx past every add",
			   (unsigned long long)v);
	if (__atomic_fetch_or(&f->seen[bit / 64], 1ull << (bit % 64),
			      __ATOMIC_RELAXED) & (1ull << (bit % 64)))
		CHILD_FAIL("two FADDs saw old value %llu",
			   (unsigned long long)bit);
}

static void fadd_child(void *arg)
{
	const struct fadd_arg *f = arg;
	struct clanq_ep_attr attr = { .oob_slots = 8, .rq_slots = 2 * F_DEPTH,
				      .cq_slots = 2 * F_DEPTH };
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_ap ap;
	unsigned long posted = 0, done = 0;
	struct clanq_rdma_comp c;

	CHILD_CHECK_INT(clanq_open_nic(&dev, f->node), 0);
	CHILD_CHECK_INT(import_atomic(&dev, &ap, f->region, f->key, 0, PAGE), 0);
	if (f->pio) {
		volatile uint64_t *w;

		CHILD_CHECK_INT(clanq_ap_map(&ap), 0);
		w = (volatile uint64_t *)ap.base;
		for (; done < f->n; done++)
			seen_mark(f, __atomic_fetch_add(w, 1ull << 32,
							__ATOMIC_SEQ_CST), true);
		return;
	}
	CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep, &attr), 0);
	while (done < f->n) {
		while (posted < f->n && posted - done < F_DEPTH) {
			int e = clanq_rdma_fadd(&ep, &ap, 0, 1, posted,
						REQ_DONE);

			if (e == -EAGAIN)
				break;
			CHILD_CHECK_INT(e, 0);
			posted++;
		}
		if (!itest_wait_comp(&ep, &c, COMP_TIMEOUT))
			CHILD_FAIL("no completion after %lu of %lu", done, f->n);
		CHILD_CHECK_INT(c.status, 0);
		CHILD_CHECK_INT(c.cookie, done);
		CHILD_CHECK_INT(c.len, 8);
		seen_mark(f, c.value, false);
		done++;
	}
}

static void fadd_from_eight_endpoints_ends_exact(void **state)
{
	struct clanq_dev b;
	struct clanq_region r;
	struct fadd_arg args[F_PROCS + 1];
	pid_t pids[F_PROCS + 1];
	uint64_t key, nbits = (uint64_t)F_PROCS * fadd_n, want;
	size_t seen_size = (nbits / 64 + 1) * 8;
	uint64_t *seen = mmap(NULL, seen_size, RW, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	int64_t t0, ns;
	bool ok = true;
	unsigned int i;

	(void)state;
	assert_true(seen != MAP_FAILED);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_region_alloc(&b, &r, PAGE), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHTS_ALL, &key), 0);
	t0 = (int64_t)clanq_now_ns();
	for (i = 0; i <= F_PROCS; i++) {
		args[i] = (struct fadd_arg){
			.region = r.addr, .key = key, .node = i % 2, .n = fadd_n,
			.pio = i == F_PROCS, .seen = seen, .nbits = nbits,
		};
		if (args[i].pio)
			args[i].node = 1;	/* the exporter's node: mappable */
		pids[i] = itest_fork(fadd_child, &args[i]);
		assert_true(pids[i] > 0);
	}
	for (i = 0; i <= F_PROCS; i++)
		ok &= itest_status_ok(itest_wait(pids[i], 30 * 60 * ITEST_NS_PER_S),
				      i == F_PROCS ? "PIO adder" : "FADD child");
	ns = (int64_t)clanq_now_ns() - t0;
	assert_true(ok);
	want = nbits | ((uint64_t)fadd_n << 32);
	print_message("%d endpoints x %lu FADDs and %lu PIO adds in %.1f s (%.0f FADD/s): counter %#llx, want %#llx\n",
		      F_PROCS, fadd_n, fadd_n, (double)ns / ITEST_NS_PER_S,
		      (double)nbits * ITEST_NS_PER_S / (double)ns,
		      (unsigned long long)*(uint64_t *)r.mem,
		      (unsigned long long)want);
	assert_int_equal(*(uint64_t *)r.mem, want);
	for (i = 0; i < nbits; i++)
		if (!(seen[i / 64] & (1ull << (i % 64))))
			fail_msg("no FADD saw old value %u", i);
	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(clanq_close(&b), 0);
	munmap(seen, seen_size);
}

/*
 * A CAS spinlock.
 */

#define L_PROCS		4
#define L_ITERS		150
#define L_WORDS		8	/* the record: all equal, or torn */
#define L_LOCK		0
#define L_REC		64

struct lock_arg {
	struct clanq_addr region;
	uint64_t key;
	unsigned int node, id;
};

static void lock_child(void *arg)
{
	const struct lock_arg *l = arg;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_ap ap;
	struct clanq_region buf;
	uint64_t *rec, cookie = 0, spins = 0;
	unsigned int it, w;

	CHILD_CHECK_INT(clanq_open_nic(&dev, l->node), 0);
	CHILD_CHECK_INT(clanq_ep_create(&dev, &ep, 8), 0);
	CHILD_CHECK_INT(import_atomic(&dev, &ap, l->region, l->key, 0, PAGE), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &buf, PAGE), 0);
	rec = buf.mem;
	for (it = 0; it < L_ITERS; it++) {
		struct clanq_rdma_comp c;

		/* acquire: CAS 0 -> id until it was 0 */
		for (;;) {
			CHILD_CHECK_INT(POST(clanq_rdma_cas(&ep, &ap, L_LOCK, 0,
							    l->id, ++cookie,
							    REQ_DONE)), 0);
			c = comp_of(&ep, cookie);
			CHILD_CHECK_INT(c.status, 0);
			if (!c.value)
				break;
			CHILD_CHECK(c.value >= 1 && c.value <= L_PROCS &&
				    c.value != l->id);
			spins++;
			sched_yield();
		}
		/* read the record (FENCE: after the CAS), check, change */
		CHILD_CHECK_INT(POST(clanq_rdma_read(&ep, &ap, L_REC, &buf, 0,
						     L_WORDS * 8, ++cookie,
						     REQ_DONE | CLANQ_RDMA_FENCE)), 0);
		c = comp_of(&ep, cookie);
		CHILD_CHECK_INT(c.status, 0);
		for (w = 1; w < L_WORDS; w++)
			if (rec[w] != rec[0])
				CHILD_FAIL("torn record: word %u is %llu, word 0 %llu",
					   w, (unsigned long long)rec[w],
					   (unsigned long long)rec[0]);
		for (w = 0; w < L_WORDS; w++)
			rec[w]++;
		/* write it back, then release: ordered in one queue */
		CHILD_CHECK_INT(POST(clanq_rdma_post(&ep, &(struct clanq_rdma_req){
			.src_region = buf.addr.id, .dst_ap = ap.id,
			.dst_off = L_REC, .len = L_WORDS * 8,
			.cookie = ++cookie, .flags = CLANQ_RDMA_LAST })), 0);
		CHILD_CHECK_INT(POST(clanq_rdma_cas(&ep, &ap, L_LOCK, l->id, 0,
						    ++cookie, REQ_DONE)), 0);
		c = comp_of(&ep, cookie);
		CHILD_CHECK_INT(c.status, 0);
		CHILD_CHECK_INT(c.value, l->id);
	}
	(void)spins;
}

static void a_cas_spinlock_loses_no_update(void **state)
{
	struct clanq_dev b;
	struct clanq_region r;
	struct lock_arg args[L_PROCS];
	pid_t pids[L_PROCS];
	uint64_t key, *rec;
	bool ok = true;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&b, 0), 0);
	assert_int_equal(clanq_region_alloc(&b, &r, PAGE), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHTS_ALL, &key), 0);
	for (i = 0; i < L_PROCS; i++) {
		args[i] = (struct lock_arg){ .region = r.addr, .key = key,
					     .node = i % 2, .id = i + 1 };
		pids[i] = itest_fork(lock_child, &args[i]);
		assert_true(pids[i] > 0);
	}
	for (i = 0; i < L_PROCS; i++)
		ok &= itest_status_ok(itest_wait(pids[i], RUN_TIMEOUT * 5),
				      "lock child");
	assert_true(ok);
	rec = (uint64_t *)((uint8_t *)r.mem + L_REC);
	for (i = 0; i < L_WORDS; i++)
		assert_int_equal(rec[i], L_PROCS * L_ITERS);
	assert_int_equal(*(uint64_t *)r.mem, 0);
	assert_int_equal(clanq_region_free(&r), 0);
	assert_int_equal(clanq_close(&b), 0);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		T(reads_within_a_node_bring_every_byte),
		T(reads_across_nodes_bring_every_byte),
		T(a_read_racing_revocation_brings_no_freed_byte),
		T(rights_and_garbage_are_refused),
		T(fadd_from_eight_endpoints_ends_exact),
		T(a_cas_spinlock_loses_no_update),
	};
	int opt;

	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt != 'n' || !(fadd_n = strtoul(optarg, NULL, 0))) {
			fprintf(stderr, "usage: %s [-n FADDs per endpoint]\n",
				argv[0]);
			return 2;
		}
	}
	return cmocka_run_group_tests_name("rdma_ops", tests, NULL, NULL);
}
