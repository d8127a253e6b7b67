/*
 * ops.c - FUSE lowlevel operations over the core's tree and sessions.
 *
 * The tree is immutable while mounted, so lookups and attributes are
 * answered from memory with long cache timeouts, and file contents are
 * immutable, so the kernel may keep them in its page cache (keep_cache).
 * A read blocks its FUSE worker thread until the core has the bytes or the
 * read's deadline passes; the loop runs multithreaded so other requests go
 * on meanwhile. Everything that would write gets EROFS.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fs.h"
#include "handles.h"
#include "log.h"
#include "metrics.h"
#include "session.h"
#include "transcode.h"
#include "tree.h"

#define FS_ATTR_TIMEOUT 3600.0
#define FS_MAX_READ (1 << 20)
/* The kernel's read-ahead set on the mount (raise_readahead), in KiB */
#define FS_READAHEAD_KB 512

int fs_errno(enum px_status st)
{
	switch (st) {
	case PX_OK: return 0;
	case PX_ENOMEM: return ENOMEM;
	case PX_EINVAL: return EINVAL;
	case PX_ESHUTDOWN: return ESHUTDOWN;
	case PX_ENOSOURCE: return EIO;
	case PX_EBUSY: return EBUSY;
	case PX_ELOCKTIMEOUT: return EBUSY; /* as PX_EBUSY was for it */
	default: return EIO; /* timeouts and source failures alike: EIO */
	}
}

/* Drops the kernel's entry of every node of a that b lacks (by inode),
 * below directory dir of a. */
static void forget_missing(struct fuse_session *se, const struct px_tree *a,
			   const struct px_tree *b, uint64_t dir)
{
	const struct px_tree_node *const *kids;
	size_t n = px_tree_children(a, dir, &kids);
	for (size_t i = 0; i < n; i++) {
		const struct px_tree_node *k = kids[i];
		const struct px_tree_node *there = px_tree_get(b, k->ino);
		if (!there || there->parent != k->parent || strcmp(there->name, k->name) != 0)
			fuse_lowlevel_notify_inval_entry(se, k->parent, k->name, strlen(k->name));
		if (k->asset < 0)
			forget_missing(se, a, b, k->ino);
	}
}

void fs_forget_changes(void *arg, const struct px_tree *old, const struct px_tree *now)
{
	struct fs_ctx *ctx = arg;
	if (!ctx->se)
		return;
	/* gone: the entries the kernel has; new: negative entries it may have */
	forget_missing(ctx->se, old, now, PX_TREE_ROOT);
	forget_missing(ctx->se, now, old, PX_TREE_ROOT);
	fuse_lowlevel_notify_inval_inode(ctx->se, PX_TREE_ROOT, 0, 0);
}

static struct fs_ctx *ctx_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_stat(const struct fs_ctx *ctx, const struct px_tree_node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_uid = ctx->uid;
	st->st_gid = ctx->gid;
	if (n->asset < 0) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		st->st_mtime = st->st_ctime = st->st_atime = ctx->dir_mtime;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = px_core_asset_size(ctx->core, (size_t)n->asset);
		st->st_blocks = (st->st_size + 511) / 512;
		st->st_mtime = st->st_ctime = st->st_atime =
			px_core_asset_mtime(ctx->core, (size_t)n->asset);
	}
	st->st_blksize = FS_MAX_READ;
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* libfuse derives max_pages from max_write: this is what lets the
	 * kernel send 1 MiB reads */
	if (conn->max_write < FS_MAX_READ)
		conn->max_write = FS_MAX_READ;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= conn->capable & FUSE_CAP_ASYNC_READ;
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_ctx *ctx = ctx_of(req);
	const struct px_tree_node *n = px_tree_lookup(px_core_tree(ctx->core), parent, name);
	fuse_ino_t sino = fs_status_lookup(parent, name);
	struct fuse_entry_param e;

	if (sino) {
		memset(&e, 0, sizeof(e));
		e.ino = sino;
		e.attr_timeout = 1.0;
		e.entry_timeout = FS_ATTR_TIMEOUT;
		fs_status_stat(ctx, sino, &e.attr);
		fuse_reply_entry(req, &e);
		return;
	}

	if (!n) {
		/* negative entries can be cached too: the tree never changes */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = FS_ATTR_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = n->ino;
	e.attr_timeout = FS_ATTR_TIMEOUT;
	e.entry_timeout = FS_ATTR_TIMEOUT;
	fill_stat(ctx, n, &e.attr);
	fuse_reply_entry(req, &e);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_ctx *ctx = ctx_of(req);
	const struct px_tree_node *n = px_tree_get(px_core_tree(ctx->core), ino);
	struct stat st;
	(void)fi;

	if (fs_status_owns(ino)) {
		fs_status_stat(ctx, ino, &st);
		fuse_reply_attr(req, &st, 1.0);
		return;
	}
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(ctx, n, &st);
	fuse_reply_attr(req, &st, FS_ATTR_TIMEOUT);
}

