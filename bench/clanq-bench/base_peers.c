// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-bench: the libraries and tools users run instead of clanq, each
 * measured by its own benchmark program, exec'd here as a server and a
 * client in the same run:
 *
 *   ucx/tag-shm         ucx_perftest tag_lat / tag_bw, UCX_TLS=sm,self
 *   ucx/tag-rc-rxe      ucx_perftest tag_lat over Soft-RoCE (UCX_TLS=rc)
 *   libfabric/shm       fi_pingpong -p shm -e rdm
 *   libfabric/tcp       fi_pingpong -p tcp -e rdm
 *   libfabric/clanq-msg fi_pingpong -p clanq -e msg (NIC 0 to NIC 1), our
 *                       provider (provider/), where libfabric finds it
 *   libfabric/clanq-rdm fi_pingpong -p "clanq;ofi_rxm" -e rdm: libfabric's
 *                       ofi_rxm over it
 *   rxe/ib_write_lat    perftest over Soft-RoCE (tests/vm/peers-setup.sh)
 *   rxe/ib_write_bw
 *
 * Every lat row is a round trip, like clanq's: ucx_perftest, fi_pingpong
 * and ib_write_lat all print half a round trip (they divide a ping-pong
 * by two), so their numbers are doubled here, and the note says so.
 * The libfabric bw rows are fi_pingpong's too, one message in flight
 * (fi_bw_on()).
 *
 * System calls are counted, not estimated: both programs run once more
 * for two iteration counts under a ptrace counter (syscall-entry stops
 * of every thread and child), and the difference of the counts over the
 * difference of the iterations is what one more message costs; setup
 * and teardown cancel out. The server's CPU per message (load) comes
 * from the same difference of its rusage.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cb.h"

#define MAX_ARGS	24
#define MAX_ENV		6
#define CLI_OUT		(4u << 20)	/* ib_write_lat -U: a line per sample */
#define SRV_OUT		(64u << 10)

/* What the conductor (the process running the pair) reports back. */
struct pair_res {
	int srv_status, cli_status;	/* exit status, 128 + signal, -1: not run */
	struct rusage srv_ru;
	unsigned long long syscalls;	/* entries, all threads of both sides */
	char why[96];			/* the conductor's own failure, or "" */
};

/* One run of a server and its client. */
struct pair {
	const char *srv[MAX_ARGS], *cli[MAX_ARGS];
	const char *env[MAX_ENV];	/* "NAME=value" for both sides */
	unsigned int port;		/* TCP port the server listens on */
	bool trace;			/* count system calls */
	double timeout;			/* seconds, for the whole pair */
	char *out;			/* client's output (stdout + stderr) */
	char srv_out[SRV_OUT];		/* server's output */
	struct pair_res *res;		/* shared with the conductor */
};

static unsigned int next_port = 23400;

/* A port per run: a server still in TIME_WAIT on the last one cannot block the next. */
static unsigned int new_port(void)
{
	if (++next_port > 23900)
		next_port = 23401;
	return next_port;
}

static bool have_tool(const char *name)
{
	const char *path = getenv("PATH");
	char buf[512];

	if (cb.tools) {
		snprintf(buf, sizeof(buf), "%s/%s", cb.tools, name);
		return access(buf, X_OK) == 0;
	}
	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, name);
		if (n && access(buf, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

/* Is something listening on TCP port (IPv4 or IPv6)? */
static bool listening(unsigned int port)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	char line[256];

	for (unsigned int i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "r");
		bool found = false;

		if (!f)
			continue;
		while (!found && fgets(line, sizeof(line), f)) {
			unsigned int lport, st;

			if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x",
				   &lport, &st) == 2 && lport == port && st == 0x0A)
				found = true;
		}
		fclose(f);
		if (found)
			return true;
	}
	return false;
}

static volatile sig_atomic_t ticked;

static void on_tick(int sig)
{
	(void)sig;
	ticked = 1;
}

/* In the conductor: start one side, its output into fd, traced or not. */
static pid_t start_side(const struct pair *p, const char *const argv[], int fd, int cpu)
{
	pid_t conductor = getpid();
	pid_t pid = fork();

	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != conductor)
		_exit(127);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	cb_pin(cpu);
	for (unsigned int i = 0; i < MAX_ENV && p->env[i]; i++)
		putenv((char *)p->env[i]);
	if (cb.tools) {
		char path[512];

		snprintf(path, sizeof(path), "%s:%s", cb.tools, getenv("PATH") ?: "/bin");
		setenv("PATH", path, 1);
	}
	if (p->trace) {
		/* stopped until the conductor has set its options */
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(126);
		raise(SIGSTOP);
	}
	execvp(argv[0], (char *const *)argv);
	fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static int status_of(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * The conductor: starts the server, the client once the server listens,
 * traces both if asked, and waits for both (a side left alone gets five
 * seconds, then SIGKILL). Runs in its own process, so that wait4(-1)
 * and ptrace see only the two sides and their threads.
 */
static int conduct(void *arg)
{
	const struct pair *p = arg;
	struct pair_res *res = p->res;
	struct sigaction sa = { .sa_handler = on_tick };	/* no SA_RESTART: wait4 returns */
	struct itimerval tick = { { 0, 10000 }, { 0, 10000 } };
	uint64_t t0 = cb_now_ns(), alone = 0;
	pid_t srv, cli = 0;
	int sfd = 3, cfd = 4;
	bool srv_done = false, cli_done = false;

	res->srv_status = res->cli_status = -1;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &tick, NULL);
	srv = start_side(p, p->srv, sfd, cb.cpu_srv);
	while (!srv_done || (cli && !cli_done)) {
		struct rusage ru;
		int st;
		pid_t w;

		if (!cli && !srv_done && listening(p->port))
			cli = start_side(p, p->cli, cfd, cb.cpu_cli);
		if (!cli && cb_now_ns() - t0 > 30ull * 1000000000) {
			snprintf(res->why, sizeof(res->why), "server did not listen on port %u in 30 s",
				 p->port);
			kill(srv, SIGKILL);
		}
		if ((srv_done && cli && !cli_done) || (cli_done && !srv_done)) {
			if (!alone)
				alone = cb_now_ns();
			else if (cb_now_ns() - alone > 5ull * 1000000000)
				kill(srv_done ? cli : srv, SIGKILL);
		}
		if (srv_done && !cli)
			break;
		w = wait4(-1, &st, __WALL, &ru);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (w == srv) {
				srv_done = true;
				res->srv_status = status_of(st);
				res->srv_ru = ru;
			} else if (w == cli) {
				cli_done = true;
				res->cli_status = status_of(st);
			}
			continue;
		}
		if (!WIFSTOPPED(st) || !p->trace)
			continue;
		int sig = WSTOPSIG(st), deliver = 0;

		if (sig == (SIGTRAP | 0x80)) {
			struct __ptrace_syscall_info info;

			if (ptrace(PTRACE_GET_SYSCALL_INFO, w, (void *)sizeof(info), &info) > 0 &&
			    info.op == PTRACE_SYSCALL_INFO_ENTRY)
				res->syscalls++;
		} else if (sig == SIGSTOP && (st >> 16) == 0) {
			/*
			 * A side's first stop (raise() before exec), or a new
			 * thread/child (they start stopped, traced, with the
			 * options inherited): set them, do not deliver the stop.
			 */
			ptrace(PTRACE_SETOPTIONS, w, NULL, (void *)(long)(PTRACE_O_TRACESYSGOOD |
			       PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
			       PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL));
		} else if (sig != SIGTRAP) {
			deliver = sig;	/* a real signal: pass it on */
		}
		ptrace(PTRACE_SYSCALL, w, NULL, (void *)(long)deliver);
	}
	return 0;
}

