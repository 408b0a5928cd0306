// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for include/clanq/ring.h, the arithmetic of a connection's
 * message ring: record sizes, the PAD at the end of the ring, send credit
 * from an untrusted peer, and the check of a peer-written record header.
 *
 * Three kinds of test:
 *  - the pure functions against references written from the header's
 *    comments (128-bit arithmetic, so they cannot overflow the way the
 *    code might), exhaustively for small rings and at the edges of big
 *    ones, with totals near 0, near multiples of the ring and near 2^64;
 *  - hostile values, named one by one;
 *  - a model: a sender and a receiver over a ring held in test memory,
 *    each using only ring.h to decide what to do, stale views of the
 *    other's counters, random message sizes. Every message must come out
 *    once, in order, intact; nothing unconsumed is written over; a
 *    drained ring always takes the next message; and at random moments
 *    hostile tails, credits and headers are tried and refused.
 *
 * The totals are u64 and "never wrap in practice" (ring.h): a run that
 * starts near 2^64 stops short of it. What happens when they do wrap is
 * checked only as far as ring.h promises: it says no.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <clanq/ring.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

typedef unsigned __int128 u128;

/* ---------------------------------------------------------------------
 * Failure context: the loops below say which ring, total and case failed.
 */
static char ctx[240];

#define set_ctx(...)	snprintf(ctx, sizeof(ctx), __VA_ARGS__)

