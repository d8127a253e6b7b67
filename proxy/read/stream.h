/*
 * stream.h - a session's open-ended transfer and its read-ahead window
 * (stream.c). Internal to read/.
 */
#ifndef SEAMFS_STREAM_H
#define SEAMFS_STREAM_H

#include <stdint.h>
#include <sys/uio.h>
#include "context.h"
#include "px.h"

struct px_session;
/* ---- stream.c: a session's open-ended transfer and read-ahead window */
struct px_stream;

/*
 * Starts a stream of the session's source at off, its window reserved from
 * the read-ahead budget, its transfers in the session's provider slots
 * (waiting until deadline for one). The transfer runs first_fill bytes
 * ahead of the reader at first (0: the default, 2 MiB), a limit that
 * doubles while the reader keeps up. PX_ENOMEM when the budget has no room
 * for even the smallest window: the caller reads without one.
 */
enum px_status px_stream_start(struct px_core *core, struct px_session *sess, size_t asset,
			       int64_t off, int64_t first_fill, int64_t deadline,
			       struct px_stream **out);

/* Whether the stream's transfer is paused with no reader waiting on it: a
 * slot its session may take back. With `unread`, also a transfer that runs
 * (or stalls) with no reader waiting on it: read-ahead its session's reader
 * has left, for example by a seek. */
int px_stream_idle(struct px_stream *st, int unread);
/* Whether the stream is over (closed, or ended by a cutover to a path). */
int px_stream_closed(struct px_stream *st);

struct px_read_req;
struct px_failed;

/*
 * Reads rq's bytes from the stream's window, waiting (until rq->deadline)
 * for bytes still on their way. A transfer that fails (an error, a stall)
 * is reported in fd with PX_EFAILED: the caller takes the one decision
 * (px_retry_failed) and hands it to px_stream_decided(). With
 * rq->zc the bytes are not copied: zc->iov (zc->iovcnt entries) points
 * into the window, which keeps them until px_stream_unpin(st, zc->pin)
 * (zc->st is set); with no pin free, or no zc, they are copied into
 * rq->buf (zc->iovcnt 0).
 * PX_EDECLINED when rq->off is behind the window (*behind set: a
 * straggler of a sequential run; read it directly, keep the stream) or
 * too far ahead of it (a jump: the caller ends this stream). A read
 * waiting on a stream that another thread closes gets PX_EDECLINED with
 * *behind set too: it reads directly, never fails for it.
 */
enum px_status px_stream_read(struct px_stream *st, const struct px_read_req *rq, int *behind,
			      struct px_failed *fd);

/* The decision on fd's failure (PX_EFAILED from px_stream_read) was next:
 * with PX_OK the failed transfer starts again from the byte it reached.
 * Returns next, or why the restart could not start, or PX_OK when another
 * reader restarted the single transfer meanwhile (look again). Call it
 * after every PX_EFAILED, whatever the decision: until then a failed part
 * waits. No lock held. */
enum px_status px_stream_decided(const struct px_failed *fd, enum px_status next,
				 int64_t deadline);
void px_stream_unpin(struct px_stream *st, int pin);

/* Cancels the transfer and drops the session's reference; the window is
 * freed when the last reference goes. */
void px_stream_close(struct px_stream *st);

/* Extra references for a reader that uses the stream outside the session's
 * lock. */
void px_stream_ref(struct px_stream *st);
void px_stream_unref(struct px_stream *st);

/* Copies up to max of the bytes just before pos that the window still
 * holds into out (a cutover's seam check); 0 when it holds none. Any
 * thread; takes the stream's lock. */
size_t px_stream_bytes_before(struct px_stream *st, int64_t pos, unsigned char *out, size_t max);

#endif
