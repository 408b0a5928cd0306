// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * queue_bench: how close the clanq queue (include/clanq/queue.h) comes to
 * what two cores can do at all, measured in one run on one machine.
 *
 *   latency	ping-pong through two queues (A->B, B->A), one item in
 *		flight, put/get API, 64-byte slots; against the same
 *		ping-pong on two bare cache lines, each written by one side.
 *		One-way = round trip / 2.
 *
 *   throughput	one-way stream through a 1024 x 64-byte queue with the
 *		batch API; against a bare stream of 64-byte lines (see
 *		tput_line() for why that is the limit).
 *
 * Side A runs in the main thread, side B in a second thread; they are
 * pinned to the first two CPUs this process may use (normally 0 and 1),
 * or left to the scheduler if that is not possible.
 *
 * Output follows perftest: '#' lines describe, tab-separated rows give
 * numbers, and two rows give the ratios queue/limit.
 *
 *	queue_bench [-n ITER] [-q]
 *	-n ITER	round trips per latency test (default 1000000); each
 *		throughput run moves 16 * ITER messages
 *	-q	quick smoke test: small counts, well under a second
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/queue.h>

#define LINE		64u
#define SAMPLE_RT	1000u	/* round trips per timed latency sample */
#define STREAM_FACTOR	16u	/* throughput messages per -n iteration */
#define LAT_SLOTS	64u
#define LAT_SLOT_SIZE	64u
#define TPUT_SLOTS	1024u
#define TPUT_SLOT_SIZE	64u	/* one cache line per message */
#define TPUT_BATCH	64u
#define STOP		UINT64_MAX

/*
 * One step of a wait (the caller zeroes *spins when the wait begins):
 * pause, and only once a wait has gone on for thousands of pauses, yield
 * on every step. That keeps system calls out of the measured path while
 * both sides run, yet lets a run finish if the two threads end up
 * sharing a CPU.
 */
#define SPINS_BEFORE_YIELD	16384u

static inline void spin(unsigned int *spins)
{
	if (++*spins < SPINS_BEFORE_YIELD)
		clanq_cpu_relax();
	else
		sched_yield();
}

/* Each flag or counter alone on the CLANQ_Q_ALIGN pair of lines. */
struct line {
	_Alignas(CLANQ_Q_ALIGN) uint64_t v;
};

static int cpu_a = -1, cpu_b = -1;
static int pinned;
static int failed;		/* atomic: a data check failed */

/* Reports the first failure only: a broken queue fails on every message. */
static void fail(const char *what, uint64_t want, uint64_t got)
{
	if (__atomic_exchange_n(&failed, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr, "queue_bench: %s: want %" PRIu64 ", got %" PRIu64
		"\n", what, want, got);
}

static void *xalloc(size_t size)
{
	void *p = aligned_alloc(CLANQ_Q_ALIGN,
				(size + CLANQ_Q_ALIGN - 1) &
				~(size_t)(CLANQ_Q_ALIGN - 1));

	if (!p) {
		perror("queue_bench: aligned_alloc");
		exit(1);
	}
	/* touch every page now, not inside a timed loop */
	memset(p, 0, size);
	return p;
}

/* ---------------------------------------------------------------------
 * Two sides
 */

/* A thread on cpu_b if pinning works, else wherever the scheduler likes. */
static pthread_t start_b_thread(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	cpu_set_t set;
	int err = -1;

	if (pinned) {
		pthread_attr_init(&attr);
		CPU_ZERO(&set);
		CPU_SET(cpu_b, &set);
		if (!pthread_attr_setaffinity_np(&attr, sizeof(set), &set))
			err = pthread_create(&t, &attr, fn, arg);
		pthread_attr_destroy(&attr);
		if (err)
			pinned = 0;	/* fall back; the header says so */
	}
	if (err && (err = pthread_create(&t, NULL, fn, arg))) {
		fprintf(stderr, "queue_bench: pthread_create: %s\n",
			strerror(err));
		exit(1);
	}
	return t;
}

static void *probe(void *arg)
{
	return arg;
}

static void pick_cpus(void)
{
	cpu_set_t set;
	int i;

	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	for (i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &set))
			continue;
		if (cpu_a < 0) {
			cpu_a = i;
		} else {
			cpu_b = i;
			break;
		}
	}
	if (cpu_b < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu_a, &set);
	pinned = !pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	/* side B is pinned at creation: find out now whether that works */
	if (pinned) {
		pthread_t t = start_b_thread(probe, NULL);

		pthread_join(t, NULL);
	}
}