/* The last lines of a tool's output, on one line, for a failure message. */
static const char *tail_of(const char *out)
{
	static char buf[200];
	size_t n = strlen(out), start;
	unsigned int lines = 0;

	while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
		n--;
	start = n;
	while (start && lines < 3) {
		start--;
		if (out[start] == '\n')
			lines++;
	}
	snprintf(buf, sizeof(buf), "%.*s", (int)(n - start), out + start);
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = '|';
	return buf;
}

/*
 * Run a pair; 0 if both sides exited 0. Otherwise -EIO, with what went
 * wrong in why (the tool's own last lines).
 */
static int run_pair(struct pair *p, char *why, size_t why_size)
{
	int s[2], c[2];
	size_t got[2] = { 0, 0 };
	size_t cap[2] = { SRV_OUT, CLI_OUT };
	char *buf[2] = { p->srv_out, p->out };
	uint64_t deadline = cb_now_ns() + (uint64_t)(p->timeout * 1e9);
	bool open_[2] = { true, true };
	pid_t pid;

	memset(p->res, 0, sizeof(*p->res));
	p->srv_out[0] = p->out[0] = 0;
	if (pipe(s) || pipe(c))
		return -errno;
	/* the conductor finds the pipes at fds 3 and 4 */
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(s[0]);
		close(c[0]);
		if (dup2(s[1], 100) < 0 || dup2(c[1], 101) < 0 || dup2(100, 3) < 0 ||
		    dup2(101, 4) < 0)
			_exit(1);
		close(100);
		close(101);
		for (int fd = 5; fd < 64; fd++)
			close(fd);
		_exit(conduct(p));
	}
	close(s[1]);
	close(c[1]);
	int fds[2] = { s[0], c[0] };

	while (open_[0] || open_[1]) {
		struct pollfd pf[2] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 } };
		int64_t left = (int64_t)(deadline - cb_now_ns());

		if (left <= 0 || (int64_t)deadline - (int64_t)cb_now_ns() < 0) {
			kill(pid, SIGKILL);	/* its sides die with it */
			snprintf(p->res->why, sizeof(p->res->why), "killed after %.0f s",
				 p->timeout);
			break;
		}
		for (int i = 0; i < 2; i++)
			if (!open_[i])
				pf[i].fd = -1;
		if (poll(pf, 2, (int)(left / 1000000 + 1)) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			char sink[4096];
			ssize_t n;

			if (!open_[i] || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (got[i] + 1 < cap[i])
				n = read(fds[i], buf[i] + got[i], cap[i] - 1 - got[i]);
			else
				n = read(fds[i], sink, sizeof(sink));	/* full: drain */
			if (n <= 0) {
				open_[i] = false;
				continue;
			}
			if (got[i] + 1 < cap[i])
				got[i] += (size_t)n;
			buf[i][got[i]] = 0;
		}
	}
	close(fds[0]);
	close(fds[1]);
	cb_reap(pid, NULL);
	if (p->res->why[0]) {
		snprintf(why, why_size, "%s: %s: %s", p->cli[0], p->res->why,
			 tail_of(p->out[0] ? p->out : p->srv_out));
		return -EIO;
	}
	if (p->res->cli_status || p->res->srv_status) {
		bool cli_bad = p->res->cli_status != 0;

		snprintf(why, why_size, "%s %s exited with %d: %s", p->cli[0],
			 cli_bad ? "client" : "server",
			 cli_bad ? p->res->cli_status : p->res->srv_status,
			 tail_of(cli_bad ? p->out : p->srv_out));
		return -EIO;
	}
	return 0;
}

/* ---- the argument lists ---- */

static char num_buf[32][24];
static unsigned int num_next;

/* A number as an argument (a small ring of buffers: argv lives until the run). */
static const char *arg_num(unsigned long long v)
{
	char *b = num_buf[num_next++ % 32];

	snprintf(b, sizeof(num_buf[0]), "%llu", v);
	return b;
}

static void set_args(const char **dst, const char *const *src)
{
	unsigned int i = 0;

	for (; src[i] && i < MAX_ARGS - 1; i++)
		dst[i] = src[i];
	dst[i] = NULL;
}

