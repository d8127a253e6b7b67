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
 * References. A session's reference is the source it is served from: its
 * samples are hashed as the reader passes them and the rest fetched early
 * (ownprint.c). The asset's reference, for verifying standbys in the
 * background, is the catalog's sha256's fingerprint, or a fingerprint a
 * strict majority of the live sources agree on (stored in state_dir; one
 * a majority contradicts is reopened). docs/design.md "Verification".
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
 * cut equal the bytes the old source gave); an unverified one is checked
 * now against the session's reference (its samples swept in parallel),
 * within the read's deadline. The
 * session then moves to it (px_session_switch) and the read goes on at the
 * same offset. The source that failed stays a verified standby: it served
 * these very bytes.
 *
 * Lock: core->verify->vf_lock guards the states, the reference and the counters;
 * never held across I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "health.h"
#include "provider.h"
#include "standby.h"
#include "standby_i.h"
#include "httpparse.h"
#include "ownprint.h"
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
/* The source as logs show it: without credentials. */
static const char *src_name(const struct px_core *core, size_t asset, size_t k)
{
	return px_cat(core)->assets[asset].sources[k].shown;
}

/* The source's name in the fingerprint store: no credential on disk. */
static const char *src_key(const struct px_core *core, size_t asset, size_t k)
{
	return px_cat(core)->assets[asset].sources[k].key;
}

/* Whether a failed request of source k says k failed (it goes last for a
 * while: px_source_failed): it did not answer, or answered wrong. A
 * provider at its limit says nothing of the source, and a cancel, a
 * shutdown or a lack of memory nothing at all. */
static int says_failed(enum px_status st);

/* take_own's flags: the size gate first; only the samples asked first */
#define TAKE_GATE 1
#define TAKE_FIRST_ONLY 2
#define WHY_LEN 200             /* a sample read's reason, in words */

/* The size gate a cutover's take_own asks of source k: a path's (fstat,
 * no wait), not a URL's, a round trip the reader would wait for, while
 * each sample's answer is held to the asset's size anyway. */
static int cutover_gate(const struct px_core *core, size_t asset, size_t k)
{
	return px_source_is_path(core, asset, k) ? TAKE_GATE : 0;
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
	if (p->no_wait)
		deadline = px_now_ms();
	return px_xfer_submit(g->core, g->prov, g->sess, g->sess == NULL, deadline, p, cb, id);
}

static void g_cancel(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->fetch.ops.cancel(g->core->fetch.ops.impl, id);
}

static void g_resume(void *impl, uint64_t id)
{
	struct gate *g = impl;
	g->core->fetch.ops.resume(g->core->fetch.ops.impl, id);
}

/* A reader of source k of the asset; sess NULL for background work, else
 * the session whose read it serves (deadline bounds it). */
static enum px_status open_reader(struct px_core *core, size_t asset, size_t k,
				  struct px_session *sess, int64_t deadline, struct gate *g,
				  struct px_rangeread **out)
{
	const struct px_source *src = &px_cat(core)->assets[asset].sources[k];
	const struct px_provider *p = &px_cat(core)->providers[src->provider];
	enum px_status st;

	if (src->path)
		st = px_rangeread_new_fd(src->path, px_source_open(core, asset, k), out);
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
					   p->nheaders, timeout, sess ? 16 : 2, out);
		if (st == PX_OK && deadline)
			px_rangeread_set_until(*out, deadline);
		/* a range that stalls frees its slot, and its source is asked
		 * nothing more in that batch */
		if (st == PX_OK)
			px_rangeread_set_stall(*out, core->cfg->stall_timeout_ms,
					       core->cfg->stall_min_rate);
	}
	if (st == PX_OK) {
		px_rangeread_set_size(*out, px_asset_rt(core, asset)->size);
		px_rangeread_set_html_ok(*out, px_http_is_html_path(px_cat(core)->assets[asset].path));
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

static int says_failed(enum px_status st)
{
	if (st == PX_EBUSY || st == PX_ECANCELED || st == PX_ESHUTDOWN || st == PX_ENOMEM)
		return 0;
	return no_answer(st) || st == PX_ENOTFOUND || st == PX_ENOTASSET;
}

/* ---- the reference */

static void apply_verdict(struct px_core *core, size_t asset, size_t k,
			  const struct vf_verdict *v);

/* Stores source k's fingerprint (and, when v is not NULL, its verdict
 * against the reference) in the verifier's store. */
static void store_fp(struct px_core *core, size_t asset, size_t k, const struct vf_seen *seen,
		     const struct vf_fingerprint *fp, const struct vf_verdict *v, int reference)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct vf_record rec;
	char err[300];
	if (!core->verify->vstore)
		return;
	memset(&rec, 0, sizeof(rec));
	rec.seen = *seen;
	rec.has_fp = fp && vf_fingerprint_complete(fp);
	if (rec.has_fp)
		rec.fp = *fp;
	if (v) {
		rec.has_verdict = 1;
		rec.verdict = *v;
		pthread_mutex_lock(&core->verify->vf_lock);
		snprintf(rec.ref, sizeof(rec.ref), "%s",
			 v->outcome == VF_SIZE_MISMATCH ? "" : px_asset_rt(core, asset)->ref_id);
		pthread_mutex_unlock(&core->verify->vf_lock);
	}
	if (!reference && rec.has_fp) {
		/* a new record of the reference's own source keeps it the
		 * reference (a put without the flag would end that) */
		struct vf_record cur;
		char name[VF_STORE_MAX_NAME];
		reference = vf_store_reference(core->verify->vstore, a->id, name, sizeof(name), &cur) &&
			    strcmp(name, src_key(core, asset, k)) == 0;
	}
	if (vf_store_put(core->verify->vstore, a->id, src_key(core, asset, k), &rec, reference, err,
			 sizeof(err)) != PX_OK)
		px_warn("verify", "asset %s: could not store a fingerprint: %s", a->id, err);
}

/* What source k's last size probe saw, the key of its stored record; its
 * size alone when it was never probed. */
static struct vf_seen seen_of(struct px_core *core, size_t asset, size_t k)
{
	struct vf_seen seen = { .size = px_asset_rt(core, asset)->size, .mtime = -1 };
	struct src_rt *all = px_src_ensure(core, asset);
	pthread_mutex_lock(&core->verify->vf_lock);
	if (all && all[k].seen)
		seen = *all[k].seen;
	pthread_mutex_unlock(&core->verify->vf_lock);
	return seen;
}

int px_standby_seen(struct px_core *core, size_t asset, size_t k, char etag[128],
		    int64_t *mtime)
{
	int known = 0;
	struct src_rt *all = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	etag[0] = '\0';
	*mtime = -1;
	if (!all)
		return 0;
	pthread_mutex_lock(&core->verify->vf_lock);
	if (all[k].seen) {
		snprintf(etag, 128, "%s", all[k].seen->etag);
		*mtime = all[k].seen->mtime;
		known = 1;
	}
	pthread_mutex_unlock(&core->verify->vf_lock);
	return known;
}

/* Keeps what source k's size probe saw. */
static void keep_seen(struct px_core *core, size_t asset, size_t k, const struct vf_seen *seen)
{
	struct src_rt *all = px_src_ensure(core, asset);
	pthread_mutex_lock(&core->verify->vf_lock);
	if (all && (all[k].seen || (all[k].seen = malloc(sizeof(*all[k].seen)))))
		*all[k].seen = *seen;
	pthread_mutex_unlock(&core->verify->vf_lock);
}

/* Installs fp as the asset's reference: when it has none, or (replace)
 * over one the sources overruled. vf_lock held. Returns 1 if installed. */
static int install_reference(struct px_core *core, size_t asset, const struct vf_fingerprint *fp,
			     int from_store, int replace)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	if (rt->ref && !replace)
		return 0;
	struct vf_fingerprint *mine = malloc(sizeof(*mine));
	if (!mine)
		return 0;
	*mine = *fp;
	free(rt->ref);
	rt->ref = mine;
	if (vf_fingerprint_id(rt->ref, rt->ref_id) != PX_OK)
		rt->ref_id[0] = '\0';
	rt->ref_fails = 0;
	rt->ref_from_store = from_store;
	rt->ref_recheck = 0;
	/* every source is screened again against the new one */
	for (size_t k = 0; rt->src && k <= rt->source_cap; k++)
		atomic_store(&rt->src[k].screened, 0);
	pthread_cond_broadcast(&core->verify->vf_cond);
	return 1;
}

static void set_reference(struct px_core *core, size_t asset, const struct vf_fingerprint *fp,
			  int from_store)
{
	pthread_mutex_lock(&core->verify->vf_lock);
	(void)install_reference(core, asset, fp, from_store, 0);
	pthread_mutex_unlock(&core->verify->vf_lock);
}

/* How many sources must agree for a reference: a strict majority of the
 * asset's sources still in the running (not dead, not of another size),
 * at least two. */
