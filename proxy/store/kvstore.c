/*
 * kvstore.c - the Redis client of cluster mode (kvstore.h), on hiredis's
 * blocking API with a connect timeout and a command timeout.
 *
 * One connection, under s->lock. A call takes the lock (waiting at most
 * PX_STORE_COMMAND_MS), connects when there is no connection and the
 * backoff allows, sends the command and reads the answer within
 * PX_STORE_COMMAND_MS. A call without an answer (refused, timed out, torn,
 * a protocol error) drops the connection and starts a backoff during which
 * calls fail at once; the first call after it connects again. The reply is
 * copied into a struct px_reply so that no other file sees hiredis.
 *
 * Behind Sentinel (redis-sentinel://, sentinel.c) a connect first asks the
 * sentinels for the master's address, and every connect ends with ROLE:
 * in sentinel mode an answer other than "master" fails the connect (the
 * sentinels are asked again at the next), and in both modes ROLE's list of
 * replicas says whether writes that fence (px_store_eval_acked) wait for
 * one (WAIT 1). The master is followed through a failover by three
 * signals: the connection breaks (kill, or Sentinel's CLIENT KILL when it
 * demotes the old master), a write is refused with READONLY, or ROLE, asked
 * again at most every PX_STORE_ROLE_CHECK_MS before a call, no longer says
 * "master". Each drops the connection; the next connect asks the sentinels
 * again, and a master at another address is counted as a failover. A
 * fourth comes first where it can: the sentinels' own announcement of the
 * switch, read from a subscription to each sentinel (watch_check) at the
 * start of a call; that call then connects to the announced master,
 * without asking and without waiting for the backoff. Retrying every
 * PX_STORE_BACKOFF_MAX_MS alone reached the new master up to 0.5 s after
 * the switch. Earlier still, the leader sentinel names the replica it
 * promotes; its ROLE is asked (promotion_check) until it says master,
 * and that replica is then connected to as an announced master, up to a
 * second before the switch is announced.
 *
 * Over TLS (rediss://, rediss-sentinel://) the connection is made by
 * tls.c, which hands hiredis a socket of its pump thread
 * (redisConnectFd): everything above sees a plain connection, and a TLS
 * failure is a connection lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "log.h"
#include "kvstore.h"
#include "sentinel.h"
#include "tls.h"

#define PX_SENTINEL_ASK_MS 500

struct px_store {
	char url[1024];
	char host[256];
	int port;
	char path[1024];          /* UNIX socket; "" for TCP */
	int db;
	char *password;           /* NULL: no AUTH */
	char password_file[1024];
	char prefix[PX_STORE_PREFIX_MAX + 1];
	struct px_sentinels sents; /* sents.n 0: not behind Sentinel */
	int sent_next;            /* the sentinel to ask first */
	struct px_tls *tls;       /* rediss://, rediss-sentinel://; NULL: plain */
	_Atomic uint64_t gen_floor;

	pthread_mutex_t lock;     /* the connection and everything below */
	redisContext *ctx;
	struct px_tls_conn *tconn; /* ctx's TLS pump; NULL: plain */
	int64_t retry_at;         /* monotonic ms: no connect before */
	int64_t backoff_ms;
	_Atomic int up;           /* also read without the lock */
	int64_t latency_us;
	char last_error[256];
	int64_t last_error_at;    /* monotonic ms, 0: never */
	int64_t down_since;
	_Atomic int64_t clock_offset_ms; /* also read without the lock */
	uint64_t calls, errors, connects;
	char master[300];         /* host:port (or the socket) in use; "" before */
	int replicas;             /* connected replicas ROLE named; -1: unknown */
	int64_t role_at;          /* monotonic ms of the last ROLE */
	uint64_t failovers, unacked;
	int unacked_warned;
	int64_t failover_wall;    /* wall ms of the last failover seen, 0: none */
	_Atomic int64_t back_at;  /* monotonic ms it answered again, 0: never */
	char failover_from[300], failover_to[300];
	char master_try[300];     /* the address being connected to */
	struct px_sentinel_watch *watch[PX_SENTINELS_MAX]; /* sents.at[i]'s; NULL: none */
	int64_t watch_at[PX_SENTINELS_MAX]; /* monotonic ms: no new watch before */
	int watch_warned[PX_SENTINELS_MAX]; /* a watch that could not be had was said */
	struct px_hostport heard; /* a master announced, to connect to next; port 0: none */
	struct px_hostport promoting; /* the replica the leader promotes; port 0: none */
	int64_t promote_next, promote_until; /* monotonic ms: its next ROLE, the last */
	uint64_t announced;       /* announcements that our master moved */
	char switched[300];       /* the last one's new master (every sentinel says it) */
	int failover_announced;   /* the last failover was connected to as announced */
};

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- replies */

static void reply_release(struct px_reply *r)
{
	free(r->str);
	for (size_t i = 0; i < r->n; i++)
		reply_release(&r->el[i]);
	free(r->el);
}

void px_reply_free(struct px_reply *r)
{
	if (!r)
		return;
	reply_release(r);
	free(r);
}

