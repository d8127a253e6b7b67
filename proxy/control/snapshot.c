/*
 * snapshot.c - the core's state copied for reporting: the one place from
 * which status.json (report.c) and the metrics (metrics.c) read the
 * context. They format the copy afterwards, with no lock held.
 *
 * Locks. Each part is copied under the lock that guards it, taken once,
 * briefly and alone, never two at once, by the layer that owns it:
 * reload_lock (the last reload's outcome; with the rows only), prov_lock
 * (providers, sessions, admission, the catalog's counts, and the clock
 * reading every age goes by: px_providers_stats, provider.c), the
 * transcode supervisor's own lock (inside px_transcode_snapshot), vf_lock
 * (verification states, cutovers, and the catalog's ids and sources the
 * rows name: px_verify_stats, standby.c), cache_lock (bytes cached).
 * Where other code nests the core's locks (reload.c, sources.c) the
 * order is reload_lock, prov_lock, vf_lock; they are taken here in that
 * order too. A reload
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

#include "cluster.h"
#include "context.h"
#include "health.h"
#include "hosts.h"
#include "kvstore.h"
#include "provider.h"
#include "reads.h"
#include "reload.h"
#include "snapshot.h"
#include "transcode.h"

static void take_reload(struct px_core *core, struct px_snapshot *s)
{
	struct px_reload_stats r;
	px_reload_stats(core, &r);
	s->n_reloads = r.n_reloads;
	s->reload_ok = r.reload_ok;
	memcpy(s->reload_msg, r.reload_msg, sizeof(s->reload_msg));
	s->reload_when = r.reload_when;
}

/*
 * A playback's place as its client's open file has it. The kernel answers
 * reads of bytes read through the mount before from its page cache
 * (keep_cache) without asking seamfs, so the reads' offset stops there
 * while the player reads on. For each open session, the positions of the
 * files its openers hold open on this mount at its inode
 * (px_proc_positions); the one in the middle nearest the reads' offset
 * becomes its offset. pread(2) moves no position, and a look at the head
 * or the tail is not a playback's place: those keep the reads' offset.
 */
static void follow_clients(struct px_snapshot *s)
{
	struct px_fdpos pos[64];
	if (s->worker.mnt_id <= 0)
		return;
	for (size_t i = 0; i < s->nsessions; i++) {
		struct px_snap_session *x = &s->sessions[i];
		int64_t best = -1;
		if (!x->nhandles || !x->ino)
			continue;
		for (int k = 0; k < PX_SESSION_OPENERS; k++) {
			int n = x->openers[k] ? px_proc_positions((long)x->openers[k],
								   s->worker.mnt_id, pos, 64)
					      : -1;
			for (int j = 0; j < n; j++) {
				int64_t p = pos[j].pos;
				if (pos[j].ino != x->ino || p <= x->head_end || p >= x->tail_start)
					continue;
				if (best < 0 || llabs(p - x->offset) < llabs(best - x->offset))
					best = p;
			}
		}
		if (best >= 0) {
			x->offset = best;
			x->offset_from_file = 1;
		}
	}
}

static enum px_status take_providers(struct px_core *core, struct px_snapshot *s, int rows)
{
	struct px_providers_stats p = { 0 };
	enum px_status st = px_providers_stats(core, rows, &p);
	s->now = p.now;
	s->nassets = p.nassets;
	s->nlisted = p.nlisted;
	s->provs = p.provs;
	s->nprovs = p.nprovs;
	s->sessions = p.sessions;
	s->nsessions = p.nsessions;
	s->sessions_open = p.sessions_open;
	s->sessions_lingering = p.sessions_lingering;
	s->sessions_playback = p.sessions_playback;
	s->sessions_scan = p.sessions_scan;
	s->n_admit_busy = p.n_admit_busy;
	memcpy(s->admit_why, p.admit_why, sizeof(s->admit_why));
	s->admit_when = p.admit_when;
	s->n_scans = p.n_scans;
	s->n_scan_requests = p.n_scan_requests;
	s->h_ttfb = p.h_ttfb;
	if (st == PX_OK)
		follow_clients(s);
	return st;
}

/* The supervisor's own copy of its planned transcodes; their asset ids
 * are named later (take_verification). */
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

static enum px_status take_verification(struct px_core *core, struct px_snapshot *s, int rows)
{
	struct px_verify_stats v = { 0 };
	enum px_status st = px_verify_stats(core, rows, &v);
	int oom = 0;

	memcpy(s->n_cutovers, v.n_cutovers, sizeof(s->n_cutovers));
	memcpy(s->n_verified, v.n_verified, sizeof(s->n_verified));
	s->n_exhausted = v.n_exhausted;
	memcpy(s->exhausted_why, v.exhausted_why, sizeof(s->exhausted_why));
	memcpy(s->recent, v.recent, sizeof(s->recent));
	s->nrecent = v.nrecent;
	s->assets = v.assets;
	s->nshown = v.nshown;
	/* an asset's id never changes once it is in the catalog */
	for (size_t i = 0; rows && i < s->ntranscodes; i++)
		s->transcodes[i].asset = px_snap_copy(
			px_cat(core)->assets[s->transcodes[i].info.asset].id, &oom);
	return st != PX_OK ? st : oom ? PX_ENOMEM : PX_OK;
}

static void take_reads(struct px_core *core, struct px_snapshot *s)
{
	struct px_reads_stats rs;
	px_reads_stats(core->reads, &rs);
	s->cache_used = rs.cache_used;
	s->disk = rs.disk;
	s->n_cache_hits = rs.n_cache_hits;
	s->n_scans_cached = rs.n_scans_cached;
	s->n_multipart = rs.n_multipart;
	s->n_cache_fills = rs.n_cache_fills;
	s->n_streams = rs.n_streams;
	s->n_stream_restarts = rs.n_stream_restarts;
	s->n_stream_waits = rs.n_stream_waits;
	s->n_par_streams = rs.n_par_streams;
	s->n_parts = rs.n_parts;
	s->stream_wait_us = rs.stream_wait_us;
	s->n_direct = rs.n_direct;
	s->ra_used = rs.ra_used;
	s->ra_budget = core->cfg->readahead_budget;
	s->cache_size = core->cfg->cache_size;
	s->h_read = rs.h_read;
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
	if (!px_cluster_store(core))
		return;
	s->clustered = 1;
	snprintf(s->store_url, sizeof(s->store_url), "%s", px_store_url(px_cluster_store(core)));
	snprintf(s->cluster, sizeof(s->cluster), "%s", px_store_prefix(px_cluster_store(core)));
	if (px_cluster_hosts(core))
		snprintf(s->host_id, sizeof(s->host_id), "%s", px_hosts_self(px_cluster_hosts(core)));
	px_store_state(px_cluster_store(core), &s->store);
	s->nhosts = px_hosts_list(px_cluster_hosts(core), s->hosts, PX_HOSTS_MAX);
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
