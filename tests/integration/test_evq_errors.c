// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The unified event queue through the real driver, refusing: every
 * malformed request on the context fd and the evq fd is refused, limits
 * hold, and a hostile owner of the shared ring hurts nobody but itself.
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"
#include "evq_fixture.h"

/*
 * Malformed requests on the context fd (EVQ_CREATE) and the evq fd.
 */

static int raw_evq_create(int fd, uint32_t max_regs, struct clanq_ioc_evq_create *c)
{
	memset(c, 0, sizeof(*c));
	c->max_regs = max_regs;
	return itest_ioctl_err(fd, CLANQ_IOC_EVQ_CREATE, c);
}

static void evq_create_refuses_bad_max_regs_flags_and_reserved_fields(void **state)
{
	static const uint32_t bad[] = { 0, 1u << 30, 0x80000000u, 0xffffffffu };
	static const uint32_t good[] = { 1, 64, 65, 1000 };
	struct clanq_ioc_evq_create c;
	struct clanq_evq evq;
	struct clanq_dev dev;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(raw_evq_create(dev.fd, bad[i], &c), EINVAL);
	memset(&c, 0, sizeof(c));
	c.max_regs = 4;
	c.flags = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EVQ_CREATE, &c),
			 EINVAL);
	memset(&c, 0, sizeof(c));
	c.max_regs = 4;
	c.reserved0 = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EVQ_CREATE, &c),
			 EINVAL);
	for (i = 0; i < ARRAY_SIZE(c.reserved); i++) {
		memset(&c, 0, sizeof(c));
		c.max_regs = 4;
		c.reserved[i] = 1ull << (i * 23 % 64);
		assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EVQ_CREATE,
						 &c), EINVAL);
	}

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(raw_evq_create(dev.fd, good[i], &c), 0);
		assert_true(c.fd >= 0);
		assert_true(c.nr_words >= (good[i] + 63) / 64);
		assert_true(c.ring.nr_slots >= 2);
		assert_true(c.ring.slot_size >= sizeof(struct clanq_event));
		assert_true(c.mmap_size >= (uint64_t)c.ring.slots +
					   (uint64_t)c.ring.nr_slots * c.ring.slot_size);
		assert_true(c.mmap_size >= (uint64_t)c.pending + c.nr_words * 8ull);
		assert_int_equal(close(c.fd), 0);
	}
	assert_int_equal(clanq_evq_create(&dev, &evq, 0), -EINVAL);
	assert_int_equal(clanq_close(&dev), 0);
}

static void evq_register_refuses_bad_masks_reserved_fields_and_foreign_endpoints(void **state)
{
	static const uint32_t bad_events[] = {
		0, 1u << 3, 1u << 31, CLANQ_EV_OOB | 1u << 7,
	};
	struct clanq_ioc_evq_reg good, r;
	struct clanq_dev other_dev;
	struct clanq_ep ep, other;
	struct fix f;
	unsigned int i;
	int fd, reg;

	(void)state;
	fix_open(&f, 4);
	fd = clanq_evq_fd(&f.evq);
	assert_int_equal(clanq_ep_create(&f.dev, &ep, 16), 0);
	/* another context of the same node: a distinct, valid id there */
	assert_int_equal(clanq_open_nic(&other_dev, 0), 0);
	assert_int_equal(clanq_ep_create(&other_dev, &other, 16), 0);

	memset(&good, 0, sizeof(good));
	good.ep = ep.addr.id;
	good.events = CLANQ_EV_OOB;
	good.cookie = 1;

	for (i = 0; i < ARRAY_SIZE(bad_events); i++) {
		r = good;
		r.events = bad_events[i];
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r),
				 EINVAL);
	}
	r = good;
	r.flags = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), EINVAL);
	for (i = 0; i < ARRAY_SIZE(r.reserved); i++) {
		r = good;
		r.reserved[i] = 1ull << (i * 29 % 64);
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r),
				 EINVAL);
	}
	r = good;
	r.ep = other.addr.id;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), ENOENT);
	r.ep = 0;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), ENOENT);
	r.ep = 0xffffffffu;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_REGISTER, &r), ENOENT);
	assert_int_equal(clanq_evq_register(&f.evq, &other, CLANQ_EV_OOB, 1),
			 -ENOENT);

	/* none of those registered anything: one event, the good one's */
	reg = do_register(&f.evq, &ep, 2);
	send_seq(&f.tx, ep.addr, 0);
	send_seq(&f.tx, other.addr, 0);
	take_event_of(&f.evq, reg, 2);
	expect_no_event(&f.evq);
	drain(&ep, f.tx.addr, 0, 1);
	drain(&other, f.tx.addr, 0, 1);

	assert_int_equal(clanq_ep_destroy(&other), 0);
	assert_int_equal(clanq_close(&other_dev), 0);
	fix_close_ep(&f, &ep);
}

