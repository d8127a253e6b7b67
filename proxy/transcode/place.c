/*
 * place.c - a transcode writer's host in cluster mode (place.h).
 *
 * Both calls are one Lua script each: Redis runs a script alone, so two
 * hosts placing at once see each other's placements (the chosen host's
 * placed cost, the asset's marker), and a take and a placement never
 * interleave. The load figures come from the hosts' heartbeats
 * (hosts.c); the script reads them where they are, with no copy.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "place.h"

/*
 * KEYS[1] the hosts' set, KEYS[2] the asset's marker, KEYS[3] its lease.
 * ARGV: host key prefix, queue key prefix, asset, self, not_self, cost,
 * from, crashes, live_ms, hold_ms, orphan_ms. {host, fresh, lease gen}; {'', 0} the
 * lease is live (but a reassignment's: its caller holds it, and lets it
 * go); {'', 1} no host has a slot.
 */
static const char PLACE[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local l = redis.call('HMGET', KEYS[3], 'gen', 'hb', 'released')\n"
	"if ARGV[5] ~= '1' and l[1] and l[3] ~= '1' and\n"
	"   now - tonumber(l[2] or '0') <= tonumber(ARGV[11]) then\n"
	"  return {'', 0, l[1]}\n"
	"end\n"
	"local m = redis.call('GET', KEYS[2])\n"
	"if m and not (ARGV[5] == '1' and m == ARGV[4]) then return {m, 0, l[1] or '0'} end\n"
	"local best, bload = nil, 0\n"
	"for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do\n"
	"  local v = redis.call('HMGET', ARGV[1] .. id, 'seen', 'writers', 'wcost', 'cpu',\n"
	"    'wmax', 'placed', 'placedn')\n"
	"  local wmax = tonumber(v[5] or '0') or 0\n"
	"  if v[1] and now - tonumber(v[1]) <= tonumber(ARGV[9]) and wmax > 0 and\n"
	"     (tonumber(v[2] or '0') or 0) + (tonumber(v[7] or '0') or 0) < wmax and\n"
	"     not (ARGV[5] == '1' and id == ARGV[4]) then\n"
	"    local load = (tonumber(v[3] or '0') or 0) + (tonumber(v[4] or '0') or 0) +\n"
	"      (tonumber(v[6] or '0') or 0)\n"
	"    if not best or load < bload or (load == bload and id < best) then\n"
	"      best, bload = id, load\n"
	"    end\n"
	"  end\n"
	"end\n"
	"if not best then return {'', 1, l[1] or '0'} end\n"
	"redis.call('SET', KEYS[2], best, 'PX', ARGV[10])\n"
	"redis.call('HINCRBY', ARGV[1] .. best, 'placed', ARGV[6])\n"
	"redis.call('HINCRBY', ARGV[1] .. best, 'placedn', 1)\n"
	"if best ~= ARGV[4] then\n"
	"  redis.call('HSET', ARGV[2] .. best, ARGV[3], ARGV[7] .. ' ' .. ARGV[6] .. ' ' ..\n"
	"    ARGV[8] .. ' ' .. now .. ' ' .. ARGV[4])\n"
	"  redis.call('PEXPIRE', ARGV[2] .. best, ARGV[10])\n"
	"end\n"
	"return {best, 1, l[1] or '0'}\n";

/* KEYS[1] the queue; ARGV marker prefix ("PREFIX:tc:{"), self.
 * {now, {asset, value, ...}}; each taken asset's marker, if it names
 * self, goes. */
static const char TAKE[] =
	"local all = redis.call('HGETALL', KEYS[1])\n"
	"if #all > 0 then redis.call('DEL', KEYS[1]) end\n"
	"for i = 1, #all, 2 do\n"
	"  local mk = ARGV[1] .. all[i] .. '}:place'\n"
	"  if redis.call('GET', mk) == ARGV[2] then redis.call('DEL', mk) end\n"
	"end\n"
	"local t = redis.call('TIME')\n"
	"return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), all}\n";

int64_t px_place_cost(const struct px_asset *a)
{
	if (a->kind == PX_ASSET_REMUX)
		return 200;
	if (a->height <= 0)
		return 1000;
	int64_t c = (int64_t)a->height * a->height * 1000 / (720 * 720);
	return c < 250 ? 250 : c > 4000 ? 4000 : c;
}

enum px_status px_place_choose(struct px_store *st, const struct px_place_req *req,
			       char *host, size_t cap, int *fresh, uint64_t *gen)
{
	char set[256], mark[512], lease[512], hpfx[256], qpfx[256];
	char cost[24], from[16], crashes[16], live[24], hold[24], orphan[24];
	struct px_reply *r = NULL;
	enum px_status s = PX_EINVAL;

	host[0] = '\0';
	*fresh = 0;
	*gen = 0;
	if (px_store_key(st, set, sizeof(set), "hosts") < 0 ||
	    px_store_key(st, mark, sizeof(mark), "tc:{%s}:place", req->asset) < 0 ||
	    px_store_key(st, lease, sizeof(lease), "tc:{%s}:lease", req->asset) < 0 ||
	    px_store_key(st, hpfx, sizeof(hpfx), "host:") < 0 ||
	    px_store_key(st, qpfx, sizeof(qpfx), "place:") < 0)
		goto out;
	snprintf(cost, sizeof(cost), "%lld", (long long)req->cost);
	snprintf(from, sizeof(from), "%u", req->from);
	snprintf(crashes, sizeof(crashes), "%d", req->crashes);
	snprintf(live, sizeof(live), "%lld", (long long)req->live_ms);
	snprintf(hold, sizeof(hold), "%lld", (long long)req->hold_ms);
	snprintf(orphan, sizeof(orphan), "%lld", (long long)req->orphan_ms);
	const char *keys[] = { set, mark, lease };
	const char *args[] = { hpfx, qpfx, req->asset, req->self, req->not_self ? "1" : "0",
			       cost, from, crashes, live, hold, orphan };
	if ((s = px_store_eval(st, PLACE, 3, keys, 11, args, &r)) != PX_OK)
		goto out;
	if (r->type != PX_REPLY_ARRAY || r->n != 3) {
		s = PX_EBADRESP;
		goto out;
	}
	snprintf(host, cap, "%s", px_reply_str(r, 0));
	*fresh = px_reply_int(r, 1) == 1;
	*gen = (uint64_t)px_reply_int(r, 2);
out:
	px_reply_free(r);
	return s;
}

/* Parses one queued job's value "FROM COST CRASHES AT_MS BY" into o;
 * 0 when it is not one. */
static int parse_job(const char *v, int64_t now, struct px_place_job *o)
{
	unsigned from;
	long long cost, at;
	int crashes;
	char by[PX_PLACE_HOST_MAX + 1];
	if (sscanf(v, "%u %lld %d %lld %64s", &from, &cost, &crashes, &at, by) != 5)
		return 0;
	o->from = from;
	o->crashes = crashes;
	o->age_ms = now - at;
	snprintf(o->by, sizeof(o->by), "%s", by);
	return 1;
}

enum px_status px_place_take(struct px_store *st, const char *self, struct px_place_job *out,
			     size_t cap, size_t *n)
{
	char queue[256], mpfx[256];
	struct px_reply *r = NULL;
	enum px_status s = PX_EINVAL;

	*n = 0;
	if (px_store_key(st, queue, sizeof(queue), "place:%s", self) < 0 ||
	    px_store_key(st, mpfx, sizeof(mpfx), "tc:{") < 0)
		goto out;
	const char *keys[] = { queue };
	const char *args[] = { mpfx, self };
	if ((s = px_store_eval(st, TAKE, 1, keys, 2, args, &r)) != PX_OK)
		goto out;
	if (r->type != PX_REPLY_ARRAY || r->n != 2 || r->el[1].type != PX_REPLY_ARRAY) {
		s = PX_EBADRESP;
		goto out;
	}
	int64_t now = px_reply_int(r, 0);
	const struct px_reply *all = &r->el[1];
	for (size_t i = 0; i + 1 < all->n; i += 2) {
		if (*n == cap) {
			px_warn("place", "more than %zu jobs placed here at once; asset %s left to "
				"its requester", cap, px_reply_str(all, i));
			continue;
		}
		struct px_place_job *o = &out[*n];
		snprintf(o->asset, sizeof(o->asset), "%s", px_reply_str(all, i));
		if (parse_job(px_reply_str(all, i + 1), now, o))
			(*n)++;
		else
			px_warn("place", "asset %s: placed job '%s' is not one; ignored", o->asset,
				px_reply_str(all, i + 1));
	}
out:
	px_reply_free(r);
	return s;
}
