/*
 * reader.c - the reader API: handles on transcode assets and their reads,
 * which serve trusted segments and otherwise wait (bounded by
 * read_timeout), start a probe, or move the main writer
 * (docs/transcode.md "Seeks").
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "playlist.h"
#include "transcode_i.h"

#define GONE_CHECK_MS 250       /* how often a waiting read looks at its reader */

/* Whether one handle here is j's only reader (no far read of another
 * host asked within read_timeout): a settled read of it may move the
 * main writer at once, nobody takes turns with it. Under tc->lock. */
static int sole_reader(const struct px_transcode *tc, const struct job *j)
{
	return j->nopen == 1 &&
	       !(j->wanted_ms && px_now_ms() - j->wanted_ms < tc->cfg->read_timeout_ms);
}

/* The process (thread group) of thread tid, from /proc; 0 when unknown
 * (a caller that is not a process here, as in the core's unit tests). */
static pid_t tgid_of(uint64_t tid)
{
	char path[64], buf[1024];
	pid_t tgid = 0;
	if (tid == 0 || tid > INT32_MAX)
		return 0;
	snprintf(path, sizeof(path), "/proc/%llu/status", (unsigned long long)tid);
	if (px_proc_read(path, buf, sizeof(buf)) < 0)
		return 0;
	const char *t = strstr(buf, "\nTgid:");
	if (t)
		tgid = (pid_t)strtol(t + 7, NULL, 10);
	return tgid > 0 ? tgid : 0;
}

/*
 * Whether the process of the thread that reads (tgid: its thread group,
 * from the FUSE request) has exited or is being killed: its thread-group
 * leader is gone, a zombie (the process exited while this thread still
 * waits in a read here), or has SIGKILL pending (a thread that waits in a
 * read here cannot die before we answer). A player that quits cannot take
 * such a read back; it must not start or move a writer, as a living
 * reader's read would. The reading thread, not the opener: a handle may be
 * read by a process the opener handed it to.
 */
static int client_gone(pid_t tgid)
{
	char path[64], buf[2048];
	if (tgid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tgid);
	if (px_proc_read(path, buf, sizeof(buf)) < 0)
		return errno == ENOENT || errno == ESRCH;
	const char *st = strstr(buf, "\nState:");
	if (st) {
		st += 8;
		while (*st == ' ' || *st == '\t')
			st++;
		if (*st == 'Z' || *st == 'X')
			return 1;
	}
	static const char *const pend[] = { "\nSigPnd:", "\nShdPnd:" };
	for (size_t i = 0; i < 2; i++) {
		const char *p = strstr(buf, pend[i]);
		if (p && (strtoull(p + 8, NULL, 16) & (1ULL << (SIGKILL - 1))))
			return 1;
	}
	return 0;
}

enum px_status px_transcode_open(struct px_transcode *tc, size_t asset, uint64_t client,
				 struct px_tcfile **out)
{
	struct px_tcfile *f;
	*out = NULL;
	if (!tc || asset >= tc->cat->nassets || !tc->jobs[asset].planned)
		return PX_EINVAL;
	struct job *j = &tc->jobs[asset];
	if (!(f = calloc(1, sizeof(*f))))
		return PX_ENOMEM;
	f->tc = tc;
	f->job = j;
	f->client = client;
	pthread_mutex_lock(&tc->lock);
	f->next = tc->files;
	if (f->next)
		f->next->prev = f;
	tc->files = f;
	j->nopen++;
	pthread_mutex_unlock(&tc->lock);
	*out = f;
	return PX_OK;
}

void px_transcode_close(struct px_tcfile *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->tc->lock);
	f->job->nopen--;
	for (int q = 0; q < PROBES_MAX; q++)
		if (f->job->probes[q].by == f)
			f->job->probes[q].by = NULL; /* its address may be a new handle's */
	if (f->prev)
		f->prev->next = f->next;
	else
		f->tc->files = f->next;
	if (f->next)
		f->next->prev = f->prev;
	pthread_mutex_unlock(&f->tc->lock);
	free(f);
}

