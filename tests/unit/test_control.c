/*
 * test_control.c - the control API (control.c): route matching, percent
 * decoding and body checks on good and bad input, the error body, and the
 * server itself on a Unix socket in a private directory: mode 0600, status,
 * metrics, drain and resume of a core with a fake fetcher, 404/405/400/413
 * answers after which it goes on serving, a refused start on a live socket
 * or on a file that is not a socket, a stale socket replaced, and the
 * socket removed at stop.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"
#include "config.h"
#include "control.h"
#include "peer.h"
#include "report.h"
#include "core.h"
#include "fake_fetch.h"
#include "rig.h"

/* ------------------------------------------------------------ parsing */

static void test_match(void **state)
{
	struct px_ctl_request req;
	struct px_ctl_error err;
	(void)state;

	assert_int_equal(px_ctl_match("GET", "/v1/status", &req, &err), 0);
	assert_int_equal(req.route, PX_CTL_STATUS);
	assert_int_equal(px_ctl_match("GET", "/v1/metrics?x=1", &req, &err), 0);
	assert_int_equal(req.route, PX_CTL_METRICS);
	assert_int_equal(px_ctl_match("POST", "/v1/providers/mirror-a/drain", &req, &err), 0);
	assert_int_equal(req.route, PX_CTL_DRAIN);
	assert_string_equal(req.name, "mirror-a");
	assert_int_equal(px_ctl_match("POST", "/v1/providers/127.0.0.1%3A8081/resume", &req, &err),
			 0);
	assert_int_equal(req.route, PX_CTL_RESUME);
	assert_string_equal(req.name, "127.0.0.1:8081");
	/* an escaped slash stays inside the name; '+' is not a space */
	assert_int_equal(px_ctl_match("POST", "/v1/providers/a%2Fb+c%20d/drain", &req, &err), 0);
	assert_string_equal(req.name, "a/b+c d");

	static const struct { const char *m, *u; int http; const char *field; } bad[] = {
		{ "GET", "/v1/statu", 404, "path" },
		{ "GET", "/v1/status/", 404, "path" },
		{ "GET", "//v1/status", 404, "path" },
		{ "GET", "", 404, "path" },
		{ "GET", "v1/status", 404, "path" },
		{ "POST", "/v1/providers//drain", 404, "path" },
		{ "POST", "/v1/providers/a/b/drain", 404, "path" },
		{ "POST", "/v1/providers/a/stop", 404, "path" },
		{ "DELETE", "/v1/status", 405, "method" },
		{ "POST", "/v1/status", 405, "method" },
		{ "GET", "/v1/providers/a/drain", 405, "method" },
		{ "POST", "/v1/providers/a%2/drain", 400, "name" },
		{ "POST", "/v1/providers/a%zz/drain", 400, "name" },
		{ "POST", "/v1/providers/a%00b/drain", 400, "name" },
		{ "POST", "/v1/providers/a%0Ab/drain", 400, "name" },
		{ "POST", "/v1/providers/%/drain", 400, "name" },
		/* not UTF-8 (raw, escaped, cut, overlong, a surrogate): no catalog name */
		{ "POST", "/v1/providers/\xff\xff" "a%2Fb/drain", 400, "name" },
		{ "POST", "/v1/providers/a%FF/drain", 400, "name" },
		{ "POST", "/v1/providers/a%C3/drain", 400, "name" },
		{ "POST", "/v1/providers/%C0%AF/drain", 400, "name" },
		{ "POST", "/v1/providers/%ED%A0%80/drain", 400, "name" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (px_ctl_match(bad[i].m, bad[i].u, &req, &err) == 0)
			fail_msg("%s %s accepted", bad[i].m, bad[i].u);
		assert_int_equal(err.http, bad[i].http);
		assert_string_equal(err.field, bad[i].field);
		assert_true(err.error[0] != '\0');
	}
	assert_int_equal(px_ctl_match("GET", "/v1/providers/a/drain", &req, &err), -1);
	assert_string_equal(err.allow, "POST");
	/* UTF-8 names pass, escaped or not */
	assert_int_equal(px_ctl_match("POST", "/v1/providers/caf%C3%A9-\xe2\x82\xac/drain", &req,
				      &err), 0);
	assert_string_equal(req.name, "caf\xc3\xa9-\xe2\x82\xac");

	/* a name as long as fits, and one byte more */
	char url[2 * PX_CTL_PARAM_MAX];
	snprintf(url, sizeof(url), "/v1/providers/%0*d/drain", PX_CTL_PARAM_MAX - 1, 0);
	assert_int_equal(px_ctl_match("POST", url, &req, &err), 0);
	assert_int_equal(strlen(req.name), PX_CTL_PARAM_MAX - 1);
	snprintf(url, sizeof(url), "/v1/providers/%0*d/drain", PX_CTL_PARAM_MAX, 0);
	assert_int_equal(px_ctl_match("POST", url, &req, &err), -1);
	assert_int_equal(err.http, 400);
}

static void test_percent_decode(void **state)
{
	char out[8];
	(void)state;
	assert_int_equal(px_ctl_percent_decode("a%41%62", 7, out, sizeof(out)), 3);
	assert_string_equal(out, "aAb");
	assert_int_equal(px_ctl_percent_decode("", 0, out, sizeof(out)), 0);
	assert_int_equal(px_ctl_percent_decode("%4", 2, out, sizeof(out)), -1);
	assert_int_equal(px_ctl_percent_decode("%4g", 3, out, sizeof(out)), -1);
	assert_int_equal(px_ctl_percent_decode("%7f", 3, out, sizeof(out)), -1);
	assert_int_equal(px_ctl_percent_decode("1234567", 7, out, sizeof(out)), 7);
	assert_int_equal(px_ctl_percent_decode("12345678", 8, out, sizeof(out)), -1);
	/* in[len] is never looked at: "%4" followed by more memory */
	assert_int_equal(px_ctl_percent_decode("%41", 2, out, sizeof(out)), -1);
}

static void test_body(void **state)
{
	struct px_ctl_request req;
	struct px_ctl_error err;
	(void)state;

	assert_int_equal(px_ctl_match("POST", "/v1/providers/p/drain", &req, &err), 0);
	assert_int_equal(px_ctl_check_body(&req, NULL, 0, &err), 0);
	assert_int_equal(px_ctl_check_body(&req, " \r\n\t", 4, &err), 0);
	assert_int_equal(px_ctl_check_body(&req, "{}", 2, &err), 0);
	assert_int_equal(px_ctl_check_body(&req, "{\"reason\": \"disk swap\"}", 23, &err), 0);
	assert_string_equal(req.reason, "disk swap");

	static const struct { const char *body; const char *field; } bad[] = {
		{ "{", "body" },
		{ "{\"reason\": }", "body" },
		{ "[1]", "body" },
		{ "\"x\"", "body" },
		{ "{\"reason\": 1}", "reason" },
		{ "{\"reason\": null}", "reason" },
		{ "{\"why\": \"x\"}", "why" },
		{ "{\"reason\": \"a\", \"reason\": \"b\"}", "body" },
		{ "{\"reason\": \"\xff\"}", "body" },
		{ "{} {}", "body" },
		{ "{\"\": 1}", "\"\"" },   /* the empty key is named, not left blank */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (px_ctl_check_body(&req, bad[i].body, strlen(bad[i].body), &err) == 0)
			fail_msg("body %s accepted", bad[i].body);
		assert_int_equal(err.http, 400);
		assert_string_equal(err.field, bad[i].field);
	}
	/* GET routes take no body */
	assert_int_equal(px_ctl_match("GET", "/v1/status", &req, &err), 0);
	assert_int_equal(px_ctl_check_body(&req, "{}", 2, &err), -1);
	assert_string_equal(err.field, "body");

	/* the error body is JSON with both fields */
	struct px_ctl_error e = { 404, "no provider named \"a\\b\"", "name", "" };
	char *js = px_ctl_error_json(&e);
	json_t *o = json_loads(js, 0, NULL);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "error")), e.error);
	assert_string_equal(json_string_value(json_object_get(o, "field")), "name");
	json_decref(o);
	free(js);

	/* a key cut inside a character still gives a JSON error body */
	assert_int_equal(px_ctl_match("POST", "/v1/providers/p/drain", &req, &err), 0);
	char body[256] = "{\"";
	size_t n = strlen(body);
	for (int i = 0; i < 40; i++) {      /* 40 x 2-byte e-acute: 80 bytes, field holds 63 */
		body[n++] = '\xc3';
		body[n++] = '\xa9';
	}
	memcpy(body + n, "\": 1}", 6);
	n += 6;
	assert_int_equal(px_ctl_check_body(&req, body, n, &err), -1);
	js = px_ctl_error_json(&err);
	assert_non_null(js);
	o = json_loads(js, 0, NULL);
	assert_non_null(o);
	assert_true(json_is_string(json_object_get(o, "field")));
	json_decref(o);
	free(js);
}

