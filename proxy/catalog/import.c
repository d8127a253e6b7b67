/*
 * import.c - catalogs from .strm directories and M3U/M3U8 playlists.
 *
 * Both importers read line-oriented text (a UTF-8 BOM skipped, CRLF or LF,
 * every line bounded) and feed one builder that owns the px_catalog under
 * construction. The builder validates each source line with the JSON
 * parser's own checks (catalog_i.h), finds or makes the implicit provider,
 * drops repeated sources of an asset, and keeps two maps of the paths
 * taken so far - files and the directories above them - so that a clash is
 * seen when an asset is added, where its file and line are still known.
 *
 * .strm: every file is one asset; a clash of two files' asset paths is an
 * error naming both, since only the user can say which one they meant.
 * M3U: entries are grouped by tvg-id (or title) first; the groups' folders
 * are claimed next, and the file names last, numbering " (2)", " (3)" in
 * playlist order, so the result depends on the text alone.
 *
 * The directory walk reads each directory's names, sorts them (the catalog
 * order, and so the first error, must not depend on the file system), and
 * descends with openat() so that long trees need no long paths. Symlinks
 * are followed; a directory that is its own ancestor (dev, ino) is a loop
 * and is skipped with a warning. Depth, entries and .strm count are bounded.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_i.h"
#include "import.h"
#include "log.h"
#include "redact.h"
#include "strmap.h"
#include "utf8.h"

/* File names longer than this (bytes) are cut, on a UTF-8 boundary, before
 * a " (NNN)" and the extension are added: a component stays under 255. */
#define NAME_MAX_BYTES 200

struct build {
	struct px_catalog *cat;
	size_t cap_assets;
	struct px_catalog_providers ps;
	struct px_strmap *files;     /* asset path → asset; keys: assets[].path */
	struct px_strmap *dirs;      /* directory path → asset that needed it */
	char **dir_keys;             /* owns the keys of dirs */
	size_t ndir_keys, cap_dir_keys;
	char *err;
	size_t errlen;
	/* screen: local paths outside strm_paths (NULL: none allowed) are
	 * left out at import, never stat'ed (px_import_path_allowed) */
	int screen;
	const char *strm_paths;
	size_t refused;              /* local paths left out so far */
};

/* The media extensions an asset path may take from its first source. */
static const char *const media_exts[] = {
	"3gp", "aac", "ac3", "avi", "divx", "dts", "flac", "flv", "iso", "m2ts",
	"m4a", "m4v", "mka", "mkv", "mov", "mp3", "mp4", "mpeg", "mpg", "mts",
	"ogg", "ogm", "ogv", "opus", "ts", "vob", "wav", "webm", "wma", "wmv", NULL
};

PX_PRINTF(2, 3)
static enum px_status fail(struct build *b, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	px_catalog_escape(b->err, b->errlen, msg);
	return PX_EINVAL;
}

/* As fail(), for a file or directory that cannot be read. */
PX_PRINTF(2, 3)
static enum px_status fail_io(struct build *b, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	px_catalog_escape(b->err, b->errlen, msg);
	return PX_EIO;
}

static enum px_status oom(struct build *b, const char *file)
{
	char efile[512];
	px_catalog_escape(efile, sizeof(efile), file);
	snprintf(b->err, b->errlen, "%s: out of memory", efile);
	return PX_ENOMEM;
}

static enum px_status build_init(struct build *b, const char *file, char *err, size_t errlen)
{
	memset(b, 0, sizeof(*b));
	b->err = err;
	b->errlen = errlen;
	b->cat = calloc(1, sizeof(*b->cat));
	b->ps.cat = b->cat;
	b->ps.names = px_strmap_new(16);
	b->files = px_strmap_new(64);
	b->dirs = px_strmap_new(16);
	if (!b->cat || !b->ps.names || !b->files || !b->dirs ||
	    !(b->cat->file = strdup(file)))
		return oom(b, file);
	/* whoever can write a playlist is not the operator: its local paths
	 * are held to strm_paths (px_sources_path_allowed) */
	b->cat->from_playlists = 1;
	return PX_OK;
}

static void build_release(struct build *b)
{
	px_catalog_free(b->cat);
	px_strmap_free(b->ps.names);
	px_strmap_free(b->files);
	px_strmap_free(b->dirs);
	for (size_t i = 0; i < b->ndir_keys; i++)
		free(b->dir_keys[i]);
	free(b->dir_keys);
	memset(b, 0, sizeof(*b));
}

/* Hands the catalog over to the caller. */
static struct px_catalog *build_take(struct build *b)
{
	struct px_catalog *cat = b->cat;
	b->cat = NULL;
	return cat;
}

/* Appends an asset without sources; its path is claimed separately. */
static enum px_status build_asset(struct build *b, const char *id, const char *path,
				  size_t *index)
{
	struct px_catalog *cat = b->cat;
	if (cat->nassets == b->cap_assets) {
		size_t ncap = b->cap_assets ? b->cap_assets * 2 : 16;
		struct px_asset *na = realloc(cat->assets, ncap * sizeof(*na));
		if (!na)
			return PX_ENOMEM;
		cat->assets = na;
		b->cap_assets = ncap;
	}
	struct px_asset *a = &cat->assets[cat->nassets];
	memset(a, 0, sizeof(*a));
	a->size = a->mtime = -1;
	a->copies = -1;
	a->kind = PX_ASSET_PLAIN;
	a->id = strdup(id);
	a->path = strdup(path);
	*index = cat->nassets++;  /* counted now so that px_catalog_free sees it */
	return a->id && a->path ? PX_OK : PX_ENOMEM;
}

/*
 * Whether path is free: not an asset's path, not a directory some asset
 * needs, and none of its parent directories an asset's path. Returns 1 when
 * free, else 0 with the asset it clashes with in *other.
 */
