/*
 * pool.h - a small worker pool for blocking verifier work (background
 * prevalidation: sample reads and hashing), after nginx's thread pool.
 *
 * A job is a closure (run, done, arg). A worker calls run(arg), then
 * done(arg, what run returned), both on the worker thread, with no pool
 * lock held. The queue is bounded: a full queue refuses a job rather than
 * grow. Shutdown refuses new jobs, cancels the queued ones (their done
 * gets PX_ECANCELED and run is never called) and waits for the running
 * ones, which must be bounded in time themselves (a vf_reader is).
 */
#ifndef SEAMFS_VF_POOL_H
#define SEAMFS_VF_POOL_H

#include <stddef.h>
#include "px.h"

#define VF_POOL_MAX_THREADS 64

struct vf_pool;

typedef enum px_status (*vf_job_fn)(void *arg);
typedef void (*vf_done_fn)(void *arg, enum px_status st);

/*
 * Starts nthreads (1..VF_POOL_MAX_THREADS) workers with a queue of at most
 * max_queued (>= 1) waiting jobs. Workers block every signal. PX_EINVAL for
 * bad counts, PX_ENOMEM when memory or threads cannot be had.
 */
enum px_status vf_pool_new(unsigned nthreads, size_t max_queued, struct vf_pool **out) PX_WUR;

/*
 * Queues a job. run must not be NULL; done may be. Any thread, a worker
 * too. PX_EFULL when the queue is full, PX_ESHUTDOWN once shutdown has
 * begun; on failure neither run nor done is ever called for it, and arg
 * stays the caller's.
 */
enum px_status vf_pool_submit(struct vf_pool *p, vf_job_fn run, vf_done_fn done,
			      void *arg) PX_WUR;

/* Jobs waiting (not running) now. Any thread. */
size_t vf_pool_queued(struct vf_pool *p);

/*
 * Refuses new jobs, calls done(arg, PX_ECANCELED) for every queued job (on
 * the calling thread, in queue order), then waits for the running jobs and
 * joins the workers. Idempotent. Not from a worker (it would wait for
 * itself).
 */
void vf_pool_shutdown(struct vf_pool *p);

/* vf_pool_shutdown(), then frees. NULL: no-op. */
void vf_pool_free(struct vf_pool *p);

#endif
