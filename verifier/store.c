/*
 * store.c - the fingerprint store (store.h). A file looks like
 *
 *   {"version": 1, "asset": "heat-1995", "reference": "http://a/heat.mkv",
 *    "sources": {
 *      "http://a/heat.mkv": {"size": 1234, "etag": "\"5f-1a\"", "mtime": 1700000000,
 *        "time": 1700000100,
 *        "samples": [[0, 4096, "9f86...64 hex"], ...],
 *        "verdict": {"outcome": "match", "ref": "0123456789abcdef"}},
 *      "/srv/heat.mkv": {"size": 999, "etag": "", "mtime": -1, "time": 1700000100,
 *        "verdict": {"outcome": "size_mismatch", "ref": "0123456789abcdef",
 *                    "why": "has 999 bytes, the reference 1234"}}}}
 *
 * JSON holds UTF-8 only, while a source's name (a URL, a path on a
 * Latin-1 disk) and an ETag are bytes: a name or ETag that is not UTF-8 is
 * written "hex:" and its bytes in hex, which no URL, absolute path or
 * quoted ETag starts with, and read back to the same bytes.
 *
 * A put is a read-modify-write of the whole file: threads take the store's
 * mutex, and processes (the daemon and `seamfs verify`, or two daemons on
 * one state dir) an exclusive flock on FILE.lock, waited for at most
 * LOCK_WAIT_MS, so that neither loses the other's record. Reads need no
 * lock: files are replaced whole (tmp + rename).
 *
 * Every record is checked as it is read: sizes and times in range, the
 * samples exactly the plan of the record's size (offsets and lengths), each
 * digest 64 hex digits, a known outcome. Anything else makes the record (or
 * the file, for the top level) absent, with one log line naming the file,
 * the field and the value.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "hash.h"
#include "store.h"
#include "utf8.h"

#define HEX_PREFIX "hex:"
/* a name or ETag as the file writes it: itself, or "hex:" and two digits
 * a byte */
#define KEY_MAX (sizeof(HEX_PREFIX) + 2 * VF_STORE_MAX_NAME)
#define ETAG_KEY_MAX (sizeof(HEX_PREFIX) + 2 * VF_ETAG_MAX)

/* How the file writes s (at most KEY_MAX bytes with the NUL). */
static void to_key(const char *s, char *key, size_t cap)
{
	static const char digits[] = "0123456789abcdef";
	size_t n = strlen(s), k;
	if (px_utf8_valid(s) && strncmp(s, HEX_PREFIX, strlen(HEX_PREFIX)) != 0) {
		snprintf(key, cap, "%s", s);
		return;
	}
	k = (size_t)snprintf(key, cap, HEX_PREFIX);
	for (size_t i = 0; i < n && k + 2 < cap; i++) {
		key[k++] = digits[(unsigned char)s[i] >> 4];
		key[k++] = digits[(unsigned char)s[i] & 15];
	}
	key[k] = '\0';
}

static int hexdigit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The bytes the file's key stands for, into out. Returns -1 when a "hex:"
 * key is malformed or does not fit. */
static int from_key(const char *key, char *out, size_t cap)
{
	size_t pre = strlen(HEX_PREFIX), n = 0;
	if (strncmp(key, HEX_PREFIX, pre) != 0)
		return snprintf(out, cap, "%s", key) < (int)cap ? 0 : -1;
	for (const char *p = key + pre; *p; p += 2) {
		int hi = hexdigit(p[0]), lo = hi >= 0 ? hexdigit(p[1]) : -1;
		if (lo < 0 || n + 1 >= cap || (hi == 0 && lo == 0))
			return -1;
		out[n++] = (char)(hi * 16 + lo);
	}
	out[n] = '\0';
	return 0;
}

struct vf_store {
	char *dir;
	vf_log_fn log;
	void *log_ctx;
	pthread_mutex_t lock;     /* around every file's read-modify-write */
	struct px_store *shared;  /* cluster mode: the same records in Redis
				   * too (vf_store_share); NULL: files only */
	int shared_failing;       /* the last shared call failed (logged once) */
};

