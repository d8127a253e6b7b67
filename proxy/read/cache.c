/*
 * cache.c - the heads, tails and indexes of assets, shared by every
 * session.
 *
 * Players and library scanners open a file, read its head (container
 * header), jump to its tail (index, cues, moov) and come back; scanners
 * stop there. Each asset's first head_size and last tail_size bytes are
 * fetched once, as one bounded range, and served to every later open from
 * memory, so a rescan or a reopen costs no transfer and never starts a
 * long stream.
 *
 * The slots belong to the asset, not to a source: a slot remembers which
 * source filled it (and which one a later part came from), and serves a
 * session reading any source identical to those (px_source_identical:
 * the same source, or both verified against the asset's reference), so a
 * head filled from one mirror spares the other its requests. Until the
 * sources are verified a session reading another source reads around it,
 * as it always did: an open file never mixes bytes of sources not proved
 * identical. All slots share cache_size; a fill evicts the least recently
 * used ready slots.
 *
 * The first reader of an empty slot starts a bounded range transfer; a
 * head is asked for in two parts: the first reader's bytes and a margin,
 * then the rest once a read goes past that (a player, not a scan). The
 * margin is 256 KiB after a small read (direct I/O: opening a thousand
 * files and reading 4 KiB of each costs a thousand small ranges, not a
 * thousand heads), and the kernel's read-ahead, at most 512 KiB, after a
 * read of the kernel's first window (fresh_read): a reader through the
 * page cache that reads on gets more asked for by the kernel at once, and
 * a scanner such as ffprobe on Matroska reads a few hundred KiB, so a
 * smaller first part would cost its scan a second round trip. 512 KiB
 * costs that scan the same requests as the whole 1 MiB of our mounts
 * (bench/scan.py), and a first read 1.2 ms less behind a 25 ms origin
 * (docs/read-path.md). A file named as Matroska is asked after such a
 * read for as much of its head as the kernel's read-ahead reaches past a
 * probe, and no tail (matroska_named). A tail, which players read from its
 * end, is asked for whole. Every reader
 * (the first one included) waits only until the bytes it needs are in,
 * so the first 64 KiB of a file come as soon as the origin sends them,
 * not when the whole part has arrived. Once a waiter's bytes are in, the
 * fill pauses until that reader has taken them (and, through
 * the zero-copy call, replied: px_cache_let_go), so that the reader gets a
 * CPU before the rest of the fill. A failed fill empties the slot (its
 * readers read around it); a fill that brings nobody's bytes within a read
 * timeout is cancelled.
 *
 * Head and tail in one request. A head's first part, for a reader through
 * the page cache (a scanner), asks for the tail too when its slot is empty
 * and not on disk, unless the file is named as Matroska: one transfer of two ranges, which origins answer as
 * multipart/byteranges (fetch.c, multipart.c), fills both slots (each
 * slot's peer is the other while it runs), so a first scan costs one
 * request. An answer of one range fills the head and empties the tail
 * for its own reader (skipped); a broken one fails both. Either way the
 * provider asks apart from then on (prov_rt.no_multipart).
 *
 * Index. A reader that jumps from the head to within 8 MiB before the
 * tail (session.c, index_jump: an MP4's moov at the end, larger than the
 * tail) reads the asset's third slot, from the jump's page to the tail's
 * start, asked for whole in one request: an index costs one request, not
 * one for each step of the kernel's read-ahead, and is kept on disk like
 * the head and the tail, so a rescan after a remount costs none.
 *
 * Persistent tier (disk.c). A part a fill completed is queued to be kept
 * on disk, with the ETag and Last-Modified its answer carried; the first
 * reader of an empty slot looks there before it asks an origin, and a part
 * that checks becomes the slot, as if its source had just filled it. A
 * slot whose parts came from two sources, or whose answers named two
 * versions, is not kept.
 *
 * Lock: core->reads->cache_lock guards every slot and the accounting; never held
 * across the fetcher's submit, cancel or resume, nor across disk I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cache.h"
#include "reads_i.h"
#include "request.h"
#include "wait.h"
#include "clock.h"
#include "disk.h"
#include "health.h"
#include "standby.h"
#include "provider.h"
#include "rangeread.h"
#include "log.h"
#include "mem.h"

/* A cached head or tail of an asset (cache.c). Guarded by the cache lock. */
struct cache_slot {
	int state;                 /* CACHE_EMPTY, CACHE_FILLING, CACHE_PARTIAL,
				    * CACHE_READY */
	size_t source;             /* whose bytes these are: the first part's */
	size_t also;               /* a later part's source, when another
				    * (identical) one; NO_SOURCE when none */
	size_t fill_source;        /* the source the running fill reads */
	unsigned char *buf;        /* room for asked bytes */
	int64_t start, len;
	int64_t asked;             /* bytes asked for so far (a head is filled in
				    * growing parts, as its readers need them) */
	int64_t filled;            /* bytes in so far (FILLING, PARTIAL) */
	uint64_t xid;              /* the fill transfer, 0 when none */
	uint64_t last_use;
	int64_t wake_at;           /* the nearest end a reader waits for, or
				    * INT64_MAX (FILLING) */
	int held;                  /* a reader's bytes are in: the fill waits
				    * until it has taken them */
	int paused;                /* the fill's transfer is paused (held) */
	int submitting;            /* a part's submit is under way: it waits
				    * for a slot or the session's cutover,
				    * no fault of the source */
	int waiting;               /* readers waiting for the fill's bytes */
	uint64_t owner;            /* the session whose slot the fill holds */
	_Atomic int64_t progress;  /* the fill's progress clock (px_progress_add,
				    * us), restarted when it resumes */
	/* the persistent tier (disk.c) */
	char etag[128];            /* the fill's answer's ETag, "" none */
	int64_t mtime;             /* its Last-Modified, -1 none */
	int answered;              /* etag and mtime are a fill's */
	int mixed;                 /* two answers named two versions: not kept */
	int persisted;             /* what it holds is on disk */
	int disk_tried;            /* looked for on disk since it was last empty */
	int loading;               /* a reader loads it from disk now: others
				    * wait for that, they start no fill */
	int stale;                 /* its copy on disk is of another version:
				    * the tier's thread removes it */
	int from_disk;             /* loaded from disk: an earlier mount's bytes */
	int skipped;               /* emptied by an answer that did not bring
				    * it (a tail asked with its head): its
				    * waiters fill it, they do not read around */
	struct cache_slot *peer;   /* the other slot the running fill brings
				    * too (a head and tail asked in one
				    * request), NULL */
};

