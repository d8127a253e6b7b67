/*
 * keeper.h - a keeper process that holds the FUSE connection, and workers
 * that serve it (docs/restart.md).
 *
 * With the option keeper=1 the daemon mounts, reads the kernel's FUSE_INIT
 * and keeps both the connection and those bytes; it then forks a worker,
 * which builds the core and serves. When a worker dies by a signal (a
 * crash, kill -9, the OOM killer) the keeper forks another on the same
 * connection: the new one is brought to the initialised state with the
 * saved INIT (its reply kept from the kernel) and asks the kernel to send
 * again the requests the dead one had read (FUSE_NOTIFY_RESEND, kernel
 * 6.9+). Readers see a pause; open files stay open (handles.h).
 */
#ifndef SEAMFS_KEEPER_H
#define SEAMFS_KEEPER_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs.h"
#include "notify.h"

/* What a worker gets from its keeper. */
struct fs_worker {
	int fd;                 /* the connection (/dev/fuse) */
	unsigned char *init;    /* the kernel's FUSE_INIT request, as read */
	size_t init_len;
	unsigned gen;           /* 0: the first worker; n: after n restarts */
	unsigned fh_base;       /* added to gen in file handle ids (handles.h): 0,
				 * or where the workers of a keeper that took
				 * over a kept connection start, apart from
				 * those of the keepers before it */
	pid_t keeper;
	int probe_fd;           /* the first worker says whether resend works */
	int resend;             /* set by fs_keeper_attach: the kernel resends */
	char cause[96];         /* how the last worker ended ("" in the first) */
	int64_t restarted_ms;   /* when (ms since the epoch), 0 in the first */
	char mnt[PATH_MAX];     /* the mountpoint (a started binary must not look
				 * at it: nobody answers there until it serves) */
};

/*
 * A connection a service manager kept for the keeper: systemd's
 * file-descriptor store (FileDescriptorStoreMax=, docs/restart.md). The
 * keeper stores the connection (FDNAME "fuse") and a memfd with the
 * kernel's INIT request ("fuse-init") after it mounts; a keeper started
 * after the last one died gets both back and serves the same mount.
 */
struct fs_stored {
	int fd;              /* the connection, -1: none */
	int init_fd;         /* the memfd with the INIT request */
	unsigned char *init; /* its bytes */
	size_t init_len;
};

#define FS_STORE_CONN "fuse"
#define FS_STORE_INIT "fuse-init"

/*
 * Takes what the service manager passed to this process ($LISTEN_PID,
 * $LISTEN_FDS, $LISTEN_FDNAMES; the variables are removed): 1 when s holds
 * a live FUSE connection and its INIT, 0 when none was passed, -1 when what
 * was passed cannot serve (logged; give it up with fs_keeper_forget_stored).
 * Never looks at the mountpoint (nobody answers there). Call before any
 * thread starts.
 */
int fs_keeper_stored(struct fs_stored *s);

/* Gives up what the manager kept: closes this process's copies and has
 * the manager close its own (FDSTOREREMOVE=1), which ends the connection. */
void fs_keeper_forget_stored(struct fs_stored *s, const struct fs_notify *n);

/* How the keeper runs. */
struct fs_keeper_opts {
	int *report_fd; /* the starting terminal's pipe: the keeper closes its copy
			 * (and sets it to -1 for the workers after the first) */
	int detach;     /* a daemon: the keeper leaves the terminal too */
	int fail_code;  /* its exit status when it gives up on workers */
	char **argv;    /* the command line, for a worker started from the binary
			 * on disk (an upgrade: SIGUSR2, seamfs ctl restart) */
	const struct fs_notify *notify; /* the service manager: told of each
					 * restart, and handed to a started
					 * binary (forked workers inherit it) */
	struct fs_stored *stored; /* a connection the manager kept (fd >= 0):
				   * served again, not mounted; taken over */
};

/* The environment variable that makes a started seamfs a worker of a
 * keeper (set by the keeper for an upgrade, read by fs_keeper_worker). */
#define FS_WORKER_ENV "SEAMFS_KEEPER_WORKER"

/*
 * Mounts mnt with args (a copy; args stay as they are), reads the kernel's
 * FUSE_INIT and runs workers: returns 0 in each worker, w filled. With
 * o->stored it mounts nothing: its first worker serves that connection as
 * after a restart. With a manager whose store takes two descriptors
 * ($FDSTORE, set by systemd 254+ or the unit), the connection and the INIT
 * are stored there after the mount; the keeper removes them when it
 * unmounts. The
 * keeper itself never returns: it exits with its last worker's exit status
 * after unmounting, or fail_code when workers crash in a loop or the
 * kernel cannot resend. SIGUSR2 to the keeper is an upgrade: the worker is
 * ended and the next one is started from the binary on disk (the running
 * one's code again when that one does not come up). Returns -1 in the caller, nothing mounted, when the
 * mount fails (logged). Call it before any thread starts: workers are forks
 * of the caller. Signals: SIGTERM, SIGINT and SIGHUP go on to the worker.
 */
int fs_keeper_run(struct fuse_args *args, const char *mnt, const struct fs_keeper_opts *o,
		  struct fs_worker *w);

/*
 * Whether this process was started by a keeper from the binary on disk (an
 * upgrade): then w is filled from the environment (the variable is
 * removed) and *detached says whether the keeper's daemon had left the
 * terminal. 1 yes, 0 no, -1 a malformed or unreadable hand-over (logged).
 */
int fs_keeper_worker(struct fs_worker *w, int *detached);

/*
 * In a worker: puts se (not mounted) on w's connection. The saved INIT is
 * processed first (libfuse answers nothing before it): in the first worker
 * its reply goes to the kernel, in later ones to a stand-in descriptor
 * whose place the connection then takes. A later worker then has the
 * kernel send again what the dead one held. 0, or -1 (logged).
 */
int fs_keeper_attach(struct fuse_session *se, struct fs_worker *w);

#endif
