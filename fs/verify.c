/*
 * verify.c - `seamfs verify CATALOG [ASSET-ID...]`: checks every source of
 * the named assets (all plain assets when none is named) against the
 * asset's reference, with the verifier's rules: the content-length gate,
 * then the sampled SHA-256 sweep; --full also streams each source whole
 * and compares its SHA-256 with the catalog's "sha256".
 *
 * The reference is the fingerprint stored for the asset when its source
 * still shows the same size, ETag and Last-Modified, else the fingerprint
 * of the first source (in catalog order) of the asset's size that reads in
 * full. Every run reads every source afresh (it is a check) and writes
 * what it found to the fingerprint store, where the daemon reuses it.
 *
 * Results go to stdout, one line per source (and one per --full check),
 * then a summary; a progress bar goes to stderr when it is a terminal.
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
	size_t n[4];                  /* per outcome */
	size_t full_bad, full_unsure;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seamfs verify [OPTIONS] CATALOG [ASSET-ID...]\n"
		"\n"
		"Checks that every source of the named assets (all assets when none is named)\n"
		"holds the same bytes: the size first, then the SHA-256 of 4 KiB samples at the\n"
		"same offsets on every source (20 samples under 1 GiB, 100 from 1 GiB), against\n"
		"the asset's reference (its stored fingerprint, else its first readable source).\n"
		"Prints one line per source: match, mismatch (which sample), size mismatch, or\n"
		"inconclusive (why). Results are kept in the state directory for the daemon.\n"
		"\n"
		"options:\n"
		"    --full               also read each source whole and compare its SHA-256\n"
		"                         with the catalog's \"sha256\"\n"
		"    --state-dir DIR      where fingerprints are kept (as -o state_dir=DIR)\n"
		"    --timeout SECONDS    bound on each request (as -o read_timeout=SECONDS)\n"
		"    --insecure           do not verify TLS certificates (testing only)\n"
		"    --ca-file PATH       CA bundle for https sources\n"
		"    -o OPT[,OPT...]      seamfs options (see seamfs --help): state_dir,\n"
		"                         read_timeout, connect_timeout, insecure, ca_file, ...\n"
		"    -h, --help           this help\n"
		"\n"
		"exit status: 0 every source matches, 1 some mismatch or size mismatch (or a\n"
		"--full SHA-256 that differs), 2 bad command line or unknown asset id, 3 bad\n"
		"catalog, 4 no mismatch but some source could not be checked (inconclusive),\n"
		"5 could not run.\n");
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

/* Streams the whole source, compares its SHA-256 with the catalog's. */
static void check_full(struct run *r, const struct px_asset *a, struct src *s, int64_t size)
{
	unsigned char *buf = malloc(FULL_CHUNK), d[VF_HASH_LEN];
	char hex[VF_HASH_HEX];
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
	if (st != PX_OK) {
		r->full_unsure++;
		say(r, "%s %s: full sha256 inconclusive: %s at byte %lld", a->id, s->name,
		    px_strerror(st), (long long)off);
	} else {
		vf_hash_hex(d, VF_HASH_LEN, hex);
		if (!a->sha256) {
			say(r, "%s %s: full sha256 %s (no sha256 in the catalog to compare)",
			    a->id, s->name, hex);
		} else if (strcmp(hex, a->sha256) == 0) {
			say(r, "%s %s: full sha256 match", a->id, s->name);
		} else {
			r->full_bad++;
			say(r, "%s %s: full sha256 mismatch: %s, the catalog says %s", a->id,
			    s->name, hex, a->sha256);
		}
	}
	vf_hash_free(h);
	free(buf);
}

static void store_result(struct run *r, const struct px_asset *a, struct src *s,
			 const struct vf_verdict *v, const char *refid, int is_ref)
{
	struct vf_record *rec;
	char err[300];
	/* an inconclusive check teaches nothing: what is stored stays */
	if (!r->store || s->probe != PX_OK || !v || v->outcome == VF_INCONCLUSIVE)
		return;
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		return;
	rec->seen = s->seen;
	rec->time = now_unix();
	if (s->taken && s->fp.size == s->seen.size && vf_fingerprint_complete(&s->fp)) {
		rec->has_fp = 1;
		rec->fp = s->fp;
	}
	if (refid || v->outcome == VF_SIZE_MISMATCH) {
		rec->has_verdict = 1;
		rec->verdict = *v;
		/* a size mismatch is against the asset's size: it needs no reference */
		snprintf(rec->ref, sizeof(rec->ref), "%s", refid ? refid : "");
	}
	if (vf_store_put(r->store, a->id, s->s->key, rec, is_ref && rec->has_fp, err,
			 sizeof(err)) != PX_OK)
		px_warn("verify", "asset %s: %s not remembered: %s", a->id, s->name, err);
	free(rec);
}

