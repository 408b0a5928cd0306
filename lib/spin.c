// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: what a polling loop needs beside the queues: the clock, the
 * pause hint (the one place that names an architecture), and how long a
 * wait spins unless told.
 */
#define _GNU_SOURCE		/* sched_getaffinity(), CPU_COUNT() */
#include <sched.h>
#include <time.h>

#include <clanq.h>

#include "spin.h"

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

uint64_t clanq_spin_default(uint64_t spin_ns)
{
	cpu_set_t cpus;

	/*
	 * A spin waits for a writer to run, or for the kernel's work that
	 * completes the write (a wire's completion, the engine's turn). With
	 * one CPU to run on, the spinner holds that CPU from all of them,
	 * and every microsecond spun is a microsecond added: measured over
	 * the verbs wire with one vCPU, a 20 us spin made the round trip
	 * 1.2-1.3x longer (docs/decisions.md, "The verbs wire"). A mask the
	 * call cannot give (more CPUs than cpu_set_t holds) is many CPUs.
	 */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 &&
	    CPU_COUNT(&cpus) <= 1)
		return 0;
	return spin_ns;
}
