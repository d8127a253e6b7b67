/*
 * retry.h - the one decision a read makes after a failed transfer, for a
 * stream and a direct read alike (retry.c). Internal to read/.
 */
#ifndef SEAMFS_RETRY_H
#define SEAMFS_RETRY_H

#include <stddef.h>
#include <stdint.h>

#include "px.h"

struct px_session;

/* One read's failures so far. PX_RETRY_INIT at the read's start. */
struct px_retry {
	int fails;          /* failures in a row without a new byte */
	int64_t mark;       /* where the last failure was: a later one past it
			     * made progress, and the budget starts afresh */
	int64_t cut_at;     /* where this read's last cutover moved, -1: none */
	int cuts_here;      /* cutovers at cut_at */
};
#define PX_RETRY_INIT { 0, -1, -1, 0 }

/*
 * Source `source` of the session failed under a read at pos, with st
 * (stalled: no byte came within stall_timeout; detail: the failure in
 * words). Logs it, marks a source that is gone (404/410) or of another
 * size dead for the asset, and decides:
 *  - PX_OK: read on at pos, at once from the standby that took over (a
 *    cutover checked on seam[0..nseam), the bytes just before pos), or
 *    after a backoff (50, 100, 200 ms ...) from the same source while the
 *    failure is worth retrying (transient, a stall, or every source failing
 *    as fast as we move) and the read has failed fewer than cfg->retries
 *    times in a row without a new byte;
 *  - otherwise the status the read fails with: st, or PX_ETIMEDOUT at the
 *    deadline. A backoff that would outlast the deadline is cut to half of
 *    the time left, so the read uses its whole budget and one last attempt
 *    still fits.
 * Failures no cutover cures (no slot, shutdown, no memory, the read's own
 * deadline) are returned at once. Call with no lock held: it sleeps.
 */
enum px_status px_retry_failed(struct px_retry *r, struct px_session *sess, size_t source,
			       int64_t pos, enum px_status st, int stalled, const char *detail,
			       const void *seam, size_t nseam, int64_t deadline,
			       const char *who) PX_WUR;

#endif
