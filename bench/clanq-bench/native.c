// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-bench native: the data path on this machine's own CPUs.
 *
 * After set-up, a clanq connection is plain loads and stores on shared
 * pages: the sender's PIO stores into the peer's ring, the receiver's
 * loads from its own. So the library's own clanq_send() and
 * clanq_recv() can run between two processes on real hardware with the
 * driver's set-up replaced by one shared anonymous mapping laid out as
 * the driver lays it out: each side's receive ring (struct
 * clanq_ring_hdr, then the records: lib/ring.h), the ring
 * region's armed bitmap (all clear: a polling peer arms nothing), and
 * each side's endpoint segment (counters, then the OOB queue placed by
 * clanq_q_layout(), as driver/endpoint.c places it). The connection
 * structs are filled as lib/conn.c fills them after a handshake. Any
 * system call the path makes is a failure: both processes run their
 * timed loops under a seccomp filter that kills them on any call but
 * exit (strict(), below), and their times come from the TSC, which
 * needs no system call.
 *
 * Beside it in the same run: the raw cache-line ping-pong
 * (shm_mailbox.h) timed the same way, memcpy on one core, UCX's
 * ucx_perftest and libfabric's fi_pingpong over shared memory
 * (base_peers.c), every process pinned (client, server) to two CPUs.
 * Instructions per message come from valgrind's callgrind, collection
 * on in clanq_send() and clanq_recv() only (native_insns()).
 */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cb.h"
#include "../shm_mailbox.h"
#include "../../lib/net_internal.h"

#define NAT_LAT_RING	(16u << 10)	/* as clanq.c's LAT_RING */
#define NAT_LAT_MAX	4096u
#define NAT_OOB_SLOTS	64u
#define NAT_STOP_LEN	1u		/* a 1-byte message ends an echo */

/* ---- the TSC: a clock with no system call ---- */

static double tsc_per_ns;

static inline uint64_t nat_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("lfence" ::: "memory");
	return __builtin_ia32_rdtsc();
#else
#error "clanq-bench native needs a cycle counter readable without a system call"
#endif
}

static void tsc_calibrate(void)
{
	uint64_t n0, t0, n1, t1;

	if (tsc_per_ns > 0)
		return;
	n0 = cb_now_ns();
	t0 = nat_tsc();
	while (cb_now_ns() - n0 < 50 * 1000 * 1000)
		;
	n1 = cb_now_ns();
	t1 = nat_tsc();
	tsc_per_ns = (double)(t1 - t0) / (double)(n1 - n0);
}

/* ---- the driver's layout, without the driver ---- */

/*
 * One side of a connection: its receive ring's region (what the peer's
 * aperture maps), the region's armed bitmap, its net's endpoint segment.
 */
struct nat_side {
	char *ring;
	uint32_t *armed;
	void *seg;
	size_t seg_size;
	struct clanq_queue_off oob;
};

struct nat_pair {
	void *mem;
	size_t size;
	uint64_t cap;			/* record bytes of each ring */
	struct nat_side side[2];
};

