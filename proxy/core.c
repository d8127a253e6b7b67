/*
 * core.c - the composition root: builds the core's context (settings, the
 * catalog copy, the fetcher, per-asset and per-provider state) from the
 * layers below, runs the discovery pass that decides which assets the
 * mount lists, owns the monitor thread that calls each layer's periodic
 * tick, and wires the one call that must go up a layer (a provider at its
 * limit asks the read layer for idle streams' slots: px_providers_set_yield).
 * The only file that sees every layer; docs/architecture.md maps them.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "clock.h"
#include "cluster.h"
#include "context.h"
#include "copies.h"
#include "core.h"
#include "cslots.h"
#include "feed.h"
#include "hosts.h"
#include "httpparse.h"
#include "kvstore.h"
#include "log.h"
#include "probe.h"
#include "provider.h"
#include "rangeread.h"
#include "reads.h"
#include "reload.h"
#include "session.h"
#include "session_i.h"
#include "sources.h"
#include "standby.h"
#include "state.h"
#include "transcode.h"
#include "tree.h"

/* The monitor thread, started when the core has its own fetcher. */
struct px_monitor {
	pthread_t thread;
	int started;
};

/*
 * The monitor thread: the core's periodic work, at most a second apart or
 * sooner when a tick says so: sessions' TTLs and providers' liveness
 * probes (provider.c), then prevalidation of standbys (standby.c).
 */
static void *monitor_main(void *arg)
{
	struct px_core *core = arg;
	pthread_mutex_lock(px_prov_lock(core));
	while (!px_providers_stopping_locked(core)) {
		pthread_mutex_unlock(px_prov_lock(core));
		int64_t next = px_providers_tick(core);
		px_standby_tick(core);
		pthread_mutex_lock(px_prov_lock(core));
		/* the core clock is the real one here; next may be INT64_MAX
		 * (nothing due): never add to it */
		int64_t now = core->now();
		int64_t delay = next > now ? next - now : 0;
		if (delay > 1000)
			delay = 1000;
		int64_t wake = px_now_ms() + delay;
		if (!px_providers_stopping_locked(core))
			px_prov_wait_until(core, wake);
	}
	pthread_mutex_unlock(px_prov_lock(core));
	return NULL;
}

static void monitor_stop(struct px_core *core)
{
	px_providers_release(core);
	if (core->monitor->started)
		pthread_join(core->monitor->thread, NULL);
	core->monitor->started = 0;
}

/* What this host's heartbeat reports to the cluster (hosts.c's thread):
 * sessions with an open handle, and transcode writers running here. */
static void host_counts(void *arg, int *sessions, int *writers)
{
	struct px_core *core = arg;
	struct px_tc_info info[64];
	int n = 0;
	pthread_mutex_lock(px_prov_lock(core));
	for (const struct px_session *x = px_sessions_first(core); x; x = x->next)
		n += x->nhandles > 0;
	pthread_mutex_unlock(px_prov_lock(core));
	*sessions = n;
	*writers = 0;
	size_t nt = px_transcode_snapshot(core->tc, info, sizeof(info) / sizeof(info[0]));
	for (size_t i = 0; i < nt; i++)
		*writers += info[i].writers;
}

/* This host's load for placement (place.h): its writers weighted by their
 * profile's cost; the writer slots it offers the cluster (none with
 * placement=local: writers stay where their reads are). */
static void host_load(void *arg, int64_t *wcost_milli, int *max_writers)
{
	struct px_core *core = arg;
	struct px_tc_info info[64];
	*wcost_milli = 0;
	*max_writers = core->cfg->placement_local ? 0 : core->cfg->max_writers;
	size_t nt = px_transcode_snapshot(core->tc, info, sizeof(info) / sizeof(info[0]));
	for (size_t i = 0; i < nt; i++)
		*wcost_milli += info[i].writers * info[i].cost;
}

/*
 * Cluster mode, on the heartbeat thread after each heartbeat: drains and
 * resumes made on any host (`seamfs ctl drain`, control.c puts them in
 * PREFIX:drains, "1" drained, "0" resumed) apply here too. A provider the
 * hash does not name keeps what the catalog or this host said. And the
 * providers' slots learn how many hosts share a limit (cslots.c).
 */
