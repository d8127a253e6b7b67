/*
 * multipart.c - see multipart.h.
 *
 * A byte-driven state machine, so a body may come in chunks cut anywhere:
 * the delimiter ("\r\n--" and the boundary; the first may lack its CRLF),
 * two bytes after it ("\r\n": a part follows, "--": the end), the part's
 * header lines up to an empty one, then exactly the bytes its
 * Content-Range names, handed to emit in runs. Nothing is searched for:
 * every byte is either the one expected or a broken answer.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "httpparse.h"
#include "multipart.h"

enum { MP_OPEN, MP_DELIM, MP_AFTER, MP_HEAD, MP_DATA, MP_DONE };

#define MP_MAX_LINES 16 /* header lines of a part, at most */

static int tchar(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* RFC 2046's bchars: what a boundary may hold (a space, but not last). */
static int bchar(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("'()+_,-./:=? ", c));
}

static void trim(const char **v, size_t *len)
{
	while (*len && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*len)--;
	}
	while (*len && ((*v)[*len - 1] == ' ' || (*v)[*len - 1] == '\t'))
		(*len)--;
}

/* A boundary of 1-70 bchars into out; 0 when it is not one. */
static int boundary_copy(const char *v, size_t n, char *out)
{
	if (n == 0 || n > PX_MULTIPART_BOUNDARY || v[n - 1] == ' ')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!bchar(v[i]))
			return 0;
	memcpy(out, v, n);
	out[n] = '\0';
	return 1;
}

/* Whether only blanks lie in [p, end). */
static int blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p == end;
}

int px_multipart_boundary(const char *v, size_t len, char *out)
{
	const char *end = v + len, *semi = memchr(v, ';', len);
	size_t n = semi ? (size_t)(semi - v) : len;
	const char *t = v;
	int found = 0, ok = 1;

	out[0] = '\0';
	trim(&t, &n);
	if (n != 20 || strncasecmp(t, "multipart/byteranges", 20) != 0)
		return -1;
	while (semi && ok) {
		const char *p = semi + 1;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		semi = memchr(p, ';', (size_t)(end - p));
		if ((size_t)(end - p) < 9 || strncasecmp(p, "boundary=", 9) != 0)
			continue;
		p += 9;
		if (found++) {
			ok = 0;
		} else if (p < end && *p == '"') {
			/* a quoted string (no escapes: a boundary has none to
			 * escape), which may hold ';' */
			const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
			semi = q ? memchr(q, ';', (size_t)(end - q)) : NULL;
			ok = q && blank(q + 1, semi ? semi : end) &&
			     boundary_copy(p + 1, (size_t)(q - p - 1), out);
		} else {
			const char *e = semi ? semi : end;
			size_t bl = 0;
			while (p + bl < e && tchar(p[bl]))
				bl++;
			ok = blank(p + bl, e) && boundary_copy(p, bl, out);
		}
	}
	if (!ok)
		out[0] = '\0';
	return ok && found ? 1 : 0;
}

enum px_status px_multipart_init(struct px_multipart *m, const char *b,
				 const struct px_multipart_range *want, int nwant,
				 int64_t total, int html_ok)
{
	size_t blen = strlen(b);
	memset(m, 0, sizeof(*m));
	if (blen == 0 || blen > PX_MULTIPART_BOUNDARY || nwant < 1 ||
	    nwant > PX_MULTIPART_RANGES || total <= 0)
		return PX_EINVAL;
	for (int i = 0; i < nwant; i++)
		if (want[i].first < 0 || want[i].last < want[i].first || want[i].last >= total ||
		    (i > 0 && want[i].first <= want[i - 1].last))
			return PX_EINVAL;
	memcpy(m->boundary, b, blen + 1);
	m->blen = blen;
	memcpy(m->want, want, sizeof(*want) * (size_t)nwant);
	m->nwant = nwant;
	m->total = total;
	m->html_ok = html_ok;
	m->state = MP_OPEN;
	return PX_OK;
}

int px_multipart_done(const struct px_multipart *m)
{
	return m->state == MP_DONE;
}

static enum px_status bad(char *why, size_t whylen, const char *what, int part)
{
	snprintf(why, whylen, "multipart/byteranges answer: %s (part %d)", what, part + 1);
	return PX_EBADRESP;
}

/* The i-th byte of the delimiter expected now ("\r\n--B", or "--B" for a
 * first one without its CRLF); 0 past its end. */
static char delim_char(const struct px_multipart *m, size_t i)
{
	static const char crlf[] = "\r\n--";
	size_t pre = m->state == MP_OPEN && !m->lead ? 2 : 4;
	const char *p = pre == 2 ? crlf + 2 : crlf;
	if (i < pre)
		return p[i];
	return i - pre < m->blen ? m->boundary[i - pre] : 0;
}

/* One header line of a part (CRLF cut off): its Content-Range must be the
 * range asked for. */
static enum px_status head_line(struct px_multipart *m, char *why, size_t whylen)
{
	const char *name, *value;
	size_t nl, vl;
	struct px_content_range cr;

