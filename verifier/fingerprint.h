/*
 * fingerprint.h - a file's sampled fingerprint: its size and the SHA-256 of
 * each range of its sample plan (sample.h).
 *
 * A fingerprint is a plain value (about 5 KiB): copy it, store it, compare
 * it. have[i] says whether sample i was read and hashed; a fingerprint is
 * complete when every sample was. Only complete fingerprints are stored or
 * used as a reference.
 */
#ifndef SEAMFS_VF_FINGERPRINT_H
#define SEAMFS_VF_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>
#include "hash.h"
#include "px.h"
#include "reader.h"
#include "sample.h"

#define VF_FINGERPRINT_ID_LEN 17   /* 16 hex digits + NUL */

struct vf_fingerprint {
	int64_t size;
	struct vf_plan plan;           /* vf_sample_plan(size) */
	unsigned char have[VF_MAX_SAMPLES];
	unsigned char sha[VF_MAX_SAMPLES][VF_HASH_LEN];
};

/*
 * Reads every sample of a file of `size` bytes through r (in one batch when
 * r has read_batch) and hashes it. Returns PX_OK when every sample was read
 * in full. Otherwise returns the status of the lowest-indexed sample that
 * could not be read (a short read is PX_ETRANSFER), sets *bad to its index
 * and writes why it failed into why; the samples that were read are still
 * hashed and marked in fp->have, so a difference can still be found.
 * PX_ENOMEM with *bad == fp->plan.n when buffers cannot be had (nothing
 * was read: not a verdict on the file). Thread: the caller's;
 * bounded by the reader's deadline.
 */
enum px_status vf_fingerprint_take(const struct vf_reader *r, int64_t size,
				   struct vf_fingerprint *fp, size_t *bad,
				   char *why, size_t whylen) PX_WUR;

/* An empty fingerprint of a file of `size` bytes: its plan, no sample. */
void vf_fingerprint_init(struct vf_fingerprint *fp, int64_t size);

/*
 * vf_fingerprint_take() for the samples fp does not have yet (fp made by
 * vf_fingerprint_init or a take): only those are read, in one batch, and
 * marked as they are hashed; the ones it has stay. Returns as
 * vf_fingerprint_take() does, PX_OK at once when nothing is missing.
 */
enum px_status vf_fingerprint_fill(const struct vf_reader *r, struct vf_fingerprint *fp,
				   size_t *bad, char *why, size_t whylen) PX_WUR;

/*
 * Merges the samples of `from` that `into` lacks into it (both of one
 * size). Returns the index of the first sample both have and that differs
 * (the file changed between the two looks), or -1.
 */
long vf_fingerprint_merge(struct vf_fingerprint *into, const struct vf_fingerprint *from);

/* Whether every sample of fp's plan is present. */
int vf_fingerprint_complete(const struct vf_fingerprint *fp);

/*
 * A short name for a complete fingerprint: the first 8 bytes of the SHA-256
 * of its size and sample digests, in hex. Verdicts are stored with the id of
 * the reference they were made against. PX_ENOMEM if hashing fails.
 */
enum px_status vf_fingerprint_id(const struct vf_fingerprint *fp,
				 char out[VF_FINGERPRINT_ID_LEN]) PX_WUR;

#endif
