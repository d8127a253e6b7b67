/*
 * ownprint.h - each source's own sampled fingerprint, as far as it is known
 * (ownprint.c): the reference a session's cutover is judged against.
 */
#ifndef SEAMFS_OWNPRINT_H
#define SEAMFS_OWNPRINT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "fingerprint.h"
#include "px.h"

struct px_core;

/*
 * The sample plan of the asset (its size's), made on first need and kept
 * until the core is freed; NULL while the size is not known or out of
 * memory. Any thread; takes no lock.
 */
const struct vf_plan *px_own_plan(struct px_core *core, size_t asset);

/*
 * The bytes [off, ...) in iov came from source k of the asset: each sample
 * of the plan they cover wholly and that the source's own fingerprint
 * lacks is hashed into it, and compared with the asset's reference when
 * it has one (not for a verified source, whose sweep compared them all):
 * *ref_differs gets the first that differs (-1: none). The read path's
 * cost once the fingerprint is whole: an atomic load. Any thread but the fetch thread; takes vf_lock briefly, never
 * across hashing.
 */
void px_own_note(struct px_core *core, size_t asset, size_t k, int64_t off,
		 const struct iovec *iov, int iovcnt, long *ref_differs);

/*
 * Copies source k's own fingerprint into out (an empty one of the asset's
 * size when none was taken). Returns how many samples it has. Takes
 * vf_lock; any thread.
 */
size_t px_own_get(struct px_core *core, size_t asset, size_t k, struct vf_fingerprint *out);

/*
 * Adds the samples of fp (a sweep's or a fetch's) that source k's own
 * fingerprint lacks. Returns a sample both had with other bytes, or -1.
 * Takes vf_lock; any thread.
 */
long px_own_merge(struct px_core *core, size_t asset, size_t k, const struct vf_fingerprint *fp);

/* Whether source k's own fingerprint is whole. Any thread; no lock. */
int px_own_full(struct px_core *core, size_t asset, size_t k);

/* How one fingerprint backs another (px_own_agrees). */
enum px_own_cmp {
	PX_OWN_SAME,     /* b has every sample a has, with the same bytes */
	PX_OWN_DIFFERS,  /* a sample both have differs (or the sizes do) */
	PX_OWN_LACKS     /* none differs, but b lacks one that a has */
};

/*
 * Compares b with a on the samples a has. *n: for PX_OWN_SAME how many
 * were compared, for PX_OWN_DIFFERS the first that differs, for
 * PX_OWN_LACKS the first b lacks. No I/O, no lock.
 */
enum px_own_cmp px_own_agrees(const struct vf_fingerprint *a, const struct vf_fingerprint *b,
			      size_t *n);

/* Frees the asset's plan and its sources' own fingerprints; at
 * px_core_free, vf_lock not needed. */
void px_own_release(struct px_core *core, size_t asset);

#endif
