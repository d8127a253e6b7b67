/*
 * provider.c - providers at run time: connection slots, sessions, liveness.
 *
 * Slots. A provider with max_connections = N never has more than N open
 * transfers: every transfer of the core (a session's stream and direct
 * reads, head/tail cache fills, size probes, liveness probes) is submitted
 * through px_xfer_submit(), which takes a slot first and gives it back
 * only after the transfer's on_done, that is after the fetcher has closed
 * or pooled its connection: a superseded transfer is closed before its
 * slot is reused. A session also keeps one slot reserved while it has no
 * transfer open, so that its own next read, seek or reopen is admitted at
 * the limit; a session's first transfer uses that reservation. The slots a
 * provider has taken ("held") are therefore
 *     sum over its sessions of max(xfers, reserved) + background transfers
 *     + transfers of sessions that moved elsewhere (xfers_moved).
 * A cutover can move a session while one of its transfers waits for a slot
 * of the old provider: the slot is counted in the generation it was taken
 * in, and one granted after the move is one of the moved ones.
 * At the limit a waiter, in this order: cancels a background transfer
 * (background work yields to playback), expires a closed session that
 * lingers for reopens, closes an idle stream of its own session (a handle
 * takes over its session's idle slot), then waits on prov_cond until its
 * deadline: PX_EBUSY, "all providers at their limit". After the first
 * 200 ms of waiting, "idle" widens to a stream of its session that no
 * reader waits on although its transfer runs or stalls: read-ahead the
 * reader left by a seek, which would otherwise hold the session's one slot
 * until its transfer ends (a stalled one: never, since only a waiting
 * reader judges a stall). After a quarter of its time (stall_timeout at
 * most), while its session holds transfers there, it widens to every
 * stream of its session, readers inside or not: they read directly, in
 * turn after it. Two readers of one session at a provider of one slot so
 * take turns; otherwise one reading a stream for longer than read_timeout
 * starved the other (the checker's seed 1771 under load).
 *
 * Sessions. An open joins the session of the same client and asset when
 * there is one (open, or closed less than session_ttl ago), else a new
 * session takes, among the asset's sources whose provider is not drained
 * and has room, the one whose provider has the fewest sessions, the first
 * by provider name on a tie; a copy on this host's own disk (copies/serve.c)
 * before any other. Providers that answer badly come after those
 * that answer well, and providers down for liveness_ttl are left out while
 * any other can serve. A session counts from the moment it is directed, so
 * a burst of opens spreads.
 *
 * Liveness. Every transfer's outcome counts (passive): an HTTP answer
 * below 500 or any byte is good; a refused or timed-out connection, a
 * reset before any byte or a 5xx is bad. While sessions run (open or
 * lingering), the monitor thread also asks each provider that nothing
 * else has talked to for liveness_interval for one byte (active). An idle
 * mount (no session) asks nothing of a provider that answers: metered
 * providers count every request; one failing or down is still asked, so
 * that it comes back. Instead an open checks on demand: a provider not heard from for
 * liveness_idle (no answer, no probe) is asked for one byte of the source
 * the open would use before the session is placed, the open waiting for
 * the answer within its own bound (and connect_timeout), so that a
 * provider that died while nobody read is found at once. A provider whose
 * answers have been bad for liveness_ttl is down; its first new good answer
 * brings it back: one to a transfer submitted after it went bad. Bytes
 * that were already on the way (a paused stream's, buffered in its socket
 * and read seconds after the server died) say nothing of the server now.
 * A request sent later is answered by a live server only: curl finds a
 * pooled connection to a dead one closed before reusing it, and the
 * active probe of a failing provider opens a fresh connection anyway.
 *
 * TTLs and liveness go by core->now, so unit tests drive them with a fake
 * clock; waits for slots use the real monotonic clock.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "catalog.h"
#include "clock.h"
#include "cluster.h"
#include "context.h"
#include "health.h"
#include "provider.h"
#include "sources.h"
#include "rangeread.h"
#include "log.h"

/* provider.c's own state beside prov_rt and the sessions (context.h's
 * px_core.providers): made and freed with the core, opaque to the rest. */
struct px_providers {
	struct px_providers_pub pub; /* prov_lock, the providers (context.h) */
	size_t provs_cap;          /* pub.provs has provs_cap: the catalog's
				    * and PX_SPARE_PROVIDERS more */
	struct px_session *sessions; /* listed sessions, newest first */
	/* with prov_lock: wakes those waiting for a slot and the core's
	 * threads (monotonic; px_prov_wait_until) */
	pthread_cond_t prov_cond;
	int stopping;              /* under prov_lock: the core is stopping */
	/* set before the core serves (px_providers_set_*), then read only */
	int (*yield_idle)(struct px_session *s, int how);
	int (*cluster_acquire)(struct px_core *core, size_t prov, int n);
	_Atomic uint64_t next_session;
	/* under prov_lock: the last open that could not be admitted */
	char admit_why[300];
	int64_t admit_when;
	uint64_t n_admit_busy;
	/* sessions whose handles were all closed having read only heads and
	 * tails (each close of the last handle counts once), and the requests
	 * they made: a scan's cost at the origin */
	_Atomic uint64_t n_scans, n_scan_requests;
	/* each transfer's submit to its first byte, for the metrics
	 * (lock-free) */
	struct px_histo h_ttfb;
};

/* One transfer submitted through px_xfer_submit(). */
struct xrec {
	struct px_core *core;
	size_t prov;
	struct px_session *sess;
	struct px_session *extra; /* PX_XFER_SPARE: the session it reads ahead
				   * for, kept alive (xfers_extra) until it ends */
	unsigned gen;            /* sess->gen at submit */
	int loose;               /* for a session, but not on its provider (a
				  * reader that has not seen its cutover yet):
				  * one slot of its own, like a moved one */
	int bg;
	int refs;                /* the submitter and the transfer; prov_lock */
	int started;             /* id is valid */
	int cancelled;
	uint64_t id;
	int64_t submitted_us;    /* for the time to first byte */
	int got_data;            /* fetch thread only */
	_Atomic int refused;     /* its last bytes were refused: paused until a
				  * reader wants more */
	uint64_t seq;            /* p->submits at its submit */
	struct xrec *prev, *next; /* p->xs */
	struct px_fetch_cb inner;
};

/* A transfer waiting for a slot: granted in turn (FIFO) when one frees. */
struct slot_wait {
	struct slot_wait *next;
	struct px_session *sess;   /* NULL: background */
	int granted;
	unsigned gen;              /* sess->gen when granted */
	int moved;                 /* granted after sess moved off this
				    * provider: counted like a transfer a
				    * cutover left behind */
};

static int contrib(const struct px_session *s)
{
	return s->xfers > s->reserved ? s->xfers : s->reserved;
}

static void grant_waiters(struct px_core *core, struct prov_rt *p);

