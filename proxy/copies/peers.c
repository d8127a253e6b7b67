/*
 * peers.c - copies across hosts (docs/copies.md, "Across hosts").
 *
 * Cluster mode with a hosts registry, storages that name their host
 * (local disks): each host publishes its disks (role, room) and the
 * assets it holds there in PREFIX:cstate:HOST and reads the live hosts'
 * every SYNC_MS (cp_cluster_sync). A live host's copy is a source here
 * (provider peer:HOST, its peer endpoint: control/peer.c), dropped when
 * the host leaves the registry, back when it returns. Placement (place.c)
 * weighs every live host's disks with the figures read here.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "copies_i.h"
#include "kvstore.h"
#include "log.h"

/* Whether this host holds a serving copy of the asset on its own disks.
 * cp->lock held. */
int cp_self_holds(const struct px_copies *cp, size_t asset)
{
	for (size_t i = 0; i < cp->nc; i++)
		if (cp->c[i].asset == asset && cp->c[i].serving && !cp->c[i].stale &&
		    cp_own_disk(cp, &cp->st[cp->c[i].storage]))
			return 1;
	return 0;
}

/* Whether host p published a serving copy of the asset on its disks
 * (assets a reload added beyond cp->cap: none). */
int cp_peer_holds(const struct px_copies *cp, const struct peer *p, size_t asset)
{
	return p->held && asset <= cp->cap && p->held[asset];
}

/* How many live other hosts hold a serving copy of the asset on their
 * disks (as of the last sync). cp->lock held. */
int cp_peers_holding(const struct px_copies *cp, size_t asset)
{
	int n = 0;
	for (size_t i = 0; i < cp->npeers; i++)
		n += !cp->peers[i].self && cp_peer_holds(cp, &cp->peers[i], asset);
	return n;
}

void cp_peers_free(struct peer *p, size_t n)
{
	for (size_t i = 0; p && i < n; i++)
		free(p[i].held);
	free(p);
}

/* Appends a malloc'd "fmt" to the list: 0, or -1 out of memory. */
static int push_fmt(char ***v, size_t *n, size_t *cap, const char *fmt, ...) PX_PRINTF(4, 5);

static int push_fmt(char ***v, size_t *n, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	char *sv = NULL;
	if (cp_grow((void **)v, cap, *n, sizeof(**v)))
		return -1;
	va_start(ap, fmt);
	int rc = vasprintf(&sv, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	(*v)[(*n)++] = sv;
	return 0;
}

/* This host's disks and the assets it holds there, as the store's
 * field/value pairs after the ttl (into *out; their count). cp->lock held. */
static size_t own_state(struct px_copies *cp, const char *ttl, char ***out)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	int bad = push_fmt(&v, &n, &cap, "%s", ttl);
	for (size_t i = 0; i < cp->nst && !bad; i++) {
		const struct storage *s = &cp->st[i];
		if (s->in_catalog && cp_own_disk(cp, s))
			bad = push_fmt(&v, &n, &cap, "s:%s", s->name) ||
			      push_fmt(&v, &n, &cap, "%d %d %lld %lld", s->reachable, s->copying,
				       (long long)s->free_bytes, (long long)s->min_free);
	}
	for (size_t a = 0; a < px_cat(cp->core)->nassets && !bad; a++)
		if (px_asset_rt(cp->core, a)->listed && cp_self_holds(cp, a))
			bad = push_fmt(&v, &n, &cap, "a:%s", px_cat(cp->core)->assets[a].id) ||
			      push_fmt(&v, &n, &cap, "1");
	if (bad && n > 0 && n % 2 == 0) /* a pair half pushed: dropped */
		free(v[--n]);
	*out = v;
	return n;
}

/* Replaces this host's record; ARGV[1] its ttl, then field/value pairs. */
static const char PUBLISH[] =
	"redis.call('DEL', KEYS[1])\n"
	"for i = 2, #ARGV, 200 do\n"
	"  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 199, #ARGV)))\n"
	"end\n"
	"redis.call('PEXPIRE', KEYS[1], ARGV[1])\n"
	"return 1\n";

/* Every registered host's record: {{id, {field, value, ...}}, ...}. */
static const char READ_ALL[] =
	"local out = {}\n"
	"for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do\n"
	"  local v = redis.call('HGETALL', ARGV[1] .. id)\n"
	"  if #v > 0 then out[#out + 1] = {id, v} end\n"
	"end\n"
	"return out\n";

