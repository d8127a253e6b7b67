/*
 * reads.c - the read layer's state, made and freed by the composition
 * root, and the one snapshot of it the status and the metrics read. The
 * tiers (cache.c, stream.c, session.c) use its fields through reads_i.h.
 */
#include <stdlib.h>

#include "clock.h"
#include "reads_i.h"

enum px_status px_reads_new(const struct px_config *cfg, struct px_reads **out)
{
	struct px_reads *r = calloc(1, sizeof(*r));
	*out = NULL;
	if (!r)
		return PX_ENOMEM;
	r->cfg = cfg;
	pthread_mutex_init(&r->cache_lock, NULL);
	px_cond_init_mono(&r->cache_cond);
	pthread_mutex_init(&r->handles_lock, NULL);
	*out = r;
	return PX_OK;
}

void px_reads_free(struct px_reads *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->handles_lock);
	pthread_cond_destroy(&r->cache_cond);
	pthread_mutex_destroy(&r->cache_lock);
	free(r);
}

void px_reads_stats(struct px_reads *r, struct px_reads_stats *out)
{
	pthread_mutex_lock(&r->cache_lock);
	out->cache_used = r->cache_used;
	pthread_mutex_unlock(&r->cache_lock);
	px_disk_stats(r->disk, &out->disk);
	out->n_cache_hits = atomic_load(&r->n_cache_hits);
	out->n_cache_fills = atomic_load(&r->n_cache_fills);
	out->n_multipart = atomic_load(&r->n_multipart);
	out->n_scans_cached = atomic_load(&r->n_scans_cached);
	out->n_streams = atomic_load(&r->n_streams);
	out->n_stream_restarts = atomic_load(&r->n_stream_restarts);
	out->n_stream_waits = atomic_load(&r->n_stream_waits);
	out->stream_wait_us = atomic_load(&r->stream_wait_us);
	out->n_par_streams = atomic_load(&r->n_par_streams);
	out->n_parts = atomic_load(&r->n_parts);
	out->n_direct = atomic_load(&r->n_direct);
	out->ra_used = atomic_load(&r->ra_used);
	px_histo_snapshot(&r->h_read, &out->h_read);
}

void px_reads_note_read(struct px_reads *r, int64_t us)
{
	px_histo_observe_us(&r->h_read, us);
}
