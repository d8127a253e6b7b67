/*
 * scen_gen.c - a scenario made from its seed alone (scen.h): the asset's
 * bytes, its 2-5 sources and their kinds and faults, their providers and
 * connection limits, the core's (scaled-down) settings and the readers.
 * Everything comes from one splitmix64 stream in a fixed order, so a seed
 * names one scenario on every machine.
 *
 * Faults are put where the readers go: a fault's byte is taken inside a
 * range one reader reads, a difference inside a sampled range (the
 * verifier's plan, sample.h) half of the time, anywhere else otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"
#include "scen.h"

#define KiB (1LL << 10)
#define MiB (1LL << 20)

uint64_t sc_rand(struct sc_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int64_t sc_range(struct sc_rng *r, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t)(sc_rand(r) % (uint64_t)(hi - lo + 1));
}

static void fill(struct sc_rng *r, unsigned char *p, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = sc_rand(r);
		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (unsigned char)sc_rand(r);
}

static const size_t chunks[] = { 4096, 32768, 131072, 131072, 262144 };

/* One reader of the asset. */
static void make_reader(struct scen *s, struct sc_rng *r, struct sc_reader *rd, int i)
{
	rd->pat = (enum sc_pattern)sc_range(r, 0, 99) < 35 ? SC_SEQ : SC_NPATTERNS;
	if (rd->pat == SC_NPATTERNS)
		rd->pat = (enum sc_pattern)sc_range(r, SC_PACED, SC_SCAN);
	rd->client = s->nreaders > 1 ? (uint64_t)sc_range(r, 1, 2) : 1;
	rd->start_ms = i == 0 || sc_range(r, 0, 1) ? 0 : sc_range(r, 10, 600);
	rd->chunk = chunks[sc_range(r, 0, 4)];
	rd->from = sc_range(r, 0, 2) ? 0 : sc_range(r, 0, s->size - 1) & ~4095LL;
	rd->to = rd->from + sc_range(r, 256 * KiB, rd->pat == SC_PACED ? 2 * MiB : 6 * MiB);
	if (rd->to > s->size)
		rd->to = s->size;
	rd->pace_ms = sc_range(r, 5, 40);
	rd->nseeks = (int)sc_range(r, 3, 12);
	rd->head = sc_range(r, 64 * KiB, MiB);
	rd->tail = sc_range(r, 64 * KiB, MiB);
	rd->seed = sc_rand(r);
}

/* A byte a reader will reach: inside one reader's range. */
static int64_t reached(struct scen *s, struct sc_rng *r)
{
	const struct sc_reader *rd = &s->rd[sc_range(r, 0, s->nreaders - 1)];
	if (rd->pat == SC_SCAN)
		return sc_range(r, 0, rd->head - 1);
	if (rd->pat == SC_SEEKS)
		return sc_range(r, 0, s->size - 1);
	return sc_range(r, rd->from, rd->to - 1);
}

/* Source k's own bytes: a copy of the asset that differs at `at`, or one
 * of another size. */
static int own_bytes(struct scen *s, struct sc_rng *r, int k, int64_t size, int64_t at)
{
	unsigned char *p = malloc((size_t)size);
	if (!p)
		return -1;
	memcpy(p, s->base, (size_t)(size < s->size ? size : s->size));
	if (size > s->size)
		fill(r, p + s->size, size - s->size);
	if (at >= 0)
		p[at] ^= (unsigned char)sc_range(r, 1, 255);
	s->own[k] = p;
	s->src[k].data = p;
	s->src[k].size = size;
	return 0;
}

/* Where a differing byte goes: in a sampled range or anywhere. */
static int64_t diff_at(struct scen *s, struct sc_rng *r)
{
	struct vf_plan plan;
	if (sc_range(r, 0, 1)) {
		vf_sample_plan(s->size, &plan);
		size_t i = (size_t)sc_range(r, 0, (int64_t)plan.n - 1);
		return plan.off[i] + sc_range(r, 0, plan.len[i] - 1);
	}
	return sc_range(r, 0, 1) ? reached(s, r) : sc_range(r, 0, s->size - 1);
}

