/*
 * place.h - cluster mode: which host runs a transcode's writer
 * (docs/cluster.md "Where a transcode is written").
 *
 * A writer that must start (a read here needs a segment nobody writes, or
 * a writer failed) is placed on the live host with the lowest load; ties
 * by host id. A host's load, in thousandths, is what its heartbeat
 * published (hosts.h): its writers weighted by their profile's cost
 * (px_place_cost), its CPU's 1-minute load average per CPU, and the cost
 * of the placements made on it since (placed: counted by the placement
 * itself, so a burst of opens spreads before any heartbeat shows it). A
 * host whose writers and pending placements reach its max_writers is not
 * chosen, nor one whose heartbeat is older than live_ms.
 *
 * The choice is one Lua script, atomic against every other host's: it
 * leaves the job in the chosen host's queue and a marker on the asset
 * that a concurrent placement of the same asset answers with the same
 * host. The chosen host takes its queue at every poll and starts the
 * writer; a requester whose host does not take it in time writes it
 * itself (start.c; the take: remote.c).
 *
 * Keys (PREFIX from cluster=):
 *   PREFIX:place:HOST      hash: asset id -> "FROM COST CRASHES AT_MS BY",
 *                          the jobs placed on HOST not taken yet; expires
 *                          hold_ms after the last placement
 *   PREFIX:tc:{ID}:place   string: the host the last placement of ID chose;
 *                          expires hold_ms later, removed when taken
 */
#ifndef SEAMFS_PLACE_H
#define SEAMFS_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include "catalog.h"
#include "kvstore.h"
#include "px.h"

#define PX_PLACE_HOST_MAX 64

/* The cost of one writer of asset a, in thousandths of a 720p encode's:
 * a remux 200; an encode by its output's pixels, (height / 720)^2, 250
 * to 4000 (the source's height, unknown: 1000). */
int64_t px_place_cost(const struct px_asset *a);

/* One placement asked for. */
struct px_place_req {
	const char *asset;       /* its id */
	const char *self;        /* this host's id */
	uint32_t from;           /* the segment the writer should start at */
	int64_t cost;            /* px_place_cost */
	int crashes;             /* failures in a row so far (a reassignment) */
	int not_self;            /* a reassignment: any other live host first */
	int64_t live_ms;         /* a host beat within this long is live */
	int64_t hold_ms;         /* how long the chosen host has to take it */
	int64_t orphan_ms;       /* a lease renewed within this long is live */
};

/*
 * Places req (one call). PX_OK with host: the chosen host's id (this
 * one's: start the writer here; another: it was asked), *fresh 0 when a
 * placement of the same asset made by any host within hold_ms chose it;
 * host "" when the asset's lease is live (its holder writes: follow it)
 * or no live host has a writer slot (start here, as without placement).
 * *gen: the lease's generation as the placement found it (0: none), so
 * that the requester tells the chosen host's claim from an older lease.
 * Store failures as px_store_eval's.
 */
enum px_status px_place_choose(struct px_store *st, const struct px_place_req *req,
			       char *host, size_t cap, int *fresh, uint64_t *gen) PX_WUR;

/* A job another host placed here. */
struct px_place_job {
	char asset[256];
	uint32_t from;
	int crashes;
	int64_t age_ms;          /* since it was placed, by the store's clock */
	char by[PX_PLACE_HOST_MAX + 1];
};

/* Takes (reads and removes, in one call) the jobs placed on host self,
 * up to cap into out (*n); the rest are dropped (their requesters write
 * them after hold_ms). Store failures as px_store_eval's. */
enum px_status px_place_take(struct px_store *st, const char *self, struct px_place_job *out,
			     size_t cap, size_t *n) PX_WUR;

#endif
