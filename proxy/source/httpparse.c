/*
 * httpparse.c - see httpparse.h. Pure functions, fuzzed by
 * tests/fuzz/fuzz_httpparse.c.
 */
#include <ctype.h>
#include <stdio.h>
#include <strings.h>
#include <string.h>

#include "httpparse.h"

/* Reads a decimal number of up to 18 digits at *p (bounded by end). */
static int read_num(const char **p, const char *end, int64_t *out)
{
	int64_t n = 0;
	int digits = 0;
	while (*p < end && isdigit((unsigned char)**p)) {
		if (++digits > 18)
			return -1;
		n = n * 10 + (**p - '0');
		(*p)++;
	}
	if (!digits)
		return -1;
	*out = n;
	return 0;
}

static void trim(const char **s, size_t *len)
{
	while (*len && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*len)--;
	}
	while (*len && strchr(" \t\r\n", (*s)[*len - 1]) && (*s)[*len - 1])
		(*len)--;
}

enum px_status px_http_status_line(const char *line, size_t len, int *status)
{
	const char *p = line, *end = line + len;
	if (len < 10 || memcmp(line, "HTTP/", 5) != 0)
		return PX_EINVAL;
	p += 5;
	while (p < end && (isdigit((unsigned char)*p) || *p == '.'))
		p++;
	if (p == line + 5 || p >= end || *p != ' ')
		return PX_EINVAL;
	p++;
	if (end - p < 3 || !isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]) ||
	    !isdigit((unsigned char)p[2]))
		return PX_EINVAL;
	if (end - p > 3 && (p[3] == '\0' || !strchr(" \r\n", p[3])))
		return PX_EINVAL;
	*status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
	if (*status < 100)
		return PX_EINVAL;
	return PX_OK;
}

enum px_status px_http_header(const char *line, size_t len,
			      const char **name, size_t *namelen,
			      const char **value, size_t *valuelen)
{
	const char *colon = memchr(line, ':', len);
	if (!colon || colon == line)
		return PX_EINVAL;
	for (const char *q = line; q < colon; q++)
		if (!(isalnum((unsigned char)*q) || strchr("!#$%&'*+-.^_`|~", *q)) || !*q)
			return PX_EINVAL;
	*name = line;
	*namelen = (size_t)(colon - line);
	*value = colon + 1;
	*valuelen = len - *namelen - 1;
	trim(value, valuelen);
	return PX_OK;
}

int px_http_name_is(const char *name, size_t namelen, const char *want)
{
	return strlen(want) == namelen && strncasecmp(name, want, namelen) == 0;
}

enum px_status px_http_content_length(const char *v, size_t len, int64_t *out)
{
	const char *p = v, *end = v + len;
	trim(&p, &len);
	end = p + len;
	if (read_num(&p, end, out) || p != end)
		return PX_EINVAL;
	return PX_OK;
}

enum px_status px_http_content_range(const char *v, size_t len,
				     struct px_content_range *out)
{
	const char *p = v, *end;
	trim(&p, &len);
	end = p + len;
	if (len < 6 || strncasecmp(p, "bytes", 5) != 0 || p[5] != ' ')
		return PX_EINVAL;
	p += 6;
	while (p < end && *p == ' ')
		p++;
	if (p < end && *p == '*') {
		out->first = out->last = -1;
		p++;
	} else {
		if (read_num(&p, end, &out->first) || p >= end || *p != '-')
			return PX_EINVAL;
		p++;
		if (read_num(&p, end, &out->last) || out->last < out->first)
			return PX_EINVAL;
	}
	if (p >= end || *p != '/')
		return PX_EINVAL;
	p++;
	if (p < end && *p == '*') {
		if (out->first < 0)
			return PX_EINVAL; /* a star for both says nothing */
		out->total = -1;
		p++;
	} else if (read_num(&p, end, &out->total)) {
		return PX_EINVAL;
	}
	if (p != end)
		return PX_EINVAL;
	if (out->total >= 0 && out->last >= out->total)
		return PX_EINVAL;
	return PX_OK;
}

/* ---- response heads */

void px_http_head_reset(struct px_http_head *h)
{
	memset(h, 0, sizeof(*h));
	h->clen = -1;
}

/* Whether the token list v (comma separated, any case) names only identity. */
static int only_identity(const char *v, size_t len)
{
	while (len) {
		const char *comma = memchr(v, ',', len);
		size_t n = comma ? (size_t)(comma - v) : len;
		const char *t = v;
		size_t tl = n;
		trim(&t, &tl);
		if (tl && !(tl == 8 && strncasecmp(t, "identity", 8) == 0))
			return 0;
		if (!comma)
			break;
		v = comma + 1;
		len -= n + 1;
	}
	return 1;
}

/* Whether a Content-Type value is an HTML document. */
static int html_type(const char *v, size_t len)
{
	const char *semi = memchr(v, ';', len);
	size_t n = semi ? (size_t)(semi - v) : len;
	trim(&v, &n);
	return (n == 9 && strncasecmp(v, "text/html", 9) == 0) ||
	       (n == 21 && strncasecmp(v, "application/xhtml+xml", 21) == 0);
}

