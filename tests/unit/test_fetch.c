/*
 * test_fetch.c - the fetch thread (fetch.c) against the real test origin,
 * seam-origin (tests/server), on 127.0.0.1: the range contract of fetch.h.
 *
 * The origin serves a file of random bytes made at test time; each test
 * steers it with /_ctl/rule (resets, truncations, stalls, capped 206s, 200s
 * to ranges, status codes, HTML and gzip answers, broken Content-Range).
 * Every byte a transfer delivers is compared with the file at its offset;
 * every transfer must get exactly one on_done and nothing after it, which
 * the teardown checks once px_fetch_free() has joined the fetch thread.
 *
 * The origin is started once (bound to a port the kernel picks, read from
 * its "PORT n" line), dies with this process (PR_SET_PDEATHSIG), and is
 * stopped by its pid in the group teardown. Every wait is bounded.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <jansson.h>

#include "clock.h"
#include "config.h"
#include "fetch.h"
#include "log.h"

#define SIZE ((int64_t)3 * 1024 * 1024 + 4321)
#define MTIME 1600000000
#define WAIT_MS 20000
#define NCOL 8

static unsigned char *g_file;
static char g_dir[256], g_url[300];
static pid_t g_pid = -1;
static int g_port;
static struct px_config g_cfg;
static struct px_fetch *g_f;
static struct px_fetch_ops g_ops;

/* ------------------------------------------------------------ the origin */

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void origin_stop(void)
{
	if (g_pid <= 0)
		return;
	kill(g_pid, SIGTERM);
	int64_t until = px_now_ms() + 5000;
	while (waitpid(g_pid, NULL, WNOHANG) == 0) {
		if (px_now_ms() >= until) {
			kill(g_pid, SIGKILL);
			waitpid(g_pid, NULL, 0);
			break;
		}
		sleep_ms(10);
	}
	g_pid = -1;
}

/* Starts seam-origin over g_dir and reads its port: 0, or -1 with a message. */
static int origin_start(void)
{
	const char *bin = getenv("SEAM_ORIGIN_BIN");
	char line[64] = "";
	size_t n = 0;
	int pfd[2];
	pid_t parent = getpid();

	if (!bin || !bin[0]) {
		fprintf(stderr, "SEAM_ORIGIN_BIN is not set (meson test sets it)\n");
		return -1;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	g_pid = fork();
	if (g_pid == 0) {
		/* the origin never outlives the test, even one that crashed */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || dup2(pfd[1], 1) < 0)
			_exit(127);
		execl(bin, bin, "--root", g_dir, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	if (g_pid < 0) {
		close(pfd[0]);
		return -1;
	}
	int64_t until = px_now_ms() + 10000;
	while (!strchr(line, '\n') && n < sizeof(line) - 1 && px_now_ms() < until) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		if (poll(&p, 1, (int)(until - px_now_ms())) <= 0)
			continue;
		ssize_t k = read(pfd[0], line + n, sizeof(line) - 1 - n);
		if (k <= 0)
			break; /* it exited */
		n += (size_t)k;
		line[n] = '\0';
	}
	close(pfd[0]);
	if (sscanf(line, "PORT %d", &g_port) != 1 || g_port <= 0) {
		fprintf(stderr, "seam-origin gave no port (got \"%s\")\n", line);
		origin_stop();
		return -1;
	}
	snprintf(g_url, sizeof(g_url), "http://127.0.0.1:%d/a.bin", g_port);
	return 0;
}

/* A control request (GET path) over its own connection, bounded by 5 s:
 * the HTTP status, and the body in body (may be NULL). */
static int ctl(char *body, size_t cap, const char *fmt, ...) PX_PRINTF(3, 4);
static int ctl(char *body, size_t cap, const char *fmt, ...)
{
	char path[512], req[700], resp[65536];
	size_t n = 0;
	int code = -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { 5, 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)g_port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			   "Connection: close\r\n\r\n", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    send(fd, req, (size_t)len, MSG_NOSIGNAL) == len) {
		ssize_t k;
		while (n < sizeof(resp) - 1 && (k = read(fd, resp + n, sizeof(resp) - 1 - n)) > 0)
			n += (size_t)k;
	}
	if (fd >= 0)
		close(fd);
	resp[n] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
		code = -1;
	const char *b = strstr(resp, "\r\n\r\n");
	if (body)
		snprintf(body, cap, "%s", b ? b + 4 : "");
	return code;
}

