/*
 * status.c - the read-only .seamfs/ folder at the mount root.
 *
 * It holds status.json, the core's state as JSON, and metrics, the same
 * in the Prometheus text format, each made afresh at each open: a reader
 * gets one consistent snapshot however it reads it. The folder and its files have inode numbers with the top bit set, which the
 * tree never uses (its numbers fit in 63 bits), and the catalog may not
 * put assets below .seamfs/. The files are direct_io with size 0: their
 * contents change at every open, so the page cache must not keep them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "metrics.h"
#include "report.h"

static const struct {
	const char *name;
	char *(*make)(struct px_core *core);
} files[] = {
	{ "status.json", px_report_json },
	{ "metrics", px_metrics_text },
};

#define NFILES (sizeof(files) / sizeof(files[0]))

int fs_status_owns(fuse_ino_t ino)
{
	return ino == FS_INO_STATUS_DIR || (ino > FS_INO_STATUS_DIR &&
					    ino <= FS_INO_STATUS_DIR + NFILES);
}

fuse_ino_t fs_status_lookup(fuse_ino_t parent, const char *name)
{
	if (parent == FUSE_ROOT_ID)
		return strcmp(name, FS_STATUS_DIR) == 0 ? FS_INO_STATUS_DIR : 0;
	if (parent != FS_INO_STATUS_DIR)
		return 0;
	for (size_t i = 0; i < NFILES; i++)
		if (strcmp(name, files[i].name) == 0)
			return FS_INO_STATUS_DIR + 1 + i;
	return 0;
}

void fs_status_stat(const struct fs_ctx *ctx, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = ctx->uid;
	st->st_gid = ctx->gid;
	st->st_mtime = st->st_ctime = st->st_atime = ctx->dir_mtime;
	if (ino == FS_INO_STATUS_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
	}
}

size_t fs_status_children(fuse_ino_t ino, size_t i, const char **name, fuse_ino_t *child)
{
	if (ino != FS_INO_STATUS_DIR || i >= NFILES)
		return 0;
	*name = files[i].name;
	*child = FS_INO_STATUS_DIR + 1 + i;
	return NFILES;
}

int fs_status_open(struct fs_ctx *ctx, fuse_ino_t ino, struct fs_blob **out)
{
	size_t i = ino - FS_INO_STATUS_DIR - 1;
	struct fs_blob *b;
	char *text;

	*out = NULL;
	if (ino == FS_INO_STATUS_DIR)
		return EISDIR;
	if (i >= NFILES)
		return ENOENT;
	text = files[i].make(ctx->core);
	b = text ? malloc(sizeof(*b)) : NULL;
	if (!b) {
		free(text);
		return ENOMEM;
	}
	b->magic = FS_BLOB_MAGIC;
	b->data = text;
	b->len = strlen(text);
	b->ctx = ctx;
	b->prev = NULL;
	pthread_mutex_lock(&ctx->blobs_lock);
	b->next = ctx->blobs;
	if (b->next)
		b->next->prev = b;
	ctx->blobs = b;
	pthread_mutex_unlock(&ctx->blobs_lock);
	*out = b;
	return 0;
}

void fs_blob_free(struct fs_blob *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->ctx->blobs_lock);
	if (b->prev)
		b->prev->next = b->next;
	else
		b->ctx->blobs = b->next;
	if (b->next)
		b->next->prev = b->prev;
	pthread_mutex_unlock(&b->ctx->blobs_lock);
	free(b->data);
	free(b);
}

void fs_status_free_all(struct fs_ctx *ctx)
{
	while (ctx->blobs)
		fs_blob_free(ctx->blobs);
}
