/*
 * fuzz_multipart.c - libFuzzer target for the multipart/byteranges parser
 * (px_multipart_boundary, px_multipart_feed), what decides which bytes of
 * a head-and-tail answer reach the cache.
 *
 * The first 6 bytes choose the two ranges asked for, the asset's size and
 * how the body is cut into chunks (and when emit pauses); the next line is
 * a Content-Type value, the rest the body. Whatever the parser hands on
 * must lie inside a range asked for, in order, and a body it calls done
 * must have delivered every byte of every range exactly once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct got {
	const struct px_multipart_range *r;
	int64_t next, bytes;
	unsigned pause, calls;
};

static int emit(void *ctx, int64_t off, const char *buf, size_t len)
{
	struct got *g = ctx;
	(void)buf;
	if (g->pause && ++g->calls % g->pause == 0)
		return 0;
	int in = 0;
	for (int i = 0; i < 2; i++)
		in |= off >= g->r[i].first && off + (int64_t)len <= g->r[i].last + 1;
	if (!in || off < g->next || len == 0)
		abort();
	g->next = off + (int64_t)len;
	g->bytes += (int64_t)len;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct px_multipart m;
	char b[PX_MULTIPART_BOUNDARY + 1], why[200];

	if (size < 6)
		return 0;
	struct px_multipart_range r[2] = { { 0, data[0] % 16 }, { 32 + data[1] % 16, 63 } };
	int64_t total = 64 + data[2] % 4;
	size_t step = 1 + data[3] % 32;
	/* pause 2 or 3: every second or third run refused, never all */
	struct got g = { r, 0, 0, data[4] % 3 ? data[4] % 3 + 1u : 0u, 0 };
	int html_ok = data[5] & 1;
	data += 6;
	size -= 6;
	const uint8_t *nl = memchr(data, '\n', size);
	size_t cl = nl ? (size_t)(nl - data) : size;
	char *ct = malloc(cl ? cl : 1);
	if (!ct)
		return 0;
	memcpy(ct, data, cl);
	int kind = px_multipart_boundary(ct, cl, b);
	free(ct);
	if (kind != 1 && b[0])
		abort();
	if (kind != 1 || !nl)
		return 0;
	if (strlen(b) == 0 || strlen(b) > PX_MULTIPART_BOUNDARY)
		abort();
	if (px_multipart_init(&m, b, r, 2, total, html_ok) != PX_OK)
		abort();
	data += cl + 1;
	size -= cl + 1;
	enum px_status st = PX_OK;
	size_t at = 0;
	while (at < size && (st == PX_OK || st == PX_EAGAIN)) {
		size_t n = size - at < step ? size - at : step, used = 0;
		char *p = malloc(n);
		if (!p)
			return 0;
		memcpy(p, data + at, n);
		why[0] = '\0';
		st = px_multipart_feed(&m, p, n, &used, emit, &g, why, sizeof(why));
		free(p);
		if (used > n || (st == PX_EBADRESP && !why[0]))
			abort();
		at += used;
	}
	if (px_multipart_done(&m) &&
	    g.bytes != (r[0].last - r[0].first + 1) + (r[1].last - r[1].first + 1))
		abort();
	return 0;
}
