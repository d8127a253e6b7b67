/*
 * test_metrics.c - histo.c and metrics.c, and px_provider_drain(): histogram
 * buckets at and around their bounds, and the metrics text of a core with
 * awkward provider names checked by a strict parser of the Prometheus text
 * exposition format 0.0.4 (below): HELP and TYPE once per family and before
 * its samples, a family's samples together, valid metric and label names,
 * label values with only the three escapes, numeric values, histograms
 * with ascending le ending at +Inf, non-decreasing counts and _count
 * equal to the +Inf bucket. Drain and resume are checked through what a
 * new session chooses.
 */
#include <ctype.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#include "histo.h"
#include "session.h"
#include "utf8.h"

#define SIZE (3 * 1024 * 1024 + 17)

static unsigned char *g_data;

/* ------------------------------------------------------------ histograms */

static void test_histo_buckets(void **state)
{
	struct px_histo h = { 0 };
	struct px_histo_snap s;
	(void)state;

	px_histo_observe(&h, 0.001);      /* on a bound: that bucket (le) */
	px_histo_observe(&h, 0.0010011);  /* just above: the next */
	px_histo_observe(&h, -3);         /* counts as 0 */
	px_histo_observe(&h, NAN);        /* counts as 0 */
	px_histo_observe(&h, 0.7);
	px_histo_observe(&h, 30);
	px_histo_observe(&h, 30.5);       /* beyond the last bound: +Inf only */
	px_histo_observe_us(&h, 2500);
	px_histo_snapshot(&h, &s);
	assert_int_equal(s.cum[0], 3);    /* 0.001, -3, NaN */
	assert_int_equal(s.cum[1], 5);    /* + 0.0010011, 0.0025 */
	assert_int_equal(s.cum[7], 5);    /* le 0.25 */
	assert_int_equal(s.cum[8], 5);    /* le 0.5: 0.7 is not in it */
	assert_int_equal(s.cum[9], 6);    /* le 1: 0.7 */
	assert_int_equal(s.cum[12], 6);
	assert_int_equal(s.cum[13], 7);   /* le 30: 30 */
	assert_int_equal(s.cum[PX_HISTO_NBOUNDS], 8);
	assert_int_equal(s.count, 8);
	assert_true(fabs(s.sum - (0.001 + 0.001001 + 0.7 + 30 + 30.5 + 0.0025)) < 1e-5);
	for (size_t i = 1; i < PX_HISTO_NBOUNDS; i++)
		assert_true(px_histo_bounds[i] > px_histo_bounds[i - 1]);
}

/* ------------------------------------------------- an exposition parser */

struct family {
	char name[128];
	char type[16];
	int help, samples, closed;
	/* histogram state, per label set without le (one set here) */
	double last_le;
	double last_count;
	double inf;
	int nbuckets, has_inf, has_sum, has_count;
	double count;
};

struct expo {
	struct family fam[256];
	int n;
	int current;               /* family whose samples came last, -1 */
	char err[512];
};

static int name_ok(const char *s, size_t n, int colon)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || (colon && s[0] == ':')))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || (colon && s[i] == ':')))
			return 0;
	return 1;
}

static struct family *fam_get(struct expo *e, const char *name, size_t n, int make)
{
	for (int i = 0; i < e->n; i++)
		if (strlen(e->fam[i].name) == n && memcmp(e->fam[i].name, name, n) == 0)
			return &e->fam[i];
	if (!make || e->n == 256 || n >= sizeof(e->fam[0].name))
		return NULL;
	struct family *f = &e->fam[e->n++];
	memset(f, 0, sizeof(*f));
	memcpy(f->name, name, n);
	f->last_le = -INFINITY;
	return f;
}

static int value_ok(const char *s, double *out)
{
	char *end;
	if (strcmp(s, "+Inf") == 0 || strcmp(s, "-Inf") == 0 || strcmp(s, "NaN") == 0) {
		*out = s[0] == '+' ? INFINITY : s[0] == '-' ? -INFINITY : NAN;
		return 1;
	}
	if (!*s || isspace((unsigned char)*s))
		return 0;
	*out = strtod(s, &end);
	return *end == '\0' && !isnan(*out) && !isinf(*out);
}

#define BAD(...) do { snprintf(e->err, sizeof(e->err), __VA_ARGS__); return -1; } while (0)

