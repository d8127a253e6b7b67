/*
 * seam-origin: a deliberately misbehaving HTTP/1.1 origin for seamfs tests.
 *
 * It serves the regular files below --root on 127.0.0.1 only, and lets a
 * test attach per-path "rules" that make responses fail in controlled ways:
 * a forced status, ignored ranges, delays, connection resets, truncation,
 * stalls, corrupted bytes, lying lengths and Content-Range headers,
 * redirects, another file's bytes, odd Content-Type/Content-Encoding, gzip
 * bodies, read-to-close or chunked framing, short 206 answers, broken
 * multipart/byteranges answers to two ranges.  Rules are
 * set with plain GET requests under /_ctl/ on the same port, so a test
 * needs nothing but an HTTP client.  Every finished or aborted response
 * goes into an in-memory log that tests read back as JSON to check what the
 * client under test really asked for.  --delay-ms makes the whole server a
 * distant one: every GET or HEAD answer waits that long before its first
 * byte.  The protocol is described in README.md beside this file.
 *
 * Design: the main thread owns the listening socket and starts one detached
 * thread per connection.  Every socket is non-blocking and every wait is a
 * poll() that also watches a self-pipe which the SIGTERM/SIGINT handler
 * makes readable for good, so shutdown cuts through any transfer, delay or
 * stall at once.  Shared state (rules, log, counters, listener state) sits
 * behind one mutex, taken a couple of times per request; bodies are sent
 * straight from pread() in 256 KiB writes (64 KiB chunks when chunked).  A
 * gzip body is the one exception: it is compressed whole into memory first,
 * since its length must be known before the headers.  Linux-only
 * (POLLRDHUP, SIOCOUTQ), like the filesystem it tests.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define REQ_MAX (16 * 1024)           /* request head limit, beyond: 431 */
#define HDR_MAX (REQ_MAX + 4096)      /* a Location may be nearly REQ_MAX */
#define CHUNK (256 * 1024)
#define HTTP_CHUNK_MAX (64 * 1024)      /* framing=chunked: payload per chunk */
#define GZIP_SPAN_MAX (256ull << 20)    /* compressed in memory: beyond, 500 */
#define NONE UINT64_MAX
#define DEFAULT_STALL_MS 600000
#define LINGER_MS 1000
#define DRAIN_POLL_MS 2
#define CTL_WAIT_MS 2000
#define LOG_SETTLE_MS 500
#define DISCARD_MAX (1024 * 1024)
#define SHUTDOWN_GRACE_MS 1000

enum cr_mode { CR_NORMAL, CR_MISSING, CR_SHIFT, CR_TOTAL };
/* how a request for two ranges is answered (multipart=); MP_AUTO: as
 * MP_NORMAL, but as MP_SINGLE for a rule with a key that shapes a body
 * (an offset key, corrupt_from, cap, framing...), which a multipart
 * answer would not honour: the first range then comes with it */
enum mp_mode { MP_AUTO, MP_NORMAL, MP_IGNORE, MP_SINGLE, MP_BOUNDARY, MP_OVERLAP, MP_MISSING };
enum framing { FR_LENGTH, FR_CLOSE, FR_CHUNKED };

struct rule {
	struct rule *next;
	char *path;
	char *redirect;
	char *serve;            /* answer with this file under the root instead */
	char *content_type;     /* replaces the Content-Type of file answers */
	char *content_encoding; /* header value; "gzip" also compresses the body */
	int status;
	bool no_range;
	uint64_t delay_ms;
	uint64_t reset_at, truncate_at, stall_at, corrupt_from;
	uint64_t status_after;  /* `status` only for requests from this offset on */
	uint64_t stall_ms;
	int64_t length_delta;
	int64_t clen_delta;     /* a 206's Content-Length is off by this */
	enum cr_mode content_range;
	enum mp_mode multipart;
	enum framing framing;
	uint64_t cap;   /* 0: none; else a 206 covers at most this many bytes */
	uint64_t count; /* 0: unlimited */
};

struct logent {
	char *method, *path, *range;
	int status;
	uint64_t bytes;
	uint64_t conn;
	bool complete;
};

struct hbuf {
	size_t n;
	char b[HDR_MAX];
};

struct conn {
	struct conn *prev, *next; /* g_conns, under g_mu */
	int fd;
	bool fd_live;   /* under g_mu: fd may be shut down by /_ctl/down?drop=1 */
	uint64_t id;
	bool counted;   /* included in the connection counters */
	bool peer_gone; /* under g_mu: counted out: its fd is closed, or the peer
			 * had closed it when another connection was counted */
	bool logging;   /* the response in progress goes into the log */
	bool finishing; /* included in g_finishing */
	const char *lmethod, *lpath, *lrange;
	int lstatus;
	uint64_t lbytes;
	size_t inlen;
	unsigned char *body;
	char in[REQ_MAX];
	char head[REQ_MAX + 1];
	char path[REQ_MAX + 1];
	struct hbuf h;
};

struct req {
	const char *method;
	char *query;
	const char *path;
	const char *range;
	bool head;
	bool want_close;
	bool chunked;
	uint64_t clen;
};

enum next { NEXT_KEEP, NEXT_CLOSE, NEXT_DROP, NEXT_GONE };
enum body_result { BODY_OK, BODY_RESET, BODY_TRUNC, BODY_FAIL };
enum range_result { RANGE_NONE, RANGE_OK, RANGE_UNSAT };
enum read_result { RD_OK, RD_EOF, RD_ERR, RD_TOOBIG };

static int g_stop_rd = -1, g_stop_wr = -1;
static int g_wake_rd = -1, g_wake_wr = -1;
/* Lock-free atomics: written by signal handlers, read by every thread. */
static atomic_int g_stopping;
static atomic_int g_sig_up;
static char *g_root;
static size_t g_root_len;
static bool g_verbose;
static uint64_t g_idle_ms = 300000;
static uint64_t g_delay_ms; /* --delay-ms: added to every GET/HEAD answer's delay_ms */
static uint64_t g_rate;     /* --rate: bytes per second of each answer's body, 0: no cap */
static bool g_index;        /* --index: a directory's GET lists its files (rclone's http backend) */
static size_t g_log_max = 100000;
static uint16_t g_port;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static struct rule *g_rules;
static struct conn *g_conns;
static struct logent *g_log;
static size_t g_log_head, g_log_len;
static uint64_t g_log_dropped;
static uint64_t g_conn_ids, g_conn_total, g_conn_current, g_conn_max;
static unsigned g_threads;
static unsigned g_finishing;
static bool g_want_listen = true, g_listening = true;
static int g_listen_errno;
static uint64_t g_listen_req, g_listen_done;

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fputs("seam-origin: out of memory\n", stderr);
		abort();
	}
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fputs("seam-origin: out of memory\n", stderr);
		abort();
	}
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Caller holds g_mu.  Spurious and early wake-ups are fine: callers loop. */
static void cv_wait_ms(uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&g_cv, &g_mu, &ts);
}

/*
 * Waits for events on fd, or for shutdown.  timeout_ms < 0 waits without a
 * deadline, which is still bounded by shutdown.  Returns 1 with *rev set when
 * fd is ready, 0 on timeout, -1 on shutdown or poll failure.
 */
static int wait_fd(int fd, short events, int64_t timeout_ms, short *rev)
{
	uint64_t deadline = timeout_ms < 0 ? 0 : mono_ms() + (uint64_t)timeout_ms;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = fd, .events = events },
			{ .fd = g_stop_rd, .events = POLLIN },
		};
		int t = -1;
		if (timeout_ms >= 0) {
			uint64_t now = mono_ms();
			if (now >= deadline)
				return 0;
			t = deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now);
		}
		int r = poll(p, 2, t);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (p[1].revents)
			return -1;
		if (p[0].revents) {
			*rev = p[0].revents;
			return 1;
		}
	}
}

/* Reads more of the request stream.  1: got bytes, 0: EOF, -1: failure. */
static int conn_fill(struct conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->in + c->inlen, sizeof c->in - c->inlen, 0);
		if (n > 0) {
			c->inlen += (size_t)n;
			return 1;
		}
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		short rev;
		if (wait_fd(c->fd, POLLIN, (int64_t)g_idle_ms, &rev) <= 0)
			return -1;
	}
}

/* Adds what the kernel accepted to *sent even when it fails half-way. */
static int send_all(struct conn *c, const void *buf, size_t len, int flags, uint64_t *sent)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(c->fd, p, len, flags | MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			if (sent)
				*sent += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			short rev;
			if (wait_fd(c->fd, POLLOUT, (int64_t)g_idle_ms, &rev) <= 0)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

/*
 * Sleeps, but gives up as soon as the client hangs up or the server shuts
 * down.  Only POLLRDHUP is asked for: a pipelined request arriving meanwhile
 * must not end the sleep.  0: slept, -1: interrupted.
 */
static int conn_sleep(struct conn *c, uint64_t ms)
{
	short rev = 0;
	int64_t t = ms > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ms;
	return wait_fd(c->fd, POLLRDHUP, t, &rev) == 0 ? 0 : -1;
}

/*
 * A reset throws away whatever still sits in the send queue, yet the rule
 * promises that every byte before the reset point arrives.  So wait until
 * the peer has acknowledged everything (on loopback: it is in the peer's
 * receive queue, which a reset does not purge).
 */
static void wait_drained(struct conn *c)
{
	uint64_t deadline = mono_ms() + g_idle_ms;

	for (;;) {
		int q = 0;
		if (ioctl(c->fd, SIOCOUTQ, &q) < 0 || q <= 0)
			return;
		if (mono_ms() >= deadline || conn_sleep(c, DRAIN_POLL_MS) < 0)
			return;
	}
}

/* Every close goes through here so that drop_connections never touches a reused fd number. */
static void conn_close_fd(struct conn *c)
{
	pthread_mutex_lock(&g_mu);
	c->fd_live = false;
	if (c->counted && !c->peer_gone) {
		/* closed now, whatever the thread still has to do */
		c->peer_gone = true;
		g_conn_current--;
	}
	pthread_mutex_unlock(&g_mu);
	close(c->fd);
	c->fd = -1;
}

static void close_reset(struct conn *c)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	conn_close_fd(c);
}

