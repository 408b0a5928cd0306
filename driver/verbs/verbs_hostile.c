// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile remote host, in test builds only: driver/Kbuild builds this
 * file into the debug build's clanq_verbs.ko (CLANQ_TEST=y) and no other.
 *
 * With test_forge set (a mask of CLANQ_VH_*), every connection of this
 * host sends, test_forge_rate times a second besides its own traffic,
 * what a remote host that means harm could put on the wire:
 *
 *   NOTICES  UNREACHABLEs on the connections peers made to us (the only
 *            ones an UNREACHABLE may come back on): for a random message
 *            from a random endpoint; for a message an endpoint of the
 *            peer really sent us, but naming another endpoint as its
 *            sender or another as its destination, or long gone; and a
 *            second one for a message we did answer
 *   OOB      on our connections: OOB messages that claim another source
 *            node or another destination node, that carry a notice's
 *            type, for an endpoint the peer does not have; an
 *            UNREACHABLE the wrong way
 *   GARBAGE  on both: random bytes, valid messages of every type with
 *            bytes replaced, cut short, with a length that is not
 *            theirs, an unknown type or another version
 *   REGION   WROTEs and IMPORTs for regions and offsets that do not
 *            exist (ours), GRANTs, REFUSEs and REVOKEDs for requests
 *            and regions that do not exist (theirs)
 *
 * None of them names an endpoint of the peer that really talks to us as
 * the recipient of a message it did get: that a peer may do by right,
 * as a host may answer "port unreachable" for a port that exists, and
 * the receiver could not tell. tests/integration/test_verbs.c "hostile"
 * switches it on through the echo service of the pair stage; the other
 * host must drop all of it (its clanq_verbs counters say how much) and
 * keep serving its users.
 */
#include <linux/module.h>
#include <linux/random.h>
#include <linux/workqueue.h>

#include "verbs.h"

#define CLANQ_VH_NOTICES	0x1u
#define CLANQ_VH_OOB		0x2u
#define CLANQ_VH_GARBAGE	0x4u
#define CLANQ_VH_REGION		0x8u
#define CLANQ_VH_ALL		0xfu

#define CLANQ_VH_TICK_MS	10
#define CLANQ_VH_SEEN		16

static unsigned int clanq_vh_forge;
/*
 * A rate the emulator's VMs bear beside their own traffic: the attacker
 * is also the honest peer of the pair stage, and its one vCPU is what
 * sends both (past ~250 a second in all, the debug VM sends nothing else)
 */
static unsigned int clanq_vh_rate = 50;
static unsigned int clanq_vh_credit;	/* the tick's: forgeries due, x1000 */
static atomic64_t clanq_vh_sent = ATOMIC64_INIT(0);
static DEFINE_MUTEX(clanq_vh_mutex);	/* setting test_forge vs. unloading */
static bool clanq_vh_stopped;

/* The last OOB messages peers sent us: what the forgeries imitate. */
static DEFINE_SPINLOCK(clanq_vh_lock);
static struct clanq_vh_seen {
	const void *conn;	/* compared, never followed */
	u32 src_id, dst_id, seq;
	bool answered;		/* we sent its UNREACHABLE */
} clanq_vh_seen[CLANQ_VH_SEEN];
static unsigned int clanq_vh_next;

static void clanq_vh_tick(struct work_struct *work);
static DECLARE_DELAYED_WORK(clanq_vh_work, clanq_vh_tick);

/* Called for every OOB message a passive connection delivered. */
void clanq_vhostile_saw(struct clanq_vconn *conn, const struct clanq_wmsg *m,
			bool unreachable)
{
	struct clanq_vh_seen *s;
	unsigned long flags;

	if (!READ_ONCE(clanq_vh_forge))
		return;
	spin_lock_irqsave(&clanq_vh_lock, flags);
	s = &clanq_vh_seen[clanq_vh_next++ % CLANQ_VH_SEEN];
	s->conn = conn;
	s->src_id = m->oob.src.id;
	s->dst_id = m->dst_id;
	s->seq = m->seq;
	s->answered = unreachable;
	spin_unlock_irqrestore(&clanq_vh_lock, flags);
}

