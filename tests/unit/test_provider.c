/*
 * test_provider.c - providers at run time (provider.c) against the fake
 * fetcher and a fake clock: balancing and its tie-break, burst spread,
 * session affinity across reopens and its TTL, slot accounting through
 * reopen and seek churn, waiting and refusing at the limit, lingering
 * sessions and background work giving up their slots (to whoever waited
 * first, never to the open or cutover that ended them), a cutover while a
 * transfer waits for a slot, liveness drop and return, drained providers,
 * and the status the daemon shows.
 *
 * Every read is checked against the bytes the fake serves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "context.h"
#include "rangeread.h"
#include "health.h"
#include "metrics.h"
#include "provider.h"
#include "reload.h"
#include "report.h"
#include "sources.h"
#include "standby.h"
#include "fake_fetch.h"
#include "rig.h"
#include "session.h"

#define KiB (1LL << 10)
#define MiB (1LL << 20)
#define SIZE (8 * MiB + 777)

static unsigned char *g_data;



/* Every source holds the same bytes. */
static const unsigned char *data_for(const char *url)
{
	return strncmp(url, "http://", 7) == 0 ? g_data : NULL;
}

/*
 * A rig (rig.h) with one asset whose sources are on the providers named in
 * names (catalog order), each with max_connections maxc (0: none); drained
 * names one provider that starts drained (NULL: none). Threaded fake, the
 * fake clock.
 */
static struct rig *provider_rig(const char *const *names, int n, int maxc, const char *drained)
{
	char text[4096];
	size_t k = 0;

	k += (size_t)snprintf(text + k, sizeof(text) - k, "{\"providers\": [");
	for (int i = 0; i < n; i++) {
		k += (size_t)snprintf(text + k, sizeof(text) - k, "%s{\"name\": \"%s\"", i ? ", " : "",
				      names[i]);
		if (maxc)
			k += (size_t)snprintf(text + k, sizeof(text) - k, ", \"max_connections\": %d",
					      maxc);
		if (drained && strcmp(drained, names[i]) == 0)
			k += (size_t)snprintf(text + k, sizeof(text) - k, ", \"drained\": true");
		k += (size_t)snprintf(text + k, sizeof(text) - k, "}");
	}
	k += (size_t)snprintf(text + k, sizeof(text) - k,
			      "], \"assets\": [{\"id\": \"a\", \"path\": \"a.bin\", \"size\": %lld, "
			      "\"mtime\": 1600000000, \"sources\": [", (long long)SIZE);
	for (int i = 0; i < n; i++)
		k += (size_t)snprintf(text + k, sizeof(text) - k,
				      "%s{\"url\": \"http://%s.test/a.bin\", \"provider\": \"%s\"}",
				      i ? ", " : "", names[i], names[i]);
	k += (size_t)snprintf(text + k, sizeof(text) - k, "]}]}");
	assert_true(k < sizeof(text));

	struct rig_opts o = {
		.catalog = text, .size = SIZE, .threaded = 1, .chunk = 64 * KiB,
		.data_for = data_for, .fallback = g_data, .stream_min = 1 * MiB,
		.clock = rig_clock,
	};
	struct rig *r = rig_new(&o);
	r->cfg.read_timeout_ms = 5000;
	r->cfg.admission_timeout_ms = 300;
	r->cfg.head_size = 0;
	r->cfg.tail_size = 0;
	r->cfg.session_ttl_ms = 15000;
	r->cfg.liveness_ttl_ms = 30000;
	r->cfg.liveness_interval_ms = 10000;
	return r;
}

static size_t prov_of(struct rig *r, const char *name)
{
	for (size_t i = 0; i < r->cat->nproviders; i++)
		if (strcmp(r->cat->providers[i].name, name) == 0)
			return i;
	fail_msg("no provider %s", name);
	return 0;
}

static int sessions_on(struct rig *r, const char *name)
{
	return px_provider_sessions(r->core, prov_of(r, name));
}

static const char *provider_of(struct rig *r, struct px_handle *h)
{
	long prov = px_provider_of_session(r->core, px_handle_session_id(h));
	assert_true(prov >= 0 && (size_t)prov < r->cat->nproviders);
	return r->cat->providers[prov].name;
}

static void read_check(struct px_handle *h, int64_t off, size_t len)
{
	unsigned char *buf = malloc(len);
	size_t got = 0;
	assert_non_null(buf);
	assert_int_equal(px_handle_read(h, off, len, buf, &got), PX_OK);
	assert_int_equal(got, len);
	if (memcmp(buf, g_data + off, len) != 0)
		fail_msg("read %lld+%zu: wrong bytes", (long long)off, len);
	free(buf);
}

static struct px_handle *open_as(struct rig *r, uint64_t client)
{
	struct px_handle *h = NULL;
	assert_int_equal(px_handle_open(r->core, 0, client, &h), PX_OK);
	assert_non_null(h);
	return h;
}

/* ------------------------------------------------------------ balancing */

static void test_tie_broken_by_name(void **state)
{
	static const char *const names[] = { "beta", "alpha", "gamma" };
	struct rig *r = provider_rig(names, 3, 0, NULL);
	rig_start(r, NULL, 0);
	struct px_handle *h1 = open_as(r, 1), *h2 = open_as(r, 2), *h3 = open_as(r, 3),
			 *h4 = open_as(r, 4);
	/* equal counts: the first by name, whatever the catalog order */
	assert_string_equal(provider_of(r, h1), "alpha");
	assert_string_equal(provider_of(r, h2), "beta");
	assert_string_equal(provider_of(r, h3), "gamma");
	assert_string_equal(provider_of(r, h4), "alpha");
	read_check(h2, 12345, 70000);
	assert_string_equal(fake_req(&r->fake, 1).url, "http://beta.test/a.bin");
	px_handle_close(h1);
	px_handle_close(h2);
	px_handle_close(h3);
	px_handle_close(h4);
	rig_free(r);
}