/* Frees a session nobody holds: no handle, no transfer, not listed. */
static void session_free_locked(struct px_session *s)
{
	for (size_t i = 0; i < s->nfds; i++)
		if (s->fds[i] >= 0)
			close(s->fds[i]);
	free(s->fds);
	pthread_mutex_destroy(&s->fd_lock);
	pthread_mutex_destroy(&s->cut_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int session_gone(const struct px_session *s)
{
	return !s->listed && s->nhandles == 0 && s->xfers == 0 && s->xfers_moved == 0 &&
	       s->xfers_extra == 0;
}

/* Takes the session out of the list and gives back its reservation. The
 * caller frees it when session_gone(). prov_lock held. */
static void session_unlist(struct px_core *core, struct px_session *s)
{
	struct prov_rt *p = px_prov_rt(core, s->prov);
	if (!s->listed)
		return;
	int before = contrib(s);
	s->reserved = 0;
	p->held -= before - contrib(s);
	p->sessions--;
	s->listed = 0;
	if (s->prev)
		s->prev->next = s->next;
	else
		core->providers->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	grant_waiters(core, p);
	pthread_cond_broadcast(&core->providers->prov_cond);
}

/* 0 live, 1 failing, 2 down. */
static int health(const struct px_core *core, const struct prov_rt *p, int64_t now)
{
	if (!p->bad_since)
		return p->remote_down ? 2 : 0;
	return now - p->bad_since >= core->cfg->liveness_ttl_ms || p->remote_down ? 2 : 1;
}

/* A source's health: its provider's, or down while the source itself
 * failed recently (an HTML answer, a stall, a reset: px_source_failed). */
static int source_health(const struct px_core *core, size_t asset, size_t k,
			 const struct prov_rt *p, int64_t now)
{
	int h = health(core, p, now);
	return h < 2 && px_source_bad(core, asset, k, now) ? 2 : h;
}

/* Ends closed sessions whose TTL has passed; returns the next expiry. */
static int64_t expire_sessions(struct px_core *core, int64_t now)
{
	int64_t next = INT64_MAX;
	struct px_session *s = core->providers->sessions, *nx;
	for (; s; s = nx) {
		nx = s->next;
		if (s->nhandles)
			continue;
		int64_t at = s->closed_at + core->cfg->session_ttl_ms;
		if (now >= at) {
			px_debug("session", "%s: ended (no reopen within session_ttl)", s->who);
			session_unlist(core, s);
			if (session_gone(s))
				session_free_locked(s);
		} else if (at < next) {
			next = at;
		}
	}
	return next;
}

/* Ends the closed session of provider p that has waited longest for a
 * reopen, to free its slot. Returns 1 if there was one. */
static int evict_lingering(struct px_core *core, size_t prov, const struct px_session *keep)
{
	struct px_session *best = NULL;
	for (struct px_session *s = core->providers->sessions; s; s = s->next)
		if (s->prov == prov && s != keep && !s->nhandles && !s->xfers && s->reserved &&
		    (!best || s->closed_at < best->closed_at))
			best = s;
	if (!best)
		return 0;
	px_debug("session", "%s: ended early: its slot is needed", best->who);
	px_prov_rt(core, prov)->n_evicted++;
	session_unlist(core, best);
	if (session_gone(best))
		session_free_locked(best);
	return 1;
}

/* Whether p has a slot free here: under its limit, in cluster mode under
 * the slots this host holds of the cluster's limit. */
static int has_room(const struct prov_rt *p)
{
	return p->max == 0 || p->held < (p->cl ? p->granted : p->max);
}

/* In cluster mode: p uses all the slots it was granted... */
static int cluster_need(const struct prov_rt *p)
{
	return p->cl && p->max && p->held >= p->granted;
}

/* ...and the cluster had room at the last call: worth choosing. */
static int cluster_short(const struct prov_rt *p)
{
	return cluster_need(p) && p->granted + p->others_slots < p->max;
}

int px_provider_cluster_need(const struct px_core *core, size_t prov)
{
	return cluster_need(px_prov_rt(core, prov));
}

/* Asks the cluster for a slot of prov: prov_lock held, dropped around the
 * call. Returns 1 when one came. */
static int cluster_take(struct px_core *core, size_t prov)
{
	if (!core->providers->cluster_acquire)
		return 0;
	pthread_mutex_unlock(px_prov_lock(core));
	int got = core->providers->cluster_acquire(core, prov, 1);
	pthread_mutex_lock(px_prov_lock(core));
	return got > 0;
}

/* Cluster mode, every provider of the asset's sources at its limit: asks
 * the cluster for a slot of each (a host that gets none leaves a want, and
 * the others end their lingering sessions for it). prov_lock held, dropped
 * around the calls. Returns 1 when one came. */
static int cluster_ask(struct px_core *core, size_t asset)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	int got = 0;
	for (size_t i = 0; i < a->nsources && !got; i++) {
		size_t pi = a->sources[i].provider;
		if (cluster_need(px_prov_rt(core, pi)) && !px_prov_rt(core, pi)->drained)
			got = cluster_take(core, pi);
	}
	return got;
}

/* Sessions on p, this host's and (cluster mode) the other hosts'. */
static int sessions_all(const struct prov_rt *p)
{
	return p->sessions + p->others_sessions;
}

/* Whether a transfer of sess (NULL: background) can take a slot now. */
static int can_take(const struct prov_rt *p, const struct px_session *sess)
{
	if (sess && sess->xfers < sess->reserved)
		return 1; /* its reservation */
	return has_room(p);
}

/* Counts a transfer of sess (NULL: background) in p's slots. */
static void take(struct prov_rt *p, struct px_session *sess)
{
	p->xfers++;
	if (!sess) {
		p->bg++;
		p->held++;
	} else {
		int before = contrib(sess);
		sess->xfers++;
		p->held += contrib(sess) - before;
	}
}

/* Counts a transfer of sess on p, a provider sess has left: one slot of
 * its own, as one a cutover left there (xfers_moved). */
static void take_moved(struct prov_rt *p, struct px_session *sess)
{
	p->xfers++;
	p->held++;
	sess->xfers_moved++;
}

/* Hands freed slots to waiters, oldest first; a waiter that cannot take
 * one does not hold back a later one that can (its own reservation). A
 * waiter's session may have been cut over to another provider while it
 * waited: its reservation is there now, so it takes a free slot here. */
static void grant_waiters(struct px_core *core, struct prov_rt *p)
{
	size_t prov = (size_t)(p - core->providers->pub.provs);
	int any = 0;
	/* playback first, then background work */
	for (int pass = 0; pass < 2; pass++) {
		for (struct slot_wait **pw = &p->waitq; *pw;) {
			struct slot_wait *w = *pw;
			int moved = w->sess && w->sess->prov != prov;
			if ((pass == 0) != (w->sess != NULL) ||
			    !can_take(p, moved ? NULL : w->sess)) {
				pw = &w->next;
				continue;
			}
			if (moved)
				take_moved(p, w->sess);
			else
				take(p, w->sess);
			/* the generation it was counted in: a cutover before
			 * the waiter runs again moves it with the others */
			w->gen = w->sess ? w->sess->gen : 0;
			w->moved = moved;
			w->granted = 1;
			*pw = w->next;
			any = 1;
		}
	}
	if (any)
		pthread_cond_broadcast(&core->providers->prov_cond);
}

static int queued(const struct prov_rt *p, const struct px_session *sess)
{
	for (const struct slot_wait *w = p->waitq; w; w = w->next)
		if (w->sess == sess)
			return 1;
	return 0;
}

/* Records the outcome of transfer x for liveness. prov_lock held. */
static void note_outcome(struct px_core *core, struct prov_rt *p, const struct xrec *x,
			 const struct px_fetch_result *res)
{
	int64_t now = core->now();
	int good = res->status == PX_OK || res->bytes > 0 ||
		   (res->http_status > 0 && res->http_status < 500);
	int bad = !good && (res->status == PX_ECONNECT || res->status == PX_ETIMEDOUT ||
			    res->status == PX_ETRANSFER || res->status == PX_ESERVER);
	const char *name = px_cat(core)->providers[x->prov].name;
	if (good && (p->bad_since || p->remote_down) && x->seq <= p->bad_mark)
		return; /* asked before it went bad: not a new answer */
	if (good) {
		p->n_ok++;
		p->last_good = now;
		if (p->bad_since || p->remote_down)
			px_info("provider", "provider %s answers again", name);
		p->bad_since = 0;
		p->remote_down = 0; /* the next sync tells the other hosts */
	} else if (bad) {
		p->n_bad++;
		p->last_bad = now;
		snprintf(p->why, sizeof(p->why), "%s (%s)", px_strerror(res->status), res->detail);
		if (!p->bad_since) {
			p->bad_since = now;
			p->bad_mark = p->submits;
			px_warn("provider", "provider %s: %s", name, p->why);
		}
	}
}

static void xrec_unref(struct xrec *x)
{
	if (--x->refs == 0)
		free(x);
}

/* Gives back the slot transfer x held on p: a background one, one counted
 * on its provider alone (left by a cutover, or loose), or one of its
 * session's. Frees a session nobody holds any more. prov_lock held. */
static void give_back(struct prov_rt *p, struct xrec *x)
{
	struct px_session *s = x->sess;
	p->xfers--;
	if (x->prev)
		x->prev->next = x->next;
	else
		p->xs = x->next;
	if (x->next)
		x->next->prev = x->prev;
	if (x->bg) {
		p->bg--;
		p->held--;
		if (x->extra) {
			x->extra->xfers_extra--;
			if (session_gone(x->extra))
				session_free_locked(x->extra);
		}
		return;
	}
	if (x->loose || x->gen != s->gen) {
		s->xfers_moved--;
		p->held--;
	} else {
		int before = contrib(s);
		s->xfers--;
		p->held -= before - contrib(s);
	}
	if (session_gone(s))
		session_free_locked(s);
}

static int x_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	struct xrec *x = ctx;
	if (!x->got_data) {
		x->got_data = 1;
		px_histo_observe_us(&x->core->providers->h_ttfb, px_now_us() - x->submitted_us);
	}
	int took = x->inner.on_data(x->inner.ctx, off, buf, len);
	atomic_store(&x->refused, !took);
	return took;
}

