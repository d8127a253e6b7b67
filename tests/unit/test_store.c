/*
 * test_store.c - the store layer (kvstore.c, hosts.c) and the transcode's
 * records in it (tcstore.c: the Redis lease backend and the playlist's
 * fenced compare-and-set) against a real redis-server, which the test
 * starts on 127.0.0.1 on a port of its own (no persistence) and stops by
 * its PID. Two struct px_store on one Redis play two hosts. And the
 * placement of transcode writers (place.c) on hosts whose load the test
 * writes as their heartbeats would. A fake sentinel (a thread on a
 * loopback socket) announces failovers between two real Redis.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hosts.h"
#include "kvstore.h"
#include "lease.h"
#include "place.h"
#include "tcstore.h"
#include "tls.h"

static pid_t g_redis;
static int g_port;
static char g_url[64];

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return ntohs(sa.sin_port);
}

static int can_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Whether key exists in store s (EXISTS). */
static long long key_exists(struct px_store *s, const char *key)
{
	const char *ex[] = { "EXISTS", key };
	struct px_reply *r = NULL;
	assert_int_equal(px_store_call(s, 2, ex, NULL, &r), PX_OK);
	long long n = r->integer;
	px_reply_free(r);
	return n;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* In a child just forked from parent, before its exec: output to
 * /dev/null, and killed with the test: a failed assertion leaves its test
 * without its cleanup, and a killed test runs no teardown, so without
 * this a Redis started here could outlive the run. */
static void child_setup(pid_t parent)
{
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 1);
		dup2(null, 2);
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(127);
}