static void test_burst_spreads_evenly(void **state)
{
	static const char *const names[] = { "p1", "p2", "p3" };
	struct rig *r = provider_rig(names, 3, 0, NULL);
	struct px_handle *h[100];
	rig_start(r, NULL, 0);
	/* 100 opens at once, before any byte moves: each counts at once */
	for (int i = 0; i < 100; i++)
		h[i] = open_as(r, 100 + (uint64_t)i);
	int a = sessions_on(r, "p1"), b = sessions_on(r, "p2"), c = sessions_on(r, "p3");
	assert_int_equal(a + b + c, 100);
	assert_true(a - b <= 1 && b - a <= 1 && a - c <= 1 && c - a <= 1);
	for (int i = 0; i < 100; i++)
		px_handle_close(h[i]);
	rig_free(r);
}

static void test_drained_gets_no_session(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 0, "a");
	rig_start(r, NULL, 0);
	struct px_handle *h[6];
	for (int i = 0; i < 6; i++)
		h[i] = open_as(r, 10 + (uint64_t)i);
	assert_int_equal(sessions_on(r, "a"), 0);
	assert_int_equal(sessions_on(r, "b"), 6);
	char *js = px_report_json(r->core);
	assert_non_null(js);
	assert_non_null(strstr(js, "\"state\": \"drained\""));
	free(js);
	for (int i = 0; i < 6; i++)
		px_handle_close(h[i]);
	rig_free(r);

	/* every provider drained: nothing can serve, said in words */
	static const char *const one[] = { "only" };
	r = provider_rig(one, 1, 0, "only");
	rig_start(r, NULL, 0);
	struct px_handle *x = NULL;
	assert_int_equal(px_handle_open(r->core, 0, 1, &x), PX_ENOSOURCE);
	assert_null(x);
	rig_free(r);
}

/* ------------------------------------------------------------- affinity */

static void test_reopen_joins_until_ttl(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 0, NULL);
	rig_start(r, NULL, 0);
	struct px_handle *h = open_as(r, 7);
	uint64_t id = px_handle_session_id(h);
	const char *prov = provider_of(r, h);
	read_check(h, 0, 4096);
	px_handle_close(h);
	/* another client now: it goes to the other provider */
	struct px_handle *other = open_as(r, 8);
	assert_string_not_equal(provider_of(r, other), prov);

	/* client 7 reopens within the TTL: the same session and source,
	 * also after seeks and while two handles are open at once */
	rig_advance(14000);
	h = open_as(r, 7);
	struct px_handle *h2 = open_as(r, 7);
	assert_int_equal(px_handle_session_id(h), id);
	assert_int_equal(px_handle_session_id(h2), id);
	read_check(h, 5 * MiB, 8192);
	read_check(h2, 100, 8192);
	read_check(h, 2 * MiB, 100000);
	for (int i = 1; i <= fake_nreq(&r->fake); i++) {
		struct fake_req q = fake_req(&r->fake, i);
		if (q.offset != 0 || q.length != 4096)
			continue;
		assert_true(strstr(q.url, prov) != NULL);
	}
	px_handle_close(h);
	px_handle_close(h2);

	/* past the TTL the session is gone: a new one */
	rig_advance(15001);
	px_providers_tick(r->core);
	h = open_as(r, 7);
	assert_int_not_equal(px_handle_session_id(h), id);
	px_handle_close(h);
	px_handle_close(other);
	rig_free(r);
}

/* ---------------------------------------------------------------- slots */

struct reader {
	struct px_handle *h;
	_Atomic int stop;
	int bad, reads;
};

/* Reads 64 KiB pieces at scattered offsets until told to stop; counts
 * failed or wrong reads (no cmocka asserts off the test thread). */
static void *reader_thread(void *arg)
{
	struct reader *rd = arg;
	unsigned char *buf = malloc(64 * KiB);
	uint64_t x = 88172645463325252ULL;
	while (buf && !atomic_load(&rd->stop)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int64_t off = (int64_t)(x % (uint64_t)(SIZE - 64 * KiB));
		size_t got = 0;
		if (px_handle_read(rd->h, off, 64 * KiB, buf, &got) != PX_OK || got != 64 * KiB ||
		    memcmp(buf, g_data + off, 64 * KiB) != 0)
			rd->bad++;
		rd->reads++;
	}
	free(buf);
	return NULL;
}

static void test_slots_hold_through_churn(void **state)
{
	static const char *const names[] = { "solo" };
	struct rig *r = provider_rig(names, 1, 2, NULL);
	r->cfg.admission_timeout_ms = 5000;
	rig_start(r, NULL, 0);
	/* one client reopens and seeks 50 times in a row while a handle of its
	 * own and another client's read beside it: never more than 2
	 * transfers open at once, and every read is served */
	struct reader by = { open_as(r, 2), 0, 0, 0 }, mine = { open_as(r, 1), 0, 0, 0 };
	pthread_t t1, t2;
	assert_int_equal(pthread_create(&t1, NULL, reader_thread, &by), 0);
	assert_int_equal(pthread_create(&t2, NULL, reader_thread, &mine), 0);
	for (int i = 0; i < 50; i++) {
		struct px_handle *h = open_as(r, 1);
		int64_t off = (int64_t)((i * 1000003LL) % (SIZE - 1200 * KiB));
		read_check(h, off, 64 * KiB);
		/* sequential: earns a stream, which the next seek supersedes */
		for (int k = 0; k < 8; k++)
			read_check(h, off + 64 * KiB + k * 128 * KiB, 128 * KiB);
		read_check(h, (off * 3) % (SIZE - 64 * KiB), 64 * KiB);
		px_handle_close(h);
	}
	atomic_store(&by.stop, 1);
	atomic_store(&mine.stop, 1);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	assert_int_equal(by.bad, 0);
	assert_int_equal(mine.bad, 0);
	assert_true(by.reads > 0 && mine.reads > 0);
	px_handle_close(by.h);
	px_handle_close(mine.h);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	pthread_mutex_lock(&r->fake.lock);
	int max_open = r->fake.max_open_reqs;
	pthread_mutex_unlock(&r->fake.lock);
	assert_true(max_open <= 2);
	assert_true(max_open >= 1);
	rig_free(r);
}

