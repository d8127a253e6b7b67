/*
 * probe.c - size discovery at mount time.
 *
 * An asset whose size the catalog does not give asks every one of its
 * sources, in parallel: a Range: bytes=0-0 request gives the total in its
 * Content-Range (or Content-Length from a server that ignores ranges) and
 * Last-Modified; a path source is stat()ed. Only answers that prove they
 * are the file count (px_http_judge: never an HTML page, a compressed or
 * unknown-length body). The size a strict majority of the sources that gave
 * one agree on wins: as soon as the answers still out cannot change that,
 * else once every source has answered or failed. No source decides alone
 * because it came first: with no majority (two sources that disagree, or a
 * liar and one honest source while the third is silent) the asset gets no
 * size, and an error names the sizes seen. Sources that answered another
 * size than the winner are dead for the asset, and the log and the status
 * say which and why (answers still on their way when every size is decided
 * get PROBE_GRACE_MS more). A login page behind a redirect, listed first,
 * cannot make a movie an 81-byte file.
 *
 * An asset whose size the catalog gives is not probed at all (core.c); a
 * reload's new asset with a size likewise. A source of another size is
 * refused at its first transfer (px_http_judge): the content-length gate,
 * applied before any byte is served.
 *
 * All assets are probed at once, at most PROBE_PARALLEL transfers in
 * flight, and the whole pass is bounded by probe_timeout: what has not
 * answered by then is cancelled, and the answers that came decide.
 *
 * An asset left without a size is not listed, and is asked again: the
 * retry thread runs px_probe_retry() RETRY_FIRST_MS after the mount, then
 * at doubling intervals up to RETRY_MAX_MS while an asset stays out. It
 * probes without reload_lock (a reload or status.json need not wait for
 * probe_timeout; a reload probes only assets new to it, and drops the
 * retry of an asset it removes), then under it lists what it found in a
 * new tree, as a reload does, and remembers the size in the state dir. A
 * size once listed never changes while mounted.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "context.h"
#include "health.h"
#include "probe.h"
#include "provider.h"
#include "sources.h"
#include "rangeread.h"
#include "httpparse.h"
#include "log.h"
#include "state.h"
#include "tree.h"

/* probe.c's own state (context.h's px_core.retry): the retry of size
 * discovery and who is told of a new tree; made by px_probe_retry_new,
 * freed by px_probe_retry_release, opaque to the rest. */
struct px_retry {
	/* the reload lock: one reload's or retry's publish at a time; guards
	 * this object's trees and reload.c's px_reloads (px_reload_lock) */
	pthread_mutex_t lock;
	pthread_t thread;
	int started;
	struct px_state *state;    /* sizes are remembered in (borrowed); NULL: none */
	/* the trees the retry replaced, kept until the core is freed (under
	 * the reload lock) */
	struct px_tree *trees[PX_MAX_RELOADS];
	size_t ntrees;
	/* set once by the front after the core started, read by the reload
	 * and retry threads: ctx is stored first, fn is atomic */
	_Atomic(px_reload_fn) on_reload;
	void *on_reload_ctx;
};

enum px_status px_probe_retry_new(struct px_core *core)
{
	core->retry = calloc(1, sizeof(*core->retry));
	if (!core->retry)
		return PX_ENOMEM;
	pthread_mutex_init(&core->retry->lock, NULL);
	return PX_OK;
}

void px_reload_lock(struct px_core *core)
{
	pthread_mutex_lock(&core->retry->lock);
}

void px_reload_unlock(struct px_core *core)
{
	pthread_mutex_unlock(&core->retry->lock);
}

void px_probe_on_reload(struct px_core *core, px_reload_fn fn, void *ctx)
{
	core->retry->on_reload_ctx = ctx;
	atomic_store(&core->retry->on_reload, fn); /* after ctx: a reader loads fn first */
}

void px_probe_tell(struct px_core *core, const struct px_tree *old, const struct px_tree *now)
{
	px_reload_fn told = atomic_load(&core->retry->on_reload);
	if (told)
		told(core->retry->on_reload_ctx, old, now);
}

