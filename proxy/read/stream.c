/*
 * stream.c - a session's open-ended transfer and its read-ahead window.
 *
 * When a session's reads run sequentially, it gets a stream: one request
 * "Range: bytes=OFF-LAST" (or up to the cached tail's start, when the tail
 * is cached or on its way: its bytes come from there) that keeps a window
 * of bytes ahead of the reader in a ring buffer. The transfer fills the window up to a fill limit ahead
 * of the reader; when it is full, on_data answers "pause" (libcurl holds
 * the chunk) and a reader resumes it once RESUME_ROOM bytes are free again.
 * The fill limit starts small and doubles while the reader keeps
 * up, so a short sequential run does not fetch megabytes it never reads.
 * It is also tied to the reader's pace (readahead_seconds): the transfer
 * runs at most what the readers took in the last readahead_seconds past
 * them (at least PACE_MIN), so a viewer of a small bitrate does not pull
 * the whole window minutes ahead of its playback. The pace is measured by
 * marks of how far the readers had got, one a tick by the core's clock,
 * the first a tick after the start (a player's burst at open and the
 * kernel's first read-ahead fall before it), over a span of at least
 * readahead_seconds (so that the kernel's read-ahead, a megabyte at a time,
 * counts for at most one step). Before the first mark the transfer runs at
 * most what the readers took since the start past them, so a frame grab
 * that reads a group of pictures and leaves earns no megabytes. A reader waiting for bytes always lets the
 * transfer run up to them (room()): the pace never starves a reader.
 *
 * The window keeps KEEP_BEHIND bytes behind the reader: the kernel's
 * read-ahead sends reads slightly out of order, and cutover will need the
 * bytes just before the cut to check the seam. A read before the kept
 * bytes, or further ahead than the kernel's read-ahead reaches past the
 * window (jump_ahead), is not the stream's: PX_EDECLINED, and the session
 * decides (a new stream, or a bounded read).
 * A reader pins its offset while it waits, so that readers further on (the
 * kernel sends a run's reads in parallel) cannot make the window drop the
 * bytes it waits for; a zero-copy reply keeps the pin until the bytes are
 * out (px_stream_read with a zero-copy request / px_stream_unpin).
 *
 * Memory: every window is reserved from one budget (readahead_budget)
 * when the stream starts; windows are smaller when the budget is short,
 * and a stream that cannot get the smallest window is not started.
 *
 * A failed transfer (reset, premature end, broken response, a stall) is
 * reported to the read that waits on it (PX_EFAILED), which takes the one
 * decision after its tiers (retry.c): a cutover, or a retry after a short
 * backoff, at most cfg->retries times in a row without a new byte; the
 * transfer then starts again at the first byte the window lacks
 * (px_stream_decided), and the bytes already in the window stay. Each
 * transfer carries a generation; the bytes and the end of a superseded
 * transfer are ignored. A cutover that moves the session
 * to a path source ends the stream (closed): its readers read the path.
 *
 * Parallel ranges: one connection of a CDN or debrid host often runs at a
 * capped speed, far below what the reader takes. When a reader keeps
 * waiting on a transfer that never pauses (STARVE_MS without the window
 * reaching its fill limit) and runs below CAPPED_RATE (faster, it is this
 * machine's CPU that holds it back, which more connections would only
 * share further), and the provider has a spare slot, the stream
 * turns parallel: its bytes ahead are split into parts of part_size()
 * bytes, each brought by a bounded range request of its own, written
 * into the ring at its offset; the window's end (rend) moves over the
 * parts in order as each first one completes. The part the reader needs
 * (parts[0]) takes the session's slot; the others are background work in
 * spare slots only (PX_XFER_SPARE): an open or another session's stream
 * cancels them, and their parts go back to wait for a slot. Up to
 * cfg->max_streams parts run while a reader waits, one when none does. A
 * part whose transfer fails goes through the same decision as the single
 * transfer: a cutover or a retry from the byte it reached. The
 * open-ended transfer running when the stream turns parallel brings the
 * first part and is cancelled at its end.
 *
 * Lifetime: the session holds one reference, each transfer one; the window
 * goes back to the budget with the last. Lock: st->lock only, never held
 * while calling the fetcher or sleeping.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cache.h"
#include "clock.h"
#include "context.h"
#include "health.h"
#include "ownprint.h"
#include "provider.h"
#include "rangeread.h"
#include "reads_i.h"
#include "request.h"
#include "retry.h"
#include "session.h"
#include "standby.h"
#include "stream.h"
#include "wait.h"
#include "log.h"

#define KEEP_BEHIND (2LL << 20)
#define WINDOW_MIN (8LL << 20)
#define WINDOW_MAX (32LL << 20)
#define FILL_START (2LL << 20)
#define JUMP_AHEAD (4LL << 20)  /* a forward jump this short waits for the stream... */
#define JUMP_BACK (4LL << 20)   /* a read this little behind the window is a straggler */
#define CHUNK_MAX (256LL << 10) /* the largest piece on_data gets (fetch.c's buffer) */
#define MAX_PINS 128            /* replies in flight straight from the window */
#define RESUME_ROOM (1LL << 20) /* a paused transfer goes on once this much is free */
#define STARVE_MS 500           /* a transfer that has not paused this long while
				 * a reader waits is the slower of the two... */
#define CAPPED_RATE (64LL << 20) /* ...and, below this many bytes a second, held
				 * back by its connection (a per-connection cap),
				 * not by this machine's CPU, which more
				 * connections would not help */
#define MAX_PARTS 32            /* parts ahead of the window's end */
#define PART_MIN (256LL << 10)
#define PART_MAX (4LL << 20)
#define PACE_MIN FILL_START     /* the least the pace lets the transfer run ahead */
#define PACE_MARKS 9            /* marks of the reader's pace; a tick apart... */
#define PACE_TICK_MS 1000       /* ...at least this, and an eighth of readahead_seconds */

/* ...or, when the kernel reads further ahead, as far as its read-ahead
 * reaches: a sync window and two async ones, and a read's worth */
static int64_t jump_ahead(const struct px_core *core)
{
	int64_t ra = atomic_load(&core->reads->kernel_ra);
	int64_t j = 3 * ra + (1LL << 20);
	if (j < JUMP_AHEAD)
		return JUMP_AHEAD;
	return j < WINDOW_MAX ? j : WINDOW_MAX;
}

void px_stream_set_kernel_readahead(struct px_core *core, int64_t bytes)
{
	atomic_store(&core->reads->kernel_ra, bytes > 0 ? bytes : 0);
}

/* A part of a parallel stream: bytes [from, end) that one range transfer
 * brings, of which [from, pos) are in the ring. */