static int reply_copy(const redisReply *in, struct px_reply *o)
{
	memset(o, 0, sizeof(*o));
	switch (in->type) {
	case REDIS_REPLY_INTEGER:
		o->type = PX_REPLY_INT;
		o->integer = in->integer;
		return 0;
	case REDIS_REPLY_NIL:
		o->type = PX_REPLY_NIL;
		return 0;
	case REDIS_REPLY_STRING:
	case REDIS_REPLY_STATUS:
	case REDIS_REPLY_ERROR:
		o->type = in->type == REDIS_REPLY_STRING ? PX_REPLY_STR
			  : in->type == REDIS_REPLY_STATUS ? PX_REPLY_STATUS : PX_REPLY_ERR;
		o->len = in->len;
		if (!(o->str = malloc(in->len + 1)))
			return -1;
		memcpy(o->str, in->str, in->len);
		o->str[in->len] = '\0';
		return 0;
	case REDIS_REPLY_ARRAY:
		o->type = PX_REPLY_ARRAY;
		if (!(o->el = calloc(in->elements + 1, sizeof(*o->el))))
			return -1;
		for (size_t i = 0; i < in->elements; i++) {
			o->n++;
			if (reply_copy(in->element[i], &o->el[i]))
				return -1;
		}
		return 0;
	default:
		o->type = PX_REPLY_NIL;
		return 0;
	}
}

const char *px_reply_str(const struct px_reply *r, size_t i)
{
	if (!r || r->type != PX_REPLY_ARRAY || i >= r->n)
		return "";
	const struct px_reply *e = &r->el[i];
	return e->str && (e->type == PX_REPLY_STR || e->type == PX_REPLY_STATUS) ? e->str : "";
}

long long px_reply_int(const struct px_reply *r, size_t i)
{
	if (!r || r->type != PX_REPLY_ARRAY || i >= r->n)
		return 0;
	const struct px_reply *e = &r->el[i];
	if (e->type == PX_REPLY_INT)
		return e->integer;
	if (e->type == PX_REPLY_STR && e->str)
		return strtoll(e->str, NULL, 10);
	return 0;
}

/* ---- URLs */

struct url_parts {
	char host[256];
	int port;
	char path[1024];
	int db;
	struct px_sentinels sents;
	int tls;
	struct px_tls_files tlsf;
};

static int parse_db(const char *p, int *db)
{
	char *end;
	errno = 0;
	long v = strtol(p, &end, 10);
	if (errno || end == p || *end || v < 0 || v > 10000)
		return -1;
	*db = (int)v;
	return 0;
}

/* HOST[:PORT][/DB] at p, of url (named in messages). */
static enum px_status parse_tcp(const char *url, const char *p, struct url_parts *u, char *err,
				size_t errlen)
{
	const char *slash = strchr(p, '/');
	size_t hn = slash ? (size_t)(slash - p) : strlen(p);
	if (memchr(p, '@', hn)) {
		snprintf(err, errlen, "store URL: no user or password in it (a command line is "
			 "readable by every local user); put the password in a file named by "
			 "store_password_file=");
		return PX_EINVAL;
	}
	struct px_hostport hp;
	const char *why = px_hostport_parse(p, hn, 6379, &hp);
	if (why) {
		snprintf(err, errlen, "store URL '%s': %s", url, why);
		return PX_EINVAL;
	}
	snprintf(u->host, sizeof(u->host), "%s", hp.host);
	u->port = hp.port;
	if (slash && slash[1] && parse_db(slash + 1, &u->db)) {
		snprintf(err, errlen, "store URL '%s': the path is a database number (/0 to /10000)",
			 url);
		return PX_EINVAL;
	}
	return PX_OK;
}

/* rediss://HOST[:PORT][/DB][?QUERY] (the query: tls.h) */
static enum px_status parse_tls_url(const char *url, struct url_parts *u, char *err,
				    size_t errlen)
{
	const char *q = strchr(url, '?');
	size_t n = q ? (size_t)(q - url) : strlen(url);
	char plain[1024];

	if (n - 9 >= sizeof(plain)) {
		snprintf(err, errlen, "store URL: too long");
		return PX_EINVAL;
	}
	if (q && px_tls_parse_query(url, q + 1, strlen(q + 1), &u->tlsf, err, errlen) != PX_OK)
		return PX_EINVAL;
	/* the rest reads as redis://'s, its messages naming the URL as given */
	snprintf(plain, sizeof(plain), "%.*s", (int)(n - 9), url + 9);
	return parse_tcp(url, plain, u, err, errlen);
}

static enum px_status parse_url(const char *url, struct url_parts *u, char *err, size_t errlen)
{
	memset(u, 0, sizeof(*u));
	u->port = 6379;
	if (strlen(url) >= sizeof(((struct px_store *)0)->url)) {
		snprintf(err, errlen, "store URL: longer than %zu bytes",
			 sizeof(((struct px_store *)0)->url) - 1);
		return PX_EINVAL;
	}
	if (strncmp(url, "redis+unix://", 13) == 0) {
		const char *p = url + 13;
		const char *q = strchr(p, '?');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		if (p[0] != '/' || n < 2 || n >= sizeof(u->path)) {
			snprintf(err, errlen, "store URL '%s': expected redis+unix:///PATH (an absolute "
				 "path to Redis's socket)", url);
			return PX_EINVAL;
		}
		memcpy(u->path, p, n);
		u->path[n] = '\0';
		if (q && (strncmp(q, "?db=", 4) || parse_db(q + 4, &u->db))) {
			snprintf(err, errlen, "store URL '%s': the only query is ?db=N", url);
			return PX_EINVAL;
		}
		return PX_OK;
	}
	if (strncmp(url, PX_SENTINEL_TLS_SCHEME, strlen(PX_SENTINEL_TLS_SCHEME)) == 0) {
		const char *q = strchr(url, '?');
		u->tls = 1;
		if (q && px_tls_parse_query(url, q + 1, strlen(q + 1), &u->tlsf, err, errlen))
			return PX_EINVAL;
		return px_sentinel_parse(url, &u->sents, err, errlen);
	}
	if (strncmp(url, PX_SENTINEL_SCHEME, strlen(PX_SENTINEL_SCHEME)) == 0)
		return px_sentinel_parse(url, &u->sents, err, errlen);
	if (strncmp(url, "rediss://", 9) == 0) {
		u->tls = 1;
		return parse_tls_url(url, u, err, errlen);
	}
	if (strncmp(url, "redis://", 8) != 0) {
		snprintf(err, errlen, "store URL '%s': expected redis://HOST[:PORT][/DB], "
			 "rediss://HOST[:PORT][/DB][?TLS], redis+unix:///PATH or "
			 "%sHOST:PORT+HOST:PORT/NAME", url, PX_SENTINEL_SCHEME);
		return PX_EINVAL;
	}
	return parse_tcp(url, url + 8, u, err, errlen);
}

