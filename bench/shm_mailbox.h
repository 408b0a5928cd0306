/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The raw shared-memory round trip, the physical limit clanq's round
 * trips are compared with (shm_pingpong, clanq-bench's shm/spin): a
 * message copied into a mailbox, a sequence word release-stored after
 * it on its own cache line, the peer spinning on that word. Header-only.
 */
#ifndef CLANQ_BENCH_SHM_MAILBOX_H
#define CLANQ_BENCH_SHM_MAILBOX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct mailbox {
	uint64_t seq __attribute__((aligned(64)));
	uint64_t len;
	unsigned char data[] __attribute__((aligned(64)));
};

/* Bytes for a mailbox that holds max bytes, page-rounded. */
static inline size_t mailbox_size(size_t max)
{
	return (sizeof(struct mailbox) + max + 4095) & ~(size_t)4095;
}

static inline void mailbox_put(struct mailbox *m, const void *buf, size_t len,
			       uint64_t seq)
{
	memcpy(m->data, buf, len);
	m->len = len;
	__atomic_store_n(&m->seq, seq, __ATOMIC_RELEASE);
}

/* Wait for message seq; copies at most max bytes, returns its length. */
static inline size_t mailbox_get(struct mailbox *m, void *buf, size_t max,
				 uint64_t seq)
{
	size_t len;

	while (__atomic_load_n(&m->seq, __ATOMIC_ACQUIRE) != seq)
		__builtin_ia32_pause();
	len = m->len;
	memcpy(buf, m->data, len < max ? len : max);
	return len;
}

#endif /* CLANQ_BENCH_SHM_MAILBOX_H */
