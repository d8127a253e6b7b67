/*
 * test_import.c - the .strm directory and M3U/M3U8 importers: good input
 * becomes the expected catalog (paths, ids, sources, implicit providers,
 * grouping, numbering of clashing names, sanitised names); every
 * documented error is one line naming the file and, where there is one,
 * the line; bounds hold on huge and empty input.
 *
 * In-memory texts are copied into a heap buffer of exactly their length,
 * without a NUL, so that ASan catches any read past len. Directory tests
 * work in their own mkdtemp directory, removed afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "import.h"

#define M3U_NAME "list.m3u"

/* ------------------------------------------------------------- helpers */

static enum px_status m3u(const char *text, size_t len, struct px_catalog **cat, char *err,
			  size_t errlen)
{
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, text, len);
	enum px_status st = px_import_m3u(M3U_NAME, copy, len, cat, err, errlen);
	free(copy);
	return st;
}

static struct px_catalog *m3u_ok(const char *text)
{
	char err[1024] = "";
	struct px_catalog *cat = NULL;
	enum px_status st = m3u(text, strlen(text), &cat, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("status %s, err \"%s\"; text:\n%s", px_strerror(st), err, text);
	assert_non_null(cat);
	return cat;
}

/* err starts with prefix, has keyword after it, and is one line */
static void check_msg(const char *err, const char *prefix, const char *keyword)
{
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		fail_msg("message \"%s\"\n   want prefix \"%s\"", err, prefix);
	if (!strstr(err + strlen(prefix), keyword))
		fail_msg("message \"%s\" lacks \"%s\"", err, keyword);
	if (strchr(err, '\n') || strchr(err, '\r'))
		fail_msg("message is not one line: \"%s\"", err);
}

static void m3u_err_len(const char *text, size_t len, const char *prefix, const char *keyword)
{
	char err[1024];
	struct px_catalog *cat = NULL;
	memset(err, 0, sizeof(err));
	enum px_status st = m3u(text, len, &cat, err, sizeof(err));
	if (st != PX_EINVAL) {
		px_catalog_free(cat);
		fail_msg("status %s, want PX_EINVAL; err \"%s\"", px_strerror(st), err);
	}
	assert_null(cat);
	check_msg(err, prefix, keyword);
}

static void m3u_err(const char *text, const char *prefix, const char *keyword)
{
	m3u_err_len(text, strlen(text), prefix, keyword);
}

static const struct px_asset *by_path(const struct px_catalog *cat, const char *path)
{
	for (size_t i = 0; i < cat->nassets; i++)
		if (strcmp(cat->assets[i].path, path) == 0)
			return &cat->assets[i];
	char all[4096] = "";
	for (size_t i = 0; i < cat->nassets; i++)
		snprintf(all + strlen(all), sizeof(all) - strlen(all), " [%s]", cat->assets[i].path);
	fail_msg("no asset at \"%s\"; have:%s", path, all);
	return NULL;
}

static const char *provider_of(const struct px_catalog *cat, const struct px_source *s)
{
	assert_true(s->provider < cat->nproviders);
	return cat->providers[s->provider].name;
}

/* A scratch directory tree. */
struct tree {
	char root[64];
};

static int setup_tree(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	snprintf(t->root, sizeof(t->root), "/tmp/seamfs-import-XXXXXX");
	assert_non_null(mkdtemp(t->root));
	*state = t;
	return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static int teardown_tree(void **state)
{
	struct tree *t = *state;
	nftw(t->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

/* Writes len bytes at root/rel, making the directories above it. */
static void put_len(const struct tree *t, const char *rel, const char *text, size_t len)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", t->root, rel);
	for (char *s = strchr(p + strlen(t->root) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		*s = '/';
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail_msg("create %s: %s", p, strerror(errno));
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static void put(const struct tree *t, const char *rel, const char *text)
{
	put_len(t, rel, text, strlen(text));
}

static void mkdirs(const struct tree *t, const char *rel)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s/x", t->root, rel);
	for (char *s = strchr(p + strlen(t->root) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		*s = '/';
	}
}

static struct px_catalog *dir_ok(const struct tree *t)
{
	char err[1024] = "";
	struct px_catalog *cat = NULL;
	enum px_status st = px_import_strm_dir(t->root, &cat, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("status %s, err \"%s\"", px_strerror(st), err);
	assert_non_null(cat);
	return cat;
}

/* Expects the directory to be refused with st; the message starts with
 * root + "/" + prefix (or root itself when prefix is NULL). */
static void dir_err(const struct tree *t, enum px_status want, const char *prefix,
		    const char *keyword)
{
	char err[1024] = "", full[1024];
	struct px_catalog *cat = NULL;
	enum px_status st = px_import_strm_dir(t->root, &cat, err, sizeof(err));
	if (st != want) {
		px_catalog_free(cat);
		fail_msg("status %s, want %s; err \"%s\"", px_strerror(st), px_strerror(want), err);
	}
	assert_null(cat);
	if (prefix)
		snprintf(full, sizeof(full), "%s/%s", t->root, prefix);
	else
		snprintf(full, sizeof(full), "%s", t->root);
	check_msg(err, full, keyword);
}

/* ------------------------------------------------------------- .strm */

static void test_strm_tree(void **state)
{
	struct tree *t = *state;
	char loop[4200];

	/* BOM, CRLF, comments, blanks, blanks around the URL, a repeated line */
	put(t, "Movies/Heat (1995)/Heat (1995).strm",
	    "\xef\xbb\xbf# Heat\r\n\r\n  http://127.0.0.1:8081/media/heat.MKV?token=1  \r\n"
	    "#KODIPROP:inputstream=x\r\n/srv/media/heat.mkv\r\n"
	    "http://127.0.0.1:8081/media/heat.MKV?token=1\r\n");
	put(t, "Shows/S01/ep1.strm", "https://cdn.example/play/12345\n");
	put(t, "Shows/S01/ep2.mp4.strm", "http://[::1]:8080/ep2.mp4");   /* no final newline */
	put(t, "Shows/S01/ep3.STRM", "http://127.0.0.1:8081/ep3.php?id=3\n");
	put(t, "Shows/S01/notes.txt", "not a stream\n");
	put(t, "Shows/S01/folder.jpg", "jpeg");
	put(t, ".hidden/x.strm", "rtsp://ignored\n");
	put(t, "Shows/.trash/y.strm", "rtsp://ignored\n");
	/* a symlink loop and a symlinked folder */
	snprintf(loop, sizeof(loop), "%s/Shows/S01/loop", t->root);
	assert_int_equal(symlink("..", loop), 0);
	snprintf(loop, sizeof(loop), "%s/Linked", t->root);
	assert_int_equal(symlink("Movies/Heat (1995)", loop), 0);

	struct px_catalog *cat = dir_ok(t);
	assert_string_equal(cat->file, t->root);
	/* sorted walk: Linked, Movies, Shows; Shows/S01/loop leads back to Shows */
	assert_int_equal(cat->nassets, 5);
	const char *paths[] = { "Linked/Heat (1995).mkv", "Movies/Heat (1995)/Heat (1995).mkv",
		"Shows/S01/ep1", "Shows/S01/ep2.mp4", "Shows/S01/ep3" };
	const char *ids[] = { "Linked/Heat (1995).strm", "Movies/Heat (1995)/Heat (1995).strm",
		"Shows/S01/ep1.strm", "Shows/S01/ep2.mp4.strm", "Shows/S01/ep3.STRM" };
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(cat->assets[i].path, paths[i]);
		assert_string_equal(cat->assets[i].id, ids[i]);
		assert_int_equal(cat->assets[i].size, -1);
		assert_int_equal(cat->assets[i].mtime, -1);
		assert_int_equal(cat->assets[i].kind, PX_ASSET_PLAIN);
		assert_null(cat->assets[i].sha256);
	}
	const struct px_asset *heat = by_path(cat, "Movies/Heat (1995)/Heat (1995).mkv");
	assert_int_equal(heat->nsources, 2);
	assert_string_equal(heat->sources[0].url, "http://127.0.0.1:8081/media/heat.MKV?token=1");
	assert_null(heat->sources[0].path);
	assert_string_equal(provider_of(cat, &heat->sources[0]), "127.0.0.1:8081");
	assert_null(heat->sources[1].url);
	assert_string_equal(heat->sources[1].path, "/srv/media/heat.mkv");
	assert_string_equal(provider_of(cat, &heat->sources[1]), "local");
	const struct px_asset *ep2 = by_path(cat, "Shows/S01/ep2.mp4");
	assert_string_equal(provider_of(cat, &ep2->sources[0]), "[::1]:8080");
	/* implicit providers only, each once */
	assert_int_equal(cat->nproviders, 4);
	for (size_t i = 0; i < cat->nproviders; i++) {
		assert_int_equal(cat->providers[i].implicit, 1);
		for (size_t k = 0; k < i; k++)
			assert_string_not_equal(cat->providers[i].name, cat->providers[k].name);
	}
	px_catalog_free(cat);
}

static void test_strm_ids_stable(void **state)
{
	struct tree *t = *state;
	put(t, "b/x.strm", "http://h/x.mkv\n");
	put(t, "a.strm", "http://h/a.avi\n");
	struct px_catalog *c1 = dir_ok(t), *c2 = dir_ok(t);
	assert_int_equal(c1->nassets, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(c1->assets[i].id, c2->assets[i].id);
		assert_string_equal(c1->assets[i].path, c2->assets[i].path);
	}
	assert_string_equal(c1->assets[0].path, "a.avi");
	assert_string_equal(c1->assets[1].path, "b/x.mkv");
	px_catalog_free(c1);
	px_catalog_free(c2);
}

static void test_strm_err_scheme(void **state)
{
	struct tree *t = *state;
	put(t, "movies/Heat.strm", "# one\n\nrtsp://cam.example/live\n");
	dir_err(t, PX_EINVAL, "movies/Heat.strm:3: url: ", "unsupported scheme 'rtsp'");
}

static void test_strm_err_lines(void **state)
{
	struct tree *t = *state;
	static const struct {
		const char *text, *prefix, *keyword;
	} cases[] = {
		{ "media/heat.mkv\n", "a.strm:1: url: ", "neither an http(s) URL nor an absolute path" },
		{ "http://h/x.mkv\nhttp://h/a b.mkv\n", "a.strm:2: url: ", "space or control" },
		{ "http://h:99999/x.mkv\n", "a.strm:1: url: ", "port above 65535" },
		{ "http:///x.mkv\n", "a.strm:1: url: ", "no host" },
		{ "http://h/x.mkv|User-Agent=kodi\n", "a.strm:1: url: ", "header suffix" },
		{ "ftp://h/x.mkv\n", "a.strm:1: url: ", "unsupported scheme 'ftp'" },
		{ "\n# only comments\n\r\n", "a.strm: ", "no URL" },
		{ "", "a.strm: ", "no URL" },
		{ "\xef\xbb\xbf", "a.strm: ", "no URL" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put(t, "a.strm", cases[i].text);
		dir_err(t, PX_EINVAL, cases[i].prefix, cases[i].keyword);
	}
	/* a NUL byte in a URL line */
	put_len(t, "a.strm", "http://h/x\0y.mkv\n", 17);
	dir_err(t, PX_EINVAL, "a.strm:1: url: ", "NUL");
}

static void test_strm_err_sizes(void **state)
{
	struct tree *t = *state;
	size_t n = PX_IMPORT_MAX_STRM_BYTES + 1;
	char *big = malloc(n + 1);
	assert_non_null(big);

	/* a file over 64 KiB (of comments, which would be fine otherwise) */
	memset(big, '#', n);
	big[n] = '\0';
	put(t, "big.strm", big);
	dir_err(t, PX_EINVAL, "big.strm: ", "larger than 64 KiB");
	/* one line over the line bound, in a file under 64 KiB */
	snprintf(big, n, "http://h/");
	memset(big + 9, 'a', PX_IMPORT_MAX_LINE);
	big[9 + PX_IMPORT_MAX_LINE] = '\0';
	put(t, "big.strm", big);
	dir_err(t, PX_EINVAL, "big.strm:1: url: ", "longer than 8192 bytes");
	/* a URL just under the bound is fine */
	big[PX_IMPORT_MAX_LINE] = '\0';
	put(t, "big.strm", big);
	struct px_catalog *cat = dir_ok(t);
	assert_int_equal(strlen(cat->assets[0].sources[0].url), PX_IMPORT_MAX_LINE);
	px_catalog_free(cat);
	/* more sources than the bound */
	big[0] = '\0';
	for (int i = 0; i <= PX_IMPORT_MAX_SOURCES; i++)
		snprintf(big + strlen(big), n - strlen(big), "http://h/%d.mkv\n", i);
	put(t, "big.strm", big);
	dir_err(t, PX_EINVAL, "big.strm:65: url: ", "more than 64 sources");
	free(big);
}

static void test_strm_err_clashes(void **state)
{
	struct tree *t = *state;
	char want[256];

	/* two files, one asset path: the later one (in name order) is named */
	put(t, "a.mkv.strm", "http://h/a.mkv\n");
	put(t, "a.strm", "http://h/a.mkv\n");
	snprintf(want, sizeof(want), "\"a.mkv\" of %s/a.mkv.strm", t->root);
	dir_err(t, PX_EINVAL, "a.strm: path: \"a.mkv\" clashes", want);
	snprintf(want, sizeof(want), "%s/a.strm", t->root);
	assert_int_equal(unlink(want), 0);
	/* a file where another needs a folder: "Foo" (no extension) and Foo/x */
	put(t, "Foo.strm", "http://h/play\n");
	put(t, "Foo/x.strm", "http://h/x.mkv\n");
	snprintf(want, sizeof(want), "\"Foo/x.mkv\" of %s/Foo/x.strm", t->root);
	dir_err(t, PX_EINVAL, "Foo.strm: path: \"Foo\" clashes", want);
}

static void test_strm_err_dirs(void **state)
{
	struct tree *t = *state;
	char err[1024], p[512];
	struct px_catalog *cat = NULL;

	/* nothing to import */
	put(t, "readme.txt", "hi\n");
	mkdirs(t, "empty/deeper");
	dir_err(t, PX_EINVAL, NULL, "no .strm files");
	/* a dangling symlink named .strm cannot be read */
	snprintf(p, sizeof(p), "%s/gone.strm", t->root);
	assert_int_equal(symlink("/nonexistent/x", p), 0);
	dir_err(t, PX_EIO, "gone.strm: ", "No such file");
	assert_int_equal(unlink(p), 0);
	/* too deep */
	char deep[4096] = "d";
	for (int i = 0; i < PX_IMPORT_MAX_DEPTH; i++)
		strcat(deep, "/d");
	mkdirs(t, deep);
	dir_err(t, PX_EINVAL, "d/d/d", "more than 32 directory levels");
	/* a missing directory */
	snprintf(p, sizeof(p), "%s/nope", t->root);
	assert_int_equal(px_import_strm_dir(p, &cat, err, sizeof(err)), PX_EIO);
	assert_null(cat);
	check_msg(err, p, "cannot open the directory");
}

static void test_strm_single(void **state)
{
	char err[512];
	struct px_catalog *cat = NULL;
	(void)state;

	/* rel comes from the walk, but the function checks it all the same */
	assert_int_equal(px_import_strm("x/../a.strm", "x/../a.strm", "http://h/a.mkv", 14, &cat,
					err, sizeof(err)), PX_EINVAL);
	check_msg(err, "x/../a.strm: path: ", "'..'");
	assert_int_equal(px_import_strm("s", "a\nb.strm", "http://h/a.mkv", 14, &cat, err,
					sizeof(err)), PX_EINVAL);
	check_msg(err, "s: path: ", "control character");
	assert_int_equal(px_import_strm("s", ".strm", "http://h/a", 10, &cat, err, sizeof(err)),
			 PX_EINVAL);
	check_msg(err, "s: path: ", "empty");
	assert_int_equal(px_import_strm("s", "a.strm", "http://h/a.mp4", 14, &cat, err,
					sizeof(err)), PX_OK);
	assert_string_equal(cat->assets[0].path, "a.mp4");
	px_catalog_free(cat);
}

/* --------------------------------------------------------------- M3U */

static void test_m3u_grouping(void **state)
{
	(void)state;
	struct px_catalog *cat = m3u_ok(
		"\xef\xbb\xbf#EXTM3U x-tvg-url=\"http://epg\"\r\n"
		"#EXTINF:-1 tvg-id=\"heat.1995\" tvg-name=\"Heat\" group-title=\"Movies\",Heat (1995)\r\n"
		"#EXTVLCOPT:http-user-agent=Kodi\r\n"
		"http://127.0.0.1:8081/vod/heat.mkv\r\n"
		"\r\n"
		"#EXTINF:-1 tvg-id=\"alien\" group-title=\"Movies\",Alien, the film\r\n"
		"http://127.0.0.1:8081/vod/alien.mp4?t=1\r\n"
		"# the same tvg-id under another title: a second source of Heat\r\n"
		"#EXTINF:-1 tvg-id=\"heat.1995\" group-title=\"Other\",Heat HD\r\n"
		"https://mirror.example/heat.mkv\r\n"
		"#EXTINF:0,Untagged\r\n"
		"http://127.0.0.1:8081/u1\r\n"
		"#EXTINF:0 group-title='',Untagged\r\n"
		"/srv/u1.ts\r\n"
		"#EXTINF:-1 tvg-id=\"heat.1995\",Heat again\r\n"
		"http://127.0.0.1:8081/vod/heat.mkv\r\n"
		"#EXTINF:-1,\r\n"
		"#EXTGRP:Extras\r\n"
		"http://127.0.0.1:8081/extras/Making%20of.webm\r\n"
		"http://127.0.0.1:8081/bare/clip.avi\r\n");
	assert_int_equal(cat->nassets, 5);
	const struct px_asset *heat = by_path(cat, "Movies/Heat (1995).mkv");
	assert_string_equal(heat->id, "tvg-id:heat.1995");
	assert_int_equal(heat->nsources, 2);   /* the repeated URL counted once */
	assert_string_equal(heat->sources[0].url, "http://127.0.0.1:8081/vod/heat.mkv");
	assert_string_equal(heat->sources[1].url, "https://mirror.example/heat.mkv");
	assert_string_equal(provider_of(cat, &heat->sources[1]), "mirror.example:443");
	assert_int_equal(heat->size, -1);
	const struct px_asset *alien = by_path(cat, "Movies/Alien, the film.mp4");
	assert_string_equal(alien->id, "tvg-id:alien");
	const struct px_asset *u = by_path(cat, "Untagged.ts");
	assert_string_equal(u->id, "title:Untagged");
	assert_int_equal(u->nsources, 2);
	assert_string_equal(u->sources[1].path, "/srv/u1.ts");
	assert_string_equal(provider_of(cat, &u->sources[1]), "local");
	const struct px_asset *mk = by_path(cat, "Extras/Making%20of.webm");
	assert_string_equal(mk->id, "title:Making%20of");
	const struct px_asset *bare = by_path(cat, "clip.avi");
	assert_string_equal(bare->id, "title:clip");
	px_catalog_free(cat);
}

static void test_m3u_names(void **state)
{
	(void)state;
	char text[4096], longt[400];
	memset(longt, 'x', 300);
	longt[300] = '\0';
	/* a 2-byte UTF-8 character across the 200-byte cut */
	memcpy(longt + 199, "\xc3\xa9", 2);
	snprintf(text, sizeof(text),
		 "#EXTINF:-1 group-title=\"A/B\",AC/DC: Live\n"
		 "http://h/1.mkv\n"
		 "#EXTINF:-1 group-title=\"..Hidden\",...dots\n"
		 "http://h/2.mkv\n"
		 "#EXTINF:-1 group-title=\"  \",  spaced \t  out  \n"
		 "http://h/3.mkv\n"
		 "#EXTINF:-1 tvg-name=\"From Name\",\n"
		 "http://h/4\n"
		 "#EXTINF:-1 group-title=\"..\",..\n"
		 "http://h/\n"
		 "#EXTINF:-1 group-title=\".seamfs\",a\x01" "b\n"
		 "http://h/6.mkv\n"
		 "#EXTINF:-1,%s\n"
		 "http://h/7.mkv\n"
		 "#EXTINF:-1 tvg-id=\"a\",Same\nhttp://h/8.mkv\n"
		 "#EXTINF:-1 tvg-id=\"b\",Same\nhttp://h/9.mkv\n"
		 "#EXTINF:-1 tvg-id=\"c\",Same\nhttp://h/10.mkv\n"
		 "#EXTINF:-1 tvg-id=\"d\",Same.mkv\nhttp://h/11\n"
		 "#EXTINF:-1 tvg-id=\"e\" group-title=\"Same.mkv\",x\nhttp://h/12.mkv\n",
		 longt);
	struct px_catalog *cat = m3u_ok(text);
	assert_int_equal(cat->nassets, 12);
	by_path(cat, "A-B/AC-DC: Live.mkv");
	by_path(cat, "Hidden/dots.mkv");
	by_path(cat, "spaced out.mkv");
	by_path(cat, "From Name.ts");
	by_path(cat, "Untitled.ts");
	by_path(cat, "seamfs/a b.mkv");
	char want[300];
	memset(want, 'x', 199);
	snprintf(want + 199, sizeof(want) - 199, ".mkv");
	by_path(cat, want);
	/* the group folder "Same.mkv" is claimed before any file name */
	by_path(cat, "Same.mkv/x.mkv");
	by_path(cat, "Same (2).mkv");
	by_path(cat, "Same (3).mkv");
	by_path(cat, "Same (4).mkv");
	by_path(cat, "Same.mkv.ts");
	px_catalog_free(cat);
}

/* Names that are not UTF-8 (a Latin-1 playlist, a URL's own bytes) come
 * out UTF-8 in ids and paths; UTF-8 ones are left alone. */
static void test_m3u_latin1(void **state)
{
	(void)state;
	struct px_catalog *cat = m3u_ok(
		"#EXTINF:-1 group-title=\"Cin\xe9ma\",Caf\xe9\n"
		"http://h/1.mkv\n"
		"#EXTINF:-1 tvg-id=\"t\xfc\" group-title=\"Cin\xc3\xa9ma\",D\xc3\xa9j\xc3\xa0\n"
		"http://h/2.mkv\n"
		"#EXTINF:-1,\n"
		"http://h/\xc4rger.mkv\n");
	assert_int_equal(cat->nassets, 3);
	const struct px_asset *a = by_path(cat, "Cin\xc3\xa9ma/Caf\xc3\xa9.mkv");
	assert_string_equal(a->id, "title:Caf\xc3\xa9");
	a = by_path(cat, "Cin\xc3\xa9ma/D\xc3\xa9j\xc3\xa0.mkv");
	assert_string_equal(a->id, "tvg-id:t\xc3\xbc");
	a = by_path(cat, "\xc3\x84rger.mkv");
	assert_string_equal(a->id, "title:\xc3\x84rger");
	/* the URL itself is what is fetched: its bytes stay */
	assert_string_equal(a->sources[0].url, "http://h/\xc4rger.mkv");
	px_catalog_free(cat);

	/* the same for a .strm file's name */
	char err[512];
	assert_int_equal(px_import_strm("lib/Caf\xe9.strm", "Caf\xe9.strm", "http://h/a.mp4", 14,
					&cat, err, sizeof(err)), PX_OK);
	assert_string_equal(cat->assets[0].path, "Caf\xc3\xa9.mp4");
	assert_string_equal(cat->assets[0].id, "Caf\xc3\xa9.strm");
	px_catalog_free(cat);
}

static void test_m3u_skipped(void **state)
{
	(void)state;
	/* unsupported schemes, HLS URLs and #EXTINFs without a URL are skipped */
	struct px_catalog *cat = m3u_ok(
		"#EXTM3U\n"
		"#EXTINF:-1,Live\nrtsp://cam/live\n"
		"#EXTINF:-1,Dangling\n"
		"#EXTINF:-1,HLS\nhttp://h/live/index.m3u8\n"
		"#EXTINF:-1,Kept\nhttp://h/kept.mp4\n"
		"#EXTINF:-1,Last\n");
	assert_int_equal(cat->nassets, 1);
	assert_string_equal(cat->assets[0].path, "Kept.mp4");
	px_catalog_free(cat);
}

static void test_m3u_errors(void **state)
{
	(void)state;
	m3u_err("#EXTM3U\n#EXTINF:-1,A\nhttp://h/a b.mkv\n", "list.m3u:3: url: ", "space");
	m3u_err("#EXTINF:-1,A\nmovies/a.mkv\n", "list.m3u:2: url: ", "neither");
	m3u_err("#EXTINF:-1,A\nhttp://h:0/a.mkv\n", "list.m3u:2: url: ", "port 0");
	m3u_err("#EXTINF:-1,A\nhttp://h/a.mkv|Referer=x\n", "list.m3u:2: url: ", "'|'");
	m3u_err("#EXTM3U\n\n#EXTINF:-1 tvg-id=\"x,Title\nhttp://h/a.mkv\n",
		"list.m3u:3: #EXTINF: ", "unterminated quote in attribute \"tvg-id\"");
	m3u_err("#EXTINF:-1 tvg-id=\"x\" Title\nhttp://h/a.mkv\n", "list.m3u:1: #EXTINF: ",
		"no ','");
	m3u_err("#EXTINF:-1 a\"b\",T\nhttp://h/a.mkv\n", "list.m3u:1: #EXTINF: ", "quote");
	m3u_err("", "list.m3u: ", "no entries");
	m3u_err("#EXTM3U\r\n# nothing\r\n\r\n", "list.m3u: ", "no entries");
	m3u_err("\xef\xbb\xbf", "list.m3u: ", "no entries");
	m3u_err("#EXTINF:-1,Live\nudp://@239.0.0.1:1234\n", "list.m3u: ",
		"no usable entries (1 skipped");
	static const char nul[] = "#EXTINF:-1,A\nhttp://h/a\0.mkv\n";
	m3u_err_len(nul, sizeof(nul) - 1, "list.m3u:2: url: ", "NUL");
}

static void test_m3u_bounds(void **state)
{
	(void)state;
	size_t n = PX_IMPORT_MAX_LINE + 64;
	char *big = malloc(n + 4096);
	assert_non_null(big);

	/* a URL line over the bound */
	snprintf(big, n, "#EXTM3U\nhttp://h/");
	memset(big + strlen(big), 'a', PX_IMPORT_MAX_LINE);
	big[8 + PX_IMPORT_MAX_LINE + 9] = '\0';
	m3u_err(big, "list.m3u:2: ", "longer than 8192 bytes");
	/* a comment line over the bound is refused too: no line is unbounded */
	memset(big, '#', n);
	big[n] = '\0';
	m3u_err(big, "list.m3u:1: ", "longer than 8192 bytes");
	free(big);

	/* more sources of one tvg-id than the bound */
	size_t cap = 100 * (PX_IMPORT_MAX_SOURCES + 1);
	char *text = malloc(cap);
	assert_non_null(text);
	text[0] = '\0';
	for (int i = 0; i <= PX_IMPORT_MAX_SOURCES; i++)
		snprintf(text + strlen(text), cap - strlen(text),
			 "#EXTINF:-1 tvg-id=\"x\",X\nhttp://h/%d.mkv\n", i);
	m3u_err(text, "list.m3u:130: url: ", "more than 64 sources for tvg-id:x");
	free(text);

	/* larger than the file bound: refused before it is read */
	char err[256];
	struct px_catalog *cat = NULL;
	assert_int_equal(px_import_m3u("big.m3u", "", (size_t)PX_IMPORT_MAX_M3U_BYTES + 1, &cat,
				       err, sizeof(err)), PX_EINVAL);
	check_msg(err, "big.m3u: ", "larger than 16 MiB");
}

/* many entries of one name: numbered in order, quickly (each number is
 * tried once, not once per earlier entry) */
static void test_m3u_many_same_names(void **state)
{
	(void)state;
	const int n = 20000;
	size_t cap = (size_t)n * 48;
	char *text = malloc(cap), want[64];
	assert_non_null(text);
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len,
					"#EXTINF:-1 tvg-id=\"%d\",Same\nhttp://h/%d\n", i, i);
	struct px_catalog *cat = m3u_ok(text);
	assert_int_equal(cat->nassets, n);
	assert_string_equal(cat->assets[0].path, "Same.ts");
	assert_string_equal(cat->assets[1].path, "Same (2).ts");
	snprintf(want, sizeof(want), "Same (%d).ts", n);
	assert_string_equal(cat->assets[n - 1].path, want);
	px_catalog_free(cat);
	free(text);
}

static void test_m3u_no_newline(void **state)
{
	(void)state;
	/* no final newline, a CR-only last line, spaces around */
	struct px_catalog *cat = m3u_ok("#EXTINF:-1,A\n   http://h/a.mkv   \r");
	assert_string_equal(cat->assets[0].sources[0].url, "http://h/a.mkv");
	assert_string_equal(cat->assets[0].path, "A.mkv");
	px_catalog_free(cat);
}

/* ------------------------------------------------------------ loading */

static void test_load_dispatch(void **state)
{
	struct tree *t = *state;
	char p[512], err[1024];
	struct px_catalog *cat = NULL;

	put(t, "lib/a.strm", "http://h/a.mkv\n");
	put(t, "list.M3U8", "#EXTINF:-1,B\nhttp://h/b.mp4\n");
	put(t, "cat.json", "{\"assets\": [{\"id\": \"c\", \"path\": \"c.bin\", "
			   "\"sources\": [{\"url\": \"http://h/c\"}]}]}");
	put(t, "bad.m3u", "#EXTINF:-1,B\nrtmp//h/b.mp4\n");

	snprintf(p, sizeof(p), "%s/lib/", t->root);
	assert_int_equal(px_import_load(p, NULL, &cat, err, sizeof(err)), PX_OK);
	assert_string_equal(cat->assets[0].path, "a.mkv");
	px_catalog_free(cat);
	snprintf(p, sizeof(p), "%s/list.M3U8", t->root);
	assert_int_equal(px_import_load(p, NULL, &cat, err, sizeof(err)), PX_OK);
	assert_string_equal(cat->assets[0].path, "B.mp4");
	assert_string_equal(cat->file, p);
	px_catalog_free(cat);
	snprintf(p, sizeof(p), "%s/cat.json", t->root);
	assert_int_equal(px_import_load(p, NULL, &cat, err, sizeof(err)), PX_OK);
	assert_string_equal(cat->assets[0].path, "c.bin");
	px_catalog_free(cat);
	snprintf(p, sizeof(p), "%s/bad.m3u", t->root);
	assert_int_equal(px_import_load(p, NULL, &cat, err, sizeof(err)), PX_EINVAL);
	assert_null(cat);
	char want[600];
	snprintf(want, sizeof(want), "%s:2: url: ", p);
	check_msg(err, want, "neither");
	snprintf(p, sizeof(p), "%s/missing.m3u", t->root);
	assert_int_equal(px_import_load(p, NULL, &cat, err, sizeof(err)), PX_EIO);
	check_msg(err, p, "cannot open the playlist");
}

/* Local paths outside strm_paths are left out of .strm files and M3U
 * playlists alike, a path with ".." by its letters already; an asset keeps
 * the lines inside. */
static void test_load_screens_local_paths(void **state)
{
	struct tree *t = *state;
	char p[512], allowed[512], ok[600], dotted[600], lines[2048], err[1024];
	struct px_catalog *cat = NULL;

	snprintf(allowed, sizeof(allowed), "%s/media", t->root);
	put(t, "media/ok.mkv", "x");
	snprintf(ok, sizeof(ok), "%s/ok.mkv", allowed);
	snprintf(dotted, sizeof(dotted), "%s/../lib/a.strm", allowed);
	snprintf(lines, sizeof(lines), "%s\n/etc/passwd\n%s\n", dotted, ok);
	put(t, "lib/a.strm", lines);
	put(t, "lib/b.strm", "/etc/passwd\n");
	snprintf(p, sizeof(p), "%s/lib", t->root);
	assert_int_equal(px_import_load(p, allowed, &cat, err, sizeof(err)), PX_OK);
	assert_int_equal(cat->nassets, 1);
	assert_string_equal(cat->assets[0].id, "a.strm");
	assert_int_equal(cat->assets[0].nsources, 1);
	assert_string_equal(cat->assets[0].sources[0].path, ok);
	px_catalog_free(cat);
	/* no strm_paths: nothing local, and nothing left in the tree */
	assert_int_equal(px_import_load(p, NULL, &cat, err, sizeof(err)), PX_EINVAL);
	assert_null(cat);
	check_msg(err, p, "no usable .strm files (4 local path(s)");

	snprintf(lines, sizeof(lines), "#EXTINF:-1,A\n/etc/passwd\n#EXTINF:-1,B\n%s\n", ok);
	put(t, "list.m3u", lines);
	snprintf(p, sizeof(p), "%s/list.m3u", t->root);
	assert_int_equal(px_import_load(p, allowed, &cat, err, sizeof(err)), PX_OK);
	assert_int_equal(cat->nassets, 1);
	assert_string_equal(cat->assets[0].path, "B.mkv");
	px_catalog_free(cat);

	char why[300];
	assert_int_equal(px_import_path_allowed(allowed, ok, why, sizeof(why)), 1);
	assert_int_equal(px_import_path_allowed(allowed, dotted, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "lies outside strm_paths"));
	assert_int_equal(px_import_path_allowed("/", "/etc/passwd", why, sizeof(why)), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_strm_tree, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_strm_ids_stable, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_strm_err_scheme, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_strm_err_lines, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_strm_err_sizes, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_strm_err_clashes, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_strm_err_dirs, setup_tree, teardown_tree),
		cmocka_unit_test(test_strm_single),
		cmocka_unit_test(test_m3u_grouping),
		cmocka_unit_test(test_m3u_names),
		cmocka_unit_test(test_m3u_skipped),
		cmocka_unit_test(test_m3u_errors),
		cmocka_unit_test(test_m3u_bounds),
		cmocka_unit_test(test_m3u_many_same_names),
		cmocka_unit_test(test_m3u_no_newline),
		cmocka_unit_test(test_m3u_latin1),
		cmocka_unit_test_setup_teardown(test_load_dispatch, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_load_screens_local_paths, setup_tree,
						teardown_tree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