enum { CACHE_EMPTY, CACHE_FILLING, CACHE_PARTIAL, CACHE_READY };
static const char *const slot_name[PX_CACHE_SLOTS] = { "head", "tail", "index" };
#define NO_SOURCE SIZE_MAX

/* Whether the slot's bytes may serve a reader of source: every part came
 * from a source identical to it. Lock held (a verdict may change between
 * two reads; each read asks again). */
static int slot_serves(const struct px_core *core, size_t asset, const struct cache_slot *s,
		       size_t source)
{
	return px_source_identical(core, asset, s->source, source) &&
	       (s->also == NO_SOURCE || px_source_identical(core, asset, s->also, source));
}

#define HEAD_FIRST (256LL << 10)   /* a head's first part asks this past a small read... */
#define FRESH_MARGIN (512LL << 10) /* ...and the kernel's read-ahead, at most this, past the
				    * kernel's first window (fresh_read) */
#define RA_ASSUMED (1LL << 20)     /* the kernel's read-ahead when the mount's is unknown */
#define PROBE_REACH (1LL << 20)    /* a Matroska probe's first part asks at least this */

/* The mount's kernel read-ahead (read_ahead_kb), RA_ASSUMED if unknown. */
static int64_t kernel_ra(const struct px_core *core)
{
	int64_t ra = atomic_load(&core->reads->kernel_ra);
	return ra > 0 ? ra : RA_ASSUMED;
}

/*
 * The kernel's first read-ahead window for a reader that reads 32 KiB at
 * a time through the page cache (ffprobe, players): four times the read
 * where that is at most a 32nd of the mount's read-ahead, twice where at
 * most a quarter, else the read-ahead (mm/readahead.c, get_init_ra_size):
 * 128 KiB at a read-ahead of 1 MiB, 64 KiB at 512 KiB. A first read this
 * long is a reader through the page cache, not a small direct one.
 */
static int64_t fresh_read(const struct px_core *core)
{
	const int64_t read = 32LL << 10;
	int64_t ra = kernel_ra(core);
	return read <= ra / 32 ? 4 * read : read <= ra / 4 ? 2 * read : ra;
}

/*
 * Whether the asset is named as a Matroska or WebM file. A probe of one
 * (ffprobe, a media server's scan) reads its header and first clusters, a
 * few hundred KiB, which the kernel's read-ahead through the page cache
 * turns into twice the mount's read-ahead at most (windows that double
 * from the first: 64, 128, 256 and 512 KiB at 512 KiB, to 960 KiB; 128 KiB
 * to 1 MiB at 1 MiB, to 1920 KiB), and reads nothing at the end: the Cues
 * are read at a seek. So a scan of one is best served by that much of its
 * head in one request and no tail (bench/scan.py: its second request for
 * the rest of the head, and its tail, were a third of a 200-file scan's
 * requests and half its bytes). A name that lies costs a request, never a
 * byte: a tail is still fetched when read.
 */
static int matroska_named(const struct px_core *core, size_t asset)
{
	static const char *const ext[] = { ".mkv", ".mka", ".mk3d", ".webm" };
	const char *path = px_cat(core)->assets[asset].path;
	size_t n = strlen(path);
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);
		if (n > e && strcasecmp(path + n - e, ext[i]) == 0)
			return 1;
	}
	return 0;
}

/* How far past its first reader's bytes a head's first part reaches. */
static int64_t head_margin(const struct px_core *core, size_t asset, size_t len)
{
	int64_t ra = kernel_ra(core);
	if ((int64_t)len < fresh_read(core))
		return HEAD_FIRST;
	if (matroska_named(core, asset))
		/* the kernel's ramp past a probe; at a read-ahead under 512
		 * KiB, the probe's reads and a window or two past them */
		return 2 * ra > PROBE_REACH ? 2 * ra : PROBE_REACH;
	if (ra > FRESH_MARGIN)
		ra = FRESH_MARGIN; /* more than a scan reads */
	return ra > HEAD_FIRST ? ra : HEAD_FIRST;
}

/* The fill transfer's callback context. */
struct fill {
	struct px_core *core;
	struct cache_slot *slot;
	size_t asset;
	int which;
	struct cache_slot *tail;   /* a head's fill that brings the tail too */
	size_t prov;               /* the provider asked */
};

/* Clears a held fill's pause on the slot and its peer, whose readers wait
 * on the same transfer. Lock held. */
static void unpause(struct cache_slot *s)
{
	s->paused = 0;
	if (s->peer)
		s->peer->paused = 0;
}

/* Where the asset's cached tail lies: [*start, *start + *len). */
static void tail_bounds(const struct px_core *core, size_t asset, int64_t *start, int64_t *len)
{
	const struct px_config *cfg = core->cfg;
	int64_t size = px_asset_rt(core, asset)->size;
	int64_t head_end = cfg->head_size < size ? cfg->head_size : size;
	*start = size - cfg->tail_size > head_end ? size - cfg->tail_size : head_end;
	*len = size - *start;
}

void px_cache_release(struct px_core *core)
{
	if (!core->reads)
		return;
	for (size_t i = 0; i < px_cat(core)->nassets; i++) {
		for (int k = 0; px_asset_rt(core, i)->slot && k < PX_CACHE_SLOTS; k++) {
			struct cache_slot *s = &px_asset_rt(core, i)->slot[k];
			if (s->buf)
				atomic_fetch_sub(&core->reads->ra_used, s->asked);
			free(s->buf);
		}
		free(px_asset_rt(core, i)->slot);
		px_asset_rt(core, i)->slot = NULL;
	}
}

