/*
 * fetch.c - the fetch thread: every HTTP transfer goes through one curl
 * multi handle owned by one thread.
 *
 * Other threads hand the thread commands (submit, cancel) through a locked
 * queue and wake it with curl_multi_wakeup(); the thread otherwise sleeps in
 * curl_multi_poll(), so completion is event-driven and no easy handle is
 * ever touched by two threads (libcurl's rule).
 *
 * Each transfer parses its response headers itself (status, Content-Length,
 * Content-Range; a redirect's headers are discarded when the next status
 * line starts). At the first body byte, or at the end when there is no body,
 * the response is checked against what was asked: a 206 must carry a
 * Content-Range that starts at the requested offset; a 200 means the server
 * ignored the Range and sends the whole resource, so the bytes before the
 * offset are skipped; any advertised total must equal the asset's size.
 * Failures end the transfer by returning 0 from the write callback; the
 * transfer's own status then replaces curl's CURLE_WRITE_ERROR.
 *
 * A transfer may ask for two ranges at once (a head and a tail): a 206 of
 * multipart/byteranges goes through the strict parser of multipart.c,
 * which hands each part's bytes on at their offsets; any other good
 * answer brings the first range only, and the result says which.
 *
 * Redirects: libcurl follows them itself, up to FETCH_MAX_REDIRS, except
 * for transfers that carry provider headers: libcurl would send those
 * (CURLOPT_HTTPHEADER) to whatever host a redirect names, and no option of
 * 7.88 scopes them. Such a transfer follows its redirects here (follow()):
 * a 3xx with a Location ends the hop (its body unread), and the same
 * transfer starts again on the target, with the headers only where
 * px_redact_headers_ok lets them go (the provider's own origins and
 * trust_redirects, never after https → http) and the first URL's userinfo
 * only to its own origin, as libcurl does. The range checks apply to the
 * final response, as with libcurl's own following.
 *
 * Lock order: f->lock only; never held while calling a callback or curl.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "fetch.h"
#include "httpparse.h"
#include "multipart.h"
#include "log.h"
#include "redact.h"

#define FETCH_BUFFER_SIZE (256 * 1024)
#define FETCH_MAX_REDIRS PX_FETCH_MAX_REDIRS
#define FETCH_EASY_POOL 64
#define FETCH_EPILOGUE_MAX 1024 /* after a multipart body's end: more ends it */

/* What every transfer of one source sends (see fetch.h): read-only once
 * made, shared by transfers that borrow it. */
struct px_fetch_prep {
	char *url;
	struct curl_slist *headers; /* the provider's, and Accept-Encoding */
	int manual;                 /* provider headers: redirects followed here */
	struct curl_slist *plain;   /* the headers without the provider's */
	char **hosts;               /* where the provider's may go */
	size_t nhosts;
};

struct xfer {
	struct xfer *next;
	struct px_fetch *f;
	uint64_t id;
	CURL *easy;
	const struct px_fetch_prep *rq; /* own, or the caller's prepared one */
	struct px_fetch_prep own;
	struct px_fetch_cb cb;
	int64_t offset, length, expect_size;
	int no_reuse;
	int fresh;            /* CURLOPT_FRESH_CONNECT */
	int cancel;
	int64_t paused_at;    /* monotonic ms when on_data paused it, 0: running */

	/* the response's head, reset at each status line */
	struct px_http_head head;
	int html_ok;

	/* a second range (length2 > 0), and its answer as multipart/byteranges:
	 * the parser has consumed mp_fed bytes of the body, libcurl counts
	 * raw_pos as taken (a paused chunk comes again from raw_pos) */
	int64_t offset2, length2;
	int mp_on;
	struct px_multipart mp;
	int64_t raw_pos, mp_fed;
	int64_t epilogue;     /* bytes after the closing delimiter */

	int checked;          /* response validated, body_pos is meaningful */
	int64_t body_pos;     /* absolute offset of the next body byte */
	int finished_early;   /* we stopped the body on purpose: got all we wanted */
	enum px_status fail;  /* set when we stopped it for a broken response */
	struct px_fetch_result res;
	char errbuf[CURL_ERROR_SIZE];

	/* redirects followed by hand (transfers with provider headers) */
	char *at;                 /* the current hop's URL; NULL: url */
	int hops;
	int downgraded;           /* went from https to http: no provider header any more */
	int redirect;             /* this hop's answer is a redirect to follow */
};

struct px_fetch {
	const struct px_config *cfg;
	CURLM *multi;
	pthread_t thread;
	int thread_started;

	pthread_mutex_t lock;
	struct xfer *submitted;   /* queue, guarded by lock */
	uint64_t *cancels;        /* ids to cancel, guarded by lock */
	size_t ncancels, capcancels;
	_Atomic size_t cancels_queued; /* ncancels, for on_write to read */
	uint64_t *resumes;        /* ids to resume, guarded by lock */
	size_t nresumes, capresumes;
	int stop;                 /* guarded by lock */

	/* fetch thread only */
	struct xfer *active;
	CURL *pool[FETCH_EASY_POOL];
	size_t npool;

	_Atomic uint64_t next_id;
};

