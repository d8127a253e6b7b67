/*
 * cslots.h - providers' connection slots across the hosts of a cluster
 * (store=): max_connections is the cluster's limit, and each host uses only
 * the slots it holds of it (cslots.c).
 */
#ifndef SEAMFS_CSLOTS_H
#define SEAMFS_CSLOTS_H

#include <stddef.h>
#include "context.h"
#include "px.h"

/* Starts the thread that gives back unused slots and shares this host's
 * holdings and sessions (cluster mode: a store and hosts in cluster.h).
 * PX_OK without a store (nothing to do). */
enum px_status px_cslots_start(struct px_core *core) PX_WUR;

/* Stops the thread and gives back every slot this host holds (bounded by
 * the store's timeouts). Idempotent; NULL-safe on a core without one. */
void px_cslots_stop(struct px_core *core);

/*
 * Asks the cluster for up to n more slots of provider prov; returns how
 * many this host got (0: the cluster is at its limit). When the store
 * does not answer, the provider gets this host's local share instead
 * (max / hosts, at least 1) and that is counted. No lock held; bounded by
 * the store's command timeout. Not from the fetch thread.
 */
int px_cslots_acquire(struct px_core *core, size_t prov, int n);

/* How many hosts the cluster has, as the heartbeat listed them (for the
 * local share while the store does not answer). Any thread. */
void px_cslots_set_hosts(struct px_core *core, int n);

/* Store calls made for slots: acquires and syncs (status, bench). */
void px_cslots_counts(struct px_core *core, uint64_t *acquires, uint64_t *syncs);

#endif