static size_t majority(struct px_core *core, size_t asset)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	size_t live = 0;
	struct src_rt *all = px_src_ensure(core, asset);
	pthread_mutex_lock(&core->verify->vf_lock);
	for (size_t k = 0; k < a->nsources; k++)
		live += !px_asset_rt(core, asset)->dead[k] && !(all && all[k].wrong_size);
	pthread_mutex_unlock(&core->verify->vf_lock);
	return live / 2 + 1 < 2 ? 2 : live / 2 + 1;
}

/*
 * Whether a strict majority of the asset's sources have whole fingerprints
 * that agree (no I/O: the fingerprints the sources' own bytes, sweeps and
 * early fetches gave). If so, and the asset has no reference or one the
 * store gave that they overrule (reopen), theirs becomes the reference,
 * and every source with a whole fingerprint gets its verdict against it.
 * Returns 1 when the asset has a reference the sources back.
 */
static int maybe_agree(struct px_core *core, size_t asset, int reopen)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
	size_t n = a->nsources, need = majority(core, asset), best = 0, at = 0;
	struct vf_fingerprint *fps = calloc(n ? n : 1, sizeof(*fps));
	unsigned char *have = calloc(n ? n : 1, 1);
	int ok = 0;

	if (!fps || !have)
		goto out;
	for (size_t k = 0; k < n; k++)
		have[k] = !rt->dead[k] && px_own_full(core, asset, k) &&
			  px_own_get(core, asset, k, &fps[k]) == fps[k].plan.n;
	for (size_t k = 0; k < n; k++) {
		size_t same = 0, i;
		for (size_t j = 0; j < n && have[k]; j++)
			same += have[j] && px_own_agrees(&fps[k], &fps[j], &i) == PX_OWN_SAME;
		if (same > best) {
			best = same;
			at = k;
		}
	}
	if (best < need)
		goto out;
	pthread_mutex_lock(&core->verify->vf_lock);
	size_t i;
	int differs = rt->ref && px_own_agrees(rt->ref, &fps[at], &i) != PX_OWN_SAME;
	int installed = install_reference(core, asset, &fps[at], 0, reopen && differs &&
					  rt->ref_from_store);
	if (installed && differs) {
		rt->n_reopened++;
		/* what the overruled reference judged is judged again */
		for (size_t k = 0; k < n; k++)
			if ((rt->src[k].state == VS_REJECTED && !rt->dead[k]) ||
			    rt->src[k].state == VS_VERIFIED)
				rt->src[k].state = VS_UNKNOWN;
	}
	ok = !rt->ref_from_store || !differs || installed;
	pthread_mutex_unlock(&core->verify->vf_lock);
	if (!installed)
		goto out;
	if (differs)
		px_warn("verify", "asset %s: %zu of %zu sources agree against the stored reference "
			"fingerprint: it is reopened, theirs replaces it", a->id, best, n);
	else
		px_info("verify", "asset %s: reference fingerprint from %zu of %zu sources that "
			"agree (%s first)", a->id, best, n, src_name(core, asset, at));
	for (size_t k = 0; k < n; k++) {
		struct vf_verdict v;
		struct vf_seen seen = seen_of(core, asset, k);
		if (!have[k])
			continue;
		vf_verdict_compare(&fps[at], &fps[k], &v);
		pthread_mutex_lock(&core->verify->vf_lock);
		apply_verdict(core, asset, k, &v);
		pthread_mutex_unlock(&core->verify->vf_lock);
		store_fp(core, asset, k, &seen, &fps[k], &v, k == at);
	}
out:
	free(fps);
	free(have);
	return ok;
}

/*
 * Reads into fp (source k's own fingerprint) the samples it lacks, only
 * those `first` has when first is not NULL, in one batch through rr, and
 * adds them to k's own. A source whose samples came below stall_min_rate
 * goes last for a while: its bytes count, but it would stall a reader.
 */
static enum px_status fill_own(struct px_core *core, size_t asset, size_t k,
			       struct px_rangeread *rr, struct vf_fingerprint *fp,
			       const struct vf_fingerprint *first, char why[WHY_LEN])
{
	unsigned char skip[VF_MAX_SAMPLES] = { 0 };
	struct vf_reader r = px_rangeread_reader(rr);
	size_t bad;

	for (size_t i = 0; first && i < fp->plan.n; i++) {
		skip[i] = !fp->have[i] && !first->have[i];
		fp->have[i] |= skip[i]; /* not asked for in this batch */
	}
	enum px_status st = vf_fingerprint_fill(&r, fp, &bad, why, WHY_LEN);
	for (size_t i = 0; first && i < fp->plan.n; i++)
		fp->have[i] = (unsigned char)(fp->have[i] && !skip[i]);
	if (px_own_merge(core, asset, k, fp) >= 0)
		px_warn("verify", "asset %s: %s gave other bytes for a sample than before",
			px_cat(core)->assets[asset].id, src_name(core, asset, k));
	int64_t rate = px_rangeread_slow_rate(rr);
	if (rate >= 0) {
		char slow[120];
		snprintf(slow, sizeof(slow), "its samples came at %lld B/s, under stall_min_rate",
			 (long long)rate);
		px_source_failed(core, asset, k, PX_ETIMEDOUT, slow);
	}
	return st;
}

/*
 * Fills source k's own fingerprint with the samples it lacks: the size
 * gate (a source of another size is rejected for good), then the missing
 * samples, those `first` has (the session's reference; NULL: none) in a
 * batch before the rest. flags: TAKE_GATE for the size gate, and
 * TAKE_FIRST_ONLY to leave the rest for later. sess/until as for
 * open_reader (NULL, 0: background work in spare slots). Returns PX_OK when
 * the samples asked for are in; a status that says the source did not
 * answer leaves it last for a while.
 */
static enum px_status take_own(struct px_core *core, size_t asset, size_t k,
				   struct px_session *sess, int64_t until, int flags,
				   const struct vf_fingerprint *first)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct vf_fingerprint *fp = malloc(sizeof(*fp));
	struct px_rangeread *rr = NULL;
	struct vf_seen seen;
	struct gate g;
	char why[WHY_LEN] = "";
	enum px_status st;

	if (!fp)
		return PX_ENOMEM;
	if (px_own_get(core, asset, k, fp) == fp->plan.n) {
		st = PX_OK;
		goto out;
	}
	if ((st = open_reader(core, asset, k, sess, until, &g, &rr)) != PX_OK)
		goto out;
	if (flags & TAKE_GATE) {
		px_rangeread_set_size(rr, -1);
		st = px_rangeread_probe(rr, &seen, why, sizeof(why));
		if (st == PX_OK)
			keep_seen(core, asset, k, &seen);
		if (st == PX_OK && seen.size != rt->size) {
			struct vf_verdict v = { .outcome = VF_SIZE_MISMATCH, .sample = -1,
						.offset = -1, .size = seen.size };
			snprintf(v.why, sizeof(v.why), "size %lld, the asset's is %lld",
				 (long long)seen.size, (long long)rt->size);
			pthread_mutex_lock(&core->verify->vf_lock);
			apply_verdict(core, asset, k, &v);
			pthread_mutex_unlock(&core->verify->vf_lock);
			store_fp(core, asset, k, &seen, NULL, &v, 0);
			st = PX_ESIZE;
			goto out;
		}
		px_rangeread_set_size(rr, rt->size);
		/* a fingerprint stored for these very bytes costs no request */
		struct vf_record rec;
		if (st == PX_OK && core->verify->vstore &&
		    vf_store_get(core->verify->vstore, px_cat(core)->assets[asset].id,
				 src_key(core, asset, k), &seen, &rec) &&
		    rec.has_fp && rec.fp.size == rt->size) {
			(void)px_own_merge(core, asset, k, &rec.fp);
			if (px_own_get(core, asset, k, fp) == fp->plan.n)
				goto out;
		}
	}
	if (st == PX_OK && first) {
		/* the samples the session's reference has, before the rest */
		st = fill_own(core, asset, k, rr, fp, first, why);
	}
	if (st == PX_OK && !(flags & TAKE_FIRST_ONLY))
		st = fill_own(core, asset, k, rr, fp, NULL, why);
out:
	if (st != PX_OK && st != PX_ESIZE && st != PX_ENOMEM) {
		if (st == PX_ENOTFOUND)
			rt->dead[k] = 1;
		if (st == PX_EAUTH)
			px_provider_auth_failed(core, px_cat(core)->assets[asset].sources[k].provider,
						why);
		if (says_failed(st))
			px_source_failed(core, asset, k, st, why);
		px_debug("verify", "asset %s: %s: samples not all read: %s%s%s",
			 px_cat(core)->assets[asset].id, src_name(core, asset, k), px_strerror(st),
			 why[0] ? ": " : "", why);
	}
	px_rangeread_free(rr);
	free(fp);
	return st;
}

/*
 * Takes the asset's reference from its sources' own answers: the whole
 * fingerprints of the sources in order[] (what they lack is read, each
 * source bounded by SAMPLE_TIMEOUT_MS), until a strict majority agree
 * (maybe_agree). Background work in spare slots. Returns 1 when the asset
 * has a reference.
 */
