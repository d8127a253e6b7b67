/*
 * test_files.c - the file primitives for directories others may write to
 * (files.c): px_dir_walk never passes a link or "..", px_create_excl
 * never opens what is already at its name, px_write_atomic never writes
 * through a link at any name and leaves no temporary file behind, and
 * px_write_atomic_tmp knows exactly the names it makes; px_open_beneath
 * (openat2, and its fallback walk) opens a file beneath a directory but
 * never through a link, "..", a FIFO or a directory. Each test works in
 * its own mkdtemp directory, removed afterwards; a "victim" file outside
 * the tree stands for what an attacker would aim a link at. The other
 * base helpers of px.h are here too: /proc (proc.c), secrets, whole
 * records over a socket (sock.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "px.h"

#define VICTIM "victim bytes"

struct fixture {
	char dir[64];                /* the test's own directory */
	char tree[96];               /* dir/tree: the hostile directory */
	char victim[96];             /* dir/victim, outside the tree */
	int root;                    /* tree, opened */
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
	snprintf(f->dir, sizeof(f->dir), "/tmp/seamfs-files-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->tree, sizeof(f->tree), "%s/tree", f->dir);
	snprintf(f->victim, sizeof(f->victim), "%s/victim", f->dir);
	FILE *v = fopen(f->victim, "w");
	if (!v || mkdir(f->tree, 0755))
		return -1;
	fputs(VICTIM, v);
	fclose(v);
	f->root = px_dir_open(f->tree);
	*state = f;
	return f->root >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->root);
	int r = nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return r;
}

static void plant(struct fixture *f, const char *name, const char *target)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", f->tree, name);
	assert_int_equal(symlink(target, path), 0);
}

static void assert_victim_intact(struct fixture *f)
{
	char buf[64] = "";
	FILE *v = fopen(f->victim, "r");
	assert_non_null(v);
	assert_non_null(fgets(buf, sizeof(buf), v));
	fclose(v);
	assert_string_equal(buf, VICTIM);
}

/* Entries of the tree's folder sub ("" the tree) whose names end in sfx. */
static int count_suffix(struct fixture *f, const char *sub, const char *sfx)
{
	char path[256];
	int n = 0;
	snprintf(path, sizeof(path), "%s/%s", f->tree, sub);
	DIR *d = opendir(path);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));) {
		size_t l = strlen(de->d_name), s = strlen(sfx);
		n += l >= s && strcmp(de->d_name + l - s, sfx) == 0;
	}
	closedir(d);
	return n;
}

