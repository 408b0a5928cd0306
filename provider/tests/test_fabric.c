// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The clanq libfabric provider through libfabric itself (debug VM, two
 * soft NICs): fi_getinfo()'s hints and addresses, bad arguments and
 * their error codes, connection management with connection data
 * (accept, reject, nobody listening), messages of every kind with every
 * byte checked, truncation, cancel, shutdown and a killed peer; memory
 * registration and RMA (write, read, inject, writedata) with every byte
 * checked, rights, bad keys and a registration closed under a peer;
 * atomics; counters; FI_CLANQ_NIC; FI_CLANQ_YIELD.
 *
 * FI_PROVIDER_PATH must name the directory of libclanq-fi.so
 * (tests/vm/fabric.sh sets it).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <cmocka.h>
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <clanq/admin.h>

#include "itest.h"
#include "../cfi.h"	/* the provider's own records: test_rndv_hostile_peer */

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>

#define VER		FI_VERSION(1, 17)
#define WAIT_MS		10000
#define LATE_RX_MS	400	/* test_ring_size's receiver naps first */

/*
 * The provider's address (provider/cfi.h: cfi_addr_put()): an IPv6
 * socket address, fd63:6c61:6e71:0:<net id>:<node>, port the service.
 */
#define caddr sockaddr_in6

static uint32_t a_word(const struct sockaddr_in6 *a, int at)
{
	uint32_t w;

	memcpy(&w, a->sin6_addr.s6_addr + at, sizeof(w));
	return ntohl(w);
}

static uint32_t a_node(const struct sockaddr_in6 *a)
{
	return a_word(a, 12);
}

static uint32_t a_service(const struct sockaddr_in6 *a)
{
	return a_word(a, 8) ? a_word(a, 8) : ntohs(a->sin6_port);
}

static void a_set(struct sockaddr_in6 *a, uint32_t node, uint16_t service)
{
	static const uint8_t prefix[8] = { 0xfd, 'c', 'l', 'a', 'n', 'q' };
	uint32_t n = htonl(node);

	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	memcpy(a->sin6_addr.s6_addr, prefix, sizeof(prefix));
	memcpy(a->sin6_addr.s6_addr + 12, &n, sizeof(n));
	a->sin6_port = htons(service);
}

static uint32_t node_of(unsigned int nic)
{
	struct clanq_dev d;
	uint32_t n;

	assert_int_equal(clanq_open_nic(&d, nic), 0);
	n = d.node;
	clanq_close(&d);
	return n;
}

/* what hints_new() asks for: messages, or messages and RMA */
static bool want_rma;

static struct fi_info *hints_new(void)
{
	struct fi_info *h = fi_allocinfo();

	assert_non_null(h);
	h->fabric_attr->prov_name = strdup("clanq");
	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG;
	if (want_rma) {
		h->caps |= FI_RMA | FI_ATOMIC;
		h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_PROV_KEY |
					  FI_MR_ALLOCATED | FI_MR_VIRT_ADDR;
	}
	return h;
}

static int count_infos(struct fi_info *fi)
{
	int n = 0;

	for (; fi; fi = fi->next)
		n++;
	return n;
}

static int getinfo(const char *node, const char *service, uint64_t flags,
		   struct fi_info *hints, struct fi_info **out)
{
	*out = NULL;
	return fi_getinfo(VER, node, service, flags, hints, out);
}

/* ---- fi_getinfo ---------------------------------------------------------- */

static void test_getinfo_defaults(void **state)
{
	struct fi_info *h = hints_new(), *fi, *f;
	int i = 0;

	(void)state;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 2);	/* one per soft NIC */
	for (f = fi; f; f = f->next, i++) {
		char name[16];

		snprintf(name, sizeof(name), "clanq%d", i);
		assert_string_equal(f->fabric_attr->prov_name, "clanq");
		assert_string_equal(f->fabric_attr->name, name);
		assert_string_equal(f->domain_attr->name, name);
		assert_int_equal(f->ep_attr->type, FI_EP_MSG);
		assert_true((f->caps & (FI_MSG | FI_SEND | FI_RECV)) ==
			    (FI_MSG | FI_SEND | FI_RECV));
		assert_false(f->caps & (FI_RMA | FI_TAGGED | FI_ATOMIC));
		assert_int_equal(f->mode, 0);
		assert_int_equal(f->addr_format, FI_SOCKADDR_IN6);
		assert_int_equal(f->domain_attr->threading, FI_THREAD_SAFE);
		assert_int_equal(f->domain_attr->data_progress, FI_PROGRESS_MANUAL);
		assert_int_equal(f->domain_attr->control_progress, FI_PROGRESS_MANUAL);
		assert_int_equal(f->domain_attr->cq_data_size, 8);
		assert_int_equal(f->domain_attr->mr_mode, 0);
		assert_int_equal(f->tx_attr->inject_size, 1024);
		assert_int_equal(f->tx_attr->iov_limit, 4);
		assert_int_equal(f->rx_attr->iov_limit, 4);
		assert_true(f->ep_attr->max_msg_size >= (1u << 30) - 64);
		assert_true(f->tx_attr->msg_order & FI_ORDER_SAS);
		assert_null(f->src_addr);
		assert_null(f->dest_addr);
	}
	fi_freeinfo(fi);

	/* no hints at all: ours among the rest */
	assert_int_equal(getinfo(NULL, NULL, 0, NULL, &fi), 0);
	for (i = 0, f = fi; f; f = f->next)
		i += !strcmp(f->fabric_attr->prov_name, "clanq");
	assert_int_equal(i, 2);
	fi_freeinfo(fi);

	/* a domain by name */
	free(h->domain_attr->name);
	h->domain_attr->name = strdup("clanq1");
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 1);
	assert_string_equal(fi->domain_attr->name, "clanq1");
	fi_freeinfo(fi);
	fi_freeinfo(h);
}

/*
 * FI_CLANQ_NIC (libfabric reads its parameters from the environment at
 * each fi_getinfo()): one NIC by name or number; garbage, a NIC that is
 * not there, a sign or trailing words offer nothing; unset, both again.
 */
static void test_getinfo_one_nic(void **state)
{
	static const char *const garbage[] = {
		"clanq2", "2", "clanq", "clanq-1", "-1", "1x", "clanq1 ", " 1", "x",
		"clanq4294967296", "99999999999999999999",
	};
	struct fi_info *h = hints_new(), *fi;

	(void)state;
	setenv("FI_CLANQ_NIC", "clanq1", 1);
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 1);
	assert_string_equal(fi->domain_attr->name, "clanq1");
	fi_freeinfo(fi);
	setenv("FI_CLANQ_NIC", "0", 1);
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 1);
	assert_string_equal(fi->domain_attr->name, "clanq0");
	fi_freeinfo(fi);
	/* one NIC and a domain hint naming the other: nothing */
	free(h->domain_attr->name);
	h->domain_attr->name = strdup("clanq1");
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	free(h->domain_attr->name);
	h->domain_attr->name = NULL;
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		setenv("FI_CLANQ_NIC", garbage[i], 1);
		assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
		assert_null(fi);
	}
	setenv("FI_CLANQ_NIC", "", 1);	/* empty: as if unset */
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 2);
	fi_freeinfo(fi);
	unsetenv("FI_CLANQ_NIC");
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 2);
	fi_freeinfo(fi);
	fi_freeinfo(h);
}

/* what the provider cannot give: -FI_ENODATA, each alone */
static void test_getinfo_refused(void **state)
{
	struct fi_info *h, *fi;
	int k, ret;

	(void)state;
	for (k = 0; k < 12; k++) {
		h = hints_new();
		switch (k) {
		case 0:
			/* FI_EP_RDM is ofi_rxm's over us (test_getinfo_rma) */
			h->ep_attr->type = FI_EP_SOCK_STREAM;
			break;
		case 1:
			h->ep_attr->type = FI_EP_DGRAM;
			break;
		case 2:
			h->caps |= FI_RMA;	/* keys the application picks */
			h->domain_attr->mr_mode = FI_MR_LOCAL;
			break;
		case 3:
			h->caps |= FI_TAGGED;
			break;
		case 4:
			h->caps |= FI_MULTICAST;
			break;
		case 5:
			h->domain_attr->data_progress = FI_PROGRESS_AUTO;
			break;
		case 6:
			h->tx_attr->inject_size = 4096;
			break;
		case 7:
			h->addr_format = FI_SOCKADDR_IN;
			break;
		case 8:
			h->domain_attr->name = strdup("clanq7");
			break;
		case 9:
			h->tx_attr->iov_limit = 5;
			break;
		case 10:
			h->ep_attr->max_msg_size = 1ull << 31;
			break;
		case 11:
			h->domain_attr->cq_data_size = 16;
			break;
		}
		ret = getinfo(NULL, NULL, 0, h, &fi);
		if (ret != -FI_ENODATA)
			fail_msg("case %d: %d, not -FI_ENODATA", k, ret);
		assert_null(fi);
		fi_freeinfo(h);
	}
}

static void test_getinfo_addresses(void **state)
{
	uint32_t n0 = node_of(0), n1 = node_of(1);
	struct fi_info *h = hints_new(), *fi;
	struct caddr a;
	char node[16];

	(void)state;
	/* FI_SOURCE: our own node and a service; only that NIC */
	snprintf(node, sizeof(node), "%u", n1);
	assert_int_equal(getinfo(node, "77", FI_SOURCE, h, &fi), 0);
	assert_int_equal(count_infos(fi), 1);
	assert_string_equal(fi->domain_attr->name, "clanq1");
	assert_int_equal(fi->src_addrlen, sizeof(a));
	memcpy(&a, fi->src_addr, sizeof(a));
	assert_int_equal(a_node(&a), n1);
	assert_int_equal(a_service(&a), 77);
	assert_null(fi->dest_addr);
	fi_freeinfo(fi);

	/* a service alone: a source on each NIC */
	assert_int_equal(getinfo(NULL, "78", 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 2);
	memcpy(&a, fi->next->src_addr, sizeof(a));
	assert_int_equal(a_node(&a), n1);
	assert_int_equal(a_service(&a), 78);
	fi_freeinfo(fi);

	/* node and service: where to connect, from any NIC */
	snprintf(node, sizeof(node), "%u", n0);
	assert_int_equal(getinfo(node, "79", 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 2);
	assert_int_equal(fi->dest_addrlen, sizeof(a));
	memcpy(&a, fi->dest_addr, sizeof(a));
	assert_int_equal(a_node(&a), n0);
	assert_int_equal(a_service(&a), 79);
	fi_freeinfo(fi);

	/* hints' dest_addr, as fi_pingpong passes fi_getname()'s */
	a_set(&a, n1, 4242);
	h->dest_addr = malloc(sizeof(a));
	memcpy(h->dest_addr, &a, sizeof(a));
	h->dest_addrlen = sizeof(a);
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	memcpy(&a, fi->dest_addr, sizeof(a));
	assert_int_equal(a_node(&a), n1);
	assert_int_equal(a_service(&a), 4242);
	fi_freeinfo(fi);
	h->dest_addrlen = 3;	/* not ours */
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	fi_freeinfo(h);

	/* not clanq addresses */
	h = hints_new();
	assert_int_equal(getinfo("10.0.0.1", "79", 0, h, &fi), -FI_ENODATA);
	assert_int_equal(getinfo(node, "0", 0, h, &fi), -FI_ENODATA);
	assert_int_equal(getinfo(node, "65536", 0, h, &fi), -FI_ENODATA);
	assert_int_equal(getinfo(node, "x", 0, h, &fi), -FI_ENODATA);
	assert_int_equal(getinfo(node, NULL, 0, h, &fi), -FI_ENODATA);
	snprintf(node, sizeof(node), "%u", n0 + n1 + 1000);	/* no such NIC here */
	assert_int_equal(getinfo(node, "79", FI_SOURCE, h, &fi), -FI_ENODATA);
	/* an IPv6 address that is not of clanq's prefix */
	a_set(&a, n1, 4242);
	a.sin6_addr.s6_addr[0] = 0xfe;
	h->dest_addr = malloc(sizeof(a));
	memcpy(h->dest_addr, &a, sizeof(a));
	h->dest_addrlen = sizeof(a);
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	fi_freeinfo(h);

	/* the formats: IPv6 asked by name, or any socket address */
	h = hints_new();
	h->addr_format = FI_SOCKADDR_IN6;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	fi_freeinfo(fi);
	h->addr_format = FI_SOCKADDR;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(fi->addr_format, FI_SOCKADDR_IN6);
	fi_freeinfo(fi);
	h->addr_format = FI_SOCKADDR_IB;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	fi_freeinfo(h);
}

/* ---- a side: fabric, domain, EQ, CQs, endpoint ---------------------------- */

struct side {
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_eq *eq;
	struct fid_cq *tcq, *rcq;
	struct fid_pep *pep;
	struct fid_ep *ep;
	struct fid_cntr *csend, *crecv, *crma;	/* with_cntrs */
	struct side *peer;	/* poked while we wait: one thread, two sides */
};

/* side_cqs_ep() also binds counters: sends, receives, RMA and atomics */
static bool with_cntrs;

static struct fi_info *info_for(unsigned int nic)
{
	struct fi_info *h = hints_new(), *fi;
	char name[16];

	snprintf(name, sizeof(name), "clanq%u", nic);
	h->domain_attr->name = strdup(name);
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	fi_freeinfo(h);
	return fi;
}

/* the EQs' and CQs' wait object side_open() and side_cqs_ep() ask for */
static enum fi_wait_obj wait_obj = FI_WAIT_UNSPEC;

static void side_open(struct side *s, unsigned int nic)
{
	struct fi_eq_attr ea = { .wait_obj = wait_obj };

	memset(s, 0, sizeof(*s));
	s->info = info_for(nic);
	assert_int_equal(fi_fabric(s->info->fabric_attr, &s->fab, NULL), 0);
	assert_int_equal(fi_eq_open(s->fab, &ea, &s->eq, NULL), 0);
}

static enum fi_cq_format cq_format = FI_CQ_FORMAT_DATA;

static void side_cqs_ep(struct side *s, struct fi_info *info)
{
	struct fi_cq_attr ca = { .format = cq_format, .wait_obj = wait_obj };

	assert_int_equal(fi_domain(s->fab, info, &s->dom, NULL), 0);
	assert_int_equal(fi_cq_open(s->dom, &ca, &s->tcq, NULL), 0);
	assert_int_equal(fi_cq_open(s->dom, &ca, &s->rcq, NULL), 0);
	assert_int_equal(fi_endpoint(s->dom, info, &s->ep, s), 0);
	assert_int_equal(fi_ep_bind(s->ep, &s->eq->fid, 0), 0);
	assert_int_equal(fi_ep_bind(s->ep, &s->tcq->fid, FI_TRANSMIT), 0);
	assert_int_equal(fi_ep_bind(s->ep, &s->rcq->fid, FI_RECV), 0);
	if (with_cntrs) {
		struct fi_cntr_attr a = { .events = FI_CNTR_EVENTS_COMP,
					  .wait_obj = FI_WAIT_FD };

		assert_int_equal(fi_cntr_open(s->dom, &a, &s->csend, NULL), 0);
		assert_int_equal(fi_cntr_open(s->dom, &a, &s->crecv, NULL), 0);
		assert_int_equal(fi_cntr_open(s->dom, NULL, &s->crma, NULL), 0);
		assert_int_equal(fi_ep_bind(s->ep, &s->csend->fid, FI_SEND), 0);
		assert_int_equal(fi_ep_bind(s->ep, &s->crecv->fid, FI_RECV), 0);
		assert_int_equal(fi_ep_bind(s->ep, &s->crma->fid, FI_READ | FI_WRITE), 0);
	}
	assert_int_equal(fi_enable(s->ep), 0);
}

static void side_close(struct side *s)
{
	if (s->ep)
		assert_int_equal(fi_close(&s->ep->fid), 0);
	if (s->pep)
		assert_int_equal(fi_close(&s->pep->fid), 0);
	if (s->csend)
		assert_int_equal(fi_close(&s->csend->fid), 0);
	if (s->crecv)
		assert_int_equal(fi_close(&s->crecv->fid), 0);
	if (s->crma)
		assert_int_equal(fi_close(&s->crma->fid), 0);
	if (s->tcq)
		assert_int_equal(fi_close(&s->tcq->fid), 0);
	if (s->rcq)
		assert_int_equal(fi_close(&s->rcq->fid), 0);
	if (s->eq)
		assert_int_equal(fi_close(&s->eq->fid), 0);
	if (s->dom)
		assert_int_equal(fi_close(&s->dom->fid), 0);
	if (s->fab)
		assert_int_equal(fi_close(&s->fab->fid), 0);
	fi_freeinfo(s->info);
	memset(s, 0, sizeof(*s));
}

/* manual progress of the other side: an EQ read that takes nothing */
static void poke(struct side *s)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 512];
	uint32_t ev;

	if (s && s->eq)
		(void)fi_eq_read(s->eq, &ev, buf, sizeof(buf), FI_PEEK);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* the next EQ event of s: its number, the entry in *e (data: *len) */
static ssize_t wait_eq(struct side *s, uint32_t *ev, struct fi_eq_cm_entry *e,
		       size_t size)
{
	int64_t end = now_ms() + WAIT_MS;
	ssize_t n;

	do {
		n = fi_eq_read(s->eq, ev, e, size, 0);
		if (n != -FI_EAGAIN)
			return n;
		poke(s->peer);
	} while (now_ms() < end);
	return -FI_ETIMEDOUT;
}

/* one completion of cq (s's), or its error (-FI_EAVAIL) */
static ssize_t wait_cq(struct side *s, struct fid_cq *cq,
		       struct fi_cq_data_entry *c)
{
	int64_t end = now_ms() + WAIT_MS;
	ssize_t n;

	do {
		n = fi_cq_read(cq, c, 1);
		if (n != -FI_EAGAIN)
			return n;
		poke(s->peer);
	} while (now_ms() < end);
	return -FI_ETIMEDOUT;
}

static void wait_cq_err(struct side *s, struct fid_cq *cq,
			struct fi_cq_err_entry *e)
{
	struct fi_cq_data_entry c;

	assert_int_equal(wait_cq(s, cq, &c), -FI_EAVAIL);
	memset(e, 0, sizeof(*e));
	assert_int_equal(fi_cq_readerr(cq, e, 0), 1);
}

/*
 * Server on NIC 0 listening (service 0: the provider picks), client on
 * NIC 1 connected with connection data both ways.
 */
static void connect_pair(struct side *srv, struct side *cli)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *e = (void *)buf;
	struct caddr a;
	size_t alen = sizeof(a);
	struct fi_info *ci;
	uint32_t ev;
	ssize_t n;

	side_open(srv, 0);
	side_open(cli, 1);
	srv->peer = cli;
	cli->peer = srv;
	assert_int_equal(fi_passive_ep(srv->fab, srv->info, &srv->pep, NULL), 0);
	assert_int_equal(fi_listen(srv->pep), -FI_ENOEQ);
	assert_int_equal(fi_pep_bind(srv->pep, &srv->eq->fid, 0), 0);
	assert_int_equal(fi_listen(srv->pep), 0);
	assert_int_equal(fi_listen(srv->pep), -FI_EOPBADSTATE);
	assert_int_equal(fi_getname(&srv->pep->fid, &a, &alen), 0);
	assert_int_equal(alen, sizeof(a));
	assert_int_equal(a_node(&a), node_of(0));
	assert_true(a_service(&a) >= 1 && a_service(&a) <= 65535);

	side_cqs_ep(cli, cli->info);
	assert_int_equal(fi_connect(cli->ep, &a, "hello-connreq", 14), 0);

	n = wait_eq(srv, &ev, e, sizeof(buf));
	assert_int_equal(n, sizeof(*e) + 14);
	assert_int_equal(ev, FI_CONNREQ);
	assert_ptr_equal(e->fid, &srv->pep->fid);
	assert_string_equal((char *)e->data, "hello-connreq");
	ci = e->info;
	assert_non_null(ci->handle);
	assert_int_equal(ci->dest_addrlen, sizeof(a));
	memcpy(&a, ci->dest_addr, sizeof(a));
	assert_int_equal(a_node(&a), node_of(1));

	side_cqs_ep(srv, ci);
	fi_freeinfo(ci);
	assert_int_equal(fi_accept(srv->ep, "accept-data", 12), 0);
	n = wait_eq(srv, &ev, e, sizeof(buf));
	assert_int_equal(n, sizeof(*e));
	assert_int_equal(ev, FI_CONNECTED);
	assert_ptr_equal(e->fid, &srv->ep->fid);

	n = wait_eq(cli, &ev, e, sizeof(buf));
	assert_int_equal(n, sizeof(*e) + 12);
	assert_int_equal(ev, FI_CONNECTED);
	assert_ptr_equal(e->fid, &cli->ep->fid);
	assert_string_equal((char *)e->data, "accept-data");
	alen = sizeof(a);
	assert_int_equal(fi_getpeer(cli->ep, &a, &alen), 0);
	assert_int_equal(a_node(&a), node_of(0));
}

