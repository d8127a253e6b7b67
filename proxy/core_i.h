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
	int state;                 /* CACHE_EMPTY, CACHE_FILLING, CACHE_PARTIAL,
				    * CACHE_READY */
	size_t source;             /* whose bytes these are */
	unsigned char *buf;        /* room for asked bytes */
	int64_t start, len;
	int64_t asked;             /* bytes asked for so far (a head is filled in
				    * growing parts, as its readers need them) */
	int64_t filled;            /* bytes in so far (FILLING, PARTIAL) */
	uint64_t xid;              /* the fill transfer, 0 when none */
	uint64_t last_use;
	int64_t wake_at;           /* the nearest end a reader waits for, or
				    * INT64_MAX (FILLING) */
	int held;                  /* a reader's bytes are in: the fill waits
				    * until it has taken them */
	int paused;                /* the fill's transfer is paused (held) */
	int64_t last_byte;         /* when the fill last brought bytes (ms) */
};

/* A source's verification state (standby.c), under core->vf_lock. */
enum { VS_UNKNOWN, VS_VERIFYING, VS_VERIFIED, VS_REJECTED, VS_ABANDONED };
struct src_rt {
	int state;                 /* VS_* */
	int inconclusive;          /* inconclusive checks in a row */
	int64_t checked;           /* core clock of the last check */
	char *why;                 /* the last verdict, in words; NULL: none
				    * (px_src_why; under vf_lock once threads run) */
	/* the source's own recent failures (px_source_failed), read without
	 * the lock: until bad_until (core clock) a failed source goes last in
	 * every choice, and new sessions avoid it while another can serve */
	_Atomic int64_t bad_until;
	_Atomic int nbad;          /* failures in a row, for the backoff */
	int64_t abandoned_at;      /* VS_ABANDONED since (core clock) */
	_Atomic int screened;      /* served bytes matched a reference sample */
	int abandons;              /* times abandoned, for the retry backoff */
};

/* One cutover, for the status. */
struct cutover_rec {
	uint64_t session;
	size_t asset, from, to;
	int64_t offset, ms, when;
	enum px_status reason;
};

struct vf_fingerprint;
struct vf_store;
struct vf_pool;

struct asset_rt {
	struct cache_slot *slot;   /* head, tail: two, made at the asset's first
				    * cached read (cache.c, under cache_lock) */
	size_t source_cap;         /* room in the core's sources array */
	/* standby.c, under core->vf_lock */
	struct src_rt *src;        /* per source; NULL until the asset's first
				    * session or a source's first verdict
				    * (px_src_ensure): a library of 100 000
				    * files that are never opened costs none */
	struct vf_fingerprint *ref; /* the reference fingerprint, NULL until known */
	char ref_id[17];
	int ref_busy;              /* being taken */
	_Atomic int ref_known;     /* ref is set: read without the lock */
	int64_t ref_retry_at;      /* core clock: no new attempt before */
	int ref_fails;             /* attempts in a row that found no agreement */
	int ref_unconfirmed;       /* ref is the served source's alone: kept in
				    * memory, no verdict against it is stored */
	_Atomic int served;        /* some session has served bytes */
	_Atomic int served_by;     /* who: 0 none yet, k+1 source k alone, -1 several */
	int64_t served_at;
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
	int64_t bad_since;         /* first bad answer since the last good one, 0: none */
	int64_t last_good, last_bad, last_probe;
	int probing;               /* an active probe is in flight */
	int auth_failed;           /* 401/403: its credentials are refused */
	char auth_why[200];
	long probe_asset;          /* what the active probe asks for, -1: nothing */
	size_t probe_source;
	char why[200];             /* the last bad answer, in words */
	uint64_t n_ok, n_bad, n_waits, n_busy, n_preempted, n_evicted, n_probes, n_auth;
	struct xrec *bgs;          /* background transfers, for preemption */
	struct slot_wait *waitq;   /* waiting for a slot, oldest first */
	/* the host:port of its first URL source, and whether its connections
	 * may go to another host (a URL elsewhere, or a redirect seen): a
	 * provider with a connection limit reuses idle connections only while
	 * they all go to one host (curl keeps idle connections per host, and
	 * reuses one before it opens another, so its sockets stay within the
	 * limit) */
	char host[300];
	_Atomic int multi_host;
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
	size_t asset;
	_Atomic size_t source;     /* changed only by a cutover, under prov_lock */
	size_t prov;               /* the source's provider; under prov_lock */
	uint64_t id, client;
	/* path sources' descriptors by source index, -1 until first used
	 * (px_session_fd); kept until the session ends, since a reader may be
	 * in pread on one while a cutover moves the session; under fd_lock */
	int *fds;
	size_t nfds;
	pthread_mutex_t fd_lock;
	char who[96];              /* "session N asset ID", for logs */
	int64_t created;           /* core clock, ms */

