// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-fuzz: a small coverage-guided fuzzer of clanq.ko (syzkaller-style).
 *
 * Runs inside the debug VM as root, with clanq.ko loaded (nr_nics=2). A
 * "program" is a short sequence of calls (ioctls of both fd kinds, mmap,
 * munmap, mremap, mprotect, scribbles on shared segments, RDMA requests
 * posted into a mapped request queue, fork, close...). Calls refer to
 * resources earlier calls created through a small table (fds, endpoints,
 * regions, apertures, registrations, mappings), or to random ids.
 *
 * Programs run one after another in a forked executor process (a fault
 * on a revoked or scribbled mapping ends the program; a hang or a fatal
 * signal costs a new executor) with KCOV enabled; the parent keeps the PCs that lie in clanq.ko's text (the only code the debug
 * kernel instruments: the driver's Kbuild asks for KCOV_INSTRUMENT) and
 * hashes edges (prev_pc, pc) into a bitmap. A program that reaches a new
 * edge joins the corpus; new programs are corpus entries mutated (a
 * field changed, a call inserted or deleted, two spliced) or made from
 * scratch. Work done by the RDMA engine's kthread is not seen: KCOV
 * follows the calling task only.
 *
 * Never hangs: blocking calls take short timeouts, the executor has an
 * alarm() watchdog per program, and the parent SIGKILLs an executor that
 * outlives its deadline.
 *
 * Corpus persistence (the VM's root is an initramfs): -c FILE is read at
 * start ("clanq-fuzz-corpus 1" first, then one hex-encoded program per
 * line; a bad line is skipped); at the end each corpus entry is printed as
 * "CLANQ-CORPUS <hex>", then "CLANQ-CORPUS-END <n>", for tests/vm/vm.sh to
 * collect.
 *
 * Usage: clanq-fuzz [-t seconds] [-c corpus] [-s seed] [-v]
 * Exit status: 0, or 2 on an internal error of the fuzzer itself (kernel
 * splats are the harness's business: it reads the console log).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <clanq/uapi.h>

#define KCOV_INIT_TRACE		_IOR('c', 1, unsigned long)
#define KCOV_ENABLE		_IO('c', 100)
#define KCOV_DISABLE		_IO('c', 101)
#define KCOV_TRACE_PC		0

#define CORPUS_MAGIC		"clanq-fuzz-corpus 1"
#define COVER_WORDS		(256 * 1024)
#define EDGE_BITS		20
#define EDGE_MAP		(1u << EDGE_BITS)
#define MAX_CALLS		32
#define NARGS			6
#define REC_SIZE		(1 + NARGS * 8)
#define MAX_CORPUS		4096
#define CHILD_ALARM		3	/* seconds, the child's own watchdog */
#define CHILD_DEADLINE_MS	5000	/* then the parent SIGKILLs it */

typedef uint64_t u64;
typedef uint32_t u32;

/* ---- randomness ----------------------------------------------------------- */

static u64 rng_state = 0x9e3779b97f4a7c15ull;

static u64 rnd(void)
{
	u64 x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

static u64 rn(u64 n)
{
	return n ? rnd() % n : 0;
}

static int one_in(u64 n)
{
	return rn(n) == 0;
}

/* Boundary values: what ioctl handlers get wrong. */
static u64 special(void)
{
	static const u64 v[] = {
		0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256,
		511, 512, 1023, 1024, 4095, 4096, 4097, 8192, 65535, 65536, 65537,
		1u << 20, (1u << 20) + 1, 1u << 24, 0x7fffffff, 0x80000000,
		0xfffffffe, 0xffffffff, 0x100000000ull, 0x7fffffffffffffffull,
		0x8000000000000000ull, 0xfffffffffffff000ull, 0xffffffffffffffffull,
		0xfffffffffffffffeull, 0xffffffff00000000ull,
	};
	u64 x;

	switch (rn(6)) {
	case 0:
		return 1ull << rn(64);
	case 1:
		return (1ull << rn(64)) - 1;
	case 2:
		return rnd();
	case 3:
		x = v[rn(sizeof(v) / sizeof(v[0]))];
		return one_in(4) ? -x : x;
	default:
		return v[rn(sizeof(v) / sizeof(v[0]))];
	}
}

/* A small value most of the time, a boundary one sometimes. */
static u64 smallish(u64 lim)
{
	return one_in(5) ? special() : rn(lim);
}

/* ---- programs ------------------------------------------------------------- */

enum op {
	OP_OPEN, OP_CLOSE, OP_QUERY, OP_EP_CREATE, OP_EP_DESTROY, OP_OOB_SEND,
	OP_EVQ_CREATE, OP_EVQ_REG, OP_EVQ_UNREG, OP_EVQ_WAIT, OP_REGION_CREATE,
	OP_REGION_FREE, OP_REGION_EXPORT, OP_AP_IMPORT, OP_AP_CLOSE, OP_RDMA_KICK,
	OP_MMAP, OP_MUNMAP, OP_MREMAP, OP_MPROTECT, OP_SCRIBBLE, OP_RDMA_POST,
	OP_CONSUME, OP_FORK, OP_POLL, OP_RAW_IOCTL, OP_DUP, OP_RW, OP_TOUCH,
	/* new ones go last: the corpus names ops by number */
	OP_TW_CREATE, OP_TW_CTL, OP_TW_WAIT, OP_AP_FLUSH, OP_LAST_ERROR,
	NR_OPS
};

static const char *const op_name[NR_OPS] = {
	"open", "close", "query", "ep_create", "ep_destroy", "oob_send",
	"evq_create", "evq_reg", "evq_unreg", "evq_wait", "region_create",
	"region_free", "region_export", "ap_import", "ap_close", "rdma_kick",
	"mmap", "munmap", "mremap", "mprotect", "scribble", "rdma_post",
	"consume", "fork", "poll", "raw_ioctl", "dup", "rw", "touch",
	"tw_create", "tw_ctl", "tw_wait", "ap_flush", "last_error",
};

/* How often each op is generated (relative). */
static const unsigned op_weight[NR_OPS] = {
	[OP_OPEN] = 6, [OP_CLOSE] = 2, [OP_QUERY] = 1, [OP_EP_CREATE] = 8,
	[OP_EP_DESTROY] = 3, [OP_OOB_SEND] = 8, [OP_EVQ_CREATE] = 5,
	[OP_EVQ_REG] = 6, [OP_EVQ_UNREG] = 3, [OP_EVQ_WAIT] = 3,
	[OP_REGION_CREATE] = 7, [OP_REGION_FREE] = 3, [OP_REGION_EXPORT] = 6,
	[OP_AP_IMPORT] = 7, [OP_AP_CLOSE] = 3, [OP_RDMA_KICK] = 4, [OP_MMAP] = 9,
	[OP_MUNMAP] = 2, [OP_MREMAP] = 2, [OP_MPROTECT] = 2, [OP_SCRIBBLE] = 5,
	[OP_RDMA_POST] = 9, [OP_CONSUME] = 4, [OP_FORK] = 1, [OP_POLL] = 2,
	[OP_RAW_IOCTL] = 2, [OP_DUP] = 1, [OP_RW] = 1, [OP_TOUCH] = 3,
	[OP_TW_CREATE] = 7, [OP_TW_CTL] = 6, [OP_TW_WAIT] = 3, [OP_AP_FLUSH] = 6,
	[OP_LAST_ERROR] = 1,
};

struct call {
	uint8_t op;
	u64 a[NARGS];
};

struct prog {
	int n;
	struct call c[MAX_CALLS];
};

/*
 * A resource selector: mostly "the k-th live resource of this kind", now
 * and then a raw value (an id nobody handed out, a stale one).
 */
static u64 gen_sel(void)
{
	if (one_in(12))
		return 15 | (special() << 8);
	return (rn(8) << 4) | rn(15);
}

/* A "corrupt" word: mostly zero, so most calls get past the prologue. */
static u64 gen_bad(void)
{
	return one_in(8) ? special() : 0;
}

static void gen_call(struct call *c)
{
	unsigned total = 0, w, i;

	for (i = 0; i < NR_OPS; i++)
		total += op_weight[i];
	w = rn(total);
	for (i = 0; i < NR_OPS && w >= op_weight[i]; i++)
		w -= op_weight[i];
	c->op = i < NR_OPS ? i : OP_QUERY;
	for (i = 0; i < NARGS; i++)
		c->a[i] = gen_sel();
	switch (c->op) {
	case OP_OPEN:
		c->a[0] = one_in(10) ? special() : rn(2);
		break;
	case OP_EP_CREATE:
		c->a[1] = one_in(3) ? 0 : (one_in(4) ? special() : 1ull << rn(12));
		c->a[2] = one_in(3) ? 0 : (one_in(4) ? special() : 1ull << rn(12));
		c->a[3] = one_in(3) ? 0 : (one_in(4) ? special() : 1ull << rn(12));
		c->a[4] = gen_bad();
		break;
	case OP_OOB_SEND:
		c->a[3] = one_in(4) ? special() : CLANQ_OOB_TYPE_USER + rn(4);
		c->a[4] = smallish(CLANQ_OOB_PAYLOAD + 1);
		c->a[5] = gen_bad();
		break;
	case OP_EVQ_CREATE:
		c->a[1] = smallish(64);
		c->a[2] = gen_bad();
		break;
	case OP_EVQ_REG:
		c->a[2] = one_in(6) ? special() : 1 + rn(CLANQ_EV_ALL);
		c->a[3] = rnd();
		c->a[4] = gen_bad();
		break;
	case OP_EVQ_WAIT:
		c->a[1] = rn(2000000);	/* ns: never long */
		c->a[2] = smallish(64);
		/* a third arm tripwires in the call (evq_wait_arms()) */
		c->a[3] = one_in(3) ? CLANQ_EVQ_WAIT_ARM | rnd() << 33 : gen_bad();
		break;
	case OP_REGION_CREATE:
		c->a[1] = one_in(6) ? special() : 1 + rn(one_in(3) ? 1 << 20 : 3 * 4096);
		c->a[2] = one_in(3) ? CLANQ_REGION_REGISTER : (one_in(10) ? special() : 0);
		c->a[4] = gen_bad();
		break;
	case OP_REGION_EXPORT:
		c->a[2] = one_in(6) ? special() : 1 + rn(CLANQ_RIGHTS_ALL);
		/* flags (0 or KEY_NAMES_REGION) or, now and then, garbage */
		c->a[3] = one_in(8) ? special() : rn(2);
		break;
	case OP_AP_IMPORT:
		c->a[3] = one_in(3) ? special() : rn(8192);	/* offset */
		c->a[4] = one_in(3) ? special() : 1 + rn(8192);	/* len */
		c->a[5] = (one_in(6) ? special() : 1 + rn(CLANQ_RIGHTS_ALL)) |
			  (gen_bad() << 32);
		break;
	case OP_MMAP:
		c->a[2] = rn(8);	/* length variant */
		c->a[3] = rn(16);	/* prot/flags variant */
		break;
	case OP_MREMAP:
	case OP_MPROTECT:
		c->a[1] = rnd();
		break;
	case OP_SCRIBBLE:
		c->a[2] = special();
		c->a[3] = rn(4);
		break;
	case OP_RDMA_POST:
		c->a[2] = one_in(3) ? special() : rn(8192);	/* src_off */
		c->a[3] = one_in(3) ? special() : rn(8192);	/* dst_off */
		c->a[4] = one_in(3) ? special() : rn(8192);	/* len */
		c->a[5] = rnd();	/* flags, kick policy, garbage */
		break;
	case OP_FORK:
		c->a[1] = rn(6);
		c->a[2] = rn(4);
		break;
	case OP_RAW_IOCTL:
		c->a[1] = rnd();
		c->a[2] = rnd();
		break;
	case OP_TW_CREATE:
		c->a[3] = one_in(4) ? special() : rn(8192);	/* off */
		c->a[4] = one_in(4) ? special() : 1 + rn(256);	/* len */
		c->a[5] = (one_in(8) ? special() : rn(4)) | (gen_bad() << 32);
		break;
	case OP_TW_CTL:
		c->a[1] = rn(3) | (gen_sel() << 8);	/* which, tripwire */
		c->a[2] = gen_bad();
		break;
	case OP_TW_WAIT:
		c->a[2] = one_in(4) ? special() : rn(8192);	/* off */
		c->a[3] = one_in(2) ? 0 : rnd();		/* old */
		c->a[4] = rn(2000000);	/* ns: never long */
		c->a[5] = gen_bad();
		break;
	case OP_AP_FLUSH:
		c->a[2] = one_in(4) ? special() : rn(8192);	/* off */
		c->a[3] = one_in(4) ? special() : rn(512);	/* len */
		c->a[4] = gen_bad();
		break;
	default:
		break;
	}
}

/*
 * A program that does what an application does (a context per node, an
 * endpoint mapped, a region exported and imported, an RDMA write posted,
 * an evq, OOB messages), to be mutated: the deep paths are reached at
 * once rather than by luck. Selector 0 is "the first live one".
 */
static void gen_template(struct prog *p)
{
	static const struct call t[] = {
		{ OP_OPEN, { 0 } },
		{ OP_OPEN, { 1 } },
		{ OP_EP_CREATE, { 0, 8, 8, 8 } },
		{ OP_EP_CREATE, { 1 << 4, 0, 0, 0 } },
		{ OP_MMAP, { 0, 0, 0, 0 } },			/* ep 0's segment */
		{ OP_REGION_CREATE, { 0, 8192, 0 } },
		{ OP_REGION_EXPORT, { 0, 0, CLANQ_RIGHTS_ALL } },
		{ OP_AP_IMPORT, { 0, 0, 0, 0, 4096, CLANQ_RIGHTS_ALL } },
		{ OP_MMAP, { 2, 0, 0, 0 } },			/* the aperture */
		{ OP_RDMA_POST, { 0, 0, 0, 16, 512, CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL } },
		/* a READ back (op 1), a CAS (2) and a FENCEd FADD (3) */
		{ OP_RDMA_POST, { 0, 0, 1024, 16, 512, 1 << 6 | CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL } },
		{ OP_RDMA_POST, { 0, 0, 0, 64, 8, 2 << 6 | CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL } },
		{ OP_RDMA_POST, { 0, 0, 1, 64, 8, 3 << 6 | CLANQ_RDMA_FENCE | CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL } },
		{ OP_EVQ_CREATE, { 0, 8 } },
		{ OP_EVQ_REG, { 0, 0, CLANQ_EV_ALL, 7 } },
		{ OP_OOB_SEND, { 0, 0, 1 << 4, CLANQ_OOB_TYPE_USER, 8 } },
		{ OP_OOB_SEND, { 0, 1 << 4, 0, CLANQ_OOB_TYPE_USER, 48 } },
		{ OP_EVQ_WAIT, { 0, 1000000, 0 } },
		{ OP_CONSUME, { 0, 1 } },
		{ OP_CONSUME, { 0, 0 } },
		{ OP_REGION_FREE, { 0, 0 } },
		{ OP_RDMA_POST, { 0, 0, 0, 0, 64, CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL | 0x10 } },
		{ OP_TOUCH, { 0, 1 } },
		/* a tripwire on a second exported region, fired by RDMA and PIO */
		{ OP_REGION_CREATE, { 0, 8192, 0 } },
		{ OP_REGION_EXPORT, { 0, 1 << 4, CLANQ_RIGHTS_ALL } },
		{ OP_AP_IMPORT, { 0, 1 << 4, 0, 0, 4096, CLANQ_RIGHTS_ALL } },
		{ OP_MMAP, { 2, 1 << 4, 0, 0, 1 } },		/* its armed bitmap */
		{ OP_TW_CREATE, { 0, 0, 1 << 4, 64, 8, CLANQ_TW_ARMED } },
		{ OP_TW_CREATE, { 0, 0, 1 << 4, 0, 4096, CLANQ_TW_ARMED | CLANQ_TW_PERSISTENT } },
		{ OP_RDMA_POST, { 0, 1 << 4 | 1 << 24, 0, 64, 64, CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL } },
		{ OP_AP_FLUSH, { 0, 1 << 4, 64, 8 } },
		{ OP_TW_WAIT, { 0, 0, 64, 0, 100000 } },
		{ OP_TW_CTL, { 0, 2 } },			/* destroy */
	};
	int i, n = sizeof(t) / sizeof(t[0]);

	p->n = n < MAX_CALLS ? n : MAX_CALLS;
	for (i = 0; i < p->n; i++)
		p->c[i] = t[i];
}

static void mutate(struct prog *p);

static void gen_prog(struct prog *p)
{
	int i;

	if (one_in(4)) {
		gen_template(p);
		for (i = rn(3); i > 0; i--)
			mutate(p);
		return;
	}

	p->n = 2 + rn(MAX_CALLS - 1);
	for (i = 0; i < p->n; i++)
		gen_call(&p->c[i]);
	/* a context first, most of the time, so there is something to use */
	if (p->n && !one_in(8)) {
		p->c[0].op = OP_OPEN;
		p->c[0].a[0] = rn(2);
	}
}

/* ---- the corpus ----------------------------------------------------------- */

static struct prog *corpus[MAX_CORPUS];
static int ncorpus;

static void mutate(struct prog *p)
{
	int k, i, n = 1 + rn(3);
	struct prog *o;

	while (n--) {
		switch (rn(6)) {
		case 0:	/* insert a call */
			if (p->n < MAX_CALLS) {
				i = rn(p->n + 1);
				memmove(&p->c[i + 1], &p->c[i], (p->n - i) * sizeof(p->c[0]));
				gen_call(&p->c[i]);
				p->n++;
			}
			break;
		case 1:	/* delete a call */
			if (p->n > 1) {
				i = rn(p->n);
				memmove(&p->c[i], &p->c[i + 1], (p->n - i - 1) * sizeof(p->c[0]));
				p->n--;
			}
			break;
		case 2:	/* splice another entry's tail */
			if (ncorpus) {
				o = corpus[rn(ncorpus)];
				i = rn(p->n + 1);
				k = rn(o->n + 1);
				while (i < MAX_CALLS && k < o->n)
					p->c[i++] = o->c[k++];
				p->n = i;
			}
			break;
		default: /* change a field */
			if (p->n) {
				struct call *c = &p->c[rn(p->n)];

				k = rn(NARGS);
				switch (rn(5)) {
				case 0:
					c->a[k] = special();
					break;
				case 1:
					c->a[k] ^= 1ull << rn(64);
					break;
				case 2:
					c->a[k] += rn(9) - 4;
					break;
				case 3:
					c->a[k] = gen_sel();
					break;
				default: {
					struct call fresh;

					fresh.op = c->op;
					gen_call(&fresh);
					if (fresh.op == c->op)
						c->a[k] = fresh.a[k];
					else
						c->a[k] = rnd();
				}
				}
			}
			break;
		}
	}
	if (!p->n)
		gen_prog(p);
}

static void hex_out(const struct prog *p, char *buf)
{
	static const char hx[] = "0123456789abcdef";
	int i, j, b;

	for (i = 0; i < p->n; i++) {
		uint8_t rec[REC_SIZE];

		rec[0] = p->c[i].op;
		for (j = 0; j < NARGS; j++)
			for (b = 0; b < 8; b++)
				rec[1 + j * 8 + b] = p->c[i].a[j] >> (8 * b);
		for (j = 0; j < REC_SIZE; j++) {
			*buf++ = hx[rec[j] >> 4];
			*buf++ = hx[rec[j] & 15];
		}
	}
	*buf = 0;
}

static int unhex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* 0 and a program, or -1 for a line that is not one (never trusted). */
static int hex_in(const char *s, size_t len, struct prog *p)
{
	size_t i, nbytes;
	int j, b;

	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	if (len == 0 || len % (2 * REC_SIZE))
		return -1;
	nbytes = len / 2;
	if (nbytes / REC_SIZE > MAX_CALLS)
		return -1;
	p->n = nbytes / REC_SIZE;
	for (i = 0; i < (size_t)p->n; i++) {
		uint8_t rec[REC_SIZE];

		for (j = 0; j < REC_SIZE; j++) {
			int hi = unhex(s[2 * (i * REC_SIZE + j)]);
			int lo = unhex(s[2 * (i * REC_SIZE + j) + 1]);

			if (hi < 0 || lo < 0)
				return -1;
			rec[j] = hi << 4 | lo;
		}
		if (rec[0] >= NR_OPS)
			return -1;
		p->c[i].op = rec[0];
		for (j = 0; j < NARGS; j++) {
			p->c[i].a[j] = 0;
			for (b = 0; b < 8; b++)
				p->c[i].a[j] |= (u64)rec[1 + j * 8 + b] << (8 * b);
		}
	}
	return 0;
}

/* ---- the resource table (in the child) ------------------------------------ */

#define NRES 16

enum fd_kind { FD_CTX = 1, FD_EVQ };

struct rfd { int fd, kind, nic; u64 evq_size; u32 nr_words; struct clanq_queue_off ring; };
struct rep {
	int ctx;		/* index into fds */
	u32 id, node;
	u64 off, size;
	struct clanq_ioc_ep_create info;
	char *map;		/* its segment, once mapped */
	u32 rq_prod;
};
struct rregion { int ctx; u32 id, node; u64 off, size, key; };
struct rap { int ctx; u32 id; u64 off, size, armed_off, armed_size; };
struct rtw { int ctx; u32 id; u64 off; };
struct rreg { int evq; u32 reg; };
struct rmap { char *addr; size_t len; int ep; /* -1: not an endpoint's */ };

struct table {
	int nfd, nep, nregion, nap, nreg, nmap;
	struct rfd fd[NRES];
	struct rep ep[NRES];
	struct rregion region[NRES];
	struct rap ap[NRES];
	struct rtw tw[NRES];
	int ntw;
	struct rreg reg[NRES];
	struct rmap map[NRES];
	pid_t kids[8];
	int nkids;
	char *anon;		/* plain memory to register */
};

static struct table T;
static int nr_nics = 2;

/* k-th live entry (of n), or -1 for "use a raw value". */
static int pick(u64 sel, int n)
{
	if (!n || (sel & 15) == 15)
		return -1;
	return (sel >> 4) % n;
}

static u32 raw32(u64 sel)
{
	return sel >> 8;
}

#define ADD(arr, cnt) ((cnt) < NRES ? &(arr)[(cnt)++] : &(arr)[rn(NRES)])

static int ctx_fd(u64 sel, int *idx)
{
	int i, k = -1;

	/* the k-th context fd */
	for (i = 0; i < T.nfd; i++)
		if (T.fd[i].kind == FD_CTX)
			k++;
	if (k < 0 || (sel & 15) == 15) {
		*idx = -1;
		return (sel & 15) == 15 ? (int)raw32(sel) % 64 : -1;
	}
	k = (sel >> 4) % (k + 1);
	for (i = 0; i < T.nfd; i++)
		if (T.fd[i].kind == FD_CTX && !k--)
			break;
	*idx = i;
	return T.fd[i].fd;
}

static int evq_fd(u64 sel, int *idx)
{
	int i, k = -1;

	for (i = 0; i < T.nfd; i++)
		if (T.fd[i].kind == FD_EVQ)
			k++;
	if (k < 0 || (sel & 15) == 15) {
		*idx = -1;
		return (sel & 15) == 15 ? (int)raw32(sel) % 64 : -1;
	}
	k = (sel >> 4) % (k + 1);
	for (i = 0; i < T.nfd; i++)
		if (T.fd[i].kind == FD_EVQ && !k--)
			break;
	*idx = i;
	return T.fd[i].fd;
}

static u32 ep_id(u64 sel)
{
	int k = pick(sel, T.nep);

	return k < 0 ? raw32(sel) : T.ep[k].id;
}

static void forget_map(int k)
{
	int i;

	for (i = 0; i < T.nep; i++)
		if (T.ep[i].map == T.map[k].addr)
			T.ep[i].map = NULL;
	T.map[k] = T.map[--T.nmap];
}

static void add_map(char *addr, size_t len, int ep)
{
	struct rmap *m;

	if (T.nmap == NRES) {	/* full: evict one, unmapped (no leak) */
		int k = rn(NRES);

		munmap(T.map[k].addr, T.map[k].len);
		forget_map(k);
	}
	m = &T.map[T.nmap++];
	m->addr = addr;
	m->len = len;
	m->ep = ep;
	if (ep >= 0)
		T.ep[ep].map = addr;
}


static void run_call(const struct call *c, const struct prog *p, int idx);

/* ---- the calls ------------------------------------------------------------ */

static void do_open(const struct call *c)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), CLANQ_DEV_PREFIX "%u",
		 (unsigned)(c->a[0] % 4 == 3 ? c->a[0] : c->a[0] % (nr_nics + 1)));
	fd = open(path, (c->a[1] & 16) ? O_RDONLY : O_RDWR);
	if (fd >= 0) {
		struct rfd *f = ADD(T.fd, T.nfd);

		memset(f, 0, sizeof(*f));
		f->fd = fd;
		f->kind = FD_CTX;
		f->nic = c->a[0] % (nr_nics + 1);
	}
}

