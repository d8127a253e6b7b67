/*
 * spawn.c - starting seamfs-writer processes: the profile's argv (secrets
 * on stdin, never on the command line), posix_spawn with a pipe for
 * "committed K", the daemon's feed of the writer's input (and no other
 * descriptor of the daemon's), and the main writer's priority while probes
 * run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "feed.h"
#include "log.h"
#include "kvstore.h"
#include "transcode_i.h"

extern char **environ;

#define YIELD_NICE 10          /* a main writer's nice while probes run */

void tc_wake(struct px_transcode *tc)
{
	uint64_t one = 1;
	ssize_t w = write(tc->evfd, &one, sizeof(one));
	(void)w;
}

void tc_profile_key(const struct px_transcode *tc, const struct job *j, char *buf,
		    size_t cap)
{
	const struct px_source *s = &j->src->sources[0];
	/* written into plan.json: the source's key, no credentials */
	if (j->remux)
		snprintf(buf, cap, "remux|%s|%d", s->key, seg_secs(j));
	else
		snprintf(buf, cap, "%s|%d|%lld|%lld|%d", s->key, j->a->height,
			 (long long)j->a->video_bitrate, (long long)j->a->audio_bitrate,
			 seg_secs(j));
	(void)tc;
}

/*
 * What a writer reads. The daemon's feed when writers are fed and the
 * source asset is served now (*fed set; the source asset's path is the
 * input's name, no headers): the daemon's read path then picks, balances
 * and cuts over the source. Else source k of the source asset itself;
 * *hdr is that source when its provider's headers go along (a URL), NULL
 * otherwise. Under tc->lock (or before the thread starts).
 */
static const char *writer_input(const struct px_transcode *tc, const struct job *j, size_t k,
				int *fed, const struct px_source **hdr)
{
	const struct px_source *s = &j->src->sources[k < j->src->nsources ? k : 0];
	*hdr = NULL;
	*fed = tc->have_input && tc->feeds &&
	       tc->input.listed(tc->input.arg, (size_t)(j->src - tc->cat->assets));
	if (*fed)
		return j->src->path;
	if (s->url)
		*hdr = s;
	return s->url ? s->url : s->path;
}

size_t tc_profile_argv(const struct px_transcode *tc, const struct job *j, char **argv,
		       char bufs[4][32], const char *input, const struct px_source *hdr,
		       char **secret)
{
	const struct px_provider *p = hdr ? &tc->cat->providers[hdr->provider] : NULL;
	size_t n = 0;
	*secret = NULL;
	argv[n++] = (char *)tc->writer;
	argv[n++] = NULL; /* the verb, set by the caller */
	argv[n++] = "--input";
	argv[n++] = (char *)input;
	if (hdr) {
		size_t len = strlen(input) + 2;
		for (size_t i = 0; p && i < p->nheaders; i++)
			len += strlen(p->headers[i]) + 1;
		if ((*secret = malloc(len))) {
			size_t o = (size_t)snprintf(*secret, len, "%s\n", input);
			for (size_t i = 0; p && i < p->nheaders; i++)
				o += (size_t)snprintf(*secret + o, len - o, "%s\n", p->headers[i]);
			argv[n - 1] = "-";
		}
	}
	snprintf(bufs[3], 32, "%d", seg_secs(j));
	if (j->remux) {
		argv[n++] = "--remux";
		argv[n++] = "--segment-seconds";
		argv[n++] = bufs[3];
		return n;
	}
	snprintf(bufs[0], 32, "%d", j->a->height);
	snprintf(bufs[1], 32, "%lld", (long long)j->a->video_bitrate);
	snprintf(bufs[2], 32, "%lld", (long long)j->a->audio_bitrate);
	argv[n++] = "--height";
	argv[n++] = bufs[0];
	argv[n++] = "--video-bitrate";
	argv[n++] = bufs[1];
	argv[n++] = "--audio-bitrate";
	argv[n++] = bufs[2];
	argv[n++] = "--segment-seconds";
	argv[n++] = bufs[3];
	return n;
}

