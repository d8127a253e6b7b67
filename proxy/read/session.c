/*
 * session.c - serving a session's reads from its source.
 *
 * A read of an HTTP source is served, in this order of preference:
 *  - from the asset's cached head or tail (cache.c), filled once for all
 *    sessions: scans and reopens cost no transfer;
 *  - from the session's stream (stream.c), which a sequential run of reads
 *    (SEQ_RUN bytes in a row) earns: one open-ended transfer with a
 *    read-ahead window;
 *  - by a bounded range request of exactly the bytes wanted ("direct"):
 *    random access fetches what it reads and no more.
 *
 * A direct read asks the fetcher for exactly the bytes wanted
 * and waits for them on a condition variable, with the read's deadline
 * (read_timeout from the read's start). The buffer the fetch thread writes
 * into belongs to a small reference-counted waiter, not to the reader, so a
 * reader that gives up at its deadline can leave at once: the fetch thread
 * drops the last reference when the cancelled transfer ends.
 *
 * A failed transfer cuts over, inside the read and at the same offset, to
 * a standby proven identical (standby.c); when none can take over, it is
 * retried on the same source with a short backoff while it keeps failing
 * transiently (reset, premature end, 5xx, broken range headers), at most
 * cfg->retries times in a row without a new byte. A 404/410 marks the
 * source dead for the asset so that later sessions skip it.
 *
 * A path source is read with pread() on the session's descriptor of it
 * (px_session_fd), which the kernel bounds. A pread that fails (an I/O
 * error, a file that shrank) cuts over the same way, and standbys of
 * either kind take over: a session that moves to a path ends its stream
 * and reads the path in place; one that moves to a URL reads through
 * transfers again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "reads_i.h"
#include "clock.h"
#include "context.h"
#include "health.h"
#include "provider.h"
#include "rangeread.h"
#include "request.h"
#include "retry.h"
#include "wait.h"
#include "session_i.h"
#include "mem.h"
#include "ownprint.h"
#include "sample.h"
#include "standby.h"
#include "stream.h"
#include "log.h"
#include "session.h"

#define CANCEL_GRACE_MS 2000
#define SEQ_BACK (4LL << 20)   /* kernel read-ahead reorders this much... */
#define SEQ_GAP (4LL << 20)    /* ...both ways */
#define SEQ_RUN (512LL << 10)  /* sequential bytes that earn a stream */
#define JUMP_FILL (256LL << 10) /* a stream started at a seek runs this far
				 * ahead at first, then grows */
#define FRESH_RUN (128LL << 10) /* a new handle's first read this long (a
				 * player's, read ahead by the kernel) starts a
				 * stream at once, as a seek after a run does */
#define NEAR_TAIL (8LL << 20)   /* a jump from the head this close before
				 * the tail reads an index (index_jump) */

/* One open file handle of a session: its own transfers and its own
 * sequential-run tracking; the source is its session's. */
struct px_handle {
	struct px_core *core;
	struct px_session *sess;
	struct px_handle *prev, *next;   /* core->reads->handles, under handles_lock */
	struct px_handle *snext;         /* sess->handles, under sess->lock */
	size_t asset;
	const char *who;      /* the session's */

	pthread_mutex_t lock; /* guards what follows */
	struct px_stream *stream;
	int starting;         /* a reader is starting the stream */
	int64_t next_off;     /* where the last read ended */
	int64_t seq_run;      /* bytes read in a row up to next_off */
	int seek_credit;      /* a jump into the middle starts a stream at once:
			       * the handle's last run earned a stream (a player
			       * that seeks, not a scanner or a random reader);
			       * spent by the stream it starts, so a random
			       * reader after a run wastes at most one */
	unsigned char tail[4096]; /* the last bytes a read gave, for a seam check */
	size_t tail_len;
	int64_t tail_end;     /* offset just past them */
	/* reads it served (scans: px_handle_close), atomics */
	_Atomic uint64_t n_cached;   /* wholly from the head/tail cache */
	_Atomic uint64_t n_fetched;  /* with a stream, a transfer or a pread */
	_Atomic int64_t middle;      /* bytes of the middle it read */
	/* the last read that failed (recent_failure) */
	int64_t fail_off, fail_end;
	enum px_status fail_st;
	_Atomic int64_t fail_at; /* 0: none; read without the lock first */
};

/* A failed read is remembered this long: the kernel retries a failed
 * read-ahead page at once, synchronously, and the application must get
 * its error within read_timeout of asking, not after a second one. */
#define FAIL_MEMORY_MS 2000

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	_Atomic int refs;
	int done;
	int64_t start;        /* offset of buf[0] */
	size_t cap, filled;
	int disorder;         /* bytes came at an offset we did not expect */
	int64_t floor;        /* stall_min_rate */
	_Atomic int64_t progress; /* its progress clock (px_progress_add, us) */
	struct px_fetch_result res;
	unsigned char buf[];
};

static void waiter_unref(struct waiter *w)
{
	if (atomic_fetch_sub(&w->refs, 1) == 1) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
	}
}

static int w_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct waiter *w = ctx;
	/* only the fetch thread writes buf and filled until done is set */
	if (off != w->start + (int64_t)w->filled || len > w->cap - w->filled) {
		w->disorder = 1;
		return 1;
	}
	memcpy(w->buf + w->filled, buf, len);
	w->filled += len;
	/* only the fetch thread moves it; the reader reads it */
	atomic_store(&w->progress, px_progress_add(atomic_load(&w->progress), len, w->floor));
	return 1;
}

static void w_done(void *ctx, const struct px_fetch_result *res)
{
	struct waiter *w = ctx;
	pthread_mutex_lock(&w->lock);
	w->res = *res;
	w->done = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	waiter_unref(w);
}

enum px_status px_handle_open(struct px_core *core, size_t asset, uint64_t client,
			      struct px_handle **out)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct px_session *sess;
	struct px_handle *h;
	enum px_status st;

	*out = NULL;
	if (!rt->listed)
		return PX_ENOSOURCE;
	h = calloc(1, sizeof(*h));
	if (!h)
		return PX_ENOMEM;
	/* the store's reference and verdicts, before a source is chosen */
	px_standby_prime(core, asset);
	st = px_session_enter(core, asset, client, px_now_ms() + core->cfg->admission_timeout_ms,
			      &sess);
	if (st != PX_OK) {
		free(h);
		return st;
	}
	h->core = core;
	h->sess = sess;
	h->asset = asset;
	h->who = sess->who;
	h->next_off = -1;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_lock(&sess->lock);
	h->snext = sess->handles;
	sess->handles = h;
	pthread_mutex_unlock(&sess->lock);
	pthread_mutex_lock(&core->reads->handles_lock);
	h->next = core->reads->handles;
	if (h->next)
		h->next->prev = h;
	core->reads->handles = h;
	pthread_mutex_unlock(&core->reads->handles_lock);
	*out = h;
	return PX_OK;
}

