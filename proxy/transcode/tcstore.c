/*
 * tcstore.c - a transcode's lease and playlist in the store (tcstore.h).
 * Every check-and-change is one Lua script: Redis runs a script alone, so
 * a claim, a renewal and a playlist change are each atomic against all
 * the others, from every host.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tcstore.h"

/* KEYS[1] lease; ARGV expect, session, owner, hb, released, writer_pid,
 * key, floor. {1, gen} stored; {0, gen} someone else's generation is
 * there. The new generation is above the stored one, above the floor (the
 * highest the claimant ever saw) and at least the store's clock in ms: a
 * master that a failover rolled back to an older generation never hands
 * out again one that its predecessor gave (docs/cluster.md). */
static const char CLAIM[] =
	"local g = tonumber(redis.call('HGET', KEYS[1], 'gen') or '0')\n"
	"if g ~= tonumber(ARGV[1]) then return {0, g} end\n"
	"local t = redis.call('TIME')\n"
	"local ng = math.max(g + 1, tonumber(ARGV[8]) + 1,\n"
	"  tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))\n"
	"redis.call('HSET', KEYS[1], 'gen', string.format('%d', ng), 'session', ARGV[2],\n"
	"  'owner', ARGV[3], 'hb', ARGV[4], 'released', ARGV[5], 'writer_pid', ARGV[6],\n"
	"  'key', ARGV[7])\n"
	"return {1, ng}\n";

/* KEYS[1] lease; ARGV gen, session, owner, hb, released, writer_pid, key,
 * put_back. 1 renewed, 2 put back (the store had lost it), 0 another
 * generation, or none stored and put_back is "0" (behind Sentinel: a
 * failover lost the claim, and its holder stops). */
static const char RENEW[] =
	"local g = redis.call('HGET', KEYS[1], 'gen')\n"
	"if not g and ARGV[8] ~= '1' then return 0 end\n"
	"if not g then\n"
	"  redis.call('HSET', KEYS[1], 'gen', ARGV[1], 'session', ARGV[2], 'owner', ARGV[3],\n"
	"    'hb', ARGV[4], 'released', ARGV[5], 'writer_pid', ARGV[6], 'key', ARGV[7])\n"
	"  return 2\n"
	"end\n"
	"if g ~= ARGV[1] then return 0 end\n"
	"redis.call('HSET', KEYS[1], 'hb', ARGV[4], 'released', ARGV[5], 'writer_pid', ARGV[6])\n"
	"return 1\n";

/* KEYS[1] lease, KEYS[2] playlist; ARGV gen, ver, text. {1, newver};
 * {-1, gen} fenced; {0, ver} the version moved; {-2, 0} no lease stored
 * (the store lost it: its holder's renewal puts it back). The new version
 * is at least the store's clock in ms, as a claim's generation: after a
 * failover rolled the list back, the next change gets a version no host
 * saw before, so every host that follows reads it again. */
static const char PL_PUT[] =
	"local g = redis.call('HGET', KEYS[1], 'gen')\n"
	"if not g then return {-2, 0} end\n"
	"if g ~= ARGV[1] then return {-1, tonumber(g)} end\n"
	"local v = tonumber(redis.call('HGET', KEYS[2], 'ver') or '0')\n"
	"if v ~= tonumber(ARGV[2]) then return {0, v} end\n"
	"local t = redis.call('TIME')\n"
	"local nv = math.max(v + 1, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))\n"
	"redis.call('HSET', KEYS[2], 'text', ARGV[3], 'ver', string.format('%d', nv), 'gen',\n"
	"  ARGV[1])\n"
	"return {1, nv}\n";

static const char POLL[] =
	"local v = redis.call('HGET', KEYS[2], 'ver') or '0'\n"
	"local l = redis.call('HMGET', KEYS[1], 'gen', 'session', 'owner', 'hb', 'released',\n"
	"  'writer_pid')\n"
	"return {v, l[1] or '0', l[2] or '', l[3] or '', l[4] or '0', l[5] or '0', l[6] or '0'}\n";

