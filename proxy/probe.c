/*
 * probe.c - size discovery at mount time.
 *
 * Every asset that needs its size (or mtime) asks its sources in catalog
 * order until one answers: a Range: bytes=0-0 request gives the total in
 * its Content-Range (or Content-Length from a server that ignores ranges)
 * and Last-Modified; a path source is stat()ed. All assets are probed at
 * once, at most PROBE_PARALLEL transfers in flight, and the whole pass is
 * bounded by probe_timeout: what has not answered by then is cancelled.
 *
 * A source whose size differs from the catalog's size is marked dead for
 * that asset: the content-length gate, applied before any byte is served.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core_i.h"
#include "log.h"

#define PROBE_PARALLEL 32

struct probe_item {
	struct probe *pr;
	size_t asset;
	size_t source;        /* the source being tried */
	int inflight;
	uint64_t id;
	char why[400];        /* what went wrong so far, for the log */
};

struct probe {
	struct px_core *core;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct probe_item *items;
	size_t nitems, next, inflight;
	int changed;          /* a transfer ended: the driver has work */
	int64_t deadline;
};

/* Adds "SOURCE: what happened" to the item's reasons. */
static void note(struct probe_item *it, const char *src, const char *detail)
{
	size_t n = strlen(it->why);
	if (n + 8 < sizeof(it->why))
		snprintf(it->why + n, sizeof(it->why) - n, "%s%s: %s", n ? "; " : "", src, detail);
}

static const char *source_name(const struct px_source *s)
{
	return s->url ? s->url : s->path;
}

/* Applies a size learned from source k. Returns 1 when the asset is done. */
static int accept_size(struct probe_item *it, int64_t size, int64_t mtime)
{
	struct px_core *core = it->pr->core;
	struct asset_rt *rt = &core->assets[it->asset];
	const struct px_asset *a = &core->cat->assets[it->asset];
	char detail[80];

	if (size < 0) {
		note(it, source_name(&a->sources[it->source]),
		     "the answer gave no size");
		return 0;
	}
	if (a->size >= 0 && size != a->size) {
		snprintf(detail, sizeof(detail), "has %lld bytes, the catalog says %lld",
			 (long long)size, (long long)a->size);
		note(it, source_name(&a->sources[it->source]), detail);
		px_warn("probe", "asset %s: source %s %s; it will not be used", a->id,
			source_name(&a->sources[it->source]), detail);
		rt->dead[it->source] = 1;
		return 0;
	}
	rt->size = size;
	if (rt->mtime < 0)
		rt->mtime = mtime;
	return 1;
}

static int on_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	(void)ctx; (void)off; (void)buf; (void)len;
	return 1;
}

static void on_done(void *ctx, const struct px_fetch_result *res)
{
	struct probe_item *it = ctx;
	struct probe *pr = it->pr;
	const struct px_asset *a = &pr->core->cat->assets[it->asset];
	int done = 0;

	pthread_mutex_lock(&pr->lock);
	if (res->status == PX_OK) {
		done = accept_size(it, res->size, res->mtime);
	} else {
		note(it, source_name(&a->sources[it->source]), res->detail);
		if (res->status == PX_ENOTFOUND || res->status == PX_ESIZE)
			pr->core->assets[it->asset].dead[it->source] = 1;
	}
	if (!done)
		it->source++;
	else
		it->source = a->nsources;
	it->inflight = 0;
	pr->inflight--;
	pr->changed = 1;
	pthread_cond_signal(&pr->cond);
	pthread_mutex_unlock(&pr->lock);
}

/* Starts the item's next source, or finishes it. Called with lock held;
 * returns 1 if a transfer was started. */
