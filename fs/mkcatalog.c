/*
 * mkcatalog.c - `seamfs catalog [OPTIONS] MIRROR...`: a catalog from one
 * or more mirrors of the same library.
 *
 * A mirror is an HTTP directory listing (nginx, Apache, lighttpd, caddy,
 * `rclone serve http`; pages parsed by proxy/catalog/listing.c) or a local
 * or NFS folder. Each is walked recursively, within --max-depth and
 * --max-files; its media files and the sidecar files a media server reads
 * beside them (NFO, artwork, subtitles; by extension) are matched across
 * mirrors by their path below the mirror's root, percent-decoded. A file's
 * size is the listing's when the page states bytes, a local file's stat(),
 * else a HEAD (a one-byte range GET when HEAD is refused). Its date is that
 * HEAD's Last-Modified when one was made, else the listing's, or a local
 * file's mtime: written as the asset's mtime, so that a library's "date
 * added" is the file's and stays the same whatever the catalog's path or
 * the mount's state directory. Every request is
 * bounded in time (--timeout), and each provider gets at most its
 * connection limit of transfers at once (4 when none is given), all
 * providers in parallel on one batch of the fetch module (fetch.h: its
 * redirect, protocol and TLS policy; no libcurl here).
 *
 * Then per file: the size most copies agree on (ties: the earlier mirror
 * on the command line) is the asset's; a copy of another size is reported
 * on stderr and is not a source. The asset's id and path are the file's
 * relative path, so a rerun gives the same ids (inode numbers, remembered
 * sizes). --merge EXISTING keeps EXISTING's assets as they are (ids,
 * paths, sha256, mtime, transcodes, providers, settings), matched by a
 * source or by path, updates their sources on the walked mirrors and
 * their size, gives an mtime to those without one, and adds the new files. The result is checked with the
 * daemon's own parser before it is written (stdout, or -o FILE atomically).
 *
 * Nothing is written when a mirror cannot be walked: a catalog that lacks
 * a mirror's files would look complete.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "catalog.h"
#include "fetch.h"
#include "httpparse.h"
#include "listing.h"
#include "mkcatalog.h"
#include "redact.h"
#include "strmap.h"
#include "utf8.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_CATALOG 3

#define DEFAULT_CONNECTIONS 4      /* per provider, when it has no limit */
#define MAX_OWN_CONNECTIONS 16     /* per provider, whatever its limit */
#define MAX_ALL_CONNECTIONS 32
#define MAX_LISTING_BYTES (16L << 20)
#define MAX_ENTRIES 1000000        /* directory entries walked per mirror */
#define MAX_ATTEMPTS 6             /* of one request that is answered "busy" */
#define RETRY_BASE_MS 200          /* then 400, 800, ... ms later */

/* Media, then the sidecar files Kodi and Jellyfin read beside it by
 * default: NFO, artwork, subtitles (small files, read whole). */
static const char *const default_exts[] = {
	"mkv", "mp4", "m4v", "avi", "mov", "ts", "m2ts", "webm", "wmv", "mpg", "mpeg", "flv",
	"nfo", "jpg", "jpeg", "png", "webp", "tbn",
	"srt", "ass", "ssa", "sub", "idx", "vtt",
	NULL
};

struct mirror {
	const char *arg;            /* as given */
	char *root;                 /* URL ending in '/', or a real directory path */
	int local;
	size_t prov;                /* its provider (a --provider prefix may
				     * give some of its files another) */
	size_t entries, files;      /* walked, taken */
	int failed;
};

struct prov {
	char *name;
	const char *prefix;         /* --provider NAME=PREFIX, or NULL */
	int max_conn;               /* --max-connections; 0: none */
	int limit;                  /* transfers of ours at once */
	int running;
	struct job *head, *tail;    /* waiting jobs */
	int used;                   /* some accepted source names it */
};

struct copy {
	size_t mirror;
	size_t prov;
	char *loc;                  /* URL or absolute path */
	int64_t size;               /* -1: not known yet */
	int64_t mtime;              /* Unix seconds; -1: not known */
	int failed;                 /* no size could be had */
	int accepted;               /* a source of the asset */
};

struct file {
	char *rel;
	struct copy *copies;
	size_t ncopies;
	int64_t size;               /* the asset's, -1 while none */
	int64_t mtime;              /* the asset's, -1 while none */
};

struct job {
	enum px_fetch_kind kind;    /* a page (a listing), a HEAD, a first byte */
	size_t mirror, prov;
	char *url;
	char *rel;                  /* a page: the directory's path below the root, "" or "a/b/" */
	int depth;
	int attempt;                /* 0 the first time */
	int64_t not_before;         /* a retry waits until then (px_now_ms) */
	size_t file, copy;          /* a HEAD, a first byte */
	struct job *next;
};

struct opts {
	const char *output, *merge, *ca_file;
	int all, insecure, help;
	char **exts;                /* lowercase, NULL-terminated */
	long max_depth, max_files, timeout_s;
	char **prov_names, **prov_prefixes;
	size_t nprov_opts;
	char **conn_names;          /* NULL entry: every provider */
	int *conn_values;
	size_t nconn;
	char **mirrors;
	size_t nmirrors;
};

struct ctx {
	struct opts *o;
	struct mirror *mirrors;
	size_t nmirrors;
	struct prov *provs;
	size_t nprovs;
	struct file *files;
	size_t nfiles, capfiles;
	struct px_strmap *rels;     /* rel → index into files */
	struct px_strmap *listed;   /* listing URLs seen (keys owned by listed_keys) */
	char **listed_keys;
	size_t nlisted;
	struct px_fetch_batch *batch; /* while walking HTTP mirrors */
	int running;
	struct job *active;         /* started, not done */
	struct job *delayed;        /* retries waiting for their time */
	size_t heads, mismatches, head_failures, skipped;
	int oom;
};

