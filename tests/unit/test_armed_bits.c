// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Unit tests for the writer's side of a tripwire in include/clanq.h:
 * clanq_armed_bits(), the look at the armed bitmap after PIO stores, and
 * clanq_ap_store()/clanq_ap_flush() around it. A look that misses a set
 * bit is a lost wake-up; one that sees a bit outside the range written
 * is a system call for nothing. Both are checked against a bit-by-bit
 * reference over every block position, many offsets and the lengths
 * where word and block boundaries fall.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <clanq.h>

#define WORDS		4			/* 128 blocks: 8 KiB of region */
#define BLOCKS		(WORDS * 32)
#define REGION		(BLOCKS << CLANQ_TW_BLOCK_SHIFT)

/* the reference: is any bit of the blocks [first, first + len) set? */
static bool ref_armed(const uint32_t *armed, uint64_t first, uint64_t len)
{
	uint64_t b;

	for (b = first >> CLANQ_TW_BLOCK_SHIFT;
	     b <= (first + len - 1) >> CLANQ_TW_BLOCK_SHIFT; b++)
		if (armed[b / 32] >> (b % 32) & 1)
			return true;
	return false;
}

static const uint64_t lens[] = {
	1, 2, 7, 8, 63, 64, 65, 127, 128, 129, 2047, 2048, 2049, 4095, 4096,
	4097, REGION / 2, REGION,
};

/* One armed block at every position: seen exactly by the writes over it. */
static void test_one_armed_block_is_seen_by_exactly_the_writes_over_it(void **state)
{
	uint32_t armed[WORDS];
	unsigned long checked = 0;
	unsigned int p, i;
	uint64_t first;

	(void)state;
	for (p = 0; p < BLOCKS; p++) {
		memset(armed, 0, sizeof(armed));
		armed[p / 32] = 1u << (p % 32);
		for (first = 0; first < REGION; first += 7) {
			for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
				if (first + lens[i] > REGION)
					continue;
				assert_int_equal(clanq_armed_bits(armed, first, lens[i]),
						 ref_armed(armed, first, lens[i]));
				checked++;
			}
		}
	}
	assert_true(checked > 1000000);
}

/* Every bit but one set: a write of the unarmed block alone sees nothing. */
static void test_all_armed_but_one_block(void **state)
{
	uint32_t armed[WORDS];
	unsigned int p, i;
	uint64_t first;

	(void)state;
	for (p = 0; p < BLOCKS; p++) {
		memset(armed, 0xff, sizeof(armed));
		armed[p / 32] &= ~(1u << (p % 32));
		for (first = 0; first < REGION; first += 13)
			for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
				if (first + lens[i] <= REGION)
					assert_int_equal(clanq_armed_bits(armed, first, lens[i]),
							 ref_armed(armed, first, lens[i]));
	}
}

/* Random bitmaps, random ranges. */
static void test_random_bitmaps_and_ranges(void **state)
{
	uint32_t armed[WORDS];
	unsigned int n, w;
	uint64_t first, len;

	(void)state;
	srandom(1);
	for (n = 0; n < 200000; n++) {
		for (w = 0; w < WORDS; w++)
			/* sparse: most words zero, so misses are common */
			armed[w] = random() % 4 ? 0 : 1u << (random() % 32);
		first = (uint64_t)random() % REGION;
		len = 1 + (uint64_t)random() % (REGION - first);
		assert_int_equal(clanq_armed_bits(armed, first, len),
				 ref_armed(armed, first, len));
	}
}

/* An aperture onto [region_off, region_off + len) of an 8 KiB region. */
struct fake_ap {
	struct clanq_ap ap;
	uint32_t armed[WORDS];
	char mem[REGION];
};

