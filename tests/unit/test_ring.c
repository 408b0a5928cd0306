// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for lib/ring.h, the arithmetic of a connection's
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

#include "../../lib/ring.h"

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

#define TIB	CLANQ_RING_CAP_MAX	/* the largest ring */

/*
 * Ring capacities: the smallest, odd multiples of 8, the default (a page
 * less the header), a page, and big ones: the largest a handshake can
 * carry (its ring_cap is a uint32_t), and up to clanq_ring_cap_ok()'s limit.
 */
static const uint64_t caps[] = {
	64, 72, 80, 88, 96, 104, 120, 128, 136, 200, 256, 264, 1016, 1024,
	4032, 4096, 4104,
	(1ull << 20) + 8, (1ull << 29) - 8, (1ull << 29) + 8,
	TIB - 64, TIB - 8, TIB,
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
static u128 ref_max_len(uint64_t cap)
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
static long long ref_space(uint64_t cap, uint64_t tail, uint64_t credit)
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
static int ref_check(uint64_t cap, uint64_t head, uint64_t tail, struct clanq_rec h,
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
		/* a FIN is empty, a message is not (it would read as the end) */
		if ((h.type == CLANQ_REC_FIN) != (h.len == 0) ||
		    h.len > ref_max_len(cap))
			return CLANQ_REC_BAD;
		n = ref_rec(h.len);
		if (pos + n > cap)
			return CLANQ_REC_BAD;
		break;
	case CLANQ_REC_LARGE:
	case CLANQ_REC_FRAG:
		/* a LARGE is its message's length (8 bytes), a FRAG not empty */
		if (h.len == 0 || h.len > ref_max_len(cap) ||
		    (h.type == CLANQ_REC_LARGE && h.len != 8))
			return CLANQ_REC_BAD;
		n = ref_rec(h.len);
		if (pos + n > cap)
			return CLANQ_REC_BAD;
		break;
	case CLANQ_REC_REGION:
	case CLANQ_REC_BULK:
		/* a descriptor, a window's piece: exactly its struct */
		if (h.len != (h.type == CLANQ_REC_REGION ? 48 : 16) ||
		    h.len > ref_max_len(cap))
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

static struct clanq_rec rec_hdr(uint16_t type, uint32_t len)
{
	struct clanq_rec h = { .len = len, .type = type, .reserved = 0 };

	return h;
}

/*
 * Totals whose position is pos: near 0, a few rings in, and as near 2^64
 * as leaves room (bytes) after them.
 */
static unsigned int totals_at(uint64_t cap, uint64_t pos, uint64_t room, uint64_t *t)
{
	uint64_t top = ~0ull - room - cap;

	t[0] = pos;
	t[1] = 7 * cap + pos;
	t[2] = top / cap * cap + pos;
	return 3;
}

static uint64_t mix64(uint64_t z)
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
	static const uint64_t odd_caps[] = {
		0, 1, 7, 8, 56, 60, 63, 65, 68, 71, 1020, TIB - 4, TIB + 8,
		TIB * 2, 1ull << 63, ~0ull - 7, ~0ull,
	};
	uint64_t len, cap;
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

static void check_cost(uint64_t cap, uint64_t tail, uint64_t rec)
{
	uint64_t pos = tail % cap, pad = 12345, cost;

	cost = clanq_ring_cost_at(cap, tail % cap, rec, &pad);
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
	check(clanq_ring_space(cap, tail, tail) >= (int64_t)cost);
}

/*
 * Where a record goes: for every position of small rings and every
 * record a ring takes, and at the edges of big ones.
 */
static void test_cost_pad_and_fit_at_every_position(void **state)
{
	uint64_t cap, pos, rec, maxrec, t[3];
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
		uint64_t poss[12], recs[12];

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
	uint64_t cap, tail, t[3], d;
	unsigned int i, j, n;
	long long want;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		cap = caps[i];
		uint64_t poss[] = { 0, 8, cap / 2, cap - 8 };

		for (unsigned int p = 0; p < ARRAY_SIZE(poss); p++) {
			n = totals_at(cap, poss[p], 64, t);
			for (j = 0; j < n; j++) {
				uint64_t credits[128];
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
				uint64_t credit = t[j] + 2 * cap - d;

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
		uint64_t cap = caps[i], t[3];
		unsigned int j, n = totals_at(cap, 8, 64, t);

		for (j = 0; j < n; j++) {
			uint64_t tail = t[j] + cap;	/* at least a ring written */

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
static void check_against_ref(uint64_t cap, uint64_t head, uint64_t tail,
			      struct clanq_rec h)
{
	u128 rsize = 0;
	uint64_t size = 0xdeadbeef;
	int want = ref_check(cap, head, tail, h, &rsize);
	int got = clanq_ring_check_at(cap, head, head % cap, tail, h, &size);

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
	static const uint64_t small[] = { 64, 72, 80, 136 };
	static const uint16_t types[] = {
		0, CLANQ_REC_DATA, CLANQ_REC_PAD, CLANQ_REC_FIN, CLANQ_REC_LARGE,
		CLANQ_REC_FRAG, CLANQ_REC_REGION, CLANQ_REC_BULK, 8, 0x8001, 0xffff,
	};
	unsigned long checked = 0;
	unsigned int c, j, n, ty;

	(void)state;
	for (c = 0; c < ARRAY_SIZE(small); c++) {
		uint64_t cap = small[c], pos, t[3];
		uint32_t lens[256];
		unsigned int nl = 0;
		uint64_t avails[64];
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
		uint64_t cap = caps[i], max = clanq_ring_max_msg(cap), t[3];
		uint64_t maxrec = clanq_rec_size(max);
		uint64_t poss[] = { 0, 8, cap / 2 & ~7ull, cap - maxrec, cap - maxrec + 8,
				 cap - 24, cap - 16, cap - 8, 4, cap - 1 };

		for (k = 0; k < ARRAY_SIZE(poss); k++) {
			uint64_t room = cap - poss[k];
			uint64_t ls[] = { 0, 1, 7, 8, 9, max - 1, max, max + 1, max + 8,
				       room - 8, room - 16, room - 15, room - 17,
				       room - 24, room, 0xffffffffull,
				       0xfffffff8ull };
			uint64_t avs[] = { 0, 8, 16, 24, room - 8, room, room + 8,
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
									  rec_hdr(ty, (uint32_t)ls[l]));
						}
		}
	}
}

/* Hostile record headers and tails, named one by one. */
static void bad(uint64_t cap, uint64_t head, uint64_t tail, struct clanq_rec h,
		const char *what)
{
	uint64_t size = 0xdeadbeef;

	set_ctx("cap %llu head %llu tail %llu rec {len %u type %u reserved %u}: %s",
		(unsigned long long)cap, (unsigned long long)head,
		(unsigned long long)tail, h.len, h.type, h.reserved, what);
	check_eq(clanq_ring_check_at(cap, head, head % cap, tail, h, &size), CLANQ_REC_BAD);
	check_eq(size, 0xdeadbeef);
}

static void good(uint64_t cap, uint64_t head, uint64_t tail, struct clanq_rec h,
		 uint64_t want, const char *what)
{
	uint64_t size = 0;

	set_ctx("cap %llu head %llu tail %llu rec {len %u type %u reserved %u}: %s",
		(unsigned long long)cap, (unsigned long long)head,
		(unsigned long long)tail, h.len, h.type, h.reserved, what);
	check_eq(clanq_ring_check_at(cap, head, head % cap, tail, h, &size), CLANQ_REC_OK);
	check_eq(size, want);
}

static void test_check_refuses_hostile_headers(void **state)
{
	static const uint16_t bad_types[] = { 0, 4, 5, 0x100, 0x8000, 0x8001, 0xffff };
	unsigned int i, j, k, n, b;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		uint64_t cap = caps[i], max = clanq_ring_max_msg(cap), t[3];
		uint32_t max32 = max > 0xfffffff8u ? 0xfffffff8u : (uint32_t)max;
		uint64_t maxrec = clanq_rec_size(max32);
		uint64_t poss[] = { 0, 8, cap / 2 & ~7ull, cap - maxrec, cap - 24,
				 cap - 16, cap - 8 };

		for (k = 0; k < ARRAY_SIZE(poss); k++) {
			uint64_t pos = poss[k], room = cap - pos;

			n = totals_at(cap, pos, 4 * cap, t);
			for (j = 0; j < n; j++) {
				uint64_t head = t[j], tail = head + cap, rec;
				struct clanq_rec h;

				/* nothing there yet: whatever the header says */
				h = rec_hdr(0xffff, 0xffffffff);
				h.reserved = 0xffff;
				set_ctx("cap %llu head %llu: tail == head",
					(unsigned long long)cap, (unsigned long long)head);
				check_eq(clanq_ring_check_at(cap, head, head % cap, head, h, &rec),
					 CLANQ_REC_NONE);

				/*
				 * the right PAD here (if its len fits the
				 * header's 32 bits: see the note at the model),
				 * and one that is off
				 */
				h = rec_hdr(CLANQ_REC_PAD, (uint32_t)(room - 8));
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
					uint64_t wrong[] = { room - 16, room, room - 7, room - 9,
							  room + 8, 0, 0xffffffffull,
							  room - 8 + (1ull << 32) };

					for (b = 0; b < ARRAY_SIZE(wrong); b++)
						if ((uint32_t)wrong[b] != room - 8)
							bad(cap, head, tail,
							    rec_hdr(CLANQ_REC_PAD, (uint32_t)wrong[b]),
							    "PAD with a wrong len");
				}

				/* types nobody writes */
				for (b = 0; b < ARRAY_SIZE(bad_types); b++)
					bad(cap, head, tail, rec_hdr(bad_types[b], 0),
					    "unknown type");

				/* reserved bits, each one */
				for (b = 0; b < 16; b++) {
					h = rec_hdr(CLANQ_REC_DATA, 0);
					h.reserved = (uint16_t)(1u << b);
					bad(cap, head, tail, h, "reserved set");
				}

				/* longer than half the ring */
				if (max < 0xffffffffull) {
					bad(cap, head, tail, rec_hdr(CLANQ_REC_DATA, (uint32_t)max + 1),
					    "one byte too long");
					bad(cap, head, tail, rec_hdr(CLANQ_REC_DATA, 0xffffffff),
					    "len 2^32-1");
				}
				if (max + 8 <= 0xffffffffull)
					bad(cap, head, tail, rec_hdr(CLANQ_REC_DATA, (uint32_t)max + 8),
					    "a word too long");

				/* a FIN says nothing */
				bad(cap, head, tail, rec_hdr(CLANQ_REC_FIN, 1), "FIN with a byte");
				bad(cap, head, tail, rec_hdr(CLANQ_REC_FIN, 8), "FIN with a word");
				bad(cap, head, tail, rec_hdr(CLANQ_REC_FIN, max32), "FIN, longest");

				/* records that fit here, exactly up to the tail */
				if (room >= 16) {
					good(cap, head, head + 16, rec_hdr(CLANQ_REC_FIN, 0), 16,
					     "FIN");
					bad(cap, head, head + 16, rec_hdr(CLANQ_REC_DATA, 0),
					    "empty message: it would read as the end");
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
					h = rec_hdr(CLANQ_REC_DATA, (uint32_t)(room - 8));
					bad(cap, head, tail, h, "crosses the end");
					h.len = (uint32_t)(room - 15);
					bad(cap, head, tail, h, "crosses the end by a byte");
					h.len = (uint32_t)(room - 16);
					if (h.len)	/* an empty message is refused */
						good(cap, head, tail, h, room, "ends at the end");
					else
						bad(cap, head, tail, h, "empty, ends at the end");
				}

				/* the head is the reader's own: unaligned is a bug, refused */
				for (b = 1; b < 8; b++)
					bad(cap, head + b, tail, rec_hdr(CLANQ_REC_DATA, 0),
					    "unaligned head");

				/*
				 * a tail behind the head, or more than a ring
				 * ahead, under a header that is right here
				 */
				h = room >= 16 ? rec_hdr(CLANQ_REC_FIN, 0) :
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
		uint64_t cap = caps[i], head = ~0ull - 15, size;

		set_ctx("cap %llu", (unsigned long long)cap);
		/* the writer's tail went past 2^64 */
		check_eq(clanq_ring_check_at(cap, head & ~7ull, (head & ~7ull) % cap, 8,
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
		uint64_t cap = caps[i], q = cap / 4, t[3];

		n = totals_at(cap, 8, 2 * cap, t);
		for (j = 0; j < n; j++) {
			uint64_t r = t[j];

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

/* =====================================================================
 * The model: a sender and a receiver over one ring.
 *
 * The ring lives in test memory: byte for byte up to DENSE_MAX, with the
 * owner of every unconsumed word recorded (a write over one is caught
 * where it happens); bigger rings as a sparse map of the words written
 * (headers, trailers, the first two and the last word of each payload),
 * and there the check that nothing unconsumed is overwritten is on the
 * totals. Each side decides only with ring.h, and sees the other's
 * counter as it was a little while ago (a tail or credit published
 * earlier), as a real reader of shared memory may.
 *
 * Lengths: struct clanq_rec's len is 32 bits, and clanq_ring_cap_ok()
 * admits rings up to CLANQ_RING_CAP_MAX (2^30), so every len fits. (It
 * once admitted 2^40, whose records' lengths did not.)
 */
#define HIST		8
#define GARBAGE		0xa5a5a5a5a5a5a5a5ull
#define LEN_LIMIT	(1ull << 31)

enum { D_UNIFORM, D_SMALL, D_LARGE, D_EDGE, D_MIXED, D_NR };

struct expect {
	uint64_t start;		/* total at which the record starts */
	uint64_t size;		/* bytes it takes */
	uint64_t seq;		/* message number (DATA), for its payload */
	uint32_t len;
	uint16_t type;
};

struct word {
	uint64_t key;		/* position + 1; 0: empty */
	uint64_t val;
};

struct model {
	uint64_t cap, max_len, rng;
	unsigned int dist, send_pct;
	/* the ring */
	unsigned char *ring;	/* dense: cap bytes */
	uint32_t *owner;	/* dense: 1 + expect index, per 8-byte word */
	struct word *words;	/* sparse */
	size_t nwords;
	/* the sender, and the tails it published */
	uint64_t tail, tails[HIST], credit_seen;
	unsigned int ntails;
	uint64_t seq;
	/* the receiver, and the credits it published */
	uint64_t head, returned, credits[HIST], tail_seen;
	unsigned int ncredits;
	uint64_t received;
	bool fin_seen;
	/* what the receiver must find, oldest first */
	struct expect *exp;
	size_t exp_head, exp_tail, exp_cap;
	/* what the run went through */
	unsigned long pads, blocked, drains, probes, wraps;
};

static uint64_t rnd(struct model *m)
{
	m->rng ^= m->rng >> 12;
	m->rng ^= m->rng << 25;
	m->rng ^= m->rng >> 27;
	return m->rng * 0x2545f4914f6cdd1dull;
}

static uint64_t below(struct model *m, uint64_t n)
{
	return n ? rnd(m) % n : 0;
}

static uint64_t payload_word(uint64_t seq, uint64_t k)
{
	return mix64(seq * 0x100000001ull + k);
}

/* ---- the ring's memory ---- */

static struct word *word_slot(struct model *m, uint64_t pos, bool add)
{
	size_t i = mix64(pos) & (m->nwords - 1), n;

	for (n = 0; n < m->nwords; n++, i = (i + 1) & (m->nwords - 1)) {
		if (m->words[i].key == pos + 1)
			return &m->words[i];
		if (!m->words[i].key) {
			if (!add)
				return NULL;
			m->words[i].key = pos + 1;
			return &m->words[i];
		}
	}
	fail_msg("%s: the sparse ring's map is full", ctx);
	return NULL;
}

static void put_word(struct model *m, uint64_t pos, uint64_t v)
{
	check(pos % 8 == 0 && pos + 8 <= m->cap);
	if (m->ring)
		memcpy(m->ring + pos, &v, 8);
	else
		word_slot(m, pos, true)->val = v;
}

static uint64_t get_word(struct model *m, uint64_t pos)
{
	struct word *w;
	uint64_t v;

	check(pos % 8 == 0 && pos + 8 <= m->cap);
	if (m->ring) {
		memcpy(&v, m->ring + pos, 8);
		return v;
	}
	w = word_slot(m, pos, false);
	return w ? w->val : GARBAGE;
}

/* the payload words the model writes and checks: all, or a sample */
static bool payload_word_kept(struct model *m, uint64_t k, uint32_t len)
{
	return m->ring || k < 2 || k == (len - 1) / 8;
}

static void put_payload(struct model *m, uint64_t pos, uint32_t len, uint64_t seq)
{
	uint64_t k, w;

	for (k = 0; k * 8 < len; k++) {
		if (!payload_word_kept(m, k, len)) {
			k = (len - 1) / 8 - 1;	/* on to the last word */
			continue;
		}
		w = payload_word(seq, k);
		if (m->ring)	/* only len bytes: the rest of the word stays stale */
			memcpy(m->ring + pos + 8 * k, &w, len - 8 * k < 8 ? len - 8 * k : 8);
		else
			put_word(m, pos + 8 * k, w);
	}
}

static void check_payload(struct model *m, uint64_t pos, uint32_t len, uint64_t seq)
{
	uint64_t k, w, got, mask;

	for (k = 0; k * 8 < len; k++) {
		if (!payload_word_kept(m, k, len)) {
			k = (len - 1) / 8 - 1;
			continue;
		}
		w = payload_word(seq, k);
		got = get_word(m, pos + 8 * k);
		mask = len - 8 * k >= 8 ? ~0ull : (1ull << (8 * (len - 8 * k))) - 1;
		if ((got ^ w) & mask)
			fail_msg("%s: message %llu, payload word %llu at %llu: %016llx, want %016llx",
				 ctx, (unsigned long long)seq, (unsigned long long)k,
				 (unsigned long long)(pos + 8 * k),
				 (unsigned long long)(got & mask),
				 (unsigned long long)(w & mask));
	}
}

/* dense rings: nothing unconsumed is written over, nothing freed twice */
static void claim(struct model *m, uint64_t pos, uint64_t n, uint32_t id)
{
	uint64_t w;

	check(pos + n <= m->cap);
	if (!m->owner)
		return;
	for (w = pos / 8; w < (pos + n) / 8; w++) {
		if (m->owner[w])
			fail_msg("%s: record %u written over unconsumed record %u at %llu",
				 ctx, id - 1, m->owner[w] - 1, (unsigned long long)w * 8);
		m->owner[w] = id;
	}
}

static void release(struct model *m, uint64_t pos, uint64_t n, uint32_t id)
{
	uint64_t w;

	if (!m->owner)
		return;
	for (w = pos / 8; w < (pos + n) / 8; w++) {
		check_eq(m->owner[w], id);
		m->owner[w] = 0;
	}
}

static void put_hdr(struct model *m, uint64_t pos, uint16_t type, uint32_t len)
{
	struct clanq_rec h = rec_hdr(type, len);
	uint64_t v;

	memcpy(&v, &h, 8);
	put_word(m, pos, v);
}

static struct clanq_rec get_hdr(struct model *m, uint64_t pos)
{
	struct clanq_rec h;
	uint64_t v = get_word(m, pos);

	memcpy(&h, &v, 8);
	return h;
}

/* ---- views of the other side's counter ---- */

static void publish(uint64_t *hist, unsigned int *n, uint64_t v)
{
	hist[*n % HIST] = v;
	(*n)++;
}

/*
 * The newest, or now and then an older one, but never older than what
 * this side saw last (*last): loads of one word do not go back in time.
 */
static uint64_t seen(struct model *m, const uint64_t *hist, unsigned int n,
		  uint64_t *last, bool fresh)
{
	unsigned int back, i;
	uint64_t v = hist[(n - 1) % HIST];

	if (!fresh && below(m, 4)) {
		back = (unsigned int)below(m, n < HIST ? n : HIST);
		for (i = back; i > 0; i--)
			if (hist[(n - 1 - i) % HIST] >= *last) {
				v = hist[(n - 1 - i) % HIST];
				break;
			}
	}
	check(v >= *last);
	*last = v;
	return v;
}

static void return_credit(struct model *m)
{
	m->returned = m->head;
	publish(m->credits, &m->ncredits, m->head);
}

/* ---- the sender ---- */

static uint64_t pick_len_any(struct model *m);

/* A message is never empty (an empty record would read as the end). */
static uint64_t pick_len(struct model *m)
{
	uint64_t len = pick_len_any(m);

	return len ? len : 1;
}

static uint64_t pick_len_any(struct model *m)
{
	uint64_t max = m->max_len, room = m->cap - m->tail % m->cap, rec;
	unsigned int d = m->dist == D_MIXED ? (unsigned int)below(m, D_MIXED) : m->dist;

	switch (d) {
	case D_SMALL:
		return below(m, (max < 64 ? max : 64) + 1);
	case D_LARGE:
		return max - below(m, (max < 64 ? max : 64) + 1);
	case D_EDGE:
		/* a record ending a word short of the end, at it, or a word past */
		rec = room - 8 + 8 * below(m, 3);
		if (rec >= 16 && rec - 16 <= max)
			return rec - 16 - (rec > 16 ? below(m, 8) : 0);
		/* fall through */
	default:
		return below(m, max + 1);
	}
}

static void sender_probes(struct model *m)
{
	uint64_t cap = m->cap, tail = m->tail;

	m->probes++;
	check_eq(clanq_ring_space(cap, tail, tail + 1), -1);
	check_eq(clanq_ring_space(cap, tail, tail + 8 * (1 + below(m, 64))), -1);
	check_eq(clanq_ring_space(cap, tail, ~0ull), -1);
	if (tail >= cap + 8) {
		check_eq(clanq_ring_space(cap, tail, tail - cap - 1), -1);
		check_eq(clanq_ring_space(cap, tail, tail - cap - 8 * (1 + below(m, 8))), -1);
		check_eq(clanq_ring_space(cap, tail, tail - cap), 0);
	}
	check_eq(clanq_ring_space(cap, tail, tail), cap);
}

/* One message (or FIN) if the credit the sender sees allows it. */
static bool try_send(struct model *m, uint64_t len, uint16_t type, bool fresh)
{
	uint64_t cap = m->cap, rec, cost, pad = ~0ull, pos, credit;
	int64_t space;
	struct expect *e;

	check(len <= m->max_len);
	rec = clanq_rec_size(len);
	cost = clanq_ring_cost_at(cap, m->tail % cap, rec, &pad);
	credit = seen(m, m->credits, m->ncredits, &m->credit_seen, fresh);
	space = clanq_ring_space(cap, m->tail, credit);
	/* an honest receiver's credit is always sane */
	check(space >= 0 && (uint64_t)space <= cap);
	if (!below(m, 16))
		sender_probes(m);
	if ((uint64_t)space < cost)
		return false;
	/* the reference: what it writes is free (the receiver's true head) */
	check(m->tail + cost - m->head <= cap);
	check(m->exp_tail + 2 <= m->exp_cap);
	pos = m->tail % cap;
	if (pad) {
		check_eq(pad, cap - pos);
		e = &m->exp[m->exp_tail++];
		*e = (struct expect){ m->tail, pad, 0, (uint32_t)(pad - 8), CLANQ_REC_PAD };
		claim(m, pos, pad, (uint32_t)m->exp_tail);
		put_hdr(m, pos, CLANQ_REC_PAD, (uint32_t)(pad - 8));
		pos = 0;
		m->pads++;
	}
	/* a record never wraps */
	check(pos + rec <= cap);
	e = &m->exp[m->exp_tail++];
	*e = (struct expect){ m->tail + pad, rec, m->seq, (uint32_t)len, type };
	claim(m, pos, rec, (uint32_t)m->exp_tail);
	put_hdr(m, pos, type, (uint32_t)len);
	put_payload(m, pos + 8, (uint32_t)len, m->seq);
	put_word(m, pos + rec - 8, m->tail + cost);	/* trailer: the new tail */
	if ((m->tail + cost) / cap != m->tail / cap)
		m->wraps++;
	m->tail += cost;
	m->seq++;
	publish(m->tails, &m->ntails, m->tail);
	return true;
}

/* ---- the receiver ---- */

/* With the genuine record h (size n) at head: variants of it are refused. */
static void receiver_probes(struct model *m, struct clanq_rec h, uint64_t n,
			    uint64_t tail)
{
	static const uint16_t bad_types[] = { 0, 8, 9, 0x100, 0x8001, 0xffff };
	uint64_t cap = m->cap, head = m->head, pos = head % cap, room = cap - pos;
	uint64_t size = 0xdeadbeef, max = clanq_ring_max_msg(cap);
	struct clanq_rec b;
	unsigned int i;

#define REFUSED(hd, tl, rh)						\
	check_eq(clanq_ring_check_at(cap, hd, hd % cap, tl, rh, &size), CLANQ_REC_BAD)

	m->probes++;
	/* the tail more than a ring ahead, behind us, or short of the record */
	REFUSED(head, head + cap + 8 * (1 + below(m, 4)), h);
	REFUSED(head, head + cap + 1, h);
	REFUSED(head, head - 8, h);
	REFUSED(head, head - 1, h);
	if (n > 8)
		REFUSED(head, head + n - 8, h);
	/* a head out of step */
	REFUSED(head + 1 + below(m, 7), tail, h);
	/* reserved bits */
	b = h;
	b.reserved = (uint16_t)(1u << below(m, 16));
	REFUSED(head, tail, b);
	/* types nobody writes */
	b = h;
	b.type = bad_types[below(m, ARRAY_SIZE(bad_types))];
	REFUSED(head, tail, b);
	/* a FIN with a payload */
	b = rec_hdr(CLANQ_REC_FIN, (uint32_t)(1 + below(m, 64)));
	REFUSED(head, tail, b);
	/* longer than half the ring (ring.h's limit, not the model's) */
	if (max < 0xffffffffull) {
		b = rec_hdr(CLANQ_REC_DATA, (uint32_t)(max + 1 + below(m, 64)));
		if (b.len > max)
			REFUSED(head, tail, b);
		b.len = 0xffffffff;
		REFUSED(head, tail, b);
	}
	/* a message that would cross the end of the ring */
	if (room >= 16 && room + 8 - 16 <= max && room - 16 + 8 <= 0xffffffffull) {
		b = rec_hdr(CLANQ_REC_DATA, (uint32_t)(room - 16 + 1 + below(m, 8)));
		REFUSED(head, tail, b);
	}
	/* a PAD that does not end at the end */
	for (i = 0; i < 4; i++) {
		static const int64_t off[] = { -8, 8, -1, 1 };

		if (room - 8 + off[i] > 0xffffffffull || (room == 8 && off[i] < 0))
			continue;
		REFUSED(head, tail, rec_hdr(CLANQ_REC_PAD, (uint32_t)(room - 8 + off[i])));
	}
	REFUSED(head, tail, rec_hdr(CLANQ_REC_PAD, 0xffffffff));
	check_eq(size, 0xdeadbeef);
#undef REFUSED
}

/*
 * What a reader does: skip PADs, take one message (or the FIN): 1; 0 if
 * there is nothing (and then it hands back its credit, as a reader about
 * to block does).
 */
static int receive_one(struct model *m, bool fresh)
{
	uint64_t tail = seen(m, m->tails, m->ntails, &m->tail_seen, fresh), size = 0;
	struct clanq_rec h;
	struct expect *e;
	int v;

	for (;;) {
		h = get_hdr(m, m->head % m->cap);
		v = clanq_ring_check_at(m->cap, m->head, m->head % m->cap, tail, h, &size);
		if (tail == m->head) {
			check_eq(v, CLANQ_REC_NONE);
			return_credit(m);
			return 0;
		}
		if (v != CLANQ_REC_OK)
			fail_msg("%s: head %llu tail %llu rec {len %u type %u reserved %u}: verdict %d",
				 ctx, (unsigned long long)m->head,
				 (unsigned long long)tail, h.len, h.type, h.reserved, v);
		check(m->exp_head < m->exp_tail);
		e = &m->exp[m->exp_head];
		check_eq(e->start, m->head);
		check_eq(h.type, e->type);
		check_eq(h.len, e->len);
		check_eq(size, e->size);
		check(!m->fin_seen);
		if (!below(m, 8))
			receiver_probes(m, h, size, tail);
		if (h.type != CLANQ_REC_PAD) {
			check_payload(m, m->head % m->cap + 8, h.len, e->seq);
			check_eq(get_word(m, m->head % m->cap + size - 8), m->head + size);
			if (h.type == CLANQ_REC_FIN)
				m->fin_seen = true;
			else
				m->received++;
		}
		release(m, m->head % m->cap, size, (uint32_t)(m->exp_head + 1));
		m->head += size;
		m->exp_head++;
		if (h.type != CLANQ_REC_PAD) {
			if (clanq_ring_credit_due(m->cap, m->head, m->returned))
				return_credit(m);
			return 1;
		}
	}
}

static void drain(struct model *m)
{
	while (receive_one(m, true))
		;
	check_eq(m->head, m->tail);
	check_eq(m->returned, m->head);
}

/* ---- a run ---- */

/* Zeroed buffers for a run, kept from run to run (never freed: reachable). */
static void *model_buf(unsigned int i, size_t size)
{
	static void *buf[4];
	static size_t len[4];

	if (len[i] < size) {
		free(buf[i]);
		buf[i] = malloc(size);
		len[i] = buf[i] ? size : 0;
	}
	assert_non_null(buf[i]);
	memset(buf[i], 0, size);
	return buf[i];
}

static void run_model(uint64_t cap, uint64_t base, unsigned int dist, uint64_t seed,
		      unsigned int steps, struct model *tot)
{
	static struct model *m;		/* static: a failed run leaks nothing */
	unsigned int step;
	uint64_t len;

	if (!m)
		m = malloc(sizeof(*m));
	assert_non_null(m);
	memset(m, 0, sizeof(*m));
	m->cap = cap;
	m->max_len = clanq_ring_max_msg(cap);
	if (cap > (1ull << 33))
		m->max_len = LEN_LIMIT;
	m->rng = mix64(seed) | 1;
	m->dist = dist;
	m->send_pct = 30 + (unsigned int)below(m, 50);
	m->exp_cap = 2 * (size_t)steps + 8;
	m->exp = model_buf(0, m->exp_cap * sizeof(*m->exp));
	if (cap <= DENSE_MAX) {
		m->ring = model_buf(1, cap);
		m->owner = model_buf(2, cap / 8 * sizeof(*m->owner));
		memset(m->ring, 0xa5, cap);
	} else {
		m->nwords = 1u << 16;
		m->words = model_buf(3, m->nwords * sizeof(*m->words));
	}
	m->tail = m->head = m->returned = m->tail_seen = m->credit_seen = base;
	publish(m->tails, &m->ntails, base);
	publish(m->credits, &m->ncredits, base);
	check(steps * (cap + 1) < ~0ull - base);	/* the totals will not wrap */

	for (step = 0; step < steps; step++) {
		set_ctx("cap %llu base %llu dist %u seed %llu step %u",
			(unsigned long long)cap, (unsigned long long)base, dist,
			(unsigned long long)seed, step);
		if (below(m, 100) < m->send_pct) {
			len = pick_len(m);
			if (try_send(m, len, CLANQ_REC_DATA, false))
				continue;
			m->blocked++;
			if (below(m, 2))
				continue;
			/*
			 * The receiver drains the ring and, about to block,
			 * hands its credit back: now any message goes.
			 */
			m->drains++;
			drain(m);
			if (!try_send(m, len, CLANQ_REC_DATA, true))
				fail_msg("%s: a drained ring refused %llu bytes at %llu",
					 ctx, (unsigned long long)len,
					 (unsigned long long)(m->tail % cap));
		} else {
			(void)receive_one(m, false);
			/* credit also rides on the receiver's own sends */
			if (!below(m, 32))
				return_credit(m);
		}
	}
	/* the end: drain, a FIN, and the FIN comes out last */
	set_ctx("cap %llu base %llu dist %u seed %llu: close",
		(unsigned long long)cap, (unsigned long long)base, dist,
		(unsigned long long)seed);
	drain(m);
	check(try_send(m, 0, CLANQ_REC_FIN, true));
	drain(m);
	check(m->fin_seen);
	check_eq(m->exp_head, m->exp_tail);
	check_eq(m->received + 1, m->seq);
	check(m->head >= base && m->head - base <= steps * cap + cap);

	tot->seq += m->seq;
	tot->pads += m->pads;
	tot->blocked += m->blocked;
	tot->drains += m->drains;
	tot->probes += m->probes;
	tot->wraps += m->wraps;
}

/* Where runs start: near 0, just before the end of a ring, mid-ring some
 * rings in, and near 2^64 (as near as leaves room for the run). */
static unsigned int model_bases(uint64_t cap, uint64_t room, uint64_t *b)
{
	uint64_t top = ~0ull - room, at = top / cap * cap;

	b[0] = 0;
	b[1] = cap - 8;
	b[2] = 5 * cap + (cap / 2 & ~7ull);
	b[3] = at - 8;
	b[4] = at - (cap / 2 & ~7ull);
	b[5] = at - cap + 8;
	return 6;
}

static void test_model_sender_and_receiver(void **state)
{
	struct model tot;
	unsigned int i, j, n, d;
	uint64_t b[6];

	(void)state;
	memset(&tot, 0, sizeof(tot));
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		uint64_t cap = caps[i];
		unsigned int steps = cap <= DENSE_MAX ? 1500 : 600;

		n = model_bases(cap, (steps + 8) * (cap + 1), b);
		for (j = 0; j < n; j++)
			for (d = 0; d < D_NR; d++)
				run_model(cap, b[j], d, i * 1000 + j * 10 + d, steps, &tot);
	}
	print_message("model: %llu messages, %lu PADs, %lu wraps, %lu blocked sends, "
		      "%lu drains, %lu probes\n", (unsigned long long)tot.seq,
		      tot.pads, tot.wraps, tot.blocked, tot.drains, tot.probes);
	/* the runs went where they had to */
	set_ctx("totals");
	check(tot.seq > 300000);
	check(tot.pads > 50000);
	check(tot.wraps > 50000);
	check(tot.blocked > 100000);
	check(tot.drains > 50000);
	check(tot.probes > 50000);
}

/*
 * The length a LARGE record announces: longer than a record of that
 * ring could carry, at most the limit; anything else is refused before
 * the receiver does anything with it (it allocates nothing for it).
 */
static void test_large_len_from_untrusted_peer(void **state)
{
	static const uint64_t caps[] = { 64, 72, 4032, 4096, 266176, CLANQ_RING_CAP_MAX };
	unsigned int i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		uint64_t cap = caps[i], max = clanq_ring_max_msg(cap);

		check(!clanq_large_len_ok(cap, 0));
		check(!clanq_large_len_ok(cap, max));
		check(clanq_large_len_ok(cap, max + 1));
		check(clanq_large_len_ok(cap, CLANQ_MSG_LARGE_MAX));
		check(!clanq_large_len_ok(cap, CLANQ_MSG_LARGE_MAX + 1));
		check(!clanq_large_len_ok(cap, ~0ull));
		check(!clanq_large_len_ok(cap, 1ull << 63));
	}
	check(CLANQ_MSG_LARGE_MAX >= 1ull << 30);
}

/*
 * The bulk window's words, from an untrusted peer: the descriptor that
 * offers a window, and each piece's reference, against a reference
 * model in 128-bit arithmetic over the edges of every field.
 */
static int ref_bulk_ok(const struct clanq_bulk_ref *r, uint64_t cap, uint64_t head,
		       uint64_t returned, uint64_t left)
{
	u128 pos;

	if (!cap || r->reserved || r->at != head || !r->len || r->len > left)
		return 0;
	pos = head % cap;
	/* within the window, not across its end, within the credit given */
	return pos + r->len <= cap && (u128)head + r->len <= (u128)returned + cap;
}

static void test_bulk_words_from_untrusted_peer(void **state)
{
	static const uint64_t caps[] = { 64u << 10, 192u << 10, 1u << 20, 64u << 20 };
	static const uint64_t descs[] = {
		0, 1, 1ull << 32, (65536ull << 32), (65536ull << 32) | 5,
		((65536ull + 1) << 32) | 5, ((65536ull - 4096) << 32) | 5,
		((64ull << 20) << 32) | 9, (((64ull << 20) + 4096) << 32) | 9,
		(0xffffffffull << 32) | 9, ((1ull << 20) << 32) | 0xffffffff,
	};
	unsigned long checked = 0;
	uint64_t cap, n;
	uint32_t region;
	unsigned int i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(descs); i++) {
		uint64_t d = descs[i], want = d >> 32;
		int ok = (uint32_t)d && want >= CLANQ_BULK_MIN && want <= CLANQ_BULK_MAX &&
			 want % 4096 == 0;

		region = 0;
		cap = 0;
		check(clanq_bulk_desc_ok(d, &region, &cap) == ok);
		if (ok)
			check(region == (uint32_t)d && cap == want);
	}
	check(clanq_bulk_desc_ok(clanq_bulk_desc(77, 1u << 20), &region, &cap) &&
	      region == 77 && cap == 1u << 20);
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		const uint64_t c = caps[i];
		const uint64_t heads[] = { 0, 8, c / 2, c - 8, c, 3 * c + 5, ~0ull - c,
					   ~0ull - 7 };
		const uint32_t lens[] = { 0, 1, 8, 4096, (uint32_t)(c / 4),
					  (uint32_t)(c / 2), (uint32_t)(c - 8),
					  (uint32_t)c, (uint32_t)c + 1, 0xffffffffu };

		for (unsigned int h = 0; h < ARRAY_SIZE(heads); h++) {
			uint64_t head = heads[h];
			const uint64_t behinds[] = { 0, 1, c / 4, c - 1, c, c + 1, head };

			for (unsigned int b = 0; b < ARRAY_SIZE(behinds); b++) {
				uint64_t returned = head - (behinds[b] > head ? head : behinds[b]);

				for (unsigned int l = 0; l < ARRAY_SIZE(lens); l++) {
					const uint64_t lefts[] = { 0, lens[l], lens[l] - 1ull,
								   1ull << 30 };

					for (unsigned int at = 0; at < 4; at++) {
						struct clanq_bulk_ref r = {
							.at = at == 0 ? head : at == 1 ? head + 8 :
							      at == 2 ? head - 1 : 0,
							.len = lens[l],
						};

						for (unsigned int k = 0; k < ARRAY_SIZE(lefts); k++) {
							n = lefts[k];
							set_ctx("window %llu head %llu returned %llu at %llu len %u left %llu",
								(unsigned long long)c,
								(unsigned long long)head,
								(unsigned long long)returned,
								(unsigned long long)r.at, r.len,
								(unsigned long long)n);
							check(clanq_bulk_ref_ok(&r, c, head, returned, n) ==
							      ref_bulk_ok(&r, c, head, returned, n));
							r.reserved = 1;
							check(!clanq_bulk_ref_ok(&r, c, head, returned, n));
							r.reserved = 0;
							checked++;
						}
					}
				}
			}
		}
	}
	/* a zero window (never offered) takes nothing */
	{
		struct clanq_bulk_ref r = { 0, 8, 0 };

		check(!clanq_bulk_ref_ok(&r, 0, 0, 0, 8));
	}
	check(checked > 10000);
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
		cmocka_unit_test(test_large_len_from_untrusted_peer),
		cmocka_unit_test(test_bulk_words_from_untrusted_peer),
		cmocka_unit_test(test_wrapped_totals_are_refused),
		cmocka_unit_test(test_credit_due_every_quarter_ring),
		cmocka_unit_test(test_model_sender_and_receiver),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
