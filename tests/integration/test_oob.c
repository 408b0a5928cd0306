// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Endpoints and out-of-band messages through the real driver: delivery
 * within a node and across nodes, between processes; the full-queue drop
 * rule and its counters; the driver-stamped source; the errors a sender
 * is and is not told; every malformed request refused; and a segment
 * scribbled on by its hostile owner hurting nobody but that owner.
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2:
 * /dev/clanq0 is node 0, /dev/clanq1 is node 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

#define TAG		0x6f6f6221u
#define TAG_PING	0x50494e47u
#define TAG_PONG	0x504f4e47u
#define TYPE_PING	(CLANQ_OOB_TYPE_USER + 1)
#define TYPE_PONG	(CLANQ_OOB_TYPE_USER + 2)

#define PINGPONG_ROUNDS	1000
#define DEFAULT_SLOTS	64

/* Two contexts: tx sends, rx receives; rx may be on the other node. */
struct pair {
	struct clanq_dev tx_dev, rx_dev;
	struct clanq_ep tx, rx;
};

static void pair_open(struct pair *p, unsigned int tx_nic,
		      unsigned int rx_nic, unsigned int rx_slots)
{
	assert_int_equal(clanq_open_nic(&p->tx_dev, tx_nic), 0);
	assert_int_equal(clanq_open_nic(&p->rx_dev, rx_nic), 0);
	assert_int_equal(clanq_ep_create(&p->tx_dev, &p->tx, 0), 0);
	assert_int_equal(clanq_ep_create(&p->rx_dev, &p->rx, rx_slots), 0);
	assert_int_equal(p->tx.addr.node, tx_nic);
	assert_int_equal(p->rx.addr.node, rx_nic);
}

static void pair_close(struct pair *p)
{
	assert_int_equal(clanq_ep_destroy(&p->tx), 0);
	assert_int_equal(clanq_ep_destroy(&p->rx), 0);
	assert_int_equal(clanq_close(&p->tx_dev), 0);
	assert_int_equal(clanq_close(&p->rx_dev), 0);
}

/* Receive message seq from p->tx, intact; fail the test otherwise. */
static void expect_msg(struct clanq_ep *ep, struct clanq_addr src, uint32_t seq)
{
	struct clanq_oob_msg m;
	const char *why;

	assert_int_equal(itest_recv(ep, &m, ITEST_RECV_TIMEOUT), 0);
	why = itest_check(&m, src, ITEST_TYPE, TAG, seq);
	if (why)
		fail_msg("message %u: %s (got seq %u from %u:%u)", seq, why,
			 itest_seq(&m), m.src.node, m.src.id);
}

static void send_seq(struct clanq_ep *ep, struct clanq_addr dst, uint32_t seq)
{
	assert_int_equal(itest_send(ep, dst, ITEST_TYPE, TAG, seq), 0);
}

/*
 * The driver's "port unreachable": a notice back on the sender, naming
 * the destination and carrying the undelivered message's type and head.
 */
static void expect_unreachable(struct clanq_ep *ep, struct clanq_addr dst,
			       uint32_t seq)
{
	struct clanq_oob_unreachable u;
	struct clanq_oob_msg m;
	uint8_t want[CLANQ_OOB_PAYLOAD];

	assert_int_equal(itest_recv(ep, &m, ITEST_RECV_TIMEOUT), 0);
	assert_int_equal(m.type, CLANQ_OOB_UNREACHABLE);
	assert_int_equal(m.len, sizeof(u));
	assert_true(itest_addr_eq(m.src, dst));
	memcpy(&u, m.payload, sizeof(u));
	assert_int_equal(u.type, ITEST_TYPE);
	assert_int_equal(u.len, itest_len(TAG, seq));
	memset(want, 0, sizeof(want));
	itest_fill(want, TAG, seq);
	assert_memory_equal(u.head, want, sizeof(u.head));
}

/* errno of a raw OOB_SEND of an 8-byte message on fd */
static int raw_send(int fd, uint32_t ep, struct clanq_addr dst)
{
	struct clanq_ioc_oob_send s;

	memset(&s, 0, sizeof(s));
	s.ep = ep;
	s.dst = dst;
	s.type = ITEST_TYPE;
	s.len = 8;
	return itest_ioctl_err(fd, CLANQ_IOC_OOB_SEND, &s);
}

static int raw_ep_create(int fd, uint32_t slots, struct clanq_ioc_ep_create *c)
{
	memset(c, 0, sizeof(*c));
	c->oob_slots = slots;
	return itest_ioctl_err(fd, CLANQ_IOC_EP_CREATE, c);
}

static int raw_ep_destroy(int fd, uint32_t id)
{
	struct clanq_ioc_ep_destroy d;

	memset(&d, 0, sizeof(d));
	d.id = id;
	return itest_ioctl_err(fd, CLANQ_IOC_EP_DESTROY, &d);
}

/* errno of an mmap on fd, or 0 if it mapped (then it is unmapped again) */
static int mmap_err(int fd, uint64_t off, size_t len, int flags)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd,
		       (off_t)off);

	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

/*
 * Two processes, two contexts: ping-pong with sequence numbers.
 */

struct ponger_args {
	unsigned int nic;
	struct clanq_addr pinger;	/* the parent's endpoint */
	int addr_fd;			/* the child's address goes here */
};