#define PROBE_PARALLEL 32
#define PROBE_GRACE_MS 1000  /* for answers after every size is decided */
#define RETRY_FIRST_MS 5000  /* an asset left out is asked again after this, */
#define RETRY_MAX_MS 300000  /* doubling up to this */

enum { PS_WAIT, PS_FLIGHT, PS_DONE };

/* One source of an asset being probed. */
struct probe_src {
	struct probe_item *it;
	size_t source;
	int state;            /* PS_*, under pr->lock */
	uint64_t id;
	enum px_status st;    /* its answer */
	int64_t size, mtime;
};

struct probe_item {
	struct probe *pr;
	size_t asset;
	struct probe_src *srcs; /* one per source, catalog order */
	size_t n;
	int parallel;         /* the size is unknown: ask every source at once */
	int decided;
	int split;            /* decided: no size had a majority */
	char why[400];        /* what went wrong so far, for the log */
};

struct probe {
	struct px_core *core;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct probe_item *items;
	size_t nitems, inflight;
	struct probe_src *srcs; /* every item's sources, in one array */
	size_t nsrcs;
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
	return s->shown; /* its reasons reach the log: no credentials */
}

/* Marks source k of the asset dead for a size that is not the asset's,
 * with the reason in its status. */
static void size_dead(struct px_core *core, size_t asset, size_t k, int64_t size,
		      int64_t want, const char *whose)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	const struct px_asset *a = &px_cat(core)->assets[asset];
	char detail[160];
	snprintf(detail, sizeof(detail), "has %lld bytes, %s %lld", (long long)size, whose,
		 (long long)want);
	px_warn("probe", "asset %s: source %s %s; it will not be used", a->id,
		source_name(&a->sources[k]), detail);
	rt->dead[k] = 1;
	struct src_rt *all = px_src_ensure(core, asset);
	if (all) {
		px_vf_lock(core);
		px_src_why(&all[k], detail);
		px_vf_unlock(core);
	}
}

/* Whether source ps answered a size that counts as a vote. */
static int votes_for(const struct probe_src *ps)
{
	return ps->state == PS_DONE && ps->st == PX_OK && ps->size >= 0;
}

/* Counts the answers: how many gave a size (*answered), how many are still
 * to come (*pending); returns the index of the size most answers agree on
 * (the first in catalog order on a tie), or -1, with its votes. */
static long count_votes(const struct probe_item *it, size_t *votes, size_t *answered,
			size_t *pending)
{
	long best = -1;
	*votes = *answered = *pending = 0;
	for (size_t i = 0; i < it->n; i++) {
		const struct probe_src *ps = &it->srcs[i];
		*pending += ps->state != PS_DONE;
		if (!votes_for(ps))
			continue;
		++*answered;
		size_t v = 0;
		for (size_t j = 0; j < it->n; j++)
			v += votes_for(&it->srcs[j]) && it->srcs[j].size == ps->size;
		if (v > *votes) {
			*votes = v;
			best = (long)i;
		}
	}
	return best;
}

/* No size has a strict majority of the answers: says which sizes were
 * seen, and from where, in the item's reasons (the log line that leaves
 * the asset out carries them). Lock held. */
static void note_split(struct probe_item *it, size_t answered)
{
	const struct px_asset *a = &px_cat(it->pr->core)->assets[it->asset];
	char seen[300] = "";
	size_t n = 0;
	for (size_t i = 0; i < it->n && n + 1 < sizeof(seen); i++) {
		const struct probe_src *ps = &it->srcs[i];
		if (votes_for(ps))
			n += (size_t)snprintf(seen + n, sizeof(seen) - n, "%s%s has %lld bytes",
					      n ? ", " : "", source_name(&a->sources[ps->source]),
					      (long long)ps->size);
	}
	if (n >= sizeof(seen))
		n = sizeof(seen) - 1;
	char failed[sizeof(it->why)];
	snprintf(failed, sizeof(failed), "%s", it->why);
	it->split = 1;
	snprintf(it->why, sizeof(it->why), "no size has a majority of the %zu source(s) that "
		 "gave one: %s%s%s", answered, seen, failed[0] ? "; " : "", failed);
}