static void x_done(void *ctx, const struct px_fetch_result *res)
{
	struct xrec *x = ctx;
	struct px_core *core = x->core;
	struct prov_rt *p = px_prov_rt(core, x->prov);

	/* the outcome first, so a reader that sees the end sees it counted;
	 * then the owner; the slot frees last, when the transfer is over */
	if (!(res->status == PX_ECANCELED && res->bytes == 0)) {
		pthread_mutex_lock(px_prov_lock(core));
		note_outcome(core, p, x, res);
		pthread_mutex_unlock(px_prov_lock(core));
	}
	/* a redirect means connections to other hosts (a CDN): idle ones
	 * there could sit beside transfers elsewhere, so no more reuse */
	if (res->redirects > 0 && !atomic_load(&p->multi_host)) {
		pthread_mutex_lock(px_prov_lock(core));
		if (!atomic_exchange(&p->multi_host, 1) && p->max)
			px_info("provider", "provider %s redirects: its connections are closed "
				"after each transfer from now on", px_cat(core)->providers[x->prov].name);
		pthread_mutex_unlock(px_prov_lock(core));
	}
	x->inner.on_done(x->inner.ctx, res);
	pthread_mutex_lock(px_prov_lock(core));
	give_back(p, x);
	grant_waiters(core, p);
	pthread_cond_broadcast(&core->providers->prov_cond);
	xrec_unref(x);
	pthread_mutex_unlock(px_prov_lock(core));
}

/* Whether x, a transfer of a session, is counted apart from it (a reader
 * that had not seen its session's cutover started it, or a cutover left
 * it behind) and paused for want of a reader: it serves nobody now, and
 * its slot is the provider's. prov_lock held. */
static int parked(const struct xrec *x)
{
	return !x->bg && (x->loose || x->gen != x->sess->gen) && atomic_load(&x->refused);
}

/* Cancels one transfer of p that is not cancelled yet and that a waiter
 * may take the slot of: background work (for a session's transfer, bg
 * 1), or a transfer parked apart from its session (parked()). Its owner
 * reads a cancel as a preemption, not a failure. prov_lock held, dropped
 * around the cancel. Returns 1 if it did. */
static int preempt(struct px_core *core, struct prov_rt *p, int bg)
{
	struct xrec *x = p->xs;
	while (x && (x->cancelled || !x->started || !((bg && x->bg) || parked(x))))
		x = x->next;
	if (!x)
		return 0;
	x->cancelled = 1;
	x->refs++;
	p->n_preempted++;
	uint64_t id = x->id;
	pthread_mutex_unlock(px_prov_lock(core));
	core->fetch.ops.cancel(core->fetch.ops.impl, id);
	pthread_mutex_lock(px_prov_lock(core));
	xrec_unref(x);
	return 1;
}

int px_prov_wait_until(struct px_core *core, int64_t deadline)
{
	if (px_now_ms() >= deadline)
		return 0;
	struct timespec ts = { deadline / 1000, (deadline % 1000) * 1000000 };
	pthread_cond_timedwait(&core->providers->prov_cond, px_prov_lock(core), &ts);
	return 1;
}

static __thread int t_cutover; /* this thread runs a cutover's checks */

void px_xfer_cutover_thread(int on)
{
	t_cutover = on;
}

/* Waits, in steps of 2 ms, until no cutover of sess runs or deadline
 * (0: the read bound) passes. */
static void wait_cutover(struct px_core *core, struct px_session *sess, int64_t deadline)
{
	int64_t limit = deadline > 0 ? deadline : px_now_ms() + core->cfg->read_timeout_ms;
	struct timespec step = { 0, 2000000 };
	while (atomic_load(&sess->cutting) && px_now_ms() < limit)
		nanosleep(&step, NULL);
}

/* Takes the spare room a PX_XFER_SPARE transfer may have: 0 when there is
 * none (no waiting, no lingering session ended). prov_lock held. */
static int take_spare(struct prov_rt *p, struct xrec *x, struct px_session *sess)
{
	if (!has_room(p) || p->waitq)
		return 0;
	if (sess) {
		x->extra = sess;
		sess->xfers_extra++;
	}
	return 1;
}

/* Waits in turn (w queued at p) until w is granted a slot of x's
 * provider: makes room where it may (background work, a lingering
 * session, the cluster, the session's own idle streams) and wakes every
 * 200 ms to look again. PX_EBUSY at deadline, PX_ESHUTDOWN; w is then
 * out of the queue. prov_lock held (let go around the yield). */
static enum px_status wait_turn(struct px_core *core, struct xrec *x, struct slot_wait *w,
				int64_t deadline)
{
	struct prov_rt *p = px_prov_rt(core, x->prov);
	enum px_status st = PX_OK;
	int yielded = 0;
	int slices = 0; /* waits of 200 ms with no slot */
	/* from then on the session's own readers give up their streams for
	 * this one: its turn, within its time */
	int64_t now = px_now_ms(), turn = (deadline - now) / 4;
	if (turn > core->cfg->stall_timeout_ms)
		turn = core->cfg->stall_timeout_ms;
	turn += now;

	while (!w->granted) {
		if (core->providers->stopping) {
			st = PX_ESHUTDOWN;
		} else if (preempt(core, p, !x->bg)) {
			continue;
		} else if (evict_lingering(core, x->prov, x->sess)) {
			continue;
		} else if (cluster_need(p) && cluster_take(core, x->prov)) {
			grant_waiters(core, p);
			continue;
		} else if (x->sess && !yielded) {
			yielded = 1;
			/* a cutover's check that found no slot for a while:
			 * the session's own streams on the source it leaves
			 * may hold it (a shared provider); a reader that
			 * waited its turn while its session's other readers
			 * kept the slot (a stream its reader is always
			 * inside) takes it: theirs read directly, in turn */
			int own = x->sess->prov == x->prov && x->sess->xfers > 0;
			pthread_mutex_unlock(px_prov_lock(core));
			int how = !slices ? PX_YIELD_IDLE :
				  t_cutover || (own && px_now_ms() >= turn) ? PX_YIELD_ALL :
				  PX_YIELD_UNREAD;
			int n = core->providers->yield_idle ? core->providers->yield_idle(x->sess, how) : 0;
			pthread_mutex_lock(px_prov_lock(core));
			if (n)
				continue;
		} else {
			/* wake now and then to look for idle streams again */
			int64_t slice = px_now_ms() + 200;
			if (!px_prov_wait_until(core, slice < deadline ? slice : deadline)) {
				p->n_busy++;
				st = PX_EBUSY;
			}
			yielded = 0;
			slices++;
		}
		if (st != PX_OK && !w->granted) {
			for (struct slot_wait **pw = &p->waitq; *pw; pw = &(*pw)->next) {
				if (*pw == w) {
					*pw = w->next;
					break;
				}
			}
			return st;
		}
		st = PX_OK;
	}
	return PX_OK;
}

/* Takes a slot of x's provider for x, at once or in turn (wait_turn);
 * w->gen and w->moved say how it was counted. prov_lock held. */
static enum px_status take_slot(struct px_core *core, struct xrec *x, struct slot_wait *w,
				int64_t deadline)
{
	struct prov_rt *p = px_prov_rt(core, x->prov);
	/* its own reservation needs no turn; shared room is taken in turn */
	int now_ok = can_take(p, x->sess) &&
		     (!p->waitq || (x->sess && x->sess->xfers < x->sess->reserved &&
				    !queued(p, x->sess)));
	w->gen = x->sess ? x->sess->gen : 0;
	if (now_ok) {
		take(p, x->sess);
		return PX_OK;
	}
	struct slot_wait **tail = &p->waitq;
	while (*tail)
		tail = &(*tail)->next;
	*tail = w;
	p->n_waits++;
	grant_waiters(core, p); /* it may be its turn already */
	return wait_turn(core, x, w, deadline);
}

