// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * fork() (clanq(7) FORK, lib/fork.c), through the real driver: what a
 * child sees of its parent's objects. Every library call on an object
 * the parent made fails with -EBADFD in the child (a grandchild too),
 * except the calls that let go of one, which succeed and leave the
 * parent's object alone; the parent's mappings (a region, its PIO
 * aperture) read zero in the child and take none of its writes; a child
 * that exits, is killed, or "destroys" everything it inherited leaves
 * the parent working; the child opens a device of its own and works. A
 * server that accepts a connection and then forks workers: each worker
 * is refused the parent's connection, drops it, opens its own net and
 * listens on the service with CLANQ_LISTEN_SHARED, and serves clients
 * from another node, every byte echoed checked, while the parent goes
 * on echoing on the connection it accepted.
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
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include <clanq/admin.h>
#include <clanq/net.h>

#include "itest.h"

#define REGION		4096
#define SERVICE		4400
#define NR_WORKERS	2
#define NR_CLIENTS	2
#define CONNS_PER_CLIENT 4
#define MSGS		16
#define MAX_LEN		3000
#define TIMEOUT		(20 * ITEST_NS_PER_S)

static const struct clanq_listen_attr shared_listen = {
	.flags = CLANQ_LISTEN_SHARED
};

static void *shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

static bool all_bytes(const void *p, size_t len, uint8_t v)
{
	const volatile uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != v)
			return false;
	return true;
}

/* Everything a process can hold: the parent makes one of each. */
struct objs {
	struct clanq_dev dev;
	struct clanq_ep ep, ep2;
	struct clanq_evq evq;
	struct clanq_region r;
	struct clanq_ap ap;
	uint64_t key;
};

static void objs_open(struct objs *o)
{
	assert_int_equal(clanq_open_nic(&o->dev, 0), 0);
	assert_int_equal(clanq_ep_create(&o->dev, &o->ep, 0), 0);
	assert_int_equal(clanq_ep_create(&o->dev, &o->ep2, 0), 0);
	assert_int_equal(clanq_evq_create(&o->dev, &o->evq, 4), 0);
	assert_true(clanq_evq_register(&o->evq, &o->ep, CLANQ_EV_ALL, 7) >= 0);
	assert_int_equal(clanq_region_alloc(&o->dev, &o->r, REGION), 0);
	memset(o->r.mem, 0xa5, REGION);
	assert_int_equal(clanq_region_export(&o->r, CLANQ_RIGHTS_ALL, &o->key), 0);
	assert_int_equal(clanq_ap_import(&o->dev, &o->ap, o->r.addr, o->key, 0,
					 REGION, CLANQ_RIGHTS_ALL), 0);
	assert_int_equal(clanq_ap_map(&o->ap), 0);
	assert_non_null(o->ap.base);
}

/* The parent's objects all still work: an OOB message, its evq, PIO. */
static void objs_work(struct objs *o, uint32_t seq)
{
	struct clanq_oob_msg m;
	struct clanq_event ev;
	uint64_t w = 0x1122334455667788ull + seq;

	assert_int_equal(itest_send(&o->ep2, o->ep.addr, ITEST_TYPE, 1, seq), 0);
	assert_int_equal(clanq_evq_wait(&o->evq, &ev, TIMEOUT), 0);
	assert_int_equal(ev.cookie, 7);
	assert_int_equal(itest_recv(&o->ep, &m, TIMEOUT), 0);
	assert_null(itest_check(&m, o->ep2.addr, ITEST_TYPE, 1, seq));
	assert_int_equal(clanq_ap_write(&o->ap, 64, &w, sizeof(w)), 0);
	assert_int_equal(clanq_ap_flush(&o->ap, 64, sizeof(w)), 0);
	assert_memory_equal((char *)o->r.mem + 64, &w, sizeof(w));
	assert_true(all_bytes((char *)o->r.mem + 72, REGION - 72, 0xa5));
	memset((char *)o->r.mem + 64, 0xa5, sizeof(w));
}

