/*
 * strmap.h - a string → size_t map (open addressing), for the catalog's
 * uniqueness checks and the path tree. Keys are borrowed: the caller keeps
 * them alive and unchanged as long as the map is used.
 */
#ifndef SEAMFS_STRMAP_H
#define SEAMFS_STRMAP_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

struct px_strmap;

uint64_t px_hash64(const void *data, size_t len, uint64_t seed);

struct px_strmap *px_strmap_new(size_t expected);
void px_strmap_free(struct px_strmap *m);

/* Inserts key → value. If key is present, leaves it and stores its value in
 * *old (when not NULL) and returns PX_EINVAL. PX_ENOMEM when growing fails. */
enum px_status px_strmap_put(struct px_strmap *m, const char *key, size_t value,
			     size_t *old) PX_WUR;

/* Returns 1 and sets *value when key is present, else 0. */
int px_strmap_get(const struct px_strmap *m, const char *key, size_t *value);

#endif
