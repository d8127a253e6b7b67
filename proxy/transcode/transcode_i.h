/*
 * transcode_i.h - what the files of proxy/transcode/ share beyond
 * transcode.h: a job, the supervisor's state, a handle, and the functions
 * one file calls in another (no other folder includes it). The design is
 * atop transcode.c; each file says which part it holds.
 */
#ifndef SEAMFS_TRANSCODE_I_H
#define SEAMFS_TRANSCODE_I_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog.h"
#include "feed.h"
#include "kvstore.h"
#include "lease.h"
#include "place.h"
#include "playlist.h"
#include "segmath.h"
#include "transcode.h"

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
	int ahead;             /* the tail, ahead of its read (tc_probe_tail) */
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
	int secs;              /* D in use when not the profile's: a plan made
				* with the older default (plan.c); 0: none */
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
	int nahead;            /* of them, tails written ahead (no read waits) */
	int yielded;           /* the main writer runs niced while probes run */
	int idled;             /* ... and under SCHED_IDLE (tc_main_yield) */
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
	int relist;            /* cluster mode: a refresh the store did not
				* answer (1, 2 with its files' check): asked
				* again each poll (tc_relist), since no commit
				* may come soon to ask again */
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

/* The probe one read waits for: its slot (-1: none) and pid (the slot may
 * be another probe's by the time the read stops waiting). */
struct probe_wait {
	int slot;
	pid_t pid;
};

/* ---- a job's segments */

static inline int seg_secs(const struct job *j)
{
	if (j->secs)
		return j->secs;
	return j->a->segment_seconds ? j->a->segment_seconds : 2; /* remux: 2 */
}

/* Bytes of segment k and where it starts in the file. */
static inline int64_t seg_size(const struct job *j, uint32_t k)
{
	return j->remux ? j->offs[k + 1] - j->offs[k] : j->plan.seg_bytes;
}

static inline int64_t seg_start(const struct job *j, uint32_t k)
{
	return j->remux ? j->offs[k] : (int64_t)k * j->plan.seg_bytes;
}

/* The segment holding byte off (< size). */
static inline uint32_t seg_at(const struct job *j, int64_t off)
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

/* How often a host that follows another's writer asks the store for its
 * commits and its lease (cluster mode): heartbeat / 4, 100 to 500 ms. */
static inline int64_t poll_ms(const struct px_transcode *tc)
{
	int64_t d = tc->cfg->heartbeat_ms / 4;
	return d < 100 ? 100 : d > 500 ? 500 : d;
}

/* workdir.c */
/* An asset id as one file name: bytes other than [A-Za-z0-9._-] (and a
 * leading '.') as %XX. */
void tc_escape_id(const char *id, char *buf, size_t cap);
/* The names seamfs and its writer make in a job directory. */
int tc_job_file_name(const char *name);
/* Puts the marker into dir (kept if there). 0, or -1 with errno. */
int tc_mark_dir(const char *dir);
/*
 * Removes the files seamfs makes from the job directory dir (marked);
 * with rmdir, then the marker and dir itself, unless something else is
 * in it: that is left, dir with it, and a log line says so. Returns 0
 * when everything went (dir too, with rmdir).
 */
int tc_clear_job_dir(const char *dir, int rmdir_too);
/* work_dir, or STATE_DIR/transcode (/tmp/seamfs without a state_dir),
 * into buf. */
void tc_work_path(const struct px_config *cfg, char *buf, size_t cap);
/* Whether job directory dir carries seamfs's marker, given a moment: a
 * host sharing work_dir that made it just now writes the marker right
 * after (up to 1 s, then not a directory seamfs made). */
int tc_marked_soon(const char *dir);
/* Job directories seamfs made for assets no longer transcoded, unprotected
 * by a lease; only their files seamfs made go (clear_job_dir). Anything
 * else in work_dir is someone else's and left alone. */
void tc_cleanup_orphans(struct px_transcode *tc);

