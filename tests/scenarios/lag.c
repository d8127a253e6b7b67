/*
 * lag.c - how much CPU time the machine withheld from the checker (scen.h).
 *
 * The scenarios' timing is real and scaled down (a stall_timeout of a few
 * hundred ms), so a machine that does not run the process for that long
 * makes an identical source look stalled: the core then judges right, and
 * the failure is the machine's. One thread sleeps LAG_STEP_MS at a time and
 * records each wake that came late by more than LAG_MIN_MS; a failed or slow
 * read is blamed on the machine only when the time lost inside that read's
 * own window is large against the timing that failed it (scen_run.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "px.h"
#include "scen.h"

#define LAG_STEP_MS 5
#define LAG_MIN_MS 3
#define LAG_RING 65536 /* minutes of late wakes at the worst rate */

struct late {
	int64_t from, to; /* the wake was due at from and came at to */
};

static struct late g_ring[LAG_RING];
static _Atomic uint64_t g_n; /* wakes recorded; g_ring[i % LAG_RING] */
static _Atomic int64_t g_total, g_worst; /* ms late in all, at worst */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void *lag_main(void *arg)
{
	struct timespec step = { 0, LAG_STEP_MS * 1000000L };
	(void)arg;
	for (;;) {
		int64_t due = px_now_ms() + LAG_STEP_MS;
		nanosleep(&step, NULL);
		int64_t now = px_now_ms();
		if (now - due < LAG_MIN_MS)
			continue;
		atomic_fetch_add(&g_total, now - due);
		if (now - due > atomic_load(&g_worst))
			atomic_store(&g_worst, now - due);
		pthread_mutex_lock(&g_lock);
		uint64_t n = atomic_load(&g_n);
		g_ring[n % LAG_RING] = (struct late){ due, now };
		atomic_store(&g_n, n + 1);
		pthread_mutex_unlock(&g_lock);
	}
	return NULL;
}

int sc_lag_start(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, lag_main, NULL) != 0)
		return -1;
	pthread_detach(t);
	return 0;
}

int64_t sc_lag_lost(int64_t t0, int64_t t1)
{
	int64_t lost = 0;
	pthread_mutex_lock(&g_lock);
	uint64_t n = atomic_load(&g_n);
	for (uint64_t i = n; i > 0 && n - i < LAG_RING; i--) {
		const struct late *l = &g_ring[(i - 1) % LAG_RING];
		if (l->to <= t0)
			break; /* older ones ended before the window too */
		int64_t a = l->from > t0 ? l->from : t0, b = l->to < t1 ? l->to : t1;
		if (b > a)
			lost += b - a;
	}
	pthread_mutex_unlock(&g_lock);
	return lost;
}

int64_t sc_lag_total(int64_t *worst)
{
	*worst = atomic_load(&g_worst);
	return atomic_load(&g_total);
}
