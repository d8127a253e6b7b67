/*
 * test_cutover.c - cutover decisions (standby.c) and source health
 * (health.c), on a core with the fake fetcher of fake_fetch.c, a fake
 * clock and, for path standbys, files made at test time.
 *
 * Which standby takes over: verified before unverified, then by provider
 * name; rejected, dead and auth-refused sources never; a source that
 * failed lately last, until its backoff (5 s, doubling, at most 2 min)
 * passes. A verified standby must pass the seam check, an unverified one
 * the size gate and the whole sweep (path standbys: real preads). With
 * nothing to take over, PX_ENOSOURCE and fallback_exhausted. A source
 * whose first bytes differ from the reference's sample is rejected and the
 * read is served again from a standby. Every read is checked byte for byte.
 *
 * Verification states and the asset's reference fingerprint are set
 * through standby.h (px_standby_apply_verdict, px_standby_set_reference),
 * as the background verifier would have left them, and a dead source is
 * one removed (px_sources_remove). What the tests check of the core they
 * read from its snapshot (snapshot.h) and the public queries, never its
 * fields or its locks; the rig is the shared one (rig.h).
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

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "fingerprint.h"
#include "health.h"
#include "log.h"
#include "provider.h"
#include "session.h"
#include "snapshot.h"
#include "sources.h"
#include "standby.h"
#include "verdict.h"
#include "fake_fetch.h"
#include "rig.h"

#define KiB (1LL << 10)
#define MiB (1LL << 20)
#define SIZE (4 * MiB + 333)

static unsigned char *g_data;    /* the asset */
static unsigned char *g_bad;     /* the same size; differs in sample 0 and at SEAM_BAD */
static const char *g_bad_host;   /* the URL that serves g_bad, NULL: none */
static char g_dir[256];
#define SEAM_BAD 168000          /* inside the seam bytes before 170000 */


static const unsigned char *data_for(const char *url)
{
	if (strncmp(url, "http://", 7) != 0)
		return NULL;
	return g_bad_host && strstr(url, g_bad_host) ? g_bad : g_data;
}

/* ------------------------------------------------------------------ rig */

static enum px_status mem_read(void *ctx, int64_t off, size_t len, void *buf, size_t *got)
{
	memcpy(buf, (const unsigned char *)ctx + off, len);
	*got = len;
	return PX_OK;
}

static const char *reference(struct rig *r);

/* Asset "a" with a URL source on each provider of names (catalog order),
 * then the path sources of paths; with ref, the reference fingerprint of
 * g_data that the background verifier would have taken. */
static struct rig *rig_cut(const char *const *names, int n, const char *const *paths, int np,
			   int ref)
{
	char text[4096];
	size_t k = 0;
	k += (size_t)snprintf(text + k, sizeof(text) - k, "{\"providers\": [");
	for (int i = 0; i < n; i++)
		k += (size_t)snprintf(text + k, sizeof(text) - k, "%s{\"name\": \"%s\"}",
				      i ? ", " : "", names[i]);
	k += (size_t)snprintf(text + k, sizeof(text) - k,
			      "], \"assets\": [{\"id\": \"a\", \"path\": \"a.bin\", \"size\": %lld, "
			      "\"mtime\": 1600000000, \"sources\": [", (long long)SIZE);
	for (int i = 0; i < n; i++)
		k += (size_t)snprintf(text + k, sizeof(text) - k,
				      "%s{\"url\": \"http://%s.test/a.bin\", \"provider\": \"%s\"}",
				      i ? ", " : "", names[i], names[i]);
	for (int i = 0; i < np; i++)
		k += (size_t)snprintf(text + k, sizeof(text) - k, ", {\"path\": \"%s/%s\"}", g_dir,
				      paths[i]);
	k += (size_t)snprintf(text + k, sizeof(text) - k, "]}]}");
	assert_true(k < sizeof(text));
	struct rig_opts o = { .catalog = text, .size = SIZE, .threaded = 1, .chunk = 64 * KiB,
			      .data_for = data_for, .fallback = g_data, .stream_min = SIZE + 1,
			      .clock = rig_clock, .mtime = 1600000000 };
	struct rig *r = rig_new(&o);
	g_bad_host = NULL;
	r->cfg.read_timeout_ms = 10000;
	r->cfg.stall_timeout_ms = 2000;
	r->cfg.retries = 2;
	r->cfg.head_size = 0;
	r->cfg.tail_size = 0;
	r->cfg.readahead_budget = 0; /* direct reads only: read-ahead is test_readahead's */
	rig_start(r, NULL, 0);
	assert_non_null(px_src_ensure(r->core, 0));
	if (ref) {
		struct vf_fingerprint *fp = malloc(sizeof(*fp));
		struct vf_reader rd = { .read = mem_read, .ctx = g_data };
		size_t bad;
		char why[200], id[VF_FINGERPRINT_ID_LEN];
		assert_non_null(fp);
		assert_int_equal(vf_fingerprint_take(&rd, SIZE, fp, &bad, why, sizeof(why)), PX_OK);
		assert_int_equal(vf_fingerprint_id(fp, id), PX_OK);
		enum px_status st = px_standby_set_reference(r->core, 0, fp);
		free(fp);
		assert_int_equal(st, PX_OK);
		assert_string_equal(reference(r), id);
	}
	return r;
}

