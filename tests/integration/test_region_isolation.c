// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Isolation, through the real driver: processes SIGKILLed with transfers
 * in flight, apertures mapped and regions registered leave the others
 * unaffected; a hostile process scribbling on its own endpoint segment
 * while the engine works on it hurts nobody but itself; registered memory
 * is charged to RLIMIT_MEMLOCK, and given back.
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
 * 4. Processes killed with everything in flight.
 *
 * Each victim has, on node 1, an endpoint whose request queue it keeps
 * full of 256 KiB writes (from a registered and from an allocated
 * region, into the parent's region and into one of its own on node 0),
 * and PIO mappings of the parent's region from both nodes, which it
 * keeps storing into. It also exports a region the parent imports.
 * SIGKILL catches it at a random moment. The good process must not
 * notice; the parent must still be able to free the region the victim
 * had imported, and the victim's own export must be gone.
 */

#define VICTIMS		6
#define VICTIM_RQ	128
#define VICTIM_LEN	(256u * 1024)
#define VICTIM_DST	(1024u * 1024)

struct victim_sh {
	uint64_t region, key;		/* the parent's */
	uint64_t own, own_key;		/* the victim's, published */
	uint32_t comps, stores;
};

static void victim(void *arg)
{
	struct victim_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = VICTIM_RQ,
				      .cq_slots = 2 * VICTIM_RQ };
	struct clanq_region reg, alloc, own;
	struct clanq_ap ap_x, ap_x0, ap_own;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_dev d0, d1;
	struct clanq_ep ep;
	struct clanq_addr x = itest_addr_unpack(sh->region);
	uint64_t end = clanq_now_ns() + CHILD_MAX_NS;
	uint64_t posted = 0, done = 0, key;
	char *buf;
	int r;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&d1, 1), 0);
	CHILD_CHECK_INT(clanq_open_nic(&d0, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&d1, &ep, &attr), 0);
	buf = mmap(NULL, 2 * VICTIM_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHILD_CHECK(buf != MAP_FAILED);
	fill_pattern(buf, 2 * VICTIM_LEN, 0x71c7);
	CHILD_CHECK_INT(clanq_region_register(&d1, &reg, buf, 2 * VICTIM_LEN), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d1, &alloc, VICTIM_LEN), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d0, &own, VICTIM_DST), 0);
	CHILD_CHECK_INT(clanq_region_export(&own, CLANQ_RIGHTS_ALL, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d1, &ap_own, own.addr, key, 0,
					VICTIM_DST, CLANQ_RIGHT_WRITE), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d1, &ap_x, x, sh->key, 0, VICTIM_DST,
					CLANQ_RIGHTS_ALL), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d0, &ap_x0, x, sh->key, 0, VICTIM_DST,
					CLANQ_RIGHTS_ALL), 0);
	CHILD_CHECK_INT(clanq_ap_map(&ap_x), 0);
	CHILD_CHECK_INT(clanq_ap_map(&ap_x0), 0);
	sh->own_key = key;
	__atomic_store_n(&sh->own, itest_addr_pack(own.addr), __ATOMIC_RELEASE);

	for (;;) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("victim: not killed after %lld s",
				   (long long)(CHILD_MAX_NS / ITEST_NS_PER_S));
		for (;;) {
			bool odd = posted & 1;

			q = itest_rdma_req(odd ? reg.addr.id : alloc.addr.id,
				     posted % 3 ? ap_x.id : ap_own.id,
				     odd ? VICTIM_LEN / 2 : 0,
				     (posted % 4) * VICTIM_LEN, VICTIM_LEN,
				     posted, CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
			r = clanq_rdma_post(&ep, &q);
			if (r == -EAGAIN)
				break;
			CHILD_CHECK_INT(r, 0);
			posted++;
		}
		while (!clanq_rdma_poll(&ep, &c)) {
			if (c.cookie != done || c.status || c.len != VICTIM_LEN)
				CHILD_FAIL("victim: completion %llu: cookie %llu status %d len %llu",
					   (unsigned long long)done,
					   (unsigned long long)c.cookie, c.status,
					   (unsigned long long)c.len);
			done++;
			store32(&sh->comps, (uint32_t)done);
		}
		/* PIO from both nodes, racing the engine's writes */
		((volatile uint64_t *)ap_x.base)[posted % (VICTIM_DST / 8)] = posted;
		((volatile uint64_t *)ap_x0.base)[done % (VICTIM_DST / 8)] = done;
		store32(&sh->stores, load32(&sh->stores) + 1);
	}
}

