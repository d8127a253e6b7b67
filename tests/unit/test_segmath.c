/*
 * test_segmath.c - segment count and size from duration and profile, and
 * offset/time → segment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "segmath.h"

static void test_count_and_size(void **state)
{
	struct px_seg_plan p;
	(void)state;
	assert_int_equal(px_segmath_plan(20000000, 2, 300000, 64000, &p), PX_OK);
	assert_int_equal(p.nseg, 10);
	assert_int_equal(p.seg_us, 2000000);
	assert_int_equal(p.seg_bytes % PX_TS_PACKET, 0);
	assert_int_equal(p.size, p.seg_bytes * 10);
	/* S bounds 1.25 D of video at maxrate plus the VBV buffer and audio */
	assert_true(p.seg_bytes * 8 >= (int64_t)(300000 * 3.0 + 64000 * 2.5));
	/* deterministic: the writer and the daemon agree */
	struct px_seg_plan q;
	assert_int_equal(px_segmath_plan(20000000, 2, 300000, 64000, &q), PX_OK);
	assert_int_equal(q.seg_bytes, p.seg_bytes);
}

static void test_tail(void **state)
{
	struct px_seg_plan p;
	(void)state;
	/* a tail under D/4 joins the last segment */
	assert_int_equal(px_segmath_plan(20400000, 2, 1000000, 128000, &p), PX_OK);
	assert_int_equal(p.nseg, 10);
	/* a tail of D/4 or more is a segment of its own */
	assert_int_equal(px_segmath_plan(20500000, 2, 1000000, 128000, &p), PX_OK);
	assert_int_equal(p.nseg, 11);
	/* shorter than one segment: one segment */
	assert_int_equal(px_segmath_plan(300000, 6, 1000000, 128000, &p), PX_OK);
	assert_int_equal(p.nseg, 1);
	/* exactly three segments */
	assert_int_equal(px_segmath_plan(18000000, 6, 1000000, 128000, &p), PX_OK);
	assert_int_equal(p.nseg, 3);
}

static void test_bad_input(void **state)
{
	struct px_seg_plan p;
	(void)state;
	assert_int_equal(px_segmath_plan(0, 2, 1000000, 128000, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(-5, 2, 1000000, 128000, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(10000000, 1, 1000000, 128000, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(10000000, 7, 1000000, 128000, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(10000000, 2, 0, 128000, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(10000000, 2, 1000000, 0, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(8LL * 24 * 3600 * 1000000, 2, 1000000, 128000, &p),
			 PX_EINVAL);
}

static void test_offsets(void **state)
{
	struct px_seg_plan p;
	(void)state;
	assert_int_equal(px_segmath_plan(20000000, 2, 300000, 64000, &p), PX_OK);
	const int64_t S = p.seg_bytes;
	assert_int_equal(px_segmath_index(&p, 0), 0);
	assert_int_equal(px_segmath_index(&p, S - 1), 0);
	assert_int_equal(px_segmath_index(&p, S), 1);
	assert_int_equal(px_segmath_index(&p, 5 * S + 17), 5);
	assert_int_equal(px_segmath_index(&p, p.size - 1), 9);
	assert_int_equal(px_segmath_index(&p, p.size + 100), 9);
	assert_int_equal(px_segmath_of_time(&p, -1), 0);
	assert_int_equal(px_segmath_of_time(&p, 1999999), 0);
	assert_int_equal(px_segmath_of_time(&p, 2000000), 1);
	assert_int_equal(px_segmath_of_time(&p, 19999999), 9);
	assert_int_equal(px_segmath_of_time(&p, 20300000), 9); /* the merged tail */
	assert_int_equal(px_segmath_start_us(&p, 3), 6000000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count_and_size),
		cmocka_unit_test(test_tail),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_offsets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
