/*
 * test_report.c - the status report (report.c, px_report_json) on a core
 * with the fake fetcher of fake_fetch.c and a fake clock: the JSON is
 * parsed with jansson and every field README's "Status" section documents
 * is checked, with its value after known activity: providers (states,
 * sessions, slots, answers), sessions (open, lingering, failed), read
 * counters and memory after a known set of reads, a cutover's record and
 * counters, fallback_exhausted, admission refusals, and reloads.
 *
 * Every read the activity makes is checked byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "fingerprint.h"
#include "health.h"
#include "log.h"
#include "provider.h"
#include "reload.h"
#include "report.h"
#include "standby.h"
#include "verdict.h"
#include "fake_fetch.h"
#include "rig.h"

#define KiB (1LL << 10)
#define MiB (1LL << 20)
#define SIZE (16 * MiB + 4321)

static unsigned char *g_data;
static char g_dir[256], g_catfile[300];



static const unsigned char *data_for(const char *url)
{
	return strncmp(url, "http://", 7) == 0 ? g_data : NULL;
}

/* The catalog: alpha (at most 4 transfers), beta, gamma (drained) serve
 * asset "a"; tiny (at most 1) serves "solo". */
static const char *catalog(const char *extra)
{
	static char text[2048];
	snprintf(text, sizeof(text),
		 "{\"providers\": [{\"name\": \"alpha\", \"max_connections\": 4},"
		 " {\"name\": \"beta\"}, {\"name\": \"gamma\", \"drained\": true},"
		 " {\"name\": \"tiny\", \"max_connections\": 1}],"
		 " \"assets\": [{\"id\": \"a\", \"path\": \"Movies/a.bin\", \"size\": %lld,"
		 "  \"mtime\": 1600000000, \"sources\": ["
		 "  {\"url\": \"http://alpha.test/a.bin\", \"provider\": \"alpha\"},"
		 "  {\"url\": \"http://beta.test/a.bin\", \"provider\": \"beta\"},"
		 "  {\"url\": \"http://gamma.test/a.bin\", \"provider\": \"gamma\"}]},"
		 " {\"id\": \"solo\", \"path\": \"solo.bin\", \"size\": %lld, \"mtime\": 1600000000,"
		 "  \"sources\": [{\"url\": \"http://tiny.test/solo.bin\", \"provider\": \"tiny\"}]}"
		 "%s]}", (long long)SIZE, (long long)SIZE, extra);
	return text;
}

/* ------------------------------------------------------------------ rig */

static json_t *g_js;             /* the last report */

static struct rig *rig_report(void)
{
	struct rig_opts o = { .catalog = catalog(""), .size = SIZE, .threaded = 1,
			      .chunk = 64 * KiB, .data_for = data_for, .fallback = g_data,
			      .stream_min = SIZE + 1, .clock = rig_clock };
	struct rig *r = rig_new(&o);
	r->cfg.read_timeout_ms = 10000;
	r->cfg.admission_timeout_ms = 100;
	r->cfg.retries = 1;
	r->cfg.head_size = 256 * KiB;
	r->cfg.tail_size = 256 * KiB;
	r->cfg.readahead_budget = 64 * MiB;
	r->cfg.cache_size = 8 * MiB;
	rig_start(r, NULL, 0);
	return r;
}

static int teardown(void **state)
{
	json_decref(g_js);
	g_js = NULL;
	return rig_teardown(state);
}

/* Takes the report afresh, parsed. */
static json_t *report(struct rig *r)
{
	json_error_t e;
	char *text = px_report_json(r->core);
	assert_non_null(text);
	json_decref(g_js);
	g_js = json_loads(text, 0, &e);
	if (!g_js)
		fail_msg("status is not JSON: %s at %d:%d", e.text, e.line, e.column);
	free(text);
	return g_js;
}

static json_t *get(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		fail_msg("no \"%s\" in the status", key);
	return v;
}

static json_int_t num(json_t *o, const char *key)
{
	json_t *v = get(o, key);
	if (!json_is_integer(v))
		fail_msg("\"%s\" is not an integer", key);
	return json_integer_value(v);
}

