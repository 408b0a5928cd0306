// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The kernel's own paths: what a user gets from system calls alone, on
 * the same kernel, in the same run as clanq.
 *
 *   lat   udp and tcp over 127.0.0.1 (blocking recv, or MSG_DONTWAIT in a
 *         loop at both ends), eventfd (two eventfds wake the sides, the
 *         payload goes through shared memory: the cheapest wake-up the
 *         kernel has), pipe (the payload through two pipes);
 *   bw    a one-way stream over tcp, a pipe and udp, measured at the
 *         receiver from its first byte to its last;
 *   idle  a single-threaded tcp echo server holding N connections, woken
 *         by epoll or poll(), blocking or spinning (Figure 5);
 *   load  one single-threaded udp echo server with epoll, C clients each
 *         with one message in flight (Figure 6's baseline).
 *
 * Every system call the measured loops make goes through cb_sys(), so
 * the counts are what the programs did, EAGAINs of busy-poll loops
 * included. A forked peer publishes its running count in shared memory
 * after each call; the measuring side samples it at the start and the
 * end of the measured iterations, so warm-up and setup are not counted.
 *
 * Nothing waits for ever: the measuring side runs under alarm() with
 * SIGALRM (and, where a peer must not exit, SIGCHLD) caught without
 * SA_RESTART, so a blocked call returns EINTR and busy loops see the
 * flag; children are reaped with a deadline and killed past it.
 */
#include "cb.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define K_MAX		4096		/* largest lat message */
#define K_BUF		65536		/* receive buffers: any datagram fits */

/* ---- no wait for ever ---- */

static volatile sig_atomic_t k_stop;	/* the signal that ended a wait, or 0 */
static struct sigaction k_old_alrm, k_old_chld;

static void k_on_signal(int sig)
{
	if (!k_stop)
		k_stop = sig;
	/*
	 * A child that ends just before the parent enters a blocking call
	 * leaves it blocked: the alarm, brought forward, ends that too.
	 */
	if (sig == SIGCHLD)
		alarm(1);
}

/*
 * From now on, a blocking call returns EINTR after seconds (SIGALRM) or,
 * if children, as soon as a child ends (SIGCHLD): only for stretches in
 * which no child is meant to exit.
 */
static void k_arm(double seconds, bool children)
{
	struct sigaction sa = { .sa_handler = k_on_signal };	/* no SA_RESTART */

	sigemptyset(&sa.sa_mask);
	k_stop = 0;
	sigaction(SIGALRM, &sa, &k_old_alrm);
	sigaction(SIGCHLD, children ? &sa : NULL, &k_old_chld);
	alarm((unsigned int)seconds + 1);
}

static void k_disarm(void)
{
	alarm(0);
	sigaction(SIGALRM, &k_old_alrm, NULL);
	sigaction(SIGCHLD, &k_old_chld, NULL);
}

/* Say what failed (where: the point; what: the step) and return -errno. */
static int k_fail(const char *where, const char *what, int err)
{
	const char *why = strerror(-err);

	if (err == -EINTR && k_stop) {
		why = k_stop == SIGALRM ? "timed out" : "the peer process ended";
		err = k_stop == SIGALRM ? -ETIMEDOUT : -ECONNRESET;
	}
	if (isatty(STDERR_FILENO))
		fputs("\r\033[K", stderr);	/* over the progress line */
	fprintf(stderr, "clanq-bench: %s: %s: %s\n", where, what, why);
	return err;
}

/*
 * Reap a child that should be ending: its exit status, or -1 if it did
 * not end within seconds (then it is killed) or was killed.
 */
static int k_reap(pid_t pid, double seconds, struct rusage *ru)
{
	uint64_t end = cb_now_ns() + (uint64_t)(seconds * 1e9);

	for (;;) {
		siginfo_t si = { 0 };

		/* WNOWAIT: look only, so that cb_reap() gets the rusage */
		if (!waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) &&
		    si.si_pid == pid)
			return cb_reap(pid, ru);
		if (cb_now_ns() > end) {
			cb_kill(pid);
			return -1;
		}
		usleep(1000);
	}
}

/* Has the child ended (without reaping it)? */
static bool k_ended(pid_t pid)
{
	siginfo_t si = { 0 };

	return !waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) &&
	       si.si_pid == pid;
}

/* Wait until *w == val, sleeping (not spinning: the peer may need the core). */
static int k_wait_word(uint32_t *w, uint32_t val, pid_t peer)
{
	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) != val) {
		struct timespec ts = { 0, 200000 };

		if (k_stop)
			return -EINTR;
		if (k_ended(peer))
			return -ECONNRESET;
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* ---- sockets on 127.0.0.1 ---- */

static int k_socket(int type, struct sockaddr_in *a)
{
	socklen_t alen = sizeof(*a);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)a, sizeof(*a)) ||
	    getsockname(fd, (struct sockaddr *)a, &alen)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int k_nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ? -errno : 0;
}

/* A listening socket; accepted sockets inherit its TCP_NODELAY. */
static int k_listener(struct sockaddr_in *a, int backlog)
{
	int fd = k_socket(SOCK_STREAM, a), err;

	if (fd < 0)
		return fd;
	err = k_nodelay(fd);
	if (!err && listen(fd, backlog))
		err = -errno;
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

static int k_connect(const struct sockaddr_in *a, bool nodelay)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)))
		err = -errno;
	if (!err && nodelay)
		err = k_nodelay(fd);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* ---- a pair of ends: the measuring side (0) and its forked peer (1) ---- */

enum k_kind { K_UDP, K_TCP, K_EVENTFD, K_PIPE };

/* eventfd's payload travels in shared memory, one box per direction */
struct k_box {
	uint64_t len;
	unsigned char data[K_MAX];
};