static void test_wait_then_refuse_at_limit(void **state)
{
	static const char *const names[] = { "x", "y" };
	struct rig *r = provider_rig(names, 2, 1, NULL);
	rig_start(r, NULL, 0);
	struct px_handle *a = open_as(r, 1), *b = open_as(r, 2), *c = NULL;
	/* both providers hold one session each: a third client waits for
	 * admission_timeout, then is refused */
	int64_t t0 = px_now_ms();
	assert_int_equal(px_handle_open(r->core, 0, 3, &c), PX_EBUSY);
	int64_t took = px_now_ms() - t0;
	assert_true(took >= 250 && took < 3000);
	char *js = px_report_json(r->core);
	assert_non_null(strstr(js, "all providers at their limit"));
	free(js);

	/* a session's own second handle is admitted at the limit */
	struct px_handle *a2 = open_as(r, 1);
	read_check(a2, 1000, 5000);
	read_check(a, 3 * MiB, 5000);
	px_handle_close(a2);

	/* a closed session lingering for a reopen gives its slot up */
	px_handle_close(b);
	c = open_as(r, 3);
	assert_string_equal(provider_of(r, c), "y");
	read_check(c, 0, 70000);
	px_handle_close(c);
	px_handle_close(a);
	rig_free(r);
}

struct opener {
	struct rig *r;
	uint64_t client;
	enum px_status st;
	struct px_handle *h;
	_Atomic int returned;      /* px_handle_open has returned */
};

static void *open_thread(void *arg)
{
	struct opener *o = arg;
	o->st = px_handle_open(o->r->core, 0, o->client, &o->h);
	atomic_store(&o->returned, 1);
	return NULL;
}

static void test_waiter_admitted_when_slot_frees(void **state)
{
	static const char *const names[] = { "x" };
	struct rig *r = provider_rig(names, 1, 1, NULL);
	r->cfg.admission_timeout_ms = 5000;
	r->cfg.session_ttl_ms = 0; /* a close ends the session at once */
	rig_start(r, NULL, 0);
	struct px_handle *a = open_as(r, 1);
	struct opener o = { r, 2, PX_EINVAL, NULL, 0 };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, open_thread, &o), 0);
	/* it waits: nothing frees */
	struct timespec ts = { 0, 200 * 1000000 };
	nanosleep(&ts, NULL);
	int waiting = !atomic_load(&o.returned);
	assert_true(waiting);
	px_handle_close(a);
	pthread_join(t, NULL);
	assert_int_equal(o.st, PX_OK);
	read_check(o.h, 4 * MiB, 12345);
	px_handle_close(o.h);
	rig_free(r);
}

struct bg {
	pthread_mutex_t lock;
	int done;
	enum px_status st;
};

static int bg_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	return 1;
}

static void bg_done(void *ctx, const struct px_fetch_result *res)
{
	struct bg *b = ctx;
	pthread_mutex_lock(&b->lock);
	b->done = 1;
	b->st = res->status;
	pthread_mutex_unlock(&b->lock);
}

static void test_background_yields_to_playback(void **state)
{
	static const char *const names[] = { "x" };
	struct rig *r = provider_rig(names, 1, 1, NULL);
	r->cfg.admission_timeout_ms = 3000;
	rig_start(r, NULL, 0);
	/* a background transfer (say, a verification probe) that never ends
	 * by itself holds the only slot */
	struct bg b = { PTHREAD_MUTEX_INITIALIZER, 0, PX_OK };
	r->fake.hang_from = 1;
	struct px_fetch_params fp = px_source_range(r->core, 0, 0, 0, SIZE);
	struct px_fetch_cb cb = { bg_data, bg_done, &b };
	uint64_t id;
	assert_int_equal(px_xfer_submit(r->core, 0, NULL, 1, px_now_ms(), &fp, &cb, &id), PX_OK);
	/* a second background transfer finds no slot and does not wait */
	struct bg b2 = { PTHREAD_MUTEX_INITIALIZER, 0, PX_OK };
	struct px_fetch_cb cb2 = { bg_data, bg_done, &b2 };
	assert_int_equal(px_xfer_submit(r->core, 0, NULL, 1, px_now_ms(), &fp, &cb2, &id),
			 PX_EBUSY);
	pthread_mutex_lock(&r->fake.lock);
	r->fake.hang_from = 0;
	pthread_mutex_unlock(&r->fake.lock);
	/* playback opens and reads: the background transfer is cancelled */
	struct px_handle *h = open_as(r, 1);
	read_check(h, 777, 99999);
	pthread_mutex_lock(&b.lock);
	int bdone = b.done;
	enum px_status bst = b.st;
	pthread_mutex_unlock(&b.lock);
	assert_int_equal(bdone, 1);
	assert_int_equal(bst, PX_ECANCELED);
	assert_true(fake_counts(&r->fake).max_open_reqs <= 1);
	px_handle_close(h);
	rig_free(r);
}

struct bg_submit {
	struct rig *r;
	size_t prov;
	struct bg b;
	pthread_t t;
	enum px_status st;
};

static void *bg_submit_main(void *arg)
{
	struct bg_submit *g = arg;
	struct px_fetch_params fp = px_source_range(g->r->core, 0, g->prov, 0, 64 * KiB);
	struct px_fetch_cb cb = { bg_data, bg_done, &g->b };
	uint64_t id;
	g->st = px_xfer_submit(g->r->core, g->prov, NULL, 1, px_now_ms() + 3000, &fp, &cb, &id);
	return NULL;
}

/* Starts a background transfer of provider prov from a thread of its own
 * and returns once it waits in line for a slot. */
static void start_waiter(struct rig *r, size_t prov, struct bg_submit *g)
{
	*g = (struct bg_submit){ .r = r, .prov = prov, .b = { PTHREAD_MUTEX_INITIALIZER, 0, PX_OK } };
	assert_int_equal(pthread_create(&g->t, NULL, bg_submit_main, g), 0);
	int queued = 0;
	for (int i = 0; i < 2000 && !queued; i++) {
		pthread_mutex_lock(px_prov_lock(r->core));
		queued = px_prov_rt(r->core, prov)->waitq != NULL;
		pthread_mutex_unlock(px_prov_lock(r->core));
		if (!queued)
			usleep(500);
	}
	assert_true(queued);
}

/* Ends a round's lingering sessions once their transfers have ended
 * (a transfer's end comes from the fetcher's thread, after its read
 * returned; 3 s at most), so that the next round starts afresh. */