/* Sets the rule of /a.bin ("key=value&..."). */
static void rule(const char *keys)
{
	char body[256];
	int code = ctl(body, sizeof(body), "/_ctl/rule?path=/a.bin&%s", keys);
	if (code != 200)
		fail_msg("rule %s: HTTP %d: %s", keys, code, body);
}

/* ---------------------------------------------------------- collectors */

/* What one transfer delivered, checked as it arrives (on the fetch
 * thread, which counts problems; the test thread asserts on them). */
struct col {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int64_t off, len, next, got;
	int64_t off2;             /* a second range's start (0: none), where
				   * the bytes may jump to from the first's end */
	int ndata, ndone, problems, npause;
	int pause_every;          /* pause on every k-th on_data (0: never) */
	int paused;               /* set by on_data; the test resumes */
	int cancel_first;         /* on_data cancels the transfer at its first
				   * chunk, once the socket has filled */
	unsigned char *buf;       /* byte i of the file at buf[i] */
	uint64_t id;
	struct px_fetch_result res;
};
static struct col g_col[NCOL];

static int c_data(void *ctx, int64_t off, const void *p, size_t len)
{
	struct col *c = ctx;
	pthread_mutex_lock(&c->lock);
	c->ndata++;
	if (c->off2 && off == c->off2 && c->next < c->off2)
		c->next = c->off2; /* the second range of a two-range transfer */
	/* in order, contiguous, inside the range, never while paused or done */
	if (c->ndone || c->paused || off != c->next || len == 0 ||
	    off + (int64_t)len > c->off + c->len || off + (int64_t)len > SIZE)
		c->problems++;
	if (c->cancel_first && c->ndata == 1) {
		uint64_t id = c->id;
		pthread_mutex_unlock(&c->lock);
		sleep_ms(100);
		g_ops.cancel(g_ops.impl, id);
		pthread_mutex_lock(&c->lock);
	}
	if (c->pause_every && c->ndata % c->pause_every == 0) {
		c->paused = 1;
		c->npause++;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (off == c->next && off + (int64_t)len <= SIZE)
		memcpy(c->buf + off, p, len);
	c->next = off + (int64_t)len;
	c->got += (int64_t)len;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return 1;
}

static void c_done(void *ctx, const struct px_fetch_result *res)
{
	struct col *c = ctx;
	pthread_mutex_lock(&c->lock);
	c->ndone++;
	c->res = *res;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static struct col *col(int i)
{
	assert_true(i >= 0 && i < NCOL);
	return &g_col[i];
}

static void submit(struct col *c, int64_t off, int64_t len, int64_t expect, int html_ok)
{
	struct px_fetch_params p = { .url = g_url, .offset = off, .length = len,
				     .expect_size = expect, .html_ok = html_ok };
	struct px_fetch_cb cb = { c_data, c_done, c };
	c->off = c->next = off;
	c->len = len;
	assert_int_equal(g_ops.submit(g_ops.impl, &p, &cb, &c->id), PX_OK);
}

/* Waits (bounded) until pred holds; resumes a paused transfer when resume
 * is set, the first pause after hold_ms. */
static int wait_for(struct col *c, int (*pred)(struct col *), int resume, int64_t hold_ms)
{
	int64_t until = px_now_ms() + WAIT_MS;
	pthread_mutex_lock(&c->lock);
	while (!pred(c) && px_now_ms() < until) {
		if (resume && c->paused) {
			pthread_mutex_unlock(&c->lock);
			sleep_ms(c->npause == 1 ? hold_ms : 0);
			pthread_mutex_lock(&c->lock);
			c->paused = 0;
			pthread_mutex_unlock(&c->lock);
			g_ops.resume(g_ops.impl, c->id);
			pthread_mutex_lock(&c->lock);
			continue;
		}
		int never = 0; /* a 20 ms slice: pred is checked after each */
		px_cond_wait_until(&c->cond, &c->lock, &never, px_now_ms() + 20);
	}
	int ok = pred(c);
	pthread_mutex_unlock(&c->lock);
	return ok;
}

static int is_done(struct col *c)
{
	return c->ndone > 0;
}

/* Runs a transfer to its end; checks that what arrived is the file's
 * bytes at their offsets and that res.bytes counts them. */
static enum px_status run(struct col *c, int64_t off, int64_t len, int64_t expect, int html_ok)
{
	submit(c, off, len, expect, html_ok);
	if (!wait_for(c, is_done, 1, 0))
		fail_msg("transfer %lld+%lld: no on_done within %d ms", (long long)off,
			 (long long)len, WAIT_MS);
	/* done: the fetch thread no longer touches c */
	assert_int_equal(c->problems, 0);
	assert_int_equal(c->res.bytes, c->got);
	if (c->got && memcmp(c->buf + off, g_file + off, (size_t)c->got) != 0)
		fail_msg("transfer %lld+%lld: wrong bytes", (long long)off, (long long)len);
	return c->res.status;
}

/* Runs a transfer of two ranges [a, a+n) and [b, b+m) to its end; checks
 * the bytes that came. */
static enum px_status run2(struct col *c, int64_t a, int64_t n, int64_t b, int64_t m)
{
	struct px_fetch_params p = { .url = g_url, .offset = a, .length = n,
				     .expect_size = SIZE, .offset2 = b, .length2 = m };
	struct px_fetch_cb cb = { c_data, c_done, c };
	c->off = c->next = a;
	c->len = b + m - a;
	c->off2 = b;
	assert_int_equal(g_ops.submit(g_ops.impl, &p, &cb, &c->id), PX_OK);
	if (!wait_for(c, is_done, 1, 0))
		fail_msg("two ranges: no on_done within %d ms", WAIT_MS);
	assert_int_equal(c->problems, 0);
	assert_int_equal(c->res.bytes, c->got);
	int64_t first = c->got < n ? c->got : n;
	assert_memory_equal(c->buf + a, g_file + a, (size_t)first);
	if (c->got > n)
		assert_memory_equal(c->buf + b, g_file + b, (size_t)(c->got - n));
	return c->res.status;
}

/* ---------------------------------------------------- setup, teardown */

static int group_setup(void **state)
{
	char file[300];
	snprintf(g_dir, sizeof(g_dir), "%s/seamfs-fetch-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	g_file = malloc(SIZE);
	if (!g_file || !mkdtemp(g_dir))
		return -1;
	for (int64_t i = 0; i < SIZE;) {
		ssize_t k = getrandom(g_file + i, (size_t)(SIZE - i), 0);
		if (k <= 0)
			return -1;
		i += k;
	}
	snprintf(file, sizeof(file), "%s/a.bin", g_dir);
	FILE *fp = fopen(file, "wb");
	if (!fp || fwrite(g_file, 1, SIZE, fp) != (size_t)SIZE || fclose(fp) != 0)
		return -1;
	struct timeval tv[2] = { { MTIME, 0 }, { MTIME, 0 } };
	if (utimes(file, tv) != 0 || px_fetch_global_init() != PX_OK)
		return -1;
	px_log_setup(PX_LOG_ERROR, 0);
	return origin_start();
}

static int group_teardown(void **state)
{
	char file[300];
	origin_stop();
	px_fetch_global_cleanup();
	snprintf(file, sizeof(file), "%s/a.bin", g_dir);
	unlink(file);
	rmdir(g_dir);
	free(g_file);
	return 0;
}

static int setup(void **state)
{
	if (ctl(NULL, 0, "/_ctl/clear") != 200)
		return -1;
	for (int i = 0; i < NCOL; i++) {
		struct col *c = &g_col[i];
		memset(c, 0, sizeof(*c));
		pthread_mutex_init(&c->lock, NULL);
		px_cond_init_mono(&c->cond);
		if (!(c->buf = malloc(SIZE)))
			return -1;
	}
	px_config_init(&g_cfg);
	g_cfg.connect_timeout_ms = 5000;
	if (px_fetch_new(&g_cfg, &g_f) != PX_OK)
		return -1;
	g_ops = px_fetch_ops(g_f);
	return 0;
}

/* After the fetch thread is joined no callback can come: each transfer
 * that was submitted got exactly one on_done, and nothing after it. */
static int teardown(void **state)
{
	int bad = 0;
	px_fetch_free(g_f);
	g_f = NULL;
	for (int i = 0; i < NCOL; i++) {
		struct col *c = &g_col[i];
		if (c->problems || (c->id && c->ndone != 1) || (!c->id && c->ndone)) {
			fprintf(stderr, "transfer %d: %d on_done, %d problems\n", i, c->ndone,
				c->problems);
			bad = 1;
		}
		free(c->buf);
		pthread_cond_destroy(&c->cond);
		pthread_mutex_destroy(&c->lock);
	}
	px_config_release(&g_cfg);
	return bad ? -1 : 0;
}

/* --------------------------------------------------------------- ranges */

static void test_exact_ranges(void **state)
{
	static const int64_t r[][2] = { { 0, 1 }, { 0, 4096 }, { 12345, 700001 },
		{ SIZE - 1, 1 }, { SIZE - 300000, 300000 }, { 0, SIZE } };
	for (int i = 0; i < 6; i++) {
		struct col *c = col(i);
		assert_int_equal(run(c, r[i][0], r[i][1], SIZE, 0), PX_OK);
		assert_int_equal(c->got, r[i][1]);
		assert_int_equal(c->res.http_status, 206);
		assert_int_equal(c->res.size, SIZE);
		assert_int_equal(c->res.mtime, MTIME);
		assert_int_equal(c->res.redirects, 0);
	}
}

/* A range to the end, and one asked past it (size known or not): the
 * bytes up to the end, PX_OK. */
static void test_open_ended(void **state)
{
	assert_int_equal(run(col(0), 2 * 1024 * 1024 + 7, SIZE - (2 * 1024 * 1024 + 7), SIZE, 0),
			 PX_OK);
	assert_int_equal(col(0)->got, SIZE - (2 * 1024 * 1024 + 7));
	assert_int_equal(run(col(1), 1000, INT64_MAX / 4, -1, 0), PX_OK);
	assert_int_equal(col(1)->got, SIZE - 1000);
	assert_int_equal(col(1)->res.size, SIZE);
	assert_int_equal(run(col(2), SIZE - 10, 1000, SIZE, 0), PX_OK);
	assert_int_equal(col(2)->got, 10);
}

/* No byte at the offset: the origin's 416 is PX_ESIZE, no data. */
static void test_past_eof(void **state)
{
	assert_int_equal(run(col(0), SIZE, 100, SIZE, 0), PX_ESIZE);
	assert_int_equal(run(col(1), SIZE + 5000, 100, -1, 0), PX_ESIZE);
	assert_int_equal(col(0)->ndata + col(1)->ndata, 0);
	assert_int_equal(col(0)->res.http_status, 416);
}

/* A 200 to a range request is the whole file from byte 0: the bytes before
 * the offset are skipped and exactly the range is delivered. Unless its
 * length is unknown or wrong: then no byte is used. */
static void test_200_for_range(void **state)
{
	rule("no_range=1");
	assert_int_equal(run(col(0), 0, 5000, SIZE, 0), PX_OK);
	assert_int_equal(col(0)->got, 5000);
	assert_int_equal(col(0)->res.http_status, 200);
	assert_int_equal(run(col(1), 1234567, 100000, SIZE, 0), PX_OK);
	assert_int_equal(col(1)->got, 100000);
	assert_int_equal(run(col(2), 777, SIZE - 777, SIZE, 0), PX_OK);
	assert_int_equal(col(2)->got, SIZE - 777);
	rule("no_range=1&length_delta=1");
	assert_int_equal(run(col(3), 100, 1000, SIZE, 0), PX_EBADRESP);
	rule("no_range=1&framing=chunked");
	assert_int_equal(run(col(4), 100, 1000, SIZE, 0), PX_ENOTASSET);
	rule("no_range=1&framing=close");
	assert_int_equal(run(col(5), 100, 1000, SIZE, 0), PX_ENOTASSET);
	for (int i = 3; i < 6; i++)
		assert_int_equal(col(i)->ndata, 0);
}

/* A capped 206 ends PX_OK with fewer bytes; asking for the rest gets it. */
static void test_capped_206(void **state)
{
	rule("cap=100000");
	int64_t off = 54321, len = 250000, have = 0;
	for (int i = 0; have < len; i++) {
		struct col *c = col(i);
		assert_int_equal(run(c, off + have, len - have, SIZE, 0), PX_OK);
		assert_int_equal(c->got, len - have < 100000 ? len - have : 100000);
		assert_int_equal(c->res.http_status, 206);
		have += c->got;
	}
	assert_int_equal(have, len);
	assert_int_equal(col(3)->id, 0); /* three requests */
}

/* Two ranges in one request (a head and a tail): a multipart/byteranges
 * answer brings both at their offsets, through pauses too; one range or
 * the whole file brings the first and says so (multi -1); a broken
 * multipart answer (another boundary, overlapping parts, a part missing)
 * is refused, with no byte of the part that broke it. */
static void test_two_ranges(void **state)
{
	const int64_t a = 0, n = 300000, b = SIZE - 1024 * 1024, m = 1024 * 1024;
	struct col *c = col(0);
	assert_int_equal(run2(c, a, n, b, m), PX_OK);
	assert_int_equal(c->got, n + m);
	assert_int_equal(c->res.multi, 1);
	assert_int_equal(c->res.http_status, 206);
	assert_int_equal(c->res.size, SIZE);
	c = col(1);
	c->pause_every = 2;
	assert_int_equal(run2(c, 1000, n, b, m), PX_OK);
	assert_int_equal(c->got, n + m);
	assert_int_equal(c->res.multi, 1);
	assert_true(c->npause >= 2);
	static const char *const fallback[] = { "multipart=single", "multipart=ignore" };
	for (int i = 0; i < 2; i++) {
		rule(fallback[i]);
		c = col(2 + i);
		assert_int_equal(run2(c, a, n, b, m), PX_OK);
		assert_int_equal(c->got, n);
		assert_int_equal(c->res.multi, -1);
		assert_int_equal(c->res.http_status, i ? 200 : 206);
	}
	static const char *const broken[] = { "multipart=boundary", "multipart=overlap",
					      "multipart=missing" };
	for (int i = 0; i < 3; i++) {
		rule(broken[i]);
		c = col(4 + i);
		assert_int_equal(run2(c, a, n, b, m), PX_EBADRESP);
		assert_int_equal(c->got, i ? n : 0); /* the first part was good */
		assert_int_equal(c->res.multi, -1);
		assert_non_null(strstr(c->res.detail, "multipart/byteranges"));
	}
}

/* ------------------------------------------------------------- failures */

/* A reset or an early close mid-body: PX_ETRANSFER, and every byte before
 * the cut (the origin waits for their acknowledgement before its RST, so
 * they are in this host's socket buffer), in order, none past it. */
static void test_reset_mid_body(void **state)
{
	int64_t off = 100000;
	rule("reset_at=400000");
	assert_int_equal(run(col(0), off, 1000000, SIZE, 0), PX_ETRANSFER);
	assert_int_equal(col(0)->got, 400000 - off);
	rule("truncate_at=300001");
	assert_int_equal(run(col(1), off, 1000000, SIZE, 0), PX_ETRANSFER);
	assert_int_equal(col(1)->got, 300001 - off);
	/* at the span's start: before the first byte */
	rule("reset_at=100000");
	assert_int_equal(run(col(2), off, 1000, SIZE, 0), PX_ETRANSFER);
	assert_int_equal(col(2)->got, 0);
	/* a retry that starts past the cut is not affected */
	rule("reset_at=50000");
	assert_int_equal(run(col(3), off, 1000, SIZE, 0), PX_OK);
}

static void test_status_codes(void **state)
{
	static const struct { int code; enum px_status st; } m[] = {
		{ 404, PX_ENOTFOUND }, { 410, PX_ENOTFOUND }, { 401, PX_EAUTH },
		{ 403, PX_EAUTH }, { 500, PX_ESERVER }, { 503, PX_ESERVER },
		{ 302, PX_EBADRESP } /* a redirect without Location */,
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]) && i < NCOL; i++) {
		char keys[64];
		snprintf(keys, sizeof(keys), "status=%d", m[i].code);
		rule(keys);
		assert_int_equal(run(col((int)i), 10, 1000, SIZE, 0), m[i].st);
		assert_int_equal(col((int)i)->res.http_status, m[i].code);
		assert_int_equal(col((int)i)->ndata, 0);
	}
}

/* Answers that are not the asset's bytes, and broken range answers. */
static void test_not_asset_and_bad_range(void **state)
{
	rule("content_type=text/html;%20charset=utf-8");
	assert_int_equal(run(col(0), 0, 1000, SIZE, 0), PX_ENOTASSET);
	/* an HTML asset may be HTML */
	assert_int_equal(run(col(1), 0, 1000, SIZE, 1), PX_OK);
	assert_int_equal(col(1)->got, 1000);
	rule("content_encoding=gzip");
	assert_int_equal(run(col(2), 0, 1000, SIZE, 0), PX_ENOTASSET);
	rule("content_range=shift");
	assert_int_equal(run(col(3), 500, 1000, SIZE, 0), PX_EBADRESP);
	rule("content_range=missing");
	assert_int_equal(run(col(4), 500, 1000, SIZE, 0), PX_EBADRESP);
	rule("length_delta=1");
	assert_int_equal(run(col(5), 500, 1000, SIZE, 0), PX_EBADRESP);
	for (int i = 0; i < 6; i++)
		if (i != 1)
			assert_int_equal(col(i)->ndata, 0);
}

/* A one-byte probe: size, Last-Modified and ETag, no data. */
static void test_probe(void **state)
{
	char etag[64];
	assert_int_equal(run(col(0), 0, 0, -1, 0), PX_OK);
	assert_int_equal(col(0)->ndata, 0);
	assert_int_equal(col(0)->res.size, SIZE);
	assert_int_equal(col(0)->res.mtime, MTIME);
	snprintf(etag, sizeof(etag), "\"%llx-%llx\"", (unsigned long long)SIZE,
		 (unsigned long long)MTIME);
	assert_string_equal(col(0)->res.etag, etag);
	assert_int_equal(run(col(1), 0, 0, SIZE + 1, 0), PX_ESIZE);
}

static void test_connect_refused(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	char keep[300];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd); /* nobody listens there now */
	snprintf(keep, sizeof(keep), "%s", g_url);
	snprintf(g_url, sizeof(g_url), "http://127.0.0.1:%d/a.bin", ntohs(sa.sin_port));
	enum px_status st = run(col(0), 0, 100, SIZE, 0);
	snprintf(g_url, sizeof(g_url), "%s", keep);
	assert_int_equal(st, PX_ECONNECT);
}

