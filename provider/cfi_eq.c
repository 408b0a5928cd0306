// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: event queues and completion queues.
 *
 * Both grow as entries come (an endpoint never has more operations out
 * than its tx and rx sizes, so a CQ holds at most what its endpoints
 * posted): no overrun to report. Reading either moves the fabric on
 * (manual progress).
 *
 * Sleeping: the fabric's wait fd is an epoll fd over its net's event
 * queue (readable while the driver has queued an event for the net) and
 * an eventfd, the kick. Arming (clanq_net_trywait()) makes the next
 * message, credit, connection, reset or RDMA completion an event; what
 * another thread of the process does meanwhile (an entry pushed, a
 * receive posted) kicks, if someone armed since the last kick
 * (cfi_wake()). The blocking reads arm, let go of the fabric's lock and
 * poll the fd, CFI_WAIT_SLICE_MS at most at a time: other threads' calls
 * never wait for a sleeper. FI_WAIT_FD (and FI_WAIT_UNSPEC, which is it)
 * hands the same fd to the application: fi_trywait() moves the fabric
 * on and, if none of its CQs and EQs has anything, arms, so that poll(2)
 * and epoll sleep in the kernel, no thread spinning.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cfi.h"

static uint64_t cfi_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* make the fabric's wait fd readable: a sleeper must look (lock held) */
void cfi_kick(struct cfi_fabric *fab)
{
	uint64_t one = 1;

	if (fab->kicked)
		return;
	if (write(fab->kick_fd, &one, sizeof(one)) < 0)
		CFI_WARN(FI_LOG_CQ, "the wait fd's kick: %m\n");
	else
		fab->kicked = true;
}

/*
 * A CQ or EQ someone sleeps for (a blocking read, or the application
 * after fi_trywait()): its next entry kicks. The fabric counts its
 * armed CQs: while there are none, a sleeper waits for control events
 * only and leaves the connections unarmed (cfi_wait_some()).
 */
static void cfi_arm(struct cfi_fabric *fab, bool *armed, bool cq)
{
	if (*armed)
		return;
	*armed = true;
	fab->cqs_armed += cq;
}

/* a CQ's or EQ's entry, a count: kick once if armed; else no system call */
void cfi_wake(struct cfi_fabric *fab, bool *armed, bool cq)
{
	if (!*armed)
		return;
	*armed = false;
	fab->cqs_armed -= cq;
	cfi_kick(fab);
}

/* a kick taken: the wait fd no longer readable for it (lock held) */
static void cfi_unkick(struct cfi_fabric *fab)
{
	uint64_t n;

	if (!fab->kicked)
		return;
	fab->kicked = false;
	(void)!read(fab->kick_fd, &n, sizeof(n));
}

/*
 * Wait for something on the fabric's net, at most CFI_WAIT_SLICE_MS and
 * at most until deadline (ms; UINT64_MAX: none), for the CQ or EQ whose
 * armed flag is armed. Armed under the lock (the net is one thread's at
 * a time), asleep without it.
 *
 * While no CQ is armed, nobody waits for data: the connections are not
 * armed, so the peers' messages neither cost their senders a flush nor
 * wake this sleeper (ofi_rxm's connection thread sleeps on its EQ for
 * the life of an endpoint while another thread moves the data). The net's
 * own events (connections, handshakes, a peer's death) and the kicks
 * still wake it; what only a connection's ring says (its peer's end, a
 * connection record) waits for the slice's end. The slice also bounds
 * what no wake-up announces: the end of stream of a connection muted
 * for input. Returns -FI_EAGAIN when the time is up.
 */
#define CFI_WAIT_SLICE_MS	10

/*
 * Take what the net has queued, without arming anything: true if a
 * control event is among it (a connection to accept, a reset) or the
 * net failed. Data (a connection that can be read or written, an RDMA
 * completion) is for the threads that move it: the control sleeper
 * sleeps on.
 */
static bool cfi_control_events(struct cfi_fabric *fab,
			       struct clanq_net_event *evs, unsigned int max)
{
	int i, n = clanq_net_wait(fab->net, evs, max, 0);

