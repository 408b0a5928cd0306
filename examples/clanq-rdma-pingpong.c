// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-rdma-pingpong: RDMA writes between two clanq nodes, on one host
 * (the loop wire) or between hosts (the verbs wire), measured the way
 * perftest's ib_write_lat and ib_write_bw measure raw verbs.
 *
 *   clanq-rdma-pingpong server [--nic N] [--ep ID] [--region BYTES] [--seconds S]
 *   clanq-rdma-pingpong client --node N [--lat SIZES] [--bw SIZES] [options]
 *
 * Both sides export a region the other writes into; they learn each
 * other's (region id, key, length) by OOB messages: the client's hello,
 * sent again every 250 ms until the server answers (for up to --wait
 * seconds), carries its region, the answer the server's, and each side
 * imports the other's with CLANQ_RIGHT_WRITE. No aperture is mapped:
 * every byte goes through the RDMA engine, as it must across hosts.
 *
 * lat  (ib_write_lat): for each size, --count timed round trips after a
 *      tenth as many untimed. The client writes SIZE bytes into the
 *      server's region; the server sees the last 8-byte word change (in
 *      its own mapped region), checks every byte and writes SIZE bytes
 *      back into the client's region; the client sees its last word
 *      change and checks every byte. The last word is a tag (run, round
 *      trip, direction): a write of an earlier run or round trip never
 *      matches. The way both sides wait is --mode: "block" spins
 *      --spin-us, then sleeps in the driver on a tripwire over the
 *      words (clanq_tw_wait_change_oob(): a remote write fires it);
 *      "poll" spins on the word and never sleeps, as perftest does.
 *      With one CPU online the spin defaults to 0: what it waits for
 *      needs that CPU (a software RDMA device's kernel work, the write
 *      just posted among it), so spinning only delays it (measured over
 *      rxe in two one-CPU VMs: 557 us a round trip against 652-750 us
 *      with 20 us of spin; docs/decisions.md, the verbs wire).
 *      Every write is signalled; a write's source slot (one of four) is
 *      written again only after its completion came back. The round
 *      trip's min/median/avg/p99/max in microseconds, and the driver
 *      entries (system calls) of the client per round trip.
 * bw   (ib_write_bw): for each size and each count of endpoints in
 *      --eps, --bytes of writes of SIZE bytes from the client into the
 *      server's region, each endpoint keeping --depth of them queued
 *      (every one signalled, LAST: its own message). The engine has one
 *      chunk of at most rdma_max_xfer bytes in flight per endpoint on a
 *      remote wire, so endpoints in parallel are what keeps the link
 *      busy. Endpoint e writes slot e of the server's region (slots of
 *      SIZE bytes, shared round the region if there are fewer than
 *      endpoints). The clock runs from the first post to the last
 *      completion; then the server checksums the slots in its own
 *      memory and the client compares (a fresh pattern each point).
 *      MB/s (10^6 bytes) and MiB/s.
 *
 * One-sided (the server's CPU is not involved; like ib_read_lat,
 * ib_read_bw, ib_atomic_lat and ib_atomic_bw):
 * read  --read-lat SIZES: READs of SIZE bytes from the server's region
 *      into ours, one at a time, each timed from post to completion
 *      (polled), --count of them after a tenth as many untimed.
 * fadd  --atomic-lat: fetch-and-adds of 1 on a word of the server's
 *      region, one at a time, timed so; each returns the value before
 *      it, which must be the previous one's plus 1.
 * readbw --read-bw SIZES: READs of SIZE bytes on each of --eps endpoints,
 *      --depth queued each, --bytes in all (or --seconds), polled.
 * faddbw --atomic-bw: fetch-and-adds so, --count per endpoint; the word
 *      must end exactly that much higher.
 * The server exports its region with both rights; the client imports
 * it once more with CLANQ_AP_ATOMIC for these (without it where the
 * wire has no atomics, siw: the atomic rows then say so and are left
 * out).
 *
 * The server leaves at the client's bye (or after --seconds: exit 1). A
 * client that fails sends its bye all the same (without waiting for the
 * answer), so a server in a script never waits for a client gone; a
 * server that fails a round trip tells the client (ABORT) and goes on
 * waiting for the bye.
 *
 * Every wait has a bound (--timeout-ms for each word, completion and
 * answer); a missing one is an error, never a hang.
 *
 * Exit status: 0 every check passed; 1 a failure (a wrong or missing
 * write, the driver, the peer); 2 bad arguments.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include <clanq.h>
#include <clanq/admin.h>

#include "example.h"

#define RP_SERVICE	7008u
#define RP_MAGIC	0x52505031u	/* "RPP1" */
/* message types: >= CLANQ_OOB_TYPE_USER (not the library's), no notice bit */
#define RP_HELLO	0x0d000001u
#define RP_LAT		0x0d000002u
#define RP_SUM		0x0d000003u
#define RP_BYE		0x0d000004u
#define RP_ABORT	0x0d000005u	/* server -> client: a round trip failed */
#define RP_REPLY	0x00800000u	/* | the request's type */

#define LAT_MIN		8u
#define LAT_MAX		(64u << 10)	/* a round trip's writes: one chunk */
#define LAT_SLOTS	4u		/* source slots in turn, see above */
#define MAX_SIZES	16u
#define MAX_EPS		64u
#define READ_MAX	(1u << 20)	/* a one-sided READ's size, at most */
#define EP_SLOTS	64u		/* each endpoint's request and completion queue */
#define CTL_COOKIE	(~0ull)		/* the OOB endpoint's registration */
#define MODE_BLOCK	0u
#define MODE_POLL	1u

static const char *const mode_name[] = { "block", "poll" };

static void usage(void)
{
	printf("usage: %s server [options]\n"
	       "       %s client --node N [--lat SIZES] [--bw SIZES] [options]\n"
	       "RDMA writes between two clanq nodes: round trips (like ib_write_lat)\n"
	       "and bandwidth (like ib_write_bw), every byte checked where it landed.\n\n"
	       "  -i, --nic N          use /dev/clanqN (default 0)\n"
	       "  -e, --ep ID          the server's endpoint: a service number,\n"
	       "                       1..65535 (default %u)\n"
	       "  -T, --timeout-ms MS  bound of every wait: a word, a completion, an\n"
	       "                       answer (default 5000)\n"
	       "server:\n"
	       "  -R, --region BYTES   the region clients write into, 64k..256m\n"
	       "                       (default 8m)\n"
	       "  -t, --seconds S      give up after S seconds without a bye\n"
	       "                       (exit status 1; default: wait for it)\n"
	       "client:\n"
	       "  -N, --node N         the server's node id (required)\n"
	       "  -L, --lat SIZES      round trips of writes of these sizes, %u..%u,\n"
	       "                       multiples of 8 (default 32 unless --bw is given)\n"
	       "  -n, --count N        timed round trips per size and mode (default 1000)\n"
	       "  -m, --mode MODES     how both sides wait for a word: block, poll or\n"
	       "                       both, comma-separated (default block)\n"
	       "      --spin-us US     block: spin this long first (default 20; 0 with\n"
	       "                       one CPU online)\n"
	       "  -B, --bw SIZES       bandwidth of writes of these sizes, 8..16m\n"
	       "  -E, --eps LIST       bw: endpoints writing at once, 1..%u, a list\n"
	       "                       (default 4)\n"
	       "  -D, --depth D        bw: writes queued per endpoint, 1..%u (default 4)\n"
	       "  -b, --bytes BYTES    bw: bytes written per size and endpoint count\n"
	       "                       (default 64m)\n"
	       "  -t, --seconds S      bw: or for S seconds, if that is shorter\n"
	       "  -r, --read-lat SIZES one-sided: READ latency, 8..%u bytes\n"
	       "  -a, --atomic-lat     one-sided: fetch-and-add latency\n"
	       "  -G, --read-bw SIZES  one-sided: READ bandwidth (--eps, --depth, --bytes)\n"
	       "  -A, --atomic-bw      one-sided: fetch-and-add rate (--eps, --depth,\n"
	       "                       --count per endpoint)\n"
	       "  -w, --wait S         retry the hello this long while the server is\n"
	       "                       not there yet (default 60)\n"
	       "  -h, --help           this text\n\n"
	       "Exit status: 0 every check passed, 1 failed, 2 bad arguments.\n",
	       ex_prog, ex_prog, RP_SERVICE, LAT_MIN, LAT_MAX, MAX_EPS, EP_SLOTS - 1,
	       READ_MAX);
}

