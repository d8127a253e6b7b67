/*
 * test_rangeread.c - the vf_readers of proxy/source/rangeread.c: HTTP ranges over
 * a fake fetcher (struct px_fetch_ops), and local paths.
 *
 * The fake is the shared one (fake_fetch.h), answering from its own
 * thread as the real fetch thread does. Its gate holds every request until
 * PX_RANGEREAD_PARALLEL are in flight (or all that are coming have been
 * submitted), so the test sees exactly how many the reader keeps in
 * flight. It fails requests, never answers (until cancelled), ignores
 * cancels too (hold_cancel: a wedged fetcher) or refuses submits, and
 * checks that every transfer got one on_done. Only the test thread calls
 * cmocka's asserts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_fetch.h"
#include "fetch.h"
#include "fingerprint.h"
#include "rangeread.h"

#define DATA_SIZE (3 * 1024 * 1024 + 333)
#define URL "http://origin.test/a.bin"

static unsigned char *g_data;

static const unsigned char *data_for(const char *url)
{
	return url && strcmp(url, URL) == 0 ? g_data : NULL;
}

/* The shared fake (fake_fetch.h), threaded, answering each range with one
 * on_data; a probe reports the size, an mtime and an ETag. */
static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	fake_init(f, DATA_SIZE, 1, DATA_SIZE);
	f->data_for = data_for;
	f->fallback = g_data;
	f->mtime = 1700000000;
	snprintf(f->etag, sizeof(f->etag), "\"fake-etag\"");
	f->size_unknown_ok = 1;   /* a reader is told the size only by set_size */
	return f;
}

/* Stops the fake; asserts every transfer ended once and nothing odd came. */
static void fake_free(struct fake *f)
{
	fake_destroy(f, 1);
	free(f);
}

/* From now on every request fails with st, without a byte. */
static void fail_from_now(struct fake *f, enum px_status st)
{
	pthread_mutex_lock(&f->lock);
	f->fail_from = f->nreq + 1;
	f->fail_count = 1 << 20;
	f->fail_status = st;
	f->fail_after = 0;
	pthread_mutex_unlock(&f->lock);
}

static struct px_rangeread *http_reader(struct fake *f, int64_t timeout_ms)
{
	struct px_fetch_ops ops = fake_ops(f);
	const char *hdr[] = { "Authorization: Bearer x" };
	struct px_rangeread *rr = NULL;
	assert_int_equal(px_rangeread_new_http(&ops, URL, hdr, 1,
					       timeout_ms, PX_RANGEREAD_PARALLEL, &rr), PX_OK);
	return rr;
}

static void test_batch_parallel(void **state)
{
	struct fake *f = fake_new();
	struct px_rangeread *rr = http_reader(f, 10000);
	struct vf_reader rd = px_rangeread_reader(rr);
	struct vf_plan plan;
	struct vf_range r[20];
	static unsigned char bufs[20][VF_SAMPLE_LEN];

	vf_sample_plan(DATA_SIZE, &plan);
	assert_int_equal(plan.n, 20);
	FAKE_SET(f, gate_open, PX_RANGEREAD_PARALLEL);
	FAKE_SET(f, gate_nreq, 20);
	memset(r, 0, sizeof(r));
	for (size_t i = 0; i < 20; i++) {
		r[i].off = plan.off[i];
		r[i].len = plan.len[i];
		r[i].buf = bufs[i];
	}
	rd.read_batch(rd.ctx, r, 20);
	for (size_t i = 0; i < 20; i++) {
		assert_int_equal(r[i].st, PX_OK);
		assert_int_equal(r[i].got, r[i].len);
		assert_memory_equal(bufs[i], g_data + r[i].off, r[i].len);
	}
	/* several in flight, never more than the bound */
	struct fake_counts c = fake_counts(f);
	assert_int_equal(c.max_open_reqs, PX_RANGEREAD_PARALLEL);
	assert_int_equal(c.nreq, 20);
	/* one request per sample, exactly its range, the provider's header kept */
	for (int i = 0; i < 20; i++) {
		assert_int_equal(fake_req(f, i + 1).length, plan.len[i]);
		assert_int_equal(fake_req(f, i + 1).nheaders, 1);
	}

	/* a fingerprint through it equals one taken from memory */
	struct vf_fingerprint *fp = malloc(sizeof(*fp));
	size_t bad;
	char why[160];
	assert_non_null(fp);
	assert_int_equal(vf_fingerprint_take(&rd, DATA_SIZE, fp, &bad, why, sizeof(why)), PX_OK);
	for (size_t i = 0; i < plan.n; i++) {
		unsigned char d[VF_HASH_LEN];
		assert_int_equal(vf_hash_once(g_data + plan.off[i], plan.len[i], d), PX_OK);
		assert_memory_equal(fp->sha[i], d, VF_HASH_LEN);
	}
	free(fp);
	px_rangeread_free(rr);
	fake_free(f);
}

