// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * evq_demo: one server, many endpoints, one event queue.
 *
 * The server (node 0) creates NR_EPS endpoints and registers them all on
 * one evq. A client process on another node sends ROUNDS messages to each
 * endpoint, in a scattered order. The server takes events and drains
 * endpoints entirely at user level, blocking in the driver only when
 * there is nothing to do, and shows how many system calls it made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <clanq.h>
#include <clanq/admin.h>

#define NR_EPS	16
#define ROUNDS	8

static int client(const struct clanq_addr *dst)
{
	struct clanq_dev dev;
	struct clanq_ep ep;
	unsigned int i, r;
	int err;

	err = clanq_open_nic(&dev, 1);
	if (!err)
		err = clanq_ep_create(&dev, &ep, 0);
	for (r = 0; !err && r < ROUNDS; r++)
		for (i = 0; !err && i < NR_EPS; i++) {
			unsigned int k = (i * 7 + r) % NR_EPS;
			char text[CLANQ_OOB_PAYLOAD];
			int n = snprintf(text, sizeof(text), "round %u to ep %u", r, k);

			err = clanq_oob_send(&ep, dst[k], CLANQ_OOB_TYPE_USER,
					     text, (size_t)n + 1);
			if (!(i % 4))
				usleep(200);	/* let the server go to sleep */
		}
	if (err)
		fprintf(stderr, "client: %s\n", strerror(-err));
	return err ? 1 : 0;
}

int main(void)
{
	struct clanq_addr addrs[NR_EPS];
	struct clanq_ep eps[NR_EPS];
	unsigned int got = 0, events = 0, i;
	uint64_t entries0, entries1;
	struct clanq_event ev;
	struct clanq_evq evq;
	struct clanq_dev dev;
	int err, status;
	pid_t pid;

	err = clanq_open_nic(&dev, 0);
	if (!err)
		err = clanq_evq_create(&dev, &evq, NR_EPS);
	for (i = 0; !err && i < NR_EPS; i++) {
		err = clanq_ep_create(&dev, &eps[i], 16);
		if (!err)
			err = clanq_evq_register(&evq, &eps[i], CLANQ_EV_OOB, i);
		if (err > 0)
			err = 0;
		addrs[i] = eps[i].addr;
	}
	if (err) {
		fprintf(stderr, "evq_demo: set-up: %s\n", strerror(-err));
		return 1;
	}
	printf("server: node %u, %u endpoints (ids %u..%u) on one event queue\n",
	       dev.node, NR_EPS, addrs[0].id, addrs[NR_EPS - 1].id);

	pid = fork();
	if (pid == 0)
		_exit(client(addrs));
	clanq_ctx_entries(&dev, &entries0);
	while (got < NR_EPS * ROUNDS) {
		struct clanq_oob_msg msg;

		err = clanq_evq_wait(&evq, &ev, 5000000000ll);
		if (err) {
			fprintf(stderr, "evq_demo: wait: %s\n",
				err == -ETIMEDOUT ? "timed out" : strerror(-err));
			return 1;
		}
		events++;
		/* the event's bit is clear: drain everything, then look again */
		while (clanq_oob_recv(&eps[ev.cookie], &msg) == 0) {
			if (got < 3 || got == NR_EPS * ROUNDS - 1)
				printf("  ep %2llu <- node %u ep %u: \"%s\"\n",
				       (unsigned long long)ev.cookie, msg.src.node,
				       msg.src.id, (char *)msg.payload);
			else if (got == 3)
				printf("  ...\n");
			got++;
		}
	}
	clanq_ctx_entries(&dev, &entries1);
	waitpid(pid, &status, 0);
	printf("server: %u messages in %u events, %llu system calls (blocking waits only)\n",
	       got, events, (unsigned long long)(entries1 - entries0 - 1));
	for (i = 0; i < NR_EPS; i++)
		if (clanq_ep_dropped(&eps[i]))
			printf("  ep %u dropped %llu\n", i,
			       (unsigned long long)clanq_ep_dropped(&eps[i]));
	clanq_evq_destroy(&evq);
	clanq_close(&dev);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
