/*
 * test_catalog.c - px_catalog_parse/load: a full valid catalog becomes the
 * expected structs; every validation error is one line
 * "FILE:LINE:COL: FIELD: message" pointing at the offending key (or at the
 * enclosing object when a member is missing).
 *
 * The catalog texts are copied into a heap buffer of exactly their length,
 * without a terminating NUL, so that ASan catches any read past len.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"

#define FILE_NAME "t.json"

/* Parses text (copied without a NUL) and returns the status. */
static enum px_status parse(const char *text, struct px_catalog **cat, char *err,
			    size_t errlen)
{
	size_t len = strlen(text);
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, text, len);
	enum px_status st = px_catalog_parse(FILE_NAME, copy, len, cat, err, errlen);
	free(copy);
	return st;
}

/*
 * Asserts that text is rejected with PX_EINVAL, a message that starts with
 * prefix ("t.json:LINE:COL: FIELD:"), contains keyword after it, and is one
 * line.
 */
static void expect_error(const char *text, const char *prefix, const char *keyword)
{
	char err[1024];
	struct px_catalog *cat = NULL;

	memset(err, 0, sizeof(err));
	enum px_status st = parse(text, &cat, err, sizeof(err));
	if (st != PX_EINVAL) {
		px_catalog_free(cat);
		fail_msg("status %d (%s), want PX_EINVAL; err \"%s\"; text:\n%s", st,
			 px_strerror(st), err, text);
	}
	assert_null(cat);
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		fail_msg("message \"%s\"\n   want prefix \"%s\"", err, prefix);
	if (!strstr(err + strlen(prefix), keyword))
		fail_msg("message \"%s\" lacks \"%s\"", err, keyword);
	if (strchr(err, '\n') || strchr(err, '\r'))
		fail_msg("message is not one line: \"%s\"", err);
}

