// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * CLANQ_IOC_LAST_ERROR and clanq_last_error(): a refusal reaches the
 * caller in words. A fresh context has none; a limit names itself and
 * its numbers, with the errno the call returned; a garbage argument
 * says which field was wrong; what one context was refused is not
 * another's to read; and the ioctl's own argument is checked like every
 * other (flags and reserved words). Runs in the test VM as root.
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
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

#define MAX_EPS	8192

static struct clanq_ioc_last_error last_error(int fd)
{
	struct clanq_ioc_last_error e;

	memset(&e, 0, sizeof(e));
	assert_int_equal(ioctl(fd, CLANQ_IOC_LAST_ERROR, &e), 0);
	/* the driver's words always end within the buffer */
	assert_non_null(memchr(e.msg, 0, sizeof(e.msg)));
	return e;
}

/* 1. A context nothing was refused to has nothing to say. */
static void a_fresh_context_has_no_error(void **state)
{
	struct clanq_ioc_last_error e;
	struct clanq_dev dev;
	char buf[CLANQ_ERR_MAX] = "x";

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	e = last_error(dev.fd);
	assert_int_equal(e.seq, 0);
	assert_int_equal(e.err, 0);
	assert_string_equal(e.msg, "");
	assert_int_equal(clanq_last_error(&dev, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	assert_string_equal(clanq_strerror_last(&dev), "");
	assert_int_equal(clanq_close(&dev), 0);
}

/*
 * 2. A limit names itself: max_eps, with the count, and the errno the
 * call returned; the library says the same and leaves errno alone.
 */
static void a_limit_names_itself_and_its_errno(void **state)
{
	static struct clanq_ep eps[MAX_EPS];
	unsigned long limit = itest_param("max_eps");
	struct clanq_ioc_last_error e;
	char buf[CLANQ_ERR_MAX], want[64];
	struct clanq_dev dev;
	unsigned int n;
	int err;

	(void)state;
	assert_true(limit < MAX_EPS);
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	n = itest_eps_until_refused(&dev, eps, MAX_EPS, &err);
	assert_int_equal(err, -ENOSPC);
	e = last_error(dev.fd);
	assert_true(e.seq >= 1);
	assert_int_equal(e.err, -ENOSPC);
	snprintf(want, sizeof(want), "has %u endpoints already: max_eps", n);
	if (!strstr(e.msg, "EP_CREATE") || !strstr(e.msg, want))
		fail_msg("LAST_ERROR says '%s', not EP_CREATE ... '%s'", e.msg, want);

	errno = 1234;
	assert_int_equal(clanq_last_error(&dev, buf, sizeof(buf)), -ENOSPC);
	assert_int_equal(errno, 1234);
	assert_string_equal(buf, e.msg);
	assert_string_equal(clanq_strerror_last(&dev), e.msg);
	/* truncated to the caller's room, still a string */
	assert_int_equal(clanq_last_error(&dev, buf, 8), -ENOSPC);
	assert_int_equal(strlen(buf), 7);
	assert_memory_equal(buf, e.msg, 7);

	/* asking again changes nothing; a success clears nothing either */
	assert_int_equal(last_error(dev.fd).seq, e.seq);
	assert_int_equal(clanq_ep_destroy(&eps[--n]), 0);
	assert_int_equal(last_error(dev.fd).seq, e.seq);
	assert_string_equal(last_error(dev.fd).msg, e.msg);

	assert_int_equal(clanq_close(&dev), 0);
	while (n--)
		munmap(eps[n].seg, eps[n].seg_size);
}

/* 3. Garbage says which field was wrong; the next refusal replaces it. */
static void garbage_says_what_was_wrong(void **state)
{
	struct clanq_ioc_ep_create c;
	struct clanq_ioc_region_free f;
	struct clanq_ioc_last_error e;
	struct clanq_dev dev;
	uint64_t seq;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	memset(&c, 0, sizeof(c));
	c.flags = 0x80000000u;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_EP_CREATE, &c), EINVAL);
	e = last_error(dev.fd);
	assert_int_equal(e.err, -EINVAL);
	if (!strstr(e.msg, "EP_CREATE") || !strstr(e.msg, "flags"))
		fail_msg("LAST_ERROR says '%s', not EP_CREATE's flags", e.msg);
	seq = e.seq;

	memset(&f, 0, sizeof(f));
	f.reserved[1] = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_FREE, &f), EINVAL);
	e = last_error(dev.fd);
	assert_int_equal(e.seq, seq + 1);
	if (!strstr(e.msg, "REGION_FREE") || !strstr(e.msg, "reserved"))
		fail_msg("LAST_ERROR says '%s', not REGION_FREE's reserved words", e.msg);

	/* a region that is not there: the handler's own words, its errno */
	memset(&f, 0, sizeof(f));
	f.id = 0x7fffffff;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_REGION_FREE, &f), ENOENT);
	e = last_error(dev.fd);
	assert_int_equal(e.seq, seq + 2);
	assert_int_equal(e.err, -ENOENT);
	assert_non_null(strstr(e.msg, "REGION_FREE"));
	assert_int_equal(clanq_close(&dev), 0);
}

/* 4. A context reads its own refusals only, not another's on that NIC. */
static void refusals_are_the_contexts_own(void **state)
{
	struct clanq_ioc_ep_create c;
	struct clanq_dev a, b;

	(void)state;
	assert_int_equal(clanq_open_nic(&a, 0), 0);
	assert_int_equal(clanq_open_nic(&b, 0), 0);
	memset(&c, 0, sizeof(c));
	c.flags = 0x80000000u;
	assert_int_equal(itest_ioctl_err(a.fd, CLANQ_IOC_EP_CREATE, &c), EINVAL);
	assert_true(last_error(a.fd).seq >= 1);
	assert_int_equal(last_error(b.fd).seq, 0);
	assert_string_equal(last_error(b.fd).msg, "");
	assert_int_equal(clanq_close(&a), 0);
	assert_int_equal(clanq_close(&b), 0);
}

/* 5. LAST_ERROR's own argument: flags and reserved words must be zero. */
static void its_own_argument_is_checked(void **state)
{
	struct clanq_ioc_last_error e;
	struct clanq_dev dev;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	memset(&e, 0, sizeof(e));
	e.flags = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_LAST_ERROR, &e), EINVAL);
	memset(&e, 0, sizeof(e));
	e.reserved[0] = 1;
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_LAST_ERROR, &e), EINVAL);
	/* garbage in the out fields is overwritten, not refused */
	memset(&e, 0xff, offsetof(struct clanq_ioc_last_error, flags));
	memset(e.msg, 'z', sizeof(e.msg));
	e.flags = 0;
	memset(e.reserved, 0, sizeof(e.reserved));
	assert_int_equal(ioctl(dev.fd, CLANQ_IOC_LAST_ERROR, &e), 0);
	assert_int_equal(e.seq, 2);
	assert_non_null(strstr(e.msg, "LAST_ERROR"));
	/* an unmapped argument is -EFAULT, and not a note */
	assert_int_equal(itest_ioctl_err(dev.fd, CLANQ_IOC_LAST_ERROR,
					 (void *)0xffff800000000000ull), EFAULT);
	assert_int_equal(last_error(dev.fd).seq, 2);
	assert_int_equal(clanq_close(&dev), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_fresh_context_has_no_error),
		cmocka_unit_test(a_limit_names_itself_and_its_errno),
		cmocka_unit_test(garbage_says_what_was_wrong),
		cmocka_unit_test(refusals_are_the_contexts_own),
		cmocka_unit_test(its_own_argument_is_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
