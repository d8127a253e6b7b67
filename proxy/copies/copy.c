/*
 * copy.c - making one copy (docs/copies.md, "The copy").
 *
 * One job at a time, on the copies thread: the source is a live verified
 * one of the asset (an existing copy too; else the one that served, else
 * any live one), read in spare slots (spare.c) into
 * STORAGE/ASSET-PATH.XXXXXX.partial (dest.c) while a full SHA-256 runs
 * over it. Then: the size; the catalog's sha256 when it has one; else the
 * copy's sampled fingerprint against the asset's reference (or, before
 * there is one, against the source's own samples read again) and, when a
 * second source is live, that source's full SHA-256. Then fsync, rename,
 * fsync of the directory, the manifest, and the copy becomes a verified
 * path source of the asset (serve.c). A failed read or a mismatch fails
 * the attempt (job.c retries it).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copies_i.h"
#include "fingerprint.h"
#include "health.h"
#include "log.h"
#include "provider.h"
#include "standby.h"
#include "verdict.h"

/* The source to copy from: a verified one (a copy too: this host's disk
 * costs no connection), else the one that served, else any live one; one
 * that failed lately after the others. *second: the best other live
 * source that is not a copy (a copy came from the same bytes: no second
 * opinion), -1 when none. -1 when there is no source at all. */
static long pick_source(struct px_core *core, size_t asset, long *second)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
	int64_t now = core->now();
	size_t n = a->nsources;
	int *rank = calloc(n + 1, sizeof(*rank));
	unsigned char *refused = calloc(n + 1, 1), *failing = calloc(n + 1, 1);
	long best = -1;
	*second = -1;
	if (!rank || !refused || !failing)
		goto out;
	pthread_mutex_lock(px_prov_lock(core)); /* taken alone */
	for (size_t k = 0; k < n; k++) {
		const struct prov_rt *p = px_prov_rt(core, a->sources[k].provider);
		refused[k] = p->auth_failed != 0;
		failing[k] = p->bad_since != 0;
	}
	pthread_mutex_unlock(px_prov_lock(core));
	px_vf_lock(core);
	int served_by = atomic_load(&rt->served_by);
	for (size_t k = 0; k < n; k++) {
		rank[k] = -1;
		if (rt->dead[k] || px_source_rejected(core, asset, k) || refused[k])
			continue;
		rank[k] = 2;
		if (rt->src && rt->src[k].state == VS_VERIFIED)
			rank[k] = 4;
		else if (served_by == (int)k + 1)
			rank[k] = 3;
		if (px_source_bad(core, asset, k, now) || failing[k])
			rank[k] -= 2;
	}
	px_vf_unlock(core);
	for (size_t k = 0; k < n; k++)
		if (rank[k] >= 0 && (best < 0 || rank[k] > rank[best]))
			best = (long)k;
	for (size_t k = 0; k < n && best >= 0; k++)
		if (rank[k] >= 0 && (long)k != best && !a->sources[k].storage &&
		    (*second < 0 || rank[k] > rank[*second]))
			*second = (long)k;
out:
	free(rank);
	free(refused);
	free(failing);
	return best;
}

/* Checks the copy at path against the asset without a catalog sha256:
 * its samples against the reference (or the source's samples read now).
 * 0 when they agree, else why. */
