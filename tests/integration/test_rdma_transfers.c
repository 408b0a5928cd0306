// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * RDMA and PIO transfers through the real driver, between processes,
 * within a node (both on /dev/clanq0) and across nodes (exporter on
 * /dev/clanq1):
 *
 *  - RDMA writes of 0 bytes to several MiB, at odd sizes and unaligned
 *    source and destination offsets, from allocated and registered
 *    regions into allocated and registered regions, land exactly where
 *    asked: the exporter compares its whole region after each one;
 *  - PIO through a mapped aperture does the same, and a read-only import
 *    cannot be made writable by any route;
 *  - eight endpoints in four processes posting at once get every
 *    completion exactly once, in order.
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
 * The exporter: a child process on a given NIC with three exported
 * regions, all filled with background:
 *	XR_ALLOC  allocated (driver memory), DST_SIZE
 *	XR_REG    registered, its own page-aligned anonymous memory, DST_SIZE
 *	XR_ODD    registered, ODD_SIZE bytes starting ODD_SHIFT into a page:
 *	          its pages hold other memory too, so it cannot be mapped
 * On CHECK it compares the whole region with what the parent says it
 * wrote, answers, and restores the background where the write went.
 */

enum { XR_ALLOC, XR_REG, XR_ODD, XR_N };

static const char *const xr_name[XR_N] = { "allocated", "registered", "odd" };

#define DST_SIZE	(4 * MiB + 16 * KiB)
#define ODD_SHIFT	100ull
#define ODD_SIZE	(2 * PAGE + 77)
#define ODD_MAP		(3 * PAGE)

/* the parent's apertures onto XR_ALLOC and XR_REG: odd start, 4 KiB guards */
#define AP_OFF		(PAGE + 3)
#define AP_LEN		(4 * MiB + 8 * KiB + 1)

enum { XC_CHECK = 1, XC_QUIT };

struct xcmd {
	uint32_t op;
	uint32_t reg;
	uint64_t off;		/* into the region */
	uint64_t len;
	uint64_t src_off;	/* the pattern's offset at off */
	uint64_t seed;
};

struct xrep {
	int32_t ok;
	uint32_t pad;
	uint64_t at;
	char why[64];
};

struct xp_region {
	struct clanq_addr addr;
	uint64_t key;
	uint64_t size;
};

struct xp_hello {
	struct xp_region r[XR_N];
};

struct xp_args {
	unsigned int nic;
	int cmd_fd;
	int rep_fd;
};

struct exporter {
	pid_t pid;
	int cmd_fd;		/* parent writes */
	int rep_fd;		/* parent reads */
	struct xp_hello h;
};

