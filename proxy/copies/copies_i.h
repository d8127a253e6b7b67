/*
 * copies_i.h - what the files of proxy/copies/ share: the copies' state
 * (struct px_copies, its storages, copies, jobs and peers) and the
 * functions one file offers the others. No other folder includes it.
 * Functions named cp_* are internal to this folder (the public ones are
 * px_copies_*, copies.h). The layout of the folder: copies.c.
 */
#ifndef SEAMFS_COPIES_I_H
#define SEAMFS_COPIES_I_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog.h"
#include "context.h"
#include "copies.h"
#include "fetch.h"
#include "hash.h"
#include "hosts.h"
#include "rangeread.h"
#include "sources.h"

#define CHUNK (1 << 20)
#define YIELD_MS 200
#define RANGE_TIMEOUT_MS 30000
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 60000
#define MANIFEST ".seamfs-copies.json"
#define SPARE_TRIES 3000        /* yields of one range (10 min at YIELD_MS) */
#define RECHECK_MS 5000         /* an ETag check that could not be made: again after */
#define MANIFEST_PREFIX ".seamfs-copies"
#define RESCAN_MS 10000          /* cluster: other hosts' manifests read again */
#define CLAIM_RETRY_MS 1000      /* a claim held elsewhere: asked again after */
#define CLAIM_RENEW_MS 1000      /* a held claim's PX renewed after */
#define IN_WAY_RETRY_MS 5000     /* something in a copy's way: looked at again after */

/* A storage of the catalog (storage.c). */
struct storage {
	char *name, *path, *host;    /* owned */
	char prov[300];              /* "storage:NAME" */
	int64_t min_free;
	int cat_copying;             /* the catalog's role, to see it change */
	int copying;                 /* the role now (the catalog, then ctl) */
	int drained;
	int move_viewers;            /* drained: its sessions are to move away */
	int in_catalog;
	int loaded;                  /* its manifest was read */
	dev_t dev;                   /* its file system when first reachable */
	int dev_known;
	/* looked at each second */
	int reachable;
	int64_t free_bytes;
	char why[200];               /* why not reachable */
};

/* A copy of an asset on a storage, made here or found in a manifest. */
struct copy {
	size_t asset, storage;
	size_t k;                    /* its source index, once registered */
	int registered;
	int mine;                    /* made here (or not cluster mode): in this
				      * host's manifest */
	int serving;                 /* registered and not dropped */
	int stale;                   /* the asset changed: made again */
	int64_t size;
	char sha[65];
	char src_key[300];           /* the source it was copied from (its key) */
	char etag[128];              /* that source's ETag then; "" unknown */
	int recheck;                 /* compare the source's ETag again */
	int64_t recheck_at;          /* monotonic ms: not before */
	ino_t ino;                   /* the file it was made (or found) as: */
	dev_t dev;                   /* registered with it (px_source_open) */
	enum px_copy_wait dropped;   /* found replaced (a link, a foreign file) */
};

#define PEER_STORAGES_MAX 32
#define SYNC_MS 1000              /* cluster: this host's state published, the others' read */
#define NEAR_BYTES (64LL << 20)   /* cluster: disks this close in free space tie */

/* One storage of a host, as that host published it. */
struct pstorage {
	char name[128];
	int reachable, copying;
	int64_t free_bytes, min_free;
};

/* A live host of the cluster (this one too) as of the last sync: its
 * own disks and the assets it holds a serving copy of there. */
struct peer {
	char id[PX_HOST_ID_MAX + 1];
	char url[208];               /* its peer endpoint; "": none */
	int self;
	struct pstorage st[PEER_STORAGES_MAX];
	size_t nst;
	unsigned char *held;         /* per asset, cap + 1 */
};

/* Another host's copy, made a source of the asset here. */
struct psrc {
	size_t asset;
	char host[PX_HOST_ID_MAX + 1];
	size_t k;
	int serving;
};

enum { JOB_WAITING, JOB_COPYING, JOB_BACKOFF };

/* An asset that wants one more copy (job.c). */
struct job {
	size_t asset;
	int state;
	enum px_copy_wait wait;
	size_t storage;              /* while copying */
	int64_t done, total;
	double speed;                /* bytes/s of the running copy */
	int64_t started_ms;
	int attempts;                /* failed in a row */
	int64_t claim_at;            /* monotonic ms: the claim asked again after */
	int64_t retry_at;            /* monotonic ms */
	char error[240];             /* the last failure */
	char host[PX_HOST_ID_MAX + 1]; /* cluster: the host it is handed to, "": none */
};

/* The copies of a core. Lock: lock guards storages, copies and jobs;
 * taken alone: calls into sources.c, provider.c and standby.c are made
 * without it. */