static int agree_reference(struct px_core *core, size_t asset, const size_t *order, size_t n,
			   int reopen)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	const struct px_asset *a = &px_cat(core)->assets[asset];
	size_t taken = 0;
	int ok = maybe_agree(core, asset, reopen);

	for (size_t i = 0; i < n && !ok; i++) {
		if (take_own(core, asset, order[i], NULL, 0, TAKE_GATE, NULL) != PX_OK)
			continue;
		taken++;
		ok = maybe_agree(core, asset, reopen);
	}
	if (!ok) {
		pthread_mutex_lock(&core->verify->vf_lock);
		/* the backoff is in time, per asset: a failed attempt waits
		 * 4 s, doubling to 8.5 min, however many reads fail meanwhile
		 * (cutovers never take a reference: the served source's own
		 * fingerprint judges them) */
		int fails = ++rt->ref_fails;
		int64_t wait = 2000LL << (fails < 8 ? fails : 8);
		rt->ref_retry_at = core->now() + wait;
		pthread_mutex_unlock(&core->verify->vf_lock);
		px_info("verify", "asset %s: no reference yet: %zu whole fingerprint(s) read, no "
			"majority of %zu agrees; next try in %lld s", a->id, taken,
			majority(core, asset), (long long)wait / 1000);
	}
	return ok;
}

/* The asset's sources that may give a reference: `first` (the one that
 * served) first, then the others that are not dead or rejected, sources
 * that failed lately last. Returns how many were put in out. */
static size_t reference_order(struct px_core *core, size_t asset, size_t first, size_t *out,
			      size_t cap)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
	int64_t now = core->now();
	size_t n = 0;
	if (!px_src_ensure(core, asset))
		return 0;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < a->nsources && n < cap; k++) {
			size_t src = k == 0 ? first : k <= first ? k - 1 : k;
			int bad = px_source_bad(core, asset, src, now);
			pthread_mutex_lock(&core->verify->vf_lock);
			int st = rt->src[src].state;
			pthread_mutex_unlock(&core->verify->vf_lock);
			if (rt->dead[src] || (st == VS_REJECTED && !rt->ref_recheck) || bad != pass)
				continue;
			out[n++] = src;
		}
	}
	return n;
}

/* Takes or loads the asset's reference fingerprint, from source k (the one
 * that served) and the others until a majority agrees; with ref_recheck,
 * asks the sources whether they overrule the stored one. Background; any
 * thread but the fetch thread. */
static void take_reference(struct px_core *core, size_t asset, size_t k)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct vf_record rec;
	char name[VF_STORE_MAX_NAME];
	size_t order[64];

	pthread_mutex_lock(&core->verify->vf_lock);
	int recheck = rt->ref_recheck;
	pthread_mutex_unlock(&core->verify->vf_lock);
	if (!recheck && core->verify->vstore &&
	    vf_store_reference(core->verify->vstore, a->id, name, sizeof(name), &rec) && rec.has_fp &&
	    rec.fp.size == rt->size) {
		set_reference(core, asset, &rec.fp, 1);
		char shown[512]; /* an older seamfs named records by the whole URL */
		px_redact_url(name, shown, sizeof(shown));
		px_debug("verify", "asset %s: reference fingerprint from the store (%s)", a->id,
			 shown);
	} else {
		size_t n = reference_order(core, asset, k, order, 64);
		(void)agree_reference(core, asset, order, n, recheck);
	}
	pthread_mutex_lock(&core->verify->vf_lock);
	rt->ref_busy = 0;
	rt->ref_recheck = 0;
	pthread_cond_broadcast(&core->verify->vf_cond);
	pthread_mutex_unlock(&core->verify->vf_lock);
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
	const char *id = px_cat(core)->assets[asset].id;
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
		sr->wrong_size = v->outcome == VF_SIZE_MISMATCH;
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
	core->verify->n_verified[v->outcome]++;
}

/*
 * Verifies source k against the reference: the size gate, then its own
 * fingerprint, completed from the store or a sampled sweep of what it
 * lacks (a whole one costs no request). sess/deadline: see open_reader.
 * Fills *v. Updates the source's state and the store. Only the source's
 * own answers make a verdict: with no reference yet, or when the source
 * did not answer (a timeout, a refused connection, a stall), its state
 * stays unverified, uncounted, and a source that did not answer goes last
 * for a while (px_source_failed). A mismatch against a reference the store
 * gave asks the sources whether they overrule it (ref_recheck).
 */
static void verify_source(struct px_core *core, size_t asset, size_t k,
			  struct px_session *sess, int64_t deadline, struct vf_verdict *v)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct vf_fingerprint *ref = malloc(sizeof(*ref)), *cand = malloc(sizeof(*cand));
	int counts = 0;         /* the outcome is a verdict on the source */

	memset(v, 0, sizeof(*v));
	v->outcome = VF_INCONCLUSIVE;
	v->sample = -1;
	v->offset = -1;
	v->size = -1;
	if (!ref || !cand || !px_src_ensure(core, asset)) {
		snprintf(v->why, sizeof(v->why), "out of memory");
		goto out;
	}
	pthread_mutex_lock(&core->verify->vf_lock);
	int have_ref = rt->ref != NULL;
	if (have_ref)
		*ref = *rt->ref;
	pthread_mutex_unlock(&core->verify->vf_lock);
	if (!have_ref) {
		snprintf(v->why, sizeof(v->why), "no reference fingerprint of the asset yet");
		goto out;
	}
	enum px_status st = take_own(core, asset, k, sess, deadline,
				     px_own_full(core, asset, k) ? 0 : TAKE_GATE, NULL);
	if (st == PX_ESIZE) {
		v->outcome = VF_SIZE_MISMATCH; /* judged and stored by the gate */
		goto out;
	}
	(void)px_own_get(core, asset, k, cand);
	/* a sample that differs is proof, whatever else could not be read */
	vf_verdict_compare(ref, cand, v);
	v->size = rt->size;
	counts = v->outcome != VF_INCONCLUSIVE || !no_answer(st);
	if (!counts)
		snprintf(v->why, sizeof(v->why), "no answer: %s", px_strerror(st));
	if (v->outcome != VF_INCONCLUSIVE) {
		struct vf_seen seen = seen_of(core, asset, k);
		store_fp(core, asset, k, &seen, cand, v, 0);
	}
out:
	pthread_mutex_lock(&core->verify->vf_lock);
	if (counts) {
		apply_verdict(core, asset, k, v);
		if (v->outcome == VF_MISMATCH && rt->ref_from_store)
			rt->ref_recheck = 1;
	} else if (rt->src) {
		struct src_rt *sr = &rt->src[k];
		if (sr->state == VS_VERIFYING)
			sr->state = VS_UNKNOWN;
		sr->checked = core->now();
		px_src_why(sr, v->why);
	}
	pthread_mutex_unlock(&core->verify->vf_lock);
	free(ref);
	free(cand);
}

/* ---- background jobs */

enum job_kind {
	JOB_VERIFY,               /* a standby against the reference */
	JOB_REFERENCE,            /* the asset's reference, from its sources */
	JOB_OWN                   /* the rest of a served source's own samples */
};

struct job {
	struct px_core *core;
	size_t asset, source;
	enum job_kind kind;
};

/* The early fetch: the samples a playing source has not served yet, so
 * that its whole fingerprint, the reference its session's cutover is
 * judged against, is known within seconds. Retried with a backoff in time
 * (2 s, doubling to 2 min) while the source does not answer them all. */
static void own_job(struct px_core *core, size_t asset, size_t k)
{
	/* the size probe first: its answer keys the stored fingerprint */
	enum px_status st = take_own(core, asset, k, NULL, 0, TAKE_GATE, NULL);
	pthread_mutex_lock(&core->verify->vf_lock);
	struct src_rt *sr = &px_asset_rt(core, asset)->src[k];
	sr->own_busy = 0;
	if (st != PX_OK) {
		int t = ++sr->own_tries < 6 ? sr->own_tries : 6;
		sr->own_retry_at = core->now() + (2000LL << t);
	}
	int judge = st == PX_OK && px_asset_rt(core, asset)->ref && sr->state != VS_VERIFIED;
	pthread_mutex_unlock(&core->verify->vf_lock);
	if (st == PX_OK)
		px_debug("verify", "asset %s: %s's whole fingerprint is known",
			 px_cat(core)->assets[asset].id, src_name(core, asset, k));
	if (judge) {
		/* what it serves from now on is screened against the reference
		 * at every sample; its fingerprint is judged now */
		struct vf_verdict v;
		verify_source(core, asset, k, NULL, 0, &v);
	} else if (st == PX_OK) {
		(void)maybe_agree(core, asset, 0);
	}
}

static enum px_status job_run(void *arg)
{
	struct job *j = arg;
	struct vf_verdict v;
	switch (j->kind) {
	case JOB_REFERENCE:
		take_reference(j->core, j->asset, j->source);
		break;
	case JOB_OWN:
		own_job(j->core, j->asset, j->source);
		break;
	default:
		verify_source(j->core, j->asset, j->source, NULL, 0, &v);
	}
	return PX_OK;
}

