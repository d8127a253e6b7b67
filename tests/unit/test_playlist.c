/*
 * test_playlist.c - the playlist parser and writer, and the trust rule
 * that recovery and serving share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "playlist.h"

#define HDR "#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 1880\n#SEGMENTS 5\n"

static enum px_status parse(const char *text, struct px_playlist *pl, char *err)
{
	return px_playlist_parse("pl", text, strlen(text), pl, err, 256);
}

static void test_parse_ok(void **state)
{
	struct px_playlist pl;
	char err[256] = "";
	(void)state;
	assert_int_equal(parse(HDR "0 1880 100\n3 1880 200\n1 1880 300\n#CLEAN\n", &pl, err),
			 PX_OK);
	assert_int_equal(pl.seg_bytes, 1880);
	assert_int_equal(pl.nseg, 5);
	assert_int_equal(pl.n, 3);
	assert_int_equal(pl.e[1].index, 3);
	assert_int_equal(pl.e[2].mtime_ns, 300);
	assert_int_equal(pl.clean, 1);
	assert_int_equal(px_playlist_find(&pl, 1), 2);
	assert_int_equal(px_playlist_find(&pl, 4), -1);
	px_playlist_release(&pl);
	assert_int_equal(parse(HDR, &pl, err), PX_OK);
	assert_int_equal(pl.n, 0);
	assert_int_equal(pl.clean, 0);
	px_playlist_release(&pl);
}

static void expect_bad(const char *text, const char *msg)
{
	struct px_playlist pl;
	char err[256] = "";
	assert_int_equal(parse(text, &pl, err), PX_EINVAL);
	if (!strstr(err, msg))
		fail_msg("error \"%s\" does not contain \"%s\"", err, msg);
	assert_null(pl.e);
}

static void test_parse_bad(void **state)
{
	(void)state;
	expect_bad("", "pl:1: missing #SEGMENT-BYTES");
	expect_bad("hello\n", "pl:1: not a seamfs playlist");
	expect_bad("#SEAMFS-PLAYLIST 2\n", "pl:1: not a seamfs playlist");
	expect_bad("#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 1000\n", "pl:2: #SEGMENT-BYTES");
	expect_bad("#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 100\n", "multiple of 188");
	expect_bad("#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 0\n#SEGMENTS 2\n0 100 1\n",
		   "pl:4: segment 0: size is not a positive multiple of 188");
	expect_bad("#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 0\n#SEGMENTS 2\n0 0 1\n",
		   "pl:4: segment 0: size is not a positive multiple of 188");
	expect_bad("#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 188\n#SEGMENTS 0\n", "pl:3: #SEGMENTS");
	expect_bad(HDR "0 1880 100", "pl:4: last line has no newline");
	expect_bad(HDR "0 1880\n", "pl:4: unrecognised line");
	expect_bad(HDR "0 1880 1 2 3\n", "pl:4: unrecognised line");
	expect_bad(HDR "0 1880 1 0\n", "pl:4: expected \"INDEX SIZE MTIME_NS [GEN]\"");
	expect_bad(HDR "0 1880 1 x\n", "pl:4: expected");
	expect_bad(HDR "0 1880 x\n", "pl:4: expected \"INDEX SIZE MTIME_NS [GEN]\"");
	expect_bad(HDR "-1 1880 1\n", "pl:4: expected");
	expect_bad(HDR "5 1880 1\n", "pl:4: segment 5: index beyond #SEGMENTS");
	expect_bad(HDR "1 1881 1\n", "pl:4: segment 1: size is not #SEGMENT-BYTES");
	expect_bad(HDR "1 1880 1\n1 1880 2\n", "pl:5: segment 1 listed twice");
	expect_bad(HDR "#CLEAN\n", "pl:4: #CLEAN before any segment");
	expect_bad("#SEAMFS-PLAYLIST 1\n0 1880 1\n", "pl:2: segment before");
	expect_bad(HDR "0 1880 99999999999999999999\n", "pl:4: expected");
	expect_bad(HDR "0  1880 1\n", "pl:4: unrecognised line");
	expect_bad(HDR "0 1880 1 \n", "pl:4: unrecognised line");
	expect_bad(HDR "\n", "pl:4: unrecognised line");
	expect_bad(HDR "#SEGMENTS 5\n", "pl:4: #SEGMENTS: given twice");
}

static void test_save_load(void **state)
{
	struct px_playlist pl, back;
	char dir[] = "/tmp/seamfs-pl-XXXXXX", path[64], err[256];
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/playlist", dir);
	assert_int_equal(px_playlist_load(path, &back, err, sizeof(err)), PX_ENOTFOUND);
	px_playlist_init(&pl, 188 * 4, 3);
	assert_int_equal(px_playlist_add(&pl, 2, 752, 11), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 0, 752, 12), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 0, 752, 13), PX_EINVAL);
	assert_int_equal(px_playlist_add(&pl, 3, 752, 13), PX_EINVAL);
	pl.clean = 1;
	assert_int_equal(px_playlist_save(&pl, path, err, sizeof(err)), PX_OK);
	assert_int_equal(px_playlist_load(path, &back, err, sizeof(err)), PX_OK);
	assert_int_equal(back.n, 2);
	assert_int_equal(back.e[0].index, 2);
	assert_int_equal(back.e[1].mtime_ns, 12);
	assert_int_equal(back.clean, 1);
	/* adding clears clean: the newest entry is not moved past yet */
	assert_int_equal(px_playlist_add(&back, 1, 752, 14), PX_OK);
	assert_int_equal(back.clean, 0);
	px_playlist_release(&pl);
	px_playlist_release(&back);
	unlink(path);
	rmdir(dir);
}