static int path_free(const struct build *b, const char *path, size_t *other)
{
	char buf[PATH_MAX];
	if (px_strmap_get(b->files, path, other))
		return 0;
	if (px_strmap_get(b->dirs, path, other))
		return 0;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return 1; /* px_catalog_bad_path has no length limit; the tree has */
	for (char *slash = strchr(buf, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		int clash = px_strmap_get(b->files, buf, other);
		*slash = '/';
		if (clash)
			return 0;
	}
	return 1;
}

/* Registers the directories above path as needed by asset index. */
static enum px_status claim_dirs(struct build *b, const char *path, size_t index)
{
	for (const char *slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/')) {
		size_t n = (size_t)(slash - path);
		char *key = strndup(path, n);
		if (!key)
			return PX_ENOMEM;
		if (px_strmap_get(b->dirs, key, NULL)) {
			free(key);
			continue;
		}
		if (b->ndir_keys == b->cap_dir_keys) {
			size_t ncap = b->cap_dir_keys ? b->cap_dir_keys * 2 : 16;
			char **nk = realloc(b->dir_keys, ncap * sizeof(*nk));
			if (!nk) {
				free(key);
				return PX_ENOMEM;
			}
			b->dir_keys = nk;
			b->cap_dir_keys = ncap;
		}
		b->dir_keys[b->ndir_keys++] = key;
		if (px_strmap_put(b->dirs, key, index, NULL) == PX_ENOMEM)
			return PX_ENOMEM;
	}
	return PX_OK;
}

/* Registers the asset's path (which path_free() accepted). */
static enum px_status claim_path(struct build *b, size_t index)
{
	const char *path = b->cat->assets[index].path;
	if (px_strmap_put(b->files, path, index, NULL) == PX_ENOMEM)
		return PX_ENOMEM;
	return claim_dirs(b, path, index);
}

/*
 * Checks a source line: an http(s) URL or an absolute path. Returns NULL
 * when good (hostport set), else a message in why. *unsupported is set for
 * a well-formed URL of a scheme seamfs does not serve (rtsp://, udp://).
 */
static const char *bad_location(const char *loc, char *hostport, size_t cap,
				char *why, size_t whylen, int *unsupported)
{
	const char *msg;
	*unsupported = 0;
	if (loc[0] == '/') {
		msg = px_catalog_bad_local(loc);
		if (!msg)
			snprintf(hostport, cap, "local");
		return msg;
	}
	size_t n = 0;
	if (isalpha((unsigned char)loc[0]))
		while (isalnum((unsigned char)loc[n]) || (loc[n] && strchr("+.-", loc[n])))
			n++;
	if (n == 0 || strncmp(loc + n, "://", 3) != 0) {
		/* not quoted: a .strm may be a symlink to any file root can
		 * read, and its first line must not reach a log or an error */
		snprintf(why, whylen, "the line (%zu bytes, not shown) is neither an http(s) URL "
			 "nor an absolute path", strlen(loc));
		return why;
	}
	if (!((n == 4 && strncasecmp(loc, "http", 4) == 0) ||
	      (n == 5 && strncasecmp(loc, "https", 5) == 0))) {
		*unsupported = 1;
		snprintf(why, whylen, "unsupported scheme '%.*s' (only http://, https:// or an "
			 "absolute path)", (int)(n > 32 ? 32 : n), loc);
		return why;
	}
	if (strchr(loc, '|')) {
		/* Kodi's "URL|Header=value": the header may be a secret, so the
		 * line is not quoted */
		snprintf(why, whylen, "the URL has a '|' (Kodi's header suffix is not supported: "
			 "give headers to a provider in a JSON catalog)");
		return why;
	}
	msg = px_catalog_bad_url(loc, hostport, cap);
	if (msg) {
		char shown[300];
		px_redact_url(loc, shown, sizeof(shown)); /* errors reach logs */
		snprintf(why, whylen, "\"%s\" %s", shown, msg);
		return why;
	}
	return NULL;
}

/* Adds a checked source to an asset unless it has it already. */
static enum px_status build_source(struct build *b, size_t index, const char *loc,
				   const char *hostport)
{
	struct px_asset *a = &b->cat->assets[index];
	int local = loc[0] == '/';
	size_t prov;
	for (size_t i = 0; i < a->nsources; i++) {
		const char *have = a->sources[i].url ? a->sources[i].url : a->sources[i].path;
		if (strcmp(have, loc) == 0)
			return PX_OK;
	}
	if (px_catalog_implicit_provider(&b->ps, hostport, &prov) != PX_OK)
		return PX_ENOMEM;
	struct px_source *ns = realloc(a->sources, (a->nsources + 1) * sizeof(*ns));
	if (!ns)
		return PX_ENOMEM;
	a->sources = ns;
	struct px_source *s = &ns[a->nsources];
	memset(s, 0, sizeof(*s));
	s->provider = prov;
	if (local)
		s->path = strdup(loc);
	else
		s->url = strdup(loc);
	if (!s->path && !s->url)
		return PX_ENOMEM;
	a->nsources++;
	return px_catalog_source_names(s); /* on failure freed with the catalog */
}

/* The last component of a source's path: no query or fragment for URLs. */
static void base_name(const char *loc, char *out, size_t cap)
{
	const char *p = loc, *end;
	if (loc[0] != '/') {
		p = strstr(loc, "://");
		p = p ? p + 3 : loc;
		p += strcspn(p, "/?#");   /* skip the authority */
		end = p + strcspn(p, "?#");
	} else {
		end = p + strlen(p);
	}
	const char *start = p;
	for (const char *q = p; q < end; q++)
		if (*q == '/')
			start = q + 1;
	size_t n = (size_t)(end - start);
	if (n >= cap)
		n = cap - 1;
	memcpy(out, start, n);
	out[n] = '\0';
}

/* The media extension of a source (lowercase, no dot), or "" when its name
 * has none of media_exts. */
static void media_ext(const char *loc, char *ext, size_t cap)
{
	char base[PX_IMPORT_MAX_LINE];
	base_name(loc, base, sizeof(base));
	ext[0] = '\0';
	const char *dot = strrchr(base, '.');
	if (!dot || dot == base || strlen(dot + 1) >= cap)
		return;
	for (const char *const *e = media_exts; *e; e++) {
		if (strcasecmp(*e, dot + 1) == 0) {
			snprintf(ext, cap, "%s", *e);
			return;
		}
	}
}

/* Whether s ends with suffix, ignoring case. */
static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/*
 * The next line of text from *pos: [*line, *line + *n), without its CR LF
 * and the blanks around it. Returns 0 at the end of text.
 */
static int next_line(const char *text, size_t len, size_t *pos, const char **line, size_t *n,
		     size_t *raw)
{
	if (*pos >= len)
		return 0;
	const char *s = text + *pos;
	const char *nl = memchr(s, '\n', len - *pos);
	size_t m = nl ? (size_t)(nl - s) : len - *pos;
	*pos += m + (nl ? 1 : 0);
	*raw = m;
	while (m && (s[m - 1] == '\r' || s[m - 1] == ' ' || s[m - 1] == '\t'))
		m--;
	while (m && (s[0] == ' ' || s[0] == '\t')) {
		s++;
		m--;
	}
	*line = s;
	*n = m;
	return 1;
}

static size_t skip_bom(const char *text, size_t len)
{
	return len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
}

/* Whether [dir, dir + n) names a folder that path lies below, by the
 * letters alone (no file system access). */
static int below(const char *path, const char *dir, size_t n)
{
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return 1;
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Whether path has a "." or ".." component: it could climb out of a folder
 * its letters seem to lie in. */
static int dotted(const char *path)
{
	for (const char *p = path; (p = strchr(p, '/')); ) {
		p++;
		size_t n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 1;
	}
	return 0;
}

/* Whether path lies below one of the folders, both as written (resolve 0:
 * path is not touched; a folder counts as written and resolved) or both
 * resolved (resolve 1, real is realpath(path)). */
static int in_folders(const char *path, const char *folders, int resolve)
{
	char dir[PATH_MAX], rdir[PATH_MAX];
	for (const char *p = folders; p && *p; p += strcspn(p, ":"), p += *p == ':') {
		size_t n = strcspn(p, ":");
		if (!n || n >= sizeof(dir))
			continue;
		memcpy(dir, p, n);
		dir[n] = '\0';
		if (!resolve && below(path, dir, n))
			return 1;
		if (realpath(dir, rdir) && below(path, rdir, strlen(rdir)))
			return 1;
	}
	return 0;
}

int px_import_path_allowed(const char *strm_paths, const char *path, char *why,
			   size_t whylen)
{
	char real[PATH_MAX];
	int ok = 0;

	if (!strm_paths) {
		snprintf(why, whylen, "is not allowed: strm_paths allows no local path "
			 "(set -o strm_paths=DIR to allow a folder)");
	} else if (path[0] != '/' || dotted(path) || !in_folders(path, strm_paths, 0)) {
		/* never touched: a stat() would tell whoever wrote the line
		 * whether the file exists, its size and its age */
		snprintf(why, whylen, "lies outside strm_paths (%s)", strm_paths);
	} else if (!realpath(path, real)) {
		snprintf(why, whylen, "cannot be resolved inside strm_paths (%s): %s", strm_paths,
			 strerror(errno));
	} else if (!in_folders(real, strm_paths, 1)) {
		snprintf(why, whylen, "lies outside strm_paths (%s) once symlinks are resolved",
			 strm_paths);
	} else {
		ok = 1;
	}
	return ok;
}

/*
 * Whether a checked source line may stay: a URL always; a local path when
 * not screened, or inside strm_paths. A refused one is counted and logged
 * with the file and line, never stat'ed.
 */
static int keep_local(struct build *b, const char *file, int lineno, const char *loc)
{
	char why[PATH_MAX + 200], efile[PATH_MAX];
	if (loc[0] != '/' || !b->screen ||
	    px_import_path_allowed(b->strm_paths, loc, why, sizeof(why)))
		return 1;
	b->refused++;
	px_catalog_escape(efile, sizeof(efile), file);
	px_warn("import", "%s:%d: path: the local path %s; left out", efile, lineno, why);
	return 0;
}

/* ---------------------------------------------------------------- .strm */

/* Parses one .strm file into an asset of b. */
static enum px_status strm_lines(struct build *b, const char *shown, const char *rel,
				 const char *text, size_t len)
{
	char loc[PX_IMPORT_MAX_LINE + 1], hostport[300], why[PX_IMPORT_MAX_LINE + 200];
	size_t pos = skip_bom(text, len), n, raw, index = 0;
	const char *line;
	int lineno = 0, unsupported, have = 0;
	size_t refused_before = b->refused;
	enum px_status st;

	if (len > PX_IMPORT_MAX_STRM_BYTES)
		return fail(b, "%s: larger than %d KiB, not a .strm file", shown,
			    PX_IMPORT_MAX_STRM_BYTES / 1024);
	while (next_line(text, len, &pos, &line, &n, &raw)) {
		lineno++;
		if (raw > PX_IMPORT_MAX_LINE)
			return fail(b, "%s:%d: url: line longer than %d bytes", shown, lineno,
				    PX_IMPORT_MAX_LINE);
		if (n == 0 || line[0] == '#')
			continue;
		if (memchr(line, '\0', n))
			return fail(b, "%s:%d: url: contains a NUL byte", shown, lineno);
		memcpy(loc, line, n);
		loc[n] = '\0';
		const char *msg = bad_location(loc, hostport, sizeof(hostport), why, sizeof(why),
					       &unsupported);
		if (msg)
			return fail(b, "%s:%d: url: %s", shown, lineno, msg);
		if (!keep_local(b, shown, lineno, loc))
			continue;
		if (!have) {
			/* the first source names the file: Heat.strm + heat.mkv → Heat.mkv */
			char ext[8], path[PATH_MAX];
			size_t keep = strlen(rel);
			if (ends_with(rel, ".strm"))
				keep -= 5;
			media_ext(loc, ext, sizeof(ext));
			int add = ext[0] && !(keep > strlen(ext) + 1 &&
					      rel[keep - strlen(ext) - 1] == '.' &&
					      strncasecmp(rel + keep - strlen(ext), ext, strlen(ext)) == 0);
			if (keep >= sizeof(path) - 8)
				return fail(b, "%s: path: longer than %d bytes", shown, PATH_MAX - 8);
			snprintf(path, sizeof(path), "%.*s%s%s", (int)keep, rel, add ? "." : "",
				 add ? ext : "");
			const char *bad = path[0] ? px_catalog_bad_path(path) : "is empty";
			if (bad)
				return fail(b, "%s: path: \"%s\" %s", shown, path, bad);
			size_t other;
			if (!path_free(b, path, &other)) {
				/* name the other file as this one is named: DIR/ + its id */
				size_t pre = ends_with(shown, rel) ? strlen(shown) - strlen(rel) : 0;
				return fail(b, "%s: path: \"%s\" clashes with \"%s\" of %.*s%s", shown,
					    path, b->cat->assets[other].path, (int)pre, shown,
					    b->cat->assets[other].id);
			}
			if (build_asset(b, rel, path, &index) || claim_path(b, index))
				return oom(b, shown);
			have = 1;
		}
		if (b->cat->assets[index].nsources == PX_IMPORT_MAX_SOURCES)
			return fail(b, "%s:%d: url: more than %d sources", shown, lineno,
				    PX_IMPORT_MAX_SOURCES);
		if ((st = build_source(b, index, loc, hostport)))
			return oom(b, shown);
	}
	if (!have && b->refused > refused_before) {
		/* every source was a path outside strm_paths (warned above) */
		char eshown[PATH_MAX];
		px_catalog_escape(eshown, sizeof(eshown), shown);
		px_warn("import", "%s: no source left; the file is not listed", eshown);
		return PX_OK;
	}
	if (!have)
		return fail(b, "%s: no URL (every line is blank or a comment)", shown);
	return PX_OK;
}

/* A .strm file's asset: rel (its path below the root) names it, so it is
 * made UTF-8 first, as the id and the path are. */
static enum px_status strm_parse(struct build *b, const char *shown, const char *rel,
				 const char *text, size_t len)
{
	int changed;
	char *urel = px_utf8_latin1(rel, strlen(rel), &changed);
	if (!urel)
		return oom(b, shown);
	if (changed)
		px_warn("import", "%s: the file name is not UTF-8; read as Latin-1", shown);
	enum px_status st = strm_lines(b, shown, urel, text, len);
	free(urel);
	return st;
}

enum px_status px_import_strm(const char *shown, const char *rel, const char *text,
			      size_t len, struct px_catalog **out, char *err, size_t errlen)
{
	struct build b;
	enum px_status st;

	*out = NULL;
	if ((st = build_init(&b, shown, err, errlen)) == PX_OK &&
	    (st = strm_parse(&b, shown, rel, text, len)) == PX_OK)
		*out = build_take(&b);
	build_release(&b);
	return st;
}

/* Reads a whole file of at most max bytes from fd (closed here). */
static enum px_status read_fd(int fd, const char *shown, size_t max, char **out, size_t *len,
			      char *err, size_t errlen)
{
	enum px_status st = PX_EIO;
	struct stat sb;
	char *buf = NULL, msg[1024] = "";
	size_t got = 0;

	*out = NULL;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		snprintf(msg, sizeof(msg), "%s: not a regular file", shown);
		goto out;
	}
	if ((uint64_t)sb.st_size > max) {
		snprintf(msg, sizeof(msg), "%s: larger than %zu KiB", shown, max / 1024);
		st = PX_EINVAL;
		goto out;
	}
	/* one byte more than the size, to see a file that grew */
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		snprintf(msg, sizeof(msg), "%s: out of memory", shown);
		st = PX_ENOMEM;
		goto out;
	}
	while (got < (size_t)sb.st_size + 1) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(msg, sizeof(msg), "%s: cannot read: %s", shown, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > (size_t)sb.st_size) {
		snprintf(msg, sizeof(msg), "%s: changed while it was read", shown);
		goto out;
	}
	*out = buf;
	*len = got;
	buf = NULL;
	st = PX_OK;
out:
	if (st != PX_OK)
		px_catalog_escape(err, errlen, msg);
	free(buf);
	close(fd);
	return st;
}

