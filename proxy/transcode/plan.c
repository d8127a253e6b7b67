/*
 * plan.c - a job's plan: read from WORK/<id>/plan.json when its profile
 * matches, else made by `seamfs-writer plan` from each source in catalog
 * order until one answers, and kept there (a remux's writer reads it back).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "log.h"
#include "playlist.h"
#include "transcode_i.h"

/* Fills p (and j->offs for a remux) from a writer's plan; PX_EINVAL with a
 * log line naming what is wrong. */
static enum px_status plan_from_json(struct job *j, json_t *root, struct px_seg_plan *p,
				     const char *what)
{
	json_int_t n = json_integer_value(json_object_get(root, "segments"));
	json_int_t s = json_integer_value(json_object_get(root, "segment_bytes"));
	json_t *sizes = json_object_get(root, "sizes");
	int64_t *offs = NULL;
	if (n < 1 || n > PX_SEG_MAX_COUNT || s < 0 || s % PX_TS_PACKET || (!j->remux && !s) ||
	    (j->remux && (s || !json_is_array(sizes) || json_array_size(sizes) != (size_t)n))) {
		px_error("transcode", "asset %s: %s is not a valid %s plan", j->a->id, what,
			 j->remux ? "remux" : "transcode");
		return PX_EINVAL;
	}
	if (j->remux) {
		if (!(offs = calloc((size_t)n + 1, sizeof(*offs))))
			return PX_ENOMEM;
		for (json_int_t k = 0; k < n; k++) {
			json_int_t b = json_integer_value(json_array_get(sizes, (size_t)k));
			if (b <= 0 || b % PX_TS_PACKET || offs[k] > INT64_MAX / 2) {
				px_error("transcode", "asset %s: %s: segment %lld has size %lld",
					 j->a->id, what, (long long)k, (long long)b);
				free(offs);
				return PX_EINVAL;
			}
			offs[k + 1] = offs[k] + b;
		}
	}
	free(j->offs);
	j->offs = offs;
	p->nseg = (uint32_t)n;
	p->seg_bytes = s;
	p->duration_us = json_integer_value(json_object_get(root, "duration_us"));
	p->seg_us = (int64_t)seg_secs(j) * 1000000;
	p->size = j->remux ? offs[n] : (int64_t)n * s;
	return PX_OK;
}

static enum px_status read_plan_file(struct job *j, const char *path, const char *key,
				     struct px_seg_plan *p)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	enum px_status st = PX_ENOTFOUND;
	if (!root)
		return st;
	json_t *k = json_object_get(root, "profile");
	if (json_is_string(k) && strcmp(json_string_value(k), key) == 0)
		st = plan_from_json(j, root, p, path);
	json_decref(root);
	return st;
}

/* Keeps the writer's plan (the writer of a remux reads it back): PX_OK, or
 * the failure with "PATH: reason" in err. */
static enum px_status write_plan_file(const char *path, const char *key, json_t *root,
				      char *err, size_t errlen)
{
	if (json_object_set_new(root, "profile", json_string(key)))
		return PX_ENOMEM;
	char *text = json_dumps(root, JSON_COMPACT);
	if (!text)
		return PX_ENOMEM;
	/* px_write_atomic's temporary name is random and made with O_EXCL:
	 * hosts sharing work_dir may plan the same asset at once (each writes
	 * the same plan; one rename wins), and a link planted there by someone
	 * who can write work_dir is never written through */
	enum px_status st = px_write_atomic(path, text, strlen(text), 0644, err, errlen);
	free(text);
	return st;
}

#define PLAN_MAX_BYTES (64 << 20)

/* Runs `seamfs-writer plan` on source k of the source asset, until
 * deadline; *out is its JSON. PX_ENEXT: that plan failed or took too
 * long (the writer's stderr says why), another source may do. */
