// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: tripwires. Set-up is a system call each; polling the fired
 * bitmap is inline in clanq.h; here is the blocking receive.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include <clanq.h>

#include "fork.h"
#include "spin.h"

int clanq_tw_create(struct clanq_ep *ep, struct clanq_tw *tw,
		    const struct clanq_region *r, uint64_t off, uint64_t len,
		    uint32_t flags)
{
	struct clanq_ioc_tw_create c;

	memset(&c, 0, sizeof(c));
	c.ep = ep->addr.id;
	c.region = r->addr.id;
	c.off = off;
	c.len = len;
	c.flags = flags;
	if (clanq_ioctl(ep->fd, CLANQ_IOC_TW_CREATE, &c) < 0)
		return -errno;
	if (c.bit / 64 >= ep->tw_words)
		return -EPROTO;		/* the driver described nonsense */
	memset(tw, 0, sizeof(*tw));
	tw->fd = ep->fd;
	tw->id = c.id;
	tw->bit = c.bit;
	tw->fired_word = &ep->tw_fired[c.bit / 64];
	tw->mem = r->mem;
	tw->off = off;
	tw->len = len;
	tw->spin_ns = clanq_spin_default(CLANQ_EVQ_SPIN_NS_DEFAULT);
	return 0;
}

static int clanq_tw_ctl(struct clanq_tw *tw, unsigned long cmd)
{
	struct clanq_ioc_tw_ctl t;

	memset(&t, 0, sizeof(t));
	t.id = tw->id;
	if (clanq_ioctl(tw->fd, cmd, &t) < 0)
		return -errno;
	return 0;
}

int clanq_tw_arm(struct clanq_tw *tw)
{
	return clanq_tw_ctl(tw, CLANQ_IOC_TW_ARM);
}

int clanq_tw_disarm(struct clanq_tw *tw)
{
	return clanq_tw_ctl(tw, CLANQ_IOC_TW_DISARM);
}

int clanq_tw_destroy(struct clanq_tw *tw)
{
	return clanq_tw_ctl(tw, CLANQ_IOC_TW_DESTROY);
}

/*
 * A flush owed for PIO stores, folded into the next TW_WAIT; and the
 * endpoint whose OOB messages end the wait too, if any.
 */
struct clanq_tw_flush {
	struct clanq_ap *ap;	/* NULL: none owed */
	uint64_t off, len;
	struct clanq_ep *oob;	/* NULL: none */
};

/*
 * One TW_WAIT, with the owed flush if there is one. It is spent once
 * the call got as far as the wait: the driver flushes before it looks
 * at anything else, and an error in the flush is returned at once.
 */
static int clanq_tw_block(struct clanq_tw *tw, uint64_t off, uint64_t old,
			  uint64_t timeout_ns, struct clanq_tw_flush *fl)
{
	struct clanq_ioc_tw_wait w;

	memset(&w, 0, sizeof(w));
	if (fl->oob)
		w.flags = CLANQ_TW_WAIT_OOB;
	w.id = tw->id;
	w.off = off;
	w.old = old;
	w.timeout_ns = timeout_ns;
	if (fl->ap) {
		w.flags |= CLANQ_TW_WAIT_FLUSH;
		w.flush_ap = fl->ap->id;
		w.flush_off = fl->off;
		w.flush_len = fl->len;
	}
	if (clanq_ioctl(tw->fd, CLANQ_IOC_TW_WAIT, &w) == 0) {
		fl->ap = NULL;
		return 0;
	}
	/* timed out, interrupted: the flush was done before the wait */
	if (errno == ETIMEDOUT || errno == EINTR)
		fl->ap = NULL;
	return -errno;
}

/*
 * Spin, then block. The spin is the evq's (the paper's 15 us): a reply
 * that comes within it is taken without the scheduler. Blocking is one
 * system call that arms, issues the full barrier and re-checks the word
 * itself ([F] of queue.h), so the word changing just before we block
 * returns at once instead of sleeping through it. A flush owed for our
 * own stores goes first: with no spin it rides on that call (when the
 * aperture is of the tripwire's context), else it is made before the
 * spin, so the peer is not kept waiting for it.
 */
