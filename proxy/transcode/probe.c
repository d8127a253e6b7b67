/*
 * probe.c - probes: short writer runs of the few segments a far read
 * needs, beside the job's main writer (docs/transcode.md "Seeks"): their
 * slots, their start, the reads waiting for them, their end.
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "transcode_i.h"

int tc_probe_slot_free(const struct px_transcode *tc)
{
	return tc->nwriters < tc->cfg->max_writers && tc->nqueue == 0 && !tc->stopping;
}

/* tc_start_probe; ahead: tc_probe_tail's. */
static enum px_status start_probe(struct px_transcode *tc, struct job *j, uint32_t from,
				  uint32_t until, const struct px_tcfile *by, int ahead)
{
	char shown[PATH_MAX];
	struct probe *p = NULL;

	for (int i = 0; i < PROBES_MAX && !p; i++)
		if (!j->probes[i].pid)
			p = &j->probes[i];
	if (!p || !tc_probe_slot_free(tc))
		return PX_EBUSY;
	/* under the current generation when held: a new one would fence the
	 * running writers of this job, which are ours */
	if (!j->have_lease) {
		int repaired;
		enum px_status hs = tc_hold_lease(tc, j);
		if (hs != PX_OK && tc->store && hs != PX_EINVAL) {
			j->remote = 1;
			pthread_cond_broadcast(&tc->cond);
			tc_wake(tc);
			return PX_EFENCED;
		}
		if (hs != PX_OK) {
			j->failed = 1;
			j->failed_ms = px_now_ms();
			pthread_cond_broadcast(&tc->cond);
			return PX_EFENCED;
		}
		/* a new generation starts with recovery, as a main writer's
		 * does: the last writer's entries are checked against their
		 * files and its leftovers go. Without it a probe that took
		 * the lease of a dead writer (another host's, issue 25) skipped
		 * that entry as listed, listed its own segments before it, and
		 * the read waited for a segment no writer would write */
		uint32_t first = tc_recover(tc, j, from, &repaired);
		pthread_cond_broadcast(&tc->cond);
		if (first > until)
			return PX_OK; /* from..until all trusted: nothing to write */
		from = first;
	}
	memset(p, 0, sizeof(*p));
	p->pidfd = p->outfd = -1;
	int via;
	struct tc_run run = { from, until, &p->pid, &p->outfd, &via, shown, sizeof(shown) };
	if (tc_spawn_run(tc, j, &run) != PX_OK) {
		p->pid = 0;
		return PX_EIO;
	}
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	p->from = from;
	p->until = until;
	p->started_ms = px_now_ms();
	p->by = by;
	p->ahead = ahead;
	j->nprobes++;
	j->nahead += ahead;
	tc->nprobes++;
	if (j->nprobes > j->nahead)
		tc_main_yield(j, 1);
	tc->nwriters++;
	if (from)
		px_info("transcode", "probe pid %d for asset %s started: segments %u..%u (warm-up "
			"%u)%s, input %s", (int)p->pid, j->a->id, from, until, from - 1,
			ahead ? ", the tail ahead of its read" : "", shown);
	else
		px_info("transcode", "probe pid %d for asset %s started: segments %u..%u, input %s",
			(int)p->pid, j->a->id, from, until, shown);
	tc_wake(tc);
	return PX_OK;
}

enum px_status tc_start_probe(struct px_transcode *tc, struct job *j, uint32_t from,
			      uint32_t until, const struct px_tcfile *by)
{
	return start_probe(tc, j, from, until, by, 0);
}

void tc_probe_tail(struct px_transcode *tc, struct job *j, uint32_t k)
{
	uint32_t last = j->plan.nseg - 1;
	if (!tc->cfg->tail_ahead)
		return;
	uint32_t from = seg_at(j, j->plan.size > PX_DURATION_READ
				  ? j->plan.size - PX_DURATION_READ : 0);
	while (from < last && j->ok[from])
		from++;
	if (!j->pid || j->ok[last] || !tc_probe_slot_free(tc) ||
	    (int64_t)from <= (int64_t)k + tc->cfg->seek_restart_segments + 2)
		return;
	for (uint32_t s = from; s <= last; s++)
		if (tc_probe_covers(j, s))
			return;
	(void)start_probe(tc, j, from, last, NULL, 1); /* a read asks again if it failed */
}

uint32_t tc_probe_until(const struct job *j, uint32_t k, uint32_t read_last)
{
	uint32_t stop_at = UINT32_MAX;
	if (j->pid && j->from > k)
		stop_at = j->from;
	for (int q = 0; q < PROBES_MAX; q++)
		if (j->probes[q].pid && j->probes[q].from > k && j->probes[q].from < stop_at)
			stop_at = j->probes[q].from;
	return px_seek_probe_until(k, read_last, j->plan.nseg, j->ok, stop_at);
}