/* ---- the messages' payloads (<= CLANQ_OOB_PAYLOAD bytes) ---- */

struct rp_hello {		/* RP_HELLO, and its answer */
	uint32_t magic;
	int32_t err;		/* answer: 0, or why the import failed */
	uint32_t region;	/* the sender's region, for the other to import */
	uint32_t pad;
	uint64_t key;
	uint64_t len;
};

struct rp_lat {			/* RP_LAT: a latency run follows */
	uint32_t run;		/* the tags' run */
	uint32_t size;
	uint32_t total;		/* round trips, warm-up included */
	uint32_t mode;		/* MODE_* */
	uint64_t spin_ns;
};

struct rp_sum {			/* RP_SUM: checksum [off, off + len) */
	uint32_t seq;
	int32_t err;		/* answer */
	uint64_t off, len;
	uint64_t sum;		/* answer */
};

struct rp_status {		/* RP_LAT's answer, RP_BYE, RP_ABORT */
	int32_t err;
	uint32_t at;		/* ABORT: the round trip */
};

_Static_assert(sizeof(struct rp_hello) <= CLANQ_OOB_PAYLOAD, "hello");
_Static_assert(sizeof(struct rp_lat) <= CLANQ_OOB_PAYLOAD, "lat");
_Static_assert(sizeof(struct rp_sum) <= CLANQ_OOB_PAYLOAD, "sum");

/* ---- one side ---- */

struct rp {
	struct clanq_dev dev;
	struct clanq_ep ep;		/* OOB, and the round trips' writes */
	struct clanq_evq evq;
	struct clanq_region rx;		/* exported: the other side writes here */
	struct clanq_region tx;		/* our writes' source */
	struct clanq_tw tw;		/* on rx's round-trip words */
	uint64_t rx_key;
	struct clanq_ap ap;		/* onto the other side's rx */
	bool have_ap;
	struct clanq_ap ap1;		/* the same, for READs and atomics */
	bool have_ap1, ap1_atomic;
	uint32_t ap_region;		/* the region it is onto */
	uint64_t ap_key;		/* client: its key */
	struct clanq_addr other;	/* its endpoint */
	bool session;			/* client: hello answered, bye owed */
	struct clanq_oob_msg held;	/* taken during a wait, not yet handled */
	bool have_held;
	uint64_t timeout_ns;
	uint64_t notices;
};

static struct rp *cleanup_rp;	/* client: the bye on the way out */

static void rp_send_bye(struct rp *p, int status);

/* A failure: what and why; a client says bye first (not waiting for it). */
static __attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", ex_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (cleanup_rp && cleanup_rp->session) {
		cleanup_rp->session = false;
		rp_send_bye(cleanup_rp, -EIO);
	}
	exit(EX_FAIL);
}

static void check(int err, const char *what)
{
	if (err < 0)
		die("%s: %s", what, strerror(-err));
}

static void rp_open(struct rp *p, unsigned int nic, unsigned int service,
		    unsigned int max_regs)
{
	struct clanq_ep_attr attr = {
		.service = service, .rq_slots = EP_SLOTS, .cq_slots = EP_SLOTS,
		.tw_slots = 64,
	};
	int err;

	ex_open_dev(&p->dev, nic);
	err = clanq_ep_create_attr(&p->dev, &p->ep, &attr);
	if (err)
		ex_fail(err == -EADDRINUSE ? "endpoint: service taken" : "endpoint", err);
	err = clanq_evq_create(&p->dev, &p->evq, max_regs);
	if (err)
		ex_fail("event queue", err);
	err = clanq_evq_register(&p->evq, &p->ep, CLANQ_EV_OOB, CTL_COOKIE);
	if (err < 0)
		ex_fail("event queue registration", err);
}

/* Our two regions: rx exported for writing, with a tripwire on its head. */
static void rp_regions(struct rp *p, size_t rx_bytes, size_t tx_bytes)
{
	uint64_t tw_len = rx_bytes < LAT_MAX ? rx_bytes : LAT_MAX;

	check(clanq_region_alloc(&p->dev, &p->rx, rx_bytes), "allocate the region peers write");
	/* READ too: the client's one-sided runs (and atomics, with both) */
	check(clanq_region_export(&p->rx, CLANQ_RIGHTS_ALL, &p->rx_key), "export it");
	check(clanq_region_alloc(&p->dev, &p->tx, tx_bytes), "allocate the source region");
	check(clanq_tw_create(&p->ep, &p->tw, &p->rx, 0, tw_len, 0), "tripwire on the region");
}

static void rp_close(struct rp *p)
{
	if (p->have_ap)
		clanq_ap_close(&p->ap);
	p->have_ap = false;
	if (p->have_ap1)
		clanq_ap_close(&p->ap1);
	p->have_ap1 = false;
	clanq_tw_destroy(&p->tw);
	clanq_region_free(&p->tx);
	clanq_region_free(&p->rx);
	clanq_evq_destroy(&p->evq);
	clanq_ep_destroy(&p->ep);
	clanq_close(&p->dev);
}

static uint64_t deadline_in(const struct rp *p)
{
	return clanq_now_ns() + p->timeout_ns;
}

/*
 * The next OOB message before deadline: the one held if there is one.
 * 0; -ETIMEDOUT; -EINTR (a signal); -errno of the wait. Events of the
 * bandwidth endpoints that come meanwhile are left for their loop (it
 * drains every completion queue before it waits).
 */
static int rp_recv(struct rp *p, struct clanq_oob_msg *msg, uint64_t deadline)
{
	struct clanq_event ev;
	uint64_t now;
	int err;

	if (p->have_held) {
		*msg = p->held;
		p->have_held = false;
		return 0;
	}
	for (;;) {
		if (clanq_oob_recv(&p->ep, msg) == 0)
			return 0;
		if (ex_stop)
			return -EINTR;
		now = clanq_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		err = clanq_evq_wait(&p->evq, &ev, (int64_t)(deadline - now));
		if (err && err != -ETIMEDOUT && err != -EINTR)
			return err;
	}
}

static int rp_send(struct rp *p, uint32_t type, const void *payload, size_t len)
{
	return clanq_oob_send(&p->ep, p->other, type, payload, len);
}

/* Is msg the answer of type from the other side? Notices are counted. */
static bool is_answer(struct rp *p, const struct clanq_oob_msg *msg, uint32_t type)
{
	if (msg->type & CLANQ_OOB_NOTICE) {
		p->notices++;
		return false;
	}
	return msg->type == (type | RP_REPLY) && msg->src.node == p->other.node &&
	       msg->src.id == p->other.id;
}

static void rp_send_bye(struct rp *p, int status)
{
	struct rp_status s = { .err = status };

	(void)rp_send(p, RP_BYE, &s, sizeof(s));
}

/* ---- patterns, checksums ---- */

/* A round trip's tag: run (24 bits, not 0), direction, round trip. */
static uint64_t tag_of(uint32_t run, uint32_t dir, uint32_t i)
{
	return (uint64_t)run << 33 | (uint64_t)dir << 32 | i;
}

