/*
 * hosts.c - host registration and heartbeat in the store (hosts.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "hosts.h"
#include "log.h"

struct px_hosts {
	struct px_store *st;
	char id[PX_HOST_ID_MAX + 1];
	char token[33];
	char boot[40];
	char key[256], set[256], hostpfx[256], queue[256];
	char peer[208];
	int64_t heartbeat_ms;
	void (*counts)(void *arg, int *sessions, int *writers);
	void *counts_arg;
	void (*load)(void *arg, int64_t *wcost_milli, int *max_writers);
	void *load_arg;
	void (*tick)(void *arg);
	void *tick_arg;

	pthread_mutex_t lock;     /* what follows */
	pthread_cond_t cond;
	int stopping;
	int started;
	pthread_t thread;
	struct px_host_info list[PX_HOSTS_MAX];
	size_t nlist;
	int lost;                 /* another daemon took our id meanwhile */
	int left;                 /* px_hosts_leave done (its caller's thread) */
};

/* Registers (or beats): refuses, {0, pid, boot, age}, when another token
 * holds the id, unless ARGV[8] is "1" (replace a dead one). The load:
 * ARGV[11..13] wcost, cpu, wmax; placed/placedn become what still waits
 * in this host's placement queue KEYS[3] (values "FROM COST ...": the
 * ones it started since the last beat count in wcost now). */
static const char JOIN[] =
	"local cur = redis.call('HMGET', KEYS[1], 'token', 'pid', 'boot', 'seen')\n"
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"if cur[1] and cur[1] ~= ARGV[1] and ARGV[8] ~= '1' then\n"
	"  return {0, cur[2] or '', cur[3] or '', now - tonumber(cur[4] or now)}\n"
	"end\n"
	"if cur[1] ~= ARGV[1] then redis.call('HSET', KEYS[1], 'started', now) end\n"
	"redis.call('HSET', KEYS[1], 'token', ARGV[1], 'pid', ARGV[2], 'boot', ARGV[3],\n"
	"  'version', ARGV[4], 'seen', now, 'sessions', ARGV[6], 'writers', ARGV[7],\n"
	"  'peer', ARGV[10])\n"
	"local pc, pn = 0, 0\n"
	"for _, v in ipairs(redis.call('HVALS', KEYS[3])) do\n"
	"  pn = pn + 1; pc = pc + (tonumber(string.match(v, '^%S+ (%d+)')) or 0)\n"
	"end\n"
	"redis.call('HSET', KEYS[1], 'wcost', ARGV[11], 'cpu', ARGV[12], 'wmax', ARGV[13],\n"
	"  'placed', pc, 'placedn', pn)\n"
	"redis.call('PEXPIRE', KEYS[1], ARGV[5])\n"
	"redis.call('SADD', KEYS[2], ARGV[9])\n"
	"return {1}\n";

/* The registered hosts: {now, {{id, pid, seen, started, sessions, writers,
 * version, peer, wcost, cpu, wmax, placed}, ...}}; ids whose hash
 * expired leave the set. */
static const char LIST[] =
	"local ids = redis.call('SMEMBERS', KEYS[1])\n"
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local out = {}\n"
	"for _, id in ipairs(ids) do\n"
	"  local v = redis.call('HMGET', ARGV[1] .. id, 'pid', 'seen', 'started', 'sessions',\n"
	"    'writers', 'version', 'peer', 'wcost', 'cpu', 'wmax', 'placed')\n"
	"  if v[2] then\n"
	"    out[#out + 1] = {id, v[1] or '0', v[2], v[3] or v[2], v[4] or '0', v[5] or '0',\n"
	"      v[6] or '', v[7] or '', v[8] or '0', v[9] or '0', v[10] or '0', v[11] or '0'}\n"
	"  else redis.call('SREM', KEYS[1], id) end\n"
	"end\n"
	"return {now, out}\n";

static const char LEAVE[] =
	"if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then\n"
	"  redis.call('DEL', KEYS[1]); redis.call('SREM', KEYS[2], ARGV[2]); return 1\n"
	"end\n"
	"return 0\n";