PX_PRINTF(1, 2)
static void say(const char *fmt, ...)
{
	va_list ap;
	fputs("seamfs catalog: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A URL as messages show it (credentials redacted; see docs/catalog.md "Secrets"),
 * control characters escaped; a path escaped. SHOWN_BUFS rotating buffers:
 * one message uses at most that many. */
#define SHOWN_BUFS 8
static const char *shown(const char *loc)
{
	static char bufs[SHOWN_BUFS][1200];
	static unsigned k;
	char tmp[1024];
	char *b = bufs[k++ % SHOWN_BUFS];
	px_redact_url(loc, tmp, sizeof(tmp));
	px_catalog_escape(b, sizeof(bufs[0]), tmp);
	return b;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seamfs catalog [OPTIONS] MIRROR...\n"
		"\n"
		"Builds a seamfs catalog from one or more mirrors of the same library: HTTP\n"
		"directory listings (nginx autoindex, Apache, lighttpd, caddy browse, rclone\n"
		"serve http) and local or NFS folders, walked recursively. Files are matched\n"
		"across mirrors by their path below the mirror; each becomes one asset (id and\n"
		"path: that relative path) with one source per mirror that holds it. Sizes come\n"
		"from the listing when it gives bytes, else from a HEAD request; dates (the\n"
		"asset's mtime) from that HEAD's Last-Modified, else the listing or the file.\n"
		"A copy whose size differs from the other mirrors' is reported and left out.\n"
		"\n"
		"MIRROR is an http:// or https:// URL of a directory, or a directory path.\n"
		"\n"
		"options:\n"
		"    -o, --output FILE        write the catalog to FILE (atomically), not stdout\n"
		"    --merge EXISTING         keep the assets of the catalog EXISTING (their ids\n"
		"                             and other fields), update their sources on these\n"
		"                             mirrors, add the new files\n"
		"    --provider NAME=URL      sources under URL (a prefix) belong to provider NAME\n"
		"                             (default: one provider per host, \"local\" for\n"
		"                             folders); repeatable\n"
		"    --max-connections N      connection limit of every provider, written to the\n"
		"                             catalog and kept while walking (default for walking: 4)\n"
		"    --max-connections NAME=N the same for one provider; repeatable\n"
		"    --all                    every file, not only media and sidecar files\n"
		"    --ext LIST               these extensions instead of the default ones: media\n"
		"                             (mkv,mp4,m4v,avi,mov,ts,m2ts,webm,wmv,mpg,mpeg,flv)\n"
		"                             and sidecars (nfo,jpg,jpeg,png,webp,tbn,srt,ass,ssa,\n"
		"                             sub,idx,vtt); \"+iso,sup\" adds to them\n"
		"    --max-depth N            folder levels below a mirror's root (default 32)\n"
		"    --max-files N            files taken from one mirror (default 100000)\n"
		"    --timeout SECONDS        bound on each request (default 20)\n"
		"    --insecure               do not verify TLS certificates (testing only)\n"
		"    --ca-file PATH           CA bundle for https mirrors\n"
		"    -h, --help               this help\n"
		"\n"
		"exit status: 0 written, 1 a mirror could not be walked (unreachable, not a\n"
		"listing) or the catalog not written: nothing is written then, 2 bad command\n"
		"line, 3 bad --merge catalog.\n");
}

/* ------------------------------------------------------------ options */

static int push(char ***arr, size_t *n, char *v)
{
	char **g = realloc(*arr, (*n + 2) * sizeof(**arr));
	if (!g)
		return -1;
	*arr = g;
	g[(*n)++] = v;
	g[*n] = NULL;
	return 0;
}

static int number(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int set_exts(struct opts *o, const char *list)
{
	size_t n = 0;
	int add = list[0] == '+';
	char **exts = NULL;
	if (add) {
		list++;
		for (const char *const *e = default_exts; *e; e++)
			if (push(&exts, &n, strdup(*e)) || !exts[n - 1])
				return -1;
	}
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		return -1;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == '.' || *t == ' ')
			t++;
		if (!*t)
			continue;
		char *e = strdup(t);
		if (!e || push(&exts, &n, e)) {
			free(copy);
			return -1;
		}
		for (char *q = e; *q; q++)
			*q = (char)tolower((unsigned char)*q);
	}
	free(copy);
	if (!n) {
		say("--ext %s: no extension in it", list);
		return 1;
	}
	if (o->exts)
		for (char **e = o->exts; *e; e++)
			free(*e);
	free(o->exts);
	o->exts = exts;
	return 0;
}

static void free_opts(struct opts *o)
{
	if (o->exts)
		for (char **e = o->exts; *e; e++)
			free(*e);
	free(o->exts);
	free(o->prov_names);
	free(o->prov_prefixes);
	free(o->conn_names);
	free(o->conn_values);
}

/* --provider NAME=PREFIX (arg is cut at the '='). 0, 1 bad (said), -1 out
 * of memory. */
static int opt_provider(struct opts *o, char *arg)
{
	char *eq = strchr(arg, '=');
	size_t nnames = o->nprov_opts, nprefixes = o->nprov_opts;
	if (!eq || eq == arg || !eq[1]) {
		say("--provider %s: expected NAME=URL (a mirror's URL or a prefix "
		    "of its sources)", arg);
		return 1;
	}
	*eq = '\0';
	for (const unsigned char *q = (const unsigned char *)arg; *q; q++) {
		if (*q < 0x20 || *q == 0x7f) {
			say("--provider: the name has a control character");
			return 1;
		}
	}
	if (push(&o->prov_names, &nnames, arg) || push(&o->prov_prefixes, &nprefixes, eq + 1))
		return -1;
	o->nprov_opts = nnames;
	return 0;
}

/* --max-connections N or NAME=N (arg is cut at the '='). 0, 1 bad (said),
 * -1 out of memory. */
static int opt_max_connections(struct opts *o, char *arg)
{
	char *eq = strrchr(arg, '=');
	long v;
	if (number(eq ? eq + 1 : arg, 1, 100000, &v) || (eq && eq == arg)) {
		say("--max-connections %s: expected N or NAME=N, N from 1 to 100000", arg);
		return 1;
	}
	if (eq)
		*eq = '\0';
	char **names = realloc(o->conn_names, (o->nconn + 1) * sizeof(*names));
	if (!names)
		return -1;
	o->conn_names = names;
	int *vals = realloc(o->conn_values, (o->nconn + 1) * sizeof(*vals));
	if (!vals)
		return -1;
	o->conn_values = vals;
	names[o->nconn] = eq ? arg : NULL;
	vals[o->nconn++] = (int)v;
	return 0;
}

enum { OPT_MERGE = 256, OPT_PROVIDER, OPT_MAXCONN, OPT_ALL, OPT_EXT, OPT_DEPTH,
       OPT_FILES, OPT_TIMEOUT, OPT_INSECURE, OPT_CA };
static const struct option longs[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "merge", required_argument, NULL, OPT_MERGE },
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "max-connections", required_argument, NULL, OPT_MAXCONN },
	{ "all", no_argument, NULL, OPT_ALL },
	{ "ext", required_argument, NULL, OPT_EXT },
	{ "max-depth", required_argument, NULL, OPT_DEPTH },
	{ "max-files", required_argument, NULL, OPT_FILES },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "insecure", no_argument, NULL, OPT_INSECURE },
	{ "ca-file", required_argument, NULL, OPT_CA },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* 0 ok, 1 bad command line (said), -1 out of memory */
static int parse_cmdline(int argc, char **argv, struct opts *o)
{
	int c;

	o->max_depth = 32;
	o->max_files = 100000;
	o->timeout_s = 20;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", longs, NULL)) != -1) {
		switch (c) {
		case 'o': o->output = optarg; break;
		case OPT_MERGE: o->merge = optarg; break;
		case OPT_ALL: o->all = 1; break;
		case OPT_INSECURE: o->insecure = 1; break;
		case OPT_CA: o->ca_file = optarg; break;
		case 'h': o->help = 1; break;
		case OPT_EXT: {
			int r = set_exts(o, optarg);
			if (r)
				return r;
			break;
		}
		case OPT_PROVIDER: {
			int r = opt_provider(o, optarg);
			if (r)
				return r;
			break;
		}
		case OPT_MAXCONN: {
			int r = opt_max_connections(o, optarg);
			if (r)
				return r;
			break;
		}
		case OPT_DEPTH:
			if (number(optarg, 0, 64, &o->max_depth)) {
				say("--max-depth %s: expected a number from 0 to 64", optarg);
				return 1;
			}
			break;
		case OPT_FILES:
			if (number(optarg, 1, 1000000, &o->max_files)) {
				say("--max-files %s: expected a number from 1 to 1000000", optarg);
				return 1;
			}
			break;
		case OPT_TIMEOUT:
			if (number(optarg, 1, 3600, &o->timeout_s)) {
				say("--timeout %s: expected seconds, 1 to 3600", optarg);
				return 1;
			}
			break;
		default:
			say("%s option '%s' (see seamfs catalog --help)",
			    optopt == 'o' || optopt >= OPT_MERGE ? "missing value for" : "unknown",
			    argv[optind - 1]);
			return 1;
		}
	}
	if (o->help)
		return 0;
	if (optind >= argc) {
		say("missing MIRROR (an http(s):// URL of a directory listing, or a folder)");
		return 1;
	}
	o->mirrors = argv + optind;
	o->nmirrors = (size_t)(argc - optind);
	if (!o->exts && set_exts(o, "+"))
		return -1;
	return 0;
}

/* ------------------------------------------------------------ providers */

static int is_url(const char *s)
{
	return strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0;
}

static long find_prov(struct ctx *c, const char *name)
{
	for (size_t i = 0; i < c->nprovs; i++)
		if (strcmp(c->provs[i].name, name) == 0)
			return (long)i;
	return -1;
}

static long add_prov(struct ctx *c, const char *name)
{
	long i = find_prov(c, name);
	if (i >= 0)
		return i;
	struct prov *g = realloc(c->provs, (c->nprovs + 1) * sizeof(*g));
	if (!g)
		return -1;
	c->provs = g;
	memset(&g[c->nprovs], 0, sizeof(g[0]));
	if (!(g[c->nprovs].name = strdup(name)))
		return -1;
	return (long)c->nprovs++;
}