/* Decides the item's size from the answers so far, when they suffice (or
 * final is set: no more will come). Without a catalog size, a size needs
 * a strict majority of the sources that gave one (a source that failed or
 * gave none does not count): decided early once the answers still to come
 * cannot change that, else at the end; with none, the asset gets no size.
 * Lock held. */
static void decide(struct probe_item *it, int final)
{
	struct px_core *core = it->pr->core;
	struct asset_rt *rt = px_asset_rt(core, it->asset);
	const struct px_asset *a = &px_cat(core)->assets[it->asset];
	size_t best_votes, answered, pending;

	if (it->decided)
		return;
	long best = count_votes(it, &best_votes, &answered, &pending);
	if (pending && !final) {
		/* the catalog's size: one source that agrees is enough */
		if (a->size >= 0 && best < 0)
			return;
		/* a majority even if every source still out answers otherwise */
		if (a->size < 0 && best_votes * 2 <= answered + pending)
			return;
	}
	it->decided = 1;
	if (best < 0)
		return;
	if (a->size < 0 && best_votes * 2 <= answered) {
		note_split(it, answered);
		return;
	}
	const struct probe_src *win = &it->srcs[best];
	rt->size = win->size;
	for (size_t i = 0; i < it->n; i++) {
		const struct probe_src *ps = &it->srcs[i];
		if (votes_for(ps) && ps->size == win->size && rt->mtime < 0)
			rt->mtime = ps->mtime;
	}
	for (size_t i = 0; i < it->n; i++) {
		const struct probe_src *ps = &it->srcs[i];
		if (votes_for(ps) && ps->size != win->size)
			size_dead(core, it->asset, ps->source, ps->size, win->size,
				  a->size >= 0 ? "the catalog says" : "the other sources agree on");
	}
}

static int on_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	(void)ctx; (void)off; (void)buf; (void)len;
	return 1;
}

static void on_done(void *ctx, const struct px_fetch_result *res)
{
	struct probe_src *ps = ctx;
	struct probe_item *it = ps->it;
	struct probe *pr = it->pr;
	struct px_core *core = pr->core;
	const struct px_asset *a = &px_cat(core)->assets[it->asset];

	pthread_mutex_lock(&pr->lock);
	ps->st = res->status;
	ps->size = res->size;
	ps->mtime = res->mtime;
	if (res->status == PX_OK && res->size < 0)
		ps->st = PX_EBADRESP;
	if (ps->st != PX_OK) {
		note(it, source_name(&a->sources[ps->source]),
		     res->status == PX_OK ? "the answer gave no size" : res->detail);
		if (res->status == PX_ENOTFOUND)
			px_asset_rt(core, it->asset)->dead[ps->source] = 1;
		else if (res->status == PX_ESIZE && a->size >= 0 && res->size >= 0)
			size_dead(core, it->asset, ps->source, res->size, a->size, "the catalog says");
		else if (res->status == PX_ESIZE)
			px_asset_rt(core, it->asset)->dead[ps->source] = 1;
		else if (res->status == PX_ENOTASSET)
			px_source_misanswered(core, it->asset, ps->source, res->status,
					      res->detail);
	} else if (a->size >= 0 && ps->size != a->size) {
		size_dead(core, it->asset, ps->source, ps->size, a->size, "the catalog says");
		ps->st = PX_ESIZE;
	} else if (it->decided && px_asset_rt(core, it->asset)->size >= 0 &&
		   ps->size != px_asset_rt(core, it->asset)->size) {
		/* came after the majority decided: outvoted all the same */
		size_dead(core, it->asset, ps->source, ps->size, px_asset_rt(core, it->asset)->size,
			  "the other sources agree on");
	}
	ps->state = PS_DONE;
	pr->inflight--;
	decide(it, 0);
	pr->changed = 1;
	pthread_cond_signal(&pr->cond);
	pthread_mutex_unlock(&pr->lock);
}

