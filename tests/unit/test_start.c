/*
 * test_start.c - cores discovered at once in a process that has just
 * started, as the scenario runner starts them (one core per worker
 * thread), must each come up.
 *
 * Discovery ends by giving freed memory back to the system. In a process
 * whose malloc is not glibc's (the sanitizers' allocator), glibc's own
 * arena is still unset when the first threads get there, and two threads
 * that set it up at once read a half-made arena (a crash in mtrim that
 * failed CI once in a hundred scenario runs). Each round runs in a fresh
 * child process, so every round meets the allocator's first use; the
 * parent asserts that every child exited cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "fake_fetch.h"
#include "log.h"

enum {
	ROUNDS = 24,            /* child processes, one fresh start each */
	CORES = 24,             /* cores discovered at once in each */
	SIZE = 4096,
};

static const char CATALOG[] =
	"{\"providers\": [{\"name\": \"p\"}],"
	" \"assets\": [{\"id\": \"a\", \"path\": \"a.bin\", \"size\": 4096,"
	" \"mtime\": 1600000000, \"sources\": [{\"url\": \"http://p.test/a.bin\"}]}]}";

struct one {
	struct px_config cfg;
	struct px_catalog *cat;
	struct fake fake;
	struct px_fetch_ops ops;
	struct px_core *core;
	enum px_status st;
};

static pthread_barrier_t g_go;

static void *discover(void *arg)
{
	struct one *o = arg;
	pthread_barrier_wait(&g_go);
	o->st = px_core_discover(o->core, NULL, 0);
	return NULL;
}

/* One round in this (child) process: CORES cores made, then discovered by
 * CORES threads released together. Returns the exit status. */
static int round_in_child(void)
{
	static struct one ones[CORES];
	pthread_t t[CORES];
	char err[256];
	if (pthread_barrier_init(&g_go, NULL, CORES) != 0)
		return 2;
	for (int i = 0; i < CORES; i++) {
		struct one *o = &ones[i];
		px_config_init(&o->cfg);
		if (px_catalog_parse("start.json", CATALOG, strlen(CATALOG), &o->cat, err,
				     sizeof(err)) != PX_OK) {
			fprintf(stderr, "catalog: %s\n", err);
			return 3;
		}
		fake_init(&o->fake, SIZE, 0, SIZE);
		o->ops = fake_ops(&o->fake);
		if (px_core_new(&o->cfg, o->cat, &o->ops, &o->core) != PX_OK)
			return 4;
	}
	for (int i = 0; i < CORES; i++)
		if (pthread_create(&t[i], NULL, discover, &ones[i]) != 0)
			return 5;
	for (int i = 0; i < CORES; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < CORES; i++) {
		if (ones[i].st != PX_OK)
			return 6;
		px_core_free(ones[i].core);
		fake_destroy(&ones[i].fake, 0);
		px_catalog_free(ones[i].cat);
	}
	return 0;
}

static void test_cores_discovered_at_once_at_start(void **state)
{
	(void)state;
	for (int r = 0; r < ROUNDS; r++) {
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(round_in_child());
		int ws = 0;
		assert_int_equal(waitpid(pid, &ws, 0), pid);
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
			fail_msg("round %d: the child %s %d", r,
				 WIFSIGNALED(ws) ? "died of signal" : "exited with",
				 WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
	}
}

int main(void)
{
	px_log_setup(PX_LOG_WARN, 0);   /* each core's closing counts: 576 lines */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cores_discovered_at_once_at_start),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