/* Whether loc lies under prefix (a URL: case-insensitive scheme and host
 * are not worth the trouble here; byte for byte). */
static int under(const char *loc, const char *prefix)
{
	return strncmp(loc, prefix, strlen(prefix)) == 0;
}

/* The provider of a source: the longest --provider prefix it lies under,
 * else its mirror's. */
static size_t prov_of(struct ctx *c, size_t mirror, const char *loc)
{
	size_t best = c->mirrors[mirror].prov, blen = 0;
	for (size_t i = 0; i < c->nprovs; i++) {
		const char *p = c->provs[i].prefix;
		if (p && under(loc, p) && strlen(p) > blen) {
			best = i;
			blen = strlen(p);
		}
	}
	return best;
}

/* The default name of a URL mirror's provider: its host, with the port
 * when it is not the scheme's. */
static int host_name(const char *url, char *out, size_t cap)
{
	char hostport[300];
	if (px_catalog_bad_url(url, hostport, sizeof(hostport)))
		return -1;
	char *colon = strrchr(hostport, ':');
	int https = strncasecmp(url, "https://", 8) == 0;
	if (colon && strcmp(colon + 1, https ? "443" : "80") == 0)
		*colon = '\0';
	snprintf(out, cap, "%s", hostport);
	return 0;
}

/* A mirror's root from its argument: a URL ending in '/', or a folder's
 * real path; name gets its provider's default name. 0, 1 bad command
 * line (said), 2 a local mirror that cannot be used (said), -1 out of
 * memory. */
static int mirror_root(struct mirror *m, char *name, size_t cap)
{
	const char *arg = m->arg;
	if (is_url(arg)) {
		if (strpbrk(arg, "?#")) {
			say("mirror %s: a URL with a query or fragment is not a directory to "
			    "walk", shown(arg));
			return 1;
		}
		const char *why = px_catalog_bad_url(arg, name, cap);
		if (why) {
			say("mirror %s: %s", shown(arg), why);
			return 1;
		}
		size_t n = strlen(arg);
		const char *path = strchr(arg + (arg[4] == 's' || arg[4] == 'S' ? 8 : 7), '/');
		int slash = path && arg[n - 1] == '/';
		if (!(m->root = malloc(n + 2)))
			return -1;
		snprintf(m->root, n + 2, "%s%s", arg, slash ? "" : "/");
		return host_name(m->root, name, cap) ? 1 : 0;
	}
	if (strstr(arg, "://")) {
		say("mirror %s: unsupported URL scheme (an http:// or https:// URL, or a "
		    "folder)", shown(arg));
		return 1;
	}
	struct stat st;
	m->local = 1;
	m->root = realpath(arg, NULL);
	if (!m->root || stat(m->root, &st) || !S_ISDIR(st.st_mode)) {
		say("mirror %s: %s", arg, !m->root ? strerror(errno) : "not a directory");
		return 2;
	}
	if (px_catalog_bad_local(m->root)) {
		say("mirror %s: %s", arg, px_catalog_bad_local(m->root));
		return 2;
	}
	snprintf(name, cap, "local");
	return 0;
}

/* Each provider's limit of transfers at once. 0, 1 bad command line (said). */
static int set_limits(struct ctx *c)
{
	const struct opts *o = c->o;
	/* connection limits: N for all, then NAME=N, which wins */
	for (size_t i = 0; i < o->nconn; i++)
		for (size_t p = 0; !o->conn_names[i] && p < c->nprovs; p++)
			c->provs[p].max_conn = o->conn_values[i];
	for (size_t i = 0; i < o->nconn; i++) {
		if (!o->conn_names[i])
			continue;
		long p = find_prov(c, o->conn_names[i]);
		if (p < 0) {
			char list[512] = "";
			for (size_t q = 0; q < c->nprovs; q++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
					 q ? ", " : "", c->provs[q].name);
			say("--max-connections %s=%d: no provider named \"%s\" (the providers: %s)",
			    o->conn_names[i], o->conn_values[i], o->conn_names[i], list);
			return 1;
		}
		c->provs[p].max_conn = o->conn_values[i];
	}
	for (size_t p = 0; p < c->nprovs; p++) {
		int lim = c->provs[p].max_conn ? c->provs[p].max_conn : DEFAULT_CONNECTIONS;
		c->provs[p].limit = lim > MAX_OWN_CONNECTIONS ? MAX_OWN_CONNECTIONS : lim;
	}
	return 0;
}

/* Mirrors and providers from the command line. 0, 1 bad command line,
 * 2 a local mirror that cannot be used (said), -1 out of memory. */
static int setup_mirrors(struct ctx *c)
{
	struct opts *o = c->o;
	int bad_local = 0;
	c->mirrors = calloc(o->nmirrors, sizeof(*c->mirrors));
	if (!c->mirrors)
		return -1;
	c->nmirrors = o->nmirrors;
	for (size_t i = 0; i < o->nprov_opts; i++) {
		long k = find_prov(c, o->prov_names[i]);
		if (k >= 0 && c->provs[k].prefix) {
			say("--provider %s: given twice", o->prov_names[i]);
			return 1;
		}
		if ((k = add_prov(c, o->prov_names[i])) < 0)
			return -1;
		c->provs[k].prefix = o->prov_prefixes[i];
	}
	for (size_t i = 0; i < o->nmirrors; i++) {
		struct mirror *m = &c->mirrors[i];
		const char *arg = o->mirrors[i];
		char name[300];
		m->arg = arg;
		int r = mirror_root(m, name, sizeof(name));
		if (r == 2) {
			bad_local = 1;
			continue;
		}
		if (r)
			return r;
		for (size_t k = 0; k < i; k++) {
			if (c->mirrors[k].root && m->root && !strcmp(c->mirrors[k].root, m->root)) {
				say("mirror %s: given twice", shown(arg));
				return 1;
			}
		}
		long k = add_prov(c, name);
		if (k < 0)
			return -1;
		m->prov = (size_t)k;
		/* a --provider prefix the whole mirror lies under names its provider */
		size_t best = 0;
		for (size_t p = 0; p < c->nprovs; p++) {
			const char *pre = c->provs[p].prefix;
			if (pre && under(m->root, pre) && strlen(pre) > best) {
				m->prov = p;
				best = strlen(pre);
			}
		}
	}
	if (bad_local)
		return 2;
	/* every --provider prefix must meet a mirror */
	for (size_t p = 0; p < c->nprovs; p++) {
		const char *pre = c->provs[p].prefix;
		int met = !pre;
		for (size_t i = 0; i < c->nmirrors && !met; i++)
			met = under(c->mirrors[i].root, pre) || under(pre, c->mirrors[i].root);
		if (!met) {
			say("--provider %s=%s: no MIRROR lies under it or holds it", c->provs[p].name,
			    shown(pre));
			return 1;
		}
	}
	return set_limits(c);
}

/* ------------------------------------------------------------ files */

static int wanted(const struct opts *o, const char *name)
{
	if (o->all)
		return 1;
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name)
		return 0;
	for (char **e = o->exts; *e; e++)
		if (strcasecmp(dot + 1, *e) == 0)
			return 1;
	return 0;
}

/* A file a mirror has: its path below the root, where it is, and what the
 * walk learnt of it (-1: not known). */
struct found {
	const char *rel, *loc;
	int64_t size, mtime;
};

/* Adds mirror's copy of fd->rel at fd->loc. 0, 1 over --max-files (said),
 * -1 out of memory. *copy_out: the copy's place, for a HEAD. */
