/*
 * fs.h - the FUSE front: shared between main.c and ops.c only.
 */
#ifndef SEAMFS_FS_H
#define SEAMFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.h"

struct fs_ctx {
	struct px_core *core;
	uid_t uid;
	gid_t gid;
	int64_t dir_mtime;      /* directories' mtime: the catalog's */
	char bdi_readahead[128]; /* the mount's read_ahead_kb file, "" if unknown */
	atomic_int readahead_set;
};

/* The lowlevel operations; userdata is a struct fs_ctx. */
extern const struct fuse_lowlevel_ops fs_ops;

/* The one place core statuses become errnos. */
int fs_errno(enum px_status st);

#endif
