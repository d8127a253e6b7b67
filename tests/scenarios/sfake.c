/*
 * sfake.c - the scenario checker's fake fetcher (sfake.h).
 *
 * Open transfers sit in an array that only grows while the fake's thread
 * walks it (submits append under the lock; the thread alone drops ended
 * ones, at the start of a pass), so the walk survives the callbacks, which
 * run without the lock. Each pass moves every transfer that may move one
 * chunk, ends the cancelled ones, starts the faults that are due by time,
 * and sleeps until the next due time or a change (submit, cancel, resume).
 *
 * A transfer's head is judged at its first step, not at submit, so that a
 * source's state (dead, refusing) is the one at the time it answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "httpparse.h"
#include "px.h"
#include "sfake.h"

#define SF_MTIME 1600000000
#define SF_HTML_LEN 1234

struct sf_xfer {
	uint64_t id;
	int k, prov;
	int64_t offset, length, expect_size;
	struct px_fetch_cb cb;
	int64_t started, next_ms;
	int64_t pos, end, bytes;
	int headed, done, cancelled, paused, in_data, resume_pending;
};

const char *sf_kind_name(enum sf_kind k)
{
	static const char *const names[SF_NKINDS] = {
		"identical", "differs", "wrong-size", "html-200", "gzip", "clen!=crange",
		"reset", "stall", "drip", "slow-start", "http-error", "comes-back" };
	return k < SF_NKINDS ? names[k] : "?";
}

void sf_init(struct sfake *f, const struct sf_source *src, int nsrc, const int *limit,
	     int nprov, size_t chunk)
{
	pthread_condattr_t attr;
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &attr);
	pthread_condattr_destroy(&attr);
	f->nsrc = nsrc;
	f->nprov = nprov;
	f->chunk = chunk;
	memcpy(f->src, src, (size_t)nsrc * sizeof(*src));
	memcpy(f->limit, limit, (size_t)nprov * sizeof(*limit));
	for (int k = 0; k < nsrc; k++) {
		f->st[k].fault_at = SF_NEVER;
		f->st[k].back_at = SF_NEVER;
	}
	f->next_id = 1;
}

/* Source k's fault begins now. Lock held. */
static void begin_fault(struct sfake *f, int k, int64_t now)
{
	if (f->st[k].fault_at != SF_NEVER)
		return;
	f->st[k].fault_at = now;
	if (f->src[k].kind == SF_COMEBACK)
		f->st[k].back_at = now + f->src[k].back_ms;
}

/* Ends x with st: off its provider's count first, as the real fetcher
 * frees the connection before on_done. Lock held; dropped around on_done. */
static void finish(struct sfake *f, struct sf_xfer *x, enum px_status st, int http,
		   int64_t size, const char *detail)
{
	struct px_fetch_result res;
	memset(&res, 0, sizeof(res));
	res.status = st;
	res.http_status = http;
	res.size = size;
	res.mtime = http ? SF_MTIME : -1;
	res.bytes = x->bytes;
	snprintf(res.detail, sizeof(res.detail), "sfake s%d: %s", x->k, detail);
	x->done = 1;
	f->open[x->prov]--;
	pthread_mutex_unlock(&f->lock);
	x->cb.on_done(x->cb.ctx, &res);
	pthread_mutex_lock(&f->lock);
	pthread_cond_broadcast(&f->cond);
}

