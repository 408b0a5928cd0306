// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanqctl's parsers (tools/clanqctl.h): what it accepts of NICs, node
 * ids, addresses, ports and device names, and what it refuses before
 * asking the driver; and the sysfs verbs line it reads.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <clanq/admin.h>

#include "../../tools/clanqctl.h"

static void a_nic_is_named_three_ways(void **state)
{
	unsigned int i = 99;

	(void)state;
	assert_null(ctl_parse_nic("clanq3", &i));
	assert_int_equal(i, 3);
	assert_null(ctl_parse_nic("0", &i));
	assert_int_equal(i, 0);
	assert_null(ctl_parse_nic("/dev/clanq12", &i));
	assert_int_equal(i, 12);
	i = 99;
	assert_non_null(ctl_parse_nic("", &i));
	assert_non_null(ctl_parse_nic("clanq", &i));
	assert_non_null(ctl_parse_nic("eth0", &i));
	assert_non_null(ctl_parse_nic("-1", &i));
	assert_non_null(ctl_parse_nic("+1", &i));
	assert_non_null(ctl_parse_nic(" 1", &i));
	assert_non_null(ctl_parse_nic("1x", &i));
	assert_non_null(ctl_parse_nic("/dev/clanq", &i));
	assert_non_null(ctl_parse_nic("99999999999999999999", &i));
	assert_int_equal(i, 99);
}

static void a_node_is_a_decimal_u32_but_the_invalid_one(void **state)
{
	uint32_t n = 7;

	(void)state;
	assert_null(ctl_parse_node("0", &n));
	assert_int_equal(n, 0);
	assert_null(ctl_parse_node("20", &n));
	assert_int_equal(n, 20);
	assert_null(ctl_parse_node("4294967294", &n));
	assert_int_equal(n, 0xfffffffeu);
	n = 7;
	assert_non_null(ctl_parse_node("4294967295", &n));	/* CLANQ_NODE_INVALID */
	assert_non_null(ctl_parse_node("4294967296", &n));
	assert_non_null(ctl_parse_node("18446744073709551616", &n));
	assert_non_null(ctl_parse_node("0x14", &n));
	assert_non_null(ctl_parse_node("-1", &n));
	assert_non_null(ctl_parse_node("", &n));
	assert_non_null(ctl_parse_node("20 ", &n));
	assert_int_equal(n, 7);
}

static void a_port_is_1_to_65535(void **state)
{
	unsigned int p = 7;

	(void)state;
	assert_null(ctl_parse_port("1", &p));
	assert_int_equal(p, 1);
	assert_null(ctl_parse_port("65535", &p));
	assert_int_equal(p, 65535);
	p = 7;
	assert_non_null(ctl_parse_port("0", &p));
	assert_non_null(ctl_parse_port("65536", &p));
	assert_non_null(ctl_parse_port("70000", &p));
	assert_non_null(ctl_parse_port("", &p));
	assert_non_null(ctl_parse_port("1e3", &p));
	assert_int_equal(p, 7);
}

static void an_address_is_a_unicast_ipv4_with_a_port_or_not(void **state)
{
	unsigned int port = 99;
	uint32_t ip = 0;

	(void)state;
	assert_null(ctl_parse_addr("192.0.2.7", &ip, &port));
	assert_int_equal(ip, htonl(0xc0000207));
	assert_int_equal(port, 0);		/* the verbs wire's port */
	assert_null(ctl_parse_addr("10.1.2.3:4791", &ip, &port));
	assert_int_equal(ip, htonl(0x0a010203));
	assert_int_equal(port, 4791);
	assert_null(ctl_parse_addr("223.255.255.254:65535", &ip, &port));
	assert_int_equal(ip, htonl(0xdffffffe));
	assert_int_equal(port, 65535);

	ip = 1;
	assert_non_null(ctl_parse_addr("0.0.0.0", &ip, &port));
	assert_non_null(ctl_parse_addr("255.255.255.255", &ip, &port));
	assert_non_null(ctl_parse_addr("224.0.0.1", &ip, &port));
	assert_non_null(ctl_parse_addr("239.255.255.255:5", &ip, &port));
	assert_non_null(ctl_parse_addr("1.2.3", &ip, &port));
	assert_non_null(ctl_parse_addr("1.2.3.256", &ip, &port));
	assert_non_null(ctl_parse_addr("host.example", &ip, &port));
	assert_non_null(ctl_parse_addr("::1", &ip, &port));
	assert_non_null(ctl_parse_addr("1.2.3.4:", &ip, &port));
	assert_non_null(ctl_parse_addr("1.2.3.4:0", &ip, &port));
	assert_non_null(ctl_parse_addr("1.2.3.4:70000", &ip, &port));
	assert_non_null(ctl_parse_addr("1.2.3.4:80:80", &ip, &port));
	assert_non_null(ctl_parse_addr(":80", &ip, &port));
	assert_non_null(ctl_parse_addr("", &ip, &port));
	assert_non_null(ctl_parse_addr("1111.2222.3333.4444.5555", &ip, &port));
	assert_int_equal(ip, 1);		/* untouched when refused */
}

