/*
 * sample.c - the sample plan (see sample.h for the formula).
 *
 * Chunk indexes are computed in unsigned 64-bit: C - 1 < 2^51 for any
 * int64 size and i <= 99, so i * (C - 1) stays below 2^58.
 */
#include <string.h>

#include "sample.h"

void vf_sample_plan(int64_t size, struct vf_plan *out)
{
	/* all of it, unused slots too: equal sizes give byte-equal plans */
	memset(out, 0, sizeof(*out));
	if (size <= 0)
		return;
	uint64_t chunks = ((uint64_t)size + VF_SAMPLE_LEN - 1) / VF_SAMPLE_LEN;
	uint64_t want = size >= VF_LARGE_SIZE ? VF_SAMPLES_LARGE : VF_SAMPLES_SMALL;
	uint64_t n = chunks < want ? chunks : want;

	for (uint64_t i = 0; i < n; i++) {
		/* n == chunks: every chunk; else spread, first and last included */
		uint64_t k = n == chunks ? i : i * (chunks - 1) / (n - 1);
		int64_t off = (int64_t)(k * VF_SAMPLE_LEN);
		int64_t left = size - off;
		out->off[i] = off;
		out->len[i] = (uint32_t)(left < VF_SAMPLE_LEN ? left : VF_SAMPLE_LEN);
	}
	out->n = (size_t)n;
}
