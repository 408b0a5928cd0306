// SPDX-License-Identifier: GPL-2.0
/*
 * Accounting: what a context, a user and a cgroup may make the driver
 * hold. /dev/clanqN is open to every local user (as uverbs is), so every
 * limit must hold for a user, not only for one open file: a process can
 * open many contexts, and a context lives on through its mappings after
 * its file is closed.
 *
 * Three bounds, each on what it can see:
 *  - per context, max_ctx_bytes: the driver memory of one context's
 *    segments and allocated regions (struct clanq_budget). The budget
 *    outlives the context while any of that memory does (it may still be
 *    mapped), and gives the bytes back as each piece is freed.
 *  - per user, max_user_bytes: the same driver memory summed over every
 *    context the user opened (struct clanq_user, one per uid, found in a
 *    small hash table). A user with CAP_IPC_LOCK when opening the device
 *    is not counted, as io_uring and ib_umem exempt it from
 *    RLIMIT_MEMLOCK.
 *  - per user, RLIMIT_MEMLOCK: registered (pinned) user memory, charged
 *    to the user's locked_vm as io_uring does, so a child that registers
 *    through an inherited fd and exits cannot leave its pin charged to a
 *    dead mm; the pinning mm's pinned_vm is raised as well, so VmPin in
 *    /proc shows it (clanq_pin_charge()).
 *
 * And the memory cgroup: every allocation a user causes is
 * GFP_KERNEL_ACCOUNT or __GFP_ACCOUNT, segments included (pages of our
 * own, mapped with vm_insert_pages(), not vmalloc_user()), so a process
 * in a cgroup with memory.max cannot push it past that through clanq.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/uidgid.h>

#include "clanq_drv.h"

/* Driver memory of one user, over all its contexts. */
struct clanq_user {
	struct hlist_node node;		/* in clanq_users, under its lock */
	kuid_t uid;
	refcount_t ref;			/* budgets */
	atomic_long_t bytes;
};

static DEFINE_HASHTABLE(clanq_users, 6);
static DEFINE_SPINLOCK(clanq_users_lock);

/* The uid's accounting, referenced; NULL if memory is short. */
static struct clanq_user *clanq_user_get(kuid_t uid)
{
	struct clanq_user *u, *fresh;
	u32 key = __kuid_val(uid);

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	spin_lock(&clanq_users_lock);
	hash_for_each_possible(clanq_users, u, node, key) {
		if (uid_eq(u->uid, uid) && refcount_inc_not_zero(&u->ref))
			goto out;
	}
	u = fresh;
	fresh = NULL;
	if (u) {
		u->uid = uid;
		refcount_set(&u->ref, 1);
		hash_add(clanq_users, &u->node, key);
	}
out:
	spin_unlock(&clanq_users_lock);
	kfree(fresh);
	return u;
}

/* Rare (a context's budget going): the table's lock is taken every time. */
static void clanq_user_put(struct clanq_user *u)
{
	bool last;

	spin_lock(&clanq_users_lock);
	last = refcount_dec_and_test(&u->ref);
	if (last)
		hash_del(&u->node);
	spin_unlock(&clanq_users_lock);
	if (last) {
		WARN_ON(atomic_long_read(&u->bytes));
		kfree(u);
	}
}

/*
 * A context's budget, and its user's unless the opener may lock memory
 * at will (CAP_IPC_LOCK). NULL if memory is short.
 */
struct clanq_budget *clanq_budget_create(void)
{
	struct clanq_budget *budget;

	budget = kzalloc(sizeof(*budget), GFP_KERNEL_ACCOUNT);
	if (!budget)
		return NULL;
	refcount_set(&budget->ref, 1);
	if (!capable(CAP_IPC_LOCK)) {
		budget->user = clanq_user_get(current_uid());
		if (!budget->user) {
			kfree(budget);
			return NULL;
		}
	}
	return budget;
}

/* Give back @bytes and one reference; the last reference frees it. */
void clanq_budget_put(struct clanq_budget *budget, size_t bytes)
{
	atomic_long_sub(bytes, &budget->bytes);
	if (budget->user)
		atomic_long_sub(bytes, &budget->user->bytes);
	if (refcount_dec_and_test(&budget->ref)) {
		if (budget->user)
			clanq_user_put(budget->user);
		kfree(budget);
	}
}

/*
 * Add @n to @count unless that passes @limit. A compare-and-exchange, not
 * add-then-undo: locked_vm is shared with io_uring and others, which must
 * never see a charge that is refused.
 */
static bool clanq_charge(atomic_long_t *count, unsigned long n,
			 unsigned long limit)
{
	long cur = atomic_long_read(count);

	do {
		if (n > limit || cur > (long)(limit - n))
			return false;
	} while (!atomic_long_try_cmpxchg(count, &cur, cur + n));
	return true;
}

/*
 * Charge @bytes to @ctx's budget and its user: the budget, with a
 * reference the caller gives back with clanq_budget_put(budget, bytes),
 * or NULL if that would pass max_ctx_bytes or max_user_bytes (said, with
 * the limit to raise).
 */
struct clanq_budget *clanq_budget_charge(struct clanq_ctx *ctx, size_t bytes)
{
	struct clanq_budget *budget = ctx->budget;
	struct clanq_user *u = budget->user;

	if (!clanq_charge(&budget->bytes, bytes, READ_ONCE(clanq_max_ctx_bytes))) {
		clanq_ulimit(ctx, "%zu more bytes would pass max_ctx_bytes (%lu)",
			     bytes, READ_ONCE(clanq_max_ctx_bytes));
		return NULL;
	}
	if (u && !clanq_charge(&u->bytes, bytes, READ_ONCE(clanq_max_user_bytes))) {
		atomic_long_sub(bytes, &budget->bytes);
		clanq_ulimit(ctx, "uid %u: %zu more bytes would pass max_user_bytes (%lu)",
			     __kuid_val(u->uid), bytes, READ_ONCE(clanq_max_user_bytes));
		return NULL;
	}
	refcount_inc(&budget->ref);
	return budget;
}

/*
 * Charge @nr pinned pages to the calling user's locked_vm, within
 * RLIMIT_MEMLOCK (CAP_IPC_LOCK: not counted), and show them in the
 * caller's VmPin. Fills @pin for clanq_pin_uncharge().
 */
int clanq_pin_charge(struct clanq_ctx *ctx, struct clanq_pin *pin,
		     unsigned long nr)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct user_struct *user = NULL;

	if (!capable(CAP_IPC_LOCK)) {
		user = get_uid(current_user());
		if (!clanq_charge(&user->locked_vm, nr, limit)) {
			free_uid(user);
			clanq_ulimit(ctx, "%lu more pinned pages pass RLIMIT_MEMLOCK (%lu pages)",
				     nr, limit);
			return -ENOMEM;
		}
	}
	pin->user = user;
	pin->mm = current->mm;
	mmgrab(pin->mm);
	atomic64_add(nr, &pin->mm->pinned_vm);
	pin->pages = nr;
	return 0;
}

void clanq_pin_uncharge(struct clanq_pin *pin)
{
	if (!pin->mm)
		return;
	atomic64_sub(pin->pages, &pin->mm->pinned_vm);
	mmdrop(pin->mm);
	pin->mm = NULL;
	if (pin->user) {
		atomic_long_sub(pin->pages, &pin->user->locked_vm);
		free_uid(pin->user);
		pin->user = NULL;
	}
}
