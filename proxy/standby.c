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

#include "core_i.h"
#include "log.h"
#include "pool.h"
#include "rangeread.h"
#include "seam.h"
#include "store.h"
#include "verdict.h"

#define SAMPLE_TIMEOUT_MS 5000   /* one sample read in the background */
#define SPARE_WAIT_MS 500        /* background work waits this long for a slot */
#define ABANDON_AFTER 5          /* inconclusive checks in a row */
#define RECENT_CUTOVERS 8

static const char *src_name(const struct px_core *core, size_t asset, size_t k)
{
	const struct px_source *s = &core->cat->assets[asset].sources[k];
	return s->url ? s->url : s->path;
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
	if (st == PX_OK)
		px_rangeread_set_size(*out, core->assets[asset].size);
	return st;
}

/* ---- the reference */

/* Takes or loads the asset's reference fingerprint from source k (the one
 * that served first). Background; any thread but the fetch thread. */
static void take_reference(struct px_core *core, size_t asset, size_t k)
{
	const struct px_asset *a = &core->cat->assets[asset];
	struct asset_rt *rt = &core->assets[asset];
	struct vf_fingerprint *fp = calloc(1, sizeof(*fp));
	struct px_rangeread *rr = NULL;
	struct vf_record rec;
	struct gate g;
	char name[VF_STORE_MAX_NAME], why[200] = "", err[300];
	size_t bad;
	enum px_status st = PX_ENOMEM;

	if (!fp)
		goto out;
	if (core->vstore && vf_store_reference(core->vstore, a->id, name, sizeof(name), &rec) &&
	    rec.has_fp && rec.fp.size == rt->size) {
		*fp = rec.fp;
		st = PX_OK;
		px_debug("verify", "asset %s: reference fingerprint from the store (%s)", a->id, name);
		goto out;
	}
	st = open_reader(core, asset, k, NULL, 0, &g, &rr);
	if (st != PX_OK)
		goto out;
	struct vf_reader r = px_rangeread_reader(rr);
	st = vf_fingerprint_take(&r, rt->size, fp, &bad, why, sizeof(why));
	if (st != PX_OK)
		goto out;
	if (core->vstore) {
		memset(&rec, 0, sizeof(rec));
		rec.seen.size = rt->size;
		rec.seen.mtime = -1;
		rec.has_fp = 1;
		rec.fp = *fp;
		if (vf_store_put(core->vstore, a->id, src_name(core, asset, k), &rec, 1, err,
				 sizeof(err)) != PX_OK)
			px_warn("verify", "asset %s: could not store the reference: %s", a->id, err);
	}
	px_info("verify", "asset %s: reference fingerprint taken from %s (%zu samples)", a->id,
		src_name(core, asset, k), fp->plan.n);
out:
	px_rangeread_free(rr);
	pthread_mutex_lock(&core->vf_lock);
	rt->ref_busy = 0;
	if (st == PX_OK && !rt->ref) {
		rt->ref = fp;
		fp = NULL;
		if (vf_fingerprint_id(rt->ref, rt->ref_id) != PX_OK)
			rt->ref_id[0] = '\0';
	} else if (st != PX_OK) {
		px_warn("verify", "asset %s: no reference fingerprint yet: %s%s%s", a->id,
			px_strerror(st), why[0] ? ": " : "", why);
	}
	pthread_cond_broadcast(&core->vf_cond);
	pthread_mutex_unlock(&core->vf_lock);
	free(fp);
}

/* ---- verifying one source */

/* Applies a verdict to source k's state. vf_lock held. */
static void apply_verdict(struct px_core *core, size_t asset, size_t k,
			  const struct vf_verdict *v)
{
	struct src_rt *sr = &core->assets[asset].src[k];
	const char *id = core->cat->assets[asset].id;
	snprintf(sr->why, sizeof(sr->why), "%s", v->why);
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
		px_info("verify", "asset %s: %s inconclusive (%d in a row%s): %s", id,
			src_name(core, asset, k), sr->inconclusive,
			sr->state == VS_ABANDONED ? ", abandoned" : "", v->why);
		break;
	}
	sr->checked = core->now();
	core->n_verified[v->outcome]++;
}

