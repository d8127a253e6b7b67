/*
 * test_readloop.c - the one read loop (read/retry.c) and the read path's
 * costs: a stream and a direct read fail the same way (the session is
 * marked failed, so a reopen by the same client starts afresh; a source
 * that is gone is dead for later sessions whichever tier met the 404), and
 * a steady run of stream reads allocates nothing.
 *
 * On the fake fetcher (fake_fetch.h) in the shared rig (rig.h); every read
 * is checked byte for byte against what the fake serves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core.h"
#include "fake_fetch.h"
#include "rig.h"
#include "session.h"
#include "snapshot.h"

#define KiB (1LL << 10)
#define MiB (1LL << 20)
#define SIZE (16 * MiB)
#define BLOCK (128 * KiB)
#define ORIGIN "http://alpha.test/a0.bin"  /* first by name: sessions start here */
#define MIRROR "http://beta.test/a0.bin"
#define OTHER "http://alpha.test/a1.bin"   /* another asset of the origin's provider */

static unsigned char *g_data;

/* Both sources serve the same bytes: they are copies of one asset. */
static const unsigned char *same_data(const char *url)
{
	return url && (strcmp(url, ORIGIN) == 0 || strcmp(url, MIRROR) == 0 ||
		       strcmp(url, OTHER) == 0) ? g_data : NULL;
}


/* One asset of SIZE bytes with the origin and, when two, the mirror; a
 * 2 MiB head (a run through it earns a stream: request 3, after the head's
 * two parts) and a 1 MiB tail; 2 retries. */
static struct rig *loop_rig(int two)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"assets\": [{\"id\": \"a0\", \"path\": \"a0.bin\", \"size\": %lld, "
		 "\"mtime\": 1600000000, \"sources\": [{\"url\": \"%s\"}%s%s%s]},\n"
		 " {\"id\": \"a1\", \"path\": \"a1.bin\", \"size\": %lld, "
		 "\"mtime\": 1600000000, \"sources\": [{\"url\": \"%s\"}]}]}",
		 (long long)SIZE, ORIGIN, two ? ", {\"url\": \"" : "", two ? MIRROR : "",
		 two ? "\"}" : "", (long long)SIZE, OTHER);
	struct rig_opts o = {
		.catalog = text, .size = SIZE, .threaded = 1, .chunk = 64 * KiB,
		.data_for = same_data, .fallback = g_data, .stream_min = 1 * MiB,
		.clock = rig_clock, .mtime = 1600000000,
	};
	struct rig *r = rig_new(&o);
	r->cfg.read_timeout_ms = 10000;
	r->cfg.retries = 2;
	r->cfg.head_size = 2 * MiB;
	r->cfg.tail_size = 1 * MiB;
	return r;
}

static enum px_status read_check(struct px_handle *h, int64_t off, size_t len)
{
	unsigned char *buf = malloc(len);
	size_t got = 0;
	assert_non_null(buf);
	enum px_status st = px_handle_read(h, off, len, buf, &got);
	if (st == PX_OK) {
		assert_int_equal(got, len);
		if (memcmp(buf, g_data + off, len) != 0)
			fail_msg("wrong bytes at %lld", (long long)off);
	}
	free(buf);
	return st;
}

/* Index (1-based) of the first open-ended request (a stream), 0: none. */
static int first_stream(struct rig *r)
{
	for (int i = 1; i <= fake_nreq(&r->fake); i++)
		if (fake_req(&r->fake, i).stream)
			return i;
	return 0;
}

/* Reads from 0 in BLOCKs until a read fails; returns its status (PX_OK
 * when the whole asset came). */
static enum px_status read_on(struct px_handle *h, int64_t *at)
{
	enum px_status st = PX_OK;
	for (*at = 0; *at < SIZE && st == PX_OK; *at += BLOCK)
		st = read_check(h, *at, BLOCK);
	return st;
}