	if (n < 0)
		return n != -ETIMEDOUT && n != -EINTR;
	for (i = 0; i < n; i++)
		if (evs[i].what & (CLANQ_NET_ACCEPT | CLANQ_NET_HUP))
			return true;
	return false;
}

int cfi_wait_some(struct cfi_fabric *fab, bool *armed, bool cq,
		  uint64_t deadline)
{
	struct clanq_net_event evs[8];
	struct pollfd pfd = { .fd = fab->wait_fd, .events = POLLIN };
	uint64_t now = cfi_now_ms();
	int ms = CFI_WAIT_SLICE_MS;

	if (deadline != UINT64_MAX) {
		if (now >= deadline)
			return -FI_EAGAIN;
		if (deadline - now < (uint64_t)ms)
			ms = (int)(deadline - now);
	}
	cfi_arm(fab, armed, cq);
	if (fab->cqs_armed) {
		cfi_before_wait(fab);
		/* events (they came while arming) or a failure: look again */
		if (clanq_net_trywait(fab->net, evs, 8))
			return 0;
	} else if (cfi_control_events(fab, evs, 8)) {
		return 0;
	}
	cfi_unlock(fab);
	(void)poll(&pfd, 1, ms);
	cfi_lock(fab);
	cfi_unkick(fab);
	return 0;
}

uint64_t cfi_deadline(int timeout)
{
	return timeout < 0 ? UINT64_MAX : cfi_now_ms() + (uint64_t)timeout;
}

/*
 * The wait objects: FI_WAIT_NONE, and FI_WAIT_FD for FI_WAIT_UNSPEC too.
 * Wait sets, mutex and condition variable, yield and pollfd: not had.
 */
int cfi_wait_obj(enum fi_wait_obj asked, enum fi_wait_obj *wait_obj)
{
	switch (asked) {
	case FI_WAIT_NONE:
		*wait_obj = FI_WAIT_NONE;
		return 0;
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
		*wait_obj = FI_WAIT_FD;
		return 0;
	case FI_WAIT_SET:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_YIELD:
	case FI_WAIT_POLLFD:
		return -FI_ENOSYS;
	default:
		return -FI_EINVAL;
	}
}

