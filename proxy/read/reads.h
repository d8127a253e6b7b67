/*
 * reads.h - the read layer's own state (reads.c): the read-ahead budget,
 * the head and tail cache's lock and accounting, the persistent tier, the
 * open handles and the read counters. The composition root (core.c) makes
 * one with px_reads_new() and keeps the pointer in px_core; every other
 * layer asks it for a snapshot (px_reads_stats()) and never reads its
 * fields.
 */
#ifndef SEAMFS_READS_H
#define SEAMFS_READS_H

#include <stdint.h>
#include "config.h"
#include "disk.h"
#include "histo.h"
#include "px.h"

struct px_reads;

/* What the status and the metrics show of the read layer: one snapshot,
 * the counters since the mount and the bytes in use now. */
struct px_reads_stats {
	uint64_t n_cache_hits, n_cache_fills, n_multipart, n_scans_cached;
	uint64_t n_streams, n_stream_restarts, n_stream_waits, stream_wait_us;
	uint64_t n_par_streams, n_parts, n_direct;
	int64_t ra_used;           /* windows and cached parts, of readahead_budget */
	int64_t cache_used;        /* cached heads and tails, of cache_size */
	struct px_disk_stats disk; /* the persistent tier (zeroes: none) */
	struct px_histo_snap h_read;
};

/* Makes the read layer's state for cfg (borrowed until px_reads_free).
 * PX_ENOMEM. Main thread, before any read. */
enum px_status px_reads_new(const struct px_config *cfg, struct px_reads **out) PX_WUR;

/* Frees it, once no handle is open and no transfer runs. NULL: no-op. */
void px_reads_free(struct px_reads *r);

/* Copies the counters and the bytes in use into out. Takes the cache's
 * lock briefly; any thread that holds none of the read layer's locks. */
void px_reads_stats(struct px_reads *r, struct px_reads_stats *out);

/* Counts a read as fs/ answered it, us microseconds after it came, in the
 * read-duration histogram. Lock-free; any thread. */
void px_reads_note_read(struct px_reads *r, int64_t us);

#endif
