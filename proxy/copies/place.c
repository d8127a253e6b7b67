/*
 * place.c - where a copy goes (docs/copies.md, "Placement" and "Across
 * hosts").
 *
 * px_copies_place is a pure function (unit-tested without a core): an
 * asset that wants one more copy gets a storage that is reachable, has
 * the role on, holds no serving copy of the asset and has free space >=
 * min_free_bytes + the asset's size; the freest of those. With none the
 * job waits, spends no attempt, and says why, in this order: a storage
 * holding a copy that does not serve is unreachable ("storage not
 * ready") or has the role off ("copying off"); storages that would take
 * it are all full ("no room"); storages with the role that lack the asset
 * exist but none is reachable ("storage not ready"); else "no storage".
 *
 * Across hosts (cluster mode with a hosts registry) the places are the
 * storages without a host as this host sees them, then every live host's
 * disks as that host published them (peers.c), this host's too, so that
 * every host weighs the same figures; one copy per host. Places within a
 * band of the freest tie and the first wins; a place on another host's
 * disk is that host's job ("copying on another host").
 */
#include <stdio.h>
#include <string.h>

#include "copies_i.h"

const char *px_copy_wait_name(enum px_copy_wait w)
{
	switch (w) {
	case PX_WAIT_NONE: return "";
	case PX_WAIT_NO_STORAGE: return "no storage";
	case PX_WAIT_NO_ROOM: return "no room";
	case PX_WAIT_NOT_READY: return "storage not ready";
	case PX_WAIT_COPYING_OFF: return "copying off";
	case PX_WAIT_OTHER_HOST: return "copying on another host";
	case PX_WAIT_STORE_DOWN: return "store not answering";
	case PX_WAIT_FOREIGN: return "foreign file in the way";
	case PX_WAIT_LINK: return "link in the way";
	case PX_WAIT_NO_HOST: return "no live host";
	}
	return "";
}

enum px_copy_wait px_copies_place(const struct px_place_in *s, size_t n, int64_t size,
				  size_t *pick)
{
	long best = -1;
	int eligible = 0, held_unready = 0, held_off = 0, role_unready = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i].holds == 2 && !s[i].reachable)
			held_unready = 1;
		if (s[i].holds == 2 && s[i].reachable && !s[i].copying)
			held_off = 1;
		if (s[i].holds != 1 && s[i].copying && !s[i].reachable)
			role_unready = 1;
		if (!s[i].reachable || !s[i].copying || s[i].holds == 1)
			continue;
		eligible = 1;
		/* free >= min_free + size, without the sum (it may overflow) */
		if (s[i].free_bytes < size || s[i].free_bytes - size < s[i].min_free)
			continue;
		if (best < 0 || s[i].free_bytes > s[best].free_bytes)
			best = (long)i;
	}
	if (best >= 0) {
		*pick = (size_t)best;
		return PX_WAIT_NONE;
	}
	if (held_unready)
		return PX_WAIT_NOT_READY;
	if (held_off)
		return PX_WAIT_COPYING_OFF;
	if (eligible)
		return PX_WAIT_NO_ROOM;
	if (role_unready)
		return PX_WAIT_NOT_READY;
	return PX_WAIT_NO_STORAGE;
}

/*
 * The places for one more copy of asset a, for px_copies_place: the
 * storages without a host as this host sees them (*own: the index in
 * cp->st), then every live host's disks as that host published them
 * (this host's too, so that every host weighs the same figures; *own the
 * index of this host's, -1 another host's, *host its id). in, own and
 * host have room for cp->nst + PX_HOSTS_MAX * PEER_STORAGES_MAX. cp->lock
 * held.
 */
static size_t cluster_places(struct px_copies *cp, size_t a, struct px_place_in *in, long *own,
			     const char **host)
{
	size_t n = 0;
	int mine = cp_self_holds(cp, a);
	for (size_t i = 0; i < cp->nst; i++) {
		const struct storage *s = &cp->st[i];
		if (s->host)
			continue;
		long ci = cp_find_copy(cp, a, i);
		in[n] = (struct px_place_in){ s->reachable && s->in_catalog,
					      s->copying && s->in_catalog,
					      ci < 0 || !s->in_catalog ? 0
					      : cp->c[ci].serving && !cp->c[ci].stale ? 1 : 2,
					      s->free_bytes, s->min_free };
		own[n] = (long)i;
		host[n++] = cp->host;
	}
	for (size_t h = 0; h < cp->npeers; h++) {
		const struct peer *p = &cp->peers[h];
		for (size_t k = 0; k < p->nst; k++) {
			const struct pstorage *ps = &p->st[k];
			long si = p->self ? cp_find_storage(cp, ps->name) : -1;
			if (p->self && (si < 0 || !cp_own_disk(cp, &cp->st[si])))
				continue;
			in[n] = (struct px_place_in){ ps->reachable, ps->copying,
						      (p->self ? mine : cp_peer_holds(cp, p, a)) ? 1 : 0,
						      ps->free_bytes, ps->min_free };
			own[n] = si;
			host[n++] = p->id;
		}
	}
	return n;
}

