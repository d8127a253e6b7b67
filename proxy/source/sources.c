/*
 * sources.c - sources added to and removed from assets while mounted.
 *
 * The core works on its own copy of the catalog's arrays (the strings stay
 * the catalog's), made with room to spare: px_spare_sources() more sources
 * per asset and PX_SPARE_PROVIDERS more providers. Adding a source writes
 * it into the next free entry and only then raises the asset's nsources,
 * under both prov_lock and vf_lock, so that every reader (who reads these
 * under one of the two) sees either the old list or the new one. A new
 * source starts unverified: live sessions of the asset take it as a
 * standby, verified before use (standby.c); new sessions may choose it.
 *
 * Removing a source marks it dead for the asset: no new session or
 * cutover goes there; sessions reading from it go on until it fails.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "context.h"
#include "health.h"
#include "import.h"
#include "provider.h"
#include "sources.h"
#include "log.h"
#include "redact.h"

static char *keep(struct px_core *core, const char *s)
{
	char *c;
	if (core->nowned == PX_SPARE_STRINGS || !(c = strdup(s)))
		return NULL;
	core->owned[core->nowned++] = c;
	return c;
}

/* Takes c (NULL: none) into the strings the core frees; NULL when full. */
static char *own(struct px_core *core, char *c)
{
	if (c && core->nowned == PX_SPARE_STRINGS) {
		free(c);
		c = NULL;
	}
	if (c)
		core->owned[core->nowned++] = c;
	return c;
}

enum px_status px_sources_own_catalog(struct px_core *core, const struct px_catalog *cat)
{
	struct px_catalog *m = calloc(1, sizeof(*m));
	if (!m)
		return PX_ENOMEM;
	*m = *cat;
	m->assets = calloc(cat->nassets + PX_SPARE_ASSETS + 1, sizeof(*m->assets));
	m->providers = calloc(cat->nproviders + PX_SPARE_PROVIDERS, sizeof(*m->providers));
	core->mcat = m;
	core->cat = m;
	if (!m->assets || !m->providers)
		return PX_ENOMEM;
	memcpy(m->providers, cat->providers, cat->nproviders * sizeof(*m->providers));
	for (size_t i = 0; i < cat->nassets; i++) {
		m->assets[i] = cat->assets[i];
		if (cat->assets[i].kind != PX_ASSET_PLAIN)
			continue;
		m->assets[i].sources = calloc(cat->assets[i].nsources + px_spare_sources(cat->nassets),
					      sizeof(struct px_source));
		if (!m->assets[i].sources)
			return PX_ENOMEM;
		memcpy(m->assets[i].sources, cat->assets[i].sources,
		       cat->assets[i].nsources * sizeof(struct px_source));
	}
	return PX_OK;
}

void px_sources_release_catalog(struct px_core *core)
{
	struct px_catalog *m = core->mcat;
	for (size_t i = 0; i < core->nowned; i++)
		free(core->owned[i]);
	if (!m)
		return;
	/* assets a reload added have sources arrays of the core's too */
	for (size_t i = 0; m->assets && i < m->nassets; i++)
		if (m->assets[i].kind == PX_ASSET_PLAIN)
			free(m->assets[i].sources);
	free(m->assets);
	free(m->providers);
	free(m);
}

static long find_source(const struct px_asset *a, const char *where)
{
	for (size_t k = 0; k < a->nsources; k++) {
		const struct px_source *s = &a->sources[k];
		if ((s->url && strcmp(s->url, where) == 0) || (s->path && strcmp(s->path, where) == 0))
			return (long)k;
	}
	return -1;
}

/* Whether source k of the asset was taken out (px_sources_remove, a
 * reload). vf_lock held. */
static int was_removed(const struct px_core *core, size_t asset, long k)
{
	const struct asset_rt *rt = &core->assets[asset];
	return k >= 0 && rt->dead[k] && rt->src && rt->src[k].removed;
}

/* Brings a removed source back as a new one would come: unverified. Both
 * locks held. */
static void revive(struct px_core *core, size_t asset, long k)
{
	struct src_rt *sr = &core->assets[asset].src[k];
	px_src_why(sr, NULL);
	sr->removed = 0;
	sr->state = VS_UNKNOWN;
	sr->inconclusive = 0;
	core->assets[asset].dead[k] = 0;
}

