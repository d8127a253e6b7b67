/*
 * multipart.h - a strict parser of multipart/byteranges bodies (RFC 9110
 * 14.6, framing of RFC 2046 5.1): the answer to one request for several
 * ranges (an asset's head and tail at once).
 *
 * Strict: the parts must be exactly the ranges asked for, in the order
 * asked, each with one Content-Range naming its range and the asset's
 * size; each part's bytes are read by that length (never by looking for
 * the boundary inside them), and the delimiter after them must be there.
 * A part missing, one more, an overlapping or shifted range, another
 * total, a wrong boundary or a header line too long is a broken answer.
 * Pure code, no allocation; fuzzed by tests/fuzz/fuzz_multipart.c.
 */
#ifndef SEAMFS_MULTIPART_H
#define SEAMFS_MULTIPART_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

#define PX_MULTIPART_RANGES 2     /* ranges one request asks for, at most */
#define PX_MULTIPART_BOUNDARY 70  /* RFC 2046's longest boundary */
#define PX_MULTIPART_LINE 512     /* a part's header line, at most */

/*
 * The boundary of a Content-Type value of multipart/byteranges (any case,
 * "; boundary=X" as a token or a quoted string, 1-70 characters) into out
 * (at least PX_MULTIPART_BOUNDARY + 1 bytes), NUL terminated. Returns 1
 * with a boundary, 0 when the type is multipart/byteranges without a
 * valid one (out is ""), -1 when it is another type. Pure.
 */
int px_multipart_boundary(const char *v, size_t len, char *out);

struct px_multipart_range {
	int64_t first, last;          /* inclusive, as in a Range header */
};

/* The parser's state; fields are its own. */
struct px_multipart {
	char boundary[PX_MULTIPART_BOUNDARY + 1];
	size_t blen;
	struct px_multipart_range want[PX_MULTIPART_RANGES];
	int nwant;
	int64_t total;
	int html_ok;                  /* the asset is an HTML file */
	int state;
	int part;                     /* the part being read, 0-based */
	size_t matched;               /* bytes of the expected literal matched */
	int lead;                     /* the first delimiter had its CRLF */
	char line[PX_MULTIPART_LINE];
	size_t linelen;
	int lines, have_cr;
	int64_t pos;                  /* the next data byte's offset */
};

/*
 * Starts m for a body with boundary b (as px_multipart_boundary gave it)
 * answering the nwant ranges of want (ascending, apart, inside total, the
 * asset's size). A part whose Content-Type is an HTML page is refused
 * unless html_ok (the asset is an HTML file). PX_EINVAL when they are
 * not. Pure.
 */
enum px_status px_multipart_init(struct px_multipart *m, const char *b,
				 const struct px_multipart_range *want, int nwant,
				 int64_t total, int html_ok) PX_WUR;

/*
 * Called with each run of a part's bytes: [off, off + len) of the asset.
 * Returns 1 when it took them, 0 to stop (the parser keeps them for the
 * next feed: nothing of them was consumed).
 */
typedef int (*px_multipart_emit_fn)(void *ctx, int64_t off, const char *buf, size_t len);

/*
 * Feeds the next len bytes of the body. Sets *used to the bytes consumed.
 * Returns PX_OK when all were consumed, PX_EFULL when emit stopped (its
 * receiver has no room now: the bytes from buf + *used on come again), PX_EOF once the closing
 * delimiter is in (the rest is epilogue, ignored), PX_EBADRESP for a
 * broken body, with why in words. Pure but for emit.
 */
enum px_status px_multipart_feed(struct px_multipart *m, const char *buf, size_t len,
				 size_t *used, px_multipart_emit_fn emit, void *ctx,
				 char *why, size_t whylen) PX_WUR;

/* Whether the closing delimiter has come (every part was whole). */
int px_multipart_done(const struct px_multipart *m);

#endif
