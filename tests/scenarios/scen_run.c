/*
 * scen_run.c - running one scenario (scen.h): a core on the scenario's
 * fake fetcher (sfake.h), its readers in their own threads, and the
 * invariants checked on every read and at the end.
 *
 * The oracle. A session's served source is the source it was first served
 * from: the session's source when its first read that returned bytes began
 * and ended (when a cutover moved it in between, the one of the two whose
 * bytes these are). From then on:
 *  (1) every byte a read returns equals that source's byte;
 *  (2) a read fails only when no source identical to it (the same size and
 *      bytes, answering proper ranges; one that differs from it inside a
 *      sampled range is not: the core may hold that sample of the served
 *      source, fetched early, and rightly refuse it) could serve over the
 *      whole read: not dead, stalled, dripping or refusing by the time the
 *      read returned (a source that came back counts once it was back when
 *      the read began); before anything was served, any source with the
 *      asset's bytes and size counts. Every read returns within
 *      read_timeout + SC_GRACE_MS;
 *  (3) no provider had more transfers open than its max_connections;
 *  (4) with a state_dir, the stored reference fingerprint is not
 *      contradicted by a majority of the sources.
 */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "context.h"
#include "fingerprint.h"
#include "provider.h"
#include "scen.h"
#include "session.h"
#include "standby.h"
#include "store.h"

#define SC_MTIME 1600000000
#define SC_JOIN_MS 60000        /* a reader that takes longer hangs */

void scen_violation(struct scen *s, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&s->lock);
	if (!s->violated) {
		s->violated = 1;
		va_start(ap, fmt);
		vsnprintf(s->what, sizeof(s->what), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&s->lock);
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- the oracle */

/* Whether source j answers proper ranges of its own bytes at all. */
static int proper(const struct scen *s, int j)
{
	enum sf_kind k = s->src[j].kind;
	return k != SF_HTML && k != SF_GZIP && k != SF_CLEN;
}

/* Whether j can be a session's source at all: proper answers of the
 * asset's size. */
static int servable(const struct scen *s, int j)
{
	return proper(s, j) && s->src[j].size == s->asset_size;
}

/* Whether j is identical to `served` (-1: nothing served yet: whether j
 * has the asset's bytes and size). */
static int identical(const struct scen *s, int j, int served)
{
	if (!servable(s, j))
		return 0;
	if (served < 0)
		return s->src[j].data == s->base;
	return s->src[j].data == s->src[served].data && s->src[j].size == s->src[served].size;
}

/* Whether a source on j's provider refused its credentials (401/403) by
 * t1: the core then uses the provider for nothing (its rule: credentials
 * belong to the provider, not to one URL). */
static int auth_refused(struct scen *s, int j, int64_t t1)
{
	for (int i = 0; i < s->nsrc; i++)
		if (s->src[i].prov == s->src[j].prov && s->src[i].kind == SF_HTTP &&
		    (s->src[i].http == 401 || s->src[i].http == 403) &&
		    sf_state_of(&s->fake, i).fault_at <= t1)
			return 1;
	return 0;
}

/* Whether j could serve over all of [t0, t1]. */
static int able(struct scen *s, int j, int64_t t0, int64_t t1)
{
	struct sf_state st = sf_state_of(&s->fake, j);
	if (auth_refused(s, j, t1))
		return 0;
	switch (s->src[j].kind) {
	case SF_RESET: case SF_STALL: case SF_DRIP: case SF_HTTP:
		return st.fault_at > t1;
	case SF_COMEBACK:
		return st.fault_at > t1 || st.back_at <= t0;
	case SF_HTML: case SF_GZIP: case SF_CLEN:
		return 0;
	default:
		return 1;
	}
}

static int differ_unseen(const struct scen *s, int a, int b);

/* A source that could have served [t0, t1] and holds the session's bytes
 * (mask: the sources that agree with every byte it returned; 0: nothing
 * served yet, then one identical to `served`, or the asset's own), or -1.
 * Sources on the providers of `full` (a bit per provider) do not count. */
static int could_serve(struct scen *s, int served, unsigned mask, int64_t t0, int64_t t1,
		       unsigned full)
{
	for (int j = 0; j < s->nsrc; j++)
		if ((mask ? servable(s, j) && (mask >> j & 1) &&
			    (served < 0 || differ_unseen(s, j, served))
			  : identical(s, j, served)) &&
		    able(s, j, t0, t1) && !(full >> s->src[j].prov & 1))
			return j;
	return -1;
}

/* The providers (a bit each) whose every slot is held by other sessions
 * than sid that a reader has open: the core gives a playback's slot to no
 * other session (a reservation), so a session at such a provider's limit
 * waits for one of them to end. Lingering sessions (no handle) do not
 * count: the core ends them for a slot. */
static unsigned full_by_others(struct scen *s, uint64_t sid)
{
	struct px_core *core = s->core;
	int held[SF_MAX_SOURCES] = { 0 };
	unsigned full = 0;
	pthread_mutex_lock(px_prov_lock(core));
	for (const struct px_session *o = px_sessions_first(core); o; o = o->next)
		if (o->id != sid && o->nhandles > 0 && o->prov < SF_MAX_SOURCES)
			held[o->prov]++;
	pthread_mutex_unlock(px_prov_lock(core));
	for (int p = 0; p < s->nprov; p++)
		if (s->limit[p] > 0 && held[p] >= s->limit[p])
			full |= 1u << p;
	return full;
}

/* The sources whose bytes agree with every byte session sid returned; 0
 * when it returned none yet. */
static unsigned mask_of(struct scen *s, uint64_t sid)
{
	unsigned m = 0;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->nsess; i++)
		if (s->sess_id[i] == sid)
			m = s->sess_mask[i];
	pthread_mutex_unlock(&s->lock);
	return m;
}

