/*
 * utf8.c - see utf8.h.
 */
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

size_t px_utf8_seq(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	unsigned int lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong form */
		hi = c == 0xed ? 0x9f : 0xbf; /* no surrogate */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		lo = c == 0xf0 ? 0x90 : 0x80;
		hi = c == 0xf4 ? 0x8f : 0xbf; /* nothing above U+10FFFF */
	} else {
		return 0;
	}
	/* a NUL fails these tests, so nothing past the string is read */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

int px_utf8_valid(const char *s)
{
	for (size_t n; *s; s += n)
		if (!(n = px_utf8_seq(s)))
			return 0;
	return 1;
}

void px_utf8_scrub(char *s)
{
	for (size_t n; *s; s += n) {
		if (!(n = px_utf8_seq(s))) {
			*s = '?';
			n = 1;
		}
	}
}

char *px_utf8_latin1(const char *s, size_t n, int *changed)
{
	/* a copy first: px_utf8_seq reads up to a NUL */
	char *in = malloc(n + 1), *out = malloc(2 * n + 1);
	size_t o = 0;

	*changed = 0;
	if (!in || !out) {
		free(in);
		free(out);
		return NULL;
	}
	memcpy(in, s, n);
	in[n] = '\0';
	for (size_t i = 0, k; i < n; i += k) {
		k = px_utf8_seq(in + i);
		if (k) {
			memcpy(out + o, in + i, k);
			o += k;
			continue;
		}
		unsigned char c = (unsigned char)in[i];
		out[o++] = (char)(0xc0 | (c >> 6));
		out[o++] = (char)(0x80 | (c & 0x3f));
		*changed = 1;
		k = 1;
	}
	out[o] = '\0';
	free(in);
	return out;
}

int px_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