static size_t page_up(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

/* Ring regions as lib/conn.c sizes them: whole pages, header included. */
static void nat_pair_map(struct nat_pair *p, uint64_t want)
{
	size_t region = page_up(CLANQ_RING_HDR + want);
	size_t armed = page_up((region / 64 + 63) / 64 * 8);
	struct clanq_queue_off qo;
	size_t seg;
	char *at;

	seg = clanq_q_layout(&qo, sizeof(struct clanq_ep_counters), NAT_OOB_SLOTS,
			     sizeof(struct clanq_oob_msg));
	if (!seg)
		cb_die("native: the OOB queue's layout", -EINVAL);
	seg = page_up(seg);
	memset(p, 0, sizeof(*p));
	p->cap = region - CLANQ_RING_HDR;
	if (p->cap > CLANQ_RING_CAP_MAX)
		p->cap = CLANQ_RING_CAP_MAX;
	p->size = 2 * (region + armed + seg);
	p->mem = cb_shared(p->size);
	at = p->mem;
	for (int s = 0; s < 2; s++) {
		p->side[s].ring = at;
		at += region;
		p->side[s].armed = (uint32_t *)at;
		at += armed;
		p->side[s].seg = at;
		p->side[s].seg_size = seg;
		p->side[s].oob = qo;
		at += seg;
		/*
		 * The smoke test's way to watch the proof fail: a tripwire
		 * armed on each ring's header, as a peer blocked in the driver
		 * leaves it, so every send owes the flush, a system call.
		 */
		if (getenv("CLANQ_BENCH_NATIVE_ARMED"))
			p->side[s].armed[0] = 1;
	}
}

static void nat_pair_unmap(struct nat_pair *p)
{
	cb_unshare(p->mem, p->size);
}

/* One process's view of its side s: a net of one connection. */
struct nat_conn {
	struct clanq_net net;
	struct clanq_conn c;
	struct clanq_conn *conns[1];
	uint32_t gen[1];
};

/* What lib/conn.c leaves in a connection once the handshake is done. */
static void nat_conn_init(struct nat_conn *n, struct nat_pair *p, int s)
{
	struct nat_side *me = &p->side[s], *peer = &p->side[!s];
	struct clanq_net *net = &n->net;
	struct clanq_conn *c = &n->c;
	int err;

	memset(n, 0, sizeof(*n));
	net->ep.fd = -1;
	err = clanq_q_init(&net->ep.oob, me->seg, me->seg_size, &me->oob);
	if (err)
		cb_die("native: the OOB queue", err);
	net->ep.counters = me->seg;
	net->conns = n->conns;
	net->gen = n->gen;
	net->max_conns = 1;
	net->nr_conns = 1;
	n->conns[0] = c;

	c->net = net;
	c->state = CLANQ_CONN_OPEN;
	c->rx_hdr = (struct clanq_ring_hdr *)me->ring;
	c->rx_ring = me->ring + CLANQ_RING_HDR;
	c->rx_cap = p->cap;
	c->tx.fd = -1;
	c->tx.id = 1;
	c->tx.rights = CLANQ_RIGHTS_ALL;
	c->tx.len = CLANQ_RING_HDR + p->cap;
	c->tx.map = peer->ring;
	c->tx.base = peer->ring;
	c->tx.armed = peer->armed;
	clanq_conn_tx_init(c, p->cap);
	c->rdma_threshold = CLANQ_CONN_RDMA_DEFAULT;
}

/* ---- two pinned processes in seccomp mode ---- */

static int cpu_a = -1, cpu_b = -1;

/* The first two CPUs this process may run on: client, server. */
static void pick_cpus(void)
{
	cpu_set_t set;
	int n = 0;

	if (cpu_a >= 0)
		return;
	if (sched_getaffinity(0, sizeof(set), &set))
		cb_die("native: sched_getaffinity", -errno);
	for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			*(n++ ? &cpu_b : &cpu_a) = i;
	if (n < 2)
		cb_die("native: two CPUs are needed, one per process", -EINVAL);
	cb.cpu_cli = cpu_a;
	cb.cpu_srv = cpu_b;
}

void cb_pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/*
 * From here on, any system call but exit kills the process (SIGSYS).
 * A filter, not SECCOMP_MODE_STRICT: strict mode also turns off the TSC
 * (CR4.TSD), and the TSC is how the loops are timed without a system
 * call. This filter is stricter than strict mode otherwise: not even
 * read and write pass.
 */
static void strict(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0))
		_exit(3);
}

static void __attribute__((noreturn)) strict_exit(int code)
{
	for (;;)
		syscall(SYS_exit, code);
}

/* What the parent makes of a child's end. */
static void reap_strict(pid_t pid, const char *what)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			cb_die(what, -errno);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) {
		fprintf(stderr, "clanq-bench: %s: killed by its seccomp filter: "
			"a system call on the data path\n", what);
		exit(CB_FAIL);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "clanq-bench: %s: failed (status 0x%x)\n", what, st);
		exit(CB_FAIL);
	}
}

typedef int (*child_fn)(void *arg);

struct strict_arg {
	child_fn fn;
	void *arg;
	int cpu;
};

static int strict_child(void *arg)
{
	struct strict_arg *a = arg;

	cb_pin(a->cpu);
	strict_exit(a->fn(a->arg));
}

/* Run client and server, each pinned, each strict; 0 or exit. */
static void run_two(child_fn cli, child_fn srv, void *arg, const char *what)
{
	struct strict_arg sa = { srv, arg, cpu_b }, ca = { cli, arg, cpu_a };
	pid_t s = cb_fork(strict_child, &sa), c = cb_fork(strict_child, &ca);

	reap_strict(c, what);
	reap_strict(s, what);
}

/* ---- lat: round trips, polled ---- */

