/*
 * rangeread.c - vf_readers over HTTP (px_fetch_ops) and local paths.
 *
 * An HTTP batch is one reference-counted block: the ranges' state, their
 * receive buffers and the lock and condition the caller waits on. Each
 * submitted transfer holds a reference until its on_done, the caller one
 * until it returns; so a caller that gives up on a transfer that never
 * ends (a wedged fetch thread) can return at once, and the fetch thread
 * frees the block later. The fetch thread writes an item's buffer only
 * before that item's on_done; the caller reads it only after.
 *
 * The caller keeps up to `parallel` transfers going and waits on the
 * condition until the earliest deadline of those in flight. A transfer past
 * its deadline is cancelled, then given CANCEL_GRACE_MS to end before it is
 * abandoned. With a stall time (px_rangeread_set_stall), a transfer whose
 * progress clock (clock.h: bytes at a floor rate) falls that far behind is
 * cancelled as well, and the batch asks for
 * nothing more: a source that stalls on one range would stall on the next,
 * and each stalled transfer holds a slot of its provider that another
 * source's reader may be waiting for. For the same reason only a batch with
 * nothing in flight waits for a slot inside the submit; one with transfers
 * in flight asks without waiting (px_fetch_params.no_wait) and asks again
 * when one of them ends, or FULL_RETRY_MS later.
 *
 * Lock order: batch->lock only; never held across submit or cancel (a fake
 * fetcher may call back from inside them).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "context.h"
#include "health.h"
#include "httpparse.h"
#include "provider.h"
#include "sources.h"
#include "rangeread.h"

#define CANCEL_GRACE_MS 2000
#define FULL_RETRY_MS 50   /* a batch at its provider's limit asks again */
#define SLOW_MIN_MS 100    /* a range's body shorter than this is not judged */

struct px_rangeread {
	/* HTTP */
	struct px_fetch_ops ops;
	char *url;
	char **headers;
	size_t nheaders;
	int64_t timeout_ms;
	int64_t until;          /* no request runs past it (ms), 0: none */
	int64_t stall_ms;       /* no progress for this long: a stall (0: none) */
	int64_t min_rate;       /* progress: bytes a second at least */
	_Atomic int64_t slow;   /* the slowest range's rate under min_rate, -1 */
	unsigned parallel;
	int64_t size;
	int html_ok;
	const char *const *header_hosts; /* borrowed */
	size_t nheader_hosts;
	/* path */
	char *path;
	int fd;
	int open_errno;
};

enum { IT_IDLE, IT_FLIGHT, IT_DONE, IT_ABANDONED };

struct item {
	struct batch *b;
	int64_t off;
	size_t len;
	unsigned char *buf;     /* inside the batch block */
	size_t filled;
	int disorder;
	int state;              /* IT_*, under b->lock */
	int cancelled;          /* we cancelled it at its deadline */
	int stalled;            /* ...which was its stall time */
	uint64_t id;
	int64_t deadline;
	int late;               /* the wait for a slot in its submit took more of
				 * its time than it left: no fair question */
	_Atomic int64_t progress; /* its progress clock (px_progress_add, us) */
	_Atomic int64_t first_at, last_at; /* its first and last bytes (ms) */
	struct px_fetch_result res;
};

struct batch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	_Atomic int refs;
	int changed;            /* a transfer ended; under lock */
	int stalled;            /* one of its transfers stalled: ask no more */
	int64_t min_rate;       /* the reader's, for it_data */
	size_t n;
	struct item items[];
};

static void batch_unref(struct batch *b)
{
	if (atomic_fetch_sub(&b->refs, 1) == 1) {
		pthread_cond_destroy(&b->cond);
		pthread_mutex_destroy(&b->lock);
		free(b);
	}
}

static int it_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct item *it = ctx;
	if (off != it->off + (int64_t)it->filled || len > it->len - it->filled) {
		it->disorder = 1;
		return 1;
	}
	memcpy(it->buf + it->filled, buf, len);
	it->filled += len;
	atomic_store(&it->progress,
		     px_progress_add(atomic_load(&it->progress), len, it->b->min_rate));
	int64_t now = px_now_ms();
	if (!atomic_load(&it->first_at))
		atomic_store(&it->first_at, now);
	atomic_store(&it->last_at, now);
	return 1;
}

