// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for what the verbs wire puts on the wire
 * (driver/wire_msg.h): every message it encodes decodes to the same
 * thing, and every byte string a peer could send instead is either
 * refused with an error or decodes to something within bounds. The
 * receive path only ever sees the decoded, checked struct.
 */
#include <kunit/test.h>
#include <linux/module.h>
#include <linux/random.h>

#include "../driver/clanq_drv.h"
#include "../driver/wire_msg.h"

static void oob_msg_fill(struct clanq_oob_msg *m, u32 len)
{
	u32 i;

	memset(m, 0, sizeof(*m));
	m->type = 0x1234;
	m->len = len;
	m->src.node = 7;
	m->src.id = 9;
	for (i = 0; i < len; i++)
		m->payload[i] = 0x40 + i;
}

/* Each payload length encodes and decodes to the same message. */
static void oob_round_trips(struct kunit *test)
{
	struct clanq_addr dst = { .node = 0x20, .id = 0x33 };
	u8 buf[CLANQ_WMSG_MAX];
	struct clanq_oob_msg m;
	struct clanq_wmsg d;
	size_t n;
	u32 len;

	for (len = 0; len <= CLANQ_OOB_PAYLOAD; len++) {
		oob_msg_fill(&m, len);
		memset(buf, 0xee, sizeof(buf));
		n = clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m);
		/* only the payload's bytes travel */
		KUNIT_EXPECT_EQ(test, n, sizeof(struct clanq_wmsg_hdr) +
				offsetof(struct clanq_wmsg_oob, payload) + len);
		KUNIT_ASSERT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
		KUNIT_EXPECT_EQ(test, d.type, CLANQ_WMSG_OOB);
		KUNIT_EXPECT_EQ(test, d.src_node, 7u);
		KUNIT_EXPECT_EQ(test, d.dst_node, 0x20u);
		KUNIT_EXPECT_EQ(test, d.dst_id, 0x33u);
		/* the whole decoded message, zero beyond len, equals the sent one */
		KUNIT_EXPECT_MEMEQ(test, &d.oob, &m, sizeof(m));
	}
}

/* A message with its own length cut short, or one byte too long, is refused. */
static void truncated_and_padded_messages_are_refused(struct kunit *test)
{
	struct clanq_addr dst = { .node = 1, .id = 2 };
	u8 buf[CLANQ_WMSG_MAX + 8] = {};
	struct clanq_oob_msg m;
	struct clanq_wmsg d;
	size_t n, cut;

	oob_msg_fill(&m, 20);
	n = clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m);
	for (cut = 0; cut < n; cut++)
		KUNIT_EXPECT_LT_MSG(test, clanq_wmsg_get(buf, cut, &d), 0,
				    "%zu of %zu bytes decoded", cut, n);
	KUNIT_EXPECT_EQ(test, clanq_wmsg_get(buf, n + 1, &d), -EPROTO);
	KUNIT_EXPECT_EQ(test, clanq_wmsg_get(buf, sizeof(buf), &d), -EPROTO);
}

/* Each header field that is not ours, and each malformed body, is refused. */
static void bad_fields_are_refused(struct kunit *test)
{
	struct clanq_addr dst = { .node = 1, .id = 2 };
	u8 good[CLANQ_WMSG_MAX], buf[CLANQ_WMSG_MAX];
	struct clanq_wmsg_hdr *h = (struct clanq_wmsg_hdr *)buf;
	struct clanq_wmsg_oob *o = (struct clanq_wmsg_oob *)(h + 1);
	struct clanq_oob_msg m;
	struct clanq_wmsg d;
	size_t n;

	oob_msg_fill(&m, 8);
	n = clanq_wmsg_put_oob(good, CLANQ_WMSG_OOB, &dst, &m);

#define REFUSED(err, change) do {					\
		memcpy(buf, good, n);					\
		change;							\
		KUNIT_EXPECT_EQ_MSG(test, clanq_wmsg_get(buf, n, &d), err, #change); \
	} while (0)
	REFUSED(-EPROTO, h->magic ^= cpu_to_le32(1));
	REFUSED(-EPROTO, h->version = CLANQ_WMSG_VERSION + 1);
	REFUSED(-EPROTO, h->len = cpu_to_le16(le16_to_cpu(h->len) + 1));
	REFUSED(-EPROTO, h->len = cpu_to_le16(0xffff));
	REFUSED(-EBADMSG, h->type = 0);
	REFUSED(-EBADMSG, h->type = 0xff);
	/* payload longer than an OOB message holds, or than what was sent */
	REFUSED(-EBADMSG, o->len = cpu_to_le32(CLANQ_OOB_PAYLOAD + 1));
	REFUSED(-EBADMSG, o->len = cpu_to_le32(9));
	REFUSED(-EBADMSG, o->len = cpu_to_le32(0xffffffff));
	/* notices are the drivers' own: a peer cannot send one */
	REFUSED(-EBADMSG, o->type = cpu_to_le32(CLANQ_OOB_UNREACHABLE));
#undef REFUSED
	memcpy(buf, good, n);
	KUNIT_EXPECT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
}

