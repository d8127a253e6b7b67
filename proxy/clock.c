/*
 * clock.c - the core's one clock: monotonic time for deadlines, backoff
 * and idle timeouts (condition variables wait on CLOCK_MONOTONIC too).
 */
#include <time.h>

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