/* Empties a slot that no transfer fills, giving its memory back. Lock held. */
static void drop(struct px_core *core, struct cache_slot *s)
{
	free(s->buf);
	s->buf = NULL;
	core->reads->cache_used -= s->asked;
	atomic_fetch_sub(&core->reads->ra_used, s->asked);
	s->asked = s->filled = 0;
	s->state = CACHE_EMPTY;
	s->disk_tried = 0; /* evicted from memory: the disk may have it */
	s->skipped = 0;
}

/* Makes room for need bytes by evicting ready (or partly filled, idle)
 * slots, oldest first (a reader copies under the lock, so such a slot is
 * never in use outside it). keep is never evicted. Lock held. Returns 0
 * when there is room. */
static int make_room(struct px_core *core, int64_t need, const struct cache_slot *keep)
{
	while (core->reads->cache_used + need > core->cfg->cache_size) {
		struct cache_slot *victim = NULL;
		for (size_t i = 0; i < px_cat(core)->nassets; i++) {
			for (int k = 0; px_asset_rt(core, i)->slot && k < PX_CACHE_SLOTS; k++) {
				struct cache_slot *s = &px_asset_rt(core, i)->slot[k];
				if ((s->state == CACHE_READY || s->state == CACHE_PARTIAL) &&
				    s != keep && (!victim || s->last_use < victim->last_use))
					victim = s;
			}
		}
		if (!victim)
			return -1;
		drop(core, victim);
	}
	return 0;
}

static int f_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct fill *f = ctx;
	/* a head and tail fill brings the head's part, then the tail */
	struct cache_slot *s = f->tail && off >= f->tail->start ? f->tail : f->slot;
	int took = 1;
	pthread_mutex_lock(&f->core->reads->cache_lock);
	/* the fetcher delivers in order, inside the range asked for */
	if (off == s->start + s->filled && s->held) {
		/* a reader has its bytes and has not taken them yet: let it
		 * have the CPU first (this chunk comes again on resume); the
		 * peer's readers may resume it too */
		s->paused = 1;
		if (s->peer)
			s->peer->paused = 1;
		took = 0;
	} else if (off == s->start + s->filled && s->filled + (int64_t)len <= s->asked) {
		memcpy(s->buf + s->filled, buf, len);
		s->filled += (int64_t)len;
		s->progress = px_progress_add(s->progress, len, f->core->cfg->stall_min_rate);
		/* wake the readers once one has all its bytes, not at every
		 * chunk; and hold the rest of the fill until one of them has
		 * taken its bytes: on a small machine the fill's own copying
		 * and the origin's sending would keep the reader from a CPU
		 * for milliseconds (the first read of a file waits on this) */
		if (s->peer) /* the other slot's readers wait on these bytes too */
			s->peer->progress = s->progress;
		if (s->start + s->filled >= s->wake_at) {
			s->wake_at = INT64_MAX;
			s->held = s->filled < s->asked;
			pthread_cond_broadcast(&f->core->reads->cache_cond);
		}
	}
	pthread_mutex_unlock(&f->core->reads->cache_lock);
	return took;
}

/* A fill's answer came: what it says of the source's version, and the
 * slot queued to be kept on disk. Returns 0 when it names another version
 * than the slot's earlier part (one kept on disk by an earlier mount, or
 * filled before the file changed): the slot is not to be served. Lock
 * held. */
static int answered(struct px_core *core, size_t asset, struct cache_slot *s, int which,
		    const struct px_fetch_result *res)
{
	if (!s->answered) {
		snprintf(s->etag, sizeof(s->etag), "%s", res->etag);
		s->mtime = res->mtime;
		s->answered = 1;
	} else if (strcmp(s->etag, res->etag) || s->mtime != res->mtime) {
		s->mixed = 1;
		return 0;
	}
	s->persisted = 0;
	if (core->reads->disk && s->also == NO_SOURCE)
		px_disk_want(core->reads->disk, asset, which);
	return 1;
}

/* The end of a fill for slot which (s) of f's asset. Lock held. */
static void slot_done(struct px_core *core, struct fill *f, struct cache_slot *s, int which,
		      const struct px_fetch_result *res)
{
	if (res->status == PX_OK && s->filled > 0 && !answered(core, f->asset, s, which, res)) {
		px_warn("cache", "asset %s: the %s's source answers with another version (ETag "
			"or Last-Modified) than its cached part: the part is dropped",
			px_cat(core)->assets[f->asset].id, slot_name[which]);
		drop(core, s);
		/* the copy on disk is of the old version too: forgotten, not
		 * loaded again */
		s->disk_tried = 1;
		s->stale = core->reads->disk != NULL;
		if (s->stale)
			px_disk_want(core->reads->disk, f->asset, which);
	} else if (res->status == PX_OK && s->filled == s->asked) {
		/* all of the part asked for: the whole slot, or more later */
		s->state = s->asked == s->len ? CACHE_READY : CACHE_PARTIAL;
		s->last_use = ++core->reads->cache_clock;
	} else if (res->status == PX_OK && s->filled > 0) {
		/* a short answer (an origin that caps its 206s): what came is
		 * good, the next reader that needs more asks on from there */
		int64_t extra = s->asked - s->filled;
		core->reads->cache_used -= extra;
		atomic_fetch_sub(&core->reads->ra_used, extra);
		s->asked = s->filled;
		s->state = s->asked == s->len ? CACHE_READY : CACHE_PARTIAL;
		s->last_use = ++core->reads->cache_clock;
	} else {
		/* readers read around it; the next miss tries again (a tail
		 * that a single-range answer did not bring too) */
		px_debug("cache", "fill of %lld bytes at %lld failed: %s", (long long)s->asked,
			 (long long)s->start, res->status == PX_OK ? "not in the answer" : res->detail);
		drop(core, s);
		s->skipped = res->status == PX_OK;
	}
	s->xid = 0;
	s->held = s->paused = 0;
	s->peer = NULL;
}