/* Starts redis-server on port (0: a free one); 0 when it answers. */
static int redis_start(int port)
{
	pid_t parent = getpid();
	for (int attempt = 0; attempt < 5; attempt++) {
		int p = port ? port : free_port();
		char sp[16];
		snprintf(sp, sizeof(sp), "%d", p);
		pid_t pid = fork();
		if (pid == 0) {
			child_setup(parent);
			execlp("redis-server", "redis-server", "--port", sp, "--bind", "127.0.0.1",
			       "--save", "", "--appendonly", "no", "--dir", "/tmp", (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 200; i++) {
			if (can_connect(p)) {
				g_redis = pid;
				g_port = p;
				snprintf(g_url, sizeof(g_url), "redis://127.0.0.1:%d", p);
				return 0;
			}
			if (waitpid(pid, NULL, WNOHANG) == pid)
				break;
			sleep_ms(25);
		}
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (port)
			break;
	}
	return -1;
}

static void redis_stop(void)
{
	if (g_redis > 0) {
		kill(g_redis, SIGKILL);
		waitpid(g_redis, NULL, 0);
	}
	g_redis = 0;
}

static int group_setup(void **state)
{
	(void)state;
	if (redis_start(0)) {
		fprintf(stderr, "cannot start redis-server (is it installed?)\n");
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	redis_stop();
	return 0;
}

static struct px_store *store_new(const char *prefix)
{
	struct px_store *s = NULL;
	char err[512];
	assert_int_equal(px_store_new(g_url, NULL, prefix, &s, err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_connect(s, err, sizeof(err)), PX_OK);
	return s;
}

static void flush(struct px_store *s)
{
	const char *argv[] = { "FLUSHALL" };
	assert_int_equal(px_store_call(s, 1, argv, NULL, NULL), PX_OK);
}

static void test_checks(void **state)
{
	char err[512];
	(void)state;
	assert_int_equal(px_store_check_url("redis://127.0.0.1:6379", err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_check_url("redis://cache.lan", err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_check_url("redis://[::1]:7000/3", err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_check_url("redis+unix:///run/redis.sock", err, sizeof(err)),
			 PX_OK);
	assert_int_equal(px_store_check_url("redis+unix:///run/r.sock?db=2", err, sizeof(err)),
			 PX_OK);
	assert_int_equal(px_store_check_url("redis://:pw@host:1", err, sizeof(err)), PX_EINVAL);
	assert_non_null(strstr(err, "store_password_file"));
	assert_int_equal(px_store_check_url("http://host", err, sizeof(err)), PX_EINVAL);
	assert_int_equal(px_store_check_url("redis://host:0", err, sizeof(err)), PX_EINVAL);
	assert_int_equal(px_store_check_url("redis://host:70000", err, sizeof(err)), PX_EINVAL);
	assert_int_equal(px_store_check_url("redis://host/x", err, sizeof(err)), PX_EINVAL);
	assert_int_equal(px_store_check_url("redis://", err, sizeof(err)), PX_EINVAL);
	assert_int_equal(px_store_check_url("redis+unix://relative", err, sizeof(err)), PX_EINVAL);
	/* behind Sentinel: '+' between the sentinels, /NAME the master's name */
	assert_int_equal(px_store_check_url("redis-sentinel://127.0.0.1:26379+10.0.0.2:26380+"
					    "[::1]:26381/mymaster", err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_check_url("redis-sentinel://s1.lan/media.main", err, sizeof(err)),
			 PX_OK);
	/* over TLS: the query names files (absolute paths) and a name */
	assert_int_equal(px_store_check_url("rediss://h:6380/2?tls_ca_file=/a/ca.pem&"
					    "tls_cert_file=/a/c.pem&tls_key_file=/a/k.pem", err,
					    sizeof(err)), PX_OK);
	assert_int_equal(px_store_check_url("rediss://[::1]", err, sizeof(err)), PX_OK);
	/* a path with a comma (-o splits at commas) or an '&', %-escaped */
	struct px_tls_files f;
	static const char q[] = "tls_ca_file=/etc/a%2Cb/c%26d%2c.pem&tls_server_name=r%2Elan";
	assert_int_equal(px_tls_parse_query("u", q, strlen(q), &f, err, sizeof(err)), PX_OK);
	assert_string_equal(f.ca, "/etc/a,b/c&d,.pem");
	assert_string_equal(f.server_name, "r.lan");
	assert_int_equal(px_store_check_url("rediss://h?tls_ca_file=/a%2Cb.pem", err, sizeof(err)),
			 PX_OK);
	assert_int_equal(px_store_check_url("rediss-sentinel://s1+s2:26380/m?tls_server_name="
					    "redis.lan", err, sizeof(err)), PX_OK);
	static const struct { const char *url, *says; } bad[] = {
		{ "redis-sentinel:///mymaster", "no sentinel" },
		{ "redis-sentinel://h:26379", "no master NAME" },
		{ "redis-sentinel://h:26379/", "no master NAME" },
		{ "redis-sentinel://h:26379/a/b", "bad master NAME" },
		{ "redis-sentinel://h:26379/my master", "bad master NAME" },
		{ "redis-sentinel://h:0+g:1/m", "sentinel 'h:0': bad port" },
		{ "redis-sentinel://h:1+g:99999/m", "sentinel 'g:99999': bad port" },
		{ "redis-sentinel://h:1+g:x/m", "sentinel 'g:x': bad port" },
		{ "redis-sentinel://h:1++g:2/m", "sentinel '': no host" },
		{ "redis-sentinel://h:1+/m", "an empty sentinel" },
		{ "redis-sentinel://[::1/m", "bad [IPv6] host" },
		{ "redis-sentinel://:pw@h:1/m", "store_password_file" },
		{ "redis-sentinel://a+b+c+d+e+f+g+h+i/m", "more than 8 sentinels" },
		{ "rediss://h?tls_ca=/x", "unknown setting 'tls_ca'" },
		{ "rediss://h?tls_ca_file", "unknown setting 'tls_ca_file'" },
		{ "rediss://h?tls_ca_file=ca.pem", "tls_ca_file: an absolute path" },
		{ "rediss://h?tls_ca_file=", "tls_ca_file: empty" },
		{ "rediss://h?tls_cert_file=/c.pem", "go together" },
		{ "rediss://h?tls_ca_file=/a%2", "a bad %-escape at '%2'" },
		{ "rediss://h?tls_ca_file=/a%zz.pem", "a bad %-escape at '%zz'" },
		{ "rediss://h?tls_ca_file=/a%00.pem", "a bad %-escape at '%00'" },
		{ "rediss://h:0/1?tls_ca_file=/x", "bad port" },
		{ "rediss://h/x?tls_ca_file=/x", "database number" },
		{ "rediss-sentinel://h:1/m?tls_key_file=/k", "go together" },
		{ "rediss-sentinel://h:1/?tls_ca_file=/x", "no master NAME" },
		{ "redis://h?tls_ca_file=/x", "database number" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(px_store_check_url(bad[i].url, err, sizeof(err)), PX_EINVAL);
		if (!strstr(err, bad[i].says))
			fail_msg("%s: '%s' does not say '%s'", bad[i].url, err, bad[i].says);
		/* the message names the value (a password excepted) */
		if (!strstr(bad[i].url, "@") && !strstr(err, bad[i].url))
			fail_msg("%s: '%s' does not name it", bad[i].url, err);
	}
	assert_int_equal(px_store_check_prefix("seamfs-prod.2", err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_check_prefix("a:b", err, sizeof(err)), PX_EINVAL);
	assert_int_equal(px_store_check_prefix("", err, sizeof(err)), PX_EINVAL);
	assert_int_equal(px_host_id_check("node-1.lan", err, sizeof(err)), PX_OK);
	assert_int_equal(px_host_id_check("bad id", err, sizeof(err)), PX_EINVAL);
	char hid[PX_HOST_ID_MAX + 1];
	px_host_id_default(hid, sizeof(hid));
	assert_int_equal(px_host_id_check(hid, err, sizeof(err)), PX_OK);
}

static void test_calls_and_keys(void **state)
{
	struct px_store *s = store_new("unit");
	struct px_reply *r = NULL;
	char key[128];
	(void)state;
	flush(s);
	assert_int_equal(px_store_key(s, key, sizeof(key), "x:%d", 7), 8);
	assert_string_equal(key, "unit:x:7");
	const char *set[] = { "SET", key, "v" };
	assert_int_equal(px_store_call(s, 3, set, NULL, NULL), PX_OK);
	const char *get[] = { "GET", key };
	assert_int_equal(px_store_call(s, 2, get, NULL, &r), PX_OK);
	assert_int_equal(r->type, PX_REPLY_STR);
	assert_string_equal(r->str, "v");
	px_reply_free(r);
	/* an error answer is an answer: the connection stays */
	const char *bad[] = { "NOSUCHCOMMAND" };
	assert_int_equal(px_store_call(s, 1, bad, NULL, &r), PX_EBADRESP);
	assert_int_equal(r->type, PX_REPLY_ERR);
	px_reply_free(r);
	struct px_store_state st;
	px_store_state(s, &st);
	assert_true(st.connected);
	assert_true(st.latency_us >= 0);
	assert_true(st.calls >= 3 && st.errors >= 1);
	assert_true(px_store_up(s));
	/* the store's clock is within a second of ours (same machine) */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	assert_true(llabs((long long)(px_store_now_ms(s) - wall)) < 1000);
	px_store_free(s);
}

static void test_lease_cas_and_fencing(void **state)
{
	struct px_store *sa = store_new("unit"), *sb = store_new("unit");
	struct px_lease_store *la = NULL, *lb = NULL;
	struct px_lease a, b, got;
	(void)state;
	flush(sa);
	assert_int_equal(px_lease_redis_new(sa, &la), PX_OK);
	assert_int_equal(px_lease_redis_new(sb, &lb), PX_OK);
	assert_int_equal(px_lease_get(la, "movie", &got), PX_ENOTFOUND);
	/* host A claims: a fresh key gets the store's clock as generation */
	assert_int_equal(px_lease_claim(la, "movie", "hostA:1:aa", 2000, &a), PX_OK);
	assert_true(a.gen > 1000000000000ULL);
	/* host B: refused while A is live */
	assert_int_equal(px_lease_claim(lb, "movie", "hostB:2:bb", 2000, &b), PX_EFENCED);
	assert_string_equal(b.owner, "hostA:1:aa");
	assert_int_equal(px_lease_heartbeat(la, &a), PX_OK);
	/* A lists a segment under its generation */
	uint64_t ver = 0, nv = 0;
	const char *t1 = "#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 0\n#SEGMENTS 3\n0 188 1 1\n";
	assert_int_equal(px_tcstore_pl_put(sa, "movie", a.gen, 0, t1, strlen(t1), &nv), PX_OK);
	uint64_t v1 = nv;
	assert_true(v1 > 1000000000000ULL); /* the store's clock in ms, at least */
	/* a stale version is refused (load again, redo) */
	assert_int_equal(px_tcstore_pl_put(sa, "movie", a.gen, 0, t1, strlen(t1), &nv),
			 PX_EEXIST);
	/* B takes over an orphan (orphan_after -1000: at once, whatever
	 * millisecond the store's clock and the heartbeat's differ by; with
	 * -1 it failed 1 run in about 20 under load) */
	assert_int_equal(px_lease_claim(lb, "movie", "hostB:2:bb", -1000, &b), PX_OK);
	assert_true(b.gen > a.gen);
	assert_string_equal(b.session, a.session);
	/* A is fenced: no heartbeat, no listing, whatever version it holds */
	assert_int_equal(px_lease_heartbeat(la, &a), PX_EFENCED);
	assert_int_equal(px_tcstore_pl_put(sa, "movie", a.gen, v1, t1, strlen(t1), &nv),
			 PX_EFENCED);
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(px_tcstore_pl_get(sb, "movie", &text, &len, &ver), PX_OK);
	assert_int_equal(ver, v1);
	assert_string_equal(text, t1);
	free(text);
	const char *t2 = "#SEAMFS-PLAYLIST 1\n#SEGMENT-BYTES 0\n#SEGMENTS 3\n0 188 1 1\n"
			 "1 188 2 2\n";
	assert_int_equal(px_tcstore_pl_put(sb, "movie", b.gen, v1, t2, strlen(t2), &nv), PX_OK);
	assert_true(nv > v1);
	/* the poll sees both */
	assert_int_equal(px_tcstore_poll(sa, "movie", &ver, &got), PX_OK);
	assert_int_equal(ver, nv);
	assert_int_equal(got.gen, b.gen);
	assert_string_equal(got.owner, "hostB:2:bb");
	/* released: claimable at once by anyone */
	assert_int_equal(px_lease_release(lb, &b), PX_OK);
	assert_int_equal(px_lease_claim(la, "movie", "hostA:1:aa", 60000, &a), PX_OK);
	assert_true(a.gen > b.gen);
	assert_int_equal(px_lease_drop(la, "movie"), PX_OK);
	assert_int_equal(px_tcstore_pl_get(sb, "movie", &text, &len, &ver), PX_ENOTFOUND);
	px_lease_store_free(la);
	px_lease_store_free(lb);
	px_store_free(sa);
	px_store_free(sb);
}

/* Redis restarted empty: the holder's renewal puts its lease back, and a
 * new claim of the empty key never reuses a generation given before. */
static void test_store_lost_data(void **state)
{
	struct px_store *s = store_new("unit");
	struct px_lease_store *ls = NULL;
	struct px_lease l, got;
	(void)state;
	flush(s);
	assert_int_equal(px_lease_redis_new(s, &ls), PX_OK);
	assert_int_equal(px_lease_claim(ls, "ep1", "h:1:x", 60000, &l), PX_OK);
	uint64_t g1 = l.gen;
	flush(s);
	assert_int_equal(px_lease_heartbeat(ls, &l), PX_OK);
	assert_int_equal(px_lease_get(ls, "ep1", &got), PX_OK);
	assert_int_equal(got.gen, g1);
	flush(s);
	sleep_ms(3);
	assert_int_equal(px_lease_claim(ls, "ep1", "h:2:y", 60000, &got), PX_OK);
	assert_true(got.gen > g1);
	/* the old holder is fenced by the new generation */
	assert_int_equal(px_lease_heartbeat(ls, &l), PX_EFENCED);
	px_lease_store_free(ls);
	px_store_free(s);
}

/* A failover to a replica that missed the last claims rolls the stored
 * generation back: the next claim must not hand out again a generation
 * the old master gave (two writers would then share one, and their
 * segment files one name). Played on one Redis by writing the older
 * generation back, as the replica would have it. */
static void test_generation_after_rollback(void **state)
{
	struct px_store *sa = store_new("unit"), *sb = store_new("unit");
	struct px_lease_store *la = NULL, *lb = NULL;
	struct px_lease a, b, c;
	char lk[256];
	(void)state;
	flush(sa);
	assert_int_equal(px_lease_redis_new(sa, &la), PX_OK);
	assert_int_equal(px_lease_redis_new(sb, &lb), PX_OK);
	assert_int_equal(px_lease_claim(la, "ep", "hostA:1:aa", 60000, &a), PX_OK);
	/* B takes it over: generation g2, which the replica never got */
	assert_int_equal(px_lease_claim(lb, "ep", "hostB:2:bb", -1000, &b), PX_OK);
	assert_true(b.gen > a.gen);
	assert_true(px_store_key(sa, lk, sizeof(lk), "tc:{ep}:lease") > 0);
	char ga[32];
	snprintf(ga, sizeof(ga), "%llu", (unsigned long long)a.gen);
	const char *argv[] = { "HSET", lk, "gen", ga, "owner", "hostA:1:aa", "hb", "0" };
	assert_int_equal(px_store_call(sa, 8, argv, NULL, NULL), PX_OK);
	/* A host claims the orphan the new master shows: never B's generation.
	 * A failover takes at least the sentinels' down-after (a second or
	 * so); a few ms stand for it here: the store's clock moved on. */
	sleep_ms(5);
	assert_int_equal(px_lease_claim(la, "ep", "hostA:1:aa", -1000, &c), PX_OK);
	assert_true(c.gen > b.gen);
	/* B, whose generation the store no longer has, is fenced */
	assert_int_equal(px_lease_heartbeat(lb, &b), PX_EFENCED);
	/* a claimant's floor: the highest generation it saw, whatever the clock */
	px_store_note_gen(sb, c.gen + 5000000);
	assert_int_equal(px_lease_release(la, &c), PX_OK);
	assert_int_equal(px_lease_claim(lb, "ep", "hostB:2:bb", 60000, &b), PX_OK);
	assert_true(b.gen > c.gen + 5000000);
	/* no replica: the fencing writes are not counted as unacknowledged */
	struct px_store_state ss;
	px_store_state(sa, &ss);
	assert_int_equal(ss.replicas, 0);
	assert_int_equal(ss.unacked, 0);
	assert_int_equal(ss.sentinels, 0);
	assert_non_null(strstr(ss.master, "127.0.0.1:"));
	px_lease_store_free(la);
	px_lease_store_free(lb);
	px_store_free(sa);
	px_store_free(sb);
}

/* Far reads of other hosts (px_tcstore_want_*): left only while a live
 * lease is stored, taken (and gone) only by the lease's generation, with a
 * TTL on the key. */
static void test_wants(void **state)
{
	struct px_store *sa = store_new("unit"), *sb = store_new("unit");
	struct px_lease_store *la = NULL;
	struct px_lease a;
	struct px_tc_want w = { .seg = 21, .last = 22, .settled = 1 }, out[4];
	size_t n = 9;
	(void)state;
	flush(sa);
	snprintf(w.from, sizeof(w.from), "hostB:2:bb");
	/* no lease: nobody to ask */
	assert_int_equal(px_tcstore_want_put(sb, "movie", &w, 2000), PX_ENOTFOUND);
	assert_int_equal(px_lease_redis_new(sa, &la), PX_OK);
	assert_int_equal(px_lease_claim(la, "movie", "hostA:1:aa", 60000, &a), PX_OK);
	assert_int_equal(px_tcstore_want_put(sb, "movie", &w, 2000), PX_OK);
	w.seg = 3;
	w.last = 1;   /* a last before seg is taken as seg */
	w.settled = 0;
	assert_int_equal(px_tcstore_want_put(sb, "movie", &w, 2000), PX_OK);
	/* the key expires */
	struct px_reply *r = NULL;
	const char *ttl[] = { "PTTL", "unit:tc:{movie}:want" };
	assert_int_equal(px_store_call(sa, 2, ttl, NULL, &r), PX_OK);
	assert_true(r->integer > 0 && r->integer <= 2000);
	px_reply_free(r);
	/* another generation takes nothing, and leaves them */
	assert_int_equal(px_tcstore_want_take(sa, "movie", a.gen + 1, out, 4, &n), PX_OK);
	assert_int_equal(n, 0);
	assert_int_equal(px_tcstore_want_take(sa, "movie", a.gen, out, 4, &n), PX_OK);
	assert_int_equal(n, 2);
	if (out[0].seg != 21) {
		struct px_tc_want t = out[0];
		out[0] = out[1];
		out[1] = t;
	}
	assert_int_equal(out[0].seg, 21);
	assert_int_equal(out[0].last, 22);
	assert_int_equal(out[0].settled, 1);
	assert_string_equal(out[0].from, "hostB:2:bb");
	assert_true(out[0].at_ms > 1000000000000LL);
	assert_int_equal(out[1].seg, 3);
	assert_int_equal(out[1].last, 3);
	assert_int_equal(out[1].settled, 0);
	/* taken: gone */
	assert_int_equal(px_tcstore_want_take(sa, "movie", a.gen, out, 4, &n), PX_OK);
	assert_int_equal(n, 0);
	/* a malformed entry is skipped, not a crash */
	const char *bad[] = { "HSET", "unit:tc:{movie}:want", "x@y", "z" };
	assert_int_equal(px_store_call(sa, 4, bad, NULL, NULL), PX_OK);
	assert_int_equal(px_tcstore_want_take(sa, "movie", a.gen, out, 4, &n), PX_OK);
	assert_int_equal(n, 0);
	/* released: nobody to ask */
	assert_int_equal(px_lease_release(la, &a), PX_OK);
	assert_int_equal(px_tcstore_want_put(sb, "movie", &w, 2000), PX_ENOTFOUND);
	px_lease_store_free(la);
	px_store_free(sa);
	px_store_free(sb);
}

static void test_hosts(void **state)
{
	struct px_store *s1 = store_new("unit"), *s2 = store_new("unit");
	struct px_hosts *h1 = NULL, *h2 = NULL, *dup = NULL;
	char err[512];
	(void)state;
	flush(s1);
	assert_int_equal(px_hosts_join(s1, "one", 100, &h1, err, sizeof(err)), PX_OK);
	/* the same id while its holder lives (this very process): refused */
	assert_int_equal(px_hosts_join(s2, "one", 100, &dup, err, sizeof(err)), PX_EEXIST);
	assert_non_null(strstr(err, "host_id one is already registered"));
	assert_non_null(strstr(err, g_url));
	assert_int_equal(px_hosts_join(s2, "two", 100, &h2, err, sizeof(err)), PX_OK);
	assert_int_equal(px_hosts_start(h1), PX_OK);
	assert_int_equal(px_hosts_start(h2), PX_OK);
	struct px_host_info list[PX_HOSTS_MAX];
	size_t n = 0;
	for (int i = 0; i < 100 && n != 2; i++) {
		sleep_ms(20);
		n = px_hosts_list(h1, list, PX_HOSTS_MAX);
	}
	assert_int_equal(n, 2);
	assert_string_equal(list[0].id, "one");
	assert_true(list[0].self);
	assert_string_equal(list[1].id, "two");
	assert_false(list[1].self);
	assert_int_equal(list[1].pid, getpid());
	assert_true(list[1].age_ms >= 0 && list[1].age_ms < 1000);
	/* the store loses everything: both are back within a heartbeat or two */
	flush(s1);
	const char *ex[] = { "EXISTS", "unit:host:one", "unit:host:two" };
	struct px_reply *r = NULL;
	long long back = 0;
	for (int i = 0; i < 100 && back != 2; i++) {
		sleep_ms(20);
		assert_int_equal(px_store_call(s1, 3, ex, NULL, &r), PX_OK);
		back = r->integer;
		px_reply_free(r);
	}
	assert_int_equal(back, 2);
	px_hosts_free(h2);
	assert_int_equal(key_exists(s1, "unit:host:two"), 0);
	/* a host that left stays readable until freed: the daemon's core
	 * threads (copies, slots) read the list until the core is freed,
	 * after the heartbeat stopped (ASan found one reading freed memory
	 * at a daemon's exit); it answers the last list, and leaves once */
	px_hosts_leave(h1);
	assert_true(px_hosts_list(h1, list, PX_HOSTS_MAX) >= 1);
	assert_string_equal(px_hosts_self(h1), "one");
	px_hosts_leave(h1);
	assert_int_equal(key_exists(s1, "unit:host:one"), 0);
	px_hosts_free(h1);
	px_store_free(s1);
	px_store_free(s2);
}

/* A daemon killed with -9 whose process is a zombie not reaped yet (its
 * parent, a keeper, died with it and init has not got to it): the next
 * daemon of that host_id on this machine is let in at once, as for a pid
 * that is gone; kill(pid, 0) alone took the zombie for a live holder. */
static void test_host_zombie_holder(void **state)
{
	struct px_store *s = store_new("unit");
	struct px_hosts *h = NULL;
	char err[512], path[64], stat[512] = "";
	(void)state;
	flush(s);
	pid_t child = fork();
	if (child == 0) {
		struct px_store *cs = NULL;
		struct px_hosts *ch = NULL;
		if (px_store_new(g_url, NULL, "unit", &cs, err, sizeof(err)) != PX_OK ||
		    px_store_connect(cs, err, sizeof(err)) != PX_OK ||
		    px_hosts_join(cs, "zed", 10000, &ch, err, sizeof(err)) != PX_OK)
			_exit(1);
		_exit(0); /* registered, never left: as a kill -9 */
	}
	assert_true(child > 0);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen(path, "r");
		stat[0] = '\0';
		if (f) {
			if (!fgets(stat, sizeof(stat), f))
				stat[0] = '\0';
			fclose(f);
		}
		char *p = strrchr(stat, ')');
		if (p && p[2] == 'Z')
			break;
		sleep_ms(10);
	}
	char *p = strrchr(stat, ')');
	assert_non_null(p);
	assert_int_equal(p[2], 'Z');
	assert_int_equal(px_hosts_join(s, "zed", 10000, &h, err, sizeof(err)), PX_OK);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	px_hosts_free(h);
	px_store_free(s);
}

/* Host id registered with a heartbeat age_ms ago (by Redis's clock) and
 * this load, as hosts.c's heartbeat writes it. */
static void put_host(struct px_store *s, const char *id, long long age_ms, int writers,
		     int wmax, long long wcost, long long cpu)
{
	static const char SCRIPT[] =
		"local t = redis.call('TIME')\n"
		"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
		"redis.call('HSET', KEYS[1], 'seen', now - tonumber(ARGV[1]), 'writers', ARGV[2],\n"
		"  'wmax', ARGV[3], 'wcost', ARGV[4], 'cpu', ARGV[5], 'placed', 0, 'placedn', 0)\n"
		"redis.call('SADD', KEYS[2], ARGV[6])\n"
		"return 1\n";
	char key[128], a[5][24];
	snprintf(key, sizeof(key), "unit:host:%s", id);
	snprintf(a[0], 24, "%lld", age_ms);
	snprintf(a[1], 24, "%d", writers);
	snprintf(a[2], 24, "%d", wmax);
	snprintf(a[3], 24, "%lld", wcost);
	snprintf(a[4], 24, "%lld", cpu);
	const char *keys[] = { key, "unit:hosts" };
	const char *args[] = { a[0], a[1], a[2], a[3], a[4], id };
	assert_int_equal(px_store_eval(s, SCRIPT, 2, keys, 6, args, NULL), PX_OK);
}

static uint64_t g_place_gen; /* the last placement's lease generation */

/* Places asset for self; returns the host chosen ("" none), *fresh. */
static const char *place(struct px_store *s, const char *asset, const char *self,
			 int not_self, int *fresh)
{
	static char host[PX_PLACE_HOST_MAX + 1];
	uint64_t gen;
	struct px_place_req req = { .asset = asset, .self = self, .from = 7, .cost = 1000,
		.crashes = not_self, .not_self = not_self, .live_ms = 1000, .hold_ms = 5000,
		.orphan_ms = 3000 };
	assert_int_equal(px_place_choose(s, &req, host, sizeof(host), fresh, &gen), PX_OK);
	g_place_gen = gen;
	return host;
}

/* The placement rule (docs/cluster.md "Where a transcode is written"):
 * lowest load, ties by id, a burst spread by the placements' own cost, a
 * host at its max or with an old heartbeat left out, a reassignment to
 * another host first, one answer per asset within the hold, none while a
 * live lease holds it; and the chosen host's take. */
static void test_place(void **state)
{
	struct px_store *s = store_new("unit");
	int fresh = 0;
	(void)state;
	flush(s);
	/* equal loads: by id; each placement counts at once, so a burst of
	 * four alternates */
	put_host(s, "beta", 0, 0, 4, 0, 300);
	put_host(s, "alpha", 0, 0, 4, 0, 300);
	const char *want[] = { "alpha", "beta", "alpha", "beta" };
	for (int i = 0; i < 4; i++) {
		char asset[16];
		snprintf(asset, sizeof(asset), "a%d", i);
		assert_string_equal(place(s, asset, "alpha", 0, &fresh), want[i]);
		assert_true(fresh);
	}
	/* the same asset again within the hold: the same host, not counted */
	assert_string_equal(place(s, "a1", "alpha", 0, &fresh), "beta");
	assert_false(fresh);
	/* beta's queue: the jobs alpha placed there, taken once */
	struct px_place_job q[8];
	size_t n = 0;
	assert_int_equal(px_place_take(s, "beta", q, 8, &n), PX_OK);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_true(strcmp(q[i].asset, "a1") == 0 || strcmp(q[i].asset, "a3") == 0);
		assert_int_equal(q[i].from, 7);
		assert_string_equal(q[i].by, "alpha");
		assert_true(q[i].age_ms >= 0 && q[i].age_ms < 5000);
	}
	assert_int_equal(px_place_take(s, "beta", q, 8, &n), PX_OK);
	assert_int_equal(n, 0);
	/* taken: the marker went, so the next placement of a1 chooses anew */
	flush(s);
	/* lower load wins over the id; a host at its max or not beating is
	 * left out; the cpu counts */
	put_host(s, "alpha", 0, 1, 4, 1000, 300);
	put_host(s, "beta", 0, 0, 4, 0, 800);
	put_host(s, "gamma", 0, 2, 2, 0, 0);    /* at its max */
	put_host(s, "delta", 5000, 0, 4, 0, 0); /* heartbeat too old */
	put_host(s, "old", 0, 0, 0, 0, 0);      /* takes no placements */
	assert_string_equal(place(s, "b0", "alpha", 0, &fresh), "beta");
	/* a reassignment: another host first, though this one is lighter */
	flush(s);
	put_host(s, "alpha", 0, 0, 4, 0, 0);
	put_host(s, "beta", 0, 1, 4, 2000, 0);
	assert_string_equal(place(s, "c0", "alpha", 1, &fresh), "beta");
	assert_int_equal(px_place_take(s, "beta", q, 8, &n), PX_OK);
	assert_int_equal(n, 1);
	assert_int_equal(q[0].crashes, 1);
	/* ... and none when no other host has a slot: it restarts where it was */
	put_host(s, "beta", 0, 4, 4, 4000, 0);
	assert_string_equal(place(s, "c1", "alpha", 1, &fresh), "");
	/* nobody has a slot: "" (the writer starts where its read is) */
	put_host(s, "alpha", 0, 4, 4, 4000, 0);
	assert_string_equal(place(s, "c2", "alpha", 0, &fresh), "");
	assert_true(fresh);
	/* a live lease: its holder writes, nothing is placed */
	put_host(s, "alpha", 0, 0, 4, 0, 0);
	const char *hs[] = { "EVAL", "local t = redis.call('TIME')\n"
		"redis.call('HSET', KEYS[1], 'gen', '5', 'hb', tonumber(t[1]) * 1000, "
		"'released', '0')\nreturn 1", "1", "unit:tc:{d0}:lease" };
	assert_int_equal(px_store_call(s, 4, hs, NULL, NULL), PX_OK);
	assert_string_equal(place(s, "d0", "alpha", 0, &fresh), "");
	assert_false(fresh);
	assert_int_equal(g_place_gen, 5);
	/* released: placed, with the generation it found */
	const char *rel[] = { "HSET", "unit:tc:{d0}:lease", "released", "1" };
	assert_int_equal(px_store_call(s, 4, rel, NULL, NULL), PX_OK);
	assert_string_equal(place(s, "d0", "alpha", 0, &fresh), "alpha");
	assert_true(fresh);
	assert_int_equal(g_place_gen, 5);
	/* the profiles' costs */
	struct px_asset a = { .kind = PX_ASSET_REMUX };
	assert_int_equal(px_place_cost(&a), 200);
	a.kind = PX_ASSET_TRANSCODE;
	assert_int_equal(px_place_cost(&a), 1000);
	a.height = 720;
	assert_int_equal(px_place_cost(&a), 1000);
	a.height = 1080;
	assert_int_equal(px_place_cost(&a), 2250);
	a.height = 180;
	assert_int_equal(px_place_cost(&a), 250);
	px_store_free(s);
}

/* Redis gone: calls fail, then fail at once during the backoff (no
 * waiting on a dead store), the state says why; Redis back: calls work
 * again after the backoff. */
static void test_degraded(void **state)
{
	struct px_store *s = store_new("unit");
	(void)state;
	const char *ping[] = { "PING" };
	assert_int_equal(px_store_call(s, 1, ping, NULL, NULL), PX_OK);
	int port = g_port;
	redis_stop();
	assert_int_not_equal(px_store_call(s, 1, ping, NULL, NULL), PX_OK);
	int64_t t0 = px_now_ms();
	for (int i = 0; i < 10; i++)
		assert_int_equal(px_store_call(s, 1, ping, NULL, NULL), PX_ECONNECT);
	assert_true(px_now_ms() - t0 < 100);
	struct px_store_state st;
	px_store_state(s, &st);
	assert_false(st.connected);
	assert_true(st.last_error[0] != '\0');
	assert_false(px_store_up(s));
	assert_int_equal(redis_start(port), 0);
	enum px_status r = PX_ECONNECT;
	for (int i = 0; i < 100 && r != PX_OK; i++) {
		sleep_ms(50);
		r = px_store_call(s, 1, ping, NULL, NULL);
	}
	assert_int_equal(r, PX_OK);
	assert_true(px_store_up(s));
	px_store_free(s);
}

/* ---- one sentinel that names the test's Redis as master "seam" */

static pid_t g_sentinel;
static int g_sentinel_port;
static char g_sentinel_dir[64];

static int sentinel_setup(void **state)
{
	char conf[128];
	pid_t parent = getpid();
	(void)state;
	snprintf(g_sentinel_dir, sizeof(g_sentinel_dir), "/tmp/seamfs-sentinel-XXXXXX");
	if (!mkdtemp(g_sentinel_dir))
		return -1;
	snprintf(conf, sizeof(conf), "%s/sentinel.conf", g_sentinel_dir);
	for (int attempt = 0; attempt < 5; attempt++) {
		int p = free_port();
		FILE *f = fopen(conf, "w");
		if (!f)
			return -1;
		fprintf(f, "port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor seam 127.0.0.1 %d 1\n"
			"sentinel down-after-milliseconds seam 60000\n", p, g_sentinel_dir, g_port);
		fclose(f);
		pid_t pid = fork();
		if (pid == 0) {
			child_setup(parent);
			execlp("redis-server", "redis-server", conf, "--sentinel", (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 200; i++) {
			if (can_connect(p)) {
				g_sentinel = pid;
				g_sentinel_port = p;
				return 0;
			}
			if (waitpid(pid, NULL, WNOHANG) == pid)
				break;
			sleep_ms(25);
		}
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return -1;
}

static int sentinel_teardown(void **state)
{
	char path[128];
	(void)state;
	if (g_sentinel > 0) {
		kill(g_sentinel, SIGKILL);
		waitpid(g_sentinel, NULL, 0);
	}
	g_sentinel = 0;
	snprintf(path, sizeof(path), "%s/sentinel.conf", g_sentinel_dir);
	unlink(path);
	rmdir(g_sentinel_dir);
	return 0;
}

/* Behind a sentinel: the store connects to the master it names (the
 * status says which, and whose), a name it does not know is an error
 * naming it, and a renewal that finds no lease stored (a failover lost
 * the claim) fences its holder instead of putting the lease back. */
static void test_sentinel_store(void **state)
{
	struct px_store *s = NULL, *plain = store_new("unit");
	struct px_lease_store *ls = NULL;
	struct px_lease l;
	struct px_store_state ss;
	char url[160], err[1024], lk[256], want[64];
	(void)state;
	flush(plain);
	/* a dead sentinel first: the next one answers */
	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d+127.0.0.1:%d/seam", free_port(),
		 g_sentinel_port);
	assert_int_equal(px_store_new(url, NULL, "unit", &s, err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_connect(s, err, sizeof(err)), PX_OK);
	assert_true(px_store_sentinel(s));
	px_store_state(s, &ss);
	snprintf(want, sizeof(want), "127.0.0.1:%d", g_port);
	assert_string_equal(ss.master, want);
	assert_string_equal(ss.master_name, "seam");
	assert_int_equal(ss.sentinels, 2);
	assert_int_equal(ss.failovers, 0);
	assert_int_equal(ss.failover_wall_ms, 0);
	assert_int_equal(px_lease_redis_new(s, &ls), PX_OK);
	assert_int_equal(px_lease_claim(ls, "ep", "h:1:x", 60000, &l), PX_OK);
	assert_int_equal(px_lease_heartbeat(ls, &l), PX_OK);
	assert_true(px_store_key(s, lk, sizeof(lk), "tc:{ep}:lease") > 0);
	const char *del[] = { "DEL", lk };
	assert_int_equal(px_store_call(plain, 2, del, NULL, NULL), PX_OK);
	assert_int_equal(px_lease_heartbeat(ls, &l), PX_EFENCED);
	assert_int_equal(key_exists(plain, lk), 0);
	px_lease_store_free(ls);
	px_store_free(s);
	/* a master the sentinel does not know */
	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/other", g_sentinel_port);
	assert_int_equal(px_store_new(url, NULL, NULL, &s, err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_connect(s, err, sizeof(err)), PX_ENOTFOUND);
	assert_non_null(strstr(err, url));
	assert_non_null(strstr(err, "does not know a master named other"));
	px_store_free(s);
	px_store_free(plain);
}

/* ---- a fake sentinel: names a master, and announces a switch on demand */

struct fake_sentinel {
	int lfd, port;
	int master_port;          /* what get-master-addr-by-name answers */
	int sub_fd;               /* the subscriber, -1: none */
	int fds[8];
	pthread_mutex_t lock;
	pthread_t th;
	atomic_int stop;
};

static void fake_answer(struct fake_sentinel *f, int fd, const char *in)
{
	static const char *const chans[] = { "+failover-state-send-slaveof-noone",
					     "+promoted-slave", "+switch-master" };
	char out[512];
	pthread_mutex_lock(&f->lock);
	if (strstr(in, "get-master-addr-by-name")) {
		char port[16];
		snprintf(port, sizeof(port), "%d", f->master_port);
		snprintf(out, sizeof(out), "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n", strlen(port),
			 port);
	} else if (strstr(in, "SUBSCRIBE")) {
		/* one confirmation a channel, as a sentinel sends them */
		size_t n = 0;
		for (int i = 0; i < 3; i++)
			n += (size_t)snprintf(out + n, sizeof(out) - n,
					      "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:%d\r\n",
					      strlen(chans[i]), chans[i], i + 1);
		f->sub_fd = fd;
	} else {
		snprintf(out, sizeof(out), "-ERR not this fake's\r\n");
	}
	pthread_mutex_unlock(&f->lock);
	(void)!write(fd, out, strlen(out));
}

static void *fake_main(void *arg)
{
	struct fake_sentinel *f = arg;
	while (!atomic_load(&f->stop)) {
		struct pollfd pf[9] = { { f->lfd, POLLIN, 0 } };
		for (int i = 0; i < 8; i++)
			pf[i + 1] = (struct pollfd){ f->fds[i], POLLIN, 0 };
		if (poll(pf, 9, 50) <= 0)
			continue;
		if (pf[0].revents) {
			int c = accept(f->lfd, NULL, NULL);
			for (int i = 0; c >= 0 && i < 8; i++)
				if (f->fds[i] < 0) {
					f->fds[i] = c;
					c = -1;
				}
			if (c >= 0)
				close(c);
		}
		for (int i = 0; i < 8; i++) {
			char in[512];
			ssize_t n;
			if (f->fds[i] < 0 || !pf[i + 1].revents)
				continue;
			if ((n = read(f->fds[i], in, sizeof(in) - 1)) > 0) {
				in[n] = '\0';
				fake_answer(f, f->fds[i], in);
				continue;
			}
			pthread_mutex_lock(&f->lock);
			if (f->sub_fd == f->fds[i])
				f->sub_fd = -1;
			pthread_mutex_unlock(&f->lock);
			close(f->fds[i]);
			f->fds[i] = -1;
		}
	}
	return NULL;
}

static void fake_start(struct fake_sentinel *f, int master_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	memset(f, 0, sizeof(*f));
	f->master_port = master_port;
	f->sub_fd = -1;
	for (int i = 0; i < 8; i++)
		f->fds[i] = -1;
	pthread_mutex_init(&f->lock, NULL);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 8), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sa, &len), 0);
	f->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake_sentinel *f)
{
	atomic_store(&f->stop, 1);
	pthread_join(f->th, NULL);
	for (int i = 0; i < 8; i++)
		if (f->fds[i] >= 0)
			close(f->fds[i]);
	close(f->lfd);
	pthread_mutex_destroy(&f->lock);
}

/* msg on channel, to the subscriber. */
static void fake_publish(struct fake_sentinel *f, const char *channel, const char *msg)
{
	char out[320];
	snprintf(out, sizeof(out), "*3\r\n$7\r\nmessage\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
		 strlen(channel), channel, strlen(msg), msg);
	pthread_mutex_lock(&f->lock);
	assert_true(f->sub_fd >= 0);
	assert_int_equal(write(f->sub_fd, out, strlen(out)), (ssize_t)strlen(out));
	pthread_mutex_unlock(&f->lock);
}

/* What a sentinel publishes when it switches: "seam 127.0.0.1 FROM 127.0.0.1 TO". */
static void fake_announce(struct fake_sentinel *f, int from, int to)
{
	char msg[96];
	snprintf(msg, sizeof(msg), "seam 127.0.0.1 %d 127.0.0.1 %d", from, to);
	fake_publish(f, "+switch-master", msg);
}

/* What the leader publishes of the replica at port it promotes (on
 * channel) while the master was at from. */
static void fake_promote(struct fake_sentinel *f, const char *channel, int port, int from)
{
	char msg[128];
	snprintf(msg, sizeof(msg), "slave 127.0.0.1:%d 127.0.0.1 %d @ seam 127.0.0.1 %d", port,
		 port, from);
	fake_publish(f, channel, msg);
}

/* The sentinels' +switch-master announcement moves the store at once: a
 * connected store to the announced master at its next call (without it,
 * ROLE there still says master and it would stay); a store retrying a
 * dead master to the announced one without waiting for its backoff, and
 * there although the sentinel it asks still names the dead one (only the
 * announcement says where); px_store_wait wakes on the announcement and
 * sleeps its time without one; a watch whose sentinel went away is made
 * again. Two real Redis play the old and the new master. */
static void test_sentinel_announcement(void **state)
{
	struct fake_sentinel f;
	struct px_store *s = NULL;
	struct px_store_state ss;
	char url[96], err[512], want[64];
	const char *ping[] = { "PING" };
	(void)state;
	int a_port = g_port;
	pid_t a_pid = g_redis;
	assert_int_equal(redis_start(0), 0); /* b: a second Redis */
	int b_port = g_port;
	pid_t b_pid = g_redis;
	g_redis = a_pid;
	g_port = a_port;
	snprintf(g_url, sizeof(g_url), "redis://127.0.0.1:%d", a_port);

	fake_start(&f, a_port);
	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/seam", f.port);
	assert_int_equal(px_store_new(url, NULL, "unit", &s, err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_connect(s, err, sizeof(err)), PX_OK);
	px_store_state(s, &ss);
	snprintf(want, sizeof(want), "127.0.0.1:%d", f.port);
	assert_string_equal(ss.watching, want);
	assert_int_equal(ss.announced, 0);

	/* connected: the announcement moves the next call to b */
	fake_announce(&f, a_port, b_port);
	assert_int_equal(px_store_call(s, 1, ping, NULL, NULL), PX_OK);
	px_store_state(s, &ss);
	snprintf(want, sizeof(want), "127.0.0.1:%d", b_port);
	assert_string_equal(ss.master, want);
	assert_int_equal(ss.failovers, 1);
	assert_true(ss.failover_announced);
	assert_int_equal(ss.announced, 1);

	/* without an announcement px_store_wait sleeps its time */
	int64_t t0 = px_now_ms();
	px_store_wait(s, 300);
	assert_true(px_now_ms() - t0 >= 250);

	/* b dies; the sentinel it asks still names b: calls fail, at once */
	kill(b_pid, SIGKILL);
	waitpid(b_pid, NULL, 0);
	pthread_mutex_lock(&f.lock);
	f.master_port = b_port;
	pthread_mutex_unlock(&f.lock);
	assert_int_not_equal(px_store_call(s, 1, ping, NULL, NULL), PX_OK);
	assert_int_equal(px_store_call(s, 1, ping, NULL, NULL), PX_ECONNECT);
	/* the announcement of a: the wait ends, and the next call is there */
	fake_announce(&f, b_port, a_port);
	t0 = px_now_ms();
	px_store_wait(s, 10000);
	assert_true(px_now_ms() - t0 < 5000);
	assert_int_equal(px_store_call(s, 1, ping, NULL, NULL), PX_OK);
	px_store_state(s, &ss);
	snprintf(want, sizeof(want), "127.0.0.1:%d", a_port);
	assert_string_equal(ss.master, want);
	assert_int_equal(ss.failovers, 2);
	assert_true(ss.failover_announced);
	assert_int_equal(ss.announced, 2);

	/* the watch's connection goes: a call notices, the next makes it again */
	pthread_mutex_lock(&f.lock);
	f.master_port = a_port;
	shutdown(f.sub_fd, SHUT_RDWR);
	pthread_mutex_unlock(&f.lock);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(px_store_call(s, 1, ping, NULL, NULL), PX_OK);
		px_store_state(s, &ss);
		if (!ss.watching[0])
			break;
		sleep_ms(20);
	}
	assert_string_equal(ss.watching, "");
	assert_int_equal(px_store_call(s, 1, ping, NULL, NULL), PX_OK);
	px_store_state(s, &ss);
	snprintf(want, sizeof(want), "127.0.0.1:%d", f.port);
	assert_string_equal(ss.watching, want);
	px_store_free(s);
	fake_stop(&f);
}

/* REPLICAOF on the Redis at port: of nothing that answers (ROLE says
 * slave, nothing is copied), or NO ONE (it is a master). */
static void replica_of(int port, int replica)
{
	struct px_store *p = NULL;
	char url[64], err[512], dead[16];
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	snprintf(dead, sizeof(dead), "%d", free_port());
	const char *argv[] = { "REPLICAOF", replica ? "127.0.0.1" : "NO",
			       replica ? dead : "ONE" };
	assert_int_equal(px_store_new(url, NULL, "unit", &p, err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_call(p, 3, argv, NULL, NULL), PX_OK);
	px_store_free(p);
}

/* Calls (and px_store_wait of 500 ms between them) for ms: whether the
 * store ended up on the Redis at port. */
static int follows_to(struct px_store *s, int port, int ms)
{
	struct px_store_state ss;
	char want[64];
	const char *ping[] = { "PING" };
	snprintf(want, sizeof(want), "127.0.0.1:%d", port);
	for (int64_t end = px_now_ms() + ms;;) {
		(void)!px_store_call(s, 1, ping, NULL, NULL);
		px_store_state(s, &ss);
		if (strcmp(ss.master, want) == 0 || px_now_ms() >= end)
			return strcmp(ss.master, want) == 0;
		px_store_wait(s, 500);
	}
}

/* The leader sentinel's naming of the replica it promotes, heard from
 * the second of two sentinels (the leader may be any): the store asks
 * that replica's ROLE and stays where it is while it says slave, then
 * moves to it once it says master, within a few of the 50 ms steps
 * (px_store_wait ends at each: a wait of 500 ms does not delay it), before
 * any +switch-master. The same on +promoted-slave from the first one,
 * back to a. Real Redis play the old master and the replica; neither
 * sentinel ever names the replica (only the promotion says where). */
static void test_sentinel_promotion(void **state)
{
	struct fake_sentinel f1, f2;
	struct px_store *s = NULL;
	struct px_store_state ss;
	char url[128], err[512];
	(void)state;
	int a_port = g_port;
	pid_t a_pid = g_redis;
	assert_int_equal(redis_start(0), 0); /* b: the replica */
	int b_port = g_port;
	pid_t b_pid = g_redis;
	g_redis = a_pid;
	g_port = a_port;
	snprintf(g_url, sizeof(g_url), "redis://127.0.0.1:%d", a_port);
	replica_of(b_port, 1);

	fake_start(&f1, a_port);
	fake_start(&f2, a_port);
	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d+127.0.0.1:%d/seam", f1.port,
		 f2.port);
	assert_int_equal(px_store_new(url, NULL, "unit", &s, err, sizeof(err)), PX_OK);
	assert_int_equal(px_store_connect(s, err, sizeof(err)), PX_OK);
	/* a watch on each sentinel, one a call */
	for (int i = 0; i < 100; i++) {
		pthread_mutex_lock(&f2.lock);
		int sub = f2.sub_fd;
		pthread_mutex_unlock(&f2.lock);
		if (sub >= 0)
			break;
		(void)follows_to(s, a_port, 0);
		sleep_ms(10);
	}
	assert_true(follows_to(s, a_port, 0));

	/* f2 leads: b is still a replica, so the store stays on a */
	fake_promote(&f2, "+failover-state-send-slaveof-noone", b_port, a_port);
	assert_false(follows_to(s, b_port, 400));
	px_store_state(s, &ss);
	assert_int_equal(ss.failovers, 0);
	assert_true(ss.connected);
	/* b becomes a master: the store is there at its next ROLE */
	replica_of(b_port, 0);
	int64_t t0 = px_now_ms();
	assert_true(follows_to(s, b_port, 1000));
	assert_true(px_now_ms() - t0 < 450); /* not the wait's 500 ms */
	px_store_state(s, &ss);
	assert_int_equal(ss.failovers, 1);
	assert_true(ss.failover_announced);
	assert_int_equal(ss.announced, 0);

	/* f1 leads, back to a, heard on +promoted-slave */
	replica_of(a_port, 1);
	fake_promote(&f1, "+promoted-slave", a_port, b_port);
	assert_false(follows_to(s, a_port, 300));
	replica_of(a_port, 0);
	assert_true(follows_to(s, a_port, 1000));
	px_store_state(s, &ss);
	assert_int_equal(ss.failovers, 2);
	/* the switch every sentinel then announces is counted once */
	fake_announce(&f1, b_port, a_port);
	fake_announce(&f2, b_port, a_port);
	assert_true(follows_to(s, a_port, 100));
	px_store_state(s, &ss);
	assert_int_equal(ss.announced, 1);
	assert_int_equal(ss.failovers, 2);

	px_store_free(s);
	fake_stop(&f1);
	fake_stop(&f2);
	kill(b_pid, SIGKILL);
	waitpid(b_pid, NULL, 0);
}

/* Nothing listens: connect fails at once with a message naming the store. */
static void test_unreachable(void **state)
{
	struct px_store *s = NULL;
	char err[512], url[64];
	(void)state;
	int port = free_port();
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	assert_int_equal(px_store_new(url, NULL, NULL, &s, err, sizeof(err)), PX_OK);
	int64_t t0 = px_now_ms();
	assert_int_equal(px_store_connect(s, err, sizeof(err)), PX_ECONNECT);
	assert_true(px_now_ms() - t0 < PX_STORE_CONNECT_MS + 500);
	assert_non_null(strstr(err, url));
	px_store_free(s);
	/* a password file that is not there */
	assert_int_equal(px_store_new(url, "/nonexistent/pw", NULL, &s, err, sizeof(err)), PX_EIO);
	assert_non_null(strstr(err, "/nonexistent/pw"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checks),
		cmocka_unit_test(test_calls_and_keys),
		cmocka_unit_test(test_lease_cas_and_fencing),
		cmocka_unit_test(test_store_lost_data),
		cmocka_unit_test(test_generation_after_rollback),
		cmocka_unit_test(test_wants),
		cmocka_unit_test(test_hosts),
		cmocka_unit_test(test_place),
		cmocka_unit_test(test_host_zombie_holder),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test_setup_teardown(test_sentinel_store, sentinel_setup,
						sentinel_teardown),
		cmocka_unit_test(test_degraded),
		cmocka_unit_test(test_sentinel_announcement),
		cmocka_unit_test(test_sentinel_promotion),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
