// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A service shared by several nets (clanq_listen_attr() with
 * CLANQ_LISTEN_SHARED, the driver's CLANQ_EP_SHARED), through the real
 * driver: two server threads, each with a net of its own, listen on one
 * service; 64 connections from another node are spread over both, and
 * every one echoes correctly on the thread that accepted it. A listener
 * that closes gets no more: new connections go to the other. Another
 * user cannot join; a service held unshared cannot be shared, nor the
 * other way round; flags nobody knows are -EINVAL, at the library and
 * at the driver.
 *
 * Runs in the test VM (nr_nics=2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <clanq/admin.h>
#include <clanq/net.h>

#include "itest.h"

#define SERVICE		4300
#define NR_THREADS	2
#define NR_CONNS	64
#define MSGS_PER_CONN	8
#define MAX_LEN		1000

static const struct clanq_listen_attr shared = { .flags = CLANQ_LISTEN_SHARED };

static size_t msg_len(uint32_t conn, uint32_t seq)
{
	return 1 + (conn * 131 + seq * 97) % MAX_LEN;
}

static void fill(uint8_t *p, size_t len, uint32_t conn, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(conn * 31 + seq * 131 + i * 7);
}

/* A client on node 1: NR_CONNS connections, each echoes, then closes. */
static void many_clients(void *arg)
{
	unsigned int nr = *(unsigned int *)arg;
	struct clanq_conn_opts o = { .timeout_ns = 20 * ITEST_NS_PER_S };
	static struct clanq_conn *c[NR_CONNS];
	static uint8_t out[MAX_LEN], in[MAX_LEN];
	struct clanq_dev dev;
	struct clanq_net *net;
	uint32_t i, seq;
	size_t len;

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	for (i = 0; i < nr; i++)
		CHILD_CHECK_INT(clanq_connect(net, &c[i], 0, SERVICE, &o), 0);
	for (seq = 0; seq < MSGS_PER_CONN; seq++) {
		for (i = 0; i < nr; i++) {
			len = msg_len(i, seq);
			fill(out, len, i, seq);
			CHILD_CHECK_INT(clanq_send(c[i], out, len, 0), 0);
		}
		for (i = 0; i < nr; i++) {
			len = msg_len(i, seq);
			fill(out, len, i, seq);
			CHILD_CHECK_INT(clanq_recv(c[i], in, sizeof(in), 0),
					(ssize_t)len);
			CHILD_CHECK(!memcmp(in, out, len));
		}
	}
	for (i = 0; i < nr; i++)
		CHILD_CHECK_INT(clanq_conn_close(c[i]), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

/* A server thread: its own net and listener, echoing until told to stop. */
struct server {
	pthread_t thread;
	pthread_barrier_t *ready;
	int listen_err;
	unsigned int accepted, closed, echoed, errors;
	volatile int stop;
};

static void server_read(struct server *s, struct clanq_conn *c)
{
	static __thread uint8_t buf[MAX_LEN];
	ssize_t n;

	for (;;) {
		n = clanq_recv(c, buf, sizeof(buf), CLANQ_MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n > 0 && !clanq_send(c, buf, (size_t)n, 0)) {
			s->echoed++;
			continue;
		}
		if (n != 0)
			s->errors++;
		clanq_conn_close(c);
		__atomic_add_fetch(&s->closed, 1, __ATOMIC_RELEASE);
		return;
	}
}

static void *server_fn(void *arg)
{
	struct server *s = arg;
	struct clanq_net_event evs[16];
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	int n, i;

	s->listen_err = clanq_open_nic(&dev, 0);
	if (!s->listen_err) {
		s->listen_err = clanq_net_open(&net, &dev, NULL);
		if (s->listen_err)
			clanq_close(&dev);
	}
	if (!s->listen_err)
		s->listen_err = clanq_listen_attr(net, &l, SERVICE, NR_CONNS,
						  &shared);
	pthread_barrier_wait(s->ready);
	if (s->listen_err)
		return NULL;
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		n = clanq_net_wait(net, evs, 16, 20 * ITEST_NS_PER_MS);
		for (i = 0; i < n; i++) {
			if (evs[i].what & CLANQ_NET_ACCEPT) {
				while (!clanq_accept(evs[i].listener, &c, NULL, 0))
					__atomic_add_fetch(&s->accepted, 1,
							   __ATOMIC_RELEASE);
				continue;
			}
			if (evs[i].what & (CLANQ_NET_IN | CLANQ_NET_HUP))
				server_read(s, evs[i].conn);
		}
	}
	clanq_net_close(net);		/* closes l and what is left */
	clanq_close(&dev);
	return NULL;
}

static unsigned int total(const struct server *s, size_t off)
{
	unsigned int sum = 0;

	for (int t = 0; t < NR_THREADS; t++)
		sum += __atomic_load_n((const unsigned int *)((const char *)&s[t] + off),
				       __ATOMIC_ACQUIRE);
	return sum;
}

/*
 * 1. Two threads, a net each, share the service: both accept some of the
 * 64 connections, and every message comes back whole on its own one.
 */
static void test_two_threads_share_a_service(void **state)
{
	static struct server s[NR_THREADS];
	unsigned int nr = NR_CONNS;
	pthread_barrier_t ready;
	int64_t deadline;
	pid_t pid;
	int t;

	(void)state;
	memset(s, 0, sizeof(s));
	assert_int_equal(pthread_barrier_init(&ready, NULL, NR_THREADS + 1), 0);
	for (t = 0; t < NR_THREADS; t++) {
		s[t].ready = &ready;
		assert_int_equal(pthread_create(&s[t].thread, NULL, server_fn,
						&s[t]), 0);
	}
	pthread_barrier_wait(&ready);
	for (t = 0; t < NR_THREADS; t++)
		assert_int_equal(s[t].listen_err, 0);

	pid = itest_fork(many_clients, &nr);
	assert_true(itest_status_ok(itest_wait(pid, 240 * ITEST_NS_PER_S),
				    "clients"));
	deadline = (int64_t)clanq_now_ns() + 20 * ITEST_NS_PER_S;
	while (total(s, offsetof(struct server, closed)) < NR_CONNS &&
	       (int64_t)clanq_now_ns() < deadline)
		itest_sleep_ns(10 * ITEST_NS_PER_MS);
	for (t = 0; t < NR_THREADS; t++)
		__atomic_store_n(&s[t].stop, 1, __ATOMIC_RELEASE);
	for (t = 0; t < NR_THREADS; t++)
		assert_int_equal(pthread_join(s[t].thread, NULL), 0);
	pthread_barrier_destroy(&ready);

	for (t = 0; t < NR_THREADS; t++) {
		printf("thread %d: accepted %u, echoed %u, closed %u, errors %u\n",
		       t, s[t].accepted, s[t].echoed, s[t].closed, s[t].errors);
		assert_true(s[t].accepted > 0);
		assert_int_equal(s[t].errors, 0);
		assert_int_equal(s[t].closed, s[t].accepted);
	}
	assert_int_equal(total(s, offsetof(struct server, accepted)), NR_CONNS);
	assert_int_equal(total(s, offsetof(struct server, echoed)),
			 NR_CONNS * MSGS_PER_CONN);
}

/* Echo on net's connections until nr of them are closed (60 s at most). */
static void serve_until_closed(struct clanq_net *net, unsigned int nr,
			       struct server *srv)
{
	int64_t deadline = (int64_t)clanq_now_ns() + 60 * ITEST_NS_PER_S;
	struct clanq_net_event evs[16];
	int n, k;

	while (srv->closed < nr && (int64_t)clanq_now_ns() < deadline) {
		n = clanq_net_wait(net, evs, 16, 20 * ITEST_NS_PER_MS);
		for (k = 0; k < n; k++)
			if (evs[k].what & (CLANQ_NET_IN | CLANQ_NET_HUP))
				server_read(srv, evs[k].conn);
	}
}

/*
 * 2. A member closes: the group is the other alone, and every new
 * connection goes there; the closed one's net hears of none.
 */
static void test_closed_member_gets_no_more(void **state)
{
	struct clanq_dev dev[2];
	struct clanq_net *net[2];
	struct clanq_listener *l[2];
	struct clanq_net_stats st;
	struct server srv = { 0 };
	struct clanq_addr a;
	struct clanq_conn *c;
	unsigned int nr = 16, i;
	pid_t pid;

	(void)state;
	for (i = 0; i < 2; i++) {
		assert_int_equal(clanq_open_nic(&dev[i], 0), 0);
		assert_int_equal(clanq_net_open(&net[i], &dev[i], NULL), 0);
		assert_int_equal(clanq_listen_attr(net[i], &l[i], SERVICE, 32,
						   &shared), 0);
		/* the listener's address is the service, not its endpoint */
		a = clanq_listener_addr(l[i]);
		assert_int_equal(a.id, SERVICE);
		assert_int_equal(a.node, clanq_net_addr(net[i]).node);
	}
	assert_int_equal(clanq_listener_close(l[0]), 0);

	pid = itest_fork(many_clients, &nr);
	for (i = 0; i < nr; i++)
		assert_int_equal(clanq_accept(l[1], &c, NULL, 20 * ITEST_NS_PER_S), 0);
	/* the client closes each after MSGS_PER_CONN: serve them all */
	serve_until_closed(net[1], nr, &srv);
	assert_int_equal(srv.closed, nr);
	assert_int_equal(srv.errors, 0);
	assert_int_equal(srv.echoed, nr * MSGS_PER_CONN);
	assert_true(itest_status_ok(itest_wait(pid, 60 * ITEST_NS_PER_S), "clients"));
	clanq_net_progress(net[0]);
	clanq_net_stats(net[0], &st);
	assert_int_equal(clanq_net_nr_conns(net[0]), 0);
	assert_int_equal(st.ignored, 0);
	for (i = 0; i < 2; i++) {
		clanq_net_close(net[i]);
		clanq_close(&dev[i]);
	}
}

/* In a child: as nobody, joining root's shared service is refused. */
static void nobody_joins(void *arg)
{
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	char why[256];

	(void)arg;
	itest_become_nobody();
	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(clanq_listen_attr(net, &l, SERVICE, 4, &shared),
			-EADDRINUSE);
	CHILD_CHECK_INT(clanq_last_error(&dev, why, sizeof(why)), -EADDRINUSE);
	if (!strstr(why, "shared by uid 0, not by uid 65534"))
		CHILD_FAIL("last error: %s", why);
	CHILD_CHECK_INT(clanq_listen(net, &l, SERVICE, 4), -EADDRINUSE);
	clanq_net_close(net);
	clanq_close(&dev);
}

/*
 * 3. Who may join: the same user, sharing. Another user, an unshared
 * listener on a shared service and a shared one on an unshared service
 * are -EADDRINUSE, each explained.
 */
static void test_only_the_same_user_sharing_joins(void **state)
{
	struct clanq_listener *l, *l2, *u;
	struct clanq_dev dev;
	struct clanq_net *net;
	char why[256];

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen_attr(net, &l, SERVICE, 4, &shared), 0);
	/* the same user may join, even from the same net */
	assert_int_equal(clanq_listen_attr(net, &l2, SERVICE, 4, &shared), 0);
	assert_true(itest_status_ok(itest_wait(itest_fork(nobody_joins, NULL),
					       20 * ITEST_NS_PER_S), "nobody"));

	assert_int_equal(clanq_listen(net, &u, SERVICE, 4), -EADDRINUSE);
	assert_int_equal(clanq_listen(net, &u, SERVICE + 1, 4), 0);
	assert_int_equal(clanq_listen_attr(net, &l2, SERVICE + 1, 4, &shared),
			 -EADDRINUSE);
	assert_int_equal(clanq_last_error(&dev, why, sizeof(why)), -EADDRINUSE);
	assert_non_null(strstr(why, "in use unshared"));
	assert_int_equal(clanq_listener_close(u), 0);
	/* the service is free again, and can be shared now */
	assert_int_equal(clanq_listen_attr(net, &u, SERVICE + 1, 4, &shared), 0);
	clanq_net_close(net);

	/* all members gone: the service is free for an unshared listener */
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &u, SERVICE, 4), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

/* 4. Flags nobody knows: -EINVAL from the library and from the driver. */
static void test_unknown_flags_are_einval(void **state)
{
	struct clanq_listen_attr bad = { .flags = 0x80 };
	struct clanq_listen_attr rsv = { .flags = CLANQ_LISTEN_SHARED,
					 .reserved = { 0, 1 } };
	struct clanq_ep_attr ea = { .service = SERVICE };
	struct clanq_ep_attr none = { 0 };
	struct clanq_ioc_ep_create c;
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_ep ep;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen_attr(net, &l, SERVICE, 4, &bad), -EINVAL);
	assert_int_equal(clanq_listen_attr(net, &l, SERVICE, 4, &rsv), -EINVAL);
	/* NULL attr: as clanq_listen() */
	assert_int_equal(clanq_listen_attr(net, &l, SERVICE, 4, NULL), 0);
	assert_int_equal(clanq_listener_close(l), 0);

	/* the driver: unknown bits, and SHARED without a service */
	assert_int_equal(clanq_ep_create_flags(&dev, &ep, &ea, 0x4), -EINVAL);
	assert_int_equal(clanq_ep_create_flags(&dev, &ep, &ea, 0x80000000u),
			 -EINVAL);
	assert_int_equal(clanq_ep_create_flags(&dev, &ep, &none, CLANQ_EP_SHARED),
			 -EINVAL);
	memset(&c, 0, sizeof(c));
	c.flags = CLANQ_EP_SHARED | 0x100;
	c.addr.id = SERVICE;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EP_CREATE, &c), EINVAL);
	/* the good one */
	assert_int_equal(clanq_ep_create_flags(&dev, &ep, &ea, CLANQ_EP_SHARED), 0);
	assert_true(ep.addr.id > CLANQ_SERVICE_MAX);
	assert_int_equal(clanq_ep_destroy(&ep), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_two_threads_share_a_service,
					  itest_teardown),
		cmocka_unit_test_teardown(test_closed_member_gets_no_more,
					  itest_teardown),
		cmocka_unit_test_teardown(test_only_the_same_user_sharing_joins,
					  itest_teardown),
		cmocka_unit_test(test_unknown_flags_are_einval),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
