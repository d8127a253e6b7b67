/*
 * status.c - the copies' status and counters (docs/copies.md, "Status
 * and metrics"; docs/status-and-metrics.md): this host's id, each
 * storage, each job, each asset that wants or has copies with its
 * locations and viewers, the counters for the metrics.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "copies_i.h"
#include "provider.h"

/* The copy that source k of the asset is (its record: by storage, since a
 * copy is recorded before it becomes a source), or -1. cp->lock held. */
static long find_source_copy(struct px_copies *cp, size_t asset, size_t k)
{
	const char *storage = px_cat(cp->core)->assets[asset].sources[k].storage;
	long si = storage ? cp_find_storage(cp, storage) : -1;
	return si >= 0 ? cp_find_copy(cp, asset, (size_t)si) : -1;
}

void px_copies_counters(struct px_core *core, uint64_t *made, uint64_t *failed, uint64_t *bytes)
{
	struct px_copies *cp = core->copies;
	*made = cp ? atomic_load(&cp->n_made) : 0;
	*failed = cp ? atomic_load(&cp->n_failed) : 0;
	*bytes = cp ? atomic_load(&cp->n_bytes) : 0;
}

uint64_t px_copies_in_way(struct px_core *core)
{
	return core->copies ? atomic_load(&core->copies->n_in_way) : 0;
}

static const char *job_state(const struct job *j)
{
	switch (j->state) {
	case JOB_COPYING: return "copying";
	case JOB_BACKOFF: return "retrying";
	default: return "waiting";
	}
}

/* Viewers (listed sessions) per source of every asset: counts[asset
 * offset + k]. prov_lock taken alone. */
static json_t *locations(struct px_copies *cp, size_t asset, const int *viewers)
{
	struct px_core *core = cp->core;
	const struct px_asset *a = &px_cat(core)->assets[asset];
	json_t *arr = json_array();
	for (size_t k = 0; arr && k < a->nsources; k++) {
		const struct px_source *s = &a->sources[k];
		json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:b}",
				      "kind", s->storage ? "copy"
					      : strncmp(px_cat(core)->providers[s->provider].name,
							"peer:", 5) == 0 && s->url ? "peer" : "source",
				      "where", s->shown,
				      "provider", px_cat(core)->providers[s->provider].name,
				      "viewers", viewers[k],
				      "serving", !px_asset_rt(core, asset)->dead[k]);
		enum px_copy_wait dropped = PX_WAIT_NONE;
		if (s->storage) {
			pthread_mutex_lock(&cp->lock);
			long ci = find_source_copy(cp, asset, k);
			dropped = ci >= 0 ? cp->c[ci].dropped : PX_WAIT_NONE;
			pthread_mutex_unlock(&cp->lock);
		}
		if (o) {
			json_object_set_new(o, "storage", s->storage ? json_string(s->storage)
								      : json_null());
			/* a copy found replaced by a link or a foreign file */
			json_object_set_new(o, "dropped",
					    dropped ? json_string(px_copy_wait_name(dropped))
						    : json_null());
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

/* The storages in the catalog, into sts. cp->lock held. */
static void storages_json(struct px_copies *cp, json_t *sts)
{
	for (size_t i = 0; i < cp->nst; i++) {
		const struct storage *s = &cp->st[i];
		if (!s->in_catalog)
			continue;
		int ncopies = 0;
		for (size_t c = 0; c < cp->nc; c++)
			ncopies += cp->c[c].storage == i && cp->c[c].serving && !cp->c[c].stale;
		json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:b, s:I, s:I, s:i}",
				      "name", s->name, "path", s->path,
				      "copying", s->copying, "drained", s->drained,
				      "reachable", s->reachable,
				      "free_bytes", (json_int_t)s->free_bytes,
				      "min_free_bytes", (json_int_t)s->min_free,
				      "copies", ncopies);
		if (o) {
			json_object_set_new(o, "host", s->host ? json_string(s->host) : json_null());
			json_object_set_new(o, "why", json_string(s->why));
		}
		json_array_append_new(sts, o);
	}
}

/* The jobs, into jobs; their assets marked in show (when not NULL).
 * cp->lock held. */