static uint8_t pat(uint32_t seq, size_t i)
{
	return (uint8_t)(seq * 131 + i * 7 + (i >> 8));
}

static void fill(uint8_t *p, size_t len, uint32_t seq)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pat(seq, i);
}

static void check(const uint8_t *p, size_t len, uint32_t seq)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] != pat(seq, i))
			fail_msg("message %u: byte %zu of %zu is %#x, not %#x",
				 seq, i, len, p[i], pat(seq, i));
	}
}

struct rx_wait {
	struct side *s;
	struct fi_cq_data_entry c;
	ssize_t n;
};

/*
 * b's side, a thread: it does not poke a, whose thread may hold a's lock
 * in a large send that waits for this very receive to move on.
 */
static void *rx_waiter(void *arg)
{
	struct rx_wait *w = arg;
	struct side me = *w->s;

	me.peer = NULL;
	w->n = wait_cq(&me, w->s->rcq, &w->c);
	return NULL;
}

/*
 * One message from a to b, len bytes, every byte checked. b waits for it
 * in a thread of its own: a send longer than clanq's eager size returns
 * only once the receiver took the rest (FI_THREAD_SAFE: a lock per
 * fabric).
 */
static void one_way(struct side *a, struct side *b, size_t len, uint32_t seq,
		    int how)
{
	uint8_t *tx = malloc(len + 1), *rx = malloc(len + 64);
	struct rx_wait w = { .s = b };
	struct fi_cq_data_entry c;
	void *rctx = (void *)(uintptr_t)(0x1000 + seq);
	void *tctx = (void *)(uintptr_t)(0x2000 + seq);
	pthread_t t;

	fill(tx, len, seq);
	memset(rx, 0xee, len + 64);
	assert_int_equal(fi_recv(b->ep, rx, len + 64, NULL, 0, rctx), 0);
	assert_int_equal(pthread_create(&t, NULL, rx_waiter, &w), 0);
	switch (how) {
	case 0:
		assert_int_equal(fi_send(a->ep, tx, len, NULL, 0, tctx), 0);
		break;
	case 1:
		assert_int_equal(fi_senddata(a->ep, tx, len, NULL,
					     0xfeed0000ull + seq, 0, tctx), 0);
		break;
	case 2:
		assert_int_equal(fi_inject(a->ep, tx, len, 0), 0);
		memset(tx, 0, len);	/* inject: the buffer is ours again */
		break;
	}
	if (how != 2) {
		assert_int_equal(wait_cq(a, a->tcq, &c), 1);
		assert_ptr_equal(c.op_context, tctx);
		assert_true(c.flags & FI_SEND);
		assert_true(c.flags & FI_MSG);
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.n, 1);
	c = w.c;
	assert_ptr_equal(c.op_context, rctx);
	assert_int_equal(c.len, len);
	assert_true(c.flags & FI_RECV);
	if (how == 1) {
		assert_true(c.flags & FI_REMOTE_CQ_DATA);
		assert_int_equal(c.data, 0xfeed0000ull + seq);
	} else {
		assert_false(c.flags & FI_REMOTE_CQ_DATA);
	}
	check(rx, len, seq);
	assert_int_equal(rx[len], 0xee);	/* nothing past the message */
	free(tx);
	free(rx);
}

static void test_exchange(void **state)
{
	static const size_t sizes[] = {
		1, 7, 64, 1000, 1024, 1025, 2000, 4096, 32720, 32721,
		65536, 100000, 1 << 20,
	};
	struct side srv, cli;
	uint32_t seq = 0;
	size_t i;
	int how;

	(void)state;
	connect_pair(&srv, &cli);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		for (how = 0; how < 3; how++) {
			if (how == 2 && sizes[i] > 1024)
				continue;
			one_way(&cli, &srv, sizes[i], seq++, how);
			one_way(&srv, &cli, sizes[i], seq++, how);
		}
	}
	side_close(&cli);
	side_close(&srv);
}

/* b's side, a thread: as rx_waiter(), after a nap and a receive posted */
struct late_rx {
	struct rx_wait w;
	uint8_t *buf;
	size_t len;
};

static void *late_rx_waiter(void *arg)
{
	struct late_rx *l = arg;

	usleep(LATE_RX_MS * 1000);
	if (fi_recv(l->w.s->ep, l->buf, l->len, NULL, 0, l) != 0) {
		l->w.n = -1;
		return NULL;
	}
	return rx_waiter(&l->w);
}

/*
 * FI_CLANQ_RING_SIZE sets each connection's ring, so the eager size:
 * a message of half the ring less the headers (E) completes at the
 * sender while the receiver does nothing, and one of 3E bytes, more
 * than the ring holds, waits for the receiver (a ring larger than asked
 * would have taken it whole). Garbage and sizes out of range are the
 * default (256 KiB). Every byte checked.
 */
static void test_ring_size(void **state)
{
	static const struct {
		const char *env;
		size_t eager;
	} cases[] = {
		{ NULL, 131008 },		/* 262,144 - 64: 131,040 - 16 - 16 */
		{ "65536", 32704 },
		{ "69631", 32704 },		/* down to pages */
		{ "8192", 4032 },
		{ "4096", 131008 },		/* below the least */
		{ "67108865", 131008 },		/* above the most */
		{ "64k", 131008 }, { "-8192", 131008 }, { "", 131008 },
	};
	struct side srv, cli;
	struct fi_cq_data_entry c;
	uint32_t seq = 500;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t e = cases[i].eager;
		uint8_t *tx = malloc(3 * e), *rx = malloc(3 * e + 64);
		struct late_rx l = { .w.s = &srv, .buf = rx, .len = 3 * e + 64 };
		int64_t t0;
		pthread_t t;

		if (cases[i].env)
			setenv("FI_CLANQ_RING_SIZE", cases[i].env, 1);
		else
			unsetenv("FI_CLANQ_RING_SIZE");
		setenv("FI_CLANQ_RNDV_SIZE", "0", 1);	/* the ring alone */
		connect_pair(&srv, &cli);
		unsetenv("FI_CLANQ_RING_SIZE");
		unsetenv("FI_CLANQ_RNDV_SIZE");

		/* E bytes: out and complete with the server untouched */
		fill(tx, e, seq);
		cli.peer = NULL;
		assert_int_equal(fi_send(cli.ep, tx, e, NULL, 0, tx), 0);
		if (wait_cq(&cli, cli.tcq, &c) != 1)
			fail_msg("FI_CLANQ_RING_SIZE=%s: %zu bytes did not go eager",
				 cases[i].env ? cases[i].env : "(unset)", e);
		cli.peer = &srv;
		memset(rx, 0xee, 3 * e + 64);
		assert_int_equal(fi_recv(srv.ep, rx, e + 64, NULL, 0, rx), 0);
		assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
		assert_int_equal(c.len, e);
		check(rx, e, seq);
		assert_int_equal(rx[e], 0xee);
		seq++;

		/* 3E: the send returns only after the late receiver took some */
		fill(tx, 3 * e, seq);
		memset(rx, 0xee, 3 * e + 64);
		assert_int_equal(pthread_create(&t, NULL, late_rx_waiter, &l), 0);
		t0 = now_ms();
		assert_int_equal(fi_send(cli.ep, tx, 3 * e, NULL, 0, tx), 0);
		assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
		if (now_ms() - t0 < LATE_RX_MS / 2)
			fail_msg("FI_CLANQ_RING_SIZE=%s: %zu bytes fit a ring that should hold %zu",
				 cases[i].env ? cases[i].env : "(unset)", 3 * e, 2 * e);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(l.w.n, 1);
		assert_int_equal(l.w.c.len, 3 * e);
		check(rx, 3 * e, seq);
		assert_int_equal(rx[3 * e], 0xee);
		seq++;
		side_close(&cli);
		side_close(&srv);
		free(tx);
		free(rx);
	}
}

/*
 * Messages longer than the eager size go in pieces, and fi_send() never
 * waits for the receiver: both sides send 4 MiB, then 1 MiB with remote
 * CQ data, before either posts a receive (one thread: a send that
 * waited would never return), then receive them. A receive shorter than
 * such a message, or than its first piece, gets what fits (FI_ETRUNC),
 * and the next message is whole; a receive in iovs gets each piece in
 * its place. Every byte.
 */
