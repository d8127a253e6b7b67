/*
 * httpparse.c - see httpparse.h. Pure functions, fuzzed by
 * tests/fuzz/fuzz_httpparse.c.
 */
#include <ctype.h>
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