static void logf_(struct vf_store *s, const char *fmt, ...) PX_PRINTF(2, 3);
static void logf_(struct vf_store *s, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	if (!s || !s->log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	s->log(s->log_ctx, line);
}

enum px_status vf_store_open(const char *dir, vf_log_fn log, void *log_ctx,
			     struct vf_store **out, char *err, size_t errlen)
{
	struct vf_store *s;
	struct stat sb;

	*out = NULL;
	if (!dir || !dir[0]) {
		snprintf(err, errlen, "fingerprint store: no directory given");
		return PX_EINVAL;
	}
	if (px_mkdir_p(dir, 0700) || stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "fingerprint store %s: %s", dir,
			 errno ? strerror(errno) : "not a directory");
		return PX_EIO;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return PX_ENOMEM;
	}
	s->log = log;
	s->log_ctx = log_ctx;
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return PX_OK;
}

void vf_store_share(struct vf_store *s, struct px_store *shared)
{
	s->shared = shared;
}

void vf_store_free(struct vf_store *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->dir);
	free(s);
}

enum px_status vf_store_file(const struct vf_store *s, const char *asset, char *out,
			     size_t len)
{
	unsigned char d[VF_HASH_LEN];
	char hex[VF_HASH_HEX];
	enum px_status st = vf_hash_once(asset, strlen(asset), d);
	if (st != PX_OK)
		return st;
	vf_hash_hex(d, 8, hex);
	if (snprintf(out, len, "%s/%s.json", s->dir, hex) >= (int)len)
		return PX_EINVAL;
	return PX_OK;
}

int vf_seen_same(const struct vf_seen *a, const struct vf_seen *b)
{
	if (a->size < 0 || a->size != b->size)
		return 0;
	if ((a->etag[0] || b->etag[0]) && strcmp(a->etag, b->etag) != 0)
		return 0;
	if ((a->mtime >= 0 || b->mtime >= 0) && a->mtime != b->mtime)
		return 0;
	return 1;
}

/* ------------------------------------------------------------ decoding */

/* What an integer member may be: in [min, max]; absent gives def when
 * def_ok. */
struct int_rule {
	int64_t min, max;
	int def_ok;
	int64_t def;
};

/* -1 when absent: none (a sample, an offset, an mtime) */
static const struct int_rule sample_rule = { -1, VF_MAX_SAMPLES - 1, 1, -1 };
static const struct int_rule offset_rule = { -1, INT64_MAX, 1, -1 };
static const struct int_rule size_rule = { 0, INT64_MAX, 0, 0 };   /* required */
static const struct int_rule time_rule = { 0, INT64_MAX, 1, 0 };

/* An integer member by rule r. */
static int get_int(json_t *obj, const char *key, const struct int_rule *r, int64_t *out,
		   const char *where, char *err, size_t errlen)
{
	int64_t min = r->min, max = r->max, def = r->def;
	int def_ok = r->def_ok;
	json_t *v = json_object_get(obj, key);
	if (!v && def_ok) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		char *dump = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		snprintf(err, errlen, "%s.%s: expected an integer from %lld to %lld, got %.40s",
			 where, key, (long long)min, (long long)max, dump ? dump : "nothing");
		free(dump);
		return -1;
	}
	*out = json_integer_value(v);
	return 0;
}

