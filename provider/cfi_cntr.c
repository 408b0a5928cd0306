// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq-fi.so: counters (fi_cntr_open() and the fi_cntr_* calls).
 *
 * A counter counts the completions of the endpoints bound to it, by
 * kind (fi_ep_bind()'s FI_SEND, FI_RECV, FI_READ, FI_WRITE; struct
 * cfi_cntr_kind): every operation, whether or not it writes a CQ entry
 * (FI_SELECTIVE_COMPLETION), successes in its value and failures in its
 * error count. Remote accesses to a registration (FI_REMOTE_READ,
 * FI_REMOTE_WRITE, FI_RMA_EVENT) cannot be counted: clanq's one-sided
 * writes land without the exporter's processor, and its reads say
 * nothing to it at all.
 *
 * Reading a counter moves the fabric on (manual progress), as reading a
 * CQ does; fi_cntr_wait() sleeps as the blocking CQ reads do
 * (cfi_eq.c), and FI_WAIT_FD counters take part in fi_trywait().
 */
#include <stdlib.h>

#include "cfi.h"

/* an operation of one of cntr's endpoints completed (lock held) */
void cfi_cntr_count(struct cfi_cntr *cntr, bool failed)
{
	if (!cntr)
		return;
	if (failed)
		cntr->err++;
	else
		cntr->value++;
	cfi_wake(cntr->fab, &cntr->armed, true);
}

/* fi_cntr_read(), fi_cntr_readerr(): the fabric moved on, then a look */
static uint64_t cfi_cntr_look(struct fid_cntr *fcntr, bool errors)
{
	struct cfi_cntr *cntr = container_of(fcntr, struct cfi_cntr, cntr);
	uint64_t v;

	cfi_lock(cntr->fab);
	cfi_progress(cntr->fab, false);
	v = errors ? cntr->err : cntr->value;
	cntr->seen = cntr->value + cntr->err;
	cfi_unlock(cntr->fab);
	return v;
}

static uint64_t cfi_cntr_read(struct fid_cntr *fcntr)
{
	return cfi_cntr_look(fcntr, false);
}

static uint64_t cfi_cntr_readerr(struct fid_cntr *fcntr)
{
	return cfi_cntr_look(fcntr, true);
}

/* add, set, adderr, seterr: what the application does to its counter */
static int cfi_cntr_update(struct fid_cntr *fcntr, uint64_t *word, uint64_t v,
			   bool add)
{
	struct cfi_cntr *cntr = container_of(fcntr, struct cfi_cntr, cntr);

	cfi_lock(cntr->fab);
	*word = add ? *word + v : v;
	/* a waiter in another thread looks again */
	cfi_wake(cntr->fab, &cntr->armed, true);
	cfi_unlock(cntr->fab);
	return 0;
}

static int cfi_cntr_add(struct fid_cntr *fcntr, uint64_t value)
{
	struct cfi_cntr *cntr = container_of(fcntr, struct cfi_cntr, cntr);

	return cfi_cntr_update(fcntr, &cntr->value, value, true);
}

static int cfi_cntr_set(struct fid_cntr *fcntr, uint64_t value)
{
	struct cfi_cntr *cntr = container_of(fcntr, struct cfi_cntr, cntr);

	return cfi_cntr_update(fcntr, &cntr->value, value, false);
}

static int cfi_cntr_adderr(struct fid_cntr *fcntr, uint64_t value)
{
	struct cfi_cntr *cntr = container_of(fcntr, struct cfi_cntr, cntr);

	return cfi_cntr_update(fcntr, &cntr->err, value, true);
}

static int cfi_cntr_seterr(struct fid_cntr *fcntr, uint64_t value)
{
	struct cfi_cntr *cntr = container_of(fcntr, struct cfi_cntr, cntr);

	return cfi_cntr_update(fcntr, &cntr->err, value, false);
}

/*
 * Until the value reaches threshold: 0; -FI_ETIMEDOUT after timeout ms
 * (negative: none); -FI_EAVAIL as soon as an operation fails (the error
 * count moved), as libfabric's own counters do.
 */