/* spawn.c */
/* Wakes the supervisor thread (its eventfd). Any thread. */
void tc_wake(struct px_transcode *tc);
/* The profile's identity: a plan made for another profile is not reused. */
void tc_profile_key(const struct px_transcode *tc, const struct job *j, char *buf,
		    size_t cap);
/* argv for seamfs-writer: the input (hdr: the source whose provider's
 * headers go along, or NULL) and profile, plus extra. Strings are
 * borrowed from the catalog, input or bufs. A URL and its headers may
 * carry secrets, and a command line is readable by every local user in
 * /proc: they go to the writer's stdin instead ("--input -"), in
 * *secret (malloc'd, for spawn(); NULL when none, or out of memory). */
size_t tc_profile_argv(const struct px_transcode *tc, const struct job *j, char **argv,
		       char bufs[4][32], const char *input, const struct px_source *hdr,
		       char **secret);
/* posix_spawn with stdout to a new pipe (its read end in *outfd); stdin
 * is /dev/null, or a pipe that carries secret (profile_argv) and ends;
 * feedfd (>= 0) becomes the writer's PX_FEED_FD. */
enum px_status tc_spawn(char **argv, pid_t *pid, int *outfd, const char *secret,
			int feedfd) PX_WUR;
/*
 * While probes of j run, its main writer gives them the CPU: a reader
 * waits for a probe now, while the main writer is ahead of its readers or
 * about to be moved (docs/transcode.md "Seeks"). It runs YIELD_NICE
 * nicer meanwhile, every thread of it (x264's and the decoder's too), and
 * under SCHED_IDLE when this daemon has CAP_SYS_NICE (nice 10 still took
 * a tenth of the CPU from a probe), and gets its priority back when the
 * last probe ends (a daemon without CAP_SYS_NICE cannot give the nice
 * value back: that writer stays nicer until it ends; the next one starts
 * at the usual priority). Under tc->lock.
 */
void tc_main_yield(struct job *j, int yield);
/* A writer run to spawn (tc_spawn_run): from its first segment; a probe
 * when until >= 0 (segments from..until only); what the spawn gives
 * back. */
struct tc_run {
	uint32_t from;
	int64_t until;
	pid_t *pid;       /* out: the writer */
	int *outfd;       /* out: its stdout */
	int *via_feed;    /* out: its input is the daemon's feed */
	char *shown;      /* out: its input as the log shows it, shown_cap bytes */
	size_t shown_cap;
};
/*
 * Spawns `seamfs-writer run` for j as r says, under j's lease. Under
 * tc->lock.
 */
enum px_status tc_spawn_run(struct px_transcode *tc, struct job *j, struct tc_run *r) PX_WUR;

/* trust.c */
/* What is on disk now for each listed entry. In cluster mode a file
 * named with its generation is never written again by anyone (its name is
 * its writer's alone), and an mtime seen through another host's NFS
 * client may differ from the writer's: existence and size are checked. */
struct px_seg_seen *tc_look(const struct px_transcode *tc, const struct job *j,
			    const struct px_playlist *pl);
/* The job's playlist: the file in its directory, or in cluster mode the
 * store's (*ver its version there). PX_ENOTFOUND when there is none; in
 * cluster mode a store that does not answer is its failure (err says);
 * PX_EEXIST: a link (or what is not a regular file) is in the way of the
 * file, not read. */
enum px_status tc_load_list(const struct px_transcode *tc, const struct job *j,
			    struct px_playlist *pl, uint64_t *ver, char *err, size_t errlen) PX_WUR;
/* Reports j's playlist found a link (load_list's PX_EEXIST, err its
 * words): logged and counted once while it stays so. Under tc->lock. */
void tc_list_in_way(struct job *j, const char *err);
/* The list this daemon trusts for j (one host), for a playlist it cannot
 * read: every servable segment with the mtime it was listed with, all
 * closed (#CLEAN). Under tc->lock. */