/*
 * Closing with unread input makes Linux send a reset, which can destroy the
 * response still in flight.  So send FIN first and swallow input until the
 * peer closes too, for a bounded time.
 */
static void close_graceful(struct conn *c)
{
	char scrap[4096];
	uint64_t deadline = mono_ms() + LINGER_MS;

	shutdown(c->fd, SHUT_WR);
	for (;;) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			break;
		ssize_t n = recv(c->fd, scrap, sizeof scrap, 0);
		if (n == 0)
			break;
		if (n > 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			break;
		short rev;
		if (wait_fd(c->fd, POLLIN, (int64_t)(deadline - now), &rev) <= 0)
			break;
	}
	conn_close_fd(c);
}

__attribute__((format(printf, 2, 3)))
static void hput(struct hbuf *h, const char *fmt, ...)
{
	va_list ap;
	if (h->n >= sizeof h->b)
		return;
	va_start(ap, fmt);
	int r = vsnprintf(h->b + h->n, sizeof h->b - h->n, fmt, ap);
	va_end(ap);
	if (r > 0)
		h->n += (size_t)r;
	if (h->n > sizeof h->b)
		h->n = sizeof h->b; /* truncated; cannot happen with REQ_MAX inputs */
}

static const char *reason(int s)
{
	switch (s) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 412: return "Precondition Failed";
	case 416: return "Range Not Satisfiable";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Status";
	}
}

static void http_date(time_t t, char *out, size_t len)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void begin_headers(struct conn *c, int status, bool want_close)
{
	char date[64];
	c->h.n = 0;
	http_date(time(NULL), date, sizeof date);
	hput(&c->h, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: seam-origin\r\n", status, reason(status),
	     date);
	if (want_close)
		hput(&c->h, "Connection: close\r\n");
}

/* ---- request log ---------------------------------------------------- */

static void log_begin(struct conn *c, const char *method, const char *path, const char *range)
{
	c->logging = true;
	c->finishing = false;
	c->lmethod = method;
	c->lpath = path;
	c->lrange = range;
	c->lstatus = 0;
	c->lbytes = 0;
}

/*
 * Called right before the write that carries a response's last byte.  Until
 * the entry is in the log, /_ctl/log waits for it: a client that has seen
 * the whole response must also find it in the log.
 */
static void mark_finishing(struct conn *c)
{
	if (!c->logging || c->finishing)
		return;
	c->finishing = true;
	pthread_mutex_lock(&g_mu);
	g_finishing++;
	pthread_mutex_unlock(&g_mu);
}

static void logent_free(struct logent *e)
{
	free(e->method);
	free(e->path);
	free(e->range);
	memset(e, 0, sizeof *e);
}

static void log_finish(struct conn *c, bool complete)
{
	if (!c->logging)
		return;
	struct logent e = {
		.method = xstrdup(c->lmethod),
		.path = xstrdup(c->lpath),
		.range = c->lrange ? xstrdup(c->lrange) : NULL,
		.status = c->lstatus,
		.bytes = c->lbytes,
		.conn = c->id,
		.complete = complete,
	};
	if (g_verbose)
		fprintf(stderr, "seam-origin: conn=%" PRIu64 " %s %s range=%s -> %d bytes=%" PRIu64 "%s\n",
			c->id, e.method, e.path, e.range ? e.range : "-", e.status, e.bytes,
			complete ? "" : " (incomplete)");

	pthread_mutex_lock(&g_mu);
	if (g_log_max == 0) {
		g_log_dropped++;
		logent_free(&e);
	} else {
		if (g_log_len == g_log_max) {
			logent_free(&g_log[g_log_head]);
			g_log_head = (g_log_head + 1) % g_log_max;
			g_log_len--;
			g_log_dropped++;
		}
		g_log[(g_log_head + g_log_len) % g_log_max] = e;
		g_log_len++;
	}
	if (c->finishing) {
		g_finishing--;
		pthread_cond_broadcast(&g_cv);
	}
	pthread_mutex_unlock(&g_mu);
	c->logging = false;
	c->finishing = false;
}

/*
 * Counts a connection when its first request arrives.  Connections whose
 * peer has already closed are counted out first: a client that closes one
 * connection and then opens another must not be charged with both because
 * the old connection's thread has not run yet.  The kernel knows about the
 * close (POLLRDHUP) before the new connection's request can arrive.
 */
static void count_conn(struct conn *c)
{
	if (c->counted)
		return;
	c->counted = true;
	pthread_mutex_lock(&g_mu);
	for (struct conn *o = g_conns; o; o = o->next) {
		if (o == c || !o->counted || o->peer_gone || !o->fd_live)
			continue;
		struct pollfd pf = { .fd = o->fd, .events = POLLRDHUP };
		if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			o->peer_gone = true;
			g_conn_current--;
		}
	}
	g_conn_total++;
	g_conn_current++;
	if (g_conn_current > g_conn_max)
		g_conn_max = g_conn_current;
	pthread_mutex_unlock(&g_mu);
}

/* ---- small string helpers ------------------------------------------ */

struct sbuf {
	char *p;
	size_t n, cap;
};

static void sb_write(struct sbuf *sb, const void *d, size_t n)
{
	if (sb->n + n + 1 > sb->cap) {
		while (sb->n + n + 1 > sb->cap)
			sb->cap = sb->cap ? sb->cap * 2 : 4096;
		sb->p = xrealloc(sb->p, sb->cap);
	}
	memcpy(sb->p + sb->n, d, n);
	sb->n += n;
	sb->p[sb->n] = 0;
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sbuf *sb, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (r > 0)
		sb_write(sb, tmp, (size_t)r < sizeof tmp ? (size_t)r : sizeof tmp - 1);
}

/* Length of the valid UTF-8 sequence at p, 0 if it is not one. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char a = p[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (a >= 0xc2 && a <= 0xdf)
		n = 2;
	else if (a >= 0xe0 && a <= 0xef)
		n = 3;
	else if (a >= 0xf0 && a <= 0xf4)
		n = 4;
	else
		return 0;
	if (a == 0xe0)
		lo = 0xa0;
	else if (a == 0xed)
		hi = 0x9f;
	else if (a == 0xf0)
		lo = 0x90;
	else if (a == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* Paths are arbitrary bytes; invalid UTF-8 is escaped byte-wise so the JSON stays loadable. */