enum px_status px_host_id_check(const char *id, char *err, size_t errlen)
{
	size_t n = strlen(id);
	int ok = n >= 1 && n <= PX_HOST_ID_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
		     (id[i] >= '0' && id[i] <= '9') || id[i] == '.' || id[i] == '_' ||
		     id[i] == '-';
	if (!ok) {
		snprintf(err, errlen, "host_id '%s': 1 to %d of A-Z a-z 0-9 . _ -", id,
			 PX_HOST_ID_MAX);
		return PX_EINVAL;
	}
	return PX_OK;
}

void px_host_id_default(char *buf, size_t cap)
{
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1) || !host[0])
		snprintf(host, sizeof(host), "localhost");
	host[PX_HOST_ID_MAX] = '\0';
	for (char *p = host; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			*p = '_';
	snprintf(buf, cap, "%s", host);
}

static void boot_id(char *buf, size_t cap)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* The 1-minute load average per online CPU, in thousandths (0 when the
 * kernel does not say). */
static int64_t cpu_milli(void)
{
	double la[1];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (getloadavg(la, 1) != 1 || !(la[0] >= 0))
		return 0;
	return (int64_t)(la[0] * 1000.0 / (double)(ncpu > 0 ? ncpu : 1));
}

static enum px_status beat(struct px_hosts *h, int force, struct px_reply **out)
{
	char pid[24], ttl[24], sess[16], wr[16], wcost[24], cpu[24], wmax[16];
	int sessions = 0, writers = 0, maxw = 0;
	int64_t cost = 0;
	if (h->counts)
		h->counts(h->counts_arg, &sessions, &writers);
	if (h->load)
		h->load(h->load_arg, &cost, &maxw);
	snprintf(wcost, sizeof(wcost), "%lld", (long long)cost);
	snprintf(cpu, sizeof(cpu), "%lld", (long long)cpu_milli());
	snprintf(wmax, sizeof(wmax), "%d", maxw);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	snprintf(ttl, sizeof(ttl), "%lld", (long long)(3 * h->heartbeat_ms));
	snprintf(sess, sizeof(sess), "%d", sessions);
	snprintf(wr, sizeof(wr), "%d", writers);
	const char *keys[] = { h->key, h->set, h->queue };
	const char *args[] = { h->token, pid, h->boot, SEAMFS_VERSION, ttl, sess, wr,
			       force ? "1" : "0", h->id, h->peer, wcost, cpu, wmax };
	return px_store_eval(h->st, JOIN, 3, keys, 13, args, out);
}

enum px_status px_hosts_join(struct px_store *st, const char *host_id, int64_t heartbeat_ms,
			     struct px_hosts **out, char *err, size_t errlen)
{
	struct px_hosts *h = calloc(1, sizeof(*h));
	struct px_reply *r = NULL;
	enum px_status s;
	unsigned char rnd[16];

