/*
 * test_copies.c - placement of copies (px_copies_place, copies.c) as a
 * pure function: freest wins, one copy per storage, min_free_bytes, and
 * each waiting reason in its order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "copies.h"

#define GIB (1LL << 30)

/* A reachable storage with the role, no copy, free bytes, min_free. */
static struct px_place_in ok(int64_t free_bytes, int64_t min_free)
{
	return (struct px_place_in){ 1, 1, 0, free_bytes, min_free };
}

static void test_freest_wins(void **state)
{
	(void)state;
	struct px_place_in s[] = { ok(10 * GIB, GIB), ok(30 * GIB, GIB), ok(20 * GIB, GIB) };
	size_t pick = 99;
	assert_int_equal(px_copies_place(s, 3, GIB, &pick), PX_WAIT_NONE);
	assert_int_equal(pick, 1);
	/* a tie: the first */
	s[2].free_bytes = 30 * GIB;
	assert_int_equal(px_copies_place(s, 3, GIB, &pick), PX_WAIT_NONE);
	assert_int_equal(pick, 1);
}

static void test_one_copy_per_storage(void **state)
{
	(void)state;
	struct px_place_in s[] = { ok(10 * GIB, 0), ok(30 * GIB, 0) };
	size_t pick = 99;
	s[1].holds = 1;
	assert_int_equal(px_copies_place(s, 2, GIB, &pick), PX_WAIT_NONE);
	assert_int_equal(pick, 0);
	s[0].holds = 1;
	assert_int_equal(px_copies_place(s, 2, GIB, &pick), PX_WAIT_NO_STORAGE);
	/* a copy that does not serve (stale) is made again in its place */
	s[1].holds = 2;
	assert_int_equal(px_copies_place(s, 2, GIB, &pick), PX_WAIT_NONE);
	assert_int_equal(pick, 1);
}

static void test_min_free_respected(void **state)
{
	(void)state;
	/* freest, but its min_free leaves no room: the other one */
	struct px_place_in s[] = { ok(50 * GIB, 49 * GIB + 1), ok(5 * GIB, GIB) };
	size_t pick = 99;
	assert_int_equal(px_copies_place(s, 2, GIB, &pick), PX_WAIT_NONE);
	assert_int_equal(pick, 1);
	/* exactly min_free + size fits */
	s[1].free_bytes = 2 * GIB;
	assert_int_equal(px_copies_place(s, 2, GIB, &pick), PX_WAIT_NONE);
	assert_int_equal(pick, 1);
	s[1].free_bytes = 2 * GIB - 1;
	assert_int_equal(px_copies_place(s, 2, GIB, &pick), PX_WAIT_NO_ROOM);
	/* huge min_free does not overflow */
	struct px_place_in h[] = { ok(GIB, 1LL << 62) };
	assert_int_equal(px_copies_place(h, 1, 1LL << 62, &pick), PX_WAIT_NO_ROOM);
}

static void test_reasons(void **state)
{
	(void)state;
	size_t pick = 99;
	/* none at all */
	assert_int_equal(px_copies_place(NULL, 0, 1, &pick), PX_WAIT_NO_STORAGE);
	/* only one with the role off: none with the role lacks the asset */
	struct px_place_in off[] = { ok(10 * GIB, 0) };
	off[0].copying = 0;
	assert_int_equal(px_copies_place(off, 1, 1, &pick), PX_WAIT_NO_STORAGE);
	/* with the role, but not mounted */
	struct px_place_in gone[] = { ok(10 * GIB, 0) };
	gone[0].reachable = 0;
	assert_int_equal(px_copies_place(gone, 1, 1, &pick), PX_WAIT_NOT_READY);
	/* the storage of an existing (not serving) copy is unreachable, others full */
	struct px_place_in held[] = { ok(0, 0), ok(0, GIB) };
	held[0].holds = 2;
	held[0].reachable = 0;
	assert_int_equal(px_copies_place(held, 2, 1, &pick), PX_WAIT_NOT_READY);
	/* ... or has the role off */
	held[0].reachable = 1;
	held[0].copying = 0;
	assert_int_equal(px_copies_place(held, 2, 1, &pick), PX_WAIT_COPYING_OFF);
	/* a place elsewhere goes first */
	held[1].free_bytes = 10 * GIB;
	assert_int_equal(px_copies_place(held, 2, 1, &pick), PX_WAIT_NONE);
	assert_int_equal(pick, 1);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(px_copy_wait_name(PX_WAIT_NO_STORAGE), "no storage");
	assert_string_equal(px_copy_wait_name(PX_WAIT_NO_ROOM), "no room");
	assert_string_equal(px_copy_wait_name(PX_WAIT_NOT_READY), "storage not ready");
	assert_string_equal(px_copy_wait_name(PX_WAIT_COPYING_OFF), "copying off");
	assert_string_equal(px_copy_wait_name(PX_WAIT_OTHER_HOST), "copying on another host");
	assert_string_equal(px_copy_wait_name(PX_WAIT_STORE_DOWN), "store not answering");
	assert_string_equal(px_copy_wait_name(PX_WAIT_NONE), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_freest_wins),
		cmocka_unit_test(test_one_copy_per_storage),
		cmocka_unit_test(test_min_free_respected),
		cmocka_unit_test(test_reasons),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
