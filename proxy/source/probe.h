/*
 * probe.h - discovery of assets' sizes from their sources (probe.c).
 */
#ifndef SEAMFS_PROBE_H
#define SEAMFS_PROBE_H

#include <stddef.h>
#include "context.h"
#include "state.h"

/*
 * Probes every asset i with need[i] set, in parallel, bounded by
 * cfg->probe_timeout_ms, and sets the sizes it finds (px_asset_rt(core, i)->size,
 * .mtime): the catalog's, or else the size a strict majority of the
 * sources that gave one agree on. Assets left without a size are logged,
 * each with why (an error naming the sizes seen when the sources
 * disagree). Does not list anything. Any one thread per asset at a time.
 */
void px_probe_assets(struct px_core *core, const unsigned char *need);

/* The key a size is remembered under for asset a's sources (state.h).
 * Returns 0, or -1 when out of memory. */
int px_probe_state_key(const struct px_asset *a, char key[PX_STATE_KEY_LEN]);

/*
 * One retry of size discovery: probes the assets left out for want of a
 * size (asset_rt.rediscover, not listed) and lists those it finds a size
 * for (a new tree, the fs front told through px_probe_tell), remembering
 * it in the state px_probe_retry_start was given. Takes reload_lock, not across the probes.
 * Returns how many it listed. The retry thread calls it; tests may.
 */
size_t px_probe_retry(struct px_core *core);

/* Makes the retry's state (core->retry) and the reload lock; PX_ENOMEM
 * without memory. With px_core_new; px_probe_retry_release frees it. */
enum px_status px_probe_retry_new(struct px_core *core) PX_WUR;

/* The reload lock (reload_lock in docs/architecture.md's table): one
 * reload's or size-discovery retry's publish at a time. Taken before
 * prov_lock and vf_lock, never inside them. */
void px_reload_lock(struct px_core *core);
void px_reload_unlock(struct px_core *core);

/* Who is told of a new tree (a reload's, a retry's): fn(ctx, old, now),
 * set once by the front after the core started (px_core_on_reload). */
void px_probe_on_reload(struct px_core *core, px_reload_fn fn, void *ctx);
/* Tells it, when set: reload_lock held. */
void px_probe_tell(struct px_core *core, const struct px_tree *old, const struct px_tree *now);

/* Starts the thread that calls px_probe_retry() 5 s after the mount, then
 * at doubling intervals (at most 5 min) while an asset stays out. state is
 * borrowed until px_probe_retry_stop() (may be NULL). Call once, after
 * px_core_discover's probes. */
void px_probe_retry_start(struct px_core *core, struct px_state *state);

/* Stops that thread (sets core->stopping) and waits for it; no-op when it
 * did not start. */
void px_probe_retry_stop(struct px_core *core);

/* Frees the trees the retries replaced. After px_probe_retry_stop(), when
 * no FUSE thread reads the tree any more. */
void px_probe_retry_release(struct px_core *core);

#endif