/* The served source of session sid, -1 when it served nothing yet. */
static int served_of(struct scen *s, uint64_t sid)
{
	int r = -1;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->nsess; i++)
		if (s->sess_id[i] == sid)
			r = s->sess_src[i];
	pthread_mutex_unlock(&s->lock);
	return r;
}

static int same_bytes(const struct scen *s, int k, int64_t off, const unsigned char *buf,
		      size_t n)
{
	return off + (int64_t)n <= s->src[k].size && memcmp(s->src[k].data + off, buf, n) == 0;
}

/* Fixes the served source of sid at its first bytes: the session's source
 * when the read began, else when it ended (a cutover came between), if
 * that source can serve and these are its bytes; otherwise (a cached head
 * or tail filled from another source) the first source whose bytes they
 * are. */
static int set_served(struct scen *s, uint64_t sid, int before, int after, int64_t off,
		      const unsigned char *buf, size_t n)
{
	int cand[SF_MAX_SOURCES + 2] = { before, after };
	int k = before;
	for (int j = 0; j < s->nsrc; j++)
		cand[j + 2] = j;
	for (int i = 0; i < s->nsrc + 2; i++)
		if (servable(s, cand[i]) && same_bytes(s, cand[i], off, buf, n)) {
			k = cand[i];
			break;
		}
	pthread_mutex_lock(&s->lock);
	if (s->nsess < SC_MAX_SESSIONS) {
		s->sess_id[s->nsess] = sid;
		s->sess_mask[s->nsess] = 0;
		for (int j = 0; j < s->nsrc; j++)
			s->sess_mask[s->nsess] |= (unsigned)servable(s, j) << j;
		s->sess_src[s->nsess++] = k;
	}
	pthread_mutex_unlock(&s->lock);
	return k;
}

/* Whether byte off is in the asset's cached head or tail. */
static int cached(const struct scen *s, int64_t off)
{
	return off < s->head_size || off >= s->asset_size - s->tail_size;
}

/* Whether byte off is inside a range of the asset's sample plan. */
static int in_sample(const struct scen *s, int64_t off)
{
	struct vf_plan plan;
	vf_sample_plan(s->asset_size, &plan);
	for (size_t i = 0; i < plan.n; i++)
		if (off >= plan.off[i] && off < plan.off[i] + plan.len[i])
			return 1;
	return 0;
}

/* Whether sources a and b (of one size) differ only outside every range of
 * the sample plan: what sampling cannot see. */
static int differ_unseen(const struct scen *s, int a, int b)
{
	if (s->src[a].size != s->src[b].size)
		return 0;
	for (int64_t i = 0; i < s->src[a].size; i++)
		if (s->src[a].data[i] != s->src[b].data[i] && in_sample(s, i))
			return 0;
	return 1;
}