/* fi_control() of a CQ or an EQ: its wait object, the fabric's net's fd */
int cfi_wait_control(struct cfi_fabric *fab, enum fi_wait_obj wait_obj,
		     int command, void *arg)
{
	switch (command) {
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = wait_obj;
		return 0;
	case FI_GETWAIT:
		if (!arg)
			return -FI_EINVAL;
		if (wait_obj != FI_WAIT_FD)
			return -FI_ENODATA;
		*(int *)arg = fab->wait_fd;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

/* ---- event queue -------------------------------------------------------- */

static void cfi_eq_append(struct cfi_eq *eq, struct cfi_eq_ent *e)
{
	cfi_wake(eq->fab, &eq->armed, false);
	e->next = NULL;
	if (eq->tail)
		eq->tail->next = e;
	else
		eq->head = e;
	eq->tail = e;
}

static struct cfi_eq_ent *cfi_eq_pop(struct cfi_eq *eq)
{
	struct cfi_eq_ent *e = eq->head;

	eq->head = e->next;
	if (!eq->head)
		eq->tail = NULL;
	return e;
}

int cfi_eq_push_cm(struct cfi_eq *eq, uint32_t event, fid_t fid,
		   struct fi_info *info, const void *data, size_t len)
{
	struct cfi_eq_ent *e;

	if (!eq)
		return -FI_ENOEQ;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	if (len > CFI_CM_DATA_MAX)
		len = CFI_CM_DATA_MAX;
	e->event = event;
	e->fid = fid;
	e->info = info;
	e->datalen = len;
	if (len)
		memcpy(e->data, data, len);
	cfi_eq_append(eq, e);
	return 0;
}

int cfi_eq_push_err(struct cfi_eq *eq, fid_t fid, void *context, int err,
		    const void *data, size_t len)
{
	struct cfi_eq_ent *e;

	if (!eq)
		return -FI_ENOEQ;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	if (len > CFI_CM_DATA_MAX)
		len = CFI_CM_DATA_MAX;
	e->err = true;
	e->e.fid = fid;
	e->e.context = context;
	e->e.err = err;
	e->e.prov_errno = err;
	e->datalen = len;
	if (len)
		memcpy(e->data, data, len);
	cfi_eq_append(eq, e);
	return 0;
}

static ssize_t cfi_eq_read_locked(struct cfi_eq *eq, uint32_t *event,
				  void *buf, size_t len, uint64_t flags)
{
	struct cfi_eq_ent *e;
	size_t need;

	cfi_progress(eq->fab, true);
	e = eq->head;
	if (!e)
		return -FI_EAGAIN;
	if (e->err)
		return -FI_EAVAIL;
	need = e->wlen ? e->wlen : sizeof(struct fi_eq_cm_entry) + e->datalen;
	if (len < need)
		return -FI_ETOOSMALL;
	*event = e->event;
	if (e->wlen) {
		memcpy(buf, e->data, e->wlen);
	} else {
		struct fi_eq_cm_entry *cm = buf;

		cm->fid = e->fid;
		cm->info = e->info;
		memcpy(cm->data, e->data, e->datalen);
	}
	if (!(flags & FI_PEEK))
		free(cfi_eq_pop(eq));
	return (ssize_t)need;
}

static ssize_t cfi_eq_read(struct fid_eq *feq, uint32_t *event, void *buf,
			   size_t len, uint64_t flags)
{
	struct cfi_eq *eq = container_of(feq, struct cfi_eq, eq);
	ssize_t ret;

	if (!event || (!buf && len))
		return -FI_EINVAL;
	cfi_lock(eq->fab);
	ret = cfi_eq_read_locked(eq, event, buf, len, flags);
	cfi_unlock(eq->fab);
	return ret;
}

static ssize_t cfi_eq_sread(struct fid_eq *feq, uint32_t *event, void *buf,
			    size_t len, int timeout, uint64_t flags)
{
	struct cfi_eq *eq = container_of(feq, struct cfi_eq, eq);
	uint64_t deadline = cfi_deadline(timeout);
	ssize_t ret;

	if (!event || (!buf && len))
		return -FI_EINVAL;
	cfi_lock(eq->fab);
	for (;;) {
		ret = cfi_eq_read_locked(eq, event, buf, len, flags);
		if (ret != -FI_EAGAIN)
			break;
		if (cfi_wait_some(eq->fab, &eq->armed, false, deadline))
			break;
	}
	cfi_unlock(eq->fab);
	return ret;
}

static ssize_t cfi_eq_readerr(struct fid_eq *feq, struct fi_eq_err_entry *buf,
			      uint64_t flags)
{
	struct cfi_eq *eq = container_of(feq, struct cfi_eq, eq);
	struct cfi_eq_ent *e;
	void *user_data;
	size_t user_size;
	ssize_t ret;

	if (!buf)
		return -FI_EINVAL;
	cfi_lock(eq->fab);
	e = eq->head;
	if (!e || !e->err) {
		cfi_unlock(eq->fab);
		return -FI_EAGAIN;
	}
	/* 1.5 and later: the caller may give err_data room of its own */
	user_data = buf->err_data;
	user_size = FI_VERSION_GE(eq->fab->fab.api_version, FI_VERSION(1, 5)) ?
		    buf->err_data_size : 0;
	*buf = e->e;
	if (user_size && user_data) {
		buf->err_data = user_data;
		buf->err_data_size = e->datalen < user_size ? e->datalen : user_size;
		memcpy(user_data, e->data, buf->err_data_size);
	} else {
		memcpy(eq->errdata, e->data, e->datalen);
		buf->err_data = e->datalen ? eq->errdata : NULL;
		buf->err_data_size = e->datalen;
	}
	if (!(flags & FI_PEEK))
		free(cfi_eq_pop(eq));
	ret = sizeof(*buf);
	cfi_unlock(eq->fab);
	return ret;
}

static ssize_t cfi_eq_write(struct fid_eq *feq, uint32_t event,
			    const void *buf, size_t len, uint64_t flags)
{
	struct cfi_eq *eq = container_of(feq, struct cfi_eq, eq);
	struct cfi_eq_ent *e;

	(void)flags;
	if (!buf || !len || len > CFI_CM_DATA_MAX)
		return -FI_EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	e->event = event;
	e->wlen = len;
	memcpy(e->data, buf, len);
	cfi_lock(eq->fab);
	cfi_eq_append(eq, e);
	cfi_unlock(eq->fab);
	return (ssize_t)len;
}

static const char *cfi_strerror(int prov_errno, char *buf, size_t len)
{
	const char *s = fi_strerror(prov_errno);

	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static const char *cfi_eq_strerror(struct fid_eq *feq, int prov_errno,
				   const void *err_data, char *buf, size_t len)
{
	(void)feq;
	(void)err_data;
	return cfi_strerror(prov_errno, buf, len);
}

static int cfi_eq_close(struct fid *fid)
{
	struct cfi_eq *eq = container_of(fid, struct cfi_eq, eq.fid);
	struct cfi_fabric *fab = eq->fab;

	cfi_lock(fab);
	if (eq->refs) {
		cfi_unlock(fab);
		return -FI_EBUSY;
	}
	while (eq->head) {
		struct cfi_eq_ent *e = cfi_eq_pop(eq);

		if (e->info)
			fi_freeinfo(e->info);
		free(e);
	}
	fab->refs--;
	cfi_unlock(fab);
	free(eq);
	return 0;
}

static int cfi_eq_control(struct fid *fid, int command, void *arg)
{
	struct cfi_eq *eq = container_of(fid, struct cfi_eq, eq.fid);

	return cfi_wait_control(eq->fab, eq->wait_obj, command, arg);
}

static struct fi_ops cfi_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_eq_close,
	.bind = (void *)cfi_enosys,
	.control = cfi_eq_control,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static struct fi_ops_eq cfi_eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = cfi_eq_read,
	.readerr = cfi_eq_readerr,
	.write = cfi_eq_write,
	.sread = cfi_eq_sread,
	.strerror = cfi_eq_strerror,
};

int cfi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		struct fid_eq **feq, void *context)
{
	struct cfi_fabric *fab = container_of(fabric, struct cfi_fabric, fab);
	enum fi_wait_obj wait_obj;
	struct cfi_eq *eq;
	int ret;

	if (!attr || !feq)
		return -FI_EINVAL;
	ret = cfi_wait_obj(attr->wait_obj, &wait_obj);
	if (ret)
		return ret;
	if (attr->flags & ~(uint64_t)FI_WRITE)
		return -FI_EINVAL;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	eq->fab = fab;
	eq->wait_obj = wait_obj;
	eq->eq.fid.fclass = FI_CLASS_EQ;
	eq->eq.fid.context = context;
	eq->eq.fid.ops = &cfi_eq_fi_ops;
	eq->eq.ops = &cfi_eq_ops;
	cfi_lock(fab);
	fab->refs++;
	cfi_unlock(fab);
	*feq = &eq->eq;
	return 0;
}

/* ---- completion queue --------------------------------------------------- */

/* a ring's capacity is a power of two (64, doubled): indexes wrap by a mask */
static int cfi_grow(struct cfi_comp **ring, size_t *cap, size_t head, size_t n)
{
	size_t ncap = *cap ? *cap * 2 : 64, i;
	struct cfi_comp *r = malloc(ncap * sizeof(*r));

	if (!r)
		return -FI_ENOMEM;
	for (i = 0; i < n; i++)
		r[i] = (*ring)[(head + i) % *cap];
	free(*ring);
	*ring = r;
	*cap = ncap;
	return 0;
}

int cfi_cq_push(struct cfi_cq *cq, const struct cfi_comp *c)
{
	cfi_wake(cq->fab, &cq->armed, true);
	if (c->err) {
		if (cq->en == cq->ecap) {
			if (cfi_grow(&cq->errs, &cq->ecap, cq->ehead, cq->en))
				return -FI_ENOMEM;
			cq->ehead = 0;
		}
		cq->errs[(cq->ehead + cq->en++) & (cq->ecap - 1)] = *c;
		return 0;
	}
	if (cq->n == cq->cap) {
		if (cfi_grow(&cq->ring, &cq->cap, cq->head, cq->n))
			return -FI_ENOMEM;
		cq->head = 0;
	}
	cq->ring[(cq->head + cq->n++) & (cq->cap - 1)] = *c;
	return 0;
}

static void cfi_cq_fill(const struct cfi_cq *cq, void *buf, size_t i,
			const struct cfi_comp *c)
{
	switch (cq->format) {
	case FI_CQ_FORMAT_MSG: {
		struct fi_cq_msg_entry *m = (struct fi_cq_msg_entry *)buf + i;

		m->op_context = c->context;
		m->flags = c->flags;
		m->len = c->len;
		break;
	}
	case FI_CQ_FORMAT_DATA: {
		struct fi_cq_data_entry *d = (struct fi_cq_data_entry *)buf + i;

		d->op_context = c->context;
		d->flags = c->flags;
		d->len = c->len;
		d->buf = c->buf;
		d->data = c->data;
		break;
	}
	default: {
		struct fi_cq_entry *e = (struct fi_cq_entry *)buf + i;

		e->op_context = c->context;
		break;
	}
	}
}

static ssize_t cfi_cq_read_locked(struct cfi_cq *cq, void *buf, size_t count,
				  fi_addr_t *src)
{
	size_t i;

	cfi_progress(cq->fab, false);
	if (cq->en)
		return -FI_EAVAIL;
	if (!cq->n)
		return -FI_EAGAIN;
	cq->empty_reads = 0;
	for (i = 0; i < count && cq->n; i++) {
		cfi_cq_fill(cq, buf, i, &cq->ring[cq->head]);
		if (src)
			src[i] = FI_ADDR_NOTAVAIL;
		cq->head = (cq->head + 1) & (cq->cap - 1);
		cq->n--;
	}
	return (ssize_t)i;
}

static ssize_t cfi_cq_readfrom(struct fid_cq *fcq, void *buf, size_t count,
			       fi_addr_t *src)
{
	struct cfi_cq *cq = container_of(fcq, struct cfi_cq, cq);
	bool yield;
	ssize_t ret;

	if (!buf && count)
		return -FI_EINVAL;
	cfi_lock(cq->fab);
	ret = cfi_cq_read_locked(cq, buf, count, src);
	yield = ret == -FI_EAGAIN && cq->fab->yield_after &&
		++cq->empty_reads >= cq->fab->yield_after;
	if (yield)
		cq->empty_reads = 0;
	cfi_unlock(cq->fab);
	/* (cfi_core.c: FI_CLANQ_YIELD) out of the lock, which another
	 * reader of this fabric may want meanwhile */
	if (yield)
		sched_yield();
	return ret;
}

static ssize_t cfi_cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
	return cfi_cq_readfrom(fcq, buf, count, NULL);
}