enum px_status px_fetch_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? PX_OK : PX_ENOMEM;
}

void px_fetch_global_cleanup(void)
{
	curl_global_cleanup();
}

static void xfer_reset_response(struct xfer *x)
{
	px_http_head_reset(&x->head);
}

/* The target of this hop's answer when it is a redirect (a 3xx with a
 * Location; libcurl resolves it against the hop's URL), else NULL. The
 * string is the handle's, valid until it is reused. */
static const char *redirect_target(struct xfer *x)
{
	char *to = NULL;
	if (x->head.status < 300 || x->head.status > 399 ||
	    curl_easy_getinfo(x->easy, CURLINFO_REDIRECT_URL, &to) != CURLE_OK)
		return NULL;
	return to;
}

/* Frees what prep_fill() made in p (not p itself). */
static void prep_clear(struct px_fetch_prep *p)
{
	curl_slist_free_all(p->headers);
	curl_slist_free_all(p->plain);
	for (size_t i = 0; i < p->nhosts; i++)
		free(p->hosts[i]);
	free(p->hosts);
	free(p->url);
}

/* Fills p (zeroed) with copies of what a transfer of url sends. */
static enum px_status prep_fill(struct px_fetch_prep *p, const char *url,
				const char *const *headers, size_t nheaders,
				const char *const *hosts, size_t nhosts)
{
	if (!(p->url = strdup(url)))
		return PX_ENOMEM;
	for (size_t i = 0; i < nheaders; i++) {
		struct curl_slist *l = curl_slist_append(p->headers, headers[i]);
		if (!l)
			return PX_ENOMEM;
		p->headers = l;
	}
	/* no compression: the bytes must be the resource's bytes */
	struct curl_slist *l = curl_slist_append(p->headers, "Accept-Encoding: identity");
	if (!l)
		return PX_ENOMEM;
	p->headers = l;
	if (nheaders) {
		/* provider headers: redirects are followed here (follow()) */
		p->manual = 1;
		p->plain = curl_slist_append(NULL, "Accept-Encoding: identity");
		p->hosts = calloc(nhosts + 1, sizeof(*p->hosts));
		if (!p->plain || !p->hosts)
			return PX_ENOMEM;
		for (; p->nhosts < nhosts; p->nhosts++)
			if (!(p->hosts[p->nhosts] = strdup(hosts[p->nhosts])))
				return PX_ENOMEM;
	}
	return PX_OK;
}

enum px_status px_fetch_prep_new(const struct px_fetch_params *p, struct px_fetch_prep **out)
{
	struct px_fetch_prep *r = calloc(1, sizeof(*r));
	*out = NULL;
	if (!r)
		return PX_ENOMEM;
	if (prep_fill(r, p->url, p->headers, p->nheaders, p->header_hosts,
		      p->nheader_hosts) != PX_OK) {
		px_fetch_prep_free(r);
		return PX_ENOMEM;
	}
	*out = r;
	return PX_OK;
}

void px_fetch_prep_free(struct px_fetch_prep *p)
{
	if (!p)
		return;
	prep_clear(p);
	free(p);
}

static void xfer_free(struct xfer *x)
{
	prep_clear(&x->own);
	free(x->at);
	free(x);
}

/* A two-range transfer's 206 multipart/byteranges answer: the parser is
 * set for the two ranges. Sets x->fail when the head cannot carry them. */
static void check_multipart(struct xfer *x)
{
	struct px_fetch_result *r = &x->res;
	const struct px_http_head *h = &x->head;
	struct px_multipart_range want[2] = {
		{ x->offset, x->offset + x->length - 1 },
		{ x->offset2, x->offset2 + x->length2 - 1 },
	};
	char bnd[PX_MULTIPART_BOUNDARY + 1];
	r->multi = -1; /* unless it proves good, below */
	if (h->encoding[0]) {
		x->fail = PX_ENOTASSET;
		snprintf(r->detail, sizeof(r->detail),
			 "HTTP 206 with Content-Encoding %s, not the asset's bytes", h->encoding);
	} else if (px_multipart_boundary(h->ctype, strlen(h->ctype), bnd) != 1 ||
		   px_multipart_init(&x->mp, bnd, want, 2, x->expect_size, x->html_ok) != PX_OK) {
		x->fail = PX_EBADRESP;
		snprintf(r->detail, sizeof(r->detail),
			 "multipart/byteranges answer without a valid boundary");
	} else {
		x->mp_on = 1;
		r->size = x->expect_size;
	}
}

/* Checks the final response once its headers are complete. Sets x->fail or
 * x->body_pos; fills res.size. */