/* ------------------------------------------------ cancel, pause, stop */

static int at_stall(struct col *c)
{
	return c->got >= 3 * 65536 || c->ndone;
}

/* The origin's log entry of the last request: whether the body was cut. */
static int origin_saw_abort(void)
{
	static char body[65536];
	int64_t until = px_now_ms() + 5000;
	while (px_now_ms() < until) {
		if (ctl(body, sizeof(body), "/_ctl/log") == 200) {
			json_t *o = json_loads(body, 0, NULL);
			json_t *reqs = json_object_get(o, "requests");
			size_t n = json_array_size(reqs);
			int cut = n && json_is_false(json_object_get(json_array_get(reqs, n - 1),
								     "complete"));
			json_decref(o);
			if (cut)
				return 1;
		}
		sleep_ms(20);
	}
	return 0;
}

static void test_cancel(void **state)
{
	/* mid-body, while the origin stalls: on_done PX_ECANCELED, once, with
	 * the bytes so far, and the connection goes */
	rule("stall_at=196608");
	struct col *c = col(0);
	submit(c, 0, 1000000, SIZE, 0);
	assert_true(wait_for(c, at_stall, 0, 0));
	assert_int_equal(c->ndone, 0);
	g_ops.cancel(g_ops.impl, c->id);
	assert_true(wait_for(c, is_done, 0, 0));
	assert_int_equal(c->res.status, PX_ECANCELED);
	assert_int_equal(c->got, 196608);
	assert_int_equal(c->res.bytes, 196608);
	assert_int_equal(memcmp(c->buf, g_file, 196608), 0);
	assert_true(origin_saw_abort());
	int ndata = c->ndata;
	/* cancelling again, or an id nobody has, changes nothing */
	g_ops.cancel(g_ops.impl, c->id);
	g_ops.cancel(g_ops.impl, c->id + 1000);

	/* before the answer (the origin delays it): at once, no data */
	rule("delay_ms=20000");
	struct col *d = col(1);
	int64_t t0 = px_now_ms();
	submit(d, 0, 1000, SIZE, 0);
	g_ops.cancel(g_ops.impl, d->id);
	assert_true(wait_for(d, is_done, 0, 0));
	assert_true(px_now_ms() - t0 < 10000);
	assert_int_equal(d->res.status, PX_ECANCELED);
	assert_int_equal(d->ndata, 0);
	/* a finished transfer is not cancelled again */
	assert_int_equal(ctl(NULL, 0, "/_ctl/clear"), 200);
	assert_int_equal(run(col(2), 0, 1000, SIZE, 0), PX_OK);
	g_ops.cancel(g_ops.impl, col(2)->id);
	sleep_ms(100);
	assert_int_equal(c->ndata, ndata);
	assert_int_equal(col(2)->ndone, 1);
}