static double age(json_t *o, const char *key)
{
	json_t *v = get(o, key);
	if (!json_is_real(v))
		fail_msg("\"%s\" is not a number of seconds", key);
	return json_real_value(v);
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = get(o, key);
	if (!json_is_string(v))
		fail_msg("\"%s\" is not a string", key);
	return json_string_value(v);
}

/* The object of arr whose key equals the string want (or the integer
 * id, when want is NULL). */
static json_t *find(json_t *arr, const char *key, const char *want, json_int_t id)
{
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o) {
		json_t *v = json_object_get(o, key);
		if (want ? json_is_string(v) && strcmp(json_string_value(v), want) == 0
			 : json_is_integer(v) && json_integer_value(v) == id)
			return o;
	}
	fail_msg("no entry with %s %s", key, want ? want : "(id)");
	return NULL;
}

/*
 * The keys of o are exactly those README's "Status" documents (its example
 * and its text), space-separated in keys, plus those after a "|", which
 * the code has and README does not show (a docs gap, reported).
 */
static void exact_keys(json_t *o, const char *what, const char *keys)
{
	char words[600], all[600], w[80];
	const char *k, *bar = strchr(keys, '|');
	json_t *v;
	size_t n = 0;
	assert_true(json_is_object(o));
	snprintf(all, sizeof(all), " %s ", keys);
	snprintf(words, sizeof(words), "%.*s", bar ? (int)(bar - keys) : (int)strlen(keys), keys);
	for (char *save, *t = strtok_r(words, " ", &save); t; t = strtok_r(NULL, " ", &save))
		if (!json_object_get(o, t))
			fail_msg("%s: no \"%s\", which README documents", what, t);
	json_object_foreach(o, k, v) {
		snprintf(w, sizeof(w), " %s ", k);
		if (!strstr(all, w))
			fail_msg("%s: \"%s\" is not documented", what, k);
		n++;
	}
	snprintf(words, sizeof(words), "%s", keys);
	for (char *save, *t = strtok_r(words, " |", &save); t; t = strtok_r(NULL, " |", &save))
		n--;
	assert_int_equal(n, 0);
}

/* Every object of the status has the documented keys, and only those. */
static void check_shape(json_t *js)
{
	size_t i, j;
	json_t *o, *p;
	exact_keys(js, "status", "providers sessions playback_sessions scan_sessions assets "
		   "cutovers transcodes reload admission reads memory disk_cache store hosts "
		   "copies version worker_pid keeper");
	/* one host: no store, no hosts (cluster mode: test_cluster.py) */
	assert_true(json_is_null(get(js, "store")));
	assert_int_equal(json_array_size(get(js, "hosts")), 0);
	exact_keys(get(js, "copies"), "copies",
		   "storages jobs assets in_way_total in_way_read_total | host");
	json_array_foreach(get(js, "providers"), i, o) {
		exact_keys(o, "provider", "name state why live sessions transfers "
			   "background_transfers slots_held max_connections at_limit drained "
			   "last_good_age_s counters auth_error cluster | auth_errors");
		exact_keys(get(o, "counters"), "provider counters", "good_answers bad_answers "
			   "slot_waits slot_timeouts background_preempted lingering_sessions_ended "
			   "liveness_probes");
	}
	json_array_foreach(get(js, "sessions"), i, o)
		exact_keys(o, "session", "id asset path client source provider offset "
			   "offset_from bytes_served handles transfers streams state kind age_s");
	json_array_foreach(get(js, "assets"), i, o) {
		exact_keys(o, "asset", "id path size reference sources");
		json_array_foreach(get(o, "sources"), j, p)
			exact_keys(p, "asset source", "source provider verification why "
				   "inconclusive_in_a_row");
	}
	json_t *c = get(js, "cutovers");
	exact_keys(c, "cutovers", "total by_reason recent fallback_exhausted "
		   "last_fallback_exhausted verifications");
	exact_keys(get(c, "verifications"), "verifications",
		   "match mismatch size_mismatch inconclusive");
	json_array_foreach(get(c, "recent"), i, o)
		exact_keys(o, "cutover", "session asset offset from to reason duration_ms age_s");
	exact_keys(get(js, "reload"), "reload", "reloads ok last last_age_s");
	exact_keys(get(js, "admission"), "admission",
		   "refused_at_limit last_refusal last_refusal_age_s");
	exact_keys(get(js, "reads"), "reads", "head_tail_cache_hits head_tail_cache_fills "
		   "head_tail_multipart scans scan_requests "
		   "scans_from_cache streams stream_restarts stream_waits stream_wait_ms "
		   "parallel_streams parallel_parts direct_reads");
	exact_keys(get(js, "memory"), "memory",
		   "readahead_used readahead_budget cache_used cache_size");
	exact_keys(get(js, "disk_cache"), "disk_cache", "on why_off parts bytes max_bytes hits "
		   "hit_bytes stored stored_bytes evictions rejects");
}