/* ---- what the core shows: its snapshot and public queries, never its
 * fields or its locks. Asset 0 is "a". Each helper frees the snapshot
 * before it asserts (a failed assert longjmps). */

static struct px_snapshot *snap(struct rig *r)
{
	struct px_snapshot *s = NULL;
	assert_int_equal(px_snapshot_new(r->core, PX_SNAPSHOT_ROWS, &s), PX_OK);
	assert_non_null(s);
	return s;
}

/* The status row of asset "a"; NULL if it has none. */
static const struct px_snap_asset *row_a(const struct px_snapshot *s)
{
	for (size_t i = 0; i < s->nshown; i++)
		if (strcmp(s->assets[i].id, "a") == 0)
			return &s->assets[i];
	return NULL;
}

/* The index of the source of "a" shown as `shown`; NOWHERE if none. */
#define NOWHERE ((size_t)-1)
static size_t index_of(const struct px_snapshot *s, const char *shown)
{
	const struct px_snap_asset *a = row_a(s);
	for (size_t k = 0; a && shown && k < a->nsources; k++)
		if (strcmp(a->sources[k].source, shown) == 0)
			return k;
	return NOWHERE;
}

/* The handle's session, which the core lists (as its own sessions list
 * has it: failed or not). */
static struct px_session *sess_of(struct rig *r, struct px_handle *h)
{
	struct px_session *s = px_handle_session(h);
	assert_true(px_provider_of_session(r->core, px_handle_session_id(h)) >= 0);
	assert_non_null(s);
	return s;
}

/* The source the handle's session reads from now. */
static size_t source_of(struct rig *r, struct px_handle *h)
{
	uint64_t id = px_handle_session_id(h);
	struct px_snapshot *s = snap(r);
	size_t k = NOWHERE;
	for (size_t i = 0; i < s->nsessions; i++)
		if (s->sessions[i].id == id)
			k = index_of(s, s->sessions[i].source);
	px_snapshot_free(s);
	if (k == NOWHERE)
		fail_msg("session %llu is not listed, or not on a source of \"a\"",
			 (unsigned long long)id);
	return k;
}

/* Sets source k's verification state, by the verdict the background
 * verifier would have given: st is VS_VERIFIED or VS_REJECTED. */
static void set_state(struct rig *r, size_t k, int st)
{
	struct vf_verdict v = { .outcome = st == VS_VERIFIED ? VF_MATCH : VF_MISMATCH,
				.sample = -1, .offset = -1, .size = SIZE };
	assert_true(st == VS_VERIFIED || st == VS_REJECTED);
	if (st == VS_REJECTED)
		snprintf(v.why, sizeof(v.why), "a sample differs");
	px_standby_apply_verdict(r->core, 0, k, &v);
}

#define DEAD (-1)  /* state_of: the source is dead (404, gone, removed) */

/* Source k's verification state (VS_*), DEAD when dead. */
static int state_of(struct rig *r, size_t k)
{
	struct px_snapshot *s = snap(r);
	const struct px_snap_asset *a = row_a(s);
	const char *name = a && k < a->nsources ? a->sources[k].verification : NULL;
	int st = -2;
	if (name && strcmp(name, "dead") == 0)
		st = DEAD;
	for (int i = VS_UNKNOWN; name && i <= VS_ABANDONED; i++)
		if (strcmp(name, px_standby_state_name(i)) == 0)
			st = i;
	px_snapshot_free(s);
	if (st == -2)
		fail_msg("source %zu of \"a\" is not shown", k);
	return st;
}

