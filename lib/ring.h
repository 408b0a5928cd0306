/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The message ring of a clanq connection: its layout and its arithmetic,
 * shared by the library (lib/msg.c) and its host tests. No system calls,
 * no driver: everything here is plain integer logic on values that came
 * from an untrusted peer, and says "no" rather than overflow.
 *
 * Each side of a connection owns one region, its receive ring, which the
 * peer writes through an aperture (PIO, or the RDMA engine):
 *
 *	[0, 64)		struct clanq_ring_hdr: written by the peer only
 *	[64, 64 + cap)	records, written by the peer only
 *
 * and reads the peer's ring's header words that concern it (credit)
 * from its own header. All counters are u64 totals that never wrap in
 * practice; a position is total % cap.
 *
 * A record is an 8-byte header (len, type), the payload padded to 8, and
 * an 8-byte trailer holding the ring's tail after the record. The
 * trailer is what an RDMA sender writes into the peer's tail word, in a
 * second request after the record's (the engine keeps one queue's
 * requests in order; include/clanq/uapi.h): the staged copy stays put
 * until the receiver has consumed the record, which it can do only
 * after it saw that tail. A record never wraps: if it does not fit
 * before the end, a PAD record fills the rest, and a record is at most
 * half the ring, so a PAD and the record always fit in an empty ring.
 *
 * Ordering ([G], the ring's one pairing). The sender stores the
 * record, then release-stores hdr.tail (PIO), or posts the record's
 * request before the tail's (RDMA: the engine writes a request's final
 * word last, with release semantics). The receiver acquire-loads
 * hdr.tail, then reads records below it. Credit flows back the same
 * way: the receiver reads a record, then release-stores its consumed
 * total into the sender's hdr.credit; the sender acquire-loads it before
 * it writes over that space.
 */
#ifndef _CLANQ_RING_H
#define _CLANQ_RING_H

#include <stdint.h>

#include <linux/types.h>

#define CLANQ_RING_HDR		64u	/* header block; records follow */
#define CLANQ_REC_HDR		8u
#define CLANQ_REC_TRAILER	8u
#define CLANQ_REC_DATA		1u
#define CLANQ_REC_PAD		2u
#define CLANQ_REC_FIN		3u	/* orderly close: no more records */
/*
 * A message longer than a record can be (clanq_ring_max_msg()) goes as
 * a LARGE record, whose payload is its length (a u64), and the FRAG
 * records that carry its bytes, in order, nothing between them; the
 * receiver copies each into the application's buffer and hands its
 * space back, so no side ever holds more than a ring of it.
 */
#define CLANQ_REC_LARGE		4u
#define CLANQ_REC_FRAG		5u
/*
 * A region descriptor (lib/onesided.c): not a message; its payload is
 * exactly a struct clanq_region_wire.
 */
#define CLANQ_REC_REGION	6u
/*
 * The bulk window: a region of the receiver's, offered through the
 * sender's ring header (bulk_key, bulk_desc below) when its first large
 * message comes. A large message's bytes may then go into it instead
 * of the ring; each piece is named by a BULK record in the ring, in the
 * place of a FRAG, whose payload is exactly a struct clanq_bulk_ref. The
 * window is a byte ring of its own: pieces back to back, never across
 * its end, its space handed back through the sender's hdr.bulk_credit.
 */
#define CLANQ_REC_BULK		7u

/* A BULK record's payload; every field is the (untrusted) sender's. */
struct clanq_bulk_ref {
	uint64_t at;		/* the window's total where the piece starts */
	uint32_t len;		/* its bytes */
	uint32_t reserved;	/* zero */
};

/* The descriptor's payload; every field is the (untrusted) peer's. */
struct clanq_region_wire {
	uint32_t magic;		/* CLANQ_REGION_MAGIC */
	uint16_t version;	/* CLANQ_REGION_VERSION */
	uint16_t rights;	/* CLANQ_RIGHT_* */
	uint32_t node, region;
	uint64_t key, off, len;
	uint32_t reserved[2];	/* zero */
};

#define CLANQ_REGION_MAGIC	0x43524731u	/* "CRG1" */
#define CLANQ_REGION_VERSION	1u

#define CLANQ_MSG_LARGE_MAX	0x40000000ull	/* 1 GiB: net.h CLANQ_CONN_MSG_MAX */