static void check_response(struct xfer *x)
{
	struct px_fetch_result *r = &x->res;
	struct px_http_want w = { x->offset, x->length, x->expect_size, x->html_ok };
	x->checked = 1;
	r->http_status = x->head.status;
	snprintf(r->etag, sizeof(r->etag), "%s", x->head.etag);
	char bnd[PX_MULTIPART_BOUNDARY + 1];
	if (x->length2 > 0 && x->head.status == 206 &&
	    px_multipart_boundary(x->head.ctype, strlen(x->head.ctype), bnd) >= 0) {
		check_multipart(x);
		return;
	}
	x->fail = px_http_judge(&x->head, &w, &x->body_pos, &r->size, r->detail,
				sizeof(r->detail));
	/* one range, or the whole file: the first range comes, not the second */
	if (x->length2 > 0 && x->fail == PX_OK)
		r->multi = -1;
	if (x->fail == PX_OK && x->head.status == 200 && x->offset > 0 &&
	    px_log_enabled(PX_LOG_DEBUG)) {
		char shown[512];
		px_redact_url(x->at ? x->at : x->rq->url, shown, sizeof(shown));
		px_debug("fetch", "%s ignores Range: skipping %lld bytes", shown,
			 (long long)x->offset);
	}
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	px_http_head_line(&x->head, buf, len);
	return len;
}

/*
 * Whether a cancel of x waits in the queue. One curl_multi_perform() call
 * reads a fast socket for as long as it has bytes: on loopback, tens of
 * MiB and 10-20 ms, all of them dropped by a cancelled reader, while the
 * queue's submits (the next stream of a seek) wait. So a transfer whose
 * cancel is queued ends at its next chunk. A lock and a short scan only
 * while a cancel waits. Fetch thread.
 */
static int cancel_queued(struct xfer *x)
{
	struct px_fetch *f = x->f;
	int found = 0;
	if (!atomic_load(&f->cancels_queued))
		return 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->ncancels && !found; i++)
		found = f->cancels[i] == x->id;
	pthread_mutex_unlock(&f->lock);
	return found;
}

/* The multipart parser's emit: a part's bytes to the caller. */
static int mp_emit(void *ctx, int64_t off, const char *buf, size_t len)
{
	struct xfer *x = ctx;
	if (!x->cb.on_data(x->cb.ctx, off, buf, len))
		return 0;
	x->res.bytes += (int64_t)len;
	return 1;
}

/* A body chunk of a multipart answer. A paused chunk comes again from
 * raw_pos, of which the parser has consumed mp_fed - raw_pos bytes. */
static size_t multipart_write(struct xfer *x, char *buf, size_t len)
{
	int64_t seen = x->mp_fed - x->raw_pos;
	size_t skip = seen < (int64_t)len ? (size_t)seen : len;
	size_t used = 0;
	enum px_status st = px_multipart_feed(&x->mp, buf + skip, len - skip, &used, mp_emit, x,
					      x->res.detail, sizeof(x->res.detail));
	x->mp_fed += (int64_t)used;
	if (st == PX_EFULL) {
		x->paused_at = px_now_ms();
		return CURL_WRITEFUNC_PAUSE;
	}
	if (st == PX_EBADRESP) {
		x->fail = PX_EBADRESP;
		x->res.multi = -1;
		return 0;
	}
	x->raw_pos += (int64_t)len;
	x->mp_fed = x->raw_pos;
	if (st == PX_EOF) {
		x->finished_early = 1;
		x->res.multi = 1;
		x->epilogue = (int64_t)(len - skip - used);
	}
	return len;
}

static size_t on_write(char *buf, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;

	if (!x->cancel && cancel_queued(x))
		x->cancel = 1; /* ends as cancelled (finish()) */
	if (x->cancel)
		return 0;
	if (!x->checked && x->rq->manual && redirect_target(x)) {
		x->redirect = 1; /* follow() takes it from here */
		return 0;
	}
	if (!x->checked)
		check_response(x);
	if (x->fail)
		return 0;
	if (x->mp_on && x->finished_early) {
		/* the parts are in: a CRLF may follow, not a stream of bytes
		 * (a larger epilogue ends the transfer, good as it is) */
		x->epilogue += (int64_t)len;
		return x->epilogue <= FETCH_EPILOGUE_MAX ? len : 0;
	}
	if (x->mp_on)
		return multipart_write(x, buf, len);
	if (x->length == 0) {
		/* a probe needs the headers only; let a one-byte 206 finish so the
		 * connection stays open for the next request */
		x->finished_early = 1;
		return x->head.status == 206 && x->head.cr.last == x->head.cr.first ? len : 0;
	}
	int64_t start = x->body_pos, end = x->body_pos + (int64_t)len;
	int64_t want_end = x->offset + x->length;
	if (x->head.status == 206 && end > x->head.cr.last + 1) {
		x->fail = PX_EBADRESP;
		snprintf(x->res.detail, sizeof(x->res.detail),
			 "body runs past the Content-Range end %lld", (long long)x->head.cr.last);
		return 0;
	}
	int64_t from = start > x->offset ? start : x->offset;
	int64_t to = end < want_end ? end : want_end;
	if (to > from) {
		if (!x->cb.on_data(x->cb.ctx, from, buf + (from - start), (size_t)(to - from))) {
			/* back-pressure: curl keeps this chunk and offers it again
			 * after curl_easy_pause(CONT) */
			x->paused_at = px_now_ms();
			return CURL_WRITEFUNC_PAUSE;
		}
		x->res.bytes += to - from;
	}
	x->body_pos = end;
	if (end >= want_end) {
		x->finished_early = 1;
		return end == want_end && x->head.status == 206 && end == x->head.cr.last + 1 ? len : 0;
	}
	return len;
}

