/*
 * test_verifier.c - the verifier without a network: the sample plan, the
 * verdicts against a fake reader, the seam check, the fingerprint store in
 * a mkdtemp directory, and the worker pool.
 *
 * The fake reader serves a file that exists only as a function of the
 * offset (so a 1 TiB "file" costs nothing), with optional flipped bytes,
 * a failing range, short answers, and a count of what was read; with or
 * without the batch operation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <glob.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fingerprint.h"
#include "hash.h"
#include "pool.h"
#include "reader.h"
#include "sample.h"
#include "seam.h"
#include "store.h"
#include "verdict.h"

#define GIB (1LL << 30)
#define TIB (1LL << 40)

/* ------------------------------------------------------------ fake reader */

struct fake {
	int64_t size;
	uint32_t seed;
	int64_t flip[4];          /* offsets whose byte is inverted, -1: none */
	int64_t fail_off;         /* a range containing it fails, -1: none */
	enum px_status fail_status;
	int64_t short_off;        /* a range containing it returns OK but 1 byte short */
	int reads;                /* ranges asked for */
	int64_t bytes;            /* bytes asked for */
};

static unsigned char byte_at(const struct fake *f, int64_t off)
{
	uint64_t x = (uint64_t)off * 0x9E3779B97F4A7C15ULL + f->seed;
	x ^= x >> 29;
	unsigned char b = (unsigned char)(x >> 17);
	for (int i = 0; i < 4; i++)
		if (f->flip[i] == off)
			b ^= 0xff;
	return b;
}

static void fake_init(struct fake *f, int64_t size)
{
	memset(f, 0, sizeof(*f));
	f->size = size;
	f->seed = 12345;
	for (int i = 0; i < 4; i++)
		f->flip[i] = -1;
	f->fail_off = -1;
	f->short_off = -1;
	f->fail_status = PX_ECONNECT;
}

static enum px_status fake_read(void *ctx, int64_t off, size_t len, void *buf, size_t *got)
{
	struct fake *f = ctx;
	unsigned char *p = buf;
	*got = 0;
	f->reads++;
	f->bytes += (int64_t)len;
	if (f->fail_off >= off && f->fail_off < off + (int64_t)len)
		return f->fail_status;
	for (size_t i = 0; i < len && off + (int64_t)i < f->size; i++) {
		p[i] = byte_at(f, off + (int64_t)i);
		(*got)++;
	}
	if (f->short_off >= off && f->short_off < off + (int64_t)len && *got) {
		(*got)--;
		return PX_OK; /* a reader that lies: the verifier must notice */
	}
	return *got == len ? PX_OK : PX_ETRANSFER;
}

static void fake_batch(void *ctx, struct vf_range *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		r[i].st = fake_read(ctx, r[i].off, r[i].len, r[i].buf, &r[i].got);
		snprintf(r[i].why, sizeof(r[i].why), "fake: %s", px_strerror(r[i].st));
		if (r[i].st == PX_OK)
			r[i].why[0] = '\0';
	}
}

static struct vf_reader reader_of(struct fake *f, int batch)
{
	struct vf_reader r = { fake_read, batch ? fake_batch : NULL, f };
	return r;
}

/* ------------------------------------------------------------ plan */

static void check_plan(int64_t size, size_t want_n)
{
	struct vf_plan p, q;
	vf_sample_plan(size, &p);
	assert_int_equal(p.n, want_n);
	vf_sample_plan(size, &q);
	assert_memory_equal(&p, &q, sizeof(p)); /* deterministic */
	if (want_n == 0)
		return;
	assert_int_equal(p.off[0], 0);                          /* first range */
	assert_int_equal(p.off[p.n - 1] + p.len[p.n - 1], size); /* last range */
	int64_t covered = 0;
	for (size_t i = 0; i < p.n; i++) {
		assert_true(p.off[i] >= 0);
		assert_int_equal(p.off[i] % VF_SAMPLE_LEN, 0);
		assert_true(p.len[i] >= 1 && p.len[i] <= VF_SAMPLE_LEN);
		if (i + 1 < p.n) {
			assert_int_equal(p.len[i], VF_SAMPLE_LEN);  /* only the last is shorter */
			assert_true(p.off[i] + p.len[i] <= p.off[i + 1]); /* no overlap */
		}
		assert_true(p.off[i] + p.len[i] <= size);
		covered += p.len[i];
	}
	/* a file of at most N chunks is sampled whole */
	if ((size - 1) / VF_SAMPLE_LEN + 1 <= (int64_t)want_n)
		assert_int_equal(covered, size);
}

