/*
 * stream.c - a session's open-ended transfer and its read-ahead window.
 *
 * When a session's reads run sequentially, it gets a stream: one request
 * "Range: bytes=OFF-LAST" that keeps a window of bytes ahead of the reader
 * in a ring buffer. The transfer fills the window up to a fill limit ahead
 * of the reader; when it is full, on_data answers "pause" (libcurl holds
 * the chunk) and a reader resumes it once RESUME_ROOM bytes are free again.
 * The fill limit starts small and doubles while the reader keeps
 * up, so a short sequential run does not fetch megabytes it never reads.
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
 * out (px_stream_read_pinned / px_stream_unpin).
 *
 * Memory: every window is reserved from one budget (readahead_budget)
 * when the stream starts; windows are smaller when the budget is short,
 * and a stream that cannot get the smallest window is not started.
 *
 * A failed transfer (reset, premature end, broken response) is restarted
 * at the first byte the window lacks, at most cfg->retries times in a row
 * without a new byte, with a short backoff: the bytes already in the
 * window stay. Each transfer carries a generation; the bytes and the end
 * of a superseded transfer are ignored. A cutover that moves the session
 * to a path source ends the stream (closed): its readers read the path.
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

#include "clock.h"
#include "context.h"
#include "health.h"
#include "provider.h"
#include "rangeread.h"
#include "retry.h"
#include "session.h"
#include "standby.h"
#include "stream.h"
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

/* ...or, when the kernel reads further ahead, as far as its read-ahead
 * reaches: a sync window and two async ones, and a read's worth */
static int64_t jump_ahead(const struct px_core *core)
{
	int64_t ra = atomic_load(&core->kernel_ra);
	int64_t j = 3 * ra + (1LL << 20);
	if (j < JUMP_AHEAD)
		return JUMP_AHEAD;
	return j < WINDOW_MAX ? j : WINDOW_MAX;
}

void px_stream_set_kernel_readahead(struct px_core *core, int64_t bytes)
{
	atomic_store(&core->kernel_ra, bytes > 0 ? bytes : 0);
}

struct px_stream {
	struct px_core *core;
	struct px_session *sess; /* whose slots its transfers take */
	size_t asset;
	size_t source;          /* of the current transfer: the session's at its submit */
	int64_t size;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	_Atomic int refs;

	unsigned char *ring;
	int64_t cap;            /* reserved from the budget */
	int64_t origin;         /* where the stream started */
	int64_t rstart, rend;   /* bytes [rstart, rend) are in the ring */
	int64_t consumed;       /* readers have moved past this offset */
	int64_t want;           /* the furthest end a waiting reader needs */
	int64_t wake_at;        /* the nearest, INT64_MAX when none waits */
	int64_t fill;           /* the transfer may run this far past consumed */
	int64_t pins[MAX_PINS]; /* windows offsets replies are being sent from, -1: free */
	int npins;

	uint64_t gen;           /* the current transfer's generation */
	uint64_t xid;           /* its fetch id, 0 until submit returned */
	int paused;
	int ended;              /* the current transfer has ended */
	int stalled;            /* we ended it: no byte for stall_timeout */
	int capped;             /* it ended cleanly short of the end: a 206 that
				 * covers less than asked (an origin that caps
				 * its answers), not a failure */
	int capped_seen;        /* that was logged, once per stream */
	int64_t last_byte;      /* when bytes last came (ms) */
	enum px_status err;
	char detail[200];
	int closed;
};