static int add_copy(struct ctx *c, size_t mirror, const struct found *fd, size_t *file_out,
		    size_t *copy_out)
{
	const char *rel = fd->rel, *loc = fd->loc;
	struct mirror *m = &c->mirrors[mirror];
	size_t fi;
	if (++m->files > (size_t)c->o->max_files) {
		say("mirror %s: more than %ld files (see --max-files)", shown(m->arg),
		    c->o->max_files);
		m->failed = 1;
		return 1;
	}
	if (!px_strmap_get(c->rels, rel, &fi)) {
		if (c->nfiles == c->capfiles) {
			size_t ncap = c->capfiles ? 2 * c->capfiles : 256;
			struct file *g = realloc(c->files, ncap * sizeof(*g));
			if (!g)
				return -1;
			c->files = g;
			c->capfiles = ncap;
		}
		struct file *f = &c->files[c->nfiles];
		memset(f, 0, sizeof(*f));
		f->size = f->mtime = -1;
		if (!(f->rel = strdup(rel)))
			return -1;
		if (px_strmap_put(c->rels, f->rel, c->nfiles, NULL) != PX_OK) {
			free(f->rel);
			return -1;
		}
		fi = c->nfiles++;
	}
	struct file *f = &c->files[fi];
	struct copy *g = realloc(f->copies, (f->ncopies + 1) * sizeof(*g));
	if (!g)
		return -1;
	f->copies = g;
	struct copy *cp = &g[f->ncopies];
	memset(cp, 0, sizeof(*cp));
	cp->mirror = mirror;
	cp->size = fd->size;
	cp->mtime = fd->mtime;
	if (!(cp->loc = strdup(loc)))
		return -1;
	cp->prov = prov_of(c, mirror, loc);
	*file_out = fi;
	*copy_out = f->ncopies++;
	return 0;
}

/* ------------------------------------------------------------ local folders */

struct ancestor {
	dev_t dev;
	ino_t ino;
};

static int walk_local(struct ctx *c, size_t mi, const char *dir, const char *rel, int depth,
		      struct ancestor *anc)
{
	struct mirror *m = &c->mirrors[mi];
	DIR *d = opendir(dir);
	if (!d) {
		say("mirror %s: %s: cannot read the folder: %s", m->arg, dir, strerror(errno));
		m->failed = 1;
		return 0;
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && !m->failed && (de = readdir(d))) {
		const char *name = de->d_name;
		if (name[0] == '.')
			continue;       /* hidden, and . and .. */
		if (++m->entries > MAX_ENTRIES) {
			say("mirror %s: more than %d entries", m->arg, MAX_ENTRIES);
			m->failed = 1;
			break;
		}
		char *path = NULL, *sub = NULL;
		struct stat st;
		if (asprintf(&path, "%s/%s", strcmp(dir, "/") ? dir : "", name) < 0 ||
		    asprintf(&sub, "%s%s", rel, name) < 0) {
			free(path);
			rc = -1;
			break;
		}
		if (stat(path, &st) != 0) {
			/* a dangling symlink beside the media is not ours to judge */
			free(path);
			free(sub);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			int loop = 0;
			for (int k = 0; k <= depth; k++)
				loop |= anc[k].dev == st.st_dev && anc[k].ino == st.st_ino;
			if (loop) {
				say("mirror %s: %s leads back to a folder above it: skipped", m->arg,
				    path);
			} else if (depth + 1 > c->o->max_depth) {
				say("mirror %s: %s is deeper than %ld levels (see --max-depth)", m->arg,
				    path, c->o->max_depth);
				m->failed = 1;
			} else {
				char *subdir = NULL;
				if (asprintf(&subdir, "%s/", sub) < 0) {
					rc = -1;
				} else {
					anc[depth + 1].dev = st.st_dev;
					anc[depth + 1].ino = st.st_ino;
					rc = walk_local(c, mi, path, subdir, depth + 1, anc);
					free(subdir);
				}
			}
		} else if (S_ISREG(st.st_mode) && wanted(c->o, name)) {
			size_t fi, ci;
			struct found fd = { .rel = sub, .loc = path, .size = (int64_t)st.st_size,
					    .mtime = (int64_t)st.st_mtime };
			int r = add_copy(c, mi, &fd, &fi, &ci);
			if (r < 0)
				rc = -1;
		}
		free(path);
		free(sub);
	}
	closedir(d);
	return rc;
}

/* ------------------------------------------------------------ HTTP */

static void enqueue(struct ctx *c, struct job *j, int front)
{
	struct prov *p = &c->provs[j->prov];
	if (front) {
		j->next = p->head;
		p->head = j;
		if (!p->tail)
			p->tail = j;
	} else {
		j->next = NULL;
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
	}
}

static void free_job(struct job *j)
{
	if (!j)
		return;
	free(j->url);
	free(j->rel);
	free(j);
}

static struct job *new_job(enum px_fetch_kind kind, size_t mirror, size_t prov, const char *url)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j || !(j->url = strdup(url))) {
		free(j);
		return NULL;
	}
	j->kind = kind;
	j->mirror = mirror;
	j->prov = prov;
	return j;
}

static int start(struct ctx *c, struct job *j)
{
	if (px_fetch_batch_add(c->batch, j->kind, j->url, j) != PX_OK)
		return -1;
	j->next = c->active;
	c->active = j;
	c->provs[j->prov].running++;
	c->running++;
	return 0;
}

static int start_jobs(struct ctx *c)
{
	for (size_t p = 0; p < c->nprovs; p++) {
		struct prov *pr = &c->provs[p];
		while (pr->head && pr->running < pr->limit && c->running < MAX_ALL_CONNECTIONS) {
			struct job *j = pr->head;
			pr->head = j->next;
			if (!pr->head)
				pr->tail = NULL;
			if (c->mirrors[j->mirror].failed) {
				free_job(j);
				continue;
			}
			if (start(c, j)) {
				free_job(j);
				return -1;
			}
		}
	}
	return 0;
}

/* Why a transfer failed, in words. */
static void transfer_why(const struct px_fetch_reply *r, char *why, size_t cap)
{
	if (r->too_big)
		snprintf(why, cap, "the page is larger than %ld MiB", MAX_LISTING_BYTES >> 20);
	else if (!r->done)
		snprintf(why, cap, "%s", r->error);
	else
		snprintf(why, cap, "HTTP %d%s", r->head.status,
			 r->head.status == 404 ? " (not found)"
			 : r->head.status == 401 || r->head.status == 403 ? " (access denied)"
			 : "");
}

/* Whether the answer says "busy, ask again" (lighttpd answers 503 to a
 * listing while it builds too many at once), or the connection broke
 * before an answer: then the same request is made again, later, up to
 * MAX_ATTEMPTS times. */
static int retry(struct ctx *c, struct job *j, const struct px_fetch_reply *rp)
{
	int st = rp->head.status;
	/* a range GET is stopped by the batch once its head is in */
	int answered = rp->done || (j->kind == PX_FETCH_FIRST_BYTE && rp->stopped);
	int busy = (answered && (st == 429 || st == 502 || st == 503 || st == 504)) ||
		   rp->broken;
	if (!busy || j->attempt + 1 >= MAX_ATTEMPTS)
		return 0;
	struct job *r = new_job(j->kind, j->mirror, j->prov, j->url);
	if (!r || (j->rel && !(r->rel = strdup(j->rel)))) {
		free_job(r);
		return -1;
	}
	r->depth = j->depth;
	r->file = j->file;
	r->copy = j->copy;
	r->attempt = j->attempt + 1;
	r->not_before = px_now_ms() + ((int64_t)RETRY_BASE_MS << j->attempt);
	r->next = c->delayed;
	c->delayed = r;
	return 1;
}

/* "URL: " when url is not the mirror's root, for a message's start. */
static const char *below_root(const struct mirror *m, const char *url)
{
	return strcmp(url, m->root) ? shown(url) : "";
}

static const char *colon_below(const struct mirror *m, const char *url)
{
	return strcmp(url, m->root) ? ": " : "";
}