void tc_list_from_memory(const struct job *j, struct px_playlist *pl);
/* How many segments of j are trusted. Under tc->lock. */
uint32_t tc_trusted(const struct job *j);
/* Recomputes j->ok from the playlist on disk (the store's in cluster
 * mode: one that does not answer leaves j->relist set). check_files:
 * check the files too. Under tc->lock (or before the thread starts). */
void tc_refresh(struct px_transcode *tc, struct job *j, int check_files);
/* Cluster mode: refreshes again the jobs whose last refresh the store
 * did not answer (j->relist). Under tc->lock. */
void tc_relist(struct px_transcode *tc);
/* Marks the trusted entries of pl (which it releases) servable. Under
 * tc->lock (or before the thread starts). */
void tc_apply_list(struct px_transcode *tc, struct job *j, struct px_playlist *pl_in,
		   int check_files);

/* recover.c */
/* Whether a running probe of j writes segment k. Under tc->lock. */
int tc_probe_covers(const struct job *j, uint32_t k);
/*
 * Recovery: with the lease held, keeps the trusted entries of the playlist
 * and removes every other file, except the segments running probes are
 * writing (their NAME.probe.tmp, listed when they finish); returns the
 * first segment >= from that is not trusted. *repaired: it distrusted an
 * entry or removed a leftover. Under tc->lock; takes the playlist's lock
 * so that no probe lists its segments in between.
 */
uint32_t tc_recover(struct px_transcode *tc, struct job *j, uint32_t from, int *repaired);
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
int tc_store_settled(const struct px_transcode *tc);
/* The pid in a lease owner ("host:pid:random") whose host is this one's
 * (0 when it does not parse), -1 for another host's. Any thread. */
long tc_local_owner_pid(const struct px_transcode *tc, const char *owner);
/* Holds j's lease: claims it by compare-and-set (again, if ours: the new
 * generation fences any writer of the old one). Under tc->lock. */
enum px_status tc_hold_lease(struct px_transcode *tc, struct job *j) PX_WUR;
/* Gives the lease of j back once no writer of it runs (main or probe) and
 * none is due to restart. Under tc->lock. */
void tc_drop_lease(struct px_transcode *tc, struct job *j);

/* start.c */
/* How long a host placed on has to start the writer: its poll, the
 * start's calls and the requester's next poll, on a loaded machine. */
int64_t tc_place_hold_ms(const struct px_transcode *tc);
/* Starts the main writer for j at segment `from` now, or queues it when
 * the host has max_writers running. why: what its recovery counts as.
 * Under tc->lock. */
void tc_start_writer(struct px_transcode *tc, struct job *j, uint32_t from,
		     enum start_why why);
/* Starts the next queued job if a slot is free. Under tc->lock. */
void tc_run_queue(struct px_transcode *tc);

/* probe.c */
/* Whether a probe may start now: a writer slot is free and no main writer
 * waits in line for one. Under tc->lock. */
int tc_probe_slot_free(const struct px_transcode *tc);
/*
 * Starts a probe run of j for segments from..until beside its main writer
 * (docs/transcode.md "Seeks"): it never touches the main writer, and its
 * segments are listed, and so trusted, when it ends. A probe that takes
 * the lease runs recovery first, as a main writer's start does. PX_OK
 * also when that recovery finds from..until trusted (nothing starts);
 * PX_EBUSY when no slot is free; PX_EFENCED (j->failed set) when the
 * lease is someone else's. Under tc->lock.
 */
enum px_status tc_start_probe(struct px_transcode *tc, struct job *j, uint32_t from,
			      uint32_t until, const struct px_tcfile *by) PX_WUR;
/*
 * A player that opens a transcode reads its head, then its tail (an
 * MPEG-TS file's duration is its last timestamp: libavformat reads the
 * last 250,000 bytes), then seeks: when the main writer has just started
 * at k for a handle's first read and the segments of that tail are far
 * beyond its reach, untrusted and nobody writes them, a probe writes
 * them now, beside the head, at the main writer's priority (the main
 * writer does not yield to it: the reader waits for the head first).
 * Under tc->lock.
 */