/* Logs who held the slots all the time a transfer waited in vain, and
 * lets go of prov_lock. */
static void no_slot(struct px_core *core, const struct xrec *x, enum px_status st)
{
	/* a read that fails so says nothing else (retry.c leaves PX_EBUSY
	 * alone) */
	const struct prov_rt *p = px_prov_rt(core, x->prov);
	int held = p->held, xfers = p->xfers, bgn = p->bg, nsess = p->sessions;
	int max = p->max;
	pthread_mutex_unlock(px_prov_lock(core));
	if (st == PX_EBUSY)
		px_log(x->sess ? PX_LOG_WARN : PX_LOG_DEBUG, "provider",
		       "provider %s: no slot free within the bound of a %s transfer "
		       "(max_connections %d: %d held, %d transfers open, %d of them "
		       "background, %d sessions)", px_cat(core)->providers[x->prov].name,
		       x->sess ? "session's" : "background", max, held, xfers, bgn, nsess);
}

/* Counts x, granted its slot (w), where it belongs: the session's (sess),
 * one left by a cutover, or background work. prov_lock held. */
static void settle(struct px_core *core, struct xrec *x, struct px_session *sess,
		   const struct slot_wait *w)
{
	struct prov_rt *p = px_prov_rt(core, x->prov);
	if (x->loose) {
		/* taken as background work; it is not: a session's, not
		 * preemptible */
		p->bg--;
		x->bg = 0;
		x->sess = sess;
		sess->xfers_moved++;
		x->gen = sess->gen - 1;
	} else if (w->moved) {
		/* take_moved() counted it apart from the session */
		x->loose = 1;
	} else if (x->sess) {
		/* the generation its slot was counted in, not the session's
		 * now: a cutover may have moved it while this thread woke */
		x->gen = w->gen;
	}
	if (p->max && p->xfers > p->max)
		px_error("provider", "provider %s: %d transfers open, over its limit of %d "
			 "(%d slots held, %d background, %d sessions; this one %s%s, %s)",
			 px_cat(core)->providers[x->prov].name, p->xfers, p->max, p->held, p->bg,
			 p->sessions, x->bg ? "background" : x->loose ? "left by a cutover" :
			 "a session's", w->moved ? ", moved while it waited" : "",
			 x->sess ? x->sess->who : "no session");
	x->next = p->xs;
	if (x->next)
		x->next->prev = x;
	p->xs = x;
	x->seq = ++p->submits;
}

/* Hands x, holding its slot, to the fetcher; a submit that fails gives
 * the slot back. Takes prov_lock. */
static enum px_status start(struct px_core *core, struct xrec *x,
			    const struct px_fetch_params *fp, uint64_t *id)
{
	struct prov_rt *p = px_prov_rt(core, x->prov);
	struct px_fetch_cb wrap = { x_data, x_done, x };
	x->submitted_us = px_now_us();
	enum px_status st = core->fetch.ops.submit(core->fetch.ops.impl, fp, &wrap, id);

	pthread_mutex_lock(px_prov_lock(core));
	if (st != PX_OK) {
		/* never started: give the slot back as x_done would */
		give_back(p, x);
		grant_waiters(core, p);
		pthread_cond_broadcast(&core->providers->prov_cond);
		x->refs = 1;
	} else {
		x->id = *id;
		x->started = 1;
	}
	xrec_unref(x);
	pthread_mutex_unlock(px_prov_lock(core));
	return st;
}

enum px_status px_xfer_submit(struct px_core *core, size_t prov, struct px_session *sess,
			      int bg, int64_t deadline, const struct px_fetch_params *fp,
			      const struct px_fetch_cb *cb, uint64_t *id)
{
	struct xrec *x = calloc(1, sizeof(*x));
	enum px_status st;

	if (!x)
		return PX_ENOMEM;
	if (sess && !bg && !t_cutover)
		wait_cutover(core, sess, deadline);
	x->core = core;
	x->prov = prov;
	x->sess = bg ? NULL : sess;
	x->bg = bg || !sess;
	x->inner = *cb;
	x->refs = 2;

	pthread_mutex_lock(px_prov_lock(core));
	if (bg == PX_XFER_SPARE && !take_spare(px_prov_rt(core, prov), x, sess)) {
		pthread_mutex_unlock(px_prov_lock(core));
		free(x);
		return PX_EBUSY;
	}
	if (x->sess && x->sess->prov != prov) {
		/* counted like a transfer left behind by a cutover */
		x->loose = 1;
		x->sess = NULL;
	}
	struct slot_wait w = { NULL, x->sess, 0, 0, 0 };
	if ((st = take_slot(core, x, &w, deadline)) != PX_OK) {
		no_slot(core, x, st);
		free(x);
		return st;
	}
	settle(core, x, sess, &w);
	if (sess && !bg)
		sess->requests++;
	pthread_mutex_unlock(px_prov_lock(core));
	return start(core, x, fp, id);
}

/* ---- sessions */

static const char *prov_name(const struct px_core *core, size_t prov)
{
	return px_cat(core)->providers[prov].name;
}

/* Picks the source for a new session: *src set, returns 1; 0 when every
 * candidate is at its limit; -1 when none can serve at all (why set). */
static int choose(struct px_core *core, size_t asset, int64_t now, size_t *src,
		  char *why, size_t whylen)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	const unsigned char *dead = (const unsigned char *)px_asset_rt(core, asset)->dead;
	int any = 0, any_up = 0, ndrained = 0, ndead = 0, nrejected = 0;
	long best = -1;

	for (size_t i = 0; i < a->nsources; i++) {
		const struct prov_rt *p = px_prov_rt(core, a->sources[i].provider);
		if (dead[i]) {
			ndead++;
			continue;
		}
		if (px_source_rejected(core, asset, i)) {
			nrejected++;
			continue;
		}
		if (p->drained || p->auth_failed) {
			ndrained++;
			continue;
		}
		any = 1;
		if (source_health(core, asset, i, p, now) < 2)
			any_up = 1;
	}
	if (!any) {
		snprintf(why, whylen, "no source can serve (%d dead, %d rejected, %d on drained "
			 "or auth-refused providers)",
			 ndead, nrejected, ndrained);
		return -1;
	}
	for (size_t i = 0; i < a->nsources; i++) {
		size_t pi = a->sources[i].provider;
		const struct prov_rt *p = px_prov_rt(core, pi);
		if (dead[i] || p->drained || p->auth_failed || px_source_rejected(core, asset, i))
			continue;
		int h = source_health(core, asset, i, p, now);
		if (any_up && h == 2)
			continue;
		if ((!has_room(p) || p->waitq) && !cluster_short(p)) {
			/* a closed session lingering there, or background work,
			 * gives its slot up; transfers waiting there go first */
			int yields = p->bg > 0;
			for (struct px_session *s = core->providers->sessions; s && !yields; s = s->next)
				yields = s->prov == pi && !s->nhandles && !s->xfers && s->reserved;
			if (!yields)
				continue;
		}
		if (best >= 0) {
			const struct prov_rt *b = px_prov_rt(core, a->sources[best].provider);
			int hb = source_health(core, asset, (size_t)best, b, now);
			size_t bi = a->sources[best].provider;
			/* a copy on this host's own disk costs no connection */
			int lb = px_cat(core)->providers[bi].local_disk;
			int lp = px_cat(core)->providers[pi].local_disk;
			if (hb < h || (hb == h && lb > lp) ||
			    (hb == h && lb == lp && sessions_all(b) < sessions_all(p)) ||
			    (hb == h && lb == lp && sessions_all(b) == sessions_all(p) &&
			     strcmp(prov_name(core, bi), prov_name(core, pi)) <= 0))
				continue;
		}
		best = (long)i;
	}
	if (best < 0) {
		size_t n = 0;
		n += (size_t)snprintf(why, whylen, "all providers at their limit (");
		for (size_t i = 0; i < a->nsources && n < whylen; i++) {
			size_t pi = a->sources[i].provider;
			if (dead[i] || px_prov_rt(core, pi)->drained)
				continue;
			n += (size_t)snprintf(why + n, whylen - n, "%s%s %d/%d", n > 30 ? ", " : "",
					      prov_name(core, pi), px_prov_rt(core, pi)->held,
					      px_prov_rt(core, pi)->max);
		}
		if (n < whylen)
			snprintf(why + n, whylen - n, ")");
		return 0;
	}
	*src = (size_t)best;
	return 1;
}

