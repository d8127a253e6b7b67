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
#include "histo.h"

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

/* A provider at run time (provider.c). Guarded by core->prov_lock. */
struct xrec;
struct slot_wait;
struct prov_rt {
	int max;                   /* max_connections, 0: no limit */
	int held;                  /* slots taken: transfers, plus one reserved
				    * by each session that has none open */
	int xfers;                 /* transfers open now */
	int bg;                    /* background transfers among them */
	int sessions;              /* sessions whose source is here */
	int drained;               /* no new sessions */
	int has_http;              /* serves at least one listed HTTP source */
	int64_t bad_since;         /* first bad answer since the last good one, 0: none */
	int64_t last_good, last_bad, last_probe;
	int probing;               /* an active probe is in flight */
	long probe_asset;          /* what the active probe asks for, -1: nothing */
	size_t probe_source;
	char why[200];             /* the last bad answer, in words */
	uint64_t n_ok, n_bad, n_waits, n_busy, n_preempted, n_evicted, n_probes;
	struct xrec *bgs;          /* background transfers, for preemption */
	struct slot_wait *waitq;   /* waiting for a slot, oldest first */
};

/*
 * A session: one client's playback of one asset (provider.c admits, joins
 * and expires them; session.c reads through them). It fixes the source;
 * each open file handle of it reads through its own transfers.
 * Lock order: session lock, then stream locks; prov_lock is taken alone.
 */
struct px_handle;
struct px_session {
	struct px_core *core;
	struct px_session *prev, *next; /* core->sessions, under prov_lock */
	size_t asset, source, prov;
	uint64_t id, client;
	int fd;                    /* a path source, opened once */
	char who[96];              /* "session N asset ID", for logs */
	int64_t created;           /* core clock, ms */

	/* under prov_lock */
	int nhandles;              /* open handles */
	int xfers;                 /* open transfers */
	int reserved;              /* holds a slot of its provider for reopens */
	int listed;                /* in core->sessions: may be joined */
	int failed;                /* a read failed for good: no more joins */
	int64_t closed_at;         /* when nhandles last fell to 0 */

	pthread_mutex_t lock;      /* guards handles */
	struct px_handle *handles;
	_Atomic int64_t offset;    /* where the last read ended */
	_Atomic int64_t served;    /* bytes served */
};

struct px_core {
	const struct px_config *cfg;
	const struct px_catalog *cat;
	struct px_fetch *fetch;    /* owned when we started it */
	struct px_fetch_ops ops;
	struct asset_rt *assets;
	struct px_tree *tree;
	size_t nlisted;
	_Atomic uint64_t next_session;

	/* read-ahead windows share cfg->readahead_budget (stream.c) */
	_Atomic int64_t ra_used;
	/* heads and tails share cfg->cache_size (cache.c) */
	pthread_mutex_t cache_lock;
	pthread_cond_t cache_cond;
	int64_t cache_used;
	uint64_t cache_clock;

	/* providers and sessions (provider.c); prov_cond (monotonic) wakes
	 * those waiting for a slot and the monitor thread */
	pthread_mutex_t prov_lock;
	pthread_cond_t prov_cond;
	struct prov_rt *provs;
	struct px_session *sessions;
	size_t nsessions;
	int stopping;
	int64_t (*now)(void);      /* the clock TTLs and liveness go by */
	pthread_t monitor;
	int monitor_started;
	char admit_why[300];       /* the last open that could not be admitted */
	int64_t admit_when;
	uint64_t n_admit_busy;

	/* open handles (session.c), closed by px_core_free if FUSE did not
	 * release them before the unmount */
	pthread_mutex_t handles_lock;
	struct px_handle *handles;

	/* counters, for the log and later the status */
	_Atomic uint64_t n_cache_hits, n_cache_fills, n_streams, n_direct, n_stream_restarts;
	_Atomic uint64_t n_stream_waits, stream_wait_us; /* reads that waited for bytes */

	/* durations for the metrics (lock-free): reads as fs/ answers them,
	 * and each transfer's submit to its first byte (provider.c) */
	struct px_histo h_read, h_ttfb;
};

/* ---- stream.c: a session's open-ended transfer and read-ahead window */
struct px_stream;

/*
 * Starts a stream of the session's source at off, its window reserved from
 * the read-ahead budget, its transfers in the session's provider slots
 * (waiting until deadline for one). PX_ENOMEM when the budget has no room for even the
 * smallest window: the caller reads without one.
 */
enum px_status px_stream_start(struct px_core *core, struct px_session *sess, size_t asset,
			       size_t source, int64_t off, int64_t deadline,
			       struct px_stream **out);

/* Whether the stream's transfer is paused with no reader waiting on it: a
 * slot its session may take back. */
int px_stream_idle(struct px_stream *st);

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

/* Closes every handle still open (session.c); at shutdown only. */
void px_handles_close_all(struct px_core *core);

/* ---- provider.c: slots, sessions, liveness */

void px_providers_init(struct px_core *core);
void px_providers_release(struct px_core *core);

/* Picks each provider's liveness probe and, when thread is set, starts the
 * monitor thread (TTL expiry, liveness probes). After discovery. */
void px_providers_start(struct px_core *core, int thread);

/* Frees the sessions left after every handle closed and every transfer
 * ended; at px_core_free only. */
void px_sessions_free_all(struct px_core *core);

/*
 * Submits a transfer of provider prov, holding one of its slots until the
 * transfer's on_done has returned. sess: the session it serves (its
 * reserved slot is used first), or NULL with bg set for background work,
 * which yields its slot to playback (cancelled: PX_ECANCELED). At the
 * limit, waits until deadline (ms), then PX_EBUSY. Never from the fetch
 * thread. Otherwise as ops.submit.
 */
enum px_status px_xfer_submit(struct px_core *core, size_t prov, struct px_session *sess,
			      int bg, int64_t deadline, const struct px_fetch_params *p,
			      const struct px_fetch_cb *cb, uint64_t *id);

/*
 * Admits an open of an asset by client: joins the client's session of the
 * asset when it has one, else makes one on the chosen source (fewest
 * sessions, first by name). Waits until deadline when every provider is at
 * its limit: PX_EBUSY. PX_ENOSOURCE when no source can serve. The session
 * counts one more handle until px_session_leave().
 */
enum px_status px_session_enter(struct px_core *core, size_t asset, uint64_t client,
				int64_t deadline, struct px_session **out);
void px_session_leave(struct px_session *s);

/* A read of the session failed for good: reopens get a new session. */
void px_session_failed(struct px_session *s);

/* Closes idle streams of the session's handles so a slot frees (session.c). */
int px_session_yield_idle(struct px_session *s);

/* Expires sessions and runs liveness probes due at the core's clock;
 * returns when it next has work (core clock, ms). The monitor thread calls
 * it; unit tests call it with a fake clock. */
int64_t px_providers_tick(struct px_core *core);

/* ---- cache.c: heads and tails of assets, shared by all sessions */

/*
 * Copies [off, off+len), which lies inside slot `which` (0 head, 1 tail,
 * spanning [start, start+slen)) of the asset as served by source, from the
 * cache. On a miss it starts one transfer that fills the whole slot and
 * waits (until deadline) only for the bytes asked for. PX_EAGAIN: not served
 * from the cache (another source's bytes, no room, the fill failed): read
 * directly. PX_ETIMEDOUT at the deadline.
 */
enum px_status px_cache_read(struct px_core *core, struct px_session *sess, size_t asset,
			     int which, size_t source,
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
