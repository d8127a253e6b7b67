/*
 * retry.h - the one decision a read makes after a failed transfer, taken
 * after its tiers for a stream, a part, a cache fill and a direct read
 * alike (retry.c), and how a tier reports the failure. Internal to read/.
 */
#ifndef SEAMFS_RETRY_H
#define SEAMFS_RETRY_H

#include <stddef.h>
#include <stdint.h>

#include "px.h"

struct px_session;
struct px_stream;

/* One read's failures so far. PX_RETRY_INIT at the read's start. */
struct px_retry {
	int fails;          /* failures in a row without a new byte */
	int64_t mark;       /* where the last failure was: a later one past it
			     * made progress, and the budget starts afresh */
	int64_t cut_at;     /* where this read's last cutover moved, -1: none */
	int cuts_here;      /* cutovers at cut_at */
};
#define PX_RETRY_INIT { 0, -1, -1, 0 }

/* A transfer's failure under a read: which source, where, and why. */
struct px_failure {
	size_t source;       /* the source that failed */
	int64_t pos;         /* the first byte the read still needs */
	enum px_status why;
	int stalled;         /* no byte came within stall_timeout */
	const char *detail;  /* the failure in words, or NULL */
	const void *seam;    /* the bytes just before pos (a cutover's check) */
	size_t nseam;
};

/*
 * A tier's report of the failure that stopped it (it returns PX_EFAILED),
 * for the decision after the tiers (session.c's serve_span): the failure,
 * with room for its words and seam, and what the tier needs after it.
 */
struct px_failed {
	struct px_failure f;       /* f.detail and f.seam point into this */
	char detail[200];
	unsigned char seam[4096];
	size_t done;               /* the span's bytes already in place */
	int next_tier;             /* 1: after the decision the next tier
				    * serves (a stalled head or tail fill) */
	struct px_stream *st;      /* the stream that failed, or NULL: then
				    * px_stream_decided() follows the decision */
	int part;                  /* the failed transfer is a part of st's */
	uint64_t token;            /* st's generation, or the part's id */
};

/* Fills fd's failure (its detail copied, no seam yet, nothing else). */
void px_failed_set(struct px_failed *fd, size_t source, int64_t pos, enum px_status why,
		   int stalled, const char *detail);

/*
 * Source f->source of the session failed under a read at f->pos, with
 * f->why. Logs it, marks a source that is gone (404/410) or of another
 * size dead for the asset, and decides:
 *  - PX_OK: read on at pos, at once from the standby that took over (a
 *    cutover checked on the seam bytes), or after a backoff (50, 100,
 *    200 ms ...) from the same source while the failure is worth retrying
 *    (transient, a stall, or every source failing as fast as we move) and
 *    the read has failed fewer than cfg->retries times in a row without a
 *    new byte;
 *  - otherwise the status the read fails with: why, or PX_ETIMEDOUT at the
 *    deadline. A backoff that would outlast the deadline is cut to half of
 *    the time left, so the read uses its whole budget and one last attempt
 *    still fits.
 * Failures no cutover cures (no slot, shutdown, no memory, the read's own
 * deadline) are returned at once. Call with no lock held: it sleeps.
 */
enum px_status px_retry_failed(struct px_retry *r, struct px_session *sess,
			       const struct px_failure *f, int64_t deadline,
			       const char *who) PX_WUR;

#endif
