/*
 * verify.c - `seamfs verify CATALOG [ASSET-ID...]`: checks every source of
 * the named assets (all plain assets when none is named) against the
 * asset's reference, with the verifier's rules: the content-length gate,
 * then the sampled SHA-256 sweep; --full also streams each source whole
 * and compares its SHA-256 with the catalog's "sha256" or the majority's.
 *
 * The reference is what the sources' own bytes back, never the first
 * source that happened to read in full (a corrupt first source would then
 * judge the good ones): with --full and the catalog's "sha256", a source
 * whose whole file has it; else what a strict majority of the sources that
 * answered with the asset's size (and at least two) agree on, by whole-file
 * SHA-256 with --full, by sampled fingerprint without. The minority is the
 * mismatch. With no majority the sources are "undecided" and nothing is
 * stored. Every run reads every source afresh (it is a check); what a
 * backed reference decided goes to the fingerprint store, where the daemon
 * reuses it.
 *
 * Results go to stdout, one line per source, one per asset about its
 * reference, then a summary; a progress bar goes to stderr when it is a terminal.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "config.h"
#include "fetch.h"
#include "fingerprint.h"
#include "hash.h"
#include "log.h"
#include "httpparse.h"
#include "rangeread.h"
#include "store.h"
#include "verdict.h"
#include "statedir.h"
#include "verify.h"

#define EXIT_MISMATCH 1
#define EXIT_USAGE 2
#define EXIT_CATALOG 3
#define EXIT_INCONCLUSIVE 4
#define EXIT_RUNTIME 5
#define EXIT_UNDECIDED 6

#define FULL_CHUNK (4u << 20)     /* --full reads this much per request */
#define BAR_WIDTH 30

struct vopts {
	int full;
	int help;
	char **core;                  /* "name=value" or "name", in order */
	size_t ncore;
	char **ids;                   /* borrowed from argv */
	size_t nids;
	const char *catalog;
};

/* What a source's check came to: the verifier's four outcomes (the same
 * values), and two of the command's own. */
enum outcome {
	O_MATCH = VF_MATCH,
	O_MISMATCH = VF_MISMATCH,
	O_SIZE_MISMATCH = VF_SIZE_MISMATCH,
	O_INCONCLUSIVE = VF_INCONCLUSIVE,
	O_UNDECIDED,                  /* read, but nothing says which bytes are right */
	O_ALONE,                      /* the asset's only source: nothing to compare */
	O_N
};

/* What backs an asset's reference. */
enum backing { B_NONE, B_SHA256, B_MAJORITY };

/* One source of the asset being checked. */
struct src {
	const struct px_source *s;
	const char *name;
	struct px_rangeread *rr;
	struct vf_reader reader;
	enum px_status probe;
	char probe_why[200];
	struct vf_seen seen;
	int taken;                    /* fp was taken (possibly incomplete) */
	struct vf_fingerprint fp;
	char take_why[160];
	enum px_status take_st;
	size_t take_bad;
	int64_t take_ms;
	int full_tried, full_done;    /* --full: the whole file was asked, read */
	enum px_status full_st;       /* why the whole read stopped */
	int64_t full_off;             /* where */
	char full_hex[VF_HASH_HEX];
	int full_bad;                 /* its whole file differs from the right one */
	int out;                      /* enum outcome */
	char why[400];                /* the outcome in words */
	struct vf_verdict v;          /* what the store keeps */
};

/* What the asset's sources agree on. */
struct decision {
	int64_t size;                 /* -1: no catalog size, no majority */
	size_t voters;                /* sources that answered with that size */
	size_t agree;                 /* the largest group of them with one content */
	enum backing backing;
	long member;                  /* a source of that group, -1 none */
	long ref;                     /* the reference: the group's first source
				       * with a complete fingerprint, -1 none */
	char refid[VF_FINGERPRINT_ID_LEN];
};