/* The transports the round trip is measured on: clanq's, or the raw one. */
struct nat_lat {
	bool raw;
	struct nat_pair pair;		/* clanq */
	struct mailbox *box[2];		/* raw: ping, pong */
	unsigned long long sizes[8];
	unsigned int nr_sizes;
	unsigned long long warm, iters;
	uint64_t *cycles;		/* shared: nr_sizes x iters */
	int failed;			/* shared: first failure, -errno */
};

static void set_failed(struct nat_lat *l, int err)
{
	__atomic_store_n(&l->failed, err, __ATOMIC_RELEASE);
}

static int nat_echo(void *arg)
{
	struct nat_lat *l = arg;
	unsigned char buf[NAT_LAT_MAX];
	struct nat_conn n;
	uint64_t seq = 0;
	ssize_t got;
	int err;

	if (l->raw) {
		strict();
		for (;;) {
			size_t len = mailbox_get(l->box[0], buf, sizeof(buf), ++seq);

			if (len == NAT_STOP_LEN)
				return 0;
			mailbox_put(l->box[1], buf, len, seq);
		}
	}
	nat_conn_init(&n, &l->pair, 1);
	strict();
	for (;;) {
		while ((got = clanq_recv(&n.c, buf, sizeof(buf), CLANQ_MSG_DONTWAIT)) == -EAGAIN)
			;
		if (got == NAT_STOP_LEN)
			return 0;
		if (got < 0) {
			set_failed(l, (int)got);
			return 1;
		}
		while ((err = clanq_send(&n.c, buf, (size_t)got, CLANQ_MSG_DONTWAIT)) == -EAGAIN)
			;
		if (err) {
			set_failed(l, err);
			return 1;
		}
	}
}

static int nat_ping(void *arg)
{
	struct nat_lat *l = arg;
	unsigned char out[NAT_LAT_MAX], in[NAT_LAT_MAX];
	struct nat_conn n;
	uint64_t seq = 0;
	ssize_t got = 0;
	int err = 0;

	if (!l->raw)
		nat_conn_init(&n, &l->pair, 0);
	strict();
	for (unsigned int s = 0; s < l->nr_sizes; s++) {
		size_t len = l->sizes[s];

		for (unsigned long long i = 0; i < l->warm + l->iters; i++) {
			uint64_t t0;

			memset(out, (int)(i & 0xff), len);
			t0 = nat_tsc();
			if (l->raw) {
				mailbox_put(l->box[0], out, len, ++seq);
				got = (ssize_t)mailbox_get(l->box[1], in, sizeof(in), seq);
			} else {
				while ((err = clanq_send(&n.c, out, len, CLANQ_MSG_DONTWAIT)) == -EAGAIN)
					;
				while (!err && (got = clanq_recv(&n.c, in, sizeof(in),
							       CLANQ_MSG_DONTWAIT)) == -EAGAIN)
					;
			}
			if (err || got < 0) {
				set_failed(l, err ? err : (int)got);
				return 1;
			}
			if ((size_t)got != len || memcmp(in, out, len)) {
				set_failed(l, -EIO);
				return 1;
			}
			if (i >= l->warm)
				l->cycles[s * l->iters + i - l->warm] = nat_tsc() - t0;
		}
	}
	if (l->raw) {
		mailbox_put(l->box[0], out, NAT_STOP_LEN, ++seq);
		return 0;
	}
	while ((err = clanq_send(&n.c, out, NAT_STOP_LEN, CLANQ_MSG_DONTWAIT)) == -EAGAIN)
		;
	return err ? 1 : 0;
}

static void nat_lat_rows(struct nat_lat *l, const char *impl, const char *mode,
			 const char *note)
{
	double *v = calloc(l->iters, sizeof(*v));

	if (!v)
		cb_die("memory", -ENOMEM);
	for (unsigned int s = 0; s < l->nr_sizes; s++) {
		struct cb_row r;

		for (unsigned long long i = 0; i < l->iters; i++)
			v[i] = (double)l->cycles[s * l->iters + i] / tsc_per_ns / 1000.0;
		cb_row_init(&r, "lat", impl, mode, l->sizes[s]);
		cb_row_lat(&r, v, l->iters);
		r.syscalls = 0;		/* proven: seccomp, both ends */
		snprintf(r.note, sizeof(r.note), "%s", note);
		cb_emit(&r);
	}
	free(v);
}