static void job_done(void *arg, enum px_status st)
{
	struct job *j = arg;
	struct px_core *core = j->core;
	if (st == PX_ECANCELED) {
		/* never ran (shutdown): undo the marks */
		pthread_mutex_lock(&core->verify->vf_lock);
		struct src_rt *sr = px_asset_rt(core, j->asset)->src;
		if (j->kind == JOB_REFERENCE)
			px_asset_rt(core, j->asset)->ref_busy = 0;
		else if (j->kind == JOB_OWN && sr)
			sr[j->source].own_busy = 0;
		else if (sr && sr[j->source].state == VS_VERIFYING)
			sr[j->source].state = VS_UNKNOWN;
		pthread_mutex_unlock(&core->verify->vf_lock);
	}
	free(j);
}

/* Queues a job; vf_lock held. Returns 1 if queued. */
static int queue_job(struct px_core *core, size_t asset, size_t k, enum job_kind kind)
{
	struct job *j;
	if (!core->verify->vpool || !(j = malloc(sizeof(*j))))
		return 0;
	j->core = core;
	j->asset = asset;
	j->source = k;
	j->kind = kind;
	if (vf_pool_submit(core->verify->vpool, job_run, job_done, j) != PX_OK) {
		free(j);
		return 0;
	}
	return 1;
}

void px_standby_served(struct px_core *core, size_t asset, size_t source)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	int by = atomic_load(&rt->served_by);
	if (by != (int)source + 1 && by != -1) {
		int want = by == 0 ? (int)source + 1 : -1;
		if (!atomic_compare_exchange_strong(&rt->served_by, &by, want) &&
		    by != (int)source + 1)
			atomic_store(&rt->served_by, -1);
	}
	px_source_good(core, asset, source);
	/* the reference is not taken here: a library scan serves every file
	 * and must cost no sample requests. px_standby_prime() loaded the one
	 * kept from an earlier run at the first open; px_standby_tick() takes
	 * one once a session has played for standby_delay. */
}

/* A session of the tick: its asset, its source, what it is due. */
struct due {
	size_t asset, source;
	int delayed;              /* has played for standby_delay */
	int playing;              /* reads past the head: not a library scan */
};

/* The sessions with an open handle, and what each is due. prov_lock is
 * taken here. Returns how many were put in *out (malloc'ed, or NULL). */
static size_t sessions_due(struct px_core *core, int64_t now, struct due **out)
{
	const struct px_config *cfg = core->cfg;
	size_t n = 0, m = 0;
	pthread_mutex_lock(px_prov_lock(core));
	for (struct px_session *s = px_sessions_first(core); s; s = s->next)
		n += s->nhandles > 0;
	struct due *d = n ? malloc(n * sizeof(*d)) : NULL;
	for (struct px_session *s = px_sessions_first(core); s && d && m < n; s = s->next) {
		if (!s->nhandles)
			continue;
		int64_t size = px_asset_rt(core, s->asset)->size, off = atomic_load(&s->offset);
		d[m].asset = s->asset;
		d[m].source = atomic_load(&s->source);
		d[m].delayed = now - s->created >= cfg->standby_delay_ms;
		/* a scan reads the head and the tail; a playback goes on */
		d[m].playing = off > cfg->head_size && off < size - cfg->tail_size;
		m++;
	}
	pthread_mutex_unlock(px_prov_lock(core));
	*out = d;
	return m;
}

/* Queues the standbys' verification of an asset that has played for
 * standby_delay, at most max_standby at once. vf_lock held. */
static void tick_standbys(struct px_core *core, size_t asset, size_t active, int64_t now)
{
	const struct px_config *cfg = core->cfg;
	struct asset_rt *rt = px_asset_rt(core, asset);
	const struct px_asset *a = &px_cat(core)->assets[asset];
	int busy = 0, done = 0;
	for (size_t k = 0; k < a->nsources; k++) {
		busy += rt->src[k].state == VS_VERIFYING;
		done += rt->src[k].state == VS_VERIFIED && k != active;
	}
	for (size_t k = 0; k < a->nsources && done + busy < cfg->max_standby; k++) {
		struct src_rt *sr = &rt->src[k];
		/* an abandoned source is tried again after a backoff (1, 2, 4
		 * ... 30 min), or once its provider answers the liveness check
		 * after it was abandoned */
		if (sr->state == VS_ABANDONED && !rt->dead[k]) {
			const struct prov_rt *pv = px_prov_rt(core, a->sources[k].provider);
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
		/* an inconclusive source is tried again in time, per source */
		if (sr->inconclusive && now - sr->checked < 2000LL << sr->inconclusive)
			continue;
		if (!queue_job(core, asset, k, JOB_VERIFY))
			break;
		sr->state = VS_VERIFYING;
		busy++;
	}
}

void px_standby_prime(struct px_core *core, size_t asset)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct vf_record rec;
	char name[VF_STORE_MAX_NAME], ref_id[VF_FINGERPRINT_ID_LEN] = "";

	if (atomic_exchange(&rt->primed, 1) || !core->verify->vstore || a->nsources < 2 ||
	    !px_src_ensure(core, asset))
		return;
	if (vf_store_reference(core->verify->vstore, a->id, name, sizeof(name), &rec) && rec.has_fp &&
	    rec.fp.size == rt->size)
		set_reference(core, asset, &rec.fp, 1);
	pthread_mutex_lock(&core->verify->vf_lock);
	if (rt->ref)
		memcpy(ref_id, rt->ref_id, sizeof(ref_id));
	pthread_mutex_unlock(&core->verify->vf_lock);
	/* a rejection stored against that very reference (or of the size
	 * alone) holds now: that source gets no session. A stored match is
	 * not taken on trust: the source may serve other bytes since (its
	 * bytes are screened as they pass, its sweep checks what it was) */
	for (size_t k = 0; k < a->nsources; k++) {
		if (!vf_store_get(core->verify->vstore, a->id, src_key(core, asset, k), NULL, &rec) ||
		    !rec.has_verdict || !vf_outcome_final(rec.verdict.outcome))
			continue;
		int sized = rec.verdict.outcome == VF_SIZE_MISMATCH;
		if (!sized && (!ref_id[0] || strcmp(rec.ref, ref_id) != 0))
			continue;
		char why[300];
		snprintf(why, sizeof(why), "%s (a stored verdict)", rec.verdict.why);
		pthread_mutex_lock(&core->verify->vf_lock);
		struct src_rt *sr = &rt->src[k];
		sr->state = VS_REJECTED;
		sr->wrong_size = sized;
		px_src_why(sr, why);
		pthread_mutex_unlock(&core->verify->vf_lock);
	}
}

void px_standby_tick(struct px_core *core)
{
	int64_t now = core->now();
	struct due *d = NULL;
	size_t m = sessions_due(core, now, &d);

	pthread_mutex_lock(&core->verify->vf_lock);
	for (size_t i = 0; i < m; i++) {
		size_t asset = d[i].asset, active = d[i].source;
		struct asset_rt *rt = px_asset_rt(core, asset);
		const struct px_asset *a = &px_cat(core)->assets[asset];
		if (a->nsources < 2 || !px_src_ensure(core, asset))
			continue;
		struct src_rt *sr = &rt->src[active];
		/* a playback's source: the samples it has not served yet are
		 * fetched now, so its cutover has a whole reference from the
		 * first seconds; standby_delay does not wait for this */
		if (d[i].playing && !atomic_load(&sr->own_full) && !sr->own_busy &&
		    now >= sr->own_retry_at && queue_job(core, asset, active, JOB_OWN))
			sr->own_busy = 1;
		if (!d[i].delayed)
			continue;
		if ((!rt->ref || rt->ref_recheck) && !rt->ref_busy && now >= rt->ref_retry_at &&
		    queue_job(core, asset, active, JOB_REFERENCE))
			rt->ref_busy = 1;
		if (rt->ref)
			tick_standbys(core, asset, active, now);
	}
	pthread_mutex_unlock(&core->verify->vf_lock);
	free(d);
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
	const struct px_asset *a = &px_cat(core)->assets[s->asset];
	struct asset_rt *rt = px_asset_rt(core, s->asset);
	int64_t now = core->now();
	unsigned char bad[64];
	size_t n = 0;

	if (cap > 64)
		cap = 64;
	if (!px_src_ensure(core, s->asset))
		return 0;
	pthread_mutex_lock(px_prov_lock(core));
	pthread_mutex_lock(&core->verify->vf_lock);
	for (size_t k = 0; k < a->nsources && n < cap; k++) {
		const struct prov_rt *p = px_prov_rt(core, a->sources[k].provider);
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
			const struct prov_rt *px = px_prov_rt(core, a->sources[x].provider);
			const struct prov_rt *py = px_prov_rt(core, a->sources[y].provider);
			int vx = rt->src[x].state == VS_VERIFIED, vy = rt->src[y].state == VS_VERIFIED;
			int bx = bad[j - 1], by = bad[j];
			int swap = by < bx ||
				   (by == bx && (vy > vx ||
				   (vy == vx && (py->sessions < px->sessions ||
						 (py->sessions == px->sessions &&
						  strcmp(px_cat(core)->providers[a->sources[y].provider].name,
							 px_cat(core)->providers[a->sources[x].provider].name) < 0)))));
			if (!swap)
				break;
			out[j - 1] = y;
			out[j] = x;
			bad[j - 1] = (unsigned char)by;
			bad[j] = (unsigned char)bx;
		}
	}
	pthread_mutex_unlock(&core->verify->vf_lock);
	pthread_mutex_unlock(px_prov_lock(core));
	return n;
}

