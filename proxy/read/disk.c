/*
 * disk.c - heads, tails and indexes (cache.h) kept on local disk, across
 * remounts, restarts and reboots.
 *
 * A library rescan after a restart would otherwise pay every head and
 * tail again. Each part the memory cache (cache.c) fills is also written
 * here, in cache_dir, as one file per asset and part: a text header (the
 * asset's size and mtime, the part's range, the source it came from with
 * its ETag and Last-Modified as sent, and a SHA-256 of the header's fields
 * and the bytes) and the bytes. A file's name is a hash of the asset's id, so a
 * part is found with no index; cache_dir holds nothing else.
 *
 * A part is served only when it checks on load: the asset's size and
 * mtime and the part's range as asked, the source one of the asset's (its
 * ETag and Last-Modified equal where a probe saw them), and the SHA-256
 * over what it holds. A later part's answer that names another ETag or
 * Last-Modified drops the slot and its copy here (cache.c). Anything else (a torn file, a flipped byte, an asset that changed
 * size) is removed and counted as a reject; the reader fetches as if
 * there had been none.
 *
 * Writes never stall a reader: the fetch thread only queues the part
 * (px_disk_want), and the tier's thread copies it under the cache lock
 * and writes it with px_write_atomic_at (a new file made with O_EXCL and
 * O_NOFOLLOW under a random name, synced, renamed in place): a crash
 * leaves the old part or the new one. The files' total stays within
 * cache_max_bytes, the least recently used parts (a load touches the
 * file's mtime) evicted whole. A write that fails, a full disk above all,
 * turns the tier off with one warning; reads go on from memory and the
 * origins.
 *
 * Lock: d->lock guards the queue, the list of parts and the counters;
 * never held across file I/O but the unlink of an evicted part.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "disk.h"
#include "hash.h"
#include "log.h"

#define QUEUE 256            /* parts waiting to be written */
#define NAME_LEN 40          /* 32 hex digits, ".head", ".tail" or ".indx", NUL */
#define HEADER_MAX 2048
#define MAGIC "seamfs-part 1\n"

struct part {
	char name[NAME_LEN];
	int64_t bytes;           /* the file's size */
	int64_t used;            /* last use, ns since the epoch */
};

struct px_disk {
	int dirfd;
	char dir[PATH_MAX];
	int64_t max;
	px_disk_persist_fn persist;
	void *ctx;
	pthread_t thread;
	int started;

	pthread_mutex_t lock;    /* guards what follows */
	pthread_cond_t cond;
	struct { size_t asset; int which; } queue[QUEUE];
	size_t qhead, qlen;
	int stop;
	int on;
	struct part *parts;
	size_t nparts, cap;
	int64_t bytes;
	uint64_t hits, hit_bytes, stored, stored_bytes, evictions, rejects;
	char why_off[300];
};

/* The part's kind, four letters: in its file's name and its header. */
static const char *kind(int which)
{
	static const char *const kinds[] = { "head", "tail", "indx" };
	return which >= 0 && which < 3 ? kinds[which] : "none";
}

