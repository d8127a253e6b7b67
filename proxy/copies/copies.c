/*
 * copies.c - verified copies of assets on the catalog's storages
 * (docs/copies.md): the copies of a core, their thread, and reloads.
 *
 * An asset that wants N copies and has fewer that serve gets a job; the
 * copies thread looks at everything every second (at once when kicked:
 * ctl, a reload) and runs one job at a time: it copies the asset from a
 * live source, in spare slots only, onto the freest storage that takes
 * it, proves the copy identical to the asset, and makes it a verified
 * path source of the asset like any other. Each look (evaluate), in
 * order:
 *
 *   storage.c   drained storages' viewers moved away; every storage
 *               looked at again (reachable, free space); manifests read
 *               of storages that came in (manifest.c)
 *   stale.c     copies a read found replaced, whose storage went away or
 *               whose source's ETag changed stop serving
 *   job.c       each asset's job brought up to date and placed (place.c:
 *               where a copy goes, across hosts too with peers.c)
 *
 * then the job picked takes its claim in cluster mode (claim.c) and runs
 * (job.c): copy.c makes the copy, reading the source in spare slots
 * (spare.c) into its place on a storage others may write to (dest.c),
 * and makes it a source (serve.c). status.c answers the status and the
 * metrics; table.c holds the lookups every file uses. The files share
 * copies_i.h; other folders see copies.h only.
 *
 * Lock: cp->lock guards storages, copies and jobs; taken alone: calls
 * into sources.c, provider.c and standby.c are made without it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "copies_i.h"
#include "log.h"
#include "sources.h"

/* Brings storages, copies and jobs up to date; returns the job to run
 * (its storage in *si), or -1. cp->lock held. */
static long evaluate(struct px_copies *cp, size_t *si_out)
{
	cp_storages_drain(cp);
	cp_storages_look(cp);
	cp_storages_load(cp);
	cp_drop_replaced(cp);
	cp_follow_storages(cp);
	cp_recheck_etags(cp);
	return cp_jobs_plan(cp, si_out);
}

static void *copies_main(void *arg)
{
	struct px_copies *cp = arg;
	pthread_mutex_lock(&cp->lock);
	while (!cp->stop) {
		size_t si = 0;
		cp->kick = 0;
		pthread_mutex_unlock(&cp->lock);
		cp_sync_due(cp);
		pthread_mutex_lock(&cp->lock);
		long ji = evaluate(cp, &si);
		if (ji >= 0 && !cp_claim_job(cp, ji, si))
			continue;
		if (ji >= 0) {
			cp_job_run(cp, ji, si);
			continue; /* another may be due at once */
		}
		if (cp->kick || cp->stop)
			continue;
		int64_t wake = px_now_ms() + 1000;
		struct timespec ts = { wake / 1000, (wake % 1000) * 1000000 };
		pthread_cond_timedwait(&cp->cond, &cp->lock, &ts);
	}
	pthread_mutex_unlock(&cp->lock);
	return NULL;
}

/* ---- the API */

enum px_status px_copies_start(struct px_core *core)
{
	struct px_copies *cp = calloc(1, sizeof(*cp));
	if (!cp)
		return PX_ENOMEM;
	cp->core = core;
	cp->cap = px_assets_cap(core);
	cp->want = malloc((cp->cap + 1) * sizeof(*cp->want));
	cp->sha = calloc(cp->cap + 1, sizeof(*cp->sha));
	cp->sha_set = calloc(cp->cap + 1, 1);
	if (!cp->want || !cp->sha || !cp->sha_set) {
		free(cp->want);
		free(cp->sha);
		free(cp->sha_set);
		free(cp);
		return PX_ENOMEM;
	}
	for (size_t i = 0; i <= cp->cap; i++)
		cp->want[i] = -2;
	if (core->cfg->host_id)
		snprintf(cp->host, sizeof(cp->host), "%s", core->cfg->host_id);
	else
		px_host_id_default(cp->host, sizeof(cp->host));
	pthread_mutex_init(&cp->lock, NULL);
	px_cond_init_mono(&cp->cond);
	core->copies = cp;
	pthread_mutex_lock(&cp->lock);
	cp_merge_storages(cp, px_cat(core));
	pthread_mutex_unlock(&cp->lock);
	if (core->fetch.own == NULL && px_cat(core)->nstorages == 0)
		return PX_OK; /* a unit test's core without storages: no thread */
	if (pthread_create(&cp->thread, NULL, copies_main, cp) == 0)
		cp->started = 1;
	else
		px_warn("copies", "could not start the copies thread: no copy will be made");
	return PX_OK;
}

