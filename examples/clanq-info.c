// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-info: the soft NICs of this kernel, what each says of itself,
 * its counters, and what its contexts hold: endpoints, regions,
 * apertures, and the connections among them.
 *
 * The ABI answer comes from opening each NIC. Counters and objects come
 * from debugfs (clanq/clanqN/stats and objects, driver/nic.c and
 * driver/debugfs.c), so they need root and a mounted debugfs; without
 * them clanq-info says so once and shows the rest.
 *
 * A connection is an aperture imported with CLANQ_AP_SINK and a notify
 * endpoint, which only libclanq's connection layer does (lib/conn.c):
 * shown as "ctx pid X -> node N region R", with the pid of the region's
 * owner when that node is a NIC of this kernel.
 *
 * The verbs wire (the NIC's traffic to other hosts, over the kernel's
 * RDMA core): its binding from sysfs, /sys/class/misc/clanqN/verbs, and
 * its peers with their connections' state from CLANQ_IOC_PEER_LIST
 * (clanq_peer_list()), both for every user; clanqctl(8) changes them.
 *
 * Exit status: 0 when everything asked for was shown; 1 when there is
 * no NIC, the one asked for does not exist, one does not answer, or -s
 * was given and the counters cannot be read; 2 for a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clanq.h>
#include <clanq/admin.h>

#define DEBUGFS		"/sys/kernel/debug/clanq"
#define SYSFS		"/sys/class/misc"
#define MAX_FIELDS	32

/* One line of a debugfs file: a type word, then key value pairs. */
struct rec {
	char *line;			/* split in place */
	const char *type;
	unsigned int n;
	const char *key[MAX_FIELDS], *val[MAX_FIELDS];
};

/* What one file held: its lines, parsed; err is -errno if unread. */
struct file_recs {
	struct rec *recs;
	size_t n;
	int err;
};

/* The verbs wire: sysfs verbs' line, the peers; err -errno if unread. */
struct verbs {
	char line[128];
	int line_err;
	struct clanq_peer_stat *peers;
	int nr_peers;		/* or -errno of CLANQ_IOC_PEER_LIST */
};

struct nic {
	unsigned int index;
	uint32_t node, nr_nics;
	struct file_recs stats, objects;
	struct verbs verbs;
};

/* A region of a NIC and its owner, for the connections' peers. */
struct owner {
	uint32_t node, region;
	long long pid;
	const char *comm;
};

static const char *prog = "clanq-info";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-n NIC] [-s] [-h]\n"
		"List the clanq soft NICs (" CLANQ_DEV_PREFIX "N), their counters and, per\n"
		"context, its endpoints, regions, apertures and connections.\n"
		"\n"
		"  -n, --nic NIC   only " CLANQ_DEV_PREFIX "NIC\n"
		"  -s, --stats     counters only, no objects\n"
		"  -h, --help      this text\n"
		"\n"
		"Counters and objects are read from " DEBUGFS "/clanqN/:\n"
		"they need root and a mounted debugfs.\n"
		"Exit status: 0 all shown; 1 no such NIC, a NIC did not answer,\n"
		"or -s without readable counters; 2 usage error.\n",
		prog);
}

/* Split line into rec: tokens separated by blanks, the first the type. */
static void rec_parse(struct rec *r, char *line)
{
	char *save = NULL, *k, *v;

	memset(r, 0, sizeof(*r));
	r->line = line;
	line[strcspn(line, "\n")] = '\0';
	r->type = strtok_r(line, " ", &save);
	if (!r->type)
		r->type = "";
	while (r->n < MAX_FIELDS && (k = strtok_r(NULL, " ", &save)) &&
	       (v = strtok_r(NULL, " ", &save))) {
		r->key[r->n] = k;
		r->val[r->n++] = v;
	}
}

static const char *rec_str(const struct rec *r, const char *key)
{
	for (unsigned int i = 0; i < r->n; i++)
		if (!strcmp(r->key[i], key))
			return r->val[i];
	return NULL;
}

