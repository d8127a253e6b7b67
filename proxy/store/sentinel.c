/*
 * sentinel.c - asking Redis Sentinel for the master (sentinel.h).
 *
 * A sentinel is asked on a connection of its own, made for the question
 * and closed after it: the question is rare (at the mount, and after the
 * master stopped answering, refused a write with READONLY or stopped
 * saying "master" to ROLE), and a connection kept open to each sentinel
 * for questions would be one more thing to keep alive (the watches below
 * are kept, because they must be there before the failover they
 * announce). Sentinels are asked in turn,
 * starting with the one that answered last, until one names the master;
 * each gets a bounded connect and a bounded answer, so that a dead
 * sentinel costs at most its timeout.
 *
 * A watch is a connection kept to one sentinel, subscribed to three
 * channels. On +switch-master every sentinel publishes "NAME OLDIP
 * OLDPORT NEWIP NEWPORT" the moment it adopts a failover. Before that the
 * leader of the failover (any sentinel) publishes the replica it chose:
 * on +failover-state-send-slaveof-noone when it sends it SLAVEOF NO ONE,
 * on +promoted-slave when its INFO (polled once a second) shows the
 * promotion; the switch follows that and the other replicas'
 * reconfiguration, up to a second after the replica became a master. So
 * kvstore.c watches every sentinel and asks the chosen replica's ROLE
 * (px_sentinel_is_master) until it says master. Its owner never blocks
 * on a watch: px_sentinel_watch_read takes what the socket holds (poll,
 * then one read at a time), and a waiting owner polls its fd. So a
 * client that keeps retrying a dead master (kvstore.c) goes to the new
 * one as soon as it is one, instead of at its next retry.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "sentinel.h"
#include "tls.h"

const char *px_hostport_parse(const char *s, size_t n, int defport, struct px_hostport *out)
{
	char buf[300];
	char *port = NULL;

	memset(out, 0, sizeof(*out));
	out->port = defport;
	if (n == 0 || n >= sizeof(buf))
		return "no host";
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (buf[0] == '[') {
		char *rb = strchr(buf, ']');
		if (!rb || rb == buf + 1 || (rb[1] && rb[1] != ':'))
			return "bad [IPv6] host";
		*rb = '\0';
		snprintf(out->host, sizeof(out->host), "%s", buf + 1);
		port = rb[1] == ':' ? rb + 2 : NULL;
	} else {
		port = strchr(buf, ':');
		if (port)
			*port++ = '\0';
		snprintf(out->host, sizeof(out->host), "%s", buf);
	}
	if (!out->host[0])
		return "no host";
	if (port) {
		char *end;
		errno = 0;
		long v = strtol(port, &end, 10);
		if (errno || end == port || *end || v < 1 || v > 65535)
			return "bad port";
		out->port = (int)v;
	}
	return NULL;
}

static int name_ok(const char *p, size_t n)
{
	int ok = n >= 1 && n <= PX_SENTINEL_NAME_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
		     (p[i] >= '0' && p[i] <= '9') || p[i] == '.' || p[i] == '_' || p[i] == '-';
	return ok;
}

enum px_status px_sentinel_parse(const char *url, struct px_sentinels *out, char *err,
				 size_t errlen)
{
	memset(out, 0, sizeof(*out));
	size_t sl = strlen(PX_SENTINEL_SCHEME);
	if (strncmp(url, PX_SENTINEL_TLS_SCHEME, strlen(PX_SENTINEL_TLS_SCHEME)) == 0) {
		sl = strlen(PX_SENTINEL_TLS_SCHEME);
		out->tls = 1;
	} else if (strncmp(url, PX_SENTINEL_SCHEME, sl) != 0) {
		snprintf(err, errlen, "store URL '%s': expected %sHOST:PORT+HOST:PORT/NAME", url,
			 PX_SENTINEL_SCHEME);
		return PX_EINVAL;
	}
	const char *p = url + sl;
	/* over TLS a query follows (kvstore.c reads it) */
	size_t len = out->tls ? strcspn(p, "?") : strlen(p);
	const char *slash = memchr(p, '/', len);
	size_t hn = slash ? (size_t)(slash - p) : len;
	if (memchr(p, '@', hn)) {
		snprintf(err, errlen, "store URL: no user or password in it (a command line is "
			 "readable by every local user); put the password in a file named by "
			 "store_password_file=");
		return PX_EINVAL;
	}
	if (hn == 0) {
		snprintf(err, errlen, "store URL '%s': no sentinel (expected "
			 "%sHOST:PORT+HOST:PORT/NAME)", url, PX_SENTINEL_SCHEME);
		return PX_EINVAL;
	}
	for (const char *h = p; h < p + hn;) {
		const char *plus = memchr(h, '+', (size_t)(p + hn - h));
		size_t n = plus ? (size_t)(plus - h) : (size_t)(p + hn - h);
		if (out->n == PX_SENTINELS_MAX) {
			snprintf(err, errlen, "store URL '%s': more than %d sentinels", url,
				 PX_SENTINELS_MAX);
			return PX_EINVAL;
		}
		const char *why = px_hostport_parse(h, n, PX_SENTINEL_PORT, &out->at[out->n]);
		if (why) {
			snprintf(err, errlen, "store URL '%s': sentinel '%.*s': %s", url,
				 (int)(n > 200 ? 200 : n), h, why);
			return PX_EINVAL;
		}
		out->n++;
		h += n + (plus ? 1 : 0);
		if (plus && h == p + hn) {
			snprintf(err, errlen, "store URL '%s': an empty sentinel after '+'", url);
			return PX_EINVAL;
		}
	}
	size_t nn = slash ? (size_t)(p + len - slash - 1) : 0;
	if (!slash || nn > PX_SENTINEL_NAME_MAX || !name_ok(slash + 1, nn)) {
		snprintf(err, errlen, "store URL '%s': %s (the master's name in the sentinels' "
			 "configuration: /NAME, 1 to %d of A-Z a-z 0-9 . _ -)", url,
			 !nn ? "no master NAME" : "bad master NAME", PX_SENTINEL_NAME_MAX);
		return PX_EINVAL;
	}
	memcpy(out->name, slash + 1, nn);
	out->name[nn] = '\0';
	return PX_OK;
}