static void a_device_name_fits_the_ioctl(void **state)
{
	char name[CLANQ_WIRE_DEV_MAX + 1];

	(void)state;
	assert_null(ctl_check_rdma_dev("rxe0"));
	memset(name, 'a', sizeof(name));
	name[CLANQ_WIRE_DEV_MAX - 1] = '\0';	/* 63 bytes and its NUL: fits */
	assert_null(ctl_check_rdma_dev(name));
	name[CLANQ_WIRE_DEV_MAX - 1] = 'a';
	name[CLANQ_WIRE_DEV_MAX] = '\0';	/* 64: no room for the NUL */
	assert_non_null(ctl_check_rdma_dev(name));
	assert_non_null(ctl_check_rdma_dev(""));
}

static void the_sysfs_verbs_line_is_read_as_written(void **state)
{
	struct ctl_verbs v;

	(void)state;
	assert_null(ctl_parse_verbs("unbound", &v));
	assert_false(v.bound);
	assert_null(ctl_parse_verbs("rxe0 1 10.0.2.15", &v));
	assert_true(v.bound);
	assert_string_equal(v.dev, "rxe0");
	assert_int_equal(v.port, 1);
	assert_string_equal(v.from, "10.0.2.15");
	assert_null(ctl_parse_verbs("siw_eth0 2 -", &v));
	assert_string_equal(v.dev, "siw_eth0");
	assert_int_equal(v.port, 2);
	assert_string_equal(v.from, "-");
	assert_non_null(ctl_parse_verbs("", &v));
	assert_non_null(ctl_parse_verbs("rxe0", &v));
	assert_non_null(ctl_parse_verbs("rxe0 x 10.0.2.15", &v));
	assert_non_null(ctl_parse_verbs("rxe0 1 10.0.2", &v));
	assert_non_null(ctl_parse_verbs("rxe0 1 10.0.2.15 more", &v));
}

/* clanq_peer_describe() (lib/wire.c): the line clanqctl and clanq-info print */
static void peer_lines_say_everything(void **state)
{
	struct clanq_peer_stat p = {
		.node = 20, .ipv4 = htonl(0x0a000002), .port = 18525,
		.state = CLANQ_PEER_UP, .connects = 2, .oob_sent = 5,
		.oob_received = 4, .send_errors = 1,
	};
	static const char *const names[] = { "idle", "connecting", "up", "down", "?" };
	char buf[256], want[256];
	uint32_t s;
	int n;

	(void)state;
	n = clanq_peer_describe(&p, buf, sizeof(buf));
	assert_int_equal(n, strlen(buf));
	assert_string_equal(buf, "peer 20 10.0.0.2:18525 up, connects 2, sent 5, "
			    "received 4, send errors 1");
	p.last_error = -ETIMEDOUT;
	clanq_peer_describe(&p, buf, sizeof(buf));
	snprintf(want, sizeof(want), "peer 20 10.0.0.2:18525 up (last error: %s), "
		 "connects 2, sent 5, received 4, send errors 1", strerror(ETIMEDOUT));
	assert_string_equal(buf, want);
	p.last_error = 0;
	for (s = 0; s <= 4; s++) {
		p.state = s;
		clanq_peer_describe(&p, buf, sizeof(buf));
		snprintf(want, sizeof(want), " %s, ", names[s]);
		assert_non_null(strstr(buf, want));
	}
	/* a short buffer: cut, terminated, and the length it wanted */
	assert_true(clanq_peer_describe(&p, buf, 8) > 8);
	assert_string_equal(buf, "peer 20");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_nic_is_named_three_ways),
		cmocka_unit_test(a_node_is_a_decimal_u32_but_the_invalid_one),
		cmocka_unit_test(a_port_is_1_to_65535),
		cmocka_unit_test(an_address_is_a_unicast_ipv4_with_a_port_or_not),
		cmocka_unit_test(a_device_name_fits_the_ioctl),
		cmocka_unit_test(the_sysfs_verbs_line_is_read_as_written),
		cmocka_unit_test(peer_lines_say_everything),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