static void test_plan_sizes(void **state)
{
	struct vf_plan p;
	check_plan(0, 0);
	check_plan(-1, 0);
	check_plan(1, 1);
	check_plan(4095, 1);
	check_plan(4096, 1);
	check_plan(4097, 2);
	vf_sample_plan(4097, &p);
	assert_int_equal(p.off[1], 4096);
	assert_int_equal(p.len[1], 1);
	check_plan(10 * 4096 + 5, 11);
	check_plan(20 * 4096, 20);
	check_plan(20 * 4096 + 1, 20);
	check_plan(GIB - 1, 20);
	check_plan(GIB, 100);
	check_plan(TIB, 100);
	check_plan(INT64_MAX, 100);
	/* spread: the formula of sample.h, by hand for 1 GiB - 1 */
	vf_sample_plan(GIB - 1, &p);
	int64_t chunks = (GIB - 1 + 4095) / 4096;
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.off[i], (int64_t)i * (chunks - 1) / 19 * 4096);
	assert_int_equal(p.len[19], 4095);
}

/* ------------------------------------------------------------ verdicts */

static void take_ref(struct fake *f, struct vf_fingerprint *fp)
{
	struct vf_reader r = reader_of(f, 1);
	size_t bad = 99;
	char why[160];
	assert_int_equal(vf_fingerprint_take(&r, f->size, fp, &bad, why, sizeof(why)), PX_OK);
	assert_true(vf_fingerprint_complete(fp));
}

static void check(struct fake *ref, struct fake *cand, int batch, struct vf_verdict *v)
{
	struct vf_fingerprint *rfp = malloc(sizeof(*rfp)), *cfp = malloc(sizeof(*cfp));
	assert_non_null(rfp);
	assert_non_null(cfp);
	take_ref(ref, rfp);
	struct vf_reader r = reader_of(cand, batch);
	assert_int_equal(vf_verdict_check(rfp, cand->size, &r, v, cfp), PX_OK);
	free(rfp);
	free(cfp);
}

static void test_verdict_match(void **state)
{
	int64_t sizes[] = { 1, 4097, 3 * 1024 * 1024 + 17, GIB + 12345 };
	for (size_t k = 0; k < 4; k++) {
		for (int batch = 0; batch < 2; batch++) {
			struct fake a, b;
			struct vf_verdict v;
			fake_init(&a, sizes[k]);
			fake_init(&b, sizes[k]);
			check(&a, &b, batch, &v);
			assert_int_equal(v.outcome, VF_MATCH);
			assert_int_equal(v.sample, -1);
			struct vf_plan p;
			vf_sample_plan(sizes[k], &p);
			assert_int_equal(b.reads, (int)p.n);   /* one read per sample */
			assert_true(b.bytes <= (int64_t)p.n * VF_SAMPLE_LEN);
		}
	}
}

static void test_verdict_flip_inside(void **state)
{
	struct fake a, b;
	struct vf_verdict v;
	struct vf_plan p;
	int64_t size = GIB + 777;
	fake_init(&a, size);
	fake_init(&b, size);
	vf_sample_plan(size, &p);
	b.flip[0] = p.off[37] + 100;
	check(&a, &b, 1, &v);
	assert_int_equal(v.outcome, VF_MISMATCH);
	assert_int_equal(v.sample, 37);
	assert_int_equal(v.offset, p.off[37]);
	assert_non_null(strstr(v.why, "sample 37"));
	assert_true(vf_outcome_final(v.outcome));

	/* the last byte of the file is sampled too */
	fake_init(&b, size);
	b.flip[0] = size - 1;
	check(&a, &b, 0, &v);
	assert_int_equal(v.outcome, VF_MISMATCH);
	assert_int_equal(v.sample, 99);
}

/* The known limit of sampling: bytes between samples are not compared. */
static void test_verdict_flip_outside_is_missed(void **state)
{
	struct fake a, b;
	struct vf_verdict v;
	struct vf_plan p;
	int64_t size = 64LL << 20;
	fake_init(&a, size);
	fake_init(&b, size);
	vf_sample_plan(size, &p);
	b.flip[0] = p.off[5] + VF_SAMPLE_LEN + 1;   /* after sample 5, before sample 6 */
	assert_true(b.flip[0] < p.off[6]);
	check(&a, &b, 1, &v);
	assert_int_equal(v.outcome, VF_MATCH);
}

static void test_verdict_unreadable(void **state)
{
	struct fake a, b;
	struct vf_verdict v;
	struct vf_plan p;
	int64_t size = 5LL << 20;
	fake_init(&a, size);
	fake_init(&b, size);
	vf_sample_plan(size, &p);
	b.fail_off = p.off[3] + 5;
	b.fail_status = PX_ETIMEDOUT;
	check(&a, &b, 1, &v);
	assert_int_equal(v.outcome, VF_INCONCLUSIVE);
	assert_int_equal(v.sample, 3);
	assert_int_equal(v.offset, p.off[3]);
	assert_non_null(strstr(v.why, "timed out"));
	assert_false(vf_outcome_final(v.outcome));

	/* without batch: the status still names what happened */
	check(&a, &b, 0, &v);
	assert_int_equal(v.outcome, VF_INCONCLUSIVE);
	assert_non_null(strstr(v.why, "timed out"));

	/* a short read that claims success is not a match either */
	fake_init(&b, size);
	b.short_off = p.off[19];
	check(&a, &b, 1, &v);
	assert_int_equal(v.outcome, VF_INCONCLUSIVE);
	assert_int_equal(v.sample, 19);
	assert_non_null(strstr(v.why, "short"));

	/* a difference is proof, and wins over an unreadable sample */
	fake_init(&b, size);
	b.fail_off = p.off[2];
	b.flip[0] = p.off[9];
	check(&a, &b, 1, &v);
	assert_int_equal(v.outcome, VF_MISMATCH);
	assert_int_equal(v.sample, 9);
}