void px_copies_stop(struct px_core *core)
{
	struct px_copies *cp = core->copies;
	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	cp->stop = 1;
	pthread_cond_broadcast(&cp->cond);
	/* a range in flight ends now, not at its timeout */
	uint64_t id = cp->reading ? atomic_load(&cp->reading->id) : 0;
	if (id)
		core->fetch.ops.cancel(core->fetch.ops.impl, id);
	pthread_mutex_unlock(&cp->lock);
	if (cp->started)
		pthread_join(cp->thread, NULL);
	cp->started = 0;
}

void px_copies_free(struct px_core *core)
{
	struct px_copies *cp = core->copies;
	if (!cp)
		return;
	px_copies_stop(core);
	core->copies = NULL;
	for (size_t i = 0; i < cp->nst; i++) {
		free(cp->st[i].name);
		free(cp->st[i].path);
		free(cp->st[i].host);
	}
	free(cp->st);
	free(cp->c);
	free(cp->jobs);
	cp_peers_free(cp->peers, cp->npeers);
	free(cp->ps);
	free(cp->want);
	free(cp->sha);
	free(cp->sha_set);
	pthread_cond_destroy(&cp->cond);
	pthread_mutex_destroy(&cp->lock);
	free(cp);
}

void px_copies_reload(struct px_core *core, const struct px_catalog *nc)
{
	struct px_copies *cp = core->copies;
	if (!cp)
		return;
	size_t drop_asset[64], drop_k[64], ndrop = 0;
	pthread_mutex_lock(&cp->lock);
	cp_merge_storages(cp, nc);
	for (size_t j = 0; j < nc->nassets; j++) {
		const struct px_asset *na = &nc->assets[j];
		long a = px_catalog_find(px_cat(core), na->id);
		if (a < 0 || (size_t)a >= cp->cap || na->kind != PX_ASSET_PLAIN)
			continue;
		cp->want[a] = na->copies;
		cp->sha[a] = na->sha256;
		cp->sha_set[a] = 1;
		for (size_t i = 0; i < cp->nc; i++) {
			struct copy *c = &cp->c[i];
			if (c->asset != (size_t)a || c->stale)
				continue;
			c->recheck = c->etag[0] != '\0';
			c->recheck_at = 0;
			/* (a new size needs a remount: the manifest's size is
			 * checked then) */
			int changed = na->sha256 && strcmp(na->sha256, c->sha) != 0;
			if (!changed)
				continue;
			/* a stale copy stops serving now; the job makes it again */
			c->stale = 1;
			if (c->registered && c->serving && ndrop < 64) {
				drop_asset[ndrop] = c->asset;
				drop_k[ndrop++] = c->k;
			}
			c->serving = 0;
			cp_manifest_save(cp, c->storage);
			px_info("copies", "asset %s: the asset changed: its copy on storage %s is "
				"stale and stops serving", na->id, cp->st[c->storage].name);
		}
	}
	cp->rescan_at = 0; /* cluster: the other hosts' manifests read again now */
	cp_kick(cp);
	pthread_mutex_unlock(&cp->lock);
	for (size_t i = 0; i < ndrop; i++)
		px_sources_drop(core, drop_asset[i], drop_k[i], "stale copy: the asset changed");
}