/* The asset an API request names, listed and plain. */
static enum px_status find_asset(struct px_core *core, const char *id, size_t *out, char *err,
				 size_t errlen)
{
	long i = px_catalog_find(core->cat, id);
	char esc[200];
	px_catalog_escape(esc, sizeof(esc), id);
	if (i < 0 || !core->assets[i].listed) {
		snprintf(err, errlen, "asset: no listed asset with id \"%s\"", esc);
		return PX_ENOTFOUND;
	}
	if (core->cat->assets[i].kind != PX_ASSET_PLAIN) {
		snprintf(err, errlen, "asset: \"%s\" is a transcode or remux; it has no sources", esc);
		return PX_EINVAL;
	}
	*out = (size_t)i;
	return PX_OK;
}

enum px_status px_sources_add(struct px_core *core, const char *asset_id, const char *where,
				  const char *provider, char *err, size_t errlen)
{
	struct px_catalog *m = core->mcat;
	char hostport[300], esc[300], shown[300];
	const char *bad;
	size_t asset, prov = 0;
	enum px_status st;
	int is_url = strstr(where, "://") != NULL;

	if ((st = find_asset(core, asset_id, &asset, err, errlen)) != PX_OK)
		return st;
	px_redact_url(where, shown, sizeof(shown)); /* messages go to the log and the API */
	px_catalog_escape(esc, sizeof(esc), shown);
	bad = is_url ? px_catalog_bad_url(where, hostport, sizeof(hostport))
		     : px_catalog_bad_local(where);
	if (bad) {
		snprintf(err, errlen, "%s: \"%s\" %s", is_url ? "url" : "path", esc, bad);
		return PX_EINVAL;
	}
	if (!is_url) {
		char why[300];
		/* added at run time: held to strm_paths like playlists */
		if (!px_sources_path_allowed(core, where, 1, why, sizeof(why))) {
			snprintf(err, errlen, "path: \"%s\" %s", esc, why);
			return PX_EINVAL;
		}
		snprintf(hostport, sizeof(hostport), "local");
	}

	pthread_mutex_lock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	struct px_asset *a = &m->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	const char *want = provider ? provider : hostport;
	while (prov < m->nproviders && strcmp(m->providers[prov].name, want) != 0)
		prov++;
	long had = find_source(a, where);
	if (was_removed(core, asset, had)) {
		revive(core, asset, had);
		prov = a->sources[had].provider;
		st = PX_OK;
	} else if (had >= 0) {
		snprintf(err, errlen, "%s: \"%s\" is already a source of \"%s\"",
			 is_url ? "url" : "path", esc, a->id);
		st = PX_EEXIST;
	} else if (a->nsources >= rt->source_cap) {
		snprintf(err, errlen, "asset: \"%s\" has room for %zu sources while mounted",
			 a->id, rt->source_cap);
		st = PX_EINVAL;
	} else if (prov == m->nproviders && provider) {
		px_catalog_escape(esc, sizeof(esc), provider);
		snprintf(err, errlen, "provider: no provider named \"%s\"", esc);
		st = PX_ENOTFOUND;
	} else if (prov == m->nproviders && m->nproviders >= core->provs_cap) {
		snprintf(err, errlen, "url: no room for another provider while mounted "
			 "(name an existing one)");
		st = PX_EINVAL;
	} else {
		char *s = keep(core, where);
		char *shown_s = own(core, px_redact_url_dup(where));
		char *key_s = own(core, px_redact_key(where));
		char *pname = prov == m->nproviders ? keep(core, hostport) : NULL;
		if (!s || !shown_s || !key_s || (prov == m->nproviders && !pname)) {
			snprintf(err, errlen, "out of memory");
			st = PX_ENOMEM;
		} else {
			if (prov == m->nproviders) {
				/* the implicit provider of a host seen for the first time */
				struct px_provider *p = &m->providers[prov];
				memset(p, 0, sizeof(*p));
				p->name = pname;
				p->implicit = 1;
				memset(&core->provs[prov], 0, sizeof(core->provs[prov]));
				core->provs[prov].probe_asset = -1;
				m->nproviders++;
			}
			size_t k = a->nsources;
			struct px_source *src = &a->sources[k];
			memset(src, 0, sizeof(*src));
			if (is_url)
				src->url = s;
			else
				src->path = s;
			src->shown = shown_s;
			src->key = key_s;
			src->provider = prov;
			px_provider_note_source(core, prov, src->url);
			rt->dead[k] = 0;
			if (rt->src) {
				px_src_why(&rt->src[k], NULL);
				memset(&rt->src[k], 0, sizeof(rt->src[k]));
			}
			a->nsources = k + 1;   /* published last */
			st = PX_OK;
		}
	}
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_unlock(&core->prov_lock);
	if (st == PX_OK)
		px_info("sources", "asset %s: source %s added (provider %s): a standby once verified",
			a->id, shown, m->providers[prov].name);
	return st;
}

