/*
 * job.c - the copy jobs (docs/copies.md, "Placement" and "The copy").
 *
 * An asset that wants N copies ("copies", else the copies setting) and
 * has fewer that serve (here, and on the live hosts' disks in cluster
 * mode) gets a job; placement (place.c) gives it a storage or a reason to
 * wait, which costs no attempt. One job runs at a time, on the copies
 * thread (copy.c makes the copy); a job that finds something in its way
 * waits and looks again every IN_WAY_RETRY_MS; a failed attempt is made
 * again from scratch after 1 s, doubling, at most 60 s.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "copies_i.h"
#include "log.h"

/* A reason the job found itself (a claim, something in its way): it
 * stays until the job gets past it, whatever placement says. */
static int sticky_wait(enum px_copy_wait w)
{
	return w == PX_WAIT_OTHER_HOST || w == PX_WAIT_STORE_DOWN || w == PX_WAIT_FOREIGN ||
	       w == PX_WAIT_LINK;
}

/* Job j found something in its way on storage si (was: its reason
 * before): it waits, reported once per reason. cp->lock held. */
static void job_in_way(struct px_copies *cp, struct job *j, size_t si, enum px_copy_wait was,
		       enum px_copy_wait w, const char *why)
{
	if (w != was) {
		if (w != PX_WAIT_NOT_READY)
			atomic_fetch_add(&cp->n_in_way, 1);
		px_warn("copies", "asset %s: copy to storage %s waits: %s (%s)",
			px_cat(cp->core)->assets[j->asset].id, cp->st[si].name, px_copy_wait_name(w),
			why);
	}
	j->wait = w;
	j->state = JOB_WAITING;
	j->claim_at = px_now_ms() + IN_WAY_RETRY_MS;
}

long cp_jobs_plan(struct px_copies *cp, size_t *si_out)
{
	struct px_core *core = cp->core;
	long run = -1;
	size_t nassets = px_cat(core)->nassets;
	size_t room = cp->nst + 1 + (cp_clustered(cp) ? PX_HOSTS_MAX * PEER_STORAGES_MAX : 0);
	struct px_place_in *in = calloc(room, sizeof(*in));
	long *own = calloc(room, sizeof(*own));
	const char **host = calloc(room, sizeof(*host));
	if (!in || !own || !host) {
		free(in);
		free(own);
		free(host);
		return -1;
	}
	int64_t now = px_now_ms();
	for (size_t a = 0; a < nassets; a++) {
		const struct px_asset *as = &px_cat(core)->assets[a];
		if (as->kind != PX_ASSET_PLAIN || !px_asset_rt(core, a)->listed)
			continue;
		int want = cp_want_copies(cp, a), have = cp_copies_held(cp, a);
		long ji = cp_find_job(cp, a);
		if (have >= want) {
			if (ji >= 0 && cp->jobs[ji].state != JOB_COPYING)
				cp->jobs[ji] = cp->jobs[--cp->njobs];
			continue;
		}
		if (ji < 0) {
			if (cp_grow((void **)&cp->jobs, &cp->capjobs, cp->njobs, sizeof(*cp->jobs)))
				continue;
			ji = (long)cp->njobs++;
			memset(&cp->jobs[ji], 0, sizeof(cp->jobs[ji]));
			cp->jobs[ji].asset = a;
			cp->jobs[ji].total = px_asset_rt(core, a)->size;
		}
		struct job *j = &cp->jobs[ji];
		if (j->state == JOB_COPYING)
			continue;
		size_t pick = 0;
		enum px_copy_wait w = cp_place_job(cp, a, j, in, own, host, &pick);
		if (w == PX_WAIT_NONE && j->state == JOB_WAITING && now < j->claim_at)
			continue; /* the claim is asked again later (its reason stays) */
		if (w != j->wait && w != PX_WAIT_NONE)
			px_info("copies", "asset %s: copy waits: %s%s%s%s", as->id,
				px_copy_wait_name(w), j->host[0] ? " (host " : "", j->host,
				j->host[0] ? ", the freest disk)" : "");
		if (w != PX_WAIT_NONE || !sticky_wait(j->wait))
			j->wait = w; /* (a claim's reason stays until the claim is had) */
		if (w != PX_WAIT_NONE) {
			j->state = JOB_WAITING;
			continue;
		}
		if (j->state == JOB_BACKOFF && now < j->retry_at)
			continue;
		j->state = JOB_WAITING;
		if (run < 0) {
			run = ji;
			*si_out = pick;
		}
	}
	free(in);
	free(own);
	free(host);
	return run;
}

/* Job j's attempt on storage si failed (why): again from scratch after
 * BACKOFF_FIRST_MS, doubling, at most BACKOFF_MAX_MS. cp->lock held. */
static void job_failed(struct px_copies *cp, struct job *j, size_t si, const char *why)
{
	atomic_fetch_add(&cp->n_failed, 1);
	j->attempts++;
	int64_t back = BACKOFF_FIRST_MS;
	for (int i = 1; i < j->attempts && back < BACKOFF_MAX_MS; i++)
		back *= 2;
	if (back > BACKOFF_MAX_MS)
		back = BACKOFF_MAX_MS;
	j->retry_at = px_now_ms() + back;
	j->state = JOB_BACKOFF;
	snprintf(j->error, sizeof(j->error), "%s", why);
	px_warn("copies", "asset %s: copy to storage %s failed (attempt %d): %s; "
		"again from scratch in %lld ms", px_cat(cp->core)->assets[j->asset].id,
		cp->st[si].name, j->attempts, why, (long long)back);
}

void cp_job_run(struct px_copies *cp, long ji, size_t si)
{
	struct job *j = &cp->jobs[ji];
	size_t asset = j->asset;
	enum px_copy_wait before = j->wait, in_way = PX_WAIT_NONE;
	j->wait = PX_WAIT_NONE;
	j->state = JOB_COPYING;
	j->storage = si;
	j->done = 0;
	j->speed = 0;
	j->total = px_asset_rt(cp->core, asset)->size;
	j->started_ms = px_now_ms();
	pthread_mutex_unlock(&cp->lock);
	char why[240] = "";
	enum px_status st = cp_make_copy(cp, (size_t)ji, asset, si, &in_way, why, sizeof(why));
	if (st == PX_OK && cp_clustered(cp))
		cp_cluster_sync(cp); /* the others see it before the claim goes */
	cp_claim_drop(cp);
	pthread_mutex_lock(&cp->lock);
	j = &cp->jobs[ji];
	if (st == PX_OK) {
		atomic_fetch_add(&cp->n_made, 1);
		cp->jobs[ji] = cp->jobs[--cp->njobs];
	} else if (st == PX_ESHUTDOWN) {
		j->state = JOB_WAITING;
	} else if (in_way != PX_WAIT_NONE) {
		job_in_way(cp, j, si, before, in_way, why);
	} else {
		job_failed(cp, j, si, why);
	}
}