/* A listing that did not come as a page: said, and the mirror failed. */
static void list_failed(struct mirror *m, const struct job *j, const struct px_fetch_reply *r)
{
	char why[600];
	if (r->binary && r->head.status == 200) {
		say("mirror %s: %s%snot a directory listing: binary data, not an HTML page",
		    shown(m->arg), below_root(m, j->url), colon_below(m, j->url));
		m->failed = 1;
		return;
	}
	transfer_why(r, why, sizeof(why));
	size_t al = strlen(m->arg);
	if (r->done && r->head.status == 404 && !strcmp(j->url, m->root) && al &&
	    m->arg[al - 1] != '/')
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 "; a MIRROR is a folder's URL, and %s was asked", shown(j->url));
	if (r->done && r->head.status >= 300 && r->head.status < 400)
		snprintf(why, sizeof(why), "HTTP %d: more than %d redirects, or one to "
			 "another scheme", r->head.status, PX_FETCH_MAX_REDIRS);
	say("mirror %s: %s%scannot list the folder: %s", shown(m->arg), below_root(m, j->url),
	    colon_below(m, j->url), why);
	m->failed = 1;
}

/* Remembers a listing's URL. 1 when it was listed already (said), 0,
 * -1 out of memory. */
static int listed_once(struct ctx *c, const struct mirror *m, const char *url,
		       const char *base)
{
	size_t seen;
	if (px_strmap_get(c->listed, base, &seen)) {
		say("mirror %s: %s leads to %s, listed already: skipped", shown(m->arg),
		    shown(url), shown(base));
		return 1;
	}
	char *key = strdup(base);
	char **keys = realloc(c->listed_keys, (c->nlisted + 1) * sizeof(*keys));
	if (!key || !keys) {
		free(key);
		if (keys)
			c->listed_keys = keys;
		return -1;
	}
	c->listed_keys = keys;
	keys[c->nlisted++] = key;
	if (px_strmap_put(c->listed, key, 0, NULL) == PX_ENOMEM)
		return -1;
	return 0;
}

/* A listing's subfolder: walked next, within --max-depth. 0, -1 out of
 * memory. Takes rel. */
static int list_dir(struct ctx *c, const struct job *j, const struct px_listing_entry *e,
		    char *rel)
{
	struct mirror *m = &c->mirrors[j->mirror];
	if (j->depth + 1 > c->o->max_depth) {
		say("mirror %s: %s is deeper than %ld levels (see --max-depth)", shown(m->arg),
		    shown(e->url), c->o->max_depth);
		m->failed = 1;
		free(rel);
		return 0;
	}
	struct job *sub = new_job(PX_FETCH_PAGE, j->mirror, prov_of(c, j->mirror, e->url),
				  e->url);
	if (!sub) {
		free(rel);
		return -1;
	}
	sub->rel = rel;
	sub->depth = j->depth + 1;
	enqueue(c, sub, 1);
	return 0;
}

/* A listing's file: a copy, and a HEAD when the page gave no size. 0, -1
 * out of memory. */
static int list_file(struct ctx *c, const struct job *j, const struct px_listing_entry *e,
		     const char *rel)
{
	size_t fi, ci;
	if (e->bad_date)
		say("%s: the listing dates it \"%s\", which is not a date and "
		    "time; that date is skipped", shown(e->url), shown(e->bad_date));
	struct found fd = { .rel = rel, .loc = e->url, .size = e->size, .mtime = e->mtime };
	int r = add_copy(c, j->mirror, &fd, &fi, &ci);
	if (r < 0)
		return -1;
	if (r == 0 && e->size < 0) {
		const struct copy *cp = &c->files[fi].copies[ci];
		struct job *h = new_job(PX_FETCH_HEAD, j->mirror, cp->prov, e->url);
		if (!h)
			return -1;
		h->file = fi;
		h->copy = ci;
		enqueue(c, h, 0);
	}
	return 0;
}

/* A listing's entries: folders to walk, files to take. 0, -1 out of memory. */
static int list_entries(struct ctx *c, const struct job *j, const struct px_listing *l)
{
	struct mirror *m = &c->mirrors[j->mirror];
	int rcode = 0;
	for (size_t i = 0; i < l->n && !m->failed && rcode == 0; i++) {
		const struct px_listing_entry *e = &l->entries[i];
		if (e->name[0] == '.')
			continue;       /* hidden, as in a local folder */
		if (++m->entries > MAX_ENTRIES) {
			say("mirror %s: more than %d entries", shown(m->arg), MAX_ENTRIES);
			m->failed = 1;
			break;
		}
		char *rel = NULL;
		if (asprintf(&rel, "%s%s%s", j->rel, e->name, e->is_dir ? "/" : "") < 0)
			return -1;
		if (e->is_dir) {
			rcode = list_dir(c, j, e, rel);
		} else {
			if (wanted(c->o, e->name))
				rcode = list_file(c, j, e, rel);
			free(rel);
		}
	}
	return rcode;
}

static int list_done(struct ctx *c, struct job *j, const struct px_fetch_reply *r)
{
	struct mirror *m = &c->mirrors[j->mirror];
	char err[512];
	int again = retry(c, j, r);
	if (again)
		return again < 0 ? -1 : 0;
	if ((r->binary && r->head.status == 200) || !r->done || r->head.status != 200 ||
	    r->too_big) {
		list_failed(m, j, r);
		return 0;
	}
	const char *base = r->url ? r->url : j->url;
	int seen = listed_once(c, m, j->url, base);
	if (seen)
		return seen < 0 ? -1 : 0;
	struct px_listing *l = NULL;
	enum px_status st = px_listing_parse(base, r->body ? r->body : "", r->len, &l, err,
					     sizeof(err));
	if (st == PX_ENOMEM)
		return -1;
	if (st != PX_OK) {
		say("mirror %s: %s%s%s", shown(m->arg), below_root(m, base), colon_below(m, base),
		    err);
		m->failed = 1;
		return 0;
	}
	int rcode = list_entries(c, j, l);
	px_listing_free(l);
	return rcode;
}

static int head_done(struct ctx *c, struct job *j, const struct px_fetch_reply *rp)
{
	struct copy *cp = &c->files[j->file].copies[j->copy];
	const struct file *f = &c->files[j->file];
	char why[600] = "";
	int64_t body_pos, size = -1;
	struct px_http_want want = { .offset = 0, .length = 0, .expect_size = -1,
				     .html_ok = px_http_is_html_path(f->rel) };
	int again = retry(c, j, rp);
	if (again)
		return again < 0 ? -1 : 0;
	c->heads++;
	/* a range GET is stopped by the batch once its head is in */
	int got_head = rp->done || (j->kind == PX_FETCH_FIRST_BYTE && rp->stopped &&
				    rp->head.status);
	if (got_head) {
		enum px_status st = px_http_judge(&rp->head, &want, &body_pos, &size, why,
						  sizeof(why));
		if (st == PX_OK && size >= 0) {
			/* Last-Modified is exact and zoned; a listing's date may be
			 * in the server's unnamed zone */
			if (rp->mtime >= 0)
				cp->mtime = rp->mtime;
			cp->size = size;
			return 0;
		}
		if (!why[0])
			snprintf(why, sizeof(why), "no size in the answer");
		/* a server that refuses HEAD, or answers it without a length:
		 * ask for one byte instead */
		if (j->kind == PX_FETCH_HEAD && (rp->head.status == 405 || rp->head.status == 501 ||
						 (rp->head.status == 200 && rp->head.clen < 0))) {
			struct job *r = new_job(PX_FETCH_FIRST_BYTE, j->mirror, j->prov, j->url);
			if (!r)
				return -1;
			r->file = j->file;
			r->copy = j->copy;
			r->attempt = j->attempt;
			enqueue(c, r, 1);
			return 0;
		}
	} else {
		transfer_why(rp, why, sizeof(why));
	}
	say("%s: %s: no size: %s; this copy is left out", shown(f->rel), shown(cp->loc), why);
	cp->failed = 1;
	c->head_failures++;
	return 0;
}

/* Retries whose time has come go first in their queue; the ms until the
 * next one's (at most 1000). */
static int64_t due_retries(struct ctx *c)
{
	int64_t now = px_now_ms(), wait_ms = 1000;
	for (struct job **pp = &c->delayed; *pp;) {
		struct job *j = *pp;
		if (j->not_before <= now) {
			*pp = j->next;
			enqueue(c, j, 1);
		} else {
			if (j->not_before - now < wait_ms)
				wait_ms = j->not_before - now;
			pp = &j->next;
		}
	}
	return wait_ms;
}

