/*
 * copies.c - verified copies of assets on the catalog's storages.
 *
 * Storages. The catalog's "storages" (a name, a directory, the host that
 * owns it when it is a local disk, min_free_bytes, the copying role). A
 * storage is reachable when its host is this host (or it names none: NFS,
 * every host reads it), its directory exists and is writable, statvfs
 * answers, and it is the file system (device) it was when seamfs first
 * saw it reachable: an unmounted storage's bare mount point is "storage
 * not ready", never written; the copies thread looks again every second. This host's id is
 * the host_id option, else the host name (px_host_id_default).
 *
 * Placement (px_copies_place, pure). An asset that wants N copies
 * ("copies", else the copies setting) and has fewer that serve gets a
 * job. Its storage: reachable, the role on, no serving copy of the asset
 * there, free space >= min_free_bytes + the asset's size; the freest of
 * those. With none the job waits, spends no attempt, and says why, in
 * this order: a storage holding a copy that does not serve is unreachable
 * ("storage not ready") or has the role off ("copying off"); storages
 * that would take it are all full ("no room"); storages with the role
 * that lack the asset exist but none is reachable ("storage not ready");
 * else "no storage". The next placement (every second, at once after a
 * role change or a reload) lets it go on its own.
 *
 * The copy. One job at a time, on the copies thread: the source is a
 * live verified one of the asset (an existing copy too; else the one
 * that served, else any live one), read in 1 MiB ranges through background transfers that take
 * only a spare slot (PX_XFER_SPARE: free now, nobody waiting, preempted
 * by any viewer's open); a range that found no spare slot or was
 * preempted waits 200 ms and is asked again, costing no attempt. The bytes
 * go to STORAGE/ASSET-PATH.XXXXXX.partial while a full SHA-256 runs over
 * them.
 *
 * Hostile storages (others may write there): the copy's folder is reached
 * from the storage's directory one component at a time, never through a
 * link nor onto another file system (px_dir_walk); the .partial is a new
 * file (O_EXCL|O_NOFOLLOW, random name); it is renamed in that folder
 * onto nothing, or onto a copy this host made (its records' size and
 * SHA-256, stale or not). A link on the way ("link in the way") or any
 * other file at the place ("foreign file in the way") is left alone,
 * logged and counted; the job waits with that reason and looks again
 * every IN_WAY_RETRY_MS.
 * A serving copy is read the same way (px_source_open, rangeread.c):
 * opened beneath the storage's directory, never through a link nor onto
 * another file system, and only as the file made or found (its size,
 * device, inode: registered with it); a read that finds it replaced marks
 * it and no session goes there, and this thread drops it (drop_replaced):
 * stale, logged once and counted.
 * Then: the size; the catalog's sha256 when it has one; else the copy's
 * sampled fingerprint against the asset's reference (or, before there is
 * one, against the source's own samples read again) and, when a second
 * source is live, that source's full SHA-256. Then fsync, rename, fsync
 * of the directory, the manifest, and the copy becomes a verified path
 * source of the asset (sources.c) on the storage's own provider
 * ("storage:NAME", no connection limit, preferred for new sessions when
 * the disk is this host's). A failed read or a mismatch fails the
 * attempt: the .partial goes, the job retries from scratch after 1 s,
 * doubling, at most 60 s.
 *
 * Persistence. Each storage holds STORAGE/.seamfs-copies.json: per asset
 * id the file, size and full SHA-256 of its copy (written atomically).
 * At mount, and when a reload brings a storage, a listed copy whose file
 * is there at the asset's size (and whose SHA-256 equals the catalog's,
 * when the catalog has one) serves again without a new copy.
 *
 * Cluster mode (core->store), a storage without a host (shared, NFS):
 * before copying there a job takes PREFIX:copy:{ASSET}:STORAGE (SET NX PX
 * 3 heartbeats; renewed from the copy loop, compare-and-deleted at the
 * end); one another host holds makes it wait ("copying on another host"),
 * no answer too ("store not answering"). Each host writes
 * .seamfs-copies.HOST.json with its own copies and reads every
 * .seamfs-copies*.json there (mount, every RESCAN_MS, a reload, after a
 * claim): another host's copy is checked as at mount and registered.
 *
 * Across hosts (cluster mode with a hosts registry), storages that name
 * their host (local disks): each host publishes its disks (role, room)
 * and the assets it holds there in PREFIX:cstate:HOST and reads the live
 * hosts' every SYNC_MS (cluster_sync). A live host's copy is a source
 * here (provider peer:HOST, its peer endpoint: control/peer.c), dropped
 * when the host leaves the registry, back when it returns. Placement
 * weighs every live host's disks with the same figures, one copy per
 * host (place_job); a place on another host's disk waits here ("copying
 * on another host"), and the host that owns it copies under the claim
 * PREFIX:copy:{ASSET}:/hosts, reading the others' records again first
 * and publishing its copy before the claim goes.
 *
 * Staleness. A reload that gives an asset another sha256, or a source
 * whose ETag changed since the copy (asked at mount and after each
 * reload), makes its copies stop serving at once; the job makes them
 * again, on the same storage when it can. A new size needs a remount: the
 * manifest's size no longer matches then. A copy whose storage becomes unreachable stops
 * serving until it is back. A storage removed from the catalog: its
 * copies stop serving; no file is deleted.
 *
 * Roles. ctl turns a storage's copying role off or on; a drain also
 * drains its copies' provider and moves their sessions away, each by a
 * cutover at its offset (move_viewers).
 *
 * Lock: cp->lock guards storages, copies and jobs; taken alone: calls
 * into sources.c, provider.c and standby.c are made without it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <jansson.h>

#include "catalog.h"
#include "clock.h"
#include "copies.h"
#include "context.h"
#include "fingerprint.h"
#include "hash.h"
#include "health.h"
#include "hosts.h"
#include "kvstore.h"
#include "log.h"
#include "provider.h"
#include "rangeread.h"
#include "sources.h"
#include "standby.h"
#include "verdict.h"

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

/* ---- placement */

const char *px_copy_wait_name(enum px_copy_wait w)
{
	switch (w) {
	case PX_WAIT_NONE: return "";
	case PX_WAIT_NO_STORAGE: return "no storage";
	case PX_WAIT_NO_ROOM: return "no room";
	case PX_WAIT_NOT_READY: return "storage not ready";
	case PX_WAIT_COPYING_OFF: return "copying off";
	case PX_WAIT_OTHER_HOST: return "copying on another host";
	case PX_WAIT_STORE_DOWN: return "store not answering";
	case PX_WAIT_FOREIGN: return "foreign file in the way";
	case PX_WAIT_LINK: return "link in the way";
	case PX_WAIT_NO_HOST: return "no live host";
	}
	return "";
}

enum px_copy_wait px_copies_place(const struct px_place_in *s, size_t n, int64_t size,
				  size_t *pick)
{
	long best = -1;
	int eligible = 0, held_unready = 0, held_off = 0, role_unready = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i].holds == 2 && !s[i].reachable)
			held_unready = 1;
		if (s[i].holds == 2 && s[i].reachable && !s[i].copying)
			held_off = 1;
		if (s[i].holds != 1 && s[i].copying && !s[i].reachable)
			role_unready = 1;
		if (!s[i].reachable || !s[i].copying || s[i].holds == 1)
			continue;
		eligible = 1;
		/* free >= min_free + size, without the sum (it may overflow) */
		if (s[i].free_bytes < size || s[i].free_bytes - size < s[i].min_free)
			continue;
		if (best < 0 || s[i].free_bytes > s[best].free_bytes)
			best = (long)i;
	}
	if (best >= 0) {
		*pick = (size_t)best;
		return PX_WAIT_NONE;
	}
	if (held_unready)
		return PX_WAIT_NOT_READY;
	if (held_off)
		return PX_WAIT_COPYING_OFF;
	if (eligible)
		return PX_WAIT_NO_ROOM;
	if (role_unready)
		return PX_WAIT_NOT_READY;
	return PX_WAIT_NO_STORAGE;
}

/* ---- storages */

static void storage_check(const char *host, struct storage *s)
{
	struct stat sb;
	struct statvfs vb;
	s->reachable = 0;
	s->free_bytes = 0;
	if (s->host && strcmp(s->host, host) != 0)
		snprintf(s->why, sizeof(s->why), "a local disk of host %s", s->host);
	else if (stat(s->path, &sb) != 0)
		snprintf(s->why, sizeof(s->why), "%s", strerror(errno));
	else if (!S_ISDIR(sb.st_mode))
		snprintf(s->why, sizeof(s->why), "not a directory");
	else if (s->dev_known && sb.st_dev != s->dev)
		snprintf(s->why, sizeof(s->why), "not the file system seamfs first saw there "
			 "(unmounted?)");
	else if (access(s->path, W_OK) != 0)
		snprintf(s->why, sizeof(s->why), "not writable: %s", strerror(errno));
	else if (statvfs(s->path, &vb) != 0)
		snprintf(s->why, sizeof(s->why), "statvfs: %s", strerror(errno));
	else if (vb.f_flag & ST_RDONLY)
		snprintf(s->why, sizeof(s->why), "mounted read-only");
	else {
		s->reachable = 1;
		s->why[0] = '\0';
		if (!s->dev_known)
			s->dev = sb.st_dev;
		s->dev_known = 1;
		s->free_bytes = (int64_t)vb.f_bavail * (int64_t)vb.f_frsize;
	}
}

static long find_storage(struct px_copies *cp, const char *name)
{
	for (size_t i = 0; i < cp->nst; i++)
		if (strcmp(cp->st[i].name, name) == 0)
			return (long)i;
	return -1;
}

static long find_copy(struct px_copies *cp, size_t asset, size_t storage)
{
	for (size_t i = 0; i < cp->nc; i++)
		if (cp->c[i].asset == asset && cp->c[i].storage == storage)
			return (long)i;
	return -1;
}

static long find_job(struct px_copies *cp, size_t asset)
{
	for (size_t i = 0; i < cp->njobs; i++)
		if (cp->jobs[i].asset == asset)
			return (long)i;
	return -1;
}

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 8;
	void *p = realloc(*arr, ncap * size);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Takes in the catalog's storages: new ones added, known ones updated,
 * missing ones marked out of the catalog. cp->lock held. */
static void merge_storages(struct px_copies *cp, const struct px_catalog *cat)
{
	for (size_t i = 0; i < cp->nst; i++)
		cp->st[i].in_catalog = 0;
	for (size_t j = 0; j < cat->nstorages; j++) {
		const struct px_storage *ns = &cat->storages[j];
		long i = find_storage(cp, ns->name);
		if (i < 0) {
			if (grow((void **)&cp->st, &cp->capst, cp->nst, sizeof(*cp->st)))
				continue;
			struct storage *s = &cp->st[cp->nst];
			memset(s, 0, sizeof(*s));
			s->name = strdup(ns->name);
			if (!s->name)
				continue;
			snprintf(s->prov, sizeof(s->prov), "storage:%s", ns->name);
			s->copying = ns->copying;
			s->cat_copying = ns->copying;
			i = (long)cp->nst++;
		}
		struct storage *s = &cp->st[i];
		if (!s->path || strcmp(s->path, ns->path) != 0)
			s->loaded = s->dev_known = 0; /* another directory: seen anew */
		free(s->path);
		free(s->host);
		s->path = strdup(ns->path);
		s->host = ns->host ? strdup(ns->host) : NULL;
		s->min_free = ns->min_free_bytes;
		if (ns->copying != s->cat_copying)
			s->copying = ns->copying; /* the catalog changed its mind: it wins */
		s->cat_copying = ns->copying;
		s->in_catalog = s->path != NULL;
	}
}

/* ---- the manifest */

/* Cluster mode and a storage without a host (NFS, every host writes it):
 * each host keeps a manifest of its own there. */
static int shared(const struct px_copies *cp, const struct storage *s)
{
	return cp->core->store != NULL && s->host == NULL;
}

/* The name of this host's manifest on s. */
static void manifest_name(const struct px_copies *cp, const struct storage *s, char *out,
			  size_t n)
{
	if (shared(cp, s))
		snprintf(out, n, "%s.%s.json", MANIFEST_PREFIX, cp->host);
	else
		snprintf(out, n, "%s", MANIFEST);
}

/* This host's manifest on s. */
static void manifest_path(const struct px_copies *cp, const struct storage *s, char *out,
			  size_t n)
{
	char name[300];
	manifest_name(cp, s, name, sizeof(name));
	snprintf(out, n, "%s/%s", s->path, name);
}

static void copy_file(struct px_core *core, const struct storage *s, size_t asset, char *out,
		      size_t n)
{
	snprintf(out, n, "%s/%s", s->path, core->cat->assets[asset].path);
}

/* ---- reading a copy on a storage others may write to */

/* The copy that source k of the asset is (its record: by storage, since a
 * copy is recorded before it becomes a source), or -1. cp->lock held. */
static long find_source_copy(struct px_copies *cp, size_t asset, size_t k)
{
	const char *storage = cp->core->cat->assets[asset].sources[k].storage;
	long si = storage ? find_storage(cp, storage) : -1;
	return si >= 0 ? find_copy(cp, asset, (size_t)si) : -1;
}

static void manifest_save(struct px_copies *cp, size_t si);

/* Copy ci was found replaced by a read (px_source_open: w
 * PX_IN_WAY_LINK, a link on its way, or a foreign file): it stops
 * serving, once, stale (the job makes it again, and waits while the
 * thing stays in its way). The copies thread, cp->lock held; dropped
 * around the call into sources.c. */