/* In a child: every call on an inherited object is refused, no crash. */
static void refused(struct objs *o)
{
	struct clanq_nic_info q;
	struct clanq_region r;
	struct clanq_event ev;
	struct clanq_ep ep;
	uint64_t key, w = 1;
	char msg[CLANQ_ERR_MAX];

	CHILD_CHECK_INT(clanq_query(&o->dev, &q), -EBADFD);
	CHILD_CHECK_INT(clanq_last_error(&o->dev, msg, sizeof(msg)), -EBADFD);
	CHILD_CHECK(strstr(msg, "fork()"));
	CHILD_CHECK_INT(clanq_ep_create(&o->dev, &ep, 0), -EBADFD);
	CHILD_CHECK_INT(clanq_region_alloc(&o->dev, &r, REGION), -EBADFD);
	CHILD_CHECK_INT(clanq_region_export(&o->r, CLANQ_RIGHTS_ALL, &key),
			-EBADFD);
	CHILD_CHECK_INT(itest_send(&o->ep2, o->ep.addr, ITEST_TYPE, 2, 0),
			-EBADFD);
	CHILD_CHECK_INT(clanq_evq_wait(&o->evq, &ev, 0), -EBADFD);
	CHILD_CHECK_INT(clanq_evq_register(&o->evq, &o->ep2, CLANQ_EV_ALL, 1),
			-EBADFD);
	CHILD_CHECK_INT(clanq_ap_flush_armed(&o->ap, 0, 8), -EBADFD);
	/* the mappings are the child's own now: zero, and private */
	CHILD_CHECK(all_bytes(o->r.mem, REGION, 0));
	CHILD_CHECK(all_bytes(o->ap.base, REGION, 0));
	CHILD_CHECK(all_bytes(o->ep.seg, o->ep.seg_size, 0));
	memset(o->r.mem, 0x5a, REGION);
	memcpy(o->ap.base + 128, &w, sizeof(w));
	memset(o->ep.seg, 0xff, o->ep.seg_size);
	memset(o->evq.seg, 0xff, o->evq.seg_size);
}

/* In a child: let go of everything inherited; the parent keeps it. */
static void released(struct objs *o)
{
	CHILD_CHECK_INT(clanq_ap_close(&o->ap), 0);
	CHILD_CHECK_INT(clanq_region_free(&o->r), 0);
	CHILD_CHECK_INT(clanq_evq_destroy(&o->evq), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&o->ep2), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&o->ep), 0);
	CHILD_CHECK_INT(clanq_close(&o->dev), 0);
}

struct kid_sh {
	uint64_t parent_ep;	/* packed address */
	uint32_t done;
};

/* In a child: a device of its own works, and reaches the parent's ep. */
static void own_device(struct kid_sh *sh, uint32_t seq)
{
	struct clanq_dev dev;
	struct clanq_ep ep;

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_ep_create(&dev, &ep, 0), 0);
	CHILD_CHECK_INT(itest_send(&ep, itest_addr_unpack(sh->parent_ep),
				   ITEST_TYPE, 3, seq), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&ep), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

static struct objs *kid_objs;

static void grandchild(void *arg)
{
	struct clanq_nic_info q;
	struct objs *mine = arg;

	/* what the child opened is the child's */
	CHILD_CHECK_INT(clanq_query(&mine->dev, &q), -EBADFD);
	CHILD_CHECK_INT(clanq_ep_create(&mine->dev, &mine->ep, 0), -EBADFD);
	CHILD_CHECK_INT(itest_send(&mine->ep2, mine->ep2.addr, ITEST_TYPE, 4, 0),
			-EBADFD);
}

static void grand_refused(void *arg)
{
	(void)arg;
	refused(kid_objs);
	released(kid_objs);
}

static void kid(void *arg)
{
	struct kid_sh *sh = arg;
	struct objs mine;
	int status;
	pid_t pid;

	/* a grandchild: the grandparent's objects are inherited there too */
	pid = itest_fork(grand_refused, NULL);
	CHILD_CHECK(pid > 0);
	CHILD_CHECK(itest_status_ok(itest_wait(pid, TIMEOUT), "grandchild"));
	refused(kid_objs);
	released(kid_objs);
	own_device(sh, 1);
	/* a device opened in the child, inherited by its own child */
	CHILD_CHECK_INT(clanq_open_nic(&mine.dev, 1), 0);
	CHILD_CHECK_INT(clanq_ep_create(&mine.dev, &mine.ep2, 0), 0);
	pid = itest_fork(grandchild, &mine);
	CHILD_CHECK(pid > 0);
	status = itest_wait(pid, TIMEOUT);
	CHILD_CHECK(itest_status_ok(status, "grandchild"));
	/* which took nothing away from the child */
	CHILD_CHECK_INT(itest_send(&mine.ep2, mine.ep2.addr, ITEST_TYPE, 5, 0), 0);
	CHILD_CHECK_INT(clanq_ep_destroy(&mine.ep2), 0);
	CHILD_CHECK_INT(clanq_close(&mine.dev), 0);
}

