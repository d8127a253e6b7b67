/*
 * main.c - the seamfs daemon: command line, start-up, mount, shutdown.
 *
 * Start-up order matters: options and the catalog are checked first (exit
 * 2 or 3 with one clear message); then, unless -f, the process forks before
 * any thread exists and the parent waits (bounded) for the child to report
 * that the mount is up, so `seamfs CATALOG MNT` and `mount -t fuse.seamfs`
 * return only once the files can be read, with the child's exit code on
 * failure. The child discovers sizes (bounded by probe_timeout) before it
 * mounts, so the first `ls` already shows every file.
 *
 * Under systemd (Type=notify: $NOTIFY_SOCKET is set) the daemon does not
 * fork, whatever -f says: the manager watches the PID it started, and
 * READY=1 (sent where the parent above would be released) is what tells it
 * the mount is up; stderr stays the log (the journal reads it).
 *
 * Everything that is quick to check is checked before anything slow (size
 * discovery): the options (a misspelled one is named, with the closest
 * known option), the log file, and the CATALOG/MOUNTPOINT pair.
 *
 * Exit codes: 0 clean stop, 1 runtime or mount failure, 2 bad command line
 * or option, 3 bad catalog.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "control.h"
#include "ctl.h"
#include "fetch.h"
#include "fs.h"
#include "handles.h"
#include "keeper.h"
#include "hash.h"
#include "hosts.h"
#include "import.h"
#include "mkcatalog.h"
#include "log.h"
#include "notify.h"
#include "reload.h"
#include "state.h"
#include "kvstore.h"
#include "peer.h"
#include "transcode.h"
#include "statedir.h"
#include "verify.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define EXIT_CATALOG 3

struct cmdline {
	char *catalog;
	char *mountpoint;
	int foreground;
	int debug;
	int single;
	int help;
	int version;
	char **core_opts;       /* "name=value" or "name", applied after settings */
	size_t ncore_opts;
	char **fuse_opts;       /* the -o options passed on to libfuse, checked early */
	size_t nfuse_opts;
	int bad;
};

enum { KEY_HELP, KEY_VERSION, KEY_FG, KEY_DEBUG, KEY_SINGLE, KEY_CORE, KEY_DISCARD };

static const struct fuse_opt opt_table[] = {
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FG),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("read_timeout=%s", KEY_CORE),
	FUSE_OPT_KEY("connect_timeout=%s", KEY_CORE),
	FUSE_OPT_KEY("probe_timeout=%s", KEY_CORE),
	FUSE_OPT_KEY("retries=%s", KEY_CORE),
	FUSE_OPT_KEY("state_dir=%s", KEY_CORE),
	FUSE_OPT_KEY("ca_file=%s", KEY_CORE),
	FUSE_OPT_KEY("strm_paths=%s", KEY_CORE),
	FUSE_OPT_KEY("insecure", KEY_CORE),
	FUSE_OPT_KEY("insecure=%s", KEY_CORE),
	FUSE_OPT_KEY("log_level=%s", KEY_CORE),
	FUSE_OPT_KEY("log_file=%s", KEY_CORE),
	FUSE_OPT_KEY("readahead_budget=%s", KEY_CORE),
	FUSE_OPT_KEY("readahead_seconds=%s", KEY_CORE),
	FUSE_OPT_KEY("head_size=%s", KEY_CORE),
	FUSE_OPT_KEY("tail_size=%s", KEY_CORE),
	FUSE_OPT_KEY("cache_size=%s", KEY_CORE),
	FUSE_OPT_KEY("cache_dir=%s", KEY_CORE),
	FUSE_OPT_KEY("cache_max_bytes=%s", KEY_CORE),
	FUSE_OPT_KEY("session_ttl=%s", KEY_CORE),
	FUSE_OPT_KEY("session_key=%s", KEY_CORE),
	FUSE_OPT_KEY("admission_timeout=%s", KEY_CORE),
	FUSE_OPT_KEY("liveness_ttl=%s", KEY_CORE),
	FUSE_OPT_KEY("liveness_interval=%s", KEY_CORE),
	FUSE_OPT_KEY("stall_timeout=%s", KEY_CORE),
	FUSE_OPT_KEY("standby_delay=%s", KEY_CORE),
	FUSE_OPT_KEY("max_standby=%s", KEY_CORE),
	FUSE_OPT_KEY("max_streams=%s", KEY_CORE),
	FUSE_OPT_KEY("work_dir=%s", KEY_CORE),
	FUSE_OPT_KEY("writer=%s", KEY_CORE),
	FUSE_OPT_KEY("heartbeat=%s", KEY_CORE),
	FUSE_OPT_KEY("orphan_after=%s", KEY_CORE),
	FUSE_OPT_KEY("seek_restart_segments=%s", KEY_CORE),
	FUSE_OPT_KEY("max_writers=%s", KEY_CORE),
	FUSE_OPT_KEY("tail_ahead", KEY_CORE),
	FUSE_OPT_KEY("tail_ahead=%s", KEY_CORE),
	FUSE_OPT_KEY("writer_max_speed=%s", KEY_CORE),
	FUSE_OPT_KEY("control_socket=%s", KEY_CORE),
	FUSE_OPT_KEY("store=%s", KEY_CORE),
	FUSE_OPT_KEY("store_password_file=%s", KEY_CORE),
	FUSE_OPT_KEY("host_id=%s", KEY_CORE),
	FUSE_OPT_KEY("cluster=%s", KEY_CORE),
	/* fstab and mount(8) options that mean nothing to a FUSE daemon */
	FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD),
	FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_DISCARD),
	FUSE_OPT_KEY("nouser", KEY_DISCARD),
	FUSE_OPT_KEY("users", KEY_DISCARD),
	FUSE_OPT_KEY("defaults", KEY_DISCARD),
	FUSE_OPT_KEY("rw", KEY_DISCARD),
	FUSE_OPT_KEY("ro", KEY_DISCARD),
	FUSE_OPT_END
};

/* Appends a copy of s to a growable array of strings; -1 when out of memory. */
static int push_str(char ***arr, size_t *n, const char *s)
{
	char **a = realloc(*arr, (*n + 1) * sizeof(*a));
	if (!a)
		return -1;
	*arr = a;
	if (!(a[*n] = strdup(s)))
		return -1;
	(*n)++;
	return 0;
}