static void drop_in_way(struct px_copies *cp, long ci, int w)
{
	struct px_core *core = cp->core;
	struct copy *c = &cp->c[ci];
	size_t asset = c->asset, k = c->k;
	char why[400], sname[256];
	c->serving = 0;
	c->stale = 1;
	c->dropped = w == PX_IN_WAY_LINK ? PX_WAIT_LINK : PX_WAIT_FOREIGN;
	atomic_fetch_add(&cp->n_in_way, 1);
	atomic_fetch_add(&cp->n_read_in_way, 1);
	snprintf(sname, sizeof(sname), "%s", cp->st[c->storage].name);
	if (c->mine)
		manifest_save(cp, c->storage);
	snprintf(why, sizeof(why), "copy on storage %s: %s", sname,
		 px_copy_wait_name(c->dropped));
	px_warn("copies", "asset %s: the copy on storage %s (%s) %s: left alone, it stops "
		"serving", core->cat->assets[asset].id, sname,
		core->cat->assets[asset].sources[k].path,
		w == PX_IN_WAY_LINK ? "is reached through a link" : "is not the file seamfs made");
	pthread_mutex_unlock(&cp->lock);
	px_sources_drop(core, asset, k, why);
	pthread_mutex_lock(&cp->lock);
}

/* Drops the serving copies a read found replaced (px_source_open marks
 * them). The copies thread, cp->lock held. */
static void drop_replaced(struct px_copies *cp)
{
	for (size_t i = 0; i < cp->nc; i++) {
		struct copy *c = &cp->c[i];
		if (!c->registered || c->stale)
			continue;
		struct src_rt *all = __atomic_load_n(&cp->core->assets[c->asset].src,
						     __ATOMIC_ACQUIRE);
		int w = all ? atomic_load(&all[c->k].in_way) : PX_IN_WAY_NONE;
		if (w != PX_IN_WAY_NONE)
			drop_in_way(cp, (long)i, w);
	}
}

/* Rewrites storage si's manifest from the copies known there: a stale
 * one stays listed as "stale" (it serves no more, but its file is this
 * host's to replace). cp->lock held. */
static void manifest_save(struct px_copies *cp, size_t si)
{
	struct px_core *core = cp->core;
	struct storage *s = &cp->st[si];
	json_t *root = json_object(), *all = json_object();
	char name[300], err[400] = "out of memory";
	int dfd = -1;
	if (!root || !all || json_object_set_new(root, "copies", all)) {
		json_decref(root);
		return;
	}
	for (size_t i = 0; i < cp->nc; i++) {
		const struct copy *c = &cp->c[i];
		if (c->storage != si || !c->mine)
			continue;
		json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:s}", "file",
				      core->cat->assets[c->asset].path, "size", (json_int_t)c->size,
				      "sha256", c->sha, "source", c->src_key, "etag", c->etag);
		if (o && c->stale)
			json_object_set_new(o, "stale", json_true());
		json_object_set_new(all, core->cat->assets[c->asset].id, o);
	}
	char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(root);
	manifest_name(cp, s, name, sizeof(name));
	struct stat sb;
	if (text && (dfd = px_dir_open(s->path)) < 0)
		snprintf(err, sizeof(err), "%s: %s", s->path, strerror(errno));
	if (dfd >= 0 && (fstat(dfd, &sb) != 0 || !s->dev_known || sb.st_dev != s->dev)) {
		/* unmounted meanwhile: its bare mount point gets nothing */
		snprintf(err, sizeof(err), "%s is not the file system seamfs first saw there",
			 s->path);
		close(dfd);
		dfd = -1;
	}
	if (dfd < 0 || px_write_atomic_at(dfd, s->path, name, text, strlen(text), 0644, err,
					  sizeof(err)) != PX_OK)
		px_warn("copies", "storage %s: the manifest could not be written: %s", s->name, err);
	if (dfd >= 0)
		close(dfd);
	free(text);
}

/* The asset's sha256 now (the last reload's, else the core's catalog). */
static const char *want_sha(struct px_copies *cp, size_t asset)
{
	if (asset < cp->cap && cp->sha_set[asset])
		return cp->sha[asset];
	return cp->core->cat->assets[asset].sha256;
}

static int want_copies(struct px_copies *cp, size_t asset)
{
	const struct px_asset *a = &cp->core->cat->assets[asset];
	int n = asset < cp->cap && cp->want[asset] != -2 ? cp->want[asset] : a->copies;
	return n >= 0 ? n : cp->core->cfg->copies;
}

/* Registers a copy as a source (no lock held). 0 on success. */
static int register_copy(struct px_copies *cp, size_t asset, size_t si, const char *file,
			 const char *storage_name, const char *prov, int local,
			 const struct px_copy_file *id, size_t *k)
{
	enum px_status st = px_sources_add_copy(cp->core, asset, file, storage_name, prov, local,
						id, k);
	if (st != PX_OK) {
		px_warn("copies", "asset %s: copy %s could not become a source: %s",
			cp->core->cat->assets[asset].id, file,
			st == PX_EINVAL ? "no room for another source while mounted (remount)"
					: px_strerror(st));
		return -1;
	}
	(void)si;
	return 0;
}

/* Keeps a copy of this host's that serves no more (stale, or no longer
 * the asset): its file stays ours to replace (place_check). cp->lock held. */
static void remember_stale(struct px_copies *cp, size_t asset, size_t si, int64_t size,
			   const char *sha)
{
	if (find_copy(cp, asset, si) >= 0 || grow((void **)&cp->c, &cp->capc, cp->nc,
						  sizeof(*cp->c)))
		return;
	struct copy *c = &cp->c[cp->nc++];
	memset(c, 0, sizeof(*c));
	c->asset = asset;
	c->storage = si;
	c->mine = c->stale = 1;
	c->size = size;
	snprintf(c->sha, sizeof(c->sha), "%s", sha);
}

/* Parses the manifest file, never through a link put at its name (its
 * error would quote the target's first bytes) nor blocking on a FIFO:
 * NULL with jerr set when it cannot. */
static json_t *manifest_read(const char *file, json_error_t *jerr)
{
	struct stat sb;
	json_t *root = NULL;
	int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	memset(jerr, 0, sizeof(*jerr));
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		snprintf(jerr->text, sizeof(jerr->text), "%s",
			 fd < 0 ? strerror(errno) : "not a regular file");
	else
		root = json_loadfd(fd, 0, jerr);
	if (fd >= 0)
		close(fd);
	return root;
}

/* Whether asset a's copy is on storage si, opened as a reader would (a
 * link in its place or on its way, a folder swapped for one, is no copy):
 * its stat into sb. cp->lock held. */
