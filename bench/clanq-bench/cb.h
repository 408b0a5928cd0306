/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * clanq-bench: what its parts share.
 *
 * The tool measures clanq and the baselines a user would pick instead in
 * one process tree, one run, one kernel: every measurement is a row
 * (struct cb_row) handed to cb_emit(), which prints it as a table line,
 * CSV or JSON, with its ratio to a baseline row measured before it.
 *
 * Every part follows the same rules:
 *  - a round trip is timed on the measuring side, from before the send
 *    to after the answer was read, and the answer is checked;
 *  - the peer is a forked child (cb_fork()), or an exec'd tool;
 *  - system calls are counted, not estimated: the driver's entry counter
 *    for clanq, the program's own count of the calls it makes for the
 *    kernel's paths (cb_sys()); both ends are summed, per message
 *    (round trip for lat/idle, message for bw/load); -1 where a tool
 *    cannot say (UCX, libfabric, perftest);
 *  - server CPU time comes from the server's rusage (cb_reap()).
 */
#ifndef CLANQ_BENCH_CB_H
#define CLANQ_BENCH_CB_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#include "../bench_stats.h"

#define CB_FAIL		1
#define CB_USAGE	2

/* The run's settings (main.c parses them). */
struct cb_opts {
	unsigned long long iters;	/* round trips per lat point */
	double seconds;			/* per bw / load point */
	bool quick;			/* the smoke run: few sizes, few iterations */
	unsigned int nic_a, nic_b;	/* two clanq NICs: client and server side */
	const char *only;		/* comma list of impls to run, or NULL: all */
	const char *tools;		/* where ucx_perftest & co are (PATH if NULL) */
	int cpu_cli, cpu_srv;		/* pin the two sides there (-1: no pinning) */
};
extern struct cb_opts cb;

/* One measurement. Unused numbers stay negative (printed as "-"). */
struct cb_row {
	const char *test;		/* "lat", "bw", "idle", "load" */
	char impl[24];			/* "clanq", "shm", "ucx", "udp", ... */
	char mode[32];			/* "pio-poll", "block", "busypoll", ... */
	unsigned long long bytes;
	unsigned long long param;	/* idle: connections held; load: in flight */
	unsigned long long iters;	/* round trips or messages measured */
	struct lat lat;			/* usec; valid if has_lat */
	double stdev;
	bool has_lat;
	double bw_mibs, mpps;		/* bw, load: MiB/s and million msgs/s */
	double syscalls;		/* per message, both ends; -1: unknown */
	double cpu_us;			/* server CPU per message (usec); -1 */
	char note[112];			/* what the reader must know, or "" */
};

/* A row with every number unknown. */
void cb_row_init(struct cb_row *r, const char *test, const char *impl,
		 const char *mode, unsigned long long bytes);

/* Fill r->lat, r->stdev, r->iters from n samples in usec (sorted in place). */
void cb_row_lat(struct cb_row *r, double *usec, unsigned long long n);

/*
 * Print a row. Its ratio column is r's typical (lat/idle), bandwidth
 * (bw) or cpu per message (load) over the same number of the most recent
 * row with the same test, bytes and param whose impl/mode is the
 * baseline named by cb_baseline() (or "-" if none was measured).
 */
void cb_emit(const struct cb_row *r);

/* The last row printed of test impl/mode at bytes, or NULL. */
const struct cb_row *cb_find_row(const char *test, const char *impl, const char *mode,
				 unsigned long long bytes);

/* Name the baseline the rows that follow are compared with ("shm/spin"). */
void cb_baseline(const char *test, const char *impl_mode);

/* Should impl run (--only)? */
bool cb_wanted(const char *impl);

/* Progress for long runs, on stderr, overwritten in place. */
void cb_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A failure that ends the run, with what failed and why. */
void cb_die(const char *what, int err) __attribute__((noreturn));

/* A measurement that could not run (a missing tool): a note, not a failure. */
void cb_skip(const char *test, const char *impl, const char *mode, const char *why);

static inline uint64_t cb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Shared memory for a parent and the children it forks (MAP_SHARED |
 * MAP_ANONYMOUS, zeroed), page-rounded; dies on failure.
 */