/* ------------------------------------------------------------ the server */

/* A server's surroundings: a started rig (rig.h) with two providers, one
 * with a slash in its name, and a private directory for the socket. The
 * tests make no transfer: the rig is released without checking the
 * fake's log. */
struct server {
	struct rig *rig;
	struct px_core *core;      /* the rig's */
	char dir[64], sock[128];
};

static struct server *server_new(void)
{
	static const char text[] =
		"{\"providers\": [{\"name\": \"p1\"}, {\"name\": \"a/b\"}],"
		" \"assets\": [{\"id\": \"a\", \"path\": \"a.bin\", \"size\": 1000,"
		" \"sources\": [{\"url\": \"http://p1.test/a\", \"provider\": \"p1\"},"
		" {\"url\": \"http://ab.test/a\", \"provider\": \"a/b\"}]}]}";
	struct rig_opts o = { .catalog = text, .size = 1000, .threaded = 0, .chunk = 1000 };
	struct server *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->rig = rig_new(&o);
	rig_start(r->rig, NULL, 0);
	r->core = r->rig->core;
	snprintf(r->dir, sizeof(r->dir), "/tmp/seamfs-ctl-XXXXXX");
	assert_non_null(mkdtemp(r->dir));
	snprintf(r->sock, sizeof(r->sock), "%s/ctl.sock", r->dir);
	return r;
}