static void record(struct px_core *core, struct px_session *s, int64_t off, size_t from,
		   size_t to, enum px_status why, int64_t took_ms)
{
	pthread_mutex_lock(&core->verify->vf_lock);
	struct cutover_rec *c = &core->verify->recent[core->verify->nrecent++ % RECENT_CUTOVERS];
	c->session = s->id;
	c->asset = s->asset;
	c->offset = off;
	c->from = from;
	c->to = to;
	c->reason = why;
	c->ms = took_ms;
	c->when = core->now();
	core->verify->n_cutovers[why]++;
	pthread_mutex_unlock(&core->verify->vf_lock);
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
	if (atomic_load(&s->source) != failed) {
		rc = PX_OK;
	} else {
		atomic_fetch_add(&s->cutting, 1);
		px_xfer_cutover_thread(1);
		rc = cutover_locked(s, failed, off, why, seam, n, deadline);
		px_xfer_cutover_thread(0);
		atomic_fetch_sub(&s->cutting, 1);
	}
	pthread_mutex_unlock(&s->cut_lock);
	return rc;
}

/* Whether source k answers with the asset's size, before until: 1 yes, 0
 * no, -1 its provider had no slot free for the question. A source of
 * another size is rejected for good; one that does not answer goes last
 * for a while. */
static int size_gate(struct px_core *core, struct px_session *s, size_t k, int64_t until)
{
	struct asset_rt *rt = px_asset_rt(core, s->asset);
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
	if (st == PX_EBUSY) {
		ok = -1;
	} else if (st != PX_OK) {
		if (st == PX_ENOTFOUND)
			rt->dead[k] = 1;
		if (says_failed(st))
			px_source_failed(core, s->asset, k, st, why);
	} else if (seen.size != rt->size) {
		struct vf_verdict v = { .outcome = VF_SIZE_MISMATCH, .sample = -1, .offset = -1,
					.size = seen.size };
		snprintf(v.why, sizeof(v.why), "size %lld, the asset's is %lld",
			 (long long)seen.size, (long long)rt->size);
		pthread_mutex_lock(&core->verify->vf_lock);
		apply_verdict(core, s->asset, k, &v);
		pthread_mutex_unlock(&core->verify->vf_lock);
	} else {
		ok = 1;
	}
	return ok;
}

/* The session's reference: the failed source's own fingerprint (sweep_all
 * filled what it could), or, after a screen kept the failed source's wrong
 * bytes from the reader, the asset's reference. Returns how many samples
 * it has. */
static size_t session_reference(struct px_core *core, struct px_session *s, size_t failed,
				enum px_status why, struct vf_fingerprint *mine)
{
	struct asset_rt *rt = px_asset_rt(core, s->asset);
	if (why == PX_EMISMATCH) {
		/* the screen kept the failed source's wrong bytes from the
		 * reader: what it was given matched the asset's reference */
		pthread_mutex_lock(&core->verify->vf_lock);
		if (rt->ref)
			*mine = *rt->ref;
		else
			vf_fingerprint_init(mine, rt->size);
		pthread_mutex_unlock(&core->verify->vf_lock);
		return vf_fingerprint_complete(mine) ? mine->plan.n : 0;
	}
	return px_own_get(core, s->asset, failed, mine);
}

/* One sweep of a cutover's parallel batch (sweep_all). */
struct sweep {
	pthread_t thread;
	struct px_core *core;
	struct px_session *s;
	size_t k;
	int64_t until;
	int flags;                          /* take_own's */
	const struct vf_fingerprint *first; /* samples to ask for first */
	int started;
};

static void *sweep_main(void *arg)
{
	struct sweep *w = arg;
	px_xfer_cutover_thread(1); /* a cutover's checks: not held by it */
	(void)take_own(w->core, w->s->asset, w->k, w->s, w->until, w->flags, w->first);
	return NULL;
}

/* What a cutover's candidate is checked against (cutover_locked). */
struct check {
	struct px_session *s;
	size_t failed;
	enum px_status why;
	int64_t off;
	const void *seam;
	size_t n;
	const struct vf_fingerprint *mine; /* the session's reference */
	size_t have;                       /* its samples */
	const size_t *cand;
	size_t nc;
};

/*
 * The samples a cutover needs, fetched at once, in parallel, within until:
 * what the failed source's fingerprint lacks, those from off on first, when
 * the failure may leave it answering (a reset, a 5xx, a stall; not a
 * refused connection or an answer of the wrong kind; a stall gets half a
 * stall_timeout), and what
 * each candidate that is not verified lacks of the samples `served` has
 * (the failed source's at the failure: a candidate must match them; all it
 * lacks when served is NULL), with no size probe first (cutover_gate). A
 * standby that does not answer then costs the cutover no more than the
 * others: one stall_timeout for all. Threads: at most one per source; one
 * that cannot start sweeps in the caller's.
 */
static void sweep_all(const struct check *c, const struct vf_fingerprint *served,
		      const size_t *cand, size_t nc, int64_t until)
{
	struct px_session *s = c->s;
	struct px_core *core = s->core;
	size_t failed = c->failed;
	enum px_status why = c->why;
	int64_t off = c->off;
	struct sweep *w = calloc(nc + 1, sizeof(*w));
	struct vf_fingerprint *ahead = malloc(sizeof(*ahead));
	size_t n = 0;
	struct asset_rt *rt = px_asset_rt(core, s->asset);
	int answers = why == PX_ETRANSFER || why == PX_ESERVER || why == PX_ETIMEDOUT;
	int64_t per = core->cfg->stall_timeout_ms > 0 ? core->cfg->stall_timeout_ms : 3000;
	/* a candidate must match the samples the failed source had: only
	 * those are asked for now, unless it had none */
	int only = served ? TAKE_FIRST_ONLY : 0;
	if (!w || !ahead)
		goto out;
	/* a source that stalled gets half a stall to answer: samples past
	 * its stall would hold up the whole cutover */
	int64_t mine_until = why == PX_ETIMEDOUT && px_now_ms() + per / 2 < until
			     ? px_now_ms() + per / 2 : until;
	/* its samples the reader reaches next first (nearest first): a
	 * standby is served from off on, so those judge it before any other,
	 * and a stall further on must not leave them unasked */
	vf_fingerprint_init(ahead, rt->size);
	for (size_t i = 0; i < ahead->plan.n; i++)
		ahead->have[i] = ahead->plan.off[i] + (int64_t)ahead->plan.len[i] > off;
	if (answers && !px_own_full(core, s->asset, failed))
		w[n++] = (struct sweep){ .core = core, .s = s, .k = failed, .until = mine_until,
					 .first = ahead };
	for (size_t i = 0; i < nc; i++) {
		pthread_mutex_lock(&core->verify->vf_lock);
		int skip = rt->src[cand[i]].state == VS_VERIFIED ||
			   rt->src[cand[i]].state == VS_REJECTED;
		pthread_mutex_unlock(&core->verify->vf_lock);
		if (!skip && !px_own_full(core, s->asset, cand[i]))
			w[n++] = (struct sweep){ .core = core, .s = s, .k = cand[i],
						 .until = until, .first = served,
						 .flags = cutover_gate(core, s->asset, cand[i]) | only };
	}
	for (size_t i = 0; i < n; i++)
		w[i].started = pthread_create(&w[i].thread, NULL, sweep_main, &w[i]) == 0;
	for (size_t i = 0; i < n; i++) {
		if (w[i].started)
			pthread_join(w[i].thread, NULL);
		else
			(void)sweep_main(&w[i]);
	}
out:
	free(ahead);
	free(w);
}

/* The asset's reference, when it has one, judges what a sweep read of k
 * (for good: a majority or the store backs it). Returns the outcome,
 * VF_INCONCLUSIVE when there is no reference or a sample is missing. */
static enum vf_outcome judge_against_reference(struct px_core *core, size_t asset, size_t k,
					       const struct vf_fingerprint *cand)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct vf_verdict v;
	pthread_mutex_lock(&core->verify->vf_lock);
	int have = rt->ref != NULL;
	if (have)
		vf_verdict_compare(rt->ref, cand, &v);
	if (have && v.outcome != VF_INCONCLUSIVE) {
		apply_verdict(core, asset, k, &v);
		if (v.outcome == VF_MISMATCH && rt->ref_from_store)
			rt->ref_recheck = 1;
	}
	pthread_mutex_unlock(&core->verify->vf_lock);
	if (!have || v.outcome == VF_INCONCLUSIVE)
		return VF_INCONCLUSIVE;
	struct vf_seen seen = seen_of(core, asset, k);
	store_fp(core, asset, k, &seen, cand, &v, 0);
	return v.outcome;
}

