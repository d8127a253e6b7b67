/*
 * fuzz_import_check.h - what the .strm and M3U fuzz targets check of any
 * catalog an importer accepts or refuses. Included by fuzz_strm.c and
 * fuzz_m3u.c only.
 */
#ifndef SEAMFS_FUZZ_IMPORT_CHECK_H
#define SEAMFS_FUZZ_IMPORT_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "tree.h"
#include "utf8.h"

/* A refusal: no catalog, one line naming the file. */
static void check_refused(const struct px_catalog *cat, const char *err, const char *file)
{
	if (cat || strncmp(err, file, strlen(file)) != 0 || strchr(err, '\n') ||
	    strchr(err, '\r'))
		abort();
}

static const struct px_tree_node *walk(const struct px_tree *t, const char *path)
{
	char buf[4096];
	const struct px_tree_node *n = px_tree_get(t, PX_TREE_ROOT);
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return n; /* too long to check here */
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c && n;
	     c = strtok_r(NULL, "/", &save))
		n = px_tree_lookup(t, n->ino, c);
	return n;
}

/* An acceptance: plain assets with unique UTF-8 ids and paths (they go
 * into JSON), at least one source each, each a URL or a path of a known
 * provider, every asset found again in the tree the daemon would build. */
static void check_accepted(const struct px_catalog *cat)
{
	struct px_tree *t = NULL;
	if (cat->nassets == 0 || px_tree_new(cat, NULL, &t) != PX_OK)
		abort();
	for (size_t i = 0; i < cat->nassets; i++) {
		const struct px_asset *a = &cat->assets[i];
		if (a->kind != PX_ASSET_PLAIN || a->nsources == 0 || a->size != -1 ||
		    !px_utf8_valid(a->id) || !px_utf8_valid(a->path))
			abort();
		for (size_t k = 0; k < a->nsources; k++) {
			const struct px_source *s = &a->sources[k];
			if (!s->url == !s->path || s->provider >= cat->nproviders ||
			    !cat->providers[s->provider].implicit)
				abort();
		}
		const struct px_tree_node *n = walk(t, a->path);
		if (!n || (strlen(a->path) < 4000 && n->asset != (long)i))
			abort();
		if (px_catalog_find(cat, a->id) != (long)i)
			abort();
	}
	px_tree_free(t);
}

#endif
