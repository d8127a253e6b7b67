/*
 * manifest.c - the storages' manifests (docs/copies.md, "Persistence" and
 * "Cluster mode").
 *
 * Each storage holds STORAGE/.seamfs-copies.json: per asset id the file,
 * size and full SHA-256 of its copy, the source it came from and that
 * source's ETag (written atomically, px_write_atomic_at, beneath the
 * storage's directory and only while it is the file system seamfs first
 * saw there). A stale copy stays listed as "stale": it serves no more,
 * but its file is this host's to replace (dest.c). At mount, and when a
 * reload brings a storage, a listed copy whose file is there at the
 * asset's size (opened as a reader would: never through a link) and
 * whose SHA-256 equals the catalog's, when the catalog has one, serves
 * again without a new copy.
 *
 * Cluster mode, a storage without a host (shared, NFS): each host writes
 * .seamfs-copies.HOST.json with its own copies and reads every
 * .seamfs-copies*.json there (mount, every RESCAN_MS, a reload, after a
 * claim): another host's copy is checked as at mount and registered.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "copies_i.h"
#include "log.h"
#include "rangeread.h"

/* The name of this host's manifest on s. */
static void manifest_name(const struct px_copies *cp, const struct storage *s, char *out,
			  size_t n)
{
	if (cp_shared(cp, s))
		snprintf(out, n, "%s.%s.json", MANIFEST_PREFIX, cp->host);
	else
		snprintf(out, n, "%s", MANIFEST);
}

/* This host's manifest on s. */
static void manifest_path(const struct px_copies *cp, const struct storage *s, char *out,
			  size_t n)
{
	char name[300];
	manifest_name(cp, s, name, sizeof(name));
	snprintf(out, n, "%s/%s", s->path, name);
}

/* Rewrites storage si's manifest from the copies known there: a stale
 * one stays listed as "stale" (it serves no more, but its file is this
 * host's to replace). cp->lock held. */
void cp_manifest_save(struct px_copies *cp, size_t si)
{
	struct px_core *core = cp->core;
	struct storage *s = &cp->st[si];
	json_t *root = json_object(), *all = json_object();
	char name[300], err[400] = "out of memory";
	int dfd = -1;
	if (!root || !all || json_object_set_new(root, "copies", all)) {
		json_decref(root);
		return;
	}
	for (size_t i = 0; i < cp->nc; i++) {
		const struct copy *c = &cp->c[i];
		if (c->storage != si || !c->mine)
			continue;
		json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:s}", "file",
				      px_cat(core)->assets[c->asset].path, "size", (json_int_t)c->size,
				      "sha256", c->sha, "source", c->src_key, "etag", c->etag);
		if (o && c->stale)
			json_object_set_new(o, "stale", json_true());
		json_object_set_new(all, px_cat(core)->assets[c->asset].id, o);
	}
	char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(root);
	manifest_name(cp, s, name, sizeof(name));
	struct stat sb;
	if (text && (dfd = px_dir_open(s->path)) < 0)
		snprintf(err, sizeof(err), "%s: %s", s->path, strerror(errno));
	if (dfd >= 0 && (fstat(dfd, &sb) != 0 || !s->dev_known || sb.st_dev != s->dev)) {
		/* unmounted meanwhile: its bare mount point gets nothing */
		snprintf(err, sizeof(err), "%s is not the file system seamfs first saw there",
			 s->path);
		close(dfd);
		dfd = -1;
	}
	if (dfd < 0 || px_write_atomic_at(dfd, s->path, name, text, strlen(text), 0644, err,
					  sizeof(err)) != PX_OK)
		px_warn("copies", "storage %s: the manifest could not be written: %s", s->name, err);
	if (dfd >= 0)
		close(dfd);
	free(text);
}

/* Keeps a copy of this host's that serves no more (stale, or no longer
 * the asset): its file stays ours to replace (dest_check). cp->lock held. */