static struct px_catalog *parse_ok(const char *text)
{
	char err[1024] = "";
	struct px_catalog *cat = NULL;
	enum px_status st = parse(text, &cat, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("status %s, err \"%s\"; text:\n%s", px_strerror(st), err, text);
	assert_non_null(cat);
	return cat;
}

/* ---------------------------------------------------------------- valid */

static const char full_catalog[] =
	"{\n"
	"  \"providers\": [\n"
	"    { \"name\": \"mirror-a\", \"max_connections\": 4,\n"
	"      \"headers\": { \"Authorization\": \"Bearer abc\", \"X-Trace\": \"on\" } },\n"
	"    { \"name\": \"nas\" }\n"
	"  ],\n"
	"  \"assets\": [\n"
	"    { \"id\": \"heat-1995\",\n"
	"      \"path\": \"Movies/Heat (1995)/Heat (1995).mkv\",\n"
	"      \"size\": 1234567890, \"mtime\": 1700000000,\n"
	"      \"sha256\": \"ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789\",\n"
	"      \"sources\": [\n"
	"        { \"url\": \"https://a.example/heat.mkv\", \"provider\": \"mirror-a\" },\n"
	"        { \"url\": \"http://127.0.0.1:8081/heat.mkv\" },\n"
	"        { \"url\": \"HTTPS://user:pw@CDN.Example:8443/h.mkv?x=1\" },\n"
	"        { \"path\": \"/srv/media/heat.mkv\", \"provider\": \"nas\" },\n"
	"        { \"path\": \"/srv/other/heat.mkv\" }\n"
	"      ] },\n"
	"    { \"id\": \"clip\", \"path\": \"clip.bin\", \"size\": 0,\n"
	"      \"sources\": [ { \"url\": \"http://127.0.0.1:8081/clip.bin\" },\n"
	"                   { \"url\": \"http://[::1]/c\" },\n"
	"                   { \"path\": \"/srv/clip.bin\" } ] },\n"
	"    { \"id\": \"heat-720\", \"path\": \"Movies/Heat (1995)/Heat 720p.ts\",\n"
	"      \"transcode\": { \"of\": \"heat-1995\", \"height\": 720,\n"
	"                     \"video_bitrate\": 3000000, \"audio_bitrate\": 128000,\n"
	"                     \"segment_seconds\": 2 } },\n"
	"    { \"id\": \"heat-remux\", \"path\": \".seamfsx/heat.mp4\",\n"
	"      \"remux\": { \"of\": \"heat-1995\" } }\n"
	"  ],\n"
	"  \"settings\": { \"read_timeout\": 5, \"retries\": \"2\", \"insecure\": true,\n"
	"                \"log_level\": \"warn\", \"probe_timeout\": 2.5,\n"
	"                \"state_dir\": \"/var/tmp/seamfs\" }\n"
	"}\n";

static void test_full_catalog(void **state)
{
	struct px_catalog *cat = parse_ok(full_catalog);

	assert_string_equal(cat->file, FILE_NAME);

	/* providers: the two named ones, then implicit ones in order of use */
	assert_int_equal(cat->nproviders, 6);
	const struct px_provider *p = cat->providers;
	assert_string_equal(p[0].name, "mirror-a");
	assert_int_equal(p[0].max_connections, 4);
	assert_int_equal(p[0].implicit, 0);
	assert_int_equal(p[0].nheaders, 2);
	assert_string_equal(p[0].headers[0], "Authorization: Bearer abc");
	assert_string_equal(p[0].headers[1], "X-Trace: on");
	assert_string_equal(p[1].name, "nas");
	assert_int_equal(p[1].max_connections, 0);
	assert_int_equal(p[1].nheaders, 0);
	assert_int_equal(p[1].implicit, 0);
	assert_string_equal(p[2].name, "127.0.0.1:8081");
	assert_int_equal(p[2].implicit, 1);
	assert_string_equal(p[3].name, "cdn.example:8443");
	assert_int_equal(p[3].implicit, 1);
	assert_string_equal(p[4].name, "local");
	assert_int_equal(p[4].implicit, 1);
	assert_string_equal(p[5].name, "[::1]:80");
	assert_int_equal(p[5].implicit, 1);
	for (size_t i = 2; i < 6; i++) {
		assert_int_equal(p[i].nheaders, 0);
		assert_int_equal(p[i].max_connections, 0);
	}

	assert_int_equal(cat->nassets, 4);
	const struct px_asset *a = &cat->assets[0];
	assert_string_equal(a->id, "heat-1995");
	assert_string_equal(a->path, "Movies/Heat (1995)/Heat (1995).mkv");
	assert_int_equal(a->size, 1234567890);
	assert_int_equal(a->mtime, 1700000000);
	assert_string_equal(a->sha256,
			    "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
	assert_int_equal(a->kind, PX_ASSET_PLAIN);
	assert_null(a->of);
	assert_int_equal(a->nsources, 5);
	assert_string_equal(a->sources[0].url, "https://a.example/heat.mkv");
	assert_null(a->sources[0].path);
	assert_int_equal(a->sources[0].provider, 0);
	assert_string_equal(a->sources[1].url, "http://127.0.0.1:8081/heat.mkv");
	assert_int_equal(a->sources[1].provider, 2);
	assert_string_equal(a->sources[2].url, "HTTPS://user:pw@CDN.Example:8443/h.mkv?x=1");
	assert_int_equal(a->sources[2].provider, 3);
	assert_null(a->sources[3].url);
	assert_string_equal(a->sources[3].path, "/srv/media/heat.mkv");
	assert_int_equal(a->sources[3].provider, 1);
	assert_string_equal(a->sources[4].path, "/srv/other/heat.mkv");
	assert_int_equal(a->sources[4].provider, 4);

	a = &cat->assets[1];
	assert_string_equal(a->id, "clip");
	assert_string_equal(a->path, "clip.bin");
	assert_int_equal(a->size, 0);
	assert_int_equal(a->mtime, -1);
	assert_null(a->sha256);
	assert_int_equal(a->nsources, 3);
	assert_int_equal(a->sources[0].provider, 2); /* shared with heat-1995 */
	assert_int_equal(a->sources[1].provider, 5);
	assert_int_equal(a->sources[2].provider, 4); /* one "local" */

	a = &cat->assets[2];
	assert_string_equal(a->id, "heat-720");
	assert_int_equal(a->kind, PX_ASSET_TRANSCODE);
	assert_string_equal(a->of, "heat-1995");
	assert_int_equal(a->nsources, 0);
	assert_int_equal(a->size, -1);
	assert_int_equal(a->mtime, -1);
	assert_int_equal(a->height, 720);
	assert_int_equal(a->video_bitrate, 3000000);
	assert_int_equal(a->audio_bitrate, 128000);
	assert_int_equal(a->segment_seconds, 2);

	a = &cat->assets[3];
	assert_string_equal(a->id, "heat-remux");
	assert_string_equal(a->path, ".seamfsx/heat.mp4"); /* only .seamfs is reserved */
	assert_int_equal(a->kind, PX_ASSET_REMUX);
	assert_string_equal(a->of, "heat-1995");
	assert_int_equal(a->nsources, 0);

	/* settings: in file order, as strings; a true flag has no value */
	assert_int_equal(cat->nsettings, 6);
	assert_string_equal(cat->setting_names[0], "read_timeout");
	assert_string_equal(cat->setting_values[0], "5");
	assert_string_equal(cat->setting_names[1], "retries");
	assert_string_equal(cat->setting_values[1], "2");
	assert_string_equal(cat->setting_names[2], "insecure");
	assert_null(cat->setting_values[2]);
	assert_string_equal(cat->setting_names[3], "log_level");
	assert_string_equal(cat->setting_values[3], "warn");
	assert_string_equal(cat->setting_names[4], "probe_timeout");
	assert_string_equal(cat->setting_values[4], "2.5");
	assert_string_equal(cat->setting_names[5], "state_dir");
	assert_string_equal(cat->setting_values[5], "/var/tmp/seamfs");

	assert_int_equal(px_catalog_find(cat, "heat-1995"), 0);
	assert_int_equal(px_catalog_find(cat, "clip"), 1);
	assert_int_equal(px_catalog_find(cat, "heat-remux"), 3);
	assert_int_equal(px_catalog_find(cat, "nope"), -1);
	assert_int_equal(px_catalog_find(cat, "heat"), -1);
	px_catalog_free(cat);
}

static void test_minimal_catalogs(void **state)
{
	struct px_catalog *cat = parse_ok("{\"assets\": []}");
	assert_int_equal(cat->nassets, 0);
	assert_int_equal(cat->nproviders, 0);
	assert_int_equal(cat->nsettings, 0);
	px_catalog_free(cat);

	/* a provider named like an implicit one is the named one */
	cat = parse_ok("{\"providers\": [{\"name\": \"h.example:80\"}],\n"
		       " \"assets\": [{\"id\": \"x\", \"path\": \"x\", \"sources\": ["
		       "{\"url\": \"http://H.example/x\"}]}]}");
	assert_int_equal(cat->nproviders, 1);
	assert_int_equal(cat->assets[0].sources[0].provider, 0);
	assert_int_equal(cat->providers[0].implicit, 0);
	px_catalog_free(cat);

	/* ids and paths may hold any printable UTF-8 */
	cat = parse_ok("{\"assets\": [{\"id\": \"caf\xc3\xa9 \xe2\x98\x83\", "
		       "\"path\": \"A/b c/\xc3\xa9t\xc3\xa9.mkv\", "
		       "\"sources\": [{\"url\": \"https://h.example:1/x\"}]}]}");
	assert_string_equal(cat->assets[0].id, "caf\xc3\xa9 \xe2\x98\x83");
	assert_string_equal(cat->assets[0].path, "A/b c/\xc3\xa9t\xc3\xa9.mkv");
	assert_string_equal(cat->providers[0].name, "h.example:1");
	px_catalog_free(cat);

	/* a false flag is the string "false" */
	cat = parse_ok("{\"assets\": [], \"settings\": {\"insecure\": false}}");
	assert_int_equal(cat->nsettings, 1);
	assert_string_equal(cat->setting_names[0], "insecure");
	assert_string_equal(cat->setting_values[0], "false");
	px_catalog_free(cat);

	px_catalog_free(NULL);
}

/* ----------------------------------------------------- errors: JSON level */

static void test_err_syntax(void **state)
{
	expect_error("{\n  \"assets\": [\n    nope\n  ]\n}\n", FILE_NAME ":3:", "(syntax):");
	/* only the line: the column of a syntax error is jansson's lookahead */
	expect_error("{\n  \"assets\": [\n    nope\n  ]\n}\n", FILE_NAME ":3:",
		     "(syntax): invalid token");
	expect_error("{\"assets\": [\n  {\"id\": \"a\",,}]}", FILE_NAME ":2:", "(syntax):");
	expect_error("{\"assets\": []", FILE_NAME ":1:", "(syntax):");
	expect_error("{\"assets\": []}\n{}", FILE_NAME ":2:", "(syntax):");
}

static void test_err_empty(void **state)
{
	expect_error("", FILE_NAME ":1:1: (syntax):", "empty");
	expect_error("  \n\t \r\n", FILE_NAME ":1:1: (syntax):", "empty");
}

static void test_err_top_array(void **state)
{
	expect_error("[{\"id\": 1}]", FILE_NAME ":1:1: (top):", "JSON object");
	expect_error("\n  []", FILE_NAME ":2:3: (top):", "an array");
}

static void test_err_unknown_key_top(void **state)
{
	expect_error("{\"assets\": [],\n \"extra\": 1}", FILE_NAME ":2:2: extra:",
		     "unknown key \"extra\"");
}

static void test_err_unknown_key_provider(void **state)
{
	expect_error("{\"providers\": [\n  {\"name\": \"p\",\n   \"weight\": 2}],\n \"assets\": []}",
		     FILE_NAME ":3:4: providers[0].weight:", "unknown key \"weight\"");
}

#define SRC1 "\"sources\": [{\"url\": \"http://h.example/x\"}]"
/* A one-asset catalog whose source, on line 2 at column 3, has body. */
#define SOURCE(body) \
	"{\"assets\": [{\"id\": \"a\", \"path\": \"a\", \"sources\": [\n  {" body "}]}]}"
#define URL(u) SOURCE("\"url\": \"" u "\"")
#define URL_PREFIX FILE_NAME ":2:4: assets[0].sources[0].url:"

static void test_err_unknown_key_asset(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"a\", " SRC1 ",\n"
		     "   \"color\": \"red\"}]}",
		     FILE_NAME ":3:4: assets[0].color:", "unknown key \"color\"");
}

static void test_err_unknown_key_source(void **state)
{
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", \"sources\": [\n"
		     "  {\"url\": \"http://h/x\",\n   \"mirror\": true}]}]}",
		     FILE_NAME ":3:4: assets[0].sources[0].mirror:", "unknown key \"mirror\"");
}

