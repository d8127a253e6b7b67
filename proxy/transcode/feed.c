/*
 * feed.c - serving a writer's input from the daemon's read path.
 *
 * One thread per fed writer (main writer or probe; at most max_writers run
 * at once): it opens a handle on the source asset through the ops the
 * composition root gave (px_tc_input: the same sessions, balancing,
 * standby verification and cutover as a player's open of the mount), says
 * hello with the asset's size, then answers the writer's requests one at a
 * time until either end closes. The writer's death closes its end (the
 * thread's recv sees the end of the stream); the daemon's stop shuts the
 * thread's end down. Nothing here touches the mount, so a running writer
 * never keeps it busy. The thread's reads are bounded by read_timeout
 * (px_handle_read) and end at once when the core stops.
 *
 * Lock order: fs->lock only guards the list and each feed's done flag; it
 * is never held across a read, a send or a thread's join of a running
 * feed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "feed.h"
#include "log.h"

struct feed {
	struct px_feeds *fs;
	const struct px_tc_input *in;   /* borrowed */
	size_t asset;
	uint64_t client;       /* under fs->lock until go: the writer's pid */
	int go;                /* under fs->lock: the writer was spawned (or not) */
	int fd;                /* the daemon's end of the socketpair */
	char what[128];
	pthread_t thread;
	int done;              /* under fs->lock: the thread has ended */
	struct feed *next;
};

struct px_feeds {
	pthread_mutex_t lock;
	pthread_cond_t cond;   /* a feed may go */
	struct feed *list;
};

/* Answers f's requests with h until either end closes or a request is
 * malformed (then the writer's next read fails: its end closes). */
static void serve(struct feed *f, void *h, char *buf)
{
	struct px_feed_req rq;
	while (px_recv_all(f->fd, &rq, sizeof(rq)) == 0) {
		struct px_feed_reply rp = { PX_OK, 0 };
		size_t got = 0;
		if (rq.off < 0 || rq.len == 0 || rq.len > PX_FEED_MAX || rq.zero) {
			px_warn("transcode", "%s: bad input request (offset %lld, %u bytes); "
				"ending its input", f->what, (long long)rq.off, rq.len);
			break;
		}
		enum px_status st = f->in->read(h, rq.off, rq.len, buf, &got);
		if (st == PX_EOF) {
			st = PX_OK;
			got = 0;
		}
		rp.status = (int32_t)st;
		rp.n = st == PX_OK ? (uint32_t)got : 0;
		if (px_send_all(f->fd, &rp, sizeof(rp)) || (rp.n && px_send_all(f->fd, buf, rp.n)))
			break;
	}
}

static void *feed_main(void *arg)
{
	struct feed *f = arg;
	struct px_feed_hello hello = { PX_FEED_MAGIC, PX_OK, 0 };
	void *h = NULL;
	char *buf = NULL;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* the handle's client is the writer's pid, as a player's is its own
	 * (the status shows it): known once the writer is spawned */
	pthread_mutex_lock(&f->fs->lock);
	while (!f->go)
		pthread_cond_wait(&f->fs->cond, &f->fs->lock);
	uint64_t client = f->client;
	pthread_mutex_unlock(&f->fs->lock);
	hello.size = f->in->size(f->in->arg, f->asset);
	enum px_status st = client ? f->in->open(f->in->arg, f->asset, client, &h) : PX_ECANCELED;
	if (st == PX_OK && !(buf = malloc(PX_FEED_MAX)))
		st = PX_ENOMEM;
	if (st != PX_OK && client)
		px_warn("transcode", "%s: its input cannot be opened: %s", f->what,
			px_strerror(st));
	hello.status = (int32_t)st;
	if (px_send_all(f->fd, &hello, sizeof(hello)) == 0 && st == PX_OK)
		serve(f, h, buf);
	if (h)
		f->in->close(h);
	free(buf);
	pthread_mutex_lock(&f->fs->lock);
	f->done = 1;
	pthread_mutex_unlock(&f->fs->lock);
	return NULL;
}

struct px_feeds *px_feeds_new(void)
{
	struct px_feeds *fs = calloc(1, sizeof(*fs));
	if (fs) {
		pthread_mutex_init(&fs->lock, NULL);
		pthread_cond_init(&fs->cond, NULL);
	}
	return fs;
}

/* Joins and frees the feeds whose threads have ended. Under fs->lock. */
static void reap(struct px_feeds *fs)
{
	for (struct feed **pp = &fs->list; *pp;) {
		struct feed *f = *pp;
		if (!f->done) {
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		pthread_join(f->thread, NULL); /* it ended: returns at once */
		close(f->fd);
		free(f);
	}
}

enum px_status px_feeds_start(struct px_feeds *fs, const struct px_tc_input *in,
			      size_t asset, const char *what, int *writer_fd,
			      struct px_feed **out)
{
	int sv[2] = { -1, -1 };
	struct feed *f = NULL;
	enum px_status st = PX_EIO;

	*writer_fd = -1;
	*out = NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		px_error("transcode", "%s: no socket for its input: %s", what, strerror(errno));
		goto out;
	}
	if (!(f = calloc(1, sizeof(*f)))) {
		st = PX_ENOMEM;
		goto out;
	}
	f->fs = fs;
	f->in = in;
	f->asset = asset;
	f->fd = sv[0];
	snprintf(f->what, sizeof(f->what), "%s", what);
	pthread_mutex_lock(&fs->lock);
	reap(fs);
	int rc = pthread_create(&f->thread, NULL, feed_main, f);
	if (!rc) {
		f->next = fs->list;
		fs->list = f;
	}
	pthread_mutex_unlock(&fs->lock);
	if (rc) {
		px_error("transcode", "%s: cannot start its input's thread: %s", what,
			 strerror(rc));
		goto out;
	}
	*writer_fd = sv[1];
	*out = (struct px_feed *)f;
	sv[0] = sv[1] = -1;
	f = NULL;
	st = PX_OK;
out:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	free(f);
	return st;
}

void px_feed_go(struct px_feeds *fs, struct px_feed *feed, pid_t pid)
{
	struct feed *f = (struct feed *)feed;
	pthread_mutex_lock(&fs->lock);
	f->client = pid > 0 ? (uint64_t)pid : 0;
	f->go = 1;
	pthread_cond_broadcast(&fs->cond);
	pthread_mutex_unlock(&fs->lock);
}

void px_feeds_free(struct px_feeds *fs)
{
	if (!fs)
		return;
	pthread_mutex_lock(&fs->lock);
	/* a thread waiting for a request sees the end; one reading goes on to
	 * its reply, which fails */
	for (struct feed *f = fs->list; f; f = f->next) {
		shutdown(f->fd, SHUT_RDWR);
		f->go = 1; /* one not told yet: its writer never started */
	}
	pthread_cond_broadcast(&fs->cond);
	struct feed *list = fs->list;
	fs->list = NULL;
	pthread_mutex_unlock(&fs->lock);
	while (list) {
		struct feed *f = list;
		list = f->next;
		pthread_join(f->thread, NULL);
		close(f->fd);
		free(f);
	}
	pthread_mutex_destroy(&fs->lock);
	pthread_cond_destroy(&fs->cond);
	free(fs);
}