/* Takes the finished transfers' answers. The count taken, -1 out of memory. */
static int take_replies(struct ctx *c)
{
	struct px_fetch_reply *rp;
	int done = 0;
	while (px_fetch_batch_next(c->batch, &rp) == PX_OK) {
		struct job *j = rp->tag;
		for (struct job **pp = &c->active; *pp; pp = &(*pp)->next) {
			if (*pp == j) {
				*pp = j->next;
				break;
			}
		}
		c->provs[j->prov].running--;
		c->running--;
		done++;
		int r = c->mirrors[j->mirror].failed ? 0
			: j->kind == PX_FETCH_PAGE ? list_done(c, j, rp)
			: head_done(c, j, rp);
		free_job(j);
		px_fetch_reply_free(rp);
		if (r < 0)
			return -1;
	}
	return done;
}

static void free_jobs(struct job **list)
{
	while (*list) {
		struct job *j = *list;
		*list = j->next;
		free_job(j);
	}
}

static int walk_http(struct ctx *c)
{
	long t = c->o->timeout_s * 1000L;
	struct px_fetch_batch_opts bo = {
		.timeout_ms = t, .connect_timeout_ms = t < 10000 ? t : 10000L,
		.insecure = c->o->insecure, .ca_file = c->o->ca_file,
		.user_agent = "seamfs-catalog/" SEAMFS_VERSION,
		.max_connections = MAX_ALL_CONNECTIONS, .body_max = MAX_LISTING_BYTES,
	};
	int rc = 0;
	if (px_fetch_batch_new(&bo, &c->batch) != PX_OK)
		return -1;
	for (size_t i = 0; i < c->nmirrors; i++) {
		struct mirror *m = &c->mirrors[i];
		if (m->local || m->failed)
			continue;
		struct job *j = new_job(PX_FETCH_PAGE, i, m->prov, m->root);
		if (!j || !(j->rel = strdup(""))) {
			free_job(j);
			rc = -1;
			goto out;
		}
		enqueue(c, j, 0);
	}
	for (;;) {
		int64_t wait_ms = due_retries(c);
		if (start_jobs(c)) {
			rc = -1;
			break;
		}
		if (c->running == 0 && !c->delayed)
			break;
		int done = take_replies(c);
		if (done < 0) {
			rc = -1;
			goto out;
		}
		if (!done)
			px_fetch_batch_wait(c->batch, (int)wait_ms);
	}
out:
	/* jobs still running or waiting (out of memory only) */
	for (size_t p = 0; p < c->nprovs; p++) {
		free_jobs(&c->provs[p].head);
		c->provs[p].tail = NULL;
	}
	px_fetch_batch_free(c->batch);
	c->batch = NULL;
	free_jobs(&c->active);
	free_jobs(&c->delayed);
	return rc;
}

/* ------------------------------------------------------------ sizes */

/* The asset's size: the one most copies have (ties: the earliest mirror);
 * copies of another size are reported and not accepted. */
static void settle(struct ctx *c, struct file *f)
{
	int64_t best = -1;
	size_t best_n = 0, best_first = SIZE_MAX;
	for (size_t i = 0; i < f->ncopies; i++) {
		const struct copy *a = &f->copies[i];
		if (a->failed || a->size < 0)
			continue;
		size_t n = 0, first = SIZE_MAX;
		for (size_t k = 0; k < f->ncopies; k++) {
			const struct copy *b = &f->copies[k];
			if (!b->failed && b->size == a->size) {
				n++;
				if (b->mirror < first)
					first = b->mirror;
			}
		}
		if (n > best_n || (n == best_n && first < best_first)) {
			best = a->size;
			best_n = n;
			best_first = first;
		}
	}
	f->size = best;
	if (best < 0)
		return;
	const struct copy *ref = NULL;
	for (size_t i = 0; i < f->ncopies; i++) {
		struct copy *a = &f->copies[i];
		if (!a->failed && a->size == best && (!ref || a->mirror < ref->mirror))
			ref = a;
	}
	/* the date of the earliest mirror's copy that has one, among those
	 * of the asset's size (copies are in mirror order): the same at
	 * every run */
	for (size_t i = 0; i < f->ncopies && f->mtime < 0; i++) {
		const struct copy *a = &f->copies[i];
		if (!a->failed && a->size == best)
			f->mtime = a->mtime;
	}
	for (size_t i = 0; i < f->ncopies; i++) {
		struct copy *a = &f->copies[i];
		if (a->failed || a->size < 0)
			continue;
		if (a->size == best) {
			a->accepted = 1;
			continue;
		}
		say("size mismatch: %s: mirror %s has %lld bytes (%s), mirror %s has %lld bytes "
		    "(%s); %s's copy is left out of the asset's sources",
		    shown(f->rel), shown(c->mirrors[a->mirror].arg), (long long)a->size, shown(a->loc),
		    shown(c->mirrors[ref->mirror].arg), (long long)best, shown(ref->loc),
		    shown(c->mirrors[a->mirror].arg));
		c->mismatches++;
	}
}

static int copy_cmp_mirror(const void *a, const void *b)
{
	const struct copy *x = a, *y = b;
	return x->mirror < y->mirror ? -1 : x->mirror > y->mirror;
}

static int file_cmp(const void *a, const void *b)
{
	const struct file *const *x = a, *const *y = b;
	return strcmp((*x)->rel, (*y)->rel);
}

/* ------------------------------------------------------------ output */

static json_t *source_json(const struct ctx *c, const struct copy *cp)
{
	json_t *s = json_object();
	if (!s)
		return NULL;
	int local = c->mirrors[cp->mirror].local;
	if (json_object_set_new(s, local ? "path" : "url", json_string(cp->loc)) ||
	    json_object_set_new(s, "provider", json_string(c->provs[cp->prov].name))) {
		json_decref(s);
		return NULL;
	}
	return s;
}

static const char *json_loc(json_t *src)
{
	json_t *u = json_object_get(src, "url");
	if (!u)
		u = json_object_get(src, "path");
	return json_is_string(u) ? json_string_value(u) : NULL;
}

static int on_walked_mirror(const struct ctx *c, const char *loc)
{
	for (size_t i = 0; i < c->nmirrors; i++)
		if (c->mirrors[i].root && under(loc, c->mirrors[i].root))
			return 1;
	return 0;
}

static const struct copy *accepted_copy(const struct file *f, const char *loc)
{
	for (size_t i = 0; i < f->ncopies; i++)
		if (f->copies[i].accepted && strcmp(f->copies[i].loc, loc) == 0)
			return &f->copies[i];
	return NULL;
}

struct merged {
	json_t *root;               /* the existing catalog, updated in place */
	json_t *assets;             /* borrowed */
	struct px_strmap *by_path;  /* path → asset index (keys borrowed from root) */
	struct px_strmap *by_loc;   /* source url/path → asset index */
	struct px_strmap *ids;      /* id → asset index */
	char *matched;              /* per existing asset: taken by a walked file */
};

static int load_merge(struct ctx *c, struct merged *mg)
{
	char err[1024];
	struct px_catalog *cat = NULL;
	const char *file = c->o->merge;
	enum px_status st = px_catalog_load(file, &cat, err, sizeof(err));
	if (st != PX_OK) {
		say("--merge: %s", err);
		return st == PX_ENOMEM ? -1 : 1;
	}
	px_catalog_free(cat);
	json_error_t jerr;
	mg->root = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!mg->root) {
		say("--merge: %s:%d:%d: %s", file, jerr.line, jerr.column, jerr.text);
		return 1;
	}
	mg->assets = json_object_get(mg->root, "assets");
	size_t n = json_array_size(mg->assets);
	mg->by_path = px_strmap_new(n);
	mg->by_loc = px_strmap_new(n);
	mg->ids = px_strmap_new(n);
	mg->matched = calloc(n + 1, 1);
	if (!mg->by_path || !mg->by_loc || !mg->ids || !mg->matched)
		return -1;
	size_t i;
	json_t *a;
	json_array_foreach(mg->assets, i, a) {
		const char *id = json_string_value(json_object_get(a, "id"));
		const char *path = json_string_value(json_object_get(a, "path"));
		if (px_strmap_put(mg->ids, id, i, NULL) == PX_ENOMEM ||
		    px_strmap_put(mg->by_path, path, i, NULL) == PX_ENOMEM)
			return -1;
		size_t k;
		json_t *s;
		json_array_foreach(json_object_get(a, "sources"), k, s) {
			const char *loc = json_loc(s);
			if (loc && px_strmap_put(mg->by_loc, loc, i, NULL) == PX_ENOMEM)
				return -1;
		}
	}
	return 0;
}

