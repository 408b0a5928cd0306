// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The device and its ABI, through the real driver: every NIC answers the
 * version query, and malformed calls are refused with the right errno.
 * Runs in the test VM, where clanq.ko is loaded with nr_nics=2.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>
#include <clanq/admin.h>

#define MAX_NICS 16

/* errno of a raw ioctl on the first NIC (or 0 if it succeeded) */
static int ioctl_errno(unsigned long cmd, void *arg)
{
	int fd = open(CLANQ_DEV_PREFIX "0", O_RDWR);
	int ret, err;

	assert_true(fd >= 0);
	ret = ioctl(fd, cmd, arg);
	err = ret < 0 ? errno : 0;
	close(fd);
	return err;
}

static void every_nic_reports_the_abi_version_and_its_own_node(void **state)
{
	uint32_t nodes[MAX_NICS];
	struct clanq_dev dev;
	unsigned int n, i;

	(void)state;
	for (n = 0; n < MAX_NICS; n++) {
		int err = clanq_open_nic(&dev, n);

		if (err == -ENOENT)
			break;
		assert_int_equal(err, 0);
		nodes[n] = dev.node;
		for (i = 0; i < n; i++)
			assert_int_not_equal(nodes[i], nodes[n]);
		assert_int_not_equal(dev.node, CLANQ_NODE_INVALID);
		assert_int_equal(clanq_close(&dev), 0);
	}
	/* the VM loads the module with nr_nics=2 */
	assert_int_equal(n, 2);
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	assert_int_equal(dev.nr_nics, n);
	clanq_close(&dev);
}

static void query_fills_every_output_field(void **state)
{
	struct clanq_ioc_query q;

	(void)state;
	memset(&q, 0, sizeof(q));
	q.abi_version = 0xdead;		/* outputs: overwritten, not checked */
	q.node = 0xbeef;
	q.nr_nics = 77;
	assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, &q), 0);
	assert_int_equal(q.abi_version, CLANQ_ABI_VERSION);
	assert_int_equal(q.node, 0);
	assert_int_equal(q.nr_nics, 2);
}

static void unknown_ioctl_numbers_are_enotty(void **state)
{
	struct clanq_ioc_query q;

	(void)state;
	memset(&q, 0, sizeof(q));
	assert_int_equal(ioctl_errno(_IOWR('x', 0, struct clanq_ioc_query), &q), ENOTTY);
	assert_int_equal(ioctl_errno(_IOWR(CLANQ_IOC_MAGIC, 0x3f, struct clanq_ioc_query), &q), ENOTTY);
	assert_int_equal(ioctl_errno(_IOWR(CLANQ_IOC_MAGIC, 0xff, struct clanq_ioc_query), &q), ENOTTY);
	assert_int_equal(ioctl_errno(0, &q), ENOTTY);
	assert_int_equal(ioctl_errno(0xffffffffu, &q), ENOTTY);
}

static void query_with_another_size_or_direction_is_enotty(void **state)
{
	char buf[256];

	(void)state;
	memset(buf, 0, sizeof(buf));
	assert_int_equal(ioctl_errno(_IOWR(CLANQ_IOC_MAGIC, 0, char[8]), buf), ENOTTY);
	assert_int_equal(ioctl_errno(_IOWR(CLANQ_IOC_MAGIC, 0, char[sizeof(struct clanq_ioc_query) + 8]), buf), ENOTTY);
	assert_int_equal(ioctl_errno(_IOR(CLANQ_IOC_MAGIC, 0, struct clanq_ioc_query), buf), ENOTTY);
	assert_int_equal(ioctl_errno(_IOW(CLANQ_IOC_MAGIC, 0, struct clanq_ioc_query), buf), ENOTTY);
	assert_int_equal(ioctl_errno(_IO(CLANQ_IOC_MAGIC, 0), buf), ENOTTY);
}

static void nonzero_reserved_fields_and_flags_are_einval(void **state)
{
	struct clanq_ioc_query q;
	unsigned int i;

	(void)state;
	for (i = 0; i < sizeof(q.reserved) / sizeof(q.reserved[0]); i++) {
		memset(&q, 0, sizeof(q));
		q.reserved[i] = 1ull << (i * 17 % 64);
		assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, &q), EINVAL);
	}
	memset(&q, 0, sizeof(q));
	q.flags = 1;
	assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, &q), EINVAL);
	q.flags = 0x80000000u;
	assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, &q), EINVAL);
}

