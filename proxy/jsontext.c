/*
 * jsontext.c - a JSON value as the text of a file or an HTTP reply.
 */
#include <stdlib.h>
#include <string.h>

#include "jsontext.h"

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
