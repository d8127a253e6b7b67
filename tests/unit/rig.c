/*
 * rig.c - the test rig of the core's unit tests (rig.h).
 *
 * The order of rig_release is the daemon's (px_core_free): handles close
 * first, so their streams' transfers are cancelled; then the fetcher stops
 * and ends whatever is left while the core is still there to be called
 * back; then the core goes, and only then the fake's memory, since the
 * core may still cancel a transfer that has ended.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache.h"
#include "context.h"
#include "rig.h"

static struct rig *g_rigs[RIG_MAX];

struct rig *rig_new(const struct rig_opts *o)
{
	char err[512] = "";
	struct rig *r = calloc(1, sizeof(*r));
	int slot = 0;

	assert_non_null(r);
	assert_non_null(o->catalog);
	while (slot < RIG_MAX && g_rigs[slot])
		slot++;
	if (slot == RIG_MAX) {
		free(r);
		fail_msg("more than %d rigs at once", RIG_MAX);
	}
	g_rigs[slot] = r;
	r->opts = *o;
	r->size = o->size;
	pthread_mutex_init(&r->lock, NULL);
	px_config_init(&r->cfg);
	fake_init(&r->fake, o->size, o->threaded, o->chunk);
	r->fake.data_for = o->data_for;
	r->fake.fallback = o->fallback;
	r->fake.stream_min = o->stream_min;
	r->fake.mtime = o->mtime;
	r->ops = fake_ops(&r->fake);
	if (px_catalog_parse("t.json", o->catalog, strlen(o->catalog), &r->cat, err,
			     sizeof(err)) != PX_OK)
		fail_msg("catalog: %s", err);
	return r;
}

void rig_start(struct rig *r, struct px_state *state, int64_t fallback_mtime)
{
	assert_null(r->core);
	assert_int_equal(px_core_new(&r->cfg, r->cat, &r->ops, &r->core), PX_OK);
	assert_non_null(r->core);
	if (r->opts.clock)
		px_core_set_clock(r->core, r->opts.clock);
	assert_int_equal(px_core_discover(r->core, state, fallback_mtime), PX_OK);
}

struct px_handle *rig_open(struct rig *r, size_t asset, uint64_t client)
{
	struct px_handle *h = NULL;
	int i = 0;
	assert_int_equal(px_handle_open(r->core, asset, client, &h), PX_OK);
	assert_non_null(h);
	pthread_mutex_lock(&r->lock);
	while (i < RIG_MAX_HANDLES && r->handles[i])
		i++;
	if (i < RIG_MAX_HANDLES)
		r->handles[i] = h;
	pthread_mutex_unlock(&r->lock);
	if (i == RIG_MAX_HANDLES) {
		px_handle_close(h);
		fail_msg("more than %d handles on a rig", RIG_MAX_HANDLES);
	}
	return h;
}

void rig_close(struct rig *r, struct px_handle *h)
{
	pthread_mutex_lock(&r->lock);
	for (int i = 0; i < RIG_MAX_HANDLES; i++)
		if (r->handles[i] == h)
			r->handles[i] = NULL;
	pthread_mutex_unlock(&r->lock);
	px_handle_close(h);
}

struct px_reads_stats rig_reads(struct rig *r)
{
	struct px_reads_stats rs;
	px_reads_stats(r->core->reads, &rs);
	return rs;
}

int64_t rig_window_bytes(struct rig *r)
{
	struct px_reads_stats rs;
	px_reads_stats(r->core->reads, &rs);
	return rs.ra_used - rs.cache_used;
}

void rig_release(struct rig *r, int check)
{
	int ended = 1;
	int64_t window = 0;

	for (int i = 0; i < RIG_MAX; i++)
		if (g_rigs[i] == r)
			g_rigs[i] = NULL;
	pthread_mutex_lock(&r->lock);
	for (int i = 0; i < RIG_MAX_HANDLES; i++) {
		px_handle_close(r->handles[i]);
		r->handles[i] = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	/* cancelled transfers end on the fake's thread: let them */
	if (check)
		ended = fake_wait(&r->fake, all_ended, 0, 5000);
	fake_stop(&r->fake);
	if (r->core)
		window = rig_window_bytes(r);
	px_core_free(r->core);
	px_catalog_free(r->cat);
	px_config_release(&r->cfg);
	pthread_mutex_destroy(&r->lock);
	int check_budget = r->opts.check_budget;
	fake_destroy(&r->fake, check && ended);
	free(r);
	if (!check)
		return;
	if (!ended)
		fail_msg("a transfer did not end within 5 s of the rig's release");
	if (check_budget)
		assert_int_equal(window, 0);
}

void rig_free(struct rig *r)
{
	rig_release(r, 1);
}

int rig_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < RIG_MAX; i++)
		if (g_rigs[i])
			rig_release(g_rigs[i], 0);
	return 0;
}

static _Atomic int64_t g_rig_clock = RIG_CLOCK_START;

int64_t rig_clock(void)
{
	return atomic_load(&g_rig_clock);
}

void rig_advance(int64_t ms)
{
	atomic_fetch_add(&g_rig_clock, ms);
}

void rig_read_check(struct px_handle *h, const unsigned char *data, int64_t off, size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	size_t got = 0;
	assert_non_null(buf);
	enum px_status st = px_handle_read(h, off, len, buf, &got);
	int same = st == PX_OK && got == len && memcmp(buf, data + off, len) == 0;
	free(buf); /* before a failed assert longjmps */
	if (!same)
		fail_msg("read %lld+%zu: %s, %zu bytes%s", (long long)off, len, px_strerror(st),
			 got, st == PX_OK && got == len ? ", wrong ones" : "");
}
