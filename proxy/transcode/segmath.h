/*
 * segmath.h - the arithmetic of a transcoded file: how many segments, how
 * many bytes each, which segment a byte offset or a media time falls in.
 *
 * Every segment lasts D = segment_seconds on the source's video timeline
 * (the last one also takes a tail shorter than D/4) and is padded to
 * exactly S bytes, so the file's size is nseg * S and is known from the
 * probed duration alone, before a segment exists. Pure functions, any
 * thread; the writer and the daemon compute the same plan from the same
 * inputs.
 */
#ifndef SEAMFS_SEGMATH_H
#define SEAMFS_SEGMATH_H

#include <stdint.h>
#include "px.h"

#define PX_TS_PACKET 188
#define PX_SEG_MAX_COUNT 1000000u

struct px_seg_plan {
	int64_t duration_us;   /* probed source duration */
	int64_t seg_us;        /* D */
	uint32_t nseg;         /* >= 1 */
	int64_t seg_bytes;     /* S: a multiple of PX_TS_PACKET */
	int64_t size;          /* nseg * S */
};

/*
 * Plans a transcode of duration_us with the profile's bitrates (bit/s) and
 * segment length (seconds, 2..6). S bounds one segment of at most 1.25 D:
 * video under VBV (maxrate video_bps, buffer half a second), audio with a
 * quarter of headroom, 6 % MPEG-TS overhead and 16 KiB for tables, rounded
 * up to a multiple of 188. PX_EINVAL for a duration <= 0 or above a week,
 * a bitrate <= 0 or a segment length out of range.
 */
enum px_status px_segmath_plan(int64_t duration_us, int segment_seconds, int64_t video_bps,
			       int64_t audio_bps, struct px_seg_plan *out) PX_WUR;

/* The segment that holds byte off (0 <= off < size). */
uint32_t px_segmath_index(const struct px_seg_plan *p, int64_t off);

/* The segment that media time t_us (from the source's start) belongs to;
 * times past the end belong to the last segment, negative ones to the
 * first. */
uint32_t px_segmath_of_time(const struct px_seg_plan *p, int64_t t_us);

/* Start of segment k on the media timeline, in microseconds. */
int64_t px_segmath_start_us(const struct px_seg_plan *p, uint32_t k);

#endif
