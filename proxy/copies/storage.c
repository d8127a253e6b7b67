/*
 * storage.c - the catalog's storages (docs/copies.md, "Placement" and
 * "Roles and maintenance").
 *
 * A storage (a name, a directory, the host that owns it when it is a
 * local disk, min_free_bytes, the copying role) is reachable when its
 * host is this host (or it names none: NFS, every host reads it), its
 * directory exists and is writable, statvfs answers, and it is the file
 * system (device) it was when seamfs first saw it reachable: an unmounted
 * storage's bare mount point is "storage not ready", never written. The
 * copies thread looks again every second, without the lock (statvfs on a
 * hung NFS mount must not hold the status up). This host's id is the
 * host_id option, else the host name (px_host_id_default).
 *
 * Roles. ctl turns a storage's copying role off or on; a drain also
 * drains its copies' provider and moves their sessions away, each by a
 * cutover at its offset (move_viewers).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "copies_i.h"
#include "log.h"
#include "provider.h"
#include "standby.h"

static void storage_check(const char *host, struct storage *s)
{
	struct stat sb;
	struct statvfs vb;
	s->reachable = 0;
	s->free_bytes = 0;
	if (s->host && strcmp(s->host, host) != 0)
		snprintf(s->why, sizeof(s->why), "a local disk of host %s", s->host);
	else if (stat(s->path, &sb) != 0)
		snprintf(s->why, sizeof(s->why), "%s", strerror(errno));
	else if (!S_ISDIR(sb.st_mode))
		snprintf(s->why, sizeof(s->why), "not a directory");
	else if (s->dev_known && sb.st_dev != s->dev)
		snprintf(s->why, sizeof(s->why), "not the file system seamfs first saw there "
			 "(unmounted?)");
	else if (access(s->path, W_OK) != 0)
		snprintf(s->why, sizeof(s->why), "not writable: %s", strerror(errno));
	else if (statvfs(s->path, &vb) != 0)
		snprintf(s->why, sizeof(s->why), "statvfs: %s", strerror(errno));
	else if (vb.f_flag & ST_RDONLY)
		snprintf(s->why, sizeof(s->why), "mounted read-only");
	else {
		s->reachable = 1;
		s->why[0] = '\0';
		if (!s->dev_known)
			s->dev = sb.st_dev;
		s->dev_known = 1;
		s->free_bytes = (int64_t)vb.f_bavail * (int64_t)vb.f_frsize;
	}
}

/* Takes in the catalog's storages: new ones added, known ones updated,
 * missing ones marked out of the catalog. cp->lock held. */
void cp_merge_storages(struct px_copies *cp, const struct px_catalog *cat)
{
	for (size_t i = 0; i < cp->nst; i++)
		cp->st[i].in_catalog = 0;
	for (size_t j = 0; j < cat->nstorages; j++) {
		const struct px_storage *ns = &cat->storages[j];
		long i = cp_find_storage(cp, ns->name);
		if (i < 0) {
			if (cp_grow((void **)&cp->st, &cp->capst, cp->nst, sizeof(*cp->st)))
				continue;
			struct storage *s = &cp->st[cp->nst];
			memset(s, 0, sizeof(*s));
			s->name = strdup(ns->name);
			if (!s->name)
				continue;
			snprintf(s->prov, sizeof(s->prov), "storage:%s", ns->name);
			s->copying = ns->copying;
			s->cat_copying = ns->copying;
			i = (long)cp->nst++;
		}
		struct storage *s = &cp->st[i];
		if (!s->path || strcmp(s->path, ns->path) != 0)
			s->loaded = s->dev_known = 0; /* another directory: seen anew */
		free(s->path);
		free(s->host);
		s->path = strdup(ns->path);
		s->host = ns->host ? strdup(ns->host) : NULL;
		s->min_free = ns->min_free_bytes;
		if (ns->copying != s->cat_copying)
			s->copying = ns->copying; /* the catalog changed its mind: it wins */
		s->cat_copying = ns->copying;
		s->in_catalog = s->path != NULL;
	}
}

#define MOVE_MAX 256             /* sessions moved per pass; the rest next pass */

/*
 * Moves the sessions reading copies on provider prov_name to other
 * sources of their assets, as a cutover at their offset (the seam: the
 * bytes just before it, from the copy). A session with nowhere to go
 * stays. Takes prov_lock alone; no other lock held.
 */
static void move_viewers(struct px_core *core, const char *prov_name)
{
	struct px_session **list = calloc(MOVE_MAX, sizeof(*list));
	size_t n = 0;
	if (!list)
		return;
	pthread_mutex_lock(px_prov_lock(core));
	long pi = -1;
	for (size_t i = 0; i < px_cat(core)->nproviders && pi < 0; i++)
		if (strcmp(px_cat(core)->providers[i].name, prov_name) == 0)
			pi = (long)i;
	for (struct px_session *s = px_sessions_first(core); s && pi >= 0 && n < MOVE_MAX; s = s->next) {
		if (!s->listed || s->failed || (long)s->prov != pi)
			continue;
		s->nhandles++; /* held as a handle would, until px_session_leave */
		list[n++] = s;
	}
	pthread_mutex_unlock(px_prov_lock(core));
	for (size_t i = 0; i < n; i++) {
		struct px_session *s = list[i];
		size_t k = atomic_load(&s->source);
		int64_t off = atomic_load(&s->offset);
		const char *path = px_cat(core)->assets[s->asset].sources[k].path;
		unsigned char seam[4096];
		size_t len = off < (int64_t)sizeof(seam) ? (size_t)off : sizeof(seam), got = 0;
		int fd = path ? px_source_open(core, s->asset, k) : -1;
		while (fd >= 0 && got < len) {
			ssize_t r = pread(fd, seam + got, len - got, off - (int64_t)len + (int64_t)got);
			if (r <= 0 && !(r < 0 && errno == EINTR))
				break;
			if (r > 0)
				got += (size_t)r;
		}
		if (fd >= 0)
			close(fd);
		enum px_status st = px_cutover(s, k, off, PX_EDECLINED, seam, got == len ? len : 0,
					       px_now_ms() + core->cfg->read_timeout_ms);
		if (st == PX_OK)
			px_info("copies", "%s: moved off the drained storage's copy at offset %lld",
				s->who, (long long)off);
		else
			px_warn("copies", "%s: no other source took it over (%s): it stays on the "
				"drained storage's copy", s->who, px_strerror(st));
		px_session_leave(s);
	}
	free(list);
}