static unsigned long long rec_num(const struct rec *r, const char *key)
{
	const char *v = rec_str(r, key);

	return v ? strtoull(v, NULL, 10) : 0;
}

/* A stats line is "key value": read as a record with no type. */
static void stats_parse(struct rec *r, char *line)
{
	char *save = NULL, *k, *v;

	memset(r, 0, sizeof(*r));
	r->line = line;
	r->type = "";
	line[strcspn(line, "\n")] = '\0';
	k = strtok_r(line, " ", &save);
	v = k ? strtok_r(NULL, " ", &save) : NULL;
	if (v) {
		r->key[0] = k;
		r->val[0] = v;
		r->n = 1;
	}
}

static void recs_load(struct file_recs *fr, const char *path,
		      void (*parse)(struct rec *, char *))
{
	char *line = NULL;
	size_t cap = 0, room = 0;
	FILE *f = fopen(path, "r");

	memset(fr, 0, sizeof(*fr));
	if (!f) {
		fr->err = -errno;
		return;
	}
	while (getline(&line, &cap, f) >= 0) {
		if (fr->n == room) {
			struct rec *more;

			room = room ? 2 * room : 64;
			more = realloc(fr->recs, room * sizeof(*more));
			if (!more) {
				fr->err = -ENOMEM;
				break;
			}
			fr->recs = more;
		}
		parse(&fr->recs[fr->n++], line);
		line = NULL;	/* the record owns it */
		cap = 0;
	}
	if (ferror(f) && !fr->err)
		fr->err = -EIO;
	free(line);
	fclose(f);
}

static void recs_free(struct file_recs *fr)
{
	for (size_t i = 0; i < fr->n; i++)
		free(fr->recs[i].line);
	free(fr->recs);
}

/* A comm as debugfs escapes it (octal, as /proc/mounts), unescaped. */
static void unescape(char *dst, size_t size, const char *src)
{
	size_t n = 0;

	for (; src && *src && n + 1 < size; n++) {
		if (src[0] == '\\' && src[1] >= '0' && src[1] <= '3' &&
		    src[2] >= '0' && src[2] <= '7' && src[3] >= '0' && src[3] <= '7') {
			dst[n] = (char)((src[1] - '0') << 6 | (src[2] - '0') << 3 |
					(src[3] - '0'));
			src += 4;
		} else {
			dst[n] = *src++;
		}
	}
	dst[n] = '\0';
}

static int owner_cmp(const void *a, const void *b)
{
	const struct owner *x = a, *y = b;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->region < y->region ? -1 : x->region > y->region;
}

/* Every region of every NIC whose objects were read, by (node, id). */
static struct owner *owners_build(const struct nic *nics, unsigned int nr,
				  size_t *count)
{
	struct owner *o = NULL;
	size_t n = 0, room = 0;

	for (unsigned int i = 0; i < nr; i++) {
		const struct file_recs *fr = &nics[i].objects;
		long long pid = 0;
		const char *comm = NULL;

		for (size_t j = 0; j < fr->n; j++) {
			const struct rec *r = &fr->recs[j];

			if (!strcmp(r->type, "ctx")) {
				pid = (long long)rec_num(r, "pid");
				comm = rec_str(r, "comm");
				continue;
			}
			if (strcmp(r->type, "region"))
				continue;
			if (n == room) {
				struct owner *more;

				room = room ? 2 * room : 64;
				more = realloc(o, room * sizeof(*o));
				if (!more)
					break;
				o = more;
			}
			o[n++] = (struct owner){ nics[i].node,
						 (uint32_t)rec_num(r, "id"), pid, comm };
		}
	}
	if (n)
		qsort(o, n, sizeof(*o), owner_cmp);
	*count = n;
	return o;
}