/* One sample line; the family is looked up by the histogram suffixes. */
static int parse_sample(struct expo *e, const char *line)
{
	const char *p = line;
	size_t nl = 0;
	char le[64] = "";
	int has_le = 0;
	while (p[nl] && p[nl] != '{' && p[nl] != ' ')
		nl++;
	if (!name_ok(p, nl, 1))
		BAD("bad metric name in '%s'", line);
	p += nl;
	if (*p == '{') {
		p++;
		int first = 1;
		while (*p != '}') {
			if (!first) {
				if (*p != ',')
					BAD("expected ',' in '%s'", line);
				p++;
				if (*p == '}')
					break; /* a trailing comma is allowed */
			}
			first = 0;
			size_t ln = 0;
			while (p[ln] && p[ln] != '=')
				ln++;
			if (!name_ok(p, ln, 0) || (ln >= 2 && p[0] == '_' && p[1] == '_'))
				BAD("bad label name in '%s'", line);
			int is_le = ln == 2 && memcmp(p, "le", 2) == 0;
			p += ln;
			if (p[0] != '=' || p[1] != '"')
				BAD("expected =\" in '%s'", line);
			p += 2;
			size_t k = 0;
			for (; *p != '"'; p++) {
				if (!*p)
					BAD("unterminated label value in '%s'", line);
				if (*p == '\\') {
					p++;
					if (*p != '\\' && *p != '"' && *p != 'n')
						BAD("bad escape in '%s'", line);
				}
				if (is_le && k + 1 < sizeof(le))
					le[k++] = *p;
			}
			if (is_le) {
				le[k] = '\0';
				has_le = 1;
			}
			p++;
		}
		p++;
	}
	if (*p != ' ')
		BAD("expected a space before the value in '%s'", line);
	p++;
	char val[64];
	size_t vn = strcspn(p, " ");
	if (vn >= sizeof(val))
		BAD("value too long in '%s'", line);
	memcpy(val, p, vn);
	val[vn] = '\0';
	double v;
	if (!value_ok(val, &v))
		BAD("bad value in '%s'", line);
	if (p[vn]) { /* a timestamp */
		char *end;
		strtoll(p + vn + 1, &end, 10);
		if (*end || end == p + vn + 1)
			BAD("bad timestamp in '%s'", line);
	}

	struct family *f = fam_get(e, line, nl, 0);
	const char *suffix = "";
	if (!f) {
		static const char *const sfx[] = { "_bucket", "_sum", "_count" };
		for (int i = 0; i < 3 && !f; i++) {
			size_t sl = strlen(sfx[i]);
			if (nl > sl && memcmp(line + nl - sl, sfx[i], sl) == 0) {
				f = fam_get(e, line, nl - sl, 0);
				suffix = sfx[i];
				if (f && strcmp(f->type, "histogram") != 0)
					f = NULL;
			}
		}
	}
	if (!f || !f->type[0])
		BAD("sample before its TYPE: '%s'", line);
	if (f->closed)
		BAD("family %s's samples are not together", f->name);
	if (e->current >= 0 && &e->fam[e->current] != f)
		e->fam[e->current].closed = 1;
	e->current = (int)(f - e->fam);
	f->samples++;
	if (strcmp(f->type, "histogram") == 0) {
		if (!*suffix)
			BAD("histogram sample without a suffix: '%s'", line);
		if (strcmp(suffix, "_bucket") == 0) {
			double lv;
			if (!has_le || !value_ok(le, &lv) || isnan(lv))
				BAD("bucket without a valid le: '%s'", line);
			if (f->has_inf || lv <= f->last_le)
				BAD("le not ascending: '%s'", line);
			if (v < f->last_count)
				BAD("bucket counts decrease: '%s'", line);
			f->last_le = lv;
			f->last_count = v;
			f->nbuckets++;
			if (isinf(lv)) {
				f->has_inf = 1;
				f->inf = v;
			}
		} else if (strcmp(suffix, "_sum") == 0) {
			f->has_sum = 1;
		} else {
			f->has_count = 1;
			f->count = v;
		}
	} else if (has_le) {
		BAD("le label outside a histogram: '%s'", line);
	} else if (strcmp(f->type, "counter") == 0 && v < 0) {
		BAD("negative counter: '%s'", line);
	}
	return 0;
}

