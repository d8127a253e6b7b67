/*
 * writer.c - the transcoding writer: source → fixed-duration MPEG-TS
 * segments of exactly S bytes.
 *
 * One pass: demux, decode, scale (video) and resample (audio), encode with
 * libx264 and AAC, and hand each encoded packet to the segment its
 * timestamp falls in (segment k covers [kD, (k+1)D) of the source's video
 * timeline). Video gets an IDR at the first frame of every segment and no
 * B-frames, so a segment's video is closed. Segment k is muxed once both
 * streams have produced a packet of a later segment (or ended): a fresh
 * mpegts muxer writing into memory (initial discontinuity, copied
 * timestamps with one constant 10 s offset, the same in every run), then
 * padded with null packets to S (spread between the data; the last
 * segment ends with a block of them, see pad_layout), written as a new
 * NAME.XXXXXX.tmp (O_EXCL, random: nothing planted is written through),
 * fsynced and renamed, the directory fsynced, and the playlist rewritten
 * (a listed segment is served at once). A restart at segment N seeks the
 * input before N-1, decodes N-1, encodes its audio to warm the AAC
 * encoder (its video is not encoded: segment N starts with an IDR) and
 * discards it.
 *
 * Audio drift: D is segment_seconds as given; an AAC frame (1024/48000 s)
 * does not divide 1 or 2 s exactly, so audio packets join the segment
 * their pts falls in and a restarted run's audio grid may sit up to one
 * AAC frame (21 ms) off the first run's; the warm-up segment keeps the
 * join clean.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

#include <jansson.h>

#include "feed.h"
#include "log.h"
#include "playlist.h"
#include "px.h"
#include "tcstore.h"
#include "writer.h"

#define TS_OFFSET_90K (10LL * 90000) /* constant output offset, every run */
#define OUT_RATE 48000
#define MAX_PENDING 100000           /* packets waiting for their segment */
#define PROBE_WARMUP_US 500000       /* a probe's warm-up: 0.5 s, not a segment */
/* x264 presets: a probe's segments are what a seeking reader waits for,
 * and superfast spends a quarter less CPU than veryfast on them (same
 * High profile, same rate control; issue 32). Its bytes are the segments'
 * bytes for good, as a main writer's are. */
#define X264_PRESET "veryfast"
#define X264_PRESET_PROBE "superfast"

struct pending {
	AVPacket *pkt;
	int video;
	uint32_t seg;
};

struct wr {
	struct px_writer_args *a;
	char *err;
	size_t errlen;
	AVFormatContext *ic;
	AVIOContext *feed_pb;            /* the daemon's feed as the input's I/O */
	int64_t feed_pos;
	int feed_broken;                 /* a request went unanswered: no more */
	int vi, ai;                      /* input stream indexes, -1: none */
	AVCodecContext *vdec, *adec, *venc, *aenc;
	struct SwsContext *sws;
	SwrContext *swr;
	AVAudioFifo *fifo;
	AVFrame *frame, *vframe, *aframe;
	AVPacket *pkt;
	int64_t t0_us;                   /* source time of media time 0 */
	int64_t skip_us;                 /* decoded media before this is dropped */
	int64_t venc_us;                 /* video before this is decoded, not encoded */
	int64_t a_next;                  /* next audio sample (48 kHz, media time) */
	int a_started;
	int64_t v_last_pts;
	int64_t v_last_seg;              /* segment of the last frame fed */
	int64_t v_done_seg, a_done_seg;  /* highest segment seen in encoder output */
	int v_eof, a_eof;
	uint32_t next_flush;             /* the next segment to mux */
	uint32_t first;                  /* the first segment kept (a->from) */
	struct pending *pend;
	size_t npend, cappend;
	struct px_playlist pl;
	char pl_path[4096];
	uint64_t plver;                  /* cluster mode: the version of pl */
	uint64_t plver_hi;               /* the newest version seen: one below it
					  * is a list a failover rolled back */
	int pl_loaded;                   /* cluster mode: pl came from the store */
	char *pl_known;                  /* cluster mode: the list as the store last
					  * had it (loaded or saved), to put back
					  * if the store loses it */
	pid_t ppid;                      /* the daemon that started us */
	int stop;                        /* caught up with a listed segment */
	/* the streams as muxed: the encoders', or the input's for a remux */
	AVCodecParameters *vpar, *apar;
	AVRational vtb, atb;
	int64_t shift_us;                /* added to media time in the output */
	/* remux: segment k starts at the video keyframe bounds[k-1] (video
	 * time base); sizes[k] is its exact muxed size. dry: count only */
	int remux, dry;
	int64_t *bounds, *sizes;
	uint32_t nseg;
	int64_t cur_vseg;
	int64_t last_hb;
	int64_t start_ms;                /* wall time the run began, for pacing */
};

/* The input as messages name it: without credentials (px_redact_url). */
static const char *input_name(const struct px_writer_args *a)
{
	return a->shown ? a->shown : a->input;
}

static enum px_status averr(struct wr *w, int rc, const char *what)
{
	char msg[AV_ERROR_MAX_STRING_SIZE] = "";
	av_strerror(rc, msg, sizeof(msg));
	snprintf(w->err, w->errlen, "%s: %s: %s", input_name(w->a), what, msg);
	switch (rc) {
	case AVERROR(ENOMEM): return PX_ENOMEM;
	case AVERROR(ENOENT): return PX_ENOTFOUND;
	case AVERROR_HTTP_NOT_FOUND: return PX_ENOTFOUND;
	case AVERROR_HTTP_UNAUTHORIZED:
	case AVERROR_HTTP_FORBIDDEN: return PX_EAUTH;
	case AVERROR_HTTP_SERVER_ERROR: return PX_ESERVER;
	case AVERROR(ETIMEDOUT): return PX_ETIMEDOUT;
	case AVERROR(ECONNREFUSED): return PX_ECONNECT;
	case AVERROR_INVALIDDATA: return PX_EINVAL;
	default: return PX_EIO;
	}
}

static void av_log_to_px(void *avcl, int level, const char *fmt, va_list vl)
{
	char line[1024];
	int print_prefix = 1;
	if (level > AV_LOG_WARNING)
		return;
	av_log_format_line(avcl, level, fmt, vl, line, sizeof(line), &print_prefix);
	size_t n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	if (n)
		px_log(level <= AV_LOG_ERROR ? PX_LOG_ERROR : PX_LOG_WARN, "ffmpeg", "%s", line);
}

enum px_status px_writer_feed_hello(struct px_writer_args *a, char *err, size_t errlen)
{
	struct px_feed_hello hello;
	int64_t ms = a->io_timeout_ms > 0 ? a->io_timeout_ms : 30000;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	enum px_status st = PX_EIO;

	if (setsockopt(a->input_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		snprintf(err, errlen, "%s: the daemon's feed (fd %d): %s", a->input, a->input_fd,
			 strerror(errno));
		goto out;
	}
	if (px_recv_all(a->input_fd, &hello, sizeof(hello)) || hello.magic != PX_FEED_MAGIC) {
		snprintf(err, errlen, "%s: the daemon's feed (fd %d) said no hello", a->input,
			 a->input_fd);
		goto out;
	}
	if (hello.status != PX_OK || hello.size < 0) {
		st = hello.status != PX_OK ? (enum px_status)hello.status : PX_EIO;
		snprintf(err, errlen, "%s: the daemon cannot read it: %s", a->input,
			 px_strerror(st));
		goto out;
	}
	a->input_size = hello.size;
	st = PX_OK;
out:
	return st;
}

/* AVIOContext read: one request to the daemon's feed (feed.h). */
static int feed_read(void *opaque, uint8_t *buf, int size)
{
	struct wr *w = opaque;
	struct px_feed_req rq = { w->feed_pos, (uint32_t)size, 0 };
	struct px_feed_reply rp;
	int fd = w->a->input_fd;

	if (w->feed_broken)
		return AVERROR(EIO);
	if (w->feed_pos >= w->a->input_size)
		return AVERROR_EOF;
	if (rq.len > PX_FEED_MAX)
		rq.len = PX_FEED_MAX;
	if (px_send_all(fd, &rq, sizeof(rq)) || px_recv_all(fd, &rp, sizeof(rp)) ||
	    rp.n > rq.len || (rp.n && px_recv_all(fd, buf, rp.n))) {
		/* a late answer would be taken for the next one's */
		w->feed_broken = 1;
		px_log(PX_LOG_WARN, "writer", "%s: the daemon's feed did not answer a read at "
		       "%lld", input_name(w->a), (long long)rq.off);
		return AVERROR(EIO);
	}
	if (rp.status != PX_OK) {
		px_log(PX_LOG_WARN, "writer", "%s: read at %lld failed in the daemon: %s",
		       input_name(w->a), (long long)rq.off, px_strerror((enum px_status)rp.status));
		return rp.status == PX_ETIMEDOUT ? AVERROR(ETIMEDOUT) : AVERROR(EIO);
	}
	w->feed_pos += rp.n;
	return rp.n ? (int)rp.n : AVERROR_EOF;
}

static int64_t feed_seek(void *opaque, int64_t off, int whence)
{
	struct wr *w = opaque;
	int64_t pos;
	switch (whence & ~AVSEEK_FORCE) {
	case AVSEEK_SIZE: return w->a->input_size;
	case SEEK_SET: pos = off; break;
	case SEEK_CUR: pos = w->feed_pos + off; break;
	case SEEK_END: pos = w->a->input_size + off; break;
	default: return AVERROR(EINVAL);
	}
	if (pos < 0)
		return AVERROR(EINVAL);
	w->feed_pos = pos;
	return pos;
}

#define FEED_IO_BUF (256 * 1024)

/* The input's I/O through the daemon's feed: w->ic with a custom pb. */
static enum px_status open_feed(struct wr *w)
{
	unsigned char *b = av_malloc(FEED_IO_BUF);
	enum px_status st = PX_ENOMEM;
	if (!b || !(w->ic = avformat_alloc_context()))
		goto out;
	w->feed_pb = avio_alloc_context(b, FEED_IO_BUF, 0, w, feed_read, NULL, feed_seek);
	if (!w->feed_pb)
		goto out;
	b = NULL; /* the pb's now */
	w->ic->pb = w->feed_pb;
	st = PX_OK;
out:
	av_free(b);
	if (st != PX_OK)
		snprintf(w->err, w->errlen, "%s: out of memory", input_name(w->a));
	return st;
}

static enum px_status open_input(struct wr *w)
{
	AVDictionary *o = NULL;
	char hdrs[8192] = "", tmo[32];
	int rc;
	enum px_status st;