static void do_close(const struct call *c)
{
	int k = pick(c->a[0], T.nfd);

	if (k < 0)
		return;
	close(T.fd[k].fd);
	T.fd[k].kind = 0;
	T.fd[k] = T.fd[--T.nfd];
}

static void do_query(const struct call *c)
{
	struct clanq_ioc_query q = { .flags = c->a[1] & 0xff ? 0 : c->a[2] };
	int idx, fd = ctx_fd(c->a[0], &idx);

	q.reserved[c->a[3] % 3] = c->a[4] % 8 ? 0 : c->a[4];
	ioctl(fd, CLANQ_IOC_QUERY, &q);
}

static void do_last_error(const struct call *c)
{
	struct clanq_ioc_last_error e = { .flags = c->a[1] & 0xff ? 0 : c->a[2] };
	int idx, fd = ctx_fd(c->a[0], &idx);

	e.reserved[c->a[3] % 2] = c->a[4] % 8 ? 0 : c->a[4];
	ioctl(fd, CLANQ_IOC_LAST_ERROR, &e);
}

static void do_ep_create(const struct call *c)
{
	struct clanq_ioc_ep_create e = {
		.oob_slots = c->a[1], .rq_slots = c->a[2], .cq_slots = c->a[3],
		.flags = c->a[4],
	};
	int idx, fd = ctx_fd(c->a[0], &idx);

	if (c->a[5] % 16 == 0)
		e.reserved[c->a[5] >> 4 & 3] = c->a[5] >> 8 | 1;
	/*
	 * Half the time known flags only, and then a service (shared or
	 * not) of four, so that groups form, clash and outlive contexts.
	 */
	if (c->a[4] >> 63)
		e.flags &= CLANQ_EP_FLAGS;
	if (e.flags & CLANQ_EP_SERVICE)
		e.addr.id = 5000 + (uint32_t)(c->a[5] >> 32) % 4;
	if (ioctl(fd, CLANQ_IOC_EP_CREATE, &e) == 0 && idx >= 0) {
		struct rep *r = ADD(T.ep, T.nep);

		memset(r, 0, sizeof(*r));
		r->ctx = idx;
		r->id = e.addr.id;
		r->node = e.addr.node;
		r->off = e.mmap_offset;
		r->size = e.mmap_size;
		r->info = e;
	}
}

