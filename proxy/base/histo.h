/*
 * histo.h - a fixed-bucket histogram of durations, for the metrics.
 *
 * Observations are lock-free (one atomic add per bucket, sum and count) so
 * the read path and the fetch thread can record without a lock. The
 * buckets are fixed, the same for every histogram, from 1 ms to 30 s, and
 * a struct px_histo of zeroes is an empty histogram (calloc is enough).
 */
#ifndef SEAMFS_HISTO_H
#define SEAMFS_HISTO_H

#include <stdatomic.h>
#include <stdint.h>

#define PX_HISTO_NBOUNDS 14

/* The buckets' upper bounds in seconds, ascending; a last, implicit
 * bucket (+Inf) takes everything above. */
extern const double px_histo_bounds[PX_HISTO_NBOUNDS];

struct px_histo {
	_Atomic uint64_t bucket[PX_HISTO_NBOUNDS + 1]; /* not cumulative */
	_Atomic uint64_t sum_us;
};

/* A consistent-enough copy: cum[i] counts observations <= bounds[i];
 * cum[PX_HISTO_NBOUNDS] (+Inf) equals count. */
struct px_histo_snap {
	uint64_t cum[PX_HISTO_NBOUNDS + 1];
	uint64_t count;
	double sum;                /* seconds */
};

/* Records one duration (seconds; negative counts as 0). Any thread. */
void px_histo_observe(struct px_histo *h, double seconds);
/* The same in microseconds. Any thread. */
void px_histo_observe_us(struct px_histo *h, int64_t us);

/* Copies h into out. The count is the sum of the buckets, so it always
 * equals the +Inf bucket; the sum may lag an observation made meanwhile.
 * Any thread. */
void px_histo_snapshot(struct px_histo *h, struct px_histo_snap *out);

#endif