static void test_walk_makes_folders_and_refuses_links(void **state)
{
	struct fixture *f = *state;
	struct stat sb;
	int fd = px_dir_walk(f->root, "a/b/c", 0755, 1);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(fstatat(f->root, "a/b/c", &sb, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISDIR(sb.st_mode));
	/* without make, a missing folder is ENOENT */
	assert_int_equal(px_dir_walk(f->root, "a/nope", 0755, 0), -1);
	assert_int_equal(errno, ENOENT);

	/* a linked folder, first or deeper on the way: ELOOP, nothing made */
	plant(f, "out", f->dir);
	plant(f, "a/b/out", f->dir);
	assert_int_equal(px_dir_walk(f->root, "out/x", 0755, 1), -1);
	assert_int_equal(errno, ELOOP);
	assert_int_equal(px_dir_walk(f->root, "a/b/out", 0755, 1), -1);
	assert_int_equal(errno, ELOOP);
	char x[128];
	snprintf(x, sizeof(x), "%s/x", f->dir);
	assert_int_equal(access(x, F_OK), -1);

	/* a file where a folder should be: ENOTDIR; ".." never */
	fd = openat(f->root, "file", O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(px_dir_walk(f->root, "file/x", 0755, 1), -1);
	assert_int_equal(errno, ENOTDIR);
	assert_int_equal(px_dir_walk(f->root, "a/../..", 0755, 0), -1);
	assert_int_equal(errno, EINVAL);
}

static void test_create_excl_never_opens_what_is_there(void **state)
{
	struct fixture *f = *state;
	char name[NAME_MAX + 1], again[NAME_MAX + 1];
	int fd = px_create_excl(f->root, "movie.bin", "partial", 0644, name, sizeof(name));
	assert_true(fd >= 0);
	/* BASE.XXXXXX.EXT */
	assert_int_equal(strlen(name), strlen("movie.bin.") + 6 + strlen(".partial"));
	assert_int_equal(strncmp(name, "movie.bin.", 10), 0);
	int fd2 = px_create_excl(f->root, "movie.bin", "partial", 0644, again, sizeof(again));
	assert_true(fd2 >= 0);
	assert_string_not_equal(name, again);
	close(fd);
	close(fd2);
	/* a name too long for the buffer: ENAMETOOLONG, nothing made */
	assert_int_equal(px_create_excl(f->root, "movie.bin", "partial", 0644, name, 12), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	assert_int_equal(count_suffix(f, "", ".partial"), 2);
}

static void test_write_atomic_never_writes_through_a_link(void **state)
{
	struct fixture *f = *state;
	char file[256], err[300], buf[64] = "";
	/* the old temporary name and the file's own name, both planted */
	plant(f, "m.json.tmp", f->victim);
	plant(f, "m.json", f->victim);
	snprintf(file, sizeof(file), "%s/m.json", f->tree);
	assert_int_equal(px_write_atomic(file, "{}\n", 3, 0644, err, sizeof(err)), PX_OK);
	assert_victim_intact(f);
	struct stat sb;
	assert_int_equal(lstat(file, &sb), 0);
	assert_true(S_ISREG(sb.st_mode)); /* the link at the name was replaced, not followed */
	FILE *m = fopen(file, "r");
	assert_non_null(m);
	assert_non_null(fgets(buf, sizeof(buf), m));
	fclose(m);
	assert_string_equal(buf, "{}\n");
	/* no temporary file of ours left; the planted one left alone */
	assert_int_equal(count_suffix(f, "", ".tmp"), 1);
	char planted[256];
	snprintf(planted, sizeof(planted), "%s/m.json.tmp", f->tree);
	assert_int_equal(lstat(planted, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));

	/* in a subfolder, through its descriptor */
	int sub = px_dir_walk(f->root, "job", 0755, 1);
	assert_true(sub >= 0);
	assert_int_equal(px_write_atomic_at(sub, "job", "playlist", "x\n", 2, 0644, err,
					    sizeof(err)), PX_OK);
	close(sub);
	assert_int_equal(count_suffix(f, "job", ".tmp"), 0);
	assert_int_equal(count_suffix(f, "job", "playlist"), 1);
}

static void test_write_atomic_tmp_names(void **state)
{
	(void)state;
	assert_true(px_write_atomic_tmp("playlist.a1b2c3.tmp", "playlist"));
	assert_false(px_write_atomic_tmp("playlist.tmp", "playlist"));
	assert_false(px_write_atomic_tmp("playlist.A1B2C3.tmp", "playlist"));
	assert_false(px_write_atomic_tmp("playlist.a1b2c3.tmpx", "playlist"));
	assert_false(px_write_atomic_tmp("playlist.a1b2c.tmp", "playlist"));
	assert_false(px_write_atomic_tmp("playlistxa1b2c3.tmp", "playlist"));
	assert_false(px_write_atomic_tmp("notes.a1b2c3.tmp", "playlist"));
}

/* Each way of px_open_beneath: the file beneath opens and reads; a link
 * at it or on its way, a way out by "..", a FIFO, a directory do not. */
static void check_open_beneath(struct fixture *f, int (*open_fn)(int, const char *))
{
	char buf[32] = "";
	assert_int_equal(mkdirat(f->root, "a", 0755), 0);
	assert_int_equal(mkdirat(f->root, "a/b", 0755), 0);
	int fd = openat(f->root, "a/b/movie", O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "copy bytes", 10), 10);
	close(fd);
	fd = open_fn(f->root, "a/b/movie");
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), 10);
	assert_memory_equal(buf, "copy bytes", 10);
	assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);

	/* a link at the file, a linked folder on the way: ELOOP */
	plant(f, "a/b/link", f->victim);
	plant(f, "out", f->dir);
	assert_int_equal(open_fn(f->root, "a/b/link"), -1);
	assert_int_equal(errno, ELOOP);
	assert_int_equal(open_fn(f->root, "out/victim"), -1);
	assert_int_equal(errno, ELOOP);
	/* out by "..": refused (openat2 says EXDEV, the walk EINVAL) */
	assert_int_equal(open_fn(f->root, "../victim"), -1);
	assert_true(errno == EXDEV || errno == EINVAL);
	/* a FIFO (the open must not block) and a directory */
	assert_int_equal(mkfifoat(f->root, "a/fifo", 0644), 0);
	assert_int_equal(open_fn(f->root, "a/fifo"), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(open_fn(f->root, "a/b"), -1);
	assert_int_equal(errno, EISDIR);
	assert_int_equal(open_fn(f->root, "a/nope"), -1);
	assert_int_equal(errno, ENOENT);
	assert_victim_intact(f);
}

static void test_open_beneath_refuses_links(void **state)
{
	check_open_beneath(*state, px_open_beneath);
}

static void test_open_beneath_walk_refuses_links(void **state)
{
	check_open_beneath(*state, px_open_beneath_walk);
}

/* A child that lives is not gone; once it exits and waits unreaped (a
 * zombie, as a worker whose keeper died is under an init that does not
 * reap) it is; reaped, too. Before the zombie rule a killed worker's
 * host_id stayed "registered by another live seamfs". */
