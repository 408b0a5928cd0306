// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-bench: clanq beside what a user would pick instead, one run.
 *
 *   clanq-bench lat    round trips of small messages (Figure 4's partner)
 *   clanq-bench bw     bandwidth vs message size, PIO and RDMA (Figure 4)
 *   clanq-bench idle   round trip vs idle connections held (Figure 5)
 *   clanq-bench load   throughput and server CPU vs offered load (Figure 6)
 *   clanq-bench all    the four, in that order
 *   clanq-bench native the library's data path on this machine's own CPUs,
 *                      no driver, beside raw shm, UCX and libfabric (native.c)
 *
 * This file: options, the header that says where the numbers come from,
 * and the rows' three output formats (table, --csv, --json) with the
 * ratio column. The measurements are in clanq.c and base_*.c.
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cb.h"

struct cb_opts cb = {
	.iters = 10000,
	.seconds = 1.0,
	.nic_a = 1,
	.nic_b = 0,
	.cpu_cli = -1,
	.cpu_srv = -1,
};

__thread unsigned long long cb_syscalls;

static const char *prog = "clanq-bench";
static enum { OUT_TABLE, OUT_CSV, OUT_JSON } out_fmt;
static unsigned int nr_json, nr_json_file;
static FILE *csv_file, *json_file;	/* -o PREFIX: PREFIX.csv, PREFIX.json */
static const char *table_test;	/* the test whose table header is printed */
static bool progress_shown;

/* Rows printed so far: the ratio column looks its baseline up here. */
#define MAX_ROWS	1024
static struct cb_row rows[MAX_ROWS];
static unsigned int nr_rows;

struct baseline {
	const char *test;
	char impl_mode[64];
};
static struct baseline baselines[4];

void cb_row_init(struct cb_row *r, const char *test, const char *impl,
		 const char *mode, unsigned long long bytes)
{
	memset(r, 0, sizeof(*r));
	r->test = test;
	snprintf(r->impl, sizeof(r->impl), "%s", impl);
	snprintf(r->mode, sizeof(r->mode), "%s", mode);
	r->bytes = bytes;
	r->bw_mibs = r->mpps = r->syscalls = r->cpu_us = -1;
}

void cb_row_lat(struct cb_row *r, double *usec, unsigned long long n)
{
	double sq = 0;

	r->lat = lat_stats(usec, (unsigned int)n);
	for (unsigned long long i = 0; i < n; i++)
		sq += (usec[i] - r->lat.avg) * (usec[i] - r->lat.avg);
	r->stdev = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
	r->iters = n;
	r->has_lat = true;
}

void cb_baseline(const char *test, const char *impl_mode)
{
	for (unsigned int i = 0; i < sizeof(baselines) / sizeof(baselines[0]); i++)
		if (!baselines[i].test || !strcmp(baselines[i].test, test)) {
			baselines[i].test = test;
			snprintf(baselines[i].impl_mode, sizeof(baselines[i].impl_mode),
				 "%s", impl_mode);
			return;
		}
}

static const char *baseline_of(const char *test)
{
	for (unsigned int i = 0; i < sizeof(baselines) / sizeof(baselines[0]); i++)
		if (baselines[i].test && !strcmp(baselines[i].test, test))
			return baselines[i].impl_mode;
	return NULL;
}

const struct cb_row *cb_find_row(const char *test, const char *impl, const char *mode,
				 unsigned long long bytes)
{
	for (unsigned int i = nr_rows; i-- > 0;) {
		const struct cb_row *r = &rows[i];

		if (!strcmp(r->test, test) && !strcmp(r->impl, impl) &&
		    !strcmp(r->mode, mode) && r->bytes == bytes)
			return r;
	}
	return NULL;
}

/* The number a test compares: typical time, bandwidth, CPU per message. */
static double metric(const struct cb_row *r)
{
	if (!strcmp(r->test, "bw"))
		return r->bw_mibs;
	if (!strcmp(r->test, "load"))
		return r->cpu_us;
	return r->has_lat ? r->lat.med : -1;
}

static double ratio_of(const struct cb_row *r)
{
	const char *base = baseline_of(r->test);
	char name[64];

	if (!base)
		return -1;
	for (unsigned int i = nr_rows; i-- > 0;) {
		const struct cb_row *b = &rows[i];

		snprintf(name, sizeof(name), "%s/%s", b->impl, b->mode);
		if (strcmp(b->test, r->test) || b->bytes != r->bytes ||
		    b->param != r->param || strcmp(name, base))
			continue;
		if (metric(b) <= 0 || metric(r) < 0)
			return -1;
		return metric(r) / metric(b);
	}
	return -1;
}

bool cb_wanted(const char *impl)
{
	size_t n = strlen(impl);

	if (!cb.only)
		return true;
	for (const char *p = cb.only; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && !strncmp(p, impl, n))
			return true;
		p += len + (e != NULL);
	}
	return false;
}