/* The Soft-RoCE device peers-setup.sh made, and its IPv4 RoCE v2 GID index. */
static bool rxe_dev(char *name, size_t size, unsigned int *gid)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d)))
		if (!strncmp(e->d_name, "rxe", 3)) {
			snprintf(name, size, "%.*s", (int)size - 1, e->d_name);
			found = true;
		}
	closedir(d);
	*gid = 0;
	for (unsigned int i = 0; found && i < 16; i++) {
		char path[160], v[64] = "", t[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gids/%u", name, i);
		if ((f = fopen(path, "r"))) {
			if (!fgets(v, sizeof(v), f))
				v[0] = 0;
			fclose(f);
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/types/%u",
			 name, i);
		if ((f = fopen(path, "r"))) {
			if (!fgets(t, sizeof(t), f))
				t[0] = 0;
			fclose(f);
		}
		/* ::ffff:a.b.c.d, RoCE v2: routable over the dummy link's address */
		if (!strncmp(v, "0000:0000:0000:0000:0000:ffff:", 30) && strstr(t, "v2")) {
			*gid = i;
			break;
		}
	}
	return found;
}

/* ---- the counted runs: syscalls and server CPU per message ---- */

/*
 * Run make(p, n) for n1 and n2 iterations under the counter; per message:
 * the difference of the counts (both sides) and of the server's CPU.
 */
typedef void (*make_fn)(struct pair *p, unsigned long long n, const void *arg);

static int count_per_msg(struct pair *p, make_fn make, const void *arg,
			 unsigned long long n1, unsigned long long n2, double msgs_per_iter,
			 double *sys, double *cpu, char *why, size_t why_size)
{
	unsigned long long c[2];
	double u[2];
	int err;

	for (int i = 0; i < 2; i++) {
		make(p, i ? n2 : n1, arg);
		if (sys)
			p->trace = true;
		err = run_pair(p, why, why_size);
		p->trace = false;
		if (err)
			return err;
		c[i] = p->res->syscalls;
		u[i] = cb_cpu_us(&p->res->srv_ru);
	}
	if (sys)
		*sys = c[1] > c[0] ? (double)(c[1] - c[0]) / ((double)(n2 - n1) * msgs_per_iter) : 0;
	if (cpu)
		*cpu = u[1] > u[0] ? (u[1] - u[0]) / ((double)(n2 - n1) * msgs_per_iter) : -1;
	return 0;
}

/* ---- UCX: ucx_perftest ---- */

struct ucx_arg {
	const char *test;		/* tag_lat, tag_bw */
	unsigned long long bytes;
	bool rc;			/* over Soft-RoCE, not shared memory */
	char dev[32];
	unsigned long long warmup;
};

static void ucx_make(struct pair *p, unsigned long long n, const void *arg)
{
	const struct ucx_arg *a = arg;
	static char net[64];

	p->port = new_port();
	/* the client sends its parameters to the server: -p is all it needs */
	set_args(p->srv, (const char *[]){ "ucx_perftest", "-p", arg_num(p->port), NULL });
	set_args(p->cli, (const char *[]){ "ucx_perftest", "127.0.0.1", "-p", arg_num(p->port),
		 "-t", a->test, "-s", arg_num(a->bytes), "-n", arg_num(n), "-w",
		 arg_num(a->warmup), NULL });
	memset(p->env, 0, sizeof(p->env));
	if (a->rc) {
		snprintf(net, sizeof(net), "UCX_NET_DEVICES=%.31s:1", a->dev);
		p->env[0] = "UCX_TLS=rc,self";
		p->env[1] = "UCX_IB_GID_INDEX=0";	/* the only one UCX connects with on rxe */
		p->env[2] = net;
	} else {
		p->env[0] = "UCX_TLS=sm,self";
	}
}

