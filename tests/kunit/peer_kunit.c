// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for a NIC's peer table (driver/peer.c): the nodes on other
 * hosts and their addresses, which the wire to other hosts (the verbs
 * wire) connects to. What may be added, what a listing shows, and that
 * a reference outlives the entry it was taken on.
 */
#include <kunit/test.h>
#include <linux/inet.h>
#include <linux/module.h>

#include "../driver/clanq_drv.h"
#include "kunit_util.h"

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
MODULE_IMPORT_NS(CLANQ_WIRE);

#define PT_INDEX	13
#define PT_NODE		0x5a00u

static int peer_test_init(struct kunit *test)
{
	return nic_fixture_init(test, PT_INDEX, PT_NODE);
}

static struct clanq_nic *pt_nic(struct kunit *test)
{
	return &((struct nic_fixture *)test->priv)->nic;
}

static struct clanq_ioc_peer pt_peer(u32 node, const char *ip, u32 port)
{
	struct clanq_ioc_peer p = { .node = node, .port = port };

	p.ipv4 = (__force u32)in_aton(ip);
	return p;
}

/* Deleting every peer a test added is the test's cleanup too. */
static void pt_del_all(struct kunit *test)
{
	struct clanq_nic *nic = pt_nic(test);
	struct clanq_peer_stat st;
	u32 total;

	while (clanq_kpeer_list(nic, &st, 1, &total))
		KUNIT_ASSERT_EQ(test, clanq_kpeer_del(nic, st.node), 0);
}

/* Added peers are listed in node order, with what was given. */
static void added_peers_are_listed_in_node_order(struct kunit *test)
{
	struct clanq_nic *nic = pt_nic(test);
	struct clanq_ioc_peer p;
	struct clanq_peer_stat st[4];
	const char *why;
	u32 total;

	p = pt_peer(30, "10.77.0.3", 0);
	KUNIT_ASSERT_EQ(test, clanq_kpeer_add(nic, &p, &why), 0);
	p = pt_peer(10, "10.77.0.1", 4000);
	KUNIT_ASSERT_EQ(test, clanq_kpeer_add(nic, &p, &why), 0);
	p = pt_peer(20, "10.77.0.2", 65535);
	KUNIT_ASSERT_EQ(test, clanq_kpeer_add(nic, &p, &why), 0);

	KUNIT_ASSERT_EQ(test, clanq_kpeer_list(nic, st, 4, &total), 3u);
	KUNIT_EXPECT_EQ(test, total, 3u);
	KUNIT_EXPECT_EQ(test, st[0].node, 10u);
	KUNIT_EXPECT_EQ(test, st[1].node, 20u);
	KUNIT_EXPECT_EQ(test, st[2].node, 30u);
	KUNIT_EXPECT_EQ(test, st[0].ipv4, (__force u32)in_aton("10.77.0.1"));
	KUNIT_EXPECT_EQ(test, st[0].port, 4000u);
	KUNIT_EXPECT_EQ(test, st[1].port, 65535u);
	/* port 0: the wire to other hosts' port (0 while none is loaded) */
	KUNIT_EXPECT_EQ(test, st[2].port, clanq_wire_port());
	KUNIT_EXPECT_EQ(test, st[0].state, (u32)CLANQ_PEER_IDLE);
	KUNIT_EXPECT_EQ(test, st[0].connects, 0u);
	KUNIT_EXPECT_EQ(test, st[0].last_error, 0);

	/* room for fewer: the first ones, and the total */
	KUNIT_EXPECT_EQ(test, clanq_kpeer_list(nic, st, 2, &total), 2u);
	KUNIT_EXPECT_EQ(test, total, 3u);
	KUNIT_EXPECT_EQ(test, st[1].node, 20u);
	pt_del_all(test);
}

static void pt_refused(struct kunit *test, int err, u32 node, const char *ip,
		       u32 port)
{
	struct clanq_ioc_peer p = pt_peer(node, ip, port);
	const char *why = NULL;

	KUNIT_EXPECT_EQ_MSG(test, clanq_kpeer_add(pt_nic(test), &p, &why), err,
			    "node %u at %s:%u", node, ip, port);
	KUNIT_EXPECT_NOT_NULL(test, why);
}

