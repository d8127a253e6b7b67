/*
 * tree.c - directories and files of the mount, with stable inode numbers.
 *
 * Inode numbers are a 63-bit FNV-1a hash of "a:" + asset id for files and
 * "d:" + path for directories, so a remount (or another host with the same
 * catalog) gives every file the same number. A collision is resolved by
 * rehashing the losing name with a counter; assets are inserted in id order
 * so even a collision resolves the same way every time.
 */
#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "tree.h"

struct node {
	struct px_tree_node pub;
	char *name;
	const struct px_tree_node **kids;
	size_t nkids, capkids;
};

struct px_tree {
	struct node *nodes;
	size_t count, cap;
	size_t *slots;        /* ino hash → node index + 1 (0 = empty) */
	size_t nslots;
	struct px_strmap *dirs;   /* directory path → node index */
	char **dirpaths;          /* keys of dirs */
	size_t ndirpaths;
};

static uint64_t ino_hash(char tag, const char *s, unsigned salt)
{
	unsigned char prefix[2] = { (unsigned char)tag, ':' };
	uint64_t h = px_hash64(prefix, 2, salt);
	h = px_hash64(s, strlen(s), h);
	h &= 0x7fffffffffffffffULL;
	return h;
}

uint64_t px_tree_asset_ino(const char *id)
{
	return ino_hash('a', id, 0);
}

static size_t *slot_for(const struct px_tree *t, uint64_t ino)
{
	size_t i = (size_t)(ino * 0x9E3779B97F4A7C15ULL) & (t->nslots - 1);
	while (t->slots[i] && t->nodes[t->slots[i] - 1].pub.ino != ino)
		i = (i + 1) & (t->nslots - 1);
	return &t->slots[i];
}

/* Adds a node with a unique inode; returns its index or -1. */
static long add_node(struct px_tree *t, char tag, const char *key, const char *name,
		     uint64_t parent, long asset)
{
	if (t->count == t->cap)
		return -1; /* cap is sized up front; never grows */
	uint64_t ino = tag ? ino_hash(tag, key, 0) : PX_TREE_ROOT;
	for (unsigned salt = 1; tag && (ino <= PX_TREE_ROOT || *slot_for(t, ino)); salt++)
		ino = ino_hash(tag, key, salt);
	struct node *n = &t->nodes[t->count];
	memset(n, 0, sizeof(*n));
	n->name = strdup(name);
	if (!n->name)
		return -1;
	n->pub.ino = ino;
	n->pub.parent = parent;
	n->pub.name = n->name;
	n->pub.asset = asset;
	*slot_for(t, ino) = t->count + 1;
	return (long)t->count++;
}

static int add_kid(struct node *dir, const struct px_tree_node *kid)
{
	if (dir->nkids == dir->capkids) {
		size_t ncap = dir->capkids ? dir->capkids * 2 : 4;
		const struct px_tree_node **nk = realloc(dir->kids, ncap * sizeof(*nk));
		if (!nk)
			return -1;
		dir->kids = nk;
		dir->capkids = ncap;
	}
	dir->kids[dir->nkids++] = kid;
	return 0;
}

static int cmp_kid(const void *a, const void *b)
{
	const struct px_tree_node *x = *(const struct px_tree_node *const *)a;
	const struct px_tree_node *y = *(const struct px_tree_node *const *)b;
	return strcmp(x->name, y->name);
}

static int cmp_asset_id(const void *a, const void *b, void *assets)
{
	const struct px_asset *as = assets;
	return strcmp(as[*(const size_t *)a].id, as[*(const size_t *)b].id);
}

/* Node index of the directory at path (creating it and its parents). */
static long dir_node(struct px_tree *t, char *path)
{
	size_t idx;
	if (path[0] == '\0')
		return 0;
	if (px_strmap_get(t->dirs, path, &idx))
		return (long)idx;
	char *slash = strrchr(path, '/');
	long parent;
	const char *name = path;
	if (slash) {
		*slash = '\0';
		parent = dir_node(t, path);
		*slash = '/';
		name = slash + 1;
	} else {
		parent = 0;
	}
	if (parent < 0)
		return -1;
	char *key = strdup(path);
	if (!key)
		return -1;
	t->dirpaths[t->ndirpaths++] = key;
	long n = add_node(t, 'd', key, name, t->nodes[parent].pub.ino, -1);
	if (n < 0 || px_strmap_put(t->dirs, key, (size_t)n, NULL) != PX_OK ||
	    add_kid(&t->nodes[parent], &t->nodes[n].pub))
		return -1;
	return n;
}

static int cmp_asset_path(const void *a, const void *b, void *assets)
{
	const struct px_asset *as = assets;
	return strcmp(as[*(const size_t *)a].path, as[*(const size_t *)b].path);
}

/* How many of path's directories (its components but the last, as
 * prefixes) prev's directories do not hold: in sorted order the paths
 * under one directory are contiguous, so summing this over the sorted
 * paths counts every directory once. */
static size_t new_dirs(const char *prev, const char *path)
{
	const char *end = strrchr(path, '/');
	const char *pend = prev ? strrchr(prev, '/') : NULL;
	size_t dlen = end ? (size_t)(end - path) : 0, plen = pend ? (size_t)(pend - prev) : 0;
	size_t n = 0;
	for (size_t e = 0; e <= dlen && dlen; e++) {
		if (e < dlen && path[e] != '/')
			continue;
		/* path[0, e) is a directory: prev's too? */
		if (!(plen >= e && memcmp(prev, path, e) == 0 && (plen == e || prev[e] == '/')))
			n++;
	}
	return n;
}

