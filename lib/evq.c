// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: the unified event queue. Dequeuing is inline in clanq.h
 * (clanq_evq_poll); here are set-up, registration and the blocking wait.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <clanq.h>

#include "fork.h"
#include "spin.h"

int clanq_evq_create(struct clanq_dev *dev, struct clanq_evq *evq,
		     unsigned int max_regs)
{
	struct clanq_ioc_evq_create c;
	void *seg;
	int err;

	memset(&c, 0, sizeof(c));
	c.max_regs = max_regs;
	if (clanq_ioctl(dev->fd, CLANQ_IOC_EVQ_CREATE, &c) < 0)
		return -errno;
	seg = mmap(NULL, c.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   c.fd, 0);
	if (seg == MAP_FAILED) {
		err = -errno;
		close(c.fd);
		return err;
	}
	/* clanq_evq_poll() copies whole slots into a struct clanq_event */
	if (c.ring.slot_size != sizeof(struct clanq_event) ||
	    clanq_q_init(&evq->ring, seg, c.mmap_size, &c.ring) ||
	    c.pending % 8 ||
	    (uint64_t)c.pending + (uint64_t)c.nr_words * 8 > c.mmap_size) {
		munmap(seg, c.mmap_size);
		close(c.fd);
		return -EPROTO;
	}
	err = clanq_fork_track(c.fd);
	if (err) {
		munmap(seg, c.mmap_size);
		close(c.fd);
		return err;
	}
	evq->fd = c.fd;
	evq->seg = seg;
	evq->seg_size = c.mmap_size;
	evq->pending = (uint64_t *)((char *)seg + c.pending);
	evq->nr_words = c.nr_words;
	evq->spin_ns = clanq_spin_default(CLANQ_EVQ_SPIN_NS_DEFAULT);
	return 0;
}

int clanq_evq_destroy(struct clanq_evq *evq)
{
	int err = 0;

	if (evq->seg)
		munmap(evq->seg, evq->seg_size);
	evq->seg = NULL;
	clanq_fork_untrack(evq->fd);
	if (evq->fd >= 0 && close(evq->fd) < 0)
		err = -errno;
	evq->fd = -1;
	return err;
}

int clanq_evq_register(struct clanq_evq *evq, const struct clanq_ep *ep,
		       uint32_t mask, uint64_t cookie)
{
	struct clanq_ioc_evq_reg r;

	memset(&r, 0, sizeof(r));
	r.ep = ep->addr.id;
	r.events = mask;
	r.cookie = cookie;
	if (clanq_ioctl(evq->fd, CLANQ_IOC_EVQ_REGISTER, &r) < 0)
		return -errno;
	return (int)r.reg;
}

int clanq_evq_unregister(struct clanq_evq *evq, int reg)
{
	struct clanq_ioc_evq_reg r;

	if (reg < 0)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.reg = (uint32_t)reg;
	if (clanq_ioctl(evq->fd, CLANQ_IOC_EVQ_UNREGISTER, &r) < 0)
		return -errno;
	return 0;
}

/*
 * Poll, spin, block. The spin is what the paper's server did: under load
 * the next event usually arrives within microseconds, and taking it
 * without a trip through the scheduler is both faster and cheaper.
 * Blocking passes our consumer index: the driver sleeps only while no
 * event has been posted beyond it, so nothing is lost between our last
 * look and the sleep.
 */
int clanq_evq_wait(struct clanq_evq *evq, struct clanq_event *ev,
		   int64_t timeout_ns)
{
	uint64_t start = clanq_now_ns(), now = start, deadline;
	struct clanq_ioc_evq_wait w;

	/* an inherited ring reads empty: say why rather than time out */
	if (clanq_inherited(evq->fd))
		return -CLANQ_FORK_ERR;
	deadline = timeout_ns < 0 ? ~0ull : start + (uint64_t)timeout_ns;
	for (;;) {
		if (!clanq_evq_poll(evq, ev))
			return 0;
		if (now - start < evq->spin_ns && now < deadline) {
			clanq_cpu_relax();
			now = clanq_now_ns();
			continue;
		}
		if (now >= deadline)
			return -ETIMEDOUT;
		memset(&w, 0, sizeof(w));
		w.read_i = evq->ring.own;
		w.timeout_ns = timeout_ns < 0 ? ~0ull : deadline - now;
		if (clanq_ioctl(evq->fd, CLANQ_IOC_EVQ_WAIT, &w) < 0) {
			if (errno == ETIMEDOUT)
				return clanq_evq_poll(evq, ev) ? -ETIMEDOUT : 0;
			return -errno;
		}
		now = clanq_now_ns();
		/* spent: do not spin again after a wake-up */
		start = now - evq->spin_ns;
	}
}