	if (px_http_header(m->line, m->linelen, &name, &nl, &value, &vl) != PX_OK)
		return bad(why, whylen, "a header line that is not one", m->part);
	if (px_http_name_is(name, nl, "Content-Type")) {
		/* a page in place of the file, as a 200 or 206 may carry one */
		const char *semi = memchr(value, ';', vl);
		size_t n = semi ? (size_t)(semi - value) : vl;
		trim(&value, &n);
		if (!m->html_ok && ((n == 9 && strncasecmp(value, "text/html", 9) == 0) ||
				    (n == 21 && strncasecmp(value, "application/xhtml+xml", 21) == 0)))
			return bad(why, whylen, "an HTML page, not the asset's bytes", m->part);
		return PX_OK;
	}
	if (!px_http_name_is(name, nl, "Content-Range"))
		return PX_OK; /* nothing to us */
	if (m->have_cr++)
		return bad(why, whylen, "two Content-Range headers", m->part);
	if (px_http_content_range(value, vl, &cr) != PX_OK || cr.first < 0)
		return bad(why, whylen, "a Content-Range that does not parse", m->part);
	const struct px_multipart_range *w = &m->want[m->part];
	if (cr.first != w->first || cr.last != w->last) {
		char what[120];
		snprintf(what, sizeof(what), "bytes %lld-%lld where %lld-%lld was asked",
			 (long long)cr.first, (long long)cr.last, (long long)w->first,
			 (long long)w->last);
		return bad(why, whylen, what, m->part);
	}
	if (cr.total != m->total)
		return bad(why, whylen, "a Content-Range total other than the asset's size",
			   m->part);
	return PX_OK;
}

/* Takes one framing byte c (any state but MP_DATA and MP_DONE). */
static enum px_status framing(struct px_multipart *m, char c, char *why, size_t whylen)
{
	switch (m->state) {
	case MP_OPEN:
	case MP_DELIM:
		if (m->state == MP_OPEN && m->matched == 0 && c == '\r')
			m->lead = 1;
		if (c != delim_char(m, m->matched))
			return bad(why, whylen, "not the boundary its Content-Type names", m->part);
		if (!delim_char(m, ++m->matched)) {
			m->state = MP_AFTER;
			m->matched = 0;
		}
		return PX_OK;
	case MP_AFTER:
		if (m->matched == 0) {
			m->line[0] = c;
			m->matched = 1;
			return c == '\r' || c == '-' ? PX_OK
				: bad(why, whylen, "garbage after a boundary", m->part);
		}
		if (m->line[0] == '-' && c == '-') {
			if (m->part != m->nwant)
				return bad(why, whylen, "the answer ends before this part", m->part);
			m->state = MP_DONE;
			return PX_OK;
		}
		if (m->line[0] != '\r' || c != '\n')
			return bad(why, whylen, "garbage after a boundary", m->part);
		if (m->part >= m->nwant)
			return bad(why, whylen, "more parts than ranges asked for", m->part);
		m->state = MP_HEAD;
		m->linelen = 0;
		m->lines = m->have_cr = 0;
		return PX_OK;
	default: /* MP_HEAD */
		if (m->linelen >= sizeof(m->line))
			return bad(why, whylen, "a header line too long", m->part);
		m->line[m->linelen++] = c;
		if (c != '\n')
			return PX_OK;
		if (m->linelen < 2 || m->line[m->linelen - 2] != '\r')
			return bad(why, whylen, "a header line not ended by CRLF", m->part);
		m->linelen -= 2;
		if (m->linelen == 0) {
			if (!m->have_cr)
				return bad(why, whylen, "no Content-Range", m->part);
			m->state = MP_DATA;
			m->pos = m->want[m->part].first;
			return PX_OK;
		}
		if (++m->lines > MP_MAX_LINES)
			return bad(why, whylen, "too many header lines", m->part);
		enum px_status st = head_line(m, why, whylen);
		m->linelen = 0;
		return st;
	}
}

enum px_status px_multipart_feed(struct px_multipart *m, const char *buf, size_t len,
				 size_t *used, px_multipart_emit_fn emit, void *ctx,
				 char *why, size_t whylen)
{
	size_t at = 0;
	enum px_status st = PX_OK;

	while (at < len && m->state != MP_DONE) {
		if (m->state == MP_DATA) {
			int64_t left = m->want[m->part].last + 1 - m->pos;
			size_t n = (int64_t)(len - at) < left ? len - at : (size_t)left;
			if (!emit(ctx, m->pos, buf + at, n)) {
				st = PX_EFULL;
				break;
			}
			at += n;
			m->pos += (int64_t)n;
			if (m->pos > m->want[m->part].last) {
				m->part++;
				m->state = MP_DELIM;
				m->matched = 0;
			}
			continue;
		}
		st = framing(m, buf[at], why, whylen);
		if (st != PX_OK)
			break;
		at++;
	}
	*used = at;
	if (st == PX_OK && m->state == MP_DONE)
		st = PX_EOF;
	return st;
}
