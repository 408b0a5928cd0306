// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Revocation, through the real driver: PIO writers (and a process that
 * inherited their mapping by fork) die of SIGBUS when the exporter frees
 * the region; RDMA requests in flight and queued complete with -ENXIO, in
 * order, and the engine goes on serving an unrelated endpoint; an owner's
 * mapping of a freed region stays valid until unmapped.
 *
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2; kmemleak
 * and the kernel log are checked by the harness afterwards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "region_fixture.h"

/*
 * 2. Revocation under PIO.
 *
 * Writer A imports the parent's region on node 1, maps it and stores in
 * a loop; it forks writer B, which inherits the mapping (no import of
 * its own) and stores too. The parent is a child subreaper, so B is
 * reparented to it when A dies and can be reaped here. When the parent
 * frees the region both must die of SIGBUS: revocation reaches every
 * process that maps the aperture, not only the one that mapped it.
 */

#define PIO_BYTES	(16 * 4096u)
#define PIO_WORDS	512u		/* per writer */

struct pio_sh {
	uint64_t region;		/* packed address */
	uint64_t key;
	uint32_t stores[2];		/* A, B: store loops done */
	uint32_t pid_b;
	uint32_t mapped;
};

static void pio_store_loop(struct pio_sh *sh, volatile uint64_t *w, int who)
{
	uint64_t end = clanq_now_ns() + 60 * ITEST_NS_PER_S;
	uint64_t seq = 0;
	uint32_t i;

	for (;;) {
		for (i = 0; i < PIO_WORDS; i++)
			w[i] = ++seq;
		__atomic_store_n(&sh->stores[who],
				 __atomic_load_n(&sh->stores[who],
						 __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELEASE);
		if (clanq_now_ns() > end)
			CHILD_FAIL("writer %c: stores still land 60 s on",
				   'A' + who);
	}
}

static void pio_writer(void *arg)
{
	struct pio_sh *sh = arg;
	struct clanq_dev dev;
	struct clanq_ap ap;
	uint64_t data[4] = { 1, 2, 3, 4 };
	pid_t b;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, itest_addr_unpack(sh->region),
					sh->key, 0, PIO_BYTES, CLANQ_RIGHTS_ALL),
			0);
	CHILD_CHECK_INT(clanq_ap_map(&ap), 0);
	CHILD_CHECK_INT(clanq_ap_write(&ap, PIO_BYTES - sizeof(data), data,
				       sizeof(data)), 0);
	store32(&sh->mapped, 1);
	fflush(NULL);
	b = fork();
	CHILD_CHECK(b >= 0);
	if (b == 0) {
		/*
		 * The library wipes what B inherited (clanq(7) FORK): B maps
		 * the same aperture of the same context itself, raw, so
		 * that one revocation zaps both processes.
		 */
		char *map = mmap(NULL, ap.map_size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, ap.fd, (off_t)ap.mmap_offset);

		CHILD_CHECK(map != MAP_FAILED);
		__atomic_store_n(&sh->pid_b, (uint32_t)getpid(), __ATOMIC_RELEASE);
		pio_store_loop(sh, (volatile uint64_t *)(map + ap.map_delta) +
			       PIO_WORDS, 1);
	}
	pio_store_loop(sh, (volatile uint64_t *)ap.base, 0);
}

