/*
 * report.c - the core's state as JSON, for .seamfs/status.json.
 *
 * Formats a snapshot (snapshot.c: providers, sessions and admission as
 * one copy under the providers' lock, verification and cutovers as one
 * under vf_lock, the atomic counters) with no lock held, so one status is
 * consistent within each of those parts. Times are ages in seconds, on
 * the core's clock at the snapshot.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "copies.h"
#include "report.h"
#include "snapshot.h"
#include "standby.h"
#include "jsontext.h"

static json_t *provider_json(const struct px_snap_provider *p, int64_t now)
{
	const char *state = px_snapshot_state_name(p->state);
	const char *why = "";

	if (p->state == PX_SNAP_DRAINED)
		why = "drained: no new sessions";
	else if (p->state == PX_SNAP_AUTH_ERROR)
		why = p->auth_why;
	else if (p->state == PX_SNAP_DOWN || p->state == PX_SNAP_FAILING)
		why = p->why;
	json_t *o = json_pack("{s:o, s:s, s:o, s:b, s:i, s:i, s:i, s:i, s:b}",
			      "name", px_json_str(p->name), "state", state,
			      "why", px_json_str(why),
			      "live", p->state != PX_SNAP_DOWN,
			      "sessions", (json_int_t)p->sessions,
			      "transfers", (json_int_t)p->xfers,
			      "background_transfers", (json_int_t)p->bg,
			      "slots_held", (json_int_t)p->held,
			      "drained", p->drained);
	if (!o)
		return NULL;
	json_object_set_new(o, "max_connections",
			    p->max ? json_integer(p->max) : json_null());
	json_object_set_new(o, "at_limit", json_boolean(p->max && p->held >= p->max));
	/* cluster mode: max_connections is the cluster's; this host holds
	 * slots_granted of it, the other hosts the rest */
	json_object_set_new(o, "cluster",
			    !p->cl ? json_null()
				   : json_pack("{s:i, s:i, s:i, s:b}",
					       "slots_granted", p->granted,
					       "slots_other_hosts", p->others_slots,
					       "sessions_other_hosts", p->others_sessions,
					       "local_share", p->cl_degraded));
	json_object_set_new(o, "auth_error", p->auth_failed ? px_json_str(p->auth_why) : json_null());
	json_object_set_new(o, "auth_errors", json_integer((json_int_t)p->n_auth));
	json_object_set_new(o, "last_good_age_s",
			    p->last_good ? json_real((double)(now - p->last_good) / 1000.0)
					 : json_null());
	json_object_set_new(o, "counters",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
				      "good_answers", (json_int_t)p->n_ok,
				      "bad_answers", (json_int_t)p->n_bad,
				      "slot_waits", (json_int_t)p->n_waits,
				      "slot_timeouts", (json_int_t)p->n_busy,
				      "background_preempted", (json_int_t)p->n_preempted,
				      "lingering_sessions_ended", (json_int_t)p->n_evicted,
				      "liveness_probes", (json_int_t)p->n_probes));
	return o;
}

static json_t *session_json(const struct px_snap_session *s, int64_t now)
{
	return json_pack("{s:I, s:o, s:o, s:I, s:o, s:o, s:I, s:s, s:I, s:i, s:i, s:i, s:s, s:s, s:f}",
			 "id", (json_int_t)s->id, "asset", px_json_str(s->asset),
			 "path", px_json_str(s->path), "client", (json_int_t)s->client,
			 "source", px_json_str(s->source),
			 "provider", px_json_str(s->provider),
			 "offset", (json_int_t)s->offset,
			 "offset_from", s->offset_from_file ? "file_position" : "reads",
			 "bytes_served", (json_int_t)s->served,
			 "handles", s->nhandles, "transfers", s->xfers,
			 "streams", s->xfers + s->extra,
			 "state", s->exhausted ? "fallback_exhausted" : s->nhandles ? "open" : "lingering",
			 "kind", s->playback ? "playback" : "scan",
			 "age_s", (double)(now - s->created) / 1000.0);
}

