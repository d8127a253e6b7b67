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
 * The core is built here; what it serves lives in its layers' headers:
 * reads in session.h (read/), sources added at run time in sources.h and
 * drains in provider.h (source/), reloads in reload.h, the status in
 * report.h and the metrics in metrics.h (control/). docs/architecture.md
 * maps them.
 */

/*
 * Makes a core. cfg and cat are borrowed until px_core_free(). ops NULL:
 * start a real fetch thread; otherwise use ops (a fake in tests).
 */
enum px_status px_core_new(const struct px_config *cfg, const struct px_catalog *cat,
			   const struct px_fetch_ops *ops, struct px_core **out) PX_WUR;

/*
 * The same in cluster mode (docs/cluster.md): store and hosts (borrowed
 * until px_core_free; the hosts' heartbeat is started here, reporting the
 * core's sessions and writers) are shared with the cluster's other
 * daemons. NULL store: px_core_new.
 */
struct px_store;
struct px_hosts;
enum px_status px_core_new_cluster(const struct px_config *cfg, const struct px_catalog *cat,
				   const struct px_fetch_ops *ops, struct px_store *store,
				   struct px_hosts *hosts, struct px_core **out) PX_WUR;
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

/* Sets what status and metrics say of the serving process; once, before
 * the mount serves (read without a lock after). */
void px_core_set_worker(struct px_core *core, const struct px_worker_info *w);

/* Gives the core the cluster's shared secret (taken: freed, wiped, with
 * the core): peers' copies are read with it (copies/peers.c). Before
 * px_core_discover(). */
void px_core_set_peer_secret(struct px_core *core, char *secret);

/* Sets the catalog file px_reload_file() (reload.h) reads (borrowed). */
void px_core_set_catalog_path(struct px_core *core, const char *path);

/* Called (after a reload swapped the tree) with the old and the new tree,
 * from the reloading thread: the fs front drops the kernel's cached
 * entries there. */
void px_core_on_reload(struct px_core *core,
		       void (*fn)(void *ctx, const struct px_tree *old, const struct px_tree *now),
		       void *ctx);

/*
 * From now on transcode writers read their input from this core's read
 * path, fed over a socket (transcode/feed.h), not through the mount: the
 * same sources, balancing and cutover as a player's, and a running writer
 * does not keep the mount busy. Call once the daemon serves reads. No-op
 * without transcodes. Any thread.
 */
void px_core_feed_writers(struct px_core *core);

/* The transcode supervisor (transcode.h) serving PX_ASSET_TRANSCODE
 * assets, or NULL when the catalog has none. */
struct px_transcode *px_core_transcode(const struct px_core *core);

#endif
