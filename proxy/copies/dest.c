/*
 * dest.c - the copy's place on a storage others may write to
 * (docs/copies.md, "Storages others can write to").
 *
 * seamfs runs as root and a storage is often an NFS export others write
 * to: the copy's folder is reached from the storage's directory one
 * component at a time, never through a link nor onto another file system
 * (px_dir_walk); the .partial is a new file (O_EXCL|O_NOFOLLOW, random
 * name); it is renamed in that folder onto nothing, or onto a copy this
 * host made (its records' size and SHA-256, stale or not). A link on the
 * way ("link in the way") or any other file at the place ("foreign file
 * in the way") is left alone; the job waits with that reason (job.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copies_i.h"
#include "log.h"

/* The SHA-256 (hex) of the regular file name in dir, read without
 * following a link: 0, or -1. The copies thread. */
static int hash_at(int dir, const char *name, int64_t size, char hex[65])
{
	unsigned char sha[VF_HASH_LEN];
	unsigned char *buf = malloc(CHUNK);
	struct vf_hash *h = NULL;
	struct stat sb;
	int rc = -1, fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
				 O_CLOEXEC);
	if (!buf || fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size != size ||
	    vf_hash_new(&h) != PX_OK)
		goto out;
	ssize_t r;
	while ((r = read(fd, buf, CHUNK)) > 0 || (r < 0 && errno == EINTR))
		if (r > 0 && vf_hash_update(h, buf, (size_t)r) != PX_OK)
			goto out;
	if (r == 0 && vf_hash_final(h, sha) == PX_OK) {
		vf_hash_hex(sha, VF_HASH_LEN, hex);
		rc = 0;
	}
out:
	if (fd >= 0)
		close(fd);
	vf_hash_free(h);
	free(buf);
	return rc;
}

/* Whether the file at the copy's place is a copy this host made: its
 * records (the manifest's, stale ones too) give its size and SHA-256. */
static int is_ours(struct px_copies *cp, size_t asset, size_t si, const struct cp_dest *pl)
{
	char want[65] = "", got[65];
	int64_t size = -1;
	pthread_mutex_lock(&cp->lock);
	long ci = cp_find_copy(cp, asset, si);
	if (ci >= 0 && cp->c[ci].mine) {
		size = cp->c[ci].size;
		snprintf(want, sizeof(want), "%s", cp->c[ci].sha);
	}
	pthread_mutex_unlock(&cp->lock);
	return size >= 0 && hash_at(pl->dir, pl->base, size, got) == 0 && strcmp(got, want) == 0;
}

/* What is at the copy's place: nothing, or a copy of ours (PX_OK); else
 * PX_EEXIST with *wait and why set (it is left alone). */