/* Answers source ps from the file system (a path source). Lock held. */
static void stat_path(struct probe_src *ps)
{
	struct probe_item *it = ps->it;
	struct px_core *core = it->pr->core;
	const struct px_asset *a = &px_cat(core)->assets[it->asset];
	const char *path = a->sources[ps->source].path;
	struct stat sb;
	int r = stat(path, &sb), e = errno;

	ps->state = PS_DONE;
	if (r == 0 && S_ISREG(sb.st_mode) && sb.st_size > (1LL << 62)) {
		ps->st = PX_ESIZE;
		note(it, path, "larger than 2^62 bytes");
		px_asset_rt(core, it->asset)->dead[ps->source] = 1;
		return;
	}
	if (r == 0 && S_ISREG(sb.st_mode)) {
		ps->st = PX_OK;
		ps->size = sb.st_size;
		ps->mtime = sb.st_mtime;
		if (a->size >= 0 && ps->size != a->size) {
			size_dead(core, it->asset, ps->source, ps->size, a->size, "the catalog says");
			ps->st = PX_ESIZE;
		}
		return;
	}
	ps->st = PX_EIO;
	const char *kind = r ? NULL : px_file_kind(path);
	note(it, path, r ? strerror(e) : kind ? kind : "not a regular file");
	px_asset_rt(core, it->asset)->dead[ps->source] = 1;
}

/* Starts source ps of its item. Called with the lock held (dropped around
 * the submit); returns 1 if a transfer was started. */
static int start_src(struct probe *pr, struct probe_src *ps)
{
	struct px_core *core = pr->core;
	struct probe_item *it = ps->it;
	const struct px_asset *a = &px_cat(core)->assets[it->asset];
	const struct px_source *s = &a->sources[ps->source];

	if (s->path) {
		stat_path(ps);
		decide(it, 0);
		return 0;
	}
	const struct px_provider *p = &px_cat(core)->providers[s->provider];
	struct px_fetch_params fp = {
		.url = s->url, .headers = (const char *const *)p->headers,
		.nheaders = p->nheaders, .offset = 0, .length = 0,
		.expect_size = a->size, .no_reuse = p->max_connections > 0,
		.html_ok = px_http_is_html_path(a->path),
		.header_hosts = (const char *const *)p->header_hosts,
		.nheader_hosts = p->nheader_hosts,
	};
	struct px_fetch_cb cb = { on_data, on_done, ps };
	ps->state = PS_FLIGHT;
	pr->inflight++;
	/* submit never calls back before returning with the real fetcher;
	 * a fake may, so drop the lock around it */
	pthread_mutex_unlock(&pr->lock);
	/* background work: waits for a slot of a provider at its limit,
	 * within the probe's time */
	uint64_t id = 0;
	enum px_status st = px_xfer_submit(core, s->provider, NULL, 1, pr->deadline, &fp, &cb, &id);
	pthread_mutex_lock(&pr->lock);
	if (st == PX_OK) {
		ps->id = id;
		return 1;
	}
	ps->state = PS_DONE;
	ps->st = st;
	pr->inflight--;
	note(it, s->shown, px_strerror(st));
	decide(it, 0);
	return 0;
}

/* The next source of the item to start, or NULL: every source at once
 * while the size is unknown, else one after another until one agrees. */
static struct probe_src *next_src(struct probe_item *it)
{
	if (it->decided)
		return NULL;
	for (size_t i = 0; i < it->n; i++) {
		struct probe_src *ps = &it->srcs[i];
		if (ps->state == PS_WAIT)
			return ps;
		if (ps->state == PS_FLIGHT && !it->parallel)
			return NULL;
	}
	return NULL;
}

/* Whether the item is over: decided, or nothing left to ask. */
static int item_over(struct probe_item *it)
{
	if (it->decided)
		return 1;
	for (size_t i = 0; i < it->n; i++)
		if (it->srcs[i].state != PS_DONE)
			return 0;
	decide(it, 1);
	return 1;
}

/* Makes pr's items (the assets need names) and their sources. 0 when
 * there is nothing to do or no memory (logged). */