static void sb_json_str(struct sbuf *sb, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	sb_write(sb, "\"", 1);
	while (*p) {
		size_t n;
		if (*p == '"' || *p == '\\') {
			sb_write(sb, "\\", 1);
			sb_write(sb, p++, 1);
		} else if (*p < 0x20 || *p == 0x7f) {
			sb_printf(sb, "\\u%04x", *p++);
		} else if (*p < 0x80) {
			sb_write(sb, p++, 1);
		} else if ((n = utf8_len(p)) != 0) {
			sb_write(sb, p, n);
			p += n;
		} else {
			sb_printf(sb, "\\u%04x", *p++);
		}
	}
	sb_write(sb, "\"", 1);
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* dst needs strlen(src)+1 bytes.  NUL bytes are refused: they would cut the path short. */
static int pct_decode(const char *src, char *dst, bool plus_is_space)
{
	char *o = dst;
	for (const char *s = src; *s; s++) {
		if (*s == '%') {
			int a = hexval((unsigned char)s[1]);
			int b = a < 0 ? -1 : hexval((unsigned char)s[2]);
			if (b < 0 || (a == 0 && b == 0))
				return -1;
			*o++ = (char)(a * 16 + b);
			s += 2;
		} else if (*s == '+' && plus_is_space) {
			*o++ = ' ';
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
	return 0;
}

/* Strict unsigned decimal; refuses signs, blanks and overflow. */
static bool parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static bool parse_i64(const char *s, int64_t *out)
{
	bool neg = *s == '-';
	uint64_t v;
	if (*s == '-' || *s == '+')
		s++;
	if (!parse_u64(s, &v))
		return false;
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
	return true;
}

/* Digits with saturation: a huge range bound is still a valid bound. */
static const char *range_num(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = s;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
	}
	*out = v;
	return s == start ? NULL : s;
}

static const char *skip_ows(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/*
 * One byte range.  Anything unparsable, or a set of ranges, is answered as
 * if there were no Range header (RFC 7233 allows both), but for the two
 * ranges parse_two_ranges takes.  Sets [*a, *b] inclusive on RANGE_OK.
 */
static enum range_result parse_range(const char *v, uint64_t size, uint64_t *a, uint64_t *b)
{
	uint64_t first, last;
	const char *s = skip_ows(v);

	if (strncasecmp(s, "bytes", 5) != 0)
		return RANGE_NONE;
	s = skip_ows(s + 5);
	if (*s++ != '=')
		return RANGE_NONE;
	if (strchr(s, ','))
		return RANGE_NONE;
	s = skip_ows(s);
	if (*s == '-') {
		s = range_num(s + 1, &last);
		if (!s || *skip_ows(s))
			return RANGE_NONE;
		if (last == 0 || size == 0)
			return RANGE_UNSAT;
		*a = last >= size ? 0 : size - last;
		*b = size - 1;
		return RANGE_OK;
	}
	s = range_num(s, &first);
	if (!s || *s++ != '-')
		return RANGE_NONE;
	const char *e = range_num(s, &last);
	if (e) {
		if (*skip_ows(e) || last < first)
			return RANGE_NONE;
	} else {
		if (*skip_ows(s))
			return RANGE_NONE;
		last = UINT64_MAX;
	}
	if (first >= size)
		return RANGE_UNSAT;
	*a = first;
	*b = last >= size ? size - 1 : last;
	return RANGE_OK;
}

/*
 * Exactly two byte ranges ("a-b,c-d", each also "a-" or "-n"), both
 * satisfiable, ascending and apart, as [a[i], b[i]] inclusive: true.
 * Anything else is for parse_range (a multi-range set it ignores).
 */
static bool parse_two_ranges(const char *v, uint64_t size, uint64_t a[2], uint64_t b[2])
{
	const char *s = skip_ows(v), *comma;
	char one[128];

	if (strncasecmp(s, "bytes", 5) != 0)
		return false;
	s = skip_ows(s + 5);
	if (*s++ != '=' || !(comma = strchr(s, ',')) || strchr(comma + 1, ','))
		return false;
	for (int i = 0; i < 2; i++) {
		const char *from = i ? comma + 1 : s;
		size_t n = i ? strlen(from) : (size_t)(comma - s);
		if (n + 7 > sizeof one)
			return false;
		snprintf(one, sizeof one, "bytes=%.*s", (int)n, from);
		if (parse_range(one, size, &a[i], &b[i]) != RANGE_OK)
			return false;
	}
	return a[1] > b[0] + 1;
}

/* ---- rules ----------------------------------------------------------- */

static void rule_init(struct rule *r)
{
	memset(r, 0, sizeof *r);
	r->reset_at = r->truncate_at = r->stall_at = r->corrupt_from = NONE;
	r->status_after = NONE;
	r->stall_ms = DEFAULT_STALL_MS;
}

/* Frees the strings a rule owns: those of a stored rule and those of a rule_take() copy. */
static void rule_strings_free(struct rule *r)
{
	free(r->path);
	free(r->redirect);
	free(r->serve);
	free(r->content_type);
	free(r->content_encoding);
	r->path = r->redirect = r->serve = r->content_type = r->content_encoding = NULL;
}

static void rule_free(struct rule *r)
{
	if (r)
		rule_strings_free(r);
	free(r);
}

/* Replaces an owned string of a rule. */
static void set_str(char **slot, const char *v)
{
	free(*slot);
	*slot = xstrdup(v);
}

/* Location values end up verbatim in a header: no controls, no blanks. */
static bool header_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

/*
 * Content-Type and Content-Encoding values are sent as given, so they may
 * hold blanks ("text/html; charset=utf-8") but no CR/LF or other controls
 * that would split or end the header block.
 */
static bool header_value_ok(const char *s)
{
	size_t n = strlen(s);
	bool ok = n > 0 && s[0] != ' ' && s[0] != '\t' && s[n - 1] != ' ' && s[n - 1] != '\t';
	for (; ok && *s; s++)
		ok = ((unsigned char)*s >= 0x20 || *s == '\t') && *s != 0x7f;
	return ok;
}

static void sb_pct_encode_path(struct sbuf *sb, const char *s)
{
	static const char keep[] = "-._~!$&'()*+,;=:@/";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr(keep, *p))
			sb_write(sb, p, 1);
		else
			sb_printf(sb, "%%%02X", *p);
	}
}

/* Returns NULL on success or a message naming the offending key. */
static const char *rule_set_key(struct rule *r, const char *k, const char *v, char *msg, size_t mlen)
{
	uint64_t u;

#define BAD()                                                                   \
	do {                                                                    \
		snprintf(msg, mlen, "bad value for '%s': '%.200s'", k, v);      \
		return msg;                                                     \
	} while (0)

	if (!strcmp(k, "path")) {
		if (v[0] != '/')
			BAD();
		set_str(&r->path, v);
	} else if (!strcmp(k, "status")) {
		if (!parse_u64(v, &u) || u < 200 || u > 599)
			BAD();
		r->status = (int)u;
	} else if (!strcmp(k, "no_range")) {
		if (!strcmp(v, "1") || !strcmp(v, "true"))
			r->no_range = true;
		else if (!strcmp(v, "0") || !strcmp(v, "false"))
			r->no_range = false;
		else
			BAD();
	} else if (!strcmp(k, "delay_ms")) {
		if (!parse_u64(v, &r->delay_ms))
			BAD();
	} else if (!strcmp(k, "reset_at")) {
		if (!parse_u64(v, &r->reset_at) || r->reset_at == NONE)
			BAD();
	} else if (!strcmp(k, "truncate_at")) {
		if (!parse_u64(v, &r->truncate_at) || r->truncate_at == NONE)
			BAD();
	} else if (!strcmp(k, "stall_at")) {
		if (!parse_u64(v, &r->stall_at) || r->stall_at == NONE)
			BAD();
	} else if (!strcmp(k, "stall_ms")) {
		if (!parse_u64(v, &r->stall_ms))
			BAD();
	} else if (!strcmp(k, "status_after")) {
		if (!parse_u64(v, &r->status_after) || r->status_after == NONE)
			BAD();
	} else if (!strcmp(k, "corrupt_from")) {
		if (!parse_u64(v, &r->corrupt_from) || r->corrupt_from == NONE)
			BAD();
	} else if (!strcmp(k, "length_delta")) {
		/* bounded so size + delta cannot overflow */
		if (!parse_i64(v, &r->length_delta) || r->length_delta > ((int64_t)1 << 60) ||
		    r->length_delta < -((int64_t)1 << 60))
			BAD();
	} else if (!strcmp(k, "clen_delta")) {
		if (!parse_i64(v, &r->clen_delta) || r->clen_delta > ((int64_t)1 << 60) ||
		    r->clen_delta < -((int64_t)1 << 60))
			BAD();
	} else if (!strcmp(k, "content_range")) {
		if (!strcmp(v, "missing"))
			r->content_range = CR_MISSING;
		else if (!strcmp(v, "shift"))
			r->content_range = CR_SHIFT;
		else if (!strcmp(v, "total"))
			r->content_range = CR_TOTAL;
		else if (!strcmp(v, "normal"))
			r->content_range = CR_NORMAL;
		else
			BAD();
	} else if (!strcmp(k, "multipart")) {
		static const char *const modes[] = { "", "normal", "ignore", "single", "boundary",
						     "overlap", "missing" };
		size_t i = 1;
		while (i < sizeof modes / sizeof *modes && strcmp(v, modes[i]))
			i++;
		if (i == sizeof modes / sizeof *modes)
			BAD();
		r->multipart = (enum mp_mode)i;
	} else if (!strcmp(k, "redirect")) {
		/* Local paths are percent-encoded when sent; absolute URLs go out verbatim. */
		bool abs = !strncmp(v, "http://", 7) || !strncmp(v, "https://", 8);
		if (abs ? !header_safe(v) : v[0] != '/')
			BAD();
		set_str(&r->redirect, v);
	} else if (!strcmp(k, "serve")) {
		/* checked like a request path when used: a missing file is a 404 then, not an error now */
		if (v[0] != '/')
			BAD();
		set_str(&r->serve, v);
	} else if (!strcmp(k, "content_type")) {
		if (!header_value_ok(v))
			BAD();
		set_str(&r->content_type, v);
	} else if (!strcmp(k, "content_encoding")) {
		if (!header_value_ok(v))
			BAD();
		set_str(&r->content_encoding, v);
	} else if (!strcmp(k, "framing")) {
		if (!strcmp(v, "length"))
			r->framing = FR_LENGTH;
		else if (!strcmp(v, "close"))
			r->framing = FR_CLOSE;
		else if (!strcmp(v, "chunked"))
			r->framing = FR_CHUNKED;
		else
			BAD();
	} else if (!strcmp(k, "cap")) {
		if (!parse_u64(v, &r->cap) || r->cap == 0)
			BAD();
	} else if (!strcmp(k, "count")) {
		if (!parse_u64(v, &r->count) || r->count == 0)
			BAD();
	} else {
		snprintf(msg, mlen, "unknown key '%.200s'", k);
		return msg;
	}
	return NULL;
#undef BAD
}

/* Parses a /_ctl/rule query and installs the rule; NULL or an error message. */
static const char *rule_from_query(const char *query, char *msg, size_t mlen)
{
	struct rule *r = xmalloc(sizeof *r);
	char *q = xstrdup(query ? query : "");
	const char *err = NULL;
	char *save = NULL;

	rule_init(r);
	for (char *tok = strtok_r(q, "&", &save); tok && !err; tok = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(tok, '=');
		const char *rawv = "";
		if (eq) {
			*eq = 0;
			rawv = eq + 1;
		}
		char *k = xmalloc(strlen(tok) + 1), *v = xmalloc(strlen(rawv) + 1);
		if (pct_decode(tok, k, true) < 0 || pct_decode(rawv, v, true) < 0) {
			snprintf(msg, mlen, "bad percent-encoding in '%.200s'", tok);
			err = msg;
		} else {
			err = rule_set_key(r, k, v, msg, mlen);
		}
		free(k);
		free(v);
	}
	free(q);
	if (!err && !r->path) {
		snprintf(msg, mlen, "missing key 'path'");
		err = msg;
	}
	if (err) {
		rule_free(r);
		return err;
	}

	pthread_mutex_lock(&g_mu);
	struct rule **pp = &g_rules;
	while (*pp && strcmp((*pp)->path, r->path))
		pp = &(*pp)->next;
	if (*pp) {
		struct rule *old = *pp;
		r->next = old->next;
		*pp = r;
		rule_free(old);
	} else {
		*pp = r;
	}
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/*
 * Copies the rule for path into *out, with its own strings (caller frees
 * them with rule_strings_free); counts down count=K rules.
 */
static bool rule_take(const char *path, struct rule *out)
{
	bool found = false;

	pthread_mutex_lock(&g_mu);
	struct rule **pp = &g_rules;
	while (*pp && strcmp((*pp)->path, path))
		pp = &(*pp)->next;
	if (*pp) {
		struct rule *r = *pp;
		*out = *r;
		out->next = NULL;
		out->path = NULL;
		out->redirect = dup_or_null(r->redirect);
		out->serve = dup_or_null(r->serve);
		out->content_type = dup_or_null(r->content_type);
		out->content_encoding = dup_or_null(r->content_encoding);
		found = true;
		if (r->count && --r->count == 0) {
			*pp = r->next;
			rule_free(r);
		}
	}
	pthread_mutex_unlock(&g_mu);
	return found;
}

/* ---- files ------------------------------------------------------------ */

static bool path_is_safe(const char *p)
{
	const char *s = p;
	while (*s) {
		while (*s == '/')
			s++;
		const char *e = strchrnul(s, '/');
		if (e - s == 2 && s[0] == '.' && s[1] == '.')
			return false;
		s = e;
	}
	return true;
}

/* Opens a regular file under the root, refusing ".." and symlinks that lead outside. */
static int open_under_root(const char *path, struct stat *st)
{
	if (!path_is_safe(path))
		return -1;
	size_t need = g_root_len + strlen(path) + 2;
	char *full = xmalloc(need);
	snprintf(full, need, "%s/%s", g_root, path);
	char *real = realpath(full, NULL);
	free(full);
	if (!real)
		return -1;
	bool inside = g_root_len == 1 ||
		      (!strncmp(real, g_root, g_root_len) && (real[g_root_len] == '/' || !real[g_root_len]));
	/* O_NONBLOCK: opening a FIFO must not block the thread forever. */
	int fd = inside ? open(real, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) : -1;
	free(real);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- responses ----------------------------------------------------- */

/*
 * A short response (error, control, forced status).  Returns 0 on success.
 * The caller logs; mark_finishing is done here because only this function
 * knows which write is the last.
 */
static int send_simple(struct conn *c, int status, bool want_close, const char *extra, const char *ctype,
		       const char *body, size_t blen, bool head)
{
	bool bodiless = status == 204 || status == 304;

	begin_headers(c, status, want_close);
	if (extra)
		hput(&c->h, "%s", extra);
	if (!bodiless)
		hput(&c->h, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, blen);
	hput(&c->h, "\r\n");
	c->lstatus = status;

	bool has_body = !head && !bodiless && blen > 0;
	if (!has_body)
		mark_finishing(c);
	if (send_all(c, c->h.b, c->h.n, has_body ? MSG_MORE : 0, NULL) < 0)
		return -1;
	if (has_body) {
		mark_finishing(c);
		if (send_all(c, body, blen, 0, &c->lbytes) < 0)
			return -1;
	}
	return 0;
}

static enum next simple_logged(struct conn *c, int status, bool want_close, const char *extra, bool head)
{
	char body[128];
	int n = snprintf(body, sizeof body, "%d %s\n", status, reason(status));
	int r = send_simple(c, status, want_close, extra, "text/plain", body, (size_t)n, head);
	log_finish(c, r == 0);
	if (r < 0)
		return NEXT_DROP;
	return want_close ? NEXT_CLOSE : NEXT_KEEP;
}

static uint64_t in_span(uint64_t v, uint64_t start, uint64_t end)
{
	return v >= start && v < end ? v : NONE;
}

static uint64_t clip_at(uint64_t lim, uint64_t ev, uint64_t pos)
{
	return ev > pos && ev < lim ? ev : lim;
}

/*
 * A short answer (404, 416, 500, forced status, redirect) after the rule's
 * delay_ms, which applies to every kind of answer.  The status is set
 * before the delay so that a delay cut short still logs what was coming.
 */
static enum next answer_short(struct conn *c, const struct rule *r, int status, bool want_close,
			      const char *extra, bool head)
{
	enum next nx;

	c->lstatus = status;
	if (r->delay_ms && conn_sleep(c, r->delay_ms) < 0) {
		log_finish(c, false);
		nx = NEXT_DROP;
	} else {
		nx = simple_logged(c, status, want_close, extra, head);
	}
	return nx;
}

/*
 * What a 200/206 file answer sends, settled before its headers go out.
 * The body is file bytes [start, end) or, with gzip, their compressed
 * form.  Offset rules count body bytes from `start` on either way, so they
 * fire inside [start, start + blen): file offsets for plain bodies,
 * positions in the compressed stream for gzip ones.
 */
struct file_answer {
	int fd;
	uint64_t start, end; /* the file span answered */
	unsigned char *gz;   /* owned: the span gzip-compressed, or NULL */
	uint64_t blen;       /* body bytes, without chunk framing */
	bool chunked;
};

/*
 * Compresses file bytes [start, end) into one gzip member, as a server
 * compressing on the fly would send it.  Level 1: any valid stream will do,
 * and a 64 MiB body must not take long under sanitizers.  Returns 0 with
 * fa->gz and fa->blen set; -1 when the span is over GZIP_SPAN_MAX, the file
 * shrank or zlib failed.
 */
static int gzip_span(struct conn *c, struct file_answer *fa)
{
	z_stream zs;
	unsigned char *out = NULL;
	uint64_t pos = fa->start;
	bool live = false;
	int rc = -1;

	memset(&zs, 0, sizeof zs);
	if (fa->end - fa->start > GZIP_SPAN_MAX)
		goto out;
	/* windowBits 15 + 16 = 31: a gzip wrapper, not zlib's */
	if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		goto out;
	live = true;
	/* an output buffer of the bound's size never fills, so deflate never waits for room */
	uLong bound = deflateBound(&zs, (uLong)(fa->end - fa->start));
	out = xmalloc(bound);
	zs.next_out = out;
	zs.avail_out = (uInt)bound;
	if (!c->body)
		c->body = xmalloc(CHUNK);
	for (;;) {
		if (zs.avail_in == 0 && pos < fa->end) {
			size_t want = fa->end - pos > CHUNK ? CHUNK : (size_t)(fa->end - pos);
			ssize_t n = pread(fa->fd, c->body, want, (off_t)pos);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				goto out;
			zs.next_in = c->body;
			zs.avail_in = (uInt)n;
			pos += (uint64_t)n;
		}
		int zr = deflate(&zs, pos == fa->end ? Z_FINISH : Z_NO_FLUSH);
		if (zr == Z_STREAM_END)
			break;
		/* with input and room deflate always progresses: anything else is a failure */
		if (zr != Z_OK)
			goto out;
	}
	fa->gz = out;
	fa->blen = zs.total_out;
	out = NULL;
	rc = 0;
out:
	if (live)
		deflateEnd(&zs);
	free(out);
	return rc;
}

/* XORs the bytes of p, body offsets pos.., that lie at corrupt_from or after. */
static void corrupt(unsigned char *p, size_t n, uint64_t pos, uint64_t from)
{
	if (from != NONE && pos + n > from)
		for (size_t i = from > pos ? (size_t)(from - pos) : 0; i < n; i++)
			p[i] ^= 0x5A;
}

/*
 * Sends one piece of a body, as a chunk of its own when chunked.  Only
 * payload bytes count for the log.  The chunk's CRLF goes out without
 * MSG_MORE so that a stall or a reset after it finds the whole chunk sent.
 */
static int send_piece(struct conn *c, const unsigned char *p, size_t n, bool chunked)
{
	char hdr[32];
	int rc;

	if (chunked) {
		int hl = snprintf(hdr, sizeof hdr, "%zx\r\n", n);
		rc = send_all(c, hdr, (size_t)hl, MSG_MORE, NULL);
		if (rc == 0)
			rc = send_all(c, p, n, MSG_MORE, &c->lbytes);
		if (rc == 0)
			rc = send_all(c, "\r\n", 2, 0, NULL);
	} else {
		rc = send_all(c, p, n, 0, &c->lbytes);
	}
	return rc;
}

/*
 * Sends the body of fa.  Offset events only fire when their offset lies
 * inside the span sent; a stall at the same offset as a reset/truncate
 * happens first.  Pieces end at event offsets, so with chunked framing a
 * truncation or reset falls between whole chunks, and the last-chunk is
 * what never comes.
 */
static enum body_result send_body(struct conn *c, const struct file_answer *fa, const struct rule *r)
{
	uint64_t start = fa->start, end = fa->start + fa->blen;
	uint64_t stall = r->stall_ms ? in_span(r->stall_at, start, end) : NONE;
	uint64_t reset = in_span(r->reset_at, start, end);
	uint64_t trunc = in_span(r->truncate_at, start, end);
	uint64_t step = fa->chunked ? HTTP_CHUNK_MAX : CHUNK;
	uint64_t pos = start;
	uint64_t t0 = mono_ms();
	enum body_result res = BODY_OK;

	/* --rate: a CDN's per-connection cap, in pieces of 1/16 s */
	if (g_rate && step > g_rate / 16)
		step = g_rate / 16 > 1024 ? g_rate / 16 : 1024;

	if (!c->body)
		c->body = xmalloc(CHUNK);
	while (pos < end) {
		if (pos == stall) {
			stall = NONE;
			if (conn_sleep(c, r->stall_ms) < 0) {
				res = BODY_FAIL;
				goto out;
			}
		}
		if (pos == reset) {
			res = BODY_RESET;
			goto out;
		}
		if (pos == trunc) {
			res = BODY_TRUNC;
			goto out;
		}

		uint64_t lim = end - pos > step ? pos + step : end;
		lim = clip_at(lim, stall, pos);
		lim = clip_at(lim, reset, pos);
		lim = clip_at(lim, trunc, pos);
		size_t n = (size_t)(lim - pos);
		if (fa->gz) {
			/* a copy, so that corrupt_from leaves fa alone */
			memcpy(c->body, fa->gz + (pos - start), n);
		} else {
			ssize_t got = pread(fa->fd, c->body, n, (off_t)pos);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				res = BODY_FAIL; /* the file shrank: the promised length cannot be kept */
				goto out;
			}
			n = (size_t)got;
		}
		corrupt(c->body, n, pos, r->corrupt_from);
		if (!fa->chunked && pos + n == end)
			mark_finishing(c);
		if (send_piece(c, c->body, n, fa->chunked) < 0) {
			res = BODY_FAIL;
			goto out;
		}
		pos += n;
		if (g_rate && pos < end) {
			uint64_t due = t0 + (pos - start) * 1000 / g_rate, now = mono_ms();
			if (due > now && conn_sleep(c, due - now) < 0) {
				res = BODY_FAIL;
				goto out;
			}
		}
	}
	if (fa->chunked) {
		mark_finishing(c);
		if (send_all(c, "0\r\n\r\n", 5, 0, NULL) < 0)
			res = BODY_FAIL;
	}
out:
	return res;
}

/* Clients that show pages (and captive-portal checks) go by the type; to seamfs all else is bytes. */
static const char *default_type(const char *name)
{
	size_t n = strlen(name);
	bool html = (n >= 5 && !strcasecmp(name + n - 5, ".html")) ||
		    (n >= 4 && !strcasecmp(name + n - 4, ".htm"));
	return html ? "text/html; charset=utf-8" : "application/octet-stream";
}

/* The delimiter and headers of part i of a multipart answer into sb. */
static void mp_part_head(struct sbuf *sb, const char *bnd, int i, const char *ctype, uint64_t a,
			 uint64_t b, uint64_t total)
{
	(void)i; /* every part opens with CRLF, the first too (nginx's way) */
	sb_printf(sb, "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %" PRIu64 "-%" PRIu64
		  "/%" PRIu64 "\r\n\r\n", bnd, ctype, a, b, total);
}

/*
 * Answers a request for two ranges [a[i], b[i]] as nginx does: 206 with a
 * multipart/byteranges body, each part with its Content-Type and
 * Content-Range, after the rule's delay. multipart= breaks it on purpose:
 * another boundary in the body than in the header, a second part that
 * overlaps the first (from the first's last byte), or no second part.
 * Only file bytes count in the log.
 */
static enum next serve_multipart(struct conn *c, struct req *rq, const struct rule *r, int fd,
				 const struct stat *st, const char *name, bool want_close,
				 const uint64_t a_in[2], const uint64_t b_in[2], const char *validators)
{
	uint64_t size = (uint64_t)st->st_size, a[2] = { a_in[0], a_in[1] }, b[2] = { b_in[0], b_in[1] };
	const char *ctype = r->content_type ? r->content_type : default_type(name);
	const char *bnd = "00000000000000000042", *sent_bnd = r->multipart == MP_BOUNDARY
		? "00000000000000000043" : bnd;
	int nparts = r->multipart == MP_MISSING ? 1 : 2;
	struct sbuf heads[2] = { { 0 }, { 0 } }, tail = { 0 };
	enum next nx = NEXT_DROP;
	uint64_t clen = 0, sent = 0, t0 = mono_ms(), step = CHUNK;

	/* --rate: paced as send_body paces */
	if (g_rate && step > g_rate / 16)
		step = g_rate / 16 > 1024 ? g_rate / 16 : 1024;
	if (r->multipart == MP_OVERLAP)
		a[1] = b[0];
	for (int i = 0; i < nparts; i++) {
		mp_part_head(&heads[i], sent_bnd, i, ctype, a[i], b[i], size);
		clen += heads[i].n + (b[i] - a[i] + 1);
	}
	sb_printf(&tail, "\r\n--%s--\r\n", sent_bnd);
	clen += tail.n;
	begin_headers(c, 206, want_close);
	hput(&c->h, "Content-Type: multipart/byteranges; boundary=%s\r\n", bnd);
	hput(&c->h, "Content-Length: %" PRIu64 "\r\nAccept-Ranges: bytes\r\n%s\r\n", clen,
	     validators);
	c->lstatus = 206;
	if (r->delay_ms && conn_sleep(c, r->delay_ms) < 0) {
		log_finish(c, false);
		goto out;
	}
	if (send_all(c, c->h.b, c->h.n, rq->head ? 0 : MSG_MORE, NULL) < 0) {
		log_finish(c, false);
		goto out;
	}
	if (!c->body)
		c->body = xmalloc(CHUNK);
	for (int i = 0; !rq->head && i < nparts; i++) {
		if (send_all(c, heads[i].p, heads[i].n, MSG_MORE, NULL) < 0) {
			log_finish(c, false);
			goto out;
		}
		for (uint64_t pos = a[i]; pos <= b[i];) {
			size_t n = b[i] + 1 - pos > step ? step : (size_t)(b[i] + 1 - pos);
			ssize_t got = pread(fd, c->body, n, (off_t)pos);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0 || send_all(c, c->body, (size_t)got, MSG_MORE, &c->lbytes) < 0) {
				log_finish(c, false);
				goto out;
			}
			pos += (uint64_t)got;
			sent += (uint64_t)got;
			uint64_t due = t0 + (g_rate ? sent * 1000 / g_rate : 0), now = mono_ms();
			if (g_rate && due > now && conn_sleep(c, due - now) < 0) {
				log_finish(c, false);
				goto out;
			}
		}
	}
	mark_finishing(c);
	if (!rq->head && send_all(c, tail.p, tail.n, 0, NULL) < 0) {
		log_finish(c, false);
		goto out;
	}
	log_finish(c, true);
	nx = want_close ? NEXT_CLOSE : NEXT_KEEP;
out:
	free(heads[0].p);
	free(heads[1].p);
	free(tail.p);
	return nx;
}

/*
 * Answers a GET or HEAD from fd, the file that `name` names (the request's
 * path, or the rule's serve=): 200, 206 or 416, or 500 if gzip fails.
 */
static enum next serve_file(struct conn *c, struct req *rq, const struct rule *r, int fd,
			    const struct stat *st, const char *name, bool want_close)
{
	uint64_t size = (uint64_t)st->st_size;
	uint64_t a = 0, b = 0;
	int64_t adv_s = (int64_t)size + r->length_delta;
	uint64_t adv = adv_s < 0 ? 0 : (uint64_t)adv_s; /* a negative length would only be noise */
	struct file_answer fa = { .fd = fd, .end = size, .chunked = r->framing == FR_CHUNKED };
	enum range_result rr = RANGE_NONE;
	enum body_result br = BODY_OK;
	char lm[64], validators[192];
	int status = 200;
	bool has_body;
	enum next nx = NEXT_DROP;

	if (rq->range && !r->no_range)
		rr = parse_range(rq->range, size, &a, &b);
	http_date(st->st_mtime, lm, sizeof lm);
	snprintf(validators, sizeof validators, "Last-Modified: %s\r\nETag: \"%" PRIx64 "-%llx\"\r\n",
		 lm, size, (unsigned long long)st->st_mtime);
	uint64_t ma[2], mb[2];
	bool shaped = r->reset_at != NONE || r->truncate_at != NONE || r->stall_at != NONE ||
		      r->corrupt_from != NONE || r->status_after != NONE || r->cap ||
		      r->length_delta || r->clen_delta || r->content_range != CR_NORMAL ||
		      r->framing != FR_LENGTH || r->content_encoding;
	if (rq->range && !r->no_range && r->multipart != MP_IGNORE &&
	    parse_two_ranges(rq->range, size, ma, mb)) {
		if (r->multipart != MP_SINGLE && !(r->multipart == MP_AUTO && shaped)) {
			nx = serve_multipart(c, rq, r, fd, st, name, want_close, ma, mb, validators);
			goto out;
		}
		/* one range where two were asked: the first (RFC 9110 allows it) */
		rr = RANGE_OK;
		a = ma[0];
		b = mb[0];
	}

	if (rr == RANGE_UNSAT) {
		char extra[512];
		snprintf(extra, sizeof extra, "Content-Range: bytes */%" PRIu64 "\r\nAccept-Ranges: bytes\r\n%s",
			 adv, validators);
		nx = answer_short(c, r, 416, want_close, extra, rq->head);
		goto out;
	}
	if (rr == RANGE_OK) {
		status = 206;
		fa.start = a;
		fa.end = b + 1;
		/* cap: a legal short answer, which the Content-Range below describes */
		if (r->cap && r->cap < fa.end - fa.start)
			fa.end = fa.start + r->cap;
	}
	fa.blen = fa.end - fa.start;
	if (r->content_encoding && !strcmp(r->content_encoding, "gzip") && gzip_span(c, &fa) < 0) {
		nx = answer_short(c, r, 500, want_close, NULL, rq->head);
		goto out;
	}
	/* Without a length the body ends with the connection; with a lying length
	 * the stream framing is broken, so the connection ends after it too. */
	if (r->framing == FR_CLOSE ||
	    (r->framing == FR_LENGTH && status == 200 && !rq->head && r->length_delta != 0) ||
	    (r->framing == FR_LENGTH && status == 206 && !rq->head && r->clen_delta != 0))
		want_close = true;

	begin_headers(c, status, want_close);
	hput(&c->h, "Content-Type: %s\r\n", r->content_type ? r->content_type : default_type(name));
	if (r->content_encoding)
		hput(&c->h, "Content-Encoding: %s\r\n", r->content_encoding);
	if (r->framing == FR_LENGTH) {
		int64_t len = (int64_t)fa.blen + (status == 200 ? r->length_delta : 0) +
			      (status == 206 ? r->clen_delta : 0);
		hput(&c->h, "Content-Length: %" PRIu64 "\r\n", len < 0 ? 0 : (uint64_t)len);
	} else if (fa.chunked) {
		hput(&c->h, "Transfer-Encoding: chunked\r\n");
	}
	if (status == 206) {
		switch (r->content_range) {
		case CR_NORMAL:
			hput(&c->h, "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", fa.start,
			     fa.end - 1, adv);
			break;
		case CR_MISSING:
			break;
		case CR_SHIFT:
			hput(&c->h, "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n",
			     fa.start + 1, fa.end, adv);
			break;
		case CR_TOTAL:
			hput(&c->h, "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", fa.start,
			     fa.end - 1, size + 1000);
			break;
		}
	}
	if (!r->no_range)
		hput(&c->h, "Accept-Ranges: bytes\r\n");
	hput(&c->h, "%s\r\n", validators);
	c->lstatus = status;

	if (r->delay_ms && conn_sleep(c, r->delay_ms) < 0) {
		log_finish(c, false);
		goto out;
	}
	/* a chunked body always has at least its last-chunk */
	has_body = !rq->head && (fa.blen > 0 || fa.chunked);
	if (!has_body)
		mark_finishing(c);
	if (send_all(c, c->h.b, c->h.n, has_body ? MSG_MORE : 0, NULL) < 0) {
		log_finish(c, false);
		goto out;
	}
	if (has_body)
		br = send_body(c, &fa, r);
	switch (br) {
	case BODY_OK:
		log_finish(c, true);
		nx = want_close ? NEXT_CLOSE : NEXT_KEEP;
		break;
	case BODY_RESET:
		log_finish(c, false);
		wait_drained(c);
		close_reset(c);
		nx = NEXT_GONE;
		break;
	case BODY_TRUNC:
		log_finish(c, false);
		close_graceful(c);
		nx = NEXT_GONE;
		break;
	case BODY_FAIL:
		log_finish(c, false);
		nx = NEXT_DROP;
		break;
	}
out:
	free(fa.gz);
	return nx;
}

/*
 * --index: a GET of a directory under the root answers a page of links to
 * its regular files (symlinks followed, dot files left out), as nginx's
 * autoindex does, for clients that list by parsing one (rclone's http
 * backend). Returns false when path is no such directory.
 */
static bool serve_index(struct conn *c, struct req *rq, const char *path, bool want_close,
			enum next *nx)
{
	struct sbuf page = { 0 };
	struct stat st;
	size_t need = g_root_len + strlen(path) + 2;
	char *full = xmalloc(need), *real = NULL;
	DIR *d = NULL;
	bool ok = false;

	snprintf(full, need, "%s/%s", g_root, path);
	if (!g_index || !path_is_safe(path) || !(real = realpath(full, NULL)) ||
	    (g_root_len > 1 && (strncmp(real, g_root, g_root_len) ||
				(real[g_root_len] != '/' && real[g_root_len]))) ||
	    stat(real, &st) < 0 ||
	    !S_ISDIR(st.st_mode) || !(d = opendir(real)))
		goto out;
	sb_printf(&page, "<html><body>\n");
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		sb_write(&page, "<a href=\"", 9);
		sb_pct_encode_path(&page, e->d_name);
		sb_write(&page, "\">", 2);
		sb_pct_encode_path(&page, e->d_name);
		sb_write(&page, "</a>\n", 5);
	}
	sb_printf(&page, "</body></html>\n");
	int r = send_simple(c, 200, want_close, NULL, "text/html", page.p, page.n, rq->head);
	log_finish(c, r == 0);
	*nx = r < 0 ? NEXT_DROP : want_close ? NEXT_CLOSE : NEXT_KEEP;
	ok = true;
out:
	if (d)
		closedir(d);
	free(real);
	free(full);
	free(page.p);
	return ok;
}

