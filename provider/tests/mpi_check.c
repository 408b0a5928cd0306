// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * An MPI job with every byte checked, for Open MPI over libfabric over
 * clanq (tests/vm/mpi.sh runs it with --mca pml cm --mca mtl ofi and the
 * provider forced): a ping-pong between ranks 0 and 1 from 8 B to 1 MiB
 * with its round trip timed, allreduces whose sums are known in
 * advance, and a storm of messages of many sizes from every rank to
 * every other at once, received in whatever order they come.
 *
 * Each message's bytes are a function of (source, destination, sequence
 * number, byte index), so a byte delivered to the wrong buffer, out of
 * place or from a stale message does not pass. The first wrong thing
 * found is printed with where it was, and the job aborts (exit 1).
 *
 *   mpi_check [-n ROUNDS] [-s STORM_MESSAGES_PER_PEER]
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mpi_check: rank %d: ", rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

static void check_mpi(int rc, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (rc == MPI_SUCCESS)
		return;
	MPI_Error_string(rc, msg, &len);
	die("%s: %.*s", what, len, msg);
}

/* the byte i of message seq from src to dst: never the same for two of them */
static uint8_t pattern(int src, int dst, uint32_t seq, size_t i)
{
	uint64_t x = ((uint64_t)src << 48) ^ ((uint64_t)dst << 40) ^
		     ((uint64_t)seq << 20) ^ (i * 0x9e3779b97f4a7c15ull);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	return (uint8_t)(x >> 32);
}

static void fill(uint8_t *buf, size_t len, int src, int dst, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(src, dst, seq, i);
}

static void verify(const uint8_t *buf, size_t len, int src, int dst, uint32_t seq,
		   const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(src, dst, seq, i))
			die("%s: message %" PRIu32 " from rank %d, %zu B: byte %zu is 0x%02x, not 0x%02x",
			    what, seq, src, len, i, buf[i], pattern(src, dst, seq, i));
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Ranks 0 and 1 bounce each size back and forth; the others wait. */
static void pingpong(int rounds)
{
	static const size_t sizes[] = { 8, 64, 1024, 4096, 65536, 1 << 20 };
	const size_t max = 1 << 20;
	uint8_t *out = malloc(max), *in = malloc(max);
	uint32_t seq = 0;

	if (!out || !in)
		die("pingpong: out of memory");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		int n = len >= 65536 ? rounds / 10 + 1 : rounds;
		double t0 = 0;

		MPI_Barrier(MPI_COMM_WORLD);
		if (rank > 1)
			continue;
		for (int r = 0; r < n; r++, seq++) {
			MPI_Status st;
			int count;

			if (r == 1)	/* the first round trip sets things up */
				t0 = now_us();
			if (rank == 0) {
				fill(out, len, 0, 1, seq);
				check_mpi(MPI_Send(out, (int)len, MPI_BYTE, 1, 7, MPI_COMM_WORLD), "MPI_Send");
				memset(in, 0, len);
				check_mpi(MPI_Recv(in, (int)max, MPI_BYTE, 1, 8, MPI_COMM_WORLD, &st), "MPI_Recv");
				MPI_Get_count(&st, MPI_BYTE, &count);
				if ((size_t)count != len)
					die("pingpong: %zu B sent, %d B came back", len, count);
				verify(in, len, 1, 0, seq, "pingpong");
			} else {
				memset(in, 0, len);
				check_mpi(MPI_Recv(in, (int)max, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st), "MPI_Recv");
				MPI_Get_count(&st, MPI_BYTE, &count);
				if ((size_t)count != len)
					die("pingpong: %zu B sent, %d B came", len, count);
				verify(in, len, 0, 1, seq, "pingpong");
				fill(out, len, 1, 0, seq);
				check_mpi(MPI_Send(out, (int)len, MPI_BYTE, 0, 8, MPI_COMM_WORLD), "MPI_Send");
			}
		}
		if (rank == 0 && n > 1) {
			double us = (now_us() - t0) / (n - 1);

			printf("mpi_check: pingpong %7zu B x %5d: %10.1f us round trip, %8.1f MB/s\n",
			       len, n, us, 2.0 * len / us);
			fflush(stdout);
		}
	}
	free(out);
	free(in);
}

/*
 * Sums of known values: every rank's element i is (rank + 1) * (i + 1)
 * (64-bit: exact), so element i of the sum is (i + 1) * n(n+1)/2; and a
 * MAX of the rank, and a one-element sum of doubles.
 */