struct px_copies {
	struct px_core *core;
	pthread_mutex_t lock;
	pthread_cond_t cond;         /* monotonic */
	pthread_t thread;
	int started;
	int stop;
	int kick;
	char host[256];
	struct storage *st;
	size_t nst, capst;
	struct copy *c;
	size_t nc, capc;
	struct job *jobs;
	size_t njobs, capjobs;
	/* per asset, from the last reload (borrowed from its catalog) */
	int *want;                   /* -2: the core's catalog says */
	const char **sha;
	unsigned char *sha_set;
	size_t cap;                  /* assets_cap */
	_Atomic uint64_t n_made, n_failed, n_bytes, n_in_way;
	_Atomic uint64_t n_read_in_way; /* ...of them found by a read of a copy */
	struct gate *reading;        /* the copy's reader, under lock: a stop
				      * cancels its transfer */
	int64_t rescan_at;           /* cluster: other hosts' manifests, monotonic ms */
	/* the claim of the running copy (the copies thread only) */
	char claim_key[600];         /* "" : none held */
	int64_t claim_ttl_ms;
	int64_t claim_renew_at;
	int claim_lost;              /* a renewal found it another host's */
	/* across hosts (cluster mode): the live hosts, under lock */
	struct peer *peers;
	size_t npeers;
	int64_t sync_at;             /* monotonic ms; the copies thread only */
	struct psrc *ps;             /* the copies thread only */
	size_t nps, capps;
};

/* An ops table whose submit takes only a spare slot of the provider
 * (spare.c). */
struct gate {
	struct px_fetch_ops ops;
	struct px_core *core;
	struct px_copies *cp;
	size_t prov;
	_Atomic int busy;            /* a submit found no spare slot */
	_Atomic uint64_t id;         /* the transfer in flight, 0: none (ranges go
				      * one at a time): cancelled at a stop */
};

/* Where a copy is made: its folder, opened once from the storage's
 * (dest.c). */
struct cp_dest {
	int dir;                     /* the copy's folder; -1: not opened */
	char base[NAME_MAX + 1];     /* the copy's file name */
	char tmp[NAME_MAX + 1];      /* the .partial made here; "": none */
	int had;                     /* a copy of ours at base, to replace */
	ino_t ino;                   /* its inode */
};

/* ---- table.c: looking things up (cp->lock held, unless said) */

long cp_find_storage(struct px_copies *cp, const char *name);
long cp_find_copy(struct px_copies *cp, size_t asset, size_t storage);
long cp_find_job(struct px_copies *cp, size_t asset);
/* Room in *arr (of *cap elements of size) for element n: 0, or -1. */
int cp_grow(void **arr, size_t *cap, size_t n, size_t size);
/* Cluster mode and a storage without a host (NFS, every host writes it):
 * each host keeps a manifest of its own there. */
int cp_shared(const struct px_copies *cp, const struct storage *s);
/* Cluster mode with a hosts registry: a storage with a host (a local
 * disk) is placed on by the cluster, one copy per host. Any lock. */
int cp_clustered(const struct px_copies *cp);
/* A local disk of this host. */
int cp_own_disk(const struct px_copies *cp, const struct storage *s);
/* The path of the asset's copy on s. */
void cp_copy_path(struct px_core *core, const struct storage *s, size_t asset, char *out,
		  size_t n);
/* The asset's sha256 now (the last reload's, else the core's catalog). */
const char *cp_want_sha(struct px_copies *cp, size_t asset);
/* How many copies the asset wants. */
int cp_want_copies(struct px_copies *cp, size_t asset);
/* Wakes the copies thread for a look now. */
void cp_kick(struct px_copies *cp);

/* ---- place.c: where a copy goes */

/* The copies of asset a that serve: here, and on the other live hosts'
 * disks (cluster mode). cp->lock held. */
int cp_copies_held(struct px_copies *cp, size_t a);
/*
 * Places job j (asset a): on one host only, this host's storages without
 * a host then (cluster mode) every live host's disks; a place on another
 * host's disk is that host's to take: the job waits here with "copying on
 * another host" and names it (j->host). PX_WAIT_NONE with *pick the index
 * in cp->st. in, own, host: room for every place. cp->lock held.
 */
enum px_copy_wait cp_place_job(struct px_copies *cp, size_t a, struct job *j,
			       struct px_place_in *in, long *own, const char **host,
			       size_t *pick);

/* ---- storage.c: the storages, their role and drain */

/* Takes in the catalog's storages: new ones added, known ones updated,
 * missing ones marked out of the catalog. cp->lock held. */
void cp_merge_storages(struct px_copies *cp, const struct px_catalog *cat);
/* Moves the viewers of drained storages' copies away. cp->lock held;
 * dropped around the moves. */
void cp_storages_drain(struct px_copies *cp);
/* Looks at every storage again (reachable, free space), without the lock
 * around the calls. cp->lock held. */
void cp_storages_look(struct px_copies *cp);
/* Reads the manifests of storages that came in (and, cluster mode, the
 * other hosts' again when due). cp->lock held; dropped around the
 * registrations. */
void cp_storages_load(struct px_copies *cp);

/* ---- manifest.c: the storages' manifests */

/* Rewrites storage si's manifest from the copies known there. cp->lock
 * held. */
void cp_manifest_save(struct px_copies *cp, size_t si);
/* Reads storage si's manifests and registers the copies that still match
 * (rescan: a periodic look at other hosts'). cp->lock held; dropped
 * around the registrations. */
void cp_manifest_load(struct px_copies *cp, size_t si, int rescan);

