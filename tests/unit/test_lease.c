/*
 * test_lease.c - the lease store's file backend and the lease logic:
 * claim, heartbeat, compare-and-set conflicts, orphan detection and the
 * cleanup grace, all on a fake clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lease.h"

struct fx {
	char dir[64];
	int64_t now;
	struct px_lease_store *a, *b;   /* two supervisors on one store */
};

static int64_t fake_now(void *clk)
{
	return ((struct fx *)clk)->now;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/seamfs-lease-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->now = 1000000;
	if (px_lease_files_new(f->dir, fake_now, f, &f->a) != PX_OK ||
	    px_lease_files_new(f->dir, fake_now, f, &f->b) != PX_OK)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	px_lease_store_free(f->a);
	px_lease_store_free(f->b);
	nftw(f->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void test_claim_and_heartbeat(void **state)
{
	struct fx *f = *state;
	struct px_lease l, got;
	assert_int_equal(px_lease_get(f->a, "movie/720p", &got), PX_ENOTFOUND);
	assert_int_equal(px_lease_claim(f->a, "movie/720p", "host:1:aa", 30000, &l), PX_OK);
	assert_int_equal(l.gen, 1);
	assert_int_equal(strlen(l.session), 32);
	assert_string_equal(l.owner, "host:1:aa");
	assert_int_equal(l.heartbeat_ms, 1000000);
	f->now += 10000;
	assert_int_equal(px_lease_heartbeat(f->a, &l), PX_OK);
	assert_int_equal(px_lease_get(f->b, "movie/720p", &got), PX_OK);
	assert_int_equal(got.heartbeat_ms, 1010000);
	assert_string_equal(got.session, l.session);
	assert_int_equal(got.gen, 1);
}

static void test_live_lease_refused(void **state)
{
	struct fx *f = *state;
	struct px_lease l, other;
	assert_int_equal(px_lease_claim(f->a, "k", "host:1:aa", 30000, &l), PX_OK);
	f->now += 29000;
	assert_int_equal(px_lease_claim(f->b, "k", "host:2:bb", 30000, &other), PX_EFENCED);
	assert_string_equal(other.owner, "host:1:aa");
	/* the same owner may claim again: a new generation fences its old writer */
	struct px_lease again;
	assert_int_equal(px_lease_claim(f->a, "k", "host:1:aa", 30000, &again), PX_OK);
	assert_int_equal(again.gen, 2);
	assert_string_equal(again.session, l.session);
	assert_int_equal(px_lease_heartbeat(f->a, &l), PX_EFENCED);
}

static void test_orphan_takeover(void **state)
{
	struct fx *f = *state;
	struct px_lease l, t, got;
	assert_int_equal(px_lease_claim(f->a, "k", "host:1:aa", 30000, &l), PX_OK);
	assert_false(px_lease_orphaned(&l, f->now + 30000, 30000));
	assert_true(px_lease_orphaned(&l, f->now + 30001, 30000));
	f->now += 30001;
	assert_int_equal(px_lease_claim(f->b, "k", "host:2:bb", 30000, &t), PX_OK);
	assert_int_equal(t.gen, 2);
	assert_string_equal(t.session, l.session); /* the work keeps its id */
	assert_string_equal(t.owner, "host:2:bb");
	/* the old holder finds out at its next heartbeat */
	assert_int_equal(px_lease_heartbeat(f->a, &l), PX_EFENCED);
	assert_int_equal(px_lease_get(f->a, "k", &got), PX_OK);
	assert_string_equal(got.owner, "host:2:bb");
}

static void test_cas_conflict(void **state)
{
	struct fx *f = *state;
	struct px_lease l, got;
	assert_int_equal(px_lease_claim(f->a, "k", "host:1:aa", 30000, &l), PX_OK);
	f->now += 60000;
	/* two claimants both saw generation 1 orphaned; the backend lets only
	 * the first make generation 2 */
	struct px_lease c1 = l, c2 = l;
	snprintf(c1.owner, sizeof(c1.owner), "host:2:bb");
	snprintf(c2.owner, sizeof(c2.owner), "host:3:cc");
	c1.heartbeat_ms = c2.heartbeat_ms = f->now;
	assert_int_equal(px_lease_cas(f->b, 1, &c1), PX_OK);
	assert_int_equal(c1.gen, 2);
	assert_int_equal(px_lease_cas(f->a, 1, &c2), PX_EFENCED);
	assert_int_equal(px_lease_get(f->a, "k", &got), PX_OK);
	assert_int_equal(got.gen, 2);
	assert_string_equal(got.owner, "host:2:bb");
	/* and the high-level claim of the loser sees a live owner */
	assert_int_equal(px_lease_claim(f->a, "k", "host:3:cc", 30000, &c2), PX_EFENCED);
	assert_string_equal(c2.owner, "host:2:bb");
}

static void test_release_and_grace(void **state)
{
	struct fx *f = *state;
	struct px_lease l, got;
	assert_int_equal(px_lease_claim(f->a, "k", "host:1:aa", 30000, &l), PX_OK);
	assert_true(px_lease_protects(&l, f->now + 30000 + 30000, 30000, 30000));
	assert_false(px_lease_protects(&l, f->now + 30000 + 30001, 30000, 30000));
	f->now += 5000;
	assert_int_equal(px_lease_release(f->a, &l), PX_OK);
	assert_int_equal(px_lease_get(f->b, "k", &got), PX_OK);
	assert_true(got.released);
	assert_true(px_lease_orphaned(&got, f->now, 30000));
	/* released: the grace runs from the release */
	assert_true(px_lease_protects(&got, f->now + 30000, 30000, 30000));
	assert_false(px_lease_protects(&got, f->now + 30001, 30000, 30000));
	/* a released lease is claimed at once */
	struct px_lease t;
	assert_int_equal(px_lease_claim(f->b, "k", "host:2:bb", 30000, &t), PX_OK);
	assert_false(t.released);
	assert_int_equal(px_lease_drop(f->b, "k"), PX_OK);
	assert_int_equal(px_lease_get(f->a, "k", &got), PX_ENOTFOUND);
}

static void test_corrupt_record(void **state)
{
	struct fx *f = *state;
	char path[128];
	struct px_lease l;
	snprintf(path, sizeof(path), "%s/k.lease.4", f->dir);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("garbage\n", fp);
	fclose(fp);
	assert_int_equal(px_lease_get(f->a, "k", &l), PX_EINVAL);
	/* claimable, as the next generation */
	assert_int_equal(px_lease_claim(f->a, "k", "host:1:aa", 30000, &l), PX_OK);
	assert_int_equal(l.gen, 5);
}

static void test_owner_id(void **state)
{
	char owner[128];
	(void)state;
	px_lease_make_owner(owner, sizeof(owner));
	char *c1 = strchr(owner, ':');
	assert_non_null(c1);
	char *c2 = strchr(c1 + 1, ':');
	assert_non_null(c2);
	assert_int_equal(atoi(c1 + 1), getpid());
	assert_int_equal(strlen(c2 + 1), 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_claim_and_heartbeat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_live_lease_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_takeover, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cas_conflict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_and_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_record, setup, teardown),
		cmocka_unit_test(test_owner_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