static enum px_status run_plan(struct px_transcode *tc, struct job *j, size_t k,
			       int64_t deadline, json_t **out)
{
	char *argv[64], bufs[4][32], *buf = NULL, stimeout[24];
	const struct px_source *s = &j->src->sources[k], *hdr = s->url ? s : NULL;
	const char *input = s->url ? s->url : s->path;
	char *secret;
	size_t n = tc_profile_argv(tc, j, argv, bufs, input, hdr, &secret), got = 0, cap = 0;
	pid_t pid;
	int fd, status = 0;
	enum px_status st;
	/* a source that accepts and then says nothing must leave time for the
	 * next one: no byte for connect_timeout ends this attempt */
	int64_t io = tc->cfg->connect_timeout_ms;

	*out = NULL;
	argv[1] = "plan";
	snprintf(stimeout, sizeof(stimeout), "%lld",
		 (long long)(io > 0 && io < 30000 ? io : 30000));
	argv[n++] = "--io-timeout-ms";
	argv[n++] = stimeout;
	argv[n] = NULL;
	st = tc_spawn(argv, &pid, &fd, secret, -1);
	free(secret);
	if (st != PX_OK)
		return st;
	for (;;) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int64_t left = deadline - px_now_ms();
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			break;
		if (got + 4096 > cap) {
			char *nb = cap < PLAN_MAX_BYTES ? realloc(buf, cap ? 2 * cap : 65536) : NULL;
			if (!nb)
				break;
			buf = nb;
			cap = cap ? 2 * cap : 65536;
		}
		ssize_t r = read(fd, buf + got, cap - got - 1);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (px_now_ms() >= deadline) {
		kill(pid, SIGKILL);
		px_error("transcode", "asset %s: planning from %s took longer than probe_timeout",
			 j->a->id, s->shown);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !buf) {
		px_error("transcode", "asset %s: planning from %s failed (%s plan: exit %d); its "
			 "stderr says why", j->a->id, s->shown, tc->writer,
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		free(buf);
		return PX_ENEXT;
	}
	buf[got] = '\0';
	json_error_t je;
	*out = json_loads(buf, 0, &je);
	if (!*out) {
		px_error("transcode", "asset %s: the writer's plan is not JSON: \"%.200s\"",
			 j->a->id, buf);
		st = PX_EINVAL;
	}
	free(buf);
	return st;
}

/* Who owns a file seamfs makes in j's directory: our user, or on an NFS
 * export that squashes root the user it maps us to. Found by making a
 * file there (under a name recovery removes) and looking. */
static uid_t files_owner(const struct job *j)
{
	char name[NAME_MAX + 1];
	struct stat sb;
	uid_t uid = geteuid();
	int dfd = px_dir_open(j->dir);
	int fd = dfd >= 0 ? px_create_excl(dfd, "plan.json", "tmp", 0600, name, sizeof(name))
			  : -1;
	if (fd >= 0) {
		if (fstat(fd, &sb) == 0)
			uid = sb.st_uid;
		close(fd);
		(void)unlinkat(dfd, name, 0); /* ours: made with O_EXCL */
	}
	if (dfd >= 0)
		close(dfd);
	return uid;
}

/*
 * Whether l's holder is a daemon of this host that released l and whose
 * process is gone (one host, no store): nobody works in the job directory
 * then, since its writer stopped before the release. A released lease's
 * grace is for another host's takeover (cluster mode); on one host it
 * kept a changed profile out of the mount for orphan_after after this
 * host's own clean unmount.
 */
static int holder_gone(const struct px_transcode *tc, const struct px_lease *l)
{
	long pid = tc->store || !l->released ? 0 : tc_local_owner_pid(tc, l->owner);
	return pid > 0 && pid <= INT_MAX && px_pid_gone((pid_t)pid);
}

/*
 * Plans job j afresh (no plan.json of its profile at path): clears what
 * seamfs made in its directory, runs the writer's plan on each source in
 * turn and keeps the plan. Under the directory's lock (px_transcode_plan).
 */
static enum px_status plan_afresh(struct px_transcode *tc, struct job *j, const char *key,
				  const char *path)
{
	enum px_status st;
	struct px_lease l;
	/* another profile's segments are stale; only if nobody works there */
	if (px_lease_get(tc->leases, j->a->id, &l) == PX_OK &&
	    px_lease_protects(&l, px_lease_now(tc->leases), tc->orphan_ms, tc->orphan_ms) &&
	    strcmp(l.owner, tc->owner) != 0 && !holder_gone(tc, &l)) {
		px_error("transcode", "asset %s: its profile changed but %s still holds "
			 "its lease", j->a->id, l.owner);
		return PX_EAGAIN;
	}
	/* what seamfs made there; anything else stays (and is logged) */
	(void)tc_clear_job_dir(j->dir, 0);
	/* each source in catalog order, the first that answers plans:
	 * a dead first origin must not keep the asset out of the mount */
	json_t *root = NULL;
	int64_t deadline = px_now_ms() + tc->cfg->probe_timeout_ms;
	st = PX_ENEXT;
	for (size_t k = 0; k < j->src->nsources && st == PX_ENEXT; k++) {
		const struct px_source *s = &j->src->sources[k];
		if (k && px_now_ms() >= deadline) {
			px_error("transcode", "asset %s: probe_timeout spent; sources %zu.. of "
				 "%zu not tried", j->a->id, k + 1, j->src->nsources);
			break;
		}
		/* anything but PX_ENEXT is the writer's fault, not the source's */
		if ((st = run_plan(tc, j, k, deadline, &root)) == PX_OK) {
			j->direct = k;
			if (k)
				px_info("transcode", "asset %s: planned from %s (source %zu of "
					"%zu)", j->a->id, s->shown, k + 1,
					j->src->nsources);
		}
	}
	if (st != PX_OK)
		return st == PX_ENEXT ? PX_EIO : st;
	st = plan_from_json(j, root, &j->plan, "the writer's plan");
	/* a remux's writer reads the plan back: keeping it is not optional */
	char err[PATH_MAX + 64] = "out of memory";
	if (st == PX_OK && write_plan_file(path, key, root, err, sizeof(err)) != PX_OK) {
		px_error("transcode", "asset %s: cannot keep its plan in %s: %s", j->a->id,
			 path, err);
		st = j->remux ? PX_EIO : PX_OK;
	}
	json_decref(root);
	return st;
}

/*
 * A transcode whose catalog entry names no segment_seconds: its plan.json
 * made when the default was 2 s (before issue 32) is kept, with D = 2 s,
 * rather than planned afresh at today's 1 s. The file's size, and every
 * byte a reader has had, stay as they were across the upgrade; naming
 * segment_seconds in the catalog changes the profile as always. PX_OK
 * with j->secs and j->plan set, else j->secs is 0 again.
 */
#define OLDER_DEFAULT_SECONDS 2

static enum px_status older_default_plan(struct px_transcode *tc, struct job *j,
					 const char *path)
{
	char key[8192];
	if (j->remux || !j->a->segment_seconds_default)
		return PX_ENOTFOUND;
	j->secs = OLDER_DEFAULT_SECONDS;
	tc_profile_key(tc, j, key, sizeof(key));
	if (read_plan_file(j, path, key, &j->plan) != PX_OK) {
		j->secs = 0;
		return PX_ENOTFOUND;
	}
	px_info("transcode", "asset %s: keeps its plan of %d s segments (the default "
		"before 1 s); name segment_seconds in the catalog to change it", j->a->id,
		OLDER_DEFAULT_SECONDS);
	return PX_OK;
}

enum px_status px_transcode_plan(struct px_transcode *tc, size_t asset, int64_t *size)
{
	struct job *j = &tc->jobs[asset];
	char key[8192], path[PATH_MAX + 16];
	enum px_status st;

	*size = -1;
	if (!j->a || !j->src)
		return PX_EINVAL;
	j->secs = 0;
	tc_profile_key(tc, j, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/plan.json", j->dir);
	if (mkdir(j->dir, 0755) == 0 ? tc_mark_dir(j->dir) : errno != EEXIST) {
		px_error("transcode", "asset %s: cannot make %s: %s", j->a->id, j->dir,
			 strerror(errno));
		return PX_EIO;
	}
	if (!tc_marked_soon(j->dir)) {
		/* made by someone else after work_dir was ours: not touched */
		px_error("transcode", "asset %s: %s is not a directory seamfs made (no %s); "
			 "leaving it alone", j->a->id, j->dir, WORK_MARKER);
		return PX_EIO;
	}
	j->uid = files_owner(j);
	/* hosts sharing work_dir plan one at a time: another's plan is read,
	 * not cleared away while it is written (two hosts mounting at once:
	 * one lost its remux, "cannot keep its plan") */
	int lk = px_playlist_lock(j->dir);
	st = read_plan_file(j, path, key, &j->plan);
	if (st != PX_OK && older_default_plan(tc, j, path) == PX_OK)
		st = PX_OK;
	if (st != PX_OK)
		st = plan_afresh(tc, j, key, path);
	px_playlist_unlock(lk);
	if (st != PX_OK)
		return st;
	free(j->ok);
	free(j->okgen);
	free(j->okmt);
	j->ok = calloc(j->plan.nseg + 1, 1);
	j->okgen = calloc(j->plan.nseg + 1, sizeof(*j->okgen));
	j->okmt = calloc(j->plan.nseg + 1, sizeof(*j->okmt));
	if (!j->ok || !j->okgen || !j->okmt)
		return PX_ENOMEM;
	pthread_mutex_lock(&tc->lock);
	j->planned = 1;
	tc_refresh(tc, j, 1);
	pthread_mutex_unlock(&tc->lock);
	if (j->remux)
		px_info("transcode", "asset %s: remux in %u segments (%lld bytes, %.1f s)",
			j->a->id, j->plan.nseg, (long long)j->plan.size,
			(double)j->plan.duration_us / 1e6);
	else
		px_info("transcode", "asset %s: %u segments of %lld bytes (%lld bytes, %.1f s)",
			j->a->id, j->plan.nseg, (long long)j->plan.seg_bytes,
			(long long)j->plan.size, (double)j->plan.duration_us / 1e6);
	*size = j->plan.size;
	return PX_OK;
}
