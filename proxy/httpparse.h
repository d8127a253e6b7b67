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

#endif