/* A message @conn's peer really sent us, lately; false if none. */
static bool clanq_vh_pick(struct clanq_vconn *conn, struct clanq_vh_seen *out)
{
	unsigned int i, start = get_random_u32_below(CLANQ_VH_SEEN);
	unsigned long flags;
	bool found = false;

	spin_lock_irqsave(&clanq_vh_lock, flags);
	for (i = 0; i < CLANQ_VH_SEEN && !found; i++) {
		*out = clanq_vh_seen[(start + i) % CLANQ_VH_SEEN];
		found = out->conn == conn;
	}
	spin_unlock_irqrestore(&clanq_vh_lock, flags);
	return found;
}

/* An UNREACHABLE from @conn's peer's endpoint @src_id for our @dst_id. */
static size_t clanq_vh_unreachable(struct clanq_vconn *conn, u8 *buf,
				   u32 src_id, u32 dst_id, u32 seq)
{
	struct clanq_addr dst = { conn->nic->node, dst_id };
	struct clanq_oob_msg m = {
		.type = 0x7e57,
		.len = 8,
		.src = { conn->peer->node, src_id },
	};

	return clanq_wmsg_put_oob(buf, CLANQ_WMSG_UNREACHABLE, &dst, &m, seq);
}

/* A forged UNREACHABLE, on a connection the peer made to us. */
static size_t clanq_vh_notice(struct clanq_vconn *conn, u8 *buf)
{
	struct clanq_vh_seen s;
	u32 kind = get_random_u32_below(5);

	if (kind && !clanq_vh_pick(conn, &s))
		kind = 0;
	switch (kind) {
	case 1:		/* its message, another endpoint of the peer's as sender */
		return clanq_vh_unreachable(conn, buf, s.src_id + 1 +
					    get_random_u32_below(4), s.dst_id, s.seq);
	case 2:		/* its message, another destination */
		return clanq_vh_unreachable(conn, buf, s.src_id, s.dst_id ^ 1, s.seq);
	case 3:		/* a message of the same sender, long gone */
		return clanq_vh_unreachable(conn, buf, s.src_id, s.dst_id,
					    s.seq - 2 * CLANQ_V_SENT);
	case 4:		/* again, for one we answered (else: random seq) */
		return clanq_vh_unreachable(conn, buf, s.src_id, s.dst_id,
					    s.answered ? s.seq : get_random_u32());
	default:
		return clanq_vh_unreachable(conn, buf, get_random_u32(),
					    get_random_u32(), get_random_u32());
	}
}

/* An OOB message the peer must not deliver, on a connection we made. */
static size_t clanq_vh_oob(struct clanq_vconn *conn, u8 *buf)
{
	struct clanq_wmsg_hdr *h = (struct clanq_wmsg_hdr *)buf;
	struct clanq_addr dst = { conn->peer->node, 0x7ffffff0 };
	struct clanq_oob_msg m = {
		.type = 0x7e57,
		.len = 16,
		.src = { conn->nic->node, get_random_u32() },
	};
	size_t n;

	get_random_bytes(m.payload, m.len);
	switch (get_random_u32_below(5)) {
	case 0:		/* from another node: the peer itself, or any */
		n = clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m, 0);
		h->src_node = cpu_to_le32(get_random_u32_below(2) ?
					  conn->peer->node : get_random_u32());
		return n;
	case 1:		/* for another node */
		dst.node = get_random_u32();
		return clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m, 0);
	case 2:		/* a notice's type: the drivers' own */
		m.type = CLANQ_OOB_UNREACHABLE;
		return clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m, 0);
	case 3:		/* an UNREACHABLE, the wrong way */
		return clanq_wmsg_put_oob(buf, CLANQ_WMSG_UNREACHABLE, &dst, &m,
					  get_random_u32());
	default:	/* for an endpoint the peer does not have: it answers */
		return clanq_wmsg_put_oob(buf, CLANQ_WMSG_OOB, &dst, &m,
					  get_random_u32());
	}
}

