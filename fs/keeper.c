/*
 * keeper.c - the keeper of the FUSE connection and its workers (keeper.h).
 *
 * What it relies on (docs/restart.md): the kernel keeps a connection alive
 * while any process holds its descriptor; it negotiates once, at the first
 * INIT reply; a request read by a process that died stays in the kernel's
 * processing list until FUSE_NOTIFY_RESEND moves it back to pending (kernel
 * 6.9+), and a reply to such a request carries the id the kernel gave it
 * (libfuse copies ids unchanged). seamfs's file system is read-only, so a
 * request served twice does no harm.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keeper.h"
#include "log.h"
#include "px.h"

#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7 /* kernel 6.9, protocol 7.40 */
#endif

/* a worker that ends this soon after its start counts as a crash loop */
#define QUICK_MS 3000
#define QUICK_MAX 5

static volatile sig_atomic_t g_worker, g_stopping, g_upgrade_asked;
static char g_exe[PATH_MAX]; /* the binary an upgrade starts */
static int g_init_fd = -1;   /* the saved INIT, for a started binary */
static int g_resend = -1;    /* whether the kernel resends: -1 not known yet */
static int g_in_store;       /* the connection is in the manager's fd store */
/* the keeper's session (its mount); a worker inherits it unused and keeps
 * it reachable: destroying it there would close the connection's number */
static struct fuse_session *g_keeper_se;

static void forward(int sig)
{
	int saved = errno;
	if (sig == SIGUSR2) {
		g_upgrade_asked = 1; /* seen by wait_worker */
		return;
	}
	if (sig != SIGHUP)
		g_stopping = 1;
	if (g_worker > 0)
		kill((pid_t)g_worker, sig);
	errno = saved;
}

static int handle_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: waitpid wakes to see g_stopping */
	return sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) ||
	       sigaction(SIGHUP, &sa, NULL) || sigaction(SIGUSR2, &sa, NULL) ? -1 : 0;
}

/* Mounts mnt with a copy of args; the connection's descriptor, or -1. */
static int mount_conn(struct fuse_args *args, const char *mnt, struct fuse_session **se)
{
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	struct fuse_lowlevel_ops none;
	int fd = -1;

	memset(&none, 0, sizeof(none));
	for (int i = 0; i < args->argc; i++)
		if (fuse_opt_add_arg(&copy, args->argv[i]))
			goto out;
	*se = fuse_session_new(&copy, &none, sizeof(none), NULL);
	if (!*se)
		goto out;
	if (fuse_session_mount(*se, mnt)) {
		fuse_session_destroy(*se);
		*se = NULL;
		goto out;
	}
	fd = fuse_session_fd(*se);
out:
	fuse_opt_free_args(&copy);
	return fd;
}

/* Whether buf (n bytes) is one whole INIT request. */
static int is_init(const unsigned char *buf, ssize_t n)
{
	const struct fuse_in_header *h = (const struct fuse_in_header *)buf;
	return n >= (ssize_t)sizeof(*h) && h->opcode == FUSE_INIT && h->len == (uint32_t)n;
}

/* Reads the kernel's first request, which must be INIT, into w. 0 or -1. */
static int read_init(int fd, struct fs_worker *w)
{
	/* a read from /dev/fuse needs room for the largest request */
	size_t room = (1u << 20) + 4096;
	unsigned char *buf = malloc(room);
	ssize_t n;
	if (!buf)
		return -1;
	do
		n = read(fd, buf, room);
	while (n < 0 && errno == EINTR);
	if (!is_init(buf, n)) {
		px_error("keeper", "the kernel's first request is not INIT (%zd bytes: %s)", n,
			 n < 0 ? strerror(errno) : "another request");
		free(buf);
		return -1;
	}
	w->init = buf;
	w->init_len = (size_t)n;
	return 0;
}

/* Whether the first worker found that the kernel resends (its probe):
 * 1, 0, or -1 not said yet (wait: only when it is known to be there). */