static int raw_unregister(int fd, uint32_t reg, uint32_t flags, uint64_t reserved0)
{
	struct clanq_ioc_evq_reg r;

	memset(&r, 0, sizeof(r));
	r.reg = reg;
	r.flags = flags;
	r.reserved[0] = reserved0;
	return itest_ioctl_err(fd, CLANQ_IOC_EVQ_UNREGISTER, &r);
}

static void evq_unregister_refuses_indexes_that_are_not_registered(void **state)
{
	static const uint32_t out_of_range[] = { 4, 64, 1000, 0xffffffffu };
	struct clanq_ep ep;
	struct fix f;
	unsigned int i;
	int fd, reg, err;

	(void)state;
	reg = fix_open_ep(&f, &ep, 5);
	fd = clanq_evq_fd(&f.evq);
	assert_true(reg < 4);

	assert_int_equal(raw_unregister(fd, (reg + 1) % 4, 0, 0), ENOENT);
	for (i = 0; i < ARRAY_SIZE(out_of_range); i++) {
		err = raw_unregister(fd, out_of_range[i], 0, 0);
		assert_true(err == EINVAL || err == ENOENT);
	}
	assert_int_equal(raw_unregister(fd, reg, 1, 0), EINVAL);
	assert_int_equal(raw_unregister(fd, reg, 0, 1), EINVAL);
	err = clanq_evq_unregister(&f.evq, -1);
	assert_true(err == -EINVAL || err == -ENOENT);

	/* still registered after all that */
	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 5);
	drain(&ep, f.tx.addr, 0, 1);

	assert_int_equal(clanq_evq_unregister(&f.evq, reg), 0);
	assert_int_equal(clanq_evq_unregister(&f.evq, reg), -ENOENT);
	/* gone: messages still arrive, events do not */
	send_seq(&f.tx, ep.addr, 1);
	expect_no_event(&f.evq);
	assert_true(itest_wait_arrivals(&ep, 2));
	drain(&ep, f.tx.addr, 1, 1);

	fix_close_ep(&f, &ep);
}

static void an_evq_holds_max_regs_registrations_then_refuses_with_enospc(void **state)
{
	struct clanq_ep eps[3];
	struct fix f;
	int r0, r1, r2;
	unsigned int i;

	(void)state;
	fix_open(&f, 2);
	for (i = 0; i < 3; i++)
		assert_int_equal(clanq_ep_create(&f.dev, &eps[i], 16), 0);
	r0 = do_register(&f.evq, &eps[0], 100);
	r1 = do_register(&f.evq, &eps[1], 101);
	assert_true(r0 < 2 && r1 < 2 && r0 != r1);
	assert_int_equal(clanq_evq_register(&f.evq, &eps[2], CLANQ_EV_OOB, 102),
			 -ENOSPC);

	assert_int_equal(clanq_evq_unregister(&f.evq, r0), 0);
	r2 = do_register(&f.evq, &eps[2], 102);
	assert_true(r2 < 2 && r2 != r1);

	send_seq(&f.tx, eps[0].addr, 0);	/* unregistered: no event */
	send_seq(&f.tx, eps[2].addr, 0);
	take_event_of(&f.evq, r2, 102);
	expect_no_event(&f.evq);
	drain(&eps[2], f.tx.addr, 0, 1);
	assert_true(itest_wait_arrivals(&eps[0], 1));
	drain(&eps[0], f.tx.addr, 0, 1);

	for (i = 0; i < 3; i++)
		assert_int_equal(clanq_ep_destroy(&eps[i]), 0);
	fix_close(&f);
}

/*
 * What one wake-up costs is bounded: an endpoint is registered at most
 * once per evq (-EEXIST; unregistering makes room again) and on at most
 * max_ep_regs evqs in all (-ENOSPC), so a delivery walks at most
 * max_ep_regs registrations.
 */
