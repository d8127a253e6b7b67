/*
 * transcode.c - the transcode supervisor: writers, leases, recovery, reads.
 *
 * The daemon's side of transcodes is a file per idea, sharing
 * transcode_i.h: workdir.c (job directories, markers, cleanup), plan.c,
 * trust.c (which segments may be served), recover.c (recovery and the
 * lease it runs under), spawn.c (a writer process), start.c (a main
 * writer's start, placement, the queue), probe.c, remote.c (a job another
 * host writes), supervisor.c (the thread), reader.c (the reader API); this
 * file: the lifecycle and the snapshot. The writer program is
 * proxy/writer/.
 *
 * Each transcode asset is a job with a work directory (WORK/<id>/) that
 * holds its plan, its segments, its playlist; leases live in WORK/leases.
 * Each of these directories carries the marker .seamfs-work, and seamfs
 * removes only files it made, only inside marked directories ("work
 * files" below): WORK may be any directory an operator names.
 * At most one writer works on a job at a time, shared by every handle
 * reading it (sticky); at most max_writers run at once, the others wait in
 * a FIFO queue.
 *
 * A read maps each byte to segment off / S. A segment is served once it
 * is trusted by the playlist rule (listed, and its file still the one
 * listed; the newest entry too, px_playlist_trust): a byte that was served
 * is never written again. A read of a segment not yet trusted
 * (px_seek_decide, segmath.c; docs/transcode.md "Seeks"):
 *  - waits (bounded by read_timeout) when the main writer's edge will
 *    reach it within seek_restart_segments segments, or a probe writes it;
 *  - far from the main writer, gets a probe: a short writer run of just
 *    the segments the read needs, beside the main writer, sharing
 *    max_writers, listing its segments when it ends (a player's seek
 *    bisects the file: a handful of far reads, none worth a restart);
 *  - moves the main writer there (kill, recover, start at that segment)
 *    only when the handle's reads settle there, and once it has committed
 *    two segments, so that distant readers take turns;
 *  - of a reader whose process has exited, starts nothing and fails.
 * Several writers may thus work in one job directory: every playlist
 * update is a load, change and save under the directory's flock
 * (px_playlist_lock), recovery included, and recovery leaves the files of
 * running probes alone.
 *
 * A writer's input: once fs/ says the mount serves reads
 * (px_transcode_set_input), the source asset fed by the daemon over a
 * private socket (feed.c), read through the daemon's own read path: it
 * chooses the source, balances, verifies standbys and cuts over for the
 * writer as for any player; a writer never sees a dead origin that has
 * identical peers. Not through the mount itself: a file open there keeps
 * it busy, and `fusermount3 -u` failed while a writer ran (issue 26).
 * Before that (the plans, at mount) and without it (unit tests, `-s`),
 * the sources themselves: the plan tries each in catalog order until one
 * answers, and a writer that fails reading one (exit 1) is restarted on
 * the next.
 *
 * The supervisor thread polls, with no fixed sleep, an eventfd (new writers,
 * stop), each writer's pidfd (death) and stdout ("committed K"), and wakes on
 * a timer of heartbeat/2 to check leases or when a restart's backoff ends.
 * When a writer dies (signal, crash, out of memory), fails (exit 1: its
 * input failed; 3: its lease was taken) or its lease is orphaned (then it
 * is killed first), it is started again after a backoff of 250 ms, doubled
 * with each failure in a row that made no segment servable; the sixth
 * gives up (EIO to readers of unwritten segments). Before each start,
 * recovery claims the lease by compare-and-set, trusts the listed segments
 * that still have size S and their listed mtime, removes every other
 * file, rewrites the playlist, and the writer starts at the first
 * untrusted segment (it decodes the segment before it, encoding only its
 * audio, and throws that away). Waiting readers just go on waiting,
 * bounded by read_timeout.
 *
 * Lock order: tc->lock is the only lock. It is held while a writer is
 * started (lease claim, recovery's removals, the start of its input's
 * feed, which takes the feeds' own lock inside it, posix_spawn: short, and
 * atomic with the job's state; in cluster mode the placement's call,
 * place.h, comes before all that with the lock let go) and
 * while the supervisor reads a playlist; never across a pread of a
 * segment, a wait for a child's output, or anything that enters the mount.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "feed.h"
#include "log.h"
#include "kvstore.h"
#include "place.h"
#include "tcstore.h"
#include "transcode_i.h"

/* When a lease without a heartbeat is orphaned: orphan_after, or 3 x
 * heartbeat; above heartbeat always. */
static int64_t orphan_after(const struct px_config *cfg)
{
	int64_t ms = cfg->orphan_after_ms > 0 ? cfg->orphan_after_ms : 3 * cfg->heartbeat_ms;
	if (ms <= cfg->heartbeat_ms) {
		/* every writer would look orphaned between two heartbeats */
		px_warn("transcode", "orphan_after (%lld ms) is not above heartbeat (%lld ms); "
			"using %lld ms", (long long)ms, (long long)cfg->heartbeat_ms,
			(long long)(2 * cfg->heartbeat_ms));
		ms = 2 * cfg->heartbeat_ms;
	}
	return ms;
}

