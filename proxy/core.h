/*
 * core.h - the seamfs core: one context that holds the catalog, the
 * settings, the fetcher and what is known about every asset at run time.
 *
 * main builds one core and passes it down; a unit test builds one the same
 * way with a fake fetcher. fs/ reaches everything through it.
 */
#ifndef SEAMFS_CORE_H
#define SEAMFS_CORE_H

#include <stddef.h>
#include <stdint.h>
#include "catalog.h"
#include "config.h"
#include "fetch.h"
#include "px.h"
#include "tree.h"

struct px_core;
struct px_state;

/*
 * Makes a core. cfg and cat are borrowed until px_core_free(). ops NULL:
 * start a real fetch thread; otherwise use ops (a fake in tests).
 */
enum px_status px_core_new(const struct px_config *cfg, const struct px_catalog *cat,
			   const struct px_fetch_ops *ops, struct px_core **out) PX_WUR;
void px_core_free(struct px_core *core);

/*
 * Ends every transfer in flight and refuses new ones, so that reads that
 * wait for bytes return (EIO) at once: the first step of stopping the
 * daemon. Any thread; idempotent. A core with a fake fetcher: no-op.
 */
void px_core_stop(struct px_core *core);

/*
 * Learns the size and mtime of every asset: from the catalog, else from
 * state (may be NULL), else by asking its sources (all assets in parallel,
 * bounded by cfg->probe_timeout_ms). Assets whose size cannot be learned are
 * left out, each with a log line saying why. fallback_mtime is used where no
 * mtime is known. Then builds the tree. Call once, before serving.
 */
enum px_status px_core_discover(struct px_core *core, struct px_state *state,
				int64_t fallback_mtime) PX_WUR;

/* After px_core_discover(): the tree, and per-asset size and mtime. */
const struct px_tree *px_core_tree(const struct px_core *core);
int64_t px_core_asset_size(const struct px_core *core, size_t asset);
int64_t px_core_asset_mtime(const struct px_core *core, size_t asset);
size_t px_core_listed(const struct px_core *core);
const struct px_catalog *px_core_catalog(const struct px_core *core);

/* The clock session TTLs and provider liveness go by (ms; default the
 * monotonic clock). For unit tests; set it before px_core_discover(). */
void px_core_set_clock(struct px_core *core, int64_t (*now)(void));

/*
 * The core's state as one JSON object (providers, sessions, read counters,
 * memory), for the status file. Returns a malloc'd string the caller
 * frees, or NULL when out of memory. Any thread.
 */
char *px_core_status_json(struct px_core *core);

/*
 * Adds a source to a listed plain asset while mounted: where is an
 * http(s) URL or an absolute path; provider names an existing provider, or
 * NULL for the URL's implicit one (host:port, made if new). Live sessions
 * of the asset take it as a standby once it is verified. On failure writes
 * "FIELD: what is wrong" into err: PX_ENOTFOUND (no such asset or
 * provider), PX_EINVAL (bad URL or path, no room), PX_EAGAIN (already a
 * source). Any thread.
 */
enum px_status px_core_add_source(struct px_core *core, const char *asset_id, const char *where,
				  const char *provider, char *err, size_t errlen) PX_WUR;

/*
 * Removes a source (its URL or path) from an asset: no new session or
 * cutover goes there; sessions reading it go on. PX_ENOTFOUND with err
 * naming the field when the asset or the source is unknown. Any thread.
 */
enum px_status px_core_remove_source(struct px_core *core, const char *asset_id,
				     const char *where, char *err, size_t errlen) PX_WUR;

/*
 * Applies a new, valid catalog while mounted (reload.c): new assets
 * appear, assets gone from it are no longer listed (open files read on),
 * sources of known assets are added and removed, providers' limits and
 * drain apply. Takes ownership of cat (kept until px_core_free). What
 * needs a remount (a known asset's new path, kind or size, a new
 * transcode) is left as it was and said in report, one line. PX_OK when
 * applied; else nothing visible changed. Any thread but a FUSE worker's.
 */
enum px_status px_core_reload(struct px_core *core, struct px_catalog *cat, char *report,
			      size_t len) PX_WUR;

/* Sets the catalog file px_core_reload_file() reads (borrowed). */
void px_core_set_catalog_path(struct px_core *core, const char *path);

/*
 * Reads the catalog file again (JSON, .strm directory or M3U) and applies
 * it with px_core_reload(). An unreadable or invalid catalog keeps the old
 * one: the error, naming the file, line and field, is in report, the log
 * and the status. Any thread but a FUSE worker's.
 */
enum px_status px_core_reload_file(struct px_core *core, char *report, size_t len) PX_WUR;

/* Called (after a reload swapped the tree) with the old and the new tree,
 * from the reloading thread: the fs front drops the kernel's cached
 * entries there. */
void px_core_on_reload(struct px_core *core,
		       void (*fn)(void *ctx, const struct px_tree *old, const struct px_tree *now),
		       void *ctx);

/* The transcode supervisor (transcode.h) serving PX_ASSET_TRANSCODE
 * assets, or NULL when the catalog has none. */
struct px_transcode *px_core_transcode(const struct px_core *core);

/*
 * The core's metrics in the Prometheus text exposition format 0.0.4
 * (metrics.c; names in docs/control.md). Returns a malloc'd string the
 * caller frees, or NULL when out of memory. Any thread.
 */
char *px_core_metrics_text(struct px_core *core);

/* Tells the read engine how far the kernel reads ahead of a reader on
 * this mount (the bdi's read_ahead_kb, in bytes; 0: unknown, taken as
 * 1 MiB). Reads that far ahead of a stream are the kernel's read-ahead,
 * not a seek. Any thread. */
void px_core_set_kernel_readahead(struct px_core *core, int64_t bytes);

/* Records one read's duration (microseconds, however it ended) in the
 * read-latency histogram. Any thread, lock-free. */
void px_core_note_read(struct px_core *core, int64_t us);

/*
 * Drains (drained 1) or resumes (0) the provider of that name: a drained
 * provider gets no new session; sessions on it go on. PX_ENOTFOUND when
 * no provider has the name. Idempotent. Any thread.
 */
enum px_status px_core_drain(struct px_core *core, const char *provider, int drained) PX_WUR;

#endif