static void do_ep_destroy(const struct call *c)
{
	struct clanq_ioc_ep_destroy d = { .id = ep_id(c->a[1]), .flags = c->a[2] % 8 ? 0 : c->a[2] };
	int idx, fd = ctx_fd(c->a[0], &idx);

	ioctl(fd, CLANQ_IOC_EP_DESTROY, &d);
}

static void do_oob_send(const struct call *c)
{
	struct clanq_ioc_oob_send s = { .type = c->a[3], .len = c->a[4] };
	int k = pick(c->a[1], T.nep), d = pick(c->a[2], T.nep), idx, fd;

	if (k >= 0 && (c->a[0] & 15) != 15) {
		fd = T.fd[T.ep[k].ctx].fd;
		s.ep = T.ep[k].id;
	} else {
		fd = ctx_fd(c->a[0], &idx);
		s.ep = ep_id(c->a[1]);
	}
	if (d >= 0) {
		s.dst.node = T.ep[d].node;
		s.dst.id = T.ep[d].id;
	} else {
		s.dst.node = (c->a[2] >> 8) % 4 == 3 ? raw32(c->a[2]) : (c->a[2] >> 8) % 3;
		s.dst.id = c->a[2] >> 32;
	}
	memset(s.payload, (int)c->a[3], sizeof(s.payload));
	s.flags = c->a[5] & 0xffffffff;
	s.reserved[0] = c->a[5] >> 40;
	ioctl(fd, CLANQ_IOC_OOB_SEND, &s);
}

