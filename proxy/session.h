/*
 * session.h - one playback of one asset: the source it reads from and the
 * reads it serves.
 *
 * For now a session is one open file handle and takes the first source of
 * its asset that is not known to be dead; it keeps that source for all its
 * reads (an open file never mixes bytes of two sources). Balancing,
 * reopen affinity and cutover build on this interface.
 */
#ifndef SEAMFS_SESSION_H
#define SEAMFS_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "core.h"
#include "px.h"

struct px_session;

/*
 * Opens a session on a listed asset. client identifies the caller (the
 * FUSE caller's pid) for logs. PX_ENOSOURCE when no source can serve.
 * Any thread.
 */
enum px_status px_session_open(struct px_core *core, size_t asset, uint64_t client,
			       struct px_session **out) PX_WUR;

/*
 * Reads up to len bytes at off into buf. Returns PX_OK with *got == len,
 * or fewer only at the end of the asset (0 at or past it). Fails with the
 * source's status after bounded retries, or PX_ETIMEDOUT once
 * read_timeout has passed: never blocks longer than that (plus a short
 * bounded cancel). Several threads may read one session at once.
 */
enum px_status px_session_read(struct px_session *s, int64_t off, size_t len,
			       void *buf, size_t *got) PX_WUR;

/*
 * Where a read's bytes are, to reply without copying them once more: in the
 * caller's buffer, or pinned in a stream's window (which then cannot reuse
 * that space until px_session_zc_done()).
 */
struct px_zc {
	struct iovec iov[2];
	int iovcnt;
	struct px_stream *st;  /* internal: the pinned stream, or NULL */
	int pin;
};

/*
 * Like px_session_read(), but the bytes may stay where the stream holds
 * them: on PX_OK, zc->iov says where they are (buf or the window), and the
 * caller calls px_session_zc_done(zc) once it has replied. buf must hold
 * len bytes. On failure nothing is pinned.
 */
enum px_status px_session_read_zc(struct px_session *s, int64_t off, size_t len,
				  void *buf, struct px_zc *zc) PX_WUR;

/* Releases what px_session_read_zc() pinned. */
void px_session_zc_done(struct px_zc *zc);

/* Ends the session; waits for nothing. NULL: no-op. */
void px_session_close(struct px_session *s);

uint64_t px_session_id(const struct px_session *s);

#endif