static void a_child_is_refused_its_parents_objects_and_opens_its_own(void **state)
{
	struct kid_sh *sh = shared_alloc(sizeof(*sh));
	struct clanq_oob_msg m;
	struct clanq_event ev;
	struct objs o;
	pid_t pid;

	(void)state;
	objs_open(&o);
	kid_objs = &o;
	sh->parent_ep = itest_addr_pack(o.ep.addr);
	objs_work(&o, 0);
	pid = itest_fork(kid, sh);
	assert_true(pid > 0);
	assert_true(itest_status_ok(itest_wait(pid, 2 * TIMEOUT), "child"));
	/* the child's message came, to an endpoint it "destroyed" */
	assert_int_equal(clanq_evq_wait(&o.evq, &ev, TIMEOUT), 0);
	assert_int_equal(itest_recv(&o.ep, &m, TIMEOUT), 0);
	assert_int_equal(m.src.node, 1);
	assert_int_equal(itest_tag(&m), 3);
	/* none of its writes landed, and everything still works */
	assert_true(all_bytes(o.r.mem, REGION, 0xa5));
	objs_work(&o, 1);
	released(&o);
	munmap(sh, sizeof(*sh));
}

static void sleeper(void *arg)
{
	struct kid_sh *sh = arg;

	__atomic_store_n(&sh->done, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
}

static void a_killed_child_leaves_its_parents_objects_alone(void **state)
{
	struct kid_sh *sh = shared_alloc(sizeof(*sh));
	struct objs o;
	uint64_t end;
	pid_t pid;
	int i, status;

	(void)state;
	objs_open(&o);
	for (i = 0; i < 3; i++) {
		__atomic_store_n(&sh->done, 0, __ATOMIC_RELAXED);
		pid = itest_fork(sleeper, sh);
		assert_true(pid > 0);
		end = clanq_now_ns() + TIMEOUT;
		while (!__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) &&
		       clanq_now_ns() < end)
			itest_sleep_ns(ITEST_NS_PER_MS);
		assert_int_equal(kill(pid, SIGKILL), 0);
		status = itest_wait(pid, TIMEOUT);
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		objs_work(&o, (uint32_t)i);
	}
	released(&o);
	munmap(sh, sizeof(*sh));
}

/*
 * The pre-fork server.
 */

struct srv_sh {
	uint32_t ready;			/* workers listening */
	uint32_t round2;		/* the parent's client may go on */
	uint32_t stop;
	uint32_t accepted[NR_WORKERS];
	uint32_t echoed[NR_WORKERS];
	uint32_t errors[NR_WORKERS];
};

static struct clanq_dev *srv_dev;
static struct clanq_net *srv_net;
static struct clanq_conn *srv_conn;
static struct clanq_listener *srv_listener;

static size_t msg_len(uint32_t conn, uint32_t seq)
{
	return 1 + (conn * 131 + seq * 977) % MAX_LEN;
}

static void fill(uint8_t *p, size_t len, uint32_t conn, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(conn * 31 + seq * 131 + i * 7);
}

/* Send and get back n messages on c, every byte checked (a child's). */
static void echo_rounds(struct clanq_conn *c, uint32_t id, uint32_t first,
			uint32_t n)
{
	static uint8_t out[MAX_LEN], in[MAX_LEN];
	uint32_t seq;
	size_t len;

	for (seq = first; seq < first + n; seq++) {
		len = msg_len(id, seq);
		fill(out, len, id, seq);
		CHILD_CHECK_INT(clanq_send(c, out, len, 0), 0);
		CHILD_CHECK_INT(clanq_recv(c, in, sizeof(in), 0), (ssize_t)len);
		CHILD_CHECK(!memcmp(in, out, len));
	}
}

