/*
 * test_parallel.c - parallel ranges (read/stream.c): a stream whose reader
 * outruns one speed-capped connection turns parallel only when its reader
 * starves, max_streams allows and its provider has a spare slot; it never
 * holds more transfers than max_connections; its extra transfers give
 * their slots to a new session at once; and its parts merge in order, the
 * bytes exact, across a part that fails (retried from the byte it reached)
 * and a part whose source is gone (a cutover to the standby); a part that
 * fails while its reader starts another is decided at once; and two
 * readers of one session at a provider of one slot take turns.
 *
 * On the fake fetcher (fake_fetch.h) with a per-request speed cap
 * (chunk_interval_us) in the shared rig (rig.h); every read is checked
 * byte for byte against what the fake serves.
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

#include "context.h"
#include "core.h"
#include "fake_fetch.h"
#include "fingerprint.h"
#include "health.h"
#include "provider.h"
#include "rig.h"
#include "session.h"
#include "standby.h"

#define KiB (1LL << 10)
#define MiB (1LL << 20)
#define SIZE (48 * MiB)
#define BLOCK (128 * KiB)
#define CAP_US 4000             /* one 64 KiB chunk per 4 ms: 16 MiB/s a connection */

static unsigned char *g_data;

static const unsigned char *data_for(const char *url)
{
	return url && (strstr(url, "/a0.bin") || strstr(url, "/a1.bin")) ? g_data : NULL;
}

/* Assets a0 and a1 of SIZE bytes on provider p (max_connections maxc);
 * with mirror, a0 also on provider q. No head or tail cache: every byte
 * comes through the stream. */
static struct rig *par_rig(int maxc, int max_streams, int64_t cap_us, int mirror)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"providers\": [{\"name\": \"p\", \"max_connections\": %d}, {\"name\": \"q\"}],"
		 " \"assets\": [{\"id\": \"a0\", \"path\": \"a0.bin\", \"size\": %lld,"
		 " \"mtime\": 1600000000, \"sources\": [{\"url\": \"http://p.test/a0.bin\","
		 " \"provider\": \"p\"}%s]},"
		 " {\"id\": \"a1\", \"path\": \"a1.bin\", \"size\": %lld, \"mtime\": 1600000000,"
		 " \"sources\": [{\"url\": \"http://p.test/a1.bin\", \"provider\": \"p\"}]}]}",
		 maxc, (long long)SIZE,
		 mirror ? ", {\"url\": \"http://q.test/a0.bin\", \"provider\": \"q\"}" : "",
		 (long long)SIZE);
	struct rig_opts o = { .catalog = text, .size = SIZE, .threaded = 1, .chunk = 64 * KiB,
			      .data_for = data_for, .fallback = g_data, .stream_min = 1 * MiB,
			      .mtime = 1600000000, .check_budget = 1 };
	struct rig *r = rig_new(&o);
	r->cfg.read_timeout_ms = 20000;
	r->cfg.retries = 3;
	r->cfg.head_size = 0;
	r->cfg.tail_size = 0;
	r->cfg.max_streams = max_streams;
	r->fake.chunk_interval_us = cap_us;
	return r;
}

/* Reads [off, off+len) through h; 0 when every byte is right. Any thread. */
static int read_ok(struct px_handle *h, int64_t off, size_t len)
{
	unsigned char *buf = malloc(len);
	size_t got = 0;
	if (!buf)
		return -1;
	enum px_status st = px_handle_read(h, off, len, buf, &got);
	int bad = st != PX_OK || got != len || memcmp(buf, g_data + off, len) != 0;
	free(buf);
	return bad ? -1 : 0;
}

/* Reads the whole asset in BLOCKs; 0 when every byte came right. */
static int read_all(struct px_handle *h)
{
	for (int64_t off = 0; off < SIZE; off += BLOCK)
		if (read_ok(h, off, BLOCK))
			return -1;
	return 0;
}

struct reader {
	struct px_handle *h;
	pthread_t t;
	int rc;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	rd->rc = read_all(rd->h);
	return NULL;
}

