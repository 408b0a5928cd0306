/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the verbs wire puts on the wire (driver/verbs/): the hello a
 * connection request carries, and the messages SENDs carry. Little
 * endian, fixed layout, a version in every one.
 *
 * Everything that arrives is a peer's word only: it is decoded into a
 * kernel struct by the functions here, which check every length against
 * the bytes received and every field against what it may be, before
 * the receive path sees it. They are pure, so KUnit feeds them garbage
 * (tests/kunit/wire_msg_kunit.c).
 */
#ifndef _CLANQ_WIRE_MSG_H
#define _CLANQ_WIRE_MSG_H

#include <linux/err.h>
#include <linux/errno.h>
#include <linux/build_bug.h>
#include <linux/math.h>
#include <linux/bits.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/types.h>
#include <clanq/uapi.h>

#define CLANQ_WMSG_MAGIC	0x57514c43u	/* "CLQW" */
/*
 * 2: GRANT's flags (was padding): atomics, the export's immediate slot;
 * READ, atomics and WRITE_WITH_IMM on the wire (issue 26)
 * 3: an OOB message's seq, which its UNREACHABLE echoes (issue 28)
 */
#define CLANQ_WMSG_VERSION	3

/* Message types */
#define CLANQ_WMSG_OOB		1	/* an OOB message for dst_node:dst_id */
#define CLANQ_WMSG_UNREACHABLE	2	/* the OOB message came back: no such endpoint */
/* regions (struct clanq_wmsg_region) */
#define CLANQ_WMSG_IMPORT	3	/* importer: may I write into region id, key? */
#define CLANQ_WMSG_GRANT	4	/* exporter: yes; one per registration (mr) */
#define CLANQ_WMSG_REFUSE	5	/* exporter: no, err says why */
#define CLANQ_WMSG_WROTE	6	/* importer: [off, off + len) of id was written */
#define CLANQ_WMSG_REVOKED	7	/* exporter: id is gone, its grants with it */

/* What an exporter may register a region with, at most (GRANTs per import). */
#define CLANQ_WMSG_MAX_MRS	32

/* GRANT flags: the registrations take atomics (IB_ACCESS_REMOTE_ATOMIC) */
#define CLANQ_WMSG_GRANT_ATOMIC	0x1u
#define CLANQ_WMSG_GRANT_FLAGS	CLANQ_WMSG_GRANT_ATOMIC

/*
 * Write with immediate: a WRITE that ends a chunk may carry, instead of
 * a WROTE after it, a 32-bit immediate naming the export and the
 * chunk's first byte: the export's slot on the connection (1..1023, 0:
 * none, GRANT's flags bits 16..25) in the top 10 bits, the region
 * offset (below 4 MiB) in the low 22. The length is the WRITE's own
 * (the receive completion's byte_len).
 */
#define CLANQ_WMSG_IMM_OFF_BITS	22
#define CLANQ_WMSG_IMM_OFF_LIMIT	BIT_ULL(CLANQ_WMSG_IMM_OFF_BITS)
#define CLANQ_WMSG_IMM_MAX_SLOT	((1u << (32 - CLANQ_WMSG_IMM_OFF_BITS)) - 1)
#define CLANQ_WMSG_GRANT_SLOT_SHIFT	16
#define CLANQ_WMSG_GRANT_SLOT_MASK	(CLANQ_WMSG_IMM_MAX_SLOT << CLANQ_WMSG_GRANT_SLOT_SHIFT)

static inline u32 clanq_wmsg_imm(u32 slot, u64 off)
{
	return slot << CLANQ_WMSG_IMM_OFF_BITS | (u32)off;
}

static inline void clanq_wmsg_imm_get(u32 imm, u32 *slot, u64 *off)
{
	*slot = imm >> CLANQ_WMSG_IMM_OFF_BITS;
	*off = imm & (CLANQ_WMSG_IMM_OFF_LIMIT - 1);
}

/* The connection request's private data: who asks, and for which node. */
struct clanq_whello {
	__le32 magic;
	u8 version;
	u8 pad[3];
	__le32 src_node;	/* the node whose traffic the connection carries */
	__le32 dst_node;	/* the node asked for */
} __packed;