/*
 * A cancel that comes while the fetch thread delivers the transfer's bytes
 * (here from on_data itself, with more bytes waiting in the socket) ends
 * it at its next chunk. Regression test (proxy/source/fetch.c, on_write):
 * one curl_multi_perform() call went on reading a fast socket for as long
 * as it had bytes, tens of MiB on loopback and 10-20 ms, every byte of
 * them dropped by the cancelled stream, while the queued submit of the
 * seek's next stream waited: a seek on a 25 ms origin took 35-40 ms one
 * time in six (bench/net.sh, seek + 1 MiB p90 1.46x curl).
 */
static void test_cancel_at_next_chunk(void **state)
{
	rule("delay_ms=200"); /* the id is known before the first byte */
	struct col *c = col(0);
	c->cancel_first = 1;
	submit(c, 0, SIZE, SIZE, 0);
	assert_true(wait_for(c, is_done, 0, 0));
	assert_int_equal(c->problems, 0);
	assert_int_equal(c->res.status, PX_ECANCELED);
	if (c->ndata != 1)
		fail_msg("%d chunks came after the cancel (%lld bytes in all)",
			 c->ndata - 1, (long long)c->got);
	assert_true(c->got < SIZE);
	assert_int_equal(memcmp(c->buf, g_file, (size_t)c->got), 0);
}

