/*
 * provider.h - providers' connection slots, sessions (admission, joins,
 * expiry), liveness (provider.c).
 */
#ifndef SEAMFS_PROVIDER_H
#define SEAMFS_PROVIDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "context.h"
#include "fetch.h"
#include "px.h"

/* A provider at run time (provider.c). Guarded by prov_lock (px_prov_lock). */
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
	uint64_t submits;          /* transfers submitted so far */
	uint64_t bad_mark;         /* submits when it went bad: only a transfer
				    * submitted after it brings it back
				    * (note_outcome) */
	int64_t last_good, last_bad, last_probe;
	int probing;               /* an active probe is in flight */
	int auth_failed;           /* 401/403: its credentials are refused */
	char auth_why[200];
	long probe_asset;          /* what the active probe asks for, -1: nothing */
	size_t probe_source;
	char why[200];             /* the last bad answer, in words */
	uint64_t n_ok, n_bad, n_waits, n_busy, n_preempted, n_evicted, n_probes, n_auth;
	struct xrec *xs;           /* its transfers, for preemption */
	struct slot_wait *waitq;   /* waiting for a slot, oldest first */
	/* the host:port of its first URL source, and whether its connections
	 * may go to another host (a URL elsewhere, or a redirect seen): a
	 * provider with a connection limit reuses idle connections only while
	 * they all go to one host (curl keeps idle connections per host, and
	 * reuses one before it opens another, so its sockets stay within the
	 * limit) */
	char host[300];
	_Atomic int multi_host;
	/* it answered a request for two ranges with anything but their two
	 * parts (cache.c): heads and tails are asked for apart */
	_Atomic int no_multipart;

	/* cluster mode (store=): max is the cluster's limit, and this host may
	 * use only the slots it holds of it (cslots.c) */
	int cl;                    /* cluster mode */
	int granted;               /* slots this host holds of max */
	int others_slots;          /* the other hosts' holdings, at the last call */
	int others_sessions;       /* the other hosts' sessions here, at the last call */
	int cl_degraded;           /* the store did not answer: a local share */
	int64_t surplus_since;     /* granted > held since (core clock, ms), 0: not */
	int remote_down;           /* another host found it down, and no host has
				    * seen it answer since */
	int cl_wants;              /* someone waits for a slot the cluster may give */
};

/* Provider prov's run-time state, under prov_lock. */
static inline struct prov_rt *px_prov_rt(const struct px_core *core, size_t prov)
{
	return &((const struct px_providers_pub *)(const void *)core->providers)->provs[prov];
}

/*
 * A session: one client's playback of one asset (provider.c admits, joins
 * and expires them; session.c reads through them). It fixes the source;
 * each open file handle of it reads through its own transfers.
 * Lock order: session lock, then stream locks; prov_lock is taken alone.
 */
struct px_handle;
#define PX_SESSION_OPENERS 4

struct px_session {
	struct px_core *core;
	struct px_session *prev, *next; /* the listed sessions, under prov_lock */
	size_t asset;
	_Atomic size_t source;     /* changed only by a cutover, under prov_lock */
	_Atomic int cutting;       /* a cutover of it runs (standby.c): its other
				    * new transfers wait for it (px_xfer_submit) */
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
	int xfers_extra;           /* background read-ahead transfers for it
				    * (PX_XFER_SPARE), on any provider */
	unsigned gen;              /* counts cutovers: transfers of an older
				    * generation count on the provider they
				    * were made to */
	int exhausted;             /* a read failed with nothing to cut over to */
	int reserved;              /* holds a slot of its provider for reopens */
	int listed;                /* in the listed sessions: may be joined */
	int failed;                /* a read failed for good: no more joins */
	int64_t closed_at;         /* when nhandles last fell to 0 */
	int requests;              /* transfers submitted for its reads */
	int requests_counted;      /* of them, counted in a scan already */