/* The head source k answers to x now, as header lines fed to h. */
static void build_head(const struct sf_source *s, const struct sf_xfer *x, int refusing,
		       struct px_http_head *h)
{
	char lines[6][160];
	int n = 0;
	int64_t first = x->offset;
	int64_t last = x->length > 0 ? x->offset + x->length - 1 : x->offset;
	if (last >= s->size)
		last = s->size - 1;
	if (refusing) {
		snprintf(lines[n++], sizeof(lines[0]), "HTTP/1.1 %d Refused", s->http);
		snprintf(lines[n++], sizeof(lines[0]), "Content-Type: text/html");
		snprintf(lines[n++], sizeof(lines[0]), "Content-Length: 120");
	} else if (s->kind == SF_HTML) {
		snprintf(lines[n++], sizeof(lines[0]), "HTTP/1.1 200 OK");
		snprintf(lines[n++], sizeof(lines[0]), "Content-Type: text/html; charset=utf-8");
		snprintf(lines[n++], sizeof(lines[0]), "Content-Length: %d", SF_HTML_LEN);
	} else if (first >= s->size) {
		snprintf(lines[n++], sizeof(lines[0]), "HTTP/1.1 416 Range Not Satisfiable");
		snprintf(lines[n++], sizeof(lines[0]), "Content-Range: bytes */%lld",
			 (long long)s->size);
	} else {
		int64_t clen = last - first + 1 + (s->kind == SF_CLEN ? 1 : 0);
		snprintf(lines[n++], sizeof(lines[0]), "HTTP/1.1 206 Partial Content");
		snprintf(lines[n++], sizeof(lines[0]), "Content-Type: application/octet-stream");
		snprintf(lines[n++], sizeof(lines[0]), "Content-Range: bytes %lld-%lld/%lld",
			 (long long)first, (long long)last, (long long)s->size);
		snprintf(lines[n++], sizeof(lines[0]), "Content-Length: %lld", (long long)clen);
		if (s->kind == SF_GZIP)
			snprintf(lines[n++], sizeof(lines[0]), "Content-Encoding: gzip");
	}
	px_http_head_reset(h);
	for (int i = 0; i < n; i++) {
		size_t len = strlen(lines[i]);
		memcpy(lines[i] + len, "\r\n", 3);
		(void)px_http_head_line(h, lines[i], len + 2);
	}
}

/* x's first step: its answer judged by the real judge. Returns 1 when
 * x ended here. Lock held. */
static int answer(struct sfake *f, struct sf_xfer *x, int64_t now)
{
	const struct sf_source *s = &f->src[x->k];
	struct px_http_head h;
	struct px_http_want w = { x->offset, x->length, x->expect_size, 0 };
	int64_t body = 0, size = -1;
	char why[200] = "";
	int refusing = s->kind == SF_HTTP && f->st[x->k].fault_at <= now;

	build_head(s, x, refusing, &h);
	enum px_status st = px_http_judge(&h, &w, &body, &size, why, sizeof(why));
	if (st != PX_OK) {
		finish(f, x, st, h.status, size, why);
		return 1;
	}
	if (x->length == 0) {
		finish(f, x, PX_OK, h.status, size, "probe");
		return 1;
	}
	x->headed = 1;
	x->pos = body;
	x->end = x->offset + x->length < s->size ? x->offset + x->length : s->size;
	return 0;
}

/* Whether source k is down for a transfer started at `started`: 1 dead
 * for it (reset or refused), 0 not. Lock held. */
static int down_for(const struct sfake *f, int k, int64_t started, int64_t now)
{
	const struct sf_state *st = &f->st[k];
	enum sf_kind kind = f->src[k].kind;
	if ((kind != SF_RESET && kind != SF_COMEBACK) || st->fault_at > now)
		return 0;
	/* a transfer of before the death was reset; one made while it is
	 * down is refused; one made after it came back is served */
	return started <= st->fault_at || started < st->back_at;
}

/* Marks [from, from + n) of source k as delivered, where it falls in a
 * sampled range. Lock held. */
static void mark_seen(struct sfake *f, int k, int64_t from, int64_t n)
{
	for (size_t i = 0; f->seen && i < f->plan.n; i++) {
		int64_t a = f->plan.off[i], b = a + f->plan.len[i];
		int64_t lo = from > a ? from : a, hi = from + n < b ? from + n : b;
		for (int64_t p = lo; p < hi; p++)
			f->seen[k][i][(p - a) / 64] |= 1ULL << ((p - a) % 64);
	}
}

int sf_track_samples(struct sfake *f, int64_t asset_size)
{
	f->seen = calloc(SF_MAX_SOURCES, sizeof(*f->seen));
	if (!f->seen)
		return -1;
	vf_sample_plan(asset_size, &f->plan);
	return 0;
}

int sf_sample_seen(struct sfake *f, int k, int64_t off)
{
	int seen = 1;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; f->seen && i < f->plan.n; i++) {
		int64_t a = f->plan.off[i];
		if (off < a || off >= a + f->plan.len[i])
			continue;
		for (uint32_t b = 0; b < f->plan.len[i] && seen; b++)
			seen = (int)(f->seen[k][i][b / 64] >> (b % 64) & 1);
		break;
	}
	pthread_mutex_unlock(&f->lock);
	return seen;
}

/* Delivers x's next chunk (or drip), starting an offset-triggered fault
 * when the chunk reaches it. Lock held. */
