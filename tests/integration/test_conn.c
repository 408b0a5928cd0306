// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Connections, through the real driver: connect to nobody (refused), a
 * listener that never accepts (timeout), an echo across nodes in
 * polling and blocking mode with sizes up to the ring's limit, orderly
 * close (end of stream), a non-blocking sender short of credit (it asks),
 * and a peer killed mid-stream (reset, no hang).
 *
 * Runs in the test VM (nr_nics=2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <clanq/admin.h>
#include <clanq/net.h>

#include "itest.h"

#define SERVICE		4242
#define ECHO_MSGS	300

static void fill(uint8_t *p, size_t len, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seq * 131 + i * 7);
}

/* 1. Nobody listens: the driver's unreachable notice refuses us. */
static void test_refused(void **state)
{
	struct clanq_conn_opts o = { .timeout_ns = 2 * ITEST_NS_PER_S };
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	uint64_t t0;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	t0 = clanq_now_ns();
	assert_int_equal(clanq_connect(net, &c, 1, SERVICE, &o), -ECONNREFUSED);
	/* at once, not after the timeout */
	assert_true(clanq_now_ns() - t0 < ITEST_NS_PER_S);
	assert_int_equal(clanq_connect(net, &c, 77, SERVICE, &o), -EHOSTUNREACH);
	assert_int_equal(clanq_connect(net, &c, 1, 0, &o), -EINVAL);
	assert_int_equal(clanq_net_nr_conns(net), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

/* 2. A listener that never accepts: the connect times out. */
static void test_never_accepts(void **state)
{
	struct clanq_conn_opts o = { .timeout_ns = 300 * ITEST_NS_PER_MS };
	struct clanq_net_stats st;
	struct clanq_dev d0, d1;
	struct clanq_net *n0, *n1;
	struct clanq_listener *l;
	struct clanq_conn *c;

	(void)state;
	assert_int_equal(clanq_open_nic(&d0, 0), 0);
	assert_int_equal(clanq_open_nic(&d1, 1), 0);
	assert_int_equal(clanq_net_open(&n0, &d0, NULL), 0);
	assert_int_equal(clanq_net_open(&n1, &d1, NULL), 0);
	assert_int_equal(clanq_listen(n1, &l, SERVICE, 4), 0);
	assert_int_equal(clanq_connect(n0, &c, 1, SERVICE, &o), -ETIMEDOUT);
	/* retransmitted, and every copy after the first ignored as a duplicate */
	clanq_net_stats(n0, &st);
	assert_true(st.connects_sent >= 2);
	clanq_net_progress(n1);
	clanq_net_stats(n1, &st);
	assert_true(st.ignored >= 1);
	/* the client's ring is gone: a late accept skips it */
	assert_int_equal(clanq_accept(l, &c, NULL, 0), -EAGAIN);
	clanq_net_close(n1);
	clanq_net_close(n0);
	clanq_close(&d1);
	clanq_close(&d0);
}

/* Node 0's side of a test: a listener, @fn forked on node 1, accepted. */
struct served {
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_listener *l;
	struct clanq_conn *c;
	pid_t pid;
};

static void serve(struct served *s, void (*fn)(void *), void *arg,
		  const struct clanq_conn_opts *opts)
{
	assert_int_equal(clanq_open_nic(&s->dev, 0), 0);
	assert_int_equal(clanq_net_open(&s->net, &s->dev, NULL), 0);
	assert_int_equal(clanq_listen(s->net, &s->l, SERVICE, 8), 0);
	s->pid = itest_fork(fn, arg);
	assert_int_equal(clanq_accept(s->l, &s->c, opts, 10 * ITEST_NS_PER_S), 0);
}

static void unserve(struct served *s, const char *who)
{
	assert_true(itest_status_ok(itest_wait(s->pid, 60 * ITEST_NS_PER_S), who));
	assert_int_equal(clanq_conn_close(s->c), 0);
	assert_int_equal(clanq_listener_close(s->l), 0);
	clanq_net_close(s->net);
	clanq_close(&s->dev);
}

/* Node 1's side: connect to the service, retried until it listens. */
static struct clanq_conn *client_connect(struct clanq_dev *dev, struct clanq_net **net,
					 const struct clanq_conn_opts *opts)
{
	struct clanq_conn *c = NULL;
	int err;

	CHILD_CHECK_INT(clanq_open_nic(dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(net, dev, NULL), 0);
	do {
		err = clanq_connect(*net, &c, 0, SERVICE, opts);
	} while (err == -ECONNREFUSED && (itest_sleep_ns(10 * ITEST_NS_PER_MS), 1));
	CHILD_CHECK_INT(err, 0);
	return c;
}

struct echo_arg {
	bool poll;
	unsigned int msgs;
	struct clanq_conn_opts opts;	/* both sides' */
};

/* The client: node 1, sizes 1 .. max, each echoed and checked. */
static void echo_client(void *p)
{
	const struct echo_arg *a = p;
	unsigned int flags = a->poll ? CLANQ_MSG_DONTWAIT : 0;
	static uint8_t out[8192], in[8192];
	struct clanq_conn_stats st;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	size_t max, len;
	uint64_t e0, e1;
	ssize_t n;
	int err;

	c = client_connect(&dev, &net, &a->opts);
	max = clanq_conn_eager_max(c);
	CHILD_CHECK(max >= 1024 && max <= sizeof(out));
	CHILD_CHECK_INT(clanq_ctx_entries(&dev, &e0), 0);
	for (unsigned int i = 0; i < a->msgs; i++) {
		len = 1 + (i * 97) % max;
		fill(out, len, i);
		do {
			err = clanq_send(c, out, len, flags);
		} while (err == -EAGAIN);
		CHILD_CHECK_INT(err, 0);
		do {
			n = clanq_recv(c, in, sizeof(in), flags);
		} while (n == -EAGAIN);
		CHILD_CHECK_INT(n, (ssize_t)len);
		CHILD_CHECK(!memcmp(in, out, len));
	}
	CHILD_CHECK_INT(clanq_ctx_entries(&dev, &e1), 0);
	clanq_conn_stats(c, &st);
	/* both sides poll: not one system call per message, none at all */
	printf("echo %s%s: %llu driver entries for %u round trips, %llu by RDMA\n",
	       a->poll ? "polled" : "blocking",
	       a->opts.flags & CLANQ_CONN_RDMA_ONLY ? ", RDMA only" :
	       a->opts.rdma_threshold ? ", RDMA from 512 B" : "",
	       (unsigned long long)(e1 - e0 - 1), a->msgs,
	       (unsigned long long)st.rdma_sends);
	if (a->opts.rdma_threshold || (a->opts.flags & CLANQ_CONN_RDMA_ONLY))
		CHILD_CHECK(st.rdma_sends > 0);
	if (a->poll && !a->opts.rdma_threshold && !a->opts.flags)
		CHILD_CHECK_INT(e1 - e0 - 1, 0);
	CHILD_CHECK_INT(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

static void run_echo(bool poll, uint32_t rdma_threshold, uint32_t conn_flags)
{
	struct echo_arg a = { poll, ECHO_MSGS,
			      { .rdma_threshold = rdma_threshold, .flags = conn_flags } };
	unsigned int flags = poll ? CLANQ_MSG_DONTWAIT : 0;
	static uint8_t buf[8192];
	struct served sv;
	struct clanq_conn *c;
	unsigned int msgs = 0;
	ssize_t n;
	int err;

	serve(&sv, echo_client, &a, &a.opts);
	c = sv.c;
	for (;;) {
		n = clanq_recv(c, buf, sizeof(buf), flags);
		if (n == -EAGAIN)
			continue;
		if (n <= 0)
			break;
		msgs++;
		do {
			err = clanq_send(c, buf, (size_t)n, flags);
		} while (err == -EAGAIN);
		assert_int_equal(err, 0);
	}
	/* orderly close: end of stream, again and again */
	assert_int_equal(n, 0);
	assert_int_equal(clanq_recv(c, buf, sizeof(buf), 0), 0);
	assert_int_equal(clanq_send(c, buf, 1, 0), -EPIPE);
	assert_int_equal(msgs, ECHO_MSGS);
	unserve(&sv, "client");
}

static void test_echo_poll(void **state)
{
	(void)state;
	run_echo(true, 0, 0);
}

static void test_echo_block(void **state)
{
	(void)state;
	run_echo(false, 0, 0);
}

/* PIO below 512 bytes, RDMA above: the two must not overtake each other */
static void test_echo_mixed(void **state)
{
	(void)state;
	run_echo(true, 512, 0);
	run_echo(false, 512, 0);
}

/* everything through the engine, as to a peer on another machine */
static void test_echo_rdma_only(void **state)
{
	(void)state;
	run_echo(true, 0, CLANQ_CONN_RDMA_ONLY);
	run_echo(false, 0, CLANQ_CONN_RDMA_ONLY);
}

/*
 * 3b. A non-blocking sender short of credit asks for it. A receiver hands
 * credit back on its own only every quarter ring, so with the ring laid
 * out as below a polling receiver that consumed everything still holds
 * 128 bytes the sender needs; only the sender's hdr.want (answered when
 * the receiver finds its ring empty) moves them. With half the ring
 * H = eager_max + 16 (a record's header and trailer):
 *   A: a record of H - 64 bytes (returned on consume: >= a quarter)
 *   4 records of 32 bytes: the tail at H + 64, 128 bytes unreturned
 *   B: the largest record, H bytes, after a PAD of H - 64 to the ring's
 *      end: 2H - 64 bytes needed, 2H - 128 free until the 128 come back.
 * Both ways of writing: PIO (mapped) and RDMA (as to another host).
 */
#define SHORT_SMALLS	4
#define SHORT_SMALL_LEN	16
#define SHORT_WAIT_NS	(5 * ITEST_NS_PER_S)

static void short_sender(void *p)
{
	const struct clanq_conn_opts *opts = p;
	static uint8_t out[8192];
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	size_t max, len[SHORT_SMALLS + 2];
	struct timespec ts;
	uint64_t deadline, now;
	unsigned int i;
	int err;

	c = client_connect(&dev, &net, opts);
	max = clanq_conn_eager_max(c);
	CHILD_CHECK(max >= 1024 && max <= sizeof(out));
	len[0] = max - 64;
	for (i = 1; i <= SHORT_SMALLS; i++)
		len[i] = SHORT_SMALL_LEN;
	len[SHORT_SMALLS + 1] = max;
	for (i = 0; i < SHORT_SMALLS + 2; i++) {
		fill(out, len[i], i);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		deadline = (uint64_t)ts.tv_sec * ITEST_NS_PER_S + ts.tv_nsec +
			   SHORT_WAIT_NS;
		do {
			err = clanq_send(c, out, len[i], CLANQ_MSG_DONTWAIT);
			clock_gettime(CLOCK_MONOTONIC, &ts);
			now = (uint64_t)ts.tv_sec * ITEST_NS_PER_S + ts.tv_nsec;
		} while (err == -EAGAIN && now < deadline);
		if (err == -EAGAIN)
			itest_child_fail(__FILE__, __LINE__,
					 "message %u (%zu bytes, %s): no credit in 5 s",
					 i, len[i], opts->flags ? "RDMA" : "PIO");
		CHILD_CHECK_INT(err, 0);
	}
	CHILD_CHECK_INT(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

static void run_short_of_credit(uint32_t conn_flags)
{
	struct clanq_conn_opts opts = { .flags = conn_flags };
	static uint8_t buf[8192], want[8192];
	struct served sv;
	struct clanq_conn *c;
	unsigned int msgs = 0;
	size_t max;
	ssize_t n;

	serve(&sv, short_sender, &opts, &opts);
	c = sv.c;
	max = clanq_conn_eager_max(c);
	/* the receiver polls and never blocks (blocking hands credit back) */
	for (;;) {
		n = clanq_recv(c, buf, sizeof(buf), CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			continue;
		if (n <= 0)
			break;
		assert_true(msgs < SHORT_SMALLS + 2);
		assert_int_equal(n, msgs == 0 ? max - 64 :
				    msgs <= SHORT_SMALLS ? SHORT_SMALL_LEN : max);
		fill(want, (size_t)n, msgs);
		assert_memory_equal(buf, want, (size_t)n);
		msgs++;
	}
	assert_int_equal(n, 0);
	assert_int_equal(msgs, SHORT_SMALLS + 2);
	unserve(&sv, "sender");
}

static void test_dontwait_short_of_credit(void **state)
{
	(void)state;
	run_short_of_credit(0);
	run_short_of_credit(CLANQ_CONN_RDMA_ONLY);
}

/* 4. A peer killed mid-stream: the survivor gets -ECONNRESET, no hang. */
static void killed_sender(void *p)
{
	static uint8_t out[512];
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;

	(void)p;
	c = client_connect(&dev, &net, NULL);
	for (uint32_t i = 0; ; i++) {
		fill(out, sizeof(out), i);
		CHILD_CHECK_INT(clanq_send(c, out, sizeof(out), 0), 0);
	}
}

static void test_peer_killed(void **state)
{
	static uint8_t buf[8192];
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	unsigned int got = 0;
	ssize_t n;
	pid_t pid;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, 8), 0);
	pid = itest_fork(killed_sender, NULL);
	assert_int_equal(clanq_accept(l, &c, NULL, 10 * ITEST_NS_PER_S), 0);
	while (got < 50) {
		n = clanq_recv(c, buf, sizeof(buf), 0);
		assert_int_equal(n, 512);
		got++;
	}
	kill(pid, SIGKILL);
	itest_wait(pid, 10 * ITEST_NS_PER_S);
	/* what was in the ring comes first; then the reset, not a hang */
	do {
		n = clanq_recv(c, buf, sizeof(buf), 0);
	} while (n == 512);
	assert_int_equal(n, -ECONNRESET);
	assert_int_equal(clanq_recv(c, buf, sizeof(buf), 0), -ECONNRESET);
	assert_int_equal(clanq_send(c, buf, 8, 0), -ECONNRESET);
	assert_int_equal(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_never_accepts),
		cmocka_unit_test_teardown(test_echo_poll, itest_teardown),
		cmocka_unit_test_teardown(test_echo_block, itest_teardown),
		cmocka_unit_test_teardown(test_echo_mixed, itest_teardown),
		cmocka_unit_test_teardown(test_echo_rdma_only, itest_teardown),
		cmocka_unit_test_teardown(test_dontwait_short_of_credit, itest_teardown),
		cmocka_unit_test_teardown(test_peer_killed, itest_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
