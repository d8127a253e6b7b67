/*
 * test_rangeread.c - the vf_readers of proxy/rangeread.c: HTTP ranges over
 * a fake fetcher (struct px_fetch_ops), and local paths.
 *
 * The fake answers from its own thread, as the real fetch thread does. It
 * holds every request until `hold` are in flight (or all that are coming
 * have been submitted), so the test sees exactly how many the reader keeps
 * in flight. It can fail requests, never answer (until cancelled), or
 * ignore cancels too (a wedged fetcher), and counts on_done per transfer.
 * Only the test thread calls cmocka's asserts.
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

#include "fetch.h"
#include "fingerprint.h"
#include "rangeread.h"

#define DATA_SIZE (3 * 1024 * 1024 + 333)
#define MAXREQ 512

struct freq {
	uint64_t id;
	struct px_fetch_params p;
	struct px_fetch_cb cb;
	int cancelled, done;
};

struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int stop;
	unsigned char *data;
	/* behaviour */
	int hold;                 /* answer once this many are in flight... */
	int expect;               /* ...or this many have been submitted */
	int hang;                 /* never answer unless cancelled */
	int deaf;                 /* ignore cancels too (until stop) */
	enum px_status fail;
	int refuse;               /* submit fails */
	/* log */
	struct freq reqs[MAXREQ];
	int nreq, inflight, max_inflight, ndone, ncancel, problems;
};

static void finish(struct fake *f, struct freq *r, enum px_status st)
{
	struct px_fetch_result res;
	memset(&res, 0, sizeof(res));
	res.status = st;
	res.size = DATA_SIZE;
	res.mtime = 1700000000;
	snprintf(res.etag, sizeof(res.etag), "\"fake-etag\"");
	snprintf(res.detail, sizeof(res.detail), "fake: %s", st == PX_ENOTFOUND ? "HTTP 404"
									      : px_strerror(st));
	if (r->done)
		f->problems++;
	r->done = 1;
	f->inflight--;
	f->ndone++;
	pthread_mutex_unlock(&f->lock);
	if (st == PX_OK && r->p.length > 0)
		r->cb.on_data(r->cb.ctx, r->p.offset, f->data + r->p.offset, (size_t)r->p.length);
	r->cb.on_done(r->cb.ctx, &res);
	pthread_mutex_lock(&f->lock);
	pthread_cond_broadcast(&f->cond);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	pthread_mutex_lock(&f->lock);
	while (!f->stop) {
		int acted = 0;
		int release = f->inflight >= f->hold || f->nreq >= f->expect;
		for (int i = 0; i < f->nreq && !f->stop; i++) {
			struct freq *r = &f->reqs[i];
			if (r->done)
				continue;
			if (r->cancelled && !f->deaf) {
				finish(f, r, PX_ECANCELED);
				acted = 1;
			} else if (!f->hang && release) {
				finish(f, r, f->fail);
				acted = 1;
			}
		}
		if (!acted)
			pthread_cond_wait(&f->cond, &f->lock);
	}
	/* stopping: end what is left, as the fetch thread does */
	for (int i = 0; i < f->nreq; i++)
		if (!f->reqs[i].done)
			finish(f, &f->reqs[i], PX_ESHUTDOWN);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static enum px_status fake_submit(void *impl, const struct px_fetch_params *p,
				  const struct px_fetch_cb *cb, uint64_t *id)
{
	struct fake *f = impl;
	pthread_mutex_lock(&f->lock);
	if (f->refuse || f->nreq == MAXREQ) {
		pthread_mutex_unlock(&f->lock);
		return PX_ESHUTDOWN;
	}
	struct freq *r = &f->reqs[f->nreq];
	r->id = (uint64_t)f->nreq + 1;
	r->p = *p;
	r->p.url = NULL;
	r->p.headers = NULL;
	r->cb = *cb;
	*id = r->id;
	f->nreq++;
	f->inflight++;
	if (f->inflight > f->max_inflight)
		f->max_inflight = f->inflight;
	if (p->length > 0 && (p->offset < 0 || p->offset + p->length > DATA_SIZE))
		f->problems++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return PX_OK;
}

static void fake_cancel(void *impl, uint64_t id)
{
	struct fake *f = impl;
	pthread_mutex_lock(&f->lock);
	f->ncancel++;
	if (id >= 1 && id <= (uint64_t)f->nreq)
		f->reqs[id - 1].cancelled = 1;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void fake_resume(void *impl, uint64_t id)
{
	(void)impl;
	(void)id;
}

/* Changes a behaviour field; the fake's thread reads them under its lock. */
#define FAKE_SET(f, field, v) \
	do { \
		pthread_mutex_lock(&(f)->lock); \
		(f)->field = (v); \
		pthread_mutex_unlock(&(f)->lock); \
	} while (0)

static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->data = malloc(DATA_SIZE);
	assert_non_null(f->data);
	for (int i = 0; i < DATA_SIZE; i++)
		f->data[i] = (unsigned char)(i * 31 + (i >> 11));
	f->hold = 1;
	f->expect = 1;
	f->fail = PX_OK;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
	return f;
}

static void fake_free(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->stop = 1;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	assert_int_equal(f->problems, 0);
	assert_int_equal(f->ndone, f->nreq);  /* every transfer ended once */
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f->data);
	free(f);
}