static void processes_killed_mid_transfer_leave_the_others_unaffected(void **state)
{
	struct good_sh *good = shared_alloc(sizeof(*good));
	struct victim_sh *sh = shared_alloc(sizeof(*sh));
	uint64_t rnd = itest_seed("region kill"), key;
	struct clanq_dev dev, dev1;
	struct clanq_region x;
	struct clanq_ap ap_v;
	uint32_t rounds_before, comps = 0;
	int64_t delay;
	pid_t pid_good, pid;
	unsigned int v;

	(void)state;
	pid_good = good_start(good, &rnd);
	rounds_before = load32(&good->rounds);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_open_nic(&dev1, 1), 0);
	for (v = 0; v < VICTIMS; v++) {
		memset(sh, 0, sizeof(*sh));
		assert_int_equal(clanq_region_alloc(&dev, &x, VICTIM_DST), 0);
		assert_int_equal(clanq_region_export(&x, CLANQ_RIGHTS_ALL, &key), 0);
		sh->region = itest_addr_pack(x.addr);
		sh->key = key;
		pid = itest_fork(victim, sh);
		assert_true(pid > 0);
		/* in the thick of it: completions and stores going on */
		wait_for(&sh->comps, 4, pid, "victim");
		wait_for(&sh->stores, 10, pid, "victim");
		assert_int_equal(clanq_ap_import(&dev1, &ap_v,
						 itest_addr_unpack(sh->own),
						 sh->own_key, 0, VICTIM_DST,
						 CLANQ_RIGHT_WRITE), 0);
		delay = (int64_t)(itest_rand(&rnd) % 21) * ITEST_NS_PER_MS;
		itest_sleep_ns(delay);
		kill(pid, SIGKILL);
		assert_true(died_of(itest_wait(pid, 20 * ITEST_NS_PER_S), SIGKILL,
				    "victim"));
		comps += load32(&sh->comps);
		assert_true(itest_still_running(pid_good, "good"));

		/* the region it had imported (twice) and mapped: ours to free */
		assert_int_equal(clanq_region_free(&x), 0);
		/* its own export went with it; our import of it closes */
		assert_int_equal(clanq_ap_import(&dev1, &ap_v,
						 itest_addr_unpack(sh->own),
						 sh->own_key, 0, 1,
						 CLANQ_RIGHT_WRITE), -ENOENT);
		assert_int_equal(clanq_ap_close(&ap_v), 0);
	}
	/* the good process went on through the kills, and goes on after */
	assert_true(load32(&good->rounds) > rounds_before);
	good_progress(good, pid_good, load32(&good->rounds), 3);
	printf("region: %u victims killed mid-transfer after %u completions in all; good process: %u rounds during the kills\n",
	       VICTIMS, comps, load32(&good->rounds) - rounds_before);
	good_finish(good, pid_good);
	assert_int_equal(clanq_close(&dev1), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(sh, sizeof(*sh));
	munmap(good, sizeof(*good));
}

/*
 * 5. A hostile process scribbles on its own endpoint segment: its request
 * queue's producer index and slots (while the engine works on them), its
 * completion queue's consumer index, the doorbell word, the counters and
 * the OOB indices, and rings the doorbell, its own and others'. The good
 * process on the same NIC goes on; the kernel survives; the hostile
 * process then tears down normally.
 */

#define HOSTILE_NS	(4 * ITEST_NS_PER_S)
#define HOSTILE_BYTES	(64u * 1024)

struct hostile_sh {
	uint64_t seed;
	uint32_t started;
	uint32_t iters, kicks, comps, posts;
};

