/*
 * transcode.h - transcoded and remuxed assets as stable files: the
 * supervisor of the seamfs-writer processes, the recovery after a writer
 * dies, and the read path over committed segments.
 *
 * The daemon never links the FFmpeg libraries: it runs `seamfs-writer
 * plan` once per asset to learn the file's size and `seamfs-writer run
 * --from N` to write. Once the mount serves reads, writers read their
 * input from the daemon (px_transcode_set_input), so the daemon's own read
 * path balances and cuts over for them. See docs/transcode.md.
 */
#ifndef SEAMFS_TRANSCODE_H
#define SEAMFS_TRANSCODE_H

#include <stddef.h>
#include <stdint.h>
#include "catalog.h"
#include "config.h"
#include "px.h"
#include "kvstore.h"

struct px_transcode;
struct px_tcfile;

/* The file that marks a directory seamfs made in the work directory:
 * seamfs removes files only in directories carrying it (docs/transcode.md). */
#define PX_TRANSCODE_MARKER ".seamfs-work"

/*
 * Readies the work directory (cfg->work_dir, else STATE_DIR/transcode) when
 * cat has transcode or remux assets; does nothing otherwise. A missing one
 * is made and marked; a marked one is taken as it is; one without the
 * marker is marked and used when it is empty or every entry in it is one
 * an older seamfs made (job directories holding only its files, leases/
 * holding only lease files). Else PX_EINVAL and err names work_dir and one
 * entry that is not seamfs's: nothing is touched. PX_EIO (err says why)
 * when it cannot be made or read. Call before mounting, from one thread.
 * Daemons on other hosts may call it at the same moment on one shared
 * work_dir (a cluster booting): a marker one of them made meanwhile makes
 * the directory seamfs's for all of them.
 */
enum px_status px_transcode_prepare_work(const struct px_config *cfg,
					 const struct px_catalog *cat, char *err,
					 size_t errlen) PX_WUR;

/*
 * Makes the supervisor for the catalog's transcode assets and starts its
 * thread. cfg and cat are borrowed until px_transcode_free(). Readies the
 * work directory (px_transcode_prepare_work) and removes the job
 * directories seamfs made for assets no longer in the catalog whose lease
 * no longer protects them, and only the files it made in them. PX_EIO or
 * PX_EINVAL (logged) when the work directory cannot be used.
 *
 * store (borrowed, NULL: one host): cluster mode (docs/cluster.md): the
 * leases and each job's playlist live in the store, shared with every
 * host of the cluster, whose daemons share work_dir; cfg->host_id names
 * this host in lease owners.
 */
enum px_status px_transcode_new(const struct px_config *cfg, const struct px_catalog *cat,
				struct px_store *store, struct px_transcode **out) PX_WUR;

/* Kills the running writers, releases their leases, stops the thread.
 * Open handles must be closed first. NULL: no-op. */
void px_transcode_free(struct px_transcode *tc);

/* Makes every waiting and later read fail with PX_ESHUTDOWN. Any thread. */
void px_transcode_stop(struct px_transcode *tc);

/*
 * The fixed size of transcode or remux asset `asset` (a catalog index):
 * from the plan kept in its work directory if the profile is unchanged,
 * else by running `seamfs-writer plan` on the source asset's sources, each
 * in catalog order until one answers (all of them bounded by one
 * probe_timeout). On failure logs why (naming the asset, each source and
 * the cause) and returns it. Call before serving, from one thread.
 */
enum px_status px_transcode_plan(struct px_transcode *tc, size_t asset,
				 int64_t *size) PX_WUR;

/*
 * From now on writers read their input from the daemon (feed.h): the
 * source asset through in's ops (copied; in->arg borrowed until
 * px_transcode_free), so that the daemon's read path chooses, balances
 * and cuts over the source for them exactly as for any reader, and not
 * through the mount, which a running writer would keep busy. A source
 * asset that in->listed says is not served now (left out at mount,
 * removed by a reload): that writer reads the sources directly. Writers
 * already running keep their input. NULL in: read the sources directly
 * again. NULL tc: no-op. Any thread.
 */
struct px_tc_input;
void px_transcode_set_input(struct px_transcode *tc, const struct px_tc_input *in);

/*
 * Stops the supervisor (px_transcode_stop) and ends every writer's input
 * feed, waiting for their threads (a read in flight ends within
 * read_timeout; at once when the core is stopping). Call before the
 * handles the feeds read through are closed. NULL: no-op.
 */
void px_transcode_end_feeds(struct px_transcode *tc);

/* Opens a handle on a planned asset. client (the caller's pid) is for logs. */
enum px_status px_transcode_open(struct px_transcode *tc, size_t asset, uint64_t client,
				 struct px_tcfile **out) PX_WUR;

/*
 * Reads [off, off+len) into buf: *got == len, or less only at the end of
 * the file (0 at or past it). Serves only committed segments; waits for
 * segments being written, starts or restarts the writer as needed (after
 * a failure, with backoff), never longer than read_timeout in all
 * (PX_ETIMEDOUT). A writer that keeps failing: PX_EIO. reader: the thread
 * that reads (FUSE's request pid; 0: unknown): a read whose process has
 * exited or is being killed starts and moves no writer (PX_ECANCELED).
 * Several threads may read one handle at once.
 */
enum px_status px_transcode_read(struct px_tcfile *f, int64_t off, size_t len, void *buf,
				 uint64_t reader, size_t *got) PX_WUR;

/* Closes a handle. NULL: no-op. */
void px_transcode_close(struct px_tcfile *f);

/* One transcoded asset's state, for the status. */
struct px_tc_info {
	size_t asset;
	uint32_t segments, committed;  /* planned; trusted and servable */
	int64_t writer_pid;            /* 0: no writer running */
	char owner[128];               /* the lease's (last) owner, "" if never */
	int lease_held;                /* this daemon holds the lease now */
	int64_t heartbeat_age_ms;      /* since the lease's last renewal, -1: not held */
	uint64_t recoveries;           /* writer starts that recovered from a failure */
	uint64_t work_links;           /* links found in its job directory: by its
					* writers, recovery, or a read of a segment */
	uint64_t seeks;                /* main writer moves to where reads settled */
	int readers, queued, failed;
	int writers;                   /* running here: the main writer and probes */
	int remote;                    /* cluster mode: another host's writer is followed */
	uint64_t takeovers;            /* cluster mode: leases taken over from another host */
	uint64_t seek_asks;            /* cluster mode: far reads here that asked the writer's
					* host for their segment */
	uint64_t remote_seeks;         /* cluster mode: other hosts' far reads served here by
					* a probe or a move of the writer */
	int64_t cost;                  /* one writer's cost (place.h), thousandths */
	uint64_t starts;               /* main writers started here */
	uint64_t placed_away;          /* cluster mode: starts placed on another host */
	uint64_t placed_here;          /* cluster mode: starts other hosts placed here */
	uint64_t place_fallbacks;      /* cluster mode: placements not taken in time */
};

/* Fills out[0..cap) with the planned transcodes; returns how many. NULL
 * tc: 0. Any thread. */
size_t px_transcode_snapshot(struct px_transcode *tc, struct px_tc_info *out, size_t cap);

#endif