#define check(cond)							\
	do {								\
		if (!(cond))						\
			fail_msg("%s: %s", ctx, #cond);			\
	} while (0)

#define check_eq(a, b)							\
	do {								\
		unsigned long long a_ = (a), b_ = (b);			\
		if (a_ != b_)						\
			fail_msg("%s: %s == %s: %llu (%lld) != %llu (%lld)", \
				 ctx, #a, #b, a_, (long long)a_, b_,	\
				 (long long)b_);			\
	} while (0)

#define TIB	(1ull << 40)

/*
 * Ring capacities: the smallest, odd multiples of 8, the default (a page
 * less the header), a page, and big ones: the largest a handshake can
 * carry (its ring_cap is a __u32), and up to clanq_ring_cap_ok()'s limit.
 */
static const __u64 caps[] = {
	64, 72, 80, 88, 96, 104, 120, 128, 136, 200, 256, 264, 1016, 1024,
	4032, 4096, 4104,
	(1ull << 32) - 8, 3ull << 31, (1ull << 33) - 8,
	(1ull << 39) + 8, TIB - 64, TIB - 8, TIB,
};

/* The model keeps rings up to this size in memory, byte for byte. */
#define DENSE_MAX	8192u

/* ---------------------------------------------------------------------
 * References, from ring.h's comments alone.
 */

/* a record: 8-byte header, payload rounded up to 8, 8-byte trailer */
static u128 ref_rec(u128 len)
{
	return 8 + (len + 7) / 8 * 8 + 8;
}

/* the longest payload whose record is at most half the ring */
static u128 ref_max_len(__u64 cap)
{
	u128 half = cap / 2, lim;

	if (half < 16)
		return 0;
	lim = half - 16;
	return lim - lim % 8;
}

static bool ref_cap_ok(u128 cap)
{
	return cap >= 64 && cap % 8 == 0 && cap <= TIB;
}

/* credit: what we wrote less what the peer consumed, if that is 0..cap */
static long long ref_space(__u64 cap, __u64 tail, __u64 credit)
{
	if ((u128)credit > tail || (u128)tail > (u128)credit + cap)
		return -1;
	return (long long)((u128)cap + credit - tail);
}

/*
 * The record at head, given the peer's tail: whole, below the tail, not
 * past the end of the ring, known type, nothing reserved, a PAD exactly
 * to the end, a FIN empty, no longer than half the ring.
 */
static int ref_check(__u64 cap, __u64 head, __u64 tail, struct clanq_rec h,
		     u128 *size)
{
	u128 pos = head % cap, n;

	if (tail == head)
		return CLANQ_REC_NONE;
	if (tail < head || (u128)tail - head > cap || head % 8 || h.reserved)
		return CLANQ_REC_BAD;
	switch (h.type) {
	case CLANQ_REC_PAD:
		n = (u128)CLANQ_REC_HDR + h.len;
		if (pos + n != cap)
			return CLANQ_REC_BAD;
		break;
	case CLANQ_REC_FIN:
	case CLANQ_REC_DATA:
		if ((h.type == CLANQ_REC_FIN && h.len) || h.len > ref_max_len(cap))
			return CLANQ_REC_BAD;
		n = ref_rec(h.len);
		if (pos + n > cap)
			return CLANQ_REC_BAD;
		break;
	default:
		return CLANQ_REC_BAD;
	}
	if (n > (u128)tail - head)
		return CLANQ_REC_BAD;
	*size = n;
	return CLANQ_REC_OK;
}

static struct clanq_rec rec_hdr(__u16 type, __u32 len)
{
	struct clanq_rec h = { .len = len, .type = type, .reserved = 0 };

	return h;
}

/*
 * Totals whose position is pos: near 0, a few rings in, and as near 2^64
 * as leaves room (bytes) after them.
 */
static unsigned int totals_at(__u64 cap, __u64 pos, __u64 room, __u64 *t)
{
	__u64 top = ~0ull - room - cap;

	t[0] = pos;
	t[1] = 7 * cap + pos;
	t[2] = top / cap * cap + pos;
	return 3;
}

static __u64 mix64(__u64 z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* =====================================================================
 * The pure functions.
 */

/* Record sizes, the longest message, and which capacities are usable. */
static void test_record_sizes_and_capacities(void **state)
{
	static const __u64 odd_caps[] = {
		0, 1, 7, 8, 56, 60, 63, 65, 68, 71, 1020, TIB - 4, TIB + 8,
		TIB * 2, 1ull << 63, ~0ull - 7, ~0ull,
	};
	__u64 len, cap;
	unsigned int i;

	(void)state;
	set_ctx("rec_size");
	for (len = 0; len <= 70000; len++)
		check(clanq_rec_size(len) == ref_rec(len));
	for (len = 0xffffff00u; len <= 0x100000010ull; len++)
		check(clanq_rec_size(len) == ref_rec(len));
	/* every capacity up to 64 KiB and the big ones */
	for (cap = 0; cap <= 65536 + 64; cap++) {
		set_ctx("cap %llu", (unsigned long long)cap);
		check_eq(clanq_ring_cap_ok(cap), ref_cap_ok(cap));
		if (!ref_cap_ok(cap))
			continue;
		check(clanq_ring_max_msg(cap) == ref_max_len(cap));
		/* the longest record is at most half the ring, one more byte is not */
		check(clanq_rec_size(clanq_ring_max_msg(cap)) <= cap / 2);
		check(clanq_rec_size(clanq_ring_max_msg(cap) + 1) > cap / 2);
		check(clanq_ring_max_msg(cap) > 0);
	}
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		cap = caps[i];
		set_ctx("cap %llu", (unsigned long long)cap);
		check(clanq_ring_cap_ok(cap));
		check(clanq_ring_max_msg(cap) == ref_max_len(cap));
		check(clanq_rec_size(clanq_ring_max_msg(cap)) <= cap / 2);
		check(clanq_rec_size(clanq_ring_max_msg(cap) + 1) > cap / 2);
	}
	for (i = 0; i < ARRAY_SIZE(odd_caps); i++) {
		set_ctx("odd cap %llu", (unsigned long long)odd_caps[i]);
		check_eq(clanq_ring_cap_ok(odd_caps[i]), ref_cap_ok(odd_caps[i]));
		check(!clanq_ring_cap_ok(odd_caps[i]) || odd_caps[i] == TIB);
	}
	/* below a usable ring, nothing fits: 0, not an underflow */
	for (cap = 0; cap < 48; cap++) {
		set_ctx("tiny cap %llu", (unsigned long long)cap);
		check_eq(clanq_ring_max_msg(cap), 0);
	}
}

static void check_cost(__u64 cap, __u64 tail, __u64 rec)
{
	__u64 pos = tail % cap, pad = 12345, cost;

	cost = clanq_ring_cost(cap, tail, rec, &pad);
	if (pos + rec <= cap) {
		/* it fits before the end: no PAD */
		check_eq(pad, 0);
	} else {
		/* a PAD to the end, at least its own header, then the record at 0 */
		check_eq(pad, cap - pos);
		check(pad >= CLANQ_REC_HDR && pad % 8 == 0);
		check((tail + pad) % cap == 0);
	}
	check_eq(cost, pad + rec);
	/* a PAD and the record always fit in an empty ring */
	check(cost <= cap);
	/* and a drained ring (credit == tail) has room for them */
	check(clanq_ring_space(cap, tail, tail) >= (__s64)cost);
}

/*
 * Where a record goes: for every position of small rings and every
 * record a ring takes, and at the edges of big ones.
 */
static void test_cost_pad_and_fit_at_every_position(void **state)
{
	__u64 cap, pos, rec, maxrec, t[3];
	unsigned long checked = 0;
	unsigned int i, j, k, n;

	(void)state;
	for (cap = 64; cap <= 2048; cap += 8) {
		maxrec = clanq_rec_size(clanq_ring_max_msg(cap));
		for (pos = 0; pos < cap; pos += 8) {
			n = totals_at(cap, pos, 0, t);
			for (j = 0; j < n; j++) {
				set_ctx("cap %llu tail %llu", (unsigned long long)cap,
					(unsigned long long)t[j]);
				for (rec = 16; rec <= maxrec; rec += 8, checked++)
					check_cost(cap, t[j], rec);
			}
		}
	}
	assert_true(checked > 5000000);
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		__u64 poss[12], recs[12];

		cap = caps[i];
		maxrec = clanq_rec_size(clanq_ring_max_msg(cap));
		poss[0] = 0; poss[1] = 8; poss[2] = cap / 2 & ~7ull;
		poss[3] = (cap / 2 & ~7ull) + 8; poss[4] = (cap / 2 & ~7ull) - 8;
		poss[5] = cap - 8; poss[6] = cap - 16; poss[7] = cap - maxrec;
		poss[8] = cap - maxrec + 8; poss[9] = cap - maxrec - 8;
		poss[10] = (mix64(cap) % cap) & ~7ull; poss[11] = cap - 24;
		for (k = 0; k < ARRAY_SIZE(poss); k++) {
			pos = poss[k];
			recs[0] = 16; recs[1] = 24; recs[2] = maxrec;
			recs[3] = maxrec - 8; recs[4] = cap - pos;
			recs[5] = cap - pos + 8; recs[6] = cap - pos - 8;
			recs[7] = (mix64(pos) % maxrec + 16) & ~7ull;
			recs[8] = 32; recs[9] = 4096; recs[10] = cap - pos + 16;
			recs[11] = maxrec / 2 & ~7ull;
			n = totals_at(cap, pos, 0, t);
			for (j = 0; j < n; j++)
				for (unsigned int r = 0; r < ARRAY_SIZE(recs); r++) {
					if (recs[r] < 16 || recs[r] > maxrec)
						continue;
					set_ctx("cap %llu tail %llu rec %llu",
						(unsigned long long)cap,
						(unsigned long long)t[j],
						(unsigned long long)recs[r]);
					check_cost(cap, t[j], recs[r]);
				}
		}
	}
}

