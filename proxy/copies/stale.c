/*
 * stale.c - copies that stop serving (docs/copies.md, "Staleness" and
 * "Storages others can write to").
 *
 * A serving copy is read guarded (px_source_open, rangeread.c): opened
 * beneath the storage's directory, never through a link nor onto another
 * file system, and only as the file made or found; a read that finds it
 * replaced marks it and no session goes there, and the copies thread
 * drops it here (cp_drop_replaced): stale, logged once and counted. A
 * copy whose storage becomes unreachable (or leaves the catalog) stops
 * serving until it is back (cp_follow_storages). A source whose ETag
 * changed since the copy (asked at mount and after each reload,
 * cp_recheck_etags) makes its copies stale; the job makes them again.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "copies_i.h"
#include "health.h"
#include "log.h"

/* Copy ci was found replaced by a read (px_source_open: w
 * PX_IN_WAY_LINK, a link on its way, or a foreign file): it stops
 * serving, once, stale (the job makes it again, and waits while the
 * thing stays in its way). The copies thread, cp->lock held; dropped
 * around the call into sources.c. */
static void drop_in_way(struct px_copies *cp, long ci, int w)
{
	struct px_core *core = cp->core;
	struct copy *c = &cp->c[ci];
	size_t asset = c->asset, k = c->k;
	char why[400], sname[256];
	c->serving = 0;
	c->stale = 1;
	c->dropped = w == PX_IN_WAY_LINK ? PX_WAIT_LINK : PX_WAIT_FOREIGN;
	atomic_fetch_add(&cp->n_in_way, 1);
	atomic_fetch_add(&cp->n_read_in_way, 1);
	snprintf(sname, sizeof(sname), "%s", cp->st[c->storage].name);
	if (c->mine)
		cp_manifest_save(cp, c->storage);
	snprintf(why, sizeof(why), "copy on storage %s: %s", sname,
		 px_copy_wait_name(c->dropped));
	px_warn("copies", "asset %s: the copy on storage %s (%s) %s: left alone, it stops "
		"serving", px_cat(core)->assets[asset].id, sname,
		px_cat(core)->assets[asset].sources[k].path,
		w == PX_IN_WAY_LINK ? "is reached through a link" : "is not the file seamfs made");
	pthread_mutex_unlock(&cp->lock);
	px_sources_drop(core, asset, k, why);
	pthread_mutex_lock(&cp->lock);
}

/* Drops the serving copies a read found replaced (px_source_open marks
 * them). The copies thread, cp->lock held. */
void cp_drop_replaced(struct px_copies *cp)
{
	for (size_t i = 0; i < cp->nc; i++) {
		struct copy *c = &cp->c[i];
		if (!c->registered || c->stale)
			continue;
		struct src_rt *all = __atomic_load_n(&px_asset_rt(cp->core, c->asset)->src,
						     __ATOMIC_ACQUIRE);
		int w = all ? atomic_load(&all[c->k].in_way) : PX_IN_WAY_NONE;
		if (w != PX_IN_WAY_NONE)
			drop_in_way(cp, (long)i, w);
	}
}

void cp_follow_storages(struct px_copies *cp)
{
	struct px_core *core = cp->core;
	for (size_t i = 0; i < cp->nc; i++) {
		struct copy *c = &cp->c[i];
		if (!c->registered || c->stale)
			continue;
		const struct storage *s = &cp->st[c->storage];
		int should = s->reachable && s->in_catalog;
		if (should == c->serving)
			continue;
		c->serving = should;
		size_t asset = c->asset, k = c->k;
		char why[300];
		snprintf(why, sizeof(why), "copy on storage %s: %s", s->name,
			 s->in_catalog ? "storage not ready" : "storage removed from the catalog");
		char path[PATH_MAX], prov[300];
		cp_copy_path(core, s, asset, path, sizeof(path));
		snprintf(prov, sizeof(prov), "%s", s->prov);
		int local = s->host != NULL;
		struct cp_reg reg = { asset, path, s->name, prov, local,
				      { s->dev, c->dev, c->ino } };
		pthread_mutex_unlock(&cp->lock);
		if (should) {
			size_t kk;
			if (cp_register_copy(cp, &reg, &kk) == 0)
				px_info("copies", "asset %s: copy %s serves again", px_cat(core)->assets[asset].id,
					path);
		} else {
			px_sources_drop(core, asset, k, why);
			px_warn("copies", "asset %s: %s: it stops serving", px_cat(core)->assets[asset].id,
				why);
		}
		pthread_mutex_lock(&cp->lock);
	}
}

void cp_recheck_etags(struct px_copies *cp)
{
	struct px_core *core = cp->core;
	for (size_t i = 0; i < cp->nc; i++) {
		struct copy *c = &cp->c[i];
		if (!c->recheck || c->stale || !c->serving || px_now_ms() < c->recheck_at)
			continue;
		size_t asset = c->asset;
		const struct px_asset *as = &px_cat(core)->assets[asset];
		long k = -1;
		for (size_t j = 0; j < as->nsources && k < 0; j++)
			if (!as->sources[j].storage && strcmp(as->sources[j].key, c->src_key) == 0)
				k = (long)j;
		if (k < 0 || px_asset_rt(core, asset)->dead[k]) {
			c->recheck = 0; /* that source is gone: nothing to compare with */
			continue;
		}
		char was[128], now[128] = "";
		snprintf(was, sizeof(was), "%s", c->etag);
		size_t ck = c->k;
		pthread_mutex_unlock(&cp->lock);
		int rc = cp_probe_etag(core, asset, (size_t)k, now, sizeof(now));
		pthread_mutex_lock(&cp->lock);
		c = &cp->c[i];
		if (rc != 0) {
			c->recheck_at = px_now_ms() + RECHECK_MS;
			continue;
		}
		c->recheck = 0;
		if (!now[0] || strcmp(now, was) == 0)
			continue;
		c->stale = 1;
		c->serving = 0;
		cp_manifest_save(cp, c->storage);
		px_info("copies", "asset %s: source %s has a new ETag (%s, was %s): the copy on "
			"storage %s is stale and stops serving", as->id, as->sources[k].shown, now,
			was, cp->st[c->storage].name);
		pthread_mutex_unlock(&cp->lock);
		px_sources_drop(core, asset, ck, "stale copy: the asset changed");
		pthread_mutex_lock(&cp->lock);
	}
}