static void f_done(void *ctx, const struct px_fetch_result *res)
{
	struct fill *f = ctx;
	struct px_core *core = f->core;

	pthread_mutex_lock(&core->reads->cache_lock);
	slot_done(core, f, f->slot, f->which, res);
	if (f->tail) {
		slot_done(core, f, f->tail, 1, res);
		/* an origin that does not answer two ranges as two parts: this
		 * provider's heads and tails are asked for apart from now on */
		if (res->multi < 0 && !atomic_exchange(&px_prov_rt(core, f->prov)->no_multipart, 1))
			px_info("cache", "asset %s: provider %s answered a request for its head and "
				"tail with %s: heads and tails are asked for apart from now on",
				px_cat(core)->assets[f->asset].id, px_cat(core)->providers[f->prov].name,
				res->status != PX_OK ? res->detail
				: res->http_status == 200 ? "the whole file" : "one range");
		else if (res->multi > 0) {
			core->reads->n_multipart++;
			core->reads->n_cache_fills++; /* the tail's fill too */
		}
	}
	pthread_cond_broadcast(&core->reads->cache_cond);
	pthread_mutex_unlock(&core->reads->cache_lock);
	free(f);
}

/* For a head's first part, which ends at end: whether the same request
 * may bring the asset's tail too (two ranges, answered as multipart/
 * byteranges), and if so the tail's slot, made a fill of that transfer.
 * The tail must be empty and not on disk (looked for before), apart from
 * the part, within cache_size and the budget, and the provider not one
 * that answered such a request otherwise. Lock held. */
static struct cache_slot *pair_tail(struct px_core *core, struct px_session *sess, size_t asset,
				    struct cache_slot *head, size_t source, int64_t end)
{
	struct cache_slot *t = &px_asset_rt(core, asset)->slot[1];
	int64_t start, len, used = atomic_load(&core->reads->ra_used);
	tail_bounds(core, asset, &start, &len);
	if (t->state != CACHE_EMPTY || (core->reads->disk && !t->disk_tried) || start <= end ||
	    len <= 0 || len > core->cfg->cache_size ||
	    atomic_load(&px_prov_rt(core, px_cat(core)->assets[asset].sources[source].provider)
				 ->no_multipart) ||
	    make_room(core, len, t))
		return NULL;
	do {
		if (used + len > core->cfg->readahead_budget)
			return NULL;
	} while (!atomic_compare_exchange_weak(&core->reads->ra_used, &used, used + len));
	if (!(t->buf = malloc((size_t)len))) {
		atomic_fetch_sub(&core->reads->ra_used, len);
		return NULL;
	}
	t->start = start;
	t->len = t->asked = len;
	t->filled = 0;
	t->source = t->fill_source = source;
	t->also = NO_SOURCE;
	t->answered = t->mixed = t->persisted = t->from_disk = t->skipped = 0;
	t->state = CACHE_FILLING;
	t->wake_at = INT64_MAX;
	t->held = t->paused = 0;
	t->progress = px_progress_start();
	t->xid = 0;
	t->owner = sess->id;
	t->peer = head;
	head->peer = t;
	core->reads->cache_used += len;
	return t;
}

/* One read of the cache: what its steps share (px_cache_read). */
struct cread {
	struct px_core *core;
	struct px_session *sess;
	size_t asset, source;
	int which;
	int64_t start, slen;        /* the slot's range */
	int64_t need;               /* bytes of the slot the read needs in */
	const struct px_read_req *rq;
	uint64_t *held;
	int *how;                   /* PX_CACHE_* of the caller's */
	int filler, seen_fill;      /* we asked for a part; we waited on a fill */
	enum px_status st;
	uint64_t cancel, resume;    /* for after the lock */
};

/* Reserves more bytes of cache_size and the read-ahead budget for slot s.
 * Returns 0 when they are. Lock held. */
static int reserve(struct px_core *core, struct cache_slot *s, int64_t slen, int64_t more)
{
	if (slen > core->cfg->cache_size || make_room(core, more, s))
		return -1;
	/* cached bytes count against the one memory budget too */
	int64_t used = atomic_load(&core->reads->ra_used);
	do {
		if (used + more > core->cfg->readahead_budget)
			return -1;
	} while (!atomic_compare_exchange_weak(&core->reads->ra_used, &used, used + more));
	return 0;
}

/* The slot's fill state for a part of want bytes from source. Lock held. */
static void fill_begin(struct cread *c, struct cache_slot *s, int first, size_t also,
		       int64_t want, int64_t more)
{
	if (first) {
		s->start = c->start;
		s->len = c->slen;
		s->filled = 0;
		s->source = c->source;
		also = NO_SOURCE;
		s->answered = s->mixed = s->persisted = s->from_disk = s->skipped = 0;
	}
	s->also = also;
	s->state = CACHE_FILLING;
	s->fill_source = c->source;
	s->asked = want;
	s->wake_at = INT64_MAX;
	s->held = s->paused = 0;
	s->progress = px_progress_start();
	s->xid = 0;
	s->owner = c->sess->id;
	c->core->reads->cache_used += more;
}

/* The part a fill asks for: slot s's bytes [from, want), and the tail t
 * when it rides along (NULL). */
struct part_ask {
	struct cache_slot *s, *t;
	int first;                 /* the slot's first part */
	int64_t from, want;
	size_t was_also;           /* s->also before */
};

/* A fill's submit failed: the slot (and a paired tail) back as they were.
 * Lock held. Returns what the read makes of it. */
static enum px_status submit_failed(struct px_core *core, const struct part_ask *pa,
				    enum px_status rc)
{
	struct cache_slot *s = pa->s, *t = pa->t;
	int first = pa->first;
	int64_t more = pa->want - pa->from;
	if (t) {
		t->peer = s->peer = NULL;
		drop(core, t);
	}
	if (first) {
		drop(core, s);
	} else {
		/* the bytes in stay good: back to what was there */
		core->reads->cache_used -= more;
		atomic_fetch_sub(&core->reads->ra_used, more);
		s->asked = pa->from;
		s->state = CACHE_PARTIAL;
		s->also = pa->was_also;
	}
	pthread_cond_broadcast(&core->reads->cache_cond);
	return rc == PX_EBUSY || rc == PX_ESHUTDOWN ? rc : first ? PX_EDECLINED : rc;
}