/* Whether arg ("name" or "name=value") names one of px_config_options. */
static int is_core_opt(const char *arg)
{
	char name[64];
	size_t n = strcspn(arg, "=");
	if (n >= sizeof(name))
		return 0;
	memcpy(name, arg, n);
	name[n] = '\0';
	return px_config_known(name);
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct cmdline *cl = data;
	(void)outargs;

	/* an option of px_config_options that opt_table does not list yet
	 * is still seamfs's: the table of config.c is the one list */
	if (key == FUSE_OPT_KEY_OPT && is_core_opt(arg))
		key = KEY_CORE;
	switch (key) {
	case KEY_HELP: cl->help = 1; return 0;
	case KEY_VERSION: cl->version = 1; return 0;
	case KEY_FG: cl->foreground = 1; return 0;
	case KEY_DEBUG: cl->debug = cl->foreground = 1; return 1;
	case KEY_SINGLE: cl->single = 1; return 0;
	case KEY_DISCARD: return 0;
	case KEY_CORE:
		return push_str(&cl->core_opts, &cl->ncore_opts, arg) ? -1 : 0;
	case FUSE_OPT_KEY_NONOPT:
		if (!cl->catalog) {
			cl->catalog = strdup(arg);
			return 0;
		}
		if (!cl->mountpoint) {
			cl->mountpoint = strdup(arg);
			return 0;
		}
		fprintf(stderr, "seamfs: unexpected argument '%s'\n", arg);
		cl->bad = 1;
		return 0;
	case FUSE_OPT_KEY_OPT:
		if (strncmp(arg, "x-", 2) == 0 || strncmp(arg, "comment=", 8) == 0)
			return 0; /* systemd's and util-linux's fstab options */
		if (arg[0] == '-') {
			fprintf(stderr, "seamfs: unknown option '%s'\n", arg);
			cl->bad = 1;
			return 0;
		}
		/* a FUSE or kernel mount option: libfuse checks it, and
		 * check_fuse_opts() asks it before anything slow */
		return push_str(&cl->fuse_opts, &cl->nfuse_opts, arg) ? -1 : 1;
	}
	return 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seamfs [-f] [-o OPT[,OPT...]] CATALOG MOUNTPOINT\n"
		"       seamfs --help | --version\n"
		"       mount -t fuse.seamfs CATALOG MOUNTPOINT -o OPTS\n"
		"       seamfs verify [OPTIONS] CATALOG [ASSET-ID...]   (see seamfs verify --help)\n"
		"       seamfs ctl [--socket PATH] [--json] SUBCOMMAND  (see seamfs ctl --help)\n"
		"       seamfs catalog [OPTIONS] MIRROR...              (see seamfs catalog --help)\n"
		"\n"
		"Mounts the media assets listed in the JSON file CATALOG as plain, read-only\n"
		"files under MOUNTPOINT, streaming their bytes from their HTTP(S) or local sources.\n"
		"CATALOG may also be a directory of .strm files or an .m3u/.m3u8 playlist.\n"
		"\n"
		"general options:\n"
		"    -f                     stay in the foreground, log to stderr\n"
		"    -d, -o debug           foreground, and log every FUSE request\n"
		"    -s                     single-threaded FUSE loop\n"
		"    -h, --help             this help\n"
		"    -V, --version          versions of seamfs and its libraries\n"
		"\n"
		"seamfs options (also valid in the catalog's \"settings\"; -o wins):\n");
	for (const struct px_config_option *o = px_config_options; o->name; o++) {
		char left[64];
		snprintf(left, sizeof(left), "%s%s%s", o->name, o->arg ? "=" : "",
			 o->arg ? o->arg : "");
		fprintf(out, "    -o %-22s %s\n", left, o->help);
	}
	fprintf(out,
		"\n"
		"FUSE options: allow_other, default_permissions, max_read=N and the other\n"
		"options of libfuse. fstab-only options (auto, noauto, nofail, _netdev, user,\n"
		"users, defaults, x-*) are accepted and ignored. The mount is always read-only.\n"
		"\n"
		"exit status: 0 clean stop, 1 runtime or mount failure, 2 bad command line,\n"
		"3 bad catalog.\n");
}

/* The edit distance of two short names (SIZE_MAX when either is long). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64];
	if (la >= 64 || lb >= 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* Options of libfuse and mount(8) a user types most: for suggesting only
 * (libfuse decides what it accepts). */
static const char *const fuse_option_names[] = {
	"allow_other", "allow_root", "auto_unmount", "default_permissions", "max_read",
	"max_background", "congestion_threshold", "max_readahead", "fsname", "subtype",
	"debug", "nodev", "nosuid", "noexec", "noatime", "nofail", "noauto", "_netdev", NULL
};

/* The known option closest to the name in opt ("name" or "name=value"),
 * NULL when none is close enough to be a typo of it. */
static const char *closest_option(const char *opt)
{
	char name[64];
	size_t n = strcspn(opt, "="), best = SIZE_MAX;
	const char *found = NULL;
	if (n >= sizeof(name))
		return NULL;
	memcpy(name, opt, n);
	name[n] = '\0';
	for (const struct px_config_option *o = px_config_options; o->name; o++) {
		size_t d = edit_distance(name, o->name);
		if (d < best)
			best = d, found = o->name;
	}
	for (const char *const *f = fuse_option_names; *f; f++) {
		size_t d = edit_distance(name, *f);
		if (d < best)
			best = d, found = *f;
	}
	return best <= 1 + n / 4 ? found : NULL;
}

/* Appends head followed by value with ',' and '\' escaped (fuse_opt's
 * quoting) to args. */
static int add_quoted_arg(struct fuse_args *args, const char *head, const char *value)
{
	size_t n = strlen(head) + 2 * strlen(value) + 1;
	char *buf = malloc(n), *p;
	int rc;
	if (!buf)
		return -1;
	p = buf + sprintf(buf, "%s", head);
	for (const char *v = value; *v; v++) {
		if (*v == ',' || *v == '\\')
			*p++ = '\\';
		*p++ = *v;
	}
	*p = '\0';
	rc = fuse_opt_add_arg(args, buf);
	free(buf);
	return rc;
}

static void quiet_fuse_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
}

/* Whether libfuse accepts the -o option opt: a session is made with it
 * alone (nothing is mounted; libfuse's own complaint is kept quiet). */
static int fuse_accepts(const char *opt)
{
	struct fuse_args a = FUSE_ARGS_INIT(0, NULL);
	struct fuse_lowlevel_ops none;
	struct fuse_session *se = NULL;
	memset(&none, 0, sizeof(none));
	if (fuse_opt_add_arg(&a, "seamfs") == 0 && add_quoted_arg(&a, "-o", opt) == 0) {
		fuse_set_log_func(quiet_fuse_log);
		se = fuse_session_new(&a, &none, sizeof(none), NULL);
		fuse_set_log_func(NULL);
	}
	fuse_opt_free_args(&a);
	if (!se)
		return 0;
	fuse_session_destroy(se);
	return 1;
}

/*
 * Checks every -o option before anything slow: seamfs's own against
 * px_config_set (bad values), the rest against libfuse (unknown names),
 * so that `-o read_timout=20` fails at once, naming the option and the
 * closest known one, not after every source was probed. Returns 0 or -1
 * (the messages printed).
 */
