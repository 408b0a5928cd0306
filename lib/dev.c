// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: the device (context) object.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <clanq.h>

int clanq_query(const struct clanq_dev *dev, struct clanq_ioc_query *q)
{
	memset(q, 0, sizeof(*q));
	if (ioctl(dev->fd, CLANQ_IOC_QUERY, q) < 0)
		return -errno;
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
	err = clanq_query(dev, &q);
	if (!err && q.abi_version != CLANQ_ABI_VERSION)
		err = -EPROTO;
	if (err) {
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
	if (fd >= 0 && close(fd) < 0)
		return -errno;
	return 0;
}

int clanq_ctx_entries(const struct clanq_dev *dev, __u64 *entries)
{
	struct clanq_ioc_query q;
	int err = clanq_query(dev, &q);

	if (!err)
		*entries = q.ctx_entries;
	return err;
}