void tc_probe_tail(struct px_transcode *tc, struct job *j, uint32_t k);
/* The last segment a probe of j from k writes for a read whose last
 * segment is read_last: it ends before the first segment another writer
 * of j starts at (px_seek_probe_until). Under tc->lock. */
uint32_t tc_probe_until(const struct job *j, uint32_t k, uint32_t read_last);
/* The slot of a running probe of j that writes segment k, or -1. Under
 * tc->lock. */
int tc_probe_slot_of(const struct job *j, uint32_t k);
/* Counts the read of *w as waiting for the probe in slot (-1: for none),
 * no longer for the one before. Under tc->lock. */
void tc_probe_wait_set(struct job *j, int slot, struct probe_wait *w);
/*
 * Kills the probes of j that handle f asked for and no read waits for,
 * when f reads first..last now and they write none of it, or (gone) when
 * f's reader has exited: their reader has moved on (issue 32). A killed
 * probe has listed nothing, or all it wrote (the list is renamed into
 * place), so no byte it made was served and then differs. Under tc->lock.
 */
void tc_cancel_probes(struct job *j, const struct px_tcfile *f, uint32_t first,
		      uint32_t last, int gone);
/* Whether a probe that handle f asked for runs and is not cancelled: its
 * next one waits for it (one at a time per handle). Under tc->lock. */
int tc_probing_for(const struct job *j, const struct px_tcfile *f);
/* Lines from a probe's stdout ("committed K" once it listed them). Under
 * tc->lock. */
void tc_probe_output(struct px_transcode *tc, struct job *j, struct probe *p);
/* A probe of j has exited with status. Its failure is not the main
 * writer's: no backoff, no count; a reader still waiting for its segments
 * asks again (at most three probes per read) or waits for the main
 * writer. Under tc->lock, on the supervisor's thread. */
void tc_probe_ended(struct px_transcode *tc, struct job *j, struct probe *p, int status);

/* remote.c */
/*
 * Cluster mode: for each job read here with no writer of ours, one call
 * for the playlist's version and the lease. A new version: the list is
 * read and its trusted segments become servable here (another host's
 * writer committed them). A lease no live host holds any more (orphaned,
 * released): the job is no longer remote, and a waiting read starts our
 * writer, which claims it (the takeover). Under tc->lock, which it lets go
 * around the store's calls.
 */
void tc_poll_remote(struct px_transcode *tc);
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
void tc_remake_segment(struct job *j, uint32_t k);
/*
 * Cluster mode: the far reads that readers on other hosts left for the
 * jobs whose lease we hold with a writer running (px_tcstore_want_take,
 * docs/cluster.md "Far seeks across hosts"), each served as a local far
 * read: a probe of that segment, or the main writer moved there once that
 * host's reads settle. What they write is listed under our lease's
 * generation; the asking host serves it once its poll reads the list.
 * Under tc->lock, which it lets go around the store's calls.
 */
void tc_serve_wants(struct px_transcode *tc);
/*
 * Cluster mode: starts the writers other hosts placed here (place.h), as
 * a read here would, from the segment their requester needs. Their
 * readers are elsewhere: has_readers() counts the placement until their
 * wants take over; the failures in a row carry over, so that a writer
 * that fails everywhere still gives up. Under tc->lock, which it lets go
 * around the store's call.
 */
void tc_take_placed(struct px_transcode *tc);
/* Whether a read of segment k on a host that follows another's writer is
 * far: more than seek_restart_segments past the committed segment
 * nearest before it (that writer's edge, as seen here). Under tc->lock. */
int tc_remote_far(const struct px_transcode *tc, const struct job *j, uint32_t k);
/* Asks the holder of j's lease, on another host, for segment k (a read
 * whose last segment is read_last; settled: segmath.h's rule; first: the
 * read's first ask; far: remote_far). Under tc->lock, which it lets go
 * around the store's call. */
void tc_ask_owner(struct px_tcfile *f, uint32_t k, uint32_t read_last, int settled,
		  int first, int far);

/* supervisor.c */
void *tc_supervisor_main(void *arg);

#endif