static struct px_rangeread *http_reader(struct fake *f, int64_t timeout_ms)
{
	struct px_fetch_ops ops = { fake_submit, fake_cancel, fake_resume, f };
	const char *hdr[] = { "Authorization: Bearer x" };
	struct px_rangeread *rr = NULL;
	assert_int_equal(px_rangeread_new_http(&ops, "http://origin.test/a.bin", hdr, 1,
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
	FAKE_SET(f, hold, PX_RANGEREAD_PARALLEL);
	FAKE_SET(f, expect, 20);
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
		assert_memory_equal(bufs[i], f->data + r[i].off, r[i].len);
	}
	/* several in flight, never more than the bound */
	assert_int_equal(f->max_inflight, PX_RANGEREAD_PARALLEL);
	assert_int_equal(f->nreq, 20);
	/* one request per sample, exactly its range, the provider's header kept */
	for (int i = 0; i < 20; i++) {
		assert_int_equal(f->reqs[i].p.length, plan.len[i]);
		assert_int_equal(f->reqs[i].p.nheaders, 1);
	}

	/* a fingerprint through it equals one taken from memory */
	struct vf_fingerprint *fp = malloc(sizeof(*fp));
	size_t bad;
	char why[160];
	assert_non_null(fp);
	assert_int_equal(vf_fingerprint_take(&rd, DATA_SIZE, fp, &bad, why, sizeof(why)), PX_OK);
	for (size_t i = 0; i < plan.n; i++) {
		unsigned char d[VF_HASH_LEN];
		assert_int_equal(vf_hash_once(f->data + plan.off[i], plan.len[i], d), PX_OK);
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
	assert_int_equal(f->reqs[0].p.length, 0);       /* a probe */
	assert_int_equal(f->reqs[0].p.expect_size, -1);

	px_rangeread_set_size(rr, DATA_SIZE);
	assert_int_equal(rd.read(rd.ctx, 1000, sizeof(buf), buf, &got), PX_OK);
	assert_int_equal(got, sizeof(buf));
	assert_memory_equal(buf, f->data + 1000, sizeof(buf));
	assert_int_equal(f->reqs[1].p.expect_size, DATA_SIZE);

	FAKE_SET(f, fail, PX_ENOTFOUND);
	struct vf_range r = { .off = 0, .len = sizeof(buf), .buf = buf };
	rd.read_batch(rd.ctx, &r, 1);
	assert_int_equal(r.st, PX_ENOTFOUND);
	assert_int_equal(r.got, 0);
	assert_non_null(strstr(r.why, "404"));
	assert_int_equal(px_rangeread_probe(rr, &seen, why, sizeof(why)), PX_ENOTFOUND);
	assert_non_null(strstr(why, "404"));

	FAKE_SET(f, refuse, 1);
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

	FAKE_SET(f, hang, 1);
	int64_t t0 = px_now_ms();
	assert_int_equal(rd.read(rd.ctx, 0, sizeof(buf), buf, &got), PX_ETIMEDOUT);
	assert_int_equal(got, 0);
	assert_true(px_now_ms() - t0 < 5000);
	assert_int_equal(f->ncancel, 1);
	pthread_mutex_lock(&f->lock);
	int done = f->reqs[0].done;
	pthread_mutex_unlock(&f->lock);
	assert_int_equal(done, 1);   /* the cancelled transfer ended before we returned */

	/* a wedged fetcher: the reader gives up after the grace period, and
	 * the late on_done (at the fake's stop) finds its memory still there */
	FAKE_SET(f, deaf, 1);
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
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_parallel),
		cmocka_unit_test(test_probe_and_failures),
		cmocka_unit_test(test_timeout_cancels),
		cmocka_unit_test(test_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