/* A stream's source fails for good with no standby: the read fails, the
 * session is failed, and the same client's reopen gets a new session; the
 * same for a direct read. */
static void test_reopen_after_failure(void **state)
{
	for (int tier = 0; tier < 2; tier++) {
		struct rig *r = loop_rig(0);
		rig_start(r, NULL, 0);
		struct px_handle *h = rig_open(r, 0, 42);
		uint64_t id = px_handle_session_id(h);
		pthread_mutex_lock(&r->fake.lock);
		/* after the head's parts, the stream (2 MiB in, then 5xx) or
		 * the direct read (5xx at once); every restart fails at once */
		int first = tier == 0 ? 3 : 2;
		r->fake.fail_from = first;
		r->fake.fail_count = 1000;
		r->fake.fail_status = PX_ESERVER;
		r->fake.fail_after = tier == 0 ? 2 * MiB : 0;
		r->fake.fail_after_more = 0;
		pthread_mutex_unlock(&r->fake.lock);
		enum px_status st;
		if (tier == 0) {
			int64_t at;
			st = read_on(h, &at);
			assert_int_equal(first_stream(r), 3); /* a stream met the failure */
		} else {
			assert_int_equal(read_check(h, 0, 64 * KiB), PX_OK); /* the head */
			st = read_check(h, 4 * MiB, 64 * KiB);           /* a direct read */
			assert_int_equal(first_stream(r), 0);
		}
		assert_int_equal(st, PX_ESERVER);
		/* the first failure and cfg->retries restarts, no more */
		assert_int_equal(fake_nreq(&r->fake), first + r->cfg.retries);
		rig_close(r, h);
		h = rig_open(r, 0, 42);
		assert_true(px_handle_session_id(h) != id);
		rig_close(r, h);
		rig_free(r);
	}
}

/* A stream's source turns out to have another size mid-stream (its answer
 * to a restart says so): the mirror takes over at the same byte and every
 * byte is right; the origin is dead for the asset, as a direct read that
 * met it would have made it (the cutover marks only a 404 dead), so
 * a later session reads the mirror, not the origin it would otherwise pick
 * first once the failure's backoff is over and its provider answers well
 * again (another of its assets reads fine). */
static void test_stream_wrong_size_dead_for_later_sessions(void **state)
{
	struct rig *r = loop_rig(1);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	pthread_mutex_lock(&r->fake.lock);
	r->fake.fail_from = 3;
	r->fake.fail_count = 1;
	r->fake.fail_status = PX_ESIZE;
	r->fake.fail_after = 3 * MiB;
	pthread_mutex_unlock(&r->fake.lock);
	int64_t at;
	assert_int_equal(read_on(h, &at), PX_OK);
	int s = first_stream(r);
	assert_true(s == 3);
	assert_string_equal(fake_req(&r->fake, s).url, ORIGIN);
	assert_string_equal(fake_req(&r->fake, fake_nreq(&r->fake)).url, MIRROR);
	rig_close(r, h);
	h = rig_open(r, 1, 42);
	assert_int_equal(read_check(h, 9 * MiB, 64 * KiB), PX_OK);
	assert_string_equal(fake_req(&r->fake, fake_nreq(&r->fake)).url, OTHER);
	rig_close(r, h);

	rig_advance(3600 * 1000); /* every backoff and linger is over */
	h = rig_open(r, 0, 43);
	int n = fake_nreq(&r->fake);
	assert_int_equal(read_check(h, 9 * MiB, 64 * KiB), PX_OK);
	assert_true(fake_nreq(&r->fake) > n);
	assert_string_equal(fake_req(&r->fake, n + 1).url, MIRROR);
	rig_close(r, h);
	rig_free(r);
}

/* Streams started (open-ended requests) from request `from` on. */
static int streams_since(struct rig *r, int from)
{
	int n = 0;
	for (int i = from; i <= fake_nreq(&r->fake); i++)
		n += fake_req(&r->fake, i).stream;
	return n;
}

