// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * clanq-stream: one-way bulk transfer over a connection, with flow
 * control (the receiver's credit) and checksums, as the paper's
 * streaming test: the receiver (--listen) takes one stream at a time and
 * prints what arrived and how fast; the sender (--to NODE) sends
 * messages of --size bytes for --bytes in all (or --seconds).
 *
 * Every message starts with a 24-byte header, sent by gather
 * (clanq_sendv): its sequence number and a checksum of its payload. The
 * receiver checks both in place (clanq_recv_peek: no copy) and, at the
 * end, the totals the sender's last message announces: a message lost,
 * duplicated, reordered or damaged fails the run (exit 1). --no-check
 * skips the payload's checksum on both sides (the sequence and the
 * totals are still checked), to see the transfer alone.
 *
 * A message longer than one record of the receiver's ring (with
 * --default-ring, anything over about 2,000 bytes) is never whole in
 * the ring: clanq_recv_peek() leaves it queued (-EMSGSIZE), and the
 * receiver asks its size (clanq_recv_size) and copies it out instead.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <sys/uio.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/admin.h>
#include <clanq/net.h>

#include "example.h"

#define HDR		((size_t)sizeof(struct stream_hdr))
#define PATTERN		(64u << 10)	/* payloads are windows onto it */
#define SEQ_END		(~0ull)		/* the last message: totals */

struct stream_hdr {
	uint64_t seq;
	uint64_t flags;	/* HDR_NO_SUM: the sender computed no checksum */
	uint64_t sum;	/* of the payload; or, in the last one, the bytes sent */
};

#define HDR_NO_SUM	0x1ull

static bool no_check;

static void usage(void)
{
	printf("usage: %s --listen [options]      receive streams\n"
	       "       %s --to NODE [options]     send one\n"
	       "One-way bulk transfer with flow control and checksums.\n\n"
	       "  -l, --listen         receive (one stream at a time)\n"
	       "  -T, --to NODE        send to the receiver on NODE\n"
	       "  -n, --nic N          our /dev/clanqN (default 0)\n"
	       "  -s, --service S      service number (default 9)\n"
	       "  -S, --size BYTES     message size, 25 .. 512m (default 64k; k, m, g)\n"
	       "  -b, --bytes BYTES    send this much payload (default 256m)\n"
	       "  -t, --seconds S      send for S seconds instead\n"
	       "  -x, --streams N      receiver: exit after N streams (default 1)\n"
	       "      --ring BYTES     the receiver's ring (default 4 messages, >= 256k)\n"
	       "      --default-ring   the library's default rings (one page): longer\n"
	       "                       messages go through them in pieces\n"
	       "      --rdma-threshold B  messages of B bytes or more by RDMA\n"
	       "      --rdma-only      every message by the RDMA engine\n"
	       "      --no-check       sender: no payload checksums (the sequence and\n"
	       "                       the totals are still checked)\n"
	       "  -h, --help           this text\n\n"
	       "Exit status: 0 everything arrived intact, 1 failed, 2 bad arguments.\n",
	       ex_prog, ex_prog);
}

/* A 64-bit checksum of len bytes (len % 8 == 0 not required). */
static uint64_t checksum(const uint8_t *p, size_t len)
{
	uint64_t a = 0x243f6a8885a308d3ull, b = 0, w;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		a += w;
		b += a;
	}
	for (; i < len; i++) {
		a += p[i];
		b += a;
	}
	return a ^ (b << 1) ^ len;
}

/*
 * The next message: in place in the ring if it is whole there, else
 * copied into *buf (grown to fit; *cap its size). *peeked says which,
 * for clanq_recv_done().
 */
static ssize_t next_message(struct clanq_conn *c, const uint8_t **data,
			    uint8_t **buf, size_t *cap, bool *peeked)
{
	ssize_t n = clanq_recv_peek(c, (const void **)data, 0);
	uint8_t *p;

	*peeked = n > 0;
	if (n != -EMSGSIZE)
		return n;
	n = clanq_recv_size(c, 0);
	if (n <= 0)
		return n;
	if ((size_t)n > *cap) {
		p = realloc(*buf, (size_t)n);
		if (!p)
			return -ENOMEM;
		*buf = p;
		*cap = (size_t)n;
	}
	*data = *buf;
	return clanq_recv(c, *buf, *cap, 0);
}