static void ponger(void *arg)
{
	struct ponger_args *a = arg;
	struct clanq_oob_msg m;
	struct clanq_dev dev;
	struct clanq_ep ep;
	const char *why;
	uint32_t i;

	CHILD_CHECK_INT(clanq_open_nic(&dev, a->nic), 0);
	CHILD_CHECK_INT(clanq_ep_create(&dev, &ep, 16), 0);
	CHILD_CHECK(itest_write_full(a->addr_fd, &ep.addr, sizeof(ep.addr)));
	for (i = 0; i < PINGPONG_ROUNDS; i++) {
		CHILD_CHECK_INT(itest_recv(&ep, &m, ITEST_RECV_TIMEOUT), 0);
		why = itest_check(&m, a->pinger, TYPE_PING, TAG_PING, i);
		if (why)
			CHILD_FAIL("ping %u: %s", i, why);
		/* answer the driver-stamped source, checked just above */
		CHILD_CHECK_INT(itest_send(&ep, m.src, TYPE_PONG, TAG_PONG, i),
				0);
	}
	CHILD_CHECK(itest_quiet(&ep));
	CHILD_CHECK_INT(itest_ctr(&ep.counters->oob_sent), PINGPONG_ROUNDS);
	CHILD_CHECK_INT(itest_ctr(&ep.counters->oob_delivered),
			PINGPONG_ROUNDS);
	CHILD_CHECK_INT(clanq_ep_dropped(&ep), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void ping_pong(unsigned int nic, unsigned int peer_nic)
{
	struct ponger_args a;
	struct clanq_oob_msg m;
	struct clanq_addr peer;
	struct clanq_dev dev;
	struct clanq_ep ep;
	const char *why;
	int fds[2], status;
	pid_t pid;
	uint32_t i;

	assert_int_equal(clanq_open_nic(&dev, nic), 0);
	assert_int_equal(clanq_ep_create(&dev, &ep, 16), 0);
	assert_int_equal(pipe(fds), 0);
	a.nic = peer_nic;
	a.pinger = ep.addr;
	a.addr_fd = fds[1];
	pid = itest_fork(ponger, &a);
	assert_true(pid > 0);
	close(fds[1]);
	assert_true(itest_read_full(fds[0], &peer, sizeof(peer)));
	close(fds[0]);
	assert_int_equal(peer.node, peer_nic);
	assert_false(itest_addr_eq(peer, ep.addr));

	for (i = 0; i < PINGPONG_ROUNDS; i++) {
		assert_int_equal(itest_send(&ep, peer, TYPE_PING, TAG_PING, i),
				 0);
		assert_int_equal(itest_recv(&ep, &m, ITEST_RECV_TIMEOUT), 0);
		why = itest_check(&m, peer, TYPE_PONG, TAG_PONG, i);
		if (why)
			fail_msg("pong %u: %s", i, why);
	}
	status = itest_wait(pid, ITEST_RECV_TIMEOUT);
	assert_true(itest_status_ok(status, "ponger"));
	assert_true(itest_quiet(&ep));
	assert_int_equal(itest_ctr(&ep.counters->oob_sent), PINGPONG_ROUNDS);
	assert_int_equal(itest_ctr(&ep.counters->oob_delivered),
			 PINGPONG_ROUNDS);
	assert_int_equal(clanq_ep_dropped(&ep), 0);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

static void two_processes_on_one_node_ping_pong_in_order_with_stamped_sources(void **state)
{
	(void)state;
	ping_pong(0, 0);
}

static void two_processes_on_two_nodes_ping_pong_in_order_with_stamped_sources(void **state)
{
	(void)state;
	ping_pong(0, 1);
}

/*
 * A full queue: the first slots-1 messages stay, the rest are counted.
 */

static void a_full_queue_keeps_the_oldest_messages_and_counts_each_drop(void **state)
{
	struct clanq_oob_msg m;
	struct pair p;
	uint32_t i;

	(void)state;
	pair_open(&p, 0, 1, 8);
	assert_int_equal(p.rx.oob.mask + 1, 8);

	for (i = 0; i < 20; i++)
		send_seq(&p.tx, p.rx.addr, i);	/* the sender is not told */
	assert_true(itest_wait_arrivals(&p.rx, 20));
	assert_int_equal(itest_ctr(&p.rx.counters->oob_delivered), 7);
	assert_int_equal(itest_ctr(&p.rx.counters->oob_dropped), 13);
	assert_int_equal(clanq_ep_dropped(&p.rx), 13);
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 20);
	for (i = 0; i < 7; i++)
		expect_msg(&p.rx, p.tx.addr, i);
	assert_int_equal(clanq_oob_recv(&p.rx, &m), -EAGAIN);

	/* drained: room for exactly 7 again */
	for (i = 20; i < 28; i++)
		send_seq(&p.tx, p.rx.addr, i);
	assert_true(itest_wait_arrivals(&p.rx, 28));
	assert_int_equal(itest_ctr(&p.rx.counters->oob_delivered), 14);
	assert_int_equal(clanq_ep_dropped(&p.rx), 14);
	for (i = 20; i < 27; i++)
		expect_msg(&p.rx, p.tx.addr, i);
	assert_int_equal(clanq_oob_recv(&p.rx, &m), -EAGAIN);
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 28);
	pair_close(&p);
}

/*
 * The source address.
 */

static void the_source_is_stamped_by_the_driver_and_cannot_be_forged(void **state)
{
	struct clanq_dev other_dev;
	struct clanq_oob_msg fake, m;
	struct clanq_ep other, forged;
	struct clanq_ioc_oob_send s;
	struct pair p;

	(void)state;
	pair_open(&p, 0, 1, 16);
	/* another context on the sender's node: ids there are distinct */
	assert_int_equal(clanq_open_nic(&other_dev, 0), 0);
	assert_int_equal(clanq_ep_create(&other_dev, &other, 0), 0);
	assert_int_not_equal(other.addr.id, p.tx.addr.id);

	/* a payload dressed up as a message from "other" is just bytes */
	memset(&fake, 0x5a, sizeof(fake));
	fake.type = ITEST_TYPE;
	fake.len = CLANQ_OOB_PAYLOAD;
	fake.src = other.addr;
	assert_int_equal(clanq_oob_send(&p.tx, p.rx.addr, ITEST_TYPE, &fake,
					CLANQ_OOB_PAYLOAD), 0);
	assert_int_equal(itest_recv(&p.rx, &m, ITEST_RECV_TIMEOUT), 0);
	assert_true(itest_addr_eq(m.src, p.tx.addr));
	assert_int_equal(m.type, ITEST_TYPE);
	assert_int_equal(m.len, CLANQ_OOB_PAYLOAD);
	assert_memory_equal(m.payload, &fake, CLANQ_OOB_PAYLOAD);

	/* sending in the name of another context's endpoint: ENOENT */
	forged = p.tx;
	forged.addr = other.addr;
	assert_int_equal(clanq_oob_send(&forged, p.rx.addr, ITEST_TYPE, "x", 1),
			 -ENOENT);
	assert_int_equal(raw_send(p.tx_dev.fd, other.addr.id, p.rx.addr),
			 ENOENT);
	assert_true(itest_quiet(&p.rx));
	assert_int_equal(itest_ctr(&other.counters->oob_sent), 0);
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 1);

	/* the real owner sends under its own address */
	send_seq(&other, p.rx.addr, 1);
	expect_msg(&p.rx, other.addr, 1);

	/* and a raw send from the sender's own id is stamped with it */
	memset(&s, 0, sizeof(s));
	s.ep = p.tx.addr.id;
	s.dst = p.rx.addr;
	s.type = ITEST_TYPE;
	s.len = 0;
	assert_int_equal(itest_ioctl_err(p.tx_dev.fd, CLANQ_IOC_OOB_SEND, &s),
			 0);
	assert_int_equal(itest_recv(&p.rx, &m, ITEST_RECV_TIMEOUT), 0);
	assert_true(itest_addr_eq(m.src, p.tx.addr));
	assert_int_equal(m.len, 0);

	assert_int_equal(clanq_ep_destroy(&other), 0);
	assert_int_equal(clanq_close(&other_dev), 0);
	pair_close(&p);
}