	*out = NULL;
	if (!h)
		return PX_ENOMEM;
	h->st = st;
	h->heartbeat_ms = heartbeat_ms > 0 ? heartbeat_ms : 10000;
	snprintf(h->id, sizeof(h->id), "%s", host_id);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		for (size_t i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)(px_now_us() >> (i % 8) ^ (uint64_t)getpid());
	for (size_t i = 0; i < sizeof(rnd); i++)
		sprintf(h->token + 2 * i, "%02x", rnd[i]);
	boot_id(h->boot, sizeof(h->boot));
	if (px_store_key(st, h->key, sizeof(h->key), "host:%s", host_id) < 0 ||
	    px_store_key(st, h->set, sizeof(h->set), "hosts") < 0 ||
	    px_store_key(st, h->hostpfx, sizeof(h->hostpfx), "host:") < 0 ||
	    px_store_key(st, h->queue, sizeof(h->queue), "place:%s", host_id) < 0) {
		free(h);
		snprintf(err, errlen, "host_id too long");
		return PX_EINVAL;
	}
	pthread_mutex_init(&h->lock, NULL);
	px_cond_init_mono(&h->cond);
	for (int force = 0; force < 2; force++) {
		px_reply_free(r);
		r = NULL;
		if ((s = beat(h, force, &r)) != PX_OK) {
			snprintf(err, errlen, "store %s: cannot register host_id %s: %s", px_store_url(st),
				 host_id, r && r->str ? r->str : px_strerror(s));
			goto fail;
		}
		if (px_reply_int(r, 0) == 1)
			break;
		long long opid = px_reply_int(r, 1);
		const char *oboot = px_reply_str(r, 2);
		double age = (double)px_reply_int(r, 3) / 1000.0;
		/* the holder ran here and is gone (killed, crashed): its key
		 * outlives it by the TTL, which must not lock its successor out */
		if (!force && h->boot[0] && strcmp(oboot, h->boot) == 0 && opid > 0 &&
		    px_pid_gone((pid_t)opid)) {
			px_info("hosts", "host_id %s was registered by pid %lld of this machine, which "
				"is gone; taking it over", host_id, opid);
			continue;
		}
		snprintf(err, errlen, "store %s: host_id %s is already registered by another live "
			 "seamfs (pid %lld%s, heartbeat %.1f s ago); two daemons may not share a "
			 "host_id on one store: give this one another host_id= (or stop the other)",
			 px_store_url(st), host_id, opid,
			 strcmp(oboot, h->boot) == 0 ? " on this machine" : " on another machine",
			 age);
		s = PX_EEXIST;
		goto fail;
	}
	px_reply_free(r);
	h->nlist = 1;
	snprintf(h->list[0].id, sizeof(h->list[0].id), "%s", h->id);
	h->list[0].pid = getpid();
	h->list[0].self = 1;
	snprintf(h->list[0].version, sizeof(h->list[0].version), "%s", SEAMFS_VERSION);
	px_info("hosts", "registered as host %s in cluster %s on store %s (heartbeat %lld ms)",
		host_id, px_store_prefix(st), px_store_url(st), (long long)h->heartbeat_ms);
	*out = h;
	return PX_OK;
fail:
	px_reply_free(r);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->cond);
	free(h);
	return s;
}

void px_hosts_set_counts(struct px_hosts *h, void (*counts)(void *arg, int *sessions,
							   int *writers), void *arg)
{
	h->counts = counts;
	h->counts_arg = arg;
}

void px_hosts_set_load(struct px_hosts *h, void (*load)(void *arg, int64_t *wcost_milli,
							int *max_writers), void *arg)
{
	h->load = load;
	h->load_arg = arg;
}

/* Reads the registered hosts into h->list. */
static void refresh_list(struct px_hosts *h)
{
	struct px_reply *r = NULL;
	const char *keys[] = { h->set };
	const char *args[] = { h->hostpfx };
	if (px_store_eval(h->st, LIST, 1, keys, 1, args, &r) != PX_OK || !r ||
	    r->type != PX_REPLY_ARRAY || r->n != 2 || r->el[1].type != PX_REPLY_ARRAY) {
		px_reply_free(r);
		return;
	}
	long long now = px_reply_int(r, 0);
	struct px_host_info list[PX_HOSTS_MAX];
	size_t n = 0;
	int self_seen = 0;
	for (size_t i = 0; i < r->el[1].n && n < PX_HOSTS_MAX; i++) {
		const struct px_reply *e = &r->el[1].el[i];
		struct px_host_info *o = &list[n++];
		memset(o, 0, sizeof(*o));
		snprintf(o->id, sizeof(o->id), "%s", px_reply_str(e, 0));
		o->pid = px_reply_int(e, 1);
		o->age_ms = now - px_reply_int(e, 2);
		o->up_ms = now - px_reply_int(e, 3);
		o->sessions = (int)px_reply_int(e, 4);
		o->writers = (int)px_reply_int(e, 5);
		snprintf(o->version, sizeof(o->version), "%s", px_reply_str(e, 6));
		snprintf(o->peer, sizeof(o->peer), "%s", px_reply_str(e, 7));
		o->wcost_milli = px_reply_int(e, 8);
		o->cpu_milli = px_reply_int(e, 9);
		o->max_writers = (int)px_reply_int(e, 10);
		o->placed_milli = px_reply_int(e, 11);
		o->self = strcmp(o->id, h->id) == 0;
		self_seen |= o->self;
	}
	px_reply_free(r);
	/* by id, for a stable listing */
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && strcmp(list[k - 1].id, list[k].id) > 0; k--) {
			struct px_host_info t = list[k];
			list[k] = list[k - 1];
			list[k - 1] = t;
		}
	pthread_mutex_lock(&h->lock);
	if (self_seen || n) {
		memcpy(h->list, list, n * sizeof(*list));
		h->nlist = n;
	}
	pthread_mutex_unlock(&h->lock);
}

