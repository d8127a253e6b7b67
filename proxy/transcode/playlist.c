/*
 * playlist.c - parsing, writing and trusting a writer's segment list.
 *
 * The list is the only record of which segments are complete: a writer
 * writes a segment under a temporary name, fsyncs it, renames it into
 * place, fsyncs the directory and only then lists it, so a listed segment
 * is final and a killed writer leaves at most a .tmp. Every listed entry
 * whose file is still the one listed is trusted, the newest one too
 * (issue 32: a reader at the live edge gets each segment as soon as it is
 * listed, not one segment later). Serving and recovery use the same rule,
 * so a byte that was served is never rewritten.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "playlist.h"
#include "segmath.h"

void px_playlist_init(struct px_playlist *pl, int64_t seg_bytes, uint32_t nseg)
{
	memset(pl, 0, sizeof(*pl));
	pl->seg_bytes = seg_bytes;
	pl->nseg = nseg;
}

void px_playlist_release(struct px_playlist *pl)
{
	free(pl->e);
	free(pl->listed);
	memset(pl, 0, sizeof(*pl));
}

/* Whether index is listed, by pl->listed when it is made for pl->nseg;
 * -1 when it is not (then only a search of the entries says). */
static int listed_bit(const struct px_playlist *pl, uint32_t index)
{
	if (!pl->listed || pl->listed_nseg != pl->nseg || index >= pl->nseg)
		return -1;
	return pl->listed[index / 8] >> (index % 8) & 1;
}

/* Makes pl->listed for pl->nseg from the entries when it is not: PX_OK
 * or PX_ENOMEM. */
static enum px_status listed_make(struct px_playlist *pl)
{
	if (pl->listed && pl->listed_nseg == pl->nseg)
		return PX_OK;
	unsigned char *b = calloc((size_t)pl->nseg / 8 + 1, 1);
	if (!b)
		return PX_ENOMEM;
	for (size_t i = 0; i < pl->n; i++)
		if (pl->e[i].index < pl->nseg)
			b[pl->e[i].index / 8] |= (unsigned char)(1u << pl->e[i].index % 8);
	free(pl->listed);
	pl->listed = b;
	pl->listed_nseg = pl->nseg;
	return PX_OK;
}

long px_playlist_find(const struct px_playlist *pl, uint32_t index)
{
	if (listed_bit(pl, index) == 0)
		return -1;
	for (size_t i = 0; i < pl->n; i++)
		if (pl->e[i].index == index)
			return (long)i;
	return -1;
}

int px_playlist_drop(struct px_playlist *pl, uint32_t index, uint64_t gen)
{
	long at = px_playlist_find(pl, index);
	if (at < 0 || pl->e[at].gen != gen)
		return 0;
	memmove(&pl->e[at], &pl->e[at + 1], (pl->n - (size_t)at - 1) * sizeof(pl->e[0]));
	pl->n--;
	if (listed_bit(pl, index) == 1)
		pl->listed[index / 8] &= (unsigned char)~(1u << index % 8);
	if (pl->n == 0)
		pl->clean = 0; /* "#CLEAN before any segment" is no list */
	return 1;
}

enum px_status px_playlist_add(struct px_playlist *pl, uint32_t index, int64_t size,
			       int64_t mtime_ns)
{
	return px_playlist_add_gen(pl, index, size, mtime_ns, 0);
}

enum px_status px_playlist_add_gen(struct px_playlist *pl, uint32_t index, int64_t size,
				   int64_t mtime_ns, uint64_t gen)
{
	if (index >= pl->nseg)
		return PX_EINVAL;
	if (listed_make(pl) != PX_OK)
		return PX_ENOMEM;
	if (listed_bit(pl, index))
		return PX_EINVAL;
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 64;
		struct px_playlist_entry *e = realloc(pl->e, cap * sizeof(*e));
		if (!e)
			return PX_ENOMEM;
		pl->e = e;
		pl->cap = cap;
	}
	pl->e[pl->n].index = index;
	pl->e[pl->n].size = size;
	pl->e[pl->n].mtime_ns = mtime_ns;
	pl->e[pl->n].gen = gen;
	pl->n++;
	pl->listed[index / 8] |= (unsigned char)(1u << index % 8);
	pl->clean = 0;
	return PX_OK;
}

enum px_status px_playlist_add_closed(struct px_playlist *pl, uint32_t index, int64_t size,
				      int64_t mtime_ns)
{
	return px_playlist_add_closed_gen(pl, index, size, mtime_ns, 0);
}