	if (w->a->input_fd > 0 && (st = open_feed(w)) != PX_OK)
		return st;
	for (size_t i = 0; i < w->a->nheaders; i++)
		snprintf(hdrs + strlen(hdrs), sizeof(hdrs) - strlen(hdrs), "%s\r\n",
			 w->a->headers[i]);
	if (hdrs[0])
		av_dict_set(&o, "headers", hdrs, 0);
	snprintf(tmo, sizeof(tmo), "%lld",
		 (long long)(w->a->io_timeout_ms > 0 ? w->a->io_timeout_ms : 30000) * 1000);
	av_dict_set(&o, "rw_timeout", tmo, 0);
	av_log_set_callback(av_log_to_px);
	rc = avformat_open_input(&w->ic, w->a->input, NULL, &o);
	av_dict_free(&o);
	if (rc < 0)
		return averr(w, rc, "cannot open");
	if ((rc = avformat_find_stream_info(w->ic, NULL)) < 0)
		return averr(w, rc, "cannot read stream info");
	/* a read error the demuxer got past while opening (an index at the
	 * tail it could not read) is not one of the stream: read_frame asks */
	if (w->ic->pb)
		w->ic->pb->error = 0;
	w->vi = av_find_best_stream(w->ic, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
	w->ai = av_find_best_stream(w->ic, AVMEDIA_TYPE_AUDIO, -1, -1, NULL, 0);
	if (w->vi < 0) {
		snprintf(w->err, w->errlen, "%s: no video stream", input_name(w->a));
		return PX_EINVAL;
	}
	if (w->ai < 0)
		w->ai = -1;
	AVStream *vs = w->ic->streams[w->vi];
	w->t0_us = vs->start_time != AV_NOPTS_VALUE
		   ? av_rescale_q(vs->start_time, vs->time_base, AV_TIME_BASE_Q) : 0;
	return PX_OK;
}

/* av_read_frame, except that an input that failed is not its end: some
 * demuxers report a read error (EIO from the mount, a dropped connection)
 * as AVERROR_EOF, and the segments after it must not be committed short. */
static int read_frame(struct wr *w, AVPacket *pkt)
{
	int rc = av_read_frame(w->ic, pkt);
	if (rc == AVERROR_EOF && w->ic->pb && w->ic->pb->error < 0)
		rc = w->ic->pb->error;
	return rc;
}

static int64_t duration_us(const struct wr *w)
{
	AVStream *vs = w->ic->streams[w->vi];
	if (w->ic->duration > 0) {
		int64_t start = w->ic->start_time != AV_NOPTS_VALUE ? w->ic->start_time : 0;
		return w->ic->duration - (w->t0_us - start);
	}
	if (vs->duration > 0)
		return av_rescale_q(vs->duration, vs->time_base, AV_TIME_BASE_Q);
	return -1;
}

static void close_all(struct wr *w)
{
	for (size_t i = 0; i < w->npend; i++)
		av_packet_free(&w->pend[i].pkt);
	free(w->pend);
	free(w->bounds);
	free(w->sizes);
	avcodec_free_context(&w->vdec);
	avcodec_free_context(&w->adec);
	avcodec_free_context(&w->venc);
	avcodec_free_context(&w->aenc);
	sws_freeContext(w->sws);
	swr_free(&w->swr);
	if (w->fifo)
		av_audio_fifo_free(w->fifo);
	av_frame_free(&w->frame);
	av_frame_free(&w->vframe);
	av_frame_free(&w->aframe);
	av_packet_free(&w->pkt);
	avcodec_parameters_free(&w->vpar);
	avcodec_parameters_free(&w->apar);
	avformat_close_input(&w->ic);
	if (w->feed_pb) {
		/* a custom pb is the caller's to free */
		av_freep(&w->feed_pb->buffer);
		avio_context_free(&w->feed_pb);
	}
	px_playlist_release(&w->pl);
	free(w->pl_known);
	w->pl_known = NULL;
}

enum px_status px_writer_plan(const struct px_writer_args *a, struct px_seg_plan *out,
			      char *err, size_t errlen)
{
	struct wr w = { .a = (struct px_writer_args *)a, .err = err, .errlen = errlen };
	enum px_status st = open_input(&w);
	if (st != PX_OK)
		goto out;
	int64_t d = duration_us(&w);
	if (d <= 0) {
		snprintf(err, errlen, "%s: duration unknown", input_name(a));
		st = PX_EINVAL;
		goto out;
	}
	st = px_segmath_plan(d, a->segment_seconds, a->video_bps, a->audio_bps, out);
	if (st != PX_OK)
		snprintf(err, errlen, "%s: cannot plan %lld us in %d s segments", input_name(a),
			 (long long)d, a->segment_seconds);
out:
	close_all(&w);
	return st;
}

static enum px_status open_audio(struct wr *w);

/* The video decoder, the x264 encoder (the profile's size and bitrate)
 * and the scaler between them; then the audio's (open_audio). */
static enum px_status open_codecs(struct wr *w)
{
	const struct px_writer_args *a = w->a;
	AVStream *vs = w->ic->streams[w->vi];
	AVDictionary *o = NULL;
	int rc;

	const AVCodec *vd = avcodec_find_decoder(vs->codecpar->codec_id);
	if (!vd || !(w->vdec = avcodec_alloc_context3(vd))) {
		snprintf(w->err, w->errlen, "%s: no decoder for its video", input_name(a));
		return PX_EINVAL;
	}
	avcodec_parameters_to_context(w->vdec, vs->codecpar);
	w->vdec->pkt_timebase = vs->time_base;
	if ((rc = avcodec_open2(w->vdec, vd, NULL)) < 0)
		return averr(w, rc, "video decoder");

	int sh = w->vdec->height, sw = w->vdec->width;
	int oh = a->height ? a->height : sh - sh % 2;
	int ow = (int)((int64_t)sw * oh / (sh ? sh : 1));
	ow -= ow % 2;
	if (ow < 2 || oh < 2) {
		snprintf(w->err, w->errlen, "%s: bad video size %dx%d", input_name(a), sw, sh);
		return PX_EINVAL;
	}
	const AVCodec *ve = avcodec_find_encoder_by_name("libx264");
	if (!ve || !(w->venc = avcodec_alloc_context3(ve))) {
		snprintf(w->err, w->errlen, "libx264 encoder not available");
		return PX_EINVAL;
	}
	AVRational fr = av_guess_frame_rate(w->ic, vs, NULL);
	if (fr.num <= 0 || fr.den <= 0)
		fr = (AVRational){ 25, 1 };
	w->venc->width = ow;
	w->venc->height = oh;
	w->venc->pix_fmt = AV_PIX_FMT_YUV420P;
	w->venc->time_base = (AVRational){ 1, 90000 };
	w->venc->framerate = fr;
	w->venc->sample_aspect_ratio = (AVRational){ 1, 1 };
	w->venc->bit_rate = a->video_bps;
	w->venc->rc_max_rate = a->video_bps;
	w->venc->rc_buffer_size = (int)(a->video_bps / 2);
	w->venc->max_b_frames = 0;
	w->venc->gop_size = (int)(a->segment_seconds * fr.num / fr.den);
	av_dict_set(&o, "preset", a->probe ? X264_PRESET_PROBE : X264_PRESET, 0);
	av_dict_set(&o, "forced-idr", "1", 0);
	av_dict_set(&o, "x264-params", "scenecut=0:open-gop=0", 0);
	rc = avcodec_open2(w->venc, ve, &o);
	av_dict_free(&o);
	if (rc < 0)
		return averr(w, rc, "video encoder");
	w->sws = sws_getContext(sw, sh, w->vdec->pix_fmt, ow, oh, AV_PIX_FMT_YUV420P,
				SWS_BILINEAR, NULL, NULL, NULL);
	if (!w->sws) {
		snprintf(w->err, w->errlen, "%s: cannot scale %dx%d", input_name(a), sw, sh);
		return PX_EINVAL;
	}
	w->vframe = av_frame_alloc();
	if (!w->vframe)
		return PX_ENOMEM;
	w->vframe->format = AV_PIX_FMT_YUV420P;
	w->vframe->width = ow;
	w->vframe->height = oh;
	if ((rc = av_frame_get_buffer(w->vframe, 0)) < 0)
		return averr(w, rc, "frame");

