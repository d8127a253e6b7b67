/*
 * remote.c - a job another host writes (cluster mode): following its
 * commits and lease through the store, far reads asked of the writer's
 * host and served here for other hosts, and placements taken from this
 * host's queue (docs/cluster.md).
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "playlist.h"
#include "kvstore.h"
#include "place.h"
#include "tcstore.h"
#include "transcode_i.h"

/*
 * A placement of j on another host is pending (placed_away): whether
 * reads here go on waiting for that host's lease (l, as polled). Once
 * that host claimed it (live, or a new generation of its that is already
 * done) it is followed as any
 * other; when it did not by the end of the hold, the job is written here
 * instead: a read never waits on a host that does not take it. Under
 * tc->lock.
 */
static int place_wait(struct px_transcode *tc, struct job *j, const struct px_lease *l,
		      int live_other)
{
	size_t hl = strlen(j->place_host);
	if (!j->place_until)
		return 0;
	if (live_other || (l->gen && l->gen != j->place_gen &&
			   strncmp(l->owner, j->place_host, hl) == 0 && l->owner[hl] == ':')) {
		j->place_until = 0;
		return 0;
	}
	if (px_now_ms() < j->place_until)
		return 1;
	j->place_until = 0;
	j->place_here = 1;
	j->place_fallbacks++;
	px_warn("transcode", "asset %s: host %s did not start its writer within %lld ms; "
		"writing it here", j->a->id, j->place_host, (long long)tc_place_hold_ms(tc));
	return 0;
}

void tc_poll_remote(struct px_transcode *tc)
{
	for (size_t i = 0; i < tc->cat->nassets && !tc->stopping; i++) {
		struct job *j = &tc->jobs[i];
		if (!j->a || !j->planned || j->pid || j->nopen <= 0 ||
		    tc_trusted(j) == j->plan.nseg)
			continue;
		uint64_t oldver = j->plver, ver = 0, ver2 = 0;
		struct px_lease l;
		struct px_playlist pl;
		char err[512];
		int have_pl = 0;
		pthread_mutex_unlock(&tc->lock);
		enum px_status st = px_tcstore_poll(tc->store, j->a->id, &ver, &l);
		if (st == PX_OK && ver && ver != oldver &&
		    tc_load_list(tc, j, &pl, &ver2, err, sizeof(err)) == PX_OK)
			have_pl = 1;
		int64_t now = px_lease_now(tc->leases);
		pthread_mutex_lock(&tc->lock);
		if (st != PX_OK)
			continue; /* the store does not answer: nothing changes */
		if (have_pl && pl.seg_bytes == j->plan.seg_bytes && pl.nseg == j->plan.nseg) {
			uint32_t before = tc_trusted(j);
			j->plver = ver2;
			tc_apply_list(tc, j, &pl, 0);
			if (tc_trusted(j) > before)
				px_debug("transcode", "asset %s: %u segments committed by %s", j->a->id,
					 tc_trusted(j) - before, l.owner);
		} else if (have_pl) {
			px_playlist_release(&pl);
		}
		int live_other = l.gen && !l.released &&
				 (!tc_store_settled(tc) || !px_lease_orphaned(&l, now, tc->orphan_ms)) &&
				 strcmp(l.owner, tc->owner) != 0;
		if (place_wait(tc, j, &l, live_other))
			continue;
		if (j->remote && !live_other) {
			px_info("transcode", "asset %s: %s holds no live lease on it now (%s); a read "
				"here may start its writer", j->a->id,
				l.owner[0] ? l.owner : "no host",
				!l.gen ? "none stored" : l.released ? "released"
				: strcmp(l.owner, tc->owner) == 0 ? "ours" : "orphaned");
			j->remote = 0;
			pthread_cond_broadcast(&tc->cond);
		} else if (live_other) {
			j->remote = 1;
			snprintf(j->remote_owner, sizeof(j->remote_owner), "%s", l.owner);
		}
	}
}

/* Wants taken per job and poll (more wait for the next one). */
#define WANTS_MAX 16