static int cfi_cntr_wait(struct fid_cntr *fcntr, uint64_t threshold,
			 int timeout)
{
	struct cfi_cntr *cntr = container_of(fcntr, struct cfi_cntr, cntr);
	struct cfi_fabric *fab = cntr->fab;
	uint64_t deadline = cfi_deadline(timeout), err;
	int ret;

	cfi_lock(fab);
	err = cntr->err;
	for (;;) {
		cfi_progress(fab, false);
		if (cntr->value >= threshold) {
			cntr->seen = cntr->value + cntr->err;
			ret = 0;
			break;
		}
		if (cntr->err != err) {
			ret = -FI_EAVAIL;
			break;
		}
		if (cfi_wait_some(fab, &cntr->armed, true, deadline)) {
			ret = -FI_ETIMEDOUT;
			break;
		}
	}
	cfi_unlock(fab);
	return ret;
}

static int cfi_cntr_close(struct fid *fid)
{
	struct cfi_cntr *cntr = container_of(fid, struct cfi_cntr, cntr.fid);
	struct cfi_fabric *fab = cntr->fab;

	cfi_lock(fab);
	if (cntr->refs) {
		cfi_unlock(fab);
		return -FI_EBUSY;	/* an endpoint counts into it */
	}
	fab->cqs_armed -= cntr->armed;
	fab->refs--;
	cfi_unlock(fab);
	free(cntr);
	return 0;
}

static int cfi_cntr_control(struct fid *fid, int command, void *arg)
{
	struct cfi_cntr *cntr = container_of(fid, struct cfi_cntr, cntr.fid);

	return cfi_wait_control(cntr->fab, cntr->wait_obj, command, arg);
}

static struct fi_ops cfi_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cfi_cntr_close,
	.bind = (void *)cfi_enosys,
	.control = cfi_cntr_control,
	.ops_open = (void *)cfi_enosys,
	.tostr = (void *)cfi_enosys,
	.ops_set = (void *)cfi_enosys,
};

static struct fi_ops_cntr cfi_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = cfi_cntr_read,
	.readerr = cfi_cntr_readerr,
	.add = cfi_cntr_add,
	.set = cfi_cntr_set,
	.wait = cfi_cntr_wait,
	.adderr = cfi_cntr_adderr,
	.seterr = cfi_cntr_seterr,
};

/* fid is a counter of ours (fi_ep_bind(), fi_trywait()) */
struct cfi_cntr *cfi_cntr_of(struct fid *fid)
{
	if (!fid || fid->fclass != FI_CLASS_CNTR || fid->ops != &cfi_cntr_fi_ops)
		return NULL;
	return container_of(fid, struct cfi_cntr, cntr.fid);
}

int cfi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		  struct fid_cntr **fcntr, void *context)
{
	struct cfi_domain *d = container_of(domain, struct cfi_domain, dom);
	enum fi_wait_obj wait_obj = FI_WAIT_FD;
	struct cfi_cntr *cntr;
	int ret;

	if (!fcntr)
		return -FI_EINVAL;
	if (attr) {
		/* FI_CNTR_EVENTS_COMP, the one kind of event there is */
		if (attr->events != FI_CNTR_EVENTS_COMP || attr->flags)
			return -FI_EINVAL;
		ret = cfi_wait_obj(attr->wait_obj, &wait_obj);
		if (ret)
			return ret;
	}
	cntr = calloc(1, sizeof(*cntr));
	if (!cntr)
		return -FI_ENOMEM;
	cntr->fab = d->fab;
	cntr->wait_obj = wait_obj;
	cntr->cntr.fid.fclass = FI_CLASS_CNTR;
	cntr->cntr.fid.context = context;
	cntr->cntr.fid.ops = &cfi_cntr_fi_ops;
	cntr->cntr.ops = &cfi_cntr_ops;
	cfi_lock(d->fab);
	d->fab->refs++;
	cfi_unlock(d->fab);
	*fcntr = &cntr->cntr;
	return 0;
}
