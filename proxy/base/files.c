/*
 * files.c - making directories and replacing files safely (px.h): the
 * state file, the fingerprint store and transcode playlists all write this
 * way, so that a crash leaves the old file or the new one, never a torn one.
 *
 * Hostile directories. seamfs runs as root and writes on storages and in
 * work_dir, which others may write too (NFS exports). There it works from
 * one directory descriptor: folders below it are opened one component at
 * a time with O_NOFOLLOW on the same file system (px_dir_walk), a new file
 * is made with O_CREAT|O_EXCL|O_NOFOLLOW under a random name nobody can
 * plant first (px_create_excl), and renameat moves it into place in the
 * same directory. A link planted anywhere on that way makes the call fail
 * (ELOOP); it is never followed, and nothing is written through it.
 * Reading there (a copy served to viewers) is the same: the file is
 * opened beneath the storage's descriptor with openat2's RESOLVE_BENEATH,
 * RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV, or,
 * where the kernel lacks openat2, by px_dir_walk and O_NOFOLLOW
 * (px_open_beneath): a link swapped in for the file or a folder above it
 * makes the open fail, so root never reads another file for a viewer.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "px.h"

int px_mkdir_p(const char *dir, unsigned int mode)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, (mode_t)mode) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, (mode_t)mode) && errno != EEXIST)
		return -1;
	return 0;
}

/* Six random characters of [a-z0-9] into out: a temporary name nobody
 * can guess ahead, so nobody can plant something there first. */
static void rand_suffix(char out[7])
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	static _Atomic uint64_t count;
	unsigned char r[6];
	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		/* no entropy yet (early boot): still unique in this process */
		uint64_t v = (uint64_t)px_now_us() ^ ((uint64_t)getpid() << 32) ^
			     atomic_fetch_add(&count, 0x9e3779b97f4a7c15ULL);
		memcpy(r, &v, sizeof(r));
	}
	for (int i = 0; i < 6; i++)
		out[i] = set[r[i] % (sizeof(set) - 1)];
	out[6] = '\0';
}

int px_dir_open(const char *path)
{
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* The directory name beneath dirfd, never through a link, made first
 * when make: a new descriptor, or -1 with errno. */
static int dir_step(int dirfd, const char *name, unsigned int mode, int make)
{
	int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(dirfd, name, flags);
	if (fd < 0 && errno == ENOENT && make) {
		if (mkdirat(dirfd, name, (mode_t)mode) != 0 && errno != EEXIST)
			return -1;
		fd = openat(dirfd, name, flags);
	}
	struct stat sb;
	if (fd < 0 && errno == ENOTDIR && fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(sb.st_mode))
		errno = ELOOP; /* O_DIRECTORY answers ENOTDIR for a link: say what it is */
	return fd;
}

int px_dir_walk(int root, const char *rel, unsigned int mode, int make)
{
	char buf[PATH_MAX], *save = NULL;
	struct stat rb, sb;
	int fd = -1;
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		goto out;
	}
	if (fstat(root, &rb) != 0 || (fd = fcntl(root, F_DUPFD_CLOEXEC, 0)) < 0)
		goto out;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next = -1, e = EINVAL;
		if (strcmp(c, ".") != 0 && strcmp(c, "..") != 0) {
			next = dir_step(fd, c, mode, make);
			e = errno;
		}
		if (next >= 0 && (fstat(next, &sb) != 0 || sb.st_dev != rb.st_dev)) {
			e = EXDEV; /* a mount point inside: another file system */
			close(next);
			next = -1;
		}
		close(fd);
		fd = next;
		if (fd < 0) {
			errno = e;
			goto out;
		}
	}
out:
	return fd;
}

int px_create_excl(int dirfd, const char *base, const char *ext, unsigned int mode,
		   char *name, size_t n)
{
	char sfx[7];
	int fd = -1;
	errno = EEXIST;
	for (int tries = 0; fd < 0 && errno == EEXIST && tries < 100; tries++) {
		rand_suffix(sfx);
		if (snprintf(name, n, "%s.%s.%s", base, sfx, ext) >= (int)n) {
			errno = ENAMETOOLONG;
			break;
		}
		fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    (mode_t)mode);
	}
	if (fd < 0 && n)
		name[0] = '\0';
	return fd;
}

int px_write_atomic_tmp(const char *name, const char *file)
{
	size_t n = strlen(file);
	if (strncmp(name, file, n) != 0 || name[n] != '.' || strlen(name) != n + 11 ||
	    strcmp(name + n + 7, ".tmp") != 0)
		return 0;
	for (size_t i = n + 1; i < n + 7; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
			return 0;
	return 1;
}

/* Writes len bytes of data to fd and syncs it: 0, or -1 with errno. */
static int write_all(int fd, const char *p, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, p + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		off += (size_t)w;
	}
	return fsync(fd);
}

enum px_status px_write_atomic_at(int dirfd, const char *dir, const char *name,
				  const void *data, size_t len, unsigned int mode, char *err,
				  size_t errlen)
{
	char tmp[NAME_MAX + 1];
	enum px_status st = PX_EIO;
	int fd = px_create_excl(dirfd, name, "tmp", mode, tmp, sizeof(tmp));
	if (fd < 0) {
		snprintf(err, errlen, "%s/%s.tmp: %s", dir, name, strerror(errno));
		goto out;
	}
	int ok = write_all(fd, data, len) == 0;
	int saved = errno;
	if (close(fd) && ok) {
		ok = 0;
		saved = errno;
	}
	/* renameat replaces a link planted at name, it never writes through it */
	if (!ok || renameat(dirfd, tmp, dirfd, name)) {
		snprintf(err, errlen, "%s/%s: %s", dir, ok ? name : tmp,
			 strerror(ok ? errno : saved));
		(void)unlinkat(dirfd, tmp, 0); /* ours: made with O_EXCL */
		goto out;
	}
	(void)fsync(dirfd); /* the rename itself lasts once the directory is on disk */
	st = PX_OK;
out:
	return st;
}

