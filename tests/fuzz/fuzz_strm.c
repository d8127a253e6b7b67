/*
 * fuzz_strm.c - libFuzzer target for the .strm parser.
 *
 * The input's first line (up to 255 bytes) is the .strm file's relative
 * path, the rest its text; the text is copied into a buffer of exactly its
 * size (no NUL) so ASan sees any read past len. Checks: see
 * fuzz_import_check.h; an accepted file is exactly one asset.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "fuzz_import_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1024], rel[256];
	struct px_catalog *cat = NULL;

	if (size > PX_IMPORT_MAX_STRM_BYTES + 512)
		return 0;
	const uint8_t *nl = memchr(data, '\n', size < 256 ? size : 256);
	size_t rlen = nl ? (size_t)(nl - data) : 0;
	memcpy(rel, data, rlen);
	rel[rlen] = '\0';        /* a NUL inside just shortens it */
	size_t off = nl ? rlen + 1 : 0;
	char *p = malloc(size - off ? size - off : 1);
	if (!p)
		return 0;
	memcpy(p, data + off, size - off);
	err[0] = '\0';
	enum px_status st = px_import_strm("fuzz.strm", rel, p, size - off, &cat, err,
					   sizeof(err));
	if (st != PX_OK) {
		check_refused(cat, err, "fuzz.strm");
	} else {
		/* the id is rel, made UTF-8 (bytes that are not read as Latin-1) */
		int changed;
		char *want = px_utf8_latin1(rel, strlen(rel), &changed);
		if (!want || cat->nassets != 1 || strcmp(cat->assets[0].id, want) != 0 ||
		    changed == px_utf8_valid(rel))
			abort();
		free(want);
		check_accepted(cat);
	}
	px_catalog_free(cat);
	free(p);
	return 0;
}