static int resend_works(int probe, int wait)
{
	struct pollfd p = { .fd = probe, .events = POLLIN };
	char c = 0;
	if (g_resend >= 0 || probe < 0)
		return g_resend;
	if (!wait && poll(&p, 1, 0) != 1)
		return -1;
	g_resend = read(probe, &c, 1) == 1 && c == 'R';
	return g_resend;
}

/* Leaves the terminal: a daemon's keeper keeps no terminal open. */
static void detach(void)
{
	int devnull = open("/dev/null", O_RDWR);
	if (devnull < 0)
		return;
	dup2(devnull, STDIN_FILENO);
	dup2(devnull, STDOUT_FILENO);
	dup2(devnull, STDERR_FILENO);
	if (devnull > 2)
		close(devnull);
}

/* In a new worker: signals back to their defaults, and its end tied to the
 * keeper's (a keeper gone is a mount gone). 0, or -1 when the keeper died
 * already. */
static int become_worker(pid_t keeper)
{
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != keeper)
		return -1;
	return 0;
}

/* Waits for worker pid; its wait status. Signals are forwarded meanwhile;
 * an upgrade asked for ends the worker (*upgrade set) when the kernel can
 * resend what it holds. */
static int wait_worker(pid_t pid, int probe, int *upgrade)
{
	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return 0;
		if (!g_upgrade_asked || g_stopping)
			continue;
		g_upgrade_asked = 0;
		if (resend_works(probe, 0) == 1 && g_init_fd >= 0) {
			px_info("keeper", "upgrade: ending worker pid %ld; the next one starts "
				"from %s", (long)pid, g_exe);
			*upgrade = 1;
			kill(pid, SIGKILL);
		} else {
			px_warn("keeper", "upgrade not done: the kernel cannot resend a worker's "
				"requests (FUSE_NOTIFY_RESEND, Linux 6.9+), or has not said yet");
		}
	}
	return status;
}

/*
 * Ends what a dead worker left: its writers and probes came to the keeper
 * (a subreaper) when it died. They can do nothing useful (their input was
 * fed by the dead worker), and the next worker takes their transcodes over
 * at once only when their pids are gone (a lease whose daemon and writer
 * are dead is orphaned at once), so they are killed and reaped here.
 */
static void reap_orphans(void)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)getpid(),
		 (long)getpid());
	for (int round = 0; round < 8; round++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			return;
		buf[n] = '\0';
		for (char *save, *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
			pid_t pid = (pid_t)strtol(t, NULL, 10);
			if (pid > 0 && kill(pid, SIGKILL) == 0)
				px_info("keeper", "ended pid %ld, left by the dead worker", (long)pid);
			while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
	}
}

