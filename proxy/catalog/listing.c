/*
 * listing.c - the entries of an HTTP directory listing page (listing.h).
 *
 * One pass over the page, as a small HTML tokenizer: text, start tags with
 * their attributes, end tags; comments, <script> and <style> skipped
 * whole. Every byte is looked at a bounded number of times, whatever the
 * input (a tag without its '>', a quote never closed), so a hostile page
 * costs time in proportion to its length.
 *
 * Each <a href> that resolves to a child of the page's directory opens an
 * entry; what follows its </a> up to the end of its row (</tr> or <tr> in
 * the table formats, the end of the line in nginx's and Apache's <pre>
 * formats) or the next link is where its size is looked for: an attribute
 * (caddy's data-size, rclone's data-order) or the last size-like word of
 * the text. Which of these is trusted depends on the server, told from the
 * page's markup before the pass. The row's words are also kept (up to
 * ROW_TEXT bytes) for its date, or a <time datetime> attribute (caddy,
 * rclone) gives it.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "listing.h"
#include "strmap.h"
#include "utf8.h"

#define MAX_SIZE_DIGITS 18          /* below 2^62, the catalog's bound */
#define ROW_TEXT 160                /* a row's words kept for its date: a
				     * date and a size fit with room */

struct base {
	int https;
	const char *auth;           /* authority as given (userinfo kept) */
	size_t authlen;
	char host[256];             /* lowercase, without userinfo and port */
	int port;
	char *dir;                  /* the path up to and including its last '/' */
	char *ddir;                 /* dir percent-decoded */
	size_t dirslashes;          /* '/' in dir */
};

struct parse {
	struct base b;
	struct px_listing *l;
	size_t cap;
	struct px_strmap *names;
	int rows;                   /* a row ends at <tr>/</tr>, not at a newline */
	int oom;
	/* the entry whose row is being read */
	long pending;               /* index into l->entries, -1: none */
	int closed;                 /* its </a> was seen: its row's rest follows */
	int64_t attr_size;          /* -1: no data-size/data-order seen */
	int64_t word_size;          /* last size-like word: bytes, -2 inexact, -1 none */
	int64_t attr_time;          /* -1: no <time datetime> seen */
	char bad_attr[64];          /* a <time datetime> that is no date, as
				     * written (cut); "" when none */
	char row[ROW_TEXT];         /* its words, one space apart */
	size_t rowlen;
};

const char *px_listing_kind_name(enum px_listing_kind kind)
{
	switch (kind) {
	case PX_LISTING_NGINX: return "nginx";
	case PX_LISTING_APACHE: return "Apache";
	case PX_LISTING_LIGHTTPD: return "lighttpd";
	case PX_LISTING_CADDY: return "caddy";
	case PX_LISTING_RCLONE: return "rclone";
	case PX_LISTING_GENERIC: return "generic";
	}
	return "generic";
}

void px_listing_free(struct px_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->entries[i].name);
		free(l->entries[i].url);
		free(l->entries[i].bad_date);
	}
	free(l->entries);
	free(l);
}

/* Percent-decodes [s, s + n) into out (room for n + 1); a '%' without two
 * hex digits stays as it is. Returns the decoded length (NUL-terminated). */
