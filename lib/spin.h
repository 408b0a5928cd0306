/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libclanq's default spin (spin.c): the spin time an event queue, a
 * tripwire or a net starts with.
 */
#ifndef CLANQ_LIB_SPIN_H
#define CLANQ_LIB_SPIN_H

#include <stdint.h>

/*
 * @spin_ns where the calling thread may run on more than one CPU; 0 where
 * it may run on one only, since a spin there holds the CPU its writer
 * needs. One system call: for creating an object, not for a wait.
 */
__attribute__((visibility("hidden")))
uint64_t clanq_spin_default(uint64_t spin_ns);

#endif
