/*
 * snapshot.c - the core's state copied for reporting: the one place from
 * which status.json (report.c) and the metrics (metrics.c) read the
 * context. They format the copy afterwards, with no lock held.
 *
 * Locks. Each part is copied under the lock that guards it, taken once,
 * briefly and alone, never two at once: reload_lock (the last reload's
 * outcome; with the rows only), prov_lock (providers, sessions,
 * admission, the catalog's counts, and the clock reading every age goes
 * by), the transcode supervisor's own lock (inside px_transcode_snapshot),
 * vf_lock (verification states, cutovers, and the catalog's ids and
 * sources the rows name), cache_lock (bytes cached). Where other code
 * nests the core's locks (reload.c, sources.c) the order is reload_lock,
 * prov_lock, vf_lock; they are taken here in that order too. A reload
 * holds reload_lock across its size probes, so the metrics' snapshot
 * never takes it: a scrape does not wait for a reload (status.json always
 * has). Counters and histograms are atomics, read without a lock. A
 * snapshot is consistent within each part, not across parts: a cutover
 * may show under vf_lock that the sessions, copied a moment earlier under
 * prov_lock, did not see yet.
 *
 * Cost. Providers and sessions are copied whole (a few hundred at most),
 * and the counters. With PX_SNAPSHOT_ROWS, also the assets status.json
 * lists: those listed with more than one source. Finding them scans every
 * asset under vf_lock, as the report always has, but only those are
 * copied: a library of 100 000 single-source files costs a scan of flags
 * and no copy, while one whose every file has a standby costs a row per
 * asset, as its status.json has. Transcodes: one row per planned one,
 * never one per asset.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "health.h"
#include "hosts.h"
#include "kvstore.h"
#include "provider.h"
#include "snapshot.h"
#include "transcode.h"

_Static_assert(sizeof(((struct px_core *)0)->recent) / sizeof(struct cutover_rec) ==
	       PX_SNAP_RECENT, "the snapshot keeps every cutover the core remembers");

/* A copy of s (NULL as ""); sets *oom when there is no memory. */
static char *copy(const char *s, int *oom)
{
	char *c = strdup(s ? s : "");
	if (!c)
		*oom = 1;
	return c;
}

static enum px_snap_state state_of(const struct prov_rt *p, int64_t now, int64_t ttl)
{
	if (p->drained)
		return PX_SNAP_DRAINED;
	if (p->auth_failed)
		return PX_SNAP_AUTH_ERROR;
	if ((p->bad_since && now - p->bad_since >= ttl) || p->remote_down)
		return PX_SNAP_DOWN;
	if (p->bad_since)
		return PX_SNAP_FAILING;
	return PX_SNAP_LIVE;
}

static void take_reload(struct px_core *core, struct px_snapshot *s)
{
	pthread_mutex_lock(&core->reload_lock);
	s->n_reloads = core->n_reloads;
	s->reload_ok = core->reload_ok;
	memcpy(s->reload_msg, core->reload_msg, sizeof(s->reload_msg));
	s->reload_msg[sizeof(s->reload_msg) - 1] = '\0';
	s->reload_when = core->reload_when;
	pthread_mutex_unlock(&core->reload_lock);
}

static void take_session(const struct px_core *core, const struct px_session *x,
			 struct px_snap_session *o, int *oom)
{
	const struct px_asset *a = &core->cat->assets[x->asset];
	o->id = x->id;
	o->client = x->client;
	o->asset = copy(a->id, oom);
	o->path = copy(a->path, oom);
	o->source = copy(a->sources[atomic_load(&x->source)].shown, oom);
	o->provider = copy(core->cat->providers[x->prov].name, oom);
	o->offset = atomic_load(&x->offset);
	o->served = atomic_load(&x->served);
	o->created = x->created;
	o->nhandles = x->nhandles;
	o->xfers = x->xfers;
	o->extra = x->xfers_extra;
	o->exhausted = x->exhausted;
	o->playback = atomic_load(&x->middle) >= PX_PLAY_BYTES;
}

static enum px_status take_providers(struct px_core *core, struct px_snapshot *s, int rows)
{
	int oom = 0;
	size_t n = 0;