static bool documented_status(int32_t status)
{
	return status == 0 || status == -EINVAL || status == -ENOENT ||
	       status == -EACCES || status == -ERANGE || status == -ENXIO;
}

static void hostile(void *arg)
{
	struct hostile_sh *sh = arg;
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 8 };
	struct clanq_region src, dst;
	struct clanq_ioc_rdma_kick k;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req q;
	struct clanq_dev d0, d1;
	struct clanq_ep ep;
	struct clanq_ap ap;
	uint64_t rnd = sh->seed, key, *ctrs;
	uint32_t *doorbell, nr_ctrs = sizeof(struct clanq_ep_counters) / 8;
	uint64_t end;
	unsigned int n, i;
	int r;

	default_signals();
	CHILD_CHECK_INT(clanq_open_nic(&d1, 1), 0);
	CHILD_CHECK_INT(clanq_open_nic(&d0, 0), 0);
	CHILD_CHECK_INT(clanq_ep_create_attr(&d1, &ep, &attr), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d1, &src, HOSTILE_BYTES), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&d0, &dst, HOSTILE_BYTES), 0);
	CHILD_CHECK_INT(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&d1, &ap, dst.addr, key, 0,
					HOSTILE_BYTES, CLANQ_RIGHT_WRITE), 0);
	/* the segment is mapped read-write: the "const" is the library's */
	doorbell = (uint32_t *)(uintptr_t)ep.need_wakeup;
	ctrs = (uint64_t *)(uintptr_t)ep.counters;
	memset(&k, 0, sizeof(k));

	store32(&sh->started, 1);
	end = clanq_now_ns() + HOSTILE_NS;
	for (n = 0;; n++) {
		uint64_t v = itest_rand(&rnd);
		uint32_t slot = (uint32_t)(v >> 32) & ep.rq.mask;

		if (n % 64 == 0 && clanq_now_ns() > end)
			break;
		switch (v % 12) {
		case 0:		/* a plausible producer index, or garbage */
			itest_store_u32(ep.rq.prod, v & 0x100 ?
					(uint32_t)(v >> 40) & ep.rq.mask :
					(uint32_t)(v >> 16));
			break;
		case 1:		/* a slot of noise */
			for (i = 0; i < sizeof(q) / 8; i++)
				((uint64_t *)clanq_q_slot(&ep.rq, slot))[i] =
					itest_rand(&rnd);
			break;
		case 2: {	/* a slot that nearly makes sense */
			uint64_t w = itest_rand(&rnd);

			q = itest_rdma_req(w & 1 ? src.addr.id : (uint32_t)(w >> 8),
				     w & 2 ? ap.id : (uint32_t)(w >> 16),
				     w & 4 ? w % HOSTILE_BYTES : w >> 3,
				     w & 8 ? (w >> 7) % HOSTILE_BYTES : ~w,
				     w & 16 ? (w >> 11) % HOSTILE_BYTES :
				     w >> 20,
				     w, (uint32_t)(w >> 50) & 0xf);
			if ((w & 0xe0) == 0xe0)
				q.operand[1] = w;
			memcpy(clanq_q_slot(&ep.rq, slot), &q, sizeof(q));
			break;
		}
		case 3:
			itest_store_u32(ep.cq.cons, v & 0x100 ?
					(uint32_t)(v >> 40) & ep.cq.mask :
					(uint32_t)(v >> 16));
			break;
		case 4:
			itest_store_u32(doorbell, (uint32_t)(v >> 16));
			break;
		case 5:
			__atomic_store_n(&ctrs[(v >> 8) % nr_ctrs],
					 itest_rand(&rnd), __ATOMIC_RELAXED);
			break;
		case 6:
			itest_store_u32(v & 0x100 ? ep.oob.prod : ep.oob.cons,
					(uint32_t)(v >> 20));
			break;
		case 7:		/* the doorbell, whatever the queue holds */
			k.ep = ep.addr.id;
			CHILD_CHECK_INT(itest_ioctl_err(d1.fd,
							CLANQ_IOC_RDMA_KICK, &k),
					0);
			sh->kicks++;
			break;
		case 8:		/* somebody else's, or nobody's */
			k.ep = (uint32_t)(v >> 16);
			r = itest_ioctl_err(d1.fd, CLANQ_IOC_RDMA_KICK, &k);
			CHILD_CHECK_INT(r, k.ep == ep.addr.id ? 0 : ENOENT);
			break;
		case 9:		/* honest work, as the library does it */
			q = itest_rdma_req(src.addr.id, ap.id, 0, 0,
				     (v >> 20) % HOSTILE_BYTES, n,
				     CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL);
			r = clanq_rdma_post(&ep, &q);
			CHILD_CHECK(r == 0 || r == -EAGAIN);
			sh->posts += r == 0;
			break;
		default:	/* whatever the engine made of it */
			for (i = 0; i < 16 && !clanq_rdma_poll(&ep, &c); i++) {
				if (!documented_status(c.status))
					CHILD_FAIL("hostile: completion status %d",
						   c.status);
				sh->comps++;
			}
			break;
		}
		sh->iters = n + 1;
	}
	/* and it leaves like anybody else */
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK_INT(clanq_region_free(&src), 0);
	CHILD_CHECK_INT(clanq_region_free(&dst), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&d0), 0);
	CHILD_CHECK_INT(clanq_close(&d1), 0);
}