static int check_options(const struct cmdline *cl)
{
	struct px_config scratch;
	char err[512];
	int bad = 0;

	px_config_init(&scratch);
	for (size_t i = 0; i < cl->ncore_opts; i++) {
		char *copy = strdup(cl->core_opts[i]);
		if (!copy) {
			bad = 1;
			break;
		}
		char *eq = strchr(copy, '=');
		if (eq)
			*eq++ = '\0';
		if (px_config_set(&scratch, copy, eq, err, sizeof(err)) != PX_OK) {
			fprintf(stderr, "seamfs: %s\n", err);
			bad = 1;
		}
		free(copy);
	}
	px_config_release(&scratch);
	for (size_t i = 0; i < cl->nfuse_opts; i++) {
		if (fuse_accepts(cl->fuse_opts[i]))
			continue;
		const char *near = closest_option(cl->fuse_opts[i]);
		size_t n = strcspn(cl->fuse_opts[i], "=");
		fprintf(stderr, "seamfs: unknown option '%.*s'%s%s%s (seamfs --help lists them)\n",
			(int)n, cl->fuse_opts[i], near ? "; did you mean '" : "", near ? near : "",
			near ? "'?" : "");
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* Whether the file at path looks like a catalog (a JSON object or a
 * playlist) rather than a mountpoint someone meant. */
static int looks_like_catalog(const char *path)
{
	const char *dot = strrchr(path, '.');
	if (dot && (strcasecmp(dot, ".json") == 0 || strcasecmp(dot, ".m3u") == 0 ||
		    strcasecmp(dot, ".m3u8") == 0))
		return 1;
	FILE *f = fopen(path, "re");
	int c = EOF;
	if (f) {
		do
			c = fgetc(f);
		while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
		fclose(f);
	}
	return c == '{' || c == '#';
}

/*
 * The usual mistakes with the two places, named before the catalog is
 * read: CATALOG and MOUNTPOINT swapped (a directory, then a catalog file),
 * or a mountpoint that is a file. Returns 0 or -1 (the message printed).
 * A mountpoint that cannot be stat()ed is left to the checks after (a
 * stale mount is cleared there).
 */
static int check_places(const char *catalog, const char *mountpoint)
{
	struct stat c, m;
	if (stat(mountpoint, &m) || S_ISDIR(m.st_mode))
		return 0;
	if (stat(catalog, &c) == 0 && S_ISDIR(c.st_mode) && S_ISREG(m.st_mode) &&
	    looks_like_catalog(mountpoint)) {
		fprintf(stderr, "seamfs: CATALOG and MOUNTPOINT look swapped: %s is a directory "
			"and %s a catalog file; the catalog comes first: seamfs [-o OPTS] %s %s\n",
			catalog, mountpoint, mountpoint, catalog);
		return -1;
	}
	fprintf(stderr, "seamfs: mountpoint %s is %s, not a directory; mount on an (empty) "
		"directory: seamfs [-o OPTS] CATALOG DIRECTORY\n", mountpoint,
		S_ISREG(m.st_mode) ? "a regular file" : "not a directory");
	return -1;
}

/* Where the daemon's log goes, for the start message. */
static void log_destination(const struct px_config *cfg, int foreground, char *buf, size_t n)
{
	if (cfg->log_file)
		snprintf(buf, n, "%s%s", cfg->log_file, foreground ? " and stderr" : "");
	else if (foreground)
		snprintf(buf, n, "stderr");
	else if (access("/dev/log", W_OK) == 0)
		snprintf(buf, n, "syslog, tag seamfs (journalctl -t seamfs)");
	else
		snprintf(buf, n, "syslog, but this host has no /dev/log: runtime messages will "
			 "be lost; add -o log_file=PATH");
}

/* seamfs --version: seamfs's and the running libraries' versions, and the
 * writer's (the only program that links FFmpeg), asked with a bound. */
static void print_version(const struct px_config *cfg)
{
	char curl[128], self[PATH_MAX], writer[PATH_MAX + 32];
	int maj = fuse_version() / 100, min = fuse_version() % 100;

	px_fetch_version(curl, sizeof(curl));
	printf("seamfs %s\n", SEAMFS_VERSION);
	printf("libfuse %s (API %d.%d)\n", fuse_pkgversion(), maj, min);
	printf("libcurl %s\n", curl);
	printf("%s\n", vf_hash_library_version());
	printf("jansson %s\n", jansson_version_str());
	printf("libmicrohttpd %s\n", px_control_library_version());
	fflush(stdout);
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (cfg->writer) {
		snprintf(writer, sizeof(writer), "%s", cfg->writer);
	} else if (k > 0) {
		self[k] = '\0';
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		snprintf(writer, sizeof(writer), "%s/seamfs-writer", self);
	} else {
		snprintf(writer, sizeof(writer), "seamfs-writer");
	}
	char out[1024];
	size_t len = 0;
	int pfd[2], status = -1;
	pid_t pid = -1;
	if (pipe2(pfd, O_CLOEXEC) == 0) {
		pid = fork();
		if (pid == 0) {
			dup2(pfd[1], STDOUT_FILENO);
			execl(writer, writer, "--version", (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		/* bounded: 5 s for the writer to answer */
		for (int waited = 0; pid > 0 && waited < 5000 && len < sizeof(out) - 1;) {
			struct pollfd p = { pfd[0], POLLIN, 0 };
			if (poll(&p, 1, 100) == 0) {
				waited += 100;
				continue;
			}
			ssize_t r = read(pfd[0], out + len, sizeof(out) - 1 - len);
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		close(pfd[0]);
	}
	if (pid > 0) {
		if (waitpid(pid, &status, WNOHANG) != pid) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
	}
	out[len] = '\0';
	/* its first line repeats seamfs's version: only the libraries */
	const char *libs = strchr(out, '\n');
	if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && libs && libs[1])
		fputs(libs + 1, stdout);
	else
		printf("FFmpeg: unknown (%s --version failed; transcodes need that writer)\n",
		       writer);
}

/* Runs argv with a bounded wait; returns its exit status or -1. */
static int run_bounded(char *const argv[], int timeout_ms)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, STDIN_FILENO);
			dup2(devnull, STDOUT_FILENO);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	for (int waited = 0; waited < timeout_ms; waited += 20) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (r < 0)
			return -1;
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/*
 * A daemon that died without unmounting leaves its mountpoint answering
 * ENOTCONN ("Transport endpoint is not connected"). Detach that dead mount
 * so the new one can take its place.
 */
static int clear_stale_mount(const char *mnt)
{
	struct stat sb;
	struct statfs sf;
	/* stat may be answered from the kernel's attribute cache; statfs
	 * always asks the daemon, and a dead one's connection says ENOTCONN */
	if ((stat(mnt, &sb) == 0 || errno != ENOTCONN) &&
	    (statfs(mnt, &sf) == 0 || errno != ENOTCONN))
		return 0;
	px_warn("main", "%s is a stale mount (its daemon died); clearing it", mnt);
	if (geteuid() == 0 && umount2(mnt, MNT_DETACH) == 0)
		return 0;
	char *argv[] = { "fusermount3", "-u", "-z", (char *)mnt, NULL };
	if (run_bounded(argv, 10000) == 0)
		return 0;
	px_error("main", "could not clear the stale mount at %s; run: fusermount3 -uz %s",
		 mnt, mnt);
	return -1;
}

/* The absolute name of a mountpoint that realpath cannot resolve (a dead
 * mount answers ENOTCONN): the real path of its parent, then its own
 * name; as given when that fails too. */
static void canonical_dead(const char *given, char *out, size_t cap)
{
	char copy[PATH_MAX], parent[PATH_MAX];
	size_t n = strlen(given);
	snprintf(out, cap, "%s", given);
	if (n == 0 || n >= sizeof(copy))
		return;
	memcpy(copy, given, n + 1);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	char *slash = strrchr(copy, '/');
	const char *name = slash ? slash + 1 : copy;
	if (slash)
		*slash = '\0';
	if (!realpath(slash ? (copy[0] ? copy : "/") : ".", parent) || !*name)
		return;
	snprintf(out, cap, "%s/%s", strcmp(parent, "/") ? parent : "", name);
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape_mount_field(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/*
 * Whether a seamfs mount is at mnt in /proc/self/mountinfo. After
 * clear_stale_mount that is a live one: its daemon took no mount lock in
 * our state_dir (it uses another, or is an older seamfs), but it serves,
 * and a second daemon stacked on it would share its state. Read from
 * mountinfo, never by a stat() that would wait for that daemon.
 */
static int seamfs_mounted_at(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	int found = 0;
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char point[PATH_MAX], fstype[64];
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(sep + 3, "%63s", fstype) != 1)
			continue;
		unescape_mount_field(point);
		found = strcmp(point, mnt) == 0 && strcmp(fstype, "fuse.seamfs") == 0;
	}
	fclose(f);
	return found;
}

/*
 * The kernel reads ahead of a FUSE file only bdi read_ahead_kb (128 KiB by
 * default), whatever max_read allows; sequential throughput wants reads of
 * 1 MiB. The init reply can only lower it, so ops.c writes the mount's bdi
 * file once INIT is done. Here we find which bdi: the mount's device in
 * mountinfo (not by stat(), which would wait for this very daemon); and
 * the mount's id there (*mnt_id, left as it is when not found), by which
 * the status finds its clients' open files (px_proc_positions).
 */
static void find_bdi(const char *mnt, struct fs_ctx *ctx, int *mnt_id)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], dev[64] = "";
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char majmin[64], point[PATH_MAX];
		int id;
		if (sscanf(line, "%d %*s %63s %*s %4095s", &id, majmin, point) != 3)
			continue;
		unescape_mount_field(point);
		if (strcmp(point, mnt) == 0) {
			snprintf(dev, sizeof(dev), "%s", majmin);
			*mnt_id = id;
		}
	}
	fclose(f);
	if (dev[0])
		snprintf(ctx->bdi_readahead, sizeof(ctx->bdi_readahead),
			 "/sys/class/bdi/%s/read_ahead_kb", dev);
}

/* Appends "-o" + opts to args, escaping ',' and '\' in value. */
static int add_escaped_opt(struct fuse_args *args, const char *name, const char *value)
{
	char head[64];
	snprintf(head, sizeof(head), "-o%s=", name);
	return add_quoted_arg(args, head, value);
}

/* The last -o strm_paths=, or NULL: a .strm tree or playlist is screened
 * by it while imported, before the options are applied (a JSON catalog's
 * settings cannot set it for an import, which has none). */
static const char *strm_paths_option(const struct cmdline *cl)
{
	const char *v = NULL;
	for (size_t i = 0; i < cl->ncore_opts; i++)
		if (strncmp(cl->core_opts[i], "strm_paths=", 11) == 0)
			v = cl->core_opts[i] + 11;
	return v;
}

/* Checks the options of copies across hosts and reads the cluster's
 * secret (*secret, malloc'd; NULL without cluster_secret_file): they
 * need store=, and peer_listen needs the secret. */
static enum px_status peer_options(const struct px_config *cfg, char **secret, char *err,
				   size_t errlen)
{
	const char *lone = cfg->peer_listen ? "peer_listen" : cfg->peer_url ? "peer_url"
			   : cfg->cluster_secret_file ? "cluster_secret_file" : NULL;
	*secret = NULL;
	if (lone && !cfg->store) {
		snprintf(err, errlen, "option '%s' is for cluster mode: give store= too", lone);
		return PX_EINVAL;
	}
	if (cfg->peer_url && !cfg->peer_listen) {
		snprintf(err, errlen, "option 'peer_url' names how others reach peer_listen: "
			 "give peer_listen= too");
		return PX_EINVAL;
	}
	if (cfg->peer_listen && !cfg->peer_url &&
	    (strncmp(cfg->peer_listen, "0.0.0.0:", 8) == 0 ||
	     strncmp(cfg->peer_listen, "[::]:", 5) == 0 || strncmp(cfg->peer_listen, ":::", 3) == 0)) {
		snprintf(err, errlen, "option 'peer_listen' %s listens on every address: give "
			 "peer_url=http://HOST:PORT, the one the other hosts reach", cfg->peer_listen);
		return PX_EINVAL;
	}
	if (cfg->peer_listen && !cfg->cluster_secret_file) {
		snprintf(err, errlen, "option 'peer_listen' needs cluster_secret_file= (a copy is "
			 "served only to requests that carry the cluster's secret)");
		return PX_EINVAL;
	}
	if (!cfg->cluster_secret_file)
		return PX_OK;
	return px_secret_read(cfg->cluster_secret_file, "cluster_secret_file", secret, err,
			      errlen);
}

static enum px_status apply_options(struct px_config *cfg, const struct px_catalog *cat,
				    const struct cmdline *cl)
{
	char err[512];
	/* the catalog's settings were validated when it was parsed */
	for (size_t i = 0; i < cat->nsettings; i++)
		if (px_config_set(cfg, cat->setting_names[i], cat->setting_values[i], err,
				  sizeof(err)) != PX_OK)
			goto bad;
	for (size_t i = 0; i < cl->ncore_opts; i++) {
		char *copy = strdup(cl->core_opts[i]);
		if (!copy)
			return PX_ENOMEM;
		char *eq = strchr(copy, '=');
		if (eq)
			*eq++ = '\0';
		enum px_status st = px_config_set(cfg, copy, eq, err, sizeof(err));
		free(copy);
		if (st != PX_OK)
			goto bad;
	}
	return PX_OK;
bad:
	fprintf(stderr, "seamfs: %s\n", err);
	return PX_EINVAL;
}

/*
 * Stopping. libfuse's own handlers only flag the session as exited, and its
 * loop then waits for every worker; a worker waiting for bytes from a
 * stalled source would hold the stop up for read_timeout. So seamfs's
 * handler also wakes a stopper thread (through a pipe: async-signal-safe),
 * which ends every transfer in flight; the waiting reads fail at once.
 * These are the process's signal dispositions, hence process-wide here.
 */
static struct fuse_session *stop_session;
static int stop_pipe[2] = { -1, -1 };

static void on_stop_signal(int sig)
{
	int saved = errno;
	unsigned char c = (unsigned char)sig;
	/* SIGHUP reloads the catalog; the others stop */
	if (stop_session && sig != SIGHUP)
		fuse_session_exit(stop_session);
	ssize_t w = write(stop_pipe[1], &c, 1);
	(void)w;
	errno = saved;
}

/* What the stopper and reloader threads work with; main's, outlives
 * them. */
struct stopper_ctx {
	struct px_core *core;
	const struct fs_notify *notify;
	/* SIGHUP's reloads run on a thread of their own: a catalog on a hung
	 * file system may hold a reload for its whole bound, and the stopper
	 * must be free to stop the daemon meanwhile (px_core_stop() also makes
	 * the reload give up) */
	pthread_t reloader;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int pending, quit;           /* under lock */
};

static void *reloader_main(void *arg)
{
	struct stopper_ctx *sc = arg;
	char report[1024];
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&sc->lock);
	for (;;) {
		while (!sc->pending && !sc->quit)
			pthread_cond_wait(&sc->cond, &sc->lock);
		if (sc->quit)
			break;
		sc->pending = 0;   /* SIGHUPs meanwhile: one more reload after this */
		pthread_mutex_unlock(&sc->lock);
		px_info("main", "SIGHUP: reading the catalog again");
		/* on failure the old catalog stays; the core logged why */
		if (px_reload_file(sc->core, report, sizeof(report)) != PX_OK) {
			px_debug("main", "reload refused");
			fs_notify_status(sc->notify, "reload refused (old catalog kept): "
					 "%zu assets listed", px_core_listed(sc->core));
		} else {
			fs_notify_status(sc->notify, "catalog reloaded: %zu assets listed",
					 px_core_listed(sc->core));
		}
		pthread_mutex_lock(&sc->lock);
	}
	pthread_mutex_unlock(&sc->lock);
	return NULL;
}