struct run {
	const struct px_config *cfg;
	const struct px_catalog *cat;
	struct px_fetch *fetch;
	struct px_fetch_ops ops;
	struct vf_store *store;
	int full;
	int tty;
	size_t done, total;           /* sources checked, for the progress bar */
	size_t n[O_N];                /* per outcome */
	size_t full_bad, full_unsure;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seamfs verify [OPTIONS] CATALOG [ASSET-ID...]\n"
		"\n"
		"Checks that every source of the named assets (all assets when none is named)\n"
		"holds the same bytes: the size first, then the SHA-256 of 4 KiB samples at the\n"
		"same offsets on every source (20 samples under 1 GiB, 100 from 1 GiB). The\n"
		"right bytes are what a strict majority of the sources that answered (and at\n"
		"least two) agree on; with --full and the catalog's \"sha256\", a source whose\n"
		"whole file has it. Prints one line per source: match, mismatch (which sample,\n"
		"or which whole-file hash), size mismatch, inconclusive (could not be read),\n"
		"undecided (no majority: nothing says which source is right) or alone (the\n"
		"asset's only source), then a line naming the asset's reference and what backs\n"
		"it. Only a backed reference and the verdicts against it are kept in the state\n"
		"directory, for the daemon.\n"
		"\n"
		"options:\n"
		"    --full               also read each source whole: its SHA-256 must equal\n"
		"                         the catalog's \"sha256\", else the majority's\n"
		"    --state-dir DIR      where fingerprints are kept (as -o state_dir=DIR)\n"
		"    --timeout SECONDS    bound on each request (as -o read_timeout=SECONDS)\n"
		"    --insecure           do not verify TLS certificates (testing only)\n"
		"    --ca-file PATH       CA bundle for https sources\n"
		"    -o OPT[,OPT...]      seamfs options (see seamfs --help): state_dir,\n"
		"                         read_timeout, connect_timeout, insecure, ca_file, ...\n"
		"    -h, --help           this help\n"
		"\n"
		"exit status: 0 every source matches (or is its asset's only source), 1 some\n"
		"mismatch or size mismatch, 2 bad command line or unknown asset id, 3 bad\n"
		"catalog, 4 no mismatch but some source could not be read (inconclusive),\n"
		"5 could not run, 6 no mismatch but some asset has no majority (undecided).\n"
		"A mismatch outranks undecided, undecided outranks inconclusive.\n");
}

