// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: what a polling loop needs beside the queues: the clock, and
 * the pause hint, the one place that names an architecture.
 */
#define _POSIX_C_SOURCE 200809L	/* clock_gettime(), CLOCK_MONOTONIC */
#include <time.h>

#include <clanq.h>

uint64_t clanq_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void clanq_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}