static int check_samples(struct px_copies *cp, size_t asset, size_t k, const char *path,
			 char *why, size_t n)
{
	struct px_core *core = cp->core;
	struct asset_rt *rt = px_asset_rt(core, asset);
	int64_t size = rt->size;
	struct vf_fingerprint *ref = malloc(sizeof(*ref)), *mine = malloc(sizeof(*mine));
	struct px_rangeread *rr = NULL;
	int rc = -1;
	size_t bad;
	char w[200];

	if (!ref || !mine) {
		snprintf(why, n, "out of memory");
		goto out;
	}
	int have_ref = 0;
	px_vf_lock(core);
	if (rt->ref) {
		*ref = *rt->ref;
		have_ref = 1;
	}
	px_vf_unlock(core);
	if (!have_ref) {
		/* no reference yet: the source's own samples, asked again */
		struct gate g = { 0 };
		enum px_status st = PX_EBUSY;
		for (int tries = 0; tries < SPARE_TRIES && st != PX_OK; tries++) {
			px_rangeread_free(rr);
			rr = NULL;
			atomic_store(&g.busy, 0);
			if ((st = cp_open_source(core, asset, k, &g, &rr)) != PX_OK)
				break;
			struct vf_reader r = px_rangeread_reader(rr);
			st = vf_fingerprint_take(&r, size, ref, &bad, w, sizeof(w));
			if (st == PX_OK || !(atomic_load(&g.busy) || st == PX_ECANCELED))
				break;
			if (cp_pause_ms(cp, YIELD_MS))
				break;
		}
		if (st != PX_OK) {
			snprintf(why, n, "the source's samples could not be read: %s", w);
			goto out;
		}
	}
	px_rangeread_free(rr);
	rr = NULL;
	if (px_rangeread_new_path(path, &rr) != PX_OK) {
		snprintf(why, n, "out of memory");
		goto out;
	}
	struct vf_reader r = px_rangeread_reader(rr);
	if (vf_fingerprint_take(&r, size, mine, &bad, w, sizeof(w)) != PX_OK) {
		snprintf(why, n, "the copy's samples could not be read: %s", w);
		goto out;
	}
	struct vf_verdict v;
	vf_verdict_compare(ref, mine, &v);
	if (v.outcome != VF_MATCH) {
		snprintf(why, n, "the copy differs from the %s: %s",
			 have_ref ? "asset's reference" : "source", v.why);
		goto out;
	}
	rc = 0;
out:
	px_rangeread_free(rr);
	free(ref);
	free(mine);
	return rc;
}

/* The copy of the asset just made on storage si, before it becomes a
 * source (registered and serving are set then): recorded as this host's (hex its SHA-256, made from the source whose key
 * is src_key, etag that source's then; sb the file it is) and the
 * storage's manifest written. Takes cp->lock. */
static void record_made(struct px_copies *cp, size_t asset, size_t si, const char *hex,
			const char *src_key, const char *etag, const struct stat *sb)
{
	struct px_core *core = cp->core;
	pthread_mutex_lock(&cp->lock);
	long ci = cp_find_copy(cp, asset, si);
	if (ci < 0 && !cp_grow((void **)&cp->c, &cp->capc, cp->nc, sizeof(*cp->c))) {
		ci = (long)cp->nc++;
		memset(&cp->c[ci], 0, sizeof(cp->c[ci]));
	}
	if (ci >= 0) {
		struct copy *c = &cp->c[ci];
		c->asset = asset;
		c->storage = si;
		c->registered = c->serving = 0;
		c->mine = 1;
		c->stale = 0;
		c->size = px_asset_rt(core, asset)->size;
		snprintf(c->sha, sizeof(c->sha), "%s", hex);
		snprintf(c->src_key, sizeof(c->src_key), "%s", src_key);
		snprintf(c->etag, sizeof(c->etag), "%s", etag);
		c->recheck = 0;
		c->ino = sb->st_ino;
		c->dev = sb->st_dev;
		c->dropped = PX_WAIT_NONE;
		cp_manifest_save(cp, si);
	}
	pthread_mutex_unlock(&cp->lock);
}

/* One copy in the making (cp_make_copy), on the copies thread. */
struct making {
	size_t ji, asset, si;
	char path[PATH_MAX];         /* the copy's */
	char partial[PATH_MAX + NAME_MAX + 2];
	char sname[256], prov[300];  /* its storage's name, provider */
	const char *name;            /* the storage's, lives until px_copies_free */
	const char *csha;            /* the catalog's sha256; NULL: none */
	int local;                   /* the storage names a host */
	long k, second;              /* the source; the second opinion, -1: none */
	struct cp_dest pl;
	int fd;                      /* the .partial */
	char etag[128];              /* the source's ETag; "": unknown */
	unsigned char sha[VF_HASH_LEN];
	char hex[65];
	struct stat sb;              /* the .partial once written */
	enum px_copy_wait *wait;     /* out: what it waits for */
	char *why;                   /* out: the failure, n bytes */
	size_t n;
};

