/*
 * supervisor.c - the supervisor thread: polls the eventfd, each writer's
 * pidfd and stdout, and a timer; follows commits, restarts failed writers
 * after a backoff, gives up after MAX_CRASHES, checks leases, and in
 * cluster mode polls other hosts' jobs and serves their wants.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "transcode_i.h"

/* Whether j has readers: handles open here, or (cluster mode) a far read
 * of another host asked for it within read_timeout. Under tc->lock. */
static int has_readers(const struct px_transcode *tc, const struct job *j)
{
	return j->nopen > 0 ||
	       (j->wanted_ms && px_now_ms() - j->wanted_ms < tc->cfg->read_timeout_ms);
}

/* The backoff before the restart that follows failure number n in a row. */
static int64_t backoff_ms(int n)
{
	int64_t d = BACKOFF_FIRST_MS;
	for (int i = 1; i < n && d < BACKOFF_MAX_MS; i++)
		d *= 2;
	return d < BACKOFF_MAX_MS ? d : BACKOFF_MAX_MS;
}

/*
 * The writer of j has exited with status. Under tc->lock, on the
 * supervisor's thread (which also starts the writer once a backoff ends).
 */
static void writer_ended(struct px_transcode *tc, struct job *j, int status)
{
	pid_t pid = j->pid;
	int64_t restart = j->restart_at;
	uint32_t from = j->from;
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

	if (j->pidfd >= 0)
		close(j->pidfd);
	if (j->outfd >= 0)
		close(j->outfd);
	j->pidfd = j->outfd = -1;
	j->pid = 0;
	j->restart_at = -1;
	tc->nwriters--;
	if (code == 0) {
		px_info("transcode", "writer pid %d of asset %s stopped cleanly", (int)pid,
			j->a->id);
		tc_refresh(tc, j, 0);
		j->crashes = 0;
		tc_drop_lease(tc, j);
	} else if (tc->stopping) {
		/* killed by us at unmount; recovery happens at the next start */
	} else if (restart >= 0) {
		/* killed by us for a seek: recovery (in start_writer) claims the
		 * lease by CAS, trusts, cleans, and starts where the seek asked,
		 * at once, behind the jobs already waiting for a slot */
		if (has_readers(tc, j)) {
			tc_run_queue(tc);
			tc_start_writer(tc, j, (uint32_t)restart, START_SEEK);
		} else {
			tc_drop_lease(tc, j);
		}
	} else if (code == 3 && tc->store) {
		/* fenced: another host took the lease over (our writer was stopped
		 * or cut off past orphan_after); it writes now, we follow */
		px_warn("transcode", "writer pid %d of asset %s was fenced: its lease (generation %"
			PRIu64 ") was taken over by another host; following that host's writer",
			(int)pid, j->a->id, j->lease.gen);
		j->have_lease = 0;
		j->remote = 1;
		j->crashes = 0;
		tc_refresh(tc, j, 0);
	} else if (code == 2 || code == 4) {
		/* its command line, or a segment that never fits: the same again */
		px_error("transcode", "writer pid %d of asset %s failed (exit %d); reads of "
			 "unwritten segments fail", (int)pid, j->a->id, code);
		j->failed = 1;
		j->failed_ms = px_now_ms();
		tc_drop_lease(tc, j);
	} else {
		/* input lost (exit 1), lease taken over (3), killed or crashed:
		 * worth another run, after a backoff */
		j->crashes++;
		if (code > 0)
			px_warn("transcode", "writer pid %d of asset %s failed (exit %d) before segment "
				"%lld", (int)pid, j->a->id, code, (long long)j->edge);
		else
			px_warn("transcode", "writer pid %d of asset %s died (signal %d) before segment "
				"%lld; recovering", (int)pid, j->a->id, WTERMSIG(status),
				(long long)j->edge);
		if (code == 1 && !j->via_feed && j->src->nsources > 1) {
			/* no daemon to cut over for it: the next run reads the next source */
			j->direct = (j->direct + 1) % j->src->nsources;
			const struct px_source *s = &j->src->sources[j->direct];
			px_info("transcode", "asset %s: the next writer reads source %zu of %zu, %s",
				j->a->id, j->direct + 1, j->src->nsources, s->shown);
		}
		if (j->crashes > MAX_CRASHES) {
			px_error("transcode", "asset %s: writer failed %d times in a row; giving up",
				 j->a->id, j->crashes);
			j->failed = 1;
			j->failed_ms = px_now_ms();
			tc_drop_lease(tc, j);
		} else if (has_readers(tc, j)) {
			/* recovery runs when it starts; readers go on waiting, bounded
			 * by read_timeout */
			int64_t d = backoff_ms(j->crashes);
			j->retry_at = px_now_ms() + d;
			j->retry_from = from;
			px_info("transcode", "asset %s: restarting its writer in %lld ms (failure %d of "
				"%d in a row)", j->a->id, (long long)d, j->crashes, MAX_CRASHES);
		} else {
			tc_drop_lease(tc, j);
		}
	}
	tc_run_queue(tc);
	pthread_cond_broadcast(&tc->cond);
}

