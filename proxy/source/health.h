/*
 * health.h - each source's standing for an asset (health.c): its verification
 * state, its recent failures and their backoff, its reason in words.
 * Providers, probes, sources and the standby verifier all read it.
 */
#ifndef SEAMFS_HEALTH_H
#define SEAMFS_HEALTH_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>
#include "px.h"

struct px_core;
struct vf_fingerprint;
struct vf_seen;

/* A source's verification state (standby.c), under vf_lock. */
enum { VS_UNKNOWN, VS_VERIFYING, VS_VERIFIED, VS_REJECTED, VS_ABANDONED };
/* What px_source_open found in a copy's place (src_rt.in_way). */
enum { PX_IN_WAY_NONE, PX_IN_WAY_LINK, PX_IN_WAY_FOREIGN };

struct src_rt {
	int state;                 /* VS_* */
	/* a copy (its px_source names a storage; px_sources_add_copy sets
	 * these under vf_lock before it serves): the file system of its
	 * storage, and the file it was made or found as; px_source_open
	 * opens only that file, beneath the storage */
	unsigned long long copy_sdev, copy_dev, copy_ino;
	_Atomic int in_way;        /* px_source_open found the copy replaced:
				    * PX_IN_WAY_LINK or _FOREIGN; the copies
				    * thread drops it (copies/stale.c) */
	int inconclusive;          /* inconclusive checks in a row */
	int64_t checked;           /* core clock of the last check */
	char *why;                 /* the last verdict, in words; NULL: none
				    * (px_src_why; under vf_lock once threads run) */
	/* the source's own recent failures (px_source_failed), read without
	 * the lock: until bad_until (core clock) a failed source goes last in
	 * every choice, and new sessions avoid it while another can serve */
	_Atomic int64_t bad_until;
	_Atomic int nbad;          /* failures in a row, for the backoff */
	_Atomic int misanswered;   /* answered with something not the asset when
				    * its size was asked (px_source_misanswered),
				    * and served nothing since */
	int64_t abandoned_at;      /* VS_ABANDONED since (core clock) */
	_Atomic int screened;      /* verified: its sweep compared every sample,
				    * the bytes it serves need not be */
	int abandons;              /* times abandoned, for the retry backoff */
	/* the source's own sampled fingerprint as far as known (ownprint.c):
	 * hashed from the bytes it serves, fetched early for a playback,
	 * filled by sweeps; what a cutover from it is judged against. NULL
	 * until its first sample; under vf_lock */
	struct vf_fingerprint *own;
	_Atomic int own_full;      /* own is whole: the read path skips it */
	int own_busy;              /* an early fetch of its samples is queued */
	int own_tries;             /* early fetches that left it incomplete */
	int64_t own_retry_at;      /* core clock: no early fetch before */
	struct vf_seen *seen;      /* what its last size probe saw (size, mtime,
				    * ETag), the key of its stored record; NULL
				    * until probed; under vf_lock */
	int wrong_size;            /* rejected for its size: not counted in a
				    * majority */
	int removed;               /* taken out (the control API, a reload):
				    * no longer a source of the asset, only
				    * an add or a reload brings it back */
};

/* vf_lock (docs/architecture.md's table), in standby.c's px_verify:
 * sources' verification states, references, own fingerprints, the
 * verification counters. Taken after reload_lock and prov_lock, never
 * across I/O. */
void px_vf_lock(struct px_core *core);
void px_vf_unlock(struct px_core *core);

/*
 * Source k of the asset failed on its own account (why, detail: a stall,
 * a reset, an answer that is not the asset): until a backoff passes (5 s,
 * doubling with each failure in a row, at most 2 min) it goes last among
 * cutover candidates and new sessions avoid it while another source can
 * serve. Any thread; takes no lock.
 */
void px_source_failed(struct px_core *core, size_t asset, size_t k, enum px_status why,
		      const char *detail);
/*
 * Source k answered with something that is not the asset (an HTML page,
 * gzip) when its size was discovered: it keeps detail as its reason (the
 * status's source "why") and goes last in every choice, new sessions
 * avoiding it while another source can serve, until it serves bytes
 * (px_source_good), not only for the backoff of px_source_failed. Any
 * thread; takes vf_lock.
 */
void px_source_misanswered(struct px_core *core, size_t asset, size_t k, enum px_status why,
			   const char *detail);
/* Source k served bytes: its failures are forgotten. */
void px_source_good(struct px_core *core, size_t asset, size_t k);
/* Whether source k failed within its backoff, at core clock now. */
int px_source_bad(const struct px_core *core, size_t asset, size_t k, int64_t now);

/* Whether source k was rejected for the asset (another size, a sample
 * that differs): no session starts there, no cutover goes there. Any
 * thread; takes no lock (a verdict is a single store). */
int px_source_rejected(const struct px_core *core, size_t asset, size_t k);

/* Whether sources a and b of the asset give the same bytes as far as the
 * verifier knows: the same source, or both verified against the asset's
 * reference. Bytes of one may be served to a session reading the other
 * (the head and tail cache). Any thread; takes no lock. */
int px_source_identical(const struct px_core *core, size_t asset, size_t a, size_t b);

/* The asset's per-source states, made on first need (published
 * atomically: readers that find NULL take every source as unverified and
 * never failed). NULL only when out of memory. Any thread. */
struct src_rt *px_src_ensure(struct px_core *core, size_t asset);

/* Sets a source's reason in words (copied; NULL or "" clears it). vf_lock
 * held, or no other thread yet. */
void px_src_why(struct src_rt *sr, const char *why);

/* A source's reason in words, "" when none. */
static inline const char *px_src_why_of(const struct src_rt *sr)
{
	return sr->why ? sr->why : "";
}

const char *px_standby_state_name(int state);

#endif