struct clanq_wmsg_hdr {
	__le32 magic;
	u8 version;
	u8 type;		/* CLANQ_WMSG_* */
	__le16 len;		/* bytes after this header */
	__le32 src_node;
	__le32 dst_node;
} __packed;

/*
 * An OOB message, or one coming back (UNREACHABLE). @seq is the sending
 * connection's count of the OOB messages it carried: the UNREACHABLE
 * echoes it, and the sender takes a notice only for a message of its
 * own it remembers by that seq (verbs_post.c), never on the word of the
 * fields a peer could write.
 */
struct clanq_wmsg_oob {
	__le32 dst_id;
	__le32 src_id;
	__le32 type;
	__le32 len;		/* payload bytes; only those are sent */
	__le32 seq;
	u8 payload[CLANQ_OOB_PAYLOAD];
} __packed;

/*
 * A region message. A region is granted as nr_mrs registrations, each of
 * span bytes of the region's page space (region byte o is page-space
 * byte first + o, and the remote address of it too): registration i
 * covers page-space [i * span, (i + 1) * span) of the region's bytes, so
 * a write to o goes with rkey i = (first + o) / span.
 */
struct clanq_wmsg_region {
	__le32 id;		/* the region, on the exporter's node */
	__le32 req;		/* IMPORT, GRANT, REFUSE: the importer's request */
	__le64 key;		/* IMPORT */
	__le64 off;		/* WROTE */
	__le64 len;		/* WROTE: bytes written; GRANT: the region's length */
	__le64 span;		/* GRANT: page-space bytes per registration */
	__le32 first;		/* GRANT: page-space offset of byte 0 */
	__le32 rights;		/* GRANT */
	__le32 rkey;		/* GRANT: of registration mr */
	__le16 mr;		/* GRANT */
	__le16 nr_mrs;		/* GRANT */
	__le32 err;		/* REFUSE: a positive errno */
	__le32 flags;		/* GRANT: CLANQ_WMSG_GRANT_* */
} __packed;

/* The largest message: what every receive buffer holds. */
#define CLANQ_WMSG_MAX	(sizeof(struct clanq_wmsg_hdr) + sizeof(struct clanq_wmsg_oob))
static_assert(sizeof(struct clanq_wmsg_region) <= sizeof(struct clanq_wmsg_oob));

/* A decoded region message: every field checked for its type. */
struct clanq_wmsg_rgn {
	u32 id, req;
	u64 key;
	u64 off, len, span;
	u32 first, rights, rkey;
	u16 mr, nr_mrs;
	int err;		/* REFUSE: -errno */
	u32 flags;		/* GRANT */
};

/* A decoded message: kernel values, every field checked. */
struct clanq_wmsg {
	u8 type;
	u32 src_node;
	u32 dst_node;
	u32 dst_id;
	u32 seq;			/* OOB, UNREACHABLE */
	struct clanq_oob_msg oob;	/* OOB, UNREACHABLE: src = { src_node, src_id } */
	struct clanq_wmsg_rgn rgn;	/* IMPORT ... REVOKED */
};

static inline void clanq_whello_put(struct clanq_whello *h, u32 src_node,
				    u32 dst_node)
{
	memset(h, 0, sizeof(*h));
	h->magic = cpu_to_le32(CLANQ_WMSG_MAGIC);
	h->version = CLANQ_WMSG_VERSION;
	h->src_node = cpu_to_le32(src_node);
	h->dst_node = cpu_to_le32(dst_node);
}

/* -EPROTO unless @buf, @len bytes, is a hello of our version. */
static inline int clanq_whello_get(const void *buf, size_t len, u32 *src_node,
				   u32 *dst_node)
{
	const struct clanq_whello *h = buf;

	/* RoCE pads private data with zeros: longer is fine, shorter not */
	if (!buf || len < sizeof(*h))
		return -EPROTO;
	if (le32_to_cpu(h->magic) != CLANQ_WMSG_MAGIC ||
	    h->version != CLANQ_WMSG_VERSION)
		return -EPROTO;
	*src_node = le32_to_cpu(h->src_node);
	*dst_node = le32_to_cpu(h->dst_node);
	if (*src_node == CLANQ_NODE_INVALID || *dst_node == CLANQ_NODE_INVALID)
		return -EPROTO;
	return 0;
}