static int add_core(struct vopts *o, const char *name, const char *value)
{
	size_t n = strlen(name) + (value ? strlen(value) : 0) + 2;
	char **grown = realloc(o->core, (o->ncore + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	o->core = grown;
	if (!(o->core[o->ncore] = malloc(n)))
		return -1;
	snprintf(o->core[o->ncore++], n, "%s%s%s", name, value ? "=" : "", value ? value : "");
	return 0;
}

/* A path option made absolute against the working directory. */
static int add_path(struct vopts *o, const char *name, const char *value)
{
	char cwd[PATH_MAX], buf[2 * PATH_MAX + 2];
	if (value[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return add_core(o, name, value);
	snprintf(buf, sizeof(buf), "%s/%s", cwd, value);
	return add_core(o, name, buf);
}

static int parse_cmdline(int argc, char **argv, struct vopts *o)
{
	enum { OPT_FULL = 256, OPT_STATE, OPT_TIMEOUT, OPT_INSECURE, OPT_CA };
	static const struct option longs[] = {
		{ "full", no_argument, NULL, OPT_FULL },
		{ "state-dir", required_argument, NULL, OPT_STATE },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "insecure", no_argument, NULL, OPT_INSECURE },
		{ "ca-file", required_argument, NULL, OPT_CA },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+ho:", longs, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case OPT_FULL: o->full = 1; break;
		case OPT_STATE: bad = add_path(o, "state_dir", optarg); break;
		case OPT_TIMEOUT: bad = add_core(o, "read_timeout", optarg); break;
		case OPT_INSECURE: bad = add_core(o, "insecure", NULL); break;
		case OPT_CA: bad = add_path(o, "ca_file", optarg); break;
		case 'h': o->help = 1; break;
		case 'o': {
			char *copy = strdup(optarg), *save = NULL;
			if (!copy)
				return -1;
			for (char *t = strtok_r(copy, ",", &save); t && !bad;
			     t = strtok_r(NULL, ",", &save)) {
				char *eq = strchr(t, '=');
				if (eq)
					*eq++ = '\0';
				bad = eq && (!strcmp(t, "state_dir") || !strcmp(t, "ca_file"))
					? add_path(o, t, eq) : add_core(o, t, eq);
			}
			free(copy);
			break;
		}
		default:
			/* getopt sets optopt to the option that lacks its value */
			fprintf(stderr, "seamfs verify: %s option '%s'\n",
				optopt == 'o' || optopt >= OPT_FULL ? "missing value for"
								    : "unknown",
				argv[optind - 1]);
			return 1;
		}
		if (bad)
			return -1;
	}
	if (o->help)
		return 0;
	if (optind >= argc) {
		fprintf(stderr, "seamfs verify: missing CATALOG\n");
		return 1;
	}
	o->catalog = argv[optind++];
	o->ids = argv + optind;
	o->nids = (size_t)(argc - optind);
	return 0;
}

static void store_log(void *ctx, const char *line)
{
	(void)ctx;
	px_warn("verify", "%s", line);
}

/* ------------------------------------------------------------ progress */

static void progress(struct run *r, const char *what, double frac_of_source)
{
	if (!r->tty || !r->total)
		return;
	double f = ((double)r->done + frac_of_source) / (double)r->total;
	int fill = (int)(f * BAR_WIDTH + 0.5);
	char bar[BAR_WIDTH + 1];
	for (int i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[BAR_WIDTH] = '\0';
	fprintf(stderr, "\r\033[K[%s] %zu/%zu %.50s", bar, r->done, r->total, what);
	fflush(stderr);
}

static void progress_clear(struct run *r)
{
	if (r->tty) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
	}
}

/* A result line on stdout (the bar is cleared first, then redrawn). */
static void say(struct run *r, const char *fmt, ...) PX_PRINTF(2, 3);
static void say(struct run *r, const char *fmt, ...)
{
	va_list ap;
	progress_clear(r);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* ------------------------------------------------------------ checking */

static int64_t now_unix(void)
{
	return (int64_t)time(NULL);
}

static void take(struct src *s, int64_t size)
{
	int64_t t0 = px_now_ms();
	s->take_st = vf_fingerprint_take(&s->reader, size, &s->fp, &s->take_bad, s->take_why,
					 sizeof(s->take_why));
	s->take_ms = px_now_ms() - t0;
	s->taken = 1;
}

/* --full: streams the whole source and keeps its SHA-256 (or where and why
 * the read stopped); the verdict comes later, against the others. */
static void hash_full(struct run *r, const struct px_asset *a, struct src *s, int64_t size)
{
	unsigned char *buf = malloc(FULL_CHUNK), d[VF_HASH_LEN];
	struct vf_hash *h = NULL;
	enum px_status st = buf ? vf_hash_new(&h) : PX_ENOMEM;
	int64_t off = 0;
	size_t got = 0;

	while (st == PX_OK && off < size) {
		size_t n = size - off < FULL_CHUNK ? (size_t)(size - off) : FULL_CHUNK;
		st = s->reader.read(s->reader.ctx, off, n, buf, &got);
		if (st == PX_OK && got != n)
			st = PX_ETRANSFER;
		if (st == PX_OK)
			st = vf_hash_update(h, buf, n);
		if (st == PX_OK)
			off += (int64_t)n;
		progress(r, a->id, size ? (double)off / (double)size : 1.0);
	}
	if (st == PX_OK)
		st = vf_hash_final(h, d);
	s->full_st = st;
	s->full_off = off;
	if (st == PX_OK) {
		vf_hash_hex(d, VF_HASH_LEN, s->full_hex);
		s->full_done = 1;
	}
	vf_hash_free(h);
	free(buf);
}

/* Whether a source takes part in the vote: it answered with the asset's size. */
static int voter(const struct src *s, const struct decision *d)
{
	return d->size >= 0 && s->probe == PX_OK && s->seen.size == d->size;
}

/* Whether two sources hold the same bytes as far as this run can tell: the
 * same whole-file SHA-256 with --full, else equal complete fingerprints. */
static int same_bytes(const struct src *x, const struct src *y, int full)
{
	struct vf_verdict v;
	if (full)
		return x->full_done && y->full_done && strcmp(x->full_hex, y->full_hex) == 0;
	if (!x->taken || !y->taken || x->take_st != PX_OK || y->take_st != PX_OK)
		return 0;
	vf_verdict_compare(&x->fp, &y->fp, &v);
	return v.outcome == VF_MATCH;
}

/* How many voters hold the same bytes as source i (itself included). */
static size_t agreeing(const struct src *srcs, size_t n, size_t i, const struct decision *d,
		       int full)
{
	size_t k = 0;
	for (size_t j = 0; j < n; j++)
		k += voter(&srcs[j], d) && same_bytes(&srcs[i], &srcs[j], full);
	return k;
}

/* The asset's size: the catalog's, else the one a strict majority of the
 * sources that answered give (at least two, unless there is one source). */
static void decide_size(const struct px_asset *a, const struct src *srcs, struct decision *d)
{
	size_t answered = 0, best = 0;
	d->size = a->size;
	if (d->size >= 0)
		return;
	for (size_t i = 0; i < a->nsources; i++) {
		size_t k = 0;
		if (srcs[i].probe != PX_OK)
			continue;
		answered++;
		for (size_t j = 0; j < a->nsources; j++)
			k += srcs[j].probe == PX_OK && srcs[j].seen.size == srcs[i].seen.size;
		if (k > best) {
			best = k;
			d->size = srcs[i].seen.size;
		}
	}
	if (2 * best <= answered || (best < 2 && a->nsources > 1))
		d->size = -1;
}

/*
 * Which bytes are the asset's: with --full and the catalog's sha256, the
 * sources whose whole file has it; else what a strict majority of the
 * voters (and at least two) agree on, by whole-file hash with --full, by
 * sampled fingerprint without. Never the first source that happened to
 * read: a corrupt first source would judge the good ones. d->ref is the
 * first agreeing source with a complete fingerprint (-1: none).
 */
static enum px_status decide(const struct run *r, const struct px_asset *a,
			     const struct src *srcs, struct decision *d)
{
	int by_sha = r->full && a->sha256;
	d->ref = d->member = -1;
	d->backing = B_NONE;
	d->voters = d->agree = 0;
	for (size_t i = 0; i < a->nsources; i++) {
		if (!voter(&srcs[i], d))
			continue;
		d->voters++;
		if (by_sha && srcs[i].full_done && strcmp(srcs[i].full_hex, a->sha256) == 0) {
			d->agree++;
			if (d->member < 0)
				d->member = (long)i;
		} else if (!by_sha) {
			size_t k = agreeing(srcs, a->nsources, i, d, r->full);
			if (k > d->agree) {
				d->agree = k;
				d->member = (long)i;
			}
		}
	}
	if (by_sha && d->agree > 0)
		d->backing = B_SHA256;
	else if (!by_sha && d->agree >= 2 && 2 * d->agree > d->voters)
		d->backing = B_MAJORITY;
	if (d->backing == B_NONE)
		return PX_OK;
	for (size_t i = 0; i < a->nsources && d->ref < 0; i++) {
		if (voter(&srcs[i], d) && srcs[i].take_st == PX_OK &&
		    same_bytes(&srcs[d->member], &srcs[i], r->full))
			d->ref = (long)i;
	}
	if (d->ref >= 0)
		return vf_fingerprint_id(&srcs[d->ref].fp, d->refid);
	return PX_OK;
}

/* The outcome and its words. */
static void verdict(struct src *s, int out, const char *fmt, ...) PX_PRINTF(3, 4);
static void verdict(struct src *s, int out, const char *fmt, ...)
{
	va_list ap;
	s->out = out;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
}

/* The sampled comparison with the reference, into s->v (why names an
 * unreadable sample). */
static void compare_samples(struct src *s, const struct src *ref)
{
	vf_verdict_compare(&ref->fp, &s->fp, &s->v);
	if (s->v.outcome == VF_INCONCLUSIVE && s->take_st != PX_OK &&
	    (size_t)s->v.sample == s->take_bad)
		snprintf(s->v.why, sizeof(s->v.why), "sample %zu at offset %lld unreadable: %s",
			 s->take_bad, (long long)s->fp.plan.off[s->take_bad], s->take_why);
}

/* --full: the verdict of a source of the asset's size. */
static void judge_full(const struct px_asset *a, struct src *s, const struct src *srcs,
		       const struct decision *d)
{
	const char *want = a->sha256 ? a->sha256
			   : d->backing == B_MAJORITY ? srcs[d->member].full_hex : NULL;
	int sample_bad = d->ref >= 0 && s->v.outcome == VF_MISMATCH;
	char samples[sizeof(s->v.why) + 2];

	snprintf(samples, sizeof(samples), "%s%s", sample_bad ? s->v.why : "",
		 sample_bad ? "; " : "");
	if (!s->full_done && sample_bad)
		verdict(s, O_MISMATCH, "%swhole file not read: %s at byte %lld", samples,
			px_strerror(s->full_st), (long long)s->full_off);
	else if (!s->full_done)
		verdict(s, O_INCONCLUSIVE, "whole file not read: %s at byte %lld",
			px_strerror(s->full_st), (long long)s->full_off);
	else if (want && strcmp(s->full_hex, want) != 0 && a->sha256)
		verdict(s, O_MISMATCH, "%sfull sha256 %s, the catalog says %s", samples,
			s->full_hex, want);
	else if (want && strcmp(s->full_hex, want) != 0)
		verdict(s, O_MISMATCH, "%sfull sha256 %s, the majority's %s (%zu of %zu "
			"sources)", samples, s->full_hex, want, d->agree, d->voters);
	else if (want)
		verdict(s, O_MATCH, "%s", a->sha256 ? "the catalog's sha256" : "the majority's sha256");
	else
		verdict(s, O_UNDECIDED, "no majority: full sha256 %s; %zu of the %zu sources "
			"that answered agree on one whole-file hash (a reference needs more "
			"than half of them, and at least two)", s->full_hex, d->agree, d->voters);
	s->full_bad = s->full_done && s->out == O_MISMATCH;
}

/* The verdict on source i (s->out, s->why; s->v for the store). */
static void judge(const struct run *r, const struct px_asset *a, struct src *srcs, size_t i,
		  const struct decision *d)
{
	struct src *s = &srcs[i];
	s->v = (struct vf_verdict){ .outcome = VF_INCONCLUSIVE, .sample = -1, .offset = -1,
				    .size = s->probe == PX_OK ? s->seen.size : -1 };
	if (s->probe != PX_OK) {
		verdict(s, O_INCONCLUSIVE, "no size: %s", s->probe_why);
	} else if (d->size < 0) {
		verdict(s, O_UNDECIDED, "it has %lld bytes; the catalog gives no size and no "
			"majority of the sources agrees on one", (long long)s->seen.size);
	} else if (s->seen.size != d->size) {
		verdict(s, O_SIZE_MISMATCH, "has %lld bytes, the asset %lld",
			(long long)s->seen.size, (long long)d->size);
	} else {
		if (d->ref >= 0)
			compare_samples(s, &srcs[d->ref]);
		if (r->full && (a->nsources > 1 || a->sha256))
			judge_full(a, s, srcs, d);
		else if (a->nsources == 1)
			verdict(s, O_ALONE, "the asset's only source: nothing to compare it with%s",
				a->sha256 ? " (--full compares it with the catalog's sha256)" : "");
		else if (d->ref >= 0)
			verdict(s, (int)s->v.outcome, "%s", s->v.why);
		else if (s->take_st != PX_OK)
			verdict(s, O_INCONCLUSIVE, "sample %zu at offset %lld unreadable: %s",
				s->take_bad, (long long)s->fp.plan.off[s->take_bad], s->take_why);
		else
			verdict(s, O_UNDECIDED, "no majority: %zu of the %zu sources that answered "
				"agree with it (a reference needs more than half of them, and at "
				"least two)", agreeing(srcs, a->nsources, i, d, 0), d->voters);
	}
	/* what the store keeps: the verifier's outcomes only */
	s->v.outcome = s->out <= O_INCONCLUSIVE ? (enum vf_outcome)s->out : VF_INCONCLUSIVE;
	snprintf(s->v.why, sizeof(s->v.why), "%s", s->why);
}

/* Keeps what this run found, only when a reference backs it: the
 * reference, every source's fingerprint and its final verdict against it.
 * With none, nothing is written (what an earlier run stored stays). */
static void store_results(struct run *r, const struct px_asset *a, const struct src *srcs,
			  const struct decision *d)
{
	struct vf_record *rec = calloc(1, sizeof(*rec));
	char err[300];
	if (!rec || !r->store || d->backing == B_NONE)
		goto out;
	for (size_t n = 0; n < a->nsources; n++) {
		/* the reference first: no moment without one where there was one */
		size_t i = n == 0 && d->ref >= 0 ? (size_t)d->ref
			   : d->ref >= 0 && n <= (size_t)d->ref ? n - 1 : n;
		const struct src *s = &srcs[i];
		int final = s->out == O_SIZE_MISMATCH ||
			    (d->ref >= 0 && (s->out == O_MATCH || s->out == O_MISMATCH));
		if (s->probe != PX_OK || !final)
			continue;
		memset(rec, 0, sizeof(*rec));
		rec->seen = s->seen;
		rec->time = now_unix();
		rec->has_fp = s->taken && s->fp.size == s->seen.size &&
			      vf_fingerprint_complete(&s->fp);
		if (rec->has_fp)
			rec->fp = s->fp;
		rec->has_verdict = 1;
		rec->verdict = s->v;
		/* a size mismatch is against the asset's size: it needs no reference */
		snprintf(rec->ref, sizeof(rec->ref), "%s",
			 s->out == O_SIZE_MISMATCH ? "" : d->refid);
		if (vf_store_put(r->store, a->id, s->s->key, rec, (long)i == d->ref, err,
				 sizeof(err)) != PX_OK)
			px_warn("verify", "asset %s: %s not remembered: %s", a->id, s->name, err);
	}
out:
	free(rec);
}

static void report(struct run *r, const struct px_asset *a, const struct src *s, int is_ref)
{
	static const char *const words[O_N] = {
		[O_MATCH] = "match", [O_MISMATCH] = "mismatch",
		[O_SIZE_MISMATCH] = "size mismatch", [O_INCONCLUSIVE] = "inconclusive",
		[O_UNDECIDED] = "undecided", [O_ALONE] = "alone",
	};
	r->n[s->out]++;
	r->full_bad += (size_t)s->full_bad;
	r->full_unsure += s->full_tried && !s->full_done;
	if (s->out == O_MATCH)
		say(r, "%s %s: match (%s%zu samples%s%s, %lld ms)", a->id, s->name,
		    is_ref ? "reference; " : "", s->fp.plan.n, r->full ? ", whole file = " : "",
		    r->full ? s->why : "", (long long)s->take_ms);
	else
		say(r, "%s %s: %s: %s", a->id, s->name, words[s->out], s->why);
}

/* The name a stored reference's source is shown by (its key, when it is
 * no source of the asset any more). */
static const char *shown_name(const struct px_asset *a, const struct src *srcs, const char *key)
{
	for (size_t i = 0; i < a->nsources; i++)
		if (strcmp(srcs[i].s->key, key) == 0)
			return srcs[i].name;
	return key;
}

/* One line about the asset's reference: what backs it, or why there is none. */
static void report_reference(struct run *r, const struct px_asset *a, const struct src *srcs,
			     const struct decision *d)
{
	char name[VF_STORE_MAX_NAME + 1] = "";
	struct vf_record *rec = malloc(sizeof(*rec));
	int before = d->ref < 0 && rec && r->store &&
		     vf_store_reference(r->store, a->id, name, sizeof(name), rec);

	if (a->sha256 && !r->full)
		say(r, "%s: the catalog's sha256 is not checked: samples cannot check a "
		    "whole-file hash (--full reads every source whole)", a->id);
	if (d->ref >= 0 && d->backing == B_SHA256)
		say(r, "%s: reference %s: its whole file has the catalog's sha256", a->id,
		    srcs[d->ref].name);
	else if (d->ref >= 0)
		say(r, "%s: reference %s: %zu of the %zu sources that answered agree on its bytes",
		    a->id, srcs[d->ref].name, d->agree, d->voters);
	else if (a->nsources > 1)
		say(r, "%s: no reference stored: %s%s%s", a->id,
		    d->size < 0 ? "no size: the catalog gives none and the sources disagree"
		    : d->backing != B_NONE ? "no agreeing source read every sample"
		    : r->full && a->sha256 ? "no source has the catalog's sha256"
		    : "no majority of the sources that answered agrees",
		    before ? "; the one stored before is left as it was: " : "",
		    before ? shown_name(a, srcs, name) : "");
	free(rec);
}

static enum px_status open_source(struct run *r, struct src *s, int html_ok)
{
	const struct px_source *ps = s->s;
	enum px_status st;
	if (ps->path) {
		st = px_rangeread_new_path(ps->path, &s->rr);
	} else {
		const struct px_provider *p = &r->cat->providers[ps->provider];
		st = px_rangeread_new_http(&r->ops, ps->url, (const char *const *)p->headers,
					   p->nheaders, r->cfg->read_timeout_ms,
					   PX_RANGEREAD_PARALLEL, &s->rr);
	}
	if (st != PX_OK)
		return st;
	px_rangeread_set_html_ok(s->rr, html_ok);
	if (!ps->path)
		px_rangeread_set_header_hosts(s->rr, (const char *const *)
					      r->cat->providers[ps->provider].header_hosts,
					      r->cat->providers[ps->provider].nheader_hosts);
	s->reader = px_rangeread_reader(s->rr);
	s->probe = px_rangeread_probe(s->rr, &s->seen, s->probe_why, sizeof(s->probe_why));
	return PX_OK;
}

/* Reads every source of the asset's size: its fingerprint, and with --full
 * its whole file. PX_ENOMEM when buffers cannot be had. */
static enum px_status read_sources(struct run *r, const struct px_asset *a, struct src *srcs,
				   const struct decision *d)
{
	for (size_t i = 0; i < a->nsources; i++) {
		struct src *s = &srcs[i];
		progress(r, a->id, 0);
		if (voter(s, d)) {
			take(s, d->size);
			if (s->take_st == PX_ENOMEM && s->take_bad >= s->fp.plan.n)
				return PX_ENOMEM;
			if (r->full)
				hash_full(r, a, s, d->size);
			s->full_tried = r->full;
		}
		r->done++;
	}
	return PX_OK;
}

static enum px_status check_asset(struct run *r, const struct px_asset *a)
{
	struct src *srcs = calloc(a->nsources, sizeof(*srcs));
	struct decision d = { .ref = -1 };
	enum px_status st = PX_ENOMEM;

	if (!srcs)
		goto out;
	for (size_t i = 0; i < a->nsources; i++) {
		srcs[i].s = &a->sources[i];
		srcs[i].name = a->sources[i].shown; /* printed: no credentials */
		progress(r, a->id, 0);
		if (open_source(r, &srcs[i], px_http_is_html_path(a->path)) != PX_OK)
			goto out;
	}
	decide_size(a, srcs, &d);
	for (size_t i = 0; i < a->nsources; i++)
		px_rangeread_set_size(srcs[i].rr, srcs[i].probe == PX_OK ? srcs[i].seen.size
									 : d.size);
	if (read_sources(r, a, srcs, &d) != PX_OK || decide(r, a, srcs, &d) != PX_OK)
		goto out;
	for (size_t i = 0; i < a->nsources; i++) {
		judge(r, a, srcs, i, &d);
		report(r, a, &srcs[i], (long)i == d.ref && srcs[i].out == O_MATCH);
	}
	report_reference(r, a, srcs, &d);
	store_results(r, a, srcs, &d);
	st = PX_OK;
out:
	for (size_t i = 0; srcs && i < a->nsources; i++)
		px_rangeread_free(srcs[i].rr);
	free(srcs);
	return st;
}

/* ------------------------------------------------------------ main */

/* The catalog's settings, then -o options, into cfg; the named ids must
 * be the catalog's. 0, or an exit status (said). */
static int configure(const struct vopts *o, const struct px_catalog *cat,
		     struct px_config *cfg)
{
	char err[1024];
	for (size_t i = 0; i < cat->nsettings; i++) {
		if (px_config_set(cfg, cat->setting_names[i], cat->setting_values[i], err,
				  sizeof(err)) != PX_OK) {
			fprintf(stderr, "seamfs verify: %s: settings: %s\n", o->catalog, err);
			return EXIT_CATALOG;
		}
	}
	for (size_t i = 0; i < o->ncore; i++) {
		char *eq = strchr(o->core[i], '=');
		if (eq)
			*eq++ = '\0';
		if (px_config_set(cfg, o->core[i], eq, err, sizeof(err)) != PX_OK) {
			fprintf(stderr, "seamfs verify: %s\n", err);
			return EXIT_USAGE;
		}
	}
	for (size_t i = 0; i < o->nids; i++) {
		if (px_catalog_find(cat, o->ids[i]) < 0) {
			fprintf(stderr, "seamfs verify: unknown asset id '%s' (not in %s)\n",
				o->ids[i], o->catalog);
			return EXIT_USAGE;
		}
	}
	return 0;
}

/* Checks the assets: the named ones in the order given, else all plain
 * ones. 0, -1 out of memory (said). */
static int verify_all(struct run *r, const struct vopts *o)
{
	const struct px_catalog *cat = r->cat;
	size_t count = o->nids ? o->nids : cat->nassets;
	for (size_t k = 0; k < count; k++) {
		const struct px_asset *a = &cat->assets[o->nids ? (size_t)px_catalog_find(cat, o->ids[k]) : k];
		r->total += a->kind == PX_ASSET_PLAIN ? a->nsources : 0;
	}
	for (size_t k = 0; k < count; k++) {
		const struct px_asset *a = &cat->assets[o->nids ? (size_t)px_catalog_find(cat, o->ids[k]) : k];
		if (a->kind != PX_ASSET_PLAIN) {
			if (o->nids)
				say(r, "%s: not a plain asset (made from %s): nothing to verify",
				    a->id, a->of ? a->of : "another asset");
			continue;
		}
		if (check_asset(r, a) != PX_OK) {
			progress_clear(r);
			fprintf(stderr, "seamfs verify: out of memory\n");
			return -1;
		}
	}
	progress_clear(r);
	return 0;
}

/* The counts, on stdout; the exit status they make. */
static int summary(const struct run *r)
{
	printf("%zu source(s): %zu match, %zu mismatch, %zu size mismatch, %zu inconclusive, "
	       "%zu undecided, %zu alone", r->done, r->n[O_MATCH], r->n[O_MISMATCH],
	       r->n[O_SIZE_MISMATCH], r->n[O_INCONCLUSIVE], r->n[O_UNDECIDED], r->n[O_ALONE]);
	if (r->full)
		printf("; full sha256: %zu differ, %zu unread", r->full_bad, r->full_unsure);
	printf("\n");
	fflush(stdout);
	if (r->n[O_MISMATCH] || r->n[O_SIZE_MISMATCH])
		return EXIT_MISMATCH;
	if (r->n[O_UNDECIDED])
		return EXIT_UNDECIDED;
	if (r->n[O_INCONCLUSIVE])
		return EXIT_INCONCLUSIVE;
	return 0;
}

int fs_verify_main(int argc, char **argv)
{
	struct vopts o = { 0 };
	struct px_config cfg;
	struct px_catalog *cat = NULL;
	struct run r = { 0 };
	char err[1024], *dir = NULL;
	int rc = EXIT_RUNTIME, fetch_init = 0;
	int pr;

	px_config_init(&cfg);
	pr = parse_cmdline(argc, argv, &o);
	if (pr < 0) {
		fprintf(stderr, "seamfs verify: out of memory\n");
		goto out;
	}
	if (pr > 0) {
		fprintf(stderr, "usage: seamfs verify [OPTIONS] CATALOG [ASSET-ID...]; "
			"see seamfs verify --help\n");
		rc = EXIT_USAGE;
		goto out;
	}
	if (o.help) {
		usage(stdout);
		rc = 0;
		goto out;
	}
	if (px_catalog_load(o.catalog, &cat, err, sizeof(err)) != PX_OK) {
		fprintf(stderr, "seamfs verify: %s\n", err);
		rc = EXIT_CATALOG;
		goto out;
	}
	if ((pr = configure(&o, cat, &cfg))) {
		rc = pr;
		goto out;
	}
	if (!cfg.state_dir && !(cfg.state_dir = fs_default_state_dir()))
		goto out;
	px_log_setup(cfg.log_level < PX_LOG_WARN ? cfg.log_level : PX_LOG_WARN, 0);
	if (px_fetch_global_init() != PX_OK)
		goto out;
	fetch_init = 1;
	r.cfg = &cfg;
	r.cat = cat;
	r.full = o.full;
	r.tty = isatty(STDERR_FILENO);
	if (px_fetch_new(&cfg, &r.fetch) != PX_OK) {
		fprintf(stderr, "seamfs verify: cannot start the fetch thread\n");
		goto out;
	}
	r.ops = px_fetch_ops(r.fetch);
	size_t n = strlen(cfg.state_dir) + 16;
	if (!(dir = malloc(n)))
		goto out;
	snprintf(dir, n, "%s/fingerprints", cfg.state_dir);
	if (vf_store_open(dir, store_log, NULL, &r.store, err, sizeof(err)) != PX_OK)
		px_warn("verify", "%s; results will not be remembered", err);

	if (verify_all(&r, &o) == 0)
		rc = summary(&r);
out:
	vf_store_free(r.store);
	px_fetch_free(r.fetch);
	if (fetch_init)
		px_fetch_global_cleanup();
	px_catalog_free(cat);
	px_config_release(&cfg);
	free(dir);
	for (size_t i = 0; i < o.ncore; i++)
		free(o.core[i]);
	free(o.core);
	return rc;
}