static enum sf_kind pick_kind(struct sc_rng *r)
{
	/* identical sources are the common case; every fault is in reach */
	static const unsigned char w[SF_NKINDS] = { 6, 2, 1, 1, 1, 1, 3, 2, 1, 1, 2, 2 };
	int total = 0, x;
	for (int i = 0; i < SF_NKINDS; i++)
		total += w[i];
	x = (int)sc_range(r, 0, total - 1);
	for (int i = 0; i < SF_NKINDS; i++) {
		if (x < w[i])
			return (enum sf_kind)i;
		x -= w[i];
	}
	return SF_IDENT;
}

/* Source k: its kind and the fault's byte or time. */
static int make_source(struct scen *s, struct sc_rng *r, int k)
{
	struct sf_source *src = &s->src[k];
	static const int codes[] = { 401, 403, 404, 500, 502, 503 };
	src->kind = s->mode == SC_RANDOM ? pick_kind(r) : SF_IDENT;
	if (s->mode == SC_FORCE_SWITCH && k == 1)
		src->kind = SF_DIFF;
	src->data = s->base;
	src->size = s->size;
	src->at = SF_NEVER;
	src->fault_ms = SF_NEVER;
	src->http = codes[sc_range(r, 0, 5)];
	src->slow_ms = s->stall_ms * sc_range(r, 10, 40) / 100;
	src->drip_ms = s->stall_ms / 4;
	src->back_ms = sc_range(r, 200, 1500);
	switch (src->kind) {
	case SF_DIFF:
		src->at = diff_at(s, r);
		if (s->mode == SC_FORCE_SWITCH)
			src->at = s->size - 1 - sc_range(r, 0, 4095);
		return own_bytes(s, r, k, s->size, src->at);
	case SF_SIZE:
		return own_bytes(s, r, k, s->size + (sc_range(r, 0, 1) ? 1 : -1) *
				 sc_range(r, 1, s->size / 2), -1);
	case SF_RESET: case SF_STALL: case SF_DRIP: case SF_COMEBACK:
		if (sc_range(r, 0, 9) < 3)
			src->fault_ms = sc_range(r, 0, 1500);
		else
			src->at = reached(s, r);
		return 0;
	case SF_HTTP:
		src->fault_ms = sc_range(r, 0, 1) ? 0 : sc_range(r, 0, 1500);
		return 0;
	default:
		return 0;
	}
}

/* Providers: mostly one per source, sometimes shared; random limits. */
static void make_providers(struct scen *s, struct sc_rng *r)
{
	s->nprov = 0;
	for (int k = 0; k < s->nsrc; k++) {
		if (k > 0 && s->mode == SC_RANDOM && sc_range(r, 0, 4) == 0)
			s->src[k].prov = (int)sc_range(r, 0, s->nprov - 1);
		else
			s->src[k].prov = s->nprov++;
	}
	for (int p = 0; p < s->nprov; p++)
		s->limit[p] = sc_range(r, 0, 9) < 4 ? 0 : (int)sc_range(r, 1, 4);
}

static void make_settings(struct scen *s, struct sc_rng *r)
{
	static const int64_t delays[] = { 0, 300, 120000 };
	/* the daemon's defaults scaled down tenfold: stall_timeout 3 s and
	 * read_timeout 30 s, so a cutover has the budget it has there */
	s->stall_ms = sc_range(r, 300, 600);
	s->read_timeout_ms = 10 * s->stall_ms;
	s->standby_delay_ms = delays[sc_range(r, 0, 2)];
	s->liveness_ms = sc_range(r, 0, 1) ? 0 : 500;
	s->retries = (int)sc_range(r, 0, 2);
	s->head_size = sc_range(r, 0, 1) ? 0 : 2 * MiB;
	s->tail_size = sc_range(r, 0, 1) ? 0 : MiB;
	s->use_state = sc_range(r, 0, 9) < 3;
	s->size_in_catalog = s->mode != SC_RANDOM || sc_range(r, 0, 3) > 0;
	if (s->mode == SC_FORCE_SWITCH) {
		s->standby_delay_ms = 120000;
		s->head_size = 0;
		s->tail_size = 0;
	}
}

