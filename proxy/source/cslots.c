/*
 * cslots.c - providers' connection slots across the hosts of a cluster
 * (store=): max_connections is the cluster's limit, and each host uses
 * only the slots it holds of it.
 *
 * The store keeps, per provider and host, the slots that host holds and
 * its sessions there, each with an expiry three heartbeats on, in two
 * hashes:
 *   PREFIX:slots   field HOST<US>PROVIDER = "N EXPIRY_MS"
 *   PREFIX:psess   field HOST<US>PROVIDER = "N EXPIRY_MS"
 * (<US> the unit separator, 0x1f, which host ids never hold; expiries on
 * Redis's clock). A field whose expiry passed is a dead host's: every
 * script drops it, so a host killed with -9 keeps its slots for at most
 * three heartbeats.
 *
 * Taking: an open or a transfer that finds no slot free on this host,
 * while the cluster had room at the last call, asks for one more
 * (px_cslots_acquire, from the thread that would wait for it, bounded by
 * the store's command timeout); one script counts the other hosts' live
 * slots and grants what fits under the limit. So the origin never sees
 * more than max_connections from all hosts together.
 *
 * Giving back and sharing: this module's thread, every SYNC_MS (at most a
 * heartbeat), writes what this host holds now (slots it has not used for
 * LINGER_MS go back first, so a stream's restart or the next file's open
 * does not ask again) and its sessions per provider, and reads the other
 * hosts' totals: fewest-sessions balancing counts the cluster's sessions.
 * The same write puts this host's slots back after Redis restarted empty.
 * A host that asked and got nothing leaves a want (PREFIX:slotwant, for
 * four syncs): the others then end a lingering session there at each sync
 * (a closed playback keeps its slot for session_ttl on its own host, which
 * would keep the other hosts out for that long).
 *
 * Liveness: the same sync writes when this host found each provider down
 * (liveness_ttl of bad answers) and its last good answer; the store keeps
 * one record per provider (PREFIX:pdown), set by the first host that finds
 * it down and ended by any good answer newer than it, and every host
 * treats a record another host set as its own finding.
 *
 * Degraded: when the store does not answer, each clustered provider gets
 * this host's local share, max / hosts (at least 1
 * slot; hosts as the heartbeat last listed them, px_cslots_set_hosts),
 * without a lease; the log and the status say so. After start nothing
 * here touches the hosts' registry, which main lets go first. When the store
 * answers again, the next sync writes what this host holds.
 *
 * Locks: call_lock makes one slot call at a time (a sync's counts and an
 * acquire's never cross); it is taken before prov_lock, never inside it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "clock.h"
#include "cluster.h"
#include "context.h"
#include "cslots.h"
#include "hosts.h"
#include "kvstore.h"
#include "log.h"
#include "provider.h"

#define LINGER_MS 250      /* a slot unused this long goes back */
#define SYNC_MAX_MS 1000   /* the thread syncs at least this often... */
#define SYNC_MIN_MS 100    /* ...and at most this often */

struct px_cslots {
	struct px_core *core;
	pthread_mutex_t call_lock;
	pthread_mutex_t lock;      /* stopping, the thread's wait */
	pthread_cond_t cond;
	int stopping, started;
	pthread_t thread;
	int64_t sync_ms, ttl_ms;
	char slots_key[PX_STORE_PREFIX_MAX + 16], sess_key[PX_STORE_PREFIX_MAX + 16];
	char want_key[PX_STORE_PREFIX_MAX + 16], down_key[PX_STORE_PREFIX_MAX + 16];
	char self[PX_HOST_ID_MAX + 1]; /* a copy: main lets the hosts go first */
	int degraded;              /* the last call got no answer (logged once) */
	_Atomic uint64_t n_acquire, n_sync;
	_Atomic int nhosts;        /* as the heartbeat last listed them */
};

/* {granted, others}: grants up to ARGV[3] slots of provider ARGV[2] to
 * host ARGV[1], which holds ARGV[4], under the limit ARGV[5]; the
 * holding expires ARGV[6] ms on. Short of what it wanted, the host's want
 * goes into KEYS[2] for ARGV[7] ms: the others end their lingering
 * sessions there. */