/* Send credit against the reference, credits around every edge. */
static void test_space_from_untrusted_credit(void **state)
{
	__u64 cap, tail, t[3], d;
	unsigned int i, j, n;
	long long want;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		cap = caps[i];
		__u64 poss[] = { 0, 8, cap / 2, cap - 8 };

		for (unsigned int p = 0; p < ARRAY_SIZE(poss); p++) {
			n = totals_at(cap, poss[p], 64, t);
			for (j = 0; j < n; j++) {
				__u64 credits[128];
				unsigned int m = 0, k;

				tail = t[j];
				/* around tail, around tail - cap, and far off */
				for (d = 0; d <= 24; d++) {
					credits[m++] = tail + d;
					credits[m++] = tail - d;
					credits[m++] = tail - cap + d;
					credits[m++] = tail - cap - d;
				}
				credits[m++] = 0;
				credits[m++] = ~0ull;
				credits[m++] = tail / 2;
				credits[m++] = tail - cap / 2;
				credits[m++] = tail + cap;
				credits[m++] = tail - 2 * cap;
				credits[m++] = 1ull << 63;
				for (k = 0; k < m; k++) {
					set_ctx("cap %llu tail %llu credit %llu",
						(unsigned long long)cap,
						(unsigned long long)tail,
						(unsigned long long)credits[k]);
					want = ref_space(cap, tail, credits[k]);
					check_eq(clanq_ring_space(cap, tail, credits[k]), want);
				}
			}
		}
	}
	/* small rings: every credit within two rings of the tail */
	for (cap = 64; cap <= 512; cap += 8) {
		n = totals_at(cap, cap - 8, 4 * cap, t);
		for (j = 0; j < n; j++)
			for (d = 0; d <= 4 * cap; d++) {
				__u64 credit = t[j] + 2 * cap - d;

				set_ctx("cap %llu tail %llu credit %llu",
					(unsigned long long)cap,
					(unsigned long long)t[j],
					(unsigned long long)credit);
				check_eq(clanq_ring_space(cap, t[j], credit),
					 ref_space(cap, t[j], credit));
			}
	}
}

