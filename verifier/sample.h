/*
 * sample.h - the sample plan: which byte ranges of a file the sampled
 * SHA-256 sweep reads. The plan is a pure function of the file's size, so
 * two sides that agree on the size sample the same ranges without talking.
 *
 * The formula (docs/verifier.md says the same):
 *   S = VF_SAMPLE_LEN (4096), C = ceil(size / S) chunks of S bytes (the
 *   last one may be shorter), N = 100 when size >= 1 GiB, else 20.
 *   size == 0: no samples.
 *   C <= N:    every chunk is a sample: n = C, sample i = chunk i.
 *   C >  N:    n = N, sample i = chunk floor(i * (C - 1) / (N - 1)).
 *   Chunk k covers [k*S, min((k+1)*S, size)).
 * So chunk 0 (the first range) and chunk C-1 (the last range) are always
 * sampled, the samples are chunk-aligned, strictly increasing and never
 * overlap, and they are spread evenly across the file.
 */
#ifndef SEAMFS_VF_SAMPLE_H
#define SEAMFS_VF_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#define VF_SAMPLE_LEN 4096
#define VF_SAMPLES_SMALL 20
#define VF_SAMPLES_LARGE 100
#define VF_MAX_SAMPLES VF_SAMPLES_LARGE
#define VF_LARGE_SIZE (1LL << 30)   /* from this size on: VF_SAMPLES_LARGE */

struct vf_plan {
	size_t n;                         /* samples, 0..VF_MAX_SAMPLES */
	int64_t off[VF_MAX_SAMPLES];      /* increasing, chunk-aligned */
	uint32_t len[VF_MAX_SAMPLES];     /* VF_SAMPLE_LEN, the last may be less */
};

/* Fills *out with the plan for a file of `size` bytes (size < 0: no
 * samples). Any thread; no allocation. */
void vf_sample_plan(int64_t size, struct vf_plan *out);

#endif
