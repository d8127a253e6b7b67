/*
 * peer.h - the peer endpoint (peer.c; docs/copies.md, "Across hosts"):
 * this host's verified copies, served to the cluster's other hosts over
 * HTTP range requests, for requests that carry the cluster's secret.
 */
#ifndef SEAMFS_PEER_H
#define SEAMFS_PEER_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"
#include "copies.h"

struct px_core;
struct px_peer;

/*
 * Parses a Range header (NULL: none) against a file of size bytes: one
 * range, "bytes=A-B", "bytes=A-" or "bytes=-N". 0 with [*off, *off+*len)
 * (the whole file when there is no header); 1 when the range cannot be
 * served (416); -1 when the header is not one range we read (answered
 * as if absent: the whole file, as RFC 9110 allows). Pure.
 */
int px_peer_parse_range(const char *hdr, int64_t size, int64_t *off, int64_t *len);

/*
 * Serves the core's copies on listen ("ADDR:PORT", an IPv4 or IPv6
 * address or a name) to requests whose "Authorization: Bearer SECRET"
 * is the core's peer_secret (else 401): GET or HEAD PX_PEER_PATH ID,
 * answered from the local file of a serving copy of this host's
 * (px_copies_peer_open; 404 when it holds none), with 206 and
 * Content-Range for a range, 416 for one past the end. PX_EIO (logged)
 * when it cannot listen; PX_EINVAL without a secret.
 */
enum px_status px_peer_start(struct px_core *core, const char *listen, struct px_peer **out) PX_WUR;

/* Stops serving and frees. NULL: no-op. */
void px_peer_stop(struct px_peer *p);

#endif
