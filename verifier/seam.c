/*
 * seam.c - the seam check (seam.h): one bounded read and a byte compare.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seam.h"

enum px_status vf_seam_check(const struct vf_reader *r, int64_t x, const void *delivered,
			     size_t n, struct vf_verdict *out)
{
	const unsigned char *want = delivered;
	unsigned char *buf;
	size_t got = 0;
	enum px_status ret = PX_OK;

	memset(out, 0, sizeof(*out));
	out->sample = -1;
	out->offset = -1;
	out->size = -1;
	if (n == 0 || n > VF_SEAM_MAX || x < (int64_t)n)
		return PX_EINVAL;
	buf = malloc(n);
	if (!buf)
		return PX_ENOMEM;
	int64_t from = x - (int64_t)n;
	enum px_status st = r->read(r->ctx, from, n, buf, &got);
	if (st != PX_OK || got != n) {
		out->outcome = VF_INCONCLUSIVE;
		out->offset = from + (int64_t)got;
		snprintf(out->why, sizeof(out->why), "bytes %lld-%lld: %s (%zu of %zu read)",
			 (long long)from, (long long)(x - 1),
			 st != PX_OK ? px_strerror(st) : "short read", got, n);
		/* no slot to ask in: no answer of the source, it is not failed */
		if (st == PX_EBUSY && got == 0)
			ret = PX_EBUSY;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (buf[i] != want[i]) {
			out->outcome = VF_MISMATCH;
			out->offset = from + (int64_t)i;
			snprintf(out->why, sizeof(out->why),
				 "byte %lld differs from the byte already delivered",
				 (long long)out->offset);
			goto out;
		}
	}
	out->outcome = VF_MATCH;
out:
	free(buf);
	return ret;
}