/* Every member of o is the integer 0. */
static void all_zero(json_t *o)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
		if (!json_is_integer(v) || json_integer_value(v) != 0)
			fail_msg("\"%s\" is not 0", k);
}

static void read_check(struct px_handle *h, int64_t off, size_t len)
{
	rig_read_check(h, g_data, off, len);
}

/* ----------------------------------------------------------------- tests */

/* Before any activity: the providers as the catalog says, nothing else. */
static void test_fresh(void **state)
{
	struct rig *r = rig_report();
	json_t *js = report(r), *p;
	check_shape(js);
	assert_string_equal(str(js, "version"), SEAMFS_VERSION);
	json_t *provs = get(js, "providers");
	assert_int_equal(json_array_size(provs), 4);
	p = find(provs, "name", "alpha", 0);
	assert_string_equal(str(p, "state"), "live");
	assert_string_equal(str(p, "why"), "");
	assert_true(json_is_true(get(p, "live")));
	assert_int_equal(num(p, "max_connections"), 4);
	assert_true(json_is_false(get(p, "at_limit")));
	assert_true(json_is_false(get(p, "drained")));
	assert_true(json_is_null(get(p, "auth_error")));
	assert_true(json_is_null(get(p, "last_good_age_s")));
	all_zero(get(p, "counters"));
	assert_true(json_is_null(get(find(provs, "name", "beta", 0), "max_connections")));
	p = find(provs, "name", "gamma", 0);
	assert_string_equal(str(p, "state"), "drained");
	assert_true(json_is_true(get(p, "drained")));
	assert_true(json_is_true(get(p, "live")));
	assert_int_equal(json_array_size(get(js, "sessions")), 0);
	/* only "a" has more than one source */
	json_t *assets = get(js, "assets");
	assert_int_equal(json_array_size(assets), 1);
	json_t *a = find(assets, "id", "a", 0);
	assert_string_equal(str(a, "path"), "Movies/a.bin");
	assert_int_equal(num(a, "size"), SIZE);
	assert_string_equal(str(a, "reference"), "");
	assert_int_equal(json_array_size(get(a, "sources")), 3);
	p = find(get(a, "sources"), "source", "http://beta.test/a.bin", 0);
	assert_string_equal(str(p, "provider"), "beta");
	assert_string_equal(str(p, "verification"), "unverified");
	assert_int_equal(json_array_size(get(js, "transcodes")), 0);
	json_t *c = get(js, "cutovers");
	assert_int_equal(num(c, "total"), 0);
	assert_int_equal(json_object_size(get(c, "by_reason")), 0);
	assert_int_equal(num(c, "fallback_exhausted"), 0);
	assert_string_equal(str(c, "last_fallback_exhausted"), "");
	json_t *rl = get(js, "reload");
	assert_int_equal(num(rl, "reloads"), 0);
	assert_true(json_is_true(get(rl, "ok")));
	assert_true(json_is_null(get(rl, "last_age_s")));
	assert_true(json_is_null(get(get(js, "admission"), "last_refusal_age_s")));
	all_zero(get(js, "reads"));
	json_t *m = get(js, "memory");
	assert_int_equal(num(m, "readahead_used"), 0);
	assert_int_equal(num(m, "readahead_budget"), 64 * MiB);
	assert_int_equal(num(m, "cache_used"), 0);
	assert_int_equal(num(m, "cache_size"), 8 * MiB);
	rig_free(r);
}

/* Ages are milliseconds: 2721 ms prints as 2.721, never as the double's
 * 17 digits (2.7210000000000001). */
