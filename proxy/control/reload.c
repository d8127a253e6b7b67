/*
 * reload.c - a new catalog while mounted.
 *
 * The new catalog is parsed and validated by the caller; an invalid one
 * never gets here, and the old one stays. Then the source layer changes
 * the core's own copy of the catalog, which has room to spare
 * (px_sources_apply, sources.c; reload.c writes no provider's or source's
 * field):
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "copies.h"
#include "reload.h"
#include "probe.h"
#include "provider.h"
#include "sources.h"
#include "tree.h"
#include "clock.h"
#include "import.h"
#include "log.h"

/* How long a reload waits for the catalog file: a .strm tree of 100 000
 * files on a slow NFS server is read well within it. */
#define RELOAD_READ_MS 30000

/* reload.c's own state (context.h's px_core.reloads), under the reload
 * lock (px_reload_lock, probe.c): the catalogs and trees kept until the
 * core is freed, the last reload's outcome; made by px_reloads_new, freed
 * by px_reloads_free, opaque to the rest. */
struct px_reloads {
	struct px_catalog *catalogs[PX_MAX_RELOADS];
	struct px_tree *old_trees[PX_MAX_RELOADS];
	size_t ncatalogs;
	const char *catalog_path;  /* borrowed from main; NULL: no reload */
	char reload_msg[1024];     /* the last reload's outcome, in words */
	int reload_ok;
	int64_t reload_when;
	uint64_t n_reloads;
	int readers_left;          /* catalog readers a reload gave up on, that
				    * may still sit in the kernel */
};

enum px_status px_reloads_new(struct px_core *core)
{
	core->reloads = calloc(1, sizeof(*core->reloads));
	return core->reloads ? PX_OK : PX_ENOMEM;
}

void px_reloads_free(struct px_core *core)
{
	if (!core->reloads)
		return;
	for (size_t i = 0; i < core->reloads->ncatalogs; i++) {
		px_tree_free(core->reloads->old_trees[i]);
		px_catalog_free(core->reloads->catalogs[i]);
	}
	free(core->reloads);
	core->reloads = NULL;
}

void px_reload_set_path(struct px_core *core, const char *path)
{
	core->reloads->catalog_path = path;
}

void px_reload_stats(struct px_core *core, struct px_reload_stats *out)
{
	px_reload_lock(core);
	out->n_reloads = core->reloads->n_reloads;
	out->reload_ok = core->reloads->reload_ok;
	memcpy(out->reload_msg, core->reloads->reload_msg, sizeof(out->reload_msg));
	out->reload_msg[sizeof(out->reload_msg) - 1] = '\0';
	out->reload_when = core->reloads->reload_when;
	px_reload_unlock(core);
}

/* Builds the tree of the reloaded catalog and swaps it in, telling the
 * front. reload_lock held. */
static enum px_status publish(struct px_core *core, const struct px_sources_change *c,
			      unsigned char *listed, int n_gone)
{
	struct px_tree *tree = NULL;
	enum px_status st = px_tree_new(px_cat(core), listed, &tree);
	if (st != PX_OK) {
		px_sources_note(c->report, c->len, "the new tree could not be built: %s",
				px_strerror(st));
		return st;
	}
	/* publish: listed flags, then the tree */
	px_sources_set_listed(core, listed);
	struct px_tree *old = px_sources_set_tree(core, tree);
	core->reloads->old_trees[core->reloads->ncatalogs] = old;
	px_probe_tell(core, old, tree);
	px_copies_reload(core, c->nc);
	px_info("reload", "catalog reloaded: %d asset(s) added, %d gone, %d source(s) added, "
		"%d removed%s%s", c->n_new, n_gone, c->s_added, c->s_removed,
		c->report[0] ? "; " : "", c->report);
	return PX_OK;
}

