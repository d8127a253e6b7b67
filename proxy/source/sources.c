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
#include <stdarg.h>
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
#include "tree.h"
#include "log.h"
#include "redact.h"

/* The catalog at run time, owned here: made by px_sources_new, freed by
 * px_sources_free; other files read it through px_cat and px_asset_rt
 * (context.h) and the functions below. */
struct px_sources {
	struct px_sources_pub pub; /* the catalog copy, the assets (context.h) */
	struct px_catalog *cat;    /* pub.cat, to change here */
	char *owned[PX_SPARE_STRINGS]; /* strings added while mounted */
	size_t nowned;
	struct px_tree *_Atomic tree;
	int64_t catalog_mtime;     /* the mtime of files that have none */
};

static char *keep(struct px_core *core, const char *s)
{
	struct px_sources *so = core->sources;
	char *c;
	if (so->nowned == PX_SPARE_STRINGS || !(c = strdup(s)))
		return NULL;
	so->owned[so->nowned++] = c;
	return c;
}

/* Takes c (NULL: none) into the strings the core frees; NULL when full. */
static char *own(struct px_core *core, char *c)
{
	struct px_sources *so = core->sources;
	if (c && so->nowned == PX_SPARE_STRINGS) {
		free(c);
		c = NULL;
	}
	if (c)
		so->owned[so->nowned++] = c;
	return c;
}

