/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq: the application library.
 *
 * Conventions (as liburing and ef_vi): names are clanq_<object>_<verb>;
 * every call returns >= 0 on success or a negative errno; the caller owns
 * every struct and passes it explicitly; the library has no global state.
 * Fast-path calls are static inline in this header and make no system
 * call; everything else is in lib/.
 */
#ifndef _CLANQ_H
#define _CLANQ_H

#include <uapi/clanq.h>
#include <clanq/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A handle on one soft NIC: an open context of /dev/clanqN. */
struct clanq_dev {
	int fd;			/**< the context's file descriptor */
	__u32 node;		/**< this NIC's node id */
	__u32 nr_nics;		/**< soft NICs in the kernel */
};

/**
 * \brief Open a context on a NIC and check the ABI.
 * \param dev   filled in on success
 * \param path  device node; NULL means CLANQ_DEV_PREFIX "0"
 * \return 0; -ENOENT if there is no such device; -EPROTO if the driver
 *         speaks another ABI version; another -errno from open/ioctl.
 */
int clanq_open(struct clanq_dev *dev, const char *path);

/**
 * \brief Open /dev/clanq<index>.
 * \return as clanq_open().
 */
int clanq_open_nic(struct clanq_dev *dev, unsigned int index);

/**
 * \brief Close a context; every object created through it is freed.
 * \return 0, or -errno from close().
 */
int clanq_close(struct clanq_dev *dev);

/**
 * \brief Ask the driver what this device is (CLANQ_IOC_QUERY).
 * \param q  filled in on success
 * \return 0 or -errno.
 */
int clanq_query(const struct clanq_dev *dev, struct clanq_query *q);

#ifdef __cplusplus
}
#endif

#endif /* _CLANQ_H */