static void *stopper_main(void *arg)
{
	struct stopper_ctx *sc = arg;
	struct px_core *core = sc->core;
	unsigned char c = 0;
	ssize_t n;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		do
			n = read(stop_pipe[0], &c, 1);
		while (n < 0 && errno == EINTR);
		if (n == 1 && c == SIGHUP) {
			/* logrotate's postrotate sends SIGHUP too: a new log file */
			if (px_log_reopen() != PX_OK)
				px_error("main", "cannot reopen the log file %s: %s; still writing "
					 "the old one", px_log_file(), strerror(errno));
			pthread_mutex_lock(&sc->lock);
			sc->pending = 1;
			pthread_cond_signal(&sc->cond);
			pthread_mutex_unlock(&sc->lock);
			continue;
		}
		if (n == 1 && c != 0) {
			px_info("main", "stopping on signal %d: ending the transfers in flight", c);
			fs_notify_send(sc->notify, "STOPPING=1\nSTATUS=stopping: unmounting");
			px_core_stop(core);
		}
		return NULL;
	}
}

/* Ends the reloader thread, after the reload it is in. */
static void end_reloader(struct stopper_ctx *sc)
{
	pthread_mutex_lock(&sc->lock);
	sc->quit = 1;
	pthread_cond_signal(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
	pthread_join(sc->reloader, NULL);
	pthread_mutex_destroy(&sc->lock);
	pthread_cond_destroy(&sc->cond);
}

/* Installs on_stop_signal for SIGTERM, SIGINT and SIGHUP and starts the
 * stopper thread and the reloader thread (the catalog on SIGHUP). Returns
 * 0 on success. */
static int start_stopper(struct fuse_session *se, struct stopper_ctx *sc, pthread_t *thread)
{
	struct sigaction sa;
	if (pipe2(stop_pipe, O_CLOEXEC))
		return -1;
	pthread_mutex_init(&sc->lock, NULL);
	pthread_cond_init(&sc->cond, NULL);
	if (pthread_create(&sc->reloader, NULL, reloader_main, sc)) {
		close(stop_pipe[0]);
		close(stop_pipe[1]);
		stop_pipe[0] = stop_pipe[1] = -1;
		return -1;
	}
	if (pthread_create(thread, NULL, stopper_main, sc)) {
		end_reloader(sc);
		close(stop_pipe[0]);
		close(stop_pipe[1]);
		stop_pipe[0] = stop_pipe[1] = -1;
		return -1;
	}
	stop_session = se;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	return 0;
}

static void end_stopper(struct stopper_ctx *sc, pthread_t thread)
{
	struct sigaction sa;
	unsigned char zero = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	stop_session = NULL;
	/* a zero byte: the loop has ended by itself, nothing to stop */
	ssize_t w = write(stop_pipe[1], &zero, 1);
	(void)w;
	pthread_join(thread, NULL);
	/* a reload in flight gives up once the core stops (bounded else) */
	end_reloader(sc);
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	stop_pipe[0] = stop_pipe[1] = -1;
}

/* Daemon mode: the parent waits for one status byte from the child, and
 * says where the mount is and where its log goes; with a log file (quiet)
 * it says nothing when the mount is up, only that it is not, and where
 * the log says why. */
static int daemonize_wait(int *report_fd, int64_t bound_ms, const char *mnt, const char *where,
			  int quiet)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC)) {
		perror("seamfs: pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("seamfs: fork");
		return -1;
	}
	if (pid > 0) {
		unsigned char code = EXIT_RUNTIME;
		struct pollfd p = { pfd[0], POLLIN, 0 };
		close(pfd[1]);
		int r = poll(&p, 1, (int)bound_ms);
		if (r <= 0 || read(pfd[0], &code, 1) != 1) {
			if (r == 0)
				fprintf(stderr, "seamfs: the daemon did not report within %lld s\n",
					(long long)(bound_ms / 1000));
			code = EXIT_RUNTIME;
		}
		if (code == 0) {
			if (!quiet)
				fprintf(stderr, "seamfs: mounted on %s (daemon pid %ld); log: %s\n",
					mnt, (long)pid, where);
		} else {
			fprintf(stderr, "seamfs: not mounted (exit %d); the daemon's log: %s\n", code,
				where);
		}
		_exit(code);
	}
	close(pfd[0]);
	setsid();
	*report_fd = pfd[1];
	return 0;
}