/*
 * Verifies source k against the reference: the size gate, then the stored
 * fingerprint if it is still valid, else the sampled sweep. sess/deadline:
 * see open_reader. Fills *v. Updates the source's state and the store.
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
	char why[200] = "", err[300];
	enum px_status st;

	memset(v, 0, sizeof(*v));
	v->outcome = VF_INCONCLUSIVE;
	v->sample = -1;
	v->offset = -1;
	v->size = -1;
	ref = malloc(sizeof(*ref));
	cand = malloc(sizeof(*cand));
	pthread_mutex_lock(&core->vf_lock);
	int have_ref = rt->ref != NULL;
	if (have_ref && ref)
		*ref = *rt->ref;
	pthread_mutex_unlock(&core->vf_lock);
	if (!ref || !cand) {
		snprintf(v->why, sizeof(v->why), "out of memory");
		goto out;
	}
	if (!have_ref) {
		snprintf(v->why, sizeof(v->why), "no reference fingerprint of the asset yet");
		goto out;
	}
	st = open_reader(core, asset, k, sess, deadline, &g, &rr);
	if (st != PX_OK) {
		snprintf(v->why, sizeof(v->why), "%s", px_strerror(st));
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
		snprintf(v->why, sizeof(v->why), "size unknown: %s (%s)", px_strerror(st), why);
		goto out;
	}
	v->size = seen.size;
	if (seen.size != rt->size) {
		v->outcome = VF_SIZE_MISMATCH;
		snprintf(v->why, sizeof(v->why), "size %lld, the asset's is %lld",
			 (long long)seen.size, (long long)rt->size);
		goto store;
	}
	px_rangeread_set_size(rr, rt->size);
	if (core->vstore && vf_store_get(core->vstore, a->id, src_name(core, asset, k), &seen,
					 &rec) && rec.has_fp) {
		vf_verdict_compare(ref, &rec.fp, v);
		goto done; /* nothing new to store */
	}
	struct vf_reader r = px_rangeread_reader(rr);
	if (vf_verdict_check(ref, seen.size, &r, v, cand) != PX_OK) {
		v->outcome = VF_INCONCLUSIVE;
		if (!v->why[0])
			snprintf(v->why, sizeof(v->why), "could not check");
	}
store:
	if (core->vstore && v->outcome != VF_INCONCLUSIVE) {
		memset(&rec, 0, sizeof(rec));
		rec.seen = seen;
		rec.has_fp = v->outcome != VF_SIZE_MISMATCH && vf_fingerprint_complete(cand);
		if (rec.has_fp)
			rec.fp = *cand;
		rec.has_verdict = 1;
		rec.verdict = *v;
		pthread_mutex_lock(&core->vf_lock);
		snprintf(rec.ref, sizeof(rec.ref), "%s",
			 v->outcome == VF_SIZE_MISMATCH ? "" : rt->ref_id);
		pthread_mutex_unlock(&core->vf_lock);
		if (vf_store_put(core->vstore, a->id, src_name(core, asset, k), &rec, 0, err,
				 sizeof(err)) != PX_OK)
			px_warn("verify", "asset %s: could not store a verdict: %s", a->id, err);
	}
done:
	;
out:
	px_rangeread_free(rr);
	pthread_mutex_lock(&core->vf_lock);
	apply_verdict(core, asset, k, v);
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
		else if (core->assets[j->asset].src[j->source].state == VS_VERIFYING)
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
	if (atomic_load(&rt->served))
		return;
	pthread_mutex_lock(&core->vf_lock);
	if (!rt->served) {
		rt->served = 1;
		rt->served_at = core->now();
		if (!rt->ref && !rt->ref_busy && core->cat->assets[asset].nsources > 1 &&
		    queue_job(core, asset, source, 1))
			rt->ref_busy = 1;
	}
	pthread_mutex_unlock(&core->vf_lock);
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
		if (!rt->ref) {
			if (!rt->ref_busy && a->nsources > 1 && queue_job(core, asset, active, 1))
				rt->ref_busy = 1;
			continue;
		}
		int busy = 0, done = 0;
		for (size_t k = 0; k < a->nsources; k++) {
			busy += rt->src[k].state == VS_VERIFYING;
			done += rt->src[k].state == VS_VERIFIED && k != active;
		}
		for (size_t k = 0; k < a->nsources && done + busy < cfg->max_standby; k++) {
			struct src_rt *sr = &rt->src[k];
			if (k == active || sr->state != VS_UNKNOWN || rt->dead[k])
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
	default: return "error";
	}
}

