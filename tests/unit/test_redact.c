/*
 * test_redact.c - sources without their secrets (proxy/catalog/redact.c): what a
 * URL looks like redacted, cut to a short buffer, as a store key and as an
 * origin; where a provider's headers may follow a redirect; the
 * trust_redirects entries the catalog takes; and the fingerprint store
 * dropping records an older seamfs named by a URL with its credentials.
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

#include "catalog.h"
#include "log.h"
#include "redact.h"
#include "store.h"

static void check_redact(const char *in, const char *want)
{
	char out[512];
	size_t n = px_redact_url(in, out, sizeof(out));
	if (strcmp(out, want) != 0)
		fail_msg("redact(\"%s\") = \"%s\", want \"%s\"", in, out, want);
	assert_int_equal(n, strlen(want));
}

static void test_redact_url(void **state)
{
	(void)state;
	check_redact("http://user:pass@host:8080/a/b.mkv?token=abc&api_key=def#frag",
		     "http://***@host:8080/a/b.mkv?token=***&api_key=***");
	check_redact("https://a.example/heat.mkv", "https://a.example/heat.mkv");
	check_redact("HTTPS://U:P@A.example/x", "HTTPS://***@A.example/x");
	check_redact("http://user@h/x", "http://***@h/x");
	check_redact("http://a@b@h/x", "http://***@h/x");            /* the last '@' */
	check_redact("http://u:p@[::1]:8080/x", "http://***@[::1]:8080/x");
	check_redact("http://h/p@x?y=1", "http://h/p@x?y=***");        /* '@' in the path */
	check_redact("http://h/p?SECRET&x=1", "http://h/p?***&x=***");  /* a bare item */
	check_redact("http://h/p?&&a=", "http://h/p?&&a=***");
	check_redact("http://h/p?a=b=c", "http://h/p?a=***");
	check_redact("http://h/p?", "http://h/p?");
	check_redact("http://h/p#token=x", "http://h/p");
	check_redact("http://h?sig=1", "http://h?sig=***");
	check_redact("http://u:p@h", "http://***@h");
	check_redact("rtsp://u:p@cam/stream?auth=z", "rtsp://***@cam/stream?auth=***");
	/* not URLs: local paths and anything without "scheme://" */
	check_redact("/srv/media/a?b=c.mkv", "/srv/media/a?b=c.mkv");
	check_redact("relative?x=1", "relative?x=1");
	check_redact("1http://u:p@h/", "1http://u:p@h/");
	check_redact("", "");
}

static void test_redact_cut(void **state)
{
	(void)state;
	const char *in = "http://user:pass@host/a.mkv?token=SECRET";
	const char *full = "http://***@host/a.mkv?token=***";
	char out[64];
	for (size_t cap = 1; cap < sizeof(out); cap++) {
		memset(out, 'Z', sizeof(out));
		size_t n = px_redact_url(in, out, cap);
		assert_int_equal(n, strlen(full));
		size_t got = strlen(out);
		assert_true(got < cap);
		assert_int_equal(got, cap - 1 < n ? cap - 1 : n);
		assert_memory_equal(out, full, got);
		assert_int_equal(out[cap], 'Z');            /* nothing past cap */
		assert_null(strstr(out, "SECRET"));
		assert_null(strstr(out, "pass"));
	}
	assert_int_equal(px_redact_url(in, NULL, 0), strlen(full));
	char *d = px_redact_url_dup(in);
	assert_string_equal(d, full);
	free(d);
}

static void test_redact_key(void **state)
{
	(void)state;
	char *a = px_redact_key("https://h/a.mkv?token=ONE");
	char *b = px_redact_key("https://h/a.mkv?token=TWO");
	char *a2 = px_redact_key("https://h/a.mkv?token=ONE");
	char *c = px_redact_key("https://h/a.mkv");
	char *p = px_redact_key("/srv/a.mkv");
	char *u = px_redact_key("http://u:SECRET@h/a.mkv");

	assert_int_equal(strncmp(a, "https://h/a.mkv?token=***#h=", 28), 0);
	assert_int_equal(strlen(a), 28 + 8);
	assert_int_equal(strspn(a + 28, "0123456789abcdef"), 8);
	assert_string_not_equal(a, b);       /* differing tokens stay apart */
	assert_string_equal(a, a2);          /* stable */
	assert_string_equal(c, "https://h/a.mkv");  /* nothing to hide: itself */
	assert_string_equal(p, "/srv/a.mkv");
	assert_int_equal(strncmp(u, "http://***@h/a.mkv#h=", 21), 0);
	assert_null(strstr(u, "SECRET"));
	free(a);
	free(b);
	free(a2);
	free(c);
	free(p);
	free(u);
}

static void check_origin(const char *url, const char *want)
{
	char out[128];
	int rc = px_redact_origin(url, out, sizeof(out));
	if (!want) {
		if (rc == 0)
			fail_msg("origin(\"%s\") = \"%s\", want none", url, out);
		return;
	}
	if (rc != 0 || strcmp(out, want) != 0)
		fail_msg("origin(\"%s\") = %d \"%s\", want \"%s\"", url, rc, rc ? "" : out, want);
}

