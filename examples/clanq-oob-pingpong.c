// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-oob-pingpong: round trips of OOB messages between two endpoints,
 * on one host (the loop wire, two soft NICs) or between hosts (the verbs
 * wire): the smallest thing two clanq nodes can say to each other.
 *
 *   clanq-oob-pingpong server [--nic N] [--ep ID] [--seconds S]
 *   clanq-oob-pingpong client --node N [--nic N] [--ep ID] [-n COUNT] [--size S]
 *
 * The server's endpoint has a service number (--ep, default 7007) as its
 * id, so the client names it without being told. The server sends every
 * message back to its sender as it came (type, length, payload) and
 * leaves when a client says "bye" (or after --seconds).
 *
 * The client's first message (sequence 0, "hello") is sent again every
 * 250 ms until the server answers, for up to --wait seconds: the server
 * (or its host) may still be starting. Then COUNT messages, one at a
 * time: each waits for its echo at most --timeout-ms (an error, never a
 * hang), and every byte of the echo is checked. A message's type carries
 * the low 24 bits of its sequence number, so a late copy of an earlier
 * echo is recognised (and ignored) even with a payload of 0 bytes.
 * It prints the round trip's min/median/p99/max in microseconds and
 * messages per second, then says "bye" (sent up to 3 times, until the
 * server acknowledges it by sending it back).
 *
 * Waiting is a short spin, then a block in the driver on an event queue
 * (CLANQ_EV_OOB): a VM with one vCPU must not spend it spinning.
 *
 * Exit status: 0 every echo came back right; 1 a failure (a missing or
 * wrong echo, the driver, the server gone); 2 bad arguments.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <signal.h>
#include <stdint.h>

#include <clanq.h>

#include "example.h"

#define PP_SERVICE	7007u
/* message types: >= CLANQ_OOB_TYPE_USER (not the library's), no notice bit */
#define PP_PING		0x0f000000u	/* | (seq & PP_SEQ) */
#define PP_BYE		0x0e000000u
#define PP_SEQ		0x00ffffffu
#define PP_KIND		(~PP_SEQ)

static void usage(void)
{
	printf("usage: %s server [options]\n"
	       "       %s client --node N [options]\n"
	       "Round trips of OOB messages between two clanq endpoints.\n\n"
	       "  -i, --nic N          use /dev/clanqN (default 0)\n"
	       "  -e, --ep ID          the server's endpoint: a service number,\n"
	       "                       1..65535 (default %u)\n"
	       "      --spin-us US     spin this long before blocking (default 20)\n"
	       "server:\n"
	       "  -t, --seconds S      give up after S seconds without a bye\n"
	       "                       (exit status 1; default: wait for it)\n"
	       "client:\n"
	       "  -N, --node N         the server's node id (required)\n"
	       "  -n, --count N        timed round trips (default 1000)\n"
	       "  -S, --size S         payload bytes, 0..%u (default 32)\n"
	       "  -T, --timeout-ms MS  wait this long for each echo (default 2000)\n"
	       "  -w, --wait S         retry the first message this long while the\n"
	       "                       server is not there yet (default 60)\n"
	       "  -h, --help           this text\n\n"
	       "Exit status: 0 every echo right, 1 failed, 2 bad arguments.\n",
	       ex_prog, ex_prog, PP_SERVICE, CLANQ_OOB_PAYLOAD);
}

struct pp {
	struct clanq_dev dev;
	struct clanq_ep ep;
	struct clanq_evq evq;
	uint64_t notices;	/* driver notices taken (unreachable, ...) */
	uint64_t blocks;	/* waits that reached the event queue */
};

static void pp_open(struct pp *p, unsigned int nic, unsigned int service,
		    uint64_t spin_ns)
{
	struct clanq_ep_attr attr = { .service = service };
	int err;

	ex_open_dev(&p->dev, nic);
	err = clanq_ep_create_attr(&p->dev, &p->ep, &attr);
	if (err)
		ex_fail(err == -EADDRINUSE ? "endpoint: service taken" : "endpoint", err);
	err = clanq_evq_create(&p->dev, &p->evq, 1);
	if (err)
		ex_fail("event queue", err);
	err = clanq_evq_register(&p->evq, &p->ep, CLANQ_EV_OOB, 0);
	if (err < 0)
		ex_fail("event queue registration", err);
	clanq_evq_set_spin(&p->evq, spin_ns);
}