/*
 * What a sender is told: an unknown node, yes; an unknown endpoint, no.
 */

static void a_send_to_an_unknown_node_is_ehostunreach(void **state)
{
	static const uint32_t nodes[] = {
		2, 3, 0x7fffffffu, CLANQ_NODE_INVALID,
	};
	struct clanq_addr dst;
	struct pair p;
	unsigned int i;

	(void)state;
	pair_open(&p, 0, 1, 16);
	assert_int_equal(p.tx_dev.nr_nics, 2);
	for (i = 0; i < ARRAY_SIZE(nodes); i++) {
		dst.node = nodes[i];
		dst.id = p.rx.addr.id;
		assert_int_equal(itest_send(&p.tx, dst, ITEST_TYPE, TAG, i),
				 -EHOSTUNREACH);
		assert_int_equal(raw_send(p.tx_dev.fd, p.tx.addr.id, dst),
				 EHOSTUNREACH);
	}
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 0);
	assert_true(itest_quiet(&p.rx));
	pair_close(&p);
}

static void a_send_to_an_unknown_endpoint_succeeds_and_comes_back_unreachable(void **state)
{
	static const uint32_t ids[] = { 0, 0x7fffffffu, 0xfffffffeu, 0xffffffffu };
	struct clanq_dev dev0;
	struct clanq_ep rx0;
	struct clanq_addr dst;
	struct pair p;
	unsigned int node, i;

	(void)state;
	pair_open(&p, 0, 1, 16);		/* p.rx lives on node 1 */
	assert_int_equal(clanq_open_nic(&dev0, 0), 0);
	assert_int_equal(clanq_ep_create(&dev0, &rx0, 16), 0);
	for (node = 0; node < 2; node++) {
		for (i = 0; i < ARRAY_SIZE(ids); i++) {
			dst.node = node;
			dst.id = ids[i];
			send_seq(&p.tx, dst, i);
		}
	}
	assert_true(itest_quiet(&p.rx));
	assert_true(itest_quiet(&rx0));
	/* each comes back as a notice, in order, and nothing else */
	for (node = 0; node < 2; node++) {
		for (i = 0; i < ARRAY_SIZE(ids); i++) {
			dst.node = node;
			dst.id = ids[i];
			expect_unreachable(&p.tx, dst, i);
		}
	}
	assert_true(itest_quiet(&p.tx));
	assert_int_equal(itest_ctr(&p.rx.counters->oob_delivered), 0);
	assert_int_equal(itest_ctr(&rx0.counters->oob_delivered), 0);

	/* both NICs still deliver */
	send_seq(&p.tx, p.rx.addr, 100);
	expect_msg(&p.rx, p.tx.addr, 100);
	send_seq(&p.tx, rx0.addr, 101);
	expect_msg(&rx0, p.tx.addr, 101);

	assert_int_equal(clanq_ep_destroy(&rx0), 0);
	assert_int_equal(clanq_close(&dev0), 0);
	pair_close(&p);
}