static void cluster_tick(void *arg)
{
	struct px_core *core = arg;
	char key[256];
	struct px_reply *r = NULL;
	struct px_host_info hosts[PX_HOSTS_MAX];
	px_cslots_set_hosts(core, (int)px_hosts_list(px_cluster_hosts(core), hosts, PX_HOSTS_MAX));
	if (px_store_key(px_cluster_store(core), key, sizeof(key), "drains") < 0)
		return;
	const char *argv[] = { "HGETALL", key };
	if (px_store_call(px_cluster_store(core), 2, argv, NULL, &r) == PX_OK &&
	    r->type == PX_REPLY_ARRAY)
		for (size_t i = 0; i + 1 < r->n; i += 2)
			if (px_provider_drain(core, px_reply_str(r, i),
					      strcmp(px_reply_str(r, i + 1), "1") == 0) == PX_OK)
				continue; /* a provider of another catalog: not ours */
	px_reply_free(r);
}

enum px_status px_core_new(const struct px_config *cfg, const struct px_catalog *cat,
			   const struct px_fetch_ops *ops, struct px_core **out)
{
	return px_core_new_cluster(cfg, cat, ops, NULL, NULL, out);
}

enum px_status px_core_new_cluster(const struct px_config *cfg, const struct px_catalog *cat,
				   const struct px_fetch_ops *ops, struct px_store *store,
				   struct px_hosts *hosts, struct px_core **out)
{
	enum px_status st = PX_ENOMEM;
	struct px_core *core = calloc(1, sizeof(*core));

	*out = NULL;
	if (!core)
		return PX_ENOMEM;
	core->cfg = cfg;
	core->monitor = calloc(1, sizeof(*core->monitor));
	if (!core->monitor)
		goto out;
	if (px_cluster_new(core, store, hosts) != PX_OK)
		goto out;
	if (px_sources_new(core, cat) != PX_OK)
		goto out;
	if (px_reloads_new(core) != PX_OK || px_probe_retry_new(core) != PX_OK)
		goto out;
	if (px_providers_init(core) != PX_OK)
		goto out;
	if (px_reads_new(cfg, &core->reads) != PX_OK)
		goto out;
	/* a session at its provider's limit gives back its idle streams' slots */
	px_providers_set_yield(core, px_session_yield_idle);
	if ((st = px_standby_init(core)) != PX_OK)
		goto out;
	st = PX_ENOMEM;
	/* local paths from playlists only inside strm_paths */
	for (size_t i = 0; i < cat->nassets && cat->from_playlists; i++)
		px_sources_screen_paths(core, i, 1);
	for (size_t i = 0; i < cat->nassets; i++) {
		if (cat->assets[i].kind == PX_ASSET_PLAIN)
			continue;
		if (px_transcode_new(cfg, cat, px_cluster_store(core), &core->tc) != PX_OK)
			px_error("core", "transcoded assets cannot be served (see above)");
		break;
	}
	if (ops) {
		core->fetch.ops = *ops;
	} else {
		if ((st = px_fetch_new(cfg, &core->fetch.own)) != PX_OK)
			goto out;
		core->fetch.ops = px_fetch_ops(core->fetch.own);
	}
	px_providers_set_cluster(core, px_cslots_acquire);
	if (hosts && px_cslots_start(core) != PX_OK) {
		px_warn("core", "providers' slots cannot be shared with the cluster: each host "
			"keeps to its own limit");
		for (size_t i = 0; i < px_provs_cap(core); i++)
			px_prov_rt(core, i)->cl = 0;
	}
	if (hosts) {
		px_hosts_set_counts(hosts, host_counts, core);
		px_hosts_set_load(hosts, host_load, core);
		px_hosts_set_tick(hosts, cluster_tick, core);
		if (px_hosts_start(hosts) != PX_OK)
			px_warn("core", "could not start the cluster heartbeat thread");
	}
	*out = core;
	core = NULL;
	st = PX_OK;
out:
	px_core_free(core);
	return st;
}