	return w->ai < 0 ? PX_OK : open_audio(w);
}

/* The audio decoder, the AAC encoder (stereo, OUT_RATE), the resampler
 * between them and the FIFO of resampled samples. */
static enum px_status open_audio(struct wr *w)
{
	const struct px_writer_args *a = w->a;
	int rc;
	AVStream *as = w->ic->streams[w->ai];
	const AVCodec *ad = avcodec_find_decoder(as->codecpar->codec_id);
	if (!ad || !(w->adec = avcodec_alloc_context3(ad))) {
		snprintf(w->err, w->errlen, "%s: no decoder for its audio", input_name(a));
		return PX_EINVAL;
	}
	avcodec_parameters_to_context(w->adec, as->codecpar);
	w->adec->pkt_timebase = as->time_base;
	if ((rc = avcodec_open2(w->adec, ad, NULL)) < 0)
		return averr(w, rc, "audio decoder");
	const AVCodec *ae = avcodec_find_encoder(AV_CODEC_ID_AAC);
	if (!ae || !(w->aenc = avcodec_alloc_context3(ae)))
		return PX_ENOMEM;
	w->aenc->sample_rate = OUT_RATE;
	w->aenc->sample_fmt = AV_SAMPLE_FMT_FLTP;
	av_channel_layout_default(&w->aenc->ch_layout, 2);
	w->aenc->bit_rate = a->audio_bps;
	w->aenc->time_base = (AVRational){ 1, OUT_RATE };
	if ((rc = avcodec_open2(w->aenc, ae, NULL)) < 0)
		return averr(w, rc, "audio encoder");
	rc = swr_alloc_set_opts2(&w->swr, &w->aenc->ch_layout, AV_SAMPLE_FMT_FLTP, OUT_RATE,
				 &w->adec->ch_layout, w->adec->sample_fmt,
				 w->adec->sample_rate, 0, NULL);
	if (rc < 0 || (rc = swr_init(w->swr)) < 0)
		return averr(w, rc, "resampler");
	w->fifo = av_audio_fifo_alloc(AV_SAMPLE_FMT_FLTP, 2, 4 * OUT_RATE);
	w->aframe = av_frame_alloc();
	if (!w->fifo || !w->aframe)
		return PX_ENOMEM;
	return PX_OK;
}

static uint32_t seg_of_us(const struct wr *w, int64_t t_us)
{
	return px_segmath_of_time(&w->a->plan, t_us);
}

/* ---- segments */

static enum px_status load_playlist(struct wr *w);

/* What the writer does with segment k that is listed already (its bytes
 * may have been served: never written again). A probe skips it. The main
 * writer skips a short listed run (a probe's: encoding through it costs
 * less than a restart after it) and stops at a longer one, or at one that
 * reaches the end (docs/transcode.md "Seeks"). */
enum { LISTED_NO, LISTED_SKIP, LISTED_STOP };
#define SKIP_LISTED 2

static int listed(const struct wr *w, uint32_t k)
{
	uint32_t run = 0;
	while (k + run < w->a->plan.nseg && px_playlist_find(&w->pl, k + run) >= 0)
		run++;
	if (!run)
		return LISTED_NO;
	if (w->a->probe)
		return LISTED_SKIP;
	return run <= SKIP_LISTED && k + run < w->a->plan.nseg ? LISTED_SKIP : LISTED_STOP;
}

static enum px_status heartbeat(struct wr *w, int force)
{
	struct px_writer_args *a = w->a;
	if (!a->leases)
		return PX_OK;
	int64_t now = px_now_ms();
	if (!force && now - w->last_hb < a->heartbeat_ms)
		return PX_OK;
	w->last_hb = now;
	enum px_status st = px_lease_heartbeat(a->leases, &a->lease);
	if (st == PX_EFENCED)
		snprintf(w->err, w->errlen, "lease of %s (generation %llu) was taken over; "
			 "stopping", a->lease.key, (unsigned long long)a->lease.gen);
	else if (st != PX_OK)
		px_warn("writer", "lease %s: heartbeat failed: %s", a->lease.key,
			px_strerror(st));
	return st == PX_EFENCED ? st : PX_OK;
}

/* ---- cluster mode: the playlist in the store (tcstore.h) */

/*
 * The store's list is older than one we saved (a failover to a replica
 * that missed our last commits, since PL_PUT checked our generation there
 * it is still ours): the list we saved is the truth for our generation
 * and for the older ones (our claim's recovery decided those), so it goes
 * back with the next change, keeping the entries of our generation that
 * only the store has (a probe's). w->plver becomes the store's, which the
 * next compare-and-set checks. w->pl_known stays ours until a change is
 * saved: a load before that finds the store still behind w->plver_hi and
 * comes here again.
 */
static enum px_status store_rolled_back(struct wr *w, const struct px_playlist *got,
					uint64_t ver)
{
	struct px_playlist pl;
	enum px_status st = px_playlist_parse(w->pl_path, w->pl_known, strlen(w->pl_known), &pl,
					      w->err, w->errlen);
	if (st != PX_OK)
		return st;
	for (size_t i = 0; i < got->n; i++) {
		const struct px_playlist_entry *e = &got->e[i];
		if (e->gen != w->a->lease.gen || px_playlist_find(&pl, e->index) >= 0)
			continue;
		if ((st = px_playlist_add_closed_gen(&pl, e->index, e->size, e->mtime_ns,
						     e->gen)) != PX_OK) {
			px_playlist_release(&pl);
			return st;
		}
	}
	if (w->plver != ver)
		px_warn("writer", "the store's playlist of %s went back from version %llu to %llu "
			"(a failover lost commits?); putting ours back (%zu entries, it had %zu)",
			w->a->lease.key, (unsigned long long)w->plver_hi, (unsigned long long)ver,
			pl.n, got->n);
	px_playlist_release(&w->pl);
	w->pl = pl;
	w->plver = ver;
	w->pl_loaded = 1;
	return PX_OK;
}

/* Loads the store's playlist into w->pl. strict 0: a store that does not
 * answer leaves w->pl as it is (PX_OK); the list that matters is checked
 * again at the next change. A playlist the store lost (restarted empty)
 * while we had one: ours stays, to be put back by the next change. */
static enum px_status store_load(struct wr *w, int strict)
{
	struct px_writer_args *a = w->a;
	char *text = NULL;
	size_t len = 0;
	uint64_t ver = 0;
	enum px_status st = px_tcstore_pl_get(a->store, a->lease.key, &text, &len, &ver);
	snprintf(w->pl_path, sizeof(w->pl_path), "store:%s", a->lease.key);
	if (st == PX_ENOTFOUND) {
		if (w->pl_known) {
			/* the list as the store last had it (not ours with a change
			 * whose save failed) goes back with the next change */
			struct px_playlist pl;
			if (w->plver)
				px_warn("writer", "the store lost the playlist of %s (restarted "
					"empty?); putting ours back", a->lease.key);
			st = px_playlist_parse(w->pl_path, w->pl_known, strlen(w->pl_known), &pl,
					       w->err, w->errlen);
			if (st != PX_OK)
				return st;
			px_playlist_release(&w->pl);
			w->pl = pl;
			w->plver = 0;
			return PX_OK;
		}
		px_playlist_release(&w->pl);
		px_playlist_init(&w->pl, a->plan.seg_bytes, a->plan.nseg);
		w->plver = 0;
		w->pl_loaded = 1;
		return PX_OK;
	}
	if (st != PX_OK) {
		if (!strict && w->pl_loaded)
			return PX_OK;
		snprintf(w->err, w->errlen, "store %s: the playlist of %s: %s",
			 px_store_url(a->store), a->lease.key, px_strerror(st));
		return st;
	}
	struct px_playlist pl;
	st = px_playlist_parse(w->pl_path, text, len, &pl, w->err, w->errlen);
	if (st != PX_OK) {
		free(text);
		return st;
	}
	if (ver < w->plver_hi && w->pl_known && pl.seg_bytes == a->plan.seg_bytes &&
	    pl.nseg == a->plan.nseg) {
		st = store_rolled_back(w, &pl, ver);
		px_playlist_release(&pl);
		free(text);
		return st;
	}
	free(w->pl_known);
	w->pl_known = text;
	if (pl.seg_bytes != a->plan.seg_bytes || pl.nseg != a->plan.nseg) {
		snprintf(w->err, w->errlen, "%s: lists %u segments of %lld bytes, the plan says "
			 "%u of %lld", w->pl_path, pl.nseg, (long long)pl.seg_bytes,
			 a->plan.nseg, (long long)a->plan.seg_bytes);
		px_playlist_release(&pl);
		return PX_EINVAL;
	}
	px_playlist_release(&w->pl);
	w->pl = pl;
	w->plver = ver;
	if (ver > w->plver_hi)
		w->plver_hi = ver;
	w->pl_loaded = 1;
	return PX_OK;
}

/* Puts w->pl into the store if our generation is current and nobody
 * changed it since we loaded it. PX_OK, PX_EFENCED, PX_EEXIST
 * (changed: load and redo), or the store's failure. */
static enum px_status store_save(struct wr *w)
{
	size_t len;
	uint64_t nv = 0;
	char *text = px_playlist_format(&w->pl, &len);
	if (!text)
		return PX_ENOMEM;
	enum px_status st = px_tcstore_pl_put(w->a->store, w->a->lease.key, w->a->lease.gen,
					      w->plver, text, len, &nv);
	if (st == PX_OK) {
		w->plver = nv;
		w->plver_hi = nv > w->plver_hi ? nv : w->plver_hi;
		free(w->pl_known);
		w->pl_known = text;
		text = NULL;
	}
	free(text);
	if (st == PX_ENOTFOUND && w->a->leases) {
		/* the store lost our lease (restarted empty): the renewal puts it
		 * back (or finds another generation: fenced); then again */
		px_warn("writer", "the store lost the lease of %s; renewing it", w->a->lease.key);
		st = px_lease_heartbeat(w->a->leases, &w->a->lease);
		return st == PX_OK ? PX_EEXIST : st == PX_EFENCED ? PX_EFENCED : PX_EIO;
	}
	return st;
}

/* A store that does not answer: waits a little before the caller tries
 * again (a running writer keeps its work and lists it once the store is
 * back; no takeover can happen meanwhile). 250 ms, then the store's own
 * backoff: readers wait for what it lists, so it tries again as soon as
 * a failover can have ended (a 2 s step cost readers 1.4 s more across
 * one), and behind Sentinel at once when the sentinels announce the new
 * master (px_store_wait: the retries alone found it up to 0.5 s after).
 * PX_ECANCELED when the daemon that started us is gone. */
static enum px_status store_wait(struct wr *w, enum px_status why, int *tries)
{
	int64_t d = *tries ? PX_STORE_BACKOFF_MAX_MS : 250;
	if (!(*tries)++)
		px_warn("writer", "store %s: %s; waiting for it to list what is written",
			px_store_url(w->a->store), px_strerror(why));
	if (getppid() != w->ppid) {
		snprintf(w->err, w->errlen, "the daemon that started this writer is gone");
		return PX_ECANCELED;
	}
	px_store_wait(w->a->store, d);
	return PX_OK;
}

/*
 * Makes the renames and links done in the job directory last: a listed
 * segment is served at once and trusted by recovery (playlist.h), so its
 * name must be on disk before the list that names it. 0, or -1 with errno.
 */
static int sync_dir(const char *dir)
{
	int fd = px_dir_open(dir), rc = -1;
	if (fd >= 0) {
		rc = fsync(fd);
		close(fd);
	}
	return rc;
}

/*
 * Gives the fsynced file tmp the committed name path (cluster mode),
 * never replacing a segment: link(2), atomic on NFS; EEXIST when a
 * regular file is there (another run of this generation made it first).
 * What is not a regular file at that name (a link or a FIFO someone
 * planted) is replaced, not written through: rename(2) swaps the name.
 * tmp is gone afterwards. 0, or -1 with errno.
 */
static int commit_name(const char *tmp, const char *path)
{
	struct stat sb;
	int rc = link(tmp, path), e = errno;
	if (rc && e == EEXIST && lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode) &&
	    !S_ISDIR(sb.st_mode)) {
		rc = rename(tmp, path);
		e = errno;
	}
	unlink(tmp);
	errno = e;
	return rc;
}

/* The fenced end of a run: nothing of ours is listed; our own file goes
 * (it carries our generation: no other writer's). */
static enum px_status fenced(struct wr *w, uint32_t k, const char *path)
{
	if (path)
		unlink(path);
	snprintf(w->err, w->errlen, "lease of %s (generation %llu) was taken over; segment %u "
		 "not listed", w->a->lease.key, (unsigned long long)w->a->lease.gen, k);
	return PX_EFENCED;
}

/*
 * The main writer's commit in cluster mode: the segment is written as
 * seg-K.gGEN.ts.tmp, fsynced, linked to seg-K.gGEN.ts (link: a probe of
 * this generation that made that name first keeps it), and listed by a
 * compare-and-set in the store that also checks the generation. A fenced
 * writer lists nothing and removes its file.
 */
static enum px_status commit_store(struct wr *w, uint32_t k, const char *tmp, int64_t len)
{
	char name[64], path[4200];
	struct stat sb;
	enum px_status st;
	int tries = 0;