static void a_payload_longer_than_48_bytes_is_emsgsize(void **state)
{
	static const size_t bad[] = { CLANQ_OOB_PAYLOAD + 1, 64, 1024 };
	static const uint32_t raw_bad[] = { CLANQ_OOB_PAYLOAD + 1, 4096, 0xffffffffu };
	struct clanq_ioc_oob_send s;
	struct clanq_oob_msg m;
	uint8_t buf[1024];
	struct pair p;
	unsigned int i;

	(void)state;
	pair_open(&p, 0, 1, 16);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(clanq_oob_send(&p.tx, p.rx.addr, ITEST_TYPE,
						buf, bad[i]), -EMSGSIZE);
	for (i = 0; i < ARRAY_SIZE(raw_bad); i++) {
		memset(&s, 0, sizeof(s));
		s.ep = p.tx.addr.id;
		s.dst = p.rx.addr;
		s.type = ITEST_TYPE;
		s.len = raw_bad[i];
		assert_int_equal(itest_ioctl_err(p.tx_dev.fd, CLANQ_IOC_OOB_SEND,
						 &s), EMSGSIZE);
	}
	assert_true(itest_quiet(&p.rx));
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 0);

	/* the limits themselves: 48 and 0 bytes arrive as sent */
	assert_int_equal(clanq_oob_send(&p.tx, p.rx.addr, ITEST_TYPE, buf,
					CLANQ_OOB_PAYLOAD), 0);
	assert_int_equal(clanq_oob_send(&p.tx, p.rx.addr, ITEST_TYPE + 1, buf,
					0), 0);
	assert_int_equal(itest_recv(&p.rx, &m, ITEST_RECV_TIMEOUT), 0);
	assert_int_equal(m.type, ITEST_TYPE);
	assert_int_equal(m.len, CLANQ_OOB_PAYLOAD);
	assert_memory_equal(m.payload, buf, CLANQ_OOB_PAYLOAD);
	assert_int_equal(itest_recv(&p.rx, &m, ITEST_RECV_TIMEOUT), 0);
	assert_int_equal(m.type, ITEST_TYPE + 1);
	assert_int_equal(m.len, 0);
	assert_true(itest_addr_eq(m.src, p.tx.addr));
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 2);
	pair_close(&p);
}

/*
 * Malformed requests.
 */

static void ep_create_refuses_flags_reserved_fields_and_bad_slot_counts(void **state)
{
	static const uint32_t bad_slots[] = {
		1, 3, 6, 12, 4095, 4097, 8192, 1u << 20, 0x80000000u,
		0xffffffffu,
	};
	static const uint32_t good_slots[] = { 0, 2, 8, 4096 };
	struct clanq_ioc_ep_create c;
	struct clanq_dev dev;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	for (i = 0; i < ARRAY_SIZE(c.reserved); i++) {
		memset(&c, 0, sizeof(c));
		c.oob_slots = 8;
		c.reserved[i] = 1ull << (i * 19 % 64);
		assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EP_CREATE, &c),
				 EINVAL);
	}
	/* the RDMA queues' lengths are checked like the OOB queue's */
	for (i = 0; i < ARRAY_SIZE(bad_slots); i++) {
		if (!bad_slots[i])
			continue;	/* 0 means the default */
		memset(&c, 0, sizeof(c));
		c.oob_slots = 8;
		c.rq_slots = bad_slots[i];
		assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EP_CREATE, &c),
				 EINVAL);
		memset(&c, 0, sizeof(c));
		c.oob_slots = 8;
		c.cq_slots = bad_slots[i];
		assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EP_CREATE, &c),
				 EINVAL);
	}
	memset(&c, 0, sizeof(c));
	c.oob_slots = 8;
	c.flags = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EP_CREATE, &c),
			 EINVAL);
	c.flags = 0x80000000u;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EP_CREATE, &c),
			 EINVAL);
	for (i = 0; i < ARRAY_SIZE(bad_slots); i++)
		assert_int_equal(raw_ep_create(dev.fd, bad_slots[i], &c), EINVAL);

	/* what is valid is accepted, and described */
	for (i = 0; i < ARRAY_SIZE(good_slots); i++) {
		assert_int_equal(raw_ep_create(dev.fd, good_slots[i], &c), 0);
		assert_int_equal(c.addr.node, 1);
		assert_true(c.addr.id >= 1);
		assert_int_equal(c.oob.nr_slots,
				 good_slots[i] ? good_slots[i] : DEFAULT_SLOTS);
		assert_int_equal(c.oob.slot_size % 8, 0);
		assert_true(c.oob.slot_size >= sizeof(struct clanq_oob_msg));
		assert_true(c.mmap_size >= (uint64_t)c.oob.slots +
					   (uint64_t)c.oob.nr_slots * c.oob.slot_size);
		assert_true(c.counters + sizeof(struct clanq_ep_counters) <=
			    c.mmap_size);
		assert_int_equal(raw_ep_destroy(dev.fd, c.addr.id), 0);
	}

	/* the library passes the refusal on */
	{
		struct clanq_ep ep;

		assert_int_equal(clanq_ep_create(&dev, &ep, 3), -EINVAL);
		assert_int_equal(clanq_ep_create(&dev, &ep, 1), -EINVAL);
	}
	assert_int_equal(clanq_close(&dev), 0);
}