void tc_remake_segment(struct job *j, uint32_t k)
{
	j->ok[k] = 0;
	if (j->pid) {
		if (j->restart_at < 0 || (uint32_t)j->restart_at > k)
			j->restart_at = k;
		kill(j->pid, SIGKILL);
	} else {
		j->remote = 0;
	}
}

/* Whether the file of trusted segment k is a regular file of its size
 * (a far read asks the holder for a listed segment: its file may have
 * been swapped; segment_ours is the read path's check). Under tc->lock. */
static int segment_file_ok(const struct job *j, uint32_t k, int *link)
{
	char name[64], path[PATH_MAX + 80];
	struct stat sb;
	px_playlist_seg_file(k, j->okgen[k], name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", j->dir, name);
	int ok = lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == seg_size(j, k);
	*link = !ok && lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode);
	return ok;
}

/* One far read of another host (w) on job j, whose lease we hold with a
 * writer running: decided as a local read of that segment would be. */
static void serve_want(struct px_transcode *tc, struct job *j, const struct px_tc_want *w,
		       int64_t now)
{
	uint32_t k = w->seg;
	if (k >= j->plan.nseg) {
		px_warn("transcode", "asset %s: %s wants segment %u of %u; ignored", j->a->id,
			w->from, k, j->plan.nseg);
		return;
	}
	if (now - w->at_ms > tc->cfg->read_timeout_ms)
		return; /* its read has given up */
	j->wanted_ms = px_now_ms();
	int link = 0;
	if (j->ok[k] && !segment_file_ok(j, k, &link)) {
		px_warn("transcode", "asset %s: %s wants segment %u, listed, whose file is not the "
			"one made (%s); making it again under a new generation", j->a->id, w->from,
			k, link ? "a link or not a regular file" : "gone or of another size");
		j->work_links += link;
		tc_remake_segment(j, k);
	}
	if (j->ok[k] || j->queued || j->retry_at || (!j->pid && !j->nprobes))
		return; /* listed (it serves it at its next poll), or ours restart */
	struct px_seek_view v = {
		.main_running = j->pid != 0, .main_from = j->from,
		.main_edge = j->edge, .ahead = tc->cfg->seek_restart_segments,
		.probe_covers = tc_probe_covers(j, k), .slot_free = tc_probe_slot_free(tc),
		.probes_running = tc->nprobes, .settled = w->settled, .first_read = 0 };
	enum px_seek_action act = px_seek_decide(&v, k);
	if (act == PX_SEEK_MOVE && j->restart_at >= 0)
		act = PX_SEEK_WAIT;
	if (act == PX_SEEK_START) {
		/* only probes of ours run: the main writer starts there */
		px_info("transcode", "asset %s: %s reads segment %u; starting the writer there",
			j->a->id, w->from, k);
		j->remote_seeks++;
		tc_start_writer(tc, j, k, START_SEEK);
	} else if (act == PX_SEEK_PROBE) {
		if (tc_start_probe(tc, j, k, tc_probe_until(j, k, w->last), NULL) == PX_OK) {
			j->remote_seeks++;
			px_info("transcode", "asset %s: read of segment %u on %s is outside the "
				"writer's reach (%u..%lld + %lld); a probe writes it, the writer goes "
				"on", j->a->id, k, w->from, j->from, (long long)j->edge,
				(long long)tc->cfg->seek_restart_segments);
		}
	} else if (act == PX_SEEK_MOVE) {
		px_info("transcode", "asset %s: reads on %s %s segment %u, outside the writer's "
			"reach (%u..%lld + %lld); restarting it there", j->a->id, w->from,
			w->settled ? "settled at" : "want", k, j->from, (long long)j->edge,
			(long long)tc->cfg->seek_restart_segments);
		j->restart_at = k;
		j->seeks++;
		j->remote_seeks++;
		kill(j->pid, SIGKILL);
	}
}