/* Sleeps ms (a crash loop's back-off), unless a stop comes first. */
static void back_off(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (!g_stopping && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* How a worker's wait status reads in the log and status. */
static void describe(int status, char *out, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
}

/* In a new worker's process: becomes the binary on disk (an upgrade),
 * handed the connection and the saved INIT through the environment (read
 * by fs_keeper_worker). Returns only when it cannot. */
static void exec_worker(const struct fs_worker *w, const struct fs_keeper_opts *o)
{
	char env[256];
	/* the connection and the INIT copy survive the exec */
	if (fcntl(w->fd, F_SETFD, 0) != 0 || fcntl(g_init_fd, F_SETFD, 0) != 0)
		return;
	snprintf(env, sizeof(env), "fd=%d,init=%d,len=%zu,gen=%u,keeper=%ld,at=%lld,detached=%d,"
		 "base=%u", w->fd, g_init_fd, w->init_len, w->gen, (long)w->keeper,
		 (long long)w->restarted_ms, o->detach, w->fh_base);
	/* the manager hears from the worker as from the first (the keeper
	 * unset NOTIFY_SOCKET when it read it) */
	if (setenv(FS_WORKER_ENV, env, 1) != 0 || setenv(FS_WORKER_ENV "_CAUSE", w->cause, 1) != 0 ||
	    setenv(FS_WORKER_ENV "_MNT", w->mnt, 1) != 0 || fs_notify_export(o->notify) != 0)
		return;
	execv(g_exe, o->argv);
	px_error("keeper", "cannot start %s: %s", g_exe, strerror(errno));
}

/* How the last worker's end decides the next: 1 start another (how: *exec),
 * 0 stop the keeper with *code. */
static int next_worker(struct fs_worker *w, const struct fs_keeper_opts *o, int status,
		       int upgrade, int was_exec, int64_t lived, int *quick, int *exec, int *code)
{
	if (g_stopping) {
		*code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
		return 0;
	}
	if (upgrade) {
		*exec = 1;
		snprintf(w->cause, sizeof(w->cause), "ended for an upgrade");
		return 1;
	}
	if (was_exec && lived < QUICK_MS) {
		/* the binary on disk did not come up: this one's code serves */
		px_error("keeper", "the worker started from %s %s after %lld ms: serving with "
			 "the running version's code again", g_exe, w->cause, (long long)lived);
		*exec = 0;
		return 1;
	}
	if (!WIFSIGNALED(status)) {
		*code = WEXITSTATUS(status);
		return 0;
	}
	if (g_resend != 1) {
		px_error("keeper", "worker %s; this kernel cannot resend what it held "
			 "(FUSE_NOTIFY_RESEND, Linux 6.9+): unmounting", w->cause);
		*code = o->fail_code;
		return 0;
	}
	*quick = lived < QUICK_MS ? *quick + 1 : 0;
	if (*quick >= QUICK_MAX) {
		px_error("keeper", "worker %s, the %dth time within %d s of its start: giving up, "
			 "unmounting", w->cause, *quick, QUICK_MS / 1000);
		*code = o->fail_code;
		return 0;
	}
	px_warn("keeper", "worker %s; starting another on the same mount", w->cause);
	if (*quick)
		back_off(100LL << (*quick - 1));
	if (g_stopping) {
		*code = 0; /* a stop asked for during the back-off */
		return 0;
	}
	return 1;
}

/*
 * The keeper's loop: forks a worker (returns 1 in it), waits, and starts
 * another after a death by signal or for an upgrade. Returns 0 in the
 * keeper when it is to unmount and exit with *code.
 */
static int run_workers(struct fs_worker *w, const struct fs_keeper_opts *o, int probe_rd,
		       int *code)
{
	int quick = 0, exec = 0, first = 1;
	for (;;) {
		int64_t started = px_now_ms();
		int was_exec = exec, upgrade = 0;
		pid_t keeper = getpid(), pid = fork();
		if (pid == 0) {
			if (become_worker(keeper) != 0)
				_exit(o->fail_code);
			if (!was_exec)
				return 1;
			exec_worker(w, o);
			_exit(127);
		}
		if (pid < 0) {
			px_error("keeper", "cannot start a worker: %s", strerror(errno));
			*code = o->fail_code;
			return 0;
		}
		g_worker = pid;
		if (first) {
			first = 0;
			if (*o->report_fd >= 0)
				close(*o->report_fd); /* the worker says when it serves */
			*o->report_fd = -1;
			if (o->detach)
				detach();
			close(w->probe_fd);
			w->probe_fd = -1;
		}
		int status = wait_worker(pid, probe_rd, &upgrade);
		struct timespec noticed;
		clock_gettime(CLOCK_REALTIME, &noticed);
		g_worker = 0;
		reap_orphans();
		(void)resend_works(probe_rd, 1);
		char how[80];
		describe(status, how, sizeof(how));
		snprintf(w->cause, sizeof(w->cause), "pid %ld %s", (long)pid, how);
		if (!next_worker(w, o, status, upgrade, was_exec, px_now_ms() - started, &quick,
				 &exec, code))
			return 0;
		fs_notify_status(o->notify, "restarting: worker %s; readers wait for the next",
				 w->cause);
		w->gen++;
		w->restarted_ms = (int64_t)noticed.tv_sec * 1000 + noticed.tv_nsec / 1000000;
	}
}

/* The binary an upgrade starts, and a copy of the saved INIT it can read.
 * 0, or -1 (logged: then SIGUSR2 does nothing but say so). */
static int prepare_upgrades(const struct fs_worker *w)
{
	ssize_t n = readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1);
	if (n <= 0)
		return -1;
	g_exe[n] = '\0';
	if (g_init_fd >= 0)
		return 0; /* the one the manager kept */
	g_init_fd = memfd_create("seamfs-init", MFD_CLOEXEC);
	if (g_init_fd < 0 || write(g_init_fd, w->init, w->init_len) != (ssize_t)w->init_len) {
		px_warn("keeper", "upgrades will not work: cannot keep the INIT request: %s",
			strerror(errno));
		return -1;
	}
	return 0;
}

/* Puts the connection and the saved INIT into the manager's fd store
 * when it has room for both (room: $FDSTORE, FileDescriptorStoreMax=). */
static void store_conn(const struct fs_worker *w, const struct fs_notify *n, long room)
{
	if (n->fd < 0 || room <= 0)
		return;
	if (room < 2 || g_init_fd < 0) {
		px_warn("keeper", "the service manager's fd store %s: the mount ends with "
			"the keeper", room < 2 ? "takes fewer than 2 descriptors "
			"(FileDescriptorStoreMax=2)" : "gets no INIT copy");
		return;
	}
	if (fs_notify_send_fds(n, "FDSTORE=1\nFDNAME=" FS_STORE_CONN, &w->fd, 1) != 0 ||
	    fs_notify_send_fds(n, "FDSTORE=1\nFDNAME=" FS_STORE_INIT, &g_init_fd, 1) != 0) {
		px_warn("keeper", "cannot store the connection with the service manager: %s",
			strerror(errno));
		return;
	}
	g_in_store = 1;
	px_info("keeper", "the connection is in the service manager's fd store: a keeper "
		"started after this one serves this mount again");
}

/* Has the manager close its copies of both. */
static void remove_stored(const struct fs_notify *n)
{
	fs_notify_send(n, "FDSTOREREMOVE=1\nFDNAME=" FS_STORE_CONN);
	fs_notify_send(n, "FDSTOREREMOVE=1\nFDNAME=" FS_STORE_INIT);
}

/* Takes over a connection the manager kept: its first worker serves it
 * as after a restart (INIT to a stand-in, then a resend). */
static void resume(struct fs_stored *s, struct fs_worker *w)
{
	w->fd = s->fd;
	w->init = s->init;
	w->init_len = s->init_len;
	g_init_fd = s->init_fd;
	s->fd = s->init_fd = -1;
	s->init = NULL;
	w->gen = 1;
	/* file handles opened under the keepers before mean nothing to this
	 * one's workers, which must not make the same ids: a base from the
	 * clock, one second's apart for 255 restarts (handles.c: 24 bits) */
	w->fh_base = (unsigned)((px_now_ms() / 1000) % 0xfffe + 1) << 8;
	w->restarted_ms = px_now_ms();
	snprintf(w->cause, sizeof(w->cause), "ended with its keeper");
	g_in_store = 1;
	px_info("keeper", "serving %s again on the connection the service manager kept", w->mnt);
}

/* Unmounts a resumed connection (no libfuse session of ours mounted it),
 * as libfuse does: nothing when it has ended already. */
static void unmount_kept(const char *mnt, int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };
	int ended = poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
	close(fd);
	if (ended || umount2(mnt, MNT_DETACH) == 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-q", "-z", "--", mnt, (char *)NULL);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int fs_keeper_stored(struct fs_stored *s)
{
	const char *pid = getenv("LISTEN_PID"), *nfds = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	char copy[512];
	long n = nfds ? strtol(nfds, NULL, 10) : 0;
	int ours = pid && strtol(pid, NULL, 10) == (long)getpid();

	memset(s, 0, sizeof(*s));
	s->fd = s->init_fd = -1;
	snprintf(copy, sizeof(copy), "%s", names ? names : "");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (!ours || n <= 0 || n > 64)
		return 0;
	char *save = NULL, *name = strtok_r(copy, ":", &save);
	for (int fd = 3; fd < 3 + n; fd++, name = name ? strtok_r(NULL, ":", &save) : NULL) {
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		if (name && strcmp(name, FS_STORE_CONN) == 0 && s->fd < 0)
			s->fd = fd;
		else if (name && strcmp(name, FS_STORE_INIT) == 0 && s->init_fd < 0)
			s->init_fd = fd;
		else
			close(fd); /* not the keeper's */
	}
	if (s->fd < 0 && s->init_fd < 0)
		return 0;
	/* the connection: /dev/fuse (10:229), not ended (POLLERR) */
	struct stat sb;
	struct pollfd p = { .fd = s->fd, .events = 0 };
	const char *why = NULL;
	if (s->fd < 0 || s->init_fd < 0)
		why = "only one of the connection and its INIT";
	else if (fstat(s->fd, &sb) != 0 || !S_ISCHR(sb.st_mode) || major(sb.st_rdev) != 10 ||
		 minor(sb.st_rdev) != 229)
		why = "a descriptor that is not /dev/fuse";
	else if (poll(&p, 1, 0) < 0 || (p.revents & (POLLERR | POLLHUP)))
		why = "a connection that has ended";
	else if (fstat(s->init_fd, &sb) != 0 || sb.st_size <= 0 || sb.st_size > (1 << 20) ||
		 !(s->init = malloc((size_t)sb.st_size)) ||
		 !is_init(s->init, pread(s->init_fd, s->init, (size_t)sb.st_size, 0)))
		why = "an INIT copy that is not one";
	if (why) {
		px_warn("keeper", "the service manager kept %s: not served again", why);
		return -1;
	}
	s->init_len = (size_t)sb.st_size;
	return 1;
}

void fs_keeper_forget_stored(struct fs_stored *s, const struct fs_notify *n)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->init_fd >= 0)
		close(s->init_fd);
	free(s->init);
	s->init = NULL;
	s->fd = s->init_fd = -1;
	remove_stored(n);
}

