/*
 * test_state.c - the state directory: sizes and mtimes survive a
 * put/save/free/reopen round trip; a corrupt or foreign file is treated as
 * empty; nothing is written until save, and only when something changed.
 * Each test works in its own mkdtemp directory, removed afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <glob.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "state.h"

struct fixture {
	char dir[64];
	char statedir[128];
	char catalog[128];
};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/seamfs-state-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->statedir, sizeof(f->statedir), "%s/state/nested", f->dir);
	snprintf(f->catalog, sizeof(f->catalog), "%s/catalog.json", f->dir);
	FILE *c = fopen(f->catalog, "w");
	if (!c)
		return -1;
	fputs("{\"assets\": []}\n", c);
	fclose(c);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	int r = nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

static struct px_state *open_state(const struct fixture *f, const char *catalog)
{
	char err[512] = "";
	struct px_state *s = NULL;
	enum px_status st = px_state_open(f->statedir, catalog, &s, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("px_state_open: %s: %s", px_strerror(st), err);
	assert_non_null(s);
	return s;
}

static void save(struct px_state *s)
{
	char err[512] = "";
	enum px_status st = px_state_save(s, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("px_state_save: %s: %s", px_strerror(st), err);
}

/* keys of two source lists */
#define K1 "00000000000000k1"
#define K2 "00000000000000k2"

/* The key of a source list depends on every name and on the order. */
static void test_sources_key(void **state)
{
	(void)state;
	const char *a[] = { "http://h/a.mkv", "/srv/a.mkv" };
	const char *b[] = { "/srv/a.mkv", "http://h/a.mkv" };
	const char *c[] = { "http://h/a.mk", "v/srv/a.mkv" };
	char ka[PX_STATE_KEY_LEN], kb[PX_STATE_KEY_LEN], kc[PX_STATE_KEY_LEN];
	char ka2[PX_STATE_KEY_LEN], k1[PX_STATE_KEY_LEN];
	px_state_sources_key(a, 2, ka);
	px_state_sources_key(a, 2, ka2);
	px_state_sources_key(b, 2, kb);
	px_state_sources_key(c, 2, kc);
	px_state_sources_key(a, 1, k1);
	assert_int_equal(strlen(ka), 16);
	assert_string_equal(ka, ka2);
	assert_string_not_equal(ka, kb);
	assert_string_not_equal(ka, kc);
	assert_string_not_equal(ka, k1);
}