int px_http_head_line(struct px_http_head *h, const char *line, size_t len)
{
	const char *name, *value;
	size_t nl, vl;
	int status;

	if (px_http_status_line(line, len, &status) == PX_OK) {
		px_http_head_reset(h);
		h->status = status;
		return 1;
	}
	if (px_http_header(line, len, &name, &nl, &value, &vl) != PX_OK)
		return 0;
	if (px_http_name_is(name, nl, "Content-Length")) {
		if (px_http_content_length(value, vl, &h->clen) != PX_OK)
			h->clen = -1;
	} else if (px_http_name_is(name, nl, "Content-Range")) {
		h->have_cr = px_http_content_range(value, vl, &h->cr) == PX_OK;
	} else if (px_http_name_is(name, nl, "Transfer-Encoding")) {
		h->chunked |= !only_identity(value, vl);
	} else if (px_http_name_is(name, nl, "Content-Encoding")) {
		if (!only_identity(value, vl) && !h->encoding[0]) {
			size_t keep = vl < sizeof(h->encoding) ? vl : sizeof(h->encoding) - 1;
			memcpy(h->encoding, value, keep);
			h->encoding[keep] = '\0';
			for (size_t i = 0; i < keep; i++)
				if ((unsigned char)h->encoding[i] < 0x20 || h->encoding[i] == 0x7f)
					h->encoding[i] = '?';
			if (!h->encoding[0])
				snprintf(h->encoding, sizeof(h->encoding), "?");
		}
	} else if (px_http_name_is(name, nl, "Content-Type")) {
		h->html = html_type(value, vl);
		/* kept whole or not at all, like the ETag */
		size_t keep = vl < sizeof(h->ctype) && !memchr(value, '\0', vl) ? vl : 0;
		memcpy(h->ctype, value, keep);
		h->ctype[keep] = '\0';
	} else if (px_http_name_is(name, nl, "ETag")) {
		/* kept whole or not at all: a cut ETag could match another */
		size_t keep = vl < sizeof(h->etag) && !memchr(value, '\0', vl) ? vl : 0;
		memcpy(h->etag, value, keep);
		h->etag[keep] = '\0';
	}
	return 0;
}

enum px_status px_http_judge(const struct px_http_head *h, const struct px_http_want *w,
			     int64_t *body_pos, int64_t *size, char *why, size_t whylen)
{
	int64_t total = -1;

	*body_pos = 0;
	*size = -1;
	switch (h->status) {
	case 404:
	case 410:
		snprintf(why, whylen, "HTTP %d", h->status);
		return PX_ENOTFOUND;
	case 401:
	case 403:
	case 407:
		snprintf(why, whylen, "HTTP %d", h->status);
		return PX_EAUTH;
	case 416:
		if (w->length == 0 && w->offset == 0 && h->have_cr && h->cr.total == 0) {
			*size = 0; /* probing an empty resource */
			return PX_OK;
		}
		snprintf(why, whylen, "HTTP 416: the source has no byte %lld", (long long)w->offset);
		return PX_ESIZE;
	case 200:
	case 206:
		break;
	default:
		snprintf(why, whylen, "HTTP %d", h->status);
		return h->status >= 500 && h->status < 600 ? PX_ESERVER : PX_EBADRESP;
	}
	/* what the body is, before where it goes: these are not the asset's
	 * bytes whatever range they claim */
	if (h->encoding[0]) {
		snprintf(why, whylen, "HTTP %d with Content-Encoding %s, not the asset's bytes",
			 h->status, h->encoding);
		return PX_ENOTASSET;
	}
	if (h->html && !w->html_ok) {
		snprintf(why, whylen, "HTTP %d with an HTML page (Content-Type text/html), "
			 "not the asset", h->status);
		return PX_ENOTASSET;
	}
	if (h->status == 206) {
		if (!h->have_cr || h->cr.first < 0) {
			snprintf(why, whylen, "206 without a valid Content-Range");
			return PX_EBADRESP;
		}
		if (h->cr.first != w->offset) {
			snprintf(why, whylen, "Content-Range starts at %lld, asked for %lld",
				 (long long)h->cr.first, (long long)w->offset);
			return PX_EBADRESP;
		}
		if (!h->chunked && h->clen >= 0 && h->clen != h->cr.last - h->cr.first + 1) {
			snprintf(why, whylen, "Content-Length %lld disagrees with Content-Range %lld-%lld",
				 (long long)h->clen, (long long)h->cr.first, (long long)h->cr.last);
			return PX_EBADRESP;
		}
		total = h->cr.total;
		*body_pos = h->cr.first;
	} else {
		/* the whole resource: only as good as its announced length */
		if (h->chunked || h->clen < 0) {
			snprintf(why, whylen, "HTTP 200 of unknown length (%s), not a file's bytes",
				 h->chunked ? "chunked" : "no Content-Length");
			return PX_ENOTASSET;
		}
		total = h->clen;
	}
	if (total > (1LL << 62)) {
		snprintf(why, whylen, "a size of %lld bytes, past 2^62", (long long)total);
		return PX_EBADRESP;
	}
	*size = total;
	if (w->expect_size >= 0 && total >= 0 && total != w->expect_size) {
		snprintf(why, whylen, "the source has %lld bytes, the asset %lld",
			 (long long)total, (long long)w->expect_size);
		/* a probe asks the size itself: a different one is the source's
		 * size. In a read it may be one broken answer: worth a retry. */
		return w->length == 0 ? PX_ESIZE : PX_EBADRESP;
	}
	return PX_OK;
}

int px_http_is_html_path(const char *path)
{
	size_t n = path ? strlen(path) : 0;
	return (n >= 5 && strcasecmp(path + n - 5, ".html") == 0) ||
	       (n >= 4 && strcasecmp(path + n - 4, ".htm") == 0);
}