/* Whether source k is dead for the asset (404, gone, removed). */
static int dead(struct rig *r, size_t k)
{
	return state_of(r, k) == DEAD;
}

/* Marks source k dead for the asset, as a 404 would: removed. */
static void kill_source(struct rig *r, size_t k)
{
	static const char *const url[] = { "http://a.test/a.bin", "http://b.test/a.bin",
					   "http://c.test/a.bin", "http://d.test/a.bin",
					   "http://e.test/a.bin" };
	char err[300];
	assert_true(k < 5);
	assert_int_equal(px_sources_remove(r->core, "a", url[k], err, sizeof(err)), PX_OK);
}

/* Whether provider i's credentials count as refused. */
static int auth_failed(struct rig *r, size_t i)
{
	struct px_snapshot *s = snap(r);
	int v = i < s->nprovs ? s->provs[i].auth_failed : -1;
	px_snapshot_free(s);
	assert_int_not_equal(v, -1);
	return v;
}

/* Counters of the core: cutovers by trigger, verdicts by outcome,
 * fallback_exhausted (and its last words into why). */
static uint64_t cutovers(struct rig *r, enum px_status why)
{
	struct px_snapshot *s = snap(r);
	uint64_t n = s->n_cutovers[why];
	px_snapshot_free(s);
	return n;
}

static uint64_t verified(struct rig *r, enum vf_outcome o)
{
	struct px_snapshot *s = snap(r);
	uint64_t n = s->n_verified[o];
	px_snapshot_free(s);
	return n;
}

static uint64_t exhausted(struct rig *r, char *why, size_t len)
{
	struct px_snapshot *s = snap(r);
	uint64_t n = s->n_exhausted;
	snprintf(why, len, "%s", s->exhausted_why);
	px_snapshot_free(s);
	return n;
}

/* A cutover's record, its sources as indices of "a". */
struct cut {
	uint64_t session;
	size_t from, to;
	int64_t offset;
	enum px_status reason;
};

/* The id of the asset's reference fingerprint as shown, "" when none. */
static const char *reference(struct rig *r)
{
	static char id[sizeof(((struct px_snap_asset *)0)->reference)];
	struct px_snapshot *s = snap(r);
	const struct px_snap_asset *a = row_a(s);
	snprintf(id, sizeof(id), "%s", a ? a->reference : "");
	px_snapshot_free(s);
	return id;
}

/* The most recent cutover record, and how many there were. */
static struct cut last_cut(struct rig *r, uint64_t *n)
{
	struct px_snapshot *s = snap(r);
	struct cut c = { 0 };
	*n = 0;
	for (int i = 0; i < PX_STATUS_COUNT; i++)
		*n += s->n_cutovers[i]; /* each cutover counts once, by its trigger */
	if (s->nrecent > 0) {
		const struct px_snap_cutover *x = &s->recent[0]; /* newest first */
		c.session = x->session;
		c.from = index_of(s, x->from);
		c.to = index_of(s, x->to);
		c.offset = x->offset;
		c.reason = x->reason;
	}
	px_snapshot_free(s);
	return c;
}

static void read_check(struct px_handle *h, int64_t off, size_t len)
{
	rig_read_check(h, g_data, off, len);
}

/* Whether request i (0: any) went to a URL containing host. */
static int asked(struct rig *r, int i, const char *host)
{
	for (int j = i ? i : 1; j <= (i ? i : fake_nreq(&r->fake)); j++)
		if (strstr(fake_req(&r->fake, j).url, host))
			return 1;
	return 0;
}

/* ------------------------------------------------------------ ordering */

static const char *const ABCDE[] = { "a", "b", "c", "d", "e" };