static void end_round(struct rig *r)
{
	int busy = 1;
	for (int i = 0; i < 6000 && busy; i++) {
		busy = 0;
		pthread_mutex_lock(px_prov_lock(r->core));
		for (size_t k = 0; k < r->cat->nproviders; k++)
			busy += px_prov_rt(r->core, k)->xfers;
		pthread_mutex_unlock(px_prov_lock(r->core));
		if (busy)
			usleep(500);
	}
	assert_int_equal(busy, 0);
	rig_advance(15001);
	px_providers_tick(r->core);
}

/* Waits (3 s at most) for start_waiter's transfer to end: its slot is
 * free again, and g may go out of scope. */
static void end_waiter(struct bg_submit *g)
{
	pthread_join(g->t, NULL);
	int done = 0;
	for (int i = 0; i < 6000 && !done; i++) {
		pthread_mutex_lock(&g->b.lock);
		done = g->st != PX_OK || g->b.done;
		pthread_mutex_unlock(&g->b.lock);
		if (!done)
			usleep(500);
	}
	assert_true(done);
}

/* A transfer waits in line for a provider's only slot, which a session
 * holds; the session closes (it lingers for a reopen) and another client
 * opens at once. The open ends the lingering session, and its slot goes
 * to the transfer that waited: the open takes no slot beside it (it waits
 * for one). On 3a77d67 the open took the slot it had freed although the
 * waiter had just been given it: two transfers on a provider of one (the
 * checker's seed 1522 under load: "p1 had 2 transfers open at once,
 * max_connections 1"). The race is the open's against the waiter's own
 * wakeup: many rounds. */
static void test_open_leaves_freed_slot_to_waiter(void **state)
{
	static const char *const names[] = { "x" };
	struct rig *r = provider_rig(names, 1, 1, NULL);
	r->cfg.admission_timeout_ms = 3000;
	rig_start(r, NULL, 0);
	for (int round = 0; round < 100; round++) {
		struct px_handle *a = open_as(r, 1000 + 2 * (uint64_t)round);
		struct bg_submit g;
		start_waiter(r, 0, &g);
		px_handle_close(a);
		struct px_handle *b = open_as(r, 1001 + 2 * (uint64_t)round);
		pthread_mutex_lock(px_prov_lock(r->core));
		int held = px_prov_rt(r->core, 0)->held;
		pthread_mutex_unlock(px_prov_lock(r->core));
		if (held > 1)
			fail_msg("round %d: %d slots held, max_connections 1", round, held);
		read_check(b, 4096, 8192);
		end_waiter(&g);
		px_handle_close(b);
		end_round(r);
	}
	assert_true(fake_counts(&r->fake).max_open_reqs <= 1);
	rig_free(r);
}

/* The same for a cutover: a session moving to a provider whose only slot
 * a lingering session holds while a transfer waits for it. The move ends
 * the lingering session, the waiter gets the slot, and the move finds no
 * room (PX_EBUSY) instead of taking a second one. */
static void test_switch_leaves_freed_slot_to_waiter(void **state)
{
	static const char *const names[] = { "x", "y" };
	struct rig *r = provider_rig(names, 2, 1, NULL);
	r->cfg.admission_timeout_ms = 3000;
	rig_start(r, NULL, 0);
	size_t x = prov_of(r, "x");
	for (int round = 0; round < 100; round++) {
		struct px_handle *a = open_as(r, 5000 + 2 * (uint64_t)round);
		struct px_handle *b = open_as(r, 5001 + 2 * (uint64_t)round);
		assert_string_equal(provider_of(r, a), "x");
		assert_string_equal(provider_of(r, b), "y");
		struct bg_submit g;
		start_waiter(r, x, &g);
		px_handle_close(a);
		enum px_status st = px_session_switch(px_handle_session(b), 0);
		pthread_mutex_lock(px_prov_lock(r->core));
		int held = px_prov_rt(r->core, x)->held;
		pthread_mutex_unlock(px_prov_lock(r->core));
		if (held > 1)
			fail_msg("round %d: %d slots held, max_connections 1", round, held);
		assert_true(st == PX_OK || st == PX_EBUSY);
		end_waiter(&g);
		read_check(b, 4096, 8192);
		px_handle_close(b);
		/* where a and b go next round (x, then y) depends on no
		 * earlier round */
		end_round(r);
	}
	assert_true(fake_counts(&r->fake).max_open_reqs <= 1);
	rig_free(r);
}

/* ------------------------------------------------------------- liveness */

static void test_liveness_drop_and_return(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 0, NULL);
	r->cfg.retries = 0;
	rig_start(r, NULL, 0);
	/* a's connection is refused */
	struct px_handle *h = open_as(r, 1);
	assert_string_equal(provider_of(r, h), "a");
	pthread_mutex_lock(&r->fake.lock);
	r->fake.fail_from = 1;
	r->fake.fail_count = 1;
	r->fake.fail_after = 0;
	r->fake.fail_status = PX_ECONNECT;
	pthread_mutex_unlock(&r->fake.lock);
	unsigned char buf[4096];
	size_t got;
	assert_int_equal(px_handle_read(h, 0, sizeof(buf), buf, &got), PX_ECONNECT);
	px_handle_close(h);
	/* failing: new sessions go to b first, even where a has fewer */
	struct px_handle *x = open_as(r, 2), *y = open_as(r, 3);
	assert_string_equal(provider_of(r, x), "b");
	assert_string_equal(provider_of(r, y), "b");
	px_handle_close(x);
	px_handle_close(y);
	/* after liveness_ttl it is down, and the status says why */
	rig_advance(30001);
	char *js = px_report_json(r->core);
	assert_non_null(strstr(js, "\"state\": \"down\""));
	assert_non_null(strstr(js, "connection failed"));
	free(js);
	/* its first good answer (the active probe) brings it back */
	int n = fake_nreq(&r->fake);
	rig_advance(10001);
	px_providers_tick(r->core);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_true(fake_nreq(&r->fake) > n);
	assert_true(strstr(fake_req(&r->fake, n + 1).url, "a.test") != NULL ||
		    strstr(fake_req(&r->fake, fake_nreq(&r->fake)).url, "a.test") != NULL);
	js = px_report_json(r->core);
	assert_null(strstr(js, "\"state\": \"down\""));
	free(js);
	rig_advance(20000);
	px_providers_tick(r->core); /* the lingering sessions end */
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	h = open_as(r, 9);
	assert_string_equal(provider_of(r, h), "a");
	read_check(h, 3, 3000);
	px_handle_close(h);
	rig_free(r);
}