/* A seek after a run that earned a stream starts the new stream at the
 * seek's first read (one request, at the jump); a reader that then reads
 * at random costs that one stream and no more: its other reads are exact
 * range requests. */
static void test_seek_streams_at_once_random_does_not(void **state)
{
	struct rig *r = loop_rig(0);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	for (int64_t off = 0; off < 4 * MiB; off += BLOCK)
		assert_int_equal(read_check(h, off, BLOCK), PX_OK);
	assert_int_equal(streams_since(r, 1), 1);

	int n = fake_nreq(&r->fake);
	assert_int_equal(read_check(h, 11 * MiB, BLOCK), PX_OK);
	struct fake_req q = fake_req(&r->fake, n + 1);
	assert_true(q.stream);
	assert_int_equal(q.offset, 11 * MiB);

	n = fake_nreq(&r->fake);
	static const int64_t at[] = { 3, 13, 7, 9, 5, 14, 6, 4, 12, 8 };
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		assert_int_equal(read_check(h, at[i] * MiB + 4096 * (int64_t)i, 64 * KiB), PX_OK);
	assert_int_equal(streams_since(r, n + 1), 0);
	for (int i = n + 1; i <= fake_nreq(&r->fake); i++)
		assert_int_equal(fake_req(&r->fake, i).length, 64 * KiB);
	rig_close(r, h);
	rig_free(r);
}

/* A new handle whose first read is a player's (128 KiB, in the middle: it
 * resumes at a position) starts a stream there at once, one request for
 * the reads after it; a new handle's first small read (a scanner's, a
 * random reader's 64 KiB) is one exact range and starts none. */
static void test_fresh_handle_player_streams_at_once(void **state)
{
	struct rig *r = loop_rig(0);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	int n = fake_nreq(&r->fake);
	for (int64_t off = 9 * MiB; off < 11 * MiB; off += BLOCK)
		assert_int_equal(read_check(h, off, BLOCK), PX_OK);
	struct fake_req q = fake_req(&r->fake, n + 1);
	assert_true(q.stream);
	assert_int_equal(q.offset, 9 * MiB);
	assert_int_equal(fake_nreq(&r->fake), n + 1);
	rig_close(r, h);

	h = rig_open(r, 0, 43);
	n = fake_nreq(&r->fake);
	assert_int_equal(read_check(h, 5 * MiB, 64 * KiB), PX_OK);
	q = fake_req(&r->fake, n + 1);
	assert_false(q.stream);
	assert_int_equal(q.length, 64 * KiB);
	assert_int_equal(streams_since(r, n + 1), 0);
	rig_close(r, h);
	rig_free(r);
}

/* A read across the cached tail's start (or the head's end) whose cached
 * part is not there yet is one request of exactly its bytes, not a range
 * and a fill in turn (two round trips on a distant origin); once the tail
 * is cached, its part comes from there. */
static void test_straddling_read_one_request(void **state)
{
	struct rig *r = loop_rig(0);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	int64_t tail_start = SIZE - MiB, head_end = 2 * MiB;

	assert_int_equal(read_check(h, tail_start - 64 * KiB, 128 * KiB), PX_OK);
	assert_int_equal(fake_nreq(&r->fake), 1);
	struct fake_req q = fake_req(&r->fake, 1);
	assert_int_equal(q.offset, tail_start - 64 * KiB);
	assert_int_equal(q.length, 128 * KiB);

	assert_int_equal(read_check(h, head_end - 4096, 8192), PX_OK);
	assert_int_equal(fake_nreq(&r->fake), 2);
	q = fake_req(&r->fake, 2);
	assert_int_equal(q.offset, head_end - 4096);
	assert_int_equal(q.length, 8192);

	/* the tail, read on its own, is filled and kept; then a read across
	 * its start takes its part from the cache */
	assert_int_equal(read_check(h, SIZE - 4096, 4096), PX_OK);
	int n = fake_nreq(&r->fake);
	assert_int_equal(read_check(h, tail_start - 8192, 16384), PX_OK);
	assert_int_equal(fake_nreq(&r->fake), n + 1);
	q = fake_req(&r->fake, n + 1);
	assert_int_equal(q.offset, tail_start - 8192);
	assert_int_equal(q.length, 8192);
	rig_close(r, h);
	rig_free(r);
}