/* Picks the source, opens the copy's place and its .partial, asks the
 * source's ETag. PX_OK, else why (PX_EEXIST with *wait: it waits). */
static enum px_status begin(struct px_copies *cp, struct making *m)
{
	struct px_core *core = cp->core;
	enum px_status st;

	pthread_mutex_lock(&cp->lock);
	cp_copy_path(core, &cp->st[m->si], m->asset, m->path, sizeof(m->path));
	snprintf(m->sname, sizeof(m->sname), "%s", cp->st[m->si].name);
	m->name = cp->st[m->si].name; /* lives until px_copies_free */
	snprintf(m->prov, sizeof(m->prov), "%s", cp->st[m->si].prov);
	m->local = cp->st[m->si].host != NULL;
	m->csha = cp_want_sha(cp, m->asset);
	pthread_mutex_unlock(&cp->lock);

	m->k = pick_source(core, m->asset, &m->second);
	if (m->k < 0) {
		snprintf(m->why, m->n, "no live source to copy from");
		return PX_ENOSOURCE;
	}
	if ((st = cp_dest_open(cp, m->asset, m->si, &m->pl, m->wait, m->why, m->n)) != PX_OK)
		return st;
	m->fd = px_create_excl(m->pl.dir, m->pl.base, "partial", 0644, m->pl.tmp,
			       sizeof(m->pl.tmp));
	snprintf(m->partial, sizeof(m->partial), "%.*s%s",
		 (int)(strlen(m->path) - strlen(m->pl.base)), m->path,
		 m->pl.tmp[0] ? m->pl.tmp : m->pl.base);
	if (m->fd < 0) {
		snprintf(m->why, m->n, "%s.partial: %s", m->path, strerror(errno));
		return PX_EIO;
	}
	for (int tries = 0; tries < 10 && cp_probe_etag(core, m->asset, (size_t)m->k, m->etag,
							 sizeof(m->etag)) == 1; tries++)
		if (cp_pause_ms(cp, YIELD_MS))
			break;
	px_info("copies", "asset %s: copying from %s to storage %s (%s)",
		px_cat(core)->assets[m->asset].id, px_cat(core)->assets[m->asset].sources[m->k].shown,
		m->sname, m->partial);
	return PX_OK;
}

/* The second live source (not a copy), read whole, must agree with the
 * copy; one that cannot be read whole leaves the copy standing on its
 * samples. PX_OK, PX_EMISMATCH with why, PX_ESHUTDOWN. */
static enum px_status second_opinion(struct px_copies *cp, struct making *m)
{
	struct px_core *core = cp->core;
	unsigned char sha2[VF_HASH_LEN];
	char w[240] = "";
	pthread_mutex_lock(&cp->lock);
	cp->jobs[m->ji].done = 0;
	pthread_mutex_unlock(&cp->lock);
	struct cp_read rd = { m->ji, m->asset, (size_t)m->second, -1, w, sizeof(w) };
	enum px_status s2 = cp_stream_source(cp, &rd, sha2);
	if (s2 == PX_ESHUTDOWN)
		return s2;
	if (s2 == PX_OK && memcmp(m->sha, sha2, VF_HASH_LEN) != 0) {
		snprintf(m->why, m->n, "SHA-256 %s differs from source %s's", m->hex,
			 px_cat(core)->assets[m->asset].sources[m->second].shown);
		return PX_EMISMATCH;
	}
	if (s2 != PX_OK)
		px_info("copies", "asset %s: the second source could not be read "
			"whole (%s): the copy stands on its samples",
			px_cat(core)->assets[m->asset].id, w);
	return PX_OK;
}

/* The written .partial against the asset: its size, on disk (fsync),
 * then the catalog's sha256, or without one its samples and a second
 * source. PX_OK, else why. */
