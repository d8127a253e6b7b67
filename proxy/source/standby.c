/*
 * standby.c - which sources may take a session over, and the cutover.
 *
 * Verification state. Every source of an asset has a state, shared by all
 * sessions of the asset: unknown, verifying, verified (its size and every
 * sampled SHA-256 equal the asset's reference), or rejected for good
 * (another size, a sample that differs). An inconclusive check (a sample
 * that could not be read) leaves it unknown and counts; on the 5th in a row
 * the source is abandoned. Verdicts and fingerprints go to the verifier's
 * store in state_dir, so they survive sessions and restarts.
 *
 * The reference. The asset's stored reference fingerprint if there is
 * one, else the fingerprint of the first source that served it, taken in
 * the background as soon as it serves (cheap: 20 or 100 reads of 4 KiB).
 *
 * Prevalidation. Once a session of the asset has played for standby_delay,
 * up to max_standby other sources are verified in the verifier's worker
 * pool, through background transfers: they take only spare provider slots
 * and give them up to playback.
 *
 * Cutover (px_cutover). When the active source fails under a read, the
 * session's next standby takes over, a URL or a path alike: verified ones
 * first, then the fewest sessions on their provider, then the provider's
 * name; rejected, abandoned, dead and auth-refused ones are skipped. A
 * verified standby only passes the seam check (its bytes just before the
 * cut equal the bytes the old source gave); an unverified one gets the
 * size gate and the whole sweep now, within the read's deadline. The
 * session then moves to it (px_session_switch) and the read goes on at the
 * same offset. The source that failed stays a verified standby: it served
 * these very bytes.
 *
 * Lock: core->vf_lock guards the states, the reference and the counters;
 * never held across I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "health.h"
#include "provider.h"
#include "standby.h"
#include "httpparse.h"
#include "log.h"
#include "pool.h"
#include "rangeread.h"
#include "redact.h"
#include "seam.h"
#include "store.h"
#include "hash.h"
#include "verdict.h"

#define SAMPLE_TIMEOUT_MS 5000   /* one sample read in the background */
#define SPARE_WAIT_MS 500        /* background work waits this long for a slot */
#define ABANDON_AFTER 5          /* inconclusive checks in a row */
#define RECENT_CUTOVERS 8

/* The source as logs show it: without credentials. */
static const char *src_name(const struct px_core *core, size_t asset, size_t k)
{
	return core->cat->assets[asset].sources[k].shown;
}

/* The source's name in the fingerprint store: no credential on disk. */
static const char *src_key(const struct px_core *core, size_t asset, size_t k)
{
	return core->cat->assets[asset].sources[k].key;
}

/* ---- readers that take provider slots */

/* An ops table whose submit goes through px_xfer_submit. */
struct gate {
	struct px_fetch_ops ops;
	struct px_core *core;
	size_t prov;
	struct px_session *sess;  /* NULL: background */
	int64_t deadline;         /* 0: SPARE_WAIT_MS from each submit */
};

static enum px_status g_submit(void *impl, const struct px_fetch_params *p,
			       const struct px_fetch_cb *cb, uint64_t *id)
{
	struct gate *g = impl;
	int64_t deadline = g->deadline ? g->deadline : px_now_ms() + SPARE_WAIT_MS;
	return px_xfer_submit(g->core, g->prov, g->sess, g->sess == NULL, deadline, p, cb, id);
}

static void g_cancel(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->ops.cancel(g->core->ops.impl, id);
}

static void g_resume(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->ops.resume(g->core->ops.impl, id);
}

/* A reader of source k of the asset; sess NULL for background work, else
 * the session whose read it serves (deadline bounds it). */
static enum px_status open_reader(struct px_core *core, size_t asset, size_t k,
				  struct px_session *sess, int64_t deadline, struct gate *g,
				  struct px_rangeread **out)
{
	const struct px_source *src = &core->cat->assets[asset].sources[k];
	const struct px_provider *p = &core->cat->providers[src->provider];
	enum px_status st;

	if (src->path)
		st = px_rangeread_new_path(src->path, out);
	else {
		g->ops = (struct px_fetch_ops){ g_submit, g_cancel, g_resume, g };
		g->core = core;
		g->prov = src->provider;
		g->sess = sess;
		g->deadline = deadline;
		int64_t timeout = deadline ? deadline - px_now_ms() : SAMPLE_TIMEOUT_MS;
		if (timeout < 1)
			timeout = 1;
		st = px_rangeread_new_http(&g->ops, src->url, (const char *const *)p->headers,
					   p->nheaders, timeout, sess ? 8 : 2, out);
	}
	if (st == PX_OK) {
		px_rangeread_set_size(*out, core->assets[asset].size);
		px_rangeread_set_html_ok(*out, px_http_is_html_path(core->cat->assets[asset].path));
		if (!src->path)
			px_rangeread_set_header_hosts(*out, (const char *const *)p->header_hosts,
						      p->nheader_hosts);
	}
	return st;
}

/* Whether a failed read says "the other side did not answer" (load, an
 * outage), not something about its bytes: no verdict comes of it. */
static int no_answer(enum px_status st)
{
	switch (st) {
	case PX_ETIMEDOUT:
	case PX_ECONNECT:
	case PX_ETRANSFER:
	case PX_ESERVER:
	case PX_ECANCELED:
	case PX_EBUSY:
	case PX_ESHUTDOWN:
	case PX_ENOMEM:
	case PX_EIO:
		return 1;
	default:
		return 0;
	}
}

/* ---- the reference */

static void apply_verdict(struct px_core *core, size_t asset, size_t k,
			  const struct vf_verdict *v);

/* Stores source k's fingerprint (and, when v is not NULL, its verdict
 * against the reference) in the verifier's store. */