static size_t pct_decode(const char *s, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int hi, lo;
		if (s[i] == '%' && i + 2 < n &&
		    (hi = px_hex_digit((unsigned char)s[i + 1])) >= 0 &&
		    (lo = px_hex_digit((unsigned char)s[i + 2])) >= 0) {
			out[o++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
	return o;
}

char *px_listing_encode(const char *name)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(name);
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		if (isalnum(*p) || strchr("-._~!$&'()*+,;=:@", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

/* A copy of [s, s + n) with the bytes a URL may not hold (controls,
 * space, non-ASCII, "<>\^`{|} and a '%' that starts no escape)
 * percent-encoded. */
static char *url_clean(const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int bad = c <= 0x20 || c >= 0x7f || strchr("\"<>\\^`{|}", c);
		if (c == '%')
			bad = !(i + 2 < n && px_hex_digit((unsigned char)s[i + 1]) >= 0 &&
				px_hex_digit((unsigned char)s[i + 2]) >= 0);
		if (bad) {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		} else {
			*o++ = (char)c;
		}
	}
	*o = '\0';
	return out;
}

/* host (lowercase) and port of an authority; -1 when malformed. */
static int parse_authority(const char *a, size_t n, int https, char *host, size_t cap,
			   int *port)
{
	const char *at = NULL;
	for (size_t i = 0; i < n; i++)
		if (a[i] == '@')
			at = a + i;
	if (at) {
		n -= (size_t)(at + 1 - a);
		a = at + 1;
	}
	size_t hlen;
	const char *colon = NULL;
	if (n && a[0] == '[') {
		const char *rb = memchr(a, ']', n);
		if (!rb)
			return -1;
		hlen = (size_t)(rb + 1 - a);
		if (hlen < n) {
			if (rb[1] != ':')
				return -1;
			colon = rb + 1;
		}
	} else {
		colon = memchr(a, ':', n);
		hlen = colon ? (size_t)(colon - a) : n;
	}
	if (hlen == 0 || hlen >= cap)
		return -1;
	for (size_t i = 0; i < hlen; i++)
		host[i] = (char)tolower((unsigned char)a[i]);
	host[hlen] = '\0';
	*port = https ? 443 : 80;
	if (colon && colon + 1 == a + n)
		return -1;          /* "host:" */
	if (colon) {
		int p = 0;
		for (const char *q = colon + 1; q < a + n; q++) {
			if (!isdigit((unsigned char)*q) || (p = p * 10 + (*q - '0')) > 65535)
				return -1;
		}
		*port = p;
	}
	return 0;
}

/* Length of the scheme at s ("http" of "http://"), 0 when it has none. */
static size_t scheme_len(const char *s, size_t n)
{
	if (!n || !isalpha((unsigned char)s[0]))
		return 0;
	for (size_t i = 1; i < n; i++) {
		if (s[i] == ':')
			return i;
		if (!isalnum((unsigned char)s[i]) && !strchr("+-.", s[i]))
			return 0;
	}
	return 0;
}

static int parse_base(struct base *b, const char *url)
{
	size_t n = strlen(url), skip;
	char hostport[300];
	if (px_catalog_bad_url(url, hostport, sizeof(hostport)))
		return -1;          /* the catalog's rules: entries' URLs share its origin */
	if (n >= 7 && strncasecmp(url, "http://", 7) == 0)
		skip = 7;
	else if (n >= 8 && strncasecmp(url, "https://", 8) == 0)
		skip = 8, b->https = 1;
	else
		return -1;
	b->auth = url + skip;
	b->authlen = strcspn(b->auth, "/?#");
	if (parse_authority(b->auth, b->authlen, b->https, b->host, sizeof(b->host), &b->port))
		return -1;
	const char *path = b->auth + b->authlen;
	size_t plen = strcspn(path, "?#");
	size_t keep = 0;
	for (size_t i = 0; i < plen; i++)
		if (path[i] == '/')
			keep = i + 1;
	if (keep == 0) {
		b->dir = strdup("/");
	} else {
		b->dir = malloc(keep + 1);
		if (b->dir) {
			memcpy(b->dir, path, keep);
			b->dir[keep] = '\0';
		}
	}
	if (!b->dir || !(b->ddir = malloc(strlen(b->dir) + 1)))
		return -2;
	pct_decode(b->dir, strlen(b->dir), b->ddir);
	for (const char *q = b->dir; *q; q++)
		b->dirslashes += *q == '/';
	return 0;
}

/* RFC 3986 5.2.4 on an absolute path (starting with '/') into out. */
static void remove_dots(const char *in, char *out)
{
	size_t o = 0;
	while (*in) {
		if (strncmp(in, "/./", 3) == 0) {
			in += 2;
			continue;
		}
		if (strcmp(in, "/.") == 0) {
			out[o++] = '/';
			break;
		}
		if (strncmp(in, "/../", 4) == 0 || strcmp(in, "/..") == 0) {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			if (in[3] == '\0') {
				out[o++] = '/';
				break;
			}
			in += 3;
			continue;
		}
		out[o++] = *in++;
		while (*in && *in != '/')
			out[o++] = *in++;
	}
	out[o] = '\0';
}

/*
 * The path an href leads to, dot segments removed, when it stays on the
 * page's origin and has no query; NULL otherwise (or with p->oom set).
 */
static char *resolve(struct parse *p, const char *href, size_t n)
{
	const struct base *b = &p->b;
	char *clean = malloc(n + 1), *joined = NULL, *out = NULL;
	size_t c = 0;
	if (!clean) {
		p->oom = 1;
		return NULL;
	}
	/* a browser drops blanks around the value and tabs and newlines in it */
	while (n && isspace((unsigned char)*href))
		href++, n--;
	while (n && isspace((unsigned char)href[n - 1]))
		n--;
	for (size_t i = 0; i < n; i++)
		if (href[i] != '\t' && href[i] != '\n' && href[i] != '\r')
			clean[c++] = href[i];
	clean[c] = '\0';
	c = strcspn(clean, "#");
	clean[c] = '\0';
	if (c == 0 || strchr(clean, '?'))
		goto out;               /* the page itself, a sort link, a query */
	const char *path;
	size_t sl = scheme_len(clean, c);
	const char *rest = clean;
	int https = b->https;
	if (sl) {
		if (sl == 4 && strncasecmp(clean, "http", 4) == 0)
			https = 0;
		else if (sl == 5 && strncasecmp(clean, "https", 5) == 0)
			https = 1;
		else
			goto out;       /* mailto:, javascript:, ftp: */
		rest = clean + sl + 1;
		if (strncmp(rest, "//", 2) != 0)
			goto out;
	}
	if (strncmp(rest, "//", 2) == 0) {
		char host[256];
		int port;
		const char *auth = rest + 2;
		size_t alen = strcspn(auth, "/");
		if (https != b->https ||
		    parse_authority(auth, alen, https, host, sizeof(host), &port) ||
		    strcmp(host, b->host) != 0 || port != b->port)
			goto out;       /* another origin */
		path = auth[alen] ? auth + alen : "/";
		joined = strdup(path);
	} else if (rest[0] == '/') {
		joined = strdup(rest);
	} else {
		joined = malloc(strlen(b->dir) + strlen(rest) + 1);
		if (joined) {
			strcpy(joined, b->dir);
			strcat(joined, rest);
		}
	}
	if (!joined || !(out = malloc(strlen(joined) + 2))) {
		p->oom = 1;
		goto out;
	}
	remove_dots(joined, out);
out:
	free(clean);
	free(joined);
	return out;
}

static int64_t entry_size(const struct parse *p, enum px_listing_kind kind)
{
	switch (kind) {
	case PX_LISTING_CADDY:
	case PX_LISTING_RCLONE:
		return p->attr_size;
	case PX_LISTING_NGINX:
	case PX_LISTING_APACHE:
	case PX_LISTING_LIGHTTPD:
		return p->word_size >= 0 ? p->word_size : -1;
	case PX_LISTING_GENERIC:
		break;
	}
	return -1;
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil); -1 when the day does not exist or lies
 * before 1970 or after 9999. */
static int64_t days_from_civil(int y, int m, int d)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	if (y < 1970 || y > 9999 || m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
		return -1;
	if (m == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
		return -1;
	y -= m <= 2;
	int64_t era = y / 400, yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* n decimal digits at s (exactly n), else -1. */
static int digits(const char *s, size_t len, size_t n)
{
	int v = 0;
	if (len < n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* A month as a number ("12") or an English name ("Dec"), else -1. */
static int month(const char *s, size_t n)
{
	static const char names[] = "janfebmaraprmayjunjulaugsepoctnovdec";
	if (n == 1 || n == 2)
		return digits(s, n, n);
	for (int k = 0; n == 3 && k < 12; k++)
		if (strncasecmp(s, names + 3 * k, 3) == 0)
			return k + 1;
	return -1;
}

/* A day "YYYY-MM-DD", "YYYY-Mon-DD" or "DD-Mon-YYYY" filling all of
 * [s, s + n): days since 1970, else -1. */
static int64_t day_word(const char *s, size_t n)
{
	const char *d1 = memchr(s, '-', n);
	const char *d2 = d1 ? memchr(d1 + 1, '-', n - (size_t)(d1 + 1 - s)) : NULL;
	if (!d2)
		return -1;
	size_t n0 = (size_t)(d1 - s), n1 = (size_t)(d2 - d1 - 1), n2 = n - (size_t)(d2 + 1 - s);
	int y, d, m = month(d1 + 1, n1);
	if (n0 == 4 && (n2 == 1 || n2 == 2)) {
		y = digits(s, n0, 4);
		d = digits(d2 + 1, n2, n2);
	} else if ((n0 == 1 || n0 == 2) && n2 == 4) {
		d = digits(s, n0, n0);
		y = digits(d2 + 1, n2, 4);
	} else {
		return -1;
	}
	return y < 0 || d < 0 || m < 0 ? -1 : days_from_civil(y, m, d);
}

/* A clock "HH:MM" or "HH:MM:SS" at the start of [s, s + n): seconds into
 * the day, *used the bytes it took; -1 if none. */
static int64_t clock_word(const char *s, size_t n, size_t *used)
{
	int h = digits(s, n, 2), mi = n >= 5 && s[2] == ':' ? digits(s + 3, n - 3, 2) : -1;
	int sec = 0;
	*used = 5;
	if (n >= 8 && s[5] == ':') {
		sec = digits(s + 6, n - 6, 2);
		*used = 8;
	}
	if (h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60)
		return -1;
	return (int64_t)h * 3600 + mi * 60 + (sec == 60 ? 59 : sec);
}

/* Whether [s, s + n) is shaped like a day word, letters and digits in
 * three parts ("31-Feb-2026", "2026-13-01"), whether or not it is a day. */
static int day_shape(const char *s, size_t n)
{
	size_t part[3] = { 0, 0, 0 }, k = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '-' && k < 2)
			k++;
		else if (isalnum((unsigned char)s[i]))
			part[k]++;
		else
			return 0;
	}
	if (k != 2 || part[1] < 1 || part[1] > 3)
		return 0;
	return (part[0] == 4 && part[2] >= 1 && part[2] <= 2) ||
	       (part[2] == 4 && part[0] >= 1 && part[0] <= 2);
}

/*
 * The date of a row's words: the first day word followed by a clock word
 * that fills its word (nginx, Apache, lighttpd), as UTC; -1 if none. When
 * there is none but a word is shaped like a day, *bad and *badlen give it
 * and the word after it (what the page wrote as the date).
 */
static int64_t row_date(const char *row, size_t len, const char **bad, size_t *badlen)
{
	size_t i = 0;
	*bad = NULL;
	*badlen = 0;
	while (i < len) {
		size_t w = i;
		while (i < len && row[i] != ' ')
			i++;
		int64_t day = day_word(row + w, i - w);
		size_t c0 = i + 1, c1 = c0, used;
		while (c1 < len && row[c1] != ' ')
			c1++;
		if (day >= 0 && i < len) {
			int64_t secs = clock_word(row + c0, c1 - c0, &used);
			if (secs >= 0 && used == c1 - c0)
				return day * 86400 + secs;
		}
		if (!*bad && day_shape(row + w, i - w)) {
			*bad = row + w;
			*badlen = (i < len ? c1 : i) - w;
		}
		i++;
	}
	return -1;
}

/* A zone name after a datetime (rclone's "UTC", "CET", "+03"): letters,
 * digits, '+' and '-', 1 to 8 of them, filling [s, s + n). */
static int zone_name(const char *s, size_t n)
{
	if (n < 1 || n > 8)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '+' && s[i] != '-')
			return 0;
	return 1;
}

/* A <time datetime> value: "YYYY-MM-DD", 'T' or ' ', "HH:MM:SS", an
 * optional fraction, then 'Z', an offset (+01:00, -0700) or nothing (UTC),
 * then nothing or a space and a zone name (rclone's). -1 if it is anything
 * else. */
static int64_t datetime_attr(const char *s, size_t n)
{
	size_t used, i = 10;
	int64_t day = n > 10 && s[4] == '-' && s[7] == '-' && (s[10] == 'T' || s[10] == ' ')
			      ? day_word(s, 10) : -1;
	int64_t secs = day >= 0 ? clock_word(s + 11, n - 11, &used) : -1;
	if (secs < 0 || used != 8)
		return -1;
	i = 19;
	if (i < n && (s[i] == '.' || s[i] == ','))
		for (i++; i < n && isdigit((unsigned char)s[i]); i++)
			;
	while (i < n && s[i] == ' ')
		i++;
	int64_t t = day * 86400 + secs;
	if (i < n && s[i] == 'Z') {
		i++;
	} else if (i < n && (s[i] == '+' || s[i] == '-')) {
		int oh = digits(s + i + 1, n - i - 1, 2), om = -1;
		size_t at = i + 3 + (i + 3 < n && s[i + 3] == ':');
		if (oh >= 0)
			om = digits(s + at, n > at ? n - at : 0, 2);
		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return -1;
		t -= (s[i] == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
		i = at + 2;
	}
	if (i < n && !(s[i] == ' ' && zone_name(s + i + 1, n - i - 1)))
		return -1;
	return t >= 0 ? t : -1;
}

/* The row's date; *bad and *badlen the date it gives that is none. */
static int64_t entry_time(const struct parse *p, enum px_listing_kind kind, const char **bad,
			  size_t *badlen)
{
	*bad = NULL;
	*badlen = 0;
	switch (kind) {
	case PX_LISTING_CADDY:
	case PX_LISTING_RCLONE:
		if (p->attr_time < 0 && p->bad_attr[0]) {
			*bad = p->bad_attr;
			*badlen = strlen(p->bad_attr);
		}
		return p->attr_time;
	case PX_LISTING_NGINX:
	case PX_LISTING_APACHE:
	case PX_LISTING_LIGHTTPD:
		return row_date(p->row, p->rowlen, bad, badlen);
	case PX_LISTING_GENERIC:
		break;
	}
	return -1;
}

/* The entry being read gets what its row said. */
static void finish(struct parse *p)
{
	if (p->pending >= 0) {
		struct px_listing_entry *e = &p->l->entries[p->pending];
		int64_t size = e->is_dir ? -1 : entry_size(p, p->l->kind);
		const char *bad;
		size_t badlen;
		if (e->size < 0)
			e->size = size;
		if (e->mtime < 0)
			e->mtime = entry_time(p, p->l->kind, &bad, &badlen);
		if (e->mtime >= 0) {
			free(e->bad_date);
			e->bad_date = NULL;
		} else if (bad && !e->bad_date) {
			e->bad_date = strndup(bad, badlen);
			p->oom |= !e->bad_date;
		}
	}
	p->pending = -1;
	p->closed = 0;
}

/* A new entry: *name (taken on PX_OK: *name is NULL then) at path, below
 * the page's origin. PX_EINVAL over PX_LISTING_MAX_ENTRIES. */
static enum px_status add_entry(struct parse *p, const char *path, char **name, int is_dir)
{
	char *url = NULL;
	if (p->l->n >= PX_LISTING_MAX_ENTRIES)
		return PX_EINVAL;
	size_t plen = strlen(path);
	char *cpath = url_clean(path, plen);
	if (!cpath || !(url = malloc(p->b.authlen + strlen(cpath) + 10))) {
		free(cpath);
		return PX_ENOMEM;
	}
	sprintf(url, "%s://%.*s%s", p->b.https ? "https" : "http", (int)p->b.authlen, p->b.auth,
		cpath);
	free(cpath);
	if (p->l->n == p->cap) {
		size_t ncap = p->cap ? 2 * p->cap : 32;
		struct px_listing_entry *ne = realloc(p->l->entries, ncap * sizeof(*ne));
		if (!ne) {
			free(url);
			return PX_ENOMEM;
		}
		p->l->entries = ne;
		p->cap = ncap;
	}
	struct px_listing_entry *e = &p->l->entries[p->l->n];
	e->name = *name;
	e->url = url;
	e->is_dir = is_dir;
	e->size = e->mtime = -1;
	e->bad_date = NULL;
	if (px_strmap_put(p->names, e->name, p->l->n, NULL) != PX_OK) {
		free(url);      /* e is not counted: the caller frees nothing twice */
		return PX_ENOMEM;
	}
	*name = NULL;
	p->pending = (long)p->l->n++;
	p->attr_size = p->word_size = p->attr_time = -1;
	p->bad_attr[0] = '\0';
	p->rowlen = 0;
	return PX_OK;
}

/* An <a href>: a new entry when it names a child of the page's directory. */
static enum px_status link(struct parse *p, const char *href, size_t hlen)
{
	char *path = resolve(p, href, hlen), *dec = NULL, *name = NULL;
	enum px_status st = PX_OK;
	finish(p);
	if (!path)
		return p->oom ? PX_ENOMEM : PX_OK;
	/* the part of path that covers the page's directory, then the rest */
	size_t slashes = 0, i = 0;
	for (; path[i] && slashes < p->b.dirslashes; i++)
		slashes += path[i] == '/';
	if (slashes < p->b.dirslashes)
		goto out;               /* above the directory */
	if (!(dec = malloc(i + 1))) {
		st = PX_ENOMEM;
		goto out;
	}
	pct_decode(path, i, dec);
	if (strcmp(dec, p->b.ddir) != 0)
		goto out;               /* elsewhere on the server */
	const char *rest = path + i;
	size_t seg = strcspn(rest, "/");
	int is_dir = rest[seg] == '/';
	if (seg == 0 || (is_dir && rest[seg + 1] != '\0'))
		goto out;               /* the directory itself, or deeper */
	if (!(name = malloc(seg + 1))) {
		st = PX_ENOMEM;
		goto out;
	}
	size_t nlen = pct_decode(rest, seg, name);
	if (nlen != strlen(name) || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		goto out;               /* %00, %2F, %2E%2E: no file has that name */
	size_t old;
	if (px_strmap_get(p->names, name, &old)) {
		/* the same entry again (an icon's link, then the name's): its
		 * row goes on */
		if (p->l->entries[old].is_dir == is_dir) {
			p->pending = (long)old;
			p->attr_size = p->word_size = p->attr_time = -1;
			p->bad_attr[0] = '\0';
			p->rowlen = 0;
		}
		goto out;
	}
	st = add_entry(p, path, &name, is_dir);
out:
	free(path);
	free(dec);
	free(name);
	return st;
}

/* A word of the text after a link: a byte count ("12345"), a size that is
 * not exact ("1.2M", "12.0K", "1.5", "100B") or neither (a date, "-"). */
static void word(struct parse *p, const char *w, size_t n)
{
	size_t d = 0;
	while (d < n && isdigit((unsigned char)w[d]))
		d++;
	if (d == 0)
		return;
	if (d == n) {
		if (d > MAX_SIZE_DIGITS) {
			p->word_size = -2;
			return;
		}
		int64_t v = 0;
		for (size_t i = 0; i < d; i++)
			v = v * 10 + (w[i] - '0');
		p->word_size = v;
		return;
	}
	size_t i = d;
	if (w[i] == '.' || w[i] == ',') {
		i++;
		while (i < n && isdigit((unsigned char)w[i]))
			i++;
	}
	if (i == n || strchr("KMGTPEkmgtpe", w[i]) || w[i] == 'B')
		p->word_size = -2;      /* 1.2, 1.2M, 12K, 3.4GiB, 100B */
}

/* Text between tags: only that of an entry's row after its </a> counts. */
static void text(struct parse *p, const char *s, size_t n)
{
	if (p->pending < 0 || !p->closed)
		return;
	size_t i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n' && !p->rows) {
			finish(p);
			return;
		}
		if (isspace(c)) {
			i++;
			continue;
		}
		if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] == 0xa0) {
			i += 2;         /* a no-break space */
			continue;
		}
		if (c == '&') {         /* &nbsp; and the like separate words */
			while (i < n && s[i] != ';' && !isspace((unsigned char)s[i]))
				i++;
			i += i < n && s[i] == ';';
			continue;
		}
		size_t w = i;
		while (i < n && !isspace((unsigned char)s[i]) && s[i] != '&' &&
		       !((unsigned char)s[i] == 0xc2 && i + 1 < n &&
			 (unsigned char)s[i + 1] == 0xa0))
			i++;
		word(p, s + w, i - w);
		if (p->rowlen + (i - w) + 1 < sizeof(p->row)) {
			if (p->rowlen)
				p->row[p->rowlen++] = ' ';
			memcpy(p->row + p->rowlen, s + w, i - w);
			p->rowlen += i - w;
		}
	}
}

/* Decodes the entities of an attribute value into out (room for n + 1):
 * &amp; &lt; &gt; &quot; &apos; &nbsp; and numeric ones (as UTF-8); an
 * unknown one stays as it is. Returns the length. */
static size_t entities(const char *s, size_t n, char *out)
{
	static const struct { const char *name; const char *text; } named[] = {
		{ "amp", "&" }, { "lt", "<" }, { "gt", ">" }, { "quot", "\"" },
		{ "apos", "'" }, { "nbsp", "\xc2\xa0" },
	};
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '&') {
			out[o++] = s[i];
			continue;
		}
		size_t semi = i + 1;
		while (semi < n && semi - i <= 10 && s[semi] != ';')
			semi++;
		if (semi >= n || s[semi] != ';') {
			out[o++] = s[i];
			continue;
		}
		const char *e = s + i + 1;
		size_t elen = semi - i - 1;
		int done = 0;
		if (elen >= 2 && e[0] == '#') {
			unsigned long cp = 0;
			int hex = e[1] == 'x' || e[1] == 'X', ok = 1;
			size_t k = hex ? 2 : 1;
			if (k >= elen)
				ok = 0;
			for (; ok && k < elen; k++) {
				int v = hex ? px_hex_digit((unsigned char)e[k])
					    : isdigit((unsigned char)e[k]) ? e[k] - '0' : -1;
				if (v < 0 || cp > 0x10ffff)
					ok = 0;
				else
					cp = cp * (hex ? 16 : 10) + (unsigned long)v;
			}
			if (ok) {
				if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
					cp = 0xfffd;
				/* UTF-8 of cp takes at most 4 bytes; &#N; takes 4 or more */
				if (cp < 0x80) {
					out[o++] = (char)cp;
				} else if (cp < 0x800) {
					out[o++] = (char)(0xc0 | (cp >> 6));
					out[o++] = (char)(0x80 | (cp & 0x3f));
				} else if (cp < 0x10000) {
					out[o++] = (char)(0xe0 | (cp >> 12));
					out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
					out[o++] = (char)(0x80 | (cp & 0x3f));
				} else {
					out[o++] = (char)(0xf0 | (cp >> 18));
					out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
					out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
					out[o++] = (char)(0x80 | (cp & 0x3f));
				}
				done = 1;
			}
		} else {
			for (size_t k = 0; k < sizeof(named) / sizeof(named[0]); k++) {
				if (strlen(named[k].name) == elen &&
				    strncmp(named[k].name, e, elen) == 0) {
					size_t tl = strlen(named[k].text);
					memcpy(out + o, named[k].text, tl);
					o += tl;
					done = 1;
					break;
				}
			}
		}
		if (done)
			i = semi;
		else
			out[o++] = s[i];
	}
	out[o] = '\0';
	return o;
}