/* The exact number of nodes the tree needs: the root, the listed assets
 * and their directories (sized up front, so nodes never move: kids point
 * at them). Returns 0 when out of memory. */
static size_t count_nodes(const struct px_catalog *cat, const unsigned char *listed)
{
	size_t *byp = calloc(cat->nassets + 1, sizeof(*byp)), n = 0, nodes = 1;
	if (!byp)
		return 0;
	for (size_t i = 0; i < cat->nassets; i++)
		if (!listed || listed[i])
			byp[n++] = i;
	qsort_r(byp, n, sizeof(*byp), cmp_asset_path, cat->assets);
	for (size_t k = 0; k < n; k++)
		nodes += 1 + new_dirs(k ? cat->assets[byp[k - 1]].path : NULL,
				      cat->assets[byp[k]].path);
	free(byp);
	return nodes;
}

enum px_status px_tree_new(const struct px_catalog *cat, const unsigned char *listed,
			   struct px_tree **out)
{
	enum px_status st = PX_ENOMEM;
	size_t maxnodes = 1, *order = NULL;
	struct px_tree *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return PX_ENOMEM;
	/* sized exactly: a library of 100 000 files in deep folders would
	 * otherwise reserve a node for every '/' of every path */
	maxnodes = count_nodes(cat, listed);
	if (!maxnodes) {
		free(t);
		return PX_ENOMEM;
	}
	size_t maxfiles = 0;
	for (size_t i = 0; i < cat->nassets; i++)
		maxfiles += !listed || listed[i];
	t->cap = maxnodes;
	t->nodes = calloc(maxnodes, sizeof(*t->nodes));
	t->dirpaths = calloc(maxnodes - maxfiles, sizeof(char *));
	for (t->nslots = 16; t->nslots < maxnodes * 2; t->nslots *= 2)
		;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	t->dirs = px_strmap_new(maxnodes - maxfiles);
	order = calloc(cat->nassets + 1, sizeof(*order));
	if (!t->nodes || !t->dirpaths || !t->slots || !t->dirs || !order)
		goto out;
	if (add_node(t, 0, "", "", PX_TREE_ROOT, -1) != 0)
		goto out;

	for (size_t i = 0; i < cat->nassets; i++)
		order[i] = i;
	qsort_r(order, cat->nassets, sizeof(*order), cmp_asset_id, cat->assets);
	/* files first, in id order, so their inode numbers never depend on
	 * which directories exist */
	long *file_node = calloc(cat->nassets + 1, sizeof(long));
	if (!file_node)
		goto out;
	for (size_t k = 0; k < cat->nassets; k++) {
		size_t i = order[k];
		const struct px_asset *a = &cat->assets[i];
		file_node[i] = -1;
		if (listed && !listed[i])
			continue;
		const char *base = strrchr(a->path, '/');
		file_node[i] = add_node(t, 'a', a->id, base ? base + 1 : a->path, 0, (long)i);
		if (file_node[i] < 0) {
			free(file_node);
			goto out;
		}
	}
	for (size_t i = 0; i < cat->nassets; i++) {
		if (file_node[i] < 0)
			continue;
		char *dir = strdup(cat->assets[i].path);
		if (!dir) {
			free(file_node);
			goto out;
		}
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		else
			dir[0] = '\0';
		long d = dir_node(t, dir);
		free(dir);
		if (d < 0 || add_kid(&t->nodes[d], &t->nodes[file_node[i]].pub)) {
			free(file_node);
			goto out;
		}
		t->nodes[file_node[i]].pub.parent = t->nodes[d].pub.ino;
	}
	free(file_node);
	for (size_t i = 0; i < t->count; i++)
		if (t->nodes[i].nkids > 1)
			qsort(t->nodes[i].kids, t->nodes[i].nkids, sizeof(*t->nodes[i].kids), cmp_kid);
	*out = t;
	t = NULL;
	st = PX_OK;
out:
	free(order);
	px_tree_free(t);
	return st;
}

void px_tree_free(struct px_tree *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->count; i++) {
		free(t->nodes[i].name);
		free(t->nodes[i].kids);
	}
	for (size_t i = 0; i < t->ndirpaths; i++)
		free(t->dirpaths[i]);
	free(t->dirpaths);
	free(t->nodes);
	free(t->slots);
	px_strmap_free(t->dirs);
	free(t);
}

const struct px_tree_node *px_tree_get(const struct px_tree *t, uint64_t ino)
{
	size_t s = *slot_for(t, ino);
	return s ? &t->nodes[s - 1].pub : NULL;
}

size_t px_tree_children(const struct px_tree *t, uint64_t dir,
			const struct px_tree_node *const **out)
{
	size_t s = *slot_for(t, dir);
	if (!s || t->nodes[s - 1].pub.asset >= 0) {
		*out = NULL;
		return 0;
	}
	*out = t->nodes[s - 1].kids;
	return t->nodes[s - 1].nkids;
}

const struct px_tree_node *px_tree_lookup(const struct px_tree *t, uint64_t parent,
					  const char *name)
{
	const struct px_tree_node *const *kids;
	size_t lo = 0, hi = px_tree_children(t, parent, &kids);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(name, kids[mid]->name);
		if (c == 0)
			return kids[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

size_t px_tree_count(const struct px_tree *t)
{
	return t->count;
}