static ssize_t cfi_cq_sreadfrom(struct fid_cq *fcq, void *buf, size_t count,
				fi_addr_t *src, const void *cond, int timeout)
{
	struct cfi_cq *cq = container_of(fcq, struct cfi_cq, cq);
	uint64_t deadline = cfi_deadline(timeout);
	ssize_t ret;

	(void)cond;
	if (!buf && count)
		return -FI_EINVAL;
	cfi_lock(cq->fab);
	for (;;) {
		ret = cfi_cq_read_locked(cq, buf, count, src);
		if (ret != -FI_EAGAIN)
			break;
		if (cfi_wait_some(cq->fab, &cq->armed, true, deadline))
			break;
	}
	cfi_unlock(cq->fab);
	return ret;
}

static ssize_t cfi_cq_sread(struct fid_cq *fcq, void *buf, size_t count,
			    const void *cond, int timeout)
{
	return cfi_cq_sreadfrom(fcq, buf, count, NULL, cond, timeout);
}

static ssize_t cfi_cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf,
			      uint64_t flags)
{
	struct cfi_cq *cq = container_of(fcq, struct cfi_cq, cq);
	struct cfi_comp *c;

	if (!buf)
		return -FI_EINVAL;
	cfi_lock(cq->fab);
	if (!cq->en) {
		cfi_unlock(cq->fab);
		return -FI_EAGAIN;
	}
	c = &cq->errs[cq->ehead];
	buf->op_context = c->context;
	buf->flags = c->flags;
	buf->len = c->len;
	buf->buf = c->buf;
	buf->data = c->data;
	buf->tag = 0;
	buf->olen = c->olen;
	buf->err = c->err;
	buf->prov_errno = c->err;
	/* no provider data: nothing goes into a caller's err_data */
	if (FI_VERSION_GE(cq->fab->fab.api_version, FI_VERSION(1, 5)))
		buf->err_data_size = 0;
	else
		buf->err_data = NULL;
	if (!(flags & FI_PEEK)) {
		cq->ehead = (cq->ehead + 1) & (cq->ecap - 1);
		cq->en--;
	}
	cfi_unlock(cq->fab);
	return 1;
}