/* Sets session sid's mask. */
static void set_mask(struct scen *s, uint64_t sid, unsigned m)
{
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->nsess; i++)
		if (s->sess_id[i] == sid)
			s->sess_mask[i] = m;
	pthread_mutex_unlock(&s->lock);
}

static int unknowable(struct scen *s, int served, int64_t off, const unsigned char *buf,
		      size_t got);

/*
 * (1): the bytes of a read that succeeded. A session's bytes must all be
 * one source's: the sources that agree with every byte it returned (its
 * mask) must not run out. Which of two differing mirrors holds the
 * asset's true bytes no cutover can know; a seam between them is what the
 * promise forbids. A difference outside every sample is what sampling
 * cannot see: counted apart.
 */
static void check_bytes(struct scen *s, uint64_t sid, int served, int64_t off, size_t len,
			const unsigned char *buf, size_t got)
{
	int64_t want = s->asset_size - off;
	want = want < 0 ? 0 : want > (int64_t)len ? (int64_t)len : want;
	if ((int64_t)got != want) {
		scen_violation(s, "read %lld+%zu returned %zu bytes, not %lld (asset size %lld)",
			       (long long)off, len, got, (long long)want, (long long)s->asset_size);
		return;
	}
	unsigned mask = mask_of(s, sid), match = 0;
	for (int j = 0; j < s->nsrc; j++)
		match |= (unsigned)(servable(s, j) && same_bytes(s, j, off, buf, got)) << j;
	if (mask & match) {
		set_mask(s, sid, mask & match);
		return;
	}
	for (int j = 0; j < s->nsrc; j++)
		for (int o = 0; o < s->nsrc; o++)
			if ((mask >> j & 1) && (match >> o & 1) && differ_unseen(s, j, o)) {
				pthread_mutex_lock(&s->lock);
				s->unseen = 1;
				pthread_mutex_unlock(&s->lock);
				set_mask(s, sid, match);
				return;
			}
	for (int j = 0; j < s->nsrc; j++)
		if (mask >> j & 1) {
			served = j;
			break;
		}
	if (match && unknowable(s, served, off, buf, got)) {
		pthread_mutex_lock(&s->lock);
		s->unknown = 1;
		pthread_mutex_unlock(&s->lock);
		set_mask(s, sid, match);
		return;
	}
	const struct sf_source *src = &s->src[served];
	size_t i = 0;
	while (off + (int64_t)i < src->size && i < got && src->data[off + i] == buf[i])
		i++;
	int other = -1;
	for (int j = 0; j < s->nsrc && other < 0; j++)
		if (match >> j & 1)
			other = j;
	char whose[64] = "no source's bytes";
	if (other >= 0)
		snprintf(whose, sizeof(whose), "the bytes of s%d (%s)", other,
			 sf_kind_name(s->src[other].kind));
	scen_violation(s, "byte %lld of asset a is 0x%02x; every byte the session returned "
		       "before was s%d's (%s), whose byte is %s; the read returned %s%s",
		       (long long)(off + (int64_t)i), buf[i], served, sf_kind_name(src->kind),
		       off + (int64_t)i < src->size ? "another" : "past its end", whose,
		       cached(s, off + (int64_t)i) ? " (the byte is in the cached head or tail)" :
		       "");
}

/*
 * Whether the bytes of a read that differ from `served`'s all lie where
 * the core could not know `served`'s bytes: inside sampled ranges it never
 * delivered in full, when its fault came within read_timeout of the start
 * (a source that dies in its first seconds, before its samples ahead of
 * the readers could be fetched early: a standby that differs exactly
 * there matches every sample the core has; issue 25's partial reference).
 * A source that lived longer had its samples fetched early, and a
 * difference there is a violation.
 */
static int unknowable(struct scen *s, int served, int64_t off, const unsigned char *buf,
		      size_t got)
{
	const struct sf_source *src = &s->src[served];
	struct sf_state st = sf_state_of(&s->fake, served);
	if (st.fault_at == SF_NEVER || st.fault_at - s->fake.t0 >= s->read_timeout_ms ||
	    off + (int64_t)got > src->size)
		return 0;
	for (size_t i = 0; i < got; i++)
		if (src->data[off + (int64_t)i] != buf[i] &&
		    (!in_sample(s, off + (int64_t)i) ||
		     sf_sample_seen(&s->fake, served, off + (int64_t)i)))
			return 0;
	return 1;
}

