/*
 * context.h - the core's shared context: the catalog copy, the per-asset
 * and per-provider run-time state and the locks that guard them. core.c
 * (the composition root) builds it; the layers from source/ up read the
 * fields their module owns, as each field's comment says. Reporting code
 * never reads it: it takes a snapshot (px_snapshot_new, control/snapshot.c).
 */
#ifndef SEAMFS_CONTEXT_H
#define SEAMFS_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "config.h"
#include "catalog.h"
#include "fetch.h"
#include "histo.h"
#include "px.h"

struct px_tree;
struct px_state;
struct px_transcode;
struct px_session;
struct px_handle;
struct prov_rt;
struct cache_slot;
struct src_rt;
struct vf_fingerprint;
struct vf_plan;
struct vf_store;
struct vf_pool;
struct px_store;
struct px_hosts;
struct px_cslots;
struct px_copies;
struct px_disk;

struct asset_rt {
	struct cache_slot *slot;   /* head, tail: two, made at the asset's first
				    * cached read (cache.c, under cache_lock) */
	size_t source_cap;         /* room in the core's sources array */
	/* standby.c, under core->vf_lock */
	struct src_rt *src;        /* per source; NULL until the asset's first
				    * session or a source's first verdict
				    * (px_src_ensure): a library of 100 000
				    * files that are never opened costs none */
	struct vf_fingerprint *ref; /* the reference fingerprint, NULL until known:
				    * backed by a majority of sources or the
				    * store, never by one source alone */
	struct vf_plan *_Atomic plan; /* the sample plan, made on first need
				    * (ownprint.c); read without the lock */
	char ref_id[17];
	int ref_busy;              /* being taken */
	int64_t ref_retry_at;      /* core clock: no new attempt before */
	int ref_fails;             /* attempts in a row that found no agreement */
	int ref_from_store;        /* ref was loaded from the store: sources that
				    * agree against it may reopen it */
	int ref_recheck;           /* a source contradicted the stored ref: the
				    * next tick asks the sources again */
	uint64_t n_reopened;       /* stored references the sources overruled */
	_Atomic int primed;        /* the store's reference and verdicts were
				    * read at the asset's first open */
	_Atomic int served_by;     /* who served it: 0 none yet, k+1 source k
				    * alone, -1 several */
	int64_t size;              /* -1 until known; fixed once listed */
	int64_t mtime;
	int listed;
	int rediscover;            /* left out, size unknown: probe.c's retry
				    * asks again (under core->reload_lock) */
	_Atomic unsigned char *dead; /* per source: 404/410 or wrong size seen */
	struct px_fetch_prep **preps; /* per source: its request, prepared at its
				       * first transfer (rangeread.c; atomic) */
};


/* Sources an asset may gain while mounted (runtime adds, reloads): the
 * room costs every asset memory, so a large library gets less of it; a
 * remount makes more. */
#define PX_SPARE_SOURCES_SMALL 8
#define PX_SPARE_SOURCES_LARGE 2
#define PX_LARGE_LIBRARY 5000   /* assets */
static inline size_t px_spare_sources(size_t nassets)
{
	return nassets > PX_LARGE_LIBRARY ? PX_SPARE_SOURCES_LARGE : PX_SPARE_SOURCES_SMALL;
}
#define PX_SPARE_PROVIDERS 64   /* providers the catalog may gain while mounted */
#define PX_SPARE_STRINGS 1024   /* names and URLs added while mounted */
#define PX_SPARE_ASSETS 4096    /* assets reloads may add */
#define PX_MAX_RELOADS 256      /* reloads per mount */


/* One cutover, for the status. */
struct cutover_rec {
	uint64_t session;
	size_t asset, from, to;
	int64_t offset, ms, when;
	enum px_status reason;
};

/* Told of a new tree (px_core_on_reload). */
typedef void (*px_reload_fn)(void *ctx, const struct px_tree *old, const struct px_tree *now);

/* What a session gives up for a slot (px_core.yield_idle). */
enum { PX_YIELD_IDLE, PX_YIELD_UNREAD, PX_YIELD_LEAVING };