enum px_status px_reload_catalog(struct px_core *core, struct px_catalog *nc, char *report,
			      size_t len)
{
	struct px_sources_change c = { .nc = nc, .report = report, .len = len };
	unsigned char *listed = NULL;
	int merged = 0;
	enum px_status st = PX_ENOMEM;

	report[0] = '\0';
	c.map = calloc(nc->nproviders + 1, sizeof(*c.map));
	px_reload_lock(core);
	if (!c.map || core->reloads->ncatalogs == PX_MAX_RELOADS) {
		px_sources_note(report, len, "%s",
				c.map ? "too many reloads: remount" : "out of memory");
		goto out;
	}
	c.keep = calloc(px_assets_cap(core) + 1, 1);
	c.need = calloc(px_assets_cap(core) + 1, 1);
	listed = calloc(px_assets_cap(core) + 1, 1);
	if (!c.keep || !c.need || !listed)
		goto out;

	merged = 1; /* from here the core may point into nc: it is kept */
	px_sources_apply(core, &c);
	/* sizes of the new assets, as at mount (bounded by probe_timeout) */
	px_probe_assets(core, c.need);
	st = publish(core, &c, listed, px_sources_listing(core, &c, listed));
out:
	px_reload_unlock(core);
	if (nc && merged)
		core->reloads->catalogs[core->reloads->ncatalogs++] = nc; /* room was checked first */
	else if (nc)
		px_catalog_free(nc);
	free(c.map);
	free(c.keep);
	free(c.need);
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

/* Starts the reader; NULL when it cannot (err says why). */
static struct load_job *load_start(struct px_core *core, char *err, size_t errlen)
{
	struct load_job *j = calloc(1, sizeof(*j));
	pthread_attr_t attr;
	pthread_t t;
	int ok = 0;

	if (!j || !(j->path = strdup(core->reloads->catalog_path)) ||
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
		snprintf(err, errlen, "%s: cannot start a thread to read it", core->reloads->catalog_path);
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
	while (!j->done && px_now_ms() < deadline && !px_providers_stopping(core))
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
		px_reload_lock(core);
		core->reloads->readers_left++;
		px_reload_unlock(core);
		if (px_providers_stopping(core))
			snprintf(err, errlen, "%s: not read before the daemon stopped (a hung file "
				 "system?)", core->reloads->catalog_path);
		else
			snprintf(err, errlen, "%s: not read within %d s (a hung file system?); "
				 "the read is left behind", core->reloads->catalog_path, RELOAD_READ_MS / 1000);
	}
	int mine = j->done;
	pthread_mutex_unlock(&j->lock);
	if (mine)
		job_free(j);
	return st;
}

int px_reload_readers_left(struct px_core *core)
{
	px_reload_lock(core);
	int n = core->reloads->readers_left;
	px_reload_unlock(core);
	return n;
}

enum px_status px_reload_file(struct px_core *core, char *report, size_t len)
{
	struct px_catalog *nc = NULL;
	char err[1024];
	enum px_status st;

	if (!core->reloads->catalog_path) {
		snprintf(report, len, "no catalog file to read again");
		return PX_EINVAL;
	}
	st = load_bounded(core, &nc, err, sizeof(err));
	if (st != PX_OK) {
		snprintf(report, len, "the catalog was not reloaded, the old one stays: %s", err);
	} else {
		if (nc->nsettings)
			px_info("reload", "%s: \"settings\" apply at the next mount only",
				core->reloads->catalog_path);
		st = px_reload_catalog(core, nc, report, len);
	}
	px_reload_lock(core);
	snprintf(core->reloads->reload_msg, sizeof(core->reloads->reload_msg), "%s%s",
		 st == PX_OK ? "reloaded" : "", st == PX_OK && report[0] ? ": " : "");
	size_t n = strlen(core->reloads->reload_msg);
	snprintf(core->reloads->reload_msg + n, sizeof(core->reloads->reload_msg) - n, "%s", report);
	core->reloads->reload_ok = st == PX_OK;
	core->reloads->reload_when = core->now();
	core->reloads->n_reloads++;
	px_reload_unlock(core);
	if (st != PX_OK)
		px_error("reload", "%s", report);
	return st;
}
