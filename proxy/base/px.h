/*
 * px.h - the core's status codes and common macros.
 *
 * Every fallible function of proxy/ and verifier/ returns an enum px_status.
 * Foreign codes (CURLcode, HTTP status, errno of the state files) are
 * translated into it once, at the edge that sees them; fs/ translates it to
 * an errno in one place.
 */
#ifndef SEAMFS_PX_H
#define SEAMFS_PX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PX_WUR __attribute__((warn_unused_result))
#define PX_PRINTF(f, a) __attribute__((format(printf, f, a)))

enum px_status {
	PX_OK = 0,
	PX_EOF,          /* outcome: no byte at or after the offset */
	PX_EAGAIN,       /* outcome: nothing yet; the same request, made again
			  * later, may succeed. Only that. */
	PX_ENOMEM,
	PX_EINVAL,       /* bad argument or bad input */
	PX_EIO,          /* local I/O error (pread, state files) */
	PX_ETIMEDOUT,    /* a bounded wait expired */
	PX_ECANCELED,    /* the caller cancelled the transfer */
	PX_ECONNECT,     /* could not connect or resolve */
	PX_ETRANSFER,    /* reset, premature end, receive error */
	PX_EBADRESP,     /* a response that breaks the HTTP range contract */
	PX_ESIZE,        /* the source's size differs from the asset's */
	PX_ENOTFOUND,    /* HTTP 404/410, or ENOENT on a path source */
	PX_EAUTH,        /* HTTP 401/403, or EACCES on a path source */
	PX_ESERVER,      /* HTTP 5xx */
	PX_ENOSOURCE,    /* no source of the asset can serve */
	PX_ESHUTDOWN,    /* the core is stopping */
	PX_EBUSY,        /* every provider that could serve is at its limit */
	PX_ENOTASSET,    /* an answer that is not the asset's bytes: an HTML page,
			  * compressed, of unknown length */
	PX_EMISMATCH,    /* bytes that differ from the asset's reference */
	PX_EDECLINED,    /* outcome: not served this way (a read tier that does
			  * not hold the bytes, a parse that needs the whole
			  * document): the caller takes the next way */
	PX_EEXIST,       /* it is there already */
	PX_EFENCED,      /* outcome: our lease or generation was taken or
			  * superseded: stop, publish nothing (not "again") */
	PX_EFULL,        /* a bounded queue or table has no room */
	PX_ELOCKTIMEOUT, /* a lock (a store's, a file's) was not had in time */
	PX_ENEXT,        /* outcome: this source is done with the request (it
			  * cut over, or its bytes were not the asset's): take
			  * the next source and ask again */
	PX_EFAILED,      /* outcome: a transfer under a read failed, and the
			  * read tier reports where and why beside it
			  * (read/retry.h) for the one decision after the
			  * tiers; never leaves the read layer */
	PX_STATUS_COUNT
};

/* Milliseconds and microseconds on CLOCK_MONOTONIC (clock.c). Any thread. */
int64_t px_now_ms(void);
int64_t px_now_us(void);

/* Makes dir and its missing parents with mode (files.c). 0, or -1 with
 * errno set (ENAMETOOLONG past PATH_MAX). Any thread. */
int px_mkdir_p(const char *dir, unsigned int mode);

/* Replaces file with len bytes of data: FILE.XXXXXX.tmp (a random name,
 * made with mode, O_EXCL|O_NOFOLLOW), write, fsync, rename, fsync of the
 * directory. A crash leaves the old file or the new one (and maybe the
 * temporary file); a link planted at any name is never written through.
 * The directory itself is opened as named. PX_EIO with "PATH: reason" in
 * err. Any thread. */
enum px_status px_write_atomic(const char *file, const void *data, size_t len,
			       unsigned int mode, char *err, size_t errlen) PX_WUR;

/* px_write_atomic in the directory dirfd (borrowed), for a directory
 * others may write to: name is one component; dir names the directory
 * in messages only. PX_EIO with "DIR/NAME: reason" in err. Any thread. */
enum px_status px_write_atomic_at(int dirfd, const char *dir, const char *name,
				  const void *data, size_t len, unsigned int mode, char *err,
				  size_t errlen) PX_WUR;

/* Whether name is a temporary file px_write_atomic makes for the file
 * named file (FILE.XXXXXX.tmp), for cleanups that remove only what
 * seamfs made. Pure; any thread. */
int px_write_atomic_tmp(const char *name, const char *file);

/* Opens the directory path (root's own configuration: a link there is
 * followed) as the anchor of the calls below. The descriptor, or -1 with
 * errno. Any thread. */
int px_dir_open(const char *path);

/* Opens the directory rel (relative; "a/b") beneath root, one component at
 * a time, never through a link (O_NOFOLLOW), never onto another file
 * system; missing folders are made with mode when make. "." and ".."
 * components are refused. The new descriptor, or -1 with errno: ELOOP or
 * ENOTDIR (a link or a file in the way), EXDEV (a mount point), EINVAL,
 * or the failing call's. root stays the caller's. Any thread. */
int px_dir_walk(int root, const char *rel, unsigned int mode, int make);

/* Makes a new file BASE.XXXXXX.EXT in dirfd (XXXXXX random; another name
 * on EEXIST, 100 tries) with O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW and mode;
 * its name into name (n bytes). The descriptor, or -1 with errno (name
 * ""). Only a file made here may later be renamed or unlinked by name.
 * Any thread. */