static void test_verified_first(void **state)
{
	struct rig *r = rig_cut(ABCDE, 4, NULL, 0, 1);
	uint64_t n;
	set_state(r, 2, VS_VERIFIED);
	set_state(r, 3, VS_VERIFIED);
	struct px_handle *h = rig_open(r, 0, 1);
	assert_int_equal(source_of(r, h), 0);
	read_check(h, 0, 8192); /* a served: it may stand by later */
	struct px_session *s = sess_of(r, h);
	assert_int_equal(px_cutover(s, 0, 5000, PX_ETRANSFER, NULL, 0, px_now_ms() + 5000), PX_OK);
	/* c: verified before unverified b, first by name before d */
	assert_int_equal(source_of(r, h), 2);
	struct cut c = last_cut(r, &n);
	assert_int_equal(c.from, 0);
	assert_int_equal(c.to, 2);
	assert_int_equal(c.offset, 5000);
	assert_int_equal(c.reason, PX_ETRANSFER);
	assert_int_equal(c.session, px_handle_session_id(h));
	assert_int_equal(cutovers(r, PX_ETRANSFER), 1);
	/* the source that failed served these bytes: a verified standby,
	 * last for a while */
	assert_int_equal(state_of(r, 0), VS_VERIFIED);
	assert_true(px_source_bad(r->core, 0, 0, rig_clock()));
	/* a second reader that saw the same failure follows: no new cutover */
	assert_int_equal(px_cutover(s, 0, 5000, PX_ETRANSFER, NULL, 0, px_now_ms() + 5000), PX_OK);
	last_cut(r, &n);
	assert_int_equal(n, 1);
	assert_int_equal(source_of(r, h), 2);
	read_check(h, 100000, 50000);
	assert_true(asked(r, fake_nreq(&r->fake), "c.test"));
	assert_false(asked(r, 0, "b.test"));
	rig_free(r);
}

static void test_skips_rejected_dead_auth(void **state)
{
	struct rig *r = rig_cut(ABCDE, 5, NULL, 0, 1);
	uint64_t n;
	for (size_t k = 1; k < 5; k++)
		set_state(r, k, VS_VERIFIED);
	set_state(r, 1, VS_REJECTED);
	kill_source(r, 2);
	px_provider_auth_failed(r->core, 3, "HTTP 403");
	struct px_handle *h = rig_open(r, 0, 1);
	read_check(h, 0, 4096);
	struct px_session *s = sess_of(r, h);
	int64_t dl = px_now_ms() + 5000;
	assert_int_equal(px_cutover(s, 0, 4096, PX_ESERVER, NULL, 0, dl), PX_OK);
	assert_int_equal(source_of(r, h), 4);
	/* e is gone (404): only a is left, failed lately but verified */
	assert_int_equal(px_cutover(s, 4, 4096, PX_ENOTFOUND, NULL, 0, dl), PX_OK);
	assert_int_equal(source_of(r, h), 0);
	assert_true(dead(r, 4));
	assert_int_equal(last_cut(r, &n).reason, PX_ENOTFOUND);
	/* and when a fails too, nothing can take over */
	assert_int_equal(px_cutover(s, 0, 4096, PX_ETRANSFER, NULL, 0, dl), PX_ENOSOURCE);
	assert_int_equal(source_of(r, h), 0);
	last_cut(r, &n);
	assert_int_equal(n, 2);
	read_check(h, 4096, 4096);
	assert_false(asked(r, 0, "b.test") || asked(r, 0, "c.test") || asked(r, 0, "d.test"));
	rig_free(r);
}

/* health.c's backoff, and what it does to the order. */
static void test_failed_goes_last(void **state)
{
	static const int64_t waits[] = { 5000, 10000, 20000, 40000, 80000, 120000, 120000 };
	struct rig *r = rig_cut(ABCDE, 4, NULL, 0, 1);
	for (size_t k = 0; k < 4; k++)
		set_state(r, k, VS_VERIFIED);
	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
		int64_t t = rig_clock();
		px_source_failed(r->core, 0, 1, PX_ETIMEDOUT, "test");
		assert_true(px_source_bad(r->core, 0, 1, t + waits[i] - 1));
		assert_false(px_source_bad(r->core, 0, 1, t + waits[i]));
	}
	px_source_good(r->core, 0, 1);
	assert_false(px_source_bad(r->core, 0, 1, rig_clock()));
	px_source_failed(r->core, 0, 1, PX_ETIMEDOUT, "test"); /* afresh: 5 s */
	assert_false(px_source_bad(r->core, 0, 1, rig_clock() + 5000));

	struct px_handle *h = rig_open(r, 0, 1);
	assert_int_equal(source_of(r, h), 0);
	struct px_session *s = sess_of(r, h);
	int64_t dl = px_now_ms() + 5000;
	/* within b's backoff: c, though b is first by name (a's credentials
	 * are refused from now on) */
	assert_int_equal(px_cutover(s, 0, 0, PX_EAUTH, NULL, 0, dl), PX_OK);
	assert_int_equal(source_of(r, h), 2);
	/* after it: b again, before d */
	rig_advance(5000);
	assert_int_equal(px_cutover(s, 2, 0, PX_ETRANSFER, NULL, 0, dl), PX_OK);
	assert_int_equal(source_of(r, h), 1);
	read_check(h, 7, 100000);
	assert_true(asked(r, fake_nreq(&r->fake), "b.test"));
	rig_free(r);
}