/* A connection to the sentinel at (over TLS when tls is not NULL), its
 * connect and every answer bounded by timeout_ms. PX_OK with *c (and *tc
 * over TLS), else err says why. */
static enum px_status sent_connect(const struct px_hostport *at, struct px_tls *tls,
				   int64_t timeout_ms, redisContext **c, struct px_tls_conn **tc,
				   char *err, size_t errlen)
{
	struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };
	int fd = -1;

	*c = NULL;
	*tc = NULL;
	if (tls) {
		char why[400];
		enum px_status st = px_tls_connect(tls, at->host, at->port, timeout_ms, &fd, tc,
						   why, sizeof(why));
		if (st != PX_OK) {
			snprintf(err, errlen, "sentinel %s", why);
			return st;
		}
		if (!(*c = redisConnectFd(fd)))
			close(fd);
	} else {
		*c = redisConnectWithTimeout(at->host, at->port, tv);
		if (*c)
			px_fd_cloexec((*c)->fd);
	}
	if (!*c || (*c)->err) {
		snprintf(err, errlen, "sentinel %s:%d: %s", at->host, at->port,
			 *c ? (*c)->errstr : "out of memory");
		return PX_ECONNECT;
	}
	redisSetTimeout(*c, tv);
	return PX_OK;
}

/* One sentinel's answer: PX_OK with *master, else err says why. */
static enum px_status ask_one(const struct px_hostport *at, const char *name,
			      const char *password, struct px_tls *tls, int64_t timeout_ms,
			      struct px_hostport *master, char *err, size_t errlen)
{
	redisReply *r = NULL;
	enum px_status st;
	struct px_tls_conn *tc = NULL;
	redisContext *c = NULL;

	if ((st = sent_connect(at, tls, timeout_ms, &c, &tc, err, errlen)) != PX_OK)
		goto out;
	st = PX_ECONNECT;
	r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", name);
	if (r && r->type == REDIS_REPLY_ERROR && password && strncmp(r->str, "NOAUTH", 6) == 0) {
		freeReplyObject(r);
		r = redisCommand(c, "AUTH %s", password);
		int ok = r && r->type != REDIS_REPLY_ERROR;
		freeReplyObject(r);
		r = ok ? redisCommand(c, "SENTINEL get-master-addr-by-name %s", name) : NULL;
		if (!ok) {
			st = PX_EAUTH;
			snprintf(err, errlen, "sentinel %s:%d: AUTH refused", at->host, at->port);
			goto out;
		}
	}
	if (!r) {
		snprintf(err, errlen, "sentinel %s:%d: %s", at->host, at->port,
			 c->errstr[0] ? c->errstr : "no answer");
		goto out;
	}
	if (r->type == REDIS_REPLY_NIL) {
		st = PX_ENOTFOUND;
		snprintf(err, errlen, "sentinel %s:%d does not know a master named %s", at->host,
			 at->port, name);
		goto out;
	}
	long port = 0;
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		port = strtol(r->element[1]->str, NULL, 10);
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING || port < 1 || port > 65535 ||
	    !r->element[0]->len || r->element[0]->len >= sizeof(master->host)) {
		st = r->type == REDIS_REPLY_ERROR && strstr(r->str, "AUTH") ? PX_EAUTH : PX_EBADRESP;
		snprintf(err, errlen, "sentinel %s:%d: not a sentinel's answer to "
			 "get-master-addr-by-name %s%s%.120s", at->host, at->port, name,
			 r->type == REDIS_REPLY_ERROR ? ": " : "",
			 r->type == REDIS_REPLY_ERROR ? r->str : "");
		goto out;
	}
	snprintf(master->host, sizeof(master->host), "%s", r->element[0]->str);
	master->port = (int)port;
	st = PX_OK;