static void test_ages_in_milliseconds(void **state)
{
	struct rig *r = rig_report();
	struct px_handle *h = rig_open(r, 0, 11);
	read_check(h, 0, 4096);
	/* the read returns with its bytes; the head's fill, whose end is the
	 * provider's good answer, may still be on its way */
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	rig_advance(2721);
	char *text = px_report_json(r->core);
	assert_non_null(text);
	const char *at = strstr(text, "\"last_good_age_s\": ");
	assert_non_null(at);
	at += strlen("\"last_good_age_s\": ");
	if (strncmp(at, "2.721,", 6) && strncmp(at, "2.721\n", 6))
		fail_msg("last_good_age_s: %.30s", at);
	/* no real anywhere with more than three decimals */
	for (const char *c = text; *c; c++) {
		if (*c != '.' || c == text || c[-1] < '0' || c[-1] > '9')
			continue;
		size_t digits = strspn(c + 1, "0123456789");
		if (digits > 3)
			fail_msg("a number with %zu decimals: %.40s", digits, c - 5);
	}
	free(text);
	rig_close(r, h);
	rig_free(r);
}

/* Known reads: one head fill and one hit, one tail fill, six direct reads
 * in the middle (far apart: no stream), on two sessions. */
static void test_sessions_and_reads(void **state)
{
	static const int64_t mid[] = { 1 * MiB, 6 * MiB, 11 * MiB, 3 * MiB, 8 * MiB };
	struct rig *r = rig_report();
	int64_t t0 = rig_clock();
	struct px_handle *h1 = rig_open(r, 0, 11);
	read_check(h1, 0, 4096);
	read_check(h1, 8192, 4096);
	read_check(h1, SIZE - 4096, 4096);
	for (int i = 0; i < 5; i++)
		read_check(h1, mid[i], 4096);
	struct px_handle *h2 = rig_open(r, 0, 22);
	read_check(h2, 5 * MiB, 4096);
	uint64_t id1 = px_handle_session_id(h1), id2 = px_handle_session_id(h2);
	rig_close(r, h2);
	rig_advance(2500);

	json_t *js = report(r);
	check_shape(js);
	json_t *s1 = find(get(js, "sessions"), "id", NULL, (json_int_t)id1);
	assert_string_equal(str(s1, "asset"), "a");
	assert_string_equal(str(s1, "path"), "Movies/a.bin");
	assert_int_equal(num(s1, "client"), 11);
	assert_string_equal(str(s1, "source"), "http://alpha.test/a.bin");
	assert_string_equal(str(s1, "provider"), "alpha");
	assert_int_equal(num(s1, "offset"), 8 * MiB + 4096);
	assert_int_equal(num(s1, "bytes_served"), 8 * 4096);
	assert_int_equal(num(s1, "handles"), 1);
	assert_int_equal(num(s1, "transfers"), 0);
	assert_string_equal(str(s1, "state"), "open");
	/* 20 KiB of the middle: not a playback yet */
	assert_string_equal(str(s1, "kind"), "scan");
	assert_true(age(s1, "age_s") == 2.5);
	/* the second client went to the provider with fewer sessions */
	json_t *s2 = find(get(js, "sessions"), "id", NULL, (json_int_t)id2);
	assert_string_equal(str(s2, "provider"), "beta");
	assert_string_equal(str(s2, "source"), "http://beta.test/a.bin");
	assert_int_equal(num(s2, "bytes_served"), 4096);
	assert_int_equal(num(s2, "handles"), 0);
	assert_string_equal(str(s2, "state"), "lingering");
	assert_int_equal(num(js, "scan_sessions"), 2);
	assert_int_equal(num(js, "playback_sessions"), 0);

	json_t *pa = find(get(js, "providers"), "name", "alpha", 0);
	json_t *pb = find(get(js, "providers"), "name", "beta", 0);
	assert_int_equal(num(pa, "sessions"), 1);
	assert_int_equal(num(pb, "sessions"), 1);
	assert_int_equal(num(pa, "transfers"), 0);
	/* no transfer open: each session keeps one slot */
	assert_int_equal(num(pa, "slots_held"), 1);
	assert_int_equal(num(pb, "slots_held"), 1);
	/* two fills and five direct reads, each a good answer */
	assert_int_equal(num(get(pa, "counters"), "good_answers"), 7);
	assert_int_equal(num(get(pb, "counters"), "good_answers"), 1);
	assert_int_equal(num(get(pa, "counters"), "bad_answers"), 0);
	assert_true(age(pa, "last_good_age_s") == 2.5);

	json_t *rd = get(js, "reads");
	assert_int_equal(num(rd, "head_tail_cache_fills"), 2);
	assert_int_equal(num(rd, "head_tail_cache_hits"), 1);
	assert_int_equal(num(rd, "direct_reads"), 6);
	assert_int_equal(num(rd, "streams"), 0);
	assert_int_equal(num(rd, "stream_restarts"), 0);
	assert_int_equal(fake_nreq(&r->fake), 8);
	json_t *m = get(js, "memory");
	assert_int_equal(num(m, "cache_used"), 512 * KiB);
	assert_int_equal(num(m, "readahead_used"), 512 * KiB);
	assert_true(rig_clock() - t0 == 2500);
	rig_free(r);
}