static void free_merged(struct merged *mg)
{
	json_decref(mg->root);
	px_strmap_free(mg->by_path);
	px_strmap_free(mg->by_loc);
	px_strmap_free(mg->ids);
	free(mg->matched);
}

/* The sources of an existing asset matched to f: its own sources that are
 * not on a walked mirror as they were, those on one only if the walk
 * accepted them again, then f's other accepted copies. */
static json_t *merged_sources(struct ctx *c, json_t *old, const struct file *f)
{
	json_t *out = json_array();
	char *used = calloc(f->ncopies + 1, 1);
	if (!out || !used)
		goto oom;
	size_t k;
	json_t *s;
	json_array_foreach(old, k, s) {
		const char *loc = json_loc(s);
		if (!loc || !on_walked_mirror(c, loc)) {
			if (json_array_append(out, s))
				goto oom;
			continue;
		}
		const struct copy *cp = accepted_copy(f, loc);
		if (!cp)
			continue;       /* gone from the mirror, or another size */
		used[cp - f->copies] = 1;
		if (json_array_append(out, s))
			goto oom;
		c->provs[cp->prov].used = 1;
	}
	for (size_t i = 0; i < f->ncopies; i++) {
		if (!f->copies[i].accepted || used[i])
			continue;
		json_t *js = source_json(c, &f->copies[i]);
		if (!js || json_array_append_new(out, js))
			goto oom;
		c->provs[f->copies[i].prov].used = 1;
	}
	free(used);
	return out;
oom:
	free(used);
	json_decref(out);
	return NULL;
}

/* Whether f's walked path can be the catalog path of an asset. */
static int path_ok(struct ctx *c, const struct file *f)
{
	const char *why = px_catalog_bad_path(f->rel);
	if (!why && !px_utf8_valid(f->rel))
		why = "is not UTF-8";
	if (!why)
		return 1;
	char esc[600];
	px_catalog_escape(esc, sizeof(esc), f->rel);
	say("\"%s\" %s: left out", esc, why);
	c->skipped++;
	return 0;
}