/* Publishes this host's record (no lock held). */
static void publish(struct px_copies *cp)
{
	struct px_core *core = cp->core;
	char key[400], ttl[32], **v = NULL;
	int64_t hb = core->cfg->heartbeat_ms > 0 ? core->cfg->heartbeat_ms : 10000;
	/* liveness is the hosts registry's: this only outlives a long copy */
	snprintf(ttl, sizeof(ttl), "%lld", (long long)(10 * hb < 10000 ? 10000 : 10 * hb));
	if (px_store_key(px_cluster_store(core), key, sizeof(key), "cstate:%s", cp->host) < 0)
		return;
	pthread_mutex_lock(&cp->lock);
	size_t n = own_state(cp, ttl, &v);
	pthread_mutex_unlock(&cp->lock);
	const char *keys[1] = { key };
	if (n && px_store_eval(px_cluster_store(core), PUBLISH, 1, keys, (int)n,
			      (const char **)v, NULL) != PX_OK)
		px_debug("copies", "this host's copies could not be published (the store did not "
			 "answer)");
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Fills peer p from its record's field/value pairs r. */
static void peer_parse(struct px_copies *cp, struct peer *p, const struct px_reply *r)
{
	for (size_t i = 0; i + 1 < r->n; i += 2) {
		const char *f = px_reply_str(r, i), *val = px_reply_str(r, i + 1);
		if (strncmp(f, "s:", 2) == 0 && p->nst < PEER_STORAGES_MAX) {
			struct pstorage *ps = &p->st[p->nst];
			long long fr = 0, mn = 0;
			if (sscanf(val, "%d %d %lld %lld", &ps->reachable, &ps->copying, &fr, &mn) != 4)
				continue;
			snprintf(ps->name, sizeof(ps->name), "%s", f + 2);
			ps->free_bytes = fr;
			ps->min_free = mn;
			p->nst++;
		} else if (strncmp(f, "a:", 2) == 0) {
			long a = px_catalog_find(px_cat(cp->core), f + 2);
			if (a >= 0 && (size_t)a <= cp->cap)
				p->held[a] = 1;
		}
	}
}

/* Reads the live hosts' records into a new list (*out, sorted by id as
 * the registry lists them): its length, or -1 when the store did not
 * answer. No lock held. */
static long read_peers(struct px_copies *cp, struct peer **out)
{
	struct px_core *core = cp->core;
	struct px_host_info live[PX_HOSTS_MAX];
	size_t nlive = px_hosts_list(px_cluster_hosts(core), live, PX_HOSTS_MAX);
	char set[300], pfx[300];
	struct px_reply *r = NULL;
	long n = -1;
	*out = NULL;
	if (px_store_key(px_cluster_store(core), set, sizeof(set), "hosts") < 0 ||
	    px_store_key(px_cluster_store(core), pfx, sizeof(pfx), "cstate:") < 0)
		return -1;
	const char *keys[1] = { set }, *args[1] = { pfx };
	if (px_store_eval(px_cluster_store(core), READ_ALL, 1, keys, 1, args, &r) != PX_OK || !r ||
	    r->type != PX_REPLY_ARRAY)
		goto out;
	struct peer *p = calloc(nlive + 1, sizeof(*p));
	if (!p)
		goto out;
	n = 0;
	for (size_t h = 0; h < nlive; h++) {
		const struct px_reply *e = NULL;
		for (size_t i = 0; i < r->n && !e; i++)
			if (r->el[i].type == PX_REPLY_ARRAY && r->el[i].n == 2 &&
			    strcmp(px_reply_str(&r->el[i], 0), live[h].id) == 0)
				e = &r->el[i];
		if (!e || e->el[1].type != PX_REPLY_ARRAY ||
		    !(p[n].held = calloc(cp->cap + 1, 1)))
			continue; /* no record yet: not a place, holds nothing */
		snprintf(p[n].id, sizeof(p[n].id), "%s", live[h].id);
		snprintf(p[n].url, sizeof(p[n].url), "%s", live[h].peer);
		p[n].self = live[h].self;
		peer_parse(cp, &p[n], &e->el[1]);
		n++;
	}
	*out = p;
out:
	px_reply_free(r);
	return n;
}

/* The peer URL of the asset's copy on a host whose endpoint is base. */
static void peer_url(const char *base, const char *id, char *out, size_t n)
{
	size_t o = (size_t)snprintf(out, n, "%s%s", base, PX_PEER_PATH);
	for (const unsigned char *c = (const unsigned char *)id; *c && o + 4 < n; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || strchr("-._~", *c))
			out[o++] = (char)*c;
		else
			o += (size_t)snprintf(out + o, n - o, "%%%02X", *c);
	}
	out[o < n ? o : n - 1] = '\0';
}

/* Another host's copy becomes (or is again) a source here. The copies
 * thread, no lock held. */
