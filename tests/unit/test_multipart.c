/*
 * test_multipart.c - the multipart/byteranges parser: the boundary from a
 * Content-Type, and bodies as nginx sends them, fed whole, a byte at a
 * time and with pauses; every broken answer (another boundary, parts that
 * overlap, a part missing or one more, another total) is refused. Bodies
 * are heap copies of exactly their length, so ASan sees a read past it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "multipart.h"

#define SIZE 1000
static char file[SIZE];          /* the asset: file[i] is byte i */

/* What emit saw: the asset rebuilt from the parts, and how often. */
struct seen {
	char got[SIZE];
	int64_t next;                 /* offsets must come in order */
	int runs;
	int stop_every;               /* refuse every n-th call (0: never) */
	int calls;
};

static int emit(void *ctx, int64_t off, const char *buf, size_t len)
{
	struct seen *s = ctx;
	if (s->stop_every && ++s->calls % s->stop_every == 0)
		return 0;
	assert_true(off >= s->next);
	assert_true(off + (int64_t)len <= SIZE);
	memcpy(s->got + off, buf, len);
	s->next = off + (int64_t)len;
	s->runs++;
	return 1;
}

/* A body answering parts [a, b] with boundary bnd; cr overrides a part's
 * Content-Range line ("" leaves the part out). */
static size_t body(char *out, size_t cap, const char *bnd, int lead,
		   const struct px_multipart_range *r, int n, const char *const *cr,
		   const char *close)
{
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		if (cr && cr[i] && !cr[i][0])
			continue;
		at += (size_t)snprintf(out + at, cap - at, "%s--%s\r\nContent-Type: video/mp4\r\n",
				       (i || lead) ? "\r\n" : "", bnd);
		if (cr && cr[i])
			at += (size_t)snprintf(out + at, cap - at, "%s\r\n\r\n", cr[i]);
		else
			at += (size_t)snprintf(out + at, cap - at, "Content-Range: bytes %lld-%lld/%d\r\n\r\n",
					       (long long)r[i].first, (long long)r[i].last, SIZE);
		int64_t len = r[i].last - r[i].first + 1;
		assert_true(at + (size_t)len < cap);
		memcpy(out + at, file + r[i].first, (size_t)len);
		at += (size_t)len;
	}
	at += (size_t)snprintf(out + at, cap - at, "%s", close);
	return at;
}

static const struct px_multipart_range two[2] = { { 0, 299 }, { 800, 999 } };

/* Feeds buf in pieces of step bytes (0: whole), copied to exact heap
 * buffers; returns the last status. */
static enum px_status feed(struct px_multipart *m, const char *buf, size_t len, size_t step,
			   struct seen *s, char *why)
{
	size_t at = 0;
	enum px_status st = PX_OK;
	while (at < len && st == PX_OK) {
		size_t n = step && len - at > step ? step : len - at;
		char *p = malloc(n);
		size_t used = 0;
		assert_non_null(p);
		memcpy(p, buf + at, n);
		st = px_multipart_feed(m, p, n, &used, emit, s, why, 200);
		free(p);
		assert_true(used <= n);
		at += used;
		if (st == PX_EFULL)
			st = PX_OK; /* the same bytes again, as libcurl does after a pause */
	}
	return st;
}

static void check_whole(const char *b, size_t len, size_t step, int stop_every)
{
	struct px_multipart m;
	struct seen s = { .stop_every = stop_every };
	char why[200] = "";
	assert_int_equal(px_multipart_init(&m, "3d6b6a416f9b5", two, 2, SIZE, 0), PX_OK);
	assert_int_equal(feed(&m, b, len, step, &s, why), PX_EOF);
	assert_true(px_multipart_done(&m));
	assert_memory_equal(s.got, file, 300);
	assert_memory_equal(s.got + 800, file + 800, 200);
}

