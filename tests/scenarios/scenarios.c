/*
 * scenarios.c - the seeded scenario checker, in-process (README.md here).
 *
 *   scenarios [--count N] [--seed S] [--jobs J] [--repeat K] [--clean | --force-switch]
 *             [--verbose] [--log FILE [--log-level L]]
 *
 * Runs N scenarios, seeds S .. S+N-1, J at a time, each on its own core
 * and fake fetcher (scen.h). A violation prints its seed, what broke and
 * the command that replays that scenario alone. The last line is always
 * "scenarios: N run, V violations"; the exit status is 1 when V > 0, 2 on
 * bad arguments. With --log, the core's lines about the first violations'
 * assets (ids "aSEED") are printed after the run: a violation that only
 * happens under load still shows what the core did.
 *
 * --clean makes every source identical and faultless (a correct checker
 * finds nothing there); --force-switch moves every session by hand to a
 * source that differs (a correct checker finds each one).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "scen.h"

struct run {
	uint64_t seed;
	long count;
	long repeat;      /* runs of each seed, side by side: a race a replay alone misses */
	int jobs;
	enum sc_mode mode;
	_Atomic long next, done, violations, switched, reads, failed, cuts, unseen, unknown, starved,
		slots_taken;
	_Atomic long by_kind[7];
	pthread_mutex_t print_lock;
	char bad[8][32]; /* the first violations' tags (scen.h), for their log lines */
	_Atomic long nbad;
};

static struct run g_run;

static const char *const kind_names[7] = {
	"wrong bytes", "read failed with an identical source up", "read too slow",
	"provider over its limit", "stored reference contradicted", "other", "wrong bytes in the cached head or tail" };

static int kind_of(const char *what)
{
	if (strstr(what, "byte ") == what)
		return strstr(what, "cached head") ? 6 : 0;
	if (strstr(what, "could serve"))
		return 1;
	if (strstr(what, " took "))
		return 2;
	if (strstr(what, "provider p") == what)
		return 3;
	if (strstr(what, "stored reference"))
		return 4;
	return 5;
}

static const char *mode_flag(enum sc_mode m)
{
	return m == SC_CLEAN ? " --clean" : m == SC_FORCE_SWITCH ? " --force-switch" : "";
}

static void report(struct scen *s)
{
	char desc[2048];
	scen_describe(s, desc, sizeof(desc));
	pthread_mutex_lock(&g_run.print_lock);
	printf("VIOLATION seed %llu%s%s: %s\n  scenario: %s\n  replay: tests/scenarios/run --seed "
	       "%llu --count 1%s%s\n", (unsigned long long)s->seed, g_run.repeat > 1 ? ", run " : "",
	       g_run.repeat > 1 ? s->tag : "", s->what, desc, (unsigned long long)s->seed,
	       g_run.repeat > 1 ? " --repeat 200" : "", mode_flag(s->mode));
	fflush(stdout);
	pthread_mutex_unlock(&g_run.print_lock);
}

static void summary(void)
{
	long v = atomic_load(&g_run.violations);
	if (v) {
		printf("violations by kind:");
		for (int i = 0; i < 7; i++)
			if (atomic_load(&g_run.by_kind[i]))
				printf(" %s %ld;", kind_names[i], atomic_load(&g_run.by_kind[i]));
		printf("\n");
	}
	if (atomic_load(&g_run.unseen))
		printf("scenarios whose reader got a byte that differs outside every sample "
		       "(sampling cannot see it; not counted): %ld\n", atomic_load(&g_run.unseen));
	if (atomic_load(&g_run.unknown))
		printf("scenarios whose reader got a standby's byte inside a sample the served "
		       "source died before giving, within read_timeout of the start (no "
		       "check could know it; not counted): %ld\n", atomic_load(&g_run.unknown));
	if (atomic_load(&g_run.starved))
		printf("scenarios whose read timed out while the machine withheld the process "
		       "for as long as the timing that failed it (lag.c; not counted): %ld\n",
		       atomic_load(&g_run.starved));
	if (atomic_load(&g_run.slots_taken))
		printf("scenarios whose read failed while every source able to serve it was on a "
		       "provider whose every slot other clients' open sessions held (not "
		       "counted): %ld\n", atomic_load(&g_run.slots_taken));
	int64_t worst, lost = sc_lag_total(&worst);
	printf("the machine withheld the process %lld ms in late wakes, %lld ms at worst\n",
	       (long long)lost, (long long)worst);
	printf("reads %ld, failed %ld, sessions cut over %ld%s", atomic_load(&g_run.reads),
	       atomic_load(&g_run.failed), atomic_load(&g_run.cuts),
	       g_run.mode == SC_FORCE_SWITCH ? "" : "\n");
	if (g_run.mode == SC_FORCE_SWITCH)
		printf(", sessions moved by hand %ld\n", atomic_load(&g_run.switched));
	printf("scenarios: %ld run, %ld violations\n", atomic_load(&g_run.done), v);
	fflush(stdout);
}