static void test_pieces_both_ways(void **state)
{
	enum { BIG = 4 << 20, MID = 1 << 20, SHORT = 200000, TINY = 50000 };
	struct side srv, cli, *sd[2] = { &cli, &srv };
	uint8_t *tx[2][2], *rx[2][2];
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry e;
	struct iovec riov[3];
	int i, k;

	(void)state;
	/* pieces, not a rendezvous (test_rndv) */
	assert_int_equal(setenv("FI_CLANQ_RNDV_SIZE", "0", 1), 0);
	connect_pair(&srv, &cli);
	for (i = 0; i < 2; i++) {
		for (k = 0; k < 2; k++) {
			tx[i][k] = malloc(BIG);
			rx[i][k] = malloc(BIG + 64);
			fill(tx[i][k], k ? MID : BIG, 600 + 2 * i + k);
			memset(rx[i][k], 0xee, BIG + 64);
		}
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(fi_send(sd[i]->ep, tx[i][0], BIG, NULL, 0, tx[i][0]), 0);
		assert_int_equal(fi_senddata(sd[i]->ep, tx[i][1], MID, NULL, 0xd00d + i, 0,
					     tx[i][1]), 0);
	}
	for (i = 0; i < 2; i++) {
		/* the 4 MiB one into three iovs, the 1 MiB one into one */
		riov[0] = (struct iovec){ rx[i][0], 1 };
		riov[1] = (struct iovec){ rx[i][0] + 1, 300001 };
		riov[2] = (struct iovec){ rx[i][0] + 300002, BIG + 64 - 300002 };
		assert_int_equal(fi_recvv(sd[i]->ep, riov, NULL, 3, 0, rx[i][0]), 0);
		assert_int_equal(fi_recv(sd[i]->ep, rx[i][1], BIG + 64, NULL, 0, rx[i][1]), 0);
	}
	for (i = 0; i < 2; i++) {
		for (k = 0; k < 2; k++) {
			assert_int_equal(wait_cq(sd[i], sd[i]->tcq, &c), 1);
			assert_ptr_equal(c.op_context, tx[i][k]);
			assert_int_equal(wait_cq(sd[i], sd[i]->rcq, &c), 1);
			assert_ptr_equal(c.op_context, rx[i][k]);
			assert_int_equal(c.len, k ? MID : BIG);
			/* what the other side sent */
			check(rx[i][k], k ? MID : BIG, 600 + 2 * (1 - i) + k);
			assert_int_equal(rx[i][k][k ? MID : BIG], 0xee);
			if (k) {
				assert_true(c.flags & FI_REMOTE_CQ_DATA);
				assert_int_equal(c.data, 0xd00d + (1 - i));
			}
		}
	}

	/* 1 MiB into SHORT bytes: FI_ETRUNC, then a whole one after it */
	memset(rx[1][0], 0xee, BIG + 64);
	assert_int_equal(fi_recv(srv.ep, rx[1][0], SHORT, NULL, 0, rx[1][0]), 0);
	assert_int_equal(fi_send(cli.ep, tx[0][1], MID, NULL, 0, tx[0][1]), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	wait_cq_err(&srv, srv.rcq, &e);
	assert_int_equal(e.err, FI_ETRUNC);
	assert_ptr_equal(e.op_context, rx[1][0]);
	assert_int_equal(e.len, SHORT);
	assert_int_equal(e.olen, MID - SHORT);
	check(rx[1][0], SHORT, 601);
	assert_int_equal(rx[1][0][SHORT], 0xee);
	/* into less than one piece: the first piece itself truncated */
	memset(rx[1][0], 0xee, BIG + 64);
	assert_int_equal(fi_recv(srv.ep, rx[1][0], TINY, NULL, 0, rx[1][0]), 0);
	assert_int_equal(fi_senddata(cli.ep, tx[0][1], MID, NULL, 0xbeef, 0, tx[0][1]), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	wait_cq_err(&srv, srv.rcq, &e);
	assert_int_equal(e.err, FI_ETRUNC);
	assert_int_equal(e.len, TINY);
	assert_int_equal(e.olen, MID - TINY);
	assert_true(e.flags & FI_REMOTE_CQ_DATA);
	assert_int_equal(e.data, 0xbeef);
	check(rx[1][0], TINY, 601);
	assert_int_equal(rx[1][0][TINY], 0xee);
	one_way(&cli, &srv, 77, 11, 0);
	one_way(&cli, &srv, MID + 3, 12, 0);

	assert_int_equal(unsetenv("FI_CLANQ_RNDV_SIZE"), 0);
	side_close(&cli);
	side_close(&srv);
	for (i = 0; i < 2; i++)
		for (k = 0; k < 2; k++) {
			free(tx[i][k]);
			free(rx[i][k]);
		}
}

/* many sends before any receive: queued, in order, none lost */
static void test_queued_in_order(void **state)
{
	enum { N = 64, LEN = 3000 };
	struct side srv, cli;
	static uint8_t tx[N][LEN], rx[N][LEN + 8];
	struct fi_cq_data_entry c;
	int i, sent = 0;

	(void)state;
	connect_pair(&srv, &cli);
	for (i = 0; i < N; i++) {
		fill(tx[i], LEN, 500 + i);
		assert_int_equal(fi_send(cli.ep, tx[i], LEN, NULL, 0,
					 (void *)(uintptr_t)(i + 1)), 0);
	}
	/* 192,000 bytes, a 64 KiB ring: most wait in the endpoint's queue */
	for (i = 0; i < N; i++)
		assert_int_equal(fi_recv(srv.ep, rx[i], sizeof(rx[i]), NULL, 0,
					 (void *)(uintptr_t)(i + 1)), 0);
	for (i = 0; i < N; i++) {
		assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
		assert_ptr_equal(c.op_context, (void *)(uintptr_t)(i + 1));
		assert_int_equal(c.len, LEN);
		check(rx[i], LEN, 500 + i);
	}
	while (sent < N) {
		assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
		assert_ptr_equal(c.op_context, (void *)(uintptr_t)(++sent));
	}
	side_close(&cli);
	side_close(&srv);
}

/*
 * Small messages (the send's straight path, no operation made) into a
 * ring too small for them, before any receive: those that find no room
 * are queued behind, injected ones copied (their buffer is reused at
 * once), and every one arrives whole and in order, its CQ data with it,
 * each fi_send() completing in order.
 */
static void test_small_queued_in_order(void **state)
{
	enum { N = 900, SMALL = 256 };
	static uint8_t tx[N][SMALL], rx[N][SMALL + 8];
	uint8_t scratch[SMALL];
	struct side srv, cli;
	struct fi_cq_data_entry c;
	int i, sent = 0, want = 0;
	size_t len;

	(void)state;
	setenv("FI_CLANQ_RING_SIZE", "16384", 1);
	connect_pair(&srv, &cli);
	unsetenv("FI_CLANQ_RING_SIZE");
	for (i = 0; i < N; i++) {
		len = 1 + (size_t)i * 37 % SMALL;
		switch (i % 3) {
		case 0:		/* injected from one buffer, rewritten at once */
			fill(scratch, len, 7000 + i);
			assert_int_equal(fi_inject(cli.ep, scratch, len, 0), 0);
			memset(scratch, 0xee, sizeof(scratch));
			break;
		case 1:
			fill(tx[i], len, 7000 + i);
			assert_int_equal(fi_send(cli.ep, tx[i], len, NULL, 0,
						 (void *)(uintptr_t)(i + 1)), 0);
			break;
		default:
			fill(tx[i], len, 7000 + i);
			assert_int_equal(fi_senddata(cli.ep, tx[i], len, NULL,
						     0x5000 + i, 0,
						     (void *)(uintptr_t)(i + 1)), 0);
			break;
		}
	}
	for (i = 0; i < N; i++)
		assert_int_equal(fi_recv(srv.ep, rx[i], sizeof(rx[i]), NULL, 0,
					 (void *)(uintptr_t)(i + 1)), 0);
	for (i = 0; i < N; i++) {
		len = 1 + (size_t)i * 37 % SMALL;
		assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
		assert_ptr_equal(c.op_context, (void *)(uintptr_t)(i + 1));
		assert_int_equal(c.len, len);
		check(rx[i], len, 7000 + i);
		if (i % 3 == 2) {
			assert_true(c.flags & FI_REMOTE_CQ_DATA);
			assert_int_equal(c.data, 0x5000 + i);
		} else {
			assert_false(c.flags & FI_REMOTE_CQ_DATA);
		}
	}
	/* the fi_send()s' and fi_senddata()s' completions, in order */
	for (i = 0; i < N; i++)
		want += i % 3 != 0;
	while (sent < want) {
		int next = sent / 2 * 3 + 1 + sent % 2;	/* 1, 2, 4, 5, ... */

		assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
		assert_ptr_equal(c.op_context, (void *)(uintptr_t)(next + 1));
		assert_int_equal(c.len, 1 + (size_t)next * 37 % SMALL);
		sent++;
	}
	assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);
	side_close(&cli);
	side_close(&srv);
}

/* sendmsg with three iovs into recvmsg with two; a truncated one; cancel */
static void test_iov_trunc_cancel(void **state)
{
	struct side srv, cli;
	uint8_t tx[3000], a[1000], b[2500], small[50], big[200];
	struct iovec tiov[3] = {
		{ tx, 100 }, { tx + 100, 1900 }, { tx + 2000, 1000 },
	};
	struct iovec riov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct fi_msg m = { .msg_iov = tiov, .iov_count = 3, .context = tx };
	struct fi_msg r = { .msg_iov = riov, .iov_count = 2, .context = a };
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry e;
	struct iovec five[5] = { { tx, 1 }, { tx, 1 }, { tx, 1 }, { tx, 1 }, { tx, 1 } };

	(void)state;
	connect_pair(&srv, &cli);
	fill(tx, sizeof(tx), 9);
	m.data = 0xabcdef;
	assert_int_equal(fi_recvmsg(srv.ep, &r, 0), 0);
	assert_int_equal(fi_sendmsg(cli.ep, &m, FI_REMOTE_CQ_DATA), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	assert_ptr_equal(c.op_context, a);
	assert_int_equal(c.len, 3000);
	assert_int_equal(c.data, 0xabcdef);
	check(a, sizeof(a), 9);
	for (size_t i = 0; i < 2000; i++)
		assert_int_equal(b[i], pat(9, 1000 + i));

	/* sendmsg FI_INJECT: the buffer may change at once */
	m.iov_count = 1;
	tiov[0].iov_len = 200;
	assert_int_equal(fi_recv(srv.ep, big, sizeof(big), NULL, 0, big), 0);
	assert_int_equal(fi_sendmsg(cli.ep, &m, FI_INJECT | FI_TRANSMIT_COMPLETE), 0);
	memset(tx, 0, 200);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	check(big, 200, 9);
	fill(tx, sizeof(tx), 9);

	/* too many iovs, too big an inject, bad flags */
	assert_int_equal(fi_sendv(cli.ep, five, NULL, 5, 0, NULL), -FI_EINVAL);
	assert_int_equal(fi_recvv(srv.ep, five, NULL, 5, 0, NULL), -FI_EINVAL);
	assert_int_equal(fi_inject(cli.ep, tx, 1025, 0), -FI_EINVAL);
	assert_int_equal(fi_sendmsg(cli.ep, &m, FI_TAGGED), -FI_EBADFLAGS);

	/* 200 bytes into 50: FI_ETRUNC, the 50 delivered, olen 150 */
	assert_int_equal(fi_recv(srv.ep, small, sizeof(small), NULL, 0, small), 0);
	assert_int_equal(fi_send(cli.ep, tx, 200, NULL, 0, tx), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	assert_ptr_equal(c.op_context, tx);
	wait_cq_err(&srv, srv.rcq, &e);
	assert_int_equal(e.err, FI_ETRUNC);
	assert_ptr_equal(e.op_context, small);
	assert_int_equal(e.len, 50);
	assert_int_equal(e.olen, 150);
	check(small, 50, 9);
	/* the next message is whole: the truncated one is gone */
	one_way(&cli, &srv, 77, 10, 0);

	/* cancel a posted receive */
	assert_int_equal(fi_recv(srv.ep, big, sizeof(big), NULL, 0, big), 0);
	assert_int_equal(fi_cancel(&srv.ep->fid, big), 0);
	assert_int_equal(fi_cancel(&srv.ep->fid, big), -FI_ENOENT);
	wait_cq_err(&srv, srv.rcq, &e);
	assert_int_equal(e.err, FI_ECANCELED);
	assert_ptr_equal(e.op_context, big);
	one_way(&srv, &cli, 5, 11, 0);
	side_close(&cli);
	side_close(&srv);
}

/*
 * The receive CQ in each format: the entries are that format's size
 * (nothing written past them) with its fields.
 */
static void test_cq_formats(void **state)
{
	static const enum fi_cq_format fmts[] = {
		FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
		FI_CQ_FORMAT_DATA,
	};
	static const size_t sizes[] = {
		sizeof(struct fi_cq_entry), sizeof(struct fi_cq_entry),
		sizeof(struct fi_cq_msg_entry), sizeof(struct fi_cq_data_entry),
	};
	uint8_t tx[100], rx[2][128], out[4 * sizeof(struct fi_cq_data_entry)];
	struct fi_cq_data_entry c;
	struct side srv, cli;
	int64_t end;
	ssize_t n;
	size_t f, i;

	(void)state;
	for (f = 0; f < ARRAY_SIZE(fmts); f++) {
		cq_format = fmts[f];
		connect_pair(&srv, &cli);
		cq_format = FI_CQ_FORMAT_DATA;
		fill(tx, sizeof(tx), 40);
		for (i = 0; i < 2; i++) {
			assert_int_equal(fi_recv(srv.ep, rx[i], sizeof(rx[i]), NULL, 0,
						 rx[i]), 0);
			assert_int_equal(fi_senddata(cli.ep, tx, sizeof(tx) - i, NULL,
						     77 + i, 0, tx), 0);
			assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
		}
		/* entries laid out one after the other, at the format's size */
		memset(out, 0xaa, sizeof(out));
		end = now_ms() + WAIT_MS;
		for (n = 0; n < 2 && now_ms() < end;) {
			ssize_t r = fi_cq_read(srv.rcq, out + n * sizes[f], 4 - n);

			if (r > 0)
				n += r;
			else
				assert_int_equal(r, -FI_EAGAIN);
		}
		assert_int_equal(n, 2);
		for (i = 0; i < 2; i++) {
			uint8_t *e = out + i * sizes[f];
			void *ctx;

			memcpy(&ctx, e, sizeof(ctx));
			assert_ptr_equal(ctx, rx[i]);
			if (sizes[f] >= sizeof(struct fi_cq_msg_entry)) {
				struct fi_cq_msg_entry m;

				memcpy(&m, e, sizeof(m));
				assert_int_equal(m.len, sizeof(tx) - i);
				assert_true(m.flags & FI_RECV);
				assert_true(m.flags & FI_REMOTE_CQ_DATA);
			}
			if (sizes[f] == sizeof(struct fi_cq_data_entry)) {
				struct fi_cq_data_entry d;

				memcpy(&d, e, sizeof(d));
				assert_int_equal(d.data, 77 + i);
				assert_ptr_equal(d.buf, rx[i]);
			}
			check(rx[i], sizeof(tx) - i, 40);
		}
		for (i = 2 * sizes[f]; i < sizeof(out); i++)
			assert_int_equal(out[i], 0xaa);
		side_close(&cli);
		side_close(&srv);
	}
}

static int64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The blocking reads wait in the driver, not spinning, even with a
 * message waiting that no receive was posted for; they time out with
 * -FI_EAGAIN and return at once when the completion is there.
 */
static void test_sread_waits(void **state)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256], rx[128], tx[100];
	struct fi_cq_data_entry c;
	struct side srv, cli;
	int64_t t0, c0, wall, cpu;
	uint32_t ev;

	(void)state;
	connect_pair(&srv, &cli);
	fill(tx, sizeof(tx), 3);
	assert_int_equal(fi_send(cli.ep, tx, sizeof(tx), NULL, 0, tx), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);

	t0 = now_ms();
	c0 = cpu_ms();
	assert_int_equal(fi_cq_sread(srv.rcq, &c, 1, NULL, 400), -FI_EAGAIN);
	assert_int_equal(fi_eq_sread(srv.eq, &ev, buf, sizeof(buf), 400, 0),
			 -FI_EAGAIN);
	wall = now_ms() - t0;
	cpu = cpu_ms() - c0;
	print_message("sread: %lld ms waited, %lld ms of CPU\n",
		      (long long)wall, (long long)cpu);
	assert_true(wall >= 790);
	assert_true(cpu < wall / 4);

	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	t0 = now_ms();
	assert_int_equal(fi_cq_sread(srv.rcq, &c, 1, NULL, 5000), 1);
	assert_true(now_ms() - t0 < 1000);
	assert_ptr_equal(c.op_context, rx);
	check(rx, sizeof(tx), 3);
	side_close(&cli);
	side_close(&srv);
}

/*
 * FI_THREAD_SAFE: a thread blocked in fi_cq_sread() on a fabric does not
 * hold off another thread's post on it. The read waits for the answer to
 * that very post: were the post held until the read timed out, neither
 * would happen in time.
 */
struct late_post {
	struct side *s;
	uint8_t msg[64];
	int64_t ms;		/* how long the post took */
	ssize_t rc;
};

static void *late_poster(void *arg)
{
	struct late_post *p = arg;
	int64_t t0;

	usleep(200 * 1000);	/* the read is waiting by now */
	t0 = now_ms();
	p->rc = fi_send(p->s->ep, p->msg, sizeof(p->msg), NULL, 0, p);
	p->ms = now_ms() - t0;
	return NULL;
}

struct echo_back {
	struct side *s;
	uint8_t buf[64];
	ssize_t rc;
};

/* cli's side, a thread: take the message, send it back */
static void *echo_back(void *arg)
{
	struct echo_back *e = arg;
	struct fi_cq_data_entry c;

	e->rc = wait_cq(e->s, e->s->rcq, &c);
	if (e->rc == 1)
		e->rc = fi_send(e->s->ep, e->buf, sizeof(e->buf), NULL, 0, e);
	if (e->rc == 0)
		e->rc = wait_cq(e->s, e->s->tcq, &c);
	return NULL;
}

static void test_sread_lets_other_threads_in(void **state)
{
	struct late_post p = { 0 };
	struct echo_back e = { 0 };
	struct fi_cq_data_entry c;
	struct side srv, cli;
	uint8_t rx[64];
	pthread_t tp, te;
	int64_t t0, wall;
	ssize_t n;

	(void)state;
	connect_pair(&srv, &cli);
	cli.peer = NULL;	/* each side's own thread drives it */
	srv.peer = NULL;
	p.s = &srv;
	e.s = &cli;
	fill(p.msg, sizeof(p.msg), 9);
	assert_int_equal(fi_recv(cli.ep, e.buf, sizeof(e.buf), NULL, 0, e.buf), 0);
	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	assert_int_equal(pthread_create(&te, NULL, echo_back, &e), 0);
	assert_int_equal(pthread_create(&tp, NULL, late_poster, &p), 0);
	t0 = now_ms();
	n = fi_cq_sread(srv.rcq, &c, 1, NULL, 5000);
	wall = now_ms() - t0;
	/* the threads use this frame: joined before any assert can leave it */
	assert_int_equal(pthread_join(tp, NULL), 0);
	assert_int_equal(pthread_join(te, NULL), 0);
	print_message("sread with another thread's post: the post took %lld ms,"
		      " the answer came after %lld ms\n",
		      (long long)p.ms, (long long)wall);
	assert_int_equal(n, 1);
	assert_int_equal(p.rc, 0);
	assert_int_equal(e.rc, 1);
	assert_ptr_equal(c.op_context, rx);
	check(rx, sizeof(rx), 9);
	assert_true(p.ms < 1000);
	assert_true(wall < 3000);
	assert_int_equal(wait_cq(&srv, srv.tcq, &c), 1);	/* the post's */
	side_close(&cli);
	side_close(&srv);
}

/* ---- FI_WAIT_FD and fi_trywait() ---------------------------------------- */

static int wait_fd_of(struct fid *fid)
{
	int fd = -1;

	assert_int_equal(fi_control(fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	return fd;
}

/* is fd readable within ms? */
static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r = poll(&p, 1, ms);

	assert_true(r >= 0);
	return r == 1 && (p.revents & POLLIN);
}

/* fi_trywait() until it says the fd may be slept on */
static void try_until_armed(struct side *s, struct fid **fids, int n)
{
	int64_t end = now_ms() + WAIT_MS;
	int r;

	while ((r = fi_trywait(s->fab, fids, n)) == -FI_EAGAIN) {
		assert_true(now_ms() < end);
		usleep(1000);
	}
	assert_int_equal(r, 0);
}

/*
 * The wait object users of shared-memory providers cannot have: after
 * fi_trywait() says 0, a poll(2) on the fd sleeps in the kernel until the
 * peer's message, and wakes for it with nothing of ours running; a
 * message no receive was posted for wakes it once, not for ever; the
 * peer's shutdown wakes it too.
 */
static void test_wait_fd(void **state)
{
	uint8_t rx[128], tx[100], buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_cq_data_entry c;
	struct side srv, cli;
	enum fi_wait_obj wo = FI_WAIT_NONE;
	int64_t c0, cpu, end;
	struct fid *fids[2];
	uint32_t ev;
	ssize_t n;
	int fd;

	(void)state;
	wait_obj = FI_WAIT_FD;
	connect_pair(&srv, &cli);
	wait_obj = FI_WAIT_UNSPEC;
	srv.peer = NULL;	/* nothing of srv's runs but what the test says */
	fd = wait_fd_of(&srv.rcq->fid);
	assert_int_equal(wait_fd_of(&srv.tcq->fid), fd);
	assert_int_equal(wait_fd_of(&srv.eq->fid), fd);
	assert_int_not_equal(wait_fd_of(&cli.rcq->fid), fd);
	assert_int_equal(fi_control(&srv.rcq->fid, FI_GETWAITOBJ, &wo), 0);
	assert_int_equal(wo, FI_WAIT_FD);
	fids[0] = &srv.rcq->fid;
	fids[1] = &srv.eq->fid;

	/* a receive posted: the fd sleeps, then the message wakes it */
	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	try_until_armed(&srv, fids, 2);
	c0 = cpu_ms();
	assert_false(readable(fd, 300));
	cpu = cpu_ms() - c0;
	fill(tx, sizeof(tx), 21);
	assert_int_equal(fi_send(cli.ep, tx, sizeof(tx), NULL, 0, tx), 0);
	assert_true(readable(fd, WAIT_MS));
	assert_int_equal(fi_trywait(srv.fab, fids, 2), -FI_EAGAIN);
	assert_int_equal(fi_cq_read(srv.rcq, &c, 1), 1);
	assert_ptr_equal(c.op_context, rx);
	assert_int_equal(c.len, sizeof(tx));
	check(rx, sizeof(tx), 21);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	try_until_armed(&srv, fids, 2);
	assert_false(readable(fd, 0));
	print_message("wait fd: 300 ms asleep in poll took %lld ms of CPU\n",
		      (long long)cpu);
	assert_true(cpu < 100);

	/* no receive posted: the message wakes the fd once, then it sleeps */
	fill(tx, sizeof(tx), 22);
	assert_int_equal(fi_send(cli.ep, tx, sizeof(tx), NULL, 0, tx), 0);
	assert_true(readable(fd, WAIT_MS));
	try_until_armed(&srv, fids, 2);
	assert_false(readable(fd, 300));
	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	assert_int_equal(fi_trywait(srv.fab, fids, 2), -FI_EAGAIN);
	assert_int_equal(fi_cq_read(srv.rcq, &c, 1), 1);
	check(rx, sizeof(tx), 22);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);

	/* the peer's shutdown, nothing posted: a wake-up, then FI_SHUTDOWN */
	try_until_armed(&srv, fids, 2);
	assert_int_equal(fi_shutdown(cli.ep, 0), 0);
	assert_true(readable(fd, WAIT_MS));
	end = now_ms() + WAIT_MS;
	do {
		n = fi_eq_read(srv.eq, &ev, buf, sizeof(buf), 0);
		if (n == -FI_EAGAIN && !fi_trywait(srv.fab, fids, 2))
			(void)readable(fd, 100);
	} while (n == -FI_EAGAIN && now_ms() < end);
	assert_int_equal(n, sizeof(struct fi_eq_cm_entry));
	assert_int_equal(ev, FI_SHUTDOWN);

	/* what fi_trywait() and fi_control() refuse */
	assert_int_equal(fi_trywait(srv.fab, NULL, 1), -FI_EINVAL);
	assert_int_equal(fi_trywait(srv.fab, fids, -1), -FI_EINVAL);
	fids[1] = &srv.ep->fid;		/* not a CQ or an EQ */
	assert_int_equal(fi_trywait(srv.fab, fids, 2), -FI_EINVAL);
	fids[1] = &cli.rcq->fid;	/* another fabric's */
	assert_int_equal(fi_trywait(srv.fab, fids, 2), -FI_EINVAL);
	fids[1] = NULL;
	assert_int_equal(fi_trywait(srv.fab, fids, 2), -FI_EINVAL);
	assert_int_equal(fi_control(&srv.rcq->fid, FI_GETWAIT, NULL), -FI_EINVAL);
	assert_int_equal(fi_control(&srv.rcq->fid, FI_GETOPSFLAG, &wo), -FI_ENOSYS);
	side_close(&cli);
	side_close(&srv);
}

/* a CQ without a wait object: none to give, none to try */
static void *send_one(void *arg)
{
	struct side *s = arg;

	usleep(100 * 1000);	/* the other thread asleep in poll() first */
	if (fi_send(s->ep, "kick", 4, NULL, 0, (void *)0x91))
		return (void *)1;
	return NULL;
}

/*
 * Another thread's completion wakes a sleeper: it is no event of the
 * net's (the send went out at once), so only the kick of the fd tells.
 */
static void test_wait_fd_kick(void **state)
{
	struct fi_cq_data_entry c;
	struct side srv, cli;
	struct fid *fid;
	uint8_t buf[8];
	void *ret;
	pthread_t t;

	(void)state;
	wait_obj = FI_WAIT_FD;
	connect_pair(&srv, &cli);
	wait_obj = FI_WAIT_UNSPEC;
	assert_int_equal(fi_recv(srv.ep, buf, sizeof(buf), NULL, 0, NULL), 0);
	fid = &cli.tcq->fid;
	try_until_armed(&cli, &fid, 1);
	assert_int_equal(pthread_create(&t, NULL, send_one, &cli), 0);
	assert_true(readable(wait_fd_of(fid), 5000));
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_int_equal(fi_cq_read(cli.tcq, &c, 1), 1);
	assert_ptr_equal(c.op_context, (void *)0x91);
	/* read: armed again, and quiet until the next */
	try_until_armed(&cli, &fid, 1);
	assert_false(readable(wait_fd_of(fid), 50));
	side_close(&cli);
	side_close(&srv);
}

static void test_wait_none(void **state)
{
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT,
				 .wait_obj = FI_WAIT_NONE };
	enum fi_wait_obj wo = FI_WAIT_FD;
	struct fid_cq *cq, *ucq;
	struct fid *fids[1];
	struct side s;
	int fd = -1;

	(void)state;
	side_open(&s, 0);
	assert_int_equal(fi_domain(s.fab, s.info, &s.dom, NULL), 0);
	assert_int_equal(fi_cq_open(s.dom, &ca, &cq, NULL), 0);
	assert_int_equal(fi_control(&cq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	assert_int_equal(fi_control(&cq->fid, FI_GETWAITOBJ, &wo), 0);
	assert_int_equal(wo, FI_WAIT_NONE);
	fids[0] = &cq->fid;
	assert_int_equal(fi_trywait(s.fab, fids, 1), -FI_EINVAL);
	/* FI_WAIT_UNSPEC is the fd: the EQ's, which side_open() asked so */
	ca.wait_obj = FI_WAIT_UNSPEC;
	assert_int_equal(fi_cq_open(s.dom, &ca, &ucq, NULL), 0);
	assert_int_equal(fi_control(&ucq->fid, FI_GETWAITOBJ, &wo), 0);
	assert_int_equal(wo, FI_WAIT_FD);
	assert_int_equal(wait_fd_of(&ucq->fid), wait_fd_of(&s.eq->fid));
	fids[0] = &ucq->fid;
	assert_int_equal(fi_trywait(s.fab, fids, 1), 0);
	assert_int_equal(fi_close(&ucq->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
	side_close(&s);
}

/* ---- FI_CLANQ_YIELD ------------------------------------------------------ */

static volatile sig_atomic_t sched_yields;

static void count_sched_yield(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (si->si_syscall == __NR_sched_yield)
		sched_yields++;
}

/*
 * In a child (seccomp cannot be undone): FI_CLANQ_YIELD=@yield (NULL:
 * unset), a CQ of NIC 0 read @reads times while empty, each sched_yield()
 * trapped by a seccomp filter and counted. The child's exit status is
 * the count, or 200 + the step that failed.
 */
static int sched_yields_in(const char *yield, int reads)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sched_yield, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = 4, .filter = f };
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT,
				 .wait_obj = FI_WAIT_NONE };
	struct fi_info *info = info_for(0);
	struct sigaction sa = { .sa_sigaction = count_sched_yield,
				.sa_flags = SA_SIGINFO };
	struct fi_cq_entry e;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_cq *cq;
	int status;
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (yield)
			setenv("FI_CLANQ_YIELD", yield, 1);
		else
			unsetenv("FI_CLANQ_YIELD");
		if (fi_fabric(info->fabric_attr, &fab, NULL) ||
		    fi_domain(fab, info, &dom, NULL) ||
		    fi_cq_open(dom, &ca, &cq, NULL))
			_exit(201);
		if (sigaction(SIGSYS, &sa, NULL) ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(202);
		for (int i = 0; i < reads; i++)
			if (fi_cq_read(cq, &e, 1) != -FI_EAGAIN)
				_exit(203);
		_exit(sched_yields < 200 ? sched_yields : 204);
	}
	fi_freeinfo(info);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * A reader spinning on an empty CQ yields the CPU every FI_CLANQ_YIELD
 * reads; never with 0; unset, only when the NIC has peers on other hosts
 * (one is named here for the while: the connection is made only on
 * first use, so nothing goes out). Garbage is as unset (with a warning
 * in libfabric's log), not 0.
 */
static void test_cq_read_yields(void **state)
{
	static const char *const garbage[] = {
		"x", "-1", "4x", " 4", "0x10", "1048577", "99999999999999999999",
	};
	const uint32_t ip = inet_addr("10.99.0.1");
	int yields[3 + sizeof(garbage) / sizeof(garbage[0])];
	struct clanq_peer_stat rec;
	unsigned int peers = 0;
	struct clanq_dev dev;

	(void)state;
	assert_int_equal(sched_yields_in("4", 64), 16);
	assert_int_equal(sched_yields_in("1", 10), 10);
	assert_int_equal(sched_yields_in("0", 200), 0);
	assert_int_equal(clanq_open_nic(&dev, 0), 0);
	assert_true(clanq_peer_list(&dev, &rec, 1, &peers) >= 0);
	assert_int_equal(peers, 0);	/* the test VMs' NICs have none */
	assert_int_equal(sched_yields_in(NULL, 200), 0);
	assert_int_equal(sched_yields_in("", 200), 0);
	assert_int_equal(sched_yields_in("x", 200), 0);
	assert_int_equal(clanq_peer_add(&dev, 0xc1a9, ip, 0), 0);
	yields[0] = sched_yields_in(NULL, 200);		/* every 64th: 3 */
	yields[1] = sched_yields_in("", 128);
	yields[2] = sched_yields_in("0", 200);
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
		yields[3 + i] = sched_yields_in(garbage[i], 128);
	assert_int_equal(clanq_peer_del(&dev, 0xc1a9), 0);
	assert_int_equal(yields[0], 3);
	assert_int_equal(yields[1], 2);
	assert_int_equal(yields[2], 0);
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
		assert_int_equal(yields[3 + i], 2);
	assert_int_equal(sched_yields_in(NULL, 200), 0);
	clanq_close(&dev);
}

/* an orderly shutdown: FI_SHUTDOWN at the peer, its receive cancelled */
static void test_shutdown(void **state)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256], rx[64];
	struct fi_eq_cm_entry *e = (void *)buf;
	struct fi_cq_err_entry ce;
	struct side srv, cli;
	uint32_t ev;

	(void)state;
	connect_pair(&srv, &cli);
	one_way(&cli, &srv, 10, 1, 0);
	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	assert_int_equal(fi_shutdown(cli.ep, 0), 0);
	assert_int_equal(fi_send(cli.ep, rx, 1, NULL, 0, NULL), -FI_ESHUTDOWN);
	assert_int_equal(wait_eq(&srv, &ev, e, sizeof(buf)), sizeof(*e));
	assert_int_equal(ev, FI_SHUTDOWN);
	assert_ptr_equal(e->fid, &srv.ep->fid);
	wait_cq_err(&srv, srv.rcq, &ce);
	assert_int_equal(ce.err, FI_ECANCELED);
	assert_int_equal(fi_send(srv.ep, rx, 1, NULL, 0, NULL), -FI_ESHUTDOWN);
	assert_int_equal(fi_shutdown(srv.ep, 0), 0);
	side_close(&cli);
	side_close(&srv);
}

static void test_reject_and_refused(void **state)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *e = (void *)buf;
	struct fi_eq_err_entry ee;
	struct side srv, cli;
	struct caddr a;
	size_t alen = sizeof(a);
	uint32_t ev;

	(void)state;
	side_open(&srv, 0);
	side_open(&cli, 1);
	srv.peer = &cli;
	cli.peer = &srv;
	assert_int_equal(fi_passive_ep(srv.fab, srv.info, &srv.pep, NULL), 0);
	assert_int_equal(fi_pep_bind(srv.pep, &srv.eq->fid, 0), 0);
	assert_int_equal(fi_listen(srv.pep), 0);
	assert_int_equal(fi_getname(&srv.pep->fid, &a, &alen), 0);
	side_cqs_ep(&cli, cli.info);
	assert_int_equal(fi_connect(cli.ep, &a, NULL, 0), 0);
	assert_int_equal(wait_eq(&srv, &ev, e, sizeof(buf)), sizeof(*e));
	assert_int_equal(ev, FI_CONNREQ);
	assert_int_equal(fi_reject(srv.pep, e->info->handle, "go away", 8), 0);
	/* not a connection request */
	assert_int_equal(fi_reject(srv.pep, &srv.eq->fid, NULL, 0), -FI_EINVAL);
	fi_freeinfo(e->info);
	assert_int_equal(wait_eq(&cli, &ev, e, sizeof(buf)), -FI_EAVAIL);
	memset(&ee, 0, sizeof(ee));
	assert_int_equal(fi_eq_readerr(cli.eq, &ee, 0), sizeof(ee));
	assert_int_equal(ee.err, FI_ECONNREFUSED);
	assert_ptr_equal(ee.fid, &cli.ep->fid);
	assert_int_equal(ee.err_data_size, 8);
	assert_string_equal((char *)ee.err_data, "go away");
	assert_int_equal(fi_close(&cli.ep->fid), 0);
	cli.ep = NULL;

	/* nobody on that service */
	assert_int_equal(fi_close(&srv.pep->fid), 0);
	srv.pep = NULL;
	assert_int_equal(fi_endpoint(cli.dom, cli.info, &cli.ep, NULL), 0);
	assert_int_equal(fi_ep_bind(cli.ep, &cli.eq->fid, 0), 0);
	assert_int_equal(fi_ep_bind(cli.ep, &cli.tcq->fid, FI_TRANSMIT), 0);
	assert_int_equal(fi_ep_bind(cli.ep, &cli.rcq->fid, FI_RECV), 0);
	assert_int_equal(fi_enable(cli.ep), 0);
	assert_int_equal(fi_connect(cli.ep, &a, NULL, 0), 0);
	assert_int_equal(wait_eq(&cli, &ev, e, sizeof(buf)), -FI_EAVAIL);
	assert_int_equal(fi_eq_readerr(cli.eq, &ee, 0), sizeof(ee));
	assert_int_equal(ee.err, FI_ECONNREFUSED);
	side_close(&cli);
	side_close(&srv);
}