/* ------------------------------------------------------- under a read */

/* A read whose source fails mid-range goes on from a verified standby at
 * the same byte, after the seam check on the bytes it already has. */
static void read_cuts_over(enum px_status why)
{
	struct rig *r = rig_cut(ABCDE, 2, NULL, 0, 1);
	uint64_t n;
	set_state(r, 1, VS_VERIFIED);
	struct px_handle *h = rig_open(r, 0, 1);
	read_check(h, 0, 4096);
	int i = fake_nreq(&r->fake);
	fake_fail_next(&r->fake, 1, why, 70000);
	read_check(h, 100000, 300000);
	assert_int_equal(fake_nreq(&r->fake), i + 3);
	struct fake_req a = fake_req(&r->fake, i + 1), seam = fake_req(&r->fake, i + 2),
			rest = fake_req(&r->fake, i + 3);
	assert_true(asked(r, i + 1, "a.test") && asked(r, i + 2, "b.test") &&
		    asked(r, i + 3, "b.test"));
	assert_int_equal(a.bytes, 70000);
	assert_int_equal(seam.offset, 170000 - 4096);
	assert_int_equal(seam.length, 4096);
	assert_int_equal(rest.offset, 170000);
	assert_int_equal(rest.length, 230000);
	struct cut c = last_cut(r, &n);
	assert_int_equal(c.offset, 170000);
	assert_int_equal(c.reason, why);
	assert_int_equal(source_of(r, h), 1);
	assert_int_equal(dead(r, 0), why == PX_ENOTFOUND);
	assert_int_equal(auth_failed(r, 0), why == PX_EAUTH);
	rig_free(r);
}

static void test_read_cuts_over(void **state)
{
	read_cuts_over(PX_ETRANSFER);
	read_cuts_over(PX_ESERVER);
	read_cuts_over(PX_EAUTH);
	read_cuts_over(PX_ENOTFOUND);
	read_cuts_over(PX_EBADRESP);
}

/* A verified standby whose bytes before the cut differ is refused for
 * good; the next one takes over. */
static void test_seam_mismatch_refuses(void **state)
{
	struct rig *r = rig_cut(ABCDE, 3, NULL, 0, 1);
	uint64_t n;
	g_bad_host = "b.test";
	set_state(r, 1, VS_VERIFIED);
	set_state(r, 2, VS_VERIFIED);
	struct px_handle *h = rig_open(r, 0, 1);
	read_check(h, 0, 4096);
	int i = fake_nreq(&r->fake);
	fake_fail_next(&r->fake, 1, PX_ETRANSFER, 70000);
	read_check(h, 100000, 300000);
	assert_int_equal(state_of(r, 1), VS_REJECTED);
	assert_int_equal(verified(r, VF_MISMATCH), 1);
	assert_int_equal(source_of(r, h), 2);
	assert_int_equal(last_cut(r, &n).to, 2);
	/* b was asked for the seam only; c for the seam and the rest */
	assert_int_equal(fake_nreq(&r->fake), i + 4);
	assert_true(asked(r, i + 2, "b.test") && asked(r, i + 3, "c.test") &&
		    asked(r, i + 4, "c.test"));
	assert_int_equal(fake_req(&r->fake, i + 2).length, 4096);
	rig_free(r);
}

/* The first bytes of a source that differ from the reference's sample:
 * rejected, the session cuts over (mismatch), the read is served again. */
