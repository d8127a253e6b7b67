/*
 * fetch.h - HTTP(S) range transfers, driven by one thread through libcurl.
 *
 * Callers describe a transfer (URL, headers, the byte range wanted, the size
 * the asset must have) and get its bytes and its outcome through callbacks.
 * The fetch module checks the response against the HTTP range contract
 * (206 + Content-Range starting where asked, 200 = the whole resource from
 * byte 0 with a known length, the advertised total equal to the asset's
 * size, identity encoding, no HTML page for a file that is not HTML, no
 * premature end; see px_http_judge) and delivers only bytes at their true
 * absolute offsets. A response that breaks the contract ends the transfer
 * with a status, never with data. A 206 that covers less than was asked
 * (an origin that caps its answers) ends PX_OK with fewer bytes: the
 * caller asks for the rest.
 *
 * The rest of the core uses transfers through struct px_fetch_ops, so unit
 * tests can put a fake in its place.
 */
#ifndef SEAMFS_FETCH_H
#define SEAMFS_FETCH_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "httpparse.h"
#include "px.h"

struct px_fetch_params {
	const char *url;                 /* copied by submit */
	const char *const *headers;      /* "Name: value", copied by submit */
	size_t nheaders;
	int64_t offset;                  /* first byte wanted */
	int64_t length;                  /* bytes wanted; 0: probe (size, mtime) */
	int64_t expect_size;             /* the asset's size, -1 if not known yet */
	int no_reuse;                    /* close the connection when done: no idle
					  * keep-alive connection outlives the transfer */
	int html_ok;                     /* the asset is an HTML file: a text/html
					  * answer may be its bytes */
	int fresh_connect;               /* open a new connection, reuse none: its
					  * answer is a new one (liveness) */
	const char *const *header_hosts; /* where headers may follow a redirect
					  * besides url's own origin (the
					  * provider's header_hosts; see
					  * px_redact_headers_ok); copied by submit */
	size_t nheader_hosts;
	/* NULL, or what url, headers and header_hosts make, prepared once
	 * (px_fetch_prep_new): then submit copies nothing of them */
	const struct px_fetch_prep *prep;
	/* for a submit through provider slots (standby.c's gate): PX_EBUSY at
	 * once when no slot is free, no wait; the fetcher ignores it */
	int no_wait;
	/* a second range, after the first and apart from it (length2 > 0;
	 * expect_size known): both asked in one request. A multipart/
	 * byteranges answer is parsed strictly (multipart.h) and both
	 * ranges' bytes come through on_data; any other good answer brings
	 * the first range's only (px_fetch_result.multi says which) */
	int64_t offset2, length2;
};

/*
 * What every transfer of one source sends: its URL, its headers (with
 * "Accept-Encoding: identity") and where they may follow a redirect, made
 * once from p's url, headers and header_hosts (copied), for transfers that
 * name it in their params' prep: a transfer then allocates no copy of them.
 * Read-only once made, so any thread may submit with it; the caller keeps
 * it until every transfer that named it has ended (its on_done returned).
 * PX_ENOMEM on failure.
 */
struct px_fetch_prep;
enum px_status px_fetch_prep_new(const struct px_fetch_params *p,
				 struct px_fetch_prep **out) PX_WUR;
void px_fetch_prep_free(struct px_fetch_prep *p);

/* A transfer paused this long (ms) is ended by the fetch thread. */
#define PX_FETCH_IDLE_MS 30000

struct px_fetch_result {
	enum px_status status;
	int http_status;                 /* final response's status, 0 if none */
	int64_t size;                    /* total size the response gave, -1 if none */
	int64_t mtime;                   /* Last-Modified as Unix time, -1 if none */
	char etag[128];                  /* the final response's ETag as sent
					  * (quotes, W/), "" if none or longer */
	int64_t bytes;                   /* bytes delivered through on_data */
	int redirects;                   /* redirects followed to get there */
	int multi;                       /* a two-range transfer: 1 when both
					  * ranges came as multipart/byteranges,
					  * -1 when the answer was one range, the
					  * whole file or a broken multipart body
					  * (the origin's way with multiple
					  * ranges: ask for one at a time), 0
					  * when it did not tell (no answer) */
	char detail[200];                /* what happened, in words, for logs */
};

struct px_fetch_cb {
	/* Fetch thread: bytes [off, off+len) of the resource, in increasing
	 * offset order, all inside the range asked for. Must not block.
	 * Returns 1 when it took the bytes, 0 to pause the transfer: then
	 * nothing was taken, and the same bytes come again after resume. */
	int (*on_data)(void *ctx, int64_t off, const void *buf, size_t len);
	/* Fetch thread, exactly once per submitted transfer, last. */
	void (*on_done)(void *ctx, const struct px_fetch_result *res);
	void *ctx;
};