/* Opens and checks a path source for a new session. */
static int open_path(struct px_core *core, size_t asset, size_t src)
{
	const char *path = px_cat(core)->assets[asset].sources[src].path;
	struct stat sb;
	/* a regular file only, opened without blocking: a FIFO would hold
	 * the reader in the kernel until someone opened its other end; a
	 * copy beneath its storage, never through a link (px_source_open) */
	int fd = px_source_open(core, asset, src), e = errno;
	if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size == px_asset_rt(core, asset)->size)
		return fd;
	int copy = px_cat(core)->assets[asset].sources[src].storage != NULL;
	const struct src_rt *all = __atomic_load_n(&px_asset_rt(core, asset)->src, __ATOMIC_ACQUIRE);
	if (copy && fd < 0 && all && atomic_load(&all[src].in_way)) {
		/* found replaced: no session goes there; the copies thread
		 * drops it and says so, once */
		px_asset_rt(core, asset)->dead[src] = 1;
		return -1;
	}
	/* a copy's path is never looked at by name (a link may be there) */
	const char *kind = !copy && fd < 0 && (e == EINVAL || e == EISDIR) ? px_file_kind(path)
									     : NULL;
	px_warn("session", "asset %s: source %s unusable: %s%s", px_cat(core)->assets[asset].id, path,
		fd >= 0 ? "size differs from the asset's" : kind ? "it is " : strerror(e),
		kind ? kind : "");
	if (fd >= 0) {
		px_asset_rt(core, asset)->dead[src] = 1;
		close(fd);
	} else if (e == ENOENT || kind) {
		px_asset_rt(core, asset)->dead[src] = 1;
	}
	return -1;
}

static int unheard(const struct px_core *core, const struct prov_rt *p, int64_t now);
static void check_at_open(struct px_core *core, size_t i, size_t asset, size_t k,
			  int64_t deadline);

/* A live session of client on the asset that a new handle joins, or
 * NULL. prov_lock held. */
static struct px_session *joinable(struct px_core *core, size_t asset, uint64_t client,
				   int64_t now)
{
	struct px_session *s;
	for (s = core->providers->sessions; s; s = s->next)
		if (s->asset == asset && s->client == client && !s->failed &&
		    !px_asset_rt(core, asset)->dead[s->source] &&
		    health(core, px_prov_rt(core, s->prov), now) < 2)
			break;
	return s;
}

/* What an open of the asset waits for: the source *src to start on, with
 * a slot free on its provider (made where it may: a lingering session,
 * the cluster, background work) and, for a path, a file that opens.
 * PX_EBUSY at deadline, PX_ENOSOURCE, PX_ESHUTDOWN, with why. prov_lock
 * held (let go around a path's check). */
static enum px_status admit(struct px_core *core, size_t asset, int64_t deadline, size_t *src,
			    char *why, size_t whylen)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	int waited = 0;
	for (;;) {
		if (core->providers->stopping)
			return PX_ESHUTDOWN;
		int r = choose(core, asset, core->now(), src, why, whylen);
		if (r < 0)
			return PX_ENOSOURCE;
		if (r == 1) {
			size_t prov = a->sources[*src].provider;
			struct prov_rt *p = px_prov_rt(core, prov);
			if (!a->sources[*src].path && unheard(core, p, core->now())) {
				/* an idle mount asked nothing: ask now, then
				 * choose with its answer */
				check_at_open(core, prov, asset, *src, deadline);
				continue;
			}
			if (!has_room(p) || p->waitq) {
				/* a lingering session's slot goes to those who
				 * waited for it first (session_unlist grants
				 * it): look again, never take it as ours */
				if (evict_lingering(core, prov, NULL))
					continue;
				/* a slot more from the cluster (a closed session of
				 * ours gave its up first: no call for that) */
				if (!has_room(p) && cluster_need(p) && cluster_take(core, prov))
					continue; /* choose again */
				/* background work there, and transfers parked apart from
				 * their sessions, give way: wait for their end */
				preempt(core, p, 1);
				if (!px_prov_wait_until(core, deadline)) {
					snprintf(why, whylen, "all providers at their limit "
						 "(background work did not end in time)");
					return PX_EBUSY;
				}
				continue;
			}
			if (!a->sources[*src].path)
				return PX_OK;
			/* a path source must open and have the size: check it
			 * outside the lock, then choose again */
			pthread_mutex_unlock(px_prov_lock(core));
			int fd = open_path(core, asset, *src);
			pthread_mutex_lock(px_prov_lock(core));
			if (fd < 0)
				continue;
			close(fd);
			return PX_OK;
		}
		if (cluster_ask(core, asset))
			continue;
		if (!waited) {
			waited = 1;
			px_info("session", "asset %s: open waits: %s", a->id, why);
		}
		if (!px_prov_wait_until(core, deadline))
			return PX_EBUSY;
	}
}

/* Notes an open admit() refused for the status, lets go of prov_lock
 * and logs it. */
static void refuse(struct px_core *core, const struct px_asset *a, enum px_status st,
		   const char *why)
{
	snprintf(core->providers->admit_why, sizeof(core->providers->admit_why), "asset %s: %s", a->id,
		 st == PX_EBUSY ? why : st == PX_ESHUTDOWN ? "shutting down" : why);
	core->providers->admit_when = core->now();
	if (st == PX_EBUSY)
		core->providers->n_admit_busy++;
	pthread_mutex_unlock(px_prov_lock(core));
	px_warn("session", "asset %s: open refused: %s", a->id, why);
}

/* A new session of client on the asset's source src, holding its slot,
 * in the list; NULL without memory. prov_lock held. */
static struct px_session *session_new(struct px_core *core, size_t asset, uint64_t client,
				      size_t src)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct px_session *s = calloc(1, sizeof(*s));
	/* room for the sources the asset may gain while mounted */
	size_t nfds = px_asset_rt(core, asset)->source_cap + 1;
	int *fds = s ? malloc(nfds * sizeof(*fds)) : NULL;
	if (!s || !fds) {
		free(s);
		free(fds);
		return NULL;
	}
	for (size_t i = 0; i < nfds; i++)
		fds[i] = -1;
	s->core = core;
	s->asset = asset;
	s->source = src;
	s->prov = a->sources[src].provider;
	s->client = client;
	s->fds = fds;
	s->nfds = nfds;
	pthread_mutex_init(&s->fd_lock, NULL);
	s->id = atomic_fetch_add(&core->providers->next_session, 1) + 1;
	s->created = core->now();
	s->nhandles = 1;
	s->reserved = 1;
	s->listed = 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->cut_lock, NULL);
	snprintf(s->who, sizeof(s->who), "session %llu asset %s", (unsigned long long)s->id, a->id);
	struct prov_rt *p = px_prov_rt(core, s->prov);
	p->held += contrib(s);
	p->sessions++;
	s->next = core->providers->sessions;
	if (s->next)
		s->next->prev = s;
	core->providers->sessions = s;
	return s;
}