static void server_free(struct server *r)
{
	unlink(r->sock);
	rmdir(r->dir);
	rig_release(r->rig, 0);
	free(r);
}

/* Sends raw (which should say Connection: close) and returns the whole
 * answer, malloc'd; *status its HTTP status. */
static char *exchange(const char *sock, const char *raw, size_t rawlen, int *status)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t len = 0, cap = 1 << 20;
	char *buf = malloc(cap);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	for (size_t off = 0; off < rawlen;) {
		ssize_t n = send(fd, raw + off, rawlen - off, MSG_NOSIGNAL);
		if (n <= 0)
			break; /* refused early: the answer is there to read */
		off += (size_t)n;
	}
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		assert_int_equal(poll(&p, 1, 5000), 1);
		ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	assert_true(len > 12);
	*status = atoi(buf + 9);
	return buf;
}

static char *req(const char *sock, const char *method, const char *target, const char *body,
		 int *status)
{
	char raw[4096];
	int n = snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\n%s", method, target, body ? strlen(body) : 0,
			 body ? body : "");
	return exchange(sock, raw, (size_t)n, status);
}

/* The JSON body of an answer's "field". */
static void expect_error(char *ans, const char *field)
{
	json_t *o = json_loads(strstr(ans, "\r\n\r\n") + 4, 0, NULL);
	assert_non_null(o);
	assert_non_null(json_string_value(json_object_get(o, "error")));
	assert_string_equal(json_string_value(json_object_get(o, "field")), field);
	json_decref(o);
	free(ans);
}

static int drained(struct server *r, const char *name)
{
	char *js = px_report_json(r->core);
	json_t *o = json_loads(js, 0, NULL), *p;
	size_t i;
	int d = -1;
	json_array_foreach(json_object_get(o, "providers"), i, p)
		if (strcmp(json_string_value(json_object_get(p, "name")), name) == 0)
			d = json_is_true(json_object_get(p, "drained"));
	json_decref(o);
	free(js);
	return d;
}