static int expo_parse(struct expo *e, const char *text)
{
	memset(e, 0, sizeof(*e));
	e->current = -1;
	size_t len = strlen(text);
	if (len == 0 || text[len - 1] != '\n')
		BAD("the text does not end with a newline");
	for (const char *line = text; *line;) {
		const char *nlp = strchr(line, '\n');
		char buf[1024];
		size_t n = (size_t)(nlp - line);
		if (n >= sizeof(buf))
			BAD("line too long");
		memcpy(buf, line, n);
		buf[n] = '\0';
		line = nlp + 1;
		if (n == 0)
			continue;
		if (strncmp(buf, "# HELP ", 7) == 0 || strncmp(buf, "# TYPE ", 7) == 0) {
			const char *name = buf + 7;
			size_t nn = strcspn(name, " ");
			if (!name_ok(name, nn, 1) || name[nn] != ' ')
				BAD("bad name in '%s'", buf);
			struct family *f = fam_get(e, name, nn, 1);
			if (!f)
				BAD("too many families");
			if (f->samples)
				BAD("HELP/TYPE after samples: '%s'", buf);
			if (buf[2] == 'H') {
				if (f->help++)
					BAD("second HELP for %s", f->name);
				for (const char *c = name + nn + 1; *c; c++)
					if (*c == '\\' && c[1] != '\\' && c[1] != 'n')
						BAD("bad escape in HELP '%s'", buf);
					else if (*c == '\\')
						c++;
			} else {
				const char *t = name + nn + 1;
				if (f->type[0])
					BAD("second TYPE for %s", f->name);
				if (strcmp(t, "counter") && strcmp(t, "gauge") && strcmp(t, "histogram") &&
				    strcmp(t, "summary") && strcmp(t, "untyped"))
					BAD("bad type in '%s'", buf);
				snprintf(f->type, sizeof(f->type), "%s", t);
			}
			continue;
		}
		if (buf[0] == '#')
			continue; /* a comment */
		if (parse_sample(e, buf))
			return -1;
	}
	for (int i = 0; i < e->n; i++) {
		struct family *f = &e->fam[i];
		if (strcmp(f->type, "histogram") != 0)
			continue;
		if (!f->has_inf || !f->has_sum || !f->has_count)
			BAD("histogram %s lacks +Inf, _sum or _count", f->name);
		if (f->count != f->inf)
			BAD("histogram %s: _count %g, +Inf bucket %g", f->name, f->count, f->inf);
	}
	return 0;
}

/* The value of the line that starts with prefix (followed by a space). */
static double value_of(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, prefix, n) == 0 && l[n] == ' ')
			return strtod(l + n + 1, NULL);
	fail_msg("no sample %s", prefix);
	return -1;
}

