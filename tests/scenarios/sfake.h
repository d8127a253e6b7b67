/*
 * sfake.h - the fake fetcher of the scenario checker: a struct
 * px_fetch_ops that serves each source of one asset with its own
 * behaviour (identical, differing, broken answers, dying, stalling,
 * dripping, refusing, coming back), from its own thread, in real time.
 *
 * HTTP-level answers are not mapped by hand: every answer's head is built
 * as an origin would send it and judged by the real px_http_judge(), so
 * the status the core gets is the one the real fetch module would give.
 * Transport-level events map as fetch.c's translate() does: a reset mid
 * body is PX_ETRANSFER, a refused connection PX_ECONNECT.
 *
 * The fake counts the transfers open per provider (from submit to just
 * before on_done, as the real fetcher frees its connection before calling
 * on_done) and keeps the maximum, and records when each source's fault
 * began, which the checker's oracle reads (sf_state).
 *
 * URLs are "http://pP.test/sK/a.bin": K names the source.
 */
#ifndef SEAMFS_SCEN_SFAKE_H
#define SEAMFS_SCEN_SFAKE_H

#include <pthread.h>
#include <stdint.h>

#include "fetch.h"
#include "sample.h"

#define SF_MAX_SOURCES 5
#define SF_NEVER INT64_MAX

enum sf_kind {
	SF_IDENT,      /* the asset's bytes, proper 206 answers */
	SF_DIFF,       /* the same size, one byte differs at `at` */
	SF_SIZE,       /* another size (the asset's bytes as far as they go) */
	SF_HTML,       /* 200 with an HTML login page */
	SF_GZIP,       /* 206 with Content-Encoding: gzip */
	SF_CLEN,       /* 206 whose Content-Length disagrees with Content-Range */
	SF_RESET,      /* dies (connection reset, then refused) at byte `at` */
	SF_STALL,      /* stops sending at byte `at`; connections stay open */
	SF_DRIP,       /* from byte `at` on, one byte every drip_ms */
	SF_SLOW,       /* each answer's head comes after slow_ms */
	SF_HTTP,       /* answers `http` (401/403/404/5xx) from fault_ms on */
	SF_COMEBACK,   /* dies at byte `at`, answers again back_ms later */
	SF_NKINDS
};

struct sf_source {
	enum sf_kind kind;
	int prov;                  /* provider index */
	const unsigned char *data; /* its bytes; borrowed */
	int64_t size;
	int64_t at;                /* the fault's byte (DIFF: the differing
				    * byte); SF_NEVER: none */
	int64_t fault_ms;          /* or the fault begins this long after
				    * sf_start (SF_NEVER: only at `at`) */
	int http;                  /* SF_HTTP's status */
	int64_t slow_ms, drip_ms, back_ms;
};

/* What the oracle needs of a source at run time (ms on px_now_ms()). */
struct sf_state {
	int64_t fault_at;          /* when its fault began, SF_NEVER: not yet */
	int64_t back_at;           /* SF_COMEBACK: when it answers again */
};

struct sf_xfer;

struct sfake {
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* CLOCK_MONOTONIC */
	pthread_t thread;
	int stop, started;
	size_t chunk;
	int64_t t0;                /* sf_start's px_now_ms() */
	int nsrc, nprov;
	struct sf_source src[SF_MAX_SOURCES];
	struct sf_state st[SF_MAX_SOURCES];
	int limit[SF_MAX_SOURCES]; /* per provider, 0: none */
	int open[SF_MAX_SOURCES], max_open[SF_MAX_SOURCES];
	int64_t over_at;           /* when a provider first went over, or 0 */
	int over_prov, over_n;
	struct sf_xfer **xv;       /* open ones: only the thread removes */
	size_t nx, capx;
	uint64_t next_id;
	int64_t nreq, bad_url;
	/* which bytes of the asset's sampled ranges each source delivered
	 * (sf_track_samples): bit b of seen[k][i] is byte b of sample i */
	struct vf_plan plan;
	uint64_t (*seen)[VF_MAX_SAMPLES][VF_SAMPLE_LEN / 64];
};

/* Sets up f for nsrc sources (copied) on nprov providers with limits
 * (0: none); no thread yet. */
void sf_init(struct sfake *f, const struct sf_source *src, int nsrc, const int *limit,
	     int nprov, size_t chunk);
/* Starts the thread; time-based faults count from now. */
int sf_start(struct sfake *f);
/* Ends every open transfer (PX_ESHUTDOWN) and stops the thread.
 * Idempotent. Submits after it are refused. */
void sf_stop(struct sfake *f);
/* sf_stop(), then frees what is left. */
void sf_destroy(struct sfake *f);
struct px_fetch_ops sf_ops(struct sfake *f);
/* Records from now on which bytes of the sampled ranges of an asset of
 * asset_size each source delivers. 0, or -1 out of memory. */
int sf_track_samples(struct sfake *f, int64_t asset_size);
/* Whether source k delivered every byte of the sampled range that holds
 * byte off (to any transfer, in any pieces): only then can the core have
 * known its bytes there. 1 when off is in no sampled range. */
int sf_sample_seen(struct sfake *f, int k, int64_t off);

/* A copy of source k's run-time state, under the lock. */
struct sf_state sf_state_of(struct sfake *f, int k);

const char *sf_kind_name(enum sf_kind k);

#endif