static enum next serve_get(struct conn *c, struct req *rq, bool want_close)
{
	struct rule r;
	struct stat st;
	struct sbuf extra = { 0 };
	const char *name;
	int fd = -1;
	enum next nx;

	if (!rule_take(rq->path, &r))
		rule_init(&r);
	/* --delay-ms: a distant origin, one round trip before every answer's
	 * first byte; it adds to the rule's own delay, so both are one wait */
	r.delay_ms = r.delay_ms > UINT64_MAX - g_delay_ms ? UINT64_MAX : r.delay_ms + g_delay_ms;

	if (r.status && r.status_after != NONE) {
		/* "5xx after N bytes": a response that would carry byte N ends
		 * just before it (FIN); a request from N on gets the status */
		unsigned long long from = 0;
		if (rq->range && sscanf(rq->range, "bytes=%llu-", &from) != 1)
			from = 0;
		if ((uint64_t)from < r.status_after) {
			r.status = 0;
			if (r.truncate_at == NONE || r.truncate_at > r.status_after)
				r.truncate_at = r.status_after;
		}
	}
	if (r.redirect || r.status) {
		int status = r.status ? r.status : 302;
		if (r.redirect) {
			if (status < 300 || status > 399)
				status = 302;
			sb_write(&extra, "Location: ", 10);
			if (r.redirect[0] == '/')
				sb_pct_encode_path(&extra, r.redirect);
			else
				sb_write(&extra, r.redirect, strlen(r.redirect));
			sb_write(&extra, "\r\n", 2);
		} else if (status == 401) {
			sb_printf(&extra, "WWW-Authenticate: Basic realm=\"seam-origin\"\r\n");
		}
		nx = answer_short(c, &r, status, want_close, extra.p, rq->head);
		goto out;
	}

