/*
 * snapshot.h - the core's state copied for reporting (snapshot.c): what
 * status.json (report.c) and the metrics (metrics.c) show, taken by one
 * call, so that neither of them reads the context or takes its locks.
 *
 * A snapshot is plain data: numbers, fixed arrays and strings it owns. It
 * points into neither the core nor its catalog, so it may be kept, read
 * and formatted with no lock held, after the core has changed or gone.
 */
#ifndef SEAMFS_SNAPSHOT_H
#define SEAMFS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include "disk.h"
#include "histo.h"
#include "hosts.h"
#include "kvstore.h"
#include "provider.h"
#include "standby.h"
#include "px.h"
#include "transcode.h"

struct px_core;

/* What to copy besides the counters and the providers: the rows
 * status.json lists (sessions, assets with standbys, recent cutovers,
 * transcodes). The metrics do without them. */
#define PX_SNAPSHOT_ROWS 0x1u

struct px_snap_transcode {
	struct px_tc_info info;    /* px_transcode_snapshot()'s */
	char *asset;               /* the asset's id */
};

struct px_snapshot {
	int64_t now;               /* the core clock when taken (ms): ages go by it */

	/* the last reload (reload_lock; PX_SNAPSHOT_ROWS, else zeroes) */
	uint64_t n_reloads;
	struct px_worker_info worker; /* the serving process (px.h) */
	int reload_ok;
	char reload_msg[1024];
	int64_t reload_when;       /* core clock; 0: never */

	/* the catalog's assets, those the mount lists */
	size_t nassets, nlisted;
	/* providers and sessions (prov_lock) */
	struct px_snap_provider *provs;
	size_t nprovs;
	struct px_snap_session *sessions; /* PX_SNAPSHOT_ROWS; else NULL */
	size_t nsessions;
	uint64_t sessions_open, sessions_lingering; /* by handles, always counted */
	uint64_t sessions_playback, sessions_scan;  /* by what they read, always counted */
	uint64_t n_admit_busy;
	char admit_why[300];
	int64_t admit_when;        /* core clock; 0: never */

	/* verification and cutovers (vf_lock) */
	struct px_snap_asset *assets; /* PX_SNAPSHOT_ROWS; else NULL */
	size_t nshown;
	uint64_t n_cutovers[PX_STATUS_COUNT]; /* by trigger */
	struct px_snap_cutover recent[PX_SNAP_RECENT]; /* PX_SNAPSHOT_ROWS: newest first */
	size_t nrecent;
	uint64_t n_verified[4];    /* match, mismatch, size_mismatch, inconclusive */
	uint64_t n_exhausted;
	char exhausted_why[300];

	/* transcodes (the supervisor's own copy) */
	struct px_snap_transcode *transcodes; /* PX_SNAPSHOT_ROWS; else NULL */
	size_t ntranscodes;

	/* cluster mode (docs/cluster.md): the store and the hosts as the
	 * heartbeat last listed them (no call to the store) */
	int clustered;             /* 0: one host, the rest is zeroes */
	char store_url[1024];
	char cluster[PX_STORE_PREFIX_MAX + 1];
	char host_id[PX_HOST_ID_MAX + 1];
	struct px_store_state store;
	struct px_host_info hosts[PX_HOSTS_MAX];
	size_t nhosts;
	uint64_t n_takeovers;      /* transcode leases taken over from another host */
	uint64_t n_work_links;     /* links found in transcode job directories (the
				    * first 64 transcodes without rows) */

	/* reads and memory (atomics; cache_used under cache_lock) */
	uint64_t n_cache_hits, n_cache_fills, n_streams, n_stream_restarts;
	uint64_t n_scans_cached;   /* handles that read only cached bytes */
	uint64_t n_scans, n_scan_requests; /* scan sessions, their requests */
	uint64_t n_multipart;      /* head fills that brought the tail too */
	uint64_t n_stream_waits, stream_wait_us, n_direct;
	uint64_t n_par_streams, n_parts;
	int64_t ra_used, ra_budget, cache_used, cache_size;
	struct px_disk_stats disk; /* the heads and tails on disk (read/disk.c) */
	struct px_histo_snap h_read, h_ttfb;
};

/*
 * Copies the core's state into a new snapshot (*out, freed with
 * px_snapshot_free). what: 0, or PX_SNAPSHOT_ROWS. Takes each of the
 * core's locks once and alone, never two at once, and never across
 * formatting (snapshot.c). PX_ENOMEM, *out NULL, when out of memory. Any
 * thread that holds none of the core's locks.
 */
enum px_status px_snapshot_new(struct px_core *core, unsigned what,
			       struct px_snapshot **out) PX_WUR;

/* Frees a snapshot and everything it owns. NULL: no-op. */
void px_snapshot_free(struct px_snapshot *s);

/* "live", "failing", "down", "drained", "auth_error". Never NULL. */
const char *px_snapshot_state_name(enum px_snap_state st);

#endif