static int make_items(struct probe *pr, const unsigned char *need)
{
	const struct px_catalog *cat = px_cat(pr->core);
	for (size_t i = 0; i < cat->nassets; i++) {
		if (need[i]) {
			pr->nitems++;
			pr->nsrcs += cat->assets[i].nsources;
		}
	}
	if (!pr->nitems)
		return 0;
	pr->items = calloc(pr->nitems, sizeof(*pr->items));
	pr->srcs = calloc(pr->nsrcs + 1, sizeof(*pr->srcs));
	if (!pr->items || !pr->srcs) {
		px_error("probe", "out of memory: no sizes discovered");
		free(pr->items);
		free(pr->srcs);
		return 0;
	}
	struct probe_src *srcs = pr->srcs;
	for (size_t i = 0, k = 0, m = 0; i < cat->nassets; i++) {
		if (!need[i])
			continue;
		struct probe_item *it = &pr->items[k++];
		it->pr = pr;
		it->asset = i;
		it->srcs = &srcs[m];
		it->n = cat->assets[i].nsources;
		it->parallel = cat->assets[i].size < 0;
		for (size_t j = 0; j < it->n; j++) {
			srcs[m + j].it = it;
			srcs[m + j].source = j;
			srcs[m + j].size = srcs[m + j].mtime = -1;
		}
		m += it->n;
	}
	return 1;
}

/* Keeps PROBE_PARALLEL transfers going until every item is decided or
 * the deadline, then gives answers on their way PROBE_GRACE_MS. pr->lock
 * held. */
static void drive(struct probe *pr)
{
	size_t first = 0; /* items before it are over */
	while (px_now_ms() < pr->deadline) {
		/* keep PROBE_PARALLEL transfers going, items in catalog order */
		pr->changed = 0;
		int open_left = 0;
		for (size_t k = first; k < pr->nitems && pr->inflight < PROBE_PARALLEL; k++) {
			struct probe_item *it = &pr->items[k];
			struct probe_src *ps;
			while (pr->inflight < PROBE_PARALLEL && (ps = next_src(it)))
				start_src(pr, ps);
			if (k == first && item_over(it))
				first++;
		}
		while (first < pr->nitems && item_over(&pr->items[first]))
			first++;
		open_left = first < pr->nitems;
		/* a transfer that ended while start_src() had dropped the lock
		 * may have left an item to move on: look again */
		if (pr->changed)
			continue;
		if (!open_left)
			break;
		if (!px_cond_wait_until(&pr->cond, &pr->lock, &pr->changed, pr->deadline))
			break;
	}
	/* every size is decided: answers on their way still get a moment
	 * (PROBE_GRACE_MS), so that a source of another size is named as one */
	int64_t grace = px_now_ms() + PROBE_GRACE_MS;
	if (grace > pr->deadline)
		grace = pr->deadline;
	while (pr->inflight > 0 && px_now_ms() < grace) {
		pr->changed = 0;
		if (!px_cond_wait_until(&pr->cond, &pr->lock, &pr->changed, grace))
			break;
	}
}

/* Cancels what is left and waits for the callbacks, which touch pr, then
 * decides every item with what answered in time. pr->lock held. */
static void finish(struct probe *pr)
{
	const struct px_catalog *cat = px_cat(pr->core);
	for (size_t k = 0; k < pr->nsrcs; k++) {
		struct probe_src *ps = &pr->srcs[k];
		if (ps->state == PS_FLIGHT) {
			note(ps->it, source_name(&cat->assets[ps->it->asset].sources[ps->source]),
			     "no answer within probe_timeout");
			pr->core->fetch.ops.cancel(pr->core->fetch.ops.impl, ps->id);
		}
	}
	while (pr->inflight > 0) {
		pr->changed = 0;
		if (!px_cond_wait_until(&pr->cond, &pr->lock, &pr->changed, px_now_ms() + 10000)) {
			/* cannot happen with a live fetch thread; never free pr under it */
			px_error("probe", "transfers did not end after cancel; waiting on");
		}
	}
	/* what answered in time decides */
	for (size_t k = 0; k < pr->nitems; k++)
		decide(&pr->items[k], 1);
}

