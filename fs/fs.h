/*
 * fs.h - the FUSE front: shared between main.c and ops.c only.
 */
#ifndef SEAMFS_FS_H
#define SEAMFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core.h"

struct fs_ctx {
	struct px_core *core;
	struct fs_handles *fhs;  /* open files' handles by id (handles.h) */
	struct fuse_session *se; /* for dropping cached entries after a reload */
	enum px_session_key key; /* what makes opens one client */
	uid_t uid;
	gid_t gid;
	int64_t dir_mtime;      /* directories' mtime: the catalog's */
	char bdi_readahead[128]; /* the mount's read_ahead_kb file, "" if unknown */
	atomic_int readahead_set;
	/* open status files (status.c), freed at exit if FUSE did not release
	 * them before the unmount */
	pthread_mutex_t blobs_lock;
	struct fs_blob *blobs;
};

/* The lowlevel operations; userdata is a struct fs_ctx. */
extern const struct fuse_lowlevel_ops fs_ops;

/* The core's reload hook (ctx: a struct fs_ctx): tells the kernel to drop
 * its cached entries of the names that appeared or went away, so that a
 * new file is seen at once, not after the entry timeout. */
void fs_forget_changes(void *ctx, const struct px_tree *old, const struct px_tree *now);

/* The one place core statuses become errnos. */
int fs_errno(enum px_status st);

/* ---- status.c: the .seamfs/ folder */
#define FS_STATUS_DIR ".seamfs"
#define FS_INO_STATUS_DIR 0x8000000000000000ULL
#define FS_BLOB_MAGIC 0x73746174u

/* An open status file: a snapshot made at open. */
struct fs_blob {
	uint32_t magic;
	char *data;
	size_t len;
	struct fs_ctx *ctx;
	struct fs_blob *prev, *next; /* ctx->blobs, under blobs_lock */
};

/* Whether ino is the folder or one of its files. */
int fs_status_owns(fuse_ino_t ino);
/* The inode of name in parent (the root or the folder), 0 if none. */
fuse_ino_t fs_status_lookup(fuse_ino_t parent, const char *name);
void fs_status_stat(const struct fs_ctx *ctx, fuse_ino_t ino, struct stat *st);
/* The folder's i-th entry; returns the number of entries (0: none). */
size_t fs_status_children(fuse_ino_t ino, size_t i, const char **name, fuse_ino_t *child);
/* Makes the snapshot of a status file; 0 or an errno. */
int fs_status_open(struct fs_ctx *ctx, fuse_ino_t ino, struct fs_blob **out);
/* Frees an open status file (its release). NULL: no-op. */
void fs_blob_free(struct fs_blob *b);
/* Frees the status files still open: after the session loop, at exit (a
 * release queued behind the unmount never comes). */
void fs_status_free_all(struct fs_ctx *ctx);

#endif
