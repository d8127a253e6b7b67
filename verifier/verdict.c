/*
 * verdict.c - the content-length gate and the sampled sweep (verdict.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict.h"

static const char *const names[] = { "match", "mismatch", "size_mismatch", "inconclusive" };

const char *vf_outcome_name(enum vf_outcome o)
{
	return (unsigned)o < sizeof(names) / sizeof(names[0]) ? names[o] : "unknown";
}

int vf_outcome_parse(const char *name, enum vf_outcome *out)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i]) == 0) {
			*out = (enum vf_outcome)i;
			return 0;
		}
	}
	return -1;
}

int vf_outcome_final(enum vf_outcome o)
{
	return o == VF_MISMATCH || o == VF_SIZE_MISMATCH;
}

static void size_mismatch(int64_t ref, int64_t cand, struct vf_verdict *out)
{
	out->outcome = VF_SIZE_MISMATCH;
	snprintf(out->why, sizeof(out->why), "has %lld bytes, the reference %lld",
		 (long long)cand, (long long)ref);
}

void vf_verdict_compare(const struct vf_fingerprint *ref, const struct vf_fingerprint *cand,
			struct vf_verdict *out)
{
	long missing = -1;
	int missing_ref = 0;

	memset(out, 0, sizeof(*out));
	out->sample = -1;
	out->offset = -1;
	out->size = cand->size;
	if (ref->size != cand->size) {
		size_mismatch(ref->size, cand->size, out);
		return;
	}
	/* same size, hence the same plan on both sides */
	for (size_t i = 0; i < ref->plan.n; i++) {
		if (!ref->have[i] || !cand->have[i]) {
			if (missing < 0) {
				missing = (long)i;
				missing_ref = !ref->have[i];
			}
			continue;
		}
		if (memcmp(ref->sha[i], cand->sha[i], VF_HASH_LEN) != 0) {
			out->outcome = VF_MISMATCH;
			out->sample = (long)i;
			out->offset = ref->plan.off[i];
			snprintf(out->why, sizeof(out->why),
				 "sample %zu of %zu (bytes %lld-%lld) differs", i, ref->plan.n,
				 (long long)ref->plan.off[i],
				 (long long)(ref->plan.off[i] + ref->plan.len[i] - 1));
			return;
		}
	}
	if (missing >= 0) {
		out->outcome = VF_INCONCLUSIVE;
		out->sample = missing;
		out->offset = ref->plan.off[missing];
		snprintf(out->why, sizeof(out->why), "sample %ld at offset %lld not read on the %s",
			 missing, (long long)out->offset, missing_ref ? "reference" : "candidate");
		return;
	}
	out->outcome = VF_MATCH;
}

enum px_status vf_verdict_check(const struct vf_fingerprint *ref, int64_t cand_size,
				const struct vf_reader *r, struct vf_verdict *out,
				struct vf_fingerprint *cand_fp)
{
	struct vf_fingerprint *fp = cand_fp ? cand_fp : malloc(sizeof(*fp));
	enum px_status st = PX_OK;
	char why[160];
	size_t bad;

	memset(out, 0, sizeof(*out));
	out->sample = -1;
	out->offset = -1;
	out->size = cand_size;
	if (!fp)
		return PX_ENOMEM;
	if (!vf_fingerprint_complete(ref) || ref->size < 0) {
		st = PX_EINVAL;
		goto out;
	}
	if (cand_size != ref->size) {
		/* the gate: no byte is read from a file of another size */
		memset(fp, 0, sizeof(*fp));
		fp->size = cand_size;
		size_mismatch(ref->size, cand_size, out);
		goto out;
	}
	enum px_status rs = vf_fingerprint_take(r, cand_size, fp, &bad, why, sizeof(why));
	if (rs != PX_OK && bad >= fp->plan.n) {
		st = rs; /* nothing was read: no verdict */
		goto out;
	}
	vf_verdict_compare(ref, fp, out);
	if (out->outcome == VF_INCONCLUSIVE && rs != PX_OK && (size_t)out->sample == bad)
		snprintf(out->why, sizeof(out->why), "sample %zu at offset %lld unreadable: %s",
			 bad, (long long)fp->plan.off[bad], why);
out:
	if (fp != cand_fp)
		free(fp);
	return st;
}
