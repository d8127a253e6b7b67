/*
 * session.h - open file handles of assets, and the sessions they belong to.
 *
 * An open of an asset joins the session of the same client (see the
 * session_key option) and asset when there is one: open, or closed less
 * than session_ttl ago. Otherwise it makes a new session on a source
 * chosen by provider.c (fewest sessions, within connection limits, live
 * providers first). The session fixes the source for every read of every
 * handle of it: an open file never mixes bytes of two sources, unless a
 * cutover moved the session to a standby proven identical. Each handle
 * reads through its own transfers, and every transfer holds a slot of the
 * source's provider.
 */
#ifndef SEAMFS_SESSION_H
#define SEAMFS_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "px.h"

struct px_core;

struct px_handle;

/*
 * Opens a handle on a listed asset for client (the key the fs computed
 * from the FUSE caller). PX_ENOSOURCE when no source can serve; PX_EBUSY
 * when every provider stayed at its limit for admission_timeout. Any
 * thread.
 */
enum px_status px_handle_open(struct px_core *core, size_t asset, uint64_t client,
			      struct px_handle **out) PX_WUR;

/*
 * Reads up to len bytes at off into buf. Returns PX_OK with *got == len,
 * or fewer only at the end of the asset (0 at or past it). Fails with the
 * source's status after bounded retries, PX_EBUSY when no slot of the
 * provider freed in time, or PX_ETIMEDOUT once read_timeout has passed:
 * never blocks longer than that (plus a short bounded cancel). Several
 * threads may read one handle at once.
 */
enum px_status px_handle_read(struct px_handle *h, int64_t off, size_t len,
			      void *buf, size_t *got) PX_WUR;

/*
 * Where a read's bytes are, to reply without copying them once more: in the
 * caller's buffer, or pinned in a stream's window (which then cannot reuse
 * that space until px_handle_zc_done()).
 */
struct px_zc {
	struct iovec iov[2];
	int iovcnt;
	struct px_stream *st;  /* internal: the pinned stream, or NULL */
	int pin;
	void *wt;              /* internal: a direct read's transfer (buffer) */
	struct px_core *core;  /* internal: cache fills held for the reply */
	size_t asset;
	uint64_t held[3];      /* one per cache slot (PX_CACHE_SLOTS) */
};

/*
 * Like px_handle_read(), but the bytes may stay where the stream holds
 * them: on PX_OK, zc->iov says where they are (buf or the window), and the
 * caller calls px_handle_zc_done(zc) once it has replied. buf holds len
 * bytes, or is NULL: the bytes a read copies then go to the calling
 * thread's own buffer, made once and kept until the thread ends, valid
 * until its next read (a FUSE worker replies before it reads again). On
 * failure nothing is pinned.
 */
enum px_status px_handle_read_zc(struct px_handle *h, int64_t off, size_t len,
				 void *buf, struct px_zc *zc) PX_WUR;

/* Releases what px_handle_read_zc() pinned. */
void px_handle_zc_done(struct px_zc *zc);

/* Notes the process (or thread) pid that opened h, and the inode the
 * file has on the mount, for the status: a session's offset follows where
 * such a process's open file is (px_proc_positions), also over bytes the
 * page cache gives it. Any thread. */
void px_handle_note_opener(struct px_handle *h, uint64_t pid, uint64_t ino);

/* Closes the handle: cancels its transfers, and leaves its session, which
 * lingers session_ttl for a reopen. Waits for nothing. NULL: no-op. */
void px_handle_close(struct px_handle *h);

/* The id of the handle's session (the same for every handle that joined). */
uint64_t px_handle_session_id(const struct px_handle *h);

/* The handle's session (borrowed while the handle is open): what a cutover
 * (standby.h) moves. */
struct px_session;
struct px_session *px_handle_session(struct px_handle *h);

/* Tells the read engine how far the kernel reads ahead of a reader on
 * this mount (the bdi's read_ahead_kb, in bytes; 0: unknown, taken as
 * 1 MiB). Reads that far ahead of a stream are the kernel's read-ahead,
 * not a seek. Any thread. */
void px_stream_set_kernel_readahead(struct px_core *core, int64_t bytes);

#endif