void px_core_free(struct px_core *core)
{
	if (!core)
		return;
	if (core->providers) {
		if (core->tc) {
			/* the writers' input feeds read through handles: their reads
			 * end now, their threads before the handles close */
			px_core_stop(core);
			px_transcode_end_feeds(core->tc);
		}
		/* before the fetcher stops: their streams' transfers end with it */
		px_handles_close_all(core);
		/* every slot this host holds back to the cluster */
		px_cslots_stop(core);
		monitor_stop(core);
		px_probe_retry_stop(core);
		px_copies_stop(core);
		px_providers_release(core);
		/* verification jobs end while the fetcher still runs */
		px_standby_stop(core);
	}
	px_transcode_free(core->tc);
	px_fetch_free(core->fetch.own);
	/* no fill ends any more: nothing queues a part for the disk */
	px_cache_disk_stop(core);
	if (core->providers) {
		px_sessions_free_all(core);
		px_standby_release(core);
	}
	if (core->sources) {
		struct px_reads_stats rs = { 0 };
		if (core->reads)
			px_reads_stats(core->reads, &rs);
		px_info("core", "reads: %llu head/tail cache hits, %llu cache fills, %llu streams "
			"(%llu restarts, %llu waits for bytes, %llu ms waiting), %llu direct range reads",
			(unsigned long long)rs.n_cache_hits, (unsigned long long)rs.n_cache_fills,
			(unsigned long long)rs.n_streams, (unsigned long long)rs.n_stream_restarts,
			(unsigned long long)rs.n_stream_waits,
			(unsigned long long)rs.stream_wait_us / 1000,
			(unsigned long long)rs.n_direct);
		px_cache_release(core);
		px_source_preps_free(core);
	}
	px_reads_free(core->reads);
	px_probe_retry_release(core);
	px_reloads_free(core);
	px_copies_free(core);
	px_providers_free(core);
	px_sources_free(core);
	px_cluster_free(core);
	free(core->monitor);
	free(core);
}

void px_core_set_peer_secret(struct px_core *core, char *secret)
{
	px_cluster_set_secret(core, secret);
}

void px_core_stop(struct px_core *core)
{
	px_providers_release(core);
	if (core->fetch.own)
		px_fetch_stop(core->fetch.own);
	px_transcode_stop(core->tc);
}

/* Lists a transcode or remux asset at the size its plan gives
 * (transcode/plan.c). */
static void discover_derived(struct px_core *core, size_t i, int64_t fallback_mtime,
			     unsigned char *listed)
{
	const struct px_asset *a = &px_cat(core)->assets[i];
	struct asset_rt *rt = px_asset_rt(core, i);
	int64_t size;
	if (!core->tc || px_transcode_plan(core->tc, i, &size) != PX_OK) {
		px_warn("core", "asset %s left out: its %s could not be planned", a->id,
			a->kind == PX_ASSET_REMUX ? "remux" : "transcode");
		return;
	}
	rt->size = size;
	rt->mtime = a->mtime >= 0 ? a->mtime : fallback_mtime;
	rt->listed = 1;
	listed[i] = 1;
	px_sources_count_listed(core, 1);
}

/* malloc_trim(0), one thread at a time. Where malloc is not glibc's (the
 * sanitizers' allocator), glibc's arena is first set up by the first
 * trim, and two threads setting it up at once read a half-made arena or
 * unbalance its count of attached threads (tests/unit/test_start.c); a
 * process of several cores discovers them from several threads. */
static void give_back_memory(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	malloc_trim(0);
	pthread_mutex_unlock(&lock);
}