/* ---- serve.c: a copy as a source of its asset */

/* A copy to register: its file, its storage's name (borrowed until
 * px_copies_free) and provider, local: the storage names a host. */
struct cp_reg {
	size_t asset;
	const char *file, *storage, *prov;
	int local;
	struct px_copy_file id;
};
/* Registers a copy as a source into *k (no lock held). 0 on success. */
int cp_register_copy(struct px_copies *cp, const struct cp_reg *r, size_t *k);

/* ---- stale.c: copies that stop serving */

/* Drops the serving copies a read found replaced. cp->lock held. */
void cp_drop_replaced(struct px_copies *cp);
/* Copies whose storage went away stop serving; back when it returns.
 * cp->lock held; dropped around the calls into sources.c. */
void cp_follow_storages(struct px_copies *cp);
/* Asks again the ETag of the source each copy to recheck came from; a
 * new one makes the copy stale. cp->lock held; dropped around the ask. */
void cp_recheck_etags(struct px_copies *cp);

/* ---- claim.c: the claim of a copy (cluster mode) */

/* Renews the held claim when due (force: now). The copies thread. */
void cp_claim_renew(struct px_copies *cp, int force);
/* Drops the held claim if it is still ours (no lock held). */
void cp_claim_drop(struct px_copies *cp);
/* Takes the claim job ji needs before copying to storage si: 1 copy now,
 * 0 not now. cp->lock held; dropped around the store's calls. */
int cp_claim_job(struct px_copies *cp, long ji, size_t si);

/* ---- peers.c: across hosts (cluster mode) */

/* Whether this host holds a serving copy of the asset on its own disks.
 * cp->lock held. */
int cp_self_holds(const struct px_copies *cp, size_t asset);
/* Whether host p published a serving copy of the asset on its disks. */
int cp_peer_holds(const struct px_copies *cp, const struct peer *p, size_t asset);
/* How many live other hosts hold a serving copy of the asset. cp->lock
 * held. */
int cp_peers_holding(const struct px_copies *cp, size_t asset);
void cp_peers_free(struct peer *p, size_t n);
/* Publishes this host's state, reads the live hosts' and follows their
 * copies (the copies thread, no lock held). */
void cp_cluster_sync(struct px_copies *cp);
/* cp_cluster_sync when due (the copies thread, no lock held). */
void cp_sync_due(struct px_copies *cp);

/* ---- spare.c: reading a source in spare slots */

/* Opens source k of the asset as a range reader (an HTTP one through g,
 * spare slots only). */
enum px_status cp_open_source(struct px_core *core, size_t asset, size_t k, struct gate *g,
			      struct px_rangeread **out);
/* Source k's ETag into etag: 0, 1 when no spare slot was free (ask
 * later), -1 when it did not answer. */
int cp_probe_etag(struct px_core *core, size_t asset, size_t k, char *etag, size_t n);
/* Waits ms unless stopping: 1 when stopping. The copies thread: a held
 * claim is renewed when due. */
int cp_pause_ms(struct px_copies *cp, int64_t ms);
/* One whole read of a source. */
struct cp_read {
	size_t job;                  /* its progress into cp->jobs[job] */
	size_t asset, k;             /* source k of the asset */
	int fd;                      /* written to; -1: hashed only */
	char *why;                   /* the failure, n bytes */
	size_t n;
};
/* Reads all of the source, hashing it into sha. PX_OK, or the failure
 * with why; PX_ESHUTDOWN when stopping. No lock held. */
enum px_status cp_stream_source(struct px_copies *cp, const struct cp_read *rd,
				unsigned char sha[VF_HASH_LEN]);

/* ---- dest.c: the copy's place on a storage others may write to */

/* The asset's copy's place on storage si: its folder opened (made when
 * missing), nothing there or a copy of ours. PX_OK; PX_EEXIST with *wait
 * when something is in the way; else PX_EIO. No lock held. */
enum px_status cp_dest_open(struct px_copies *cp, size_t asset, size_t si, struct cp_dest *d,
			    enum px_copy_wait *wait, char *why, size_t n);
/* Moves the finished .partial (fd) to the copy's name. */
enum px_status cp_dest_commit(struct cp_dest *d, int fd, enum px_copy_wait *wait, char *why,
			      size_t n);
/* Removes the .partial made here (never another name) and closes. */
void cp_dest_close(struct cp_dest *d);

/* ---- copy.c: making one copy */

/* Makes one copy of the asset on storage si for job ji: PX_OK once it
 * serves; PX_EEXIST with *wait set when it must wait; else why. No lock
 * held. */
enum px_status cp_make_copy(struct px_copies *cp, size_t ji, size_t asset, size_t si,
			    enum px_copy_wait *wait, char *why, size_t n);

/* ---- job.c: the jobs */

/* Brings the jobs up to date with what each asset wants and has; returns
 * the job to run (its storage in *si), or -1. cp->lock held. */
long cp_jobs_plan(struct px_copies *cp, size_t *si);
/* Runs job ji on storage si and takes in its outcome. cp->lock held;
 * dropped around the copy. */
void cp_job_run(struct px_copies *cp, long ji, size_t si);

#endif