static void test_round_trip(void **state)
{
	struct fixture *f = *state;
	int64_t size = -7, mtime = -7;

	struct px_state *s = open_state(f, f->catalog);
	/* the state dir is made, 0700, with parents */
	struct stat sb;
	assert_int_equal(stat(f->statedir, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0700);
	/* the file lives in the state dir */
	assert_memory_equal(px_state_file(s), f->statedir, strlen(f->statedir));

	assert_int_equal(px_state_get(s, "a", K1, &size, &mtime), 0);
	assert_int_equal(px_state_put(s, "a", K1, 1234567890123LL, 1700000000), PX_OK);
	assert_int_equal(px_state_put(s, "b", K1, 0, -1), PX_OK);
	assert_int_equal(px_state_put(s, "caf\xc3\xa9 \"q\"", K1, 42, 0), PX_OK);
	assert_int_equal(px_state_get(s, "a", K1, &size, &mtime), 1);
	assert_int_equal(size, 1234567890123LL);
	assert_int_equal(mtime, 1700000000);
	save(s);
	char *file = strdup(px_state_file(s));
	assert_non_null(file);
	px_state_free(s);

	assert_int_equal(stat(file, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));

	s = open_state(f, f->catalog);
	assert_string_equal(px_state_file(s), file);
	assert_int_equal(px_state_get(s, "a", K1, &size, &mtime), 1);
	assert_int_equal(size, 1234567890123LL);
	assert_int_equal(mtime, 1700000000);
	assert_int_equal(px_state_get(s, "b", K1, &size, &mtime), 1);
	assert_int_equal(size, 0);
	assert_int_equal(mtime, -1);
	assert_int_equal(px_state_get(s, "caf\xc3\xa9 \"q\"", K1, &size, &mtime), 1);
	assert_int_equal(size, 42);
	assert_int_equal(mtime, 0);
	assert_int_equal(px_state_get(s, "c", K1, &size, &mtime), 0);
	/* the same id with other sources (the .strm points elsewhere): not it */
	assert_int_equal(px_state_get(s, "a", K2, &size, &mtime), 0);

	/* an update replaces, and survives too */
	assert_int_equal(px_state_put(s, "a", K1, 5, 6), PX_OK);
	save(s);
	px_state_free(s);
	s = open_state(f, f->catalog);
	assert_int_equal(px_state_get(s, "a", K1, &size, &mtime), 1);
	assert_int_equal(size, 5);
	assert_int_equal(mtime, 6);
	assert_int_equal(px_state_get(s, "b", K1, &size, &mtime), 1);
	px_state_free(s);

	/* no temporary file is left behind */
	char tmp[512];
	/* px_write_atomic's FILE.XXXXXX.tmp (a random name) */
	snprintf(tmp, sizeof(tmp), "%s.*.tmp", file);
	glob_t g;
	assert_int_equal(glob(tmp, 0, NULL, &g), GLOB_NOMATCH);
	globfree(&g);
	free(file);
	px_state_free(NULL);
}

static void test_unsaved_is_lost(void **state)
{
	struct fixture *f = *state;
	int64_t size, mtime;
	struct px_state *s = open_state(f, f->catalog);
	assert_int_equal(px_state_put(s, "a", K1, 10, 20), PX_OK);
	char *file = strdup(px_state_file(s));
	px_state_free(s);
	/* nothing written without save */
	assert_int_equal(access(file, F_OK), -1);
	s = open_state(f, f->catalog);
	assert_int_equal(px_state_get(s, "a", K1, &size, &mtime), 0);
	/* save with nothing changed writes nothing */
	save(s);
	assert_int_equal(access(file, F_OK), -1);
	px_state_free(s);
	free(file);
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static void test_corrupt_is_empty(void **state)
{
	struct fixture *f = *state;
	int64_t size, mtime;
	static const char *const corrupt[] = {
		"", "{", "garbage", "\x01\x02\xff",
		"{\"version\": 1, \"assets\": {\"a\": {\"size\": 1, \"mtime\": 2}",  /* cut */
		"{\"version\": 1, \"assets\": [1, 2]}",                             /* wrong type */
		"[{\"a\": {\"size\": 1}}]",
		"{\"assets\": {\"a\": {\"size\": 1}, \"a\": {\"size\": 2}}}",         /* duplicate */
	};

	struct px_state *s = open_state(f, f->catalog);
	char *file = strdup(px_state_file(s));
	assert_int_equal(px_state_put(s, "a", K1, 1, 2), PX_OK);
	save(s);
	px_state_free(s);

	for (size_t i = 0; i < sizeof(corrupt) / sizeof(corrupt[0]); i++) {
		write_file(file, corrupt[i]);
		s = open_state(f, f->catalog);
		assert_int_equal(px_state_get(s, "a", K1, &size, &mtime), 0);
		px_state_free(s);
	}

	/* a corrupt file is replaced by a good one on the next save */
	write_file(file, "{\"assets\": {\"a\": ");
	s = open_state(f, f->catalog);
	assert_int_equal(px_state_put(s, "b", K1, 7, 8), PX_OK);
	save(s);
	px_state_free(s);
	s = open_state(f, f->catalog);
	assert_int_equal(px_state_get(s, "b", K1, &size, &mtime), 1);
	assert_int_equal(size, 7);
	assert_int_equal(mtime, 8);
	assert_int_equal(px_state_get(s, "a", K1, &size, &mtime), 0);
	px_state_free(s);
	free(file);
}

static void test_bad_entries_ignored(void **state)
{
	struct fixture *f = *state;
	int64_t size = -7, mtime = -7;
	struct px_state *s = open_state(f, f->catalog);
	char *file = strdup(px_state_file(s));
	px_state_free(s);

	write_file(file, "{\"version\": 1, \"assets\": {"
		   "\"neg\": {\"size\": -1, \"mtime\": 5, \"sources\": \"" K1 "\"},"
		   "\"str\": {\"size\": \"12\", \"mtime\": 5, \"sources\": \"" K1 "\"},"
		   "\"nosize\": {\"mtime\": 5, \"sources\": \"" K1 "\"},"
		   "\"badmtime\": {\"size\": 9, \"mtime\": \"x\", \"sources\": \"" K1 "\"},"
		   "\"old\": {\"size\": 5, \"mtime\": 5},"
		   "\"badkey\": {\"size\": 5, \"mtime\": 5, \"sources\": 7},"
		   "\"ok\": {\"size\": 3, \"mtime\": 4, \"sources\": \"" K1 "\"}}}");
	s = open_state(f, f->catalog);
	assert_int_equal(px_state_get(s, "neg", K1, &size, &mtime), 0);
	assert_int_equal(px_state_get(s, "str", K1, &size, &mtime), 0);
	assert_int_equal(px_state_get(s, "nosize", K1, &size, &mtime), 0);
	/* written before sources were keyed: found again, once */
	assert_int_equal(px_state_get(s, "old", K1, &size, &mtime), 0);
	assert_int_equal(px_state_get(s, "badkey", K1, &size, &mtime), 0);
	assert_int_equal(px_state_get(s, "badmtime", K1, &size, &mtime), 1);
	assert_int_equal(size, 9);
	assert_int_equal(mtime, -1);
	assert_int_equal(px_state_get(s, "ok", K1, &size, &mtime), 1);
	assert_int_equal(size, 3);
	assert_int_equal(mtime, 4);
	px_state_free(s);
	free(file);
}

static void test_one_file_per_catalog(void **state)
{
	struct fixture *f = *state;
	int64_t size, mtime;
	char other[160];
	snprintf(other, sizeof(other), "%s/sub", f->dir);
	assert_int_equal(mkdir(other, 0700), 0);
	snprintf(other, sizeof(other), "%s/sub/catalog.json", f->dir);
	write_file(other, "{\"assets\": []}\n");

	struct px_state *s1 = open_state(f, f->catalog);
	struct px_state *s2 = open_state(f, other);
	assert_string_not_equal(px_state_file(s1), px_state_file(s2));
	assert_int_equal(px_state_put(s1, "a", K1, 1, 1), PX_OK);
	save(s1);
	px_state_free(s1);
	px_state_free(s2);

	s2 = open_state(f, other);
	assert_int_equal(px_state_get(s2, "a", K1, &size, &mtime), 0);
	px_state_free(s2);

	/* the same catalog reached through another path is the same state */
	char again[200];
	snprintf(again, sizeof(again), "%s/sub/../catalog.json", f->dir);
	s1 = open_state(f, again);
	assert_int_equal(px_state_get(s1, "a", K1, &size, &mtime), 1);
	px_state_free(s1);
}

static void test_unmakeable_dir(void **state)
{
	struct fixture *f = *state;
	char err[512] = "";
	char bad[200];
	struct px_state *s = (struct px_state *)&err;
	/* a path under a regular file cannot be a directory */
	snprintf(bad, sizeof(bad), "%s/state", f->catalog);
	assert_int_equal(px_state_open(bad, f->catalog, &s, err, sizeof(err)), PX_EIO);
	assert_null(s);
	assert_non_null(strstr(err, bad));
}

int main(void)
{
	px_log_setup(PX_LOG_ERROR, 0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sources_key),
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsaved_is_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_is_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_entries_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_file_per_catalog, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unmakeable_dir, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