void scen_hung(struct scen *s)
{
	atomic_fetch_add(&g_run.done, 1);
	atomic_fetch_add(&g_run.violations, 1);
	report(s);
	pthread_mutex_lock(&g_run.print_lock);
	printf("a reader hangs: the run stops here\n");
	summary();
	_exit(1);
}

static void *worker(void *arg)
{
	struct scen *s = malloc(sizeof(*s));
	(void)arg;
	for (long i; s && (i = atomic_fetch_add(&g_run.next, 1)) < g_run.count * g_run.repeat;) {
		uint64_t seed = g_run.seed + (uint64_t)(i / g_run.repeat);
		if (scen_make(s, seed, g_run.mode) != 0) {
			s->seed = seed;
			snprintf(s->tag, sizeof(s->tag), "%llu", (unsigned long long)seed);
			snprintf(s->what, sizeof(s->what), "out of memory making the scenario");
			s->violated = 1;
		} else {
			if (g_run.repeat > 1)
				snprintf(s->tag, sizeof(s->tag), "%llur%ld", (unsigned long long)seed,
					 i % g_run.repeat);
			(void)scen_run(s);
		}
		atomic_fetch_add(&g_run.reads, s->nreads);
		atomic_fetch_add(&g_run.failed, s->nfailed);
		atomic_fetch_add(&g_run.cuts, s->ncut);
		atomic_fetch_add(&g_run.switched, s->switch_done);
		atomic_fetch_add(&g_run.unseen, s->unseen && !s->violated);
		atomic_fetch_add(&g_run.unknown, s->unknown && !s->violated);
		atomic_fetch_add(&g_run.starved, s->starved && !s->violated);
		atomic_fetch_add(&g_run.slots_taken, s->slots_taken && !s->violated);
		if (s->violated) {
			long b = atomic_fetch_add(&g_run.nbad, 1);
			if (b < 8)
				snprintf(g_run.bad[b], sizeof(g_run.bad[b]), "%s", s->tag);
			atomic_fetch_add(&g_run.violations, 1);
			atomic_fetch_add(&g_run.by_kind[kind_of(s->what)], 1);
			report(s);
		}
		atomic_fetch_add(&g_run.done, 1);
		scen_free(s);
	}
	free(s);
	return NULL;
}

static int usage(const char *why)
{
	fprintf(stderr, "scenarios: %s\nusage: scenarios [--count N] [--seed S] [--jobs J] "
		"[--repeat K] [--clean | --force-switch] [--verbose]\n"
		"                 [--log FILE [--log-level L]]\n", why);
	return 2;
}

/* A whole number in [min, max] from arg, else -1 with a message. */
static int number(const char *opt, const char *arg, unsigned long long min,
		  unsigned long long max, unsigned long long *out)
{
	char *end = NULL;
	if (!arg || !*arg || *arg == '-') {
		fprintf(stderr, "scenarios: %s needs a number\n", opt);
		return -1;
	}
	*out = strtoull(arg, &end, 0);
	if (*end || *out < min || *out > max) {
		fprintf(stderr, "scenarios: %s %s: not a number in [%llu, %llu]\n", opt, arg, min,
			max);
		return -1;
	}
	return 0;
}

/* Whether tag occurs in line with no digit after it (and, for a provider's
 * "-SEED", after "pN"). */
static int has_tag(const char *line, const char *tag, int provider)
{
	size_t n = strlen(tag);
	for (const char *t = strstr(line, tag); t; t = strstr(t + 1, tag)) {
		const char *b = t;
		while (provider && b > line && b[-1] >= '0' && b[-1] <= '9')
			b--;
		if ((t[n] < '0' || t[n] > '9') &&
		    (!provider || (b < t && b > line && b[-1] == 'p')))
			return 1;
	}
	return 0;
}