static void do_evq_create(const struct call *c)
{
	struct clanq_ioc_evq_create e = { .max_regs = c->a[1], .flags = c->a[2] };
	int idx, fd = ctx_fd(c->a[0], &idx);

	if (c->a[3] % 16 == 0)
		e.reserved0 = c->a[3] >> 8 | 1;
	if (c->a[3] % 16 == 1)
		e.reserved[c->a[3] >> 4 & 3] = c->a[3] >> 8 | 1;
	if (c->a[3] % 16 == 2)
		e.fd = c->a[3] >> 8;	/* out field, in: ignored */
	if (ioctl(fd, CLANQ_IOC_EVQ_CREATE, &e) == 0) {
		struct rfd *f;

		if (e.fd < 0)
			return;
		if (T.nfd >= NRES) {
			close(e.fd);
			return;
		}
		f = &T.fd[T.nfd++];
		memset(f, 0, sizeof(*f));
		f->fd = e.fd;
		f->kind = FD_EVQ;
		f->evq_size = e.mmap_size;
		f->nr_words = e.nr_words;
		f->ring = e.ring;
	}
}

static void do_evq_reg(const struct call *c, int reg)
{
	struct clanq_ioc_evq_reg r = {
		.ep = ep_id(c->a[1]), .events = c->a[2], .cookie = c->a[3],
		.flags = c->a[4] & 0xffffffff,
	};
	int idx, fd = evq_fd(c->a[0], &idx);

	r.reserved[c->a[4] >> 32 & 1] = c->a[4] >> 40;
	if (!reg) {
		int k = pick(c->a[1], T.nreg);

		r.reg = k >= 0 ? T.reg[k].reg : raw32(c->a[1]);
		if (k >= 0 && (c->a[0] & 15) != 15) {
			fd = T.fd[T.reg[k].evq].kind == FD_EVQ ? T.fd[T.reg[k].evq].fd : fd;
		}
		ioctl(fd, CLANQ_IOC_EVQ_UNREGISTER, &r);
		return;
	}
	if (ioctl(fd, CLANQ_IOC_EVQ_REGISTER, &r) == 0 && idx >= 0) {
		struct rreg *g = ADD(T.reg, T.nreg);

		g->evq = idx;
		g->reg = r.reg;
	}
}

static u64 pick_addr(u64 sel);

/*
 * CLANQ_EVQ_WAIT_ARM's vector, from the call's bits: up to 12 entries
 * naming live tripwires (their own words, or any) or apertures (a
 * flush), sometimes with garbage flags, ids, counts or a wild pointer.
 */
static void evq_wait_arms(const struct call *c, struct clanq_ioc_evq_wait *w,
			  struct clanq_evq_arm *arms)
{
	u64 s = c->a[3] >> 33, r = s;
	unsigned int n = s & 15, i;
	int k;

	for (i = 0; i < n && i < 12; i++) {
		r = (r + i + 1) * 0x9e3779b97f4a7c15ull;
		memset(&arms[i], 0, sizeof(arms[i]));
		if (r >> 60 == 15) {
			k = pick(r >> 8, T.nap);
			arms[i].id = k >= 0 ? T.ap[k].id : raw32(r >> 8);
			arms[i].flags = CLANQ_EVQ_ARM_FLUSH;
			arms[i].off = r >> 16 & 0x1fff;
			arms[i].val = r & 1 ? 8 : r >> 32;
			continue;
		}
		k = pick(r >> 8, T.ntw);
		arms[i].id = k >= 0 ? T.tw[k].id : raw32(r >> 8);
		arms[i].flags = r >> 56 == 0xee ? (u32)r : 0;
		arms[i].off = k >= 0 && r & 2 ? T.tw[k].off : r >> 20 & 0x3fff;
		arms[i].val = r & 4 ? 0 : r;
	}
	w->arms = (s >> 4 & 7) == 7 ? pick_addr(r) : (u64)(uintptr_t)arms;
	w->changed = (s >> 7 & 63) == 63 ? (u32)r : 0;
	w->nr_arms = n == 15 ? (u32)(s >> 8) : n;
}

static void do_evq_wait(const struct call *c)
{
	struct clanq_ioc_evq_wait w = {
		.timeout_ns = c->a[1] % 2000001, .read_i = c->a[2],
		.flags = c->a[3] & 0xffffffff,
	};
	struct clanq_evq_arm arms[12];
	int idx, fd = evq_fd(c->a[0], &idx);

	w.reserved[c->a[3] >> 32 & 1] = c->a[3] >> 40;
	if (w.flags & CLANQ_EVQ_WAIT_ARM)
		evq_wait_arms(c, &w, arms);
	ioctl(fd, CLANQ_IOC_EVQ_WAIT, &w);
}

static u64 pick_addr(u64 sel)
{
	int k;

	switch (sel % 6) {
	case 0:
		return 0;
	case 1:
		return sel >> 8;
	case 2:
	case 3:
		k = pick(sel >> 4, T.nmap);
		if (k >= 0)
			return (u64)(uintptr_t)T.map[k].addr;
		/* fall through */
	default:
		return (u64)(uintptr_t)T.anon + ((sel >> 8) % 4) * 4096 + ((sel >> 12) % 2 ? 0 : (sel >> 16) % 4096);
	}
}

static void do_region_create(const struct call *c)
{
	struct clanq_ioc_region_create r = { .size = c->a[1], .flags = c->a[2] };
	int idx, fd = ctx_fd(c->a[0], &idx);

	if (r.flags & CLANQ_REGION_REGISTER) {
		r.addr = pick_addr(c->a[3]);
		/* keep registrations inside the 256 KiB anon area, mostly */
		if (c->a[3] % 6 >= 4 && r.size > 64 * 4096 && !one_in(4))
			r.size = 1 + r.size % (64 * 4096);
	} else if (c->a[3] % 16 == 0) {
		r.addr = c->a[3] >> 4;
	}
	r.reserved[c->a[4] & 1] = c->a[4] >> 1;
	if (ioctl(fd, CLANQ_IOC_REGION_CREATE, &r) == 0 && idx >= 0) {
		struct rregion *g = ADD(T.region, T.nregion);

		memset(g, 0, sizeof(*g));
		g->ctx = idx;
		g->id = r.id;
		g->off = r.mmap_offset;
		g->size = r.mmap_size;
		g->node = T.fd[idx].nic;
	}
}

static void do_region_free(const struct call *c)
{
	int k = pick(c->a[1], T.nregion), idx, fd = ctx_fd(c->a[0], &idx);
	struct clanq_ioc_region_free f = {
		.id = k >= 0 ? T.region[k].id : raw32(c->a[1]),
		.flags = c->a[2] % 8 ? 0 : c->a[2],
	};

	if (k >= 0 && (c->a[0] & 15) != 15 && T.fd[T.region[k].ctx].kind == FD_CTX)
		fd = T.fd[T.region[k].ctx].fd;
	ioctl(fd, CLANQ_IOC_REGION_FREE, &f);
}

static void do_region_export(const struct call *c)
{
	int k = pick(c->a[1], T.nregion), idx, fd = ctx_fd(c->a[0], &idx);
	struct clanq_ioc_region_export e = {
		.id = k >= 0 ? T.region[k].id : raw32(c->a[1]),
		.rights = c->a[2],
		/* mostly a flag it knows, now and then garbage */
		.flags = (c->a[3] & 3) == 3 ? (uint32_t)(c->a[3] >> 2) :
			 (uint32_t)(c->a[3] & CLANQ_EXPORT_FLAGS),
	};

	if ((c->a[3] & 7) == 6)
		e.reserved0 = (uint32_t)(c->a[3] >> 3);
	else if ((c->a[3] & 7) == 4)
		e.reserved = c->a[3] >> 3;
	if (k >= 0 && (c->a[0] & 15) != 15 && T.fd[T.region[k].ctx].kind == FD_CTX)
		fd = T.fd[T.region[k].ctx].fd;
	if (ioctl(fd, CLANQ_IOC_REGION_EXPORT, &e) == 0 && k >= 0)
		T.region[k].key = e.key;
}