static int advance(struct probe *pr, struct probe_item *it)
{
	struct px_core *core = pr->core;
	const struct px_asset *a = &core->cat->assets[it->asset];

	while (it->source < a->nsources) {
		const struct px_source *s = &a->sources[it->source];
		if (s->path) {
			struct stat sb;
			int r = stat(s->path, &sb), e = errno;
			if (r == 0 && S_ISREG(sb.st_mode)) {
				if (accept_size(it, sb.st_size, sb.st_mtime)) {
					it->source = a->nsources;
					return 0;
				}
			} else {
				note(it, s->path, r ? strerror(e) : "not a regular file");
				core->assets[it->asset].dead[it->source] = 1;
			}
			it->source++;
			continue;
		}
		const struct px_provider *p = &core->cat->providers[s->provider];
		struct px_fetch_params fp = {
			.url = s->url, .headers = (const char *const *)p->headers,
			.nheaders = p->nheaders, .offset = 0, .length = 0,
			.expect_size = a->size, .no_reuse = p->max_connections > 0,
		};
		struct px_fetch_cb cb = { on_data, on_done, it };
		it->inflight = 1;
		pr->inflight++;
		/* submit never calls back before returning with the real fetcher;
		 * a fake may, so drop the lock around it */
		pthread_mutex_unlock(&pr->lock);
		/* background work: waits for a slot of a provider at its limit,
		 * within the probe's time */
		enum px_status st = px_xfer_submit(core, s->provider, NULL, 1, pr->deadline, &fp,
						   &cb, &it->id);
		pthread_mutex_lock(&pr->lock);
		if (st == PX_OK)
			return 1;
		it->inflight = 0;
		pr->inflight--;
		note(it, s->url, px_strerror(st));
		it->source++;
	}
	return 0;
}

void px_probe_assets(struct px_core *core, const unsigned char *need)
{
	struct probe pr = { .core = core };
	const struct px_catalog *cat = core->cat;
	int64_t deadline = px_now_ms() + core->cfg->probe_timeout_ms;

	pr.deadline = deadline;
	for (size_t i = 0; i < cat->nassets; i++)
		pr.nitems += need[i] != 0;
	if (!pr.nitems)
		return;
	pr.items = calloc(pr.nitems, sizeof(*pr.items));
	if (!pr.items) {
		px_error("probe", "out of memory: no sizes discovered");
		return;
	}
	for (size_t i = 0, k = 0; i < cat->nassets; i++) {
		if (need[i]) {
			pr.items[k].pr = &pr;
			pr.items[k++].asset = i;
		}
	}
	pthread_mutex_init(&pr.lock, NULL);
	px_cond_init_mono(&pr.cond);
	px_info("probe", "discovering %zu asset size(s) (up to %lld ms)", pr.nitems,
		(long long)core->cfg->probe_timeout_ms);

	pthread_mutex_lock(&pr.lock);
	while (px_now_ms() < deadline) {
		/* keep PROBE_PARALLEL transfers going: move items whose source
		 * failed on to their next source, then start new items */
		size_t waiting = 0;
		pr.changed = 0;
		for (size_t k = 0; k < pr.next; k++) {
			struct probe_item *it = &pr.items[k];
			if (it->inflight || it->source == 0 ||
			    it->source >= cat->assets[it->asset].nsources)
				continue;
			if (pr.inflight < PROBE_PARALLEL)
				advance(&pr, it);
			else
				waiting++;
		}
		while (pr.next < pr.nitems && pr.inflight < PROBE_PARALLEL)
			advance(&pr, &pr.items[pr.next++]);
		/* a transfer that ended while advance() had dropped the lock
		 * may have left an item to move on: look again */
		if (pr.changed)
			continue;
		if (pr.inflight == 0 && pr.next == pr.nitems && !waiting)
			break;
		if (!px_cond_wait_until(&pr.cond, &pr.lock, &pr.changed, deadline))
			break;
	}
	/* deadline: cancel what is left and wait (briefly) for the callbacks,
	 * which touch pr */
	for (size_t k = 0; k < pr.next; k++) {
		if (pr.items[k].inflight) {
			note(&pr.items[k], source_name(&cat->assets[pr.items[k].asset].sources[pr.items[k].source]),
			     "no answer within probe_timeout");
			core->ops.cancel(core->ops.impl, pr.items[k].id);
		}
	}
	while (pr.inflight > 0) {
		pr.changed = 0;
		if (!px_cond_wait_until(&pr.cond, &pr.lock, &pr.changed, px_now_ms() + 10000)) {
			/* cannot happen with a live fetch thread; never free pr under it */
			px_error("probe", "transfers did not end after cancel; waiting on");
		}
	}
	pthread_mutex_unlock(&pr.lock);

	for (size_t k = 0; k < pr.nitems; k++) {
		struct probe_item *it = &pr.items[k];
		struct asset_rt *rt = &core->assets[it->asset];
		if (rt->size < 0 && it->why[0] == '\0')
			snprintf(it->why, sizeof(it->why), "not probed within probe_timeout");
		if (rt->size < 0)
			px_warn("probe", "asset %s left out: size unknown (%s)",
				cat->assets[it->asset].id, it->why);
	}
	pthread_cond_destroy(&pr.cond);
	pthread_mutex_destroy(&pr.lock);
	free(pr.items);
}