static void exporter_main(void *arg)
{
	struct xp_args *a = arg;
	struct clanq_region r[XR_N];
	struct xp_hello h;
	struct clanq_dev dev;
	struct xcmd c;
	struct xrep rep;
	uint8_t *regmem, *oddmem, *bgbuf;
	const char *why;
	unsigned int i;

	CHILD_CHECK_INT(clanq_open_nic(&dev, a->nic), 0);
	CHILD_CHECK_INT(clanq_region_alloc(&dev, &r[XR_ALLOC], DST_SIZE), 0);
	regmem = map_anon(DST_SIZE);
	oddmem = map_anon(ODD_MAP);
	bgbuf = map_anon(DST_SIZE);	/* the background, for memcmp */
	CHILD_CHECK(regmem && oddmem && bgbuf);
	bg_fill(bgbuf, 0, DST_SIZE);
	memset(oddmem, 0x11, ODD_MAP);	/* not background, not pattern */
	bg_fill(regmem, 0, DST_SIZE);
	bg_fill(oddmem + ODD_SHIFT, 0, ODD_SIZE);
	CHILD_CHECK_INT(clanq_region_register(&dev, &r[XR_REG], regmem,
					      DST_SIZE), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &r[XR_ODD],
					      oddmem + ODD_SHIFT, ODD_SIZE), 0);
	CHILD_CHECK(r[XR_REG].mem == regmem);
	bg_fill(r[XR_ALLOC].mem, 0, DST_SIZE);
	memset(&h, 0, sizeof(h));
	for (i = 0; i < XR_N; i++) {
		CHILD_CHECK_INT(clanq_region_export(&r[i], CLANQ_RIGHTS_ALL,
						    &h.r[i].key), 0);
		h.r[i].addr = r[i].addr;
		h.r[i].size = r[i].size;
		CHILD_CHECK_INT(r[i].addr.node, a->nic);
	}
	CHILD_CHECK(itest_write_full(a->rep_fd, &h, sizeof(h)));

	for (;;) {
		CHILD_CHECK(itest_read_full(a->cmd_fd, &c, sizeof(c)));
		if (c.op == XC_QUIT)
			break;
		CHILD_CHECK_INT(c.op, XC_CHECK);
		CHILD_CHECK(c.reg < XR_N);
		memset(&rep, 0, sizeof(rep));
		why = region_diff(r[c.reg].mem, bgbuf, r[c.reg].size, c.off,
				  c.len, c.seed, c.src_off, &rep.at);
		rep.ok = !why;
		if (why) {
			snprintf(rep.why, sizeof(rep.why), "%s", why);
		} else {
			/* restore the background for the next write */
			memcpy((uint8_t *)r[c.reg].mem + c.off, bgbuf + c.off,
			       c.len);
		}
		CHILD_CHECK(itest_write_full(a->rep_fd, &rep, sizeof(rep)));
	}
	/* the surroundings of the odd region were never written */
	for (i = 0; i < ODD_SHIFT; i++)
		CHILD_CHECK_INT(oddmem[i], 0x11);
	for (i = ODD_SHIFT + ODD_SIZE; i < ODD_MAP; i++)
		CHILD_CHECK_INT(oddmem[i], 0x11);
	for (i = 0; i < XR_N; i++)
		CHILD_CHECK_INT(clanq_region_free(&r[i]), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
	munmap(regmem, DST_SIZE);
	munmap(oddmem, ODD_MAP);
	munmap(bgbuf, DST_SIZE);
}

static void xp_start(struct exporter *x, unsigned int nic)
{
	struct xp_args a;
	int cmd[2], rep[2];

	assert_int_equal(pipe(cmd), 0);
	assert_int_equal(pipe(rep), 0);
	a.nic = nic;
	a.cmd_fd = cmd[0];
	a.rep_fd = rep[1];
	x->pid = itest_fork(exporter_main, &a);
	assert_true(x->pid > 0);
	close(cmd[0]);
	close(rep[1]);
	x->cmd_fd = cmd[1];
	x->rep_fd = rep[0];
	if (!itest_read_full(x->rep_fd, &x->h, sizeof(x->h))) {
		itest_status_ok(itest_wait(x->pid, ITEST_RECV_TIMEOUT),
				"exporter");
		fail_msg("the exporter did not start");
	}
}

/* The exporter confirms: region reg holds pattern (seed, src_off..) at
 * [off, off + len) and background everywhere else. */
static void xp_check(struct exporter *x, uint32_t reg, uint64_t off, uint64_t len,
		     uint64_t src_off, uint64_t seed)
{
	struct xcmd c = {
		.op = XC_CHECK, .reg = reg, .off = off, .len = len,
		.src_off = src_off, .seed = seed,
	};
	struct xrep rep;

	assert_true(itest_write_full(x->cmd_fd, &c, sizeof(c)));
	if (!itest_read_full(x->rep_fd, &rep, sizeof(rep))) {
		itest_status_ok(itest_wait(x->pid, ITEST_RECV_TIMEOUT),
				"exporter");
		fail_msg("the exporter died");
	}
	if (!rep.ok)
		fail_msg("%s region (node %u), write of %llu bytes at %llu: "
			 "%s, at region offset %llu",
			 xr_name[reg], x->h.r[reg].addr.node,
			 (unsigned long long)len, (unsigned long long)off,
			 rep.why, (unsigned long long)rep.at);
}

static void xp_stop(struct exporter *x)
{
	struct xcmd c = { .op = XC_QUIT };

	assert_true(itest_write_full(x->cmd_fd, &c, sizeof(c)));
	close(x->cmd_fd);
	close(x->rep_fd);
	assert_true(itest_status_ok(itest_wait(x->pid, ITEST_RECV_TIMEOUT),
				    "exporter"));
}

/*
 * The importer: this process, on /dev/clanq0, with two source regions
 * (allocated, registered) and apertures onto the exporter's regions.
 */

enum { SRC_ALLOC, SRC_REG, SRC_N };

#define SRC_SIZE	(4 * MiB + 16 * KiB)