	px_playlist_seg_file(k, w->a->lease.gen, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", w->a->work_dir, name);
	if (commit_name(tmp, path)) {
		int e = errno;
		if (e == EEXIST)
			return PX_EEXIST; /* a probe of ours wrote it */
		snprintf(w->err, w->errlen, "%s: %s", path, strerror(e));
		return PX_EIO;
	}
	if (stat(path, &sb) || sync_dir(w->a->work_dir)) {
		snprintf(w->err, w->errlen, "%s: %s", path, strerror(errno));
		return PX_EIO;
	}
	int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
	for (;;) {
		if ((st = store_load(w, 1)) != PX_OK) {
			if (st == PX_EINVAL || st == PX_ENOMEM)
				return st;
			if ((st = store_wait(w, st, &tries)) != PX_OK)
				return st;
			continue;
		}
		if (px_playlist_find(&w->pl, k) >= 0) {
			unlink(path); /* listed meanwhile (an older generation's) */
			return PX_EEXIST;
		}
		if ((st = px_playlist_add_gen(&w->pl, k, len, mt, w->a->lease.gen)) != PX_OK) {
			snprintf(w->err, w->errlen, "segment %u cannot be listed", k);
			return st;
		}
		st = store_save(w);
		if (st == PX_OK)
			break;
		if (st == PX_EFENCED)
			return fenced(w, k, path);
		if (st != PX_EEXIST && (st = store_wait(w, st, &tries)) != PX_OK)
			return st;
	}
	if (tries)
		px_info("writer", "store %s answers again; segment %u listed",
			px_store_url(w->a->store), k);
	printf("committed %u\n", k);
	if (fflush(stdout)) {
		snprintf(w->err, w->errlen, "stdout: %s; stopping", strerror(errno));
		return PX_ECANCELED;
	}
	return heartbeat(w, 1);
}

/*
 * Writes segment k as NAME.XXXXXX.tmp and fsyncs it (write_tmp). The main writer then, under
 * the playlist lock, renames it into place and lists it, unless another
 * run (a probe) listed k meanwhile: then PX_EEXIST and the file is
 * dropped. A probe keeps NAME.probe.tmp until px_writer_publish() lists
 * all its segments at once. In cluster mode NAME carries the generation
 * and the list is the store's (commit_store).
 */
/*
 * Writes segment k's bytes to a new file NAME.XXXXXX.tmp in the job
 * directory (px_create_excl: O_CREAT|O_EXCL|O_NOFOLLOW under a random
 * name, so nothing planted there, a link or a hard link, is ever written
 * through, and nobody holds the file open to change it after the fsync),
 * fsynced; a probe's is then renamed to NAME.probe.tmp (replacing what
 * may be there, never writing through it). Its path into tmp.
 */
static enum px_status write_tmp(struct wr *w, const char *name, const uint8_t *data,
				int64_t len, char *tmp, size_t tcap)
{
	char tname[NAME_MAX + 1], probe[96];
	enum px_status st = PX_EIO;
	int fd = -1, dfd = px_dir_open(w->a->work_dir);
	if (dfd >= 0)
		fd = px_create_excl(dfd, name, "tmp", 0644, tname, sizeof(tname));
	int e = errno;
	snprintf(tmp, tcap, "%s/%s%s", w->a->work_dir, fd >= 0 ? tname : name,
		 fd >= 0 ? "" : ".XXXXXX.tmp");
	errno = e;
	if (fd < 0)
		goto fail;
	for (int64_t off = 0; off < len;) {
		ssize_t n = write(fd, data + off, (size_t)(len - off));
		if (n <= 0)
			goto fail;
		off += n;
	}
	if (fsync(fd))
		goto fail;
	if (w->a->probe) {
		snprintf(probe, sizeof(probe), "%s%s", name, PX_WRITER_PROBE_TMP);
		if (renameat(dfd, tname, dfd, probe))
			goto fail;
		snprintf(tmp, tcap, "%s/%s", w->a->work_dir, probe);
	}
	st = PX_OK;
	goto out;
fail:
	e = errno ? errno : EIO;
	snprintf(w->err, w->errlen, "%s: %s", tmp, strerror(e));
	if (fd >= 0)
		(void)unlinkat(dfd, tname, 0); /* ours: made with O_EXCL */
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return st;
}

static enum px_status commit(struct wr *w, uint32_t k, const uint8_t *data, int64_t len)
{
	char name[64], path[4200], tmp[4300];
	struct stat sb;
	enum px_status st = PX_EIO;
	int lk = -1;