/* client_gone(tgid), logged once per handle. Under tc->lock. */
static int reader_gone(struct px_tcfile *f, pid_t tgid)
{
	if (!client_gone(tgid))
		return 0;
	if (!f->gone_logged++)
		px_info("transcode", "asset %s: pid %d has exited; its reads start no writer",
			f->job->a->id, (int)tgid);
	return 1;
}

/* A wait for a segment across its turns. */
/* What the handle's reads before say of a read (segmath.h). */
struct read_how {
	int settled;              /* px_seek_settled */
	int first;                /* the handle's first read */
	int jumped;               /* px_seek_jumped */
};

struct seg_wait {
	int tried, probed, asks;  /* starts, probes and asks made for it */
	int64_t checked;          /* when its reader was last looked at */
	int64_t ask_at;           /* following another host: when to ask it next */
	int far;
};

/*
 * Another host's live writer holds the lease (or the store cannot say):
 * wait for its commits, which the supervisor learns from the store; a far
 * read asks that host for the segment (serve_wants there): at once, a
 * read near what it committed after two polls (that writer may be
 * elsewhere: a probe of its wrote the segment before), and again every
 * two polls while it waits; a takeover only once that lease is orphaned
 * (poll_remote). 1 when it asked (the wait looks again). Under tc->lock.
 */
static int ask_remote(struct px_tcfile *f, pid_t tgid, uint32_t k, uint32_t read_last,
		      int settled, struct seg_wait *w)
{
	struct px_transcode *tc = f->tc;
	int64_t now = px_now_ms();
	if (w->ask_at < 0) {
		w->far = tc_remote_far(tc, f->job, k);
		w->ask_at = w->far ? now : now + 2 * poll_ms(tc);
	}
	if (now >= w->ask_at && !reader_gone(f, tgid)) {
		tc_ask_owner(f, k, read_last, settled, w->asks++ == 0, w->far);
		w->ask_at = px_now_ms() + 2 * poll_ms(tc);
		return 1;
	}
	return 0;
}

/* What a read of segment k does here (px_seek_decide), not asking twice
 * for what it asked already. Under tc->lock. */
static enum px_seek_action decide(struct px_tcfile *f, uint32_t k, const struct read_how *how,
				  const struct seg_wait *w)
{
	struct px_transcode *tc = f->tc;
	struct job *j = f->job;
	int settled = how->settled, first = how->first;
	struct px_seek_view v = {
		.jump = how->jumped,
		.main_running = j->pid != 0, .main_from = j->from,
		.main_edge = j->edge, .ahead = tc->cfg->seek_restart_segments,
		.probe_covers = tc_probe_covers(j, k), .slot_free = tc_probe_slot_free(tc),
		.probes_running = tc->nprobes,
		.settled = settled, .first_read = first,
		.sole_reader = sole_reader(tc, j) };
	enum px_seek_action act = px_seek_decide(&v, k);
	if ((act == PX_SEEK_START && w->tried >= 3) ||
	    (act == PX_SEEK_PROBE && (w->probed >= 3 || tc_probing_for(j, f))) ||
	    (act == PX_SEEK_MOVE && j->restart_at >= 0))
		act = PX_SEEK_WAIT; /* asked already: the deadline decides */
	return act;
}

/* Moves j's main writer to segment k, where f's reads are. Under
 * tc->lock. */
static void move_writer(struct px_tcfile *f, uint32_t k, int settled)
{
	struct px_transcode *tc = f->tc;
	struct job *j = f->job;
	if (settled)
		px_info("transcode", "asset %s: reads of pid %llu settled at segment "
			"%u, outside the writer's reach (%u..%lld + %lld); restarting "
			"it there", j->a->id, (unsigned long long)f->client, k,
			j->from, (long long)j->edge,
			(long long)tc->cfg->seek_restart_segments);
	else
		px_info("transcode", "asset %s: read of segment %u by pid %llu is "
			"outside the writer's reach (%u..%lld + %lld) and no writer "
			"slot is free for a probe; restarting it there", j->a->id, k,
			(unsigned long long)f->client, j->from, (long long)j->edge,
			(long long)tc->cfg->seek_restart_segments);
	j->restart_at = k;
	j->seeks++;
	kill(j->pid, SIGKILL);
}