struct importer {
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_region src[SRC_N];
	uint8_t *src_mem[SRC_N];
	uint8_t *reg_mem;
	struct clanq_ap ap[XR_N];
	uint64_t ap_off[XR_N];	/* where each aperture starts in its region */
	uint64_t cookie;
};

static void imp_open(struct importer *im, const struct exporter *x,
		     uint32_t rights)
{
	struct clanq_ep_attr attr = { .rq_slots = 64, .cq_slots = 64 };
	unsigned int i;

	memset(im, 0, sizeof(*im));
	assert_int_equal(clanq_open_nic(&im->dev, 0), 0);
	assert_int_equal(clanq_ep_create_attr(&im->dev, &im->ep, &attr), 0);
	assert_int_equal(clanq_region_alloc(&im->dev, &im->src[SRC_ALLOC],
					    SRC_SIZE), 0);
	im->reg_mem = map_anon(SRC_SIZE);
	assert_non_null(im->reg_mem);
	assert_int_equal(clanq_region_register(&im->dev, &im->src[SRC_REG],
					       im->reg_mem, SRC_SIZE), 0);
	im->src_mem[SRC_ALLOC] = im->src[SRC_ALLOC].mem;
	im->src_mem[SRC_REG] = im->reg_mem;
	for (i = 0; i < XR_N; i++) {
		uint64_t off = i == XR_ODD ? 0 : AP_OFF;
		uint64_t len = i == XR_ODD ? ODD_SIZE : AP_LEN;

		assert_int_equal(clanq_ap_import(&im->dev, &im->ap[i],
						 x->h.r[i].addr, x->h.r[i].key,
						 off, len, rights), 0);
		assert_int_equal(im->ap[i].len, len);
		im->ap_off[i] = off;
	}
	im->cookie = 0xc0de000000000000ull | (uint64_t)x->h.r[0].addr.node << 32;
}

static void imp_close(struct importer *im)
{
	unsigned int i;

	for (i = 0; i < XR_N; i++)
		assert_int_equal(clanq_ap_close(&im->ap[i]), 0);
	for (i = 0; i < SRC_N; i++)
		assert_int_equal(clanq_region_free(&im->src[i]), 0);
	assert_int_equal(clanq_ep_destroy(&im->ep), 0);
	assert_int_equal(clanq_close(&im->dev), 0);
	munmap(im->reg_mem, SRC_SIZE);
}

/*
 * One RDMA write of len bytes from source s at src_off to aperture d at
 * dst_off, checked by the exporter. Return: nanoseconds from post to
 * completion.
 */
static int64_t rdma_checked(struct importer *im, struct exporter *x,
			    unsigned int s, unsigned int d, uint64_t src_off,
			    uint64_t dst_off, uint64_t len, uint64_t seed)
{
	struct clanq_rdma_req req;
	uint64_t cookie = im->cookie++;
	int64_t t0, dt;

	pat_fill(im->src_mem[s] + src_off, seed, src_off, len, 0);
	req = itest_rdma_req(im->src[s].addr.id, im->ap[d].id, src_off, dst_off, len,
		    cookie, REQ_DONE);
	t0 = clanq_now_ns();
	assert_int_equal(clanq_rdma_post(&im->ep, &req), 0);
	expect_comp(&im->ep, cookie, 0, len);
	dt = clanq_now_ns() - t0;
	xp_check(x, d, im->ap_off[d] + dst_off, len, src_off, seed);
	return dt;
}

struct xfer {
	uint64_t len, src_off, dst_off;
};

/* sizes from 0 to a whole aperture, offsets odd, at both ends */
static const struct xfer xfers[] = {
	{ 0, 3, 5 },
	{ 1, 0, 0 },
	{ 1, 4095, AP_LEN - 1 },		/* the aperture's last byte */
	{ 3, 1, 4094 },
	{ 8, 7, 9 },
	{ 4095, 4097, 1 },
	{ 4096, 0, 4096 },
	{ 4097, 4095, AP_LEN - 4097 },		/* ends at the aperture's end */
	{ 65535, 3, 5 },
	{ 65536, 65536, 12289 },
	{ 65537, 1, 65535 },			/* past 64 KiB: split */
	{ 1 * MiB + 13, 12345, 777 },
	{ 4 * MiB, 5, 4093 },
	{ AP_LEN, 7, 0 },			/* the whole aperture */
};