static int receiver(struct clanq_dev *dev, struct clanq_net *net,
		    unsigned int service, unsigned long long streams)
{
	uint8_t *buf = NULL;
	size_t cap = 0;
	/*
	 * The sender asks for its ring (--size, --ring): a receiver of
	 * streams lets it have up to 64 MiB. (A server decides its memory;
	 * the default cap is one page: clanq_listen_attr(3).)
	 */
	struct clanq_listen_attr la = { .max_rx_ring = 64u << 20 };
	struct clanq_listener *l;
	int err, bad = 0;

	err = clanq_listen_attr(net, &l, service, 4, &la);
	if (err)
		ex_fail(err == -EADDRINUSE ? "listen: service taken" : "listen", err);
	printf("# clanq-stream: receiving on node %u service %u\n", dev->node, service);
	fflush(stdout);
	for (unsigned long long s = 0; s < streams; s++) {
		uint64_t seq = 0, bytes = 0, sums = 0, t0 = 0, t1, e0, e1;
		struct stream_hdr h;
		struct clanq_conn *c;
		const uint8_t *data;
		bool ended = false, peeked;
		ssize_t n;

		err = clanq_accept(l, &c, NULL, -1);
		if (err)
			ex_fail("accept", err);
		(void)clanq_ctx_entries(dev, &e0);
		for (;;) {
			n = next_message(c, &data, &buf, &cap, &peeked);
			if (n <= 0)
				break;
			if (!t0)
				t0 = clanq_now_ns();
			if ((size_t)n < HDR) {
				fprintf(stderr, "%s: message %llu: %zd bytes, no header\n",
					ex_prog, (unsigned long long)seq, n);
				bad = 1;
				break;
			}
			memcpy(&h, data, sizeof(h));
			if (h.seq == SEQ_END) {
				ended = true;
				if (h.sum != bytes) {
					fprintf(stderr, "%s: the sender sent %llu bytes, %llu arrived\n",
						ex_prog, (unsigned long long)h.sum,
						(unsigned long long)bytes);
					bad = 1;
				}
				if (peeked)
					clanq_recv_done(c);
				continue;	/* then end of stream */
			}
			if (h.seq != seq) {
				fprintf(stderr, "%s: message %llu came as number %llu\n",
					ex_prog, (unsigned long long)seq,
					(unsigned long long)h.seq);
				bad = 1;
				break;
			}
			if (!(h.flags & HDR_NO_SUM)) {
				if (h.sum != checksum(data + HDR, (size_t)n - HDR)) {
					fprintf(stderr, "%s: message %llu: checksum differs\n",
						ex_prog, (unsigned long long)seq);
					bad = 1;
					break;
				}
				sums++;
			}
			bytes += (uint64_t)n - HDR;
			seq++;
			if (peeked)
				clanq_recv_done(c);
		}
		t1 = clanq_now_ns();
		(void)clanq_ctx_entries(dev, &e1);
		if (n < 0) {
			fprintf(stderr, "%s: receive: %s\n", ex_prog, strerror((int)-n));
			bad = 1;
		} else if (!bad && !ended) {
			fprintf(stderr, "%s: the stream ended without its totals\n", ex_prog);
			bad = 1;
		}
		if (seq && t1 > t0) {
			double secs = (double)(t1 - t0) / 1e9;

			printf("received: %llu messages of %llu bytes, %.1f MiB in %.3f s: "
			       "%.1f MiB/s, %.3f Mmsg/s, %.4f system calls/msg, %s\n",
			       (unsigned long long)seq, (unsigned long long)(bytes / seq + HDR),
			       (double)bytes / 1048576.0, secs,
			       (double)bytes / 1048576.0 / secs, (double)seq / secs / 1e6,
			       (double)(e1 - e0 - 1) / (double)seq,
			       bad ? "FAILED" : sums == seq ? "every checksum right" :
			       sums ? "some checksummed" : "sequence checked");
		}
		fflush(stdout);
		clanq_conn_close(c);
		if (bad)
			break;
	}
	clanq_listener_close(l);
	free(buf);
	return bad ? EX_FAIL : 0;
}