static void test_err_unknown_key_transcode(void **state)
{
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
		     "  {\"id\": \"t\", \"path\": \"t\", \"transcode\": {\"of\": \"a\",\n"
		     "   \"fps\": 30}}]}",
		     FILE_NAME ":3:4: assets[1].transcode.fps:", "unknown key \"fps\"");
}

/* ------------------------------------------------- errors: missing fields */

static void test_err_missing_assets(void **state)
{
	expect_error("{\"providers\": []}", FILE_NAME ":1:1: assets:", "missing");
	expect_error("\n {\"settings\": {}}", FILE_NAME ":2:2: assets:", "missing");
}

static void test_err_missing_id(void **state)
{
	expect_error("{\"assets\": [\n  {\"path\": \"a\", " SRC1 "}]}",
		     FILE_NAME ":2:3: assets[0].id:", "missing required field \"id\"");
}

static void test_err_missing_path(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", " SRC1 "}]}",
		     FILE_NAME ":2:3: assets[0].path:", "missing required field \"path\"");
}

static void test_err_missing_sources(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"a\"}]}",
		     FILE_NAME ":2:3: assets[0].sources:", "missing required field \"sources\"");
}

static void test_err_missing_url_or_path(void **state)
{
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", \"sources\": [\n"
		     "  {\"url\": \"http://h/x\"},\n  {}]}]}",
		     FILE_NAME ":3:3: assets[0].sources[1]:", "\"url\" or \"path\"");
}

static void test_err_missing_provider_name(void **state)
{
	expect_error("{\"providers\": [\n  {\"max_connections\": 2}],\n \"assets\": []}",
		     FILE_NAME ":2:3: providers[0].name:", "missing required field \"name\"");
}

/* ---------------------------------------------------- errors: wrong types */

/* An asset on line 2 whose last member, on line 3 at column 4, is member. */
#define ASSET_WITH(member) \
	"{\"assets\": [\n  {\"id\": \"a\", \"path\": \"a\", " SRC1 ",\n   " member "}]}"
#define ASSET_NOID_WITH(member) \
	"{\"assets\": [\n  {\"path\": \"a\", " SRC1 ",\n   " member "}]}"

static void test_err_id_number(void **state)
{
	expect_error(ASSET_NOID_WITH("\"id\": 7"), FILE_NAME ":3:4: assets[0].id:",
		     "must be a string");
}