/* Logs each asset left without a size, and why. */
static void report_left(struct probe *pr)
{
	const struct px_catalog *cat = px_cat(pr->core);
	for (size_t k = 0; k < pr->nitems; k++) {
		struct probe_item *it = &pr->items[k];
		struct asset_rt *rt = px_asset_rt(pr->core, it->asset);
		if (rt->size < 0 && it->why[0] == '\0')
			snprintf(it->why, sizeof(it->why), "not probed within probe_timeout");
		if (rt->size >= 0)
			continue;
		if (it->split)
			px_error("probe", "asset %s left out: its sources disagree on its size (%s); "
				 "size discovery is tried again later", cat->assets[it->asset].id,
				 it->why);
		else
			px_warn("probe", "asset %s left out: size unknown (%s); size discovery is "
				"tried again later", cat->assets[it->asset].id, it->why);
	}
}

void px_probe_assets(struct px_core *core, const unsigned char *need)
{
	struct probe pr = { .core = core };

	pr.deadline = px_now_ms() + core->cfg->probe_timeout_ms;
	if (!make_items(&pr, need))
		return;
	pthread_mutex_init(&pr.lock, NULL);
	px_cond_init_mono(&pr.cond);
	px_info("probe", "discovering %zu asset size(s) (up to %lld ms)", pr.nitems,
		(long long)core->cfg->probe_timeout_ms);

	pthread_mutex_lock(&pr.lock);
	drive(&pr);
	finish(&pr);
	pthread_mutex_unlock(&pr.lock);
	report_left(&pr);
	pthread_cond_destroy(&pr.cond);
	pthread_mutex_destroy(&pr.lock);
	free(pr.items);
	free(pr.srcs);
}

int px_probe_state_key(const struct px_asset *a, char key[PX_STATE_KEY_LEN])
{
	const char **names = calloc(a->nsources + 1, sizeof(*names));
	if (!names)
		return -1;
	for (size_t k = 0; k < a->nsources; k++)
		names[k] = a->sources[k].url ? a->sources[k].url : a->sources[k].path;
	px_state_sources_key(names, a->nsources, key);
	free(names);
	return 0;
}

/* Which assets the retry asks again: left out for want of a size, and
 * still in the catalog. Their sources' "dead" marks from the last attempt
 * are forgotten (nothing read from them; the probe marks them again).
 * reload_lock held. Returns how many. */
static size_t retry_wanted(struct px_core *core, unsigned char *need)
{
	size_t n = 0;
	for (size_t i = 0; i < px_cat(core)->nassets; i++) {
		struct asset_rt *rt = px_asset_rt(core, i);
		need[i] = rt->rediscover && !rt->listed && rt->size < 0;
		if (!need[i])
			continue;
		for (size_t k = 0; k < px_cat(core)->assets[i].nsources; k++)
			rt->dead[k] = 0;
		n++;
	}
	return n;
}

/* Lists the assets the retry found a size for (still wanted: a reload may
 * have dropped one meanwhile), remembering their sizes. reload_lock held.
 * Returns how many. */
static size_t retry_publish(struct px_core *core, const unsigned char *need,
			    unsigned char *listed)
{
	size_t n = 0;
	struct px_tree *tree = NULL;
	for (size_t i = 0; i < px_cat(core)->nassets; i++) {
		struct asset_rt *rt = px_asset_rt(core, i);
		listed[i] = rt->listed || (need[i] && rt->rediscover && rt->size >= 0);
		n += listed[i] && !rt->listed;
	}
	if (!n)
		return 0;
	if (core->retry->ntrees == PX_MAX_RELOADS ||
	    px_tree_new(px_cat(core), listed, &tree) != PX_OK) {
		px_error("probe", "sizes found for %zu left-out asset(s), but they cannot be "
			 "listed (out of memory or of room for trees): remount", n);
		return 0;
	}
	for (size_t i = 0; i < px_cat(core)->nassets; i++) {
		struct asset_rt *rt = px_asset_rt(core, i);
		const struct px_asset *a = &px_cat(core)->assets[i];
		char key[PX_STATE_KEY_LEN];
		if (!listed[i] || rt->listed)
			continue;
		if (rt->mtime < 0)
			rt->mtime = px_sources_fallback_mtime(core);
		if (core->retry->state && px_probe_state_key(a, key) == 0 &&
		    px_state_put(core->retry->state, a->id, key, rt->size, rt->mtime) != PX_OK)
			px_warn("state", "could not remember the size of %s", a->id);
		px_info("probe", "asset %s listed: %lld bytes, found at a retry of size discovery",
			a->id, (long long)rt->size);
		rt->rediscover = 0;
		rt->listed = 1;
		px_sources_count_listed(core, 1);
	}
	struct px_tree *old = px_sources_set_tree(core, tree);
	core->retry->trees[core->retry->ntrees++] = old;
	px_probe_tell(core, old, tree);
	return n;
}

