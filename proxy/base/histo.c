/*
 * histo.c - fixed-bucket duration histograms (see histo.h).
 *
 * An observation adds one to the bucket it falls in (buckets are kept
 * apart, not cumulative, so an observation is one atomic add, not up to
 * fifteen) and its microseconds to the sum. A snapshot makes the buckets
 * cumulative and derives the count from them, so _count and the +Inf
 * bucket agree even while observations go on.
 */
#include <stddef.h>

#include "histo.h"

const double px_histo_bounds[PX_HISTO_NBOUNDS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
};

/* The same bounds in microseconds, so that observing compares integers. */
static const int64_t bounds_us[PX_HISTO_NBOUNDS] = {
	1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000,
};

void px_histo_observe_us(struct px_histo *h, int64_t us)
{
	size_t i = 0;
	if (us < 0)
		us = 0;
	while (i < PX_HISTO_NBOUNDS && us > bounds_us[i])
		i++;
	atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_us, (uint64_t)us, memory_order_relaxed);
}

void px_histo_observe(struct px_histo *h, double seconds)
{
	/* NaN and negatives count as 0; beyond any bound stays beyond */
	int64_t us = 0;
	if (seconds > 1e9)
		us = (int64_t)1e15;
	else if (seconds > 0)
		us = (int64_t)(seconds * 1e6 + 0.5);
	px_histo_observe_us(h, us);
}

void px_histo_snapshot(struct px_histo *h, struct px_histo_snap *out)
{
	uint64_t run = 0;
	for (size_t i = 0; i <= PX_HISTO_NBOUNDS; i++) {
		run += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
		out->cum[i] = run;
	}
	out->count = run;
	out->sum = (double)atomic_load_explicit(&h->sum_us, memory_order_relaxed) / 1e6;
}