/* A message of many requests: only its last is signaled. */
#define MSG_PARTS	37

/* Return: the bytes it wrote. */
static uint64_t rdma_message(struct importer *im, struct exporter *x,
			  unsigned int s, unsigned int d, uint64_t *rnd)
{
	uint64_t src_off = 333, dst_off = 4099, total = 0, len = 0, seed;
	uint64_t cookie0 = im->cookie;
	struct clanq_rdma_req req;
	unsigned int i;

	seed = itest_rand(rnd);
	for (i = 0; i < MSG_PARTS; i++) {
		len = 1 + itest_rand(rnd) % (48 * KiB);
		pat_fill(im->src_mem[s] + src_off + total, seed,
			 src_off + total, len, 0);
		req = itest_rdma_req(im->src[s].addr.id, im->ap[d].id, src_off + total,
			    dst_off + total, len, im->cookie++,
			    i == MSG_PARTS - 1 ? REQ_DONE : 0);
		assert_int_equal(clanq_rdma_post(&im->ep, &req), 0);
		total += len;
	}
	/* one completion, for the last part: an unsignaled one would come first */
	expect_comp(&im->ep, cookie0 + MSG_PARTS - 1, 0, len);
	expect_no_comp(&im->ep);
	xp_check(x, d, im->ap_off[d] + dst_off, total, src_off, seed);
	return total;
}

static void rdma_transfers(unsigned int exp_nic)
{
	struct importer im;
	struct exporter x;
	uint64_t rnd = itest_seed("rdma transfers");
	uint64_t reqs0, bytes0, sent = 0, big_bytes = 0, msg_bytes;
	int64_t big_ns = 0, dt;
	unsigned int i, s, d, n = 0;

	xp_start(&x, exp_nic);
	imp_open(&im, &x, CLANQ_RIGHT_WRITE);
	printf("rdma: node 0 -> node %u, rdma_max_xfer %lu\n", exp_nic,
	       param_or("rdma_max_xfer", 0));
	reqs0 = itest_ctr(&im.ep.counters->rdma_reqs);
	bytes0 = itest_ctr(&im.ep.counters->rdma_bytes);

	for (i = 0; i < ARRAY_SIZE(xfers); i++) {
		for (s = 0; s < SRC_N; s++) {
			for (d = XR_ALLOC; d <= XR_REG; d++) {
				/* MiB-sized ones: two of the four pairings */
				if (xfers[i].len > 64 * KiB && s == d)
					continue;
				dt = rdma_checked(&im, &x, s, d,
						  xfers[i].src_off,
						  xfers[i].dst_off,
						  xfers[i].len,
						  itest_rand(&rnd));
				if (xfers[i].len >= 4 * MiB) {
					big_bytes += xfers[i].len;
					big_ns += dt;
				}
				sent += xfers[i].len;
				n++;
			}
		}
	}
	/* a region whose pages it shares with other memory: RDMA still works */
	for (s = 0; s < SRC_N; s++) {
		rdma_checked(&im, &x, s, XR_ODD, 3, 0, ODD_SIZE,
			     itest_rand(&rnd));
		rdma_checked(&im, &x, s, XR_ODD, 4097, ODD_SIZE - 1, 1,
			     itest_rand(&rnd));
		rdma_checked(&im, &x, s, XR_ODD, 11, 4095, 4099,
			     itest_rand(&rnd));
		sent += ODD_SIZE + 1 + 4099;
		n += 3;
	}
	msg_bytes = rdma_message(&im, &x, SRC_REG, XR_ALLOC, &rnd);
	msg_bytes += rdma_message(&im, &x, SRC_ALLOC, XR_REG, &rnd);

	/* the counters saw every request and byte (and the message parts) */
	assert_int_equal(itest_ctr(&im.ep.counters->rdma_reqs) - reqs0,
			 n + 2 * MSG_PARTS);
	assert_int_equal(itest_ctr(&im.ep.counters->rdma_bytes) - bytes0,
			 sent + msg_bytes);
	assert_int_equal(itest_ctr(&im.ep.counters->rdma_errors), 0);
	printf("rdma: %u checked writes, %llu bytes; 4 MiB writes at %.1f MiB/s "
	       "(post to completion, informal)\n", n, (unsigned long long)sent,
	       mib_per_s(big_bytes, big_ns));

	imp_close(&im);
	xp_stop(&x);
}