static void bad_argument_pointers_are_efault(void **state)
{
	long page = sysconf(_SC_PAGESIZE);
	void *gone;

	(void)state;
	gone = mmap(NULL, page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(gone != MAP_FAILED);
	munmap(gone, page);
	assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, NULL), EFAULT);
	assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, gone), EFAULT);
	assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, (void *)0xffff888000000000ul), EFAULT);
	/* the struct straddling into an unmapped page */
	gone = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(gone != MAP_FAILED);
	munmap((char *)gone + page, page);
	assert_int_equal(ioctl_errno(CLANQ_IOC_QUERY, (char *)gone + page - 8), EFAULT);
	munmap(gone, page);
}

static void read_write_seek_and_stray_mmap_are_refused(void **state)
{
	int fd = open(CLANQ_DEV_PREFIX "0", O_RDWR);
	char buf[16];

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(write(fd, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(lseek(fd, 0, SEEK_SET), -1);
	assert_int_equal(errno, ESPIPE);
	/* offset 0 names no segment: the driver hands out every offset */
	assert_true(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED);
	assert_int_equal(errno, EINVAL);
	close(fd);
}

static void library_open_reports_what_went_wrong(void **state)
{
	struct clanq_dev dev;

	(void)state;
	assert_int_equal(clanq_open(&dev, "/nonexistent/clanq"), -ENOENT);
	assert_int_equal(clanq_open(&dev, "/dev/null"), -ENOTTY);
	assert_int_equal(clanq_open_nic(&dev, 999), -ENOENT);
	assert_int_equal(clanq_open(&dev, NULL), 0);
	assert_int_equal(dev.node, 0);
	assert_int_equal(clanq_close(&dev), 0);
	assert_int_equal(dev.fd, -1);
	assert_int_equal(clanq_close(&dev), 0);	/* closing twice is harmless */
}

static void many_contexts_open_and_close_independently(void **state)
{
	enum { N = 200 };
	static struct clanq_dev devs[N];
	struct clanq_nic_info q;
	int i;

	(void)state;
	for (i = 0; i < N; i++)
		assert_int_equal(clanq_open_nic(&devs[i], i % 2), 0);
	/* close every other one; the rest still answer */
	for (i = 0; i < N; i += 2)
		assert_int_equal(clanq_close(&devs[i]), 0);
	for (i = 1; i < N; i += 2) {
		assert_int_equal(clanq_query(&devs[i], &q), 0);
		assert_int_equal(q.node, 1);
	}
	for (i = 1; i < N; i += 2)
		assert_int_equal(clanq_close(&devs[i]), 0);
}

static void a_forked_child_shares_the_context(void **state)
{
	struct clanq_ioc_query rq = { 0 };
	struct clanq_dev dev;
	struct clanq_nic_info q;
	int status;
	pid_t pid;

	(void)state;
	assert_int_equal(clanq_open_nic(&dev, 1), 0);
	pid = fork();
	assert_true(pid >= 0);
	/* the file is shared; the library refuses it to the child (clanq(7) FORK) */
	if (pid == 0)
		_exit(ioctl(dev.fd, CLANQ_IOC_QUERY, &rq) == 0 &&
		      rq.node == 1 && clanq_query(&dev, &q) == -EBADFD ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(clanq_query(&dev, &q), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_nic_reports_the_abi_version_and_its_own_node),
		cmocka_unit_test(query_fills_every_output_field),
		cmocka_unit_test(unknown_ioctl_numbers_are_enotty),
		cmocka_unit_test(query_with_another_size_or_direction_is_enotty),
		cmocka_unit_test(nonzero_reserved_fields_and_flags_are_einval),
		cmocka_unit_test(bad_argument_pointers_are_efault),
		cmocka_unit_test(read_write_seek_and_stray_mmap_are_refused),
		cmocka_unit_test(library_open_reports_what_went_wrong),
		cmocka_unit_test(many_contexts_open_and_close_independently),
		cmocka_unit_test(a_forked_child_shares_the_context),
	};

	return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