static void store_fp(struct px_core *core, size_t asset, size_t k, const struct vf_seen *seen,
		     const struct vf_fingerprint *fp, const struct vf_verdict *v, int reference)
{
	const struct px_asset *a = &core->cat->assets[asset];
	struct vf_record rec;
	char err[300];
	if (!core->vstore)
		return;
	pthread_mutex_lock(&core->vf_lock);
	int unconfirmed = core->assets[asset].ref_unconfirmed;
	pthread_mutex_unlock(&core->vf_lock);
	if (unconfirmed && v && v->outcome != VF_SIZE_MISMATCH)
		return; /* a verdict against a reference no second source backs */
	memset(&rec, 0, sizeof(rec));
	rec.seen = *seen;
	rec.has_fp = fp && vf_fingerprint_complete(fp);
	if (rec.has_fp)
		rec.fp = *fp;
	if (v) {
		rec.has_verdict = 1;
		rec.verdict = *v;
		pthread_mutex_lock(&core->vf_lock);
		snprintf(rec.ref, sizeof(rec.ref), "%s",
			 v->outcome == VF_SIZE_MISMATCH ? "" : core->assets[asset].ref_id);
		pthread_mutex_unlock(&core->vf_lock);
	}
	if (!reference && rec.has_fp) {
		/* a new record of the reference's own source keeps it the
		 * reference (a put without the flag would end that) */
		struct vf_record cur;
		char name[VF_STORE_MAX_NAME];
		reference = vf_store_reference(core->vstore, a->id, name, sizeof(name), &cur) &&
			    strcmp(name, src_key(core, asset, k)) == 0;
	}
	if (vf_store_put(core->vstore, a->id, src_key(core, asset, k), &rec, reference, err,
			 sizeof(err)) != PX_OK)
		px_warn("verify", "asset %s: could not store a fingerprint: %s", a->id, err);
}

/* Installs fp as the asset's reference unless one came meanwhile; one
 * that no second source backed (confirmed 0) gives way to one that is. */
static void set_reference(struct px_core *core, size_t asset, const struct vf_fingerprint *fp,
			  int confirmed)
{
	struct asset_rt *rt = &core->assets[asset];
	struct vf_fingerprint *mine = malloc(sizeof(*mine));
	pthread_mutex_lock(&core->vf_lock);
	if (mine && rt->ref && rt->ref_unconfirmed && confirmed) {
		*mine = *fp;
		free(rt->ref);
		rt->ref = mine;
		mine = NULL;
		rt->ref_unconfirmed = 0;
		if (vf_fingerprint_id(rt->ref, rt->ref_id) != PX_OK)
			rt->ref_id[0] = '\0';
	} else if (!rt->ref && mine) {
		*mine = *fp;
		rt->ref = mine;
		mine = NULL;
		atomic_store(&rt->ref_known, 1);
		if (vf_fingerprint_id(rt->ref, rt->ref_id) != PX_OK)
			rt->ref_id[0] = '\0';
		rt->ref_fails = 0;
		rt->ref_unconfirmed = !confirmed;
	}
	pthread_cond_broadcast(&core->vf_cond);
	pthread_mutex_unlock(&core->vf_lock);
	free(mine);
}

/*
 * Takes the asset's reference from its sources' own answers: fingerprints
 * of the sources in order[] (each size-gated, each read bounded by per_ms
 * from its start and by deadline, 0: none), until two complete ones agree.
 * That one becomes the reference, and every source whose fingerprint was
 * taken gets its verdict against it (the two that agreed are verified).
 * A source that does not answer gives no verdict. Returns 1 when the asset
 * has a reference.
 */
static int agree_reference(struct px_core *core, size_t asset, const size_t *order, size_t n,
			   struct px_session *sess, int64_t per_ms, int64_t deadline)
{
	struct asset_rt *rt = &core->assets[asset];
	const struct px_asset *a = &core->cat->assets[asset];
	struct vf_fingerprint *fps = calloc(n ? n : 1, sizeof(*fps));
	struct vf_seen *seen = calloc(n ? n : 1, sizeof(*seen));
	unsigned char *have = calloc(n ? n : 1, 1);
	long agreed = -1;
	size_t taken = 0;

