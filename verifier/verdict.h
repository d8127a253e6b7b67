/*
 * verdict.h - is a candidate source the same file as the asset's reference?
 *
 * The rules (docs/verifier.md):
 *  1. Content-length gate: a candidate whose size differs from the
 *     reference's is VF_SIZE_MISMATCH, for good (for this asset).
 *  2. Sampled sweep: the SHA-256 of every sample of the plan for that size
 *     (sample.h) is compared. Any sample that differs: VF_MISMATCH, for
 *     good, naming the lowest such sample and its offset; a difference is
 *     proof, so it wins over samples that could not be read. Else any
 *     sample unreadable on either side: VF_INCONCLUSIVE, with why. Else
 *     VF_MATCH. Inconclusive is never a match.
 * A match is strong evidence, not proof: bytes outside every sample are not
 * compared (for a 1 GiB file, 400 KiB of it is read).
 */
#ifndef SEAMFS_VF_VERDICT_H
#define SEAMFS_VF_VERDICT_H

#include <stddef.h>
#include <stdint.h>
#include "fingerprint.h"
#include "px.h"
#include "reader.h"

enum vf_outcome {
	VF_MATCH = 0,
	VF_MISMATCH,          /* for good */
	VF_SIZE_MISMATCH,     /* for good */
	VF_INCONCLUSIVE       /* try again later; never a match */
};

struct vf_verdict {
	enum vf_outcome outcome;
	long sample;          /* MISMATCH/INCONCLUSIVE: the sample's index, else -1 */
	int64_t offset;       /* its offset (seam check: the first differing byte), else -1 */
	int64_t size;         /* the candidate's size, -1 if not known */
	char why[200];        /* in words, for logs and the CLI; "" for a plain match */
};

/* "match", "mismatch", "size_mismatch", "inconclusive" (the store's words). */
const char *vf_outcome_name(enum vf_outcome o);

/* Parses a name of vf_outcome_name(). Returns 0, or -1 for anything else. */
int vf_outcome_parse(const char *name, enum vf_outcome *out);

/* Whether the outcome is final for this source and asset (MISMATCH, SIZE_MISMATCH). */
int vf_outcome_final(enum vf_outcome o);

/*
 * Compares two fingerprints by the rules above (no I/O). Either may be
 * incomplete; missing samples make the result inconclusive unless a
 * present one differs.
 */
void vf_verdict_compare(const struct vf_fingerprint *ref, const struct vf_fingerprint *cand,
			struct vf_verdict *out);

/*
 * The whole check of one candidate against a complete reference: the gate
 * on cand_size, then a fingerprint of the candidate taken through r, then
 * the comparison. When cand_fp is not NULL it receives the candidate's
 * fingerprint (complete only if every sample was read), for the store.
 * PX_OK with *out filled, whatever the outcome; PX_EINVAL when ref is not
 * complete; PX_ENOMEM. Bounded by the reader's deadline.
 */
enum px_status vf_verdict_check(const struct vf_fingerprint *ref, int64_t cand_size,
				const struct vf_reader *r, struct vf_verdict *out,
				struct vf_fingerprint *cand_fp) PX_WUR;

#endif
