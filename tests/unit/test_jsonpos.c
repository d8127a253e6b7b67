/*
 * test_jsonpos.c - px_jsonpos_find: positions of keys and elements at any
 * depth, lines and character columns in multi-line UTF-8 text, paths that
 * are not there, and malformed text that must never crash or read past len.
 * Texts are copied into heap buffers of exactly their length, no NUL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonpos.h"

static int find_n(const char *text, size_t len, const char *path, int *line, int *col)
{
	char *p = malloc(len ? len : 1);
	assert_non_null(p);
	memcpy(p, text, len);
	int r = px_jsonpos_find(p, len, path, line, col);
	free(p);
	return r;
}

static void expect_at(const char *text, const char *path, int want_line, int want_col)
{
	int line = -1, col = -1;
	if (find_n(text, strlen(text), path, &line, &col) != 0)
		fail_msg("path \"%s\" not found", path);
	if (line != want_line || col != want_col)
		fail_msg("path \"%s\" at %d:%d, want %d:%d", path, line, col, want_line,
			 want_col);
}

static void expect_missing(const char *text, const char *path)
{
	int line = -1, col = -1;
	if (find_n(text, strlen(text), path, &line, &col) != -1)
		fail_msg("path \"%s\" found at %d:%d, want not found", path, line, col);
}

/*
 *          1         2         3         4
 * 1234567890123456789012345678901234567890
 */
static const char doc[] =
	"{\n"                                                  /* 1 */
	"  \"a\": 1,\n"                                        /* 2 */
	"  \"b\": {\"c\": [10, {\"d\": \"x\"}, [true, null]]},\n" /* 3 */
	"  \"\xc3\xa9t\xc3\xa9\": \"\xc3\xbc\", \"k\": \"v\",\n" /* 4: "été": "ü", "k" */
	"\t\"tab\": [ ],\n"                                    /* 5 */
	"  \"s\": \"}{][,:\\\"\", \"after\": {\"deep\": [[[ {\"z\": 0} ]]]}\n" /* 6 */
	"}\n";

static void test_top_level(void **state)
{
	expect_at(doc, "", 1, 1);
	expect_at("   \n\n  [1, 2]", "", 3, 3);
	expect_at("  [1, 2]", "[1]", 1, 7);
	expect_at("[\n  1,\n  2\n]", "[1]", 3, 3);
}

static void test_nested_keys_and_elements(void **state)
{
	expect_at(doc, "a", 2, 3);
	expect_at(doc, "b", 3, 3);
	expect_at(doc, "b.c", 3, 9);
	expect_at(doc, "b.c[0]", 3, 15);
	expect_at(doc, "b.c[1]", 3, 19);
	expect_at(doc, "b.c[1].d", 3, 20);
	expect_at(doc, "b.c[2]", 3, 31);
	expect_at(doc, "b.c[2][0]", 3, 32);
	expect_at(doc, "b.c[2][1]", 3, 38);
}

static void test_utf8_columns(void **state)
{
	/* columns count characters: "été" is 3 columns, "ü" 1 */
	expect_at(doc, "\xc3\xa9t\xc3\xa9", 4, 3);
	expect_at(doc, "k", 4, 15);
	/* a tab is one character */
	expect_at(doc, "tab", 5, 2);
	/* strings holding structural characters and escaped quotes are skipped */
	expect_at(doc, "s", 6, 3);
	expect_at(doc, "after", 6, 20);
	expect_at(doc, "after.deep", 6, 30);
	expect_at(doc, "after.deep[0]", 6, 39);
	expect_at(doc, "after.deep[0][0]", 6, 40);
	expect_at(doc, "after.deep[0][0][0]", 6, 42);
	expect_at(doc, "after.deep[0][0][0].z", 6, 43);
	/* a multi-byte character before the value on the same line */
	expect_at("{\"\xe2\x98\x83\xe2\x98\x83\": 1, \"x\": 2}", "x", 1, 11);
	expect_at("{\"n\": \"\xf0\x9f\x8e\xac\", \"x\": 2}", "x", 1, 12);
	/* CRLF line ends */
	expect_at("{\r\n  \"a\": 1,\r\n  \"b\": 2\r\n}", "b", 3, 3);
}