out:
	freeReplyObject(r);
	if (c)
		redisFree(c);
	px_tls_conn_free(tc);
	return st;
}

enum px_status px_sentinel_ask(const struct px_sentinels *s, const char *password,
			       struct px_tls *tls, int *next, int64_t timeout_ms,
			       struct px_hostport *master, char *err, size_t errlen)
{
	enum px_status st = PX_ECONNECT, one;
	char why[300];
	size_t used = 0;

	err[0] = '\0';
	for (int i = 0; i < s->n; i++) {
		int k = (*next + i) % s->n;
		one = ask_one(&s->at[k], s->name, password, tls, timeout_ms, master, why,
			      sizeof(why));
		if (one == PX_OK) {
			*next = k;
			return PX_OK;
		}
		/* "they do not know NAME" beats "no answer": it says more */
		if (st == PX_ECONNECT || one == PX_ENOTFOUND || one == PX_EAUTH)
			st = one;
		int w = snprintf(err + used, errlen > used ? errlen - used : 0, "%s%s",
				 used ? "; " : "", why);
		if (w > 0)
			used = used + (size_t)w < errlen ? used + (size_t)w : errlen;
	}
	return st;
}

/* ---- the subscription to a sentinel's announcements */

/* The leader's announcements of the replica it makes master (SLAVEOF NO
 * ONE sent; its promotion seen), then every sentinel's of the switch. */
static const char *const watch_channels[] = { "+failover-state-send-slaveof-noone",
					      "+promoted-slave", "+switch-master" };
#define WATCH_CHANNELS 3
#define WATCH_READS_MAX 16 /* reads per px_sentinel_watch_read: a flood is not a loop */

struct px_sentinel_watch {
	redisContext *c;
	struct px_tls_conn *tc;
	struct px_hostport at;    /* the sentinel */
};

void px_sentinel_watch_free(struct px_sentinel_watch *w)
{
	if (!w)
		return;
	if (w->c)
		redisFree(w->c);
	px_tls_conn_free(w->tc);
	free(w);
}

/* Splits s (copied into buf of cap bytes) at spaces into at most max
 * fields; how many, -1 when it does not fit. */
static int fields_of(const redisReply *s, char *buf, size_t cap, const char **f, int max)
{
	char *save = NULL;
	int n = 0;
	if (s->type != REDIS_REPLY_STRING || s->len >= cap)
		return -1;
	memcpy(buf, s->str, s->len + 1);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
		if (n++ < max)
			f[n - 1] = t;
	return n;
}

/* ip and port (strings) into *to; 0 when they are not an address. */
static int addr_of(const char *ip, const char *port, struct px_hostport *to)
{
	char *end;
	long p = strtol(port, &end, 10);
	if (*end || p < 1 || p > 65535 || !ip[0] || strlen(ip) >= sizeof(to->host))
		return 0;
	snprintf(to->host, sizeof(to->host), "%s", ip);
	to->port = (int)p;
	return 1;
}

/* r is a "message" on a channel of the watch: +switch-master's "NAME
 * OLDIP OLDPORT NEWIP NEWPORT", or the leader's "slave IP:PORT IP PORT @
 * NAME MASTERIP MASTERPORT" naming the replica it promotes. What it says
 * of the master named name goes into *news. */
static void news_of(const redisReply *r, const char *name, struct px_sentinel_news *news)
{
	char buf[PX_SENTINEL_NAME_MAX + 600];
	const char *f[8];
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return;
	int n = fields_of(r->element[2], buf, sizeof(buf), f, 8);
	struct px_hostport at;
	if (strcmp(r->element[1]->str, "+switch-master") == 0) {
		if (n == 5 && strcmp(f[0], name) == 0 && addr_of(f[3], f[4], &at))
			news->switched = at;
	} else if (n == 8 && strcmp(f[0], "slave") == 0 && strcmp(f[4], "@") == 0 &&
		   strcmp(f[5], name) == 0 && addr_of(f[2], f[3], &at)) {
		news->promoting = at;
	}
}