enum px_status px_store_check_url(const char *url, char *err, size_t errlen)
{
	struct url_parts u;
	return parse_url(url, &u, err, errlen);
}

enum px_status px_store_check_prefix(const char *name, char *err, size_t errlen)
{
	size_t n = strlen(name);
	int ok = n >= 1 && n <= PX_STORE_PREFIX_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		     (name[i] >= '0' && name[i] <= '9') || name[i] == '.' || name[i] == '_' ||
		     name[i] == '-';
	if (!ok) {
		snprintf(err, errlen, "cluster name '%s': 1 to %d of A-Z a-z 0-9 . _ -", name,
			 PX_STORE_PREFIX_MAX);
		return PX_EINVAL;
	}
	return PX_OK;
}

static enum px_status read_password(const char *file, char **out, char *err, size_t errlen)
{
	char buf[1024];
	struct stat sb;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	*out = NULL;
	if (fd < 0) {
		snprintf(err, errlen, "store_password_file %s: %s", file, strerror(errno));
		return errno == EACCES ? PX_EAUTH : PX_EIO;
	}
	if (fstat(fd, &sb) == 0 && (sb.st_mode & 0077))
		px_warn("store", "store_password_file %s is readable by others (mode %03o); "
			"chmod 600 it", file, (unsigned)(sb.st_mode & 0777));
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "store_password_file %s: %s", file, strerror(errno));
		return PX_EIO;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (!buf[0]) {
		snprintf(err, errlen, "store_password_file %s: empty (the password is its first "
			 "line)", file);
		return PX_EINVAL;
	}
	*out = strdup(buf);
	memset(buf, 0, sizeof(buf));
	return *out ? PX_OK : PX_ENOMEM;
}