/* Waits (at most 10 s) until a stream of the core turned parallel. */
static int wait_parallel(struct rig *r)
{
	for (int i = 0; i < 1000; i++) {
		if (rig_reads(r).n_par_streams > 0)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* Requests that asked for a bounded part of the asset (not open-ended). */
static int parts_requested(struct rig *r)
{
	int n = 0;
	for (int i = 1; i <= fake_nreq(&r->fake); i++) {
		struct fake_req q = fake_req(&r->fake, i);
		if (q.length > 0 && q.offset + q.length < SIZE)
			n++;
	}
	return n;
}

/* A reader that outruns one capped connection gets more of them, never
 * more than the provider's max_connections, and every byte right. */
static void test_parallel_when_starved(void **state)
{
	(void)state;
	struct rig *r = par_rig(3, 4, CAP_US, 0);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	assert_int_equal(read_all(h), 0);
	struct fake_counts c = fake_counts(&r->fake);
	assert_true(rig_reads(r).n_par_streams >= 1);
	assert_true(rig_reads(r).n_parts >= 3);
	assert_true(parts_requested(r) >= 3);
	assert_true(c.max_open_reqs >= 2);
	assert_true(c.max_open_reqs <= 3);
	rig_close(r, h);
	rig_free(r);
}

/* No spare slot (max_connections 1), max_streams 1, or a source faster
 * than the reader: one transfer at a time, never a part. (A case of a
 * source capped at 128 MiB/s, above the 64 MiB/s floor, was dropped: on a
 * loaded machine with ASan its chunks came slower than the floor, where
 * parallel parts are the rule's right answer, and CI failed on it.) */
static void test_no_parallel_without_cause(void **state)
{
	(void)state;
	static const struct { int maxc, max_streams; int64_t cap_us; } cases[] = {
		{ 1, 4, CAP_US }, { 4, 1, CAP_US }, { 4, 4, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rig *r = par_rig(cases[i].maxc, cases[i].max_streams, cases[i].cap_us, 0);
		rig_start(r, NULL, 0);
		struct px_handle *h = rig_open(r, 0, 42);
		assert_int_equal(read_all(h), 0);
		struct fake_counts c = fake_counts(&r->fake);
		if (rig_reads(r).n_par_streams != 0 || c.max_open_reqs != 1)
			fail_msg("case %zu: %llu parallel streams, %d requests open at once", i,
				 (unsigned long long)rig_reads(r).n_par_streams,
				 c.max_open_reqs);
		rig_close(r, h);
		rig_free(r);
	}
}

/* While a reader runs parallel parts in every slot, an open of another
 * asset on the provider takes one of their slots at once (a part is
 * preempted), and both readers get every byte right. */
static void test_parts_yield_to_new_session(void **state)
{
	(void)state;
	struct rig *r = par_rig(4, 4, CAP_US, 0);
	rig_start(r, NULL, 0);
	struct reader rd = { .h = rig_open(r, 0, 42) };
	assert_int_equal(pthread_create(&rd.t, NULL, reader_main, &rd), 0);
	int par = wait_parallel(r);
	/* every slot busy: the reader's own transfer and its parts */
	for (int i = 0; par && i < 500 && px_prov_rt(r->core, 0)->xfers < 4; i++)
		usleep(10000);
	int busy = px_prov_rt(r->core, 0)->xfers;
	struct px_handle *other = rig_open(r, 1, 43);
	int other_rc = read_ok(other, 0, 1 * MiB);
	uint64_t preempted = px_prov_rt(r->core, 0)->n_preempted;
	pthread_join(rd.t, NULL);
	assert_true(par);
	assert_int_equal(busy, 4);
	assert_int_equal(other_rc, 0);
	assert_int_equal(rd.rc, 0);
	assert_true(preempted >= 1);
	assert_true(fake_counts(&r->fake).max_open_reqs <= 4);
	rig_close(r, other);
	rig_close(r, rd.h);
	rig_free(r);
}

/* A part's transfer breaks after 100 KiB: it is asked for again from the
 * byte it reached, and the parts still merge in order. */
static void test_part_failure_retried(void **state)
{
	(void)state;
	struct rig *r = par_rig(4, 4, CAP_US, 0);
	rig_start(r, NULL, 0);
	struct reader rd = { .h = rig_open(r, 0, 42) };
	assert_int_equal(pthread_create(&rd.t, NULL, reader_main, &rd), 0);
	int par = wait_parallel(r);
	int before = fake_nreq(&r->fake);
	fake_fail_next(&r->fake, 1, PX_ETRANSFER, 100 * KiB);
	pthread_join(rd.t, NULL);
	assert_true(par);
	assert_int_equal(rd.rc, 0);
	struct fake_req bad = fake_req(&r->fake, before + 1);
	assert_int_equal(bad.final, PX_ETRANSFER);
	int again = 0;
	for (int i = before + 2; i <= fake_nreq(&r->fake); i++) {
		struct fake_req q = fake_req(&r->fake, i);
		if (q.offset == bad.offset + 100 * KiB && q.offset + q.length == bad.offset + bad.length)
			again = 1;
	}
	assert_true(again);
	rig_close(r, rd.h);
	rig_free(r);
}

static enum px_status mem_read(void *ctx, int64_t off, size_t len, void *buf, size_t *got)
{
	memcpy(buf, (const unsigned char *)ctx + off, len);
	*got = len;
	return PX_OK;
}

/* A part's source answers 404 mid-stream: the session cuts over to the
 * mirror (verified against the reference), which brings that part from the
 * byte it reached and the parts after it; every byte right. */
static void test_part_cutover(void **state)
{
	(void)state;
	struct rig *r = par_rig(4, 4, CAP_US, 1);
	rig_start(r, NULL, 0);
	assert_non_null(px_src_ensure(r->core, 0));
	struct vf_fingerprint *fp = malloc(sizeof(*fp));
	struct vf_reader vr = { .read = mem_read, .ctx = g_data };
	size_t nbad;
	char why[200];
	assert_non_null(fp);
	assert_int_equal(vf_fingerprint_take(&vr, SIZE, fp, &nbad, why, sizeof(why)), PX_OK);
	enum px_status st = px_standby_set_reference(r->core, 0, fp);
	free(fp);
	assert_int_equal(st, PX_OK);

	struct reader rd = { .h = rig_open(r, 0, 42) };
	assert_int_equal(px_provider_of_session(r->core, px_handle_session_id(rd.h)), 0);
	assert_int_equal(pthread_create(&rd.t, NULL, reader_main, &rd), 0);
	int par = wait_parallel(r);
	fake_fail_next(&r->fake, 1, PX_ENOTFOUND, 100 * KiB);
	pthread_join(rd.t, NULL);
	assert_true(par);
	assert_int_equal(rd.rc, 0);
	assert_int_equal(px_provider_of_session(r->core, px_handle_session_id(rd.h)), 1);
	int on_q = 0;
	for (int i = 1; i <= fake_nreq(&r->fake); i++) {
		struct fake_req q = fake_req(&r->fake, i);
		on_q += strstr(q.url, "q.test") && q.length > 0;
	}
	assert_true(on_q >= 1);
	rig_close(r, rd.h);
	rig_free(r);
}

/* The first part's transfer fails while its reader is starting another
 * part (whose submit is refused): the reader decides on the failure at
 * once and asks for the part again from the byte it reached. On
 * 0709163 the failure's wakeup came while the reader had let go of the
 * stream's lock, and it then waited, watching no transfer, until the
 * read's deadline: the read failed although the source could serve it
 * (the scenario checker's seed 1522 under load, 3 in 48 runs). */
static void test_part_failing_while_another_starts(void **state)
{
	(void)state;
	struct rig *r = par_rig(4, 4, CAP_US, 0);
	r->cfg.read_timeout_ms = 4000;
	rig_start(r, NULL, 0);
	struct reader rd = { .h = rig_open(r, 0, 42) };
	assert_int_equal(pthread_create(&rd.t, NULL, reader_main, &rd), 0);
	/* the stream's transfer is the first request; the next submit is its
	 * first extra part's, long (STARVE_MS) after */
	int armed = 0;
	for (int i = 0; i < 5000 && !armed; i++) {
		pthread_mutex_lock(&r->fake.lock);
		if (r->fake.nreq >= 1) {
			r->fake.fail_status = PX_ETRANSFER;
			r->fake.refuse_next_ending = 1;
			armed = r->fake.nreq == 1;
		}
		pthread_mutex_unlock(&r->fake.lock);
		if (!armed)
			usleep(1000);
	}
	int par = wait_parallel(r);
	pthread_join(rd.t, NULL);
	assert_true(armed);
	assert_true(par);
	struct fake_counts c = fake_counts(&r->fake);
	assert_int_equal(c.refused, 1);
	struct fake_req first = fake_req(&r->fake, 1);
	assert_int_equal(first.offset + first.length, SIZE);
	assert_int_equal(first.done, 1);
	assert_true(first.bytes < SIZE);
	assert_int_equal(rd.rc, 0);
	/* asked again from the byte the first transfer reached */
	int again = 0;
	for (int i = 2; i <= fake_nreq(&r->fake); i++)
		again |= fake_req(&r->fake, i).offset == first.offset + first.bytes;
	assert_true(again);
	rig_close(r, rd.h);
	rig_free(r);
}

struct one_read {
	struct px_handle *h;
	int64_t off;
	pthread_t t;
	int rc;
};

static void *one_read_main(void *arg)
{
	struct one_read *o = arg;
	o->rc = read_ok(o->h, o->off, BLOCK);
	return NULL;
}

/* Two readers of one session (one client) on a provider of one slot: the
 * first streams the asset sequentially for longer than read_timeout, the
 * second reads once far ahead. The second gets the slot in its turn,
 * within its read_timeout, and both get every byte right. On d681edf the
 * first reader, always inside its stream, kept the slot and the second
 * read failed at its deadline (the checker's seed 1771 under load). */
static void test_second_reader_gets_its_turn(void **state)
{
	(void)state;
	struct rig *r = par_rig(1, 1, CAP_US, 0);
	r->cfg.read_timeout_ms = 1500;
	rig_start(r, NULL, 0);
	struct reader rd = { .h = rig_open(r, 0, 42) };
	assert_int_equal(pthread_create(&rd.t, NULL, reader_main, &rd), 0);
	/* the stream runs: its reader is inside it nearly all the time */
	for (int i = 0; i < 500 && fake_nreq(&r->fake) < 1; i++)
		usleep(10000);
	usleep(300000);
	struct one_read o = { .h = rig_open(r, 0, 42), .off = SIZE - 8 * MiB };
	assert_int_equal(pthread_create(&o.t, NULL, one_read_main, &o), 0);
	pthread_join(o.t, NULL);
	pthread_join(rd.t, NULL);
	assert_int_equal(o.rc, 0);
	assert_int_equal(rd.rc, 0);
	assert_true(fake_counts(&r->fake).max_open_reqs <= 1);
	rig_close(r, o.h);
	rig_close(r, rd.h);
	rig_free(r);
}

int main(int argc, char **argv)
{
	/* for a manual run: test_parallel [PATTERN] ("*" all) */
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	g_data = malloc(SIZE);
	assert_non_null(g_data);
	srand(7);
	for (int64_t i = 0; i < SIZE; i++)
		g_data[i] = (unsigned char)rand();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_parallel_when_starved, rig_teardown),
		cmocka_unit_test_teardown(test_no_parallel_without_cause, rig_teardown),
		cmocka_unit_test_teardown(test_parts_yield_to_new_session, rig_teardown),
		cmocka_unit_test_teardown(test_part_failure_retried, rig_teardown),
		cmocka_unit_test_teardown(test_part_failing_while_another_starts, rig_teardown),
		cmocka_unit_test_teardown(test_part_cutover, rig_teardown),
		cmocka_unit_test_teardown(test_second_reader_gets_its_turn, rig_teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(g_data);
	return rc;
}