/* An old transfer's bytes: takes the first chunk, then pauses, as a stream
 * whose window is full; counts its end. */
struct old_xfer {
	_Atomic int chunks, done;
};

static int old_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct old_xfer *o = ctx;
	(void)off, (void)buf, (void)len;
	return atomic_fetch_add(&o->chunks, 1) == 0;
}

static void old_done(void *ctx, const struct px_fetch_result *res)
{
	struct old_xfer *o = ctx;
	(void)res;
	atomic_store(&o->done, 1);
}

/* A transfer that began before its provider failed (a paused stream whose
 * bytes sat in its socket) ends with bytes after the failure: that is no
 * answer of the server now, so the provider stays failing and goes down
 * after liveness_ttl. On 88a783a it was "answers again" at once. A probe
 * sent later brings it back. */
static void test_liveness_ignores_old_transfers(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 0, NULL);
	r->cfg.retries = 0;
	rig_start(r, NULL, 0);
	struct old_xfer o = { 0, 0 };
	struct px_fetch_params fp = px_source_range(r->core, 0, 0, 0, 1 * MiB);
	struct px_fetch_cb cb = { old_data, old_done, &o };
	uint64_t id;
	assert_int_equal(px_xfer_submit(r->core, prov_of(r, "a"), NULL, 1, px_now_ms() + 5000,
					&fp, &cb, &id), PX_OK);
	assert_true(fake_wait(&r->fake, req_paused, 1, 5000));
	/* then a's connections are refused */
	struct px_handle *h = open_as(r, 1);
	assert_string_equal(provider_of(r, h), "a");
	pthread_mutex_lock(&r->fake.lock);
	r->fake.fail_from = 2;
	r->fake.fail_count = 1;
	r->fake.fail_after = 0;
	r->fake.fail_status = PX_ECONNECT;
	pthread_mutex_unlock(&r->fake.lock);
	unsigned char buf[4096];
	size_t got;
	assert_int_equal(px_handle_read(h, 0, sizeof(buf), buf, &got), PX_ECONNECT);
	px_handle_close(h);
	/* the old transfer ends now, with the bytes it had */
	r->core->fetch.ops.cancel(r->core->fetch.ops.impl, id);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_true(atomic_load(&o.done));
	rig_advance(30001);
	char *js = px_report_json(r->core);
	int down = strstr(js, "\"state\": \"down\"") != NULL;
	free(js);
	assert_true(down);
	/* a probe sent now answers: a is back */
	rig_advance(10001);
	px_providers_tick(r->core);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	js = px_report_json(r->core);
	down = strstr(js, "\"state\": \"down\"") != NULL;
	free(js);
	assert_false(down);
	rig_free(r);
}

/* ------------------------------------------- a cutover while one waits */

/* A transfer the test submits itself: its bytes are checked against the
 * asset's as they come, and its end is counted. */
struct watched {
	int64_t off;
	_Atomic int64_t got;
	_Atomic int bad, done;
};

static int watched_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct watched *w = ctx;
	if (off != w->off + atomic_load(&w->got) || memcmp(buf, g_data + off, len) != 0)
		atomic_store(&w->bad, 1);
	atomic_fetch_add(&w->got, (int64_t)len);
	return 1;
}

static void watched_done(void *ctx, const struct px_fetch_result *res)
{
	struct watched *w = ctx;
	(void)res;
	atomic_store(&w->done, 1);
}

static int req_ended(struct fake *f, int i)
{
	return i <= f->nreq && f->reqs[i - 1]->ended;
}

/* What the waiting transfer's thread does while it waits for a slot (the
 * core calls yield_idle there with no lock held): ends the transfer that
 * holds the slot, and cuts the session over to source 1, before that
 * (switch_first) or after it. So the slot is handed to the waiter, and
 * the session moves, before the waiter runs again. */
static struct {
	struct rig *r;
	uint64_t holder;
	int switch_first;
	_Atomic int calls;
	enum px_status switched;
	int holder_ended;
} g_cut;

static int cut_while_waiting(struct px_session *s, int unread)
{
	(void)unread;
	if (atomic_fetch_add(&g_cut.calls, 1) != 0)
		return 0;
	if (g_cut.switch_first)
		g_cut.switched = px_session_switch(s, 1);
	g_cut.r->core->fetch.ops.cancel(g_cut.r->core->fetch.ops.impl, g_cut.holder);
	g_cut.holder_ended = fake_wait(&g_cut.r->fake, req_ended, 1, 5000);
	if (!g_cut.switch_first)
		g_cut.switched = px_session_switch(s, 1);
	return 0;
}

struct waiter {
	struct rig *r;
	struct px_session *s;
	struct watched w;
	uint64_t id;
	enum px_status st;
};

static void *waiter_thread(void *arg)
{
	struct waiter *wt = arg;
	struct px_fetch_params fp = px_source_range(wt->r->core, 0, 0, wt->w.off, 256 * KiB);
	struct px_fetch_cb cb = { watched_data, watched_done, &wt->w };
	wt->st = px_xfer_submit(wt->r->core, 0, wt->s, 0, px_now_ms() + 5000, &fp, &cb, &wt->id);
	return NULL;
}

static int held_on(struct rig *r, size_t prov)
{
	pthread_mutex_lock(px_prov_lock(r->core));
	int held = px_prov_rt(r->core, prov)->held;
	pthread_mutex_unlock(px_prov_lock(r->core));
	return held;
}

/* Session s on a (max 1) has a transfer that holds a's slot (request 1,
 * hanging) and a second one waiting for it in a thread, during which
 * cut_while_waiting ends the first and moves s to b. Returns once the
 * waiter has submitted (request 2, which hangs too when hang_waiter). */