static void remember_stale(struct px_copies *cp, size_t asset, size_t si, int64_t size,
			   const char *sha)
{
	if (cp_find_copy(cp, asset, si) >= 0 || cp_grow((void **)&cp->c, &cp->capc, cp->nc,
						  sizeof(*cp->c)))
		return;
	struct copy *c = &cp->c[cp->nc++];
	memset(c, 0, sizeof(*c));
	c->asset = asset;
	c->storage = si;
	c->mine = c->stale = 1;
	c->size = size;
	snprintf(c->sha, sizeof(c->sha), "%s", sha);
}

/* Parses the manifest file, never through a link put at its name (its
 * error would quote the target's first bytes) nor blocking on a FIFO:
 * NULL with jerr set when it cannot. */
static json_t *manifest_read(const char *file, json_error_t *jerr)
{
	struct stat sb;
	json_t *root = NULL;
	int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	memset(jerr, 0, sizeof(*jerr));
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		snprintf(jerr->text, sizeof(jerr->text), "%s",
			 fd < 0 ? strerror(errno) : "not a regular file");
	else
		root = json_loadfd(fd, 0, jerr);
	if (fd >= 0)
		close(fd);
	return root;
}

/* Whether asset a's copy is on storage si, opened as a reader would (a
 * link in its place or on its way, a folder swapped for one, is no copy):
 * its stat into sb. cp->lock held. */