static void ep_destroy_refuses_flags_reserved_fields_and_ids_it_does_not_own(void **state)
{
	struct clanq_ioc_ep_create x, y;
	struct clanq_ioc_ep_destroy d;
	struct clanq_dev a, b;
	unsigned int i;

	(void)state;
	/* two contexts of one node, in one process */
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 0), 0);
	assert_int_equal(raw_ep_create(a.fd, 8, &x), 0);
	assert_int_equal(raw_ep_create(b.fd, 8, &y), 0);

	memset(&d, 0, sizeof(d));
	d.id = x.addr.id;
	d.flags = 1;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_EP_DESTROY, &d), EINVAL);
	d.flags = 0x80000000u;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_EP_DESTROY, &d), EINVAL);
	for (i = 0; i < ARRAY_SIZE(d.reserved); i++) {
		memset(&d, 0, sizeof(d));
		d.id = x.addr.id;
		d.reserved[i] = 1ull << (63 - i);
		assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_EP_DESTROY, &d),
				 EINVAL);
	}
	assert_int_equal(raw_ep_destroy(a.fd, 0), ENOENT);
	assert_int_equal(raw_ep_destroy(a.fd, 0xffffffffu), ENOENT);
	assert_int_equal(raw_ep_destroy(a.fd, y.addr.id), ENOENT);
	assert_int_equal(raw_ep_destroy(b.fd, x.addr.id), ENOENT);

	/* both survived all that: each can still send to the other */
	assert_int_equal(raw_send(a.fd, x.addr.id, y.addr), 0);
	assert_int_equal(raw_send(b.fd, y.addr.id, x.addr), 0);

	assert_int_equal(raw_ep_destroy(a.fd, x.addr.id), 0);
	assert_int_equal(raw_ep_destroy(a.fd, x.addr.id), ENOENT);
	assert_int_equal(raw_send(a.fd, x.addr.id, y.addr), ENOENT);
	assert_int_equal(raw_ep_destroy(b.fd, y.addr.id), 0);
	assert_int_equal(clanq_close(&a), 0);
	assert_int_equal(clanq_close(&b), 0);
}

static void oob_send_refuses_flags_reserved_fields_and_ids_it_does_not_own(void **state)
{
	struct clanq_dev other_dev;
	struct clanq_ep other;
	struct clanq_ioc_oob_send s, good;
	struct clanq_oob_msg m;
	struct pair p;
	unsigned int i;

	(void)state;
	pair_open(&p, 0, 1, 16);
	assert_int_equal(clanq_open_nic(&other_dev, 0), 0);
	assert_int_equal(clanq_ep_create(&other_dev, &other, 0), 0);

	memset(&good, 0, sizeof(good));
	good.ep = p.tx.addr.id;
	good.dst = p.rx.addr;
	good.type = ITEST_TYPE;
	good.len = 8;

	s = good;
	s.flags = 1;
	assert_int_equal(itest_ioctl_err(p.tx_dev.fd, CLANQ_IOC_OOB_SEND, &s),
			 EINVAL);
	s.flags = 0x80000000u;
	assert_int_equal(itest_ioctl_err(p.tx_dev.fd, CLANQ_IOC_OOB_SEND, &s),
			 EINVAL);
	for (i = 0; i < ARRAY_SIZE(s.reserved); i++) {
		s = good;
		s.reserved[i] = 1ull << (i * 31 % 64);
		assert_int_equal(itest_ioctl_err(p.tx_dev.fd,
						 CLANQ_IOC_OOB_SEND, &s), EINVAL);
	}
	assert_int_equal(raw_send(p.tx_dev.fd, 0, p.rx.addr), ENOENT);
	assert_int_equal(raw_send(p.tx_dev.fd, 0xffffffffu, p.rx.addr), ENOENT);
	assert_int_equal(raw_send(p.tx_dev.fd, other.addr.id, p.rx.addr),
			 ENOENT);
	assert_int_equal(raw_send(other_dev.fd, p.tx.addr.id, p.rx.addr),
			 ENOENT);
	assert_true(itest_quiet(&p.rx));
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 0);
	assert_int_equal(itest_ctr(&other.counters->oob_sent), 0);

	/* the well-formed one goes through */
	s = good;
	assert_int_equal(itest_ioctl_err(p.tx_dev.fd, CLANQ_IOC_OOB_SEND, &s),
			 0);
	assert_int_equal(itest_recv(&p.rx, &m, ITEST_RECV_TIMEOUT), 0);
	assert_true(itest_addr_eq(m.src, p.tx.addr));
	assert_int_equal(m.len, 8);
	assert_true(itest_quiet(&p.rx));
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 1);

	assert_int_equal(clanq_ep_destroy(&other), 0);
	assert_int_equal(clanq_close(&other_dev), 0);
	pair_close(&p);
}