/* Starts fill f of the part. Lock held; dropped around the submit. */
static enum px_status fill_submit(struct cread *c, struct fill *f, const struct part_ask *pa)
{
	struct px_core *core = c->core;
	struct cache_slot *s = pa->s, *t = pa->t;
	int64_t from = pa->from, want = pa->want, more = want - from;
	uint64_t id = 0;
	struct px_fetch_params fp = px_source_range(core, c->asset, c->source, c->start + from,
						    more);
	if (t) {
		fp.offset2 = t->start;
		fp.length2 = t->len;
	}
	struct px_fetch_cb cb = { f_data, f_done, f };
	s->submitting++;
	if (t)
		t->submitting++;
	pthread_mutex_unlock(&core->reads->cache_lock);
	/* the part's pages in one call, not a fault per page as its bytes
	 * come (the fill is not submitted yet: nothing frees buf meanwhile) */
	px_mem_prefault(s->buf + from, (size_t)more);
	if (t)
		px_mem_prefault(t->buf, (size_t)t->len);
	/* the fill holds a slot of the reader's session, on its source's
	 * provider: another reader of the session may have cut it over to
	 * another provider since this one chose the source */
	enum px_status rc = px_xfer_submit(core, f->prov, c->sess, 0, c->rq->deadline, &fp, &cb,
					   &id);
	pthread_mutex_lock(&core->reads->cache_lock);
	s->submitting--;
	if (t)
		t->submitting--;
	/* its waiters judge the fill's progress again, from now */
	pthread_cond_broadcast(&core->reads->cache_cond);
	if (rc != PX_OK) {
		free(f);
		return submit_failed(core, pa, rc);
	}
	if (s->state == CACHE_FILLING && s->start == c->start && s->len == c->slen &&
	    s->asked == want) {
		s->xid = id; /* unless it has already ended */
		s->progress = px_progress_start(); /* a stall counts from the slot */
	}
	if (t && t->peer == s && t->state == CACHE_FILLING) {
		t->xid = id;
		t->progress = px_progress_start();
	}
	core->reads->n_cache_fills += pa->first;
	return PX_OK;
}

/* Asks for the slot's next part, up to c->need bytes of it at least: an
 * empty slot's first part, or a partly filled one's next. Lock held;
 * dropped around the submit. */
static enum px_status ask(struct cread *c, struct cache_slot *s)
{
	struct px_core *core = c->core;
	int first = s->state == CACHE_EMPTY;
	int64_t from = first ? 0 : s->asked;
	int64_t want = c->slen;

	if (c->which == 0 && first) {
		/* a head's first part: its reader's bytes and a margin; the
		 * rest only once a read goes past it (a player, not a scan) */
		want = (c->need + head_margin(core, c->asset, c->rq->len) + 65535) & ~65535LL;
		if (want > c->slen)
			want = c->slen;
	}
	int64_t more = want - from;
	/* a slot holds the parts of two sources at most: a third reads around */
	size_t also = first || c->source == s->source ? s->also : c->source;
	if (!first && s->also != NO_SOURCE && also != s->also)
		return PX_EDECLINED;
	if (reserve(core, s, c->slen, more))
		return first ? PX_EDECLINED : PX_ENOMEM;
	struct fill *f = malloc(sizeof(*f));
	unsigned char *buf = realloc(first ? NULL : s->buf, (size_t)want);
	if (!f || !buf) {
		free(f);
		if (buf && !first)
			s->buf = buf;
		atomic_fetch_sub(&core->reads->ra_used, more);
		return first ? PX_EDECLINED : PX_ENOMEM;
	}
	s->buf = buf;
	*f = (struct fill){ .core = core, .slot = s, .asset = c->asset, .which = c->which,
			    .prov = px_cat(core)->assets[c->asset].sources[c->source].provider };
	size_t was_also = s->also;
	fill_begin(c, s, first, also, want, more);
	/* a head's first part brings the tail along where the origin can,
	 * for a reader through the page cache (a scanner: fresh_read); not
	 * for a small direct read, which a thousand files' 4 KiB must keep
	 * cheap */
	f->tail = c->which == 0 && first && (int64_t)c->rq->len >= fresh_read(core) &&
		  !matroska_named(core, c->asset)
		? pair_tail(core, c->sess, c->asset, s, c->source, c->start + want) : NULL;
	struct part_ask pa = { s, f->tail, first, from, want, was_also };
	return fill_submit(c, f, &pa);
}

/* Makes the slot the part loaded from disk (buf, m->have bytes, of source
 * k), unless a reader filled it meanwhile or there is no room. Takes
 * ownership of buf. Lock held. */
static void install(struct px_core *core, struct cache_slot *s, size_t k,
		    const struct px_disk_meta *m, unsigned char *buf)
{
	int64_t used = atomic_load(&core->reads->ra_used);
	if (s->state != CACHE_EMPTY || m->len > core->cfg->cache_size ||
	    make_room(core, m->have, s))
		goto out;
	do {
		if (used + m->have > core->cfg->readahead_budget)
			goto out;
	} while (!atomic_compare_exchange_weak(&core->reads->ra_used, &used, used + m->have));
	s->buf = buf;
	buf = NULL;
	s->start = m->start;
	s->len = m->len;
	s->asked = s->filled = m->have;
	s->state = m->have == m->len ? CACHE_READY : CACHE_PARTIAL;
	s->source = k;
	s->also = NO_SOURCE;
	s->xid = 0;
	s->held = s->paused = 0;
	s->wake_at = INT64_MAX;
	s->last_use = ++core->reads->cache_clock;
	snprintf(s->etag, sizeof(s->etag), "%s", m->etag);
	s->mtime = m->mtime;
	s->answered = s->persisted = s->from_disk = 1;
	s->mixed = 0;
	core->reads->cache_used += m->have;
out:
	free(buf);
}

/* px_disk_load's question: whether the part's source is one of the
 * asset's that may serve, of the version the part holds where its probe
 * said which. */
struct load_ctx {
	struct px_core *core;
	size_t asset, k;
};

static int load_source_ok(void *arg, const struct px_disk_meta *got)
{
	struct load_ctx *c = arg;
	const struct px_asset *a = &px_cat(c->core)->assets[c->asset];
	char etag[128];
	int64_t mtime;
	for (size_t k = 0; k < a->nsources; k++) {
		if (!a->sources[k].key || strcmp(a->sources[k].key, got->source) ||
		    a->sources[k].path || px_asset_rt(c->core, c->asset)->dead[k] ||
		    px_source_rejected(c->core, c->asset, k))
			continue;
		if (px_standby_seen(c->core, c->asset, k, etag, &mtime) &&
		    ((etag[0] && got->etag[0] && strcmp(etag, got->etag)) ||
		     (mtime >= 0 && got->mtime >= 0 && mtime != got->mtime)))
			return 0; /* the source has another version now */
		c->k = k;
		return 1;
	}
	return 0;
}