void tc_serve_wants(struct px_transcode *tc)
{
	for (size_t i = 0; i < tc->cat->nassets && !tc->stopping; i++) {
		struct job *j = &tc->jobs[i];
		struct px_tc_want w[WANTS_MAX];
		size_t n = 0;
		if (!j->a || !j->planned || !j->have_lease || (!j->pid && !j->nprobes) ||
		    tc_trusted(j) == j->plan.nseg)
			continue;
		uint64_t gen = j->lease.gen;
		pthread_mutex_unlock(&tc->lock);
		enum px_status st = px_tcstore_want_take(tc->store, j->a->id, gen, w, WANTS_MAX,
							 &n);
		int64_t now = px_lease_now(tc->leases);
		pthread_mutex_lock(&tc->lock);
		if (st != PX_OK || !j->have_lease || j->lease.gen != gen)
			continue;
		for (size_t q = 0; q < n && !tc->stopping; q++)
			serve_want(tc, j, &w[q], now);
	}
}

/* Jobs taken from this host's placement queue per poll. */
#define PLACED_MAX 16

void tc_take_placed(struct px_transcode *tc)
{
	struct px_place_job q[PLACED_MAX];
	size_t n = 0;
	if (tc->cfg->placement_local)
		return;
	pthread_mutex_unlock(&tc->lock);
	enum px_status st = px_place_take(tc->store, tc->host, q, PLACED_MAX, &n);
	pthread_mutex_lock(&tc->lock);
	for (size_t i = 0; st == PX_OK && i < n && !tc->stopping; i++) {
		long a = px_catalog_find(tc->cat, q[i].asset);
		struct job *j = a >= 0 ? &tc->jobs[a] : NULL;
		if (!j || !j->a || !j->planned) {
			px_warn("transcode", "asset %s: placed here by %s, but not a transcode "
				"planned here; its requester writes it", q[i].asset, q[i].by);
			continue;
		}
		if (j->pid || j->queued || q[i].age_ms > tc_place_hold_ms(tc))
			continue; /* written here already, or its requester does it */
		j->placed_here++;
		j->wanted_ms = px_now_ms();
		j->crashes = q[i].crashes;
		j->remote = 0;
		j->place_here = 1;
		px_info("transcode", "asset %s: placed here by %s; starting its writer at segment "
			"%u", j->a->id, q[i].by, q[i].from);
		tc_start_writer(tc, j, q[i].from, q[i].crashes ? START_RETRY : START_READ);
	}
}

int tc_remote_far(const struct px_transcode *tc, const struct job *j, uint32_t k)
{
	uint32_t e = k;
	while (e > 0 && !j->ok[e - 1])
		e--;
	return (int64_t)k > (int64_t)e + tc->cfg->seek_restart_segments;
}

void tc_ask_owner(struct px_tcfile *f, uint32_t k, uint32_t read_last, int settled,
		  int first, int far)
{
	struct px_transcode *tc = f->tc;
	struct job *j = f->job;
	struct px_tc_want w = { .seg = k, .last = read_last, .settled = settled };
	char owner[128];
	snprintf(w.from, sizeof(w.from), "%s", tc->owner);
	snprintf(owner, sizeof(owner), "%s", j->remote_owner);
	if (first) {
		j->seek_asks++;
		if (far)
			px_info("transcode", "asset %s: read of segment %u by pid %llu is far from "
				"what %s has committed; asking it for the segment", j->a->id, k,
				(unsigned long long)f->client,
				owner[0] ? owner : "the lease's holder");
		else
			px_debug("transcode", "asset %s: read of segment %u by pid %llu still waits "
				 "for %s; asking it for the segment", j->a->id, k,
				 (unsigned long long)f->client,
				 owner[0] ? owner : "the lease's holder");
	}
	pthread_mutex_unlock(&tc->lock);
	enum px_status st = px_tcstore_want_put(tc->store, j->a->id, &w, 4 * poll_ms(tc));
	pthread_mutex_lock(&tc->lock);
	if (st != PX_OK && st != PX_ENOTFOUND)
		px_debug("transcode", "asset %s: asking for segment %u: store %s: %s", j->a->id, k,
			 px_store_url(tc->store), px_strerror(st));
}