/*
 * Whether candidate k holds the bytes the session's reader was given: its
 * own fingerprint (what it lacks is swept now, within until) against the
 * session's reference mine (the failed source's, `have` samples of it). A
 * whole reference that k matches: yes. A reference its source died before
 * it was whole: yes when k matches every sample it has and the asset's
 * reference, if any, does not contradict k. A difference is not a verdict
 * for good unless the asset's reference (a majority's) says so too.
 * Returns 1 yes, 0 no, -1 a sample k lacks could not be asked for: its
 * provider had no slot free.
 */
/* Whether a and b (one size) have a sample both hold with other bytes. */
static int conflict(const struct vf_fingerprint *a, const struct vf_fingerprint *b)
{
	for (size_t i = 0; i < a->plan.n; i++)
		if (a->have[i] && b->have[i] && memcmp(a->sha[i], b->sha[i], VF_HASH_LEN) != 0)
			return 1;
	return 0;
}

/*
 * The failed source died before its fingerprint was whole, and k matches
 * every sample of it the reader passed: whether the other candidates that
 * match those samples too outvote k in the rest (on the samples each pair
 * has, as the cutover's sweep left them: no request here). Any of them
 * holds every sampled byte the reader was given, so any keeps the session
 * one file; which one is the asset's, a majority says best. k is not taken
 * when a larger side conflicts with it (a side: the candidates that agree
 * with one of them, itself included): one of that side comes later. cand:
 * the candidates, nc of them.
 */
static int backed(const struct check *c, size_t k, const struct vf_fingerprint *fk)
{
	struct px_session *s = c->s;
	struct px_core *core = s->core;
	size_t failed = c->failed, nc = c->nc;
	const struct vf_fingerprint *mine = c->mine;
	const size_t *cand = c->cand;
	struct vf_fingerprint *fp = calloc(nc + 1, sizeof(*fp));
	size_t n = 0, agree = 0, against = 0, i;
	int ok = 0;
	if (!fp)
		goto out;
	/* k first, then the others that hold every sample the reader passed */
	fp[n++] = *fk;
	for (size_t m = 0; m < nc; m++) {
		size_t j = cand[m];
		if (j == k || j == failed || px_source_rejected(core, s->asset, j))
			continue;
		(void)px_own_get(core, s->asset, j, &fp[n]);
		if (px_own_agrees(mine, &fp[n], &i) == PX_OWN_SAME)
			n++;
	}
	/* k's side, and the largest side of those that conflict with k */
	for (size_t x = 0; x < n; x++) {
		size_t side = 0;
		for (size_t y = 0; y < n; y++)
			side += !conflict(&fp[x], &fp[y]);
		if (x == 0)
			agree = side;
		else if (conflict(&fp[0], &fp[x]) && side > against)
			against = side;
	}
	ok = agree >= against;
	if (against)
		px_warn("cutover", "%s: %s failed before its samples were all seen, and its "
			"standbys disagree on the rest: %zu with %s, %zu on another side%s", s->who,
			src_name(core, s->asset, failed), agree, src_name(core, s->asset, k),
			against, ok ? "" : ": the larger side is taken");
out:
	free(fp);
	return ok;
}

static int holds_same(const struct check *c, size_t k, int64_t until)
{
	struct px_session *s = c->s;
	struct px_core *core = s->core;
	size_t failed = c->failed, have = c->have;
	const struct vf_fingerprint *mine = c->mine;
	struct asset_rt *rt = px_asset_rt(core, s->asset);
	struct vf_fingerprint *cand = malloc(sizeof(*cand));
	int ok = 0;
	size_t i;
	enum px_status st = PX_OK;

	if (!cand)
		return 0;
	(void)px_own_get(core, s->asset, k, cand);
	if (px_own_agrees(mine, cand, &i) == PX_OWN_LACKS) {
		/* the samples of the session's reference k lacks: it must
		 * match every one (the rest may come later) */
		st = take_own(core, s->asset, k, s, until,
			      cutover_gate(core, s->asset, k) | TAKE_FIRST_ONLY, mine);
		if (st == PX_ESIZE)
			goto out;
		(void)px_own_get(core, s->asset, k, cand);
	}
	if (judge_against_reference(core, s->asset, k, cand) == VF_MISMATCH)
		goto out;
	switch (px_own_agrees(mine, cand, &i)) {
	case PX_OWN_SAME:
		ok = have == mine->plan.n;
		if (!ok) {
			/* its source died before its samples were all seen:
			 * every one it served agrees, the asset's reference
			 * must not contradict the candidate, nor a majority
			 * of the others that agree with what it served */
			pthread_mutex_lock(&core->verify->vf_lock);
			ok = rt->src[k].state != VS_REJECTED;
			pthread_mutex_unlock(&core->verify->vf_lock);
			ok = ok && backed(c, k, cand);
			if (ok)
				px_info("cutover", "%s: %s matches the %zu of %zu samples %s gave "
					"before it failed", s->who, src_name(core, s->asset, k),
					have, mine->plan.n, src_name(core, s->asset, failed));
		}
		break;
	case PX_OWN_DIFFERS: {
		char why[300];
		snprintf(why, sizeof(why), "differs from %s, which a session was served from, at "
			 "sample %zu (offset %lld)", src_name(core, s->asset, failed), i,
			 (long long)mine->plan.off[i]);
		pthread_mutex_lock(&core->verify->vf_lock);
		px_src_why(&rt->src[k], why);
		pthread_mutex_unlock(&core->verify->vf_lock);
		px_warn("cutover", "%s: %s %s: not a standby of this session", s->who,
			src_name(core, s->asset, k), why);
		break;
	}
	default:
		if (st == PX_EBUSY) {
			ok = -1;
			break;
		}
		px_info("cutover", "%s: %s: sample %zu could not be read", s->who,
			src_name(core, s->asset, k), i);
	}
out:
	free(cand);
	return ok;
}

/* Checks the seam: k's bytes just before off equal the n the reader got
 * (seam). 1 when they do, -1 when k's provider had no slot free for the
 * question; a mismatch rejects k, no answer counts it failed. */
static int seam_holds(struct px_core *core, struct px_session *s, size_t k, int64_t off,
		      const void *seam, size_t n, int64_t until)
{
	struct px_rangeread *rr = NULL;
	struct vf_verdict v;
	struct gate g;
	if (n == 0 || off < (int64_t)n)
		return 1;
	if (open_reader(core, s->asset, k, s, until, &g, &rr) != PX_OK)
		return 0;
	struct vf_reader r = px_rangeread_reader(rr);
	enum px_status st = vf_seam_check(&r, off, seam, n, &v);
	px_rangeread_free(rr);
	if (st == PX_OK && v.outcome == VF_MATCH)
		return 1;
	if (st == PX_EBUSY)
		return -1;
	if (st == PX_OK && v.outcome == VF_MISMATCH) {
		pthread_mutex_lock(&core->verify->vf_lock);
		apply_verdict(core, s->asset, k, &v);
		pthread_mutex_unlock(&core->verify->vf_lock);
	} else if (st == PX_OK || says_failed(st)) {
		/* it did not answer: not a verdict */
		px_source_failed(core, s->asset, k, st != PX_OK ? st : PX_ETIMEDOUT, v.why);
	}
	px_warn("cutover", "%s: %s: seam check at %lld: %s", s->who, src_name(core, s->asset, k),
		(long long)off, st == PX_OK ? v.why : px_strerror(st));
	return 0;
}

/* Whether verified candidate k stands for the failed source with no more
 * checks than the seam: k matches the asset's reference, and the failed
 * source was not found to differ from it (unless its wrong bytes were
 * kept from the reader: PX_EMISMATCH). */
static int takes_verified(struct px_core *core, size_t asset, size_t k, size_t failed,
			  enum px_status why)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	pthread_mutex_lock(&core->verify->vf_lock);
	int verified = rt->src[k].state == VS_VERIFIED &&
		       (rt->src[failed].state != VS_REJECTED || why == PX_EMISMATCH);
	pthread_mutex_unlock(&core->verify->vf_lock);
	return verified;
}

/* Whether candidate k may take the session over: 1 yes, 0 no, -1 its
 * provider had no slot free for a question. until bounds the sample
 * checks, per (and deadline) the seam check. */
static int passes(const struct check *c, size_t k, int verified, int64_t until, int64_t per,
		  int64_t deadline)
{
	struct px_session *s = c->s;
	struct px_core *core = s->core;
	int ok;

	if (verified) {
		/* k matches the asset's reference, and every sample the
		 * failed source served was screened against it: the seam is
		 * all */
		ok = 1;
	} else if (px_source_rejected(core, s->asset, k)) {
		ok = 0; /* the sweep found it of another size */
	} else if (c->have == 0) {
		/* no sample of the failed source is known (its reader started
		 * past the first and it no longer answers): the size gate and
		 * the seam are all there is */
		ok = size_gate(core, s, k, until);
	} else {
		ok = holds_same(c, k, until);
	}
	if (ok <= 0)
		return ok;
	until = px_now_ms() + per < deadline ? px_now_ms() + per : deadline;
	if ((ok = seam_holds(core, s, k, c->off, c->seam, c->n, until)) <= 0)
		return ok;
	/* a path must open, with the asset's size, before the move */
	if (px_source_is_path(core, s->asset, k) && px_session_fd(s, k) < 0)
		return 0;
	return 1;
}