static void it_done(void *ctx, const struct px_fetch_result *res)
{
	struct item *it = ctx;
	struct batch *b = it->b;
	pthread_mutex_lock(&b->lock);
	it->res = *res;
	if (it->state == IT_FLIGHT)
		it->state = IT_DONE;
	b->changed = 1;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	batch_unref(b);
}

static struct batch *batch_new(const struct vf_range *r, size_t n)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (r[i].len > ((size_t)1 << 30) - total)
			return NULL;   /* a batch never holds more than 1 GiB */
		total += r[i].len;
	}
	struct batch *b = calloc(1, sizeof(*b) + n * sizeof(struct item) + total);
	if (!b)
		return NULL;
	unsigned char *p = (unsigned char *)&b->items[n];
	pthread_mutex_init(&b->lock, NULL);
	px_cond_init_mono(&b->cond);
	b->refs = 1;
	b->n = n;
	for (size_t i = 0; i < n; i++) {
		b->items[i].b = b;
		b->items[i].off = r[i].off;
		b->items[i].len = r[i].len;
		b->items[i].buf = p;
		p += r[i].len;
	}
	return b;
}

/* Starts item i; with no_wait, leaves it idle and returns 0 when its
 * provider has no slot free now. Called with the lock held; drops it
 * around submit. Returns 1 when it was started or failed for good. */
static int start_item(struct px_rangeread *rr, struct batch *b, struct item *it, int no_wait)
{
	struct px_fetch_params fp = {
		.url = rr->url, .headers = (const char *const *)rr->headers,
		.nheaders = rr->nheaders, .offset = it->off, .length = (int64_t)it->len,
		.expect_size = it->len ? rr->size : -1, .html_ok = rr->html_ok,
		.header_hosts = rr->header_hosts, .nheader_hosts = rr->nheader_hosts,
		.no_wait = no_wait,
	};
	struct px_fetch_cb cb = { it_data, it_done, it };
	uint64_t id = 0;

	it->state = IT_FLIGHT;
	atomic_store(&it->progress, px_progress_start());
	int64_t set_at = px_now_ms();
	it->deadline = set_at + rr->timeout_ms;
	if (rr->until && it->deadline > rr->until)
		it->deadline = rr->until;
	atomic_fetch_add(&b->refs, 1);
	pthread_mutex_unlock(&b->lock);
	enum px_status st = rr->ops.submit(rr->ops.impl, &fp, &cb, &id);
	/* a wait for a slot inside the submit is no stall of the source */
	atomic_store(&it->progress, px_progress_start());
	pthread_mutex_lock(&b->lock);
	int64_t asked_at = px_now_ms();
	it->late = it->deadline - asked_at < asked_at - set_at;
	if (st == PX_EBUSY && no_wait) {
		atomic_fetch_sub(&b->refs, 1);
		it->state = IT_IDLE;
		return 0;
	}
	if (st != PX_OK) {
		/* no callback will ever come for it */
		atomic_fetch_sub(&b->refs, 1);
		it->state = IT_DONE;
		it->res.status = st;
		snprintf(it->res.detail, sizeof(it->res.detail), "could not start: %s",
			 px_strerror(st));
		return 1;
	}
	it->id = id;
	return 1;
}