void cp_storages_drain(struct px_copies *cp)
{
	/* drained storages: their viewers go elsewhere */
	for (size_t i = 0; i < cp->nst; i++) {
		if (!cp->st[i].move_viewers)
			continue;
		cp->st[i].move_viewers = 0;
		char prov[300];
		snprintf(prov, sizeof(prov), "%s", cp->st[i].prov);
		pthread_mutex_unlock(&cp->lock);
		move_viewers(cp->core, prov);
		pthread_mutex_lock(&cp->lock);
	}
}

void cp_storages_look(struct px_copies *cp)
{
	/* storages: look again, without the lock (statvfs on a hung NFS
	 * mount must not hold the status up), on copies of their fields */
	size_t nst = cp->nst;
	struct storage *look = calloc(nst + 1, sizeof(*look));
	for (size_t i = 0; look && i < nst; i++) {
		look[i].name = strdup(cp->st[i].name);
		look[i].path = cp->st[i].path ? strdup(cp->st[i].path) : NULL;
		look[i].host = cp->st[i].host ? strdup(cp->st[i].host) : NULL;
		look[i].dev = cp->st[i].dev;
		look[i].dev_known = cp->st[i].dev_known;
		look[i].in_catalog = cp->st[i].in_catalog && look[i].name && look[i].path &&
				     (!cp->st[i].host || look[i].host);
	}
	pthread_mutex_unlock(&cp->lock);
	for (size_t i = 0; look && i < nst; i++)
		if (look[i].in_catalog)
			storage_check(cp->host, &look[i]);
	pthread_mutex_lock(&cp->lock);
	for (size_t i = 0; look && i < nst; i++) {
		long si = look[i].name ? cp_find_storage(cp, look[i].name) : -1;
		if (si >= 0 && look[i].in_catalog && cp->st[si].in_catalog &&
		    strcmp(cp->st[si].path, look[i].path) == 0) {
			struct storage *s = &cp->st[si];
			s->reachable = look[i].reachable;
			s->free_bytes = look[i].free_bytes;
			snprintf(s->why, sizeof(s->why), "%s", look[i].why);
			s->dev = look[i].dev;
			s->dev_known = look[i].dev_known;
		}
		free(look[i].name);
		free(look[i].path);
		free(look[i].host);
	}
	free(look);
}

void cp_storages_load(struct px_copies *cp)
{
	if (px_cluster_store(cp->core) && px_now_ms() >= cp->rescan_at) {
		/* the copies other hosts made on shared storages */
		cp->rescan_at = px_now_ms() + RESCAN_MS;
		for (size_t i = 0; i < cp->nst; i++)
			if (cp->st[i].in_catalog && cp->st[i].reachable && cp->st[i].loaded &&
			    cp_shared(cp, &cp->st[i]))
				cp_manifest_load(cp, i, 1);
	}
	for (size_t i = 0; i < cp->nst; i++) {
		struct storage *s = &cp->st[i];
		if (!s->in_catalog) {
			s->reachable = 0;
			snprintf(s->why, sizeof(s->why), "not in the catalog");
			continue;
		}
		if (s->reachable && !s->loaded)
			cp_manifest_load(cp, i, 0);
	}
}

enum px_status px_copies_role(struct px_core *core, const char *storage, int copying, int drain)
{
	struct px_copies *cp = core->copies;
	char prov[300] = "";
	if (!cp)
		return PX_ENOTFOUND;
	pthread_mutex_lock(&cp->lock);
	long i = cp_find_storage(cp, storage);
	if (i >= 0 && cp->st[i].in_catalog) {
		cp->st[i].copying = copying;
		cp->st[i].drained = drain;
		snprintf(prov, sizeof(prov), "%s", cp->st[i].prov);
		cp_kick(cp);
	}
	pthread_mutex_unlock(&cp->lock);
	if (!prov[0])
		return PX_ENOTFOUND;
	/* the storage's provider exists once a copy is on it */
	if (px_provider_drain(core, prov, drain) != PX_OK && drain)
		px_info("copies", "storage %s: no copy serves from it yet", storage);
	if (drain) {
		/* drained first: then its viewers move (the copies thread) */
		pthread_mutex_lock(&cp->lock);
		i = cp_find_storage(cp, storage);
		if (i >= 0)
			cp->st[i].move_viewers = 1;
		cp_kick(cp);
		pthread_mutex_unlock(&cp->lock);
	}
	px_info("copies", "storage %s: copying role %s%s", storage, copying ? "on" : "off",
		drain ? ", drained: no new sessions on its copies" : "");
	return PX_OK;
}