static void test_not_found(void **state)
{
	expect_missing(doc, "z");
	expect_missing(doc, "A");
	expect_missing(doc, "a.b");        /* a is a number */
	expect_missing(doc, "b[0]");       /* b is an object */
	expect_missing(doc, "[0]");        /* the top is an object */
	expect_missing(doc, "b.c[3]");
	expect_missing(doc, "b.c[1].e");
	expect_missing(doc, "b.c.d");
	expect_missing(doc, "tab[0]");     /* empty array */
	expect_missing(doc, "s.x");
	expect_missing(doc, "after.deep[0][0][1]");
	expect_missing(doc, "d");          /* only nested, not at the top */
	expect_missing("{}", "a");
	expect_missing("[]", "[0]");
	expect_missing("{\"ab\": 1}", "a");
	expect_missing("{\"a\": 1}", "ab");
}

static void test_malformed_paths(void **state)
{
	expect_missing(doc, "b..c");
	expect_missing(doc, "b[x]");
	expect_missing(doc, "b.c[-1]");
	expect_missing(doc, "b.c[");
	expect_missing(doc, "b.c[1");
	expect_missing(doc, "b.c[]");
	expect_missing(doc, ".");
	expect_missing(doc, "a.");
	expect_missing(doc, "b.c[99999999999999999999999]");
}

/* A small deterministic generator, so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static const char *const probe_paths[] = {
	"", "a", "b", "b.c", "b.c[1].d", "b.c[2][1]", "after.deep[0][0][0].z", "k",
	"[0]", "[3]", "x[0].y", "assets[2].sources[0].url", "s",
};

static void probe_all(const char *text, size_t len)
{
	for (size_t k = 0; k < sizeof(probe_paths) / sizeof(probe_paths[0]); k++) {
		int line = -1, col = -1;
		if (find_n(text, len, probe_paths[k], &line, &col) == 0) {
			assert_true(line >= 1);
			assert_true(col >= 1);
		}
	}
}

static void test_malformed_text(void **state)
{
	static const char *const bad[] = {
		"", "{", "}", "[", "\"", "\"abc", "{\"a\"", "{\"a\":", "{\"a\" 1}", "{\"a\":1,",
		"{\"a\":1,}", "{\"b\": {\"c\": [10, {\"d\"", "{\"a\\", "{\"a\\\"", "[1,,2]",
		"{,}", "{\"b\":{\"c\":[[[[", "\xff\xfe{\"a\": 1}", "{\"a\": \"\xc3\"}",
		"{\"b\": 1 2}", "nul", "{\"a\": 1}}}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		probe_all(bad[i], strlen(bad[i]));

	/* every prefix of a real document */
	for (size_t len = 0; len <= strlen(doc); len++)
		probe_all(doc, len);

	/* a key found before the text breaks is still found */
	expect_at("{\"a\": 1, \"b\": [", "a", 1, 2);

	/* random bytes drawn from JSON's alphabet */
	static const char alphabet[] = "{}[]\":,\\ \n\tabc01-.e\xc3\xa9";
	char buf[64];
	for (int iter = 0; iter < 20000; iter++) {
		size_t len = rng() % sizeof(buf);
		for (size_t i = 0; i < len; i++)
			buf[i] = alphabet[rng() % (sizeof(alphabet) - 1)];
		probe_all(buf, len);
	}
}

static void test_deep_nesting(void **state)
{
	/* far deeper than any stack would allow a naive recursive scanner */
	enum { DEPTH = 200000 };
	char *text = malloc(2 * DEPTH + 8);
	assert_non_null(text);
	memset(text, '[', DEPTH);
	memset(text + DEPTH, ']', DEPTH);
	int line, col;
	/* skipping element 0 to reach element 1 must give up, not recurse */
	assert_int_equal(px_jsonpos_find(text, 2 * DEPTH, "[1]", &line, &col), -1);
	assert_int_equal(px_jsonpos_find(text, DEPTH, "[1]", &line, &col), -1);
	assert_int_equal(px_jsonpos_find(text, 2 * DEPTH, "[0][0][0]", &line, &col), 0);
	assert_int_equal(line, 1);
	assert_int_equal(col, 4);
	/* objects too */
	for (size_t i = 0; i < DEPTH; i++)
		text[i] = i % 2 ? '[' : '{';
	assert_int_equal(px_jsonpos_find(text, DEPTH, "a", &line, &col), -1);
	memcpy(text, "{\"x\":", 5);
	for (size_t i = 5; i < DEPTH; i++)
		text[i] = '[';
	assert_int_equal(px_jsonpos_find(text, DEPTH, "y", &line, &col), -1);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top_level),
		cmocka_unit_test(test_nested_keys_and_elements),
		cmocka_unit_test(test_utf8_columns),
		cmocka_unit_test(test_not_found),
		cmocka_unit_test(test_malformed_paths),
		cmocka_unit_test(test_malformed_text),
		cmocka_unit_test(test_deep_nesting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