struct k_shm {
	uint64_t peer_calls __attribute__((aligned(64)));	/* the peer's cb_syscalls */
	uint64_t msgs, bytes, calls;	/* bw: what the sender sent, its calls */
	uint32_t done;			/* bw: the sender is through */
	struct k_box box[2] __attribute__((aligned(64)));	/* [side]: what side sent */
};

struct k_pair {
	enum k_kind kind;
	bool busy;		/* recv with MSG_DONTWAIT in a loop */
	size_t len;		/* bw: message size */
	int fd[2][2];		/* [side][0] sends, [side][1] receives */
	struct k_shm *sh;
};

static bool k_stream(const struct k_pair *k)
{
	return k->kind == K_TCP || k->kind == K_PIPE;
}

/* The peer publishes its count after every call: a store the other side reads twice. */
static void k_pub(struct k_pair *k, int side)
{
	if (side)
		__atomic_store_n(&k->sh->peer_calls, cb_syscalls, __ATOMIC_RELAXED);
}

static uint64_t k_peer_calls(struct k_pair *k)
{
	return __atomic_load_n(&k->sh->peer_calls, __ATOMIC_RELAXED);
}

static bool k_fd_used(const struct k_pair *k, int side, int fd)
{
	return k->fd[side][0] == fd || k->fd[side][1] == fd;
}

/* Close side's ends that the other side does not share (eventfds are shared). */
static void k_close_side(struct k_pair *k, int side)
{
	for (int i = 0; i < 2; i++) {
		int fd = k->fd[side][i];

		if (fd >= 0 && !k_fd_used(k, !side, fd) && (i == 0 || fd != k->fd[side][0]))
			close(fd);
	}
	for (int i = 0; i < 2; i++)
		if (!k_fd_used(k, !side, k->fd[side][i]))
			k->fd[side][i] = -1;
}

static void k_close_all(struct k_pair *k)
{
	k_close_side(k, 1);
	k_close_side(k, 0);
	/* what both shared is left: close each once */
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < 2; i++) {
			int fd = k->fd[s][i];

			if (fd < 0)
				continue;
			close(fd);
			for (int t = 0; t < 2; t++)
				for (int j = 0; j < 2; j++)
					if (k->fd[t][j] == fd)
						k->fd[t][j] = -1;
		}
}