/* A region message for what does not exist, as the direction allows. */
static size_t clanq_vh_region(struct clanq_vconn *conn, u8 *buf, bool valid_type)
{
	static const u8 ours[] = { CLANQ_WMSG_IMPORT, CLANQ_WMSG_WROTE };
	static const u8 theirs[] = { CLANQ_WMSG_GRANT, CLANQ_WMSG_REFUSE,
				     CLANQ_WMSG_REVOKED };
	struct clanq_wmsg_rgn r = {
		/* ids and requests far above what the peer has */
		.id = 0x40000000 | get_random_u32(),
		.req = 0x40000000 | get_random_u32(),
		.key = get_random_u64(),
		.off = get_random_u32_below(2) ? get_random_u64() : U64_MAX - 4096,
		.len = 1 + get_random_u32_below(16 * PAGE_SIZE),
		.span = PAGE_SIZE,
		.first = get_random_u32_below(PAGE_SIZE),
		.rights = CLANQ_RIGHT_WRITE,
		.rkey = get_random_u32(),
		.err = -EPERM,
	};
	bool mine = conn->active == valid_type;
	u8 type;

	if (mine)
		type = ours[get_random_u32_below(ARRAY_SIZE(ours))];
	else
		type = theirs[get_random_u32_below(ARRAY_SIZE(theirs))];
	r.nr_mrs = DIV_ROUND_UP(r.len + r.first, r.span);
	r.mr = get_random_u32_below(r.nr_mrs);
	if (r.nr_mrs > CLANQ_WMSG_MAX_MRS) {
		r.len = PAGE_SIZE;
		r.first = 0;
		r.nr_mrs = 1;
		r.mr = 0;
	}
	if (type == CLANQ_WMSG_WROTE && check_add_overflow(r.off, r.len, &r.key))
		r.off = U64_MAX - r.len;
	return clanq_wmsg_put_region(buf, type, conn->nic->node, conn->peer->node, &r);
}

/* A valid message of any type, mangled, or random bytes. */
static size_t clanq_vh_garbage(struct clanq_vconn *conn, u8 *buf)
{
	struct clanq_wmsg_hdr *h = (struct clanq_wmsg_hdr *)buf;
	u32 i, k, kind = get_random_u32_below(6);
	size_t n;

	if (!kind) {
		get_random_bytes(buf, CLANQ_WMSG_MAX);
		return 1 + get_random_u32_below(CLANQ_WMSG_MAX);
	}
	if (get_random_u32_below(2))
		n = conn->active ? clanq_vh_oob(conn, buf) :
		    clanq_vh_unreachable(conn, buf, get_random_u32(),
					 get_random_u32(), get_random_u32());
	else
		n = clanq_vh_region(conn, buf, get_random_u32_below(2));
	switch (kind) {
	case 1:		/* bytes replaced */
		k = 1 + get_random_u32_below(4);
		for (i = 0; i < k; i++)
			buf[get_random_u32_below(n)] = get_random_u32();
		return n;
	case 2:		/* cut short */
		return 1 + get_random_u32_below(n - 1);
	case 3:		/* a length that is not its own */
		h->len = cpu_to_le16(le16_to_cpu(h->len) + 1 +
				     get_random_u32_below(0xfff0));
		return n;
	case 4:		/* a type we do not know */
		h->type = 8 + get_random_u32_below(248);
		return n;
	default:	/* another version */
		h->version = CLANQ_WMSG_VERSION + 1 + get_random_u32_below(250);
		return n;
	}
}

static void clanq_vh_one(struct clanq_vconn *conn, unsigned int forge)
{
	u8 buf[CLANQ_WMSG_MAX];
	unsigned int bit;
	size_t n;

	do {
		bit = BIT(get_random_u32_below(4));
	} while (!(forge & bit));
	memset(buf, 0, sizeof(buf));
	switch (bit) {
	case CLANQ_VH_NOTICES:
		/* they come back only on connections the peer made */
		n = conn->active ? clanq_vh_oob(conn, buf) : clanq_vh_notice(conn, buf);
		break;
	case CLANQ_VH_OOB:
		/* on the peer's connection: the wrong way */
		n = clanq_vh_oob(conn, buf);
		break;
	case CLANQ_VH_REGION:
		n = clanq_vh_region(conn, buf, true);
		break;
	default:
		n = clanq_vh_garbage(conn, buf);
		break;
	}
	if (!clanq_vconn_send_raw(conn, buf, n))
		atomic64_inc(&clanq_vh_sent);
}