struct px_fetch_ops {
	/* Any thread. Starts a transfer; *id names it for cancel. On failure no
	 * callback is ever called. */
	enum px_status (*submit)(void *impl, const struct px_fetch_params *p,
				 const struct px_fetch_cb *cb, uint64_t *id);
	/* Any thread. Ends the transfer soon; on_done still comes, exactly once
	 * (PX_ECANCELED unless it had already finished). Unknown ids: no-op. */
	void (*cancel)(void *impl, uint64_t id);
	/* Any thread. Resumes a transfer that on_data paused. A transfer that
	 * stays paused for the idle timeout is ended (PX_ECANCELED, "idle"),
	 * which frees its connection. Unknown ids: no-op. */
	void (*resume)(void *impl, uint64_t id);
	void *impl;
};

struct px_fetch;

/* Starts the fetch thread. cfg is borrowed until px_fetch_free(). */
enum px_status px_fetch_new(const struct px_config *cfg, struct px_fetch **out) PX_WUR;

/* Any thread but the fetch thread: ends every transfer (PX_ESHUTDOWN, from
 * the fetch thread) and refuses new ones. Returns at once; idempotent. */
void px_fetch_stop(struct px_fetch *f);

/* Stops the thread (as px_fetch_stop, then waits for it) and frees. */
void px_fetch_free(struct px_fetch *f);

/* The ops table of a real fetcher. */
struct px_fetch_ops px_fetch_ops(struct px_fetch *f);

/* The core's way to transfers (core.c fills it): ops, and the fetcher
 * behind them when the core started one (NULL when a test gave its own
 * ops). */
struct px_fetcher {
	struct px_fetch *own;
	struct px_fetch_ops ops;
};

/* Called once by main, before any thread starts / after all have ended. */
enum px_status px_fetch_global_init(void) PX_WUR;
void px_fetch_global_cleanup(void);

/* libcurl's runtime version and its TLS backend ("8.4.0 (OpenSSL/3.0.17)")
 * into buf, for --version. Any thread. */
void px_fetch_version(char *buf, size_t len);

/*
 * A batch: one thread's own requests (the catalog crawler's: directory
 * pages, HEADs, one-byte GETs), run at once on a multi handle of the
 * batch's, under the fetch module's policy: http and https only, also
 * after a redirect; redirects followed up to PX_FETCH_MAX_REDIRS; TLS
 * checked unless insecure, against ca_file when given; every request
 * bounded by timeout_ms. No provider headers are sent. Not thread-safe: one
 * thread uses a batch from new to free.
 */
#define PX_FETCH_MAX_REDIRS 5

enum px_fetch_kind {
	PX_FETCH_PAGE,       /* GET of a text page, kept whole: a compressed
			      * answer is decoded, a body over body_max or
			      * with a NUL byte (a file, not a page) ends it */
	PX_FETCH_HEAD,       /* HEAD: the head only */
	PX_FETCH_FIRST_BYTE  /* GET of bytes 0-0, ended once the head is in */
};

struct px_fetch_batch_opts {
	long timeout_ms;            /* a whole request */
	long connect_timeout_ms;
	int insecure;               /* no TLS certificate or host check */
	const char *ca_file;        /* NULL: the system's; copied */
	const char *user_agent;     /* copied */
	long max_connections;       /* open at once, all hosts; requests
				     * beyond wait for one */
	size_t body_max;            /* PX_FETCH_PAGE: the most body kept */
};

struct px_fetch_reply {
	void *tag;                  /* the request's */
	int done;                   /* the transfer ended as HTTP meant: a
				     * whole answer (any status) */
	int stopped;                /* ended by the batch once it had what it
				     * wanted or could not take more: a
				     * first byte's head, too_big, binary */
	int broken;                 /* the connection broke before or during
				     * the answer (nothing, a send or receive
				     * error, a short body): worth asking again */
	char error[400];            /* when !done: libcurl's words ("" if done) */
	struct px_http_head head;   /* the final answer's head */
	int64_t mtime;              /* Last-Modified as Unix time, -1 if none */
	char *url;                  /* where the final answer came from */
	char *body;                 /* PX_FETCH_PAGE: NUL-terminated, or NULL */
	size_t len;
	int too_big;                /* the page is over body_max */
	int binary;                 /* the page has a NUL byte */
};

struct px_fetch_batch;

/* A batch; opts is copied. PX_ENOMEM on failure. */
enum px_status px_fetch_batch_new(const struct px_fetch_batch_opts *opts,
				  struct px_fetch_batch **out) PX_WUR;

/* Ends whatever is still running and frees, also the replies not taken.
 * NULL: nothing. */
void px_fetch_batch_free(struct px_fetch_batch *b);

/* Starts a request of url (copied); tag comes back in its reply. PX_ENOMEM
 * when it could not be started. */
enum px_status px_fetch_batch_add(struct px_fetch_batch *b, enum px_fetch_kind kind,
				  const char *url, void *tag) PX_WUR;

/* Moves the batch's transfers on, without waiting. PX_OK with *out one
 * finished request's reply (the caller frees it with
 * px_fetch_reply_free), PX_EAGAIN when none has finished. */
enum px_status px_fetch_batch_next(struct px_fetch_batch *b, struct px_fetch_reply **out) PX_WUR;

/* Waits at most wait_ms for any of the batch's transfers to move on. */
void px_fetch_batch_wait(struct px_fetch_batch *b, int wait_ms);

void px_fetch_reply_free(struct px_fetch_reply *r);

#endif