/* Runs every item of b to its end (done, or abandoned after its cancel). */
static void batch_run(struct px_rangeread *rr, struct batch *b)
{
	size_t next = 0;
	int64_t full_until = 0; /* the provider had no slot free: until then,
				 * or until a transfer of ours ends */

	pthread_mutex_lock(&b->lock);
	for (;;) {
		size_t inflight = 0, finished = 0;
		int64_t now = px_now_ms(), wake = INT64_MAX;
		uint64_t cancel[PX_RANGEREAD_PARALLEL * 8];
		size_t ncancel = 0;

		for (size_t i = 0; i < next; i++) {
			struct item *it = &b->items[i];
			if (it->state != IT_FLIGHT) {
				finished++;
				continue;
			}
			int64_t stall_at = !it->cancelled && rr->stall_ms
						   ? px_progress_stall_at(atomic_load(&it->progress),
									  rr->stall_ms)
						   : INT64_MAX;
			if (now >= it->deadline || now >= stall_at) {
				if (it->cancelled) {
					it->state = IT_ABANDONED;
					finished++;
					continue;
				}
				it->cancelled = 1;
				if (now < it->deadline)
					it->stalled = b->stalled = 1;
				it->deadline = now + CANCEL_GRACE_MS;
				if (ncancel < sizeof(cancel) / sizeof(cancel[0]))
					cancel[ncancel++] = it->id;
				stall_at = INT64_MAX;
			}
			inflight++;
			if (it->deadline < wake)
				wake = it->deadline;
			if (stall_at < wake)
				wake = stall_at;
		}
		if (ncancel) {
			pthread_mutex_unlock(&b->lock);
			for (size_t i = 0; i < ncancel; i++)
				rr->ops.cancel(rr->ops.impl, cancel[i]);
			pthread_mutex_lock(&b->lock);
			continue;
		}
		if (finished == b->n)
			break;
		if (next < b->n && (b->stalled || (rr->until && now >= rr->until))) {
			/* the reader's time is up, or the source stalls: what
			 * was not started never is */
			for (; next < b->n; next++) {
				struct item *it = &b->items[next];
				it->state = IT_DONE;
				it->res.status = PX_ETIMEDOUT;
				snprintf(it->res.detail, sizeof(it->res.detail), "not asked: %s",
					 b->stalled ? "another range of the source stalled"
						    : "the reader's time ran out");
			}
			continue;
		}
		if (b->changed) {
			/* a transfer of ours ended: its slot may be free */
			b->changed = 0;
			full_until = 0;
		}
		if (next < b->n && inflight < rr->parallel && now >= full_until) {
			/* with transfers in flight, a next one waits for a slot
			 * here, not in the submit: the transfers in flight
			 * must be watched for their deadlines and stalls
			 * meanwhile, or a stalled one would hold its slot */
			if (start_item(rr, b, &b->items[next], inflight > 0))
				next++;
			else
				full_until = now + FULL_RETRY_MS;
			continue;
		}
		if (next < b->n && full_until > now && full_until < wake)
			wake = full_until;
		b->changed = 0;
		px_cond_wait_until(&b->cond, &b->lock, &b->changed, wake);
	}
	pthread_mutex_unlock(&b->lock);
}

/* Notes a range whose body (from its first byte, so an answer's late head
 * does not count) came slower than min_rate: a source that sends a sample
 * that slowly would stall a reader (clock.h: progress is a rate). Bodies
 * under SLOW_MIN_MS are too short to judge. */
static void note_rate(struct px_rangeread *rr, const struct item *it)
{
	int64_t took = atomic_load(&it->last_at) - atomic_load(&it->first_at);
	if (!rr->min_rate || !atomic_load(&it->first_at) || took < SLOW_MIN_MS ||
	    (int64_t)it->filled * 1000 >= rr->min_rate * took)
		return;
	int64_t rate = (int64_t)it->filled * 1000 / took, was = atomic_load(&rr->slow);
	while ((was < 0 || rate < was) && !atomic_compare_exchange_weak(&rr->slow, &was, rate))
		;
}

/* The outcome of item it into range r. Called after batch_run. */
static void item_result(struct px_rangeread *rr, struct batch *b, struct item *it,
			struct vf_range *r)
{
	pthread_mutex_lock(&b->lock);
	int state = it->state;
	pthread_mutex_unlock(&b->lock);
	r->got = 0;
	r->why[0] = '\0';
	/* the wait for a slot took most of its time, and nothing came: the
	 * source was never asked fairly, which says nothing of it */
	if ((state != IT_DONE || it->cancelled) && !it->filled && it->late) {
		r->st = PX_EBUSY;
		snprintf(r->why, sizeof(r->why), "no slot free until most of its time was gone");
		return;
	}
	if (state != IT_DONE || it->cancelled) {
		r->st = PX_ETIMEDOUT;
		if (it->stalled)
			snprintf(r->why, sizeof(r->why), "stalled: no progress within %lld ms",
				 (long long)rr->stall_ms);
		else
			snprintf(r->why, sizeof(r->why), "no answer within %lld ms",
				 (long long)rr->timeout_ms);
		return;
	}
	r->st = it->res.status;
	if (it->disorder) {
		r->st = PX_EBADRESP;
		snprintf(r->why, sizeof(r->why), "bytes arrived out of order");
		return;
	}
	if (it->filled)
		memcpy(r->buf, it->buf, it->filled);
	r->got = it->filled;
	note_rate(rr, it);
	if (r->st == PX_OK && r->got < r->len) {
		r->st = PX_ETRANSFER;
		snprintf(r->why, sizeof(r->why), "short read: %zu of %zu bytes", r->got, r->len);
	} else if (r->st != PX_OK) {
		snprintf(r->why, sizeof(r->why), "%s", it->res.detail[0] ? it->res.detail
								 : px_strerror(r->st));
	}
}

