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
	if (duration_us <= 0 || duration_us > WEEK_US || segment_seconds < 1 ||
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

/* ------------------------------------------------------------ seeks */

void px_seek_note(struct px_seek_hist *h, uint32_t k)
{
	if (h->n < PX_SEEK_SETTLE_READS) {
		h->seg[h->n++] = k;
		return;
	}
	for (unsigned i = 1; i < PX_SEEK_SETTLE_READS; i++)
		h->seg[i - 1] = h->seg[i];
	h->seg[PX_SEEK_SETTLE_READS - 1] = k;
}

int px_seek_settled(const struct px_seek_hist *h, uint32_t k)
{
	if (h->n < PX_SEEK_SETTLE_READS)
		return 0;
	for (unsigned i = 0; i < PX_SEEK_SETTLE_READS; i++)
		if (h->seg[i] > k || k - h->seg[i] > PX_SEEK_SETTLE_SPAN)
			return 0;
	return 1;
}

int px_seek_jumped(const struct px_seek_hist *h, uint32_t k, int64_t ahead)
{
	if (!h->n)
		return 0;
	for (unsigned i = 0; i < h->n; i++)
		if (h->seg[i] <= k && (int64_t)(k - h->seg[i]) <= ahead)
			return 0;
	return 1;
}

enum px_seek_action px_seek_decide(const struct px_seek_view *v, uint32_t k)
{
	int64_t ahead = v->jump && v->ahead > PX_SEEK_JUMP_AHEAD ? PX_SEEK_JUMP_AHEAD : v->ahead;

	if (v->probe_covers)
		return PX_SEEK_WAIT;
	if (!v->main_running) {
		if (v->first_read || v->settled)
			return PX_SEEK_START;
		if (v->slot_free)
			return PX_SEEK_PROBE;
		return v->probes_running ? PX_SEEK_WAIT : PX_SEEK_START;
	}
	if (k >= v->main_from && (int64_t)k <= v->main_edge + ahead)
		return PX_SEEK_WAIT;
	int movable = v->main_edge >= (int64_t)v->main_from + 2 || v->sole_reader;
	if (v->settled && movable)
		return PX_SEEK_MOVE;
	if (v->slot_free)
		return PX_SEEK_PROBE;
	return movable && !v->probes_running ? PX_SEEK_MOVE : PX_SEEK_WAIT;
}

uint32_t px_seek_probe_until(uint32_t k, uint32_t read_last, uint32_t nseg,
			     const unsigned char *ok, uint32_t stop_at)
{
	uint64_t until = (uint64_t)k + PX_SEEK_PROBE_SEGMENTS - 1;
	if (read_last > until)
		until = read_last;
	if (until > (uint64_t)k + PX_SEEK_PROBE_MAX - 1)
		until = (uint64_t)k + PX_SEEK_PROBE_MAX - 1;
	if (until > (uint64_t)nseg - 1)
		until = nseg - 1;
	for (uint64_t j = (uint64_t)k + 1; j <= until; j++) {
		if (ok[j] || j >= stop_at) {
			until = j - 1;
			break;
		}
	}
	return (uint32_t)until;
}