/* Takes the failure that starts a cutover into the source's state: gone
 * (404), refused credentials (its provider's), or a failure. */
static void note_failure(struct px_session *s, size_t failed, enum px_status why)
{
	struct px_core *core = s->core;
	if (why == PX_ENOTFOUND)
		px_asset_rt(core, s->asset)->dead[failed] = 1;
	if (why == PX_EAUTH)
		px_provider_auth_failed(core, px_cat(core)->assets[s->asset].sources[failed].provider,
					"HTTP 401/403");
	if (why != PX_EAUTH && why != PX_ENOTFOUND)
		px_source_failed(core, s->asset, failed, why, "under a read");
}

/* The session moved to k: a verified k vouches for the failed source's
 * bytes too; the cutover is counted and logged (after: how it got k). */
static void moved(const struct check *c, size_t k, int verified, int64_t t0, const char *after)
{
	struct px_session *s = c->s;
	struct px_core *core = s->core;
	/* the source that failed served these bytes, screened against the
	 * reference k matches: a verified standby too */
	pthread_mutex_lock(&core->verify->vf_lock);
	if (verified && c->why != PX_EMISMATCH && c->why != PX_ENOTASSET)
		px_asset_rt(core, s->asset)->src[c->failed].state = VS_VERIFIED;
	pthread_mutex_unlock(&core->verify->vf_lock);
	int64_t took = px_now_ms() - t0;
	record(core, s, c->off, c->failed, k, c->why, took);
	px_info("cutover", "%s offset %lld: %s -> %s (%s), %lld ms%s", s->who,
		(long long)c->off, src_name(core, s->asset, c->failed), src_name(core, s->asset, k),
		reason_name(c->why), (long long)took, after);
}

/* Where a cutover's pass over its candidates ended. */
struct pass {
	size_t cand[64];   /* the candidates, best first (c->cand) */
	int64_t t0;        /* when the cutover began */
	size_t took;       /* the candidate the session moved to; SIZE_MAX none */
	size_t busy;       /* the first that passed on a provider at its limit */
	size_t unchecked;  /* the first whose provider had no slot for its checks */
};

/* Tries the candidates in order, each within stall_timeout (per) and
 * the deadline, sweeping their samples once when one needs them. */
static void try_all(struct check *c, struct vf_fingerprint *mine,
		    const struct vf_fingerprint *served, int64_t deadline, struct pass *out)
{
	struct px_session *s = c->s;
	struct px_core *core = s->core;
	int64_t per = core->cfg->stall_timeout_ms > 0 ? core->cfg->stall_timeout_ms : 3000;
	size_t *cand = out->cand;
	int know = 0;
	uint64_t tried = 0; /* bit k: candidate k was tried */

	c->cand = cand;
	c->nc = candidates(core, s, c->failed, cand, 64);
	for (size_t i = 0; i < c->nc && px_now_ms() < deadline; i++) {
		size_t k = cand[i];
		if (k < 64 && (tried >> k & 1))
			continue;
		int64_t until = px_now_ms() + per;
		if (until > deadline)
			until = deadline;
		int verified = takes_verified(core, s->asset, k, c->failed, c->why);
		if (!verified && !know) {
			/* the session's reference and the candidates'
			 * fingerprints, once, when a candidate needs them */
			/* in parallel, so all of them share one budget: two
			 * stall_timeouts (a standby far away, at its provider's
			 * connection limit, needs rounds of requests), never
			 * the read's last quarter of a stall */
			int64_t sweep_until = px_now_ms() + 2 * per;
			if (sweep_until > deadline - per / 4)
				sweep_until = deadline - per / 4;
			sweep_all(c, served, cand + i, c->nc - i, sweep_until);
			c->have = session_reference(core, s, c->failed, c->why, mine);
			know = 1;
			/* the ones that did not answer the sweep go last now */
			c->nc = candidates(core, s, c->failed, cand, 64);
			i = (size_t)-1;
			continue;
		}
		if (k < 64)
			tried |= 1ULL << k;
		int ok = passes(c, k, verified, until, per, deadline);
		if (ok < 0 && out->unchecked == SIZE_MAX)
			out->unchecked = k;
		if (ok <= 0)
			continue;
		if (px_session_switch(s, k) != PX_OK) {
			px_info("cutover", "%s: %s: its provider is at its limit", s->who,
				src_name(core, s->asset, k));
			if (out->busy == SIZE_MAX)
				out->busy = k;
			continue;
		}
		moved(c, k, verified, out->t0, "");
		out->took = k;
		return;
	}
}

/* px_cutover() with the session's cut_lock held. Each candidate gets at
 * most stall_timeout for its checks (and the read's deadline bounds all):
 * a standby that does not answer costs the reader no more than a stall. */
static enum px_status cutover_locked(struct px_session *s, size_t failed, int64_t off,
				     enum px_status why, const void *seam, size_t n,
				     int64_t deadline)
{
	struct px_core *core = s->core;
	struct vf_fingerprint *mine = malloc(sizeof(*mine));
	struct vf_fingerprint *served = malloc(sizeof(*served));
	struct check c = { s, failed, why, off, seam, n, mine, 0, NULL, 0 };
	struct pass p = { .t0 = px_now_ms(), .took = SIZE_MAX, .busy = SIZE_MAX,
			  .unchecked = SIZE_MAX };
	enum px_status rc = PX_ENOSOURCE;

	if (!mine || !served || !px_src_ensure(core, s->asset))
		goto out;
	/* what the failed source had when it failed: the reader's bytes */
	if (px_own_get(core, s->asset, failed, served) == 0) {
		free(served);
		served = NULL; /* none: the candidates are swept whole */
	}
	note_failure(s, failed, why);
	try_all(&c, mine, served, deadline, &p);
	if (p.took != SIZE_MAX) {
		rc = PX_OK;
		goto out;
	}
	/* every standby was on a provider at its limit, or failed: the first
	 * that could not be asked (a wait for a slot is no fault of the
	 * source) is asked again with the read's time left */
	if (p.busy == SIZE_MAX && p.unchecked != SIZE_MAX && px_now_ms() < deadline) {
		int verified = takes_verified(core, s->asset, p.unchecked, failed, why);
		if (passes(&c, p.unchecked, verified, deadline, deadline - px_now_ms(),
			   deadline) > 0) {
			px_info("cutover", "%s: %s passed once its provider had a slot free",
				s->who, src_name(core, s->asset, p.unchecked));
			p.busy = p.unchecked;
		}
	}
	/* every standby that holds the bytes is on a provider at its limit:
	 * the first that passed waits for a slot, within the read's time */
	if (p.busy != SIZE_MAX && px_session_switch_wait(s, p.busy, deadline) == PX_OK) {
		int64_t took = px_now_ms() - p.t0;
		record(core, s, off, failed, p.busy, why, took);
		px_info("cutover", "%s offset %lld: %s -> %s (%s), %lld ms, after a wait for a "
			"slot", s->who, (long long)off, src_name(core, s->asset, failed),
			src_name(core, s->asset, p.busy), reason_name(why), (long long)took);
		rc = PX_OK;
	}
out:
	free(mine);
	free(served);
	/* two whole fingerprints that agree may make the asset's reference */
	if (rc == PX_OK)
		(void)maybe_agree(core, s->asset, 0);
	return rc;
}

void px_standby_exhausted(struct px_session *s, int64_t off, enum px_status why)
{
	struct px_core *core = s->core;
	pthread_mutex_lock(&core->verify->vf_lock);
	core->verify->n_exhausted++;
	snprintf(core->verify->exhausted_why, sizeof(core->verify->exhausted_why),
		 "%s offset %lld: %s, and no standby could take over", s->who, (long long)off,
		 px_strerror(why));
	pthread_mutex_unlock(&core->verify->vf_lock);
	pthread_mutex_lock(px_prov_lock(core));
	s->exhausted = 1;
	pthread_mutex_unlock(px_prov_lock(core));
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
	const struct px_catalog *cat = px_cat(core);
	core->verify = calloc(1, sizeof(*core->verify));
	if (!core->verify)
		return PX_ENOMEM;
	pthread_mutex_init(&core->verify->vf_lock, NULL);
	pthread_cond_init(&core->verify->vf_cond, NULL);
	for (size_t i = 0; i < cat->nassets; i++) {
		px_asset_rt(core, i)->src = NULL; /* px_src_ensure() makes them */
	}
	return PX_OK;
}