static int found_on_storage(struct px_copies *cp, size_t si, size_t a, struct stat *sb)
{
	int fd = px_open_in_dir(cp->st[si].path, cp->st[si].dev, px_cat(cp->core)->assets[a].path);
	int ok = fd >= 0 && fstat(fd, sb) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Reads one manifest file of storage si and registers what still
 * matches and is not known yet (mine: the copies are this host's).
 * rescan: a periodic look at another host's manifest (quiet about what
 * does not match). Called with cp->lock held; drops it around the
 * registrations. */
static void manifest_load_file(struct px_copies *cp, size_t si, const char *file, int mine,
			       int rescan)
{
	struct px_core *core = cp->core;
	json_error_t jerr;
	json_t *root = manifest_read(file, &jerr);
	if (!root) {
		if (!rescan && access(file, F_OK) == 0)
			px_warn("copies", "storage %s: %s:%d: %s (its copies are made again)",
				cp->st[si].name, file, jerr.line, jerr.text);
		return;
	}
	json_t *all = json_object_get(root, "copies");
	const char *id;
	json_t *v;
	json_object_foreach(all, id, v) {
		long a = px_catalog_find(px_cat(core), id);
		json_t *jsize = json_object_get(v, "size"), *jsha = json_object_get(v, "sha256");
		if (a < 0 || !px_asset_rt(core, a)->listed || px_cat(core)->assets[a].kind != PX_ASSET_PLAIN ||
		    !json_is_integer(jsize) || !json_is_string(jsha) ||
		    strlen(json_string_value(jsha)) != 64)
			continue;
		/* known already; but a stale one another host made again (a new
		 * SHA-256 in its manifest) is taken in again */
		long ex = cp_find_copy(cp, (size_t)a, si);
		if (ex >= 0 && (mine || !cp->c[ex].stale ||
				strcmp(cp->c[ex].sha, json_string_value(jsha)) == 0))
			continue;
		int64_t size = json_integer_value(jsize);
		const char *sha = cp_want_sha(cp, (size_t)a);
		struct stat sb;
		char path[PATH_MAX];
		cp_copy_path(core, &cp->st[si], (size_t)a, path, sizeof(path));
		int was_stale = json_is_true(json_object_get(v, "stale"));
		if (was_stale || !found_on_storage(cp, si, (size_t)a, &sb))
			sb.st_size = -1;
		if (was_stale || size != px_asset_rt(core, a)->size ||
		    (sha && strcmp(sha, json_string_value(jsha))) || sb.st_size != size) {
			if (!rescan && !was_stale)
				px_info("copies", "asset %s: the copy on storage %s (%s) no longer "
					"matches the asset: made again", id, cp->st[si].name, file);
			if (mine && ex < 0)
				remember_stale(cp, (size_t)a, si, size, json_string_value(jsha));
			continue;
		}
		if (ex < 0 && cp_grow((void **)&cp->c, &cp->capc, cp->nc, sizeof(*cp->c)))
			break;
		if (ex < 0)
			ex = (long)cp->nc++;
		struct copy *c = &cp->c[ex];
		memset(c, 0, sizeof(*c));
		c->asset = (size_t)a;
		c->storage = si;
		c->mine = mine;
		c->size = size;
		c->ino = sb.st_ino;
		c->dev = sb.st_dev;
		snprintf(c->sha, sizeof(c->sha), "%s", json_string_value(jsha));
		const char *key = json_string_value(json_object_get(v, "source"));
		const char *etag = json_string_value(json_object_get(v, "etag"));
		snprintf(c->src_key, sizeof(c->src_key), "%s", key ? key : "");
		snprintf(c->etag, sizeof(c->etag), "%s", etag ? etag : "");
		c->recheck = c->etag[0] != '\0'; /* the origin may have changed meanwhile */
		size_t ci = (size_t)ex, k;
		char sname[256], prov[300];
		snprintf(sname, sizeof(sname), "%s", cp->st[si].name);
		snprintf(prov, sizeof(prov), "%s", cp->st[si].prov);
		int local = cp->st[si].host != NULL;
		pthread_mutex_unlock(&cp->lock);
		struct cp_reg reg = { (size_t)a, path, cp->st[si].name, prov, local,
				      { cp->st[si].dev, sb.st_dev, sb.st_ino } };
		int ok = cp_register_copy(cp, &reg, &k) == 0;
		pthread_mutex_lock(&cp->lock);
		if (ok) {
			cp->c[ci].k = k;
			cp->c[ci].registered = cp->c[ci].serving = 1;
			px_info("copies", "asset %s: copy on storage %s serves %s (%s, from %s)", id,
				sname, mine ? "again" : "here", path, file);
		} else {
			cp->c[ci].stale = 1;
		}
	}
	json_decref(root);
}

/* Reads storage si's manifests: its one, or in cluster mode on a shared
 * storage every .seamfs-copies*.json (this host's copies, and the other
 * hosts' that this host reads too). cp->lock held; dropped around the
 * registrations. */
void cp_manifest_load(struct px_copies *cp, size_t si, int rescan)
{
	char file[PATH_MAX], own[PATH_MAX];
	cp->st[si].loaded = 1;
	manifest_path(cp, &cp->st[si], own, sizeof(own));
	if (!cp_shared(cp, &cp->st[si])) {
		manifest_load_file(cp, si, own, 1, rescan);
		return;
	}
	char dirpath[PATH_MAX];
	snprintf(dirpath, sizeof(dirpath), "%s", cp->st[si].path);
	DIR *d = opendir(dirpath);
	if (!d)
		return;
	char (*names)[NAME_MAX + 1] = NULL;
	size_t nn = 0, capn = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (strncmp(de->d_name, MANIFEST_PREFIX, strlen(MANIFEST_PREFIX)) != 0 ||
		    len < 5 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		if (cp_grow((void **)&names, &capn, nn, sizeof(*names)))
			break;
		snprintf(names[nn++], sizeof(*names), "%s", de->d_name);
	}
	closedir(d);
	for (size_t i = 0; i < nn; i++) {
		snprintf(file, sizeof(file), "%s/%s", dirpath, names[i]);
		int mine = strcmp(file, own) == 0;
		if (!(rescan && mine)) /* this host's: read once, it wrote the rest */
			manifest_load_file(cp, si, file, mine, rescan);
	}
	free(names);
}