static enum px_status dest_check(struct px_copies *cp, size_t asset, size_t si,
				 struct cp_dest *pl, enum px_copy_wait *wait, char *why, size_t n)
{
	struct stat sb;
	pl->had = 0;
	if (fstatat(pl->dir, pl->base, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
		snprintf(why, n, "%s: %s", pl->base, strerror(errno));
		return errno == ENOENT ? PX_OK : PX_EIO;
	}
	if (S_ISLNK(sb.st_mode) || !S_ISREG(sb.st_mode) || !is_ours(cp, asset, si, pl)) {
		*wait = S_ISLNK(sb.st_mode) ? PX_WAIT_LINK : PX_WAIT_FOREIGN;
		snprintf(why, n, "%s is %s seamfs did not make: left alone", pl->base,
			 S_ISLNK(sb.st_mode) ? "a link" : "a file");
		return PX_EEXIST;
	}
	pl->had = 1;
	pl->ino = sb.st_ino;
	return PX_OK;
}

/*
 * Opens the folder of the asset's copy on storage si (made when missing)
 * and looks at the copy's place: PX_OK; PX_EEXIST with *wait set when
 * the storage is not the file system it was, a link or a foreign file is
 * in the way; else PX_EIO. why says which. No lock held.
 */
enum px_status cp_dest_open(struct px_copies *cp, size_t asset, size_t si,
			    struct cp_dest *pl, enum px_copy_wait *wait, char *why, size_t n)
{
	char top[PATH_MAX], rel[PATH_MAX];
	struct stat sb;
	enum px_status st = PX_EEXIST;
	pthread_mutex_lock(&cp->lock);
	snprintf(top, sizeof(top), "%s", cp->st[si].path);
	dev_t dev = cp->st[si].dev;
	int dev_known = cp->st[si].dev_known;
	pthread_mutex_unlock(&cp->lock);
	snprintf(rel, sizeof(rel), "%s", px_cat(cp->core)->assets[asset].path);
	char *slash = strrchr(rel, '/');
	snprintf(pl->base, sizeof(pl->base), "%s", slash ? slash + 1 : rel);
	*(slash ? slash : rel) = '\0';
	int root = px_dir_open(top);
	if (root < 0 || fstat(root, &sb) != 0) {
		snprintf(why, n, "%s: %s", top, strerror(errno));
		st = PX_EIO;
		goto out;
	}
	if (!dev_known || sb.st_dev != dev) {
		*wait = PX_WAIT_NOT_READY;
		snprintf(why, n, "%s is not the file system seamfs first saw there", top);
		goto out;
	}
	pl->dir = rel[0] ? px_dir_walk(root, rel, 0755, 1) : fcntl(root, F_DUPFD_CLOEXEC, 0);
	if (pl->dir < 0) {
		int e = errno;
		snprintf(why, n, "%s/%s: %s", top, rel, strerror(e));
		if (e == ENOTDIR)
			*wait = PX_WAIT_FOREIGN; /* a file where a folder should be */
		else if (e == ELOOP || e == EXDEV || e == EINVAL)
			*wait = PX_WAIT_LINK;
		else
			st = PX_EIO;
		goto out;
	}
	st = dest_check(cp, asset, si, pl, wait, why, n);
out:
	if (root >= 0)
		close(root);
	return st;
}

/* Moves the finished .partial (fd) to the copy's name: onto nothing, or
 * onto the copy of ours seen before; then checks that the name holds
 * what was written (not something swapped in). PX_OK; PX_EEXIST with
 * *wait when something else came in the way meanwhile; else PX_EIO. */
enum px_status cp_dest_commit(struct cp_dest *pl, int fd, enum px_copy_wait *wait,
			      char *why, size_t n)
{
	struct stat mine, sb;
	if (fstat(fd, &mine) != 0) {
		snprintf(why, n, "fstat %s: %s", pl->tmp, strerror(errno));
		return PX_EIO;
	}
	int there = fstatat(pl->dir, pl->base, &sb, AT_SYMLINK_NOFOLLOW) == 0;
	if (there && (!pl->had || sb.st_ino != pl->ino)) {
		*wait = S_ISLNK(sb.st_mode) ? PX_WAIT_LINK : PX_WAIT_FOREIGN;
		snprintf(why, n, "%s appeared meanwhile: left alone", pl->base);
		return PX_EEXIST;
	}
	int rc = there ? renameat(pl->dir, pl->tmp, pl->dir, pl->base)
		       : renameat2(pl->dir, pl->tmp, pl->dir, pl->base, RENAME_NOREPLACE);
	if (rc && !there && errno == EINVAL) /* no RENAME_NOREPLACE there (NFS) */
		rc = renameat(pl->dir, pl->tmp, pl->dir, pl->base);
	if (rc) {
		int e = errno;
		*wait = e == EEXIST ? PX_WAIT_FOREIGN : PX_WAIT_NONE;
		snprintf(why, n, "rename to %s: %s", pl->base, strerror(e));
		return e == EEXIST ? PX_EEXIST : PX_EIO;
	}
	pl->tmp[0] = '\0';
	(void)fsync(pl->dir);
	if (fstatat(pl->dir, pl->base, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
	    sb.st_ino != mine.st_ino || sb.st_dev != mine.st_dev) {
		snprintf(why, n, "%s was replaced by another file as it was renamed", pl->base);
		return PX_EIO;
	}
	return PX_OK;
}

/* Removes the .partial made here (never another name) and closes. */
void cp_dest_close(struct cp_dest *pl)
{
	if (pl->dir >= 0 && pl->tmp[0])
		(void)unlinkat(pl->dir, pl->tmp, 0);
	if (pl->dir >= 0)
		close(pl->dir);
	pl->dir = -1;
}