static void an_endpoint_is_registered_once_per_evq_and_on_max_ep_regs_evqs(void **state)
{
	unsigned long cap = itest_param("max_ep_regs");
	static struct clanq_evq evqs[64];
	struct clanq_ep ep;
	struct fix f;
	unsigned int i;
	int reg;

	(void)state;
	assert_true(cap >= 1 && cap < 64);
	fix_open(&f, 4);
	assert_int_equal(clanq_ep_create(&f.dev, &ep, 16), 0);
	reg = do_register(&f.evq, &ep, 1);
	assert_int_equal(clanq_evq_register(&f.evq, &ep, CLANQ_EV_OOB, 2), -EEXIST);
	assert_int_equal(clanq_evq_register(&f.evq, &ep, CLANQ_EV_RDMA, 3), -EEXIST);
	assert_int_equal(clanq_evq_unregister(&f.evq, reg), 0);
	reg = do_register(&f.evq, &ep, 4);

	/* f.evq holds one; cap - 1 more evqs fit, the next is refused */
	for (i = 0; i < cap - 1; i++) {
		assert_int_equal(clanq_evq_create(&f.dev, &evqs[i], 1), 0);
		do_register(&evqs[i], &ep, 10 + i);
	}
	assert_int_equal(clanq_evq_create(&f.dev, &evqs[i], 1), 0);
	assert_int_equal(clanq_evq_register(&evqs[i], &ep, CLANQ_EV_OOB, 99), -ENOSPC);
	/* one wake-up reaches every registration, once */
	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 4);
	for (i = 0; i < cap - 1; i++)
		take_event_of(&evqs[i], 0, 10 + i);
	expect_no_event(&evqs[cap - 1]);
	/* closing an evq gives its registration back */
	assert_int_equal(clanq_evq_destroy(&evqs[0]), 0);
	assert_true(clanq_evq_register(&evqs[cap - 1], &ep, CLANQ_EV_OOB, 99) >= 0);
	for (i = 1; i < cap; i++)
		assert_int_equal(clanq_evq_destroy(&evqs[i]), 0);
	drain(&ep, f.tx.addr, 0, 1);
	fix_close_ep(&f, &ep);
}

static void destroying_an_endpoint_removes_its_registration(void **state)
{
	struct clanq_ep gone, kept;
	struct fix f;
	int r0, r1;

	(void)state;
	fix_open(&f, 1);
	assert_int_equal(clanq_ep_create(&f.dev, &gone, 16), 0);
	assert_int_equal(clanq_ep_create(&f.dev, &kept, 16), 0);
	r0 = do_register(&f.evq, &gone, 10);
	assert_int_equal(clanq_ep_destroy(&gone), 0);

	assert_int_equal(raw_unregister(clanq_evq_fd(&f.evq), r0, 0, 0), ENOENT);
	/* its place is free again (max_regs is 1) */
	r1 = do_register(&f.evq, &kept, 11);
	send_seq(&f.tx, kept.addr, 0);
	take_event_of(&f.evq, r1, 11);
	drain(&kept, f.tx.addr, 0, 1);

	assert_int_equal(clanq_ep_destroy(&kept), 0);
	fix_close(&f);
}

static void closing_an_evq_leaves_its_endpoints_working(void **state)
{
	struct clanq_evq evq2;
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	int reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 1);
	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 1);

	/* closed with a live registration */
	assert_int_equal(clanq_evq_destroy(&f.evq), 0);
	send_seq(&f.tx, ep.addr, 1);
	send_seq(&f.tx, ep.addr, 2);
	assert_true(itest_wait_arrivals(&ep, 3));
	drain(&ep, f.tx.addr, 0, 3);

	/* a new evq picks the endpoint up, queued message and all */
	send_seq(&f.tx, ep.addr, 3);
	assert_true(itest_wait_arrivals(&ep, 4));
	assert_int_equal(clanq_evq_create(&f.dev, &evq2, 4), 0);
	reg = do_register(&evq2, &ep, 2);
	assert_int_equal(clanq_evq_poll(&evq2, &ev), 0);
	assert_int_equal(ev.cookie, 2);
	assert_int_equal(ev.reg, reg);
	drain(&ep, f.tx.addr, 3, 1);

	f.evq = evq2;		/* fix_close() destroys it */
	fix_close_ep(&f, &ep);
}

static void evq_wait_refuses_a_read_index_outside_the_ring(void **state)
{
	struct clanq_ioc_evq_wait w, good;
	struct clanq_ep ep;
	struct fix f;
	unsigned int i;
	uint32_t nr;
	int fd, reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 3);
	fd = clanq_evq_fd(&f.evq);
	nr = f.evq.ring.mask + 1;

	memset(&good, 0, sizeof(good));
	good.timeout_ns = 0;
	good.read_i = f.evq.ring.own;

	w = good;
	w.read_i = nr;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	w.read_i = 2 * nr - 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	w.read_i = 0xffffffffu;
	w.timeout_ns = ITEST_NS_PER_S;	/* refused, so never sleeps */
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	w = good;
	w.flags = 1;
	assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w), EINVAL);
	for (i = 0; i < ARRAY_SIZE(w.reserved); i++) {
		w = good;
		w.reserved[i] = 1ull << (i * 37 % 64);
		assert_int_equal(itest_ioctl_err(fd, CLANQ_IOC_EVQ_WAIT, &w),
				 EINVAL);
	}

	send_seq(&f.tx, ep.addr, 0);
	take_event_of(&f.evq, reg, 3);
	drain(&ep, f.tx.addr, 0, 1);
	fix_close_ep(&f, &ep);
}