	pthread_mutex_lock(&core->prov_lock);
	s->now = core->now();
	s->nassets = core->cat->nassets; /* grows under prov_lock and vf_lock */
	/* changed only where a reload publishes its tree, under reload_lock
	 * alone: read without it, as a word (see Locks above) */
	s->nlisted = __atomic_load_n(&core->nlisted, __ATOMIC_RELAXED);
	s->nprovs = core->cat->nproviders;
	s->provs = calloc(s->nprovs + 1, sizeof(*s->provs));
	if (!s->provs) {
		oom = 1;
		goto out;
	}
	for (size_t i = 0; i < s->nprovs; i++) {
		const struct prov_rt *p = &core->provs[i];
		struct px_snap_provider *o = &s->provs[i];
		o->name = copy(core->cat->providers[i].name, &oom);
		o->state = state_of(p, s->now, core->cfg->liveness_ttl_ms);
		memcpy(o->why, p->why, sizeof(o->why));
		o->why[sizeof(o->why) - 1] = '\0';
		o->auth_failed = p->auth_failed;
		memcpy(o->auth_why, p->auth_why, sizeof(o->auth_why));
		o->auth_why[sizeof(o->auth_why) - 1] = '\0';
		o->sessions = p->sessions;
		o->xfers = p->xfers;
		o->bg = p->bg;
		o->held = p->held;
		o->max = p->max;
		o->cl = p->cl;
		o->granted = p->granted;
		o->others_slots = p->others_slots;
		o->others_sessions = p->others_sessions;
		o->cl_degraded = p->cl_degraded;
		o->drained = p->drained;
		o->last_good = p->last_good;
		o->n_ok = p->n_ok;
		o->n_bad = p->n_bad;
		o->n_waits = p->n_waits;
		o->n_busy = p->n_busy;
		o->n_preempted = p->n_preempted;
		o->n_evicted = p->n_evicted;
		o->n_probes = p->n_probes;
		o->n_auth = p->n_auth;
	}
	for (const struct px_session *x = core->sessions; x; x = x->next) {
		if (x->nhandles)
			s->sessions_open++;
		else
			s->sessions_lingering++;
		if (atomic_load(&x->middle) >= PX_PLAY_BYTES)
			s->sessions_playback++;
		else
			s->sessions_scan++;
		n++;
	}
	if (rows) {
		s->sessions = calloc(n + 1, sizeof(*s->sessions));
		if (!s->sessions) {
			oom = 1;
			goto out;
		}
		for (const struct px_session *x = core->sessions; x; x = x->next)
			take_session(core, x, &s->sessions[s->nsessions++], &oom);
	}
	s->n_admit_busy = core->n_admit_busy;
	memcpy(s->admit_why, core->admit_why, sizeof(s->admit_why));
	s->admit_why[sizeof(s->admit_why) - 1] = '\0';
	s->admit_when = core->admit_when;
out:
	pthread_mutex_unlock(&core->prov_lock);
	return oom ? PX_ENOMEM : PX_OK;
}

/* The supervisor's own copy of its planned transcodes; their asset ids
 * are named later, under vf_lock (take_verification). */
static enum px_status take_transcodes(struct px_core *core, struct px_snapshot *s)
{
	struct px_tc_info *info = NULL;
	enum px_status st = PX_ENOMEM;
	size_t cap = 16, n;

	if (!core->tc)
		return PX_OK;
	/* px_transcode_snapshot fills at most cap: one lock taken while there
	 * are fewer, and never a row per asset */
	for (;;) {
		struct px_tc_info *more = realloc(info, cap * sizeof(*info));
		if (!more)
			goto out;
		info = more;
		n = px_transcode_snapshot(core->tc, info, cap);
		if (n < cap)
			break;
		cap *= 2;
	}
	s->transcodes = calloc(n + 1, sizeof(*s->transcodes));
	if (!s->transcodes)
		goto out;
	for (size_t i = 0; i < n; i++)
		s->transcodes[i].info = info[i];
	s->ntranscodes = n;
	st = PX_OK;
out:
	free(info);
	return st;
}

/* Whether status.json lists the asset: listed, with a standby. */
static int shown(const struct px_core *core, size_t i)
{
	return core->assets[i].listed && core->cat->assets[i].nsources >= 2;
}