	/* serve= swaps the file and nothing else: ranges and every other key apply to it */
	name = r.serve ? r.serve : rq->path;
	fd = open_under_root(name, &st);
	if (fd < 0 && serve_index(c, rq, name, want_close, &nx))
		goto out;
	if (fd < 0)
		nx = answer_short(c, &r, 404, want_close, NULL, rq->head);
	else
		nx = serve_file(c, rq, &r, fd, &st, name, want_close);
out:
	if (fd >= 0)
		close(fd);
	free(extra.p);
	rule_strings_free(&r);
	return nx;
}

/* ---- control requests ---------------------------------------------- */

static enum next ctl_reply(struct conn *c, int status, bool want_close, const char *ctype, const char *body,
			   size_t len)
{
	if (send_simple(c, status, want_close, "Cache-Control: no-store\r\n", ctype, body, len, false) < 0)
		return NEXT_DROP;
	return want_close ? NEXT_CLOSE : NEXT_KEEP;
}

static enum next ctl_text(struct conn *c, int status, bool want_close, const char *msg)
{
	char body[512];
	int n = snprintf(body, sizeof body, "%s\n", msg);
	if (n < 0 || (size_t)n >= sizeof body)
		n = (int)sizeof body - 1;
	return ctl_reply(c, status, want_close, "text/plain", body, (size_t)n);
}

