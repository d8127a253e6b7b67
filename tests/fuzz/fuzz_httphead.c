/*
 * fuzz_httphead.c - libFuzzer target for judging HTTP response heads
 * (px_http_head_line + px_http_judge), what decides whether a response's
 * body may reach a reader.
 *
 * The first 8 bytes choose what was asked (offset, length, the asset's
 * size, whether the asset is HTML); the rest is split at '\n' into header
 * lines, each copied into a buffer of exactly its size so ASan sees any
 * read past it. Whatever the judge accepts must prove it carries the asked
 * bytes of the asset: identity encoding, no HTML page for a file, a 200
 * of known length equal to the asset's size, a 206 starting where asked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "httpparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct px_http_head h;
	struct px_http_want w;
	char why[200];
	int64_t body_pos, total;

	if (size < 8)
		return 0;
	w.offset = (int64_t)(data[0] | data[1] << 8 | data[2] << 16);
	w.length = data[3] & 1 ? 0 : (int64_t)(data[4] | data[5] << 8) + 1;
	w.expect_size = data[3] & 2 ? -1 : (int64_t)(data[6] | data[7] << 8 | data[2] << 16);
	w.html_ok = (data[3] & 4) != 0;
	data += 8;
	size -= 8;
	px_http_head_reset(&h);
	while (size) {
		const uint8_t *nl = memchr(data, '\n', size);
		size_t n = nl ? (size_t)(nl - data) + 1 : size;
		char *line = malloc(n);
		if (!line)
			return 0;
		memcpy(line, data, n);
		(void)px_http_head_line(&h, line, n);
		free(line);
		data += n;
		size -= n;
	}
	if (h.etag[sizeof(h.etag) - 1] != '\0' || h.encoding[sizeof(h.encoding) - 1] != '\0')
		abort();
	why[0] = '\0';
	enum px_status st = px_http_judge(&h, &w, &body_pos, &total, why, sizeof(why));
	if (st != PX_OK && !why[0])
		abort(); /* every refusal says why */
	if (st == PX_OK && h.status != 416) {
		if (h.encoding[0] || (h.html && !w.html_ok))
			abort();
		if (h.status == 200 && (h.chunked || h.clen < 0 || body_pos != 0 || total != h.clen))
			abort();
		if (h.status == 206 && (!h.have_cr || body_pos != w.offset || h.cr.first != w.offset))
			abort();
		if (h.status != 200 && h.status != 206)
			abort();
		if (w.expect_size >= 0 && total >= 0 && total != w.expect_size)
			abort();
	}
	return 0;
}