struct walk {
	struct build *b;
	const char *root;            /* as given, without trailing '/' */
	size_t nstrm, nentries;
	dev_t devs[PX_IMPORT_MAX_DEPTH + 2];
	ino_t inos[PX_IMPORT_MAX_DEPTH + 2];
};

static int cmp_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static enum px_status walk_dir(struct walk *w, int dfd, const char *rel, int depth);

/* One entry of a directory: a subdirectory, a .strm file, or ignored. */
static enum px_status walk_entry(struct walk *w, int dfd, const char *rel, const char *name,
				 int depth)
{
	struct build *b = w->b;
	char sub[PATH_MAX], shown[PATH_MAX + 64];
	struct stat sb;
	enum px_status st;

	if (snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", name) >=
	    (int)sizeof(sub) - 16)
		return fail(b, "%s/%s: path longer than %d bytes", w->root, rel, PATH_MAX - 16);
	snprintf(shown, sizeof(shown), "%s/%s", w->root, sub);
	if (fstatat(dfd, name, &sb, 0) != 0) {
		/* a dangling symlink beside the media is not ours to judge */
		if (!ends_with(name, ".strm"))
			return PX_OK;
		return fail_io(b, "%s: %s", shown, strerror(errno));
	}
	if (S_ISDIR(sb.st_mode)) {
		for (int i = 0; i <= depth; i++) {
			if (w->devs[i] == sb.st_dev && w->inos[i] == sb.st_ino) {
				char eshown[PATH_MAX];
				px_catalog_escape(eshown, sizeof(eshown), shown);
				px_warn("import", "%s: a symlink loop (it leads back to an enclosing "
					"directory); skipped", eshown);
				return PX_OK;
			}
		}
		if (depth + 1 > PX_IMPORT_MAX_DEPTH)
			return fail(b, "%s: more than %d directory levels below %s", shown,
				    PX_IMPORT_MAX_DEPTH, w->root);
		int sfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0) {
			return fail_io(b, "%s: cannot open the directory: %s", shown,
				       strerror(errno));
		}
		w->devs[depth + 1] = sb.st_dev;
		w->inos[depth + 1] = sb.st_ino;
		return walk_dir(w, sfd, sub, depth + 1);
	}
	if (!S_ISREG(sb.st_mode) || !ends_with(name, ".strm"))
		return PX_OK;
	if (++w->nstrm > PX_IMPORT_MAX_ASSETS)
		return fail(b, "%s: more than %d .strm files", w->root, PX_IMPORT_MAX_ASSETS);
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		return fail_io(b, "%s: cannot open: %s", shown, strerror(errno));
	}
	char *text;
	size_t len;
	if ((st = read_fd(fd, shown, PX_IMPORT_MAX_STRM_BYTES, &text, &len, b->err, b->errlen)))
		return st;
	st = strm_parse(b, shown, sub, text, len);
	free(text);
	return st;
}

