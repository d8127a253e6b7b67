/*
 * jsontext.c - a JSON value as the text of a file or an HTTP reply.
 */
#include <stdlib.h>
#include <string.h>

#include "jsontext.h"
#include "utf8.h"

char *px_json_text(json_t *o, size_t flags)
{
	char *s = o ? json_dumps(o, flags) : NULL;
	json_decref(o);
	if (s) {
		size_t n = strlen(s);
		char *nl = realloc(s, n + 2);
		if (nl) {
			nl[n] = '\n';
			nl[n + 1] = '\0';
			s = nl;
		}
	}
	return s;
}

json_t *px_json_str(const char *s)
{
	if (!s)
		s = "";
	if (px_utf8_valid(s))
		return json_string(s);
	char *c = strdup(s);
	if (!c)
		return NULL;
	px_utf8_scrub(c);
	json_t *o = json_string(c);
	free(c);
	return o;
}