void cb_progress(const char *fmt, ...)
{
	bool lines = getenv("CLANQ_BENCH_PROGRESS");	/* the VM's console */
	bool tty = !lines && isatty(STDERR_FILENO);
	va_list ap;

	/* one line overwritten on a terminal; lines if asked; else nothing */
	if (!tty && !lines)
		return;
	fprintf(stderr, tty ? "\r\033[K# " : "# ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (!tty)
		fprintf(stderr, "\n");
	progress_shown = tty;
}

static void progress_clear(void)
{
	if (progress_shown)
		fprintf(stderr, "\r\033[K");
	progress_shown = false;
}

void cb_die(const char *what, int err)
{
	progress_clear();
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(err < 0 ? -err : err));
	exit(CB_FAIL);
}

static void num(char *buf, size_t size, double v, const char *fmt)
{
	if (v < 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, fmt, v);
}

static void table_header(FILE *f, const char *test)
{
	const char *base = baseline_of(test);

	fprintf(f, "\n");
	if (!strcmp(test, "bw")) {
		fprintf(f, "# bw: one-way bandwidth; ratio = bandwidth / %s's\n", base ? base : "-");
		fprintf(f, "%-9s %-14s %-9s %-10s %-18s %-14s %-9s %-8s %s\n", "#impl", "mode",
		       "#bytes", "#iter", "BW average[MiB/s]", "MsgRate[Mpps]", "sys/msg",
		       "ratio", "note");
	} else if (!strcmp(test, "load")) {
		fprintf(f, "# load: clients in flight into one single-threaded echo server; "
		       "ratio = server CPU per message / %s's\n", base ? base : "-");
		fprintf(f, "%-9s %-14s %-9s %-10s %-10s %-14s %-12s %-9s %-8s %s\n", "#impl", "mode",
		       "#bytes", "#clients", "#msgs", "MsgRate[Mpps]", "cpu[us]/msg",
		       "sys/msg", "ratio", "note");
	} else {
		fprintf(f, "# %s: round trips%s; ratio = t_typical / %s's\n", test,
		       !strcmp(test, "idle") ? " on one connection while the server holds #conns" : "",
		       base ? base : "-");
		fprintf(f, "%-9s %-14s %-7s %-6s %-8s %-11s %-9s %-9s %-9s %-9s %-9s %-9s "
		       "%-8s %-7s %s\n", "#impl", "mode", "#bytes", !strcmp(test, "idle") ?
		       "#conns" : "", "#iter", "t_min[us]", "t_max", "t_typical", "t_avg",
		       "t_stdev", "99%", "99.9%", "sys/rt", "ratio", "note");
	}
	table_test = test;
}