static void report(int *fd, unsigned char code)
{
	if (*fd < 0)
		return;
	ssize_t w = write(*fd, &code, 1);
	(void)w;
	close(*fd);
	*fd = -1;
}

/* What status and metrics say of this process (keeper.h): set once it is
 * on the connection, before it serves; the pause is from the keeper's
 * notice of the last worker's end to now. */
static void set_worker_info(struct px_core *core, const struct fs_worker *w, int mnt_id)
{
	struct px_worker_info wi = { .pid = (long)getpid(), .keeper_pid = (long)w->keeper,
				     .resend = w->resend, .restarts = w->gen,
				     .last_at_ms = w->restarted_ms, .mnt_id = mnt_id };
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (w->restarted_ms)
		wi.last_pause_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 -
				   w->restarted_ms;
	snprintf(wi.last_end, sizeof(wi.last_end), "%s", w->cause);
	px_core_set_worker(core, &wi);
}

/* Everything the daemon's start-up builds and its teardown frees: main's,
 * passed to each step by pointer. The steps run in order; each returns 0
 * to go on, or -1 to stop with rc (EXIT_RUNTIME unless it says other). */
struct daemon {
	char **argv;
	struct fuse_args args;
	struct cmdline cl;
	struct px_config cfg;
	struct px_catalog *cat;
	struct px_core *core;
	struct px_state *state;
	struct px_control *control;
	struct px_peer *peer;
	char *peer_secret;       /* the cluster's secret, until the core has it */
	struct px_store *store;
	struct px_hosts *hosts;
	struct fuse_session *se;
	struct fuse_loop_config *loop;
	struct fs_ctx ctx;
	char *catalog_abs;
	char mnt[PATH_MAX];
	char log_where[256];
	int64_t catalog_mtime;
	int rc, report_fd, mounted, handlers, fetch_init, stopper, mount_lock, keeper;
	int exec_worker, detached, managed;
	struct fs_worker worker;
	struct fs_stored stored; /* a connection the service manager kept */
	pthread_t stopper_thread;
	struct fs_notify notify;
	struct stopper_ctx sc;
};

/* The command line: --help and --version end here (rc 0), a bad or
 * missing argument with EXIT_USAGE. */
static int read_command_line(struct daemon *d)
{
	struct cmdline *cl = &d->cl;
	char err[1024];
	int ret = -1;

	if (fuse_opt_parse(&d->args, cl, opt_table, opt_proc) == -1 || cl->bad) {
		usage(stderr);
		d->rc = EXIT_USAGE;
		goto out;
	}
	if (cl->help) {
		usage(stdout);
		d->rc = 0;
		goto out;
	}
	if (cl->version) {
		for (size_t i = 0; i < cl->ncore_opts; i++)
			if (strncmp(cl->core_opts[i], "writer=", 7) == 0 &&
			    px_config_set(&d->cfg, "writer", cl->core_opts[i] + 7, err, sizeof(err)))
				break;
		print_version(&d->cfg);
		d->rc = 0;
		goto out;
	}
	if (!cl->catalog || !cl->mountpoint) {
		fprintf(stderr, "seamfs: %s\n", !cl->catalog ? "missing CATALOG and MOUNTPOINT"
							     : "missing MOUNTPOINT");
		usage(stderr);
		d->rc = EXIT_USAGE;
		goto out;
	}
	/* a keeper's worker looks at the mount only once it serves it: a
	 * stat there would wait for itself; nobody serves a mount whose
	 * connection the service manager kept either */
	if (check_options(cl) || (!d->exec_worker && d->stored.fd < 0 &&
				  check_places(cl->catalog, cl->mountpoint))) {
		d->rc = EXIT_USAGE;
		goto out;
	}
	ret = 0;
out:
	return ret;
}