struct pair {
	void *(*side_b)(void *);
	void *arg;
	int ready;		/* atomic: side B is running */
};

static void *side_b_start(void *arg)
{
	struct pair *p = arg;

	__atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
	return p->side_b(p->arg);
}

/* Start side B and wait until it runs; side A is the caller. */
static pthread_t start_b(struct pair *p)
{
	pthread_t t = start_b_thread(side_b_start, p);
	unsigned int spins = 0;

	while (!__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE))
		spin(&spins);
	return t;
}

/* ---------------------------------------------------------------------
 * Statistics over latency samples (ns per round trip)
 */
struct stats {
	double min, median, p99, mean;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static struct stats stats_of(double *v, size_t n)
{
	struct stats s = { 0 };
	size_t i, k;

	qsort(v, n, sizeof(*v), cmp_double);
	for (i = 0; i < n; i++)
		s.mean += v[i];
	s.mean /= n;
	s.min = v[0];
	s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	k = (n * 99 + 99) / 100;	/* ceil(0.99 n), 1-based */
	s.p99 = v[k - 1];
	return s;
}

/* ---------------------------------------------------------------------
 * Latency: the queue
 *
 * One segment holds both queues. Each side attaches its own views, in
 * its own stack frame, as the driver and the application do.
 */
struct lat_queue {
	char *seg;
	size_t seg_size;
	struct clanq_queue_off ab, ba;
	uint64_t round_trips;
	double *samples;
};

static void lat_attach(struct lat_queue *lq, struct clanq_queue *q,
		       const struct clanq_queue_off *qo)
{
	if (clanq_q_init(q, lq->seg, lq->seg_size, qo)) {
		fprintf(stderr, "queue_bench: clanq_q_init failed\n");
		exit(1);
	}
}

static void *lat_queue_b(void *arg)
{
	struct lat_queue *lq = arg;
	struct clanq_queue rx, tx;
	uint64_t msg[LAT_SLOT_SIZE / 8];
	unsigned int spins;

	lat_attach(lq, &rx, &lq->ab);
	lat_attach(lq, &tx, &lq->ba);
	for (;;) {
		spins = 0;
		while (!clanq_q_get(&rx, msg))
			spin(&spins);
		if (msg[0] == STOP)
			break;
		/* one item in flight: the reply always fits */
		spins = 0;
		while (!clanq_q_put(&tx, msg))
			spin(&spins);
	}
	return NULL;
}

static void lat_queue_rt(struct clanq_queue *tx, struct clanq_queue *rx,
			 uint64_t seq)
{
	uint64_t msg[LAT_SLOT_SIZE / 8] = { seq };
	unsigned int spins;

	spins = 0;
	while (!clanq_q_put(tx, msg))
		spin(&spins);
	spins = 0;
	while (!clanq_q_get(rx, msg))
		spin(&spins);
	if (msg[0] != seq)
		fail("queue ping-pong echo", seq, msg[0]);
}

static struct stats lat_queue(uint64_t round_trips, double *samples)
{
	struct lat_queue lq = { .round_trips = round_trips };
	struct pair p = { .side_b = lat_queue_b, .arg = &lq };
	struct clanq_queue tx, rx;
	uint64_t msg[LAT_SLOT_SIZE / 8] = { STOP };
	uint64_t seq = 0, s, i, n = round_trips / SAMPLE_RT;
	uint32_t end;
	pthread_t t;