enum px_status px_session_enter(struct px_core *core, size_t asset, uint64_t client,
				int64_t deadline, struct px_session **out)
{
	const struct px_asset *a = &px_cat(core)->assets[asset];
	struct px_session *s;
	enum px_status st;
	char why[300] = "";
	size_t src = 0;

	*out = NULL;
	/* an asset's per-source states exist once it is played */
	if (!px_src_ensure(core, asset))
		return PX_ENOMEM;
	pthread_mutex_lock(px_prov_lock(core));
	int64_t now = core->now();
	expire_sessions(core, now);
	s = joinable(core, asset, client, now);
	if (s) {
		s->nhandles++;
		pthread_mutex_unlock(px_prov_lock(core));
		px_debug("session", "%s: joined by client %llu", s->who, (unsigned long long)client);
		*out = s;
		return PX_OK;
	}
	if ((st = admit(core, asset, deadline, &src, why, sizeof(why))) != PX_OK) {
		refuse(core, a, st, why);
		return st;
	}
	s = session_new(core, asset, client, src);
	pthread_mutex_unlock(px_prov_lock(core));
	if (!s)
		return PX_ENOMEM;
	if (a->sources[src].path && px_session_fd(s, src) < 0) {
		/* it went away between the check and now */
		px_session_leave(s);
		return PX_ENOSOURCE;
	}
	px_debug("session", "%s client %llu: source %s (provider %s)", s->who,
		 (unsigned long long)client,
		 a->sources[src].shown, prov_name(core, s->prov));
	*out = s;
	return PX_OK;
}

int px_session_fd(struct px_session *s, size_t source)
{
	int fd = -1;
	if (!px_source_is_path(s->core, s->asset, source))
		return -1;
	pthread_mutex_lock(&s->fd_lock);
	if (source < s->nfds) {
		if (s->fds[source] < 0)
			s->fds[source] = open_path(s->core, s->asset, source);
		fd = s->fds[source];
	}
	pthread_mutex_unlock(&s->fd_lock);
	return fd;
}

void px_session_leave(struct px_session *s)
{
	struct px_core *core;
	if (!s)
		return;
	core = s->core;
	pthread_mutex_lock(px_prov_lock(core));
	s->nhandles--;
	if (s->nhandles == 0) {
		s->closed_at = core->now();
		/* read only heads and tails: a scan, and what it cost */
		if (atomic_load(&s->served) > 0 && atomic_load(&s->middle) == 0) {
			atomic_fetch_add(&core->providers->n_scans, 1);
			atomic_fetch_add(&core->providers->n_scan_requests,
					 (uint64_t)(s->requests - s->requests_counted));
		}
		s->requests_counted = s->requests;
		if (s->failed || core->cfg->session_ttl_ms == 0 || core->providers->stopping)
			session_unlist(core, s);
		if (session_gone(s))
			session_free_locked(s);
	}
	pthread_cond_broadcast(&core->providers->prov_cond);
	pthread_mutex_unlock(px_prov_lock(core));
}

void px_session_failed(struct px_session *s)
{
	pthread_mutex_lock(px_prov_lock(s->core));
	s->failed = 1;
	pthread_mutex_unlock(px_prov_lock(s->core));
}

/* ---- liveness probes and the monitor */

struct lprobe {
	struct px_core *core;
	size_t prov;
};

static int lp_data(void *ctx, int64_t off, const void *buf, size_t len)
{
	(void)ctx, (void)off, (void)buf, (void)len;
	return 1;
}

static void lp_done(void *ctx, const struct px_fetch_result *res)
{
	struct lprobe *lp = ctx;
	struct px_core *core = lp->core;
	(void)res; /* x_done records the outcome */
	pthread_mutex_lock(px_prov_lock(core));
	px_prov_rt(core, lp->prov)->probing = 0;
	/* an open may wait for this answer (check_at_open) */
	pthread_cond_broadcast(&core->providers->prov_cond);
	pthread_mutex_unlock(px_prov_lock(core));
	free(lp);
}

/* Asks provider i for one byte of source k of the asset, if a slot is
 * free: 1 when asked. prov_lock held, dropped around the submit. */
static int probe_source(struct px_core *core, size_t i, size_t asset, size_t k, int64_t now)
{
	struct prov_rt *p = px_prov_rt(core, i);
	struct lprobe *lp = malloc(sizeof(*lp));
	uint64_t id;

	if (!lp)
		return 0;
	lp->core = core;
	lp->prov = i;
	p->probing = 1;
	p->last_probe = now;
	p->n_probes++;
	struct px_fetch_params fp = px_source_range(core, asset, k, 0, 1);
	/* a failing provider's answer counts only over a new connection */
	fp.fresh_connect = p->bad_since || p->remote_down;
	struct px_fetch_cb cb = { lp_data, lp_done, lp };
	pthread_mutex_unlock(px_prov_lock(core));
	/* no waiting: a provider busy with playback is clearly alive */
	enum px_status st = px_xfer_submit(core, i, NULL, 1, px_now_ms(), &fp, &cb, &id);
	pthread_mutex_lock(px_prov_lock(core));
	if (st != PX_OK) {
		p->probing = 0;
		free(lp);
	}
	return st == PX_OK;
}

/* Asks provider i for one byte of its probe source. prov_lock held. */
static void probe_provider(struct px_core *core, size_t i, int64_t now)
{
	struct prov_rt *p = px_prov_rt(core, i);
	(void)probe_source(core, i, (size_t)p->probe_asset, p->probe_source, now);
}

/* Whether an open that would use provider p checks it first: nothing was
 * heard from it (an answer, a probe) for liveness_idle. prov_lock held. */
static int unheard(const struct px_core *core, const struct prov_rt *p, int64_t now)
{
	const struct px_config *cfg = core->cfg;
	int64_t last = p->last_good > p->last_bad ? p->last_good : p->last_bad;
	if (last < p->last_probe)
		last = p->last_probe;
	return cfg->liveness_interval_ms && cfg->liveness_idle_ms && !p->probing &&
	       !core->providers->stopping && now - last >= cfg->liveness_idle_ms;
}

/*
 * An open about to use source k of the asset, whose provider i was not
 * heard from lately: asks it for one byte and waits for the answer until
 * deadline or connect_timeout, whichever is first; its outcome counts for
 * liveness (x_done) before the open chooses again. prov_lock held, dropped
 * while asking and waiting.
 */
static void check_at_open(struct px_core *core, size_t i, size_t asset, size_t k,
			  int64_t deadline)
{
	struct prov_rt *p = px_prov_rt(core, i);
	int64_t bound = px_now_ms() + core->cfg->connect_timeout_ms;
	if (bound > deadline)
		bound = deadline;
	px_debug("provider", "provider %s: not heard from for %lld s or more: checked before "
		 "an open", px_cat(core)->providers[i].name,
		 (long long)core->cfg->liveness_idle_ms / 1000);
	if (!probe_source(core, i, asset, k, core->now()))
		return;
	while (p->probing && px_prov_wait_until(core, bound))
		;
}

int64_t px_providers_tick(struct px_core *core)
{
	const struct px_config *cfg = core->cfg;
	pthread_mutex_lock(px_prov_lock(core));
	int64_t now = core->now();
	int64_t next = expire_sessions(core, now);
	/* an idle mount asks nothing of a provider that answers: metered
	 * providers count every probe; an open checks a provider unheard of
	 * for liveness_idle instead. A failing one is asked, to come back */
	int quiet = cfg->liveness_idle_ms && !core->providers->sessions;
	for (size_t i = 0; cfg->liveness_interval_ms && i < px_cat(core)->nproviders; i++) {
		struct prov_rt *p = px_prov_rt(core, i);
		if (p->probe_asset < 0 || core->providers->stopping ||
		    (quiet && !p->bad_since && !p->remote_down))
			continue;
		/* any answer within the interval says as much as a probe */
		int64_t last = p->last_good > p->last_bad ? p->last_good : p->last_bad;
		if (last < p->last_probe)
			last = p->last_probe;
		int64_t due = last + cfg->liveness_interval_ms;
		if (!p->probing && now >= due) {
			probe_provider(core, i, now);
			due = now + cfg->liveness_interval_ms;
		}
		if (due < next)
			next = due;
	}
	pthread_mutex_unlock(px_prov_lock(core));
	return next;
}

void px_providers_set_yield(struct px_core *core, int (*fn)(struct px_session *s, int how))
{
	core->providers->yield_idle = fn;
}

void px_providers_set_cluster(struct px_core *core,
			      int (*fn)(struct px_core *core, size_t prov, int n))
{
	core->providers->cluster_acquire = fn;
}

size_t px_provs_cap(const struct px_core *core)
{
	return core->providers->provs_cap;
}

struct px_session *px_sessions_first(const struct px_core *core)
{
	return core->providers->sessions;
}