static enum px_status copy_catalog(struct px_sources *so, const struct px_catalog *cat)
{
	struct px_catalog *m = calloc(1, sizeof(*m));
	if (!m)
		return PX_ENOMEM;
	*m = *cat;
	m->assets = calloc(cat->nassets + PX_SPARE_ASSETS + 1, sizeof(*m->assets));
	m->providers = calloc(cat->nproviders + PX_SPARE_PROVIDERS, sizeof(*m->providers));
	so->cat = m;
	so->pub.cat = m;
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

enum px_status px_sources_new(struct px_core *core, const struct px_catalog *cat)
{
	struct px_sources *so = calloc(1, sizeof(*so));
	if (!so)
		return PX_ENOMEM;
	core->sources = so;
	if (copy_catalog(so, cat) != PX_OK)
		goto fail;
	so->pub.assets_cap = cat->nassets + PX_SPARE_ASSETS;
	so->pub.assets = calloc(so->pub.assets_cap + 1, sizeof(*so->pub.assets));
	if (!so->pub.assets)
		goto fail;
	for (size_t i = 0; i < cat->nassets; i++) {
		struct asset_rt *rt = &so->pub.assets[i];
		rt->source_cap = cat->assets[i].kind == PX_ASSET_PLAIN
			? cat->assets[i].nsources + px_spare_sources(cat->nassets) : 0;
		rt->size = rt->mtime = -1;
		rt->dead = calloc(rt->source_cap + 1, 1);
		if (!rt->dead)
			goto fail;
	}
	return PX_OK;
fail:
	px_sources_free(core);
	return PX_ENOMEM;
}

void px_sources_free(struct px_core *core)
{
	struct px_sources *so = core->sources;
	if (!so)
		return;
	for (size_t i = 0; so->pub.assets && i < so->pub.assets_cap; i++)
		free((void *)so->pub.assets[i].dead);
	free(so->pub.assets);
	px_tree_free(so->tree);
	for (size_t i = 0; i < so->nowned; i++)
		free(so->owned[i]);
	struct px_catalog *m = so->cat;
	/* assets a reload added have sources arrays of the core's too */
	for (size_t i = 0; m && m->assets && i < m->nassets; i++)
		if (m->assets[i].kind == PX_ASSET_PLAIN)
			free(m->assets[i].sources);
	if (m) {
		free(m->assets);
		free(m->providers);
	}
	free(m);
	free(so);
	core->sources = NULL;
}

const struct px_tree *px_sources_tree(const struct px_core *core)
{
	return atomic_load(&core->sources->tree);
}

struct px_tree *px_sources_set_tree(struct px_core *core, struct px_tree *tree)
{
	return atomic_exchange(&core->sources->tree, tree);
}

int64_t px_sources_fallback_mtime(const struct px_core *core)
{
	return core->sources->catalog_mtime;
}

void px_sources_set_fallback_mtime(struct px_core *core, int64_t mtime)
{
	core->sources->catalog_mtime = mtime;
}

void px_sources_count_listed(struct px_core *core, long delta)
{
	__atomic_add_fetch(&core->sources->pub.nlisted, (size_t)delta, __ATOMIC_RELAXED);
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
	const struct asset_rt *rt = px_asset_rt(core, asset);
	return k >= 0 && rt->dead[k] && rt->src && rt->src[k].removed;
}

/* Brings a removed source back as a new one would come: unverified. Both
 * locks held. */
static void revive(struct px_core *core, size_t asset, long k)
{
	struct src_rt *sr = &px_asset_rt(core, asset)->src[k];
	px_src_why(sr, NULL);
	sr->removed = 0;
	sr->state = VS_UNKNOWN;
	sr->inconclusive = 0;
	px_asset_rt(core, asset)->dead[k] = 0;
}

/* The asset an API request names, listed and plain. */
static enum px_status find_asset(struct px_core *core, const char *id, size_t *out, char *err,
				 size_t errlen)
{
	long i = px_catalog_find(px_cat(core), id);
	char esc[200];
	px_catalog_escape(esc, sizeof(esc), id);
	if (i < 0 || !px_asset_rt(core, i)->listed) {
		snprintf(err, errlen, "asset: no listed asset with id \"%s\"", esc);
		return PX_ENOTFOUND;
	}
	if (px_cat(core)->assets[i].kind != PX_ASSET_PLAIN) {
		snprintf(err, errlen, "asset: \"%s\" is a transcode or remux; it has no sources", esc);
		return PX_EINVAL;
	}
	*out = (size_t)i;
	return PX_OK;
}

/* What px_sources_add is asked: the asset, the URL or path and its
 * provider (NULL: the URL's implicit one), with the names its checks
 * made. */
struct add_req {
	size_t asset;
	const char *where, *provider;
	int is_url;
	char hostport[300];        /* the implicit provider's name ("local") */
	char esc[300];             /* where, redacted and escaped: for messages */
};

/* Whether r->where may be a source, with its implicit provider's name;
 * PX_EINVAL with "FIELD: why" in err. */
static enum px_status check_where(const struct px_core *core, struct add_req *r, char *err,
				  size_t errlen)
{
	const char *bad = r->is_url ? px_catalog_bad_url(r->where, r->hostport,
							 sizeof(r->hostport))
				    : px_catalog_bad_local(r->where);
	if (bad) {
		snprintf(err, errlen, "%s: \"%s\" %s", r->is_url ? "url" : "path", r->esc, bad);
		return PX_EINVAL;
	}
	if (!r->is_url) {
		char why[300];
		/* added at run time: held to strm_paths like playlists */
		if (!px_sources_path_allowed(core, r->where, 1, why, sizeof(why))) {
			snprintf(err, errlen, "path: \"%s\" %s", r->esc, why);
			return PX_EINVAL;
		}
		snprintf(r->hostport, sizeof(r->hostport), "local");
	}
	return PX_OK;
}

/* Makes the implicit provider name (a host's, a storage's or a peer's:
 * the catalog does not name it) at index m->nproviders, with headers;
 * name and headers are the core's already (keep, own). Its run-time state
 * starts fresh; the count grows last. The caller checked the room. Both
 * locks held. */
static void add_implicit(struct px_core *core, char *name, char **headers, size_t nheaders)
{
	struct px_catalog *m = core->sources->cat;
	size_t prov = m->nproviders;
	struct px_provider *p = &m->providers[prov];
	memset(p, 0, sizeof(*p));
	p->name = name;
	p->implicit = 1;
	p->headers = headers;
	p->nheaders = nheaders;
	px_provider_fresh(core, prov);
	m->nproviders++;
}

/* Writes the new source (on provider prov, made when new) into the next
 * free entry, then publishes it. Both locks held. */
static enum px_status append_new(struct px_core *core, const struct add_req *r, size_t prov,
				 char *err, size_t errlen)
{
	struct px_catalog *m = core->sources->cat;
	struct px_asset *a = &m->assets[r->asset];
	struct asset_rt *rt = px_asset_rt(core, r->asset);
	char *s = keep(core, r->where);
	char *shown_s = own(core, px_redact_url_dup(r->where));
	char *key_s = own(core, px_redact_key(r->where));
	char *pname = prov == m->nproviders ? keep(core, r->hostport) : NULL;
	if (!s || !shown_s || !key_s || (prov == m->nproviders && !pname)) {
		snprintf(err, errlen, "out of memory");
		return PX_ENOMEM;
	}
	if (prov == m->nproviders)
		add_implicit(core, pname, NULL, 0); /* a host seen for the first time */
	size_t k = a->nsources;
	struct px_source *src = &a->sources[k];
	memset(src, 0, sizeof(*src));
	if (r->is_url)
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
	return PX_OK;
}

/* px_sources_add under both locks: *prov gets the source's provider. */
static enum px_status add_locked(struct px_core *core, struct add_req *r, size_t *prov,
				 char *err, size_t errlen)
{
	struct px_catalog *m = core->sources->cat;
	struct px_asset *a = &m->assets[r->asset];
	struct asset_rt *rt = px_asset_rt(core, r->asset);
	const char *want = r->provider ? r->provider : r->hostport;
	*prov = 0;
	while (*prov < m->nproviders && strcmp(m->providers[*prov].name, want) != 0)
		(*prov)++;
	long had = find_source(a, r->where);
	if (was_removed(core, r->asset, had)) {
		revive(core, r->asset, had);
		*prov = a->sources[had].provider;
		return PX_OK;
	}
	if (had >= 0) {
		snprintf(err, errlen, "%s: \"%s\" is already a source of \"%s\"",
			 r->is_url ? "url" : "path", r->esc, a->id);
		return PX_EEXIST;
	}
	if (a->nsources >= rt->source_cap) {
		snprintf(err, errlen, "asset: \"%s\" has room for %zu sources while mounted",
			 a->id, rt->source_cap);
		return PX_EINVAL;
	}
	if (*prov == m->nproviders && r->provider) {
		px_catalog_escape(r->esc, sizeof(r->esc), r->provider);
		snprintf(err, errlen, "provider: no provider named \"%s\"", r->esc);
		return PX_ENOTFOUND;
	}
	if (*prov == m->nproviders && m->nproviders >= px_provs_cap(core)) {
		snprintf(err, errlen, "url: no room for another provider while mounted "
			 "(name an existing one)");
		return PX_EINVAL;
	}
	return append_new(core, r, *prov, err, errlen);
}

enum px_status px_sources_add(struct px_core *core, const char *asset_id, const char *where,
				  const char *provider, char *err, size_t errlen)
{
	struct add_req r = { .where = where, .provider = provider,
			     .is_url = strstr(where, "://") != NULL };
	char shown[300];
	size_t prov;
	enum px_status st;

	if ((st = find_asset(core, asset_id, &r.asset, err, errlen)) != PX_OK)
		return st;
	px_redact_url(where, shown, sizeof(shown)); /* messages go to the log and the API */
	px_catalog_escape(r.esc, sizeof(r.esc), shown);
	if ((st = check_where(core, &r, err, errlen)) != PX_OK)
		return st;
	pthread_mutex_lock(px_prov_lock(core));
	px_vf_lock(core);
	st = add_locked(core, &r, &prov, err, errlen);
	px_vf_unlock(core);
	pthread_mutex_unlock(px_prov_lock(core));
	if (st == PX_OK)
		px_info("sources", "asset %s: source %s added (provider %s): a standby once verified",
			px_cat(core)->assets[r.asset].id, shown, px_cat(core)->providers[prov].name);
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
	pthread_mutex_lock(px_prov_lock(core));
	px_vf_lock(core);
	const struct px_asset *a = &px_cat(core)->assets[asset];
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
		px_asset_rt(core, asset)->dead[k] = 1;
		all[k].removed = 1;
		px_src_why(&all[k], "removed through the control API");
	}
	px_vf_unlock(core);
	pthread_mutex_unlock(px_prov_lock(core));
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
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
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
	struct px_asset *a = &core->sources->cat->assets[asset];
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
	px_asset_rt(core, asset)->dead[k] = 0;
	px_src_why(&all[k], NULL);
	memset(&all[k], 0, sizeof(all[k]));
	return k;
}

