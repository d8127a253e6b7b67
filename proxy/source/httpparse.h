/*
 * httpparse.h - strict parsers for the HTTP response parts seamfs relies on:
 * the status line, header lines, Content-Length and Content-Range.
 *
 * They take a buffer and a length (header lines from libcurl are not NUL
 * terminated), never read past it, and reject anything ambiguous: a range
 * we cannot parse exactly is treated as a broken response, never guessed.
 */
#ifndef SEAMFS_HTTPPARSE_H
#define SEAMFS_HTTPPARSE_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

struct px_content_range {
	int64_t first, last;  /* both -1 for an unsatisfied-range answer */
	int64_t total;        /* -1 when the server gave "*" */
};

/* "HTTP/1.1 206 Partial Content", "HTTP/2 200". PX_EINVAL if not a status line. */
enum px_status px_http_status_line(const char *line, size_t len, int *status) PX_WUR;

/*
 * Splits "Name: value\r\n" into name and value (whitespace trimmed); the
 * pointers point into line. PX_EINVAL for a line without ':' or with an
 * empty or invalid name.
 */
enum px_status px_http_header(const char *line, size_t len,
			      const char **name, size_t *namelen,
			      const char **value, size_t *valuelen) PX_WUR;

/* Whether the header name (namelen bytes) equals want, ignoring case. */
int px_http_name_is(const char *name, size_t namelen, const char *want);

/* A decimal Content-Length value, no sign, no overflow. */
enum px_status px_http_content_length(const char *v, size_t len, int64_t *out) PX_WUR;

/*
 * A Content-Range value: FIRST-LAST/TOTAL, an unsatisfied range (a star
 * for the range), or an unknown total (a star for TOTAL); FIRST <= LAST < TOTAL.
 */
enum px_status px_http_content_range(const char *v, size_t len,
				     struct px_content_range *out) PX_WUR;

/*
 * A response head as seamfs judges it, built line by line from the header
 * lines libcurl hands over (a status line starts a new head: a redirect's
 * headers never mix with the final response's).
 */
struct px_http_head {
	int status;               /* 0 until a status line came */
	int64_t clen;             /* Content-Length, -1: none or unparsable */
	int have_cr;
	struct px_content_range cr;
	int chunked;              /* a Transfer-Encoding other than identity */
	int html;                 /* Content-Type text/html or application/xhtml+xml */
	char encoding[32];        /* a Content-Encoding other than identity, "" */
	char etag[128];           /* as sent, "" if none or longer */
	char ctype[160];          /* Content-Type as sent, "" if none or
				   * longer (multipart.h reads it) */
};

void px_http_head_reset(struct px_http_head *h);

/* Feeds one line (len bytes, not NUL terminated, CRLF included or not).
 * Returns 1 when it was a status line (the head was reset), else 0. */
int px_http_head_line(struct px_http_head *h, const char *line, size_t len);

/* What a transfer asked for. */
struct px_http_want {
	int64_t offset, length;   /* length 0: a probe (size only) */
	int64_t expect_size;      /* the asset's size, -1 when not known */
	int html_ok;              /* the asset is itself an HTML file */
};

/*
 * Whether a final response head proves it carries the asked bytes of the
 * asset, before any body byte is used. Identity encoding only; a 200 only
 * with a known length equal to the asset's size (any length for a probe of
 * an asset of unknown size); a 206 only with a Content-Range that starts
 * where asked and agrees with Content-Length; an HTML page only for an HTML
 * asset. PX_OK sets *body_pos (the absolute offset of the first body byte)
 * and *size (the total it gave, -1 none). Otherwise: PX_ENOTASSET (an
 * answer that is not the asset's bytes: HTML, compressed, unknown length),
 * PX_EBADRESP (a broken range answer), PX_ESIZE (a probe's other size, a
 * 416), PX_ENOTFOUND, PX_EAUTH, PX_ESERVER; why says it in words.
 */
enum px_status px_http_judge(const struct px_http_head *h, const struct px_http_want *w,
			     int64_t *body_pos, int64_t *size, char *why, size_t whylen) PX_WUR;

/* Whether a file name or path ends in .html or .htm (any case). */
int px_http_is_html_path(const char *path);

#endif