static void wait_through_cutover(struct rig *r, struct px_session **s, struct waiter *wt,
				 int switch_first, int hang_waiter)
{
	pthread_t th;
	struct watched first = { 0 };
	struct px_fetch_params fp = px_source_range(r->core, 0, 0, 0, 1 * MiB);
	struct px_fetch_cb cb = { watched_data, watched_done, &first };
	uint64_t id;

	assert_int_equal(px_session_enter(r->core, 0, 1, px_now_ms() + 5000, s), PX_OK);
	assert_int_equal(px_provider_of_session(r->core, (*s)->id), (long)prov_of(r, "a"));
	r->fake.hang_from = 1;
	assert_int_equal(px_xfer_submit(r->core, 0, *s, 0, px_now_ms() + 5000, &fp, &cb, &id),
			 PX_OK);
	FAKE_SET(&r->fake, hang_from, hang_waiter ? 1 : 0);
	memset(&g_cut, 0, sizeof(g_cut));
	g_cut.r = r;
	g_cut.holder = id;
	g_cut.switch_first = switch_first;
	px_providers_set_yield(r->core, cut_while_waiting);
	*wt = (struct waiter){ r, *s, { 3 * KiB + 5, 0, 0, 0 }, 0, PX_OK };
	assert_int_equal(pthread_create(&th, NULL, waiter_thread, wt), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(wt->st, PX_OK);
	assert_int_equal(atomic_load(&g_cut.calls), 1);
	assert_true(g_cut.holder_ended);
	assert_int_equal(g_cut.switched, PX_OK);
	assert_int_equal(px_provider_of_session(r->core, (*s)->id), (long)prov_of(r, "b"));
	assert_true(atomic_load(&first.done));
}

/* The slot freed is handed to the waiting transfer, then the session is
 * cut over before that thread runs again: its transfer on a was counted
 * in the session's generation before the cutover, which moved it with
 * the others. On 806c3cb it was marked with the generation after, so its
 * end was taken from the session's new provider: a's slot stayed held
 * for good (a background transfer there refused) and the session never
 * reached zero transfers, leaked (LeakSanitizer: px_session_enter). */
static void test_cutover_after_slot_granted(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 1, NULL);
	struct px_session *s;
	struct waiter wt;
	rig_start(r, NULL, 0);
	wait_through_cutover(r, &s, &wt, 0, 0);
	/* the waiter's transfer answers; a is free after it */
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_true(atomic_load(&wt.w.done));
	assert_int_equal(atomic_load(&wt.w.got), 256 * KiB);
	assert_false(atomic_load(&wt.w.bad));
	assert_int_equal(held_on(r, prov_of(r, "a")), 0);
	assert_int_equal(held_on(r, prov_of(r, "b")), 1);
	struct watched bg = { 0 };
	struct px_fetch_params fp = px_source_range(r->core, 0, 0, 0, 64 * KiB);
	struct px_fetch_cb cb = { watched_data, watched_done, &bg };
	uint64_t id;
	assert_int_equal(px_xfer_submit(r->core, prov_of(r, "a"), NULL, 1, px_now_ms(), &fp, &cb,
					&id), PX_OK);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_int_equal(atomic_load(&bg.got), 64 * KiB);
	assert_false(atomic_load(&bg.bad));
	px_session_leave(s);
	rig_free(r);
}

/* The session is cut over first, then the slot frees and goes to the
 * transfer still waiting on a: the session's reservation is on b now, so
 * that transfer takes a's slot of its own. On 806c3cb it was counted as
 * the session's own on b's reservation: a showed no slot held while it
 * ran, and a background transfer got a second connection to a over its
 * max_connections 1. */
static void test_cutover_before_slot_granted(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 1, NULL);
	struct px_session *s;
	struct waiter wt;
	rig_start(r, NULL, 0);
	wait_through_cutover(r, &s, &wt, 1, 1);
	/* the waiter's transfer still runs (it hangs): a is full */
	assert_int_equal(held_on(r, prov_of(r, "a")), 1);
	assert_int_equal(held_on(r, prov_of(r, "b")), 1);
	struct watched bg = { 0 };
	struct px_fetch_params fp = px_source_range(r->core, 0, 0, 0, 64 * KiB);
	struct px_fetch_cb cb = { watched_data, watched_done, &bg };
	uint64_t id = 0;
	enum px_status st = px_xfer_submit(r->core, prov_of(r, "a"), NULL, 1, px_now_ms(), &fp,
					   &cb, &id);
	if (st == PX_OK)
		r->core->fetch.ops.cancel(r->core->fetch.ops.impl, id);
	assert_int_equal(st, PX_EBUSY);
	/* it ends; a is free after it, and serves the asset's bytes */
	FAKE_SET(&r->fake, hang_from, 0);
	r->core->fetch.ops.cancel(r->core->fetch.ops.impl, wt.id);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_false(atomic_load(&wt.w.bad));
	assert_int_equal(held_on(r, prov_of(r, "a")), 0);
	assert_int_equal(px_xfer_submit(r->core, prov_of(r, "a"), NULL, 1, px_now_ms(), &fp, &cb,
					&id), PX_OK);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_int_equal(atomic_load(&bg.got), 64 * KiB);
	assert_false(atomic_load(&bg.bad));
	px_session_leave(s);
	rig_free(r);
}

/* A transfer whose reader has its bytes: it refuses the next ones, so
 * the fetcher pauses it until a reader wants more. */
struct parked {
	_Atomic int refused, done;
	_Atomic int st;
};

static int parked_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct parked *p = ctx;
	(void)off, (void)buf, (void)len;
	atomic_store(&p->refused, 1);
	return 0;
}

static void parked_done(void *ctx, const struct px_fetch_result *res)
{
	struct parked *p = ctx;
	atomic_store(&p->st, res->status);
	atomic_store(&p->done, 1);
}

/* A session's transfer on a (max 1) is paused for want of a reader (a
 * stream that read ahead), and the session is cut over to b: the paused
 * transfer serves nobody and holds a's only slot. A transfer that needs
 * a's slot (a background check, another session's) preempts it. On
 * 74eb985 nothing did: it held the slot until its session ended, and a
 * source that came back could not take its session back (the checker's
 * seed 1697: a read failed with the source up). */