static void take_asset(const struct px_core *core, size_t i, struct px_snap_asset *o, int *oom)
{
	const struct px_asset *a = &core->cat->assets[i];
	const struct asset_rt *rt = &core->assets[i];
	const struct src_rt *src = __atomic_load_n(&rt->src, __ATOMIC_ACQUIRE);

	o->id = copy(a->id, oom);
	o->path = copy(a->path, oom);
	o->size = rt->size;
	if (rt->ref)
		memcpy(o->reference, rt->ref_id, sizeof(o->reference));
	o->reference[sizeof(o->reference) - 1] = '\0';
	o->sources = calloc(a->nsources, sizeof(*o->sources));
	if (!o->sources) {
		*oom = 1;
		return;
	}
	o->nsources = a->nsources;
	for (size_t k = 0; k < a->nsources; k++) {
		struct px_snap_source *so = &o->sources[k];
		so->source = copy(a->sources[k].shown, oom);
		so->provider = copy(core->cat->providers[a->sources[k].provider].name, oom);
		so->verification = atomic_load(&rt->dead[k])
			? "dead" : px_standby_state_name(src ? src[k].state : VS_UNKNOWN);
		so->why = copy(src ? px_src_why_of(&src[k]) : "", oom);
		so->inconclusive = src ? src[k].inconclusive : 0;
	}
}

static enum px_status take_verification(struct px_core *core, struct px_snapshot *s, int rows)
{
	int oom = 0;

	pthread_mutex_lock(&core->vf_lock);
	memcpy(s->n_cutovers, core->n_cutovers, sizeof(s->n_cutovers));
	memcpy(s->n_verified, core->n_verified, sizeof(s->n_verified));
	s->n_exhausted = core->n_exhausted;
	memcpy(s->exhausted_why, core->exhausted_why, sizeof(s->exhausted_why));
	s->exhausted_why[sizeof(s->exhausted_why) - 1] = '\0';
	if (!rows)
		goto out;

	uint64_t nr = core->nrecent < PX_SNAP_RECENT ? core->nrecent : PX_SNAP_RECENT;
	for (uint64_t i = 0; i < nr; i++) {
		const struct cutover_rec *c = &core->recent[(core->nrecent - 1 - i) % PX_SNAP_RECENT];
		const struct px_asset *a = &core->cat->assets[c->asset];
		struct px_snap_cutover *o = &s->recent[s->nrecent++];
		o->session = c->session;
		o->asset = copy(a->id, &oom);
		o->from = copy(a->sources[c->from].shown, &oom);
		o->to = copy(a->sources[c->to].shown, &oom);
		o->offset = c->offset;
		o->ms = c->ms;
		o->when = c->when;
		o->reason = c->reason;
	}
	for (size_t i = 0; i < s->ntranscodes; i++)
		s->transcodes[i].asset = copy(core->cat->assets[s->transcodes[i].info.asset].id,
					      &oom);

	size_t n = 0, na = core->cat->nassets;
	for (size_t i = 0; i < na; i++)
		n += (size_t)shown(core, i);
	s->assets = calloc(n + 1, sizeof(*s->assets));
	if (!s->assets) {
		oom = 1;
		goto out;
	}
	for (size_t i = 0; i < na && s->nshown < n; i++)
		if (shown(core, i))
			take_asset(core, i, &s->assets[s->nshown++], &oom);
out:
	pthread_mutex_unlock(&core->vf_lock);
	return oom ? PX_ENOMEM : PX_OK;
}

static void take_reads(struct px_core *core, struct px_snapshot *s)
{
	pthread_mutex_lock(&core->cache_lock);
	s->cache_used = core->cache_used;
	pthread_mutex_unlock(&core->cache_lock);
	px_disk_stats(core->disk, &s->disk);
	s->n_cache_hits = atomic_load(&core->n_cache_hits);
	s->n_scans_cached = atomic_load(&core->n_scans_cached);
	s->n_scans = atomic_load(&core->n_scans);
	s->n_scan_requests = atomic_load(&core->n_scan_requests);
	s->n_multipart = atomic_load(&core->n_multipart);
	s->n_cache_fills = atomic_load(&core->n_cache_fills);
	s->n_streams = atomic_load(&core->n_streams);
	s->n_stream_restarts = atomic_load(&core->n_stream_restarts);
	s->n_stream_waits = atomic_load(&core->n_stream_waits);
	s->n_par_streams = atomic_load(&core->n_par_streams);
	s->n_parts = atomic_load(&core->n_parts);
	s->stream_wait_us = atomic_load(&core->stream_wait_us);
	s->n_direct = atomic_load(&core->n_direct);
	s->ra_used = atomic_load(&core->ra_used);
	s->ra_budget = core->cfg->readahead_budget;
	s->cache_size = core->cfg->cache_size;
	px_histo_snapshot(&core->h_read, &s->h_read);
	px_histo_snapshot(&core->h_ttfb, &s->h_ttfb);
}