/* Walks the directory open on dfd (closed here); rel is its relative path. */
static enum px_status walk_dir(struct walk *w, int dfd, const char *rel, int depth)
{
	struct build *b = w->b;
	enum px_status st = PX_OK;
	char **names = NULL;
	size_t nnames = 0, cap = 0;
	struct dirent *de;
	DIR *d = fdopendir(dfd);

	if (!d) {
		st = fail_io(b, "%s%s%s: cannot read the directory: %s", w->root,
			     rel[0] ? "/" : "", rel, strerror(errno));
		close(dfd);
		return st;
	}
	errno = 0;
	while ((de = readdir(d))) {
		/* hidden names (.git, .Trash, .seamfs) and . and .. */
		if (de->d_name[0] == '.')
			continue;
		if (++w->nentries > PX_IMPORT_MAX_ENTRIES) {
			st = fail(b, "%s: more than %d directory entries", w->root,
				  PX_IMPORT_MAX_ENTRIES);
			goto out;
		}
		if (nnames == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **nn = realloc(names, ncap * sizeof(*nn));
			if (!nn) {
				st = oom(b, w->root);
				goto out;
			}
			names = nn;
			cap = ncap;
		}
		if (!(names[nnames] = strdup(de->d_name))) {
			st = oom(b, w->root);
			goto out;
		}
		nnames++;
		errno = 0;
	}
	if (errno) {
		st = fail_io(b, "%s%s%s: cannot read the directory: %s", w->root,
			     rel[0] ? "/" : "", rel, strerror(errno));
		goto out;
	}
	if (nnames)
		qsort(names, nnames, sizeof(*names), cmp_names);
	for (size_t i = 0; i < nnames && st == PX_OK; i++)
		st = walk_entry(w, dirfd(d), rel, names[i], depth);
out:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return st;
}