static void pp_close(struct pp *p)
{
	clanq_evq_destroy(&p->evq);
	clanq_ep_destroy(&p->ep);
	clanq_close(&p->dev);
}

/*
 * The next OOB message before deadline (clanq_now_ns() time): 0, or
 * -ETIMEDOUT, -EINTR (a signal), -errno of the wait.
 */
static int pp_recv(struct pp *p, struct clanq_oob_msg *msg, uint64_t deadline)
{
	struct clanq_event ev;
	uint64_t now;
	int err;

	for (;;) {
		if (clanq_oob_recv(&p->ep, msg) == 0)
			return 0;
		if (ex_stop)
			return -EINTR;
		now = clanq_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		/* the event's bit is cleared by the wait: the loop drains */
		err = clanq_evq_wait(&p->evq, &ev, (int64_t)(deadline - now));
		p->blocks++;
		if (err && err != -ETIMEDOUT && err != -EINTR)
			return err;
	}
}

/* ---- server ---- */

static int server(unsigned int nic, unsigned int service, uint64_t spin_ns,
		  unsigned long long seconds)
{
	struct clanq_oob_msg msg;
	struct pp p = { 0 };
	uint64_t t0, deadline, echoed = 0, failed = 0;
	bool bye = false;
	int err = 0;

	pp_open(&p, nic, service, spin_ns);
	printf("# clanq-oob-pingpong server: node %u ep %u\n", p.dev.node, p.ep.addr.id);
	fflush(stdout);
	t0 = clanq_now_ns();
	deadline = seconds ? t0 + seconds * 1000000000ull : ~0ull;
	while (!bye) {
		err = pp_recv(&p, &msg, deadline);
		if (err)
			break;
		if (msg.type & CLANQ_OOB_NOTICE) {
			/* an echo nobody took (a client gone): counted only */
			p.notices++;
			continue;
		}
		if ((msg.type & PP_KIND) == PP_BYE) {
			printf("# bye from node %u ep %u\n", msg.src.node, msg.src.id);
			bye = true;
		}
		err = clanq_oob_send(&p.ep, msg.src, msg.type, msg.payload,
				     msg.len > CLANQ_OOB_PAYLOAD ? CLANQ_OOB_PAYLOAD : msg.len);
		if (err) {
			if (failed++ < 5)
				fprintf(stderr, "%s: echo to node %u ep %u: %s\n", ex_prog,
					msg.src.node, msg.src.id, strerror(-err));
			err = 0;
			continue;
		}
		echoed++;
	}
	printf("server: %llu messages echoed, %llu echoes failed, %llu notices, "
	       "%llu dropped (queue full), %.1f s\n",
	       (unsigned long long)echoed, (unsigned long long)failed,
	       (unsigned long long)p.notices,
	       (unsigned long long)clanq_ep_dropped(&p.ep),
	       (double)(clanq_now_ns() - t0) / 1e9);
	pp_close(&p);
	if (bye || err == -EINTR)
		return 0;
	if (err == -ETIMEDOUT) {
		fprintf(stderr, "%s: no bye within %llu s\n", ex_prog, seconds);
		return EX_FAIL;
	}
	ex_fail("wait", err);
	return EX_FAIL;
}

/* ---- client ---- */

static void fill(uint8_t *buf, size_t len, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seq * 131u + i * 7u + 0x5a);
}

/* Is msg the echo of ping seq, from dst, right to the byte? 1 yes, 0 a
 * late echo of an earlier message (ignore it), -1 wrong (says why). */