/* A read failed or came late, timed out while the machine withheld the
 * process for as long as the timing that failed it: not counted. */
static void starved(struct scen *s)
{
	pthread_mutex_lock(&s->lock);
	s->starved = 1;
	pthread_mutex_unlock(&s->lock);
}

/* Checks one read of h; returns 0 when it succeeded. */
static int do_read(struct scen *s, struct px_handle *h, int64_t off, size_t len,
		   unsigned char *buf)
{
	struct px_session *ps = px_handle_session(h);
	uint64_t sid = px_handle_session_id(h);
	size_t got = 0;
	int before = (int)atomic_load(&ps->source);
	unsigned full = full_by_others(s, sid);
	int64_t t0 = px_now_ms();
	enum px_status st = px_handle_read(h, off, len, buf, &got);
	int64_t t1 = px_now_ms();
	full &= full_by_others(s, sid); /* at the read's start and its end */
	int after = (int)atomic_load(&ps->source);
	int served = served_of(s, sid);

	pthread_mutex_lock(&s->lock);
	s->nreads++;
	s->nfailed += st != PX_OK;
	s->ncut += before != after;
	pthread_mutex_unlock(&s->lock);
	/* the time the machine withheld the process around this read: a
	 * stall judged on an identical source can start before the read */
	int64_t lost = sc_lag_lost(t0 - s->stall_ms, t1);
	if (t1 - t0 > s->read_timeout_ms + SC_GRACE_MS) {
		if (lost >= t1 - t0 - s->read_timeout_ms)
			starved(s);
		else
			scen_violation(s, "read %lld+%zu took %lld ms (%s), over read_timeout "
				       "%lld + %d (%lld ms withheld by the machine)",
				       (long long)off, len, (long long)(t1 - t0), px_strerror(st),
				       (long long)s->read_timeout_ms, SC_GRACE_MS,
				       (long long)lost);
	}
	if (st == PX_OK) {
		if (served < 0 && got > 0)
			served = set_served(s, sid, before, after, off, buf, got);
		if (served >= 0)
			check_bytes(s, sid, served, off, len, buf, got);
		return 0;
	}
	unsigned mask = mask_of(s, sid);
	int j = could_serve(s, served, mask, t0, t1, full);
	if (j < 0 && could_serve(s, served, mask, t0, t1, 0) >= 0) {
		pthread_mutex_lock(&s->lock);
		s->slots_taken = 1;
		pthread_mutex_unlock(&s->lock);
	}
	char from[64] = "nothing served yet";
	if (served >= 0)
		snprintf(from, sizeof(from), "served from s%d (%s)", served,
			 sf_kind_name(s->src[served].kind));
	if (j >= 0 && (st != PX_ETIMEDOUT || lost < s->stall_ms / 2))
		scen_violation(s, "read %lld+%zu failed (%s) after %lld ms; session %llu %s, "
			       "and s%d (%s) could serve that offset (%lld ms withheld by the "
			       "machine)", (long long)off, len, px_strerror(st),
			       (long long)(t1 - t0), (unsigned long long)sid, from, j,
			       sf_kind_name(s->src[j].kind), (long long)lost);
	else if (j >= 0)
		starved(s);
	return -1;
}

/* ---- readers */

#define SC_MAX_CHUNK (256 << 10)

struct rctx {
	struct scen *s;
	int i;
	pthread_t thread;
	int started;
	unsigned char buf[SC_MAX_CHUNK];
};

/* Reads [from, to) in chunks, pausing pace_ms between them. */
static int run_range(struct scen *s, struct px_handle *h, unsigned char *buf, int64_t from,
		     int64_t to, size_t chunk, int64_t pace_ms)
{
	for (int64_t off = from; off < to; off += (int64_t)chunk) {
		if (do_read(s, h, off, chunk, buf) != 0)
			return -1;
		if (pace_ms)
			sleep_ms(pace_ms);
	}
	return 0;
}