/* A session that read PX_PLAY_BYTES of the middle is a playback; its
 * offset follows its reads, those the head and tail cache answer too. */
static void test_session_kind(void **state)
{
	(void)state;
	struct rig *r = rig_report();
	struct px_handle *h = rig_open(r, 0, 11);
	read_check(h, 0, 4096);                         /* the cached head */
	read_check(h, SIZE - 4096, 4096);               /* the cached tail */
	json_t *js = report(r);
	json_t *s = find(get(js, "sessions"), "id", NULL, (json_int_t)px_handle_session_id(h));
	assert_string_equal(str(s, "kind"), "scan");
	assert_int_equal(num(s, "offset"), SIZE);
	/* the head's last 64 KiB and 448 KiB past it: 448 KiB of the middle */
	for (int64_t off = 192 * KiB; off < 704 * KiB; off += 64 * KiB)
		read_check(h, off, 64 * KiB);
	js = report(r);
	s = find(get(js, "sessions"), "id", NULL, (json_int_t)px_handle_session_id(h));
	assert_string_equal(str(s, "kind"), "scan");
	assert_int_equal(num(s, "offset"), 704 * KiB);
	read_check(h, 704 * KiB, 64 * KiB);             /* 512 KiB of it */
	read_check(h, 4096, 4096);                      /* back into the head */
	js = report(r);
	check_shape(js);
	s = find(get(js, "sessions"), "id", NULL, (json_int_t)px_handle_session_id(h));
	assert_string_equal(str(s, "kind"), "playback");
	assert_int_equal(num(s, "offset"), 8192);
	assert_int_equal(num(js, "playback_sessions"), 1);
	assert_int_equal(num(js, "scan_sessions"), 0);
	rig_close(r, h);
	rig_free(r);
}

static enum px_status mem_read(void *ctx, int64_t off, size_t len, void *buf, size_t *got)
{
	memcpy(buf, (const unsigned char *)ctx + off, len);
	*got = len;
	return PX_OK;
}

/* A forced cutover's record, the failed read's fallback_exhausted, the
 * providers that answered badly or refused credentials, and an open
 * refused at a provider's limit. */
