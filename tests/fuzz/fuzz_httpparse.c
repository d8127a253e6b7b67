/*
 * fuzz_httpparse.c - libFuzzer target for the HTTP response parsers.
 *
 * Each input goes, as one header line, through every parser; the input is
 * copied into a buffer of exactly its size so ASan sees any read past len.
 * What a parser accepts must make sense: a status of three digits, a
 * header name and value inside the line, a range with first <= last <
 * total.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "httpparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *p = malloc(size ? size : 1);
	int status;
	const char *n, *v;
	size_t nl, vl;
	int64_t cl;
	struct px_content_range cr;

	if (!p)
		return 0;
	memcpy(p, data, size);
	if (px_http_status_line(p, size, &status) == PX_OK && (status < 100 || status > 999))
		abort();
	if (px_http_header(p, size, &n, &nl, &v, &vl) == PX_OK) {
		if (nl == 0 || n != p || n + nl > p + size || v < p || v + vl > p + size)
			abort();
		/* the value of a header line is a Content-Length or -Range too */
		if (px_http_content_length(v, vl, &cl) == PX_OK && cl < 0)
			abort();
		if (px_http_content_range(v, vl, &cr) == PX_OK &&
		    (cr.first > cr.last || (cr.total >= 0 && cr.last >= cr.total) ||
		     (cr.first < 0 && cr.total < 0)))
			abort();
		(void)px_http_name_is(n, nl, "Content-Range");
	}
	if (px_http_content_length(p, size, &cl) == PX_OK && cl < 0)
		abort();
	if (px_http_content_range(p, size, &cr) == PX_OK &&
	    (cr.first > cr.last || (cr.total >= 0 && cr.last >= cr.total) ||
	     (cr.first < 0 && cr.total < 0)))
		abort();
	free(p);
	return 0;
}