static void http_batch(struct px_rangeread *rr, struct vf_range *r, size_t n)
{
	struct batch *b = batch_new(r, n);
	if (!b) {
		for (size_t i = 0; i < n; i++) {
			r[i].got = 0;
			r[i].st = PX_ENOMEM;
			snprintf(r[i].why, sizeof(r[i].why), "out of memory");
		}
		return;
	}
	b->min_rate = rr->min_rate;
	batch_run(rr, b);
	for (size_t i = 0; i < n; i++)
		item_result(rr, b, &b->items[i], &r[i]);
	batch_unref(b);
}

static enum px_status path_status(int e)
{
	return e == ENOENT || e == ENOTDIR ? PX_ENOTFOUND : e == EACCES || e == EPERM ? PX_EAUTH
										   : PX_EIO;
}

static void path_range(struct px_rangeread *rr, struct vf_range *r)
{
	r->got = 0;
	r->why[0] = '\0';
	if (rr->fd < 0) {
		r->st = path_status(rr->open_errno);
		snprintf(r->why, sizeof(r->why), "%s: %s", rr->path, strerror(rr->open_errno));
		return;
	}
	while (r->got < r->len) {
		ssize_t n = pread(rr->fd, (unsigned char *)r->buf + r->got, r->len - r->got,
				  r->off + (int64_t)r->got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r->st = PX_EIO;
			snprintf(r->why, sizeof(r->why), "read at %lld: %s",
				 (long long)(r->off + (int64_t)r->got), strerror(errno));
			return;
		}
		if (n == 0) {
			r->st = PX_ETRANSFER;
			snprintf(r->why, sizeof(r->why), "short read: the file ends at %lld",
				 (long long)(r->off + (int64_t)r->got));
			return;
		}
		r->got += (size_t)n;
	}
	r->st = PX_OK;
}

static void rr_batch(void *ctx, struct vf_range *r, size_t n)
{
	struct px_rangeread *rr = ctx;
	if (rr->path) {
		for (size_t i = 0; i < n; i++)
			path_range(rr, &r[i]);
		return;
	}
	http_batch(rr, r, n);
}

static enum px_status rr_read(void *ctx, int64_t off, size_t len, void *buf, size_t *got)
{
	struct vf_range r = { .off = off, .len = len, .buf = buf };
	rr_batch(ctx, &r, 1);
	*got = r.got;
	return r.st;
}

struct vf_reader px_rangeread_reader(struct px_rangeread *rr)
{
	struct vf_reader r = { rr_read, rr_batch, rr };
	return r;
}

enum px_status px_rangeread_new_http(const struct px_fetch_ops *ops, const char *url,
				     const char *const *headers, size_t nheaders,
				     int64_t timeout_ms, unsigned parallel,
				     struct px_rangeread **out)
{
	struct px_rangeread *rr;

	*out = NULL;
	if (timeout_ms <= 0 || parallel < 1 || parallel > 64)
		return PX_EINVAL;
	rr = calloc(1, sizeof(*rr));
	if (!rr)
		return PX_ENOMEM;
	rr->fd = -1;
	rr->slow = -1;
	rr->ops = *ops;
	rr->timeout_ms = timeout_ms;
	rr->parallel = parallel;
	rr->size = -1;
	rr->url = strdup(url);
	rr->headers = nheaders ? calloc(nheaders, sizeof(*rr->headers)) : NULL;
	if (!rr->url || (nheaders && !rr->headers))
		goto fail;
	for (; rr->nheaders < nheaders; rr->nheaders++)
		if (!(rr->headers[rr->nheaders] = strdup(headers[rr->nheaders])))
			goto fail;
	*out = rr;
	return PX_OK;
fail:
	px_rangeread_free(rr);
	return PX_ENOMEM;
}

enum px_status px_rangeread_new_path(const char *path, struct px_rangeread **out)
{
	return px_rangeread_new_fd(path, px_open_regular(path), out); /* never blocks on a FIFO */
}

enum px_status px_rangeread_new_fd(const char *path, int fd, struct px_rangeread **out)
{
	int e = errno;
	struct px_rangeread *rr = calloc(1, sizeof(*rr));
	*out = NULL;
	if (!rr || !(rr->path = strdup(path))) {
		free(rr);
		if (fd >= 0)
			close(fd);
		return PX_ENOMEM;
	}
	rr->size = -1;
	rr->slow = -1;
	rr->fd = fd;
	rr->open_errno = fd < 0 ? e : 0;
	*out = rr;
	return PX_OK;
}