static void test_origin(void **state)
{
	(void)state;
	char small[12];
	check_origin("HTTP://U:P@Host.Example/x?y#z", "http://host.example:80");
	check_origin("https://h:8443", "https://h:8443");
	check_origin("https://h:/x", "https://h:443");
	check_origin("http://[::1]:8080/x", "http://[::1]:8080");
	check_origin("http://[::1]/x", "http://[::1]:80");
	check_origin("ftp://h/x", NULL);
	check_origin("http:///x", NULL);
	check_origin("http://h:0/", NULL);
	check_origin("http://h:70000/", NULL);
	check_origin("http://h:8x/", NULL);
	check_origin("http://[::1/", NULL);
	check_origin("/srv/a", NULL);
	assert_int_equal(px_redact_origin("http://a-long-host.example/", small, sizeof(small)), -1);
}

static void test_headers_ok(void **state)
{
	(void)state;
	const char *hosts[] = { "https://mirror.example:443", "cdn.example", "edge.example:8443" };
	const char *first = "https://api.example/a.mkv";
	int down = 0;

	/* its own origin, on any path */
	assert_true(px_redact_headers_ok(first, first, "https://api.example/b.mkv", hosts, 3, &down));
	assert_true(px_redact_headers_ok(first, first, "https://API.example:443/b", hosts, 3, &down));
	/* another host, another port, another scheme of the same host */
	assert_false(px_redact_headers_ok(first, first, "https://evil.example/a", hosts, 3, &down));
	assert_false(px_redact_headers_ok(first, first, "https://api.example:8443/a", hosts, 3,
					  &down));
	/* the provider's other origins, and its trusted hosts */
	assert_true(px_redact_headers_ok(first, first, "https://mirror.example/a", hosts, 3, &down));
	assert_false(px_redact_headers_ok(first, first, "https://mirror.example:444/a", hosts, 3,
					  &down));
	assert_true(px_redact_headers_ok(first, first, "https://cdn.example:9999/a", hosts, 3, &down));
	assert_true(px_redact_headers_ok(first, first, "https://edge.example:8443/a", hosts, 3,
					 &down));
	assert_false(px_redact_headers_ok(first, first, "https://edge.example/a", hosts, 3, &down));
	assert_false(px_redact_headers_ok(first, first, "https://sub.cdn.example/a", hosts, 3,
					  &down));
	/* not http(s): none */
	assert_false(px_redact_headers_ok(first, first, "ftp://cdn.example/a", hosts, 3, &down));
	assert_int_equal(down, 0);
	/* https -> http: none, even trusted, and none after, even home */
	assert_false(px_redact_headers_ok(first, first, "http://cdn.example/a", hosts, 3, &down));
	assert_int_equal(down, 1);
	assert_false(px_redact_headers_ok(first, "http://cdn.example/a", "https://api.example/a",
					  hosts, 3, &down));
	/* http to http is no downgrade */
	down = 0;
	assert_true(px_redact_headers_ok("http://api.example/a", "http://api.example/a",
					 "http://cdn.example/b", hosts, 3, &down));
	assert_int_equal(down, 0);
}