/* A link at the playlist, or at the job directory above it, is never
 * followed; a FIFO there is not opened (that would block): PX_EIO with
 * errno ELOOP or EINVAL, err saying so. */
static void test_load_never_follows(void **state)
{
	struct px_playlist pl, back;
	char dir[] = "/tmp/seamfs-pl-XXXXXX", job[96], path[128], real[128], err[256];
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(job, sizeof(job), "%s/job", dir);
	snprintf(path, sizeof(path), "%s/playlist", job);
	snprintf(real, sizeof(real), "%s/real", dir);
	assert_int_equal(mkdir(job, 0755), 0);
	px_playlist_init(&pl, 188 * 4, 3);
	assert_int_equal(px_playlist_add(&pl, 1, 752, 11), PX_OK);
	assert_int_equal(px_playlist_save(&pl, real, err, sizeof(err)), PX_OK);
	assert_int_equal(symlink(real, path), 0);
	assert_int_equal(px_playlist_load(path, &back, err, sizeof(err)), PX_EIO);
	assert_int_equal(errno, ELOOP);
	assert_non_null(strstr(err, "a link seamfs did not make is in the way"));
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(px_playlist_load(path, &back, err, sizeof(err)), PX_EIO);
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	unlink(path);
	/* the job directory a link to one holding a playlist */
	char other[96], linked[128];
	snprintf(other, sizeof(other), "%s/other", dir);
	snprintf(linked, sizeof(linked), "%s/linked/playlist", dir);
	assert_int_equal(mkdir(other, 0755), 0);
	snprintf(path, sizeof(path), "%s/playlist", other);
	assert_int_equal(px_playlist_save(&pl, path, err, sizeof(err)), PX_OK);
	assert_int_equal(px_playlist_load(path, &back, err, sizeof(err)), PX_OK);
	px_playlist_release(&back);
	snprintf(real, sizeof(real), "%s/linked", dir);
	assert_int_equal(symlink(other, real), 0);
	assert_int_equal(px_playlist_load(linked, &back, err, sizeof(err)), PX_EIO);
	assert_int_equal(errno, ELOOP);
	px_playlist_release(&pl);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* px_playlist_drop removes one entry of one generation, keeping the order. */
static void test_drop(void **state)
{
	struct px_playlist pl;
	(void)state;
	px_playlist_init(&pl, 1880, 5);
	assert_int_equal(px_playlist_add(&pl, 2, 1880, 1), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 0, 1880, 2), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 4, 1880, 3), PX_OK);
	pl.clean = 1;
	assert_int_equal(px_playlist_drop(&pl, 0, 7), 0); /* another generation's */
	assert_int_equal(px_playlist_drop(&pl, 3, 0), 0);
	assert_int_equal(px_playlist_drop(&pl, 0, 0), 1);
	assert_int_equal(pl.n, 2);
	assert_int_equal(pl.e[0].index, 2);
	assert_int_equal(pl.e[1].index, 4);
	assert_int_equal(pl.clean, 1);
	assert_int_equal(px_playlist_drop(&pl, 2, 0), 1);
	assert_int_equal(px_playlist_drop(&pl, 4, 0), 1);
	assert_int_equal(pl.n, 0);
	assert_int_equal(pl.clean, 0);
	/* a dropped index may be listed again, once */
	assert_int_equal(px_playlist_add(&pl, 4, 1880, 4), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 4, 1880, 5), PX_EINVAL);
	assert_int_equal(px_playlist_find(&pl, 4), 0);
	px_playlist_release(&pl);
}