enum px_status px_sources_remove(struct px_core *core, const char *asset_id,
				     const char *where, char *err, size_t errlen)
{
	size_t asset;
	enum px_status st;
	char esc[300], shown[300];

	if ((st = find_asset(core, asset_id, &asset, err, errlen)) != PX_OK)
		return st;
	px_redact_url(where, shown, sizeof(shown)); /* messages go to the log and the API */
	pthread_mutex_lock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	const struct px_asset *a = &core->cat->assets[asset];
	long k = find_source(a, where);
	struct src_rt *all = k >= 0 ? px_src_ensure(core, asset) : NULL;
	if (k < 0 || was_removed(core, asset, k)) {
		px_catalog_escape(esc, sizeof(esc), shown);
		snprintf(err, errlen, "%s: \"%s\" is not a source of \"%s\"%s",
			 strstr(where, "://") ? "url" : "path", esc, a->id,
			 k < 0 ? "" : " (it was removed)");
		st = PX_ENOTFOUND;
	} else if (!all) {
		snprintf(err, errlen, "out of memory");
		st = PX_ENOMEM;
	} else {
		core->assets[asset].dead[k] = 1;
		all[k].removed = 1;
		px_src_why(&all[k], "removed through the control API");
	}
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_unlock(&core->prov_lock);
	if (st == PX_OK)
		px_info("sources", "asset %s: source %s removed: no new session or cutover goes "
			"there", a->id, shown);
	return st;
}

int px_sources_path_allowed(const struct px_core *core, const char *path, int untrusted,
			 char *why, size_t whylen)
{
	/* strm_paths first: a path outside is not even stat'ed */
	if (untrusted && !px_import_path_allowed(core->cfg->strm_paths, path, why, whylen))
		return 0;
	const char *kind = px_file_kind(path);
	if (kind) {
		snprintf(why, whylen, "is %s: a path source must be a regular file", kind);
		return 0;
	}
	return 1;
}

void px_sources_screen_paths(struct px_core *core, size_t asset, int untrusted)
{
	const struct px_asset *a = &core->cat->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	char why[300];
	for (size_t k = 0; k < a->nsources; k++) {
		const char *path = a->sources[k].path;
		if (!path || rt->dead[k] || px_sources_path_allowed(core, path, untrusted, why,
								 sizeof(why)))
			continue;
		rt->dead[k] = 1;
		struct src_rt *all = px_src_ensure(core, asset);
		if (all)
			px_src_why(&all[k], why);
		px_warn("sources", "asset %s: source %s %s; it will not be used", a->id, path, why);
	}
}

/* The file a copy source must be found as (px_source_open). vf_lock held. */
static void copy_file_set(struct src_rt *sr, const struct px_copy_file *file)
{
	sr->copy_sdev = file->sdev;
	sr->copy_dev = file->dev;
	sr->copy_ino = file->ino;
	atomic_store(&sr->in_way, PX_IN_WAY_NONE);
}

/*
 * Fills the next runtime source slot of asset with where (a path when
 * is_path, else a URL; kept in the core's arena) on provider prov, its
 * verification state reset: its index, or -1 (no memory). The caller
 * sets what else it knows, then publishes it by raising a->nsources.
 * prov_lock and vf_lock held.
 */
static long append_source(struct px_core *core, size_t asset, const char *where, int is_path,
			  size_t prov)
{
	struct px_asset *a = &core->mcat->assets[asset];
	struct src_rt *all = px_src_ensure(core, asset); /* made by the caller */
	char *s = keep(core, where);
	if (!s)
		return -1;
	long k = (long)a->nsources;
	struct px_source *src = &a->sources[k];
	memset(src, 0, sizeof(*src));
	if (is_path)
		src->path = s;
	else
		src->url = s;
	src->shown = s;
	src->key = s;
	src->provider = prov;
	px_provider_note_source(core, prov, is_path ? NULL : s);
	core->assets[asset].dead[k] = 0;
	px_src_why(&all[k], NULL);
	memset(&all[k], 0, sizeof(all[k]));
	return k;
}