static void emit_table(FILE *f, const struct cb_row *r, double ratio)
{
	char c[6][24];

	if (!table_test || strcmp(table_test, r->test))
		table_header(f, r->test);
	num(c[0], sizeof(c[0]), r->syscalls, "%.3f");
	num(c[1], sizeof(c[1]), ratio, "%.2f");
	num(c[2], sizeof(c[2]), r->bw_mibs, "%.1f");
	num(c[3], sizeof(c[3]), r->mpps, "%.4f");
	num(c[4], sizeof(c[4]), r->cpu_us, "%.2f");
	if (!strcmp(r->test, "bw")) {
		fprintf(f, "%-9s %-14s %-9llu %-10llu %-18s %-14s %-9s %-8s %s\n", r->impl,
			r->mode, r->bytes, r->iters, c[2], c[3], c[0], c[1], r->note);
	} else if (!strcmp(r->test, "load")) {
		fprintf(f, "%-9s %-14s %-9llu %-10llu %-10llu %-14s %-12s %-9s %-8s %s\n",
			r->impl, r->mode, r->bytes, r->param, r->iters, c[3], c[4], c[0],
			c[1], r->note);
	} else {
		char p[16] = "";

		if (!strcmp(r->test, "idle"))
			snprintf(p, sizeof(p), "%llu", r->param);
		fprintf(f, "%-9s %-14s %-7llu %-6s %-8llu %-11.2f %-9.2f %-9.2f %-9.2f "
			"%-9.2f %-9.2f %-9.2f %-8s %-7s %s\n", r->impl, r->mode, r->bytes, p,
			r->iters, r->lat.min, r->lat.max, r->lat.med, r->lat.avg, r->stdev,
			r->lat.p99, r->lat.p999, c[0], c[1], r->note);
	}
}

static void emit_csv(FILE *f, const struct cb_row *r, double ratio)
{
	double v[] = { r->bw_mibs, r->mpps, r->syscalls, r->cpu_us, ratio };

	fprintf(f, "%s,%s,%s,%llu,%llu,%llu", r->test, r->impl, r->mode, r->bytes,
		r->param, r->iters);
	if (r->has_lat)
		fprintf(f, ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f", r->lat.min, r->lat.max,
			r->lat.med, r->lat.avg, r->stdev, r->lat.p99, r->lat.p999);
	else
		fprintf(f, ",,,,,,,");
	for (unsigned int i = 0; i < 5; i++)
		if (v[i] < 0)
			fprintf(f, ",");
		else
			fprintf(f, ",%.4f", v[i]);
	fprintf(f, ",%s,\"%s\"\n", baseline_of(r->test) ? baseline_of(r->test) : "",
		r->note);
}

static void emit_json(FILE *f, const struct cb_row *r, double ratio, unsigned int *nr)
{
	fprintf(f, "%s {\"test\": \"%s\", \"impl\": \"%s\", \"mode\": \"%s\", "
		"\"bytes\": %llu, \"param\": %llu, \"iters\": %llu", (*nr)++ ? "," : " ",
		r->test, r->impl, r->mode, r->bytes, r->param, r->iters);
	if (r->has_lat)
		fprintf(f, ", \"t_min\": %.3f, \"t_max\": %.3f, \"t_typical\": %.3f, "
			"\"t_avg\": %.3f, \"t_stdev\": %.3f, \"t_99\": %.3f, "
			"\"t_999\": %.3f", r->lat.min, r->lat.max, r->lat.med,
			r->lat.avg, r->stdev, r->lat.p99, r->lat.p999);
	if (r->bw_mibs >= 0)
		fprintf(f, ", \"bw_mibs\": %.3f", r->bw_mibs);
	if (r->mpps >= 0)
		fprintf(f, ", \"mpps\": %.5f", r->mpps);
	if (r->syscalls >= 0)
		fprintf(f, ", \"syscalls\": %.4f", r->syscalls);
	if (r->cpu_us >= 0)
		fprintf(f, ", \"cpu_us\": %.3f", r->cpu_us);
	if (ratio >= 0)
		fprintf(f, ", \"ratio\": %.4f, \"baseline\": \"%s\"", ratio,
			baseline_of(r->test));
	fprintf(f, ", \"note\": \"%s\"}\n", r->note);
}