static int clanq_tw_wait(struct clanq_tw *tw, const uint64_t *addr, uint64_t old,
			 int64_t timeout_ns, struct clanq_tw_flush *fl)
{
	uint64_t off = (uint64_t)((const char *)addr - tw->mem);
	uint64_t start = 0, now = 0, deadline = ~0ull;
	unsigned int spins = 0;
	int err;

	if (clanq_inherited(tw->fd))
		return -CLANQ_FORK_ERR;
	if ((const char *)addr < tw->mem || off < tw->off ||
	    off + sizeof(*addr) > tw->off + tw->len || off % 8)
		return -EINVAL;
	/* TW_WAIT flushes only an aperture of its own context (fd) */
	if (fl->ap && (tw->spin_ns || fl->ap->fd != tw->fd)) {
		err = clanq_ap_flush_armed(fl->ap, fl->off, fl->len);
		if (err)
			return err;
		fl->ap = NULL;
	}
	/* the clock is read only when there is a spin or a deadline */
	if (tw->spin_ns || timeout_ns >= 0) {
		start = now = clanq_now_ns();
		if (timeout_ns >= 0)
			deadline = start + (uint64_t)timeout_ns;
	}
	for (;;) {
		if (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != old)
			break;
		if (fl->oob && !clanq_q_empty(&fl->oob->oob)) {
			err = 1;
			goto out;
		}
		if (now - start < tw->spin_ns && now < deadline) {
			clanq_cpu_relax();
			/* a look at the word costs less than a look at the clock */
			if (!(++spins % 8))
				now = clanq_now_ns();
			continue;
		}
		if (now >= deadline) {
			err = -ETIMEDOUT;
			goto out;
		}
		err = clanq_tw_block(tw, off, old,
				     timeout_ns < 0 ? ~0ull : deadline - now, fl);
		if (err == -ETIMEDOUT) {
			if (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != old)
				break;
			goto out;
		}
		if (err)
			goto out;
		/* fired, or changed: a fire by a write beside the word waits on */
		if (timeout_ns >= 0)
			now = clanq_now_ns();
		start = now - tw->spin_ns;	/* spent: no spin after a wake-up */
	}
	err = 0;
out:
	/* the answer came before the flush was made: still owed */
	if (fl->ap && err >= 0)
		err = clanq_ap_flush_armed(fl->ap, fl->off, fl->len);
	return err;
}

int clanq_tw_wait_change(struct clanq_tw *tw, const uint64_t *addr,
			 uint64_t old, int64_t timeout_ns)
{
	struct clanq_tw_flush none = { NULL, 0, 0, NULL };

	return clanq_tw_wait(tw, addr, old, timeout_ns, &none);
}

int clanq_tw_wait_change_oob(struct clanq_tw *tw, const uint64_t *addr,
			     uint64_t old, struct clanq_ep *ep,
			     int64_t timeout_ns)
{
	struct clanq_tw_flush fl = { NULL, 0, 0, ep };

	return clanq_tw_wait(tw, addr, old, timeout_ns, &fl);
}

int clanq_ap_write_wait(struct clanq_ap *ap, uint64_t off, const void *src,
			size_t len, struct clanq_tw *tw, const uint64_t *addr,
			uint64_t old, int64_t timeout_ns)
{
	struct clanq_tw_flush fl = { NULL, off, len, NULL };
	int owed;

	if (clanq_inherited(ap->fd))
		return -CLANQ_FORK_ERR;
	owed = clanq_ap_store(ap, off, src, len);
	if (owed < 0)
		return owed;
	if (owed)
		fl.ap = ap;
	return clanq_tw_wait(tw, addr, old, timeout_ns, &fl);
}
