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
	vf_fingerprint_init(fp, size);
	return vf_fingerprint_fill(r, fp, bad, why, whylen);
}

void vf_fingerprint_init(struct vf_fingerprint *fp, int64_t size)
{
	memset(fp, 0, sizeof(*fp));
	fp->size = size;
	vf_sample_plan(size, &fp->plan);
}

enum px_status vf_fingerprint_fill(const struct vf_reader *r, struct vf_fingerprint *fp,
				   size_t *bad, char *why, size_t whylen)
{
	enum px_status st = PX_OK;
	struct vf_range *rg = NULL;
	unsigned char *bufs = NULL;
	size_t *idx = NULL, n = 0;

	*bad = 0;
	if (whylen)
		why[0] = '\0';
	for (size_t i = 0; i < fp->plan.n; i++)
		n += !fp->have[i];
	if (n == 0)
		return PX_OK;
	rg = calloc(n, sizeof(*rg));
	idx = calloc(n, sizeof(*idx));
	bufs = malloc(n * VF_SAMPLE_LEN);
	if (!rg || !idx || !bufs) {
		st = PX_ENOMEM;
		*bad = fp->plan.n;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	/* only the samples still missing are read */
	for (size_t i = 0, j = 0; i < fp->plan.n; i++) {
		if (fp->have[i])
			continue;
		idx[j] = i;
		rg[j].off = fp->plan.off[i];
		rg[j].len = fp->plan.len[i];
		rg[j].buf = bufs + j * VF_SAMPLE_LEN;
		rg[j].st = PX_EIO;
		j++;
	}
	if (r->read_batch) {
		r->read_batch(r->ctx, rg, n);
	} else {
		for (size_t j = 0; j < n; j++) {
			rg[j].got = 0;
			rg[j].st = r->read(r->ctx, rg[j].off, rg[j].len, rg[j].buf, &rg[j].got);
		}
	}
	for (size_t j = 0; j < n; j++) {
		size_t i = idx[j];
		enum px_status s = rg[j].st;
		if (s == PX_OK && rg[j].got != rg[j].len) {
			/* a reader that claims success with fewer bytes */
			s = PX_ETRANSFER;
			snprintf(rg[j].why, sizeof(rg[j].why), "short read: %zu of %zu bytes",
				 rg[j].got, rg[j].len);
		}
		if (s == PX_OK) {
			s = vf_hash_once(rg[j].buf, rg[j].len, fp->sha[i]);
			if (s != PX_OK)
				snprintf(rg[j].why, sizeof(rg[j].why), "hashing failed");
		}
		if (s == PX_OK) {
			fp->have[i] = 1;
		} else if (st == PX_OK) {
			st = s;
			*bad = i;
			snprintf(why, whylen, "%s", rg[j].why[0] ? rg[j].why : px_strerror(s));
		}
	}
out:
	free(bufs);
	free(idx);
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

long vf_fingerprint_merge(struct vf_fingerprint *into, const struct vf_fingerprint *from)
{
	long differs = -1;
	if (into->size != from->size)
		return 0;
	for (size_t i = 0; i < into->plan.n; i++) {
		if (!from->have[i])
			continue;
		if (!into->have[i]) {
			memcpy(into->sha[i], from->sha[i], VF_HASH_LEN);
			into->have[i] = 1;
		} else if (differs < 0 && memcmp(into->sha[i], from->sha[i], VF_HASH_LEN) != 0) {
			differs = (long)i;
		}
	}
	return differs;
}
