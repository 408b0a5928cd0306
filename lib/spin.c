// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: what a polling loop needs beside the queues. The clock is
 * inline in clanq.h; the pause hint is here, the one place that names an
 * architecture.
 */
#include <clanq.h>

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