static int keys_of(struct px_store *st, const char *id, char *lease, char *pl, size_t cap)
{
	return px_store_key(st, lease, cap, "tc:{%s}:lease", id) < 0 ||
	       px_store_key(st, pl, cap, "tc:{%s}:pl", id) < 0 ? -1 : 0;
}

/* ---- the lease ops */

static int64_t store_clock(void *clk)
{
	return px_store_now_ms(clk);
}

static void lease_args(const struct px_lease *l, char b[4][32], const char *args[8],
		       uint64_t gen)
{
	snprintf(b[0], 32, "%" PRIu64, gen);
	snprintf(b[1], 32, "%lld", (long long)l->heartbeat_ms);
	snprintf(b[2], 32, "%d", l->released);
	snprintf(b[3], 32, "%lld", (long long)l->writer_pid);
	args[0] = b[0];
	args[1] = l->session;
	args[2] = l->owner;
	args[3] = b[1];
	args[4] = b[2];
	args[5] = b[3];
	args[6] = l->key;
}

static enum px_status r_claim(void *impl, uint64_t expect_gen, struct px_lease *l)
{
	struct px_store *st = impl;
	char lk[512], pk[512], b[4][32];
	const char *args[8];
	struct px_reply *r = NULL;
	if (keys_of(st, l->key, lk, pk, sizeof(lk)))
		return PX_EINVAL;
	lease_args(l, b, args, expect_gen);
	char floor[32];
	snprintf(floor, sizeof(floor), "%" PRIu64, px_store_gen_floor(st));
	args[7] = floor;
	const char *keys[] = { lk };
	enum px_status s = px_store_eval_acked(st, CLAIM, 1, keys, 8, args, &r);
	if (s == PX_OK) {
		l->gen = (uint64_t)px_reply_int(r, 1);
		px_store_note_gen(st, l->gen);
		if (px_reply_int(r, 0) != 1)
			s = PX_EFENCED;
	}
	px_reply_free(r);
	return s;
}

static enum px_status r_renew(void *impl, const struct px_lease *l)
{
	struct px_store *st = impl;
	char lk[512], pk[512], b[4][32];
	const char *args[8];
	struct px_reply *r = NULL;
	if (keys_of(st, l->key, lk, pk, sizeof(lk)))
		return PX_EINVAL;
	lease_args(l, b, args, l->gen);
	args[7] = px_store_sentinel(st) ? "0" : "1";
	px_store_note_gen(st, l->gen);
	const char *keys[] = { lk };
	enum px_status s = px_store_eval_acked(st, RENEW, 1, keys, 8, args, &r);
	if (s == PX_OK && r->type == PX_REPLY_INT) {
		if (r->integer == 0)
			s = PX_EFENCED;
		else if (r->integer == 2)
			px_info("lease", "lease %s generation %" PRIu64 ": the store had lost it; put "
				"back", l->key, l->gen);
	} else if (s == PX_OK) {
		s = PX_EBADRESP;
	}
	px_reply_free(r);
	return s;
}

/* Fills l from the POLL script's reply, from element i on. */
static void lease_from(const struct px_reply *r, size_t i, const char *key, struct px_lease *l)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->key, sizeof(l->key), "%s", key);
	l->gen = (uint64_t)px_reply_int(r, i);
	snprintf(l->session, sizeof(l->session), "%s", px_reply_str(r, i + 1));
	snprintf(l->owner, sizeof(l->owner), "%s", px_reply_str(r, i + 2));
	l->heartbeat_ms = px_reply_int(r, i + 3);
	l->released = (int)px_reply_int(r, i + 4);
	l->writer_pid = px_reply_int(r, i + 5);
}