int fs_keeper_run(struct fuse_args *args, const char *mnt, const struct fs_keeper_opts *o,
		  struct fs_worker *w)
{
	struct fuse_session *se = NULL;
	int probe[2] = { -1, -1 }, code = o->fail_code;
	/* the room in the manager's fd store (systemd 254+ says; the unit
	 * says for older ones); not for the workers' children */
	const char *room = getenv("FDSTORE");
	long store_room = room ? strtol(room, NULL, 10) : 0;
	unsetenv("FDSTORE");

	memset(w, 0, sizeof(*w));
	w->probe_fd = -1;
	snprintf(w->mnt, sizeof(w->mnt), "%s", mnt);
	/* a dead worker's writers come here, to be ended (reap_orphans) */
	if (pipe2(probe, O_CLOEXEC) != 0 || handle_signals() != 0 ||
	    prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		px_error("keeper", "cannot set up: %s", strerror(errno));
		goto fail;
	}
	if (o->stored && o->stored->fd >= 0) {
		resume(o->stored, w);
	} else {
		if ((w->fd = mount_conn(args, mnt, &se)) < 0) {
			px_error("keeper", "cannot mount on %s", mnt);
			goto fail;
		}
		if (read_init(w->fd, w) != 0) {
			fuse_session_unmount(se);
			fuse_session_destroy(se);
			goto fail;
		}
	}
	w->keeper = getpid();
	w->probe_fd = probe[1];
	g_keeper_se = se;
	(void)prepare_upgrades(w);
	if (se)
		store_conn(w, o->notify, store_room);
	if (run_workers(w, o, probe[0], &code)) {
		close(probe[0]);
		return 0; /* a worker */
	}
	px_info("keeper", "unmounting %s (last worker %s)", mnt, w->cause);
	/* a stop ends the mount: the manager's copy must not keep it */
	if (g_in_store)
		remove_stored(o->notify);
	if (se) {
		fuse_session_unmount(se);
		fuse_session_destroy(se);
	} else {
		unmount_kept(mnt, w->fd);
	}
	exit(code);
fail:
	if (probe[0] >= 0) {
		close(probe[0]);
		close(probe[1]);
	}
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	return -1;
}

