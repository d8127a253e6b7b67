/*
 * fake_fetch.h - the fake fetcher of the core's unit tests, the only one:
 * a struct px_fetch_ops that serves in-memory bytes per URL in chunks,
 * inline or from its own thread, failing, hanging or refusing chosen
 * requests, honouring pause and resume as the real fetch thread does, and
 * logging every request and cancel (in the spirit of mountpoint-s3's
 * failure_client). Threads other than the test's never call cmocka's
 * asserts: they count problems, which fake_destroy() asserts on.
 *
 * The test thread sets the fields marked "set after fake_init()" before
 * the first request, or later under f->lock (FAKE_SET).
 */
#ifndef SEAMFS_TEST_FAKE_FETCH_H
#define SEAMFS_TEST_FAKE_FETCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fetch.h"

struct fake_req {
	uint64_t id;
	int index;                /* 1-based order of submit */
	int64_t offset, length, expect_size;
	int64_t offset2, length2; /* a second range asked with the first */
	int second;               /* delivering the second range */
	char url[128];
	size_t nheaders;
	char header0[128];        /* the first header, "" when none */
	const unsigned char *data;
	struct px_fetch_cb cb;
	/* the plan, fixed at submit */
	int hang;
	int skew;                 /* chunks after the first come one byte off */
	int stream;               /* open-ended: reaches the end of the data */
	enum px_status final;     /* status after the bytes */
	int64_t pos, limit;
	/* progress; under the fake's lock */
	int queued;               /* on the fetch thread */
	int cancelled;
	int paused;               /* on_data said pause; waits for resume */
	int in_data;              /* on_data is running */
	int resume_pending;       /* resumed while on_data ran */
	int done;                 /* on_done calls */
	int ended;                /* on_done has returned */
	int64_t bytes;
	int64_t bytes_at_cancel;
	int64_t next_us;          /* chunk_interval_us: its next chunk not before */
	int drip;                 /* its URL has drip_url: drip_bytes at a time */
};

#define FAKE_MAX_DOWN 4

struct fake {
	/* what each URL serves (NULL: a URL nobody made: counted a problem,
	 * served from fallback), and how long an open-ended request must be
	 * to count as a stream; set after fake_init() */
	const unsigned char *(*data_for)(const char *url);
	const unsigned char *fallback;
	int64_t stream_min;
	pthread_mutex_t lock;
	pthread_cond_t cond;      /* CLOCK_MONOTONIC */
	pthread_t thread;
	int stop;
	/* what it serves */
	int64_t size;
	size_t chunk;
	int threaded;
	/* faults: requests fail_from .. fail_from+fail_count-1 fail after
	 * fail_after bytes (the first of them) or fail_after_more (the rest,
	 * -1: the same) */
	int fail_from, fail_count;
	enum px_status fail_status;
	int64_t fail_after, fail_after_more;
	int hang_from;            /* requests from this one on never answer */
	int multipart;            /* a request for two ranges gets both, as a
				   * multipart answer (result multi 1); 0: the
				   * first only, as one range (multi -1) */
	int fast_end;             /* threaded: submit returns only after the
				   * transfer ended (or paused), as when a quick
				   * failure beats the caller */
	int hold_cancel;          /* cancelled transfers wait for the test (or
				   * fake_stop): a wedged fetcher */
	/* sampling of the read-ahead budget */
	_Atomic int64_t *watch;
	int64_t watch_max;
	/* log */
	struct fake_req **reqs;
	int nreq, capreq;
	int open_streams, max_open_streams;
	int open_reqs, max_open_reqs;  /* submitted, on_done not yet returned */
	int64_t delivered;
	int ncancel, ncancel_unknown, ndone, npause, nresume, nresume_late;
	uint64_t last_cancel;
	int problems;             /* seen off the test thread */

