/*
 * reads_i.h - the read layer's state (struct px_reads) as the files of
 * read/ share it. No other folder includes this: they use reads.h.
 *
 * Locks: cache_lock (+ cache_cond, monotonic) guards the head and tail
 * slots, cache_used and cache_clock (cache.c); handles_lock the list of
 * open handles (session.c). The rest are atomics.
 */
#ifndef SEAMFS_READS_I_H
#define SEAMFS_READS_I_H

#include <pthread.h>
#include <stdatomic.h>
#include "reads.h"

struct px_handle;

struct px_reads {
	const struct px_config *cfg;
	/* read-ahead windows and cached parts share cfg->readahead_budget */
	_Atomic int64_t ra_used;
	/* heads and tails share cfg->cache_size (cache.c) */
	pthread_mutex_t cache_lock;
	pthread_cond_t cache_cond;
	int64_t cache_used;
	uint64_t cache_clock;
	struct px_disk *disk;      /* heads and tails on disk (disk.c); NULL: none */
	/* open handles (session.c), closed by px_handles_close_all if FUSE
	 * did not release them before the unmount */
	pthread_mutex_t handles_lock;
	struct px_handle *handles;
	/* counters, for the log and the status */
	_Atomic uint64_t n_cache_hits, n_cache_fills, n_streams, n_direct, n_stream_restarts;
	_Atomic uint64_t n_par_streams;  /* streams that turned parallel */
	_Atomic uint64_t n_parts;        /* part transfers they started */
	_Atomic uint64_t n_multipart;    /* head fills that brought the tail in
					  * the same request (multipart ranges) */
	/* handles closed after reading only cached heads and tails: library
	 * scans (ffprobe, a scraper) that cost no transfer of their own */
	_Atomic uint64_t n_scans_cached;
	_Atomic int64_t kernel_ra;  /* px_stream_set_kernel_readahead(), 0: unknown */
	_Atomic uint64_t n_stream_waits, stream_wait_us; /* reads that waited for bytes */
	struct px_histo h_read;     /* reads as fs/ answers them (lock-free) */
};

#endif