/* Waits on tc->cond for a change, until the deadline, the next look at
 * the reader (GONE_CHECK_MS) or the next ask of another host. PX_OK,
 * PX_ETIMEDOUT, or PX_ECANCELED when the reader is gone. Under tc->lock. */
static enum px_status nap(struct px_tcfile *f, pid_t tgid, uint32_t k, int64_t deadline,
			  struct seg_wait *w, struct probe_wait *pw)
{
	struct job *j = f->job;
	int64_t now = px_now_ms();
	if (now >= deadline)
		return PX_ETIMEDOUT;
	/* a reader that dies while it waits is answered within
	 * GONE_CHECK_MS: its process cannot end before we answer */
	if (tgid > 0 && now >= w->checked + GONE_CHECK_MS) {
		w->checked = now;
		if (reader_gone(f, tgid))
			return PX_ECANCELED;
	}
	int64_t until = tgid > 0 && w->checked + GONE_CHECK_MS < deadline
			? w->checked + GONE_CHECK_MS : deadline;
	if (j->remote && w->ask_at > 0 && w->ask_at < until)
		until = w->ask_at;
	struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
	tc_probe_wait_set(j, tc_probe_slot_of(j, k), pw);
	pthread_cond_timedwait(&f->tc->cond, &f->tc->lock, &ts);
	return PX_OK;
}

/*
 * Waits until segment k (of a read whose last segment is read_last) is
 * trusted, getting a writer there as px_seek_decide says: wait for one
 * that will get there, start the main writer, run a probe, or move the
 * main writer. how: the settle rule for this read, whether it is the
 * handle's first and whether it jumped there (segmath.h).
 */
static enum px_status wait_segment(struct px_tcfile *f, pid_t tgid, uint32_t k,
				   uint32_t read_last, const struct read_how *how, int64_t deadline)
{
	struct px_transcode *tc = f->tc;
	struct job *j = f->job;
	enum px_status st = PX_OK;
	struct seg_wait w = { .checked = px_now_ms(), .ask_at = -1 };
	struct probe_wait pw = { -1, 0 };

	pthread_mutex_lock(&tc->lock);
	for (;;) {
		if (tc->stopping) {
			st = PX_ESHUTDOWN;
			break;
		}
		if (j->ok[k])
			break;
		if (j->failed) {
			/* this read's own start failed, or the supervisor gave up a
			 * moment ago: fail. A later read starts a new series of
			 * restarts, but not sooner than BACKOFF_MAX_MS after giving
			 * up, so that retried reads cannot restart it in a loop */
			if (w.tried || w.probed || px_now_ms() < j->failed_ms + BACKOFF_MAX_MS) {
				st = PX_EIO;
				break;
			}
			j->failed = 0;
			j->crashes = 0;
		}
		enum px_seek_action act = PX_SEEK_WAIT;
		if (j->queued) {
			j->queued_from = k;
		} else if (tc->store && j->remote && !j->pid && !j->nprobes) {
			if (ask_remote(f, tgid, k, read_last, how->settled, &w))
				continue;
		} else if (!j->retry_at) {
			/* a failed writer backs off; the supervisor starts it again */
			act = decide(f, k, how, &w);
		}
		if (act != PX_SEEK_WAIT && reader_gone(f, tgid)) {
			st = PX_ECANCELED;
			break;
		}
		if (act == PX_SEEK_START) {
			/* a writer that stops at once (caught up) gets two more
			 * chances, then the deadline decides */
			w.tried++;
			tc_start_writer(tc, j, k, START_READ);
			if (how->first && w.tried == 1)
				tc_probe_tail(tc, j, k);
			continue;
		}
		if (act == PX_SEEK_PROBE) {
			uint32_t until = tc_probe_until(j, k, read_last);
			w.probed++;
			if (tc_start_probe(tc, j, k, until, f) == PX_OK) {
				if (j->pid)
					px_info("transcode", "asset %s: read of segment %u by pid %llu "
						"is outside the writer's reach (%u..%lld + %lld); a probe "
						"writes it, the writer goes on", j->a->id, k,
						(unsigned long long)f->client, j->from,
						(long long)j->edge,
						(long long)tc->cfg->seek_restart_segments);
				continue;
			}
		}
		if (act == PX_SEEK_MOVE)
			move_writer(f, k, how->settled);
		if ((st = nap(f, tgid, k, deadline, &w, &pw)) != PX_OK)
			break;
	}
	tc_probe_wait_set(j, -1, &pw);
	if (st == PX_ECANCELED)
		tc_cancel_probes(j, f, 0, 0, 1);
	pthread_mutex_unlock(&tc->lock);
	if (st == PX_ETIMEDOUT)
		px_warn("transcode", "asset %s: segment %u not committed within read_timeout "
			"(pid %llu)", j->a->id, k, (unsigned long long)f->client);
	return st;
}