static void jobs_json(struct px_copies *cp, json_t *jobs, unsigned char *show)
{
	struct px_core *core = cp->core;
	for (size_t i = 0; i < cp->njobs; i++) {
		const struct job *j = &cp->jobs[i];
		if (show)
			show[j->asset] = 1;
		json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:f, s:i}",
				      "asset", px_cat(core)->assets[j->asset].id,
				      "state", job_state(j),
				      "bytes_done", (json_int_t)(j->state == JOB_COPYING ? j->done : 0),
				      "bytes_total", (json_int_t)j->total,
				      "speed_bytes_per_s", j->state == JOB_COPYING ? j->speed : 0.0,
				      "failed_attempts", j->attempts);
		if (o) {
			json_object_set_new(o, "reason", j->state == JOB_WAITING && j->wait
					    ? json_string(px_copy_wait_name(j->wait)) : json_null());
			json_object_set_new(o, "storage", j->state == JOB_COPYING
					    ? json_string(cp->st[j->storage].name) : json_null());
			json_object_set_new(o, "last_error", j->error[0] ? json_string(j->error)
									 : json_null());
			/* cluster: the host the job is handed to */
			json_object_set_new(o, "host", j->state == JOB_WAITING && j->host[0]
					    ? json_string(j->host) : json_null());
		}
		json_array_append_new(jobs, o);
	}
}

/* The assets marked in show, with their locations, into assets. No lock
 * held: takes prov_lock and cp->lock, each alone. */
static void assets_json(struct px_copies *cp, json_t *assets, const unsigned char *show)
{
	struct px_core *core = cp->core;
	size_t nassets = px_cat(core)->nassets;
	int *viewers = NULL;
	size_t vcap = 0;
	for (size_t a = 0; show && a < nassets; a++) {
		if (!show[a] || !px_asset_rt(core, a)->listed)
			continue;
		size_t ns = px_cat(core)->assets[a].nsources;
		if (ns + 1 > vcap) {
			free(viewers);
			vcap = ns + 1;
			viewers = calloc(vcap, sizeof(*viewers));
			if (!viewers) {
				vcap = 0;
				break;
			}
		}
		memset(viewers, 0, vcap * sizeof(*viewers));
		pthread_mutex_lock(px_prov_lock(core));
		for (struct px_session *s = px_sessions_first(core); s; s = s->next)
			if (s->asset == a && s->listed && s->source < ns)
				viewers[s->source]++;
		pthread_mutex_unlock(px_prov_lock(core));
		pthread_mutex_lock(&cp->lock);
		int want = cp_want_copies(cp, a);
		pthread_mutex_unlock(&cp->lock);
		json_t *o = json_pack("{s:s, s:i}", "asset", px_cat(core)->assets[a].id,
				      "copies_wanted", want);
		if (o)
			json_object_set_new(o, "locations", locations(cp, a, viewers));
		json_array_append_new(assets, o);
	}
	free(viewers);
}

char *px_copies_status(struct px_core *core)
{
	struct px_copies *cp = core->copies;
	json_t *root = json_object();
	json_t *sts = json_array(), *jobs = json_array(), *assets = json_array();
	char *text = NULL;
	if (!root || !sts || !jobs || !assets) {
		json_decref(sts);
		json_decref(jobs);
		json_decref(assets);
		goto out;
	}
	json_object_set_new(root, "storages", sts);
	json_object_set_new(root, "jobs", jobs);
	json_object_set_new(root, "assets", assets);
	if (!cp)
		goto dump;
	/* which assets: those with copies wanted or held */
	size_t nassets = px_cat(core)->nassets;
	unsigned char *show = calloc(nassets + 1, 1);
	pthread_mutex_lock(&cp->lock);
	json_object_set_new(root, "host", json_string(cp->host));
	json_object_set_new(root, "in_way_total",
			    json_integer((json_int_t)atomic_load(&cp->n_in_way)));
	json_object_set_new(root, "in_way_read_total",
			    json_integer((json_int_t)atomic_load(&cp->n_read_in_way)));
	storages_json(cp, sts);
	jobs_json(cp, jobs, show);
	for (size_t c = 0; show && c < cp->nc; c++)
		show[cp->c[c].asset] = 1;
	for (size_t a = 0; show && a < nassets; a++)
		if (cp_want_copies(cp, a) > 0 && px_cat(core)->assets[a].kind == PX_ASSET_PLAIN)
			show[a] = 1;
	pthread_mutex_unlock(&cp->lock);
	assets_json(cp, assets, show);
	free(show);
dump:
	text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
out:
	json_decref(root);
	return text;
}