/* A whole non-negative number of at most MAX_SIZE_DIGITS digits, else -1. */
static int64_t number(const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (n == 0 || n > MAX_SIZE_DIGITS)
		return -1;
	int64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int name_is(const char *s, size_t n, const char *want)
{
	return strlen(want) == n && strncasecmp(s, want, n) == 0;
}

/* Finds needle (lowercase ASCII) in [h, h + n) ignoring case; NULL if not. */
static const char *ci_find(const char *h, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	if (m == 0 || m > n)
		return NULL;
	for (size_t i = 0; i + m <= n; i++) {
		if (tolower((unsigned char)h[i]) != needle[0])
			continue;
		size_t k = 1;
		while (k < m && tolower((unsigned char)h[i + k]) == needle[k])
			k++;
		if (k == m)
			return h + i;
	}
	return NULL;
}

static int has(const char *h, size_t n, const char *needle)
{
	return memmem(h, n, needle, strlen(needle)) != NULL;
}

static int kind_of(const char *h, size_t n, enum px_listing_kind *kind)
{
	if (has(h, n, "data-size=\"") || ci_find(h, n, "caddyserver.com"))
		*kind = PX_LISTING_CADDY;
	else if (has(h, n, "<size>") || has(h, n, "data-order=\""))
		*kind = PX_LISTING_RCLONE;
	else if (has(h, n, "<div class=\"foot\">lighttpd") ||
		 has(h, n, "summary=\"Directory Listing\"") || has(h, n, "<td class=\"n\">"))
		*kind = PX_LISTING_LIGHTTPD;
	else if (has(h, n, "<address>Apache") || has(h, n, "?C=N;O="))
		*kind = PX_LISTING_APACHE;
	else if (has(h, n, "<hr><pre>") && ci_find(h, n, "index of "))
		*kind = PX_LISTING_NGINX;
	else if (ci_find(h, n, "index of ") || ci_find(h, n, "directory listing"))
		*kind = PX_LISTING_GENERIC;
	else
		return -1;
	return 0;
}

struct attr {
	const char *name, *value;
	size_t nlen, vlen;
};

#define MAX_ATTRS 16

/*
 * The tag starting at h[i] == '<' (a start tag: its name and up to
 * MAX_ATTRS attributes). Returns the index just past it; *tag_n 0 when it
 * is not a start tag (an end tag sets *end).
 */
struct tag {
	const char *name;
	size_t n;               /* 0: not a start tag */
	int end;                /* an end tag */
	struct attr attrs[MAX_ATTRS];
	size_t nattrs;
};

static size_t tag(const char *h, size_t n, size_t i, struct tag *t)
{
	size_t j = i + 1;
	t->n = 0;
	t->end = 0;
	t->nattrs = 0;
	if (j < n && h[j] == '/') {
		t->end = 1;
		j++;
	}
	size_t t0 = j;
	while (j < n && (isalnum((unsigned char)h[j]) || h[j] == '-' || h[j] == ':'))
		j++;
	t->name = h + t0;
	t->n = j - t0;
	for (;;) {
		while (j < n && (isspace((unsigned char)h[j]) || h[j] == '/'))
			j++;
		if (j >= n)
			return n;
		if (h[j] == '>')
			return j + 1;
		size_t a0 = j;
		while (j < n && !isspace((unsigned char)h[j]) && !strchr("=>/", h[j]))
			j++;
		if (j == a0)
			j++;                /* a lone '=': step over it */
		size_t a1 = j, v0 = j, v1 = j;
		while (j < n && isspace((unsigned char)h[j]))
			j++;
		if (j < n && h[j] == '=') {
			j++;
			while (j < n && isspace((unsigned char)h[j]))
				j++;
			if (j < n && (h[j] == '"' || h[j] == '\'')) {
				const char *q = memchr(h + j + 1, h[j], n - j - 1);
				v0 = j + 1;
				v1 = q ? (size_t)(q - h) : n;
				j = q ? v1 + 1 : n;
			} else {
				v0 = j;
				while (j < n && !isspace((unsigned char)h[j]) && h[j] != '>')
					j++;
				v1 = j;
			}
		}
		if (t->nattrs < MAX_ATTRS && a1 > a0) {
			t->attrs[t->nattrs].name = h + a0;
			t->attrs[t->nattrs].nlen = a1 - a0;
			t->attrs[t->nattrs].value = h + v0;
			t->attrs[t->nattrs].vlen = v1 - v0;
			t->nattrs++;
		}
	}
}

static enum px_status start_tag(struct parse *p, const char *name, size_t nlen,
				const struct attr *attrs, size_t nattrs)
{
	if (name_is(name, nlen, "tr")) {
		finish(p);
		return PX_OK;
	}
	if (name_is(name, nlen, "a")) {
		for (size_t k = 0; k < nattrs; k++) {
			if (!name_is(attrs[k].name, attrs[k].nlen, "href"))
				continue;
			char *v = malloc(attrs[k].vlen + 1);
			if (!v)
				return PX_ENOMEM;
			size_t vl = entities(attrs[k].value, attrs[k].vlen, v);
			enum px_status st = link(p, v, vl);
			free(v);
			return st;
		}
		finish(p);              /* an <a> without href ends a row too */
		return PX_OK;
	}
	if (p->pending >= 0 && p->closed && p->attr_time < 0 && name_is(name, nlen, "time")) {
		for (size_t k = 0; k < nattrs; k++) {
			if (!name_is(attrs[k].name, attrs[k].nlen, "datetime"))
				continue;
			char *v = malloc(attrs[k].vlen + 1);
			if (!v)
				return PX_ENOMEM;
			size_t vl = entities(attrs[k].value, attrs[k].vlen, v);
			p->attr_time = datetime_attr(v, vl);
			if (p->attr_time < 0)
				snprintf(p->bad_attr, sizeof(p->bad_attr), "%.*s", (int)vl, v);
			free(v);
			break;
		}
	}
	if (p->pending >= 0 && p->closed && p->attr_size < 0) {
		for (size_t k = 0; k < nattrs; k++) {
			if (name_is(attrs[k].name, attrs[k].nlen,
				    p->l->kind == PX_LISTING_CADDY ? "data-size" : "data-order")) {
				p->attr_size = number(attrs[k].value, attrs[k].vlen);
				break;
			}
		}
	}
	return PX_OK;
}

/* Skips raw text up to the end tag </name (ignoring case); the index of its
 * '<', or n. */
static size_t skip_raw(const char *h, size_t n, size_t i, const char *name)
{
	size_t m = strlen(name);
	for (; i + 2 + m <= n; i++) {
		if (h[i] == '<' && h[i + 1] == '/' && strncasecmp(h + i + 2, name, m) == 0)
			return i;
	}
	return n;
}

/* The page's text and tags, in order, into p. PX_OK, PX_ENOMEM, or
 * PX_EINVAL over PX_LISTING_MAX_ENTRIES. */
static enum px_status scan(struct parse *p, const char *html, size_t len)
{
	enum px_status st;
	size_t i = 0;
	while (i < len) {
		const char *lt = memchr(html + i, '<', len - i);
		size_t next = lt ? (size_t)(lt - html) : len;
		text(p, html + i, next - i);
		i = next;
		if (i >= len)
			break;
		if (len - i >= 4 && memcmp(html + i, "<!--", 4) == 0) {
			const char *e = memmem(html + i + 4, len - i - 4, "-->", 3);
			i = e ? (size_t)(e - html) + 3 : len;
			continue;
		}
		if (i + 1 < len && (html[i + 1] == '!' || html[i + 1] == '?')) {
			const char *e = memchr(html + i, '>', len - i);
			i = e ? (size_t)(e - html) + 1 : len;
			continue;
		}
		if (i + 1 >= len || !(isalpha((unsigned char)html[i + 1]) || html[i + 1] == '/')) {
			text(p, html + i, 1);  /* a lone '<' is text */
			i++;
			continue;
		}
		struct tag t;
		i = tag(html, len, i, &t);
		if (t.end) {
			if (name_is(t.name, t.n, "a") && p->pending >= 0)
				p->closed = 1;
			else if (name_is(t.name, t.n, "tr") || name_is(t.name, t.n, "pre") ||
				 name_is(t.name, t.n, "table"))
				finish(p);
			continue;
		}
		if (name_is(t.name, t.n, "script") || name_is(t.name, t.n, "style")) {
			i = skip_raw(html, len, i, name_is(t.name, t.n, "script") ? "script" : "style");
			continue;
		}
		if ((st = start_tag(p, t.name, t.n, t.attrs, t.nattrs)) != PX_OK)
			return st;
	}
	return PX_OK;
}

enum px_status px_listing_parse(const char *base, const char *html, size_t len,
				struct px_listing **out, char *err, size_t errlen)
{
	struct parse p = { .pending = -1, .attr_size = -1, .word_size = -1, .attr_time = -1 };
	enum px_status st = PX_OK;

	*out = NULL;
	int b = parse_base(&p.b, base);
	if (b == -1) {
		snprintf(err, errlen, "not an http:// or https:// URL");
		st = PX_EINVAL;
		goto out;
	}
	if (b < 0)
		goto oom;
	if (memchr(html, '\0', len)) {
		snprintf(err, errlen, "not a directory listing: binary data, not an HTML page");
		st = PX_EINVAL;
		goto out;
	}
	enum px_listing_kind kind;
	if (!memchr(html, '<', len) || kind_of(html, len, &kind)) {
		snprintf(err, errlen, "not a directory listing: %s",
			 memchr(html, '<', len)
				 ? "an HTML page without an \"Index of\" title or the markup of "
				   "nginx, Apache, lighttpd, caddy or rclone"
				 : "not an HTML page");
		st = PX_EINVAL;
		goto out;
	}
	if (!(p.l = calloc(1, sizeof(*p.l))) || !(p.names = px_strmap_new(64)))
		goto oom;
	p.l->kind = kind;
	p.rows = kind == PX_LISTING_LIGHTTPD || kind == PX_LISTING_CADDY ||
		 kind == PX_LISTING_RCLONE ||
		 (kind == PX_LISTING_APACHE && ci_find(html, len, "<table"));

	if ((st = scan(&p, html, len)) != PX_OK) {
		if (st == PX_ENOMEM)
			goto oom;
		snprintf(err, errlen, "the listing has more than %d entries",
			 PX_LISTING_MAX_ENTRIES);
		goto out;
	}
	finish(&p);
	if (p.oom)
		goto oom;
	*out = p.l;
	p.l = NULL;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
	st = PX_ENOMEM;
out:
	px_listing_free(p.l);
	px_strmap_free(p.names);
	free(p.b.dir);
	free(p.b.ddir);
	return st;
}