enum px_status px_core_discover(struct px_core *core, struct px_state *state,
				int64_t fallback_mtime)
{
	const struct px_catalog *cat = px_cat(core);
	unsigned char *need = calloc(cat->nassets + 1, 1);
	unsigned char *listed = calloc(cat->nassets + 1, 1);
	char (*keys)[PX_STATE_KEY_LEN] = calloc(cat->nassets + 1, sizeof(*keys));
	enum px_status st = PX_ENOMEM;

	if (!need || !listed || !keys)
		goto out;
	px_sources_set_fallback_mtime(core, fallback_mtime);
	for (size_t i = 0; i < cat->nassets; i++) {
		const struct px_asset *a = &cat->assets[i];
		struct asset_rt *rt = px_asset_rt(core, i);
		int64_t size, mtime;
		if (a->kind != PX_ASSET_PLAIN) {
			discover_derived(core, i, fallback_mtime, listed);
			continue;
		}
		rt->size = a->size;
		rt->mtime = a->mtime;
		if (px_probe_state_key(a, keys[i]))
			goto out;
		if (state && px_state_get(state, a->id, keys[i], &size, &mtime) &&
		    (a->size < 0 || a->size == size)) {
			if (rt->size < 0)
				rt->size = size;
			if (rt->mtime < 0)
				rt->mtime = mtime;
		}
		/* only a size is needed to list: an asset the catalog (or the
		 * state) gives one costs no request at mount, whatever its count;
		 * without an mtime it takes the catalog's, remembered below */
		need[i] = rt->size < 0;
	}
	px_probe_assets(core, need);

	for (size_t i = 0; i < cat->nassets; i++) {
		struct asset_rt *rt = px_asset_rt(core, i);
		/* left out for want of a size: probe.c's retry asks again */
		rt->rediscover = need[i] && rt->size < 0;
		if (cat->assets[i].kind != PX_ASSET_PLAIN || rt->size < 0)
			continue;
		/* a fallback mtime is remembered too, so it stays the same */
		int fell_back = rt->mtime < 0;
		if (fell_back)
			rt->mtime = fallback_mtime;
		/* remembering is an optimisation: the asset is listed anyway */
		if ((need[i] || fell_back) && state &&
		    px_state_put(state, cat->assets[i].id, keys[i], rt->size, rt->mtime) != PX_OK)
			px_warn("state", "could not remember the size of %s", cat->assets[i].id);
		rt->listed = 1;
		listed[i] = 1;
		px_sources_count_listed(core, 1);
	}
	if (state) {
		char err[512];
		if (px_state_save(state, err, sizeof(err)) != PX_OK)
			px_warn("state", "could not remember sizes: %s", err);
		px_state_release(state);
	}
	struct px_tree *tree = NULL;
	st = px_tree_new(cat, listed, &tree);
	px_tree_free(px_sources_set_tree(core, tree));
	if (st == PX_OK) {
		px_providers_start(core);
		if (core->fetch.own) {
			if (pthread_create(&core->monitor->thread, NULL, monitor_main, core) == 0)
				core->monitor->started = 1;
			else
				px_warn("core", "could not start the monitor thread: sessions "
					"expire only at opens, and providers are not probed");
		}
		if (core->fetch.own) {
			px_probe_retry_start(core, state);
			px_cache_disk_start(core);
		}
		st = px_standby_start(core);
		if (st == PX_OK)
			st = px_copies_start(core);
	}
out:
	free(need);
	free(listed);
	free(keys);
	/* parsing the catalog and building the tree freed far more than is
	 * kept (the JSON document of a large library): give it back to the
	 * system, or a mount of 100 000 assets keeps it as resident memory */
	give_back_memory();
	return st;
}

const struct px_tree *px_core_tree(const struct px_core *core)
{
	return px_sources_tree(core);
}

void px_core_set_worker(struct px_core *core, const struct px_worker_info *w)
{
	core->worker = *w;
}

void px_core_set_catalog_path(struct px_core *core, const char *path)
{
	px_reload_set_path(core, path);
}

void px_core_on_reload(struct px_core *core,
		       void (*fn)(void *ctx, const struct px_tree *old, const struct px_tree *now),
		       void *ctx)
{
	px_probe_on_reload(core, fn, ctx);
}

int64_t px_core_asset_size(const struct px_core *core, size_t asset)
{
	return px_asset_rt(core, asset)->size;
}

int64_t px_core_asset_mtime(const struct px_core *core, size_t asset)
{
	return px_asset_rt(core, asset)->mtime;
}

size_t px_core_listed(const struct px_core *core)
{
	return px_sources_listed(core);
}

const struct px_catalog *px_core_catalog(const struct px_core *core)
{
	return px_cat(core);
}

void px_core_set_clock(struct px_core *core, int64_t (*now)(void))
{
	core->now = now ? now : px_now_ms;
}

/* The writers' input (px_core_feed_writers): the read path's handles. */
static int feed_listed(void *arg, size_t asset)
{
	const struct px_core *core = arg;
	return __atomic_load_n(&px_asset_rt(core, asset)->listed, __ATOMIC_RELAXED);
}

static int64_t feed_size(void *arg, size_t asset)
{
	return px_core_asset_size(arg, asset);
}

static enum px_status feed_open(void *arg, size_t asset, uint64_t client, void **h)
{
	struct px_handle *ph = NULL;
	enum px_status st = px_handle_open(arg, asset, client, &ph);
	*h = ph;
	return st;
}

static enum px_status feed_read(void *h, int64_t off, size_t len, void *buf, size_t *got)
{
	return px_handle_read(h, off, len, buf, got);
}

static void feed_close(void *h)
{
	px_handle_close(h);
}

void px_core_feed_writers(struct px_core *core)
{
	struct px_tc_input in = { feed_listed, feed_size, feed_open, feed_read, feed_close,
				  core };
	px_transcode_set_input(core->tc, &in);
}

struct px_transcode *px_core_transcode(const struct px_core *core)
{
	return core->tc;
}