/* A jump from the head to an index before the tail (an MP4's moov at the
 * end): one request from the jump's page to the tail's start, however
 * many reads follow; another session's reads inside it ask nothing. A
 * jump that did not come from the head (a random reader), or further than
 * 8 MiB before the tail, reads its own bytes. */
static void test_index_before_the_tail_one_request(void **state)
{
	struct rig *r = loop_rig(0);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	int64_t tail_start = SIZE - MiB, jump = tail_start - 3 * MiB + 1000;

	assert_int_equal(read_check(h, 0, 32 * KiB), PX_OK); /* the head's first part */
	int n = fake_nreq(&r->fake);
	/* the kernel's read-ahead ramp after the jump, to the tail's start */
	int64_t at = jump, step = 36 * KiB;
	while (at < tail_start) {
		int64_t len = at + step > tail_start ? tail_start - at : step;
		assert_int_equal(read_check(h, at, (size_t)len), PX_OK);
		at += len;
		step = step * 2 > 1024 * KiB ? 1024 * KiB : step * 2;
	}
	assert_int_equal(fake_nreq(&r->fake), n + 1);
	struct fake_req q = fake_req(&r->fake, n + 1);
	assert_int_equal(q.offset, jump & ~4095LL);
	assert_int_equal(q.length, tail_start - (jump & ~4095LL));
	rig_close(r, h);

	/* another client: the head, then inside the index, from the cache */
	h = rig_open(r, 0, 43);
	assert_int_equal(read_check(h, 0, 4096), PX_OK);
	assert_int_equal(read_check(h, jump + MiB, 64 * KiB), PX_OK);
	assert_int_equal(fake_nreq(&r->fake), n + 1);
	rig_close(r, h);

	/* a jump from the middle, and one from the head to 9 MiB before the
	 * tail: exact ranges */
	h = rig_open(r, 1, 44);
	assert_int_equal(read_check(h, 0, 4096), PX_OK);
	n = fake_nreq(&r->fake);
	assert_int_equal(read_check(h, tail_start - 9 * MiB, 4096), PX_OK);
	assert_int_equal(fake_nreq(&r->fake), n + 1);
	assert_int_equal(fake_req(&r->fake, n + 1).length, 4096);
	assert_int_equal(read_check(h, tail_start - 2 * MiB, 4096), PX_OK);
	assert_int_equal(fake_nreq(&r->fake), n + 2);
	assert_int_equal(fake_req(&r->fake, n + 2).length, 4096);
	rig_close(r, h);
	rig_free(r);
}

static uint64_t scans_from_cache(struct rig *r)
{
	struct px_snapshot *snap = NULL;
	assert_int_equal(px_snapshot_new(r->core, 0, &snap), PX_OK);
	uint64_t n = snap->n_scans_cached;
	px_snapshot_free(snap);
	return n;
}

/* An open that reads only the head and tail and finds them cached (a
 * free library rescan) is counted when it closes; one whose reads filled
 * the cache (a cold scan: the origin was asked) is not, nor one that also
 * fetched from the middle, nor one that read nothing. On 071f287 the cold
 * scan counted too. */