	if (!fps || !seen || !have)
		goto out;
	for (size_t i = 0; i < n && agreed < 0; i++) {
		size_t k = order[i];
		int64_t now = px_now_ms();
		int64_t until = now + per_ms;
		struct px_rangeread *rr = NULL;
		struct gate g;
		char why[200] = "";
		size_t bad;
		if (deadline && now >= deadline)
			break;
		if (deadline && until > deadline)
			until = deadline;
		if (open_reader(core, asset, k, sess, sess ? until : 0, &g, &rr) != PX_OK)
			continue;
		px_rangeread_set_size(rr, -1);
		enum px_status st = px_rangeread_probe(rr, &seen[i], why, sizeof(why));
		if (st == PX_OK && seen[i].size != rt->size) {
			struct vf_verdict v = { .outcome = VF_SIZE_MISMATCH, .sample = -1,
						.offset = -1, .size = seen[i].size };
			snprintf(v.why, sizeof(v.why), "size %lld, the asset's is %lld",
				 (long long)seen[i].size, (long long)rt->size);
			pthread_mutex_lock(&core->vf_lock);
			apply_verdict(core, asset, k, &v);
			pthread_mutex_unlock(&core->vf_lock);
			store_fp(core, asset, k, &seen[i], NULL, &v, 0);
			px_rangeread_free(rr);
			continue;
		}
		if (st == PX_OK) {
			px_rangeread_set_size(rr, rt->size);
			struct vf_reader r = px_rangeread_reader(rr);
			st = vf_fingerprint_take(&r, rt->size, &fps[i], &bad, why, sizeof(why));
		}
		px_rangeread_free(rr);
		if (st != PX_OK) {
			px_info("verify", "asset %s: no fingerprint of %s for the reference: %s%s%s",
				a->id, src_name(core, asset, k), px_strerror(st), why[0] ? ": " : "",
				why);
			if (no_answer(st) || st == PX_ENOTASSET)
				px_source_failed(core, asset, k, st, why);
			continue;
		}
		have[i] = 1;
		taken++;
		for (size_t j = 0; j < i; j++) {
			struct vf_verdict v;
			if (!have[j])
				continue;
			vf_verdict_compare(&fps[j], &fps[i], &v);
			if (v.outcome == VF_MATCH) {
				agreed = (long)i;
				break;
			}
		}
	}
	if (agreed >= 0) {
		set_reference(core, asset, &fps[agreed], 1);
		store_fp(core, asset, order[agreed], &seen[agreed], &fps[agreed], NULL, 1);
		px_info("verify", "asset %s: reference fingerprint taken from %s, which another "
			"source agrees with (%zu samples)", a->id,
			src_name(core, asset, order[agreed]), fps[agreed].plan.n);
		/* every fingerprint taken gets its verdict against it */
		for (size_t i = 0; i < n; i++) {
			struct vf_verdict v;
			if (!have[i])
				continue;
			vf_verdict_compare(&fps[agreed], &fps[i], &v);
			pthread_mutex_lock(&core->vf_lock);
			apply_verdict(core, asset, order[i], &v);
			pthread_mutex_unlock(&core->vf_lock);
			store_fp(core, asset, order[i], &seen[i], &fps[i], &v, 0);
		}
	} else {
		/* no two agree. The bytes readers got are the served source's:
		 * only a source identical to it may take over, so its
		 * fingerprint judges the others for now, in memory: nothing of
		 * it is stored, and an agreement later replaces it */
		int by = atomic_load(&rt->served_by);
		for (size_t i = 0; i < n && by > 0; i++) {
			if (!have[i] || order[i] != (size_t)by - 1)
				continue;
			set_reference(core, asset, &fps[i], 0);
			px_info("verify", "asset %s: no two sources agree; %s, which served the "
				"readers, judges the others until two do", a->id,
				src_name(core, asset, order[i]));
			for (size_t j = 0; j < n; j++) {
				struct vf_verdict v;
				if (!have[j])
					continue;
				vf_verdict_compare(&fps[i], &fps[j], &v);
				pthread_mutex_lock(&core->vf_lock);
				apply_verdict(core, asset, order[j], &v);
				pthread_mutex_unlock(&core->vf_lock);
			}
			break;
		}
		pthread_mutex_lock(&core->vf_lock);
		int fails = ++rt->ref_fails;
		int64_t wait = 2000LL << (fails < 8 ? fails : 8);
		rt->ref_retry_at = core->now() + wait;
		pthread_mutex_unlock(&core->vf_lock);
		px_info("verify", "asset %s: no reference yet: %zu fingerprint(s) taken, no two "
			"agree; next try in %lld s", a->id, taken, (long long)wait / 1000);
	}
out:
	free(fps);
	free(seen);
	free(have);
	pthread_mutex_lock(&core->vf_lock);
	int ok = rt->ref != NULL;
	pthread_mutex_unlock(&core->vf_lock);
	return ok;
}

/* The asset's sources that may give a reference: `first` (the one that
 * served) first, then the others that are not dead or rejected, sources
 * that failed lately last. Returns how many were put in out. */
static size_t reference_order(struct px_core *core, size_t asset, size_t first, size_t *out,
			      size_t cap)
{
	const struct px_asset *a = &core->cat->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	int64_t now = core->now();
	size_t n = 0;
	if (!px_src_ensure(core, asset))
		return 0;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < a->nsources && n < cap; k++) {
			size_t src = k == 0 ? first : k <= first ? k - 1 : k;
			int bad = px_source_bad(core, asset, src, now);
			pthread_mutex_lock(&core->vf_lock);
			int st = rt->src[src].state;
			pthread_mutex_unlock(&core->vf_lock);
			if (rt->dead[src] || st == VS_REJECTED || bad != pass)
				continue;
			out[n++] = src;
		}
	}
	return n;
}

/* Takes or loads the asset's reference fingerprint, from source k (the one
 * that served) and a second source that agrees with it. Background; any
 * thread but the fetch thread. */
static void take_reference(struct px_core *core, size_t asset, size_t k)
{
	const struct px_asset *a = &core->cat->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	struct vf_record rec;
	char name[VF_STORE_MAX_NAME];
	size_t order[64];

	if (core->vstore && vf_store_reference(core->vstore, a->id, name, sizeof(name), &rec) &&
	    rec.has_fp && rec.fp.size == rt->size) {
		set_reference(core, asset, &rec.fp, 1);
		char shown[512]; /* an older seamfs named records by the whole URL */
		px_redact_url(name, shown, sizeof(shown));
		px_debug("verify", "asset %s: reference fingerprint from the store (%s)", a->id,
			 shown);
	} else {
		size_t n = reference_order(core, asset, k, order, 64);
		(void)agree_reference(core, asset, order, n, NULL, SAMPLE_TIMEOUT_MS, 0);
	}
	pthread_mutex_lock(&core->vf_lock);
	rt->ref_busy = 0;
	pthread_cond_broadcast(&core->vf_cond);
	pthread_mutex_unlock(&core->vf_lock);
}

/* ---- verifying one source */

/* Applies a verdict to source k's state. vf_lock held. */
static void apply_verdict(struct px_core *core, size_t asset, size_t k,
			  const struct vf_verdict *v)
{
	struct src_rt *all = px_src_ensure(core, asset);
	if (!all)
		return;
	struct src_rt *sr = &all[k];
	const char *id = core->cat->assets[asset].id;
	px_src_why(sr, v->why);
	switch (v->outcome) {
	case VF_MATCH:
		sr->state = VS_VERIFIED;
		sr->inconclusive = 0;
		px_info("verify", "asset %s: %s verified", id, src_name(core, asset, k));
		break;
	case VF_MISMATCH:
	case VF_SIZE_MISMATCH:
		sr->state = VS_REJECTED;
		px_warn("verify", "asset %s: %s rejected for good: %s", id,
			src_name(core, asset, k), v->why);
		break;
	case VF_INCONCLUSIVE:
		sr->state = ++sr->inconclusive >= ABANDON_AFTER ? VS_ABANDONED : VS_UNKNOWN;
		if (sr->state == VS_ABANDONED) {
			sr->abandoned_at = core->now();
			sr->abandons++;
		}
		px_info("verify", "asset %s: %s inconclusive (%d in a row%s): %s", id,
			src_name(core, asset, k), sr->inconclusive,
			sr->state == VS_ABANDONED ? ", abandoned for now" : "", v->why);
		break;
	}
	sr->checked = core->now();
	core->n_verified[v->outcome]++;
}