/* px_import_strm_dir(), local paths screened when screen is set. */
static enum px_status strm_dir(const char *dir, int screen, const char *strm_paths,
			       struct px_catalog **out, char *err, size_t errlen)
{
	struct build b;
	struct walk w = { .b = &b };
	struct stat sb;
	char root[PATH_MAX];
	enum px_status st;

	*out = NULL;
	snprintf(root, sizeof(root), "%s", dir);
	for (size_t n = strlen(root); n > 1 && root[n - 1] == '/'; n--)
		root[n - 1] = '\0';
	w.root = root;
	if ((st = build_init(&b, dir, err, errlen)))
		goto out;
	b.screen = screen;
	b.strm_paths = strm_paths;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &sb)) {
		st = fail_io(&b, "%s: cannot open the directory: %s", root, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		goto out;
	}
	w.devs[0] = sb.st_dev;
	w.inos[0] = sb.st_ino;
	if ((st = walk_dir(&w, dfd, "", 0)))
		goto out;
	if (b.cat->nassets == 0 && b.refused) {
		st = fail(&b, "%s: no usable .strm files (%zu local path(s) outside strm_paths "
			  "left out, see the warnings above)", root, b.refused);
		goto out;
	}
	if (b.cat->nassets == 0) {
		st = fail(&b, "%s: no .strm files in the directory or below it", root);
		goto out;
	}
	*out = build_take(&b);
out:
	build_release(&b);
	return st;
}

/* ------------------------------------------------------------------ M3U */

struct entry {
	char *key;          /* "tvg-id:ID" or "title:TITLE": the asset's id */
	char *title;        /* never empty */
	char *group;        /* "" for none */
	char *loc;
	char *hostport;
	int line;           /* of the URL */
};

struct m3u {
	struct build *b;
	const char *file;
	struct entry *entries;
	size_t nentries, cap;
	size_t skipped;
	int latin1_line;    /* the first entry read as Latin-1, 0: none */
	/* the pending #EXTINF */
	int info_line;      /* 0: none */
	char *title, *tvg_id, *tvg_name, *group, *extgrp;
};

static void clear_info(struct m3u *m)
{
	free(m->title);
	free(m->tvg_id);
	free(m->tvg_name);
	free(m->group);
	free(m->extgrp);
	m->title = m->tvg_id = m->tvg_name = m->group = m->extgrp = NULL;
	m->info_line = 0;
}

/* A copy of [s, s + n) with blanks around it trimmed. */
static char *dup_trim(const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	return strndup(s, n);
}

/* Parses "#EXTINF:-1 tvg-id="x" group-title="y",Title" (NUL-terminated,
 * control characters already blanked) into the pending entry. */
static enum px_status parse_extinf(struct m3u *m, const char *s, int lineno)
{
	struct build *b = m->b;
	const char *p = s + strlen("#EXTINF:");