int scen_make(struct scen *s, uint64_t seed, enum sc_mode mode)
{
	struct sc_rng r = { seed };
	memset(s, 0, sizeof(*s));
	s->seed = seed;
	snprintf(s->tag, sizeof(s->tag), "%llu", (unsigned long long)seed);
	s->mode = mode;
	s->size = sc_range(&r, 1, 16) * MiB - sc_range(&r, 0, 3) * 1000 - sc_range(&r, 0, 4095);
	if (s->size < MiB)
		s->size = MiB + 333;
	if (!(s->base = malloc((size_t)s->size)))
		return -1;
	fill(&r, s->base, s->size);
	make_settings(s, &r);
	s->nsrc = (int)sc_range(&r, 2, 5);
	s->nreaders = mode == SC_FORCE_SWITCH ? 1 :
		      sc_range(&r, 0, 1) ? 1 : (int)sc_range(&r, 2, SC_MAX_READERS);
	for (int i = 0; i < s->nreaders; i++)
		make_reader(s, &r, &s->rd[i], i);
	if (mode == SC_FORCE_SWITCH) {
		s->rd[0].pat = SC_SEQ;
		s->rd[0].from = 0;
		s->rd[0].to = s->size;
	}
	for (int k = 0; k < s->nsrc; k++)
		if (make_source(s, &r, k) != 0)
			return -1;
	make_providers(s, &r);
	return 0;
}

void scen_describe(const struct scen *s, char *out, size_t len)
{
	static const char *const pats[] = { "seq", "paced", "seeks", "scan" };
	size_t n = 0;
	n += (size_t)snprintf(out + n, len - n, "size %lld; standby_delay %lld ms, stall %lld ms, "
			      "retries %d, head %lld, tail %lld%s%s; sources:",
			      (long long)s->size, (long long)s->standby_delay_ms,
			      (long long)s->stall_ms, s->retries, (long long)s->head_size,
			      (long long)s->tail_size, s->use_state ? ", state_dir" : "",
			      s->size_in_catalog ? "" : ", size probed");
	for (int k = 0; k < s->nsrc && n < len; k++) {
		const struct sf_source *src = &s->src[k];
		n += (size_t)snprintf(out + n, len - n, " s%d@p%d(max %d) %s", k, src->prov,
				      s->limit[src->prov], sf_kind_name(src->kind));
		if (n < len && src->at != SF_NEVER)
			n += (size_t)snprintf(out + n, len - n, " at byte %lld", (long long)src->at);
		if (n < len && src->fault_ms != SF_NEVER)
			n += (size_t)snprintf(out + n, len - n, " at %lld ms", (long long)src->fault_ms);
		if (n < len && src->kind == SF_HTTP)
			n += (size_t)snprintf(out + n, len - n, " %d", src->http);
		if (n < len && src->kind == SF_SIZE)
			n += (size_t)snprintf(out + n, len - n, " %lld", (long long)src->size);
		if (n < len)
			n += (size_t)snprintf(out + n, len - n, ",");
	}
	for (int i = 0; i < s->nreaders && n < len; i++) {
		const struct sc_reader *rd = &s->rd[i];
		n += (size_t)snprintf(out + n, len - n, " reader%d %s client %llu at %lld ms "
				      "[%lld,%lld) by %zu;", i, pats[rd->pat],
				      (unsigned long long)rd->client, (long long)rd->start_ms,
				      (long long)rd->from, (long long)rd->to, rd->chunk);
	}
}

void scen_free(struct scen *s)
{
	free(s->base);
	for (int k = 0; k < SF_MAX_SOURCES; k++)
		free(s->own[k]);
	s->base = NULL;
	memset(s->own, 0, sizeof(s->own));
}