static void show_stats(const struct nic *nic)
{
	const struct file_recs *fr = &nic->stats;
	unsigned int col = 0;

	printf("  counters:\n");
	for (size_t i = 0; i < fr->n; i++) {
		const struct rec *r = &fr->recs[i];

		if (!r->n)
			continue;
		printf("%s%-18s %12s", col ? "  " : "    ", r->key[0], r->val[0]);
		if (++col == 3) {
			putchar('\n');
			col = 0;
		}
	}
	if (col)
		putchar('\n');
}

static void show_ctx(const struct rec *r)
{
	char comm[64];

	unescape(comm, sizeof(comm), rec_str(r, "comm"));
	printf("    ctx pid %llu (%s): %llu driver entries, %llu endpoints, %llu regions, "
	       "%llu apertures, %llu tripwires, %llu evqs\n",
	       rec_num(r, "pid"), comm, rec_num(r, "entries"), rec_num(r, "eps"),
	       rec_num(r, "regions"), rec_num(r, "aps"), rec_num(r, "tws"),
	       rec_num(r, "evqs"));
}

static void show_ep(const struct rec *r)
{
	printf("      endpoint %-10llu%s oob %llu/%llu queued, sent %llu, delivered %llu, "
	       "dropped %llu; events %llu, tw fires %llu, rdma reqs %llu (errors %llu)\n",
	       rec_num(r, "id"), rec_num(r, "service") ? " listener" : "",
	       rec_num(r, "oob_queued"), rec_num(r, "oob_slots"),
	       rec_num(r, "oob_sent"), rec_num(r, "oob_delivered"),
	       rec_num(r, "oob_dropped"), rec_num(r, "events"),
	       rec_num(r, "tw_fires"), rec_num(r, "rdma_reqs"),
	       rec_num(r, "rdma_errors"));
}

static void show_region(const struct rec *r)
{
	const char *rights = rec_str(r, "rights");

	printf("      region %-12llu %llu bytes%s, ", rec_num(r, "id"),
	       rec_num(r, "len"), rec_num(r, "registered") ? " registered" : "");
	if (rec_num(r, "exported"))
		printf("exported %s, imported by %llu aperture(s)\n",
		       rights ? rights : "?", rec_num(r, "imports"));
	else
		printf("not exported\n");
}

static bool is_conn(const struct rec *r)
{
	return !strcmp(r->type, "ap") && rec_num(r, "sink") &&
	       rec_num(r, "notify_ep");
}

static void show_ap(const struct rec *r)
{
	const char *rights = rec_str(r, "rights");

	printf("      aperture %-10llu -> node %llu region %llu [%llu, +%llu) %s%s",
	       rec_num(r, "id"), rec_num(r, "node"), rec_num(r, "region"),
	       rec_num(r, "off"), rec_num(r, "len"), rights ? rights : "?",
	       rec_num(r, "pio") ? " pio" : "");
	if (rec_num(r, "sink"))
		printf(" sink");
	if (rec_num(r, "notify_ep"))
		printf(" notify=%llu", rec_num(r, "notify_ep"));
	printf("%s\n", rec_num(r, "revoked") ? " REVOKED" : "");
}

static bool node_here(const struct nic *nics, unsigned int nr, uint32_t node)
{
	for (unsigned int i = 0; i < nr; i++)
		if (nics[i].node == node)
			return true;
	return false;
}

static void show_conns(const struct nic *nic, const struct nic *nics,
		       unsigned int nr, const struct owner *owners, size_t nown)
{
	const struct file_recs *fr = &nic->objects;
	unsigned long long pid = 0;
	size_t count = 0;

	for (size_t i = 0; i < fr->n; i++)
		count += is_conn(&fr->recs[i]);
	printf("  connections: %zu\n", count);
	for (size_t i = 0; i < fr->n; i++) {
		const struct rec *r = &fr->recs[i];
		struct owner key, *o;
		char comm[64];

		if (!strcmp(r->type, "ctx"))
			pid = rec_num(r, "pid");
		if (!is_conn(r))
			continue;
		key.node = (uint32_t)rec_num(r, "node");
		key.region = (uint32_t)rec_num(r, "region");
		printf("    ctx pid %llu -> node %u region %u", pid, key.node,
		       key.region);
		o = nown ? bsearch(&key, owners, nown, sizeof(*owners), owner_cmp) : NULL;
		if (o) {
			unescape(comm, sizeof(comm), o->comm);
			printf(" (pid %lld, %s)", o->pid, comm);
		} else if (node_here(nics, nr, key.node)) {
			printf(" (no such region now)");
		} else {
			printf(" (peer on another machine)");
		}
		printf("%s\n", rec_num(r, "revoked") ? " REVOKED" : "");
	}
}

