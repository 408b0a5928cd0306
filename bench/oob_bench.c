// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * oob_bench: out-of-band messages and event-queue wake-ups, each beside a
 * baseline measured in the same run on the same kernel.
 *
 *   rate     one process sends 64-byte messages as fast as it can, another
 *            (on the other CPU) receives them:
 *              clanq   clanq_oob_send() (a system call) -> clanq_oob_recv()
 *                      (user level, polling)
 *              udp     sendto() on loopback -> recv(MSG_DONTWAIT), polling
 *   wake     ping-pong between two processes that block between messages:
 *              clanq   clanq_evq_wait() with spinning off: every message
 *                      wakes a sleeping process
 *              clanq+spin  the same with the default 15 us spin
 *              eventfd blocking read()/write() on two eventfds
 *              udp     blocking recv()/send() on loopback
 *
 * Latency rows: one-way time (round trip / 2) in ns, perftest-style
 * t_min t_typical(median) t_avg t_99% over SAMPLES samples, each the mean
 * of a batch of round trips (a clock read costs ~1 us in the VM).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <clanq.h>

#include "bench_stats.h"

static unsigned int rate_msgs = 200000;
static unsigned int samples = 100, batch = 50;

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);	/* best effort */
}

static void die(const char *what, int err)
{
	fprintf(stderr, "oob_bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* A page shared by parent and child for addresses and results. */
struct shared {
	struct clanq_addr a, b;		/* endpoints of side A and side B */
	volatile int ready;
	double result;
	uint64_t dropped;
};

static struct shared *shared_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap", errno);
	return p;
}

static int reap(pid_t pid)
{
	int status;

	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void wait_ready(struct shared *sh, int v)
{
	while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < v)
		usleep(100);
}

static void set_ready(struct shared *sh, int v)
{
	__atomic_store_n(&sh->ready, v, __ATOMIC_RELEASE);
}

/* ---- rate ---- */

static double rate_clanq(uint64_t *dropped)
{
	struct shared *sh = shared_page();
	struct clanq_dev dev;
	struct clanq_ep ep;
	unsigned int got = 0;
	uint64_t t0 = 0, last = 0;
	pid_t pid;
	int err;

	pid = fork();
	if (pid == 0) {		/* sender, node 1 */
		pin(0);
		if (clanq_open_nic(&dev, 1) || clanq_ep_create(&dev, &ep, 0))
			_exit(1);
		wait_ready(sh, 1);
		for (unsigned int i = 0; i < rate_msgs; i++) {
			err = clanq_oob_send(&ep, sh->b, CLANQ_OOB_TYPE_USER, &i,
					     CLANQ_OOB_PAYLOAD);
			if (err)
				_exit(2);
		}
		_exit(0);
	}
	pin(1);
	err = clanq_open_nic(&dev, 0);
	if (!err)
		err = clanq_ep_create(&dev, &ep, 4096);
	if (err)
		die("rate: receiver set-up", err);
	sh->b = ep.addr;
	set_ready(sh, 1);
	/* until every message is received or accounted for as dropped */
	while (got + clanq_ep_dropped(&ep) < rate_msgs) {
		struct clanq_oob_msg msg;

		if (clanq_oob_recv(&ep, &msg) == 0) {
			if (!got++)
				t0 = clanq_now_ns();
			last = 0;
		} else if (!last) {
			last = clanq_now_ns();
		} else if (clanq_now_ns() - last > 5000000000ull) {
			die("rate: messages stopped arriving", EIO);
		}
	}
	t0 = clanq_now_ns() - t0;
	*dropped = clanq_ep_dropped(&ep);
	if (reap(pid))
		die("rate: sender failed", EIO);
	clanq_ep_destroy(&ep);
	clanq_close(&dev);
	munmap(sh, 4096);
	return got > 1 ? (got - 1) * 1e9 / t0 : 0;
}

static int udp_socket(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int size = 4 << 20;

	if (fd < 0)
		die("socket", errno);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0 ||
	    getsockname(fd, (struct sockaddr *)addr, &len) < 0)
		die("bind", errno);
	return fd;
}

