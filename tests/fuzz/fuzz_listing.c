/*
 * fuzz_listing.c - libFuzzer target for the directory listing parser
 * (proxy/catalog/listing.c).
 *
 * The input's first line is the page's URL, the rest the page, copied into
 * a buffer of exactly its size (no NUL) so ASan sees any read past len.
 * Checks: a refusal has no listing and one line of message; a listing has
 * at most PX_LISTING_MAX_ENTRIES entries with unique names that are one
 * path component (not empty, no '/', not "." or ".."), URLs the catalog
 * accepts (px_catalog_bad_url) ending in '/' exactly for directories, and
 * sizes of -1 or more (none for a directory).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "listing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512], base[2048], hostport[300];
	struct px_listing *l = NULL;

	if (size > (1 << 20))
		return 0;
	const uint8_t *nl = memchr(data, '\n', size);
	size_t blen = nl ? (size_t)(nl - data) : size;
	if (blen >= sizeof(base) || memchr(data, '\0', blen))
		return 0;
	memcpy(base, data, blen);
	base[blen] = '\0';
	size_t off = nl ? blen + 1 : size;
	char *page = malloc(size - off ? size - off : 1);
	if (!page)
		return 0;
	memcpy(page, data + off, size - off);
	err[0] = '\0';
	enum px_status st = px_listing_parse(base, page, size - off, &l, err, sizeof(err));
	if (st != PX_OK) {
		if (l || !err[0] || strchr(err, '\n'))
			abort();
		free(page);
		return 0;
	}
	if (!l || l->n > PX_LISTING_MAX_ENTRIES)
		abort();
	for (size_t i = 0; i < l->n; i++) {
		const struct px_listing_entry *e = &l->entries[i];
		size_t ul = strlen(e->url);
		if (!e->name[0] || strchr(e->name, '/') || !strcmp(e->name, ".") ||
		    !strcmp(e->name, ".."))
			abort();
		if (px_catalog_bad_url(e->url, hostport, sizeof(hostport)))
			abort();
		if (ul == 0 || (e->url[ul - 1] == '/') != (e->is_dir != 0))
			abort();
		if (e->size < -1 || (e->is_dir && e->size != -1))
			abort();
		for (size_t k = 0; k < i; k++)
			if (!strcmp(l->entries[k].name, e->name))
				abort();
	}
	px_listing_free(l);
	free(page);
	return 0;
}
