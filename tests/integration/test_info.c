// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * What an administrator sees of a node: debugfs clanq/clanqN/objects
 * lists each context's endpoints, regions and apertures with the ids the
 * library holds, and forgets them when they are closed; clanq-info shows
 * the connection between two processes from both ends, and refuses bad
 * arguments with a message and a status; a listing of 1,000 regions,
 * read in pieces, names every one exactly once.
 *
 * Runs in the test VM (nr_nics=2), as root, with debugfs mounted; finds
 * clanq-info on PATH (/clanq/bin), or at $CLANQ_INFO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <clanq/net.h>

#include "itest.h"
/* white box: the ids of a connection's ring and aperture */
#include "../../lib/net_internal.h"

#define SERVICE		4343
#define OBJECTS		"/sys/kernel/debug/clanq/clanq%u/objects"
#define MANY_REGIONS	1000

/* A NIC's objects file, a line each. */
struct objs {
	char **lines;
	size_t n;
};

static void objs_read(struct objs *o, unsigned int nic)
{
	char path[64], *line = NULL;
	size_t cap = 0, room = 0;
	FILE *f;

	snprintf(path, sizeof(path), OBJECTS, nic);
	f = fopen(path, "r");
	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	memset(o, 0, sizeof(*o));
	while (getline(&line, &cap, f) >= 0) {
		if (o->n == room) {
			room = room ? 2 * room : 64;
			o->lines = realloc(o->lines, room * sizeof(*o->lines));
			assert_non_null(o->lines);
		}
		line[strcspn(line, "\n")] = '\0';
		o->lines[o->n++] = line;
		line = NULL;
		cap = 0;
	}
	free(line);
	assert_false(ferror(f));
	fclose(f);
}

static void objs_free(struct objs *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->lines[i]);
	free(o->lines);
	memset(o, 0, sizeof(*o));
}

/* Is line of type (its first word)? Objects are indented, contexts not. */
static bool is_type(const char *line, const char *type)
{
	size_t n = strlen(type);

	line += strspn(line, " ");
	return !strncmp(line, type, n) && line[n] == ' ';
}

/* The value of key in a "type key value ..." line, -1 if absent. */
static long long field(const char *line, const char *key)
{
	char buf[512], *save = NULL, *k, *v;

	snprintf(buf, sizeof(buf), "%s", line);
	if (!strtok_r(buf, " ", &save))
		return -1;
	while ((k = strtok_r(NULL, " ", &save)) && (v = strtok_r(NULL, " ", &save)))
		if (!strcmp(k, key))
			return strtoll(v, NULL, 0);
	return -1;
}

/* The string value of key, or "". */
static const char *field_str(const char *line, const char *key, char *out,
			     size_t size)
{
	char buf[512], *save = NULL, *k, *v;

	snprintf(buf, sizeof(buf), "%s", line);
	out[0] = '\0';
	if (strtok_r(buf, " ", &save))
		while ((k = strtok_r(NULL, " ", &save)) && (v = strtok_r(NULL, " ", &save)))
			if (!strcmp(k, key)) {
				snprintf(out, size, "%s", v);
				break;
			}
	return out;
}

/*
 * The line of pid's newest context (contexts are listed oldest first:
 * one an earlier failed test left behind comes before), -1 if none.
 */
static long ctx_of(const struct objs *o, pid_t pid)
{
	long ci = -1;

	for (size_t i = 0; i < o->n; i++)
		if (is_type(o->lines[i], "ctx") && field(o->lines[i], "pid") == pid)
			ci = (long)i;
	return ci;
}

/* The object of type and id listed under the context at line ci, or NULL. */
static const char *obj_of(const struct objs *o, long ci, const char *type,
			  long long id)
{
	for (size_t i = (size_t)ci + 1; i < o->n && !is_type(o->lines[i], "ctx"); i++)
		if (is_type(o->lines[i], type) && field(o->lines[i], "id") == id)
			return o->lines[i];
	return NULL;
}

/* How many objects of type the context at line ci lists. */
static long long count_of(const struct objs *o, long ci, const char *type)
{
	long long n = 0;

	for (size_t i = (size_t)ci + 1; i < o->n && !is_type(o->lines[i], "ctx"); i++)
		n += is_type(o->lines[i], type);
	return n;
}

/* Any object of type and id, in any context of the NIC? */
static bool listed(const struct objs *o, const char *type, long long id)
{
	for (size_t i = 0; i < o->n; i++)
		if (is_type(o->lines[i], type) && field(o->lines[i], "id") == id)
			return true;
	return false;
}