void px_rangeread_free(struct px_rangeread *rr)
{
	if (!rr)
		return;
	if (rr->fd >= 0)
		close(rr->fd);
	for (size_t i = 0; i < rr->nheaders; i++)
		free(rr->headers[i]);
	free(rr->headers);
	free(rr->url);
	free(rr->path);
	free(rr);
}

void px_rangeread_set_html_ok(struct px_rangeread *rr, int ok)
{
	rr->html_ok = ok;
}

void px_rangeread_set_header_hosts(struct px_rangeread *rr, const char *const *hosts, size_t n)
{
	rr->header_hosts = hosts;
	rr->nheader_hosts = n;
}

void px_rangeread_set_size(struct px_rangeread *rr, int64_t size)
{
	rr->size = size;
}

enum px_status px_rangeread_probe(struct px_rangeread *rr, struct vf_seen *out,
				  char *why, size_t whylen)
{
	memset(out, 0, sizeof(*out));
	out->size = out->mtime = -1;
	why[0] = '\0';
	if (rr->path) {
		struct stat sb;
		if (rr->fd < 0 || fstat(rr->fd, &sb)) {
			int e = rr->fd < 0 ? rr->open_errno : errno;
			snprintf(why, whylen, "%s", strerror(e));
			return path_status(e);
		}
		if (!S_ISREG(sb.st_mode)) {
			snprintf(why, whylen, "not a regular file");
			return PX_EINVAL;
		}
		out->size = sb.st_size;
		out->mtime = sb.st_mtime;
		snprintf(out->etag, sizeof(out->etag), "%llx-%llx",
			 (unsigned long long)sb.st_ino,
			 (unsigned long long)sb.st_mtim.tv_sec * 1000000000ULL +
				 (unsigned long long)sb.st_mtim.tv_nsec);
		return PX_OK;
	}
	/* a zero-length item is a probe: the fetcher asks for one byte and
	 * reports the total, Last-Modified and ETag without delivering data */
	struct vf_range r = { .off = 0, .len = 0, .buf = NULL };
	struct batch *b = batch_new(&r, 1);
	if (!b) {
		snprintf(why, whylen, "out of memory");
		return PX_ENOMEM;
	}
	batch_run(rr, b);
	item_result(rr, b, &b->items[0], &r);
	enum px_status st = r.st;
	if (st == PX_OK && b->items[0].res.size < 0) {
		st = PX_EBADRESP;
		snprintf(r.why, sizeof(r.why), "the answer gave no size");
	}
	if (st == PX_OK) {
		out->size = b->items[0].res.size;
		out->mtime = b->items[0].res.mtime;
		snprintf(out->etag, sizeof(out->etag), "%s", b->items[0].res.etag);
	} else {
		snprintf(why, whylen, "%s", r.why[0] ? r.why : px_strerror(st));
	}
	batch_unref(b);
	return st;
}

/* Opens the copy that is source k of the asset as px_source_open says:
 * fd, or -1 with errno (ESTALE: another file than the copy). */
static int open_copy(struct px_core *core, size_t asset, size_t k)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	const char *path = a->sources[k].path;
	struct src_rt *all = px_src_ensure(core, asset);
	char top[PATH_MAX];
	size_t n = strlen(path), rel = strlen(a->path);
	struct stat sb;
	if (!all || n <= rel + 1 || n - rel - 1 >= sizeof(top)) {
		errno = all ? ENAMETOOLONG : ENOMEM;
		return -1;
	}
	/* the storage's directory: the copy's path is STORAGE/ASSET-PATH */
	snprintf(top, sizeof(top), "%.*s", (int)(n - rel - 1), path);
	px_vf_lock(core);
	struct src_rt id = all[k];
	px_vf_unlock(core);
	int fd = px_open_in_dir(top, id.copy_sdev, a->path);
	if (fd >= 0 && (fstat(fd, &sb) != 0 || sb.st_size != px_asset_rt(core, asset)->size ||
			(unsigned long long)sb.st_dev != id.copy_dev ||
			(unsigned long long)sb.st_ino != id.copy_ino)) {
		close(fd);
		fd = -1;
		errno = ESTALE;
	}
	return fd;
}