/* The writer program's path (-o writer, else next to this binary), the
 * host's name and this daemon's owner string. */
static void name_writer_and_owner(struct px_transcode *tc)
{
	const struct px_config *cfg = tc->cfg;
	if (cfg->writer) {
		snprintf(tc->writer, sizeof(tc->writer), "%s", cfg->writer);
	} else {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		self[n > 0 ? n : 0] = '\0';
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		snprintf(tc->writer, sizeof(tc->writer), "%s/seamfs-writer",
			 slash ? self : "/usr/bin");
	}
	if (tc->store && cfg->host_id)
		snprintf(tc->host, sizeof(tc->host), "%s", cfg->host_id);
	else if (gethostname(tc->host, sizeof(tc->host) - 1))
		snprintf(tc->host, sizeof(tc->host), "localhost");
	for (char *p = tc->host; *p; p++)
		if (*p == ' ' || *p == '\n' || *p == ':')
			*p = '_';
	px_lease_make_owner_host(tc->owner, sizeof(tc->owner), tc->host);
}

/* Job i of the catalog: no writer yet; for a transcode or remux its
 * source asset and its directory. */
static void job_init(struct px_transcode *tc, size_t i)
{
	const struct px_catalog *cat = tc->cat;
	struct job *j = &tc->jobs[i];
	char esc[PATH_MAX];
	long src;
	j->asset = i;
	j->pidfd = j->outfd = -1;
	j->restart_at = -1;
	for (int q = 0; q < PROBES_MAX; q++)
		j->probes[q].pidfd = j->probes[q].outfd = -1;
	if (cat->assets[i].kind == PX_ASSET_PLAIN)
		return;
	j->a = &cat->assets[i];
	j->remux = j->a->kind == PX_ASSET_REMUX;
	src = px_catalog_find(cat, j->a->of);
	if (src < 0 || cat->assets[src].nsources == 0)
		return; /* the catalog validated it; defensive */
	j->src = &cat->assets[src];
	tc_escape_id(j->a->id, esc, sizeof(esc));
	snprintf(j->dir, sizeof(j->dir), "%s/%s", tc->work, esc);
	snprintf(j->pl_path, sizeof(j->pl_path), "%s/playlist", j->dir);
}

enum px_status px_transcode_new(const struct px_config *cfg, const struct px_catalog *cat,
				struct px_store *store, struct px_transcode **out)
{
	struct px_transcode *tc = calloc(1, sizeof(*tc));
	enum px_status st = PX_ENOMEM;
	char leasedir[PATH_MAX + 8], err[PATH_MAX * 3];

	*out = NULL;
	if (!tc)
		return PX_ENOMEM;
	tc->cfg = cfg;
	tc->cat = cat;
	tc->evfd = -1;
	pthread_mutex_init(&tc->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&tc->cond, &ca);
	pthread_condattr_destroy(&ca);
	tc->orphan_ms = orphan_after(cfg);
	tc_work_path(cfg, tc->work, sizeof(tc->work));
	tc->store = store;
	name_writer_and_owner(tc);
	tc->jobs = calloc(cat->nassets + 1, sizeof(*tc->jobs));
	if (!tc->jobs)
		goto out;
	if ((st = px_transcode_prepare_work(cfg, cat, err, sizeof(err))) != PX_OK) {
		px_error("transcode", "%s", err);
		goto out;
	}
	snprintf(leasedir, sizeof(leasedir), "%s/leases", tc->work);
	if (mkdir(leasedir, 0755) == 0 && tc_mark_dir(leasedir))
		px_warn("transcode", "cannot mark %s: %s", leasedir, strerror(errno));
	if (store) {
		/* cluster mode: the leases are the store's, shared by every host */
		if ((st = px_lease_redis_new(store, &tc->leases)) != PX_OK)
			goto out;
	} else if ((st = px_lease_files_new(leasedir, NULL, NULL, &tc->leases)) != PX_OK) {
		px_error("transcode", "lease store %s: %s", leasedir, px_strerror(st));
		goto out;
	}
	for (size_t i = 0; i < cat->nassets; i++)
		job_init(tc, i);
	tc_cleanup_orphans(tc);
	tc->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (tc->evfd < 0) {
		st = PX_EIO;
		goto out;
	}
	if (pthread_create(&tc->thread, NULL, tc_supervisor_main, tc)) {
		st = PX_EIO;
		goto out;
	}
	tc->thread_started = 1;
	px_info("transcode", "work_dir %s, writer %s, owner %s, heartbeat %lld ms, orphan "
		"after %lld ms, %d writers at most, leases %s", tc->work, tc->writer, tc->owner,
		(long long)cfg->heartbeat_ms, (long long)tc->orphan_ms, cfg->max_writers,
		store ? px_store_url(store) : "in work_dir");
	*out = tc;
	tc = NULL;
	st = PX_OK;
out:
	px_transcode_free(tc);
	return st;
}

