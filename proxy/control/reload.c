/*
 * reload.c - a new catalog while mounted.
 *
 * The new catalog is parsed and validated by the caller; an invalid one
 * never gets here, and the old one stays. Then, in the core's own copy of
 * the catalog (sources.c), which has room to spare:
 *  - providers: a new name is added; an existing one takes the new
 *    max_connections and drained (its headers stay until a remount);
 *  - an asset whose id is known keeps its path, size and inode; its
 *    sources become the new list: new ones are added (standbys for live
 *    sessions once verified), missing ones are marked removed, so open
 *    files go on reading;
 *  - an asset whose id is gone is no longer listed: new opens do not find
 *    it, open files read on to the end;
 *  - a new plain asset is added, its size learned as at mount, and listed.
 * The tree is rebuilt and swapped in; old trees stay alive until the core
 * is freed, because FUSE threads read them without locks. The fs front is
 * told (hook) so that it can drop the kernel's cached entries.
 *
 * What a reload cannot change (a known asset's path, kind or size; a new
 * transcode; providers' headers) is reported in the reload's message and
 * needs a remount. The new catalog's strings are borrowed: the core keeps
 * every catalog it was given until it is freed.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "copies.h"
#include "reload.h"
#include "health.h"
#include "probe.h"
#include "provider.h"
#include "sources.h"
#include "standby.h"
#include "tree.h"
#include "clock.h"
#include "import.h"
#include "log.h"

/* How long a reload waits for the catalog file: a .strm tree of 100 000
 * files on a slow NFS server is read well within it. */
#define RELOAD_READ_MS 30000

/* Appends to the report, keeping it one line. */
static void note(char *r, size_t len, const char *fmt, ...) PX_PRINTF(3, 4);
static void note(char *r, size_t len, const char *fmt, ...)
{
	size_t n = strlen(r);
	va_list ap;
	if (n + 3 >= len)
		return;
	if (n)
		n += (size_t)snprintf(r + n, len - n, "; ");
	va_start(ap, fmt);
	vsnprintf(r + n, len - n, fmt, ap);
	va_end(ap);
}

/* Whether two asset paths cannot both be files: equal, or one a folder on
 * the other's way. */
static int paths_clash(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la == lb)
		return strcmp(a, b) == 0;
	if (la > lb)
		return strncmp(a, b, lb) == 0 && a[lb] == '/';
	return strncmp(b, a, la) == 0 && b[la] == '/';
}

static long find_provider(const struct px_catalog *c, const char *name)
{
	for (size_t i = 0; i < c->nproviders; i++)
		if (strcmp(c->providers[i].name, name) == 0)
			return (long)i;
	return -1;
}

static int same_source(const struct px_source *a, const struct px_source *b)
{
	return (a->url && b->url && strcmp(a->url, b->url) == 0) ||
	       (a->path && b->path && strcmp(a->path, b->path) == 0);
}

/* Maps the new catalog's provider indices to the core's, adding providers
 * the core does not know. prov_lock held. */
static void merge_providers(struct px_core *core, const struct px_catalog *nc, size_t *map,
			    char *report, size_t len)
{
	struct px_catalog *m = core->mcat;
	for (size_t i = 0; i < nc->nproviders; i++) {
		const struct px_provider *np = &nc->providers[i];
		long k = find_provider(m, np->name);
		if (k < 0 && m->nproviders < core->provs_cap) {
			k = (long)m->nproviders;
			m->providers[k] = *np;
			memset(&core->provs[k], 0, sizeof(core->provs[k]));
			core->provs[k].probe_asset = -1;
			core->provs[k].cl = core->store != NULL;
			core->provs[k].max = np->max_connections;
			core->provs[k].drained = np->drained;
			m->nproviders++;
		} else if (k >= 0) {
			struct px_provider *op = &m->providers[k];
			if (op->nheaders != np->nheaders)
				note(report, len, "provider %s: new headers need a remount", np->name);
			op->max_connections = np->max_connections;
			core->provs[k].max = np->max_connections;
			if (!np->implicit)
				core->provs[k].drained = np->drained;
		} else {
			note(report, len, "provider %s: no room for more providers", np->name);
		}
		map[i] = k < 0 ? (size_t)-1 : (size_t)k;
	}
}