static void test_screen_mismatch(void **state)
{
	struct rig *r = rig_cut(ABCDE, 2, NULL, 0, 0);
	struct iovec whole = { g_bad, 4096 }, part = { g_bad, 4095 }, off1 = { g_bad + 1, 8192 };
	uint64_t n;
	/* no reference: nothing to compare */
	assert_int_equal(px_standby_screen(r->core, 0, 0, 0, &whole, 1), PX_OK);
	rig_free(r);

	r = rig_cut(ABCDE, 2, NULL, 0, 1);
	g_bad_host = "a.test";
	set_state(r, 1, VS_VERIFIED);
	/* bytes that cover no sample wholly prove nothing; a verified source
	 * is not compared */
	assert_int_equal(px_standby_screen(r->core, 0, 0, 0, &part, 1), PX_OK);
	assert_int_equal(px_standby_screen(r->core, 0, 0, 1, &off1, 1), PX_OK);
	assert_int_equal(px_standby_screen(r->core, 0, 1, 0, &whole, 1), PX_OK);
	assert_int_equal(state_of(r, 0), VS_UNKNOWN);
	struct px_handle *h = rig_open(r, 0, 1);
	assert_int_equal(source_of(r, h), 0);
	read_check(h, 0, 64 * 1024); /* the bytes of b, never those of a */
	assert_int_equal(state_of(r, 0), VS_REJECTED);
	assert_int_equal(source_of(r, h), 1);
	assert_int_equal(last_cut(r, &n).reason, PX_EMISMATCH);
	assert_int_equal(cutovers(r, PX_EMISMATCH), 1);
	read_check(h, 2 * MiB, 10000);
	rig_free(r);
}

/* ------------------------------------------ from the first second */

/*
 * Regression test for issue 25 (standby.c, cutover_locked): with no
 * reference fingerprint yet (a never-played asset, before standby_delay),
 * the origin a session reads from dies for good: the old cutover wanted two
 * sources that agree, found one fingerprint (the dead origin gives none)
 * and failed the read (EIO, fallback_exhausted). The session's reference is
 * the source it was served from: b matches every sample a served, so b
 * takes over at the same byte.
 */
static void test_first_minute_two_sources(void **state)
{
	struct rig *r = rig_cut(ABCDE, 2, NULL, 0, 0);
	uint64_t n;
	struct px_handle *h = rig_open(r, 0, 1);
	assert_int_equal(source_of(r, h), 0);
	read_check(h, 0, 4096); /* a's first sample passes through */
	fake_host_down(&r->fake, "a.test", PX_ECONNECT, 0);
	read_check(h, 100000, 300000);
	assert_int_equal(source_of(r, h), 1);
	struct cut c = last_cut(r, &n);
	assert_int_equal(n, 1);
	assert_int_equal(c.offset, 100000);
	/* nothing was rejected for good: no reference judged anyone */
	assert_int_not_equal(state_of(r, 0), VS_REJECTED);
	assert_int_not_equal(state_of(r, 1), VS_REJECTED);
	read_check(h, SIZE - 5000, 5000);
	rig_free(r);
}

/*
 * Regression test for issue 25: three sources, no reference yet, the
 * served one dies and the first standby differs from it (in a sample the
 * sweep reads): the old cutover found "2 fingerprint(s) taken, no two
 * agree" and failed the read. c, identical to a, takes over; b, which the
 * reader's bytes contradict, is not this session's standby, and is not
 * rejected for good either (nothing says a is right and b wrong).
 */
static void test_first_minute_one_standby_differs(void **state)
{
	struct rig *r = rig_cut(ABCDE, 3, NULL, 0, 0);
	g_bad_host = "b.test";
	struct px_handle *h = rig_open(r, 0, 1);
	assert_int_equal(source_of(r, h), 0);
	read_check(h, 0, 4096);
	fake_host_down(&r->fake, "a.test", PX_ECONNECT, 0);
	read_check(h, 100000, 300000);
	assert_int_equal(source_of(r, h), 2);
	assert_int_not_equal(state_of(r, 1), VS_REJECTED);
	read_check(h, 2 * MiB, 100000);
	rig_free(r);
}

/* Whether a request from i+1 on went to a URL containing host. */
static int asked_since(struct rig *r, int i, const char *host)
{
	for (int j = i + 1; j <= fake_nreq(&r->fake); j++)
		if (strstr(fake_req(&r->fake, j).url, host))
			return 1;
	return 0;
}