	clear_info(m);
	m->info_line = lineno;
	while (*p == ' ' || *p == '\t')
		p++;
	while (*p && strchr("+-0123456789.", *p))
		p++;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return fail(b, "%s:%d: #EXTINF: no ',' before the title", m->file, lineno);
		if (*p == ',')
			break;
		const char *name = p;
		while (*p && !strchr(" \t=,\"'", *p))
			p++;
		size_t nlen = (size_t)(p - name);
		if (*p != '=') {
			if (*p == '"' || *p == '\'')
				return fail(b, "%s:%d: #EXTINF: a quote outside an attribute value",
					    m->file, lineno);
			continue;  /* a bare word: not an attribute */
		}
		p++;
		const char *val;
		size_t vlen;
		if (*p == '"' || *p == '\'') {
			const char *close = strchr(p + 1, *p);
			if (!close)
				return fail(b, "%s:%d: #EXTINF: unterminated quote in attribute "
					    "\"%.*s\"", m->file, lineno, (int)(nlen > 64 ? 64 : nlen),
					    name);
			val = p + 1;
			vlen = (size_t)(close - val);
			p = close + 1;
		} else {
			val = p;
			while (*p && !strchr(" \t,", *p))
				p++;
			vlen = (size_t)(p - val);
		}
		char **slot = NULL;
		if (nlen == 6 && strncasecmp(name, "tvg-id", 6) == 0)
			slot = &m->tvg_id;
		else if (nlen == 8 && strncasecmp(name, "tvg-name", 8) == 0)
			slot = &m->tvg_name;
		else if (nlen == 11 && strncasecmp(name, "group-title", 11) == 0)
			slot = &m->group;
		if (slot) {
			free(*slot);
			if (!(*slot = dup_trim(val, vlen)))
				return oom(b, m->file);
		}
	}
	if (!(m->title = dup_trim(p + 1, strlen(p + 1))))
		return oom(b, m->file);
	return PX_OK;
}

/*
 * A path component from a title or group: '/' becomes '-', runs of blanks
 * one space, leading dots and blanks dropped, at most NAME_MAX_BYTES bytes
 * (cut on a UTF-8 boundary). May come out empty.
 */
static void sanitise(char *dst, const char *src)
{
	size_t n = 0;
	int blank = 0;
	for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
		unsigned char ch = *p;
		if (ch < 0x20 || ch == 0x7f || ch == ' ') {
			blank = 1;
			continue;
		}
		if (n == 0 && ch == '.')
			continue;
		if (blank && n > 0) {
			if (n + 1 > NAME_MAX_BYTES)
				break;
			dst[n++] = ' ';
		}
		blank = 0;
		if (n + 1 > NAME_MAX_BYTES)
			break;
		dst[n++] = ch == '/' ? '-' : (char)ch;
	}
	/* do not end inside a UTF-8 sequence that was cut */
	if (n > 0 && ((unsigned char)dst[n - 1] & 0x80)) {
		size_t k = n;
		while (k > 0 && ((unsigned char)dst[k - 1] & 0xc0) == 0x80)
			k--;
		if (k > 0) {
			unsigned char lead = (unsigned char)dst[k - 1];
			size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
			if (n - (k - 1) < want)
				n = k - 1;
		}
	}
	while (n > 0 && dst[n - 1] == ' ')
		n--;
	dst[n] = '\0';
}

/* Ends the pending #EXTINF with its URL line. */
static enum px_status add_entry(struct m3u *m, const char *loc, const char *hostport,
				int lineno)
{
	struct build *b = m->b;
	char base[PX_IMPORT_MAX_LINE];
	const char *title = m->title && m->title[0] ? m->title
			    : m->tvg_name && m->tvg_name[0] ? m->tvg_name : NULL;
	const char *group = m->group && m->group[0] ? m->group : m->extgrp ? m->extgrp : "";

	if (m->nentries == PX_IMPORT_MAX_ASSETS * 4)
		return fail(b, "%s:%d: more than %d entries", m->file, lineno,
			    PX_IMPORT_MAX_ASSETS * 4);
	if (!title) {
		base_name(loc, base, sizeof(base));
		char *dot = strrchr(base, '.');
		if (dot && dot != base)
			*dot = '\0';
		title = base[0] ? base : "Untitled";
	}
	if (m->nentries == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 64;
		struct entry *ne = realloc(m->entries, ncap * sizeof(*ne));
		if (!ne)
			return oom(b, m->file);
		m->entries = ne;
		m->cap = ncap;
	}
	struct entry *e = &m->entries[m->nentries];
	memset(e, 0, sizeof(*e));
	const char *id = m->tvg_id && m->tvg_id[0] ? m->tvg_id : NULL;
	/* ids, titles and groups become names, state keys and JSON: UTF-8;
	 * playlists in the wild are often Latin-1 */
	int c1 = 0, c2 = 0, c3 = 0;
	char *uid = id ? px_utf8_latin1(id, strlen(id), &c1) : NULL;
	e->title = px_utf8_latin1(title, strlen(title), &c2);
	e->group = px_utf8_latin1(group, strlen(group), &c3);
	size_t klen = strlen(uid ? uid : e->title ? e->title : "") + 16;
	e->key = malloc(klen);
	e->loc = strdup(loc);
	e->hostport = strdup(hostport);
	e->line = lineno;
	m->nentries++;
	if (!e->key || !e->title || !e->group || !e->loc || !e->hostport || (id && !uid)) {
		free(uid);
		return oom(b, m->file);
	}
	snprintf(e->key, klen, "%s:%s", uid ? "tvg-id" : "title", uid ? uid : e->title);
	free(uid);
	if ((c1 || c2 || c3) && !m->latin1_line) {
		m->latin1_line = m->info_line ? m->info_line : lineno;
		px_warn("import", "%s:%d: not UTF-8; titles and groups read as Latin-1 (this is "
			"the first such entry)", m->file, m->latin1_line);
	}
	clear_info(m);
	return PX_OK;
}