static void pio_writers_die_of_sigbus_when_the_exporter_frees_the_region(void **state)
{
	struct clanq_region r, r2;
	struct clanq_dev dev, dev1;
	struct clanq_ap ap;
	struct pio_sh *sh;
	volatile uint64_t *w;
	uint64_t key, key2, before[2];
	int64_t t_free, t_a, t_b;
	pid_t a, b;
	int status, i;

	(void)state;
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	sh = shared_alloc(sizeof(*sh));
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_region_alloc(&dev, &r, PIO_BYTES), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHTS_ALL, &key), 0);
	sh->region = itest_addr_pack(r.addr);
	sh->key = key;

	a = itest_fork(pio_writer, sh);
	assert_true(a > 0);
	wait_for(&sh->stores[1], 100, a, "writer A");
	b = (pid_t)__atomic_load_n(&sh->pid_b, __ATOMIC_ACQUIRE);
	assert_true(b > 0);
	adopt(b);
	wait_for(&sh->stores[0], 100, a, "writer A");

	/* distributed shared memory: their stores are in the owner's pages */
	w = r.mem;
	assert_int_equal(w[PIO_BYTES / 8 - 1], 4);
	for (i = 0; i < 2; i++)
		before[i] = w[i * PIO_WORDS];
	itest_sleep_ns(5 * ITEST_NS_PER_MS);
	for (i = 0; i < 2; i++)
		assert_true(w[i * PIO_WORDS] > before[i]);

	t_free = clanq_now_ns();
	assert_int_equal(clanq_region_free(&r), 0);
	status = itest_wait(a, 10 * ITEST_NS_PER_S);
	t_a = clanq_now_ns();
	assert_true(died_of(status, SIGBUS, "writer A"));
	/* A is gone: B, orphaned, is ours now */
	status = itest_wait(b, 10 * ITEST_NS_PER_S);
	t_b = clanq_now_ns();
	assert_true(died_of(status, SIGBUS, "writer B (forked)"));
	printf("region: PIO writers died of SIGBUS %.1f ms and %.1f ms after the free (%u and %u store loops)\n",
	       (double)(t_a - t_free) / ITEST_NS_PER_MS,
	       (double)(t_b - t_free) / ITEST_NS_PER_MS,
	       sh->stores[0], sh->stores[1]);

	/* the old (node, id, key) names nothing now */
	assert_int_equal(clanq_open_nic(&dev1, 1), 0);
	assert_int_equal(clanq_ap_import(&dev1, &ap, r.addr, key, 0, PIO_BYTES,
					 CLANQ_RIGHT_WRITE), -ENOENT);
	assert_int_equal(clanq_ap_import(&dev, &ap, r.addr, key, 0, 1,
					 CLANQ_RIGHT_READ), -ENOENT);

	/* the exporter is unaffected: it exports, imports and stores again */
	assert_int_equal(clanq_region_alloc(&dev, &r2, PIO_BYTES), 0);
	assert_int_equal(clanq_region_export(&r2, CLANQ_RIGHTS_ALL, &key2), 0);
	assert_int_equal(clanq_ap_import(&dev1, &ap, r2.addr, key2, 0, PIO_BYTES,
					 CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_map(&ap), 0);
	assert_int_equal(clanq_ap_write(&ap, 8, &key2, sizeof(key2)), 0);
	assert_memory_equal((char *)r2.mem + 8, &key2, sizeof(key2));
	assert_int_equal(clanq_ap_close(&ap), 0);
	assert_int_equal(clanq_region_free(&r2), 0);
	assert_int_equal(clanq_close(&dev1), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(sh, sizeof(*sh));
}

/*
 * 3. Revocation under RDMA.
 *
 * The streamer (node 1) keeps its request queue full of 256 KiB writes
 * into the parent's 1 MiB region (node 0), every one signalled, all
 * from one pattern. Once they flow, and the pattern is seen in the
 * region, the parent frees the region with requests queued and one
 * being copied (256 KiB is split in rdma_max_xfer pieces), then says
 * so. The streamer checks every completion, in order: success, then
 * -ENXIO from some point on and never success again; every request
 * posted after the free returned fails with -ENXIO having written
 * nothing. Meanwhile the good process shares node 1's engine with it.
 */

#define STREAM_BYTES	(1024u * 1024)
#define STREAM_LEN	(256u * 1024)
#define STREAM_RQ	64
#define STREAM_MAX	65536		/* a backstop: the deadline is the bound */
#define STREAM_AFTER	32		/* requests posted after the free */

struct stream_sh {
	uint64_t region;
	uint64_t key;
	uint64_t seed;
	uint32_t freed;			/* parent: REGION_FREE returned */
	uint32_t posted, completed;
	uint32_t ok, enxio_before, enxio_after, partial;
};

static void streamer(void *arg)
{
	static bool after[STREAM_MAX];
	struct stream_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = STREAM_RQ,
				      .cq_slots = 2 * STREAM_RQ };
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_region src;
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_ap ap;
	uint32_t posted = 0, done = 0, n_after = 0;
	bool failing = false;
	uint64_t end = clanq_now_ns() + CHILD_MAX_NS;
	int r;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &src, STREAM_LEN), 0);
	fill_pattern(src.mem, STREAM_LEN, sh->seed);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, itest_addr_unpack(sh->region),
					sh->key, 0, STREAM_BYTES,
					CLANQ_RIGHT_WRITE), 0);
	for (;;) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("streamer: %u posted, %u completed after %lld s",
				   posted, done,
				   (long long)(CHILD_MAX_NS / ITEST_NS_PER_S));
		/* keep the queue full, until enough went in after the free */
		while (n_after < STREAM_AFTER && posted < STREAM_MAX) {
			bool was_freed = load32(&sh->freed);

			q = itest_rdma_req(src.addr.id, ap.id, 0,
				     (uint64_t)(posted % 4) * STREAM_LEN,
				     STREAM_LEN, posted,
				     CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
			r = clanq_rdma_post(&ep, &q);
			if (r == -EAGAIN)
				break;
			CHILD_CHECK_INT(r, 0);
			after[posted++] = was_freed;
			n_after += was_freed;
			store32(&sh->posted, posted);
		}
		if (posted == STREAM_MAX)
			CHILD_FAIL("streamer: %u requests, %u after the free",
				   posted, n_after);
		while (!clanq_rdma_poll(&ep, &c)) {
			if (c.cookie != done)
				CHILD_FAIL("streamer: completion %llu, expected %u",
					   (unsigned long long)c.cookie, done);
			if (after[done]) {
				if (c.status != -ENXIO || c.len)
					CHILD_FAIL("streamer: request %u, posted after the free: status %d len %llu",
						   done, c.status,
						   (unsigned long long)c.len);
				sh->enxio_after++;
			} else if (c.status == 0) {
				if (failing)
					CHILD_FAIL("streamer: request %u succeeded after a revoked one",
						   done);
				if (c.len != STREAM_LEN)
					CHILD_FAIL("streamer: request %u wrote %llu bytes",
						   done, (unsigned long long)c.len);
				sh->ok++;
			} else if (c.status == -ENXIO) {
				if (c.len > STREAM_LEN)
					CHILD_FAIL("streamer: request %u: -ENXIO after %llu bytes",
						   done, (unsigned long long)c.len);
				sh->partial += c.len != 0;
				failing = true;
				sh->enxio_before++;
			} else {
				CHILD_FAIL("streamer: request %u: status %d",
					   done, c.status);
			}
			store32(&sh->completed, ++done);
		}
		if (n_after >= STREAM_AFTER && done == posted)
			break;
		sched_yield();
	}
	CHILD_CHECK(failing);
	/* the engine's account agrees: every request taken, these failed */
	CHILD_CHECK_INT(itest_wait_ctr(&ep.counters->rdma_reqs, posted), 1);
	CHILD_CHECK_INT(itest_wait_ctr(&ep.counters->rdma_errors,
				       sh->enxio_before + sh->enxio_after), 1);
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK_INT(clanq_region_free(&src), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void wait_queued(struct stream_sh *sh, pid_t pid)
{
	uint64_t end = clanq_now_ns() + 30 * ITEST_NS_PER_S;

	while (load32(&sh->posted) - load32(&sh->completed) < STREAM_RQ / 4) {
		if (!itest_still_running(pid, "streamer"))
			fail_msg("streamer ended early");
		if (clanq_now_ns() > end)
			fail_msg("streamer: its queue never filled");
		sched_yield();
	}
}

static void rdma_in_flight_completes_with_enxio_when_the_region_is_freed(void **state)
{
	struct good_sh *good = shared_alloc(sizeof(*good));
	struct stream_sh *sh = shared_alloc(sizeof(*sh));
	uint64_t rnd = itest_seed("region rdma revoke"), key;
	struct clanq_dev dev, dev1;
	struct clanq_region r;
	struct clanq_ap ap;
	uint32_t queued, good_at_free;
	unsigned char *expect;
	pid_t pid_good, pid;
	unsigned int i;

	(void)state;
	pid_good = good_start(good, &rnd);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_region_alloc(&dev, &r, STREAM_BYTES), 0);
	assert_int_equal(clanq_region_export(&r, CLANQ_RIGHT_WRITE, &key), 0);
	sh->region = itest_addr_pack(r.addr);
	sh->key = key;
	sh->seed = itest_rand(&rnd);
	pid = itest_fork(streamer, sh);
	assert_true(pid > 0);

	/* flowing: every quarter of the region holds the pattern */
	wait_for(&sh->completed, 8, pid, "streamer");
	expect = malloc(STREAM_LEN);
	assert_non_null(expect);
	fill_pattern(expect, STREAM_LEN, sh->seed);
	for (i = 0; i < 4; i++)
		assert_int_equal(memcmp((char *)r.mem + i * STREAM_LEN, expect,
					STREAM_LEN), 0);
	free(expect);

	/* free it with a queue behind the request being copied */
	wait_queued(sh, pid);
	queued = load32(&sh->posted) - load32(&sh->completed);
	good_at_free = load32(&good->rounds);
	assert_int_equal(clanq_region_free(&r), 0);
	store32(&sh->freed, 1);

	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "streamer"));
	/* some requests were queued when it went, and failed */
	assert_true(sh->enxio_before >= 1);
	assert_int_equal(sh->enxio_after, STREAM_AFTER);
	printf("region: RDMA revoked with ~%u requests queued: %u succeeded, %u failed -ENXIO (%u partly written), %u posted after the free failed -ENXIO\n",
	       queued, sh->ok, sh->enxio_before, sh->partial, sh->enxio_after);

	/* the engine still serves the unrelated endpoint */
	good_progress(good, pid_good, good_at_free, 3);
	good_finish(good, pid_good);

	assert_int_equal(clanq_open_nic(&dev1, 1), 0);
	assert_int_equal(clanq_ap_import(&dev1, &ap, r.addr, key, 0, STREAM_BYTES,
					 CLANQ_RIGHT_WRITE), -ENOENT);
	assert_int_equal(clanq_close(&dev1), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(sh, sizeof(*sh));
	munmap(good, sizeof(*good));
}