static enum px_status translate(CURLcode rc)
{
	switch (rc) {
	case CURLE_OK: return PX_OK;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		return PX_ECONNECT;
	case CURLE_OPERATION_TIMEDOUT: return PX_ETIMEDOUT;
	case CURLE_TOO_MANY_REDIRECTS:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
		return PX_EBADRESP;
	case CURLE_ABORTED_BY_CALLBACK: return PX_ECANCELED;
	case CURLE_OUT_OF_MEMORY: return PX_ENOMEM;
	default: return PX_ETRANSFER;
	}
}

/* Ends a transfer: decides its status, calls on_done, recycles the handle. */
static void finish(struct px_fetch *f, struct xfer *x, CURLcode rc, enum px_status forced)
{
	struct px_fetch_result *r = &x->res;
	enum px_status st = forced;

	if (st == PX_OK) {
		if (x->cancel) {
			st = PX_ECANCELED;
		} else if (x->fail) {
			st = x->fail;
		} else if (x->finished_early) {
			st = PX_OK;
		} else if (rc != CURLE_OK) {
			st = translate(rc);
			snprintf(r->detail, sizeof(r->detail), "%s%s%s", curl_easy_strerror(rc),
				 x->errbuf[0] ? ": " : "", x->errbuf);
			if (rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR)
				snprintf(r->detail + strlen(r->detail),
					 sizeof(r->detail) - strlen(r->detail),
					 " (at byte %lld)", (long long)x->body_pos);
		} else {
			if (!x->checked)
				check_response(x);
			st = x->fail;
			if (st == PX_OK && x->mp_on) {
				st = PX_ETRANSFER;
				snprintf(r->detail, sizeof(r->detail),
					 "multipart/byteranges body ended before its last part");
			} else if (st == PX_OK && x->length > 0 &&
				   x->body_pos < x->offset + x->length &&
			    !(x->head.status == 206 && x->body_pos == x->head.cr.last + 1)) {
				/* the body ended cleanly but before the bytes asked for */
				st = PX_ETRANSFER;
				snprintf(r->detail, sizeof(r->detail),
					 "body ended at byte %lld, before byte %lld",
					 (long long)x->body_pos, (long long)(x->offset + x->length));
			}
		}
	}
	if (x->easy) {
		curl_off_t ft = -1;
		long redirects = 0;
		if (curl_easy_getinfo(x->easy, CURLINFO_FILETIME_T, &ft) == CURLE_OK && ft >= 0)
			r->mtime = (int64_t)ft;
		if (curl_easy_getinfo(x->easy, CURLINFO_REDIRECT_COUNT, &redirects) == CURLE_OK)
			r->redirects = (int)redirects + x->hops;
		curl_multi_remove_handle(f->multi, x->easy);
		if (f->npool < FETCH_EASY_POOL) {
			curl_easy_reset(x->easy);
			f->pool[f->npool++] = x->easy;
		} else {
			curl_easy_cleanup(x->easy);
		}
		x->easy = NULL;
	}
	r->status = st;
	if (st != PX_OK && !r->detail[0])
		snprintf(r->detail, sizeof(r->detail), "%s", px_strerror(st));
	x->cb.on_done(x->cb.ctx, r);
	xfer_free(x);
}

static int setup_easy(struct px_fetch *f, struct xfer *x)
{
	CURL *e = f->npool ? f->pool[--f->npool] : curl_easy_init();
	char range[96];
	const struct px_config *cfg = f->cfg;

	if (!e)
		return -1;
	x->easy = e;
	curl_easy_setopt(e, CURLOPT_URL, x->rq->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, x->rq->manual ? 0L : 1L);
	curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)FETCH_MAX_REDIRS);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->rq->headers);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)FETCH_BUFFER_SIZE);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_FILETIME, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "seamfs/" SEAMFS_VERSION);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, cfg->insecure ? 0L : 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, cfg->insecure ? 0L : 2L);
	if (cfg->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_file);
	/* a probe asks for one byte: the 206 tells the total and that ranges work */
	int64_t last = x->length > 0 ? x->offset + x->length - 1 : x->offset;
	if (x->length2 > 0)
		snprintf(range, sizeof(range), "%lld-%lld,%lld-%lld", (long long)x->offset,
			 (long long)last, (long long)x->offset2,
			 (long long)(x->offset2 + x->length2 - 1));
	else
		snprintf(range, sizeof(range), "%lld-%lld", (long long)x->offset, (long long)last);
	curl_easy_setopt(e, CURLOPT_RANGE, range);
	curl_easy_setopt(e, CURLOPT_FORBID_REUSE, x->no_reuse ? 1L : 0L);
	curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, x->fresh ? 1L : 0L);
	x->errbuf[0] = '\0';
	xfer_reset_response(x);
	return curl_multi_add_handle(f->multi, e) == CURLM_OK ? 0 : -1;
}

/* The first URL's userinfo goes to its own origin on later hops (libcurl's
 * rule for the credentials of a URL it follows), else none. */
