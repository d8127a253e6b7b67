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
	/* the default D of 1 s: a tail of 0.25 s is a segment of its own, and
	 * S still bounds 1.25 s of video at maxrate plus the VBV buffer */
	assert_int_equal(px_segmath_plan(20250000, 1, 1000000, 128000, &p), PX_OK);
	assert_int_equal(p.nseg, 21);
	assert_int_equal(p.seg_us, 1000000);
	assert_true(p.seg_bytes * 8 >= (int64_t)(1000000 * 1.75 + 128000 * 1.25));
}

static void test_bad_input(void **state)
{
	struct px_seg_plan p;
	(void)state;
	assert_int_equal(px_segmath_plan(0, 2, 1000000, 128000, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(-5, 2, 1000000, 128000, &p), PX_EINVAL);
	assert_int_equal(px_segmath_plan(10000000, 0, 1000000, 128000, &p), PX_EINVAL);
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

/* The settle rule: the handle's two reads before this one began within
 * the two segments before it (or in it). */
static void test_seek_settled(void **state)
{
	struct px_seek_hist h = { { 0 }, 0 };
	(void)state;
	assert_false(px_seek_settled(&h, 0));      /* no history: a first read */
	px_seek_note(&h, 59);
	assert_false(px_seek_settled(&h, 59));     /* one read is not a place */
	px_seek_note(&h, 60);
	assert_true(px_seek_settled(&h, 61));      /* 59, 60, then 61: reading on */
	assert_true(px_seek_settled(&h, 60));
	assert_false(px_seek_settled(&h, 62));     /* 59 is 3 back */
	assert_false(px_seek_settled(&h, 59));     /* 60 lies ahead of 59 */
	/* a bisection: 59, 29, 59, 44, ... never settles between its points */
	px_seek_note(&h, 59);
	px_seek_note(&h, 29);
	assert_false(px_seek_settled(&h, 44));
	assert_false(px_seek_settled(&h, 59));
	px_seek_note(&h, 59);
	assert_false(px_seek_settled(&h, 44));
	/* the history keeps the last two only */
	px_seek_note(&h, 88);
	px_seek_note(&h, 89);
	assert_true(px_seek_settled(&h, 90));
	assert_int_equal(h.n, PX_SEEK_SETTLE_READS);
}

static struct px_seek_view view(int running, uint32_t from, int64_t edge)
{
	struct px_seek_view v = { .main_running = running, .main_from = from,
				  .main_edge = edge, .ahead = 3, .slot_free = 1 };
	return v;
}

/* Which writer serves a read of an uncommitted segment. */
static void test_seek_decide(void **state)
{
	struct px_seek_view v;
	(void)state;
	/* no main writer: the first read starts it, a far one gets a probe,
	 * a settled one starts it there */
	v = view(0, 0, 0);
	v.first_read = 1;
	assert_int_equal(px_seek_decide(&v, 0), PX_SEEK_START);
	v.first_read = 0;
	assert_int_equal(px_seek_decide(&v, 88), PX_SEEK_PROBE);
	v.settled = 1;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_START);
	/* no slot for a probe: wait for a running probe to end; with none
	 * running (main writers of other assets hold them) the start waits in
	 * line */
	v = view(0, 0, 0);
	v.slot_free = 0;
	v.probes_running = 1;
	assert_int_equal(px_seek_decide(&v, 88), PX_SEEK_WAIT);
	v.probes_running = 0;
	assert_int_equal(px_seek_decide(&v, 88), PX_SEEK_START);

	/* a main writer at 0..9: within its reach (edge + 3) wait */
	v = view(1, 0, 9);
	assert_int_equal(px_seek_decide(&v, 5), PX_SEEK_WAIT);
	assert_int_equal(px_seek_decide(&v, 12), PX_SEEK_WAIT);
	/* far ahead or behind: a probe; it never moves the main writer */
	assert_int_equal(px_seek_decide(&v, 13), PX_SEEK_PROBE);
	v = view(1, 20, 30);
	assert_int_equal(px_seek_decide(&v, 19), PX_SEEK_PROBE);
	/* a probe already writes it: wait */
	v.probe_covers = 1;
	assert_int_equal(px_seek_decide(&v, 19), PX_SEEK_WAIT);
	/* settled far away: move it, once it has committed two segments */
	v = view(1, 0, 9);
	v.settled = 1;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_MOVE);
	v = view(1, 40, 41);
	v.settled = 1;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_PROBE);
	v.slot_free = 0;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_WAIT);
	/* the job's only reader: no other player to take turns with, so its
	 * settled read moves the writer at once (issue 32) */
	v.sole_reader = 1;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_MOVE);
	v.slot_free = 1;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_MOVE);
	v.settled = 0; /* a bisection step still gets a probe */
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_PROBE);
	/* no slot free: wait for a running probe to end; with none running
	 * (main writers hold every slot) move it as a far read always did */
	v = view(1, 0, 9);
	v.slot_free = 0;
	v.probes_running = 1;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_WAIT);
	v.probes_running = 0;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_MOVE);
	v = view(1, 0, 1);
	v.slot_free = 0;
	assert_int_equal(px_seek_decide(&v, 61), PX_SEEK_WAIT);
}