enum px_status px_sources_add_copy(struct px_core *core, size_t asset, const char *path,
				   const char *storage, const char *prov_name, int local_disk,
				   const struct px_copy_file *file, size_t *kout)
{
	struct px_catalog *m = core->sources->cat;
	enum px_status st = PX_OK;
	size_t prov = 0;

	pthread_mutex_lock(px_prov_lock(core));
	px_vf_lock(core);
	struct px_asset *a = &m->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct src_rt *all = px_src_ensure(core, asset);
	while (prov < m->nproviders && strcmp(m->providers[prov].name, prov_name) != 0)
		prov++;
	long k = find_source(a, path);
	if (!all) {
		st = PX_ENOMEM;
	} else if (k < 0 && a->nsources >= rt->source_cap) {
		st = PX_EINVAL;
	} else if (prov == m->nproviders && m->nproviders >= px_provs_cap(core)) {
		st = PX_EINVAL;
	} else if (prov == m->nproviders) {
		/* the storage's own provider: no connection limit, its sessions
		 * counted apart from the origin's */
		char *pname = keep(core, prov_name);
		if (!pname)
			st = PX_ENOMEM;
		else
			add_implicit(core, pname, NULL, 0);
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
	px_vf_unlock(core);
	pthread_mutex_unlock(px_prov_lock(core));
	if (st == PX_OK)
		*kout = (size_t)k;
	return st;
}

void px_sources_drop(struct px_core *core, size_t asset, size_t k, const char *why)
{
	pthread_mutex_lock(px_prov_lock(core));
	px_vf_lock(core);
	px_asset_rt(core, asset)->dead[k] = 1;
	struct src_rt *all = px_src_ensure(core, asset);
	if (all)
		px_src_why(&all[k], why);
	px_vf_unlock(core);
	pthread_mutex_unlock(px_prov_lock(core));
}

/* The provider named prov_name, made (with the one header) when new:
 * its index, or m->nproviders when there is no room. Both locks held. */
static size_t peer_provider(struct px_core *core, const char *prov_name, const char *header)
{
	struct px_catalog *m = core->sources->cat;
	size_t prov = 0;
	while (prov < m->nproviders && strcmp(m->providers[prov].name, prov_name) != 0)
		prov++;
	if (prov < m->nproviders || m->nproviders >= px_provs_cap(core))
		return prov;
	char *pname = keep(core, prov_name);
	/* the array too is the core's to free with the strings */
	char **hdrs = (char **)(void *)own(core, calloc(1, sizeof(char *)));
	char *h = hdrs ? keep(core, header) : NULL;
	if (!pname || !h)
		return m->nproviders;
	hdrs[0] = h;
	add_implicit(core, pname, hdrs, 1);
	return prov;
}

enum px_status px_sources_add_peer(struct px_core *core, size_t asset, const char *url,
				   const char *prov_name, const char *header, size_t *kout)
{
	struct px_catalog *m = core->sources->cat;
	enum px_status st = PX_OK;

	pthread_mutex_lock(px_prov_lock(core));
	px_vf_lock(core);
	struct px_asset *a = &m->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
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
		px_prov_rt(core, prov)->bad_since = 0;
		px_prov_rt(core, prov)->remote_down = 0;
	} else {
		k = append_source(core, asset, url, 0, prov);
		if (k < 0)
			st = PX_ENOMEM;
		else
			a->nsources = (size_t)k + 1;   /* published last */
	}
	px_vf_unlock(core);
	pthread_mutex_unlock(px_prov_lock(core));
	if (st == PX_OK)
		*kout = (size_t)k;
	return st;
}

