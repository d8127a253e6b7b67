/*
 * cluster.c - the core's handles on the cluster (docs/cluster.md), in
 * one object the composition root makes and frees: set before the core
 * serves, then only read, so no lock.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "context.h"

struct px_cluster {
	struct px_store *store;    /* borrowed from main; NULL: one host */
	struct px_hosts *hosts;
	struct px_cslots *cslots;  /* providers' slots across hosts (cslots.c) */
	char *peer_secret;         /* owned; NULL: none */
};

enum px_status px_cluster_new(struct px_core *core, struct px_store *store,
			      struct px_hosts *hosts)
{
	core->cluster = calloc(1, sizeof(*core->cluster));
	if (!core->cluster)
		return PX_ENOMEM;
	core->cluster->store = store;
	core->cluster->hosts = hosts;
	return PX_OK;
}

void px_cluster_free(struct px_core *core)
{
	struct px_cluster *cl = core->cluster;
	if (!cl)
		return;
	if (cl->peer_secret) {
		explicit_bzero(cl->peer_secret, strlen(cl->peer_secret));
		free(cl->peer_secret);
	}
	free(cl);
	core->cluster = NULL;
}

struct px_store *px_cluster_store(const struct px_core *core)
{
	return core->cluster ? core->cluster->store : NULL;
}

struct px_hosts *px_cluster_hosts(const struct px_core *core)
{
	return core->cluster ? core->cluster->hosts : NULL;
}

struct px_cslots *px_cluster_cslots(const struct px_core *core)
{
	return core->cluster ? core->cluster->cslots : NULL;
}

void px_cluster_set_cslots(struct px_core *core, struct px_cslots *cs)
{
	core->cluster->cslots = cs;
}

const char *px_cluster_secret(const struct px_core *core)
{
	return core->cluster ? core->cluster->peer_secret : NULL;
}

void px_cluster_set_secret(struct px_core *core, char *secret)
{
	core->cluster->peer_secret = secret;
}