static void test_verdict_reference_side(void **state)
{
	struct fake a;
	struct vf_fingerprint *ref = malloc(sizeof(*ref)), *cand = malloc(sizeof(*cand));
	struct vf_verdict v;
	size_t bad;
	char why[160];
	assert_non_null(ref);
	assert_non_null(cand);
	fake_init(&a, 1 << 20);
	take_ref(&a, cand);
	a.fail_off = 0;
	struct vf_reader r = reader_of(&a, 1);
	assert_int_equal(vf_fingerprint_take(&r, a.size, ref, &bad, why, sizeof(why)), PX_ECONNECT);
	assert_int_equal(bad, 0);
	assert_false(vf_fingerprint_complete(ref));
	/* an incomplete reference cannot judge by reading ... */
	assert_int_equal(vf_verdict_check(ref, a.size, &r, &v, NULL), PX_EINVAL);
	/* ... and compared, a sample missing on the reference side is inconclusive */
	vf_verdict_compare(ref, cand, &v);
	assert_int_equal(v.outcome, VF_INCONCLUSIVE);
	assert_non_null(strstr(v.why, "reference"));
	free(ref);
	free(cand);
}

static void test_verdict_size_gate(void **state)
{
	struct fake a, b;
	struct vf_verdict v;
	fake_init(&a, 3 << 20);
	fake_init(&b, (3 << 20) + 1);
	check(&a, &b, 1, &v);
	assert_int_equal(v.outcome, VF_SIZE_MISMATCH);
	assert_int_equal(v.size, (3 << 20) + 1);
	assert_int_equal(b.reads, 0);   /* the gate comes first: nothing read */
	assert_true(vf_outcome_final(v.outcome));
	/* 0 bytes: nothing to sample; two empty files match */
	fake_init(&a, 0);
	fake_init(&b, 0);
	check(&a, &b, 1, &v);
	assert_int_equal(v.outcome, VF_MATCH);
	assert_int_equal(b.reads, 0);
}

static void test_fingerprint_id(void **state)
{
	struct fake a;
	struct vf_fingerprint *x = malloc(sizeof(*x)), *y = malloc(sizeof(*y));
	char ix[VF_FINGERPRINT_ID_LEN], iy[VF_FINGERPRINT_ID_LEN];
	assert_non_null(x);
	assert_non_null(y);
	fake_init(&a, 1 << 20);
	take_ref(&a, x);
	take_ref(&a, y);
	assert_int_equal(vf_fingerprint_id(x, ix), PX_OK);
	assert_int_equal(vf_fingerprint_id(y, iy), PX_OK);
	assert_string_equal(ix, iy);
	assert_int_equal(strlen(ix), 16);
	y->sha[3][0] ^= 1;
	assert_int_equal(vf_fingerprint_id(y, iy), PX_OK);
	assert_string_not_equal(ix, iy);
	free(x);
	free(y);
}

static void test_outcome_names(void **state)
{
	enum vf_outcome o;
	for (int i = VF_MATCH; i <= VF_INCONCLUSIVE; i++) {
		assert_int_equal(vf_outcome_parse(vf_outcome_name((enum vf_outcome)i), &o), 0);
		assert_int_equal(o, i);
	}
	assert_int_equal(vf_outcome_parse("Match", &o), -1);
}

/* ------------------------------------------------------------ seam */

