/*
 * state.c - see state.h. The file holds
 *   {"version": 1, "catalog": "/abs/catalog.json",
 *    "assets": {"ID": {"size": N, "mtime": M, "sources": "KEY"}, ...}}
 * KEY: 16 hex digits of a hash of the asset's sources when N was found.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	int dirty;
};

enum px_status px_state_open(const char *dir, const char *catalog_path,
			     struct px_state **out, char *err, size_t errlen)
{
	struct px_state *s = calloc(1, sizeof(*s));
	char abs[PATH_MAX];
	json_error_t jerr;

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
	if (!s->assets) {
		px_state_free(s);
		return PX_ENOMEM;
	}
	*out = s;
	return PX_OK;
}

void px_state_free(struct px_state *s)
{
	if (!s)
		return;
	json_decref(s->assets);
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
	if (!a || json_object_set_new(s->assets, id, a))
		return PX_ENOMEM;
	s->dirty = 1;
	return PX_OK;
}

enum px_status px_state_save(struct px_state *s, char *err, size_t errlen)
{
	enum px_status st;
	char *text = NULL;

	if (!s->dirty)
		return PX_OK;
	/* the catalog's path is only shown: a name that is not UTF-8 is scrubbed */
	json_t *root = json_pack("{si so sO}", "version", 1, "catalog", px_json_str(s->catalog),
				 "assets", s->assets);
	if (root)
		text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		return PX_ENOMEM;
	}
	st = px_write_atomic(s->file, text, strlen(text), 0600, err, errlen);
	if (st == PX_OK)
		s->dirty = 0;
	free(text);
	return st;
}