static double rate_udp(uint64_t *dropped)
{
	struct shared *sh = shared_page();
	struct sockaddr_in to;
	char buf[64] = { 0 };
	unsigned int got = 0;
	uint64_t t0 = 0, idle = 0;
	int fd = udp_socket(&to);
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);

		pin(0);
		for (unsigned int i = 0; i < rate_msgs; i++)
			sendto(s, buf, sizeof(buf), 0, (struct sockaddr *)&to,
			       sizeof(to));
		_exit(0);
	}
	pin(1);
	/* UDP tells nobody about drops: stop after a quiet 200 ms */
	while (got < rate_msgs) {
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
			if (!got++)
				t0 = clanq_now_ns();
			idle = 0;
		} else if (got && !idle) {
			idle = clanq_now_ns();
		} else if (idle && clanq_now_ns() - idle > 200000000ull) {
			break;
		}
	}
	t0 = (idle ? idle : clanq_now_ns()) - t0;
	*dropped = rate_msgs - got;
	reap(pid);
	close(fd);
	munmap(sh, 4096);
	return got > 1 ? (got - 1) * 1e9 / t0 : 0;
}

/* ---- wake-up latency ---- */

/*
 * One side of the clanq ping-pong: wait for an event, drain, send back.
 * The initiator (side A) times batches of round trips.
 */
static int clanq_side(struct shared *sh, int node, int initiator,
		      uint64_t spin_ns, double *v)
{
	struct clanq_event ev;
	struct clanq_oob_msg msg;
	struct clanq_evq evq;
	struct clanq_dev dev;
	struct clanq_ep ep;
	int err;

	err = clanq_open_nic(&dev, node);
	if (!err)
		err = clanq_ep_create(&dev, &ep, 16);
	if (!err)
		err = clanq_evq_create(&dev, &evq, 1);
	if (!err)
		err = clanq_evq_register(&evq, &ep, CLANQ_EV_OOB, 0);
	if (err < 0)
		return err;
	clanq_evq_set_spin(&evq, spin_ns);
	if (initiator)
		sh->a = ep.addr;
	else
		sh->b = ep.addr;
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
	wait_ready(sh, 2);

	for (unsigned int s = 0; s < samples; s++) {
		uint64_t t0 = clanq_now_ns();

		for (unsigned int i = 0; i < batch; i++) {
			if (initiator) {
				err = clanq_oob_send(&ep, sh->b, 1, NULL, 0);
				if (err)
					return err;
			}
			do {
				err = clanq_evq_wait(&evq, &ev, 5000000000ll);
				if (err)
					return err;	/* -ETIMEDOUT, -EINTR, -errno */
			} while (clanq_oob_recv(&ep, &msg) != 0);
			if (!initiator) {
				err = clanq_oob_send(&ep, sh->a, 1, NULL, 0);
				if (err)
					return err;
			}
		}
		if (initiator)
			v[s] = (clanq_now_ns() - t0) / 2.0 / batch;
	}
	clanq_evq_destroy(&evq);
	clanq_ep_destroy(&ep);
	clanq_close(&dev);
	return 0;
}

static struct lat wake_clanq(uint64_t spin_ns)
{
	struct shared *sh = shared_page();
	double *v = calloc(samples, sizeof(*v));
	pid_t pid;
	int err;

	pid = fork();
	if (pid == 0) {
		pin(0);
		_exit(clanq_side(sh, 1, 0, spin_ns, NULL) ? 1 : 0);
	}
	pin(1);
	err = clanq_side(sh, 0, 1, spin_ns, v);
	if (err || reap(pid))
		die("wake: clanq ping-pong", err ? err : EIO);
	munmap(sh, 4096);
	struct lat l = lat_stats(v, samples);

	free(v);
	return l;
}

/*
 * A blocking ping-pong between two processes: the child echoes, the
 * parent times batches of round trips. Used by the baselines; each
 * supplies one round trip and one echo.
 */
struct pingpong {
	const char *name;
	int (*round_trip)(void *arg);	/* parent: send, then receive */
	int (*echo)(void *arg);		/* child: receive, then send */
	void *arg;
};

static struct lat run_pingpong(const struct pingpong *pp)
{
	double *v = calloc(samples, sizeof(*v));
	struct lat l;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		pin(0);
		for (unsigned int i = 0; i < samples * batch; i++)
			if (pp->echo(pp->arg))
				_exit(1);
		_exit(0);
	}
	pin(1);
	for (unsigned int s = 0; s < samples; s++) {
		uint64_t t0 = clanq_now_ns();

		for (unsigned int i = 0; i < batch; i++)
			if (pp->round_trip(pp->arg))
				die(pp->name, errno);
		v[s] = (clanq_now_ns() - t0) / 2.0 / batch;
	}
	if (reap(pid))
		die(pp->name, EIO);
	l = lat_stats(v, samples);
	free(v);
	return l;
}

