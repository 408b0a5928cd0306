/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Latency statistics shared by the benchmarks (header-only): the
 * perftest-style columns t_min, t_typical (median), t_avg, t_99%,
 * t_99.9%, t_max.
 */
#ifndef CLANQ_BENCH_STATS_H
#define CLANQ_BENCH_STATS_H

#include <stdlib.h>

struct lat {
	double min, med, avg, p99, p999, max;
};

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v (n > 0 samples) in place. */
static inline struct lat lat_stats(double *v, unsigned int n)
{
	struct lat l = { 0 };
	double sum = 0;

	qsort(v, n, sizeof(*v), cmp_double);
	for (unsigned int i = 0; i < n; i++)
		sum += v[i];
	l.min = v[0];
	l.med = v[n / 2];
	l.avg = sum / n;
	l.p99 = v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
	l.p999 = v[(n * 999ull) / 1000 < n ? (n * 999ull) / 1000 : n - 1];
	l.max = v[n - 1];
	return l;
}

#endif /* CLANQ_BENCH_STATS_H */