/* Looks for slot which (range [start, start+slen)) of the asset on disk,
 * and makes it the slot when it checks. Holds no lock of the core. */
static void load(struct px_core *core, size_t asset, int which, int64_t start, int64_t slen)
{
	struct px_disk_meta want = { .size = px_asset_rt(core, asset)->size, .start = start,
				     .len = slen, .mtime = -1,
				     .asset_mtime = px_asset_rt(core, asset)->mtime };
	struct px_disk_meta got;
	struct load_ctx c = { core, asset, 0 };
	unsigned char *buf;
	if (px_disk_load(core->reads->disk, px_cat(core)->assets[asset].id, which, &want, load_source_ok,
			 &c, &buf, &got) != PX_OK)
		return;
	pthread_mutex_lock(&core->reads->cache_lock);
	install(core, &px_asset_rt(core, asset)->slot[which], c.k, &got, buf);
	pthread_cond_broadcast(&core->reads->cache_cond);
	pthread_mutex_unlock(&core->reads->cache_lock);
}

/* The asset's head (which 0) or tail (1) slot, NULL before its first
 * cached read made them; under cache_lock. */
static struct cache_slot *slot_of(struct px_core *core, size_t asset, int which)
{
	struct cache_slot *slots = px_asset_rt(core, asset)->slot;
	return slots ? &slots[which] : NULL;
}

/* The tier's thread (px_disk_persist_fn): copies slot which of the asset,
 * when what it holds is not on disk yet, and stores it. */
static void persist(void *arg, size_t asset, int which)
{
	struct px_core *core = arg;
	struct px_disk_meta m = { .size = px_asset_rt(core, asset)->size,
				  .asset_mtime = px_asset_rt(core, asset)->mtime };
	unsigned char *copy = NULL;
	int forget = 0;
	pthread_mutex_lock(&core->reads->cache_lock);
	struct cache_slot *s = slot_of(core, asset, which);
	const struct px_asset *a = &px_cat(core)->assets[asset];
	if (s && s->stale) {
		s->stale = 0;
		forget = 1;
	} else if (s && (s->state == CACHE_READY || s->state == CACHE_PARTIAL) && !s->persisted &&
	    !s->mixed && s->also == NO_SOURCE && s->filled > 0 && s->source < a->nsources &&
	    a->sources[s->source].key && (copy = malloc((size_t)s->filled))) {
		memcpy(copy, s->buf, (size_t)s->filled);
		m.start = s->start;
		m.len = s->len;
		m.have = s->filled;
		m.mtime = s->mtime;
		snprintf(m.etag, sizeof(m.etag), "%s", s->etag);
		snprintf(m.source, sizeof(m.source), "%s", a->sources[s->source].key);
		s->persisted = 1;
	}
	pthread_mutex_unlock(&core->reads->cache_lock);
	if (forget)
		px_disk_forget(core->reads->disk, a->id, which);
	if (copy)
		px_disk_store(core->reads->disk, a->id, which, &m, copy);
	free(copy);
}

void px_cache_disk_start(struct px_core *core)
{
	const struct px_config *cfg = core->cfg;
	char dir[4096];
	if (cfg->cache_max_bytes <= 0 || cfg->cache_size <= 0 ||
	    (!cfg->cache_dir && !cfg->state_dir))
		return;
	snprintf(dir, sizeof(dir), "%s%s", cfg->cache_dir ? cfg->cache_dir : cfg->state_dir,
		 cfg->cache_dir ? "" : "/cache");
	(void)px_disk_open(dir, cfg->cache_max_bytes, persist, core, &core->reads->disk);
}

void px_cache_disk_stop(struct px_core *core)
{
	if (!core->reads)
		return;
	px_disk_free(core->reads->disk);
	core->reads->disk = NULL;
}

void px_cache_let_go(struct px_core *core, size_t asset, int which, uint64_t fill)
{
	uint64_t resume = 0;

	pthread_mutex_lock(&core->reads->cache_lock);
	struct cache_slot *s = slot_of(core, asset, which);
	if (s && fill && s->xid == fill && s->held) {
		s->held = 0;
		if (s->paused) {
			unpause(s);
			s->progress = px_progress_start(); /* a stall counts from the resume */
			resume = fill;
		}
	}
	pthread_mutex_unlock(&core->reads->cache_lock);
	if (resume)
		core->fetch.ops.resume(core->fetch.ops.impl, resume);
}

/* The range of slot which of the asset: [*start, *start + *len). The
 * index slot's is its own once it holds or brings bytes, else from off
 * (a page's start) to the tail's start. Lock held. */
static void slot_bounds(struct px_core *core, size_t asset, int which, int64_t off,
			int64_t *start, int64_t *len)
{
	int64_t size = px_asset_rt(core, asset)->size;
	if (which == PX_CACHE_INDEX) {
		const struct cache_slot *s = slot_of(core, asset, which);
		int64_t tstart, tlen;
		tail_bounds(core, asset, &tstart, &tlen);
		if (s && s->state != CACHE_EMPTY)
			*start = s->start, *len = s->len;
		else
			*start = off & ~4095LL, *len = tstart - *start;
	} else if (which == PX_CACHE_TAIL) {
		tail_bounds(core, asset, start, len);
	} else {
		*start = 0, *len = core->cfg->head_size < size ? core->cfg->head_size : size;
	}
}

/* An empty slot: a fill we waited for failed (decline), else the disk
 * tier is looked at (the tail's too, which a head's fill may bring), else
 * a fill is asked for. Lock held. Returns 1 to look again. */