static int native_lat_one(bool raw)
{
	struct nat_lat *l = cb_shared(sizeof(*l));
	size_t box = mailbox_size(NAT_LAT_MAX);

	l->raw = raw;
	l->nr_sizes = cb_lat_sizes(l->sizes);
	l->iters = cb.iters;
	l->warm = cb.iters / 10 < 1000 ? cb.iters / 10 : 1000;
	l->cycles = cb_shared(l->nr_sizes * l->iters * sizeof(uint64_t));
	if (raw) {
		l->box[0] = cb_shared(2 * box);
		l->box[1] = (struct mailbox *)((char *)l->box[0] + box);
	} else {
		nat_pair_map(&l->pair, NAT_LAT_RING);
	}
	cb_progress("lat %s natively", raw ? "shm/spin" : "clanq/pio-poll");
	run_two(nat_ping, nat_echo, l, raw ? "native lat shm/spin" : "native lat clanq");
	if (l->failed)
		cb_die(raw ? "native lat shm/spin" : "native lat clanq", l->failed);
	if (raw)
		nat_lat_rows(l, "shm", "spin", "TSC-timed; seccomp");
	else
		nat_lat_rows(l, "clanq", "pio-poll",
			     "lib's clanq_send/recv; TSC-timed; seccomp");
	if (raw)
		cb_unshare(l->box[0], 2 * box);
	else
		nat_pair_unmap(&l->pair);
	cb_unshare(l->cycles, l->nr_sizes * l->iters * sizeof(uint64_t));
	cb_unshare(l, sizeof(*l));
	return 0;
}

int native_lat(void)
{
	pick_cpus();
	tsc_calibrate();
	if (cb_wanted("shm"))
		native_lat_one(true);
	if (cb_wanted("clanq"))
		native_lat_one(false);
	return peers_native_lat();
}

/* ---- bw: one way, streamed; message rate and bandwidth ---- */

struct nat_stream {
	struct nat_pair pair;
	size_t len;
	unsigned long long n;
	uint64_t t_start, t_last;	/* TSC: the sender's first send, the last arrival */
	int failed;
};

static unsigned char nat_buf[2][4u << 20];

static int nat_stream_send(void *arg)
{
	struct nat_stream *st = arg;
	struct nat_conn n;
	int err = 0;

	nat_conn_init(&n, &st->pair, 0);
	memset(nat_buf[0], 0xa5, st->len);
	strict();
	st->t_start = nat_tsc();
	for (unsigned long long i = 0; i < st->n && !err; i++)
		while ((err = clanq_send(&n.c, nat_buf[0], st->len, CLANQ_MSG_DONTWAIT)) == -EAGAIN)
			;
	if (err) {
		__atomic_store_n(&st->failed, err, __ATOMIC_RELEASE);
		return 1;
	}
	return 0;
}

static int nat_stream_recv(void *arg)
{
	struct nat_stream *st = arg;
	struct nat_conn n;
	ssize_t got;

	nat_conn_init(&n, &st->pair, 1);
	strict();
	for (unsigned long long i = 0; i < st->n; i++) {
		while ((got = clanq_recv(&n.c, nat_buf[1], st->len, CLANQ_MSG_DONTWAIT)) == -EAGAIN)
			;
		if (got != (ssize_t)st->len) {
			__atomic_store_n(&st->failed, got < 0 ? (int)got : -EIO,
					 __ATOMIC_RELEASE);
			return 1;
		}
	}
	st->t_last = nat_tsc();
	return 0;
}

/* Messages for about cb.seconds at a guessed rate, within bounds. */
static unsigned long long stream_count(size_t len)
{
	double rate = len <= 64 ? 20e6 : 10e9 / (double)len;
	double n = rate * cb.seconds;

	return n < 1000 ? 1000 : n > 2e8 ? 200000000ull : (unsigned long long)n;
}

static void native_stream(size_t len)
{
	struct nat_stream *st = cb_shared(sizeof(*st));
	/* as clanq.c's conn_bw: room for 4 messages in flight, at least a page */
	uint64_t ring = len * 4 + 256 < 4096 ? CLANQ_CONN_RING_DEFAULT : len * 4 + 256;
	struct cb_row r;
	double secs;

	cb_progress("bw clanq/pio-poll %zu B natively", len);
	nat_pair_map(&st->pair, ring);
	st->len = len;
	st->n = stream_count(len);
	run_two(nat_stream_send, nat_stream_recv, st, "native stream clanq");
	if (st->failed)
		cb_die("native stream clanq", st->failed);
	secs = (double)(st->t_last - st->t_start) / tsc_per_ns / 1e9;
	cb_row_init(&r, "bw", "clanq", "pio-poll", len);
	r.iters = st->n;
	r.bw_mibs = (double)st->n * (double)len / secs / (1 << 20);
	r.mpps = (double)st->n / secs / 1e6;
	r.syscalls = 0;		/* proven: seccomp, both ends */
	snprintf(r.note, sizeof(r.note), "receiver copies out; ring %llu B; seccomp",
		 (unsigned long long)st->pair.cap);
	cb_emit(&r);
	nat_pair_unmap(&st->pair);
	cb_unshare(st, sizeof(*st));
}