struct px_core {
	const struct px_config *cfg;
	const struct px_catalog *cat; /* the core's copy (sources.c) */
	struct px_catalog *mcat;   /* the same, for sources.c to change */
	size_t provs_cap;
	char *owned[PX_SPARE_STRINGS]; /* strings added while mounted */
	size_t nowned;
	struct px_fetch *fetch;    /* owned when we started it */
	struct px_fetch_ops ops;
	struct asset_rt *assets;
	size_t assets_cap;         /* room in assets and in the catalog copy */
	struct px_tree *_Atomic tree;
	int64_t catalog_mtime;     /* the mtime of files that have none */
	/* reload.c: catalogs and trees kept until the core is freed */
	pthread_mutex_t reload_lock;
	struct px_catalog *catalogs[PX_MAX_RELOADS];
	struct px_tree *old_trees[PX_MAX_RELOADS];
	size_t ncatalogs;
	/* probe.c's retry of size discovery: its thread, the state it
	 * remembers sizes in (borrowed, NULL: none) and the trees it
	 * replaced (kept until the core is freed, under reload_lock) */
	pthread_t retry_thread;
	int retry_started;
	struct px_state *retry_state;
	struct px_tree *retry_trees[PX_MAX_RELOADS];
	size_t nretry_trees;
	struct px_worker_info worker; /* the serving process (core.h) */
	const char *catalog_path;  /* borrowed from main; NULL: no reload */
	char reload_msg[1024];     /* the last reload's outcome, in words */
	int reload_ok;
	int64_t reload_when;
	uint64_t n_reloads;
	int readers_left;          /* catalog readers a reload gave up on, that
				    * may still sit in the kernel (reload.c) */
	/* set once by the front after the core started, read by the reload
	 * and discovery-retry threads: ctx is stored first, fn is atomic */
	_Atomic(px_reload_fn) on_reload;
	void *on_reload_ctx;
	size_t nlisted;
	struct px_transcode *tc;   /* transcoded assets; NULL when none */
	struct px_copies *copies;  /* copies.c; NULL until px_copies_start */
	_Atomic uint64_t next_session;

	/* read-ahead windows share cfg->readahead_budget (stream.c) */
	_Atomic int64_t ra_used;
	/* heads and tails share cfg->cache_size (cache.c) */
	pthread_mutex_t cache_lock;
	pthread_cond_t cache_cond;
	int64_t cache_used;
	uint64_t cache_clock;
	struct px_disk *disk;      /* heads and tails on disk (disk.c); NULL: none */

	/* providers and sessions (provider.c); prov_cond (monotonic) wakes
	 * those waiting for a slot and the monitor thread */
	pthread_mutex_t prov_lock;
	pthread_cond_t prov_cond;
	struct prov_rt *provs;
	struct px_session *sessions;
	int stopping;
	int64_t (*now)(void);      /* the clock TTLs and liveness go by */
	pthread_t monitor;          /* core.c */
	/* closes a session's streams so a slot frees, how: PX_YIELD_* (read/:
	 * px_session_yield_idle, set by core.c) */
	int (*yield_idle)(struct px_session *s, int how);
	/* cluster mode: asks the cluster for up to n more slots of provider
	 * prov, returns how many came (cslots.c's px_cslots_acquire, set by
	 * core.c; NULL on one host). No lock held. */
	int (*cluster_acquire)(struct px_core *core, size_t prov, int n);
	int monitor_started;
	char admit_why[300];       /* the last open that could not be admitted */
	int64_t admit_when;
	uint64_t n_admit_busy;

	/* verification and cutover (standby.c) */
	pthread_mutex_t vf_lock;
	pthread_cond_t vf_cond;
	int vf_init;
	struct vf_store *vstore;   /* NULL without a state_dir */
	struct vf_pool *vpool;
	int verify_workers;        /* 0: 2 with a real fetcher, none with a fake */
	uint64_t n_verified[4];    /* by vf_outcome */
	uint64_t n_cutovers[PX_STATUS_COUNT]; /* by trigger */
	struct cutover_rec recent[8];
	uint64_t nrecent;
	uint64_t n_exhausted;
	char exhausted_why[300];

	/* open handles (session.c), closed by px_core_free if FUSE did not
	 * release them before the unmount */
	pthread_mutex_t handles_lock;
	struct px_handle *handles;

	/* counters, for the log and later the status */
	_Atomic uint64_t n_cache_hits, n_cache_fills, n_streams, n_direct, n_stream_restarts;
	_Atomic uint64_t n_par_streams;  /* streams that turned parallel */
	_Atomic uint64_t n_parts;        /* part transfers they started */
	_Atomic uint64_t n_multipart;    /* head fills that brought the tail in
					  * the same request (multipart ranges) */
	/* handles closed after reading only cached heads and tails: library
	 * scans (ffprobe, a scraper) that cost no transfer of their own */
	_Atomic uint64_t n_scans_cached;
	/* sessions whose handles were all closed having read only heads and
	 * tails (each close of the last handle counts once), and the requests
	 * they made (provider.c): a scan's cost at the origin */
	_Atomic uint64_t n_scans, n_scan_requests;
	_Atomic int64_t kernel_ra;  /* px_stream_set_kernel_readahead(), 0: unknown */
	_Atomic uint64_t n_stream_waits, stream_wait_us; /* reads that waited for bytes */

	/* durations for the metrics (lock-free): reads as fs/ answers them,
	 * and each transfer's submit to its first byte (provider.c) */
	struct px_histo h_read, h_ttfb;

	/* cluster mode (docs/cluster.md), borrowed from main; NULL: one host */
	struct px_store *store;
	struct px_hosts *hosts;
	struct px_cslots *cslots;  /* providers' slots across hosts (cslots.c) */
	/* the cluster's shared secret (cluster_secret_file), owned; NULL:
	 * none, no peer's copy is read. Never logged, shown or stored */
	char *peer_secret;
};

#endif