static int cache_empty(struct cread *c, struct cache_slot *s)
{
	struct px_core *core = c->core;
	/* a fill we were waiting for failed: read directly, where failures are
	 * retried with backoff and counted; one whose answer left this slot
	 * out failed nothing */
	if (s->skipped && !c->filler)
		c->seen_fill = 0;
	if (c->filler || c->seen_fill) {
		c->st = PX_EDECLINED;
		return 0;
	}
	struct cache_slot *t = &px_asset_rt(core, c->asset)->slot[1];
	int64_t tstart, tlen;
	tail_bounds(core, c->asset, &tstart, &tlen);
	int mine = core->reads->disk && !s->disk_tried;
	/* the head's fill may bring the tail too, unless the tail is on disk:
	 * look first */
	int tail = !mine && c->which == 0 && core->reads->disk && t->state == CACHE_EMPTY &&
		   !t->disk_tried && tlen > 0;
	if (s->loading || (c->which == PX_CACHE_HEAD && t->loading)) {
		/* another reader loads it (or the tail this fill would bring)
		 * from disk: a fill now would fetch what the disk holds (the
		 * kernel's parallel reads of a film's index and tail did) */
		struct px_wait wt = { &core->reads->cache_lock, &core->reads->cache_cond,
				      c->rq->deadline, core->cfg->stall_timeout_ms };
		if (px_wait_bytes(&wt, NULL, NULL) == PX_WAIT_DEADLINE) {
			c->st = PX_ETIMEDOUT;
			return 0;
		}
		return 1;
	}
	if (mine || tail) {
		/* kept on disk by an earlier mount: no request */
		struct cache_slot *l = mine ? s : t;
		l->disk_tried = l->loading = 1;
		pthread_mutex_unlock(&core->reads->cache_lock);
		if (mine)
			load(core, c->asset, c->which, c->start, c->slen);
		else
			load(core, c->asset, 1, tstart, tlen);
		pthread_mutex_lock(&core->reads->cache_lock);
		l->loading = 0;
		pthread_cond_broadcast(&core->reads->cache_cond);
		return 1;
	}
	c->st = ask(c, s);
	c->filler = c->st == PX_OK;
	return c->filler;
}

/* The read's bytes are in the slot: copied, and the held fill goes on,
 * now or (when the caller can tell) once the reply is out. Lock held. */
static void cache_take(struct cread *c, struct cache_slot *s)
{
	memcpy(c->rq->buf, s->buf + (c->rq->off - c->start), c->rq->len);
	s->last_use = ++c->core->reads->cache_clock;
	if (s->from_disk)
		*c->how |= PX_CACHE_DISK;
	if (s->held && c->held && s->xid) {
		*c->held = s->xid;
	} else {
		s->held = 0;
		if (s->paused && s->xid) {
			unpause(s);
			s->progress = px_progress_start();
			c->resume = s->xid;
		}
	}
	if (!c->filler)
		c->core->reads->n_cache_hits++; /* served without a transfer of its own */
	c->st = PX_OK;
}

/* The slot fills from the read's source: wait for our bytes, the
 * deadline, or a stall of the fill while it runs. A held fill nobody will
 * resume is resumed. A fill that stalled, or did not bring our bytes
 * within a whole read timeout, is stuck: it is ended (the next reader
 * starts afresh) and the caller cuts over (PX_ETIMEDOUT). Lock held.
 * Returns 1 to look again. */
static int cache_wait(struct cread *c, struct cache_slot *s)
{
	struct px_core *core = c->core;
	int64_t end = c->rq->off + (int64_t)c->rq->len;
	c->seen_fill = 1;
	if (s->paused && s->xid && (!s->held || s->filled < c->need)) {
		/* held before its submit had returned (no id then), or held
		 * for a reader that has its bytes while we need more: that
		 * reader may have left without taking them (its deadline), and
		 * nobody else would resume it */
		s->held = 0;
		unpause(s);
		s->progress = px_progress_start();
		uint64_t id = s->xid;
		pthread_mutex_unlock(&core->reads->cache_lock);
		core->fetch.ops.resume(core->fetch.ops.impl, id);
		pthread_mutex_lock(&core->reads->cache_lock);
		return 1;
	}
	/* a part that ends before our bytes: wait for its end, then ask for
	 * the next */
	int64_t wake = s->asked < c->need ? s->start + s->asked : end;
	if (wake < s->wake_at)
		s->wake_at = wake;
	struct px_wait wt = { &core->reads->cache_lock, &core->reads->cache_cond,
			      c->rq->deadline, core->cfg->stall_timeout_ms };
	/* a paused fill, or one whose submit still waits (for a slot, for
	 * the session's cutover), is not stalled: no transfer runs to stall.
	 * Its submit is bounded by its reader's deadline and wakes us */
	int judged = !s->paused && !s->submitting;
	s->waiting++;
	enum px_wait_outcome o = px_wait_bytes(&wt, NULL, judged ? &s->progress : NULL);
	s->waiting--;
	if (o == PX_WAIT_DEADLINE || (o == PX_WAIT_STALLED && s->state == CACHE_FILLING &&
				      s->filled < c->need && !s->paused && !s->submitting)) {
		c->cancel = s->xid;
		c->st = PX_ETIMEDOUT;
		return 0;
	}
	return 1;
}

/* One step of a cache read on slot s. Lock held. Returns 1 to look again. */
static int cache_step(struct cread *c, struct cache_slot *s)
{
	if (s->state == CACHE_EMPTY)
		return cache_empty(c, s);
	if (c->which == PX_CACHE_INDEX && (s->start != c->start || s->len != c->slen)) {
		/* an index of an earlier jump (kept on disk, or another
		 * reader's fill) ends at the tail too: its range, if it holds
		 * the read */
		c->start = s->start;
		c->slen = s->len;
		c->need = c->rq->off + (int64_t)c->rq->len - c->start;
		if (c->rq->off < c->start || c->need > c->slen) {
			c->st = PX_EDECLINED;
			return 0;
		}
	}
	if (!slot_serves(c->core, c->asset, s, c->source) || s->start != c->start ||
	    s->len != c->slen) {
		c->st = PX_EDECLINED; /* bytes of a source not proved identical */
		return 0;
	}
	/* ready, or filled far enough: a reader waits only for its bytes */
	if (s->state == CACHE_READY || s->filled >= c->need) {
		cache_take(c, s);
		return 0;
	}
	if (s->state == CACHE_PARTIAL) {
		/* the reads went on past what was asked: the next part */
		enum px_status st = ask(c, s);
		c->st = st == PX_OK || st == PX_EBUSY || st == PX_ESHUTDOWN ? st : PX_EDECLINED;
		c->filler = st == PX_OK;
		return c->filler;
	}
	if (s->fill_source != c->source) {
		/* another (identical) source's transfer: its bytes in are
		 * shared, but a reader waits only on its own source, whose
		 * stall is its session's to cut over */
		c->st = PX_EDECLINED;
		return 0;
	}
	return cache_wait(c, s);
}

