/*
 * handles.c - the id -> handle table of open files (handles.h).
 *
 * Chained buckets under one mutex: a lookup per read is a few dozen
 * nanoseconds against a read's microseconds, and an open file is in the
 * table from its open to its release.
 */
#include <pthread.h>
#include <stdlib.h>

#include "handles.h"

#define NBUCKETS 1024

struct entry {
	uint64_t id;
	void *p;
	struct entry *next;
};

struct fs_handles {
	pthread_mutex_t lock;
	uint64_t gen, next;
	struct entry *b[NBUCKETS];
};

static size_t bucket(uint64_t id)
{
	return (size_t)((id >> 2) ^ (id >> 40)) % NBUCKETS;
}

struct fs_handles *fs_handles_new(unsigned gen)
{
	struct fs_handles *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	/* 0 is never an id; generations keep workers' ids apart */
	t->gen = (uint64_t)gen + 1;
	t->next = 1;
	return t;
}

void fs_handles_free(struct fs_handles *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < NBUCKETS; i++)
		while (t->b[i]) {
			struct entry *e = t->b[i];
			t->b[i] = e->next;
			free(e);
		}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

enum fs_fh_kind fs_handles_kind(uint64_t id)
{
	return (enum fs_fh_kind)(id & 3);
}

/* Under lock: the entry of id, NULL if none. */
static struct entry *find(struct fs_handles *t, uint64_t id)
{
	struct entry *e = t->b[bucket(id)];
	while (e && e->id != id)
		e = e->next;
	return e;
}

static void insert(struct fs_handles *t, struct entry *e)
{
	size_t i = bucket(e->id);
	e->next = t->b[i];
	t->b[i] = e;
}

uint64_t fs_handles_put(struct fs_handles *t, enum fs_fh_kind kind, void *p)
{
	struct entry *e = malloc(sizeof(*e));
	if (!e)
		return 0;
	e->p = p;
	pthread_mutex_lock(&t->lock);
	e->id = t->gen << 40 | (t->next++ & ((1ULL << 38) - 1)) << 2 | (uint64_t)kind;
	insert(t, e);
	uint64_t id = e->id;
	pthread_mutex_unlock(&t->lock);
	return id;
}

void *fs_handles_get(struct fs_handles *t, uint64_t id)
{
	pthread_mutex_lock(&t->lock);
	struct entry *e = find(t, id);
	void *p = e ? e->p : NULL;
	pthread_mutex_unlock(&t->lock);
	return p;
}

void *fs_handles_adopt(struct fs_handles *t, uint64_t id, void *p)
{
	struct entry *e = malloc(sizeof(*e));
	pthread_mutex_lock(&t->lock);
	struct entry *had = find(t, id);
	if (had) {
		p = had->p;
	} else if (e) {
		e->id = id;
		e->p = p;
		insert(t, e);
		e = NULL;
	} else {
		p = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	free(e);
	return p;
}

void *fs_handles_take(struct fs_handles *t, uint64_t id)
{
	void *p = NULL;
	pthread_mutex_lock(&t->lock);
	for (struct entry **pe = &t->b[bucket(id)]; *pe; pe = &(*pe)->next) {
		if ((*pe)->id == id) {
			struct entry *e = *pe;
			*pe = e->next;
			p = e->p;
			free(e);
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return p;
}