static int decode_samples(json_t *arr, struct vf_fingerprint *fp, const char *where,
			  char *err, size_t errlen)
{
	if (!json_is_array(arr) || json_array_size(arr) != fp->plan.n) {
		snprintf(err, errlen, "%s.samples: expected an array of %zu samples (the plan "
			 "for %lld bytes), got %s%zu", where, fp->plan.n, (long long)fp->size,
			 json_is_array(arr) ? "" : "a non-array of size ",
			 json_is_array(arr) ? json_array_size(arr) : (size_t)0);
		return -1;
	}
	for (size_t i = 0; i < fp->plan.n; i++) {
		json_t *e = json_array_get(arr, i);
		json_t *off = json_array_get(e, 0), *len = json_array_get(e, 1);
		json_t *hex = json_array_get(e, 2);
		if (!json_is_array(e) || json_array_size(e) != 3 || !json_is_integer(off) ||
		    json_integer_value(off) != fp->plan.off[i] || !json_is_integer(len) ||
		    json_integer_value(len) != (json_int_t)fp->plan.len[i]) {
			snprintf(err, errlen, "%s.samples[%zu]: expected [%lld, %u, \"HEX\"] "
				 "(the plan for %lld bytes)", where, i,
				 (long long)fp->plan.off[i], fp->plan.len[i], (long long)fp->size);
			return -1;
		}
		if (!json_is_string(hex) ||
		    vf_hash_unhex(json_string_value(hex), json_string_length(hex), fp->sha[i],
				  VF_HASH_LEN)) {
			snprintf(err, errlen, "%s.samples[%zu]: bad digest '%.70s' (want 64 hex "
				 "digits)", where, i,
				 json_is_string(hex) ? json_string_value(hex) : "(not a string)");
			return -1;
		}
		fp->have[i] = 1;
	}
	return 0;
}

static int decode_verdict(json_t *v, struct vf_record *rec, const char *where,
			  char *err, size_t errlen)
{
	struct vf_verdict *vd = &rec->verdict;
	json_t *o = json_object_get(v, "outcome"), *ref = json_object_get(v, "ref");
	json_t *why = json_object_get(v, "why");
	int64_t n;

	memset(vd, 0, sizeof(*vd));
	vd->size = rec->seen.size;
	if (!json_is_object(v) || !json_is_string(o) ||
	    vf_outcome_parse(json_string_value(o), &vd->outcome) ||
	    vd->outcome == VF_INCONCLUSIVE) {
		snprintf(err, errlen, "%s.verdict.outcome: expected match, mismatch or "
			 "size_mismatch, got '%.40s'", where,
			 json_is_string(o) ? json_string_value(o) : "(not a string)");
		return -1;
	}
	if (ref && (!json_is_string(ref) ||
		    (json_string_length(ref) != 0 &&
		     (json_string_length(ref) != VF_FINGERPRINT_ID_LEN - 1 ||
		      vf_hash_unhex(json_string_value(ref), json_string_length(ref),
				    (unsigned char[8]){ 0 }, 8))))) {
		snprintf(err, errlen, "%s.verdict.ref: expected \"\" or 16 hex digits, got '%.40s'",
			 where, json_is_string(ref) ? json_string_value(ref) : "(not a string)");
		return -1;
	}
	snprintf(rec->ref, sizeof(rec->ref), "%s", ref ? json_string_value(ref) : "");
	if (get_int(v, "sample", &sample_rule, &n, where, err, errlen))
		return -1;
	vd->sample = (long)n;
	if (get_int(v, "offset", &offset_rule, &vd->offset, where, err, errlen))
		return -1;
	if (why && !json_is_string(why)) {
		snprintf(err, errlen, "%s.verdict.why: expected a string", where);
		return -1;
	}
	if (why)
		snprintf(vd->why, sizeof(vd->why), "%s", json_string_value(why));
	rec->has_verdict = 1;
	return 0;
}

static int decode_record(json_t *r, const char *source, struct vf_record *rec,
			 char *err, size_t errlen)
{
	char where[160];
	json_t *etag, *samples, *verdict;

	memset(rec, 0, sizeof(*rec));
	snprintf(where, sizeof(where), "sources[\"%.100s\"]", source);
	if (!json_is_object(r)) {
		snprintf(err, errlen, "%s: expected an object", where);
		return -1;
	}
	if (get_int(r, "size", &size_rule, &rec->seen.size, where, err, errlen) ||
	    get_int(r, "mtime", &offset_rule, &rec->seen.mtime, where, err, errlen) ||
	    get_int(r, "time", &time_rule, &rec->time, where, err, errlen))
		return -1;
	etag = json_object_get(r, "etag");
	if (etag && (!json_is_string(etag) || json_string_length(etag) >= ETAG_KEY_MAX ||
		     strlen(json_string_value(etag)) != json_string_length(etag) ||
		     from_key(json_string_value(etag), rec->seen.etag, sizeof(rec->seen.etag)))) {
		snprintf(err, errlen, "%s.etag: expected a string of at most %d bytes", where,
			 VF_ETAG_MAX - 1);
		return -1;
	}
	samples = json_object_get(r, "samples");
	if (samples) {
		rec->fp.size = rec->seen.size;
		vf_sample_plan(rec->fp.size, &rec->fp.plan);
		if (decode_samples(samples, &rec->fp, where, err, errlen))
			return -1;
		rec->has_fp = 1;
	}
	verdict = json_object_get(r, "verdict");
	if (verdict && decode_verdict(verdict, rec, where, err, errlen))
		return -1;
	return 0;
}