static void rdma_writes_within_a_node_land_exactly_where_asked(void **state)
{
	(void)state;
	rdma_transfers(0);
}

static void rdma_writes_across_nodes_land_exactly_where_asked(void **state)
{
	(void)state;
	rdma_transfers(1);
}

/*
 * PIO.
 */

static const struct xfer pio_writes[] = {
	{ 1, 0, 0 },
	{ 1, 7, AP_LEN - 1 },
	{ 3, 1, 4094 },
	{ 63, 5, 4093 },			/* across a page boundary */
	{ 4095, 4097, 1 },
	{ 4097, 3, AP_LEN - 4097 },
	{ 65537, 1, 65535 },
	{ 1 * MiB + 1, 12345, 2 * MiB + 3 },
};

static void pio_transfers(unsigned int exp_nic)
{
	struct importer im;
	struct exporter x;
	uint64_t rnd = itest_seed("pio");
	uint64_t seed, bytes = 0;
	unsigned int i, d;
	int64_t t0, ns = 0;
	uint8_t *buf;

	xp_start(&x, exp_nic);
	imp_open(&im, &x, CLANQ_RIGHTS_ALL);
	buf = im.reg_mem;	/* any memory will do as a PIO source */

	/* page-aligned regions can be mapped, at the right place */
	for (d = XR_ALLOC; d <= XR_REG; d++) {
		struct clanq_ap *ap = &im.ap[d];

		assert_true(ap->map_size > 0);
		assert_int_equal(clanq_ap_map(ap), 0);
		assert_non_null(ap->base);
		assert_int_equal(ap->base - (char *)ap->map, ap->map_delta);
		/*
		 * The pages the window needs and no more: a mapping from the
		 * region's start would show bytes the import did not grant.
		 */
		assert_int_equal(ap->map_delta, AP_OFF % PAGE);
		assert_int_equal(ap->map_size,
				 (AP_OFF % PAGE + AP_LEN + PAGE - 1) / PAGE * PAGE);
		/* what we see is the exporter's background, both ends */
		assert_int_equal(pat_diff((uint8_t *)ap->base, BG_SEED, AP_OFF,
					  64 * KiB, TOP), 64 * KiB);
		assert_int_equal(pat_diff((uint8_t *)ap->base + AP_LEN - 64 * KiB,
					  BG_SEED, AP_OFF + AP_LEN - 64 * KiB,
					  64 * KiB, TOP), 64 * KiB);
	}
	/* one whose pages hold other memory too cannot */
	assert_int_equal(im.ap[XR_ODD].map_size, 0);
	assert_int_equal(clanq_ap_map(&im.ap[XR_ODD]), -EOPNOTSUPP);
	assert_null(im.ap[XR_ODD].base);

	for (d = XR_ALLOC; d <= XR_REG; d++) {
		struct clanq_ap *ap = &im.ap[d];

		for (i = 0; i < ARRAY_SIZE(pio_writes); i++) {
			const struct xfer *w = &pio_writes[i];

			seed = itest_rand(&rnd);
			pat_fill(buf + w->src_off, seed, w->src_off, w->len, 0);
			t0 = clanq_now_ns();
			assert_int_equal(clanq_ap_write(ap, w->dst_off,
							buf + w->src_off,
							w->len), 0);
			ns += clanq_now_ns() - t0;
			bytes += w->len;
			/* visible through our own mapping, and to the owner */
			assert_int_equal(pat_diff((uint8_t *)ap->base + w->dst_off,
						  seed, w->src_off, w->len, 0),
					 w->len);
			xp_check(&x, d, AP_OFF + w->dst_off, w->len,
				 w->src_off, seed);
		}
		/* outside the window: refused, nothing written */
		assert_int_equal(clanq_ap_write(ap, AP_LEN - 3, buf, 4), -ERANGE);
		assert_int_equal(clanq_ap_write(ap, AP_LEN + 1, buf, 0), -ERANGE);
		assert_int_equal(clanq_ap_write(ap, ~0ull, buf, 2), -ERANGE);
		assert_int_equal(clanq_ap_write(ap, 1, buf, ~(size_t)0),
				 -ERANGE);
		xp_check(&x, d, 0, 0, 0, 0);
	}
	/* and the same window works through the engine too */
	rdma_checked(&im, &x, SRC_ALLOC, XR_ALLOC, 17, 4093, 8191,
		     itest_rand(&rnd));
	printf("pio: node 0 -> node %u, %llu bytes at %.1f MiB/s (informal)\n",
	       exp_nic, (unsigned long long)bytes, mib_per_s(bytes, ns));

	imp_close(&im);
	xp_stop(&x);
}

