// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-info: list the soft NICs of this kernel and what each says of
 * itself. Exits 1 if there is none or one does not answer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <clanq.h>

int main(void)
{
	struct clanq_dev dev;
	unsigned int i;
	int err;

	printf("%-12s %6s %5s %8s\n", "device", "node", "abi", "nr_nics");
	for (i = 0; ; i++) {
		err = clanq_open_nic(&dev, i);
		if (err == -ENOENT)
			break;
		if (err) {
			fprintf(stderr, "clanq-info: %s%u: %s\n",
				CLANQ_DEV_PREFIX, i, strerror(-err));
			return 1;
		}
		printf("%s%-2u %6u %5u %8u\n", CLANQ_DEV_PREFIX, i, dev.node,
		       CLANQ_ABI_VERSION, dev.nr_nics);
		clanq_close(&dev);
	}
	if (i == 0) {
		fprintf(stderr, "clanq-info: no %s* device: is clanq.ko loaded?\n",
			CLANQ_DEV_PREFIX);
		return 1;
	}
	return 0;
}