/* on_data's pause: the same bytes come again after resume, every byte
 * arrives once and in order, nothing comes while paused. */
static void test_pause_resume(void **state)
{
	struct col *c = col(0);
	c->pause_every = 2;
	assert_int_equal(run(c, 3, 2 * 1024 * 1024, SIZE, 0), PX_OK);
	assert_int_equal(c->got, 2 * 1024 * 1024);
	assert_true(c->npause >= 2);

	/* held paused a while: no callback until the resume */
	c = col(1);
	c->pause_every = 3;
	submit(c, 1000, SIZE - 1000, SIZE, 0);
	if (!wait_for(c, is_done, 1, 300))
		fail_msg("no end");
	assert_int_equal(c->res.status, PX_OK);
	assert_int_equal(c->got, SIZE - 1000);
	assert_int_equal(memcmp(c->buf + 1000, g_file + 1000, SIZE - 1000), 0);
	assert_int_equal(c->problems, 0);
}

/* Several transfers at once, each its own bytes. */
static void test_concurrent(void **state)
{
	for (int i = 0; i < NCOL; i++)
		submit(col(i), (int64_t)i * 333333, 400000, SIZE, 0);
	for (int i = 0; i < NCOL; i++) {
		struct col *c = col(i);
		assert_true(wait_for(c, is_done, 0, 0));
		assert_int_equal(c->res.status, PX_OK);
		assert_int_equal(c->got, 400000);
		assert_int_equal(memcmp(c->buf + c->off, g_file + c->off, 400000), 0);
	}
}