/* Asks the main thread (which owns the listener) to close or reopen it, and waits for the result. */
static int set_listening(bool on)
{
	int err = 0;

	pthread_mutex_lock(&g_mu);
	g_want_listen = on;
	uint64_t mine = ++g_listen_req;
	pthread_mutex_unlock(&g_mu);
	while (write(g_wake_wr, "w", 1) < 0 && errno == EINTR)
		;

	uint64_t deadline = mono_ms() + CTL_WAIT_MS;
	pthread_mutex_lock(&g_mu);
	while (g_listen_done < mine && !g_stopping) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			break;
		cv_wait_ms(deadline - now);
	}
	if (g_listen_done < mine)
		err = ETIMEDOUT;
	else if (g_listening != on)
		err = g_listen_errno ? g_listen_errno : EIO;
	pthread_mutex_unlock(&g_mu);
	return err;
}

/*
 * Shuts down every connection that has carried a file request, except the
 * caller's.  Control-only connections survive: they are how a test gets
 * back in with /_ctl/up.  The owning threads see EOF/EPIPE/POLLHUP and end.
 */
static int drop_connections(struct conn *self)
{
	int n = 0;
	pthread_mutex_lock(&g_mu);
	for (struct conn *c = g_conns; c; c = c->next) {
		if (c != self && c->counted && c->fd_live) {
			shutdown(c->fd, SHUT_RDWR);
			n++;
		}
	}
	pthread_mutex_unlock(&g_mu);
	return n;
}

static void clear_all(void)
{
	pthread_mutex_lock(&g_mu);
	while (g_rules) {
		struct rule *r = g_rules;
		g_rules = r->next;
		rule_free(r);
	}
	for (size_t i = 0; i < g_log_len; i++)
		logent_free(&g_log[(g_log_head + i) % g_log_max]);
	g_log_head = g_log_len = 0;
	g_log_dropped = 0;
	g_conn_total = 0;
	g_conn_max = g_conn_current;
	pthread_mutex_unlock(&g_mu);
}