static const char ACQUIRE[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local host, prov = ARGV[1], ARGV[2]\n"
	"local want, have, max = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])\n"
	"local h = redis.call('HGETALL', KEYS[1])\n"
	"local others = 0\n"
	"for i = 1, #h, 2 do\n"
	"  local f, v = h[i], h[i + 1]\n"
	"  local at = string.find(f, '\\31', 1, true)\n"
	"  local n, exp = string.match(v, '^(%d+) (%d+)$')\n"
	"  if not at or not n or tonumber(exp) < now then redis.call('HDEL', KEYS[1], f)\n"
	"  elseif string.sub(f, at + 1) == prov and string.sub(f, 1, at - 1) ~= host then\n"
	"    others = others + tonumber(n)\n"
	"  end\n"
	"end\n"
	"local g = max - others - have\n"
	"if g > want then g = want end\n"
	"if g < 0 then g = 0 end\n"
	"if have + g > 0 then\n"
	"  redis.call('HSET', KEYS[1], host .. '\\31' .. prov,\n"
	"    (have + g) .. ' ' .. (now + tonumber(ARGV[6])))\n"
	"end\n"
	"if g < want then\n"
	"  redis.call('HSET', KEYS[2], host .. '\\31' .. prov, '1 ' .. (now + tonumber(ARGV[7])))\n"
	"end\n"
	"return {g, others}\n";

/* Writes host ARGV[1]'s holdings and sessions (ARGV[3..]: provider, slots,
 * sessions, down since, last good answer, ...; expiring ARGV[2] ms on) and
 * returns per provider the other hosts' live {slots, sessions, wants}
 * (KEYS[1], KEYS[2], KEYS[3]), then {down, answered} (KEYS[4]: provider
 * -> "SINCE HOST" while a host finds it down, provider<US>up -> the last
 * good answer that ended that): down, another host found it down and
 * nobody saw it answer since; answered, a good answer came after this host
 * found it down. */
static const char SYNC[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local host, ttl = ARGV[1], tonumber(ARGV[2])\n"
	"local n = (#ARGV - 2) / 5\n"
	"local idx, out = {}, {}\n"
	"for i = 0, n - 1 do\n"
	"  local a = 3 + 5 * i\n"
	"  local prov = ARGV[a]\n"
	"  local vals = {tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])}\n"
	"  local down, good = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])\n"
	"  idx[prov] = i\n"
	"  for k = 1, 2 do\n"
	"    local f = host .. '\\31' .. prov\n"
	"    if vals[k] > 0 then redis.call('HSET', KEYS[k], f, vals[k] .. ' ' .. (now + ttl))\n"
	"    else redis.call('HDEL', KEYS[k], f) end\n"
	"  end\n"
	"  local up = tonumber(redis.call('HGET', KEYS[4], prov .. '\\31up') or '0')\n"
	"  local rec = redis.call('HGET', KEYS[4], prov)\n"
	"  local since, who = nil, nil\n"
	"  if rec then since, who = string.match(rec, '^(%d+) (.*)$') end\n"
	"  since = tonumber(since)\n"
	"  if good > up then\n"
	"    up = good\n"
	"    redis.call('HSET', KEYS[4], prov .. '\\31up', up)\n"
	"  end\n"
	"  if since and up > since then\n"
	"    redis.call('HDEL', KEYS[4], prov)\n"
	"    since = nil\n"
	"  end\n"
	"  if not since and down > 0 and down > up then\n"
	"    redis.call('HSET', KEYS[4], prov, down .. ' ' .. host)\n"
	"    since, who = down, host\n"
	"  end\n"
	"  out[5 * i + 1] = 0\n"
	"  out[5 * i + 2] = 0\n"
	"  out[5 * i + 3] = 0\n"
	"  out[5 * i + 4] = (since and who ~= host) and 1 or 0\n"
	"  out[5 * i + 5] = (down > 0 and up > down) and 1 or 0\n"
	"end\n"
	"for k = 1, 3 do\n"
	"  local h = redis.call('HGETALL', KEYS[k])\n"
	"  for i = 1, #h, 2 do\n"
	"    local f, v = h[i], h[i + 1]\n"
	"    local at = string.find(f, '\\31', 1, true)\n"
	"    local c, exp = string.match(v, '^(%d+) (%d+)$')\n"
	"    if not at or not c or tonumber(exp) < now then redis.call('HDEL', KEYS[k], f)\n"
	"    elseif string.sub(f, 1, at - 1) ~= host then\n"
	"      local j = idx[string.sub(f, at + 1)]\n"
	"      if j then out[5 * j + k] = out[5 * j + k] + tonumber(c) end\n"
	"    end\n"
	"  end\n"
	"end\n"
	"return out\n";

/* This host's local share of a limit while the store does not answer. */
static int local_share(struct px_cslots *cs, int max)
{
	int n = atomic_load(&cs->nhosts);
	int share = n > 0 ? max / n : max;
	return share > 0 ? share : 1;
}

void px_cslots_set_hosts(struct px_core *core, int n)
{
	if (px_cluster_cslots(core) && n > 0)
		atomic_store(&px_cluster_cslots(core)->nhosts, n);
}

/* The store did not answer (or answered nonsense): says so once, and
 * gives each clustered provider with a limit its local share. call_lock
 * held. */
static void degrade(struct px_cslots *cs, const char *why)
{
	struct px_core *core = cs->core;
	if (!cs->degraded)
		px_warn("cluster", "store %s does not answer (%s): each provider's limit is "
			"shared out locally (max_connections / hosts) until it does",
			px_store_url(px_cluster_store(core)), why);
	cs->degraded = 1;
	for (size_t i = 0; i < px_cat(core)->nproviders; i++) {
		/* the local share of every limited provider */
		pthread_mutex_lock(px_prov_lock(core));
		struct prov_rt *p = px_prov_rt(core, i);
		int on = p->cl && p->max;
		int share = on ? local_share(cs, p->max) : 0;
		int delta = on ? share - p->granted : 0;
		int os = p->others_slots, oss = p->others_sessions;
		pthread_mutex_unlock(px_prov_lock(core));
		if (on)
			px_provider_cluster_apply(core, i, delta, os, oss, 1, 0);
	}
}

static void answered(struct px_cslots *cs)
{
	if (cs->degraded)
		px_info("cluster", "store %s answers again: slots are leased from it again",
			px_store_url(px_cluster_store(cs->core)));
	cs->degraded = 0;
}

int px_cslots_acquire(struct px_core *core, size_t prov, int n)
{
	struct px_cslots *cs = px_cluster_cslots(core);
	if (!cs || n <= 0)
		return 0;
	pthread_mutex_lock(&cs->call_lock);
	pthread_mutex_lock(px_prov_lock(core));
	struct prov_rt *p = px_prov_rt(core, prov);
	int have = p->granted, max = p->max, oss = p->others_sessions;
	int short_now = px_provider_cluster_need(core, prov);
	pthread_mutex_unlock(px_prov_lock(core));
	int got = 0;
	if (!short_now) {
		pthread_mutex_unlock(&cs->call_lock);
		return 0; /* another thread's acquire got it meanwhile */
	}
	char a_want[16], a_have[16], a_max[16], a_ttl[24];
	snprintf(a_want, sizeof(a_want), "%d", n);
	snprintf(a_have, sizeof(a_have), "%d", have);
	snprintf(a_max, sizeof(a_max), "%d", max);
	snprintf(a_ttl, sizeof(a_ttl), "%lld", (long long)cs->ttl_ms);
	char a_wttl[24];
	snprintf(a_wttl, sizeof(a_wttl), "%lld", (long long)(4 * cs->sync_ms));
	const char *keys[] = { cs->slots_key, cs->want_key };
	const char *args[] = { cs->self, px_cat(core)->providers[prov].name,
			       a_want, a_have, a_max, a_ttl, a_wttl };
	struct px_reply *r = NULL;
	atomic_fetch_add(&cs->n_acquire, 1);
	enum px_status st = px_store_eval(px_cluster_store(core), ACQUIRE, 2, keys, 7, args, &r);
	if (st == PX_OK && r->type == PX_REPLY_ARRAY && r->n == 2) {
		answered(cs);
		got = (int)px_reply_int(r, 0);
		px_provider_cluster_apply(core, prov, got, (int)px_reply_int(r, 1), oss, 0, 0);
	} else if (st != PX_OK || !cs->degraded) {
		degrade(cs, st != PX_OK ? px_strerror(st) : "an answer that is not slots");
		pthread_mutex_lock(px_prov_lock(core));
		got = px_prov_rt(core, prov)->granted - have;
		pthread_mutex_unlock(px_prov_lock(core));
	}
	px_reply_free(r);
	pthread_mutex_unlock(&cs->call_lock);
	return got > 0 ? got : 0;
}

/* Writes this host's holdings and sessions (none when leaving) and reads
 * the other hosts'. Slots unused for LINGER_MS are given back first. */
static void sync_once(struct px_cslots *cs, int leaving)
{
	struct px_core *core = cs->core;
	size_t np = px_cat(core)->nproviders, nargs = 2;
	const char **args = calloc(2 + 5 * np, sizeof(*args));
	char (*num)[24] = calloc(4 * np + 1, sizeof(*num));
	size_t *which = calloc(np + 1, sizeof(*which));
	char ttl[24];
	if (!args || !num || !which)
		goto out;
	snprintf(ttl, sizeof(ttl), "%lld", (long long)cs->ttl_ms);
	args[0] = cs->self;
	args[1] = ttl;
	pthread_mutex_lock(&cs->call_lock);
	size_t nw = 0;
	int64_t now = core->now();
	/* liveness times go to the store on its clock */
	int64_t to_store = px_store_now_ms(px_cluster_store(core)) - now;
	pthread_mutex_lock(px_prov_lock(core));
	for (size_t i = 0; i < np; i++) {
		struct prov_rt *p = px_prov_rt(core, i);
		if (!p->cl)
			continue;
		if (!p->max) {
			p->granted = 0; /* no limit: only its sessions are shared */
		} else if (leaving) {
			p->granted = 0;
		} else if (p->granted > p->held && !cs->degraded) {
			/* unused since LINGER_MS: back to the cluster (here first,
			 * so that nothing takes it while the store is told) */
			if (!p->surplus_since)
				p->surplus_since = now;
			else if (now - p->surplus_since >= LINGER_MS)
				p->granted = p->held > 0 ? p->held : 0;
		} else {
			p->surplus_since = 0;
		}
		int64_t down, good;
		px_provider_liveness_times(core, i, now, &down, &good);
		snprintf(num[4 * nw], sizeof(num[0]), "%d", p->granted);
		snprintf(num[4 * nw + 1], sizeof(num[0]), "%d", leaving ? 0 : p->sessions);
		snprintf(num[4 * nw + 2], sizeof(num[0]), "%lld",
			 (long long)(down && !leaving ? down + to_store : 0));
		snprintf(num[4 * nw + 3], sizeof(num[0]), "%lld",
			 (long long)(good ? good + to_store : 0));
		args[nargs++] = px_cat(core)->providers[i].name;
		for (int k = 0; k < 4; k++)
			args[nargs++] = num[4 * nw + k];
		which[nw++] = i;
	}
	pthread_mutex_unlock(px_prov_lock(core));
	if (nw) {
		const char *keys[] = { cs->slots_key, cs->sess_key, cs->want_key, cs->down_key };
		struct px_reply *r = NULL;
		atomic_fetch_add(&cs->n_sync, 1);
		enum px_status st = px_store_eval(px_cluster_store(core), SYNC, 4, keys, (int)nargs, args, &r);
		if (st == PX_OK && r->type == PX_REPLY_ARRAY && r->n == 5 * nw) {
			answered(cs);
			for (size_t k = 0; k < nw; k++) {
				px_provider_cluster_apply(core, which[k], 0,
							  (int)px_reply_int(r, 5 * k),
							  (int)px_reply_int(r, 5 * k + 1), 0,
							  leaving ? 0 : (int)px_reply_int(r, 5 * k + 2));
				if (!leaving)
					px_provider_cluster_liveness(core, which[k],
								     (int)px_reply_int(r, 5 * k + 3),
								     (int)px_reply_int(r, 5 * k + 4));
			}
		} else if (!leaving) {
			degrade(cs, st != PX_OK ? px_strerror(st) : "an answer that is not slots");
		}
		px_reply_free(r);
	}
	pthread_mutex_unlock(&cs->call_lock);
out:
	free(args);
	free(num);
	free(which);
}

static void *cslots_main(void *arg)
{
	struct px_cslots *cs = arg;
	pthread_mutex_lock(&cs->lock);
	while (!cs->stopping) {
		int64_t until = px_now_ms() + cs->sync_ms;
		struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
		pthread_cond_timedwait(&cs->cond, &cs->lock, &ts);
		if (cs->stopping)
			break;
		pthread_mutex_unlock(&cs->lock);
		sync_once(cs, 0);
		pthread_mutex_lock(&cs->lock);
	}
	pthread_mutex_unlock(&cs->lock);
	return NULL;
}

enum px_status px_cslots_start(struct px_core *core)
{
	if (!px_cluster_store(core) || !px_cluster_hosts(core))
		return PX_OK;
	struct px_cslots *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return PX_ENOMEM;
	cs->core = core;
	cs->nhosts = 1;
	snprintf(cs->self, sizeof(cs->self), "%s", px_hosts_self(px_cluster_hosts(core)));
	int64_t hb = core->cfg->heartbeat_ms > 0 ? core->cfg->heartbeat_ms : 10000;
	cs->sync_ms = hb / 2 < SYNC_MIN_MS ? SYNC_MIN_MS : hb / 2 > SYNC_MAX_MS ? SYNC_MAX_MS
										  : hb / 2;
	/* a holding outlives a missed sync or two, and a dead host's goes
	 * with its registration (three heartbeats) */
	cs->ttl_ms = 3 * hb > 6 * cs->sync_ms ? 3 * hb : 6 * cs->sync_ms;
	if (px_store_key(px_cluster_store(core), cs->slots_key, sizeof(cs->slots_key), "slots") < 0 ||
	    px_store_key(px_cluster_store(core), cs->sess_key, sizeof(cs->sess_key), "psess") < 0 ||
	    px_store_key(px_cluster_store(core), cs->want_key, sizeof(cs->want_key), "slotwant") < 0 ||
	    px_store_key(px_cluster_store(core), cs->down_key, sizeof(cs->down_key), "pdown") < 0) {
		free(cs);
		return PX_EINVAL;
	}
	pthread_mutex_init(&cs->call_lock, NULL);
	pthread_mutex_init(&cs->lock, NULL);
	px_cond_init_mono(&cs->cond);
	px_cluster_set_cslots(core, cs);
	if (pthread_create(&cs->thread, NULL, cslots_main, cs) != 0) {
		px_warn("cluster", "could not start the slots thread: unused slots go back "
			"only when the daemon stops");
		return PX_OK;
	}
	cs->started = 1;
	return PX_OK;
}

void px_cslots_stop(struct px_core *core)
{
	struct px_cslots *cs = core ? px_cluster_cslots(core) : NULL;
	if (!cs)
		return;
	pthread_mutex_lock(&cs->lock);
	cs->stopping = 1;
	pthread_cond_broadcast(&cs->cond);
	pthread_mutex_unlock(&cs->lock);
	if (cs->started)
		pthread_join(cs->thread, NULL);
	sync_once(cs, 1); /* every slot back */
	px_cluster_set_cslots(core, NULL);
	pthread_cond_destroy(&cs->cond);
	pthread_mutex_destroy(&cs->lock);
	pthread_mutex_destroy(&cs->call_lock);
	free(cs);
}

void px_cslots_counts(struct px_core *core, uint64_t *acquires, uint64_t *syncs)
{
	struct px_cslots *cs = px_cluster_cslots(core);
	*acquires = cs ? atomic_load(&cs->n_acquire) : 0;
	*syncs = cs ? atomic_load(&cs->n_sync) : 0;
}