/*
 * Random bytes, with a valid header now and then so the body's checks
 * are reached: whatever decodes is within bounds.
 */
static void random_bytes_decode_within_bounds(struct kunit *test)
{
	u8 buf[CLANQ_WMSG_MAX];
	struct clanq_wmsg_hdr *h = (struct clanq_wmsg_hdr *)buf;
	struct clanq_wmsg d;
	unsigned int i, ok = 0;
	size_t len;

	for (i = 0; i < 20000; i++) {
		get_random_bytes(buf, sizeof(buf));
		len = get_random_u32_below(sizeof(buf) + 1);
		if (i & 1) {
			h->magic = cpu_to_le32(CLANQ_WMSG_MAGIC);
			h->version = CLANQ_WMSG_VERSION;
			h->type = 1 + (i & 2) / 2;
			if (len >= sizeof(*h))
				h->len = cpu_to_le16(len - sizeof(*h));
		}
		if (clanq_wmsg_get(buf, len, &d))
			continue;
		ok++;
		KUNIT_ASSERT_LE(test, d.oob.len, CLANQ_OOB_PAYLOAD);
		KUNIT_ASSERT_TRUE(test, d.type == CLANQ_WMSG_OOB ||
				  d.type == CLANQ_WMSG_UNREACHABLE);
		KUNIT_ASSERT_EQ(test, d.oob.src.node, d.src_node);
		KUNIT_ASSERT_TRUE(test, !memchr_inv(d.oob.payload + d.oob.len, 0,
						    CLANQ_OOB_PAYLOAD - d.oob.len));
	}
	kunit_info(test, "%u of 20000 random messages decoded", ok);
}

/* The connection request's hello: ours, padded (RoCE pads), or refused. */
static void hello_round_trips_and_garbage_is_refused(struct kunit *test)
{
	u8 buf[56] = {};	/* IB CM private data of a REQ: 92 bytes, RoCE pads */
	struct clanq_whello *h = (struct clanq_whello *)buf;
	u32 src, dst;

	clanq_whello_put(h, 10, 20);
	KUNIT_ASSERT_EQ(test, clanq_whello_get(buf, sizeof(*h), &src, &dst), 0);
	KUNIT_EXPECT_EQ(test, src, 10u);
	KUNIT_EXPECT_EQ(test, dst, 20u);
	KUNIT_EXPECT_EQ(test, clanq_whello_get(buf, sizeof(buf), &src, &dst), 0);
	KUNIT_EXPECT_EQ(test, clanq_whello_get(buf, sizeof(*h) - 1, &src, &dst), -EPROTO);
	KUNIT_EXPECT_EQ(test, clanq_whello_get(NULL, 0, &src, &dst), -EPROTO);
	h->version++;
	KUNIT_EXPECT_EQ(test, clanq_whello_get(buf, sizeof(buf), &src, &dst), -EPROTO);
	clanq_whello_put(h, 10, 20);
	h->magic = 0;
	KUNIT_EXPECT_EQ(test, clanq_whello_get(buf, sizeof(buf), &src, &dst), -EPROTO);
	clanq_whello_put(h, CLANQ_NODE_INVALID, 20);
	KUNIT_EXPECT_EQ(test, clanq_whello_get(buf, sizeof(buf), &src, &dst), -EPROTO);
	clanq_whello_put(h, 10, CLANQ_NODE_INVALID);
	KUNIT_EXPECT_EQ(test, clanq_whello_get(buf, sizeof(buf), &src, &dst), -EPROTO);
}

static struct kunit_case clanq_wire_msg_cases[] = {
	KUNIT_CASE(oob_round_trips),
	KUNIT_CASE(truncated_and_padded_messages_are_refused),
	KUNIT_CASE(bad_fields_are_refused),
	KUNIT_CASE(random_bytes_decode_within_bounds),
	KUNIT_CASE(hello_round_trips_and_garbage_is_refused),
	{}
};

static struct kunit_suite clanq_wire_msg_suite = {
	.name = "clanq_wire_msg",
	.test_cases = clanq_wire_msg_cases,
};

kunit_test_suites(&clanq_wire_msg_suite);
