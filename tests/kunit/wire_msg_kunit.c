// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for what the verbs wire puts on the wire
 * (driver/verbs/wire_msg.h): every message it encodes decodes to the same
 * thing, and every byte string a peer could send instead is either
 * refused with an error or decodes to something within bounds. The
 * receive path only ever sees the decoded, checked struct.
 */
#include <kunit/test.h>
#include <linux/module.h>
#include <linux/prandom.h>
#include <linux/random.h>

#include "../driver/clanq_drv.h"
#include "../driver/verbs/wire_msg.h"

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
		n = clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m, len * 7);
		/* only the payload's bytes travel */
		KUNIT_EXPECT_EQ(test, n, sizeof(struct clanq_wmsg_hdr) +
				offsetof(struct clanq_wmsg_oob, payload) + len);
		KUNIT_ASSERT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
		KUNIT_EXPECT_EQ(test, d.type, CLANQ_WMSG_OOB);
		KUNIT_EXPECT_EQ(test, d.src_node, 7u);
		KUNIT_EXPECT_EQ(test, d.dst_node, 0x20u);
		KUNIT_EXPECT_EQ(test, d.dst_id, 0x33u);
		KUNIT_EXPECT_EQ(test, d.seq, len * 7);
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
	n = clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m, 1);
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
	n = clanq_wmsg_put_oob(good, CLANQ_WMSG_OOB, &dst, &m, 2);

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

/* What a decoded region message promises the receive path. */
static void region_within_bounds(struct kunit *test, const struct clanq_wmsg *d)
{
	const struct clanq_wmsg_rgn *r = &d->rgn;
	u64 end;

	KUNIT_ASSERT_LE(test, d->type, CLANQ_WMSG_REVOKED);
	switch (d->type) {
	case CLANQ_WMSG_GRANT:
		KUNIT_ASSERT_GT(test, r->len, 0ull);
		KUNIT_ASSERT_TRUE(test, r->rights && !(r->rights & ~CLANQ_RIGHTS_ALL));
		KUNIT_ASSERT_LT(test, r->first, (u32)PAGE_SIZE);
		KUNIT_ASSERT_TRUE(test, r->span && PAGE_ALIGNED(r->span));
		KUNIT_ASSERT_LT(test, r->mr, r->nr_mrs);
		KUNIT_ASSERT_LE(test, r->nr_mrs, CLANQ_WMSG_MAX_MRS);
		/* every byte of the region has its registration */
		KUNIT_ASSERT_LE(test, r->len + r->first, (u64)r->nr_mrs * r->span);
		break;
	case CLANQ_WMSG_REFUSE:
		KUNIT_ASSERT_TRUE(test, r->err < 0 && r->err >= -MAX_ERRNO);
		break;
	case CLANQ_WMSG_WROTE:
		KUNIT_ASSERT_GT(test, r->len, 0ull);
		KUNIT_ASSERT_FALSE(test, check_add_overflow(r->off, r->len, &end));
		break;
	}
}

static size_t region_put(u8 *buf, u8 type, const struct clanq_wmsg_rgn *r)
{
	return clanq_wmsg_put_region(buf, type, 10, 20, r);
}

/* A grant of a region of 3 pages and a bit, at offset 100 of its page. */
static const struct clanq_wmsg_rgn grant = {
	.id = 5, .req = 77, .len = 3 * 4096 + 1, .span = 2 * 4096, .first = 100,
	.rights = CLANQ_RIGHT_WRITE, .rkey = 0xabcdef, .mr = 1, .nr_mrs = 2,
	.flags = CLANQ_WMSG_GRANT_ATOMIC | 1023u << CLANQ_WMSG_GRANT_SLOT_SHIFT,
};

