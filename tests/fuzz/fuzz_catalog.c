/*
 * fuzz_catalog.c - libFuzzer target for catalog validation.
 *
 * The input is a catalog text, copied into a buffer of exactly its size (no
 * NUL) so ASan sees any read past len. A rejected catalog must come with a
 * message naming the file; an accepted one must build a tree in which
 * every listed asset is found again by its path.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1024];
	struct px_catalog *cat = NULL;
	struct px_tree *t = NULL;
	char *p;

	if (size > (1 << 20))
		return 0;
	p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	err[0] = '\0';
	enum px_status st = px_catalog_parse("fuzz.json", p, size, &cat, err, sizeof(err));
	if (st != PX_OK) {
		if (cat || strncmp(err, "fuzz.json:", 10) != 0)
			abort();
		free(p);
		return 0;
	}
	if (px_tree_new(cat, NULL, &t) != PX_OK)
		abort();
	for (size_t i = 0; i < cat->nassets; i++) {
		const struct px_tree_node *n = walk(t, cat->assets[i].path);
		if (!n || (strlen(cat->assets[i].path) < 4000 && n->asset != (long)i))
			abort();
		if (px_catalog_find(cat, cat->assets[i].id) != (long)i)
			abort();
	}
	px_tree_free(t);
	px_catalog_free(cat);
	free(p);
	return 0;
}