/* The new source list of a known asset: adds and removes. Both locks held. */
static void merge_sources(struct px_core *core, size_t ai, const struct px_asset *na,
			  const size_t *map, int *added, int *removed, char *report, size_t len)
{
	struct px_asset *a = &core->mcat->assets[ai];
	struct asset_rt *rt = &core->assets[ai];
	for (size_t k = 0; k < a->nsources; k++) {
		int keep = a->sources[k].storage != NULL; /* a copy: copies.c's */
		for (size_t j = 0; j < na->nsources && !keep; j++)
			keep = same_source(&a->sources[k], &na->sources[j]);
		if (!keep && !rt->dead[k]) {
			rt->dead[k] = 1;
			struct src_rt *all = px_src_ensure(core, ai);
			if (all) {
				all[k].removed = 1;
				px_src_why(&all[k], "removed by a reload");
			}
			(*removed)++;
		}
	}
	for (size_t j = 0; j < na->nsources; j++) {
		long k = -1;
		for (size_t i = 0; i < a->nsources && k < 0; i++)
			if (same_source(&a->sources[i], &na->sources[j]))
				k = (long)i;
		if (k >= 0) {
			if (rt->dead[k] && rt->src &&
			    strcmp(px_src_why_of(&rt->src[k]), "removed by a reload") == 0) {
				rt->dead[k] = 0; /* back in the list */
				rt->src[k].removed = 0;
				px_src_why(&rt->src[k], NULL);
			}
			continue;
		}
		if (a->nsources >= rt->source_cap || map[na->sources[j].provider] == (size_t)-1) {
			note(report, len, "asset %s: no room for source %s", a->id,
			     na->sources[j].shown);
			continue;
		}
		size_t n = a->nsources;
		a->sources[n] = na->sources[j];
		a->sources[n].provider = map[na->sources[j].provider];
		px_provider_note_source(core, a->sources[n].provider, a->sources[n].url);
		rt->dead[n] = 0;
		if (rt->src) {
			px_src_why(&rt->src[n], NULL);
			memset(&rt->src[n], 0, sizeof(rt->src[n]));
		}
		a->nsources = n + 1;
		(*added)++;
	}
}

/* Appends a new plain asset (unlisted until its size is known). Both locks
 * held. Returns its index, or -1 when there is no room. */
static long add_asset(struct px_core *core, const struct px_asset *na, const size_t *map)
{
	struct px_catalog *m = core->mcat;
	if (m->nassets >= core->assets_cap)
		return -1;
	size_t i = m->nassets;
	struct asset_rt *rt = &core->assets[i];
	struct px_asset *a = &m->assets[i];
	memset(rt, 0, sizeof(*rt));
	rt->source_cap = na->nsources + px_spare_sources(m->nassets);
	rt->dead = calloc(rt->source_cap + 1, 1);
	rt->src = calloc(rt->source_cap + 1, sizeof(*rt->src));
	struct px_source *srcs = calloc(rt->source_cap, sizeof(*srcs));
	if (!rt->dead || !rt->src || !srcs) {
		free((void *)rt->dead);
		free(rt->src);
		free(srcs);
		memset(rt, 0, sizeof(*rt));
		return -1;
	}
	*a = *na;
	a->sources = srcs;
	a->nsources = 0;
	for (size_t j = 0; j < na->nsources; j++) {
		if (map[na->sources[j].provider] == (size_t)-1)
			continue;
		srcs[a->nsources] = na->sources[j];
		srcs[a->nsources].provider = map[na->sources[j].provider];
		px_provider_note_source(core, srcs[a->nsources].provider, srcs[a->nsources].url);
		a->nsources++;
	}
	rt->size = na->size;
	rt->mtime = na->mtime;
	m->nassets = i + 1; /* published last */
	return (long)i;
}