	px_playlist_seg_file(k, w->a->store ? w->a->lease.gen : 0, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", w->a->work_dir, name);
	if ((st = write_tmp(w, name, data, len, tmp, sizeof(tmp))) != PX_OK)
		return st;
	if (w->a->probe)
		return heartbeat(w, 0);
	if (w->a->store)
		return commit_store(w, k, tmp, len);
	lk = px_playlist_lock(w->a->work_dir);
	if ((st = load_playlist(w)) != PX_OK)
		goto out;
	if (px_playlist_find(&w->pl, k) >= 0) {
		unlink(tmp);
		st = PX_EEXIST;
		goto out;
	}
	st = PX_EIO;
	if (rename(tmp, path) || stat(path, &sb) || sync_dir(w->a->work_dir)) {
		snprintf(w->err, w->errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
	if ((st = px_playlist_add(&w->pl, k, len, mt)) != PX_OK) {
		snprintf(w->err, w->errlen, "segment %u cannot be listed", k);
		goto out;
	}
	if ((st = px_playlist_save(&w->pl, w->pl_path, w->err, w->errlen)) != PX_OK)
		goto out;
	px_playlist_unlock(lk);
	lk = -1;
	printf("committed %u\n", k);
	if (fflush(stdout)) {
		/* nobody reads us: the daemon that started us is gone */
		snprintf(w->err, w->errlen, "stdout: %s; stopping", strerror(errno));
		st = PX_ECANCELED;
		goto out;
	}
	st = heartbeat(w, 1);
out:
	px_playlist_unlock(lk);
	return st;
}

/* The last segment's trailing block of nulls at most: the last
 * PX_DURATION_READ bytes of a file, where a probe looks for its duration,
 * keep 64 KiB of muxed packets and their share of padding (see
 * pad_layout). */
#define TAIL_PAD_MAX ((PX_DURATION_READ - 65536) / PX_TS_PACKET)

/* One null packet at q. */
static void null_packet(uint8_t *q)
{
	q[0] = 0x47;
	q[1] = 0x1f;
	q[2] = 0xff;
	q[3] = 0x10;
	memset(q + 4, 0xff, PX_TS_PACKET - 4);
}

/*
 * Pads n muxed packets (data) with pad null packets into out: tail of
 * them (at most pad) in one block at the end, the others spread evenly
 * after the data: after data packet i come the nulls that bring the
 * count to floor((i+1) * (pad - tail) / n).
 *
 * A player seeks in MPEG-TS by interpolating byte offsets between
 * timestamps; with the padding in one block (a third of a segment,
 * timestamp-less) every seek to a segment boundary landed in it, and the
 * search fell back to bisecting the file, a writer run per step
 * (docs/transcode.md "Seeks"). Spread, timestamps grow with the offset
 * inside a segment too. The last segment ends with a block of nulls
 * (tail, up to TAIL_PAD_MAX): ffmpeg's search draws its first line from
 * the file's first video packet to its last one, and that block makes the
 * line run a little below every frame, in proportion to the target's
 * place in the file. Its first guess then lands just before the frame the
 * target is in, not after it: a target in the last frame of a segment
 * found the next segment's first frame, the search fell back to
 * bisecting from the file's start, and each step was a probe.
 */
static void pad_layout(uint8_t *out, const uint8_t *data, int64_t n, int64_t pad,
		       int64_t tail)
{
	int64_t o = 0, done = 0, spread = pad - tail;
	for (int64_t i = 0; i < n || done < spread; i++) {
		if (i < n) {
			memcpy(out + o, data + i * PX_TS_PACKET, PX_TS_PACKET);
			o += PX_TS_PACKET;
		}
		int64_t upto = i + 1 >= n ? spread : (i + 1) * spread / n;
		for (; done < upto; done++, o += PX_TS_PACKET)
			null_packet(out + o);
	}
	for (int64_t t = 0; t < tail; t++, o += PX_TS_PACKET)
		null_packet(out + o);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * A remux's video DTS for segment k, in its packets' order (*out, malloc'd;
 * NULL with no video packet). The source's own are not used: Matroska
 * stores none, the demuxer guesses them only after its first packets (the
 * first two of a B-frame GOP come with none, and pts for dts goes
 * backwards: the muxer refuses), and after a seek it guesses differently,
 * so a restart's bytes would differ from a full run's. From the segment's
 * presentation times alone (it starts at a keyframe): sorted, and shifted
 * by the smallest reorder depth d that keeps every dts <= its pts, the
 * first d extrapolated one frame apart. The same packets give the same
 * DTS in any run. PX_OK or PX_ENOMEM.
 */
static enum px_status remux_video_dts(const struct wr *w, uint32_t k, int64_t **out)
{
	size_t n = 0, d = 0;
	int64_t *p = NULL, *sorted = NULL, *dts = NULL, frame = 1;
	enum px_status st = PX_ENOMEM;
	*out = NULL;
	for (size_t i = 0; i < w->npend; i++)
		n += w->pend[i].seg == k && w->pend[i].video;
	if (!n)
		return PX_OK;
	if (!(p = malloc(n * sizeof(*p))) || !(sorted = malloc(n * sizeof(*p))) ||
	    !(dts = malloc(n * sizeof(*p))))
		goto out;
	n = 0;
	for (size_t i = 0; i < w->npend; i++)
		if (w->pend[i].seg == k && w->pend[i].video)
			p[n++] = w->pend[i].pkt->pts;
	memcpy(sorted, p, n * sizeof(*p));
	qsort(sorted, n, sizeof(*sorted), cmp_i64);
	for (size_t i = 1; i < n; i++)
		if (sorted[i] > sorted[i - 1] &&
		    (frame == 1 || sorted[i] - sorted[i - 1] < frame))
			frame = sorted[i] - sorted[i - 1];
	for (size_t i = 0; i < n; i++)
		while (d < i && sorted[i - d] > p[i])
			d++;
	for (size_t i = 0; i < n; i++)
		dts[i] = i >= d ? sorted[i - d] : sorted[0] - (int64_t)(d - i) * frame;
	*out = dts;
	dts = NULL;
	st = PX_OK;
out:
	free(p);
	free(sorted);
	free(dts);
	return st;
}

/* Whether this run keeps segment k: not when another run made it (an
 * earlier one, or a probe just now): bytes that may have been served are
 * never rewritten (a store that does not answer: the list we have;
 * commit checks again). *keep 0 then; at a segment listed where this run
 * must stop, w->stop too. */
static enum px_status still_ours(struct wr *w, uint32_t k, int *keep)
{
	enum px_status st = w->a->store ? store_load(w, 0) : load_playlist(w);
	if (st != PX_OK)
		return st;
	int what = listed(w, k);
	if (what == LISTED_STOP) {
		px_info("writer", "segment %u is already committed; stopping here", k);
		w->stop = 1;
		*keep = 0;
	}
	if (what == LISTED_SKIP) {
		px_debug("writer", "segment %u is already committed; encoding past it", k);
		*keep = 0;
	}
	return PX_OK;
}

/* An MPEG-TS muxer into memory with the run's streams (*as NULL: no
 * audio), its header written. *oc is the caller's to free, also on
 * failure. */
static enum px_status open_muxer(struct wr *w, AVFormatContext **oc, AVStream **vs,
				 AVStream **as)
{
	AVDictionary *o = NULL;
	enum px_status st = PX_ENOMEM;
	int rc;

	if ((rc = avformat_alloc_output_context2(oc, NULL, "mpegts", NULL)) < 0)
		return averr(w, rc, "mpegts muxer");
	if (!(*vs = avformat_new_stream(*oc, NULL)))
		goto out;
	avcodec_parameters_copy((*vs)->codecpar, w->vpar);
	(*vs)->codecpar->codec_tag = 0;
	(*vs)->time_base = w->vtb;
	if (w->apar) {
		if (!(*as = avformat_new_stream(*oc, NULL)))
			goto out;
		avcodec_parameters_copy((*as)->codecpar, w->apar);
		(*as)->codecpar->codec_tag = 0;
		(*as)->time_base = w->atb;
	}
	if ((rc = avio_open_dyn_buf(&(*oc)->pb)) < 0) {
		st = averr(w, rc, "memory output");
		goto out;
	}
	av_dict_set(&o, "mpegts_flags", "+initial_discontinuity", 0);
	av_dict_set(&o, "mpegts_copyts", "1", 0);
	if ((rc = avformat_write_header(*oc, &o)) < 0) {
		st = averr(w, rc, "mpegts header");
		goto out;
	}
	st = PX_OK;
out:
	av_dict_free(&o);
	return st;
}

/* Writes the pending packets of segment k into oc (vdts: a remux's
 * video decoding times, or NULL). */
static enum px_status write_packets(struct wr *w, uint32_t k, AVFormatContext *oc,
				    AVStream *vs, AVStream *as, const int64_t *vdts)
{
	for (size_t i = 0, vn = 0; i < w->npend; i++) {
		struct pending *p = &w->pend[i];
		if (p->seg != k)
			continue;
		AVPacket *pk = av_packet_clone(p->pkt);
		if (!pk)
			return PX_ENOMEM;
		AVStream *st_ = p->video ? vs : as;
		AVRational tb = p->video ? w->vtb : w->atb;
		pk->stream_index = st_->index;
		if (vdts && p->video)
			pk->dts = vdts[vn++];
		if (pk->dts == AV_NOPTS_VALUE)
			pk->dts = pk->pts;
		av_packet_rescale_ts(pk, tb, st_->time_base);
		int64_t off = av_rescale_q(TS_OFFSET_90K, (AVRational){ 1, 90000 }, st_->time_base) +
			      av_rescale_q(w->shift_us, AV_TIME_BASE_Q, st_->time_base);
		pk->pts += off;
		pk->dts += off;
		int rc = av_interleaved_write_frame(oc, pk);
		av_packet_free(&pk);
		if (rc < 0)
			return averr(w, rc, "mpegts write");
	}
	return PX_OK;
}

/* Segment k's len muxed bytes in buf: padded to S and committed (a
 * remux's dry run notes its size instead). */
static enum px_status pad_commit(struct wr *w, uint32_t k, const uint8_t *buf, int len)
{
	const int64_t S = w->remux ? (w->dry ? INT64_MAX : w->sizes[k]) : w->a->plan.seg_bytes;
	enum px_status st;
	uint8_t *out;

	if (len % PX_TS_PACKET) {
		snprintf(w->err, w->errlen, "segment %u: muxer wrote %d bytes, not whole TS "
			 "packets", k, len);
		return PX_EIO;
	}
	if (w->remux && w->dry) {
		w->sizes[k] = len;
		return PX_OK;
	}
	if (w->remux && len != S) {
		snprintf(w->err, w->errlen, "segment %u: remuxed to %d bytes, the plan says %lld "
			 "(the source changed?)", k, len, (long long)S);
		return PX_ESIZE;
	}
	if (len > S) {
		snprintf(w->err, w->errlen, "segment %u: %d bytes do not fit the segment size "
			 "%lld (profile bitrate too low for this source?)", k, len, (long long)S);
		w->a->overflow_seg = k;
		return PX_ESIZE;
	}
	if (!(out = malloc((size_t)S)))
		return PX_ENOMEM;
	int64_t pad = (S - len) / PX_TS_PACKET;
	int64_t tail = k + 1 == w->a->plan.nseg ? (pad < TAIL_PAD_MAX ? pad : TAIL_PAD_MAX) : 0;
	pad_layout(out, buf, len / PX_TS_PACKET, pad, tail);
	if ((st = commit(w, k, out, S)) == PX_EEXIST) {
		/* a probe listed it while this run encoded it */
		st = PX_OK;
		if (listed(w, k) == LISTED_STOP) {
			px_info("writer", "segment %u is already committed; stopping here", k);
			w->stop = 1;
		}
	}
	free(out);
	return st;
}

/* Frees the pending packets of segments up to k. */
static void drop_pending(struct wr *w, uint32_t k)
{
	size_t j = 0;
	for (size_t i = 0; i < w->npend; i++) {
		if (w->pend[i].seg <= k)
			av_packet_free(&w->pend[i].pkt);
		else
			w->pend[j++] = w->pend[i];
	}
	w->npend = j;
}

/* Muxes the pending packets of segment k, pads to S and commits. */
static enum px_status mux_segment(struct wr *w, uint32_t k)
{
	AVFormatContext *oc = NULL;
	AVStream *vs = NULL, *as = NULL;
	uint8_t *buf = NULL;
	int64_t *vdts = NULL;
	enum px_status st;
	int rc, len, keep = k >= w->first;

	if (keep && !w->dry && (st = still_ours(w, k, &keep)) != PX_OK)
		goto out;
	if (!keep)
		goto drop; /* the warm-up segment (its audio, not kept), or made already */
	if ((st = open_muxer(w, &oc, &vs, &as)) != PX_OK)
		goto out;
	if (w->remux && (st = remux_video_dts(w, k, &vdts)) != PX_OK)
		goto out;
	if ((st = write_packets(w, k, oc, vs, as, vdts)) != PX_OK)
		goto out;
	if ((rc = av_write_trailer(oc)) < 0) {
		st = averr(w, rc, "mpegts trailer");
		goto out;
	}
	len = avio_close_dyn_buf(oc->pb, &buf);
	oc->pb = NULL;
	if ((st = pad_commit(w, k, buf, len)) != PX_OK)
		goto out;
drop:
	drop_pending(w, k);
	st = PX_OK;
out:
	if (oc && oc->pb) {
		uint8_t *junk;
		avio_close_dyn_buf(oc->pb, &junk);
		av_free(junk);
	}
	avformat_free_context(oc);
	av_free(buf);
	free(vdts);
	return st;
}

/* Muxes every segment both streams have moved past. */
static enum px_status flush_ready(struct wr *w)
{
	enum px_status st = PX_OK;
	while (!w->stop && w->next_flush < w->a->plan.nseg) {
		uint32_t k = w->next_flush;
		if (w->a->probe && !w->dry && k > w->a->probe_until) {
			w->stop = 1; /* a probe's segments are all written */
			break;
		}
		int vdone = w->v_eof || w->v_done_seg > (int64_t)k;
		int adone = !w->apar || w->a_eof || w->a_done_seg > (int64_t)k;
		if (!vdone || !adone)
			break;
		if ((st = mux_segment(w, k)) != PX_OK)
			return st;
		w->next_flush++;
	}
	return st;
}

static enum px_status queue_packet_in(struct wr *w, AVPacket *pkt, int video, uint32_t k)
{
	if (k < w->next_flush)
		k = w->next_flush; /* late audio joins the segment being written */
	if (w->npend == w->cappend) {
		size_t cap = w->cappend ? w->cappend * 2 : 256;
		if (cap > MAX_PENDING) {
			snprintf(w->err, w->errlen, "too many packets waiting for one segment");
			return PX_ENOMEM;
		}
		struct pending *n = realloc(w->pend, cap * sizeof(*n));
		if (!n)
			return PX_ENOMEM;
		w->pend = n;
		w->cappend = cap;
	}
	AVPacket *c = av_packet_clone(pkt);
	if (!c)
		return PX_ENOMEM;
	w->pend[w->npend++] = (struct pending){ c, video, k };
	if (video && (int64_t)k > w->v_done_seg)
		w->v_done_seg = k;
	if (!video && (int64_t)k > w->a_done_seg)
		w->a_done_seg = k;
	return PX_OK;
}

/* An encoded packet joins the segment its timestamp falls in. */
static enum px_status queue_packet(struct wr *w, AVPacket *pkt, int video)
{
	int64_t t_us = av_rescale_q(pkt->pts, video ? w->vtb : w->atb, AV_TIME_BASE_Q);
	return queue_packet_in(w, pkt, video, seg_of_us(w, t_us));
}

static enum px_status drain(struct wr *w, AVCodecContext *enc, int video)
{
	int rc;
	enum px_status st;
	while ((rc = avcodec_receive_packet(enc, w->pkt)) >= 0) {
		if (!video)
			w->pkt->dts = w->pkt->pts;
		st = queue_packet(w, w->pkt, video);
		av_packet_unref(w->pkt);
		if (st != PX_OK)
			return st;
	}
	if (rc == AVERROR_EOF) {
		if (video)
			w->v_eof = 1;
		else
			w->a_eof = 1;
		return PX_OK;
	}
	return rc == AVERROR(EAGAIN) ? PX_OK : averr(w, rc, "encode");
}

static int64_t frame_us(const struct wr *w, const AVFrame *f, AVRational tb)
{
	int64_t ts = f->best_effort_timestamp;
	if (ts == AV_NOPTS_VALUE)
		ts = f->pts;
	if (ts == AV_NOPTS_VALUE)
		return AV_NOPTS_VALUE;
	return av_rescale_q(ts, tb, AV_TIME_BASE_Q) - w->t0_us;
}

static enum px_status video_frame(struct wr *w, AVFrame *f)
{
	AVStream *vs = w->ic->streams[w->vi];
	int64_t t = frame_us(w, f, vs->time_base);
	int rc;
	if (t == AV_NOPTS_VALUE || t < w->venc_us)
		return PX_OK;
	int64_t pts = av_rescale(t, 90000, 1000000);
	if (pts <= w->v_last_pts)
		return PX_OK;
	uint32_t k = seg_of_us(w, t);
	if ((rc = av_frame_make_writable(w->vframe)) < 0)
		return averr(w, rc, "frame");
	sws_scale(w->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height,
		  w->vframe->data, w->vframe->linesize);
	w->vframe->pts = pts;
	w->vframe->pict_type = (int64_t)k != w->v_last_seg ? AV_PICTURE_TYPE_I
							   : AV_PICTURE_TYPE_NONE;
	w->v_last_seg = k;
	w->v_last_pts = pts;
	if ((rc = avcodec_send_frame(w->venc, w->vframe)) < 0)
		return averr(w, rc, "video encode");
	return drain(w, w->venc, 1);
}

static enum px_status audio_out(struct wr *w, int final)
{
	const int fs = w->aenc->frame_size > 0 ? w->aenc->frame_size : 1024;
	int rc;
	while (av_audio_fifo_size(w->fifo) >= fs || (final && av_audio_fifo_size(w->fifo) > 0)) {
		int n = FFMIN(fs, av_audio_fifo_size(w->fifo));
		av_frame_unref(w->aframe);
		w->aframe->nb_samples = n;
		w->aframe->format = AV_SAMPLE_FMT_FLTP;
		w->aframe->sample_rate = OUT_RATE;
		av_channel_layout_copy(&w->aframe->ch_layout, &w->aenc->ch_layout);
		if ((rc = av_frame_get_buffer(w->aframe, 0)) < 0)
			return averr(w, rc, "audio frame");
		if (av_audio_fifo_read(w->fifo, (void **)w->aframe->data, n) != n)
			return PX_EIO;
		w->aframe->pts = w->a_next;
		w->a_next += n;
		if ((rc = avcodec_send_frame(w->aenc, w->aframe)) < 0)
			return averr(w, rc, "audio encode");
		enum px_status st = drain(w, w->aenc, 0);
		if (st != PX_OK)
			return st;
	}
	return PX_OK;
}

static enum px_status audio_frame(struct wr *w, AVFrame *f)
{
	AVStream *as = w->ic->streams[w->ai];
	int64_t t = frame_us(w, f, as->time_base);
	uint8_t **conv = NULL;
	int rc;
	enum px_status st = PX_OK;

	if (t == AV_NOPTS_VALUE || t < w->skip_us)
		return PX_OK;
	if (!w->a_started) {
		w->a_started = 1;
		w->a_next = av_rescale(t, OUT_RATE, 1000000);
	}
	int max = swr_get_out_samples(w->swr, f->nb_samples);
	if (max <= 0)
		return PX_OK;
	if ((rc = av_samples_alloc_array_and_samples(&conv, NULL, 2, max, AV_SAMPLE_FMT_FLTP,
						     0)) < 0)
		return averr(w, rc, "audio buffer");
	int got = swr_convert(w->swr, conv, max, (const uint8_t **)f->extended_data,
			      f->nb_samples);
	if (got < 0)
		st = averr(w, got, "resample");
	else if (got > 0 && av_audio_fifo_write(w->fifo, (void **)conv, got) != got)
		st = PX_ENOMEM;
	if (st == PX_OK)
		st = audio_out(w, 0);
	av_freep(&conv[0]);
	av_freep(&conv);
	return st;
}

static enum px_status decode(struct wr *w, AVCodecContext *dec, const AVPacket *pkt, int video)
{
	int rc = avcodec_send_packet(dec, pkt);
	enum px_status st;
	if (rc < 0 && rc != AVERROR_EOF) {
		/* a damaged packet costs a frame, not the run */
		px_debug("writer", "decode: packet dropped (%d)", rc);
		return PX_OK;
	}
	while ((rc = avcodec_receive_frame(dec, w->frame)) >= 0) {
		st = video ? video_frame(w, w->frame) : audio_frame(w, w->frame);
		av_frame_unref(w->frame);
		if (st != PX_OK)
			return st;
	}
	return rc == AVERROR(EAGAIN) || rc == AVERROR_EOF ? PX_OK : averr(w, rc, "decode");
}

/* Loads the playlist on disk into w->pl (again: other writers of the
 * directory, probe runs, may have listed segments since). */
static enum px_status load_playlist(struct wr *w)
{
	struct px_writer_args *a = w->a;
	enum px_status st;
	if (a->store)
		return store_load(w, 1);
	snprintf(w->pl_path, sizeof(w->pl_path), "%s/playlist", a->work_dir);
	px_playlist_release(&w->pl);
	st = px_playlist_load(w->pl_path, &w->pl, w->err, w->errlen);
	if (st == PX_ENOTFOUND) {
		px_playlist_init(&w->pl, a->plan.seg_bytes, a->plan.nseg);
		return PX_OK;
	}
	if (st != PX_OK)
		return st;
	if (w->pl.seg_bytes != a->plan.seg_bytes || w->pl.nseg != a->plan.nseg) {
		snprintf(w->err, w->errlen, "%s: lists %u segments of %lld bytes, the plan says "
			 "%u of %lld", w->pl_path, w->pl.nseg, (long long)w->pl.seg_bytes,
			 a->plan.nseg, (long long)a->plan.seg_bytes);
		return PX_EINVAL;
	}
	return PX_OK;
}

/* The clean stop of the main writer: #CLEAN after its last entry, in the
 * list as it is on disk now. */
static enum px_status save_clean(struct wr *w)
{
	if (w->a->store) {
		enum px_status st;
		int tries = 0;
		for (;;) {
			if ((st = store_load(w, 1)) == PX_OK) {
				w->pl.clean = w->pl.n > 0;
				if ((st = store_save(w)) == PX_OK || st == PX_EFENCED)
					break;
				if (st == PX_EEXIST)
					continue;
			} else if (st == PX_EINVAL || st == PX_ENOMEM) {
				break;
			}
			if ((st = store_wait(w, st, &tries)) != PX_OK)
				break;
		}
		if (st == PX_EFENCED)
			snprintf(w->err, w->errlen, "lease of %s (generation %llu) was taken over; "
				 "not marking the list clean", w->a->lease.key,
				 (unsigned long long)w->a->lease.gen);
		return st;
	}
	int lk = px_playlist_lock(w->a->work_dir);
	enum px_status st = load_playlist(w);
	if (st == PX_OK) {
		w->pl.clean = w->pl.n > 0;
		st = px_playlist_save(&w->pl, w->pl_path, w->err, w->errlen);
	}
	px_playlist_unlock(lk);
	return st;
}

/* Sleeps until the wall clock catches up with the media written in this
 * run divided by max_speed: a writer need not run far ahead of its
 * readers. A transcode counts from its first kept segment (venc_us), a
 * remux from its warm-up segment's start (a run moved to a seek's segment
 * is not held back by the media before it). */
static void pace(struct wr *w)
{
	const AVRational ms = { 1, 1000 };
	int64_t media_ms = w->v_last_pts / 90 - w->venc_us / 1000;
	if (w->remux) {
		int64_t begin = w->first >= 2 ? av_rescale_q(w->bounds[w->first - 2], w->vtb, ms)
					      : w->t0_us / 1000;
		media_ms = w->cur_vseg > 0
			   ? av_rescale_q(w->bounds[w->cur_vseg - 1], w->vtb, ms) - begin : 0;
	}
	int64_t due = w->start_ms + (int64_t)((double)media_ms / w->a->max_speed);
	int64_t now = px_now_ms();
	if (due > now) {
		int64_t d = due - now > 200 ? 200 : due - now; /* heartbeats go on */
		struct timespec ts = { d / 1000, (d % 1000) * 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* The encoders' parameters and time bases, for the muxer of each
 * segment. */
static enum px_status out_params(struct wr *w)
{
	if (!(w->vpar = avcodec_parameters_alloc()) ||
	    avcodec_parameters_from_context(w->vpar, w->venc) < 0 ||
	    (w->aenc && (!(w->apar = avcodec_parameters_alloc()) ||
			 avcodec_parameters_from_context(w->apar, w->aenc) < 0)))
		return PX_ENOMEM;
	w->vtb = w->venc->time_base;
	if (w->aenc)
		w->atb = w->aenc->time_base;
	return PX_OK;
}

/* Where the run starts: the warm-up segment before a->from (a probe's
 * warm-up is shorter), the input sought there. */
static enum px_status seek_start(struct wr *w)
{
	struct px_writer_args *a = w->a;
	w->first = a->from;
	w->next_flush = a->from ? a->from - 1 : 0;
	w->skip_us = px_segmath_start_us(&a->plan, w->next_flush);
	if (a->probe && a->from) {
		/* a reader waits for a probe: it warms up on the end of the
		 * segment before only (the encoders need a few frames) */
		int64_t s = px_segmath_start_us(&a->plan, a->from) - PROBE_WARMUP_US;
		if (s > w->skip_us)
			w->skip_us = s;
	}
	/* the warm-up is the audio encoder's: its first frame carries the
	 * priming, and a restarted run's audio joins the first run's within
	 * a frame. Video needs none (every segment starts with an IDR), so
	 * its frames before the first kept segment are decoded, not encoded:
	 * a probe or a moved writer gets its first segment sooner */
	w->venc_us = a->from ? px_segmath_start_us(&a->plan, a->from) : 0;
	w->last_hb = w->start_ms = px_now_ms();
	if (w->skip_us > 0) {
		/* land on the keyframe before, a second early; decode up to the
		 * warm-up segment and drop what comes before it */
		int64_t ts = w->t0_us + w->skip_us - 1000000;
		int rc = avformat_seek_file(w->ic, -1, INT64_MIN, ts, ts, 0);
		if (rc < 0)
			return averr(w, rc, "seek");
	}
	return PX_OK;
}

/* Reads, decodes, encodes and muxes until the input ends or the run
 * stops, renewing the lease and keeping the pace. */
static enum px_status read_loop(struct wr *w)
{
	enum px_status st = PX_OK;
	AVPacket *in = av_packet_alloc();
	if (!in)
		return PX_ENOMEM;
	while (!w->stop && st == PX_OK) {
		int rc = read_frame(w, in);
		if (rc == AVERROR_EOF)
			break;
		if (rc < 0) {
			st = averr(w, rc, "read");
			break;
		}
		if (in->stream_index == w->vi)
			st = decode(w, w->vdec, in, 1);
		else if (in->stream_index == w->ai)
			st = decode(w, w->adec, in, 0);
		av_packet_unref(in);
		if (st == PX_OK)
			st = flush_ready(w);
		if (st == PX_OK)
			st = heartbeat(w, 0);
		if (st == PX_OK && w->a->max_speed > 0 && w->v_last_pts != INT64_MIN)
			pace(w);
	}
	av_packet_free(&in);
	return st;
}

/* The end of the input: flushes decoders and encoders, then every
 * segment. */
static enum px_status flush_end(struct wr *w)
{
	enum px_status st;
	if ((st = decode(w, w->vdec, NULL, 1)) != PX_OK)
		return st;
	if (w->adec && ((st = decode(w, w->adec, NULL, 0)) != PX_OK ||
			(st = audio_out(w, 1)) != PX_OK))
		return st;
	avcodec_send_frame(w->venc, NULL);
	if ((st = drain(w, w->venc, 1)) != PX_OK)
		return st;
	if (w->aenc) {
		avcodec_send_frame(w->aenc, NULL);
		if ((st = drain(w, w->aenc, 0)) != PX_OK)
			return st;
	}
	w->v_eof = w->a_eof = 1;
	return flush_ready(w);
}

/*
 * What both kinds of run share around their work: --from checked, the
 * playlist loaded and the input opened, then work (a transcode's or a
 * remux's), then a main writer's clean end recorded and "done" said on
 * stdout (a probe's segments are listed by px_writer_publish); everything
 * closed.
 */
static enum px_status run(struct wr *w, enum px_status (*work)(struct wr *))
{
	struct px_writer_args *a = w->a;
	enum px_status st;

	if (a->from >= a->plan.nseg) {
		snprintf(w->err, w->errlen, "--from %u is beyond the last segment %u", a->from,
			 a->plan.nseg - 1);
		return PX_EINVAL;
	}
	if ((st = load_playlist(w)) != PX_OK || (st = open_input(w)) != PX_OK ||
	    (st = work(w)) != PX_OK)
		goto out;
	if (a->probe)
		goto out; /* px_writer_publish lists its segments */
	if ((st = save_clean(w)) != PX_OK)
		goto out;
	printf("done\n");
	fflush(stdout);
out:
	close_all(w);
	return st;
}

/* A transcode's work: decode, encode and mux from the warm-up segment on
 * to the end (or a stop). */
static enum px_status transcode_work(struct wr *w)
{
	struct px_writer_args *a = w->a;
	enum px_status st;

	if ((st = open_codecs(w)) != PX_OK)
		return st;
	w->frame = av_frame_alloc();
	w->pkt = av_packet_alloc();
	if (!w->frame || !w->pkt)
		return PX_ENOMEM;
	if ((st = out_params(w)) != PX_OK || (st = seek_start(w)) != PX_OK)
		return st;
	px_info("writer", "segments %u.. of %u (%lld bytes each) from %s at %lld bit/s, %s %u",
		a->from, a->plan.nseg, (long long)a->plan.seg_bytes, input_name(a),
		(long long)a->video_bps, a->from ? "warm-up segment" : "no warm-up before",
		w->next_flush);
	if ((st = read_loop(w)) != PX_OK)
		return st;
	return w->stop ? PX_OK : flush_end(w);
}

enum px_status px_writer_run(struct px_writer_args *a, char *err, size_t errlen)
{
	struct wr w = { .a = a, .err = err, .errlen = errlen, .v_last_pts = INT64_MIN,
			.v_last_seg = -1, .v_done_seg = -1, .a_done_seg = -1, .ppid = getppid() };

	if (a->remux) {
		snprintf(err, errlen, "remux assets are not implemented yet");
		return PX_EINVAL;
	}
	return run(&w, transcode_work);
}

/* ------------------------------------------------------------ remux */

/*
 * A remux copies the source's video and audio packets into MPEG-TS without
 * decoding. It cannot cut at fixed times, only at video keyframes, so a
 * segment is a run of GOPs: a new one starts at the first keyframe at least
 * D after the current one began (a tail shorter than D/4 joins the last).
 * The plan muxes every segment once into a counting buffer, so it knows each
 * segment's exact size and the file's size with no padding; a run (or a
 * restart, which starts one segment early and throws that one away) muxes
 * the same packets with the same fresh muxer and must produce the same
 * number of bytes, which it checks.
 */

/* The segment a packet at video-time ts belongs to: how many segment
 * starts (after the first) are <= ts. */
static uint32_t bound_index(const struct wr *w, int64_t ts)
{
	uint32_t lo = 0, hi = w->nseg - 1; /* bounds[0..nseg-2] */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (w->bounds[mid] <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static enum px_status remux_streams(struct wr *w)
{
	AVStream *vs = w->ic->streams[w->vi];
	if (!(w->vpar = avcodec_parameters_alloc()) ||
	    avcodec_parameters_copy(w->vpar, vs->codecpar) < 0)
		return PX_ENOMEM;
	w->vtb = vs->time_base;
	if (w->ai >= 0) {
		AVStream *as = w->ic->streams[w->ai];
		if (!(w->apar = avcodec_parameters_alloc()) ||
		    avcodec_parameters_copy(w->apar, as->codecpar) < 0)
			return PX_ENOMEM;
		w->atb = as->time_base;
	}
	w->shift_us = -w->t0_us;
	return PX_OK;
}

/* Muxes (or, dry, measures) segments from..nseg-1, starting to read one
 * segment early. */
static enum px_status remux_pass(struct wr *w, uint32_t from)
{
	AVPacket *in = av_packet_alloc();
	enum px_status st = PX_OK;
	int rc;

	w->pkt = av_packet_alloc();
	if (!in || !w->pkt) {
		st = PX_ENOMEM;
		goto out;
	}
	w->first = from;
	w->next_flush = from ? from - 1 : 0;
	w->cur_vseg = -1;
	if (from >= 2) {
		int64_t ts = w->bounds[from - 2]; /* the warm-up segment's keyframe */
		if ((rc = avformat_seek_file(w->ic, w->vi, INT64_MIN, ts, ts, 0)) < 0) {
			st = averr(w, rc, "seek");
			goto out;
		}
	}
	while (!w->stop && st == PX_OK) {
		rc = read_frame(w, in);
		if (rc == AVERROR_EOF)
			break;
		if (rc < 0) {
			st = averr(w, rc, "read");
			break;
		}
		if (in->stream_index == w->vi && in->pts != AV_NOPTS_VALUE) {
			if (in->flags & AV_PKT_FLAG_KEY)
				w->cur_vseg = bound_index(w, in->pts);
			if (w->cur_vseg >= (int64_t)w->next_flush)
				st = queue_packet_in(w, in, 1, (uint32_t)w->cur_vseg);
		} else if (in->stream_index == w->ai && in->pts != AV_NOPTS_VALUE) {
			uint32_t k = bound_index(w, av_rescale_q(in->pts, w->atb, w->vtb));
			if (k >= w->next_flush)
				st = queue_packet_in(w, in, 0, k);
		}
		av_packet_unref(in);
		if (st == PX_OK)
			st = flush_ready(w);
		if (st == PX_OK && !w->dry)
			st = heartbeat(w, 0);
		if (st == PX_OK && w->a->max_speed > 0 && w->cur_vseg >= 0 && !w->dry)
			pace(w);
	}
	if (st == PX_OK && !w->stop) {
		w->v_eof = w->a_eof = 1;
		st = flush_ready(w);
	}
out:
	av_packet_free(&in);
	return st;
}

/* A remux plan's pass 1: where segments start (a video keyframe at least
 * D after the last start), into w->bounds; w->nseg the number of
 * segments. */
static enum px_status remux_bounds(struct wr *w)
{
	const struct px_writer_args *a = w->a;
	AVPacket *in = av_packet_alloc();
	enum px_status st = PX_ENOMEM;
	size_t cap = 0;
	int64_t first = AV_NOPTS_VALUE, last_start = 0, end = AV_NOPTS_VALUE;
	int rc;

	if (!in || (st = open_input(w)) != PX_OK)
		goto out;
	AVStream *vs = w->ic->streams[w->vi];
	const int64_t D = av_rescale_q((int64_t)a->segment_seconds * AV_TIME_BASE, AV_TIME_BASE_Q,
				       vs->time_base);
	while ((rc = read_frame(w, in)) >= 0) {
		if (in->stream_index == w->vi && in->pts != AV_NOPTS_VALUE) {
			int64_t e = in->pts + (in->duration > 0 ? in->duration : 0);
			if (end == AV_NOPTS_VALUE || e > end)
				end = e;
			if ((in->flags & AV_PKT_FLAG_KEY) && first == AV_NOPTS_VALUE) {
				first = last_start = in->pts;
			} else if ((in->flags & AV_PKT_FLAG_KEY) && in->pts - last_start >= D) {
				if (w->nseg + 1 >= cap) {
					cap = cap ? 2 * cap : 256;
					int64_t *b = realloc(w->bounds, cap * sizeof(*b));
					if (!b) {
						st = PX_ENOMEM;
						goto out;
					}
					w->bounds = b;
				}
				w->bounds[w->nseg++] = in->pts; /* nseg counts bounds here */
				last_start = in->pts;
			}
		}
		av_packet_unref(in);
		if (w->nseg + 1 >= PX_SEG_MAX_COUNT) {
			snprintf(w->err, w->errlen, "%s: too many segments", input_name(a));
			st = PX_EINVAL;
			goto out;
		}
	}
	if (rc != AVERROR_EOF) {
		st = averr(w, rc, "read");
		goto out;
	}
	if (first == AV_NOPTS_VALUE) {
		snprintf(w->err, w->errlen, "%s: no video keyframe", input_name(a));
		st = PX_EINVAL;
		goto out;
	}
	if (w->nseg && end - w->bounds[w->nseg - 1] < D / 4)
		w->nseg--; /* a short tail joins the last segment */
	w->nseg++;     /* from here on, the number of segments */
	st = !w->bounds && !(w->bounds = malloc(sizeof(*w->bounds))) ? PX_ENOMEM : PX_OK;
out:
	av_packet_free(&in);
	return st;
}

/* The plan's JSON from a dry run's sizes (w->sizes) and bounds. */
static enum px_status remux_plan_json(struct wr *w, char **json)
{
	json_t *root = json_object(), *starts = json_array(), *sizes = json_array();
	enum px_status st = PX_ENOMEM;
	int64_t total = 0;
	uint32_t nseg = w->nseg;

	if (!root || !starts || !sizes)
		goto out;
	for (uint32_t k = 0; k < nseg; k++) {
		if (w->sizes[k] <= 0) {
			snprintf(w->err, w->errlen, "%s: segment %u came out empty",
				 input_name(w->a), k);
			st = PX_EINVAL;
			goto out;
		}
		total += w->sizes[k];
		if (json_array_append_new(sizes, json_integer(w->sizes[k])) ||
		    (k + 1 < nseg && json_array_append_new(starts, json_integer(w->bounds[k]))))
			goto out;
	}
	int64_t dur = duration_us(w);
	if (json_object_set_new(root, "remux", json_true()) ||
	    json_object_set_new(root, "duration_us", json_integer(dur)) ||
	    json_object_set_new(root, "segments", json_integer(nseg)) ||
	    json_object_set_new(root, "segment_bytes", json_integer(0)) ||
	    json_object_set_new(root, "size", json_integer(total)) ||
	    json_object_set_new(root, "tb_num", json_integer(w->vtb.num)) ||
	    json_object_set_new(root, "tb_den", json_integer(w->vtb.den)) ||
	    json_object_set(root, "starts", starts) || json_object_set(root, "sizes", sizes))
		goto out;
	*json = json_dumps(root, JSON_COMPACT);
	st = *json ? PX_OK : PX_ENOMEM;
out:
	json_decref(starts);
	json_decref(sizes);
	json_decref(root);
	return st;
}

enum px_status px_writer_remux_plan(const struct px_writer_args *a, char **json, char *err,
				    size_t errlen)
{
	struct px_writer_args pa = *a;
	struct wr w = { .a = &pa, .err = err, .errlen = errlen, .remux = 1, .dry = 1,
			.v_done_seg = -1, .a_done_seg = -1 };
	enum px_status st;

	*json = NULL;
	/* pass 1: where segments start */
	if ((st = remux_bounds(&w)) != PX_OK)
		goto out;
	/* pass 2: the exact size of every segment */
	int64_t *bounds = w.bounds;
	uint32_t nseg = w.nseg;
	w.bounds = NULL;
	close_all(&w);
	memset(&w, 0, sizeof(w));
	w = (struct wr){ .a = &pa, .err = err, .errlen = errlen, .remux = 1, .dry = 1,
			 .v_done_seg = -1, .a_done_seg = -1, .bounds = bounds, .nseg = nseg };
	pa.plan.nseg = nseg;
	pa.plan.seg_bytes = 0;
	st = PX_ENOMEM;
	if (!(w.sizes = calloc(nseg, sizeof(*w.sizes))) ||
	    (st = open_input(&w)) != PX_OK || (st = remux_streams(&w)) != PX_OK ||
	    (st = remux_pass(&w, 0)) != PX_OK)
		goto out;
	st = remux_plan_json(&w, json);
out:
	close_all(&w);
	return st;
}

/* Reads the starts and sizes of a remux from the daemon's plan.json. */
static enum px_status load_remux_plan(struct wr *w)
{
	char path[4200];
	json_error_t je;
	enum px_status st = PX_EINVAL;
	snprintf(path, sizeof(path), "%s/plan.json", w->a->work_dir);
	json_t *root = json_load_file(path, 0, &je);
	json_t *starts = json_object_get(root, "starts"), *sizes = json_object_get(root, "sizes");
	AVStream *vs = w->ic->streams[w->vi];
	uint32_t n = w->a->plan.nseg;
	if (!json_is_array(starts) || !json_is_array(sizes) || json_array_size(sizes) != n ||
	    json_array_size(starts) + 1 != n ||
	    json_integer_value(json_object_get(root, "tb_num")) != vs->time_base.num ||
	    json_integer_value(json_object_get(root, "tb_den")) != vs->time_base.den) {
		snprintf(w->err, w->errlen, "%s: not a remux plan of %u segments for this source",
			 path, n);
		goto out;
	}
	w->nseg = n;
	w->bounds = calloc(n, sizeof(*w->bounds));
	w->sizes = calloc(n, sizeof(*w->sizes));
	if (!w->bounds || !w->sizes) {
		st = PX_ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < n; k++) {
		w->sizes[k] = json_integer_value(json_array_get(sizes, k));
		if (k + 1 < n)
			w->bounds[k] = json_integer_value(json_array_get(starts, k));
		if (w->sizes[k] <= 0 || (k && k + 1 < n && w->bounds[k] <= w->bounds[k - 1])) {
			snprintf(w->err, w->errlen, "%s: segment %u: bad start or size", path, k);
			goto out;
		}
	}
	st = PX_OK;
out:
	json_decref(root);
	return st;
}

/* A remux's work: its plan and streams, then one pass from the warm-up
 * segment on. */
static enum px_status remux_work(struct wr *w)
{
	enum px_status st;

	if ((st = load_remux_plan(w)) != PX_OK || (st = remux_streams(w)) != PX_OK)
		return st;
	w->last_hb = w->start_ms = px_now_ms();
	px_info("writer", "remux segments %u.. of %u from %s", w->a->from, w->a->plan.nseg,
		input_name(w->a));
	return remux_pass(w, w->a->from);
}

enum px_status px_writer_remux_run(struct px_writer_args *a, char *err, size_t errlen)
{
	struct wr w = { .a = a, .err = err, .errlen = errlen, .remux = 1,
			.v_done_seg = -1, .a_done_seg = -1, .ppid = getppid() };

	return run(&w, remux_work);
}

/* ------------------------------------------------------------ probes */

/* Whether the probe's file is at path (its NAME.probe.tmp). Something
 * else there (a link) was put by someone who can write work_dir: left
 * alone (not listed: the main writer makes that segment), logged, and
 * told to the daemon ("link PATH" on stdout), which counts it (status,
 * metrics). */
static int probe_tmp_there(const char *path)
{
	struct stat sb;
	if (lstat(path, &sb) != 0)
		return 0;
	if (S_ISREG(sb.st_mode))
		return 1;
	px_warn("writer", "%s is not the file seamfs made (a link?): left alone", path);
	printf("link %s\n", path);
	fflush(stdout);
	return 0;
}

/* px_writer_publish in cluster mode: each NAME.probe.tmp linked to its
 * generation's name (one the main writer made first stays its), then all
 * of them listed in one compare-and-set that checks the generation. */
static enum px_status publish_store(struct wr *w, uint32_t from)
{
	struct px_writer_args *a = w->a;
	uint32_t ks[PX_WRITER_PROBE_MAX];
	int64_t sizes[PX_WRITER_PROBE_MAX], mts[PX_WRITER_PROBE_MAX];
	char paths[PX_WRITER_PROBE_MAX][4200];
	size_t n = 0, listed_n = 0;
	enum px_status st;
	int tries = 0;

	w->ppid = getppid();
	for (uint32_t k = from; k <= a->probe_until && k < a->plan.nseg && n < PX_WRITER_PROBE_MAX;
	     k++) {
		char name[64], tmp[4300];
		struct stat sb;
		px_playlist_seg_file(k, a->lease.gen, name, sizeof(name));
		snprintf(paths[n], sizeof(paths[n]), "%s/%s", a->work_dir, name);
		snprintf(tmp, sizeof(tmp), "%s%s", paths[n], PX_WRITER_PROBE_TMP);
		if (!probe_tmp_there(tmp))
			continue; /* skipped: listed when the probe came to it */
		int rc = commit_name(tmp, paths[n]);
		int e = errno;
		if (rc && e == EEXIST)
			continue; /* the main writer made it */
		if (rc || stat(paths[n], &sb)) {
			snprintf(w->err, w->errlen, "%s: %s", paths[n], strerror(rc ? e : errno));
			st = PX_EIO;
			goto out;
		}
		ks[n] = k;
		sizes[n] = sb.st_size;
		mts[n] = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
		n++;
	}
	if (n && sync_dir(a->work_dir)) {
		snprintf(w->err, w->errlen, "%s: %s", a->work_dir, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	for (;;) {
		if ((st = store_load(w, 1)) != PX_OK) {
			if (st == PX_EINVAL || st == PX_ENOMEM ||
			    (st = store_wait(w, st, &tries)) != PX_OK)
				goto out;
			continue;
		}
		listed_n = 0;
		for (size_t i = 0; i < n; i++) {
			if (px_playlist_find(&w->pl, ks[i]) >= 0)
				continue;
			if ((st = px_playlist_add_closed_gen(&w->pl, ks[i], sizes[i], mts[i],
							     a->lease.gen)) != PX_OK)
				goto out;
			listed_n++;
		}
		if (!listed_n)
			break;
		if ((st = store_save(w)) == PX_OK)
			break;
		if (st == PX_EFENCED) {
			for (size_t i = 0; i < n; i++)
				unlink(paths[i]);
			snprintf(w->err, w->errlen, "lease of %s (generation %llu) was taken over; not "
				 "listing segments %u..%u", a->lease.key,
				 (unsigned long long)a->lease.gen, from, a->probe_until);
			goto out;
		}
		if (st != PX_EEXIST && (st = store_wait(w, st, &tries)) != PX_OK)
			goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (px_playlist_find(&w->pl, ks[i]) >= 0)
			printf("committed %u\n", ks[i]);
	printf("done\n");
	fflush(stdout);
	st = PX_OK;
out:
	px_playlist_release(&w->pl);
	free(w->pl_known);
	w->pl_known = NULL;
	return st;
}

enum px_status px_writer_publish(struct px_writer_args *a, uint32_t from, char *err,
				 size_t errlen)
{
	struct wr w = { .a = a, .err = err, .errlen = errlen };
	uint32_t listed_now[PX_WRITER_PROBE_MAX];
	size_t n = 0;
	enum px_status st;
	int lk;

	/* a probe whose lease was taken over lists nothing (fencing) */
	if (a->leases && px_lease_heartbeat(a->leases, &a->lease) == PX_EFENCED) {
		snprintf(err, errlen, "lease of %s (generation %llu) was taken over; not listing "
			 "segments %u..%u", a->lease.key, (unsigned long long)a->lease.gen, from,
			 a->probe_until);
		return PX_EFENCED;
	}
	if (a->store)
		return publish_store(&w, from);
	lk = px_playlist_lock(a->work_dir);
	if ((st = load_playlist(&w)) != PX_OK)
		goto out;
	for (uint32_t k = from; k <= a->probe_until && k < a->plan.nseg; k++) {
		char name[64], path[4200], tmp[4300];
		struct stat sb;
		px_playlist_seg_name(k, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", a->work_dir, name);
		snprintf(tmp, sizeof(tmp), "%s%s", path, PX_WRITER_PROBE_TMP);
		if (!probe_tmp_there(tmp))
			continue; /* skipped: listed when the probe came to it */
		if (px_playlist_find(&w.pl, k) >= 0) {
			unlink(tmp); /* the main writer listed it meanwhile */
			continue;
		}
		if (rename(tmp, path) || stat(path, &sb)) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			st = PX_EIO;
			goto out;
		}
		int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
		if ((st = px_playlist_add_closed(&w.pl, k, sb.st_size, mt)) != PX_OK) {
			snprintf(err, errlen, "segment %u cannot be listed", k);
			goto out;
		}
		if (n < PX_WRITER_PROBE_MAX)
			listed_now[n++] = k;
	}
	if (n && sync_dir(a->work_dir)) {
		snprintf(err, errlen, "%s: %s", a->work_dir, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	if (n && (st = px_playlist_save(&w.pl, w.pl_path, err, errlen)) != PX_OK)
		goto out;
	px_playlist_unlock(lk);
	lk = -1;
	for (size_t i = 0; i < n; i++)
		printf("committed %u\n", listed_now[i]);
	printf("done\n");
	fflush(stdout);
out:
	px_playlist_unlock(lk);
	px_playlist_release(&w.pl);
	return st;
}

void px_writer_versions(FILE *out)
{
	static const struct {
		const char *name;
		unsigned (*version)(void);
	} libs[] = {
		{ "libavformat", avformat_version }, { "libavcodec", avcodec_version },
		{ "libavutil", avutil_version }, { "libswscale", swscale_version },
		{ "libswresample", swresample_version },
	};
	fprintf(out, "FFmpeg %s\n", av_version_info());
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		unsigned v = libs[i].version();
		fprintf(out, "%s %u.%u.%u\n", libs[i].name, AV_VERSION_MAJOR(v),
			AV_VERSION_MINOR(v), AV_VERSION_MICRO(v));
	}
}