/* The named cases: a credit ahead of the tail or more than a ring behind. */
static void test_space_refuses_hostile_credit(void **state)
{
	unsigned int i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		__u64 cap = caps[i], t[3];
		unsigned int j, n = totals_at(cap, 8, 64, t);

		for (j = 0; j < n; j++) {
			__u64 tail = t[j] + cap;	/* at least a ring written */

			set_ctx("cap %llu tail %llu", (unsigned long long)cap,
				(unsigned long long)tail);
			/* ahead of what we wrote */
			check_eq(clanq_ring_space(cap, tail, tail + 1), -1);
			check_eq(clanq_ring_space(cap, tail, tail + 8), -1);
			check_eq(clanq_ring_space(cap, tail, ~0ull), -1);
			/* further behind than the ring is long */
			check_eq(clanq_ring_space(cap, tail, tail - cap - 1), -1);
			check_eq(clanq_ring_space(cap, tail, tail - cap - 8), -1);
			if (tail > cap)
				check_eq(clanq_ring_space(cap, tail, 0), -1);
			/* the edges that are fine */
			check_eq(clanq_ring_space(cap, tail, tail - cap), 0);
			check_eq(clanq_ring_space(cap, tail, tail), cap);
			check_eq(clanq_ring_space(cap, tail, tail - 8), cap - 8);
		}
	}
}

/* Every header, tail and head of small rings against the reference. */
static void check_against_ref(__u64 cap, __u64 head, __u64 tail,
			      struct clanq_rec h)
{
	u128 rsize = 0;
	__u64 size = 0xdeadbeef;
	int want = ref_check(cap, head, tail, h, &rsize);
	int got = clanq_ring_check(cap, head, tail, h, &size);

	if (got != want || (want == CLANQ_REC_OK && size != rsize))
		fail_msg("cap %llu head %llu tail %llu rec {len %u type %u reserved %u}: "
			 "verdict %d size %llu, want %d size %llu",
			 (unsigned long long)cap, (unsigned long long)head,
			 (unsigned long long)tail, h.len, h.type, h.reserved,
			 got, (unsigned long long)size, want,
			 (unsigned long long)rsize);
}

static void test_check_against_reference(void **state)
{
	static const __u64 small[] = { 64, 72, 80, 136 };
	static const __u16 types[] = {
		0, CLANQ_REC_DATA, CLANQ_REC_PAD, CLANQ_REC_FIN, 4, 0x8001, 0xffff,
	};
	unsigned long checked = 0;
	unsigned int c, j, n, ty;

	(void)state;
	for (c = 0; c < ARRAY_SIZE(small); c++) {
		__u64 cap = small[c], pos, t[3];
		__u32 lens[256];
		unsigned int nl = 0;
		__u64 avails[64];
		unsigned int na = 0, a, l;

		for (l = 0; l <= cap / 2 + 16; l++)
			lens[nl++] = l;
		lens[nl++] = cap - 8;
		lens[nl++] = cap;
		lens[nl++] = 0x7fffffff;
		lens[nl++] = 0x80000000u;
		lens[nl++] = 0xfffffff0u;
		lens[nl++] = 0xfffffff8u;
		lens[nl++] = 0xffffffffu;
		for (a = 0; a <= cap + 16; a += 8)
			avails[na++] = a;
		avails[na++] = 1;
		avails[na++] = 7;
		avails[na++] = 9;
		avails[na++] = cap - 1;
		avails[na++] = cap + 1;
		avails[na++] = 2 * cap;
		for (pos = 0; pos < cap; pos++) {
			n = totals_at(cap, pos, 4 * cap, t);
			for (j = 0; j < n; j++)
				for (a = 0; a < na; a++)
					for (ty = 0; ty < ARRAY_SIZE(types); ty++)
						for (l = 0; l < nl; l++, checked++)
							check_against_ref(cap, t[j],
									  t[j] + avails[a],
									  rec_hdr(types[ty], lens[l]));
			/* reserved bits, and a tail behind the head */
			for (j = 0; j < n; j++)
				for (ty = 0; ty < ARRAY_SIZE(types); ty++)
					for (l = 0; l < nl; l += 3) {
						struct clanq_rec h = rec_hdr(types[ty], lens[l]);

						h.reserved = 1u << (l % 16);
						check_against_ref(cap, t[j], t[j] + cap, h);
						h.reserved = 0;
						if (t[j] >= 8)
							check_against_ref(cap, t[j], t[j] - 8, h);
						check_against_ref(cap, t[j], t[j] - 1, h);
					}
		}
	}
	assert_true(checked > 5000000);
}