static void do_ap_import(const struct call *c)
{
	int k = pick(c->a[1], T.nregion), idx, fd = ctx_fd(c->a[0], &idx);
	struct clanq_ioc_ap_import a = {
		.offset = c->a[3], .len = c->a[4], .rights = c->a[5] & 0xffffffff,
		.flags = (c->a[5] >> 32) & 0xffff,
	};

	if (k >= 0) {
		a.region.node = (c->a[2] & 7) == 7 ? raw32(c->a[2]) : T.region[k].node;
		a.region.id = T.region[k].id;
		a.key = (c->a[2] & 24) == 24 ? c->a[2] : T.region[k].key;
	} else {
		a.region.node = raw32(c->a[2]) % 4;
		a.region.id = raw32(c->a[1]);
		a.key = c->a[2];
	}
	a.reserved[c->a[5] >> 48 & 1] = c->a[5] >> 56;
	if (ioctl(fd, CLANQ_IOC_AP_IMPORT, &a) == 0 && idx >= 0) {
		struct rap *p = ADD(T.ap, T.nap);

		p->ctx = idx;
		p->id = a.id;
		p->off = a.mmap_offset;
		p->size = a.mmap_size;
		p->armed_off = a.armed_mmap_offset;
		p->armed_size = a.armed_mmap_size;
	}
}

static void do_ap_close(const struct call *c)
{
	int k = pick(c->a[1], T.nap), idx, fd = ctx_fd(c->a[0], &idx);
	struct clanq_ioc_ap_close a = {
		.id = k >= 0 ? T.ap[k].id : raw32(c->a[1]),
		.flags = c->a[2] % 8 ? 0 : c->a[2],
	};

	if (k >= 0 && (c->a[0] & 15) != 15 && T.fd[T.ap[k].ctx].kind == FD_CTX)
		fd = T.fd[T.ap[k].ctx].fd;
	ioctl(fd, CLANQ_IOC_AP_CLOSE, &a);
}

static void kick(int fd, u32 ep, u64 bad)
{
	struct clanq_ioc_rdma_kick k = { .ep = ep, .flags = bad % 8 ? 0 : bad };

	if (bad % 16 == 1)
		k.reserved[1] = bad;
	ioctl(fd, CLANQ_IOC_RDMA_KICK, &k);
}

static void do_rdma_kick(const struct call *c)
{
	int k = pick(c->a[1], T.nep), idx, fd = ctx_fd(c->a[0], &idx);

	if (k >= 0 && (c->a[0] & 15) != 15 && T.fd[T.ep[k].ctx].kind == FD_CTX)
		fd = T.fd[T.ep[k].ctx].fd;
	kick(fd, ep_id(c->a[1]), c->a[2]);
}

/* Every offset the driver handed out, or a random one. */
static void do_mmap(const struct call *c)
{
	int k, ep = -1, fd = -1, idx, fk;
	u64 off = 0, size = 4096, len;
	int prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED;
	void *a;

	switch (c->a[0] % 5) {
	case 0:	/* an endpoint's segment */
		k = pick(c->a[1], T.nep);
		if (k < 0 || T.fd[T.ep[k].ctx].kind != FD_CTX)
			return;
		fd = T.fd[T.ep[k].ctx].fd;
		off = T.ep[k].off;
		size = T.ep[k].size;
		ep = k;
		break;
	case 1:	/* a region */
		k = pick(c->a[1], T.nregion);
		if (k < 0 || T.fd[T.region[k].ctx].kind != FD_CTX)
			return;
		fd = T.fd[T.region[k].ctx].fd;
		off = T.region[k].off;
		size = T.region[k].size;
		break;
	case 2:	/* an aperture, or its region's armed bitmap */
		k = pick(c->a[1], T.nap);
		if (k < 0 || T.fd[T.ap[k].ctx].kind != FD_CTX)
			return;
		fd = T.fd[T.ap[k].ctx].fd;
		off = T.ap[k].off;
		size = T.ap[k].size;
		if (c->a[4] & 1 && T.ap[k].armed_size) {
			off = T.ap[k].armed_off;
			size = T.ap[k].armed_size;
		}
		break;
	case 3:	/* an evq */
		fd = evq_fd(c->a[1], &fk);
		if (fk < 0)
			return;
		size = T.fd[fk].evq_size;
		break;
	default: /* random offset on some fd */
		fd = ctx_fd(c->a[1], &idx);
		off = (c->a[4] & ~0xfffull) % (1ull << 44);
		if (one_in(2))
			off = (u64)rn(64) << (12 + rn(24));
		break;
	}
	switch (c->a[2] % 8) {
	case 0: case 1: case 2: case 3:
		len = size;
		break;
	case 4:
		len = size + 4096;
		break;
	case 5:
		len = size > 4096 ? size - 4096 : 8192;
		break;
	case 6:
		len = 4096;
		off += 4096;
		break;
	default:
		len = 1 + rn(1 << 20);
		break;
	}
	if (!len || len > (64ull << 20))
		len = 4096;
	switch (c->a[3] % 16) {
	case 12:
		flags = MAP_PRIVATE;
		break;
	case 13:
		prot = PROT_READ;
		break;
	case 14:
		prot = PROT_WRITE | PROT_EXEC;
		break;
	case 15:
		flags = MAP_SHARED | MAP_POPULATE;
		break;
	}
	a = mmap(NULL, len, prot, flags, fd, off);
	if (a != MAP_FAILED)
		add_map(a, len, prot & PROT_WRITE && flags & MAP_SHARED && len >= size ? ep : -1);
}

static void do_munmap(const struct call *c)
{
	int k = pick(c->a[0], T.nmap);

	if (k < 0)
		return;
	if (c->a[1] % 4 == 0 && T.map[k].len > 4096) {
		/* a partial unmap: the tail page */
		munmap(T.map[k].addr + ((T.map[k].len - 1) & ~4095ul), 4096);
		T.map[k].len = (T.map[k].len - 1) & ~4095ul;
		return;
	}
	munmap(T.map[k].addr, T.map[k].len);
	forget_map(k);
}

static void do_mremap(const struct call *c)
{
	int k = pick(c->a[0], T.nmap);
	size_t nlen;
	void *a;

	if (k < 0)
		return;
	nlen = c->a[1] % 3 == 0 ? T.map[k].len * 2 :
	       c->a[1] % 3 == 1 ? 4096 : T.map[k].len + 4096;
	a = mremap(T.map[k].addr, T.map[k].len, nlen, (c->a[1] >> 8) % 2 ? MREMAP_MAYMOVE : 0);
	if (a != MAP_FAILED) {	/* no longer trusted as an endpoint's segment */
		forget_map(k);
		add_map(a, nlen, -1);
	}
}

static void do_mprotect(const struct call *c)
{
	int k = pick(c->a[0], T.nmap);
	static const int prots[] = { PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE,
				     PROT_WRITE, PROT_READ | PROT_EXEC };

	if (k >= 0)
		mprotect(T.map[k].addr, T.map[k].len, prots[c->a[1] % 5]);
}

/* Touch every page of a mapping: faults, SIGBUS after a revocation. */
static void do_touch(const struct call *c)
{
	int k = pick(c->a[0], T.nmap);
	volatile char *p;
	size_t i;

	if (k < 0)
		return;
	p = (volatile char *)T.map[k].addr;
	for (i = 0; i < T.map[k].len; i += 4096) {
		if (c->a[1] & 1)
			p[i] = (char)c->a[2];
		else
			(void)p[i];
	}
}

/* Random values on the words of a shared segment: indices, bitmaps. */
static void do_scribble(const struct call *c)
{
	int k = pick(c->a[0], T.nmap), e;
	u32 *w, off;
	size_t nw;

	if (k < 0)
		return;
	w = (u32 *)T.map[k].addr;
	nw = T.map[k].len / 4;
	off = (c->a[1] >> 4) % nw;
	e = T.map[k].ep;
	if (e >= 0 && c->a[3] != 3) {
		const struct clanq_ioc_ep_create *i = &T.ep[e].info;
		const u32 known[] = {
			i->oob.prod, i->oob.cons, i->rq.prod, i->rq.cons,
			i->cq.prod, i->cq.cons, i->need_wakeup, i->counters,
			i->rq.slots, i->oob.slots, i->cq.slots, i->tw_fired,
		};

		off = known[(c->a[1] >> 4) % 12] / 4 % nw;
	}
	if (c->a[3] == 2) {	/* every word of the segment */
		size_t j;

		for (j = 0; j < nw; j++)
			w[j] = rnd();
		return;
	}
	__atomic_store_n(&w[off], (u32)c->a[2], __ATOMIC_RELEASE);
}

static struct rep *mapped_ep(u64 sel)
{
	int k = pick(sel, T.nep), i;

	if (k < 0 || T.ep[k].map)
		return k < 0 ? NULL : &T.ep[k];
	for (i = 0; i < T.nep; i++)
		if (T.ep[i].map)
			return &T.ep[i];
	return NULL;
}