/* SC_FORCE_SWITCH: the end of the asset from the session's source, then
 * the session moved by hand to s1, which differs in its last 4 KiB, then
 * the end read again: the session's bytes are no longer one source's, and
 * the checker must see it. */
static void force_switch(struct scen *s, struct px_handle *h, unsigned char *buf)
{
	if (do_read(s, h, 0, 4096, buf) != 0 ||
	    run_range(s, h, buf, s->asset_size - 8192, s->asset_size, 4096, 0) != 0)
		return;
	if (px_session_switch(px_handle_session(h), 1) != PX_OK)
		return;
	pthread_mutex_lock(&s->lock);
	s->switch_done++;
	pthread_mutex_unlock(&s->lock);
	(void)run_range(s, h, buf, s->asset_size - 8192, s->asset_size, 4096, 0);
}

static void run_pattern(struct scen *s, const struct sc_reader *rd, struct px_handle *h,
			unsigned char *buf)
{
	int64_t size = s->asset_size;
	int64_t to = rd->to < size ? rd->to : size;
	struct sc_rng r = { rd->seed };
	switch (rd->pat) {
	case SC_SEQ:
		(void)run_range(s, h, buf, rd->from, to, rd->chunk, 0);
		break;
	case SC_PACED: {
		/* a player's pace, kept to about 1.5 s in all */
		int64_t n = (to - rd->from) / (int64_t)rd->chunk + 1;
		int64_t pace = rd->pace_ms * n > 1500 ? 1500 / n : rd->pace_ms;
		(void)run_range(s, h, buf, rd->from, to, rd->chunk, pace);
		break;
	}
	case SC_SEEKS:
		for (int i = 0; i < rd->nseeks; i++) {
			int64_t off = sc_range(&r, 0, size - 1) & ~4095LL;
			int64_t end = off + sc_range(&r, 1, 4) * (int64_t)rd->chunk;
			if (run_range(s, h, buf, off, end < size ? end : size, rd->chunk, 0) != 0)
				break;
		}
		break;
	case SC_SCAN:
		if (run_range(s, h, buf, 0, rd->head < size ? rd->head : size, rd->chunk, 0) == 0 &&
		    run_range(s, h, buf, size > rd->tail ? size - rd->tail : 0, size + 1, rd->chunk,
			      0) == 0)
			(void)do_read(s, h, size, 4096, buf); /* at the end: 0 bytes */
		break;
	default:
		break;
	}
}

/* Whether an open may fail now: only when no source with the asset's
 * bytes could serve, or every provider is at its limit (PX_EBUSY). */
static void check_open(struct scen *s, enum px_status st, int64_t t0)
{
	int j = st == PX_EBUSY ? -1 : could_serve(s, -1, 0, t0, px_now_ms(), 0);
	if (j >= 0)
		scen_violation(s, "open failed (%s) while s%d (%s) could serve", px_strerror(st),
			       j, sf_kind_name(s->src[j].kind));
}

static void *reader_main(void *arg)
{
	struct rctx *c = arg;
	struct scen *s = c->s;
	const struct sc_reader *rd = &s->rd[c->i];
	struct px_handle *h = NULL;

	sleep_ms(rd->start_ms);
	int64_t t0 = px_now_ms();
	enum px_status st = px_handle_open(s->core, 0, rd->client, &h);
	if (st != PX_OK) {
		check_open(s, st, t0);
		return NULL;
	}
	if (s->mode == SC_FORCE_SWITCH)
		force_switch(s, h, c->buf);
	else
		run_pattern(s, rd, h, c->buf);
	px_handle_close(h);
	return NULL;
}

/* ---- the core */