/* Checks a parsed file's top level. Returns 0 or -1 with err. */
static int check_root(json_t *root, const char *asset, char *err, size_t errlen)
{
	json_t *v = json_object_get(root, "version"), *a = json_object_get(root, "asset");
	json_t *src = json_object_get(root, "sources"), *ref = json_object_get(root, "reference");
	if (!json_is_object(root)) {
		snprintf(err, errlen, "(top level): expected an object");
		return -1;
	}
	if (!json_is_integer(v) || json_integer_value(v) != 1) {
		snprintf(err, errlen, "version: expected 1");
		return -1;
	}
	if (!json_is_string(a) || strcmp(json_string_value(a), asset) != 0) {
		snprintf(err, errlen, "asset: expected \"%.100s\", got %.100s", asset,
			 json_is_string(a) ? json_string_value(a) : "(not a string)");
		return -1;
	}
	if (!json_is_object(src) || json_object_size(src) > VF_STORE_MAX_SOURCES) {
		snprintf(err, errlen, "sources: expected an object of at most %d records",
			 VF_STORE_MAX_SOURCES);
		return -1;
	}
	if (ref && (!json_is_string(ref) || !json_object_get(src, json_string_value(ref)))) {
		snprintf(err, errlen, "reference: expected the name of a record in sources");
		return -1;
	}
	return 0;
}

static json_t *parse_text(const char *asset, const char *text, size_t len,
			  char *err, size_t errlen)
{
	json_error_t jerr;
	if (len > VF_STORE_MAX_FILE) {
		snprintf(err, errlen, "larger than %u bytes", VF_STORE_MAX_FILE);
		return NULL;
	}
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, errlen, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	if (check_root(root, asset, err, errlen)) {
		json_decref(root);
		return NULL;
	}
	return root;
}

enum px_status vf_store_parse(const char *asset, const char *text, size_t len,
			      size_t *nrecords, char *err, size_t errlen)
{
	const char *name;
	json_t *r, *root;
	struct vf_record *rec;

	*nrecords = 0;
	if (errlen)
		err[0] = '\0';
	root = parse_text(asset, text, len, err, errlen);
	if (!root)
		return PX_EINVAL;
	rec = malloc(sizeof(*rec));
	if (!rec) {
		json_decref(root);
		return PX_ENOMEM;
	}
	json_object_foreach(json_object_get(root, "sources"), name, r) {
		char e[300];
		if (decode_record(r, name, rec, e, sizeof(e)) == 0)
			(*nrecords)++;
		else if (errlen && !err[0])
			snprintf(err, errlen, "%s", e);
	}
	free(rec);
	json_decref(root);
	return PX_OK;
}

/* The asset's key in the shared store: PREFIX:vf:<the file's name>. */
static int shared_key(struct vf_store *s, const char *file, char *key, size_t cap)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	size_t n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".json") == 0)
		n -= 5;
	return px_store_key(s->shared, key, cap, "vf:%.*s", (int)n, base) < 0 ? -1 : 0;
}

static void shared_failed(struct vf_store *s, enum px_status st, const char *what)
{
	if (!s->shared_failing++)
		logf_(s, "shared store %s: %s: %s; fingerprints and verdicts fall back to the "
		      "local store until it answers", px_store_url(s->shared), what,
		      px_strerror(st));
}