int native_bw(void)
{
	unsigned long long sizes[32] = { 8, 64 };
	unsigned int nr = 2 + cb_sizes(4096, 4ull << 20, sizes + 2, 30);
	int err;

	pick_cpus();
	tsc_calibrate();
	/* the baseline first: the ratio column looks it up */
	err = peers_native_bw(sizes, nr);
	if (err)
		return err;
	if (cb_wanted("clanq"))
		for (unsigned int s = 0; s < nr; s++)
			native_stream(sizes[s]);
	return 0;
}

/* ---- instructions per message: callgrind on one process ---- */

/* The raw path's two halves, out of line so that callgrind can toggle them. */
__attribute__((noinline)) void nat_raw_put(struct mailbox *m, const void *b, size_t len,
					   uint64_t seq)
{
	mailbox_put(m, b, len, seq);
}

__attribute__((noinline)) size_t nat_raw_get(struct mailbox *m, void *b, size_t max,
					     uint64_t seq)
{
	return mailbox_get(m, b, max, seq);
}

/*
 * clanq-bench native-insns IMPL LEN N (run under callgrind by
 * native_insns()): N messages of LEN bytes sent and received by one
 * thread, on a clanq connection's two ends or through a mailbox.
 */
int native_insns_child(const char *impl, size_t len, unsigned long long n)
{
	static unsigned char out[NAT_LAT_MAX], in[NAT_LAT_MAX];
	struct nat_conn *a, *b;
	struct nat_pair p;

	if (len < 1 || len > NAT_LAT_MAX)
		return CB_USAGE;
	if (!strcmp(impl, "shm")) {
		struct mailbox *m = cb_shared(mailbox_size(NAT_LAT_MAX));

		for (unsigned long long i = 1; i <= n; i++) {
			nat_raw_put(m, out, len, i);
			if (nat_raw_get(m, in, sizeof(in), i) != len)
				return CB_FAIL;
		}
		return 0;
	}
	a = malloc(sizeof(*a));
	b = malloc(sizeof(*b));
	if (!a || !b)
		return CB_FAIL;
	nat_pair_map(&p, NAT_LAT_RING);
	nat_conn_init(a, &p, 0);
	nat_conn_init(b, &p, 1);
	for (unsigned long long i = 0; i < n; i++) {
		out[i % len] = (unsigned char)i;	/* every message checked */
		if (clanq_send(&a->c, out, len, CLANQ_MSG_DONTWAIT) ||
		    clanq_recv(&b->c, in, sizeof(in), CLANQ_MSG_DONTWAIT) != (ssize_t)len ||
		    memcmp(in, out, len))
			return CB_FAIL;
	}
	return 0;
}

/* Instructions in the toggled functions per message, or -1. */
static double callgrind_count(const char *impl, size_t len, unsigned long long n)
{
	char out[64], lens[24], ns[24], exe[4096], buf[8192];
	const char *tog1 = strcmp(impl, "shm") ? "--toggle-collect=clanq_send" :
						  "--toggle-collect=nat_raw_put";
	const char *tog2 = strcmp(impl, "shm") ? "--toggle-collect=clanq_recv" :
						  "--toggle-collect=nat_raw_get";
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	unsigned long long total = 0;
	FILE *f;
	int rc;

	if (k <= 0)
		return -1;
	exe[k] = 0;
	snprintf(out, sizeof(out), "/tmp/clanq-bench-cg.%d", (int)getpid());
	snprintf(lens, sizeof(lens), "%zu", len);
	snprintf(ns, sizeof(ns), "%llu", n);
	{
		char of[96];
		char *argv[] = { "valgrind", "--tool=callgrind", (char *)tog1, (char *)tog2,
				 of, exe, "native-insns", (char *)impl, lens, ns, NULL };

		snprintf(of, sizeof(of), "--callgrind-out-file=%s", out);
		rc = cb_run_tool(argv, NULL, buf, sizeof(buf), NULL);
	}
	if (rc) {
		fprintf(stderr, "clanq-bench: callgrind %s: status %d: %.400s\n", impl, rc, buf);
		unlink(out);
		return -1;
	}
	f = fopen(out, "r");
	while (f && fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, "totals:", 7) || !strncmp(buf, "summary:", 8))
			total = strtoull(strchr(buf, ':') + 1, NULL, 10);
	if (f)
		fclose(f);
	unlink(out);
	return total ? (double)total / (double)n : -1;
}