static void test_err_id_control(void **state)
{
	expect_error(ASSET_NOID_WITH("\"id\": \"a\\u0007b\""), FILE_NAME ":3:4: assets[0].id:",
		     "control character");
	expect_error(ASSET_NOID_WITH("\"id\": \"\""), FILE_NAME ":3:4: assets[0].id:",
		     "must not be empty");
}

static void test_err_size_string(void **state)
{
	expect_error(ASSET_WITH("\"size\": \"12\""), FILE_NAME ":3:4: assets[0].size:",
		     "must be a whole number, not a string");
}

static void test_err_size_real(void **state)
{
	expect_error(ASSET_WITH("\"size\": 1.5"), FILE_NAME ":3:4: assets[0].size:",
		     "whole number");
	expect_error(ASSET_WITH("\"size\": true"), FILE_NAME ":3:4: assets[0].size:",
		     "whole number");
}

static void test_err_size_too_big(void **state)
{
	/* beyond int64: jansson refuses the number itself */
	expect_error(ASSET_WITH("\"size\": 9223372036854775808"), FILE_NAME ":3:",
		     "(syntax):");
}

static void test_err_size_negative(void **state)
{
	expect_error(ASSET_WITH("\"size\": -1"), FILE_NAME ":3:4: assets[0].size:",
		     "out of range");
}

static void test_err_mtime_negative(void **state)
{
	expect_error(ASSET_WITH("\"mtime\": -5"), FILE_NAME ":3:4: assets[0].mtime:",
		     "out of range");
}

static void test_err_sources_not_array(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"a\",\n"
		     "   \"sources\": {\"url\": \"http://h/x\"}}]}",
		     FILE_NAME ":3:4: assets[0].sources:", "must be an array");
}

static void test_err_sources_empty(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"a\",\n   \"sources\": []}]}",
		     FILE_NAME ":3:4: assets[0].sources:", "at least one source");
}

static void test_err_source_not_object(void **state)
{
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", \"sources\": [\n"
		     "  \"http://h/x\"]}]}",
		     FILE_NAME ":2:3: assets[0].sources[0]:", "must be an object");
}

static void test_err_headers_not_object(void **state)
{
	expect_error("{\"providers\": [{\"name\": \"p\",\n   \"headers\": [\"X: y\"]}],\n"
		     " \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers:", "must be an object");
}

static void test_err_header_value_not_string(void **state)
{
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n   \"X-Num\": 5}}],\n"
		     " \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.X-Num:", "must be a string");
}

static void test_err_header_crlf(void **state)
{
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n"
		     "   \"X-A\": \"a\\r\\nEvil: 1\"}}],\n \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.X-A:", "CR or LF");
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n"
		     "   \"X-A\": \"a\\nb\"}}],\n \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.X-A:", "CR or LF");
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n"
		     "   \"X-A\": \"a\\rb\"}}],\n \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.X-A:", "CR or LF");
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n"
		     "   \"X-A\": \"a\\u0000b\"}}],\n \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.X-A:", "NUL");
}

static void test_err_header_name(void **state)
{
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n"
		     "   \"Bad Name\": \"v\"}}],\n \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.Bad Name:", "not a valid HTTP header name");
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n"
		     "   \"X(y)\": \"v\"}}],\n \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.X(y):", "not a valid HTTP header name");
	/* headers seamfs sets itself */
	expect_error("{\"providers\": [{\"name\": \"p\", \"headers\": {\n"
		     "   \"range\": \"bytes=0-1\"}}],\n \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].headers.range:", "itself");
}

static void test_err_max_connections(void **state)
{
	expect_error("{\"providers\": [{\"name\": \"p\",\n   \"max_connections\": 0}],\n"
		     " \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].max_connections:", "out of range");
	expect_error("{\"providers\": [{\"name\": \"p\",\n   \"max_connections\": \"4\"}],\n"
		     " \"assets\": []}",
		     FILE_NAME ":2:4: providers[0].max_connections:", "whole number");
}

/* ----------------------------------------------------- errors: uniqueness */

static void test_err_duplicate_id(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
		     "  {\"path\": \"b\", " SRC1 ",\n   \"id\": \"a\"}]}",
		     FILE_NAME ":4:4: assets[1].id:", "duplicate id \"a\"");
}

static void test_err_duplicate_path(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"d/a\", " SRC1 "},\n"
		     "  {\"id\": \"b\", " SRC1 ",\n   \"path\": \"d/a\"}]}",
		     FILE_NAME ":4:4: assets[1].path:", "duplicate path \"d/a\"");
}

static void test_err_duplicate_provider(void **state)
{
	expect_error("{\"providers\": [{\"name\": \"p\"},\n  {\"name\": \"p\"}],\n"
		     " \"assets\": []}",
		     FILE_NAME ":2:4: providers[1].name:", "duplicate provider name \"p\"");
}

static void test_err_duplicate_json_key(void **state)
{
	expect_error("{\"assets\": [],\n \"assets\": []}", FILE_NAME ":2:", "duplicate");
	expect_error("{\"assets\": [\n  {\"id\": \"a\",\n   \"id\": \"b\", \"path\": \"a\", "
		     SRC1 "}]}", FILE_NAME ":3:", "(syntax): duplicate");
}

/* ---------------------------------------------------------- errors: paths */

#define ASSET_PATH(p) "{\"assets\": [\n  {\"id\": \"a\", " SRC1 ",\n   \"path\": \"" p "\"}]}"
#define PATH_PREFIX FILE_NAME ":3:4: assets[0].path:"

static void test_err_path_absolute(void **state)
{
	expect_error(ASSET_PATH("/a"), PATH_PREFIX, "relative");
}

static void test_err_path_empty(void **state)
{
	expect_error(ASSET_PATH(""), PATH_PREFIX, "must not be empty");
}

static void test_err_path_empty_component(void **state)
{
	expect_error(ASSET_PATH("a//b"), PATH_PREFIX, "empty component");
	expect_error(ASSET_PATH("a/"), PATH_PREFIX, "empty component");
}

