/*
 * redact.c - URLs without their secrets (redact.h).
 *
 * A URL is cut the way RFC 3986 and libcurl cut it: "scheme://", then the
 * authority up to the first '/', '?' or '#' (userinfo being everything up
 * to its last '@'), the path up to '?' or '#', the query up to '#', the
 * fragment. The output is written through a sink that counts every byte
 * and stores only what fits, so a short buffer cuts the result and never
 * lets a byte of the input through unredacted.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hash.h"
#include "redact.h"

struct sink {
	char *out;
	size_t cap, n;
};

static void put(struct sink *s, const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++, s->n++)
		if (s->n + 1 < s->cap)
			s->out[s->n] = p[i];
}

static void puts_(struct sink *s, const char *p)
{
	put(s, p, strlen(p));
}

/* Length of the scheme when url starts with "scheme://", else 0. */
static size_t scheme_len(const char *url)
{
	size_t n = 0;
	if (!isalpha((unsigned char)url[0]))
		return 0;
	while (isalnum((unsigned char)url[n]) || url[n] == '+' || url[n] == '-' || url[n] == '.')
		n++;
	return strncmp(url + n, "://", 3) == 0 ? n : 0;
}

/* The authority of a URL whose scheme has length n: *auth, its length, and
 * the length of the userinfo and its '@' at its start (0: none). */
static size_t authority(const char *url, size_t n, const char **auth, size_t *ulen)
{
	const char *a = url + n + 3;
	size_t alen = strcspn(a, "/?#");
	*auth = a;
	*ulen = 0;
	for (size_t i = alen; i > 0; i--) {
		if (a[i - 1] == '@') {
			*ulen = i;
			break;
		}
	}
	return alen;
}

size_t px_redact_url(const char *url, char *out, size_t cap)
{
	struct sink s = { out, cap, 0 };
	size_t n = scheme_len(url), ulen, alen;
	const char *a, *p;

	if (!n) {
		puts_(&s, url);
		goto out;
	}
	put(&s, url, n + 3);
	alen = authority(url, n, &a, &ulen);
	if (ulen)
		puts_(&s, PX_REDACT_MASK "@");
	put(&s, a + ulen, alen - ulen);
	p = a + alen;
	size_t plen = strcspn(p, "?#");
	put(&s, p, plen);
	p += plen;
	if (*p == '?') {
		const char *end = p + 1 + strcspn(p + 1, "#");
		put(&s, "?", 1);
		for (const char *item = p + 1; item < end;) {
			const char *amp = memchr(item, '&', (size_t)(end - item));
			const char *stop = amp ? amp : end;
			const char *eq = memchr(item, '=', (size_t)(stop - item));
			if (eq) {
				put(&s, item, (size_t)(eq - item));
				puts_(&s, "=" PX_REDACT_MASK);
			} else if (stop > item) {
				puts_(&s, PX_REDACT_MASK);
			}
			if (!amp)
				break;
			put(&s, "&", 1);
			item = amp + 1;
		}
	}
	/* the fragment never reaches a server and may hold anything: dropped */
out:
	if (cap)
		out[s.n < cap ? s.n : cap - 1] = '\0';
	return s.n;
}

char *px_redact_url_dup(const char *url)
{
	size_t n = px_redact_url(url, NULL, 0);
	char *out = malloc(n + 1);
	if (out)
		px_redact_url(url, out, n + 1);
	return out;
}

char *px_redact_key(const char *url)
{
	size_t n = scheme_len(url), ulen;
	const char *a;
	unsigned char d[VF_HASH_LEN];
	char hex[VF_HASH_HEX];

	if (!n)
		return strdup(url);
	authority(url, n, &a, &ulen);
	if (!ulen && !strpbrk(a, "?#"))
		return strdup(url);
	if (vf_hash_once(url, strlen(url), d) != PX_OK)
		return NULL;
	vf_hash_hex(d, 4, hex);
	size_t r = px_redact_url(url, NULL, 0);
	char *out = malloc(r + sizeof("#h=") + 8);
	if (!out)
		return NULL;
	px_redact_url(url, out, r + 1);
	snprintf(out + r, sizeof("#h=") + 8, "#h=%s", hex);
	return out;
}