int px_source_open(struct px_core *core, size_t asset, size_t k)
{
	const struct px_source *src = &px_cat(core)->assets[asset].sources[k];
	if (!src->path) {
		errno = EINVAL;
		return -1;
	}
	if (!src->storage)
		return px_open_regular(src->path); /* the operator's path, as it stands */
	int fd = open_copy(core, asset, k), e = errno;
	struct src_rt *all = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	if (fd < 0 && all && (e == ELOOP || e == EXDEV))
		atomic_store(&all[k].in_way, PX_IN_WAY_LINK);
	else if (fd < 0 && all && (e == ESTALE || e == ENOTDIR || e == EINVAL || e == EISDIR))
		atomic_store(&all[k].in_way, PX_IN_WAY_FOREIGN);
	errno = e;
	return fd;
}

int px_source_is_path(const struct px_core *core, size_t asset, size_t source)
{
	return px_cat(core)->assets[asset].sources[source].path != NULL;
}

/* The source's prepared request (fetch.h), made at its first transfer and
 * published atomically, kept until the core ends; NULL when out of memory
 * or not a listed plain asset's source (the transfer copies then). */
static const struct px_fetch_prep *source_prep(struct px_core *core, size_t asset,
					       size_t source, const struct px_fetch_params *fp)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct px_fetch_prep **all = __atomic_load_n(&rt->preps, __ATOMIC_ACQUIRE), **none = NULL;
	struct px_fetch_prep *p, *empty = NULL;

	if (source >= rt->source_cap || !fp->url)
		return NULL;
	if (!all) {
		all = calloc(rt->source_cap, sizeof(*all));
		if (!all)
			return NULL;
		if (!__atomic_compare_exchange_n(&rt->preps, &none, all, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			free(all); /* another thread made them first */
			all = none;
		}
	}
	if ((p = __atomic_load_n(&all[source], __ATOMIC_ACQUIRE)))
		return p;
	if (px_fetch_prep_new(fp, &p) != PX_OK)
		return NULL;
	if (!__atomic_compare_exchange_n(&all[source], &empty, p, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		px_fetch_prep_free(p);
		p = empty;
	}
	return p;
}

void px_source_preps_free(struct px_core *core)
{
	for (size_t i = 0; i < px_assets_cap(core); i++) {
		struct px_fetch_prep **all = px_asset_rt(core, i)->preps;
		for (size_t k = 0; all && k < px_asset_rt(core, i)->source_cap; k++)
			px_fetch_prep_free(all[k]);
		free(all);
		px_asset_rt(core, i)->preps = NULL;
	}
}

struct px_fetch_params px_source_range(struct px_core *core, size_t asset,
				       size_t source, int64_t off, int64_t len)
{
	const struct px_source *src = &px_cat(core)->assets[asset].sources[source];
	const struct px_provider *p = &px_cat(core)->providers[src->provider];
	struct px_fetch_params fp = {
		.url = src->url, .headers = (const char *const *)p->headers,
		.nheaders = p->nheaders, .offset = off, .length = len,
		.expect_size = px_asset_rt(core, asset)->size,
		/* a provider with a connection limit on more than one host, or
		 * shared by the hosts of a cluster (whose idle connections
		 * the others' slots cannot see), keeps no idle connection
		 * beside its transfers, so that the limit holds for sockets
		 * too; on one host, idle ones are reused (prov_rt.host) and
		 * seeks cost no new handshake */
		.no_reuse = p->max_connections > 0 &&
			    (atomic_load(&px_prov_rt(core, src->provider)->multi_host) ||
			     px_prov_rt(core, src->provider)->cl),
		.html_ok = px_http_is_html_path(px_cat(core)->assets[asset].path),
		.header_hosts = (const char *const *)p->header_hosts,
		.nheader_hosts = p->nheader_hosts,
	};
	fp.prep = source_prep(core, asset, source, &fp);
	return fp;
}

void px_rangeread_set_until(struct px_rangeread *rr, int64_t until)
{
	rr->until = until;
}

int64_t px_rangeread_slow_rate(struct px_rangeread *rr)
{
	return atomic_load(&rr->slow);
}

void px_rangeread_set_stall(struct px_rangeread *rr, int64_t stall_ms, int64_t min_rate)
{
	rr->stall_ms = stall_ms > 0 ? stall_ms : 0;
	rr->min_rate = min_rate > 0 ? min_rate : 0;
}