static void set_login(struct xfer *x, int own_origin)
{
	char *user = NULL, *pass = NULL;
	CURLU *u = own_origin ? curl_url() : NULL;
	if (u && curl_url_set(u, CURLUPART_URL, x->rq->url, 0) == CURLUE_OK) {
		if (curl_url_get(u, CURLUPART_USER, &user, CURLU_URLDECODE) != CURLUE_OK)
			user = NULL;
		if (curl_url_get(u, CURLUPART_PASSWORD, &pass, CURLU_URLDECODE) != CURLUE_OK)
			pass = NULL;
	}
	curl_easy_setopt(x->easy, CURLOPT_USERNAME, user);
	curl_easy_setopt(x->easy, CURLOPT_PASSWORD, pass);
	curl_free(user);
	curl_free(pass);
	curl_url_cleanup(u);
}

static int hop_failed(struct xfer *x, enum px_status st, const char *what)
{
	x->fail = st;
	snprintf(x->res.detail, sizeof(x->res.detail), "%s", what);
	return -1;
}

/*
 * A hop of a transfer with provider headers ended (rc): when its answer is
 * a redirect, starts the same transfer on the target and returns 0. Else
 * returns -1 and the transfer ends as usual (x->fail set when it was a
 * redirect that cannot be followed).
 */
static int follow(struct px_fetch *f, struct xfer *x, CURLcode rc)
{
	const char *to;
	char *next = NULL, origin[600], first[600];

	if (x->cancel || (!x->redirect && (rc != CURLE_OK || x->checked)))
		return -1;
	if (!(to = redirect_target(x)))
		return -1;
	x->redirect = 0;
	x->checked = 1; /* judged: a redirect that cannot be followed fails */
	if (x->hops >= FETCH_MAX_REDIRS)
		return hop_failed(x, PX_EBADRESP, "more than 5 redirects");
	if (px_redact_origin(to, origin, sizeof(origin)))
		return hop_failed(x, PX_EBADRESP, "a redirect to a URL that is not http(s)");
	if (!(next = strdup(to)))
		return hop_failed(x, PX_ENOMEM, "out of memory");
	const char *from = x->at ? x->at : x->rq->url;
	int keep = px_redact_headers_ok(x->rq->url, from, next, (const char *const *)x->rq->hosts,
					x->rq->nhosts, &x->downgraded);
	int own = !x->downgraded && px_redact_origin(x->rq->url, first, sizeof(first)) == 0 &&
		  strcmp(first, origin) == 0;
	if (!keep && px_log_enabled(PX_LOG_DEBUG)) {
		char a[300], b[300];
		px_redact_url(from, a, sizeof(a));
		px_redact_url(next, b, sizeof(b));
		px_debug("fetch", "%s redirects to %s: the provider's headers stay behind", a, b);
	}
	curl_multi_remove_handle(f->multi, x->easy);
	free(x->at);
	x->at = next;
	x->hops++;
	curl_easy_setopt(x->easy, CURLOPT_URL, next);
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, keep ? x->rq->headers : x->rq->plain);
	set_login(x, own);
	x->checked = 0;
	x->fail = PX_OK;
	x->finished_early = 0;
	x->body_pos = 0;
	x->mp_on = 0;
	x->raw_pos = x->mp_fed = 0;
	x->res.multi = 0;
	x->errbuf[0] = '\0';
	xfer_reset_response(x);
	if (curl_multi_add_handle(f->multi, x->easy) != CURLM_OK)
		return hop_failed(x, PX_ENOMEM, "could not follow a redirect");
	return 0;
}

static struct xfer *find_active(struct px_fetch *f, uint64_t id, struct xfer ***link)
{
	for (struct xfer **pp = &f->active; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			if (link)
				*link = pp;
			return *pp;
		}
	}
	return NULL;
}

static void run_commands(struct px_fetch *f, int *stop)
{
	struct xfer *sub, *next;
	uint64_t *cancels, *resumes;
	size_t ncancels, nresumes;

	pthread_mutex_lock(&f->lock);
	sub = f->submitted;
	f->submitted = NULL;
	cancels = f->cancels;
	ncancels = f->ncancels;
	f->cancels = NULL;
	f->ncancels = f->capcancels = 0;
	atomic_store(&f->cancels_queued, 0);
	resumes = f->resumes;
	nresumes = f->nresumes;
	f->resumes = NULL;
	f->nresumes = f->capresumes = 0;
	*stop = f->stop;
	pthread_mutex_unlock(&f->lock);

	/* the queue was built by prepending: reverse to keep submit order */
	struct xfer *ordered = NULL;
	for (; sub; sub = next) {
		next = sub->next;
		sub->next = ordered;
		ordered = sub;
	}
	for (sub = ordered; sub; sub = next) {
		next = sub->next;
		if (setup_easy(f, sub)) {
			snprintf(sub->res.detail, sizeof(sub->res.detail), "could not start the transfer");
			finish(f, sub, CURLE_OK, PX_ENOMEM);
			continue;
		}
		sub->next = f->active;
		f->active = sub;
	}
	for (size_t i = 0; i < ncancels; i++) {
		struct xfer **link, *x = find_active(f, cancels[i], &link);
		if (x) {
			*link = x->next;
			x->cancel = 1;
			finish(f, x, CURLE_OK, PX_ECANCELED);
		}
	}
	for (size_t i = 0; i < nresumes; i++) {
		struct xfer *x = find_active(f, resumes[i], NULL);
		if (x && x->paused_at) {
			x->paused_at = 0;
			/* may call on_write at once, which may pause again */
			curl_easy_pause(x->easy, CURLPAUSE_CONT);
		}
	}
	free(cancels);
	free(resumes);
}