/* Starts the writers whose backoff has ended; returns when the next one
 * ends (px_now_ms), or INT64_MAX. Under tc->lock, on the supervisor's
 * thread. */
static int64_t retry_due(struct px_transcode *tc)
{
	int64_t now = px_now_ms(), next = INT64_MAX;
	for (size_t i = 0; i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		if (!j->retry_at)
			continue;
		if (j->retry_at > now) {
			if (j->retry_at < next)
				next = j->retry_at;
			continue;
		}
		j->retry_at = 0;
		if (has_readers(tc, j) && !j->pid && !j->failed) {
			tc_start_writer(tc, j, j->retry_from, START_RETRY);
		} else if (!j->pid) {
			tc_drop_lease(tc, j);
		}
		pthread_cond_broadcast(&tc->cond);
	}
	return next;
}

/* Lines from a writer's stdout. Under tc->lock. */
static void writer_output(struct px_transcode *tc, struct job *j)
{
	ssize_t r = read(j->outfd, j->out + j->outlen, sizeof(j->out) - 1 - j->outlen);
	if (r <= 0) {
		/* end of output: the death comes through the pidfd (or here) */
		if (j->pidfd < 0) {
			int status;
			if (waitpid(j->pid, &status, 0) == j->pid)
				writer_ended(tc, j, status);
		} else {
			close(j->outfd);
			j->outfd = -1;
		}
		return;
	}
	j->outlen += (size_t)r;
	j->out[j->outlen] = '\0';
	char *line = j->out, *nl;
	int changed = 0;
	while ((nl = strchr(line, '\n'))) {
		unsigned k;
		*nl = '\0';
		if (sscanf(line, "committed %u", &k) == 1 && k < j->plan.nseg) {
			j->edge = (int64_t)k + 1;
			changed = 1;
		}
		if (strncmp(line, "link ", 5) == 0)
			j->work_links++; /* the writer logged it */
		line = nl + 1;
	}
	j->outlen = strlen(line);
	memmove(j->out, line, j->outlen + 1);
	if (j->outlen == sizeof(j->out) - 1)
		j->outlen = 0; /* not ours: a line this long */
	if (changed) {
		uint32_t before = tc_trusted(j);
		tc_refresh(tc, j, 0);
		/* progress resets the backoff: a segment that became servable
		 * (a commit of a segment already trusted, listed by a probe
		 * meanwhile, is none) */
		if (tc_trusted(j) > before)
			j->crashes = 0;
	}
}

/* Kills writers whose lease is orphaned, and probes that ran longer than
 * any reader waits for them (read_timeout). Under tc->lock. */