/* The asset's records as the cluster shares them (cluster mode), NULL
 * when there are none or the store does not answer (then the local file
 * is what there is). Called with the lock. */
static json_t *load_shared(struct vf_store *s, const char *asset, const char *file)
{
	char key[600], err[400];
	struct px_reply *r = NULL;
	json_t *root = NULL;
	if (shared_key(s, file, key, sizeof(key)))
		return NULL;
	const char *argv[] = { "GET", key };
	enum px_status st = px_store_call(s->shared, 2, argv, NULL, &r);
	if (st != PX_OK) {
		shared_failed(s, st, "GET");
	} else {
		s->shared_failing = 0;
		if (r->type == PX_REPLY_STR) {
			root = parse_text(asset, r->str, r->len, err, sizeof(err));
			if (!root)
				logf_(s, "shared store: %s: corrupt record, treated as absent: %s", key,
				      err);
		}
	}
	px_reply_free(r);
	return root;
}

static json_t *load_file(struct vf_store *s, const char *asset, const char *file);

/* Reads and checks the asset's records: the local file's, and in cluster
 * mode the shared store's over them (a source recorded there wins; one
 * only here stays, so records made before the cluster are not lost). A
 * new empty root when both are absent or corrupt (logged). NULL only
 * without memory. Called with the lock. */
static json_t *load(struct vf_store *s, const char *asset, const char *file)
{
	json_t *local = load_file(s, asset, file);
	json_t *shared = s->shared && local ? load_shared(s, asset, file) : NULL;
	if (!shared)
		return local;
	json_t *ls = json_object_get(local, "sources"), *ss = json_object_get(shared, "sources");
	if (json_object_update_missing(ss, ls) ||
	    (!json_object_get(shared, "reference") && json_object_get(local, "reference") &&
	     json_object_set(shared, "reference", json_object_get(local, "reference")))) {
		json_decref(shared);
		return local;
	}
	json_decref(local);
	return shared;
}

/* Reads and checks the asset's file: a new empty root when it is absent
 * or corrupt (logged). NULL only without memory. Called with the lock. */
static json_t *load_file(struct vf_store *s, const char *asset, const char *file)
{
	char err[400];
	char *text = NULL;
	json_t *root = NULL;
	struct stat sb;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		if (errno != ENOENT)
			logf_(s, "%s: %s; treated as absent", file, strerror(errno));
		goto fresh;
	}
	if (fstat(fd, &sb)) {
		logf_(s, "%s: %s; treated as absent", file, strerror(errno));
		goto fresh;
	}
	if (sb.st_size > (off_t)VF_STORE_MAX_FILE) {
		logf_(s, "%s: larger than %u bytes; treated as absent", file, VF_STORE_MAX_FILE);
		goto fresh;
	}
	text = malloc((size_t)sb.st_size + 1);
	if (!text)
		goto fresh;
	size_t got = 0;
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, text + got, (size_t)sb.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	root = parse_text(asset, text, got, err, sizeof(err));
	if (!root)
		logf_(s, "%s: corrupt fingerprint file, treated as absent: %s", file, err);
fresh:
	if (fd >= 0)
		close(fd);
	free(text);
	if (!root)
		root = json_pack("{si ss s{}}", "version", 1, "asset", asset, "sources");
	return root;
}

#define LOCK_WAIT_MS 5000

/* Takes the exclusive lock of file's read-modify-write between processes:
 * the lock file's fd, or -1 with err (PX_ELOCKTIMEOUT: held too long). */
static int lock_file(const char *file, enum px_status *st, char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s.lock", file) >= (int)sizeof(path)) {
		*st = PX_EINVAL;
		snprintf(err, errlen, "%s.lock: path too long", file);
		return -1;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		*st = PX_EIO;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	for (int waited = 0;; waited++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= LOCK_WAIT_MS) {
			*st = errno == EWOULDBLOCK ? PX_ELOCKTIMEOUT : PX_EIO;
			snprintf(err, errlen, "%s: %s", path,
				 errno == EWOULDBLOCK ? "held by another process for over 5 s"
						      : strerror(errno));
			close(fd);
			return -1;
		}
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}

