// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Per-context limits: what one process can make the driver allocate is
 * bounded by module parameters, refused with a clear errno, and given
 * back when objects go. Runs in the test VM with the default limits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

static void set_param(const char *name, unsigned long v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/clanq/parameters/%s", name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fprintf(f, "%lu\n", v) > 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(itest_param(name), v);
}

#define MAX_EPS	8192
#define SMALL_BUDGET	(1ul << 20)	/* 256 one-page endpoints */

static unsigned long saved_budget;

static int budget_small(void **state)
{
	(void)state;
	saved_budget = itest_param("max_ctx_bytes");
	set_param("max_ctx_bytes", SMALL_BUDGET);
	return 0;
}

static int budget_restore(void **state)
{
	(void)state;
	set_param("max_ctx_bytes", saved_budget);
	return 0;
}

static void segments_of_a_context_stop_at_max_ctx_bytes_with_enomem(void **state)
{
	static struct clanq_ep eps[MAX_EPS];
	unsigned long limit = itest_param("max_ctx_bytes");	/* SMALL_BUDGET */
	struct clanq_ioc_ep_destroy destroy;
	struct clanq_dev dev, other;
	struct clanq_ep extra;
	struct clanq_evq evq;
	size_t held = 0;
	unsigned int n;
	int err = 0;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	/* a 2-slot endpoint's segment is one page */
	for (n = 0; n < MAX_EPS; n++) {
		err = clanq_ep_create(&dev, &eps[n], 2);
		if (err)
			break;
		held += eps[n].seg_size;
	}
	/* refused, with the errno the ABI names, and exactly at the limit */
	assert_int_equal(err, -ENOMEM);
	assert_int_equal(held, limit);
	assert_int_equal(n, limit / eps[0].seg_size);

	/* an event queue is charged to the same context */
	assert_int_equal(clanq_evq_create(&dev, &evq, 1), -ENOMEM);

	/* another context has a budget of its own */
	assert_int_equal(clanq_open_nic(&other, 0), 0);
	assert_int_equal(clanq_ep_create(&other, &extra, 2), 0);
	assert_int_equal(clanq_ep_destroy(&extra), 0);
	assert_int_equal(clanq_close(&other), 0);

	/*
	 * Memory counts while it exists: an endpoint destroyed while its
	 * segment is still mapped gives nothing back until the unmap.
	 */
	memset(&destroy, 0, sizeof(destroy));
	destroy.id = eps[n - 1].addr.id;
	assert_int_equal(ioctl(dev.fd, CLANQ_IOC_EP_DESTROY, &destroy), 0);
	assert_int_equal(clanq_ep_create(&dev, &extra, 2), -ENOMEM);
	assert_int_equal(munmap(eps[n - 1].seg, eps[n - 1].seg_size), 0);
	assert_int_equal(clanq_ep_create(&dev, &eps[n - 1], 2), 0);
	assert_int_equal(clanq_ep_create(&dev, &extra, 2), -ENOMEM);

	/* destroying the usual way (destroy + unmap) gives the bytes back */
	assert_int_equal(clanq_ep_destroy(&eps[n - 1]), 0);
	assert_int_equal(clanq_ep_create(&dev, &eps[n - 1], 2), 0);
	assert_int_equal(clanq_ep_create(&dev, &extra, 2), -ENOMEM);

	/* closing gives everything back (kmemleak checks the rest) */
	assert_int_equal(clanq_close(&dev), 0);
	while (n--)
		munmap(eps[n].seg, eps[n].seg_size);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_ep_create(&dev, &eps[0], 2), 0);
	assert_int_equal(clanq_evq_create(&dev, &evq, 1), 0);
	assert_int_equal(clanq_evq_destroy(&evq), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

static void endpoints_of_a_context_stop_at_max_eps_with_enospc(void **state)
{
	static struct clanq_ep eps[MAX_EPS];
	unsigned long limit = itest_param("max_eps");
	struct clanq_dev dev;
	unsigned int n;
	int err = 0;

	(void)state;
	assert_true(limit < MAX_EPS);
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	for (n = 0; n < MAX_EPS; n++) {
		err = clanq_ep_create(&dev, &eps[n], 2);
		if (err)
			break;
	}
	assert_int_equal(err, -ENOSPC);
	assert_int_equal(n, limit);
	assert_int_equal(clanq_close(&dev), 0);
	while (n--)
		munmap(eps[n].seg, eps[n].seg_size);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(segments_of_a_context_stop_at_max_ctx_bytes_with_enomem,
						budget_small, budget_restore),
		cmocka_unit_test(endpoints_of_a_context_stop_at_max_eps_with_enospc),
	};

	return cmocka_run_group_tests_name("limits", tests, NULL, NULL);
}