/*
 * Verifies source k against the reference: the size gate, then the stored
 * fingerprint if it is still valid, else the sampled sweep. sess/deadline:
 * see open_reader. Fills *v. Updates the source's state and the store.
 * Only the source's own answers make a verdict: with no reference yet, or
 * when the source did not answer (a timeout, a refused connection, a
 * stall), its state stays unverified, uncounted, and a source that did not
 * answer goes last for a while (px_source_failed).
 */
static void verify_source(struct px_core *core, size_t asset, size_t k,
			  struct px_session *sess, int64_t deadline, struct vf_verdict *v)
{
	const struct px_asset *a = &core->cat->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	struct px_rangeread *rr = NULL;
	struct vf_fingerprint *ref = NULL, *cand = NULL;
	struct vf_record rec;
	struct vf_seen seen;
	struct gate g;
	char why[200] = "";
	enum px_status st;
	int counts = 1;         /* the outcome is a verdict on the source */
	size_t bad;

	memset(v, 0, sizeof(*v));
	v->outcome = VF_INCONCLUSIVE;
	v->sample = -1;
	v->offset = -1;
	v->size = -1;
	if (!px_src_ensure(core, asset)) {
		snprintf(v->why, sizeof(v->why), "out of memory");
		return;
	}
	ref = malloc(sizeof(*ref));
	cand = malloc(sizeof(*cand));
	pthread_mutex_lock(&core->vf_lock);
	int have_ref = rt->ref != NULL;
	if (have_ref && ref)
		*ref = *rt->ref;
	pthread_mutex_unlock(&core->vf_lock);
	if (!ref || !cand) {
		snprintf(v->why, sizeof(v->why), "out of memory");
		counts = 0;
		goto out;
	}
	if (!have_ref) {
		snprintf(v->why, sizeof(v->why), "no reference fingerprint of the asset yet");
		counts = 0;
		goto out;
	}
	st = open_reader(core, asset, k, sess, deadline, &g, &rr);
	if (st != PX_OK) {
		snprintf(v->why, sizeof(v->why), "%s", px_strerror(st));
		counts = 0;
		goto out;
	}
	/* the size gate first: a source of another size is read no further */
	px_rangeread_set_size(rr, -1);
	st = px_rangeread_probe(rr, &seen, why, sizeof(why));
	if (st != PX_OK) {
		if (st == PX_ENOTFOUND)
			rt->dead[k] = 1;
		if (st == PX_EAUTH)
			px_provider_auth_failed(core, a->sources[k].provider, why);
		if (no_answer(st) || st == PX_ENOTFOUND || st == PX_EAUTH) {
			counts = 0;
			px_source_failed(core, asset, k, st, why);
		}
		snprintf(v->why, sizeof(v->why), "size unknown: %s (%s)", px_strerror(st), why);
		goto out;
	}
	v->size = seen.size;
	if (seen.size != rt->size) {
		v->outcome = VF_SIZE_MISMATCH;
		snprintf(v->why, sizeof(v->why), "size %lld, the asset's is %lld",
			 (long long)seen.size, (long long)rt->size);
		store_fp(core, asset, k, &seen, NULL, v, 0);
		goto out;
	}
	px_rangeread_set_size(rr, rt->size);
	if (core->vstore && vf_store_get(core->vstore, a->id, src_key(core, asset, k), &seen,
					 &rec) && rec.has_fp) {
		vf_verdict_compare(ref, &rec.fp, v);
		goto out; /* nothing new to store */
	}
	struct vf_reader r = px_rangeread_reader(rr);
	st = vf_fingerprint_take(&r, seen.size, cand, &bad, why, sizeof(why));
	if (st == PX_ENOMEM) {
		snprintf(v->why, sizeof(v->why), "out of memory");
		counts = 0;
		goto out;
	}
	/* a sample that differs is proof, whatever else could not be read */
	vf_verdict_compare(ref, cand, v);
	v->size = seen.size;
	if (v->outcome == VF_INCONCLUSIVE && no_answer(st)) {
		counts = 0;
		px_source_failed(core, asset, k, st, why);
		snprintf(v->why, sizeof(v->why), "no answer: %s%s%s", px_strerror(st),
			 why[0] ? ": " : "", why);
	}
	if (v->outcome != VF_INCONCLUSIVE)
		store_fp(core, asset, k, &seen, cand, v, 0);
out:
	px_rangeread_free(rr);
	pthread_mutex_lock(&core->vf_lock);
	if (counts) {
		apply_verdict(core, asset, k, v);
	} else {
		struct src_rt *sr = &rt->src[k];
		if (sr->state == VS_VERIFYING)
			sr->state = VS_UNKNOWN;
		sr->checked = core->now();
		px_src_why(sr, v->why);
	}
	pthread_mutex_unlock(&core->vf_lock);
	free(ref);
	free(cand);
}

/* ---- background jobs */

struct job {
	struct px_core *core;
	size_t asset, source;
	int reference;            /* take the reference from source */
};

static enum px_status job_run(void *arg)
{
	struct job *j = arg;
	struct vf_verdict v;
	if (j->reference)
		take_reference(j->core, j->asset, j->source);
	else
		verify_source(j->core, j->asset, j->source, NULL, 0, &v);
	return PX_OK;
}

