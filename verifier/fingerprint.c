/*
 * fingerprint.c - taking a sampled fingerprint through a vf_reader.
 *
 * All samples are handed to the reader at once (read_batch) so that a
 * network reader can keep several requests in flight: 100 sequential 4 KiB
 * requests would cost 100 round trips. Buffers come from one allocation of
 * at most VF_MAX_SAMPLES * VF_SAMPLE_LEN (400 KiB).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fingerprint.h"

enum px_status vf_fingerprint_take(const struct vf_reader *r, int64_t size,
				   struct vf_fingerprint *fp, size_t *bad,
				   char *why, size_t whylen)
{
	enum px_status st = PX_OK;
	struct vf_range *rg = NULL;
	unsigned char *bufs = NULL;

	memset(fp, 0, sizeof(*fp));
	fp->size = size;
	vf_sample_plan(size, &fp->plan);
	*bad = 0;
	if (whylen)
		why[0] = '\0';
	if (fp->plan.n == 0)
		return PX_OK;
	rg = calloc(fp->plan.n, sizeof(*rg));
	bufs = malloc(fp->plan.n * VF_SAMPLE_LEN);
	if (!rg || !bufs) {
		st = PX_ENOMEM;
		*bad = fp->plan.n;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < fp->plan.n; i++) {
		rg[i].off = fp->plan.off[i];
		rg[i].len = fp->plan.len[i];
		rg[i].buf = bufs + i * VF_SAMPLE_LEN;
		rg[i].st = PX_EIO;
	}
	if (r->read_batch) {
		r->read_batch(r->ctx, rg, fp->plan.n);
	} else {
		for (size_t i = 0; i < fp->plan.n; i++) {
			rg[i].got = 0;
			rg[i].st = r->read(r->ctx, rg[i].off, rg[i].len, rg[i].buf, &rg[i].got);
		}
	}
	for (size_t i = 0; i < fp->plan.n; i++) {
		enum px_status s = rg[i].st;
		if (s == PX_OK && rg[i].got != rg[i].len) {
			/* a reader that claims success with fewer bytes */
			s = PX_ETRANSFER;
			snprintf(rg[i].why, sizeof(rg[i].why), "short read: %zu of %zu bytes",
				 rg[i].got, rg[i].len);
		}
		if (s == PX_OK) {
			s = vf_hash_once(rg[i].buf, rg[i].len, fp->sha[i]);
			if (s != PX_OK)
				snprintf(rg[i].why, sizeof(rg[i].why), "hashing failed");
		}
		if (s == PX_OK) {
			fp->have[i] = 1;
		} else if (st == PX_OK) {
			st = s;
			*bad = i;
			snprintf(why, whylen, "%s", rg[i].why[0] ? rg[i].why : px_strerror(s));
		}
	}
out:
	free(bufs);
	free(rg);
	return st;
}

int vf_fingerprint_complete(const struct vf_fingerprint *fp)
{
	for (size_t i = 0; i < fp->plan.n; i++)
		if (!fp->have[i])
			return 0;
	return 1;
}

enum px_status vf_fingerprint_id(const struct vf_fingerprint *fp,
				 char out[VF_FINGERPRINT_ID_LEN])
{
	unsigned char buf[8 + VF_MAX_SAMPLES * VF_HASH_LEN], d[VF_HASH_LEN];
	size_t len = 0;
	uint64_t size = (uint64_t)fp->size;

	/* the size first (little-endian): files of different sizes never share an id */
	for (int i = 0; i < 8; i++)
		buf[len++] = (unsigned char)(size >> (8 * i));
	for (size_t i = 0; i < fp->plan.n; i++) {
		memcpy(buf + len, fp->sha[i], VF_HASH_LEN);
		len += VF_HASH_LEN;
	}
	enum px_status st = vf_hash_once(buf, len, d);
	if (st != PX_OK)
		return st;
	vf_hash_hex(d, 8, out);
	return PX_OK;
}