static void test_bad_host(void **state)
{
	(void)state;
	char out[300];
	assert_null(px_redact_bad_host("CDN.Example.com", out, sizeof(out)));
	assert_string_equal(out, "cdn.example.com");
	assert_null(px_redact_bad_host("cdn.example.com:8443", out, sizeof(out)));
	assert_null(px_redact_bad_host("127.0.0.1:65535", out, sizeof(out)));
	assert_null(px_redact_bad_host("[::1]:80", out, sizeof(out)));
	assert_null(px_redact_bad_host("[::1]", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("https://cdn.example.com", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("cdn.example.com/x", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("u:p@cdn.example.com", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("cdn example", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("cdn:", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("cdn:0", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("cdn:65536", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("cdn:8x", out, sizeof(out)));
	assert_non_null(px_redact_bad_host(":80", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("[::1", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("[]", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("[::1]x", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("[zz]", out, sizeof(out)));
	assert_non_null(px_redact_bad_host("cdn.example.com", out, 4));
}

/* Catalog sources carry their shown and key names; providers with headers
 * know their origins, and their trust_redirects, lowercase. */
static void test_catalog_names(void **state)
{
	(void)state;
	const char *text =
		"{\"providers\": [{\"name\": \"p\", \"headers\": {\"X-Api-Key\": \"k\"},"
		"  \"trust_redirects\": [\"CDN.example:8443\"]}],"
		" \"assets\": [{\"id\": \"a\", \"path\": \"a.bin\", \"size\": 1, \"sources\": ["
		"  {\"url\": \"https://u:SECRET@h.example/a?token=T\", \"provider\": \"p\"},"
		"  {\"url\": \"https://h.example/b\", \"provider\": \"p\"},"
		"  {\"url\": \"http://other.example:81/b\", \"provider\": \"p\"},"
		"  {\"url\": \"http://127.0.0.1:9/c\"},"
		"  {\"path\": \"/srv/a.bin\"}]}]}";
	struct px_catalog *cat = NULL;
	char err[512];
	assert_int_equal(px_catalog_parse("t.json", text, strlen(text), &cat, err, sizeof(err)),
			 PX_OK);
	const struct px_asset *a = &cat->assets[0];
	assert_string_equal(a->sources[0].shown, "https://***@h.example/a?token=***");
	assert_int_equal(strncmp(a->sources[0].key, "https://***@h.example/a?token=***#h=", 36),
			 0);
	assert_string_equal(a->sources[1].shown, "https://h.example/b");
	assert_string_equal(a->sources[1].key, "https://h.example/b");
	assert_string_equal(a->sources[4].shown, "/srv/a.bin");
	assert_string_equal(a->sources[4].key, "/srv/a.bin");
	const struct px_provider *p = &cat->providers[0];
	assert_int_equal(p->nheader_hosts, 3);
	assert_string_equal(p->header_hosts[0], "cdn.example:8443");
	assert_string_equal(p->header_hosts[1], "https://h.example:443");
	assert_string_equal(p->header_hosts[2], "http://other.example:81");
	/* a provider without headers needs no list */
	assert_int_equal(cat->providers[a->sources[3].provider].nheader_hosts, 0);
	px_catalog_free(cat);

	const char *bad = "{\"providers\": [{\"name\": \"p\", \"trust_redirects\": [\"x\", 5]}],"
			  " \"assets\": []}";
	assert_int_equal(px_catalog_parse("t.json", bad, strlen(bad), &cat, err, sizeof(err)),
			 PX_EINVAL);
	assert_non_null(strstr(err, "providers[0].trust_redirects[1]: must be a string"));
	const char *bad2 = "{\"providers\": [{\"name\": \"p\", \"trust_redirects\": \"x\"}],"
			   " \"assets\": []}";
	assert_int_equal(px_catalog_parse("t.json", bad2, strlen(bad2), &cat, err, sizeof(err)),
			 PX_EINVAL);
	assert_non_null(strstr(err, "providers[0].trust_redirects: must be an array"));
	const char *bad3 = "{\"providers\": [{\"name\": \"p\", \"trust_redirects\": "
			   "[\"u:SECRET@cdn\"]}], \"assets\": []}";
	assert_int_equal(px_catalog_parse("t.json", bad3, strlen(bad3), &cat, err, sizeof(err)),
			 PX_EINVAL);
	assert_non_null(strstr(err, "providers[0].trust_redirects[0]: "));
	assert_null(strstr(err, "SECRET"));
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

/* A store file written by an older seamfs, its records named by whole
 * URLs: the next put drops those with credentials (and the reference when
 * it was one of them), keeps the others, and writes no secret. */
static void test_store_drops_legacy_secrets(void **state)
{
	(void)state;
	char dir[] = "/tmp/seamfs-redact-XXXXXX", file[512], err[256], text[8192];
	struct vf_store *s = NULL;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(vf_store_open(dir, NULL, NULL, &s, err, sizeof(err)), PX_OK);
	assert_int_equal(vf_store_file(s, "movie", file, sizeof(file)), PX_OK);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fprintf(f, "{\"version\": 1, \"asset\": \"movie\", "
		"\"reference\": \"http://u:SECRETPW@h/a.bin\", \"sources\": {"
		"\"http://u:SECRETPW@h/a.bin\": {\"size\": 10, \"etag\": \"\", \"mtime\": -1},"
		"\"http://h/b.bin?token=SECRETTOK\": {\"size\": 10, \"etag\": \"\", \"mtime\": -1},"
		"\"http://h/c.bin?token=***#h=0123abcd\": {\"size\": 10, \"etag\": \"\", \"mtime\": -1},"
		"\"http://h/d.bin\": {\"size\": 10, \"etag\": \"\", \"mtime\": -1},"
		"\"/srv/e?x=1\": {\"size\": 10, \"etag\": \"\", \"mtime\": -1}}}");
	fclose(f);
	struct vf_record rec;
	memset(&rec, 0, sizeof(rec));
	rec.seen.size = 10;
	rec.seen.mtime = -1;
	assert_int_equal(vf_store_put(s, "movie", "http://h/f.bin", &rec, 0, err, sizeof(err)),
			 PX_OK);
	f = fopen(file, "r");
	assert_non_null(f);
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	assert_null(strstr(text, "SECRET"));
	assert_null(strstr(text, "reference"));
	assert_non_null(strstr(text, "\"http://h/c.bin?token=***#h=0123abcd\""));
	assert_non_null(strstr(text, "\"http://h/d.bin\""));
	assert_non_null(strstr(text, "\"/srv/e?x=1\""));
	assert_non_null(strstr(text, "\"http://h/f.bin\""));
	vf_store_free(s);
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	px_log_setup(PX_LOG_ERROR, 0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redact_url),
		cmocka_unit_test(test_redact_cut),
		cmocka_unit_test(test_redact_key),
		cmocka_unit_test(test_origin),
		cmocka_unit_test(test_headers_ok),
		cmocka_unit_test(test_bad_host),
		cmocka_unit_test(test_catalog_names),
		cmocka_unit_test(test_store_drops_legacy_secrets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