/* Its line says what the context holds, and lists exactly that. */
static void check_ctx_counts(const struct objs *o, long ci)
{
	const char *c = o->lines[ci];

	assert_int_equal(field(c, "eps"), count_of(o, ci, "ep"));
	assert_int_equal(field(c, "regions"), count_of(o, ci, "region"));
	assert_int_equal(field(c, "aps"), count_of(o, ci, "ap"));
}

/* Run clanq-info with args; its output (stderr too) in out, its status. */
static int run_info(const char *args, char *out, size_t size)
{
	const char *bin = getenv("CLANQ_INFO");
	char cmd[256], drain[256];
	size_t n = 0, got;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", bin ? bin : "clanq-info", args);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (n + 1 < size && (got = fread(out + n, 1, size - 1 - n, f)) > 0)
		n += got;
	out[n] = '\0';
	while (fread(drain, 1, sizeof(drain), f) > 0)
		;
	st = pclose(f);
	assert_true(st != -1 && WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* What the client tells the test of its connection. */
struct peer_info {
	pid_t pid;
	uint32_t ep;		/* its net's endpoint */
	uint32_t rx;		/* its ring, which we import */
	uint32_t ap;		/* its aperture onto our ring */
};

struct client_arg {
	int info_fd;		/* it writes its peer_info here */
	int go_fd;		/* and holds on until a byte comes */
};

/* Node 1: connect, say what it has, hold it until told, close. */
static void info_client(void *p)
{
	const struct client_arg *a = p;
	struct clanq_conn_opts o = { .timeout_ns = 10 * ITEST_NS_PER_S };
	struct peer_info pi;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	char go;
	int err;

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	do {
		err = clanq_connect(net, &c, 0, SERVICE, &o);
	} while (err == -ECONNREFUSED && (itest_sleep_ns(10 * ITEST_NS_PER_MS), 1));
	CHILD_CHECK_INT(err, 0);
	memset(&pi, 0, sizeof(pi));
	pi.pid = getpid();
	pi.ep = clanq_net_addr(net).id;
	pi.rx = c->rx.addr.id;
	pi.ap = c->tx.id;
	CHILD_CHECK(itest_write_full(a->info_fd, &pi, sizeof(pi)));
	CHILD_CHECK(itest_read_full(a->go_fd, &go, 1));
	/* the peer is gone by now: the close still succeeds */
	CHILD_CHECK_INT(clanq_conn_close(c), 0);
	clanq_net_close(net);
	clanq_close(&dev);
}

/*
 * 1. A listener and a connection across nodes 0 and 1: each side's
 * context lists its endpoints, its ring (exported, imported once) and
 * its aperture onto the other's ring (sink, notify); clanq-info shows
 * the connection from both ends, with the peer's pid; what is closed
 * leaves the listing, and a peer's revocation shows.
 */
static void test_objects_of_a_connection(void **state)
{
	static char out[1 << 16];
	int info[2], go[2];
	struct client_arg a;
	struct peer_info pi;
	struct clanq_listener *l;
	struct clanq_dev dev;
	struct clanq_net *net;
	struct clanq_conn *c;
	char want[160], rights[8];
	struct objs o0, o1;
	uint32_t my_ep, my_rx, my_ap;
	const char *ln;
	long ci;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(info), 0);
	assert_int_equal(pipe(go), 0);
	a = (struct client_arg){ info[1], go[0] };
	/*
	 * Forked first: a child forked later would inherit our context's
	 * fd, and keep the context alive after we close it. (It retries
	 * until we listen.)
	 */
	pid = itest_fork(info_client, &a);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_net_open(&net, &dev, NULL), 0);
	assert_int_equal(clanq_listen(net, &l, SERVICE, 4), 0);
	assert_int_equal(clanq_accept(l, &c, NULL, 10 * ITEST_NS_PER_S), 0);
	assert_true(itest_read_full(info[0], &pi, sizeof(pi)));
	assert_int_equal(pi.pid, pid);
	/* closing frees these: our ids, kept */
	my_ep = clanq_net_addr(net).id;
	my_rx = c->rx.addr.id;
	my_ap = c->tx.id;
	assert_true(my_ep && my_rx && my_ap);

	/* node 0: ours */
	objs_read(&o0, 0);
	ci = ctx_of(&o0, getpid());
	assert_true(ci >= 0);
	check_ctx_counts(&o0, ci);
	assert_true(field(o0.lines[ci], "evqs") >= 1);
	assert_true(field(o0.lines[ci], "tws") >= 1);
	assert_true(field(o0.lines[ci], "entries") > 0);
	assert_string_equal(field_str(o0.lines[ci], "comm", want, sizeof(want)),
			    "test_info");
	ln = obj_of(&o0, ci, "ep", my_ep);
	assert_non_null(ln);
	assert_int_equal(field(ln, "service"), 0);
	assert_true(field(ln, "oob_slots") >= 2);
	ln = obj_of(&o0, ci, "ep", SERVICE);
	assert_non_null(ln);
	assert_int_equal(clanq_listener_addr(l).id, SERVICE);
	assert_int_equal(field(ln, "service"), 1);
	assert_true(field(ln, "oob_delivered") >= 1);	/* the CONNECT */
	assert_true(field(ln, "oob_queued") >= 0);
	assert_true(field(ln, "oob_queued") < field(ln, "oob_slots"));
	ln = obj_of(&o0, ci, "region", my_rx);
	assert_non_null(ln);
	assert_int_equal(field(ln, "exported"), 1);
	assert_int_equal(field(ln, "imports"), 1);
	assert_true(field(ln, "len") >= 4096 - 64);
	ln = obj_of(&o0, ci, "ap", my_ap);
	assert_non_null(ln);
	assert_int_equal(field(ln, "node"), 1);
	assert_int_equal(field(ln, "region"), pi.rx);
	assert_int_equal(field(ln, "sink"), 1);
	assert_int_equal(field(ln, "notify_ep"), my_ep);
	assert_int_equal(field(ln, "revoked"), 0);
	assert_int_equal(field(ln, "len"), (long long)c->tx.len);
	assert_string_equal(field_str(ln, "rights", rights, sizeof(rights)), "rw");
	/* the client's objects are not ours */
	assert_null(obj_of(&o0, ci, "ep", pi.ep));
	objs_free(&o0);

	/* node 1: the client's, the mirror image */
	objs_read(&o1, 1);
	ci = ctx_of(&o1, pid);
	assert_true(ci >= 0);
	check_ctx_counts(&o1, ci);
	assert_non_null(obj_of(&o1, ci, "ep", pi.ep));
	ln = obj_of(&o1, ci, "region", pi.rx);
	assert_non_null(ln);
	assert_int_equal(field(ln, "imports"), 1);
	ln = obj_of(&o1, ci, "ap", pi.ap);
	assert_non_null(ln);
	assert_int_equal(field(ln, "node"), 0);
	assert_int_equal(field(ln, "region"), my_rx);
	assert_int_equal(field(ln, "sink"), 1);
	assert_int_equal(field(ln, "notify_ep"), pi.ep);
	assert_int_equal(ctx_of(&o1, getpid()), -1);
	objs_free(&o1);

	/* clanq-info: the connection, from both ends, with the peer's pid */
	assert_int_equal(run_info("", out, sizeof(out)), 0);
	printf("%s", out);
	snprintf(want, sizeof(want), "ctx pid %d -> node 1 region %u (pid %d,",
		 getpid(), pi.rx, pid);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "ctx pid %d -> node 0 region %u (pid %d,",
		 pid, my_rx, getpid());
	assert_non_null(strstr(out, want));

	/* our side closes: ring and aperture go; the client's is revoked */
	assert_int_equal(clanq_conn_close(c), 0);
	objs_read(&o0, 0);
	ci = ctx_of(&o0, getpid());
	assert_true(ci >= 0);
	check_ctx_counts(&o0, ci);
	assert_false(listed(&o0, "region", my_rx));
	assert_null(obj_of(&o0, ci, "ap", my_ap));
	assert_non_null(obj_of(&o0, ci, "ep", SERVICE));
	objs_free(&o0);
	objs_read(&o1, 1);
	ci = ctx_of(&o1, pid);
	assert_true(ci >= 0);
	ln = obj_of(&o1, ci, "ap", pi.ap);
	assert_non_null(ln);
	assert_int_equal(field(ln, "revoked"), 1);
	assert_int_equal(field(obj_of(&o1, ci, "region", pi.rx), "imports"), 0);
	objs_free(&o1);

	/* the listener, then the net, then the context */
	assert_int_equal(clanq_listener_close(l), 0);
	objs_read(&o0, 0);
	assert_false(listed(&o0, "ep", SERVICE));
	assert_true(listed(&o0, "ep", my_ep));
	objs_free(&o0);
	clanq_net_close(net);
	clanq_close(&dev);
	objs_read(&o0, 0);
	assert_int_equal(ctx_of(&o0, getpid()), -1);
	assert_false(listed(&o0, "ep", my_ep));
	objs_free(&o0);

	/* the client goes: nothing of it is left on node 1 */
	assert_true(itest_write_full(go[1], "g", 1));
	assert_true(itest_status_ok(itest_wait(pid, 30 * ITEST_NS_PER_S), "client"));
	objs_read(&o1, 1);
	assert_int_equal(ctx_of(&o1, pid), -1);
	assert_false(listed(&o1, "ep", pi.ep));
	assert_false(listed(&o1, "region", pi.rx));
	objs_free(&o1);
	close(info[0]);
	close(info[1]);
	close(go[0]);
	close(go[1]);
}