static void pio_writes_within_a_node_land_exactly_where_asked(void **state)
{
	(void)state;
	pio_transfers(0);
}

static void pio_writes_across_nodes_land_exactly_where_asked(void **state)
{
	(void)state;
	pio_transfers(1);
}

static void a_read_only_import_cannot_be_written_by_pio(void **state)
{
	struct importer im;
	struct exporter x;
	struct clanq_rdma_req req;
	struct clanq_ap *ap;
	unsigned int d;
	uint8_t b = 0x42;
	void *p;

	(void)state;
	xp_start(&x, 1);
	imp_open(&im, &x, CLANQ_RIGHT_READ);
	for (d = XR_ALLOC; d <= XR_REG; d++) {
		ap = &im.ap[d];
		/* it maps, read-only, and shows the exporter's bytes */
		assert_int_equal(clanq_ap_map(ap), 0);
		assert_int_equal(pat_diff((uint8_t *)ap->base, BG_SEED, AP_OFF,
					  8 * KiB, TOP), 8 * KiB);
		/* the library refuses to store through it */
		assert_int_equal(clanq_ap_write(ap, 0, &b, 1), -ENXIO);
		/* a writable mapping is refused by the driver */
		p = mmap(NULL, ap->map_size, RW, MAP_SHARED, ap->fd,
			 (off_t)ap->mmap_offset);
		if (p != MAP_FAILED)
			fail_msg("read-only aperture mapped PROT_WRITE");
		assert_true(errno == EACCES || errno == EPERM);
		/* and so is making the read-only mapping writable */
		assert_int_equal(mprotect(ap->map, ap->map_size, RW), -1);
		assert_int_equal(errno, EACCES);
		/* a read-only shared mapping of it works */
		p = mmap(NULL, ap->map_size, PROT_READ, MAP_SHARED, ap->fd,
			 (off_t)ap->mmap_offset);
		assert_true(p != MAP_FAILED);
		assert_int_equal(munmap(p, ap->map_size), 0);
		/* nor can the engine write through it */
		pat_fill(im.src_mem[SRC_ALLOC], 1, 0, 16, 0);
		req = itest_rdma_req(im.src[SRC_ALLOC].addr.id, ap->id, 0, 0, 16,
			    im.cookie, REQ_DONE);
		assert_int_equal(clanq_rdma_post(&im.ep, &req), 0);
		expect_comp(&im.ep, im.cookie++, -EACCES, 0);
		xp_check(&x, d, 0, 0, 0, 0);
	}
	imp_close(&im);
	xp_stop(&x);
}

/*
 * Eight endpoints in four processes, posting at once.
 */

#define MANY_PROCS	4
#define MANY_PER_PROC	2
#define MANY_EPS	(MANY_PROCS * MANY_PER_PROC)
#define MANY_REQS	300
#define MANY_SLICE	(1536 * KiB)
#define MANY_SRC	(160 * KiB)

struct many_plan {
	struct clanq_addr region;
	uint64_t key;
	uint64_t seed[MANY_EPS];
	uint64_t sum[MANY_EPS];
	uint64_t end[MANY_EPS];
	uint32_t len[MANY_EPS][MANY_REQS];
	uint32_t src_off[MANY_EPS][MANY_REQS];
	uint32_t dst_off[MANY_EPS][MANY_REQS];
	int go;
};

struct many_args {
	struct many_plan *plan;
	unsigned int proc;
};

static uint64_t many_cookie(unsigned int e, unsigned int k)
{
	return 0x3a00000000000000ull | (uint64_t)e << 32 | k;
}