static void test_err_path_dots(void **state)
{
	expect_error(ASSET_PATH("./a"), PATH_PREFIX, "'.' or '..'");
	expect_error(ASSET_PATH("a/../b"), PATH_PREFIX, "'.' or '..'");
	expect_error(ASSET_PATH("a/.."), PATH_PREFIX, "'.' or '..'");
	expect_error(ASSET_PATH(".."), PATH_PREFIX, "'.' or '..'");
}

static void test_err_path_control(void **state)
{
	expect_error(ASSET_PATH("a\\u0001b"), PATH_PREFIX, "control character");
	expect_error(ASSET_PATH("a\\u007f"), PATH_PREFIX, "control character");
}

/* A message is one line even when the value it quotes holds a newline. */
static void test_err_path_newline_one_line(void **state)
{
	expect_error(ASSET_PATH("a\\nb"), PATH_PREFIX, "control character");
	expect_error(URL("http://h/a\\nb"), URL_PREFIX, "control character");
	expect_error(SOURCE("\"path\": \"x\\ny\""), FILE_NAME ":2:4: assets[0].sources[0].path:",
		     "absolute");
	expect_error("{\"assets\": [],\n \"a\\nb\": 1}", FILE_NAME ":2:2: ", "unknown key");
}

static void test_err_path_nul(void **state)
{
	expect_error(ASSET_PATH("a\\u0000b"), PATH_PREFIX, "NUL");
}

static void test_err_path_reserved(void **state)
{
	expect_error(ASSET_PATH(".seamfs/x"), PATH_PREFIX, "reserves");
	expect_error(ASSET_PATH(".seamfs"), PATH_PREFIX, "reserves");
}

static void test_err_path_long_component(void **state)
{
	char name[300], text[600];
	memset(name, 'n', 256);
	name[256] = '\0';
	snprintf(text, sizeof(text), ASSET_PATH("d/%s"), name);
	expect_error(text, PATH_PREFIX, "longer than 255");
	name[255] = '\0';
	snprintf(text, sizeof(text), ASSET_PATH("d/%s"), name);
	px_catalog_free(parse_ok(text));
}

/* Long paths cost the tree and the kernel per byte and per component:
 * both are bounded, and a size too (offsets never overflow). */
static void test_err_path_and_size_caps(void **state)
{
	static char text[12000];
	char path[9000];
	size_t n = 0;
	(void)state;
	/* 4097 bytes: refused; 4096: taken */
	for (; n < 4097; n++)
		path[n] = n % 200 == 199 ? '/' : 'p';
	path[n] = '\0';
	snprintf(text, sizeof(text), ASSET_PATH("%s"), path);
	expect_error(text, PATH_PREFIX, "longer than 4096 bytes");
	path[4096] = '\0';
	if (path[4095] == '/')
		path[4095] = 'p';
	snprintf(text, sizeof(text), ASSET_PATH("%s"), path);
	px_catalog_free(parse_ok(text));
	/* 65 components: refused; 64: taken */
	n = 0;
	for (int i = 0; i < 65; i++) {
		path[n++] = 'd';
		path[n++] = '/';
	}
	path[n - 1] = '\0';
	snprintf(text, sizeof(text), ASSET_PATH("%s"), path);
	expect_error(text, PATH_PREFIX, "more than 64 components");
	path[n - 3] = '\0';
	snprintf(text, sizeof(text), ASSET_PATH("%s"), path);
	px_catalog_free(parse_ok(text));
	/* sizes up to 2^62 */
	expect_error(ASSET_WITH("\"size\": 4611686018427387905"), FILE_NAME ":3:4: assets[0].size:",
		     "");
	px_catalog_free(parse_ok(ASSET_WITH("\"size\": 4611686018427387904")));
}

/* The assets are parsed one at a time (a large library's JSON tree is never
 * held whole); what does not lend itself to that is parsed whole, with the
 * same outcome and the same messages. */
static void test_assets_one_at_a_time(void **state)
{
	(void)state;
	/* an escaped key, a second array member after it, odd spacing */
	struct px_catalog *cat = parse_ok("{\"ass\\u0065ts\": [ {\"id\": \"a\", \"path\": \"a\", " SRC1
					  "} ] , \"providers\" : [ ]}");
	assert_int_equal(cat->nassets, 1);
	px_catalog_free(cat);
	cat = parse_ok("{\"assets\":[{\"id\":\"a\",\"path\":\"a\"," SRC1 "},\n\t"
		       "{\"id\":\"b\",\"path\":\"d/b]\\\"}[\"," SRC1 "}]}");
	assert_int_equal(cat->nassets, 2);
	assert_string_equal(cat->assets[1].path, "d/b]\"}[");
	px_catalog_free(cat);
	/* a syntax error inside an element, and a duplicate key inside one:
	 * jansson's messages for the whole document */
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
		     "  {\"id\": \"b\", \"path\": }]}", FILE_NAME ":3:", "(syntax):");
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"id\": \"b\", \"path\": \"a\", " SRC1
		     "}]}", FILE_NAME ":2:", "(syntax):");
	/* an element that is not an object: the field's own message */
	expect_error("{\"assets\": [\n  42]}", FILE_NAME ":2:3: assets[0]:", "object");
}

static void test_err_file_and_directory(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"d\", " SRC1 "},\n"
		     "  {\"id\": \"b\", " SRC1 ",\n   \"path\": \"d/x\"}]}",
		     FILE_NAME ":4:4: assets[1].path:", "needs a directory \"d\"");
	/* the file after the assets under it; deeper: the later entry is named */
	expect_error("{\"assets\": [\n  {\"id\": \"b\", " SRC1 ",\n   \"path\": \"d/e/x\"},\n"
		     "  {\"id\": \"a\", \"path\": \"d/e\", " SRC1 "}]}",
		     FILE_NAME ":4:15: assets[1].path:",
		     "\"d/e\" is a file where assets[0] needs a directory");
}