static const char *cfi_cq_strerror(struct fid_cq *fcq, int prov_errno,
				   const void *err_data, char *buf, size_t len)
{
	(void)fcq;
	(void)err_data;
	return cfi_strerror(prov_errno, buf, len);
}

static int cfi_cq_close(struct fid *fid)
{
	struct cfi_cq *cq = container_of(fid, struct cfi_cq, cq.fid);
	struct cfi_fabric *fab = cq->fab;

	cfi_lock(fab);
	if (cq->refs) {
		cfi_unlock(fab);
		return -FI_EBUSY;
	}
	fab->cqs_armed -= cq->armed;
	fab->refs--;
	cfi_unlock(fab);
	free(cq->ring);
	free(cq->errs);
	free(cq);
	return 0;
}

static int cfi_cq_control(struct fid *fid, int command, void *arg)
{
	struct cfi_cq *cq = container_of(fid, struct cfi_cq, cq.fid);

	return cfi_wait_control(cq->fab, cq->wait_obj, command, arg);
}

static struct fi_ops cfi_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_cq_close,
	.bind = (void *)cfi_enosys,
	.control = cfi_cq_control,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static struct fi_ops_cq cfi_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cfi_cq_read,
	.readfrom = cfi_cq_readfrom,
	.readerr = cfi_cq_readerr,
	.sread = cfi_cq_sread,
	.sreadfrom = cfi_cq_sreadfrom,
	.signal = (void *)cfi_enosys,
	.strerror = cfi_cq_strerror,
};

int cfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		struct fid_cq **fcq, void *context)
{
	struct cfi_domain *d = container_of(domain, struct cfi_domain, dom);
	enum fi_wait_obj wait_obj;
	struct cfi_cq *cq;
	int ret;

	if (!attr || !fcq)
		return -FI_EINVAL;
	switch (attr->format) {
	case FI_CQ_FORMAT_UNSPEC:
	case FI_CQ_FORMAT_CONTEXT:
	case FI_CQ_FORMAT_MSG:
	case FI_CQ_FORMAT_DATA:
		break;
	case FI_CQ_FORMAT_TAGGED:
		return -FI_ENOSYS;	/* no FI_TAGGED */
	default:
		return -FI_EINVAL;
	}
	ret = cfi_wait_obj(attr->wait_obj, &wait_obj);
	if (ret)
		return ret;
	/* conditions (FI_CQ_COND_THRESHOLD): not had */
	if (attr->wait_cond != FI_CQ_COND_NONE)
		return -FI_ENOSYS;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->fab = d->fab;
	cq->wait_obj = wait_obj;
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ?
		     FI_CQ_FORMAT_CONTEXT : attr->format;
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &cfi_cq_fi_ops;
	cq->cq.ops = &cfi_cq_ops;
	cfi_lock(d->fab);
	d->fab->refs++;
	cfi_unlock(d->fab);
	*fcq = &cq->cq;
	return 0;
}