	/* under prov_lock */
	int nhandles;              /* open handles */
	int xfers;                 /* open transfers on its provider */
	int xfers_moved;           /* open transfers on providers it left */
	unsigned gen;              /* counts cutovers: transfers of an older
				    * generation count on the provider they
				    * were made to */
	int exhausted;             /* a read failed with nothing to cut over to */
	int reserved;              /* holds a slot of its provider for reopens */
	int listed;                /* in core->sessions: may be joined */
	int failed;                /* a read failed for good: no more joins */
	int64_t closed_at;         /* when nhandles last fell to 0 */

	pthread_mutex_t lock;      /* guards handles */
	pthread_mutex_t cut_lock;  /* one cutover of the session at a time */
	struct px_handle *handles;
	_Atomic int64_t offset;    /* where the last read ended */
	_Atomic int64_t served;    /* bytes served */
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
	const char *catalog_path;  /* borrowed from main; NULL: no reload */
	char reload_msg[1024];     /* the last reload's outcome, in words */
	int reload_ok;
	int64_t reload_when;
	uint64_t n_reloads;
	void (*on_reload)(void *ctx, const struct px_tree *old, const struct px_tree *now);
	void *on_reload_ctx;
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

	/* providers and sessions (provider.c); prov_cond (monotonic) wakes
	 * those waiting for a slot and the monitor thread */
	pthread_mutex_t prov_lock;
	pthread_cond_t prov_cond;
	struct prov_rt *provs;
	struct px_session *sessions;
	int stopping;
	int64_t (*now)(void);      /* the clock TTLs and liveness go by */
	pthread_t monitor;
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
	_Atomic int64_t kernel_ra;  /* px_core_set_kernel_readahead(), 0: unknown */
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
			       int64_t off, int64_t deadline, struct px_stream **out);

/* Whether the stream's transfer is paused with no reader waiting on it: a
 * slot its session may take back. */
int px_stream_idle(struct px_stream *st);
/* Whether the stream is over (closed, or ended by a cutover to a path). */
int px_stream_closed(struct px_stream *st);

/*
 * Reads [off, off+len) from the stream's window, waiting (until deadline)
 * for bytes still on their way and restarting a failed transfer at the
 * byte it stopped, up to cfg->retries times without progress.
 * PX_EAGAIN when off is behind the window (*behind set: a straggler of a
 * sequential run; read it directly, keep the stream) or too far ahead of
 * it (a jump: the caller ends this stream). A read waiting on a stream
 * that another thread closes gets PX_EAGAIN with *behind set too: it reads
 * directly, never fails for it.
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

/*
 * Moves the session to another source of its asset (a cutover): its
 * reservation moves to that source's provider, which must have room
 * (PX_EBUSY otherwise: nothing changes); transfers still open on the old
 * provider stay counted there until they end. Any thread but the fetch
 * thread.
 */
enum px_status px_session_switch(struct px_session *s, size_t source) PX_WUR;

/* The session's descriptor of path source `source`, opened (and its size
 * checked) on first use; -1 when it cannot be used (then logged, and dead
 * for the asset when missing or of another size). */
int px_session_fd(struct px_session *s, size_t source);

/* Notes that provider prov has a source at url (NULL: a path): see
 * prov_rt.host. prov_lock held, or no other thread yet. */
void px_provider_note_source(struct px_core *core, size_t prov, const char *url);

/* Whether source `source` of asset `asset` is a path (read with pread), not
 * a URL (read through transfers). */
int px_source_is_path(const struct px_core *core, size_t asset, size_t source);

/* A read of the session failed for good: reopens get a new session. */
void px_session_failed(struct px_session *s);

/* Closes idle streams of the session's handles so a slot frees (session.c). */
int px_session_yield_idle(struct px_session *s);

/* Expires sessions and runs liveness probes due at the core's clock;
 * returns when it next has work (core clock, ms). The monitor thread calls
 * it; unit tests call it with a fake clock. */
int64_t px_providers_tick(struct px_core *core);

/* ---- sources.c: the core's copy of the catalog, sources added at run time */

/* Makes core->cat a copy of cat's arrays with room to spare. */
enum px_status px_core_own_catalog(struct px_core *core, const struct px_catalog *cat);
void px_core_release_catalog(struct px_core *core);

/*
 * Whether a path source may be used: a regular file (a FIFO, a device, a
 * socket or a directory never: opening one could block a reader for
 * good), and, when untrusted (from a playlist or added at run time), one
 * that lies in a folder of strm_paths once symlinks are resolved. why says
 * what is wrong, never quoting the file. Any thread.
 */
int px_core_path_allowed(const struct px_core *core, const char *path, int untrusted,
			 char *why, size_t whylen);

/* Marks the asset's path sources that px_core_path_allowed() refuses dead,
 * with the reason in the status and the log. */
