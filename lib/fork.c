// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libclanq: fork().
 *
 * The model is the verbs one (docs/decisions.md "fork()"): what a
 * process made stays its own. A child of fork() shares its parent's open
 * files, so the kernel would let it use the parent's endpoints, rings
 * and connections as the parent does, racing the parent for them. The
 * library does not: in the child, pthread_atfork()'s child handler
 *  - marks every context and evq descriptor the parent opened through
 *    the library as inherited: every library call on an object that
 *    lives in one fails with -EBADFD, except the calls that let go of an
 *    object, which drop the child's copies (its mappings, its
 *    descriptor) and leave the parent's object alone;
 *  - replaces each mapping of those files with private zeroed memory
 *    of the same size and protection (as MADV_WIPEONFORK would, which
 *    the kernel offers only for private anonymous memory), so that the
 *    inline fast paths of clanq.h, which enter no library function, can
 *    neither read nor write the parent's rings and regions.
 * The child opens its own device for its own objects. The descriptors
 * stay open until the child closes them or exits; the parent's objects
 * go when the last holder of the file closes it, never when a child
 * does.
 *
 * Descriptors are kept in two bitmaps (this process's own, and the
 * inherited), so that the check is a load when nothing was ever forked
 * and a bit test after, and the fork handlers allocate nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <clanq.h>

#include "fork.h"

/* fs.nr_open's default: a descriptor above it cannot be tracked */
#define FD_MAX		(1u << 20)
#define WORDS		(FD_MAX / 64)

int clanq_fork_gen;

static uint64_t own[WORDS];	/* opened by this process (since its fork) */
static uint64_t inherited[WORDS];
static unsigned int words_used;	/* own[] and inherited[] past it are zero */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void bit_set(uint64_t *map, int fd)
{
	__atomic_fetch_or(&map[fd / 64], 1ull << (fd % 64), __ATOMIC_RELAXED);
}

static void bit_clear(uint64_t *map, int fd)
{
	__atomic_fetch_and(&map[fd / 64], ~(1ull << (fd % 64)), __ATOMIC_RELAXED);
}

static bool bit_test(const uint64_t *map, int fd)
{
	return __atomic_load_n(&map[fd / 64], __ATOMIC_RELAXED) >> (fd % 64) & 1;
}

bool clanq_fork_inherited_slow(int fd)
{
	return fd >= 0 && (unsigned int)fd < FD_MAX && bit_test(inherited, fd);
}

/*
 * Is the mapping at this line of /proc/self/maps one of an inherited
 * context (its device node's dev:inode) or evq (its anon inode's name)?
 */
struct file_id {
	unsigned int major, minor;
	unsigned long ino;
};

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static unsigned long parse_num(const char **s, unsigned int base)
{
	unsigned long v = 0;

	for (; base == 16 ? is_hex(**s) : (**s >= '0' && **s <= '9'); (*s)++)
		v = v * base + (unsigned long)(**s <= '9' ? **s - '0' : **s - 'a' + 10);
	return v;
}

/* Replace the mapping @line describes if it is one of @ids or an evq. */
static void wipe_line(const char *line, const struct file_id *ids,
		      unsigned int nr)
{
	static const char evq[] = "anon_inode:[clanq-evq]";
	unsigned long start, end, ino;
	unsigned int major, minor, i;
	const char *s = line;
	int prot = 0;
	bool ours;

	start = parse_num(&s, 16);
	if (*s++ != '-')
		return;
	end = parse_num(&s, 16);
	if (*s++ != ' ' || end <= start)
		return;
	if (s[0] == 'r')
		prot |= PROT_READ;
	if (s[1] == 'w')
		prot |= PROT_WRITE;
	/* perms, offset */
	while (*s && *s != ' ')
		s++;
	while (*s == ' ')
		s++;
	while (*s && *s != ' ')
		s++;
	while (*s == ' ')
		s++;
	major = (unsigned int)parse_num(&s, 16);
	if (*s++ != ':')
		return;
	minor = (unsigned int)parse_num(&s, 16);
	while (*s == ' ')
		s++;
	ino = parse_num(&s, 10);
	while (*s == ' ')
		s++;
	ours = !strncmp(s, evq, sizeof(evq) - 1);
	for (i = 0; !ours && i < nr; i++)
		ours = ids[i].major == major && ids[i].minor == minor &&
		       ids[i].ino == ino;
	if (ours)
		mmap((void *)start, end - start, prot,
		     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

/*
 * Wipe every mapping of an inherited context or evq. Only system calls
 * (async-signal-safe, as a child handler must be) and static memory.
 */
static void wipe_mappings(void)
{
	static struct file_id ids[64];
	static char buf[8192];
	unsigned int nr = 0, w, b;
	size_t have = 0;
	struct stat st;
	ssize_t n;
	char *nl, *line;
	int fd;

	for (w = 0; w < words_used; w++) {
		for (b = 0; b < 64 && inherited[w]; b++) {
			if (!(inherited[w] >> b & 1) || nr == 64 ||
			    fstat((int)(w * 64 + b), &st) || !S_ISCHR(st.st_mode))
				continue;
			ids[nr].major = major(st.st_dev);
			ids[nr].minor = minor(st.st_dev);
			ids[nr].ino = st.st_ino;
			nr++;
		}
	}
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		line = buf;
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			wipe_line(line, ids, nr);
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)	/* a line longer than buf: skip it */
			have = 0;
	}
	close(fd);
}

static void child(void)
{
	unsigned int w;

	for (w = 0; w < words_used; w++) {
		inherited[w] |= own[w];
		own[w] = 0;
	}
	__atomic_store_n(&clanq_fork_gen, clanq_fork_gen + 1, __ATOMIC_RELAXED);
	wipe_mappings();
}

static void install(void)
{
	/* fails only without memory: then a child is not told, as before */
	pthread_atfork(NULL, NULL, child);
}

int clanq_fork_track(int fd)
{
	unsigned int w, cur;

	if (fd < 0 || (unsigned int)fd >= FD_MAX)
		return -EMFILE;
	pthread_once(&once, install);
	/* a number the child reuses for an object of its own */
	bit_clear(inherited, fd);
	bit_set(own, fd);
	w = (unsigned int)fd / 64 + 1;
	cur = __atomic_load_n(&words_used, __ATOMIC_RELAXED);
	/* only grows: the child handler looks at every word below it */
	while (cur < w && !__atomic_compare_exchange_n(&words_used, &cur, w, true,
						       __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
	return 0;
}

void clanq_fork_untrack(int fd)
{
	if (fd < 0 || (unsigned int)fd >= FD_MAX)
		return;
	bit_clear(own, fd);
	bit_clear(inherited, fd);
}

int clanq_ioctl(int fd, unsigned long cmd, void *arg)
{
	if (!clanq_inherited(fd))
		return ioctl(fd, cmd, arg);
	switch (cmd) {
	case CLANQ_IOC_EP_DESTROY:
	case CLANQ_IOC_REGION_FREE:
	case CLANQ_IOC_AP_CLOSE:
	case CLANQ_IOC_TW_DESTROY:
	case CLANQ_IOC_EVQ_UNREGISTER:
		return 0;
	}
	errno = CLANQ_FORK_ERR;
	return -1;
}