static json_t *provider_json(const struct prov *p)
{
	json_t *o = json_object();
	if (!o || json_object_set_new(o, "name", json_string(p->name)) ||
	    (p->max_conn && json_object_set_new(o, "max_connections", json_integer(p->max_conn)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Builds the catalog. 0, 1 nothing to write (said), -1 out of memory. */
/* Whether f is an existing asset of mg's (*ai its index): by one of its
 * sources, else by its path; one asset, one walked file. */
static int existing(const struct merged *mg, const struct file *f, size_t *ai)
{
	int found = 0;
	for (size_t k = 0; mg->root && k < f->ncopies && !found; k++)
		found = f->copies[k].accepted && px_strmap_get(mg->by_loc, f->copies[k].loc, ai);
	if (mg->root && !found)
		found = px_strmap_get(mg->by_path, f->rel, ai);
	return found && !mg->matched[*ai];
}

/* An existing asset a, matched by walked file f: its sources on the walked
 * mirrors and its size are f's, its date stays. 0, -1 out of memory. */
static int merge_asset(struct ctx *c, json_t *a, const struct file *f)
{
	json_t *srcs = merged_sources(c, json_object_get(a, "sources"), f);
	if (!srcs)
		return -1;
	json_t *old = json_object_get(a, "size");
	if (json_is_integer(old) && json_integer_value(old) != f->size) {
		say("asset \"%s\" (%s): size %lld in %s, %lld on the mirrors: updated%s",
		    json_string_value(json_object_get(a, "id")), f->rel,
		    (long long)json_integer_value(old), c->o->merge, (long long)f->size,
		    json_object_get(a, "sha256") ? "; its sha256 is dropped" : "");
		json_object_del(a, "sha256");
	}
	if (json_object_set_new(a, "size", json_integer(f->size)) ||
	    json_object_set_new(a, "sources", srcs))
		return -1;
	/* an existing date stays: a library's "date added" must not move */
	if (f->mtime >= 0 && !json_object_get(a, "mtime") &&
	    json_object_set_new(a, "mtime", json_integer(f->mtime)))
		return -1;
	return 0;
}

/* A new asset for f, appended to assets: id and path are its relative
 * path (the id made unique against mg's). 0, -1 out of memory. */
static int new_asset(struct ctx *c, const struct merged *mg, const struct file *f,
		     json_t *assets)
{
	size_t ai;
	char *id = strdup(f->rel);
	if (!id)
		return -1;
	for (int n = 2; mg->ids && px_strmap_get(mg->ids, id, &ai); n++) {
		free(id);
		if (asprintf(&id, "%s#%d", f->rel, n) < 0)
			return -1;
	}
	json_t *na = json_object(), *srcs = json_array();
	if (!na || !srcs || json_object_set_new(na, "id", json_string(id)) ||
	    json_object_set_new(na, "path", json_string(f->rel)) ||
	    json_object_set_new(na, "size", json_integer(f->size)) ||
	    (f->mtime >= 0 && json_object_set_new(na, "mtime", json_integer(f->mtime)))) {
		free(id);
		json_decref(na);
		json_decref(srcs);
		return -1;
	}
	free(id);
	for (size_t k = 0; k < f->ncopies; k++) {
		if (!f->copies[k].accepted)
			continue;
		json_t *js = source_json(c, &f->copies[k]);
		if (!js || json_array_append_new(srcs, js)) {
			json_decref(na);
			json_decref(srcs);
			return -1;
		}
		c->provs[f->copies[k].prov].used = 1;
	}
	if (json_object_set_new(na, "sources", srcs) || json_array_append_new(assets, na))
		return -1;
	return 0;
}

/* Existing assets (the first nold) with sources on a walked mirror that
 * the walk did not find: kept as they were, and said. */
static void say_unfound(const struct ctx *c, json_t *assets, size_t nold,
			const char *matched)
{
	size_t i;
	json_t *a;
	json_array_foreach(assets, i, a) {
		if (i >= nold || matched[i])
			continue;
		size_t k;
		json_t *s;
		json_array_foreach(json_object_get(a, "sources"), k, s) {
			const char *loc = json_loc(s);
			if (loc && on_walked_mirror(c, loc)) {
				say("asset \"%s\": %s was not found on the mirrors (or had no "
				    "size); the asset is kept as it was",
				    json_string_value(json_object_get(a, "id")), shown(loc));
				break;
			}
		}
	}
}

/* Providers: those named by a new source, unless there already (then
 * their --max-connections is set on them). 0, -1 out of memory. */
static int add_providers(struct ctx *c, json_t *provs)
{
	for (size_t p = 0; p < c->nprovs; p++) {
		const struct prov *pr = &c->provs[p];
		size_t k;
		json_t *e;
		int have = 0;
		json_array_foreach(provs, k, e) {
			if (strcmp(json_string_value(json_object_get(e, "name")), pr->name) == 0) {
				have = 1;
				if (pr->max_conn &&
				    json_object_set_new(e, "max_connections", json_integer(pr->max_conn)))
					return -1;
			}
		}
		if (have || !pr->used)
			continue;
		json_t *pj = provider_json(pr);
		if (!pj || json_array_append_new(provs, pj))
			return -1;
	}
	return 0;
}

static int build(struct ctx *c, struct merged *mg, json_t **out, size_t *nnew, size_t *nkept)
{
	struct file **order = malloc((c->nfiles + 1) * sizeof(*order));
	json_t *root = NULL, *assets = NULL, *provs = NULL;
	int rc = -1;
	size_t nold = mg->root ? json_array_size(mg->assets) : 0;
	if (!order)
		return -1;
	for (size_t i = 0; i < c->nfiles; i++) {
		struct file *f = &c->files[i];
		qsort(f->copies, f->ncopies, sizeof(*f->copies), copy_cmp_mirror);
		settle(c, f);
		order[i] = f;
	}
	qsort(order, c->nfiles, sizeof(*order), file_cmp);
	if (mg->root) {
		root = json_incref(mg->root);
		assets = json_incref(mg->assets);
		provs = json_object_get(root, "providers");
		if (provs)
			json_incref(provs);
		else if (!(provs = json_array()) || json_object_set(root, "providers", provs))
			goto out;
	} else if (!(root = json_object()) || !(assets = json_array()) || !(provs = json_array()) ||
		   json_object_set(root, "providers", provs) ||
		   json_object_set(root, "assets", assets)) {
		goto out;
	}
	*nnew = *nkept = 0;
	for (size_t i = 0; i < c->nfiles; i++) {
		struct file *f = order[i];
		if (f->size < 0) {
			say("%s: no mirror gave its size: left out", shown(f->rel));
			c->skipped++;
			continue;
		}
		if (!path_ok(c, f))
			continue;
		size_t ai;
		json_t *a = existing(mg, f, &ai) ? json_array_get(assets, ai) : NULL;
		if (a && !json_object_get(a, "sources")) {
			say("%s: the path of asset \"%s\", a transcode or remux, in %s: left out",
			    f->rel, json_string_value(json_object_get(a, "id")), c->o->merge);
			c->skipped++;
			continue;
		}
		if (a) {
			if (merge_asset(c, a, f))
				goto out;
			mg->matched[ai] = 1;
			(*nkept)++;
			continue;
		}
		if (mg->root && px_strmap_get(mg->by_path, f->rel, &ai)) {
			say("%s: the path of another asset (\"%s\") in %s: left out", f->rel,
			    json_string_value(json_object_get(json_array_get(assets, ai), "id")),
			    c->o->merge);
			c->skipped++;
			continue;
		}
		if (new_asset(c, mg, f, assets))
			goto out;
		(*nnew)++;
	}
	if (mg->root)
		say_unfound(c, assets, nold, mg->matched);
	if (add_providers(c, provs))
		goto out;
	if (json_array_size(assets) == 0) {
		say("no %sfiles found on the mirrors: no catalog written%s",
		    c->o->all ? "" : "media or sidecar ", c->o->all ? "" : " (see --all and --ext)");
		rc = 1;
		goto out;
	}
	*out = json_incref(root);
	rc = 0;
out:
	json_decref(provs);
	json_decref(assets);
	json_decref(root);
	free(order);
	return rc;
}

/* ------------------------------------------------------------ main */

/* Walks the local mirrors. 0, -1 out of memory. */
static int walk_locals(struct ctx *c)
{
	for (size_t i = 0; i < c->nmirrors; i++) {
		struct mirror *m = &c->mirrors[i];
		if (!m->local)
			continue;
		struct ancestor *anc = calloc((size_t)c->o->max_depth + 2, sizeof(*anc));
		struct stat st;
		if (!anc)
			return -1;
		if (stat(m->root, &st) == 0) {
			anc[0].dev = st.st_dev;
			anc[0].ino = st.st_ino;
		}
		int r = walk_local(c, i, m->root, "", 0, anc);
		free(anc);
		if (r < 0)
			return -1;
	}
	return 0;
}

/* Writes cat (to -o's file atomically, else stdout), once the daemon's own
 * parser takes it. 0, 1 not written (said), -1 out of memory. */
static int write_catalog(const struct opts *o, json_t *cat)
{
	char *text = json_dumps(cat, JSON_INDENT(2));
	char err[1024];
	struct px_catalog *check = NULL;
	int rc = 1;
	if (!text)
		return -1;
	size_t len = strlen(text);
	enum px_status st = px_catalog_parse(o->output ? o->output : "(stdout)", text, len,
					     &check, err, sizeof(err));
	px_catalog_free(check);
	if (st != PX_OK) {
		say("the catalog made is not valid, not written: %s", err);
		goto out;
	}
	char *withnl = realloc(text, len + 2);
	if (!withnl) {
		rc = -1;
		goto out;
	}
	text = withnl;
	text[len++] = '\n';
	text[len] = '\0';
	if (o->output) {
		if (px_write_atomic(o->output, text, len, 0644, err, sizeof(err)) != PX_OK) {
			say("cannot write the catalog: %s", err);
			goto out;
		}
	} else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
		say("cannot write the catalog to stdout: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(text);
	return rc;
}
static void free_ctx(struct ctx *c)
{
	for (size_t i = 0; i < c->nfiles; i++) {
		for (size_t k = 0; k < c->files[i].ncopies; k++)
			free(c->files[i].copies[k].loc);
		free(c->files[i].copies);
		free(c->files[i].rel);
	}
	free(c->files);
	for (size_t i = 0; i < c->nmirrors; i++)
		free(c->mirrors[i].root);
	free(c->mirrors);
	for (size_t i = 0; i < c->nprovs; i++)
		free(c->provs[i].name);
	free(c->provs);
	px_strmap_free(c->rels);
	px_strmap_free(c->listed);
	for (size_t i = 0; i < c->nlisted; i++)
		free(c->listed_keys[i]);
	free(c->listed_keys);
}

int fs_catalog_main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct ctx c = { .o = &o };
	struct merged mg = { 0 };
	json_t *cat = NULL;
	int rc = EXIT_FAIL, r;
	size_t nnew = 0, nkept = 0;

	if ((r = parse_cmdline(argc, argv, &o)) != 0) {
		if (r < 0)
			say("out of memory");
		free_opts(&o);
		return r < 0 ? EXIT_FAIL : EXIT_USAGE;
	}
	if (o.help) {
		usage(stdout);
		free_opts(&o);
		return EXIT_OK;
	}
	if ((r = setup_mirrors(&c)) != 0) {
		if (r < 0)
			say("out of memory");
		rc = r == 1 ? EXIT_USAGE : EXIT_FAIL;
		goto out;
	}
	if (o.merge && (r = load_merge(&c, &mg)) != 0) {
		if (r < 0)
			say("out of memory");
		rc = r < 0 ? EXIT_FAIL : EXIT_CATALOG;
		goto out;
	}
	if (px_fetch_global_init() != PX_OK) {
		say("cannot initialise libcurl");
		goto out;
	}
	if (!(c.rels = px_strmap_new(1024)) || !(c.listed = px_strmap_new(256)))
		goto oom;
	if (walk_locals(&c) || walk_http(&c))
		goto oom;
	int failed = 0;
	for (size_t i = 0; i < c.nmirrors; i++)
		failed |= c.mirrors[i].failed;
	if (failed) {
		say("no catalog written: a mirror could not be walked (above)");
		goto out_cleanup;
	}
	r = build(&c, &mg, &cat, &nnew, &nkept);
	if (r < 0)
		goto oom;
	if (r > 0)
		goto out_cleanup;
	if ((r = write_catalog(&o, cat)) < 0)
		goto oom;
	if (r > 0)
		goto out_cleanup;
	say("%zu asset(s) from %zu mirror(s): %zu new, %zu updated%s; %zu size mismatch(es), "
	    "%zu copy(ies) without a size, %zu file(s) left out; %zu size request(s)%s%s",
	    json_array_size(json_object_get(cat, "assets")), c.nmirrors, nnew, nkept,
	    mg.root ? " (--merge)" : "", c.mismatches, c.head_failures, c.skipped, c.heads,
	    o.output ? "; written to " : "", o.output ? o.output : "");
	rc = EXIT_OK;
	goto out_cleanup;
oom:
	say("out of memory");
out_cleanup:
	px_fetch_global_cleanup();
out:
	json_decref(cat);
	free_merged(&mg);
	free_ctx(&c);
	free_opts(&o);
	return rc;
}
