/*
 * claim.c - the claim to copy an asset to a place (docs/copies.md,
 * "Cluster mode" and "Across hosts").
 *
 * Cluster mode (px_cluster_store(core)), a storage without a host (shared, NFS):
 * before copying there a job takes PREFIX:copy:{ASSET}:STORAGE (SET NX PX
 * 3 heartbeats; renewed from the copy loop, compare-and-deleted at the
 * end); one another host holds makes it wait ("copying on another host"),
 * no answer too ("store not answering"). Once the claim is had, the
 * storage's manifests are read again: a copy another host finished
 * meanwhile is registered and none is made. On the hosts' disks (across
 * hosts) the claim is PREFIX:copy:{ASSET}:/hosts ("/" is in no storage's
 * name): with it held the others' records are read again first.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "copies_i.h"
#include "kvstore.h"
#include "log.h"

static const char CLAIM_RENEW[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
static const char CLAIM_DROP[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('DEL', KEYS[1]) end return 0";

/* Renews the held claim when due (the copies thread; bounded by the
 * store's command bound). A claim found another host's sets claim_lost;
 * a store that does not answer is asked again at the next renewal. */
void cp_claim_renew(struct px_copies *cp, int force)
{
	struct px_store *store = px_cluster_store(cp->core);
	if (!store || !cp->claim_key[0] || (!force && px_now_ms() < cp->claim_renew_at))
		return;
	char ttl[32];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)cp->claim_ttl_ms);
	const char *keys[1] = { cp->claim_key }, *args[2] = { cp->host, ttl };
	struct px_reply *r = NULL;
	enum px_status st = px_store_eval(store, CLAIM_RENEW, 1, keys, 2, args, &r);
	if (st == PX_OK && r && r->type == PX_REPLY_INT && r->integer == 0)
		cp->claim_lost = 1;
	px_reply_free(r);
	int64_t every = cp->claim_ttl_ms / 3;
	cp->claim_renew_at = px_now_ms() + (every < CLAIM_RENEW_MS ? every : CLAIM_RENEW_MS);
}

/* Takes the claim to copy the asset to storage si (no lock held):
 * PX_WAIT_NONE when held (ours), else why the job waits. */
static enum px_copy_wait claim_take(struct px_copies *cp, size_t asset, const char *storage)
{
	struct px_core *core = cp->core;
	char key[sizeof(cp->claim_key)], ttl[32];
	if (px_store_key(px_cluster_store(core), key, sizeof(key), "copy:{%s}:%s",
			 px_cat(core)->assets[asset].id, storage) < 0)
		return PX_WAIT_STORE_DOWN;
	int64_t hb = core->cfg->heartbeat_ms > 0 ? core->cfg->heartbeat_ms : 10000;
	int64_t ttl_ms = 3 * hb;
	snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
	const char *argv[6] = { "SET", key, cp->host, "NX", "PX", ttl };
	struct px_reply *r = NULL;
	enum px_status st = px_store_call(px_cluster_store(core), 6, argv, NULL, &r);
	int got = st == PX_OK && r && r->type == PX_REPLY_STATUS;
	int answered = st == PX_OK || st == PX_EBADRESP;
	px_reply_free(r);
	if (!answered)
		return PX_WAIT_STORE_DOWN;
	if (!got && st == PX_OK) {
		/* held: ours (this host id, a claim left by a restart) or not */
		const char *get[2] = { "GET", key };
		r = NULL;
		st = px_store_call(px_cluster_store(core), 2, get, NULL, &r);
		got = st == PX_OK && r && r->type == PX_REPLY_STR && strcmp(r->str, cp->host) == 0;
		px_reply_free(r);
		if (st != PX_OK && st != PX_EBADRESP)
			return PX_WAIT_STORE_DOWN;
	}
	if (!got)
		return st == PX_OK ? PX_WAIT_OTHER_HOST : PX_WAIT_STORE_DOWN;
	snprintf(cp->claim_key, sizeof(cp->claim_key), "%s", key);
	cp->claim_ttl_ms = ttl_ms;
	cp->claim_lost = 0;
	cp_claim_renew(cp, 1); /* a claim left by a restart: its full ttl again */
	return PX_WAIT_NONE;
}

/* Drops the held claim if it is still ours (no lock held). */
void cp_claim_drop(struct px_copies *cp)
{
	if (!px_cluster_store(cp->core) || !cp->claim_key[0])
		return;
	const char *keys[1] = { cp->claim_key }, *args[1] = { cp->host };
	struct px_reply *r = NULL;
	if (px_store_eval(px_cluster_store(cp->core), CLAIM_DROP, 1, keys, 1, args, &r) != PX_OK)
		px_info("copies", "claim %s could not be dropped (the store did not answer): it "
			"expires in %lld ms", cp->claim_key, (long long)cp->claim_ttl_ms);
	px_reply_free(r);
	cp->claim_key[0] = '\0';
}

/*
 * Takes the claim job ji needs before copying to storage si, in cluster
 * mode: one host copies an asset to a shared storage, and one host at a
 * time places an asset on the hosts' disks ("/" is in no storage's name).
 * 1: copy now (claim held, or none needed); 0: not now (it waits, or
 * another host made the copy meanwhile: the claim dropped). cp->lock
 * held; dropped around the store's calls.
 */
int cp_claim_job(struct px_copies *cp, long ji, size_t si)
{
	int across = cp_clustered(cp) && cp->st[si].host;
	if (!cp_shared(cp, &cp->st[si]) && !across)
		return 1;
	size_t asset = cp->jobs[ji].asset;
	char sname[256];
	snprintf(sname, sizeof(sname), "%s", across ? "/hosts" : cp->st[si].name);
	pthread_mutex_unlock(&cp->lock);
	enum px_copy_wait w = claim_take(cp, asset, sname);
	if (w == PX_WAIT_NONE && across)
		cp_cluster_sync(cp); /* what the others made meanwhile */
	pthread_mutex_lock(&cp->lock);
	struct job *j = &cp->jobs[ji];
	if (w != PX_WAIT_NONE) {
		if (w != j->wait)
			px_info("copies", "asset %s: copy to %s%s waits: %s",
				px_cat(cp->core)->assets[asset].id,
				across ? "this host's disk " : "storage ",
				across ? cp->st[si].name : sname, px_copy_wait_name(w));
		j->wait = w;
		j->state = JOB_WAITING;
		j->claim_at = px_now_ms() + CLAIM_RETRY_MS;
		return 0;
	}
	/* another host may have made it meanwhile: its manifest first */
	if (!across)
		cp_manifest_load(cp, si, 1);
	long ci = cp_find_copy(cp, asset, si);
	if ((!across && ci >= 0 && cp->c[ci].serving && !cp->c[ci].stale) ||
	    (across && cp_copies_held(cp, asset) >= cp_want_copies(cp, asset))) {
		pthread_mutex_unlock(&cp->lock);
		cp_claim_drop(cp);
		pthread_mutex_lock(&cp->lock);
		return 0;
	}
	return 1;
}