static void test_parked_transfer_gives_way(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 1, NULL);
	struct px_session *s;
	struct parked pk = { 0 };
	rig_start(r, NULL, 0);
	assert_int_equal(px_session_enter(r->core, 0, 1, px_now_ms() + 5000, &s), PX_OK);
	assert_int_equal(px_provider_of_session(r->core, s->id), (long)prov_of(r, "a"));
	struct px_fetch_params fp = px_source_range(r->core, 0, 0, 0, 1 * MiB);
	struct px_fetch_cb cb = { parked_data, parked_done, &pk };
	uint64_t id;
	assert_int_equal(px_xfer_submit(r->core, 0, s, 0, px_now_ms() + 5000, &fp, &cb, &id),
			 PX_OK);
	for (int i = 0; i < 6000 && !atomic_load(&pk.refused); i++)
		usleep(500);
	assert_true(atomic_load(&pk.refused));
	assert_int_equal(px_session_switch(s, 1), PX_OK);
	assert_int_equal(px_provider_of_session(r->core, s->id), (long)prov_of(r, "b"));
	assert_int_equal(held_on(r, prov_of(r, "a")), 1);
	/* a background transfer waits for a's slot: it gets it */
	struct watched bg = { 0 };
	struct px_fetch_params fp2 = px_source_range(r->core, 0, 0, 0, 64 * KiB);
	struct px_fetch_cb cb2 = { watched_data, watched_done, &bg };
	assert_int_equal(px_xfer_submit(r->core, prov_of(r, "a"), NULL, 1, px_now_ms() + 3000,
					&fp2, &cb2, &id), PX_OK);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_int_equal(atomic_load(&bg.got), 64 * KiB);
	assert_false(atomic_load(&bg.bad));
	assert_true(atomic_load(&pk.done));
	assert_int_equal(atomic_load(&pk.st), PX_ECANCELED);
	assert_true(fake_counts(&r->fake).max_open_reqs <= 1);
	assert_int_equal(held_on(r, prov_of(r, "a")), 0);
	px_session_leave(s);
	rig_free(r);
}

/* ---------------------------------------------------------------- reload */

static void test_reload(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 0, NULL);
	rig_start(r, NULL, 0);
	struct px_handle *h = open_as(r, 1);
	read_check(h, 100, 5000);
	char text[2048], report[1024], err[512];
	/* asset "a" loses source b.test and keeps a.test, gains c.test; a new
	 * asset; a moved path is refused; a path that clashes is refused */
	int n = snprintf(text, sizeof(text),
		"{\"providers\": [{\"name\": \"a\"}, {\"name\": \"c\", \"max_connections\": 3}],"
		" \"assets\": ["
		"{\"id\": \"a\", \"path\": \"moved/a.bin\", \"sources\": ["
		"  {\"url\": \"http://a.test/a.bin\", \"provider\": \"a\"},"
		"  {\"url\": \"http://c.test/a.bin\", \"provider\": \"c\"}]},"
		"{\"id\": \"new\", \"path\": \"dir/new.bin\", \"size\": %lld, \"mtime\": 5,"
		"  \"sources\": [{\"url\": \"http://c.test/new.bin\", \"provider\": \"c\"}]},"
		"{\"id\": \"clash\", \"path\": \"a.bin/x\", \"size\": 10, \"mtime\": 5,"
		"  \"sources\": [{\"url\": \"http://c.test/x.bin\", \"provider\": \"c\"}]}]}",
		(long long)SIZE);
	struct px_catalog *nc;
	if (px_catalog_parse("new.json", text, (size_t)n, &nc, err, sizeof(err)) != PX_OK)
		fail_msg("catalog: %s", err);
	const struct px_tree *before = px_core_tree(r->core);
	assert_int_equal(px_reload_catalog(r->core, nc, report, sizeof(report)), PX_OK);
	assert_non_null(strstr(report, "asset clash: its path clashes"));
	assert_non_null(strstr(report, "asset a: a new path needs a remount"));
	assert_non_null(px_tree_lookup(px_core_tree(r->core), PX_TREE_ROOT, "a.bin"));
	const struct px_tree *t = px_core_tree(r->core);
	assert_ptr_not_equal(t, before);
	const struct px_tree_node *d = px_tree_lookup(t, PX_TREE_ROOT, "dir");
	assert_non_null(d);
	const struct px_tree_node *f = px_tree_lookup(t, d->ino, "new.bin");
	assert_non_null(f);
	assert_int_equal(px_core_asset_size(r->core, (size_t)f->asset), SIZE);
	/* the new asset serves, from its source */
	struct px_handle *h2 = NULL;
	assert_int_equal(px_handle_open(r->core, (size_t)f->asset, 2, &h2), PX_OK);
	read_check(h2, 4096, 10000);
	px_handle_close(h2);
	char *js = px_report_json(r->core);
	assert_non_null(strstr(js, "http://c.test/a.bin"));
	free(js);
	/* the old handle reads on from its source */
	read_check(h, 7 * MiB, 5000);
	px_handle_close(h);
	rig_free(r);
}

/* A limited provider reuses idle connections while its URLs are on one
 * host, and closes each after use once they span two (curl keeps idle
 * connections per host: only then could they pass the limit). */
static void test_reuse_while_one_host(void **state)
{
	static const char *const names[] = { "a", "b" };
	char err[512];
	(void)state;
	struct rig *r = provider_rig(names, 2, 2, NULL);
	rig_start(r, NULL, 0);
	assert_false(px_source_range(r->core, 0, 0, 0, 10).no_reuse);
	assert_false(px_source_range(r->core, 0, 1, 0, 10).no_reuse);
	/* the same host again changes nothing */
	assert_int_equal(px_sources_add(r->core, "a", "http://a.test/copy.bin", "a", err,
					    sizeof(err)), PX_OK);
	assert_false(px_source_range(r->core, 0, 0, 0, 10).no_reuse);
	/* another host under provider a: a's transfers stop reusing, b's do not */
	assert_int_equal(px_sources_add(r->core, "a", "http://elsewhere.test/a.bin", "a", err,
					    sizeof(err)), PX_OK);
	assert_true(px_source_range(r->core, 0, 0, 0, 10).no_reuse);
	assert_false(px_source_range(r->core, 0, 1, 0, 10).no_reuse);
	rig_free(r);

	/* without a limit, always reuse */
	r = provider_rig(names, 2, 0, NULL);
	rig_start(r, NULL, 0);
	assert_int_equal(px_sources_add(r->core, "a", "http://elsewhere.test/a.bin", "a", err,
					    sizeof(err)), PX_OK);
	assert_false(px_source_range(r->core, 0, 0, 0, 10).no_reuse);
	rig_free(r);
}