static void a_hostile_segment_owner_hurts_nobody_but_itself(void **state)
{
	struct good_sh *good = shared_alloc(sizeof(*good));
	struct hostile_sh *sh = shared_alloc(sizeof(*sh));
	uint64_t rnd = itest_seed("region hostile");
	uint32_t before, during;
	pid_t pid_good, pid;

	(void)state;
	pid_good = good_start(good, &rnd);
	sh->seed = itest_rand(&rnd);
	pid = itest_fork(hostile, sh);
	assert_true(pid > 0);
	wait_for(&sh->started, 1, pid, "hostile");
	before = load32(&good->rounds);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "hostile"));
	during = load32(&good->rounds) - before;
	printf("region: hostile process: %u scribbles, %u own kicks, %u requests posted, %u completions taken; good process: %u rounds meanwhile\n",
	       sh->iters, sh->kicks, sh->posts, sh->comps, during);
	assert_true(sh->iters > 1000);
	assert_true(during >= 1);
	good_progress(good, pid_good, load32(&good->rounds), 3);
	good_finish(good, pid_good);
	munmap(sh, sizeof(*sh));
	munmap(good, sizeof(*good));
}

/*
 * 6. RLIMIT_MEMLOCK. The VM runs as root, whose CAP_IPC_LOCK lifts the
 * limit: the child drops it (raw capget/capset: no libcap in the VM)
 * before it lowers the limit.
 */

#define MEMLOCK_LIMIT	(256u * 1024)

static void drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
		.pid = 0,
	};
	struct __user_cap_data_struct data[2];
	uint32_t bit = 1u << (CAP_IPC_LOCK % 32);
	unsigned int w = CAP_IPC_LOCK / 32;

	CHILD_CHECK_INT(syscall(SYS_capget, &hdr, data), 0);
	data[w].effective &= ~bit;
	data[w].permitted &= ~bit;
	data[w].inheritable &= ~bit;
	CHILD_CHECK_INT(syscall(SYS_capset, &hdr, data), 0);
	memset(data, 0, sizeof(data));
	CHILD_CHECK_INT(syscall(SYS_capget, &hdr, data), 0);
	CHILD_CHECK(!(data[w].effective & bit) && !(data[w].permitted & bit));
}