static void job_done(void *arg, enum px_status st)
{
	struct job *j = arg;
	struct px_core *core = j->core;
	if (st == PX_ECANCELED) {
		/* never ran (shutdown): undo the marks */
		pthread_mutex_lock(&core->vf_lock);
		if (j->reference)
			core->assets[j->asset].ref_busy = 0;
		else if (core->assets[j->asset].src &&
			 core->assets[j->asset].src[j->source].state == VS_VERIFYING)
			core->assets[j->asset].src[j->source].state = VS_UNKNOWN;
		pthread_mutex_unlock(&core->vf_lock);
	}
	free(j);
}

/* Queues a job; vf_lock held. Returns 1 if queued. */
static int queue_job(struct px_core *core, size_t asset, size_t k, int reference)
{
	struct job *j;
	if (!core->vpool || !(j = malloc(sizeof(*j))))
		return 0;
	j->core = core;
	j->asset = asset;
	j->source = k;
	j->reference = reference;
	if (vf_pool_submit(core->vpool, job_run, job_done, j) != PX_OK) {
		free(j);
		return 0;
	}
	return 1;
}

void px_standby_served(struct px_core *core, size_t asset, size_t source)
{
	struct asset_rt *rt = &core->assets[asset];
	int by = atomic_load(&rt->served_by);
	if (by != (int)source + 1 && by != -1) {
		int want = by == 0 ? (int)source + 1 : -1;
		if (!atomic_compare_exchange_strong(&rt->served_by, &by, want) &&
		    by != (int)source + 1)
			atomic_store(&rt->served_by, -1);
	}
	px_source_good(core, asset, source);
	if (atomic_load(&rt->served))
		return;
	/* the reference is not taken here: a library scan serves every file
	 * and must cost no sample requests. px_standby_tick() takes it once
	 * a session has played for standby_delay. One kept from an earlier
	 * run costs a file read, and lets the first bytes be screened. */
	pthread_mutex_lock(&core->vf_lock);
	int first = !rt->served;
	if (first) {
		rt->served = 1;
		rt->served_at = core->now();
	}
	int load = first && !rt->ref && core->vstore && core->cat->assets[asset].nsources > 1;
	pthread_mutex_unlock(&core->vf_lock);
	if (load) {
		struct vf_record rec;
		char name[VF_STORE_MAX_NAME];
		if (vf_store_reference(core->vstore, core->cat->assets[asset].id, name, sizeof(name),
				       &rec) && rec.has_fp && rec.fp.size == rt->size)
			set_reference(core, asset, &rec.fp, 1);
	}
}

void px_standby_tick(struct px_core *core)
{
	const struct px_config *cfg = core->cfg;
	int64_t now = core->now();

	/* assets with a session that has played for standby_delay */
	pthread_mutex_lock(&core->prov_lock);
	size_t n = 0;
	for (struct px_session *s = core->sessions; s; s = s->next)
		if (s->nhandles && now - s->created >= cfg->standby_delay_ms)
			n++;
	size_t *assets = n ? malloc(n * sizeof(*assets) * 2) : NULL;
	size_t m = 0;
	for (struct px_session *s = core->sessions; s && assets && m < n; s = s->next)
		if (s->nhandles && now - s->created >= cfg->standby_delay_ms) {
			assets[2 * m] = s->asset;
			assets[2 * m + 1] = atomic_load(&s->source);
			m++;
		}
	pthread_mutex_unlock(&core->prov_lock);

	pthread_mutex_lock(&core->vf_lock);
	for (size_t i = 0; i < m; i++) {
		size_t asset = assets[2 * i], active = assets[2 * i + 1];
		struct asset_rt *rt = &core->assets[asset];
		const struct px_asset *a = &core->cat->assets[asset];
		if (!px_src_ensure(core, asset))
			continue;
		if (!rt->ref || rt->ref_unconfirmed) {
			if (!rt->ref_busy && a->nsources > 1 && now >= rt->ref_retry_at &&
			    queue_job(core, asset, active, 1))
				rt->ref_busy = 1;
			if (!rt->ref)
				continue;
		}
		int busy = 0, done = 0;
		for (size_t k = 0; k < a->nsources; k++) {
			busy += rt->src[k].state == VS_VERIFYING;
			done += rt->src[k].state == VS_VERIFIED && k != active;
		}
		for (size_t k = 0; k < a->nsources && done + busy < cfg->max_standby; k++) {
			struct src_rt *sr = &rt->src[k];
			/* an abandoned source is tried again after a backoff
			 * (1, 2, 4 ... 30 min), or once its provider answers
			 * the liveness check after it was abandoned */
			if (sr->state == VS_ABANDONED && !rt->dead[k]) {
				const struct prov_rt *pv = &core->provs[a->sources[k].provider];
				int sh = sr->abandons < 6 ? sr->abandons : 6;
				int64_t wait = 60000LL << (sh > 0 ? sh - 1 : 0);
				if (wait > 1800000)
					wait = 1800000;
				if (now - sr->abandoned_at >= wait || pv->last_good > sr->abandoned_at) {
					sr->state = VS_UNKNOWN;
					sr->inconclusive = 0;
					px_info("verify", "asset %s: %s is tried again after it was "
						"abandoned", a->id, src_name(core, asset, k));
				}
			}
			if (k == active || sr->state != VS_UNKNOWN || rt->dead[k] ||
			    px_source_bad(core, asset, k, now))
				continue;
			/* an inconclusive source is tried again, not at once */
			if (sr->inconclusive && now - sr->checked < 2000LL << sr->inconclusive)
				continue;
			if (!queue_job(core, asset, k, 0))
				break;
			sr->state = VS_VERIFYING;
			busy++;
		}
	}
	pthread_mutex_unlock(&core->vf_lock);
	free(assets);
}

/* ---- cutover */

static const char *reason_name(enum px_status st)
{
	switch (st) {
	case PX_ETIMEDOUT: return "stall";
	case PX_ECONNECT: return "connect";
	case PX_ETRANSFER: return "reset_or_premature_end";
	case PX_EBADRESP: return "bad_response";
	case PX_ESERVER: return "http_5xx";
	case PX_ENOTFOUND: return "not_found";
	case PX_EAUTH: return "auth";
	case PX_ESIZE: return "size";
	case PX_ENOTASSET: return "not_asset";
	case PX_EMISMATCH: return "mismatch";
	default: return "error";
	}
}