	end = clanq_q_layout(&lq.ab, 0, LAT_SLOTS, LAT_SLOT_SIZE);
	end = clanq_q_layout(&lq.ba, end, LAT_SLOTS, LAT_SLOT_SIZE);
	lq.seg_size = end;
	lq.seg = xalloc(end);
	lat_attach(&lq, &tx, &lq.ab);
	lat_attach(&lq, &rx, &lq.ba);
	t = start_b(&p);

	for (i = 0; i < SAMPLE_RT * 10; i++)		/* warm up */
		lat_queue_rt(&tx, &rx, seq++);
	for (s = 0; s < n; s++) {
		uint64_t t0 = clanq_now_ns();

		for (i = 0; i < SAMPLE_RT; i++)
			lat_queue_rt(&tx, &rx, seq++);
		samples[s] = (double)(clanq_now_ns() - t0) / SAMPLE_RT;
	}
	while (!clanq_q_put(&tx, msg))
		clanq_cpu_relax();
	pthread_join(t, NULL);
	free(lq.seg);
	return stats_of(samples, n);
}

/* ---------------------------------------------------------------------
 * Latency: the limit
 *
 * Two lines, each written by one side only: A stores n into its line,
 * B waits for n there and stores n into its own, A waits for that. Each
 * one-way trip is a single line moving between the cores, which no
 * shared-memory message can beat. The lines are CLANQ_Q_ALIGN apart so
 * the adjacent-line prefetcher does not pair them.
 */
struct lat_line {
	struct line a, b;
};

static void *lat_line_b(void *arg)
{
	struct lat_line *ll = arg;
	uint64_t last = 0, v;
	unsigned int spins;

	for (;;) {
		spins = 0;
		while ((v = __atomic_load_n(&ll->a.v, __ATOMIC_ACQUIRE)) ==
		       last)
			spin(&spins);
		if (v == STOP)
			break;
		__atomic_store_n(&ll->b.v, v, __ATOMIC_RELEASE);
		last = v;
	}
	return NULL;
}

static void lat_line_rt(struct lat_line *ll, uint64_t seq)
{
	unsigned int spins = 0;
	uint64_t v;

	__atomic_store_n(&ll->a.v, seq, __ATOMIC_RELEASE);
	while ((v = __atomic_load_n(&ll->b.v, __ATOMIC_ACQUIRE)) != seq) {
		if (v > seq) {
			fail("line ping-pong echo", seq, v);
			return;
		}
		spin(&spins);
	}
}

static struct stats lat_line(uint64_t round_trips, double *samples)
{
	struct lat_line *ll = xalloc(sizeof(*ll));
	struct pair p = { .side_b = lat_line_b, .arg = ll };
	uint64_t seq = 1, s, i, n = round_trips / SAMPLE_RT;
	pthread_t t;