/* A long list (a 3 h film in 1 s segments and more) parses with every
 * duplicate found, wherever it is: the duplicate check is a bit per
 * index, not a search of the entries before. */
static void test_long_list(void **state)
{
	enum { N = 200000 };
	size_t cap = 64 + (size_t)N * 24;
	char *text = malloc(cap), err[256] = "";
	struct px_playlist pl;
	(void)state;
	assert_non_null(text);
	size_t len = (size_t)snprintf(text, cap, "#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 188\n"
				      "#SEGMENTS %d\n", N);
	for (int k = N - 1; k >= 0; k--)
		len += (size_t)snprintf(text + len, cap - len, "%d 188 %d\n", k, k);
	assert_int_equal(px_playlist_parse("pl", text, len, &pl, err, sizeof(err)), PX_OK);
	assert_int_equal(pl.n, N);
	assert_int_equal(px_playlist_find(&pl, 0), N - 1);
	assert_int_equal(px_playlist_find(&pl, N - 1), 0);
	px_playlist_release(&pl);
	/* the first entry again at the end */
	len += (size_t)snprintf(text + len, cap - len, "%d 188 1\n", N - 1);
	assert_int_equal(px_playlist_parse("pl", text, len, &pl, err, sizeof(err)), PX_EINVAL);
	assert_non_null(strstr(err, "segment 199999 listed twice"));
	free(text);
}

/* The recovery decision: which listed segments are trusted. */
static void test_trust(void **state)
{
	struct px_playlist pl;
	unsigned char t[8];
	(void)state;
	px_playlist_init(&pl, 1880, 8);
	assert_int_equal(px_playlist_trust(&pl, NULL, t), 0);
	assert_int_equal(px_playlist_add(&pl, 0, 1880, 100), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 1, 1880, 200), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 5, 1880, 300), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 6, 1880, 400), PX_OK);

	/* serving a live writer's list: every entry, the newest too (a
	 * segment is listed only once it is fsynced and in place) */
	assert_int_equal(px_playlist_trust(&pl, NULL, t), 4);
	assert_true(t[0] && t[1] && t[2] && t[3]);

	/* after a death: the files as listed, the newest one included */
	struct px_seg_seen seen[4] = {
		{ 1, 1880, 100 }, { 1, 1880, 200 }, { 1, 1880, 300 }, { 1, 1880, 400 } };
	assert_int_equal(px_playlist_trust(&pl, seen, t), 4);
	assert_true(t[3]);
	/* a file that changed size, changed since listed, or vanished */
	seen[0].size = 1692;
	seen[1].mtime_ns = 201;
	seen[2].exists = 0;
	seen[3].size = 0;
	assert_int_equal(px_playlist_trust(&pl, seen, t), 0);
	/* a clean stop changes nothing */
	seen[0].size = 1880;
	seen[1].mtime_ns = 200;
	seen[2].exists = 1;
	seen[3].size = 1880;
	pl.clean = 1;
	assert_int_equal(px_playlist_trust(&pl, seen, t), 4);
	px_playlist_release(&pl);
}

/* A remux lists segments of varying sizes; each must keep its own. */
static void test_trust_variable(void **state)
{
	struct px_playlist pl;
	char err[256];
	unsigned char t[4];
	(void)state;
	assert_int_equal(parse("#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 0\n#SEGMENTS 3\n"
			       "0 376 5\n1 188 6\n2 564 7\n", &pl, err), PX_OK);
	struct px_seg_seen seen[3] = { { 1, 376, 5 }, { 1, 376, 6 }, { 1, 564, 7 } };
	assert_int_equal(px_playlist_trust(&pl, seen, t), 2);
	assert_true(t[0] && !t[1] && t[2]);
	px_playlist_release(&pl);
}

/* A probe's entries, listed when it ended, never become the newest entry
 * of a writer that has not moved past it. */