/* The copies of asset a that serve: here, and on the other live hosts'
 * disks (cluster mode). cp->lock held. */
int cp_copies_held(struct px_copies *cp, size_t a)
{
	int have = 0;
	for (size_t i = 0; i < cp->nc; i++)
		if (cp->c[i].asset == a && cp->c[i].serving && !cp->c[i].stale &&
		    cp->st[cp->c[i].storage].in_catalog)
			have++;
	return have + (cp_clustered(cp) ? cp_peers_holding(cp, a) : 0);
}

/* Whether a catalog disk with the role on belongs to a host that is not
 * live now (none of the last sync's records). cp->lock held. */
static int dead_host_disk(const struct px_copies *cp)
{
	for (size_t i = 0; i < cp->nst; i++) {
		const struct storage *s = &cp->st[i];
		int live = 0;
		for (size_t h = 0; s->host && h < cp->npeers && !live; h++)
			live = strcmp(cp->peers[h].id, s->host) == 0;
		if (s->host && s->in_catalog && s->copying && !live)
			return 1;
	}
	return 0;
}

/*
 * Places job j (asset a): on one host only, this host's storages without
 * a host then (cluster mode) every live host's disks (cluster_places); a
 * place on another host's disk is that host's to take: the job waits
 * here with "copying on another host" and names it (j->host). PX_WAIT_NONE
 * with *pick the index in cp->st. in, own, host: room for every place.
 * cp->lock held.
 */
enum px_copy_wait cp_place_job(struct px_copies *cp, size_t a, struct job *j,
			       struct px_place_in *in, long *own, const char **host,
			       size_t *pick)
{
	int64_t size = px_asset_rt(cp->core, a)->size;
	j->host[0] = '\0';
	if (!cp_clustered(cp)) {
		for (size_t i = 0; i < cp->nst; i++) {
			const struct storage *s = &cp->st[i];
			long ci = cp_find_copy(cp, a, i);
			in[i].reachable = s->reachable && s->in_catalog;
			in[i].copying = s->copying && s->in_catalog;
			in[i].holds = ci < 0 ? 0 : cp->c[ci].serving && !cp->c[ci].stale ? 1 : 2;
			if (!s->in_catalog)
				in[i].holds = 0;
			in[i].free_bytes = s->free_bytes;
			in[i].min_free = s->min_free;
		}
		return px_copies_place(in, cp->nst, size, pick);
	}
	size_t n = cluster_places(cp, a, in, own, host), at = 0;
	enum px_copy_wait w = px_copies_place(in, n, size, &at);
	if (w == PX_WAIT_NO_STORAGE && dead_host_disk(cp))
		return PX_WAIT_NO_HOST;
	if (w != PX_WAIT_NONE)
		return w;
	/* Hosts read each other's figures a moment apart: two disks almost
	 * as free as each other (one file system, or both nearly empty)
	 * could each look the freer to the other's host, and neither would
	 * copy. Within a band of the freest, the first place wins: the same
	 * on every host. */
	int64_t best = in[at].free_bytes, band = best / 32 > NEAR_BYTES ? best / 32 : NEAR_BYTES;
	for (size_t i = 0; i < at; i++)
		if (in[i].reachable && in[i].copying && in[i].holds != 1 &&
		    in[i].free_bytes >= size && in[i].free_bytes - size >= in[i].min_free &&
		    in[i].free_bytes >= best - band) {
			at = i;
			break;
		}
	if (own[at] < 0) {
		snprintf(j->host, sizeof(j->host), "%s", host[at]);
		return PX_WAIT_OTHER_HOST;
	}
	*pick = (size_t)own[at];
	return PX_WAIT_NONE;
}
