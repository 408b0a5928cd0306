// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanqstat: clanq's counters, as vmstat(8) and `ethtool -S` show a
 * machine's and a NIC's: once, or every INTERVAL seconds as rates.
 *
 * Per NIC from sysfs, /sys/class/misc/clanqN/ (driver/stats.c,
 * docs/sysfs-clanq.rst): readable by every user. Per context and per
 * endpoint (-c, -e) from CLANQ_IOC_EP_STATS on a context clanqstat opens
 * on that NIC: the contexts of the caller's uid, all of them for root.
 * clanqstat's own context is left out.
 *
 * Exit status: 0; 1 no NIC, or one could not be read; 2 usage.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/admin.h>

#define SYSFS	"/sys/class/misc"
#define MAX_NICS 64

static const char *prog = "clanqstat";

/* statistics/: the NIC's counters, in the order sysfs lists them */
static const char *const nic_stats[] = {
	"oob_sent", "oob_delivered", "oob_dropped", "oob_no_endpoint",
	"oob_unreachable", "events", "evq_overflows", "evq_blocks",
	"driver_entries", "rdma_reqs", "rdma_bytes", "rdma_errors",
	"rdma_kicks", "rdma_turns", "rdma_inline_turns", "rdma_splits",
	"rdma_fire_turns", "regions_revoked", "tw_fires", "tw_flushes", "tw_spurious",
};
#define NR_STATS (sizeof(nic_stats) / sizeof(nic_stats[0]))

static const char *const nic_limits[] = {
	"max_eps", "max_oob_slots", "max_rdma_slots", "max_evq_regs",
	"max_ep_regs", "max_oob_waiters", "max_tripwires", "max_regions", "max_aps",
	"max_region_bytes", "max_ctx_bytes", "max_user_bytes", "rdma_max_xfer",
};
#define NR_LIMITS (sizeof(nic_limits) / sizeof(nic_limits[0]))

/* struct clanq_ep_counters, field by field, for the tables */
#define EP_FIELDS(X) X(oob_sent) X(oob_delivered) X(oob_dropped) X(events) \
	X(rdma_reqs) X(rdma_bytes) X(rdma_errors) X(rdma_kicks)		\
	X(tw_fires) X(tw_flushes) X(tw_spurious)
#define X_NAME(f) #f,
static const char *const ep_field_names[] = { EP_FIELDS(X_NAME) };
#define NR_EP_FIELDS (sizeof(ep_field_names) / sizeof(ep_field_names[0]))

static void ep_values(const struct clanq_ep_counters *c, double *v)
{
	unsigned int i = 0;

#define X_VAL(f) v[i++] = (double)c->f;
	EP_FIELDS(X_VAL)
#undef X_VAL
}

struct nic {
	unsigned int index;
	char name[16];
	unsigned long long stats[NR_STATS], prev[NR_STATS];
	struct clanq_ep_stat *recs, *prev_recs;
	unsigned int nr_recs, nr_prev;
};

static struct {
	bool all, contexts, endpoints;
	int only;		/* -1: every NIC */
	double interval;	/* 0: once */
	long count;		/* reports; 0: for ever */
} opt = { .only = -1 };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-d NIC] [-c] [-e] [-a] [INTERVAL [COUNT]]\n"
		"  clanq's counters: per NIC (sysfs %s/clanqN/), and with\n"
		"  -c per context, -e per endpoint (your own; root: everyone's)\n"
		"  -d, --device NIC   only this NIC (index N or name clanqN)\n"
		"  -c, --contexts     one line per context (process)\n"
		"  -e, --endpoints    one line per endpoint\n"
		"  -a, --all          zero counters too, and the NIC's limits\n"
		"  INTERVAL [COUNT]   report every INTERVAL seconds, COUNT times\n"
		"                     (default: until interrupted); the first report\n"
		"                     is totals since load, the rest rates per second\n"
		"Exit status: 0; 1 no NIC or a NIC unreadable; 2 usage.\n",
		prog, SYSFS);
}