/* Ends transfers left paused for PX_FETCH_IDLE_MS: their reader went away
 * without closing, and their connection is worth more to others. Returns
 * the ms until the next one would expire (or 1000). */
static long expire_idle(struct px_fetch *f)
{
	int64_t now = px_now_ms();
	long next = 1000;
	for (struct xfer **pp = &f->active; *pp;) {
		struct xfer *x = *pp;
		if (x->paused_at && now - x->paused_at >= PX_FETCH_IDLE_MS) {
			*pp = x->next;
			snprintf(x->res.detail, sizeof(x->res.detail), "idle for %d s",
				 PX_FETCH_IDLE_MS / 1000);
			finish(f, x, CURLE_OK, PX_ECANCELED);
			continue;
		}
		if (x->paused_at && PX_FETCH_IDLE_MS - (now - x->paused_at) < next)
			next = (long)(PX_FETCH_IDLE_MS - (now - x->paused_at));
		pp = &x->next;
	}
	return next;
}

static void *fetch_main(void *arg)
{
	struct px_fetch *f = arg;
	sigset_t all;
	int stop = 0, running;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		run_commands(f, &stop);
		if (stop)
			break;
		curl_multi_perform(f->multi, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(f->multi, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct xfer *x = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
			CURLcode rc = msg->data.result;
			if (x->rq->manual && follow(f, x, rc) == 0)
				continue; /* the same transfer, on the redirect's target */
			for (struct xfer **pp = &f->active; *pp; pp = &(*pp)->next) {
				if (*pp == x) {
					*pp = x->next;
					break;
				}
			}
			finish(f, x, rc, PX_OK);
		}
		/* the timeout is a safety net and the idle clock: submits,
		 * cancels and resumes wake the poll */
		curl_multi_poll(f->multi, NULL, 0, (int)expire_idle(f), NULL);
	}
	while (f->active) {
		struct xfer *x = f->active;
		f->active = x->next;
		snprintf(x->res.detail, sizeof(x->res.detail), "seamfs is stopping");
		finish(f, x, CURLE_OK, PX_ESHUTDOWN);
	}
	return NULL;
}

static enum px_status fetch_submit(void *impl, const struct px_fetch_params *p,
				   const struct px_fetch_cb *cb, uint64_t *id)
{
	struct px_fetch *f = impl;
	struct xfer *x = calloc(1, sizeof(*x));
	enum px_status st = PX_ENOMEM;

	if (!x)
		return PX_ENOMEM;
	if (p->prep) {
		x->rq = p->prep; /* borrowed: the caller keeps it past on_done */
	} else {
		x->rq = &x->own;
		if (prep_fill(&x->own, p->url, p->headers, p->nheaders, p->header_hosts,
			      p->nheader_hosts) != PX_OK)
			goto out;
	}
	x->cb = *cb;
	x->offset = p->offset;
	x->length = p->length;
	x->expect_size = p->expect_size;
	if (p->length2 > 0 && p->length > 0 && p->expect_size > 0 &&
	    p->offset2 > p->offset + p->length && p->offset2 + p->length2 <= p->expect_size) {
		x->offset2 = p->offset2;
		x->length2 = p->length2;
	}
	x->no_reuse = p->no_reuse;
	x->fresh = p->fresh_connect;
	x->html_ok = p->html_ok;
	x->res.size = x->res.mtime = -1;
	x->id = atomic_fetch_add(&f->next_id, 1) + 1;
	x->f = f;
	*id = x->id;

	pthread_mutex_lock(&f->lock);
	if (f->stop) {
		pthread_mutex_unlock(&f->lock);
		st = PX_ESHUTDOWN;
		goto out;
	}
	x->next = f->submitted;
	f->submitted = x;
	pthread_mutex_unlock(&f->lock);
	curl_multi_wakeup(f->multi);
	return PX_OK;
out:
	xfer_free(x);
	return st;
}

/* Queues an id for the fetch thread. On allocation failure the command is
 * lost: the caller's deadline (or the idle timeout) still bounds things. */
static void queue_id(struct px_fetch *f, uint64_t **ids, size_t *n, size_t *cap, uint64_t id)
{
	pthread_mutex_lock(&f->lock);
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		uint64_t *nids = realloc(*ids, ncap * sizeof(*nids));
		if (!nids) {
			pthread_mutex_unlock(&f->lock);
			return;
		}
		*ids = nids;
		*cap = ncap;
	}
	(*ids)[(*n)++] = id;
	if (ids == &f->cancels)
		atomic_store(&f->cancels_queued, *n);
	pthread_mutex_unlock(&f->lock);
	curl_multi_wakeup(f->multi);
}