/* Each region message decodes to the fields its type carries, the rest 0. */
static void region_messages_round_trip(struct kunit *test)
{
	struct clanq_wmsg_rgn q = { .id = 5, .req = 77, .key = 0x1122334455667788ull,
				    .off = 4095, .len = 9, .err = -EACCES };
	u8 buf[CLANQ_WMSG_MAX];
	struct clanq_wmsg d;
	size_t n;

	n = region_put(buf, CLANQ_WMSG_IMPORT, &q);
	KUNIT_ASSERT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
	KUNIT_EXPECT_EQ(test, d.type, CLANQ_WMSG_IMPORT);
	KUNIT_EXPECT_EQ(test, d.src_node, 10u);
	KUNIT_EXPECT_EQ(test, d.dst_node, 20u);
	KUNIT_EXPECT_EQ(test, d.rgn.id, 5u);
	KUNIT_EXPECT_EQ(test, d.rgn.req, 77u);
	KUNIT_EXPECT_EQ(test, d.rgn.key, q.key);
	KUNIT_EXPECT_EQ(test, d.rgn.len, 0ull);

	n = region_put(buf, CLANQ_WMSG_GRANT, &grant);
	KUNIT_ASSERT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
	KUNIT_EXPECT_EQ(test, d.rgn.len, grant.len);
	KUNIT_EXPECT_EQ(test, d.rgn.span, grant.span);
	KUNIT_EXPECT_EQ(test, d.rgn.first, grant.first);
	KUNIT_EXPECT_EQ(test, d.rgn.rights, grant.rights);
	KUNIT_EXPECT_EQ(test, d.rgn.rkey, grant.rkey);
	KUNIT_EXPECT_EQ(test, d.rgn.mr, grant.mr);
	KUNIT_EXPECT_EQ(test, d.rgn.nr_mrs, grant.nr_mrs);
	KUNIT_EXPECT_EQ(test, d.rgn.flags, grant.flags);
	KUNIT_EXPECT_EQ(test, d.rgn.key, 0ull);

	n = region_put(buf, CLANQ_WMSG_REFUSE, &q);
	KUNIT_ASSERT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
	KUNIT_EXPECT_EQ(test, d.rgn.err, -EACCES);
	KUNIT_EXPECT_EQ(test, d.rgn.req, 77u);

	n = region_put(buf, CLANQ_WMSG_WROTE, &q);
	KUNIT_ASSERT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
	KUNIT_EXPECT_EQ(test, d.rgn.off, 4095ull);
	KUNIT_EXPECT_EQ(test, d.rgn.len, 9ull);
	KUNIT_EXPECT_EQ(test, d.rgn.req, 0u);

	n = region_put(buf, CLANQ_WMSG_REVOKED, &q);
	KUNIT_ASSERT_EQ(test, clanq_wmsg_get(buf, n, &d), 0);
	KUNIT_EXPECT_EQ(test, d.rgn.id, 5u);
	KUNIT_EXPECT_EQ(test, d.rgn.key, 0ull);
	/* one byte short or long is not ours */
	KUNIT_EXPECT_LT(test, clanq_wmsg_get(buf, n - 1, &d), 0);
	KUNIT_EXPECT_LT(test, clanq_wmsg_get(buf, n + 1, &d), 0);
}

