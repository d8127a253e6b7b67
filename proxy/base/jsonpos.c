/*
 * jsonpos.c - a single-pass scanner from a JSON path to a text position.
 *
 * It does not build a tree: it descends only into the member or element the
 * path names and skips everything else, so a lookup costs one partial walk
 * of the text. It is used on error paths only. Input that is not valid JSON
 * makes it give up, never read out of bounds or recurse without limit.
 */
#include <stdlib.h>
#include <string.h>

#include "jsonpos.h"

#define MAX_DEPTH 256

struct scan {
	const char *s;
	size_t len, i;
	int line, col;
};

static void advance(struct scan *sc)
{
	unsigned char c = (unsigned char)sc->s[sc->i++];
	if (c == '\n') {
		sc->line++;
		sc->col = 1;
	} else if ((c & 0xC0) != 0x80) {
		sc->col++;
	}
}

static int peek(const struct scan *sc)
{
	return sc->i < sc->len ? (unsigned char)sc->s[sc->i] : -1;
}

static void skip_ws(struct scan *sc)
{
	while (sc->i < sc->len && strchr(" \t\r\n", sc->s[sc->i]) && sc->s[sc->i])
		advance(sc);
}

/* Scans a string at sc->i (the opening quote); copies its raw contents, up
 * to cap-1 bytes, into out when out is not NULL. */
static int scan_string(struct scan *sc, char *out, size_t cap, size_t *outlen)
{
	size_t n = 0;
	if (peek(sc) != '"')
		return -1;
	advance(sc);
	while (sc->i < sc->len) {
		int c = peek(sc);
		if (c == '"') {
			advance(sc);
			if (outlen)
				*outlen = n;
			return 0;
		}
		if (c == '\\') {
			advance(sc);
			if (sc->i >= sc->len)
				return -1;
			c = peek(sc);
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': c = 0x01; break; /* keys with \u escapes never match a path */
			default: break;
			}
		}
		if (out && n + 1 < cap)
			out[n] = (char)c;
		n++;
		advance(sc);
	}
	return -1;
}

static int skip_value(struct scan *sc, int depth)
{
	int c;

	if (depth > MAX_DEPTH)
		return -1;
	skip_ws(sc);
	c = peek(sc);
	if (c == '"')
		return scan_string(sc, NULL, 0, NULL);
	if (c == '{' || c == '[') {
		int close = c == '{' ? '}' : ']';
		advance(sc);
		skip_ws(sc);
		if (peek(sc) == close) {
			advance(sc);
			return 0;
		}
		for (;;) {
			if (close == '}') {
				skip_ws(sc);
				if (scan_string(sc, NULL, 0, NULL))
					return -1;
				skip_ws(sc);
				if (peek(sc) != ':')
					return -1;
				advance(sc);
			}
			if (skip_value(sc, depth + 1))
				return -1;
			skip_ws(sc);
			c = peek(sc);
			if (c == ',') {
				advance(sc);
				continue;
			}
			if (c == close) {
				advance(sc);
				return 0;
			}
			return -1;
		}
	}
	if (c < 0)
		return -1;
	/* number or literal: up to the next delimiter */
	while (sc->i < sc->len && !strchr(",]} \t\r\n", sc->s[sc->i]) && sc->s[sc->i])
		advance(sc);
	return 0;
}

/* Next path step: a key (out, returns 1), an index (*idx, returns 2), the
 * end (returns 0), or malformed (-1). */
static int next_step(const char **p, char *out, size_t cap, long *idx)
{
	const char *q = *p;
	if (*q == '\0')
		return 0;
	if (*q == '[') {
		char *end;
		*idx = strtol(q + 1, &end, 10);
		if (end == q + 1 || *end != ']' || *idx < 0)
			return -1;
		*p = end + 1;
		return 2;
	}
	if (*q == '.')
		q++;
	size_t n = strcspn(q, ".[");
	if (n == 0 || n >= cap)
		return -1;
	memcpy(out, q, n);
	out[n] = '\0';
	*p = q + n;
	return 1;
}

int px_jsonpos_find(const char *text, size_t len, const char *path,
		    int *line, int *col)
{
	struct scan sc = { text, len, 0, 1, 1 };
	char want[512], key[512];
	long idx = 0;
	int kind;

	skip_ws(&sc);
	while ((kind = next_step(&path, want, sizeof(want), &idx)) > 0) {
		int found = 0;
		skip_ws(&sc);
		if (kind == 1) {
			if (peek(&sc) != '{')
				return -1;
			advance(&sc);
			for (;;) {
				size_t klen = 0;
				skip_ws(&sc);
				if (peek(&sc) == '}')
					return -1;
				struct scan at = sc;
				if (scan_string(&sc, key, sizeof(key), &klen))
					return -1;
				skip_ws(&sc);
				if (peek(&sc) != ':')
					return -1;
				advance(&sc);
				if (klen < sizeof(key) && klen == strlen(want) &&
				    memcmp(key, want, klen) == 0) {
					/* the member's position is its key's, unless we go deeper */
					skip_ws(&sc);
					if (*path == '\0') {
						*line = at.line;
						*col = at.col;
						return 0;
					}
					found = 1;
					break;
				}
				if (skip_value(&sc, 0))
					return -1;
				skip_ws(&sc);
				if (peek(&sc) != ',')
					return -1;
				advance(&sc);
			}
		} else {
			if (peek(&sc) != '[')
				return -1;
			advance(&sc);
			for (long k = 0;; k++) {
				skip_ws(&sc);
				if (peek(&sc) == ']')
					return -1;
				if (k == idx) {
					found = 1;
					break;
				}
				if (skip_value(&sc, 0))
					return -1;
				skip_ws(&sc);
				if (peek(&sc) != ',')
					return -1;
				advance(&sc);
			}
		}
		if (!found)
			return -1;
	}
	if (kind < 0)
		return -1;
	skip_ws(&sc);
	*line = sc.line;
	*col = sc.col;
	return 0;
}