static void fake_ap_init(struct fake_ap *f, uint64_t region_off, uint64_t len)
{
	memset(f, 0, sizeof(*f));
	f->ap.fd = -1;
	f->ap.rights = CLANQ_RIGHTS_ALL;
	f->ap.len = len;
	f->ap.region_off = region_off;
	f->ap.base = f->mem + region_off;
	f->ap.armed = f->armed;
}

/* The store lands, and says a flush is owed only when its blocks are armed. */
static void test_store_owes_a_flush_only_over_an_armed_block(void **state)
{
	static struct fake_ap f;
	const char msg[16] = "fifteen bytes..";
	uint64_t off;

	(void)state;
	fake_ap_init(&f, 1000, 4096);		/* window bytes 0..4095 = region 1000.. */
	f.armed[0] = 1u << 31;			/* region block 31: [1984, 2047] */
	for (off = 0; off + sizeof(msg) <= 4096; off += 5) {
		uint64_t first = 1000 + off, last = first + sizeof(msg) - 1;
		bool over = first <= 2047 && last >= 1984;

		memset(f.mem, 0, sizeof(f.mem));
		assert_int_equal(clanq_ap_store(&f.ap, off, msg, sizeof(msg)), over);
		assert_memory_equal(f.mem + first, msg, sizeof(msg));
	}
	/* no bytes: nothing to flush, wherever */
	assert_int_equal(clanq_ap_store(&f.ap, 984, msg, 0), 0);
	assert_int_equal(clanq_ap_flush(&f.ap, 984, 0), 0);
}

/* Out of the window, or not mapped for writing: refused, nothing stored. */
static void test_store_refuses_what_is_outside_or_unmapped(void **state)
{
	static struct fake_ap f;
	const char msg[8] = "garbage";

	(void)state;
	fake_ap_init(&f, 64, 128);
	assert_int_equal(clanq_ap_store(&f.ap, 121, msg, 8), -ERANGE);
	assert_int_equal(clanq_ap_store(&f.ap, 129, msg, 0), -ERANGE);
	assert_int_equal(clanq_ap_store(&f.ap, ~0ull, msg, 8), -ERANGE);
	assert_int_equal(clanq_ap_store(&f.ap, 8, msg, (size_t)-1), -ERANGE);
	assert_int_equal(clanq_ap_flush(&f.ap, 121, 8), -ERANGE);
	f.ap.rights = CLANQ_RIGHT_READ;
	assert_int_equal(clanq_ap_store(&f.ap, 0, msg, 8), -ENXIO);
	f.ap.rights = CLANQ_RIGHTS_ALL;
	f.ap.base = NULL;
	assert_int_equal(clanq_ap_write(&f.ap, 0, msg, 8), -ENXIO);
	for (size_t i = 0; i < sizeof(f.mem); i++)
		assert_int_equal(f.mem[i], 0);
	/* the last byte of the window is in it */
	f.ap.base = f.mem + 64;
	assert_int_equal(clanq_ap_store(&f.ap, 127, msg, 1), 0);
	assert_int_equal(f.mem[64 + 127], 'g');
}

/* Without an armed bitmap (an aperture with no PIO mapping): never owed. */
static void test_no_bitmap_owes_nothing(void **state)
{
	static struct fake_ap f;
	const char msg[8] = "payload";

	(void)state;
	fake_ap_init(&f, 0, 4096);
	memset(f.armed, 0xff, sizeof(f.armed));
	f.ap.armed = NULL;
	assert_int_equal(clanq_ap_store(&f.ap, 0, msg, 8), 0);
	assert_int_equal(clanq_ap_flush(&f.ap, 0, 8), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_armed_block_is_seen_by_exactly_the_writes_over_it),
		cmocka_unit_test(test_all_armed_but_one_block),
		cmocka_unit_test(test_random_bitmaps_and_ranges),
		cmocka_unit_test(test_store_owes_a_flush_only_over_an_armed_block),
		cmocka_unit_test(test_store_refuses_what_is_outside_or_unmapped),
		cmocka_unit_test(test_no_bitmap_owes_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