/* Candidates for session s, best first, into out (at most cap). */
static size_t candidates(struct px_core *core, struct px_session *s, size_t active,
			 size_t *out, size_t cap)
{
	const struct px_asset *a = &core->cat->assets[s->asset];
	struct asset_rt *rt = &core->assets[s->asset];
	size_t n = 0;

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
		out[n++] = k;
	}
	/* insertion sort: verified first, then fewest sessions, then name */
	for (size_t i = 1; i < n; i++) {
		for (size_t j = i; j > 0; j--) {
			size_t x = out[j - 1], y = out[j];
			const struct prov_rt *px = &core->provs[a->sources[x].provider];
			const struct prov_rt *py = &core->provs[a->sources[y].provider];
			int vx = rt->src[x].state == VS_VERIFIED, vy = rt->src[y].state == VS_VERIFIED;
			int swap = vy > vx ||
				   (vy == vx && (py->sessions < px->sessions ||
						 (py->sessions == px->sessions &&
						  strcmp(core->cat->providers[a->sources[y].provider].name,
							 core->cat->providers[a->sources[x].provider].name) < 0)));
			if (!swap)
				break;
			out[j - 1] = y;
			out[j] = x;
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

/* px_cutover() with the session's cut_lock held. */
static enum px_status cutover_locked(struct px_session *s, size_t failed, int64_t off,
				     enum px_status why, const void *seam, size_t n,
				     int64_t deadline)
{
	struct px_core *core = s->core;
	const struct px_asset *a = &core->cat->assets[s->asset];
	size_t cand[64];
	int64_t t0 = px_now_ms();

	if (why == PX_ENOTFOUND)
		core->assets[s->asset].dead[failed] = 1;
	if (why == PX_EAUTH)
		px_provider_auth_failed(core, a->sources[failed].provider, "HTTP 401/403");
	size_t nc = candidates(core, s, failed, cand, 64);
	for (size_t i = 0; i < nc && px_now_ms() < deadline; i++) {
		size_t k = cand[i];
		struct vf_verdict v;
		pthread_mutex_lock(&core->vf_lock);
		int verified = core->assets[s->asset].src[k].state == VS_VERIFIED;
		pthread_mutex_unlock(&core->vf_lock);
		if (!verified) {
			/* the size gate and the sweep, now, within the read's time */
			verify_source(core, s->asset, k, s, deadline, &v);
			if (v.outcome != VF_MATCH)
				continue;
		}
		if (n > 0 && off >= (int64_t)n) {
			struct px_rangeread *rr = NULL;
			struct gate g;
			if (open_reader(core, s->asset, k, s, deadline, &g, &rr) != PX_OK)
				continue;
			struct vf_reader r = px_rangeread_reader(rr);
			enum px_status st = vf_seam_check(&r, off, seam, n, &v);
			px_rangeread_free(rr);
			if (st != PX_OK || v.outcome != VF_MATCH) {
				pthread_mutex_lock(&core->vf_lock);
				if (st == PX_OK)
					apply_verdict(core, s->asset, k, &v);
				pthread_mutex_unlock(&core->vf_lock);
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
		/* the source that failed served these bytes: a verified standby */
		pthread_mutex_lock(&core->vf_lock);
		if (core->assets[s->asset].src[failed].state != VS_REJECTED)
			core->assets[s->asset].src[failed].state = VS_VERIFIED;
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
	px_warn("cutover", "%s offset %lld: fallback_exhausted (%s)", s->who, (long long)off,
		px_strerror(why));
}

const char *px_standby_state_name(int state)
{
	switch (state) {
	case VS_VERIFYING: return "verifying";
	case VS_VERIFIED: return "verified";
	case VS_REJECTED: return "rejected";
	case VS_ABANDONED: return "abandoned";
	default: return "unverified";
	}
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
		core->assets[i].src = calloc(core->assets[i].source_cap + 1, sizeof(struct src_rt));
		if (!core->assets[i].src)
			return PX_ENOMEM;
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
		free(core->assets[i].src);
		free(core->assets[i].ref);
	}
	pthread_cond_destroy(&core->vf_cond);
	pthread_mutex_destroy(&core->vf_lock);
}