size_t px_probe_retry(struct px_core *core)
{
	size_t cap = px_assets_cap(core) + 1, found = 0;
	unsigned char *need = calloc(cap, 1), *listed = calloc(cap, 1);

	if (!need || !listed)
		goto out;
	px_reload_lock(core);
	size_t n = retry_wanted(core, need);
	px_reload_unlock(core);
	if (!n)
		goto out;
	/* without reload_lock: a reload (and status.json) need not wait for
	 * probe_timeout; a reload probes only assets new to it */
	px_probe_assets(core, need);
	px_reload_lock(core);
	found = retry_publish(core, need, listed);
	px_reload_unlock(core);
	if (found && core->retry->state) {
		char err[512];
		if (px_state_save(core->retry->state, err, sizeof(err)) != PX_OK)
			px_warn("state", "could not remember sizes: %s", err);
		px_state_release(core->retry->state);
	}
out:
	free(need);
	free(listed);
	return found;
}

/* Whether an asset waits for a retry. reload_lock held. */
static int retry_pending(const struct px_core *core)
{
	for (size_t i = 0; i < px_cat(core)->nassets; i++)
		if (px_asset_rt(core, i)->rediscover && !px_asset_rt(core, i)->listed)
			return 1;
	return 0;
}

/* The retry thread: asks again for the sizes of assets left out, after
 * RETRY_FIRST_MS, then at doubling intervals while some stay out. */
static void *retry_main(void *arg)
{
	struct px_core *core = arg;
	int64_t delay = RETRY_FIRST_MS;
	int64_t wake = px_now_ms() + delay;

	pthread_mutex_lock(px_prov_lock(core));
	while (!px_providers_stopping_locked(core)) {
		if (px_prov_wait_until(core, wake))
			continue;
		pthread_mutex_unlock(px_prov_lock(core));
		px_probe_retry(core);
		px_reload_lock(core);
		int more = retry_pending(core);
		px_reload_unlock(core);
		/* nothing left out: a reload may leave one out later */
		delay = !more ? RETRY_FIRST_MS : delay * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : delay * 2;
		pthread_mutex_lock(px_prov_lock(core));
		wake = px_now_ms() + delay;
	}
	pthread_mutex_unlock(px_prov_lock(core));
	return NULL;
}

void px_probe_retry_start(struct px_core *core, struct px_state *state)
{
	core->retry->state = state;
	if (pthread_create(&core->retry->thread, NULL, retry_main, core) == 0)
		core->retry->started = 1;
	else
		px_warn("probe", "could not start the thread that retries size discovery: an "
			"asset left out stays out until a remount");
}

void px_probe_retry_stop(struct px_core *core)
{
	if (!core->retry || !core->retry->started)
		return;
	px_providers_release(core);
	pthread_join(core->retry->thread, NULL);
	core->retry->started = 0;
}

void px_probe_retry_release(struct px_core *core)
{
	if (!core->retry)
		return;
	for (size_t i = 0; i < core->retry->ntrees; i++)
		px_tree_free(core->retry->trees[i]);
	pthread_mutex_destroy(&core->retry->lock);
	free(core->retry);
	core->retry = NULL;
}