	pthread_mutex_t lock;      /* guards handles */
	pthread_mutex_t cut_lock;  /* one cutover of the session at a time */
	struct px_handle *handles;
	_Atomic int64_t offset;    /* where the last read of its lead handle
				    * ended: a playback's place, not that of
				    * another handle's probe of the head */
	_Atomic int64_t lead;      /* the most middle bytes one open handle
				    * read: its reads move offset */
	_Atomic int64_t served;    /* bytes served */
	_Atomic int64_t middle;    /* of them, bytes past the cached head and
				    * before the cached tail: PX_PLAY_BYTES
				    * make it a playback, not a scan */
	_Atomic int disk_fed;      /* a read got bytes an earlier mount kept on
				    * disk (read/cache.c), not its source's */
	_Atomic size_t proven;     /* source+1 whose live bytes passed the first
				    * sample's check since (read/session.c) */
	/* who opened its handles, for the status (px_handle_note_opener): the
	 * last PX_SESSION_OPENERS processes (0: none), and the file's inode */
	_Atomic uint64_t openers[PX_SESSION_OPENERS];
	_Atomic unsigned nopeners;
	_Atomic uint64_t ino;
};

/* Where an asset of size bytes has its cached head end and its cached
 * tail start (head_size and tail_size of cfg): between them, its middle. */
static inline void px_asset_regions(const struct px_config *cfg, int64_t size,
				    int64_t *head_end, int64_t *tail_start)
{
	*head_end = cfg->head_size < size ? cfg->head_size : size;
	*tail_start = size - cfg->tail_size > *head_end ? size - cfg->tail_size : *head_end;
}

/* Bytes from a file's middle (neither its cached head nor its tail) that
 * make a session a playback in the status: the run a stream is earned
 * with (session.c's SEQ_RUN), more than a prober reads past the head. */
#define PX_PLAY_BYTES (512LL << 10)

/* A copy of s (NULL as "") for a status snapshot; sets *oom when there
 * is no memory. */
static inline char *px_snap_copy(const char *s, int *oom)
{
	char *c = strdup(s ? s : "");
	if (!c)
		*oom = 1;
	return c;
}

/* A provider's state as the status names it; the order is the metrics'. */
enum px_snap_state {
	PX_SNAP_LIVE,
	PX_SNAP_FAILING,           /* answering badly, for less than liveness_ttl */
	PX_SNAP_DOWN,              /* answering badly for liveness_ttl */
	PX_SNAP_DRAINED,           /* takes no new session (before the others) */
	PX_SNAP_AUTH_ERROR,        /* its credentials refused (401/403) */
	PX_SNAP_NSTATES
};

struct px_snap_provider {
	char *name;
	enum px_snap_state state;
	char why[200];             /* its last bad answer, in words */
	int auth_failed;
	char auth_why[200];        /* why its credentials count as refused */
	int sessions, xfers, bg, held, max, drained;
	int cl;                    /* cluster mode: the four below count */
	int granted, others_slots, others_sessions, cl_degraded;
	int64_t last_good;         /* core clock, ms; 0: never */
	uint64_t n_ok, n_bad, n_waits, n_busy, n_preempted, n_evicted, n_probes, n_auth;
};

struct px_snap_session {
	uint64_t id, client;
	char *asset, *path;        /* the asset's id and path */
	char *source, *provider;   /* the source as shown (no credentials), its provider */
	int64_t offset, served;    /* where the last read ended; bytes served */
	int64_t created;           /* core clock, ms */
	int nhandles, xfers, exhausted;
	int extra;                 /* its parallel read-ahead transfers */
	int playback;              /* read PX_PLAY_BYTES of the middle; else a scan */
	/* where its clients' open files are (the snapshot, px_proc_positions):
	 * the processes that opened it, the file's inode, its middle */
	uint64_t openers[PX_SESSION_OPENERS], ino;
	int64_t head_end, tail_start;
	int offset_from_file;      /* offset is a client's file position */
};

/* The providers and sessions as the status shows them, copied under
 * prov_lock (px_providers_stats). Plain data the caller owns: free with
 * px_providers_stats_free, or take its pointers. */
struct px_providers_stats {
	int64_t now;               /* the core clock when taken (ms) */
	size_t nassets, nlisted;
	struct px_snap_provider *provs;
	size_t nprovs;
	struct px_snap_session *sessions; /* rows only; else NULL */
	size_t nsessions;
	uint64_t sessions_open, sessions_lingering; /* by handles, always counted */
	uint64_t sessions_playback, sessions_scan;  /* by what they read, always counted */
	uint64_t n_admit_busy;
	char admit_why[300];
	int64_t admit_when;        /* core clock; 0: never */
	uint64_t n_scans, n_scan_requests; /* sessions that read only heads
				    * and tails, and their requests */
	struct px_histo_snap h_ttfb; /* each transfer's submit to its first byte */
};