static void test_parser_rejects(void **state)
{
	struct expo e;
	(void)state;
	/* the checker itself must fail what is wrong */
	static const char *const bad[] = {
		"x 1\n",                                              /* no TYPE */
		"# TYPE x gauge\nx{a=\"b\\t\"} 1\n",                  /* bad escape */
		"# TYPE x gauge\nx{a=\"b\"} one\n",                   /* bad value */
		"# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n",    /* not together */
		"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 2\n",
		("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"0.5\"} 2\n"
		 "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n"),
		"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n",
		"# TYPE x gauge\n1x 1\n",
		"# TYPE x gauge\nx 1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (expo_parse(&e, bad[i]) == 0)
			fail_msg("accepted bad input %zu: %s", i, bad[i]);
	assert_int_equal(expo_parse(&e, "# HELP x a \\\\ b\n# TYPE x counter\n"
				    "x{a=\"q\\\"\\n\\\\\",} 1 1700000000\n"), 0);
}

/* ------------------------------------------------------------ the core */

static const unsigned char *data_for(const char *url)
{
	(void)url;
	return g_data;
}

/* A rig (rig.h) with two providers: "plain" (or rename0) and one whose
 * name needs escaping in a label. Started. */
static struct rig *rig_new_named(const char *rename0)
{
	static const char text[] =
		"{\"providers\": [{\"name\": \"plain\", \"max_connections\": 3},"
		" {\"name\": \"we\\\"ird\\\\na\\nme\"}],"
		" \"assets\": [{\"id\": \"a\", \"path\": \"a.bin\", \"size\": 3145745,"
		" \"mtime\": 1600000000, \"sources\": ["
		"  {\"url\": \"http://plain.test/a.bin\", \"provider\": \"plain\"},"
		"  {\"url\": \"http://weird.test/a.bin\", \"provider\": \"we\\\"ird\\\\na\\nme\"}]}]}";
	struct rig_opts o = {
		.catalog = text, .size = SIZE, .threaded = 1, .chunk = 64 * 1024,
		.data_for = data_for, .fallback = g_data, .stream_min = 1 << 20,
	};
	struct rig *r = rig_new(&o);

	r->cfg.read_timeout_ms = 5000;
	r->cfg.head_size = 0;
	r->cfg.tail_size = 0;
	if (rename0) {
		/* what an imported URL's host may be: not UTF-8 */
		free(r->cat->providers[0].name);
		r->cat->providers[0].name = strdup(rename0);
		assert_non_null(r->cat->providers[0].name);
	}
	rig_start(r, NULL, 0);
	return r;
}

static struct rig *metrics_rig(void)
{
	return rig_new_named(NULL);
}

static const char *session_provider(struct rig *r, struct px_handle *h)
{
	long prov = px_provider_of_session(r->core, px_handle_session_id(h));
	assert_true(prov >= 0 && (size_t)prov < r->cat->nproviders);
	return r->cat->providers[prov].name;
}

static void test_metrics_text(void **state)
{
	struct rig *r = metrics_rig();
	struct px_handle *h = NULL;
	unsigned char buf[70000];
	size_t got = 0;
	struct expo e;
	(void)state;

	/* a read, so that both histograms have something */
	assert_int_equal(px_handle_open(r->core, 0, 1, &h), PX_OK);
	assert_int_equal(px_handle_read(h, 1000, sizeof(buf), buf, &got), PX_OK);
	assert_int_equal(got, sizeof(buf));
	assert_memory_equal(buf, g_data + 1000, sizeof(buf));
	px_metrics_note_read(r->core, 1500);
	px_metrics_note_read(r->core, 40000000);
	/* the read may return before its transfer's on_done has counted the
	 * answer: let the transfer end */
	assert_true(fake_wait(&r->fake, all_ended, 0, 5000));

	char *text = px_metrics_text(r->core);
	assert_non_null(text);
	if (expo_parse(&e, text) != 0)
		fail_msg("%s\n--- text:\n%s", e.err, text);
	/* the escaped name, as a scraper would read it back */
	assert_true(strstr(text, "seamfs_provider_up{provider=\"we\\\"ird\\\\na\\nme\"} 1\n"));
	assert_true(value_of(text, "seamfs_provider_max_connections{provider=\"plain\"}") == 3);
	assert_true(value_of(text, "seamfs_sessions{state=\"open\"}") == 1);
	/* a read of a few KiB: the session is a scan's */
	assert_true(value_of(text, "seamfs_sessions_by_kind{kind=\"scan\"}") == 1);
	assert_true(value_of(text, "seamfs_sessions_by_kind{kind=\"playback\"}") == 0);
	assert_true(value_of(text, "seamfs_read_latency_seconds_count") == 2);
	assert_true(value_of(text, "seamfs_read_latency_seconds_bucket{le=\"0.0025\"}") == 1);
	assert_true(value_of(text, "seamfs_read_latency_seconds_bucket{le=\"30\"}") == 1);
	assert_true(value_of(text, "seamfs_read_latency_seconds_bucket{le=\"+Inf\"}") == 2);
	assert_true(value_of(text, "seamfs_first_byte_seconds_count") >= 1);
	/* the read's one transfer, answered well; no liveness probe yet (the
	 * first comes liveness_interval after the start) */
	assert_true(value_of(text, "seamfs_provider_answers_total{provider=\"plain\","
				   "result=\"good\"}") == 1);
	assert_true(value_of(text, "seamfs_readahead_budget_bytes") == (double)r->cfg.readahead_budget);
	free(text);
	px_handle_close(h);
	rig_free(r);
}

static void test_drain_and_resume(void **state)
{
	struct rig *r = metrics_rig();
	struct px_handle *h1 = NULL, *h2 = NULL, *h3 = NULL;
	unsigned char buf[4096];
	size_t got = 0;
	const char *weird = r->cat->providers[1].name;
	(void)state;

	assert_int_equal(px_provider_drain(r->core, "nobody", 1), PX_ENOTFOUND);
	assert_int_equal(px_handle_open(r->core, 0, 1, &h1), PX_OK);
	assert_string_equal(session_provider(r, h1), "plain");
	assert_int_equal(px_provider_drain(r->core, "plain", 1), PX_OK);
	assert_int_equal(px_provider_drain(r->core, "plain", 1), PX_OK); /* idempotent */
	/* a new client goes elsewhere; the open session reads on */
	assert_int_equal(px_handle_open(r->core, 0, 2, &h2), PX_OK);
	assert_string_equal(session_provider(r, h2), weird);
	assert_int_equal(px_handle_read(h1, 5000, sizeof(buf), buf, &got), PX_OK);
	assert_memory_equal(buf, g_data + 5000, sizeof(buf));
	char *text = px_metrics_text(r->core);
	assert_true(value_of(text, "seamfs_provider_drained{provider=\"plain\"}") == 1);
	assert_true(value_of(text, "seamfs_provider_state{provider=\"plain\",state=\"drained\"}") == 1);
	free(text);
	char *js = px_report_json(r->core);
	assert_non_null(strstr(js, "\"state\": \"drained\""));
	free(js);
	/* resumed: the tie (one session each) goes to the first by name */
	assert_int_equal(px_provider_drain(r->core, "plain", 0), PX_OK);
	assert_int_equal(px_handle_open(r->core, 0, 3, &h3), PX_OK);
	assert_string_equal(session_provider(r, h3), "plain");
	px_handle_close(h1);
	px_handle_close(h2);
	px_handle_close(h3);
	rig_free(r);
}

/* Cutovers whose triggers share a reason's name ("error": a local I/O
 * error, a premature end of file) are one series, summed: a scraper takes
 * a series once, and two lines of one series break the whole scrape. */
static void test_cutover_reasons_one_series(void **state)
{
	static const char text[] =
		"{\"assets\": [{\"id\": \"a\", \"path\": \"a.bin\", \"size\": 3145745,"
		" \"mtime\": 1600000000, \"sources\": ["
		"  {\"url\": \"http://one.test/a.bin\"}, {\"url\": \"http://two.test/a.bin\"}]}]}";
	struct rig_opts o = {
		.catalog = text, .size = SIZE, .threaded = 1, .chunk = 64 * 1024,
		.data_for = data_for, .fallback = g_data, .stream_min = 1 << 20,
		.mtime = 1600000000,
	};
	struct rig *r = rig_new(&o);
	unsigned char buf[4096];
	size_t got = 0;
	(void)state;

	r->cfg.head_size = 0;
	r->cfg.tail_size = 0;
	rig_start(r, NULL, 0);
	struct px_handle *h = rig_open(r, 0, 1);
	struct px_session *s = px_handle_session(h);
	int64_t deadline = px_now_ms() + 5000;
	assert_int_equal(px_cutover(s, 0, 8192, PX_EIO, NULL, 0, deadline), PX_OK);
	assert_int_equal(px_provider_of_session(r->core, px_handle_session_id(h)), 1);
	assert_int_equal(px_cutover(s, 1, 8192, PX_EOF, NULL, 0, deadline), PX_OK);
	assert_int_equal(px_provider_of_session(r->core, px_handle_session_id(h)), 0);
	assert_int_equal(px_handle_read(h, 8192, sizeof(buf), buf, &got), PX_OK);
	assert_memory_equal(buf, g_data + 8192, sizeof(buf));

	char *m = px_metrics_text(r->core);
	assert_non_null(m);
	const char *series = "seamfs_cutovers_total{reason=\"error\"} ";
	const char *at = strstr(m, series);
	assert_non_null(at);
	assert_null(strstr(at + 1, series));
	assert_true(value_of(m, "seamfs_cutovers_total{reason=\"error\"}") == 2);
	free(m);
	rig_close(r, h);
	rig_free(r);
}

/* A label is UTF-8 (the text format's encoding): other bytes show as '?'. */
static void test_label_not_utf8(void **state)
{
	struct rig *r = rig_new_named("pl\xe9in\xc3\xa9");
	struct expo e;
	(void)state;

	char *text = px_metrics_text(r->core);
	assert_non_null(text);
	if (expo_parse(&e, text) != 0)
		fail_msg("%s\n--- text:\n%s", e.err, text);
	assert_true(px_utf8_valid(text));
	assert_true(strstr(text, "seamfs_provider_up{provider=\"pl?in\xc3\xa9\"} 1\n"));
	free(text);
	rig_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_histo_buckets),
		cmocka_unit_test(test_parser_rejects),
		cmocka_unit_test_teardown(test_metrics_text, rig_teardown),
		cmocka_unit_test_teardown(test_drain_and_resume, rig_teardown),
		cmocka_unit_test_teardown(test_label_not_utf8, rig_teardown),
		cmocka_unit_test_teardown(test_cutover_reasons_one_series, rig_teardown),
	};
	g_data = malloc(SIZE);
	for (size_t i = 0; i < SIZE; i++)
		g_data[i] = (unsigned char)(i * 7 + (i >> 11));
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(g_data);
	return rc;
}