static void a_segment_maps_only_whole_shared_and_at_its_own_offset(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct clanq_ioc_ep_create c;
	struct clanq_dev a, b;
	size_t size;
	uint64_t off;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 0), 0);	/* has no endpoint */
	assert_int_equal(raw_ep_create(a.fd, 64, &c), 0);
	off = c.mmap_offset;
	size = (size_t)c.mmap_size;
	assert_int_equal(off % page, 0);
	assert_int_equal(size % page, 0);
	/* 64 slots of 64 bytes plus the index words: more than a page */
	assert_true(size > page);

	assert_int_equal(mmap_err(a.fd, off, size - page, MAP_SHARED), EINVAL);
	assert_int_equal(mmap_err(a.fd, off, size + page, MAP_SHARED), EINVAL);
	assert_int_equal(mmap_err(a.fd, off, size, MAP_PRIVATE), EINVAL);
	assert_int_equal(mmap_err(a.fd, off + 0x10000000000ull, size,
				  MAP_SHARED), EINVAL);
	/* the offset names nothing in another context */
	assert_int_equal(mmap_err(b.fd, off, size, MAP_SHARED), EINVAL);

	/* exactly right */
	assert_int_equal(mmap_err(a.fd, off, size, MAP_SHARED), 0);

	/* and nothing once the endpoint is gone */
	assert_int_equal(raw_ep_destroy(a.fd, c.addr.id), 0);
	assert_int_equal(mmap_err(a.fd, off, size, MAP_SHARED), EINVAL);
	assert_int_equal(clanq_close(&a), 0);
	assert_int_equal(clanq_close(&b), 0);
}

/*
 * A hostile owner scribbling on its own segment.
 */

static void a_scribbled_producer_index_and_slots_are_overwritten_by_new_deliveries(void **state)
{
	struct clanq_oob_msg m;
	struct pair p;
	uint32_t i, nr;

	(void)state;
	pair_open(&p, 0, 1, 16);
	nr = p.rx.oob.mask + 1;
	for (i = 0; i < 3; i++)		/* move the indices off zero */
		send_seq(&p.tx, p.rx.addr, i);
	for (i = 0; i < 3; i++)
		expect_msg(&p.rx, p.tx.addr, i);

	/* the driver never reads its own index back: it just rewrites it */
	itest_store_u32(p.rx.oob.prod, 0xdeadbeefu);
	assert_int_equal(clanq_oob_recv(&p.rx, &m), -EAGAIN);
	send_seq(&p.tx, p.rx.addr, 3);
	expect_msg(&p.rx, p.tx.addr, 3);
	assert_int_equal(clanq_oob_recv(&p.rx, &m), -EAGAIN);
	assert_int_equal(__atomic_load_n(p.rx.oob.prod, __ATOMIC_ACQUIRE),
			 p.rx.oob.own);

	/* nor reads the slots: garbage there is simply overwritten */
	memset(p.rx.oob.slots, 0xa5, (size_t)nr * p.rx.oob.slot_size);
	for (i = 4; i < 4 + nr - 1; i++)
		send_seq(&p.tx, p.rx.addr, i);
	for (i = 4; i < 4 + nr - 1; i++)
		expect_msg(&p.rx, p.tx.addr, i);
	assert_int_equal(clanq_oob_recv(&p.rx, &m), -EAGAIN);
	assert_int_equal(clanq_ep_dropped(&p.rx), 0);
	pair_close(&p);
}

static void a_garbage_consumer_index_makes_the_driver_drop_and_nothing_worse(void **state)
{
	struct clanq_oob_msg m;
	struct pair p;
	uint64_t delivered, dropped;
	uint32_t i, nr;

	(void)state;
	pair_open(&p, 0, 1, 16);
	nr = p.rx.oob.mask + 1;

	/* out of range: the driver takes it as "full" once it looks */
	itest_store_u32(p.rx.oob.cons, 0xffffffffu);
	for (i = 0; i < 40; i++)
		send_seq(&p.tx, p.rx.addr, i);
	assert_true(itest_wait_arrivals(&p.rx, 40));
	delivered = itest_ctr(&p.rx.counters->oob_delivered);
	dropped = itest_ctr(&p.rx.counters->oob_dropped);
	assert_int_equal(delivered + dropped, 40);
	assert_true(delivered <= nr - 1);
	assert_int_equal(itest_ctr(&p.tx.counters->oob_sent), 40);

	/* restored: exactly what was accepted is there, oldest first */
	itest_store_u32(p.rx.oob.cons, p.rx.oob.own);
	for (i = 0; i < delivered; i++)
		expect_msg(&p.rx, p.tx.addr, i);
	assert_int_equal(clanq_oob_recv(&p.rx, &m), -EAGAIN);

	/* and the queue holds nr - 1 again, without a drop */
	for (i = 40; i < 40 + nr - 1; i++)
		send_seq(&p.tx, p.rx.addr, i);
	assert_true(itest_wait_arrivals(&p.rx, 40 + nr - 1));
	assert_int_equal(clanq_ep_dropped(&p.rx), dropped);
	for (i = 40; i < 40 + nr - 1; i++)
		expect_msg(&p.rx, p.tx.addr, i);
	assert_int_equal(clanq_oob_recv(&p.rx, &m), -EAGAIN);
	pair_close(&p);
}