void px_handle_note_opener(struct px_handle *h, uint64_t pid, uint64_t ino)
{
	struct px_session *x = h->sess;
	atomic_store(&x->ino, ino);
	for (unsigned i = 0; i < PX_SESSION_OPENERS; i++)
		if (atomic_load(&x->openers[i]) == pid)
			return;
	unsigned k = atomic_fetch_add(&x->nopeners, 1) % PX_SESSION_OPENERS;
	atomic_store(&x->openers[k], pid);
}

void px_handle_close(struct px_handle *h)
{
	if (!h)
		return;
	struct px_session *sess = h->sess;
	pthread_mutex_lock(&h->core->reads->handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		h->core->reads->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&h->core->reads->handles_lock);
	pthread_mutex_lock(&sess->lock);
	for (struct px_handle **pp = &sess->handles; *pp; pp = &(*pp)->snext) {
		if (*pp == h) {
			*pp = h->snext;
			break;
		}
	}
	pthread_mutex_unlock(&sess->lock);
	/* the lead handle gone, the session's next read leads: a player that
	 * reopens the file goes on moving its offset */
	int64_t mine = atomic_load(&h->middle);
	if (mine && atomic_load(&sess->lead) <= mine)
		atomic_store(&sess->lead, 0);
	/* only cached heads and tails read: a library scan the cache served */
	if (atomic_load(&h->n_cached) && !atomic_load(&h->n_fetched))
		atomic_fetch_add(&h->core->reads->n_scans_cached, 1);
	/* the stream's transfer is cancelled here; its slot frees when the
	 * fetcher has closed it */
	px_stream_close(h->stream);
	pthread_mutex_destroy(&h->lock);
	free(h);
	px_session_leave(sess);
}

void px_handles_close_all(struct px_core *core)
{
	size_t n = 0;
	while (core->reads && core->reads->handles) {
		px_handle_close(core->reads->handles);
		n++;
	}
	if (n)
		px_debug("session", "closed %zu handle(s) left open at unmount", n);
}

int px_session_yield_idle(struct px_session *sess, int how)
{
	struct px_stream *idle[16];
	int n = 0;
	int unread = how != PX_YIELD_IDLE;

	pthread_mutex_lock(&sess->lock);
	for (struct px_handle *h = sess->handles; h && n < 16; h = h->snext) {
		pthread_mutex_lock(&h->lock);
		if (h->stream && (how == PX_YIELD_ALL ? !px_stream_closed(h->stream) :
				  px_stream_idle(h->stream, unread))) {
			idle[n++] = h->stream;
			h->stream = NULL;
		}
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&sess->lock);
	for (int i = 0; i < n; i++)
		px_stream_close(idle[i]);
	if (unread)
		n += px_cache_yield(sess->core, sess->id);
	if (n)
		px_debug("session", "%s: closed %d %s stream(s) or fill(s) to free a slot",
			 sess->who, n, how == PX_YIELD_ALL ? "busy" : unread ? "unread" :
			 "idle");
	return n;
}

struct px_session *px_handle_session(struct px_handle *h)
{
	return h->sess;
}

uint64_t px_handle_session_id(const struct px_handle *h)
{
	return h->sess->id;
}

/* Whether the session reads its active source with pread. */
static int on_path(const struct px_handle *s)
{
	return px_source_is_path(s->core, s->asset, atomic_load(&s->sess->source));
}

/* One attempt of a direct read: [off, off+len) of source into buf. */
struct attempt {
	size_t source;
	int64_t off;
	size_t len;
	unsigned char *buf;
	size_t got;            /* out: bytes copied */
	int stalled;           /* out: no progress within stall_timeout */
	char detail[200];      /* out: a failure in words */
	struct waiter **keep;  /* a transfer that brings it all is kept here */
};

/* The attempt with pread on the session's descriptor of its path source.
 * A failure says what happened in detail. */
static enum px_status read_path(struct px_handle *s, struct attempt *a)
{
	int fd = px_session_fd(s->sess, a->source);
	if (fd < 0) {
		snprintf(a->detail, sizeof(a->detail), "cannot be opened, or has another size");
		return PX_EIO;
	}
	while (a->got < a->len) {
		ssize_t n = pread(fd, a->buf + a->got, a->len - a->got, a->off + (int64_t)a->got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(a->detail, sizeof(a->detail), "%s", strerror(errno));
			return PX_EIO;
		}
		if (n == 0) {
			/* shorter than when it was opened: never pad, fail */
			snprintf(a->detail, sizeof(a->detail), "shrank below %lld bytes",
				 (long long)(a->off + (int64_t)a->got));
			return PX_ESIZE;
		}
		a->got += (size_t)n;
	}
	return PX_OK;
}

static struct waiter *waiter_new(const struct px_core *core, int64_t off, size_t len)
{
	struct waiter *w = malloc(sizeof(*w) + len);
	if (!w)
		return NULL;
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	px_cond_init_mono(&w->cond);
	w->refs = 2;
	w->start = off;
	w->cap = len;
	w->floor = core->cfg->stall_min_rate;
	atomic_store(&w->progress, px_progress_start());
	return w;
}

/* Waits (w->lock held) for the transfer's end, the deadline, or a stall,
 * which a standby may cure. Giving up, it cancels the transfer and waits
 * briefly for its end, so that the bytes that did arrive can be used.
 * Returns 0 when the transfer ended (w->res says how), -1 when it did not
 * even after the cancel (a->detail says why). */
