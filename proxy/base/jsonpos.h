/*
 * jsonpos.h - where in a JSON text a value stands (line and column).
 *
 * jansson tells where a syntax error is but not where a well-formed value
 * is. Catalog validation needs that for its messages ("catalog.json:12:7:
 * assets[2].size: ..."), so this scanner walks the text once, on the error
 * path only, and finds the value at a path such as "assets[2].sources[0].url".
 * For an object member the position is that of its key.
 */
#ifndef SEAMFS_JSONPOS_H
#define SEAMFS_JSONPOS_H

#include <stddef.h>

/*
 * Finds path in text. path is "" for the top-level value, otherwise object
 * keys and array indexes as in "a[3].b". Returns 0 and sets *line and *col
 * (1-based; columns count characters) when found, -1 when not. Any thread;
 * never reads beyond text[len]; malformed text just ends the search.
 */
int px_jsonpos_find(const char *text, size_t len, const char *path,
		    int *line, int *col);

#endif