static int get_locked(struct vf_store *s, const char *asset, const char *source,
		      const struct vf_seen *now, struct vf_record *out, char *refname,
		      size_t reflen)
{
	char file[PATH_MAX], err[400], key[KEY_MAX];
	int found = 0;

	if (vf_store_file(s, asset, file, sizeof(file)) != PX_OK)
		return 0;
	json_t *root = load(s, asset, file);
	if (!root)
		return 0;
	if (!source) {
		json_t *ref = json_object_get(root, "reference");
		if (!json_is_string(ref) || from_key(json_string_value(ref), refname, reflen))
			goto out;
		source = refname;
	}
	to_key(source, key, sizeof(key));
	json_t *r = json_object_get(json_object_get(root, "sources"), key);
	if (!r)
		goto out;
	if (decode_record(r, source, out, err, sizeof(err))) {
		logf_(s, "%s: corrupt record, treated as absent: %s", file, err);
		goto out;
	}
	found = !now || vf_seen_same(&out->seen, now);
out:
	json_decref(root);
	return found;
}

int vf_store_get(struct vf_store *s, const char *asset, const char *source,
		 const struct vf_seen *now, struct vf_record *out)
{
	pthread_mutex_lock(&s->lock);
	int found = get_locked(s, asset, source, now, out, NULL, 0);
	pthread_mutex_unlock(&s->lock);
	return found;
}

int vf_store_reference(struct vf_store *s, const char *asset, char *source, size_t srclen,
		       struct vf_record *out)
{
	pthread_mutex_lock(&s->lock);
	int found = get_locked(s, asset, NULL, NULL, out, source, srclen);
	pthread_mutex_unlock(&s->lock);
	return found && out->has_fp;
}

/* ------------------------------------------------------------ encoding */

static json_t *encode_record(const struct vf_record *rec)
{
	char etag[ETAG_KEY_MAX];
	to_key(rec->seen.etag, etag, sizeof(etag));
	json_t *r = json_pack("{sI sI ss sI}", "size", (json_int_t)rec->seen.size,
			      "mtime", (json_int_t)rec->seen.mtime, "etag", etag,
			      "time", (json_int_t)rec->time);
	if (!r)
		return NULL;
	if (rec->has_fp && vf_fingerprint_complete(&rec->fp) && rec->fp.size == rec->seen.size) {
		json_t *arr = json_array();
		if (json_object_set_new(r, "samples", arr))
			goto fail;
		for (size_t i = 0; i < rec->fp.plan.n; i++) {
			char hex[VF_HASH_HEX];
			vf_hash_hex(rec->fp.sha[i], VF_HASH_LEN, hex);
			if (json_array_append_new(arr, json_pack("[I I s]",
					(json_int_t)rec->fp.plan.off[i],
					(json_int_t)rec->fp.plan.len[i], hex)))
				goto fail;
		}
	}
	if (rec->has_verdict && rec->verdict.outcome != VF_INCONCLUSIVE) {
		char why[sizeof(rec->verdict.why)];
		snprintf(why, sizeof(why), "%s", rec->verdict.why);
		px_utf8_scrub(why); /* only shown: it may quote a name */
		json_t *v = json_pack("{ss ss sI sI ss}",
				      "outcome", vf_outcome_name(rec->verdict.outcome),
				      "ref", rec->ref, "sample", (json_int_t)rec->verdict.sample,
				      "offset", (json_int_t)rec->verdict.offset,
				      "why", why);
		if (json_object_set_new(r, "verdict", v))
			goto fail;
	}
	return r;
fail:
	json_decref(r);
	return NULL;
}

/* Whether a record's name is a URL with userinfo or a query as seamfs
 * wrote it before names were redacted (redact.h: such a URL is now named
 * by its redacted form and "#h=" and 8 hex digits). */