/* The file name of asset id's part: a hash of the id, so any id fits. */
static void part_name(const char *id, int which, char out[NAME_LEN])
{
	unsigned char d[VF_HASH_LEN];
	char hex[2 * VF_HASH_LEN + 1];
	if (vf_hash_once(id, strlen(id), d) != PX_OK)
		memset(d, 0, sizeof(d));
	vf_hash_hex(d, 16, hex);
	snprintf(out, NAME_LEN, "%.32s.%s", hex, kind(which));
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The index of the part named name, or -1. Lock held. */
static long find(const struct px_disk *d, const char *name)
{
	for (size_t i = 0; i < d->nparts; i++)
		if (strcmp(d->parts[i].name, name) == 0)
			return (long)i;
	return -1;
}

/* Forgets part i (the file is gone or going). Lock held. */
static void forget(struct px_disk *d, size_t i)
{
	d->bytes -= d->parts[i].bytes;
	d->parts[i] = d->parts[--d->nparts];
}

/* Notes a part of bytes, used at used. Lock held. 0, or -1 out of memory. */
static int note(struct px_disk *d, const char *name, int64_t bytes, int64_t used)
{
	long i = find(d, name);
	if (i >= 0)
		forget(d, (size_t)i);
	if (d->nparts == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		struct part *p = realloc(d->parts, cap * sizeof(*p));
		if (!p)
			return -1;
		d->parts = p;
		d->cap = cap;
	}
	struct part *p = &d->parts[d->nparts++];
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->bytes = bytes;
	p->used = used;
	d->bytes += bytes;
	return 0;
}

/* Whether name is one of ours: a part, or a part's temporary file. */
static int ours(const char *name, int *tmp)
{
	size_t n = strlen(name), i = 0;
	while (i < n && i < 32 && ((name[i] >= '0' && name[i] <= '9') ||
				   (name[i] >= 'a' && name[i] <= 'f')))
		i++;
	if (i != 32 || (strncmp(name + 32, ".head", 5) && strncmp(name + 32, ".tail", 5) &&
			strncmp(name + 32, ".indx", 5)))
		return 0;
	char base[NAME_LEN];
	snprintf(base, sizeof(base), "%.37s", name);
	*tmp = n != 37;
	return n == 37 || px_write_atomic_tmp(name, base);
}

/* Lists the parts in the directory; removes the temporary files a crash
 * left. Before the thread starts. */
static void scan(struct px_disk *d)
{
	int fd = fcntl(d->dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(dir))) {
		struct stat sb;
		int tmp;
		if (!ours(e->d_name, &tmp) ||
		    fstatat(d->dirfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode))
			continue;
		if (tmp) {
			(void)unlinkat(d->dirfd, e->d_name, 0); /* torn by a crash */
			continue;
		}
		(void)note(d, e->d_name, (int64_t)sb.st_size,
			   (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec);
	}
	closedir(dir);
}

/* Turns the tier off, once, saying why. Lock held. */
static void turn_off(struct px_disk *d, const char *why)
{
	if (!d->on)
		return;
	d->on = 0;
	snprintf(d->why_off, sizeof(d->why_off), "%s", why);
	px_warn("cache", "cache_dir %s: %s: heads and tails are no longer kept on disk "
		"(reads go on)", d->dir, why);
}

static void *disk_main(void *arg)
{
	struct px_disk *d = arg;
	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		if (!d->qlen) {
			pthread_cond_wait(&d->cond, &d->lock);
			continue;
		}
		size_t asset = d->queue[d->qhead].asset;
		int which = d->queue[d->qhead].which;
		d->qhead = (d->qhead + 1) % QUEUE;
		d->qlen--;
		int on = d->on;
		pthread_mutex_unlock(&d->lock);
		if (on)
			d->persist(d->ctx, asset, which);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

enum px_status px_disk_open(const char *dir, int64_t max_bytes, px_disk_persist_fn persist,
			    void *ctx, struct px_disk **out)
{
	struct px_disk *d = calloc(1, sizeof(*d));
	*out = NULL;
	if (!d)
		return PX_ENOMEM;
	d->dirfd = -1;
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	d->max = max_bytes;
	d->persist = persist;
	d->ctx = ctx;
	d->on = 1;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	struct stat sb;
	if (px_mkdir_p(dir, 0700) || (d->dirfd = px_dir_open(dir)) < 0 || fstat(d->dirfd, &sb)) {
		px_warn("cache", "cache_dir %s: %s: heads and tails are not kept on disk", dir,
			strerror(errno));
		px_disk_free(d);
		return PX_OK;
	}
	/* parts are removed and replaced by name: only in a folder nobody
	 * else can plant a file or a link in */
	if (sb.st_uid != geteuid() || (sb.st_mode & 022)) {
		px_warn("cache", "cache_dir %s: not ours, or writable by others: heads and tails "
			"are not kept on disk", dir);
		px_disk_free(d);
		return PX_OK;
	}
	scan(d);
	if (pthread_create(&d->thread, NULL, disk_main, d) != 0) {
		px_warn("cache", "cache_dir %s: no thread to write with: heads and tails are "
			"not kept on disk", dir);
		px_disk_free(d);
		return PX_OK;
	}
	d->started = 1;
	px_info("cache", "cache_dir %s: %zu heads and tails kept (%lld of %lld bytes)", dir,
		d->nparts, (long long)d->bytes, (long long)d->max);
	*out = d;
	return PX_OK;
}

void px_disk_free(struct px_disk *d)
{
	if (!d)
		return;
	if (d->started) {
		pthread_mutex_lock(&d->lock);
		d->stop = 1;
		pthread_cond_signal(&d->cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	if (d->dirfd >= 0)
		close(d->dirfd);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d->parts);
	free(d);
}

void px_disk_want(struct px_disk *d, size_t asset, int which)
{
	pthread_mutex_lock(&d->lock);
	if (d->on && d->qlen < QUEUE) {
		size_t at = (d->qhead + d->qlen++) % QUEUE;
		d->queue[at].asset = asset;
		d->queue[at].which = which;
		pthread_cond_signal(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
}

/* The header's fields (without the digest line) for m into out. Returns
 * their length, or -1 when they do not fit or a field holds a newline. */
static int fields(const char *id, int which, const struct px_disk_meta *m, char *out,
		  size_t cap)
{
	unsigned char d[VF_HASH_LEN];
	char hex[2 * VF_HASH_LEN + 1];
	if (strchr(m->source, '\n') || strchr(m->etag, '\n') ||
	    vf_hash_once(id, strlen(id), d) != PX_OK)
		return -1;
	vf_hash_hex(d, VF_HASH_LEN, hex);
	int n = snprintf(out, cap, MAGIC "asset %s\npart %s\nsize %" PRId64 "\nasset_mtime %"
			 PRId64 "\nstart %" PRId64 "\nlen %" PRId64 "\nhave %" PRId64 "\nsource %s\n"
			 "etag %s\nmtime %" PRId64 "\n", hex, kind(which), m->size, m->asset_mtime,
			 m->start, m->len, m->have, m->source, m->etag, m->mtime);
	return n > 0 && (size_t)n < cap ? n : -1;
}

/* The digest of the fields and the bytes, in hex. */
static int digest(const char *f, size_t flen, const unsigned char *buf, int64_t have,
		  char hex[2 * VF_HASH_LEN + 1])
{
	struct vf_hash *h = NULL;
	unsigned char d[VF_HASH_LEN];
	int ok = vf_hash_new(&h) == PX_OK && vf_hash_update(h, f, flen) == PX_OK &&
		 vf_hash_update(h, buf, (size_t)have) == PX_OK && vf_hash_final(h, d) == PX_OK;
	vf_hash_free(h);
	if (ok)
		vf_hash_hex(d, VF_HASH_LEN, hex);
	return ok;
}

/* Evicts the least recently used parts (never keep) until need more bytes
 * fit. Lock held. */
static void evict(struct px_disk *d, int64_t need, const char *keep)
{
	while (d->nparts && d->bytes + need > d->max) {
		size_t v = SIZE_MAX;
		for (size_t i = 0; i < d->nparts; i++)
			if (strcmp(d->parts[i].name, keep) &&
			    (v == SIZE_MAX || d->parts[i].used < d->parts[v].used))
				v = i;
		if (v == SIZE_MAX)
			break;
		(void)unlinkat(d->dirfd, d->parts[v].name, 0);
		forget(d, v);
		d->evictions++;
	}
}

void px_disk_store(struct px_disk *d, const char *id, int which, const struct px_disk_meta *m,
		   const unsigned char *buf)
{
	char name[NAME_LEN], hex[2 * VF_HASH_LEN + 1], err[PATH_MAX + 200];
	char *file = malloc(HEADER_MAX + (size_t)m->have);
	int n;

	if (!file || (n = fields(id, which, m, file, HEADER_MAX - 80)) < 0 ||
	    !digest(file, (size_t)n, buf, m->have, hex))
		goto out;
	n += snprintf(file + n, 80, "sha256 %s\n\n", hex);
	memcpy(file + n, buf, (size_t)m->have);
	int64_t bytes = n + m->have;
	part_name(id, which, name);
	pthread_mutex_lock(&d->lock);
	long i = find(d, name);
	int64_t old = i >= 0 ? d->parts[i].bytes : 0;
	int fits = d->on && bytes <= d->max;
	if (fits)
		evict(d, bytes - old, name);
	pthread_mutex_unlock(&d->lock);
	if (!fits)
		goto out;
	enum px_status st = px_write_atomic_at(d->dirfd, d->dir, name, file, (size_t)bytes, 0600,
					       err, sizeof(err));
	pthread_mutex_lock(&d->lock);
	if (st != PX_OK) {
		turn_off(d, err);
	} else if (note(d, name, bytes, now_ns()) == 0) {
		d->stored++;
		d->stored_bytes += (uint64_t)m->have;
	}
	pthread_mutex_unlock(&d->lock);
out:
	free(file);
}

/* Parses the header at the start of file (flen bytes): m, the length of
 * its fields and of the whole header. 0, or -1 when it is not one. */
static int parse(const char *file, size_t flen, struct px_disk_meta *m, char *asset_hex,
		 char *part, char *sha, size_t *nfields, size_t *nheader)
{
	const char *end = memmem(file, flen < HEADER_MAX ? flen : HEADER_MAX, "\n\n", 2);
	char src[sizeof(m->source)], etag[sizeof(m->etag)];
	int at = 0;
	if (!end || strncmp(file, MAGIC, strlen(MAGIC)))
		return -1;
	const char *shaline = memmem(file, (size_t)(end - file) + 1, "\nsha256 ", 8);
	if (!shaline)
		return -1;
	*nfields = (size_t)(shaline - file) + 1;
	*nheader = (size_t)(end - file) + 2;
	char head[HEADER_MAX + 1];
	memcpy(head, file, *nheader);
	head[*nheader] = '\0';
	/* the fields in their order; ETag and source may be empty */
	if (sscanf(head, MAGIC "asset %64[0-9a-f]\npart %4s\nsize %" SCNd64 "\nasset_mtime %"
		   SCNd64 "\nstart %" SCNd64 "\nlen %" SCNd64 "\nhave %" SCNd64 "\nsource %n",
		   asset_hex, part, &m->size, &m->asset_mtime, &m->start, &m->len, &m->have,
		   &at) != 7 || !at)
		return -1;
	const char *p = head + at, *nl = strchr(p, '\n');
	if (!nl || (size_t)(nl - p) >= sizeof(src))
		return -1;
	snprintf(src, sizeof(src), "%.*s", (int)(nl - p), p);
	p = nl + 1;
	if (strncmp(p, "etag ", 5) || !(nl = strchr(p + 5, '\n')) ||
	    (size_t)(nl - p - 5) >= sizeof(etag))
		return -1;
	snprintf(etag, sizeof(etag), "%.*s", (int)(nl - p - 5), p + 5);
	if (sscanf(nl + 1, "mtime %" SCNd64 "\nsha256 %64[0-9a-f]\n", &m->mtime, sha) != 2)
		return -1;
	snprintf(m->source, sizeof(m->source), "%s", src);
	snprintf(m->etag, sizeof(m->etag), "%s", etag);
	return 0;
}

/* Whether the part in file (flen bytes) is asset id's part which as want
 * asks, whole and unchanged; m gets what it says, *data its bytes. With
 * data NULL, whether its header is: file holds its start. */
static const char *check(const char *file, size_t flen, const char *id, int which,
			 const struct px_disk_meta *want, struct px_disk_meta *m,
			 const unsigned char **data)
{
	char asset_hex[65], part[5], sha[65], mine[2 * VF_HASH_LEN + 1], hex[65];
	unsigned char d[VF_HASH_LEN];
	size_t nf, nh;
	if (parse(file, flen, m, asset_hex, part, sha, &nf, &nh))
		return "not a part, or torn";
	if (vf_hash_once(id, strlen(id), d) != PX_OK)
		return "cannot hash";
	vf_hash_hex(d, VF_HASH_LEN, mine);
	if (strcmp(asset_hex, mine) || strcmp(part, kind(which)))
		return "another asset's part";
	if (m->size != want->size)
		return "the asset's size changed";
	if (m->asset_mtime != want->asset_mtime)
		return "the asset's mtime changed";
	/* an index kept from an earlier jump serves a later one: it ends where
	 * the asked range does (the tail's start) and starts before it */
	int covers = which == PX_CACHE_INDEX && m->start >= 0 && m->start <= want->start &&
		     m->start + m->len == want->start + want->len;
	if ((!covers && (m->start != want->start || m->len != want->len)) || m->have <= 0 ||
	    m->have > m->len)
		return "another range";
	if (want->etag[0] && m->etag[0] && strcmp(want->etag, m->etag))
		return "the source's ETag changed";
	if (want->mtime >= 0 && m->mtime >= 0 && want->mtime != m->mtime)
		return "the source's Last-Modified changed";
	if (!data)
		return NULL; /* the header alone: its bytes are not read yet */
	if ((int64_t)(flen - nh) != m->have)
		return "torn: its length is not the part's";
	*data = (const unsigned char *)file + nh;
	if (!digest(file, nf, *data, m->have, hex) || strcmp(hex, sha))
		return "its SHA-256 does not match";
	return NULL;
}

/* The file name's contents, at most cap bytes: malloc'd, *len. NULL when
 * it cannot be read (none there: *gone) or is longer, unless head: then
 * its first cap bytes. Touches its mtime: its last use. */
static char *slurp(struct px_disk *d, const char *name, int64_t cap, int head, size_t *len,
		   int *gone)
{
	struct stat sb;
	char *file = NULL;
	int fd = openat(d->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	*gone = fd < 0 && errno == ENOENT;
	if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) || (sb.st_size > cap && !head))
		goto out;
	size_t want = (size_t)(sb.st_size < cap ? sb.st_size : cap);
	if (!(file = malloc(want + 1)))
		goto out;
	size_t got = 0;
	while (got < want) {
		ssize_t r = pread(fd, file + got, want - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	*len = got;
	(void)futimens(fd, NULL);
out:
	if (fd >= 0)
		close(fd);
	return file;
}

enum px_status px_disk_load(struct px_disk *d, const char *id, int which,
			    const struct px_disk_meta *want,
			    int (*source_ok)(void *ctx, const struct px_disk_meta *got),
			    void *ctx, unsigned char **buf, struct px_disk_meta *got)
{
	char name[NAME_LEN];
	const unsigned char *data = NULL;
	size_t flen = 0;
	int gone;
	enum px_status st = PX_EDECLINED;

	*buf = NULL;
	pthread_mutex_lock(&d->lock);
	int on = d->on;
	pthread_mutex_unlock(&d->lock);
	if (!on)
		return PX_EDECLINED;
	part_name(id, which, name);
	/* the header first: a part for another range, version or source
	 * (a catalog whose URLs changed) is refused before its bytes are
	 * read from disk and hashed, which cost a first read 8 ms for a head
	 * and tail refused after a drop of the page cache */
	char *file = slurp(d, name, HEADER_MAX, 1, &flen, &gone);
	if (gone)
		return PX_EDECLINED;
	const char *why = file ? check(file, flen, id, which, want, got, NULL)
			       : "cannot be read";
	if (!why && !source_ok(ctx, got))
		why = "its source is not one of the asset's that may serve";
	if (!why) {
		/* an index part may start before the range asked (check) */
		int64_t most = which == PX_CACHE_INDEX ? want->start + want->len : want->len;
		free(file);
		file = slurp(d, name, HEADER_MAX + most, 0, &flen, &gone);
		if (gone)
			return PX_EDECLINED; /* evicted meanwhile: none there */
		why = file ? check(file, flen, id, which, want, got, &data)
			   : "cannot be read, or too long";
		if (!why && !source_ok(ctx, got))
			why = "its source is not one of the asset's that may serve";
	}
	if (!why && (*buf = malloc((size_t)got->have)))
		memcpy(*buf, data, (size_t)got->have);
	pthread_mutex_lock(&d->lock);
	long i = find(d, name);
	if (why) {
		(void)unlinkat(d->dirfd, name, 0); /* ours, in our directory */
		if (i >= 0)
			forget(d, (size_t)i);
		d->rejects++;
	} else if (*buf) {
		if (i >= 0)
			d->parts[i].used = now_ns();
		d->hits++;
		d->hit_bytes += (uint64_t)got->have;
		st = PX_OK;
	}
	pthread_mutex_unlock(&d->lock);
	if (why)
		px_info("cache", "asset %s: the %s kept in cache_dir is not served: %s", id,
			kind(which), why);
	free(file);
	return st;
}

void px_disk_forget(struct px_disk *d, const char *id, int which)
{
	char name[NAME_LEN];
	part_name(id, which, name);
	pthread_mutex_lock(&d->lock);
	long i = find(d, name);
	if (i >= 0) {
		(void)unlinkat(d->dirfd, name, 0); /* ours, in our directory */
		forget(d, (size_t)i);
		d->rejects++;
	}
	pthread_mutex_unlock(&d->lock);
}

void px_disk_stats(struct px_disk *d, struct px_disk_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!d) {
		snprintf(out->why_off, sizeof(out->why_off), "not in use: cache_max_bytes=0 or "
			 "cache_size=0, or cache_dir could not be opened (the log says why)");
		return;
	}
	pthread_mutex_lock(&d->lock);
	out->on = d->on;
	out->hits = d->hits;
	out->hit_bytes = d->hit_bytes;
	out->stored = d->stored;
	out->stored_bytes = d->stored_bytes;
	out->evictions = d->evictions;
	out->rejects = d->rejects;
	out->parts = d->nparts;
	out->bytes = d->bytes;
	out->max_bytes = d->max;
	snprintf(out->why_off, sizeof(out->why_off), "%s", d->why_off);
	pthread_mutex_unlock(&d->lock);
}