void px_sources_note(char *r, size_t len, const char *fmt, ...)
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
 * the core does not know. Both locks held. */
static void merge_providers(struct px_core *core, struct px_sources_change *c)
{
	struct px_catalog *m = core->sources->cat;
	const struct px_catalog *nc = c->nc;
	for (size_t i = 0; i < nc->nproviders; i++) {
		const struct px_provider *np = &nc->providers[i];
		long k = find_provider(m, np->name);
		if (k < 0 && m->nproviders < px_provs_cap(core)) {
			k = (long)m->nproviders;
			m->providers[k] = *np;
			px_providers_apply(core, (size_t)k, np, 1);
			m->nproviders++;
		} else if (k >= 0) {
			struct px_provider *op = &m->providers[k];
			if (op->nheaders != np->nheaders)
				px_sources_note(c->report, c->len,
						"provider %s: new headers need a remount", np->name);
			op->max_connections = np->max_connections;
			px_providers_apply(core, (size_t)k, np, 0);
		} else {
			px_sources_note(c->report, c->len, "provider %s: no room for more providers",
					np->name);
		}
		c->map[i] = k < 0 ? (size_t)-1 : (size_t)k;
	}
}

/* Marks the sources of asset ai that na no longer has removed. Both locks
 * held. */
static void drop_missing(struct px_core *core, size_t ai, const struct px_asset *na,
			 struct px_sources_change *c)
{
	struct px_asset *a = &core->sources->cat->assets[ai];
	struct asset_rt *rt = px_asset_rt(core, ai);
	for (size_t k = 0; k < a->nsources; k++) {
		int keep = a->sources[k].storage != NULL; /* a copy: proxy/copies/ drops it */
		for (size_t j = 0; j < na->nsources && !keep; j++)
			keep = same_source(&a->sources[k], &na->sources[j]);
		if (!keep && !rt->dead[k]) {
			rt->dead[k] = 1;
			struct src_rt *all = px_src_ensure(core, ai);
			if (all) {
				all[k].removed = 1;
				px_src_why(&all[k], "removed by a reload");
			}
			c->s_removed++;
		}
	}
}

