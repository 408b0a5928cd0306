// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * exec-probe NIC STATUS: the program tests/vm/exec-test.sh hands to
 * `vm.sh exec`, as a user's own would be: linked against the tree's
 * libclanq.so.2 (so the run also proves the library reached the VM).
 * Opens /dev/clanq<NIC>, prints what the driver said, and exits STATUS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <clanq.h>

int main(int argc, char **argv)
{
	struct clanq_dev dev;
	int err;

	if (argc != 3) {
		fprintf(stderr, "usage: exec-probe NIC STATUS\n");
		return 2;
	}
	err = clanq_open_nic(&dev, (unsigned int)atoi(argv[1]));
	if (err) {
		printf("exec-probe: clanq_open_nic(%s): %s\n", argv[1], strerror(-err));
		return 1;
	}
	printf("exec-probe: node %u of %u NICs\n", dev.node, dev.nr_nics);
	clanq_close(&dev);
	printf("exec-probe: exiting %d\n", atoi(argv[2]));
	return atoi(argv[2]);
}