struct part {
	uint64_t id;            /* stable while the array shifts */
	int64_t from, pos, end;
	uint64_t gen;           /* of its running transfer, 0: none */
	uint64_t xid;           /* that transfer's fetch id, 0 until known */
	size_t source;
	int failed;             /* its transfer ended early: err, detail */
	int stalled;            /* we ended it: no progress for stall_timeout */
	int deciding;           /* a reader is deciding on the failure */
	enum px_status err;
	char detail[160];
	_Atomic int64_t progress; /* its progress clock (px_progress_add, us) */
};

struct px_stream {
	struct px_core *core;
	struct px_session *sess; /* whose slots its transfers take */
	size_t asset;
	size_t source;          /* of the current transfer: the session's at its submit */
	int64_t size;           /* where it ends: the asset's size, or the
				 * cached tail's start (px_stream_start) */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	_Atomic int refs;

	unsigned char *ring;
	int64_t cap;            /* reserved from the budget */
	int64_t origin;         /* where the stream started */
	int64_t src_from;       /* [src_from, rend) came from `source` alone, unless
				 * par_since: parts ran since (they may have cut
				 * over on their own) */
	int par_since;
	int64_t rstart, rend;   /* bytes [rstart, rend) are in the ring */
	int64_t consumed;       /* readers have moved past this offset */
	int64_t want;           /* the furthest end a waiting reader needs */
	int64_t wake_at;        /* the nearest, INT64_MAX when none waits */
	int64_t fill;           /* the transfer may run this far past consumed */
	int64_t paced;          /* and at most this far, by the reader's pace
				 * (pace_note); INT64_MAX: not measured yet */
	int64_t started;        /* by the core's clock (ms), for the pace */
	int64_t mark_t[PACE_MARKS], mark_c[PACE_MARKS]; /* when, and consumed then */
	int nmarks, mark0;      /* marks held; the oldest */
	int64_t pins[MAX_PINS]; /* windows offsets replies are being sent from, -1: free */
	int npins;

	uint64_t gen;           /* the current transfer's generation */
	uint64_t xid;           /* its fetch id, 0 until submit returned */
	int paused;
	int ended;              /* the current transfer has ended */
	int stalled;            /* we ended it: no progress for stall_timeout */
	int capped;             /* it ended cleanly short of the end: a 206 that
				 * covers less than asked (an origin that caps
				 * its answers), not a failure */
	int capped_seen;        /* that was logged, once per stream */
	_Atomic int64_t progress; /* the transfer's progress clock (px_progress_add,
				 * us): bytes at stall_min_rate keep it at now */
	enum px_status err;
	char detail[200];
	int closed;

	int64_t last_pause;     /* when the transfer last paused or started (ms) */
	int64_t pause_rend;     /* rend then */
	int nwait;              /* readers waiting for bytes */
	/* parallel ranges (par): parts[0..nparts) cover [rend, next_off) in
	 * order, adjacent, and rend == parts[0].pos */
	int par;
	struct part parts[MAX_PARTS];
	int nparts;
	int64_t next_off;
	int nrun;               /* part transfers whose on_done has not come */
	uint64_t next_part;
	uint64_t open_gen;      /* the open-ended transfer bringing parts[0] */
	uint64_t open_xid;
	uint64_t cut_xid;       /* it passed its part's end: cancel it */
	int64_t par_next;       /* when to look for a spare slot again (ms) */
};

/* One transfer's callback context. */
struct sx {
	struct px_stream *st;
	uint64_t gen;
	int par;                /* it brings a part */
};

#define HUGE_PAGE (2LL << 20)

/*
 * A window is mapped on its own, aligned to 2 MiB and marked for huge
 * pages: every byte of a stream is copied into it and then pinned by the
 * kernel for the reply, and with 4 KiB pages the page walks of those two
 * cost 10-20% of the daemon's CPU on a sequential read (bench A/B).
 * Unmapped when the stream ends, so its memory goes back at once. Under
 * AddressSanitizer windows stay malloc'd, where overruns are caught.
 */
#if defined(__SANITIZE_ADDRESS__)
#define RING_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RING_MALLOC 1
#endif
#endif

#ifdef RING_MALLOC
static unsigned char *ring_alloc(int64_t cap)
{
	return malloc((size_t)cap);
}

static void ring_free(unsigned char *ring, int64_t cap)
{
	(void)cap;
	free(ring);
}
#else
static size_t ring_len(int64_t cap)
{
	size_t page = 4096;
	return ((size_t)cap + page - 1) & ~(page - 1);
}