static int waiter_wait(struct px_core *core, struct waiter *w, uint64_t id, int64_t deadline,
		       struct attempt *a)
{
	struct px_wait wt = { &w->lock, &w->cond, deadline, core->cfg->stall_timeout_ms };
	const char *gave_up = NULL;
	while (!gave_up) {
		enum px_wait_outcome o = px_wait_bytes(&wt, &w->done, &w->progress);
		if (o == PX_WAIT_ENDED)
			return 0;
		if (o == PX_WAIT_DEADLINE)
			gave_up = "no answer within read_timeout";
		a->stalled = o == PX_WAIT_STALLED;
		if (a->stalled)
			gave_up = "stalled: no progress within stall_timeout";
	}
	px_wait_cancel(core, &w->lock, id);
	px_cond_wait_until(&w->cond, &w->lock, &w->done, px_now_ms() + CANCEL_GRACE_MS);
	snprintf(a->detail, sizeof(a->detail), "%s", gave_up);
	if (!w->done)
		return -1;
	w->res.status = PX_ETIMEDOUT;
	snprintf(w->res.detail, sizeof(w->res.detail), "%s", gave_up);
	return 0;
}

/* The attempt's outcome once its transfer ended: the bytes copied, or the
 * transfer kept (a->keep) when it brought them all. Drops our reference. */
static enum px_status waiter_finish(struct waiter *w, struct attempt *a)
{
	/* done: the fetch thread no longer touches buf */
	enum px_status st = w->res.status;
	if (w->disorder) {
		st = PX_EBADRESP;
		snprintf(w->res.detail, sizeof(w->res.detail), "bytes arrived out of order");
		w->filled = 0;
	}
	if (a->keep && st == PX_OK && w->filled == a->len) {
		/* all of it: the caller replies from the transfer's buffer and
		 * lets go of it then (one buffer and one copy less) */
		*a->keep = w;
		a->got = a->len;
		return PX_OK;
	}
	memcpy(a->buf, w->buf, w->filled);
	a->got = w->filled;
	snprintf(a->detail, sizeof(a->detail), "%s", w->res.detail);
	if (st == PX_OK && w->filled == 0) {
		st = PX_ETRANSFER;
		snprintf(a->detail, sizeof(a->detail),
			 "the response carried none of the bytes asked for");
	}
	waiter_unref(w);
	return st;
}

/* One transfer of the attempt's bytes (a pread for a path source); copies
 * what arrived in order into a->buf. Returns the transfer's status. */
static enum px_status fetch_once(struct px_handle *s, struct attempt *a, int64_t deadline)
{
	struct px_core *core = s->core;
	uint64_t id;

	a->got = 0;
	a->stalled = 0;
	if (px_source_is_path(core, s->asset, a->source))
		return read_path(s, a);
	struct waiter *w = waiter_new(core, a->off, a->len);
	if (!w)
		return PX_ENOMEM;
	int64_t t0 = atomic_load(&w->progress);
	struct px_fetch_params fp = px_source_range(core, s->asset, a->source, a->off,
						    (int64_t)a->len);
	struct px_fetch_cb cb = { w_data, w_done, w };
	enum px_status st = px_xfer_submit(core,
					   px_cat(core)->assets[s->asset].sources[a->source].provider,
					   s->sess, 0, deadline, &fp, &cb, &id);
	if (st != PX_OK) {
		w->refs = 1;
		waiter_unref(w);
		snprintf(a->detail, sizeof(a->detail), "%s", px_strerror(st));
		return st;
	}
	/* the submit may have waited for a slot: the clock starts now,
	 * unless bytes already moved it */
	(void)atomic_compare_exchange_strong(&w->progress, &t0, px_progress_start());
	pthread_mutex_lock(&w->lock);
	int ended = waiter_wait(core, w, id, deadline, a) == 0;
	pthread_mutex_unlock(&w->lock);
	if (!ended) {
		waiter_unref(w);
		return PX_ETIMEDOUT;
	}
	return waiter_finish(w, a);
}

/* One read being served: what its tiers share. */
struct read_op {
	struct px_handle *h;
	int64_t deadline;       /* the read's (this try's) */
	int seq;                /* it earns a stream: 1 a run, 2 a seek */
	int index;              /* it jumps to an index before the tail */
	struct px_stream *st;   /* the handle's stream, referenced, or NULL */
	unsigned char *buf;     /* the read's first byte goes here */
	size_t got;             /* bytes in so far */
	int copied;             /* some came other than from the stream */
	int fetched;            /* some came other than from the cache */
	uint64_t *held;         /* head, tail and index fills held for the
				 * reply (PX_CACHE_*) */
	struct px_retry retry;  /* the try's failures so far (retry.c) */
	struct px_failed *fail; /* the last one a tier reported (set by
				 * px_failed_set before any other use) */
};

/* A piece of a read that lies in one region of the asset. */
struct span {
	struct px_read_req rq;
	int region;             /* 0 the head, 1 the middle, 2 the tail,
				 * 3 the index before the tail (index_jump) */
	int path;               /* the session reads a path source */
	int again;              /* served on after a decision (serve_span) */
};

/*
 * A reader thread's buffer for the bytes a read copies (cached heads and
 * tails, preads, a direct read in parts, a stream with no pin free): made
 * at the thread's first such read, grown to the largest, freed when the
 * thread ends. A FUSE worker replies before it reads again, so one per
 * thread is enough, and a steady run of reads allocates nothing.
 */
struct scratch {
	size_t cap;
	unsigned char buf[];
};
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_init(void)
{
	(void)pthread_key_create(&scratch_key, free);
}

static unsigned char *scratch(size_t len)
{
	pthread_once(&scratch_once, scratch_init);
	struct scratch *sc = pthread_getspecific(scratch_key);
	if (sc && sc->cap >= len)
		return sc->buf;
	free(sc);
	sc = malloc(sizeof(*sc) + len);
	if (sc)
		sc->cap = len;
	(void)pthread_setspecific(scratch_key, sc);
	return sc ? sc->buf : NULL;
}

/* The bytes the old source gave just before pos, for a cutover's seam
 * check: the end of this read's bytes so far (have bytes before p), else
 * the window of the handle's stream, else the last copied read's when it
 * ended at pos. Returns how many were put in out. */