static void show_objects(const struct nic *nic, const struct nic *nics,
			 unsigned int nr, const struct owner *owners, size_t nown)
{
	const struct file_recs *fr = &nic->objects;
	size_t ctxs = 0;

	for (size_t i = 0; i < fr->n; i++)
		ctxs += !strcmp(fr->recs[i].type, "ctx");
	printf("  contexts: %zu\n", ctxs);
	for (size_t i = 0; i < fr->n; i++) {
		const struct rec *r = &fr->recs[i];

		if (!strcmp(r->type, "ctx"))
			show_ctx(r);
		else if (!strcmp(r->type, "ep"))
			show_ep(r);
		else if (!strcmp(r->type, "region"))
			show_region(r);
		else if (!strcmp(r->type, "ap"))
			show_ap(r);
	}
	show_conns(nic, nics, nr, owners, nown);
}

/* The NIC's verbs binding and peers, on its open context. */
static void verbs_load(struct verbs *v, const struct clanq_dev *dev,
		       unsigned int index)
{
	char path[128];
	size_t n;
	FILE *f;

	memset(v, 0, sizeof(*v));
	snprintf(path, sizeof(path), SYSFS "/clanq%u/verbs", index);
	f = fopen(path, "r");
	if (f) {
		n = fread(v->line, 1, sizeof(v->line) - 1, f);
		v->line[n] = '\0';
		v->line[strcspn(v->line, "\n")] = '\0';
		fclose(f);
	} else {
		v->line_err = -errno;
	}
	v->peers = calloc(CLANQ_PEERS_MAX, sizeof(*v->peers));
	if (!v->peers) {
		v->nr_peers = -ENOMEM;
		return;
	}
	v->nr_peers = clanq_peer_list(dev, v->peers, CLANQ_PEERS_MAX, NULL);
}

static void show_verbs(const struct verbs *v, unsigned int index)
{
	char dev[CLANQ_WIRE_DEV_MAX], from[32];
	unsigned int port;

	if (v->line_err)
		printf("  verbs: ? (%s/clanq%u/verbs: %s)", SYSFS, index,
		       strerror(-v->line_err));
	else if (!strcmp(v->line, "unbound"))
		printf("  verbs: unbound");
	else if (sscanf(v->line, "%63s %u %31s", dev, &port, from) == 3)
		printf("  verbs: %s port %u, from %s", dev, port,
		       strcmp(from, "-") ? from : "- (no connection yet)");
	else
		printf("  verbs: '%s'", v->line);
	if (v->nr_peers < 0) {
		printf(", peers: ? (%s)\n", strerror(-v->nr_peers));
		return;
	}
	if (!v->nr_peers) {
		printf(", no peers\n");
		return;
	}
	printf(", %d peer%s\n", v->nr_peers, v->nr_peers == 1 ? "" : "s");
	for (int i = 0; i < v->nr_peers; i++) {
		char line[256];

		clanq_peer_describe(&v->peers[i], line, sizeof(line));
		printf("    %s\n", line);
	}
}