static int legacy_secret(const char *key)
{
	size_t n = strncasecmp(key, "http://", 7) == 0 ? 7
		   : strncasecmp(key, "https://", 8) == 0 ? 8 : 0;
	size_t len = strlen(key);
	if (!n)
		return 0;
	if (len >= n + 11 && strncmp(key + len - 11, "#h=", 3) == 0 &&
	    strspn(key + len - 8, "0123456789abcdef") == 8)
		return 0;
	return memchr(key + n, '@', strcspn(key + n, "/?#")) || strchr(key + n, '?');
}

/* Drops the records of older seamfs named by a URL with its credentials:
 * no name looks them up any more (their sources are verified again), and
 * no secret stays on disk after the file's next write. */
static void drop_legacy_secrets(json_t *root)
{
	json_t *sources = json_object_get(root, "sources"), *v;
	json_t *ref = json_object_get(root, "reference");
	const char *key;
	void *tmp;
	if (json_is_string(ref) && legacy_secret(json_string_value(ref)))
		json_object_del(root, "reference");
	json_object_foreach_safe(sources, tmp, key, v) {
		if (legacy_secret(key))
			json_object_del(sources, key);
	}
}

enum px_status vf_store_put(struct vf_store *s, const char *asset, const char *source,
			    const struct vf_record *rec, int reference,
			    char *err, size_t errlen)
{
	char file[PATH_MAX], key[KEY_MAX];
	char *text = NULL;
	json_t *root = NULL, *r = NULL;
	enum px_status st = PX_ENOMEM;

	if (strlen(source) > VF_STORE_MAX_NAME || !source[0]) {
		snprintf(err, errlen, "source name '%.60s...': empty or longer than %d bytes",
			 source, VF_STORE_MAX_NAME);
		return PX_EINVAL;
	}
	if (reference && !(rec->has_fp && vf_fingerprint_complete(&rec->fp))) {
		snprintf(err, errlen, "%s: a reference needs a complete fingerprint", source);
		return PX_EINVAL;
	}
	if (vf_store_file(s, asset, file, sizeof(file)) != PX_OK) {
		snprintf(err, errlen, "%s: path too long", s->dir);
		return PX_EINVAL;
	}
	to_key(source, key, sizeof(key));
	pthread_mutex_lock(&s->lock);
	int lfd = lock_file(file, &st, err, errlen);
	if (lfd < 0) {
		pthread_mutex_unlock(&s->lock);
		return st;
	}
	root = load(s, asset, file);
	r = encode_record(rec);
	if (!root || !r) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	drop_legacy_secrets(root);
	json_t *sources = json_object_get(root, "sources");
	if (!json_object_get(sources, key) &&
	    json_object_size(sources) >= VF_STORE_MAX_SOURCES) {
		st = PX_EINVAL;
		snprintf(err, errlen, "%s: already %d records", file, VF_STORE_MAX_SOURCES);
		goto out;
	}
	json_t *ref = json_object_get(root, "reference");
	int was_ref = json_is_string(ref) && strcmp(json_string_value(ref), key) == 0;
	if (json_object_set_new(sources, key, r)) {
		r = NULL;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	r = NULL;
	if (reference ? json_object_set_new(root, "reference", json_string(key))
		      : was_ref ? json_object_del(root, "reference") : 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	st = px_write_atomic(file, text, strlen(text), 0600, err, errlen);
	if (s->shared) {
		/* cluster mode: the other hosts read it there; the local file
		 * stays the answer while the store does not (best effort: two
		 * hosts writing one asset at once may lose one's update, as two
		 * processes on one host may) */
		char skey[600];
		if (!shared_key(s, file, skey, sizeof(skey))) {
			const char *argv[] = { "SET", skey, text };
			enum px_status ss = px_store_call(s->shared, 3, argv, NULL, NULL);
			if (ss != PX_OK)
				shared_failed(s, ss, "SET");
			else
				s->shared_failing = 0;
		}
	}
out:
	close(lfd); /* lets the next process in */
	pthread_mutex_unlock(&s->lock);
	free(text);
	json_decref(r);
	json_decref(root);
	return st;
}
