/*
 * pool.c - the worker pool (pool.h).
 *
 * One mutex guards the ring of queued jobs and the flags; workers wait on
 * `work` for a job or for stop. Jobs run without the lock. Shutdown takes
 * the queued jobs out under the lock and cancels them after dropping it,
 * so a done() callback may call back into the pool (a submit then fails
 * with PX_ESHUTDOWN).
 *
 * Lock order: p->lock only.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "pool.h"

struct job {
	vf_job_fn run;
	vf_done_fn done;
	void *arg;
};

struct vf_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;      /* a job was queued, or stop */
	struct job *ring;         /* max slots; head + count under lock */
	size_t max, head, count;
	int stop;                 /* under lock */
	int joined;               /* shutdown has run to the end (caller's thread) */
	pthread_t threads[VF_POOL_MAX_THREADS];
	unsigned nthreads;
};

static void *worker(void *arg)
{
	struct vf_pool *p = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->count == 0)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stop)
			break;
		struct job j = p->ring[p->head];
		p->head = (p->head + 1) % p->max;
		p->count--;
		pthread_mutex_unlock(&p->lock);
		enum px_status st = j.run(j.arg);
		if (j.done)
			j.done(j.arg, st);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

enum px_status vf_pool_new(unsigned nthreads, size_t max_queued, struct vf_pool **out)
{
	struct vf_pool *p;

	*out = NULL;
	if (nthreads < 1 || nthreads > VF_POOL_MAX_THREADS || max_queued < 1 ||
	    max_queued > ((size_t)1 << 24))
		return PX_EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return PX_ENOMEM;
	p->ring = calloc(max_queued, sizeof(*p->ring));
	if (!p->ring) {
		free(p);
		return PX_ENOMEM;
	}
	p->max = max_queued;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	for (; p->nthreads < nthreads; p->nthreads++) {
		if (pthread_create(&p->threads[p->nthreads], NULL, worker, p)) {
			vf_pool_free(p);
			return PX_ENOMEM;
		}
	}
	*out = p;
	return PX_OK;
}

enum px_status vf_pool_submit(struct vf_pool *p, vf_job_fn run, vf_done_fn done, void *arg)
{
	enum px_status st = PX_OK;

	if (!run)
		return PX_EINVAL;
	pthread_mutex_lock(&p->lock);
	if (p->stop) {
		st = PX_ESHUTDOWN;
	} else if (p->count == p->max) {
		st = PX_EFULL;
	} else {
		p->ring[(p->head + p->count) % p->max] = (struct job){ run, done, arg };
		p->count++;
		pthread_cond_signal(&p->work);
	}
	pthread_mutex_unlock(&p->lock);
	return st;
}

size_t vf_pool_queued(struct vf_pool *p)
{
	pthread_mutex_lock(&p->lock);
	size_t n = p->count;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void vf_pool_shutdown(struct vf_pool *p)
{
	size_t head, count;

	if (p->joined)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	head = p->head;
	count = p->count;
	p->count = 0;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	/* after stop nobody writes the ring: submits are refused and workers
	 * take no more jobs, so its queued slots can be read without the lock */
	for (size_t i = 0; i < count; i++) {
		struct job *j = &p->ring[(head + i) % p->max];
		if (j->done)
			j->done(j->arg, PX_ECANCELED);
	}
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	p->joined = 1;
}

void vf_pool_free(struct vf_pool *p)
{
	if (!p)
		return;
	vf_pool_shutdown(p);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->ring);
	free(p);
}