/* The parent's own client: before the workers are forked, and after. */
static void first_client(void *arg)
{
	struct clanq_conn_opts opts = { .timeout_ns = TIMEOUT };
	struct srv_sh *sh = arg;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	uint64_t end;

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(clanq_connect(net, &c, 0, SERVICE, &opts), 0);
	CHILD_CHECK_INT(clanq_conn_set_timeouts(c, TIMEOUT, TIMEOUT), 0);
	echo_rounds(c, 1000, 0, MSGS);
	end = clanq_now_ns() + 3 * TIMEOUT;
	while (!__atomic_load_n(&sh->round2, __ATOMIC_ACQUIRE)) {
		if (clanq_now_ns() > end)
			CHILD_FAIL("the workers did not get going");
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	echo_rounds(c, 1000, MSGS, MSGS);
	CHILD_CHECK_INT(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

/* Clients on node 1, once the workers listen. */
static void client(void *arg)
{
	struct clanq_conn_opts opts = { .timeout_ns = TIMEOUT };
	struct clanq_conn *c[CONNS_PER_CLIENT];
	uint32_t id = *(uint32_t *)arg, i;
	struct clanq_dev dev;
	struct clanq_net *net;

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	for (i = 0; i < CONNS_PER_CLIENT; i++) {
		CHILD_CHECK_INT(clanq_connect(net, &c[i], 0, SERVICE, &opts), 0);
		CHILD_CHECK_INT(clanq_conn_set_timeouts(c[i], TIMEOUT, TIMEOUT), 0);
	}
	for (i = 0; i < CONNS_PER_CLIENT; i++)
		echo_rounds(c[i], id * CONNS_PER_CLIENT + i, 0, MSGS);
	for (i = 0; i < CONNS_PER_CLIENT; i++)
		CHILD_CHECK_INT(clanq_conn_close(c[i]), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

static struct srv_sh *srv_sh;

static void worker(void *arg)
{
	unsigned int w = *(unsigned int *)arg;
	struct clanq_conn_opts opts = { .timeout_ns = ITEST_NS_PER_S };
	struct srv_sh *sh = srv_sh;
	struct clanq_net_event evs[16];
	struct clanq_listener *l;
	struct clanq_conn *c;
	struct clanq_dev dev;
	struct clanq_net *net;
	uint8_t b = 0;
	int n, i;

	/* the parent's connection, net and listener are not the worker's */
	CHILD_CHECK_INT(clanq_send(srv_conn, &b, 1, 0), -EBADFD);
	CHILD_CHECK_INT(clanq_send(srv_conn, &b, 1, CLANQ_MSG_DONTWAIT), -EBADFD);
	CHILD_CHECK_INT(clanq_recv(srv_conn, &b, 1, CLANQ_MSG_DONTWAIT), -EBADFD);
	CHILD_CHECK_INT(clanq_net_wait(srv_net, evs, 16, 0), -EBADFD);
	CHILD_CHECK_INT(clanq_accept(srv_listener, &c, NULL, 0), -EBADFD);
	CHILD_CHECK_INT(clanq_listen_attr(srv_net, &l, SERVICE, 8, &shared_listen),
			-EBADFD);
	CHILD_CHECK_INT(clanq_connect(srv_net, &c, 1, SERVICE, &opts), -EBADFD);
	/* dropped: the parent keeps them */
	CHILD_CHECK_INT(clanq_conn_close(srv_conn), 0);
	CHILD_CHECK_INT(clanq_net_close(srv_net), 0);
	CHILD_CHECK_INT(clanq_close(srv_dev), 0);

	CHILD_CHECK_INT(clanq_open_nic(&dev, 0), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(clanq_listen_attr(net, &l, SERVICE, 64, &shared_listen), 0);
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		n = clanq_net_wait(net, evs, 16, 20 * ITEST_NS_PER_MS);
		if (n == -ETIMEDOUT)
			continue;
		CHILD_CHECK(n > 0);
		for (i = 0; i < n; i++) {
			if (evs[i].what & CLANQ_NET_ACCEPT) {
				while (!clanq_accept(evs[i].listener, &c, NULL, 0))
					__atomic_add_fetch(&sh->accepted[w], 1,
							   __ATOMIC_RELEASE);
				continue;
			}
			if (evs[i].what & (CLANQ_NET_IN | CLANQ_NET_HUP))
				itest_echo_drain(evs[i].conn, &sh->echoed[w],
						 &sh->errors[w]);
		}
	}
	CHILD_CHECK_INT(clanq_net_close(net), 0);
	CHILD_CHECK_INT(clanq_close(&dev), 0);
}

/* The parent: echo n messages on its accepted connection. */
static void serve_rounds(struct clanq_conn *c, uint32_t n)
{
	static uint8_t buf[MAX_LEN];
	ssize_t got;
	uint32_t i;

	for (i = 0; i < n; i++) {
		got = clanq_recv(c, buf, sizeof(buf), 0);
		assert_true(got > 0);
		assert_int_equal(clanq_send(c, buf, (size_t)got, 0), 0);
	}
}

static void a_server_accepts_then_forks_workers(void **state)
{
	static unsigned int wid[NR_WORKERS];
	static uint32_t cid[NR_CLIENTS];
	pid_t first, workers[NR_WORKERS], clients[NR_CLIENTS];
	struct srv_sh *sh = shared_alloc(sizeof(*sh));
	struct clanq_dev dev;
	uint32_t accepted = 0, echoed = 0;
	uint8_t b;
	uint64_t end;
	unsigned int i;

	(void)state;
	srv_sh = sh;
	srv_dev = &dev;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&srv_net, &dev, NULL), 0);
	assert_int_equal(clanq_listen_attr(srv_net, &srv_listener, SERVICE, 8,
					   &shared_listen), 0);
	first = itest_fork(first_client, sh);
	assert_true(first > 0);
	assert_int_equal(clanq_accept(srv_listener, &srv_conn, NULL, TIMEOUT), 0);
	assert_int_equal(clanq_conn_set_timeouts(srv_conn, TIMEOUT, TIMEOUT), 0);
	serve_rounds(srv_conn, MSGS);

	/* the listener stays open while the workers fork: theirs join it */
	for (i = 0; i < NR_WORKERS; i++) {
		wid[i] = i;
		workers[i] = itest_fork(worker, &wid[i]);
		assert_true(workers[i] > 0);
	}
	end = clanq_now_ns() + TIMEOUT;
	while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < NR_WORKERS) {
		assert_true(clanq_now_ns() < end);
		for (i = 0; i < NR_WORKERS; i++)
			assert_true(itest_still_running(workers[i], "worker"));
		itest_sleep_ns(ITEST_NS_PER_MS);
	}
	/* the parent takes no more: the workers serve the service */
	assert_int_equal(clanq_listener_close(srv_listener), 0);

	/* the workers dropped their copies: the parent's connection works */
	__atomic_store_n(&sh->round2, 1, __ATOMIC_RELEASE);
	serve_rounds(srv_conn, MSGS);
	assert_int_equal(clanq_recv(srv_conn, &b, 1, 0), 0);	/* its close */
	assert_true(itest_status_ok(itest_wait(first, TIMEOUT), "first client"));
	assert_int_equal(clanq_conn_close(srv_conn), 0);

	for (i = 0; i < NR_CLIENTS; i++) {
		cid[i] = i;
		clients[i] = itest_fork(client, &cid[i]);
		assert_true(clients[i] > 0);
	}
	for (i = 0; i < NR_CLIENTS; i++)
		assert_true(itest_status_ok(itest_wait(clients[i], 3 * TIMEOUT),
					    "client"));
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < NR_WORKERS; i++) {
		assert_true(itest_status_ok(itest_wait(workers[i], TIMEOUT),
					    "worker"));
		accepted += sh->accepted[i];
		echoed += sh->echoed[i];
		assert_int_equal(sh->errors[i], 0);
		printf("worker %u: %u connections, %u echoes\n", i,
		       sh->accepted[i], sh->echoed[i]);
	}
	assert_int_equal(accepted, NR_CLIENTS * CONNS_PER_CLIENT);
	assert_int_equal(echoed, NR_CLIENTS * CONNS_PER_CLIENT * MSGS);
	assert_int_equal(clanq_net_close(srv_net), 0);
	assert_int_equal(clanq_close(&dev), 0);
	munmap(sh, sizeof(*sh));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(a_child_is_refused_its_parents_objects_and_opens_its_own,
					  itest_teardown),
		cmocka_unit_test_teardown(a_killed_child_leaves_its_parents_objects_alone,
					  itest_teardown),
		cmocka_unit_test_teardown(a_server_accepts_then_forks_workers,
					  itest_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
