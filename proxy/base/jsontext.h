/*
 * jsontext.h - a JSON value as the text of a file or an HTTP reply.
 */
#ifndef SEAMFS_JSONTEXT_H
#define SEAMFS_JSONTEXT_H

#include <jansson.h>
#include <stddef.h>

/* o (taken: decref'd, NULL allowed) dumped with jansson's flags and a
 * trailing newline, as text files have. malloc'd; NULL when o is NULL or
 * out of memory. */
char *px_json_text(json_t *o, size_t flags);

/* A JSON string of s, which need not be UTF-8 (a URL, a file name, a
 * message quoting either): bytes that are not become '?', where
 * json_string would fail. s NULL: "". NULL only when out of memory. */
json_t *px_json_str(const char *s);

#endif
