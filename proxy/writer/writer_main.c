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

/* What the command line gives besides the writer's arguments. */
struct cli {
	const char *ldir, *lkey, *surl, *spw, *scluster;
	long long gen, nseg, sbytes;
	enum px_log_level lvl;
};

/* One option c (getopt_long's) with optarg into a and o: 0, or -1 after
 * saying why on stderr. */
static int one_option(int c, struct px_writer_args *a, struct cli *o)
{
	long long v;

	switch (c) {
	case O_INPUT: a->input = optarg; break;
	case O_HEADER: a->headers[a->nheaders++] = optarg; break;
	case O_HEIGHT:
		if (num("height", optarg, 0, 4320, &v)) return -1;
		a->height = (int)v;
		break;
	case O_VB:
		if (num("video-bitrate", optarg, 1, 1000000000, &v)) return -1;
		a->video_bps = v;
		break;
	case O_AB:
		if (num("audio-bitrate", optarg, 1, 100000000, &v)) return -1;
		a->audio_bps = v;
		break;
	case O_SEC:
		if (num("segment-seconds", optarg, 1, 6, &v)) return -1;
		a->segment_seconds = (int)v;
		break;
	case O_REMUX: a->remux = 1; break;
	case O_WORK: a->work_dir = optarg; break;
	case O_FROM:
		if (num("from", optarg, 0, PX_SEG_MAX_COUNT, &v)) return -1;
		a->from = (uint32_t)v;
		break;
	case O_NSEG:
		if (num("segments", optarg, 1, PX_SEG_MAX_COUNT, &o->nseg)) return -1;
		break;
	case O_SBYTES:
		if (num("segment-bytes", optarg, 0, 1LL << 40, &o->sbytes)) return -1;
		break;
	case O_LDIR: o->ldir = optarg; break;
	case O_STORE: o->surl = optarg; break;
	case O_STORE_PW: o->spw = optarg; break;
	case O_CLUSTER: o->scluster = optarg; break;
	case O_LKEY: o->lkey = optarg; break;
	case O_LGEN:
		if (num("lease-gen", optarg, 1, 1LL << 62, &o->gen)) return -1;
		break;
	case O_HB:
		if (num("heartbeat-ms", optarg, 10, 3600000, &v)) return -1;
		a->heartbeat_ms = v;
		break;
	case O_IOTIMEOUT:
		if (num("io-timeout-ms", optarg, 100, 3600000, &v)) return -1;
		a->io_timeout_ms = v;
		break;
	case O_INPUT_FD:
		if (num("input-fd", optarg, 3, 1023, &v)) return -1;
		a->input_fd = (int)v;
		break;
	case O_PROBE:
		if (num("probe-until", optarg, 0, PX_SEG_MAX_COUNT, &v)) return -1;
		a->probe = 1;
		a->probe_until = (uint32_t)v;
		break;
	case O_SPEED: {
		char *end;
		a->max_speed = strtod(optarg, &end);
		if (end == optarg || *end || !(a->max_speed >= 0 && a->max_speed <= 1000)) {
			fprintf(stderr, "seamfs-writer: --max-speed: bad value '%s'\n", optarg);
			return -1;
		}
		break;
	}
	case O_LOG:
		if (px_log_level_parse(optarg, &o->lvl) != PX_OK) {
			fprintf(stderr, "seamfs-writer: --log-level: bad value '%s'\n", optarg);
			return -1;
		}
		break;
	default:
		return -1;
	}
	return 0;
}

/* `seamfs-writer plan`: the plan's JSON on stdout. The exit code. */
static int plan_main(struct px_writer_args *a, char *err, size_t errlen)
{
	struct px_seg_plan p;
	if (a->remux) {
		char *json = NULL;
		if (px_writer_remux_plan(a, &json, err, errlen) != PX_OK) {
			fprintf(stderr, "seamfs-writer: %s\n", err);
			return 1;
		}
		printf("%s\n", json);
		free(json);
		return 0;
	}
	if (px_writer_plan(a, &p, err, errlen) != PX_OK) {
		fprintf(stderr, "seamfs-writer: %s\n", err);
		return 1;
	}
	printf("{\"duration_us\": %lld, \"segments\": %u, \"segment_bytes\": %lld, "
	       "\"size\": %lld}\n", (long long)p.duration_us, p.nseg,
	       (long long)p.seg_bytes, (long long)p.size);
	return 0;
}

/* The lease a run works under (--store or --lease-dir, else none): the
 * exit code when it is not to be had (2: bad options, 1: no store, 3: the
 * lease is not held), 0 when held. *store is the store connected. */