static void memlock_child(void *arg)
{
	struct rlimit rl = { MEMLOCK_LIMIT, MEMLOCK_LIMIT };
	const size_t half = MEMLOCK_LIMIT / 2;
	unsigned long big = itest_param("max_ctx_bytes") / 2 + 4096;
	struct clanq_region a, b, c, al;
	struct clanq_dev dev, imp;
	struct clanq_ap ap, apl;
	char *buf, *holey;
	unsigned int i;
	uint64_t key;

	default_signals();
	(void)arg;
	drop_cap_ipc_lock();
	CHILD_CHECK_INT(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	buf = mmap(NULL, 4 * MEMLOCK_LIMIT, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHILD_CHECK(buf != MAP_FAILED);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);

	/* half the limit fits; the whole limit more does not */
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, half), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf + MEMLOCK_LIMIT,
					      MEMLOCK_LIMIT), -ENOMEM);
	/* freeing the first makes room for exactly the limit */
	CHILD_CHECK_INT(clanq_region_free(&a), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf + MEMLOCK_LIMIT,
					      MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &c, buf, page), -ENOMEM);
	CHILD_CHECK_INT(clanq_region_free(&b), 0);
	/* more than the limit in one go */
	CHILD_CHECK_INT(clanq_region_register(&dev, &c, buf, 2 * MEMLOCK_LIMIT),
			-ENOMEM);

	/* a registration that fails half-way (a hole) gives its charge back */
	holey = buf + 2 * MEMLOCK_LIMIT;
	CHILD_CHECK_INT(munmap(holey + half, page), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &c, holey, MEMLOCK_LIMIT),
			-EFAULT);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_free(&b), 0);

	/* every free gives its charge back */
	for (i = 0; i < 100; i++) {
		CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, half), 0);
		CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf + half, half),
				0);
		CHILD_CHECK_INT(clanq_region_register(&dev, &c,
						      buf + MEMLOCK_LIMIT, page),
				-ENOMEM);
		CHILD_CHECK_INT(clanq_region_free(&b), 0);
		CHILD_CHECK_INT(clanq_region_free(&a), 0);
	}

	/*
	 * An importer that never closes its aperture keeps neither the
	 * exporter's pins nor its budget: both come back at the free (with
	 * them held, the second registration / allocation would not fit).
	 */
	CHILD_CHECK_INT(clanq_open_nic(&imp, 1), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_export(&a, CLANQ_RIGHT_WRITE, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&imp, &ap, a.addr, key, 0, MEMLOCK_LIMIT,
					CLANQ_RIGHT_WRITE), 0);
	CHILD_CHECK_INT(clanq_region_free(&a), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &b, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_free(&b), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &al, big), 0);
	CHILD_CHECK_INT(clanq_region_export(&al, CLANQ_RIGHT_WRITE, &key), 0);
	CHILD_CHECK_INT(clanq_ap_import(&imp, &apl, al.addr, key, 0, big,
					CLANQ_RIGHT_WRITE), 0);
	CHILD_CHECK_INT(clanq_region_free(&al), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &al, big), 0);
	CHILD_CHECK_INT(clanq_region_free(&al), 0);
	CHILD_CHECK_INT(clanq_ap_close(&apl), 0);
	CHILD_CHECK_INT(clanq_ap_close(&ap), 0);
	CHILD_CHECK_INT(clanq_close(&imp), 0);

	/* and so does closing the context with the region still there */
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &a, buf, MEMLOCK_LIMIT), 0);

	/* allocated regions are the driver's memory: max_ctx_bytes, not this */
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &al, 4 * MEMLOCK_LIMIT), 0);
	CHILD_CHECK_INT(clanq_region_free(&al), 0);
	CHILD_CHECK_INT(clanq_region_free(&a), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void registered_memory_is_charged_to_rlimit_memlock_and_given_back(void **state)
{
	pid_t pid;

	(void)state;
	pid = itest_fork(memlock_child, NULL);
	assert_true(pid > 0);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S),
				    "memlock"));
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(processes_killed_mid_transfer_leave_the_others_unaffected),
		T(a_hostile_segment_owner_hurts_nobody_but_itself),
		T(registered_memory_is_charged_to_rlimit_memlock_and_given_back),
	};

	page = (size_t)sysconf(_SC_PAGESIZE);
	return cmocka_run_group_tests_name("region_isolation", tests, NULL, NULL);
}
