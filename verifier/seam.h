/*
 * seam.h - the check a cutover makes before it switches: does the
 * candidate hold, just before the cut offset, the very bytes the reader
 * has already been given? Used with a standby that passed the sweep.
 */
#ifndef SEAMFS_VF_SEAM_H
#define SEAMFS_VF_SEAM_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"
#include "reader.h"
#include "verdict.h"

/* The most bytes a seam check compares (one read). */
#define VF_SEAM_MAX (1u << 20)

/*
 * Reads the candidate's bytes [x - n, x) through r and compares them with
 * delivered[0..n), the bytes the reader already received just before x.
 * Fills *out: VF_MATCH when equal; VF_MISMATCH with offset = the first
 * differing byte; VF_INCONCLUSIVE with why when the read failed, timed out
 * or came short. PX_EBUSY (*out inconclusive) when the read could not be
 * asked at all (no connection slot): the candidate said nothing. PX_EINVAL
 * (nothing read) when n == 0, n > VF_SEAM_MAX or x - n < 0; PX_ENOMEM.
 * Bounded by the reader's deadline; caller's thread.
 */
enum px_status vf_seam_check(const struct vf_reader *r, int64_t x, const void *delivered,
			     size_t n, struct vf_verdict *out) PX_WUR;

#endif
