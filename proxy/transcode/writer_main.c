/*
 * writer_main.c - the seamfs-writer command line.
 *
 *   seamfs-writer plan --input SRC [profile]
 *       prints {"duration_us":..,"segments":N,"segment_bytes":S,"size":..}
 *   seamfs-writer run --input SRC [profile] --work-dir DIR --from N
 *       --segments N --segment-bytes S [--lease-dir DIR --lease-key KEY
 *       --lease-gen G --heartbeat-ms MS] [--max-speed X] [--probe-until K]
 *       [--store URL [--store-password-file PATH] [--cluster NAME]
 *        --lease-key KEY --lease-gen G --heartbeat-ms MS]
 *       prints "committed K" per segment and "done" at a clean stop;
 *       with --probe-until, a probe run: segments N..K only, listed
 *       together at the end (docs/transcode.md "Seeks")
 * profile: --height H --video-bitrate B --audio-bitrate B
 *          --segment-seconds D [--header "Name: value"]... [--remux]
 *          [--io-timeout-ms MS] [--input-fd FD]
 *
 * SRC is a URL or a local path; "-" reads it from stdin (first line),
 * with the headers on the lines after it: a URL's credentials and a
 * provider's headers must not stand on a command line, which every local
 * user can read. With --input-fd, the daemon feeds the input over that
 * socket from its own read path (feed.h; it does so once its mount serves
 * reads, so that it balances and cuts over the writer's input, without
 * the writer keeping the mount busy), and SRC only names it.
 * --io-timeout-ms bounds a network input that stops sending, or the
 * feed's answer (default 30000).
 *
 * --store: cluster mode (docs/cluster.md): the lease and the playlist are
 * in that Redis store, every listing checked there against generation G,
 * and segment files are named with G.
 *
 * Exit: 0 clean stop, 1 failure (one "seamfs-writer: ..." line on stderr),
 * 2 bad command line, 3 lease taken over, 4 segment does not fit S.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "redact.h"
#include "kvstore.h"
#include "tcstore.h"
#include "writer.h"

enum { O_INPUT = 1, O_HEADER, O_HEIGHT, O_VB, O_AB, O_SEC, O_REMUX, O_WORK, O_FROM,
       O_NSEG, O_SBYTES, O_LDIR, O_LKEY, O_LGEN, O_HB, O_LOG, O_SPEED, O_IOTIMEOUT,
       O_PROBE, O_STORE, O_STORE_PW, O_CLUSTER, O_INPUT_FD };

static const struct option opts[] = {
	{ "input", required_argument, NULL, O_INPUT },
	{ "header", required_argument, NULL, O_HEADER },
	{ "height", required_argument, NULL, O_HEIGHT },
	{ "video-bitrate", required_argument, NULL, O_VB },
	{ "audio-bitrate", required_argument, NULL, O_AB },
	{ "segment-seconds", required_argument, NULL, O_SEC },
	{ "remux", no_argument, NULL, O_REMUX },
	{ "work-dir", required_argument, NULL, O_WORK },
	{ "from", required_argument, NULL, O_FROM },
	{ "segments", required_argument, NULL, O_NSEG },
	{ "segment-bytes", required_argument, NULL, O_SBYTES },
	{ "lease-dir", required_argument, NULL, O_LDIR },
	{ "lease-key", required_argument, NULL, O_LKEY },
	{ "lease-gen", required_argument, NULL, O_LGEN },
	{ "heartbeat-ms", required_argument, NULL, O_HB },
	{ "log-level", required_argument, NULL, O_LOG },
	{ "max-speed", required_argument, NULL, O_SPEED },
	{ "io-timeout-ms", required_argument, NULL, O_IOTIMEOUT },
	{ "probe-until", required_argument, NULL, O_PROBE },
	{ "store", required_argument, NULL, O_STORE },
	{ "store-password-file", required_argument, NULL, O_STORE_PW },
	{ "cluster", required_argument, NULL, O_CLUSTER },
	{ "input-fd", required_argument, NULL, O_INPUT_FD },
	{ NULL, 0, NULL, 0 }
};

static int num(const char *name, const char *v, long long min, long long max, long long *out)
{
	char *end;
	long long n = strtoll(v, &end, 10);
	if (end == v || *end || n < min || n > max) {
		fprintf(stderr, "seamfs-writer: --%s: bad value '%s' (expected %lld to %lld)\n",
			name, v, min, max);
		return -1;
	}
	*out = n;
	return 0;
}

#define STDIN_MAX 65536
#define STDIN_HEADERS 64

/* "--input -": the input on stdin's first line, headers on the lines after
 * it (added to a's, whose array has room for STDIN_HEADERS more). *text
 * keeps the bytes the strings point into. NULL when there is no input. */