/*
 * An idle mount asks nothing (issue 33): with no session, open or
 * lingering, the monitor probes no provider that answers, from the
 * mount's start on and however long; while a session runs the probes go on, and once it
 * has ended they stop again. On 598ca28 a probe went out every
 * liveness_interval for the first liveness_idle after the start and after
 * every open (60 a provider in the 10 minutes after a scan).
 */
static void test_idle_mount_sends_no_probe(void **state)
{
	static const char *const names[] = { "a" };
	struct rig *r = provider_rig(names, 1, 0, NULL);
	r->cfg.liveness_idle_ms = 60000;
	rig_start(r, NULL, 0);
	int n = fake_nreq(&r->fake);
	/* idle from the start: nothing, however long */
	for (int i = 0; i < 12; i++) {
		rig_advance(10001);
		px_providers_tick(r->core);
	}
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_int_equal(fake_nreq(&r->fake), n);
	/* an open: it checks a, unheard of for liveness_idle, then reads */
	struct px_handle *h = open_as(r, 1);
	assert_int_equal(fake_nreq(&r->fake), n + 1);
	assert_int_equal(fake_req(&r->fake, n + 1).length, 1);
	read_check(h, 0, 4096);
	/* while its session runs, the probes go on */
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	n = fake_nreq(&r->fake);
	rig_advance(10001);
	px_providers_tick(r->core);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_true(fake_nreq(&r->fake) > n);
	assert_int_equal(fake_req(&r->fake, fake_nreq(&r->fake)).length, 1);
	/* closed, and past its session_ttl: quiet again */
	px_handle_close(h);
	rig_advance(15001);
	px_providers_tick(r->core);
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	n = fake_nreq(&r->fake);
	for (int i = 0; i < 12; i++) {
		rig_advance(10001);
		px_providers_tick(r->core);
	}
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	assert_int_equal(fake_nreq(&r->fake), n);
	rig_free(r);
}

/*
 * A provider that died while the mount was idle is found at the next open
 * that would use it (issue 33): a, first by name, unheard of for
 * liveness_idle, is asked for one byte before the session is placed; its
 * refusal sends the session to b, whose bytes are read. A provider heard
 * from lately is not asked again. On 598ca28 the open went to a and its
 * first read failed.
 */
static void test_unheard_provider_checked_at_open(void **state)
{
	static const char *const names[] = { "a", "b" };
	struct rig *r = provider_rig(names, 2, 0, NULL);
	r->cfg.retries = 0;
	r->cfg.liveness_idle_ms = 60000;
	rig_start(r, NULL, 0);
	rig_advance(60001);
	px_providers_tick(r->core);
	int n = fake_nreq(&r->fake);
	fake_host_down(&r->fake, "a.test", PX_ECONNECT, 0);
	struct px_handle *h = open_as(r, 1);
	assert_string_equal(provider_of(r, h), "b");
	/* a's check, then b's: one byte each, before any read */
	assert_int_equal(fake_nreq(&r->fake), n + 2);
	assert_non_null(strstr(fake_req(&r->fake, n + 1).url, "a.test"));
	assert_int_equal(fake_req(&r->fake, n + 1).length, 1);
	assert_non_null(strstr(fake_req(&r->fake, n + 2).url, "b.test"));
	assert_int_equal(fake_req(&r->fake, n + 2).length, 1);
	read_check(h, 5, 70000);
	px_handle_close(h);
	/* heard from just now: the next open asks nobody first */
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));
	n = fake_nreq(&r->fake);
	h = open_as(r, 2);
	assert_string_equal(provider_of(r, h), "b");
	assert_int_equal(fake_nreq(&r->fake), n);
	read_check(h, 0, 4096);
	px_handle_close(h);
	rig_free(r);
}

int main(void)
{
	g_data = malloc(SIZE);
	if (!g_data)
		return 1;
	for (int64_t i = 0; i < SIZE; i++)
		g_data[i] = (unsigned char)((i * 2654435761u) >> 13);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_tie_broken_by_name, rig_teardown),
		cmocka_unit_test_teardown(test_burst_spreads_evenly, rig_teardown),
		cmocka_unit_test_teardown(test_drained_gets_no_session, rig_teardown),
		cmocka_unit_test_teardown(test_reopen_joins_until_ttl, rig_teardown),
		cmocka_unit_test_teardown(test_slots_hold_through_churn, rig_teardown),
		cmocka_unit_test_teardown(test_wait_then_refuse_at_limit, rig_teardown),
		cmocka_unit_test_teardown(test_waiter_admitted_when_slot_frees, rig_teardown),
		cmocka_unit_test_teardown(test_background_yields_to_playback, rig_teardown),
		cmocka_unit_test_teardown(test_open_leaves_freed_slot_to_waiter, rig_teardown),
		cmocka_unit_test_teardown(test_switch_leaves_freed_slot_to_waiter, rig_teardown),
		cmocka_unit_test_teardown(test_liveness_drop_and_return, rig_teardown),
		cmocka_unit_test_teardown(test_liveness_ignores_old_transfers, rig_teardown),
		cmocka_unit_test_teardown(test_cutover_after_slot_granted, rig_teardown),
		cmocka_unit_test_teardown(test_cutover_before_slot_granted, rig_teardown),
		cmocka_unit_test_teardown(test_parked_transfer_gives_way, rig_teardown),
		cmocka_unit_test_teardown(test_reload, rig_teardown),
		cmocka_unit_test_teardown(test_reuse_while_one_host, rig_teardown),
		cmocka_unit_test_teardown(test_idle_mount_sends_no_probe, rig_teardown),
		cmocka_unit_test_teardown(test_unheard_provider_checked_at_open, rig_teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(g_data);
	return rc;
}