static void test_add_closed(void **state)
{
	struct px_playlist pl;
	unsigned char t[8];
	(void)state;
	px_playlist_init(&pl, 1880, 90);
	/* into an empty list: closed, so trusted at once */
	assert_int_equal(px_playlist_add_closed(&pl, 88, 1880, 1), PX_OK);
	assert_true(pl.clean);
	assert_int_equal(px_playlist_trust(&pl, NULL, t), 1);
	/* a main writer's entries: it is still running */
	assert_int_equal(px_playlist_add(&pl, 0, 1880, 2), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 1, 1880, 3), PX_OK);
	assert_false(pl.clean);
	/* a probe's go before the running writer's, which stays the newest */
	assert_int_equal(px_playlist_add_closed(&pl, 59, 1880, 4), PX_OK);
	assert_int_equal(px_playlist_add_closed(&pl, 60, 1880, 5), PX_OK);
	assert_int_equal(pl.n, 5);
	assert_int_equal(pl.e[4].index, 1);
	assert_int_equal(pl.e[2].index, 59);
	assert_int_equal(pl.e[3].index, 60);
	assert_int_equal(px_playlist_trust(&pl, NULL, t), 5);
	/* after a clean stop: at the end, and the list stays clean */
	pl.clean = 1;
	assert_int_equal(px_playlist_add_closed(&pl, 29, 1880, 6), PX_OK);
	assert_true(pl.clean);
	assert_int_equal(pl.e[5].index, 29);
	assert_int_equal(px_playlist_trust(&pl, NULL, t), 6);
	/* listed twice or out of range: refused */
	assert_int_equal(px_playlist_add_closed(&pl, 29, 1880, 7), PX_EINVAL);
	assert_int_equal(px_playlist_add_closed(&pl, 90, 1880, 7), PX_EINVAL);
	assert_int_equal(pl.n, 6);
	px_playlist_release(&pl);
}

static void test_seg_name(void **state)
{
	char buf[32], tail[16];
	uint32_t k;
	uint64_t g;
	(void)state;
	px_playlist_seg_name(42, buf, sizeof(buf));
	assert_string_equal(buf, "seg-000042.ts");
	px_playlist_seg_file(42, 0, buf, sizeof(buf));
	assert_string_equal(buf, "seg-000042.ts");
	px_playlist_seg_file(7, 1733000000123ULL, buf, sizeof(buf));
	assert_string_equal(buf, "seg-000007.g1733000000123.ts");
	assert_true(px_playlist_seg_parse(buf, &k, &g, tail, sizeof(tail)));
	assert_int_equal(k, 7);
	assert_int_equal(g, 1733000000123ULL);
	assert_string_equal(tail, "");
	assert_true(px_playlist_seg_parse("seg-000003.g2.ts.probe.tmp", &k, &g, tail,
					  sizeof(tail)));
	assert_int_equal(k, 3);
	assert_int_equal(g, 2);
	assert_string_equal(tail, ".probe.tmp");
	assert_true(px_playlist_seg_parse("seg-000003.ts.tmp", &k, &g, tail, sizeof(tail)));
	assert_int_equal(g, 0);
	assert_string_equal(tail, ".tmp");
	assert_false(px_playlist_seg_parse("seg-0000003.ts", &k, &g, tail, sizeof(tail)));
	assert_false(px_playlist_seg_parse("seg-000003.g0.ts", &k, &g, tail, sizeof(tail)));
	assert_false(px_playlist_seg_parse("seg-000003.gx.ts", &k, &g, tail, sizeof(tail)));
	assert_false(px_playlist_seg_parse("seg-00003.ts", &k, &g, tail, sizeof(tail)));
}

/* Cluster mode: an entry's generation is kept through format and parse. */
static void test_gen_round_trip(void **state)
{
	struct px_playlist pl, back;
	char err[256] = "";
	size_t len;
	(void)state;
	px_playlist_init(&pl, 1880, 5);
	assert_int_equal(px_playlist_add_gen(&pl, 0, 1880, 100, 7), PX_OK);
	assert_int_equal(px_playlist_add(&pl, 1, 1880, 200), PX_OK);
	assert_int_equal(px_playlist_add_closed_gen(&pl, 3, 1880, 300, 9), PX_OK);
	char *text = px_playlist_format(&pl, &len);
	assert_non_null(text);
	assert_non_null(strstr(text, "0 1880 100 7\n"));
	assert_non_null(strstr(text, "1 1880 200\n"));
	assert_int_equal(px_playlist_parse("pl", text, len, &back, err, sizeof(err)), PX_OK);
	assert_int_equal(back.n, 3);
	assert_int_equal(back.e[0].gen, 7);
	assert_int_equal(back.e[1].index, 3); /* closed: before the open newest */
	assert_int_equal(back.e[1].gen, 9);
	assert_int_equal(back.e[2].gen, 0);
	free(text);
	px_playlist_release(&pl);
	px_playlist_release(&back);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_save_load),
		cmocka_unit_test(test_load_never_follows),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_long_list),
		cmocka_unit_test(test_trust),
		cmocka_unit_test(test_trust_variable),
		cmocka_unit_test(test_add_closed),
		cmocka_unit_test(test_seg_name),
		cmocka_unit_test(test_gen_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