static int make_catalog(struct scen *s, char *err, size_t errlen)
{
	char text[4096];
	size_t n = 0;
	n += (size_t)snprintf(text + n, sizeof(text) - n, "{\"providers\": [");
	for (int p = 0; p < s->nprov; p++) {
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s{\"name\": \"p%d-%s\"",
				      p ? ", " : "", p, s->tag);
		if (s->limit[p])
			n += (size_t)snprintf(text + n, sizeof(text) - n, ", \"max_connections\": %d",
					      s->limit[p]);
		n += (size_t)snprintf(text + n, sizeof(text) - n, "}");
	}
	/* the asset's id, its providers' names and its URLs name the seed: a
	 * run's log says whose each line is */
	n += (size_t)snprintf(text + n, sizeof(text) - n, "], \"assets\": [{\"id\": \"a%s\", "
			      "\"path\": \"a.bin\", \"mtime\": %d, ", s->tag, SC_MTIME);
	if (s->size_in_catalog)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "\"size\": %lld, ",
				      (long long)s->size);
	n += (size_t)snprintf(text + n, sizeof(text) - n, "\"sources\": [");
	for (int k = 0; k < s->nsrc; k++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s{\"url\": \"http://p%d.s%s.test/"
				      "s%d/a.bin\", \"provider\": \"p%d-%s\"}", k ? ", " : "",
				      s->src[k].prov, s->tag, k, s->src[k].prov, s->tag);
	n += (size_t)snprintf(text + n, sizeof(text) - n, "]}]}");
	if (n >= sizeof(text)) {
		snprintf(err, errlen, "catalog longer than %zu bytes", sizeof(text));
		return -1;
	}
	return px_catalog_parse("scenario.json", text, n, &s->cat, err, errlen) == PX_OK ? 0 : -1;
}

static void set_config(struct scen *s)
{
	struct px_config *c = &s->cfg;
	px_config_init(c);
	c->read_timeout_ms = s->read_timeout_ms;
	c->connect_timeout_ms = 500;
	c->probe_timeout_ms = 2000;
	c->retries = s->retries;
	c->readahead_budget = 32LL << 20;
	c->head_size = s->head_size;
	c->tail_size = s->tail_size;
	c->cache_size = 8LL << 20;
	c->session_ttl_ms = 300;
	c->admission_timeout_ms = 1000;
	c->liveness_ttl_ms = 2000;
	c->liveness_interval_ms = s->liveness_ms;
	c->stall_timeout_ms = s->stall_ms;
	c->standby_delay_ms = s->standby_delay_ms;
	if (s->use_state)
		c->state_dir = strdup(s->state_dir);
}