static void status_readdir(fuse_req_t req, size_t size, off_t off);

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fs_ctx *ctx = ctx_of(req);
	const struct px_tree *t = px_core_tree(ctx->core);
	const struct px_tree_node *dir = px_tree_get(t, ino);
	const struct px_tree_node *const *kids;
	size_t nkids, used = 0, extra = 0;
	char *buf;
	(void)fi;

	if (ino == FS_INO_STATUS_DIR) {
		status_readdir(req, size, off);
		return;
	}
	if (!dir) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (dir->asset >= 0) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	nkids = px_tree_children(t, ino, &kids);
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* offsets: 0 ".", 1 "..", then .seamfs in the root, then the
	 * children in name order; an entry's offset is where the next readdir
	 * resumes */
	extra = ino == FUSE_ROOT_ID;
	for (size_t i = (size_t)off; i < nkids + 2 + extra; i++) {
		struct stat st;
		const char *name;
		memset(&st, 0, sizeof(st));
		if (i == 0) {
			name = ".";
			st.st_ino = dir->ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = dir->parent;
			st.st_mode = S_IFDIR;
		} else if (extra && i == 2) {
			name = FS_STATUS_DIR;
			st.st_ino = FS_INO_STATUS_DIR;
			st.st_mode = S_IFDIR;
		} else {
			name = kids[i - 2 - extra]->name;
			st.st_ino = kids[i - 2 - extra]->ino;
			st.st_mode = kids[i - 2 - extra]->asset < 0 ? S_IFDIR : S_IFREG;
		}
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st,
						(off_t)(i + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void status_readdir(fuse_req_t req, size_t size, off_t off)
{
	char *buf = malloc(size);
	size_t used = 0;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = (size_t)off;; i++) {
		struct stat st;
		const char *name;
		fuse_ino_t child;
		memset(&st, 0, sizeof(st));
		if (i == 0 || i == 1) {
			name = i == 0 ? "." : "..";
			st.st_ino = i == 0 ? FS_INO_STATUS_DIR : FUSE_ROOT_ID;
			st.st_mode = S_IFDIR;
		} else if (i - 2 < fs_status_children(FS_INO_STATUS_DIR, i - 2, &name, &child)) {
			st.st_ino = child;
			st.st_mode = S_IFREG;
		} else {
			break;
		}
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st,
						(off_t)(i + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* The process (thread group) of thread pid, as FUSE names the caller; pid
 * itself when /proc does not say. */
static uint64_t caller_process(uint64_t pid)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/%llu/status", (unsigned long long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return pid;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long tgid;
		if (sscanf(line, "Tgid: %llu", &tgid) == 1) {
			pid = tgid;
			break;
		}
	}
	fclose(f);
	return pid;
}

/* The client an open belongs to, by the session_key option: reopens by the
 * same client join its session. tgid: the caller's process. */
static uint64_t client_key(struct fs_ctx *ctx, fuse_req_t req, uint64_t tgid)
{
	static _Atomic uint64_t opens;
	const struct fuse_ctx *fc = fuse_req_ctx(req);

	switch (ctx->key) {
	case PX_KEY_THREAD:
		return (uint64_t)fc->pid;
	case PX_KEY_UID:
		return (uint64_t)fc->uid;
	case PX_KEY_OPEN:
		return (1ULL << 63) | atomic_fetch_add(&opens, 1);
	case PX_KEY_PROCESS:
		break;
	}
	return tgid;
}

/*
 * Raises the kernel's read-ahead on this mount to FS_READAHEAD_KB, once,
 * from the first open: by then the INIT reply (which can only lower it) is
 * done. Best effort: it needs root. Not the 1 MiB of FS_MAX_READ: a probe
 * (ffprobe, a media server's scan) reads a few hundred KiB of a file's
 * head, and the kernel's ramp of windows past it reaches 1920 KiB at
 * 1 MiB and 960 KiB at 512 KiB, each byte fetched from an origin; and
 * sequential reads were no slower at 512 KiB (docs/read-path.md).
 */
static void raise_readahead(struct fs_ctx *ctx)
{
	char val[16];
	if (!ctx->bdi_readahead[0] || atomic_exchange(&ctx->readahead_set, 1))
		return;
	int fd = open(ctx->bdi_readahead, O_WRONLY | O_CLOEXEC);
	int n = snprintf(val, sizeof(val), "%d", FS_READAHEAD_KB);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		px_info("fs", "kernel read-ahead stays at its default (%s: %s)",
			ctx->bdi_readahead, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/*
 * Tells the core how far the kernel reads ahead on this mount: an operator
 * may raise read_ahead_kb at any time, so it is read again at every open
 * (a small sysfs read). Unknown: the core assumes 1 MiB.
 */
static void note_readahead(struct fs_ctx *ctx)
{
	char val[32];
	if (!ctx->bdi_readahead[0])
		return;
	int fd = open(ctx->bdi_readahead, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, val, sizeof(val) - 1);
	close(fd);
	if (n <= 0)
		return;
	val[n] = '\0';
	char *end;
	long long kb = strtoll(val, &end, 10);
	if (end != val && kb >= 0 && kb < (1LL << 30))
		px_stream_set_kernel_readahead(ctx->core, kb * 1024);
}

/*
 * An open file's handle is one of three kinds, each behind one table of
 * operations: a session's handle (an asset's bytes through the proxy), a
 * transcode's reader, and a snapshot of a .seamfs file. The kind is kept
 * in the handle's id (handles.h), so that a worker started after the open
 * can make the handle again on the file's next request.
 */
struct fh_ops {
	/* Makes a handle for ino (n its node, NULL if none): 0 or an errno. */
	int (*open)(fuse_req_t req, struct fs_ctx *ctx, fuse_ino_t ino,
		    const struct px_tree_node *n, void **out);
	/* Replies to a read of size bytes at off. */
	void (*read)(fuse_req_t req, struct fs_ctx *ctx, void *h, size_t size, off_t off);
	void (*release)(void *h);
	int direct_io;              /* no page cache (fuse_file_info) */
	int keep_cache;             /* the page cache outlives each open */
};

static int asset_of(const struct px_tree_node *n, size_t *asset)
{
	if (!n || n->asset < 0)
		return ESTALE;  /* gone from the tree since the file was opened */
	*asset = (size_t)n->asset;
	return 0;
}

static int session_open(fuse_req_t req, struct fs_ctx *ctx, fuse_ino_t ino,
			const struct px_tree_node *n, void **out)
{
	size_t asset;
	int err = asset_of(n, &asset);
	if (err)
		return err;
	note_readahead(ctx);
	uint64_t tgid = caller_process((uint64_t)fuse_req_ctx(req)->pid);
	enum px_status st = px_handle_open(ctx->core, asset, client_key(ctx, req, tgid),
					   (struct px_handle **)out);
	if (st == PX_OK)
		px_handle_note_opener(*out, tgid, (uint64_t)ino);
	return st == PX_OK ? 0 : fs_errno(st);
}

static void session_read(fuse_req_t req, struct fs_ctx *ctx, void *h, size_t size, off_t off)
{
	/* the bytes may be sent straight from the stream's window or the
	 * transfer's buffer, and copies go to the worker's own buffer in the
	 * core: no allocation per read */
	struct px_zc zc;
	int64_t t0 = px_now_us();
	enum px_status st = px_handle_read_zc(h, off, size < FS_MAX_READ ? size : FS_MAX_READ,
					      NULL, &zc);
	px_metrics_note_read(ctx->core, px_now_us() - t0);
	if (st != PX_OK) {
		fuse_reply_err(req, fs_errno(st));
		return;
	}
	/* one piece (the usual case) goes out with fuse_reply_buf, which
	 * allocates nothing; fuse_reply_iov allocates an array per call, so
	 * it is kept for a window's wrap, one read in a ring's worth */
	if (zc.iovcnt == 1)
		fuse_reply_buf(req, zc.iov[0].iov_base, zc.iov[0].iov_len);
	else
		fuse_reply_iov(req, zc.iov, zc.iovcnt);
	px_handle_zc_done(&zc);
}

static void session_release(void *h)
{
	px_handle_close(h);
}

static int tc_open(fuse_req_t req, struct fs_ctx *ctx, fuse_ino_t ino,
		   const struct px_tree_node *n, void **out)
{
	size_t asset;
	(void)ino;
	int err = asset_of(n, &asset);
	if (err)
		return err;
	enum px_status st = px_transcode_open(px_core_transcode(ctx->core), asset,
					      (uint64_t)fuse_req_ctx(req)->pid,
					      (struct px_tcfile **)out);
	return st == PX_OK ? 0 : fs_errno(st);
}

static void tc_read(fuse_req_t req, struct fs_ctx *ctx, void *h, size_t size, off_t off)
{
	size_t got;
	(void)ctx;
	if (size > FS_MAX_READ)
		size = FS_MAX_READ;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	enum px_status st = px_transcode_read(h, off, size, buf,
					      (uint64_t)fuse_req_ctx(req)->pid, &got);
	if (st == PX_OK)
		fuse_reply_buf(req, buf, got);
	else
		fuse_reply_err(req, fs_errno(st));
	free(buf);
}

static void tc_release(void *h)
{
	px_transcode_close(h);
}

static int blob_open(fuse_req_t req, struct fs_ctx *ctx, fuse_ino_t ino,
		     const struct px_tree_node *n, void **out)
{
	(void)req;
	(void)n;
	return fs_status_open(ctx, ino, (struct fs_blob **)out);
}

static void blob_read(fuse_req_t req, struct fs_ctx *ctx, void *h, size_t size, off_t off)
{
	struct fs_blob *b = h;
	(void)ctx;
	size_t from = off < 0 || (size_t)off > b->len ? b->len : (size_t)off;
	size_t n = b->len - from < size ? b->len - from : size;
	/* reply from a copy: once the reply is written the reader may close,
	 * and the release may free the snapshot while writev's caller (ASan's
	 * interceptor, for one) still looks at it */
	char *copy = malloc(n ? n : 1);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, b->data + from, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

static void blob_release(void *h)
{
	fs_blob_free(h);
}

static const struct fh_ops fh_ops[] = {
	/* the bytes of an asset never change while mounted */
	[FS_FH_SESSION] = { session_open, session_read, session_release, 0, 1 },
	/* Direct I/O, no page cache: a read of a segment not yet written
	 * waits for its writer. As a buffered read it would go out as the
	 * kernel's read-ahead, an async request holding one of the
	 * connection's few background slots (max_background, 12) all that
	 * time, and a dozen such readers would starve the writers, whose
	 * input is read through this mount with the same slots. A direct read
	 * is a plain request holding only a worker thread (64), and waits
	 * for its own bytes, not for 1 MiB of read-ahead beyond the live
	 * edge. Serving it again is a pread of a local segment. */
	[FS_FH_TRANSCODE] = { tc_open, tc_read, tc_release, 1, 0 },
	/* a snapshot made at the open: each open reads a new one */
	[FS_FH_BLOB] = { blob_open, blob_read, blob_release, 1, 0 },
};

/* The handle fi->fh names; one an earlier worker made is made again on
 * its first request here. NULL with *err an errno when it cannot be had. */
static void *handle_of(fuse_req_t req, struct fs_ctx *ctx, fuse_ino_t ino, uint64_t fh,
		       int *err)
{
	enum fs_fh_kind kind = fs_handles_kind(fh);
	void *p = fs_handles_get(ctx->fhs, fh), *made = NULL;
	*err = 0;
	if (p)
		return p;
	/* every id is one a worker made, but an id names its kind in two
	 * bits and there are three kinds */
	if ((size_t)kind >= sizeof(fh_ops) / sizeof(fh_ops[0])) {
		*err = EBADF;
		return NULL;
	}
	const struct fh_ops *ops = &fh_ops[kind];
	const struct px_tree_node *n = px_tree_get(px_core_tree(ctx->core), ino);
	if ((*err = ops->open(req, ctx, ino, n, &made)) != 0)
		return NULL;
	p = fs_handles_adopt(ctx->fhs, fh, made);
	if (p != made)
		ops->release(made); /* another thread's came first */
	if (!p)
		*err = ENOMEM;
	return p;
}

/* The kind of handle an open of ino makes, or an errno for an open that
 * may not be. */
static int open_kind(struct fs_ctx *ctx, fuse_ino_t ino, const struct px_tree_node *n,
		     const struct fuse_file_info *fi, enum fs_fh_kind *kind)
{
	if (fs_status_owns(ino)) {
		*kind = FS_FH_BLOB;
		return 0;
	}
	if (!n)
		return ENOENT;
	if (n->asset < 0)
		return EISDIR;
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
		return EROFS;
	*kind = px_core_catalog(ctx->core)->assets[n->asset].kind == PX_ASSET_PLAIN
		? FS_FH_SESSION : FS_FH_TRANSCODE;
	return 0;
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_ctx *ctx = ctx_of(req);
	raise_readahead(ctx);
	const struct px_tree_node *n = px_tree_get(px_core_tree(ctx->core), ino);
	enum fs_fh_kind kind;
	void *h = NULL;

	int err = open_kind(ctx, ino, n, fi, &kind);
	if (!err)
		err = fh_ops[kind].open(req, ctx, ino, n, &h);
	if (!err && !(fi->fh = fs_handles_put(ctx->fhs, kind, h))) {
		fh_ops[kind].release(h);
		err = ENOMEM;
	}
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	fi->direct_io = (unsigned)fh_ops[kind].direct_io;
	fi->keep_cache = (unsigned)fh_ops[kind].keep_cache;
	if (fuse_reply_open(req, fi) == -ENOENT)
		fh_ops[kind].release(fs_handles_take(ctx->fhs, fi->fh)); /* the opener was interrupted */
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_ctx *ctx = ctx_of(req);
	int err;
	void *h = handle_of(req, ctx, ino, fi->fh, &err);

	if (!h)
		fuse_reply_err(req, err);
	else
		fh_ops[fs_handles_kind(fi->fh)].read(req, ctx, h, size, off);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* a file an earlier worker opened and nobody read since: nothing
	 * here to free */
	void *p = fs_handles_take(ctx_of(req)->fhs, fi->fh);
	(void)ino;
	if (p)
		fh_ops[fs_handles_kind(fi->fh)].release(p);
	fuse_reply_err(req, 0);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_ctx *ctx = ctx_of(req);
	const struct px_catalog *cat = px_core_catalog(ctx->core);
	struct statvfs sv;
	uint64_t bytes = 0;
	(void)ino;

	for (size_t i = 0; i < cat->nassets; i++) {
		int64_t sz = px_core_asset_size(ctx->core, i);
		if (sz > 0)
			bytes += (uint64_t)sz;
	}
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (bytes + 4095) / 4096;
	sv.f_files = px_tree_count(px_core_tree(ctx->core));
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

static void fs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct fs_ctx *ctx = ctx_of(req);
	if (!fs_status_owns(ino) && !px_tree_get(px_core_tree(ctx->core), ino))
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_err(req, (mask & W_OK) ? EROFS : 0);
}

/* Everything that would change the tree or a file. */
static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)ino; (void)attr; (void)to_set; (void)fi;
	fuse_reply_err(req, EROFS);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	(void)parent; (void)name; (void)mode; (void)rdev;
	fuse_reply_err(req, EROFS);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent; (void)name; (void)mode;
	fuse_reply_err(req, EROFS);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent; (void)name;
	fuse_reply_err(req, EROFS);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link; (void)parent; (void)name;
	fuse_reply_err(req, EROFS);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	(void)parent; (void)name; (void)newparent; (void)newname; (void)flags;
	fuse_reply_err(req, EROFS);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino; (void)newparent; (void)newname;
	fuse_reply_err(req, EROFS);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	(void)ino; (void)buf; (void)size; (void)off; (void)fi;
	fuse_reply_err(req, EROFS);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)parent; (void)name; (void)mode; (void)fi;
	fuse_reply_err(req, EROFS);
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	(void)ino; (void)name; (void)value; (void)size; (void)flags;
	fuse_reply_err(req, EROFS);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino; (void)name;
	fuse_reply_err(req, EROFS);
}

static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			 off_t length, struct fuse_file_info *fi)
{
	(void)ino; (void)mode; (void)offset; (void)length; (void)fi;
	fuse_reply_err(req, EROFS);
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
	.release = fs_release,
	.statfs = fs_statfs,
	.access = fs_access,
	.setattr = fs_setattr,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_unlink,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.write = fs_write,
	.create = fs_create,
	.setxattr = fs_setxattr,
	.removexattr = fs_removexattr,
	.fallocate = fs_fallocate,
};
