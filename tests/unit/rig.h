/*
 * rig.h - the test rig of the core's unit tests, the only one: a catalog,
 * a config and a core on the fake fetcher (fake_fetch.h), set up and torn
 * down in one place.
 *
 * A test makes a rig from its catalog and the fake's settings (rig_new),
 * changes r->cfg and the fake's faults as it needs, starts the core and
 * runs discovery (rig_start), reads through handles (rig_open, rig_close)
 * and frees the rig (rig_free), which checks the fake's log.
 *
 * Rigs live on the heap and are registered, so that a test that fails an
 * assert (cmocka longjmps out of it) still has its fetch thread stopped and
 * its memory freed by rig_teardown, never left running on a dead stack.
 * The test thread alone makes, starts and frees rigs; rig_close and
 * rig_window_bytes may be called from any thread.
 */
#ifndef SEAMFS_TEST_RIG_H
#define SEAMFS_TEST_RIG_H

#include <pthread.h>
#include <stdint.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "fake_fetch.h"
#include "reads.h"
#include "session.h"
#include "state.h"

#define RIG_MAX 4               /* rigs alive at once */
#define RIG_MAX_HANDLES 8       /* handles a rig tracks (rig_open) */

struct rig_opts {
	const char *catalog;       /* the catalog, JSON text */
	/* the fake fetcher: fake_init()'s arguments and the fields to set */
	int64_t size;              /* bytes behind every URL */
	int threaded;              /* answers from its own thread, else inline */
	size_t chunk;              /* bytes per on_data */
	const unsigned char *(*data_for)(const char *url);
	const unsigned char *fallback;
	int64_t stream_min;
	int64_t mtime;             /* what a probe reports (0: no totals) */
	/* the core */
	int64_t (*clock)(void);    /* its clock (TTLs, liveness), NULL: real */
	int check_budget;          /* rig_free asserts that every read-ahead
				    * window went back to the budget */
};

struct rig {
	struct px_config cfg;      /* px_config_init()'s; change before rig_start */
	struct px_catalog *cat;    /* the test's; the core keeps its own copy */
	struct fake fake;
	struct px_fetch_ops ops;
	struct px_core *core;      /* NULL until rig_start */
	int64_t size;              /* opts.size */
	struct rig_opts opts;
	pthread_mutex_t lock;      /* guards handles */
	struct px_handle *handles[RIG_MAX_HANDLES];
};

/* Parses the catalog (fail_msg when it does not parse), sets the config
 * to its defaults and starts the fake. No core yet. */
struct rig *rig_new(const struct rig_opts *o);

/* Makes the core on the fake (with opts.clock) and runs discovery with
 * state (may be NULL) and fallback_mtime; asserts both succeed. */
void rig_start(struct rig *r, struct px_state *state, int64_t fallback_mtime);

/* Opens asset for client, asserting it opens; the rig closes the handle at
 * rig_free unless rig_close() did. */
struct px_handle *rig_open(struct rig *r, size_t asset, uint64_t client);

/* Closes a handle of rig_open(). Any thread. */
void rig_close(struct rig *r, struct px_handle *h);

/* The read layer's counters and bytes in use now (px_reads_stats). */
struct px_reads_stats rig_reads(struct rig *r);

/* The read-ahead budget the stream windows hold: the budget in use less
 * what the cached heads and tails hold, which the budget covers too and
 * which stay after the sessions. Any thread. */
int64_t rig_window_bytes(struct rig *r);

/*
 * Frees the rig: closes the handles still open, stops the fake (ending
 * what is left, callbacks into a live core), frees the core, the fake and
 * the catalog. When check is set it first waits (at most 5 s) for every
 * transfer to end by itself and asserts that it did, then asserts the
 * fake's log is clean (fake_destroy) and, with opts.check_budget, that
 * every window went back to the budget.
 */
void rig_release(struct rig *r, int check);
void rig_free(struct rig *r);   /* rig_release(r, 1) */

/* A cmocka teardown: releases, unchecked, every rig a test left. */
int rig_teardown(void **state);

/* Reads [off, off+len) through h and fails the test unless every byte
 * equals data[off..]: the bytes the fake serves. Test thread only. */
void rig_read_check(struct px_handle *h, const unsigned char *data, int64_t off, size_t len);

/* A clock for the core's TTLs, backoffs and liveness that moves only when
 * a test moves it (opts.clock = rig_clock): starts at RIG_CLOCK_START ms. */
#define RIG_CLOCK_START 1000000
int64_t rig_clock(void);
void rig_advance(int64_t ms);

#endif