static void allreduce(int rounds)
{
	static const int lens[] = { 1, 7, 1000, 1 << 17 };
	const int64_t tri = (int64_t)nranks * (nranks + 1) / 2;

	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		int len = lens[k], n = len > 1000 ? 3 : rounds / 10 + 1;
		int64_t *v = malloc(len * sizeof(*v)), *sum = malloc(len * sizeof(*sum));

		if (!v || !sum)
			die("allreduce: out of memory");
		for (int r = 0; r < n; r++) {
			for (int i = 0; i < len; i++) {
				v[i] = (int64_t)(rank + 1) * (i + 1 + r);
				sum[i] = -1;
			}
			check_mpi(MPI_Allreduce(v, sum, len, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
				  "MPI_Allreduce");
			for (int i = 0; i < len; i++)
				if (sum[i] != (int64_t)(i + 1 + r) * tri)
					die("allreduce of %d: element %d is %" PRId64 ", not %" PRId64,
					    len, i, sum[i], (int64_t)(i + 1 + r) * tri);
		}
		free(v);
		free(sum);
		if (rank == 0)
			printf("mpi_check: allreduce of %d int64 x %d: every sum right\n", len, n);
	}

	int top = -1;
	double d = rank + 0.5, dsum = 0;

	check_mpi(MPI_Allreduce(&rank, &top, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
	check_mpi(MPI_Allreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
	if (top != nranks - 1 || dsum != nranks * nranks / 2.0)
		die("allreduce: max %d (want %d), sum %g (want %g)", top, nranks - 1, dsum,
		    nranks * nranks / 2.0);
	if (rank == 0)
		printf("mpi_check: allreduce MAX and double SUM right\n");
	fflush(stdout);
}

/* message seq of a storm: its size, 1 B .. 64 KiB, mostly small */
static size_t storm_len(int src, int dst, uint32_t seq)
{
	uint8_t a = pattern(src, dst, seq, 1u << 30), b = pattern(src, dst, seq, 1u << 31);

	switch (a & 3) {
	case 0:
		return 1 + b;			/* 1 .. 256 */
	case 1:
		return 1 + ((size_t)b << 4);	/* .. 4 KiB */
	case 2:
		return 1 + ((size_t)b << 8);	/* .. 64 KiB */
	default:
		return 8;
	}
}

/*
 * Every rank sends per_peer messages to every other rank at once (all
 * nonblocking, tags the sequence number), and receives from anyone in
 * whatever order they come: the source and tag say which message it
 * must be, and so which bytes.
 */
static void storm(int per_peer)
{
	const int peers = nranks - 1, total = peers * per_peer;
	const size_t max = 65536 + 256;
	MPI_Request *reqs = calloc(total, sizeof(*reqs));
	uint8_t **bufs = calloc(total, sizeof(*bufs));
	uint8_t *in = malloc(max);
	unsigned char *seen = calloc((size_t)nranks * per_peer, 1);
	uint64_t bytes = 0;
	double t0 = now_us();
	int k = 0;

	if (!reqs || !bufs || !in || !seen)
		die("storm: out of memory");
	for (int s = 0; s < per_peer; s++) {
		for (int p = 1; p < nranks; p++) {
			int dst = (rank + p) % nranks;
			size_t len = storm_len(rank, dst, s);

			bufs[k] = malloc(len);
			if (!bufs[k])
				die("storm: out of memory");
			fill(bufs[k], len, rank, dst, s);
			check_mpi(MPI_Isend(bufs[k], (int)len, MPI_BYTE, dst, s, MPI_COMM_WORLD, &reqs[k]),
				  "MPI_Isend");
			k++;
		}
	}
	for (int i = 0; i < total; i++) {
		MPI_Status st;
		int count;

		check_mpi(MPI_Recv(in, (int)max, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st),
			  "MPI_Recv");
		MPI_Get_count(&st, MPI_BYTE, &count);
		if (st.MPI_SOURCE < 0 || st.MPI_SOURCE >= nranks || st.MPI_SOURCE == rank ||
		    st.MPI_TAG < 0 || st.MPI_TAG >= per_peer)
			die("storm: a message from rank %d with tag %d", st.MPI_SOURCE, st.MPI_TAG);
		if (seen[(size_t)st.MPI_SOURCE * per_peer + st.MPI_TAG]++)
			die("storm: message %d from rank %d came twice", st.MPI_TAG, st.MPI_SOURCE);
		if ((size_t)count != storm_len(st.MPI_SOURCE, rank, st.MPI_TAG))
			die("storm: message %d from rank %d is %d B, not %zu", st.MPI_TAG, st.MPI_SOURCE,
			    count, storm_len(st.MPI_SOURCE, rank, st.MPI_TAG));
		verify(in, count, st.MPI_SOURCE, rank, st.MPI_TAG, "storm");
		bytes += count;
	}
	check_mpi(MPI_Waitall(total, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
	for (int i = 0; i < total; i++)
		free(bufs[i]);

	uint64_t all = 0;
	double us = now_us() - t0;

	check_mpi(MPI_Reduce(&bytes, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
	if (rank == 0)
		printf("mpi_check: storm of %d messages from each rank to each other, %" PRIu64
		       " B: every byte right, %.1f ms\n", per_peer, all, us / 1e3);
	fflush(stdout);
	free(reqs);
	free(bufs);
	free(in);
	free(seen);
}

int main(int argc, char **argv)
{
	int rounds = 200, per_peer = 500, opt, len;
	char name[MPI_MAX_LIBRARY_VERSION_STRING];

	check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	while ((opt = getopt(argc, argv, "n:s:")) != -1) {
		switch (opt) {
		case 'n':
			rounds = atoi(optarg);
			break;
		case 's':
			per_peer = atoi(optarg);
			break;
		default:
			die("usage: mpi_check [-n ROUNDS] [-s STORM_MESSAGES_PER_PEER]");
		}
	}
	if (rounds < 2 || per_peer < 1 || nranks < 2)
		die("needs 2 or more ranks, -n 2 or more, -s 1 or more");
	if (rank == 0) {
		MPI_Get_library_version(name, &len);
		printf("mpi_check: %d ranks, %.*s\n", nranks, (int)strcspn(name, "\n"), name);
		fflush(stdout);
	}
	pingpong(rounds);
	allreduce(rounds);
	storm(per_peer);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: all checks passed\n");
	MPI_Finalize();
	return 0;
}