/* what the calls refuse, and with which code */
static void test_bad_arguments(void **state)
{
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_eq_attr ea = { .wait_obj = FI_WAIT_SET };
	struct fi_fabric_attr fa = { 0 };
	struct fi_cq_data_entry c;
	struct side s;
	struct fid_cq *cq;
	struct fid_eq *eq;
	struct fid_fabric *f;
	struct fid_mr *mr;
	struct fid_ep *ep;
	uint8_t buf[64];
	struct caddr a;
	size_t alen = 2;
	uint32_t ev;

	(void)state;
	side_open(&s, 0);
	fa.name = "notclanq";
	fa.prov_name = "clanq";
	assert_int_equal(fi_fabric(&fa, &f, NULL), -FI_EINVAL);
	fa.name = "clanq99";
	assert_int_equal(fi_fabric(&fa, &f, NULL), -FI_ENODEV);
	/* wait sets and the rest: FI_WAIT_FD only */
	assert_int_equal(fi_eq_open(s.fab, &ea, &eq, NULL), -FI_ENOSYS);
	ea.wait_obj = FI_WAIT_MUTEX_COND;
	assert_int_equal(fi_eq_open(s.fab, &ea, &eq, NULL), -FI_ENOSYS);
	ea.wait_obj = (enum fi_wait_obj)77;
	assert_int_equal(fi_eq_open(s.fab, &ea, &eq, NULL), -FI_EINVAL);
	assert_int_equal(fi_domain(s.fab, s.info, &s.dom, NULL), 0);
	ca.format = FI_CQ_FORMAT_TAGGED;
	assert_int_equal(fi_cq_open(s.dom, &ca, &cq, NULL), -FI_ENOSYS);
	ca.format = 99;
	assert_int_equal(fi_cq_open(s.dom, &ca, &cq, NULL), -FI_EINVAL);
	ca.format = FI_CQ_FORMAT_MSG;
	ca.wait_obj = FI_WAIT_SET;
	assert_int_equal(fi_cq_open(s.dom, &ca, &cq, NULL), -FI_ENOSYS);
	ca.wait_obj = FI_WAIT_YIELD;
	assert_int_equal(fi_cq_open(s.dom, &ca, &cq, NULL), -FI_ENOSYS);
	ca.wait_obj = (enum fi_wait_obj)77;
	assert_int_equal(fi_cq_open(s.dom, &ca, &cq, NULL), -FI_EINVAL);
	ca.wait_obj = FI_WAIT_FD;
	ca.wait_cond = FI_CQ_COND_THRESHOLD;
	assert_int_equal(fi_cq_open(s.dom, &ca, &cq, NULL), -FI_ENOSYS);
	ca.wait_cond = FI_CQ_COND_NONE;
	ca.wait_obj = FI_WAIT_NONE;
	assert_int_equal(fi_cq_open(s.dom, &ca, &s.tcq, NULL), 0);
	s.rcq = s.tcq;
	assert_int_equal(fi_cq_read(s.tcq, &c, 1), -FI_EAGAIN);
	assert_int_equal(fi_eq_read(s.eq, &ev, buf, sizeof(buf), 0), -FI_EAGAIN);
	assert_int_equal(fi_mr_reg(s.dom, buf, sizeof(buf), FI_SEND, 0, 0, 0,
				   &mr, NULL), 0);
	assert_int_equal(fi_close(&mr->fid), 0);

	assert_int_equal(fi_endpoint(s.dom, s.info, &ep, NULL), 0);
	assert_int_equal(fi_getname(&ep->fid, &a, &alen), -FI_ETOOSMALL);
	assert_int_equal(alen, sizeof(a));
	assert_int_equal(fi_recv(ep, buf, 8, NULL, 0, NULL), -FI_EOPBADSTATE);
	assert_int_equal(fi_enable(ep), -FI_ENOEQ);
	assert_int_equal(fi_ep_bind(ep, &s.eq->fid, 0), 0);
	assert_int_equal(fi_enable(ep), -FI_ENOCQ);
	assert_int_equal(fi_ep_bind(ep, &s.tcq->fid, 0), -FI_EINVAL);
	assert_int_equal(fi_ep_bind(ep, &s.tcq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_enable(ep), 0);
	assert_int_equal(fi_ep_bind(ep, &s.tcq->fid, FI_TRANSMIT), -FI_EOPBADSTATE);
	assert_int_equal(fi_send(ep, buf, 8, NULL, 0, NULL), -FI_ENOTCONN);
	assert_int_equal(fi_inject(ep, buf, 8, 0), -FI_ENOTCONN);
	assert_int_equal(fi_getpeer(ep, &a, &alen), -FI_ENOTCONN);
	assert_int_equal(fi_write(ep, buf, 8, NULL, 0, 0, 1, NULL), -FI_ENOTCONN);
	assert_int_equal(fi_read(ep, buf, 8, NULL, 0, 0, 1, NULL), -FI_ENOTCONN);
	a_set(&a, node_of(1), 0);
	assert_int_equal(fi_connect(ep, &a, NULL, 0), -FI_EINVAL);
	a.sin6_family = AF_INET;	/* not ours */
	a.sin6_port = htons(5);
	assert_int_equal(fi_connect(ep, &a, NULL, 0), -FI_EINVAL);
	a_set(&a, node_of(1), 5);
	assert_int_equal(fi_connect(ep, &a, buf, 257), -FI_EINVAL);
	assert_int_equal(fi_accept(ep, NULL, 0), -FI_EOPBADSTATE);
	/* busy: what is bound cannot close first */
	assert_int_equal(fi_close(&s.tcq->fid), -FI_EBUSY);
	assert_int_equal(fi_close(&s.eq->fid), -FI_EBUSY);
	assert_int_equal(fi_close(&s.fab->fid), -FI_EBUSY);
	assert_int_equal(fi_close(&ep->fid), 0);
	s.rcq = NULL;
	side_close(&s);
}

/*
 * A peer killed mid-transfer: the server sees FI_SHUTDOWN and its
 * receive cancelled, not a hang. The client sends 100 bytes, then 1 MiB
 * the server does not take at first: the client is inside that send,
 * part of it in the server's ring, when the server kills it.
 */
static void killed_client(void *arg)
{
	struct caddr *a = arg;
	struct fi_cq_data_entry c;
	struct side cli;
	static uint8_t big[1 << 20];

	side_open(&cli, 1);
	side_cqs_ep(&cli, cli.info);
	CHILD_CHECK_INT(fi_connect(cli.ep, a, NULL, 0), 0);
	for (;;) {
		uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
		uint32_t ev;
		ssize_t n = fi_eq_read(cli.eq, &ev, buf, sizeof(buf), 0);

		if (n > 0) {
			CHILD_CHECK_INT(ev, FI_CONNECTED);
			break;
		}
		CHILD_CHECK_INT(n, -FI_EAGAIN);
	}
	fill(big, 100, 1);
	CHILD_CHECK_INT(fi_send(cli.ep, big, 100, NULL, 0, NULL), 0);
	while (fi_cq_read(cli.tcq, &c, 1) == -FI_EAGAIN)
		;
	fi_send(cli.ep, big, sizeof(big), NULL, 0, NULL);
	for (;;)
		(void)fi_cq_read(cli.tcq, &c, 1);
}

/* ---- memory registration and RMA ----------------------------------------- */

static void test_getinfo_rma(void **state)
{
	struct fi_info *h, *fi, *f;

	(void)state;
	want_rma = true;
	h = hints_new();
	want_rma = false;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(count_infos(fi), 2);
	for (f = fi; f; f = f->next) {
		assert_true((f->caps & (FI_RMA | FI_READ | FI_WRITE |
					FI_REMOTE_READ | FI_REMOTE_WRITE)) ==
			    (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
			     FI_REMOTE_WRITE));
		assert_int_equal(f->domain_attr->mr_mode, FI_MR_PROV_KEY);
		assert_int_equal(f->domain_attr->mr_key_size, 8);
		assert_int_equal(f->tx_attr->rma_iov_limit, 1);
		assert_true(f->tx_attr->caps & FI_WRITE);
		assert_true(f->rx_attr->caps & FI_REMOTE_WRITE);
	}
	fi_freeinfo(fi);
	/* mr_mode 0: ours to say */
	h->domain_attr->mr_mode = 0;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(fi->domain_attr->mr_mode, FI_MR_PROV_KEY);
	assert_true(fi->caps & FI_RMA);
	fi_freeinfo(fi);
	/* keys the application picks, or the old basic mode: refused */
	h->domain_attr->mr_mode = FI_MR_LOCAL;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	h->domain_attr->mr_mode = FI_MR_BASIC;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	h->domain_attr->mr_mode = FI_MR_SCALABLE;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	h->domain_attr->mr_mode = FI_MR_PROV_KEY;
	h->tx_attr->rma_iov_limit = 2;
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), -FI_ENODATA);
	fi_freeinfo(h);

	/* with RMA, libfabric's ofi_rxm gives FI_EP_RDM over us */
	h = hints_new();
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG | FI_TAGGED;
	free(h->fabric_attr->prov_name);
	h->fabric_attr->prov_name = strdup("clanq;ofi_rxm");
	assert_int_equal(getinfo(NULL, NULL, 0, h, &fi), 0);
	assert_true(count_infos(fi) >= 2);	/* rxm's variants, each NIC */
	for (f = fi; f; f = f->next) {
		assert_string_equal(f->fabric_attr->prov_name, "clanq;ofi_rxm");
		assert_int_equal(f->ep_attr->type, FI_EP_RDM);
		assert_true(f->caps & FI_TAGGED);
		assert_int_equal(f->addr_format, FI_SOCKADDR_IN6);
	}
	fi_freeinfo(fi);
	fi_freeinfo(h);
}