/* The same at the edges of every capacity, big ones included. */
static void test_check_edges_of_every_capacity(void **state)
{
	unsigned int i, j, n, k, ty;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		__u64 cap = caps[i], max = clanq_ring_max_msg(cap), t[3];
		__u64 maxrec = clanq_rec_size(max);
		__u64 poss[] = { 0, 8, cap / 2 & ~7ull, cap - maxrec, cap - maxrec + 8,
				 cap - 24, cap - 16, cap - 8, 4, cap - 1 };

		for (k = 0; k < ARRAY_SIZE(poss); k++) {
			__u64 room = cap - poss[k];
			__u64 ls[] = { 0, 1, 7, 8, 9, max - 1, max, max + 1, max + 8,
				       room - 8, room - 16, room - 15, room - 17,
				       room - 24, room, 0xffffffffull,
				       0xfffffff8ull };
			__u64 avs[] = { 0, 8, 16, 24, room - 8, room, room + 8,
					maxrec - 8, maxrec, maxrec + 8, cap - 8,
					cap, cap + 8, 1ull << 41 };

			n = totals_at(cap, poss[k], 1ull << 42, t);
			for (j = 0; j < n; j++)
				for (unsigned int a = 0; a < ARRAY_SIZE(avs); a++)
					for (ty = 0; ty <= 4; ty++)
						for (unsigned int l = 0; l < ARRAY_SIZE(ls); l++) {
							if (ls[l] > 0xffffffffull)
								continue;
							check_against_ref(cap, t[j], t[j] + avs[a],
									  rec_hdr(ty, (__u32)ls[l]));
						}
		}
	}
}

/* Hostile record headers and tails, named one by one. */
static void bad(__u64 cap, __u64 head, __u64 tail, struct clanq_rec h,
		const char *what)
{
	__u64 size = 0xdeadbeef;

	set_ctx("cap %llu head %llu tail %llu rec {len %u type %u reserved %u}: %s",
		(unsigned long long)cap, (unsigned long long)head,
		(unsigned long long)tail, h.len, h.type, h.reserved, what);
	check_eq(clanq_ring_check(cap, head, tail, h, &size), CLANQ_REC_BAD);
	check_eq(size, 0xdeadbeef);
}

static void good(__u64 cap, __u64 head, __u64 tail, struct clanq_rec h,
		 __u64 want, const char *what)
{
	__u64 size = 0;

	set_ctx("cap %llu head %llu tail %llu rec {len %u type %u reserved %u}: %s",
		(unsigned long long)cap, (unsigned long long)head,
		(unsigned long long)tail, h.len, h.type, h.reserved, what);
	check_eq(clanq_ring_check(cap, head, tail, h, &size), CLANQ_REC_OK);
	check_eq(size, want);
}

