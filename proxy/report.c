/*
 * report.c - the core's state as JSON, for .seamfs/status.json.
 *
 * A snapshot taken under the providers' lock (providers, sessions,
 * admission) and from the atomic counters (reads, memory), so one status
 * is consistent in itself. Times are ages in seconds, on the core's clock.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core_i.h"
#include "jsontext.h"
#include "transcode.h"

static json_t *provider_json(struct px_core *core, size_t i, int64_t now)
{
	const struct px_provider *cp = &core->cat->providers[i];
	const struct prov_rt *p = &core->provs[i];
	const char *state = "live";
	const char *why = "";

	if (p->drained) {
		state = "drained";
		why = "drained: no new sessions";
	} else if (p->auth_failed) {
		state = "auth_error";
		why = p->auth_why;
	} else if (p->bad_since && now - p->bad_since >= core->cfg->liveness_ttl_ms) {
		state = "down";
		why = p->why;
	} else if (p->bad_since) {
		state = "failing";
		why = p->why;
	}
	json_t *o = json_pack("{s:o, s:s, s:o, s:b, s:i, s:i, s:i, s:i, s:b}",
			      "name", px_json_str(cp->name), "state", state,
			      "why", px_json_str(why),
			      "live", strcmp(state, "down") != 0,
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

static json_t *session_json(struct px_core *core, const struct px_session *s, int64_t now)
{
	const struct px_asset *a = &core->cat->assets[s->asset];
	const struct px_source *src = &a->sources[s->source];
	return json_pack("{s:I, s:o, s:o, s:I, s:o, s:o, s:I, s:I, s:i, s:i, s:s, s:f}",
			 "id", (json_int_t)s->id, "asset", px_json_str(a->id),
			 "path", px_json_str(a->path), "client", (json_int_t)s->client,
			 "source", px_json_str(src->shown),
			 "provider", px_json_str(core->cat->providers[s->prov].name),
			 "offset", (json_int_t)atomic_load(&s->offset),
			 "bytes_served", (json_int_t)atomic_load(&s->served),
			 "handles", s->nhandles, "transfers", s->xfers,
			 "state", s->exhausted ? "fallback_exhausted" : s->nhandles ? "open" : "lingering",
			 "age_s", (double)(now - s->created) / 1000.0);
}

/* Assets that have more than one source or whose sources were checked:
 * each source with its verification state. */
static json_t *assets_json(struct px_core *core)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&core->vf_lock);
	for (size_t i = 0; arr && i < core->cat->nassets; i++) {
		const struct px_asset *a = &core->cat->assets[i];
		const struct asset_rt *rt = &core->assets[i];
		if (!rt->listed || a->nsources < 2)
			continue;
		json_t *srcs = json_array();
		for (size_t k = 0; srcs && k < a->nsources; k++) {
			const struct px_source *src = &a->sources[k];
			const char *state = rt->dead[k] ? "dead"
							 : px_standby_state_name(rt->src ? rt->src[k].state
											 : VS_UNKNOWN);
			json_array_append_new(srcs, json_pack("{s:o, s:o, s:s, s:o, s:i}",
				"source", px_json_str(src->shown),
				"provider", px_json_str(core->cat->providers[src->provider].name),
				"verification", state,
				"why", px_json_str(rt->src ? px_src_why_of(&rt->src[k]) : ""),
				"inconclusive_in_a_row", rt->src ? rt->src[k].inconclusive : 0));
		}
		json_array_append_new(arr, json_pack("{s:o, s:o, s:I, s:o, s:o}",
			"id", px_json_str(a->id), "path", px_json_str(a->path),
			"size", (json_int_t)rt->size,
			"reference", px_json_str(rt->ref ? rt->ref_id : ""), "sources", srcs));
	}
	pthread_mutex_unlock(&core->vf_lock);
	return arr;
}

static json_t *transcodes_json(struct px_core *core)
{
	json_t *arr = json_array();
	size_t cap = core->cat->nassets + 1;
	struct px_tc_info *info = core->tc ? calloc(cap, sizeof(*info)) : NULL;
	size_t n = info ? px_transcode_snapshot(core->tc, info, cap) : 0;
	for (size_t i = 0; arr && i < n; i++) {
		const struct px_tc_info *t = &info[i];
		json_array_append_new(arr, json_pack(
			"{s:o, s:i, s:i, s:I, s:o, s:b, s:o, s:I, s:i, s:b, s:b}",
			"asset", px_json_str(core->cat->assets[t->asset].id),
			"segments", (int)t->segments, "committed", (int)t->committed,
			"writer_pid", (json_int_t)t->writer_pid, "owner", px_json_str(t->owner),
			"lease_held", t->lease_held,
			"heartbeat_age_s", t->heartbeat_age_ms >= 0
				? json_real((double)t->heartbeat_age_ms / 1000.0) : json_null(),
			"recoveries", (json_int_t)t->recoveries, "readers", t->readers,
			"queued", t->queued, "failed", t->failed));
	}
	free(info);
	return arr;
}

