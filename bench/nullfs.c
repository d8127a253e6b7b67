/*
 * bench-nullfs: the FUSE ceiling of this machine, for bench/net.sh.
 *
 * A read-only FUSE daemon that serves N files of a given size whose bytes
 * come from one static block: every read is answered with fuse_reply_buf()
 * pointing into that block, with no allocation, no copy and no lock. What
 * it costs to read through it is what the kernel's FUSE path and libfuse
 * cost, and nothing else, so its throughput is the most any FUSE daemon can
 * reach here and its CPU seconds per GiB the least it can spend.
 *
 * It is mounted the way seamfs mounts (fs/main.c, fs/ops.c), so that the two
 * differ only in where the bytes come from:
 *   - options ro, subtype, fsname; the low-level API, fuse_session_loop_mt
 *     with at most 64 workers, 8 idle;
 *   - init: max_write raised to 1 MiB (libfuse derives max_pages from it,
 *     which lets the kernel send 1 MiB reads), no writeback cache, async
 *     reads when the kernel offers them;
 *   - open: keep_cache; the first open raises the mount's bdi read_ahead_kb
 *     to 1024 (the INIT reply can only lower it);
 *   - attributes and entries cached for an hour, st_blksize 1 MiB; a read
 *     larger than 1 MiB is cut to 1 MiB.
 *
 *   bench-nullfs [-o size=BYTES,files=N,FUSE options] MOUNTPOINT
 *
 * Runs in the foreground until unmounted (fusermount3 -u) or sent SIGTERM.
 * The files are /null-0.bin .. /null-(N-1).bin; size takes a K, M or G
 * suffix (powers of 1024). Byte k of every file is block[k mod 1 MiB].
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NULL_MAX_READ (1 << 20)
#define NULL_ATTR_TIMEOUT 3600.0
#define NULL_MAX_FILES 1024
#define NULL_NAME_FMT "null-%u.bin"

/* Twice the largest read, so that any offset's 1 MiB is contiguous. */
static unsigned char block[2 * NULL_MAX_READ];

struct null_ctx {
	uint64_t size;                /* bytes in each file */
	unsigned files;               /* inodes 2 .. files + 1 */
	char bdi_readahead[96];       /* /sys/class/bdi/MAJ:MIN/read_ahead_kb */
	atomic_int readahead_set;
	time_t mtime;
};

struct null_opts {
	char *size;
	unsigned files;
};

static const struct fuse_opt null_opt_spec[] = {
	{ "size=%s", offsetof(struct null_opts, size), 0 },
	{ "files=%u", offsetof(struct null_opts, files), 0 },
	FUSE_OPT_END
};

static struct null_ctx *ctx_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_block(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < NULL_MAX_READ; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		block[i] = (unsigned char)x;
	}
	memcpy(block + NULL_MAX_READ, block, NULL_MAX_READ);
}

/* Inode of file k: k + 2 (1 is the root). 0: no such file. */
static unsigned file_of(const struct null_ctx *ctx, fuse_ino_t ino)
{
	return ino >= 2 && ino < (fuse_ino_t)ctx->files + 2 ? (unsigned)(ino - 1) : 0;
}

static int fill_stat(const struct null_ctx *ctx, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_mtime = st->st_ctime = st->st_atime = ctx->mtime;
	st->st_blksize = NULL_MAX_READ;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (!file_of(ctx, ino))
		return ENOENT;
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)ctx->size;
	st->st_blocks = (blkcnt_t)((ctx->size + 511) / 512);
	return 0;
}

static void null_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->max_write < NULL_MAX_READ)
		conn->max_write = NULL_MAX_READ;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= conn->capable & FUSE_CAP_ASYNC_READ;
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct null_ctx *ctx = ctx_of(req);
	struct fuse_entry_param e;
	unsigned k;
	char tail;

	memset(&e, 0, sizeof(e));
	e.entry_timeout = NULL_ATTR_TIMEOUT;
	if (parent == FUSE_ROOT_ID && sscanf(name, "null-%u.bi%c", &k, &tail) == 2 &&
	    tail == 'n' && k < ctx->files) {
		char want[32];
		snprintf(want, sizeof(want), NULL_NAME_FMT, k);
		if (strcmp(want, name) == 0) {
			e.ino = (fuse_ino_t)k + 2;
			e.attr_timeout = NULL_ATTR_TIMEOUT;
			fill_stat(ctx, e.ino, &e.attr);
		}
	}
	fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;
	int err = fill_stat(ctx_of(req), ino, &st);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, NULL_ATTR_TIMEOUT);
}