static int open_lease(struct px_writer_args *a, const struct cli *o, struct px_store **store,
		      char *err, size_t errlen)
{
	enum px_status st;
	if (o->surl) {
		if (!o->lkey || !o->gen || o->ldir) {
			fprintf(stderr, "seamfs-writer: --store needs --lease-key and --lease-gen "
				"(and no --lease-dir)\n");
			return 2;
		}
		if (px_store_new(o->surl, o->spw, o->scluster, store, err, errlen) != PX_OK ||
		    px_store_connect(*store, err, errlen) != PX_OK) {
			fprintf(stderr, "seamfs-writer: %s\n", err);
			return 1;
		}
		a->store = *store;
		st = px_lease_redis_new(*store, &a->leases);
	} else if (o->ldir) {
		if (!o->lkey || !o->gen) {
			fprintf(stderr, "seamfs-writer: --lease-dir needs --lease-key and "
				"--lease-gen\n");
			return 2;
		}
		st = px_lease_files_new(o->ldir, NULL, NULL, &a->leases);
	} else {
		return 0;
	}
	if (st != PX_OK || px_lease_get(a->leases, o->lkey, &a->lease) != PX_OK ||
	    a->lease.gen != (uint64_t)o->gen || a->lease.released) {
		fprintf(stderr, "seamfs-writer: lease %s generation %lld is not held\n",
			o->lkey, o->gen);
		return 3;
	}
	return 0;
}

/* `seamfs-writer run` once its lease is held: the exit code (0, 1: its
 * input failed, 3: fenced, 4: a segment did not fit S). */
static int run_main(struct px_writer_args *a, char *err, size_t errlen)
{
	enum px_status st;
	a->lease.writer_pid = getpid();
	/* a segment that does not fit S is written again, and what follows it,
	 * at a lower video bitrate: segments are independent, so only the
	 * overflowing one is lost (TRANSCODE-NOTES) */
	uint32_t first = a->from;
	for (int tries = 0;; tries++) {
		st = a->remux ? px_writer_remux_run(a, err, errlen)
			      : px_writer_run(a, err, errlen);
		if (st != PX_ESIZE || tries == 3 || a->remux)
			break;
		fprintf(stderr, "seamfs-writer: %s; writing again from segment %u at %lld bit/s\n",
			err, a->overflow_seg, (long long)(a->video_bps * 3 / 4));
		a->from = a->overflow_seg;
		a->video_bps = a->video_bps * 3 / 4;
	}
	if (st == PX_OK && a->probe)
		st = px_writer_publish(a, first, err, errlen);
	if (st != PX_OK) {
		fprintf(stderr, "seamfs-writer: %s\n", err);
		return st == PX_EFENCED ? 3 : st == PX_ESIZE ? 4 : 1;
	}
	return 0;
}

/* The checks of a run's options: 0, or 2 after saying why. */
static int run_options(const struct px_writer_args *a, const struct cli *o)
{
	if (!a->work_dir || !o->nseg || (!o->sbytes && !a->remux) || o->sbytes % PX_TS_PACKET) {
		fprintf(stderr, "seamfs-writer: run needs --work-dir, --segments and "
			"--segment-bytes (a multiple of 188)\n");
		return 2;
	}
	if (a->probe && (a->probe_until < a->from ||
			 a->probe_until - a->from >= PX_WRITER_PROBE_MAX)) {
		fprintf(stderr, "seamfs-writer: --probe-until %u: must be --from to --from + %d\n",
			a->probe_until, PX_WRITER_PROBE_MAX - 1);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct px_writer_args a = { .segment_seconds = 1, .video_bps = 1000000,
				    .audio_bps = 128000, .heartbeat_ms = 10000 };
	struct cli o = { .lvl = PX_LOG_INFO };
	struct px_store *store = NULL;
	const char **hdrs = calloc((size_t)argc + STDIN_HEADERS + 1, sizeof(*hdrs));
	char *stdin_text = NULL;
	char err[2048] = "";
	int rc = 2, c;

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
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
		if (one_option(c, &a, &o))
			goto out;
	if (!a.input || optind != argc) {
		fprintf(stderr, "seamfs-writer: %s\n", !a.input ? "--input is required"
								 : "unexpected argument");
		goto out;
	}
	if (strcmp(a.input, "-") == 0 && !(a.input = input_from_stdin(&a, &stdin_text))) {
		fprintf(stderr, "seamfs-writer: --input -: no input on stdin\n");
		goto out;
	}
	px_log_setup(o.lvl, 0);
	char shown[1024]; /* messages reach the daemon's log: no credentials */
	px_redact_url(a.input, shown, sizeof(shown));
	a.shown = shown;
	rc = 1;
	if (a.input_fd && px_writer_feed_hello(&a, err, sizeof(err)) != PX_OK) {
		fprintf(stderr, "seamfs-writer: %s\n", err);
		goto out;
	}
	if (!run) {
		rc = plan_main(&a, err, sizeof(err));
		goto out;
	}
	if ((rc = run_options(&a, &o)) != 0)
		goto out;
	a.plan.nseg = (uint32_t)o.nseg;
	a.plan.seg_bytes = o.sbytes;
	a.plan.seg_us = (int64_t)a.segment_seconds * 1000000;
	a.plan.size = o.nseg * o.sbytes;
	if ((rc = open_lease(&a, &o, &store, err, sizeof(err))) == 0)
		rc = run_main(&a, err, sizeof(err));
out:
	px_lease_store_free(a.leases);
	px_store_free(store);
	free(hdrs);
	free(stdin_text);
	return rc;
}