void cb_emit(const struct cb_row *r)
{
	double ratio = ratio_of(r);

	progress_clear();
	if (nr_rows < MAX_ROWS)
		rows[nr_rows++] = *r;
	switch (out_fmt) {
	case OUT_TABLE: emit_table(stdout, r, ratio); break;
	case OUT_CSV: emit_csv(stdout, r, ratio); break;
	case OUT_JSON: emit_json(stdout, r, ratio, &nr_json); break;
	}
	if (csv_file)
		emit_csv(csv_file, r, ratio);
	if (json_file)
		emit_json(json_file, r, ratio, &nr_json_file);
	fflush(NULL);
}

void cb_skip(const char *test, const char *impl, const char *mode, const char *why)
{
	progress_clear();
	if (out_fmt == OUT_TABLE)
		printf("# %s %s/%s not measured: %s\n", test, impl, mode, why);
	else
		fprintf(stderr, "# %s %s/%s not measured: %s\n", test, impl, mode, why);
	fflush(stdout);
}

void *cb_shared(size_t bytes)
{
	size_t len = (bytes + 4095) & ~(size_t)4095;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		cb_die("mmap of shared memory", -errno);
	return p;
}

void cb_unshare(void *p, size_t bytes)
{
	munmap(p, (bytes + 4095) & ~(size_t)4095);
}

pid_t cb_fork(int (*fn)(void *arg), void *arg)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		cb_die("fork", -errno);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(CB_FAIL);
		_exit(fn(arg));
	}
	return pid;
}

int cb_reap(pid_t pid, struct rusage *ru)
{
	struct rusage r;
	int status;

	while (wait4(pid, &status, 0, &r) < 0)
		if (errno != EINTR)
			return -1;
	if (ru)
		*ru = r;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void cb_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	cb_reap(pid, NULL);
}

double cb_cpu_us(const struct rusage *ru)
{
	return (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1e6 +
	       (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec);
}

void cb_spin_until(volatile uint32_t *word, uint32_t value)
{
	while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value)
		__builtin_ia32_pause();
}

void cb_wait_child(volatile uint32_t *word, uint32_t value, pid_t pid, const char *what)
{
	for (unsigned long spins = 1;; spins++) {
		siginfo_t si = { 0 };

		if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value)
			return;
		/* now and then: is it still there? (WNOWAIT: its reaper reaps) */
		if (!(spins % 4096) &&
		    !waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) &&
		    si.si_pid == pid) {
			progress_clear();
			fprintf(stderr, "%s: %s: the child (pid %d) ended without an answer\n",
				prog, what, (int)pid);
			exit(CB_FAIL);
		}
		__builtin_ia32_pause();
	}
}

unsigned int cb_sizes(unsigned long long lo, unsigned long long hi,
		      unsigned long long *out, unsigned int max)
{
	unsigned int n = 0;

	for (unsigned long long s = lo; s <= hi && n < max; s *= 2) {
		/* quick: every fourth power of two, and the last */
		if (cb.quick && s != lo && s != hi && (__builtin_ctzll(s) - __builtin_ctzll(lo)) % 4)
			continue;
		out[n++] = s;
	}
	return n;
}

static unsigned int pick(const unsigned long long *full, unsigned int nr_full,
			 const unsigned long long *quick, unsigned int nr_quick,
			 unsigned long long *out)
{
	const unsigned long long *v = cb.quick ? quick : full;
	unsigned int n = cb.quick ? nr_quick : nr_full;

	memcpy(out, v, n * sizeof(*v));
	return n;
}

unsigned int cb_lat_sizes(unsigned long long *out)
{
	static const unsigned long long full[] = { 8, 64, 256, 1024, 4096 }, quick[] = { 8, 1024 };

	return pick(full, 5, quick, 2, out);
}

unsigned int cb_idle_counts(unsigned long long *out)
{
	static const unsigned long long full[] = { 1, 10, 100, 1000, 10000 }, quick[] = { 1, 100 };

	return pick(full, 5, quick, 2, out);
}

unsigned int cb_load_clients(unsigned long long *out)
{
	static const unsigned long long full[] = { 1, 2, 4, 8, 16 }, quick[] = { 1, 4 };

	return pick(full, 5, quick, 2, out);
}