	t = start_b(&p);
	for (i = 0; i < SAMPLE_RT * 10; i++)
		lat_line_rt(ll, seq++);
	for (s = 0; s < n; s++) {
		uint64_t t0 = clanq_now_ns();

		for (i = 0; i < SAMPLE_RT; i++)
			lat_line_rt(ll, seq++);
		samples[s] = (double)(clanq_now_ns() - t0) / SAMPLE_RT;
	}
	__atomic_store_n(&ll->a.v, STOP, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	free(ll);
	return stats_of(samples, n);
}

/* ---------------------------------------------------------------------
 * Throughput: the queue
 *
 * A writes whole 64-byte messages in place (batch API: every free slot
 * it can see, at most TPUT_BATCH, one publish), B reads every word of
 * each (one release per batch). Timed from A's first write to B's last
 * read.
 */
struct tput_queue {
	char *seg;
	size_t seg_size;
	struct clanq_queue_off qo;
	uint64_t msgs;
	uint64_t t_end;		/* B: when the last message was read */
	uint64_t sink;
};

static void msg_write(uint64_t *w, uint64_t seq)
{
	unsigned int i;

	w[0] = seq;
	for (i = 1; i < LINE / 8; i++)
		w[i] = seq + i;
}

static uint64_t msg_read(const uint64_t *w, uint64_t seq)
{
	uint64_t sum = 0;
	unsigned int i;

	if (w[0] != seq)
		fail("stream sequence", seq, w[0]);
	for (i = 0; i < LINE / 8; i++)
		sum += w[i];
	return sum;
}

static void *tput_queue_b(void *arg)
{
	struct tput_queue *tq = arg;
	struct clanq_queue q;
	uint64_t seq = 0, sum = 0;
	unsigned int spins;
	uint32_t n, i;

	if (clanq_q_init(&q, tq->seg, tq->seg_size, &tq->qo))
		exit(1);
	while (seq < tq->msgs) {
		spins = 0;
		while (!(n = clanq_q_cons_avail(&q)))
			spin(&spins);
		if (n > TPUT_BATCH)
			n = TPUT_BATCH;
		for (i = 0; i < n; i++)
			sum += msg_read(clanq_q_slot(&q, q.own + i), seq + i);
		clanq_q_cons_release(&q, n);
		seq += n;
	}
	tq->t_end = clanq_now_ns();
	tq->sink = sum;
	return NULL;
}

/* Messages per second of one run. */
static double tput_queue(uint64_t msgs)
{
	struct tput_queue tq = { .msgs = msgs };
	struct pair p = { .side_b = tput_queue_b, .arg = &tq };
	struct clanq_queue q;
	uint64_t seq = 0;
	unsigned int spins;
	uint32_t n, i;
	pthread_t t;
	uint64_t t0;

	tq.seg_size = clanq_q_layout(&tq.qo, 0, TPUT_SLOTS, TPUT_SLOT_SIZE);
	tq.seg = xalloc(tq.seg_size);
	if (clanq_q_init(&q, tq.seg, tq.seg_size, &tq.qo))
		exit(1);
	t = start_b(&p);

	t0 = clanq_now_ns();
	while (seq < msgs) {
		spins = 0;
		while (!(n = clanq_q_prod_space(&q)))
			spin(&spins);
		if (n > TPUT_BATCH)
			n = TPUT_BATCH;
		if (n > msgs - seq)
			n = msgs - seq;
		for (i = 0; i < n; i++)
			msg_write(clanq_q_prod_slot_at(&q, i), seq + i);
		clanq_q_prod_publish(&q, n);
		seq += n;
	}
	pthread_join(t, NULL);
	free(tq.seg);
	return msgs / ((tq.t_end - t0) * 1e-9);
}

/* ---------------------------------------------------------------------
 * Throughput: the limit
 *
 * Any one-way channel through shared memory must, per 64-byte message,
 * have the writer take the line back from the reader's cache and write
 * it, and the reader pull it over and read it. Here A writes a block of
 * TPUT_SLOTS lines (as many as the queue has slots, so the same cache
 * footprint), then B reads all of them, then A writes again, and so on;
 * the two flags that hand the block over cost two transfers per 1024
 * lines. Each side times only its own phase, so the phases measure the
 * two per-line costs without any queue bookkeeping or waiting. A
 * perfectly pipelined channel would overlap them, so the best possible
 * stream moves one line per max(write cost, read cost): that is the
 * limit reported. It is optimistic (no contention between the phases),
 * which is what a limit should be.
 */
struct tput_line {
	uint64_t *lines;
	struct line ready;	/* A: block number written */
	struct line ack;	/* B: block number read */
	uint64_t blocks;
	double write_ns;	/* A */
	double read_ns;		/* B */
	uint64_t sink;
};

static void *tput_line_b(void *arg)
{
	struct tput_line *tl = arg;
	uint64_t blk, sum = 0;
	unsigned int spins;
	uint32_t i;

	for (blk = 1; blk <= tl->blocks; blk++) {
		uint64_t t0;

		spins = 0;
		while (__atomic_load_n(&tl->ready.v, __ATOMIC_ACQUIRE) != blk)
			spin(&spins);
		t0 = clanq_now_ns();
		for (i = 0; i < TPUT_SLOTS; i++)
			sum += msg_read(tl->lines + i * (LINE / 8),
					blk * TPUT_SLOTS + i);
		tl->read_ns += clanq_now_ns() - t0;
		__atomic_store_n(&tl->ack.v, blk, __ATOMIC_RELEASE);
	}
	tl->sink = sum;
	return NULL;
}

/* Fills *write_rate and *read_rate (lines per second); returns the limit. */
static double tput_line(uint64_t msgs, double *write_rate, double *read_rate)
{
	struct tput_line *tl = xalloc(sizeof(*tl));
	struct pair p = { .side_b = tput_line_b, .arg = tl };
	uint64_t blk, lines;
	unsigned int spins;
	uint32_t i;
	pthread_t t;

	tl->blocks = msgs / TPUT_SLOTS;
	lines = tl->blocks * TPUT_SLOTS;
	tl->lines = xalloc(TPUT_SLOTS * LINE);
	t = start_b(&p);

	for (blk = 1; blk <= tl->blocks; blk++) {
		uint64_t t0;

		spins = 0;
		while (__atomic_load_n(&tl->ack.v, __ATOMIC_ACQUIRE) !=
		       blk - 1)
			spin(&spins);
		t0 = clanq_now_ns();
		for (i = 0; i < TPUT_SLOTS; i++)
			msg_write(tl->lines + i * (LINE / 8),
				  blk * TPUT_SLOTS + i);
		tl->write_ns += clanq_now_ns() - t0;
		__atomic_store_n(&tl->ready.v, blk, __ATOMIC_RELEASE);
	}
	pthread_join(t, NULL);
	*write_rate = lines / (tl->write_ns * 1e-9);
	*read_rate = lines / (tl->read_ns * 1e-9);
	free(tl->lines);
	free(tl);
	return *write_rate < *read_rate ? *write_rate : *read_rate;
}

/* ---------------------------------------------------------------------
 * Main
 */
static void usage(FILE *f)
{
	fprintf(f, "usage: queue_bench [-n ITER] [-q]\n"
		"  -n ITER  round trips per latency test (default 1000000);\n"
		"           each throughput run moves %u * ITER messages\n"
		"  -q       quick smoke test (small counts)\n", STREAM_FACTOR);
}

static void print_lat(const char *name, unsigned int bytes, size_t n,
		      struct stats s)
{
	/* samples are per round trip; report one way */
	printf("%s\t%u\t%zu\t%.1f\t%.1f\t%.1f\t%.1f\n", name, bytes, n,
	       s.min / 2, s.median / 2, s.p99 / 2, s.mean / 2);
}

/* Median of n rates; *best gets the highest. */
static double median_rate(double *v, size_t n, double *best)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*best = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	uint64_t iters = 1000000, msgs;
	unsigned int runs = 5, r;
	int quick = 0, have_n = 0, c;
	double *samples, *qrate, *lrate, wr = 0, rr = 0, wr_best = 0;
	double rr_best = 0, q_best, q_med, l_best, l_med;
	struct stats lq, ll;
	size_t n;
	char *end;