/* The header of a receive ring; every word is written by the peer. */
struct clanq_ring_hdr {
	uint64_t tail;	/* bytes the peer wrote into this ring, records and pads */
	uint64_t credit;	/* bytes of the peer's ring it consumed (our send credit) */
	uint64_t want;	/* bumped by the peer each time it waits for our credit */
	/* the bulk window (CLANQ_REC_BULK): written by its owner, our peer */
	uint64_t bulk_credit;	/* bytes of the peer's window it consumed */
	uint64_t bulk_key;	/* its key; set before bulk_desc */
	uint64_t bulk_desc;	/* 0, or clanq_bulk_desc(): the window is offered */
	/*
	 * 0, or 1 + the tail at which the peer closed when its FIN record
	 * found no room (lib/msg.c, clanq_conn_put_fin()): the stream ends
	 * there, once the peer is gone and we have read up to it
	 */
	uint64_t fin;
	uint64_t unused;
};

/*
 * The bulk window's size limits, and the descriptor word that offers
 * it: the region's id in the low half, its bytes in the high half.
 */
#define CLANQ_BULK_MIN		(64u << 10)	/* net.h CLANQ_CONN_BULK_MIN */
#define CLANQ_BULK_MAX		(64u << 20)	/* net.h CLANQ_CONN_BULK_MAX */

static inline uint64_t clanq_bulk_desc(uint32_t region, uint32_t cap)
{
	return (uint64_t)cap << 32 | region;
}

/*
 * A window offered (untrusted): 1 and its region and bytes, or 0 if it
 * is no window a peer of ours may offer: a whole number of pages within
 * the limits, a region id that is not 0.
 */
static inline int clanq_bulk_desc_ok(uint64_t desc, uint32_t *region, uint64_t *cap)
{
	uint64_t n = desc >> 32;

	if (!(uint32_t)desc || n < CLANQ_BULK_MIN || n > CLANQ_BULK_MAX || n % 4096)
		return 0;
	*region = (uint32_t)desc;
	*cap = n;
	return 1;
}

/*
 * A BULK reference (untrusted) checked against the receiver's window:
 * its next piece starts where the last one ended (head), is not empty,
 * no longer than the message has left, does not cross the window's
 * end, and lies within the credit the receiver gave (returned + cap).
 */
static inline int clanq_bulk_ref_ok(const struct clanq_bulk_ref *r, uint64_t cap,
				    uint64_t head, uint64_t returned, uint64_t left)
{
	uint64_t pos;

	if (r->reserved || r->at != head || !r->len || r->len > left || !cap)
		return 0;
	pos = head % cap;
	if (r->len > cap - pos || head - returned > cap ||
	    r->len > cap - (head - returned))
		return 0;
	return 1;
}

struct clanq_rec {
	uint32_t len;	/* payload bytes (PAD: bytes after this header) */
	uint16_t type;	/* CLANQ_REC_* */
	uint16_t reserved;
};

/* Bytes a record with len payload bytes takes in the ring. */
static inline uint64_t clanq_rec_size(uint64_t len)
{
	return CLANQ_REC_HDR + ((len + 7) & ~7ull) + CLANQ_REC_TRAILER;
}

/* The longest payload a ring of cap bytes takes: a record is <= cap / 2. */
static inline uint64_t clanq_ring_max_msg(uint64_t cap)
{
	uint64_t half = (cap / 2) & ~7ull;

	if (half < CLANQ_REC_HDR + CLANQ_REC_TRAILER)
		return 0;
	return half - CLANQ_REC_HDR - CLANQ_REC_TRAILER;
}

/*
 * The largest ring: a record's len (and a PAD's) is 32 bits, and a
 * handshake carries a capacity in 32 bits too.
 */
#define CLANQ_RING_CAP_MAX	0x40000000ull	/* 1 GiB */

/* A ring capacity that can be used: a multiple of 8, a record fits. */
static inline int clanq_ring_cap_ok(uint64_t cap)
{
	return cap >= 64 && cap % 8 == 0 && cap <= CLANQ_RING_CAP_MAX;
}

/*
 * Where a record of rec bytes goes when the ring's tail is at position
 * pos (its total % cap): returns the bytes it costs (rec, plus the PAD
 * before it if it does not fit before the end), and the pad bytes in
 * *pad. The library keeps pos beside the total, so that no division is
 * on its path.
 */
static inline uint64_t clanq_ring_cost_at(uint64_t cap, uint64_t pos, uint64_t rec,
					  uint64_t *pad)
{
	*pad = pos + rec > cap ? cap - pos : 0;
	return *pad + rec;
}

