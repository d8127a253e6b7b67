/*
 * test_workdir.c - readying a transcode work_dir
 * (px_transcode_prepare_work): daemons started at the same moment on one
 * fresh shared work_dir (a cluster booting) all take it, while a
 * directory holding something that is not seamfs's is still refused and
 * left as it was. On a16ab66 one of two racing daemons saw the other's
 * fresh marker file as a foreign entry and exited ("it holds
 * .seamfs-work"), in the official CI run of test_cluster on that tree.
 * Each racer is a forked process, as on a real cluster.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "px.h"
#include "catalog.h"
#include "config.h"
#include "transcode.h"

#define RACERS 3
#define ROUNDS 200

struct fixture {
	char dir[64];                /* the test's own directory */
	struct px_asset asset;       /* one remux asset: work_dir is used */
	struct px_catalog cat;
};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/seamfs-workdir-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	f->asset.id = "clip";
	f->asset.path = "clip.ts";
	f->asset.kind = PX_ASSET_REMUX;
	f->cat.file = "test.json";
	f->cat.assets = &f->asset;
	f->cat.nassets = 1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* One racer: waits on the start pipe, readies work, exits 0 when taken. */
static void racer(struct fixture *f, char *work, int start)
{
	struct px_config cfg = { 0 };
	char err[1024] = "", c;
	cfg.work_dir = work;
	if (read(start, &c, 1) != 1)
		_exit(3);
	if (px_transcode_prepare_work(&cfg, &f->cat, err, sizeof(err)) != PX_OK) {
		fprintf(stderr, "racer %d: %s\n", (int)getpid(), err);
		_exit(1);
	}
	_exit(0);
}

static void test_racing_daemons_all_take_a_fresh_work_dir(void **state)
{
	struct fixture *f = *state;
	char work[128];
	int failed = 0;
	for (int round = 0; round < ROUNDS; round++) {
		int p[2];
		pid_t pids[RACERS];
		snprintf(work, sizeof(work), "%s/work%d", f->dir, round);
		assert_int_equal(pipe(p), 0);
		for (int i = 0; i < RACERS; i++) {
			pids[i] = fork();
			assert_true(pids[i] >= 0);
			if (pids[i] == 0) {
				close(p[1]);
				racer(f, work, p[0]);
			}
		}
		close(p[0]);
		/* one byte each: they start as near together as a write */
		assert_int_equal(write(p[1], "xxx", RACERS), RACERS);
		close(p[1]);
		for (int i = 0; i < RACERS; i++) {
			int st = 0;
			assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				failed++;
		}
		char marker[192];
		struct stat sb;
		snprintf(marker, sizeof(marker), "%s/%s", work, PX_TRANSCODE_MARKER);
		assert_int_equal(lstat(marker, &sb), 0);
	}
	assert_int_equal(failed, 0);
}

static void test_a_foreign_work_dir_is_still_refused(void **state)
{
	struct fixture *f = *state;
	struct px_config cfg = { 0 };
	char work[128], file[192], err[1024] = "";
	struct stat sb;
	snprintf(work, sizeof(work), "%s/foreign", f->dir);
	snprintf(file, sizeof(file), "%s/notes.txt", work);
	assert_int_equal(mkdir(work, 0755), 0);
	FILE *fp = fopen(file, "w");
	assert_non_null(fp);
	fputs("mine\n", fp);
	fclose(fp);
	cfg.work_dir = work;
	assert_int_equal(px_transcode_prepare_work(&cfg, &f->cat, err, sizeof(err)), PX_EINVAL);
	assert_non_null(strstr(err, "notes.txt"));
	snprintf(file, sizeof(file), "%s/%s", work, PX_TRANSCODE_MARKER);
	assert_int_equal(lstat(file, &sb), -1); /* nothing touched */
	assert_int_equal(errno, ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_racing_daemons_all_take_a_fresh_work_dir,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_foreign_work_dir_is_still_refused,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
