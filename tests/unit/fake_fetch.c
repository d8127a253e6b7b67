/*
 * fake_fetch.c - the fake fetcher of the core's unit tests (fake_fetch.h).
 *
 * Every request is logged at submit with its plan (where it stops, with
 * which status, whether it hangs). An inline request is served inside
 * submit, one chunk at a time, until it ends or its consumer pauses it;
 * then, as every threaded request, it is served by the fake's thread, which
 * moves each open request one chunk per pass, ends the cancelled ones and
 * sleeps on f->cond when nothing can move. Callbacks run without the lock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include <cmocka.h>

#include "fake_fetch.h"
#include "px.h"

static void fake_sample(struct fake *f)
{
	if (f->watch) {
		int64_t u = atomic_load(f->watch);
		if (u > f->watch_max)
			f->watch_max = u;
	}
}

static void fake_finish(struct fake *f, struct fake_req *r, enum px_status st)
{
	struct px_fetch_result res;
	memset(&res, 0, sizeof(res));
	res.status = st;
	res.size = -1;
	res.mtime = -1;
	if (r->length == 0 && st == PX_OK && f->mtime) {
		/* a probe: the totals an origin's answer carries */
		res.size = f->probe_url && strstr(r->url, f->probe_url) ? f->probe_size : f->size;
		res.mtime = f->mtime;
		snprintf(res.etag, sizeof(res.etag), "%s", f->etag);
	}
	res.http_status = st == PX_OK ? 206 : st == PX_ENOTFOUND ? 404 : st == PX_EAUTH ? 403 :
			  st == PX_ESERVER ? 503 : 0;
	res.bytes = r->bytes;
	if (r->length2 > 0)
		res.multi = r->second ? 1 : st == PX_OK ? -1 : 0;
	/* as the real fetcher's, an HTTP error's detail names its status */
	if (res.http_status >= 400)
		snprintf(res.detail, sizeof(res.detail), "fake: %s (HTTP %d)", px_strerror(st),
			 res.http_status);
	else
		snprintf(res.detail, sizeof(res.detail), "fake: %s", px_strerror(st));
	if (r->done)
		f->problems++;
	/* a cancelled transfer delivers nothing more (one chunk may have been
	 * in on_data when the cancel came) */
	if (r->cancelled && r->bytes > r->bytes_at_cancel + (int64_t)f->chunk)
		f->problems++;
	r->done++;
	f->ndone++;
	/* like the real fetcher, whose connection is closed or pooled before
	 * on_done: the transfer no longer counts as open */
	f->open_reqs--;
	pthread_mutex_unlock(&f->lock);
	r->cb.on_done(r->cb.ctx, &res);
	pthread_mutex_lock(&f->lock);
	r->ended = 1;
	if (r->stream)
		f->open_streams--;
	fake_sample(f);
	pthread_cond_broadcast(&f->cond);
}

/* Delivers one chunk of r, or ends it. Called with the lock held. */
static void fake_step(struct fake *f, struct fake_req *r)
{
	if (r->pos >= r->limit && r->length2 > 0 && f->multipart && !r->second &&
	    r->final == PX_OK && r->pos == r->offset + r->length) {
		/* the second part of a multipart answer */
		r->second = 1;
		r->pos = r->offset2;
		r->limit = r->offset2 + r->length2;
	}
	if (r->pos >= r->limit) {
		fake_finish(f, r, r->final);
		return;
	}
	int64_t n = r->limit - r->pos;
	if (n > (int64_t)f->chunk)
		n = (int64_t)f->chunk;
	if (r->drip && n > (int64_t)f->drip_bytes)
		n = (int64_t)f->drip_bytes;
	int64_t lo = r->second ? r->offset2 : r->offset;
	int64_t hi = r->second ? r->offset2 + r->length2 : r->offset + r->length;
	if (r->pos < lo || r->pos + n > hi)
		f->problems++;
	/* a skewed request breaks the contract: its later chunks one byte off */
	int64_t at = r->pos + (r->skew && r->pos > r->offset ? 1 : 0);
	r->in_data = 1;
	r->resume_pending = 0;
	pthread_mutex_unlock(&f->lock);
	int took = r->cb.on_data(r->cb.ctx, at, r->data + r->pos, (size_t)n);
	pthread_mutex_lock(&f->lock);
	r->in_data = 0;
	fake_sample(f);
	if (!took) {
		/* back-pressure: the same chunk again after resume */
		f->npause++;
		if (r->resume_pending) {
			r->resume_pending = 0;
			f->nresume++;
		} else {
			r->paused = 1;
		}
		pthread_cond_broadcast(&f->cond);
		return;
	}
	r->pos += n;
	r->bytes += n;
	f->delivered += n;
}

