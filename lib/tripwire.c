// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: tripwires. Set-up is a system call each; polling the fired
 * bitmap is inline in clanq.h; here is the blocking receive.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include <clanq.h>

int clanq_tw_create(struct clanq_ep *ep, struct clanq_tw *tw,
		    const struct clanq_region *r, __u64 off, __u64 len,
		    __u32 flags)
{
	struct clanq_ioc_tw_create c;

	memset(&c, 0, sizeof(c));
	c.ep = ep->addr.id;
	c.region = r->addr.id;
	c.off = off;
	c.len = len;
	c.flags = flags;
	if (ioctl(ep->fd, CLANQ_IOC_TW_CREATE, &c) < 0)
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
	tw->spin_ns = CLANQ_EVQ_SPIN_NS_DEFAULT;
	return 0;
}

static int clanq_tw_ctl(struct clanq_tw *tw, unsigned long cmd)
{
	struct clanq_ioc_tw_ctl t;

	memset(&t, 0, sizeof(t));
	t.id = tw->id;
	if (ioctl(tw->fd, cmd, &t) < 0)
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
 * Spin, then block. The spin is the evq's (the paper's 15 us): a reply
 * that comes within it is taken without the scheduler. Blocking is one
 * system call that arms, issues the full barrier and re-checks the word
 * itself ([F] of queue.h), so the word changing just before we block
 * returns at once instead of sleeping through it.
 */
int clanq_tw_wait_change(struct clanq_tw *tw, const __u64 *addr,
			 __u64 old, int64_t timeout_ns)
{
	__u64 start = clanq_now_ns(), now = start, deadline;
	__u64 off = (__u64)((const char *)addr - tw->mem);
	struct clanq_ioc_tw_wait w;

	if ((const char *)addr < tw->mem || off < tw->off ||
	    off + sizeof(*addr) > tw->off + tw->len)
		return -EINVAL;
	deadline = timeout_ns < 0 ? ~0ull : start + (__u64)timeout_ns;
	for (;;) {
		if (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != old)
			return 0;
		if (now - start < tw->spin_ns && now < deadline) {
			clanq_cpu_relax();
			now = clanq_now_ns();
			continue;
		}
		if (now >= deadline)
			return -ETIMEDOUT;
		memset(&w, 0, sizeof(w));
		w.id = tw->id;
		w.off = off;
		w.old = old;
		w.timeout_ns = timeout_ns < 0 ? ~0ull : deadline - now;
		if (ioctl(tw->fd, CLANQ_IOC_TW_WAIT, &w) < 0) {
			if (errno == ETIMEDOUT)
				return __atomic_load_n(addr, __ATOMIC_ACQUIRE) != old ?
				       0 : -ETIMEDOUT;
			return -errno;
		}
		/* fired, or changed: a fire by a write beside the word waits on */
		now = clanq_now_ns();
		start = now - tw->spin_ns;
	}
}