/* What cannot be a peer is refused, and says why. */
static void bad_peers_are_refused(struct kunit *test)
{
	struct clanq_nic *nic = pt_nic(test), *local = clanq_nic_by_index(0);
	struct clanq_ioc_peer p;
	struct clanq_peer_stat st;
	const char *why;
	u32 total;

#define REFUSED(err, node, ip, port) pt_refused(test, err, node, ip, port)
	REFUSED(-EINVAL, CLANQ_NODE_INVALID, "10.0.0.1", 0);
	REFUSED(-EINVAL, 5, "0.0.0.0", 0);
	REFUSED(-EINVAL, 5, "255.255.255.255", 0);
	REFUSED(-EINVAL, 5, "224.0.0.1", 0);
	REFUSED(-EINVAL, 5, "239.1.2.3", 0);
	REFUSED(-EINVAL, 5, "10.0.0.1", 65536);
	REFUSED(-EINVAL, 5, "10.0.0.1", 0xffffffff);
	/* a node of this host is the loop wire's */
	if (local)
		REFUSED(-EINVAL, local->node, "10.0.0.1", 0);
	p = pt_peer(5, "10.0.0.1", 0);
	KUNIT_ASSERT_EQ(test, clanq_kpeer_add(nic, &p, &why), 0);
	/* once per node, whatever the address */
	REFUSED(-EEXIST, 5, "10.0.0.2", 0);
#undef REFUSED
	KUNIT_EXPECT_EQ(test, clanq_kpeer_list(nic, &st, 1, &total), 1u);
	KUNIT_EXPECT_EQ(test, total, 1u);
	KUNIT_EXPECT_EQ(test, st.ipv4, (__force u32)in_aton("10.0.0.1"));

	KUNIT_EXPECT_EQ(test, clanq_kpeer_del(nic, 6), -ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kpeer_del(nic, 5), 0);
	KUNIT_EXPECT_EQ(test, clanq_kpeer_del(nic, 5), -ENOENT);
	KUNIT_EXPECT_EQ(test, clanq_kpeer_list(nic, &st, 1, &total), 0u);
	KUNIT_EXPECT_EQ(test, total, 0u);
}

/* A reference taken on a peer outlives its deletion; lookups do not find it. */
static void a_reference_outlives_deletion(struct kunit *test)
{
	struct clanq_nic *nic = pt_nic(test);
	struct clanq_ioc_peer p = pt_peer(77, "192.168.1.77", 0);
	struct clanq_kpeer *peer;
	const char *why;

	KUNIT_ASSERT_EQ(test, clanq_kpeer_add(nic, &p, &why), 0);
	KUNIT_EXPECT_TRUE(test, clanq_kpeer_known(nic, 77));
	KUNIT_EXPECT_FALSE(test, clanq_kpeer_known(nic, 78));
	peer = clanq_kpeer_lookup(nic, 77);
	KUNIT_ASSERT_NOT_NULL(test, peer);
	KUNIT_EXPECT_EQ(test, clanq_kpeer_del(nic, 77), 0);
	KUNIT_EXPECT_NULL(test, clanq_kpeer_lookup(nic, 77));
	KUNIT_EXPECT_FALSE(test, clanq_kpeer_known(nic, 77));
	/* still ours to read (KASAN would say otherwise) */
	KUNIT_EXPECT_EQ(test, peer->node, 77u);
	KUNIT_EXPECT_TRUE(test, peer->ipv4 == in_aton("192.168.1.77"));
	clanq_kpeer_put(peer);
}

/* CLANQ_PEERS_MAX peers, and not one more. */
static void a_nic_holds_at_most_peers_max(struct kunit *test)
{
	struct clanq_nic *nic = pt_nic(test);
	struct clanq_ioc_peer p;
	struct clanq_peer_stat *st;
	const char *why;
	u32 i, total;

	for (i = 0; i < CLANQ_PEERS_MAX; i++) {
		p = pt_peer(1000 + i, "10.1.0.1", 0);
		KUNIT_ASSERT_EQ(test, clanq_kpeer_add(nic, &p, &why), 0);
	}
	p = pt_peer(999, "10.1.0.1", 0);
	KUNIT_EXPECT_EQ(test, clanq_kpeer_add(nic, &p, &why), -ENOSPC);
	st = kunit_kcalloc(test, CLANQ_PEERS_MAX, sizeof(*st), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, st);
	KUNIT_EXPECT_EQ(test, clanq_kpeer_list(nic, st, CLANQ_PEERS_MAX, &total),
			CLANQ_PEERS_MAX);
	KUNIT_EXPECT_EQ(test, st[CLANQ_PEERS_MAX - 1].node, 1000u + CLANQ_PEERS_MAX - 1);
	/* room again once one goes */
	KUNIT_EXPECT_EQ(test, clanq_kpeer_del(nic, 1000), 0);
	KUNIT_EXPECT_EQ(test, clanq_kpeer_add(nic, &p, &why), 0);
	pt_del_all(test);
}

static struct kunit_case clanq_peer_cases[] = {
	KUNIT_CASE(added_peers_are_listed_in_node_order),
	KUNIT_CASE(bad_peers_are_refused),
	KUNIT_CASE(a_reference_outlives_deletion),
	KUNIT_CASE(a_nic_holds_at_most_peers_max),
	{}
};

static struct kunit_suite clanq_peer_suite = {
	.name = "clanq_peer",
	.init = peer_test_init,
	.test_cases = clanq_peer_cases,
};

kunit_test_suites(&clanq_peer_suite);
