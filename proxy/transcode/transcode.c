/*
 * transcode.c - the transcode supervisor: writers, leases, recovery, reads.
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
 * is trusted by the playlist rule (listed, and not the newest entry unless
 * the writer stopped cleanly): a byte that was served is never written
 * again. A read of a segment not yet trusted (px_seek_decide, segmath.c;
 * docs/transcode.md "Seeks"):
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
 * that still have size S and their listed mtime except the newest, removes
 * every other file, rewrites the playlist, and the writer starts at the
 * first untrusted segment (it encodes one segment before it and throws it
 * away). Waiting readers just go on waiting, bounded by read_timeout.
 *
 * Lock order: tc->lock is the only lock. It is held while a writer is
 * started (lease claim, recovery's removals, the start of its input's
 * feed, which takes the feeds' own lock inside it, posix_spawn: short, and
 * atomic with the job's state; in cluster mode the placement's call,
 * place.h, comes before all that with the lock let go) and
 * while the supervisor reads a playlist; never across a pread of a
 * segment, a wait for a child's output, or anything that enters the mount.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "feed.h"
#include "lease.h"
#include "log.h"
#include "playlist.h"
#include "segmath.h"
#include "kvstore.h"
#include "place.h"
#include "tcstore.h"
#include "transcode.h"

extern char **environ;

/*
 * A writer that fails (exits non-zero, or dies without being asked to) is
 * started again after a backoff that doubles with each failure in a row:
 * 250 ms, 500 ms, 1 s, 2 s, 4 s (8 s at most); a segment that becomes
 * servable resets it. The sixth failure in a row gives up (reads of unwritten segments get
 * EIO), so restarts span at least 7.75 s: longer than a cutover of the
 * input (stall_timeout 3 s plus a request) or a source coming back.
 */
#define MAX_CRASHES 5           /* restarts in a row without a new segment */
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 8000     /* also: no new start this soon after giving up */
#define WORK_MARKER PX_TRANSCODE_MARKER

/* A probe: a short writer run of the few segments a far read needs
 * (docs/transcode.md "Seeks"), beside the job's main writer. */
#define PROBES_MAX 4
struct probe {
	pid_t pid;             /* 0: slot free */
	int pidfd, outfd;
	char out[256];
	size_t outlen;
	uint32_t from, until;  /* writes from..until */
	int64_t started_ms;
	/* issue 32: a probe serves its handle's read; once that handle reads
	 * elsewhere (or its reader is gone) and no read waits for it, it is
	 * killed. Unlisted, its segments were never served. */
	const struct px_tcfile *by; /* the handle that asked, NULL: another host */
	int waiting;           /* reads waiting for its segments now */
	int cancelled;         /* killed because its reader moved on */
	int listed;            /* it said "committed": done, ending */
};

/* Why a main writer starts: what its recovery pass counts as. */
enum start_why { START_READ, START_SEEK, START_RETRY };

struct job {
	size_t asset;
	const struct px_asset *a;
	const struct px_asset *src;
	size_t direct;         /* the source read when not fed by the daemon:
				* the one that planned, the next after a failure */
	char dir[PATH_MAX];
	char pl_path[PATH_MAX + 16];
	struct px_seg_plan plan;
	int planned;
	int remux;             /* stream copy: segment sizes vary */
	int64_t *offs;         /* remux: segment k is [offs[k], offs[k+1]) */

	/* under tc->lock */
	unsigned char *ok;     /* per segment: trusted, may be served */
	pid_t pid;             /* running writer, 0: none */
	int pidfd, outfd;
	char out[256];
	size_t outlen;
	uint32_t from;         /* the running writer's first kept segment */
	int64_t edge;          /* the next segment it will commit */
	int64_t restart_at;    /* a seek asked for a restart here, -1: none */
	int queued;
	uint32_t queued_from;
	struct px_lease lease;
	int have_lease;
	int via_feed;          /* the running writer's input is the daemon's feed */
	int failed;            /* gave up: reads of unwritten segments fail */
	int64_t failed_ms;     /* when the supervisor gave up (px_now_ms) */
	int crashes;           /* failures in a row without a new segment */
	int64_t retry_at;      /* backing off: restart then (px_now_ms), 0: not */
	uint32_t retry_from;
	int nopen;
	uint64_t recoveries;   /* writer starts that recovered from a failure */
	uint64_t work_links;   /* links found in its job directory (left alone) */
	uint64_t seeks;        /* main writer moves to where reads settled */
	struct probe probes[PROBES_MAX];
	int nprobes;           /* running probe runs */
	int yielded;           /* the main writer runs niced while probes run */
	int nice_was;          /* its nice value before */
	enum start_why queued_why;
	/* cluster mode (tc->store): the generation that wrote each trusted
	 * segment (its file name), and another host's writer followed */
	uint64_t *okgen;
	/* one host: each trusted segment's mtime as listed, the list this
	 * daemon trusts when the playlist cannot be read (a link in the way) */
	int64_t *okmt;
	int pl_in_way;         /* its playlist was found a link (reported once) */
	uid_t uid;             /* who owns the files seamfs makes in its directory */
	int remote;            /* a live lease of another host holds the job (or
				* the store does not answer): reads wait, the
				* supervisor polls the store */
	char remote_owner[128];
	uint64_t plver;        /* the store's playlist version last read */
	uint64_t takeovers;    /* leases claimed from another host's writer */
	/* far reads across hosts (docs/cluster.md "Far seeks across hosts") */
	uint64_t seek_asks;    /* reads here that asked the writer's host */
	uint64_t remote_seeks; /* other hosts' far reads served by a probe or a
				* move of our writer */
	int64_t wanted_ms;     /* when another host's want was last taken
				* (px_now_ms), 0: never */
	/* placement (place.h, docs/cluster.md "Where a transcode is written") */
	int64_t place_until;   /* placed on place_host, whose lease we wait for
				* until then (px_now_ms); 0: none pending */
	char place_host[PX_PLACE_HOST_MAX + 1];
	uint64_t place_gen;    /* the lease's generation when it was placed */
	int place_here;        /* the next start is here, not placed again */
	uint64_t starts;       /* main writers started here */
	uint64_t placed_away;  /* starts this host placed on another */
	uint64_t placed_here;  /* starts other hosts placed here */
	uint64_t place_fallbacks; /* placements not taken in time, written here */
};

struct px_transcode {
	const struct px_config *cfg;
	const struct px_catalog *cat;
	char work[PATH_MAX];
	char writer[PATH_MAX];
	char owner[128];
	int64_t orphan_ms;
	struct px_lease_store *leases;
	struct px_store *store;    /* cluster mode: borrowed; NULL: one host */
	char host[64];             /* the owner strings' host part */
	struct job *jobs;      /* one per catalog asset; used for transcodes */

	pthread_mutex_t lock;  /* guards jobs' run-time state and what follows */
	pthread_cond_t cond;   /* any job changed */
	int nwriters;          /* main writers and probes running */
	int nprobes;           /* probes running, of every job */
	size_t *queue;         /* jobs waiting for a writer slot, FIFO */
	size_t nqueue;
	int stopping;
	int evfd;
	pthread_t thread;
	int thread_started;
	struct px_tcfile *files;   /* open, under lock: freed at px_transcode_free
				    * if FUSE did not release them before the
				    * unmount */
	struct px_tc_input input;  /* how the daemon reads a writer's input */
	int have_input;            /* writers are fed (px_transcode_set_input) */
	struct px_feeds *feeds;    /* the writers' input feeds; NULL: none yet */
};

struct px_tcfile {
	struct px_transcode *tc;
	struct job *job;
	uint64_t client;
	struct px_tcfile *prev, *next; /* tc->files, under tc->lock */
	/* under tc->lock: where this handle's reads began (the settle rule) */
	struct px_seek_hist hist;
	uint64_t reads;
	int gone_logged;
};

/* ------------------------------------------------------------ helpers */

static int seg_secs(const struct job *j);
static int64_t poll_ms(const struct px_transcode *tc);
static void drop_lease(struct px_transcode *tc, struct job *j);

static void escape_id(const char *id, char *buf, size_t cap)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)id; *p && o + 4 < cap; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		    (*p == '.' && p != (const unsigned char *)id))
			buf[o++] = (char)*p;
		else
			o += (size_t)snprintf(buf + o, cap - o, "%%%02X", *p);
	}
	buf[o] = '\0';
}

/* ------------------------------------------------------------ work files
 *
 * seamfs removes only what it made (issue 14): work_dir may be any path
 * the operator names, and the daemon often runs as root. Every directory
 * seamfs makes there (work_dir itself, leases/, each job directory)
 * carries the marker file WORK_MARKER; seamfs removes entries only inside
 * a marked directory, and only those whose names are ones it makes
 * (job_file_name, px_lease_files_own). A job directory is removed only
 * once nothing else is left in it. A work_dir that exists without the
 * marker is used only when it is empty or every entry in it is shaped
 * like an older seamfs's (then it is adopted: marked); else the mount is
 * refused (px_transcode_prepare_work).
 */

static int job_dir_name(const char *name)
{
	/* what escape_id makes: [A-Za-z0-9_.%-], no leading '.' */
	if (!name[0] || name[0] == '.')
		return 0;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' ||
		      *p == '%'))
			return 0;
	return 1;
}

/* The names seamfs and its writer make in a job directory. */
static int job_file_name(const char *name)
{
	static const char *const fixed[] = { WORK_MARKER, "plan.json", "plan.json.tmp",
					     "playlist", "playlist.tmp", NULL };
	for (size_t i = 0; fixed[i]; i++)
		if (strcmp(name, fixed[i]) == 0)
			return 1;
	if (px_write_atomic_tmp(name, "playlist") || px_write_atomic_tmp(name, "plan.json"))
		return 1; /* px_playlist_save's, write_plan_file's */
	/* an older seamfs's plan.json.PID.tmp */
	if (strncmp(name, "plan.json.", 10) == 0) {
		const char *p = name + 10;
		if (*p < '0' || *p > '9')
			return 0;
		while (*p >= '0' && *p <= '9')
			p++;
		return strcmp(p, ".tmp") == 0;
	}
	/* px_playlist_seg_file: seg-%06u.ts (fewer than a million), in
	 * cluster mode seg-%06u.gGEN.ts; the writer's new file NAME.XXXXXX.tmp
	 * (an older writer's NAME.tmp); a probe's before it is listed:
	 * .probe.tmp (PX_WRITER_PROBE_TMP) */
	uint32_t k;
	uint64_t gen;
	char tail[16];
	if (!px_playlist_seg_parse(name, &k, &gen, tail, sizeof(tail)))
		return 0;
	return strcmp(tail, "") == 0 || strcmp(tail, ".tmp") == 0 ||
	       px_write_atomic_tmp(tail, "") || strcmp(tail, ".probe.tmp") == 0;
}

/* Whether dir (not a symlink) is a directory carrying the marker. */
static int marked_dir(const char *dir)
{
	char path[PATH_MAX + 32];
	struct stat sb;
	if (lstat(dir, &sb) || !S_ISDIR(sb.st_mode))
		return 0;
	snprintf(path, sizeof(path), "%s/%s", dir, WORK_MARKER);
	return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Puts the marker into dir (kept if there). 0, or -1 with errno. */
static int mark_dir(const char *dir)
{
	static const char text[] =
		"seamfs made this directory (work_dir of its transcodes). It removes\n"
		"only the files it made here; anything else is left alone.\n";
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, WORK_MARKER);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -1;
	int ok = write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1;
	int e = errno;
	close(fd);
	errno = e;
	return ok ? 0 : -1;
}