static int read_text(const char *nic, const char *file, char *buf, size_t len)
{
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), SYSFS "/%s/%s", nic, file);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int read_u64(const char *nic, const char *file, unsigned long long *v)
{
	char buf[64], *end;
	int err = read_text(nic, file, buf, sizeof(buf));

	if (err)
		return err;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return errno || end == buf ? -EINVAL : 0;
}

/* The NICs in sysfs, by index. */
static unsigned int find_nics(struct nic *nics)
{
	struct dirent *d;
	unsigned int n = 0, idx;
	DIR *dir = opendir(SYSFS);
	char rest;

	if (!dir)
		return 0;
	while ((d = readdir(dir)) && n < MAX_NICS) {
		if (sscanf(d->d_name, "clanq%u%c", &idx, &rest) != 1)
			continue;
		if (opt.only >= 0 && idx != (unsigned int)opt.only)
			continue;
		memset(&nics[n], 0, sizeof(nics[n]));
		nics[n].index = idx;
		snprintf(nics[n].name, sizeof(nics[n].name), "clanq%u", idx);
		n++;
	}
	closedir(dir);
	/* readdir's order is the directory's; show them by index */
	for (unsigned int i = 1; i < n; i++)
		for (unsigned int j = i; j && nics[j - 1].index > nics[j].index; j--) {
			struct nic t = nics[j];

			nics[j] = nics[j - 1];
			nics[j - 1] = t;
		}
	return n;
}