/* Assets that have more than one source: each source with its
 * verification state. */
static json_t *assets_json(const struct px_snapshot *snap)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < snap->nshown; i++) {
		const struct px_snap_asset *a = &snap->assets[i];
		json_t *srcs = json_array();
		for (size_t k = 0; srcs && k < a->nsources; k++) {
			const struct px_snap_source *src = &a->sources[k];
			json_array_append_new(srcs, json_pack("{s:o, s:o, s:s, s:o, s:i}",
				"source", px_json_str(src->source),
				"provider", px_json_str(src->provider),
				"verification", src->verification,
				"why", px_json_str(src->why),
				"inconclusive_in_a_row", src->inconclusive));
		}
		json_array_append_new(arr, json_pack("{s:o, s:o, s:I, s:o, s:o}",
			"id", px_json_str(a->id), "path", px_json_str(a->path),
			"size", (json_int_t)a->size,
			"reference", px_json_str(a->reference), "sources", srcs));
	}
	return arr;
}

static json_t *transcodes_json(const struct px_snapshot *snap)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < snap->ntranscodes; i++) {
		const struct px_tc_info *t = &snap->transcodes[i].info;
		json_array_append_new(arr, json_pack(
			"{s:o, s:i, s:i, s:I, s:o, s:b, s:o, s:I, s:I, s:I, s:i, s:b, s:b}",
			"asset", px_json_str(snap->transcodes[i].asset),
			"segments", (int)t->segments, "committed", (int)t->committed,
			"writer_pid", (json_int_t)t->writer_pid, "owner", px_json_str(t->owner),
			"lease_held", t->lease_held,
			"heartbeat_age_s", t->heartbeat_age_ms >= 0
				? json_real((double)t->heartbeat_age_ms / 1000.0) : json_null(),
			"recoveries", (json_int_t)t->recoveries,
			/* links planted in its job directory, left alone */
			"work_dir_links", (json_int_t)t->work_links,
			/* seeks: main writer moves, apart from recoveries (transcode.md) */
			"seeks", (json_int_t)t->seeks,
			"readers", t->readers,
			"queued", t->queued, "failed", t->failed));
		json_t *row = json_array_get(arr, json_array_size(arr) - 1);
		if (row && snap->clustered) {
			/* cluster mode: another host's writer followed, leases
			 * taken over from another host */
			json_object_set_new(row, "remote", json_boolean(t->remote));
			json_object_set_new(row, "takeovers", json_integer((json_int_t)t->takeovers));
			/* far reads across hosts (docs/cluster.md) */
			json_object_set_new(row, "seek_asks",
					    json_integer((json_int_t)t->seek_asks));
			json_object_set_new(row, "remote_seeks",
					    json_integer((json_int_t)t->remote_seeks));
			/* where its writers ran (docs/cluster.md "Where a
			 * transcode is written") */
			json_object_set_new(row, "placed_away",
					    json_integer((json_int_t)t->placed_away));
			json_object_set_new(row, "placed_here",
					    json_integer((json_int_t)t->placed_here));
			json_object_set_new(row, "place_fallbacks",
					    json_integer((json_int_t)t->place_fallbacks));
		}
		if (row) {
			json_object_set_new(row, "writers", json_integer(t->writers));
			json_object_set_new(row, "writer_starts", json_integer((json_int_t)t->starts));
		}
	}
	return arr;
}