/*
 * Removes the files seamfs makes from the job directory dir (marked);
 * with rmdir, then the marker and dir itself, unless something else is
 * in it: that is left, dir with it, and a log line says so. Returns 0
 * when everything went (dir too, with rmdir).
 */
static int clear_job_dir(const char *dir, int rmdir_too)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char foreign[NAME_MAX + 1] = "";
	int rc = 0;
	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, WORK_MARKER) == 0)
			continue;
		/* a directory under one of our names is not ours: unlinkat fails */
		if (!job_file_name(de->d_name) || unlinkat(dirfd(d), de->d_name, 0)) {
			snprintf(foreign, sizeof(foreign), "%s", de->d_name);
			rc = -1;
		}
	}
	if (rc == 0 && rmdir_too) {
		if (unlinkat(dirfd(d), WORK_MARKER, 0) && errno != ENOENT)
			rc = -1;
	}
	closedir(d);
	if (rc == 0 && rmdir_too && rmdir(dir))
		rc = -1;
	if (foreign[0])
		px_warn("transcode", "cleanup: %s holds %s, which seamfs did not make; leaving it%s",
			dir, foreign, rmdir_too ? " and the directory" : "");
	return rc;
}

/* An entry of a work_dir without the marker: one an older seamfs made (a
 * job directory holding only job files, or the leases directory holding
 * only lease files)? Empty job directories count only under the name of a
 * transcode of cat. Else its name (and the foreign name in it) into what. */
static int legacy_entry(const char *work, const char *name, const struct px_catalog *cat,
			char *what, size_t cap)
{
	char path[PATH_MAX * 2], esc[PATH_MAX];
	struct stat sb;
	int leases = strcmp(name, "leases") == 0, n = 0, ok = 1;
	snprintf(what, cap, "%s", name);
	snprintf(path, sizeof(path), "%s/%s", work, name);
	if ((!leases && !job_dir_name(name)) || lstat(path, &sb) || !S_ISDIR(sb.st_mode))
		return 0;
	DIR *d = opendir(path);
	struct dirent *de;
	while (d && ok && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n++;
		ok = strcmp(de->d_name, WORK_MARKER) == 0 ||
		     (leases ? px_lease_files_own(de->d_name) : job_file_name(de->d_name));
		if (!ok)
			snprintf(what, cap, "%s/%s", name, de->d_name);
	}
	if (!d)
		return 0;
	closedir(d);
	if (!ok || n || leases)
		return ok;
	for (size_t i = 0; i < cat->nassets; i++) {
		if (cat->assets[i].kind == PX_ASSET_PLAIN)
			continue;
		escape_id(cat->assets[i].id, esc, sizeof(esc));
		if (strcmp(esc, name) == 0)
			return 1;
	}
	return 0;
}

static void work_path(const struct px_config *cfg, char *buf, size_t cap)
{
	if (cfg->work_dir)
		snprintf(buf, cap, "%s", cfg->work_dir);
	else
		snprintf(buf, cap, "%s/transcode", cfg->state_dir ? cfg->state_dir : "/tmp/seamfs");
}

enum px_status px_transcode_prepare_work(const struct px_config *cfg,
					 const struct px_catalog *cat, char *err, size_t errlen)
{
	char work[PATH_MAX], what[PATH_MAX * 2], path[PATH_MAX * 2];
	struct stat sb;
	size_t n = 0, i;
	DIR *d;
	struct dirent *de;

	for (i = 0; i < cat->nassets && cat->assets[i].kind == PX_ASSET_PLAIN; i++)
		;
	if (i == cat->nassets)
		return PX_OK; /* no transcode: work_dir is not used */
	work_path(cfg, work, sizeof(work));
	if (stat(work, &sb)) {
		if (errno != ENOENT || px_mkdir_p(work, 0755) || mark_dir(work))
			goto io;
		return PX_OK;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "work_dir %s: not a directory", work);
		return PX_EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s", work, WORK_MARKER);
	if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode))
		return PX_OK;
	/* no marker: empty, made by an older seamfs, or someone else's */
	if (!(d = opendir(work)))
		goto io;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n++;
		if (!legacy_entry(work, de->d_name, cat, what, sizeof(what))) {
			closedir(d);
			snprintf(err, errlen, "work_dir %s is not empty and seamfs did not make it "
				 "(no %s in it): it holds %s; not using it (name an empty or new "
				 "directory, or move its contents away)", work, WORK_MARKER, what);
			return PX_EINVAL;
		}
	}
	closedir(d);
	/* every entry is an older seamfs's: mark them, then work_dir itself */
	if ((d = opendir(work))) {
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", work, de->d_name);
			if (mark_dir(path))
				px_warn("transcode", "work_dir: cannot mark %s: %s", path,
					strerror(errno));
		}
		closedir(d);
	}
	if (mark_dir(work))
		goto io;
	if (n)
		px_info("transcode", "work_dir %s: made by an older seamfs (no %s): its %zu "
			"entries look like seamfs's; marked and kept", work, WORK_MARKER, n);
	return PX_OK;
io:
	snprintf(err, errlen, "work_dir %s: %s", work, strerror(errno));
	return PX_EIO;
}

static void wake(struct px_transcode *tc)
{
	uint64_t one = 1;
	ssize_t w = write(tc->evfd, &one, sizeof(one));
	(void)w;
}

/* The profile's identity: a plan made for another profile is not reused. */
static void profile_key(const struct px_transcode *tc, const struct job *j, char *buf,
			size_t cap)
{
	const struct px_source *s = &j->src->sources[0];
	/* written into plan.json: the source's key, no credentials */
	if (j->remux)
		snprintf(buf, cap, "remux|%s|%d", s->key, seg_secs(j));
	else
		snprintf(buf, cap, "%s|%d|%lld|%lld|%d", s->key, j->a->height,
			 (long long)j->a->video_bitrate, (long long)j->a->audio_bitrate,
			 j->a->segment_seconds);
	(void)tc;
}

/*
 * What a writer reads. The daemon's feed when writers are fed and the
 * source asset is served now (*fed set; the source asset's path is the
 * input's name, no headers): the daemon's read path then picks, balances
 * and cuts over the source. Else source k of the source asset itself;
 * *hdr is that source when its provider's headers go along (a URL), NULL
 * otherwise. Under tc->lock (or before the thread starts).
 */
static const char *writer_input(const struct px_transcode *tc, const struct job *j, size_t k,
				int *fed, const struct px_source **hdr)
{
	const struct px_source *s = &j->src->sources[k < j->src->nsources ? k : 0];
	*hdr = NULL;
	*fed = tc->have_input && tc->feeds &&
	       tc->input.listed(tc->input.arg, (size_t)(j->src - tc->cat->assets));
	if (*fed)
		return j->src->path;
	if (s->url)
		*hdr = s;
	return s->url ? s->url : s->path;
}

/* argv for seamfs-writer: the input (hdr: the source whose provider's
 * headers go along, or NULL) and profile, plus extra. Strings are
 * borrowed from the catalog, input or bufs. A URL and its headers may
 * carry secrets, and a command line is readable by every local user in
 * /proc: they go to the writer's stdin instead ("--input -"), in
 * *secret (malloc'd, for spawn(); NULL when none, or out of memory). */
static size_t profile_argv(const struct px_transcode *tc, const struct job *j, char **argv,
			   char bufs[4][32], const char *input, const struct px_source *hdr,
			   char **secret)
{
	const struct px_provider *p = hdr ? &tc->cat->providers[hdr->provider] : NULL;
	size_t n = 0;
	*secret = NULL;
	argv[n++] = (char *)tc->writer;
	argv[n++] = NULL; /* the verb, set by the caller */
	argv[n++] = "--input";
	argv[n++] = (char *)input;
	if (hdr) {
		size_t len = strlen(input) + 2;
		for (size_t i = 0; p && i < p->nheaders; i++)
			len += strlen(p->headers[i]) + 1;
		if ((*secret = malloc(len))) {
			size_t o = (size_t)snprintf(*secret, len, "%s\n", input);
			for (size_t i = 0; p && i < p->nheaders; i++)
				o += (size_t)snprintf(*secret + o, len - o, "%s\n", p->headers[i]);
			argv[n - 1] = "-";
		}
	}
	snprintf(bufs[3], 32, "%d", seg_secs(j));
	if (j->remux) {
		argv[n++] = "--remux";
		argv[n++] = "--segment-seconds";
		argv[n++] = bufs[3];
		return n;
	}
	snprintf(bufs[0], 32, "%d", j->a->height);
	snprintf(bufs[1], 32, "%lld", (long long)j->a->video_bitrate);
	snprintf(bufs[2], 32, "%lld", (long long)j->a->audio_bitrate);
	argv[n++] = "--height";
	argv[n++] = bufs[0];
	argv[n++] = "--video-bitrate";
	argv[n++] = bufs[1];
	argv[n++] = "--audio-bitrate";
	argv[n++] = bufs[2];
	argv[n++] = "--segment-seconds";
	argv[n++] = bufs[3];
	return n;
}

/* posix_spawn with stdout to a new pipe (its read end in *outfd); stdin
 * is /dev/null, or a pipe that carries secret (profile_argv) and ends;
 * feedfd (>= 0) becomes the writer's PX_FEED_FD. */
static enum px_status spawn(char **argv, pid_t *pid, int *outfd, const char *secret,
			    int feedfd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	int p[2], in[2] = { -1, -1 };
	enum px_status st = PX_EIO;
	/* a secret fits a pipe's buffer (64 KiB): written at once, below */
	if (secret && (strlen(secret) > 60000 || pipe2(in, O_CLOEXEC)))
		return PX_EIO;
	if (pipe2(p, O_CLOEXEC)) {
		if (secret) {
			close(in[0]);
			close(in[1]);
		}
		return PX_EIO;
	}
	posix_spawn_file_actions_init(&fa);
	if (secret)
		posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	else
		posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	if (feedfd >= 0)
		posix_spawn_file_actions_adddup2(&fa, feedfd, PX_FEED_FD);
	/* the calling thread may block signals and libfuse ignores SIGPIPE:
	 * the writer starts with neither (SIGPIPE ends it when the daemon is
	 * gone) */
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGHUP);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	int rc = posix_spawn(pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (secret) {
		/* written while our copy of the read end is open: a writer that
		 * exits without reading its input must not end the daemon with
		 * SIGPIPE (this may run before libfuse ignores it) */
		if (!rc) {
			size_t len = strlen(secret);
			ssize_t w = write(in[1], secret, len); /* fits the pipe: no wait */
			if (w != (ssize_t)len)
				px_warn("transcode", "could not hand the writer its input");
		}
		close(in[0]);
		close(in[1]);
	}
	if (rc) {
		px_error("transcode", "cannot run %s: %s", argv[0], strerror(rc));
		close(p[0]);
		return st;
	}
	*outfd = p[0];
	return PX_OK;
}

/* ------------------------------------------------------------ planning */

static int seg_secs(const struct job *j)
{
	return j->a->segment_seconds ? j->a->segment_seconds : 2; /* remux: 2 */
}

/* Bytes of segment k and where it starts in the file. */
static int64_t seg_size(const struct job *j, uint32_t k)
{
	return j->remux ? j->offs[k + 1] - j->offs[k] : j->plan.seg_bytes;
}

static int64_t seg_start(const struct job *j, uint32_t k)
{
	return j->remux ? j->offs[k] : (int64_t)k * j->plan.seg_bytes;
}