enum px_status px_store_new(const char *url, const char *password_file, const char *prefix,
			    struct px_store **out, char *err, size_t errlen)
{
	struct url_parts u;
	enum px_status st;
	*out = NULL;
	if ((st = parse_url(url, &u, err, errlen)) != PX_OK)
		return st;
	if (!prefix)
		prefix = PX_STORE_DEFAULT_PREFIX;
	if ((st = px_store_check_prefix(prefix, err, errlen)) != PX_OK)
		return st;
	struct px_store *s = calloc(1, sizeof(*s));
	if (!s)
		return PX_ENOMEM;
	snprintf(s->url, sizeof(s->url), "%s", url);
	snprintf(s->host, sizeof(s->host), "%s", u.host);
	snprintf(s->path, sizeof(s->path), "%s", u.path);
	s->port = u.port;
	s->db = u.db;
	s->sents = u.sents;
	s->replicas = -1;
	snprintf(s->prefix, sizeof(s->prefix), "%s", prefix);
	if (password_file) {
		snprintf(s->password_file, sizeof(s->password_file), "%s", password_file);
		if ((st = read_password(password_file, &s->password, err, errlen)) != PX_OK) {
			free(s);
			return st;
		}
	}
	if (u.tls && (st = px_tls_new(&u.tlsf, &s->tls, err, errlen)) != PX_OK) {
		if (s->password) {
			memset(s->password, 0, strlen(s->password));
			free(s->password);
		}
		free(s);
		return st;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->latency_us = -1;
	s->backoff_ms = 250;
	*out = s;
	return PX_OK;
}

void px_store_free(struct px_store *s)
{
	if (!s)
		return;
	if (s->ctx)
		redisFree(s->ctx);
	px_tls_conn_free(s->tconn);
	for (int i = 0; i < s->sents.n; i++)
		px_sentinel_watch_free(s->watch[i]);
	px_tls_free(s->tls);
	if (s->password) {
		memset(s->password, 0, strlen(s->password));
		free(s->password);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- the connection (under s->lock) */

static struct timeval tv_of(int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	return tv;
}

static void note_error(struct px_store *s, const char *fmt, ...) PX_PRINTF(2, 3);
static void note_error(struct px_store *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
	va_end(ap);
	s->last_error_at = px_now_ms();
	s->errors++;
}

/* Closes the connection (and its TLS pump). */
static void close_ctx(struct px_store *s)
{
	if (s->ctx)
		redisFree(s->ctx);
	s->ctx = NULL;
	px_tls_conn_free(s->tconn);
	s->tconn = NULL;
}

/* Drops the connection after a call without an answer: calls fail at
 * once until the backoff ends. */
static void drop(struct px_store *s)
{
	close_ctx(s);
	if (s->up) {
		px_warn("store", "%s: %s; the store is degraded (calls fail at once, retried "
			"after %lld ms)", s->url, s->last_error, (long long)s->backoff_ms);
		s->down_since = px_now_ms();
	}
	if (!s->down_since)
		s->down_since = px_now_ms();
	s->up = 0;
	s->retry_at = px_now_ms() + s->backoff_ms;
	s->backoff_ms = s->backoff_ms * 2 > PX_STORE_BACKOFF_MAX_MS ? PX_STORE_BACKOFF_MAX_MS
								      : s->backoff_ms * 2;
}

/* The status of hiredis's context error (no reply came). */
static enum px_status ctx_status(const redisContext *c)
{
	if (c->err == REDIS_ERR_PROTOCOL)
		return PX_EBADRESP;
	if (c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == ETIMEDOUT ||
				       errno == EWOULDBLOCK || strstr(c->errstr, "timed out")))
		return PX_ETIMEDOUT;
	if (c->err == REDIS_ERR_EOF)
		return PX_ECONNECT;
	return PX_ECONNECT;
}

static int is_auth_error(const char *msg)
{
	return strncmp(msg, "NOAUTH", 6) == 0 || strncmp(msg, "WRONGPASS", 9) == 0 ||
	       strstr(msg, "invalid password") || strstr(msg, "AUTH") ||
	       strstr(msg, "without any password");
}

/* A connection lost under a command: hiredis's words, and over TLS the
 * server's reason where it sent one (under TLS 1.3 a server checks the
 * client's certificate after the handshake, then closes with an alert). */
static void note_lost(struct px_store *s)
{
	const char *lost = s->ctx->errstr[0] ? s->ctx->errstr : "connection lost";
	const char *why = px_tls_conn_why(s->tconn);
	if (!why)
		note_error(s, "%s", lost);
	else if (strstr(why, "certificate required"))
		note_error(s, "%s (TLS: %s): the server asks for a client certificate: give "
			   "tls_cert_file= and tls_key_file= in the store URL", lost, why);
	else
		note_error(s, "%s (TLS: %s)", lost, why);
}

/* One command on the open connection: PX_OK with *rep, or the failure
 * (the connection is then dropped, except for an error reply). */
static enum px_status raw(struct px_store *s, int argc, const char **argv,
			  const size_t *argvlen, redisReply **rep)
{
	int64_t t0 = px_now_us();
	errno = 0;
	*rep = redisCommandArgv(s->ctx, argc, argv, argvlen);
	if (!*rep) {
		enum px_status st = ctx_status(s->ctx);
		if (st == PX_EBADRESP)
			note_error(s, "not a Redis server? (%s)", s->ctx->errstr);
		else if (st == PX_ETIMEDOUT)
			note_error(s, "no answer within %d ms", PX_STORE_COMMAND_MS);
		else
			note_lost(s);
		drop(s);
		return st;
	}
	s->latency_us = px_now_us() - t0;
	return PX_OK;
}

/* Over TLS: the handshake (bounded by PX_STORE_CONNECT_MS), then hiredis
 * on the pump's socket. Under s->lock. */
static enum px_status open_tls(struct px_store *s)
{
	char why[400];
	int fd;
	enum px_status st = px_tls_connect(s->tls, s->host, s->port, PX_STORE_CONNECT_MS, &fd,
					   &s->tconn, why, sizeof(why));
	if (st != PX_OK) {
		note_error(s, "%s", why);
		drop(s);
		return st;
	}
	if (!(s->ctx = redisConnectFd(fd))) {
		close(fd);
		note_error(s, "out of memory");
		drop(s);
		return PX_ENOMEM;
	}
	redisSetTimeout(s->ctx, tv_of(PX_STORE_COMMAND_MS));
	s->connects++;
	return PX_OK;
}

/* Opens the connection to s->host:s->port (or the socket) with the
 * timeouts. Under s->lock. */
static enum px_status open_ctx(struct px_store *s)
{
	struct timeval ct = tv_of(PX_STORE_CONNECT_MS);
	enum px_status st;

	close_ctx(s);
	if (s->tls)
		return open_tls(s);
	errno = 0;
	s->ctx = s->path[0] ? redisConnectUnixWithTimeout(s->path, ct)
			    : redisConnectWithTimeout(s->host, s->port, ct);
	if (s->ctx)
		px_fd_cloexec(s->ctx->fd);
	if (!s->ctx || s->ctx->err) {
		st = s->ctx ? ctx_status(s->ctx) : PX_ENOMEM;
		if (st == PX_ETIMEDOUT || (s->ctx && strstr(s->ctx->errstr, "timed out")))
			note_error(s, "no connection within %d ms", PX_STORE_CONNECT_MS);
		else
			note_error(s, "cannot connect%s%s: %s", s->sents.n ? " to the master " : "",
				   s->sents.n ? s->master_try : "",
				   s->ctx ? s->ctx->errstr : "out of memory");
		drop(s);
		return st == PX_ETIMEDOUT ? st : PX_ECONNECT;
	}
	redisSetTimeout(s->ctx, tv_of(PX_STORE_COMMAND_MS));
	s->connects++;
	return PX_OK;
}

/* AUTH, SELECT and PING (is it a Redis?). Under s->lock, connected. */
static enum px_status handshake(struct px_store *s)
{
	redisReply *r = NULL;
	enum px_status st;

	if (s->password) {
		const char *argv[] = { "AUTH", s->password };
		if ((st = raw(s, 2, argv, NULL, &r)) != PX_OK)
			return st;
		if (r->type == REDIS_REPLY_ERROR) {
			note_error(s, "AUTH refused: %.180s (store_password_file %s)", r->str,
				   s->password_file);
			freeReplyObject(r);
			drop(s);
			return PX_EAUTH;
		}
		freeReplyObject(r);
	}
	if (s->db) {
		char db[16];
		snprintf(db, sizeof(db), "%d", s->db);
		const char *argv[] = { "SELECT", db };
		if ((st = raw(s, 2, argv, NULL, &r)) != PX_OK)
			return st;
		if (r->type == REDIS_REPLY_ERROR) {
			st = is_auth_error(r->str) ? PX_EAUTH : PX_EBADRESP;
			note_error(s, "SELECT %d: %.180s", s->db, r->str);
			freeReplyObject(r);
			drop(s);
			return st;
		}
		freeReplyObject(r);
	}
	const char *ping[] = { "PING" };
	if ((st = raw(s, 1, ping, NULL, &r)) != PX_OK)
		return st;
	if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0) {
		if (r->type == REDIS_REPLY_ERROR && is_auth_error(r->str)) {
			note_error(s, "Redis wants a password (%.160s): name a file holding it with "
				   "store_password_file=", r->str);
			st = PX_EAUTH;
		} else {
			note_error(s, "not a Redis server? PING answered \"%.100s\"",
				   r->str ? r->str : "");
			st = PX_EBADRESP;
		}
		freeReplyObject(r);
		drop(s);
		return st;
	}
	freeReplyObject(r);
	return PX_OK;
}

/* The clock: Redis's TIME against ours at the middle of the trip. */
static enum px_status read_clock(struct px_store *s)
{
	redisReply *r = NULL;
	enum px_status st;
	const char *tm[] = { "TIME" };
	int64_t before = wall_ms();