static char *log_json(size_t *len)
{
	struct sbuf sb = { 0 };
	uint64_t deadline = mono_ms() + LOG_SETTLE_MS;

	pthread_mutex_lock(&g_mu);
	while (g_finishing > 0 && !g_stopping) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			break;
		cv_wait_ms(deadline - now);
	}
	sb_write(&sb, "{\"requests\":[", 13);
	for (size_t i = 0; i < g_log_len; i++) {
		const struct logent *e = &g_log[(g_log_head + i) % g_log_max];
		sb_write(&sb, i ? ",{\"method\":" : "{\"method\":", i ? 11 : 10);
		sb_json_str(&sb, e->method);
		sb_write(&sb, ",\"path\":", 8);
		sb_json_str(&sb, e->path);
		sb_write(&sb, ",\"range\":", 9);
		if (e->range)
			sb_json_str(&sb, e->range);
		else
			sb_write(&sb, "null", 4);
		sb_printf(&sb, ",\"status\":%d,\"bytes_sent\":%" PRIu64 ",\"conn\":%" PRIu64 ",\"complete\":%s}",
			  e->status, e->bytes, e->conn, e->complete ? "true" : "false");
	}
	sb_printf(&sb,
		  "],\"connections_total\":%" PRIu64 ",\"connections_current\":%" PRIu64
		  ",\"max_concurrent\":%" PRIu64 ",\"log_dropped\":%" PRIu64 "}\n",
		  g_conn_total, g_conn_current, g_conn_max, g_log_dropped);
	pthread_mutex_unlock(&g_mu);
	*len = sb.n;
	return sb.p;
}

static enum next serve_ctl(struct conn *c, struct req *rq, bool want_close)
{
	char msg[512];
	const char *p = rq->path + 5; /* after "/_ctl" */

	if (g_verbose)
		fprintf(stderr, "seam-origin: conn=%" PRIu64 " %s %s%s%s\n", c->id, rq->method, rq->path,
			rq->query ? "?" : "", rq->query ? rq->query : "");
	if (rq->head)
		return ctl_text(c, 405, want_close, "control requests must use GET");
	if (!strcmp(p, "/rule")) {
		const char *err = rule_from_query(rq->query, msg, sizeof msg);
		return err ? ctl_text(c, 400, want_close, err) : ctl_text(c, 200, want_close, "ok");
	}
	if (!strcmp(p, "/clear")) {
		clear_all();
		return ctl_text(c, 200, want_close, "ok");
	}
	if (!strcmp(p, "/down") || !strcmp(p, "/up")) {
		bool drop = false;
		if (rq->query && *rq->query) {
			if (p[1] != 'd' || (strcmp(rq->query, "drop=1") && strcmp(rq->query, "drop=0")))
				return ctl_text(c, 400, want_close, "only /_ctl/down takes a query: 'drop' = 0 or 1");
			drop = !strcmp(rq->query, "drop=1");
		}
		int err = set_listening(p[1] == 'u');
		if (!err && drop)
			drop_connections(c);
		if (!err)
			return ctl_text(c, 200, want_close, "ok");
		snprintf(msg, sizeof msg, "listener change failed: %s", strerror(err));
		return ctl_text(c, 500, want_close, msg);
	}
	if (!strcmp(p, "/log")) {
		size_t len;
		char *json = log_json(&len);
		enum next nx = ctl_reply(c, 200, want_close, "application/json", json, len);
		free(json);
		return nx;
	}
	return ctl_text(c, 404, want_close, "unknown control request");
}

/* ---- request parsing --------------------------------------------- */

/* Index just past the blank line ending the head, 0 if not there yet. */
static size_t find_head_end(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '\n')
			continue;
		if (i + 1 < n && s[i + 1] == '\n')
			return i + 2;
		if (i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static enum read_result read_head(struct conn *c, size_t *hlen)
{
	for (;;) {
		/* Stray CRLFs between requests are allowed (RFC 7230 3.5). */
		size_t skip = 0;
		while (skip < c->inlen && (c->in[skip] == '\r' || c->in[skip] == '\n'))
			skip++;
		if (skip) {
			memmove(c->in, c->in + skip, c->inlen - skip);
			c->inlen -= skip;
		}
		size_t end = find_head_end(c->in, c->inlen);
		if (end) {
			*hlen = end;
			return RD_OK;
		}
		if (c->inlen == sizeof c->in)
			return RD_TOOBIG;
		int r = conn_fill(c);
		if (r == 0)
			return RD_EOF;
		if (r < 0)
			return RD_ERR;
	}
}

static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!is_tchar((unsigned char)*s))
			return false;
	return true;
}

static bool has_token(const char *list, const char *tok)
{
	size_t tl = strlen(tok);
	const char *s = list;
	while (*s) {
		s = skip_ows(s);
		const char *e = strchrnul(s, ',');
		const char *t = e;
		while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
			t--;
		if ((size_t)(t - s) == tl && !strncasecmp(s, tok, tl))
			return true;
		s = *e ? e + 1 : e;
	}
	return false;
}

/*
 * Moves the head out of the input buffer and parses it in place.
 * Returns 0, or the status to fail the request with (400, 505).
 */
static int parse_head(struct conn *c, size_t hlen, struct req *rq)
{
	memset(rq, 0, sizeof *rq);
	memcpy(c->head, c->in, hlen);
	c->head[hlen] = 0;
	memmove(c->in, c->in + hlen, c->inlen - hlen);
	c->inlen -= hlen;
	rq->method = "";
	rq->path = "";
	rq->want_close = true;
	c->path[0] = 0;

	if (memchr(c->head, 0, hlen))
		return 400;

	char *line = c->head;
	char *nl = strchr(line, '\n');
	char *next = nl + 1;
	*nl = 0;
	if (nl > line && nl[-1] == '\r')
		nl[-1] = 0;

	char *sp1 = strchr(line, ' ');
	if (!sp1)
		return 400;
	*sp1 = 0;
	if (!is_token(line) || strlen(line) > 32)
		return 400;
	rq->method = line;
	rq->head = !strcmp(line, "HEAD");
	char *target = sp1 + 1;
	char *sp2 = strchr(target, ' ');
	if (!sp2)
		return 400;
	*sp2 = 0;
	const char *ver = sp2 + 1;
	if (!*target)
		return 400;
	for (const char *t = target; *t; t++)
		if ((unsigned char)*t <= 0x20 || *t == 0x7f)
			return 400;
	if (strncmp(ver, "HTTP/", 5) || ver[5] < '0' || ver[5] > '9' || ver[6] != '.' ||
	    ver[7] < '0' || ver[7] > '9' || ver[8])
		return 400;
	if (ver[5] != '1')
		return 505;
	rq->want_close = ver[7] == '0';

	bool have_clen = false;
	for (line = next; *line; line = next) {
		nl = strchr(line, '\n');
		next = nl + 1;
		*nl = 0;
		if (nl > line && nl[-1] == '\r')
			nl[-1] = 0;
		if (!*line)
			break;
		if (*line == ' ' || *line == '\t')
			return 400; /* obsolete line folding */
		char *colon = strchr(line, ':');
		if (!colon)
			return 400;
		*colon = 0;
		if (!is_token(line))
			return 400;
		char *v = (char *)skip_ows(colon + 1);
		char *ve = v + strlen(v);
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			*--ve = 0;

		if (!strcasecmp(line, "Connection")) {
			if (has_token(v, "close"))
				rq->want_close = true;
		} else if (!strcasecmp(line, "Range")) {
			rq->range = v;
		} else if (!strcasecmp(line, "Transfer-Encoding")) {
			rq->chunked = true;
		} else if (!strcasecmp(line, "Content-Length")) {
			uint64_t n;
			if (!parse_u64(v, &n) || (have_clen && n != rq->clen))
				return 400;
			have_clen = true;
			rq->clen = n;
		}
	}

	/* Absolute-form targets (as proxies send them) are reduced to their path. */
	char *p = target;
	if (!strncasecmp(p, "http://", 7) || !strncasecmp(p, "https://", 8)) {
		p = strchr(p + (p[4] == ':' ? 7 : 8), '/');
		if (!p) {
			strcpy(c->path, "/");
			rq->path = c->path;
			return 0;
		}
	}
	if (*p != '/')
		return 400;
	char *hash = strchr(p, '#');
	if (hash)
		*hash = 0;
	char *q = strchr(p, '?');
	if (q) {
		*q = 0;
		rq->query = q + 1;
	}
	if (pct_decode(p, c->path, false) < 0)
		return 400;
	rq->path = c->path;
	return 0;
}

/* Keeps request framing intact when a GET/HEAD/other carries a body. */
static int discard_body(struct conn *c, uint64_t n)
{
	while (n) {
		if (c->inlen == 0) {
			int r = conn_fill(c);
			if (r <= 0)
				return -1;
		}
		size_t take = n < c->inlen ? (size_t)n : c->inlen;
		memmove(c->in, c->in + take, c->inlen - take);
		c->inlen -= take;
		n -= take;
	}
	return 0;
}

static enum next handle_request(struct conn *c, struct req *rq)
{
	bool ctl = !strncmp(rq->path, "/_ctl/", 6);
	bool want_close = rq->want_close;