static void clanq_vh_tick(struct work_struct *work)
{
	unsigned int forge = READ_ONCE(clanq_vh_forge) & CLANQ_VH_ALL;
	struct clanq_vconn *conns[8], *conn;
	unsigned int i, k, n = 0, per;
	unsigned long flags;

	if (!forge)
		return;
	spin_lock_irqsave(&clanq_v_lock, flags);
	list_for_each_entry(conn, &clanq_v_conns, node) {
		if (n == ARRAY_SIZE(conns))
			break;
		if (READ_ONCE(conn->torn) || READ_ONCE(conn->state) != CLANQ_PEER_UP)
			continue;
		clanq_vconn_get(conn);
		conns[n++] = conn;
	}
	spin_unlock_irqrestore(&clanq_v_lock, flags);
	/* test_forge_rate a second, whatever the tick */
	clanq_vh_credit += min(READ_ONCE(clanq_vh_rate), 100000u) * CLANQ_VH_TICK_MS;
	per = min_t(u32, clanq_vh_credit / 1000, CLANQ_V_SLOTS);
	clanq_vh_credit %= 1000;
	for (i = 0; i < n; i++) {
		for (k = 0; k < per; k++)
			clanq_vh_one(conns[i], forge);
		clanq_vconn_put(conns[i]);
	}
	schedule_delayed_work(&clanq_vh_work, msecs_to_jiffies(CLANQ_VH_TICK_MS));
}

static int clanq_vh_forge_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int err = kstrtouint(val, 0, &v);

	if (err)
		return err;
	if (v & ~CLANQ_VH_ALL)
		return -EINVAL;
	mutex_lock(&clanq_vh_mutex);
	if (clanq_vh_stopped) {
		mutex_unlock(&clanq_vh_mutex);
		return -ENODEV;
	}
	WRITE_ONCE(clanq_vh_forge, v);
	if (v)
		mod_delayed_work(system_wq, &clanq_vh_work, 0);
	mutex_unlock(&clanq_vh_mutex);
	if (v)
		pr_notice("clanq_verbs: test_forge=%#x: this host now attacks its peers\n", v);
	return 0;
}

static const struct kernel_param_ops clanq_vh_forge_ops = {
	.set = clanq_vh_forge_set,
	.get = param_get_uint,
};

module_param_cb(test_forge, &clanq_vh_forge_ops, &clanq_vh_forge, 0644);
MODULE_PARM_DESC(test_forge, "Test builds only: send peers forgeries, test_forge_rate a second per connection (a mask: 1 forged UNREACHABLEs, 2 OOB messages with forged nodes or types, 4 malformed messages, 8 region messages for what does not exist; 0: none)");
module_param_named(test_forge_rate, clanq_vh_rate, uint, 0644);
MODULE_PARM_DESC(test_forge_rate, "Test builds only: forgeries a second per connection with test_forge (default 50)");

static int clanq_vh_sent_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(&clanq_vh_sent));
}

static const struct kernel_param_ops clanq_vh_sent_ops = {
	.get = clanq_vh_sent_get,
};

module_param_cb(test_forged, &clanq_vh_sent_ops, NULL, 0444);
MODULE_PARM_DESC(test_forged, "Test builds only, read only: forgeries sent with test_forge");

/* The module is going: no more forgeries, none under way. */
void clanq_vhostile_stop(void)
{
	mutex_lock(&clanq_vh_mutex);
	clanq_vh_stopped = true;
	WRITE_ONCE(clanq_vh_forge, 0);
	mutex_unlock(&clanq_vh_mutex);
	cancel_delayed_work_sync(&clanq_vh_work);
}