static void test_seam(void **state)
{
	struct fake f;
	struct vf_verdict v;
	unsigned char got[8192];
	fake_init(&f, 1 << 20);
	struct vf_reader r = reader_of(&f, 0);
	for (size_t i = 0; i < sizeof(got); i++)
		got[i] = byte_at(&f, 500000 - 8192 + (int64_t)i);

	assert_int_equal(vf_seam_check(&r, 500000, got, sizeof(got), &v), PX_OK);
	assert_int_equal(v.outcome, VF_MATCH);

	got[100] ^= 1;
	assert_int_equal(vf_seam_check(&r, 500000, got, sizeof(got), &v), PX_OK);
	assert_int_equal(v.outcome, VF_MISMATCH);
	assert_int_equal(v.offset, 500000 - 8192 + 100);
	got[100] ^= 1;

	f.fail_off = 499999;
	assert_int_equal(vf_seam_check(&r, 500000, got, sizeof(got), &v), PX_OK);
	assert_int_equal(v.outcome, VF_INCONCLUSIVE);
	assert_non_null(strstr(v.why, "connection"));
	/* no slot to ask in: not an answer of the candidate (a cutover must
	 * not count it failed) */
	f.fail_status = PX_EBUSY;
	assert_int_equal(vf_seam_check(&r, 500000, got, sizeof(got), &v), PX_EBUSY);
	assert_int_equal(v.outcome, VF_INCONCLUSIVE);
	f.fail_status = PX_ECONNECT;
	f.fail_off = -1;

	/* the end of the file: a seam at x == size */
	for (size_t i = 0; i < 10; i++)
		got[i] = byte_at(&f, (1 << 20) - 10 + (int64_t)i);
	assert_int_equal(vf_seam_check(&r, 1 << 20, got, 10, &v), PX_OK);
	assert_int_equal(v.outcome, VF_MATCH);
	/* the candidate ends before x: short, inconclusive */
	assert_int_equal(vf_seam_check(&r, (1 << 20) + 5, got, 10, &v), PX_OK);
	assert_int_equal(v.outcome, VF_INCONCLUSIVE);

	assert_int_equal(vf_seam_check(&r, 5, got, 10, &v), PX_EINVAL);
	assert_int_equal(vf_seam_check(&r, 5, got, 0, &v), PX_EINVAL);
	assert_int_equal(vf_seam_check(&r, 1 << 30, got, VF_SEAM_MAX + 1, &v), PX_EINVAL);
}

/* ------------------------------------------------------------ store */

struct sfix {
	char dir[64];
	char store[128];
	int logs;
	char last[600];
};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int store_setup(void **state)
{
	struct sfix *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/seamfs-vf-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->store, sizeof(f->store), "%s/state/fingerprints", f->dir);
	*state = f;
	return 0;
}

