/*
 * core_i.h - the core's insides, shared by the core's own files (core.c,
 * probe.c, session.c, stream.c, cache.c). No other folder includes it.
 */
#ifndef SEAMFS_CORE_I_H
#define SEAMFS_CORE_I_H

#include <pthread.h>
#include <sys/uio.h>
#include <stdatomic.h>
#include <time.h>

#include "core.h"

/* A cached head or tail of an asset (cache.c). Guarded by the cache lock. */
struct cache_slot {
	int state;                 /* CACHE_EMPTY, CACHE_FILLING, CACHE_READY */
	size_t source;             /* whose bytes these are */
	unsigned char *buf;
	int64_t start, len;
	int64_t filled;            /* bytes in so far (FILLING) */
	uint64_t xid;              /* the fill transfer, 0 when none */
	uint64_t last_use;
};

struct asset_rt {
	struct cache_slot slot[2]; /* head, tail */
	int64_t size;              /* -1 until known; fixed once listed */
	int64_t mtime;
	int listed;
	_Atomic unsigned char *dead; /* per source: 404/410 or wrong size seen */
};

struct px_core {
	const struct px_config *cfg;
	const struct px_catalog *cat;
	struct px_fetch *fetch;    /* owned when we started it */
	struct px_fetch_ops ops;
	struct asset_rt *assets;
	struct px_tree *tree;
	size_t nlisted;
	struct px_transcode *tc;   /* transcoded assets; NULL when none */
	_Atomic uint64_t next_session;

	/* read-ahead windows share cfg->readahead_budget (stream.c) */
	_Atomic int64_t ra_used;
	/* heads and tails share cfg->cache_size (cache.c) */
	pthread_mutex_t cache_lock;
	pthread_cond_t cache_cond;
	int64_t cache_used;
	uint64_t cache_clock;

	/* open sessions (session.c), closed by px_core_free if FUSE did not
	 * release them before the unmount */
	pthread_mutex_t sessions_lock;
	struct px_session *sessions;

	/* counters, for the log and later the status */
	_Atomic uint64_t n_cache_hits, n_cache_fills, n_streams, n_direct, n_stream_restarts;
	_Atomic uint64_t n_stream_waits, stream_wait_us; /* reads that waited for bytes */
};

/* ---- stream.c: a session's open-ended transfer and read-ahead window */
struct px_stream;

/*
 * Starts a stream of the session's source at off, its window reserved from
 * the read-ahead budget. PX_ENOMEM when the budget has no room for even the
 * smallest window: the caller reads without one.
 */
enum px_status px_stream_start(struct px_core *core, size_t asset, size_t source,
			       int64_t off, struct px_stream **out);

/*
 * Reads [off, off+len) from the stream's window, waiting (until deadline)
 * for bytes still on their way and restarting a failed transfer at the
 * byte it stopped, up to cfg->retries times without progress.
 * PX_EAGAIN when off is behind the window (*behind set: a straggler of a
 * sequential run; read it directly, keep the stream) or too far ahead of
 * it (a jump: the caller ends this stream).
 */
enum px_status px_stream_read(struct px_stream *st, int64_t off, size_t len, void *buf,
			      int64_t deadline, const char *who, int *behind);

/*
 * Like px_stream_read(), but when iov is not NULL the bytes are not copied:
 * iov (two entries; *iovcnt set) points into the window, which keeps them
 * until px_stream_unpin(st, *pin). Falls back to copying into buf (iovcnt 0)
 * when no pin slot is free.
 */
enum px_status px_stream_read_pinned(struct px_stream *st, int64_t off, size_t len, void *buf,
				     int64_t deadline, const char *who, int *behind,
				     struct iovec *iov, int *iovcnt, int *pin);
void px_stream_unpin(struct px_stream *st, int pin);

/* Cancels the transfer and drops the session's reference; the window is
 * freed when the last reference goes. */
void px_stream_close(struct px_stream *st);

/* Extra references for a reader that uses the stream outside the session's
 * lock. */
void px_stream_ref(struct px_stream *st);
void px_stream_unref(struct px_stream *st);

/* Closes every session still open (session.c); at shutdown only. */
void px_sessions_close_all(struct px_core *core);

/* ---- cache.c: heads and tails of assets, shared by all sessions */

/*
 * Copies [off, off+len), which lies inside slot `which` (0 head, 1 tail,
 * spanning [start, start+slen)) of the asset as served by source, from the
 * cache. On a miss it starts one transfer that fills the whole slot and
 * waits (until deadline) only for the bytes asked for. PX_EAGAIN: not served
 * from the cache (another source's bytes, no room, the fill failed): read
 * directly. PX_ETIMEDOUT at the deadline.
 */
enum px_status px_cache_read(struct px_core *core, size_t asset, int which, size_t source,
			     int64_t start, int64_t slen, int64_t off, size_t len, void *buf,
			     int64_t deadline);

void px_cache_init(struct px_core *core);
void px_cache_release(struct px_core *core);


/* A condition variable that waits on CLOCK_MONOTONIC. */
void px_cond_init_mono(pthread_cond_t *c);

/* Waits on c until *flag or the monotonic deadline (ms). m is held.
 * Returns 1 when the flag is set, 0 at the deadline. */
int px_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const int *flag,
		       int64_t deadline_ms);

/* The fetch parameters for bytes [off, off+len) of a listed asset from one
 * of its HTTP sources: its URL, its provider's headers, the asset's size.
 * The strings are borrowed from the catalog. */
struct px_fetch_params px_source_range(const struct px_core *core, size_t asset,
				       size_t source, int64_t off, int64_t len);

/* Probes every asset that needs it (probe.c). */
void px_probe_assets(struct px_core *core, const unsigned char *need);

#endif
