/*
 * feed.h - a writer's input served by the daemon over a private socket.
 *
 * A seamfs-writer that the daemon feeds reads the source asset through
 * the daemon's own read path (sources, balancing, verification, cutover),
 * as a player of the mount does, but not through the mount: a file open
 * in the mount keeps it busy, and `fusermount3 -u` failed with EBUSY for
 * as long as a writer ran (issue 26). The daemon hands the writer one end
 * of a socketpair (its fd PX_FEED_FD); the protocol is synchronous, in
 * host byte order (both ends are on this host):
 *
 *   daemon -> writer, once:  struct px_feed_hello (size, or why not)
 *   writer -> daemon:        struct px_feed_req (offset, length)
 *   daemon -> writer:        struct px_feed_reply, then n bytes
 *
 * A reply with fewer bytes than asked is the end of the asset; a status
 * other than PX_OK is a failed read (the writer translates it at its edge).
 * Either end closing ends the feed.
 * docs/transcode.md "The writer's input".
 */
#ifndef SEAMFS_FEED_H
#define SEAMFS_FEED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "px.h"

#define PX_FEED_FD 3                /* the writer's end, in the writer */
#define PX_FEED_MAGIC 0x31464653u   /* "SFF1" */
#define PX_FEED_MAX (1u << 20)      /* the longest read a request may ask */

struct px_feed_hello {
	uint32_t magic;
	int32_t status;   /* PX_OK, or why the daemon cannot read the asset */
	int64_t size;     /* the source asset's size */
};

struct px_feed_req {
	int64_t off;
	uint32_t len;     /* 1 to PX_FEED_MAX */
	uint32_t zero;
};

struct px_feed_reply {
	int32_t status;   /* enum px_status of the read */
	uint32_t n;       /* bytes that follow */
};

/*
 * How the daemon reads a source asset for a writer: its own read path,
 * given by the composition root (core.c), since transcode/ does not see
 * read/. listed: whether the asset is served now (not left out at mount
 * nor removed by a reload); open/read/close: a handle as a player's open
 * of the mount gets one (client: the writer's pid, so that it has a
 * session of its own); size: the asset's size.
 */
struct px_tc_input {
	int (*listed)(void *arg, size_t asset);
	int64_t (*size)(void *arg, size_t asset);
	enum px_status (*open)(void *arg, size_t asset, uint64_t client, void **h);
	enum px_status (*read)(void *h, int64_t off, size_t len, void *buf, size_t *got);
	void (*close)(void *h);
	void *arg;
};

struct px_feeds;
struct px_feed;

/* A set of feeds. NULL on out of memory. */
struct px_feeds *px_feeds_new(void);

/*
 * Starts a feed of asset through in (borrowed until the feed ends): a
 * thread that serves the writer's requests on one end of a new
 * socketpair; *writer_fd is the other end (close-on-exec), for the writer
 * to get as PX_FEED_FD; the caller closes its copy once the writer is
 * spawned, and then must call px_feed_go() with *out. what names the
 * writer's job in log lines. Feeds that ended are reaped here. Any thread.
 */
enum px_status px_feeds_start(struct px_feeds *fs, const struct px_tc_input *in,
			      size_t asset, const char *what, int *writer_fd,
			      struct px_feed **out) PX_WUR;

/*
 * Lets feed (of fs, from px_feeds_start) open its handle, with the
 * writer's pid as the client (the status shows it as the reader's pid);
 * pid 0: the writer did not start, the feed just ends. Once per feed,
 * which then belongs to fs alone. Any thread.
 */
void px_feed_go(struct px_feeds *fs, struct px_feed *feed, pid_t pid);

/*
 * Ends every feed: shuts its socket down (a request being read fails)
 * and waits for its thread, which closes its handle. A read in flight
 * ends within read_timeout, at once once the core is stopping. Then
 * frees fs. NULL: no-op.
 */
void px_feeds_free(struct px_feeds *fs);

#endif
