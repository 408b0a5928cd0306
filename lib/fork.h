/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq's side of fork() (fork.c): which descriptors a process
 * inherited, and the one ioctl() every library call goes through.
 */
#ifndef CLANQ_LIB_FORK_H
#define CLANQ_LIB_FORK_H

#include <stdbool.h>

/* what the library says of an object it was given across fork() */
#define CLANQ_FORK_ERR		EBADFD

/* nonzero in a process forked from one that used the library */
extern int clanq_fork_gen __attribute__((visibility("hidden")));

__attribute__((visibility("hidden")))
bool clanq_fork_inherited_slow(int fd);

/*
 * Did this process inherit @fd (a context or evq the library opened)
 * across fork()? A load and a predicted branch in a process that was
 * never forked from a user of the library: no system call.
 */
static inline bool clanq_inherited(int fd)
{
	if (__builtin_expect(!__atomic_load_n(&clanq_fork_gen, __ATOMIC_RELAXED), 1))
		return false;
	return clanq_fork_inherited_slow(fd);
}

/* Record @fd, which this process just opened (-EMFILE: past the table). */
__attribute__((visibility("hidden")))
int clanq_fork_track(int fd);

/* @fd is about to be closed: it names nothing of ours any more. */
__attribute__((visibility("hidden")))
void clanq_fork_untrack(int fd);

/*
 * ioctl(), unless @fd was inherited: then a call that lets go of an
 * object succeeds without entering the driver (the object is the
 * parent's; the child only drops its copies), and any other call fails
 * with errno CLANQ_FORK_ERR.
 */
__attribute__((visibility("hidden")))
int clanq_ioctl(int fd, unsigned long cmd, void *arg);

#endif