int px_redact_origin(const char *url, char *out, size_t cap)
{
	size_t n = scheme_len(url), ulen, alen;
	const char *a;
	int port;

	if (n == 4 && strncasecmp(url, "http", 4) == 0)
		port = 80;
	else if (n == 5 && strncasecmp(url, "https", 5) == 0)
		port = 443;
	else
		return -1;
	alen = authority(url, n, &a, &ulen);
	a += ulen;
	alen -= ulen;
	const char *end = a + alen, *colon;
	if (alen && a[0] == '[') {
		const char *rb = memchr(a, ']', alen);
		if (!rb)
			return -1;
		colon = rb + 1 < end ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return -1;
	} else {
		colon = memchr(a, ':', alen);
	}
	size_t hlen = colon ? (size_t)(colon - a) : alen;
	if (hlen == 0)
		return -1;
	if (colon && colon + 1 < end) {
		port = 0;
		for (const char *q = colon + 1; q < end; q++) {
			if (!isdigit((unsigned char)*q) || (port = port * 10 + (*q - '0')) > 65535)
				return -1;
		}
		if (port == 0)
			return -1;
	}
	int w = snprintf(out, cap, "%s://%.*s:%d", n == 4 ? "http" : "https", (int)hlen, a, port);
	if (w < 0 || (size_t)w >= cap)
		return -1;
	for (char *q = out + n + 3; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	return 0;
}

/* Whether a trusted host entry ("host" or "host:port") names the host of
 * origin ("scheme://host:port"). */
static int trusted(const char *entry, const char *origin)
{
	const char *hp = strstr(origin, "://") + 3;
	const char *pc = strrchr(hp, ':');
	const char *rb = strrchr(entry, ']');
	const char *ec = strrchr(rb ? rb : entry, ':');
	if (ec)
		return strcasecmp(entry, hp) == 0;
	return strlen(entry) == (size_t)(pc - hp) && strncasecmp(entry, hp, (size_t)(pc - hp)) == 0;
}

int px_redact_headers_ok(const char *first, const char *from, const char *to,
			 const char *const *hosts, size_t nhosts, int *downgraded)
{
	char ot[600], of[600];

	if (px_redact_origin(to, ot, sizeof(ot)))
		return 0;
	if (strncasecmp(from, "https://", 8) == 0 && strncmp(ot, "http://", 7) == 0)
		*downgraded = 1;
	if (*downgraded)
		return 0;
	if (px_redact_origin(first, of, sizeof(of)) == 0 && strcmp(of, ot) == 0)
		return 1;
	for (size_t i = 0; i < nhosts; i++) {
		if (strstr(hosts[i], "://") ? strcmp(hosts[i], ot) == 0 : trusted(hosts[i], ot))
			return 1;
	}
	return 0;
}

const char *px_redact_bad_host(const char *entry, char *out, size_t cap)
{
	size_t len = strlen(entry), hlen;
	const char *port;

	if (len == 0)
		return "is empty";
	if (strstr(entry, "://"))
		return "has a scheme: give the host alone (\"cdn.example.com\") or with its port "
		       "(\"cdn.example.com:8443\")";
	if (len + 1 > cap || len > 270)
		return "is too long";
	if (entry[0] == '[') {
		const char *rb = strchr(entry, ']');
		if (!rb || rb == entry + 1)
			return "has an unterminated or empty IPv6 address";
		for (const char *q = entry + 1; q < rb; q++)
			if (!isxdigit((unsigned char)*q) && *q != ':' && *q != '.')
				return "has a malformed IPv6 address";
		if (rb[1] && rb[1] != ':')
			return "has something after the IPv6 address that is not a port";
		hlen = (size_t)(rb + 1 - entry);
	} else {
		hlen = strcspn(entry, ":");
		if (hlen == 0)
			return "has no host";
		for (size_t i = 0; i < hlen; i++) {
			unsigned char ch = (unsigned char)entry[i];
			if (!isalnum(ch) && ch != '.' && ch != '-' && ch != '_')
				return "is not a host name or address (no userinfo, path, query or "
				       "space)";
		}
	}
	port = entry[hlen] == ':' ? entry + hlen + 1 : NULL;
	if (port) {
		long v = 0;
		if (!*port)
			return "has an empty port";
		for (const char *q = port; *q; q++) {
			if (!isdigit((unsigned char)*q) || (v = v * 10 + (*q - '0')) > 65535)
				return "has a port that is not a number from 1 to 65535";
		}
		if (v == 0)
			return "has a port that is not a number from 1 to 65535";
	}
	for (size_t i = 0; i <= len; i++)
		out[i] = (char)tolower((unsigned char)entry[i]);
	return NULL;
}