int cb_run_tool(char *const argv[], char *const envp_add[], char *buf,
		size_t size, struct rusage *ru)
{
	int fd[2];
	size_t got = 0;
	pid_t pid;
	int status;

	if (pipe(fd))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd[1], STDOUT_FILENO);
		dup2(fd[1], STDERR_FILENO);
		close(fd[0]);
		close(fd[1]);
		for (unsigned int i = 0; envp_add && envp_add[i]; i++)
			putenv(envp_add[i]);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	for (;;) {
		ssize_t n = read(fd[0], buf + got, size - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == size - 1) {	/* full: drain the rest */
			char sink[4096];

			while (read(fd[0], sink, sizeof(sink)) > 0)
				;
			break;
		}
	}
	buf[got] = 0;
	close(fd[0]);
	while (wait4(pid, &status, 0, ru) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- the header: where the numbers come from ---- */

static void read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (f) {
		if (fgets(buf, (int)size, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
	}
	if (!buf[0])
		snprintf(buf, size, "unknown");
}

static void cpu_model(char *buf, size_t size, bool *vm)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(buf, size, "unknown");
	*vm = false;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ':');

		if (!v)
			continue;
		if (!strncmp(line, "model name", 10) && !strcmp(buf, "unknown")) {
			v += 2;
			v[strcspn(v, "\n")] = 0;
			snprintf(buf, size, "%s", v);
		}
		if (!strncmp(line, "flags", 5) && strstr(v, " hypervisor"))
			*vm = true;
	}
	fclose(f);
}

static void json_head(FILE *f, const char *cmd, const char *kernel, const char *model,
		      const char *cs, bool vm)
{
	fprintf(f, "{\"tool\": \"clanq-bench\", \"command\": \"%s\", \"kernel\": \"%s\", "
		"\"cpus\": %ld, \"cpu_model\": \"%s\", \"clocksource\": \"%s\", "
		"\"vm\": %s, \"quick\": %s,\n \"rows\": [\n", cmd, kernel,
		sysconf(_SC_NPROCESSORS_ONLN), model, cs, vm ? "true" : "false",
		cb.quick ? "true" : "false");
}

static const char csv_head[] = "test,impl,mode,bytes,param,iters,t_min,t_max,t_typical,"
	"t_avg,t_stdev,t_99,t_999,bw_mibs,mpps,syscalls,cpu_us,ratio,baseline,note\n";

static void header(const char *cmd)
{
	char cs[64], model[128], cmdline[512];
	struct utsname u;
	bool vm;

	uname(&u);
	read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource",
		  cs, sizeof(cs));
	read_line("/proc/cmdline", cmdline, sizeof(cmdline));
	cpu_model(model, sizeof(model), &vm);
	if (json_file)
		json_head(json_file, cmd, u.release, model, cs, vm);
	if (csv_file)
		fputs(csv_head, csv_file);
	if (out_fmt == OUT_JSON) {
		json_head(stdout, cmd, u.release, model, cs, vm);
		return;
	}
	printf("# clanq-bench %s: kernel %s, %ld CPUs (%s), clocksource %s, %s%s\n", cmd,
	       u.release, sysconf(_SC_NPROCESSORS_ONLN), model, cs,
	       vm ? "in a VM (hypervisor flag set): absolute times mean little, "
		    "ratios in one run carry over" : "on a host", cb.quick ? ", quick run" : "");
	if (strcmp(cs, "tsc"))
		printf("# warning: clocksource %s: each clock read may cost ~1 us "
		       "(boot with tsc=reliable)\n", cs);
	if (out_fmt == OUT_CSV)
		fputs(csv_head, stdout);
	fflush(stdout);
}

