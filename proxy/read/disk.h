/*
 * disk.h - the persistent tier of the head and tail cache (disk.c):
 * parts kept on local disk under cache_dir, so that a rescan after a
 * remount, a restart or a reboot costs no request. Internal to read/;
 * control/'s snapshot reads its counters (px_disk_stats).
 */
#ifndef SEAMFS_DISK_H
#define SEAMFS_DISK_H

#include <stdint.h>
#include "px.h"

struct px_disk;

/* What a part says of itself: checked on load against what the asset and
 * its source say now. */
struct px_disk_meta {
	int64_t size;          /* the asset's */
	int64_t asset_mtime;   /* the asset's, as the catalog or discovery says */
	int64_t start, len;    /* the slot's range in the asset */
	int64_t have;          /* bytes of it the part holds, from start */
	char source[512];      /* the source's key (no credentials) */
	char etag[128];        /* the source's ETag as it sent it, "" unknown */
	int64_t mtime;         /* its Last-Modified, -1 unknown */
};

/* Counters for the status (px_disk_stats). */
struct px_disk_stats {
	int on;                /* the tier serves and stores */
	uint64_t hits, hit_bytes, stored, stored_bytes, evictions, rejects, parts;
	int64_t bytes, max_bytes;
	char why_off[300];     /* why it turned off, "" while on */
};

/* Asks for the part (asset, which) to be stored: persist(ctx, asset,
 * which) runs on the tier's own thread, copies the part under the cache's
 * lock and calls px_disk_store. */
typedef void (*px_disk_persist_fn)(void *ctx, size_t asset, int which);

/*
 * Opens the tier in dir (made 0700 when missing), at most max_bytes of
 * parts, oldest use evicted first; scans the parts there (a torn
 * temporary file of a crash is removed) and starts the writer thread.
 * PX_OK with *out NULL when it cannot be used (logged once: reads go on
 * without it), PX_ENOMEM with *out NULL: neither fails the mount.
 * Main thread, before reads.
 */
enum px_status px_disk_open(const char *dir, int64_t max_bytes, px_disk_persist_fn persist,
			    void *ctx, struct px_disk **out);

/* Ends the writer thread (pending stores are dropped), then frees. NULL:
 * nothing. */
void px_disk_free(struct px_disk *d);

/* Queues (asset, which) for px_disk_persist_fn. Any thread, also the
 * fetch thread: no I/O, no allocation, no lock but the queue's; a full
 * queue drops the request. */
void px_disk_want(struct px_disk *d, size_t asset, int which);

/*
 * Loads the part of asset id (which: PX_CACHE_*) whose meta agrees
 * with want (size, start, len; etag and mtime where both are known) and
 * whose stored SHA-256 matches: *buf (malloc'd, the caller frees) holds
 * got->have bytes. A part that does not check is removed, counted as a
 * reject, and PX_EDECLINED returned; PX_EDECLINED too when there is none
 * or the tier is off. *source_ok is asked whether got->source may serve.
 * Any thread but the fetch thread; holding no lock of the core.
 */
enum px_status px_disk_load(struct px_disk *d, const char *id, int which,
			    const struct px_disk_meta *want,
			    int (*source_ok)(void *ctx, const struct px_disk_meta *got),
			    void *ctx, unsigned char **buf, struct px_disk_meta *got) PX_WUR;

/*
 * Stores have bytes of buf as the part of asset id (which), atomically
 * (a new file made with O_EXCL under a random name, synced, renamed in
 * place), evicting the least recently used parts to stay in max_bytes. A
 * write that fails (a full disk) turns the tier off, with one warning.
 * The tier's thread.
 */
void px_disk_store(struct px_disk *d, const char *id, int which, const struct px_disk_meta *m,
		   const unsigned char *buf);

/* Removes the part of asset id (which), when there is one: it holds
 * another version than its source serves now. The tier's thread. */
void px_disk_forget(struct px_disk *d, const char *id, int which);

/* Copies the counters (d NULL: a tier not in use, and why). Any thread. */
void px_disk_stats(struct px_disk *d, struct px_disk_stats *out);

#endif