static int store_teardown(void **state)
{
	struct sfix *f = *state;
	int r = nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

static void on_log(void *ctx, const char *line)
{
	struct sfix *f = ctx;
	f->logs++;
	snprintf(f->last, sizeof(f->last), "%s", line);
}

static struct vf_store *open_store(struct sfix *f)
{
	struct vf_store *s = NULL;
	char err[300] = "";
	enum px_status st = vf_store_open(f->store, on_log, f, &s, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("vf_store_open: %s", err);
	return s;
}

static struct vf_record *make_record(int64_t size, const char *etag, int64_t mtime)
{
	struct vf_record *rec = calloc(1, sizeof(*rec));
	struct fake a;
	assert_non_null(rec);
	fake_init(&a, size);
	rec->seen.size = size;
	rec->seen.mtime = mtime;
	snprintf(rec->seen.etag, sizeof(rec->seen.etag), "%s", etag);
	take_ref(&a, &rec->fp);
	rec->has_fp = 1;
	rec->has_verdict = 1;
	rec->verdict.outcome = VF_MISMATCH;
	rec->verdict.sample = 4;
	rec->verdict.offset = 4096 * 4;
	rec->verdict.size = size;
	snprintf(rec->verdict.why, sizeof(rec->verdict.why), "sample 4 differs");
	snprintf(rec->ref, sizeof(rec->ref), "0123456789abcdef");
	rec->time = 1700000000;
	return rec;
}

static void put(struct vf_store *s, const char *asset, const char *src,
		const struct vf_record *rec, int ref)
{
	char err[300] = "";
	enum px_status st = vf_store_put(s, asset, src, rec, ref, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("vf_store_put: %s: %s", px_strerror(st), err);
}

#define URL_A "http://a.test/heat.mkv"
#define PATH_B "/srv/media/heat.mkv"

static void test_store_round_trip(void **state)
{
	struct sfix *f = *state;
	struct vf_store *s = open_store(f);
	struct vf_record *rec = make_record(GIB + 5, "\"abc\"", 1700000000);
	struct vf_record *out = calloc(1, sizeof(*out));
	char name[200], file[300];
	struct stat sb;
	assert_non_null(out);

	assert_int_equal(stat(f->store, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	assert_int_equal(vf_store_get(s, "heat", URL_A, &rec->seen, out), 0);
	put(s, "heat", URL_A, rec, 1);
	put(s, "heat", PATH_B, rec, 0);
	vf_store_free(s);

	s = open_store(f);
	assert_int_equal(vf_store_get(s, "heat", URL_A, &rec->seen, out), 1);
	assert_int_equal(out->seen.size, rec->seen.size);
	assert_int_equal(out->seen.mtime, rec->seen.mtime);
	assert_string_equal(out->seen.etag, rec->seen.etag);
	assert_true(out->has_fp);
	assert_int_equal(out->fp.plan.n, 100);
	assert_memory_equal(out->fp.sha, rec->fp.sha, sizeof(rec->fp.sha));
	assert_true(out->has_verdict);
	assert_int_equal(out->verdict.outcome, VF_MISMATCH);
	assert_int_equal(out->verdict.sample, 4);
	assert_int_equal(out->verdict.offset, 4096 * 4);
	assert_string_equal(out->verdict.why, "sample 4 differs");
	assert_string_equal(out->ref, "0123456789abcdef");
	assert_int_equal(out->time, 1700000000);
	/* NULL now: whatever was seen */
	assert_int_equal(vf_store_get(s, "heat", PATH_B, NULL, out), 1);
	assert_int_equal(vf_store_get(s, "other", URL_A, NULL, out), 0);

	assert_int_equal(vf_store_reference(s, "heat", name, sizeof(name), out), 1);
	assert_string_equal(name, URL_A);
	assert_memory_equal(out->fp.sha, rec->fp.sha, sizeof(rec->fp.sha));
	/* the reference moves; a put without the flag on the old one clears it */
	put(s, "heat", PATH_B, rec, 1);
	assert_int_equal(vf_store_reference(s, "heat", name, sizeof(name), out), 1);
	assert_string_equal(name, PATH_B);
	put(s, "heat", PATH_B, rec, 0);
	assert_int_equal(vf_store_reference(s, "heat", name, sizeof(name), out), 0);

	/* an inconclusive verdict is not kept; a record without a fingerprint
	 * cannot be the reference */
	rec->verdict.outcome = VF_INCONCLUSIVE;
	put(s, "heat", URL_A, rec, 0);
	assert_int_equal(vf_store_get(s, "heat", URL_A, &rec->seen, out), 1);
	assert_false(out->has_verdict);
	rec->has_fp = 0;
	char err[300];
	assert_int_equal(vf_store_put(s, "heat", URL_A, rec, 1, err, sizeof(err)), PX_EINVAL);

	/* written whole: no tmp file left, mode 0600 */
	assert_int_equal(vf_store_file(s, "heat", file, sizeof(file)), PX_OK);
	assert_int_equal(stat(file, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	char tmp[320];
	/* px_write_atomic's FILE.XXXXXX.tmp (a random name) */
	snprintf(tmp, sizeof(tmp), "%s.*.tmp", file);
	glob_t g;
	assert_int_equal(glob(tmp, 0, NULL, &g), GLOB_NOMATCH);
	globfree(&g);
	assert_int_equal(f->logs, 0);
	vf_store_free(s);
	free(rec);
	free(out);
}

/* Names and ETags are bytes; the file is JSON: those that are not UTF-8
 * (a path on a Latin-1 disk, an ETag with obs-text), and a UTF-8 name
 * that looks like the encoding, come back as they went in. */
static void test_store_bytes_names(void **state)
{
	struct sfix *f = *state;
	struct vf_store *s = open_store(f);
	struct vf_record *rec = make_record(GIB, "\"caf\xe9\"", 1700000000);
	struct vf_record *out = calloc(1, sizeof(*out));
	char name[200], file[300];
	static const char *const names[] = { "/srv/Caf\xe9.mkv", "hex:41", "/srv/Caf\xc3\xa9.mkv" };
	assert_non_null(out);
	snprintf(rec->verdict.why, sizeof(rec->verdict.why), "at /srv/Caf\xe9.mkv");

	for (size_t i = 0; i < 3; i++)
		put(s, "heat", names[i], rec, i == 0);
	vf_store_free(s);
	s = open_store(f);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(vf_store_get(s, "heat", names[i], &rec->seen, out), 1);
		assert_string_equal(out->seen.etag, rec->seen.etag);
		assert_string_equal(out->verdict.why, "at /srv/Caf?.mkv"); /* shown only */
	}
	assert_int_equal(vf_store_get(s, "heat", "A", NULL, out), 0);
	assert_int_equal(vf_store_reference(s, "heat", name, sizeof(name), out), 1);
	assert_string_equal(name, names[0]);

	/* the file is JSON, and says the bytes in hex */
	assert_int_equal(vf_store_file(s, "heat", file, sizeof(file)), PX_OK);
	json_error_t jerr;
	json_t *root = json_load_file(file, 0, &jerr);
	assert_non_null(root);
	assert_non_null(json_object_get(json_object_get(root, "sources"),
					"hex:2f7372762f436166e92e6d6b76"));
	assert_string_equal(json_string_value(json_object_get(root, "reference")),
			    "hex:2f7372762f436166e92e6d6b76");
	json_decref(root);
	assert_int_equal(f->logs, 0);
	vf_store_free(s);
	free(rec);
	free(out);
}

/* Processes that put records of one asset at once (the daemon and
 * `seamfs verify`) lose none of them. */
static void test_store_processes(void **state)
{
	struct sfix *f = *state;
	enum { PROCS = 4, EACH = 30 };
	struct vf_record *rec = make_record(1 << 20, "\"e\"", 1700000000);
	pid_t pids[PROCS];

	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			struct vf_store *s = NULL;
			char err[300], name[64];
			int bad = vf_store_open(f->store, NULL, NULL, &s, err, sizeof(err)) != PX_OK;
			for (int i = 0; !bad && i < EACH; i++) {
				snprintf(name, sizeof(name), "http://h%d.test/%d.mkv", p, i);
				bad = vf_store_put(s, "race", name, rec, 0, err, sizeof(err)) != PX_OK;
			}
			vf_store_free(s);
			_exit(bad);
		}
	}
	for (int p = 0; p < PROCS; p++) {
		int status = 0;
		assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	struct vf_store *s = open_store(f);
	struct vf_record *out = calloc(1, sizeof(*out));
	assert_non_null(out);
	for (int p = 0; p < PROCS; p++) {
		for (int i = 0; i < EACH; i++) {
			char name[64];
			snprintf(name, sizeof(name), "http://h%d.test/%d.mkv", p, i);
			if (vf_store_get(s, "race", name, NULL, out) != 1)
				fail_msg("the record of %s was lost", name);
		}
	}
	vf_store_free(s);
	free(out);
	free(rec);
}

static void test_store_invalidation(void **state)
{
	struct sfix *f = *state;
	struct vf_store *s = open_store(f);
	struct vf_record *rec = make_record(1 << 20, "\"v1\"", 1700000000);
	struct vf_record *out = calloc(1, sizeof(*out));
	struct vf_seen now;
	assert_non_null(out);
	put(s, "a", URL_A, rec, 1);

	now = rec->seen;
	assert_int_equal(vf_store_get(s, "a", URL_A, &now, out), 1);
	now.size++;                                  /* size changed */
	assert_int_equal(vf_store_get(s, "a", URL_A, &now, out), 0);
	now = rec->seen;
	snprintf(now.etag, sizeof(now.etag), "\"v2\"");  /* ETag changed */
	assert_int_equal(vf_store_get(s, "a", URL_A, &now, out), 0);
	now.etag[0] = '\0';                          /* ETag vanished */
	assert_int_equal(vf_store_get(s, "a", URL_A, &now, out), 0);
	now = rec->seen;
	now.mtime++;                                 /* Last-Modified changed */
	assert_int_equal(vf_store_get(s, "a", URL_A, &now, out), 0);
	now.mtime = -1;
	assert_int_equal(vf_store_get(s, "a", URL_A, &now, out), 0);

	/* a source without validators: the size alone */
	rec->seen.etag[0] = '\0';
	rec->seen.mtime = -1;
	put(s, "a", PATH_B, rec, 0);
	now = rec->seen;
	assert_int_equal(vf_store_get(s, "a", PATH_B, &now, out), 1);
	now.mtime = 5;                               /* one appeared: a change */
	assert_int_equal(vf_store_get(s, "a", PATH_B, &now, out), 0);

	/* the replacement record wins */
	rec->seen.size = 2 << 20;
	struct fake b;
	fake_init(&b, rec->seen.size);
	take_ref(&b, &rec->fp);
	put(s, "a", URL_A, rec, 0);
	assert_int_equal(vf_store_get(s, "a", URL_A, &rec->seen, out), 1);
	assert_int_equal(out->fp.size, 2 << 20);
	vf_store_free(s);
	free(rec);
	free(out);
}

static void write_text(const char *file, const char *text)
{
	FILE *fp = fopen(file, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static void test_store_corrupt(void **state)
{
	struct sfix *f = *state;
	struct vf_store *s = open_store(f);
	struct vf_record *rec = make_record(3 * 4096, "", -1);
	struct vf_record *out = calloc(1, sizeof(*out));
	char file[300], name[100], err[300];
	size_t n;
	assert_non_null(out);
	assert_int_equal(vf_store_file(s, "a", file, sizeof(file)), PX_OK);

	/* not JSON: absent, logged with the file's name */
	write_text(file, "{\"version\": 1, \"asset\": \"a\", \"sou");
	assert_int_equal(vf_store_get(s, "a", URL_A, NULL, out), 0);
	assert_int_equal(f->logs, 1);
	assert_non_null(strstr(f->last, file));
	assert_non_null(strstr(f->last, "corrupt"));
	/* a put replaces it */
	put(s, "a", URL_A, rec, 1);
	assert_int_equal(vf_store_get(s, "a", URL_A, NULL, out), 1);

	/* someone else's file (another asset id) */
	write_text(file, "{\"version\": 1, \"asset\": \"b\", \"sources\": {}}");
	assert_int_equal(vf_store_get(s, "a", URL_A, NULL, out), 0);
	assert_non_null(strstr(f->last, "asset"));

	/* one bad record: that one is absent, the other still served */
	const char *text =
		"{\"version\": 1, \"asset\": \"a\", \"sources\": {"
		"\"" URL_A "\": {\"size\": 12288, \"mtime\": -1, \"etag\": \"\", "
		"\"samples\": [[0, 4096, \"zz\"], [4096, 4096, \"00\"], [8192, 4096, \"00\"]]},"
		"\"" PATH_B "\": {\"size\": 12288, \"verdict\": {\"outcome\": \"size_mismatch\", "
		"\"ref\": \"0123456789abcdef\"}}}}";
	write_text(file, text);
	int logs = f->logs;
	assert_int_equal(vf_store_get(s, "a", URL_A, NULL, out), 0);
	assert_int_equal(f->logs, logs + 1);
	assert_non_null(strstr(f->last, "samples[0]"));
	assert_non_null(strstr(f->last, "zz"));
	assert_int_equal(vf_store_get(s, "a", PATH_B, NULL, out), 1);
	assert_false(out->has_fp);
	assert_int_equal(out->verdict.outcome, VF_SIZE_MISMATCH);
	assert_int_equal(vf_store_parse("a", text, strlen(text), &n, err, sizeof(err)), PX_OK);
	assert_int_equal(n, 1);
	assert_non_null(strstr(err, "bad digest"));

	/* samples that are not the plan of the size */
	text = "{\"version\": 1, \"asset\": \"a\", \"sources\": {\"x\": {\"size\": 12288,"
	       " \"samples\": [[0, 4096, \"" "00000000000000000000000000000000"
	       "00000000000000000000000000000000" "\"]]}}}";
	assert_int_equal(vf_store_parse("a", text, strlen(text), &n, err, sizeof(err)), PX_OK);
	assert_int_equal(n, 0);
	assert_non_null(strstr(err, "3 samples"));

	/* top-level faults */
	const char *bad[] = {
		"[]", "{\"version\": 2, \"asset\": \"a\", \"sources\": {}}",
		"{\"version\": 1, \"asset\": \"a\"}",
		"{\"version\": 1, \"asset\": \"a\", \"sources\": {}, \"reference\": \"nope\"}",
		"{\"version\": 1, \"version\": 1, \"asset\": \"a\", \"sources\": {}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(vf_store_parse("a", bad[i], strlen(bad[i]), &n, err, sizeof(err)),
				 PX_EINVAL);
	/* a reference that names a corrupt record is no reference */
	text = "{\"version\": 1, \"asset\": \"a\", \"reference\": \"x\", \"sources\": "
	       "{\"x\": {\"size\": -3}}}";
	write_text(file, text);
	assert_int_equal(vf_store_reference(s, "a", name, sizeof(name), out), 0);
	/* a directory where the file should be */
	unlink(file);
	assert_int_equal(mkdir(file, 0700), 0);
	assert_int_equal(vf_store_get(s, "a", URL_A, NULL, out), 0);
	assert_int_not_equal(vf_store_put(s, "a", URL_A, rec, 0, err, sizeof(err)), PX_OK);
	assert_non_null(strstr(err, file));
	rmdir(file);
	vf_store_free(s);
	free(rec);
	free(out);
}

/* ------------------------------------------------------------ pool */

struct pjob {
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
	int *gate;                /* a blocking job waits until *gate */
	int blocking;
	int ran, done;
	enum px_status got;
	int *started;
	int *finished;
	int *cancelled;
};

static enum px_status job_run(void *arg)
{
	struct pjob *j = arg;
	pthread_mutex_lock(j->lock);
	j->ran++;
	(*j->started)++;
	pthread_cond_broadcast(j->cond);
	while (j->blocking && !*j->gate)
		pthread_cond_wait(j->cond, j->lock);
	pthread_mutex_unlock(j->lock);
	return j->blocking ? PX_ETIMEDOUT : PX_OK;
}

static void job_done(void *arg, enum px_status st)
{
	struct pjob *j = arg;
	pthread_mutex_lock(j->lock);
	j->done++;
	j->got = st;
	if (st == PX_ECANCELED)
		(*j->cancelled)++;
	else
		(*j->finished)++;
	pthread_cond_broadcast(j->cond);
	pthread_mutex_unlock(j->lock);
}

/* Waits (bounded, 10 s) until *v >= want. */
static void wait_count(pthread_mutex_t *m, pthread_cond_t *c, int *v, int want)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(m);
	while (*v < want)
		if (pthread_cond_timedwait(c, m, &ts))
			break;
	int got = *v;
	pthread_mutex_unlock(m);
	assert_true(got >= want);
}

static void test_pool_runs(void **state)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	int gate = 0, started = 0, finished = 0, cancelled = 0;
	struct pjob jobs[200];
	struct vf_pool *p = NULL;

	assert_int_equal(vf_pool_new(0, 4, &p), PX_EINVAL);
	assert_int_equal(vf_pool_new(4, 0, &p), PX_EINVAL);
	assert_int_equal(vf_pool_new(VF_POOL_MAX_THREADS + 1, 4, &p), PX_EINVAL);
	assert_int_equal(vf_pool_new(4, 256, &p), PX_OK);
	assert_int_equal(vf_pool_submit(p, NULL, job_done, &jobs[0]), PX_EINVAL);
	for (int i = 0; i < 200; i++) {
		jobs[i] = (struct pjob){ &m, &c, &gate, 0, 0, 0, PX_EIO, &started, &finished,
					 &cancelled };
		assert_int_equal(vf_pool_submit(p, job_run, job_done, &jobs[i]), PX_OK);
	}
	wait_count(&m, &c, &finished, 200);
	for (int i = 0; i < 200; i++) {
		assert_int_equal(jobs[i].ran, 1);
		assert_int_equal(jobs[i].done, 1);
		assert_int_equal(jobs[i].got, PX_OK);
	}
	assert_int_equal(cancelled, 0);
	assert_int_equal(vf_pool_queued(p), 0);
	vf_pool_free(p);
	vf_pool_free(NULL);
}

static void *shutdown_thread(void *arg)
{
	vf_pool_shutdown(arg);
	return NULL;
}

static void test_pool_shutdown_cancels_queued(void **state)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	int gate = 0, started = 0, finished = 0, cancelled = 0;
	struct pjob jobs[6];
	struct vf_pool *p = NULL;
	pthread_t t;

	assert_int_equal(vf_pool_new(1, 5, &p), PX_OK);
	for (int i = 0; i < 6; i++)
		jobs[i] = (struct pjob){ &m, &c, &gate, i == 0, 0, 0, PX_EIO, &started,
					 &finished, &cancelled };
	assert_int_equal(vf_pool_submit(p, job_run, job_done, &jobs[0]), PX_OK);
	wait_count(&m, &c, &started, 1);         /* the one worker is busy */
	for (int i = 1; i < 6; i++)
		assert_int_equal(vf_pool_submit(p, job_run, job_done, &jobs[i]), PX_OK);
	assert_int_equal(vf_pool_queued(p), 5);
	/* bounded: the sixth waiting job is refused */
	struct pjob extra = jobs[1];
	assert_int_equal(vf_pool_submit(p, job_run, job_done, &extra), PX_EFULL);

	assert_int_equal(pthread_create(&t, NULL, shutdown_thread, p), 0);
	wait_count(&m, &c, &cancelled, 5);       /* queued jobs cancelled at once */
	pthread_mutex_lock(&m);
	gate = 1;                                /* then the running one ends */
	pthread_cond_broadcast(&c);
	pthread_mutex_unlock(&m);
	pthread_join(t, NULL);

	assert_int_equal(jobs[0].ran, 1);
	assert_int_equal(jobs[0].done, 1);
	assert_int_equal(jobs[0].got, PX_ETIMEDOUT);  /* what run returned */
	for (int i = 1; i < 6; i++) {
		assert_int_equal(jobs[i].ran, 0);
		assert_int_equal(jobs[i].done, 1);
		assert_int_equal(jobs[i].got, PX_ECANCELED);
	}
	assert_int_equal(vf_pool_submit(p, job_run, job_done, &extra), PX_ESHUTDOWN);
	vf_pool_shutdown(p);                     /* idempotent */
	vf_pool_free(p);
}

/* ------------------------------------------------------------ hash */

static void test_hash(void **state)
{
	unsigned char d[VF_HASH_LEN], e[VF_HASH_LEN];
	char hex[VF_HASH_HEX];
	struct vf_hash *h;
	assert_int_equal(vf_hash_once("abc", 3, d), PX_OK);
	vf_hash_hex(d, VF_HASH_LEN, hex);
	assert_string_equal(hex,
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_int_equal(vf_hash_new(&h), PX_OK);
	assert_int_equal(vf_hash_update(h, "a", 1), PX_OK);
	assert_int_equal(vf_hash_update(h, "bc", 2), PX_OK);
	assert_int_equal(vf_hash_final(h, e), PX_OK);
	assert_memory_equal(d, e, VF_HASH_LEN);
	assert_int_equal(vf_hash_update(h, "x", 1), PX_EINVAL);
	vf_hash_free(h);
	vf_hash_free(NULL);
	assert_int_equal(vf_hash_unhex(hex, 64, e, VF_HASH_LEN), 0);
	assert_memory_equal(d, e, VF_HASH_LEN);
	assert_int_equal(vf_hash_unhex("0g", 2, e, 1), -1);
	assert_int_equal(vf_hash_unhex("00", 2, e, 2), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_sizes),
		cmocka_unit_test(test_verdict_match),
		cmocka_unit_test(test_verdict_flip_inside),
		cmocka_unit_test(test_verdict_flip_outside_is_missed),
		cmocka_unit_test(test_verdict_unreadable),
		cmocka_unit_test(test_verdict_reference_side),
		cmocka_unit_test(test_verdict_size_gate),
		cmocka_unit_test(test_fingerprint_id),
		cmocka_unit_test(test_outcome_names),
		cmocka_unit_test(test_seam),
		cmocka_unit_test_setup_teardown(test_store_round_trip, store_setup, store_teardown),
		cmocka_unit_test_setup_teardown(test_store_bytes_names, store_setup, store_teardown),
		cmocka_unit_test_setup_teardown(test_store_processes, store_setup, store_teardown),
		cmocka_unit_test_setup_teardown(test_store_invalidation, store_setup, store_teardown),
		cmocka_unit_test_setup_teardown(test_store_corrupt, store_setup, store_teardown),
		cmocka_unit_test(test_pool_runs),
		cmocka_unit_test(test_pool_shutdown_cancels_queued),
		cmocka_unit_test(test_hash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
