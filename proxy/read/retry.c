/*
 * retry.c - what a read does after a failed transfer.
 *
 * A read is served by an ordered list of tiers (session.c): a stream and
 * its parts (stream.c), the head/tail cache (cache.c), direct range
 * requests and preads. A tier whose transfer fails does not decide what
 * comes next: it reports the failure (PX_EFAILED, struct px_failed) and
 * the read takes the decision here, after the tiers, once, so a failure
 * means the same whichever tier met it, and one read's failures share one
 * budget. The order of remedies follows docs/design.md ("Cutover"): first
 * a standby proven identical takes over in place, at the same byte
 * (px_cutover, which checks the seam); when none can, the same source is
 * tried again with a growing backoff while the failure looks transient; a
 * read that keeps failing without a new byte, or that reaches its
 * deadline, fails with the cause, and the handle counts it
 * (fallback_exhausted) and marks the session failed so that a reopen
 * starts afresh.
 *
 * More cutovers of one read at the same byte than the asset has sources
 * mean every source fails as fast as the session moves (a dead network):
 * the next one counts as a failure and backs off like a retry, so a read
 * never spins between sources; until then each standby gets its turn.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "context.h"
#include "log.h"
#include "provider.h"
#include "retry.h"
#include "standby.h"

#define BACKOFF_BASE_MS 50
#define LAST_TRY_MS 10   /* less time than this left: no last attempt */

void px_failed_set(struct px_failed *fd, size_t source, int64_t pos, enum px_status why,
		   int stalled, const char *detail)
{
	snprintf(fd->detail, sizeof(fd->detail), "%s", detail ? detail : "");
	fd->f = (struct px_failure){ source, pos, why, stalled, fd->detail, fd->seam, 0 };
	fd->st = NULL;
	fd->part = 0;
	fd->token = 0;
	fd->done = 0;
	fd->next_tier = 0;
}

enum px_status px_retry_failed(struct px_retry *r, struct px_session *sess,
			       const struct px_failure *f, int64_t deadline, const char *who)
{
	struct px_core *core = sess->core;
	size_t asset = sess->asset, source = f->source;
	int64_t pos = f->pos;
	enum px_status st = f->why;
	int stalled = f->stalled;
	const char *detail = f->detail;

	if (st == PX_EBUSY || st == PX_ESHUTDOWN || st == PX_ENOMEM ||
	    (st == PX_ETIMEDOUT && !stalled))
		return st;
	if (pos > r->mark)
		r->fails = 0;   /* progress: the retry budget starts afresh */
	r->mark = pos;
	px_warn("read", "%s: %s: read at %lld failed: %s (%s)", who,
		px_cat(core)->assets[asset].sources[source].shown, (long long)pos,
		px_strerror(st), detail && detail[0] ? detail : px_strerror(st));
	if (st == PX_ENOTFOUND || st == PX_ESIZE)
		px_asset_rt(core, asset)->dead[source] = 1; /* for later sessions */
	int moved = px_cutover(sess, source, pos, stalled ? PX_ETIMEDOUT : st, f->seam, f->nseam,
			       deadline) == PX_OK;
	if (moved && r->cut_at != pos) {
		r->cut_at = pos;
		r->cuts_here = 0;
	}
	/* each standby gets its turn at the byte before a move counts as a
	 * failure: as many moves as the asset has sources */
	if (moved && ++r->cuts_here <= (int)px_cat(core)->assets[asset].nsources) {
		r->fails = 0;
		return PX_OK;
	}
	/* nothing can take over (the session's source again), or a move right
	 * after another at the same byte: a stall is load, not death */
	if ((!moved && !px_status_retryable(st) && !stalled) || r->fails >= core->cfg->retries)
		return st;
	int64_t wait = (int64_t)BACKOFF_BASE_MS << (r->fails < 6 ? r->fails : 6);
	int64_t left = deadline - px_now_ms();
	r->fails++;
	/* the read's whole budget is for getting its bytes: a backoff that
	 * would outlast it is cut to half of what is left, so that one last
	 * attempt still fits */
	if (left < 2 * LAST_TRY_MS)
		return PX_ETIMEDOUT;
	if (wait > left - LAST_TRY_MS)
		wait = left / 2;
	struct timespec ts = { wait / 1000, (wait % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return PX_OK;
}