static int k_open(struct k_pair *k)
{
	struct sockaddr_in a, b;
	int p[2], q[2], l, err = 0;

	memset(k->fd, -1, sizeof(k->fd));
	switch (k->kind) {
	case K_UDP:
		k->fd[0][0] = k->fd[0][1] = k_socket(SOCK_DGRAM, &a);
		if (k->fd[0][0] < 0)
			return k->fd[0][0];
		k->fd[1][0] = k->fd[1][1] = k_socket(SOCK_DGRAM, &b);
		if (k->fd[1][0] < 0)
			err = k->fd[1][0];
		else if (connect(k->fd[0][0], (struct sockaddr *)&b, sizeof(b)) ||
			 connect(k->fd[1][0], (struct sockaddr *)&a, sizeof(a)))
			err = -errno;
		break;
	case K_TCP:
		l = k_listener(&a, 1);
		if (l < 0)
			return l;
		k->fd[0][0] = k->fd[0][1] = k_connect(&a, true);
		if (k->fd[0][0] < 0)
			err = k->fd[0][0];
		else if ((k->fd[1][0] = k->fd[1][1] = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
			err = -errno;
		close(l);
		break;
	case K_EVENTFD:
		k->fd[0][0] = k->fd[1][1] = eventfd(0, EFD_CLOEXEC);
		k->fd[1][0] = k->fd[0][1] = eventfd(0, EFD_CLOEXEC);
		if (k->fd[0][0] < 0 || k->fd[1][0] < 0)
			err = -errno;
		break;
	case K_PIPE:
		if (pipe2(p, O_CLOEXEC))
			return -errno;
		k->fd[0][0] = p[1];
		k->fd[1][1] = p[0];
		if (pipe2(q, O_CLOEXEC)) {
			err = -errno;
			break;
		}
		k->fd[1][0] = q[1];
		k->fd[0][1] = q[0];
		break;
	}
	if (err)
		k_close_all(k);
	return err;
}

/* Send len bytes from side: 0, or -errno. */
static int k_tx(struct k_pair *k, int side, const void *buf, size_t len)
{
	int fd = k->fd[side][0];
	size_t done = 0;
	ssize_t n;

	if (k->kind == K_EVENTFD) {
		struct k_box *b = &k->sh->box[side];
		uint64_t one = 1;

		if (len > K_MAX)
			return -EMSGSIZE;
		memcpy(b->data, buf, len);
		b->len = len;
		/* the write orders the copy before the peer's read returns */
		n = cb_sys(write(fd, &one, sizeof(one)));
		k_pub(k, side);
		return n == sizeof(one) ? 0 : n < 0 ? -errno : -EIO;
	}
	do {
		if (k->kind == K_PIPE)
			n = cb_sys(write(fd, (const char *)buf + done, len - done));
		else
			n = cb_sys(send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL));
		k_pub(k, side);
		if (n < 0)
			return -errno;
		done += (size_t)n;
	} while (done < len);
	return 0;
}

/*
 * Receive on side into buf (at most max): bytes read, 0 at the end (EOF,
 * or an empty datagram / box: the quit message), or -errno (-EINTR: the
 * wait was ended by k_arm()'s signals).
 */
static ssize_t k_rx(struct k_pair *k, int side, void *buf, size_t max)
{
	int fd = k->fd[side][1];
	ssize_t n;

	if (k_stop)
		return -EINTR;
	if (k->kind == K_EVENTFD) {
		struct k_box *b = &k->sh->box[!side];
		uint64_t v;

		n = cb_sys(read(fd, &v, sizeof(v)));
		k_pub(k, side);
		if (n != sizeof(v))
			return n < 0 ? -errno : -EIO;
		if (b->len > max)
			return -EMSGSIZE;
		memcpy(buf, b->data, b->len);
		return (ssize_t)b->len;
	}
	for (;;) {
		if (k->kind == K_PIPE)
			n = cb_sys(read(fd, buf, max));
		else
			n = cb_sys(recv(fd, buf, max, k->busy ? MSG_DONTWAIT : 0));
		k_pub(k, side);
		if (n >= 0)
			return n;
		if (errno != EAGAIN || !k->busy)
			return -errno;
		if (k_stop)
			return -EINTR;
	}
}

/* The quit message: an empty datagram or box; streams end by closing. */
static void k_quit(struct k_pair *k)
{
	if (!k_stream(k))
		k_tx(k, 0, "", 0);
}

/* lat's peer: every message back as it came, until the quit message. */
static int k_echo(void *arg)
{
	static unsigned char buf[K_BUF];
	struct k_pair *k = arg;

	k_close_side(k, 0);
	for (;;) {
		ssize_t n = k_rx(k, 1, buf, k->kind == K_EVENTFD ? K_MAX : sizeof(buf));

		if (n <= 0)
			return n ? CB_FAIL : 0;
		if (k_tx(k, 1, buf, (size_t)n))
			return CB_FAIL;
	}
}

/* ---- lat ---- */

struct k_lat_kind {
	const char *impl, *mode;
	enum k_kind kind;
	bool busy;
};

static unsigned long long k_warm(void)
{
	return cb.iters / 10 < 100 ? cb.iters / 10 : 100;
}

/* Seconds a point may take: generous (a VM's wake-up can take a 4 ms tick). */
static double k_lat_limit(void)
{
	return 30 + (double)(cb.iters + k_warm()) * 0.01;
}

static int k_lat_point(struct k_pair *k, const char *where, size_t len, double *v,
		       struct cb_row *r)
{
	static unsigned char out[K_MAX], in[K_BUF];
	unsigned long long warm = k_warm(), c0 = 0;
	uint64_t s0 = 0;

	for (unsigned long long i = 0; i < warm + cb.iters; i++) {
		uint64_t t0;
		ssize_t n;
		int err;

		memset(out, (int)((i * 7) & 0xff), len);
		memcpy(out, &i, len < sizeof(i) ? len : sizeof(i));
		if (i == warm) {
			c0 = cb_syscalls;
			s0 = k_peer_calls(k);
		}
		t0 = cb_now_ns();
		err = k_tx(k, 0, out, len);
		if (err)
			return k_fail(where, "send", err);
		for (size_t got = 0; got < len; got += (size_t)n) {
			n = k_rx(k, 0, in + got, k_stream(k) ? len - got : sizeof(in));
			if (n < 0)
				return k_fail(where, "receive", (int)n);
			if (n == 0)
				return k_fail(where, "receive", -ECONNRESET);
			if (!k_stream(k) && (size_t)n != len)
				return k_fail(where, "the answer's length differs", -EIO);
		}
		if (i >= warm)
			v[i - warm] = (double)(cb_now_ns() - t0) / 1000.0;
		if (memcmp(in, out, len))
			return k_fail(where, "the answer differs", -EIO);
	}
	cb_row_lat(r, v, cb.iters);
	r->syscalls = (double)(cb_syscalls - c0 + k_peer_calls(k) - s0) / (double)cb.iters;
	/* each end's own, as clanq's rows say theirs */
	snprintf(r->note, sizeof(r->note), "sys/rt: client %.2f, server %.2f",
		 (double)(cb_syscalls - c0) / (double)cb.iters,
		 (double)(k_peer_calls(k) - s0) / (double)cb.iters);
	return 0;
}

static int k_lat_kind(const struct k_lat_kind *t, const unsigned long long *sizes,
		      unsigned int nr, double *v)
{
	struct k_pair k = { .kind = t->kind, .busy = t->busy };
	char where[64];
	int err, status;
	pid_t pid;

	snprintf(where, sizeof(where), "lat %s/%s", t->impl, t->mode);
	k.sh = cb_shared(sizeof(*k.sh));
	err = k_open(&k);
	if (err) {
		cb_unshare(k.sh, sizeof(*k.sh));
		return k_fail(where, "setting up", err);
	}
	pid = cb_fork(k_echo, &k);
	k_close_side(&k, 1);
	for (unsigned int s = 0; s < nr && !err; s++) {
		struct cb_row r;

		snprintf(where, sizeof(where), "lat %s/%s %llu B", t->impl, t->mode, sizes[s]);
		cb_progress("%s", where);
		cb_row_init(&r, "lat", t->impl, t->mode, sizes[s]);
		k_arm(k_lat_limit(), true);
		err = k_lat_point(&k, where, sizes[s], v, &r);
		k_disarm();
		if (!err)
			cb_emit(&r);
	}
	if (!err)
		k_quit(&k);
	k_close_all(&k);	/* streams: the echo side sees EOF */
	if (err) {
		cb_kill(pid);
	} else {
		status = k_reap(pid, 10, NULL);
		if (status)
			err = k_fail(where, "the echo side failed", -EIO);
	}
	cb_unshare(k.sh, sizeof(*k.sh));
	return err;
}

int kernel_lat(void)
{
	static const struct k_lat_kind kinds[] = {
		{ "udp", "block", K_UDP, false },
		{ "udp", "busypoll", K_UDP, true },
		{ "tcp", "block", K_TCP, false },
		{ "tcp", "busypoll", K_TCP, true },
		{ "eventfd", "block", K_EVENTFD, false },
		{ "pipe", "block", K_PIPE, false },
	};
	unsigned long long sizes[8];
	unsigned int nr = cb_lat_sizes(sizes);
	double *v;
	int err = 0;

	v = calloc(cb.iters, sizeof(*v));
	if (!v)
		cb_die("memory", -ENOMEM);
	for (unsigned int i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && !err; i++)
		if (cb_wanted(kinds[i].impl))
			err = k_lat_kind(&kinds[i], sizes, nr, v);
	free(v);
	return err;
}

/* ---- bw ---- */

/* The stream's bytes: a pattern the receiver spot-checks at each read's ends. */
static unsigned char k_pat(unsigned long long i)
{
	return (unsigned char)(i * 7 + 1);
}

/* bw's peer: the sender, for cb.seconds by its own clock, then it closes. */
static int k_sender(void *arg)
{
	struct k_pair *k = arg;
	size_t len = k->len, every = len >= 4096 ? 1 : 64;
	unsigned long long c0 = cb_syscalls, msgs = 0;
	uint64_t end = cb_now_ns() + (uint64_t)(cb.seconds * 1e9);
	unsigned char *buf = malloc(len);

	k_close_side(k, 0);
	if (!buf)
		return CB_FAIL;
	for (size_t i = 0; i < len; i++)
		buf[i] = k_pat(i);
	for (;;) {
		/* datagrams carry their number: the receiver counts the lost */
		if (k->kind == K_UDP)
			memcpy(buf, &msgs, len < sizeof(msgs) ? len : sizeof(msgs));
		if (k_tx(k, 1, buf, len))
			return CB_FAIL;
		msgs++;
		if (msgs % every == 0 && cb_now_ns() >= end)
			break;
	}
	k->sh->msgs = msgs;
	k->sh->bytes = msgs * len;
	k->sh->calls = cb_syscalls - c0;
	__atomic_store_n(&k->sh->done, 1, __ATOMIC_RELEASE);
	/* the end, if the receiver is waiting (a datagram may be lost: it also polls done) */
	for (int i = 0; k->kind == K_UDP && i < 3; i++)
		k_tx(k, 1, "", 0);
	free(buf);
	return 0;
}

struct k_bw_got {
	unsigned long long bytes, first, msgs;	/* first: bytes of the first read */
	uint64_t t_first, t_last;
	unsigned long long calls;
};

/* Read the stream until its end, checking it; udp: until done. */
static int k_bw_receive(struct k_pair *k, pid_t pid, const char *where, unsigned char *buf,
			size_t size, struct k_bw_got *g)
{
	int fd = k->fd[0][1];
	unsigned long long c0 = cb_syscalls, next = 0;

	memset(g, 0, sizeof(*g));
	for (;;) {
		ssize_t n;
		uint64_t t;

		if (k->kind == K_PIPE)
			n = cb_sys(read(fd, buf, size));
		else
			n = cb_sys(recv(fd, buf, size, 0));
		if (n < 0 && k->kind == K_UDP && errno == EAGAIN) {
			/* SO_RCVTIMEO: is the sender through, or gone? */
			if (__atomic_load_n(&k->sh->done, __ATOMIC_ACQUIRE))
				break;
			if (k_ended(pid))
				return k_fail(where, "receive", -ECONNRESET);
			continue;
		}
		if (n < 0)
			return k_fail(where, "receive", -errno);
		if (n == 0)
			break;
		t = cb_now_ns();
		if (!g->bytes) {
			g->t_first = t;
			g->first = (unsigned long long)n;
		}
		g->t_last = t;
		if (k->kind == K_UDP) {
			unsigned long long seq = 0;

			memcpy(&seq, buf, k->len < sizeof(seq) ? k->len : sizeof(seq));
			if ((size_t)n != k->len || seq < next ||
			    (k->len > 8 && buf[n - 1] != k_pat((unsigned long long)n - 1)))
				return k_fail(where, "a datagram differs", -EIO);
			next = seq + 1;
			g->msgs++;
		} else if (buf[0] != k_pat(g->bytes % k->len) ||
			   buf[n - 1] != k_pat((g->bytes + (unsigned long long)n - 1) % k->len)) {
			return k_fail(where, "the stream differs", -EIO);
		}
		g->bytes += (unsigned long long)n;
	}
	g->calls = cb_syscalls - c0;
	return 0;
}

static int k_bw_point(enum k_kind kind, const char *impl, size_t len, unsigned char *buf,
		      size_t size)
{
	struct k_pair k = { .kind = kind, .len = len };
	struct timeval tv = { 0, 50000 };
	unsigned long long lost = 0, msgs;
	struct k_bw_got g;
	char where[64];
	struct cb_row r;
	double dt;
	int err, status;
	pid_t pid;

	snprintf(where, sizeof(where), "bw %s/stream %zu B", impl, len);
	cb_progress("%s", where);
	k.sh = cb_shared(sizeof(*k.sh));
	err = k_open(&k);
	if (!err && kind == K_UDP) {
		int rcvbuf = 4 << 20;

		/* room for a burst (FORCE: past rmem_max, if root), and a poll of done */
		if (setsockopt(k.fd[0][1], SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
			setsockopt(k.fd[0][1], SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		if (setsockopt(k.fd[0][1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
			err = -errno;
	}
	if (err) {
		cb_unshare(k.sh, sizeof(*k.sh));
		return k_fail(where, "setting up", err);
	}
	pid = cb_fork(k_sender, &k);
	k_close_side(&k, 1);
	/* the sender ends by design: SIGCHLD is no failure here */
	k_arm(30 + 3 * cb.seconds, false);
	err = k_bw_receive(&k, pid, where, buf, size, &g);
	k_disarm();
	k_close_all(&k);
	if (err) {
		cb_kill(pid);
		cb_unshare(k.sh, sizeof(*k.sh));
		return err;
	}
	status = k_reap(pid, 10, NULL);
	if (status)
		err = k_fail(where, "the sender failed", -EIO);
	else if (kind != K_UDP && g.bytes != k.sh->bytes)
		err = k_fail(where, "bytes sent and received differ", -EIO);
	else if (g.t_last <= g.t_first)
		err = k_fail(where, "too little arrived to time", -EIO);
	if (err) {
		cb_unshare(k.sh, sizeof(*k.sh));
		return err;
	}
	/* from the first byte to the last: what arrived after the first read */
	dt = (double)(g.t_last - g.t_first) / 1e9;
	msgs = kind == K_UDP ? g.msgs : g.bytes / len;
	cb_row_init(&r, "bw", impl, "stream", len);
	r.iters = msgs;
	r.bw_mibs = (double)(g.bytes - g.first) / dt / (1 << 20);
	r.mpps = (double)(g.bytes - g.first) / (double)len / dt / 1e6;
	r.syscalls = msgs ? (double)(g.calls + k.sh->calls) / (double)msgs : -1;
	if (kind == K_UDP) {
		lost = k.sh->msgs - g.msgs;
		snprintf(r.note, sizeof(r.note), "lost %llu of %llu", lost,
			 (unsigned long long)k.sh->msgs);
	} else {
		snprintf(r.note, sizeof(r.note), "reads of <= %zu B", size);
	}
	cb_emit(&r);
	cb_unshare(k.sh, sizeof(*k.sh));
	return 0;
}

int kernel_bw(void)
{
	static const struct {
		const char *impl;
		enum k_kind kind;
		unsigned long long max;
	} kinds[] = {
		{ "tcp", K_TCP, 4ull << 20 },
		{ "pipe", K_PIPE, 4ull << 20 },
		/* the largest power of two a datagram holds */
		{ "udp", K_UDP, 32768 },
	};
	unsigned long long sizes[32];
	unsigned char *buf = malloc(4ull << 20);
	int err = 0;

	if (!buf)
		cb_die("memory", -ENOMEM);
	for (unsigned int i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && !err; i++) {
		unsigned int nr = cb_sizes(8, kinds[i].max, sizes, 32);

		if (!cb_wanted(kinds[i].impl))
			continue;
		for (unsigned int s = 0; s < nr && !err; s++) {
			/* a stream's reader takes what is there: at least 64 KiB a read */
			size_t size = sizes[s] > K_BUF ? sizes[s] : K_BUF;

			err = k_bw_point(kinds[i].kind, kinds[i].impl, sizes[s], buf, size);
		}
	}
	free(buf);
	return err;
}

/* ---- idle ---- */

/*
 * The server's four ways to wait, in the order the rows come: epoll/block
 * first, the baseline main() compares the others with.
 */
static const struct {
	const char *impl, *mode;
	bool epoll, spin;
} k_idle_ways[] = {
	{ "epoll", "block", true, false },
	{ "epoll", "spin", true, true },
	{ "poll", "block", false, false },
	{ "poll", "spin", false, true },
};
#define K_IDLE_WAYS	(sizeof(k_idle_ways) / sizeof(k_idle_ways[0]))
#define K_IDLE_BUDGET	20.0	/* seconds of round trips a point (quick: 2) */

struct k_idle_shm {
	uint64_t srv_calls __attribute__((aligned(64)));
	uint32_t way __attribute__((aligned(64)));	/* 1 + the way asked for */
	uint32_t ready;					/* 1 + the way served */
};

struct k_idle_args {
	int lfd;
	unsigned long long n;
	struct k_idle_shm *sh;
};

/* One readable connection: 1 echoed, 0 nothing there, -1 EOF, -2 error. */
static int k_idle_serve(int fd)
{
	char buf[256];
	ssize_t n = cb_sys(recv(fd, buf, sizeof(buf), MSG_DONTWAIT));

	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN ? 0 : -2;
	for (ssize_t done = 0, w; done < n; done += w) {
		w = cb_sys(send(fd, buf + done, (size_t)(n - done), MSG_NOSIGNAL));
		if (w <= 0)
			return -2;
	}
	return 1;
}

/*
 * The single-threaded server: accept n connections, then echo on any of
 * them with the way asked for, switching when asked (checked after each
 * wake-up); the first EOF (the client closing) ends it.
 */
static int k_idle_server(void *arg)
{
	struct k_idle_args *a = arg;
	struct k_idle_shm *sh = a->sh;
	struct epoll_event ev[64];
	struct pollfd *pfd = calloc(a->n, sizeof(*pfd));

	if (!pfd)
		return CB_FAIL;
	for (unsigned long long i = 0; i < a->n; i++) {
		pfd[i].fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);
		pfd[i].events = POLLIN;
		if (pfd[i].fd < 0 && errno == EINTR)
			i--;
		else if (pfd[i].fd < 0)
			return CB_FAIL;
	}
	close(a->lfd);
	for (;;) {
		uint32_t way = __atomic_load_n(&sh->way, __ATOMIC_ACQUIRE);
		bool use_epoll = k_idle_ways[way - 1].epoll;
		int timeout = k_idle_ways[way - 1].spin ? 0 : -1, ep = -1;

		if (use_epoll) {
			ep = epoll_create1(EPOLL_CLOEXEC);
			if (ep < 0)
				return CB_FAIL;
			for (unsigned long long i = 0; i < a->n; i++) {
				struct epoll_event e = { .events = EPOLLIN, .data.fd = pfd[i].fd };

				if (epoll_ctl(ep, EPOLL_CTL_ADD, pfd[i].fd, &e))
					return CB_FAIL;
			}
		}
		__atomic_store_n(&sh->ready, way, __ATOMIC_RELEASE);
		while (__atomic_load_n(&sh->way, __ATOMIC_ACQUIRE) == way) {
			int nev, r = 0;

			if (use_epoll)
				nev = cb_sys(epoll_wait(ep, ev, 64, timeout));
			else
				nev = cb_sys(poll(pfd, a->n, timeout));
			__atomic_store_n(&sh->srv_calls, cb_syscalls, __ATOMIC_RELAXED);
			if (nev < 0 && errno == EINTR)
				continue;
			if (nev < 0)
				return CB_FAIL;
			if (use_epoll) {
				for (int j = 0; j < nev && r >= 0; j++)
					r = k_idle_serve(ev[j].data.fd);
			} else {
				/* the user's side of poll(): find the ready ones */
				for (unsigned long long i = 0; i < a->n && nev > 0 && r >= 0; i++)
					if (pfd[i].revents) {
						nev--;
						r = k_idle_serve(pfd[i].fd);
					}
			}
			__atomic_store_n(&sh->srv_calls, cb_syscalls, __ATOMIC_RELAXED);
			if (r < 0)
				return r == -1 ? 0 : CB_FAIL;
		}
		if (ep >= 0)
			close(ep);
	}
}

/* One round trip of 8 bytes on fd, busy-polling for the answer. */
static int k_idle_rt(int fd, unsigned long long i, const char **what)
{
	unsigned long long in = ~i;
	size_t got = 0;

	*what = "send";
	if (cb_sys(send(fd, &i, sizeof(i), MSG_NOSIGNAL)) != sizeof(i))
		return errno ? -errno : -EIO;
	*what = "receive";
	while (got < sizeof(in)) {
		ssize_t n = cb_sys(recv(fd, (char *)&in + got, sizeof(in) - got, MSG_DONTWAIT));

		if (n > 0)
			got += (size_t)n;
		else if (n == 0)
			return -ECONNRESET;
		else if (errno != EAGAIN)
			return -errno;
		else if (k_stop)
			return -EINTR;
	}
	*what = "the answer differs";
	return in == i ? 0 : -EIO;
}

/*
 * Open files for n connections per process. Soft limit to the hard one;
 * past the hard one only if allowed (root): else *why says so.
 */
static int k_nofile(unsigned long long n, char *why, size_t size)
{
	rlim_t need = (rlim_t)n + 64;	/* + listener, epoll, stdio, the tool's own */
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max < need) {
		struct rlimit want = { need, need };

		if (!setrlimit(RLIMIT_NOFILE, &want))
			return 0;
		snprintf(why, size, "needs %llu open files per process, the hard limit is %llu "
			 "and raising it failed (%s): raise ulimit -Hn", (unsigned long long)need,
			 (unsigned long long)rl.rlim_max, strerror(errno));
		return -EMFILE;
	}
	rl.rlim_cur = rl.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0;
}

static int k_idle_point(unsigned long long n, double *v)
{
	struct k_idle_args a = { .n = n };
	unsigned long long warm = k_warm(), c0, s0, i;
	struct sockaddr_in addr;
	int *fds, err = 0, mfd, ways = 0;
	const char *what = "connect";
	char where[64];
	pid_t pid;

	snprintf(where, sizeof(where), "idle %llu connections", n);
	for (unsigned int w = 0; w < K_IDLE_WAYS; w++)
		if (cb_wanted(k_idle_ways[w].impl))
			ways |= 1 << w;
	fds = malloc(n * sizeof(*fds));
	if (!fds)
		cb_die("memory", -ENOMEM);
	for (i = 0; i < n; i++)
		fds[i] = -1;
	a.sh = cb_shared(sizeof(*a.sh));
	a.sh->way = (uint32_t)__builtin_ctz((unsigned int)ways) + 1;
	/* a backlog for all (the kernel caps it at somaxconn; the server accepts as we go) */
	a.lfd = k_listener(&addr, n > 65535 ? 65535 : (int)n);
	if (a.lfd < 0) {
		free(fds);
		cb_unshare(a.sh, sizeof(*a.sh));
		return k_fail(where, "listen", a.lfd);
	}
	pid = cb_fork(k_idle_server, &a);
	close(a.lfd);
	/* setup is not measured, but must end: allow a slow VM 20 ms a connection */
	k_arm(60 + (double)n * 0.02, true);
	for (i = 0; i < n; i++) {
		if (i % 1000 == 0)
			cb_progress("%s: opening %llu of %llu", where, i, n);
		/* the last one is the measured one: no Nagle on it */
		fds[i] = k_connect(&addr, i == n - 1);
		if (fds[i] < 0) {
			err = k_stop ? -EINTR : fds[i];
			break;
		}
	}
	mfd = err ? -1 : fds[n - 1];
	if (!err) {
		what = "the server's set up";
		err = k_wait_word(&a.sh->ready, a.sh->way, pid);
	}
	k_disarm();
	for (unsigned int w = 0; w < K_IDLE_WAYS && !err; w++) {
		uint64_t srv, t_meas = 0, budget = (uint64_t)(K_IDLE_BUDGET * 1e9);
		unsigned long long done;
		struct cb_row r;

		if (cb.quick)
			budget /= 10;
		if (!(ways & (1 << w)))
			continue;
		snprintf(where, sizeof(where), "idle %s/%s %llu connections",
			 k_idle_ways[w].impl, k_idle_ways[w].mode, n);
		cb_progress("%s", where);
		/* poll() walks all n each time: allow 20 us a connection a round trip */
		k_arm(K_IDLE_BUDGET + k_lat_limit() + (double)(warm + 100) * (double)n * 20e-6,
		      true);
		if (a.sh->way != w + 1) {
			/* switch: the server sees the new way after echoing this */
			__atomic_store_n(&a.sh->way, w + 1, __ATOMIC_RELEASE);
			err = k_idle_rt(mfd, 0, &what);
			if (!err) {
				what = "the server's switch";
				err = k_wait_word(&a.sh->ready, w + 1, pid);
			}
		}
		c0 = cb_syscalls;
		s0 = __atomic_load_n(&a.sh->srv_calls, __ATOMIC_RELAXED);
		for (i = 0; i < warm + cb.iters && !err; i++) {
			uint64_t t0;

			if (i == warm) {
				c0 = cb_syscalls;
				s0 = __atomic_load_n(&a.sh->srv_calls, __ATOMIC_RELAXED);
				t_meas = cb_now_ns();
			}
			t0 = cb_now_ns();
			err = k_idle_rt(mfd, i, &what);
			if (i < warm)
				continue;
			v[i - warm] = (double)(cb_now_ns() - t0) / 1000.0;
			/* poll() over 10,000 sockets: ms a round trip; a budget, not hours */
			if (i - warm >= 99 && cb_now_ns() - t_meas > budget) {
				i++;
				break;
			}
		}
		done = i > warm ? i - warm : 0;
		srv = __atomic_load_n(&a.sh->srv_calls, __ATOMIC_RELAXED) - s0;
		k_disarm();
		if (err)
			break;
		cb_row_init(&r, "idle", k_idle_ways[w].impl, k_idle_ways[w].mode, 8);
		r.param = n;
		cb_row_lat(&r, v, done);
		r.syscalls = (double)(cb_syscalls - c0 + srv) / (double)done;
		snprintf(r.note, sizeof(r.note), "server %.2f sys/rt%s",
			 (double)srv / (double)done,
			 done < cb.iters ? "; time budget: fewer round trips" : "");
		cb_emit(&r);
	}
	if (err)
		err = k_fail(where, what, err);
	/* the measured one first: its EOF ends the server without a wait on the rest */
	for (i = n; i-- > 0;)
		if (fds[i] >= 0)
			close(fds[i]);
	if (err) {
		cb_kill(pid);
	} else if (k_reap(pid, 10 + (double)n * 0.001, NULL)) {
		err = k_fail(where, "the server failed", -EIO);
	}
	free(fds);
	cb_unshare(a.sh, sizeof(*a.sh));
	return err;
}

int kernel_idle(void)
{
	unsigned long long counts[8];
	unsigned int nr = cb_idle_counts(counts);
	struct rlimit old;
	double *v;
	int err = 0;

	if (!cb_wanted("epoll") && !cb_wanted("poll"))
		return 0;
	v = calloc(cb.iters, sizeof(*v));
	if (!v)
		cb_die("memory", -ENOMEM);
	getrlimit(RLIMIT_NOFILE, &old);
	for (unsigned int c = 0; c < nr && !err; c++) {
		char why[160];

		err = k_nofile(counts[c], why, sizeof(why));
		if (err == -EMFILE) {
			for (unsigned int w = 0; w < K_IDLE_WAYS; w++)
				if (cb_wanted(k_idle_ways[w].impl))
					cb_skip("idle", k_idle_ways[w].impl, k_idle_ways[w].mode, why);
			err = 0;
			continue;
		}
		if (err)
			err = k_fail("idle", "raising the open file limit", err);
		else
			err = k_idle_point(counts[c], v);
	}
	/* the other parts get the limit they started with (and select() its fds) */
	setrlimit(RLIMIT_NOFILE, &old);
	free(v);
	return err;
}

/* ---- load ---- */

struct k_load_slot {
	uint64_t msgs, calls, t_end;
} __attribute__((aligned(64)));

struct k_load_shm {
	uint32_t start __attribute__((aligned(64)));	/* the clients' start word */
	uint64_t deadline;				/* when they stop (ns) */
	uint32_t nready __attribute__((aligned(64)));	/* clients waiting to start */
	uint32_t srv_ready;
	uint64_t echoed, srv_calls;			/* the server's, measured interval */
	double srv_cpu_us;
	struct k_load_slot slot[];
};

struct k_load_args {
	int fd;				/* the server's socket */
	struct sockaddr_in addr;	/* its address */
	unsigned int id;
	struct k_load_shm *sh;
};

static size_t k_load_size(unsigned long long clients)
{
	return sizeof(struct k_load_shm) + clients * sizeof(struct k_load_slot);
}

/*
 * The server: epoll_wait(-1), then drain the socket (recvfrom with
 * MSG_DONTWAIT, sendto) until EAGAIN. Its interval starts at the first
 * wake-up after the start word and ends at the parent's empty datagram;
 * CPU time and calls are taken over that interval only.
 */
static int k_load_server(void *arg)
{
	struct k_load_args *a = arg;
	struct k_load_shm *sh = a->sh;
	unsigned long long echoed = 0, c0 = 0;
	struct epoll_event ev = { .events = EPOLLIN };
	struct rusage ru0 = { 0 }, ru1;
	bool started = false;
	char buf[2048];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, a->fd, &ev))
		return CB_FAIL;
	__atomic_store_n(&sh->srv_ready, 1, __ATOMIC_RELEASE);
	for (;;) {
		int n = cb_sys(epoll_wait(ep, &ev, 1, -1));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return CB_FAIL;
		if (!started && __atomic_load_n(&sh->start, __ATOMIC_ACQUIRE)) {
			started = true;
			getrusage(RUSAGE_SELF, &ru0);
			c0 = cb_syscalls - 1;	/* this wake-up is the interval's */
		}
		for (;;) {
			struct sockaddr_in from;
			socklen_t flen = sizeof(from);
			ssize_t m = cb_sys(recvfrom(a->fd, buf, sizeof(buf), MSG_DONTWAIT,
						    (struct sockaddr *)&from, &flen));

			if (m < 0 && errno == EAGAIN)
				break;
			if (m < 0 && errno == EINTR)
				continue;
			if (m < 0)
				return CB_FAIL;
			if (m == 0) {	/* the parent: stop */
				getrusage(RUSAGE_SELF, &ru1);
				sh->echoed = echoed;
				sh->srv_calls = started ? cb_syscalls - c0 : 0;
				sh->srv_cpu_us = started ? cb_cpu_us(&ru1) - cb_cpu_us(&ru0) : 0;
				return 0;
			}
			if (cb_sys(sendto(a->fd, buf, (size_t)m, 0, (struct sockaddr *)&from,
					  flen)) != m)
				return CB_FAIL;
			echoed++;
		}
	}
}

/* A client: one message in flight, until the deadline. */
static int k_load_client(void *arg)
{
	struct k_load_args *a = arg;
	struct k_load_slot *slot = &a->sh->slot[a->id];
	struct timeval tv = { 2, 0 };	/* loopback loses nothing: 2 s is a failure */
	unsigned long long c0, seq;
	uint64_t deadline;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	close(a->fd);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a->addr, sizeof(a->addr)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		fprintf(stderr, "clanq-bench: load client %u: socket: %s\n", a->id, strerror(errno));
		return CB_FAIL;
	}
	__atomic_fetch_add(&a->sh->nready, 1, __ATOMIC_RELEASE);
	cb_spin_until(&a->sh->start, 1);
	deadline = a->sh->deadline;
	c0 = cb_syscalls;
	for (seq = 0; cb_now_ns() < deadline; seq++) {
		uint32_t out[2] = { a->id, (uint32_t)seq }, in[4];
		ssize_t n;

		if (cb_sys(send(fd, out, sizeof(out), 0)) != sizeof(out)) {
			fprintf(stderr, "clanq-bench: load client %u: send: %s\n", a->id,
				strerror(errno));
			return CB_FAIL;
		}
		n = cb_sys(recv(fd, in, sizeof(in), 0));
		if (n != sizeof(out) || memcmp(in, out, sizeof(out))) {
			fprintf(stderr, "clanq-bench: load client %u: %s\n", a->id,
				n < 0 ? strerror(errno) : "the answer differs");
			return CB_FAIL;
		}
	}
	slot->msgs = seq;
	slot->calls = cb_syscalls - c0;
	slot->t_end = cb_now_ns();
	close(fd);
	return 0;
}

static int k_load_point(unsigned long long clients)
{
	struct k_load_shm *sh = cb_shared(k_load_size(clients));
	struct k_load_args srv = { .sh = sh }, *cl;
	unsigned long long msgs = 0, calls = 0;
	uint64_t t0 = 0, t_end = 0;
	pid_t spid, *pids;
	struct cb_row r;
	char where[64];
	int err = 0, ctl;
	double dt;

	snprintf(where, sizeof(where), "load udp/epoll %llu clients", clients);
	cb_progress("%s", where);
	pids = calloc(clients, sizeof(*pids));
	cl = calloc(clients, sizeof(*cl));
	if (!pids || !cl)
		cb_die("memory", -ENOMEM);
	srv.fd = k_socket(SOCK_DGRAM, &srv.addr);
	if (srv.fd < 0) {
		err = k_fail(where, "socket", srv.fd);
		goto out;
	}
	spid = cb_fork(k_load_server, &srv);
	/* clients end by design: SIGCHLD is no failure here */
	k_arm(30 + 2 * cb.seconds, false);
	err = k_wait_word(&sh->srv_ready, 1, spid);
	for (unsigned long long c = 0; c < clients && !err; c++) {
		cl[c] = srv;
		cl[c].id = (unsigned int)c;
		pids[c] = cb_fork(k_load_client, &cl[c]);
	}
	close(srv.fd);
	while (!err && __atomic_load_n(&sh->nready, __ATOMIC_ACQUIRE) != clients) {
		struct timespec ts = { 0, 200000 };

		for (unsigned long long c = 0; c < clients; c++)
			if (k_ended(pids[c]))
				err = -ECONNRESET;
		if (k_stop)
			err = -EINTR;
		nanosleep(&ts, NULL);
	}
	if (err) {
		err = k_fail(where, "starting", err);
	} else {
		struct timespec ts = { (time_t)cb.seconds,
				       (long)((cb.seconds - (double)(time_t)cb.seconds) * 1e9) };

		t0 = cb_now_ns();
		sh->deadline = t0 + (uint64_t)(cb.seconds * 1e9);
		__atomic_store_n(&sh->start, 1, __ATOMIC_RELEASE);
		nanosleep(&ts, NULL);
	}
	k_disarm();
	/* the clients: their receive times out in 2 s if the server is gone */
	for (unsigned long long c = 0; c < clients; c++) {
		if (!pids[c])
			continue;
		if (err)
			cb_kill(pids[c]);
		else if (k_reap(pids[c], 10, NULL))
			err = k_fail(where, "a client failed", -EIO);
	}
	ctl = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (err || ctl < 0 ||
	    sendto(ctl, "", 0, 0, (struct sockaddr *)&srv.addr, sizeof(srv.addr))) {
		if (!err)
			err = k_fail(where, "stopping the server", -errno);
		cb_kill(spid);
	} else if (k_reap(spid, 10, NULL)) {
		err = k_fail(where, "the server failed", -EIO);
	}
	if (ctl >= 0)
		close(ctl);
	if (err)
		goto out;
	for (unsigned long long c = 0; c < clients; c++) {
		msgs += sh->slot[c].msgs;
		calls += sh->slot[c].calls;
		if (sh->slot[c].t_end > t_end)
			t_end = sh->slot[c].t_end;
	}
	if (!sh->echoed || msgs != sh->echoed) {
		err = k_fail(where, "the clients' and the server's counts differ", -EIO);
		goto out;
	}
	dt = (double)(t_end - t0) / 1e9;
	cb_row_init(&r, "load", "udp", "epoll", 8);
	r.param = clients;
	r.iters = sh->echoed;
	r.mpps = (double)sh->echoed / dt / 1e6;
	r.cpu_us = sh->srv_cpu_us / (double)sh->echoed;
	r.syscalls = (double)(sh->srv_calls + calls) / (double)sh->echoed;
	snprintf(r.note, sizeof(r.note), "server %.2f sys/msg",
		 (double)sh->srv_calls / (double)sh->echoed);
	cb_emit(&r);
out:
	free(pids);
	free(cl);
	cb_unshare(sh, k_load_size(clients));
	return err;
}

int kernel_load(void)
{
	unsigned long long clients[8];
	unsigned int nr = cb_load_clients(clients);
	int err = 0;

	if (!cb_wanted("udp"))
		return 0;
	for (unsigned int c = 0; c < nr && !err; c++)
		err = k_load_point(clients[c]);
	return err;
}