int fs_keeper_worker(struct fs_worker *w, int *detached)
{
	const char *env = getenv(FS_WORKER_ENV), *cause = getenv(FS_WORKER_ENV "_CAUSE");
	const char *mnt = getenv(FS_WORKER_ENV "_MNT");
	int fd, init, det;
	size_t len;
	unsigned gen, base = 0;
	long keeper;
	long long at;

	if (!env)
		return 0;
	memset(w, 0, sizeof(*w));
	w->fd = w->probe_fd = -1;
	/* base= is newer: a keeper before it hands over without */
	if (sscanf(env, "fd=%d,init=%d,len=%zu,gen=%u,keeper=%ld,at=%lld,detached=%d,base=%u", &fd,
		   &init, &len, &gen, &keeper, &at, &det, &base) < 7 || fd < 0 || init < 0 ||
	    len == 0 ||
	    !mnt || mnt[0] != '/' || strlen(mnt) >= sizeof(w->mnt) ||
	    len > (1u << 20) + 4096 || !(w->init = malloc(len)) ||
	    pread(init, w->init, len, 0) != (ssize_t)len) {
		px_error("keeper", "%s=%s: not a hand-over this seamfs can take", FS_WORKER_ENV, env);
		free(w->init);
		w->init = NULL;
		return -1;
	}
	close(init);
	w->fd = fd;
	w->init_len = len;
	w->gen = gen;
	w->fh_base = base;
	w->keeper = (pid_t)keeper;
	w->restarted_ms = at;
	snprintf(w->cause, sizeof(w->cause), "%s", cause ? cause : "");
	snprintf(w->mnt, sizeof(w->mnt), "%s", mnt);
	*detached = det;
	unsetenv(FS_WORKER_ENV);
	unsetenv(FS_WORKER_ENV "_CAUSE");
	unsetenv(FS_WORKER_ENV "_MNT");
	/* its end is tied to the keeper's, as a forked worker's is */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != w->keeper)
		return -1;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	return 1;
}

