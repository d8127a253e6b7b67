/*
 * sources.h - the core's own copy of the catalog, sources added and
 * removed at run time, and which path sources may be used (sources.c).
 */
#ifndef SEAMFS_SOURCES_H
#define SEAMFS_SOURCES_H

#include <stddef.h>
#include "context.h"
#include "px.h"

/* ---- sources.c: the core's copy of the catalog, sources added at run time */

/* Makes core->sources: px_cat(core), a copy of cat's arrays with room to
 * spare, and each asset's run-time state (px_asset_rt), unlisted and of
 * unknown size; on failure (PX_ENOMEM) none of it. */
enum px_status px_sources_new(struct px_core *core, const struct px_catalog *cat);
void px_sources_free(struct px_core *core);

/* The listed tree (NULL before the first listing); px_sources_set_tree
 * puts a new one in and returns the old one, for the caller to free once
 * nobody reads it. Any thread. */
const struct px_tree *px_sources_tree(const struct px_core *core);
struct px_tree *px_sources_set_tree(struct px_core *core, struct px_tree *tree);

/* The mtime of assets that have none (the catalog file's, at mount). */
int64_t px_sources_fallback_mtime(const struct px_core *core);
void px_sources_set_fallback_mtime(struct px_core *core, int64_t mtime);

/* Adds delta to the listed assets (px_sources_listed, context.h). */
void px_sources_count_listed(struct px_core *core, long delta);

/*
 * Whether a path source may be used: a regular file (a FIFO, a device, a
 * socket or a directory never: opening one could block a reader for
 * good), and, when untrusted (from a playlist or added at run time), one
 * that lies in a folder of strm_paths once symlinks are resolved. why says
 * what is wrong, never quoting the file. Any thread.
 */
int px_sources_path_allowed(const struct px_core *core, const char *path, int untrusted,
			 char *why, size_t whylen);

/* Marks the asset's path sources that px_sources_path_allowed() refuses dead,
 * with the reason in the status and the log. */
void px_sources_screen_paths(struct px_core *core, size_t asset, int untrusted);

/*
 * Adds a source to a listed plain asset while mounted: where is an
 * http(s) URL or an absolute path; provider names an existing provider, or
 * NULL for the URL's implicit one (host:port, made if new). Live sessions
 * of the asset take it as a standby once it is verified. On failure writes
 * "FIELD: what is wrong" into err: PX_ENOTFOUND (no such asset or
 * provider), PX_EINVAL (bad URL or path, no room), PX_EEXIST (already a
 * source). Any thread.
 */
enum px_status px_sources_add(struct px_core *core, const char *asset_id, const char *where,
				  const char *provider, char *err, size_t errlen) PX_WUR;

/*
 * Removes a source (its URL or path) from an asset: no new session or
 * cutover goes there; sessions reading it go on. PX_ENOTFOUND with err
 * naming the field when the asset or the source is unknown. Any thread.
 */
enum px_status px_sources_remove(struct px_core *core, const char *asset_id,
				     const char *where, char *err, size_t errlen) PX_WUR;

/* ---- a reload's catalog (control/reload.c), under the caller's reload_lock */

/* Appends "; " and the formatted text to the one-line report r (len
 * bytes), as far as it fits. */
void px_sources_note(char *r, size_t len, const char *fmt, ...) PX_PRINTF(3, 4);

/* One reload's change of the core's catalog copy. The caller fills nc
 * (kept by the core from the apply on: the core's copy points into it),
 * map (nc->nproviders entries), keep and need (one byte per room in the
 * core's assets, zeroed) and the report; px_sources_apply fills the rest. */
struct px_sources_change {
	const struct px_catalog *nc;
	size_t *map;           /* nc's provider i: the core's, (size_t)-1 none */
	unsigned char *keep;   /* core asset i is in nc */
	unsigned char *need;   /* core asset i is new and its size unknown */
	char *report;          /* what the reload could not do (px_sources_note) */
	size_t len;
	size_t old_n;          /* the core's assets before the change */
	int n_new, s_added, s_removed;
};

/*
 * Applies nc to the core's copy under prov_lock and vf_lock: a new
 * provider is added, a known one takes nc's limits (px_providers_apply);
 * a known plain asset's sources become nc's (new ones added, missing ones
 * marked removed: open files read on); a new plain asset whose path is
 * free is added, unlisted. What needs a remount is noted in the report.
 */
void px_sources_apply(struct px_core *core, struct px_sources_change *c);

/*
 * After px_sources_apply and the new assets' size probe: which assets the
 * new tree lists (listed, one byte per asset), and which the discovery
 * retry asks again; a new asset without an mtime takes the catalog's.
 * Returns how many listed assets are gone.
 */
int px_sources_listing(struct px_core *core, const struct px_sources_change *c,
		       unsigned char *listed);

/* Publishes listed (px_sources_listing's, once its tree is built) as the
 * assets' listed flags. */
void px_sources_set_listed(struct px_core *core, const unsigned char *listed);

/* ---- copies (copies/serve.c): trusted paths of the catalog's storages */

/* The file a copy is: its storage's file system (device) when seamfs
 * first saw it, and the copy's own device and inode. */
struct px_copy_file {
	unsigned long long sdev, dev, ino;
};

/*
 * Makes path (a finished, proven copy on storage `storage`, borrowed
 * from the core for as long as it lives; the file *file) a source of the
 * asset, on provider prov_name (made when new; local_disk: preferred for
 * new sessions), verified at once: no strm_paths check, the storage is
 * the catalog's. It is opened only as that file, beneath the storage
 * (px_source_open). A source already at that path comes back to life.
 * *k gets its index. PX_EINVAL when the asset has no room, PX_ENOMEM. Any
 * thread that holds none of the core's locks.
 */
enum px_status px_sources_add_copy(struct px_core *core, size_t asset, const char *path,
				   const char *storage, const char *prov_name, int local_disk,
				   const struct px_copy_file *file, size_t *k) PX_WUR;

/*
 * Makes url (a peer host's endpoint for the asset's copy on its disk,
 * copies/peers.c) a source of the asset on provider prov_name ("peer:HOST",
 * made when new: no connection limit, its one header the cluster's
 * secret, header "Authorization: Bearer ...", sent to that URL's origin
 * only; shown nowhere). It starts unverified: verified like any source
 * before a cutover or a standby uses it. A source already at that URL
 * (dropped when the host went away) comes back to life, unverified. *k
 * gets its index. PX_EINVAL when the asset or the mount has no room,
 * PX_ENOMEM. Any thread that holds none of the core's locks.
 */
enum px_status px_sources_add_peer(struct px_core *core, size_t asset, const char *url,
				   const char *prov_name, const char *header, size_t *k) PX_WUR;

/* Source k of the asset (a copy) stops serving now: no new session or
 * cutover goes there (why in the status). Any thread that holds none of
 * the core's locks. */
void px_sources_drop(struct px_core *core, size_t asset, size_t k, const char *why);

#endif