	/* --- added for the tests that had their own fakes; set after
	 * fake_init(), all off by default */
	/* what a probe (length 0) that succeeds reports, as an origin's answer
	 * does: the size, this mtime and this ETag; mtime 0: no totals (size
	 * and mtime -1, as for every range answer) */
	int64_t mtime;
	char etag[64];
	const char *probe_url;    /* a probe of a URL that contains it reports */
	int64_t probe_size;       /* this size instead (a source that lies) */
	int skew_index;           /* this request (1-based) delivers its chunks
				   * after the first one byte off */
	enum px_status submit_status; /* not PX_OK: submit refuses with it; the
				   * request is counted in refused, not logged */
	int refused;
	/* threaded: no request moves until gate_open are open at once, or
	 * gate_nreq (when > 0) have been submitted; 0: no gate. Shows how many
	 * requests a caller keeps in flight (max_open_reqs). Cancels pass. */
	int gate_open, gate_nreq;
	int size_unknown_ok;      /* ranges may come with expect_size -1 (a
				   * reader not yet told the size), not only
				   * with the fake's size */
	int stopped;              /* fake_stop() has run */
	int64_t chunk_interval_us; /* threaded: each request delivers at most
				   * one chunk this often, as an origin that
				   * caps each connection's speed; 0: no cap */
	/* origins that died (fake_host_down): every request to a URL that
	 * contains host delivers `after` bytes, then ends with status */
	struct { char host[64]; enum px_status status; int64_t after; } down[FAKE_MAX_DOWN];
	int refuse_next_ending;   /* > 0: the next submit is refused (PX_ECONNECT,
				   * counted in refused), and request
				   * refuse_next_ending (1-based) ends first,
				   * with fail_status, in the submitting thread:
				   * a transfer that fails while its reader
				   * starts another. Reset by that submit */
	const char *drip_url;     /* threaded: a request whose URL contains it
				   * drips: an honest answer, then drip_bytes
				   * every drip_interval_us; NULL: none */
	size_t drip_bytes;
	int64_t drip_interval_us;
};

/* The counters of the log, read at once under the lock. */
struct fake_counts {
	int nreq, ncancel, ndone, npause, nresume, refused;
	int max_open_reqs, max_open_streams;
	int64_t delivered, watch_max;
	uint64_t last_cancel;
};

/* Changes a field of the fake under its lock, as a test does while the
 * fake's thread or the core's threads run. */
#define FAKE_SET(f, field, v) \
	do { \
		pthread_mutex_lock(&(f)->lock); \
		(f)->field = (v); \
		pthread_cond_broadcast(&(f)->cond); \
		pthread_mutex_unlock(&(f)->lock); \
	} while (0)

void fake_init(struct fake *f, int64_t size, int threaded, size_t chunk);
/* Stops the fetch thread, ending every transfer still open (PX_ESHUTDOWN,
 * a cancelled one PX_ECANCELED) with its on_done, as the real fetcher's
 * stop does; the log stays readable until fake_destroy(). Idempotent.
 * A request submitted after it never ends (fake_destroy's check says so). */
void fake_stop(struct fake *f);
/* fake_stop(), then frees the log and, when check is set, asserts that
 * every transfer ended exactly once and nothing odd was seen. */
void fake_destroy(struct fake *f, int check);
struct px_fetch_ops fake_ops(struct fake *f);
/* A copy of request i (1-based). */
struct fake_req fake_req(struct fake *f, int i);
int fake_nreq(struct fake *f);
struct fake_counts fake_counts(struct fake *f);
/* Waits, at most ms, until pred holds (checked under the lock). */
int fake_wait(struct fake *f, int (*pred)(struct fake *, int), int arg, int64_t ms);
int all_ended(struct fake *f, int unused);
int req_paused(struct fake *f, int i);
int req_cancelled(struct fake *f, int i);

/* From the next request on, `count` requests deliver `after` bytes and
 * then end with st (the fail_* fields, set under the lock). Any thread. */
void fake_fail_next(struct fake *f, int count, enum px_status st, int64_t after);

/* From the next request on, every request to a URL containing host
 * delivers `after` bytes and then ends with st (PX_ECONNECT, after 0: a
 * dead origin); st PX_OK brings it back. Any thread. */
void fake_host_down(struct fake *f, const char *host, enum px_status st, int64_t after);

#endif