/* The segment holding byte off (< size). */
static uint32_t seg_at(const struct job *j, int64_t off)
{
	if (!j->remux)
		return (uint32_t)(off / j->plan.seg_bytes);
	uint32_t lo = 0, hi = j->plan.nseg - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (j->offs[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

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
 * deadline; *out is its JSON. PX_EAGAIN: that plan failed or took too
 * long (the writer's stderr says why), another source may do. */
static enum px_status run_plan(struct px_transcode *tc, struct job *j, size_t k,
			       int64_t deadline, json_t **out)
{
	char *argv[64], bufs[4][32], *buf = NULL, stimeout[24];
	const struct px_source *s = &j->src->sources[k], *hdr = s->url ? s : NULL;
	const char *input = s->url ? s->url : s->path;
	char *secret;
	size_t n = profile_argv(tc, j, argv, bufs, input, hdr, &secret), got = 0, cap = 0;
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
	st = spawn(argv, &pid, &fd, secret, -1);
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
		return PX_EAGAIN;
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

/* What is on disk now for each listed entry. In cluster mode a file
 * named with its generation is never written again by anyone (its name is
 * its writer's alone), and an mtime seen through another host's NFS
 * client may differ from the writer's: existence and size are checked. */
static struct px_seg_seen *look(const struct px_transcode *tc, const struct job *j,
				const struct px_playlist *pl)
{
	struct px_seg_seen *seen = calloc(pl->n + 1, sizeof(*seen));
	for (size_t i = 0; seen && i < pl->n; i++) {
		char name[64], path[PATH_MAX + 80];
		struct stat sb;
		px_playlist_seg_file(pl->e[i].index, pl->e[i].gen, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", j->dir, name);
		/* lstat: a link swapped in for a segment is no segment; on one
		 * host a file someone else owns is not ours either */
		if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    (tc->store || sb.st_uid == j->uid)) {
			seen[i].exists = 1;
			seen[i].size = sb.st_size;
			seen[i].mtime_ns = tc->store ? pl->e[i].mtime_ns
					   : (int64_t)sb.st_mtim.tv_sec * 1000000000 +
					     sb.st_mtim.tv_nsec;
		}
	}
	return seen;
}

/* The job's playlist: the file in its directory, or in cluster mode the
 * store's (*ver its version there). PX_ENOTFOUND when there is none; in
 * cluster mode a store that does not answer is its failure (err says);
 * PX_EEXIST: a link (or what is not a regular file) is in the way of the
 * file, not read. */
static enum px_status load_list(const struct px_transcode *tc, const struct job *j,
				struct px_playlist *pl, uint64_t *ver, char *err, size_t errlen)
{
	if (ver)
		*ver = 0;
	if (!tc->store) {
		enum px_status st = px_playlist_load(j->pl_path, pl, err, errlen);
		return st == PX_EIO && (errno == ELOOP || errno == EINVAL) ? PX_EEXIST : st;
	}
	char *text = NULL, what[PATH_MAX];
	size_t len = 0;
	uint64_t v = 0;
	enum px_status st = px_tcstore_pl_get(tc->store, j->a->id, &text, &len, &v);
	px_playlist_init(pl, 0, 0);
	if (st != PX_OK) {
		snprintf(err, errlen, "store %s: the playlist of %s: %s", px_store_url(tc->store),
			 j->a->id, px_strerror(st));
		return st;
	}
	snprintf(what, sizeof(what), "store:%s", j->a->id);
	st = px_playlist_parse(what, text, len, pl, err, errlen);
	free(text);
	if (st == PX_OK && ver)
		*ver = v;
	return st;
}

/* Reports j's playlist found a link (load_list's PX_EEXIST, err its
 * words): logged and counted once while it stays so. Under tc->lock. */
static void list_in_way(struct job *j, const char *err)
{
	if (!j->pl_in_way) {
		j->pl_in_way = 1;
		j->work_links++;
		px_warn("transcode", "asset %s: %s; the segments this daemon trusts stand in "
			"for it", j->a->id, err);
	}
}

/* The list this daemon trusts for j (one host), for a playlist it cannot
 * read: every servable segment with the mtime it was listed with, all
 * closed (#CLEAN). Under tc->lock. */
static void list_from_memory(const struct job *j, struct px_playlist *pl)
{
	px_playlist_init(pl, j->plan.seg_bytes, j->plan.nseg);
	for (uint32_t k = 0; k < j->plan.nseg; k++)
		if (j->ok[k] && px_playlist_add(pl, k, seg_size(j, k), j->okmt[k]) != PX_OK)
			break;
	pl->clean = pl->n > 0;
}

/* How many segments of j are trusted. Under tc->lock. */
static uint32_t trusted(const struct job *j)
{
	uint32_t n = 0;
	for (uint32_t k = 0; j->ok && k < j->plan.nseg; k++)
		n += j->ok[k] != 0;
	return n;
}

/* Recomputes j->ok from the playlist on disk. seen: check the files too.
 * Under tc->lock (or before the thread starts). */
static void apply_list(struct px_transcode *tc, struct job *j, struct px_playlist *pl,
		       int check_files);

static void refresh(struct px_transcode *tc, struct job *j, int check_files)
{
	struct px_playlist pl;
	char err[512];
	uint64_t ver = 0;
	enum px_status st = load_list(tc, j, &pl, &ver, err, sizeof(err));
	if (st == PX_ENOTFOUND)
		return;
	if (st == PX_EEXIST) {
		list_in_way(j, err);
		return;
	}
	j->pl_in_way = 0;
	if (st != PX_OK) {
		if (!tc->store || st == PX_EINVAL)
			px_warn("transcode", "asset %s: %s", j->a->id, err);
		return;
	}
	if (ver)
		j->plver = ver;
	apply_list(tc, j, &pl, check_files);
}

/* Marks the trusted entries of pl (which it releases) servable. Under
 * tc->lock (or before the thread starts). */
static void apply_list(struct px_transcode *tc, struct job *j, struct px_playlist *pl_in,
		       int check_files)
{
	struct px_playlist pl = *pl_in;
	if (pl.seg_bytes == j->plan.seg_bytes && pl.nseg == j->plan.nseg) {
		unsigned char *t = calloc(pl.n + 1, 1);
		struct px_seg_seen *seen = check_files ? look(tc, j, &pl) : NULL;
		if (t && (!check_files || seen)) {
			px_playlist_trust(&pl, seen, t);
			for (size_t i = 0; i < pl.n; i++)
				if (t[i] && pl.e[i].size == seg_size(j, pl.e[i].index)) {
					j->ok[pl.e[i].index] = 1;
					j->okgen[pl.e[i].index] = pl.e[i].gen;
					j->okmt[pl.e[i].index] = pl.e[i].mtime_ns;
				}
		}
		free(t);
		free(seen);
	}
	px_playlist_release(&pl);
	pthread_cond_broadcast(&tc->cond);
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
	    strcmp(l.owner, tc->owner) != 0) {
		px_error("transcode", "asset %s: its profile changed but %s still holds "
			 "its lease", j->a->id, l.owner);
		return PX_EAGAIN;
	}
	/* what seamfs made there; anything else stays (and is logged) */
	(void)clear_job_dir(j->dir, 0);
	/* each source in catalog order, the first that answers plans:
	 * a dead first origin must not keep the asset out of the mount */
	json_t *root = NULL;
	int64_t deadline = px_now_ms() + tc->cfg->probe_timeout_ms;
	st = PX_EAGAIN;
	for (size_t k = 0; k < j->src->nsources && st == PX_EAGAIN; k++) {
		const struct px_source *s = &j->src->sources[k];
		if (k && px_now_ms() >= deadline) {
			px_error("transcode", "asset %s: probe_timeout spent; sources %zu.. of "
				 "%zu not tried", j->a->id, k + 1, j->src->nsources);
			break;
		}
		/* anything but PX_EAGAIN is the writer's fault, not the source's */
		if ((st = run_plan(tc, j, k, deadline, &root)) == PX_OK) {
			j->direct = k;
			if (k)
				px_info("transcode", "asset %s: planned from %s (source %zu of "
					"%zu)", j->a->id, s->shown, k + 1,
					j->src->nsources);
		}
	}
	if (st != PX_OK)
		return st == PX_EAGAIN ? PX_EIO : st;
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

/* Whether job directory dir carries seamfs's marker, given a moment: a
 * host sharing work_dir that made it just now writes the marker right
 * after (up to 1 s, then not a directory seamfs made). */
static int marked_soon(const char *dir)
{
	for (int i = 0; i < 20; i++) {
		if (marked_dir(dir))
			return 1;
		struct timespec ts = { 0, 50 * 1000000 };
		nanosleep(&ts, NULL);
	}
	return marked_dir(dir);
}

enum px_status px_transcode_plan(struct px_transcode *tc, size_t asset, int64_t *size)
{
	struct job *j = &tc->jobs[asset];
	char key[8192], path[PATH_MAX + 16];
	enum px_status st;

	*size = -1;
	if (!j->a || !j->src)
		return PX_EINVAL;
	profile_key(tc, j, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/plan.json", j->dir);
	if (mkdir(j->dir, 0755) == 0 ? mark_dir(j->dir) : errno != EEXIST) {
		px_error("transcode", "asset %s: cannot make %s: %s", j->a->id, j->dir,
			 strerror(errno));
		return PX_EIO;
	}
	if (!marked_soon(j->dir)) {
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
	st = read_plan_file(j, path, key, &j->plan) == PX_OK ? PX_OK
	     : plan_afresh(tc, j, key, path);
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
	refresh(tc, j, 1);
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

/* ------------------------------------------------------------ writers */

/* Whether the entry de of the directory dirfd is a symbolic link. */
static int link_at(int dirfd, const struct dirent *de)
{
	struct stat sb;
	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_LNK;
	return fstatat(dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode);
}

/* Whether a running probe of j writes segment k. Under tc->lock. */
static int probe_covers(const struct job *j, uint32_t k)
{
	for (int i = 0; i < PROBES_MAX; i++)
		if (j->probes[i].pid && k >= j->probes[i].from && k <= j->probes[i].until)
			return 1;
	return 0;
}

/*
 * Recovery: with the lease held, keeps the trusted entries of the playlist
 * and removes every other file, except the segments running probes are
 * writing (their NAME.probe.tmp, listed when they finish); returns the
 * first segment >= from that is not trusted. *repaired: it distrusted an
 * entry or removed a leftover. Under tc->lock; takes the playlist's lock
 * so that no probe lists its segments in between.
 */
static uint32_t recover(struct px_transcode *tc, struct job *j, uint32_t from, int *repaired)
{
	struct px_playlist pl, keep;
	char err[512];
	unsigned char *t = NULL;
	struct px_seg_seen *seen = NULL;
	size_t ntrust = 0;
	uint64_t ver = 0;
	/* one host: the directory's flock; cluster mode: the store's
	 * compare-and-set (a flock a stopped writer of another host held
	 * would stop everyone) */
	int lk = tc->store ? -1 : px_playlist_lock(j->dir);
	int tries = 0;
	enum px_status st;

again:
	st = load_list(tc, j, &pl, &ver, err, sizeof(err));
	if (st == PX_EEXIST) {
		/* a link at the playlist: not read, not removed (the save below
		 * renames the cleaned list over it, never writing through) */
		list_in_way(j, err);
		list_from_memory(j, &pl);
		st = PX_OK;
	}
	*repaired = 0;
	ntrust = 0;
	px_playlist_init(&keep, j->plan.seg_bytes, j->plan.nseg);
	if (st == PX_OK && (pl.seg_bytes != j->plan.seg_bytes || pl.nseg != j->plan.nseg)) {
		snprintf(err, sizeof(err), "%s: lists %u x %lld bytes, the plan %u x %lld",
			 j->pl_path, pl.nseg, (long long)pl.seg_bytes, j->plan.nseg,
			 (long long)j->plan.seg_bytes);
		px_playlist_release(&pl);
		st = PX_EINVAL;
	}
	if (st == PX_OK) {
		t = calloc(pl.n + 1, 1);
		seen = look(tc, j, &pl);
		if (t && seen)
			ntrust = px_playlist_trust(&pl, seen, t);
		for (size_t i = 0; t && seen && i < pl.n; i++) {
			if (t[i] && pl.e[i].size != seg_size(j, pl.e[i].index)) {
				px_warn("transcode", "recovery: asset %s: segment %u has %lld bytes, "
					"the plan %lld", j->a->id, pl.e[i].index,
					(long long)pl.e[i].size,
					(long long)seg_size(j, pl.e[i].index));
				t[i] = 0;
				ntrust--;
			}
			if (!t[i]) {
				*repaired = 1;
				px_info("transcode", "recovery: asset %s: segment %u distrusted (%s)",
					j->a->id, pl.e[i].index,
					i + 1 == pl.n && !pl.clean ? "the newest listed"
								    : "changed on disk");
				continue;
			}
			if (px_playlist_add_gen(&keep, pl.e[i].index, pl.e[i].size,
						pl.e[i].mtime_ns, pl.e[i].gen) != PX_OK)
				ntrust--;
		}
	} else if (st != PX_ENOTFOUND) {
		if (tc->store && st != PX_EINVAL) {
			/* the store does not answer: touch nothing (what it lists
			 * is not known); the writer lists what it makes later */
			px_warn("transcode", "recovery: asset %s: %s; leaving its files as they are",
				j->a->id, err);
			uint32_t first = from < j->plan.nseg ? from : 0;
			while (first < j->plan.nseg && j->ok[first])
				first++;
			return first;
		}
		px_warn("transcode", "recovery: asset %s: %s; starting afresh", j->a->id, err);
	}
	/* cluster mode, no list in the store (never written, or the store
	 * restarted empty): segment files there are kept, untrusted, since
	 * another host may still serve what it trusted before; the new
	 * writer's files carry its own generation */
	int keep_segments = tc->store && st == PX_ENOTFOUND;
	/* leftovers: .tmp files, unlisted or distrusted segments (in cluster
	 * mode also the files of generations fenced now) */
	DIR *d = opendir(j->dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		uint32_t k;
		uint64_t g;
		char tail[16];
		/* a link under a name seamfs makes: seamfs makes none, someone
		 * who can write here planted it; left alone, logged, counted */
		if (job_file_name(de->d_name) && link_at(dirfd(d), de)) {
			px_warn("transcode", "recovery: asset %s: %s/%s is a link seamfs did not "
				"make: left alone", j->a->id, j->dir, de->d_name);
			j->work_links++;
			continue;
		}
		/* only names seamfs makes: a user's file here is left alone */
		if (!job_file_name(de->d_name) ||
		    !px_playlist_seg_parse(de->d_name, &k, &g, tail, sizeof(tail))) {
			size_t len = strlen(de->d_name);
			if (!(job_file_name(de->d_name) && len > 4 &&
			      strcmp(de->d_name + len - 4, ".tmp") == 0))
				continue;
			if (unlinkat(dirfd(d), de->d_name, 0) == 0)
				*repaired = 1;
			continue;
		}
		if (probe_covers(j, k) && (!tc->store || g == j->lease.gen))
			continue; /* a running probe's: it lists them when it ends */
		if (keep_segments && tail[0] == '\0' && g != j->lease.gen)
			continue;
		long at = k < keep.nseg ? px_playlist_find(&keep, k) : -1;
		int listed = at >= 0 && tail[0] == '\0' && keep.e[at].gen == g;
		if (!listed) {
			if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
				*repaired = 1;
				px_debug("transcode", "recovery: asset %s: removed %s", j->a->id,
					 de->d_name);
			}
		}
	}
	if (d)
		closedir(d);
	keep.clean = keep.n > 0;
	if (!tc->store) {
		if (px_playlist_save(&keep, j->pl_path, err, sizeof(err)) != PX_OK)
			px_error("transcode", "recovery: asset %s: %s", j->a->id, err);
	} else {
		size_t len;
		uint64_t nv = 0;
		char *text = px_playlist_format(&keep, &len);
		enum px_status ps = text ? px_tcstore_pl_put(tc->store, j->a->id, j->lease.gen, ver,
							     text, len, &nv)
					 : PX_ENOMEM;
		free(text);
		if (ps == PX_OK) {
			j->plver = nv;
		} else if (ps == PX_EEXIST && tries++ < 3) {
			/* changed meanwhile (by a probe of ours): once more */
			px_playlist_release(&keep);
			if (st == PX_OK)
				px_playlist_release(&pl);
			free(t);
			free(seen);
			t = NULL;
			seen = NULL;
			goto again;
		} else {
			px_warn("transcode", "recovery: asset %s: the store did not take the cleaned "
				"list: %s", j->a->id, px_strerror(ps));
		}
	}
	px_playlist_unlock(lk);
	memset(j->ok, 0, j->plan.nseg);
	for (size_t i = 0; i < keep.n; i++) {
		j->ok[keep.e[i].index] = 1;
		j->okgen[keep.e[i].index] = keep.e[i].gen;
		j->okmt[keep.e[i].index] = keep.e[i].mtime_ns;
	}
	uint32_t first = from < j->plan.nseg ? from : 0;
	while (first < j->plan.nseg && j->ok[first])
		first++;
	if (st == PX_OK)
		px_info("transcode", "recovery: asset %s: %zu of %zu listed segments trusted; "
			"first untrusted from %u is %u", j->a->id, ntrust, pl.n, from, first);
	px_playlist_release(&keep);
	if (st == PX_OK)
		px_playlist_release(&pl);
	free(t);
	free(seen);
	return first;
}

/*
 * Cluster mode: whether a lease's age may be judged now. While the store
 * did not answer (an outage, a failover) nobody could renew a lease, so a
 * heartbeat is as old as the outage when it answers again: for orphan_after
 * from then on a lease held by a live-looking host is not orphaned, and
 * its holder renews it meanwhile. Without this a failover of a few seconds
 * handed live writers to other hosts (bench/cluster.py --case failover:
 * readers paused 7 s in 4 runs of 5, against 2.9 s). A dead host's lease
 * is taken that much later. Any thread.
 */
static int store_settled(const struct px_transcode *tc)
{
	int64_t back = tc->store ? px_store_back_ms(tc->store) : 0;
	return !back || px_now_ms() - back >= tc->orphan_ms;
}

/* Holds j's lease: claims it by compare-and-set (again, if ours: the new
 * generation fences any writer of the old one). Under tc->lock. */
static enum px_status hold_lease(struct px_transcode *tc, struct job *j)
{
	struct px_lease cur;
	int64_t orphan = tc->orphan_ms;
	int had = 0, other_host = 0;
	size_t hl = strlen(tc->host);
	enum px_status gst = px_lease_get(tc->leases, j->a->id, &cur);
	if (tc->store && gst != PX_OK && gst != PX_ENOTFOUND && gst != PX_EINVAL) {
		/* no claim while the store does not answer: the holder may be
		 * alive on another host, which only the store can tell */
		if (!j->remote)
			px_warn("transcode", "lease: asset %s: store %s: %s; no writer starts until it "
				"answers", j->a->id, px_store_url(tc->store), px_strerror(gst));
		return gst;
	}
	/* a holder on this host whose daemon and writer are gone is orphaned
	 * now, not after orphan_after */
	if (gst == PX_OK && !cur.released) {
		long opid = strncmp(cur.owner, tc->host, hl) == 0 && cur.owner[hl] == ':'
			    ? strtol(cur.owner + hl + 1, NULL, 10) : 0;
		had = 1;
		other_host = !(strncmp(cur.owner, tc->host, hl) == 0 && cur.owner[hl] == ':');
		if (opid > 0 && px_pid_gone((pid_t)opid) &&
		    (cur.writer_pid <= 0 || px_pid_gone((pid_t)cur.writer_pid)))
			orphan = -1;
	}
	if (orphan >= 0 && other_host && !store_settled(tc))
		orphan = INT64_MAX / 4; /* only a released (or no) lease now */
	enum px_status st = px_lease_claim(tc->leases, j->a->id, tc->owner, orphan, &j->lease);
	if (st == PX_OK) {
		j->have_lease = 1;
		j->remote = 0;
		px_info("transcode", "lease: asset %s session %s generation %" PRIu64 " claimed by %s",
			j->a->id, j->lease.session, j->lease.gen, tc->owner);
		if (tc->store && had && other_host) {
			j->takeovers++;
			px_warn("transcode", "takeover: asset %s from %s (generation %" PRIu64 ", no "
				"heartbeat for %lld ms); writing it here from its last trusted "
				"segment", j->a->id, cur.owner, cur.gen,
				(long long)(px_lease_now(tc->leases) - cur.heartbeat_ms));
		}
	} else if (st == PX_EAGAIN) {
		if (tc->store) {
			/* another host's live writer: follow its commits */
			if (!j->remote || strcmp(j->remote_owner, j->lease.owner))
				px_info("transcode", "lease: asset %s is written by %s (generation %"
					PRIu64 "); serving its segments as they are committed",
					j->a->id, j->lease.owner, j->lease.gen);
			snprintf(j->remote_owner, sizeof(j->remote_owner), "%s", j->lease.owner);
		} else {
			px_warn("transcode", "lease: asset %s is held by %s (generation %" PRIu64 ")",
				j->a->id, j->lease.owner, j->lease.gen);
		}
	} else {
		px_error("transcode", "lease: asset %s: %s", j->a->id, px_strerror(st));
	}
	return st;
}

/*
 * While probes of j run, its main writer gives them the CPU: a reader
 * waits for a probe now, while the main writer is ahead of its readers or
 * about to be moved (docs/transcode.md "Seeks"). It runs YIELD_NICE
 * nicer meanwhile and gets its priority back when the last probe ends
 * (a daemon without CAP_SYS_NICE cannot give it back: that writer stays
 * nicer until it ends; the next one starts at the usual priority). Under
 * tc->lock.
 */
#define YIELD_NICE 10
#define GONE_CHECK_MS 250       /* how often a waiting read looks at its reader */
static void main_yield(struct job *j, int yield)
{
	if (!j->pid || yield == j->yielded)
		return;
	if (yield) {
		errno = 0;
		int cur = getpriority(PRIO_PROCESS, (id_t)j->pid);
		if (errno)
			return;
		j->nice_was = cur;
		j->yielded = setpriority(PRIO_PROCESS, (id_t)j->pid,
					 cur + YIELD_NICE > 19 ? 19 : cur + YIELD_NICE) == 0;
		return;
	}
	if (setpriority(PRIO_PROCESS, (id_t)j->pid, j->nice_was))
		px_debug("transcode", "asset %s: writer pid %d keeps its lower priority: %s",
			 j->a->id, (int)j->pid, strerror(errno));
	j->yielded = 0;
}

/* Starts the daemon's feed of j's source asset for a writer about to be
 * spawned; adds its options to argv (at *n; sfd, stmo: their buffers).
 * The writer's end in *feedfd (never PX_FEED_FD itself: posix_spawn's
 * dup2 onto the same number would keep its close-on-exec). Under
 * tc->lock. */
static enum px_status feed_writer(struct px_transcode *tc, struct job *j, char **argv,
				  size_t *n, char sfd[16], char stmo[24], int *feedfd,
				  struct px_feed **feed)
{
	enum px_status st = px_feeds_start(tc->feeds, &tc->input,
					   (size_t)(j->src - tc->cat->assets), j->a->id, feedfd,
					   feed);
	if (st == PX_OK && *feedfd == PX_FEED_FD) {
		int moved = fcntl(*feedfd, F_DUPFD_CLOEXEC, PX_FEED_FD + 1);
		close(*feedfd);
		*feedfd = moved;
		st = moved < 0 ? PX_EIO : PX_OK;
	}
	if (st != PX_OK)
		goto out;
	snprintf(sfd, 16, "%d", PX_FEED_FD);
	/* the daemon bounds the open (the hello) by admission_timeout and
	 * each read by read_timeout; the writer waits that long and a little
	 * more for an answer */
	int64_t bound = tc->cfg->read_timeout_ms > tc->cfg->admission_timeout_ms
			? tc->cfg->read_timeout_ms : tc->cfg->admission_timeout_ms;
	bound += 5000;
	snprintf(stmo, 24, "%lld", (long long)(bound < 3600000 ? bound : 3600000)); /* its max */
	argv[(*n)++] = "--input-fd";
	argv[(*n)++] = sfd;
	argv[(*n)++] = "--io-timeout-ms";
	argv[(*n)++] = stmo;
out:
	return st;
}

/*
 * Spawns `seamfs-writer run` for j from segment `from` under j's lease (a
 * probe run when until >= 0: segments from..until only). *via_feed: its
 * input is the daemon's feed; *shown: its input as the log shows it. Under
 * tc->lock.
 */
static enum px_status spawn_run(struct px_transcode *tc, struct job *j, uint32_t from,
				int64_t until, pid_t *pid, int *outfd, int *via_feed,
				char *shown, size_t shown_cap)
{
	char *argv[96], bufs[4][32], sfrom[16], snseg[16], sbytes[32], sgen[24], shb[24];
	char speed[32], suntil[16], sfd[16], stmo[24];
	const struct px_source *hdr;
	int fed, feedfd = -1;
	struct px_feed *feed = NULL;
	const char *input = writer_input(tc, j, j->direct, &fed, &hdr);
	char *secret;
	size_t n = profile_argv(tc, j, argv, bufs, input, hdr, &secret);
	enum px_status st = PX_OK;

	argv[1] = "run";
	snprintf(sfrom, sizeof(sfrom), "%u", from);
	snprintf(snseg, sizeof(snseg), "%u", j->plan.nseg);
	snprintf(sbytes, sizeof(sbytes), "%lld", (long long)j->plan.seg_bytes);
	snprintf(sgen, sizeof(sgen), "%" PRIu64, j->lease.gen);
	snprintf(shb, sizeof(shb), "%lld", (long long)tc->cfg->heartbeat_ms);
	char leasedir[PATH_MAX + 8];
	snprintf(leasedir, sizeof(leasedir), "%s/leases", tc->work);
	const char *extra[] = { "--work-dir", j->dir, "--from", sfrom, "--segments", snseg,
		"--segment-bytes", sbytes, "--lease-key", j->a->id,
		"--lease-gen", sgen, "--heartbeat-ms", shb, NULL };
	for (size_t i = 0; extra[i]; i++)
		argv[n++] = (char *)extra[i];
	if (tc->store) {
		/* cluster mode: the lease and the playlist are the store's; the
		 * password goes by its file's name, never itself */
		argv[n++] = "--store";
		argv[n++] = (char *)px_store_url(tc->store);
		argv[n++] = "--cluster";
		argv[n++] = (char *)px_store_prefix(tc->store);
		if (px_store_password_file(tc->store)) {
			argv[n++] = "--store-password-file";
			argv[n++] = (char *)px_store_password_file(tc->store);
		}
	} else {
		argv[n++] = "--lease-dir";
		argv[n++] = leasedir;
	}
	if (tc->cfg->writer_max_speed > 0 && until < 0) {
		/* a probe is not paced: a reader waits for it */
		snprintf(speed, sizeof(speed), "%g", tc->cfg->writer_max_speed);
		argv[n++] = "--max-speed";
		argv[n++] = speed;
	}
	if (until >= 0) {
		snprintf(suntil, sizeof(suntil), "%lld", (long long)until);
		argv[n++] = "--probe-until";
		argv[n++] = suntil;
	}
	if (fed)
		st = feed_writer(tc, j, argv, &n, sfd, stmo, &feedfd, &feed);
	argv[n] = NULL;
	if (st == PX_OK)
		st = spawn(argv, pid, outfd, secret, feedfd);
	if (feedfd >= 0)
		close(feedfd); /* the writer has its own; its exit ends the feed */
	if (feed)
		px_feed_go(tc->feeds, feed, st == PX_OK ? *pid : 0);
	free(secret);
	*via_feed = fed;
	if (fed)
		snprintf(shown, shown_cap, "%s (fed by the daemon's read path)", input);
	else
		snprintf(shown, shown_cap, "%s", hdr ? hdr->shown : input);
	return st;
}

/* How long a host placed on has to start the writer: its poll, the
 * start's calls and the requester's next poll, on a loaded machine. */
static int64_t place_hold_ms(const struct px_transcode *tc)
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
		.live_ms = 2 * tc->cfg->heartbeat_ms, .hold_ms = place_hold_ms(tc),
		.orphan_ms = tc->orphan_ms };
	pthread_mutex_unlock(&tc->lock);
	enum px_status st = px_place_choose(tc->store, &req, host, sizeof(host), &fresh, &gen);
	pthread_mutex_lock(&tc->lock);
	if (j->pid || j->queued || j->nprobes || tc->stopping)
		return 1;
	if (st != PX_OK || !host[0] || strcmp(host, tc->host) == 0)
		return 0;
	if (j->have_lease)
		drop_lease(tc, j); /* a failed writer's: for that host to claim */
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

/* Starts the main writer for j at segment `from` now, or queues it when
 * the host has max_writers running. why: what its recovery counts as.
 * Under tc->lock. */
static void start_writer(struct px_transcode *tc, struct job *j, uint32_t from,
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
		enum px_status hs = hold_lease(tc, j);
		if (hs != PX_OK && tc->store && hs != PX_EINVAL) {
			/* another host writes it (or the store cannot say): reads
			 * wait, the supervisor follows the store */
			j->remote = 1;
			pthread_cond_broadcast(&tc->cond);
			wake(tc);
			return;
		}
		if (hs != PX_OK) {
			j->failed = 1;
			pthread_cond_broadcast(&tc->cond);
			return;
		}
	}
	from = recover(tc, j, from, &repaired);
	/* a restart after a failure is a recovery, and so is a start that
	 * found a dead writer's leftovers; a seek is not (j->seeks) */
	if (why == START_RETRY || (why == START_READ && repaired))
		j->recoveries++;
	if (from >= j->plan.nseg) {
		/* everything from there on is already trusted */
		pthread_cond_broadcast(&tc->cond);
		return;
	}
	if (spawn_run(tc, j, from, -1, &j->pid, &j->outfd, &j->via_feed, shown,
		      sizeof(shown)) != PX_OK) {
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
	if (j->nprobes)
		main_yield(j, 1);
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
	wake(tc);
}

/* Whether a probe may start now: a writer slot is free and no main writer
 * waits in line for one. Under tc->lock. */
static int probe_slot_free(const struct px_transcode *tc)
{
	return tc->nwriters < tc->cfg->max_writers && tc->nqueue == 0 && !tc->stopping;
}

/*
 * Starts a probe run of j for segments from..until beside its main writer
 * (docs/transcode.md "Seeks"): it never touches the main writer, and its
 * segments are listed, and so trusted, when it ends. A probe that takes
 * the lease runs recovery first, as a main writer's start does. PX_OK
 * also when that recovery finds from..until trusted (nothing starts);
 * PX_EBUSY when no slot is free; PX_EAGAIN (j->failed set) when the
 * lease is someone else's. Under tc->lock.
 */
static enum px_status start_probe(struct px_transcode *tc, struct job *j, uint32_t from,
				  uint32_t until, const struct px_tcfile *by)
{
	char shown[PATH_MAX];
	struct probe *p = NULL;
	int via;

	for (int i = 0; i < PROBES_MAX && !p; i++)
		if (!j->probes[i].pid)
			p = &j->probes[i];
	if (!p || !probe_slot_free(tc))
		return PX_EBUSY;
	/* under the current generation when held: a new one would fence the
	 * running writers of this job, which are ours */
	if (!j->have_lease) {
		int repaired;
		enum px_status hs = hold_lease(tc, j);
		if (hs != PX_OK && tc->store && hs != PX_EINVAL) {
			j->remote = 1;
			pthread_cond_broadcast(&tc->cond);
			wake(tc);
			return PX_EAGAIN;
		}
		if (hs != PX_OK) {
			j->failed = 1;
			j->failed_ms = px_now_ms();
			pthread_cond_broadcast(&tc->cond);
			return PX_EAGAIN;
		}
		/* a new generation starts with recovery, as a main writer's
		 * does: the last writer's newest entry (open, never served) is
		 * distrusted and its leftovers go. Without it a probe that took
		 * the lease of a dead writer (another host's, issue 25) skipped
		 * that entry as listed, listed its own segments before it, and
		 * the read waited for a segment no writer would write */
		uint32_t first = recover(tc, j, from, &repaired);
		pthread_cond_broadcast(&tc->cond);
		if (first > until)
			return PX_OK; /* from..until all trusted: nothing to write */
		from = first;
	}
	memset(p, 0, sizeof(*p));
	p->pidfd = p->outfd = -1;
	if (spawn_run(tc, j, from, until, &p->pid, &p->outfd, &via, shown, sizeof(shown)) !=
	    PX_OK) {
		p->pid = 0;
		return PX_EIO;
	}
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	p->from = from;
	p->until = until;
	p->started_ms = px_now_ms();
	p->by = by;
	j->nprobes++;
	tc->nprobes++;
	main_yield(j, 1);
	tc->nwriters++;
	if (from)
		px_info("transcode", "probe pid %d for asset %s started: segments %u..%u (warm-up "
			"%u), input %s", (int)p->pid, j->a->id, from, until, from - 1, shown);
	else
		px_info("transcode", "probe pid %d for asset %s started: segments %u..%u, input %s",
			(int)p->pid, j->a->id, from, until, shown);
	wake(tc);
	return PX_OK;
}

/* The last segment a probe of j from k writes for a read whose last
 * segment is read_last: it ends before the first segment another writer
 * of j starts at (px_seek_probe_until). Under tc->lock. */
static uint32_t probe_until(const struct job *j, uint32_t k, uint32_t read_last)
{
	uint32_t stop_at = UINT32_MAX;
	if (j->pid && j->from > k)
		stop_at = j->from;
	for (int q = 0; q < PROBES_MAX; q++)
		if (j->probes[q].pid && j->probes[q].from > k && j->probes[q].from < stop_at)
			stop_at = j->probes[q].from;
	return px_seek_probe_until(k, read_last, j->plan.nseg, j->ok, stop_at);
}

/* The slot of a running probe of j that writes segment k, or -1. Under
 * tc->lock. */
static int probe_slot_of(const struct job *j, uint32_t k)
{
	for (int q = 0; q < PROBES_MAX; q++)
		if (j->probes[q].pid && k >= j->probes[q].from && k <= j->probes[q].until)
			return q;
	return -1;
}

/* The probe one read waits for: its slot (-1: none) and pid (the slot may
 * be another probe's by the time the read stops waiting). */
struct probe_wait {
	int slot;
	pid_t pid;
};

/* Counts the read of *w as waiting for the probe in slot (-1: for none),
 * no longer for the one before. Under tc->lock. */
static void probe_wait_set(struct job *j, int slot, struct probe_wait *w)
{
	if (w->slot >= 0 && j->probes[w->slot].pid == w->pid && j->probes[w->slot].waiting)
		j->probes[w->slot].waiting--;
	w->slot = slot;
	w->pid = slot >= 0 ? j->probes[slot].pid : 0;
	if (slot >= 0)
		j->probes[slot].waiting++;
}

/*
 * Kills the probes of j that handle f asked for and no read waits for,
 * when f reads first..last now and they write none of it, or (gone) when
 * f's reader has exited: their reader has moved on (issue 32). A killed
 * probe has listed nothing, or all it wrote (the list is renamed into
 * place), so no byte it made was served and then differs. Under tc->lock.
 */
static void cancel_probes(struct job *j, const struct px_tcfile *f, uint32_t first,
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

/* Whether a probe that handle f asked for runs and is not cancelled: its
 * next one waits for it (one at a time per handle). Under tc->lock. */
static int probing_for(const struct job *j, const struct px_tcfile *f)
{
	for (int q = 0; q < PROBES_MAX; q++)
		if (j->probes[q].pid && j->probes[q].by == f && !j->probes[q].cancelled)
			return 1;
	return 0;
}

/* Whether j has readers: handles open here, or (cluster mode) a far read
 * of another host asked for it within read_timeout. Under tc->lock. */
static int has_readers(const struct px_transcode *tc, const struct job *j)
{
	return j->nopen > 0 ||
	       (j->wanted_ms && px_now_ms() - j->wanted_ms < tc->cfg->read_timeout_ms);
}

/* Whether one handle here is j's only reader (no far read of another
 * host asked within read_timeout): a settled read of it may move the
 * main writer at once, nobody takes turns with it. Under tc->lock. */
static int sole_reader(const struct px_transcode *tc, const struct job *j)
{
	return j->nopen == 1 &&
	       !(j->wanted_ms && px_now_ms() - j->wanted_ms < tc->cfg->read_timeout_ms);
}

/* Starts the next queued job if a slot is free. Under tc->lock. */
static void run_queue(struct px_transcode *tc)
{
	while (tc->nqueue && tc->nwriters < tc->cfg->max_writers && !tc->stopping) {
		struct job *j = &tc->jobs[tc->queue[0]];
		memmove(tc->queue, tc->queue + 1, (tc->nqueue - 1) * sizeof(*tc->queue));
		tc->nqueue--;
		j->queued = 0;
		start_writer(tc, j, j->queued_from, j->queued_why);
	}
}

/* Gives the lease of j back once no writer of it runs (main or probe) and
 * none is due to restart. Under tc->lock. */
static void drop_lease(struct px_transcode *tc, struct job *j)
{
	if (j->pid || j->nprobes || j->retry_at || j->queued)
		return;
	if (j->have_lease && px_lease_release(tc->leases, &j->lease) != PX_OK)
		px_warn("transcode", "lease: asset %s: could not release", j->a->id);
	j->have_lease = 0;
}

/* The backoff before the restart that follows failure number n in a row. */
static int64_t backoff_ms(int n)
{
	int64_t d = BACKOFF_FIRST_MS;
	for (int i = 1; i < n && d < BACKOFF_MAX_MS; i++)
		d *= 2;
	return d < BACKOFF_MAX_MS ? d : BACKOFF_MAX_MS;
}

/*
 * The writer of j has exited with status. Under tc->lock, on the
 * supervisor's thread (which also starts the writer once a backoff ends).
 */
static void writer_ended(struct px_transcode *tc, struct job *j, int status)
{
	pid_t pid = j->pid;
	int64_t restart = j->restart_at;
	uint32_t from = j->from;
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

	if (j->pidfd >= 0)
		close(j->pidfd);
	if (j->outfd >= 0)
		close(j->outfd);
	j->pidfd = j->outfd = -1;
	j->pid = 0;
	j->restart_at = -1;
	tc->nwriters--;
	if (code == 0) {
		px_info("transcode", "writer pid %d of asset %s stopped cleanly", (int)pid,
			j->a->id);
		refresh(tc, j, 0);
		j->crashes = 0;
		drop_lease(tc, j);
	} else if (tc->stopping) {
		/* killed by us at unmount; recovery happens at the next start */
	} else if (restart >= 0) {
		/* killed by us for a seek: recovery (in start_writer) claims the
		 * lease by CAS, trusts, cleans, and starts where the seek asked,
		 * at once, behind the jobs already waiting for a slot */
		if (has_readers(tc, j)) {
			run_queue(tc);
			start_writer(tc, j, (uint32_t)restart, START_SEEK);
		} else {
			drop_lease(tc, j);
		}
	} else if (code == 3 && tc->store) {
		/* fenced: another host took the lease over (our writer was stopped
		 * or cut off past orphan_after); it writes now, we follow */
		px_warn("transcode", "writer pid %d of asset %s was fenced: its lease (generation %"
			PRIu64 ") was taken over by another host; following that host's writer",
			(int)pid, j->a->id, j->lease.gen);
		j->have_lease = 0;
		j->remote = 1;
		j->crashes = 0;
		refresh(tc, j, 0);
	} else if (code == 2 || code == 4) {
		/* its command line, or a segment that never fits: the same again */
		px_error("transcode", "writer pid %d of asset %s failed (exit %d); reads of "
			 "unwritten segments fail", (int)pid, j->a->id, code);
		j->failed = 1;
		j->failed_ms = px_now_ms();
		drop_lease(tc, j);
	} else {
		/* input lost (exit 1), lease taken over (3), killed or crashed:
		 * worth another run, after a backoff */
		j->crashes++;
		if (code > 0)
			px_warn("transcode", "writer pid %d of asset %s failed (exit %d) before segment "
				"%lld", (int)pid, j->a->id, code, (long long)j->edge);
		else
			px_warn("transcode", "writer pid %d of asset %s died (signal %d) before segment "
				"%lld; recovering", (int)pid, j->a->id, WTERMSIG(status),
				(long long)j->edge);
		if (code == 1 && !j->via_feed && j->src->nsources > 1) {
			/* no daemon to cut over for it: the next run reads the next source */
			j->direct = (j->direct + 1) % j->src->nsources;
			const struct px_source *s = &j->src->sources[j->direct];
			px_info("transcode", "asset %s: the next writer reads source %zu of %zu, %s",
				j->a->id, j->direct + 1, j->src->nsources, s->shown);
		}
		if (j->crashes > MAX_CRASHES) {
			px_error("transcode", "asset %s: writer failed %d times in a row; giving up",
				 j->a->id, j->crashes);
			j->failed = 1;
			j->failed_ms = px_now_ms();
			drop_lease(tc, j);
		} else if (has_readers(tc, j)) {
			/* recovery runs when it starts; readers go on waiting, bounded
			 * by read_timeout */
			int64_t d = backoff_ms(j->crashes);
			j->retry_at = px_now_ms() + d;
			j->retry_from = from;
			px_info("transcode", "asset %s: restarting its writer in %lld ms (failure %d of "
				"%d in a row)", j->a->id, (long long)d, j->crashes, MAX_CRASHES);
		} else {
			drop_lease(tc, j);
		}
	}
	run_queue(tc);
	pthread_cond_broadcast(&tc->cond);
}

/* Starts the writers whose backoff has ended; returns when the next one
 * ends (px_now_ms), or INT64_MAX. Under tc->lock, on the supervisor's
 * thread. */
static int64_t retry_due(struct px_transcode *tc)
{
	int64_t now = px_now_ms(), next = INT64_MAX;
	for (size_t i = 0; i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		if (!j->retry_at)
			continue;
		if (j->retry_at > now) {
			if (j->retry_at < next)
				next = j->retry_at;
			continue;
		}
		j->retry_at = 0;
		if (has_readers(tc, j) && !j->pid && !j->failed) {
			start_writer(tc, j, j->retry_from, START_RETRY);
		} else if (!j->pid) {
			drop_lease(tc, j);
		}
		pthread_cond_broadcast(&tc->cond);
	}
	return next;
}

/* Lines from a writer's stdout. Under tc->lock. */
static void writer_output(struct px_transcode *tc, struct job *j)
{
	ssize_t r = read(j->outfd, j->out + j->outlen, sizeof(j->out) - 1 - j->outlen);
	if (r <= 0) {
		/* end of output: the death comes through the pidfd (or here) */
		if (j->pidfd < 0) {
			int status;
			if (waitpid(j->pid, &status, 0) == j->pid)
				writer_ended(tc, j, status);
		} else {
			close(j->outfd);
			j->outfd = -1;
		}
		return;
	}
	j->outlen += (size_t)r;
	j->out[j->outlen] = '\0';
	char *line = j->out, *nl;
	int changed = 0;
	while ((nl = strchr(line, '\n'))) {
		unsigned k;
		*nl = '\0';
		if (sscanf(line, "committed %u", &k) == 1 && k < j->plan.nseg) {
			j->edge = (int64_t)k + 1;
			changed = 1;
		}
		if (strncmp(line, "link ", 5) == 0)
			j->work_links++; /* the writer logged it */
		line = nl + 1;
	}
	j->outlen = strlen(line);
	memmove(j->out, line, j->outlen + 1);
	if (j->outlen == sizeof(j->out) - 1)
		j->outlen = 0; /* not ours: a line this long */
	if (changed) {
		uint32_t before = trusted(j);
		refresh(tc, j, 0);
		/* progress resets the backoff: a segment that became servable.
		 * Not a commit as such: a restarted writer first commits again
		 * the newest entry that recovery distrusted, and one that dies
		 * right after that has made no progress */
		if (trusted(j) > before)
			j->crashes = 0;
	}
}

/* Lines from a probe's stdout ("committed K" once it listed them). Under
 * tc->lock. */
static void probe_output(struct px_transcode *tc, struct job *j, struct probe *p)
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
		refresh(tc, j, 0);
}

/* A probe of j has exited with status. Its failure is not the main
 * writer's: no backoff, no count; a reader still waiting for its segments
 * asks again (at most three probes per read) or waits for the main
 * writer. Under tc->lock, on the supervisor's thread. */
static void probe_ended(struct px_transcode *tc, struct job *j, struct probe *p, int status)
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
	memset(p, 0, sizeof(*p));
	p->pidfd = p->outfd = -1;
	j->nprobes--;
	tc->nprobes--;
	if (!j->nprobes)
		main_yield(j, 0);
	tc->nwriters--;
	refresh(tc, j, 0);
	drop_lease(tc, j);
	run_queue(tc);
	pthread_cond_broadcast(&tc->cond);
}

/* Kills writers whose lease is orphaned, and probes that ran longer than
 * any reader waits for them (read_timeout). Under tc->lock. */
static void check_leases(struct px_transcode *tc)
{
	int64_t now = px_lease_now(tc->leases);
	for (size_t i = 0; i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		struct px_lease l;
		if (!j->pid || px_lease_get(tc->leases, j->a->id, &l) != PX_OK)
			continue;
		/* cluster mode: a heartbeat longer, so that a host waiting to take
		 * the lease over (it polls more often) gets it first: its takeover
		 * fences this writer, our kill would only race it */
		int64_t orphan = tc->orphan_ms + (tc->store ? tc->cfg->heartbeat_ms : 0);
		if (l.gen == j->lease.gen && store_settled(tc) && px_lease_orphaned(&l, now, orphan)) {
			px_warn("transcode", "lease: asset %s session %s orphaned (no heartbeat for "
				"%lld ms); killing writer pid %d", j->a->id, l.session,
				(long long)(now - l.heartbeat_ms), (int)j->pid);
			kill(j->pid, SIGKILL);
		}
	}
	int64_t mono = px_now_ms();
	for (size_t i = 0; i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		for (int q = 0; q < PROBES_MAX; q++) {
			struct probe *p = &j->probes[q];
			if (p->pid && mono - p->started_ms > tc->cfg->read_timeout_ms) {
				px_warn("transcode", "probe pid %d of asset %s still running after "
					"read_timeout; killing it", (int)p->pid, j->a->id);
				kill(p->pid, SIGKILL);
			}
		}
	}
}

/* How often a host that follows another's writer asks the store for its
 * commits and its lease (cluster mode): heartbeat / 4, 100 to 500 ms. */
static int64_t poll_ms(const struct px_transcode *tc)
{
	int64_t d = tc->cfg->heartbeat_ms / 4;
	return d < 100 ? 100 : d > 500 ? 500 : d;
}

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
		"writing it here", j->a->id, j->place_host, (long long)place_hold_ms(tc));
	return 0;
}

/*
 * Cluster mode: for each job read here with no writer of ours, one call
 * for the playlist's version and the lease. A new version: the list is
 * read and its trusted segments become servable here (another host's
 * writer committed them). A lease no live host holds any more (orphaned,
 * released): the job is no longer remote, and a waiting read starts our
 * writer, which claims it (the takeover). Under tc->lock, which it lets go
 * around the store's calls.
 */
static void poll_remote(struct px_transcode *tc)
{
	for (size_t i = 0; i < tc->cat->nassets && !tc->stopping; i++) {
		struct job *j = &tc->jobs[i];
		if (!j->a || !j->planned || j->pid || j->nopen <= 0 ||
		    trusted(j) == j->plan.nseg)
			continue;
		uint64_t oldver = j->plver, ver = 0, ver2 = 0;
		struct px_lease l;
		struct px_playlist pl;
		char err[512];
		int have_pl = 0;
		pthread_mutex_unlock(&tc->lock);
		enum px_status st = px_tcstore_poll(tc->store, j->a->id, &ver, &l);
		if (st == PX_OK && ver && ver != oldver &&
		    load_list(tc, j, &pl, &ver2, err, sizeof(err)) == PX_OK)
			have_pl = 1;
		int64_t now = px_lease_now(tc->leases);
		pthread_mutex_lock(&tc->lock);
		if (st != PX_OK)
			continue; /* the store does not answer: nothing changes */
		if (have_pl && pl.seg_bytes == j->plan.seg_bytes && pl.nseg == j->plan.nseg) {
			uint32_t before = trusted(j);
			j->plver = ver2;
			apply_list(tc, j, &pl, 0);
			if (trusted(j) > before)
				px_debug("transcode", "asset %s: %u segments committed by %s", j->a->id,
					 trusted(j) - before, l.owner);
		} else if (have_pl) {
			px_playlist_release(&pl);
		}
		int live_other = l.gen && !l.released &&
				 (!store_settled(tc) || !px_lease_orphaned(&l, now, tc->orphan_ms)) &&
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

/*
 * Cluster mode: trusted segment k of j is not the file its writer made.
 * The store's list changes only under the lease, and the file's name is
 * its generation's: it is made again under a new generation (never at the
 * swapped name), whose recovery drops the entry (look: not a regular file
 * of its size). Our writer is moved there (its restart claims the next
 * generation); with none, the next read of k starts one, which claims the
 * lease when no live host holds it, or else asks the holder (serve_want),
 * which does this on its side. Under tc->lock.
 */
static void remake_segment(struct job *j, uint32_t k)
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
		remake_segment(j, k);
	}
	if (j->ok[k] || j->queued || j->retry_at || (!j->pid && !j->nprobes))
		return; /* listed (it serves it at its next poll), or ours restart */
	struct px_seek_view v = {
		.main_running = j->pid != 0, .main_from = j->from,
		.main_edge = j->edge, .ahead = tc->cfg->seek_restart_segments,
		.probe_covers = probe_covers(j, k), .slot_free = probe_slot_free(tc),
		.probes_running = tc->nprobes, .settled = w->settled, .first_read = 0 };
	enum px_seek_action act = px_seek_decide(&v, k);
	if (act == PX_SEEK_MOVE && j->restart_at >= 0)
		act = PX_SEEK_WAIT;
	if (act == PX_SEEK_START) {
		/* only probes of ours run: the main writer starts there */
		px_info("transcode", "asset %s: %s reads segment %u; starting the writer there",
			j->a->id, w->from, k);
		j->remote_seeks++;
		start_writer(tc, j, k, START_SEEK);
	} else if (act == PX_SEEK_PROBE) {
		if (start_probe(tc, j, k, probe_until(j, k, w->last), NULL) == PX_OK) {
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

/*
 * Cluster mode: the far reads that readers on other hosts left for the
 * jobs whose lease we hold with a writer running (px_tcstore_want_take,
 * docs/cluster.md "Far seeks across hosts"), each served as a local far
 * read: a probe of that segment, or the main writer moved there once that
 * host's reads settle. What they write is listed under our lease's
 * generation; the asking host serves it once its poll reads the list.
 * Under tc->lock, which it lets go around the store's calls.
 */
static void serve_wants(struct px_transcode *tc)
{
	for (size_t i = 0; i < tc->cat->nassets && !tc->stopping; i++) {
		struct job *j = &tc->jobs[i];
		struct px_tc_want w[WANTS_MAX];
		size_t n = 0;
		if (!j->a || !j->planned || !j->have_lease || (!j->pid && !j->nprobes) ||
		    trusted(j) == j->plan.nseg)
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

/*
 * Cluster mode: starts the writers other hosts placed here (place.h), as
 * a read here would, from the segment their requester needs. Their
 * readers are elsewhere: has_readers() counts the placement until their
 * wants take over; the failures in a row carry over, so that a writer
 * that fails everywhere still gives up. Under tc->lock, which it lets go
 * around the store's call.
 */
static void take_placed(struct px_transcode *tc)
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
		if (j->pid || j->queued || q[i].age_ms > place_hold_ms(tc))
			continue; /* written here already, or its requester does it */
		j->placed_here++;
		j->wanted_ms = px_now_ms();
		j->crashes = q[i].crashes;
		j->remote = 0;
		j->place_here = 1;
		px_info("transcode", "asset %s: placed here by %s; starting its writer at segment "
			"%u", j->a->id, q[i].by, q[i].from);
		start_writer(tc, j, q[i].from, q[i].crashes ? START_RETRY : START_READ);
	}
}

static void *supervisor_main(void *arg)
{
	struct px_transcode *tc = arg;
	size_t n = tc->cat->nassets;
	/* per job: the main writer's pidfd and stdout, and each probe's */
	size_t cap = 2 * n * (1 + PROBES_MAX) + 1;
	struct pollfd *pf = calloc(cap, sizeof(*pf));
	size_t *who = calloc(cap, sizeof(*who));
	int *whop = calloc(cap, sizeof(*whop));    /* probe slot, -1: the main writer */
	/* the process each entry was polled for: handling one entry may end
	 * that writer and start another (a seek's restart, the queue), whose
	 * new pidfd or pipe can take a number a later, stale entry polled;
	 * matched by number alone, that entry's revents were taken for the
	 * new writer's, and waitpid() then waited, under tc->lock, for the
	 * new writer to end (the status and every read stalled meanwhile) */
	pid_t *whopid = calloc(cap, sizeof(*whopid));
	sigset_t all;
	int64_t next_check = px_now_ms() + tc->cfg->heartbeat_ms / 2;
	int64_t next_poll = px_now_ms();

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (!pf || !who || !whop || !whopid) {
		px_error("transcode", "supervisor: out of memory");
		goto out;
	}
	pthread_mutex_lock(&tc->lock);
	while (!tc->stopping) {
		size_t np = 0;
		/* writers whose backoff ended start first, so that their fds are
		 * polled too; poll's timeout ends the next backoff */
		int64_t due = retry_due(tc);
		pf[np++] = (struct pollfd){ tc->evfd, POLLIN, 0 };
		for (size_t i = 0; i < n; i++) {
			struct job *j = &tc->jobs[i];
			for (int q = 0; q < PROBES_MAX; q++) {
				struct probe *p = &j->probes[q];
				if (!p->pid)
					continue;
				if (p->pidfd >= 0) {
					who[np] = i;
					whop[np] = q;
					whopid[np] = p->pid;
					pf[np++] = (struct pollfd){ p->pidfd, POLLIN, 0 };
				}
				if (p->outfd >= 0) {
					who[np] = i;
					whop[np] = q;
					whopid[np] = p->pid;
					pf[np++] = (struct pollfd){ p->outfd, POLLIN, 0 };
				}
			}
			if (!j->pid)
				continue;
			if (j->pidfd >= 0) {
				who[np] = i;
				whop[np] = -1;
				whopid[np] = j->pid;
				pf[np++] = (struct pollfd){ j->pidfd, POLLIN, 0 };
			}
			if (j->outfd >= 0) {
				who[np] = i;
				whop[np] = -1;
				whopid[np] = j->pid;
				pf[np++] = (struct pollfd){ j->outfd, POLLIN, 0 };
			}
		}
		if (tc->store && px_now_ms() >= next_poll) {
			poll_remote(tc);
			serve_wants(tc);
			take_placed(tc);
			next_poll = px_now_ms() + poll_ms(tc);
			due = retry_due(tc);
		}
		int64_t wake_at = due < next_check ? due : next_check;
		if (tc->store && next_poll < wake_at)
			wake_at = next_poll;
		int64_t wait = wake_at - px_now_ms();
		pthread_mutex_unlock(&tc->lock);
		int r = poll(pf, np, wait < 0 ? 0 : (int)wait);
		pthread_mutex_lock(&tc->lock);
		if (r < 0 && errno != EINTR)
			break;
		if (pf[0].revents) {
			uint64_t v;
			ssize_t rd = read(tc->evfd, &v, sizeof(v));
			(void)rd;
		}
		for (size_t k = 1; r > 0 && k < np; k++) {
			struct job *j = &tc->jobs[who[k]];
			if (whop[k] >= 0) {
				struct probe *p = &j->probes[whop[k]];
				if (!pf[k].revents || !p->pid || p->pid != whopid[k])
					continue;
				if (pf[k].fd == p->outfd) {
					probe_output(tc, j, p);
					/* no pidfd: the end of its output is its end */
					if (p->outfd < 0 && p->pidfd < 0) {
						int status;
						if (waitpid(p->pid, &status, 0) == p->pid)
							probe_ended(tc, j, p, status);
					}
				} else if (pf[k].fd == p->pidfd) {
					int status;
					while (p->outfd >= 0 &&
					       poll(&(struct pollfd){ p->outfd, POLLIN, 0 }, 1, 0) > 0)
						probe_output(tc, j, p);
					if (waitpid(p->pid, &status, 0) == p->pid)
						probe_ended(tc, j, p, status);
				}
				continue;
			}
			if (!pf[k].revents || !j->pid || j->pid != whopid[k])
				continue;
			if (pf[k].fd == j->outfd) {
				writer_output(tc, j);
			} else if (pf[k].fd == j->pidfd) {
				int status;
				/* drain what it printed before it died */
				while (j->outfd >= 0 && poll(&(struct pollfd){ j->outfd, POLLIN, 0 },
							    1, 0) > 0 && j->pid)
					writer_output(tc, j);
				if (j->pid && waitpid(j->pid, &status, 0) == j->pid)
					writer_ended(tc, j, status);
			}
		}
		if (px_now_ms() >= next_check) {
			check_leases(tc);
			next_check = px_now_ms() + tc->cfg->heartbeat_ms / 2;
		}
	}
	pthread_mutex_unlock(&tc->lock);
out:
	free(pf);
	free(who);
	free(whop);
	free(whopid);
	return NULL;
}

/* ------------------------------------------------------------ lifecycle */

/* Job directories seamfs made for assets no longer transcoded, unprotected
 * by a lease; only their files seamfs made go (clear_job_dir). Anything
 * else in work_dir is someone else's and left alone. */
static void cleanup_orphans(struct px_transcode *tc)
{
	DIR *d = opendir(tc->work);
	struct dirent *de;
	int64_t now = px_lease_now(tc->leases);
	while (d && (de = readdir(d))) {
		char path[PATH_MAX * 2], esc[PATH_MAX];
		int known = 0;
		if (de->d_name[0] == '.' || strcmp(de->d_name, "leases") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tc->work, de->d_name);
		if (!job_dir_name(de->d_name) || !marked_dir(path)) {
			px_info("transcode", "cleanup: leaving %s alone: seamfs did not make it (no %s)",
				path, WORK_MARKER);
			continue;
		}
		for (size_t i = 0; i < tc->cat->nassets && !known; i++) {
			if (tc->cat->assets[i].kind == PX_ASSET_PLAIN)
				continue;
			escape_id(tc->cat->assets[i].id, esc, sizeof(esc));
			known = strcmp(esc, de->d_name) == 0;
		}
		if (known)
			continue;
		/* a lease is keyed by the asset id, which the name escapes */
		char id[PATH_MAX];
		size_t o = 0;
		for (const char *p = de->d_name; *p && o + 1 < sizeof(id); p++) {
			unsigned v;
			if (p[0] == '%' && sscanf(p + 1, "%2x", &v) == 1) {
				id[o++] = (char)v;
				p += 2;
			} else {
				id[o++] = *p;
			}
		}
		id[o] = '\0';
		struct px_lease l;
		if (px_lease_get(tc->leases, id, &l) == PX_OK &&
		    px_lease_protects(&l, now, tc->orphan_ms, tc->orphan_ms)) {
			px_info("transcode", "cleanup: keeping %s/%s: its lease (%s) is live or "
				"recently expired", tc->work, de->d_name, l.owner);
			continue;
		}
		px_info("transcode", "cleanup: removing %s (no asset, no lease)", path);
		(void)clear_job_dir(path, 1);
		if (px_lease_drop(tc->leases, id) != PX_OK)
			px_warn("transcode", "cleanup: lease of %s not dropped", id);
	}
	if (d)
		closedir(d);
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
	tc->orphan_ms = cfg->orphan_after_ms > 0 ? cfg->orphan_after_ms : 3 * cfg->heartbeat_ms;
	if (tc->orphan_ms <= cfg->heartbeat_ms) {
		/* every writer would look orphaned between two heartbeats */
		px_warn("transcode", "orphan_after (%lld ms) is not above heartbeat (%lld ms); "
			"using %lld ms", (long long)tc->orphan_ms, (long long)cfg->heartbeat_ms,
			(long long)(2 * cfg->heartbeat_ms));
		tc->orphan_ms = 2 * cfg->heartbeat_ms;
	}
	work_path(cfg, tc->work, sizeof(tc->work));
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
	tc->store = store;
	if (store && cfg->host_id)
		snprintf(tc->host, sizeof(tc->host), "%s", cfg->host_id);
	else if (gethostname(tc->host, sizeof(tc->host) - 1))
		snprintf(tc->host, sizeof(tc->host), "localhost");
	for (char *p = tc->host; *p; p++)
		if (*p == ' ' || *p == '\n' || *p == ':')
			*p = '_';
	px_lease_make_owner_host(tc->owner, sizeof(tc->owner), tc->host);
	tc->jobs = calloc(cat->nassets + 1, sizeof(*tc->jobs));
	if (!tc->jobs)
		goto out;
	if ((st = px_transcode_prepare_work(cfg, cat, err, sizeof(err))) != PX_OK) {
		px_error("transcode", "%s", err);
		goto out;
	}
	snprintf(leasedir, sizeof(leasedir), "%s/leases", tc->work);
	if (mkdir(leasedir, 0755) == 0 && mark_dir(leasedir))
		px_warn("transcode", "cannot mark %s: %s", leasedir, strerror(errno));
	if (store) {
		/* cluster mode: the leases are the store's, shared by every host */
		if ((st = px_lease_redis_new(store, &tc->leases)) != PX_OK)
			goto out;
	} else if ((st = px_lease_files_new(leasedir, NULL, NULL, &tc->leases)) != PX_OK) {
		px_error("transcode", "lease store %s: %s", leasedir, px_strerror(st));
		goto out;
	}
	for (size_t i = 0; i < cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		char esc[PATH_MAX];
		long src;
		j->asset = i;
		j->pidfd = j->outfd = -1;
		j->restart_at = -1;
		for (int q = 0; q < PROBES_MAX; q++)
			j->probes[q].pidfd = j->probes[q].outfd = -1;
		if (cat->assets[i].kind == PX_ASSET_PLAIN)
			continue;
		j->a = &cat->assets[i];
		j->remux = j->a->kind == PX_ASSET_REMUX;
		src = px_catalog_find(cat, j->a->of);
		if (src < 0 || cat->assets[src].nsources == 0)
			continue; /* the catalog validated it; defensive */
		j->src = &cat->assets[src];
		escape_id(j->a->id, esc, sizeof(esc));
		snprintf(j->dir, sizeof(j->dir), "%s/%s", tc->work, esc);
		snprintf(j->pl_path, sizeof(j->pl_path), "%s/playlist", j->dir);
	}
	cleanup_orphans(tc);
	tc->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (tc->evfd < 0) {
		st = PX_EIO;
		goto out;
	}
	if (pthread_create(&tc->thread, NULL, supervisor_main, tc)) {
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
		wake(tc);
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

/* ------------------------------------------------------------ reads */

/* The process (thread group) of thread tid, from /proc; 0 when unknown
 * (a caller that is not a process here, as in the core's unit tests). */
static pid_t tgid_of(uint64_t tid)
{
	char path[64], buf[1024];
	pid_t tgid = 0;
	if (tid == 0 || tid > INT32_MAX)
		return 0;
	snprintf(path, sizeof(path), "/proc/%llu/status", (unsigned long long)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
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
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
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

/* Whether a read of segment k on a host that follows another's writer is
 * far: more than seek_restart_segments past the committed segment
 * nearest before it (that writer's edge, as seen here). Under tc->lock. */
static int remote_far(const struct px_transcode *tc, const struct job *j, uint32_t k)
{
	uint32_t e = k;
	while (e > 0 && !j->ok[e - 1])
		e--;
	return (int64_t)k > (int64_t)e + tc->cfg->seek_restart_segments;
}

/* Asks the holder of j's lease, on another host, for segment k (a read
 * whose last segment is read_last; settled: segmath.h's rule; first: the
 * read's first ask; far: remote_far). Under tc->lock, which it lets go
 * around the store's call. */
static void ask_owner(struct px_tcfile *f, uint32_t k, uint32_t read_last, int settled,
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

/*
 * Waits until segment k (of a read whose last segment is read_last) is
 * trusted, getting a writer there as px_seek_decide says: wait for one
 * that will get there, start the main writer, run a probe, or move the
 * main writer. settled, first: the settle rule for this read and whether
 * it is the handle's first (segmath.h).
 */
static enum px_status wait_segment(struct px_tcfile *f, pid_t tgid, uint32_t k,
				   uint32_t read_last, int settled, int first, int64_t deadline)
{
	struct px_transcode *tc = f->tc;
	struct job *j = f->job;
	enum px_status st = PX_OK;
	int tried = 0, probed = 0, asks = 0;
	int64_t checked = px_now_ms();
	int64_t ask_at = -1;   /* following another host: when to ask it next */
	int far = 0;
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
			if (tried || probed || px_now_ms() < j->failed_ms + BACKOFF_MAX_MS) {
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
			/* another host's live writer holds the lease (or the store
			 * cannot say): wait for its commits, which the supervisor
			 * learns from the store; a far read asks that host for the
			 * segment (serve_wants there): at once, a read near what it
			 * committed after two polls (that writer may be elsewhere: a
			 * probe of its wrote the segment before), and again every two
			 * polls while it waits; a takeover only once that lease is
			 * orphaned (poll_remote) */
			int64_t now = px_now_ms();
			if (ask_at < 0) {
				far = remote_far(tc, j, k);
				ask_at = far ? now : now + 2 * poll_ms(tc);
			}
			if (now >= ask_at && !reader_gone(f, tgid)) {
				ask_owner(f, k, read_last, settled, asks++ == 0, far);
				ask_at = px_now_ms() + 2 * poll_ms(tc);
				continue;
			}
		} else if (!j->retry_at) {
			/* a failed writer backs off; the supervisor starts it again */
			struct px_seek_view v = {
				.main_running = j->pid != 0, .main_from = j->from,
				.main_edge = j->edge, .ahead = tc->cfg->seek_restart_segments,
				.probe_covers = probe_covers(j, k), .slot_free = probe_slot_free(tc),
				.probes_running = tc->nprobes,
				.settled = settled, .first_read = first,
				.sole_reader = sole_reader(tc, j) };
			act = px_seek_decide(&v, k);
			if ((act == PX_SEEK_START && tried >= 3) ||
			    (act == PX_SEEK_PROBE && (probed >= 3 || probing_for(j, f))) ||
			    (act == PX_SEEK_MOVE && j->restart_at >= 0))
				act = PX_SEEK_WAIT; /* asked already: the deadline decides */
		}
		if (act != PX_SEEK_WAIT && reader_gone(f, tgid)) {
			st = PX_ECANCELED;
			break;
		}
		if (act == PX_SEEK_START) {
			/* a writer that stops at once (caught up) gets two more
			 * chances, then the deadline decides */
			tried++;
			start_writer(tc, j, k, START_READ);
			continue;
		}
		if (act == PX_SEEK_PROBE) {
			uint32_t until = probe_until(j, k, read_last);
			probed++;
			if (start_probe(tc, j, k, until, f) == PX_OK) {
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
		if (act == PX_SEEK_MOVE) {
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
		int64_t now = px_now_ms();
		if (now >= deadline) {
			st = PX_ETIMEDOUT;
			break;
		}
		/* a reader that dies while it waits is answered within
		 * GONE_CHECK_MS: its process cannot end before we answer */
		if (tgid > 0 && now >= checked + GONE_CHECK_MS) {
			checked = now;
			if (reader_gone(f, tgid)) {
				st = PX_ECANCELED;
				break;
			}
		}
		int64_t until = tgid > 0 && checked + GONE_CHECK_MS < deadline
				? checked + GONE_CHECK_MS : deadline;
		if (j->remote && ask_at > 0 && ask_at < until)
			until = ask_at;
		struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
		probe_wait_set(j, probe_slot_of(j, k), &pw);
		pthread_cond_timedwait(&tc->cond, &tc->lock, &ts);
	}
	probe_wait_set(j, -1, &pw);
	if (st == PX_ECANCELED)
		cancel_probes(j, f, 0, 0, 1);
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
		remake_segment(j, k);
		goto out;
	}
	j->ok[k] = 0;
	lk = px_playlist_lock(j->dir);
	enum px_status ls = load_list(tc, j, &pl, NULL, err, sizeof(err));
	if (ls == PX_EEXIST)
		list_in_way(j, err); /* recovery goes by ok[] then */
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
	cancel_probes(j, f, first_seg, last_seg, 0);
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
		if ((st = wait_segment(f, tgid, k, last_seg, px_seek_settled(&hist, k), first,
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
		o->committed = trusted(j);
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