static void usage(void)
{
	printf("usage: %s [options] lat|bw|idle|load|all\n"
	       "clanq beside the baselines a user would pick instead, in one run.\n\n"
	       "  lat    round trips, 8 B .. 4 KiB: clanq PIO, RDMA and OOB, polling and\n"
	       "         blocking; raw shared memory, UCX, libfabric, Soft-RoCE, UDP, TCP,\n"
	       "         eventfd, pipe\n"
	       "  bw     bandwidth, 8 B .. 4 MiB: clanq PIO and RDMA; memcpy, UCX,\n"
	       "         Soft-RoCE, sockets\n"
	       "  idle   round trip vs 1 .. 10,000 idle connections at the server\n"
	       "  load   throughput and server CPU per message vs clients\n"
	       "  all    the four\n"
	       "  native no driver, no VM: the library's send/receive path between two\n"
	       "         pinned processes on this machine's CPUs (seccomp strict), raw\n"
	       "         shared memory, UCX and libfabric beside it; instructions per\n"
	       "         message (callgrind)\n\n"
	       "  -n, --iters N      round trips per latency point (default 10000)\n"
	       "  -t, --time SEC     seconds per bandwidth / load point (default 1)\n"
	       "  -q, --quick        the smoke run: few sizes, few iterations\n"
	       "      --only LIST    only these impls (clanq,shm,memcpy,ucx,libfabric,\n"
	       "                     rxe,udp,tcp,eventfd,pipe,epoll,poll)\n"
	       "      --nics A,B     clanq NICs of the client and the server (default 1,0)\n"
	       "      --csv          CSV rows instead of a table\n"
	       "      --json         JSON instead of a table\n"
	       "  -o, --output PREFIX  also write PREFIX.csv and PREFIX.json\n"
	       "  -h, --help         this text\n\n"
	       "Every row says its system calls per message, counted (the driver's\n"
	       "entry counter; the program's own calls for the kernel's paths).\n"
	       "Exit status: 0 done, 1 a measurement failed, 2 bad arguments.\n", prog);
}

static void usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", prog);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try '%s --help')\n", prog);
	exit(CB_USAGE);
}

static unsigned long long parse_num(const char *opt, const char *s,
				    unsigned long long lo, unsigned long long hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < lo || v > hi) {
		fprintf(stderr, "%s: %s: '%s' is not a number in %llu .. %llu (try '%s --help')\n",
			prog, opt, s, lo, hi, prog);
		exit(CB_USAGE);
	}
	return v;
}

typedef int (*part_fn)(void);

static int run_parts(const part_fn *parts)
{
	for (unsigned int i = 0; parts[i]; i++) {
		int err = parts[i]();

		if (err)
			return err;
	}
	return 0;
}