static void test_nginx_body(void **state)
{
	(void)state;
	char b[4096];
	size_t n = body(b, sizeof(b), "3d6b6a416f9b5", 1, two, 2, NULL, "\r\n--3d6b6a416f9b5--\r\n");
	check_whole(b, n, 0, 0);
	check_whole(b, n, 1, 0);   /* cut anywhere */
	check_whole(b, n, 7, 0);
	check_whole(b, n, 64, 2);  /* paused every other run */
	/* no CRLF before the first delimiter, no epilogue */
	n = body(b, sizeof(b), "3d6b6a416f9b5", 0, two, 2, NULL, "\r\n--3d6b6a416f9b5--");
	check_whole(b, n, 0, 0);
}

static void expect_bad(const char *b, size_t len, const char *boundary, const char *what)
{
	for (size_t step = 0; step <= 1; step++) {
		struct px_multipart m;
		struct seen s = { 0 };
		char why[200] = "";
		assert_int_equal(px_multipart_init(&m, boundary, two, 2, SIZE, 0), PX_OK);
		enum px_status st = feed(&m, b, len, step, &s, why);
		if (st != PX_EBADRESP)
			fail_msg("%s: %s, want a refusal", what, px_strerror(st));
		assert_true(strstr(why, "multipart/byteranges") != NULL);
		assert_false(px_multipart_done(&m));
	}
}

static void test_refusals(void **state)
{
	(void)state;
	char b[4096];
	const char *end = "\r\n--B0--\r\n";
	size_t n = body(b, sizeof(b), "B1", 1, two, 2, NULL, "\r\n--B1--\r\n");
	expect_bad(b, n, "B0", "another boundary");
	expect_bad(b, n, "B", "a longer boundary");
	const char *overlap[2] = { NULL, "Content-Range: bytes 200-999/1000" };
	n = body(b, sizeof(b), "B0", 1, two, 2, overlap, end);
	expect_bad(b, n, "B0", "overlapping parts");
	const char *missing[2] = { NULL, "" };
	n = body(b, sizeof(b), "B0", 1, two, 2, missing, end);
	expect_bad(b, n, "B0", "a part missing");
	const char *total[2] = { NULL, "Content-Range: bytes 800-999/1001" };
	n = body(b, sizeof(b), "B0", 1, two, 2, total, end);
	expect_bad(b, n, "B0", "another total");
	const char *none[2] = { "X-Other: 1", NULL };
	n = body(b, sizeof(b), "B0", 1, two, 2, none, end);
	expect_bad(b, n, "B0", "no Content-Range");
	const char *twice[2] = { "Content-Range: bytes 0-299/1000\r\nContent-Range: bytes 0-299/1000",
				 NULL };
	n = body(b, sizeof(b), "B0", 1, two, 2, twice, end);
	expect_bad(b, n, "B0", "two Content-Ranges");
	const struct px_multipart_range three[3] = { { 0, 299 }, { 800, 899 }, { 900, 999 } };
	const char *extra[3] = { NULL, NULL, NULL };
	n = body(b, sizeof(b), "B0", 1, three, 3, extra, end);
	expect_bad(b, n, "B0", "a part more");
	/* the bytes of part one run on where the delimiter should be */
	n = body(b, sizeof(b), "B0", 1, two, 2, NULL, end);
	memmove(b + 60, b + 59, n - 59);
	expect_bad(b, n + 1, "B0", "a part longer than its range");
	/* a header line past the limit */
	char longline[700];
	memset(longline, 'a', sizeof(longline));
	memcpy(longline, "X-Long: ", 8);
	longline[sizeof(longline) - 1] = '\0';
	const char *lng[2] = { longline, NULL };
	n = body(b, sizeof(b), "B0", 1, two, 2, lng, end);
	expect_bad(b, n, "B0", "a header line too long");
	/* a page where the file should be */
	const char *page[2] = { NULL, "Content-Type: Text/HTML; charset=utf-8\r\n"
				"Content-Range: bytes 800-999/1000" };
	n = body(b, sizeof(b), "B0", 1, two, 2, page, end);
	expect_bad(b, n, "B0", "an HTML part");
	/* garbage after a boundary */
	expect_bad("\r\n--B0xx", 8, "B0", "garbage after the boundary");
}

