/*
 * files.c - making directories and replacing files safely (px.h): the
 * state file, the fingerprint store and transcode playlists all write this
 * way, so that a crash leaves the old file or the new one, never a torn one.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

enum px_status px_write_atomic(const char *file, const void *data, size_t len,
			       unsigned int mode, char *err, size_t errlen)
{
	char tmp[PATH_MAX + 8], dir[PATH_MAX];
	const char *p = data;
	size_t off = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", file) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "%s: %s", file, strerror(ENAMETOOLONG));
		return PX_EIO;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
	while (fd >= 0 && off < len) {
		ssize_t w = write(fd, p + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	int ok = fd >= 0 && off == len && fsync(fd) == 0;
	int saved = errno;
	if (fd >= 0 && close(fd) && ok) {
		ok = 0;
		saved = errno;
	}
	if (!ok || rename(tmp, file)) {
		snprintf(err, errlen, "%s: %s", ok ? file : tmp, strerror(ok ? errno : saved));
		unlink(tmp);
		return PX_EIO;
	}
	/* the rename itself lasts once the directory is on disk */
	snprintf(dir, sizeof(dir), "%s", file);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	return PX_OK;
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