static int sample_nic(struct nic *nic)
{
	char file[64];
	int err;

	memcpy(nic->prev, nic->stats, sizeof(nic->prev));
	for (unsigned int i = 0; i < NR_STATS; i++) {
		snprintf(file, sizeof(file), "statistics/%s", nic_stats[i]);
		err = read_u64(nic->name, file, &nic->stats[i]);
		if (err) {
			fprintf(stderr, "%s: %s/%s/%s: %s\n", prog, SYSFS, nic->name,
				file, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* Every record of the NIC's contexts this user may see, but our own. */
static int sample_recs(struct nic *nic, const struct clanq_dev *dev)
{
	struct clanq_ep_stat *recs = NULL, *r;
	unsigned int n = 0, room = 0, total = 0;
	pid_t self = getpid();
	int got;

	free(nic->prev_recs);
	nic->prev_recs = nic->recs;
	nic->nr_prev = nic->nr_recs;
	nic->recs = NULL;
	nic->nr_recs = 0;
	do {
		if (n + CLANQ_EP_STATS_MAX > room) {
			room = n + CLANQ_EP_STATS_MAX;
			r = realloc(recs, room * sizeof(*recs));
			if (!r) {
				free(recs);
				return -ENOMEM;
			}
			recs = r;
		}
		got = clanq_ep_stats(dev, recs + n, CLANQ_EP_STATS_MAX, n, &total);
		if (got < 0) {
			free(recs);
			return got;
		}
		n += got;
	} while (got == CLANQ_EP_STATS_MAX && n < total);
	/* drop our own context's record: we hold no endpoint */
	for (unsigned int i = 0; i < n; i++)
		if (recs[i].pid != self || recs[i].ep || recs[i].nr_eps)
			recs[nic->nr_recs++] = recs[i];
	nic->recs = recs;
	return 0;
}

static void print_header(struct nic *nic)
{
	char wire[64] = "?", peers[256] = "?";
	unsigned long long node = 0, ctxs = 0, eps = 0;

	read_u64(nic->name, "node", &node);
	read_u64(nic->name, "contexts", &ctxs);
	read_u64(nic->name, "endpoints", &eps);
	read_text(nic->name, "wire", wire, sizeof(wire));
	read_text(nic->name, "peers", peers, sizeof(peers));
	printf("%s: node %llu, wire %s, peers %s, contexts %llu, endpoints %llu\n",
	       nic->name, node, wire, *peers ? peers : "none", ctxs, eps);
}

/* A counter: its total, or (rate) its change per second over dt. */
static void print_value(const char *name, double now, double before,
			bool rate, double dt)
{
	if (rate)
		printf("  %-20s %14.1f/s\n", name, (now - before) / dt);
	else
		printf("  %-20s %14.0f\n", name, now);
}

static void print_nic(struct nic *nic, bool rate, double dt)
{
	print_header(nic);
	for (unsigned int i = 0; i < NR_STATS; i++) {
		double now = (double)nic->stats[i], before = (double)nic->prev[i];

		if (!opt.all && (rate ? now == before : now == 0))
			continue;
		print_value(nic_stats[i], now, before, rate, dt);
	}
	if (!opt.all || rate)
		return;
	printf("  limits:");
	for (unsigned int i = 0; i < NR_LIMITS; i++) {
		unsigned long long v;
		char file[64];

		snprintf(file, sizeof(file), "limits/%s", nic_limits[i]);
		if (!read_u64(nic->name, file, &v))
			printf(" %s %llu", nic_limits[i], v);
	}
	printf("\n");
}

/* The record for the same object in the previous sample, if any. */
static const struct clanq_ep_stat *prev_rec(const struct nic *nic,
					    const struct clanq_ep_stat *r)
{
	for (unsigned int i = 0; i < nic->nr_prev; i++)
		if (nic->prev_recs[i].ctx_id == r->ctx_id &&
		    nic->prev_recs[i].ep == r->ep)
			return &nic->prev_recs[i];
	return NULL;
}

static void print_fields_header(const char *first)
{
	printf("%-8s %7s %-15s %s", "NIC", "PID", "COMM", first);
	for (unsigned int i = 0; i < NR_EP_FIELDS; i++)
		printf(" %13s", ep_field_names[i]);
	printf("\n");
}

/* v now, p before (zero for an object new since): totals or rates */
static void print_fields(const double *v, const double *p, bool rate, double dt)
{
	for (unsigned int i = 0; i < NR_EP_FIELDS; i++) {
		if (rate)
			printf(" %11.1f/s", (v[i] - p[i]) / dt);
		else
			printf(" %13.0f", v[i]);
	}
	printf("\n");
}

static void print_endpoints(const struct nic *nic, bool rate, double dt)
{
	double v[NR_EP_FIELDS], p[NR_EP_FIELDS];
	const struct clanq_ep_stat *r, *o;

	for (unsigned int i = 0; i < nic->nr_recs; i++) {
		r = &nic->recs[i];
		if (!r->ep)
			continue;
		ep_values(&r->c, v);
		memset(p, 0, sizeof(p));
		o = rate ? prev_rec(nic, r) : NULL;
		if (o)
			ep_values(&o->c, p);
		printf("%-8s %7d %-15.15s %5u %5s %6u %6u", nic->name, r->pid, r->comm,
		       r->ep, r->ep <= CLANQ_SERVICE_MAX ? "yes" : "no",
		       r->oob_slots, r->oob_queued);
		print_fields(v, p, rate, dt);
	}
}

/* A context's line: its endpoints' counters summed, at index @i. */
static void sum_context(const struct clanq_ep_stat *recs, unsigned int n,
			unsigned int i, double *v)
{
	double e[NR_EP_FIELDS];

	memset(v, 0, NR_EP_FIELDS * sizeof(*v));
	for (unsigned int j = i + 1; j < n && recs[j].ep &&
	     recs[j].ctx_id == recs[i].ctx_id; j++) {
		ep_values(&recs[j].c, e);
		for (unsigned int k = 0; k < NR_EP_FIELDS; k++)
			v[k] += e[k];
	}
}

static void print_contexts(const struct nic *nic, bool rate, double dt)
{
	double v[NR_EP_FIELDS], p[NR_EP_FIELDS], entries, before;
	const struct clanq_ep_stat *r;

	for (unsigned int i = 0; i < nic->nr_recs; i++) {
		r = &nic->recs[i];
		if (r->ep)
			continue;
		sum_context(nic->recs, nic->nr_recs, i, v);
		memset(p, 0, sizeof(p));
		entries = (double)r->ctx_entries;
		before = 0;
		if (rate) {
			for (unsigned int j = 0; j < nic->nr_prev; j++) {
				if (nic->prev_recs[j].ctx_id != r->ctx_id ||
				    nic->prev_recs[j].ep)
					continue;
				sum_context(nic->prev_recs, nic->nr_prev, j, p);
				before = (double)nic->prev_recs[j].ctx_entries;
				break;
			}
		}
		printf("%-8s %7d %-15.15s %4u", nic->name, r->pid, r->comm,
		       r->nr_eps);
		if (rate)
			printf(" %11.1f/s", (entries - before) / dt);
		else
			printf(" %13.0f", entries);
		print_fields(v, p, rate, dt);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "contexts", no_argument, NULL, 'c' },
		{ "endpoints", no_argument, NULL, 'e' },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "d:ceah", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (!strncmp(optarg, "clanq", 5))
				optarg += 5;
			errno = 0;
			opt.only = (int)strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || opt.only < 0 ||
			    opt.only >= MAX_NICS) {
				fprintf(stderr, "%s: -d: '%s' is not a NIC (N or clanqN)\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'c':
			opt.contexts = true;
			break;
		case 'e':
			opt.endpoints = true;
			break;
		case 'a':
			opt.all = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		errno = 0;
		opt.interval = strtod(argv[optind], &end);
		if (errno || end == argv[optind] || *end || !isfinite(opt.interval) ||
		    opt.interval < 0.01 || opt.interval > 86400) {
			fprintf(stderr, "%s: INTERVAL '%s': seconds, 0.01 to 86400\n",
				prog, argv[optind]);
			return 2;
		}
		optind++;
	}
	if (optind < argc) {
		errno = 0;
		opt.count = strtol(argv[optind], &end, 10);
		if (errno || end == argv[optind] || *end || opt.count < 1) {
			fprintf(stderr, "%s: COUNT '%s': a number of reports, at least 1\n",
				prog, argv[optind]);
			return 2;
		}
		optind++;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!opt.interval)
		opt.count = 1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct nic nics[MAX_NICS];
	static struct clanq_dev devs[MAX_NICS];
	bool per_obj, rate = false;
	unsigned int n, i;
	double t, last = 0, dt = 1;
	char why[256], path[32];
	int err;
	long report;

	err = parse_args(argc, argv);
	if (err)
		return err;
	per_obj = opt.contexts || opt.endpoints;
	n = find_nics(nics);
	if (!n) {
		if (opt.only >= 0)
			fprintf(stderr, "%s: no clanq%d in %s: no such NIC, or clanq.ko is not loaded\n",
				prog, opt.only, SYSFS);
		else
			fprintf(stderr, "%s: no clanq NIC: is clanq.ko loaded?\n", prog);
		return 1;
	}
	for (i = 0; per_obj && i < n; i++) {
		snprintf(path, sizeof(path), CLANQ_DEV_PREFIX "%u", nics[i].index);
		err = clanq_open(&devs[i], path);
		if (err) {
			clanq_open_explain(path, err, why, sizeof(why));
			fprintf(stderr, "%s: %s\n", prog, why);
			return 1;
		}
	}
	for (report = 0; !opt.count || report < opt.count; report++) {
		if (report) {
			double left = last + opt.interval - now_s();

			if (left > 0)
				usleep((useconds_t)(left * 1e6));
		}
		t = now_s();
		if (report)
			dt = t - last;
		last = t;
		rate = report > 0;
		for (i = 0; i < n; i++) {
			if (sample_nic(&nics[i]))
				return 1;
			err = per_obj ? sample_recs(&nics[i], &devs[i]) : 0;
			if (err) {
				fprintf(stderr, "%s: %s: EP_STATS: %s\n", prog,
					nics[i].name, strerror(-err));
				return 1;
			}
		}
		if (opt.interval) {
			time_t wall = time(NULL);
			char stamp[32];

			strftime(stamp, sizeof(stamp), "%F %T", localtime(&wall));
			printf("--- %s %s\n", stamp,
			       rate ? "per second over the interval" : "since load");
		}
		for (i = 0; i < n; i++)
			print_nic(&nics[i], rate, dt);
		if (opt.contexts) {
			print_fields_header(" EPS       ENTRIES");
			for (i = 0; i < n; i++)
				print_contexts(&nics[i], rate, dt);
		}
		if (opt.endpoints) {
			print_fields_header("   EP   SVC  SLOTS QUEUED");
			for (i = 0; i < n; i++)
				print_endpoints(&nics[i], rate, dt);
		}
		fflush(stdout);
	}
	return 0;
}
