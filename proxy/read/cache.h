/*
 * cache.h - heads, tails and indexes of assets, shared by all sessions
 * (cache.c).
 * Internal to read/.
 */
#ifndef SEAMFS_CACHE_H
#define SEAMFS_CACHE_H

#include <stdint.h>
#include "context.h"
#include "px.h"

struct px_session;

/* ---- cache.c: heads and tails of assets, shared by all sessions */

/* An asset's slots: its head, its tail, and an index that lies before the
 * tail (an MP4's moov at the end, larger than the tail: read whole after
 * the head by every probe), from where the first reader jumped to it up
 * to the tail's start. */
enum { PX_CACHE_HEAD, PX_CACHE_TAIL, PX_CACHE_INDEX, PX_CACHE_SLOTS };

struct px_read_req;

/*
 * Copies rq's bytes, which lie inside slot `which` (PX_CACHE_*) of the
 * session's asset as served by source, from the cache into rq->buf (the
 * index slot: from its start, or when it is empty from rq's offset, to
 * the tail's start; the caller decides that the read is an index's). On a
 * miss it starts one transfer that fills the slot (a head in parts) and
 * waits (until rq->deadline) only for the bytes asked for. PX_EDECLINED:
 * not served from the cache (another source's bytes, no room, the fill
 * failed): read directly. PX_ETIMEDOUT at the deadline, or when the fill
 * stalled (it is cancelled).
 * A fill holds its transfer once a waiting reader's bytes are in, so that
 * the reader gets a CPU before the rest comes. The reader that takes them
 * lets it go on at once; or, when held is not NULL and the fill is held,
 * *held is set to the fill's id and the fill waits until the caller, its
 * reply out, calls px_cache_let_go(). *how gains PX_CACHE_DISK when the
 * bytes are a part an earlier mount kept on disk (not the source's live
 * answer), PX_CACHE_FILLED when the read started a fill or waited on one
 * (the origin was asked for its bytes: a scan it was part of did not come
 * from the cache alone).
 */
#define PX_CACHE_DISK 1
#define PX_CACHE_FILLED 2
enum px_status px_cache_read(struct px_session *sess, int which, size_t source,
			     const struct px_read_req *rq, uint64_t *held, int *how);

/* Opens the persistent tier (disk.c) in cache_dir when cache_max_bytes
 * allows: after discovery, before reads. px_cache_disk_stop ends it, once
 * the fetcher has stopped (no fill ends any more) and before
 * px_cache_release. Main thread. */
void px_cache_disk_start(struct px_core *core);
void px_cache_disk_stop(struct px_core *core);

void px_cache_let_go(struct px_core *core, size_t asset, int which, uint64_t fill);
void px_cache_release(struct px_core *core);

/* Cancels the fills that session's reads started and no reader waits on
 * (a tail fill that stalls after its reader left), so that their slots
 * free for that session's next read. Returns how many. */
int px_cache_yield(struct px_core *core, uint64_t session);

/* The end a reader of slot `which` (0 head, 1 tail) of the asset waits
 * for, INT64_MAX when none waits, -1 when the asset has no slots yet. */
int64_t px_cache_wake_at(struct px_core *core, size_t asset, int which);

/* Whether slot `which` (0 head, 1 tail) of the asset holds [off, off+len)
 * of source's bytes now, with no fill to wait for. Takes the cache lock. */
int px_cache_holds(struct px_core *core, size_t asset, int which, size_t source, int64_t off,
		   int64_t len);

/* Where the asset's tail slot starts when it holds, or its running fill
 * brings, source's bytes (a stream that reaches it may end there); -1
 * otherwise. Takes the cache lock. */
int64_t px_cache_tail_start(struct px_core *core, size_t asset, size_t source);

/* Whether slot which (PX_CACHE_*) of the asset holds, or its running fill
 * brings, source's bytes, or may yet: it is empty, and the disk tier has
 * not been looked at for it (an earlier mount may have kept it). Takes
 * the cache lock. */
int px_cache_may_serve(struct px_core *core, size_t asset, int which, size_t source);

/* Where the asset's index slot starts when it holds, or its running fill
 * brings, source's bytes; -1 otherwise. Takes the cache lock. */
int64_t px_cache_index_start(struct px_core *core, size_t asset, size_t source);

#endif
