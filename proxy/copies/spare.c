/*
 * spare.c - reading a source in spare slots (docs/copies.md, "The copy").
 *
 * A copy's source is read in 1 MiB ranges through background transfers
 * that take only a spare slot of its provider (PX_XFER_SPARE: free now,
 * nobody waiting, preempted by any viewer's open): a gate, an ops table
 * whose submit asks px_xfer_submit for such a slot. A range that found no
 * spare slot or was preempted waits YIELD_MS and is asked again, costing
 * no attempt. A path source is read with pread. The same gate asks a
 * source's ETag (a one-byte range). While a copy runs, its claim is
 * renewed and the cluster's state synced from here (claim.c, peers.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "copies_i.h"
#include "provider.h"

static enum px_status g_submit(void *impl, const struct px_fetch_params *p,
			       const struct px_fetch_cb *cb, uint64_t *id)
{
	struct gate *g = impl;
	enum px_status st = px_xfer_submit(g->core, g->prov, NULL, PX_XFER_SPARE, px_now_ms(), p,
					   cb, id);
	if (st == PX_EBUSY)
		atomic_store(&g->busy, 1);
	if (st == PX_OK) {
		atomic_store(&g->id, *id);
		/* a stop while this submit ran found no transfer to cancel: the
		 * range would have held the exit until it stalled out */
		pthread_mutex_lock(&g->cp->lock);
		int stop = g->cp->stop;
		pthread_mutex_unlock(&g->cp->lock);
		if (stop)
			g->core->fetch.ops.cancel(g->core->fetch.ops.impl, *id);
	}
	return st;
}

static void g_cancel(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->fetch.ops.cancel(g->core->fetch.ops.impl, id);
}

static void g_resume(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->fetch.ops.resume(g->core->fetch.ops.impl, id);
}

enum px_status cp_open_source(struct px_core *core, size_t asset, size_t k, struct gate *g,
			      struct px_rangeread **out)
{
	const struct px_source *src = &px_cat(core)->assets[asset].sources[k];
	const struct px_provider *p = &px_cat(core)->providers[src->provider];
	enum px_status st;
	if (src->path) {
		st = px_rangeread_new_fd(src->path, px_source_open(core, asset, k), out);
	} else {
		g->ops = (struct px_fetch_ops){ g_submit, g_cancel, g_resume, g };
		g->core = core;
		g->cp = core->copies;
		g->prov = src->provider;
		st = px_rangeread_new_http(&g->ops, src->url, (const char *const *)p->headers,
					   p->nheaders, RANGE_TIMEOUT_MS, 1, out);
	}
	if (st == PX_OK) {
		px_rangeread_set_size(*out, px_asset_rt(core, asset)->size);
		if (!src->path)
			px_rangeread_set_header_hosts(*out, (const char *const *)p->header_hosts,
						      p->nheader_hosts);
	}
	return st;
}

/* Source k's ETag into etag: 0, 1 when no spare slot was free (ask
 * later), -1 when it did not answer. */
int cp_probe_etag(struct px_core *core, size_t asset, size_t k, char *etag, size_t n)
{
	struct gate g = { 0 };
	struct px_rangeread *rr = NULL;
	struct vf_seen seen;
	char why[200];
	int rc = -1;
	if (cp_open_source(core, asset, k, &g, &rr) == PX_OK) {
		enum px_status st = px_rangeread_probe(rr, &seen, why, sizeof(why));
		if (st == PX_OK) {
			snprintf(etag, n, "%s", seen.etag);
			rc = 0;
		} else if (atomic_load(&g.busy) || st == PX_ECANCELED) {
			rc = 1;
		}
	}
	px_rangeread_free(rr);
	return rc;
}

/* Waits ms unless stopping: 1 when stopping. The copies thread: a held
 * claim is renewed when due. */
int cp_pause_ms(struct px_copies *cp, int64_t ms)
{
	cp_claim_renew(cp, 0);
	pthread_mutex_lock(&cp->lock);
	int64_t until = px_now_ms() + ms;
	while (!cp->stop && px_now_ms() < until) {
		struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
		pthread_cond_timedwait(&cp->cond, &cp->lock, &ts);
	}
	int stop = cp->stop;
	pthread_mutex_unlock(&cp->lock);
	return stop;
}

/* One range [off, off + len) of the source into buf, asked again while
 * no spare slot is free or a viewer took it back (no attempt spent).
 * PX_OK; PX_ESHUTDOWN when stopping; else the failure with rd->why. */