static void deliver(struct sfake *f, struct sf_xfer *x, int64_t now)
{
	const struct sf_source *s = &f->src[x->k];
	int64_t n = x->end - x->pos;
	int trigger = 0;
	if (n > (int64_t)f->chunk)
		n = (int64_t)f->chunk;
	if (s->kind == SF_DRIP && f->st[x->k].fault_at <= now) {
		n = n > 0 ? 1 : 0;
		x->next_ms = now + s->drip_ms;
	}
	if ((s->kind == SF_RESET || s->kind == SF_STALL || s->kind == SF_DRIP ||
	     s->kind == SF_COMEBACK) && f->st[x->k].fault_at == SF_NEVER &&
	    s->at != SF_NEVER && x->pos + n > s->at) {
		n = s->at - x->pos;
		trigger = 1;
	}
	if (n > 0) {
		x->in_data = 1;
		x->resume_pending = 0;
		pthread_mutex_unlock(&f->lock);
		int took = x->cb.on_data(x->cb.ctx, x->pos, s->data + x->pos, (size_t)n);
		pthread_mutex_lock(&f->lock);
		x->in_data = 0;
		if (!took) {
			if (x->resume_pending)
				x->resume_pending = 0;
			else
				x->paused = 1;
			return;
		}
		mark_seen(f, x->k, x->pos, n);
		x->pos += n;
		x->bytes += n;
	}
	if (trigger)
		begin_fault(f, x->k, px_now_ms());
	else if (x->pos >= x->end)
		finish(f, x, PX_OK, 206, -1, "done");
}

/* Moves x one step if it may. Returns 1 when it moved; lowers *soonest to
 * when it may next. Lock held. */
static int step(struct sfake *f, struct sf_xfer *x, int64_t now, int64_t *soonest)
{
	const struct sf_source *s = &f->src[x->k];
	if (x->done)
		return 0;
	if (x->cancelled || f->stop) {
		finish(f, x, x->cancelled ? PX_ECANCELED : PX_ESHUTDOWN, 0, -1, "ended");
		return 1;
	}
	if (x->paused)
		return 0;
	if (now < x->next_ms) {
		if (x->next_ms < *soonest)
			*soonest = x->next_ms;
		return 0;
	}
	if (down_for(f, x->k, x->started, now)) {
		int reset = x->started <= f->st[x->k].fault_at && x->headed;
		finish(f, x, reset ? PX_ETRANSFER : PX_ECONNECT, 0, -1,
		       reset ? "Recv failure: Connection reset by peer" : "Connection refused");
		return 1;
	}
	if (s->kind == SF_STALL && f->st[x->k].fault_at <= now)
		return 0; /* silent until cancelled */
	if (!x->headed && answer(f, x, now))
		return 1;
	deliver(f, x, now);
	return 1;
}

/* Starts the faults due by time; lowers *soonest to the next one. */
static void timed_faults(struct sfake *f, int64_t now, int64_t *soonest)
{
	for (int k = 0; k < f->nsrc; k++) {
		const struct sf_source *s = &f->src[k];
		if (s->fault_ms == SF_NEVER || f->st[k].fault_at != SF_NEVER)
			continue;
		if (now >= f->t0 + s->fault_ms)
			begin_fault(f, k, now);
		else if (f->t0 + s->fault_ms < *soonest)
			*soonest = f->t0 + s->fault_ms;
	}
	for (int k = 0; k < f->nsrc; k++)
		if (f->st[k].back_at > now && f->st[k].back_at < *soonest)
			*soonest = f->st[k].back_at;
}

/* Drops the ended transfers. Thread, lock held, between walks. */
static void compact(struct sfake *f)
{
	
	size_t j = 0;
	for (size_t i = 0; i < f->nx; i++) {
		if (f->xv[i]->done)
			free(f->xv[i]);
		else
			f->xv[j++] = f->xv[i];
	}
	f->nx = j;
}