enum px_status px_sentinel_watch_open(const struct px_hostport *at, const char *password,
				      struct px_tls *tls, int64_t timeout_ms,
				      struct px_sentinel_watch **out, char *err, size_t errlen)
{
	struct px_sentinel_watch *w = calloc(1, sizeof(*w));
	redisReply *r = NULL;
	enum px_status st = PX_ENOMEM;
	const char *argv[1 + WATCH_CHANNELS] = { "SUBSCRIBE" };

	*out = NULL;
	if (!w) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < WATCH_CHANNELS; i++)
		argv[i + 1] = watch_channels[i];
	w->at = *at;
	if ((st = sent_connect(&w->at, tls, timeout_ms, &w->c, &w->tc, err, errlen)) != PX_OK)
		goto out;
	r = redisCommandArgv(w->c, 1 + WATCH_CHANNELS, argv, NULL);
	if (r && r->type == REDIS_REPLY_ERROR && password && strncmp(r->str, "NOAUTH", 6) == 0) {
		freeReplyObject(r);
		r = redisCommand(w->c, "AUTH %s", password);
		int ok = r && r->type != REDIS_REPLY_ERROR;
		freeReplyObject(r);
		r = ok ? redisCommandArgv(w->c, 1 + WATCH_CHANNELS, argv, NULL) : NULL;
	}
	/* one confirmation a channel, each bounded like the first */
	for (int i = 0; i < WATCH_CHANNELS; i++) {
		if (i) {
			void *next = NULL;
			freeReplyObject(r);
			r = redisGetReply(w->c, &next) == REDIS_OK ? next : NULL;
		}
		if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    strcmp(r->element[0]->str, "subscribe") != 0) {
			st = PX_EBADRESP;
			snprintf(err, errlen, "sentinel %s:%d: SUBSCRIBE %s: %.120s", w->at.host,
				 w->at.port, watch_channels[i],
				 !r ? (w->c->errstr[0] ? w->c->errstr : "no answer")
				    : r->type == REDIS_REPLY_ERROR ? r->str : "not a subscription");
			goto out;
		}
	}
	*out = w;
	w = NULL;
	st = PX_OK;
out:
	freeReplyObject(r);
	px_sentinel_watch_free(w);
	return st;
}

enum px_status px_sentinel_watch_read(struct px_sentinel_watch *w, const char *name,
				      struct px_sentinel_news *news)
{
	struct pollfd pf = { w->c->fd, POLLIN, 0 };

	memset(news, 0, sizeof(*news));
	for (int reads = 0;;) {
		void *r = NULL;
		int heard = news->switched.port || news->promoting.port;
		if (redisGetReplyFromReader(w->c, &r) != REDIS_OK)
			return heard ? PX_OK : PX_ECONNECT;
		if (r) {
			news_of(r, name, news);
			freeReplyObject(r);
			continue;
		}
		if (reads++ == WATCH_READS_MAX || poll(&pf, 1, 0) <= 0)
			return heard ? PX_OK : PX_EAGAIN;
		if (redisBufferRead(w->c) != REDIS_OK)
			return heard ? PX_OK : PX_ECONNECT; /* the next read says it */
	}
}

enum px_status px_sentinel_is_master(const struct px_hostport *at, const char *password,
				     struct px_tls *tls, int64_t timeout_ms)
{
	struct px_tls_conn *tc = NULL;
	redisContext *c = NULL;
	redisReply *r = NULL;
	char why[400];
	enum px_status st = sent_connect(at, tls, timeout_ms, &c, &tc, why, sizeof(why));

	if (st != PX_OK)
		goto out;
	r = redisCommand(c, "ROLE");
	if (r && r->type == REDIS_REPLY_ERROR && password && strncmp(r->str, "NOAUTH", 6) == 0) {
		freeReplyObject(r);
		r = redisCommand(c, "AUTH %s", password);
		int ok = r && r->type != REDIS_REPLY_ERROR;
		freeReplyObject(r);
		r = ok ? redisCommand(c, "ROLE") : NULL;
	}
	st = !r ? PX_ECONNECT
		: r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
		  r->element[0]->type == REDIS_REPLY_STRING &&
		  strcmp(r->element[0]->str, "master") == 0 ? PX_OK : PX_EAGAIN;
out:
	freeReplyObject(r);
	if (c)
		redisFree(c);
	px_tls_conn_free(tc);
	return st;
}

int px_sentinel_watch_fd(const struct px_sentinel_watch *w)
{
	return w->c->fd;
}
