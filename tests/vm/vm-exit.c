// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * vm-exit STATUS: leave the test VM with a real exit status.
 *
 * qemu's isa-debug-exit device (iobase 0xf4) ends qemu when the guest
 * writes to its port; qemu then exits with (STATUS << 1) | 1, which the
 * harness decodes. Needs CONFIG_X86_IOPL_IOPERM. Falls back to a plain
 * power-off, which the harness reads as "status unknown".
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/io.h>
#include <sys/reboot.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int status = argc > 1 ? atoi(argv[1]) : 1;

	sync();
	if (ioperm(0xf4, 4, 1) == 0)
		outb((unsigned char)status, 0xf4);
	else
		perror("vm-exit: ioperm");
	reboot(RB_POWER_OFF);
	return 1;
}