enum px_status tc_spawn(char **argv, pid_t *pid, int *outfd, const char *secret,
			int feedfd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	int p[2], in[2] = { -1, -1 };
	enum px_status st = PX_EIO;
	/* a secret fits a pipe's buffer (64 KiB): written at once, below */
	if (secret && (strlen(secret) > 60000 || pipe2(in, O_CLOEXEC)))
		return PX_EIO;
	if (pipe2(p, O_CLOEXEC)) {
		if (secret) {
			close(in[0]);
			close(in[1]);
		}
		return PX_EIO;
	}
	posix_spawn_file_actions_init(&fa);
	if (secret)
		posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	else
		posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	if (feedfd >= 0)
		posix_spawn_file_actions_adddup2(&fa, feedfd, PX_FEED_FD);
	/* nothing else of the daemon's: libcurl 7.88 and hiredis 0.14 make
	 * their sockets without close-on-exec, and a connection the daemon
	 * closes must close at the origin (or Redis) too, not live on in a
	 * writer against the provider's connection limit */
	posix_spawn_file_actions_addclosefrom_np(&fa, feedfd >= 0 ? PX_FEED_FD + 1 : PX_FEED_FD);
	/* the calling thread may block signals and libfuse ignores SIGPIPE:
	 * the writer starts with neither (SIGPIPE ends it when the daemon is
	 * gone) */
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGHUP);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	int rc = posix_spawn(pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (secret) {
		/* written while our copy of the read end is open: a writer that
		 * exits without reading its input must not end the daemon with
		 * SIGPIPE (this may run before libfuse ignores it) */
		if (!rc) {
			size_t len = strlen(secret);
			ssize_t w = write(in[1], secret, len); /* fits the pipe: no wait */
			if (w != (ssize_t)len)
				px_warn("transcode", "could not hand the writer its input");
		}
		close(in[0]);
		close(in[1]);
	}
	if (rc) {
		px_error("transcode", "cannot run %s: %s", argv[0], strerror(rc));
		close(p[0]);
		return st;
	}
	*outfd = p[0];
	return PX_OK;
}

/*
 * Whether this daemon may give a thread its priority back (CAP_SYS_NICE
 * in its effective set, from /proc/self/status; root has it): only then
 * does a yield also put the threads under SCHED_IDLE, which a thread
 * cannot leave without it. Under tc->lock (the answer is kept).
 */
static int can_renice(void)
{
	static int known = -1;
	char buf[2048];
	if (known >= 0)
		return known;
	known = 0;
	if (px_proc_read("/proc/self/status", buf, sizeof(buf)) >= 0) {
		const char *c = strstr(buf, "\nCapEff:");
		if (c)
			known = (int)((strtoull(c + 8, NULL, 16) >> 23) & 1); /* CAP_SYS_NICE */
	}
	return known;
}

/* Sets thread tid's nice and, idle >= 0, its policy: SCHED_IDLE (1) or
 * SCHED_OTHER (0). Errors as setpriority's. */
static int thread_prio(pid_t tid, int nice, int idle)
{
	struct sched_param sp = { 0 };
	if (idle == 0 && sched_setscheduler(tid, SCHED_OTHER, &sp))
		return -1;
	if (setpriority(PRIO_PROCESS, (id_t)tid, nice))
		return -1;
	return idle == 1 ? sched_setscheduler(tid, SCHED_IDLE, &sp) : 0;
}

/*
 * Sets the nice value (and with idle >= 0 the policy, thread_prio) of
 * every thread of process pid: on Linux a nice value is a thread's, and
 * setpriority(PRIO_PROCESS, pid) sets the main
 * thread's alone, while a writer's CPU is in the threads x264 and the
 * decoder started before (a thread started later takes its starter's).
 * 0 when every thread listed took it; -1 with errno of the first refusal
 * (or of the listing: then the main thread's is set alone).
 */
static int nice_all(pid_t pid, int nice, int idle)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return thread_prio(pid, nice, idle);
	int rc = 0, err = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end || tid <= 0)
			continue;
		/* a thread that ended meanwhile is no refusal */
		if (thread_prio((pid_t)tid, nice, idle) && errno != ESRCH && !err) {
			err = errno;
			rc = -1;
		}
	}
	closedir(d);
	errno = err;
	return rc;
}

void tc_main_yield(struct job *j, int yield)
{
	if (!j->pid || yield == j->yielded)
		return;
	if (yield) {
		errno = 0;
		int cur = getpriority(PRIO_PROCESS, (id_t)j->pid);
		if (errno)
			return;
		j->nice_was = cur;
		j->idled = can_renice();
		j->yielded = nice_all(j->pid, cur + YIELD_NICE > 19 ? 19 : cur + YIELD_NICE,
				      j->idled ? 1 : -1) == 0;
		return;
	}
	if (nice_all(j->pid, j->nice_was, j->idled ? 0 : -1))
		px_debug("transcode", "asset %s: writer pid %d keeps its lower priority: %s",
			 j->a->id, (int)j->pid, strerror(errno));
	j->yielded = 0;
}

/* A feed started for a writer: the writer's end of its socket (-1: none),
 * the feed, and the buffers of the options that name them. */
struct feed_start {
	int fd;
	struct px_feed *feed;
	char sfd[16], stmo[24];
};

/* Starts the daemon's feed of j's source asset for a writer about to be
 * spawned; adds its options to argv (at *n; fs holds their buffers).
 * The writer's end in fs->fd (never PX_FEED_FD itself: posix_spawn's
 * dup2 onto the same number would keep its close-on-exec). Under
 * tc->lock. */
