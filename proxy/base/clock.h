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

#endif