static enum px_status read_range(struct px_copies *cp, const struct cp_read *rd,
				 struct gate *g, const struct vf_reader *r, int64_t off,
				 size_t len, unsigned char *buf)
{
	for (int yields = 0;;) {
		size_t got = 0;
		cp_claim_renew(cp, 0);
		cp_sync_due(cp);
		if (cp->claim_lost) {
			snprintf(rd->why, rd->n, "the claim to copy it there was lost to another host");
			return PX_EIO;
		}
		atomic_store(&g->busy, 0);
		enum px_status st = r->read(r->ctx, off, len, buf, &got);
		if (st != PX_OK && (atomic_load(&g->busy) || st == PX_ECANCELED ||
				    st == PX_EBUSY) && yields++ < SPARE_TRIES) {
			/* no spare slot, or a viewer took it back: wait, no attempt spent */
			if (cp_pause_ms(cp, YIELD_MS))
				return PX_ESHUTDOWN;
			continue;
		}
		if (st != PX_OK && cp_pause_ms(cp, 0))
			return PX_ESHUTDOWN;
		if (st != PX_OK)
			snprintf(rd->why, rd->n, "reading %s at %lld: %s",
				 px_cat(cp->core)->assets[rd->asset].sources[rd->k].shown,
				 (long long)off, px_strerror(st));
		return st;
	}
}

/* Writes buf[0..len) to fd: PX_OK, else PX_EIO with why. */
static enum px_status write_all(int fd, const unsigned char *buf, size_t len, char *why,
				size_t n)
{
	for (size_t w = 0; w < len;) {
		ssize_t wr = write(fd, buf + w, len - w);
		if (wr < 0 && errno == EINTR)
			continue;
		if (wr <= 0) {
			snprintf(why, n, "writing the copy: %s",
				 wr < 0 ? strerror(errno) : "no progress");
			return PX_EIO;
		}
		w += (size_t)wr;
	}
	return PX_OK;
}

/* The job's progress: off bytes done. 1 when stopping. */
static int progress(struct px_copies *cp, size_t ji, int64_t off)
{
	pthread_mutex_lock(&cp->lock);
	struct job *j = &cp->jobs[ji];
	j->done = off;
	int64_t ms = px_now_ms() - j->started_ms;
	j->speed = ms > 0 ? (double)off * 1000.0 / (double)ms : 0;
	int stop = cp->stop;
	pthread_mutex_unlock(&cp->lock);
	return stop;
}

/*
 * Reads all of source rd->k of the asset in spare slots, hashing it into
 * sha (and writing it to rd->fd when >= 0), progress into job rd->job.
 * PX_OK, or the failure with rd->why; PX_ESHUTDOWN when stopping.
 */
enum px_status cp_stream_source(struct px_copies *cp, const struct cp_read *rd,
				unsigned char sha[VF_HASH_LEN])
{
	struct px_core *core = cp->core;
	int64_t size = px_asset_rt(core, rd->asset)->size, off = 0;
	struct gate g = { 0 };
	struct px_rangeread *rr = NULL;
	struct vf_hash *h = NULL;
	unsigned char *buf = malloc(CHUNK);
	enum px_status st = PX_ENOMEM;

	if (!buf || vf_hash_new(&h) != PX_OK)
		goto out;
	if ((st = cp_open_source(core, rd->asset, rd->k, &g, &rr)) != PX_OK)
		goto out;
	pthread_mutex_lock(&cp->lock);
	cp->reading = &g;
	pthread_mutex_unlock(&cp->lock);
	struct vf_reader r = px_rangeread_reader(rr);
	while (off < size) {
		size_t len = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		if ((st = read_range(cp, rd, &g, &r, off, len, buf)) != PX_OK)
			goto out;
		if ((st = vf_hash_update(h, buf, len)) != PX_OK)
			goto out;
		if (rd->fd >= 0 && (st = write_all(rd->fd, buf, len, rd->why, rd->n)) != PX_OK)
			goto out;
		off += (int64_t)len;
		if (rd->fd >= 0)
			atomic_fetch_add(&cp->n_bytes, len);
		if (progress(cp, rd->job, off)) {
			st = PX_ESHUTDOWN;
			goto out;
		}
	}
	st = vf_hash_final(h, sha);
out:
	if (st == PX_ENOMEM)
		snprintf(rd->why, rd->n, "out of memory");
	pthread_mutex_lock(&cp->lock);
	if (cp->reading == &g)
		cp->reading = NULL;
	pthread_mutex_unlock(&cp->lock);
	px_rangeread_free(rr);
	vf_hash_free(h);
	free(buf);
	return st;
}