static void an_evq_maps_only_whole_and_from_offset_0(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct clanq_ioc_evq_create c;
	struct clanq_dev dev;
	size_t size;
	void *p;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(raw_evq_create(dev.fd, 64, &c), 0);
	size = (size_t)c.mmap_size;
	assert_int_equal(size % page, 0);

	p = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd, 0);
	assert_true(p == MAP_FAILED);
	assert_int_equal(errno, EINVAL);
	if (size > page) {
		p = mmap(NULL, size - page, PROT_READ | PROT_WRITE, MAP_SHARED,
			 c.fd, 0);
		assert_true(p == MAP_FAILED);
		assert_int_equal(errno, EINVAL);
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd,
		 (off_t)page);
	assert_true(p == MAP_FAILED);
	assert_int_equal(errno, EINVAL);

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(munmap(p, size), 0);
	assert_int_equal(close(c.fd), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

/*
 * A hostile owner of the evq segment.
 */

static void scribbled_pending_bits_and_ring_indexes_cannot_hurt_the_kernel(void **state)
{
	struct clanq_event ev = { 0 };
	struct clanq_ep ep;
	struct fix f;
	uint32_t nr, i, n;
	uint64_t sent = 0;
	int reg;

	(void)state;
	reg = fix_open_ep(&f, &ep, 0x5c);
	nr = f.evq.ring.mask + 1;

	/* every bit set: the driver takes every event as pending already */
	set_pending(&f.evq, ~0ull);
	for (i = 0; i < 3; i++)
		send_seq(&f.tx, ep.addr, (uint32_t)sent++);
	assert_true(itest_wait_arrivals(&ep, sent));
	expect_no_event(&f.evq);
	drain(&ep, f.tx.addr, 0, 3);

	/*
	 * Bits cleared behind the driver's back and events never taken:
	 * more events than the ring holds are attempted, and the ring
	 * keeps what fits and not one more.
	 */
	for (i = 0; i < nr + 16; i++) {
		set_pending(&f.evq, 0);
		send_seq(&f.tx, ep.addr, (uint32_t)sent);
		assert_true(itest_wait_arrivals(&ep, ++sent));
		drain(&ep, f.tx.addr, (uint32_t)sent - 1, 1);
	}
	for (n = 0; n <= nr && !clanq_evq_poll(&f.evq, &ev); n++) {
		assert_int_equal(ev.reg, reg);
		assert_int_equal(ev.cookie, 0x5c);
	}
	assert_true(n >= 1);
	assert_true(n <= nr - 1);

	/* garbage in both index words: sends go on, the kernel survives */
	itest_store_u32(f.evq.ring.prod, 0xffffffffu);
	itest_store_u32(f.evq.ring.cons, 0xffffffffu);
	for (i = 0; i < 4; i++) {
		set_pending(&f.evq, 0);
		send_seq(&f.tx, ep.addr, (uint32_t)sent);
		assert_true(itest_wait_arrivals(&ep, ++sent));
		drain(&ep, f.tx.addr, (uint32_t)sent - 1, 1);
	}

	/* the consumer's index restored, bits cleared: working again */
	itest_store_u32(f.evq.ring.cons, f.evq.ring.own);
	for (n = 0; n <= nr && !clanq_evq_poll(&f.evq, &ev); n++)
		;
	set_pending(&f.evq, 0);
	send_seq(&f.tx, ep.addr, (uint32_t)sent);
	take_event_of(&f.evq, reg, 0x5c);
	drain(&ep, f.tx.addr, (uint32_t)sent, 1);
	sent++;
	send_seq(&f.tx, ep.addr, (uint32_t)sent);
	take_event_of(&f.evq, reg, 0x5c);
	drain(&ep, f.tx.addr, (uint32_t)sent, 1);

	fix_close_ep(&f, &ep);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(evq_create_refuses_bad_max_regs_flags_and_reserved_fields),
		T(evq_register_refuses_bad_masks_reserved_fields_and_foreign_endpoints),
		T(evq_unregister_refuses_indexes_that_are_not_registered),
		T(an_evq_holds_max_regs_registrations_then_refuses_with_enospc),
		T(an_endpoint_is_registered_once_per_evq_and_on_max_ep_regs_evqs),
		T(destroying_an_endpoint_removes_its_registration),
		T(closing_an_evq_leaves_its_endpoints_working),
		T(evq_wait_refuses_a_read_index_outside_the_ring),
		T(an_evq_maps_only_whole_and_from_offset_0),
		T(scribbled_pending_bits_and_ring_indexes_cannot_hurt_the_kernel),
	};

	return cmocka_run_group_tests_name("evq_errors", tests, NULL, NULL);
}