static void *heartbeat_main(void *arg)
{
	struct px_hosts *h = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&h->lock);
	while (!h->stopping) {
		pthread_mutex_unlock(&h->lock);
		struct px_reply *r = NULL;
		enum px_status st = beat(h, 0, &r);
		if (st == PX_OK && px_reply_int(r, 0) != 1) {
			/* our key expired (the store was unreachable for 3 heartbeats)
			 * and another daemon registered our id meanwhile */
			if (!h->lost++)
				px_error("hosts", "host_id %s is now registered by another seamfs (pid "
					 "%lld); this daemon is not listed in the cluster until it "
					 "goes", h->id, px_reply_int(r, 1));
		} else if (st == PX_OK && h->lost) {
			h->lost = 0;
		}
		px_reply_free(r);
		if (st == PX_OK) {
			refresh_list(h);
			if (h->tick)
				h->tick(h->tick_arg);
		}
		pthread_mutex_lock(&h->lock);
		if (!h->stopping)
			px_cond_wait_until(&h->cond, &h->lock, &h->stopping,
					   px_now_ms() + h->heartbeat_ms);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

void px_hosts_set_peer(struct px_hosts *h, const char *url)
{
	snprintf(h->peer, sizeof(h->peer), "%s", url ? url : "");
	snprintf(h->list[0].peer, sizeof(h->list[0].peer), "%s", h->peer);
}

void px_hosts_set_tick(struct px_hosts *h, void (*tick)(void *arg), void *arg)
{
	h->tick = tick;
	h->tick_arg = arg;
}

enum px_status px_hosts_start(struct px_hosts *h)
{
	if (pthread_create(&h->thread, NULL, heartbeat_main, h))
		return PX_EIO;
	h->started = 1;
	return PX_OK;
}

size_t px_hosts_list(struct px_hosts *h, struct px_host_info *out, size_t cap)
{
	if (!h)
		return 0;
	pthread_mutex_lock(&h->lock);
	size_t n = h->nlist < cap ? h->nlist : cap;
	memcpy(out, h->list, n * sizeof(*out));
	pthread_mutex_unlock(&h->lock);
	return n;
}

const char *px_hosts_self(const struct px_hosts *h)
{
	return h->id;
}

struct px_store *px_hosts_store(const struct px_hosts *h)
{
	return h->st;
}

void px_hosts_leave(struct px_hosts *h)
{
	if (!h || h->left)
		return;
	h->left = 1;
	pthread_mutex_lock(&h->lock);
	h->stopping = 1;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (h->started)
		pthread_join(h->thread, NULL);
	const char *keys[] = { h->key, h->set };
	const char *args[] = { h->token, h->id };
	if (px_store_eval(h->st, LEAVE, 2, keys, 2, args, NULL) != PX_OK)
		px_warn("hosts", "could not remove host %s from the store (its key expires by "
			"itself)", h->id);
}

void px_hosts_free(struct px_hosts *h)
{
	if (!h)
		return;
	px_hosts_leave(h);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->cond);
	free(h);
}