/* Parse a NIC number: digits only, in range. */
static bool parse_nic(const char *s, unsigned int *nic)
{
	char *end;
	unsigned long v;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > 1u << 20)
		return false;
	*nic = (unsigned int)v;
	return true;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "stats", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct nic nics[64];
	unsigned int nr = 0, only = 0, i;
	bool one = false, stats_only = false, told = false;
	struct owner *owners;
	char path[128];
	size_t nown;
	int opt, err, status = 0;

	while ((opt = getopt_long(argc, argv, "n:sh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			if (!parse_nic(optarg, &only)) {
				fprintf(stderr, "%s: -n %s: not a NIC number\n", prog, optarg);
				return 2;
			}
			one = true;
			break;
		case 's':
			stats_only = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		usage(stderr);
		return 2;
	}

	/* every NIC: the others' regions name the peers of connections */
	for (nr = 0; nr < sizeof(nics) / sizeof(nics[0]); nr++) {
		struct clanq_dev dev;

		err = clanq_open_nic(&dev, nr);
		if (err == -ENOENT)
			break;
		if (err) {
			fprintf(stderr, "%s: %s%u: %s\n", prog, CLANQ_DEV_PREFIX, nr,
				strerror(-err));
			return 1;
		}
		memset(&nics[nr], 0, sizeof(nics[nr]));
		nics[nr].index = nr;
		nics[nr].node = dev.node;
		nics[nr].nr_nics = dev.nr_nics;
		verbs_load(&nics[nr].verbs, &dev, nr);
		/* closed first, so that we are not one of its contexts */
		clanq_close(&dev);
	}
	if (nr == 0) {
		fprintf(stderr, "%s: no %s* device: is clanq.ko loaded?\n", prog,
			CLANQ_DEV_PREFIX);
		return 1;
	}
	if (one && only >= nr) {
		fprintf(stderr, "%s: %s%u: no such NIC (this kernel has %u: %s0..%u)\n",
			prog, CLANQ_DEV_PREFIX, only, nr, CLANQ_DEV_PREFIX, nr - 1);
		return 1;
	}
	for (i = 0; i < nr; i++) {
		snprintf(path, sizeof(path), DEBUGFS "/clanq%u/stats", i);
		recs_load(&nics[i].stats, path, stats_parse);
		if (!stats_only) {
			snprintf(path, sizeof(path), DEBUGFS "/clanq%u/objects", i);
			recs_load(&nics[i].objects, path, rec_parse);
		}
	}
	owners = owners_build(nics, nr, &nown);

	printf("%-12s %6s %5s %8s\n", "device", "node", "abi", "nr_nics");
	for (i = 0; i < nr; i++)
		if (!one || i == only)
			printf("%s%-2u %6u %5u %8u\n", CLANQ_DEV_PREFIX, i, nics[i].node,
			       CLANQ_ABI_VERSION, nics[i].nr_nics);
	for (i = 0; i < nr; i++) {
		struct nic *nic = &nics[i];

		if (one && i != only)
			continue;
		printf("\n%s%u (node %u)\n", CLANQ_DEV_PREFIX, i, nic->node);
		if (nic->stats.err) {
			if (!told)
				fprintf(stderr, "%s: %s/clanq%u/stats: %s: counters and objects here need root and a mounted debugfs; clanqstat(8) shows the counters to every user\n",
					prog, DEBUGFS, i, strerror(-nic->stats.err));
			told = true;
			printf("  counters: not readable\n");
			if (stats_only)
				status = 1;
		} else {
			show_stats(nic);
		}
		if (stats_only)
			continue;
		show_verbs(&nic->verbs, i);
		if (nic->objects.err) {
			if (!told)
				fprintf(stderr, "%s: %s/clanq%u/objects: %s: objects need root and a mounted debugfs\n",
					prog, DEBUGFS, i, strerror(-nic->objects.err));
			told = true;
			printf("  objects: not readable\n");
		} else {
			show_objects(nic, nics, nr, owners, nown);
		}
	}
	free(owners);
	for (i = 0; i < nr; i++) {
		recs_free(&nics[i].stats);
		recs_free(&nics[i].objects);
		free(nics[i].verbs.peers);
	}
	return status;
}