enum px_status px_tcstore_poll(struct px_store *st, const char *id, uint64_t *ver,
			       struct px_lease *l)
{
	char lk[512], pk[512];
	struct px_reply *r = NULL;
	if (keys_of(st, id, lk, pk, sizeof(lk)))
		return PX_EINVAL;
	const char *keys[] = { lk, pk };
	enum px_status s = px_store_eval(st, POLL, 2, keys, 0, NULL, &r);
	if (s == PX_OK && (r->type != PX_REPLY_ARRAY || r->n != 7))
		s = PX_EBADRESP;
	if (s == PX_OK) {
		*ver = (uint64_t)px_reply_int(r, 0);
		lease_from(r, 1, id, l);
		px_store_note_gen(st, l->gen);
	}
	px_reply_free(r);
	return s;
}

static enum px_status r_get(void *impl, const char *key, struct px_lease *out)
{
	uint64_t ver;
	enum px_status s = px_tcstore_poll(impl, key, &ver, out);
	if (s == PX_OK && out->gen == 0)
		return PX_ENOTFOUND;
	return s;
}

static enum px_status r_drop(void *impl, const char *key)
{
	struct px_store *st = impl;
	char lk[512], pk[512];
	if (keys_of(st, key, lk, pk, sizeof(lk)))
		return PX_EINVAL;
	const char *argv[] = { "DEL", lk, pk };
	return px_store_call(st, 3, argv, NULL, NULL);
}

static void r_free(void *impl)
{
	(void)impl; /* the store is borrowed */
}

static const struct px_lease_ops redis_ops = {
	.claim = r_claim, .renew = r_renew, .get = r_get, .drop = r_drop, .free = r_free,
};

enum px_status px_lease_redis_new(struct px_store *st, struct px_lease_store **out)
{
	return px_lease_store_new(&redis_ops, st, store_clock, st, out);
}

/* ---- the playlist */

enum px_status px_tcstore_pl_get(struct px_store *st, const char *id, char **text,
				 size_t *len, uint64_t *ver)
{
	char lk[512], pk[512];
	struct px_reply *r = NULL;
	*text = NULL;
	*len = 0;
	*ver = 0;
	if (keys_of(st, id, lk, pk, sizeof(lk)))
		return PX_EINVAL;
	const char *argv[] = { "HMGET", pk, "text", "ver" };
	enum px_status s = px_store_call(st, 4, argv, NULL, &r);
	if (s != PX_OK) {
		px_reply_free(r);
		return s;
	}
	if (r->type != PX_REPLY_ARRAY || r->n != 2) {
		px_reply_free(r);
		return PX_EBADRESP;
	}
	if (r->el[0].type != PX_REPLY_STR) {
		px_reply_free(r);
		return PX_ENOTFOUND;
	}
	*ver = (uint64_t)px_reply_int(r, 1);
	*len = r->el[0].len;
	*text = r->el[0].str;
	r->el[0].str = NULL;
	px_reply_free(r);
	return PX_OK;
}

enum px_status px_tcstore_pl_put(struct px_store *st, const char *id, uint64_t gen,
				 uint64_t ver, const char *text, size_t len, uint64_t *newver)
{
	char lk[512], pk[512], g[32], v[32];
	struct px_reply *r = NULL;
	(void)len;
	if (keys_of(st, id, lk, pk, sizeof(lk)))
		return PX_EINVAL;
	snprintf(g, sizeof(g), "%" PRIu64, gen);
	snprintf(v, sizeof(v), "%" PRIu64, ver);
	const char *keys[] = { lk, pk };
	const char *args[] = { g, v, text };
	enum px_status s = px_store_eval_acked(st, PL_PUT, 2, keys, 3, args, &r);
	if (s == PX_OK) {
		long long what = px_reply_int(r, 0);
		if (what == 1)
			*newver = (uint64_t)px_reply_int(r, 1);
		else
			s = what == -2 ? PX_ENOTFOUND : what < 0 ? PX_EFENCED : PX_EEXIST;
	}
	px_reply_free(r);
	return s;
}

/* ---- far reads of other hosts */

/* KEYS[1] lease, KEYS[2] want; ARGV field (SEG@REQUESTER), last,
 * settled, ttl (ms). 1 left; 0 no live lease (none, or released). */