enum px_status px_playlist_add_closed_gen(struct px_playlist *pl, uint32_t index,
					  int64_t size, int64_t mtime_ns, uint64_t gen)
{
	int clean = pl->clean;
	enum px_status st = px_playlist_add_gen(pl, index, size, mtime_ns, gen);
	if (st != PX_OK)
		return st;
	if (clean || pl->n < 2) {
		/* after a clean stop (or into an empty list) nothing is open */
		pl->clean = clean || pl->n == 1;
		return PX_OK;
	}
	/* the running writer's entry stays the newest (commit order) */
	struct px_playlist_entry open = pl->e[pl->n - 2];
	pl->e[pl->n - 2] = pl->e[pl->n - 1];
	pl->e[pl->n - 1] = open;
	return PX_OK;
}

int px_playlist_lock(const char *dir)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, PX_PLAYLIST_LOCK_FILE);
	/* read-write: flock over NFS is a POSIX write lock, which needs it */
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX)) {
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
	}
	return fd;
}

void px_playlist_unlock(int fd)
{
	if (fd < 0)
		return;
	flock(fd, LOCK_UN);
	close(fd);
}

/* A decimal in [0, max] that fills [p, end) exactly. */
static int parse_num(const char *p, const char *end, int64_t max, int64_t *out)
{
	int64_t v = 0;
	if (p == end || end - p > 19)
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		if (v > (max - (*p - '0')) / 10)
			return -1;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return 0;
}

/* Splits line [p, end) into up to 4 space-separated fields. */
static int split4(const char *p, const char *end, const char *f[4], const char *fe[4])
{
	int n = 0;
	while (p < end) {
		if (n == 4)
			return -1;
		f[n] = p;
		while (p < end && *p != ' ')
			p++;
		fe[n] = p;
		if (fe[n] == f[n])
			return -1;
		n++;
		if (p < end)
			p++;
		if (p == end && end[-1] == ' ')
			return -1;
	}
	return n;
}

/* Where a playlist line is, for its messages. */
struct plline {
	const char *file;
	int lineno;
	char *err;
	size_t errlen;
};

/* A segment line "INDEX SIZE MTIME_NS [GEN]" (its nf fields f..fe) into
 * pl. PX_EINVAL (err says why) or PX_ENOMEM. */
static enum px_status parse_entry(struct px_playlist *pl, const struct plline *ln, int nf,
				  const char *const f[4], const char *const fe[4])
{
	int64_t k, size, mt, gen = 0;
	if (parse_num(f[0], fe[0], PX_SEG_MAX_COUNT, &k) ||
	    parse_num(f[1], fe[1], INT64_MAX, &size) ||
	    parse_num(f[2], fe[2], INT64_MAX, &mt) ||
	    (nf == 4 && (parse_num(f[3], fe[3], INT64_MAX, &gen) || gen < 1))) {
		snprintf(ln->err, ln->errlen, "%s:%d: expected \"INDEX SIZE MTIME_NS [GEN]\" "
			 "(decimal numbers)", ln->file, ln->lineno);
		return PX_EINVAL;
	}
	if (k >= pl->nseg || (pl->seg_bytes && size != pl->seg_bytes) ||
	    (!pl->seg_bytes && (size <= 0 || size % PX_TS_PACKET))) {
		snprintf(ln->err, ln->errlen, "%s:%d: segment %lld: %s", ln->file, ln->lineno,
			 (long long)k, k >= pl->nseg ? "index beyond #SEGMENTS"
			 : pl->seg_bytes ? "size is not #SEGMENT-BYTES"
			 : "size is not a positive multiple of 188");
		return PX_EINVAL;
	}
	enum px_status r = px_playlist_add_gen(pl, (uint32_t)k, size, mt, (uint64_t)gen);
	if (r == PX_ENOMEM) {
		snprintf(ln->err, ln->errlen, "%s: out of memory", ln->file);
		return r;
	}
	if (r != PX_OK) {
		snprintf(ln->err, ln->errlen, "%s:%d: segment %lld listed twice", ln->file,
			 ln->lineno, (long long)k);
		return PX_EINVAL;
	}
	return PX_OK;
}

enum px_status px_playlist_parse(const char *file, const char *text, size_t len,
				 struct px_playlist *pl, char *err, size_t errlen)
{
	enum px_status st = PX_EINVAL;
	const char *p = text, *end = text + len;
	int lineno = 0, have_bytes = 0, have_count = 0;
	int64_t v;