enum px_status px_reload_catalog(struct px_core *core, struct px_catalog *nc, char *report,
			      size_t len)
{
	struct px_catalog *m = core->mcat;
	size_t *map = calloc(nc->nproviders + 1, sizeof(*map));
	size_t old_n = m->nassets;
	unsigned char *keep = NULL, *need = NULL, *listed = NULL;
	int n_new = 0, n_gone = 0, s_added = 0, s_removed = 0, merged = 0;
	enum px_status st = PX_ENOMEM;
	struct px_tree *tree = NULL;

	report[0] = '\0';
	pthread_mutex_lock(&core->reload_lock);
	if (!map || core->ncatalogs == PX_MAX_RELOADS) {
		note(report, len, "%s", map ? "too many reloads: remount" : "out of memory");
		goto out;
	}
	keep = calloc(core->assets_cap + 1, 1);
	need = calloc(core->assets_cap + 1, 1);
	listed = calloc(core->assets_cap + 1, 1);
	if (!keep || !need || !listed)
		goto out;

	pthread_mutex_lock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	merged = 1; /* from here the core may point into nc: it is kept */
	merge_providers(core, nc, map, report, len);
	for (size_t j = 0; j < nc->nassets; j++) {
		const struct px_asset *na = &nc->assets[j];
		long i = px_catalog_find(core->cat, na->id);
		if (i >= 0) {
			const struct px_asset *a = &m->assets[i];
			keep[i] = 1;
			if (strcmp(a->path, na->path) != 0)
				note(report, len, "asset %s: a new path needs a remount", na->id);
			if (a->kind != na->kind)
				note(report, len, "asset %s: a new kind needs a remount", na->id);
			else if (a->kind == PX_ASSET_PLAIN)
				merge_sources(core, (size_t)i, na, map, &s_added, &s_removed,
					      report, len);
			if (a->kind == PX_ASSET_PLAIN)
				px_sources_screen_paths(core, (size_t)i, nc->from_playlists);
			if (na->size >= 0 && core->assets[i].size >= 0 &&
			    na->size != core->assets[i].size)
				note(report, len, "asset %s: a new size needs a remount", na->id);
			continue;
		}
		if (na->kind != PX_ASSET_PLAIN) {
			note(report, len, "asset %s: a new transcode or remux needs a remount",
			     na->id);
			continue;
		}
		/* a path a kept asset has (or a folder of it, or a file on its
		 * way) cannot be taken */
		int clash = 0;
		for (size_t k = 0; k < old_n && !clash; k++)
			clash = core->assets[k].listed && px_catalog_find(nc, m->assets[k].id) >= 0 &&
				paths_clash(m->assets[k].path, na->path);
		if (clash) {
			note(report, len, "asset %s: its path clashes with another asset's", na->id);
			continue;
		}
		i = add_asset(core, na, map);
		if (i < 0) {
			note(report, len, "asset %s: no room for more assets", na->id);
			continue;
		}
		px_sources_screen_paths(core, (size_t)i, nc->from_playlists);
		need[i] = core->assets[i].size < 0; /* a size lists it: no request */
		n_new++;
	}
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_unlock(&core->prov_lock);

	/* sizes of the new assets, as at mount (bounded by probe_timeout) */
	px_probe_assets(core, need);

	for (size_t i = 0; i < m->nassets; i++) {
		struct asset_rt *rt = &core->assets[i];
		if (i < old_n)
			listed[i] = rt->listed && keep[i];
		else if (rt->size >= 0)
			listed[i] = 1;
		else
			note(report, len, "asset %s: left out, its size is unknown",
			     m->assets[i].id);
		/* a new asset without a size is asked again (probe.c's retry);
		 * one no longer in the catalog is not */
		rt->rediscover = i < old_n ? rt->rediscover && keep[i] : rt->size < 0;
		if (i < old_n && rt->listed && !keep[i])
			n_gone++;
		if (i >= old_n && rt->mtime < 0)
			rt->mtime = core->catalog_mtime;
	}
	st = px_tree_new(core->cat, listed, &tree);
	if (st != PX_OK) {
		note(report, len, "the new tree could not be built: %s", px_strerror(st));
		goto out;
	}
	/* publish: listed flags, then the tree */
	for (size_t i = 0; i < m->nassets; i++) {
		if (core->assets[i].listed != listed[i])
			core->nlisted += listed[i] ? 1 : (size_t)-1;
		core->assets[i].listed = listed[i];
	}
	struct px_tree *old = atomic_exchange(&core->tree, tree);
	core->old_trees[core->ncatalogs] = old;
	px_reload_fn told = atomic_load(&core->on_reload);
	if (told)
		told(core->on_reload_ctx, old, tree);
	px_copies_reload(core, nc);
	px_info("reload", "catalog reloaded: %d asset(s) added, %d gone, %d source(s) added, "
		"%d removed%s%s", n_new, n_gone, s_added, s_removed, report[0] ? "; " : "",
		report);
	st = PX_OK;
out:
	pthread_mutex_unlock(&core->reload_lock);
	if (nc && merged)
		core->catalogs[core->ncatalogs++] = nc; /* room was checked first */
	else if (nc)
		px_catalog_free(nc);
	free(map);
	free(keep);
	free(need);
	free(listed);
	return st;
}

/*
 * A catalog read on its own thread. A file on a hung NFS mount holds its
 * reader in the kernel for as long as the server is away, and whoever
 * asked for the reload (the signal thread, the control API) must not be
 * held with it: the waiter gives up at a bound or when the daemon stops,
 * and the reader, touching nothing but this job, frees it when it ends.
 */
struct load_job {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, abandoned;         /* under lock */
	char *path, *strm_paths;
	struct px_catalog *cat;
	enum px_status st;
	char err[1024];
};

static void job_free(struct load_job *j)
{
	pthread_mutex_destroy(&j->lock);
	pthread_cond_destroy(&j->cond);
	px_catalog_free(j->cat);
	free(j->path);
	free(j->strm_paths);
	free(j);
}

static void *load_main(void *arg)
{
	struct load_job *j = arg;
	struct px_catalog *cat = NULL;
	char err[sizeof(j->err)];
	enum px_status st = px_import_load(j->path, j->strm_paths, &cat, err, sizeof(err));

	pthread_mutex_lock(&j->lock);
	int abandoned = j->abandoned;
	j->cat = cat;
	j->st = st;
	memcpy(j->err, err, sizeof(err));
	j->done = 1;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	if (abandoned) {
		px_warn("reload", "%s: the reload given up on has ended its read now (%s); "
			"nothing applied", j->path, st == PX_OK ? "read" : "failed");
		job_free(j);
	}
	return NULL;
}