/*
 * Send credit: bytes of the peer's ring free for us, given what we wrote
 * (tail) and what the peer says it consumed (credit, untrusted).
 * Returns -1 if credit makes no sense (ahead of what we wrote, or
 * further behind than the ring is long).
 */
static inline int64_t clanq_ring_space(uint64_t cap, uint64_t tail, uint64_t credit)
{
	if (credit > tail || tail - credit > cap)
		return -1;
	return (int64_t)(cap - (tail - credit));
}

/* What clanq_ring_check_at() makes of the record at the reader's head. */
enum clanq_rec_verdict {
	CLANQ_REC_NONE = 0,	/* nothing there yet */
	CLANQ_REC_OK = 1,	/* a whole record: *size bytes */
	CLANQ_REC_BAD = -1,	/* the peer wrote nonsense */
};

/*
 * Check the record header h found at total `head` (position pos, which
 * is head % cap) of a ring whose peer-written tail is `tail` (both
 * untrusted but tail acquire-loaded): is it whole, inside the ring, of a
 * known type, no longer than allowed? *size gets the bytes it takes (a
 * PAD: to the end of the ring).
 */
static inline enum clanq_rec_verdict
clanq_ring_check_at(uint64_t cap, uint64_t head, uint64_t pos, uint64_t tail,
		    struct clanq_rec h, uint64_t *size)
{
	uint64_t avail, n;

	if (tail == head)
		return CLANQ_REC_NONE;
	if (tail < head || tail - head > cap || pos % 8 || pos >= cap)
		return CLANQ_REC_BAD;
	avail = tail - head;
	if (h.reserved)
		return CLANQ_REC_BAD;
	switch (h.type) {
	case CLANQ_REC_PAD:
		n = cap - pos;
		if ((uint64_t)h.len + CLANQ_REC_HDR != n)
			return CLANQ_REC_BAD;
		break;
	case CLANQ_REC_DATA:
	case CLANQ_REC_FIN:
		/* a FIN is empty; an empty message would read as a FIN */
		if (h.len > clanq_ring_max_msg(cap) ||
		    (h.type == CLANQ_REC_FIN && h.len) ||
		    (h.type == CLANQ_REC_DATA && !h.len))
			return CLANQ_REC_BAD;
		n = clanq_rec_size(h.len);
		if (pos + n > cap)
			return CLANQ_REC_BAD;
		break;
	default:
		/*
		 * A LARGE says only the length; a FRAG carries bytes; a
		 * REGION is a descriptor and a BULK a reference, each of
		 * its one size. (Here,
		 * not as cases of their own: the small message's path stays
		 * as it was, instruction for instruction.)
		 */
		if ((h.type != CLANQ_REC_LARGE && h.type != CLANQ_REC_FRAG &&
		     h.type != CLANQ_REC_REGION && h.type != CLANQ_REC_BULK) ||
		    h.len > clanq_ring_max_msg(cap) || !h.len ||
		    (h.type == CLANQ_REC_LARGE && h.len != sizeof(uint64_t)) ||
		    (h.type == CLANQ_REC_BULK &&
		     h.len != sizeof(struct clanq_bulk_ref)) ||
		    (h.type == CLANQ_REC_REGION &&
		     h.len != sizeof(struct clanq_region_wire)))
			return CLANQ_REC_BAD;
		n = clanq_rec_size(h.len);
		if (pos + n > cap)
			return CLANQ_REC_BAD;
		break;
	}
	if (n > avail)
		return CLANQ_REC_BAD;
	*size = n;
	return CLANQ_REC_OK;
}

/*
 * The length a LARGE record announces (untrusted): longer than a record
 * of a ring of cap bytes takes (or it would have been a DATA record), no
 * longer than the limit. The receiver allocates nothing for it: the
 * bytes go into the application's buffer, fragment by fragment.
 */
static inline int clanq_large_len_ok(uint64_t cap, uint64_t total)
{
	return total > clanq_ring_max_msg(cap) && total <= CLANQ_MSG_LARGE_MAX;
}

/*
 * Should the reader hand credit back now? consumed: its total; returned:
 * what it last told the peer. Every quarter ring, so a streaming sender
 * never waits for it; otherwise it rides on the reader's next PIO send,
 * or goes when the reader is about to block or the peer asks (hdr.want).
 */
static inline int clanq_ring_credit_due(uint64_t cap, uint64_t consumed,
					uint64_t returned)
{
	return consumed - returned >= cap / 4;
}

#endif /* _CLANQ_RING_H */