struct efd_pair {
	int ab, ba;
};

static int efd_round_trip(void *arg)
{
	struct efd_pair *e = arg;
	uint64_t one = 1, x;

	return write(e->ab, &one, 8) != 8 || read(e->ba, &x, 8) != 8;
}

static int efd_echo(void *arg)
{
	struct efd_pair *e = arg;
	uint64_t one = 1, x;

	return read(e->ab, &x, 8) != 8 || write(e->ba, &one, 8) != 8;
}

static struct lat wake_eventfd(void)
{
	struct efd_pair e = { eventfd(0, 0), eventfd(0, 0) };
	struct pingpong pp = { "eventfd", efd_round_trip, efd_echo, &e };
	struct lat l;

	if (e.ab < 0 || e.ba < 0)
		die("eventfd", errno);
	l = run_pingpong(&pp);
	close(e.ab);
	close(e.ba);
	return l;
}

struct udp_pair {
	struct sockaddr_in a, b;
	int fa, fb;
	char buf[64];
};

static int udp_round_trip(void *arg)
{
	struct udp_pair *u = arg;

	return sendto(u->fa, u->buf, sizeof(u->buf), 0, (struct sockaddr *)&u->b,
		      sizeof(u->b)) <= 0 ||
	       recv(u->fa, u->buf, sizeof(u->buf), 0) <= 0;
}

static int udp_echo(void *arg)
{
	struct udp_pair *u = arg;

	return recv(u->fb, u->buf, sizeof(u->buf), 0) <= 0 ||
	       sendto(u->fb, u->buf, sizeof(u->buf), 0, (struct sockaddr *)&u->a,
		      sizeof(u->a)) <= 0;
}

static struct lat wake_udp(void)
{
	struct udp_pair u = { 0 };
	struct pingpong pp = { "udp", udp_round_trip, udp_echo, &u };
	struct lat l;

	u.fa = udp_socket(&u.a);
	u.fb = udp_socket(&u.b);
	l = run_pingpong(&pp);
	close(u.fa);
	close(u.fb);
	return l;
}

static void lat_row(const char *name, struct lat l)
{
	printf("%-12s\t%.0f\t%.0f\t%.0f\t%.0f\n", name, l.min, l.med, l.avg, l.p99);
}

int main(int argc, char **argv)
{
	uint64_t drop_clanq, drop_udp;
	struct lat lc, ls, le, lu;
	double rc, ru;
	int opt;

	while ((opt = getopt(argc, argv, "qn:")) != -1) {
		if (opt == 'q') {
			rate_msgs = 5000;
			samples = 10;
			batch = 10;
		} else if (opt == 'n') {
			rate_msgs = (unsigned int)strtoul(optarg, NULL, 0);
		} else {
			fprintf(stderr, "usage: oob_bench [-q] [-n MSGS]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	rc = rate_clanq(&drop_clanq);
	ru = rate_udp(&drop_udp);
	printf("# message rate, 64-byte messages, sender and receiver on two CPUs, %u sent\n",
	       rate_msgs);
	printf("#test\tmsgs/s\tdropped\n");
	printf("clanq_oob\t%.0f\t%llu\n", rc, (unsigned long long)drop_clanq);
	printf("udp_loopback\t%.0f\t%llu\n", ru, (unsigned long long)drop_udp);
	printf("rate_ratio\t%.2f\t# clanq / udp, higher is better\n", ru > 0 ? rc / ru : 0);

	lc = wake_clanq(0);
	ls = wake_clanq(CLANQ_EVQ_SPIN_NS_DEFAULT);
	le = wake_eventfd();
	lu = wake_udp();
	printf("# one-way latency through a blocking wait, ns (%u samples of %u round trips)\n",
	       samples, batch);
	printf("#test\t\tt_min\tt_typical\tt_avg\tt_99%%\n");
	lat_row("clanq_block", lc);
	lat_row("clanq_spin", ls);
	lat_row("eventfd", le);
	lat_row("udp_block", lu);
	printf("wake_ratio\t%.2f\t# clanq_block / eventfd, medians, lower is better\n",
	       lc.med / le.med);
	printf("spin_ratio\t%.2f\t# clanq_spin / eventfd, medians\n", ls.med / le.med);
	return 0;
}