/* Whether px_core_stop() was called. */
static int stopping(struct px_core *core)
{
	pthread_mutex_lock(&core->prov_lock);
	int s = core->stopping;
	pthread_mutex_unlock(&core->prov_lock);
	return s;
}

/* Starts the reader; NULL when it cannot (err says why). */
static struct load_job *load_start(struct px_core *core, char *err, size_t errlen)
{
	struct load_job *j = calloc(1, sizeof(*j));
	pthread_attr_t attr;
	pthread_t t;
	int ok = 0;

	if (!j || !(j->path = strdup(core->catalog_path)) ||
	    (core->cfg->strm_paths && !(j->strm_paths = strdup(core->cfg->strm_paths)))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	pthread_mutex_init(&j->lock, NULL);
	px_cond_init_mono(&j->cond);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ok = pthread_create(&t, &attr, load_main, j) == 0;
	pthread_attr_destroy(&attr);
	if (!ok)
		snprintf(err, errlen, "%s: cannot start a thread to read it", core->catalog_path);
out:
	if (!ok && j) {
		if (j->path)
			job_free(j);
		else
			free(j);
		j = NULL;
	}
	return j;
}

/*
 * px_import_load() of the catalog, waited for at most RELOAD_READ_MS and
 * not past px_core_stop(): a reader that has not answered by then is left
 * behind (PX_ETIMEDOUT, err says so) and frees what it read itself.
 */
static enum px_status load_bounded(struct px_core *core, struct px_catalog **out, char *err,
				   size_t errlen)
{
	enum px_status st = PX_EIO;
	int64_t deadline = px_now_ms() + RELOAD_READ_MS;
	struct load_job *j = load_start(core, err, errlen);

	*out = NULL;
	if (!j)
		return PX_ENOMEM;
	pthread_mutex_lock(&j->lock);
	/* in steps, so that a stop is seen within one */
	while (!j->done && px_now_ms() < deadline && !stopping(core))
		px_cond_wait_until(&j->cond, &j->lock, &j->done,
				   px_now_ms() + 100 < deadline ? px_now_ms() + 100 : deadline);
	if (j->done) {
		st = j->st;
		*out = j->cat;
		j->cat = NULL;
		snprintf(err, errlen, "%s", j->err);
	} else {
		j->abandoned = 1;
		st = PX_ETIMEDOUT;
		pthread_mutex_lock(&core->reload_lock);
		core->readers_left++;
		pthread_mutex_unlock(&core->reload_lock);
		if (stopping(core))
			snprintf(err, errlen, "%s: not read before the daemon stopped (a hung file "
				 "system?)", core->catalog_path);
		else
			snprintf(err, errlen, "%s: not read within %d s (a hung file system?); "
				 "the read is left behind", core->catalog_path, RELOAD_READ_MS / 1000);
	}
	int mine = j->done;
	pthread_mutex_unlock(&j->lock);
	if (mine)
		job_free(j);
	return st;
}

int px_reload_readers_left(struct px_core *core)
{
	pthread_mutex_lock(&core->reload_lock);
	int n = core->readers_left;
	pthread_mutex_unlock(&core->reload_lock);
	return n;
}

enum px_status px_reload_file(struct px_core *core, char *report, size_t len)
{
	struct px_catalog *nc = NULL;
	char err[1024];
	enum px_status st;

	if (!core->catalog_path) {
		snprintf(report, len, "no catalog file to read again");
		return PX_EINVAL;
	}
	st = load_bounded(core, &nc, err, sizeof(err));
	if (st != PX_OK) {
		snprintf(report, len, "the catalog was not reloaded, the old one stays: %s", err);
	} else {
		if (nc->nsettings)
			px_info("reload", "%s: \"settings\" apply at the next mount only",
				core->catalog_path);
		st = px_reload_catalog(core, nc, report, len);
	}
	pthread_mutex_lock(&core->reload_lock);
	snprintf(core->reload_msg, sizeof(core->reload_msg), "%s%s",
		 st == PX_OK ? "reloaded" : "", st == PX_OK && report[0] ? ": " : "");
	size_t n = strlen(core->reload_msg);
	snprintf(core->reload_msg + n, sizeof(core->reload_msg) - n, "%s", report);
	core->reload_ok = st == PX_OK;
	core->reload_when = core->now();
	core->n_reloads++;
	pthread_mutex_unlock(&core->reload_lock);
	if (st != PX_OK)
		px_error("reload", "%s", report);
	return st;
}
