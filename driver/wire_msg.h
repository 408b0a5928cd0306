/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the verbs wire puts on the wire (wire_verbs.c): the hello a
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

#include <linux/errno.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/types.h>
#include <uapi/clanq.h>

#define CLANQ_WMSG_MAGIC	0x57514c43u	/* "CLQW" */
#define CLANQ_WMSG_VERSION	1

/* Message types */
#define CLANQ_WMSG_OOB		1	/* an OOB message for dst_node:dst_id */
#define CLANQ_WMSG_UNREACHABLE	2	/* the OOB message came back: no such endpoint */

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

struct clanq_wmsg_oob {
	__le32 dst_id;
	__le32 src_id;
	__le32 type;
	__le32 len;		/* payload bytes; only those are sent */
	u8 payload[CLANQ_OOB_PAYLOAD];
} __packed;

/* The largest message: what every receive buffer holds. */
#define CLANQ_WMSG_MAX	(sizeof(struct clanq_wmsg_hdr) + sizeof(struct clanq_wmsg_oob))

/* A decoded message: kernel values, every field checked. */
struct clanq_wmsg {
	u8 type;
	u32 src_node;
	u32 dst_node;
	u32 dst_id;
	struct clanq_oob_msg oob;	/* src = { src_node, src_id } */
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
 * one it is for. Return: the bytes to send.
 */
static inline size_t clanq_wmsg_put_oob(void *buf, u8 type,
					const struct clanq_addr *dst,
					const struct clanq_oob_msg *msg)
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
	memcpy(o->payload, msg->payload, plen);
	return sizeof(*h) + body;
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