static void null_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct null_ctx *ctx = ctx_of(req);
	char *buf;
	size_t used = 0;
	(void)fi;

	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* entry i: 0 ".", 1 "..", 2.. the files; the next offset is i + 1 */
	for (off_t i = off; i < (off_t)ctx->files + 2; i++) {
		struct stat st = { .st_ino = FUSE_ROOT_ID, .st_mode = S_IFDIR };
		char name[32];
		if (i < 2) {
			snprintf(name, sizeof(name), "%s", i == 0 ? "." : "..");
		} else {
			snprintf(name, sizeof(name), NULL_NAME_FMT, (unsigned)(i - 2));
			st.st_ino = (ino_t)i;
			st.st_mode = S_IFREG;
		}
		size_t n = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* As seamfs: raise the mount's read-ahead once, at the first open. */
static void raise_readahead(struct null_ctx *ctx)
{
	char val[16];
	if (!ctx->bdi_readahead[0] || atomic_exchange(&ctx->readahead_set, 1))
		return;
	int fd = open(ctx->bdi_readahead, O_WRONLY | O_CLOEXEC);
	int n = snprintf(val, sizeof(val), "%d", NULL_MAX_READ / 1024);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		fprintf(stderr, "bench-nullfs: kernel read-ahead stays at its default (%s)\n",
			ctx->bdi_readahead);
	if (fd >= 0)
		close(fd);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct null_ctx *ctx = ctx_of(req);
	raise_readahead(ctx);
	if (ino == FUSE_ROOT_ID) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (!file_of(ctx, ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* The whole point: a reply from the static block, nothing allocated. */
static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	const struct null_ctx *ctx = ctx_of(req);
	(void)ino;
	(void)fi;
	if (off < 0 || (uint64_t)off >= ctx->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > NULL_MAX_READ)
		size = NULL_MAX_READ;
	if (size > ctx->size - (uint64_t)off)
		size = (size_t)(ctx->size - (uint64_t)off);
	fuse_reply_buf(req, (const char *)block + (uint64_t)off % NULL_MAX_READ, size);
}

static void null_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops null_ops = {
	.init = null_init,
	.lookup = null_lookup,
	.getattr = null_getattr,
	.readdir = null_readdir,
	.open = null_open,
	.read = null_read,
	.release = null_release,
};

/* The mount's bdi, from mountinfo (a stat() would wait for this daemon). */
static void find_bdi(const char *mnt, struct null_ctx *ctx)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], dev[64] = "";
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char majmin[64], point[PATH_MAX];
		if (sscanf(line, "%*s %*s %63s %*s %4095s", majmin, point) == 2 &&
		    strcmp(point, mnt) == 0)
			snprintf(dev, sizeof(dev), "%s", majmin);
	}
	fclose(f);
	if (dev[0])
		snprintf(ctx->bdi_readahead, sizeof(ctx->bdi_readahead),
			 "/sys/class/bdi/%s/read_ahead_kb", dev);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || v == 0 || v > (1ull << 62) >> shift)
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: bench-nullfs [-o size=BYTES[KMG],files=N,FUSE options] MOUNTPOINT\n"
	      "Serves null-0.bin .. null-(N-1).bin (default: 1, of 1G) from one static\n"
	      "block; runs in the foreground until unmounted or sent SIGTERM.\n",
	      f);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cl;
	struct null_opts no = { .files = 1 };
	struct null_ctx ctx = { .size = 1ull << 30 };
	struct fuse_session *se = NULL;
	struct fuse_loop_config *loop = NULL;
	int rc = 1, handlers = 0, mounted = 0;

	memset(&cl, 0, sizeof(cl));
	if (fuse_opt_parse(&args, &no, null_opt_spec, NULL) == -1 ||
	    fuse_parse_cmdline(&args, &cl) != 0) {
		usage(stderr);
		goto out;
	}
	if (cl.show_help) {
		usage(stdout);
		rc = 0;
		goto out;
	}
	if (!cl.mountpoint || (no.size && parse_size(no.size, &ctx.size) != 0) ||
	    no.files == 0 || no.files > NULL_MAX_FILES) {
		usage(stderr);
		goto out;
	}
	ctx.files = no.files;
	ctx.mtime = time(NULL);
	fill_block();
	if (fuse_opt_add_arg(&args, "-oro") || fuse_opt_add_arg(&args, "-osubtype=bench-nullfs") ||
	    fuse_opt_add_arg(&args, "-ofsname=bench-nullfs"))
		goto out;
	se = fuse_session_new(&args, &null_ops, sizeof(null_ops), &ctx);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se))
		goto out;
	handlers = 1;
	if (fuse_session_mount(se, cl.mountpoint))
		goto out;
	mounted = 1;
	find_bdi(cl.mountpoint, &ctx);
	loop = fuse_loop_cfg_create();
	if (!loop)
		goto out;
	fuse_loop_cfg_set_max_threads(loop, 64);
	fuse_loop_cfg_set_idle_threads(loop, 8);
	rc = fuse_session_loop_mt(se, loop) < 0 ? 1 : 0;
out:
	fuse_loop_cfg_destroy(loop);
	if (mounted)
		fuse_session_unmount(se);
	if (handlers)
		fuse_remove_signal_handlers(se);
	if (se)
		fuse_session_destroy(se);
	free(cl.mountpoint);
	free(no.size);
	fuse_opt_free_args(&args);
	return rc;
}