static unsigned char *ring_alloc(int64_t cap)
{
	size_t want = ring_len(cap), len = want + (size_t)HUGE_PAGE;
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t at = ((uintptr_t)p + (uintptr_t)HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
	size_t head = at - (uintptr_t)p, tail = len - head - want;
	if (head)
		munmap(p, head);
	if (tail)
		munmap((unsigned char *)at + want, tail);
	/* best effort: without transparent huge pages it is plain memory */
	(void)madvise((void *)at, want, MADV_HUGEPAGE);
	return (unsigned char *)at;
}

static void ring_free(unsigned char *ring, int64_t cap)
{
	if (ring)
		munmap(ring, ring_len(cap));
}
#endif

void px_stream_ref(struct px_stream *st)
{
	atomic_fetch_add(&st->refs, 1);
}

void px_stream_unref(struct px_stream *st)
{
	if (atomic_fetch_sub(&st->refs, 1) != 1)
		return;
	ring_free(st->ring, st->cap);
	atomic_fetch_sub(&st->core->reads->ra_used, st->cap);
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* Reserves up to want bytes (at least min) of the read-ahead budget. */
static int64_t budget_take(struct px_core *core, int64_t want, int64_t min)
{
	int64_t used = atomic_load(&core->reads->ra_used);
	for (;;) {
		int64_t room = core->cfg->readahead_budget - used;
		/* share what is left: a new window takes at most a quarter of it */
		int64_t take = room / 4 < want ? room / 4 : want;
		if (take < min)
			take = room >= min ? min : 0;
		if (take == 0)
			return 0;
		if (atomic_compare_exchange_weak(&core->reads->ra_used, &used, used + take))
			return take;
	}
}

/* Lets go of the bytes more than KEEP_BEHIND behind the readers, but none
 * that a reply is being sent from. */
static void reclaim(struct px_stream *st)
{
	int64_t keep = st->consumed - KEEP_BEHIND;
	for (int i = 0; st->npins && i < MAX_PINS; i++)
		if (st->pins[i] >= 0 && st->pins[i] < keep)
			keep = st->pins[i];
	if (keep > st->rstart)
		st->rstart = keep < st->rend ? keep : st->rend;
}

/* How far past the readers the transfer may run: the fill limit, within
 * what the readers' pace allows. Lock held. */
static int64_t lead(const struct px_stream *st)
{
	return st->fill < st->paced ? st->fill : st->paced;
}

/*
 * After a read: marks how far the readers have got, a tick after the last
 * mark (the first a tick after the start), and sets what their pace lets
 * the transfer run ahead of them: what they took since the oldest mark
 * (before the first, since the start), scaled down to readahead_seconds once the marks span more, and never
 * less than PACE_MIN or two of the kernel's read-ahead (its next read must
 * not wait). Lock held.
 */
static void pace_note(struct px_stream *st)
{
	struct px_core *core = st->core;
	int64_t win = core->cfg->readahead_seconds * 1000LL;
	if (!win)
		return;
	int64_t now = core->now();
	int64_t tick = win / (PACE_MARKS - 1) > PACE_TICK_MS ? win / (PACE_MARKS - 1)
							      : PACE_TICK_MS;
	int64_t last = st->nmarks ? st->mark_t[(st->mark0 + st->nmarks - 1) % PACE_MARKS]
				  : st->started;
	if (now - last >= tick) {
		int at = (st->mark0 + st->nmarks) % PACE_MARKS;
		if (st->nmarks == PACE_MARKS)
			st->mark0 = (st->mark0 + 1) % PACE_MARKS;
		else
			st->nmarks++;
		st->mark_t[at] = now;
		st->mark_c[at] = st->consumed;
	}
	/* before the first mark, what they took since the start: a player's
	 * burst at open lets the transfer run as far, and a reader that took
	 * little (a frame grab: a group of pictures past the head, then it
	 * leaves) does not earn megabytes it never reads */
	int64_t span = 0, took = st->consumed - st->origin;
	if (st->nmarks) {
		span = now - st->mark_t[st->mark0];
		took = st->consumed - st->mark_c[st->mark0];
	}
	int64_t ahead = span > win ? (int64_t)((double)took * (double)win / (double)span) : took;
	int64_t least = 2 * atomic_load(&core->reads->kernel_ra);
	if (least < PACE_MIN)
		least = PACE_MIN;
	st->paced = ahead > least ? ahead : least;
}

/* How many more bytes the transfer may add now: up to the lead past the
 * readers, within the ring. While a reader waits for bytes beyond the
 * lead, whatever fits in the ring: a chunk does not end where the
 * reader's bytes end, and it cannot be split. */
static int64_t room(struct px_stream *st)
{
	int64_t by_fill = st->consumed + lead(st) - st->rend;
	int64_t by_cap = st->cap - (st->rend - st->rstart);
	if (st->want > st->rend)
		return by_cap;
	return by_fill < by_cap ? by_fill : by_cap;
}

/* Copies bytes at offset at into the ring. Lock held; the caller made sure
 * they fit beside the bytes kept. */
static void ring_put(struct px_stream *st, int64_t at, const void *buf, size_t len)
{
	int64_t pos = at % st->cap;
	size_t first = (size_t)(st->cap - pos) < len ? (size_t)(st->cap - pos) : len;
	memcpy(st->ring + pos, buf, first);
	memcpy(st->ring, (const unsigned char *)buf + first, len - first);
}

static struct part *part_by_gen(struct px_stream *st, uint64_t gen, int *idx)
{
	for (int i = 0; i < st->nparts; i++)
		if (st->parts[i].gen == gen) {
			*idx = i;
			return &st->parts[i];
		}
	return NULL;
}

static struct part *part_by_id(struct px_stream *st, uint64_t id)
{
	for (int i = 0; i < st->nparts; i++)
		if (st->parts[i].id == id)
			return &st->parts[i];
	return NULL;
}

/* Moves the window's end over the complete parts at the front and into
 * the first incomplete one. Lock held. */
static void par_advance(struct px_stream *st)
{
	int done = 0;
	while (done < st->nparts && st->parts[done].pos >= st->parts[done].end)
		done++;
	if (done) {
		/* a complete part's transfer may still be ending: its on_done
		 * finds no part and only counts it */
		memmove(st->parts, st->parts + done, (size_t)(st->nparts - done) * sizeof(st->parts[0]));
		st->nparts -= done;
	}
	st->rend = st->nparts ? st->parts[0].pos : st->next_off;
}

/* A parallel stream's bytes: into the ring at their part's place. Lock
 * held; returns what on_data returns. */
static int par_data(struct px_stream *st, uint64_t gen, int64_t off, const void *buf, size_t len)
{
	int i = 0;
	struct part *p = part_by_gen(st, gen, &i);
	if (!p || p->pos >= p->end) {
		/* the open-ended transfer past its part's end: paused until a
		 * reader cancels it (par_pump) */
		if (gen == st->open_gen) {
			st->cut_xid = st->open_xid;
			pthread_cond_broadcast(&st->cond);
			return 0;
		}
		return 1; /* superseded: it is being cancelled */
	}
	if (p->err != PX_OK)
		return 1; /* broken: its end decides */
	if (off != p->pos) {
		p->err = PX_EBADRESP;
		snprintf(p->detail, sizeof(p->detail), "bytes at %lld, expected %lld",
			 (long long)off, (long long)p->pos);
		return 1;
	}
	size_t n = (int64_t)len < p->end - p->pos ? len : (size_t)(p->end - p->pos);
	ring_put(st, p->pos, buf, n);
	p->pos += (int64_t)n;
	p->progress = px_progress_add(p->progress, n, st->core->cfg->stall_min_rate);
	st->progress = px_progress_add(st->progress, n, st->core->cfg->stall_min_rate);
	int complete = p->pos >= p->end;
	if (i == 0)
		par_advance(st);
	/* a waiting reader has its bytes, or a part's lane is free for the
	 * next one */
	if (st->rend >= st->wake_at || complete) {
		st->wake_at = INT64_MAX;
		pthread_cond_broadcast(&st->cond);
	}
	if (n < len) {
		st->cut_xid = st->open_xid; /* only the open-ended one runs past */
		return 0;
	}
	return 1;
}

/* A parallel stream's transfer ended. Lock held. */
static void par_done(struct px_stream *st, uint64_t gen, const struct px_fetch_result *res)
{
	int i;
	st->nrun--;
	if (gen == st->open_gen) {
		if (st->cut_xid == st->open_xid)
			st->cut_xid = 0;
		st->open_gen = st->open_xid = 0;
	}
	struct part *p = part_by_gen(st, gen, &i);
	if (p) {
		p->gen = p->xid = 0;
		if (p->pos < p->end) {
			if (p->stalled) {
				p->failed = 1;
				p->err = PX_ETIMEDOUT;
				snprintf(p->detail, sizeof(p->detail),
					 "stalled: no progress within stall_timeout");
			} else if (p->err != PX_OK) {
				p->failed = 1; /* a broken answer (par_data) */
			} else if (res->status == PX_ECANCELED) {
				/* preempted by playback, or ended by us: it
				 * waits for a slot again */
			} else if (res->status == PX_OK && res->http_status == 206 && res->bytes > 0) {
				/* a capped answer: the rest is asked for next */
			} else {
				p->failed = 1;
				p->err = res->status != PX_OK ? res->status : PX_ETRANSFER;
				if (res->status != PX_OK)
					snprintf(p->detail, sizeof(p->detail), "%s", res->detail);
				else
					snprintf(p->detail, sizeof(p->detail),
						 "transfer ended at byte %lld", (long long)p->pos);
			}
		}
	}
	pthread_cond_broadcast(&st->cond);
}

static int s_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct sx *x = ctx;
	struct px_stream *st = x->st;
	int took = 1;

	pthread_mutex_lock(&st->lock);
	if (st->closed)
		goto out; /* it is being cancelled */
	if (st->par) {
		took = par_data(st, x->gen, off, buf, len);
		goto out;
	}
	if (x->gen != st->gen)
		goto out; /* superseded: drop, it is being cancelled */
	if (off != st->rend) {
		/* the fetcher promises order; never store bytes at a guess */
		st->err = PX_EBADRESP;
		snprintf(st->detail, sizeof(st->detail), "bytes at %lld, expected %lld",
			 (long long)off, (long long)st->rend);
		goto out;
	}
	reclaim(st);
	if ((int64_t)len > room(st)) {
		st->paused = 1;
		st->last_pause = px_now_ms();
		st->pause_rend = st->rend;
		took = 0;
		goto out;
	}
	ring_put(st, st->rend, buf, len);
	st->rend += (int64_t)len;
	st->progress = px_progress_add(st->progress, len, st->core->cfg->stall_min_rate);
	/* wake the waiters once one of them has all its bytes, not at every
	 * chunk: with the kernel's read-ahead many wait at once */
	if (st->rend >= st->wake_at) {
		st->wake_at = INT64_MAX;
		pthread_cond_broadcast(&st->cond);
	}
out:
	pthread_mutex_unlock(&st->lock);
	return took;
}

static void s_done(void *ctx, const struct px_fetch_result *res)
{
	struct sx *x = ctx;
	struct px_stream *st = x->st;

	pthread_mutex_lock(&st->lock);
	if (x->par || (st->open_gen && x->gen == st->open_gen)) {
		par_done(st, x->gen, res);
	} else if (x->gen == st->gen) {
		st->ended = 1;
		st->paused = 0;
		if (st->err == PX_OK) {
			st->err = res->status;
			snprintf(st->detail, sizeof(st->detail), "%s", res->detail);
		}
		if (st->err == PX_OK && st->rend < st->size && res->http_status == 206 &&
		    res->bytes > 0) {
			/* a legal short answer: the reader asks for the rest at once */
			st->capped = 1;
		} else if (st->err == PX_OK && st->rend < st->size) {
			st->err = PX_ETRANSFER;
			snprintf(st->detail, sizeof(st->detail), "transfer ended at byte %lld",
				 (long long)st->rend);
		}
		pthread_cond_broadcast(&st->cond);
	}
	pthread_mutex_unlock(&st->lock);
	free(x);
	px_stream_unref(st);
}

/* Starts a transfer from st->rend. Called with the lock held; drops it
 * around the submit, which may wait (until deadline) for a slot. */
static enum px_status submit(struct px_stream *st, int64_t deadline)
{
	struct px_core *core = st->core;
	struct sx *x;
	uint64_t id = 0;

	if (px_source_is_path(core, st->asset, atomic_load(&st->sess->source))) {
		/* a cutover moved the session to a path source, which is read
		 * in place: this stream is over, its readers read directly */
		st->closed = 1;
		st->gen++;
		pthread_cond_broadcast(&st->cond);
		return PX_EDECLINED;
	}
	x = malloc(sizeof(*x));
	if (!x)
		return PX_ENOMEM;
	st->gen++;
	st->ended = 0;
	st->stalled = 0;
	st->capped = 0;
	st->err = PX_OK;
	st->detail[0] = '\0';
	st->paused = 0;
	st->xid = 0;
	st->last_pause = px_now_ms();
	st->progress = px_progress_start();
	st->pause_rend = st->rend;
	/* after a cutover, the session's new source */
	st->source = atomic_load(&st->sess->source);
	st->src_from = st->rend;
	st->par_since = 0;
	x->st = st;
	x->gen = st->gen;
	x->par = 0;
	atomic_fetch_add(&st->refs, 1);
	struct px_fetch_params fp = px_source_range(core, st->asset, st->source, st->rend,
						    st->size - st->rend);
	struct px_fetch_cb cb = { s_data, s_done, x };
	uint64_t gen = st->gen;
	pthread_mutex_unlock(&st->lock);
	/* x belongs to the transfer from here: it may end, and free x, before
	 * submit returns */
	enum px_status rc = px_xfer_submit(core,
					   px_cat(core)->assets[st->asset].sources[st->source].provider,
					   st->sess, 0, deadline, &fp, &cb, &id);
	pthread_mutex_lock(&st->lock);
	if (rc != PX_OK) {
		free(x); /* never started: no callback will come */
		atomic_fetch_sub(&st->refs, 1); /* the session still holds one */
		if (gen == st->gen) {
			st->ended = 1;
			st->err = rc;
			snprintf(st->detail, sizeof(st->detail), "could not start: %s",
				 px_strerror(rc));
		}
		return rc;
	}
	if (gen == st->gen && !st->closed) {
		st->xid = id;
		/* a stall counts from the slot: the wait for it in the submit
		 * is the provider's limit, not the source's silence; and so
		 * does a reader's starving (par_wanted), or a transfer that
		 * waited for a slot or a cutover would turn parallel before
		 * its first byte */
		st->progress = px_progress_start();
		st->last_pause = px_now_ms();
		st->pause_rend = st->rend;
	} else {
		/* superseded while we were submitting */
		pthread_mutex_unlock(&st->lock);
		core->fetch.ops.cancel(core->fetch.ops.impl, id);
		pthread_mutex_lock(&st->lock);
	}
	return PX_OK;
}

/* The size of a parallel stream's parts: the ring holds the bytes kept
 * behind the reader and max_streams + 1 parts ahead. */
static int64_t part_size(const struct px_stream *st)
{
	int n = st->core->cfg->max_streams;
	int64_t sz = (st->cap - KEEP_BEHIND - CHUNK_MAX) / (n + 1);
	sz &= ~((64LL << 10) - 1);
	return sz < PART_MIN ? PART_MIN : sz > PART_MAX ? PART_MAX : sz;
}

/* Cancels every transfer of the stream: the lock is dropped around the
 * cancels. Lock held. */
static void cancel_all(struct px_stream *st)
{
	uint64_t ids[MAX_PARTS + 2];
	int n = 0;
	if (!st->ended && st->xid)
		ids[n++] = st->xid;
	if (st->open_xid)
		ids[n++] = st->open_xid;
	for (int i = 0; i < st->nparts; i++)
		if (st->parts[i].xid)
			ids[n++] = st->parts[i].xid;
	if (!n)
		return;
	pthread_mutex_unlock(&st->lock);
	for (int i = 0; i < n; i++)
		st->core->fetch.ops.cancel(st->core->fetch.ops.impl, ids[i]);
	pthread_mutex_lock(&st->lock);
}

/* Whether the stream should turn parallel: a reader waits on a transfer
 * that has not paused for STARVE_MS and brought less than CAPPED_RATE
 * meanwhile, and the rest of the asset is worth splitting. Lock held. */
static int par_wanted(const struct px_stream *st, int64_t now)
{
	int64_t ms = now - st->last_pause;
	return st->core->cfg->max_streams > 1 && !st->par && !st->closed && st->xid &&
	       !st->ended && !st->paused && ms >= STARVE_MS && now >= st->par_next &&
	       (st->rend - st->pause_rend) * 1000 / ms < CAPPED_RATE &&
	       st->size - st->rend > 2 * part_size(st);
}

/* Turns the stream parallel: its running transfer brings the first part
 * and is cancelled at its end. Lock held. */
static void par_begin(struct px_stream *st)
{
	int64_t e = st->rend + part_size(st);
	struct part *p = &st->parts[0];
	memset(p, 0, sizeof(*p));
	p->id = ++st->next_part;
	p->from = p->pos = st->rend;
	p->end = e < st->size ? e : st->size;
	p->gen = st->gen;
	p->xid = st->xid;
	p->source = st->source;
	p->progress = st->progress;
	st->par_since = 1;
	st->nparts = 1;
	st->next_off = p->end;
	st->nrun = 1;
	st->open_gen = st->gen;
	st->open_xid = st->xid;
	st->xid = 0;
	st->par = 1;
	st->core->reads->n_par_streams++;
	px_debug("stream", "%s: the reader outruns one transfer at %lld: parallel ranges "
		 "of %lld KiB", st->sess->who, (long long)st->rend,
		 (long long)(part_size(st) >> 10));
}

/* The bytes just before parts[i]'s position that the ring holds, for a
 * cutover's seam check. Lock held. */
static size_t part_seam(struct px_stream *st, int i, unsigned char out[4096])
{
	const struct part *p = &st->parts[i];
	int64_t lo = i == 0 ? st->rstart : p->from;
	int64_t n = p->pos - lo < 4096 ? p->pos - lo : 4096;
	for (int64_t k = 0; k < n; k++)
		out[k] = st->ring[(p->pos - n + k) % st->cap];
	return n > 0 ? (size_t)n : 0;
}

/* The first failed part no reader is deciding on, or -1. Lock held. */
static int par_failed(const struct px_stream *st)
{
	for (int i = 0; i < st->nparts; i++)
		if (st->parts[i].failed && !st->parts[i].deciding)
			return i;
	return -1;
}

/* Reports failed part i to the waiting read (PX_EFAILED): the one
 * decision after the read's tiers (retry.c) is taken on it as on a single
 * transfer's failure, and px_stream_decided() lets the part go on from
 * the byte it reached, or not. Until then no other reader reports it.
 * Lock held. */
static enum px_status par_report(struct px_stream *st, int i, struct px_failed *fd)
{
	struct part *p = &st->parts[i];
	px_failed_set(fd, p->source, p->pos, p->err, p->stalled, p->detail);
	fd->f.nseam = part_seam(st, i, fd->seam);
	fd->st = st;
	fd->part = 1;
	fd->token = p->id;
	p->deciding = 1;
	return PX_EFAILED;
}

/* The part to start a transfer for: one that has none, else a new one at
 * the end if a lane is free and the ring has room for it (ahead of the
 * fill limit only for a starving reader). -1: none now. Lock held. */
static int par_pick(struct px_stream *st, int starving)
{
	int target = starving ? st->core->cfg->max_streams : 1;
	for (int i = 0; i < st->nparts; i++)
		if (!st->parts[i].gen && !st->parts[i].failed && st->parts[i].pos < st->parts[i].end)
			return i > 0 && st->nrun >= target ? -1 : i;
	int64_t e = st->next_off + part_size(st);
	if (e > st->size)
		e = st->size;
	reclaim(st);
	if (st->nrun >= target || st->next_off >= st->size || st->nparts == MAX_PARTS ||
	    e - st->rstart > st->cap || (!starving && st->next_off >= st->consumed + lead(st)))
		return -1;
	struct part *n = &st->parts[st->nparts];
	memset(n, 0, sizeof(*n));
	n->id = ++st->next_part;
	n->from = n->pos = st->next_off;
	n->end = e;
	st->next_off = e;
	return st->nparts++;
}

/* Starts part pick's transfer from source: parts[0] in the session's slot
 * (waiting until deadline for it), the others in spare slots only. Lock
 * held; dropped around the submit. *stop: the pump ends now, with the
 * status returned (no slot: the part waits for the next turn). */
static enum px_status par_submit(struct px_stream *st, int pick, size_t source,
				 int64_t deadline, int *stop)
{
	struct px_core *core = st->core;
	struct part *p = &st->parts[pick];
	struct sx *x = malloc(sizeof(*x));
	*stop = 1;
	if (!x)
		return pick == 0 ? PX_ENOMEM : PX_OK;
	int bg = pick != 0;
	p->gen = ++st->gen;
	p->xid = 0;
	p->source = source;
	p->err = PX_OK;
	p->stalled = 0;
	p->progress = px_progress_start();
	*x = (struct sx){ st, p->gen, 1 };
	atomic_fetch_add(&st->refs, 1);
	st->nrun++;
	uint64_t pid = p->id, gen = p->gen, id = 0;
	struct px_fetch_params fp = px_source_range(core, st->asset, source, p->pos,
						    p->end - p->pos);
	struct px_fetch_cb cb = { s_data, s_done, x };
	pthread_mutex_unlock(&st->lock);
	enum px_status rc = px_xfer_submit(core,
					   px_cat(core)->assets[st->asset].sources[source].provider,
					   st->sess, bg ? PX_XFER_SPARE : 0, deadline, &fp, &cb, &id);
	pthread_mutex_lock(&st->lock);
	p = part_by_id(st, pid);
	if (rc != PX_OK) {
		free(x); /* never started: no callback will come */
		atomic_fetch_sub(&st->refs, 1);
		st->nrun--;
		if (p && p->gen == gen)
			p->gen = 0;
		return bg ? PX_OK : rc;
	}
	*stop = 0;
	core->reads->n_parts++;
	if (p && p->gen == gen && !st->closed) {
		p->xid = id;
		p->progress = px_progress_start(); /* a stall counts from the slot */
	} else {
		/* ended already, or the stream closed meanwhile */
		px_wait_cancel(core, &st->lock, id);
	}
	return PX_OK;
}

/*
 * Runs a parallel stream's parts: cancels the open-ended transfer past its
 * part, reports a failed part to the waiting read (into fd, PX_EFAILED;
 * fd NULL: leave it to a waiting reader), and starts transfers for parts
 * that have none, new parts ahead of them while a reader starves (up to
 * max_streams; one otherwise, within the fill limit). Lock held; dropped
 * around cancels and submits. PX_OK, or the status the waiting read
 * fails with.
 */
static enum px_status par_pump(struct px_stream *st, int starving, int64_t deadline,
			       struct px_failed *fd)
{
	struct px_core *core = st->core;
	for (int round = 0; round < 4 * MAX_PARTS; round++) {
		if (st->closed)
			return PX_OK;
		if (st->cut_xid) {
			uint64_t id = st->cut_xid;
			st->cut_xid = 0;
			px_wait_cancel(core, &st->lock, id);
			continue;
		}
		int i = fd ? par_failed(st) : -1;
		if (i >= 0)
			return par_report(st, i, fd);
		size_t source = atomic_load(&st->sess->source);
		if (px_source_is_path(core, st->asset, source)) {
			/* a cutover moved the session to a path source: the
			 * stream is over, its readers read the path */
			st->closed = 1;
			st->gen++;
			pthread_cond_broadcast(&st->cond);
			cancel_all(st);
			return PX_OK;
		}
		int pick = par_pick(st, starving), stop;
		if (pick < 0)
			return PX_OK;
		enum px_status rc = par_submit(st, pick, source, deadline, &stop);
		if (stop)
			return rc;
	}
	return PX_OK;
}

enum px_status px_stream_start(struct px_core *core, struct px_session *sess, size_t asset,
			       int64_t off, int64_t first_fill, int64_t deadline,
			       struct px_stream **out)
{
	int64_t size = px_asset_rt(core, asset)->size;
	/* the cached tail (or the fill bringing it) serves its bytes: the
	 * stream ends where it starts, not at the asset's end */
	int64_t tail = px_cache_tail_start(core, asset, atomic_load(&sess->source));
	if (tail > off && tail < size)
		size = tail;
	int64_t want = size - off + KEEP_BEHIND;
	if (want > WINDOW_MAX)
		want = WINDOW_MAX;
	int64_t cap = budget_take(core, want < WINDOW_MIN ? WINDOW_MIN : want, WINDOW_MIN);
	struct px_stream *st;

	*out = NULL;
	if (!cap)
		return PX_ENOMEM;
	st = calloc(1, sizeof(*st));
	if (st)
		st->ring = ring_alloc(cap);
	if (!st || !st->ring) {
		if (st)
			free(st);
		atomic_fetch_sub(&core->reads->ra_used, cap);
		return PX_ENOMEM;
	}
	st->core = core;
	st->sess = sess;
	st->asset = asset;
	st->source = atomic_load(&sess->source);
	st->size = size;
	st->cap = cap;
	st->origin = st->rstart = st->rend = st->consumed = st->src_from = off;
	st->wake_at = INT64_MAX;
	st->fill = first_fill > 0 ? first_fill : FILL_START;
	st->paced = INT64_MAX;
	st->started = core->now();
	if (st->fill > cap - KEEP_BEHIND)
		st->fill = cap - KEEP_BEHIND;
	st->refs = 1;
	for (int i = 0; i < MAX_PINS; i++)
		st->pins[i] = -1;
	pthread_mutex_init(&st->lock, NULL);
	px_cond_init_mono(&st->cond);
	core->reads->n_streams++;
	pthread_mutex_lock(&st->lock);
	enum px_status rc = submit(st, deadline);
	pthread_mutex_unlock(&st->lock);
	if (rc != PX_OK) {
		px_stream_unref(st);
		return rc;
	}
	*out = st;
	return PX_OK;
}

void px_stream_close(struct px_stream *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	st->closed = 1;
	st->gen++;
	pthread_cond_broadcast(&st->cond);
	cancel_all(st);
	pthread_mutex_unlock(&st->lock);
	px_stream_unref(st);
}

int px_stream_closed(struct px_stream *st)
{
	pthread_mutex_lock(&st->lock);
	int closed = st->closed;
	pthread_mutex_unlock(&st->lock);
	return closed;
}

int px_stream_idle(struct px_stream *st, int unread)
{
	pthread_mutex_lock(&st->lock);
	int idle = !st->closed && !st->ended && st->npins == 0 &&
		   ((!st->par && st->paused) || unread);
	pthread_mutex_unlock(&st->lock);
	return idle;
}

/* After a reader took bytes: grow the fill limit while the reader keeps up,
 * note its pace, and resume a paused transfer once RESUME_ROOM is free, or
 * once a whole chunk fits while a reader waits (less would only pause it
 * again). Lock held; returns the id to resume (0: none) for after
 * unlocking. */
static uint64_t after_read(struct px_stream *st, int64_t end)
{
	if (end > st->consumed)
		st->consumed = end;
	pace_note(st);
	if (st->consumed - st->origin > st->fill && st->fill < st->cap - KEEP_BEHIND) {
		st->fill *= 2;
		if (st->fill > st->cap - KEEP_BEHIND)
			st->fill = st->cap - KEEP_BEHIND;
	}
	if (!st->paused || st->ended || !st->xid)
		return 0;
	reclaim(st);
	/* resume when a good part is free, or when a waiting reader needs it */
	int64_t r = room(st);
	if (r < RESUME_ROOM && !(st->want > st->rend && r >= CHUNK_MAX))
		return 0;
	st->paused = 0;
	st->progress = px_progress_start(); /* a stall counts from the resume */
	return st->xid;
}

void px_stream_unpin(struct px_stream *st, int pin)
{
	uint64_t resume;
	pthread_mutex_lock(&st->lock);
	st->pins[pin] = -1;
	st->npins--;
	/* the space may be what a paused transfer waits for */
	resume = after_read(st, st->consumed);
	pthread_mutex_unlock(&st->lock);
	if (resume)
		st->core->fetch.ops.resume(st->core->fetch.ops.impl, resume);
	px_stream_unref(st);
}

/*
 * The failed source's bytes the window holds, into its own fingerprint
 * (px_own_note): the samples there the reader has not reached are its
 * bytes as much as those it read, and a cutover judges a standby against
 * them (one that differs just ahead of the reader; scenario seed 1269).
 * Only bytes one transfer of that source brought. st->lock held.
 */
static void note_window(struct px_stream *st)
{
	int64_t from = st->rstart > st->src_from ? st->rstart : st->src_from, n = st->rend - from;
	int64_t a = st->cap > 0 ? from % st->cap : 0;
	struct iovec iov[2];
	int cnt = 1;
	long hit;
	if (st->par_since || n <= 0)
		return;
	iov[0] = (struct iovec){ st->ring + a, (size_t)(a + n <= st->cap ? n : st->cap - a) };
	if (a + n > st->cap) {
		iov[1] = (struct iovec){ st->ring, (size_t)(n - (st->cap - a)) };
		cnt = 2;
	}
	px_own_note(st->core, st->asset, st->source, from, iov, cnt, &hit);
}

/* The bytes just before the window's end, for a cutover's seam check.
 * Lock held. */
static size_t seam_before_end(struct px_stream *st, unsigned char out[4096])
{
	int64_t n = st->rend - st->rstart < 4096 ? st->rend - st->rstart : 4096;
	for (int64_t i = 0; i < n; i++)
		out[i] = st->ring[(st->rend - n + i) % st->cap];
	return (size_t)n;
}

/* Whether [off, end) is the stream's to serve. Declined (0), *behind says
 * a straggler of this run, or the kernel's read-ahead too far for the ring
 * beside the kept bytes (read it directly, the stream goes on); else a
 * jump. Lock held. */
static int admits(struct px_stream *st, int64_t off, int64_t end, int *behind)
{
	/* a little behind: a straggler of this run; far behind: a jump */
	*behind = (off < st->rstart && off >= st->rstart - JUMP_BACK) || st->closed;
	/* too far ahead: it would wait for bytes nobody asked for, or not fit
	 * in the ring beside the bytes kept behind the readers (and the last
	 * chunk, which may run past the read) */
	int64_t keep = st->consumed - KEEP_BEHIND > st->rstart ? st->consumed - KEEP_BEHIND
							       : st->rstart;
	int64_t ahead = jump_ahead(st->core);
	if (end > st->size)
		return 0; /* past where it ends (the cached tail's start) */
	if (!st->closed && off >= st->rstart && off <= st->rend + ahead &&
	    end + CHUNK_MAX - keep <= st->cap)
		return 1;
	if (!*behind && !st->closed && off >= st->rstart && off <= st->rend + ahead)
		*behind = 1;
	return 0;
}

/* Pins off while its reader waits, so that readers further on (the kernel
 * sends a run's reads in parallel) cannot make the window drop the bytes
 * it waits for. -1: no pin free. Lock held. */
static int pin_take(struct px_stream *st, int64_t off)
{
	if (st->npins >= MAX_PINS)
		return -1;
	int pin = 0;
	while (st->pins[pin] >= 0)
		pin++;
	st->pins[pin] = off;
	st->npins++;
	return pin;
}

/* The read's bytes, all in the ring: left there for a zero-copy reply
 * (rq->zc and a pin, which then stays until px_stream_unpin), else copied.
 * Lock held; returns the transfer to resume (after_read). */
static uint64_t take(struct px_stream *st, const struct px_read_req *rq, int *mypin)
{
	int64_t pos = rq->off % st->cap;
	size_t len = rq->len;
	size_t first = (size_t)(st->cap - pos) < len ? (size_t)(st->cap - pos) : len;
	struct px_zc *zc = rq->zc;
	if (zc && *mypin >= 0) {
		zc->pin = *mypin;
		*mypin = -1;
		atomic_fetch_add(&st->refs, 1); /* dropped by unpin */
		zc->st = st;
		zc->iov[0] = (struct iovec){ st->ring + pos, first };
		zc->iov[1] = (struct iovec){ st->ring, len - first };
		zc->iovcnt = len - first ? 2 : 1;
	} else {
		memcpy(rq->buf, st->ring + pos, first);
		memcpy(rq->buf + first, st->ring, len - first);
	}
	return after_read(st, rq->off + (int64_t)len);
}

/* A reader starts waiting for bytes: counted once per read. Lock held. */
static void note_wait(struct px_stream *st, int64_t *waited)
{
	if (!*waited) {
		*waited = px_now_us();
		st->core->reads->n_stream_waits++;
	}
}

/* The stream's transfer starts again where the window ends. Lock held;
 * dropped around the submit. */
static enum px_status restart(struct px_stream *st, int64_t deadline)
{
	st->core->reads->n_stream_restarts++;
	if (submit(st, deadline) != PX_OK && st->ended && !st->closed)
		return st->err;
	return PX_OK;
}

/* The single transfer ended before the read's bytes: a failure goes to
 * the read (into fd, PX_EFAILED) for the one decision after its tiers
 * (retry.c), and px_stream_decided() restarts it where the window ends;
 * an idle end (cancelled to pause, a source that answers in parts)
 * restarts at once. Lock held; dropped around the submit. PX_OK: look
 * again. */
static enum px_status restart_ended(struct px_stream *st, struct px_failed *fd,
				    const struct px_read_req *rq)
{
	if (st->stalled) {
		st->err = PX_ETIMEDOUT;
		snprintf(st->detail, sizeof(st->detail), "stalled: no progress within stall_timeout");
	}
	int idle = st->err == PX_ECANCELED;
	if (st->capped && st->err == PX_OK) {
		idle = 1;
		if (!st->capped_seen)
			px_info("stream", "%s: %s answers in parts (%lld bytes so far): asking for "
				"the rest as each ends", rq->who,
				px_cat(st->core)->assets[st->asset].sources[st->source].shown,
				(long long)(st->rend - st->origin));
		st->capped_seen = 1;
	}
	if (!idle) {
		/* a standby takes over where the window ends, or the source is
		 * tried again after a backoff, or the read fails: decided
		 * after the tiers */
		px_failed_set(fd, st->source, st->rend, st->err, st->stalled, st->detail);
		fd->f.nseam = seam_before_end(st, fd->seam);
		fd->st = st;
		fd->token = st->gen;
		note_window(st);
		return PX_EFAILED;
	}
	return restart(st, rq->deadline);
}

enum px_status px_stream_decided(const struct px_failed *fd, enum px_status next,
				 int64_t deadline)
{
	struct px_stream *st = fd->st;
	pthread_mutex_lock(&st->lock);
	if (fd->part) {
		struct part *p = part_by_id(st, fd->token);
		if (p) {
			p->deciding = 0;
			if (next == PX_OK) {
				p->failed = p->stalled = 0;
				p->err = PX_OK;
			}
		}
		if (next == PX_OK)
			st->core->reads->n_stream_restarts++;
		/* a reader that waits on it looks again */
		pthread_cond_broadcast(&st->cond);
	} else if (fd->token != st->gen) {
		next = PX_OK; /* another reader restarted it meanwhile: look again */
	} else if (next == PX_OK) {
		next = restart(st, deadline);
	}
	pthread_mutex_unlock(&st->lock);
	return next;
}

/* A reader of a parallel stream waits for its bytes: it starts what the
 * parts need, then waits, cancelling a first part that stalls (its end
 * fails it). Lock held. PX_OK: look again. */
static enum px_status wait_par(struct px_stream *st, struct px_failed *fd,
			       const struct px_read_req *rq, int64_t end, int64_t *waited)
{
	struct px_wait wt = { &st->lock, &st->cond, rq->deadline, st->core->cfg->stall_timeout_ms };
	enum px_status rc = par_pump(st, 1, rq->deadline, fd);
	if (rc != PX_OK || end <= st->rend || st->closed)
		return rc;
	/* a part failed while par_pump had let go of the lock (a submit): its
	 * wakeup came before this wait, which would watch no transfer until
	 * the deadline. Decide on it first */
	if (par_failed(st) >= 0)
		return PX_OK;
	if (end > st->want)
		st->want = end;
	note_wait(st, waited);
	if (px_now_ms() >= rq->deadline)
		return PX_ETIMEDOUT;
	struct part *p0 = st->nparts ? &st->parts[0] : NULL;
	int watch = p0 && p0->xid && !p0->stalled;
	if (end < st->wake_at)
		st->wake_at = end;
	st->nwait++;
	enum px_wait_outcome o = px_wait_bytes(&wt, NULL, watch ? &p0->progress : NULL);
	st->nwait--;
	/* the parts may have moved while we waited: the first one now */
	p0 = st->nparts ? &st->parts[0] : NULL;
	if (o == PX_WAIT_STALLED && p0 && p0->xid && !p0->stalled &&
	    px_now_ms() >= px_progress_stall_at(p0->progress, st->core->cfg->stall_timeout_ms)) {
		p0->stalled = 1;
		px_wait_cancel(st->core, &st->lock, p0->xid);
	}
	return PX_OK;
}

/* A reader of the single transfer waits for its bytes: it resumes a paused
 * transfer that has room, turns the stream parallel when the transfer is
 * the slower of the two, and cancels a transfer that stalls (its end is
 * then reported, restart_ended). Lock held. PX_OK: look again. */
static enum px_status wait_single(struct px_stream *st, const struct px_read_req *rq,
				  int64_t end, int64_t *waited)
{
	struct px_core *core = st->core;
	struct px_wait wt = { &st->lock, &st->cond, rq->deadline, core->cfg->stall_timeout_ms };
	if (end > st->want)
		st->want = end;
	uint64_t id = after_read(st, st->consumed);
	if (id) {
		pthread_mutex_unlock(&st->lock);
		core->fetch.ops.resume(core->fetch.ops.impl, id);
		pthread_mutex_lock(&st->lock);
		return PX_OK;
	}
	/* a transfer slower than its reader: more of them, if the provider
	 * has a slot to spare (asked without our lock) */
	if (par_wanted(st, px_now_ms())) {
		size_t prov = px_cat(core)->assets[st->asset].sources[st->source].provider;
		pthread_mutex_unlock(&st->lock);
		int spare = px_provider_spare(core, prov);
		pthread_mutex_lock(&st->lock);
		if (spare > 0 && par_wanted(st, px_now_ms())) {
			par_begin(st);
			return PX_OK;
		}
		st->par_next = px_now_ms() + STARVE_MS;
	}
	note_wait(st, waited);
	if (px_now_ms() >= rq->deadline)
		return PX_ETIMEDOUT;
	if (end < st->wake_at)
		st->wake_at = end;
	/* the transfer may have ended while the spare slot was asked for
	 * without our lock: its wakeup came before this wait */
	enum px_wait_outcome o = px_wait_bytes(&wt, &st->ended, &st->progress);
	if (o == PX_WAIT_STALLED && st->rend < end && !st->ended && !st->paused && st->xid) {
		/* stalled: end the transfer; restart_ended cuts over */
		st->stalled = 1;
		px_wait_cancel(core, &st->lock, st->xid);
	}
	return PX_OK;
}

/* A read's end: its wait counted, its pin (unless a reply keeps it) let
 * go, and a parallel stream's next parts started as the reader moves on
 * (without waiting for a slot; failures are left to a waiting reader).
 * Unlocks. */
static enum px_status read_end(struct px_stream *st, enum px_status rc,
			       int64_t waited, int mypin, uint64_t resume)
{
	if (waited)
		st->core->reads->stream_wait_us += (uint64_t)(px_now_us() - waited);
	if (mypin >= 0) {
		st->pins[mypin] = -1;
		st->npins--;
		if (!resume)
			resume = after_read(st, st->consumed);
	}
	if (st->par && rc == PX_OK)
		(void)par_pump(st, st->nwait > 0, px_now_ms(), NULL);
	pthread_mutex_unlock(&st->lock);
	if (resume)
		st->core->fetch.ops.resume(st->core->fetch.ops.impl, resume);
	return rc;
}

enum px_status px_stream_read(struct px_stream *st, const struct px_read_req *rq, int *behind,
			      struct px_failed *fd)
{
	int64_t end = rq->off + (int64_t)rq->len;
	enum px_status rc = PX_OK;
	uint64_t resume = 0;
	int64_t waited = 0;     /* when this read began to wait for bytes */

	pthread_mutex_lock(&st->lock);
	if (!admits(st, rq->off, end, behind)) {
		pthread_mutex_unlock(&st->lock);
		return PX_EDECLINED;
	}
	int mypin = pin_take(st, rq->off);
	if (rq->zc)
		rq->zc->iovcnt = 0;
	while (rc == PX_OK) {
		if (end <= st->rend && rq->off >= st->rstart) {
			resume = take(st, rq, &mypin);
			break;
		}
		if (end <= st->rend || st->closed) {
			/* rstart moved while we waited without a pin (the run
			 * went on without us), or another read of the session
			 * jumped and ended the stream under us: these bytes are
			 * still owed, and a direct read brings them */
			*behind = 1;
			rc = PX_EDECLINED;
		} else if (st->par) {
			rc = wait_par(st, fd, rq, end, &waited);
		} else if (st->ended) {
			rc = restart_ended(st, fd, rq);
		} else {
			rc = wait_single(st, rq, end, &waited);
		}
	}
	return read_end(st, rc, waited, mypin, resume);
}

size_t px_stream_bytes_before(struct px_stream *st, int64_t pos, unsigned char *out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&st->lock);
	if (pos <= st->rend && pos > st->rstart && !st->closed) {
		int64_t have = pos - st->rstart;
		n = have < (int64_t)max ? (size_t)have : max;
		for (size_t i = 0; i < n; i++)
			out[i] = st->ring[(pos - (int64_t)n + (int64_t)i) % st->cap];
	}
	pthread_mutex_unlock(&st->lock);
	return n;
}