static void test_check_refuses_hostile_headers(void **state)
{
	static const __u16 bad_types[] = { 0, 4, 5, 0x100, 0x8000, 0x8001, 0xffff };
	unsigned int i, j, k, n, b;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		__u64 cap = caps[i], max = clanq_ring_max_msg(cap), t[3];
		__u32 max32 = max > 0xfffffff8u ? 0xfffffff8u : (__u32)max;
		__u64 maxrec = clanq_rec_size(max32);
		__u64 poss[] = { 0, 8, cap / 2 & ~7ull, cap - maxrec, cap - 24,
				 cap - 16, cap - 8 };

		for (k = 0; k < ARRAY_SIZE(poss); k++) {
			__u64 pos = poss[k], room = cap - pos;

			n = totals_at(cap, pos, 4 * cap, t);
			for (j = 0; j < n; j++) {
				__u64 head = t[j], tail = head + cap, rec;
				struct clanq_rec h;

				/* nothing there yet: whatever the header says */
				h = rec_hdr(0xffff, 0xffffffff);
				h.reserved = 0xffff;
				set_ctx("cap %llu head %llu: tail == head",
					(unsigned long long)cap, (unsigned long long)head);
				check_eq(clanq_ring_check(cap, head, head, h, &rec),
					 CLANQ_REC_NONE);

				/*
				 * the right PAD here (if its len fits the
				 * header's 32 bits: see the note at the model),
				 * and one that is off
				 */
				h = rec_hdr(CLANQ_REC_PAD, (__u32)(room - 8));
				if (room - 8 <= 0xffffffffull) {
					good(cap, head, tail, h, room, "PAD to the end");
					good(cap, head, head + room, h, room,
					     "PAD up to the tail");
					if (room > 8)
						bad(cap, head, head + room - 8, h,
						    "PAD past the tail");
				}
				h.reserved = 1;
				bad(cap, head, tail, h, "PAD with reserved set");
				{
					__u64 wrong[] = { room - 16, room, room - 7, room - 9,
							  room + 8, 0, 0xffffffffull,
							  room - 8 + (1ull << 32) };

					for (b = 0; b < ARRAY_SIZE(wrong); b++)
						if ((__u32)wrong[b] != room - 8)
							bad(cap, head, tail,
							    rec_hdr(CLANQ_REC_PAD, (__u32)wrong[b]),
							    "PAD with a wrong len");
				}

				/* types nobody writes */
				for (b = 0; b < ARRAY_SIZE(bad_types); b++)
					bad(cap, head, tail, rec_hdr(bad_types[b], 0),
					    "unknown type");

				/* reserved bits, each one */
				for (b = 0; b < 16; b++) {
					h = rec_hdr(CLANQ_REC_DATA, 0);
					h.reserved = (__u16)(1u << b);
					bad(cap, head, tail, h, "reserved set");
				}

				/* longer than half the ring */
				if (max < 0xffffffffull) {
					bad(cap, head, tail, rec_hdr(CLANQ_REC_DATA, (__u32)max + 1),
					    "one byte too long");
					bad(cap, head, tail, rec_hdr(CLANQ_REC_DATA, 0xffffffff),
					    "len 2^32-1");
				}
				if (max + 8 <= 0xffffffffull)
					bad(cap, head, tail, rec_hdr(CLANQ_REC_DATA, (__u32)max + 8),
					    "a word too long");

				/* a FIN says nothing */
				bad(cap, head, tail, rec_hdr(CLANQ_REC_FIN, 1), "FIN with a byte");
				bad(cap, head, tail, rec_hdr(CLANQ_REC_FIN, 8), "FIN with a word");
				bad(cap, head, tail, rec_hdr(CLANQ_REC_FIN, max32), "FIN, longest");

				/* records that fit here, exactly up to the tail */
				if (room >= 16) {
					good(cap, head, head + 16, rec_hdr(CLANQ_REC_FIN, 0), 16,
					     "FIN");
					good(cap, head, head + 16, rec_hdr(CLANQ_REC_DATA, 0), 16,
					     "empty message");
					bad(cap, head, head + 8, rec_hdr(CLANQ_REC_DATA, 0),
					    "empty message past the tail");
				} else {
					/* 8 bytes left: only a PAD goes here */
					bad(cap, head, tail, rec_hdr(CLANQ_REC_FIN, 0),
					    "FIN crosses the end");
					bad(cap, head, tail, rec_hdr(CLANQ_REC_DATA, 0),
					    "empty message crosses the end");
				}
				if (room >= 24) {
					good(cap, head, head + 24, rec_hdr(CLANQ_REC_DATA, 1), 24,
					     "1 byte");
					bad(cap, head, head + 16, rec_hdr(CLANQ_REC_DATA, 1),
					    "1 byte past the tail");
				}
				if (room >= maxrec) {
					good(cap, head, head + maxrec, rec_hdr(CLANQ_REC_DATA, max32),
					     maxrec, "longest message");
					bad(cap, head, head + maxrec - 8,
					    rec_hdr(CLANQ_REC_DATA, max32),
					    "longest message past the tail");
				}
				/* a record that would cross the end of the ring */
				if (room >= 16 && room + 8 <= maxrec) {
					h = rec_hdr(CLANQ_REC_DATA, (__u32)(room - 8));
					bad(cap, head, tail, h, "crosses the end");
					h.len = (__u32)(room - 15);
					bad(cap, head, tail, h, "crosses the end by a byte");
					h.len = (__u32)(room - 16);
					good(cap, head, tail, h, room, "ends at the end");
				}

				/* the head is the reader's own: unaligned is a bug, refused */
				for (b = 1; b < 8; b++)
					bad(cap, head + b, tail, rec_hdr(CLANQ_REC_DATA, 0),
					    "unaligned head");

				/*
				 * a tail behind the head, or more than a ring
				 * ahead, under a header that is right here
				 */
				h = room >= 16 ? rec_hdr(CLANQ_REC_DATA, 0) :
						 rec_hdr(CLANQ_REC_PAD, 0);
				bad(cap, head, head - 8, h, "tail 8 behind");
				bad(cap, head, head - 1, h, "tail 1 behind");
				bad(cap, head, head + cap + 1, h, "tail a ring and a byte ahead");
				bad(cap, head, head + cap + 8, h, "tail a ring and a word ahead");
				bad(cap, head, head + 2 * cap, h, "tail two rings ahead");
				bad(cap, head, ~0ull, h, "tail at 2^64-1");
				if (head > 0)
					bad(cap, head, 0, h, "tail 0");
				good(cap, head, head + cap, h, room >= 16 ? 16 : 8,
				     "tail a ring ahead");
			}
		}
	}
}

