/*
 * standby.h - verification of standby sources, prevalidation, and the
 * cutover of a session to a verified standby (standby.c).
 */
#ifndef SEAMFS_STANDBY_H
#define SEAMFS_STANDBY_H

#include <stdint.h>
#include <sys/uio.h>
#include "context.h"
#include "px.h"

struct px_session;

/* ---- standby.c: verification states, prevalidation, cutover */

enum px_status px_standby_init(struct px_core *core);  /* with px_core_new */
enum px_status px_standby_start(struct px_core *core); /* after discovery */
/* Verifier threads for a core without a real fetcher (the scenario
 * checker's; 0: none): before px_core_discover. */
void px_standby_set_workers(struct px_core *core, int n);
void px_standby_stop(struct px_core *core);            /* ends the workers */
void px_standby_release(struct px_core *core);

/* Bytes of the asset came from source: who served the asset is noted
 * (copies prefer that source) and the source's failures are forgotten.
 * Any thread; no lock, no I/O. */
void px_standby_served(struct px_core *core, size_t asset, size_t source);

/* At an asset's first open, before its session chooses a source: the
 * reference kept in the store and the rejections stored against it (a
 * source they reject gets no session; a stored match is not trusted). A file read, no request; once per
 * asset. Any thread that holds none of the core's locks. */
void px_standby_prime(struct px_core *core, size_t asset);

/* Starts prevalidation of the standbys of assets that have played for
 * standby_delay. The monitor thread, or a unit test. */
void px_standby_tick(struct px_core *core);

/*
 * The session's source `failed` failed under a read at off (why: the
 * trigger). Takes the next standby that proves identical (verified and the
 * seam check on seam[0..n), the bytes the old source gave just before off;
 * or verified now, before deadline) and moves the session to it: PX_OK.
 * PX_OK at once when another reader of the session already cut over.
 * PX_ENOSOURCE when none can take over. Never holds a lock across I/O.
 */
enum px_status px_cutover(struct px_session *s, size_t failed, int64_t off, enum px_status why,
			  const void *seam, size_t n, int64_t deadline);

/* A read of s failed with nothing left to cut over to: counted, logged
 * and shown as fallback_exhausted. */
void px_standby_exhausted(struct px_session *s, int64_t off, enum px_status why);


/*
 * The bytes [off, ...) in iov that source k of the asset is about to give
 * a reader, compared with the reference fingerprint's samples they cover
 * wholly, until one matched (or the source is verified): PX_EMISMATCH, and
 * the source rejected for the asset, when one differs: a wrong file of the
 * right length never reaches the reader. PX_OK otherwise, also when there
 * is no reference or no sample to compare. Any thread but the fetch thread.
 */
enum px_status px_standby_screen(struct px_core *core, size_t asset, size_t k, int64_t off,
				 const struct iovec *iov, int iovcnt);

/*
 * Like px_standby_screen, but every sample wholly in buf ([off,
 * off+len), fetched from source k just now) is compared with the asset's
 * reference, whatever k's own fingerprint already holds: for a source
 * whose earlier bytes were not its own live answer (a part kept on disk).
 * PX_EMISMATCH, and k rejected for the asset, when one differs; PX_OK
 * otherwise, also with no reference. Any thread but the fetch thread.
 */
enum px_status px_standby_check_live(struct px_core *core, size_t asset, size_t k, int64_t off,
				     const void *buf, size_t len);

const char *px_cutover_reason_name(enum px_status st);

/* What source k's last size probe saw of it: its ETag as sent ("" none)
 * and Last-Modified (-1 none). Returns 0, both unknown, when it was never
 * probed. Takes vf_lock; any thread that holds none of the core's locks. */
int px_standby_seen(struct px_core *core, size_t asset, size_t k, char etag[128],
		    int64_t *mtime);

/* ---- verdicts and references from outside the background verifier */

struct vf_fingerprint;
struct vf_verdict;

/*
 * Applies verdict v on source k of the asset, the way the verifier does
 * once it has checked the source (the same code): VF_MATCH makes it a
 * verified standby, VF_MISMATCH and VF_SIZE_MISMATCH reject it for good
 * (no session starts there, no cutover goes there), VF_INCONCLUSIVE counts
 * one more inconclusive check in a row (abandoned at the 5th). Sets the
 * source's reason to v->why, counts the verdict and logs it. Writes nothing
 * to the verifier's store: a stored verdict goes with the fingerprint it
 * came from. Does nothing when the asset's per-source states cannot be
 * made (out of memory). Takes vf_lock; any thread that holds none of the
 * core's locks.
 */
void px_standby_apply_verdict(struct px_core *core, size_t asset, size_t k,
			      const struct vf_verdict *v);

/*
 * Makes fp (copied; the caller keeps it) the asset's reference
 * fingerprint, as confirmed as one loaded from the verifier's store: the
 * first bytes sources give are screened against it and standbys verified
 * against it. A reference the asset has already stays, unless no second
 * source backed it (then fp replaces it); PX_OK either way, and also when
 * there was no memory for the copy (the asset goes on without one).
 * PX_EINVAL, nothing changed, when fp is not of the asset's size or not
 * complete. Takes vf_lock; any thread that holds none of the core's locks.
 */
enum px_status px_standby_set_reference(struct px_core *core, size_t asset,
					const struct vf_fingerprint *fp) PX_WUR;

/* ---- the status's copy (px_verify_stats) */

struct px_snap_source {
	char *source, *provider;
	const char *verification;  /* a static name: "dead", or its VS_* state's */
	char *why;                 /* the last verdict, in words; "" when none */
	int inconclusive;          /* inconclusive checks in a row */
};

/* An asset the status lists: listed, with more than one source. */
struct px_snap_asset {
	char *id, *path;
	int64_t size;
	char reference[17];        /* the reference fingerprint's id, "" when none */
	struct px_snap_source *sources;
	size_t nsources;
};

struct px_snap_cutover {
	uint64_t session;
	char *asset, *from, *to;   /* the asset's id, the sources as shown */
	int64_t offset, ms, when;  /* when: core clock, ms */
	enum px_status reason;
};

#define PX_SNAP_RECENT 8        /* cutovers the core remembers */

/* Verification and cutovers as the status shows them, copied under
 * vf_lock (px_verify_stats). Plain data the caller owns. */
struct px_verify_stats {
	uint64_t n_cutovers[PX_STATUS_COUNT]; /* by trigger */
	uint64_t n_verified[4];    /* match, mismatch, size_mismatch, inconclusive */
	uint64_t n_exhausted;
	char exhausted_why[300];
	struct px_snap_cutover recent[PX_SNAP_RECENT]; /* rows only: newest first */
	size_t nrecent;
	struct px_snap_asset *assets; /* rows only; else NULL */
	size_t nshown;
};

/*
 * Copies the verification and cutover counters into *out (zeroed by the
 * caller) and, with rows, the recent cutovers and the listed assets with
 * more than one source, with each source's state, under vf_lock taken
 * once. PX_ENOMEM when a copy failed: what was copied is in *out all the
 * same, for the caller to free (snapshot.c takes it). Any thread holding
 * none of the core's locks.
 */
enum px_status px_verify_stats(struct px_core *core, int rows,
			       struct px_verify_stats *out) PX_WUR;

#endif