static int sender(struct clanq_dev *dev, struct clanq_net *net, unsigned int node,
		  unsigned int service, size_t size, unsigned long long total,
		  unsigned long long seconds, struct clanq_conn_opts *co, bool default_ring)
{
	size_t payload = size - HDR;
	uint8_t *pattern = malloc(PATTERN + payload);
	uint64_t seq = 0, bytes = 0, t0, t1, e0, e1, deadline, x = 88172645463325252ull;
	struct stream_hdr h;
	struct clanq_conn_stats st;
	struct clanq_conn *c;
	struct iovec iov[2] = { { &h, HDR }, { NULL, payload } };
	int err;

	if (!pattern)
		ex_fail("memory", -ENOMEM);
	for (size_t i = 0; i < PATTERN + payload; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		pattern[i] = (uint8_t)x;
	}
	if (!co->rx_ring && !default_ring)
		co->tx_ring = (uint32_t)(4 * size + 64 < (256u << 10) ? 256u << 10 : 4 * size + 64);
	err = ex_connect(net, &c, node, service, co);
	if (err)
		ex_fail(err == -ECONNREFUSED ? "connect: refused (is the receiver there?)" :
			"connect", err);
	(void)clanq_ctx_entries(dev, &e0);
	t0 = clanq_now_ns();
	deadline = seconds ? t0 + seconds * 1000000000ull : ~0ull;
	while (seconds ? clanq_now_ns() < deadline : bytes < total) {
		iov[1].iov_base = pattern + (seq * 64) % PATTERN;
		h.seq = seq;
		h.flags = no_check ? HDR_NO_SUM : 0;
		h.sum = no_check ? 0 : checksum(iov[1].iov_base, payload);
		err = clanq_sendv(c, iov, 2, 0);
		if (err)
			ex_fail("send", err);
		seq++;
		bytes += payload;
	}
	h.seq = SEQ_END;
	h.flags = 0;
	h.sum = bytes;
	err = clanq_send(c, &h, HDR, 0);
	if (err)
		ex_fail("send", err);
	t1 = clanq_now_ns();
	(void)clanq_ctx_entries(dev, &e1);
	clanq_conn_stats(c, &st);
	printf("sent: %llu messages of %zu bytes (%s), %.1f MiB in %.3f s: %.1f MiB/s, "
	       "%.4f system calls/msg, %llu waits for credit, %llu records by RDMA\n",
	       (unsigned long long)seq, size,
	       size <= clanq_conn_eager_max(c) ? "one record each" : "in pieces",
	       (double)bytes / 1048576.0,
	       (double)(t1 - t0) / 1e9,
	       (double)bytes / 1048576.0 / ((double)(t1 - t0) / 1e9),
	       (double)(e1 - e0 - 1) / (double)(seq + 1),
	       (unsigned long long)st.credit_waits, (unsigned long long)st.rdma_sends);
	clanq_conn_close(c);
	free(pattern);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", no_argument, NULL, 'l' },
		{ "to", required_argument, NULL, 'T' },
		{ "nic", required_argument, NULL, 'n' },
		{ "service", required_argument, NULL, 's' },
		{ "size", required_argument, NULL, 'S' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "seconds", required_argument, NULL, 't' },
		{ "streams", required_argument, NULL, 'x' },
		{ "ring", required_argument, NULL, 'R' },
		{ "rdma-threshold", required_argument, NULL, 'H' },
		{ "rdma-only", no_argument, NULL, 'O' },
		{ "no-check", no_argument, NULL, 'C' },
		{ "default-ring", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long long size = 64 << 10, total = 256ull << 20, seconds = 0, streams = 1;
	unsigned int nic = 0, service = 9, node = 0;
	struct clanq_conn_opts co = { 0 };
	bool listen = false, to = false, default_ring = false;
	struct clanq_net *net;
	struct clanq_dev dev;
	int opt, rc;

	ex_prog = "clanq-stream";
	while ((opt = getopt_long(argc, argv, "lT:n:s:S:b:t:x:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'l': listen = true; break;
		case 'T': to = true;
			node = (unsigned int)ex_parse_num("--to", optarg, 0, 1u << 30); break;
		case 'n': nic = (unsigned int)ex_parse_num("--nic", optarg, 0, 255); break;
		case 's': service = (unsigned int)ex_parse_num("--service", optarg, 1, 65535); break;
		case 'S': size = ex_parse_num("--size", optarg, HDR + 1, 512u << 20); break;
		case 'b': total = ex_parse_num("--bytes", optarg, 1, 1ull << 50); break;
		case 't': seconds = ex_parse_num("--seconds", optarg, 1, 1u << 20); break;
		case 'x': streams = ex_parse_num("--streams", optarg, 1, 1ull << 32); break;
		case 'R': co.tx_ring = co.rx_ring =
				(uint32_t)ex_parse_num("--ring", optarg, 64, 1u << 30); break;
		case 'H': co.rdma_threshold = (uint32_t)ex_parse_num("--rdma-threshold", optarg,
								    1, 1u << 30); break;
		case 'O': co.flags |= CLANQ_CONN_RDMA_ONLY; break;
		case 'C': no_check = true; break;
		case 'D': default_ring = true; break;
		case 'h': usage(); return 0;
		default: ex_usage_error("unknown option");
		}
	}
	if (optind < argc)
		ex_usage_error("unexpected argument '%s'", argv[optind]);
	if (listen == to)
		ex_usage_error("say --listen or --to NODE");

	ex_open_net(&dev, &net, nic, NULL);
	if (listen)
		rc = receiver(&dev, net, service, streams);
	else
		rc = sender(&dev, net, node, service, (size_t)size, total, seconds, &co,
			    default_ring);
	clanq_net_close(net);
	clanq_close(&dev);
	return rc;
}
