/*
 * state.c - see state.h. The file holds
 *   {"version": 1, "catalog": "/abs/catalog.json",
 *    "assets": {"ID": {"size": N, "mtime": M, "sources": "KEY"}, ...}}
 * KEY: 16 hex digits of a hash of the asset's sources when N was found.
 * FILE.lock (empty) is what a save locks; the file itself is replaced by
 * rename, so a lock on it would not last.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "jsontext.h"
#include "log.h"
#include "state.h"
#include "strmap.h"

struct px_state {
	char *file;
	char *catalog;
	json_t *assets;
	json_t *mine;   /* the records put here: they win at a save */
	int dirty;
};

static void load(struct px_state *s);

enum px_status px_state_open(const char *dir, const char *catalog_path,
			     struct px_state **out, char *err, size_t errlen)
{
	struct px_state *s = calloc(1, sizeof(*s));
	char abs[PATH_MAX];

	*out = NULL;
	if (!s)
		return PX_ENOMEM;
	if (px_mkdir_p(dir, 0700)) {
		snprintf(err, errlen, "state_dir %s: %s", dir, strerror(errno));
		free(s);
		return PX_EIO;
	}
	if (!realpath(catalog_path, abs))
		snprintf(abs, sizeof(abs), "%s", catalog_path);
	const char *base = strrchr(abs, '/');
	base = base ? base + 1 : abs;
	size_t n = strlen(dir) + strlen(base) + 40;
	s->file = malloc(n);
	s->catalog = strdup(abs);
	if (!s->file || !s->catalog) {
		px_state_free(s);
		return PX_ENOMEM;
	}
	snprintf(s->file, n, "%s/%s-%016llx.state.json", dir, base,
		 (unsigned long long)px_hash64(abs, strlen(abs), 0));

	load(s);
	s->mine = json_object();
	if (!s->assets || !s->mine) {
		px_state_free(s);
		return PX_ENOMEM;
	}
	*out = s;
	return PX_OK;
}

/* Reads the file's records into s->assets (an empty object when there is
 * no readable file). */
static void load(struct px_state *s)
{
	json_error_t jerr;
	json_t *root = json_load_file(s->file, JSON_REJECT_DUPLICATES, &jerr);
	json_t *assets = root ? json_object_get(root, "assets") : NULL;
	if (assets && json_is_object(assets)) {
		s->assets = json_incref(assets);
	} else {
		if (root || access(s->file, F_OK) == 0)
			px_warn("state", "%s: unreadable state file, starting afresh (%s)",
				s->file, root ? "no assets object" : jerr.text);
		s->assets = json_object();
	}
	json_decref(root);
}

void px_state_release(struct px_state *s)
{
	/* a library's records take more memory than the rest of an asset;
	 * after the mount they are read again only if needed */
	if (s && !s->dirty && s->assets) {
		json_decref(s->assets);
		s->assets = NULL;
	}
}

void px_state_free(struct px_state *s)
{
	if (!s)
		return;
	json_decref(s->assets);
	json_decref(s->mine);
	free(s->file);
	free(s->catalog);
	free(s);
}

const char *px_state_file(const struct px_state *s)
{
	return s->file;
}

void px_state_sources_key(const char *const *names, size_t n, char key[PX_STATE_KEY_LEN])
{
	uint64_t h = 0x5eaf5eed;
	for (size_t i = 0; i < n; i++)
		h = px_hash64(names[i], strlen(names[i]) + 1, h); /* the NUL separates */
	snprintf(key, PX_STATE_KEY_LEN, "%016llx", (unsigned long long)h);
}

int px_state_get(const struct px_state *s, const char *id, const char *sources,
		 int64_t *size, int64_t *mtime)
{
	if (!s->assets)
		load((struct px_state *)s); /* released after the mount */
	json_t *a = json_object_get(s->assets, id);
	json_t *sz = a ? json_object_get(a, "size") : NULL;
	json_t *mt = a ? json_object_get(a, "mtime") : NULL;
	json_t *src = a ? json_object_get(a, "sources") : NULL;
	if (!json_is_integer(sz) || json_integer_value(sz) < 0 || !json_is_string(src) ||
	    strcmp(json_string_value(src), sources) != 0)
		return 0;
	*size = json_integer_value(sz);
	*mtime = json_is_integer(mt) && json_integer_value(mt) >= 0 ? json_integer_value(mt) : -1;
	return 1;
}