/*
 * Copies the providers, the sessions' counts (and with rows each
 * session), the admission counters and the catalog's counts into *out
 * (zeroed by the caller), under prov_lock, taken once. PX_ENOMEM when a
 * copy failed: what was copied is in *out all the same, for the caller
 * to free (snapshot.c takes it). Any thread holding none of the core's
 * locks.
 */
enum px_status px_providers_stats(struct px_core *core, int rows,
				  struct px_providers_stats *out) PX_WUR;

/* ---- provider.c: slots, sessions, liveness */

/* Makes provider.c's state (core->providers): prov_lock, each provider's
 * run-time state for the catalog's providers and PX_SPARE_PROVIDERS more;
 * PX_ENOMEM without memory. px_providers_free frees it, after
 * px_sessions_free_all. */
enum px_status px_providers_init(struct px_core *core) PX_WUR;
void px_providers_free(struct px_core *core);

/* Room for providers: the catalog's at the mount and those it may gain. */
size_t px_provs_cap(const struct px_core *core);

/* The first of the listed sessions (->next the others, newest first);
 * under prov_lock. */
struct px_session *px_sessions_first(const struct px_core *core);

/* What a session at its provider's limit gives up for a slot (PX_YIELD_*;
 * read/: px_session_yield_idle) and, in cluster mode, how more slots of a
 * provider are asked for (cslots.c's px_cslots_acquire; called with no
 * lock held). Set by core.c before the core serves. */
void px_providers_set_yield(struct px_core *core, int (*fn)(struct px_session *s, int how));
void px_providers_set_cluster(struct px_core *core,
			      int (*fn)(struct px_core *core, size_t prov, int n));
/* Marks the core stopping and wakes every waiter on prov_cond (takes
 * prov_lock): the monitor and retry threads end, waits for a slot give up. */
void px_providers_release(struct px_core *core);

/* Picks each provider's liveness probe. After discovery; core.c's monitor
 * thread then calls px_providers_tick(). */
void px_providers_start(struct px_core *core);

/* Frees the sessions left after every handle closed and every transfer
 * ended; at px_core_free only. */
void px_sessions_free_all(struct px_core *core);

/*
 * Submits a transfer of provider prov, holding one of its slots until the
 * transfer's on_done has returned. sess: the session it serves (its
 * reserved slot is used first), or NULL with bg set for background work,
 * which yields its slot to playback (cancelled: PX_ECANCELED). At the
 * limit, waits until deadline (ms), then PX_EBUSY. bg PX_XFER_SPARE is
 * background work for sess (which it keeps alive, counted in its
 * xfers_extra): it takes a slot only when one is free now and nobody
 * waits, PX_EBUSY at once otherwise. Never from the fetch thread.
 * Otherwise as ops.submit.
 */
#define PX_XFER_SPARE 2
/* A session's transfer submitted while a cutover of the session runs
 * waits for it first (until deadline): the cutover's checks of a standby
 * need slots that new reads of the failed source would take, turn after
 * turn, on a provider the two share (in-process scenario seed 122). The
 * cutover's own threads say so with px_xfer_cutover_thread(1). */
void px_xfer_cutover_thread(int on);
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

/*
 * px_session_switch(), waiting until deadline (px_now_ms() clock) for room
 * on the source's provider while it has none: a cutover whose only
 * standby's provider is busy with other sessions gets the first slot that
 * frees rather than failing the read. PX_EBUSY at the deadline. Any thread
 * but the fetch thread; holds no lock while it waits.
 */
enum px_status px_session_switch_wait(struct px_session *s, size_t source,
				      int64_t deadline) PX_WUR;

/* The session's descriptor of path source `source`, opened (and its size
 * checked) on first use; -1 when it cannot be used (then logged, and dead
 * for the asset when missing or of another size). */
int px_session_fd(struct px_session *s, size_t source);

/* Makes provider prov's run-time entry that of a provider new to the
 * core: no slots, no sessions, no probe yet. prov_lock held. */
void px_provider_fresh(struct px_core *core, size_t prov);