int tc_probe_slot_of(const struct job *j, uint32_t k)
{
	for (int q = 0; q < PROBES_MAX; q++)
		if (j->probes[q].pid && k >= j->probes[q].from && k <= j->probes[q].until)
			return q;
	return -1;
}

void tc_probe_wait_set(struct job *j, int slot, struct probe_wait *w)
{
	if (w->slot >= 0 && j->probes[w->slot].pid == w->pid && j->probes[w->slot].waiting)
		j->probes[w->slot].waiting--;
	w->slot = slot;
	w->pid = slot >= 0 ? j->probes[slot].pid : 0;
	if (slot >= 0)
		j->probes[slot].waiting++;
}

void tc_cancel_probes(struct job *j, const struct px_tcfile *f, uint32_t first,
		      uint32_t last, int gone)
{
	for (int q = 0; q < PROBES_MAX; q++) {
		struct probe *p = &j->probes[q];
		if (!p->pid || p->by != f || p->waiting || p->cancelled || p->listed)
			continue;
		if (!gone && first <= p->until && last >= p->from)
			continue;
		p->cancelled = 1;
		kill(p->pid, SIGKILL);
		if (gone)
			px_info("transcode", "asset %s: cancelling probe pid %d (segments %u..%u): "
				"its reader has exited", j->a->id, (int)p->pid, p->from, p->until);
		else
			px_info("transcode", "asset %s: cancelling probe pid %d (segments %u..%u): "
				"its reader reads segments %u..%u now", j->a->id, (int)p->pid,
				p->from, p->until, first, last);
	}
}

int tc_probing_for(const struct job *j, const struct px_tcfile *f)
{
	for (int q = 0; q < PROBES_MAX; q++)
		if (j->probes[q].pid && j->probes[q].by == f && !j->probes[q].cancelled)
			return 1;
	return 0;
}

void tc_probe_output(struct px_transcode *tc, struct job *j, struct probe *p)
{
	ssize_t r = read(p->outfd, p->out + p->outlen, sizeof(p->out) - 1 - p->outlen);
	if (r <= 0) {
		/* end of output: the death comes through the pidfd (or here) */
		close(p->outfd);
		p->outfd = -1;
		return;
	}
	p->outlen += (size_t)r;
	p->out[p->outlen] = '\0';
	char *line = p->out, *nl;
	int changed = 0;
	while ((nl = strchr(line, '\n'))) {
		unsigned k;
		*nl = '\0';
		changed |= sscanf(line, "committed %u", &k) == 1;
		p->listed |= changed;
		if (strncmp(line, "link ", 5) == 0)
			j->work_links++; /* the probe logged it */
		line = nl + 1;
	}
	p->outlen = strlen(line);
	memmove(p->out, line, p->outlen + 1);
	if (p->outlen == sizeof(p->out) - 1)
		p->outlen = 0;
	if (changed)
		tc_refresh(tc, j, 0);
}

void tc_probe_ended(struct px_transcode *tc, struct job *j, struct probe *p, int status)
{
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (p->pidfd >= 0)
		close(p->pidfd);
	if (p->outfd >= 0)
		close(p->outfd);
	if (code == 0)
		px_info("transcode", "probe pid %d of asset %s done: segments %u..%u in %lld ms",
			(int)p->pid, j->a->id, p->from, p->until,
			(long long)(px_now_ms() - p->started_ms));
	else if (p->cancelled)
		px_info("transcode", "probe pid %d of asset %s cancelled after %lld ms; segments "
			"%u..%u not written", (int)p->pid, j->a->id,
			(long long)(px_now_ms() - p->started_ms), p->from, p->until);
	else if (code > 0)
		px_warn("transcode", "probe pid %d of asset %s failed (exit %d); segments %u..%u "
			"not written", (int)p->pid, j->a->id, code, p->from, p->until);
	else
		px_warn("transcode", "probe pid %d of asset %s died (signal %d); segments %u..%u "
			"not written", (int)p->pid, j->a->id, WTERMSIG(status), p->from, p->until);
	if (code == 3 && tc->store && !j->pid) {
		j->have_lease = 0; /* fenced: another host holds it now */
		j->remote = 1;
	}
	j->nahead -= p->ahead;
	memset(p, 0, sizeof(*p));
	p->pidfd = p->outfd = -1;
	j->nprobes--;
	tc->nprobes--;
	if (j->nprobes == j->nahead)
		tc_main_yield(j, 0);
	tc->nwriters--;
	tc_refresh(tc, j, 0);
	tc_drop_lease(tc, j);
	tc_run_queue(tc);
	pthread_cond_broadcast(&tc->cond);
}