/* --------------------------------------------------------- errors: sha256 */

static void test_err_sha256(void **state)
{
	expect_error(ASSET_WITH("\"sha256\": "
				"\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\""),
		     FILE_NAME ":3:4: assets[0].sha256:", "64 hexadecimal digits");
	expect_error(ASSET_WITH("\"sha256\": "
				"\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg\""),
		     FILE_NAME ":3:4: assets[0].sha256:", "64 hexadecimal digits");
	expect_error(ASSET_WITH("\"sha256\": "
				"\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0\""),
		     FILE_NAME ":3:4: assets[0].sha256:", "64 hexadecimal digits");
}

/* ----------------------------------------------------------- errors: URLs */


static void test_err_url_scheme(void **state)
{
	expect_error(URL("ftp://h/x"), URL_PREFIX, "unsupported URL scheme");
	expect_error(URL("h.example/x"), URL_PREFIX, "unsupported URL scheme");
	expect_error(URL("file:///x"), URL_PREFIX, "unsupported URL scheme");
}

static void test_err_url_no_host(void **state)
{
	expect_error(URL("http:///x"), URL_PREFIX, "no host");
	expect_error(URL("http://"), URL_PREFIX, "no host");
	expect_error(URL("https://user@/x"), URL_PREFIX, "no host");
	expect_error(URL("http://:8080/x"), URL_PREFIX, "no host");
}

static void test_err_url_port(void **state)
{
	expect_error(URL("http://h:99999/x"), URL_PREFIX, "port");
	expect_error(URL("http://h:65536/x"), URL_PREFIX, "port");
	expect_error(URL("http://h:8a/x"), URL_PREFIX, "malformed port");
	expect_error(URL("http://h:/x"), URL_PREFIX, "empty port");
	expect_error(URL("http://h:0/x"), URL_PREFIX, "port 0");
	expect_error(URL("http://[::1/x"), URL_PREFIX, "IPv6");
	/* the highest port is fine */
	px_catalog_free(parse_ok(URL("http://h:65535/x")));
}

static void test_err_url_space(void **state)
{
	expect_error(URL("http://h/a b"), URL_PREFIX, "space");
	expect_error(URL("http://h/a\\u0001b"), URL_PREFIX, "control character");
}

static void test_err_url_and_path(void **state)
{
	expect_error(SOURCE("\"url\": \"http://h/x\",\n   \"path\": \"/x\""),
		     FILE_NAME ":3:4: assets[0].sources[0].path:", "not both");
}

static void test_err_relative_local_path(void **state)
{
	expect_error(SOURCE("\"path\": \"srv/x\""), FILE_NAME ":2:4: assets[0].sources[0].path:",
		     "absolute");
}

static void test_err_unknown_provider(void **state)
{
	expect_error(SOURCE("\"url\": \"http://h/x\",\n   \"provider\": \"nope\""),
		     FILE_NAME ":3:4: assets[0].sources[0].provider:", "unknown provider \"nope\"");
	/* implicit providers cannot be named */
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", \"sources\": [\n"
		     "  {\"url\": \"http://h/x\"},\n"
		     "  {\"url\": \"http://h/y\",\n   \"provider\": \"h:80\"}]}]}",
		     FILE_NAME ":4:4: assets[0].sources[1].provider:", "unknown provider");
}

/* ------------------------------------------------------ errors: settings */

static void test_err_unknown_setting(void **state)
{
	expect_error("{\"assets\": [],\n \"settings\": {\n   \"colour\": \"red\"}}",
		     FILE_NAME ":3:4: settings.colour:", "unknown setting \"colour\"");
}

static void test_err_bad_setting_value(void **state)
{
	expect_error("{\"assets\": [],\n \"settings\": {\"retries\": 1,\n   \"read_timeout\": \"abc\"}}",
		     FILE_NAME ":3:4: settings.read_timeout:", "abc");
	expect_error("{\"assets\": [],\n \"settings\": {\n   \"read_timeout\": 0}}",
		     FILE_NAME ":3:4: settings.read_timeout:", "bad value");
	expect_error("{\"assets\": [],\n \"settings\": {\n   \"retries\": 99}}",
		     FILE_NAME ":3:4: settings.retries:", "bad value");
	expect_error("{\"assets\": [],\n \"settings\": {\n   \"readahead_seconds\": 3}}",
		     FILE_NAME ":3:4: settings.readahead_seconds:",
		     "bad value '3' (expected 0 (off) or a whole number of seconds from 5 to 3600)");
	expect_error("{\"assets\": [],\n \"settings\": {\n   \"read_timeout\": true}}",
		     FILE_NAME ":3:4: settings.read_timeout:", "needs a value");
	expect_error("{\"assets\": [],\n \"settings\": {\n   \"retries\": null}}",
		     FILE_NAME ":3:4: settings.retries:", "not null");
	expect_error("{\"assets\": [],\n \"settings\": {\n   \"state_dir\": \"rel/dir\"}}",
		     FILE_NAME ":3:4: settings.state_dir:", "absolute path");
}

/* ----------------------------------------------------- errors: transcode */