/* ---- fi_trywait() -------------------------------------------------------- */

/*
 * fid, a CQ, an EQ or a counter of fab with an fd to wait on: has it
 * anything? (A counter: a count the application has not read.)
 */
static int cfi_fid_ready(struct cfi_fabric *fab, struct fid *fid, bool *ready,
			 bool arm)
{
	if (!fid)
		return -FI_EINVAL;
	if (fid->fclass == FI_CLASS_CQ && fid->ops == &cfi_cq_fi_ops) {
		struct cfi_cq *cq = container_of(fid, struct cfi_cq, cq.fid);

		if (cq->fab != fab || cq->wait_obj != FI_WAIT_FD)
			return -FI_EINVAL;
		*ready = cq->n || cq->en;
		if (arm)
			cfi_arm(fab, &cq->armed, true);
		return 0;
	}
	if (cfi_cntr_of(fid)) {
		struct cfi_cntr *cntr = cfi_cntr_of(fid);

		if (cntr->fab != fab || cntr->wait_obj != FI_WAIT_FD)
			return -FI_EINVAL;
		*ready = cntr->value + cntr->err != cntr->seen;
		if (arm)
			cfi_arm(fab, &cntr->armed, true);
		return 0;
	}
	if (fid->fclass == FI_CLASS_EQ && fid->ops == &cfi_eq_fi_ops) {
		struct cfi_eq *eq = container_of(fid, struct cfi_eq, eq.fid);

		if (eq->fab != fab || eq->wait_obj != FI_WAIT_FD)
			return -FI_EINVAL;
		*ready = eq->head;
		if (arm)
			cfi_arm(fab, &eq->armed, false);
		return 0;
	}
	return -FI_EINVAL;
}

/*
 * -FI_EINVAL if any of fids is not one; else -FI_EAGAIN if any has
 * entries; with arm, each is marked slept for (cfi_wake()).
 */
static int cfi_any_ready(struct cfi_fabric *fab, struct fid **fids, int count,
			 bool arm)
{
	bool any = false, ready;
	int i, ret;

	for (i = 0; i < count; i++) {
		ready = false;
		ret = cfi_fid_ready(fab, fids[i], &ready, arm);
		if (ret)
			return ret;
		any |= ready;
	}
	return any ? -FI_EAGAIN : 0;
}

/*
 * 0: the fd may be slept on; whatever the application waits for next
 * makes it readable. -FI_EAGAIN: read first (a CQ or EQ has entries, or
 * something arrived while arming). As clanq_net_wait() before it blocks:
 * connections without a posted receive are muted, so a message that
 * waits for one does not keep the fd readable; the peer's end still
 * fires their tripwires and is seen by the read that the wake-up brings.
 */
int cfi_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	struct cfi_fabric *fab = container_of(fabric, struct cfi_fabric, fab);
	struct clanq_net_event evs[8];
	int ret;

	if (count < 0 || (count && !fids))
		return -FI_EINVAL;
	cfi_lock(fab);
	ret = cfi_any_ready(fab, fids, count, false);	/* checked first */
	if (ret == -FI_EINVAL)
		goto out;
	cfi_progress(fab, true);
	ret = cfi_any_ready(fab, fids, count, false);
	if (ret)
		goto out;
	cfi_unkick(fab);	/* the kick that woke us: read */
	cfi_before_wait(fab);
	ret = clanq_net_trywait(fab->net, evs, 8);
	if (ret > 0) {
		/* something came since the look: the reads take it */
		cfi_progress(fab, true);
		ret = -FI_EAGAIN;
	} else if (ret < 0) {
		ret = cfi_errno(ret);
	} else {
		cfi_any_ready(fab, fids, count, true);
	}
out:
	cfi_unlock(fab);
	return ret;
}