/* The cluster's hosts, as the heartbeat last listed them. */
static json_t *hosts_json(const struct px_snapshot *snap)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < snap->nhosts; i++) {
		const struct px_host_info *h = &snap->hosts[i];
		/* placement's load (place.h): thousandths become units */
		json_t *load = json_pack("{s:f, s:f, s:f, s:f}",
			"total", (double)(h->wcost_milli + h->cpu_milli + h->placed_milli) / 1000.0,
			"writers_cost", (double)h->wcost_milli / 1000.0,
			"cpu", (double)h->cpu_milli / 1000.0,
			"placed", (double)h->placed_milli / 1000.0);
		json_t *o = json_pack("{s:s, s:I, s:f, s:f, s:i, s:i, s:i, s:o, s:s, s:b}",
			"host_id", h->id, "pid", (json_int_t)h->pid,
			"heartbeat_age_s", (double)h->age_ms / 1000.0,
			"up_s", (double)h->up_ms / 1000.0,
			"sessions", h->sessions, "writers", h->writers,
			"max_writers", h->max_writers, "load", load ? load : json_null(),
			"version", h->version, "self", h->self);
		/* where it serves its copies to the others (peer_listen) */
		if (o)
			json_object_set_new(o, "peer_url", h->peer[0] ? json_string(h->peer)
								    : json_null());
		json_array_append_new(arr, o);
	}
	return arr;
}

/* The last failover the store followed: null when none. */
static json_t *failover_json(const struct px_store_state *st)
{
	if (!st->failover_wall_ms)
		return json_null();
	return json_pack("{s:f, s:s, s:s, s:b}", "at", (double)st->failover_wall_ms / 1000.0,
			 "from", st->failover_from, "to", st->failover_to, "announced",
			 st->failover_announced);
}

/* The store: null without one (one host). */
static json_t *store_json(const struct px_snapshot *snap)
{
	if (!snap->clustered)
		return json_null();
	const struct px_store_state *st = &snap->store;
	json_t *o = json_pack("{s:o, s:o, s:o, s:I, s:I, s:o, s:I, s:o}",
		"master", px_json_str(st->master),
		"sentinel_master", st->sentinels ? px_json_str(st->master_name) : json_null(),
		"replicas", st->replicas >= 0 ? json_integer(st->replicas) : json_null(),
		"failovers", (json_int_t)st->failovers, "unacked_writes", (json_int_t)st->unacked,
		"last_failover", failover_json(st), "announcements", (json_int_t)st->announced,
		"watching", st->sentinels && st->watching[0] ? json_string(st->watching)
							      : json_null());
	json_t *base = json_pack("{s:s, s:s, s:s, s:b, s:o, s:o, s:o, s:I, s:I, s:I, s:I}",
		"url", snap->store_url, "cluster", snap->cluster, "host_id", snap->host_id,
		"connected", st->connected,
		"latency_ms", st->latency_us >= 0 ? json_real((double)st->latency_us / 1000.0)
						  : json_null(),
		"last_error", px_json_str(st->last_error),
		"last_error_age_s", st->last_error_age_ms >= 0
			? json_real((double)st->last_error_age_ms / 1000.0) : json_null(),
		"calls", (json_int_t)st->calls, "errors", (json_int_t)st->errors,
		"connects", (json_int_t)st->connects,
		"takeovers", (json_int_t)snap->n_takeovers);
	if (base && o)
		json_object_update(base, o);
	json_decref(o);
	return base ? base : json_null();
}