/*
 * Regression test for issue 25: when no standby holds the served bytes
 * (b differs from a, a is dead), the read fails, but a later read costs b
 * no new sweep: its fingerprint is kept. The old cutover took every
 * candidate's fingerprint again at each failed read (the surviving origin
 * got 456 requests of 4 KiB in 5 s) and doubled the reference's backoff
 * per read, not per unit of time.
 */
static void test_no_identical_standby_costs_one_sweep(void **state)
{
	unsigned char buf[5000];
	size_t got;
	struct rig *r = rig_cut(ABCDE, 2, NULL, 0, 0);
	g_bad_host = "b.test";
	r->cfg.read_timeout_ms = 3000;
	struct px_handle *h = rig_open(r, 0, 1);
	read_check(h, 0, 4096);
	fake_host_down(&r->fake, "a.test", PX_ECONNECT, 0);
	assert_int_not_equal(px_handle_read(h, 100000, sizeof(buf), buf, &got), PX_OK);
	assert_int_equal(source_of(r, h), 0);
	int i = fake_nreq(&r->fake);
	assert_int_equal(px_cutover(sess_of(r, h), 0, 200000, PX_ECONNECT, NULL, 0,
				    px_now_ms() + 2000), PX_ENOSOURCE);
	assert_int_equal(px_cutover(sess_of(r, h), 0, 300000, PX_ECONNECT, NULL, 0,
				    px_now_ms() + 2000), PX_ENOSOURCE);
	assert_false(asked_since(r, i, "b.test"));
	rig_free(r);
}

/* ----------------------------------------------------- nothing left */

static void test_no_standby_exhausted(void **state)
{
	unsigned char buf[5000];
	size_t got = 1;
	uint64_t n;
	char why[300];
	struct rig *r = rig_cut(ABCDE, 3, NULL, 0, 1);
	set_state(r, 1, VS_REJECTED);
	set_state(r, 2, VS_VERIFIED);
	kill_source(r, 2);
	struct px_handle *h = rig_open(r, 0, 1);
	read_check(h, 0, 4096);
	uint64_t id = px_handle_session_id(h);
	int i = fake_nreq(&r->fake);
	fake_fail_next(&r->fake, 1000, PX_ETRANSFER, 0);
	int64_t t0 = px_now_ms();
	assert_int_equal(px_handle_read(h, 1000, sizeof(buf), buf, &got), PX_ETRANSFER);
	assert_true(px_now_ms() - t0 < r->cfg.read_timeout_ms);
	assert_int_equal(got, 0);
	/* the active source once and `retries` more; no standby asked */
	assert_int_equal(fake_nreq(&r->fake), i + 1 + r->cfg.retries);
	assert_false(asked(r, 0, "b.test") || asked(r, 0, "c.test"));
	last_cut(r, &n);
	assert_int_equal(n, 0);
	assert_int_equal(exhausted(r, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "offset 1000"));
	assert_int_equal(px_cutover(sess_of(r, h), 0, 1000, PX_ETRANSFER, NULL, 0,
				    px_now_ms() + 2000), PX_ENOSOURCE);
	/* the failed session is not joined again */
	fake_fail_next(&r->fake, 0, PX_OK, 0);
	struct px_handle *h2 = rig_open(r, 0, 1);
	assert_int_not_equal(px_handle_session_id(h2), id);
	read_check(h2, 1000, 5000);
	rig_free(r);
}

/*
 * Regression test for a fixed bug (proxy/source/provider.c, choose()): a
 * new session could start on a source rejected for good (choose() skipped
 * dead sources and drained or auth-refused providers, not VS_REJECTED
 * ones, which candidates() skips for cutovers), and px_standby_screen()
 * does not save the reader: it compares only samples a read covers wholly,
 * and stops once one matched. The session must read b, never a's bytes,
 * which differ at SEAM_BAD.
 */
static void test_new_session_avoids_rejected(void **state)
{
	struct rig *r = rig_cut(ABCDE, 2, NULL, 0, 1);
	g_bad_host = "a.test";
	set_state(r, 0, VS_REJECTED);
	set_state(r, 1, VS_VERIFIED);
	struct px_handle *h = rig_open(r, 0, 1);
	read_check(h, SEAM_BAD - 50, 100);
	assert_int_equal(source_of(r, h), 1);
	rig_free(r);
}

