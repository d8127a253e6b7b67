/*
 * tcstore.h - a transcode's shared records in the store (cluster mode):
 * its lease (a Redis backend of struct px_lease_ops) and its playlist, the
 * list of committed segments, whose every change is checked against the
 * lease's generation in the same Lua script (docs/cluster.md, "Fencing").
 *
 * Keys, for asset ID (PREFIX from cluster=; the braces keep both in one
 * Redis Cluster slot):
 *   PREFIX:tc:{ID}:lease   hash: key, session, owner, gen, hb, released,
 *                          writer_pid (px_lease's fields)
 *   PREFIX:tc:{ID}:pl      hash: text (the playlist, playlist.h's format,
 *                          each entry with its generation), ver (bumped at
 *                          every change), gen (of the last change)
 *   PREFIX:tc:{ID}:want    hash: SEG@REQUESTER -> "LAST SETTLED MS", far
 *                          reads of other hosts for the lease's holder
 *                          (px_tcstore_want_put); the key expires ttl_ms
 *                          after the last want
 *
 * Generations: a claim stores expect + 1, except on a key that holds
 * nothing (never claimed, or the store lost it): then the store's clock in
 * ms, so that no generation given out before the loss comes back.
 * A renewal of a lease the store lost puts the holder's record back.
 */
#ifndef SEAMFS_TCSTORE_H
#define SEAMFS_TCSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "lease.h"
#include "px.h"
#include "kvstore.h"

/* The lease store on st (borrowed: it must outlive the lease store). Its
 * clock is the store's (px_store_now_ms). */
enum px_status px_lease_redis_new(struct px_store *st, struct px_lease_store **out) PX_WUR;

/* The stored playlist of asset id: *text (malloc'd, NUL-terminated, *len
 * bytes) and its version. PX_ENOTFOUND when none; store failures as
 * px_store_call's. */
enum px_status px_tcstore_pl_get(struct px_store *st, const char *id, char **text,
				 size_t *len, uint64_t *ver) PX_WUR;

/*
 * Replaces the playlist of id with text if the lease's generation is
 * still gen and the playlist's version still ver (0: none stored), in one
 * script. PX_OK (*newver the new version); PX_EFENCED: gen is not the
 * lease's (fenced: a takeover happened); PX_EEXIST: the version moved
 * (load again and redo the change); PX_ENOTFOUND: no lease is stored (the
 * store lost it; the holder renews, which puts it back, and tries again);
 * else the store did not answer.
 */
enum px_status px_tcstore_pl_put(struct px_store *st, const char *id, uint64_t gen,
				 uint64_t ver, const char *text, size_t len,
				 uint64_t *newver) PX_WUR;

/* One call for a host that follows another's writer: the playlist's
 * version (0: none) and the lease (l->gen 0: none). */
enum px_status px_tcstore_poll(struct px_store *st, const char *id, uint64_t *ver,
			       struct px_lease *l) PX_WUR;

/* A far read on a host that follows another's writer, for the writer's
 * host (docs/cluster.md "Far seeks across hosts"): the segment it waits
 * for, the read's last segment, whether its handle's reads settled there
 * (segmath.h's rule), the requester (its owner string) and, when taken,
 * the store's time of the want (ms). */
struct px_tc_want {
	uint32_t seg, last;
	int settled;
	int64_t at_ms;
	char from[128];
};

/* Leaves want w for the holder of id's lease, the key expiring ttl_ms
 * later. PX_ENOTFOUND: no live lease is stored (nobody to ask; a read
 * here may claim it); else as px_store_eval. */
enum px_status px_tcstore_want_put(struct px_store *st, const char *id,
				   const struct px_tc_want *w, int64_t ttl_ms) PX_WUR;

/* Takes (reads and removes, in one script) up to cap wants of id into
 * out (*n of them), if the lease's generation is still gen; none
 * otherwise: only the current holder serves wants. */
enum px_status px_tcstore_want_take(struct px_store *st, const char *id, uint64_t gen,
				    struct px_tc_want *out, size_t cap, size_t *n) PX_WUR;

#endif