/* The catalog (EXIT_CATALOG if bad), the options over its settings, the
 * state dir, and the mountpoint's real path. */
static int read_catalog(struct daemon *d)
{
	char err[1024];
	int ret = -1;

	if (px_import_load(d->cl.catalog, strm_paths_option(&d->cl), &d->cat, err,
			   sizeof(err)) != PX_OK) {
		fprintf(stderr, "seamfs: %s\n", err);
		d->rc = EXIT_CATALOG;
		goto out;
	}
	if (apply_options(&d->cfg, d->cat, &d->cl) != PX_OK) {
		d->rc = EXIT_USAGE;
		goto out;
	}
	/* copies across hosts: a bad option or secret file fails here, before
	 * the fork, on the terminal */
	if (peer_options(&d->cfg, &d->peer_secret, err, sizeof(err)) != PX_OK) {
		fprintf(stderr, "seamfs: %s\n", err);
		d->rc = EXIT_USAGE;
		goto out;
	}
	if (!d->cfg.state_dir && !(d->cfg.state_dir = fs_default_state_dir()))
		goto out;
	if (d->exec_worker) {
		snprintf(d->mnt, sizeof(d->mnt), "%s", d->worker.mnt);
	} else if (d->stored.fd >= 0) {
		/* not resolved through the mount nobody serves */
		canonical_dead(d->cl.mountpoint, d->mnt, sizeof(d->mnt));
	} else if (!realpath(d->cl.mountpoint, d->mnt)) {
		/* a stale mount fails realpath with ENOTCONN: its parent's real
		 * path and its name, so that the mount lock and mountinfo see the
		 * same name as for a live mount */
		if (errno != ENOTCONN) {
			fprintf(stderr, "seamfs: mountpoint %s: %s\n", d->cl.mountpoint,
				strerror(errno));
			d->rc = EXIT_USAGE;
			goto out;
		}
		canonical_dead(d->cl.mountpoint, d->mnt, sizeof(d->mnt));
	}
	ret = 0;
out:
	return ret;
}

/* The log, and unless in the foreground the fork: from here on this is
 * the process that serves (the parent waits in daemonize_wait). */
static int detach(struct daemon *d)
{
	struct px_config *cfg = &d->cfg;
	int ret = -1;

	/* opened here, before the fork, so that a bad path fails at once; the
	 * daemon inherits it */
	if (cfg->log_file && px_log_open_file(cfg->log_file) != PX_OK) {
		fprintf(stderr, "seamfs: log_file %s: %s\n", cfg->log_file, strerror(errno));
		d->rc = EXIT_USAGE;
		goto out;
	}
	/* under systemd the daemon stays the process it started, and so
	 * does a keeper's worker */
	if (d->managed || d->exec_worker)
		d->cl.foreground = 1;
	log_destination(cfg, d->cl.foreground, d->log_where, sizeof(d->log_where));
	/* a daemon with a log file logs there and nowhere else, also before
	 * it detaches: the terminal hears only that a start failed */
	if (cfg->log_file && !d->cl.foreground)
		px_log_stderr_level(-1);
	if (!d->cl.foreground &&
	    daemonize_wait(&d->report_fd, cfg->probe_timeout_ms + cfg->connect_timeout_ms + 30000,
			   d->mnt, d->log_where, cfg->log_file != NULL))
		goto out;
	/* a detached daemon's worker logs where the daemon did */
	px_log_setup(cfg->log_level, d->exec_worker && d->detached);
	fs_notify_status(&d->notify, "discovering the sizes of %zu assets", d->cat->nassets);
	ret = 0;
out:
	return ret;
}

/* One daemon per mountpoint. Taken here, in the process that will serve
 * (after daemonize_wait's fork), and held until it exits; a dead daemon's
 * lock went with it, and its dead mount is cleared. A keeper's worker
 * skips this: the keeper holds the lock and the mount. */