static double insns_per_msg[2][2];	/* [shm, clanq][8 B, 64 B] */

int native_insns(void)
{
	static const char *const impls[] = { "shm", "clanq" };
	static const size_t lens[] = { 8, 64 };
	unsigned long long n = cb.quick ? 2000 : 100000;
	char *argv[] = { "valgrind", "--version", NULL };
	char buf[256];

	if (cb_run_tool(argv, NULL, buf, sizeof(buf), NULL)) {
		cb_skip("insns", "clanq", "pio-poll", "valgrind not found (callgrind)");
		return 0;
	}
	for (unsigned int i = 0; i < 2; i++) {
		if (!cb_wanted(impls[i]))
			continue;
		for (unsigned int j = 0; j < 2; j++) {
			double per = callgrind_count(impls[i], lens[j], n);

			if (per < 0)
				cb_die("native insns: callgrind", -EIO);
			insns_per_msg[i][j] = per;
			printf("insns  %-8s %-9s %8zu %14.1f  %s\n", impls[i],
			       i ? "pio-poll" : "spin", lens[j], per,
			       i ? "clanq_send + clanq_recv, callgrind" :
				   "mailbox put + get, callgrind");
		}
	}
	return 0;
}

/* ---- the targets, from the rows of this run ---- */

static void target(const char *what, double v, const char *op, double goal)
{
	bool met = v >= 0 && (op[0] == '<' ? v <= goal : v >= goal);

	if (v < 0)
		printf("# %-58s %9s   %s %-6g  not measured\n", what, "-", op, goal);
	else
		printf("# %-58s %9.2f   %s %-6g  %s\n", what, v, op, goal, met ? "met" : "NOT met");
}

static double lat_of(const char *impl, const char *mode, unsigned long long bytes)
{
	const struct cb_row *r = cb_find_row("lat", impl, mode, bytes);

	return r && r->has_lat ? r->lat.med : -1;
}

static double div_or(double a, double b)
{
	return a > 0 && b > 0 ? a / b : -1;
}

int native_summary(void)
{
	unsigned long long sizes[32];
	unsigned int nr = cb_sizes(4096, 4ull << 20, sizes, 32);
	const struct cb_row *c8 = cb_find_row("bw", "clanq", "pio-poll", 8);
	const struct cb_row *u8 = cb_find_row("bw", "ucx", "tag-shm", 8);
	double worst = -1;
	unsigned long long worst_at = 0;

	for (unsigned int s = 0; s < nr; s++) {
		const struct cb_row *c = cb_find_row("bw", "clanq", "pio-poll", sizes[s]);
		const struct cb_row *u = cb_find_row("bw", "ucx", "tag-shm", sizes[s]);
		double q = c && u ? div_or(c->bw_mibs, u->bw_mibs) : -1;

		if (q >= 0 && (worst < 0 || q < worst)) {
			worst = q;
			worst_at = sizes[s];
		}
	}
	printf("\n# targets (natively, this run; CPUs %d and %d)            measured   target\n",
	       cpu_a, cpu_b);
	target("polled 8 B round trip, clanq / raw shm", div_or(lat_of("clanq", "pio-poll", 8),
	       lat_of("shm", "spin", 8)), "<=", 1.3);
	target("polled 8 B round trip, clanq / UCX tag_lat shm",
	       div_or(lat_of("clanq", "pio-poll", 8), lat_of("ucx", "tag-shm", 8)), "<=", 0.5);
	target("8 B message rate, clanq [M msgs/s]", c8 ? c8->mpps : -1, ">=", 10);
	target("8 B message rate, clanq / UCX tag_bw", c8 && u8 ? div_or(c8->mpps, u8->mpps) : -1,
	       ">=", 1);
	printf("#   worst bandwidth ratio at %llu B\n", worst_at);
	target("bandwidth 4 KiB .. 4 MiB, clanq / UCX tag_bw, worst size", worst, ">=", 1);
	printf("# %-58s %9.1f   (raw shm: %.1f; callgrind)\n",
	       "instructions per 8 B message, send + receive", insns_per_msg[1][0],
	       insns_per_msg[0][0]);
	return 0;
}