static void many_child(void *arg)
{
	struct many_args *a = arg;
	struct many_plan *p = a->plan;
	struct clanq_ep_attr attr = { .rq_slots = 32, .cq_slots = 16 };
	struct clanq_ep ep[MANY_PER_PROC];
	struct clanq_region src[MANY_PER_PROC];
	struct clanq_ap ap[MANY_PER_PROC];
	unsigned int posted[MANY_PER_PROC] = { 0 }, done[MANY_PER_PROC] = { 0 };
	unsigned int j, e, all = 0;
	struct clanq_rdma_comp c;
	struct clanq_rdma_req req;
	struct clanq_dev dev;
	uint64_t end;
	int r;

	CHILD_CHECK_INT(clanq_open_nic(&dev, a->proc % 2), 0);
	for (j = 0; j < MANY_PER_PROC; j++) {
		e = a->proc * MANY_PER_PROC + j;
		CHILD_CHECK_INT(clanq_ep_create_attr(&dev, &ep[j], &attr), 0);
		CHILD_CHECK_INT(clanq_region_alloc(&dev, &src[j], MANY_SRC), 0);
		pat_fill(src[j].mem, p->seed[e], 0, MANY_SRC, 0);
		CHILD_CHECK_INT(clanq_ap_import(&dev, &ap[j], p->region, p->key,
						(uint64_t)e * MANY_SLICE,
						MANY_SLICE,
						CLANQ_RIGHT_WRITE), 0);
	}
	end = clanq_now_ns() + COMP_TIMEOUT;
	while (!__atomic_load_n(&p->go, __ATOMIC_ACQUIRE)) {
		CHILD_CHECK(clanq_now_ns() < end);
		sched_yield();
	}

	end = clanq_now_ns() + RUN_TIMEOUT;
	while (all < MANY_PER_PROC) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("proc %u: completions %u, %u of %u after %lld s",
				   a->proc, done[0], done[1], MANY_REQS,
				   (long long)(RUN_TIMEOUT / ITEST_NS_PER_S));
		for (j = 0; j < MANY_PER_PROC; j++) {
			e = a->proc * MANY_PER_PROC + j;
			while (posted[j] < MANY_REQS) {
				unsigned int k = posted[j];

				req = itest_rdma_req(src[j].addr.id, ap[j].id,
					    p->src_off[e][k], p->dst_off[e][k],
					    p->len[e][k], many_cookie(e, k),
					    REQ_DONE);
				r = clanq_rdma_post(&ep[j], &req);
				if (r == -EAGAIN)
					break;
				CHILD_CHECK_INT(r, 0);
				posted[j]++;
			}
			while (!clanq_rdma_poll(&ep[j], &c)) {
				unsigned int k = done[j];

				if (k >= MANY_REQS)
					CHILD_FAIL("ep %u: completion %#llx after all %u",
						   e, (unsigned long long)c.cookie,
						   MANY_REQS);
				if (c.cookie != many_cookie(e, k) || c.status ||
				    c.len != p->len[e][k])
					CHILD_FAIL("ep %u: completion %u: cookie %#llx status %d len %llu, expected cookie %#llx len %u",
						   e, k, (unsigned long long)c.cookie,
						   c.status, (unsigned long long)c.len,
						   (unsigned long long)many_cookie(e, k),
						   p->len[e][k]);
				if (++done[j] == MANY_REQS)
					all++;
			}
		}
		sched_yield();
	}
	for (j = 0; j < MANY_PER_PROC; j++) {
		e = a->proc * MANY_PER_PROC + j;
		/* exactly once: nothing more comes */
		itest_sleep_ns(ITEST_QUIET_NS);
		CHILD_CHECK_INT(clanq_rdma_poll(&ep[j], &c), -EAGAIN);
		CHILD_CHECK_INT(itest_ctr(&ep[j].counters->rdma_reqs), MANY_REQS);
		CHILD_CHECK_INT(itest_ctr(&ep[j].counters->rdma_bytes), p->sum[e]);
		CHILD_CHECK_INT(itest_ctr(&ep[j].counters->rdma_errors), 0);
		CHILD_CHECK_INT(clanq_ap_close(&ap[j]), 0);
		CHILD_CHECK_INT(clanq_region_free(&src[j]), 0);
		CHILD_CHECK_INT(clanq_ep_destroy(&ep[j]), 0);
	}
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static void eight_endpoints_in_four_processes_get_every_completion_once_in_order(void **state)
{
	struct many_args args[MANY_PROCS];
	pid_t pids[MANY_PROCS];
	struct many_plan *p;
	struct clanq_region dst;
	struct clanq_dev dev;
	uint64_t rnd = itest_seed("many endpoints");
	uint64_t total = 0, at, off;
	unsigned int e, k, i;
	const uint8_t *m;
	char who[32];
	int64_t t0, dt;
	size_t d;

	(void)state;
	p = mmap(NULL, sizeof(*p), RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0, sizeof(*p));

	/*
	 * The plan: per endpoint, MANY_REQS writes of mixed sizes (mostly
	 * small, some past the 64 KiB split) packed into its slice with
	 * 0-2 byte gaps, from random source offsets.
	 */
	for (e = 0; e < MANY_EPS; e++) {
		p->seed[e] = itest_rand(&rnd);
		off = 0;
		for (k = 0; k < MANY_REQS; k++) {
			uint64_t x = itest_rand(&rnd), len;

			if (x % 50 == 0)
				len = 65536 + (x >> 8) % 8192;
			else if (x % 16 == 0)
				len = 2049 + (x >> 8) % (14 * KiB);
			else
				len = 1 + (x >> 8) % 2048;
			off += (x >> 40) % 3;
			if (off + len > MANY_SLICE)
				len = 1;
			assert_true(off + len <= MANY_SLICE);
			p->len[e][k] = (uint32_t)len;
			p->dst_off[e][k] = (uint32_t)off;
			p->src_off[e][k] = (uint32_t)((x >> 24) % (MANY_SRC - len + 1));
			p->sum[e] += len;
			off += len;
		}
		p->end[e] = off;
		total += p->sum[e];
	}

	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_region_alloc(&dev, &dst, MANY_EPS * MANY_SLICE), 0);
	bg_fill(dst.mem, 0, MANY_EPS * MANY_SLICE);
	assert_int_equal(clanq_region_export(&dst, CLANQ_RIGHT_WRITE, &p->key), 0);
	p->region = dst.addr;

	for (i = 0; i < MANY_PROCS; i++) {
		args[i].plan = p;
		args[i].proc = i;
		pids[i] = itest_fork(many_child, &args[i]);
		assert_true(pids[i] > 0);
	}
	t0 = clanq_now_ns();
	__atomic_store_n(&p->go, 1, __ATOMIC_RELEASE);
	for (i = 0; i < MANY_PROCS; i++) {
		snprintf(who, sizeof(who), "poster %u", i);
		assert_true(itest_status_ok(itest_wait(pids[i], RUN_TIMEOUT +
						       COMP_TIMEOUT), who));
	}
	dt = clanq_now_ns() - t0;
	printf("many: %u endpoints x %u requests, %llu bytes in %.2f s (informal)\n",
	       MANY_EPS, MANY_REQS, (unsigned long long)total,
	       (double)dt / ITEST_NS_PER_S);

	/* every byte: gaps and tails background, writes their pattern */
	m = dst.mem;
	for (e = 0; e < MANY_EPS; e++) {
		uint64_t base = (uint64_t)e * MANY_SLICE;

		at = 0;
		for (k = 0; k < MANY_REQS; k++) {
			off = p->dst_off[e][k];
			d = pat_diff(m + base + at, BG_SEED, base + at,
				     off - at, TOP);
			if (d < off - at)
				fail_msg("ep %u: gap before write %u changed at %llu",
					 e, k, (unsigned long long)(at + d));
			d = pat_diff(m + base + off, p->seed[e],
				     p->src_off[e][k], p->len[e][k], 0);
			if (d < p->len[e][k])
				fail_msg("ep %u: write %u (%u bytes at %llu) wrong at byte %zu",
					 e, k, p->len[e][k],
					 (unsigned long long)off, d);
			at = off + p->len[e][k];
		}
		assert_int_equal(at, p->end[e]);
		d = pat_diff(m + base + at, BG_SEED, base + at,
			     MANY_SLICE - at, TOP);
		if (d < MANY_SLICE - at)
			fail_msg("ep %u: tail changed at %llu", e,
				 (unsigned long long)(at + d));
	}
	assert_int_equal(clanq_region_free(&dst), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(p, sizeof(*p));
}

#define T(f)	cmocka_unit_test_teardown(f, itest_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(rdma_writes_within_a_node_land_exactly_where_asked),
		T(rdma_writes_across_nodes_land_exactly_where_asked),
		T(pio_writes_within_a_node_land_exactly_where_asked),
		T(pio_writes_across_nodes_land_exactly_where_asked),
		T(a_read_only_import_cannot_be_written_by_pio),
		T(eight_endpoints_in_four_processes_get_every_completion_once_in_order),
	};

	return cmocka_run_group_tests_name("rdma_transfers", tests, NULL, NULL);
}