static int claim_mountpoint(struct daemon *d)
{
	char err[1024];
	long holder = 0;
	struct stat sb = { .st_mode = S_IFDIR };
	int ret = -1;

	switch (d->exec_worker ? PX_OK :
		px_state_lock_mount(d->cfg.state_dir, d->mnt, &d->mount_lock, &holder, err,
				    sizeof(err))) {
	case PX_OK:
		break;
	case PX_EBUSY:
		if (holder > 0)
			px_error("main", "%s is already mounted (or being mounted) by seamfs pid %ld; "
				 "not mounting it again (unmount it first: fusermount3 -u %s)", d->mnt,
				 holder, d->mnt);
		else
			px_error("main", "%s is being mounted by another seamfs (%s); not mounting it "
				 "again", d->mnt, err);
		goto out;
	default:
		px_warn("main", "%s; only /proc/self/mountinfo guards against a second daemon",
			err);
		break;
	}
	/* a kept connection is served again when its mount is still here
	 * (mountinfo: a stat would wait for the worker to come); else it is
	 * given up, which ends it, and the mountpoint is mounted anew */
	if (d->stored.fd >= 0 && !(d->cfg.keeper && seamfs_mounted_at(d->mnt))) {
		px_warn("main", "the connection the service manager kept is not %s: giving it up",
			d->cfg.keeper ? "a seamfs mount on this mountpoint" : "served without keeper");
		fs_keeper_forget_stored(&d->stored, &d->notify);
	}
	if (d->stored.fd >= 0) {
		ret = 0;
		goto out;
	}
	if (!d->exec_worker && clear_stale_mount(d->mnt))
		goto out;
	if (!d->exec_worker && seamfs_mounted_at(d->mnt)) {
		px_error("main", "%s is already a live seamfs mount, served by a daemon that "
			 "holds no lock in state_dir %s (another state_dir, or an older seamfs); "
			 "not mounting it again (unmount it first: fusermount3 -u %s)", d->mnt,
			 d->cfg.state_dir, d->mnt);
		goto out;
	}
	if (!d->exec_worker && stat(d->mnt, &sb)) {
		px_error("main", "mountpoint %s: %s", d->mnt, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(sb.st_mode)) {
		px_error("main", "mountpoint %s is not a directory", d->mnt);
		goto out;
	}
	ret = 0;
out:
	return ret;
}

/* The transcode work dir, libfuse's options, and with keeper=1 the
 * keeper: from here on this is a worker, forked by the process that
 * mounted and holds the connection (before any thread: keeper.h). */
static int start_keeper(struct daemon *d)
{
	char err[1024];
	int ret = -1;

	/* a work_dir seamfs did not make is refused before anything is
	 * mounted or removed (transcode.h) */
	if (px_transcode_prepare_work(&d->cfg, d->cat, err, sizeof(err)) != PX_OK) {
		px_error("main", "%s", err);
		goto out;
	}
	if (fuse_opt_add_arg(&d->args, "-oro") || fuse_opt_add_arg(&d->args, "-osubtype=seamfs") ||
	    add_escaped_opt(&d->args, "fsname", d->cl.catalog))
		goto out;
	if (d->exec_worker) {
		d->keeper = 1;
	} else if (d->cfg.keeper) {
		struct fs_keeper_opts ko = { .report_fd = &d->report_fd,
					     .detach = d->report_fd >= 0,
					     .fail_code = EXIT_RUNTIME, .argv = d->argv,
					     .notify = &d->notify, .stored = &d->stored };
		if (fs_keeper_run(&d->args, d->mnt, &ko, &d->worker) != 0)
			goto out;
		d->keeper = 1;
		/* the lock is the keeper's (its pid is in it): a worker's copy
		 * would keep the mountpoint locked after the keeper's end for
		 * as long as the worker took to die */
		px_state_unlock_mount(d->mount_lock);
		d->mount_lock = -1;
	}
	ret = 0;
out:
	return ret;
}

/* Cluster mode: the store must answer at mount (it says whether this
 * host_id is taken); later it may go away, and the mount goes on degraded
 * (docs/cluster.md). */
static int join_cluster(struct daemon *d)
{
	struct px_config *cfg = &d->cfg;
	char err[1024], hid[PX_HOST_ID_MAX + 1];
	int ret = -1;

	if (!cfg->store) {
		ret = 0;
		goto out;
	}
	if (!cfg->host_id) {
		px_host_id_default(hid, sizeof(hid));
		if (!(cfg->host_id = strdup(hid)))
			goto out;
	}
	if (px_store_new(cfg->store, cfg->store_password_file, cfg->cluster, &d->store, err,
			 sizeof(err)) != PX_OK ||
	    px_store_connect(d->store, err, sizeof(err)) != PX_OK) {
		px_error("main", "%s; not mounting", err);
		goto out;
	}
	if (px_hosts_join(d->store, cfg->host_id, cfg->heartbeat_ms, &d->hosts, err,
			  sizeof(err)) != PX_OK) {
		px_error("main", "%s; not mounting", err);
		goto out;
	}
	if (cfg->peer_listen) {
		char url[256];
		snprintf(url, sizeof(url), "%s", cfg->peer_url ? cfg->peer_url : "");
		if (!cfg->peer_url)
			snprintf(url, sizeof(url), "http://%s", cfg->peer_listen);
		px_hosts_set_peer(d->hosts, url);
	}
	ret = 0;
out:
	return ret;
}

/* The core: curl, the state file, the cluster, and the sizes of the
 * assets (discovered before the mount, so the first ls shows them all). */
static int start_core(struct daemon *d)
{
	char err[1024];
	struct stat catsb;
	int ret = -1;

	if (!(d->ctx.fhs = fs_handles_new(d->worker.gen + d->worker.fh_base)))
		goto out;
	/* curl's global init before any thread */
	if (px_fetch_global_init() != PX_OK)
		goto out;
	d->fetch_init = 1;
	if (px_state_open(d->cfg.state_dir, d->cl.catalog, &d->state, err, sizeof(err)) != PX_OK)
		px_warn("main", "%s; sizes will not be remembered", err);
	if (join_cluster(d))
		goto out;
	if (px_core_new_cluster(&d->cfg, d->cat, NULL, d->store, d->hosts, &d->core) != PX_OK) {
		px_error("main", "cannot start the core");
		goto out;
	}
	px_core_set_peer_secret(d->core, d->peer_secret);
	d->peer_secret = NULL;
	d->catalog_mtime = stat(d->cl.catalog, &catsb) == 0 ? catsb.st_mtime : 0;
	if (px_core_discover(d->core, d->state, d->catalog_mtime) != PX_OK) {
		px_error("main", "out of memory building the tree");
		goto out;
	}
	px_info("main", "%zu of %zu assets listed", px_core_listed(d->core), d->cat->nassets);
	ret = 0;
out:
	return ret;
}

/* The FUSE session, the signal handlers and the stopper, the mount (or
 * the keeper's connection), and the control API. */
static int mount_fs(struct daemon *d)
{
	struct fs_ctx *ctx = &d->ctx;
	int ret = -1;

	ctx->core = d->core;
	ctx->key = d->cfg.session_key;
	ctx->uid = getuid();
	ctx->gid = getgid();
	ctx->dir_mtime = d->catalog_mtime;
	d->se = fuse_session_new(&d->args, &fs_ops, sizeof(fs_ops), ctx);
	if (!d->se) {
		d->rc = EXIT_USAGE; /* libfuse printed which option it did not know */
		goto out;
	}
	/* libfuse's handlers (SIGPIPE ignored among them), then ours on top
	 * for the stopping signals */
	if (fuse_set_signal_handlers(d->se)) {
		px_error("main", "cannot install signal handlers");
		goto out;
	}
	d->handlers = 1;
	d->sc.core = d->core;
	if (start_stopper(d->se, &d->sc, &d->stopper_thread)) {
		px_error("main", "cannot start the stopper thread");
		goto out;
	}
	d->stopper = 1;
	if (d->keeper ? fs_keeper_attach(d->se, &d->worker) != 0 :
			fuse_session_mount(d->se, d->mnt) != 0) {
		px_error("main", "cannot mount on %s", d->mnt);
		goto out;
	}
	d->mounted = 1;
	int mnt_id = 0;
	find_bdi(d->mnt, ctx, &mnt_id);
	set_worker_info(d->core, &d->worker, mnt_id);
	/* reloads read the catalog by its absolute name (a daemon chdirs to /)
	 * and drop the kernel's cached entries of what changed */
	d->catalog_abs = realpath(d->cl.catalog, NULL);
	px_core_set_catalog_path(d->core, d->catalog_abs ? d->catalog_abs : d->cl.catalog);
	ctx->se = d->se;
	px_core_on_reload(d->core, fs_forget_changes, ctx);
	/* asked for and not there is a failed mount, not a mount without it */
	if (d->cfg.control_socket &&
	    px_control_start(d->core, d->cfg.control_socket, &d->control) != PX_OK) {
		px_error("main", "cannot serve the control API on %s; not mounting",
			 d->cfg.control_socket);
		goto out;
	}
	if (d->cfg.peer_listen && px_peer_start(d->core, d->cfg.peer_listen, &d->peer) != PX_OK) {
		px_error("main", "cannot serve copies to the cluster on %s; not mounting",
			 d->cfg.peer_listen);
		goto out;
	}
	px_info("main", "mounted %s on %s (read_timeout %lld ms, state %s, log %s)", d->cl.catalog,
		d->mnt, (long long)d->cfg.read_timeout_ms,
		d->state ? px_state_file(d->state) : "none", d->log_where);
	ret = 0;
out:
	return ret;
}

/* The mount is up (the kernel queues what comes before the loop answers
 * INIT): tells the manager, or the waiting parent, and detaches stdio. */
static void announce(struct daemon *d)
{
	fs_notify_send(&d->notify, "READY=1");
	if (d->worker.gen > 0)
		fs_notify_status(&d->notify, "worker pid %ld serves %s again (restart %u; the last "
				 "worker %s): %zu of %zu assets listed", (long)getpid(), d->mnt,
				 d->worker.gen, d->worker.cause, px_core_listed(d->core),
				 d->cat->nassets);
	else
		fs_notify_status(&d->notify, "mounted %s on %s: %zu of %zu assets listed",
				 d->cl.catalog, d->mnt, px_core_listed(d->core), d->cat->nassets);
	if (d->report_fd >= 0) {
		/* let the parent return, then detach stdio */
		report(&d->report_fd, 0);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, STDIN_FILENO);
			dup2(devnull, STDOUT_FILENO);
			dup2(devnull, STDERR_FILENO);
			if (devnull > 2)
				close(devnull);
		}
		px_log_setup(d->cfg.log_level, 1);
		if (chdir("/")) {
			/* nothing depends on the cwd */
		}
	}
}

