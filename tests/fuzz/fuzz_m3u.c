/*
 * fuzz_m3u.c - libFuzzer target for the M3U/M3U8 playlist parser.
 *
 * The input is a playlist, copied into a buffer of exactly its size (no
 * NUL) so ASan sees any read past len. Checks: see fuzz_import_check.h;
 * besides, no two assets share a path (the numbering of clashing names).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "log.h"
#include "fuzz_import_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int quiet;
	char err[1024];
	struct px_catalog *cat = NULL;

	if (!quiet) {
		/* skipped entries are logged as warnings: not wanted by the million */
		px_log_setup(PX_LOG_ERROR, 0);
		quiet = 1;
	}
	if (size > (1 << 20))
		return 0;
	char *p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	err[0] = '\0';
	enum px_status st = px_import_m3u("fuzz.m3u", p, size, &cat, err, sizeof(err));
	if (st != PX_OK)
		check_refused(cat, err, "fuzz.m3u");
	else
		check_accepted(cat);
	px_catalog_free(cat);
	free(p);
	return 0;
}
