/*
 * core_i.h - the core's insides, shared by core.c, probe.c and session.c
 * only. No other folder includes it.
 */
#ifndef SEAMFS_CORE_I_H
#define SEAMFS_CORE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "core.h"

struct asset_rt {
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
	_Atomic uint64_t next_session;
};

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t px_now_ms(void);

/* A condition variable that waits on CLOCK_MONOTONIC. */
void px_cond_init_mono(pthread_cond_t *c);

/* Waits on c until *flag or the monotonic deadline (ms). m is held.
 * Returns 1 when the flag is set, 0 at the deadline. */
int px_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const int *flag,
		       int64_t deadline_ms);

/* Probes every asset that needs it (probe.c). */
void px_probe_assets(struct px_core *core, const unsigned char *need);

#endif
