/*
 * rangeread.h - vf_readers over a source: an HTTP(S) URL read through
 * px_fetch_ops, or a local path read with pread(). What the verifier and
 * `seamfs verify` read sources with.
 *
 * HTTP: every range is one bounded request (Range: bytes=a-b) that must
 * answer within the reader's timeout from its submit, else it is cancelled
 * and the range fails with PX_ETIMEDOUT. A batch keeps up to `parallel`
 * requests in flight. No retries: a failed range is the verifier's
 * "inconclusive". The reader does not count against provider limits; the
 * daemon wraps or replaces it where limits matter.
 */
#ifndef SEAMFS_RANGEREAD_H
#define SEAMFS_RANGEREAD_H

#include <stddef.h>
#include <stdint.h>
#include "fetch.h"
#include "px.h"
#include "reader.h"
#include "store.h"

#define PX_RANGEREAD_PARALLEL 8

struct px_rangeread;

/*
 * A reader of url through ops (borrowed until px_rangeread_free(), like
 * the fetcher behind it). url and headers are copied. timeout_ms (> 0)
 * bounds each request; parallel (1..64) requests at most in flight.
 */
enum px_status px_rangeread_new_http(const struct px_fetch_ops *ops, const char *url,
				     const char *const *headers, size_t nheaders,
				     int64_t timeout_ms, unsigned parallel,
				     struct px_rangeread **out) PX_WUR;

/*
 * A reader of a local file. Opening it is tried now; a failure is kept and
 * reported by every probe and read (PX_ENOTFOUND for ENOENT, PX_EAUTH for
 * EACCES, else PX_EIO, with strerror in why), so only PX_ENOMEM fails here.
 */
enum px_status px_rangeread_new_path(const char *path, struct px_rangeread **out) PX_WUR;

/*
 * Opens path source k of the asset for reading. A catalog path as it
 * stands (px_open_regular: the operator's choice). A copy (the source
 * names a storage) only beneath its storage's directory, never through a
 * link nor onto another file system (px_open_in_dir), while the storage is
 * the file system first seen there, and only as the file it was made or
 * found as (its size, device and inode: px_sources_add_copy); one found
 * replaced is marked for the copies thread (src_rt.in_way), which drops
 * it. The descriptor, or -1 with errno (ELOOP, EXDEV: a link in the way;
 * ESTALE: another file; ENODEV: the storage is not there). Any thread
 * that holds none of the core's locks but a session's fd_lock.
 */
struct px_core;
int px_source_open(struct px_core *core, size_t asset, size_t k);

/* A path reader over fd (opened by the caller, e.g. px_source_open: a
 * copy beneath its storage; takes ownership, also on error); fd -1: the
 * open failed with the errno still set, and every read says so (path
 * names it). PX_ENOMEM. */
enum px_status px_rangeread_new_fd(const char *path, int fd, struct px_rangeread **out) PX_WUR;

/* Frees rr. Never waits: once a read has returned, none of its requests
 * refers to rr any more (an abandoned one holds only its own batch).
 * NULL: no-op. */
void px_rangeread_free(struct px_rangeread *rr);

/* Whether an HTML answer may be the source's bytes (the asset is an HTML
 * file); by default a text/html answer fails the read. */
void px_rangeread_set_html_ok(struct px_rangeread *rr, int ok);

/* Where the headers may follow a redirect besides the URL's own origin
 * (the provider's header_hosts, px_fetch_params); borrowed until
 * px_rangeread_free(). By default: nowhere else. */
void px_rangeread_set_header_hosts(struct px_rangeread *rr, const char *const *hosts, size_t n);

/* The size the source must have from now on (-1: any); a response
 * advertising another total fails the read. */
void px_rangeread_set_size(struct px_rangeread *rr, int64_t size);

/*
 * Asks the source its size, ETag and Last-Modified (HTTP: a one-byte range
 * request; path: fstat, with an ETag made of inode and mtime in ns). On
 * failure returns the status and writes why in words. Bounded by the timeout.
 */
enum px_status px_rangeread_probe(struct px_rangeread *rr, struct vf_seen *out,
				  char *why, size_t whylen) PX_WUR;

/* The vf_reader over rr (rr borrowed while the reader is used). Several
 * threads may read at once; px_rangeread_set_size() must not race them. */
struct vf_reader px_rangeread_reader(struct px_rangeread *rr);


/* ---- a listed asset's sources, for the readers above */

struct px_core;

/* Whether source `source` of asset `asset` is a path (read with pread), not
 * a URL (read through transfers). */
int px_source_is_path(const struct px_core *core, size_t asset, size_t source);

/* The fetch parameters for bytes [off, off+len) of a listed asset from one
 * of its HTTP sources: its URL, its provider's headers, the asset's size,
 * and the request prepared once for the source (made at its first
 * transfer), so that a transfer copies none of them. The strings are
 * borrowed from the catalog. Any thread. */
struct px_fetch_params px_source_range(struct px_core *core, size_t asset,
				       size_t source, int64_t off, int64_t len);

/* Frees every source's prepared request: with the core, once no transfer
 * runs. */
void px_source_preps_free(struct px_core *core);

/* Bounds every request of rr by until (px_now_ms() clock; 0: no bound
 * beyond each request's timeout): one not yet started when it passes is
 * not asked, and fails with PX_ETIMEDOUT. Before the first read. */
void px_rangeread_set_until(struct px_rangeread *rr, int64_t until);

/* A request of rr that makes no progress for stall_ms (clock.h's progress
 * clock at min_rate bytes a second; from its start, so the answer's head
 * counts) is cancelled and fails with PX_ETIMEDOUT, and rr's batch asks for
 * no more ranges (0: no stall rule, the default). HTTP only; before the
 * first read. */
void px_rangeread_set_stall(struct px_rangeread *rr, int64_t stall_ms, int64_t min_rate);

/* The rate (bytes a second) of the slowest range rr has read whose body,
 * from its first byte on, came under the min_rate of px_rangeread_set_stall
 * for at least 100 ms; -1 when none did. Any thread. */
int64_t px_rangeread_slow_rate(struct px_rangeread *rr);

#endif
