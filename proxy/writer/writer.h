/*
 * writer.h - the transcoding writer (seamfs-writer), on the FFmpeg
 * libraries. Only writer.c and writer_main.c include libav headers; the
 * daemon runs the writer as a separate process.
 */
#ifndef SEAMFS_WRITER_H
#define SEAMFS_WRITER_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "lease.h"
#include "px.h"
#include "segmath.h"
#include "kvstore.h"

struct px_writer_args {
	const char *input;        /* URL or path of the source asset; with
				   * input_fd, the name of the fed asset */
	int input_fd;             /* the daemon's feed of the input (feed.h), 0: none */
	int64_t input_size;       /* its size, from px_writer_feed_hello() */
	const char *shown;        /* input as messages show it (px_redact_url); NULL: input */
	const char **headers;     /* "Name: value" for HTTP inputs */
	size_t nheaders;
	int height;               /* 0: the source's */
	int64_t video_bps, audio_bps;
	int segment_seconds;
	int remux;                /* stream copy: px_writer_remux_* */
	int64_t io_timeout_ms;    /* a network input silent this long fails; 0: 30 s */
	/* run only */
	const char *work_dir;
	uint32_t from;
	struct px_seg_plan plan;  /* as the daemon listed it */
	struct px_lease_store *leases; /* NULL: no lease to renew */
	struct px_lease lease;
	/* cluster mode: the playlist lives in the store (tcstore.h), every
	 * change checked against lease.gen there, and segment files carry
	 * the generation in their names (px_playlist_seg_file); NULL: the
	 * playlist file in work_dir, under its flock */
	struct px_store *store;
	int64_t heartbeat_ms;
	double max_speed;         /* pace at most this times realtime, 0: free */
	int probe;                /* a probe run: segments from..probe_until only,
				   * each kept as NAME.probe.tmp until
				   * px_writer_publish() lists them together */
	uint32_t probe_until;
	uint32_t overflow_seg;    /* out: the segment that did not fit (PX_ESIZE) */
};

/* A probe's segments before they are listed: seg-NNNNNN.ts.probe.tmp. */
#define PX_WRITER_PROBE_TMP ".probe.tmp"
/* The most segments one probe run writes. */
#define PX_WRITER_PROBE_MAX 16

/* Reads the daemon's hello on a->input_fd (once, before any run) into
 * a->input_size, and bounds each later reply by a->io_timeout_ms. On
 * failure err says why (the daemon cannot read the asset, or no hello). */
enum px_status px_writer_feed_hello(struct px_writer_args *a, char *err,
				    size_t errlen) PX_WUR;

/* Probes the input and plans the segments. On failure err names the input
 * and what went wrong. */
enum px_status px_writer_plan(const struct px_writer_args *a, struct px_seg_plan *out,
			      char *err, size_t errlen) PX_WUR;

/*
 * Writes segments a->from, a->from+1, ... into a->work_dir (encoding
 * segment from-1 first and discarding it), each padded to S bytes and
 * committed by tmp + fsync + rename, the playlist rewritten after each;
 * prints "committed K" on stdout per segment. Stops cleanly (#CLEAN) at the
 * end or at the first segment already listed. PX_EFENCED: the lease was
 * taken over. PX_ESIZE: a segment would not fit S.
 */
enum px_status px_writer_run(struct px_writer_args *a, char *err, size_t errlen) PX_WUR;

/* Plans a remux: the source's GOPs grouped into segments of about D, each
 * measured by a dry run of the muxer. *json (malloc'd, the caller frees)
 * holds duration_us, segments, size, segment_bytes 0, tb_num/tb_den, starts
 * (video timestamps of segments 1..N-1) and sizes. */
enum px_status px_writer_remux_plan(const struct px_writer_args *a, char **json, char *err,
				    size_t errlen) PX_WUR;

/* Writes segments a->from.. of a remux planned in a->work_dir/plan.json,
 * each exactly its planned size (PX_ESIZE otherwise), as px_writer_run. */
enum px_status px_writer_remux_run(struct px_writer_args *a, char *err, size_t errlen) PX_WUR;

/*
 * The end of a probe run (a->probe): lists the segments from..probe_until
 * it wrote (NAME.probe.tmp, renamed into place) in one update of the
 * playlist under its lock, each as a closed entry (px_playlist_add_closed:
 * the probe has moved past all of them), skipping any another run listed
 * meanwhile; then prints "committed K" for each and "done". PX_EFENCED,
 * listing nothing, when the lease was taken over.
 */
/* The running FFmpeg libraries' versions, one "libavformat 59.27.100"
 * line each, to out (seamfs-writer --version). */
void px_writer_versions(FILE *out);

enum px_status px_writer_publish(struct px_writer_args *a, uint32_t from, char *err,
				 size_t errlen) PX_WUR;

#endif