static void report(struct run *r, const struct px_asset *a, const struct src *s,
		   const struct vf_verdict *v, int is_ref)
{
	r->n[v->outcome]++;
	switch (v->outcome) {
	case VF_MATCH:
		say(r, "%s %s: match (%s%zu samples, %lld ms)", a->id, s->name,
		    is_ref ? "reference; " : "", s->fp.plan.n, (long long)s->take_ms);
		break;
	case VF_MISMATCH:
		say(r, "%s %s: mismatch: %s", a->id, s->name, v->why);
		break;
	case VF_SIZE_MISMATCH:
		say(r, "%s %s: size mismatch: %s", a->id, s->name, v->why);
		break;
	case VF_INCONCLUSIVE:
		say(r, "%s %s: inconclusive: %s", a->id, s->name, v->why);
		break;
	}
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

/* The stored reference, if it still holds for size and its source. */
static int stored_reference(struct run *r, const struct px_asset *a, struct src *srcs,
			    int64_t size, struct vf_fingerprint *ref, long *ref_src)
{
	char name[VF_STORE_MAX_NAME + 1];
	struct vf_record *rec = malloc(sizeof(*rec));
	int ok = 0;

	*ref_src = -1;
	if (!rec || !r->store || !vf_store_reference(r->store, a->id, name, sizeof(name), rec) ||
	    rec->fp.size != size)
		goto out;
	for (size_t i = 0; i < a->nsources; i++) {
		if (strcmp(srcs[i].s->key, name) != 0)
			continue;
		/* the source it came from now shows other bytes: not a reference */
		if (srcs[i].probe == PX_OK && !vf_seen_same(&rec->seen, &srcs[i].seen))
			goto out;
		*ref_src = (long)i;
	}
	*ref = rec->fp;
	ok = 1;
out:
	free(rec);
	return ok;
}

static enum px_status check_asset(struct run *r, const struct px_asset *a)
{
	struct src *srcs = calloc(a->nsources, sizeof(*srcs));
	struct vf_fingerprint *ref = malloc(sizeof(*ref));
	enum px_status st = PX_ENOMEM;
	char refid[VF_FINGERPRINT_ID_LEN] = "";
	int64_t size = a->size;
	long ref_src = -1;
	int have_ref = 0;

	if (!srcs || !ref)
		goto out;
	for (size_t i = 0; i < a->nsources; i++) {
		srcs[i].s = &a->sources[i];
		srcs[i].name = a->sources[i].shown; /* printed: no credentials */
		progress(r, a->id, 0);
		if (open_source(r, &srcs[i], px_http_is_html_path(a->path)) != PX_OK)
			goto out;
		if (size < 0 && srcs[i].probe == PX_OK)
			size = srcs[i].seen.size; /* the catalog gives none: the first answer */
	}
	for (size_t i = 0; i < a->nsources && size >= 0; i++)
		px_rangeread_set_size(srcs[i].rr, srcs[i].probe == PX_OK ? srcs[i].seen.size : size);

	if (size >= 0)
		have_ref = stored_reference(r, a, srcs, size, ref, &ref_src);
	for (size_t i = 0; !have_ref && size >= 0 && i < a->nsources; i++) {
		struct src *s = &srcs[i];
		if (s->probe != PX_OK || s->seen.size != size)
			continue;
		take(s, size);
		if (s->take_st == PX_ENOMEM && s->take_bad >= s->fp.plan.n)
			goto out;
		if (s->take_st == PX_OK) {
			*ref = s->fp;
			ref_src = (long)i;
			have_ref = 1;
		}
	}
	if (have_ref && vf_fingerprint_id(ref, refid) != PX_OK)
		goto out;

	for (size_t i = 0; i < a->nsources; i++) {
		struct src *s = &srcs[i];
		struct vf_verdict v;
		int is_ref = (long)i == ref_src;

		memset(&v, 0, sizeof(v));
		v.sample = -1;
		v.offset = -1;
		v.size = s->probe == PX_OK ? s->seen.size : -1;
		progress(r, a->id, 0);
		if (s->probe != PX_OK) {
			v.outcome = VF_INCONCLUSIVE;
			snprintf(v.why, sizeof(v.why), "no size: %s", s->probe_why);
		} else if (size >= 0 && s->seen.size != size) {
			v.outcome = VF_SIZE_MISMATCH;
			snprintf(v.why, sizeof(v.why), "has %lld bytes, the asset %lld",
				 (long long)s->seen.size, (long long)size);
		} else if (!have_ref) {
			if (!s->taken)
				take(s, size);
			v.outcome = VF_INCONCLUSIVE;
			snprintf(v.why, sizeof(v.why),
				 "no reference: no source of the asset could be read in full (%s)",
				 s->take_why[0] ? s->take_why : "none readable");
		} else {
			if (!s->taken)
				take(s, size);
			if (s->take_st == PX_ENOMEM && s->take_bad >= s->fp.plan.n)
				goto out;
			vf_verdict_compare(ref, &s->fp, &v);
			if (v.outcome == VF_INCONCLUSIVE && s->take_st != PX_OK &&
			    (size_t)v.sample == s->take_bad)
				snprintf(v.why, sizeof(v.why), "sample %zu at offset %lld "
					 "unreadable: %s", s->take_bad,
					 (long long)s->fp.plan.off[s->take_bad], s->take_why);
		}
		report(r, a, s, &v, is_ref && v.outcome == VF_MATCH);
		store_result(r, a, s, &v, have_ref ? refid : NULL, is_ref && v.outcome == VF_MATCH);
		if (r->full && s->probe == PX_OK && (size < 0 || s->seen.size == size))
			check_full(r, a, s, s->seen.size);
		r->done++;
	}
	st = PX_OK;
out:
	for (size_t i = 0; srcs && i < a->nsources; i++)
		px_rangeread_free(srcs[i].rr);
	free(srcs);
	free(ref);
	return st;
}

/* ------------------------------------------------------------ main */

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
	for (size_t i = 0; i < cat->nsettings; i++) {
		if (px_config_set(&cfg, cat->setting_names[i], cat->setting_values[i], err,
				  sizeof(err)) != PX_OK) {
			fprintf(stderr, "seamfs verify: %s: settings: %s\n", o.catalog, err);
			rc = EXIT_CATALOG;
			goto out;
		}
	}
	for (size_t i = 0; i < o.ncore; i++) {
		char *eq = strchr(o.core[i], '=');
		if (eq)
			*eq++ = '\0';
		if (px_config_set(&cfg, o.core[i], eq, err, sizeof(err)) != PX_OK) {
			fprintf(stderr, "seamfs verify: %s\n", err);
			rc = EXIT_USAGE;
			goto out;
		}
	}
	for (size_t i = 0; i < o.nids; i++) {
		if (px_catalog_find(cat, o.ids[i]) < 0) {
			fprintf(stderr, "seamfs verify: unknown asset id '%s' (not in %s)\n",
				o.ids[i], o.catalog);
			rc = EXIT_USAGE;
			goto out;
		}
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

	/* which assets: the named ones in the order given, else all plain ones */
	size_t count = o.nids ? o.nids : cat->nassets;
	for (size_t k = 0; k < count; k++) {
		const struct px_asset *a = &cat->assets[o.nids ? (size_t)px_catalog_find(cat, o.ids[k]) : k];
		r.total += a->kind == PX_ASSET_PLAIN ? a->nsources : 0;
	}
	for (size_t k = 0; k < count; k++) {
		const struct px_asset *a = &cat->assets[o.nids ? (size_t)px_catalog_find(cat, o.ids[k]) : k];
		if (a->kind != PX_ASSET_PLAIN) {
			if (o.nids)
				say(&r, "%s: not a plain asset (made from %s): nothing to verify",
				    a->id, a->of ? a->of : "another asset");
			continue;
		}
		if (check_asset(&r, a) != PX_OK) {
			progress_clear(&r);
			fprintf(stderr, "seamfs verify: out of memory\n");
			goto out;
		}
	}
	progress_clear(&r);
	printf("%zu source(s): %zu match, %zu mismatch, %zu size mismatch, %zu inconclusive",
	       r.done, r.n[VF_MATCH], r.n[VF_MISMATCH], r.n[VF_SIZE_MISMATCH],
	       r.n[VF_INCONCLUSIVE]);
	if (r.full)
		printf("; full sha256: %zu differ, %zu unread", r.full_bad, r.full_unsure);
	printf("\n");
	fflush(stdout);
	if (r.n[VF_MISMATCH] || r.n[VF_SIZE_MISMATCH] || r.full_bad)
		rc = EXIT_MISMATCH;
	else if (r.n[VF_INCONCLUSIVE] || r.full_unsure)
		rc = EXIT_INCONCLUSIVE;
	else
		rc = 0;
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
