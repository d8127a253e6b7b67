/*
 * standby_i.h - standby.c's own state, seen by standby.c and by health.c,
 * which takes its lock for every file of the layer (px_vf_lock): health.c
 * calls nothing of the layer, so every file may call it.
 */
#ifndef SEAMFS_STANDBY_I_H
#define SEAMFS_STANDBY_I_H

#include <pthread.h>
#include <stdint.h>
#include "px.h"

struct vf_store;
struct vf_pool;

#define RECENT_CUTOVERS 8

/* One cutover, for the status. */
struct cutover_rec {
	uint64_t session;
	size_t asset, from, to;
	int64_t offset, ms, when;
	enum px_status reason;
};

/* standby.c's own state (context.h's px_core.verify): vf_lock, the
 * fingerprint store, the verifier's workers and the verification and
 * cutover counters; made by px_standby_init, freed by px_standby_release,
 * opaque to the rest but health.c (px_vf_lock). */
struct px_verify {
	pthread_mutex_t vf_lock;   /* the table in docs/architecture.md */
	pthread_cond_t vf_cond;    /* with vf_lock */
	struct vf_store *vstore;   /* NULL without a state_dir */
	struct vf_pool *vpool;
	int verify_workers;        /* 0: 2 with a real fetcher, none with a fake */
	/* under vf_lock */
	uint64_t n_verified[4];    /* by vf_outcome */
	uint64_t n_cutovers[PX_STATUS_COUNT]; /* by trigger */
	struct cutover_rec recent[RECENT_CUTOVERS];
	uint64_t nrecent;
	uint64_t n_exhausted;
	char exhausted_why[300];
};

#endif