static size_t seam_bytes(struct px_handle *s, struct px_stream *st, int64_t pos,
			 const unsigned char *p, size_t have, unsigned char out[4096])
{
	size_t n = 0;
	if (have > 0) {
		n = have < 4096 ? have : 4096;
		memcpy(out, p - n, n);
		return n;
	}
	if (st && (n = px_stream_bytes_before(st, pos, out, 4096)) > 0)
		return n;
	pthread_mutex_lock(&s->lock);
	if (s->tail_end == pos && s->tail_len) {
		n = s->tail_len;
		memcpy(out, s->tail, n);
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Keeps the last bytes of a read that ended at end, for seam_bytes(): only
 * for bytes that came other than from a stream, whose window keeps its
 * own. */
static void keep_tail(struct px_handle *s, int64_t end, const struct iovec *iov, int iovcnt)
{
	size_t total = px_iov_len(iov, iovcnt);
	size_t n = total < sizeof(s->tail) ? total : sizeof(s->tail);
	pthread_mutex_lock(&s->lock);
	(void)px_iov_copy(iov, iovcnt, total - n, n, s->tail);
	s->tail_len = n;
	s->tail_end = end;
	pthread_mutex_unlock(&s->lock);
}

/* Where the asset's cached head ends and its cached tail starts. */
static void regions(const struct px_handle *s, int64_t *head_end, int64_t *tail_start)
{
	px_asset_regions(s->core->cfg, px_asset_rt(s->core, s->asset)->size, head_end,
			 tail_start);
}

/* Reads rq's bytes with bounded range requests (pread for a path
 * source), from the session's source of the moment. A failed transfer is
 * reported (PX_EFAILED, op->fail) with the bytes already in and those just
 * before the failure, for a standby's seam check: this read's, or the
 * previous read's. keep: see struct attempt. */
static enum px_status read_direct(struct read_op *op, const struct px_read_req *rq,
				  struct waiter **keep)
{
	struct px_handle *s = op->h;
	size_t got = 0, len = rq->len;

	while (got < len) {
		if (px_now_ms() >= rq->deadline)
			return PX_ETIMEDOUT;
		/* only a first attempt that brings everything is kept */
		struct attempt a = { .source = atomic_load(&s->sess->source),
				     .off = rq->off + (int64_t)got, .len = len - got,
				     .buf = rq->buf + got, .keep = got ? NULL : keep };
		enum px_status st = fetch_once(s, &a, rq->deadline);
		got += a.got;
		if (got == len)
			return PX_OK; /* every byte is here, whatever came after */
		if (st == PX_OK)
			continue;
		int64_t pos = rq->off + (int64_t)got;
		px_failed_set(op->fail, a.source, pos, st, a.stalled, a.detail);
		op->fail->f.nseam = seam_bytes(s, op->st, pos, rq->buf + got, got, op->fail->seam);
		op->fail->done = got;
		return PX_EFAILED;
	}
	return PX_OK;
}

/* read_direct() of the span; with its rq.zc, a read that one transfer
 * brings whole is replied from that transfer's buffer, which zc holds
 * until px_handle_zc_done(). */
static enum px_status read_direct_zc(struct read_op *op, const struct span *sp)
{
	struct waiter *w = NULL;
	const struct px_read_req *rq = &sp->rq;
	struct px_zc *zc = rq->zc;
	/* a read counted once, not again after a decision */
	if (!sp->again && !on_path(op->h))
		op->h->core->reads->n_direct++;
	enum px_status st = read_direct(op, rq, zc ? &w : NULL);
	if (st == PX_OK && w) {
		zc->wt = w;
		zc->iov[0].iov_base = w->buf;
		zc->iov[0].iov_len = rq->len;
		zc->iovcnt = 1;
	} else if (w) {
		waiter_unref(w);
	}
	op->copied = 1;
	return st;
}

/* Whether a read that earns a stream (seq, begin_read()) starts the
 * handle's: none runs or is being started, and a jump has the credit
 * (spent here). Marks it starting. Handle lock held. */
static int claim_start(struct px_handle *s, int seq)
{
	int mine = seq && !s->stream && !s->starting && (seq == 1 || s->seek_credit);
	s->starting |= mine;
	/* spent on this jump, unless the run from it (this read, the
	 * kernel's read-ahead reads already in) earns it again: a player
	 * that seeks and reads 1 MiB at each place keeps it */
	if (mine && seq == 2)
		s->seek_credit = s->seq_run >= SEQ_RUN;
	return mine;
}

/* Ends the handle's stream when it is still st (a jump left it behind, or
 * a cutover to a path ended it) and, for a read that earns a stream (seq),
 * claims the next one in the same hold: no read the old stream leaves
 * waiting can start one first. Returns whether the caller starts it. */
static int end_stream(struct px_handle *s, struct px_stream *st, int seq)
{
	pthread_mutex_lock(&s->lock);
	if (s->stream == st) {
		s->stream = NULL;
		px_stream_close(st);
	}
	int mine = claim_start(s, seq);
	pthread_mutex_unlock(&s->lock);
	return mine;
}

/* The handle's stream declined the read: a straggler of its run reads
 * directly and the stream stays (*decline); otherwise the stream has
 * served its run (a jump left it behind, or it closed under the read) and
 * ends, and a read that earns a stream claims the next one. Returns
 * whether the caller starts it; op->st is let go. */
static int stream_left(struct read_op *op, int behind, int *decline)
{
	*decline = 0;
	if (behind && !px_stream_closed(op->st)) {
		/* a little behind the window: a straggler of the run, and the
		 * stream stays; but a read that begin_read() found far from the
		 * run (a seek with the credit) is a seek back, and ends it like
		 * any jump */
		if (op->seq != 2) {
			*decline = 1;
			return 0;
		}
		behind = 0;
	}
	/* behind and closed: the stream ended under this read (another read's
	 * jump, a cutover to a path). The reader has moved on: this read (the
	 * kernel's read-ahead of the place it left) reads its bytes directly
	 * and starts nothing, or it could start a stream at the old place
	 * before the jump's read starts one at the new, which then reads
	 * directly: a seek of two round trips and a transfer for nothing */
	int mine = end_stream(op->h, op->st, behind ? 0 : op->seq);
	px_stream_unref(op->st);
	op->st = NULL;
	*decline = behind;
	return mine;
}

/* Starts the handle's stream at rq's offset (a seek's with a small first
 * fill) and reads rq from it. PX_EDECLINED when the budget has no room. */
static enum px_status stream_begin(struct read_op *op, const struct px_read_req *rq)
{
	struct px_handle *s = op->h;
	struct px_stream *st;
	int behind;
	enum px_status rc = px_stream_start(s->core, s->sess, s->asset, rq->off,
					    op->seq == 2 ? JUMP_FILL : 0, op->deadline, &st);
	pthread_mutex_lock(&s->lock);
	s->starting = 0;
	if (rc == PX_OK)
		s->stream = st;
	pthread_mutex_unlock(&s->lock);
	if (rc == PX_EBUSY || rc == PX_ESHUTDOWN)
		return rc;
	if (rc != PX_OK) {
		px_debug("session", "%s: no read-ahead budget left: direct reads", s->who);
		return PX_EDECLINED;
	}
	px_stream_ref(st);
	op->st = st;
	return px_stream_read(st, rq, &behind, op->fail);
}

/*
 * The stream tier's read: rq's bytes from the handle's stream when it
 * holds or is about to hold them; else, between head and tail (middle), a
 * new stream when the read continues a run that earns one. PX_EDECLINED:
 * not the stream's (a straggler behind it, a read in the tail it has not
 * reached, no stream to be had): the next tier serves. A stream a jump
 * left behind has served its run and ends.
 */
static enum px_status read_stream(struct read_op *op, const struct px_read_req *rq, int middle)
{
	struct px_handle *s = op->h;
	int behind, mine, decline;

	if (op->st) {
		enum px_status rc = px_stream_read(op->st, rq, &behind, op->fail);
		if (rc != PX_EDECLINED || !middle)
			return rc;
		mine = stream_left(op, behind, &decline);
		if (decline)
			return PX_EDECLINED;
	} else {
		if (!middle || !op->seq)
			return PX_EDECLINED;
		/* one reader starts the stream; the kernel's parallel read-ahead
		 * reads meanwhile go direct rather than start streams of their own */
		pthread_mutex_lock(&s->lock);
		mine = claim_start(s, op->seq);
		pthread_mutex_unlock(&s->lock);
	}
	return mine ? stream_begin(op, rq) : PX_EDECLINED;
}

/* A head or tail fill stalled under the read at pos: reported
 * (PX_EFAILED) so that a standby takes over, and the read then goes on
 * with the next tier (directly), not on the stalled fill: the reader pays
 * one stall, not two. PX_ETIMEDOUT at the read's deadline. */
static enum px_status cache_stalled(struct read_op *op, size_t source, int64_t pos)
{
	struct px_handle *s = op->h;
	if (px_now_ms() >= op->deadline)
		return PX_ETIMEDOUT;
	px_failed_set(op->fail, source, pos, PX_ETIMEDOUT, 1,
		      "stalled: no byte of the cached range within stall_timeout");
	op->fail->f.nseam = seam_bytes(s, op->st, pos, op->buf + op->got, op->got, op->fail->seam);
	op->fail->next_tier = 1;
	return PX_EFAILED;
}

/*
 * A session some of whose bytes came from a part an earlier mount kept on
 * disk has not seen its source's live bytes at the reference's first
 * sample, where a fetch of the head would have compared them (a wrong
 * file of the right length is caught at its first bytes): before its
 * first live bytes of a source go out, that sample (4 KiB) is asked of
 * the source and compared. A mismatch is reported (PX_EFAILED) for the
 * decision after the tiers, which rejects the source and cuts the session
 * over. PX_OK: read on. A scan that the disk serves whole asks nothing.
 */
static enum px_status prove_live(struct read_op *op, int64_t pos)
{
	struct px_handle *s = op->h;
	struct px_session *sess = s->sess;
	size_t source = atomic_load(&sess->source);
	if (!atomic_load(&sess->disk_fed) || atomic_load(&sess->proven) == source + 1)
		return PX_OK;
	const struct vf_plan *plan = px_own_plan(s->core, s->asset);
	unsigned char buf[VF_SAMPLE_LEN];
	if (!plan || !plan->n)
		return PX_OK;
	struct attempt a = { .source = source, .off = plan->off[0], .len = plan->len[0],
			     .buf = buf };
	if (fetch_once(s, &a, op->deadline) != PX_OK || a.got != plan->len[0])
		return PX_OK; /* not answered: the live read that follows tells */
	if (px_standby_check_live(s->core, s->asset, source, plan->off[0], buf, a.got) == PX_OK) {
		atomic_store(&sess->proven, source + 1);
		return PX_OK;
	}
	px_failed_set(op->fail, source, pos, PX_EMISMATCH, 0,
		      "its first sample differs from the asset's reference: its bytes are not "
		      "served");
	return PX_EFAILED;
}

/* Local copy: a path source is read in place, with pread. */
static enum px_status tier_path(struct read_op *op, const struct span *sp)
{
	if (!sp->path)
		return PX_EDECLINED;
	op->fetched = 1;
	enum px_status st = prove_live(op, sp->rq.off);
	return st == PX_OK ? read_direct_zc(op, sp) : st;
}

/* Stream window (and its parallel parts): the middle, and the tail when a
 * stream already runs that reaches it. */
static enum px_status tier_stream(struct read_op *op, const struct span *sp)
{
	if (sp->region == 0 || (sp->region >= 2 && !op->st))
		return PX_EDECLINED;
	enum px_status st = prove_live(op, sp->rq.off);
	if (st == PX_OK)
		st = read_stream(op, &sp->rq, sp->region == 1);
	op->fetched |= st != PX_EDECLINED; /* not the cache's alone */
	return st;
}

/* Head, tail and index cache: the one way that fetches nothing of its
 * own. A fill that stalled lets a standby take over before the read goes
 * direct. */
static enum px_status tier_cache(struct read_op *op, const struct span *sp)
{
	struct px_handle *s = op->h;
	if (sp->region == 1)
		return PX_EDECLINED;
	int which = sp->region == 0 ? PX_CACHE_HEAD : sp->region == 2 ? PX_CACHE_TAIL
								    : PX_CACHE_INDEX, how = 0;
	size_t source = atomic_load(&s->sess->source);
	enum px_status st = px_cache_read(s->sess, which, source, &sp->rq, &op->held[which], &how);
	op->copied = 1;
	if (how & PX_CACHE_DISK)
		atomic_store(&s->sess->disk_fed, 1);
	if (st == PX_ETIMEDOUT)
		st = cache_stalled(op, source, sp->rq.off);
	/* a read a fill served asked the origin: not the cache's alone */
	op->fetched |= st != PX_OK || (how & PX_CACHE_FILLED);
	if (st == PX_OK && (how & PX_CACHE_FILLED) && atomic_load(&s->sess->disk_fed)) {
		/* the fill's bytes are the source's live answer, beside bytes
		 * an earlier mount kept (a tail or index fetched after a head
		 * from disk): proved before they go out. The fill held for
		 * this reply goes on first: the proof may need its slot */
		if (op->held[which])
			px_cache_let_go(s->core, s->asset, which, op->held[which]);
		op->held[which] = 0;
		st = prove_live(op, sp->rq.off);
	}
	return st;
}

/* Direct range: a bounded request of exactly the bytes asked for. */
static enum px_status tier_direct(struct read_op *op, const struct span *sp)
{
	op->fetched = 1;
	enum px_status st = prove_live(op, sp->rq.off);
	return st == PX_OK ? read_direct_zc(op, sp) : st;
}

/*
 * The tiers, in order: each serves the span (PX_OK), declines it
 * (PX_EDECLINED: the next one is asked), reports a failed transfer
 * (PX_EFAILED, op->fail) or fails with a status no decision can change (a
 * deadline, no memory, no slot). In front of them all is the kernel's page
 * cache (keep_cache), whose hits never reach the daemon.
 */
static enum px_status (*const tiers[])(struct read_op *, const struct span *) = {
	tier_path, tier_stream, tier_cache, tier_direct,
};
#define NTIERS (sizeof(tiers) / sizeof(tiers[0]))

/* The one decision after a tier's failed transfer (px_retry_failed: a
 * standby takes over at the same byte, or the source is tried again after
 * a backoff, or the read fails), heard by a stream that failed; the span
 * then moves past the bytes already in. PX_OK: serve the rest. */
static enum px_status decide(struct read_op *op, struct span *sp)
{
	struct px_failed *fd = op->fail;
	enum px_status next = px_retry_failed(&op->retry, op->h->sess, &fd->f, sp->rq.deadline,
					      op->h->who);
	if (fd->st)
		next = px_stream_decided(fd, next, sp->rq.deadline);
	if (next != PX_OK)
		return next; /* px_handle_read() counts and logs the failure */
	sp->rq.off += (int64_t)fd->done;
	sp->rq.buf += fd->done;
	sp->rq.len -= fd->done;
	if (fd->done)
		sp->rq.zc = NULL; /* the first bytes were copied */
	sp->again = 1;
	return PX_OK;
}

/* Serves the span: the first tier that does not decline it; after a
 * decision, from the tier that failed (the next one after a stalled head
 * or tail fill). */
static enum px_status serve_span(struct read_op *op, const struct span *whole)
{
	struct span sp = *whole;
	size_t from = 0;
	for (;;) {
		enum px_status st = PX_EDECLINED;
		size_t i = from;
		for (; st == PX_EDECLINED && i < NTIERS; i++)
			st = tiers[i](op, &sp);
		if (st != PX_EFAILED)
			return st;
		if ((st = decide(op, &sp)) != PX_OK)
			return st;
		from = i - 1 + (size_t)op->fail->next_tier;
	}
}

/*
 * Whether a jump from the head to off reads an index that lies before the
 * tail: an MP4 written with its moov at the end (ffprobe and every
 * player read it whole, first thing: 5 MB for a two-hour film, which no
 * tail holds), a Matroska file's Cues or an AVI's idx1 reaching back past
 * the tail. The read goes to the asset's index slot (cache.c), from the
 * jump to the tail's start, filled by one request and kept on disk like
 * the head and tail: the index costs one request however the kernel's
 * read-ahead ramps up, where direct reads of 36 KiB, 128 KiB, 256 KiB and
 * 512 KiB, then a stream to the file's end, cost five and the tail again;
 * and a rescan after a remount costs none. At most NEAR_TAIL is asked
 * that the reader may not read.
 */
static int index_jump(struct px_handle *s, int64_t off)
{
	int64_t head_end, tail_start;
	regions(s, &head_end, &tail_start);
	/* from the head, where the reader found where its index lies */
	if (s->next_off < 0 || s->next_off > head_end)
		return 0;
	return off >= head_end && off < tail_start && tail_start - off <= NEAR_TAIL;
}

/*
 * Counts the read in the handle's sequential run (count: a read's first
 * try) and takes a reference to its stream: the handle's lock, once for
 * the read. Returns whether the read earns a stream: 1 when the run before
 * it is long enough, 2 when it jumps and the handle's last run earned a
 * stream, or it is the handle's first read and FRESH_RUN long (the stream
 * then starts at the jump, with a small first window), 0 otherwise.
 * *index: whether it jumps to an index before the tail (index_jump).
 */
static int begin_read(struct px_handle *s, int64_t off, size_t len, int count,
		      struct px_stream **st, int *index)
{
	pthread_mutex_lock(&s->lock);
	int near = s->next_off >= 0 && off >= s->next_off - SEQ_BACK &&
		   off <= s->next_off + SEQ_GAP;
	/* a player that opens and starts at a position (resuming, or a seek
	 * by reopening) reads there in the kernel's read-ahead size; a
	 * scanner's or a random reader's reads are smaller, or in the cached
	 * head and tail (or across their edges) */
	int64_t size = px_asset_rt(s->core, s->asset)->size;
	if (s->next_off < 0 && (int64_t)len >= FRESH_RUN && off >= s->core->cfg->head_size &&
	    off + (int64_t)len <= size - s->core->cfg->tail_size)
		s->seek_credit = 1;
	int seq = near && s->seq_run >= SEQ_RUN ? 1 : !near && s->seek_credit ? 2 : 0;
	*index = !near && !seq && index_jump(s, off);
	if (count && near) {
		s->seq_run += (int64_t)len;
		if (off + (int64_t)len > s->next_off)
			s->next_off = off + (int64_t)len;
		if (s->seq_run >= SEQ_RUN)
			s->seek_credit = 1;
	} else if (count) {
		/* a new run, from this read */
		s->seq_run = (int64_t)len;
		s->next_off = off + (int64_t)len;
		if (s->seq_run >= SEQ_RUN)
			s->seek_credit = 1;
	}
	*st = s->stream;
	if (*st)
		px_stream_ref(*st);
	pthread_mutex_unlock(&s->lock);
	return seq;
}

/* A read of a handle that has read mine bytes of the middle ended at end:
 * the session's offset follows the handle that read the most of it (its
 * playback), not another handle's look at the head or the tail (a
 * player's process probing the file again, a thumbnailer). Status only:
 * racing readers may leave either's end. */
static void note_offset(struct px_session *sess, int64_t mine, int64_t end)
{
	int64_t lead = atomic_load(&sess->lead);
	while (mine > lead && !atomic_compare_exchange_weak(&sess->lead, &lead, mine))
		;
	if (mine >= lead)
		atomic_store(&sess->offset, end);
}

/* Whether a read across the head's end or the tail's start is served as
 * one read of the middle: its cached part is not there yet, and a fill
 * and a range in turn would cost two round trips where one request does.
 * A tail a fill is bringing counts as there: the fill serves its part, and
 * a stream ends where it starts; so does one the disk tier may hold, not
 * looked for yet. A path source's read is always one. */
static int one_span(struct px_handle *s, int path, int64_t off, size_t len, int64_t head_end,
		    int64_t tail_start)
{
	if (path)
		return 1;
	int64_t end = off + (int64_t)len;
	size_t source = atomic_load(&s->sess->source);
	return (off < head_end && end > head_end &&
		!px_cache_holds(s->core, s->asset, 0, source, off, head_end - off)) ||
	       (off < tail_start && end > tail_start &&
		!px_cache_may_serve(s->core, s->asset, PX_CACHE_TAIL, source));
}

/* What a try of a read served, counted: the handle's reads (count: its
 * first try), the source's and the session's bytes, the middle (from
 * head_end to mid_end: the tail's start, or an index's), the session's
 * offset, and the last bytes for a seam check. */
static void account(struct px_handle *s, const struct read_op *op,
		    const struct px_read_req *rq, int count, int64_t head_end, int64_t mid_end)
{
	int64_t off = rq->off, end = off + (int64_t)op->got;
	if (op->got == rq->len && count)
		atomic_fetch_add(op->fetched ? &s->n_fetched : &s->n_cached, 1);
	if (op->got)
		px_standby_served(s->core, s->asset, atomic_load(&s->sess->source));
	atomic_fetch_add(&s->sess->served, (int64_t)op->got);
	int64_t mid_from = off > head_end ? off : head_end;
	int64_t mid_to = end < mid_end ? end : mid_end;
	int64_t mine = atomic_load(&s->middle);
	if (mid_to > mid_from) {
		atomic_fetch_add(&s->sess->middle, mid_to - mid_from);
		mine = atomic_fetch_add(&s->middle, mid_to - mid_from) + (mid_to - mid_from);
	}
	note_offset(s->sess, mine, end);
	if (op->got && op->copied) {
		struct iovec v = { rq->buf, op->got };
		if (rq->zc && rq->zc->iovcnt)
			keep_tail(s, end, rq->zc->iov, rq->zc->iovcnt);
		else
			keep_tail(s, end, &v, 1);
	}
}

/* Where the asset's index slot starts for this read, -1 when it has
 * none: the slot's start when it holds or brings the session's source's
 * bytes, else the read's own page when it is an index jump (op->index),
 * which makes the slot. */
static int64_t index_start(struct px_handle *s, int path, const struct read_op *op, int64_t off,
			   int64_t head_end)
{
	if (path)
		return -1;
	int64_t at = px_cache_index_start(s->core, s->asset, atomic_load(&s->sess->source));
	if (at < 0 && op->index) {
		at = off & ~4095LL;
		if (at < head_end)
			at = head_end;
	}
	return at;
}

/* One try of rq (its length within the asset): into rq->buf, or left
 * where it is (rq->zc). The cache fills it held are in held;
 * *got: the bytes served. */
static enum px_status serve(struct px_handle *s, const struct px_read_req *rq,
			    uint64_t held[PX_CACHE_SLOTS], int count, size_t *got)
{
	struct px_failed fail;  /* 4 KiB of seam: filled only on a failure */
	struct read_op op = { .h = s, .buf = rq->buf, .held = held, .deadline = rq->deadline,
			      .retry = PX_RETRY_INIT, .fail = &fail };
	int64_t head_end, tail_start;
	enum px_status st = PX_OK;
	size_t len = rq->len;

	op.seq = begin_read(s, rq->off, len, count, &op.st, &op.index);
	int path = on_path(s);
	regions(s, &head_end, &tail_start);
	int whole = one_span(s, path, rq->off, len, head_end, tail_start);
	int64_t istart = rq->off < tail_start && rq->off + (int64_t)len > head_end
			 ? index_start(s, path, &op, rq->off, head_end) : -1;
	while (op.got < len && st == PX_OK) {
		int64_t pos = rq->off + (int64_t)op.got;
		size_t n = len - op.got;
		int region = whole ? 1 : pos < head_end ? 0 : pos >= tail_start ? 2
			   : istart >= 0 && pos >= istart ? 3 : 1;
		int64_t until = region == 0 ? head_end
			      : region == 1 && istart > pos ? istart : tail_start;
		if (!whole && region != 2 && (int64_t)n > until - pos)
			n = (size_t)(until - pos);
		/* the bytes stay where they are only when one span is the read */
		struct span sp = { { pos, n, rq->buf + op.got, rq->deadline, s->who,
				     rq->zc && n == len && !path ? rq->zc : NULL }, region, path, 0 };
		st = serve_span(&op, &sp);
		if (st == PX_OK)
			op.got += n;
	}
	if (op.st)
		px_stream_unref(op.st);
	*got = op.got;
	/* an index is read by scans: not the middle a playback reads */
	account(s, &op, rq, count, head_end, istart >= 0 && istart < tail_start ? istart
									    : tail_start);
	return op.got == len ? PX_OK : st;
}

_Static_assert(sizeof(((struct px_zc *)0)->held) == PX_CACHE_SLOTS * sizeof(uint64_t),
	       "a zero-copy read holds one fill per cache slot");

/* Lets the head, tail and index fills held for this read's reply go on. */
static void release_held(struct px_core *core, size_t asset, uint64_t held[PX_CACHE_SLOTS])
{
	for (int i = 0; i < PX_CACHE_SLOTS; i++) {
		if (held[i])
			px_cache_let_go(core, asset, i, held[i]);
		held[i] = 0;
	}
}

/* Whether [off, off+len) overlaps a read of this handle that failed
 * within FAIL_MEMORY_MS: *st is its status. */
static int recent_failure(struct px_handle *s, int64_t off, size_t len, enum px_status *st)
{
	/* the read path's cost while nothing failed: one atomic load */
	if (!atomic_load(&s->fail_at))
		return 0;
	pthread_mutex_lock(&s->lock);
	int64_t at = atomic_load(&s->fail_at);
	int hit = px_now_ms() - at < FAIL_MEMORY_MS &&
		  off < s->fail_end && off + (int64_t)len > s->fail_off;
	if (hit)
		*st = s->fail_st;
	pthread_mutex_unlock(&s->lock);
	return hit;
}

/* Every read that fails is counted, logged with its cause and remembered
 * (recent_failure); the session takes no more joins. */
static void read_failed(struct px_handle *s, int64_t off, size_t len, enum px_status st,
			int again, int64_t t0)
{
	if (st == PX_ESHUTDOWN || st == PX_EINVAL)
		return;
	/* only a failure that took its time is remembered: a quick one (a
	 * 404, a refused connection) costs a retry nothing */
	if (!again && px_now_ms() - t0 >= s->core->cfg->stall_timeout_ms) {
		pthread_mutex_lock(&s->lock);
		s->fail_off = off;
		s->fail_end = off + (int64_t)len;
		atomic_store(&s->fail_at, px_now_ms());
		s->fail_st = st;
		pthread_mutex_unlock(&s->lock);
	}
	if (again) {
		px_warn("session", "%s: read at %lld (%zu bytes) failed again at once: %s, "
			"as it did %d ms ago", s->who, (long long)off, len, px_strerror(st),
			FAIL_MEMORY_MS);
		return;
	}
	if (st != PX_EBUSY && st != PX_ENOMEM)
		px_session_failed(s->sess); /* a reopen starts afresh */
	px_standby_exhausted(s->sess, off, st);
}

/* Screens the bytes source gave this read (px_standby_screen). PX_OK: they
 * may go out. PX_ENEXT: they were not the asset's, the session cut over,
 * read again. PX_EMISMATCH: not the asset's, and nothing could take over. */
static enum px_status screen(struct px_handle *s, size_t source, int64_t off,
			     const struct iovec *iov, int iovcnt)
{
	struct px_core *core = s->core;
	/* a read that a cutover split holds bytes of two sources: whose
	 * sample it would be is unclear, and both were checked at the seam */
	if (atomic_load(&s->sess->source) != source)
		return PX_OK;
	if (px_standby_screen(core, s->asset, source, off, iov, iovcnt) == PX_OK)
		return PX_OK;
	const struct px_source *src = &px_cat(core)->assets[s->asset].sources[source];
	px_warn("session", "%s: %s: read at %lld: the bytes differ from the asset's reference: "
		"not served", s->who, src->shown, (long long)off);
	/* nothing it gave may serve again: the window, the seam bytes */
	pthread_mutex_lock(&s->lock);
	struct px_stream *st = s->stream;
	s->stream = NULL;
	s->tail_len = 0;
	pthread_mutex_unlock(&s->lock);
	px_stream_close(st);
	if (px_cutover(s->sess, source, off, PX_EMISMATCH, NULL, 0,
		       px_now_ms() + core->cfg->read_timeout_ms) != PX_OK)
		return PX_EMISMATCH;
	return PX_ENEXT;
}

/* The read's length within the asset: 0 at or past its end. */
static size_t clamp(const struct px_handle *s, int64_t off, size_t len)
{
	int64_t size = px_asset_rt(s->core, s->asset)->size;
	if (off >= size)
		return 0;
	return (int64_t)len > size - off ? (size_t)(size - off) : len;
}

enum px_status px_handle_read(struct px_handle *s, int64_t off, size_t len,
			       void *out, size_t *got)
{
	uint64_t held[PX_CACHE_SLOTS] = { 0 };
	int64_t t0 = px_now_ms();
	enum px_status st;

	*got = 0;
	if (off < 0)
		return PX_EINVAL;
	if (!(len = clamp(s, off, len)))
		return PX_OK;
	if (recent_failure(s, off, len, &st)) {
		read_failed(s, off, len, st, 1, 0);
		return st;
	}
	for (int tries = 0;; tries++) {
		size_t source = atomic_load(&s->sess->source);
		struct px_read_req rq = { off, len, out, px_now_ms() + s->core->cfg->read_timeout_ms,
					  s->who, NULL };
		st = serve(s, &rq, held, tries == 0, got);
		release_held(s->core, s->asset, held);
		if (st != PX_OK)
			break;
		struct iovec v = { out, *got };
		st = screen(s, source, off, &v, 1);
		if (st != PX_ENEXT)
			break;
		if (tries == 3) {
			st = PX_EMISMATCH;
			break;
		}
	}
	if (st != PX_OK) {
		*got = 0;
		read_failed(s, off, len, st, 0, t0);
	}
	return st;
}

enum px_status px_handle_read_zc(struct px_handle *s, int64_t off, size_t len,
				  void *buf, struct px_zc *zc)
{
	int64_t t0 = px_now_ms();
	enum px_status st;
	size_t got;

	memset(zc, 0, sizeof(*zc));
	zc->core = s->core;
	zc->asset = s->asset;
	if (off < 0)
		return PX_EINVAL;
	len = clamp(s, off, len);
	if (!buf && !(buf = scratch(len ? len : 1)))
		return PX_ENOMEM;
	if (recent_failure(s, off, len, &st)) {
		read_failed(s, off, len, st, 1, 0);
		return st;
	}
	for (int tries = 0;; tries++) {
		size_t source = atomic_load(&s->sess->source);
		struct px_read_req rq = { off, len, buf, px_now_ms() + s->core->cfg->read_timeout_ms,
					  s->who, zc };
		st = len ? serve(s, &rq, zc->held, tries == 0, &got) : PX_OK;
		if (st != PX_OK) {
			px_handle_zc_done(zc);
			break;
		}
		if (!zc->iovcnt) {
			zc->iov[0].iov_base = buf;
			zc->iov[0].iov_len = len;
			zc->iovcnt = 1;
		}
		st = screen(s, source, off, zc->iov, zc->iovcnt);
		if (st == PX_OK)
			break;
		px_handle_zc_done(zc);
		zc->iovcnt = 0;
		if (st != PX_ENEXT)
			break;
		if (tries == 3) {
			st = PX_EMISMATCH;
			break;
		}
	}
	if (st != PX_OK)
		read_failed(s, off, len, st, 0, t0);
	return st;
}

void px_handle_zc_done(struct px_zc *zc)
{
	if (zc->st)
		px_stream_unpin(zc->st, zc->pin);
	zc->st = NULL;
	if (zc->wt)
		waiter_unref((struct waiter *)zc->wt);
	zc->wt = NULL;
	if (zc->core)
		release_held(zc->core, zc->asset, zc->held);
}