enum px_status px_providers_init(struct px_core *core)
{
	const struct px_catalog *cat = px_cat(core);
	struct px_providers *pv = calloc(1, sizeof(*pv));
	if (!pv)
		return PX_ENOMEM;
	pv->provs_cap = cat->nproviders + PX_SPARE_PROVIDERS;
	pv->pub.provs = calloc(pv->provs_cap, sizeof(*pv->pub.provs));
	if (!pv->pub.provs) {
		free(pv);
		return PX_ENOMEM;
	}
	core->providers = pv;
	pthread_mutex_init(&pv->pub.lock, NULL);
	px_cond_init_mono(&core->providers->prov_cond);
	if (!core->now)
		core->now = px_now_ms;
	for (size_t i = 0; i < cat->nproviders; i++) {
		px_prov_rt(core, i)->cl = px_cluster_store(core) != NULL;
		px_prov_rt(core, i)->max = cat->providers[i].max_connections;
		px_prov_rt(core, i)->drained = cat->providers[i].drained;
		px_prov_rt(core, i)->probe_asset = -1;
	}
	for (size_t i = 0; i < cat->nassets; i++)
		for (size_t k = 0; k < cat->assets[i].nsources; k++)
			px_provider_note_source(core, cat->assets[i].sources[k].provider,
						cat->assets[i].sources[k].url);
	return PX_OK;
}

void px_provider_fresh(struct px_core *core, size_t prov)
{
	memset(px_prov_rt(core, prov), 0, sizeof(struct prov_rt));
	px_prov_rt(core, prov)->probe_asset = -1;
}

void px_providers_apply(struct px_core *core, size_t prov, const struct px_provider *p,
			int fresh)
{
	struct prov_rt *rt = px_prov_rt(core, prov);
	if (fresh) {
		px_provider_fresh(core, prov);
		rt->cl = px_cluster_store(core) != NULL;
	}
	rt->max = p->max_connections;
	if (fresh || !p->implicit)
		rt->drained = p->drained;
}

int px_providers_stopping_locked(struct px_core *core)
{
	return core->providers->stopping;
}

int px_providers_stopping(struct px_core *core)
{
	pthread_mutex_lock(px_prov_lock(core));
	int s = core->providers->stopping;
	pthread_mutex_unlock(px_prov_lock(core));
	return s;
}

void px_provider_note_source(struct px_core *core, size_t prov, const char *url)
{
	struct prov_rt *p = px_prov_rt(core, prov);
	char hp[300];
	if (!url || px_catalog_bad_url(url, hp, sizeof(hp)))
		return;
	if (!p->host[0])
		snprintf(p->host, sizeof(p->host), "%s", hp);
	else if (strcmp(p->host, hp) != 0)
		atomic_store(&p->multi_host, 1);
}

void px_providers_start(struct px_core *core)
{
	const struct px_catalog *cat = px_cat(core);
	pthread_mutex_lock(px_prov_lock(core));
	/* each provider's probe asks for the first byte of its first listed
	 * HTTP source */
	for (size_t i = 0; i < cat->nassets; i++) {
		if (!px_asset_rt(core, i)->listed)
			continue;
		for (size_t k = 0; k < cat->assets[i].nsources; k++) {
			struct prov_rt *p = px_prov_rt(core, cat->assets[i].sources[k].provider);
			if (!cat->assets[i].sources[k].url || p->probe_asset >= 0)
				continue;
			p->probe_asset = (long)i;
			p->probe_source = k;
			p->last_probe = core->now();
		}
	}
	pthread_mutex_unlock(px_prov_lock(core));
}

void px_providers_release(struct px_core *core)
{
	if (!core->providers)
		return;
	pthread_mutex_lock(px_prov_lock(core));
	core->providers->stopping = 1;
	pthread_cond_broadcast(&core->providers->prov_cond);
	pthread_mutex_unlock(px_prov_lock(core));
}

void px_sessions_free_all(struct px_core *core)
{
	if (!core->providers)
		return;
	pthread_mutex_lock(px_prov_lock(core));
	while (core->providers->sessions) {
		struct px_session *s = core->providers->sessions;
		session_unlist(core, s);
		if (session_gone(s))
			session_free_locked(s);
		else
			px_error("session", "%s: still has %d transfer(s) at exit", s->who, s->xfers);
	}
	pthread_mutex_unlock(px_prov_lock(core));
}

void px_providers_free(struct px_core *core)
{
	struct px_providers *pv = core->providers;
	if (!pv)
		return;
	pthread_cond_destroy(&pv->prov_cond);
	pthread_mutex_destroy(&pv->pub.lock);
	free(pv->pub.provs);
	free(pv);
	core->providers = NULL;
}

enum px_status px_session_switch(struct px_session *s, size_t source)
{
	struct px_core *core = s->core;
	size_t prov = px_cat(core)->assets[s->asset].sources[source].provider;
	enum px_status st = PX_OK;

	pthread_mutex_lock(px_prov_lock(core));
	struct prov_rt *to = px_prov_rt(core, prov);
	if (prov != s->prov && !has_room(to) && cluster_need(to))
		(void)cluster_take(core, prov);
	/* a lingering session's slot goes to those who waited for it first
	 * (session_unlist grants it): look again after each */
	while (prov != s->prov && !has_room(to) && evict_lingering(core, prov, s))
		;
	if (prov != s->prov && !has_room(to)) {
		/* background work there (and parked transfers) gives way; a
		 * cutover does not wait */
		preempt(core, to, 1);
		st = PX_EBUSY;
		goto out;
	}
	if (prov != s->prov) {
		struct prov_rt *from = px_prov_rt(core, s->prov);
		/* its open transfers stay counted where they are, one slot each,
		 * until they end; the reservation moves */
		int before = contrib(s);
		from->held -= before - s->xfers;
		from->sessions--;
		s->xfers_moved += s->xfers;
		s->xfers = 0;
		s->gen++;
		s->prov = prov;
		to->sessions++;
		to->held += contrib(s);
		grant_waiters(core, from);
	}
	atomic_store(&s->source, source);
	pthread_cond_broadcast(&core->providers->prov_cond);
out:
	pthread_mutex_unlock(px_prov_lock(core));
	return st;
}

enum px_status px_session_switch_wait(struct px_session *s, size_t source, int64_t deadline)
{
	struct px_core *core = s->core;
	size_t prov = px_cat(core)->assets[s->asset].sources[source].provider;
	enum px_status st;
	while ((st = px_session_switch(s, source)) == PX_EBUSY) {
		pthread_mutex_lock(px_prov_lock(core));
		int more = !core->providers->stopping && (has_room(px_prov_rt(core, prov)) ||
					       px_prov_wait_until(core, deadline));
		pthread_mutex_unlock(px_prov_lock(core));
		if (!more)
			break;
	}
	return st;
}

void px_provider_auth_failed(struct px_core *core, size_t prov, const char *why)
{
	pthread_mutex_lock(px_prov_lock(core));
	struct prov_rt *p = px_prov_rt(core, prov);
	p->n_auth++;
	if (!p->auth_failed) {
		p->auth_failed = 1;
		snprintf(p->auth_why, sizeof(p->auth_why), "authentication refused: %s", why);
		px_error("provider", "provider %s: authentication refused (%s): its credentials "
			 "are not used for new sessions or cutovers", px_cat(core)->providers[prov].name,
			 why);
	}
	pthread_mutex_unlock(px_prov_lock(core));
}

/* ---- the control API */

enum px_status px_provider_drain(struct px_core *core, const char *provider, int drained)
{
	const struct px_catalog *cat = px_cat(core);
	size_t i = 0;

	while (i < cat->nproviders && strcmp(cat->providers[i].name, provider) != 0)
		i++;
	if (i == cat->nproviders)
		return PX_ENOTFOUND;
	pthread_mutex_lock(px_prov_lock(core));
	int was = px_prov_rt(core, i)->drained;
	px_prov_rt(core, i)->drained = drained ? 1 : 0;
	/* an open waiting for a slot may choose a resumed provider */
	pthread_cond_broadcast(&core->providers->prov_cond);
	pthread_mutex_unlock(px_prov_lock(core));
	if (was != (drained ? 1 : 0))
		px_info("provider", "provider %s %s", provider,
			drained ? "drained: no new sessions, open ones go on"
				: "resumed: takes new sessions again");
	return PX_OK;
}