/* Reads the lines into m->entries. */
static enum px_status m3u_lines(struct m3u *m, const char *text, size_t len)
{
	char buf[PX_IMPORT_MAX_LINE + 1], hostport[300], why[PX_IMPORT_MAX_LINE + 200];
	size_t pos = skip_bom(text, len), n, raw;
	const char *line;
	int lineno = 0, unsupported;
	enum px_status st;

	while (next_line(text, len, &pos, &line, &n, &raw)) {
		lineno++;
		if (raw > PX_IMPORT_MAX_LINE)
			return fail(m->b, "%s:%d: line longer than %d bytes", m->file, lineno,
				    PX_IMPORT_MAX_LINE);
		if (n == 0)
			continue;
		memcpy(buf, line, n);
		buf[n] = '\0';
		if (buf[0] == '#') {
			/* names and titles become file names: no control bytes */
			for (char *q = buf; q < buf + n; q++)
				if ((unsigned char)*q < 0x20 || *q == 0x7f)
					*q = ' ';
			if (strncasecmp(buf, "#EXTINF:", 8) == 0) {
				if (m->info_line)
					px_warn("import", "%s:%d: #EXTINF without a URL line; entry "
						"skipped", m->file, m->info_line);
				m->skipped += m->info_line != 0;
				if ((st = parse_extinf(m, buf, lineno)))
					return st;
			} else if (strncasecmp(buf, "#EXTGRP:", 8) == 0 && m->info_line) {
				free(m->extgrp);
				if (!(m->extgrp = dup_trim(buf + 8, n - 8)))
					return oom(m->b, m->file);
			}
			/* #EXTM3U, #EXTVLCOPT, #KODIPROP, comments: nothing to do */
			continue;
		}
		if (memchr(buf, '\0', n))
			return fail(m->b, "%s:%d: url: contains a NUL byte", m->file, lineno);
		const char *msg = bad_location(buf, hostport, sizeof(hostport), why, sizeof(why),
					       &unsupported);
		if (msg && unsupported) {
			char ebuf[256];
			px_catalog_escape(ebuf, sizeof(ebuf), msg);
			px_warn("import", "%s:%d: url: %s; entry skipped", m->file, lineno, ebuf);
			m->skipped++;
			clear_info(m);
			continue;
		}
		if (msg)
			return fail(m->b, "%s:%d: url: %s", m->file, lineno, msg);
		if (!keep_local(m->b, m->file, lineno, buf)) {
			m->skipped++;
			clear_info(m);
			continue;
		}
		char base[PX_IMPORT_MAX_LINE];
		base_name(buf, base, sizeof(base));
		if (ends_with(base, ".m3u8") || ends_with(base, ".m3u")) {
			px_warn("import", "%s:%d: url: an HLS or nested playlist, not a file; entry "
				"skipped", m->file, lineno);
			m->skipped++;
			clear_info(m);
			continue;
		}
		if ((st = add_entry(m, buf, hostport, lineno)))
			return st;
	}
	if (m->info_line) {
		px_warn("import", "%s:%d: #EXTINF without a URL line; entry skipped", m->file,
			m->info_line);
		m->skipped++;
	}
	return PX_OK;
}

/* The entries into assets (one per key), each with its sources;
 * first[asset]: its first entry. */
static enum px_status m3u_group(struct m3u *m, size_t *first)
{
	struct build *b = m->b;
	enum px_status st = PX_OK;
	struct px_strmap *keys = px_strmap_new(m->nentries);
	if (!keys)
		return oom(b, m->file);
	for (size_t i = 0; i < m->nentries && st == PX_OK; i++) {
		struct entry *e = &m->entries[i];
		size_t a;
		if (!px_strmap_get(keys, e->key, &a)) {
			if (b->cat->nassets == PX_IMPORT_MAX_ASSETS) {
				st = fail(b, "%s:%d: more than %d assets", m->file, e->line,
					  PX_IMPORT_MAX_ASSETS);
				break;
			}
			/* the path is set below, once every folder is known */
			if (build_asset(b, e->key, "", &a) ||
			    px_strmap_put(keys, e->key, a, NULL) == PX_ENOMEM) {
				st = oom(b, m->file);
				break;
			}
			first[a] = i;
		}
		if (b->cat->assets[a].nsources == PX_IMPORT_MAX_SOURCES)
			st = fail(b, "%s:%d: url: more than %d sources for %s", m->file, e->line,
				  PX_IMPORT_MAX_SOURCES, e->key);
		else if (build_source(b, a, e->loc, e->hostport))
			st = oom(b, m->file);
	}
	px_strmap_free(keys);
	return st;
}

/* How assets get distinct names: "group/name\x01ext" → the first asset
 * with it (tried), whose numbered[] is the last " (k)" given to that
 * name; stems[asset] owns the key. */
struct naming {
	struct px_strmap *tried;
	char **stems;
	size_t *numbered;
};

/* Asset a's path from its first entry e: "group/title.ext", numbered
 * " (k)" past the paths taken. */
