// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: the device (context) object.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <clanq/admin.h>

#include "fork.h"

static int clanq_ioc_query(const struct clanq_dev *dev, struct clanq_ioc_query *q)
{
	memset(q, 0, sizeof(*q));
	if (clanq_ioctl(dev->fd, CLANQ_IOC_QUERY, q) < 0)
		return -errno;
	return 0;
}

int clanq_query(const struct clanq_dev *dev, struct clanq_nic_info *info)
{
	struct clanq_ioc_query q;
	int err = clanq_ioc_query(dev, &q);

	if (err)
		return err;
	memset(info, 0, sizeof(*info));
	info->abi_version = q.abi_version;
	info->node = q.node;
	info->nr_nics = q.nr_nics;
	info->ctx_entries = q.ctx_entries;
	return 0;
}

int clanq_open(struct clanq_dev *dev, const char *path)
{
	struct clanq_ioc_query q;
	int fd, err;

	fd = open(path ? path : CLANQ_DEV_PREFIX "0", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dev->fd = fd;
	/* tracked first: the query must not take it for an inherited one */
	err = clanq_fork_track(fd);
	if (!err)
		err = clanq_ioc_query(dev, &q);
	if (!err && q.abi_version != CLANQ_ABI_VERSION)
		err = -EPROTO;
	if (err) {
		clanq_fork_untrack(fd);
		close(fd);
		dev->fd = -1;
		return err;
	}
	dev->node = q.node;
	dev->nr_nics = q.nr_nics;
	return 0;
}

int clanq_open_nic(struct clanq_dev *dev, unsigned int index)
{
	char path[32];

	snprintf(path, sizeof(path), CLANQ_DEV_PREFIX "%u", index);
	return clanq_open(dev, path);
}

int clanq_close(struct clanq_dev *dev)
{
	int fd = dev->fd;

	dev->fd = -1;
	clanq_fork_untrack(fd);
	if (fd >= 0 && close(fd) < 0)
		return -errno;
	return 0;
}

int clanq_ctx_entries(const struct clanq_dev *dev, uint64_t *entries)
{
	struct clanq_ioc_query q;
	int err = clanq_ioc_query(dev, &q);

	if (!err)
		*entries = q.ctx_entries;
	return err;
}

int clanq_last_error(const struct clanq_dev *dev, char *buf, size_t len)
{
	struct clanq_ioc_last_error e;
	int saved = errno;

	memset(&e, 0, sizeof(e));
	if (len)
		buf[0] = '\0';
	if (dev && clanq_inherited(dev->fd)) {
		/* the parent's notes are the parent's */
		if (len)
			snprintf(buf, len, "this context was opened before fork(): "
				 "it is the parent's; the child must open its own");
		return -CLANQ_FORK_ERR;
	}
	if (!dev || dev->fd < 0 || clanq_ioctl(dev->fd, CLANQ_IOC_LAST_ERROR, &e) < 0) {
		errno = saved;
		return 0;
	}
	errno = saved;
	/* the driver's words, NUL-terminated by it; never trusted to be */
	e.msg[sizeof(e.msg) - 1] = '\0';
	if (len)
		snprintf(buf, len, "%s", e.msg);
	return e.seq ? e.err : 0;
}

const char *clanq_strerror_last(const struct clanq_dev *dev)
{
	static __thread char msg[CLANQ_ERR_MAX];

	clanq_last_error(dev, msg, sizeof(msg));
	return msg;
}

int clanq_open_explain(const char *path, int err, char *buf, size_t len)
{
	const char *dev = path ? path : CLANQ_DEV_PREFIX "0";
	const struct group *gr;
	struct stat st;
	char gname[32];

	switch (err) {
	case -EACCES:
		if (stat(dev, &st) < 0)
			break;
		gr = getgrgid(st.st_gid);
		if (gr)
			snprintf(gname, sizeof(gname), "%s", gr->gr_name);
		else
			snprintf(gname, sizeof(gname), "%u", (unsigned int)st.st_gid);
		return snprintf(buf, len,
				"%s: permission denied: it is mode %04o, group %s; "
				"add this user to group '%s' (then log in again)",
				dev, (unsigned int)(st.st_mode & 07777), gname, gname);
	case -ENOENT:
		return snprintf(buf, len,
				"%s: no such NIC: is clanq.ko loaded, and is the "
				"index below its nr_nics?", dev);
	case -EPROTO:
		return snprintf(buf, len,
				"%s: the driver speaks another ABI version than this "
				"library (%u): install matching versions", dev,
				CLANQ_ABI_VERSION);
	}
	return snprintf(buf, len, "%s: %s", dev, strerror(-err));
}

int clanq_open_nic_explain(unsigned int index, int err, char *buf, size_t len)
{
	char path[sizeof(CLANQ_DEV_PREFIX) + 10];

	snprintf(path, sizeof(path), CLANQ_DEV_PREFIX "%u", index);
	return clanq_open_explain(path, err, buf, len);
}

int clanq_ep_stats(const struct clanq_dev *dev, struct clanq_ep_stat *recs,
		   unsigned int count, unsigned int skip, unsigned int *total)
{
	struct clanq_ioc_ep_stats a;

	memset(&a, 0, sizeof(a));
	a.buf = (uintptr_t)recs;
	a.count = count;
	a.skip = skip;
	if (clanq_ioctl(dev->fd, CLANQ_IOC_EP_STATS, &a) < 0)
		return -errno;
	if (total)
		*total = a.total;
	return (int)a.count;
}