/* -------------------------------------------------- path standbys */

/* Unverified path standbys get the size gate and the sweep now, with real
 * preads: the one of another size and the one with a differing sample are
 * rejected, the identical one takes over and serves the rest. */
static void test_unverified_path_standbys(void **state)
{
	static const char *const paths[] = { "short.bin", "other.bin", "same.bin" };
	struct rig *r = rig_cut(ABCDE, 1, paths, 3, 1);
	uint64_t n;
	struct px_handle *h = rig_open(r, 0, 1);
	assert_int_equal(source_of(r, h), 0);
	read_check(h, 0, 4096);
	fake_fail_next(&r->fake, 1, PX_ETRANSFER, 70000);
	read_check(h, 100000, 300000);
	assert_int_equal(state_of(r, 1), VS_REJECTED);
	assert_int_equal(state_of(r, 2), VS_REJECTED);
	assert_int_equal(state_of(r, 3), VS_VERIFIED);
	assert_int_equal(verified(r, VF_SIZE_MISMATCH), 1);
	assert_int_equal(verified(r, VF_MISMATCH), 1);
	assert_int_equal(verified(r, VF_MATCH), 1);
	assert_int_equal(source_of(r, h), 3);
	assert_int_equal(last_cut(r, &n).offset, 170000);
	int i = fake_nreq(&r->fake);
	read_check(h, SIZE - 9999, 9999);
	assert_int_equal(fake_nreq(&r->fake), i); /* pread, no transfer */
	rig_free(r);
}

/* ------------------------------------------------------------------ main */

static int write_file(const char *name, const unsigned char *p, int64_t n)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, (size_t)n, f) == (size_t)n;
	return f && fclose(f) == 0 && ok ? 0 : -1;
}

static int group_setup(void **state)
{
	struct vf_plan plan;
	g_data = malloc(SIZE);
	g_bad = malloc(SIZE);
	snprintf(g_dir, sizeof(g_dir), "/tmp/seamfs-cutover-XXXXXX");
	if (!g_data || !g_bad || !mkdtemp(g_dir))
		return -1;
	for (int64_t i = 0; i < SIZE; i++)
		g_data[i] = (unsigned char)((i * 2654435761u) >> 13);
	memcpy(g_bad, g_data, SIZE);
	vf_sample_plan(SIZE, &plan);
	g_bad[plan.off[3] + 7] ^= 0x5a; /* a sample the sweep reads */
	if (write_file("short.bin", g_data, SIZE - 1) || write_file("other.bin", g_bad, SIZE))
		return -1;
	for (int i = 0; i < 10; i++) {
		g_bad[100 + i] ^= 0xff;      /* sample 0, for the screen */
		g_bad[SEAM_BAD + i] ^= 0xff; /* in no sample: the seam's */
	}
	px_log_setup(PX_LOG_ERROR, 0);
	return write_file("same.bin", g_data, SIZE);
}

static int group_teardown(void **state)
{
	static const char *const files[] = { "short.bin", "other.bin", "same.bin" };
	char path[400];
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", g_dir, files[i]);
		unlink(path);
	}
	rmdir(g_dir);
	free(g_data);
	free(g_bad);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_verified_first, rig_teardown),
		cmocka_unit_test_teardown(test_skips_rejected_dead_auth, rig_teardown),
		cmocka_unit_test_teardown(test_failed_goes_last, rig_teardown),
		cmocka_unit_test_teardown(test_read_cuts_over, rig_teardown),
		cmocka_unit_test_teardown(test_seam_mismatch_refuses, rig_teardown),
		cmocka_unit_test_teardown(test_screen_mismatch, rig_teardown),
		cmocka_unit_test_teardown(test_no_standby_exhausted, rig_teardown),
		cmocka_unit_test_teardown(test_unverified_path_standbys, rig_teardown),
		cmocka_unit_test_teardown(test_new_session_avoids_rejected, rig_teardown),
		cmocka_unit_test_teardown(test_first_minute_two_sources, rig_teardown),
		cmocka_unit_test_teardown(test_first_minute_one_standby_differs, rig_teardown),
		cmocka_unit_test_teardown(test_no_identical_standby_costs_one_sweep, rig_teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
