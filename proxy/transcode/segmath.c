/*
 * segmath.c - segment count and fixed segment size of a transcode.
 *
 * The count comes from the video timeline: floor(duration / D) segments,
 * plus one more when the tail is at least D/4 long; a shorter tail joins
 * the last segment, which may thus last up to 1.25 D. S is sized for that
 * longest segment so that padding, not luck, makes every segment equal
 * (TRANSCODE-NOTES: CBR alone wobbles by up to 9 %).
 */
#include "segmath.h"

#define WEEK_US (7LL * 24 * 3600 * 1000000)

enum px_status px_segmath_plan(int64_t duration_us, int segment_seconds, int64_t video_bps,
			       int64_t audio_bps, struct px_seg_plan *out)
{
	if (duration_us <= 0 || duration_us > WEEK_US || segment_seconds < 2 ||
	    segment_seconds > 6 || video_bps <= 0 || video_bps > 1000000000 ||
	    audio_bps <= 0 || audio_bps > 100000000)
		return PX_EINVAL;
	int64_t d = (int64_t)segment_seconds * 1000000;
	int64_t n = duration_us / d;
	if (duration_us - n * d >= d / 4 || n == 0)
		n++;
	if (n > PX_SEG_MAX_COUNT)
		return PX_EINVAL;
	/* longest segment 1.25 D; VBV adds at most its buffer (0.5 s) of video */
	double dmax = 1.25 * (double)segment_seconds;
	double bits = (double)video_bps * (dmax + 0.5) + (double)audio_bps * dmax * 1.25;
	double bytes = bits / 8.0 * 1.06 + 16384.0;
	int64_t s = ((int64_t)bytes + PX_TS_PACKET - 1) / PX_TS_PACKET * PX_TS_PACKET;
	out->duration_us = duration_us;
	out->seg_us = d;
	out->nseg = (uint32_t)n;
	out->seg_bytes = s;
	out->size = s * n;
	return PX_OK;
}

uint32_t px_segmath_index(const struct px_seg_plan *p, int64_t off)
{
	if (off <= 0)
		return 0;
	int64_t k = off / p->seg_bytes;
	return k >= (int64_t)p->nseg ? p->nseg - 1 : (uint32_t)k;
}

uint32_t px_segmath_of_time(const struct px_seg_plan *p, int64_t t_us)
{
	if (t_us <= 0)
		return 0;
	int64_t k = t_us / p->seg_us;
	return k >= (int64_t)p->nseg ? p->nseg - 1 : (uint32_t)k;
}

int64_t px_segmath_start_us(const struct px_seg_plan *p, uint32_t k)
{
	return (int64_t)k * p->seg_us;
}