	if ((st = raw(s, 1, tm, NULL, &r)) != PX_OK)
		return st;
	int64_t after = wall_ms();
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING) {
		int64_t server = strtoll(r->element[0]->str, NULL, 10) * 1000 +
				 strtoll(r->element[1]->str, NULL, 10) / 1000;
		s->clock_offset_ms = server - (before + after) / 2;
	}
	freeReplyObject(r);
	return PX_OK;
}

/* ROLE: how many replicas a fencing write waits for and, behind Sentinel,
 * that this is still the master (else PX_ECONNECT, dropped: the next
 * connect asks the sentinels again). Under s->lock, connected. */
static enum px_status check_role(struct px_store *s)
{
	redisReply *r = NULL;
	const char *argv[] = { "ROLE" };
	enum px_status st = raw(s, 1, argv, NULL, &r);

	if (st != PX_OK)
		return st;
	s->role_at = px_now_ms();
	const char *role = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
			   r->element[0]->type == REDIS_REPLY_STRING ? r->element[0]->str : NULL;
	if (role && strcmp(role, "master") == 0) {
		s->replicas = r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY
			      ? (int)r->element[2]->elements : 0;
	} else if (s->sents.n) {
		note_error(s, "%s is not the master of %s (ROLE says %.60s)", s->master_try,
			   s->sents.name, role ? role : r->type == REDIS_REPLY_ERROR ? r->str : "?");
		st = PX_ECONNECT;
	} else {
		s->replicas = role ? 0 : -1; /* a replica itself, or ROLE refused */
	}
	freeReplyObject(r);
	if (st != PX_OK)
		drop(s);
	return st;
}

/* host:port as the status shows it ([v6]:port). */
static void hostport_str(const struct px_hostport *m, char *buf, size_t cap)
{
	snprintf(buf, cap, strchr(m->host, ':') ? "[%s]:%d" : "%s:%d", m->host, m->port);
}

/* The next connect goes to m. */
static void try_master(struct px_store *s, const struct px_hostport *m)
{
	snprintf(s->host, sizeof(s->host), "%s", m->host);
	s->port = m->port;
	hostport_str(m, s->master_try, sizeof(s->master_try));
}

/* Behind Sentinel: asks the sentinels where the master is. */
static enum px_status locate_master(struct px_store *s)
{
	struct px_hostport m;
	char why[700];
	enum px_status st = px_sentinel_ask(&s->sents, s->password, s->tls, &s->sent_next,
					    PX_SENTINEL_ASK_MS, &m, why, sizeof(why));
	if (st != PX_OK) {
		note_error(s, "no sentinel names the master %s: %.190s", s->sents.name, why);
		drop(s);
		return st;
	}
	try_master(s, &m);
	return PX_OK;
}

/* A connect reached s->master_try (announced: the address a sentinel
 * announced): a failover when the master was elsewhere before. */
static void note_master(struct px_store *s, int announced)
{
	if (!s->sents.n) {
		if (s->path[0])
			snprintf(s->master, sizeof(s->master), "%s", s->path);
		else if (strchr(s->host, ':'))
			snprintf(s->master, sizeof(s->master), "[%s]:%d", s->host, s->port);
		else
			snprintf(s->master, sizeof(s->master), "%s:%d", s->host, s->port);
		return;
	}
	if (s->master[0] && strcmp(s->master, s->master_try) != 0) {
		s->failovers++;
		s->failover_announced = announced;
		s->failover_wall = wall_ms();
		snprintf(s->failover_from, sizeof(s->failover_from), "%s", s->master);
		snprintf(s->failover_to, sizeof(s->failover_to), "%s", s->master_try);
		px_warn("store", "%s: the master of %s moved from %s to %s (a failover); %d "
			"replica(s) now", s->url, s->sents.name, s->master, s->master_try,
			s->replicas);
	} else if (!s->master[0]) {
		px_info("store", "%s: the master of %s is %s, with %d replica(s)", s->url,
			s->sents.name, s->master_try, s->replicas);
	}
	snprintf(s->master, sizeof(s->master), "%s", s->master_try);
}

/* Connects (behind Sentinel: to the master the sentinels name), AUTH,
 * SELECT, PING, the clock, ROLE. Under s->lock. */
static enum px_status connect_now(struct px_store *s)
{
	enum px_status st;