/* One transfer's callback context. */
struct sx {
	struct px_stream *st;
	uint64_t gen;
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
	atomic_fetch_sub(&st->core->ra_used, st->cap);
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* Reserves up to want bytes (at least min) of the read-ahead budget. */
static int64_t budget_take(struct px_core *core, int64_t want, int64_t min)
{
	int64_t used = atomic_load(&core->ra_used);
	for (;;) {
		int64_t room = core->cfg->readahead_budget - used;
		/* share what is left: a new window takes at most a quarter of it */
		int64_t take = room / 4 < want ? room / 4 : want;
		if (take < min)
			take = room >= min ? min : 0;
		if (take == 0)
			return 0;
		if (atomic_compare_exchange_weak(&core->ra_used, &used, used + take))
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

/* How many more bytes the transfer may add now: up to the fill limit past
 * the readers, within the ring. While a reader waits for bytes beyond the
 * fill limit, whatever fits in the ring: a chunk does not end where the
 * reader's bytes end, and it cannot be split. */
static int64_t room(struct px_stream *st)
{
	int64_t by_fill = st->consumed + st->fill - st->rend;
	int64_t by_cap = st->cap - (st->rend - st->rstart);
	if (st->want > st->rend)
		return by_cap;
	return by_fill < by_cap ? by_fill : by_cap;
}

static int s_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct sx *x = ctx;
	struct px_stream *st = x->st;
	int took = 1;

	pthread_mutex_lock(&st->lock);
	if (x->gen != st->gen || st->closed)
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
		took = 0;
		goto out;
	}
	int64_t pos = st->rend % st->cap;
	size_t first = (size_t)(st->cap - pos) < len ? (size_t)(st->cap - pos) : len;
	memcpy(st->ring + pos, buf, first);
	memcpy(st->ring, (const unsigned char *)buf + first, len - first);
	st->rend += (int64_t)len;
	st->last_byte = px_now_ms();
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
	if (x->gen == st->gen) {
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
	st->last_byte = px_now_ms();
	/* after a cutover, the session's new source */
	st->source = atomic_load(&st->sess->source);
	x->st = st;
	x->gen = st->gen;
	atomic_fetch_add(&st->refs, 1);
	struct px_fetch_params fp = px_source_range(core, st->asset, st->source, st->rend,
						    st->size - st->rend);
	struct px_fetch_cb cb = { s_data, s_done, x };
	uint64_t gen = st->gen;
	pthread_mutex_unlock(&st->lock);
	/* x belongs to the transfer from here: it may end, and free x, before
	 * submit returns */
	enum px_status rc = px_xfer_submit(core,
					   core->cat->assets[st->asset].sources[st->source].provider,
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
	} else {
		/* superseded while we were submitting */
		pthread_mutex_unlock(&st->lock);
		core->ops.cancel(core->ops.impl, id);
		pthread_mutex_lock(&st->lock);
	}
	return PX_OK;
}

enum px_status px_stream_start(struct px_core *core, struct px_session *sess, size_t asset,
			       int64_t off, int64_t first_fill, int64_t deadline,
			       struct px_stream **out)
{
	int64_t size = core->assets[asset].size;
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
		atomic_fetch_sub(&core->ra_used, cap);
		return PX_ENOMEM;
	}
	st->core = core;
	st->sess = sess;
	st->asset = asset;
	st->source = atomic_load(&sess->source);
	st->size = size;
	st->cap = cap;
	st->origin = st->rstart = st->rend = st->consumed = off;
	st->wake_at = INT64_MAX;
	st->fill = first_fill > 0 ? first_fill : FILL_START;
	if (st->fill > cap - KEEP_BEHIND)
		st->fill = cap - KEEP_BEHIND;
	st->refs = 1;
	for (int i = 0; i < MAX_PINS; i++)
		st->pins[i] = -1;
	pthread_mutex_init(&st->lock, NULL);
	px_cond_init_mono(&st->cond);
	core->n_streams++;
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
	uint64_t id = st->ended ? 0 : st->xid;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	if (id)
		st->core->ops.cancel(st->core->ops.impl, id);
	px_stream_unref(st);
}

int px_stream_closed(struct px_stream *st)
{
	pthread_mutex_lock(&st->lock);
	int closed = st->closed;
	pthread_mutex_unlock(&st->lock);
	return closed;
}

int px_stream_idle(struct px_stream *st)
{
	pthread_mutex_lock(&st->lock);
	int idle = !st->closed && !st->ended && st->paused && st->npins == 0;
	pthread_mutex_unlock(&st->lock);
	return idle;
}

/* After a reader took bytes: grow the fill limit while the reader keeps up
 * and resume a paused transfer once RESUME_ROOM is free, or once a whole
 * chunk fits while a reader waits (less would only pause it again).
 * Lock held; returns the id to resume (0: none) for after unlocking. */
static uint64_t after_read(struct px_stream *st, int64_t end)
{
	if (end > st->consumed)
		st->consumed = end;
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
	st->last_byte = px_now_ms(); /* a stall counts from the resume */
	return st->xid;
}

enum px_status px_stream_read(struct px_stream *st, int64_t off, size_t len, void *buf,
			      int64_t deadline, const char *who, int *behind)
{
	int n, pin;
	return px_stream_read_pinned(st, off, len, buf, deadline, who, behind, NULL, &n, &pin);
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
		st->core->ops.resume(st->core->ops.impl, resume);
	px_stream_unref(st);
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

enum px_status px_stream_read_pinned(struct px_stream *st, int64_t off, size_t len, void *buf,
				     int64_t deadline, const char *who, int *behind,
				     struct iovec *iov, int *iovcnt, int *pin)
{
	struct px_core *core = st->core;
	int64_t end = off + (int64_t)len;
	enum px_status rc = PX_OK;
	uint64_t resume = 0;
	struct px_retry retry = PX_RETRY_INIT;
	int64_t waited = 0;     /* when this read began to wait for bytes */

	pthread_mutex_lock(&st->lock);
	/* a little behind: a straggler of this run; far behind: a jump */
	*behind = (off < st->rstart && off >= st->rstart - JUMP_BACK) || st->closed;
	/* too far ahead: it would wait for bytes nobody asked for, or not fit
	 * in the ring beside the bytes kept behind the readers (and the last
	 * chunk, which may run past the read) */
	int64_t keep = st->consumed - KEEP_BEHIND > st->rstart ? st->consumed - KEEP_BEHIND
							       : st->rstart;
	int64_t ahead = jump_ahead(core);
	if (st->closed || off < st->rstart || off > st->rend + ahead ||
	    end + CHUNK_MAX - keep > st->cap) {
		/* near enough to be the kernel's read-ahead, but more than
		 * the ring holds beside the kept bytes: read it directly and
		 * let the stream go on for the readers behind it */
		if (!*behind && !st->closed && off >= st->rstart && off <= st->rend + ahead)
			*behind = 1;
		pthread_mutex_unlock(&st->lock);
		return PX_EDECLINED;
	}
	/* pin our offset while we wait: the kernel sends a run's reads in
	 * parallel, and readers further on must not make the window drop the
	 * bytes we are waiting for */
	int mypin = -1;
	if (st->npins < MAX_PINS) {
		mypin = 0;
		while (st->pins[mypin] >= 0)
			mypin++;
		st->pins[mypin] = off;
		st->npins++;
	}
	*iovcnt = 0;
	for (;;) {
		if (end <= st->rend) {
			/* rstart may have moved while we waited (if we had no pin) */
			if (off < st->rstart) {
				*behind = 1; /* the run went on without us */
				rc = PX_EDECLINED;
				break;
			}
			int64_t pos = off % st->cap;
			size_t first = (size_t)(st->cap - pos) < len ? (size_t)(st->cap - pos) : len;
			if (iov && mypin >= 0) {
				/* the pin stays until the reply is out */
				*pin = mypin;
				mypin = -1;
				atomic_fetch_add(&st->refs, 1); /* dropped by unpin */
				iov[0].iov_base = st->ring + pos;
				iov[0].iov_len = first;
				iov[1].iov_base = st->ring;
				iov[1].iov_len = len - first;
				*iovcnt = len - first ? 2 : 1;
			} else {
				memcpy(buf, st->ring + pos, first);
				memcpy((unsigned char *)buf + first, st->ring, len - first);
			}
			resume = after_read(st, end);
			break;
		}
		if (st->closed) {
			/* another read of the session jumped (or a slot was
			 * wanted) and ended the stream under us: these bytes
			 * are still owed, and a direct read brings them */
			*behind = 1;
			rc = PX_EDECLINED;
			break;
		}
		if (st->ended) {
			/* the transfer stopped before our bytes: restart it where
			 * the window ends, unless it keeps failing */
			if (st->stalled) {
				st->err = PX_ETIMEDOUT;
				snprintf(st->detail, sizeof(st->detail),
					 "stalled: no byte within stall_timeout");
			}
			int idle = st->err == PX_ECANCELED;
			if (st->capped && st->err == PX_OK) {
				idle = 1;
				if (!st->capped_seen)
					px_info("stream", "%s: %s answers in parts (%lld bytes so far): "
						"asking for the rest as each ends", who,
						core->cat->assets[st->asset].sources[st->source].shown,
						(long long)(st->rend - st->origin));
				st->capped_seen = 1;
			}
			if (!idle) {
				/* the one decision of every read (retry.c): a standby
				 * takes over where the window ends, or the source is
				 * tried again after a backoff, or the read fails */
				unsigned char seam[4096];
				size_t nseam = seam_before_end(st, seam);
				char detail[sizeof(st->detail)];
				memcpy(detail, st->detail, sizeof(detail));
				size_t failed = st->source;
				int64_t at = st->rend;
				enum px_status why = st->err;
				int stalled = st->stalled;
				uint64_t gen0 = st->gen;
				pthread_mutex_unlock(&st->lock);
				enum px_status next = px_retry_failed(&retry, st->sess, failed, at, why,
								      stalled, detail, seam, nseam,
								      deadline, who);
				pthread_mutex_lock(&st->lock);
				if (gen0 != st->gen)
					continue; /* another reader restarted it meanwhile */
				if (next != PX_OK) {
					rc = next; /* counted and logged by the handle */
					break;
				}
			}
			core->n_stream_restarts++;
			if (submit(st, deadline) != PX_OK && st->ended && !st->closed) {
				rc = st->err;
				break;
			}
			continue;
		}
		/* the bytes are on their way: make room for them if the
		 * transfer paused, then wait */
		if (end > st->want)
			st->want = end;
		uint64_t id = after_read(st, st->consumed);
		if (id) {
			pthread_mutex_unlock(&st->lock);
			core->ops.resume(core->ops.impl, id);
			pthread_mutex_lock(&st->lock);
			continue;
		}
		/* wait until the bytes come, the deadline, or a stall: no byte
		 * for stall_timeout while we wait, which a standby may cure */
		int64_t stall_at = st->last_byte + core->cfg->stall_timeout_ms;
		int64_t until = stall_at < deadline ? stall_at : deadline;
		struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
		if (!waited) {
			waited = px_now_us();
			core->n_stream_waits++;
		}
		if (px_now_ms() >= deadline) {
			rc = PX_ETIMEDOUT;
			break;
		}
		if (end < st->wake_at)
			st->wake_at = end;
		if (pthread_cond_timedwait(&st->cond, &st->lock, &ts) == ETIMEDOUT &&
		    st->rend < end && !st->ended && !st->paused && st->xid &&
		    px_now_ms() >= st->last_byte + core->cfg->stall_timeout_ms &&
		    px_now_ms() < deadline) {
			/* stalled: end the transfer; the ended branch cuts over */
			st->stalled = 1;
			uint64_t sid = st->xid;
			pthread_mutex_unlock(&st->lock);
			core->ops.cancel(core->ops.impl, sid);
			pthread_mutex_lock(&st->lock);
		}
	}
	if (waited)
		core->stream_wait_us += (uint64_t)(px_now_us() - waited);
	if (mypin >= 0) {
		st->pins[mypin] = -1;
		st->npins--;
		if (!resume)
			resume = after_read(st, st->consumed);
	}
	pthread_mutex_unlock(&st->lock);
	if (resume)
		core->ops.resume(core->ops.impl, resume);
	return rc;
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