static void check_leases(struct px_transcode *tc)
{
	int64_t now = px_lease_now(tc->leases);
	for (size_t i = 0; i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		struct px_lease l;
		if (!j->pid || px_lease_get(tc->leases, j->a->id, &l) != PX_OK)
			continue;
		/* cluster mode: a heartbeat longer, so that a host waiting to take
		 * the lease over (it polls more often) gets it first: its takeover
		 * fences this writer, our kill would only race it */
		int64_t orphan = tc->orphan_ms + (tc->store ? tc->cfg->heartbeat_ms : 0);
		if (l.gen == j->lease.gen && tc_store_settled(tc) && px_lease_orphaned(&l, now, orphan)) {
			px_warn("transcode", "lease: asset %s session %s orphaned (no heartbeat for "
				"%lld ms); killing writer pid %d", j->a->id, l.session,
				(long long)(now - l.heartbeat_ms), (int)j->pid);
			kill(j->pid, SIGKILL);
		}
	}
	int64_t mono = px_now_ms();
	for (size_t i = 0; i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		for (int q = 0; q < PROBES_MAX; q++) {
			struct probe *p = &j->probes[q];
			if (p->pid && mono - p->started_ms > tc->cfg->read_timeout_ms) {
				px_warn("transcode", "probe pid %d of asset %s still running after "
					"read_timeout; killing it", (int)p->pid, j->a->id);
				kill(p->pid, SIGKILL);
			}
		}
	}
}

/* What the supervisor polls: the eventfd, then each running writer's and
 * probe's pidfd and stdout, with the job (who), the probe slot (whop, -1:
 * the main writer) and the process (whopid) each entry was polled for:
 * handling one entry may end that writer and start another (a seek's
 * restart, the queue), whose new pidfd or pipe can take a number a later,
 * stale entry polled; matched by number alone, that entry's revents were
 * taken for the new writer's, and waitpid() then waited, under tc->lock,
 * for the new writer to end (the status and every read stalled
 * meanwhile). */
struct polled {
	struct pollfd *pf;
	size_t *who;
	int *whop;
	pid_t *whopid;
	size_t np;
};

static void poll_add(struct polled *ps, int fd, size_t i, int q, pid_t pid)
{
	if (fd < 0)
		return;
	ps->who[ps->np] = i;
	ps->whop[ps->np] = q;
	ps->whopid[ps->np] = pid;
	ps->pf[ps->np++] = (struct pollfd){ fd, POLLIN, 0 };
}

/* The entries to poll now. Under tc->lock. */
static void poll_set(struct px_transcode *tc, struct polled *ps)
{
	ps->np = 0;
	ps->pf[ps->np++] = (struct pollfd){ tc->evfd, POLLIN, 0 };
	for (size_t i = 0; i < tc->cat->nassets; i++) {
		struct job *j = &tc->jobs[i];
		for (int q = 0; q < PROBES_MAX; q++) {
			struct probe *p = &j->probes[q];
			if (!p->pid)
				continue;
			poll_add(ps, p->pidfd, i, q, p->pid);
			poll_add(ps, p->outfd, i, q, p->pid);
		}
		if (!j->pid)
			continue;
		poll_add(ps, j->pidfd, i, -1, j->pid);
		poll_add(ps, j->outfd, i, -1, j->pid);
	}
}

/* Probe p of j has something on fd (its stdout or its pidfd). Under
 * tc->lock. */
static void probe_event(struct px_transcode *tc, struct job *j, struct probe *p, int fd)
{
	int status;
	if (fd == p->outfd) {
		tc_probe_output(tc, j, p);
		/* no pidfd: the end of its output is its end */
		if (p->outfd < 0 && p->pidfd < 0) {
			if (waitpid(p->pid, &status, 0) == p->pid)
				tc_probe_ended(tc, j, p, status);
		}
	} else if (fd == p->pidfd) {
		while (p->outfd >= 0 && poll(&(struct pollfd){ p->outfd, POLLIN, 0 }, 1, 0) > 0)
			tc_probe_output(tc, j, p);
		if (waitpid(p->pid, &status, 0) == p->pid)
			tc_probe_ended(tc, j, p, status);
	}
}