enum px_status px_state_put(struct px_state *s, const char *id, const char *sources,
			    int64_t size, int64_t mtime)
{
	int64_t osize, omtime;
	if (px_state_get(s, id, sources, &osize, &omtime) && osize == size && omtime == mtime)
		return PX_OK;
	json_t *a = json_pack("{sI sI ss}", "size", (json_int_t)size, "mtime", (json_int_t)mtime,
			      "sources", sources);
	if (!a || json_object_set(s->mine, id, a) || json_object_set_new(s->assets, id, a))
		return PX_ENOMEM;
	s->dirty = 1;
	return PX_OK;
}

/* An exclusive flock on path (made if missing), waiting at most wait_ms.
 * The descriptor, or -1 with errno (EWOULDBLOCK: still held). */
static int lock_file(const char *path, int wait_ms)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	for (int waited = 0;; waited += 10) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= wait_ms)
			break;
		usleep(10000);
	}
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* Under the save lock: the records on disk now (another daemon may have
 * written since the open) with ours over them become s->assets. */
static void merge_from_disk(struct px_state *s)
{
	json_error_t jerr;
	json_t *root = json_load_file(s->file, JSON_REJECT_DUPLICATES, &jerr);
	json_t *disk = root ? json_object_get(root, "assets") : NULL;
	/* no readable file: s->assets (what was read at the open, and ours) */
	if (disk && json_is_object(disk)) {
		json_t *merged = json_deep_copy(disk);
		if (merged && json_object_update(merged, s->mine) == 0) {
			json_decref(s->assets);
			s->assets = merged;
			merged = NULL;
		}
		json_decref(merged);
	}
	json_decref(root);
}

enum px_status px_state_save(struct px_state *s, char *err, size_t errlen)
{
	enum px_status st;
	char *text = NULL, lock[PATH_MAX + 8];
	int fd;

	if (!s->dirty)
		return PX_OK;
	snprintf(lock, sizeof(lock), "%s.lock", s->file);
	if ((fd = lock_file(lock, 5000)) < 0) {
		snprintf(err, errlen, "%s: %s", lock, errno == EWOULDBLOCK
			 ? "held by another daemon for 5 s" : strerror(errno));
		return PX_EIO;
	}
	merge_from_disk(s);
	/* the catalog's path is only shown: a name that is not UTF-8 is scrubbed */
	json_t *root = json_pack("{si so sO}", "version", 1, "catalog", px_json_str(s->catalog),
				 "assets", s->assets);
	if (root)
		text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		return PX_ENOMEM;
	}
	st = px_write_atomic(s->file, text, strlen(text), 0600, err, errlen);
	close(fd); /* after the rename: the next saver reads our file */
	if (st == PX_OK) {
		s->dirty = 0;
		json_object_clear(s->mine);
	}
	free(text);
	return st;
}

enum px_status px_state_lock_mount(const char *dir, const char *mountpoint, int *fd,
				   long *holder, char *err, size_t errlen)
{
	char path[PATH_MAX + 64], buf[64];
	const char *base = strrchr(mountpoint, '/');
	base = base && base[1] ? base + 1 : "root";
	*fd = -1;
	*holder = 0;
	if (px_mkdir_p(dir, 0700)) {
		snprintf(err, errlen, "state_dir %s: %s", dir, strerror(errno));
		return PX_EIO;
	}
	snprintf(path, sizeof(path), "%s/%.64s-%016llx.mount.lock", dir, base,
		 (unsigned long long)px_hash64(mountpoint, strlen(mountpoint), 0));
	int lfd = lock_file(path, 0);
	if (lfd < 0 && errno == EWOULDBLOCK) {
		/* the holder writes its pid right after it locks */
		for (int i = 0; i < 50 && !*holder; i++) {
			int r = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			ssize_t n = r >= 0 ? pread(r, buf, sizeof(buf) - 1, 0) : -1;
			if (r >= 0)
				close(r);
			buf[n > 0 ? n : 0] = '\0';
			*holder = strtol(buf, NULL, 10);
			if (!*holder)
				usleep(10000);
		}
		snprintf(err, errlen, "%s is locked", path);
		return PX_EBUSY;
	}
	if (lfd < 0) {
		snprintf(err, errlen, "mount lock %s: %s", path, strerror(errno));
		return PX_EIO;
	}
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(lfd, 0) || pwrite(lfd, buf, (size_t)n, 0) != n) {
		snprintf(err, errlen, "mount lock %s: %s", path, strerror(errno));
		close(lfd);
		return PX_EIO;
	}
	*fd = lfd;
	return PX_OK;
}

void px_state_unlock_mount(int fd)
{
	if (fd >= 0)
		close(fd);
}
