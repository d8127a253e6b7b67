/*
 * hosts.h - the cluster's hosts: each daemon registers itself in the
 * store under its host_id with a heartbeat, and lists the others.
 *
 * Keys (PREFIX from cluster=):
 *   PREFIX:host:ID   hash: token (random, this daemon's), pid, boot (the
 *                    kernel's boot id), version, started, seen (the store's
 *                    clock, ms), sessions, writers, peer (the URL of its
 *                    peer endpoint, "" for none); its load (placement,
 *                    transcode/place.h): wcost (its writers, each weighted
 *                    by its profile's cost, thousandths), cpu (the 1-minute
 *                    load average per CPU, thousandths), wmax (max_writers),
 *                    placed and placedn (the cost and number of the
 *                    placements other hosts made on it that it has not
 *                    started yet); expires 3 heartbeats after the last one
 *   PREFIX:hosts     set of the ids registered (an id whose hash expired
 *                    is dropped from it by whoever lists)
 * A second daemon with the same host_id on the same store is refused
 * (px_hosts_join: PX_EEXIST) while the first one's key lives, unless that
 * one ran on this machine (same boot id) and its process is gone (or a
 * zombie not reaped yet): a
 * daemon killed with -9 and started again is not locked out for the TTL.
 *
 * The heartbeat thread writes this host's hash every heartbeat (so after
 * Redis restarted empty, the host is back within one heartbeat) and reads
 * the list; px_hosts_list() answers from that copy, with no call.
 */
#ifndef SEAMFS_HOSTS_H
#define SEAMFS_HOSTS_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"
#include "kvstore.h"

#define PX_HOST_ID_MAX 63
#define PX_HOSTS_MAX 64

struct px_hosts;

struct px_host_info {
	char id[PX_HOST_ID_MAX + 1];
	int64_t pid;
	int64_t age_ms;          /* since its last heartbeat, by the store's clock */
	int64_t up_ms;           /* since it registered */
	int sessions, writers;
	int64_t wcost_milli;     /* its writers weighted by profile cost (place.h) */
	int64_t cpu_milli;       /* 1-minute load average per CPU, x 1000 */
	int64_t placed_milli;    /* placements on it not started yet, by cost */
	int max_writers;         /* 0: a daemon that takes no placements */
	char version[32];
	char peer[208];          /* its peer endpoint's URL (peer_url); "": none */
	int self;                /* this daemon */
};

/* Checks a host id: 1 to PX_HOST_ID_MAX of [A-Za-z0-9._-]. */
enum px_status px_host_id_check(const char *id, char *err, size_t errlen) PX_WUR;
/* This machine's host name, made a valid host id. */
void px_host_id_default(char *buf, size_t cap);

/*
 * Registers host_id in st now (a call; the store must answer). PX_EEXIST
 * with err saying who holds it when another live daemon registered the
 * same id; other failures as px_store_call's, with err naming the store.
 * heartbeat_ms: how often the thread (px_hosts_start) beats.
 */
enum px_status px_hosts_join(struct px_store *st, const char *host_id, int64_t heartbeat_ms,
			     struct px_hosts **out, char *err, size_t errlen) PX_WUR;

/* What the heartbeat reports: counts(arg, &sessions, &writers), called on
 * the heartbeat thread with no lock of ours held. Set before start. */
void px_hosts_set_counts(struct px_hosts *h, void (*counts)(void *arg, int *sessions,
							   int *writers), void *arg);

/* This host's load as the heartbeat publishes it (placement, place.h):
 * load(arg, &wcost_milli, &max_writers), on the heartbeat thread with no
 * lock of ours held; the CPU's load average hosts.c reads itself. Set
 * before start; unset, the host takes no placements. */
void px_hosts_set_load(struct px_hosts *h, void (*load)(void *arg, int64_t *wcost_milli,
							int *max_writers), void *arg);

/* Called on the heartbeat thread after each heartbeat the store answered
 * (the cluster's other periodic reads: shared drains, core.c). Set before
 * start. */
void px_hosts_set_tick(struct px_hosts *h, void (*tick)(void *arg), void *arg);

/* The URL (http://HOST:PORT, at most 200 bytes) this host's peer
 * endpoint is reached by, advertised with every heartbeat. Set before
 * start. */
void px_hosts_set_peer(struct px_hosts *h, const char *url);

/* Starts the heartbeat thread. */
enum px_status px_hosts_start(struct px_hosts *h) PX_WUR;

/* The hosts as of the last heartbeat's listing (no call): up to cap into
 * out, this one always among them; returns how many. NULL h: 0. */
size_t px_hosts_list(struct px_hosts *h, struct px_host_info *out, size_t cap);

/* The host id; the store. */
const char *px_hosts_self(const struct px_hosts *h);
struct px_store *px_hosts_store(const struct px_hosts *h);

/* Stops the thread and removes this host's registration (if still ours),
 * once; the object stays readable (px_hosts_list answers the last list)
 * for the threads that still hold it, until px_hosts_free. NULL: no-op. */
void px_hosts_leave(struct px_hosts *h);

/* Leaves (if not yet) and frees. The daemon leaves before it frees the
 * core (the heartbeat reads the core) and frees after it (the core's
 * threads, copies and slots, read the list). NULL: no-op. */
void px_hosts_free(struct px_hosts *h);

#endif