void *cb_shared(size_t bytes);
void cb_unshare(void *p, size_t bytes);

/*
 * Fork a child that runs fn(arg) and exits with its return value; it dies
 * with the parent (PR_SET_PDEATHSIG). cb_reap() waits for it and returns
 * its exit status (-1 if killed), filling *ru with its resource usage
 * if ru is not NULL; cb_kill() kills and reaps it.
 */
pid_t cb_fork(int (*fn)(void *arg), void *arg);
int cb_reap(pid_t pid, struct rusage *ru);
void cb_kill(pid_t pid);

/* CPU time (user + system) in usec of an rusage. */
double cb_cpu_us(const struct rusage *ru);

/* A start flag for children: the parent releases them together. */
void cb_spin_until(volatile uint32_t *word, uint32_t value);

/*
 * The parent's wait for a word a child sets: dies saying what if the
 * child ends first (it crashed, or failed before it could say so),
 * rather than spinning for ever.
 */
void cb_wait_child(volatile uint32_t *word, uint32_t value, pid_t pid, const char *what);

/*
 * Counted system calls for the kernel's paths: cb_sys(call) evaluates
 * the call and counts one, so a program's count is what it did.
 */
extern __thread unsigned long long cb_syscalls;
#define cb_sys(call)	(cb_syscalls++, (call))

/* The message sizes of a test, within [lo, hi]: powers of two (quick: fewer). */
unsigned int cb_sizes(unsigned long long lo, unsigned long long hi,
		      unsigned long long *out, unsigned int max);

/*
 * The points every impl measures, so rows line up: lat sizes (8 B ..
 * 4 KiB), idle connections held (1 .. 10,000), load: clients (1 .. 16).
 * Each returns how many it wrote to out (at most 8).
 */
unsigned int cb_lat_sizes(unsigned long long *out);
unsigned int cb_idle_counts(unsigned long long *out);
unsigned int cb_load_clients(unsigned long long *out);

/* Run an external tool, stdout captured into buf (NUL-terminated). */
int cb_run_tool(char *const argv[], char *const envp_add[], char *buf,
		size_t size, struct rusage *ru);

/* ---- the parts: each returns 0, or -errno after saying what failed ---- */

/* clanq.c: clanq's own modes */
int clanq_lat(void);	/* lat: pio/rdma/oob, poll/block */
int clanq_bw(void);
int clanq_idle(void);
int clanq_load(void);

/* base_shm.c: the physical limits */
int shm_lat(void);	/* raw shared-memory spin ping-pong */
int shm_cas_lat(void);	/* the CPU's lock cmpxchg ping-pong */
int memcpy_bw(void);	/* single-core memcpy */

/* base_kernel.c: the kernel's own paths */
int kernel_lat(void);	/* udp, tcp (block, busypoll), eventfd, pipe */
int kernel_bw(void);	/* udp / tcp / pipe stream */
int kernel_idle(void);	/* epoll and poll() servers holding N idle sockets */
int kernel_load(void);	/* single-threaded UDP + epoll echo server */

/* base_peers.c: the libraries and tools users link instead */
int peers_lat(void);	/* ucx_perftest tag_lat, fi_pingpong, ib_write_lat */
int peers_bw(void);	/* ucx_perftest tag_bw, ib_write_bw */
int peers_load(void);	/* UCX's CPU per message at saturation */
int peers_native_lat(void);	/* tag_lat, fi_pingpong over shm, pinned */
int peers_native_bw(const unsigned long long *sizes, unsigned int n); /* tag_bw, pinned */

/* native.c: the library's data path on this machine's CPUs, no driver */
int native_lat(void);	/* clanq and raw shm round trips, seccomp strict */
int native_bw(void);	/* message rate 8 / 64 B, bandwidth 4 KiB .. 4 MiB */
int native_insns(void);	/* instructions per message, callgrind */
int native_summary(void);	/* the targets: met or not */
int native_insns_child(const char *impl, size_t len, unsigned long long n);
/* Pin the calling process to cpu (-1: leave it). */
void cb_pin(int cpu);

#endif /* CLANQ_BENCH_CB_H */