/* The new source list of a known asset: adds and removes. Both locks held. */
static void merge_sources(struct px_core *core, size_t ai, const struct px_asset *na,
			  struct px_sources_change *c)
{
	struct px_asset *a = &core->sources->cat->assets[ai];
	struct asset_rt *rt = px_asset_rt(core, ai);
	drop_missing(core, ai, na, c);
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
		if (a->nsources >= rt->source_cap || c->map[na->sources[j].provider] == (size_t)-1) {
			px_sources_note(c->report, c->len, "asset %s: no room for source %s", a->id,
					na->sources[j].shown);
			continue;
		}
		size_t n = a->nsources;
		a->sources[n] = na->sources[j];
		a->sources[n].provider = c->map[na->sources[j].provider];
		px_provider_note_source(core, a->sources[n].provider, a->sources[n].url);
		rt->dead[n] = 0;
		if (rt->src) {
			px_src_why(&rt->src[n], NULL);
			memset(&rt->src[n], 0, sizeof(rt->src[n]));
		}
		a->nsources = n + 1;
		c->s_added++;
	}
}

/* Appends a new plain asset (unlisted until its size is known). Both locks
 * held. Returns its index, or -1 when there is no room. */
static long add_asset(struct px_core *core, const struct px_asset *na, const size_t *map)
{
	struct px_catalog *m = core->sources->cat;
	if (m->nassets >= core->sources->pub.assets_cap)
		return -1;
	size_t i = m->nassets;
	struct asset_rt *rt = px_asset_rt(core, i);
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

/* A known asset i of the core that the new catalog has as na: what may
 * change does, the rest is noted. Both locks held. */
static void apply_known(struct px_core *core, size_t i, const struct px_asset *na,
			struct px_sources_change *c)
{
	const struct px_asset *a = &core->sources->cat->assets[i];
	c->keep[i] = 1;
	if (strcmp(a->path, na->path) != 0)
		px_sources_note(c->report, c->len, "asset %s: a new path needs a remount", na->id);
	if (a->kind != na->kind)
		px_sources_note(c->report, c->len, "asset %s: a new kind needs a remount", na->id);
	else if (a->kind == PX_ASSET_PLAIN)
		merge_sources(core, i, na, c);
	if (a->kind == PX_ASSET_PLAIN)
		px_sources_screen_paths(core, i, c->nc->from_playlists);
	if (na->size >= 0 && px_asset_rt(core, i)->size >= 0 && na->size != px_asset_rt(core, i)->size)
		px_sources_note(c->report, c->len, "asset %s: a new size needs a remount", na->id);
}

/* An asset new to the core: added when plain and its path is free. Both
 * locks held. */
static void apply_new(struct px_core *core, const struct px_asset *na,
		      struct px_sources_change *c)
{
	struct px_catalog *m = core->sources->cat;
	if (na->kind != PX_ASSET_PLAIN) {
		px_sources_note(c->report, c->len,
				"asset %s: a new transcode or remux needs a remount", na->id);
		return;
	}
	/* a path a kept asset has (or a folder of it, or a file on its way)
	 * cannot be taken */
	int clash = 0;
	for (size_t k = 0; k < c->old_n && !clash; k++)
		clash = px_asset_rt(core, k)->listed && px_catalog_find(c->nc, m->assets[k].id) >= 0 &&
			paths_clash(m->assets[k].path, na->path);
	if (clash) {
		px_sources_note(c->report, c->len, "asset %s: its path clashes with another asset's",
				na->id);
		return;
	}
	long i = add_asset(core, na, c->map);
	if (i < 0) {
		px_sources_note(c->report, c->len, "asset %s: no room for more assets", na->id);
		return;
	}
	px_sources_screen_paths(core, (size_t)i, c->nc->from_playlists);
	c->need[i] = px_asset_rt(core, i)->size < 0; /* a size lists it: no request */
	c->n_new++;
}

void px_sources_apply(struct px_core *core, struct px_sources_change *c)
{
	c->old_n = core->sources->cat->nassets;
	pthread_mutex_lock(px_prov_lock(core));
	px_vf_lock(core);
	merge_providers(core, c);
	for (size_t j = 0; j < c->nc->nassets; j++) {
		const struct px_asset *na = &c->nc->assets[j];
		long i = px_catalog_find(px_cat(core), na->id);
		if (i >= 0)
			apply_known(core, (size_t)i, na, c);
		else
			apply_new(core, na, c);
	}
	px_vf_unlock(core);
	pthread_mutex_unlock(px_prov_lock(core));
}

int px_sources_listing(struct px_core *core, const struct px_sources_change *c,
		       unsigned char *listed)
{
	const struct px_catalog *m = px_cat(core);
	int n_gone = 0;
	for (size_t i = 0; i < m->nassets; i++) {
		struct asset_rt *rt = px_asset_rt(core, i);
		if (i < c->old_n)
			listed[i] = rt->listed && c->keep[i];
		else if (rt->size >= 0)
			listed[i] = 1;
		else
			px_sources_note(c->report, c->len, "asset %s: left out, its size is unknown",
					m->assets[i].id);
		/* a new asset without a size is asked again (probe.c's retry);
		 * one no longer in the catalog is not */
		rt->rediscover = i < c->old_n ? rt->rediscover && c->keep[i] : rt->size < 0;
		if (i < c->old_n && rt->listed && !c->keep[i])
			n_gone++;
		if (i >= c->old_n && rt->mtime < 0)
			rt->mtime = core->sources->catalog_mtime;
	}
	return n_gone;
}

void px_sources_set_listed(struct px_core *core, const unsigned char *listed)
{
	for (size_t i = 0; i < px_cat(core)->nassets; i++) {
		if (px_asset_rt(core, i)->listed != listed[i])
			px_sources_count_listed(core, listed[i] ? 1 : -1);
		px_asset_rt(core, i)->listed = listed[i];
	}
}