static int check_echo(const struct clanq_oob_msg *msg, struct clanq_addr dst,
		      uint32_t seq, size_t size)
{
	uint8_t want[CLANQ_OOB_PAYLOAD];

	if ((msg->type & PP_KIND) == PP_PING && (msg->type & PP_SEQ) != (seq & PP_SEQ))
		return 0;
	if (msg->type != (PP_PING | (seq & PP_SEQ))) {
		fprintf(stderr, "%s: message %u: unexpected type 0x%x from node %u ep %u\n",
			ex_prog, seq, msg->type, msg->src.node, msg->src.id);
		return -1;
	}
	if (msg->src.node != dst.node || msg->src.id != dst.id) {
		fprintf(stderr, "%s: message %u: echo from node %u ep %u, not %u/%u\n",
			ex_prog, seq, msg->src.node, msg->src.id, dst.node, dst.id);
		return -1;
	}
	if (msg->len != size) {
		fprintf(stderr, "%s: message %u: echo of %u bytes, not %zu\n",
			ex_prog, seq, msg->len, size);
		return -1;
	}
	fill(want, size, seq);
	for (size_t i = 0; i < size; i++)
		if (msg->payload[i] != want[i]) {
			fprintf(stderr, "%s: message %u: byte %zu is 0x%02x, not 0x%02x\n",
				ex_prog, seq, i, msg->payload[i], want[i]);
			return -1;
		}
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Send ping 0 every retry_ns (the node unknown yet, nobody at the id yet)
 * until its echo comes; exits when wait_s pass first. */
static void hello(struct pp *p, struct clanq_addr dst, size_t size,
		  unsigned long long wait_s, uint64_t retry_ns)
{
	uint8_t buf[CLANQ_OOB_PAYLOAD];
	struct clanq_oob_msg msg;
	uint64_t t0 = clanq_now_ns(), until = t0 + wait_s * 1000000000ull, next;
	unsigned int tries = 0, unreachable = 0;
	int err, last = 0;

	fill(buf, size, 0);
	for (;;) {
		if (ex_stop)
			ex_fail("hello", -EINTR);
		if (clanq_now_ns() >= until) {
			fprintf(stderr, "%s: no answer from node %u ep %u within %llu s "
				"(%u tries, %u unreachable notices%s%s)\n", ex_prog,
				dst.node, dst.id, wait_s, tries, unreachable,
				last ? ", last send: " : "", last ? strerror(-last) : "");
			exit(EX_FAIL);
		}
		tries++;
		err = clanq_oob_send(&p->ep, dst, PP_PING, buf, size);
		if (err && err != -EHOSTUNREACH && err != -ENETUNREACH &&
		    err != -EAGAIN && err != -ENOTCONN && err != -ECONNREFUSED)
			ex_fail("send", err);
		last = err;
		next = clanq_now_ns() + retry_ns;
		if (next > until)
			next = until;
		while ((err = pp_recv(p, &msg, next)) == 0) {
			if (msg.type == CLANQ_OOB_UNREACHABLE) {
				unreachable++;	/* nobody at that id yet */
				continue;
			}
			if (msg.type & CLANQ_OOB_NOTICE) {
				p->notices++;
				continue;
			}
			err = check_echo(&msg, dst, 0, size);
			if (err < 0)
				exit(EX_FAIL);
			if (err > 0) {
				printf("# hello answered after %.1f ms (%u tries)\n",
				       (double)(clanq_now_ns() - t0) / 1e6, tries);
				return;
			}
		}
		if (err != -ETIMEDOUT && err != -EINTR)
			ex_fail("wait", err);
	}
}

/* Say bye: sent up to 3 times until the server sends it back. */
static bool bye(struct pp *p, struct clanq_addr dst, uint64_t timeout_ns)
{
	struct clanq_oob_msg msg;
	int err;

	for (int i = 0; i < 3; i++) {
		uint64_t deadline;

		err = clanq_oob_send(&p->ep, dst, PP_BYE, NULL, 0);
		if (err) {
			fprintf(stderr, "%s: bye: %s\n", ex_prog, strerror(-err));
			return false;
		}
		deadline = clanq_now_ns() + timeout_ns;
		while (pp_recv(p, &msg, deadline) == 0)
			if (msg.type == PP_BYE && msg.src.node == dst.node &&
			    msg.src.id == dst.id)
				return true;
	}
	fprintf(stderr, "%s: warning: the server did not acknowledge bye\n", ex_prog);
	return false;
}

static int client(unsigned int nic, unsigned int service, uint64_t spin_ns,
		  unsigned int node, unsigned long long count, size_t size,
		  unsigned long long timeout_ms, unsigned long long wait_s)
{
	uint8_t buf[CLANQ_OOB_PAYLOAD];
	struct clanq_addr dst = { .node = node, .id = service };
	struct clanq_oob_msg msg;
	struct pp p = { 0 };
	uint64_t *rtt, t0, t1, start, late = 0;
	uint64_t timeout_ns = timeout_ms * 1000000ull;
	int err;

	rtt = calloc(count, sizeof(*rtt));
	if (!rtt)
		ex_fail("round-trip table", -ENOMEM);
	pp_open(&p, nic, 0, spin_ns);
	printf("# clanq-oob-pingpong client: node %u ep %u -> node %u ep %u, "
	       "%llu messages of %zu bytes\n", p.dev.node, p.ep.addr.id, node,
	       service, count, size);
	fflush(stdout);
	hello(&p, dst, size, wait_s, 250000000ull);

	start = clanq_now_ns();
	for (uint32_t seq = 1; seq <= count; seq++) {
		fill(buf, size, seq);
		t0 = clanq_now_ns();
		err = clanq_oob_send(&p.ep, dst, PP_PING | (seq & PP_SEQ), buf, size);
		if (err) {
			fprintf(stderr, "%s: message %u: send: %s\n", ex_prog, seq,
				strerror(-err));
			return EX_FAIL;
		}
		for (;;) {
			err = pp_recv(&p, &msg, t0 + timeout_ns);
			if (err == -ETIMEDOUT) {
				fprintf(stderr, "%s: message %u: no echo within %llu ms\n",
					ex_prog, seq, timeout_ms);
				return EX_FAIL;
			}
			if (err)
				ex_fail("wait", err);
			if (msg.type == CLANQ_OOB_UNREACHABLE) {
				fprintf(stderr, "%s: message %u: node %u ep %u is gone "
					"(unreachable notice)\n", ex_prog, seq,
					msg.src.node, msg.src.id);
				return EX_FAIL;
			}
			if (msg.type & CLANQ_OOB_NOTICE) {
				p.notices++;
				continue;
			}
			err = check_echo(&msg, dst, seq, size);
			if (err < 0)
				return EX_FAIL;
			if (err > 0)
				break;
			late++;
		}
		t1 = clanq_now_ns();
		rtt[seq - 1] = t1 - t0;
	}
	t1 = clanq_now_ns();

	qsort(rtt, count, sizeof(*rtt), cmp_u64);
	printf("%-6s %-8s %-10s %-10s %-10s %-10s %s\n", "bytes", "msgs",
	       "min_us", "median_us", "p99_us", "max_us", "msgs_per_s");
	printf("%-6zu %-8llu %-10.1f %-10.1f %-10.1f %-10.1f %.0f\n", size, count,
	       (double)rtt[0] / 1e3, (double)rtt[count / 2] / 1e3,
	       (double)rtt[(count * 99) / 100] / 1e3,
	       (double)rtt[count - 1] / 1e3,
	       (double)count * 1e9 / (double)(t1 - start));
	printf("# every byte of %llu echoes checked; %llu late copies ignored, "
	       "%llu blocking waits\n", count, (unsigned long long)late,
	       (unsigned long long)p.blocks);
	bye(&p, dst, timeout_ns);
	pp_close(&p);
	free(rtt);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'i' },
		{ "ep", required_argument, NULL, 'e' },
		{ "spin-us", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 't' },
		{ "node", required_argument, NULL, 'N' },
		{ "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 'S' },
		{ "timeout-ms", required_argument, NULL, 'T' },
		{ "wait", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long long count = 1000, size = 32, timeout_ms = 2000, wait_s = 60;
	unsigned long long spin_us = 20, seconds = 0, node = ~0ull;
	unsigned int nic = 0, service = PP_SERVICE;
	bool is_server;
	int opt;

	ex_prog = "clanq-oob-pingpong";
	/* the options may come before or after the role (GNU getopt permutes) */
	while ((opt = getopt_long(argc, argv, "i:e:t:N:n:S:T:w:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'i': nic = (unsigned int)ex_parse_num("--nic", optarg, 0, 255); break;
		case 'e': service = (unsigned int)ex_parse_num("--ep", optarg, 1, CLANQ_SERVICE_MAX); break;
		case 's': spin_us = ex_parse_num("--spin-us", optarg, 0, 10000000); break;
		case 't': seconds = ex_parse_num("--seconds", optarg, 1, 1ull << 32); break;
		case 'N': node = ex_parse_num("--node", optarg, 0, 0xfffffffeull); break;
		case 'n': count = ex_parse_num("--count", optarg, 1, 10000000); break;
		case 'S': size = ex_parse_num("--size", optarg, 0, CLANQ_OOB_PAYLOAD); break;
		case 'T': timeout_ms = ex_parse_num("--timeout-ms", optarg, 1, 3600000); break;
		case 'w': wait_s = ex_parse_num("--wait", optarg, 1, 86400); break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	is_server = ex_is_server(argc, argv);
	ex_catch_signals();

	if (is_server)
		return server(nic, service, spin_us * 1000, seconds);
	if (node == ~0ull)
		ex_usage_error("client: say --node N (the server's node id)");
	return client(nic, service, spin_us * 1000, (unsigned int)node, count,
		      (size_t)size, timeout_ms, wait_s);
}