static void peer_source_add(struct px_copies *cp, const struct peer *p, size_t a)
{
	struct px_core *core = cp->core;
	char url[600], prov[PX_HOST_ID_MAX + 8], *hdr = NULL;
	size_t k, i = 0;
	while (i < cp->nps && !(cp->ps[i].asset == a && strcmp(cp->ps[i].host, p->id) == 0))
		i++;
	if (i == cp->nps) {
		if (cp_grow((void **)&cp->ps, &cp->capps, cp->nps, sizeof(*cp->ps)))
			return;
		memset(&cp->ps[i], 0, sizeof(cp->ps[i]));
		cp->ps[i].asset = a;
		snprintf(cp->ps[i].host, sizeof(cp->ps[i].host), "%s", p->id);
		cp->nps++;
	}
	if (cp->ps[i].serving)
		return;
	peer_url(p->url, px_cat(core)->assets[a].id, url, sizeof(url));
	snprintf(prov, sizeof(prov), "peer:%s", p->id);
	if (asprintf(&hdr, "Authorization: Bearer %s", px_cluster_secret(core)) < 0)
		return;
	enum px_status st = px_sources_add_peer(core, a, url, prov, hdr, &k);
	explicit_bzero(hdr, strlen(hdr));
	free(hdr);
	if (st != PX_OK) {
		px_warn("copies", "asset %s: host %s's copy cannot become a source: %s",
			px_cat(core)->assets[a].id, p->id,
			st == PX_EINVAL ? "no room for another source or provider while mounted"
					: px_strerror(st));
		cp->ps[i].serving = 1; /* not asked again each second */
		cp->ps[i].k = (size_t)-1;
		return;
	}
	cp->ps[i].k = k;
	cp->ps[i].serving = 1;
	px_info("copies", "asset %s: host %s's copy is a source here (%s, provider %s)",
		px_cat(core)->assets[a].id, p->id, url, prov);
}

/* Makes the sources here follow the live hosts' copies: a host that
 * holds one adds it; one that went away (its heartbeat expired) or no
 * longer holds it drops it. The copies thread, no lock held. */
static void peer_sources_follow(struct px_copies *cp, const struct peer *p, size_t np)
{
	struct px_core *core = cp->core;
	for (size_t h = 0; h < np && px_cluster_secret(core); h++)
		for (size_t a = 0; !p[h].self && p[h].url[0] && a < px_cat(core)->nassets; a++)
			if (cp_peer_holds(cp, &p[h], a) && px_asset_rt(core, a)->listed &&
			    px_cat(core)->assets[a].kind == PX_ASSET_PLAIN)
				peer_source_add(cp, &p[h], a);
	for (size_t i = 0; i < cp->nps; i++) {
		struct psrc *s = &cp->ps[i];
		const struct peer *ph = NULL;
		for (size_t h = 0; h < np && !ph; h++)
			if (strcmp(p[h].id, s->host) == 0)
				ph = &p[h];
		if (!s->serving || (ph && ph->url[0] && cp_peer_holds(cp, ph, s->asset) &&
				    px_cluster_secret(core)))
			continue;
		s->serving = 0;
		if (s->k == (size_t)-1)
			continue;
		px_sources_drop(core, s->asset, s->k, ph ? "the host no longer holds a copy"
						       : "the host is gone (its heartbeat expired)");
		px_info("copies", "asset %s: host %s's copy is no longer a source here: %s",
			px_cat(core)->assets[s->asset].id, s->host,
			ph ? "it no longer holds it" : "the host is gone");
	}
}

/* Publishes this host's state, reads the live hosts' and follows their
 * copies (the copies thread, no lock held). A store that does not answer
 * leaves the last view standing. */
void cp_cluster_sync(struct px_copies *cp)
{
	struct peer *np = NULL;
	cp->sync_at = px_now_ms() + SYNC_MS;
	publish(cp);
	long n = read_peers(cp, &np);
	if (n < 0)
		return;
	peer_sources_follow(cp, np, (size_t)n);
	pthread_mutex_lock(&cp->lock);
	struct peer *old = cp->peers;
	size_t nold = cp->npeers;
	cp->peers = np;
	cp->npeers = (size_t)n;
	pthread_mutex_unlock(&cp->lock);
	cp_peers_free(old, nold);
}

/* cluster_sync when due (the copies thread, no lock held): a host with
 * no storage and no secret has nothing to tell nor to read. */
void cp_sync_due(struct px_copies *cp)
{
	if (!cp_clustered(cp) || px_now_ms() < cp->sync_at)
		return;
	pthread_mutex_lock(&cp->lock);
	int any = cp->nst > 0 || px_cluster_secret(cp->core);
	pthread_mutex_unlock(&cp->lock);
	if (any)
		cp_cluster_sync(cp);
}