static void test_scans_from_cache(void **state)
{
	struct rig *r = loop_rig(0);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	assert_int_equal(read_check(h, 0, 64 * KiB), PX_OK);
	assert_int_equal(read_check(h, SIZE - 64 * KiB, 64 * KiB), PX_OK);
	rig_close(r, h);
	assert_int_equal(scans_from_cache(r), 0); /* it filled the cache */
	int n = fake_nreq(&r->fake);
	h = rig_open(r, 0, 45);
	assert_int_equal(read_check(h, 0, 64 * KiB), PX_OK);
	assert_int_equal(read_check(h, SIZE - 64 * KiB, 64 * KiB), PX_OK);
	assert_int_equal(scans_from_cache(r), 0); /* still open */
	rig_close(r, h);
	assert_int_equal(fake_nreq(&r->fake), n); /* the cache's alone */
	assert_int_equal(scans_from_cache(r), 1);
	h = rig_open(r, 0, 43);
	assert_int_equal(read_check(h, 4096, 4096), PX_OK);
	assert_int_equal(read_check(h, 9 * MiB, 4096), PX_OK);
	rig_close(r, h);
	h = rig_open(r, 0, 44);
	rig_close(r, h);
	assert_int_equal(scans_from_cache(r), 1);
	rig_free(r);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define NO_MALLOC_COUNT 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define NO_MALLOC_COUNT 1
#endif

#ifndef NO_MALLOC_COUNT
/* Allocations made by this thread while t_counting is set: the test's own
 * malloc, calloc and realloc in front of glibc's. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t a, size_t b);
extern void *__libc_realloc(void *p, size_t n);
static __thread int t_counting;
static __thread long t_allocs;

void *malloc(size_t n)
{
	t_allocs += t_counting;
	return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	t_allocs += t_counting;
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	t_allocs += t_counting;
	return __libc_realloc(p, n);
}
#endif

/* Reads served from a stream's window (zero-copy, no caller buffer, as
 * fs/ reads) allocate nothing once the run is going. */
static void test_stream_reads_allocate_nothing(void **state)
{
#ifdef NO_MALLOC_COUNT
	skip();
#else
	struct rig *r = loop_rig(0);
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 42);
	long allocs = 0;
	int reads = 0;
	for (int64_t off = 0; off + BLOCK <= SIZE - MiB; off += BLOCK) {
		struct px_zc zc;
		int counted = off >= 4 * MiB; /* the stream runs by then */
		t_counting = counted;
		enum px_status st = px_handle_read_zc(h, off, BLOCK, NULL, &zc);
		t_counting = 0;
		assert_int_equal(st, PX_OK);
		int64_t pos = off;
		for (int i = 0; i < zc.iovcnt; i++) {
			assert_memory_equal(zc.iov[i].iov_base, g_data + pos, zc.iov[i].iov_len);
			pos += (int64_t)zc.iov[i].iov_len;
		}
		assert_int_equal(pos, off + BLOCK);
		t_counting = counted;
		px_handle_zc_done(&zc);
		t_counting = 0;
		allocs += t_allocs;
		t_allocs = 0;
		reads += counted;
	}
	assert_int_equal(first_stream(r), 3);
	assert_true(reads >= 64);
	if (allocs)
		fail_msg("%ld allocations in %d stream reads", allocs, reads);
	rig_close(r, h);
	rig_free(r);
#endif
}

int main(void)
{
	g_data = malloc((size_t)SIZE);
	if (!g_data)
		return 1;
	uint32_t x = 2463534242u;
	for (int64_t i = 0; i < SIZE; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		g_data[i] = (unsigned char)x;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_reopen_after_failure, rig_teardown),
		cmocka_unit_test_teardown(test_stream_wrong_size_dead_for_later_sessions,
					  rig_teardown),
		cmocka_unit_test_teardown(test_stream_reads_allocate_nothing, rig_teardown),
		cmocka_unit_test_teardown(test_seek_streams_at_once_random_does_not,
					  rig_teardown),
		cmocka_unit_test_teardown(test_scans_from_cache, rig_teardown),
		cmocka_unit_test_teardown(test_straddling_read_one_request, rig_teardown),
		cmocka_unit_test_teardown(test_index_before_the_tail_one_request, rig_teardown),
		cmocka_unit_test_teardown(test_fresh_handle_player_streams_at_once, rig_teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(g_data);
	return rc;
}