int px_create_excl(int dirfd, const char *base, const char *ext, unsigned int mode,
		   char *name, size_t n);

/* Opens the regular file rel (relative; "a/b/c") beneath the directory
 * root for reading, never through a link at any component (nor a magic
 * link, nor "..") and never onto another file system than root's:
 * openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
 * RESOLVE_NO_XDEV, else px_open_beneath_walk. Without blocking on a FIFO.
 * The descriptor (blocking), or -1 with errno: ELOOP (a link in the way),
 * EXDEV (another file system), EINVAL (not a regular file, a bad name),
 * EISDIR, or open's. root stays the caller's. Any thread (files.c). */
int px_open_beneath(int root, const char *rel);

/* px_open_beneath without openat2 (the fallback for kernels before 5.6):
 * the folders by px_dir_walk, the file with O_NOFOLLOW. Same contract;
 * public so that the unit tests cover it on a kernel that has openat2. */
int px_open_beneath_walk(int root, const char *rel);

/* px_open_beneath of rel beneath the directory top, opened here, while
 * top is on the file system dev (a storage seamfs first saw there):
 * else -1 with errno ENODEV (unmounted, another file system). Any thread
 * (files.c). */
int px_open_in_dir(const char *top, unsigned long long dev, const char *rel);

/* Opens a path source for reading: a regular file only, opened without
 * blocking (a FIFO, a device, a socket or a directory is refused: a FIFO's
 * open would block in the kernel until a writer comes). The descriptor, or
 * -1 with errno (EINVAL for a FIFO, a device or a socket; EISDIR). Any
 * thread (files.c). */
int px_open_regular(const char *path);

/* What path is when it exists and is not a regular file ("a FIFO", "a
 * device", "a directory", "a socket"), for messages; NULL otherwise. */
const char *px_file_kind(const char *path);

/* Reads a secret's file (what: the option naming it, for messages): its
 * first line, at least 16 bytes, into *out (malloc'd). A file others may
 * read (mode o+r), a link, a non-regular file or a short or empty secret
 * is refused: PX_EINVAL or PX_EIO with err naming the option and the file,
 * never quoting the secret. Any thread (files.c). */
enum px_status px_secret_read(const char *file, const char *what, char **out, char *err,
			      size_t errlen) PX_WUR;

/* Compares two strings in a time that does not depend on where they
 * differ (a secret against what a request brought): 1 when equal. */
int px_secret_equal(const char *a, const char *b);

/* Sends the len bytes of buf on the stream socket fd, again after EINTR,
 * never raising SIGPIPE (MSG_NOSIGNAL): 0, or -1 when the peer is gone or
 * on an error (a send timeout included). Any thread (sock.c). */
int px_send_all(int fd, const void *buf, size_t len);

/* Receives exactly len bytes into buf from the stream socket fd, again
 * after EINTR: 0, or -1 at the end of the stream or on an error (a receive
 * timeout, SO_RCVTIMEO, included). Any thread (sock.c). */
int px_recv_all(int fd, void *buf, size_t len);

/* A static, human-readable name for a status. Never NULL. */
const char *px_strerror(enum px_status st);

/* Whether a failed transfer with this status is worth retrying on the same
 * source: resets, premature ends, 5xx, connection failures. Not 404, not auth. */
int px_status_retryable(enum px_status st);

/* The process that serves the mount (fs/keeper.h): its pid, the keeper's
 * (0: none), whether the kernel resends what a dead worker held (without
 * it a restart ends the mount), how many workers the keeper started before
 * it, how the last one ended and when (ms since the epoch; 0: never). Set
 * by main through px_core_set_worker() (core.h). */
struct px_worker_info {
	long pid;
	long keeper_pid;
	int resend;
	unsigned restarts;
	char last_end[96];
	int64_t last_at_ms;
	int64_t last_pause_ms;  /* from the keeper's notice of that end to this
				 * process serving (its start) */
	int mnt_id;             /* the mount's id in mountinfo; 0 unknown */
};

/* Reads the start of the /proc file path (one read of size - 1 bytes at
 * most) into buf as a string: the bytes read (0, buf "", when the read
 * fails), or -1 with open's errno when the file cannot be opened (buf ""
 * too). size > 0. Any thread (proc.c). */
ssize_t px_proc_read(const char *path, char *buf, size_t size);

/*
 * Whether process pid of this machine is gone: no such process, or every
 * thread of it has exited and it waits to be reaped (a zombie: its parent
 * died, and an init that does not reap leaves it so). A process whose
 * leader exited while other threads run is not gone. Any thread (proc.c).
 */
int px_pid_gone(pid_t pid);

/* An open file of another process: its inode number and file position. */
struct px_fdpos {
	uint64_t ino;
	int64_t pos;
};

/*
 * The positions of process (or thread) pid's open files on the mount
 * whose id in mountinfo is mnt_id (/proc/PID/fdinfo: pos, mnt_id, ino),
 * at most cap of them into out: their count, or -1 when pid's files
 * cannot be listed (gone, or not ours to see). A position moves with
 * read(2), also where the page cache answers, never with pread(2). Any
 * thread (proc.c).
 */
int px_proc_positions(long pid, int mnt_id, struct px_fdpos *out, int cap);

#endif