enum px_status px_standby_start(struct px_core *core)
{
	char dir[4096], err[512];
	if (core->cfg->state_dir) {
		snprintf(dir, sizeof(dir), "%s/fingerprints", core->cfg->state_dir);
		if (vf_store_open(dir, store_log, NULL, &core->verify->vstore, err, sizeof(err)) != PX_OK)
			px_warn("verify", "fingerprints are not kept: %s", err);
		/* cluster mode: fingerprints and verdicts are the cluster's
		 * (docs/cluster.md) */
		else if (px_cluster_store(core))
			vf_store_share(core->verify->vstore, px_cluster_store(core));
	}
	/* unit tests with a fake fetcher ask for workers explicitly */
	if (!core->fetch.own && !core->verify->verify_workers)
		return PX_OK;
	if (vf_pool_new(core->verify->verify_workers ? (unsigned)core->verify->verify_workers : 2, 256,
			&core->verify->vpool) != PX_OK) {
		px_warn("verify", "no verifier threads: standbys are verified only at a cutover");
		core->verify->vpool = NULL;
	}
	return PX_OK;
}

void px_standby_set_workers(struct px_core *core, int n)
{
	core->verify->verify_workers = n;
}

void px_standby_stop(struct px_core *core)
{
	if (core->verify && core->verify->vpool)
		vf_pool_shutdown(core->verify->vpool);
}

void px_standby_release(struct px_core *core)
{
	if (!core->verify)
		return;
	vf_pool_free(core->verify->vpool);
	core->verify->vpool = NULL;
	vf_store_free(core->verify->vstore);
	core->verify->vstore = NULL;
	for (size_t i = 0; i < px_cat(core)->nassets; i++) {
		px_own_release(core, i);
		for (size_t k = 0; px_asset_rt(core, i)->src && k <= px_asset_rt(core, i)->source_cap; k++) {
			free(px_asset_rt(core, i)->src[k].why);
			free(px_asset_rt(core, i)->src[k].seen);
		}
		free(px_asset_rt(core, i)->src);
		free(px_asset_rt(core, i)->ref);
	}
	pthread_cond_destroy(&core->verify->vf_cond);
	pthread_mutex_destroy(&core->verify->vf_lock);
	free(core->verify);
	core->verify = NULL;
}

/* ---- the first bytes a source gives */

enum px_status px_standby_screen(struct px_core *core, size_t asset, size_t k, int64_t off,
				 const struct iovec *iov, int iovcnt)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	long hit;

	px_own_note(core, asset, k, off, iov, iovcnt, &hit);
	if (hit < 0)
		return PX_OK;
	const struct vf_plan *plan = px_own_plan(core, asset);
	struct vf_verdict v = { .outcome = VF_MISMATCH, .sample = hit,
				.offset = plan ? plan->off[hit] : -1, .size = rt->size };
	snprintf(v.why, sizeof(v.why), "the bytes it served at %lld differ from the "
		 "reference's sample %ld", (long long)v.offset, hit);
	pthread_mutex_lock(&core->verify->vf_lock);
	apply_verdict(core, asset, k, &v);
	if (rt->ref_from_store)
		rt->ref_recheck = 1;
	pthread_mutex_unlock(&core->verify->vf_lock);
	return PX_EMISMATCH;
}

enum px_status px_standby_check_live(struct px_core *core, size_t asset, size_t k, int64_t off,
				     const void *buf, size_t len)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	const struct vf_plan *plan = px_own_plan(core, asset);
	unsigned char d[VF_HASH_LEN];
	long hit = -1;
	for (size_t i = 0; plan && i < plan->n && hit < 0; i++) {
		if (plan->off[i] < off || plan->off[i] + plan->len[i] > off + (int64_t)len ||
		    vf_hash_once((const unsigned char *)buf + (plan->off[i] - off), plan->len[i],
				 d) != PX_OK)
			continue;
		pthread_mutex_lock(&core->verify->vf_lock);
		if (rt->ref && rt->ref->have[i] && memcmp(rt->ref->sha[i], d, VF_HASH_LEN))
			hit = (long)i;
		pthread_mutex_unlock(&core->verify->vf_lock);
	}
	if (hit < 0)
		return PX_OK;
	struct vf_verdict v = { .outcome = VF_MISMATCH, .sample = hit, .offset = plan->off[hit],
				.size = rt->size };
	snprintf(v.why, sizeof(v.why), "the bytes it served at %lld differ from the "
		 "reference's sample %ld", (long long)v.offset, hit);
	pthread_mutex_lock(&core->verify->vf_lock);
	apply_verdict(core, asset, k, &v);
	if (rt->ref_from_store)
		rt->ref_recheck = 1;
	pthread_mutex_unlock(&core->verify->vf_lock);
	return PX_EMISMATCH;
}

/* ---- verdicts and references from outside the background verifier */

void px_standby_apply_verdict(struct px_core *core, size_t asset, size_t k,
			      const struct vf_verdict *v)
{
	pthread_mutex_lock(&core->verify->vf_lock);
	apply_verdict(core, asset, k, v);
	pthread_mutex_unlock(&core->verify->vf_lock);
}

enum px_status px_standby_set_reference(struct px_core *core, size_t asset,
					const struct vf_fingerprint *fp)
{
	/* a reference of another size, or with a sample missing, would
	 * reject every source or prove none */
	if (fp->size != px_asset_rt(core, asset)->size || !vf_fingerprint_complete(fp))
		return PX_EINVAL;
	set_reference(core, asset, fp, 1);
	return PX_OK;
}

/* ---- the status's copy */

_Static_assert(sizeof(((struct px_verify *)0)->recent) / sizeof(struct cutover_rec) ==
	       PX_SNAP_RECENT, "the snapshot keeps every cutover the core remembers");

/* Whether status.json lists the asset: listed, with a standby. */
static int shown(const struct px_core *core, size_t i)
{
	return px_asset_rt(core, i)->listed && px_cat(core)->assets[i].nsources >= 2;
}

static void snap_asset(const struct px_core *core, size_t i, struct px_snap_asset *o, int *oom)
{
	const struct px_asset *a = &px_cat(core)->assets[i];
	const struct asset_rt *rt = px_asset_rt(core, i);
	const struct src_rt *src = __atomic_load_n(&rt->src, __ATOMIC_ACQUIRE);

	o->id = px_snap_copy(a->id, oom);
	o->path = px_snap_copy(a->path, oom);
	o->size = rt->size;
	if (rt->ref)
		memcpy(o->reference, rt->ref_id, sizeof(o->reference));
	o->reference[sizeof(o->reference) - 1] = '\0';
	o->sources = calloc(a->nsources, sizeof(*o->sources));
	if (!o->sources) {
		*oom = 1;
		return;
	}
	o->nsources = a->nsources;
	for (size_t k = 0; k < a->nsources; k++) {
		struct px_snap_source *so = &o->sources[k];
		so->source = px_snap_copy(a->sources[k].shown, oom);
		so->provider = px_snap_copy(px_cat(core)->providers[a->sources[k].provider].name, oom);
		so->verification = atomic_load(&rt->dead[k])
			? "dead" : px_standby_state_name(src ? src[k].state : VS_UNKNOWN);
		so->why = px_snap_copy(src ? px_src_why_of(&src[k]) : "", oom);
		so->inconclusive = src ? src[k].inconclusive : 0;
	}
}

enum px_status px_verify_stats(struct px_core *core, int rows, struct px_verify_stats *s)
{
	int oom = 0;

	pthread_mutex_lock(&core->verify->vf_lock);
	memcpy(s->n_cutovers, core->verify->n_cutovers, sizeof(s->n_cutovers));
	memcpy(s->n_verified, core->verify->n_verified, sizeof(s->n_verified));
	s->n_exhausted = core->verify->n_exhausted;
	memcpy(s->exhausted_why, core->verify->exhausted_why, sizeof(s->exhausted_why));
	s->exhausted_why[sizeof(s->exhausted_why) - 1] = '\0';
	if (!rows)
		goto out;

	uint64_t nr = core->verify->nrecent < PX_SNAP_RECENT ? core->verify->nrecent : PX_SNAP_RECENT;
	for (uint64_t i = 0; i < nr; i++) {
		const struct cutover_rec *c = &core->verify->recent[(core->verify->nrecent - 1 - i) % PX_SNAP_RECENT];
		const struct px_asset *a = &px_cat(core)->assets[c->asset];
		struct px_snap_cutover *o = &s->recent[s->nrecent++];
		o->session = c->session;
		o->asset = px_snap_copy(a->id, &oom);
		o->from = px_snap_copy(a->sources[c->from].shown, &oom);
		o->to = px_snap_copy(a->sources[c->to].shown, &oom);
		o->offset = c->offset;
		o->ms = c->ms;
		o->when = c->when;
		o->reason = c->reason;
	}

	size_t n = 0, na = px_cat(core)->nassets;
	for (size_t i = 0; i < na; i++)
		n += (size_t)shown(core, i);
	s->assets = calloc(n + 1, sizeof(*s->assets));
	if (!s->assets) {
		oom = 1;
		goto out;
	}
	for (size_t i = 0; i < na && s->nshown < n; i++)
		if (shown(core, i))
			snap_asset(core, i, &s->assets[s->nshown++], &oom);
out:
	pthread_mutex_unlock(&core->verify->vf_lock);
	return oom ? PX_ENOMEM : PX_OK;
}