static void a_lying_consumer_index_garbles_only_its_own_queue(void **state)
{
	struct clanq_oob_msg m;
	const char *why;
	struct pair p;
	uint32_t i, n, nr;

	(void)state;
	pair_open(&p, 0, 1, 16);
	nr = p.rx.oob.mask + 1;
	for (i = 0; i < 5; i++)
		send_seq(&p.tx, p.rx.addr, i);
	assert_true(itest_wait_arrivals(&p.rx, 5));

	/* claim to have consumed ten while five are queued */
	itest_store_u32(p.rx.oob.cons, (p.rx.oob.own + 10) & p.rx.oob.mask);
	for (i = 5; i < 5 + 3 * nr; i++)
		send_seq(&p.tx, p.rx.addr, i);
	assert_true(itest_wait_arrivals(&p.rx, 5 + 3 * nr));
	assert_int_equal(itest_ctr(&p.rx.counters->oob_delivered) +
			 itest_ctr(&p.rx.counters->oob_dropped), 5 + 3 * nr);

	/*
	 * Told the truth again: whatever is read is a whole message the
	 * driver wrote (order lost, that is the liar's problem), and no
	 * more than the queue can hold.
	 */
	itest_store_u32(p.rx.oob.cons, p.rx.oob.own);
	for (n = 0; clanq_oob_recv(&p.rx, &m) == 0; n++) {
		assert_true(n < nr - 1);
		why = itest_check(&m, p.tx.addr, ITEST_TYPE, TAG, itest_seq(&m));
		if (why)
			fail_msg("slot %u after the lie: %s", n, why);
		assert_true(itest_seq(&m) < 5 + 3 * nr);
	}

	/* in step again */
	for (i = 1000; i < 1003; i++)
		send_seq(&p.tx, p.rx.addr, i);
	for (i = 1000; i < 1003; i++)
		expect_msg(&p.rx, p.tx.addr, i);
	assert_true(itest_quiet(&p.rx));
	pair_close(&p);
}

static void scribbled_counters_are_rewritten_from_the_drivers_own_counts(void **state)
{
	struct clanq_ep_counters *rxc, *txc;
	struct pair p;
	uint32_t i;

	(void)state;
	pair_open(&p, 0, 1, 16);
	for (i = 0; i < 3; i++)
		send_seq(&p.tx, p.rx.addr, i);
	for (i = 0; i < 3; i++)
		expect_msg(&p.rx, p.tx.addr, i);

	/* the counters live in the writable segment; the driver never reads them */
	rxc = (struct clanq_ep_counters *)(uintptr_t)p.rx.counters;
	txc = (struct clanq_ep_counters *)(uintptr_t)p.tx.counters;
	memset(rxc, 0xff, sizeof(*rxc));
	memset(txc, 0xff, sizeof(*txc));

	send_seq(&p.tx, p.rx.addr, 3);
	expect_msg(&p.rx, p.tx.addr, 3);
	assert_true(itest_wait_ctr(&rxc->oob_delivered, 4));
	assert_true(itest_wait_ctr(&txc->oob_sent, 4));

	/* and nothing else changed */
	send_seq(&p.tx, p.rx.addr, 4);
	expect_msg(&p.rx, p.tx.addr, 4);
	assert_true(itest_wait_ctr(&rxc->oob_delivered, 5));
	assert_true(itest_wait_ctr(&txc->oob_sent, 5));
	pair_close(&p);
}

/*
 * Endpoint lifetime.
 */

static void a_destroyed_endpoint_receives_nothing_and_its_id_is_refused(void **state)
{
	struct clanq_ep gone;
	struct clanq_addr gone_addr;
	struct pair p;
	uint32_t i;

	(void)state;
	pair_open(&p, 0, 1, 16);
	assert_int_equal(clanq_ep_create(&p.rx_dev, &gone, 16), 0);
	gone_addr = gone.addr;
	assert_false(itest_addr_eq(gone_addr, p.rx.addr));

	/* destroyed with a message still queued on it */
	send_seq(&p.tx, gone_addr, 0);
	assert_true(itest_wait_arrivals(&gone, 1));
	assert_int_equal(clanq_ep_destroy(&gone), 0);

	for (i = 1; i <= 3; i++)
		send_seq(&p.tx, gone_addr, i);	/* the send succeeds... */
	assert_true(itest_quiet(&p.rx));
	/* ...and the network says "unreachable", as ICMP would */
	for (i = 1; i <= 3; i++)
		expect_unreachable(&p.tx, gone_addr, i);
	assert_true(itest_quiet(&p.tx));

	assert_int_equal(raw_send(p.rx_dev.fd, gone_addr.id, p.tx.addr), ENOENT);
	assert_int_equal(raw_ep_destroy(p.rx_dev.fd, gone_addr.id), ENOENT);

	/* the receiving NIC is fine */
	send_seq(&p.tx, p.rx.addr, 4);
	expect_msg(&p.rx, p.tx.addr, 4);
	pair_close(&p);
}

