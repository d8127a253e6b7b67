/*
 * health.c - each source's standing for an asset, shared by every session
 * of it: the verification state the standby verifier sets (standby.c), the
 * source's own recent failures, and its reason in words for the status.
 *
 * A source that stalls, resets or answers with something that is not the
 * asset goes last in every choice for a backoff (5 s, doubling with each
 * failure in a row, at most 2 min), and new sessions avoid it while another
 * source can serve; the first bytes it serves forget its failures. One that
 * answered with something not the asset when its size was discovered
 * stays last until it serves bytes, with that answer as its reason. The
 * failure fields are atomics, read without a lock on the read path; the
 * per-asset array is made on first need and published atomically, so a
 * library whose assets never play costs nothing.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "health.h"
#include "log.h"
#include "standby_i.h"

/* The source as logs show it: without credentials. */
static const char *src_name(const struct px_core *core, size_t asset, size_t k)
{
	return px_cat(core)->assets[asset].sources[k].shown;
}

#define BAD_BASE_MS 5000
#define BAD_MAX_MS 120000

void px_source_failed(struct px_core *core, size_t asset, size_t k, enum px_status why,
		      const char *detail)
{
	struct src_rt *all = px_src_ensure(core, asset);
	if (!all)
		return;
	struct src_rt *sr = &all[k];
	int n = atomic_fetch_add(&sr->nbad, 1);
	int64_t wait = BAD_BASE_MS << (n < 5 ? n : 5);
	if (wait > BAD_MAX_MS)
		wait = BAD_MAX_MS;
	atomic_store(&sr->bad_until, core->now() + wait);
	px_debug("source", "asset %s: %s failed (%s%s%s): last in every choice for %lld ms",
		 px_cat(core)->assets[asset].id, src_name(core, asset, k), px_strerror(why),
		 detail && detail[0] ? ": " : "", detail ? detail : "", (long long)wait);
}

void px_source_misanswered(struct px_core *core, size_t asset, size_t k, enum px_status why,
			   const char *detail)
{
	struct src_rt *all = px_src_ensure(core, asset);
	char text[300];
	if (!all)
		return;
	px_source_failed(core, asset, k, why, detail);
	snprintf(text, sizeof(text), "at size discovery: %s", detail && detail[0] ? detail
									 : px_strerror(why));
	px_vf_lock(core);
	px_src_why(&all[k], text);
	px_vf_unlock(core);
	atomic_store(&all[k].misanswered, 1);
}

void px_source_good(struct px_core *core, size_t asset, size_t k)
{
	struct src_rt *all = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	if (!all)
		return;
	struct src_rt *sr = &all[k];
	if (atomic_load(&sr->misanswered) && atomic_exchange(&sr->misanswered, 0)) {
		/* it serves the asset after all: its discovery answer is past */
		px_vf_lock(core);
		if (strncmp(px_src_why_of(sr), "at size discovery: ", 19) == 0)
			px_src_why(sr, NULL);
		px_vf_unlock(core);
	}
	if (atomic_load(&sr->nbad) || atomic_load(&sr->bad_until)) {
		atomic_store(&sr->nbad, 0);
		atomic_store(&sr->bad_until, 0);
	}
}

int px_source_bad(const struct px_core *core, size_t asset, size_t k, int64_t now)
{
	const struct src_rt *sr = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	return sr && (now < atomic_load(&sr[k].bad_until) || atomic_load(&sr[k].misanswered));
}

int px_source_rejected(const struct px_core *core, size_t asset, size_t k)
{
	const struct src_rt *sr = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	return sr && __atomic_load_n(&sr[k].state, __ATOMIC_RELAXED) == VS_REJECTED;
}

int px_source_identical(const struct px_core *core, size_t asset, size_t a, size_t b)
{
	if (a == b)
		return 1;
	const struct src_rt *sr = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	/* verified: every sample equals the asset's reference (a sweep, the
	 * sources' agreement, a copy checked whole), so both are its bytes */
	return sr && __atomic_load_n(&sr[a].state, __ATOMIC_RELAXED) == VS_VERIFIED &&
	       __atomic_load_n(&sr[b].state, __ATOMIC_RELAXED) == VS_VERIFIED;
}

struct src_rt *px_src_ensure(struct px_core *core, size_t asset)
{
	struct asset_rt *rt = px_asset_rt(core, asset);
	struct src_rt *s = __atomic_load_n(&rt->src, __ATOMIC_ACQUIRE), *none = NULL;
	if (s)
		return s;
	s = calloc(rt->source_cap + 1, sizeof(*s));
	if (s && !__atomic_compare_exchange_n(&rt->src, &none, s, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE)) {
		free(s); /* another thread made them first */
		s = none;
	}
	return s;
}

void px_src_why(struct src_rt *sr, const char *why)
{
	if (why && sr->why && strcmp(why, sr->why) == 0)
		return;
	free(sr->why);
	/* out of memory: the reason is lost, nothing else */
	sr->why = why && why[0] ? strdup(why) : NULL;
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

void px_vf_lock(struct px_core *core)
{
	pthread_mutex_lock(&core->verify->vf_lock);
}

void px_vf_unlock(struct px_core *core)
{
	pthread_mutex_unlock(&core->verify->vf_lock);
}