static const char *input_from_stdin(struct px_writer_args *a, char **text)
{
	char *buf = malloc(STDIN_MAX + 1);
	size_t got = 0;
	ssize_t r;
	if (!buf)
		return NULL;
	while (got < STDIN_MAX && (r = read(STDIN_FILENO, buf + got, STDIN_MAX - got)) != 0) {
		if (r < 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	*text = buf;
	char *line = buf, *input = NULL;
	for (int added = 0; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!input)
			input = line;
		else if (*line && added++ < STDIN_HEADERS)
			a->headers[a->nheaders++] = line;
		line = nl ? nl + 1 : NULL;
	}
	return input && *input ? input : NULL;
}

int main(int argc, char **argv)
{
	struct px_writer_args a = { .segment_seconds = 2, .video_bps = 1000000,
				    .audio_bps = 128000, .heartbeat_ms = 10000 };
	const char *ldir = NULL, *lkey = NULL, *surl = NULL, *spw = NULL, *scluster = NULL;
	struct px_store *store = NULL;
	long long v, gen = 0, nseg = 0, sbytes = 0;
	const char **hdrs = calloc((size_t)argc + STDIN_HEADERS + 1, sizeof(*hdrs));
	char *stdin_text = NULL;
	enum px_log_level lvl = PX_LOG_INFO;
	char err[2048] = "";
	int rc = 2, c;
	enum px_status st;

	if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
		printf("seamfs-writer %s\n", SEAMFS_VERSION);
		px_writer_versions(stdout);
		rc = 0;
		goto out;
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: seamfs-writer plan|run --input SRC [options]\n"
		       "       seamfs-writer --version\n"
		       "The transcoding writer that seamfs starts; see seamfs-writer(1).\n");
		rc = 0;
		goto out;
	}
	if (!hdrs || argc < 2 || (strcmp(argv[1], "plan") && strcmp(argv[1], "run"))) {
		fprintf(stderr, "usage: seamfs-writer plan|run --input SRC [options]\n");
		goto out;
	}
	int run = strcmp(argv[1], "run") == 0;
	optind = 2;
	a.headers = hdrs;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_INPUT: a.input = optarg; break;
		case O_HEADER: hdrs[a.nheaders++] = optarg; break;
		case O_HEIGHT:
			if (num("height", optarg, 0, 4320, &v)) goto out;
			a.height = (int)v;
			break;
		case O_VB:
			if (num("video-bitrate", optarg, 1, 1000000000, &v)) goto out;
			a.video_bps = v;
			break;
		case O_AB:
			if (num("audio-bitrate", optarg, 1, 100000000, &v)) goto out;
			a.audio_bps = v;
			break;
		case O_SEC:
			if (num("segment-seconds", optarg, 2, 6, &v)) goto out;
			a.segment_seconds = (int)v;
			break;
		case O_REMUX: a.remux = 1; break;
		case O_WORK: a.work_dir = optarg; break;
		case O_FROM:
			if (num("from", optarg, 0, PX_SEG_MAX_COUNT, &v)) goto out;
			a.from = (uint32_t)v;
			break;
		case O_NSEG:
			if (num("segments", optarg, 1, PX_SEG_MAX_COUNT, &nseg)) goto out;
			break;
		case O_SBYTES:
			if (num("segment-bytes", optarg, 0, 1LL << 40, &sbytes)) goto out;
			break;
		case O_LDIR: ldir = optarg; break;
		case O_STORE: surl = optarg; break;
		case O_STORE_PW: spw = optarg; break;
		case O_CLUSTER: scluster = optarg; break;
		case O_LKEY: lkey = optarg; break;
		case O_LGEN:
			if (num("lease-gen", optarg, 1, 1LL << 62, &gen)) goto out;
			break;
		case O_HB:
			if (num("heartbeat-ms", optarg, 10, 3600000, &v)) goto out;
			a.heartbeat_ms = v;
			break;
		case O_IOTIMEOUT:
			if (num("io-timeout-ms", optarg, 100, 3600000, &v)) goto out;
			a.io_timeout_ms = v;
			break;
		case O_INPUT_FD:
			if (num("input-fd", optarg, 3, 1023, &v)) goto out;
			a.input_fd = (int)v;
			break;
		case O_PROBE:
			if (num("probe-until", optarg, 0, PX_SEG_MAX_COUNT, &v)) goto out;
			a.probe = 1;
			a.probe_until = (uint32_t)v;
			break;
		case O_SPEED: {
			char *end;
			a.max_speed = strtod(optarg, &end);
			if (end == optarg || *end || !(a.max_speed >= 0 && a.max_speed <= 1000)) {
				fprintf(stderr, "seamfs-writer: --max-speed: bad value '%s'\n", optarg);
				goto out;
			}
			break;
		}
		case O_LOG:
			if (px_log_level_parse(optarg, &lvl) != PX_OK) {
				fprintf(stderr, "seamfs-writer: --log-level: bad value '%s'\n", optarg);
				goto out;
			}
			break;
		default:
			goto out;
		}
	}
	if (!a.input || optind != argc) {
		fprintf(stderr, "seamfs-writer: %s\n", !a.input ? "--input is required"
								 : "unexpected argument");
		goto out;
	}
	if (strcmp(a.input, "-") == 0 && !(a.input = input_from_stdin(&a, &stdin_text))) {
		fprintf(stderr, "seamfs-writer: --input -: no input on stdin\n");
		goto out;
	}
	px_log_setup(lvl, 0);
	char shown[1024]; /* messages reach the daemon's log: no credentials */
	px_redact_url(a.input, shown, sizeof(shown));
	a.shown = shown;
	rc = 1;
	if (a.input_fd && px_writer_feed_hello(&a, err, sizeof(err)) != PX_OK) {
		fprintf(stderr, "seamfs-writer: %s\n", err);
		goto out;
	}
	if (!run) {
		struct px_seg_plan p;
		if (a.remux) {
			char *json = NULL;
			if ((st = px_writer_remux_plan(&a, &json, err, sizeof(err))) != PX_OK) {
				fprintf(stderr, "seamfs-writer: %s\n", err);
				goto out;
			}
			printf("%s\n", json);
			free(json);
			rc = 0;
			goto out;
		}
		if ((st = px_writer_plan(&a, &p, err, sizeof(err))) != PX_OK) {
			fprintf(stderr, "seamfs-writer: %s\n", err);
			goto out;
		}
		printf("{\"duration_us\": %lld, \"segments\": %u, \"segment_bytes\": %lld, "
		       "\"size\": %lld}\n", (long long)p.duration_us, p.nseg,
		       (long long)p.seg_bytes, (long long)p.size);
		rc = 0;
		goto out;
	}
	if (!a.work_dir || !nseg || (!sbytes && !a.remux) || sbytes % PX_TS_PACKET) {
		fprintf(stderr, "seamfs-writer: run needs --work-dir, --segments and "
			"--segment-bytes (a multiple of 188)\n");
		rc = 2;
		goto out;
	}
	if (a.probe && (a.probe_until < a.from ||
			a.probe_until - a.from >= PX_WRITER_PROBE_MAX)) {
		fprintf(stderr, "seamfs-writer: --probe-until %u: must be --from to --from + %d\n",
			a.probe_until, PX_WRITER_PROBE_MAX - 1);
		rc = 2;
		goto out;
	}
	a.plan.nseg = (uint32_t)nseg;
	a.plan.seg_bytes = sbytes;
	a.plan.seg_us = (int64_t)a.segment_seconds * 1000000;
	a.plan.size = nseg * sbytes;
	if (surl) {
		if (!lkey || !gen || ldir) {
			fprintf(stderr, "seamfs-writer: --store needs --lease-key and --lease-gen "
				"(and no --lease-dir)\n");
			rc = 2;
			goto out;
		}
		if (px_store_new(surl, spw, scluster, &store, err, sizeof(err)) != PX_OK ||
		    px_store_connect(store, err, sizeof(err)) != PX_OK) {
			fprintf(stderr, "seamfs-writer: %s\n", err);
			rc = 1;
			goto out;
		}
		a.store = store;
		if (px_lease_redis_new(store, &a.leases) != PX_OK ||
		    px_lease_get(a.leases, lkey, &a.lease) != PX_OK ||
		    a.lease.gen != (uint64_t)gen || a.lease.released) {
			fprintf(stderr, "seamfs-writer: lease %s generation %lld is not held\n",
				lkey, gen);
			rc = 3;
			goto out;
		}
	} else if (ldir) {
		if (!lkey || !gen) {
			fprintf(stderr, "seamfs-writer: --lease-dir needs --lease-key and "
				"--lease-gen\n");
			rc = 2;
			goto out;
		}
		if (px_lease_files_new(ldir, NULL, NULL, &a.leases) != PX_OK ||
		    px_lease_get(a.leases, lkey, &a.lease) != PX_OK ||
		    a.lease.gen != (uint64_t)gen || a.lease.released) {
			fprintf(stderr, "seamfs-writer: lease %s generation %lld is not held\n",
				lkey, gen);
			rc = 3;
			goto out;
		}
	}
	a.lease.writer_pid = getpid();
	/* a segment that does not fit S is written again, and what follows it,
	 * at a lower video bitrate: segments are independent, so only the
	 * overflowing one is lost (TRANSCODE-NOTES) */
	uint32_t first = a.from;
	for (int tries = 0;; tries++) {
		st = a.remux ? px_writer_remux_run(&a, err, sizeof(err))
			     : px_writer_run(&a, err, sizeof(err));
		if (st != PX_ESIZE || tries == 3 || a.remux)
			break;
		fprintf(stderr, "seamfs-writer: %s; writing again from segment %u at %lld bit/s\n",
			err, a.overflow_seg, (long long)(a.video_bps * 3 / 4));
		a.from = a.overflow_seg;
		a.video_bps = a.video_bps * 3 / 4;
	}
	if (st == PX_OK && a.probe)
		st = px_writer_publish(&a, first, err, sizeof(err));
	if (st != PX_OK) {
		fprintf(stderr, "seamfs-writer: %s\n", err);
		rc = st == PX_EAGAIN ? 3 : st == PX_ESIZE ? 4 : 1;
		goto out;
	}
	rc = 0;
out:
	px_lease_store_free(a.leases);
	px_store_free(store);
	free(hdrs);
	free(stdin_text);
	return rc;
}
