/*
 * store.h - fingerprints and verdicts kept in the state directory, so a
 * source is read once, not at every session or restart.
 *
 * One JSON file per asset, DIR/<16 hex digits of SHA-256(asset id)>.json,
 * holding a record per source (keyed by the name the caller gives: the
 * daemon and `seamfs verify` give px_redact_key's, so that no credential of
 * a URL is written; records an older seamfs keyed by a URL with userinfo
 * or a query are dropped at the file's next write): the validators
 * seen when it was read (size, ETag, Last-Modified), its complete sampled
 * fingerprint, and its last final verdict with the id of the reference it
 * was made against; and which source's fingerprint is the asset's
 * reference. Files are written whole, tmp + fsync + rename, so a crash
 * leaves the old file or the new one. A file or record that does not parse
 * or breaks a rule (docs/verifier.md) is reported through the log callback,
 * naming the file and field, and treated as absent; the next put replaces
 * it. Thread-safe: one lock around each read-modify-write. Two processes
 * writing the same asset at once may lose one's update, never corrupt it.
 */
#ifndef SEAMFS_VF_STORE_H
#define SEAMFS_VF_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "fingerprint.h"
#include "kvstore.h"
#include "px.h"
#include "verdict.h"

#define VF_ETAG_MAX 128                /* with NUL; longer ETags are not kept */
#define VF_STORE_MAX_FILE (4u << 20)   /* larger files are corrupt */
#define VF_STORE_MAX_SOURCES 256       /* records per asset */
#define VF_STORE_MAX_NAME 4096         /* bytes of a source's URL or path */

/* What identifies the bytes of a source: its size, and ETag and
 * Last-Modified when it gives them (path sources: mtime, and an "etag"
 * made of the inode and the mtime in nanoseconds). */
struct vf_seen {
	int64_t size;                  /* -1: unknown */
	int64_t mtime;                 /* Unix seconds, -1: unknown */
	char etag[VF_ETAG_MAX];        /* "" when unknown */
};

struct vf_record {
	struct vf_seen seen;
	int has_fp;
	struct vf_fingerprint fp;      /* complete, fp.size == seen.size */
	int has_verdict;
	struct vf_verdict verdict;     /* MATCH, MISMATCH or SIZE_MISMATCH */
	char ref[VF_FINGERPRINT_ID_LEN]; /* id of the reference it was made against;
					  * "" when none (a size mismatch is
					  * against the asset's size) */
	int64_t time;                  /* Unix seconds it was written, 0 if unknown */
};

/* Receives one line (no newline) about a corrupt file or record. */
typedef void (*vf_log_fn)(void *ctx, const char *line);

struct vf_store;

/*
 * Opens the store in dir (created, mode 0700, with missing parents). log
 * (may be NULL) and log_ctx are borrowed until vf_store_free(). PX_EIO with
 * a message naming dir in err when it cannot be made.
 */
enum px_status vf_store_open(const char *dir, vf_log_fn log, void *log_ctx,
			     struct vf_store **out, char *err, size_t errlen) PX_WUR;
void vf_store_free(struct vf_store *s);

/*
 * Cluster mode (docs/cluster.md): the records are kept in shared (borrowed,
 * until vf_store_free) too, under PREFIX:vf:<the file's name>, so that a
 * source verified on one host is not sampled again on another, and a
 * mismatch found on one is found by the others when they verify that
 * source. Reads merge the shared records over the local file's; a store
 * that does not answer leaves the local file as the answer (logged once).
 */
void vf_store_share(struct vf_store *s, struct px_store *shared);

/*
 * Whether two sightings of a source show the same bytes: equal sizes (both
 * known) and, for ETag and for mtime, equal when either side knows it (a
 * validator that appeared or vanished is a change).
 */
int vf_seen_same(const struct vf_seen *a, const struct vf_seen *b);

/*
 * Returns 1 and fills *out when a valid record for (asset, source) exists
 * and, when now is not NULL, vf_seen_same(&record.seen, now). 0 otherwise:
 * absent, corrupt, or invalidated by a change (a later put replaces it).
 * Any thread.
 */
int vf_store_get(struct vf_store *s, const char *asset, const char *source,
		 const struct vf_seen *now, struct vf_record *out);

/*
 * Writes the record of (asset, source), replacing any, then the file (tmp +
 * fsync + rename). An INCONCLUSIVE verdict or an incomplete fingerprint is
 * not stored (has_* taken as 0). When reference is set, this source becomes
 * the asset's reference (it must carry a fingerprint, else PX_EINVAL); when
 * not and it was the reference, the asset has no reference any more.
 * PX_EINVAL for names longer than VF_STORE_MAX_NAME or a full file; PX_EIO
 * with the file's name in err. Any thread.
 */
enum px_status vf_store_put(struct vf_store *s, const char *asset, const char *source,
			    const struct vf_record *rec, int reference,
			    char *err, size_t errlen) PX_WUR;

/*
 * The asset's reference: returns 1, its source's name (cut to srclen) and
 * record when one is stored and valid; 0 otherwise. The caller checks the
 * record's seen against what the source shows now, if it can. Any thread.
 */
int vf_store_reference(struct vf_store *s, const char *asset, char *source, size_t srclen,
		       struct vf_record *out);

/* The file that holds the asset's records (for messages). */
enum px_status vf_store_file(const struct vf_store *s, const char *asset, char *out,
			     size_t len) PX_WUR;

/*
 * Parses the text of one store file of `asset` (len bytes, no NUL needed)
 * as vf_store_get would. PX_OK when the file as a whole is usable, with
 * *nrecords valid records (corrupt records are skipped, the first problem
 * is in err); PX_EINVAL with the problem in err otherwise. For the fuzzer
 * and tests. Any thread.
 */
enum px_status vf_store_parse(const char *asset, const char *text, size_t len,
			      size_t *nrecords, char *err, size_t errlen) PX_WUR;

#endif