/* ---- read-only queries */

int px_provider_spare(struct px_core *core, size_t prov)
{
	struct prov_rt *p = px_prov_rt(core, prov);
	pthread_mutex_lock(px_prov_lock(core));
	int n = p->waitq ? 0 : p->max == 0 ? INT_MAX : p->max - p->held;
	pthread_mutex_unlock(px_prov_lock(core));
	return n > 0 ? n : 0;
}

void px_provider_cluster_apply(struct px_core *core, size_t prov, int delta, int others_slots,
			       int others_sessions, int degraded, int wanted)
{
	struct prov_rt *p = px_prov_rt(core, prov);
	pthread_mutex_lock(px_prov_lock(core));
	p->granted += delta;
	if (p->granted < 0)
		p->granted = 0;
	p->others_slots = others_slots;
	p->others_sessions = others_sessions;
	p->cl_degraded = degraded;
	if (wanted)
		(void)evict_lingering(core, prov, NULL);
	grant_waiters(core, p);
	pthread_cond_broadcast(&core->providers->prov_cond);
	pthread_mutex_unlock(px_prov_lock(core));
}

void px_provider_cluster_liveness(struct px_core *core, size_t prov, int remote_down,
				  int answered)
{
	struct prov_rt *p = px_prov_rt(core, prov);
	const char *name = px_cat(core)->providers[prov].name;
	pthread_mutex_lock(px_prov_lock(core));
	if (answered && p->bad_since) {
		px_info("provider", "provider %s answers again (seen by another host)", name);
		p->bad_since = 0;
	}
	if (remote_down && !p->remote_down) {
		px_warn("provider", "provider %s is down (found by another host of the cluster)",
			name);
		if (!p->bad_since)
			p->bad_mark = p->submits;
		if (!p->why[0])
			snprintf(p->why, sizeof(p->why), "found down by another host of the cluster");
	}
	p->remote_down = remote_down;
	pthread_mutex_unlock(px_prov_lock(core));
}

void px_provider_liveness_times(const struct px_core *core, size_t prov, int64_t now,
				int64_t *down_since, int64_t *last_good)
{
	const struct prov_rt *p = px_prov_rt(core, prov);
	*down_since = p->bad_since && now - p->bad_since >= core->cfg->liveness_ttl_ms
		? p->bad_since : 0;
	*last_good = p->last_good;
}

long px_provider_of_session(struct px_core *core, uint64_t session_id)
{
	long prov = -1;
	pthread_mutex_lock(px_prov_lock(core));
	for (const struct px_session *s = core->providers->sessions; s; s = s->next)
		if (s->id == session_id)
			prov = (long)s->prov;
	pthread_mutex_unlock(px_prov_lock(core));
	return prov;
}

int px_provider_sessions(struct px_core *core, size_t prov)
{
	int n = -1;
	pthread_mutex_lock(px_prov_lock(core));
	if (prov < px_cat(core)->nproviders)
		n = px_prov_rt(core, prov)->sessions;
	pthread_mutex_unlock(px_prov_lock(core));
	return n;
}

/* ---- the status's copy (px_providers_stats) */

static enum px_snap_state snap_state(const struct prov_rt *p, int64_t now, int64_t ttl)
{
	if (p->drained)
		return PX_SNAP_DRAINED;
	if (p->auth_failed)
		return PX_SNAP_AUTH_ERROR;
	if ((p->bad_since && now - p->bad_since >= ttl) || p->remote_down)
		return PX_SNAP_DOWN;
	if (p->bad_since)
		return PX_SNAP_FAILING;
	return PX_SNAP_LIVE;
}

static void snap_session(const struct px_core *core, const struct px_session *x,
			 struct px_snap_session *o, int *oom)
{
	const struct px_asset *a = &px_cat(core)->assets[x->asset];
	o->id = x->id;
	o->client = x->client;
	o->asset = px_snap_copy(a->id, oom);
	o->path = px_snap_copy(a->path, oom);
	o->source = px_snap_copy(a->sources[atomic_load(&x->source)].shown, oom);
	o->provider = px_snap_copy(px_cat(core)->providers[x->prov].name, oom);
	o->offset = atomic_load(&x->offset);
	o->served = atomic_load(&x->served);
	o->created = x->created;
	o->nhandles = x->nhandles;
	o->xfers = x->xfers;
	o->extra = x->xfers_extra;
	o->exhausted = x->exhausted;
	o->playback = atomic_load(&x->middle) >= PX_PLAY_BYTES;
	for (int i = 0; i < PX_SESSION_OPENERS; i++)
		o->openers[i] = atomic_load(&x->openers[i]);
	o->ino = atomic_load(&x->ino);
	px_asset_regions(core->cfg, px_asset_rt(core, x->asset)->size, &o->head_end,
			 &o->tail_start);
}

enum px_status px_providers_stats(struct px_core *core, int rows, struct px_providers_stats *s)
{
	int oom = 0;
	size_t n = 0;

	pthread_mutex_lock(px_prov_lock(core));
	s->now = core->now();
	s->nassets = px_cat(core)->nassets; /* grows under prov_lock and vf_lock */
	/* changed only where a reload publishes its tree, under reload_lock
	 * alone: read without it, as a word (snapshot.c, Locks) */
	s->nlisted = px_sources_listed(core);
	s->nprovs = px_cat(core)->nproviders;
	s->provs = calloc(s->nprovs + 1, sizeof(*s->provs));
	if (!s->provs) {
		oom = 1;
		goto out;
	}
	for (size_t i = 0; i < s->nprovs; i++) {
		const struct prov_rt *p = px_prov_rt(core, i);
		struct px_snap_provider *o = &s->provs[i];
		o->name = px_snap_copy(px_cat(core)->providers[i].name, &oom);
		o->state = snap_state(p, s->now, core->cfg->liveness_ttl_ms);
		memcpy(o->why, p->why, sizeof(o->why));
		o->why[sizeof(o->why) - 1] = '\0';
		o->auth_failed = p->auth_failed;
		memcpy(o->auth_why, p->auth_why, sizeof(o->auth_why));
		o->auth_why[sizeof(o->auth_why) - 1] = '\0';
		o->sessions = p->sessions;
		o->xfers = p->xfers;
		o->bg = p->bg;
		o->held = p->held;
		o->max = p->max;
		o->cl = p->cl;
		o->granted = p->granted;
		o->others_slots = p->others_slots;
		o->others_sessions = p->others_sessions;
		o->cl_degraded = p->cl_degraded;
		o->drained = p->drained;
		o->last_good = p->last_good;
		o->n_ok = p->n_ok;
		o->n_bad = p->n_bad;
		o->n_waits = p->n_waits;
		o->n_busy = p->n_busy;
		o->n_preempted = p->n_preempted;
		o->n_evicted = p->n_evicted;
		o->n_probes = p->n_probes;
		o->n_auth = p->n_auth;
	}
	for (const struct px_session *x = core->providers->sessions; x; x = x->next) {
		if (x->nhandles)
			s->sessions_open++;
		else
			s->sessions_lingering++;
		if (atomic_load(&x->middle) >= PX_PLAY_BYTES)
			s->sessions_playback++;
		else
			s->sessions_scan++;
		n++;
	}
	if (rows) {
		s->sessions = calloc(n + 1, sizeof(*s->sessions));
		if (!s->sessions) {
			oom = 1;
			goto out;
		}
		for (const struct px_session *x = core->providers->sessions; x; x = x->next)
			snap_session(core, x, &s->sessions[s->nsessions++], &oom);
	}
	s->n_admit_busy = core->providers->n_admit_busy;
	memcpy(s->admit_why, core->providers->admit_why, sizeof(s->admit_why));
	s->admit_why[sizeof(s->admit_why) - 1] = '\0';
	s->admit_when = core->providers->admit_when;
out:
	s->n_scans = atomic_load(&core->providers->n_scans);
	s->n_scan_requests = atomic_load(&core->providers->n_scan_requests);
	px_histo_snapshot(&core->providers->h_ttfb, &s->h_ttfb);
	pthread_mutex_unlock(px_prov_lock(core));
	return oom ? PX_ENOMEM : PX_OK;
}