	close_ctx(s);
	/* an announced master is tried as it is (ROLE checks it); once */
	int announced = s->sents.n && s->heard.port;
	if (announced)
		try_master(s, &s->heard);
	s->heard.port = 0;
	if (s->sents.n && !announced && (st = locate_master(s)) != PX_OK)
		return st;
	if ((st = open_ctx(s)) != PX_OK || (st = handshake(s)) != PX_OK ||
	    (st = read_clock(s)) != PX_OK || (st = check_role(s)) != PX_OK)
		return st;
	uint64_t failovers = s->failovers;
	note_master(s, announced);
	if (!s->up && (s->down_since || s->connects > 1))
		px_info("store", "%s answers again (after %lld ms)", s->url,
			(long long)(s->down_since ? px_now_ms() - s->down_since : 0));
	if ((!s->up && (s->down_since || s->connects > 1)) || s->failovers != failovers)
		s->back_at = px_now_ms();
	s->up = 1;
	s->down_since = 0;
	s->backoff_ms = 250;
	return PX_OK;
}

/* ROLE again once the last is PX_STORE_ROLE_CHECK_MS old; a master that
 * is one no more is left at once for the one the sentinels name. Under
 * s->lock, connected. */
static enum px_status recheck_role(struct px_store *s)
{
	if (px_now_ms() - s->role_at < PX_STORE_ROLE_CHECK_MS)
		return PX_OK;
	enum px_status st = check_role(s);
	if (st == PX_OK || !s->sents.n || s->ctx)
		return st;
	return connect_now(s);
}

/* After a fencing write: WAIT 1 when ROLE named a replica. The write
 * stands whatever the answer (it is on the master); one not acknowledged
 * in time is counted and said once until one is again. Under s->lock. */
static void wait_replica(struct px_store *s)
{
	redisReply *r = NULL;
	char ms[16];

	if (s->replicas <= 0 || !s->ctx)
		return;
	snprintf(ms, sizeof(ms), "%d", PX_STORE_WAIT_MS);
	const char *argv[] = { "WAIT", "1", ms };
	if (raw(s, 3, argv, NULL, &r) != PX_OK)
		return; /* dropped; the next call connects again */
	int acked = r->type == REDIS_REPLY_INTEGER && r->integer >= 1;
	freeReplyObject(r);
	if (acked) {
		if (s->unacked_warned)
			px_info("store", "%s: a replica acknowledges writes again", s->url);
		s->unacked_warned = 0;
		return;
	}
	s->unacked++;
	if (!s->unacked_warned++)
		px_warn("store", "%s: no replica acknowledged a lease or commit write within %d ms "
			"(ROLE lists %d); a failover now could lose it", s->url, PX_STORE_WAIT_MS,
			s->replicas);
}

/* Behind Sentinel, while the master answers: a watch on a sentinel that
 * has none (one a call; one that cannot be had is tried again after
 * PX_STORE_WATCH_RETRY_MS, or PX_STORE_WATCH_SPARE_MS while another
 * sentinel is watched). Under s->lock. */
static void watch_open(struct px_store *s)
{
	char why[400], addr[300];
	int open = 0;

	for (int i = 0; i < s->sents.n; i++)
		open += s->watch[i] != NULL;
	/* made while connected only: a store that does not answer keeps
	 * failing at once (degraded mode) and asks the sentinels anyway */
	for (int i = 0; s->ctx && i < s->sents.n; i++) {
		if (s->watch[i] || px_now_ms() < s->watch_at[i])
			continue;
		s->watch_at[i] = px_now_ms() + (open ? PX_STORE_WATCH_SPARE_MS
						      : PX_STORE_WATCH_RETRY_MS);
		if (px_sentinel_watch_open(&s->sents.at[i], s->password, s->tls,
					   PX_SENTINEL_ASK_MS, &s->watch[i], why,
					   sizeof(why)) != PX_OK) {
			if (!s->watch_warned[i]++)
				px_warn("store", "%s: %s; its announcements of a failover are not "
					"heard (tried again every %d ms)", s->url, why,
					open ? PX_STORE_WATCH_SPARE_MS : PX_STORE_WATCH_RETRY_MS);
			return;
		}
		s->watch_warned[i] = 0;
		hostport_str(&s->sents.at[i], addr, sizeof(addr));
		px_info("store", "%s: following sentinel %s's announcements of a failover", s->url,
			addr);
		return;
	}
}

/* +switch-master: our master moved to to. That ends the backoff and the
 * connection to the old one: the caller connects to the new one now. */
static void heard_switch(struct px_store *s, const struct px_hostport *to)
{
	char addr[300], heard[300] = "";

	hostport_str(to, addr, sizeof(addr));
	if (strcmp(addr, s->switched) != 0)
		s->announced++;
	snprintf(s->switched, sizeof(s->switched), "%s", addr);
	s->promoting.port = 0;
	if (s->heard.port)
		hostport_str(&s->heard, heard, sizeof(heard));
	if (strcmp(addr, s->master) == 0 || strcmp(addr, heard) == 0)
		return; /* followed already */
	px_info("store", "%s: the sentinels announce %s as the master of %s; connecting to it",
		s->url, addr, s->sents.name);
	s->heard = *to;
	s->retry_at = 0;
	close_ctx(s);
}

/* The leader sentinel at from promotes the replica at: its ROLE is asked
 * from the next call on, for PX_STORE_PROMOTE_MS at most. */