/* The "Final:" line: iterations, then (one-way) typical/average/overall usec, MB/s x2, msg/s x2. */
static int ucx_parse(const char *out, double v[8])
{
	const char *l = strstr(out, "Final:");

	if (!l || sscanf(l, "Final: %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2],
			 &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
		return -EIO;
	return 0;
}

/* ---- libfabric: fi_pingpong ---- */

/* A provider fi_pingpong runs on, and how its rows are named. */
struct fi_prov {
	const char *mode;		/* the rows' mode column */
	const char *prov, *ep;		/* -p, -e */
	const char *only;		/* FI_PROVIDER: the providers loaded */
	bool clanq;			/* ours: -d clanq0 / clanq1 */
};

static const struct fi_prov fi_provs[] = {
	/* only shm: otherwise libfabric probes the verbs devices (rxe) too */
	{ "shm", "shm", "rdm", "FI_PROVIDER=shm", false },
	{ "tcp", "tcp", "rdm", "FI_PROVIDER=tcp", false },
	{ "clanq-msg", "clanq", "msg", "FI_PROVIDER=clanq", true },
	{ "clanq-rdm", "clanq;ofi_rxm", "rdm", "FI_PROVIDER=clanq,ofi_rxm", true },
};

struct fi_arg {
	unsigned long long bytes;
	const struct fi_prov *fp;
	char path[300];			/* FI_PROVIDER_PATH=..., or "" */
};

/*
 * Where libfabric finds libclanq-fi.so: the tree's test VMs put it in
 * /clanq/fabric, FI_PROVIDER_PATH may name it, an installed one is in
 * libfabric's own directory (no variable needed). False: nowhere.
 */
static bool fi_clanq_path(char *env, size_t size)
{
	static const char *const dirs[] = {
		"/clanq/fabric", "/usr/lib/x86_64-linux-gnu/libfabric",
		"/usr/local/lib/libfabric",
	};
	const char *fpp = getenv("FI_PROVIDER_PATH");
	char buf[512];

	*env = 0;
	if (fpp) {
		snprintf(buf, sizeof(buf), "%s/libclanq-fi.so", fpp);
		if (access(buf, R_OK) == 0)
			return true;	/* inherited as it is */
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(buf, sizeof(buf), "%s/libclanq-fi.so", dirs[i]);
		if (access(buf, R_OK))
			continue;
		if (i == 0)
			snprintf(env, size, "FI_PROVIDER_PATH=%s", dirs[i]);
		return true;
	}
	return false;
}

static void fi_make(struct pair *p, unsigned long long n, const void *arg)
{
	const struct fi_arg *a = arg;
	const struct fi_prov *fp = a->fp;

	p->port = new_port();
	for (int cli = 0; cli < 2; cli++) {
		const char **v = cli ? p->cli : p->srv;
		unsigned int k = 0;

		v[k++] = "fi_pingpong";
		v[k++] = "-p";
		v[k++] = fp->prov;
		v[k++] = "-e";
		v[k++] = fp->ep;
		if (fp->clanq) {	/* server on NIC 0, client on NIC 1 */
			v[k++] = "-d";
			v[k++] = cli ? "clanq1" : "clanq0";
		}
		v[k++] = cli ? "-P" : "-B";
		v[k++] = arg_num(p->port);
		v[k++] = "-I";
		v[k++] = arg_num(n);
		v[k++] = "-S";
		v[k++] = arg_num(a->bytes);
		if (cli)
			v[k++] = "127.0.0.1";
		v[k] = NULL;
	}
	memset(p->env, 0, sizeof(p->env));
	p->env[0] = fp->only;
	if (a->path[0])
		p->env[1] = a->path;
}

/* The line under "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec". */
static int fi_parse(const char *out, double *usec_xfer)
{
	const char *l = strstr(out, "Mxfers/sec");
	char tok[8][24];

	if (!l || !(l = strchr(l, '\n')))
		return -EIO;
	if (sscanf(l + 1, "%23s %23s %23s %23s %23s %23s %23s %23s", tok[0], tok[1], tok[2],
		   tok[3], tok[4], tok[5], tok[6], tok[7]) != 8)
		return -EIO;
	*usec_xfer = strtod(tok[6], NULL);
	return *usec_xfer > 0 ? 0 : -EIO;
}

/* ---- perftest: ib_write_lat, ib_write_bw ---- */

struct ib_arg {
	const char *tool;
	unsigned long long bytes;
	char dev[32];
	unsigned int gid;
	bool samples;			/* -U: every sample, unsorted (client only) */
	unsigned int tx_depth;		/* -t, 0: perftest's default (128) */
};

static void ib_make(struct pair *p, unsigned long long n, const void *arg)
{
	const struct ib_arg *a = arg;
	const char *common[] = { a->tool, "-d", a->dev, "-x", arg_num(a->gid), "-F", "-s",
				 arg_num(a->bytes), "-n", arg_num(n), "-p", NULL, NULL, NULL,
				 NULL };
	unsigned int i = 0;

	p->port = new_port();
	common[11] = arg_num(p->port);
	if (a->tx_depth) {
		common[12] = "-t";
		common[13] = arg_num(a->tx_depth);
	}
	set_args(p->srv, common);
	set_args(p->cli, common);
	while (p->cli[i])
		i++;
	if (a->samples)
		p->cli[i++] = "-U";
	p->cli[i++] = "127.0.0.1";
	p->cli[i] = NULL;
	memset(p->env, 0, sizeof(p->env));
}

/* ib_write_lat -U: "#, usec" then "i, t" per sample (half a round trip each). */
static unsigned long long ib_samples(const char *out, double *v, unsigned long long max)
{
	const char *l = strstr(out, "#, usec");
	unsigned long long n = 0;

	if (!l)
		return 0;
	while ((l = strchr(l, '\n')) && n < max) {
		unsigned long long i;
		double t;

		l++;
		if (sscanf(l, "%llu, %lf", &i, &t) != 2)
			break;
		v[n++] = 2 * t;
	}
	return n;
}

/* The numbers on the line that starts with bytes (after the "#bytes" header). */
static int ib_numbers(const char *out, unsigned long long bytes, double *v, int max)
{
	const char *l = strstr(out, "#bytes");

	while (l && (l = strchr(l, '\n'))) {
		char *end;
		int n = 0;

		l++;
		while (*l == ' ')
			l++;
		if (strtoull(l, &end, 10) != bytes || end == l)
			continue;
		for (const char *q = l; n < max; q = end) {
			double x = strtod(q, &end);

			if (end == q)
				break;
			v[n++] = x;
		}
		return n;
	}
	return 0;
}

/* ---- the rows ---- */

static struct pair *pair_new(void)
{
	struct pair *p = calloc(1, sizeof(*p));

	if (!p)
		cb_die("calloc", -ENOMEM);
	p->out = malloc(CLI_OUT);
	if (!p->out)
		cb_die("malloc", -ENOMEM);
	p->res = cb_shared(sizeof(*p->res));
	return p;
}

static void pair_free(struct pair *p)
{
	cb_unshare(p->res, sizeof(*p->res));
	free(p->out);
	free(p);
}

static double run_timeout(void)
{
	return 90 + 20 * cb.seconds;
}

/*
 * The iteration pair for the counted runs of a latency test: their
 * difference worth about a second of round trips (rtt in usec), so a
 * slow peer (Soft-RoCE under TCG: milliseconds) stays within bounds.
 */
static void lat_counts(double rtt, unsigned long long *n1, unsigned long long *n2)
{
	double d = rtt > 0 ? 1e6 / rtt : 1000;
	double hi = cb.quick ? 400 : 1000;

	d = d < 20 ? 20 : d > hi ? hi : d;
	*n1 = (unsigned long long)d / 4 + 10;
	*n2 = *n1 + (unsigned long long)d;
}

/*
 * Round trips for a latency point: cb.iters, or fewer for a slow tool
 * (libfabric and Soft-RoCE take milliseconds under TCG), so that a point
 * takes about 10 s (2 s quick); rtt: its previous point's, 0 if none.
 */
static unsigned long long lat_iters(double rtt)
{
	double budget = (cb.quick ? 2 : 10) * 1e6;
	unsigned long long n = cb.iters;

	if (rtt > 0 && budget / rtt < (double)n)
		n = (unsigned long long)(budget / rtt);
	return n < 100 && cb.iters >= 100 ? 100 : n;
}

static void sys_note(struct cb_row *r, const char *what, int err)
{
	size_t len = strlen(r->note);

	if (err)
		fprintf(stderr, "# %s %s/%s %llu B: syscalls not counted: %s\n", r->test, r->impl,
			r->mode, r->bytes, what);

	if (err)
		snprintf(r->note + len, sizeof(r->note) - len, "; syscalls not counted");
}

/* One ucx_perftest tag_lat point. */
static int ucx_lat_point(struct pair *p, struct ucx_arg *a, const char *mode, char *why,
			 size_t why_size, double *rtt)
{
	unsigned long long n1, n2;
	struct cb_row r;
	double v[8];
	int err;

	cb_progress("lat %s/%s %llu B", "ucx", mode, a->bytes);
	a->warmup = cb.quick ? 100 : 1000;
	ucx_make(p, lat_iters(*rtt), a);
	p->timeout = run_timeout();
	err = run_pair(p, why, why_size);
	if (err)
		return err;
	if (ucx_parse(p->out, v)) {
		snprintf(why, why_size, "ucx_perftest: no Final line: %s", tail_of(p->out));
		return -EIO;
	}
	cb_row_init(&r, "lat", "ucx", mode, a->bytes);
	r.iters = (unsigned long long)v[0];
	/* median of the tool's last samples, and the average, both x2 */
	r.lat.min = r.lat.med = r.lat.p99 = r.lat.p999 = r.lat.max = 2 * v[1];
	r.lat.avg = 2 * v[3];
	*rtt = r.lat.avg;
	r.stdev = 0;
	r.has_lat = true;
	snprintf(r.note, sizeof(r.note), "2x one-way; min/max/99%% = median%s",
		 a->rc ? "; UCX_TLS=rc" : "; sm,self");
	a->warmup = 10;
	lat_counts(r.lat.avg, &n1, &n2);
	err = count_per_msg(p, ucx_make, a, n1, n2, 1, &r.syscalls, NULL, why, why_size);
	if (err) {
		r.syscalls = -1;
		sys_note(&r, why, err);
	}
	cb_emit(&r);
	return 0;
}

/* tag_lat over shared memory, then (with_rxe) over Soft-RoCE if there is a device. */
static int ucx_lat(bool with_rxe)
{
	unsigned long long sizes[8];
	unsigned int n = cb_lat_sizes(sizes);
	struct pair *p = pair_new();
	struct ucx_arg a = { .test = "tag_lat" };
	char why[256], dev[32];
	double rtt = 0;
	unsigned int gid;
	int err = 0;

	for (unsigned int i = 0; i < n && !err; i++) {
		a.bytes = sizes[i];
		err = ucx_lat_point(p, &a, "tag-shm", why, sizeof(why), &rtt);
	}
	if (err) {
		fprintf(stderr, "clanq-bench: lat ucx/tag-shm: %s\n", why);
		pair_free(p);
		return err;
	}
	/* over Soft-RoCE: a bonus if it works, a note if it does not */
	if (!with_rxe) {
		pair_free(p);
		return 0;
	}
	if (!rxe_dev(dev, sizeof(dev), &gid)) {
		cb_skip("lat", "ucx", "tag-rc-rxe", "no Soft-RoCE device (tests/vm/peers-setup.sh)");
	} else {
		a.rc = true;
		snprintf(a.dev, sizeof(a.dev), "%s", dev);
		rtt = 0;
		for (unsigned int i = 0; i < n; i++) {
			a.bytes = sizes[i];
			if (ucx_lat_point(p, &a, "tag-rc-rxe", why, sizeof(why), &rtt)) {
				cb_skip("lat", "ucx", "tag-rc-rxe", why);
				break;
			}
		}
	}
	pair_free(p);
	return 0;
}

static int fi_lat_on(const struct fi_prov *fp, const char *path)
{
	unsigned long long sizes[8], n1, n2, iters;
	double rtt = 0;
	unsigned int n = cb_lat_sizes(sizes);
	struct pair *p = pair_new();
	char why[256];
	int err = 0;

	for (unsigned int i = 0; i < n && !err; i++) {
		struct fi_arg a = { .bytes = sizes[i], .fp = fp };
		struct cb_row r;
		double us;

		snprintf(a.path, sizeof(a.path), "%s", path);
		cb_progress("lat libfabric/%s %llu B", fp->mode, sizes[i]);
		iters = lat_iters(rtt);
		fi_make(p, iters, &a);
		p->timeout = run_timeout();
		err = run_pair(p, why, sizeof(why));
		if (err)
			break;
		if (fi_parse(p->out, &us)) {
			snprintf(why, sizeof(why), "fi_pingpong: no result line: %s", tail_of(p->out));
			err = -EIO;
			break;
		}
		cb_row_init(&r, "lat", "libfabric", fp->mode, sizes[i]);
		r.iters = iters;
		rtt = 2 * us;
		/* usec/xfer is the run's time over 2 x iterations: an average only */
		r.lat.min = r.lat.med = r.lat.avg = r.lat.p99 = r.lat.p999 = r.lat.max = 2 * us;
		r.has_lat = true;
		snprintf(r.note, sizeof(r.note), "2x usec/xfer; average only (all columns)");
		lat_counts(2 * us, &n1, &n2);
		if (count_per_msg(p, fi_make, &a, n1, n2, 1, &r.syscalls, NULL, why, sizeof(why))) {
			r.syscalls = -1;
			sys_note(&r, why, 1);
		}
		cb_emit(&r);
	}
	if (err)
		fprintf(stderr, "clanq-bench: lat libfabric/%s: %s\n", fp->mode, why);
	pair_free(p);
	return err;
}

/*
 * Every provider's rows; one that fails is reported and skipped (shm
 * fails in some VMs: its ctrl/read), the others still run.
 */
/*
 * Can fp run here? Every provider needs fi_pingpong; ours also two NICs
 * and libclanq-fi.so where libfabric finds it (*path: the
 * FI_PROVIDER_PATH setting, or ""). A skip of test's row says what is
 * missing.
 */
static bool fi_prov_ready(const char *test, const struct fi_prov *fp, char *path, size_t size)
{
	*path = 0;
	if (!have_tool("fi_pingpong")) {
		cb_skip(test, "libfabric", fp->mode, "fi_pingpong not found (libfabric-bin)");
		return false;
	}
	if (!fp->clanq)
		return true;
	if (access("/dev/clanq0", F_OK) || access("/dev/clanq1", F_OK)) {
		cb_skip(test, "libfabric", fp->mode, "no /dev/clanq0 and /dev/clanq1");
		return false;
	}
	if (!fi_clanq_path(path, size)) {
		cb_skip(test, "libfabric", fp->mode,
			"libclanq-fi.so not found (make install, or FI_PROVIDER_PATH)");
		return false;
	}
	return true;
}

static int fi_lat(void)
{
	char path[300];

	for (size_t i = 0; i < sizeof(fi_provs) / sizeof(fi_provs[0]); i++) {
		const struct fi_prov *fp = &fi_provs[i];

		if (!fi_prov_ready("lat", fp, path, sizeof(path)))
			continue;
		if (fi_lat_on(fp, path))
			cb_skip("lat", "libfabric", fp->mode, "fi_pingpong failed (above)");
	}
	return 0;
}

static int rxe_lat(void)
{
	unsigned long long sizes[8], n1, n2, iters;
	double rtt = 0;
	unsigned int n = cb_lat_sizes(sizes);
	struct ib_arg a = { .tool = "ib_write_lat" };
	struct pair *p;
	char why[256];
	double *v;
	int err = 0;

	if (!rxe_dev(a.dev, sizeof(a.dev), &a.gid)) {
		cb_skip("lat", "rxe", "ib_write_lat", "no Soft-RoCE device (tests/vm/peers-setup.sh)");
		return 0;
	}
	p = pair_new();
	v = malloc(sizeof(*v) * (size_t)(cb.iters + 1));
	if (!v)
		cb_die("malloc", -ENOMEM);
	for (unsigned int i = 0; i < n && !err; i++) {
		struct cb_row r;
		unsigned long long got;

		cb_progress("lat rxe/ib_write_lat %llu B", sizes[i]);
		a.bytes = sizes[i];
		/* every sample if they fit in the output buffer (~15 bytes a line) */
		iters = lat_iters(rtt);
		a.samples = iters * 16 < CLI_OUT;
		ib_make(p, iters, &a);
		p->timeout = run_timeout();
		err = run_pair(p, why, sizeof(why));
		if (err)
			break;
		cb_row_init(&r, "lat", "rxe", "ib_write_lat", sizes[i]);
		got = a.samples ? ib_samples(p->out, v, iters) : 0;
		if (got) {
			cb_row_lat(&r, v, got);
			snprintf(r.note, sizeof(r.note), "2x one-way samples (-U); %s gid %u",
				 a.dev, a.gid);
		} else {
			double x[9];

			/* bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9% */
			if (ib_numbers(p->out, sizes[i], x, 9) != 9) {
				snprintf(why, sizeof(why), "ib_write_lat: no result line: %s",
					 tail_of(p->out));
				err = -EIO;
				break;
			}
			r.iters = (unsigned long long)x[1];
			r.lat.min = 2 * x[2];
			r.lat.max = 2 * x[3];
			r.lat.med = 2 * x[4];
			r.lat.avg = 2 * x[5];
			r.stdev = 2 * x[6];
			r.lat.p99 = 2 * x[7];
			r.lat.p999 = 2 * x[8];
			r.has_lat = true;
			snprintf(r.note, sizeof(r.note), "2x one-way summary; %s gid %u", a.dev, a.gid);
		}
		a.samples = false;
		rtt = r.lat.avg;
		lat_counts(r.lat.avg, &n1, &n2);
		if (count_per_msg(p, ib_make, &a, n1, n2, 1, &r.syscalls, NULL, why, sizeof(why))) {
			r.syscalls = -1;
			sys_note(&r, why, 1);
		}
		cb_emit(&r);
	}
	if (err)
		fprintf(stderr, "clanq-bench: lat rxe/ib_write_lat: %s\n", why);
	free(v);
	pair_free(p);
	return err;
}

/* with_rxe: perftest over Soft-RoCE too (in the VM; natively there is none) */
static int peers_lat_on(bool with_rxe)
{
	int err = 0;

	if (cb_wanted("ucx")) {
		if (!have_tool("ucx_perftest"))
			cb_skip("lat", "ucx", "tag-shm", "ucx_perftest not found (ucx-utils)");
		else
			err = ucx_lat(with_rxe);
	}
	if (!err && cb_wanted("libfabric"))
		err = fi_lat();
	if (!err && with_rxe && cb_wanted("rxe")) {
		if (!have_tool("ib_write_lat"))
			cb_skip("lat", "rxe", "ib_write_lat", "ib_write_lat not found (perftest)");
		else
			err = rxe_lat();
	}
	return err;
}

int peers_lat(void)
{
	return peers_lat_on(true);
}

int peers_native_lat(void)
{
	return peers_lat_on(false);
}

/* ---- bandwidth ---- */

/*
 * Iterations for about cb.seconds: from the message rate of the size
 * before (bandwidth-bound sizes scale it down), the first guess is
 * corrected by the run.
 */
static unsigned long long bw_iters(double rate, unsigned long long bytes,
				   unsigned long long prev_bytes)
{
	double r = rate, n;

	/* past 20 MB/s, assume the bandwidth, not the message rate, holds */
	if (prev_bytes && bytes > prev_bytes && rate * (double)prev_bytes > 20e6)
		r = rate * (double)prev_bytes / (double)bytes;
	n = r * cb.seconds;
	if (n < 20)
		n = 20;
	if (n > 1e8)
		n = 1e8;
	return (unsigned long long)n;
}

/* The counted runs' iterations for a bandwidth point: 1 .. 64 MiB moved. */
static void bw_counts(unsigned long long bytes, unsigned long long *n1, unsigned long long *n2)
{
	unsigned long long n = (64ull << 20) / bytes;

	if (n > (cb.quick ? 500 : 2000))
		n = cb.quick ? 500 : 2000;
	if (n < 10)
		n = 10;
	*n1 = n;
	*n2 = 3 * n;
}

/* tag_bw at each of sizes[0 .. n) */
static int ucx_bw(const unsigned long long *sizes, unsigned int n)
{
	unsigned long long prev = 0, n1, n2;
	struct ucx_arg a = { .test = "tag_bw" };
	struct pair *p = pair_new();
	double rate = 200e3;	/* first guess, msgs/s (TCG) */
	char why[256];
	int err = 0;

	for (unsigned int i = 0; i < n && !err; i++) {
		unsigned long long iters = bw_iters(rate, sizes[i], prev);
		struct cb_row r;
		double v[8];

		cb_progress("bw ucx/tag-shm %llu B", sizes[i]);
		a.bytes = sizes[i];
		a.warmup = iters / 10 + 1;
		ucx_make(p, iters, &a);
		p->timeout = run_timeout();
		err = run_pair(p, why, sizeof(why));
		if (err)
			break;
		if (ucx_parse(p->out, v) || v[7] <= 0) {
			snprintf(why, sizeof(why), "ucx_perftest: no Final line: %s", tail_of(p->out));
			err = -EIO;
			break;
		}
		cb_row_init(&r, "bw", "ucx", "tag-shm", sizes[i]);
		r.iters = (unsigned long long)v[0];
		r.mpps = v[7] / 1e6;
		/* from the message rate: no doubt about the tool's MB */
		r.bw_mibs = v[7] * (double)sizes[i] / (1 << 20);
		snprintf(r.note, sizeof(r.note), "sm,self; overall msg/s x bytes");
		rate = v[7];
		prev = sizes[i];
		a.warmup = 10;
		bw_counts(sizes[i], &n1, &n2);
		if (count_per_msg(p, ucx_make, &a, n1, n2, 1, &r.syscalls, NULL, why, sizeof(why))) {
			r.syscalls = -1;
			sys_note(&r, why, 1);
		}
		cb_emit(&r);
	}
	if (err)
		fprintf(stderr, "clanq-bench: bw ucx/tag-shm: %s\n", why);
	pair_free(p);
	return err;
}

static int rxe_bw(void)
{
	unsigned long long sizes[32], prev = 0, n1, n2;
	unsigned int n = cb_sizes(8, 4ull << 20, sizes, 32);
	struct ib_arg a = { .tool = "ib_write_bw" };
	double rate = 50e3;
	struct pair *p;
	char why[256];
	int err = 0;

	if (!rxe_dev(a.dev, sizeof(a.dev), &a.gid)) {
		cb_skip("bw", "rxe", "ib_write_bw", "no Soft-RoCE device (tests/vm/peers-setup.sh)");
		return 0;
	}
	p = pair_new();
	for (unsigned int i = 0; i < n && !err; i++) {
		unsigned long long iters = bw_iters(rate, sizes[i], prev);
		struct cb_row r;
		double x[5];

		cb_progress("bw rxe/ib_write_bw %llu B", sizes[i]);
		a.bytes = sizes[i];
		/*
		 * perftest wants iterations >= its tx depth (128): large
		 * messages, for which a few hundred take minutes on Soft-RoCE
		 * under TCG, go 16 deep (plenty to fill the link)
		 */
		a.tx_depth = iters < 200 ? 16 : 0;
		if (iters < 32)
			iters = 32;
		ib_make(p, iters, &a);
		p->timeout = run_timeout();
		err = run_pair(p, why, sizeof(why));
		if (err)
			break;
		/* bytes iterations BW-peak BW-average[MB/s] MsgRate[Mpps] */
		if (ib_numbers(p->out, sizes[i], x, 5) != 5 || x[4] <= 0) {
			snprintf(why, sizeof(why), "ib_write_bw: no result line: %s", tail_of(p->out));
			err = -EIO;
			break;
		}
		cb_row_init(&r, "bw", "rxe", "ib_write_bw", sizes[i]);
		r.iters = (unsigned long long)x[1];
		r.mpps = x[4];
		r.bw_mibs = x[4] * 1e6 * (double)sizes[i] / (1 << 20);
		snprintf(r.note, sizeof(r.note), "%s gid %u; MsgRate x bytes", a.dev, a.gid);
		rate = x[4] * 1e6;
		prev = sizes[i];
		bw_counts(sizes[i], &n1, &n2);
		if (n1 < 200) {		/* 16 deep: see above */
			a.tx_depth = 16;
			n1 = n1 < 32 ? 32 : n1;
			n2 = 3 * n1;
		}
		if (count_per_msg(p, ib_make, &a, n1, n2, 1, &r.syscalls, NULL, why, sizeof(why))) {
			r.syscalls = -1;
			sys_note(&r, why, 1);
		}
		cb_emit(&r);
	}
	if (err)
		fprintf(stderr, "clanq-bench: bw rxe/ib_write_bw: %s\n", why);
	pair_free(p);
	return err;
}

/*
 * fi_pingpong's bandwidth at every bw size: one message in flight (it
 * is a ping-pong; libfabric's own bandwidth tests, fabtests, are not in
 * Debian), so bytes over half a round trip, for every provider alike.
 * The steady state, from two runs of n and 3n transfers: an rdm
 * endpoint connects lazily inside fi_pingpong's timed loop (ofi_rxm's
 * buffer pools, ~0.35 s under TCG: provider/README.md), which one run's
 * usec/xfer would spread over its count. The lat rows count the system
 * calls; these do not.
 */
static int fi_bw_on(const struct fi_prov *fp, const char *path,
		    const unsigned long long *sizes, unsigned int n)
{
	struct fi_arg a = { .bytes = sizes[0], .fp = fp };
	struct pair *p = pair_new();
	double rtt;
	char why[256];
	int err;

	/* the first size's round trip, from a short run: 20 us to 2 ms a transfer */
	snprintf(a.path, sizeof(a.path), "%s", path);
	cb_progress("bw libfabric/%s %llu B (pilot)", fp->mode, sizes[0]);
	fi_make(p, 200, &a);
	p->timeout = run_timeout();
	err = run_pair(p, why, sizeof(why));
	if (!err && fi_parse(p->out, &rtt)) {
		snprintf(why, sizeof(why), "fi_pingpong: no result line: %s", tail_of(p->out));
		err = -EIO;
	}
	rtt *= 2;
	for (unsigned int i = 0; i < n && !err; i++) {
		double iters = cb.seconds * 1e6 / 4 / rtt, us[2], t[2], one_way;
		unsigned long long k[2];
		struct cb_row r;

		k[0] = iters < 10 ? 10 : iters > 1e6 ? 1000000 : (unsigned long long)iters;
		k[1] = 3 * k[0];
		a.bytes = sizes[i];
		for (unsigned int j = 0; j < 2 && !err; j++) {
			cb_progress("bw libfabric/%s %llu B (%llu)", fp->mode, sizes[i], k[j]);
			fi_make(p, k[j], &a);
			p->timeout = run_timeout();
			err = run_pair(p, why, sizeof(why));
			if (!err && fi_parse(p->out, &us[j])) {
				snprintf(why, sizeof(why), "fi_pingpong: no result line: %s",
					 tail_of(p->out));
				err = -EIO;
			}
			t[j] = us[j] * 2 * (double)k[j];	/* the timed loop, usec */
		}
		if (err)
			break;
		one_way = (t[1] - t[0]) / (2.0 * (double)(k[1] - k[0]));
		cb_row_init(&r, "bw", "libfabric", fp->mode, sizes[i]);
		r.iters = k[1];
		snprintf(r.note, sizeof(r.note), "ping-pong: bytes / half a round trip, "
			 "%llu vs %llu transfers", k[1], k[0]);
		if (one_way <= 0) {	/* noise beat the difference: the longer run */
			one_way = us[1];
			snprintf(r.note, sizeof(r.note), "ping-pong: bytes / usec/xfer of %llu "
				 "(no steady state)", k[1]);
		}
		r.mpps = 1 / one_way;
		r.bw_mibs = (double)sizes[i] / one_way * 1e6 / (1 << 20);
		cb_emit(&r);
		/* the next size's round trip: its bytes at this bandwidth, past 20 MB/s */
		rtt = 2 * one_way;
		if (i + 1 < n && (double)sizes[i] / one_way > 20)
			rtt *= (double)sizes[i + 1] / (double)sizes[i];
	}
	if (err)
		fprintf(stderr, "clanq-bench: bw libfabric/%s: %s\n", fp->mode, why);
	pair_free(p);
	return err;
}

/* Every provider's bw rows, skipped as fi_lat() skips them. */
static int fi_bw(const unsigned long long *sizes, unsigned int n)
{
	char path[300];

	for (size_t i = 0; i < sizeof(fi_provs) / sizeof(fi_provs[0]); i++) {
		const struct fi_prov *fp = &fi_provs[i];

		if (!fi_prov_ready("bw", fp, path, sizeof(path)))
			continue;
		if (fi_bw_on(fp, path, sizes, n))
			cb_skip("bw", "libfabric", fp->mode, "fi_pingpong failed (above)");
	}
	return 0;
}

int peers_bw(void)
{
	unsigned long long sizes[32];
	unsigned int n = cb_sizes(8, 4ull << 20, sizes, 32);
	int err = 0;

	if (cb_wanted("ucx")) {
		if (!have_tool("ucx_perftest"))
			cb_skip("bw", "ucx", "tag-shm", "ucx_perftest not found (ucx-utils)");
		else
			err = ucx_bw(sizes, n);
	}
	if (!err && cb_wanted("rxe")) {
		if (!have_tool("ib_write_bw"))
			cb_skip("bw", "rxe", "ib_write_bw", "ib_write_bw not found (perftest)");
		else
			err = rxe_bw();
	}
	if (!err && cb_wanted("libfabric"))
		err = fi_bw(sizes, n);
	return err;
}

/* ---- load: UCX's server CPU per message at saturation ---- */

int peers_native_bw(const unsigned long long *sizes, unsigned int n)
{
	if (!cb_wanted("ucx"))
		return 0;
	if (!have_tool("ucx_perftest")) {
		cb_skip("bw", "ucx", "tag-shm", "ucx_perftest not found (ucx-utils)");
		return 0;
	}
	return ucx_bw(sizes, n);
}

int peers_load(void)
{
	struct ucx_arg a = { .test = "tag_bw", .bytes = 8 };
	unsigned long long n2, n1;
	struct pair *p;
	struct cb_row r;
	char why[256];
	double v[8];
	int err;

	if (!cb_wanted("ucx"))
		return 0;
	if (!have_tool("ucx_perftest")) {
		cb_skip("load", "ucx", "tag-shm", "ucx_perftest not found (ucx-utils)");
		return 0;
	}
	p = pair_new();
	cb_progress("load ucx/tag-shm 8 B");
	/* a short run for the rate, then two for the differences */
	a.warmup = 100;
	ucx_make(p, cb.quick ? 20000 : 100000, &a);
	p->timeout = run_timeout();
	err = run_pair(p, why, sizeof(why));
	if (!err && (ucx_parse(p->out, v) || v[7] <= 0)) {
		snprintf(why, sizeof(why), "ucx_perftest: no Final line: %s", tail_of(p->out));
		err = -EIO;
	}
	if (err)
		goto out;
	/*
	 * Two seconds' worth at least: the difference of two runs' CPU
	 * must stand well above the noise of UCX's start-up under TCG
	 * (and the 4 ms ticks CPU time is counted in).
	 */
	n2 = (unsigned long long)(v[7] * (cb.seconds < 2 ? 2 : cb.seconds));
	if (n2 < 4000)
		n2 = 4000;
	n1 = n2 / 8;
	cb_row_init(&r, "load", "ucx", "tag-shm", 8);
	r.param = 1;
	/* the server receives (ucx_perftest's group index 0): its rusage */
	err = count_per_msg(p, ucx_make, &a, n1, n2, 1, NULL, &r.cpu_us, why, sizeof(why));
	if (err)
		goto out;
	if (ucx_parse(p->out, v) || v[7] <= 0) {
		snprintf(why, sizeof(why), "ucx_perftest: no Final line: %s", tail_of(p->out));
		err = -EIO;
		goto out;
	}
	r.iters = n2;
	r.mpps = v[7] / 1e6;
	r.bw_mibs = v[7] * 8 / (1 << 20);
	err = count_per_msg(p, ucx_make, &a, n1 / 4, n2 / 4, 1, &r.syscalls, NULL, why,
			    sizeof(why));
	snprintf(r.note, sizeof(r.note), "tag_bw sm,self; server cpu: rusage, %u/%u k msgs%s",
		 (unsigned int)(n1 / 1000), (unsigned int)(n2 / 1000),
		 r.cpu_us < 0 ? ": no difference above noise" : "");
	if (err) {
		r.syscalls = -1;
		sys_note(&r, why, err);
		err = 0;
	}
	cb_emit(&r);
out:
	if (err)
		fprintf(stderr, "clanq-bench: load ucx/tag-shm: %s\n", why);
	pair_free(p);
	return err;
}
