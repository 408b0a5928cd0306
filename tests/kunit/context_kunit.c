// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for a context's mmap keys (driver/mapkey.c): a key whose
 * object is gone while a mapping of it lives is retired, not reused,
 * until that mapping goes; a new object given it would zap the stale
 * mapping when revoked.
 *
 * A mapping is stood in for by what a VMA does: it holds a reference on
 * its object and calls clanq_map_vma_open()/clanq_map_vma_close(). The
 * allocator is cyclic over 2^CLANQ_MAP_KEY_BITS keys; instead of going
 * round it, the test moves its cursor onto the retired key.
 */
#include <kunit/test.h>
#include <linux/module.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);

#define CTX_NIC_INDEX	13
#define CTX_NODE	0x3a20u

static int context_test_init(struct kunit *test)
{
	return nic_fixture_init(test, CTX_NIC_INDEX, CTX_NODE);
}

static void cursor_to(struct clanq_ctx *ctx, u32 key)
{
	mutex_lock(&ctx->lock);
	ctx->next_mmap_key = key;
	mutex_unlock(&ctx->lock);
}

static bool key_is_retired(struct clanq_ctx *ctx, u32 key)
{
	return xa_pointer_tag(xa_load(&ctx->mmaps, key)) != 0;
}

static void a_retired_key_waits_for_its_last_mapping(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_ctx *ctx = f->ctx;
	struct clanq_ioc_ep_create c;
	struct clanq_kep *ep, *held, *other;
	u32 key;

	/* an endpoint, "mapped" twice (a fork copies the VMA) */
	ep = ep_create(test, ctx, 8, &c);
	key = ep->shm->map.key;
	held = clanq_kep_lookup(&f->nic, ep->id);
	KUNIT_ASSERT_PTR_EQ(test, held, ep);
	clanq_map_vma_open(&held->shm->map);
	clanq_map_vma_open(&held->shm->map);

	/* destroyed while mapped: its key is retired, not free */
	ep_destroy(ctx, ep);
	KUNIT_EXPECT_TRUE(test, key_is_retired(ctx, key));
	cursor_to(ctx, key);
	other = ep_create(test, ctx, 8, &c);
	KUNIT_EXPECT_NE(test, other->shm->map.key, key);
	ep_destroy(ctx, other);

	/* one mapping gone, one left: still retired */
	clanq_map_vma_close(&held->shm->map);
	KUNIT_EXPECT_TRUE(test, key_is_retired(ctx, key));
	cursor_to(ctx, key);
	other = ep_create(test, ctx, 8, &c);
	KUNIT_EXPECT_NE(test, other->shm->map.key, key);
	ep_destroy(ctx, other);

	/* the last mapping gone: the key is free, and handed out again */
	clanq_map_vma_close(&held->shm->map);
	KUNIT_EXPECT_NULL(test, xa_load(&ctx->mmaps, key));
	cursor_to(ctx, key);
	other = ep_create(test, ctx, 8, &c);
	KUNIT_EXPECT_EQ(test, other->shm->map.key, key);
	ep_destroy(ctx, other);
	clanq_kep_put(held);
}

/* An object that was never mapped gives its key back at once. */
static void an_unmapped_objects_key_is_free_at_once(struct kunit *test)
{
	struct nic_fixture *f = test->priv;
	struct clanq_ioc_ep_create c;
	struct clanq_kep *ep;
	u32 key;

	ep = ep_create(test, f->ctx, 8, &c);
	key = ep->shm->map.key;
	ep_destroy(f->ctx, ep);
	KUNIT_EXPECT_NULL(test, xa_load(&f->ctx->mmaps, key));
}

/* Every key, shifted, fits the 32-bit page offset of mmap2. */
static void every_mmap_offset_fits_a_32_bit_page_offset(struct kunit *test)
{
	u64 last = (1ull << CLANQ_MAP_KEY_BITS) - 1;
	struct clanq_map map = { .key = (u32)last };

	KUNIT_EXPECT_LE(test, clanq_map_offset(&map) >> PAGE_SHIFT, (u64)U32_MAX);
	/* and a region of the default max_region_bytes (256 MiB) fits one */
	KUNIT_EXPECT_GE(test, 1ull << (CLANQ_MAP_SHIFT + PAGE_SHIFT), 256ull << 20);
}

static struct kunit_case clanq_context_cases[] = {
	KUNIT_CASE(a_retired_key_waits_for_its_last_mapping),
	KUNIT_CASE(an_unmapped_objects_key_is_free_at_once),
	KUNIT_CASE(every_mmap_offset_fits_a_32_bit_page_offset),
	{}
};

static struct kunit_suite clanq_context_suite = {
	.name = "clanq_context",
	.init = context_test_init,
	.test_cases = clanq_context_cases,
};

kunit_test_suites(&clanq_context_suite);