static void test_pid_gone_counts_a_zombie_gone(void **state)
{
	(void)state;
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(go[1]);
		(void)!read(go[0], &c, 1);
		_exit(0);
	}
	close(go[0]);
	assert_int_equal(px_pid_gone(pid), 0);
	close(go[1]); /* the child reads EOF and exits */
	int zombie = 0;
	for (int i = 0; i < 500 && !zombie; i++) {
		siginfo_t si = { 0 };
		assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
		zombie = si.si_pid == pid;
	}
	assert_true(zombie);
	assert_int_equal(px_pid_gone(pid), 1);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(px_pid_gone(pid), 1);
	assert_int_equal(px_pid_gone(getpid()), 0);
}

/* px_proc_read gives a /proc file's start as a string, cut at the
 * buffer's size, and -1 with open's errno (buf "") when there is none. */
static void test_proc_read(void **state)
{
	char buf[2048], small[8];
	(void)state;
	ssize_t n = px_proc_read("/proc/self/status", buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(strlen(buf), (size_t)n);
	assert_non_null(strstr(buf, "\nTgid:"));
	assert_int_equal(px_proc_read("/proc/self/status", small, sizeof(small)), 7);
	assert_int_equal(strlen(small), 7);
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(px_proc_read("/proc/0/status", buf, sizeof(buf)), -1);
	assert_int_equal(errno, ENOENT);
	assert_string_equal(buf, "");
}

/* px_send_all and px_recv_all move a record larger than the socket's
 * buffer whole; px_recv_all fails at the end of the stream, px_send_all
 * once the peer is gone (no SIGPIPE). */
static void test_send_recv_all(void **state)
{
	enum { LEN = 1 << 20 };
	int sv[2];
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	unsigned char *out = malloc(LEN), *in = malloc(LEN);
	assert_non_null(out);
	assert_non_null(in);
	for (size_t i = 0; i < LEN; i++)
		out[i] = (unsigned char)(i * 7 + 3);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(px_send_all(sv[1], out, LEN) == 0 ? 0 : 1);
	}
	close(sv[1]);
	assert_int_equal(px_recv_all(sv[0], in, LEN), 0);
	assert_memory_equal(in, out, LEN);
	int ws = 0;
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	assert_int_equal(px_recv_all(sv[0], in, 1), -1); /* the writer's end closed */
	close(sv[0]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(px_send_all(sv[0], out, 16), -1);
	close(sv[0]);
	free(out);
	free(in);
}

/* px_secret_read refuses a file every user may read, a link and a short
 * secret, naming the option and the file but never the secret; it takes
 * the first line of a good one. px_secret_equal compares whole strings. */
static void test_secret_file(void **state)
{
	struct fixture *f = *state;
	char file[160], link[160], err[400];
	char *sec = NULL;
	const char *good = "0123456789abcdef-secret";
	snprintf(file, sizeof(file), "%s/secret", f->dir);
	snprintf(link, sizeof(link), "%s/secret-link", f->dir);
	FILE *w = fopen(file, "w");
	assert_non_null(w);
	fprintf(w, "%s\nsecond line\n", good);
	fclose(w);
	assert_int_equal(chmod(file, 0644), 0);
	assert_int_equal(px_secret_read(file, "cluster_secret_file", &sec, err, sizeof(err)),
			 PX_EINVAL);
	assert_null(sec);
	assert_non_null(strstr(err, "cluster_secret_file"));
	assert_non_null(strstr(err, "readable by every user"));
	assert_null(strstr(err, good));
	assert_int_equal(chmod(file, 0640), 0);
	assert_int_equal(px_secret_read(file, "cluster_secret_file", &sec, err, sizeof(err)),
			 PX_OK);
	assert_string_equal(sec, good);
	free(sec);
	sec = NULL;
	assert_int_equal(symlink(file, link), 0);
	assert_int_not_equal(px_secret_read(link, "cluster_secret_file", &sec, err, sizeof(err)),
			     PX_OK);
	assert_null(sec);
	w = fopen(file, "w");
	assert_non_null(w);
	fprintf(w, "short\n");
	fclose(w);
	assert_int_equal(px_secret_read(file, "cluster_secret_file", &sec, err, sizeof(err)),
			 PX_EINVAL);
	assert_non_null(strstr(err, "at least 16"));
	assert_null(strstr(err, "short"));

	assert_true(px_secret_equal(good, good));
	assert_false(px_secret_equal(good, "0123456789abcdef-secreT"));
	assert_false(px_secret_equal(good, "0123456789abcdef-secret-and-more"));
	assert_false(px_secret_equal(good, "0123456789abcdef"));
	assert_false(px_secret_equal(good, ""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_walk_makes_folders_and_refuses_links, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_create_excl_never_opens_what_is_there, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_write_atomic_never_writes_through_a_link,
						setup, teardown),
		cmocka_unit_test(test_write_atomic_tmp_names),
		cmocka_unit_test_setup_teardown(test_open_beneath_refuses_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_beneath_walk_refuses_links, setup,
						teardown),
		cmocka_unit_test(test_pid_gone_counts_a_zombie_gone),
		cmocka_unit_test(test_proc_read),
		cmocka_unit_test(test_send_recv_all),
		cmocka_unit_test_setup_teardown(test_secret_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