static const char WANT_PUT[] =
	"local l = redis.call('HMGET', KEYS[1], 'gen', 'released')\n"
	"if not l[1] or l[2] == '1' then return 0 end\n"
	"local t = redis.call('TIME')\n"
	"local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. ARGV[3] .. ' ' ..\n"
	"  string.format('%d', ms))\n"
	"redis.call('PEXPIRE', KEYS[2], ARGV[4])\n"
	"return 1\n";

/* KEYS[1] lease, KEYS[2] want; ARGV gen. The wants (HGETALL's pairs),
 * removed; none when the lease's generation is not gen. */
static const char WANT_TAKE[] =
	"if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return {} end\n"
	"local r = redis.call('HGETALL', KEYS[2])\n"
	"if #r > 0 then redis.call('DEL', KEYS[2]) end\n"
	"return r\n";

static int want_key(struct px_store *st, const char *id, char *lk, char *wk, size_t cap)
{
	return px_store_key(st, lk, cap, "tc:{%s}:lease", id) < 0 ||
	       px_store_key(st, wk, cap, "tc:{%s}:want", id) < 0 ? -1 : 0;
}

enum px_status px_tcstore_want_put(struct px_store *st, const char *id,
				   const struct px_tc_want *w, int64_t ttl_ms)
{
	char lk[512], wk[512], field[160], last[16], ttl[32];
	struct px_reply *r = NULL;
	if (want_key(st, id, lk, wk, sizeof(lk)))
		return PX_EINVAL;
	snprintf(field, sizeof(field), "%" PRIu32 "@%s", w->seg, w->from);
	snprintf(last, sizeof(last), "%" PRIu32, w->last);
	snprintf(ttl, sizeof(ttl), "%lld", (long long)(ttl_ms > 0 ? ttl_ms : 1000));
	const char *keys[] = { lk, wk };
	const char *args[] = { field, last, w->settled ? "1" : "0", ttl };
	enum px_status s = px_store_eval(st, WANT_PUT, 2, keys, 4, args, &r);
	if (s == PX_OK && r->type != PX_REPLY_INT)
		s = PX_EBADRESP;
	else if (s == PX_OK && r->integer == 0)
		s = PX_ENOTFOUND;
	px_reply_free(r);
	return s;
}

enum px_status px_tcstore_want_take(struct px_store *st, const char *id, uint64_t gen,
				    struct px_tc_want *out, size_t cap, size_t *n)
{
	char lk[512], wk[512], g[32];
	struct px_reply *r = NULL;
	*n = 0;
	if (want_key(st, id, lk, wk, sizeof(lk)))
		return PX_EINVAL;
	snprintf(g, sizeof(g), "%" PRIu64, gen);
	const char *keys[] = { lk, wk };
	const char *args[] = { g };
	enum px_status s = px_store_eval(st, WANT_TAKE, 2, keys, 1, args, &r);
	if (s == PX_OK && r->type != PX_REPLY_ARRAY)
		s = PX_EBADRESP;
	for (size_t i = 0; s == PX_OK && i + 1 < r->n && *n < cap; i += 2) {
		const char *field = px_reply_str(r, i), *val = px_reply_str(r, i + 1);
		struct px_tc_want *w = &out[*n];
		unsigned seg, last;
		int settled, used = 0;
		long long at;
		memset(w, 0, sizeof(*w));
		if (sscanf(field, "%u@%n", &seg, &used) != 1 || !used ||
		    sscanf(val, "%u %d %lld", &last, &settled, &at) != 3) {
			px_warn("transcode", "store %s: want of %s: malformed entry '%s' = '%s'; "
				"ignored", px_store_url(st), id, field, val);
			continue;
		}
		w->seg = seg;
		w->last = last < seg ? seg : last;
		w->settled = settled != 0;
		w->at_ms = at;
		snprintf(w->from, sizeof(w->from), "%s", field + used);
		(*n)++;
	}
	px_reply_free(r);
	return s;
}
