/*
 * fuzz_jsonpos.c - libFuzzer target for px_jsonpos_find.
 *
 * The input's first line is the path, the rest the text; the text is
 * copied into a buffer of exactly its size (no NUL) so ASan sees any read
 * past len. A position found must be 1-based and within the text's lines.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonpos.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t plen = nl ? (size_t)(nl - data) : 0;
	size_t tlen = nl ? size - plen - 1 : size;
	char *path = malloc(plen + 1);
	char *text = malloc(tlen ? tlen : 1);
	int line = 0, col = 0;

	if (!path || !text)
		goto out;
	memcpy(path, data, plen);
	path[plen] = '\0';
	memcpy(text, nl ? nl + 1 : data, tlen);
	if (px_jsonpos_find(text, tlen, path, &line, &col) == 0) {
		size_t lines = 1;
		for (size_t i = 0; i < tlen; i++)
			lines += text[i] == '\n';
		if (line < 1 || col < 1 || (size_t)line > lines || (size_t)col > tlen + 1)
			abort();
	}
out:
	free(path);
	free(text);
	return 0;
}