/* Each test: the baseline first (the ratio column needs it), then clanq. */
static int run_test(const char *test)
{
	static const part_fn lat[] = { shm_lat, shm_cas_lat, clanq_lat, peers_lat, kernel_lat,
				       NULL };
	static const part_fn bw[] = { memcpy_bw, clanq_bw, peers_bw, kernel_bw, NULL };
	static const part_fn idle[] = { kernel_idle, clanq_idle, NULL };
	static const part_fn load[] = { kernel_load, clanq_load, peers_load, NULL };

	if (!strcmp(test, "lat")) {
		cb_baseline("lat", "shm/spin");
		return run_parts(lat);
	}
	if (!strcmp(test, "bw")) {
		cb_baseline("bw", "memcpy/1-core");
		return run_parts(bw);
	}
	if (!strcmp(test, "native")) {
		static const part_fn nat[] = { native_lat, NULL };
		static const part_fn nat_bw[] = { native_bw, native_insns, native_summary, NULL };
		int err;

		cb_baseline("lat", "shm/spin");
		err = run_parts(nat);
		if (err)
			return err;
		cb_baseline("bw", "ucx/tag-shm");
		return run_parts(nat_bw);
	}
	if (!strcmp(test, "idle")) {
		cb_baseline("idle", "epoll/block");
		return run_parts(idle);
	}
	cb_baseline("load", "udp/epoll");
	return run_parts(load);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "iters", required_argument, NULL, 'n' },
		{ "time", required_argument, NULL, 't' },
		{ "quick", no_argument, NULL, 'q' },
		{ "only", required_argument, NULL, 'O' },
		{ "nics", required_argument, NULL, 'N' },
		{ "csv", no_argument, NULL, 'C' },
		{ "json", no_argument, NULL, 'J' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const char *const tests[] = { "lat", "bw", "idle", "load" };
	const char *cmd;
	bool iters_set = false, time_set = false;
	int opt, err = 0;

	const char *prefix = NULL;

	while ((opt = getopt_long(argc, argv, "n:t:qo:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			cb.iters = parse_num("--iters", optarg, 10, 1ull << 28);
			iters_set = true;
			break;
		case 't': {
			char *end;

			cb.seconds = strtod(optarg, &end);
			if (end == optarg || *end || !(cb.seconds >= 0.01 && cb.seconds <= 3600))
				usage_error("--time: '%s' is not a number of seconds in 0.01 .. 3600",
					    optarg);
			time_set = true;
			break;
		}
		case 'q': cb.quick = true; break;
		case 'O': cb.only = optarg; break;
		case 'N': {
			unsigned int a, b;
			char c;

			if (sscanf(optarg, "%u,%u%c", &a, &b, &c) != 2 || a > 255 || b > 255)
				usage_error("--nics: '%s' is not two NIC numbers, e.g. 1,0", optarg);
			cb.nic_a = a;
			cb.nic_b = b;
			break;
		}
		case 'C': out_fmt = OUT_CSV; break;
		case 'J': out_fmt = OUT_JSON; break;
		case 'o': prefix = optarg; break;
		case 'h': usage(); return 0;
		default: usage_error("%s", "unknown option");
		}
	}
	/* what native_insns() runs under callgrind: IMPL LEN N */
	if (optind + 4 == argc && !strcmp(argv[optind], "native-insns"))
		return native_insns_child(argv[optind + 1], strtoull(argv[optind + 2], NULL, 10),
					  strtoull(argv[optind + 3], NULL, 10));
	if (optind != argc - 1)
		usage_error("%s", optind < argc ? "one command, please" :
			    "which test? lat, bw, idle, load, all or native");
	cmd = argv[optind];
	if (strcmp(cmd, "all") && strcmp(cmd, "native") && strcmp(cmd, "lat") &&
	    strcmp(cmd, "bw") && strcmp(cmd, "idle") && strcmp(cmd, "load"))
		usage_error("unknown command '%s' (lat, bw, idle, load, all or native)", cmd);
	if (!strcmp(cmd, "native")) {
		/* no emulator: many more round trips in the same time */
		if (!iters_set)
			cb.iters = cb.quick ? 2000 : 200000;
		if (!time_set)
			cb.seconds = cb.quick ? 0.05 : 1.0;
		iters_set = time_set = true;
	}
	if (cb.quick) {
		if (!iters_set)
			cb.iters = 500;
		if (!time_set)
			cb.seconds = 0.2;
	}
	if (prefix) {
		char path[4096];

		snprintf(path, sizeof(path), "%s.csv", prefix);
		csv_file = fopen(path, "w");
		if (!csv_file)
			cb_die(path, -errno);
		snprintf(path, sizeof(path), "%s.json", prefix);
		json_file = fopen(path, "w");
		if (!json_file)
			cb_die(path, -errno);
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	header(cmd);
	if (!strcmp(cmd, "native"))
		err = run_test("native");
	for (unsigned int i = 0; i < 4 && !err; i++)
		if (!strcmp(cmd, "all") || !strcmp(cmd, tests[i]))
			err = run_test(tests[i]);
	if (out_fmt == OUT_JSON)
		printf(" ]\n}\n");
	if (json_file)
		fprintf(json_file, " ]\n}\n");
	if ((csv_file && fclose(csv_file)) || (json_file && fclose(json_file)))
		cb_die("writing the -o files", -errno);
	progress_clear();
	if (err)
		fprintf(stderr, "%s: %s\n", prog, strerror(-err));
	return err ? CB_FAIL : 0;
}
