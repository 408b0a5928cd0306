// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The physical limits: what two processes on this machine can do with
 * no library, no driver and no system call.
 *
 * shm/spin (lat): a message copied into shared memory, a sequence word
 * release-stored after it, the peer spinning on that word, copying the
 * message out and back the same way.
 *
 * memcpy/1-core (bw): one core copying between two buffers of the
 * message size that stay in place (as a ring's slots do); what any
 * copy-based transport on this CPU is bounded by.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "cb.h"
#include "../shm_mailbox.h"

#define SHM_MAX		4096
#define BOX		mailbox_size(SHM_MAX)

/* The echo side: every message back as it came; length 0 ends it. */
static int shm_echo(void *arg)
{
	struct mailbox *ping = arg, *pong = (struct mailbox *)((char *)ping + BOX);
	unsigned char buf[SHM_MAX];

	for (uint64_t seq = 1;; seq++) {
		size_t len = mailbox_get(ping, buf, SHM_MAX, seq);

		if (!len)
			return 0;
		mailbox_put(pong, buf, len, seq);
	}
}

int shm_lat(void)
{
	unsigned long long sizes[8];
	unsigned int nr = cb_lat_sizes(sizes);
	unsigned char out[SHM_MAX], in[SHM_MAX];
	struct mailbox *ping, *pong;
	double *v;
	uint64_t seq = 0;
	pid_t pid;

	if (!cb_wanted("shm"))
		return 0;
	v = calloc(cb.iters, sizeof(*v));
	if (!v)
		cb_die("memory", -ENOMEM);
	ping = cb_shared(2 * BOX);
	pong = (struct mailbox *)((char *)ping + BOX);
	pid = cb_fork(shm_echo, ping);
	for (unsigned int s = 0; s < nr; s++) {
		unsigned long long warm = cb.iters / 10 < 100 ? cb.iters / 10 : 100;
		size_t len = sizes[s];
		struct cb_row r;

		cb_progress("lat shm/spin %zu B", len);
		for (unsigned long long i = 0; i < warm + cb.iters; i++) {
			uint64_t t0;

			memset(out, (int)(i & 0xff), len);
			t0 = cb_now_ns();
			mailbox_put(ping, out, len, ++seq);
			if (mailbox_get(pong, in, SHM_MAX, seq) != len || memcmp(in, out, len)) {
				cb_kill(pid);
				cb_die("shm ping-pong: the answer differs", -EIO);
			}
			if (i >= warm)
				v[i - warm] = (double)(cb_now_ns() - t0) / 1000.0;
		}
		cb_row_init(&r, "lat", "shm", "spin", len);
		cb_row_lat(&r, v, cb.iters);
		r.syscalls = 0;		/* none: nothing here enters the kernel */
		cb_emit(&r);
	}
	mailbox_put(ping, out, 0, ++seq);
	if (cb_reap(pid, NULL))
		cb_die("shm ping-pong: the echo side failed", -EIO);
	cb_unshare(ping, 2 * BOX);
	free(v);
	return 0;
}

int memcpy_bw(void)
{
	unsigned long long sizes[32];
	unsigned int nr = cb_sizes(8, 4ull << 20, sizes, 32);
	unsigned char *src, *dst;

	if (!cb_wanted("memcpy"))
		return 0;
	src = malloc(4ull << 20);
	dst = malloc(4ull << 20);
	if (!src || !dst)
		cb_die("memory", -ENOMEM);
	memset(src, 0x5a, 4ull << 20);
	memset(dst, 0, 4ull << 20);
	for (unsigned int s = 0; s < nr; s++) {
		size_t len = sizes[s];
		unsigned long long n = 0, batch = 1 + (1ull << 20) / len;
		uint64_t t0 = cb_now_ns(), t;
		struct cb_row r;

		cb_progress("bw memcpy %zu B", len);
		do {
			for (unsigned long long i = 0; i < batch; i++) {
				memcpy(dst, src, len);
				/* the copy must happen: the compiler sees dst read */
				__asm__ __volatile__("" : : "r"(dst) : "memory");
			}
			n += batch;
			t = cb_now_ns() - t0;
		} while ((double)t < cb.seconds * 1e9 / 2);
		cb_row_init(&r, "bw", "memcpy", "1-core", len);
		r.iters = n;
		r.bw_mibs = (double)n * (double)len / ((double)t / 1e9) / (1 << 20);
		r.mpps = (double)n / ((double)t / 1e3);
		r.syscalls = 0;
		cb_emit(&r);
	}
	free(src);
	free(dst);
	return 0;
}

/*
 * The CPU's own atomics between two processes: a word both compare-and-
 * swap (lock cmpxchg on x86), this side 0 -> 1 and then waiting for 0,
 * the other 1 -> 0: a round trip of two CASes and two cache-line
 * transfers, what clanq's rdma-1s-fadd does with the engine in between.
 */
static int cas_echo(void *arg)
{
	uint64_t *w = arg;

	for (;;) {
		uint64_t one = 1;

		while (!__atomic_compare_exchange_n(w, &one, 0, false, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE)) {
			if (one == 2)
				return 0;
			one = 1;
			__builtin_ia32_pause();
		}
	}
}

int shm_cas_lat(void)
{
	unsigned long long warm = cb.iters / 10 + 1;
	uint64_t *w;
	double *v;
	struct cb_row r;
	pid_t pid;

	if (!cb_wanted("shm"))
		return 0;
	v = calloc(cb.iters, sizeof(*v));
	if (!v)
		cb_die("memory", -ENOMEM);
	w = cb_shared(64);
	pid = cb_fork(cas_echo, w);
	cb_progress("lat shm/cas-pingpong 8 B");
	for (unsigned long long i = 0; i < warm + cb.iters; i++) {
		uint64_t t0 = cb_now_ns(), zero = 0;

		while (!__atomic_compare_exchange_n(w, &zero, 1, false, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE)) {
			zero = 0;
			__builtin_ia32_pause();
		}
		while (__atomic_load_n(w, __ATOMIC_ACQUIRE))
			__builtin_ia32_pause();
		if (i >= warm)
			v[i - warm] = (double)(cb_now_ns() - t0) / 1000.0;
	}
	__atomic_store_n(w, 2, __ATOMIC_RELEASE);
	if (cb_reap(pid, NULL))
		cb_die("shm cas ping-pong: the other side failed", -EIO);
	cb_row_init(&r, "lat", "shm", "cas-pingpong", 8);
	cb_row_lat(&r, v, cb.iters);
	r.syscalls = 0;
	snprintf(r.note, sizeof(r.note), "lock cmpxchg between two processes");
	cb_emit(&r);
	cb_unshare(w, 64);
	free(v);
	return 0;
}