/* one RMA completion of s's transmit CQ, checked */
static void rma_done(struct side *s, void *ctx, uint64_t flags, size_t len)
{
	struct fi_cq_data_entry c;

	assert_int_equal(wait_cq(s, s->tcq, &c), 1);
	assert_ptr_equal(c.op_context, ctx);
	assert_int_equal(c.flags, FI_RMA | flags);
	assert_int_equal(c.len, len);
}

#define RMA_MEM		(1u << 20)
#define RMA_OFF		3		/* registrations start off a page */

static void test_rma(void **state)
{
	static const size_t sizes[] = { 1, 7, 64, 4096 + 13, 65536, 300001 };
	uint8_t *mem = malloc(RMA_MEM + 64), *lmem = malloc(RMA_MEM + 64);
	uint8_t *rb = malloc(RMA_MEM), *ro = malloc(4096), small[100];
	struct fid_mr *mr, *lmr, *romr, *bad;
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry e;
	struct side srv, cli;
	uint64_t key, rokey, at;
	uint32_t seq = 0;
	size_t i;

	(void)state;
	want_rma = true;
	connect_pair(&srv, &cli);
	want_rma = false;

	/* registrations: garbage refused */
	assert_int_equal(fi_mr_reg(srv.dom, NULL, 64, FI_REMOTE_WRITE, 0, 0, 0,
				   &bad, NULL), -FI_EINVAL);
	assert_int_equal(fi_mr_reg(srv.dom, mem, 0, FI_REMOTE_WRITE, 0, 0, 0,
				   &bad, NULL), -FI_EINVAL);
	assert_int_equal(fi_mr_reg(srv.dom, mem, 64, 1ull << 62, 0, 0, 0,
				   &bad, NULL), -FI_EINVAL);
	assert_int_equal(fi_mr_reg(srv.dom, mem, 64, FI_REMOTE_WRITE, 8, 0, 0,
				   &bad, NULL), -FI_EINVAL);
	assert_int_equal(fi_mr_reg(srv.dom, mem, 64, FI_REMOTE_WRITE, 0, 0,
				   1ull << 40, &bad, NULL), -FI_EINVAL);

	memset(mem, 0xee, RMA_MEM + 64);
	assert_int_equal(fi_mr_reg(srv.dom, mem + RMA_OFF, RMA_MEM,
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
				   NULL), 0);
	key = fi_mr_key(mr);
	assert_true(key != 0 && key != FI_KEY_NOTAVAIL);
	assert_int_equal(fi_mr_reg(srv.dom, ro, 4096, FI_REMOTE_READ, 0, 0, 0,
				   &romr, NULL), 0);
	rokey = fi_mr_key(romr);
	assert_int_equal(fi_mr_reg(cli.dom, lmem, RMA_MEM, FI_WRITE | FI_READ,
				   0, 0, 0, &lmr, NULL), 0);

	/* writes from a registration, reads into plain memory: every byte */
	for (i = 0, at = 1; i < ARRAY_SIZE(sizes); i++, seq++) {
		size_t len = sizes[i];
		void *ctx = (void *)(uintptr_t)(0x3000 + seq);

		fill(lmem + 5, len, seq);
		assert_int_equal(fi_write(cli.ep, lmem + 5, len, fi_mr_desc(lmr), 0,
					  at, key, ctx), 0);
		rma_done(&cli, ctx, FI_WRITE, len);
		check(mem + RMA_OFF + at, len, seq);
		assert_int_equal(mem[RMA_OFF + at + len], 0xee);
		memset(rb, 0, len);
		assert_int_equal(fi_read(cli.ep, rb, len, NULL, 0, at, key, ctx), 0);
		rma_done(&cli, ctx, FI_READ, len);
		check(rb, len, seq);
		at += len + 11;
	}
	assert_int_equal(mem[RMA_OFF - 1], 0xee);	/* nothing before it */

	/* inject: the buffer is ours again at once, and no completion */
	memset(small, 0x5a, sizeof(small));
	assert_int_equal(fi_inject_write(cli.ep, small, sizeof(small), 0, 0, key),
			 0);
	memset(small, 0, sizeof(small));
	for (i = 0; i < 1000 && mem[RMA_OFF + 99] != 0x5a; i++) {
		assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);
		usleep(1000);
	}
	assert_int_equal(mem[RMA_OFF], 0x5a);
	assert_int_equal(mem[RMA_OFF + 99], 0x5a);
	assert_int_equal(fi_inject_write(cli.ep, lmem, 1025, 0, 0, key), -FI_EINVAL);

	/* writedata: the write, then the data in the peer's next receive */
	assert_int_equal(fi_recv(srv.ep, rb, 64, NULL, 0, (void *)0x77), 0);
	fill(lmem, 5000, 99);
	assert_int_equal(fi_writedata(cli.ep, lmem, 5000, NULL, 0xfeedbeefull, 0,
				      20000, key, (void *)0x78), 0);
	rma_done(&cli, (void *)0x78, FI_WRITE, 5000);
	assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	assert_ptr_equal(c.op_context, (void *)0x77);
	assert_int_equal(c.flags, FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE);
	assert_int_equal(c.data, 0xfeedbeefull);
	assert_int_equal(c.len, 0);
	check(mem + RMA_OFF + 20000, 5000, 99);

	/* rights: a read-only registration reads, is not written */
	memset(ro, 0x42, 4096);
	assert_int_equal(fi_read(cli.ep, rb, 4096, NULL, 0, 0, rokey, NULL), 0);
	rma_done(&cli, NULL, FI_READ, 4096);
	assert_int_equal(rb[4095], 0x42);
	assert_int_equal(fi_write(cli.ep, lmem, 8, NULL, 0, 0, rokey, NULL),
			 -FI_EACCES);
	/* keys: another secret, none, or outside the registration */
	assert_int_equal(fi_write(cli.ep, lmem, 8, NULL, 0, 0, key ^ 1, NULL),
			 -FI_EKEYREJECTED);
	assert_int_equal(fi_write(cli.ep, lmem, 8, NULL, 0, 0, 0, NULL),
			 -FI_EINVAL);
	assert_int_equal(fi_read(cli.ep, rb, 8, NULL, 0, RMA_MEM - 4, key, NULL),
			 -FI_EINVAL);
	assert_int_equal(fi_write(cli.ep, lmem, 8, NULL, 0, UINT64_MAX - 3, key,
				  NULL), -FI_EINVAL);

	/* the registration goes under the peer: an error completion */
	assert_int_equal(fi_close(&mr->fid), 0);
	assert_int_equal(fi_write(cli.ep, lmem, 8, NULL, 0, 1, key, (void *)0x79), 0);
	wait_cq_err(&cli, cli.tcq, &e);
	assert_ptr_equal(e.op_context, (void *)0x79);
	assert_int_equal(e.err, ENXIO);

	/* RMA needs a connection */
	assert_int_equal(fi_close(&romr->fid), 0);
	assert_int_equal(fi_close(&lmr->fid), 0);
	assert_int_equal(fi_shutdown(cli.ep, 0), 0);
	assert_int_equal(fi_write(cli.ep, lmem, 8, NULL, 0, 0, rokey, NULL),
			 -FI_ESHUTDOWN);
	side_close(&cli);
	side_close(&srv);
	free(mem);
	free(lmem);
	free(rb);
	free(ro);
}