/*
 * 7. The owner frees a region it still maps: its mapping stays valid
 * (the memory goes at the unmap), while an importer's PIO mapping of
 * the same region is zapped: its next read is SIGBUS.
 */

#define OWNER_BYTES	(3 * 4096u)

struct owner_sh {
	uint64_t region, key;
	uint32_t published, reader_ok, freed;
};

static void owner_child(void *arg)
{
	struct owner_sh *sh = arg;
	struct clanq_ioc_region_create cr;
	struct clanq_ioc_region_free f;
	struct clanq_region others[4];
	struct clanq_ioc_region_export e;
	struct clanq_dev dev;
	uint64_t end = clanq_now_ns() + 30 * ITEST_NS_PER_S;
	unsigned char *mem, *copy;
	unsigned int i;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	memset(&cr, 0, sizeof(cr));
	cr.size = OWNER_BYTES;
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_CREATE, &cr), 0);
	mem = mmap(NULL, cr.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   dev.fd, (off_t)cr.mmap_offset);
	CHILD_CHECK(mem != MAP_FAILED);
	fill_pattern(mem, OWNER_BYTES, 0x0ea7);
	copy = malloc(OWNER_BYTES);
	CHILD_CHECK(copy != NULL);
	memcpy(copy, mem, OWNER_BYTES);
	memset(&e, 0, sizeof(e));
	e.id = cr.id;
	e.rights = CLANQ_RIGHT_READ;
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_EXPORT, &e), 0);
	sh->region = itest_addr_pack((struct clanq_addr){ dev.node, cr.id });
	sh->key = e.key;
	store32(&sh->published, 1);
	while (!load32(&sh->reader_ok)) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("owner: the reader never mapped the region");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}

	/* freed by the ioctl alone: the library would also unmap */
	memset(&f, 0, sizeof(f));
	f.id = cr.id;
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_FREE, &f), 0);
	store32(&sh->freed, 1);
	CHILD_CHECK_INT(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_FREE, &f),
			ENOENT);

	/* still ours: the contents, then writes and reads */
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	/* new regions get fresh pages, never the ones still mapped here */
	for (i = 0; i < ARRAY_SIZE(others); i++) {
		CHILD_CHECK_INT(clanq_region_alloc(&dev, &others[i],
						   OWNER_BYTES), 0);
		memset(others[i].mem, 0xab, OWNER_BYTES);
	}
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	fill_pattern(mem, OWNER_BYTES, 0xbee5);
	fill_pattern(copy, OWNER_BYTES, 0xbee5);
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	for (i = 0; i < ARRAY_SIZE(others); i++) {
		CHILD_CHECK(all_bytes(others[i].mem, OWNER_BYTES, 0xab));
		CHILD_CHECK_INT(clanq_region_free(&others[i]), 0);
	}
	CHILD_CHECK(memcmp(mem, copy, OWNER_BYTES) == 0);
	CHILD_CHECK_INT(munmap(mem, cr.mmap_size), 0);
	free(copy);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void reader_child(void *arg)
{
	struct owner_sh *sh = arg;
	uint64_t end = clanq_now_ns() + 30 * ITEST_NS_PER_S;
	struct clanq_dev dev;
	struct clanq_ap ap;
	volatile uint64_t *w;
	uint64_t sum = 0;
	unsigned int i;

	default_signals();
	while (!load32(&sh->published)) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("reader: nothing published");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ap_import(&dev, &ap, itest_addr_unpack(sh->region),
					sh->key, 0, OWNER_BYTES,
					CLANQ_RIGHT_READ), 0);
	CHILD_CHECK_INT(clanq_ap_map(&ap), 0);
	w = (volatile uint64_t *)ap.base;
	for (i = 0; i < OWNER_BYTES / 8; i++)
		sum += w[i];
	CHILD_CHECK(sum != 0);
	store32(&sh->reader_ok, 1);
	while (!load32(&sh->freed)) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("reader: the owner never freed the region");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	/* zapped: this read faults, and the fault is SIGBUS */
	end = clanq_now_ns() + 5 * ITEST_NS_PER_S;
	for (i = 0;; i++) {
		sum += w[i % (OWNER_BYTES / 8)];
		if (i % 1024 == 0 && clanq_now_ns() > end)
			CHILD_FAIL("reader: the freed region is still readable (%llx)",
				   (unsigned long long)sum);
	}
}