static void test_probe_and_failures(void **state)
{
	struct fake *f = fake_new();
	struct px_rangeread *rr = http_reader(f, 10000);
	struct vf_reader rd = px_rangeread_reader(rr);
	struct vf_seen seen;
	char why[200], buf[100];
	size_t got = 7;

	assert_int_equal(px_rangeread_probe(rr, &seen, why, sizeof(why)), PX_OK);
	assert_int_equal(seen.size, DATA_SIZE);
	assert_int_equal(seen.mtime, 1700000000);
	assert_string_equal(seen.etag, "\"fake-etag\"");
	assert_int_equal(fake_req(f, 1).length, 0);       /* a probe */
	assert_int_equal(fake_req(f, 1).expect_size, -1);

	px_rangeread_set_size(rr, DATA_SIZE);
	assert_int_equal(rd.read(rd.ctx, 1000, sizeof(buf), buf, &got), PX_OK);
	assert_int_equal(got, sizeof(buf));
	assert_memory_equal(buf, g_data + 1000, sizeof(buf));
	assert_int_equal(fake_req(f, 2).expect_size, DATA_SIZE);

	fail_from_now(f, PX_ENOTFOUND);
	struct vf_range r = { .off = 0, .len = sizeof(buf), .buf = buf };
	rd.read_batch(rd.ctx, &r, 1);
	assert_int_equal(r.st, PX_ENOTFOUND);
	assert_int_equal(r.got, 0);
	assert_non_null(strstr(r.why, "404"));
	assert_int_equal(px_rangeread_probe(rr, &seen, why, sizeof(why)), PX_ENOTFOUND);
	assert_non_null(strstr(why, "404"));

	FAKE_SET(f, submit_status, PX_ESHUTDOWN);
	rd.read_batch(rd.ctx, &r, 1);
	assert_int_equal(r.st, PX_ESHUTDOWN);
	assert_non_null(strstr(r.why, "could not start"));
	px_rangeread_free(rr);
	fake_free(f);
}

static void test_timeout_cancels(void **state)
{
	struct fake *f = fake_new();
	struct px_rangeread *rr = http_reader(f, 100);
	struct vf_reader rd = px_rangeread_reader(rr);
	char buf[64];
	size_t got = 9;

	FAKE_SET(f, hang_from, 1);
	int64_t t0 = px_now_ms();
	assert_int_equal(rd.read(rd.ctx, 0, sizeof(buf), buf, &got), PX_ETIMEDOUT);
	assert_int_equal(got, 0);
	assert_true(px_now_ms() - t0 < 5000);
	assert_int_equal(fake_counts(f).ncancel, 1);
	/* the cancelled transfer ended before we returned */
	assert_int_equal(fake_req(f, 1).done, 1);

	/* a wedged fetcher: the reader gives up after the grace period, and
	 * the late on_done (at the fake's stop) finds its memory still there */
	FAKE_SET(f, hold_cancel, 1);
	struct vf_range r[3];
	memset(r, 0, sizeof(r));
	static unsigned char b3[3][10];
	for (int i = 0; i < 3; i++) {
		r[i].off = i * 10;
		r[i].len = 10;
		r[i].buf = b3[i];
	}
	t0 = px_now_ms();
	rd.read_batch(rd.ctx, r, 3);
	assert_true(px_now_ms() - t0 < 8000);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r[i].st, PX_ETIMEDOUT);
		assert_non_null(strstr(r[i].why, "no answer within 100 ms"));
	}
	px_rangeread_free(rr);
	fake_free(f);
}

static void test_path(void **state)
{
	char dir[] = "/tmp/seamfs-rr-XXXXXX", file[64], missing[80];
	assert_non_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/f.bin", dir);
	snprintf(missing, sizeof(missing), "%s/nope.bin", dir);
	FILE *fp = fopen(file, "w");
	assert_non_null(fp);
	for (int i = 0; i < 10000; i++)
		fputc(i & 0xff, fp);
	fclose(fp);

	struct px_rangeread *rr = NULL;
	struct vf_seen seen;
	char why[200];
	unsigned char buf[200];
	size_t got;
	assert_int_equal(px_rangeread_new_path(file, &rr), PX_OK);
	struct vf_reader rd = px_rangeread_reader(rr);
	assert_int_equal(px_rangeread_probe(rr, &seen, why, sizeof(why)), PX_OK);
	assert_int_equal(seen.size, 10000);
	assert_true(seen.mtime > 0);
	assert_true(seen.etag[0] != '\0');
	assert_int_equal(rd.read(rd.ctx, 9800, 200, buf, &got), PX_OK);
	assert_int_equal(got, 200);
	for (int i = 0; i < 200; i++)
		assert_int_equal(buf[i], (9800 + i) & 0xff);
	assert_int_equal(rd.read(rd.ctx, 9900, 200, buf, &got), PX_ETRANSFER);
	assert_int_equal(got, 100);
	px_rangeread_free(rr);

	assert_int_equal(px_rangeread_new_path(missing, &rr), PX_OK);
	rd = px_rangeread_reader(rr);
	assert_int_equal(px_rangeread_probe(rr, &seen, why, sizeof(why)), PX_ENOTFOUND);
	assert_non_null(strstr(why, "No such file"));
	assert_int_equal(rd.read(rd.ctx, 0, 10, buf, &got), PX_ENOTFOUND);
	px_rangeread_free(rr);
	px_rangeread_free(NULL);
	unlink(file);
	rmdir(dir);
}

int main(void)
{
	g_data = malloc(DATA_SIZE);
	if (!g_data)
		return 1;
	for (int i = 0; i < DATA_SIZE; i++)
		g_data[i] = (unsigned char)(i * 31 + (i >> 11));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_parallel),
		cmocka_unit_test(test_probe_and_failures),
		cmocka_unit_test(test_timeout_cancels),
		cmocka_unit_test(test_path),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(g_data);
	return rc;
}
