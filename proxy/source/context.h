/*
 * context.h - the core's shared context: pointers to the objects each
 * layer owns (px_sources, px_reads, px_providers, px_verify, px_retry,
 * px_reloads, px_cluster, core.c's px_monitor), opaque outside their own
 * file and used through its functions, the fetcher with its ops
 * (px_fetcher), and the accessors every layer uses: the catalog copy
 * (px_cat), an asset's run-time state (px_asset_rt), prov_lock
 * (px_prov_lock) and a provider's run-time state (px_prov_rt). core.c
 * (the composition root) builds it and makes and frees those objects.
 * Reporting code never reads it: it takes a snapshot (px_snapshot_new,
 * control/snapshot.c).
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
struct px_reads;
struct px_providers;
struct px_verify;
struct px_reloads;
struct px_retry;
struct px_cluster;
struct px_monitor;
struct px_sources;

struct asset_rt {
	struct cache_slot *slot;   /* head, tail and index (PX_CACHE_SLOTS), made
				    * at the asset's first cached read (cache.c,
				    * under cache_lock) */
	_Atomic int index_tried;   /* a read went to its index slot once: until
				    * then no read looks for one (cache.c) */
	size_t source_cap;         /* room in the core's sources array */
	/* standby.c, under vf_lock (px_vf_lock) */
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
				    * asks again (under px_reload_lock) */
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


/* Told of a new tree (px_core_on_reload). */
typedef void (*px_reload_fn)(void *ctx, const struct px_tree *old, const struct px_tree *now);

/* What a session gives up for a slot (px_providers_set_yield). */
enum { PX_YIELD_IDLE, PX_YIELD_UNREAD, PX_YIELD_ALL };

struct px_core {
	const struct px_config *cfg;
	/* the catalog at run time: the core's copy, each asset's state, the
	 * listed tree (sources.c, opaque: px_cat, px_asset_rt) */
	struct px_sources *sources;
	struct px_fetcher fetch;   /* the transfers' ops (fetch.h) */
	/* reload.c's catalogs, trees and outcomes (control/reload.c, opaque)
	 * and probe.c's retry of size discovery with who is told of a new
	 * tree and the reload lock that guards both (probe.c, opaque:
	 * px_reload_lock) */
	struct px_reloads *reloads;
	struct px_retry *retry;
	struct px_worker_info worker; /* the serving process (core.h) */
	struct px_transcode *tc;   /* transcoded assets; NULL when none */
	struct px_copies *copies;  /* copies.c; NULL until px_copies_start */

	/* the read layer's state (read/reads.h): the budget, the head and
	 * tail cache, the open handles, the read counters */
	struct px_reads *reads;

	/* providers and sessions: prov_lock (px_prov_lock), each provider's
	 * run-time state (px_prov_rt), the sessions, prov_cond and whether the
	 * core is stopping (px_prov_wait_until, px_providers_release), its
	 * hooks, the session ids, the admission and scan counters
	 * (provider.c, opaque) */
	struct px_providers *providers;
	int64_t (*now)(void);      /* the clock TTLs and liveness go by */
	struct px_monitor *monitor; /* core.c's thread (opaque) */

	/* verification and cutover: vf_lock (px_vf_lock), the fingerprint
	 * store, the workers, the verification and cutover counters
	 * (standby.c, opaque) */
	struct px_verify *verify;

	/* the cluster's handles: store, hosts, slots, secret (cluster.c,
	 * opaque); NULL handles on one host */
	struct px_cluster *cluster;
};

/* What every layer reads of two objects, the first member of each (the
 * rest is their owner's): sources.c's px_sources, the catalog at run
 * time, and provider.c's px_providers. Reached through the functions
 * below; only the owner makes, grows and frees the arrays, and each
 * per-asset or per-provider field says who writes it under which lock. */
struct px_sources_pub {
	/* the core's copy of the catalog: assets and sources are added while
	 * mounted, under prov_lock and vf_lock both, never moved */
	const struct px_catalog *cat;
	struct asset_rt *assets;   /* per asset: each field says what guards it */
	size_t assets_cap;         /* assets has assets_cap + 1 */
	size_t nlisted;            /* assets listed (atomic) */
};
struct px_providers_pub {
	pthread_mutex_t lock;      /* prov_lock: providers' slots, the sessions'
				    * list; taken alone */
	struct prov_rt *provs;     /* per provider, under prov_lock */
};

/* The core's copy of the catalog. Any thread. */
static inline const struct px_catalog *px_cat(const struct px_core *core)
{
	return ((const struct px_sources_pub *)(const void *)core->sources)->cat;
}

/* Asset i's run-time state, i below px_assets_cap() (sources.h). */
static inline struct asset_rt *px_asset_rt(const struct px_core *core, size_t asset)
{
	return &((const struct px_sources_pub *)(const void *)core->sources)->assets[asset];
}

/* The assets the catalog copy and px_asset_rt have room for. */
static inline size_t px_assets_cap(const struct px_core *core)
{
	return ((const struct px_sources_pub *)(const void *)core->sources)->assets_cap;
}

/* How many assets are listed. Any thread. */
static inline size_t px_sources_listed(const struct px_core *core)
{
	return __atomic_load_n(&((const struct px_sources_pub *)(const void *)core->sources)->nlisted,
			       __ATOMIC_RELAXED);
}

/* prov_lock. */
static inline pthread_mutex_t *px_prov_lock(const struct px_core *core)
{
	return &((struct px_providers_pub *)(void *)core->providers)->lock;
}

#endif