static void *sf_thread(void *arg)
{
	struct sfake *f = arg;
	pthread_mutex_lock(&f->lock);
	for (;;) {
		int64_t now = px_now_ms(), soonest = SF_NEVER;
		int moved = 0;
		compact(f);
		if (f->stop && f->nx == 0)
			break;
		timed_faults(f, now, &soonest);
		for (size_t i = 0; i < f->nx; i++)
			moved |= step(f, f->xv[i], now, &soonest);
		if (moved)
			continue;
		if (soonest != SF_NEVER) {
			struct timespec ts = { soonest / 1000, (soonest % 1000) * 1000000 };
			pthread_cond_timedwait(&f->cond, &f->lock, &ts);
		} else {
			pthread_cond_wait(&f->cond, &f->lock);
		}
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int sf_start(struct sfake *f)
{
	f->t0 = px_now_ms();
	if (pthread_create(&f->thread, NULL, sf_thread, f) != 0)
		return -1;
	f->started = 1;
	return 0;
}

/* The source a URL names ("/sK/"), -1 for none. */
static int url_source(const struct sfake *f, const char *url)
{
	const char *p = url ? strstr(url, ".test/s") : NULL;
	if (!p || p[7] < '0' || p[7] > '9' || p[8] != '/')
		return -1;
	int k = p[7] - '0';
	return k < f->nsrc ? k : -1;
}

static enum px_status sf_submit(void *impl, const struct px_fetch_params *p,
				const struct px_fetch_cb *cb, uint64_t *id)
{
	struct sfake *f = impl;
	
	struct sf_xfer *x = calloc(1, sizeof(*x));
	enum px_status st = PX_OK;
	int k = url_source(f, p->url);

	pthread_mutex_lock(&f->lock);
	if (!x || f->stop || k < 0) {
		st = !x ? PX_ENOMEM : f->stop ? PX_ESHUTDOWN : PX_EINVAL;
		f->bad_url += k < 0;
		goto out;
	}
	if (f->nx == f->capx) {
		size_t cap = f->capx ? f->capx * 2 : 32;
		struct sf_xfer **v = realloc(f->xv, cap * sizeof(*v));
		if (!v) {
			st = PX_ENOMEM;
			goto out;
		}
		f->xv = v;
		f->capx = cap;
	}
	x->id = f->next_id++;
	x->k = k;
	x->prov = f->src[k].prov;
	x->offset = p->offset;
	x->length = p->length;
	x->expect_size = p->expect_size;
	x->cb = *cb;
	x->started = px_now_ms();
	x->next_ms = f->src[k].kind == SF_SLOW ? x->started + f->src[k].slow_ms : 0;
	f->nreq++;
	if (++f->open[x->prov] > f->max_open[x->prov])
		f->max_open[x->prov] = f->open[x->prov];
	if (f->limit[x->prov] > 0 && f->open[x->prov] > f->limit[x->prov] && !f->over_at) {
		f->over_at = x->started;
		f->over_prov = x->prov;
		f->over_n = f->open[x->prov];
	}
	f->xv[f->nx++] = x;
	*id = x->id;
	x = NULL;
	pthread_cond_broadcast(&f->cond);
out:
	pthread_mutex_unlock(&f->lock);
	free(x);
	return st;
}

static struct sf_xfer *find(struct sfake *f, uint64_t id)
{
	
	for (size_t i = 0; i < f->nx; i++)
		if (f->xv[i]->id == id)
			return f->xv[i];
	return NULL;
}

static void sf_cancel(void *impl, uint64_t id)
{
	struct sfake *f = impl;
	pthread_mutex_lock(&f->lock);
	struct sf_xfer *x = find(f, id);
	if (x && !x->done) {
		x->cancelled = 1;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->lock);
}

static void sf_resume(void *impl, uint64_t id)
{
	struct sfake *f = impl;
	pthread_mutex_lock(&f->lock);
	struct sf_xfer *x = find(f, id);
	if (x && x->paused) {
		x->paused = 0;
		pthread_cond_broadcast(&f->cond);
	} else if (x && x->in_data) {
		x->resume_pending = 1;
	}
	pthread_mutex_unlock(&f->lock);
}

struct px_fetch_ops sf_ops(struct sfake *f)
{
	struct px_fetch_ops ops = { sf_submit, sf_cancel, sf_resume, f };
	return ops;
}

struct sf_state sf_state_of(struct sfake *f, int k)
{
	pthread_mutex_lock(&f->lock);
	struct sf_state s = f->st[k];
	pthread_mutex_unlock(&f->lock);
	return s;
}

void sf_stop(struct sfake *f)
{
	pthread_mutex_lock(&f->lock);
	int was = f->stop;
	f->stop = 1;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	if (!was && f->started)
		pthread_join(f->thread, NULL);
}

void sf_destroy(struct sfake *f)
{
	
	sf_stop(f);
	for (size_t i = 0; i < f->nx; i++)
		free(f->xv[i]);
	free(f->xv);
	free(f->seen);
	f->seen = NULL;
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
}