/* Grants, refusals and writes a peer could lie with are refused. */
static void bad_region_fields_are_refused(struct kunit *test)
{
	u8 buf[CLANQ_WMSG_MAX];
	struct clanq_wmsg_rgn g;
	struct clanq_wmsg d;
	size_t n;

#define REFUSED(type, change) do {						\
		g = grant;							\
		change;								\
		n = region_put(buf, type, &g);					\
		KUNIT_EXPECT_EQ_MSG(test, clanq_wmsg_get(buf, n, &d), -EBADMSG, #change); \
	} while (0)
	REFUSED(CLANQ_WMSG_GRANT, g.len = 0);
	REFUSED(CLANQ_WMSG_GRANT, g.rights = 0);
	REFUSED(CLANQ_WMSG_GRANT, g.rights = 4);
	REFUSED(CLANQ_WMSG_GRANT, g.flags = CLANQ_WMSG_GRANT_FLAGS + 1);
	REFUSED(CLANQ_WMSG_GRANT, g.flags = 1u << 31);
	REFUSED(CLANQ_WMSG_GRANT, g.flags = 1024u << CLANQ_WMSG_GRANT_SLOT_SHIFT);
	REFUSED(CLANQ_WMSG_GRANT, g.first = PAGE_SIZE);
	REFUSED(CLANQ_WMSG_GRANT, g.span = 0);
	REFUSED(CLANQ_WMSG_GRANT, g.span = PAGE_SIZE + 1);
	REFUSED(CLANQ_WMSG_GRANT, g.nr_mrs = 0);
	REFUSED(CLANQ_WMSG_GRANT, g.mr = 2);
	REFUSED(CLANQ_WMSG_GRANT, g.nr_mrs = 3);	/* the region needs 2 */
	REFUSED(CLANQ_WMSG_GRANT, g.len = 4 * 4096);	/* ... needs 3 */
	REFUSED(CLANQ_WMSG_GRANT, g.len = U64_MAX);
	REFUSED(CLANQ_WMSG_GRANT, g.nr_mrs = CLANQ_WMSG_MAX_MRS + 1;
		g.span = PAGE_SIZE; g.len = CLANQ_WMSG_MAX_MRS * PAGE_SIZE + 1);
	REFUSED(CLANQ_WMSG_REFUSE, g.err = 0);
	REFUSED(CLANQ_WMSG_REFUSE, g.err = -MAX_ERRNO - 1);
	REFUSED(CLANQ_WMSG_REFUSE, g.err = 5);
	REFUSED(CLANQ_WMSG_WROTE, g.off = 0; g.len = 0);
	REFUSED(CLANQ_WMSG_WROTE, g.off = U64_MAX; g.len = 1);
#undef REFUSED
	/* and the grant itself, unchanged, is fine */
	n = region_put(buf, CLANQ_WMSG_GRANT, &grant);
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
			h->type = 1 + (i >> 1) % 7;
			if (len >= sizeof(*h))
				h->len = cpu_to_le16(len - sizeof(*h));
		}
		if (clanq_wmsg_get(buf, len, &d))
			continue;
		ok++;
		if (d.type >= CLANQ_WMSG_IMPORT) {
			region_within_bounds(test, &d);
			continue;
		}
		KUNIT_ASSERT_LE(test, d.oob.len, CLANQ_OOB_PAYLOAD);
		KUNIT_ASSERT_TRUE(test, d.type == CLANQ_WMSG_OOB ||
				  d.type == CLANQ_WMSG_UNREACHABLE);
		KUNIT_ASSERT_EQ(test, d.oob.src.node, d.src_node);
		KUNIT_ASSERT_TRUE(test, !memchr_inv(d.oob.payload + d.oob.len, 0,
						    CLANQ_OOB_PAYLOAD - d.oob.len));
	}
	kunit_info(test, "%u of 20000 random messages decoded", ok);
}

/*
 * Every valid encoding of every type, mutated as a peer could: bits
 * flipped, bytes or whole fields replaced (0, all ones, a random value,
 * at any offset), cut short, extended, its header's length made to fit
 * the new size or not; 3,000 of each, from a fixed seed so that a
 * failure comes back. Whatever comes out is refused with the errno the
 * decoder documents for what was wrong (-EPROTO: not our header;
 * -EBADMSG: ours, malformed), or decodes within bounds, and an OOB
 * message or UNREACHABLE that decodes says exactly the bytes it came
 * in: it encodes back to them.
 */
#define MUTATIONS	3000

static bool header_ours(const u8 *buf, size_t len)
{
	const struct clanq_wmsg_hdr *h = (const struct clanq_wmsg_hdr *)buf;

	return len >= sizeof(*h) && len <= CLANQ_WMSG_MAX &&
	       le32_to_cpu(h->magic) == CLANQ_WMSG_MAGIC &&
	       h->version == CLANQ_WMSG_VERSION &&
	       le16_to_cpu(h->len) == len - sizeof(*h);
}