static void heard_promotion(struct px_store *s, const struct px_hostport *from,
			    const struct px_hostport *at)
{
	char addr[300], was[300] = "", heard[300] = "", by[300];

	hostport_str(at, addr, sizeof(addr));
	if (s->promoting.port)
		hostport_str(&s->promoting, was, sizeof(was));
	if (s->heard.port)
		hostport_str(&s->heard, heard, sizeof(heard));
	if (strcmp(addr, s->master) == 0 || strcmp(addr, was) == 0 ||
	    strcmp(addr, heard) == 0)
		return; /* there already, going there, or asking it */
	hostport_str(from, by, sizeof(by));
	px_info("store", "%s: sentinel %s promotes %s to master of %s; connecting to it once its "
		"ROLE says master", s->url, by, addr, s->sents.name);
	s->promoting = *at;
	s->promote_next = 0;
	s->promote_until = px_now_ms() + PX_STORE_PROMOTE_MS;
}

/* The replica being promoted: ROLE at most every PX_STORE_PROMOTE_POLL_MS
 * until PX_STORE_PROMOTE_MS have passed. Once it says master, the caller
 * connects to it as to an announced master (ROLE is asked again there);
 * until then the store stays where it is. Under s->lock. */
static void promotion_check(struct px_store *s)
{
	char addr[300];
	int64_t now = px_now_ms();

	if (!s->promoting.port || now < s->promote_next)
		return;
	hostport_str(&s->promoting, addr, sizeof(addr));
	if (now >= s->promote_until) {
		px_info("store", "%s: %s did not say master within %d ms; the sentinels' "
			"announcement or the retries tell where the master is", s->url, addr,
			PX_STORE_PROMOTE_MS);
		s->promoting.port = 0;
		return;
	}
	if (px_sentinel_is_master(&s->promoting, s->password, s->tls, PX_SENTINEL_ASK_MS) != PX_OK) {
		s->promote_next = px_now_ms() + PX_STORE_PROMOTE_POLL_MS;
		return;
	}
	px_info("store", "%s: %s says it is a master (promoted for %s); connecting to it", s->url,
		addr, s->sents.name);
	s->heard = s->promoting;
	s->promoting.port = 0;
	s->retry_at = 0;
	close_ctx(s);
}

/* Behind Sentinel: the watches (watch_open), what they heard of our
 * master, then a promotion heard. A watch whose connection is gone is
 * made again at the next call. Under s->lock. */
static void watch_check(struct px_store *s)
{
	struct px_sentinel_news news;
	char addr[300];

	if (!s->sents.n)
		return;
	watch_open(s);
	for (int i = 0; i < s->sents.n; i++) {
		if (!s->watch[i])
			continue;
		enum px_status st = px_sentinel_watch_read(s->watch[i], s->sents.name, &news);
		if (st == PX_ECONNECT) {
			hostport_str(&s->sents.at[i], addr, sizeof(addr));
			px_warn("store", "%s: sentinel %s no longer answers; watching it again at the "
				"next call", s->url, addr);
			px_sentinel_watch_free(s->watch[i]);
			s->watch[i] = NULL;
			s->watch_at[i] = 0;
			continue;
		}
		if (st != PX_OK)
			continue;
		if (news.promoting.port)
			heard_promotion(s, &s->sents.at[i], &news.promoting);
		if (news.switched.port)
			heard_switch(s, &news.switched);
	}
	promotion_check(s);
}

static int lock_bounded(struct px_store *s)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += PX_STORE_COMMAND_MS / 1000;
	ts.tv_nsec += (long)(PX_STORE_COMMAND_MS % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return pthread_mutex_timedlock(&s->lock, &ts);
}

enum px_status px_store_connect(struct px_store *s, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	enum px_status st = connect_now(s);
	if (st != PX_OK)
		snprintf(err, errlen, "store %s: %s", s->url, s->last_error);
	else
		watch_check(s);
	pthread_mutex_unlock(&s->lock);
	return st;
}

/* An error reply after which the connection is not worth keeping: a
 * restarted Redis wants AUTH again or is not ready; a demoted master (or
 * one that lost its replicas' quorum) must be left for the new one. */
static int drops_connection(enum px_status st, const char *msg)
{
	return st == PX_EAUTH || strncmp(msg, "LOADING", 7) == 0 ||
	       strncmp(msg, "READONLY", 8) == 0 || strncmp(msg, "NOREPLICAS", 10) == 0 ||
	       strncmp(msg, "MASTERDOWN", 10) == 0;
}

static enum px_status call(struct px_store *s, int argc, const char **argv,
			   const size_t *argvlen, int acked, struct px_reply **out)
{
	redisReply *r = NULL;
	enum px_status st;

	if (out)
		*out = NULL;
	if (lock_bounded(s))
		return PX_ELOCKTIMEOUT;
	s->calls++;
	watch_check(s);
	if (!s->ctx && px_now_ms() < s->retry_at) {
		s->errors++;
		st = PX_ECONNECT;
		goto unlock;
	}
	st = s->ctx ? recheck_role(s) : connect_now(s);
	if (st != PX_OK || (st = raw(s, argc, argv, argvlen, &r)) != PX_OK)
		goto unlock;
	s->up = 1;
	if (r->type == REDIS_REPLY_ERROR) {
		st = is_auth_error(r->str) ? PX_EAUTH : PX_EBADRESP;
		note_error(s, "%s: %.200s", argv[0], r->str);
		if (drops_connection(st, r->str))
			drop(s);
	} else if (acked) {
		wait_replica(s);
	}
unlock:
	pthread_mutex_unlock(&s->lock);
	if (r && out) {
		struct px_reply *o = calloc(1, sizeof(*o));
		if (!o || reply_copy(r, o)) {
			px_reply_free(o);
			freeReplyObject(r);
			return PX_ENOMEM;
		}
		*out = o;
	}
	freeReplyObject(r);
	return st;
}

enum px_status px_store_call(struct px_store *s, int argc, const char **argv,
			     const size_t *argvlen, struct px_reply **out)
{
	return call(s, argc, argv, argvlen, 0, out);
}