/* Post one RDMA request into a mapped request queue, maybe kick. */
static void do_rdma_post(const struct call *c)
{
	struct rep *r = mapped_ep(c->a[0]);
	const struct clanq_queue_off *q;
	struct clanq_rdma_req req;
	u32 *nw, prod;
	int k;

	if (!r || !r->map)
		return;
	q = &r->info.rq;
	if (q->nr_slots < 2 || q->slot_size < sizeof(req) || (q->nr_slots & (q->nr_slots - 1)) ||
	    (u64)q->slots + (u64)q->nr_slots * q->slot_size > r->size || q->prod + 4 > r->size)
		return;
	memset(&req, 0, sizeof(req));
	k = pick(c->a[1], T.nregion);
	req.src_region = k >= 0 ? T.region[k].id : raw32(c->a[1]);
	k = pick(c->a[1] >> 20, T.nap);
	req.dst_ap = k >= 0 ? T.ap[k].id : raw32(c->a[1] >> 20);
	req.src_off = c->a[2];
	req.dst_off = c->a[3];
	req.len = c->a[4];
	req.cookie = c->a[1];
	req.flags = (c->a[5] & 0x100) ? (u32)(c->a[5] >> 32) : c->a[5] & CLANQ_RDMA_FLAGS;
	/* bits 6-7: the op; an atomic is mostly well formed, to get deep */
	req.op = c->a[5] >> 6 & 3;
	if (req.op == CLANQ_RDMA_OP_CAS || req.op == CLANQ_RDMA_OP_FADD) {
		req.operand[0] = c->a[2] ^ c->a[3];
		if (req.op == CLANQ_RDMA_OP_CAS)
			req.operand[1] = c->a[4];
		if (!(c->a[5] & 0x4000)) {
			req.src_region = 0;
			req.src_off = 0;
			req.len = CLANQ_RDMA_ATOMIC_LEN;
			req.dst_off &= ~7ull;
		}
	}
	if ((c->a[5] & 0xe00) == 0xe00)
		req.op = c->a[5] >> 40;
	if ((c->a[5] & 0x3000) == 0x3000)
		req.operand[1] = c->a[5];
	prod = r->rq_prod & (q->nr_slots - 1);
	memcpy(r->map + q->slots + (u64)prod * q->slot_size, &req, sizeof(req));
	r->rq_prod = (prod + 1) & (q->nr_slots - 1);
	__atomic_store_n((u32 *)(r->map + q->prod), r->rq_prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	nw = (u32 *)(r->map + (r->info.need_wakeup < r->size - 3 ? r->info.need_wakeup : 0));
	switch (c->a[5] >> 4 & 3) {
	case 0:	/* what the library does */
		if (!__atomic_load_n(nw, __ATOMIC_ACQUIRE))
			break;
		/* fall through */
	case 1:
		if (T.fd[r->ctx].kind == FD_CTX)
			kick(T.fd[r->ctx].fd, r->id, 8);
		break;
	default: /* never kick */
		break;
	}
}

/* Consume what the driver produced: OOB messages, completions, events. */
static void do_consume(const struct call *c)
{
	struct rep *r = mapped_ep(c->a[0]);
	const struct clanq_queue_off *q;
	u32 prod;

	if (!r || !r->map)
		return;
	q = c->a[1] & 1 ? &r->info.cq : &r->info.oob;
	if (q->prod + 4 > r->size || q->cons + 4 > r->size || !q->nr_slots)
		return;
	prod = __atomic_load_n((u32 *)(r->map + q->prod), __ATOMIC_ACQUIRE);
	if (c->a[1] & 2)
		prod = c->a[2];	/* a consumer index of its own choosing */
	__atomic_store_n((u32 *)(r->map + q->cons), prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (c->a[1] & 4 && T.fd[r->ctx].kind == FD_CTX)
		kick(T.fd[r->ctx].fd, r->id, 8);
}

static void do_fork(const struct call *c, const struct prog *p, int idx)
{
	pid_t pid;
	int i, n = c->a[1] % 6;

	if (T.nkids >= 8)
		return;
	pid = fork();
	if (pid == 0) {
		cpu_set_t all;

		/* free to race its parent from the other CPU */
		CPU_ZERO(&all);
		for (i = 0; i < CPU_SETSIZE; i++)
			CPU_SET(i, &all);
		sched_setaffinity(0, sizeof(all), &all);
		/* a fault ends it: never the executor's jump back */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		alarm(2);
		for (i = idx + 1; i < p->n && i <= idx + n; i++)
			if (p->c[i].op != OP_FORK)
				run_call(&p->c[i], p, i);
		_exit(0);
	}
	if (pid < 0)
		return;
	if (c->a[2] % 4 == 0) {	/* killed mid-call */
		usleep(rn(500));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	} else {
		T.kids[T.nkids++] = pid;
	}
}

static void do_poll(const struct call *c)
{
	struct pollfd pf[2];
	int k = pick(c->a[0], T.nfd), j = pick(c->a[1], T.nfd);

	if (k < 0 || j < 0)
		return;
	pf[0].fd = T.fd[k].fd;
	pf[0].events = POLLIN | POLLOUT | POLLPRI;
	pf[1].fd = T.fd[j].fd;
	pf[1].events = POLLIN;
	poll(pf, 2, c->a[2] % 3);
}

static void do_raw_ioctl(const struct call *c)
{
	int k = pick(c->a[0], T.nfd);
	unsigned long buf[32];
	unsigned cmd;
	size_t i;

	for (i = 0; i < 32; i++)
		buf[i] = (c->a[2] >> (i % 8)) & 1 ? special() : 0;
	if (k < 0)
		return;
	switch (c->a[1] % 4) {
	case 0:	/* our magic, any nr, any size and direction */
		cmd = _IOC(c->a[1] >> 2 & 3, CLANQ_IOC_MAGIC, c->a[1] >> 4 & 0x1f,
			   c->a[1] >> 16 & 0xff);
		break;
	case 1:	/* a real command with a bad direction */
		cmd = _IOC(c->a[1] >> 2 & 3, CLANQ_IOC_MAGIC, c->a[1] >> 4 & 0x1f,
			   sizeof(struct clanq_ioc_ap_import));
		break;
	default:
		cmd = c->a[1] >> 2;
		break;
	}
	if (c->a[2] % 16 == 0)
		ioctl(T.fd[k].fd, cmd, (void *)(uintptr_t)special());
	else
		ioctl(T.fd[k].fd, cmd, buf);
}

static void do_dup(const struct call *c)
{
	int k = pick(c->a[0], T.nfd), fd;

	if (k < 0 || T.nfd >= NRES)
		return;
	fd = dup(T.fd[k].fd);
	if (fd < 0)
		return;
	T.fd[T.nfd] = T.fd[k];
	T.fd[T.nfd++].fd = fd;
}

static void do_rw(const struct call *c)
{
	int k = pick(c->a[0], T.nfd);
	char buf[64] = { 0 };

	if (k < 0)
		return;
	if (c->a[1] & 1)
		(void)!write(T.fd[k].fd, buf, c->a[2] % 65);
	else
		(void)!read(T.fd[k].fd, buf, c->a[2] % 65);
	if (c->a[1] & 2)
		lseek(T.fd[k].fd, c->a[3], SEEK_SET);
}

/* ---- tripwires ---- */

static void do_tw_create(const struct call *c)
{
	int e = pick(c->a[1], T.nep), r = pick(c->a[2], T.nregion);
	int idx, fd = ctx_fd(c->a[0], &idx);
	struct clanq_ioc_tw_create t = {
		.ep = e >= 0 ? T.ep[e].id : raw32(c->a[1]),
		.region = r >= 0 ? T.region[r].id : raw32(c->a[2]),
		.off = c->a[3], .len = c->a[4], .flags = c->a[5] & 0xffffffff,
	};

	t.reserved0 = c->a[5] >> 32 & 0xff;
	/* the endpoint's own context, mostly: that is where it is valid */
	if (e >= 0 && (c->a[0] & 15) != 15 && T.fd[T.ep[e].ctx].kind == FD_CTX) {
		idx = T.ep[e].ctx;
		fd = T.fd[idx].fd;
	}
	if (ioctl(fd, CLANQ_IOC_TW_CREATE, &t) == 0 && idx >= 0) {
		struct rtw *w = ADD(T.tw, T.ntw);

		w->ctx = idx;
		w->id = t.id;
		w->off = t.off;
	}
}

static int tw_fd(u64 sel, int *k)
{
	int idx;

	*k = pick(sel, T.ntw);
	if (*k >= 0 && (sel & 15) != 15 && T.fd[T.tw[*k].ctx].kind == FD_CTX)
		return T.fd[T.tw[*k].ctx].fd;
	return ctx_fd(sel, &idx);
}

static void do_tw_ctl(const struct call *c)
{
	static const unsigned long cmd[] = {
		CLANQ_IOC_TW_ARM, CLANQ_IOC_TW_DISARM, CLANQ_IOC_TW_DESTROY,
	};
	int k, fd = tw_fd(c->a[1] >> 8, &k);
	struct clanq_ioc_tw_ctl t = {
		.id = k >= 0 ? T.tw[k].id : raw32(c->a[1] >> 8),
		.flags = c->a[2] % 8 ? 0 : c->a[2],
	};

	if (c->a[2] % 16 == 1)
		t.reserved[0] = c->a[2];
	ioctl(fd, cmd[c->a[1] % 3], &t);
}

/* Bounded: the timeout is at most 2 ms, and a write may fire it first. */
static void do_tw_wait(const struct call *c)
{
	int k, fd = tw_fd(c->a[1], &k);
	struct clanq_ioc_tw_wait w = {
		.id = k >= 0 ? T.tw[k].id : raw32(c->a[1]),
		.off = k >= 0 && one_in(2) ? T.tw[k].off : c->a[2],
		.old = c->a[3], .timeout_ns = c->a[4] % 2000000,
		.flags = c->a[5] % 8 ? 0 : c->a[5],
	};

	if (c->a[5] % 16 == 1)
		w.reserved[1] = c->a[5];
	ioctl(fd, CLANQ_IOC_TW_WAIT, &w);
}

static void do_ap_flush(const struct call *c)
{
	int k = pick(c->a[1], T.nap), idx, fd = ctx_fd(c->a[0], &idx);
	struct clanq_ioc_ap_flush f = {
		.ap = k >= 0 ? T.ap[k].id : raw32(c->a[1]),
		.off = c->a[2], .len = c->a[3],
		.flags = c->a[4] % 8 ? 0 : c->a[4],
	};

	if (c->a[4] % 16 == 1)
		f.reserved0 = c->a[4];
	if (k >= 0 && (c->a[0] & 15) != 15 && T.fd[T.ap[k].ctx].kind == FD_CTX)
		fd = T.fd[T.ap[k].ctx].fd;
	ioctl(fd, CLANQ_IOC_AP_FLUSH, &f);
}

static void run_call(const struct call *c, const struct prog *p, int idx)
{
	switch (c->op) {
	case OP_OPEN: do_open(c); break;
	case OP_CLOSE: do_close(c); break;
	case OP_QUERY: do_query(c); break;
	case OP_LAST_ERROR: do_last_error(c); break;
	case OP_EP_CREATE: do_ep_create(c); break;
	case OP_EP_DESTROY: do_ep_destroy(c); break;
	case OP_OOB_SEND: do_oob_send(c); break;
	case OP_EVQ_CREATE: do_evq_create(c); break;
	case OP_EVQ_REG: do_evq_reg(c, 1); break;
	case OP_EVQ_UNREG: do_evq_reg(c, 0); break;
	case OP_EVQ_WAIT: do_evq_wait(c); break;
	case OP_REGION_CREATE: do_region_create(c); break;
	case OP_REGION_FREE: do_region_free(c); break;
	case OP_REGION_EXPORT: do_region_export(c); break;
	case OP_AP_IMPORT: do_ap_import(c); break;
	case OP_AP_CLOSE: do_ap_close(c); break;
	case OP_RDMA_KICK: do_rdma_kick(c); break;
	case OP_MMAP: do_mmap(c); break;
	case OP_MUNMAP: do_munmap(c); break;
	case OP_MREMAP: do_mremap(c); break;
	case OP_MPROTECT: do_mprotect(c); break;
	case OP_SCRIBBLE: do_scribble(c); break;
	case OP_RDMA_POST: do_rdma_post(c); break;
	case OP_CONSUME: do_consume(c); break;
	case OP_FORK: do_fork(c, p, idx); break;
	case OP_POLL: do_poll(c); break;
	case OP_RAW_IOCTL: do_raw_ioctl(c); break;
	case OP_DUP: do_dup(c); break;
	case OP_RW: do_rw(c); break;
	case OP_TOUCH: do_touch(c); break;
	case OP_TW_CREATE: do_tw_create(c); break;
	case OP_TW_CTL: do_tw_ctl(c); break;
	case OP_TW_WAIT: do_tw_wait(c); break;
	case OP_AP_FLUSH: do_ap_flush(c); break;
	default: break;
	}
}

/* ---- coverage ------------------------------------------------------------- */

static int kcov_fd = -1;
static unsigned long *cover;
static u64 text_lo, text_hi;
static uint8_t *edge_map, *pc_map;
static u64 nedges, npcs;

static u64 read_hex_file(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%llx", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* clanq.ko's text: [lowest .text* section, + module size). */
static void find_text(void)
{
	const char *secs[] = { ".text", ".text.unlikely", ".text.hot", ".noinstr.text" };
	char line[256], name[64];
	unsigned long long size, addr;
	size_t i;
	FILE *f;

	for (i = 0; i < sizeof(secs) / sizeof(secs[0]); i++) {
		snprintf(line, sizeof(line), "/sys/module/clanq/sections/%s", secs[i]);
		addr = read_hex_file(line);
		if (addr && (!text_lo || addr < text_lo))
			text_lo = addr;
	}
	f = fopen("/proc/modules", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %llu", name, &size) == 2 && !strcmp(name, "clanq"))
			text_hi = text_lo + size;
	}
	if (f)
		fclose(f);
	if (!text_lo || !text_hi) {
		fprintf(stderr, "clanq-fuzz: clanq.ko's text not found: counting every PC\n");
		text_lo = 0;
		text_hi = ~0ull;
	}
}

static void kcov_setup(void)
{
	kcov_fd = open("/sys/kernel/debug/kcov", O_RDWR);
	if (kcov_fd < 0) {
		fprintf(stderr, "clanq-fuzz: no /sys/kernel/debug/kcov (%s): blind fuzzing\n",
			strerror(errno));
		return;
	}
	if (ioctl(kcov_fd, KCOV_INIT_TRACE, COVER_WORDS)) {
		perror("clanq-fuzz: KCOV_INIT_TRACE");
		exit(2);
	}
	cover = mmap(NULL, COVER_WORDS * sizeof(unsigned long), PROT_READ | PROT_WRITE,
		     MAP_SHARED, kcov_fd, 0);
	if (cover == MAP_FAILED) {
		perror("clanq-fuzz: mmap kcov");
		exit(2);
	}
}

static u64 hash64(u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* New edges seen in the last run. */
static int collect(void)
{
	u64 n, i, prev = 0, pc;
	int fresh = 0;

	if (!cover)
		return 0;
	n = __atomic_load_n(&cover[0], __ATOMIC_RELAXED);
	if (n > COVER_WORDS - 1)
		n = COVER_WORDS - 1;
	for (i = 0; i < n; i++) {
		u64 h, off;

		pc = cover[i + 1];
		if (pc < text_lo || pc >= text_hi)
			continue;
		off = pc - text_lo;
		if (pc_map && off < text_hi - text_lo && !pc_map[off]) {
			pc_map[off] = 1;
			npcs++;
		}
		h = hash64(prev * 31 + pc) & (EDGE_MAP - 1);
		if (!edge_map[h]) {
			edge_map[h] = 1;
			nedges++;
			fresh++;
		}
		prev = pc;
	}
	return fresh;
}

/* ---- the executor --------------------------------------------------------- */

/*
 * Forking a process per program costs ~100-200 ms in the debug VM under
 * TCG, more than the program. So one forked executor runs program after
 * program (up to EXECUTOR_RUNS, then a fresh one), each from a clean
 * table: what a program opened or mapped is closed and unmapped after
 * it, in the executor, with KCOV on (the release paths are covered too).
 * A program that kills the executor (SIGBUS on a revoked mapping, the
 * watchdog's SIGALRM) costs one fork. The parent hands a program over in
 * shared memory, rings a pipe, and waits for the answer with a deadline.
 */
#define EXECUTOR_RUNS	500
#define FD_KCOV		3	/* the executor's own fds; the rest is the program's */
#define FD_GO		4
#define FD_DONE		5
#define FD_FIRST_FREE	6

static struct prog *shared_prog;	/* MAP_SHARED: parent -> executor */
static pid_t executor = -1;
static int go_fd = -1, done_fd = -1;
static int executor_runs;

static void cleanup_prog(void)
{
	int i;

	for (i = 0; i < T.nkids; i++) {
		if (i % 2)
			kill(T.kids[i], SIGKILL);
		waitpid(T.kids[i], NULL, 0);
	}
	for (i = T.nmap - 1; i >= 0; i--)
		munmap(T.map[i].addr, T.map[i].len);
	/* every fd a program made, also those the table lost track of */
	close_range(FD_FIRST_FREE, ~0u, 0);
	/* the last fput runs as task work on the way back: one more entry */
	getppid();
}

/*
 * A fault on a mapping the program touched (SIGBUS after a revocation or
 * past the object, SIGSEGV after mprotect/munmap) ends the program, not
 * the executor: the handler jumps to the clean-up.
 */
static sigjmp_buf fault_jmp;

static void on_fault(int sig)
{
	siglongjmp(fault_jmp, sig);
}

static void executor_main(void)
{
	struct sigaction sa = { .sa_handler = on_fault };
	char *anon;
	char b;

	signal(SIGALRM, SIG_DFL);	/* the watchdog kills */
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);

	/* the grandchildren of OP_FORK get no KCOV: it follows one task */
	anon = mmap(NULL, 64 * 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED)
		_exit(3);
	if (kcov_fd >= 0 && ioctl(FD_KCOV, KCOV_ENABLE, KCOV_TRACE_PC))
		_exit(4);
	while (read(FD_GO, &b, 1) == 1) {
		rng_state = hash64(b + (u64)shared_prog->n * 977 + executor_runs) | 1;
		alarm(CHILD_ALARM);
		memset(&T, 0, sizeof(T));
		T.anon = anon;
		if (cover)
			__atomic_store_n(&cover[0], 0, __ATOMIC_RELAXED);
		if (sigsetjmp(fault_jmp, 1) == 0)
			for (int i = 0; i < shared_prog->n && i < MAX_CALLS; i++)
				run_call(&shared_prog->c[i], shared_prog, i);
		cleanup_prog();
		alarm(0);
		if (write(FD_DONE, &b, 1) != 1)
			_exit(5);
	}
	_exit(0);
}

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

static u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static u64 execs, crashes;

/* Reap the executor, SIGKILLing it first if asked; never waits forever. */
static void executor_stop(int sig)
{
	struct itimerval it = { .it_value = { .tv_sec = CHILD_DEADLINE_MS / 1000 } };
	int status, killed = 0;

	if (executor < 0)
		return;
	close(go_fd);
	close(done_fd);
	if (sig)
		kill(executor, sig);
	alarmed = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	while (waitpid(executor, &status, 0) != executor) {
		if (errno != EINTR) {
			perror("clanq-fuzz: waitpid");
			exit(2);
		}
		if (alarmed) {
			alarmed = 0;
			if (killed++) {
				fprintf(stderr, "clanq-fuzz: executor %d stuck in the kernel for %d s\n",
					executor, 2 * CHILD_DEADLINE_MS / 1000);
				exit(2);
			}
			kill(executor, SIGKILL);
			setitimer(ITIMER_REAL, &it, NULL);
		}
	}
	it.it_value.tv_sec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	executor = -1;
}

static void executor_start(void)
{
	int go[2], done[2];

	if (pipe(go) || pipe(done)) {
		perror("clanq-fuzz: pipe");
		exit(2);
	}
	executor = fork();
	if (executor < 0) {
		perror("clanq-fuzz: fork");
		exit(2);
	}
	if (executor == 0) {
		/* its own fds at fixed numbers below FD_FIRST_FREE */
		int kc = kcov_fd >= 0 ? dup(kcov_fd) : -1, g = dup(go[0]), d = dup(done[1]);

		if (g < 0 || d < 0 || (kcov_fd >= 0 && kc < 0) ||
		    dup2(g, FD_GO) < 0 || dup2(d, FD_DONE) < 0 ||
		    (kc >= 0 && dup2(kc, FD_KCOV) < 0))
			_exit(6);
		close_range(FD_FIRST_FREE, ~0u, 0);
		if (kc < 0)
			close(FD_KCOV);
		executor_main();
	}
	close(go[0]);
	close(done[1]);
	go_fd = go[1];
	done_fd = done[0];
	executor_runs = 0;
}

/* Run @p in the executor; returns the number of new edges. */
static int execute(const struct prog *p)
{
	struct pollfd pf;
	char b = (char)rnd();
	int r;

	if (executor < 0)
		executor_start();
	*shared_prog = *p;
	if (cover)
		__atomic_store_n(&cover[0], 0, __ATOMIC_RELAXED);
	if (write(go_fd, &b, 1) != 1) {
		executor_stop(SIGKILL);
		crashes++;
		return 0;
	}
	pf.fd = done_fd;
	pf.events = POLLIN;
	do
		r = poll(&pf, 1, CHILD_DEADLINE_MS);
	while (r < 0 && errno == EINTR);
	execs++;
	if (r == 1 && read(done_fd, &b, 1) == 1) {
		if (++executor_runs >= EXECUTOR_RUNS)
			executor_stop(0);
	} else {
		/* dead (a signal, the watchdog) or past the deadline */
		executor_stop(SIGKILL);
		crashes++;
	}
	return collect();
}

static void add_corpus(const struct prog *p)
{
	struct prog *q;

	if (ncorpus >= MAX_CORPUS)
		return;
	q = malloc(sizeof(*q));
	if (!q) {
		perror("clanq-fuzz: malloc");
		exit(2);
	}
	*q = *p;
	corpus[ncorpus++] = q;
}

static void load_corpus(const char *path)
{
	size_t cap = 0;
	char *line = NULL;
	ssize_t len;
	int bad = 0, n = 0, kept = 0;
	struct prog p;
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	len = getline(&line, &cap, f);
	if (len < 0 || strncmp(line, CORPUS_MAGIC, strlen(CORPUS_MAGIC))) {
		fprintf(stderr, "clanq-fuzz: %s: not a version-1 corpus, ignored\n", path);
		fclose(f);
		free(line);
		return;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		if (hex_in(line, len, &p)) {
			bad++;
			continue;
		}
		n++;
		if (execute(&p) > 0) {
			add_corpus(&p);
			kept++;
		}
	}
	free(line);
	fclose(f);
	printf("fuzz: corpus %s: %d programs, %d kept, %d bad lines skipped\n",
	       path, n, kept, bad);
}

/* -b: what one execution costs, by the calls it makes (ms per program). */
static void bench(void)
{
	static const uint8_t shapes[][4] = {
		{ 0 }, { 1, OP_QUERY }, { 1, OP_OPEN }, { 2, OP_OPEN, OP_EP_CREATE },
		{ 3, OP_OPEN, OP_EP_CREATE, OP_MMAP }, { 2, OP_OPEN, OP_EVQ_CREATE },
		{ 3, OP_OPEN, OP_QUERY, OP_QUERY },
	};
	size_t i;
	int k, j;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		struct prog p = { .n = shapes[i][0] };
		u64 t = now_ms();

		for (j = 0; j < p.n; j++) {
			memset(&p.c[j], 0, sizeof(p.c[j]));
			p.c[j].op = shapes[i][1 + j];
		}
		for (k = 0; k < 50; k++)
			execute(&p);
		printf("fuzz: bench: %d calls (%s...): %.1f ms per program\n", p.n,
		       p.n ? op_name[p.c[p.n - 1].op] : "-", (now_ms() - t) / 50.0);
	}
}

static void report(u64 t0)
{
	u64 ms = now_ms() - t0;

	printf("fuzz: %llu execs, %llu execs/s, corpus %d, driver edges %llu, driver pcs %llu, %llu executor restarts\n",
	       (unsigned long long)execs,
	       (unsigned long long)(ms ? execs * 1000 / ms : 0), ncorpus,
	       (unsigned long long)nedges, (unsigned long long)npcs,
	       (unsigned long long)crashes);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	u64 seconds = 60, seed = 0, t0, last, end;
	const char *corpus_path = NULL;
	struct clanq_ioc_query q = { 0 };
	struct sigaction sa;
	int opt, fd, verbose = 0, i;
	char *hex;

	while ((opt = getopt(argc, argv, "t:c:s:v")) != -1) {
		switch (opt) {
		case 't': seconds = strtoull(optarg, NULL, 0); break;
		case 'c': corpus_path = optarg; break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'v': verbose = 1; break;
		default:
			fprintf(stderr, "usage: clanq-fuzz [-t seconds] [-c corpus] [-s seed] [-v]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!seed)
		seed = now_ms() ^ ((u64)getpid() << 32);
	rng_state = hash64(seed) | 1;
	printf("fuzz: seed %llu, %llu s\n", (unsigned long long)seed, (unsigned long long)seconds);

	fd = open(CLANQ_DEV_PREFIX "0", O_RDWR);
	if (fd < 0 || ioctl(fd, CLANQ_IOC_QUERY, &q)) {
		fprintf(stderr, "clanq-fuzz: /dev/clanq0: %s\n", strerror(errno));
		return 2;
	}
	close(fd);
	nr_nics = q.nr_nics;

	/*
	 * Parent and executor on one CPU: each hands over to the other and
	 * sleeps, and a same-CPU wake-up is immediate, where waking a task
	 * on the other (idle) vCPU can wait for its next tick (4 ms).
	 */
	if (!getenv("CLANQ_FUZZ_NOPIN")) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
		sched_setaffinity(0, sizeof(one), &one);
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;	/* no SA_RESTART: interrupts waitpid */
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	edge_map = calloc(EDGE_MAP, 1);
	shared_prog = mmap(NULL, sizeof(*shared_prog), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!edge_map || shared_prog == MAP_FAILED)
		return 2;
	kcov_setup();
	find_text();
	if (text_hi - text_lo < (256u << 20))
		pc_map = calloc(text_hi - text_lo, 1);
	printf("fuzz: kcov %s, clanq.ko text %#llx-%#llx, %d NICs\n",
	       cover ? "on" : "off", (unsigned long long)text_lo,
	       (unsigned long long)text_hi, nr_nics);

	if (getenv("CLANQ_FUZZ_BENCH"))
		bench();
	t0 = last = now_ms();
	if (corpus_path)
		load_corpus(corpus_path);
	end = t0 + seconds * 1000;
	while (now_ms() < end) {
		struct prog p;

		if (ncorpus && !one_in(5)) {
			p = *corpus[rn(ncorpus)];
			mutate(&p);
		} else {
			gen_prog(&p);
		}
		if (execute(&p) > 0) {
			add_corpus(&p);
			if (verbose) {
				printf("fuzz: new:");
				for (i = 0; i < p.n; i++)
					printf(" %s", op_name[p.c[i].op]);
				printf("\n");
			}
		}
		if (now_ms() - last >= 5000) {
			last = now_ms();
			report(t0);
		}
	}
	executor_stop(0);
	report(t0);
	hex = malloc(MAX_CALLS * REC_SIZE * 2 + 1);
	if (!hex)
		return 2;
	for (i = 0; i < ncorpus; i++) {
		hex_out(corpus[i], hex);
		printf("CLANQ-CORPUS %s\n", hex);
	}
	printf("CLANQ-CORPUS-END %d\n", ncorpus);
	free(hex);
	return 0;
}
