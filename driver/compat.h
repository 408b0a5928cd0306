/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel APIs that differ between the LTS releases clanq builds
 * against (6.1 and 6.12). Keep it small: one shim per difference, keyed
 * on a feature test in driver/Kbuild, not on version numbers.
 */
#ifndef _CLANQ_COMPAT_H
#define _CLANQ_COMPAT_H

#include <linux/mm.h>

#ifndef CLANQ_HAVE_VM_FLAGS_SET
/* 6.3 made vm_flags read-only and added these (under mmap_lock, write) */
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

#endif /* _CLANQ_COMPAT_H */