static int found_on_storage(struct px_copies *cp, size_t si, size_t a, struct stat *sb)
{
	int fd = px_open_in_dir(cp->st[si].path, cp->st[si].dev, cp->core->cat->assets[a].path);
	int ok = fd >= 0 && fstat(fd, sb) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Reads one manifest file of storage si and registers what still
 * matches and is not known yet (mine: the copies are this host's).
 * rescan: a periodic look at another host's manifest (quiet about what
 * does not match). Called with cp->lock held; drops it around the
 * registrations. */
static void manifest_load_file(struct px_copies *cp, size_t si, const char *file, int mine,
			       int rescan)
{
	struct px_core *core = cp->core;
	json_error_t jerr;
	json_t *root = manifest_read(file, &jerr);
	if (!root) {
		if (!rescan && access(file, F_OK) == 0)
			px_warn("copies", "storage %s: %s:%d: %s (its copies are made again)",
				cp->st[si].name, file, jerr.line, jerr.text);
		return;
	}
	json_t *all = json_object_get(root, "copies");
	const char *id;
	json_t *v;
	json_object_foreach(all, id, v) {
		long a = px_catalog_find(core->cat, id);
		json_t *jsize = json_object_get(v, "size"), *jsha = json_object_get(v, "sha256");
		if (a < 0 || !core->assets[a].listed || core->cat->assets[a].kind != PX_ASSET_PLAIN ||
		    !json_is_integer(jsize) || !json_is_string(jsha) ||
		    strlen(json_string_value(jsha)) != 64)
			continue;
		/* known already; but a stale one another host made again (a new
		 * SHA-256 in its manifest) is taken in again */
		long ex = find_copy(cp, (size_t)a, si);
		if (ex >= 0 && (mine || !cp->c[ex].stale ||
				strcmp(cp->c[ex].sha, json_string_value(jsha)) == 0))
			continue;
		int64_t size = json_integer_value(jsize);
		const char *sha = want_sha(cp, (size_t)a);
		struct stat sb;
		char path[PATH_MAX];
		copy_file(core, &cp->st[si], (size_t)a, path, sizeof(path));
		int was_stale = json_is_true(json_object_get(v, "stale"));
		if (was_stale || !found_on_storage(cp, si, (size_t)a, &sb))
			sb.st_size = -1;
		if (was_stale || size != core->assets[a].size ||
		    (sha && strcmp(sha, json_string_value(jsha))) || sb.st_size != size) {
			if (!rescan && !was_stale)
				px_info("copies", "asset %s: the copy on storage %s (%s) no longer "
					"matches the asset: made again", id, cp->st[si].name, file);
			if (mine && ex < 0)
				remember_stale(cp, (size_t)a, si, size, json_string_value(jsha));
			continue;
		}
		if (ex < 0 && grow((void **)&cp->c, &cp->capc, cp->nc, sizeof(*cp->c)))
			break;
		if (ex < 0)
			ex = (long)cp->nc++;
		struct copy *c = &cp->c[ex];
		memset(c, 0, sizeof(*c));
		c->asset = (size_t)a;
		c->storage = si;
		c->mine = mine;
		c->size = size;
		c->ino = sb.st_ino;
		c->dev = sb.st_dev;
		snprintf(c->sha, sizeof(c->sha), "%s", json_string_value(jsha));
		const char *key = json_string_value(json_object_get(v, "source"));
		const char *etag = json_string_value(json_object_get(v, "etag"));
		snprintf(c->src_key, sizeof(c->src_key), "%s", key ? key : "");
		snprintf(c->etag, sizeof(c->etag), "%s", etag ? etag : "");
		c->recheck = c->etag[0] != '\0'; /* the origin may have changed meanwhile */
		size_t ci = (size_t)ex, k;
		char sname[256], prov[300];
		snprintf(sname, sizeof(sname), "%s", cp->st[si].name);
		snprintf(prov, sizeof(prov), "%s", cp->st[si].prov);
		int local = cp->st[si].host != NULL;
		pthread_mutex_unlock(&cp->lock);
		struct px_copy_file cf = { cp->st[si].dev, sb.st_dev, sb.st_ino };
		int ok = register_copy(cp, (size_t)a, si, path, cp->st[si].name, prov, local, &cf,
				       &k) == 0;
		pthread_mutex_lock(&cp->lock);
		if (ok) {
			cp->c[ci].k = k;
			cp->c[ci].registered = cp->c[ci].serving = 1;
			px_info("copies", "asset %s: copy on storage %s serves %s (%s, from %s)", id,
				sname, mine ? "again" : "here", path, file);
		} else {
			cp->c[ci].stale = 1;
		}
	}
	json_decref(root);
}

/* Reads storage si's manifests: its one, or in cluster mode on a shared
 * storage every .seamfs-copies*.json (this host's copies, and the other
 * hosts' that this host reads too). cp->lock held; dropped around the
 * registrations. */
static void manifest_load(struct px_copies *cp, size_t si, int rescan)
{
	char file[PATH_MAX], own[PATH_MAX];
	cp->st[si].loaded = 1;
	manifest_path(cp, &cp->st[si], own, sizeof(own));
	if (!shared(cp, &cp->st[si])) {
		manifest_load_file(cp, si, own, 1, rescan);
		return;
	}
	char dirpath[PATH_MAX];
	snprintf(dirpath, sizeof(dirpath), "%s", cp->st[si].path);
	DIR *d = opendir(dirpath);
	if (!d)
		return;
	char (*names)[NAME_MAX + 1] = NULL;
	size_t nn = 0, capn = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (strncmp(de->d_name, MANIFEST_PREFIX, strlen(MANIFEST_PREFIX)) != 0 ||
		    len < 5 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		if (grow((void **)&names, &capn, nn, sizeof(*names)))
			break;
		snprintf(names[nn++], sizeof(*names), "%s", de->d_name);
	}
	closedir(d);
	for (size_t i = 0; i < nn; i++) {
		snprintf(file, sizeof(file), "%s/%s", dirpath, names[i]);
		int mine = strcmp(file, own) == 0;
		if (!(rescan && mine)) /* this host's: read once, it wrote the rest */
			manifest_load_file(cp, si, file, mine, rescan);
	}
	free(names);
}

/* ---- the claim (cluster mode, a shared storage) */

static const char CLAIM_RENEW[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
static const char CLAIM_DROP[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('DEL', KEYS[1]) end return 0";

/* Renews the held claim when due (the copies thread; bounded by the
 * store's command bound). A claim found another host's sets claim_lost;
 * a store that does not answer is asked again at the next renewal. */
static void claim_renew(struct px_copies *cp, int force)
{
	struct px_store *store = cp->core->store;
	if (!store || !cp->claim_key[0] || (!force && px_now_ms() < cp->claim_renew_at))
		return;
	char ttl[32];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)cp->claim_ttl_ms);
	const char *keys[1] = { cp->claim_key }, *args[2] = { cp->host, ttl };
	struct px_reply *r = NULL;
	enum px_status st = px_store_eval(store, CLAIM_RENEW, 1, keys, 2, args, &r);
	if (st == PX_OK && r && r->type == PX_REPLY_INT && r->integer == 0)
		cp->claim_lost = 1;
	px_reply_free(r);
	int64_t every = cp->claim_ttl_ms / 3;
	cp->claim_renew_at = px_now_ms() + (every < CLAIM_RENEW_MS ? every : CLAIM_RENEW_MS);
}

/* Takes the claim to copy the asset to storage si (no lock held):
 * PX_WAIT_NONE when held (ours), else why the job waits. */
static enum px_copy_wait claim_take(struct px_copies *cp, size_t asset, const char *storage)
{
	struct px_core *core = cp->core;
	char key[sizeof(cp->claim_key)], ttl[32];
	if (px_store_key(core->store, key, sizeof(key), "copy:{%s}:%s",
			 core->cat->assets[asset].id, storage) < 0)
		return PX_WAIT_STORE_DOWN;
	int64_t hb = core->cfg->heartbeat_ms > 0 ? core->cfg->heartbeat_ms : 10000;
	int64_t ttl_ms = 3 * hb;
	snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
	const char *argv[6] = { "SET", key, cp->host, "NX", "PX", ttl };
	struct px_reply *r = NULL;
	enum px_status st = px_store_call(core->store, 6, argv, NULL, &r);
	int got = st == PX_OK && r && r->type == PX_REPLY_STATUS;
	int answered = st == PX_OK || st == PX_EBADRESP;
	px_reply_free(r);
	if (!answered)
		return PX_WAIT_STORE_DOWN;
	if (!got && st == PX_OK) {
		/* held: ours (this host id, a claim left by a restart) or not */
		const char *get[2] = { "GET", key };
		r = NULL;
		st = px_store_call(core->store, 2, get, NULL, &r);
		got = st == PX_OK && r && r->type == PX_REPLY_STR && strcmp(r->str, cp->host) == 0;
		px_reply_free(r);
		if (st != PX_OK && st != PX_EBADRESP)
			return PX_WAIT_STORE_DOWN;
	}
	if (!got)
		return st == PX_OK ? PX_WAIT_OTHER_HOST : PX_WAIT_STORE_DOWN;
	snprintf(cp->claim_key, sizeof(cp->claim_key), "%s", key);
	cp->claim_ttl_ms = ttl_ms;
	cp->claim_lost = 0;
	claim_renew(cp, 1); /* a claim left by a restart: its full ttl again */
	return PX_WAIT_NONE;
}

/* Drops the held claim if it is still ours (no lock held). */
static void claim_drop(struct px_copies *cp)
{
	if (!cp->core->store || !cp->claim_key[0])
		return;
	const char *keys[1] = { cp->claim_key }, *args[1] = { cp->host };
	struct px_reply *r = NULL;
	if (px_store_eval(cp->core->store, CLAIM_DROP, 1, keys, 1, args, &r) != PX_OK)
		px_info("copies", "claim %s could not be dropped (the store did not answer): it "
			"expires in %lld ms", cp->claim_key, (long long)cp->claim_ttl_ms);
	px_reply_free(r);
	cp->claim_key[0] = '\0';
}

/* ---- across hosts (cluster mode: storages that name their host) */

/* Cluster mode with a hosts registry: a storage with a host (a local
 * disk) is placed on by the cluster, one copy per host. */
static int clustered(const struct px_copies *cp)
{
	return cp->core->store != NULL && cp->core->hosts != NULL;
}

/* A local disk of this host. */
static int own_disk(const struct px_copies *cp, const struct storage *s)
{
	return s->host && strcmp(s->host, cp->host) == 0;
}

/* Whether this host holds a serving copy of the asset on its own disks.
 * cp->lock held. */
static int self_holds(const struct px_copies *cp, size_t asset)
{
	for (size_t i = 0; i < cp->nc; i++)
		if (cp->c[i].asset == asset && cp->c[i].serving && !cp->c[i].stale &&
		    own_disk(cp, &cp->st[cp->c[i].storage]))
			return 1;
	return 0;
}

/* Whether host p published a serving copy of the asset on its disks
 * (assets a reload added beyond cp->cap: none). */
static int peer_holds(const struct px_copies *cp, const struct peer *p, size_t asset)
{
	return p->held && asset <= cp->cap && p->held[asset];
}

/* How many live other hosts hold a serving copy of the asset on their
 * disks (as of the last sync). cp->lock held. */
static int peers_holding(const struct px_copies *cp, size_t asset)
{
	int n = 0;
	for (size_t i = 0; i < cp->npeers; i++)
		n += !cp->peers[i].self && peer_holds(cp, &cp->peers[i], asset);
	return n;
}

static void peers_free(struct peer *p, size_t n)
{
	for (size_t i = 0; p && i < n; i++)
		free(p[i].held);
	free(p);
}

/* Appends a malloc'd "fmt" to the list: 0, or -1 out of memory. */
static int push_fmt(char ***v, size_t *n, size_t *cap, const char *fmt, ...) PX_PRINTF(4, 5);

static int push_fmt(char ***v, size_t *n, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	char *sv = NULL;
	if (grow((void **)v, cap, *n, sizeof(**v)))
		return -1;
	va_start(ap, fmt);
	int rc = vasprintf(&sv, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	(*v)[(*n)++] = sv;
	return 0;
}

/* This host's disks and the assets it holds there, as the store's
 * field/value pairs after the ttl (into *out; their count). cp->lock held. */
static size_t own_state(struct px_copies *cp, const char *ttl, char ***out)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	int bad = push_fmt(&v, &n, &cap, "%s", ttl);
	for (size_t i = 0; i < cp->nst && !bad; i++) {
		const struct storage *s = &cp->st[i];
		if (s->in_catalog && own_disk(cp, s))
			bad = push_fmt(&v, &n, &cap, "s:%s", s->name) ||
			      push_fmt(&v, &n, &cap, "%d %d %lld %lld", s->reachable, s->copying,
				       (long long)s->free_bytes, (long long)s->min_free);
	}
	for (size_t a = 0; a < cp->core->cat->nassets && !bad; a++)
		if (cp->core->assets[a].listed && self_holds(cp, a))
			bad = push_fmt(&v, &n, &cap, "a:%s", cp->core->cat->assets[a].id) ||
			      push_fmt(&v, &n, &cap, "1");
	if (bad && n > 0 && n % 2 == 0) /* a pair half pushed: dropped */
		free(v[--n]);
	*out = v;
	return n;
}

/* Replaces this host's record; ARGV[1] its ttl, then field/value pairs. */
static const char PUBLISH[] =
	"redis.call('DEL', KEYS[1])\n"
	"for i = 2, #ARGV, 200 do\n"
	"  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 199, #ARGV)))\n"
	"end\n"
	"redis.call('PEXPIRE', KEYS[1], ARGV[1])\n"
	"return 1\n";

/* Every registered host's record: {{id, {field, value, ...}}, ...}. */
static const char READ_ALL[] =
	"local out = {}\n"
	"for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do\n"
	"  local v = redis.call('HGETALL', ARGV[1] .. id)\n"
	"  if #v > 0 then out[#out + 1] = {id, v} end\n"
	"end\n"
	"return out\n";

/* Publishes this host's record (no lock held). */
static void publish(struct px_copies *cp)
{
	struct px_core *core = cp->core;
	char key[400], ttl[32], **v = NULL;
	int64_t hb = core->cfg->heartbeat_ms > 0 ? core->cfg->heartbeat_ms : 10000;
	/* liveness is the hosts registry's: this only outlives a long copy */
	snprintf(ttl, sizeof(ttl), "%lld", (long long)(10 * hb < 10000 ? 10000 : 10 * hb));
	if (px_store_key(core->store, key, sizeof(key), "cstate:%s", cp->host) < 0)
		return;
	pthread_mutex_lock(&cp->lock);
	size_t n = own_state(cp, ttl, &v);
	pthread_mutex_unlock(&cp->lock);
	const char *keys[1] = { key };
	if (n && px_store_eval(core->store, PUBLISH, 1, keys, (int)n, (const char **)v, NULL) !=
	    PX_OK)
		px_debug("copies", "this host's copies could not be published (the store did not "
			 "answer)");
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Fills peer p from its record's field/value pairs r. */
static void peer_parse(struct px_copies *cp, struct peer *p, const struct px_reply *r)
{
	for (size_t i = 0; i + 1 < r->n; i += 2) {
		const char *f = px_reply_str(r, i), *val = px_reply_str(r, i + 1);
		if (strncmp(f, "s:", 2) == 0 && p->nst < PEER_STORAGES_MAX) {
			struct pstorage *ps = &p->st[p->nst];
			long long fr = 0, mn = 0;
			if (sscanf(val, "%d %d %lld %lld", &ps->reachable, &ps->copying, &fr, &mn) != 4)
				continue;
			snprintf(ps->name, sizeof(ps->name), "%s", f + 2);
			ps->free_bytes = fr;
			ps->min_free = mn;
			p->nst++;
		} else if (strncmp(f, "a:", 2) == 0) {
			long a = px_catalog_find(cp->core->cat, f + 2);
			if (a >= 0 && (size_t)a <= cp->cap)
				p->held[a] = 1;
		}
	}
}

/* Reads the live hosts' records into a new list (*out, sorted by id as
 * the registry lists them): its length, or -1 when the store did not
 * answer. No lock held. */
static long read_peers(struct px_copies *cp, struct peer **out)
{
	struct px_core *core = cp->core;
	struct px_host_info live[PX_HOSTS_MAX];
	size_t nlive = px_hosts_list(core->hosts, live, PX_HOSTS_MAX);
	char set[300], pfx[300];
	struct px_reply *r = NULL;
	long n = -1;
	*out = NULL;
	if (px_store_key(core->store, set, sizeof(set), "hosts") < 0 ||
	    px_store_key(core->store, pfx, sizeof(pfx), "cstate:") < 0)
		return -1;
	const char *keys[1] = { set }, *args[1] = { pfx };
	if (px_store_eval(core->store, READ_ALL, 1, keys, 1, args, &r) != PX_OK || !r ||
	    r->type != PX_REPLY_ARRAY)
		goto out;
	struct peer *p = calloc(nlive + 1, sizeof(*p));
	if (!p)
		goto out;
	n = 0;
	for (size_t h = 0; h < nlive; h++) {
		const struct px_reply *e = NULL;
		for (size_t i = 0; i < r->n && !e; i++)
			if (r->el[i].type == PX_REPLY_ARRAY && r->el[i].n == 2 &&
			    strcmp(px_reply_str(&r->el[i], 0), live[h].id) == 0)
				e = &r->el[i];
		if (!e || e->el[1].type != PX_REPLY_ARRAY ||
		    !(p[n].held = calloc(cp->cap + 1, 1)))
			continue; /* no record yet: not a place, holds nothing */
		snprintf(p[n].id, sizeof(p[n].id), "%s", live[h].id);
		snprintf(p[n].url, sizeof(p[n].url), "%s", live[h].peer);
		p[n].self = live[h].self;
		peer_parse(cp, &p[n], &e->el[1]);
		n++;
	}
	*out = p;
out:
	px_reply_free(r);
	return n;
}

/* The peer URL of the asset's copy on a host whose endpoint is base. */
static void peer_url(const char *base, const char *id, char *out, size_t n)
{
	size_t o = (size_t)snprintf(out, n, "%s%s", base, PX_PEER_PATH);
	for (const unsigned char *c = (const unsigned char *)id; *c && o + 4 < n; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || strchr("-._~", *c))
			out[o++] = (char)*c;
		else
			o += (size_t)snprintf(out + o, n - o, "%%%02X", *c);
	}
	out[o < n ? o : n - 1] = '\0';
}

/* Another host's copy becomes (or is again) a source here. The copies
 * thread, no lock held. */
static void peer_source_add(struct px_copies *cp, const struct peer *p, size_t a)
{
	struct px_core *core = cp->core;
	char url[600], prov[PX_HOST_ID_MAX + 8], *hdr = NULL;
	size_t k, i = 0;
	while (i < cp->nps && !(cp->ps[i].asset == a && strcmp(cp->ps[i].host, p->id) == 0))
		i++;
	if (i == cp->nps) {
		if (grow((void **)&cp->ps, &cp->capps, cp->nps, sizeof(*cp->ps)))
			return;
		memset(&cp->ps[i], 0, sizeof(cp->ps[i]));
		cp->ps[i].asset = a;
		snprintf(cp->ps[i].host, sizeof(cp->ps[i].host), "%s", p->id);
		cp->nps++;
	}
	if (cp->ps[i].serving)
		return;
	peer_url(p->url, core->cat->assets[a].id, url, sizeof(url));
	snprintf(prov, sizeof(prov), "peer:%s", p->id);
	if (asprintf(&hdr, "Authorization: Bearer %s", core->peer_secret) < 0)
		return;
	enum px_status st = px_sources_add_peer(core, a, url, prov, hdr, &k);
	explicit_bzero(hdr, strlen(hdr));
	free(hdr);
	if (st != PX_OK) {
		px_warn("copies", "asset %s: host %s's copy cannot become a source: %s",
			core->cat->assets[a].id, p->id,
			st == PX_EINVAL ? "no room for another source or provider while mounted"
					: px_strerror(st));
		cp->ps[i].serving = 1; /* not asked again each second */
		cp->ps[i].k = (size_t)-1;
		return;
	}
	cp->ps[i].k = k;
	cp->ps[i].serving = 1;
	px_info("copies", "asset %s: host %s's copy is a source here (%s, provider %s)",
		core->cat->assets[a].id, p->id, url, prov);
}

/* Makes the sources here follow the live hosts' copies: a host that
 * holds one adds it; one that went away (its heartbeat expired) or no
 * longer holds it drops it. The copies thread, no lock held. */
static void peer_sources_follow(struct px_copies *cp, const struct peer *p, size_t np)
{
	struct px_core *core = cp->core;
	for (size_t h = 0; h < np && core->peer_secret; h++)
		for (size_t a = 0; !p[h].self && p[h].url[0] && a < core->cat->nassets; a++)
			if (peer_holds(cp, &p[h], a) && core->assets[a].listed &&
			    core->cat->assets[a].kind == PX_ASSET_PLAIN)
				peer_source_add(cp, &p[h], a);
	for (size_t i = 0; i < cp->nps; i++) {
		struct psrc *s = &cp->ps[i];
		const struct peer *ph = NULL;
		for (size_t h = 0; h < np && !ph; h++)
			if (strcmp(p[h].id, s->host) == 0)
				ph = &p[h];
		if (!s->serving || (ph && ph->url[0] && peer_holds(cp, ph, s->asset) &&
				    core->peer_secret))
			continue;
		s->serving = 0;
		if (s->k == (size_t)-1)
			continue;
		px_sources_drop(core, s->asset, s->k, ph ? "the host no longer holds a copy"
						       : "the host is gone (its heartbeat expired)");
		px_info("copies", "asset %s: host %s's copy is no longer a source here: %s",
			core->cat->assets[s->asset].id, s->host,
			ph ? "it no longer holds it" : "the host is gone");
	}
}

/* Publishes this host's state, reads the live hosts' and follows their
 * copies (the copies thread, no lock held). A store that does not answer
 * leaves the last view standing. */
static void cluster_sync(struct px_copies *cp)
{
	struct peer *np = NULL;
	cp->sync_at = px_now_ms() + SYNC_MS;
	publish(cp);
	long n = read_peers(cp, &np);
	if (n < 0)
		return;
	peer_sources_follow(cp, np, (size_t)n);
	pthread_mutex_lock(&cp->lock);
	struct peer *old = cp->peers;
	size_t nold = cp->npeers;
	cp->peers = np;
	cp->npeers = (size_t)n;
	pthread_mutex_unlock(&cp->lock);
	peers_free(old, nold);
}

/* cluster_sync when due (the copies thread, no lock held): a host with
 * no storage and no secret has nothing to tell nor to read. */
static void sync_due(struct px_copies *cp)
{
	if (!clustered(cp) || px_now_ms() < cp->sync_at)
		return;
	pthread_mutex_lock(&cp->lock);
	int any = cp->nst > 0 || cp->core->peer_secret;
	pthread_mutex_unlock(&cp->lock);
	if (any)
		cluster_sync(cp);
}

/*
 * The places for one more copy of asset a, for px_copies_place: the
 * storages without a host as this host sees them (*own: the index in
 * cp->st), then every live host's disks as that host published them
 * (this host's too, so that every host weighs the same figures; *own the
 * index of this host's, -1 another host's, *host its id). in, own and
 * host have room for cp->nst + PX_HOSTS_MAX * PEER_STORAGES_MAX. cp->lock
 * held.
 */
static size_t cluster_places(struct px_copies *cp, size_t a, struct px_place_in *in, long *own,
			     const char **host)
{
	size_t n = 0;
	int mine = self_holds(cp, a);
	for (size_t i = 0; i < cp->nst; i++) {
		const struct storage *s = &cp->st[i];
		if (s->host)
			continue;
		long ci = find_copy(cp, a, i);
		in[n] = (struct px_place_in){ s->reachable && s->in_catalog,
					      s->copying && s->in_catalog,
					      ci < 0 || !s->in_catalog ? 0
					      : cp->c[ci].serving && !cp->c[ci].stale ? 1 : 2,
					      s->free_bytes, s->min_free };
		own[n] = (long)i;
		host[n++] = cp->host;
	}
	for (size_t h = 0; h < cp->npeers; h++) {
		const struct peer *p = &cp->peers[h];
		for (size_t k = 0; k < p->nst; k++) {
			const struct pstorage *ps = &p->st[k];
			long si = p->self ? find_storage(cp, ps->name) : -1;
			if (p->self && (si < 0 || !own_disk(cp, &cp->st[si])))
				continue;
			in[n] = (struct px_place_in){ ps->reachable, ps->copying,
						      (p->self ? mine : peer_holds(cp, p, a)) ? 1 : 0,
						      ps->free_bytes, ps->min_free };
			own[n] = si;
			host[n++] = p->id;
		}
	}
	return n;
}

/* The copies of asset a that serve: here, and on the other live hosts'
 * disks (cluster mode). cp->lock held. */
static int copies_held(struct px_copies *cp, size_t a)
{
	int have = 0;
	for (size_t i = 0; i < cp->nc; i++)
		if (cp->c[i].asset == a && cp->c[i].serving && !cp->c[i].stale &&
		    cp->st[cp->c[i].storage].in_catalog)
			have++;
	return have + (clustered(cp) ? peers_holding(cp, a) : 0);
}

/* ---- reading a source in spare slots */

/* An ops table whose submit takes only a spare slot of the provider. */
struct gate {
	struct px_fetch_ops ops;
	struct px_core *core;
	struct px_copies *cp;
	size_t prov;
	_Atomic int busy;            /* a submit found no spare slot */
	_Atomic uint64_t id;         /* the transfer in flight, 0: none (ranges go
				      * one at a time): cancelled at a stop */
};

static enum px_status g_submit(void *impl, const struct px_fetch_params *p,
			       const struct px_fetch_cb *cb, uint64_t *id)
{
	struct gate *g = impl;
	enum px_status st = px_xfer_submit(g->core, g->prov, NULL, PX_XFER_SPARE, px_now_ms(), p,
					   cb, id);
	if (st == PX_EBUSY)
		atomic_store(&g->busy, 1);
	if (st == PX_OK) {
		atomic_store(&g->id, *id);
		/* a stop while this submit ran found no transfer to cancel: the
		 * range would have held the exit until it stalled out */
		pthread_mutex_lock(&g->cp->lock);
		int stop = g->cp->stop;
		pthread_mutex_unlock(&g->cp->lock);
		if (stop)
			g->core->ops.cancel(g->core->ops.impl, *id);
	}
	return st;
}

static void g_cancel(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->ops.cancel(g->core->ops.impl, id);
}

static void g_resume(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->ops.resume(g->core->ops.impl, id);
}

static enum px_status open_source(struct px_core *core, size_t asset, size_t k, struct gate *g,
				  struct px_rangeread **out)
{
	const struct px_source *src = &core->cat->assets[asset].sources[k];
	const struct px_provider *p = &core->cat->providers[src->provider];
	enum px_status st;
	if (src->path) {
		st = px_rangeread_new_fd(src->path, px_source_open(core, asset, k), out);
	} else {
		g->ops = (struct px_fetch_ops){ g_submit, g_cancel, g_resume, g };
		g->core = core;
		g->cp = core->copies;
		g->prov = src->provider;
		st = px_rangeread_new_http(&g->ops, src->url, (const char *const *)p->headers,
					   p->nheaders, RANGE_TIMEOUT_MS, 1, out);
	}
	if (st == PX_OK) {
		px_rangeread_set_size(*out, core->assets[asset].size);
		if (!src->path)
			px_rangeread_set_header_hosts(*out, (const char *const *)p->header_hosts,
						      p->nheader_hosts);
	}
	return st;
}

/* Source k's ETag into etag: 0, 1 when no spare slot was free (ask
 * later), -1 when it did not answer. */
static int probe_etag(struct px_core *core, size_t asset, size_t k, char *etag, size_t n)
{
	struct gate g = { 0 };
	struct px_rangeread *rr = NULL;
	struct vf_seen seen;
	char why[200];
	int rc = -1;
	if (open_source(core, asset, k, &g, &rr) == PX_OK) {
		enum px_status st = px_rangeread_probe(rr, &seen, why, sizeof(why));
		if (st == PX_OK) {
			snprintf(etag, n, "%s", seen.etag);
			rc = 0;
		} else if (atomic_load(&g.busy) || st == PX_ECANCELED) {
			rc = 1;
		}
	}
	px_rangeread_free(rr);
	return rc;
}

/* Waits ms unless stopping: 1 when stopping. The copies thread: a held
 * claim is renewed when due. */
static int pause_ms(struct px_copies *cp, int64_t ms)
{
	claim_renew(cp, 0);
	pthread_mutex_lock(&cp->lock);
	int64_t until = px_now_ms() + ms;
	while (!cp->stop && px_now_ms() < until) {
		struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
		pthread_cond_timedwait(&cp->cond, &cp->lock, &ts);
	}
	int stop = cp->stop;
	pthread_mutex_unlock(&cp->lock);
	return stop;
}

/*
 * Reads all of source k of the asset in spare slots, hashing it into
 * sha (and writing it to fd when >= 0), progress into job ji. PX_OK, or
 * the failure with why; PX_ESHUTDOWN when stopping.
 */
static enum px_status stream_source(struct px_copies *cp, size_t ji, size_t asset, size_t k,
				    int fd, unsigned char sha[VF_HASH_LEN], char *why, size_t n)
{
	struct px_core *core = cp->core;
	int64_t size = core->assets[asset].size, off = 0;
	struct gate g = { 0 };
	struct px_rangeread *rr = NULL;
	struct vf_hash *h = NULL;
	unsigned char *buf = malloc(CHUNK);
	enum px_status st = PX_ENOMEM;

	if (!buf || vf_hash_new(&h) != PX_OK)
		goto out;
	if ((st = open_source(core, asset, k, &g, &rr)) != PX_OK)
		goto out;
	pthread_mutex_lock(&cp->lock);
	cp->reading = &g;
	pthread_mutex_unlock(&cp->lock);
	struct vf_reader r = px_rangeread_reader(rr);
	int yields = 0;
	while (off < size) {
		size_t len = size - off < CHUNK ? (size_t)(size - off) : CHUNK, got = 0;
		claim_renew(cp, 0);
		sync_due(cp);
		if (cp->claim_lost) {
			snprintf(why, n, "the claim to copy it there was lost to another host");
			st = PX_EIO;
			goto out;
		}
		atomic_store(&g.busy, 0);
		st = r.read(r.ctx, off, len, buf, &got);
		if (st != PX_OK && (atomic_load(&g.busy) || st == PX_ECANCELED ||
				    st == PX_EBUSY) && yields++ < SPARE_TRIES) {
			/* no spare slot, or a viewer took it back: wait, no attempt spent */
			if (pause_ms(cp, YIELD_MS)) {
				st = PX_ESHUTDOWN;
				goto out;
			}
			continue;
		}
		if (st != PX_OK && pause_ms(cp, 0)) {
			st = PX_ESHUTDOWN;
			goto out;
		}
		if (st != PX_OK) {
			snprintf(why, n, "reading %s at %lld: %s",
				 core->cat->assets[asset].sources[k].shown, (long long)off,
				 px_strerror(st));
			goto out;
		}
		yields = 0;
		if ((st = vf_hash_update(h, buf, len)) != PX_OK)
			goto out;
		for (size_t w = 0; fd >= 0 && w < len;) {
			ssize_t wr = write(fd, buf + w, len - w);
			if (wr < 0 && errno == EINTR)
				continue;
			if (wr <= 0) {
				snprintf(why, n, "writing the copy: %s",
					 wr < 0 ? strerror(errno) : "no progress");
				st = PX_EIO;
				goto out;
			}
			w += (size_t)wr;
		}
		off += (int64_t)len;
		if (fd >= 0)
			atomic_fetch_add(&cp->n_bytes, len);
		pthread_mutex_lock(&cp->lock);
		struct job *j = &cp->jobs[ji];
		j->done = off;
		int64_t ms = px_now_ms() - j->started_ms;
		j->speed = ms > 0 ? (double)off * 1000.0 / (double)ms : 0;
		int stop = cp->stop;
		pthread_mutex_unlock(&cp->lock);
		if (stop) {
			st = PX_ESHUTDOWN;
			goto out;
		}
	}
	st = vf_hash_final(h, sha);
out:
	if (st == PX_ENOMEM)
		snprintf(why, n, "out of memory");
	pthread_mutex_lock(&cp->lock);
	if (cp->reading == &g)
		cp->reading = NULL;
	pthread_mutex_unlock(&cp->lock);
	px_rangeread_free(rr);
	vf_hash_free(h);
	free(buf);
	return st;
}

/* ---- one copy */

/* The source to copy from: a verified one (a copy too: this host's disk
 * costs no connection), else the one that served, else any live one; one
 * that failed lately after the others. *second: the best other live
 * source that is not a copy (a copy came from the same bytes: no second
 * opinion), -1 when none. -1 when there is no source at all. */
static long pick_source(struct px_core *core, size_t asset, long *second)
{
	const struct px_asset *a = &core->cat->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	int64_t now = core->now();
	size_t n = a->nsources;
	int *rank = calloc(n + 1, sizeof(*rank));
	unsigned char *refused = calloc(n + 1, 1), *failing = calloc(n + 1, 1);
	long best = -1;
	*second = -1;
	if (!rank || !refused || !failing)
		goto out;
	pthread_mutex_lock(&core->prov_lock); /* taken alone */
	for (size_t k = 0; k < n; k++) {
		const struct prov_rt *p = &core->provs[a->sources[k].provider];
		refused[k] = p->auth_failed != 0;
		failing[k] = p->bad_since != 0;
	}
	pthread_mutex_unlock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	int served_by = atomic_load(&rt->served_by);
	for (size_t k = 0; k < n; k++) {
		rank[k] = -1;
		if (rt->dead[k] || px_source_rejected(core, asset, k) || refused[k])
			continue;
		rank[k] = 2;
		if (rt->src && rt->src[k].state == VS_VERIFIED)
			rank[k] = 4;
		else if (served_by == (int)k + 1)
			rank[k] = 3;
		if (px_source_bad(core, asset, k, now) || failing[k])
			rank[k] -= 2;
	}
	pthread_mutex_unlock(&core->vf_lock);
	for (size_t k = 0; k < n; k++)
		if (rank[k] >= 0 && (best < 0 || rank[k] > rank[best]))
			best = (long)k;
	for (size_t k = 0; k < n && best >= 0; k++)
		if (rank[k] >= 0 && (long)k != best && !a->sources[k].storage &&
		    (*second < 0 || rank[k] > rank[*second]))
			*second = (long)k;
out:
	free(rank);
	free(refused);
	free(failing);
	return best;
}

/* Checks the copy at path against the asset without a catalog sha256:
 * its samples against the reference (or the source's samples read now).
 * 0 when they agree, else why. */
static int check_samples(struct px_copies *cp, size_t asset, size_t k, const char *path,
			 char *why, size_t n)
{
	struct px_core *core = cp->core;
	struct asset_rt *rt = &core->assets[asset];
	int64_t size = rt->size;
	struct vf_fingerprint *ref = malloc(sizeof(*ref)), *mine = malloc(sizeof(*mine));
	struct px_rangeread *rr = NULL;
	int rc = -1;
	size_t bad;
	char w[200];

	if (!ref || !mine) {
		snprintf(why, n, "out of memory");
		goto out;
	}
	int have_ref = 0;
	pthread_mutex_lock(&core->vf_lock);
	if (rt->ref) {
		*ref = *rt->ref;
		have_ref = 1;
	}
	pthread_mutex_unlock(&core->vf_lock);
	if (!have_ref) {
		/* no reference yet: the source's own samples, asked again */
		struct gate g = { 0 };
		enum px_status st = PX_EBUSY;
		for (int tries = 0; tries < SPARE_TRIES && st != PX_OK; tries++) {
			px_rangeread_free(rr);
			rr = NULL;
			atomic_store(&g.busy, 0);
			if ((st = open_source(core, asset, k, &g, &rr)) != PX_OK)
				break;
			struct vf_reader r = px_rangeread_reader(rr);
			st = vf_fingerprint_take(&r, size, ref, &bad, w, sizeof(w));
			if (st == PX_OK || !(atomic_load(&g.busy) || st == PX_ECANCELED))
				break;
			if (pause_ms(cp, YIELD_MS))
				break;
		}
		if (st != PX_OK) {
			snprintf(why, n, "the source's samples could not be read: %s", w);
			goto out;
		}
	}
	px_rangeread_free(rr);
	rr = NULL;
	if (px_rangeread_new_path(path, &rr) != PX_OK) {
		snprintf(why, n, "out of memory");
		goto out;
	}
	struct vf_reader r = px_rangeread_reader(rr);
	if (vf_fingerprint_take(&r, size, mine, &bad, w, sizeof(w)) != PX_OK) {
		snprintf(why, n, "the copy's samples could not be read: %s", w);
		goto out;
	}
	struct vf_verdict v;
	vf_verdict_compare(ref, mine, &v);
	if (v.outcome != VF_MATCH) {
		snprintf(why, n, "the copy differs from the %s: %s",
			 have_ref ? "asset's reference" : "source", v.why);
		goto out;
	}
	rc = 0;
out:
	px_rangeread_free(rr);
	free(ref);
	free(mine);
	return rc;
}

/* ---- the copy's place on a storage others may write to */

/* Where a copy is made: its folder, opened once from the storage's. */
struct place {
	int dir;                     /* the copy's folder; -1: not opened */
	char base[NAME_MAX + 1];     /* the copy's file name */
	char tmp[NAME_MAX + 1];      /* the .partial made here; "": none */
	int had;                     /* a copy of ours at base, to replace */
	ino_t ino;                   /* its inode */
};

/* The SHA-256 (hex) of the regular file name in dir, read without
 * following a link: 0, or -1. The copies thread. */
static int hash_at(int dir, const char *name, int64_t size, char hex[65])
{
	unsigned char sha[VF_HASH_LEN];
	unsigned char *buf = malloc(CHUNK);
	struct vf_hash *h = NULL;
	struct stat sb;
	int rc = -1, fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
				 O_CLOEXEC);
	if (!buf || fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size != size ||
	    vf_hash_new(&h) != PX_OK)
		goto out;
	ssize_t r;
	while ((r = read(fd, buf, CHUNK)) > 0 || (r < 0 && errno == EINTR))
		if (r > 0 && vf_hash_update(h, buf, (size_t)r) != PX_OK)
			goto out;
	if (r == 0 && vf_hash_final(h, sha) == PX_OK) {
		vf_hash_hex(sha, VF_HASH_LEN, hex);
		rc = 0;
	}
out:
	if (fd >= 0)
		close(fd);
	vf_hash_free(h);
	free(buf);
	return rc;
}