static void test_truncated_is_not_done(void **state)
{
	(void)state;
	char b[4096];
	struct px_multipart m;
	struct seen s = { 0 };
	char why[200];
	size_t n = body(b, sizeof(b), "B0", 1, two, 2, NULL, "\r\n--B0--\r\n");
	for (size_t cut = 0; cut + 1 < n - 8; cut += 37) {
		assert_int_equal(px_multipart_init(&m, "B0", two, 2, SIZE, 0), PX_OK);
		memset(&s, 0, sizeof(s));
		assert_int_equal(feed(&m, b, cut, 0, &s, why), PX_OK);
		assert_false(px_multipart_done(&m));
	}
}

static void test_init_checks_ranges(void **state)
{
	(void)state;
	struct px_multipart m;
	const struct px_multipart_range over[2] = { { 0, 500 }, { 400, 999 } };
	const struct px_multipart_range back[2] = { { 800, 999 }, { 0, 299 } };
	const struct px_multipart_range past[2] = { { 0, 299 }, { 800, 1000 } };
	assert_int_equal(px_multipart_init(&m, "B", over, 2, SIZE, 0), PX_EINVAL);
	assert_int_equal(px_multipart_init(&m, "B", back, 2, SIZE, 0), PX_EINVAL);
	assert_int_equal(px_multipart_init(&m, "B", past, 2, SIZE, 0), PX_EINVAL);
	assert_int_equal(px_multipart_init(&m, "", two, 2, SIZE, 0), PX_EINVAL);
	assert_int_equal(px_multipart_init(&m, "B", two, 3, SIZE, 0), PX_EINVAL);
}

static int boundary_of(const char *ct, char *out)
{
	size_t n = strlen(ct);
	char *p = malloc(n ? n : 1);
	assert_non_null(p);
	memcpy(p, ct, n);
	int r = px_multipart_boundary(p, n, out);
	free(p);
	return r;
}

static void test_boundary(void **state)
{
	(void)state;
	char b[PX_MULTIPART_BOUNDARY + 1];
	assert_int_equal(boundary_of("multipart/byteranges; boundary=00000000001", b), 1);
	assert_string_equal(b, "00000000001");
	assert_int_equal(boundary_of("Multipart/ByteRanges;boundary=\"a=b c\" ; x=y", b), 1);
	assert_string_equal(b, "a=b c");
	assert_int_equal(boundary_of("multipart/byteranges; charset=x; boundary=Q", b), 1);
	assert_string_equal(b, "Q");
	assert_int_equal(boundary_of("multipart/byteranges", b), 0);
	assert_string_equal(b, "");
	assert_int_equal(boundary_of("multipart/byteranges; boundary=", b), 0);
	assert_int_equal(boundary_of("multipart/byteranges; boundary=a; boundary=b", b), 0);
	assert_int_equal(boundary_of("multipart/byteranges; boundary=\"open", b), 0);
	assert_int_equal(boundary_of("multipart/byteranges; boundary=a b", b), 0);
	assert_int_equal(boundary_of("multipart/byteranges; boundary=\"trail \"", b), 0);
	char longb[128];
	snprintf(longb, sizeof(longb), "multipart/byteranges; boundary=%071d", 7);
	assert_int_equal(boundary_of(longb, b), 0);
	snprintf(longb, sizeof(longb), "multipart/byteranges; boundary=%070d", 7);
	assert_int_equal(boundary_of(longb, b), 1);
	assert_int_equal(boundary_of("video/mp4", b), -1);
	assert_int_equal(boundary_of("multipart/mixed; boundary=x", b), -1);
	assert_int_equal(boundary_of("", b), -1);
}

int main(void)
{
	for (int i = 0; i < SIZE; i++)
		file[i] = (char)(i * 7 + i / 251);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nginx_body),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_truncated_is_not_done),
		cmocka_unit_test(test_init_checks_ranges),
		cmocka_unit_test(test_boundary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