static json_t *cutovers_json(struct px_core *core, int64_t now)
{
	json_t *o = json_object(), *by = json_object(), *recent = json_array();
	uint64_t total = 0;
	pthread_mutex_lock(&core->vf_lock);
	for (int st = 0; st < PX_STATUS_COUNT; st++) {
		if (!core->n_cutovers[st])
			continue;
		const char *name = px_cutover_reason_name((enum px_status)st);
		json_t *old = json_object_get(by, name);
		json_int_t prev = old ? json_integer_value(old) : 0;
		json_object_set_new(by, name, json_integer(prev + (json_int_t)core->n_cutovers[st]));
		total += core->n_cutovers[st];
	}
	uint64_t n = core->nrecent < 8 ? core->nrecent : 8;
	for (uint64_t i = 0; i < n; i++) {
		const struct cutover_rec *c = &core->recent[(core->nrecent - 1 - i) % 8];
		const struct px_asset *a = &core->cat->assets[c->asset];
		const struct px_source *from = &a->sources[c->from], *to = &a->sources[c->to];
		json_array_append_new(recent, json_pack("{s:I, s:o, s:I, s:o, s:o, s:s, s:I, s:f}",
			"session", (json_int_t)c->session, "asset", px_json_str(a->id),
			"offset", (json_int_t)c->offset,
			"from", px_json_str(from->shown),
			"to", px_json_str(to->shown),
			"reason", px_cutover_reason_name(c->reason), "duration_ms", (json_int_t)c->ms,
			"age_s", (double)(now - c->when) / 1000.0));
	}
	json_object_set_new(o, "total", json_integer((json_int_t)total));
	json_object_set_new(o, "by_reason", by);
	json_object_set_new(o, "recent", recent);
	json_object_set_new(o, "fallback_exhausted", json_integer((json_int_t)core->n_exhausted));
	json_object_set_new(o, "last_fallback_exhausted", px_json_str(core->exhausted_why));
	json_object_set_new(o, "verifications",
			    json_pack("{s:I, s:I, s:I, s:I}",
				      "match", (json_int_t)core->n_verified[0],
				      "mismatch", (json_int_t)core->n_verified[1],
				      "size_mismatch", (json_int_t)core->n_verified[2],
				      "inconclusive", (json_int_t)core->n_verified[3]));
	pthread_mutex_unlock(&core->vf_lock);
	return o;
}

char *px_core_status_json(struct px_core *core)
{
	json_t *root = json_object(), *provs = json_array(), *sess = json_array();
	char *out = NULL;

	if (!root || !provs || !sess) {
		json_decref(provs);
		json_decref(sess);
		goto out;
	}
	json_object_set_new(root, "version", json_string(SEAMFS_VERSION));
	json_object_set_new(root, "providers", provs);
	json_object_set_new(root, "sessions", sess);

	pthread_mutex_lock(&core->prov_lock);
	int64_t now = core->now();
	for (size_t i = 0; i < core->cat->nproviders; i++)
		json_array_append_new(provs, provider_json(core, i, now));
	for (const struct px_session *s = core->sessions; s; s = s->next)
		json_array_append_new(sess, session_json(core, s, now));
	json_object_set_new(root, "admission",
			    json_pack("{s:I, s:o, s:o}",
				      "refused_at_limit", (json_int_t)core->n_admit_busy,
				      "last_refusal", px_json_str(core->admit_why),
				      "last_refusal_age_s",
				      core->admit_when ? json_real((double)(now - core->admit_when) /
								   1000.0)
						       : json_null()));
	pthread_mutex_unlock(&core->prov_lock);

	pthread_mutex_lock(&core->reload_lock);
	json_object_set_new(root, "reload",
			    json_pack("{s:I, s:b, s:o, s:o}", "reloads",
				      (json_int_t)core->n_reloads, "ok",
				      core->n_reloads ? core->reload_ok : 1, "last",
				      px_json_str(core->reload_msg), "last_age_s",
				      core->reload_when ? json_real((double)(now - core->reload_when) /
								    1000.0)
							: json_null()));
	pthread_mutex_unlock(&core->reload_lock);
	json_object_set_new(root, "assets", assets_json(core));
	json_object_set_new(root, "transcodes", transcodes_json(core));
	json_object_set_new(root, "cutovers", cutovers_json(core, now));

	pthread_mutex_lock(&core->cache_lock);
	int64_t cache_used = core->cache_used;
	pthread_mutex_unlock(&core->cache_lock);
	json_object_set_new(root, "reads",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
				      "head_tail_cache_hits", (json_int_t)core->n_cache_hits,
				      "head_tail_cache_fills", (json_int_t)core->n_cache_fills,
				      "streams", (json_int_t)core->n_streams,
				      "stream_restarts", (json_int_t)core->n_stream_restarts,
				      "stream_waits", (json_int_t)core->n_stream_waits,
				      "stream_wait_ms", (json_int_t)(core->stream_wait_us / 1000),
				      "direct_reads", (json_int_t)core->n_direct));
	json_object_set_new(root, "memory",
			    json_pack("{s:I, s:I, s:I, s:I}",
				      "readahead_used", (json_int_t)atomic_load(&core->ra_used),
				      "readahead_budget", (json_int_t)core->cfg->readahead_budget,
				      "cache_used", (json_int_t)cache_used,
				      "cache_size", (json_int_t)core->cfg->cache_size));
	out = px_json_text(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	root = NULL;
out:
	json_decref(root);
	return out;
}
