/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What the example programs share: argument parsing that says what was
 * wrong, and the exit codes they all use.
 *
 * Exit status: 0 the job was done and every check passed; 1 it failed
 * (a check, the driver, the peer); 2 bad arguments (as getopt programs do).
 */
#ifndef CLANQ_EXAMPLE_H
#define CLANQ_EXAMPLE_H

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/net.h>

#define EX_FAIL		1
#define EX_USAGE	2

static const char *ex_prog;

static inline void ex_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", ex_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try '%s --help')\n", ex_prog);
	exit(EX_USAGE);
}

/* The device ex_open_dev() opened, whose refusals ex_fail() explains. */
static struct clanq_dev *ex_dev;

/*
 * A failure of the job: the call that failed and why; and, when the
 * driver refused it, the driver's own words (a limit names itself).
 */
static inline void ex_fail(const char *what, int err)
{
	char why[CLANQ_ERR_MAX];
	int e = err < 0 ? -err : err;

	if (ex_dev && clanq_last_error(ex_dev, why, sizeof(why)) == -e && why[0])
		fprintf(stderr, "%s: %s: %s (the driver: %s)\n", ex_prog, what,
			strerror(e), why);
	else
		fprintf(stderr, "%s: %s: %s\n", ex_prog, what, strerror(e));
	exit(EX_FAIL);
}

/*
 * A count or a size: decimal, with an optional k/m/g suffix (powers of
 * 1024), within [min, max]; anything else is a usage error naming opt.
 */
static inline unsigned long long ex_parse_num(const char *opt, const char *s,
					      unsigned long long min,
					      unsigned long long max)
{
	unsigned long long v, mul = 1;
	char *end;

	errno = 0;
	if (!s || !*s || *s == '-')
		ex_usage_error("%s: '%s' is not a number", opt, s ? s : "");
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		ex_usage_error("%s: '%s' is not a number", opt, s);
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	}
	if (*end)
		ex_usage_error("%s: '%s' is not a number (suffixes: k, m, g)", opt, s);
	if (v > ULLONG_MAX / mul || v * mul < min || v * mul > max)
		ex_usage_error("%s: %s is out of range (%llu .. %llu)", opt, s, min, max);
	return v * mul;
}

/* A comma-separated list of sizes ("8,1k"): at most max_n of them. */
static inline unsigned int ex_parse_list(const char *opt, const char *s,
					 unsigned long long min,
					 unsigned long long max,
					 unsigned long long *out,
					 unsigned int max_n)
{
	char buf[256], *tok, *save;
	unsigned int n = 0;

	if (strlen(s) >= sizeof(buf))
		ex_usage_error("%s: list too long", opt);
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max_n)
			ex_usage_error("%s: at most %u values", opt, max_n);
		out[n++] = ex_parse_num(opt, tok, min, max);
	}
	if (!n)
		ex_usage_error("%s: empty list", opt);
	return n;
}

/* The process's resident memory in KiB (VmRSS), or 0 if unknown. */
static inline unsigned long long ex_rss_kib(void)
{
	unsigned long long v = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %llu kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* A field of /proc/meminfo in KiB ("MemAvailable"), or 0 if unknown. */
static inline unsigned long long ex_meminfo_kib(const char *key)
{
	unsigned long long v = 0, x;
	char line[128], name[64];
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63[^:]: %llu", name, &x) == 2 && !strcmp(name, key)) {
			v = x;
			break;
		}
	fclose(f);
	return v;
}

/* /dev/clanqN, or exit saying why it cannot be opened. */
static inline void ex_open_dev(struct clanq_dev *dev, unsigned int nic)
{
	int err = clanq_open_nic(dev, nic);
	char path[32], why[256];

	if (err) {
		snprintf(path, sizeof(path), CLANQ_DEV_PREFIX "%u", nic);
		clanq_open_explain(path, err, why, sizeof(why));
		ex_fail(why, err);
	}
	ex_dev = dev;
}

/* Open /dev/clanq<nic> and a net on it (*net), or exit saying why not. */
static inline void ex_open_net(struct clanq_dev *dev, struct clanq_net **net,
			       unsigned int nic, const struct clanq_net_attr *attr)
{
	int err;

	ex_open_dev(dev, nic);
	err = clanq_net_open(net, dev, attr);
	if (err)
		ex_fail("net", err);
}

/* clanq_connect(), a refusal retried for 5 s: the peer may be starting. */
static inline int ex_connect(struct clanq_net *net, struct clanq_conn **c,
			     unsigned int node, unsigned int service,
			     const struct clanq_conn_opts *o)
{
	uint64_t until = clanq_now_ns() + 5000000000ull;
	int err;

	for (;;) {
		err = clanq_connect(net, c, node, service, o);
		if (err != -ECONNREFUSED || clanq_now_ns() > until)
			return err;
		usleep(20000);
	}
}

/*
 * The one argument of a two-sided example after its options (GNU getopt
 * permutes, so they may come before or after it): true for "server",
 * false for "client", a usage error for anything else.
 */
static inline bool ex_is_server(int argc, char **argv)
{
	const char *role;

	if (optind >= argc)
		ex_usage_error("say server or client");
	role = argv[optind];
	if (strcmp(role, "server") && strcmp(role, "client"))
		ex_usage_error("'%s': say server or client", role);
	if (optind + 1 < argc)
		ex_usage_error("unexpected argument '%s'", argv[optind + 1]);
	return !strcmp(role, "server");
}

/* Set by SIGINT or SIGTERM once ex_catch_signals() was called. */
static volatile sig_atomic_t ex_stop;

static inline void ex_on_signal(int sig)
{
	(void)sig;
	ex_stop = 1;
}

/* SIGINT and SIGTERM set ex_stop, without SA_RESTART: a wait returns -EINTR. */
static inline void ex_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ex_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

#endif /* CLANQ_EXAMPLE_H */