/*
 * Out of scope, but checked as far as ring.h promises ("says no rather
 * than overflow"): totals that wrapped past 2^64 are refused, not read.
 */
static void test_wrapped_totals_are_refused(void **state)
{
	unsigned int i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		__u64 cap = caps[i], head = ~0ull - 15, size;

		set_ctx("cap %llu", (unsigned long long)cap);
		/* the writer's tail went past 2^64 */
		check_eq(clanq_ring_check(cap, head & ~7ull, 8,
					  rec_hdr(CLANQ_REC_DATA, 0), &size),
			 CLANQ_REC_BAD);
		/* our tail went past 2^64, the peer's credit did not */
		check_eq(clanq_ring_space(cap, 8, ~0ull - 15), -1);
	}
}

/* Credit goes back every quarter ring, not before. */
static void test_credit_due_every_quarter_ring(void **state)
{
	unsigned int i, j, n;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		__u64 cap = caps[i], q = cap / 4, t[3];

		n = totals_at(cap, 8, 2 * cap, t);
		for (j = 0; j < n; j++) {
			__u64 r = t[j];

			set_ctx("cap %llu returned %llu", (unsigned long long)cap,
				(unsigned long long)r);
			check(!clanq_ring_credit_due(cap, r, r));
			check(!clanq_ring_credit_due(cap, r + 8, r));
			check(!clanq_ring_credit_due(cap, r + q - 1, r));
			check(clanq_ring_credit_due(cap, r + q, r));
			check(clanq_ring_credit_due(cap, r + q + 1, r));
			check(clanq_ring_credit_due(cap, r + cap, r));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_sizes_and_capacities),
		cmocka_unit_test(test_cost_pad_and_fit_at_every_position),
		cmocka_unit_test(test_space_from_untrusted_credit),
		cmocka_unit_test(test_space_refuses_hostile_credit),
		cmocka_unit_test(test_check_against_reference),
		cmocka_unit_test(test_check_edges_of_every_capacity),
		cmocka_unit_test(test_check_refuses_hostile_headers),
		cmocka_unit_test(test_wrapped_totals_are_refused),
		cmocka_unit_test(test_credit_due_every_quarter_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