/* Candidates for session s, best first, into out (at most cap): sources
 * that did not fail lately before those that did (a stalled or dead origin
 * is tried last, not first), then verified ones, then the fewest sessions
 * on their provider, then the provider's name. */
static size_t candidates(struct px_core *core, struct px_session *s, size_t active,
			 size_t *out, size_t cap)
{
	const struct px_asset *a = &core->cat->assets[s->asset];
	struct asset_rt *rt = &core->assets[s->asset];
	int64_t now = core->now();
	unsigned char bad[64];
	size_t n = 0;

	if (cap > 64)
		cap = 64;
	if (!px_src_ensure(core, s->asset))
		return 0;
	pthread_mutex_lock(&core->prov_lock);
	pthread_mutex_lock(&core->vf_lock);
	for (size_t k = 0; k < a->nsources && n < cap; k++) {
		const struct prov_rt *p = &core->provs[a->sources[k].provider];
		int st = rt->src[k].state;
		/* of either kind: a session reads a URL through transfers and a
		 * path with pread, whichever is active at the moment */
		if (k == active || rt->dead[k] || st == VS_REJECTED || st == VS_ABANDONED ||
		    p->auth_failed)
			continue;
		bad[n] = (unsigned char)(px_source_bad(core, s->asset, k, now) ||
					 (p->bad_since && now - p->bad_since >= core->cfg->liveness_ttl_ms));
		out[n++] = k;
	}
	/* insertion sort on (bad, not verified, sessions, name) */
	for (size_t i = 1; i < n; i++) {
		for (size_t j = i; j > 0; j--) {
			size_t x = out[j - 1], y = out[j];
			const struct prov_rt *px = &core->provs[a->sources[x].provider];
			const struct prov_rt *py = &core->provs[a->sources[y].provider];
			int vx = rt->src[x].state == VS_VERIFIED, vy = rt->src[y].state == VS_VERIFIED;
			int bx = bad[j - 1], by = bad[j];
			int swap = by < bx ||
				   (by == bx && (vy > vx ||
				   (vy == vx && (py->sessions < px->sessions ||
						 (py->sessions == px->sessions &&
						  strcmp(core->cat->providers[a->sources[y].provider].name,
							 core->cat->providers[a->sources[x].provider].name) < 0)))));
			if (!swap)
				break;
			out[j - 1] = y;
			out[j] = x;
			bad[j - 1] = (unsigned char)by;
			bad[j] = (unsigned char)bx;
		}
	}
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_unlock(&core->prov_lock);
	return n;
}

static void record(struct px_core *core, struct px_session *s, int64_t off, size_t from,
		   size_t to, enum px_status why, int64_t took_ms)
{
	pthread_mutex_lock(&core->vf_lock);
	struct cutover_rec *c = &core->recent[core->nrecent++ % RECENT_CUTOVERS];
	c->session = s->id;
	c->asset = s->asset;
	c->offset = off;
	c->from = from;
	c->to = to;
	c->reason = why;
	c->ms = took_ms;
	c->when = core->now();
	core->n_cutovers[why]++;
	pthread_mutex_unlock(&core->vf_lock);
}

static enum px_status cutover_locked(struct px_session *s, size_t failed, int64_t off,
				     enum px_status why, const void *seam, size_t n,
				     int64_t deadline);

enum px_status px_cutover(struct px_session *s, size_t failed, int64_t off, enum px_status why,
			  const void *seam, size_t n, int64_t deadline)
{
	enum px_status rc;

	/* one cutover of a session at a time: readers that saw the same
	 * failure wait for the first, then follow it */
	pthread_mutex_lock(&s->cut_lock);
	if (atomic_load(&s->source) != failed)
		rc = PX_OK;
	else
		rc = cutover_locked(s, failed, off, why, seam, n, deadline);
	pthread_mutex_unlock(&s->cut_lock);
	return rc;
}

/* Whether source k answers with the asset's size, before until. A source
 * of another size is rejected for good; one that does not answer goes last
 * for a while. */
static int size_gate(struct px_core *core, struct px_session *s, size_t k, int64_t until)
{
	struct asset_rt *rt = &core->assets[s->asset];
	struct px_rangeread *rr = NULL;
	struct vf_seen seen;
	struct gate g;
	char why[200] = "";
	int ok = 0;

	if (open_reader(core, s->asset, k, s, until, &g, &rr) != PX_OK)
		return 0;
	px_rangeread_set_size(rr, -1);
	enum px_status st = px_rangeread_probe(rr, &seen, why, sizeof(why));
	px_rangeread_free(rr);
	if (st != PX_OK) {
		if (st == PX_ENOTFOUND)
			rt->dead[k] = 1;
		if (no_answer(st) || st == PX_ENOTASSET)
			px_source_failed(core, s->asset, k, st, why);
	} else if (seen.size != rt->size) {
		struct vf_verdict v = { .outcome = VF_SIZE_MISMATCH, .sample = -1, .offset = -1,
					.size = seen.size };
		snprintf(v.why, sizeof(v.why), "size %lld, the asset's is %lld",
			 (long long)seen.size, (long long)rt->size);
		pthread_mutex_lock(&core->vf_lock);
		apply_verdict(core, s->asset, k, &v);
		pthread_mutex_unlock(&core->vf_lock);
	} else {
		ok = 1;
	}
	return ok;
}

/* px_cutover() with the session's cut_lock held. Each candidate gets at
 * most stall_timeout for its checks (and the read's deadline bounds all):
 * a standby that does not answer costs the reader no more than a stall. */