static void *fake_thread(void *arg)
{
	struct fake *f = arg;
	pthread_mutex_lock(&f->lock);
	for (;;) {
		int active = 0, moved = 0;
		int64_t now = px_now_us(), soonest = INT64_MAX;
		int gate = f->gate_open > 0 && f->open_reqs < f->gate_open &&
			   !(f->gate_nreq > 0 && f->nreq >= f->gate_nreq);
		for (int i = 0; i < f->nreq; i++) {
			struct fake_req *r = f->reqs[i];
			if (!r->queued || r->done)
				continue;
			active++;
			if (f->stop || (r->cancelled && !f->hold_cancel)) {
				fake_finish(f, r, r->cancelled ? PX_ECANCELED : PX_ESHUTDOWN);
				moved = 1;
			} else if (!r->hang && !r->paused && !r->cancelled && !gate) {
				int64_t every = r->drip ? f->drip_interval_us : f->chunk_interval_us;
				if (every && r->next_us > now) {
					if (r->next_us < soonest)
						soonest = r->next_us;
					continue;
				}
				fake_step(f, r);
				r->next_us = now + every;
				moved = 1;
			}
		}
		if (f->stop && !active)
			break;
		if (!moved && soonest != INT64_MAX) {
			struct timespec ts = { soonest / 1000000, (soonest % 1000000) * 1000 };
			pthread_cond_timedwait(&f->cond, &f->lock, &ts);
		} else if (!moved) {
			pthread_cond_wait(&f->cond, &f->lock);
		}
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static enum px_status fake_submit(void *impl, const struct px_fetch_params *p,
				  const struct px_fetch_cb *cb, uint64_t *id)
{
	struct fake *f = impl;
	struct fake_req *r = calloc(1, sizeof(*r));

	pthread_mutex_lock(&f->lock);
	if (r && f->refuse_next_ending > 0) {
		int t = f->refuse_next_ending;
		f->refuse_next_ending = 0;
		if (t <= f->nreq && !f->reqs[t - 1]->done) {
			struct fake_req *e = f->reqs[t - 1];
			e->hang = 1; /* the fetch thread steps it no more */
			while (e->in_data && !f->stop) {
				struct timespec ts;
				clock_gettime(CLOCK_MONOTONIC, &ts);
				ts.tv_nsec += 1000000;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				pthread_cond_timedwait(&f->cond, &f->lock, &ts);
			}
			if (!e->done)
				fake_finish(f, e, f->fail_status);
		}
		f->refused++;
		pthread_mutex_unlock(&f->lock);
		free(r);
		return PX_ECONNECT;
	}
	if (!r || f->submit_status != PX_OK) {
		enum px_status st = PX_ENOMEM;
		if (r) {
			st = f->submit_status;
			f->refused++;
		}
		pthread_mutex_unlock(&f->lock);
		free(r);
		return st;
	}
	if (f->nreq == f->capreq) {
		int ncap = f->capreq ? f->capreq * 2 : 64;
		struct fake_req **nr = realloc(f->reqs, (size_t)ncap * sizeof(*nr));
		if (!nr) {
			pthread_mutex_unlock(&f->lock);
			free(r);
			return PX_ENOMEM;
		}
		f->reqs = nr;
		f->capreq = ncap;
	}
	r->index = f->nreq + 1;
	r->id = 7000 + (uint64_t)r->index;
	r->offset = p->offset;
	r->length = p->length;
	r->offset2 = p->offset2;
	r->length2 = p->length2;
	if (p->length2 > 0 && (p->offset2 <= p->offset + p->length ||
			       p->offset2 + p->length2 > f->size))
		f->problems++; /* two ranges must be apart, in order, in the file */
	r->expect_size = p->expect_size;
	snprintf(r->url, sizeof(r->url), "%s", p->url ? p->url : "(null)");
	r->nheaders = p->nheaders;
	if (p->nheaders)
		snprintf(r->header0, sizeof(r->header0), "%s", p->headers[0]);
	r->data = f->data_for ? f->data_for(p->url) : NULL;
	r->cb = *cb;
	int failing = f->fail_from && r->index >= f->fail_from &&
		      r->index < f->fail_from + f->fail_count;
	int64_t fail_after = f->fail_after;
	if (failing && r->index > f->fail_from && f->fail_after_more >= 0)
		fail_after = f->fail_after_more;
	enum px_status host_status = PX_OK;
	for (int i = 0; i < FAKE_MAX_DOWN; i++) {
		if (f->down[i].host[0] && strstr(r->url, f->down[i].host) &&
		    f->down[i].status != PX_OK) {
			failing = 1;
			fail_after = f->down[i].after;
			host_status = f->down[i].status;
		}
	}
	r->hang = f->hang_from && r->index >= f->hang_from;
	r->skew = f->skew_index == r->index;
	r->drip = f->drip_url && f->drip_bytes > 0 && p->url && strstr(p->url, f->drip_url);
	r->final = failing ? (host_status != PX_OK ? host_status : f->fail_status) : PX_OK;
	r->pos = p->offset;
	int64_t end = p->offset + p->length;
	if (end > f->size)
		end = f->size;
	/* nobody should ask for bytes that do not exist; a probe (length 0,
	 * a cutover's size gate) asks for the first byte, size unknown */
	if (!r->data || p->length < 0 || p->offset < 0 || p->offset >= f->size ||
	    (p->length > 0 && p->length > f->size - p->offset) ||
	    (p->length > 0 && p->expect_size != f->size &&
	     !(f->size_unknown_ok && p->expect_size == -1)) ||
	    (p->length == 0 && (p->offset != 0 || p->expect_size >= 0)))
		f->problems++;
	if (!r->data)
		r->data = f->fallback;
	if (failing && end > p->offset + fail_after)
		end = p->offset + fail_after;
	r->limit = end > r->pos ? end : r->pos;
	r->stream = p->length > f->stream_min && p->offset + p->length >= f->size;
	if (++f->open_reqs > f->max_open_reqs)
		f->max_open_reqs = f->open_reqs;
	if (r->stream && ++f->open_streams > f->max_open_streams)
		f->max_open_streams = f->open_streams;
	fake_sample(f);
	r->queued = f->threaded || r->hang;
	f->reqs[f->nreq++] = r;
	*id = r->id;
	if (r->queued) {
		pthread_cond_broadcast(&f->cond);
		while (f->fast_end && !r->ended && !r->paused && !f->stop)
			pthread_cond_wait(&f->cond, &f->lock);
	} else {
		/* inline: every byte and the end before submit returns, unless
		 * the consumer pauses: then the fetch thread takes it over */
		while (!r->done && !r->paused && !r->cancelled)
			fake_step(f, r);
		if (!r->done) {
			r->queued = 1;
			pthread_cond_broadcast(&f->cond);
		}
	}
	pthread_mutex_unlock(&f->lock);
	return PX_OK;
}

static void fake_cancel(void *impl, uint64_t id)
{
	struct fake *f = impl;
	pthread_mutex_lock(&f->lock);
	f->last_cancel = id;
	if (id <= 7000 || id > 7000 + (uint64_t)f->nreq) {
		f->ncancel_unknown++;
	} else {
		struct fake_req *r = f->reqs[id - 7001];
		f->ncancel++;
		if (!r->cancelled)
			r->bytes_at_cancel = r->bytes;
		r->cancelled = 1;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->lock);
}

static void fake_resume(void *impl, uint64_t id)
{
	struct fake *f = impl;
	pthread_mutex_lock(&f->lock);
	if (id > 7000 && id <= 7000 + (uint64_t)f->nreq) {
		struct fake_req *r = f->reqs[id - 7001];
		if (r->paused) {
			r->paused = 0;
			f->nresume++;
			pthread_cond_broadcast(&f->cond);
		} else if (r->in_data) {
			r->resume_pending = 1;
		} else if (r->done) {
			f->nresume_late++; /* allowed: a no-op */
		}
	}
	pthread_mutex_unlock(&f->lock);
}

void fake_init(struct fake *f, int64_t size, int threaded, size_t chunk)
{
	pthread_condattr_t attr;
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &attr);
	pthread_condattr_destroy(&attr);
	f->size = size;
	f->chunk = chunk;
	f->threaded = threaded;
	f->fail_after_more = -1;
	assert_int_equal(pthread_create(&f->thread, NULL, fake_thread, f), 0);
}

void fake_stop(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	int was = f->stopped;
	f->stop = 1;
	f->stopped = 1;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	if (!was)
		pthread_join(f->thread, NULL);
}

void fake_destroy(struct fake *f, int check)
{
	int bad_done = 0, problems, unknown;
	fake_stop(f);
	for (int i = 0; i < f->nreq; i++) {
		if (f->reqs[i]->done != 1 && !bad_done)
			bad_done = i + 1;
		free(f->reqs[i]);
	}
	problems = f->problems;
	unknown = f->ncancel_unknown;
	free(f->reqs);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	if (!check)
		return;
	if (bad_done)
		fail_msg("request %d did not get exactly one on_done", bad_done);
	assert_int_equal(problems, 0);
	assert_int_equal(unknown, 0);
}

struct px_fetch_ops fake_ops(struct fake *f)
{
	struct px_fetch_ops ops = { fake_submit, fake_cancel, fake_resume, f };
	return ops;
}

/* A copy of request i (1-based). */
struct fake_req fake_req(struct fake *f, int i)
{
	pthread_mutex_lock(&f->lock);
	int n = f->nreq;
	struct fake_req r = { 0 };
	if (i >= 1 && i <= n)
		r = *f->reqs[i - 1];
	pthread_mutex_unlock(&f->lock);
	/* asserted without the lock: a failed assert leaves the test */
	if (i < 1 || i > n)
		fail_msg("no request %d (%d so far)", i, n);
	return r;
}

struct fake_counts fake_counts(struct fake *f)
{
	struct fake_counts c;
	pthread_mutex_lock(&f->lock);
	c.nreq = f->nreq;
	c.ncancel = f->ncancel;
	c.ndone = f->ndone;
	c.npause = f->npause;
	c.nresume = f->nresume;
	c.refused = f->refused;
	c.max_open_reqs = f->max_open_reqs;
	c.max_open_streams = f->max_open_streams;
	c.delivered = f->delivered;
	c.watch_max = f->watch_max;
	c.last_cancel = f->last_cancel;
	pthread_mutex_unlock(&f->lock);
	return c;
}

int fake_nreq(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	int n = f->nreq;
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* Waits, at most ms, until pred holds (checked under the lock). */
int fake_wait(struct fake *f, int (*pred)(struct fake *, int), int arg, int64_t ms)
{
	int64_t deadline = px_now_ms() + ms;
	struct timespec ts = { deadline / 1000, (deadline % 1000) * 1000000 };
	int ok;
	pthread_mutex_lock(&f->lock);
	while (!(ok = pred(f, arg)) && px_now_ms() < deadline)
		pthread_cond_timedwait(&f->cond, &f->lock, &ts);
	pthread_mutex_unlock(&f->lock);
	return ok;
}

int all_ended(struct fake *f, int unused)
{
	for (int i = 0; i < f->nreq; i++)
		if (!f->reqs[i]->ended)
			return 0;
	return 1;
}

int req_paused(struct fake *f, int i)
{
	return i >= 1 && i <= f->nreq && f->reqs[i - 1]->paused;
}

int req_cancelled(struct fake *f, int i)
{
	return i >= 1 && i <= f->nreq && f->reqs[i - 1]->cancelled;
}

void fake_fail_next(struct fake *f, int count, enum px_status st, int64_t after)
{
	pthread_mutex_lock(&f->lock);
	f->fail_from = f->nreq + 1;
	f->fail_count = count;
	f->fail_status = st;
	f->fail_after = after;
	pthread_mutex_unlock(&f->lock);
}

void fake_host_down(struct fake *f, const char *host, enum px_status st, int64_t after)
{
	pthread_mutex_lock(&f->lock);
	int slot = -1;
	for (int i = 0; i < FAKE_MAX_DOWN; i++) {
		if (strcmp(f->down[i].host, host) == 0 || (slot < 0 && !f->down[i].host[0]))
			slot = i;
		if (strcmp(f->down[i].host, host) == 0)
			break;
	}
	if (slot >= 0) {
		snprintf(f->down[slot].host, sizeof(f->down[slot].host), "%s", host);
		f->down[slot].status = st;
		f->down[slot].after = after;
	}
	pthread_mutex_unlock(&f->lock);
}