static void fetch_cancel(void *impl, uint64_t id)
{
	struct px_fetch *f = impl;
	/* still queued: it will be started and then cancelled right away, so
	 * on_done comes from the fetch thread like every other outcome */
	queue_id(f, &f->cancels, &f->ncancels, &f->capcancels, id);
}

static void fetch_resume(void *impl, uint64_t id)
{
	struct px_fetch *f = impl;
	queue_id(f, &f->resumes, &f->nresumes, &f->capresumes, id);
}

struct px_fetch_ops px_fetch_ops(struct px_fetch *f)
{
	struct px_fetch_ops ops = { fetch_submit, fetch_cancel, fetch_resume, f };
	return ops;
}

enum px_status px_fetch_new(const struct px_config *cfg, struct px_fetch **out)
{
	struct px_fetch *f = calloc(1, sizeof(*f));
	*out = NULL;
	if (!f)
		return PX_ENOMEM;
	f->cfg = cfg;
	pthread_mutex_init(&f->lock, NULL);
	f->multi = curl_multi_init();
	if (!f->multi) {
		px_fetch_free(f);
		return PX_ENOMEM;
	}
	curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, 64L);
	if (pthread_create(&f->thread, NULL, fetch_main, f)) {
		px_fetch_free(f);
		return PX_ENOMEM;
	}
	f->thread_started = 1;
	*out = f;
	return PX_OK;
}

void px_fetch_stop(struct px_fetch *f)
{
	pthread_mutex_lock(&f->lock);
	f->stop = 1;
	pthread_mutex_unlock(&f->lock);
	curl_multi_wakeup(f->multi);
}

void px_fetch_free(struct px_fetch *f)
{
	if (!f)
		return;
	if (f->thread_started) {
		px_fetch_stop(f);
		pthread_join(f->thread, NULL);
	}
	/* submits that raced with stop: end them too */
	while (f->submitted) {
		struct xfer *x = f->submitted;
		f->submitted = x->next;
		snprintf(x->res.detail, sizeof(x->res.detail), "seamfs is stopping");
		finish(f, x, CURLE_OK, PX_ESHUTDOWN);
	}
	for (size_t i = 0; i < f->npool; i++)
		curl_easy_cleanup(f->pool[i]);
	free(f->cancels);
	free(f->resumes);
	if (f->multi)
		curl_multi_cleanup(f->multi);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

void px_fetch_version(char *buf, size_t len)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	snprintf(buf, len, "%s (%s)", v->version, v->ssl_version ? v->ssl_version : "no TLS");
}

/* ------------------------------------------------------------ batches
 *
 * A batch is for a program's own thread (the catalog crawler): its multi
 * handle is driven by the caller's calls, not by the fetch thread, and
 * its requests carry no provider headers, so libcurl follows redirects
 * itself. The policy is the fetch thread's: http and https only, also
 * after a redirect, at most FETCH_MAX_REDIRS of them, TLS checked unless
 * told otherwise, every request bounded in time.
 */

struct px_fetch_batch {
	CURLM *multi;
	struct px_fetch_batch_opts o;   /* ca_file, user_agent: owned copies */
	struct batch_req *active;       /* started, not yet taken by next */
};

struct batch_req {
	enum px_fetch_kind kind;
	size_t body_max;
	size_t cap;                     /* of r->body */
	CURL *easy;
	struct px_fetch_reply *r;
	char errbuf[CURL_ERROR_SIZE];
	struct batch_req *next;
};

void px_fetch_reply_free(struct px_fetch_reply *r)
{
	if (!r)
		return;
	free(r->url);
	free(r->body);
	free(r);
}

static void batch_req_free(struct batch_req *q)
{
	if (!q)
		return;
	if (q->easy)
		curl_easy_cleanup(q->easy);
	px_fetch_reply_free(q->r);
	free(q);
}

enum px_status px_fetch_batch_new(const struct px_fetch_batch_opts *opts,
				  struct px_fetch_batch **out)
{
	struct px_fetch_batch *b = calloc(1, sizeof(*b));
	*out = NULL;
	if (!b)
		return PX_ENOMEM;
	b->o = *opts;
	b->o.ca_file = opts->ca_file ? strdup(opts->ca_file) : NULL;
	b->o.user_agent = strdup(opts->user_agent ? opts->user_agent : "seamfs/" SEAMFS_VERSION);
	b->multi = curl_multi_init();
	if (!b->multi || !b->o.user_agent || (opts->ca_file && !b->o.ca_file)) {
		px_fetch_batch_free(b);
		return PX_ENOMEM;
	}
	curl_multi_setopt(b->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, opts->max_connections);
	*out = b;
	return PX_OK;
}

void px_fetch_batch_free(struct px_fetch_batch *b)
{
	if (!b)
		return;
	while (b->active) {
		struct batch_req *q = b->active;
		b->active = q->next;
		curl_multi_remove_handle(b->multi, q->easy);
		batch_req_free(q);
	}
	if (b->multi)
		curl_multi_cleanup(b->multi);
	free((char *)b->o.ca_file);
	free((char *)b->o.user_agent);
	free(b);
}