	while ((c = getopt(argc, argv, "n:qh")) != -1) {
		switch (c) {
		case 'n':
			errno = 0;
			iters = strtoull(optarg, &end, 0);
			if (errno || *end || *optarg == '-' ||
			    iters < SAMPLE_RT) {
				fprintf(stderr, "queue_bench: -n %s: want an "
					"integer >= %u\n", optarg, SAMPLE_RT);
				return 2;
			}
			have_n = 1;
			break;
		case 'q':
			quick = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (quick) {
		runs = 2;
		if (!have_n)
			iters = 20000;
	}
	iters -= iters % SAMPLE_RT;
	n = iters / SAMPLE_RT;
	msgs = iters * STREAM_FACTOR;
	msgs -= msgs % TPUT_SLOTS;

	samples = calloc(n, sizeof(*samples));
	qrate = calloc(runs, sizeof(*qrate));
	lrate = calloc(runs, sizeof(*lrate));
	if (!samples || !qrate || !lrate) {
		perror("queue_bench: calloc");
		return 1;
	}
	pick_cpus();

	printf("# clanq queue_bench%s\n", quick ? " (quick)" : "");
	if (pinned)
		printf("# side A on cpu %d, side B on cpu %d\n", cpu_a, cpu_b);
	else
		printf("# not pinned (fewer than two usable CPUs, or "
		       "affinity refused)\n");

	lq = lat_queue(iters, samples);
	ll = lat_line(iters, samples);

	for (r = 0; r < runs; r++) {
		qrate[r] = tput_queue(msgs);
		lrate[r] = tput_line(msgs, &wr, &rr);
		if (wr > wr_best)
			wr_best = wr;
		if (rr > rr_best)
			rr_best = rr;
	}
	q_med = median_rate(qrate, runs, &q_best);
	l_med = median_rate(lrate, runs, &l_best);

	printf("# latency, one way = round trip / 2; %zu samples, each the "
	       "mean of %u round trips\n", n, SAMPLE_RT);
	printf("# lat_queue: clanq_q_put/get through two %u x %u queues\n",
	       LAT_SLOTS, LAT_SLOT_SIZE);
	printf("# lat_line:  two cache lines, each written by one side\n");
	printf("#test\tbytes\tsamples\tmin[ns]\tmedian[ns]\tp99[ns]\t"
	       "mean[ns]\n");
	print_lat("lat_queue", LAT_SLOT_SIZE, n, lq);
	print_lat("lat_line", 8, n, ll);

	printf("# throughput, one way; %" PRIu64 " messages per run, %u "
	       "runs\n", msgs, runs);
	printf("# tput_queue: %u x %u queue, batch API (<= %u per "
	       "publish/release)\n", TPUT_SLOTS, TPUT_SLOT_SIZE, TPUT_BATCH);
	printf("# tput_line:  limit = 1 / max(line write, line read), "
	       "phases timed apart\n");
	printf("#test\tbytes\truns\tbest[Mmsg/s]\tmedian[Mmsg/s]\t"
	       "best[MB/s]\n");
	printf("tput_queue\t%u\t%u\t%.2f\t%.2f\t%.0f\n", TPUT_SLOT_SIZE, runs,
	       q_best / 1e6, q_med / 1e6, q_best * TPUT_SLOT_SIZE / 1e6);
	printf("tput_line\t%u\t%u\t%.2f\t%.2f\t%.0f\n", LINE, runs,
	       l_best / 1e6, l_med / 1e6, l_best * LINE / 1e6);
	printf("tput_line_write\t%u\t%u\t%.2f\t-\t%.0f\n", LINE, runs,
	       wr_best / 1e6, wr_best * LINE / 1e6);
	printf("tput_line_read\t%u\t%u\t%.2f\t-\t%.0f\n", LINE, runs,
	       rr_best / 1e6, rr_best * LINE / 1e6);

	printf("# latency_ratio = lat_queue / lat_line, medians; lower is "
	       "better, below 1 is noise\n");
	printf("# throughput_ratio = tput_queue / tput_line, bests; higher is "
	       "better, above 1 is noise\n");
	printf("latency_ratio\t%.2f\n", lq.median / ll.median);
	printf("throughput_ratio\t%.2f\n", q_best / l_best);

	free(samples);
	free(qrate);
	free(lrate);
	if (__atomic_load_n(&failed, __ATOMIC_RELAXED)) {
		fprintf(stderr, "queue_bench: data check failed\n");
		return 1;
	}
	return 0;
}