static void test_cutover_exhausted_admission(void **state)
{
	struct rig *r = rig_report();
	struct vf_fingerprint *fp = malloc(sizeof(*fp));
	struct vf_reader rd = { .read = mem_read, .ctx = g_data };
	struct vf_verdict match = { .outcome = VF_MATCH, .sample = -1, .offset = -1, .size = SIZE };
	unsigned char buf[1000];
	size_t bad, got;
	char why[200], ref_id[VF_FINGERPRINT_ID_LEN];
	/* beta verified against the asset's reference, as the background
	 * verifier would have left it (the fake's probes give no size) */
	assert_non_null(fp);
	assert_int_equal(vf_fingerprint_take(&rd, SIZE, fp, &bad, why, sizeof(why)), PX_OK);
	assert_non_null(px_src_ensure(r->core, 0));
	assert_int_equal(vf_fingerprint_id(fp, ref_id), PX_OK);
	enum px_status st = px_standby_set_reference(r->core, 0, fp);
	free(fp);
	assert_int_equal(st, PX_OK);
	px_standby_apply_verdict(r->core, 0, 1, &match);

	struct px_handle *h = rig_open(r, 0, 11);
	read_check(h, 1 * MiB, 4096);
	fake_fail_next(&r->fake, 1, PX_ETRANSFER, 70000);
	read_check(h, 2 * MiB, 300000);
	uint64_t id = px_handle_session_id(h);
	rig_advance(1500);
	json_t *js = report(r);
	check_shape(js);
	json_t *c = get(js, "cutovers");
	assert_int_equal(num(c, "total"), 1);
	assert_int_equal(json_object_size(get(c, "by_reason")), 1);
	assert_int_equal(num(get(c, "by_reason"), "reset_or_premature_end"), 1);
	assert_int_equal(json_array_size(get(c, "recent")), 1);
	json_t *rec = json_array_get(get(c, "recent"), 0);
	assert_int_equal(num(rec, "session"), (json_int_t)id);
	assert_string_equal(str(rec, "asset"), "a");
	assert_int_equal(num(rec, "offset"), 2 * MiB + 70000);
	assert_string_equal(str(rec, "from"), "http://alpha.test/a.bin");
	assert_string_equal(str(rec, "to"), "http://beta.test/a.bin");
	assert_string_equal(str(rec, "reason"), "reset_or_premature_end");
	assert_true(num(rec, "duration_ms") >= 0 && num(rec, "duration_ms") < 10000);
	assert_true(age(rec, "age_s") == 1.5);
	assert_int_equal(num(c, "fallback_exhausted"), 0);
	json_t *a = find(get(js, "assets"), "id", "a", 0);
	assert_int_equal(strlen(str(a, "reference")), 16);
	assert_string_equal(str(a, "reference"), ref_id);
	/* the source that failed served these bytes: verified too */
	assert_string_equal(str(find(get(a, "sources"), "provider", "alpha", 0), "verification"),
			    "verified");
	assert_string_equal(str(find(get(a, "sources"), "provider", "beta", 0), "verification"),
			    "verified");
	assert_string_equal(str(find(get(a, "sources"), "provider", "gamma", 0), "verification"),
			    "unverified");
	json_t *s = find(get(js, "sessions"), "id", NULL, (json_int_t)id);
	assert_string_equal(str(s, "provider"), "beta");
	assert_string_equal(str(s, "source"), "http://beta.test/a.bin");
	assert_int_equal(num(s, "offset"), 2 * MiB + 300000);
	assert_int_equal(num(s, "bytes_served"), 4096 + 300000);
	assert_int_equal(num(find(get(js, "providers"), "name", "alpha", 0), "sessions"), 0);
	assert_int_equal(num(find(get(js, "providers"), "name", "beta", 0), "sessions"), 1);

	/* "solo" has one source: its reads fail with nothing to take over */
	struct px_handle *hs = rig_open(r, 1, 33);
	uint64_t ids = px_handle_session_id(hs);
	fake_fail_next(&r->fake, 1000, PX_ETRANSFER, 0);
	assert_int_equal(px_handle_read(hs, 4 * MiB, sizeof(buf), buf, &got), PX_ETRANSFER);
	/* and tiny (one slot, held by that session) refuses another client */
	fake_fail_next(&r->fake, 0, PX_OK, 0);
	struct px_handle *x = NULL;
	assert_int_equal(px_handle_open(r->core, 1, 44, &x), PX_EBUSY);
	px_provider_auth_failed(r->core, 1, "HTTP 403");
	js = report(r);
	check_shape(js);
	c = get(js, "cutovers");
	assert_int_equal(num(c, "total"), 1);
	assert_int_equal(num(c, "fallback_exhausted"), 1);
	assert_non_null(strstr(str(c, "last_fallback_exhausted"), "asset solo offset 4194304"));
	s = find(get(js, "sessions"), "id", NULL, (json_int_t)ids);
	assert_string_equal(str(s, "state"), "fallback_exhausted");
	assert_int_equal(num(s, "bytes_served"), 0);
	json_t *pt = find(get(js, "providers"), "name", "tiny", 0);
	assert_string_equal(str(pt, "state"), "failing");
	assert_true(str(pt, "why")[0] != '\0');
	assert_true(json_is_true(get(pt, "live")));
	/* one direct attempt (between head and tail) and `retries` more,
	 * each a reset before any byte */
	assert_int_equal(num(get(pt, "counters"), "bad_answers"), 1 + r->cfg.retries);
	assert_true(json_is_true(get(pt, "at_limit")));
	json_t *adm = get(js, "admission");
	assert_int_equal(num(adm, "refused_at_limit"), 1);
	assert_non_null(strstr(str(adm, "last_refusal"), "solo"));
	assert_true(age(adm, "last_refusal_age_s") == 0.0);
	json_t *pb = find(get(js, "providers"), "name", "beta", 0);
	assert_string_equal(str(pb, "state"), "auth_error");
	assert_non_null(strstr(str(pb, "auth_error"), "HTTP 403"));
	assert_int_equal(num(pb, "auth_errors"), 1);
	/* failing for liveness_ttl: down */
	rig_advance(r->cfg.liveness_ttl_ms);
	js = report(r);
	pt = find(get(js, "providers"), "name", "tiny", 0);
	assert_string_equal(str(pt, "state"), "down");
	assert_true(json_is_false(get(pt, "live")));
	rig_free(r);
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int ok = f && fputs(text, f) >= 0;
	return f && fclose(f) == 0 && ok ? 0 : -1;
}

