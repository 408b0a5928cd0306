// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Module load publishes nothing half-built: clanq.ko is unloaded and
 * loaded again with each step of bringing its NICs up failed in turn
 * (the module's fail_load fault attribute: build each NIC, then register
 * each). Every failed load must leave nothing behind: no /dev/clanqN, no
 * module. A load whose every step succeeds works. It ends with the module
 * loaded as the harness loaded it (the arguments in /clanq/modargs), so
 * the harness's own unload and kmemleak scan follow.
 *
 * Runs last in the test VM, as root, with nothing else using clanq.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>
#include <clanq.h>

#include "itest.h"

#define MODULE_PATH	"/clanq/clanq.ko"
#define ARGS_PATH	"/clanq/modargs"

static char modargs[256];

static void read_modargs(void)
{
	FILE *f = fopen(ARGS_PATH, "r");
	size_t n;

	modargs[0] = 0;
	if (!f)
		return;
	n = fread(modargs, 1, sizeof(modargs) - 1, f);
	fclose(f);
	modargs[n] = 0;
	while (n && (modargs[n - 1] == '\n' || modargs[n - 1] == ' '))
		modargs[--n] = 0;
}

static int load(void)
{
	int fd = open(MODULE_PATH, O_RDONLY | O_CLOEXEC);
	int r;

	assert_true(fd >= 0);
	r = (int)syscall(SYS_finit_module, fd, modargs, 0);
	r = r ? -errno : 0;
	close(fd);
	return r;
}

static int unload(void)
{
	return syscall(SYS_delete_module, "clanq", O_NONBLOCK) ? -errno : 0;
}

/*
 * The verbs wire's module uses clanq's symbols: it goes first, and comes
 * back last, as the harness loaded it (if it did).
 */
#define VERBS_PATH	"/clanq/clanq_verbs.ko"

static bool verbs_loaded;

static void verbs_unload(void)
{
	verbs_loaded = access("/sys/module/clanq_verbs", F_OK) == 0;
	if (verbs_loaded)
		assert_int_equal(syscall(SYS_delete_module, "clanq_verbs", O_NONBLOCK), 0);
}

static void verbs_reload(void)
{
	int fd;

	if (!verbs_loaded)
		return;
	fd = open(VERBS_PATH, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(syscall(SYS_finit_module, fd, "", 0), 0);
	close(fd);
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Load with step @k of the bring-up failed (0: none). */
static int load_failing(unsigned int k)
{
	char base[sizeof(modargs)];
	int r;

	memcpy(base, modargs, sizeof(base));
	if (k)
		snprintf(modargs + strlen(modargs), sizeof(modargs) - strlen(modargs),
			 " fail_load=%u,100,0,1", k);
	r = load();
	memcpy(modargs, base, sizeof(base));
	return r;
}

static void a_load_failing_at_any_step_leaves_nothing_behind(void **state)
{
	unsigned long nr = itest_param("nr_nics");
	struct clanq_dev dev;
	char path[32];
	unsigned int k, i;

	(void)state;
	read_modargs();
	assert_true(nr >= 2);
	verbs_unload();
	assert_int_equal(unload(), 0);
	assert_false(exists("/dev/clanq0"));

	for (k = 1; k <= 2 * nr; k++) {
		assert_int_equal(load_failing(k), -ENOMEM);
		for (i = 0; i < nr; i++) {
			snprintf(path, sizeof(path), "/dev/clanq%u", i);
			assert_false(exists(path));
		}
		assert_false(exists("/sys/module/clanq"));
	}
	/* one step more than there are: nothing fails */
	assert_int_equal(load_failing(2 * nr + 1), 0);
	for (i = 0; i < nr; i++) {
		assert_int_equal(clanq_open_nic(&dev, i), 0);
		assert_int_equal(clanq_close(&dev), 0);
	}
	assert_int_equal(unload(), 0);
	printf("modload: %u bring-up steps failed in turn, each unwound\n",
	       (unsigned int)(2 * nr));

	/* as the harness loaded it */
	assert_int_equal(load(), 0);
	verbs_reload();
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_int_equal(clanq_close(&dev), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_load_failing_at_any_step_leaves_nothing_behind),
	};

	return cmocka_run_group_tests_name("modload", tests, NULL, NULL);
}