/*
 * Opens a committed segment for reading: never through a link planted at
 * its name (others may write work_dir: root would read another file for a
 * viewer) nor a FIFO (O_NONBLOCK), a regular file only, its stat in *sb.
 * fd, or -1 with errno (ELOOP a link, EINVAL not a regular file).
 */
static int open_segment(struct px_transcode *tc, const char *path, struct stat *sb)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
	int fd = open(path, flags);
	/* cluster mode: a segment another host committed a moment ago may
	 * not show yet through this host's NFS client (a cached "no such
	 * file"): looked up again, for a second at most */
	for (int i = 0; fd < 0 && errno == ENOENT && tc->store && i < 20; i++) {
		struct timespec ts = { 0, 50 * 1000000 };
		nanosleep(&ts, NULL);
		fd = open(path, flags);
	}
	if (fd >= 0 && (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	return fd;
}

/*
 * Whether the segment file of k, stat sb, is the one listed (one host):
 * its size, made by us (a file someone else made is owned by them: see
 * files_owner), with
 * the mtime it was listed with. In cluster mode its name is its writer's
 * alone and other hosts' NFS clients may show another owner and mtime:
 * the size only. Under tc->lock.
 */
static int segment_ours(const struct px_transcode *tc, const struct job *j, uint32_t k,
			const struct stat *sb)
{
	int64_t mt = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
	if (sb->st_size != seg_size(j, k))
		return 0;
	return tc->store || (sb->st_uid == j->uid && mt == j->okmt[k]);
}

/*
 * The trusted segment k (written by generation gen), file path, is not
 * the file seamfs made any more (why: how; link: a link or not a regular
 * file). It is a segment that is not there: logged, counted (links), no
 * longer served, and made again from the segments still trusted. One
 * host: dropped from the list on disk (under its lock); the new file is
 * renamed over what is in the way, never written through it. Cluster
 * mode: remake_segment. The read waits for it again. Under tc->lock.
 */
static void segment_gone(struct px_transcode *tc, struct job *j, uint32_t k, uint64_t gen,
			 const char *path, const char *why, int link)
{
	struct px_playlist pl;
	char err[512];
	int lk = -1;
	if (!j->ok[k] || j->okgen[k] != gen)
		goto out; /* another read found it so first */
	if (link)
		j->work_links++;
	px_warn("transcode", "asset %s: committed segment %s: %s: not read; making the segment "
		"again%s", j->a->id, path, why, tc->store ? " under a new generation" : "");
	if (tc->store) {
		tc_remake_segment(j, k);
		goto out;
	}
	j->ok[k] = 0;
	lk = px_playlist_lock(j->dir);
	enum px_status ls = tc_load_list(tc, j, &pl, NULL, err, sizeof(err));
	if (ls == PX_EEXIST)
		tc_list_in_way(j, err); /* recovery goes by ok[] then */
	if (ls == PX_OK && px_playlist_drop(&pl, k, gen) &&
	    px_playlist_save(&pl, j->pl_path, err, sizeof(err)) != PX_OK)
		px_error("transcode", "asset %s: %s", j->a->id, err);
	if (ls == PX_OK)
		px_playlist_release(&pl);
out:
	px_playlist_unlock(lk);
	pthread_cond_broadcast(&tc->cond);
}

enum px_status px_transcode_read(struct px_tcfile *f, int64_t off, size_t len, void *buf,
				 uint64_t reader, size_t *got)
{
	struct px_transcode *tc = f->tc;
	struct job *j = f->job;
	int64_t deadline = px_now_ms() + tc->cfg->read_timeout_ms;
	enum px_status st = PX_OK;
	size_t done = 0;
	pid_t tgid = 0;     /* the reader's process, looked up when it matters */
	int looked = 0;

	*got = 0;
	if (off < 0)
		return PX_EINVAL;
	if (off >= j->plan.size)
		return PX_OK;
	if ((int64_t)len > j->plan.size - off)
		len = (size_t)(j->plan.size - off);
	uint32_t first_seg = seg_at(j, off), last_seg = seg_at(j, off + (int64_t)len - 1);
	/* the settle rule looks at this handle's reads before this one */
	pthread_mutex_lock(&tc->lock);
	struct px_seek_hist hist = f->hist;
	int first = f->reads++ == 0;
	px_seek_note(&f->hist, first_seg);
	tc_cancel_probes(j, f, first_seg, last_seg, 0);
	pthread_mutex_unlock(&tc->lock);
	px_debug("transcode", "asset %s: read of %zu bytes at %lld (segments %u..%u) by pid %llu",
		 j->a->id, len, (long long)off, first_seg, last_seg,
		 (unsigned long long)f->client);
	while (done < len) {
		int64_t at = off + (int64_t)done;
		uint32_t k = seg_at(j, at);
		int64_t within = at - seg_start(j, k), S = seg_size(j, k);
		size_t n = len - done;
		char name[64], path[PATH_MAX + 80];
		if ((int64_t)n > S - within)
			n = (size_t)(S - within);
		if (!looked++)
			tgid = tgid_of(reader);
		struct read_how how = { px_seek_settled(&hist, k), first,
					px_seek_jumped(&hist, k, tc->cfg->seek_restart_segments) };
		if ((st = wait_segment(f, tgid, k, last_seg, &how,
				       deadline)) != PX_OK)
			break;
		pthread_mutex_lock(&tc->lock);
		uint64_t gen = j->okgen[k];
		pthread_mutex_unlock(&tc->lock);
		px_playlist_seg_file(k, gen, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", j->dir, name);
		struct stat sb;
		int fd = open_segment(tc, path, &sb);
		int e = errno, link = fd < 0 && (e == ELOOP || e == EINVAL);
		pthread_mutex_lock(&tc->lock);
		const char *why = e == ELOOP ? "a link seamfs did not make is in the way"
				  : e == EINVAL ? "not a regular file is in the way"
				  : "gone (removed)";
		if (fd >= 0 && !segment_ours(tc, j, k, &sb))
			why = "not the file seamfs made (its size, owner or mtime changed)";
		int gone = link || (fd < 0 && e == ENOENT && !tc->store) ||
			   (fd >= 0 && !segment_ours(tc, j, k, &sb));
		if (gone)
			segment_gone(tc, j, k, gen, path, why, link);
		pthread_mutex_unlock(&tc->lock);
		if (gone) {
			if (fd >= 0)
				close(fd);
			continue; /* its new file, once made */
		}
		ssize_t r = fd >= 0 ? pread(fd, (char *)buf + done, n, within) : -1;
		e = errno;
		if (fd >= 0)
			close(fd);
		if (r != (ssize_t)n) {
			px_error("transcode", "asset %s: committed segment %s: %s", j->a->id, path,
				 r < 0 ? strerror(e) : "short read (changed on disk?)");
			st = PX_EIO;
			break;
		}
		done += n;
	}
	if (st == PX_OK)
		*got = done;
	return st;
}
