/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * clanqctl's arguments and the sysfs lines it reads, parsed strictly:
 * pure functions, here so that tests/unit/test_clanqctl.c checks them
 * without a NIC. Each returns NULL on success, or what is wrong with the
 * text, for a message that ends in the argument itself.
 */
#ifndef CLANQ_TOOLS_CLANQCTL_H
#define CLANQ_TOOLS_CLANQCTL_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clanq.h>

/* Decimal digits only (no sign, blank or 0x), at most max. */
static inline bool ctl_parse_uint(const char *s, unsigned long max,
				  unsigned long *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoul(s, &end, 10);
	return !errno && !*end && *v <= max;
}

/* A NIC: "clanq3", "3" or "/dev/clanq3". */
static inline const char *ctl_parse_nic(const char *s, unsigned int *index)
{
	unsigned long v;

	if (!strncmp(s, CLANQ_DEV_PREFIX, strlen(CLANQ_DEV_PREFIX)))
		s += strlen(CLANQ_DEV_PREFIX);
	else if (!strncmp(s, "clanq", 5))
		s += 5;
	if (!ctl_parse_uint(s, 1u << 20, &v))
		return "not a NIC (clanqN, N or " CLANQ_DEV_PREFIX "N)";
	*index = (unsigned int)v;
	return NULL;
}

/* A node id: a decimal u32, not CLANQ_NODE_INVALID. */
static inline const char *ctl_parse_node(const char *s, uint32_t *node)
{
	unsigned long v;

	if (!ctl_parse_uint(s, CLANQ_NODE_INVALID - 1ul, &v))
		return "not a node id (decimal, 0 to 4294967294)";
	*node = (uint32_t)v;
	return NULL;
}

/* A TCP/UDP port, 1..65535. */
static inline const char *ctl_parse_port(const char *s, unsigned int *port)
{
	unsigned long v;

	if (!ctl_parse_uint(s, 65535, &v) || !v)
		return "not a port (1 to 65535)";
	*port = (unsigned int)v;
	return NULL;
}

/*
 * ADDR[:PORT]: a dotted IPv4 address a peer can have (not 0.0.0.0,
 * 255.255.255.255 or multicast), in network byte order; *port is 0 (the
 * verbs wire's port) when there is none.
 */
static inline const char *ctl_parse_addr(const char *s, uint32_t *ipv4_be,
					 unsigned int *port)
{
	const char *colon = strchr(s, ':');
	struct in_addr in;
	char host[INET_ADDRSTRLEN];
	size_t n = colon ? (size_t)(colon - s) : strlen(s);
	uint32_t h;

	*port = 0;
	if (n >= sizeof(host))
		return "not an IPv4 address (a.b.c.d[:port])";
	memcpy(host, s, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, &in) != 1)
		return "not an IPv4 address (a.b.c.d[:port])";
	h = ntohl(in.s_addr);
	if (h == 0 || h == 0xffffffffu)
		return "not an address a peer can have";
	if ((h >> 28) == 0xe)
		return "a multicast address: a peer needs its own";
	if (colon && ctl_parse_port(colon + 1, port))
		return "not a port (1 to 65535) after the ':'";
	*ipv4_be = in.s_addr;
	return NULL;
}

/* An RDMA device's name, as CLANQ_IOC_WIRE_BIND takes it. */
static inline const char *ctl_check_rdma_dev(const char *s)
{
	if (!*s)
		return "an empty device name (unbind is 'unbind')";
	if (strlen(s) >= CLANQ_WIRE_DEV_MAX)
		return "a device name longer than an RDMA device's can be";
	return NULL;
}


/* The NIC's verbs binding, from sysfs clanqN/verbs. */
struct ctl_verbs {
	bool bound;
	char dev[CLANQ_WIRE_DEV_MAX];
	unsigned int port;
	char from[INET_ADDRSTRLEN];	/* "-": the device's netdev has none */
};

/* "unbound" or "<dev> <port> <ipv4 or ->", the newline gone. */
static inline const char *ctl_parse_verbs(const char *line, struct ctl_verbs *v)
{
	char dev[CLANQ_WIRE_DEV_MAX], port[16], from[INET_ADDRSTRLEN], extra;
	struct in_addr in;
	unsigned long p;

	memset(v, 0, sizeof(*v));
	if (!strcmp(line, "unbound"))
		return NULL;
	if (sscanf(line, "%63s %15s %15s %c", dev, port, from, &extra) != 3 ||
	    !ctl_parse_uint(port, CLANQ_NODE_INVALID, &p) ||
	    (strcmp(from, "-") && inet_pton(AF_INET, from, &in) != 1))
		return "not 'unbound' nor '<device> <port> <ipv4>'";
	v->bound = true;
	snprintf(v->dev, sizeof(v->dev), "%s", dev);
	v->port = (unsigned int)p;
	snprintf(v->from, sizeof(v->from), "%s", from);
	return NULL;
}

#endif /* CLANQ_TOOLS_CLANQCTL_H */
