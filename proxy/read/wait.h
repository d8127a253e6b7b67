/*
 * wait.h - the one wait of a reader for a transfer's bytes (wait.c), for
 * a direct read, a head or tail fill and a stream alike. Internal to read/.
 */
#ifndef SEAMFS_WAIT_H
#define SEAMFS_WAIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct px_core;

/* What a wait for bytes came to. */
enum px_wait_outcome {
	PX_WAIT_WOKEN,    /* signalled: the bytes may be in, look */
	PX_WAIT_STALLED,  /* the transfer made no progress for stall_timeout */
	PX_WAIT_DEADLINE, /* the read's deadline passed */
	PX_WAIT_ENDED,    /* the transfer ended (*ended set) */
};

/* A reader's wait: its lock and condition (made with px_cond_init_mono),
 * the read's deadline and the stall rule, all on the monotonic clock. */
struct px_wait {
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
	int64_t deadline;  /* ms, px_now_ms() */
	int64_t stall_ms;  /* cfg->stall_timeout_ms */
};

/*
 * Waits once, lock held, until signalled, the deadline, or a stall of the
 * transfer whose progress clock (px_progress_*, us) progress points to;
 * NULL: no transfer is watched (paused, or none yet), only the deadline.
 * ended (NULL: none) is looked at before and after. The deadline is
 * looked at before the stall, both before waiting and after a timeout;
 * the caller looks for its bytes after PX_WAIT_WOKEN.
 */
enum px_wait_outcome px_wait_bytes(const struct px_wait *w, const int *ended,
				   const _Atomic int64_t *progress);

/* Cancels transfer id of the core's fetcher, dropping lock (held) around
 * the call: how every stalled or abandoned wait ends its transfer. id 0:
 * nothing. */
void px_wait_cancel(struct px_core *core, pthread_mutex_t *lock, uint64_t id);

#endif
