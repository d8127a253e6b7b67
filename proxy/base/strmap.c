/*
 * strmap.c - open addressing with linear probing, grown at 50% load.
 * Only insertions and lookups: the catalog and tree never delete.
 */
#include <stdlib.h>
#include <string.h>

#include "strmap.h"

struct slot {
	const char *key;
	uint64_t hash;
	size_t value;
};

struct px_strmap {
	struct slot *slots;
	size_t cap, count;
};

/* FNV-1a, 64 bit: stable across runs and hosts, which inode numbers need. */
uint64_t px_hash64(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = 14695981039346656037ULL ^ seed;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

struct px_strmap *px_strmap_new(size_t expected)
{
	struct px_strmap *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->cap = 16;
	while (m->cap < expected * 2 + 2)
		m->cap *= 2;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots) {
		free(m);
		return NULL;
	}
	return m;
}

void px_strmap_free(struct px_strmap *m)
{
	if (!m)
		return;
	free(m->slots);
	free(m);
}

static struct slot *find(struct slot *slots, size_t cap, const char *key, uint64_t h)
{
	size_t i = (size_t)h & (cap - 1);
	while (slots[i].key && (slots[i].hash != h || strcmp(slots[i].key, key) != 0))
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow(struct px_strmap *m)
{
	size_t ncap = m->cap * 2;
	struct slot *ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -1;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			*find(ns, ncap, m->slots[i].key, m->slots[i].hash) = m->slots[i];
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	return 0;
}

enum px_status px_strmap_put(struct px_strmap *m, const char *key, size_t value,
			     size_t *old)
{
	if ((m->count + 1) * 2 > m->cap && grow(m))
		return PX_ENOMEM;
	uint64_t h = px_hash64(key, strlen(key), 0);
	struct slot *s = find(m->slots, m->cap, key, h);
	if (s->key) {
		if (old)
			*old = s->value;
		return PX_EINVAL;
	}
	s->key = key;
	s->hash = h;
	s->value = value;
	m->count++;
	return PX_OK;
}

int px_strmap_get(const struct px_strmap *m, const char *key, size_t *value)
{
	uint64_t h = px_hash64(key, strlen(key), 0);
	const struct slot *s = find(m->slots, m->cap, key, h);
	if (!s->key)
		return 0;
	if (value)
		*value = s->value;
	return 1;
}