static enum px_status feed_writer(struct px_transcode *tc, struct job *j, char **argv,
				  size_t *n, struct feed_start *fs)
{
	enum px_status st = px_feeds_start(tc->feeds, &tc->input,
					   (size_t)(j->src - tc->cat->assets), j->a->id, &fs->fd,
					   &fs->feed);
	if (st == PX_OK && fs->fd == PX_FEED_FD) {
		int moved = fcntl(fs->fd, F_DUPFD_CLOEXEC, PX_FEED_FD + 1);
		close(fs->fd);
		fs->fd = moved;
		st = moved < 0 ? PX_EIO : PX_OK;
	}
	if (st != PX_OK)
		goto out;
	snprintf(fs->sfd, sizeof(fs->sfd), "%d", PX_FEED_FD);
	/* the daemon bounds the open (the hello) by admission_timeout and
	 * each read by read_timeout; the writer waits that long and a little
	 * more for an answer */
	int64_t bound = tc->cfg->read_timeout_ms > tc->cfg->admission_timeout_ms
			? tc->cfg->read_timeout_ms : tc->cfg->admission_timeout_ms;
	bound += 5000;
	snprintf(fs->stmo, sizeof(fs->stmo), "%lld",
		 (long long)(bound < 3600000 ? bound : 3600000)); /* its max */
	argv[(*n)++] = "--input-fd";
	argv[(*n)++] = fs->sfd;
	argv[(*n)++] = "--io-timeout-ms";
	argv[(*n)++] = fs->stmo;
out:
	return st;
}

enum px_status tc_spawn_run(struct px_transcode *tc, struct job *j, struct tc_run *r)
{
	char *argv[96], bufs[4][32], sfrom[16], snseg[16], sbytes[32], sgen[24], shb[24];
	char speed[32], suntil[16];
	const struct px_source *hdr;
	int fed;
	struct feed_start fs = { .fd = -1 };
	const char *input = writer_input(tc, j, j->direct, &fed, &hdr);
	char *secret;
	size_t n = tc_profile_argv(tc, j, argv, bufs, input, hdr, &secret);
	enum px_status st = PX_OK;

	argv[1] = "run";
	snprintf(sfrom, sizeof(sfrom), "%u", r->from);
	snprintf(snseg, sizeof(snseg), "%u", j->plan.nseg);
	snprintf(sbytes, sizeof(sbytes), "%lld", (long long)j->plan.seg_bytes);
	snprintf(sgen, sizeof(sgen), "%" PRIu64, j->lease.gen);
	snprintf(shb, sizeof(shb), "%lld", (long long)tc->cfg->heartbeat_ms);
	char leasedir[PATH_MAX + 8];
	snprintf(leasedir, sizeof(leasedir), "%s/leases", tc->work);
	const char *extra[] = { "--work-dir", j->dir, "--from", sfrom, "--segments", snseg,
		"--segment-bytes", sbytes, "--lease-key", j->a->id,
		"--lease-gen", sgen, "--heartbeat-ms", shb, NULL };
	for (size_t i = 0; extra[i]; i++)
		argv[n++] = (char *)extra[i];
	if (tc->store) {
		/* cluster mode: the lease and the playlist are the store's; the
		 * password goes by its file's name, never itself */
		argv[n++] = "--store";
		argv[n++] = (char *)px_store_url(tc->store);
		argv[n++] = "--cluster";
		argv[n++] = (char *)px_store_prefix(tc->store);
		if (px_store_password_file(tc->store)) {
			argv[n++] = "--store-password-file";
			argv[n++] = (char *)px_store_password_file(tc->store);
		}
	} else {
		argv[n++] = "--lease-dir";
		argv[n++] = leasedir;
	}
	if (tc->cfg->writer_max_speed > 0 && r->until < 0) {
		/* a probe is not paced: a reader waits for it */
		snprintf(speed, sizeof(speed), "%g", tc->cfg->writer_max_speed);
		argv[n++] = "--max-speed";
		argv[n++] = speed;
	}
	if (r->until >= 0) {
		snprintf(suntil, sizeof(suntil), "%lld", (long long)r->until);
		argv[n++] = "--probe-until";
		argv[n++] = suntil;
	}
	if (fed)
		st = feed_writer(tc, j, argv, &n, &fs);
	argv[n] = NULL;
	if (st == PX_OK)
		st = tc_spawn(argv, r->pid, r->outfd, secret, fs.fd);
	if (fs.fd >= 0)
		close(fs.fd); /* the writer has its own; its exit ends the feed */
	if (fs.feed)
		px_feed_go(tc->feeds, fs.feed, st == PX_OK ? *r->pid : 0);
	free(secret);
	*r->via_feed = fed;
	if (fed)
		snprintf(r->shown, r->shown_cap, "%s (fed by the daemon's read path)", input);
	else
		snprintf(r->shown, r->shown_cap, "%s", hdr ? hdr->shown : input);
	return st;
}
