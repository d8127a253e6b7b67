/*
 * scen.h - one scenario of the seeded checker: what it is (made from its
 * seed alone by scen_make, scen_gen.c) and what running it found
 * (scen_run, scen_run.c). scenarios.c runs many at once.
 */
#ifndef SEAMFS_SCEN_H
#define SEAMFS_SCEN_H

#include <pthread.h>
#include <stdint.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "sfake.h"

#define SC_MAX_READERS 4
#define SC_MAX_SESSIONS 64
#define SC_GRACE_MS 1000        /* a read returns within read_timeout + this */

/* What the scenarios of a run are made of. */
enum sc_mode {
	SC_RANDOM,       /* every kind of source, fault and reader */
	SC_CLEAN,        /* every source identical, nothing fails: must give 0 */
	SC_FORCE_SWITCH, /* the checker moves each session by hand to a source
			  * that differs: must be caught every time */
};

enum sc_pattern { SC_SEQ, SC_PACED, SC_SEEKS, SC_SCAN, SC_NPATTERNS };

struct sc_reader {
	enum sc_pattern pat;
	uint64_t client;           /* readers of one client share a session */
	int64_t start_ms;          /* opens this long after the core is up */
	int64_t from, to;          /* SEQ, PACED: the bytes read */
	size_t chunk;              /* bytes per read */
	int64_t pace_ms;           /* PACED: pause between reads */
	int nseeks;                /* SEEKS: random reads */
	int64_t head, tail;        /* SCAN: bytes read at each end */
	uint64_t seed;             /* SEEKS: its offsets */
};

struct sc_rng {
	uint64_t s;
};

uint64_t sc_rand(struct sc_rng *r);
/* Uniform in [lo, hi]. */
int64_t sc_range(struct sc_rng *r, int64_t lo, int64_t hi);

struct scen {
	uint64_t seed;
	char tag[32];               /* in its asset id, provider names and URLs:
				     * the seed, or "SEEDrN" for run N of a seed
				     * --repeat runs side by side */
	enum sc_mode mode;
	/* the asset and its sources */
	int64_t size;
	unsigned char *base;             /* the asset's bytes */
	unsigned char *own[SF_MAX_SOURCES]; /* a source's own bytes, or NULL */
	int nsrc, nprov;
	struct sf_source src[SF_MAX_SOURCES];
	int limit[SF_MAX_SOURCES];       /* per provider, 0: none */
	int size_in_catalog;
	/* the core's settings */
	int64_t read_timeout_ms, stall_ms, standby_delay_ms, liveness_ms;
	int retries;
	int64_t head_size, tail_size;
	int use_state;
	char state_dir[128];
	/* readers */
	int nreaders;
	struct sc_reader rd[SC_MAX_READERS];

	/* run time */
	struct px_config cfg;
	struct px_catalog *cat;
	struct sfake fake;
	struct px_fetch_ops ops;
	struct px_core *core;
	int64_t asset_size;              /* as discovery learnt it */
	pthread_mutex_t lock;            /* guards what follows */
	int nsess;
	uint64_t sess_id[SC_MAX_SESSIONS];
	int sess_src[SC_MAX_SESSIONS];   /* the source it was first served from */
	unsigned sess_mask[SC_MAX_SESSIONS]; /* the sources whose bytes agree with
					  * every byte it returned (bit j: s<j>) */
	int violated;
	int unseen;                      /* got a byte that differs outside every sample:
					  * what sampling cannot see, not counted */
	int unknown;                     /* got a standby's byte inside a sample the
					  * served source died before giving
					  * (scen_run.c unknowable): not counted */
	int starved;                     /* a read failed or came late while the
					  * machine withheld the process for
					  * as long as the timing that failed
					  * it (lag.c): not counted */
	int slots_taken;                 /* a read failed while every source that
					  * could serve it was on a provider whose
					  * every slot other clients' open
					  * sessions held (scen_run.c
					  * full_by_others): not counted */
	char what[1024];                 /* the first violation */
	int64_t nreads, nfailed, ncut;
	int64_t switch_done;             /* SC_FORCE_SWITCH: sessions moved */
};

/* Makes the scenario of seed (allocates its bytes). 0, or -1 out of memory. */
int scen_make(struct scen *s, uint64_t seed, enum sc_mode mode);
/* Frees what scen_make and scen_run allocated. */
void scen_free(struct scen *s);
/* A one-line description of the scenario (for a violation's report). */
void scen_describe(const struct scen *s, char *out, size_t len);

/* Runs it: a core on its fake, its readers, the invariants. Returns 1 when
 * a violation was found (s->what says the first), 0 otherwise. */
int scen_run(struct scen *s);

/* Starts the thread that measures how late the machine runs the process
 * (lag.c). 0, or -1 when it cannot start (then nothing is blamed on it). */
int sc_lag_start(void);
/* The ms the machine withheld the process inside [t0, t1] (px_now_ms). */
int64_t sc_lag_lost(int64_t t0, int64_t t1);
/* The ms withheld since the start (late wakes only), *worst the longest. */
int64_t sc_lag_total(int64_t *worst);

/* A scenario whose reader hangs cannot be freed: reports it with the
 * run's summary and ends the process (scenarios.c). */
void scen_hung(struct scen *s) __attribute__((noreturn));

/* Records a violation (the first one counts). Any thread. */
void scen_violation(struct scen *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