void px_core_screen_paths(struct px_core *core, size_t asset, int untrusted);

/* ---- standby.c: verification states, prevalidation, cutover */

enum px_status px_standby_init(struct px_core *core);  /* with px_core_new */
enum px_status px_standby_start(struct px_core *core); /* after discovery */
void px_standby_stop(struct px_core *core);            /* ends the workers */
void px_standby_release(struct px_core *core);

/* Bytes of the asset came from source: the first time, its reference
 * fingerprint is taken in the background. Any thread. */
void px_standby_served(struct px_core *core, size_t asset, size_t source);

/* Starts prevalidation of the standbys of assets that have played for
 * standby_delay. The monitor thread, or a unit test. */
void px_standby_tick(struct px_core *core);

/*
 * The session's source `failed` failed under a read at off (why: the
 * trigger). Takes the next standby that proves identical (verified and the
 * seam check on seam[0..n), the bytes the old source gave just before off;
 * or verified now, before deadline) and moves the session to it: PX_OK.
 * PX_OK at once when another reader of the session already cut over.
 * PX_ENOSOURCE when none can take over. Never holds a lock across I/O.
 */
enum px_status px_cutover(struct px_session *s, size_t failed, int64_t off, enum px_status why,
			  const void *seam, size_t n, int64_t deadline);

/* A read of s failed with nothing left to cut over to: counted, logged
 * and shown as fallback_exhausted. */
void px_standby_exhausted(struct px_session *s, int64_t off, enum px_status why);

/*
 * Source k of the asset failed on its own account (why, detail: a stall,
 * a reset, an answer that is not the asset): until a backoff passes (5 s,
 * doubling with each failure in a row, at most 2 min) it goes last among
 * cutover candidates and new sessions avoid it while another source can
 * serve. Any thread; takes no lock.
 */
void px_source_failed(struct px_core *core, size_t asset, size_t k, enum px_status why,
		      const char *detail);
/* Source k served bytes: its failures are forgotten. */
void px_source_good(struct px_core *core, size_t asset, size_t k);
/* Whether source k failed within its backoff, at core clock now. */
int px_source_bad(const struct px_core *core, size_t asset, size_t k, int64_t now);

/*
 * The bytes [off, ...) in iov that source k of the asset is about to give
 * a reader, compared with the reference fingerprint's samples they cover
 * wholly, until one matched (or the source is verified): PX_EMISMATCH, and
 * the source rejected for the asset, when one differs: a wrong file of the
 * right length never reaches the reader. PX_OK otherwise, also when there
 * is no reference or no sample to compare. Any thread but the fetch thread.
 */
enum px_status px_standby_screen(struct px_core *core, size_t asset, size_t k, int64_t off,
				 const struct iovec *iov, int iovcnt);

/* The asset's per-source states, made on first need (published
 * atomically: readers that find NULL take every source as unverified and
 * never failed). NULL only when out of memory. Any thread. */
struct src_rt *px_src_ensure(struct px_core *core, size_t asset);

/* Sets a source's reason in words (copied; NULL or "" clears it). vf_lock
 * held, or no other thread yet. */
void px_src_why(struct src_rt *sr, const char *why);

/* A source's reason in words, "" when none. */
static inline const char *px_src_why_of(const struct src_rt *sr)
{
	return sr->why ? sr->why : "";
}

const char *px_standby_state_name(int state);
const char *px_cutover_reason_name(enum px_status st);

/* Marks provider prov's credentials refused (HTTP 401/403): no new
 * sessions or cutovers go there; reported as an authentication error. */
void px_provider_auth_failed(struct px_core *core, size_t prov, const char *why);

/* ---- cache.c: heads and tails of assets, shared by all sessions */

/*
 * Copies [off, off+len), which lies inside slot `which` (0 head, 1 tail,
 * spanning [start, start+slen)) of the asset as served by source, from the
 * cache. On a miss it starts one transfer that fills the whole slot and
 * waits (until deadline) only for the bytes asked for. PX_EAGAIN: not served
 * from the cache (another source's bytes, no room, the fill failed): read
 * directly. PX_ETIMEDOUT at the deadline.
 * A fill holds its transfer once a waiting reader's bytes are in, so that
 * the reader gets a CPU before the rest comes. The reader that takes them
 * lets it go on at once; or, when held is not NULL and the fill is held,
 * *held is set to the fill's id and the fill waits until the caller, its
 * reply out, calls px_cache_let_go().
 */
enum px_status px_cache_read(struct px_core *core, struct px_session *sess, size_t asset,
			     int which, size_t source,
			     int64_t start, int64_t slen, int64_t off, size_t len, void *buf,
			     int64_t deadline, uint64_t *held);

void px_cache_let_go(struct px_core *core, size_t asset, int which, uint64_t fill);
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