static enum px_status check(struct px_copies *cp, struct making *m)
{
	struct px_core *core = cp->core;
	if (fstat(m->fd, &m->sb) != 0 || m->sb.st_size != px_asset_rt(core, m->asset)->size) {
		snprintf(m->why, m->n, "the copy has %lld bytes, the asset %lld",
			 (long long)m->sb.st_size, (long long)px_asset_rt(core, m->asset)->size);
		return PX_ESIZE;
	}
	if (fsync(m->fd) != 0) {
		snprintf(m->why, m->n, "fsync %s: %s", m->partial, strerror(errno));
		return PX_EIO;
	}
	if (m->csha) {
		if (strcmp(m->csha, m->hex) != 0) {
			snprintf(m->why, m->n, "SHA-256 %s differs from the catalog's %s", m->hex,
				 m->csha);
			return PX_EMISMATCH;
		}
		return PX_OK;
	}
	/* read back through our descriptor, not by a name others can change */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", m->fd);
	if (check_samples(cp, m->asset, (size_t)m->k, self, m->why, m->n))
		return PX_EMISMATCH;
	return m->second >= 0 ? second_opinion(cp, m) : PX_OK;
}

/* Renames the checked .partial to the copy's name, records it and makes
 * it a source. PX_OK once it serves, else why. */
static enum px_status finish(struct px_copies *cp, struct making *m)
{
	struct px_core *core = cp->core;
	enum px_status st = cp_dest_commit(&m->pl, m->fd, m->wait, m->why, m->n);
	if (st != PX_OK)
		return st;

	/* recorded first (not serving): is_ours knows it from now on */
	record_made(cp, m->asset, m->si, m->hex, px_cat(core)->assets[m->asset].sources[m->k].key,
		    m->etag, &m->sb);
	size_t kk;
	pthread_mutex_lock(&cp->lock);
	struct cp_reg reg = { m->asset, m->path, m->name, m->prov, m->local,
			      { cp->st[m->si].dev, m->sb.st_dev, m->sb.st_ino } };
	pthread_mutex_unlock(&cp->lock);
	int bad = cp_register_copy(cp, &reg, &kk);
	pthread_mutex_lock(&cp->lock);
	long ci = cp_find_copy(cp, m->asset, m->si);
	if (ci >= 0 && bad)
		cp->c[ci].stale = 1;
	if (ci >= 0 && !bad) {
		cp->c[ci].k = kk;
		cp->c[ci].registered = cp->c[ci].serving = 1;
	}
	pthread_mutex_unlock(&cp->lock);
	if (bad) {
		snprintf(m->why, m->n, "the copy could not become a source (see the log)");
		return PX_EINVAL;
	}
	px_info("copies", "asset %s: copy on storage %s made and verified (%s, SHA-256 %s)",
		px_cat(core)->assets[m->asset].id, m->sname, m->path, m->hex);
	return PX_OK;
}

/*
 * Makes one copy of the asset on storage si for job ji: PX_OK once it
 * serves; PX_EEXIST with *wait set when it must wait (something in its
 * way, left alone); else why (the attempt failed). No lock held.
 */
enum px_status cp_make_copy(struct px_copies *cp, size_t ji, size_t asset, size_t si,
			    enum px_copy_wait *wait, char *why, size_t n)
{
	struct making m = { .ji = ji, .asset = asset, .si = si, .pl = { .dir = -1 }, .fd = -1,
			    .wait = wait, .why = why, .n = n };
	enum px_status st = begin(cp, &m);
	if (st == PX_OK) {
		struct cp_read rd = { ji, asset, (size_t)m.k, m.fd, why, n };
		st = cp_stream_source(cp, &rd, m.sha);
	}
	if (st == PX_OK) {
		vf_hash_hex(m.sha, VF_HASH_LEN, m.hex);
		st = check(cp, &m);
	}
	if (st == PX_OK)
		st = finish(cp, &m);
	if (m.fd >= 0)
		close(m.fd);
	cp_dest_close(&m.pl);
	return st;
}