static size_t mutate(struct rnd_state *rs, u8 *buf, size_t n)
{
	struct clanq_wmsg_hdr *h = (struct clanq_wmsg_hdr *)buf;
	u32 i, k, at, v;

	switch (prandom_u32_state(rs) % 7) {
	case 0:		/* a bit */
		at = prandom_u32_state(rs) % n;
		buf[at] ^= 1 << (prandom_u32_state(rs) % 8);
		break;
	case 1:		/* up to 4 bytes */
		k = 1 + prandom_u32_state(rs) % 4;
		for (i = 0; i < k; i++)
			buf[prandom_u32_state(rs) % n] = prandom_u32_state(rs);
		break;
	case 2:		/* a field's worth: 0, all ones, random, at any offset */
		k = 1 << (prandom_u32_state(rs) % 4);	/* 1, 2, 4 or 8 bytes */
		at = prandom_u32_state(rs) % n;
		v = prandom_u32_state(rs) % 3;
		for (i = 0; i < k && at + i < n; i++)
			buf[at + i] = v == 0 ? 0 : v == 1 ? 0xff : prandom_u32_state(rs);
		break;
	case 3:		/* cut short, the header's length as it was */
		n = prandom_u32_state(rs) % n;
		break;
	case 4:		/* cut short or extended, the header's length made to fit */
	case 5:
		k = n;
		n = prandom_u32_state(rs) % (CLANQ_WMSG_MAX + 9);
		for (i = k; i < n; i++)
			buf[i] = prandom_u32_state(rs);
		if (n >= sizeof(*h))
			h->len = cpu_to_le16(n - sizeof(*h));
		break;
	default:	/* a payload length, and the length to fit it */
		if (n < sizeof(*h) + offsetof(struct clanq_wmsg_oob, payload))
			break;
		v = prandom_u32_state(rs) % (CLANQ_OOB_PAYLOAD + 3);
		((struct clanq_wmsg_oob *)(h + 1))->len = cpu_to_le32(v);
		n = sizeof(*h) + offsetof(struct clanq_wmsg_oob, payload) +
		    min_t(u32, v, CLANQ_OOB_PAYLOAD);
		h->len = cpu_to_le16(n - sizeof(*h));
		break;
	}
	return n;
}