/* 2. clanq-info's arguments: help, one NIC, counters only, and errors. */
static void test_info_arguments(void **state)
{
	static char out[1 << 16];
	struct clanq_dev dev;
	char args[32], want[64];
	unsigned int nr;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	nr = dev.nr_nics;
	clanq_close(&dev);
	assert_true(nr >= 2);

	assert_int_equal(run_info("--help", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: clanq-info"));
	assert_int_equal(run_info("-h", out, sizeof(out)), 0);

	/* a NIC that does not exist: a message, status 1 */
	snprintf(args, sizeof(args), "-n %u", nr);
	assert_int_equal(run_info(args, out, sizeof(out)), 1);
	snprintf(want, sizeof(want), "/dev/clanq%u: no such NIC", nr);
	assert_non_null(strstr(out, want));
	assert_int_equal(run_info("-n 7", out, sizeof(out)), nr > 7 ? 0 : 1);
	/* not a number, an unknown option, a stray argument: usage, 2 */
	assert_int_equal(run_info("-n x", out, sizeof(out)), 2);
	assert_non_null(strstr(out, "not a NIC number"));
	assert_int_equal(run_info("-n -1", out, sizeof(out)), 2);
	assert_int_equal(run_info("-q", out, sizeof(out)), 2);
	assert_non_null(strstr(out, "usage:"));
	assert_int_equal(run_info("extra", out, sizeof(out)), 2);

	/* one NIC only */
	assert_int_equal(run_info("-n 1", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "/dev/clanq1 (node"));
	assert_null(strstr(out, "/dev/clanq0 (node"));
	assert_non_null(strstr(out, "contexts:"));
	assert_non_null(strstr(out, "connections:"));

	/* counters only */
	assert_int_equal(run_info("-s", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "counters:"));
	assert_non_null(strstr(out, "oob_sent"));
	assert_null(strstr(out, "contexts:"));
}

/*
 * 3. Many objects: 1,000 regions' lines take many buffers of the
 * listing, each filled by a fresh start() from its position. Read a
 * stdio buffer at a time, it names every region once, in order, and the
 * context's line says 1,000; freed, none is left.
 */
static void test_many_regions(void **state)
{
	static struct clanq_region r[MANY_REGIONS];
	static unsigned char seen[MANY_REGIONS];
	struct clanq_dev dev;
	struct objs o;
	long ci, last = -1;
	unsigned int i;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	for (i = 0; i < MANY_REGIONS; i++)
		assert_int_equal(clanq_region_alloc(&dev, &r[i], 64), 0);
	objs_read(&o, 0);
	ci = ctx_of(&o, getpid());
	assert_true(ci >= 0);
	assert_int_equal(field(o.lines[ci], "regions"), MANY_REGIONS);
	check_ctx_counts(&o, ci);
	memset(seen, 0, sizeof(seen));
	for (size_t k = (size_t)ci + 1; k < o.n && !is_type(o.lines[k], "ctx"); k++) {
		long long id = field(o.lines[k], "id");

		if (!is_type(o.lines[k], "region"))
			continue;
		for (i = 0; i < MANY_REGIONS && r[i].addr.id != id; i++)
			;
		assert_true(i < MANY_REGIONS);
		assert_int_equal(seen[i], 0);
		seen[i] = 1;
		/* listed in creation order, none skipped */
		assert_int_equal((long)i, last + 1);
		last = (long)i;
	}
	assert_int_equal(last, MANY_REGIONS - 1);
	objs_free(&o);
	for (i = 0; i < MANY_REGIONS; i++)
		assert_int_equal(clanq_region_free(&r[i]), 0);
	objs_read(&o, 0);
	ci = ctx_of(&o, getpid());
	assert_true(ci >= 0);
	assert_int_equal(field(o.lines[ci], "regions"), 0);
	assert_int_equal(count_of(&o, ci, "region"), 0);
	objs_free(&o);
	clanq_close(&dev);
	objs_read(&o, 0);
	assert_int_equal(ctx_of(&o, getpid()), -1);
	objs_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_objects_of_a_connection, itest_teardown),
		cmocka_unit_test(test_info_arguments),
		cmocka_unit_test(test_many_regions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
