/*
 * ownprint.c - each source's own sampled fingerprint, as far as it is known.
 *
 * A standby may take a session over only if it holds the bytes the reader
 * has been given: the session's reference is the source it is served from,
 * not a fingerprint the asset may or may not have yet. So every source
 * keeps its own fingerprint (the SHA-256 of each 4 KiB range of the
 * asset's sample plan), filled three ways: the bytes it serves are hashed
 * as they pass (a read that covers a sample wholly: no request), the rest
 * are fetched early once a session reads it like a playback (standby.c),
 * and a sweep of it at a cutover or in the background adds what it read.
 * The first sample (offset 0) is in every head, so a source that served
 * has at least that one.
 *
 * Two sources are the same file as far as sampling can tell when both
 * fingerprints are whole and equal; px_own_agrees() says how far one
 * backs the other when the first is not whole (its source died before its
 * samples were all seen).
 *
 * The read path: until a source's fingerprint is whole, each
 * read looks up the samples it covers in the plan (a binary search; the
 * plan is immutable once published) and hashes those the fingerprint
 * lacks outside the lock. Once whole, two atomic loads.
 *
 * Lock: vf_lock (px_vf_lock) guards each src_rt's own; never held while hashing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "health.h"
#include "mem.h"
#include "ownprint.h"

const struct vf_plan *px_own_plan(struct px_core *core, size_t asset)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct vf_plan *p = atomic_load(&rt->plan), *none = NULL;
	if (p || rt->size < 0)
		return p;
	p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	vf_sample_plan(rt->size, p);
	if (!atomic_compare_exchange_strong(&rt->plan, &none, p)) {
		free(p); /* another thread made it first */
		p = none;
	}
	return p;
}

/* The first sample of plan that starts at or after off. */
static size_t first_at(const struct vf_plan *plan, int64_t off)
{
	size_t lo = 0, hi = plan->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (plan->off[mid] < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Source k's own fingerprint, made empty on first need. vf_lock held. */
static struct vf_fingerprint *own_of(struct px_core *core, size_t asset, struct src_rt *sr)
{
	if (!sr->own && (sr->own = malloc(sizeof(*sr->own))))
		vf_fingerprint_init(sr->own, px_asset_rt(core, asset)->size);
	return sr->own;
}

/* Records sample i of source k (its digest d) and checks it against the
 * asset's reference. vf_lock held. */
static void note_one(struct px_core *core, size_t asset, struct src_rt *sr, size_t i,
		     const unsigned char *d, long *ref_differs)
{
	const struct vf_fingerprint *ref = px_asset_rt(core, asset)->ref;
	struct vf_fingerprint *own = own_of(core, asset, sr);
	if (own && !own->have[i]) {
		memcpy(own->sha[i], d, VF_HASH_LEN);
		own->have[i] = 1;
		if (vf_fingerprint_complete(own))
			atomic_store(&sr->own_full, 1);
	}
	/* every sample the source serves is compared, not only its first:
	 * a source that differs further in never slips past */
	if (ref && ref->have[i] && !atomic_load(&sr->screened) &&
	    memcmp(ref->sha[i], d, VF_HASH_LEN) != 0 && *ref_differs < 0)
		*ref_differs = (long)i;
}

void px_own_note(struct px_core *core, size_t asset, size_t k, int64_t off,
		 const struct iovec *iov, int iovcnt, long *ref_differs)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct src_rt *all = __atomic_load_n(&rt->src, __ATOMIC_ACQUIRE);
	unsigned char chunk[VF_SAMPLE_LEN], d[VF_HASH_LEN];

	*ref_differs = -1;
	if (!all)
		return;
	struct src_rt *sr = &all[k];
	/* every sample of a whole fingerprint was compared when it was
	 * hashed here, or judged with the sweep or fetch that brought it */
	if (atomic_load(&sr->own_full))
		return;
	const struct vf_plan *plan = px_own_plan(core, asset);
	if (!plan)
		return;
	int64_t end = off + (int64_t)px_iov_len(iov, iovcnt);
	for (size_t i = first_at(plan, off); i < plan->n && plan->off[i] + plan->len[i] <= end;
	     i++) {
		px_vf_lock(core);
		int had = sr->own && sr->own->have[i];
		/* a verified source's samples were all compared by its sweep */
		if (sr->state == VS_VERIFIED)
			atomic_store(&sr->screened, 1);
		px_vf_unlock(core);
		if (had)
			continue; /* compared when it was had */
		(void)px_iov_copy(iov, iovcnt, (size_t)(plan->off[i] - off), plan->len[i], chunk);
		if (vf_hash_once(chunk, plan->len[i], d) != PX_OK)
			continue; /* cannot hash: nothing proven either way */
		px_vf_lock(core);
		note_one(core, asset, sr, i, d, ref_differs);
		px_vf_unlock(core);
	}
}

size_t px_own_get(struct px_core *core, size_t asset, size_t k, struct vf_fingerprint *out)
{
	struct src_rt *all = px_src_ensure(core, asset);
	size_t n = 0;
	vf_fingerprint_init(out, px_asset_rt(core, asset)->size);
	px_vf_lock(core);
	if (all && all[k].own && all[k].own->size == out->size)
		*out = *all[k].own;
	px_vf_unlock(core);
	for (size_t i = 0; i < out->plan.n; i++)
		n += out->have[i];
	return n;
}

long px_own_merge(struct px_core *core, size_t asset, size_t k, const struct vf_fingerprint *fp)
{
	struct src_rt *all = px_src_ensure(core, asset);
	long differs = -1;
	if (!all || fp->size != px_asset_rt(core, asset)->size)
		return -1;
	px_vf_lock(core);
	struct vf_fingerprint *own = own_of(core, asset, &all[k]);
	if (own) {
		differs = vf_fingerprint_merge(own, fp);
		if (vf_fingerprint_complete(own))
			atomic_store(&all[k].own_full, 1);
	}
	px_vf_unlock(core);
	return differs;
}

int px_own_full(struct px_core *core, size_t asset, size_t k)
{
	struct src_rt *all = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	return all && atomic_load(&all[k].own_full);
}

enum px_own_cmp px_own_agrees(const struct vf_fingerprint *a, const struct vf_fingerprint *b,
			      size_t *n)
{
	size_t same = 0, lacks = SIZE_MAX;
	if (a->size != b->size) {
		*n = 0;
		return PX_OWN_DIFFERS;
	}
	for (size_t i = 0; i < a->plan.n; i++) {
		if (!a->have[i])
			continue;
		if (!b->have[i]) {
			if (lacks == SIZE_MAX)
				lacks = i;
			continue;
		}
		if (memcmp(a->sha[i], b->sha[i], VF_HASH_LEN) != 0) {
			*n = i;
			return PX_OWN_DIFFERS;
		}
		same++;
	}
	if (lacks != SIZE_MAX) {
		*n = lacks;
		return PX_OWN_LACKS;
	}
	*n = same;
	return PX_OWN_SAME;
}

void px_own_release(struct px_core *core, size_t asset)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	for (size_t k = 0; rt->src && k <= rt->source_cap; k++) {
		free(rt->src[k].own);
		rt->src[k].own = NULL;
	}
	free(atomic_load(&rt->plan));
	atomic_store(&rt->plan, NULL);
}