/* Whether a log line is about the scenario tagged tag (scen.h): its asset
 * ("asset aTAG"), a URL of its sources ("pN.sTAG.test") or a provider
 * ("pN-TAG"). */
static int about(const char *line, const char *tag)
{
	char asset[48], url[48], prov[48];
	snprintf(asset, sizeof(asset), "asset a%s", tag);
	snprintf(url, sizeof(url), ".s%s.test", tag);
	snprintf(prov, sizeof(prov), "-%s", tag);
	return has_tag(line, asset, 0) || strstr(line, url) || has_tag(line, prov, 1);
}

/*
 * After a run with --log: the core's lines about each of the first
 * violations' scenarios (about()), at most 3000 a seed, so that a run
 * that cannot be replayed (it failed under load) still says what the core
 * did.
 */
static void print_bad_logs(const char *log)
{
	long nbad = atomic_load(&g_run.nbad);
	char line[2048];
	for (long b = 0; log && b < nbad && b < 8; b++) {
		FILE *f = fopen(log, "r");
		int n = 0;
		if (!f)
			return;
		printf("the core's log for scenario %s (%s):\n", g_run.bad[b], log);
		while (n < 3000 && fgets(line, sizeof(line), f)) {
			if (about(line, g_run.bad[b])) {
				fputs(line, stdout);
				n++;
			}
		}
		fclose(f);
	}
}

static int parse(int argc, char **argv, int *verbose, const char **log,
		 enum px_log_level *level)
{
	unsigned long long v;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--count") == 0 && number(a, next, 0, 10000000, &v) == 0)
			g_run.count = (long)v;
		else if (strcmp(a, "--seed") == 0 && number(a, next, 0, UINT64_MAX, &v) == 0)
			g_run.seed = v;
		else if (strcmp(a, "--repeat") == 0 && number(a, next, 1, 10000, &v) == 0)
			g_run.repeat = (long)v;
		else if (strcmp(a, "--jobs") == 0 && number(a, next, 1, 256, &v) == 0)
			g_run.jobs = (int)v;
		else if (strcmp(a, "--log") == 0 && next)
			*log = next;
		else if (strcmp(a, "--log-level") == 0 && next) {
			if (px_log_level_parse(next, level) != PX_OK)
				return usage("--log-level: not error, warn, info or debug");
		}
		else if (strcmp(a, "--clean") == 0 || strcmp(a, "--force-switch") == 0 ||
			 strcmp(a, "--verbose") == 0) {
			if (a[2] == 'v')
				*verbose = 1;
			else
				g_run.mode = a[2] == 'c' ? SC_CLEAN : SC_FORCE_SWITCH;
			continue;
		} else
			return usage(strncmp(a, "--", 2) == 0 && next ? "bad option or value" :
				     "unknown argument");
		i++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int verbose = 0;
	const char *log = NULL;
	enum px_log_level level = PX_LOG_ERROR;
	g_run.seed = 1;
	g_run.count = 2000;
	g_run.repeat = 1;
	g_run.jobs = 24;
	pthread_mutex_init(&g_run.print_lock, NULL);
	if (parse(argc, argv, &verbose, &log, &level) != 0)
		return 2;
	if (g_run.count == 1 && g_run.repeat == 1)
		verbose = 1;
	/* the core's log: its lines on stderr for a replay, else a file or none */
	px_log_setup(verbose ? (getenv("SCEN_DEBUG") ? PX_LOG_DEBUG : PX_LOG_INFO) : level, !verbose);
	if (!verbose && px_log_open_file(log ? log : "/dev/null") != PX_OK) {
		fprintf(stderr, "scenarios: --log %s: cannot be opened\n", log ? log : "/dev/null");
		return 2;
	}
	if (sc_lag_start() != 0)
		fprintf(stderr, "scenarios: no lag thread: every late read counts\n");
	long runs = g_run.count * g_run.repeat;
	int jobs = g_run.jobs < runs ? g_run.jobs : (int)(runs ? runs : 1);
	pthread_t *t = calloc((size_t)jobs, sizeof(*t));
	int started = 0;
	for (int i = 0; t && i < jobs; i++)
		started += pthread_create(&t[started], NULL, worker, NULL) == 0;
	if (!started)
		worker(NULL);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	if (!verbose)
		print_bad_logs(log);
	summary();
	return atomic_load(&g_run.violations) ? 1 : 0;
}