static void test_source_bodies(void **state)
{
	struct px_ctl_request req;
	struct px_ctl_error err;
	(void)state;

	assert_int_equal(px_ctl_match("POST", "/v1/assets/heat%201995/sources", &req, &err), 0);
	assert_int_equal(req.route, PX_CTL_ADD_SOURCE);
	assert_string_equal(req.name, "heat 1995");
	const char *ok = "{\"url\": \"http://h:1/a.mkv\", \"provider\": \"mirror\"}";
	assert_int_equal(px_ctl_check_body(&req, ok, strlen(ok), &err), 0);
	assert_string_equal(req.where, "http://h:1/a.mkv");
	assert_string_equal(req.provider, "mirror");

	static const struct { const char *body; const char *field; } bad[] = {
		{ "", "body" },
		{ "{}", "url" },
		{ "{\"url\": 1}", "url" },
		{ "{\"url\": \"\"}", "url" },
		{ "{\"url\": \"http://a/b\", \"path\": \"/x\"}", "path" },
		{ "{\"url\": \"http://a/b\", \"size\": 5}", "size" },
		{ "{\"provider\": \"p\"}", "url" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(px_ctl_match("POST", "/v1/assets/a/sources", &req, &err), 0);
		if (px_ctl_check_body(&req, bad[i].body, strlen(bad[i].body), &err) != -1)
			fail_msg("body %s accepted", bad[i].body);
		assert_int_equal(err.http, 400);
		assert_string_equal(err.field, bad[i].field);
	}
	/* removing takes no provider */
	assert_int_equal(px_ctl_match("POST", "/v1/assets/a/sources/remove", &req, &err), 0);
	assert_int_equal(req.route, PX_CTL_REMOVE_SOURCE);
	const char *rm = "{\"path\": \"/srv/a.mkv\", \"provider\": \"p\"}";
	assert_int_equal(px_ctl_check_body(&req, rm, strlen(rm), &err), -1);
	assert_string_equal(err.field, "provider");
	assert_int_equal(px_ctl_match("GET", "/v1/assets/a/sources", &req, &err), -1);
	assert_int_equal(err.http, 405);
}

static void test_server(void **state)
{
	struct server *r = server_new();
	struct px_control *ctl = NULL, *second = NULL;
	struct stat sb;
	int status;
	char *ans;
	(void)state;

	assert_int_equal(px_control_start(r->core, r->sock, &ctl), PX_OK);
	assert_int_equal(lstat(r->sock, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0600);

	ans = req(r->sock, "GET", "/v1/status", NULL, &status);
	assert_int_equal(status, 200);
	assert_non_null(strstr(ans, "\"providers\""));
	free(ans);
	ans = req(r->sock, "GET", "/v1/metrics", NULL, &status);
	assert_int_equal(status, 200);
	assert_non_null(strstr(ans, "text/plain; version=0.0.4"));
	assert_non_null(strstr(ans, "seamfs_provider_up{provider=\"a/b\"} 1\n"));
	free(ans);

	ans = req(r->sock, "POST", "/v1/providers/a%2Fb/drain", "{\"reason\": \"test\"}", &status);
	assert_int_equal(status, 200);
	free(ans);
	assert_int_equal(drained(r, "a/b"), 1);
	assert_int_equal(drained(r, "p1"), 0);
	ans = req(r->sock, "POST", "/v1/providers/a%2Fb/resume", NULL, &status);
	assert_int_equal(status, 200);
	free(ans);
	assert_int_equal(drained(r, "a/b"), 0);

	/* errors, each a JSON body naming the field; the server goes on */
	ans = req(r->sock, "POST", "/v1/providers/nobody/drain", NULL, &status);
	assert_int_equal(status, 404);
	assert_non_null(strstr(ans, "nobody"));
	expect_error(ans, "name");
	ans = req(r->sock, "POST", "/v1/providers/p1/drain", "{\"reason\": 7}", &status);
	assert_int_equal(status, 400);
	expect_error(ans, "reason");
	ans = req(r->sock, "POST", "/v1/providers/p1/drain", "{nope", &status);
	assert_int_equal(status, 400);
	expect_error(ans, "body");
	ans = req(r->sock, "PUT", "/v1/status", NULL, &status);
	assert_int_equal(status, 405);
	assert_non_null(strstr(ans, "Allow: GET"));
	expect_error(ans, "method");
	ans = req(r->sock, "GET", "/v2/anything", NULL, &status);
	assert_int_equal(status, 404);
	expect_error(ans, "path");
	assert_int_equal(drained(r, "p1"), 0);

	/* too big: announced, and sent chunked without a length */
	size_t big = PX_CTL_BODY_MAX + 4096;
	char *raw = malloc(200000);
	int n = sprintf(raw, "POST /v1/providers/p1/drain HTTP/1.1\r\nHost: x\r\n"
			"Connection: close\r\nContent-Length: %zu\r\n\r\n", big);
	memset(raw + n, ' ', big);
	ans = exchange(r->sock, raw, (size_t)n + big, &status);
	assert_int_equal(status, 413);
	expect_error(ans, "body");
	n = sprintf(raw, "POST /v1/providers/p1/drain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n");
	for (int k = 0; k < 20; k++) {
		n += sprintf(raw + n, "1000\r\n");
		memset(raw + n, ' ', 0x1000);
		n += 0x1000;
		n += sprintf(raw + n, "\r\n");
	}
	n += sprintf(raw + n, "0\r\n\r\n");
	ans = exchange(r->sock, raw, (size_t)n, &status);
	assert_int_equal(status, 413);
	expect_error(ans, "body");
	free(raw);
	ans = req(r->sock, "GET", "/v1/status", NULL, &status);
	assert_int_equal(status, 200);
	free(ans);

	/* a second server on a live socket is refused */
	assert_int_not_equal(px_control_start(r->core, r->sock, &second), PX_OK);
	assert_null(second);
	px_control_stop(ctl);
	assert_int_equal(lstat(r->sock, &sb), -1);
	assert_int_equal(errno, ENOENT);
	px_control_stop(NULL);
	server_free(r);
}

static void test_start_refusals(void **state)
{
	struct server *r = server_new();
	struct px_control *ctl = NULL;
	struct stat sb;
	(void)state;

	/* a regular file is left alone */
	FILE *f = fopen(r->sock, "w");
	assert_non_null(f);
	fputs("keep me\n", f);
	fclose(f);
	assert_int_not_equal(px_control_start(r->core, r->sock, &ctl), PX_OK);
	assert_null(ctl);
	assert_int_equal(lstat(r->sock, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));
	unlink(r->sock);

	/* a stale socket (bound, nobody listens) is replaced */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r->sock);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(px_control_start(r->core, r->sock, &ctl), PX_OK);
	int status;
	char *ans = req(r->sock, "GET", "/v1/status", NULL, &status);
	assert_int_equal(status, 200);
	free(ans);
	px_control_stop(ctl);

	/* a path too long for a socket, and a directory that is not there */
	char longp[200];
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	assert_int_not_equal(px_control_start(r->core, longp, &ctl), PX_OK);
	assert_int_not_equal(px_control_start(r->core, "/nonexistent-dir/ctl.sock", &ctl), PX_OK);
	server_free(r);
}

/* The peer endpoint's Range header: one range, clamped to the file; past
 * the end 416; what is not one byte range reads the whole file. */
static void test_peer_range(void **state)
{
	int64_t off, len;
	(void)state;
	assert_int_equal(px_peer_parse_range(NULL, 100, &off, &len), 0);
	assert_true(off == 0 && len == 100);
	assert_int_equal(px_peer_parse_range("bytes=10-19", 100, &off, &len), 0);
	assert_true(off == 10 && len == 10);
	assert_int_equal(px_peer_parse_range("bytes=90-", 100, &off, &len), 0);
	assert_true(off == 90 && len == 10);
	assert_int_equal(px_peer_parse_range("bytes=90-500", 100, &off, &len), 0);
	assert_true(off == 90 && len == 10);
	assert_int_equal(px_peer_parse_range("bytes=-7", 100, &off, &len), 0);
	assert_true(off == 93 && len == 7);
	assert_int_equal(px_peer_parse_range("bytes=-700", 100, &off, &len), 0);
	assert_true(off == 0 && len == 100);
	assert_int_equal(px_peer_parse_range("bytes=100-", 100, &off, &len), 1);
	assert_int_equal(px_peer_parse_range("bytes=-0", 100, &off, &len), 1);
	assert_int_equal(px_peer_parse_range("bytes=0-", 0, &off, &len), 1);
	const char *odd[] = { "bytes=5-2", "bytes=1-2,4-5", "items=0-1", "bytes=x-1",
			      "bytes=1-2x", "bytes=", "bytes=--1" };
	for (size_t i = 0; i < sizeof(odd) / sizeof(*odd); i++) {
		assert_int_equal(px_peer_parse_range(odd[i], 100, &off, &len), -1);
		assert_true(off == 0 && len == 100);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_peer_range),
		cmocka_unit_test(test_percent_decode),
		cmocka_unit_test(test_body),
		cmocka_unit_test(test_source_bodies),
		cmocka_unit_test_teardown(test_server, rig_teardown),
		cmocka_unit_test_teardown(test_start_refusals, rig_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