static void test_err_transcode_unknown_of(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"t\", \"path\": \"t.ts\", \"transcode\": {\n"
		     "   \"of\": \"ghost\"}}]}",
		     FILE_NAME ":3:4: assets[0].transcode.of:", "no asset has id \"ghost\"");
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
		     "  {\"id\": \"r\", \"path\": \"r\", \"remux\": {\"of\": \"a\"}},\n"
		     "  {\"id\": \"t\", \"path\": \"t\", \"transcode\": {\n   \"of\": \"r\"}}]}",
		     FILE_NAME ":4:4: assets[2].transcode.of:", "itself derived");
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
		     "  {\"id\": \"t\", \"path\": \"t\", \"transcode\": {\"of\": \"a\",\n"
		     "   \"height\": 100}}]}",
		     FILE_NAME ":3:4: assets[1].transcode.height:", "out of range");
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
		     "  {\"id\": \"t\", \"path\": \"t\", \"transcode\": {\"of\": \"a\",\n"
		     "   \"height\": 721}}]}",
		     FILE_NAME ":3:4: assets[1].transcode.height:", "721 must be even");
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
		     "  {\"id\": \"t\", \"path\": \"t\", \"transcode\": {\"of\": \"a\",\n"
		     "   \"segment_seconds\": 7}}]}",
		     FILE_NAME ":3:4: assets[1].transcode.segment_seconds:", "out of range (1 to 6)");
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 ",\n"
		     "   \"remux\": {\"of\": \"a\"}}]}",
		     FILE_NAME ":1:", "one of \"sources\"");
}

/* A transcode that names only its source gets the documented defaults. */
static void test_transcode_defaults(void **state)
{
	struct px_catalog *cat = NULL;
	char err[512];
	const char *text = "{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 "},\n"
			   "  {\"id\": \"t\", \"path\": \"t\", \"transcode\": {\"of\": \"a\"}}]}";
	(void)state;
	assert_int_equal(px_catalog_parse(FILE_NAME, text, strlen(text), &cat, err, sizeof(err)),
			 PX_OK);
	const struct px_asset *t = &cat->assets[1];
	assert_int_equal(t->height, 0);
	assert_int_equal(t->video_bitrate, 1000000);
	assert_int_equal(t->audio_bitrate, 128000);
	assert_int_equal(t->segment_seconds, 1);
	px_catalog_free(cat);
}

/* ----------------------------------------------------------- load, misc */

static void test_load_missing_file(void **state)
{
	char err[512] = "";
	struct px_catalog *cat = (struct px_catalog *)&err; /* must be reset */
	const char *file = "/nonexistent-seamfs-dir/catalog-missing.json";
	enum px_status st = px_catalog_load(file, &cat, err, sizeof(err));
	assert_int_equal(st, PX_EIO);
	assert_null(cat);
	assert_non_null(strstr(err, file));
	assert_null(strchr(err, '\n'));
}