static json_t *cutovers_json(const struct px_snapshot *snap)
{
	json_t *o = json_object(), *by = json_object(), *recent = json_array();
	uint64_t total = 0;
	for (int st = 0; st < PX_STATUS_COUNT; st++) {
		if (!snap->n_cutovers[st])
			continue;
		const char *name = px_cutover_reason_name((enum px_status)st);
		json_t *old = json_object_get(by, name);
		json_int_t prev = old ? json_integer_value(old) : 0;
		json_object_set_new(by, name, json_integer(prev + (json_int_t)snap->n_cutovers[st]));
		total += snap->n_cutovers[st];
	}
	for (size_t i = 0; i < snap->nrecent; i++) {
		const struct px_snap_cutover *c = &snap->recent[i];
		json_array_append_new(recent, json_pack("{s:I, s:o, s:I, s:o, s:o, s:s, s:I, s:f}",
			"session", (json_int_t)c->session, "asset", px_json_str(c->asset),
			"offset", (json_int_t)c->offset,
			"from", px_json_str(c->from),
			"to", px_json_str(c->to),
			"reason", px_cutover_reason_name(c->reason), "duration_ms", (json_int_t)c->ms,
			"age_s", (double)(snap->now - c->when) / 1000.0));
	}
	json_object_set_new(o, "total", json_integer((json_int_t)total));
	json_object_set_new(o, "by_reason", by);
	json_object_set_new(o, "recent", recent);
	json_object_set_new(o, "fallback_exhausted", json_integer((json_int_t)snap->n_exhausted));
	json_object_set_new(o, "last_fallback_exhausted", px_json_str(snap->exhausted_why));
	json_object_set_new(o, "verifications",
			    json_pack("{s:I, s:I, s:I, s:I}",
				      "match", (json_int_t)snap->n_verified[0],
				      "mismatch", (json_int_t)snap->n_verified[1],
				      "size_mismatch", (json_int_t)snap->n_verified[2],
				      "inconclusive", (json_int_t)snap->n_verified[3]));
	return o;
}

/* The heads and tails kept on disk: whether the tier is on (and why not),
 * what it holds, and what it served, stored, evicted and refused. */
static json_t *disk_json(const struct px_disk_stats *d)
{
	return json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "on", d->on, "why_off", d->why_off, "parts", (json_int_t)d->parts,
			 "bytes", (json_int_t)d->bytes, "max_bytes", (json_int_t)d->max_bytes,
			 "hits", (json_int_t)d->hits, "hit_bytes", (json_int_t)d->hit_bytes,
			 "stored", (json_int_t)d->stored,
			 "stored_bytes", (json_int_t)d->stored_bytes,
			 "evictions", (json_int_t)d->evictions, "rejects", (json_int_t)d->rejects);
}

/* The keeper's figures (fs/keeper.c), null when the mount has none. */
static json_t *keeper_json(const struct px_worker_info *w)
{
	if (!w->keeper_pid)
		return json_null();
	return json_pack("{s:I, s:I, s:o, s:o, s:o}", "pid", (json_int_t)w->keeper_pid,
			 "restarts", (json_int_t)w->restarts, "last_end",
			 w->restarts ? json_string(w->last_end) : json_null(),
			 "last_restart_unix_ms",
			 w->last_at_ms ? json_integer(w->last_at_ms) : json_null(),
			 "last_pause_ms",
			 w->restarts ? json_integer(w->last_pause_ms) : json_null());
}

/* Opens refused at the providers' limits, and the last refusal. */
static json_t *admission_json(const struct px_snapshot *snap)
{
	int64_t now = snap->now;
	return json_pack("{s:I, s:o, s:o}",
			 "refused_at_limit", (json_int_t)snap->n_admit_busy,
			 "last_refusal", px_json_str(snap->admit_why),
			 "last_refusal_age_s",
			 snap->admit_when ? json_real((double)(now - snap->admit_when) / 1000.0)
					  : json_null());
}

/* The catalog reloads, and the last one's outcome. */
static json_t *reload_json(const struct px_snapshot *snap)
{
	int64_t now = snap->now;
	return json_pack("{s:I, s:b, s:o, s:o}", "reloads", (json_int_t)snap->n_reloads, "ok",
			 snap->n_reloads ? snap->reload_ok : 1, "last",
			 px_json_str(snap->reload_msg), "last_age_s",
			 snap->reload_when ? json_real((double)(now - snap->reload_when) / 1000.0)
					   : json_null());
}

