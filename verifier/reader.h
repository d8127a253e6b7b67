/*
 * reader.h - how the verifier reads bytes: an abstract reader, so that the
 * daemon can plug in one that respects its providers' connection limits,
 * the CLI one over a plain fetcher or a local file, and tests a fake.
 *
 * The verifier never retries and never waits beyond what the reader
 * bounds: every read must return (data or a status) within the reader's
 * own deadline.
 */
#ifndef SEAMFS_VF_READER_H
#define SEAMFS_VF_READER_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

/* One range of a batch: in off, len, buf (len bytes, the caller's);
 * out st, got and why. */
struct vf_range {
	int64_t off;
	size_t len;
	void *buf;
	size_t got;             /* bytes of [off, off+got) placed in buf */
	enum px_status st;      /* PX_OK only when got == len */
	char why[160];          /* on failure, what happened, in words ("" if none) */
};

struct vf_reader {
	/*
	 * Required. Reads [off, off+len) into buf, sets *got to the bytes
	 * placed there. Returns PX_OK only with *got == len; any failure
	 * (error, timeout, fewer bytes) returns a status != PX_OK. Must be
	 * bounded in time. Called from the verifier's calling thread.
	 */
	enum px_status (*read)(void *ctx, int64_t off, size_t len, void *buf, size_t *got);
	/*
	 * Optional (NULL: the verifier calls read() for each range in turn).
	 * Reads every range of r[0..n), as many at once as the reader sees
	 * fit, and fills each range's got, st and why. Returns when all are
	 * done or given up, within the reader's deadline.
	 */
	void (*read_batch)(void *ctx, struct vf_range *r, size_t n);
	void *ctx;
};

#endif
