/*
 * start.c - starting a job's main writer: where (placement on another
 * host in cluster mode, place.h), its lease and recovery, its spawn; and
 * the FIFO queue of jobs waiting for a writer slot.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "place.h"
#include "transcode_i.h"

int64_t tc_place_hold_ms(const struct px_transcode *tc)
{
	return 4 * poll_ms(tc) + PX_STORE_COMMAND_MS;
}

/*
 * Cluster mode, placement=least-loaded: where j's main writer, due to
 * start at from, runs (place.h). 1: not here, or not now (another host
 * was asked, and reads here wait for its lease as for any other host's
 * writer, until the hold ends: place_wait; or the job changed while the
 * lock was let go). 0: start it here. A failed writer's restart goes to
 * another host first (its lease let go for that host to claim); a seek
 * moves the writer where it runs. Under tc->lock, which it lets go
 * around the store's call.
 */
static int placed_away(struct px_transcode *tc, struct job *j, uint32_t from,
		       enum start_why why)
{
	char host[PX_PLACE_HOST_MAX + 1];
	int fresh;
	uint64_t gen;
	if (!tc->store || tc->cfg->placement_local || why == START_SEEK || j->nprobes)
		return 0;
	if (j->place_here) {
		j->place_here = 0;
		return 0;
	}
	struct px_place_req req = {
		.asset = j->a->id, .self = tc->host, .from = from, .cost = px_place_cost(j->a),
		.crashes = j->crashes, .not_self = why == START_RETRY,
		.live_ms = 2 * tc->cfg->heartbeat_ms, .hold_ms = tc_place_hold_ms(tc),
		.orphan_ms = tc->orphan_ms };
	pthread_mutex_unlock(&tc->lock);
	enum px_status st = px_place_choose(tc->store, &req, host, sizeof(host), &fresh, &gen);
	pthread_mutex_lock(&tc->lock);
	if (j->pid || j->queued || j->nprobes || tc->stopping)
		return 1;
	if (st != PX_OK || !host[0] || strcmp(host, tc->host) == 0)
		return 0;
	if (j->have_lease)
		tc_drop_lease(tc, j); /* a failed writer's: for that host to claim */
	j->remote = 1;
	snprintf(j->remote_owner, sizeof(j->remote_owner), "%s", host);
	snprintf(j->place_host, sizeof(j->place_host), "%s", host);
	j->place_gen = gen;
	j->place_until = j->nopen > 0 ? px_now_ms() + req.hold_ms : 0;
	j->placed_away += fresh;
	px_info("transcode", "asset %s: writer placed on host %s%s (segment %u on)%s", j->a->id,
		host, fresh ? ", the least loaded" : " by another host a moment ago", from,
		why == START_RETRY ? " after its writer here failed" : "");
	pthread_cond_broadcast(&tc->cond);
	return 1;
}

void tc_start_writer(struct px_transcode *tc, struct job *j, uint32_t from,
		     enum start_why why)
{
	char shown[PATH_MAX];
	int repaired;

	if (j->pid || tc->stopping)
		return;
	if (j->queued) {
		j->queued_from = from;
		return;
	}
	if (placed_away(tc, j, from, why))
		return;
	if (tc->nwriters >= tc->cfg->max_writers) {
		size_t *q = realloc(tc->queue, (tc->nqueue + 1) * sizeof(*q));
		if (!q)
			return;
		tc->queue = q;
		tc->queue[tc->nqueue++] = j->asset;
		j->queued = 1;
		j->queued_from = from;
		j->queued_why = why;
		j->place_here = 1; /* placed already */
		px_info("transcode", "asset %s: %d writers running; waiting in line (%zu)",
			j->a->id, tc->nwriters, tc->nqueue);
		return;
	}
	/* a new generation fences any writer of an older one; not while our
	 * own probes run under the current one (they would be fenced too) */
	if (!(j->have_lease && j->nprobes)) {
		enum px_status hs = tc_hold_lease(tc, j);
		if (hs != PX_OK && tc->store && hs != PX_EINVAL) {
			/* another host writes it (or the store cannot say): reads
			 * wait, the supervisor follows the store */
			j->remote = 1;
			pthread_cond_broadcast(&tc->cond);
			tc_wake(tc);
			return;
		}
		if (hs != PX_OK) {
			j->failed = 1;
			pthread_cond_broadcast(&tc->cond);
			return;
		}
	}
	from = tc_recover(tc, j, from, &repaired);
	/* a restart after a failure is a recovery, and so is a start that
	 * found a dead writer's leftovers; a seek is not (j->seeks) */
	if (why == START_RETRY || (why == START_READ && repaired))
		j->recoveries++;
	if (from >= j->plan.nseg) {
		/* everything from there on is already trusted */
		pthread_cond_broadcast(&tc->cond);
		return;
	}
	struct tc_run run = { from, -1, &j->pid, &j->outfd, &j->via_feed, shown, sizeof(shown) };
	if (tc_spawn_run(tc, j, &run) != PX_OK) {
		j->pid = 0;
		j->failed = 1;
		pthread_cond_broadcast(&tc->cond);
		return;
	}
	j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd < 0)
		px_warn("transcode", "pidfd_open: %s; writer deaths seen at its pipe's end",
			strerror(errno));
	j->yielded = 0;
	if (j->nprobes > j->nahead)
		tc_main_yield(j, 1);
	j->from = from;
	j->edge = from;
	j->failed = 0;
	j->restart_at = -1;
	j->retry_at = 0;
	j->outlen = 0;
	j->starts++;
	tc->nwriters++;
	if (from)
		px_info("transcode", "writer pid %d started: asset %s session %s, segments %u..%u "
			"(warm-up %u), input %s", (int)j->pid, j->a->id, j->lease.session, from,
			j->plan.nseg - 1, from - 1, shown);
	else
		px_info("transcode", "writer pid %d started: asset %s session %s, segments 0..%u, "
			"input %s", (int)j->pid, j->a->id, j->lease.session, j->plan.nseg - 1,
			shown);
	tc_wake(tc);
}

void tc_run_queue(struct px_transcode *tc)
{
	while (tc->nqueue && tc->nwriters < tc->cfg->max_writers && !tc->stopping) {
		struct job *j = &tc->jobs[tc->queue[0]];
		memmove(tc->queue, tc->queue + 1, (tc->nqueue - 1) * sizeof(*tc->queue));
		tc->nqueue--;
		j->queued = 0;
		tc_start_writer(tc, j, j->queued_from, j->queued_why);
	}
}