	if (!ctl) {
		count_conn(c);
		log_begin(c, rq->method, rq->path, rq->range);
	}
	if (rq->chunked || rq->clen > DISCARD_MAX) {
		want_close = true; /* framing unknown or body too large to skip: answer, then close */
	} else if (rq->clen && discard_body(c, rq->clen) < 0) {
		log_finish(c, false);
		return NEXT_DROP;
	}
	if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD")) {
		if (ctl)
			return ctl_text(c, 405, want_close, "control requests must use GET");
		return simple_logged(c, 405, want_close, "Allow: GET, HEAD\r\n", false);
	}
	if (ctl)
		return serve_ctl(c, rq, want_close);
	return serve_get(c, rq, want_close);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	enum next nx = NEXT_DROP;

	while (!g_stopping) {
		size_t hlen = 0;
		struct req rq;
		enum read_result rr = read_head(c, &hlen);

		if (rr == RD_EOF || rr == RD_ERR) {
			nx = NEXT_DROP;
			break;
		}
		if (rr == RD_TOOBIG) {
			count_conn(c);
			log_begin(c, "", "", NULL);
			nx = simple_logged(c, 431, true, NULL, false);
			break;
		}
		int bad = parse_head(c, hlen, &rq);
		if (bad) {
			count_conn(c);
			log_begin(c, rq.method, rq.path, NULL);
			nx = simple_logged(c, bad, true, NULL, false);
			break;
		}
		nx = handle_request(c, &rq);
		if (nx != NEXT_KEEP)
			break;
	}

	if (c->fd >= 0) {
		if (nx == NEXT_CLOSE)
			close_graceful(c);
		else
			conn_close_fd(c);
	}
	pthread_mutex_lock(&g_mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		g_conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->counted && !c->peer_gone)
		g_conn_current--;
	g_threads--;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
	free(c->body);
	free(c);
	return NULL;
}

/* ---- listener and main -------------------------------------------- */

static int open_listener(uint16_t port, uint16_t *bound, int *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t sl = sizeof sa;
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		*err = errno;
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*bound = ntohs(sa.sin_port);
	return fd;
}

static void spawn(int fd)
{
	struct conn *c = xmalloc(sizeof *c);
	pthread_attr_t attr;
	pthread_t t;
	int one = 1;

	memset(c, 0, offsetof(struct conn, in));
	c->fd = fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	pthread_mutex_lock(&g_mu);
	c->id = ++g_conn_ids;
	c->fd_live = true;
	c->next = g_conns;
	if (g_conns)
		g_conns->prev = c;
	g_conns = c;
	g_threads++;
	pthread_mutex_unlock(&g_mu);

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, conn_main, c) != 0) {
		pthread_mutex_lock(&g_mu);
		g_conns = c->next;
		if (c->next)
			c->next->prev = NULL;
		g_threads--;
		pthread_mutex_unlock(&g_mu);
		close(fd);
		free(c);
	}
	pthread_attr_destroy(&attr);
}

static void on_signal(int sig)
{
	int saved = errno;
	(void)sig;
	g_stopping = 1;
	if (write(g_stop_wr, "s", 1) < 0) {
		/* full pipe: it is readable already, which is all that matters */
	}
	errno = saved;
}

/*
 * SIGUSR1 reopens the listener: the way back after /_ctl/down when the
 * test no longer has a connection open to send /_ctl/up over.
 */
static void on_usr1(int sig)
{
	int saved = errno;
	(void)sig;
	g_sig_up = 1;
	if (write(g_wake_wr, "u", 1) < 0) {
		/* full pipe: the main loop wakes up anyway */
	}
	errno = saved;
}

/* Applies a /_ctl/down or /_ctl/up request; the listener fd is only ever touched here. */
static void apply_listen_change(int *lfd)
{
	char drain[64];
	int err = 0;

	while (read(g_wake_rd, drain, sizeof drain) > 0)
		;
	pthread_mutex_lock(&g_mu);
	if (g_sig_up) {
		g_sig_up = 0;
		g_want_listen = true;
	}
	bool want = g_want_listen;
	uint64_t req = g_listen_req;
	pthread_mutex_unlock(&g_mu);

	if (want && *lfd < 0) {
		uint16_t bound;
		*lfd = open_listener(g_port, &bound, &err);
	} else if (!want && *lfd >= 0) {
		close(*lfd);
		*lfd = -1;
	}
	pthread_mutex_lock(&g_mu);
	g_listening = *lfd >= 0;
	g_listen_errno = err;
	g_listen_done = req;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
}

static int write_port_file(const char *path, uint16_t port)
{
	size_t n = strlen(path) + 32;
	char *tmp = xmalloc(n);
	int rc = -1;

	snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "w");
	if (f) {
		bool ok = fprintf(f, "%u\n", port) > 0;
		ok = fclose(f) == 0 && ok;
		if (ok && rename(tmp, path) == 0)
			rc = 0;
		else
			unlink(tmp);
	}
	free(tmp);
	return rc;
}

static void usage(FILE *f)
{
	fputs("usage: seam-origin --root DIR [--port-file FILE] [--port N] [--verbose]\n"
	      "                   [--idle-ms N] [--log-max N] [--delay-ms N] [--rate BYTES]\n"
	      "                   [--index]\n"
	      "Serves DIR on 127.0.0.1 for tests; see tests/server/README.md.\n",
	      f);
}

static bool arg_u64(const char *name, const char *v, uint64_t max, uint64_t *out)
{
	if (!v || !parse_u64(v, out) || *out > max) {
		fprintf(stderr, "seam-origin: bad or missing value for %s\n", name);
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	const char *root = NULL, *port_file = NULL;
	uint64_t v;
	int pfd[2], wfd[2];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--root") && val) {
			root = val;
			i++;
		} else if (!strcmp(a, "--port-file") && val) {
			port_file = val;
			i++;
		} else if (!strcmp(a, "--port")) {
			if (!arg_u64(a, val, 65535, &v))
				return 2;
			g_port = (uint16_t)v;
			i++;
		} else if (!strcmp(a, "--idle-ms")) {
			if (!arg_u64(a, val, (uint64_t)INT64_MAX, &g_idle_ms))
				return 2;
			i++;
		} else if (!strcmp(a, "--delay-ms")) {
			if (!arg_u64(a, val, 86400000, &g_delay_ms))
				return 2;
			i++;
		} else if (!strcmp(a, "--rate")) {
			if (!arg_u64(a, val, (uint64_t)1 << 40, &g_rate))
				return 2;
			i++;
		} else if (!strcmp(a, "--log-max")) {
			if (!arg_u64(a, val, 100000000, &v))
				return 2;
			g_log_max = (size_t)v;
			i++;
		} else if (!strcmp(a, "--verbose")) {
			g_verbose = true;
		} else if (!strcmp(a, "--index")) {
			g_index = true;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "seam-origin: unexpected argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (!root) {
		usage(stderr);
		return 2;
	}
	struct stat st;
	g_root = realpath(root, NULL);
	if (!g_root || stat(g_root, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "seam-origin: --root %s: not a directory\n", root);
		return 2;
	}
	g_root_len = strlen(g_root);
	g_log = calloc(g_log_max ? g_log_max : 1, sizeof *g_log);
	if (!g_log) {
		fputs("seam-origin: out of memory\n", stderr);
		return 1;
	}

	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g_cv, &ca);
	pthread_condattr_destroy(&ca);

	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(wfd, O_CLOEXEC | O_NONBLOCK) < 0) {
		perror("seam-origin: pipe");
		return 1;
	}
	g_stop_rd = pfd[0];
	g_stop_wr = pfd[1];
	g_wake_rd = wfd[0];
	g_wake_wr = wfd[1];

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	int err = 0;
	int lfd = open_listener(g_port, &g_port, &err);
	if (lfd < 0) {
		fprintf(stderr, "seam-origin: cannot listen on 127.0.0.1:%u: %s\n", g_port, strerror(err));
		return 1;
	}
	if (port_file && write_port_file(port_file, g_port) < 0) {
		fprintf(stderr, "seam-origin: cannot write %s: %s\n", port_file, strerror(errno));
		return 1;
	}
	printf("PORT %u\n", g_port);
	fflush(stdout);

	/* Workers must not take the signals: EINTR in them would only add noise. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGUSR1);

	while (!g_stopping) {
		struct pollfd p[3] = {
			{ .fd = g_stop_rd, .events = POLLIN },
			{ .fd = g_wake_rd, .events = POLLIN },
			{ .fd = lfd, .events = POLLIN }, /* -1 while down: ignored by poll */
		};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("seam-origin: poll");
			break;
		}
		if (p[0].revents)
			break;
		if (p[1].revents)
			apply_listen_change(&lfd);
		if (lfd >= 0 && p[2].revents) {
			for (;;) {
				int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd < 0) {
					if (errno == EINTR || errno == ECONNABORTED)
						continue;
					if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
					    errno == ENOMEM)
						poll(NULL, 0, 10); /* let connections end */
					break;
				}
				pthread_sigmask(SIG_BLOCK, &block, &old);
				spawn(fd);
				pthread_sigmask(SIG_SETMASK, &old, NULL);
			}
		}
	}

	g_stopping = 1;
	if (lfd >= 0)
		close(lfd);
	/* Workers see the stop pipe in their next poll; give them a moment to close their sockets. */
	uint64_t deadline = mono_ms() + SHUTDOWN_GRACE_MS;
	pthread_mutex_lock(&g_mu);
	pthread_cond_broadcast(&g_cv);
	while (g_threads > 0) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			break;
		cv_wait_ms(deadline - now);
	}
	bool idle = g_threads == 0;
	pthread_mutex_unlock(&g_mu);
	if (idle) {
		clear_all();
		free(g_log);
		free(g_root);
	}
	return 0;
}
