/*
 * clock.c - the core's one clock: monotonic time for deadlines, backoff
 * and idle timeouts (condition variables wait on CLOCK_MONOTONIC too), and
 * the progress clock that says when a transfer stalls.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "clock.h"
#include "px.h"

int64_t px_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t px_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void px_cond_init_mono(pthread_cond_t *c)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(c, &attr);
	pthread_condattr_destroy(&attr);
}

int px_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const int *flag,
		       int64_t deadline_ms)
{
	struct timespec ts = { deadline_ms / 1000, (deadline_ms % 1000) * 1000000 };
	while (!*flag) {
		if (px_now_ms() >= deadline_ms)
			return 0;
		int rc = pthread_cond_timedwait(c, m, &ts);
		if (rc == ETIMEDOUT && !*flag)
			return 0;
	}
	return 1;
}

int64_t px_progress_start(void)
{
	return px_now_us();
}

int64_t px_progress_add(int64_t clock_us, size_t len, int64_t floor)
{
	int64_t now = px_now_us();
	/* (an hour's worth at the floor or more: now, without overflow) */
	if (floor <= 0 || (int64_t)len / floor >= 3600)
		return now;
	/* never ahead of now: bytes banked in a burst cannot hide a later
	 * drip */
	int64_t t = clock_us + (int64_t)len * 1000000 / floor;
	return t < now ? t : now;
}

int64_t px_progress_stall_at(int64_t clock_us, int64_t stall_ms)
{
	return (clock_us + 999) / 1000 + stall_ms;
}