void px_transcode_set_input(struct px_transcode *tc, const struct px_tc_input *in)
{
	struct px_feeds *fs = NULL;
	if (!tc)
		return;
	if (in && !(fs = px_feeds_new()))
		px_warn("transcode", "writers read their sources directly: out of memory");
	pthread_mutex_lock(&tc->lock);
	if (fs && !tc->feeds) {
		tc->feeds = fs;
		fs = NULL;
	}
	tc->have_input = in && tc->feeds;
	if (tc->have_input)
		tc->input = *in;
	pthread_mutex_unlock(&tc->lock);
	px_feeds_free(fs);
	if (in && tc->have_input)
		px_info("transcode", "writers read their input through the daemon's read path");
}

void px_transcode_end_feeds(struct px_transcode *tc)
{
	if (!tc)
		return;
	/* no writer starts from here on, so no feed either */
	px_transcode_stop(tc);
	pthread_mutex_lock(&tc->lock);
	struct px_feeds *fs = tc->feeds;
	tc->feeds = NULL;
	tc->have_input = 0;
	pthread_mutex_unlock(&tc->lock);
	px_feeds_free(fs);
}

void px_transcode_stop(struct px_transcode *tc)
{
	if (!tc)
		return;
	pthread_mutex_lock(&tc->lock);
	tc->stopping = 1;
	pthread_cond_broadcast(&tc->cond);
	pthread_mutex_unlock(&tc->lock);
	if (tc->evfd >= 0)
		tc_wake(tc);
}

void px_transcode_free(struct px_transcode *tc)
{
	if (!tc)
		return;
	px_transcode_stop(tc);
	if (tc->thread_started)
		pthread_join(tc->thread, NULL);
	for (size_t i = 0; tc->jobs && i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		if (j->pid) {
			int status;
			kill(j->pid, SIGKILL);
			while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
				;
			px_info("transcode", "writer pid %d of asset %s stopped at unmount",
				(int)j->pid, j->a->id);
		}
		if (j->pidfd >= 0)
			close(j->pidfd);
		if (j->outfd >= 0)
			close(j->outfd);
		for (int q = 0; q < PROBES_MAX; q++) {
			struct probe *p = &j->probes[q];
			if (p->pid) {
				int status;
				kill(p->pid, SIGKILL);
				while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
					;
			}
			if (p->pid && p->pidfd >= 0)
				close(p->pidfd);
			if (p->pid && p->outfd >= 0)
				close(p->outfd);
		}
		/* released, the lease's grace still protects the files */
		if (j->have_lease && px_lease_release(tc->leases, &j->lease) != PX_OK)
			px_warn("transcode", "lease: asset %s: could not release", j->a->id);
		free(j->ok);
		free(j->okgen);
		free(j->okmt);
		free(j->offs);
	}
	/* after the writers: each feed's thread then sees its writer gone */
	px_feeds_free(tc->feeds);
	while (tc->files) {
		struct px_tcfile *f = tc->files;
		tc->files = f->next;
		free(f);
	}
	if (tc->evfd >= 0)
		close(tc->evfd);
	px_lease_store_free(tc->leases);
	pthread_mutex_destroy(&tc->lock);
	pthread_cond_destroy(&tc->cond);
	free(tc->queue);
	free(tc->jobs);
	free(tc);
}

size_t px_transcode_snapshot(struct px_transcode *tc, struct px_tc_info *out, size_t cap)
{
	size_t n = 0;
	if (!tc)
		return 0;
	pthread_mutex_lock(&tc->lock);
	int64_t now = px_lease_now(tc->leases);
	for (size_t i = 0; i < tc->cat->nassets && n < cap; i++) {
		const struct job *j = &tc->jobs[i];
		if (!j->a || !j->planned)
			continue;
		struct px_tc_info *o = &out[n++];
		memset(o, 0, sizeof(*o));
		o->asset = i;
		o->segments = j->plan.nseg;
		o->committed = tc_trusted(j);
		o->writer_pid = (int64_t)j->pid;
		o->recoveries = j->recoveries;
		o->work_links = j->work_links;
		o->seeks = j->seeks;
		o->readers = j->nopen;
		o->queued = j->queued;
		o->failed = j->failed;
		/* the last owner stays known after the writer let the lease go */
		snprintf(o->owner, sizeof(o->owner), "%s",
			 j->remote && j->remote_owner[0] ? j->remote_owner : j->lease.owner);
		o->lease_held = j->have_lease;
		o->remote = j->remote;
		o->takeovers = j->takeovers;
		o->seek_asks = j->seek_asks;
		o->remote_seeks = j->remote_seeks;
		o->cost = px_place_cost(j->a);
		o->starts = j->starts;
		o->placed_away = j->placed_away;
		o->placed_here = j->placed_here;
		o->place_fallbacks = j->place_fallbacks;
		o->heartbeat_age_ms = j->have_lease ? now - j->lease.heartbeat_ms : -1;
		if (j->pid)
			o->writers++;
		o->writers += j->nprobes;
	}
	pthread_mutex_unlock(&tc->lock);
	return n;
}