static enum px_status cutover_locked(struct px_session *s, size_t failed, int64_t off,
				     enum px_status why, const void *seam, size_t n,
				     int64_t deadline)
{
	struct px_core *core = s->core;
	const struct px_asset *a = &core->cat->assets[s->asset];
	struct asset_rt *rt = &core->assets[s->asset];
	size_t cand[64];
	int64_t t0 = px_now_ms();
	int64_t per = core->cfg->stall_timeout_ms > 0 ? core->cfg->stall_timeout_ms : 3000;

	if (why == PX_ENOTFOUND)
		rt->dead[failed] = 1;
	if (why == PX_EAUTH)
		px_provider_auth_failed(core, a->sources[failed].provider, "HTTP 401/403");
	if (why != PX_EAUTH && why != PX_ENOTFOUND)
		px_source_failed(core, s->asset, failed, why, "under a read");
	size_t nc = candidates(core, s, failed, cand, 64);
	pthread_mutex_lock(&core->vf_lock);
	int have_ref = rt->ref != NULL;
	pthread_mutex_unlock(&core->vf_lock);
	if (!have_ref && nc > 0) {
		/* no reference yet: the candidates' own answers make one, from
		 * two that agree (the failed source last, unless it stopped
		 * answering: after a reset it may still answer elsewhere) */
		size_t order[65];
		memcpy(order, cand, nc * sizeof(*cand));
		order[nc] = failed;
		int with_failed = why != PX_ETIMEDOUT && why != PX_ECONNECT && why != PX_ENOTASSET &&
				  why != PX_EMISMATCH;
		(void)agree_reference(core, s->asset, order, nc + (size_t)with_failed, s, per,
				      deadline);
		nc = candidates(core, s, failed, cand, 64);
	}
	for (size_t i = 0; i < nc && px_now_ms() < deadline; i++) {
		size_t k = cand[i];
		int64_t until = px_now_ms() + per;
		struct vf_verdict v;
		if (until > deadline)
			until = deadline;
		pthread_mutex_lock(&core->vf_lock);
		int verified = rt->src[k].state == VS_VERIFIED;
		pthread_mutex_unlock(&core->vf_lock);
		int by = atomic_load(&rt->served_by);
		pthread_mutex_lock(&core->vf_lock);
		have_ref = rt->ref != NULL;
		pthread_mutex_unlock(&core->vf_lock);
		if (!verified && !have_ref && (by == 0 || by == (int)k + 1)) {
			/* nothing of the asset was served by another source yet:
			 * no byte can mix, the size gate is all a move needs (a
			 * broken first source never served, its pages are none) */
			if (!size_gate(core, s, k, until))
				continue;
		} else if (!verified) {
			/* the size gate and the sweep, now, within the read's time */
			verify_source(core, s->asset, k, s, until, &v);
			if (v.outcome != VF_MATCH)
				continue;
			until = px_now_ms() + per;
			if (until > deadline)
				until = deadline;
		}
		if (n > 0 && off >= (int64_t)n) {
			struct px_rangeread *rr = NULL;
			struct gate g;
			if (open_reader(core, s->asset, k, s, until, &g, &rr) != PX_OK)
				continue;
			struct vf_reader r = px_rangeread_reader(rr);
			enum px_status st = vf_seam_check(&r, off, seam, n, &v);
			px_rangeread_free(rr);
			if (st != PX_OK || v.outcome != VF_MATCH) {
				if (st == PX_OK && v.outcome == VF_MISMATCH) {
					pthread_mutex_lock(&core->vf_lock);
					apply_verdict(core, s->asset, k, &v);
					pthread_mutex_unlock(&core->vf_lock);
				} else {
					/* it did not answer: not a verdict */
					px_source_failed(core, s->asset, k,
							 st != PX_OK ? st : PX_ETIMEDOUT, v.why);
				}
				px_warn("cutover", "%s: %s: seam check at %lld: %s", s->who,
					src_name(core, s->asset, k), (long long)off,
					st == PX_OK ? v.why : px_strerror(st));
				continue;
			}
		}
		/* a path must open, with the asset's size, before the move */
		if (px_source_is_path(core, s->asset, k) && px_session_fd(s, k) < 0)
			continue;
		if (px_session_switch(s, k) != PX_OK) {
			px_info("cutover", "%s: %s: its provider is at its limit", s->who,
				src_name(core, s->asset, k));
			continue;
		}
		/* the source that failed served these bytes: a verified standby,
		 * unless they were not the asset's */
		int by_now = atomic_load(&rt->served_by);
		pthread_mutex_lock(&core->vf_lock);
		if (rt->src[failed].state != VS_REJECTED && why != PX_EMISMATCH &&
		    why != PX_ENOTASSET && (by_now == (int)failed + 1 || by_now == -1))
			rt->src[failed].state = VS_VERIFIED;
		pthread_mutex_unlock(&core->vf_lock);
		int64_t took = px_now_ms() - t0;
		record(core, s, off, failed, k, why, took);
		px_info("cutover", "%s offset %lld: %s -> %s (%s), %lld ms", s->who, (long long)off,
			src_name(core, s->asset, failed), src_name(core, s->asset, k),
			reason_name(why), (long long)took);
		return PX_OK;
	}
	return PX_ENOSOURCE;
}

void px_standby_exhausted(struct px_session *s, int64_t off, enum px_status why)
{
	struct px_core *core = s->core;
	pthread_mutex_lock(&core->vf_lock);
	core->n_exhausted++;
	snprintf(core->exhausted_why, sizeof(core->exhausted_why),
		 "%s offset %lld: %s, and no standby could take over", s->who, (long long)off,
		 px_strerror(why));
	pthread_mutex_unlock(&core->vf_lock);
	pthread_mutex_lock(&core->prov_lock);
	s->exhausted = 1;
	pthread_mutex_unlock(&core->prov_lock);
	px_warn("cutover", "%s offset %lld: the read fails with %s: no source could serve it "
		"(fallback_exhausted)", s->who, (long long)off, px_strerror(why));
}

const char *px_cutover_reason_name(enum px_status st)
{
	return reason_name(st);
}

static void store_log(void *ctx, const char *line)
{
	(void)ctx;
	px_warn("verify", "%s", line);
}