/* A reload's catalog entry p for provider prov: its max_connections, and
 * its drained unless p is implicit (a named provider's word stands); fresh:
 * prov is new to the core, its entry is made first (px_provider_fresh,
 * counted across hosts in cluster mode). prov_lock held (sources.c). */
void px_providers_apply(struct px_core *core, size_t prov, const struct px_provider *p,
			int fresh);

/* Whether px_core_stop() was called. Takes prov_lock. Any thread. */
int px_providers_stopping(struct px_core *core);
/* The same, prov_lock held. */
int px_providers_stopping_locked(struct px_core *core);
/* Waits on prov_cond (in px_providers; woken by a freed slot, a session's
 * end, px_providers_release) until the deadline (px_now_ms clock),
 * prov_lock held. 0 when the deadline had passed (no wait). */
int px_prov_wait_until(struct px_core *core, int64_t deadline);

/* Notes that provider prov has a source at url (NULL: a path): see
 * prov_rt.host. prov_lock held, or no other thread yet. */
void px_provider_note_source(struct px_core *core, size_t prov, const char *url);

/* A read of the session failed for good: reopens get a new session. */
void px_session_failed(struct px_session *s);


/* Expires sessions and runs liveness probes due at the core's clock;
 * returns when it next has work (core clock, ms). The monitor thread calls
 * it; unit tests call it with a fake clock. */
int64_t px_providers_tick(struct px_core *core);


/* Marks provider prov's credentials refused (HTTP 401/403): no new
 * sessions or cutovers go there; reported as an authentication error. */
void px_provider_auth_failed(struct px_core *core, size_t prov, const char *why);

/*
 * Drains (drained 1) or resumes (0) the provider of that name: a drained
 * provider gets no new session; sessions on it go on. PX_ENOTFOUND when
 * no provider has the name. Idempotent. Any thread.
 */
enum px_status px_provider_drain(struct px_core *core, const char *provider, int drained) PX_WUR;

/* ---- cluster mode (cslots.c calls these; prov_lock taken inside) */

/* Whether provider prov needs another slot of the cluster's to take one
 * more here: it is clustered, has a limit, and uses all it was granted.
 * prov_lock held. */
int px_provider_cluster_need(const struct px_core *core, size_t prov);

/* Applies an answer of the store for provider prov: delta slots more (or
 * fewer) held, the other hosts' slots and sessions; degraded: the store
 * did not answer and granted is this host's local share; wanted: another
 * host waits for a slot there, so a lingering session here ends. Wakes
 * waiters (a slot another host gave back may be theirs to ask for). Any
 * thread but the fetch thread; takes prov_lock. */
void px_provider_cluster_apply(struct px_core *core, size_t prov, int delta, int others_slots,
			       int others_sessions, int degraded, int wanted);

/*
 * Cluster liveness: what the store says of provider prov: remote_down, it
 * is down for this host too (another host found it down and nobody saw it
 * answer since); answered, a host saw it answer after this host found it
 * failing, which ends that here too. Takes prov_lock.
 */
void px_provider_cluster_liveness(struct px_core *core, size_t prov, int remote_down,
				  int answered);

/* For the sync: since when this host finds prov down (liveness_ttl of bad
 * answers; core clock, 0: it does not) and its last good answer (0:
 * none). prov_lock held. */
void px_provider_liveness_times(const struct px_core *core, size_t prov, int64_t now,
				int64_t *down_since, int64_t *last_good);

/* ---- read-only queries (tests and tools; each takes prov_lock alone) */

/* Slots of provider prov free now for background work (INT_MAX without a
 * limit; 0 while anyone waits for one). A hint: px_xfer_submit decides. */
int px_provider_spare(struct px_core *core, size_t prov);

/*
 * The provider (its catalog index) that the listed session with that id
 * reads from now, -1 when no listed session has the id (it ended, failed
 * for good, or never was). Any thread that holds none of the core's locks.
 */
long px_provider_of_session(struct px_core *core, uint64_t session_id);

/*
 * The number of sessions whose source is on provider prov, open ones and
 * those lingering for a reopen alike; -1 when there is no such provider.
 * Any thread that holds none of the core's locks.
 */
int px_provider_sessions(struct px_core *core, size_t prov);

#endif