/* Serves until unmounted or stopped; rc 0 for a clean stop. */
static int run_loop(struct daemon *d)
{
	int r, ret = -1;

	if (d->cl.single) {
		/* a transcode's reader holds the only worker while it waits for
		 * its writer: that writer must not need the mount for its input */
		r = fuse_session_loop(d->se);
	} else {
		/* From here the mount serves reads, on up to 64 workers, and
		 * the core feeds writers their input from its read path (not
		 * through the mount, which they would keep busy), so a dead
		 * origin is cut over for them as for any reader. */
		px_core_feed_writers(d->core);
		d->loop = fuse_loop_cfg_create();
		if (!d->loop)
			goto out;
		fuse_loop_cfg_set_max_threads(d->loop, 64);
		fuse_loop_cfg_set_idle_threads(d->loop, 8);
		r = fuse_session_loop_mt(d->se, d->loop);
	}
	/* the loop reports the signal that ended it: that is a clean stop */
	d->rc = r == 0 || r == SIGTERM || r == SIGINT || r == SIGHUP ? 0 : EXIT_RUNTIME;
	px_info("main", "unmounting %s", d->mnt);
	/* also after fusermount3 -u, which ends the loop without a signal */
	fs_notify_send(&d->notify, "STOPPING=1\nSTATUS=unmounting");
	ret = 0;
out:
	return ret;
}

/* Frees what the command line held. */
static void free_cmdline(struct cmdline *cl)
{
	for (size_t i = 0; i < cl->ncore_opts; i++)
		free(cl->core_opts[i]);
	free(cl->core_opts);
	for (size_t i = 0; i < cl->nfuse_opts; i++)
		free(cl->fuse_opts[i]);
	free(cl->fuse_opts);
	free(cl->catalog);
	free(cl->mountpoint);
}

/* Undoes what the steps did, in reverse, whichever step stopped; returns
 * the exit code (or ends the process: a catalog reader left behind). */
static int teardown(struct daemon *d)
{
	if (d->report_fd >= 0)
		report(&d->report_fd, (unsigned char)(d->rc ? d->rc : EXIT_RUNTIME));
	px_control_stop(d->control);
	px_peer_stop(d->peer);
	if (d->stopper)
		end_stopper(&d->sc, d->stopper_thread);
	/* no reload can start now */
	int readers_left = d->core ? px_reload_readers_left(d->core) : 0;
	if (d->mounted)
		fuse_session_unmount(d->se);
	if (d->handlers)
		fuse_remove_signal_handlers(d->se);
	if (d->se)
		fuse_session_destroy(d->se);
	fuse_loop_cfg_destroy(d->loop);
	fs_status_free_all(&d->ctx);
	fs_handles_free(d->ctx.fhs);
	free(d->worker.init);
	if (d->stored.fd >= 0)
		close(d->stored.fd);
	if (d->stored.init_fd >= 0)
		close(d->stored.init_fd);
	free(d->stored.init);
	/* the heartbeat reads the core: it stops first; the core's threads
	 * (copies, slots) read the hosts' list until the core is freed */
	px_hosts_leave(d->hosts);
	px_core_free(d->core);
	px_hosts_free(d->hosts);
	px_store_free(d->store);
	px_state_free(d->state);
	px_state_unlock_mount(d->mount_lock);
	if (d->fetch_init)
		px_fetch_global_cleanup();
	px_catalog_free(d->cat);
	free(d->catalog_abs);
	if (d->peer_secret) {
		explicit_bzero(d->peer_secret, strlen(d->peer_secret));
		free(d->peer_secret);
	}
	px_config_release(&d->cfg);
	free_cmdline(&d->cl);
	fs_notify_close(&d->notify);
	fuse_opt_free_args(&d->args);
	if (readers_left) {
		/* a catalog reader still stuck in the kernel would outlive exit()'s
		 * handlers (a leak checker would wait for it for good): everything
		 * of ours is released, so end here */
		px_info("main", "%d catalog reader(s) given up on are left behind", readers_left);
		fflush(NULL);
		_exit(d->rc);
	}
	return d->rc;
}

/* The daemon: each step in order until one stops, then the teardown. */
static int run_daemon(int argc, char *argv[])
{
	struct daemon d = { .argv = argv, .args = FUSE_ARGS_INIT(argc, argv),
			    .ctx = { .blobs_lock = PTHREAD_MUTEX_INITIALIZER },
			    .rc = EXIT_RUNTIME, .report_fd = -1, .mount_lock = -1,
			    .worker = { .fd = -1, .probe_fd = -1 },
			    .stored = { .fd = -1, .init_fd = -1 } };
	int rc = EXIT_RUNTIME;

	d.sc.notify = &d.notify;
	/* started by a keeper from the binary on disk (an upgrade): its
	 * worker, on the keeper's mount (keeper.h) */
	d.exec_worker = fs_keeper_worker(&d.worker, &d.detached);
	if (d.exec_worker < 0)
		goto out;
	/* read (and unset) before any thread: a manager waits for READY=1 */
	d.managed = fs_notify_open(&d.notify);
	/* a connection the manager kept for the keeper (its fd store): this
	 * start serves it again instead of mounting (keeper.h) */
	if (!d.exec_worker && fs_keeper_stored(&d.stored) < 0)
		fs_keeper_forget_stored(&d.stored, &d.notify);
	px_config_init(&d.cfg);
	if (!read_command_line(&d) && !read_catalog(&d) && !detach(&d) && !claim_mountpoint(&d) &&
	    !start_keeper(&d) && !start_core(&d) && !mount_fs(&d)) {
		announce(&d);
		run_loop(&d);
	}
	rc = teardown(&d);
out:
	return rc;
}

int main(int argc, char *argv[])
{
	int rc;

	/* glibc gives every thread that allocates its own arena (up to 8 per
	 * core), and each keeps the 1 MiB read buffers it once held: with many
	 * FUSE workers that alone was ~60 MiB over the read-ahead budget. Two
	 * arenas keep memory near the budget; big buffers barely contend.
	 * Buffers of 512 KiB and more (a large direct read's transfer, a
	 * reply buffer, a cached head) are mapped and unmapped each time, so
	 * that a burst of direct reads does not leave its memory in the heap:
	 * with 64 readers the peak RSS went from ~310 to ~280 MiB (budget
	 * 256 MiB), at some 10% of those readers' throughput (bench/). */
	mallopt(M_ARENA_MAX, 2);
	mallopt(M_MMAP_THRESHOLD, 512 * 1024);
	/* a pipe or socket whose reader is gone is an EPIPE to handle, never
	 * the daemon's end: ignored from the start, not only once libfuse's
	 * handlers are in (writers are spawned with it back to default) */
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "verify") == 0)
		rc = fs_verify_main(argc - 1, argv + 1);
	else if (argc > 1 && strcmp(argv[1], "ctl") == 0)
		rc = fs_ctl_main(argc - 1, argv + 1);
	else if (argc > 1 && strcmp(argv[1], "catalog") == 0)
		rc = fs_catalog_main(argc - 1, argv + 1);
	else
		rc = run_daemon(argc, argv);
	return rc;
}