enum px_status px_write_atomic(const char *file, const void *data, size_t len,
			       unsigned int mode, char *err, size_t errlen)
{
	char dir[PATH_MAX], base[PATH_MAX];
	enum px_status st = PX_EIO;
	if (snprintf(dir, sizeof(dir), "%s", file) >= (int)sizeof(dir)) {
		snprintf(err, errlen, "%s: %s", file, strerror(ENAMETOOLONG));
		return PX_EIO;
	}
	snprintf(base, sizeof(base), "%s", file);
	const char *d = dirname(dir), *b = basename(base);
	int dfd = px_dir_open(d);
	if (dfd < 0) {
		snprintf(err, errlen, "%s: %s", d, strerror(errno));
		goto out;
	}
	st = px_write_atomic_at(dfd, d, b, data, len, mode, err, errlen);
	close(dfd);
out:
	return st;
}

/* fd when it is a regular file on root's device, in blocking mode again;
 * else closes it and returns -1 with errno (EINVAL, EISDIR, EXDEV). */
static int beneath_check(int root, int fd)
{
	struct stat rb, sb;
	int e = 0;
	if (fd < 0)
		return -1;
	if (fstat(root, &rb) != 0 || fstat(fd, &sb) != 0)
		e = errno;
	else if (!S_ISREG(sb.st_mode))
		e = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
	else if (sb.st_dev != rb.st_dev)
		e = EXDEV;
	if (e) {
		close(fd);
		errno = e;
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

#define BENEATH_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

int px_open_beneath_walk(int root, const char *rel)
{
	char dir[PATH_MAX];
	int fd = -1, dfd = -1;
	if (snprintf(dir, sizeof(dir), "%s", rel) >= (int)sizeof(dir)) {
		errno = ENAMETOOLONG;
		goto out;
	}
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (slash)
		*slash = '\0';
	if (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		errno = EINVAL;
		goto out;
	}
	dfd = slash ? px_dir_walk(root, dir, 0, 0) : fcntl(root, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0)
		goto out;
	fd = beneath_check(root, openat(dfd, base, BENEATH_FLAGS));
out:
	if (dfd >= 0) {
		int e = errno;
		close(dfd);
		errno = e;
	}
	return fd;
}

int px_open_beneath(int root, const char *rel)
{
	struct open_how how = {
		.flags = BENEATH_FLAGS,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
	/* no openat2 (before Linux 5.6, or a seccomp filter that refuses it) */
	if (fd < 0 && (errno == ENOSYS || errno == EPERM))
		return px_open_beneath_walk(root, rel);
	return beneath_check(root, fd);
}

int px_open_in_dir(const char *top, unsigned long long dev, const char *rel)
{
	struct stat sb;
	int fd = -1, root = px_dir_open(top);
	if (root < 0)
		goto out;
	if (fstat(root, &sb) != 0 || (unsigned long long)sb.st_dev != dev) {
		errno = ENODEV;
		goto out;
	}
	fd = px_open_beneath(root, rel);
out:
	if (root >= 0) {
		int e = errno;
		close(root);
		errno = e;
	}
	return fd;
}

int px_open_regular(const char *path)
{
	struct stat sb;
	/* O_NONBLOCK: opening a FIFO for reading blocks until a writer comes,
	 * in the kernel, and a reader waiting on us would sit in D state */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		errno = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

const char *px_file_kind(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) != 0)
		return NULL;
	if (S_ISREG(sb.st_mode))
		return NULL;
	if (S_ISFIFO(sb.st_mode))
		return "a FIFO";
	if (S_ISDIR(sb.st_mode))
		return "a directory";
	if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode))
		return "a device";
	if (S_ISSOCK(sb.st_mode))
		return "a socket";
	return "not a regular file";
}

enum px_status px_secret_read(const char *file, const char *what, char **out, char *err,
			      size_t errlen)
{
	char buf[1024];
	struct stat sb;
	enum px_status st = PX_EINVAL;
	ssize_t n = -1;
	int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	*out = NULL;
	if (fd < 0) {
		snprintf(err, errlen, "%s %s: %s", what, file, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", what, file);
		goto out;
	}
	if (sb.st_mode & S_IROTH) {
		/* everyone on the host could act as a cluster host */
		snprintf(err, errlen, "%s %s is readable by every user (mode %04o): refused; "
			 "chmod o-r it (600 is best)", what, file, (unsigned)(sb.st_mode & 07777));
		goto out;
	}
	if ((n = read(fd, buf, sizeof(buf) - 1)) < 0) {
		snprintf(err, errlen, "%s %s: %s", what, file, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (strlen(buf) < 16) {
		snprintf(err, errlen, "%s %s: the secret (its first line) has %zu bytes; give it "
			 "at least 16", what, file, strlen(buf));
		goto out;
	}
	*out = strdup(buf);
	st = *out ? PX_OK : PX_ENOMEM;
	if (!*out)
		snprintf(err, errlen, "out of memory");
out:
	memset(buf, 0, sizeof(buf));
	if (fd >= 0)
		close(fd);
	return st;
}

int px_secret_equal(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	unsigned char diff = na != nb;
	/* every byte of the secret (a) is looked at, whatever b holds */
	for (size_t i = 0; i < na; i++)
		diff |= (unsigned char)(a[i] ^ (i < nb ? b[i] : 0));
	return diff == 0;
}