	px_playlist_init(pl, 0, 0);
	if (len > PX_PLAYLIST_MAX_BYTES) {
		snprintf(err, errlen, "%s: larger than %d bytes", file, PX_PLAYLIST_MAX_BYTES);
		goto out;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *f[4], *fe[4];
		lineno++;
		if (!nl) {
			snprintf(err, errlen, "%s:%d: last line has no newline (torn write)",
				 file, lineno);
			goto out;
		}
		int nf = split4(p, nl, f, fe);
		if (lineno == 1) {
			if (nf != 2 || fe[0] - f[0] != 16 || memcmp(f[0], "#SEAMFS-PLAYLIST", 16) ||
			    fe[1] - f[1] != 1 || f[1][0] != '1') {
				snprintf(err, errlen, "%s:1: not a seamfs playlist "
					 "(expected \"#SEAMFS-PLAYLIST 1\")", file);
				goto out;
			}
		} else if (nf == 2 && fe[0] - f[0] == 14 && !memcmp(f[0], "#SEGMENT-BYTES", 14)) {
			if (have_bytes || parse_num(f[1], fe[1], INT64_MAX / PX_SEG_MAX_COUNT, &v) ||
			    v % PX_TS_PACKET) {
				snprintf(err, errlen, "%s:%d: #SEGMENT-BYTES: %s", file, lineno,
					 have_bytes ? "given twice"
						    : "must be a multiple of 188 (0: sizes vary)");
				goto out;
			}
			pl->seg_bytes = v;
			have_bytes = 1;
		} else if (nf == 2 && fe[0] - f[0] == 9 && !memcmp(f[0], "#SEGMENTS", 9)) {
			if (have_count || parse_num(f[1], fe[1], PX_SEG_MAX_COUNT, &v) || v < 1) {
				snprintf(err, errlen, "%s:%d: #SEGMENTS: %s", file, lineno,
					 have_count ? "given twice" : "must be 1 to 1000000");
				goto out;
			}
			pl->nseg = (uint32_t)v;
			have_count = 1;
		} else if (nf == 1 && fe[0] - f[0] == 6 && !memcmp(f[0], "#CLEAN", 6)) {
			if (!pl->n) {
				snprintf(err, errlen, "%s:%d: #CLEAN before any segment", file, lineno);
				goto out;
			}
			pl->clean = 1;
		} else if ((nf == 3 || nf == 4) && f[0][0] != '#') {
			if (!have_bytes || !have_count) {
				snprintf(err, errlen, "%s:%d: segment before #SEGMENT-BYTES and "
					 "#SEGMENTS", file, lineno);
				goto out;
			}
			struct plline ln = { file, lineno, err, errlen };
			enum px_status r = parse_entry(pl, &ln, nf, f, fe);
			if (r != PX_OK) {
				st = r;
				goto out;
			}
		} else {
			snprintf(err, errlen, "%s:%d: unrecognised line", file, lineno);
			goto out;
		}
		p = nl + 1;
	}
	if (!have_bytes || !have_count) {
		snprintf(err, errlen, "%s:%d: missing %s", file, lineno + 1,
			 !have_bytes ? "#SEGMENT-BYTES" : "#SEGMENTS");
		goto out;
	}
	st = PX_OK;
out:
	if (st != PX_OK)
		px_playlist_release(pl);
	return st;
}

/*
 * Opens path (WORK/ID/playlist) for reading beneath WORK, its folder's
 * folder: neither the job directory nor the playlist through a link, nor
 * a FIFO (others may write work_dir; root would read another file, or
 * hang on a FIFO). fd, or -1 with errno (ELOOP: a link in the way).
 */
static int open_list(const char *path)
{
	char top[4200];
	int fd = -1, root = -1;
	const char *rel = path;
	if (snprintf(top, sizeof(top), "%s", path) >= (int)sizeof(top)) {
		errno = ENAMETOOLONG;
		goto out;
	}
	/* cut after the folder above the job directory: rel is "ID/playlist" */
	char *last = strrchr(top, '/');
	if (last) {
		*last = '\0';
		char *job = strrchr(top, '/');
		*last = '/';
		if (job) {
			rel = path + (job - top) + 1;
			*job = '\0';
		}
	}
	root = px_dir_open(rel == path ? "." : top[0] ? top : "/");
	if (root >= 0)
		fd = px_open_beneath(root, rel);
out:
	if (root >= 0) {
		int e = errno;
		close(root);
		errno = e;
	}
	return fd;
}