/* Sums over the transcodes (their rows when taken, else a snapshot of
 * them): links found in job directories, and takeovers (cluster mode). */
static void take_tc_sums(struct px_core *core, struct px_snapshot *s)
{
	struct px_tc_info info[64];
	size_t n = s->transcodes ? s->ntranscodes
		   : core->tc ? px_transcode_snapshot(core->tc, info, 64) : 0;
	for (size_t i = 0; i < n; i++) {
		const struct px_tc_info *t = s->transcodes ? &s->transcodes[i].info : &info[i];
		s->n_work_links += t->work_links;
		s->n_takeovers += t->takeovers;
	}
}

/* The store's state and the hosts the heartbeat last listed: copies, no
 * call to the store (kvstore.c's own lock, hosts.c's). */
static void take_cluster(struct px_core *core, struct px_snapshot *s)
{
	if (!core->store)
		return;
	s->clustered = 1;
	snprintf(s->store_url, sizeof(s->store_url), "%s", px_store_url(core->store));
	snprintf(s->cluster, sizeof(s->cluster), "%s", px_store_prefix(core->store));
	if (core->hosts)
		snprintf(s->host_id, sizeof(s->host_id), "%s", px_hosts_self(core->hosts));
	px_store_state(core->store, &s->store);
	s->nhosts = px_hosts_list(core->hosts, s->hosts, PX_HOSTS_MAX);
}

enum px_status px_snapshot_new(struct px_core *core, unsigned what, struct px_snapshot **out)
{
	struct px_snapshot *s = calloc(1, sizeof(*s));
	int rows = (what & PX_SNAPSHOT_ROWS) != 0;
	enum px_status st = PX_ENOMEM;

	*out = NULL;
	if (!s)
		goto out;
	s->worker = core->worker; /* set before the mount serves, then fixed */
	if (rows)
		take_reload(core, s);
	if ((st = take_providers(core, s, rows)) != PX_OK)
		goto out;
	if (rows && (st = take_transcodes(core, s)) != PX_OK)
		goto out;
	if ((st = take_verification(core, s, rows)) != PX_OK)
		goto out;
	take_reads(core, s);
	take_cluster(core, s);
	take_tc_sums(core, s);
	*out = s;
	s = NULL;
out:
	px_snapshot_free(s);
	return st;
}

void px_snapshot_free(struct px_snapshot *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->provs && i < s->nprovs; i++)
		free(s->provs[i].name);
	free(s->provs);
	for (size_t i = 0; i < s->nsessions; i++) {
		free(s->sessions[i].asset);
		free(s->sessions[i].path);
		free(s->sessions[i].source);
		free(s->sessions[i].provider);
	}
	free(s->sessions);
	for (size_t i = 0; i < s->nshown; i++) {
		struct px_snap_asset *a = &s->assets[i];
		for (size_t k = 0; k < a->nsources; k++) {
			free(a->sources[k].source);
			free(a->sources[k].provider);
			free(a->sources[k].why);
		}
		free(a->sources);
		free(a->id);
		free(a->path);
	}
	free(s->assets);
	for (size_t i = 0; i < s->nrecent; i++) {
		free(s->recent[i].asset);
		free(s->recent[i].from);
		free(s->recent[i].to);
	}
	for (size_t i = 0; i < s->ntranscodes; i++)
		free(s->transcodes[i].asset);
	free(s->transcodes);
	free(s);
}

const char *px_snapshot_state_name(enum px_snap_state st)
{
	static const char *const names[PX_SNAP_NSTATES] = { "live", "failing", "down",
							     "drained", "auth_error" };
	return (unsigned)st < PX_SNAP_NSTATES ? names[st] : "live";
}