/* px_fetch_stop: what is in flight ends PX_ESHUTDOWN, new submits are
 * refused with no callback. */
static void test_stop(void **state)
{
	rule("stall_at=196608");
	struct col *c = col(0);
	submit(c, 0, 1000000, SIZE, 0);
	assert_true(wait_for(c, at_stall, 0, 0));
	px_fetch_stop(g_f);
	assert_true(wait_for(c, is_done, 0, 0));
	assert_int_equal(c->res.status, PX_ESHUTDOWN);
	assert_int_equal(c->got, 196608);
	struct px_fetch_params p = { .url = g_url, .offset = 0, .length = 10, .expect_size = SIZE };
	struct px_fetch_cb cb = { c_data, c_done, col(1) };
	uint64_t id = 0;
	assert_int_equal(g_ops.submit(g_ops.impl, &p, &cb, &id), PX_ESHUTDOWN);
	px_fetch_stop(g_f); /* idempotent */
}

/* ---------------------------------------------------------------- batches */

/* Runs b until every one of n requests has its reply, into rs by tag
 * (0..n-1). */
static void batch_run(struct px_fetch_batch *b, struct px_fetch_reply **rs, size_t n)
{
	size_t got = 0;
	int64_t end = px_now_ms() + WAIT_MS;
	while (got < n && px_now_ms() < end) {
		struct px_fetch_reply *r;
		if (px_fetch_batch_next(b, &r) != PX_OK) {
			px_fetch_batch_wait(b, 100);
			continue;
		}
		size_t k = (size_t)(uintptr_t)r->tag;
		assert_true(k < n && !rs[k]);
		rs[k] = r;
		got++;
	}
	assert_int_equal(got, n);
}