enum px_status px_sources_add_copy(struct px_core *core, size_t asset, const char *path,
				   const char *storage, const char *prov_name, int local_disk,
				   const struct px_copy_file *file, size_t *kout)
{
	struct px_catalog *m = core->mcat;
	enum px_status st = PX_OK;
	size_t prov = 0;

	pthread_mutex_lock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	struct px_asset *a = &m->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	struct src_rt *all = px_src_ensure(core, asset);
	while (prov < m->nproviders && strcmp(m->providers[prov].name, prov_name) != 0)
		prov++;
	long k = find_source(a, path);
	if (!all) {
		st = PX_ENOMEM;
	} else if (k < 0 && a->nsources >= rt->source_cap) {
		st = PX_EINVAL;
	} else if (prov == m->nproviders && m->nproviders >= core->provs_cap) {
		st = PX_EINVAL;
	} else if (prov == m->nproviders) {
		/* the storage's own provider: no connection limit, its sessions
		 * counted apart from the origin's */
		char *pname = keep(core, prov_name);
		if (!pname) {
			st = PX_ENOMEM;
		} else {
			struct px_provider *p = &m->providers[prov];
			memset(p, 0, sizeof(*p));
			p->name = pname;
			p->implicit = 1;
			memset(&core->provs[prov], 0, sizeof(core->provs[prov]));
			core->provs[prov].probe_asset = -1;
			m->nproviders++;
		}
	}
	if (st == PX_OK && prov < m->nproviders)
		m->providers[prov].local_disk = local_disk;
	if (st == PX_OK && k < 0) {
		k = append_source(core, asset, path, 1, prov);
		if (k < 0) {
			st = PX_ENOMEM;
		} else {
			a->sources[k].storage = storage;
			all[k].state = VS_VERIFIED;
			copy_file_set(&all[k], file);
			a->nsources = (size_t)k + 1;   /* published last */
		}
	} else if (st == PX_OK) {
		a->sources[k].storage = storage;
		px_src_why(&all[k], NULL);
		memset(&all[k], 0, sizeof(all[k]));
		all[k].state = VS_VERIFIED;
		copy_file_set(&all[k], file);
		rt->dead[k] = 0;
	}
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_unlock(&core->prov_lock);
	if (st == PX_OK)
		*kout = (size_t)k;
	return st;
}

void px_sources_drop(struct px_core *core, size_t asset, size_t k, const char *why)
{
	pthread_mutex_lock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	core->assets[asset].dead[k] = 1;
	struct src_rt *all = px_src_ensure(core, asset);
	if (all)
		px_src_why(&all[k], why);
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_unlock(&core->prov_lock);
}

/* The provider named prov_name, made (with the one header) when new:
 * its index, or m->nproviders when there is no room. Both locks held. */
static size_t peer_provider(struct px_core *core, const char *prov_name, const char *header)
{
	struct px_catalog *m = core->mcat;
	size_t prov = 0;
	while (prov < m->nproviders && strcmp(m->providers[prov].name, prov_name) != 0)
		prov++;
	if (prov < m->nproviders || m->nproviders >= core->provs_cap)
		return prov;
	char *pname = keep(core, prov_name);
	/* the array too is the core's to free with the strings */
	char **hdrs = (char **)(void *)own(core, calloc(1, sizeof(char *)));
	char *h = hdrs ? keep(core, header) : NULL;
	if (!pname || !h)
		return m->nproviders;
	hdrs[0] = h;
	struct px_provider *p = &m->providers[prov];
	memset(p, 0, sizeof(*p));
	p->name = pname;
	p->implicit = 1;
	p->headers = hdrs;
	p->nheaders = 1;
	memset(&core->provs[prov], 0, sizeof(core->provs[prov]));
	core->provs[prov].probe_asset = -1;
	m->nproviders++;
	return prov;
}

enum px_status px_sources_add_peer(struct px_core *core, size_t asset, const char *url,
				   const char *prov_name, const char *header, size_t *kout)
{
	struct px_catalog *m = core->mcat;
	enum px_status st = PX_OK;

	pthread_mutex_lock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	struct px_asset *a = &m->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	struct src_rt *all = px_src_ensure(core, asset);
	long k = find_source(a, url);
	size_t prov = k >= 0 ? a->sources[k].provider : peer_provider(core, prov_name, header);
	if (!all) {
		st = PX_ENOMEM;
	} else if (prov >= m->nproviders || (k < 0 && a->nsources >= rt->source_cap)) {
		st = PX_EINVAL;
	} else if (k >= 0) {
		/* the host is back (its heartbeat says so): what its provider
		 * failed while it was gone is forgotten */
		revive(core, asset, k);
		core->provs[prov].bad_since = 0;
		core->provs[prov].remote_down = 0;
	} else {
		k = append_source(core, asset, url, 0, prov);
		if (k < 0)
			st = PX_ENOMEM;
		else
			a->nsources = (size_t)k + 1;   /* published last */
	}
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_unlock(&core->prov_lock);
	if (st == PX_OK)
		*kout = (size_t)k;
	return st;
}
