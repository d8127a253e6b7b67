/*
 * fuzz_vfstore.c - libFuzzer target for the fingerprint store's file
 * parser (verifier/store.c), which reads files that may be corrupt or
 * written by another host.
 *
 * The input is a store file's text, copied into a buffer of exactly its
 * size (no NUL) so ASan sees any read past len. The parser must either
 * accept the file (counting its valid records) or reject it with a
 * message; it must never crash, leak or read out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[400];
	size_t n = 12345;
	char *p;

	if (size > VF_STORE_MAX_FILE + 1)
		return 0;
	p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	err[0] = '\0';
	enum px_status st = vf_store_parse("movie", p, size, &n, err, sizeof(err));
	if (st == PX_EINVAL && (!err[0] || n != 0))
		abort();
	if (st == PX_OK && n > VF_STORE_MAX_SOURCES)
		abort();
	if (st != PX_OK && st != PX_EINVAL && st != PX_ENOMEM)
		abort();
	free(p);
	return 0;
}
