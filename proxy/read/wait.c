/*
 * wait.c - a reader waiting for a transfer's bytes.
 *
 * A read waits for its bytes on a condition variable that the fetch
 * thread's callback signals once they are in. It gives up at its deadline
 * (read_timeout from the read's start) and, sooner, when the transfer
 * stalls: no progress, bytes at stall_min_rate, for stall_timeout (the
 * progress clock of clock.h), which a standby may cure. Every clock here
 * is the monotonic one: the condition variables wait on it (px_cond_init_
 * mono), the deadline and the stall are px_now_ms(). The callers (direct
 * reads in session.c, fills in cache.c, streams in stream.c) each look for
 * their own bytes; the rule of when to stop waiting is written once here,
 * and so is the cancel of a transfer a reader gives up on.
 */
#include <errno.h>
#include <time.h>

#include "clock.h"
#include "context.h"
#include "wait.h"

/* Whether the watched transfer has stalled by now. */
static int stalled(const struct px_wait *w, const _Atomic int64_t *progress, int64_t now)
{
	return progress && now >= px_progress_stall_at(atomic_load(progress), w->stall_ms);
}

enum px_wait_outcome px_wait_bytes(const struct px_wait *w, const int *ended,
				   const _Atomic int64_t *progress)
{
	if (ended && *ended)
		return PX_WAIT_ENDED;
	int64_t now = px_now_ms(), until = w->deadline;
	if (now >= w->deadline)
		return PX_WAIT_DEADLINE;
	if (stalled(w, progress, now))
		return PX_WAIT_STALLED;
	if (progress) {
		int64_t stall_at = px_progress_stall_at(atomic_load(progress), w->stall_ms);
		if (stall_at < until)
			until = stall_at;
	}
	struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
	int rc = pthread_cond_timedwait(w->cond, w->lock, &ts);
	if (ended && *ended)
		return PX_WAIT_ENDED;
	if (rc != ETIMEDOUT)
		return PX_WAIT_WOKEN;
	now = px_now_ms();
	if (now >= w->deadline)
		return PX_WAIT_DEADLINE;
	return stalled(w, progress, now) ? PX_WAIT_STALLED : PX_WAIT_WOKEN;
}

void px_wait_cancel(struct px_core *core, pthread_mutex_t *lock, uint64_t id)
{
	if (!id)
		return;
	pthread_mutex_unlock(lock);
	core->fetch.ops.cancel(core->fetch.ops.impl, id);
	pthread_mutex_lock(lock);
}