/* A read that jumped waits for the main writer only one segment past its
 * edge: a player's seek to 10 % of a 720p transcode read segment 6 while
 * the writer, started at the head, committed 3 next; it waited for 3, 4,
 * 5 and 6 (2.5-2.8 s to its first frame, 4.4 x ffmpeg's own time) where a
 * probe, which the writer yields to, had it there in 2.2 s. A reader
 * reading on (the kernel's read-ahead of a run) still waits within
 * seek_restart_segments. */
static void test_seek_jump(void **state)
{
	struct px_seek_hist h = { { 0 }, 0 };
	struct px_seek_view v;
	(void)state;
	assert_false(px_seek_jumped(&h, 6, 3));    /* a first read is no jump */
	px_seek_note(&h, 0);                       /* the head */
	px_seek_note(&h, 59);                      /* the tail */
	assert_true(px_seek_jumped(&h, 6, 3));     /* then 10 % */
	assert_false(px_seek_jumped(&h, 3, 3));    /* 0 is within 3 before 3 */
	assert_false(px_seek_jumped(&h, 59, 3));   /* the tail again */
	px_seek_note(&h, 6);
	assert_false(px_seek_jumped(&h, 7, 3));    /* reading on from 6 */
	assert_false(px_seek_jumped(&h, 9, 3));    /* the kernel's read-ahead */
	assert_true(px_seek_jumped(&h, 10, 3));
	assert_true(px_seek_jumped(&h, 5, 3));     /* behind where it read */

	/* the writer at 0..3: a read of 6 waits when it read on, gets a
	 * probe when it jumped there; edge + 1 still waits */
	v = view(1, 0, 3);
	assert_int_equal(px_seek_decide(&v, 6), PX_SEEK_WAIT);
	v.jump = 1;
	assert_int_equal(px_seek_decide(&v, 6), PX_SEEK_PROBE);
	assert_int_equal(px_seek_decide(&v, 5), PX_SEEK_PROBE);
	assert_int_equal(px_seek_decide(&v, 4), PX_SEEK_WAIT);
	assert_int_equal(px_seek_decide(&v, 2), PX_SEEK_WAIT);
	/* a smaller seek_restart_segments stays as set */
	v.ahead = 0;
	assert_int_equal(px_seek_decide(&v, 4), PX_SEEK_PROBE);
}

/* How far a probe writes. */
static void test_seek_probe_until(void **state)
{
	unsigned char ok[90] = { 0 };
	(void)state;
	assert_int_equal(px_seek_probe_until(59, 59, 90, ok, UINT32_MAX), 59);
	/* a read crossing into the next segment */
	assert_int_equal(px_seek_probe_until(59, 60, 90, ok, UINT32_MAX), 60);
	/* a long read, capped */
	assert_int_equal(px_seek_probe_until(10, 30, 90, ok, UINT32_MAX),
			 10 + PX_SEEK_PROBE_MAX - 1);
	/* never past the end */
	assert_int_equal(px_seek_probe_until(89, 89, 90, ok, UINT32_MAX), 89);
	/* it ends before a committed segment or where another writer starts */
	ok[61] = 1;
	assert_int_equal(px_seek_probe_until(59, 65, 90, ok, UINT32_MAX), 60);
	assert_int_equal(px_seek_probe_until(59, 65, 90, ok, 60), 59);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count_and_size),
		cmocka_unit_test(test_tail),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_seek_settled),
		cmocka_unit_test(test_seek_decide),
		cmocka_unit_test(test_seek_jump),
		cmocka_unit_test(test_seek_probe_until),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