static void mutated_valid_messages_decode_within_bounds(struct kunit *test)
{
	static const u32 oob_lens[] = { 0, 1, 20, CLANQ_OOB_PAYLOAD };
	static const u8 rgn_types[] = {
		CLANQ_WMSG_IMPORT, CLANQ_WMSG_GRANT, CLANQ_WMSG_REFUSE,
		CLANQ_WMSG_WROTE, CLANQ_WMSG_REVOKED,
	};
	struct clanq_wmsg_rgn q = { .id = 5, .req = 77, .key = 0x1122334455667788ull,
				    .off = 4095, .len = 9, .err = -EACCES };
	struct clanq_addr dst = { .node = 0x20, .id = 0x33 };
	u8 *good = kunit_kzalloc(test, CLANQ_WMSG_MAX, GFP_KERNEL);
	u8 *buf = kunit_kzalloc(test, CLANQ_WMSG_MAX + 8, GFP_KERNEL);
	u8 *again = kunit_kzalloc(test, CLANQ_WMSG_MAX, GFP_KERNEL);
	unsigned int v, valid, ok = 0, proto = 0, badmsg = 0;
	struct clanq_oob_msg m;
	struct rnd_state rs;
	struct clanq_wmsg d;
	size_t n, len;
	int err;

	KUNIT_ASSERT_TRUE(test, good && buf && again);
	prandom_seed_state(&rs, 0x28072026ull);
	/* OOB and UNREACHABLE of 4 payload lengths, then each region type */
	for (valid = 0; valid < 8 + ARRAY_SIZE(rgn_types); valid++) {
		if (valid < 8) {
			oob_msg_fill(&m, oob_lens[valid % 4]);
			n = clanq_wmsg_put_oob(good, valid < 4 ? CLANQ_WMSG_OOB :
					       CLANQ_WMSG_UNREACHABLE, &dst, &m, 0x5e91);
		} else {
			u8 t = rgn_types[valid - 8];

			n = region_put(good, t, t == CLANQ_WMSG_GRANT ? &grant : &q);
		}
		KUNIT_ASSERT_EQ(test, clanq_wmsg_get(good, n, &d), 0);
		for (v = 0; v < MUTATIONS; v++) {
			memcpy(buf, good, n);
			len = mutate(&rs, buf, n);
			err = clanq_wmsg_get(buf, len, &d);
			if (!header_ours(buf, len)) {
				KUNIT_ASSERT_EQ_MSG(test, err, -EPROTO,
						    "message %u, mutation %u: %zu bytes",
						    valid, v, len);
				proto++;
				continue;
			}
			if (err) {
				KUNIT_ASSERT_EQ_MSG(test, err, -EBADMSG,
						    "message %u, mutation %u", valid, v);
				badmsg++;
				continue;
			}
			ok++;
			KUNIT_ASSERT_EQ(test, d.src_node,
					le32_to_cpu(((struct clanq_wmsg_hdr *)buf)->src_node));
			if (d.type >= CLANQ_WMSG_IMPORT) {
				region_within_bounds(test, &d);
				continue;
			}
			KUNIT_ASSERT_TRUE(test, d.type == CLANQ_WMSG_OOB ||
					  d.type == CLANQ_WMSG_UNREACHABLE);
			KUNIT_ASSERT_LE(test, d.oob.len, CLANQ_OOB_PAYLOAD);
			KUNIT_ASSERT_EQ(test, d.oob.src.node, d.src_node);
			KUNIT_ASSERT_FALSE(test, d.type == CLANQ_WMSG_OOB &&
					   (d.oob.type & CLANQ_OOB_NOTICE));
			KUNIT_ASSERT_TRUE(test, !memchr_inv(d.oob.payload + d.oob.len, 0,
							    CLANQ_OOB_PAYLOAD - d.oob.len));
			/* nothing it said was lost or made up */
			dst.node = d.dst_node;
			dst.id = d.dst_id;
			KUNIT_ASSERT_EQ_MSG(test, clanq_wmsg_put_oob(again, d.type, &dst,
								     &d.oob, d.seq), len,
					    "message %u, mutation %u", valid, v);
			KUNIT_ASSERT_MEMEQ_MSG(test, again, buf, len,
					       "message %u, mutation %u", valid, v);
		}
	}
	kunit_info(test, "%u mutations: %u decoded, %u refused -EPROTO, %u -EBADMSG",
		   valid * MUTATIONS, ok, proto, badmsg);
	/* each outcome was reached: the checks above ran */
	KUNIT_EXPECT_GT(test, ok, 1000u);
	KUNIT_EXPECT_GT(test, proto, 1000u);
	KUNIT_EXPECT_GT(test, badmsg, 1000u);
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

/*
 * A write's immediate: the slot in the top 10 bits, the offset in the
 * low 22, each at its limits, and neither spills into the other.
 */
static void write_immediates_round_trip(struct kunit *test)
{
	static const struct { u32 slot; u64 off; } c[] = {
		{ 1, 0 }, { 1023, CLANQ_WMSG_IMM_OFF_LIMIT - 1 }, { 512, 4095 },
		{ 1, CLANQ_WMSG_IMM_OFF_LIMIT - 1 }, { 1023, 0 },
	};
	unsigned int i;
	u32 slot;
	u64 off;

	KUNIT_EXPECT_EQ(test, CLANQ_WMSG_IMM_MAX_SLOT, 1023u);
	KUNIT_EXPECT_EQ(test, CLANQ_WMSG_IMM_OFF_LIMIT, 4ull << 20);
	for (i = 0; i < ARRAY_SIZE(c); i++) {
		clanq_wmsg_imm_get(clanq_wmsg_imm(c[i].slot, c[i].off), &slot, &off);
		KUNIT_EXPECT_EQ(test, slot, c[i].slot);
		KUNIT_EXPECT_EQ(test, off, c[i].off);
	}
}

static struct kunit_case clanq_wire_msg_cases[] = {
	KUNIT_CASE(oob_round_trips),
	KUNIT_CASE(truncated_and_padded_messages_are_refused),
	KUNIT_CASE(bad_fields_are_refused),
	KUNIT_CASE(region_messages_round_trip),
	KUNIT_CASE(bad_region_fields_are_refused),
	KUNIT_CASE(random_bytes_decode_within_bounds),
	KUNIT_CASE(mutated_valid_messages_decode_within_bounds),
	KUNIT_CASE(hello_round_trips_and_garbage_is_refused),
	KUNIT_CASE(write_immediates_round_trip),
	{}
};

static struct kunit_suite clanq_wire_msg_suite = {
	.name = "clanq_wire_msg",
	.test_cases = clanq_wire_msg_cases,
};

kunit_test_suites(&clanq_wire_msg_suite);