static int start_core(struct scen *s, char *err, size_t errlen)
{
	if (s->use_state) {
		snprintf(s->state_dir, sizeof(s->state_dir), "%s/seamfs-scen-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(s->state_dir)) {
			snprintf(err, errlen, "mkdtemp %s: %s", s->state_dir, strerror(errno));
			s->use_state = 0;
			return -1;
		}
	}
	set_config(s);
	if (make_catalog(s, err, errlen) != 0)
		return -1;
	sf_init(&s->fake, s->src, s->nsrc, s->limit, s->nprov, 64 << 10);
	if (sf_track_samples(&s->fake, s->asset_size) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->ops = sf_ops(&s->fake);
	if (sf_start(&s->fake) != 0) {
		snprintf(err, errlen, "cannot start the fake's thread");
		return -1;
	}
	if (px_core_new(&s->cfg, s->cat, &s->ops, &s->core) != PX_OK)
		goto fail;
	/* the verifier's workers, as the daemon has them: the early fetch
	 * of a playing source's samples and the standbys' sweeps run */
	px_standby_set_workers(s->core, 2);
	if (px_core_discover(s->core, NULL, SC_MTIME) != PX_OK) {
fail:
		snprintf(err, errlen, "the core did not start");
		return -1;
	}
	s->asset_size = px_core_asset_size(s->core, 0);
	return 0;
}

/* ---- the end */

/* (3): no provider over its limit. */
static void check_limits(struct scen *s)
{
	pthread_mutex_lock(&s->fake.lock);
	int64_t at = s->fake.over_at;
	int p = s->fake.over_prov, n = s->fake.over_n;
	pthread_mutex_unlock(&s->fake.lock);
	if (at)
		scen_violation(s, "provider p%d had %d transfers open at once (%lld ms in), "
			       "max_connections %d", p, n, (long long)(at - s->fake.t0),
			       s->limit[p]);
}

struct memsrc {
	const unsigned char *data;
	int64_t size;
};

static enum px_status mem_read(void *ctx, int64_t off, size_t len, void *buf, size_t *got)
{
	const struct memsrc *m = ctx;
	*got = 0;
	if (off < 0 || off + (int64_t)len > m->size)
		return PX_ETRANSFER;
	memcpy(buf, m->data + off, len);
	*got = len;
	return PX_OK;
}

/* The id of the fingerprint of source j's bytes; -1 when none. */
static int source_id(const struct scen *s, int j, struct vf_fingerprint *fp,
		     char id[VF_FINGERPRINT_ID_LEN])
{
	struct memsrc m = { s->src[j].data, s->src[j].size };
	struct vf_reader rd = { .read = mem_read, .ctx = &m };
	size_t bad;
	char why[200];
	if (!proper(s, j) || vf_fingerprint_take(&rd, m.size, fp, &bad, why, sizeof(why)) != PX_OK)
		return -1;
	return vf_fingerprint_id(fp, id) == PX_OK ? 0 : -1;
}

/* (4): the stored reference against the sources' own bytes. */
static void check_store(struct scen *s)
{
	char dir[256], err[256], name[512], ref[VF_FINGERPRINT_ID_LEN], id[40];
	char ids[SF_MAX_SOURCES][VF_FINGERPRINT_ID_LEN];
	struct vf_store *st = NULL;
	struct vf_record *rec = malloc(sizeof(*rec));
	struct vf_fingerprint *fp = malloc(sizeof(*fp));

	snprintf(dir, sizeof(dir), "%s/fingerprints", s->state_dir);
	if (!rec || !fp || access(dir, F_OK) != 0 ||
	    vf_store_open(dir, NULL, NULL, &st, err, sizeof(err)) != PX_OK)
		goto out;
	snprintf(id, sizeof(id), "a%s", s->tag);
	if (!vf_store_reference(st, id, name, sizeof(name), rec) || !rec->has_fp ||
	    vf_fingerprint_id(&rec->fp, ref) != PX_OK)
		goto out;
	for (int j = 0; j < s->nsrc; j++)
		if (source_id(s, j, fp, ids[j]) != 0)
			ids[j][0] = '\0';
	for (int j = 0; j < s->nsrc; j++) {
		int agree = 0;
		for (int i = 0; i < s->nsrc; i++)
			agree += ids[j][0] && strcmp(ids[i], ids[j]) == 0;
		if (2 * agree > s->nsrc && strcmp(ids[j], ref) != 0) {
			scen_violation(s, "the stored reference of asset a (%s, from %s) is "
				       "contradicted by %d of %d sources (fingerprint %s)", ref, name,
				       agree, s->nsrc, ids[j]);
			break;
		}
	}
out:
	vf_store_free(st);
	free(rec);
	free(fp);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Waits for the readers; a reader that does not return is a hang. */
static void join_readers(struct scen *s, struct rctx *rc)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += SC_JOIN_MS / 1000;
	for (int i = 0; i < s->nreaders; i++) {
		if (!rc[i].started)
			continue;
		if (pthread_timedjoin_np(rc[i].thread, NULL, &ts) == 0)
			continue;
		scen_violation(s, "reader %d has not returned %d s after it began (a read hangs)",
			       i, SC_JOIN_MS / 1000);
		scen_hung(s); /* does not return */
	}
}

int scen_run(struct scen *s)
{
	char err[512] = "";
	struct rctx *rc = calloc((size_t)s->nreaders, sizeof(*rc));

	pthread_mutex_init(&s->lock, NULL);
	if (!rc || start_core(s, err, sizeof(err)) != 0) {
		scen_violation(s, "setup failed: %s", rc ? err : "out of memory");
	} else if (s->asset_size >= 0) {
		for (int i = 0; i < s->nreaders; i++) {
			rc[i].s = s;
			rc[i].i = i;
			rc[i].started = pthread_create(&rc[i].thread, NULL, reader_main, &rc[i]) == 0;
		}
		join_readers(s, rc);
	}
	if (s->fake.t0)
		sf_stop(&s->fake);
	px_core_free(s->core);
	if (s->fake.t0)
		check_limits(s);
	px_catalog_free(s->cat);
	px_config_release(&s->cfg);
	if (s->fake.t0)
		sf_destroy(&s->fake);
	if (s->use_state) {
		check_store(s);
		(void)nftw(s->state_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	}
	free(rc);
	pthread_mutex_destroy(&s->lock);
	return s->violated;
}
