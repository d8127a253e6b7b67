/*
 * serve.c - a copy as a source of its asset (docs/copies.md, "Serving"):
 * registered as a verified path source on its storage's own provider
 * ("storage:NAME", no connection limit, preferred for new sessions when
 * the disk is this host's: sources.c), and this host's serving copy
 * opened for the peer endpoint (control/peer.c) as a viewer's session
 * opens it (px_source_open: beneath the storage, never through a link,
 * only the file made or found).
 */
#include <pthread.h>

#include "copies_i.h"
#include "log.h"
#include "health.h"
#include "rangeread.h"

int cp_register_copy(struct px_copies *cp, const struct cp_reg *r, size_t *k)
{
	enum px_status st = px_sources_add_copy(cp->core, r->asset, r->file, r->storage, r->prov,
						r->local, &r->id, k);
	if (st != PX_OK) {
		px_warn("copies", "asset %s: copy %s could not become a source: %s",
			px_cat(cp->core)->assets[r->asset].id, r->file,
			st == PX_EINVAL ? "no room for another source while mounted (remount)"
					: px_strerror(st));
		return -1;
	}
	return 0;
}

int px_copies_peer_open(struct px_core *core, const char *id, int64_t *size)
{
	struct px_copies *cp = core->copies;
	long a = cp ? px_catalog_find(px_cat(core), id) : -1;
	long k = -1;
	if (a < 0 || !px_asset_rt(core, a)->listed || px_cat(core)->assets[a].kind != PX_ASSET_PLAIN)
		return -1;
	pthread_mutex_lock(&cp->lock);
	for (size_t i = 0; i < cp->nc && k < 0; i++)
		if (cp->c[i].asset == (size_t)a && cp->c[i].registered && cp->c[i].serving &&
		    !cp->c[i].stale)
			k = (long)cp->c[i].k;
	pthread_mutex_unlock(&cp->lock);
	px_vf_lock(core);
	int dead = k < 0 || px_asset_rt(core, a)->dead[k];
	px_vf_unlock(core);
	if (dead)
		return -1;
	*size = px_asset_rt(core, a)->size;
	return px_source_open(core, (size_t)a, (size_t)k);
}