/*
 * clanq_wmsg_put_oob() - encode an OOB message (or, with @type
 * CLANQ_WMSG_UNREACHABLE, one coming back) into @buf, which has
 * CLANQ_WMSG_MAX bytes. @msg->src names the sending endpoint, @dst the
 * one it is for, @seq the message (an UNREACHABLE: the one it answers).
 * Return: the bytes to send.
 */
static inline size_t clanq_wmsg_put_oob(void *buf, u8 type,
					const struct clanq_addr *dst,
					const struct clanq_oob_msg *msg, u32 seq)
{
	struct clanq_wmsg_hdr *h = buf;
	struct clanq_wmsg_oob *o = (struct clanq_wmsg_oob *)(h + 1);
	u32 plen = min_t(u32, msg->len, CLANQ_OOB_PAYLOAD);
	size_t body = offsetof(struct clanq_wmsg_oob, payload) + plen;

	h->magic = cpu_to_le32(CLANQ_WMSG_MAGIC);
	h->version = CLANQ_WMSG_VERSION;
	h->type = type;
	h->len = cpu_to_le16(body);
	h->src_node = cpu_to_le32(msg->src.node);
	h->dst_node = cpu_to_le32(dst->node);
	o->dst_id = cpu_to_le32(dst->id);
	o->src_id = cpu_to_le32(msg->src.id);
	o->type = cpu_to_le32(msg->type);
	o->len = cpu_to_le32(plen);
	o->seq = cpu_to_le32(seq);
	memcpy(o->payload, msg->payload, plen);
	return sizeof(*h) + body;
}

/*
 * clanq_wmsg_put_region() - encode a region message of @type from node
 * @src_node to @dst_node into @buf (CLANQ_WMSG_MAX bytes); the fields of
 * @r that @type does not use are sent as zeros. Return: the bytes to send.
 */
static inline size_t clanq_wmsg_put_region(void *buf, u8 type, u32 src_node,
					   u32 dst_node,
					   const struct clanq_wmsg_rgn *r)
{
	struct clanq_wmsg_hdr *h = buf;
	struct clanq_wmsg_region *g = (struct clanq_wmsg_region *)(h + 1);

	h->magic = cpu_to_le32(CLANQ_WMSG_MAGIC);
	h->version = CLANQ_WMSG_VERSION;
	h->type = type;
	h->len = cpu_to_le16(sizeof(*g));
	h->src_node = cpu_to_le32(src_node);
	h->dst_node = cpu_to_le32(dst_node);
	memset(g, 0, sizeof(*g));
	g->id = cpu_to_le32(r->id);
	switch (type) {
	case CLANQ_WMSG_IMPORT:
		g->req = cpu_to_le32(r->req);
		g->key = cpu_to_le64(r->key);
		break;
	case CLANQ_WMSG_GRANT:
		g->req = cpu_to_le32(r->req);
		g->len = cpu_to_le64(r->len);
		g->span = cpu_to_le64(r->span);
		g->first = cpu_to_le32(r->first);
		g->rights = cpu_to_le32(r->rights);
		g->rkey = cpu_to_le32(r->rkey);
		g->mr = cpu_to_le16(r->mr);
		g->nr_mrs = cpu_to_le16(r->nr_mrs);
		g->flags = cpu_to_le32(r->flags);
		break;
	case CLANQ_WMSG_REFUSE:
		g->req = cpu_to_le32(r->req);
		g->err = cpu_to_le32(-r->err);
		break;
	case CLANQ_WMSG_WROTE:
		g->off = cpu_to_le64(r->off);
		g->len = cpu_to_le64(r->len);
		break;
	}
	return sizeof(*h) + sizeof(*g);
}

/* The body of a region message, checked for its type; -EBADMSG if wrong. */
static inline int clanq_wmsg_get_region(const struct clanq_wmsg_region *g,
					size_t body, u8 type,
					struct clanq_wmsg_rgn *r)
{
	u64 end;