/* j's main writer has something on fd (its stdout or its pidfd). Under
 * tc->lock. */
static void writer_event(struct px_transcode *tc, struct job *j, int fd)
{
	if (fd == j->outfd) {
		writer_output(tc, j);
	} else if (fd == j->pidfd) {
		int status;
		/* drain what it printed before it died */
		while (j->outfd >= 0 && poll(&(struct pollfd){ j->outfd, POLLIN, 0 },
					    1, 0) > 0 && j->pid)
			writer_output(tc, j);
		if (j->pid && waitpid(j->pid, &status, 0) == j->pid)
			writer_ended(tc, j, status);
	}
}

/* Handles what poll found on the entries of ps. Under tc->lock. */
static void poll_events(struct px_transcode *tc, const struct polled *ps)
{
	if (ps->pf[0].revents) {
		uint64_t v;
		ssize_t rd = read(tc->evfd, &v, sizeof(v));
		(void)rd;
	}
	for (size_t k = 1; k < ps->np; k++) {
		struct job *j = &tc->jobs[ps->who[k]];
		if (ps->whop[k] >= 0) {
			struct probe *p = &j->probes[ps->whop[k]];
			if (ps->pf[k].revents && p->pid && p->pid == ps->whopid[k])
				probe_event(tc, j, p, ps->pf[k].fd);
			continue;
		}
		if (ps->pf[k].revents && j->pid && j->pid == ps->whopid[k])
			writer_event(tc, j, ps->pf[k].fd);
	}
}

void *tc_supervisor_main(void *arg)
{
	struct px_transcode *tc = arg;
	/* per job: the main writer's pidfd and stdout, and each probe's */
	size_t cap = 2 * tc->cat->nassets * (1 + PROBES_MAX) + 1;
	struct polled ps = { calloc(cap, sizeof(*ps.pf)), calloc(cap, sizeof(*ps.who)),
			     calloc(cap, sizeof(*ps.whop)), calloc(cap, sizeof(*ps.whopid)), 0 };
	sigset_t all;
	int64_t next_check = px_now_ms() + tc->cfg->heartbeat_ms / 2;
	int64_t next_poll = px_now_ms();

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (!ps.pf || !ps.who || !ps.whop || !ps.whopid) {
		px_error("transcode", "supervisor: out of memory");
		goto out;
	}
	pthread_mutex_lock(&tc->lock);
	while (!tc->stopping) {
		/* writers whose backoff ended start first, so that their fds are
		 * polled too; poll's timeout ends the next backoff */
		int64_t due = retry_due(tc);
		poll_set(tc, &ps);
		if (tc->store && px_now_ms() >= next_poll) {
			tc_relist(tc);
			tc_poll_remote(tc);
			tc_serve_wants(tc);
			tc_take_placed(tc);
			next_poll = px_now_ms() + poll_ms(tc);
			due = retry_due(tc);
		}
		int64_t wake_at = due < next_check ? due : next_check;
		if (tc->store && next_poll < wake_at)
			wake_at = next_poll;
		int64_t wait = wake_at - px_now_ms();
		pthread_mutex_unlock(&tc->lock);
		int r = poll(ps.pf, ps.np, wait < 0 ? 0 : (int)wait);
		pthread_mutex_lock(&tc->lock);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0) /* else no revents are set */
			poll_events(tc, &ps);
		if (px_now_ms() >= next_check) {
			check_leases(tc);
			next_check = px_now_ms() + tc->cfg->heartbeat_ms / 2;
		}
	}
	pthread_mutex_unlock(&tc->lock);
out:
	free(ps.pf);
	free(ps.who);
	free(ps.whop);
	free(ps.whopid);
	return NULL;
}