/* The last reload's outcome: how many, whether it applied, its words. */
static void test_reload(void **state)
{
	struct rig *r = rig_report();
	char rep[1024];
	px_core_set_catalog_path(r->core, g_catfile);
	assert_int_equal(write_text(g_catfile, catalog(
		", {\"id\": \"new\", \"path\": \"new.bin\", \"size\": 1000, \"mtime\": 1600000000,"
		" \"sources\": [{\"url\": \"http://beta.test/new.bin\", \"provider\": \"beta\"}]}")),
		0);
	assert_int_equal(px_reload_file(r->core, rep, sizeof(rep)), PX_OK);
	assert_int_equal(px_core_listed(r->core), 3);
	rig_advance(1000);
	json_t *rl = get(report(r), "reload");
	assert_int_equal(num(rl, "reloads"), 1);
	assert_true(json_is_true(get(rl, "ok")));
	assert_int_equal(strncmp(str(rl, "last"), "reloaded", 8), 0);
	assert_true(age(rl, "last_age_s") == 1.0);

	assert_int_equal(write_text(g_catfile, "{\"assets\": [}"), 0);
	assert_int_not_equal(px_reload_file(r->core, rep, sizeof(rep)), PX_OK);
	json_t *js = report(r);
	check_shape(js);
	rl = get(js, "reload");
	assert_int_equal(num(rl, "reloads"), 2);
	assert_true(json_is_false(get(rl, "ok")));
	assert_non_null(strstr(str(rl, "last"), "not reloaded"));
	assert_non_null(strstr(str(rl, "last"), g_catfile));
	assert_true(age(rl, "last_age_s") == 0.0);
	/* the old catalog stays */
	assert_int_equal(px_core_listed(r->core), 3);
	find(get(js, "assets"), "id", "a", 0);
	rig_free(r);
}

int main(void)
{
	g_data = malloc(SIZE);
	if (!g_data)
		return 1;
	for (int64_t i = 0; i < SIZE; i++)
		g_data[i] = (unsigned char)((i * 2654435761u) >> 13);
	px_log_setup(PX_LOG_ERROR, 0);
	snprintf(g_dir, sizeof(g_dir), "/tmp/seamfs-report-XXXXXX");
	if (!mkdtemp(g_dir))
		return 1;
	snprintf(g_catfile, sizeof(g_catfile), "%s/catalog.json", g_dir);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_fresh, teardown),
		cmocka_unit_test_teardown(test_sessions_and_reads, teardown),
		cmocka_unit_test_teardown(test_session_kind, teardown),
		cmocka_unit_test_teardown(test_ages_in_milliseconds, teardown),
		cmocka_unit_test_teardown(test_cutover_exhausted_admission, teardown),
		cmocka_unit_test_teardown(test_reload, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(g_catfile);
	rmdir(g_dir);
	free(g_data);
	return rc;
}