static enum px_status m3u_path(struct m3u *m, struct naming *nm, size_t a,
			       const struct entry *e)
{
	struct build *b = m->b;
	char name[NAME_MAX_BYTES + 1], group[NAME_MAX_BYTES + 1], path[2 * NAME_MAX_BYTES + 32];
	char ext[8];
	size_t other;
	sanitise(group, e->group);
	sanitise(name, e->title);
	if (!name[0])
		snprintf(name, sizeof(name), "Untitled");
	media_ext(e->loc, ext, sizeof(ext));
	if (!ext[0])
		snprintf(ext, sizeof(ext), "ts");
	/* numbers below the last one given for this name are all taken:
	 * a thousand "Untitled" cost a thousand lookups, not a million */
	size_t owner = a, k;
	if (asprintf(&nm->stems[a], "%s/%s\x01%s", group, name, ext) < 0) {
		nm->stems[a] = NULL;
		return oom(b, m->file);
	}
	int seen = px_strmap_get(nm->tried, nm->stems[a], &owner);
	size_t last = seen ? nm->numbered[owner] : 0;
	for (k = last + 1;; k++) {
		char num[16] = "";
		if (k > 1)
			snprintf(num, sizeof(num), " (%zu)", k);
		snprintf(path, sizeof(path), "%s%s%s%s.%s", group, group[0] ? "/" : "", name,
			 num, ext);
		if (path_free(b, path, &other))
			break;
	}
	nm->numbered[owner] = k;
	if (!seen && px_strmap_put(nm->tried, nm->stems[a], a, NULL) == PX_ENOMEM)
		return oom(b, m->file);
	/* sanitise() leaves nothing px_catalog_bad_path refuses */
	const char *bad = px_catalog_bad_path(path);
	if (bad)
		return fail(b, "%s:%d: path: \"%s\" %s", m->file, e->line, path, bad);
	struct px_asset *as = &b->cat->assets[a];
	free(as->path);
	if (!(as->path = strdup(path)) || claim_path(b, a))
		return oom(b, m->file);
	return PX_OK;
}

/* Groups the entries into assets, then gives each asset its path. */
static enum px_status m3u_assets(struct m3u *m)
{
	struct build *b = m->b;
	enum px_status st = PX_OK;
	size_t *first = NULL;   /* asset → its first entry */
	struct naming nm = { .tried = px_strmap_new(m->nentries) };
	char group[NAME_MAX_BYTES + 1], path[2 * NAME_MAX_BYTES + 32];

	if (!nm.tried || !(first = calloc(m->nentries + 1, sizeof(*first))) ||
	    !(nm.stems = calloc(m->nentries + 1, sizeof(*nm.stems))) ||
	    !(nm.numbered = calloc(m->nentries + 1, sizeof(*nm.numbered)))) {
		st = oom(b, m->file);
		goto out;
	}
	if ((st = m3u_group(m, first)))
		goto out;
	/* folders first, so that a file never takes a folder's name */
	for (size_t a = 0; a < b->cat->nassets; a++) {
		sanitise(group, m->entries[first[a]].group);
		if (group[0]) {
			snprintf(path, sizeof(path), "%s/x", group);
			if (claim_dirs(b, path, a)) {
				st = oom(b, m->file);
				goto out;
			}
		}
	}
	for (size_t a = 0; a < b->cat->nassets && st == PX_OK; a++)
		st = m3u_path(m, &nm, a, &m->entries[first[a]]);
out:
	for (size_t a = 0; nm.stems && a < b->cat->nassets; a++)
		free(nm.stems[a]);
	free(nm.stems);
	free(nm.numbered);
	px_strmap_free(nm.tried);
	free(first);
	return st;
}

enum px_status px_import_strm_dir(const char *dir, struct px_catalog **out,
				  char *err, size_t errlen)
{
	return strm_dir(dir, 0, NULL, out, err, errlen);
}


/* Whether local paths are screened (on), and the folders they must lie
 * in. */
struct screening {
	int on;
	const char *strm_paths;
};

/* px_import_m3u(), local paths screened as sc says. */
static enum px_status m3u_parse(const char *file, const struct screening *sc,
				const char *text, size_t len, struct px_catalog **out,
				char *err, size_t errlen)
{
	struct build b;
	struct m3u m = { .b = &b, .file = file };
	enum px_status st;

	*out = NULL;
	if ((st = build_init(&b, file, err, errlen)))
		goto out;
	b.screen = sc->on;
	b.strm_paths = sc->strm_paths;
	if (len > (size_t)PX_IMPORT_MAX_M3U_BYTES) {
		st = fail(&b, "%s: larger than %ld MiB", file, PX_IMPORT_MAX_M3U_BYTES >> 20);
		goto out;
	}
	if ((st = m3u_lines(&m, text, len)) || (st = m3u_assets(&m)))
		goto out;
	if (b.cat->nassets == 0) {
		if (m.skipped)
			st = fail(&b, "%s: no usable entries (%zu skipped, see the warnings above)",
				  file, m.skipped);
		else
			st = fail(&b, "%s: no entries (no line with an http(s) URL or an absolute "
				  "path)", file);
		goto out;
	}
	*out = build_take(&b);
out:
	clear_info(&m);
	for (size_t i = 0; i < m.nentries; i++) {
		free(m.entries[i].key);
		free(m.entries[i].title);
		free(m.entries[i].group);
		free(m.entries[i].loc);
		free(m.entries[i].hostport);
	}
	free(m.entries);
	build_release(&b);
	return st;
}

enum px_status px_import_m3u(const char *file, const char *text, size_t len,
			     struct px_catalog **out, char *err, size_t errlen)
{
	const struct screening none = { 0, NULL };
	return m3u_parse(file, &none, text, len, out, err, errlen);
}

/* px_import_m3u_load(), local paths screened when screen is set. */
static enum px_status m3u_load(const char *file, int screen, const char *strm_paths,
			       struct px_catalog **out, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	enum px_status st;

	*out = NULL;
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open the playlist: %s", file, strerror(errno));
		return PX_EIO;
	}
	if ((st = read_fd(fd, file, (size_t)PX_IMPORT_MAX_M3U_BYTES, &text, &len, err, errlen)))
		return st;
	const struct screening sc = { screen, strm_paths };
	st = m3u_parse(file, &sc, text, len, out, err, errlen);
	free(text);
	return st;
}

enum px_status px_import_m3u_load(const char *file, struct px_catalog **out,
				  char *err, size_t errlen)
{
	return m3u_load(file, 0, NULL, out, err, errlen);
}

enum px_status px_import_load(const char *path, const char *strm_paths,
			      struct px_catalog **out, char *err, size_t errlen)
{
	struct stat sb;

	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
		return strm_dir(path, 1, strm_paths, out, err, errlen);
	if (ends_with(path, ".m3u") || ends_with(path, ".m3u8"))
		return m3u_load(path, 1, strm_paths, out, err, errlen);
	return px_catalog_load(path, out, err, errlen);
}