static void an_owner_mapping_outlives_the_free_and_an_importers_does_not(void **state)
{
	struct owner_sh *sh = shared_alloc(sizeof(*sh));
	pid_t owner, reader;

	(void)state;
	reader = itest_fork(reader_child, sh);
	assert_true(reader > 0);
	owner = itest_fork(owner_child, sh);
	assert_true(owner > 0);
	assert_true(itest_status_ok(itest_wait(owner, 60 * ITEST_NS_PER_S),
				    "owner"));
	assert_true(died_of(itest_wait(reader, 20 * ITEST_NS_PER_S), SIGBUS,
			    "reader"));
	munmap(sh, sizeof(*sh));
}

/*
 * 5. A stale mapping and key reuse.
 *
 * An endpoint destroyed while its segment stays mapped leaves a
 * legitimate mapping behind. Its mmap key must not be handed to a new
 * object while that mapping lives: the new object's revocation would zap
 * the old mapping (SIGBUS). Imports and closes (each close zaps its
 * aperture's range) go on around it; the stale mapping must still read
 * what the endpoint's segment held. Going round the whole key space
 * takes too long under TCG: the KUnit suite clanq_context does that with
 * the allocator's cursor moved by hand.
 */
#define KEY_ROUNDS	512u

static void a_stale_mapping_survives_the_reuse_of_every_key(void **state)
{
	struct clanq_ioc_ep_destroy d;
	struct clanq_region exp;
	struct clanq_dev a, b;
	struct clanq_ap ap;
	struct clanq_ep ep;
	volatile const __u64 *stale;
	uint64_t key, delivered;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 1), 0);
	assert_int_equal(clanq_ep_create(&a, &ep, 0), 0);
	/* something recognisable in the segment: one delivered message */
	assert_int_equal(clanq_oob_send(&ep, ep.addr, CLANQ_OOB_TYPE_USER, "x", 1), 0);
	stale = &ep.counters->oob_delivered;
	delivered = *stale;
	assert_int_equal(delivered, 1);
	/* destroyed by hand: the library would unmap the segment too */
	memset(&d, 0, sizeof(d));
	d.id = ep.addr.id;
	assert_int_equal(ioctl(a.fd, CLANQ_IOC_EP_DESTROY, &d), 0);

	assert_int_equal(clanq_region_alloc(&b, &exp, 4096), 0);
	assert_int_equal(clanq_region_export(&exp, CLANQ_RIGHTS_ALL, &key), 0);
	for (i = 0; i < KEY_ROUNDS; i++) {
		assert_int_equal(clanq_ap_import(&a, &ap, exp.addr, key, 0, 4096,
						 CLANQ_RIGHTS_ALL), 0);
		/* mappable, so its close zaps its key's range */
		assert_int_not_equal(ap.map_size, 0);
		assert_int_equal(clanq_ap_close(&ap), 0);
	}
	/* a SIGBUS here means a new object was given the stale key */
	assert_int_equal(*stale, delivered);

	assert_int_equal(munmap(ep.seg, ep.seg_size), 0);
	assert_int_equal(clanq_region_free(&exp), 0);
	assert_int_equal(clanq_close(&b), 0);
	assert_int_equal(clanq_close(&a), 0);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(pio_writers_die_of_sigbus_when_the_exporter_frees_the_region),
		T(rdma_in_flight_completes_with_enxio_when_the_region_is_freed),
		T(an_owner_mapping_outlives_the_free_and_an_importers_does_not),
		T(a_stale_mapping_survives_the_reuse_of_every_key),
	};

	page = (size_t)sysconf(_SC_PAGESIZE);
	return cmocka_run_group_tests_name("region_revoke", tests, NULL, NULL);
}