enum px_status px_playlist_load(const char *path, struct px_playlist *pl,
				char *err, size_t errlen)
{
	enum px_status st = PX_EIO;
	char *buf = NULL;
	struct stat sb;
	int fd = open_list(path);

	px_playlist_init(pl, 0, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path,
			 e == ELOOP ? "a link seamfs did not make is in the way: not read"
			 : e == EINVAL ? "not a regular file: not read" : strerror(e));
		st = e == ENOENT ? PX_ENOTFOUND : PX_EIO;
		errno = e;
		goto out;
	}
	if (fstat(fd, &sb) || sb.st_size > PX_PLAYLIST_MAX_BYTES) {
		snprintf(err, errlen, "%s: %s", path, sb.st_size > PX_PLAYLIST_MAX_BYTES
			 ? "too large" : strerror(errno));
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		st = PX_ENOMEM;
		goto out;
	}
	ssize_t got = pread(fd, buf, (size_t)sb.st_size, 0);
	if (got != sb.st_size) {
		snprintf(err, errlen, "%s: short read", path);
		goto out;
	}
	st = px_playlist_parse(path, buf, (size_t)got, pl, err, errlen);
	errno = 0;
out:
	free(buf);
	if (fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return st;
}

char *px_playlist_format(const struct px_playlist *pl, size_t *len_out)
{
	size_t cap = 128 + pl->n * 84, len = 0;
	char *text = malloc(cap);

	if (!text)
		return NULL;
	len += (size_t)snprintf(text + len, cap - len,
				"#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES %lld\n#SEGMENTS %u\n",
				(long long)pl->seg_bytes, pl->nseg);
	for (size_t i = 0; i < pl->n; i++) {
		if (pl->e[i].gen)
			len += (size_t)snprintf(text + len, cap - len, "%u %lld %lld %llu\n",
						pl->e[i].index, (long long)pl->e[i].size,
						(long long)pl->e[i].mtime_ns,
						(unsigned long long)pl->e[i].gen);
		else
			len += (size_t)snprintf(text + len, cap - len, "%u %lld %lld\n",
						pl->e[i].index, (long long)pl->e[i].size,
						(long long)pl->e[i].mtime_ns);
	}
	if (pl->clean)
		len += (size_t)snprintf(text + len, cap - len, "#CLEAN\n");
	*len_out = len;
	return text;
}

enum px_status px_playlist_save(const struct px_playlist *pl, const char *path,
				char *err, size_t errlen)
{
	enum px_status st;
	size_t len = 0;
	char *text = px_playlist_format(pl, &len);

	if (!text)
		return PX_ENOMEM;
	st = px_write_atomic(path, text, len, 0644, err, errlen);
	free(text);
	return st;
}

size_t px_playlist_trust(const struct px_playlist *pl, const struct px_seg_seen *seen,
			 unsigned char *trusted)
{
	size_t n = 0;
	for (size_t i = 0; i < pl->n; i++) {
		int ok = 1;
		if (seen)
			ok = seen[i].exists &&
			     seen[i].size == (pl->seg_bytes ? pl->seg_bytes : pl->e[i].size) &&
			     seen[i].mtime_ns == pl->e[i].mtime_ns;
		trusted[i] = (unsigned char)ok;
		n += (size_t)ok;
	}
	return n;
}

void px_playlist_seg_name(uint32_t k, char *buf, size_t cap)
{
	snprintf(buf, cap, "seg-%06u.ts", k);
}

void px_playlist_seg_file(uint32_t k, uint64_t gen, char *buf, size_t cap)
{
	if (gen)
		snprintf(buf, cap, "seg-%06u.g%llu.ts", k, (unsigned long long)gen);
	else
		px_playlist_seg_name(k, buf, cap);
}

int px_playlist_seg_parse(const char *name, uint32_t *k, uint64_t *gen, char *tail,
			  size_t tcap)
{
	const char *p = name + 4;
	uint64_t v = 0;
	if (strncmp(name, "seg-", 4) != 0)
		return 0;
	for (int i = 0; i < 6; i++, p++) {
		if (*p < '0' || *p > '9')
			return 0;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*k = (uint32_t)v;
	*gen = 0;
	if (p[0] == '.' && p[1] == 'g') {
		const char *q = p + 2;
		uint64_t g = 0;
		if (*q < '1' || *q > '9')
			return 0;
		for (; *q >= '0' && *q <= '9'; q++) {
			if (g > (UINT64_MAX - 9) / 10)
				return 0;
			g = g * 10 + (uint64_t)(*q - '0');
		}
		*gen = g;
		p = q;
	}
	if (strncmp(p, ".ts", 3) != 0)
		return 0;
	p += 3;
	if (tail)
		snprintf(tail, tcap, "%s", p);
	return 1;
}