/* Tells the kernel to send again what a dead worker had read (and, in the
 * first worker, whether it can: that tells the keeper). */
static int ask_resend(int fd, struct fs_worker *w)
{
	struct fuse_out_header h = { .len = sizeof(h), .error = FUSE_NOTIFY_RESEND, .unique = 0 };
	ssize_t n = write(fd, &h, sizeof(h));
	int ok = n == (ssize_t)sizeof(h);
	w->resend = ok;
	if (w->probe_fd >= 0) {
		if (write(w->probe_fd, ok ? "R" : "N", 1) != 1)
			ok = 0;
		close(w->probe_fd);
		w->probe_fd = -1;
	}
	if (!ok)
		px_log(w->gen ? PX_LOG_ERROR : PX_LOG_WARN, "keeper",
		       "the kernel does not resend a dead worker's requests (%s)%s",
		       n < 0 ? strerror(errno) : "short write",
		       w->gen ? "" : ": a worker that dies ends the mount");
	return ok ? 0 : -1;
}

int fs_keeper_attach(struct fuse_session *se, struct fs_worker *w)
{
	int sp[2] = { -1, -1 }, k = w->fd, rc = -1;
	char dev[32];

	/* a later worker answers INIT to a stand-in: the kernel keeps what
	 * the first reply negotiated */
	if (w->gen > 0) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
			px_error("keeper", "cannot make a stand-in descriptor: %s", strerror(errno));
			return -1;
		}
		k = sp[0];
	}
	snprintf(dev, sizeof(dev), "/dev/fd/%d", k);
	if (fuse_session_mount(se, dev) != 0)
		goto out;
	struct fuse_buf b = { .size = w->init_len, .mem = w->init };
	fuse_session_process_buf(se, &b);
	if (w->gen > 0) {
		/* the connection takes the stand-in's number, which the
		 * session reads and writes from now on */
		if (dup2(w->fd, k) < 0) {
			px_error("keeper", "cannot put the connection in place: %s", strerror(errno));
			goto out;
		}
		close(w->fd);
		w->fd = k;
		sp[0] = -1;
	}
	rc = ask_resend(k, w) == 0 || w->gen == 0 ? 0 : -1;
	if (rc == 0 && w->gen > 0)
		px_info("keeper", "worker %u serves (after a worker %s)", w->gen, w->cause);
out:
	if (sp[1] >= 0)
		close(sp[1]);
	if (rc != 0 && sp[0] >= 0)
		close(sp[0]);
	return rc;
}