static uint64_t mix(uint64_t tag, uint64_t j)
{
	return (tag ^ (j * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
}

/* A round trip's message: size / 8 words, the last one the tag. */
static void lat_fill(uint64_t *w, uint32_t size, uint64_t tag)
{
	uint32_t n = size / 8;

	for (uint32_t j = 0; j + 1 < n; j++)
		w[j] = mix(tag, j);
	__atomic_store_n(&w[n - 1], tag, __ATOMIC_RELEASE);
}

/* Index of the first word of the message that is wrong, or -1. */
static long lat_wrong(const volatile uint64_t *w, uint32_t size, uint64_t tag)
{
	uint32_t n = size / 8;

	for (uint32_t j = 0; j + 1 < n; j++)
		if (w[j] != mix(tag, j))
			return j;
	return w[n - 1] == tag ? -1 : (long)n - 1;
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545f4914f6cdd1dull;
}

/* xorshift64*: whole words, then the bytes of a last partial one */
static void bw_fill(void *p, uint64_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1, *w = p;
	uint8_t *b = p;

	for (uint64_t i = 0; i < len / 8; i++)
		w[i] = xorshift(&x);
	for (uint64_t i = len / 8 * 8; i < len; i++)
		b[i] = (uint8_t)(xorshift(&x) >> 56);
}

/* FNV-1a over bytes, 8 at a time (any length; alignment of p: 8) */
static uint64_t csum_add(uint64_t h, const void *p, uint64_t len)
{
	const uint64_t *w = p;
	const uint8_t *b = p;

	for (uint64_t i = 0; i < len / 8; i++)
		h = (h ^ w[i]) * 0x100000001b3ull;
	for (uint64_t i = len / 8 * 8; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t csum_init(uint64_t total_len)
{
	return 0xcbf29ce484222325ull ^ total_len;
}

/* ---- waiting for a word, and for completions ---- */

/*
 * An OOB message is waiting: a notice is counted (an answer of ours
 * nobody took), anything else taken into p->held: -ECANCELED.
 */
static int hold(struct rp *p)
{
	if (clanq_oob_recv(&p->ep, &p->held))
		return 0;
	if (p->held.type & CLANQ_OOB_NOTICE) {
		p->notices++;
		return 0;
	}
	p->have_held = true;
	return -ECANCELED;
}

/*
 * Wait until the word at w holds want, before deadline: 0; -ETIMEDOUT;
 * -EINTR; -ECANCELED when an OOB message came (in p->held); -errno.
 */
static int wait_word(struct rp *p, const uint64_t *w, uint64_t want, uint32_t mode,
		     uint64_t deadline)
{
	unsigned int spins = 0;
	uint64_t v, now;
	int err;

	for (;;) {
		v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		if (v == want)
			return 0;
		if (ex_stop)
			return -EINTR;
		if (mode == MODE_POLL) {
			clanq_cpu_relax();
			if (++spins % 256)
				continue;
			if (!clanq_q_empty(&p->ep.oob) && hold(p))
				return -ECANCELED;
			if (clanq_now_ns() >= deadline)
				return -ETIMEDOUT;
			continue;
		}
		now = clanq_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		err = clanq_tw_wait_change_oob(&p->tw, w, v, &p->ep,
					       (int64_t)(deadline - now));
		if (err == 1) {
			if (hold(p))
				return -ECANCELED;
			continue;
		}
		if (err && err != -ETIMEDOUT)
			return err;
	}
}

/* Completions of the round trips' writes: in order, cookie = round trip. */
struct lat_comps {
	uint32_t size;
	uint32_t seen;		/* writes 1 .. seen completed */
};

static int lat_drain(struct rp *p, struct lat_comps *lc, char *why, size_t why_len)
{
	struct clanq_rdma_comp c;

	while (clanq_rdma_poll(&p->ep, &c) == 0) {
		if (c.status || c.cookie != lc->seen + 1ull || c.len != lc->size) {
			snprintf(why, why_len, "write %u: completion cookie %llu len %llu status %d (%s)",
				 lc->seen + 1, (unsigned long long)c.cookie,
				 (unsigned long long)c.len, c.status,
				 strerror(c.status < 0 ? -c.status : 0));
			return -EIO;
		}
		lc->seen++;
	}
	return 0;
}

/* Until writes 1 .. n have completed (bounded). */
static int lat_wait_comp(struct rp *p, struct lat_comps *lc, uint32_t n, char *why,
			 size_t why_len)
{
	static const struct timespec us = { .tv_nsec = 1000 };
	uint64_t deadline = deadline_in(p);
	unsigned int spins = 0;
	int err;

	for (;;) {
		err = lat_drain(p, lc, why, why_len);
		if (err || lc->seen >= n)
			return err;
		if (clanq_now_ns() >= deadline) {
			snprintf(why, why_len, "write %u: no completion within %llu ms", lc->seen + 1,
				 (unsigned long long)(p->timeout_ns / 1000000));
			return -ETIMEDOUT;
		}
		if (++spins < 256)
			clanq_cpu_relax();
		else
			nanosleep(&us, NULL);	/* let the kernel's work run */
	}
}

/* Write round trip i's message from source slot i % LAT_SLOTS. */
static int lat_post(struct rp *p, struct lat_comps *lc, uint32_t i, uint64_t tag, char *why,
		    size_t why_len)
{
	uint64_t stride = (lc->size + 63) / 64 * 64;
	uint64_t off = (i % LAT_SLOTS) * stride;
	struct clanq_rdma_req req = {
		.src_region = p->tx.addr.id,
		.dst_ap = p->ap.id,
		.src_off = off,
		.dst_off = 0,
		.len = lc->size,
		.cookie = i,
		.flags = CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL,
	};
	int err;

	/* the slot's previous write has left it */
	if (i > LAT_SLOTS) {
		err = lat_wait_comp(p, lc, i - LAT_SLOTS, why, why_len);
		if (err)
			return err;
	}
	lat_fill((uint64_t *)((char *)p->tx.mem + off), lc->size, tag);
	err = clanq_rdma_post(&p->ep, &req);
	if (err)
		snprintf(why, why_len, "round trip %u: post: %s", i, strerror(-err));
	return err;
}

/*
 * Round trip i's message has its tag: check the rest, which may still be
 * landing (a copy need not go in address order), until the deadline.
 */
static int lat_check(struct rp *p, uint32_t size, uint64_t tag, uint32_t i, uint64_t deadline,
		     char *why, size_t why_len)
{
	const volatile uint64_t *w = p->rx.mem;
	long bad;

	while ((bad = lat_wrong(w, size, tag)) >= 0) {
		if (clanq_now_ns() >= deadline) {
			uint64_t want = (uint32_t)bad == size / 8 - 1 ? tag : mix(tag, bad);

			snprintf(why, why_len, "round trip %u: word %ld of the message is %#llx, not %#llx",
				 i, bad, (unsigned long long)w[bad], (unsigned long long)want);
			return -EIO;
		}
		clanq_cpu_relax();
	}
	return 0;
}

static const char *wait_error(int err, uint64_t timeout_ns)
{
	static char buf[96];

	if (err == -ETIMEDOUT)
		snprintf(buf, sizeof(buf), "no write within %llu ms",
			 (unsigned long long)(timeout_ns / 1000000));
	else
		snprintf(buf, sizeof(buf), "the wait: %s", strerror(-err));
	return buf;
}

/* ---- server ---- */

/* Serve a latency run: 0, or -errno with why filled in. */
static int serve_lat(struct rp *p, const struct rp_lat *l, uint32_t *at, char *why, size_t why_len)
{
	const uint64_t *word = (const uint64_t *)((char *)p->rx.mem + l->size - 8);
	struct lat_comps lc = { .size = l->size };
	uint64_t tag;
	int err;

	clanq_tw_set_spin(&p->tw, l->spin_ns);
	for (uint32_t i = 1; i <= l->total; i++) {
		uint64_t deadline = deadline_in(p);

		*at = i;
		tag = tag_of(l->run, 0, i);
		err = wait_word(p, word, tag, l->mode, deadline);
		if (err == -ECANCELED) {
			snprintf(why, why_len, "round trip %u: a message came instead (type %#x)",
				 i, p->held.type);
			return err;
		}
		if (err) {
			snprintf(why, why_len, "round trip %u: %s", i, wait_error(err, p->timeout_ns));
			return err;
		}
		err = lat_check(p, l->size, tag, i, deadline, why, why_len);
		if (!err)
			err = lat_post(p, &lc, i, tag_of(l->run, 1, i), why, why_len);
		if (!err)
			err = lat_drain(p, &lc, why, why_len);
		if (err)
			return err;
	}
	return lat_wait_comp(p, &lc, l->total, why, why_len);
}

static int server(unsigned int nic, unsigned int service, unsigned long long region,
		  unsigned long long seconds, uint64_t timeout_ns)
{
	struct clanq_oob_msg msg;
	struct rp p = { .timeout_ns = timeout_ns };
	uint64_t t0, deadline, lat_runs = 0, sums = 0, ignored = 0;
	bool bye = false, failed = false;
	char why[192];
	int err = 0;

	rp_open(&p, nic, service, 1);
	rp_regions(&p, region, LAT_SLOTS * LAT_MAX);
	printf("# clanq-rdma-pingpong server: node %u ep %u, region %u (%llu bytes) exported for writing\n",
	       p.dev.node, p.ep.addr.id, p.rx.addr.id, region);
	fflush(stdout);
	t0 = clanq_now_ns();
	deadline = seconds ? t0 + seconds * 1000000000ull : ~0ull;
	while (!bye) {
		bool from_client;

		err = rp_recv(&p, &msg, deadline);
		if (err)
			break;
		if (msg.type & CLANQ_OOB_NOTICE) {
			p.notices++;	/* an answer nobody took: a client gone */
			continue;
		}
		/* the client: whoever said hello last, its import done or not */
		from_client = p.session && msg.src.node == p.other.node && msg.src.id == p.other.id;
		if (msg.type == RP_HELLO) {
			struct rp_hello h, a = { .magic = RP_MAGIC, .region = p.rx.addr.id,
						 .key = p.rx_key, .len = region };

			memcpy(&h, msg.payload, sizeof(h));
			if (msg.len != sizeof(h) || h.magic != RP_MAGIC) {
				ignored++;
				continue;
			}
			/* a new client, or a new region: import it (again) */
			if (!from_client || !p.have_ap || p.ap_region != h.region ||
			    p.ap.len != h.len) {
				if (p.have_ap)
					clanq_ap_close(&p.ap);
				p.have_ap = false;
				p.other = msg.src;
				a.err = clanq_ap_import(&p.dev, &p.ap, (struct clanq_addr){
								msg.src.node, h.region }, h.key, 0,
							h.len, CLANQ_RIGHT_WRITE);
				if (!a.err) {
					p.have_ap = true;
					p.ap_region = h.region;
					printf("# hello from node %u ep %u: its region %u (%llu bytes) imported\n",
					       msg.src.node, msg.src.id, h.region,
					       (unsigned long long)h.len);
				} else {
					fprintf(stderr, "%s: import of node %u's region %u: %s\n",
						ex_prog, msg.src.node, h.region, strerror(-a.err));
				}
			}
			p.other = msg.src;
			p.session = true;
			(void)rp_send(&p, RP_HELLO | RP_REPLY, &a, sizeof(a));
			continue;
		}
		if (!from_client) {
			ignored++;
			continue;
		}
		if (msg.type == RP_LAT) {
			struct rp_lat l;
			struct rp_status s = { 0 };
			uint32_t at = 0;

			memcpy(&l, msg.payload, sizeof(l));
			if (!p.have_ap)
				s.err = -ENOTCONN;
			else if (msg.len != sizeof(l) || l.size < LAT_MIN || l.size > LAT_MAX ||
				 l.size % 8 || l.size > region || l.size > p.ap.len ||
				 l.mode > MODE_POLL || !l.total)
				s.err = -EINVAL;
			(void)rp_send(&p, RP_LAT | RP_REPLY, &s, sizeof(s));
			if (s.err)
				continue;
			lat_runs++;
			err = serve_lat(&p, &l, &at, why, sizeof(why));
			if (err) {
				struct rp_status ab = { .err = err, .at = at };

				fprintf(stderr, "%s: %u-byte round trips (%s): %s\n", ex_prog,
					l.size, mode_name[l.mode], why);
				(void)rp_send(&p, RP_ABORT, &ab, sizeof(ab));
				failed = true;
				err = 0;
			} else {
				printf("# served %u round trips of %u bytes (%s)\n", l.total,
				       l.size, mode_name[l.mode]);
			}
			fflush(stdout);
			continue;
		}
		if (msg.type == RP_SUM) {
			struct rp_sum s;

			memcpy(&s, msg.payload, sizeof(s));
			if (msg.len != sizeof(s) || s.off > region || s.len > region - s.off) {
				s.err = -ERANGE;
			} else {
				s.err = 0;
				s.sum = csum_add(csum_init(s.len), (char *)p.rx.mem + s.off, s.len);
			}
			sums++;
			(void)rp_send(&p, RP_SUM | RP_REPLY, &s, sizeof(s));
			continue;
		}
		if (msg.type == RP_BYE) {
			struct rp_status s;

			memcpy(&s, msg.payload, sizeof(s));
			printf("# bye from node %u ep %u%s\n", msg.src.node, msg.src.id,
			       msg.len == sizeof(s) && s.err ? " (the client failed)" : "");
			(void)rp_send(&p, RP_BYE | RP_REPLY, NULL, 0);
			bye = true;
			continue;
		}
		ignored++;
	}
	printf("server: %llu latency runs, %llu checksums, %llu messages ignored, "
	       "%llu notices, %llu dropped (queue full), %.1f s\n",
	       (unsigned long long)lat_runs, (unsigned long long)sums,
	       (unsigned long long)ignored, (unsigned long long)p.notices,
	       (unsigned long long)clanq_ep_dropped(&p.ep),
	       (double)(clanq_now_ns() - t0) / 1e9);
	rp_close(&p);
	if (err == -ETIMEDOUT) {
		fprintf(stderr, "%s: no bye within %llu s\n", ex_prog, seconds);
		return EX_FAIL;
	}
	if (err && err != -EINTR)
		ex_fail("wait", err);
	return failed ? EX_FAIL : 0;
}

/* ---- client ---- */

struct client_opts {
	unsigned int node, service;
	unsigned long long lat[MAX_SIZES], bw[MAX_SIZES], eps[MAX_SIZES];
	unsigned long long rlat[MAX_SIZES], rbw[MAX_SIZES];
	unsigned int nr_lat, nr_bw, nr_eps, nr_rlat, nr_rbw;
	bool alat, abw;
	bool modes[2];
	unsigned long long count, depth, bytes, wait_s;
	uint64_t spin_ns;
	uint64_t bw_ns;		/* a bandwidth point posts no longer than this */
};

/* A request and its answer, bounded; the answer's payload in *ans. */
static void ask(struct rp *p, uint32_t type, const void *req, size_t len,
		struct clanq_oob_msg *ans, const char *what)
{
	uint64_t deadline = deadline_in(p);
	int err;

	err = rp_send(p, type, req, len);
	if (err)
		die("%s: send: %s", what, strerror(-err));
	for (;;) {
		err = rp_recv(p, ans, deadline);
		if (err == -ETIMEDOUT)
			die("%s: no answer from node %u ep %u within %llu ms", what, p->other.node,
			    p->other.id, (unsigned long long)(p->timeout_ns / 1000000));
		check(err, what);
		if (ans->type == CLANQ_OOB_UNREACHABLE && ans->src.node == p->other.node &&
		    ans->src.id == p->other.id)
			die("%s: node %u ep %u is gone (unreachable notice)", what,
			    p->other.node, p->other.id);
		if (ans->type == RP_ABORT)
			continue;	/* of a run that is over */
		if (is_answer(p, ans, type))
			return;
	}
}

/* Hello until answered (--wait s): the server's region, imported. */
static void hello(struct rp *p, unsigned long long wait_s)
{
	struct rp_hello h = { .magic = RP_MAGIC, .region = p->rx.addr.id, .key = p->rx_key,
			      .len = p->rx.size }, a;
	struct clanq_oob_msg msg;
	uint64_t t0 = clanq_now_ns(), until = t0 + wait_s * 1000000000ull, next;
	unsigned int tries = 0, unreachable = 0;
	int err, last = 0;

	for (;;) {
		if (ex_stop)
			die("hello: interrupted");
		if (clanq_now_ns() >= until)
			die("no answer from node %u ep %u within %llu s (%u tries, %u unreachable notices%s%s)",
			    p->other.node, p->other.id, wait_s, tries, unreachable,
			    last ? ", last send: " : "", last ? strerror(-last) : "");
		tries++;
		err = rp_send(p, RP_HELLO, &h, sizeof(h));
		if (err && err != -EHOSTUNREACH && err != -ENETUNREACH &&
		    err != -EAGAIN && err != -ENOTCONN && err != -ECONNREFUSED &&
		    err != -ETIMEDOUT)
			check(err, "hello: send");
		last = err;
		next = clanq_now_ns() + 250000000ull;
		if (next > until)
			next = until;
		while ((err = rp_recv(p, &msg, next)) == 0) {
			if (msg.type == CLANQ_OOB_UNREACHABLE) {
				unreachable++;	/* nobody at that id yet */
				continue;
			}
			if (!is_answer(p, &msg, RP_HELLO) || msg.len != sizeof(a))
				continue;
			memcpy(&a, msg.payload, sizeof(a));
			if (a.magic != RP_MAGIC)
				continue;
			p->session = true;	/* a bye is owed from now on */
			if (a.err)
				die("the server could not import our region: %s", strerror(-a.err));
			err = clanq_ap_import(&p->dev, &p->ap,
					      (struct clanq_addr){ p->other.node, a.region },
					      a.key, 0, a.len, CLANQ_RIGHT_WRITE);
			if (err)
				die("import of node %u's region %u (%llu bytes): %s%s", p->other.node,
				    a.region, (unsigned long long)a.len, strerror(-err),
				    err == -EOPNOTSUPP ? " (its wire cannot write to that host)" : "");
			p->have_ap = true;
			p->ap_region = a.region;
			p->ap_key = a.key;
			printf("# hello answered after %.1f ms (%u tries): node %u's region %u, %llu bytes\n",
			       (double)(clanq_now_ns() - t0) / 1e6, tries, p->other.node, a.region,
			       (unsigned long long)a.len);
			return;
		}
		if (err != -ETIMEDOUT && err != -EINTR)
			check(err, "hello: wait");
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint64_t entries(struct rp *p)
{
	uint64_t e = 0;

	(void)clanq_ctx_entries(&p->dev, &e);
	return e;
}

/* One latency run: size bytes, waiting by mode. */
static void lat_run(struct rp *p, const struct client_opts *o, uint32_t run, uint32_t size,
		    uint32_t mode)
{
	uint32_t warm = (uint32_t)(o->count / 10) + 1, total = warm + (uint32_t)o->count;
	struct rp_lat l = { .run = run, .size = size, .total = total, .mode = mode,
			    .spin_ns = o->spin_ns };
	const uint64_t *word = (const uint64_t *)((char *)p->rx.mem + size - 8);
	struct lat_comps lc = { .size = size };
	struct clanq_oob_msg ans;
	struct rp_status s;
	double *rtt, sum = 0;
	uint64_t t0, e0 = 0, e1;
	char why[192];
	int err;

	rtt = calloc(o->count, sizeof(*rtt));
	if (!rtt)
		die("round-trip table: %s", strerror(ENOMEM));
	ask(p, RP_LAT, &l, sizeof(l), &ans, "latency run");
	memcpy(&s, ans.payload, sizeof(s));
	if (s.err)
		die("the server refused %u-byte round trips: %s", size, strerror(-s.err));
	clanq_tw_set_spin(&p->tw, o->spin_ns);
	for (uint32_t i = 1; i <= total; i++) {
		uint64_t deadline, tag = tag_of(run, 1, i);

		if (i == warm + 1)
			e0 = entries(p);
		t0 = clanq_now_ns();
		deadline = t0 + p->timeout_ns;
		err = lat_post(p, &lc, i, tag_of(run, 0, i), why, sizeof(why));
		if (err)
			die("%s", why);
		for (;;) {
			err = wait_word(p, word, tag, mode, deadline);
			if (err != -ECANCELED)
				break;
			p->have_held = false;
			if (p->held.type == RP_ABORT) {
				memcpy(&s, p->held.payload, sizeof(s));
				die("round trip %u: the server gave up at its round trip %u: %s", i,
				    s.at, strerror(-s.err));
			}
			/* anything else: not for a round trip, dropped */
		}
		if (err)
			die("round trip %u of %u bytes (%s): %s", i, size, mode_name[mode],
			    wait_error(err, p->timeout_ns));
		if (lat_check(p, size, tag, i, deadline, why, sizeof(why)))
			die("%s", why);
		if (i > warm)
			rtt[i - warm - 1] = (double)(clanq_now_ns() - t0) / 1e3;
		if (lat_drain(p, &lc, why, sizeof(why)))
			die("%s", why);
	}
	e1 = entries(p);
	if (lat_wait_comp(p, &lc, total, why, sizeof(why)))
		die("%s", why);
	for (uint64_t i = 0; i < o->count; i++)
		sum += rtt[i];
	qsort(rtt, o->count, sizeof(*rtt), cmp_double);
	printf("lat    %-8u %-8llu %-10.1f %-10.1f %-10.1f %-10.1f %-10.1f %-8.2f %s\n", size,
	       o->count, rtt[0], rtt[o->count / 2], sum / (double)o->count,
	       rtt[(o->count * 99) / 100], rtt[o->count - 1],
	       (double)(e1 - e0) / (double)o->count, mode_name[mode]);
	fflush(stdout);
	free(rtt);
}

/* The bandwidth endpoints: their own queues, on the event queue. */
struct bw_ep {
	struct clanq_ep ep;
	uint64_t posted, done;
};

static void bw_open(struct rp *p, struct bw_ep *be, unsigned int n)
{
	struct clanq_ep_attr attr = { .oob_slots = 2, .rq_slots = EP_SLOTS, .cq_slots = EP_SLOTS };
	int err;

	for (unsigned int e = 0; e < n; e++) {
		err = clanq_ep_create_attr(&p->dev, &be[e].ep, &attr);
		if (err)
			die("bandwidth endpoint %u of %u: %s", e + 1, n, strerror(-err));
		err = clanq_evq_register(&p->evq, &be[e].ep, CLANQ_EV_RDMA, e);
		if (err < 0)
			die("bandwidth endpoint %u: event queue registration: %s", e + 1,
			    strerror(-err));
	}
}

struct bw_point {
	uint64_t size, iters, posted, done;
	unsigned int eps, slots;
	uint64_t depth;
};

/*
 * Queue up to max more writes on endpoint e, within the depth and the
 * point's total.
 */
static void bw_top_up(struct rp *p, struct bw_ep *b, unsigned int e, struct bw_point *pt,
		      uint64_t max)
{
	struct clanq_rdma_req req = {
		.src_region = p->tx.addr.id,
		.dst_ap = p->ap.id,
		.dst_off = (e % pt->slots) * pt->size,
		.len = pt->size,
		.flags = CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL,
	};
	int err;

	while (b->posted - b->done < pt->depth && pt->posted < pt->iters && max--) {
		req.cookie = b->posted;
		if (clanq_rdma_post_init(&b->ep, &req))
			break;	/* full: cannot be with depth < EP_SLOTS, but harmless */
		b->posted++;
		pt->posted++;
	}
	err = clanq_rdma_post_push(&b->ep);
	if (err)
		die("endpoint %u: doorbell: %s", e + 1, strerror(-err));
}

/* Every completion of endpoint e, each checked; then its queue topped up. */
static bool bw_drain(struct rp *p, struct bw_ep *b, unsigned int e, struct bw_point *pt)
{
	struct clanq_rdma_comp c;
	bool any = false;

	while (clanq_rdma_poll(&b->ep, &c) == 0) {
		if (c.status || c.cookie != b->done || c.len != pt->size)
			die("%llu-byte writes, endpoint %u: completion cookie %llu len %llu status %d (%s); want cookie %llu",
			    (unsigned long long)pt->size, e + 1, (unsigned long long)c.cookie,
			    (unsigned long long)c.len, c.status,
			    strerror(c.status < 0 ? -c.status : 0), (unsigned long long)b->done);
		b->done++;
		pt->done++;
		any = true;
	}
	if (any)
		bw_top_up(p, b, e, pt, ~0ull);
	return any;
}

/* OOB messages during a bandwidth point: notices are counted, no other may come. */
static void bw_oob(struct rp *p)
{
	struct clanq_oob_msg msg;

	while (clanq_oob_recv(&p->ep, &msg) == 0) {
		if (msg.type & CLANQ_OOB_NOTICE) {
			p->notices++;
			continue;
		}
		die("a message of type %#x from node %u ep %u during a bandwidth run",
		    msg.type, msg.src.node, msg.src.id);
	}
}

static void bw_run(struct rp *p, struct bw_ep *be, const struct client_opts *o, uint32_t run,
		   uint64_t size, unsigned int eps, uint32_t mode)
{
	struct bw_point pt = { .size = size, .eps = eps, .depth = o->depth };
	struct clanq_oob_msg ans;
	struct clanq_event ev;
	struct rp_sum sreq = { .seq = run }, sans;
	uint64_t t0, t1, last, e0, e1, want;
	unsigned int spins = 0, used;
	double secs;
	int err;

	pt.slots = (unsigned int)(p->ap.len / size);
	if (!pt.slots)
		die("%llu-byte writes: the server's region has only %llu bytes (server --region)",
		    (unsigned long long)size, (unsigned long long)p->ap.len);
	pt.iters = o->bytes / size;
	if (pt.iters < eps)
		pt.iters = eps;
	bw_fill(p->tx.mem, size, run);
	for (unsigned int e = 0; e < eps; e++)
		be[e].posted = be[e].done = 0;

	e0 = entries(p);
	t0 = last = clanq_now_ns();
	/* one write per endpoint at a time: each writes its slot at least once */
	for (uint64_t d = 0; d < pt.depth; d++)
		for (unsigned int e = 0; e < eps; e++)
			bw_top_up(p, &be[e], e, &pt, 1);
	while (pt.done < pt.iters) {
		bool any = false;

		if (ex_stop)
			die("interrupted");
		/* time is up: what is in flight completes, nothing more is posted */
		if (o->bw_ns && pt.iters > pt.posted && clanq_now_ns() - t0 >= o->bw_ns)
			pt.iters = pt.posted;
		if (mode == MODE_POLL) {
			for (unsigned int e = 0; e < eps; e++)
				any |= bw_drain(p, &be[e], e, &pt);
			if (!(++spins % 256))
				bw_oob(p);
		} else {
			uint64_t now = clanq_now_ns();

			err = clanq_evq_wait(&p->evq, &ev,
					     now < last + p->timeout_ns ?
					     (int64_t)(last + p->timeout_ns - now) : 0);
			if (!err && ev.cookie == CTL_COOKIE)
				bw_oob(p);
			else if (!err && ev.cookie < eps)
				any = bw_drain(p, &be[ev.cookie], (unsigned int)ev.cookie, &pt);
			else if (err && err != -ETIMEDOUT && err != -EINTR)
				check(err, "event queue wait");
		}
		if (any) {
			last = clanq_now_ns();
			continue;
		}
		if (mode == MODE_POLL)
			clanq_cpu_relax();
		if (clanq_now_ns() >= last + p->timeout_ns)
			die("%llu-byte writes on %u endpoints: no completion within %llu ms (%llu of %llu done)",
			    (unsigned long long)size, eps,
			    (unsigned long long)(p->timeout_ns / 1000000),
			    (unsigned long long)pt.done, (unsigned long long)pt.iters);
	}
	t1 = clanq_now_ns();
	e1 = entries(p);
	secs = (double)(t1 - t0) / 1e9;

	/* where it landed: the server's checksum of the slots written */
	used = eps < pt.slots ? eps : pt.slots;
	sreq.off = 0;
	sreq.len = used * size;
	ask(p, RP_SUM, &sreq, sizeof(sreq), &ans, "checksum");
	memcpy(&sans, ans.payload, sizeof(sans));
	if (sans.err || sans.seq != sreq.seq)
		die("checksum of the server's slots: %s", strerror(sans.err ? -sans.err : EPROTO));
	want = csum_init(sreq.len);
	for (unsigned int k = 0; k < used; k++)
		want = csum_add(want, p->tx.mem, size);
	if (sans.sum != want)
		die("%llu-byte writes on %u endpoints: the data in the server's region differ from what was written",
		    (unsigned long long)size, eps);

	printf("bw     %-8llu %-5u %-6llu %-8llu %-8.3f %-10.1f %-10.1f %-8.3f %s\n",
	       (unsigned long long)size, eps, (unsigned long long)pt.depth,
	       (unsigned long long)pt.iters, secs,
	       (double)(pt.iters * size) / secs / 1e6,
	       (double)(pt.iters * size) / secs / (1 << 20),
	       (double)(e1 - e0) / (double)pt.iters, mode_name[mode]);
	fflush(stdout);
}

/* ---- one-sided: READs and fetch-and-adds ---- */

#define OS_READ		0u
#define OS_FADD		1u

/* The server's region again, for READs and (if the wire can) atomics. */
static void os_import(struct rp *p)
{
	struct clanq_ap_attr attr = { .flags = CLANQ_AP_ATOMIC };
	struct clanq_addr at = { p->other.node, p->ap_region };
	int err;

	if (p->have_ap1)
		return;
	err = clanq_ap_import_attr(&p->dev, &p->ap1, at, p->ap_key, 0, p->ap.len,
				   CLANQ_RIGHTS_ALL, &attr);
	if (err == -EOPNOTSUPP) {
		printf("# atomics: the wire to node %u has none (its RDMA device, or ours):"
		       " no atomic rows\n", p->other.node);
		attr.flags = 0;
		err = clanq_ap_import_attr(&p->dev, &p->ap1, at, p->ap_key, 0, p->ap.len,
					   CLANQ_RIGHTS_ALL, &attr);
	} else if (!err) {
		p->ap1_atomic = true;
	}
	if (err)
		die("import of node %u's region %u to read it: %s", p->other.node,
		    p->ap_region, strerror(-err));
	p->have_ap1 = true;
}

/* The word the atomics add to: the last of the server's region. */
static uint64_t os_word(const struct rp *p)
{
	return (p->ap1.len - 8) & ~7ull;
}

/* Post one READ or FADD on @ep; -EAGAIN if its queue is full. */
static int os_post(struct rp *p, struct clanq_ep *ep, uint32_t kind, uint64_t size,
		   uint64_t local_off, uint64_t cookie, bool push)
{
	struct clanq_rdma_req req = {
		.dst_ap = p->ap1.id, .len = size, .cookie = cookie,
		.flags = CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL,
	};
	int err;

	if (kind == OS_READ) {
		req.op = CLANQ_RDMA_OP_READ;
		req.src_region = p->tx.addr.id;
		req.src_off = local_off;
	} else {
		req.op = CLANQ_RDMA_OP_FADD;
		req.dst_off = os_word(p);
		req.len = 8;
		req.operand[0] = 1;
	}
	err = clanq_rdma_post_init(ep, &req);
	if (!err && push)
		err = clanq_rdma_post_push(ep);
	return err;
}

static const char *const os_name[] = { "read", "fadd" };

/* One op at a time, each timed: like ib_read_lat and ib_atomic_lat. */
static void os_lat(struct rp *p, const struct client_opts *o, uint32_t kind, uint64_t size)
{
	uint64_t warm = o->count / 10 + 1, total = warm + o->count, e0 = 0, e1, prev = 0;
	struct clanq_rdma_comp c;
	double *rtt, sum = 0;
	int err;

	rtt = calloc(o->count, sizeof(*rtt));
	if (!rtt)
		die("latency table: %s", strerror(ENOMEM));
	for (uint64_t i = 0; i < total; i++) {
		uint64_t t0, deadline;

		if (i == warm)
			e0 = entries(p);
		t0 = clanq_now_ns();
		deadline = t0 + p->timeout_ns;
		err = os_post(p, &p->ep, kind, size, 0, i, true);
		if (err)
			die("%s: post: %s", os_name[kind], strerror(-err));
		while ((err = clanq_rdma_poll(&p->ep, &c)) == -EAGAIN) {
			if (clanq_now_ns() > deadline)
				die("%s of %llu bytes: no completion within %llu ms", os_name[kind],
				    (unsigned long long)size,
				    (unsigned long long)(p->timeout_ns / 1000000));
			clanq_cpu_relax();
		}
		if (i >= warm)
			rtt[i - warm] = (double)(clanq_now_ns() - t0) / 1e3;
		if (c.status || c.cookie != i || c.len != (kind == OS_READ ? size : 8))
			die("%s of %llu bytes: completion cookie %llu len %llu status %d (%s)",
			    os_name[kind], (unsigned long long)size,
			    (unsigned long long)c.cookie, (unsigned long long)c.len, c.status,
			    strerror(c.status < 0 ? -c.status : 0));
		/* only we add: each sees the one before it */
		if (kind == OS_FADD && i && c.value != prev + 1)
			die("fadd %llu: the word was %llu, the one before saw %llu",
			    (unsigned long long)i, (unsigned long long)c.value,
			    (unsigned long long)prev);
		prev = c.value;
	}
	e1 = entries(p);
	for (uint64_t i = 0; i < o->count; i++)
		sum += rtt[i];
	qsort(rtt, o->count, sizeof(*rtt), cmp_double);
	printf("%-6s %-8llu %-8llu %-10.1f %-10.1f %-10.1f %-10.1f %-10.1f %-8.2f %s\n",
	       os_name[kind], (unsigned long long)size, o->count, rtt[0],
	       rtt[o->count / 2], sum / (double)o->count, rtt[(o->count * 99) / 100],
	       rtt[o->count - 1], (double)(e1 - e0) / (double)o->count, "poll");
	fflush(stdout);
	free(rtt);
}

/*
 * @eps endpoints, --depth ops queued each, polled: READ bandwidth into a
 * slot of ours per endpoint, or the fetch-and-add rate (and the word
 * must end exactly that much higher).
 */
static void os_bw(struct rp *p, struct bw_ep *be, const struct client_opts *o,
		  uint32_t kind, uint64_t size, unsigned int eps)
{
	uint64_t iters = kind == OS_READ ? o->bytes / size : o->count * eps;
	uint64_t posted = 0, done = 0, t0, t1, last, e0, e1, before = 0;
	struct clanq_rdma_comp c;
	double secs;
	int err;

	if (iters < eps)
		iters = eps;
	if (kind == OS_READ && (uint64_t)eps * size > p->tx.size)
		die("%llu-byte READs on %u endpoints: our region has %llu bytes",
		    (unsigned long long)size, eps, (unsigned long long)p->tx.size);
	if (kind == OS_FADD) {
		/* the word before: a fetch-and-add of 0 */
		struct clanq_rdma_req req = {
			.dst_ap = p->ap1.id, .dst_off = os_word(p), .len = 8,
			.op = CLANQ_RDMA_OP_FADD, .cookie = ~0ull,
			.flags = CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL,
		};
		uint64_t deadline = deadline_in(p);

		check(clanq_rdma_post(&p->ep, &req), "fetch-and-add of 0");
		while (clanq_rdma_poll(&p->ep, &c) == -EAGAIN)
			if (clanq_now_ns() > deadline)
				die("fetch-and-add of 0: no completion");
		if (c.status)
			die("fetch-and-add of 0: %s", strerror(-c.status));
		before = c.value;
	}
	for (unsigned int e = 0; e < eps; e++)
		be[e].posted = be[e].done = 0;
	e0 = entries(p);
	t0 = last = clanq_now_ns();
	while (done < iters) {
		bool any = false;

		if (ex_stop)
			die("interrupted");
		if (o->bw_ns && iters > posted && clanq_now_ns() - t0 >= o->bw_ns)
			iters = posted;
		for (unsigned int e = 0; e < eps; e++) {
			struct bw_ep *b = &be[e];
			bool pushed = false;

			while (b->posted - b->done < o->depth && posted < iters) {
				if (os_post(p, &b->ep, kind, size, e * size, b->posted, false))
					break;
				b->posted++;
				posted++;
				pushed = true;
			}
			if (pushed) {
				err = clanq_rdma_post_push(&b->ep);
				if (err)
					die("endpoint %u: doorbell: %s", e + 1, strerror(-err));
			}
			while (clanq_rdma_poll(&b->ep, &c) == 0) {
				if (c.status || c.cookie != b->done)
					die("%s on endpoint %u: completion cookie %llu status %d (%s)",
					    os_name[kind], e + 1, (unsigned long long)c.cookie,
					    c.status, strerror(c.status < 0 ? -c.status : 0));
				b->done++;
				done++;
				any = true;
			}
		}
		if (any) {
			last = clanq_now_ns();
			continue;
		}
		clanq_cpu_relax();
		if (clanq_now_ns() >= last + p->timeout_ns)
			die("%s on %u endpoints: no completion within %llu ms (%llu of %llu done)",
			    os_name[kind], eps, (unsigned long long)(p->timeout_ns / 1000000),
			    (unsigned long long)done, (unsigned long long)iters);
	}
	t1 = clanq_now_ns();
	e1 = entries(p);
	secs = (double)(t1 - t0) / 1e9;
	if (kind == OS_FADD) {
		struct clanq_rdma_req req = {
			.dst_ap = p->ap1.id, .dst_off = os_word(p), .len = 8,
			.op = CLANQ_RDMA_OP_FADD, .cookie = ~0ull,
			.flags = CLANQ_RDMA_LAST | CLANQ_RDMA_SIGNAL,
		};
		uint64_t deadline = deadline_in(p);

		check(clanq_rdma_post(&p->ep, &req), "fetch-and-add of 0");
		while (clanq_rdma_poll(&p->ep, &c) == -EAGAIN)
			if (clanq_now_ns() > deadline)
				die("fetch-and-add of 0: no completion");
		if (c.status || c.value != before + done)
			die("fetch-and-adds: the word went from %llu to %llu, %llu were added (%s)",
			    (unsigned long long)before, (unsigned long long)c.value,
			    (unsigned long long)done, strerror(c.status < 0 ? -c.status : 0));
		printf("%-6s %-8u %-5u %-6llu %-8llu %-8.3f %-10.3f %-10s %-8.3f %s\n",
		       "faddbw", 8u, eps, o->depth, (unsigned long long)done, secs,
		       (double)done / secs / 1e6, "-", (double)(e1 - e0) / (double)done, "poll");
	} else {
		printf("%-6s %-8llu %-5u %-6llu %-8llu %-8.3f %-10.1f %-10.1f %-8.3f %s\n",
		       "readbw", (unsigned long long)size, eps, o->depth,
		       (unsigned long long)done, secs, (double)(done * size) / secs / 1e6,
		       (double)(done * size) / secs / (1 << 20),
		       (double)(e1 - e0) / (double)done, "poll");
	}
	fflush(stdout);
}

static int client(unsigned int nic, const struct client_opts *o, uint64_t timeout_ns)
{
	struct rp p = { .timeout_ns = timeout_ns };
	struct clanq_oob_msg ans;
	struct bw_ep *be = NULL;
	unsigned long long rx_bytes = LAT_MIN, tx_bytes, max_bw = 0, max_eps = 0, max_rd = 0;
	uint32_t run;
	bool acked, need_be;

	for (unsigned int k = 0; k < o->nr_lat; k++)
		rx_bytes = o->lat[k] > rx_bytes ? o->lat[k] : rx_bytes;
	for (unsigned int k = 0; k < o->nr_bw; k++)
		max_bw = o->bw[k] > max_bw ? o->bw[k] : max_bw;
	for (unsigned int k = 0; k < o->nr_eps; k++)
		max_eps = o->eps[k] > max_eps ? o->eps[k] : max_eps;
	for (unsigned int k = 0; k < o->nr_rlat; k++)
		max_rd = o->rlat[k] > max_rd ? o->rlat[k] : max_rd;
	for (unsigned int k = 0; k < o->nr_rbw; k++)
		max_rd = o->rbw[k] * max_eps > max_rd ? o->rbw[k] * max_eps : max_rd;
	tx_bytes = LAT_SLOTS * ((rx_bytes + 63) / 64 * 64);
	if (max_bw > tx_bytes)
		tx_bytes = max_bw;
	if (max_rd > tx_bytes)
		tx_bytes = max_rd;
	need_be = o->nr_bw || o->nr_rbw || o->abw;

	rp_open(&p, nic, 0, 1 + (need_be ? (unsigned int)max_eps : 0));
	rp_regions(&p, rx_bytes, tx_bytes);
	p.other = (struct clanq_addr){ o->node, o->service };
	cleanup_rp = &p;
	/* a run id per process: a write of an earlier client never matches */
	run = (uint32_t)((clanq_now_ns() ^ ((uint64_t)getpid() << 16)) & 0x7fffff) | 0x800000;
	printf("# clanq-rdma-pingpong client: node %u ep %u -> node %u ep %u\n",
	       p.dev.node, p.ep.addr.id, o->node, o->service);
	fflush(stdout);
	hello(&p, o->wait_s);

	if (o->nr_lat) {
		printf("# lat: round trips of RDMA writes, node %u -> %u -> %u, every byte checked;"
		       " us; sys/rt: driver entries of this side per round trip\n",
		       p.dev.node, o->node, p.dev.node);
		printf("%-6s %-8s %-8s %-10s %-10s %-10s %-10s %-10s %-8s %s\n", "#test", "bytes",
		       "iters", "min_us", "median_us", "avg_us", "p99_us", "max_us", "sys/rt",
		       "mode");
		for (unsigned int k = 0; k < o->nr_lat; k++)
			for (uint32_t m = 0; m < 2; m++)
				if (o->modes[m])
					lat_run(&p, o, run++ & 0xffffff, (uint32_t)o->lat[k], m);
	}
	if (need_be) {
		be = calloc(max_eps, sizeof(*be));
		if (!be)
			die("bandwidth endpoints: %s", strerror(ENOMEM));
		bw_open(&p, be, (unsigned int)max_eps);
	}
	if (o->nr_rlat || o->alat) {
		os_import(&p);
		printf("# one-sided: READs of node %u's region into ours, fetch-and-adds on its"
		       " last word; each op timed from post to completion, polled; us\n", o->node);
		printf("%-6s %-8s %-8s %-10s %-10s %-10s %-10s %-10s %-8s %s\n", "#test", "bytes",
		       "iters", "min_us", "median_us", "avg_us", "p99_us", "max_us", "sys/op",
		       "mode");
		for (unsigned int k = 0; k < o->nr_rlat; k++)
			os_lat(&p, o, OS_READ, o->rlat[k]);
		if (o->alat && p.ap1_atomic)
			os_lat(&p, o, OS_FADD, 8);
	}
	if (o->nr_rbw || o->abw) {
		os_import(&p);
		printf("# one-sided: READs (MB/s) and fetch-and-adds (Mops/s) from eps endpoints,"
		       " depth queued each\n");
		printf("%-6s %-8s %-5s %-6s %-8s %-8s %-10s %-10s %-8s %s\n", "#test", "bytes", "eps",
		       "depth", "ops", "seconds", "MB/s|Mop/s", "MiB/s", "sys/op", "mode");
		for (unsigned int k = 0; k < o->nr_rbw; k++)
			for (unsigned int j = 0; j < o->nr_eps; j++)
				os_bw(&p, be, o, OS_READ, o->rbw[k], (unsigned int)o->eps[j]);
		if (o->abw && p.ap1_atomic)
			for (unsigned int j = 0; j < o->nr_eps; j++)
				os_bw(&p, be, o, OS_FADD, 8, (unsigned int)o->eps[j]);
	}
	if (o->nr_bw) {
		printf("# bw: RDMA writes node %u -> %u, eps endpoints with depth writes queued each,"
		       " checked at the server; MB/s = 10^6 bytes/s; sys/w: driver entries per write\n",
		       p.dev.node, o->node);
		printf("%-6s %-8s %-5s %-6s %-8s %-8s %-10s %-10s %-8s %s\n", "#test", "bytes", "eps",
		       "depth", "writes", "seconds", "MB/s", "MiB/s", "sys/w", "mode");
		for (unsigned int k = 0; k < o->nr_bw; k++)
			for (unsigned int j = 0; j < o->nr_eps; j++)
				for (uint32_t m = 0; m < 2; m++)
					if (o->modes[m])
						bw_run(&p, be, o, run++ & 0xffffff, o->bw[k],
						       (unsigned int)o->eps[j], m);
	}

	/* bye: up to 3 times, until the server sends it back */
	p.session = false;
	acked = false;
	for (int i = 0; i < 3 && !acked; i++) {
		uint64_t deadline = deadline_in(&p);

		rp_send_bye(&p, 0);
		while (!acked && rp_recv(&p, &ans, deadline) == 0)
			acked = is_answer(&p, &ans, RP_BYE);
	}
	if (!acked)
		fprintf(stderr, "%s: warning: the server did not acknowledge bye\n", ex_prog);
	printf("# %llu notices, %llu OOB messages dropped (queue full)\n",
	       (unsigned long long)p.notices, (unsigned long long)clanq_ep_dropped(&p.ep));
	for (unsigned int e = 0; be && e < max_eps; e++)
		clanq_ep_destroy(&be[e].ep);
	free(be);
	rp_close(&p);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'i' },
		{ "ep", required_argument, NULL, 'e' },
		{ "timeout-ms", required_argument, NULL, 'T' },
		{ "region", required_argument, NULL, 'R' },
		{ "seconds", required_argument, NULL, 't' },
		{ "node", required_argument, NULL, 'N' },
		{ "lat", required_argument, NULL, 'L' },
		{ "count", required_argument, NULL, 'n' },
		{ "mode", required_argument, NULL, 'm' },
		{ "spin-us", required_argument, NULL, 's' },
		{ "bw", required_argument, NULL, 'B' },
		{ "eps", required_argument, NULL, 'E' },
		{ "depth", required_argument, NULL, 'D' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "wait", required_argument, NULL, 'w' },
		{ "read-lat", required_argument, NULL, 'r' },
		{ "atomic-lat", no_argument, NULL, 'a' },
		{ "read-bw", required_argument, NULL, 'G' },
		{ "atomic-bw", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct client_opts o = {
		.service = RP_SERVICE, .count = 1000, .depth = 4, .bytes = 64ull << 20,
		.wait_s = 60, .spin_ns = 20000, .eps = { 4 }, .nr_eps = 1,
		.modes = { true, false },
	};
	unsigned long long timeout_ms = 5000, region = 8ull << 20, seconds = 0;
	unsigned long long node = ~0ull;
	unsigned int nic = 0;
	bool spin_set = false;
	bool is_server;
	char buf[64], *tok, *save;
	int opt;

	ex_prog = "clanq-rdma-pingpong";
	/* the options may come before or after the role (GNU getopt permutes) */
	while ((opt = getopt_long(argc, argv, "i:e:T:R:t:N:L:n:m:B:E:D:b:w:r:aG:Ah", opts,
				  NULL)) != -1) {
		switch (opt) {
		case 'i': nic = (unsigned int)ex_parse_num("--nic", optarg, 0, 255); break;
		case 'e': o.service = (unsigned int)ex_parse_num("--ep", optarg, 1, CLANQ_SERVICE_MAX); break;
		case 'T': timeout_ms = ex_parse_num("--timeout-ms", optarg, 1, 3600000); break;
		case 'R': region = ex_parse_num("--region", optarg, LAT_MAX, 256ull << 20); break;
		case 't': seconds = ex_parse_num("--seconds", optarg, 1, 1ull << 32); break;
		case 'N': node = ex_parse_num("--node", optarg, 0, 0xfffffffeull); break;
		case 'L':
			o.nr_lat = ex_parse_list("--lat", optarg, LAT_MIN, LAT_MAX, o.lat, MAX_SIZES);
			for (unsigned int k = 0; k < o.nr_lat; k++)
				if (o.lat[k] % 8)
					ex_usage_error("--lat: %llu is not a multiple of 8", o.lat[k]);
			break;
		case 'n': o.count = ex_parse_num("--count", optarg, 1, 10000000); break;
		case 'm':
			if (strlen(optarg) >= sizeof(buf))
				ex_usage_error("--mode: '%s': say block, poll or both", optarg);
			strcpy(buf, optarg);
			o.modes[0] = o.modes[1] = false;
			for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (!strcmp(tok, "block"))
					o.modes[MODE_BLOCK] = true;
				else if (!strcmp(tok, "poll"))
					o.modes[MODE_POLL] = true;
				else if (!strcmp(tok, "both"))
					o.modes[MODE_BLOCK] = o.modes[MODE_POLL] = true;
				else
					ex_usage_error("--mode: '%s': say block, poll or both", tok);
			}
			if (!o.modes[0] && !o.modes[1])
				ex_usage_error("--mode: say block, poll or both");
			break;
		case 's':
			o.spin_ns = ex_parse_num("--spin-us", optarg, 0, 10000000) * 1000;
			spin_set = true;
			break;
		case 'B': o.nr_bw = ex_parse_list("--bw", optarg, 8, 16ull << 20, o.bw, MAX_SIZES); break;
		case 'E': o.nr_eps = ex_parse_list("--eps", optarg, 1, MAX_EPS, o.eps, MAX_SIZES); break;
		case 'D': o.depth = ex_parse_num("--depth", optarg, 1, EP_SLOTS - 1); break;
		case 'b': o.bytes = ex_parse_num("--bytes", optarg, 1, 1ull << 40); break;
		case 'w': o.wait_s = ex_parse_num("--wait", optarg, 1, 86400); break;
		case 'r': o.nr_rlat = ex_parse_list("--read-lat", optarg, 8, READ_MAX, o.rlat, MAX_SIZES); break;
		case 'a': o.alat = true; break;
		case 'G': o.nr_rbw = ex_parse_list("--read-bw", optarg, 8, READ_MAX, o.rbw, MAX_SIZES); break;
		case 'A': o.abw = true; break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	is_server = ex_is_server(argc, argv);
	ex_catch_signals();
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (is_server)
		return server(nic, o.service, region, seconds, timeout_ms * 1000000ull);
	if (node == ~0ull)
		ex_usage_error("client: say --node N (the server's node id)");
	o.node = (unsigned int)node;
	o.bw_ns = seconds * 1000000000ull;
	/* one CPU: a spin holds the CPU what it waits for needs */
	if (!spin_set && sysconf(_SC_NPROCESSORS_ONLN) == 1)
		o.spin_ns = 0;
	if (!o.nr_lat && !o.nr_bw && !o.nr_rlat && !o.nr_rbw && !o.alat && !o.abw) {
		o.lat[0] = 32;
		o.nr_lat = 1;
	}
	return client(nic, &o, timeout_ms * 1000000ull);
}