static size_t batch_on_header(char *data, size_t size, size_t n, void *ud)
{
	struct batch_req *q = ud;
	px_http_head_line(&q->r->head, data, size * n);
	return size * n;
}

static size_t batch_on_body(char *data, size_t size, size_t n, void *ud)
{
	struct batch_req *q = ud;
	struct px_fetch_reply *r = q->r;
	size_t len = size * n;
	if (q->kind != PX_FETCH_PAGE)
		return 0;               /* the head is all it wanted */
	if (memchr(data, '\0', len)) {
		r->binary = 1;          /* a file, not a page: no need to fetch it all */
		return 0;
	}
	if (r->len + len > q->body_max) {
		r->too_big = 1;
		return 0;
	}
	if (r->len + len + 1 > q->cap) {
		size_t ncap = q->cap ? q->cap : 65536;
		while (ncap < r->len + len + 1)
			ncap *= 2;
		char *g = realloc(r->body, ncap);
		if (!g)
			return 0;
		r->body = g;
		q->cap = ncap;
	}
	memcpy(r->body + r->len, data, len);
	r->len += len;
	r->body[r->len] = '\0';
	return len;
}

static int batch_setup(struct px_fetch_batch *b, struct batch_req *q, const char *url)
{
	CURL *e = q->easy;
	const struct px_fetch_batch_opts *o = &b->o;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, q);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, q->errbuf);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)FETCH_MAX_REDIRS);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	curl_easy_setopt(e, CURLOPT_USERAGENT, o->user_agent);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, batch_on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, q);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, batch_on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, q);
	if (o->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (o->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
	if (q->kind == PX_FETCH_PAGE) {
		curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* a page may come gzipped */
	} else if (q->kind == PX_FETCH_HEAD) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		curl_easy_setopt(e, CURLOPT_FILETIME, 1L);
	} else {
		curl_easy_setopt(e, CURLOPT_FILETIME, 1L);
		curl_easy_setopt(e, CURLOPT_RANGE, "0-0");
	}
	return curl_multi_add_handle(b->multi, e) == CURLM_OK ? 0 : -1;
}

enum px_status px_fetch_batch_add(struct px_fetch_batch *b, enum px_fetch_kind kind,
				  const char *url, void *tag)
{
	struct batch_req *q = calloc(1, sizeof(*q));
	if (!q)
		return PX_ENOMEM;
	q->kind = kind;
	q->body_max = b->o.body_max;
	q->r = calloc(1, sizeof(*q->r));
	q->easy = curl_easy_init();
	if (!q->r || !q->easy) {
		batch_req_free(q);
		return PX_ENOMEM;
	}
	q->r->tag = tag;
	q->r->mtime = -1;
	px_http_head_reset(&q->r->head);
	if (batch_setup(b, q, url)) {
		batch_req_free(q);
		return PX_ENOMEM;
	}
	q->next = b->active;
	b->active = q;
	return PX_OK;
}

/* What one finished transfer gives, into its reply. */
static void batch_finish(struct batch_req *q, CURLcode rc)
{
	struct px_fetch_reply *r = q->r;
	char *eff = NULL;
	curl_off_t ft = -1;
	r->done = rc == CURLE_OK;
	r->stopped = rc == CURLE_WRITE_ERROR;
	r->broken = rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR ||
		    rc == CURLE_SEND_ERROR || rc == CURLE_PARTIAL_FILE;
	if (rc != CURLE_OK)
		snprintf(r->error, sizeof(r->error), "%s%s%s%s", curl_easy_strerror(rc),
			 q->errbuf[0] ? " (" : "", q->errbuf, q->errbuf[0] ? ")" : "");
	if (q->kind != PX_FETCH_PAGE &&
	    curl_easy_getinfo(q->easy, CURLINFO_FILETIME_T, &ft) == CURLE_OK && ft >= 0)
		r->mtime = (int64_t)ft;
	curl_easy_getinfo(q->easy, CURLINFO_EFFECTIVE_URL, &eff);
	r->url = eff ? strdup(eff) : NULL;
}

enum px_status px_fetch_batch_next(struct px_fetch_batch *b, struct px_fetch_reply **out)
{
	CURLMsg *msg;
	int left, still;
	*out = NULL;
	do {
		msg = curl_multi_info_read(b->multi, &left);
	} while (msg && msg->msg != CURLMSG_DONE);
	if (!msg) {
		curl_multi_perform(b->multi, &still);
		do {
			msg = curl_multi_info_read(b->multi, &left);
		} while (msg && msg->msg != CURLMSG_DONE);
	}
	if (!msg)
		return PX_EAGAIN;
	struct batch_req *q = NULL;
	CURLcode rc = msg->data.result;
	curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
	curl_multi_remove_handle(b->multi, q->easy);
	for (struct batch_req **pp = &b->active; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	batch_finish(q, rc);
	*out = q->r;
	q->r = NULL;
	batch_req_free(q);
	return PX_OK;
}

void px_fetch_batch_wait(struct px_fetch_batch *b, int wait_ms)
{
	curl_multi_poll(b->multi, NULL, 0, wait_ms, NULL);
}