/* A batch's HEAD, first byte, page and redirect: each reply under its tag
 * with the final answer's head, Last-Modified and URL; a page of binary
 * bytes is stopped, not read whole; a 404 is an answer. */
static void test_batch(void **state)
{
	char url[300], moved[300];
	struct px_fetch_batch_opts o = { .timeout_ms = WAIT_MS, .connect_timeout_ms = 5000,
					 .user_agent = "seamfs-test", .max_connections = 2,
					 .body_max = 1 << 20 };
	struct px_fetch_batch *b = NULL;
	struct px_fetch_reply *rs[6] = { 0 };
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/none.bin", g_port);
	snprintf(moved, sizeof(moved), "http://127.0.0.1:%d/moved.bin", g_port);
	assert_int_equal(ctl(NULL, 0, "/_ctl/rule?path=/moved.bin&redirect=/a.bin"), 200);
	assert_int_equal(px_fetch_batch_new(&o, &b), PX_OK);
	assert_int_equal(px_fetch_batch_add(b, PX_FETCH_HEAD, g_url, (void *)0), PX_OK);
	assert_int_equal(px_fetch_batch_add(b, PX_FETCH_FIRST_BYTE, g_url, (void *)1), PX_OK);
	assert_int_equal(px_fetch_batch_add(b, PX_FETCH_PAGE, g_url, (void *)2), PX_OK);
	assert_int_equal(px_fetch_batch_add(b, PX_FETCH_PAGE, url, (void *)3), PX_OK);
	assert_int_equal(px_fetch_batch_add(b, PX_FETCH_HEAD, moved, (void *)4), PX_OK);
	assert_int_equal(px_fetch_batch_add(b, PX_FETCH_HEAD, g_url, (void *)5), PX_OK);
	batch_run(b, rs, 6);
	for (int k = 0; k < 6; k += 5) {
		assert_true(rs[k]->done);
		assert_int_equal(rs[k]->head.status, 200);
		assert_int_equal(rs[k]->head.clen, SIZE);
		assert_int_equal(rs[k]->mtime, MTIME);
		assert_string_equal(rs[k]->url, g_url);
	}
	assert_int_equal(rs[1]->head.status, 206);
	assert_true(rs[1]->head.have_cr);
	assert_int_equal(rs[1]->head.cr.total, SIZE);
	assert_int_equal(rs[1]->mtime, MTIME);
	assert_true(rs[1]->done || rs[1]->stopped);
	assert_int_equal(rs[2]->head.status, 200);
	assert_true(rs[2]->binary && rs[2]->stopped && !rs[2]->done);
	assert_true(rs[2]->error[0] != '\0');
	assert_true(rs[2]->len < (size_t)SIZE);
	assert_true(rs[3]->done);
	assert_int_equal(rs[3]->head.status, 404);
	assert_true(rs[4]->done);
	assert_int_equal(rs[4]->head.status, 200);
	assert_int_equal(rs[4]->head.clen, SIZE);
	assert_string_equal(rs[4]->url, g_url);
	for (int k = 0; k < 6; k++)
		px_fetch_reply_free(rs[k]);
	/* a batch freed with requests running ends them */
	assert_int_equal(px_fetch_batch_add(b, PX_FETCH_PAGE, g_url, NULL), PX_OK);
	px_fetch_batch_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exact_ranges, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_ended, setup, teardown),
		cmocka_unit_test_setup_teardown(test_past_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_200_for_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capped_206, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_ranges, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_mid_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_codes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_asset_and_bad_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connect_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_at_next_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
