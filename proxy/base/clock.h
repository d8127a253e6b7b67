/*
 * clock.h - condition variables that wait on CLOCK_MONOTONIC with a deadline
 * (clock.c). The clock itself, px_now_ms(), is declared in px.h.
 */
#ifndef SEAMFS_CLOCK_H
#define SEAMFS_CLOCK_H

#include <pthread.h>
#include <stdint.h>

/* A condition variable that waits on CLOCK_MONOTONIC. */
void px_cond_init_mono(pthread_cond_t *c);

/* Waits on c until *flag or the monotonic deadline (ms). m is held.
 * Returns 1 when the flag is set, 0 at the deadline. */
int px_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const int *flag,
		       int64_t deadline_ms);

/*
 * A transfer's progress clock, in microseconds of the monotonic clock: the
 * one rule of what a stall is (stream, direct read and cache fill alike).
 * Progress is a rate: px_progress_add() moves the clock len/floor seconds
 * on for len bytes (floor: stall_min_rate, bytes a second), never past
 * now, so a transfer at or above the floor keeps it at now and a drip
 * below it falls behind. floor 0: any byte brings it to now. Set it with
 * px_progress_start() when a transfer starts or a paused one resumes.
 * Any thread; pure functions of their arguments and the clock.
 */
int64_t px_progress_start(void);
int64_t px_progress_add(int64_t clock_us, size_t len, int64_t floor);

/* When a transfer whose progress clock reads clock_us counts as stalled
 * (ms of px_now_ms): stall_ms behind it, rounded up. */
int64_t px_progress_stall_at(int64_t clock_us, int64_t stall_ms);

#endif