/* A script's call: its text, keys and arguments. */
struct script_call {
	const char *script;
	int nkeys;
	const char **keys;
	int nargs;
	const char **args;
};

static enum px_status eval(struct px_store *s, const struct script_call *e, int acked,
			   struct px_reply **out)
{
	const char *script = e->script, **keys = e->keys, **args = e->args;
	int nkeys = e->nkeys, nargs = e->nargs;
	const char *argv[64];
	char nk[16];
	if (nkeys + nargs + 3 > (int)(sizeof(argv) / sizeof(argv[0])))
		return PX_EINVAL;
	snprintf(nk, sizeof(nk), "%d", nkeys);
	int n = 0;
	argv[n++] = "EVAL";
	argv[n++] = script;
	argv[n++] = nk;
	for (int i = 0; i < nkeys; i++)
		argv[n++] = keys[i];
	for (int i = 0; i < nargs; i++)
		argv[n++] = args[i];
	return call(s, n, argv, NULL, acked, out);
}

enum px_status px_store_eval(struct px_store *s, const char *script, int nkeys,
			     const char **keys, int nargs, const char **args,
			     struct px_reply **out)
{
	struct script_call e = { script, nkeys, keys, nargs, args };
	return eval(s, &e, 0, out);
}

enum px_status px_store_eval_acked(struct px_store *s, const char *script, int nkeys,
				   const char **keys, int nargs, const char **args,
				   struct px_reply **out)
{
	struct script_call e = { script, nkeys, keys, nargs, args };
	return eval(s, &e, 1, out);
}

int px_store_sentinel(const struct px_store *s)
{
	return s->sents.n > 0;
}

void px_store_note_gen(struct px_store *s, uint64_t gen)
{
	uint64_t cur = atomic_load(&s->gen_floor);
	while (gen > cur && !atomic_compare_exchange_weak(&s->gen_floor, &cur, gen))
		;
}

uint64_t px_store_gen_floor(struct px_store *s)
{
	return atomic_load(&s->gen_floor);
}

int px_store_key(const struct px_store *s, char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, cap, "%s:", s->prefix);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, cap - (size_t)n, fmt, ap);
	va_end(ap);
	if (m < 0 || (size_t)(n + m) >= cap)
		return -1;
	return n + m;
}

const char *px_store_prefix(const struct px_store *s)
{
	return s->prefix;
}

const char *px_store_url(const struct px_store *s)
{
	return s->url;
}

const char *px_store_password_file(const struct px_store *s)
{
	return s->password_file[0] ? s->password_file : NULL;
}

int64_t px_store_now_ms(struct px_store *s)
{
	return wall_ms() + atomic_load(&s->clock_offset_ms);
}

void px_store_wait(struct px_store *s, int64_t ms)
{
	struct pollfd pf[PX_SENTINELS_MAX];
	int n = 0;
	if (s->sents.n && !lock_bounded(s)) {
		/* copies: a watch may be closed while we wait */
		for (int i = 0; i < s->sents.n; i++)
			if (s->watch[i])
				pf[n++] = (struct pollfd){ dup(px_sentinel_watch_fd(s->watch[i])),
							   POLLIN, 0 };
		/* a replica being promoted is asked again at its time */
		int64_t now = px_now_ms();
		if (s->promoting.port && now < s->promote_until)
			ms = s->promote_next - now < ms ? s->promote_next - now : ms;
		pthread_mutex_unlock(&s->lock);
	}
	if (ms < 0)
		ms = 0;
	if (n) {
		(void)poll(pf, (nfds_t)n, (int)ms);
		for (int i = 0; i < n; i++)
			if (pf[i].fd >= 0)
				close(pf[i].fd);
		return;
	}
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

int64_t px_store_back_ms(struct px_store *s)
{
	return s->back_at;
}

int px_store_up(struct px_store *s)
{
	return atomic_load(&s->up);
}

void px_store_state(struct px_store *s, struct px_store_state *o)
{
	memset(o, 0, sizeof(*o));
	/* bounded: a call in flight holds the lock for at most its timeouts */
	if (lock_bounded(s)) {
		o->connected = atomic_load(&s->up);
		o->latency_us = -1;
		snprintf(o->last_error, sizeof(o->last_error), "a call is taking long");
		o->last_error_age_ms = 0;
		o->clock_offset_ms = atomic_load(&s->clock_offset_ms);
		return;
	}
	o->connected = s->up;
	o->latency_us = s->latency_us;
	snprintf(o->last_error, sizeof(o->last_error), "%s", s->last_error);
	o->last_error_age_ms = s->last_error_at ? px_now_ms() - s->last_error_at : -1;
	o->down_since_ms = s->down_since;
	o->clock_offset_ms = s->clock_offset_ms;
	o->calls = s->calls;
	o->errors = s->errors;
	o->connects = s->connects;
	snprintf(o->master, sizeof(o->master), "%s", s->master);
	snprintf(o->master_name, sizeof(o->master_name), "%s", s->sents.name);
	o->sentinels = s->sents.n;
	o->replicas = s->replicas;
	o->failovers = s->failovers;
	o->failover_wall_ms = s->failover_wall;
	snprintf(o->failover_from, sizeof(o->failover_from), "%s", s->failover_from);
	snprintf(o->failover_to, sizeof(o->failover_to), "%s", s->failover_to);
	o->unacked = s->unacked;
	o->announced = s->announced;
	o->failover_announced = s->failover_announced;
	for (int i = 0; i < s->sents.n && !o->watching[0]; i++)
		if (s->watch[i])
			hostport_str(&s->sents.at[i], o->watching, sizeof(o->watching));
	pthread_mutex_unlock(&s->lock);
}