static void many_endpoints_in_one_context_get_distinct_ids_and_each_its_own_messages(void **state)
{
	enum { N = 256 };
	static struct clanq_ep eps[N];
	struct clanq_dev dev, tx_dev;
	struct clanq_ep tx;
	unsigned int i, j, round;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	assert_int_equal(clanq_open_nic(&tx_dev, 0), 0);
	assert_int_equal(clanq_ep_create(&tx_dev, &tx, 0), 0);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < N; i++) {
			assert_int_equal(clanq_ep_create(&dev, &eps[i], 0), 0);
			assert_int_equal(eps[i].addr.node, 1);
			assert_true(eps[i].addr.id >= 1);
			assert_int_equal(eps[i].oob.mask + 1, DEFAULT_SLOTS);
			for (j = 0; j < i; j++)
				assert_int_not_equal(eps[i].addr.id,
						     eps[j].addr.id);
		}
		for (i = 0; i < N; i++)
			send_seq(&tx, eps[i].addr, i);
		for (i = 0; i < N; i++) {
			expect_msg(&eps[i], tx.addr, i);
			assert_int_equal(itest_ctr(&eps[i].counters->oob_delivered),
					 1);
		}
		/* all gone, and (second round) all back again */
		for (i = 0; i < N; i++)
			assert_int_equal(clanq_ep_destroy(&eps[i]), 0);
	}
	assert_int_equal(clanq_ep_destroy(&tx), 0);
	assert_int_equal(clanq_close(&tx_dev), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

static void the_nics_counters_in_debugfs_count_sends_deliveries_and_drops(void **state)
{
	long long sent1, delivered0, dropped0, no_ep0;
	struct clanq_dev rx_dev, tx_dev;
	struct clanq_ep rx, tx;
	struct clanq_addr nowhere;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&rx_dev, 0), 0);
	assert_int_equal(clanq_open_nic(&tx_dev, 1), 0);
	assert_int_equal(clanq_ep_create(&rx_dev, &rx, 4), 0);	/* holds 3 */
	assert_int_equal(clanq_ep_create(&tx_dev, &tx, 0), 0);
	sent1 = itest_nic_stat(1, "oob_sent");
	delivered0 = itest_nic_stat(0, "oob_delivered");
	dropped0 = itest_nic_stat(0, "oob_dropped");
	no_ep0 = itest_nic_stat(0, "oob_no_endpoint");
	assert_true(sent1 >= 0 && delivered0 >= 0 && dropped0 >= 0 && no_ep0 >= 0);

	for (i = 0; i < 5; i++)
		assert_int_equal(clanq_oob_send(&tx, rx.addr, CLANQ_OOB_TYPE_USER, &i,
						sizeof(i)), 0);
	nowhere.node = rx.addr.node;
	nowhere.id = 0x7ffffff0u;
	assert_int_equal(clanq_oob_send(&tx, nowhere, CLANQ_OOB_TYPE_USER, NULL, 0), 0);

	assert_int_equal(itest_nic_stat(1, "oob_sent"), sent1 + 6);
	assert_int_equal(itest_nic_stat(0, "oob_delivered"), delivered0 + 3);
	assert_int_equal(itest_nic_stat(0, "oob_dropped"), dropped0 + 2);
	assert_int_equal(itest_nic_stat(0, "oob_no_endpoint"), no_ep0 + 1);
	assert_true(itest_nic_stat(0, "endpoints") >= 1);
	assert_true(itest_nic_stat(0, "driver_entries") > 0);

	assert_int_equal(clanq_ep_destroy(&rx), 0);
	assert_int_equal(clanq_ep_destroy(&tx), 0);
	assert_int_equal(clanq_close(&rx_dev), 0);
	assert_int_equal(clanq_close(&tx_dev), 0);
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(two_processes_on_one_node_ping_pong_in_order_with_stamped_sources),
		T(two_processes_on_two_nodes_ping_pong_in_order_with_stamped_sources),
		T(a_full_queue_keeps_the_oldest_messages_and_counts_each_drop),
		T(the_source_is_stamped_by_the_driver_and_cannot_be_forged),
		T(a_send_to_an_unknown_node_is_ehostunreach),
		T(a_send_to_an_unknown_endpoint_succeeds_and_comes_back_unreachable),
		T(a_payload_longer_than_48_bytes_is_emsgsize),
		T(ep_create_refuses_flags_reserved_fields_and_bad_slot_counts),
		T(ep_destroy_refuses_flags_reserved_fields_and_ids_it_does_not_own),
		T(oob_send_refuses_flags_reserved_fields_and_ids_it_does_not_own),
		T(a_segment_maps_only_whole_shared_and_at_its_own_offset),
		T(a_scribbled_producer_index_and_slots_are_overwritten_by_new_deliveries),
		T(a_garbage_consumer_index_makes_the_driver_drop_and_nothing_worse),
		T(a_lying_consumer_index_garbles_only_its_own_queue),
		T(scribbled_counters_are_rewritten_from_the_drivers_own_counts),
		T(a_destroyed_endpoint_receives_nothing_and_its_id_is_refused),
		T(many_endpoints_in_one_context_get_distinct_ids_and_each_its_own_messages),
		T(the_nics_counters_in_debugfs_count_sends_deliveries_and_drops),
	};

	return cmocka_run_group_tests_name("oob", tests, NULL, NULL);
}
