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
	pid_t keeper;
	int probe_fd;           /* the first worker says whether resend works */
	int resend;             /* set by fs_keeper_attach: the kernel resends */
	char cause[96];         /* how the last worker ended ("" in the first) */
	int64_t restarted_ms;   /* when (ms since the epoch), 0 in the first */
	char mnt[PATH_MAX];     /* the mountpoint (a started binary must not look
				 * at it: nobody answers there until it serves) */
};

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
};

/* The environment variable that makes a started seamfs a worker of a
 * keeper (set by the keeper for an upgrade, read by fs_keeper_worker). */
#define FS_WORKER_ENV "SEAMFS_KEEPER_WORKER"

/*
 * Mounts mnt with args (a copy; args stay as they are), reads the kernel's
 * FUSE_INIT and runs workers: returns 0 in each worker, w filled. The
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