	if (body != sizeof(*g))
		return -EBADMSG;
	r->id = le32_to_cpu(g->id);
	r->req = le32_to_cpu(g->req);
	r->key = le64_to_cpu(g->key);
	r->off = le64_to_cpu(g->off);
	r->len = le64_to_cpu(g->len);
	r->span = le64_to_cpu(g->span);
	r->first = le32_to_cpu(g->first);
	r->rights = le32_to_cpu(g->rights);
	r->rkey = le32_to_cpu(g->rkey);
	r->mr = le16_to_cpu(g->mr);
	r->nr_mrs = le16_to_cpu(g->nr_mrs);
	r->err = -(int)min_t(u32, le32_to_cpu(g->err), MAX_ERRNO + 1);
	r->flags = le32_to_cpu(g->flags);
	switch (type) {
	case CLANQ_WMSG_GRANT:
		/* whole pages per registration, at least the bytes of one */
		if (!r->len || !r->rights || (r->rights & ~CLANQ_RIGHTS_ALL) ||
		    (r->flags & ~(CLANQ_WMSG_GRANT_FLAGS |
				  CLANQ_WMSG_GRANT_SLOT_MASK)) ||
		    r->first >= PAGE_SIZE || !r->span ||
		    !PAGE_ALIGNED(r->span) || !r->nr_mrs ||
		    r->nr_mrs > CLANQ_WMSG_MAX_MRS || r->mr >= r->nr_mrs ||
		    check_add_overflow(r->len, (u64)r->first, &end) ||
		    DIV_ROUND_UP_ULL(end, r->span) != r->nr_mrs)
			return -EBADMSG;
		break;
	case CLANQ_WMSG_REFUSE:
		if (r->err >= 0 || r->err < -MAX_ERRNO)
			return -EBADMSG;
		break;
	case CLANQ_WMSG_WROTE:
		if (!r->len || check_add_overflow(r->off, r->len, &end))
			return -EBADMSG;
		break;
	}
	return 0;
}

/*
 * clanq_wmsg_get() - decode @len bytes received into @m.
 *
 * Return: 0; -EPROTO for a header that is not ours (magic, version,
 * lengths), -EBADMSG for a message of ours that is malformed (unknown
 * type, payload too long, a notice type in an OOB message: notices are
 * the drivers' own).
 */
static inline int clanq_wmsg_get(const void *buf, size_t len, struct clanq_wmsg *m)
{
	const struct clanq_wmsg_hdr *h = buf;
	const struct clanq_wmsg_oob *o = (const struct clanq_wmsg_oob *)(h + 1);
	size_t body;
	u32 plen;

	if (len < sizeof(*h) || len > CLANQ_WMSG_MAX)
		return -EPROTO;
	if (le32_to_cpu(h->magic) != CLANQ_WMSG_MAGIC ||
	    h->version != CLANQ_WMSG_VERSION)
		return -EPROTO;
	body = le16_to_cpu(h->len);
	if (body != len - sizeof(*h))
		return -EPROTO;
	memset(m, 0, sizeof(*m));
	m->type = h->type;
	m->src_node = le32_to_cpu(h->src_node);
	m->dst_node = le32_to_cpu(h->dst_node);
	switch (m->type) {
	case CLANQ_WMSG_OOB:
	case CLANQ_WMSG_UNREACHABLE:
		break;
	case CLANQ_WMSG_IMPORT:
	case CLANQ_WMSG_GRANT:
	case CLANQ_WMSG_REFUSE:
	case CLANQ_WMSG_WROTE:
	case CLANQ_WMSG_REVOKED:
		return clanq_wmsg_get_region((const void *)(h + 1), body,
					     m->type, &m->rgn);
	default:
		return -EBADMSG;
	}
	if (body < offsetof(struct clanq_wmsg_oob, payload))
		return -EBADMSG;
	plen = le32_to_cpu(o->len);
	if (plen > CLANQ_OOB_PAYLOAD ||
	    body != offsetof(struct clanq_wmsg_oob, payload) + plen)
		return -EBADMSG;
	m->dst_id = le32_to_cpu(o->dst_id);
	m->seq = le32_to_cpu(o->seq);
	m->oob.type = le32_to_cpu(o->type);
	if (m->type == CLANQ_WMSG_OOB && (m->oob.type & CLANQ_OOB_NOTICE))
		return -EBADMSG;
	m->oob.len = plen;
	m->oob.src.node = m->src_node;
	m->oob.src.id = le32_to_cpu(o->src_id);
	memcpy(m->oob.payload, o->payload, plen);
	return 0;
}

#endif /* _CLANQ_WIRE_MSG_H */