/* one atomic's completion of s's transmit CQ, checked */
static void atomic_done(struct side *s, void *ctx, uint64_t flags)
{
	struct fi_cq_data_entry c;

	assert_int_equal(wait_cq(s, s->tcq, &c), 1);
	assert_ptr_equal(c.op_context, ctx);
	assert_int_equal(c.flags, FI_ATOMIC | flags);
}

static void test_atomic(void **state)
{
	static uint64_t words[4] __attribute__((aligned(64)));
	static uint64_t ro[1];
	uint64_t one = 1, v, cmp, res = 0;
	struct fi_cq_data_entry c;
	struct fi_atomic_attr attr;
	struct fid_mr *mr, *romr;
	struct side srv, cli;
	size_t count = 0;
	uint64_t key;
	int i;

	(void)state;
	want_rma = true;
	connect_pair(&srv, &cli);
	want_rma = false;
	memset(words, 0, sizeof(words));
	assert_int_equal(fi_mr_reg(srv.dom, words, sizeof(words),
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
				   NULL), 0);
	key = fi_mr_key(mr);
	assert_int_equal(fi_mr_reg(srv.dom, ro, sizeof(ro), FI_REMOTE_READ, 0, 0,
				   0, &romr, NULL), 0);

	/* what is had: 8-byte integers, add, read, compare-and-swap */
	assert_int_equal(fi_query_atomic(cli.dom, FI_UINT64, FI_SUM, &attr, 0), 0);
	assert_int_equal(attr.count, 1);
	assert_int_equal(attr.size, 8);
	assert_int_equal(fi_query_atomic(cli.dom, FI_INT64, FI_CSWAP, &attr,
					 FI_COMPARE_ATOMIC), 0);
	assert_int_equal(fi_query_atomic(cli.dom, FI_UINT64, FI_ATOMIC_READ, &attr,
					 FI_FETCH_ATOMIC), 0);
	assert_int_equal(fi_query_atomic(cli.dom, FI_DOUBLE, FI_SUM, &attr, 0),
			 -FI_EOPNOTSUPP);
	assert_int_equal(fi_query_atomic(cli.dom, FI_UINT64, FI_MIN, &attr, 0),
			 -FI_EOPNOTSUPP);
	assert_int_equal(fi_query_atomic(cli.dom, FI_UINT64, FI_CSWAP, &attr, 0),
			 -FI_EOPNOTSUPP);
	assert_int_equal(fi_query_atomic(cli.dom, FI_UINT64, FI_SUM, &attr,
					 FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC),
			 -FI_EINVAL);
	assert_int_equal(fi_atomicvalid(cli.ep, FI_UINT64, FI_SUM, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(fi_compare_atomicvalid(cli.ep, FI_UINT64, FI_SUM, &count),
			 -FI_EOPNOTSUPP);

	/* add; fetch-and-add; read; compare-and-swap, hit and miss */
	v = 5;
	assert_int_equal(fi_atomic(cli.ep, &v, 1, NULL, 0, 8, key, FI_UINT64,
				   FI_SUM, (void *)0x81), 0);
	atomic_done(&cli, (void *)0x81, FI_WRITE);
	assert_int_equal(words[1], 5);
	v = 7;
	assert_int_equal(fi_fetch_atomic(cli.ep, &v, 1, NULL, &res, NULL, 0, 8, key,
					 FI_UINT64, FI_SUM, (void *)0x82), 0);
	atomic_done(&cli, (void *)0x82, FI_READ);
	assert_int_equal(res, 5);
	assert_int_equal(words[1], 12);
	assert_int_equal(fi_fetch_atomic(cli.ep, NULL, 1, NULL, &res, NULL, 0, 8,
					 key, FI_UINT64, FI_ATOMIC_READ, NULL), 0);
	atomic_done(&cli, NULL, FI_READ);
	assert_int_equal(res, 12);
	v = 100;
	cmp = 12;
	assert_int_equal(fi_compare_atomic(cli.ep, &v, 1, NULL, &cmp, NULL, &res,
					   NULL, 0, 8, key, FI_UINT64, FI_CSWAP,
					   (void *)0x83), 0);
	atomic_done(&cli, (void *)0x83, FI_READ);
	assert_int_equal(res, 12);
	assert_int_equal(words[1], 100);
	v = 2;
	cmp = 1;
	assert_int_equal(fi_compare_atomic(cli.ep, &v, 1, NULL, &cmp, NULL, &res,
					   NULL, 0, 8, key, FI_INT64, FI_CSWAP, NULL), 0);
	atomic_done(&cli, NULL, FI_READ);
	assert_int_equal(res, 100);
	assert_int_equal(words[1], 100);	/* no swap */

	/* a counter: each add lands once, in order */
	for (i = 0; i < 200; i++) {
		assert_int_equal(fi_fetch_atomic(cli.ep, &one, 1, NULL, &res, NULL,
						 0, 16, key, FI_UINT64, FI_SUM,
						 NULL), 0);
		atomic_done(&cli, NULL, FI_READ);
		assert_int_equal(res, (uint64_t)i);
	}
	assert_int_equal(words[2], 200);
	/* injected: no completion, the buffer ours at once */
	assert_int_equal(fi_inject_atomic(cli.ep, &one, 1, 0, 24, key, FI_UINT64,
					  FI_SUM), 0);
	for (i = 0; i < 1000 && __atomic_load_n(&words[3], __ATOMIC_ACQUIRE) != 1; i++) {
		assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);
		usleep(1000);
	}
	assert_int_equal(words[3], 1);
	assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);

	/* garbage: misaligned, more than one, other types and ops, rights */
	assert_int_equal(fi_atomic(cli.ep, &one, 1, NULL, 0, 3, key, FI_UINT64,
				   FI_SUM, NULL), -FI_EINVAL);
	assert_int_equal(fi_atomic(cli.ep, &one, 2, NULL, 0, 8, key, FI_UINT64,
				   FI_SUM, NULL), -FI_EINVAL);
	assert_int_equal(fi_atomic(cli.ep, &one, 1, NULL, 0, 8, key, FI_DOUBLE,
				   FI_SUM, NULL), -FI_EOPNOTSUPP);
	assert_int_equal(fi_atomic(cli.ep, &one, 1, NULL, 0, 8, key, FI_UINT64,
				   FI_BOR, NULL), -FI_EOPNOTSUPP);
	assert_int_equal(fi_fetch_atomic(cli.ep, &one, 1, NULL, NULL, NULL, 0, 8,
					 key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	assert_int_equal(fi_atomic(cli.ep, &one, 1, NULL, 0, 0, fi_mr_key(romr),
				   FI_UINT64, FI_SUM, NULL), -FI_EACCES);
	assert_int_equal(fi_atomic(cli.ep, &one, 1, NULL, 0, sizeof(words), key,
				   FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	assert_int_equal(words[1], 100);

	/* the iov and msg forms: one ioc of one element, the same word */
	{
		struct fi_ioc iov = { &one, 1 }, cmpv = { &cmp, 1 }, resv = { &res, 1 };
		struct fi_ioc two = { &one, 2 }, none = { NULL, 1 };
		struct fi_rma_ioc rio = { .addr = 16, .count = 1, .key = key };
		struct fi_msg_atomic m = {
			.msg_iov = &iov, .iov_count = 1, .rma_iov = &rio,
			.rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_SUM,
			.context = (void *)0x91,
		};

		assert_int_equal(fi_atomicv(cli.ep, &iov, NULL, 1, 0, 16, key,
					    FI_UINT64, FI_SUM, (void *)0x90), 0);
		atomic_done(&cli, (void *)0x90, FI_WRITE);
		assert_int_equal(words[2], 201);
		assert_int_equal(fi_atomicmsg(cli.ep, &m, FI_COMPLETION), 0);
		atomic_done(&cli, (void *)0x91, FI_WRITE);
		assert_int_equal(words[2], 202);
		assert_int_equal(fi_atomicmsg(cli.ep, &m, FI_INJECT), 0);	/* no completion */
		for (i = 0; i < 1000 && __atomic_load_n(&words[2], __ATOMIC_ACQUIRE) != 203; i++)
			usleep(1000);
		assert_int_equal(words[2], 203);
		res = 0;
		assert_int_equal(fi_fetch_atomicv(cli.ep, &iov, NULL, 1, &resv, NULL, 1,
						  0, 16, key, FI_UINT64, FI_SUM,
						  (void *)0x92), 0);
		atomic_done(&cli, (void *)0x92, FI_READ);
		assert_int_equal(res, 203);
		/* FI_ATOMIC_READ: the operand's iov is ignored */
		m.op = FI_ATOMIC_READ;
		m.msg_iov = NULL;
		m.iov_count = 0;
		m.context = (void *)0x93;
		assert_int_equal(fi_fetch_atomicmsg(cli.ep, &m, &resv, NULL, 1,
						    FI_COMPLETION), 0);
		atomic_done(&cli, (void *)0x93, FI_READ);
		assert_int_equal(res, 204);
		v = 7;
		cmp = 204;
		iov.addr = &v;
		assert_int_equal(fi_compare_atomicv(cli.ep, &iov, NULL, 1, &cmpv, NULL,
						    1, &resv, NULL, 1, 0, 16, key,
						    FI_UINT64, FI_CSWAP, (void *)0x94), 0);
		atomic_done(&cli, (void *)0x94, FI_READ);
		assert_int_equal(res, 204);
		assert_int_equal(words[2], 7);
		m.op = FI_CSWAP;
		m.msg_iov = &iov;
		m.iov_count = 1;
		m.context = (void *)0x95;
		v = 8;
		cmp = 7;
		assert_int_equal(fi_compare_atomicmsg(cli.ep, &m, &cmpv, NULL, 1,
						      &resv, NULL, 1, FI_COMPLETION), 0);
		atomic_done(&cli, (void *)0x95, FI_READ);
		assert_int_equal(words[2], 8);

		/* garbage: more than one ioc or element, none, a bad target */
		iov.addr = &one;
		assert_int_equal(fi_atomicv(cli.ep, &iov, NULL, 2, 0, 16, key,
					    FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
		assert_int_equal(fi_atomicv(cli.ep, &two, NULL, 1, 0, 16, key,
					    FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
		assert_int_equal(fi_atomicv(cli.ep, &none, NULL, 1, 0, 16, key,
					    FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
		assert_int_equal(fi_atomicv(cli.ep, NULL, NULL, 1, 0, 16, key,
					    FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
		assert_int_equal(fi_atomicv(cli.ep, &iov, NULL, 1, 0, 16, key,
					    FI_DOUBLE, FI_SUM, NULL), -FI_EOPNOTSUPP);
		assert_int_equal(fi_fetch_atomicv(cli.ep, &iov, NULL, 1, &resv, NULL, 0,
						  0, 16, key, FI_UINT64, FI_SUM,
						  NULL), -FI_EINVAL);
		assert_int_equal(fi_compare_atomicv(cli.ep, &iov, NULL, 1, &cmpv, NULL,
						    0, &resv, NULL, 1, 0, 16, key,
						    FI_UINT64, FI_CSWAP, NULL), -FI_EINVAL);
		assert_int_equal(fi_atomicmsg(cli.ep, NULL, 0), -FI_EINVAL);
		m.op = FI_SUM;
		m.rma_iov_count = 2;
		assert_int_equal(fi_atomicmsg(cli.ep, &m, 0), -FI_EINVAL);
		m.rma_iov_count = 1;
		rio.count = 2;
		assert_int_equal(fi_atomicmsg(cli.ep, &m, 0), -FI_EINVAL);
		rio.count = 1;
		rio.addr = 5;
		assert_int_equal(fi_atomicmsg(cli.ep, &m, 0), -FI_EINVAL);	/* misaligned */
		rio.addr = 16;
		assert_int_equal(fi_atomicmsg(cli.ep, &m, 1ull << 61), -FI_EINVAL);
		m.op = FI_ATOMIC_READ;
		assert_int_equal(fi_fetch_atomicmsg(cli.ep, &m, &resv, NULL, 1, FI_INJECT),
				 -FI_EINVAL);
		m.op = FI_CSWAP;
		assert_int_equal(fi_compare_atomicmsg(cli.ep, &m, &cmpv, NULL, 1, &resv,
						      NULL, 1, FI_INJECT), -FI_EINVAL);
		assert_int_equal(words[2], 8);
		assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);
	}

	assert_int_equal(fi_close(&romr->fid), 0);
	assert_int_equal(fi_close(&mr->fid), 0);
	side_close(&cli);
	side_close(&srv);
}

/* cntr reaches want (the wait moves the fabric on), and stays there */
static void cntr_reaches(struct fid_cntr *cntr, uint64_t want)
{
	assert_int_equal(fi_cntr_wait(cntr, want, WAIT_MS), 0);
	assert_int_equal(fi_cntr_read(cntr), want);
}

/*
 * Counters: every completion counted by kind, those without a CQ entry
 * (inject) too; failures in the error count, which ends a wait at once;
 * RMA and atomics; the wait's timeout; what the application sets; the
 * wait fd woken by a count; garbage refused.
 */
static void test_cntr(void **state)
{
	static uint64_t words[2] __attribute__((aligned(64)));
	uint8_t out[100], in[8][100];
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP };
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry e;
	struct fid_cntr *spare;
	struct fid_ep *ep2;
	struct fid_mr *mr;
	struct side srv, cli;
	struct fid *fids[1];
	struct fid fake;
	uint64_t key, old = 0, one = 1;
	int64_t t0;
	int i, fd;

	(void)state;
	want_rma = true;
	with_cntrs = true;
	connect_pair(&srv, &cli);
	with_cntrs = false;
	want_rma = false;
	assert_int_equal(fi_cntr_read(cli.csend), 0);
	assert_int_equal(fi_cntr_readerr(cli.csend), 0);

	/* 5 sends and 2 injects (no CQ entry): 7 counted each side */
	for (i = 0; i < 7; i++)
		assert_int_equal(fi_recv(srv.ep, in[i], sizeof(in[i]), NULL, 0, NULL), 0);
	memset(out, 0x42, sizeof(out));
	for (i = 0; i < 5; i++)
		assert_int_equal(fi_send(cli.ep, out, sizeof(out), NULL, 0, NULL), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(fi_inject(cli.ep, out, 10, 0), 0);
	cntr_reaches(cli.csend, 7);
	cntr_reaches(srv.crecv, 7);
	for (i = 0; i < 5; i++)
		assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);
	for (i = 0; i < 7; i++)
		assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	assert_int_equal(in[6][9], 0x42);
	assert_int_equal(fi_cntr_read(srv.csend), 0);	/* kinds apart */
	assert_int_equal(fi_cntr_read(cli.crecv), 0);

	/* a failure: the error count moves, and a wait ends with FI_EAVAIL */
	assert_int_equal(fi_recv(srv.ep, in[0], 4, NULL, 0, NULL), 0);
	assert_int_equal(fi_send(cli.ep, out, sizeof(out), NULL, 0, NULL), 0);
	assert_int_equal(fi_cntr_wait(srv.crecv, 100, WAIT_MS), -FI_EAVAIL);
	assert_int_equal(fi_cntr_readerr(srv.crecv), 1);
	assert_int_equal(fi_cntr_read(srv.crecv), 7);
	wait_cq_err(&srv, srv.rcq, &e);
	assert_int_equal(e.err, FI_ETRUNC);
	cntr_reaches(cli.csend, 8);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);

	/* RMA and atomics: one counter bound for FI_READ | FI_WRITE */
	memset(words, 0, sizeof(words));
	assert_int_equal(fi_mr_reg(srv.dom, words, sizeof(words),
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
				   NULL), 0);
	key = fi_mr_key(mr);
	for (i = 0; i < 3; i++)
		assert_int_equal(fi_inject_write(cli.ep, out, 8, 0, 8, key), 0);
	assert_int_equal(fi_read(cli.ep, in[1], 8, NULL, 0, 8, key, NULL), 0);
	assert_int_equal(fi_atomic(cli.ep, &one, 1, NULL, 0, 0, key, FI_UINT64,
				   FI_SUM, NULL), 0);
	assert_int_equal(fi_fetch_atomic(cli.ep, &old, 1, NULL, &old, NULL, 0, 0,
					 key, FI_UINT64, FI_ATOMIC_READ, NULL), 0);
	cntr_reaches(cli.crma, 6);
	assert_int_equal(fi_cntr_readerr(cli.crma), 0);
	assert_int_equal(words[1], 0x4242424242424242ull);
	assert_int_equal(words[0], 1);
	assert_int_equal(old, 1);	/* the atomic read, after the add */
	/* refused when posted (a bad key): no count, no completion */
	assert_int_equal(fi_read(cli.ep, in[1], 8, NULL, 0, 0, key ^ 1, NULL),
			 -FI_EKEYREJECTED);
	assert_int_equal(fi_cntr_read(cli.crma), 6);
	for (i = 0; i < 3; i++)
		assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);	/* read, atomics */
	assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);

	/* a wait for what does not come ends at its time, not before */
	t0 = now_ms();
	assert_int_equal(fi_cntr_wait(cli.csend, 1000, 50), -FI_ETIMEDOUT);
	assert_true(now_ms() - t0 >= 45);
	assert_true(now_ms() - t0 < 5000);

	/* what the application does to its own counters */
	assert_int_equal(fi_cntr_set(cli.csend, 100), 0);
	assert_int_equal(fi_cntr_add(cli.csend, 5), 0);
	assert_int_equal(fi_cntr_read(cli.csend), 105);
	assert_int_equal(fi_cntr_seterr(cli.csend, 7), 0);
	assert_int_equal(fi_cntr_adderr(cli.csend, 2), 0);
	assert_int_equal(fi_cntr_readerr(cli.csend), 9);
	assert_int_equal(fi_cntr_wait(cli.csend, 105, 0), 0);

	/* the wait fd: armed by fi_trywait(), woken by the next count */
	fd = wait_fd_of(&cli.csend->fid);
	fids[0] = &cli.csend->fid;
	try_until_armed(&cli, fids, 1);
	assert_int_equal(fi_inject(cli.ep, out, 10, 0), 0);
	assert_true(readable(fd, 2000));
	assert_int_equal(fi_trywait(cli.fab, fids, 1), -FI_EAGAIN);
	assert_int_equal(fi_cntr_read(cli.csend), 106);

	/* garbage */
	attr.events = 99;
	assert_int_equal(fi_cntr_open(cli.dom, &attr, &spare, NULL), -FI_EINVAL);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.flags = 1;
	assert_int_equal(fi_cntr_open(cli.dom, &attr, &spare, NULL), -FI_EINVAL);
	attr.flags = 0;
	attr.wait_obj = FI_WAIT_SET;
	assert_int_equal(fi_cntr_open(cli.dom, &attr, &spare, NULL), -FI_ENOSYS);
	attr.wait_obj = (enum fi_wait_obj)77;
	assert_int_equal(fi_cntr_open(cli.dom, &attr, &spare, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_NONE;
	assert_int_equal(fi_cntr_open(cli.dom, &attr, &spare, NULL), 0);
	assert_int_equal(fi_control(&spare->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	assert_int_equal(fi_endpoint(cli.dom, cli.info, &ep2, NULL), 0);
	assert_int_equal(fi_ep_bind(ep2, &spare->fid, 0), -FI_EINVAL);
	assert_int_equal(fi_ep_bind(ep2, &spare->fid, FI_SEND | (1ull << 60)), -FI_EINVAL);
	assert_int_equal(fi_ep_bind(ep2, &spare->fid, FI_REMOTE_WRITE), -FI_ENOSYS);
	assert_int_equal(fi_ep_bind(ep2, &spare->fid, FI_SEND | FI_REMOTE_READ), -FI_ENOSYS);
	memset(&fake, 0, sizeof(fake));
	fake.fclass = FI_CLASS_CNTR;
	fake.ops = NULL;	/* a counter's class, not one of ours */
	assert_int_equal(fi_ep_bind(ep2, &fake, FI_SEND), -FI_EINVAL);
	assert_int_equal(fi_ep_bind(ep2, &srv.csend->fid, FI_SEND), -FI_EINVAL);	/* another fabric */
	assert_int_equal(fi_ep_bind(ep2, &spare->fid, FI_RECV), 0);
	assert_int_equal(fi_close(&spare->fid), -FI_EBUSY);	/* counted into */
	assert_int_equal(fi_close(&ep2->fid), 0);
	assert_int_equal(fi_close(&spare->fid), 0);
	assert_int_equal(fi_ep_bind(cli.ep, &cli.crecv->fid, FI_RECV), -FI_EOPBADSTATE);

	assert_int_equal(fi_close(&mr->fid), 0);
	side_close(&cli);
	side_close(&srv);
}

/* ---- rendezvous: large messages read by the receiver's engine ------------ */

/* b posts a receive of rlen bytes at rx, a sends len from tx: both complete */
static void rndv_one(struct side *a, struct side *b, const uint8_t *tx, size_t len,
		     uint8_t *rx, size_t rlen)
{
	struct fi_cq_data_entry c;

	assert_int_equal(fi_recv(b->ep, rx, rlen, NULL, 0, rx), 0);
	assert_int_equal(fi_send(a->ep, tx, len, NULL, 0, (void *)tx), 0);
	assert_int_equal(wait_cq(a, a->tcq, &c), 1);
	assert_ptr_equal(c.op_context, tx);
	assert_int_equal(wait_cq(b, b->rcq, &c), 1);
	assert_ptr_equal(c.op_context, rx);
	assert_int_equal(c.len, len);
}

/*
 * What the receiver gets of a 1 MiB message whose sender rewrote its
 * buffer after fi_send() returned and before any receive was posted
 * (which libfabric forbids, and which tells the two paths apart): a
 * rendezvous reads the sender's buffer when the receive comes, so the
 * new bytes; pieces were copied into the ring at fi_send(), so the old
 * ones first. True: every byte is the new one.
 */
static bool rndv_reads_late(const char *rndv_size)
{
	enum { LEN = 1 << 20 };
	uint8_t *tx = malloc(LEN), *rx = malloc(LEN);
	struct fi_cq_data_entry c;
	struct side srv, cli;
	bool late;
	size_t i;

	assert_int_equal(setenv("FI_CLANQ_RNDV_SIZE", rndv_size, 1), 0);
	connect_pair(&srv, &cli);
	fill(tx, LEN, 70);
	assert_int_equal(fi_send(cli.ep, tx, LEN, NULL, 0, tx), 0);
	poke(&cli);
	fill(tx, LEN, 71);
	assert_int_equal(fi_recv(srv.ep, rx, LEN, NULL, 0, rx), 0);
	assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	assert_int_equal(c.len, LEN);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	for (i = 0; i < LEN && rx[i] == pat(71, i); i++)
		;
	late = i == LEN;
	side_close(&cli);
	side_close(&srv);
	assert_int_equal(unsetenv("FI_CLANQ_RNDV_SIZE"), 0);
	free(tx);
	free(rx);
	return late;
}

/*
 * From FI_CLANQ_RNDV_SIZE bytes (64 KiB by default) a message is read
 * by the receiver's engine from the sender's memory: at its threshold
 * and around it, from and into odd addresses, into several iovs (the
 * bounce region), truncated (into less than its own header too), with
 * remote CQ data, and sends after a rendezvous completing after it, in
 * order. Every byte checked, nothing written past a receive.
 */
static void test_rndv(void **state)
{
	static const size_t sizes[] = {
		(256 << 10) - 1, 256 << 10, (256 << 10) + 1, (1 << 20) + 3, 3 << 20,
	};
	enum { BIG = (3 << 20) + 64, SHORT = 300001 };
	uint8_t *txb = malloc(BIG), *rxb = malloc(BIG), *tx = txb + 1, *rx = rxb + 3;
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry e;
	struct side srv, cli;
	struct iovec riov[3];
	uint8_t small[100];
	size_t i;

	(void)state;
	/* the receiver reads the sender's buffer, and only with rendezvous on */
	assert_true(rndv_reads_late("262144"));
	assert_false(rndv_reads_late("0"));
	assert_true(rndv_reads_late("garbage"));	/* the default: on */

	/* around a threshold of 256 KiB: pieces below, a rendezvous from it */
	assert_int_equal(setenv("FI_CLANQ_RNDV_SIZE", "262144", 1), 0);
	connect_pair(&srv, &cli);
	assert_int_equal(unsetenv("FI_CLANQ_RNDV_SIZE"), 0);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		fill(tx, sizes[i], 80 + (uint32_t)i);
		memset(rxb, 0xee, BIG);
		rndv_one(&cli, &srv, tx, sizes[i], rx, sizes[i] + 17);
		check(rx, sizes[i], 80 + (uint32_t)i);
		assert_int_equal(rx[sizes[i]], 0xee);
		assert_int_equal(rxb[2], 0xee);
	}

	/* into three iovs: through the bounce region */
	fill(tx, (1 << 20) + 3, 90);
	memset(rxb, 0xee, BIG);
	riov[0] = (struct iovec){ rx, 5 };
	riov[1] = (struct iovec){ rx + 5, 400000 };
	riov[2] = (struct iovec){ rx + 400005, (1 << 20) };
	assert_int_equal(fi_recvv(srv.ep, riov, NULL, 3, 0, riov), 0);
	assert_int_equal(fi_senddata(cli.ep, tx, (1 << 20) + 3, NULL, 0xcafe, 0, tx), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	assert_ptr_equal(c.op_context, riov);
	assert_int_equal(c.len, (1 << 20) + 3);
	assert_true(c.flags & FI_REMOTE_CQ_DATA);
	assert_int_equal(c.data, 0xcafe);
	check(rx, (1 << 20) + 3, 90);
	assert_int_equal(rx[(1 << 20) + 3], 0xee);

	/* truncated: into SHORT bytes, then into 8 (less than the header) */
	memset(rxb, 0xee, BIG);
	assert_int_equal(fi_recv(srv.ep, rx, SHORT, NULL, 0, rx), 0);
	assert_int_equal(fi_send(cli.ep, tx, (1 << 20) + 3, NULL, 0, tx), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	wait_cq_err(&srv, srv.rcq, &e);
	assert_int_equal(e.err, FI_ETRUNC);
	assert_int_equal(e.len, SHORT);
	assert_int_equal(e.olen, (1 << 20) + 3 - SHORT);
	check(rx, SHORT, 90);
	assert_int_equal(rx[SHORT], 0xee);
	memset(rxb, 0xee, BIG);
	assert_int_equal(fi_recv(srv.ep, rx, 8, NULL, 0, rx), 0);
	assert_int_equal(fi_senddata(cli.ep, tx, 1 << 20, NULL, 0xbeef, 0, tx), 0);
	assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
	wait_cq_err(&srv, srv.rcq, &e);
	assert_int_equal(e.err, FI_ETRUNC);
	assert_int_equal(e.len, 8);
	assert_int_equal(e.olen, (1 << 20) - 8);
	assert_int_equal(e.data, 0xbeef);
	check(rx, 8, 90);
	assert_int_equal(rx[8], 0xee);

	/*
	 * In order: a rendezvous, a small send and another rendezvous; the
	 * small one goes at once but completes after the first, which
	 * completes only once the receiver read it
	 */
	fill(small, sizeof(small), 91);
	fill(tx + BIG / 2, 1 << 20, 92);
	assert_int_equal(fi_send(cli.ep, tx, 1 << 20, NULL, 0, (void *)1), 0);
	assert_int_equal(fi_send(cli.ep, small, sizeof(small), NULL, 0, (void *)2), 0);
	assert_int_equal(fi_send(cli.ep, tx + BIG / 2, 1 << 20, NULL, 0, (void *)3), 0);
	for (i = 0; i < 20; i++)
		assert_int_equal(fi_cq_read(cli.tcq, &c, 1), -FI_EAGAIN);
	memset(rxb, 0xee, BIG);
	assert_int_equal(fi_recv(srv.ep, rx, 1 << 20, NULL, 0, (void *)11), 0);
	assert_int_equal(fi_recv(srv.ep, rx + (1 << 20), 100, NULL, 0, (void *)12), 0);
	assert_int_equal(fi_recv(srv.ep, rx + (2 << 20), 1 << 20, NULL, 0, (void *)13), 0);
	for (i = 1; i <= 3; i++) {
		assert_int_equal(wait_cq(&cli, cli.tcq, &c), 1);
		assert_ptr_equal(c.op_context, (void *)i);
		assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
		assert_ptr_equal(c.op_context, (void *)(10 + i));
	}
	check(rx, 1 << 20, 90);
	check(rx + (1 << 20), sizeof(small), 91);
	check(rx + (2 << 20), 1 << 20, 92);

	side_close(&cli);
	side_close(&srv);
	free(txb);
	free(rxb);
}

/*
 * srv listens on NIC 0 (its address in *a), a child runs fn(arg) (arg
 * may hold a), and the child's connection request is taken: srv's
 * endpoint, not accepted yet. The child's pid.
 */
static pid_t listen_for_child(struct side *srv, struct caddr *a,
			      void (*fn)(void *), void *arg)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *e = (void *)buf;
	size_t alen = sizeof(*a);
	uint32_t ev;
	pid_t pid;

	side_open(srv, 0);
	assert_int_equal(fi_passive_ep(srv->fab, srv->info, &srv->pep, NULL), 0);
	assert_int_equal(fi_pep_bind(srv->pep, &srv->eq->fid, 0), 0);
	assert_int_equal(fi_listen(srv->pep), 0);
	assert_int_equal(fi_getname(&srv->pep->fid, a, &alen), 0);
	pid = itest_fork(fn, arg);
	assert_int_equal(wait_eq(srv, &ev, e, sizeof(buf)), sizeof(*e));
	assert_int_equal(ev, FI_CONNREQ);
	side_cqs_ep(srv, e->info);
	fi_freeinfo(e->info);
	return pid;
}

/* srv's endpoint ends (FI_SHUTDOWN), its receive CQ read meanwhile */
static void wait_shutdown(struct side *srv)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *e = (void *)buf;
	struct fi_cq_data_entry c;
	int64_t end = now_ms() + WAIT_MS;
	uint32_t ev;
	ssize_t n;

	do {
		n = fi_eq_read(srv->eq, &ev, e, sizeof(buf), 0);
		if (n == -FI_EAGAIN)
			(void)fi_cq_read(srv->rcq, &c, 1);
	} while (n == -FI_EAGAIN && now_ms() < end);
	assert_int_equal(n, sizeof(*e));
	assert_int_equal(ev, FI_SHUTDOWN);
	assert_ptr_equal(e->fid, &srv->ep->fid);
}

/* ---- a peer that speaks the provider's protocol badly --------------------- */

struct raw_peer {
	struct caddr a;		/* the provider's listener */
	uint32_t node;		/* its node */
};

static void raw_send(struct clanq_conn *c, uint8_t type, uint8_t flags, uint32_t len,
		     uint64_t data, const void *body, size_t blen)
{
	struct cfi_hdr h = {
		.magic = CFI_HDR_MAGIC, .type = type, .flags = flags, .len = len, .data = data,
	};
	uint8_t buf[sizeof(h) + 64];

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), body, blen);
	CHILD_CHECK_INT(clanq_send(c, buf, sizeof(h) + blen, 0), 0);
}

/* the provider's answer to our rendezvous: its status (0, or an FI_E*) */
static int raw_done(struct clanq_conn *c, uint64_t key)
{
	struct cfi_hdr h;

	CHILD_CHECK_INT(clanq_recv(c, &h, sizeof(h), 0), sizeof(h));
	CHILD_CHECK_INT(h.magic, CFI_HDR_MAGIC);
	CHILD_CHECK_INT(h.type, CFI_H_DONE);
	CHILD_CHECK(h.data == key);
	return (int)h.len;
}

/*
 * A client of libclanq's own that sends the provider rendezvous headers
 * (cfi_rts) by hand: one naming no region, one with the wrong key, one
 * naming a region exported without READ, then a good one (its memory,
 * 300,000 bytes, exported READ); then it answers the provider's own
 * rendezvous with the wrong key.
 */
static void raw_rndv_client(void *arg)
{
	enum { LEN = 300000 };
	const struct raw_peer *p = arg;
	static uint8_t mem[LEN], nowrite[4096];
	struct clanq_region good, wo;
	struct clanq_conn *c;
	struct clanq_net *net;
	struct clanq_dev dev;
	struct cfi_rts rts;
	uint64_t key, wo_key;
	uint8_t buf[64];

	CHILD_CHECK_INT(clanq_open_nic(&dev, 1), 0);
	CHILD_CHECK_INT(clanq_net_open(&net, &dev, NULL), 0);
	CHILD_CHECK_INT(clanq_connect(net, &c, p->node, ntohs(p->a.sin6_port), NULL), 0);
	raw_send(c, CFI_H_CONNREQ, 0, 0, 0, NULL, 0);
	CHILD_CHECK_INT(clanq_recv(c, buf, sizeof(buf), 0), sizeof(struct cfi_hdr));
	CHILD_CHECK_INT(((struct cfi_hdr *)buf)->type, CFI_H_ACCEPT);

	fill(mem, LEN, 95);
	CHILD_CHECK_INT(clanq_region_register(&dev, &good, mem, LEN), 0);
	CHILD_CHECK_INT(clanq_region_export(&good, CLANQ_RIGHT_READ, &key), 0);
	CHILD_CHECK_INT(clanq_region_register(&dev, &wo, nowrite, sizeof(nowrite)), 0);
	CHILD_CHECK_INT(clanq_region_export(&wo, CLANQ_RIGHT_WRITE, &wo_key), 0);

	rts = (struct cfi_rts){ .region = 0x7fffff00, .key = 1 };	/* nobody's */
	raw_send(c, CFI_H_DATA, CFI_HF_RNDV, LEN, 0, &rts, sizeof(rts));
	CHILD_CHECK(raw_done(c, 1) != 0);
	rts = (struct cfi_rts){ .region = good.addr.id, .key = key ^ 1 };
	raw_send(c, CFI_H_DATA, CFI_HF_RNDV, LEN, 0, &rts, sizeof(rts));
	CHILD_CHECK(raw_done(c, key ^ 1) != 0);
	rts = (struct cfi_rts){ .region = wo.addr.id, .key = wo_key };
	raw_send(c, CFI_H_DATA, CFI_HF_RNDV, sizeof(nowrite), 0, &rts, sizeof(rts));
	CHILD_CHECK(raw_done(c, wo_key) != 0);
	rts = (struct cfi_rts){ .region = good.addr.id, .key = key };
	raw_send(c, CFI_H_DATA, CFI_HF_RNDV | CFI_HF_DATA, LEN, 0xd0d0, &rts, sizeof(rts));
	CHILD_CHECK_INT(raw_done(c, key), 0);
	/* the provider's own rendezvous, answered with the wrong key: it resets */
	CHILD_CHECK_INT(clanq_recv(c, buf, sizeof(buf), 0),
			sizeof(struct cfi_hdr) + sizeof(struct cfi_rts));
	CHILD_CHECK(((struct cfi_hdr *)buf)->flags & CFI_HF_RNDV);
	memcpy(&rts, buf + sizeof(struct cfi_hdr), sizeof(rts));
	raw_send(c, CFI_H_DONE, 0, 0, rts.key ^ 1, NULL, 0);
	CHILD_CHECK(clanq_recv(c, buf, sizeof(buf), 0) <= 0);
	clanq_region_free(&good);
	clanq_region_free(&wo);
	clanq_conn_close(c);
	clanq_net_close(net);
	clanq_close(&dev);
}

/*
 * The receiver side of a rendezvous trusts nothing of it: a region that
 * is not there, a wrong key, a region without READ each fail that
 * receive alone (an error completion; the sender is answered with the
 * error), a good one from the same peer still arrives whole, and an
 * answer that names another rendezvous resets the connection
 * (FI_SHUTDOWN; the send and a posted receive cancelled).
 */
static void test_rndv_hostile_peer(void **state)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *e = (void *)buf;
	static uint8_t rx[300000 + 16], tx[1 << 20];
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry ce;
	struct raw_peer p;
	struct side srv;
	uint32_t ev;
	pid_t pid;
	int i;

	(void)state;
	p.node = node_of(0);
	pid = listen_for_child(&srv, &p.a, raw_rndv_client, &p);
	assert_int_equal(fi_accept(srv.ep, NULL, 0), 0);
	assert_int_equal(wait_eq(&srv, &ev, e, sizeof(buf)), sizeof(*e));
	assert_int_equal(ev, FI_CONNECTED);
	for (i = 0; i < 3; i++) {
		memset(rx, 0xee, sizeof(rx));
		assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx + i), 0);
		wait_cq_err(&srv, srv.rcq, &ce);
		assert_ptr_equal(ce.op_context, rx + i);
		assert_true(ce.err != 0 && ce.err != FI_ETRUNC);
		assert_int_equal(ce.len, 0);
	}
	memset(rx, 0xee, sizeof(rx));
	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	assert_int_equal(c.len, 300000);
	assert_int_equal(c.data, 0xd0d0);
	check(rx, 300000, 95);
	assert_int_equal(rx[300000], 0xee);
	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	assert_int_equal(fi_send(srv.ep, tx, sizeof(tx), NULL, 0, tx), 0);
	wait_shutdown(&srv);
	wait_cq_err(&srv, srv.rcq, &ce);
	assert_int_equal(ce.err, FI_ECANCELED);
	wait_cq_err(&srv, srv.tcq, &ce);
	assert_int_equal(ce.err, FI_ECANCELED);
	assert_ptr_equal(ce.op_context, tx);
	assert_int_equal(itest_wait(pid, 10 * ITEST_NS_PER_S), 0);
	side_close(&srv);
}

static void test_peer_killed(void **state)
{
	uint8_t buf[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *e = (void *)buf;
	static uint8_t rx[1 << 20];
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry ce;
	struct side srv;
	struct caddr a;
	uint32_t ev;
	pid_t pid;
	int status;

	(void)state;
	pid = listen_for_child(&srv, &a, killed_client, &a);
	assert_int_equal(fi_recv(srv.ep, rx, 100, NULL, 0, rx), 0);
	assert_int_equal(fi_accept(srv.ep, NULL, 0), 0);
	assert_int_equal(wait_eq(&srv, &ev, e, sizeof(buf)), sizeof(*e));
	assert_int_equal(ev, FI_CONNECTED);
	assert_int_equal(wait_cq(&srv, srv.rcq, &c), 1);
	check(rx, 100, 1);
	itest_sleep_ns(300 * ITEST_NS_PER_MS);	/* into its 1 MiB send */
	assert_int_equal(kill(pid, SIGKILL), 0);
	status = itest_wait(pid, 10 * ITEST_NS_PER_S);
	assert_true(status != -1 && WIFSIGNALED(status));
	assert_int_equal(fi_recv(srv.ep, rx, sizeof(rx), NULL, 0, rx), 0);
	wait_shutdown(&srv);
	wait_cq_err(&srv, srv.rcq, &ce);
	assert_int_equal(ce.err, FI_ECANCELED);
	assert_ptr_equal(ce.op_context, rx);
	side_close(&srv);
}

/* argv[1], if any: a cmocka filter, e.g. "test_rndv*" */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_getinfo_defaults),
		cmocka_unit_test(test_getinfo_one_nic),
		cmocka_unit_test(test_getinfo_refused),
		cmocka_unit_test(test_getinfo_addresses),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_exchange),
		cmocka_unit_test(test_ring_size),
		cmocka_unit_test(test_pieces_both_ways),
		cmocka_unit_test(test_rndv),
		cmocka_unit_test_teardown(test_rndv_hostile_peer, itest_teardown),
		cmocka_unit_test(test_queued_in_order),
		cmocka_unit_test(test_small_queued_in_order),
		cmocka_unit_test(test_iov_trunc_cancel),
		cmocka_unit_test(test_cq_formats),
		cmocka_unit_test(test_sread_waits),
		cmocka_unit_test(test_sread_lets_other_threads_in),
		cmocka_unit_test(test_wait_fd),
		cmocka_unit_test(test_wait_fd_kick),
		cmocka_unit_test(test_wait_none),
		cmocka_unit_test(test_cq_read_yields),
		cmocka_unit_test(test_shutdown),
		cmocka_unit_test(test_reject_and_refused),
		cmocka_unit_test(test_getinfo_rma),
		cmocka_unit_test(test_rma),
		cmocka_unit_test(test_atomic),
		cmocka_unit_test(test_cntr),
		cmocka_unit_test_teardown(test_peer_killed, itest_teardown),
	};

	if (!getenv("FI_PROVIDER_PATH"))
		fprintf(stderr, "test_fabric: FI_PROVIDER_PATH is not set\n");
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
