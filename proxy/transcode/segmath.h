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
/* How much of a file's end a player reads first for its duration:
 * libavformat's DURATION_MAX_READ_SIZE. The writer keeps muxed packets in
 * it; the daemon writes its segments ahead (tail_ahead). */
#define PX_DURATION_READ 250000
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
 * segment length (seconds, 1..6). S bounds one segment of at most 1.25 D:
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

/*
 * Seeks (docs/transcode.md "Seeks"): which writer serves a read of a
 * segment that is not committed yet. A player's seek in MPEG-TS bisects
 * the file by timestamps, a handful of small reads far apart, then reads
 * on from one place. Each far read is served by a probe (a short writer
 * run of just the segments it needs); the main writer, which runs on
 * towards the end, moves only once a handle's reads settle at a new
 * place. Pure functions, any thread.
 */

/* The settle rule: a read of segment k settles there when the handle's
 * PX_SEEK_SETTLE_READS reads before it each began within
 * PX_SEEK_SETTLE_SPAN segments before k (or in k): it is reading on
 * through a place, not bisecting. */
#define PX_SEEK_SETTLE_READS 2
#define PX_SEEK_SETTLE_SPAN 2
/* A read that jumped to k (px_seek_jumped) waits for the main writer only
 * this far past its edge, not seek_restart_segments: a probe, which the
 * main writer yields to, costs about two of its segments (docs/transcode.md
 * "Seeks"), and a player that jumps to a place shows nothing until it is
 * written. */
#define PX_SEEK_JUMP_AHEAD 1
/* A probe writes the segments the read needs: from its first to its last
 * (at least PX_SEEK_PROBE_SEGMENTS), never more than PX_SEEK_PROBE_MAX. */
#define PX_SEEK_PROBE_SEGMENTS 1
#define PX_SEEK_PROBE_MAX 8

/* Where one handle's last reads began (segments), newest last. */
struct px_seek_hist {
	uint32_t seg[PX_SEEK_SETTLE_READS];
	unsigned n;    /* reads noted, up to PX_SEEK_SETTLE_READS */
};

/* Notes a read that begins in segment k. */
void px_seek_note(struct px_seek_hist *h, uint32_t k);

/* Whether a read of segment k settles there (the rule above). */
int px_seek_settled(const struct px_seek_hist *h, uint32_t k);

/* Whether a read of segment k jumped there: the handle read before
 * (a first read is no jump), and none of its reads noted began within
 * ahead segments before k, or in k (a player's seek, not its reading on
 * or the kernel's read-ahead of a run). */
int px_seek_jumped(const struct px_seek_hist *h, uint32_t k, int64_t ahead);

/* What a job looks like to a read of segment k that is not committed. */
struct px_seek_view {
	int main_running;      /* its main writer runs ... */
	uint32_t main_from;    /* ... from this segment ... */
	int64_t main_edge;     /* ... and commits this one next */
	int64_t ahead;         /* seek_restart_segments: waiting range past the edge */
	int probe_covers;      /* a probe run is writing segment k */
	int slot_free;         /* a writer slot is free for a probe (max_writers) */
	int probes_running;    /* probes running on the host (they end soon) */
	int settled;           /* px_seek_settled() for this read */
	int first_read;        /* the handle's first read */
	int sole_reader;       /* the job's only reader (one handle, no far
				* read of another host): nobody to take turns with */
	int jump;              /* px_seek_jumped(): the reach past the edge is
				* PX_SEEK_JUMP_AHEAD at most */
};

enum px_seek_action {
	PX_SEEK_WAIT,    /* a running writer will commit it: wait */
	PX_SEEK_START,   /* no main writer: start it at k */
	PX_SEEK_PROBE,   /* run a probe for k (px_seek_probe_until) */
	PX_SEEK_MOVE,    /* move the main writer to k: kill it, start it there */
};

/*
 * The decision for a read of segment k, not committed:
 *  - a probe writes k, or the main writer's run reaches it (from k's
 *    start up to ahead segments past its edge; PX_SEEK_JUMP_AHEAD for a
 *    jump): WAIT;
 *  - no main writer: START on the handle's first read or a settled one,
 *    else PROBE; with no slot free for it, WAIT while probes run, else
 *    START (the start waits in line);
 *  - a main writer elsewhere: a settled read MOVEs it once it has
 *    committed two segments since it started (two readers far apart take
 *    turns rather than kill each other's writer before either gets a
 *    byte; until then WAIT, or PROBE when a slot is free), at once when
 *    its handle is the job's sole reader; else PROBE.
 *    With no slot free for a probe: WAIT while probes run (one ends in
 *    a moment), else (main writers hold every slot, max_writers 1 say)
 *    MOVE when it may be moved, as a far read always did, or WAIT.
 */
enum px_seek_action px_seek_decide(const struct px_seek_view *v, uint32_t k);

/*
 * The last segment a probe from k writes: up to k + PX_SEEK_PROBE_SEGMENTS
 * - 1 or the read's last segment read_last, whichever is further, at most
 * PX_SEEK_PROBE_MAX segments and never past nseg - 1; it ends before the
 * first segment after k that is committed (ok[j]) or that another writer
 * starts at (stop_at, > k; UINT32_MAX: none).
 */
uint32_t px_seek_probe_until(uint32_t k, uint32_t read_last, uint32_t nseg,
			     const unsigned char *ok, uint32_t stop_at);

#endif
