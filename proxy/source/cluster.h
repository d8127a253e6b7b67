/*
 * cluster.h - the core's handles on the cluster (cluster.c): the shared
 * store and the hosts' registry (borrowed from main), the providers'
 * slots across hosts (cslots.c's) and the peers' shared secret. NULL
 * handles on one host.
 */
#ifndef SEAMFS_CLUSTER_H
#define SEAMFS_CLUSTER_H

#include "px.h"

struct px_core;
struct px_store;
struct px_hosts;
struct px_cslots;

/* Makes core->cluster with store and hosts (borrowed; NULL: one host);
 * PX_ENOMEM without memory. With px_core_new. */
enum px_status px_cluster_new(struct px_core *core, struct px_store *store,
			      struct px_hosts *hosts) PX_WUR;
/* Frees it, wiping the secret. NULL-safe; at px_core_free. */
void px_cluster_free(struct px_core *core);

/* The store and the hosts' registry; NULL on one host. Any thread. */
struct px_store *px_cluster_store(const struct px_core *core);
struct px_hosts *px_cluster_hosts(const struct px_core *core);

/* cslots.c's state (set by px_cslots_start and px_cslots_stop). */
struct px_cslots *px_cluster_cslots(const struct px_core *core);
void px_cluster_set_cslots(struct px_core *core, struct px_cslots *cs);

/* The cluster's shared secret (cluster_secret_file); NULL: none, no
 * peer's copy is read. Never logged, shown or stored. set takes secret
 * (owned), before the core serves. */
const char *px_cluster_secret(const struct px_core *core);
void px_cluster_set_secret(struct px_core *core, char *secret);

#endif