char *px_report_json(struct px_core *core)
{
	struct px_snapshot *snap = NULL;
	json_t *root = json_object(), *provs = json_array(), *sess = json_array();
	char *out = NULL;

	if (!root || !provs || !sess || px_snapshot_new(core, PX_SNAPSHOT_ROWS, &snap) != PX_OK) {
		json_decref(provs);
		json_decref(sess);
		goto out;
	}
	int64_t now = snap->now;
	json_object_set_new(root, "version", json_string(SEAMFS_VERSION));
	const struct px_worker_info *w = &snap->worker;
	json_object_set_new(root, "worker_pid", json_integer(w->pid));
	json_object_set_new(root, "keeper", keeper_json(w));
	json_object_set_new(root, "providers", provs);
	json_object_set_new(root, "sessions", sess);
	json_object_set_new(root, "playback_sessions", json_integer((json_int_t)snap->sessions_playback));
	json_object_set_new(root, "scan_sessions", json_integer((json_int_t)snap->sessions_scan));

	for (size_t i = 0; i < snap->nprovs; i++)
		json_array_append_new(provs, provider_json(&snap->provs[i], now));
	for (size_t i = 0; i < snap->nsessions; i++)
		json_array_append_new(sess, session_json(&snap->sessions[i], now));
	json_object_set_new(root, "admission", admission_json(snap));
	json_object_set_new(root, "reload", reload_json(snap));
	json_object_set_new(root, "assets", assets_json(snap));
	char *copies = px_copies_status(core);
	json_object_set_new(root, "copies", copies ? json_loads(copies, 0, NULL) : json_null());
	free(copies);
	json_object_set_new(root, "transcodes", transcodes_json(snap));
	json_object_set_new(root, "store", store_json(snap));
	json_object_set_new(root, "hosts", snap->clustered ? hosts_json(snap)
							   : json_array());
	json_object_set_new(root, "cutovers", cutovers_json(snap));

	json_object_set_new(root, "reads",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
				      "s:I}",
				      "head_tail_cache_hits", (json_int_t)snap->n_cache_hits,
				      "head_tail_cache_fills", (json_int_t)snap->n_cache_fills,
				      "head_tail_multipart", (json_int_t)snap->n_multipart,
				      "scans_from_cache", (json_int_t)snap->n_scans_cached,
				      "scans", (json_int_t)snap->n_scans,
				      "scan_requests", (json_int_t)snap->n_scan_requests,
				      "streams", (json_int_t)snap->n_streams,
				      "stream_restarts", (json_int_t)snap->n_stream_restarts,
				      "stream_waits", (json_int_t)snap->n_stream_waits,
				      "stream_wait_ms", (json_int_t)(snap->stream_wait_us / 1000),
				      "parallel_streams", (json_int_t)snap->n_par_streams,
				      "parallel_parts", (json_int_t)snap->n_parts,
				      "direct_reads", (json_int_t)snap->n_direct));
	json_object_set_new(root, "memory",
			    json_pack("{s:I, s:I, s:I, s:I}",
				      "readahead_used", (json_int_t)snap->ra_used,
				      "readahead_budget", (json_int_t)snap->ra_budget,
				      "cache_used", (json_int_t)snap->cache_used,
				      "cache_size", (json_int_t)snap->cache_size));
	json_object_set_new(root, "disk_cache", disk_json(&snap->disk));
	/* ages are whole milliseconds over 1000.0: 15 significant digits
	 * print them as they are (2.721), where jansson's default 17 print
	 * the double's noise (2.7210000000000001) */
	out = px_json_text(root, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	root = NULL;
out:
	px_snapshot_free(snap);
	json_decref(root);
	return out;
}

char *px_report_hosts(struct px_core *core)
{
	struct px_snapshot *snap = NULL;
	char *out = NULL;
	if (px_snapshot_new(core, 0, &snap) != PX_OK)
		return NULL;
	json_t *root = json_pack("{s:o, s:o, s:o}", "store", store_json(snap), "hosts",
				 hosts_json(snap), "clustered", json_boolean(snap->clustered));
	if (root)
		out = px_json_text(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	px_snapshot_free(snap);
	return out;
}