enum px_status px_cache_read(struct px_session *sess, int which, size_t source,
			     const struct px_read_req *rq, uint64_t *held, int *how)
{
	struct px_core *core = sess->core;
	struct cread c = { .core = core, .sess = sess, .asset = sess->asset, .source = source,
			   .which = which, .rq = rq, .held = held, .how = how };

	/* a path source is read in place: nothing to cache */
	if (px_source_is_path(core, c.asset, source))
		return PX_EDECLINED;
	if (which == PX_CACHE_INDEX)
		atomic_store(&px_asset_rt(core, c.asset)->index_tried, 1);
	pthread_mutex_lock(&core->reads->cache_lock);
	/* an asset's slots exist once it is read: a library costs none */
	if (!px_asset_rt(core, c.asset)->slot &&
	    !(px_asset_rt(core, c.asset)->slot = calloc(PX_CACHE_SLOTS, sizeof(struct cache_slot)))) {
		pthread_mutex_unlock(&core->reads->cache_lock);
		return PX_EDECLINED;
	}
	slot_bounds(core, c.asset, which, rq->off, &c.start, &c.slen);
	c.need = rq->off + (int64_t)rq->len - c.start;
	struct cache_slot *s = &px_asset_rt(core, c.asset)->slot[which];
	if (rq->off < c.start || c.need > c.slen || c.slen > core->cfg->cache_size) {
		/* an index read outside the index slot: not the cache's */
		pthread_mutex_unlock(&core->reads->cache_lock);
		return PX_EDECLINED;
	}
	while (cache_step(&c, s))
		;
	if (c.filler || c.seen_fill)
		*how |= PX_CACHE_FILLED;
	pthread_mutex_unlock(&core->reads->cache_lock);
	if (c.resume)
		core->fetch.ops.resume(core->fetch.ops.impl, c.resume);
	if (c.cancel)
		core->fetch.ops.cancel(core->fetch.ops.impl, c.cancel);
	return c.st;
}

int px_cache_yield(struct px_core *core, uint64_t session)
{
	uint64_t ids[8];
	int n = 0;

	pthread_mutex_lock(&core->reads->cache_lock);
	for (size_t i = 0; i < px_cat(core)->nassets && n < 8; i++) {
		for (int k = 0; px_asset_rt(core, i)->slot && k < PX_CACHE_SLOTS && n < 8; k++) {
			struct cache_slot *s = &px_asset_rt(core, i)->slot[k];
			/* a head and tail fill: the head's, if neither waits */
			if (s->state == CACHE_FILLING && s->xid && s->owner == session &&
			    !s->waiting && !(s->peer && (k == 1 || s->peer->waiting)))
				ids[n++] = s->xid;
		}
	}
	pthread_mutex_unlock(&core->reads->cache_lock);
	/* each ends in f_done, which empties its slot for the next reader */
	for (int i = 0; i < n; i++)
		core->fetch.ops.cancel(core->fetch.ops.impl, ids[i]);
	return n;
}

int64_t px_cache_wake_at(struct px_core *core, size_t asset, int which)
{
	int64_t at = -1;
	pthread_mutex_lock(&core->reads->cache_lock);
	if (px_asset_rt(core, asset)->slot)
		at = px_asset_rt(core, asset)->slot[which].wake_at;
	pthread_mutex_unlock(&core->reads->cache_lock);
	return at;
}

int px_cache_holds(struct px_core *core, size_t asset, int which, size_t source, int64_t off,
		   int64_t len)
{
	int holds = 0;
	pthread_mutex_lock(&core->reads->cache_lock);
	const struct cache_slot *s = slot_of(core, asset, which);
	/* a filling slot holds what is in: a reader woken by the fill's last
	 * bytes may read across the slot's edge before the fill's end is told */
	if (s && s->state != CACHE_EMPTY && slot_serves(core, asset, s, source)) {
		int64_t end = s->start + (s->state == CACHE_READY ? s->len : s->filled);
		holds = off >= s->start && off + len <= end;
	}
	pthread_mutex_unlock(&core->reads->cache_lock);
	return holds;
}

/* Where slot which starts when it holds, or its running fill brings,
 * source's bytes; -1 otherwise. */
static int64_t slot_start(struct px_core *core, size_t asset, int which, size_t source)
{
	int64_t start = -1;
	pthread_mutex_lock(&core->reads->cache_lock);
	const struct cache_slot *s = slot_of(core, asset, which);
	if (s && s->state != CACHE_EMPTY && slot_serves(core, asset, s, source))
		start = s->start;
	pthread_mutex_unlock(&core->reads->cache_lock);
	return start;
}

int px_cache_may_serve(struct px_core *core, size_t asset, int which, size_t source)
{
	pthread_mutex_lock(&core->reads->cache_lock);
	const struct cache_slot *s = slot_of(core, asset, which);
	int may = s ? (s->state != CACHE_EMPTY ? slot_serves(core, asset, s, source)
					       : core->reads->disk && !s->disk_tried)
		    : core->reads->disk != NULL;
	pthread_mutex_unlock(&core->reads->cache_lock);
	return may;
}

int64_t px_cache_tail_start(struct px_core *core, size_t asset, size_t source)
{
	return slot_start(core, asset, PX_CACHE_TAIL, source);
}

int64_t px_cache_index_start(struct px_core *core, size_t asset, size_t source)
{
	/* the read path asks at every read of the middle: no lock until an
	 * index was ever read */
	if (!atomic_load(&px_asset_rt(core, asset)->index_tried))
		return -1;
	return slot_start(core, asset, PX_CACHE_INDEX, source);
}
