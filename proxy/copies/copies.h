/*
 * copies.h - verified copies of assets on the catalog's storages
 * (proxy/copies/, its layout in copies.c; docs/copies.md): placement, the
 * copy jobs, the copies' registration as path sources, the storages'
 * copying role.
 */
#ifndef SEAMFS_COPIES_H
#define SEAMFS_COPIES_H

#include <stddef.h>
#include <stdint.h>
#include "context.h"
#include "px.h"

struct px_catalog;

/* ---- placement: a pure function, unit-tested without a core */

/* Why a copy job waits; PX_WAIT_NONE: it has a storage. */
enum px_copy_wait {
	PX_WAIT_NONE,
	PX_WAIT_NO_STORAGE,   /* no storage with the role lacks the asset */
	PX_WAIT_NO_ROOM,      /* storages would take it, but none has the room */
	PX_WAIT_NOT_READY,    /* the storage of an existing copy (or every one with
			       * the role) is unreachable */
	PX_WAIT_COPYING_OFF,  /* the storage holding the copy has the role off */
	PX_WAIT_OTHER_HOST,   /* cluster mode: another host holds the claim to copy
			       * the asset to that shared storage */
	PX_WAIT_STORE_DOWN,   /* cluster mode: the store did not answer the claim */
	PX_WAIT_FOREIGN,      /* a file seamfs did not make is at the copy's place
			       * (or where its folder should be): never replaced */
	PX_WAIT_LINK,         /* a link (or a mount point) is on the copy's way:
			       * never followed */
	PX_WAIT_NO_HOST,      /* cluster mode: only disks of hosts that are not
			       * live (in the registry) could take it */
};

/* What placement knows of one storage for one asset. */
struct px_place_in {
	int reachable;        /* mounted, writable, this host may use it */
	int copying;          /* the copying role */
	int holds;            /* 0: no copy of the asset; 1: a copy that serves;
			       * 2: a copy that does not serve (stale, or its
			       * storage not ready) */
	int64_t free_bytes;   /* free for us now (statvfs) */
	int64_t min_free;     /* min_free_bytes */
};

/*
 * Picks the storage for one more copy of an asset of `size` bytes among
 * s[0..n): reachable, the role on, no serving copy of the asset there,
 * free_bytes >= min_free + size; of those the freest (the first on a tie).
 * PX_WAIT_NONE with *pick set, else why it must wait (place.c's design
 * block gives the order of the reasons). Pure; any thread.
 */
enum px_copy_wait px_copies_place(const struct px_place_in *s, size_t n, int64_t size,
				  size_t *pick);

/* "no storage", "no room", "storage not ready", "copying off", "foreign
 * file in the way", "link in the way", "no live host"...; "" for none. */
const char *px_copy_wait_name(enum px_copy_wait w);

/* ---- the copies of a core */

/* The path of an asset's copy on a host's peer endpoint (peer.h):
 * PX_PEER_PATH and the asset's id, percent-encoded. */
#define PX_PEER_PATH "/v1/copies/"

/*
 * For the peer endpoint: a descriptor of this host's serving, verified
 * copy of the asset whose id is id, opened beneath its storage as a
 * viewer's session opens it (px_source_open: never through a link, only
 * the file made or found), its size into *size; -1 when this host holds
 * none (or it was found replaced). Any thread that holds none of the
 * core's locks.
 */
int px_copies_peer_open(struct px_core *core, const char *id, int64_t *size);

/*
 * Starts the copies of a discovered core: reads the storages' manifests,
 * registers the copies they list that still match their asset, and starts
 * the copies thread (placement every second, one copy at a time). A
 * catalog without storages costs a thread that only waits. Call once,
 * after px_core_discover(). PX_ENOMEM.
 */
enum px_status px_copies_start(struct px_core *core) PX_WUR;

/* Stops the thread (a running copy ends, its .partial removed): before
 * the fetcher stops. Idempotent; NULL core->copies: no-op. */
void px_copies_stop(struct px_core *core);

/* Stops (as above) and frees, once nothing reads the sources any more
 * (copies' sources borrow their storage's name). */
void px_copies_free(struct px_core *core);

/*
 * After a reload merged nc (kept by the core): storages added, changed
 * or removed (a removed storage's copies stop serving; no file is
 * deleted), each asset's copies and sha256 taken from nc, copies of an
 * asset whose sha256 changed stop serving and are made again, and every
 * copy's source is asked its ETag again (another: the same).
 * The reloading thread.
 */
void px_copies_reload(struct px_core *core, const struct px_catalog *nc);

/*
 * The storage's copying role: copying 0 (disable) or 1 (enable); drain
 * also turns the role off, drains its copies' provider (no new session
 * goes there) and has the copies thread move the sessions reading them
 * to other sources (a cutover at their offset). A running job ends as it
 * would. PX_ENOTFOUND when no storage has the name. Any thread that holds
 * none of the core's locks.
 */
enum px_status px_copies_role(struct px_core *core, const char *storage, int copying,
			      int drain) PX_WUR;

/* Counters for the metrics: copies made, attempts failed, bytes copied. */
void px_copies_counters(struct px_core *core, uint64_t *made, uint64_t *failed,
			uint64_t *bytes);

/* For the metrics: how many times a link or a foreign file was found in
 * a copy's way: by a copy job (counted when it starts waiting for it) or
 * by a read of a serving copy (px_source_open). Any thread. */
uint64_t px_copies_in_way(struct px_core *core);

/*
 * The copies' status as JSON text (malloc'd, NUL-terminated; NULL when
 * out of memory): {"storages": [...], "jobs": [...], "assets": [...]}
 * (docs/status-and-metrics.md). Any thread that holds none of the core's locks.
 */
char *px_copies_status(struct px_core *core);

#endif