enum px_status px_standby_init(struct px_core *core)
{
	const struct px_catalog *cat = core->cat;
	pthread_mutex_init(&core->vf_lock, NULL);
	pthread_cond_init(&core->vf_cond, NULL);
	core->vf_init = 1;
	for (size_t i = 0; i < cat->nassets; i++) {
		core->assets[i].src = NULL; /* px_src_ensure() makes them */
	}
	return PX_OK;
}

enum px_status px_standby_start(struct px_core *core)
{
	char dir[4096], err[512];
	if (core->cfg->state_dir) {
		snprintf(dir, sizeof(dir), "%s/fingerprints", core->cfg->state_dir);
		if (vf_store_open(dir, store_log, NULL, &core->vstore, err, sizeof(err)) != PX_OK)
			px_warn("verify", "fingerprints are not kept: %s", err);
		/* cluster mode: fingerprints and verdicts are the cluster's
		 * (docs/cluster.md) */
		else if (core->store)
			vf_store_share(core->vstore, core->store);
	}
	/* unit tests with a fake fetcher ask for workers explicitly */
	if (!core->fetch && !core->verify_workers)
		return PX_OK;
	if (vf_pool_new(core->verify_workers ? (unsigned)core->verify_workers : 2, 256,
			&core->vpool) != PX_OK) {
		px_warn("verify", "no verifier threads: standbys are verified only at a cutover");
		core->vpool = NULL;
	}
	return PX_OK;
}

void px_standby_stop(struct px_core *core)
{
	if (core->vpool)
		vf_pool_shutdown(core->vpool);
}

void px_standby_release(struct px_core *core)
{
	vf_pool_free(core->vpool);
	core->vpool = NULL;
	vf_store_free(core->vstore);
	core->vstore = NULL;
	if (!core->vf_init)
		return;
	for (size_t i = 0; i < core->cat->nassets; i++) {
		for (size_t k = 0; core->assets[i].src && k <= core->assets[i].source_cap; k++)
			free(core->assets[i].src[k].why);
		free(core->assets[i].src);
		free(core->assets[i].ref);
	}
	pthread_cond_destroy(&core->vf_cond);
	pthread_mutex_destroy(&core->vf_lock);
}

/* ---- the first bytes a source gives */

enum px_status px_standby_screen(struct px_core *core, size_t asset, size_t k, int64_t off,
				 const struct iovec *iov, int iovcnt)
{
	struct asset_rt *rt = &core->assets[asset];
	struct src_rt *all = __atomic_load_n(&rt->src, __ATOMIC_ACQUIRE);
	unsigned char chunk[VF_SAMPLE_LEN], want[VF_HASH_LEN], got[VF_HASH_LEN];
	size_t len = 0;
	long hit = -1;

	/* the read path's cost: a few atomic loads, until a reference exists */
	if (!all || !atomic_load(&rt->ref_known) || atomic_load(&all[k].screened))
		return PX_OK;
	struct src_rt *sr = &all[k];
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	int64_t end = off + (int64_t)len;
	pthread_mutex_lock(&core->vf_lock);
	if (sr->state == VS_VERIFIED) {
		atomic_store(&sr->screened, 1); /* the whole sweep said as much */
	} else if (rt->ref) {
		/* the samples are chunk-aligned: a page-aligned read of 4 KiB or
		 * more covers one whole when it reaches its offset */
		const struct vf_fingerprint *ref = rt->ref;
		for (size_t i = 0; i < ref->plan.n && ref->plan.off[i] < end; i++) {
			if (ref->plan.off[i] >= off && ref->plan.off[i] + ref->plan.len[i] <= end &&
			    ref->have[i]) {
				hit = (long)i;
				memcpy(want, ref->sha[i], sizeof(want));
				break;
			}
		}
	}
	int64_t soff = hit >= 0 ? rt->ref->plan.off[hit] : 0;
	size_t slen = hit >= 0 ? rt->ref->plan.len[hit] : 0;
	pthread_mutex_unlock(&core->vf_lock);
	if (hit < 0)
		return PX_OK;
	/* gather the sample's bytes out of the reply's pieces */
	size_t skip = (size_t)(soff - off), n = 0;
	for (int i = 0; i < iovcnt && n < slen; i++) {
		size_t l = iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		size_t take = l - skip < slen - n ? l - skip : slen - n;
		memcpy(chunk + n, (const unsigned char *)iov[i].iov_base + skip, take);
		n += take;
		skip = 0;
	}
	if (vf_hash_once(chunk, slen, got) != PX_OK)
		return PX_OK; /* cannot hash: nothing proven either way */
	if (memcmp(got, want, sizeof(got)) == 0) {
		atomic_store(&sr->screened, 1);
		return PX_OK;
	}
	struct vf_verdict v = { .outcome = VF_MISMATCH, .sample = hit, .offset = soff,
				.size = rt->size };
	snprintf(v.why, sizeof(v.why), "the bytes it served at %lld differ from the "
		 "reference's sample %ld", (long long)soff, hit);
	pthread_mutex_lock(&core->vf_lock);
	apply_verdict(core, asset, k, &v);
	pthread_mutex_unlock(&core->vf_lock);
	return PX_EMISMATCH;
}

/* ---- verdicts and references from outside the background verifier */

void px_standby_apply_verdict(struct px_core *core, size_t asset, size_t k,
			      const struct vf_verdict *v)
{
	pthread_mutex_lock(&core->vf_lock);
	apply_verdict(core, asset, k, v);
	pthread_mutex_unlock(&core->vf_lock);
}

enum px_status px_standby_set_reference(struct px_core *core, size_t asset,
					const struct vf_fingerprint *fp)
{
	/* a reference of another size, or with a sample missing, would
	 * reject every source or prove none */
	if (fp->size != core->assets[asset].size || !vf_fingerprint_complete(fp))
		return PX_EINVAL;
	set_reference(core, asset, fp, 1);
	return PX_OK;
}
