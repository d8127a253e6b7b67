/*
 * table.c - looking up the copies' storages, copies and jobs, and what an
 * asset wants (copies, its sha256): the small helpers every file of
 * proxy/copies/ uses (copies_i.h). They call no other file of the folder.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "copies_i.h"

long cp_find_storage(struct px_copies *cp, const char *name)
{
	for (size_t i = 0; i < cp->nst; i++)
		if (strcmp(cp->st[i].name, name) == 0)
			return (long)i;
	return -1;
}

long cp_find_copy(struct px_copies *cp, size_t asset, size_t storage)
{
	for (size_t i = 0; i < cp->nc; i++)
		if (cp->c[i].asset == asset && cp->c[i].storage == storage)
			return (long)i;
	return -1;
}

long cp_find_job(struct px_copies *cp, size_t asset)
{
	for (size_t i = 0; i < cp->njobs; i++)
		if (cp->jobs[i].asset == asset)
			return (long)i;
	return -1;
}

int cp_grow(void **arr, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 8;
	void *p = realloc(*arr, ncap * size);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Cluster mode and a storage without a host (NFS, every host writes it):
 * each host keeps a manifest of its own there. */
int cp_shared(const struct px_copies *cp, const struct storage *s)
{
	return px_cluster_store(cp->core) != NULL && s->host == NULL;
}

void cp_copy_path(struct px_core *core, const struct storage *s, size_t asset, char *out,
		  size_t n)
{
	snprintf(out, n, "%s/%s", s->path, px_cat(core)->assets[asset].path);
}

/* The asset's sha256 now (the last reload's, else the core's catalog). */
const char *cp_want_sha(struct px_copies *cp, size_t asset)
{
	if (asset < cp->cap && cp->sha_set[asset])
		return cp->sha[asset];
	return px_cat(cp->core)->assets[asset].sha256;
}

int cp_want_copies(struct px_copies *cp, size_t asset)
{
	const struct px_asset *a = &px_cat(cp->core)->assets[asset];
	int n = asset < cp->cap && cp->want[asset] != -2 ? cp->want[asset] : a->copies;
	return n >= 0 ? n : cp->core->cfg->copies;
}

/* Cluster mode with a hosts registry: a storage with a host (a local
 * disk) is placed on by the cluster, one copy per host. */
int cp_clustered(const struct px_copies *cp)
{
	return px_cluster_store(cp->core) != NULL && px_cluster_hosts(cp->core) != NULL;
}

/* A local disk of this host. */
int cp_own_disk(const struct px_copies *cp, const struct storage *s)
{
	return s->host && strcmp(s->host, cp->host) == 0;
}

void cp_kick(struct px_copies *cp)
{
	cp->kick = 1;
	pthread_cond_broadcast(&cp->cond);
}