/* Whether the file at the copy's place is a copy this host made: its
 * records (the manifest's, stale ones too) give its size and SHA-256. */
static int is_ours(struct px_copies *cp, size_t asset, size_t si, const struct place *pl)
{
	char want[65] = "", got[65];
	int64_t size = -1;
	pthread_mutex_lock(&cp->lock);
	long ci = find_copy(cp, asset, si);
	if (ci >= 0 && cp->c[ci].mine) {
		size = cp->c[ci].size;
		snprintf(want, sizeof(want), "%s", cp->c[ci].sha);
	}
	pthread_mutex_unlock(&cp->lock);
	return size >= 0 && hash_at(pl->dir, pl->base, size, got) == 0 && strcmp(got, want) == 0;
}

/* What is at the copy's place: nothing, or a copy of ours (PX_OK); else
 * PX_EEXIST with *wait and why set (it is left alone). */
static enum px_status place_check(struct px_copies *cp, size_t asset, size_t si,
				  struct place *pl, enum px_copy_wait *wait, char *why, size_t n)
{
	struct stat sb;
	pl->had = 0;
	if (fstatat(pl->dir, pl->base, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
		snprintf(why, n, "%s: %s", pl->base, strerror(errno));
		return errno == ENOENT ? PX_OK : PX_EIO;
	}
	if (S_ISLNK(sb.st_mode) || !S_ISREG(sb.st_mode) || !is_ours(cp, asset, si, pl)) {
		*wait = S_ISLNK(sb.st_mode) ? PX_WAIT_LINK : PX_WAIT_FOREIGN;
		snprintf(why, n, "%s is %s seamfs did not make: left alone", pl->base,
			 S_ISLNK(sb.st_mode) ? "a link" : "a file");
		return PX_EEXIST;
	}
	pl->had = 1;
	pl->ino = sb.st_ino;
	return PX_OK;
}

/*
 * Opens the folder of the asset's copy on storage si (made when missing)
 * and looks at the copy's place: PX_OK; PX_EEXIST with *wait set when
 * the storage is not the file system it was, a link or a foreign file is
 * in the way; else PX_EIO. why says which. No lock held.
 */
static enum px_status place_open(struct px_copies *cp, size_t asset, size_t si,
				 struct place *pl, enum px_copy_wait *wait, char *why, size_t n)
{
	char top[PATH_MAX], rel[PATH_MAX];
	struct stat sb;
	enum px_status st = PX_EEXIST;
	pthread_mutex_lock(&cp->lock);
	snprintf(top, sizeof(top), "%s", cp->st[si].path);
	dev_t dev = cp->st[si].dev;
	int dev_known = cp->st[si].dev_known;
	pthread_mutex_unlock(&cp->lock);
	snprintf(rel, sizeof(rel), "%s", cp->core->cat->assets[asset].path);
	char *slash = strrchr(rel, '/');
	snprintf(pl->base, sizeof(pl->base), "%s", slash ? slash + 1 : rel);
	*(slash ? slash : rel) = '\0';
	int root = px_dir_open(top);
	if (root < 0 || fstat(root, &sb) != 0) {
		snprintf(why, n, "%s: %s", top, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	if (!dev_known || sb.st_dev != dev) {
		*wait = PX_WAIT_NOT_READY;
		snprintf(why, n, "%s is not the file system seamfs first saw there", top);
		goto out;
	}
	pl->dir = rel[0] ? px_dir_walk(root, rel, 0755, 1) : fcntl(root, F_DUPFD_CLOEXEC, 0);
	if (pl->dir < 0) {
		int e = errno;
		snprintf(why, n, "%s/%s: %s", top, rel, strerror(e));
		if (e == ENOTDIR)
			*wait = PX_WAIT_FOREIGN; /* a file where a folder should be */
		else if (e == ELOOP || e == EXDEV || e == EINVAL)
			*wait = PX_WAIT_LINK;
		else
			st = PX_EIO;
		goto out;
	}
	st = place_check(cp, asset, si, pl, wait, why, n);
out:
	if (root >= 0)
		close(root);
	return st;
}

/* Moves the finished .partial (fd) to the copy's name: onto nothing, or
 * onto the copy of ours seen before; then checks that the name holds
 * what was written (not something swapped in). PX_OK; PX_EEXIST with
 * *wait when something else came in the way meanwhile; else PX_EIO. */
static enum px_status place_commit(struct place *pl, int fd, enum px_copy_wait *wait,
				   char *why, size_t n)
{
	struct stat mine, sb;
	if (fstat(fd, &mine) != 0) {
		snprintf(why, n, "fstat %s: %s", pl->tmp, strerror(errno));
		return PX_EIO;
	}
	int there = fstatat(pl->dir, pl->base, &sb, AT_SYMLINK_NOFOLLOW) == 0;
	if (there && (!pl->had || sb.st_ino != pl->ino)) {
		*wait = S_ISLNK(sb.st_mode) ? PX_WAIT_LINK : PX_WAIT_FOREIGN;
		snprintf(why, n, "%s appeared meanwhile: left alone", pl->base);
		return PX_EEXIST;
	}
	int rc = there ? renameat(pl->dir, pl->tmp, pl->dir, pl->base)
		       : renameat2(pl->dir, pl->tmp, pl->dir, pl->base, RENAME_NOREPLACE);
	if (rc && !there && errno == EINVAL) /* no RENAME_NOREPLACE there (NFS) */
		rc = renameat(pl->dir, pl->tmp, pl->dir, pl->base);
	if (rc) {
		int e = errno;
		*wait = e == EEXIST ? PX_WAIT_FOREIGN : PX_WAIT_NONE;
		snprintf(why, n, "rename to %s: %s", pl->base, strerror(e));
		return e == EEXIST ? PX_EEXIST : PX_EIO;
	}
	pl->tmp[0] = '\0';
	(void)fsync(pl->dir);
	if (fstatat(pl->dir, pl->base, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
	    sb.st_ino != mine.st_ino || sb.st_dev != mine.st_dev) {
		snprintf(why, n, "%s was replaced by another file as it was renamed", pl->base);
		return PX_EIO;
	}
	return PX_OK;
}

/* Removes the .partial made here (never another name) and closes. */
static void place_close(struct place *pl)
{
	if (pl->dir >= 0 && pl->tmp[0])
		(void)unlinkat(pl->dir, pl->tmp, 0);
	if (pl->dir >= 0)
		close(pl->dir);
	pl->dir = -1;
}

/* The copy of the asset just made on storage si, before it becomes a
 * source (registered and serving are set then): recorded as this host's (hex its SHA-256, made from the source whose key
 * is src_key, etag that source's then; sb the file it is) and the
 * storage's manifest written. Takes cp->lock. */
static void record_made(struct px_copies *cp, size_t asset, size_t si, const char *hex,
			const char *src_key, const char *etag, const struct stat *sb)
{
	struct px_core *core = cp->core;
	pthread_mutex_lock(&cp->lock);
	long ci = find_copy(cp, asset, si);
	if (ci < 0 && !grow((void **)&cp->c, &cp->capc, cp->nc, sizeof(*cp->c))) {
		ci = (long)cp->nc++;
		memset(&cp->c[ci], 0, sizeof(cp->c[ci]));
	}
	if (ci >= 0) {
		struct copy *c = &cp->c[ci];
		c->asset = asset;
		c->storage = si;
		c->registered = c->serving = 0;
		c->mine = 1;
		c->stale = 0;
		c->size = core->assets[asset].size;
		snprintf(c->sha, sizeof(c->sha), "%s", hex);
		snprintf(c->src_key, sizeof(c->src_key), "%s", src_key);
		snprintf(c->etag, sizeof(c->etag), "%s", etag);
		c->recheck = 0;
		c->ino = sb->st_ino;
		c->dev = sb->st_dev;
		c->dropped = PX_WAIT_NONE;
		manifest_save(cp, si);
	}
	pthread_mutex_unlock(&cp->lock);
}

/*
 * Makes one copy of the asset on storage si for job ji: PX_OK once it
 * serves; PX_EEXIST with *wait set when it must wait (something in its
 * way, left alone); else why (the attempt failed). No lock held.
 */
static enum px_status make_copy(struct px_copies *cp, size_t ji, size_t asset, size_t si,
				enum px_copy_wait *wait, char *why, size_t n)
{
	struct px_core *core = cp->core;
	struct place pl = { .dir = -1 };
	char path[PATH_MAX], partial[PATH_MAX + NAME_MAX + 2], sname[256], prov[300];
	const char *name;
	unsigned char sha[VF_HASH_LEN], sha2[VF_HASH_LEN];
	char hex[65];
	enum px_status st = PX_EIO;
	int fd = -1, local;

	pthread_mutex_lock(&cp->lock);
	copy_file(core, &cp->st[si], asset, path, sizeof(path));
	snprintf(sname, sizeof(sname), "%s", cp->st[si].name);
	name = cp->st[si].name; /* lives until px_copies_free */
	snprintf(prov, sizeof(prov), "%s", cp->st[si].prov);
	local = cp->st[si].host != NULL;
	const char *csha = want_sha(cp, asset);
	pthread_mutex_unlock(&cp->lock);

	long second;
	long k = pick_source(core, asset, &second);
	if (k < 0) {
		snprintf(why, n, "no live source to copy from");
		return PX_ENOSOURCE;
	}
	if ((st = place_open(cp, asset, si, &pl, wait, why, n)) != PX_OK)
		goto out;
	fd = px_create_excl(pl.dir, pl.base, "partial", 0644, pl.tmp, sizeof(pl.tmp));
	snprintf(partial, sizeof(partial), "%.*s%s", (int)(strlen(path) - strlen(pl.base)), path,
		 pl.tmp[0] ? pl.tmp : pl.base);
	if (fd < 0) {
		snprintf(why, n, "%s.partial: %s", path, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	char etag[128] = "";
	for (int tries = 0; tries < 10 && probe_etag(core, asset, (size_t)k, etag, sizeof(etag)) == 1;
	     tries++)
		if (pause_ms(cp, YIELD_MS))
			break;
	px_info("copies", "asset %s: copying from %s to storage %s (%s)",
		core->cat->assets[asset].id, core->cat->assets[asset].sources[k].shown, sname,
		partial);
	st = stream_source(cp, ji, asset, (size_t)k, fd, sha, why, n);
	if (st != PX_OK)
		goto out;
	vf_hash_hex(sha, VF_HASH_LEN, hex);
	struct stat sb;
	if (fstat(fd, &sb) != 0 || sb.st_size != core->assets[asset].size) {
		snprintf(why, n, "the copy has %lld bytes, the asset %lld", (long long)sb.st_size,
			 (long long)core->assets[asset].size);
		st = PX_ESIZE;
		goto out;
	}
	if (fsync(fd) != 0) {
		snprintf(why, n, "fsync %s: %s", partial, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	if (csha) {
		if (strcmp(csha, hex) != 0) {
			snprintf(why, n, "SHA-256 %s differs from the catalog's %s", hex, csha);
			st = PX_EMISMATCH;
			goto out;
		}
	} else {
		/* read back through our descriptor, not by a name others can change */
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		if (check_samples(cp, asset, (size_t)k, self, why, n)) {
			st = PX_EMISMATCH;
			goto out;
		}
		if (second >= 0) {
			char w[240] = "";
			pthread_mutex_lock(&cp->lock);
			cp->jobs[ji].done = 0;
			pthread_mutex_unlock(&cp->lock);
			enum px_status s2 = stream_source(cp, ji, asset, (size_t)second, -1, sha2, w,
							  sizeof(w));
			if (s2 == PX_ESHUTDOWN) {
				st = s2;
				goto out;
			}
			if (s2 == PX_OK && memcmp(sha, sha2, VF_HASH_LEN) != 0) {
				snprintf(why, n, "SHA-256 %s differs from source %s's", hex,
					 core->cat->assets[asset].sources[second].shown);
				st = PX_EMISMATCH;
				goto out;
			}
			if (s2 != PX_OK)
				px_info("copies", "asset %s: the second source could not be read "
					"whole (%s): the copy stands on its samples",
					core->cat->assets[asset].id, w);
		}
	}
	if ((st = place_commit(&pl, fd, wait, why, n)) != PX_OK)
		goto out;

	/* recorded first (not serving): is_ours knows it from now on */
	record_made(cp, asset, si, hex, core->cat->assets[asset].sources[k].key, etag, &sb);
	size_t kk;
	pthread_mutex_lock(&cp->lock);
	struct px_copy_file id = { cp->st[si].dev, sb.st_dev, sb.st_ino };
	pthread_mutex_unlock(&cp->lock);
	int bad = register_copy(cp, asset, si, path, name, prov, local, &id, &kk);
	pthread_mutex_lock(&cp->lock);
	long ci = find_copy(cp, asset, si);
	if (ci >= 0 && bad)
		cp->c[ci].stale = 1;
	if (ci >= 0 && !bad) {
		cp->c[ci].k = kk;
		cp->c[ci].registered = cp->c[ci].serving = 1;
	}
	pthread_mutex_unlock(&cp->lock);
	if (bad) {
		snprintf(why, n, "the copy could not become a source (see the log)");
		st = PX_EINVAL;
		goto out;
	}
	px_info("copies", "asset %s: copy on storage %s made and verified (%s, SHA-256 %s)",
		core->cat->assets[asset].id, sname, path, hex);
	st = PX_OK;
out:
	if (fd >= 0)
		close(fd);
	place_close(&pl);
	return st;
}

/* ---- a drained storage's viewers */

#define MOVE_MAX 256             /* sessions moved per pass; the rest next pass */

/*
 * Moves the sessions reading copies on provider prov_name to other
 * sources of their assets, as a cutover at their offset (the seam: the
 * bytes just before it, from the copy). A session with nowhere to go
 * stays. Takes prov_lock alone; no other lock held.
 */
static void move_viewers(struct px_core *core, const char *prov_name)
{
	struct px_session **list = calloc(MOVE_MAX, sizeof(*list));
	size_t n = 0;
	if (!list)
		return;
	pthread_mutex_lock(&core->prov_lock);
	long pi = -1;
	for (size_t i = 0; i < core->cat->nproviders && pi < 0; i++)
		if (strcmp(core->cat->providers[i].name, prov_name) == 0)
			pi = (long)i;
	for (struct px_session *s = core->sessions; s && pi >= 0 && n < MOVE_MAX; s = s->next) {
		if (!s->listed || s->failed || (long)s->prov != pi)
			continue;
		s->nhandles++; /* held as a handle would, until px_session_leave */
		list[n++] = s;
	}
	pthread_mutex_unlock(&core->prov_lock);
	for (size_t i = 0; i < n; i++) {
		struct px_session *s = list[i];
		size_t k = atomic_load(&s->source);
		int64_t off = atomic_load(&s->offset);
		const char *path = core->cat->assets[s->asset].sources[k].path;
		unsigned char seam[4096];
		size_t len = off < (int64_t)sizeof(seam) ? (size_t)off : sizeof(seam), got = 0;
		int fd = path ? px_source_open(core, s->asset, k) : -1;
		while (fd >= 0 && got < len) {
			ssize_t r = pread(fd, seam + got, len - got, off - (int64_t)len + (int64_t)got);
			if (r <= 0 && !(r < 0 && errno == EINTR))
				break;
			if (r > 0)
				got += (size_t)r;
		}
		if (fd >= 0)
			close(fd);
		enum px_status st = px_cutover(s, k, off, PX_EDECLINED, seam, got == len ? len : 0,
					       px_now_ms() + core->cfg->read_timeout_ms);
		if (st == PX_OK)
			px_info("copies", "%s: moved off the drained storage's copy at offset %lld",
				s->who, (long long)off);
		else
			px_warn("copies", "%s: no other source took it over (%s): it stays on the "
				"drained storage's copy", s->who, px_strerror(st));
		px_session_leave(s);
	}
	free(list);
}

/* ---- the thread */

/* A reason the job found itself (a claim, something in its way): it
 * stays until the job gets past it, whatever placement says. */
static int sticky_wait(enum px_copy_wait w)
{
	return w == PX_WAIT_OTHER_HOST || w == PX_WAIT_STORE_DOWN || w == PX_WAIT_FOREIGN ||
	       w == PX_WAIT_LINK;
}

/* Whether a catalog disk with the role on belongs to a host that is not
 * live now (none of the last sync's records). cp->lock held. */
static int dead_host_disk(const struct px_copies *cp)
{
	for (size_t i = 0; i < cp->nst; i++) {
		const struct storage *s = &cp->st[i];
		int live = 0;
		for (size_t h = 0; s->host && h < cp->npeers && !live; h++)
			live = strcmp(cp->peers[h].id, s->host) == 0;
		if (s->host && s->in_catalog && s->copying && !live)
			return 1;
	}
	return 0;
}

/*
 * Places job j (asset a): on one host only, this host's storages without
 * a host then (cluster mode) every live host's disks (cluster_places); a
 * place on another host's disk is that host's to take: the job waits
 * here with "copying on another host" and names it (j->host). PX_WAIT_NONE
 * with *pick the index in cp->st. in, own, host: room for every place.
 * cp->lock held.
 */
static enum px_copy_wait place_job(struct px_copies *cp, size_t a, struct job *j,
				   struct px_place_in *in, long *own, const char **host,
				   size_t *pick)
{
	int64_t size = cp->core->assets[a].size;
	j->host[0] = '\0';
	if (!clustered(cp)) {
		for (size_t i = 0; i < cp->nst; i++) {
			const struct storage *s = &cp->st[i];
			long ci = find_copy(cp, a, i);
			in[i].reachable = s->reachable && s->in_catalog;
			in[i].copying = s->copying && s->in_catalog;
			in[i].holds = ci < 0 ? 0 : cp->c[ci].serving && !cp->c[ci].stale ? 1 : 2;
			if (!s->in_catalog)
				in[i].holds = 0;
			in[i].free_bytes = s->free_bytes;
			in[i].min_free = s->min_free;
		}
		return px_copies_place(in, cp->nst, size, pick);
	}
	size_t n = cluster_places(cp, a, in, own, host), at = 0;
	enum px_copy_wait w = px_copies_place(in, n, size, &at);
	if (w == PX_WAIT_NO_STORAGE && dead_host_disk(cp))
		return PX_WAIT_NO_HOST;
	if (w != PX_WAIT_NONE)
		return w;
	/* Hosts read each other's figures a moment apart: two disks almost
	 * as free as each other (one file system, or both nearly empty)
	 * could each look the freer to the other's host, and neither would
	 * copy. Within a band of the freest, the first place wins: the same
	 * on every host. */
	int64_t best = in[at].free_bytes, band = best / 32 > NEAR_BYTES ? best / 32 : NEAR_BYTES;
	for (size_t i = 0; i < at; i++)
		if (in[i].reachable && in[i].copying && in[i].holds != 1 &&
		    in[i].free_bytes >= size && in[i].free_bytes - size >= in[i].min_free &&
		    in[i].free_bytes >= best - band) {
			at = i;
			break;
		}
	if (own[at] < 0) {
		snprintf(j->host, sizeof(j->host), "%s", host[at]);
		return PX_WAIT_OTHER_HOST;
	}
	*pick = (size_t)own[at];
	return PX_WAIT_NONE;
}

/* Brings storages, copies and jobs up to date; returns the job to run
 * (its storage in *si), or -1. cp->lock held. */
static long evaluate(struct px_copies *cp, size_t *si_out)
{
	struct px_core *core = cp->core;
	long run = -1;

	/* drained storages: their viewers go elsewhere */
	for (size_t i = 0; i < cp->nst; i++) {
		if (!cp->st[i].move_viewers)
			continue;
		cp->st[i].move_viewers = 0;
		char prov[300];
		snprintf(prov, sizeof(prov), "%s", cp->st[i].prov);
		pthread_mutex_unlock(&cp->lock);
		move_viewers(core, prov);
		pthread_mutex_lock(&cp->lock);
	}

	/* storages: look again, without the lock (statvfs on a hung NFS
	 * mount must not hold the status up), on copies of their fields */
	size_t nst = cp->nst;
	struct storage *look = calloc(nst + 1, sizeof(*look));
	for (size_t i = 0; look && i < nst; i++) {
		look[i].name = strdup(cp->st[i].name);
		look[i].path = cp->st[i].path ? strdup(cp->st[i].path) : NULL;
		look[i].host = cp->st[i].host ? strdup(cp->st[i].host) : NULL;
		look[i].dev = cp->st[i].dev;
		look[i].dev_known = cp->st[i].dev_known;
		look[i].in_catalog = cp->st[i].in_catalog && look[i].name && look[i].path &&
				     (!cp->st[i].host || look[i].host);
	}
	pthread_mutex_unlock(&cp->lock);
	for (size_t i = 0; look && i < nst; i++)
		if (look[i].in_catalog)
			storage_check(cp->host, &look[i]);
	pthread_mutex_lock(&cp->lock);
	for (size_t i = 0; look && i < nst; i++) {
		long si = look[i].name ? find_storage(cp, look[i].name) : -1;
		if (si >= 0 && look[i].in_catalog && cp->st[si].in_catalog &&
		    strcmp(cp->st[si].path, look[i].path) == 0) {
			struct storage *s = &cp->st[si];
			s->reachable = look[i].reachable;
			s->free_bytes = look[i].free_bytes;
			snprintf(s->why, sizeof(s->why), "%s", look[i].why);
			s->dev = look[i].dev;
			s->dev_known = look[i].dev_known;
		}
		free(look[i].name);
		free(look[i].path);
		free(look[i].host);
	}
	free(look);
	if (core->store && px_now_ms() >= cp->rescan_at) {
		/* the copies other hosts made on shared storages */
		cp->rescan_at = px_now_ms() + RESCAN_MS;
		for (size_t i = 0; i < cp->nst; i++)
			if (cp->st[i].in_catalog && cp->st[i].reachable && cp->st[i].loaded &&
			    shared(cp, &cp->st[i]))
				manifest_load(cp, i, 1);
	}
	for (size_t i = 0; i < cp->nst; i++) {
		struct storage *s = &cp->st[i];
		if (!s->in_catalog) {
			s->reachable = 0;
			snprintf(s->why, sizeof(s->why), "not in the catalog");
			continue;
		}
		if (s->reachable && !s->loaded)
			manifest_load(cp, i, 0);
	}
	drop_replaced(cp);
	/* copies whose storage went away stop serving; back when it returns */
	for (size_t i = 0; i < cp->nc; i++) {
		struct copy *c = &cp->c[i];
		if (!c->registered || c->stale)
			continue;
		const struct storage *s = &cp->st[c->storage];
		int should = s->reachable && s->in_catalog;
		if (should == c->serving)
			continue;
		c->serving = should;
		size_t asset = c->asset, k = c->k;
		char why[300];
		snprintf(why, sizeof(why), "copy on storage %s: %s", s->name,
			 s->in_catalog ? "storage not ready" : "storage removed from the catalog");
		char path[PATH_MAX], prov[300];
		copy_file(core, s, asset, path, sizeof(path));
		snprintf(prov, sizeof(prov), "%s", s->prov);
		int local = s->host != NULL;
		const char *name = s->name;
		struct px_copy_file id = { s->dev, c->dev, c->ino };
		pthread_mutex_unlock(&cp->lock);
		if (should) {
			size_t kk;
			if (register_copy(cp, asset, c->storage, path, name, prov, local, &id,
					  &kk) == 0)
				px_info("copies", "asset %s: copy %s serves again", core->cat->assets[asset].id,
					path);
		} else {
			px_sources_drop(core, asset, k, why);
			px_warn("copies", "asset %s: %s: it stops serving", core->cat->assets[asset].id,
				why);
		}
		pthread_mutex_lock(&cp->lock);
	}
	/* copies whose source may have changed (a reload, a remount): its ETag */
	for (size_t i = 0; i < cp->nc; i++) {
		struct copy *c = &cp->c[i];
		if (!c->recheck || c->stale || !c->serving || px_now_ms() < c->recheck_at)
			continue;
		size_t asset = c->asset;
		const struct px_asset *as = &core->cat->assets[asset];
		long k = -1;
		for (size_t j = 0; j < as->nsources && k < 0; j++)
			if (!as->sources[j].storage && strcmp(as->sources[j].key, c->src_key) == 0)
				k = (long)j;
		if (k < 0 || core->assets[asset].dead[k]) {
			c->recheck = 0; /* that source is gone: nothing to compare with */
			continue;
		}
		char was[128], now[128] = "";
		snprintf(was, sizeof(was), "%s", c->etag);
		size_t ck = c->k;
		pthread_mutex_unlock(&cp->lock);
		int rc = probe_etag(core, asset, (size_t)k, now, sizeof(now));
		pthread_mutex_lock(&cp->lock);
		c = &cp->c[i];
		if (rc != 0) {
			c->recheck_at = px_now_ms() + RECHECK_MS;
			continue;
		}
		c->recheck = 0;
		if (!now[0] || strcmp(now, was) == 0)
			continue;
		c->stale = 1;
		c->serving = 0;
		manifest_save(cp, c->storage);
		px_info("copies", "asset %s: source %s has a new ETag (%s, was %s): the copy on "
			"storage %s is stale and stops serving", as->id, as->sources[k].shown, now,
			was, cp->st[c->storage].name);
		pthread_mutex_unlock(&cp->lock);
		px_sources_drop(core, asset, ck, "stale copy: the asset changed");
		pthread_mutex_lock(&cp->lock);
	}
	/* jobs */
	size_t nassets = core->cat->nassets;
	size_t room = cp->nst + 1 + (clustered(cp) ? PX_HOSTS_MAX * PEER_STORAGES_MAX : 0);
	struct px_place_in *in = calloc(room, sizeof(*in));
	long *own = calloc(room, sizeof(*own));
	const char **host = calloc(room, sizeof(*host));
	if (!in || !own || !host) {
		free(in);
		free(own);
		free(host);
		return -1;
	}
	int64_t now = px_now_ms();
	for (size_t a = 0; a < nassets; a++) {
		const struct px_asset *as = &core->cat->assets[a];
		if (as->kind != PX_ASSET_PLAIN || !core->assets[a].listed)
			continue;
		int want = want_copies(cp, a), have = copies_held(cp, a);
		long ji = find_job(cp, a);
		if (have >= want) {
			if (ji >= 0 && cp->jobs[ji].state != JOB_COPYING)
				cp->jobs[ji] = cp->jobs[--cp->njobs];
			continue;
		}
		if (ji < 0) {
			if (grow((void **)&cp->jobs, &cp->capjobs, cp->njobs, sizeof(*cp->jobs)))
				continue;
			ji = (long)cp->njobs++;
			memset(&cp->jobs[ji], 0, sizeof(cp->jobs[ji]));
			cp->jobs[ji].asset = a;
			cp->jobs[ji].total = core->assets[a].size;
		}
		struct job *j = &cp->jobs[ji];
		if (j->state == JOB_COPYING)
			continue;
		size_t pick = 0;
		enum px_copy_wait w = place_job(cp, a, j, in, own, host, &pick);
		if (w == PX_WAIT_NONE && j->state == JOB_WAITING && now < j->claim_at)
			continue; /* the claim is asked again later (its reason stays) */
		if (w != j->wait && w != PX_WAIT_NONE)
			px_info("copies", "asset %s: copy waits: %s%s%s%s", as->id,
				px_copy_wait_name(w), j->host[0] ? " (host " : "", j->host,
				j->host[0] ? ", the freest disk)" : "");
		if (w != PX_WAIT_NONE || !sticky_wait(j->wait))
			j->wait = w; /* (a claim's reason stays until the claim is had) */
		if (w != PX_WAIT_NONE) {
			j->state = JOB_WAITING;
			continue;
		}
		if (j->state == JOB_BACKOFF && now < j->retry_at)
			continue;
		j->state = JOB_WAITING;
		if (run < 0) {
			run = ji;
			*si_out = pick;
		}
	}
	free(in);
	free(own);
	free(host);
	return run;
}

/* Job j found something in its way on storage si (was: its reason
 * before): it waits, reported once per reason. cp->lock held. */
static void job_in_way(struct px_copies *cp, struct job *j, size_t si, enum px_copy_wait was,
		       enum px_copy_wait w, const char *why)
{
	if (w != was) {
		if (w != PX_WAIT_NOT_READY)
			atomic_fetch_add(&cp->n_in_way, 1);
		px_warn("copies", "asset %s: copy to storage %s waits: %s (%s)",
			cp->core->cat->assets[j->asset].id, cp->st[si].name, px_copy_wait_name(w),
			why);
	}
	j->wait = w;
	j->state = JOB_WAITING;
	j->claim_at = px_now_ms() + IN_WAY_RETRY_MS;
}

/*
 * Takes the claim job ji needs before copying to storage si, in cluster
 * mode: one host copies an asset to a shared storage, and one host at a
 * time places an asset on the hosts' disks ("/" is in no storage's name).
 * 1: copy now (claim held, or none needed); 0: not now (it waits, or
 * another host made the copy meanwhile: the claim dropped). cp->lock
 * held; dropped around the store's calls.
 */
static int claim_job(struct px_copies *cp, long ji, size_t si)
{
	int across = clustered(cp) && cp->st[si].host;
	if (!shared(cp, &cp->st[si]) && !across)
		return 1;
	size_t asset = cp->jobs[ji].asset;
	char sname[256];
	snprintf(sname, sizeof(sname), "%s", across ? "/hosts" : cp->st[si].name);
	pthread_mutex_unlock(&cp->lock);
	enum px_copy_wait w = claim_take(cp, asset, sname);
	if (w == PX_WAIT_NONE && across)
		cluster_sync(cp); /* what the others made meanwhile */
	pthread_mutex_lock(&cp->lock);
	struct job *j = &cp->jobs[ji];
	if (w != PX_WAIT_NONE) {
		if (w != j->wait)
			px_info("copies", "asset %s: copy to %s%s waits: %s",
				cp->core->cat->assets[asset].id,
				across ? "this host's disk " : "storage ",
				across ? cp->st[si].name : sname, px_copy_wait_name(w));
		j->wait = w;
		j->state = JOB_WAITING;
		j->claim_at = px_now_ms() + CLAIM_RETRY_MS;
		return 0;
	}
	/* another host may have made it meanwhile: its manifest first */
	if (!across)
		manifest_load(cp, si, 1);
	long ci = find_copy(cp, asset, si);
	if ((!across && ci >= 0 && cp->c[ci].serving && !cp->c[ci].stale) ||
	    (across && copies_held(cp, asset) >= want_copies(cp, asset))) {
		pthread_mutex_unlock(&cp->lock);
		claim_drop(cp);
		pthread_mutex_lock(&cp->lock);
		return 0;
	}
	return 1;
}

static void *copies_main(void *arg)
{
	struct px_copies *cp = arg;
	pthread_mutex_lock(&cp->lock);
	while (!cp->stop) {
		size_t si = 0;
		cp->kick = 0;
		pthread_mutex_unlock(&cp->lock);
		sync_due(cp);
		pthread_mutex_lock(&cp->lock);
		long ji = evaluate(cp, &si);
		if (ji >= 0 && !claim_job(cp, ji, si))
			continue;
		if (ji >= 0) {
			struct job *j = &cp->jobs[ji];
			size_t asset = j->asset;
			enum px_copy_wait before = j->wait, in_way = PX_WAIT_NONE;
			j->wait = PX_WAIT_NONE;
			j->state = JOB_COPYING;
			j->storage = si;
			j->done = 0;
			j->speed = 0;
			j->total = cp->core->assets[asset].size;
			j->started_ms = px_now_ms();
			pthread_mutex_unlock(&cp->lock);
			char why[240] = "";
			enum px_status st = make_copy(cp, (size_t)ji, asset, si, &in_way, why,
						      sizeof(why));
			if (st == PX_OK && clustered(cp))
				cluster_sync(cp); /* the others see it before the claim goes */
			claim_drop(cp);
			pthread_mutex_lock(&cp->lock);
			j = &cp->jobs[ji];
			if (st == PX_OK) {
				atomic_fetch_add(&cp->n_made, 1);
				cp->jobs[ji] = cp->jobs[--cp->njobs];
			} else if (st == PX_ESHUTDOWN) {
				j->state = JOB_WAITING;
			} else if (in_way != PX_WAIT_NONE) {
				job_in_way(cp, j, si, before, in_way, why);
			} else {
				atomic_fetch_add(&cp->n_failed, 1);
				j->attempts++;
				int64_t back = BACKOFF_FIRST_MS;
				for (int i = 1; i < j->attempts && back < BACKOFF_MAX_MS; i++)
					back *= 2;
				if (back > BACKOFF_MAX_MS)
					back = BACKOFF_MAX_MS;
				j->retry_at = px_now_ms() + back;
				j->state = JOB_BACKOFF;
				snprintf(j->error, sizeof(j->error), "%s", why);
				px_warn("copies", "asset %s: copy to storage %s failed (attempt %d): %s; "
					"again from scratch in %lld ms", cp->core->cat->assets[asset].id,
					cp->st[si].name, j->attempts, why, (long long)back);
			}
			continue; /* another may be due at once */
		}
		if (cp->kick || cp->stop)
			continue;
		int64_t wake = px_now_ms() + 1000;
		struct timespec ts = { wake / 1000, (wake % 1000) * 1000000 };
		pthread_cond_timedwait(&cp->cond, &cp->lock, &ts);
	}
	pthread_mutex_unlock(&cp->lock);
	return NULL;
}

static void kick(struct px_copies *cp)
{
	cp->kick = 1;
	pthread_cond_broadcast(&cp->cond);
}

/* ---- the API */

enum px_status px_copies_start(struct px_core *core)
{
	struct px_copies *cp = calloc(1, sizeof(*cp));
	if (!cp)
		return PX_ENOMEM;
	cp->core = core;
	cp->cap = core->assets_cap;
	cp->want = malloc((cp->cap + 1) * sizeof(*cp->want));
	cp->sha = calloc(cp->cap + 1, sizeof(*cp->sha));
	cp->sha_set = calloc(cp->cap + 1, 1);
	if (!cp->want || !cp->sha || !cp->sha_set) {
		free(cp->want);
		free(cp->sha);
		free(cp->sha_set);
		free(cp);
		return PX_ENOMEM;
	}
	for (size_t i = 0; i <= cp->cap; i++)
		cp->want[i] = -2;
	if (core->cfg->host_id)
		snprintf(cp->host, sizeof(cp->host), "%s", core->cfg->host_id);
	else
		px_host_id_default(cp->host, sizeof(cp->host));
	pthread_mutex_init(&cp->lock, NULL);
	px_cond_init_mono(&cp->cond);
	core->copies = cp;
	pthread_mutex_lock(&cp->lock);
	merge_storages(cp, core->cat);
	pthread_mutex_unlock(&cp->lock);
	if (core->fetch == NULL && core->cat->nstorages == 0)
		return PX_OK; /* a unit test's core without storages: no thread */
	if (pthread_create(&cp->thread, NULL, copies_main, cp) == 0)
		cp->started = 1;
	else
		px_warn("copies", "could not start the copies thread: no copy will be made");
	return PX_OK;
}

void px_copies_stop(struct px_core *core)
{
	struct px_copies *cp = core->copies;
	if (!cp)
		return;
	pthread_mutex_lock(&cp->lock);
	cp->stop = 1;
	pthread_cond_broadcast(&cp->cond);
	/* a range in flight ends now, not at its timeout */
	uint64_t id = cp->reading ? atomic_load(&cp->reading->id) : 0;
	if (id)
		core->ops.cancel(core->ops.impl, id);
	pthread_mutex_unlock(&cp->lock);
	if (cp->started)
		pthread_join(cp->thread, NULL);
	cp->started = 0;
}

void px_copies_free(struct px_core *core)
{
	struct px_copies *cp = core->copies;
	if (!cp)
		return;
	px_copies_stop(core);
	core->copies = NULL;
	for (size_t i = 0; i < cp->nst; i++) {
		free(cp->st[i].name);
		free(cp->st[i].path);
		free(cp->st[i].host);
	}
	free(cp->st);
	free(cp->c);
	free(cp->jobs);
	peers_free(cp->peers, cp->npeers);
	free(cp->ps);
	free(cp->want);
	free(cp->sha);
	free(cp->sha_set);
	pthread_cond_destroy(&cp->cond);
	pthread_mutex_destroy(&cp->lock);
	free(cp);
}

void px_copies_reload(struct px_core *core, const struct px_catalog *nc)
{
	struct px_copies *cp = core->copies;
	if (!cp)
		return;
	size_t drop_asset[64], drop_k[64], ndrop = 0;
	pthread_mutex_lock(&cp->lock);
	merge_storages(cp, nc);
	for (size_t j = 0; j < nc->nassets; j++) {
		const struct px_asset *na = &nc->assets[j];
		long a = px_catalog_find(core->cat, na->id);
		if (a < 0 || (size_t)a >= cp->cap || na->kind != PX_ASSET_PLAIN)
			continue;
		cp->want[a] = na->copies;
		cp->sha[a] = na->sha256;
		cp->sha_set[a] = 1;
		for (size_t i = 0; i < cp->nc; i++) {
			struct copy *c = &cp->c[i];
			if (c->asset != (size_t)a || c->stale)
				continue;
			c->recheck = c->etag[0] != '\0';
			c->recheck_at = 0;
			/* (a new size needs a remount: the manifest's size is
			 * checked then) */
			int changed = na->sha256 && strcmp(na->sha256, c->sha) != 0;
			if (!changed)
				continue;
			/* a stale copy stops serving now; the job makes it again */
			c->stale = 1;
			if (c->registered && c->serving && ndrop < 64) {
				drop_asset[ndrop] = c->asset;
				drop_k[ndrop++] = c->k;
			}
			c->serving = 0;
			manifest_save(cp, c->storage);
			px_info("copies", "asset %s: the asset changed: its copy on storage %s is "
				"stale and stops serving", na->id, cp->st[c->storage].name);
		}
	}
	cp->rescan_at = 0; /* cluster: the other hosts' manifests read again now */
	kick(cp);
	pthread_mutex_unlock(&cp->lock);
	for (size_t i = 0; i < ndrop; i++)
		px_sources_drop(core, drop_asset[i], drop_k[i], "stale copy: the asset changed");
}

enum px_status px_copies_role(struct px_core *core, const char *storage, int copying, int drain)
{
	struct px_copies *cp = core->copies;
	char prov[300] = "";
	if (!cp)
		return PX_ENOTFOUND;
	pthread_mutex_lock(&cp->lock);
	long i = find_storage(cp, storage);
	if (i >= 0 && cp->st[i].in_catalog) {
		cp->st[i].copying = copying;
		cp->st[i].drained = drain;
		snprintf(prov, sizeof(prov), "%s", cp->st[i].prov);
		kick(cp);
	}
	pthread_mutex_unlock(&cp->lock);
	if (!prov[0])
		return PX_ENOTFOUND;
	/* the storage's provider exists once a copy is on it */
	if (px_provider_drain(core, prov, drain) != PX_OK && drain)
		px_info("copies", "storage %s: no copy serves from it yet", storage);
	if (drain) {
		/* drained first: then its viewers move (the copies thread) */
		pthread_mutex_lock(&cp->lock);
		i = find_storage(cp, storage);
		if (i >= 0)
			cp->st[i].move_viewers = 1;
		kick(cp);
		pthread_mutex_unlock(&cp->lock);
	}
	px_info("copies", "storage %s: copying role %s%s", storage, copying ? "on" : "off",
		drain ? ", drained: no new sessions on its copies" : "");
	return PX_OK;
}

int px_copies_peer_open(struct px_core *core, const char *id, int64_t *size)
{
	struct px_copies *cp = core->copies;
	long a = cp ? px_catalog_find(core->cat, id) : -1;
	long k = -1;
	if (a < 0 || !core->assets[a].listed || core->cat->assets[a].kind != PX_ASSET_PLAIN)
		return -1;
	pthread_mutex_lock(&cp->lock);
	for (size_t i = 0; i < cp->nc && k < 0; i++)
		if (cp->c[i].asset == (size_t)a && cp->c[i].registered && cp->c[i].serving &&
		    !cp->c[i].stale)
			k = (long)cp->c[i].k;
	pthread_mutex_unlock(&cp->lock);
	pthread_mutex_lock(&core->vf_lock);
	int dead = k < 0 || core->assets[a].dead[k];
	pthread_mutex_unlock(&core->vf_lock);
	if (dead)
		return -1;
	*size = core->assets[a].size;
	return px_source_open(core, (size_t)a, (size_t)k);
}

void px_copies_counters(struct px_core *core, uint64_t *made, uint64_t *failed, uint64_t *bytes)
{
	struct px_copies *cp = core->copies;
	*made = cp ? atomic_load(&cp->n_made) : 0;
	*failed = cp ? atomic_load(&cp->n_failed) : 0;
	*bytes = cp ? atomic_load(&cp->n_bytes) : 0;
}

uint64_t px_copies_in_way(struct px_core *core)
{
	return core->copies ? atomic_load(&core->copies->n_in_way) : 0;
}

static const char *job_state(const struct job *j)
{
	switch (j->state) {
	case JOB_COPYING: return "copying";
	case JOB_BACKOFF: return "retrying";
	default: return "waiting";
	}
}

/* Viewers (listed sessions) per source of every asset: counts[asset
 * offset + k]. prov_lock taken alone. */
static json_t *locations(struct px_copies *cp, size_t asset, const int *viewers)
{
	struct px_core *core = cp->core;
	const struct px_asset *a = &core->cat->assets[asset];
	json_t *arr = json_array();
	for (size_t k = 0; arr && k < a->nsources; k++) {
		const struct px_source *s = &a->sources[k];
		json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:b}",
				      "kind", s->storage ? "copy"
					      : strncmp(core->cat->providers[s->provider].name,
							"peer:", 5) == 0 && s->url ? "peer" : "source",
				      "where", s->shown,
				      "provider", core->cat->providers[s->provider].name,
				      "viewers", viewers[k],
				      "serving", !core->assets[asset].dead[k]);
		enum px_copy_wait dropped = PX_WAIT_NONE;
		if (s->storage) {
			pthread_mutex_lock(&cp->lock);
			long ci = find_source_copy(cp, asset, k);
			dropped = ci >= 0 ? cp->c[ci].dropped : PX_WAIT_NONE;
			pthread_mutex_unlock(&cp->lock);
		}
		if (o) {
			json_object_set_new(o, "storage", s->storage ? json_string(s->storage)
								      : json_null());
			/* a copy found replaced by a link or a foreign file */
			json_object_set_new(o, "dropped",
					    dropped ? json_string(px_copy_wait_name(dropped))
						    : json_null());
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

char *px_copies_status(struct px_core *core)
{
	struct px_copies *cp = core->copies;
	json_t *root = json_object();
	json_t *sts = json_array(), *jobs = json_array(), *assets = json_array();
	char *text = NULL;
	if (!root || !sts || !jobs || !assets) {
		json_decref(sts);
		json_decref(jobs);
		json_decref(assets);
		goto out;
	}
	json_object_set_new(root, "storages", sts);
	json_object_set_new(root, "jobs", jobs);
	json_object_set_new(root, "assets", assets);
	if (!cp)
		goto dump;
	/* which assets: those with copies wanted or held */
	size_t nassets = core->cat->nassets;
	unsigned char *show = calloc(nassets + 1, 1);
	int *viewers = NULL;
	size_t vcap = 0;
	pthread_mutex_lock(&cp->lock);
	json_object_set_new(root, "host", json_string(cp->host));
	json_object_set_new(root, "in_way_total",
			    json_integer((json_int_t)atomic_load(&cp->n_in_way)));
	json_object_set_new(root, "in_way_read_total",
			    json_integer((json_int_t)atomic_load(&cp->n_read_in_way)));
	for (size_t i = 0; i < cp->nst; i++) {
		const struct storage *s = &cp->st[i];
		if (!s->in_catalog)
			continue;
		int ncopies = 0;
		for (size_t c = 0; c < cp->nc; c++)
			ncopies += cp->c[c].storage == i && cp->c[c].serving && !cp->c[c].stale;
		json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:b, s:I, s:I, s:i}",
				      "name", s->name, "path", s->path,
				      "copying", s->copying, "drained", s->drained,
				      "reachable", s->reachable,
				      "free_bytes", (json_int_t)s->free_bytes,
				      "min_free_bytes", (json_int_t)s->min_free,
				      "copies", ncopies);
		if (o) {
			json_object_set_new(o, "host", s->host ? json_string(s->host) : json_null());
			json_object_set_new(o, "why", json_string(s->why));
		}
		json_array_append_new(sts, o);
	}
	for (size_t i = 0; i < cp->njobs; i++) {
		const struct job *j = &cp->jobs[i];
		if (show)
			show[j->asset] = 1;
		json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:f, s:i}",
				      "asset", core->cat->assets[j->asset].id,
				      "state", job_state(j),
				      "bytes_done", (json_int_t)(j->state == JOB_COPYING ? j->done : 0),
				      "bytes_total", (json_int_t)j->total,
				      "speed_bytes_per_s", j->state == JOB_COPYING ? j->speed : 0.0,
				      "failed_attempts", j->attempts);
		if (o) {
			json_object_set_new(o, "reason", j->state == JOB_WAITING && j->wait
					    ? json_string(px_copy_wait_name(j->wait)) : json_null());
			json_object_set_new(o, "storage", j->state == JOB_COPYING
					    ? json_string(cp->st[j->storage].name) : json_null());
			json_object_set_new(o, "last_error", j->error[0] ? json_string(j->error)
									 : json_null());
			/* cluster: the host the job is handed to */
			json_object_set_new(o, "host", j->state == JOB_WAITING && j->host[0]
					    ? json_string(j->host) : json_null());
		}
		json_array_append_new(jobs, o);
	}
	for (size_t c = 0; show && c < cp->nc; c++)
		show[cp->c[c].asset] = 1;
	for (size_t a = 0; show && a < nassets; a++)
		if (want_copies(cp, a) > 0 && core->cat->assets[a].kind == PX_ASSET_PLAIN)
			show[a] = 1;
	pthread_mutex_unlock(&cp->lock);
	for (size_t a = 0; show && a < nassets; a++) {
		if (!show[a] || !core->assets[a].listed)
			continue;
		size_t ns = core->cat->assets[a].nsources;
		if (ns + 1 > vcap) {
			free(viewers);
			vcap = ns + 1;
			viewers = calloc(vcap, sizeof(*viewers));
			if (!viewers) {
				vcap = 0;
				break;
			}
		}
		memset(viewers, 0, vcap * sizeof(*viewers));
		pthread_mutex_lock(&core->prov_lock);
		for (struct px_session *s = core->sessions; s; s = s->next)
			if (s->asset == a && s->listed && s->source < ns)
				viewers[s->source]++;
		pthread_mutex_unlock(&core->prov_lock);
		pthread_mutex_lock(&cp->lock);
		int want = want_copies(cp, a);
		pthread_mutex_unlock(&cp->lock);
		json_t *o = json_pack("{s:s, s:i}", "asset", core->cat->assets[a].id,
				      "copies_wanted", want);
		if (o)
			json_object_set_new(o, "locations", locations(cp, a, viewers));
		json_array_append_new(assets, o);
	}
	free(viewers);
	free(show);
dump:
	text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
out:
	json_decref(root);
	return text;
}