static void test_load_file(void **state)
{
	char tmpl[] = "/tmp/seamfs-catalog-XXXXXX";
	char err[512] = "";
	struct px_catalog *cat = NULL;
	int fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	static const char good[] = "{\"assets\": [{\"id\": \"a\", \"path\": \"a\", " SRC1 "}]}";
	assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
	close(fd);
	assert_int_equal(px_catalog_load(tmpl, &cat, err, sizeof(err)), PX_OK);
	assert_non_null(cat);
	assert_string_equal(cat->file, tmpl);
	assert_int_equal(cat->nassets, 1);
	px_catalog_free(cat);

	/* an error names the file as given */
	fd = open(tmpl, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	static const char bad[] = "{\"assets\": [\n  {\"id\": 1}]}";
	assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
	close(fd);
	cat = NULL;
	assert_int_equal(px_catalog_load(tmpl, &cat, err, sizeof(err)), PX_EINVAL);
	assert_null(cat);
	char want[128];
	snprintf(want, sizeof(want), "%s:2:4: assets[0].id: ", tmpl);
	assert_memory_equal(err, want, strlen(want));
	unlink(tmpl);

	/* a directory is not a catalog */
	cat = NULL;
	assert_int_equal(px_catalog_load("/tmp", &cat, err, sizeof(err)), PX_EIO);
	assert_null(cat);
	assert_non_null(strstr(err, "/tmp"));
}

static void test_err_truncated_buffer(void **state)
{
	char err[24];
	struct px_catalog *cat = NULL;
	memset(err, 'x', sizeof(err));
	assert_int_equal(parse(ASSET_PATH("/abs"), &cat, err, 16), PX_EINVAL);
	assert_int_equal(strlen(err), 15);
	assert_memory_equal(err, "t.json:3:4: ass", 15);
	assert_int_equal(err[16], 'x');
}

/* The first error in file order is the one reported. */
static void test_err_first_wins(void **state)
{
	expect_error("{\"assets\": [\n  {\"id\": \"a\", \"path\": \"/a\", " SRC1 "},\n"
		     "  {\"id\": 5, \"path\": \"b\", " SRC1 "}]}",
		     FILE_NAME ":2:15: assets[0].path:", "\"/a\" must be relative");
}

/* ---------------------------------------------------------------- copies */

static void test_storages_and_copies(void **state)
{
	(void)state;
	struct px_catalog *cat = parse_ok(
		"{\"storages\": [{\"name\": \"disk1\", \"path\": \"/srv/copies\",\n"
		"   \"host\": \"host-a\", \"min_free_bytes\": 5, \"copying\": false},\n"
		"  {\"name\": \"nfs\", \"path\": \"/mnt/nfs\"}],\n"
		" \"assets\": [{\"id\": \"a\", \"path\": \"a\", \"copies\": 2, " SRC1 "},\n"
		"  {\"id\": \"b\", \"path\": \"b\", " SRC1 "}],\n"
		" \"settings\": {\"copies\": 1}}");
	assert_int_equal(cat->nstorages, 2);
	assert_string_equal(cat->storages[0].name, "disk1");
	assert_string_equal(cat->storages[0].path, "/srv/copies");
	assert_string_equal(cat->storages[0].host, "host-a");
	assert_int_equal(cat->storages[0].min_free_bytes, 5);
	assert_int_equal(cat->storages[0].copying, 0);
	assert_null(cat->storages[1].host);
	assert_int_equal(cat->storages[1].min_free_bytes, PX_STORAGE_MIN_FREE_DEFAULT);
	assert_int_equal(cat->storages[1].copying, 1);
	assert_int_equal(cat->assets[0].copies, 2);
	assert_int_equal(cat->assets[1].copies, -1);
	px_catalog_free(cat);
}

static void test_err_storages(void **state)
{
	(void)state;
	expect_error("{\"assets\": [], \"storages\": {}}", FILE_NAME ":1:16: storages:",
		     "must be an array");
	expect_error("{\"assets\": [],\n \"storages\": [{\"name\": \"d\"}]}",
		     FILE_NAME ":2:15: storages[0].path:", "missing required field \"path\"");
	expect_error("{\"assets\": [],\n \"storages\": [{\"name\": \"d\", \"path\": \"rel\"}]}",
		     FILE_NAME ":2:29: storages[0].path:", "\"rel\"");
	expect_error("{\"assets\": [],\n \"storages\": [{\"name\": \"d\", \"path\": \"/x\",\n"
		     "  \"min_free_bytes\": -1}]}", FILE_NAME ":3:3: storages[0].min_free_bytes:",
		     "-1 is out of range");
	expect_error("{\"assets\": [],\n \"storages\": [{\"name\": \"d\", \"path\": \"/x\",\n"
		     "  \"copying\": \"yes\"}]}", FILE_NAME ":3:3: storages[0].copying:",
		     "must be true or false");
	expect_error("{\"assets\": [],\n \"storages\": [{\"name\": \"d\", \"path\": \"/x\"},\n"
		     "  {\"name\": \"d\", \"path\": \"/y\"}]}", FILE_NAME ":3:4: storages[1].name:",
		     "duplicate storage name \"d\"");
	expect_error("{\"assets\": [],\n \"storages\": [{\"name\": \"d\", \"path\": \"/x\",\n"
		     "  \"size\": 1}]}", FILE_NAME ":3:3: storages[0].size:", "unknown key \"size\"");
	expect_error("{\"assets\": [{\"id\": \"a\", \"path\": \"a\",\n  \"copies\": \"2\", " SRC1 "}]}",
		     FILE_NAME ":2:3: assets[0].copies:", "must be a whole number");
	expect_error("{\"assets\": [], \"settings\": {\"copies\": -1}}",
		     FILE_NAME ":1:29: settings.copies:", "from 0 to 64");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_catalog),
		cmocka_unit_test(test_minimal_catalogs),
		cmocka_unit_test(test_err_syntax),
		cmocka_unit_test(test_err_empty),
		cmocka_unit_test(test_err_top_array),
		cmocka_unit_test(test_err_unknown_key_top),
		cmocka_unit_test(test_err_unknown_key_provider),
		cmocka_unit_test(test_err_unknown_key_asset),
		cmocka_unit_test(test_err_unknown_key_source),
		cmocka_unit_test(test_err_unknown_key_transcode),
		cmocka_unit_test(test_err_missing_assets),
		cmocka_unit_test(test_err_missing_id),
		cmocka_unit_test(test_err_missing_path),
		cmocka_unit_test(test_err_missing_sources),
		cmocka_unit_test(test_err_missing_url_or_path),
		cmocka_unit_test(test_err_missing_provider_name),
		cmocka_unit_test(test_err_id_number),
		cmocka_unit_test(test_err_id_control),
		cmocka_unit_test(test_err_size_string),
		cmocka_unit_test(test_err_size_real),
		cmocka_unit_test(test_err_size_too_big),
		cmocka_unit_test(test_err_size_negative),
		cmocka_unit_test(test_err_mtime_negative),
		cmocka_unit_test(test_err_sources_not_array),
		cmocka_unit_test(test_err_sources_empty),
		cmocka_unit_test(test_err_source_not_object),
		cmocka_unit_test(test_err_headers_not_object),
		cmocka_unit_test(test_err_header_value_not_string),
		cmocka_unit_test(test_err_header_crlf),
		cmocka_unit_test(test_err_header_name),
		cmocka_unit_test(test_err_max_connections),
		cmocka_unit_test(test_err_duplicate_id),
		cmocka_unit_test(test_err_duplicate_path),
		cmocka_unit_test(test_err_duplicate_provider),
		cmocka_unit_test(test_err_duplicate_json_key),
		cmocka_unit_test(test_err_path_absolute),
		cmocka_unit_test(test_err_path_empty),
		cmocka_unit_test(test_err_path_empty_component),
		cmocka_unit_test(test_err_path_dots),
		cmocka_unit_test(test_err_path_control),
		cmocka_unit_test(test_err_path_newline_one_line),
		cmocka_unit_test(test_err_path_nul),
		cmocka_unit_test(test_err_path_reserved),
		cmocka_unit_test(test_err_path_long_component),
		cmocka_unit_test(test_err_path_and_size_caps),
		cmocka_unit_test(test_assets_one_at_a_time),
		cmocka_unit_test(test_err_file_and_directory),
		cmocka_unit_test(test_err_sha256),
		cmocka_unit_test(test_err_url_scheme),
		cmocka_unit_test(test_err_url_no_host),
		cmocka_unit_test(test_err_url_port),
		cmocka_unit_test(test_err_url_space),
		cmocka_unit_test(test_err_url_and_path),
		cmocka_unit_test(test_err_relative_local_path),
		cmocka_unit_test(test_err_unknown_provider),
		cmocka_unit_test(test_err_unknown_setting),
		cmocka_unit_test(test_err_bad_setting_value),
		cmocka_unit_test(test_err_transcode_unknown_of),
		cmocka_unit_test(test_transcode_defaults),
		cmocka_unit_test(test_load_missing_file),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_err_truncated_buffer),
		cmocka_unit_test(test_err_first_wins),
		cmocka_unit_test(test_storages_and_copies),
		cmocka_unit_test(test_err_storages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
