/*
 * fake_fetch.h - a fake fetcher for the core's unit tests: a struct
 * px_fetch_ops that serves in-memory bytes per URL in chunks, inline or
 * from its own thread, failing or hanging chosen requests, honouring pause
 * and resume as the real fetch thread does, and logging every request and
 * cancel. Threads other than the test's never call cmocka's asserts: they
 * count problems, which fake_destroy() asserts on.
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
	char url[128];
	const unsigned char *data;
	struct px_fetch_cb cb;
	/* the plan, fixed at submit */
	int hang;
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
};

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
	int fast_end;             /* threaded: submit returns only after the
				   * transfer ended (or paused), as when a quick
				   * failure beats the caller */
	int hold_cancel;          /* cancelled transfers wait for the test */
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
};

void fake_init(struct fake *f, int64_t size, int threaded, size_t chunk);
void fake_destroy(struct fake *f, int check);
struct px_fetch_ops fake_ops(struct fake *f);
/* A copy of request i (1-based). */
struct fake_req fake_req(struct fake *f, int i);
int fake_nreq(struct fake *f);
/* Waits, at most ms, until pred holds (checked under the lock). */
int fake_wait(struct fake *f, int (*pred)(struct fake *, int), int arg, int64_t ms);
int all_ended(struct fake *f, int unused);
int req_paused(struct fake *f, int i);
int req_cancelled(struct fake *f, int i);

#endif
