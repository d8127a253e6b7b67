/*
 * lease.h - who owns the work of a transcoded asset.
 *
 * A lease is held per key (the asset id). It carries a session id made by
 * the server when the work started (kept across takeovers), the owner
 * (host:pid:random of the holder), a generation that grows by one at every
 * claim, and the wall-clock time of the last heartbeat. Claiming is a
 * compare-and-set on the generation: it succeeds only when the stored
 * generation is the one the claimant saw, so two supervisors cannot both
 * take over an orphan. A holder renews by heartbeat; a lease not renewed
 * for orphan_after is orphaned.
 *
 * The store is an ops table, so a Redis backend (SET NX PX or a Lua
 * compare-and-set) can sit beside the embedded file backend. Time is wall
 * clock in milliseconds (leases are compared across processes and hosts)
 * and comes from the store's clock, which tests replace.
 */
#ifndef SEAMFS_LEASE_H
#define SEAMFS_LEASE_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

#define PX_LEASE_KEY_MAX 200

struct px_lease {
	char key[PX_LEASE_KEY_MAX + 1];
	char session[33];       /* 32 hex digits */
	char owner[128];        /* host:pid:random */
	uint64_t gen;           /* >= 1 once claimed */
	int64_t heartbeat_ms;   /* wall clock of the last claim or renewal */
	int released;           /* given up on purpose (still counts for grace) */
	int64_t writer_pid;     /* the writer process working under it, 0: none */
};

struct px_lease_ops {
	/* Stores *l as generation expect_gen + 1 if the stored generation is
	 * expect_gen (0: nothing stored). PX_EFENCED: someone else claimed
	 * first (l->gen then holds the stored generation). */
	enum px_status (*claim)(void *impl, uint64_t expect_gen, struct px_lease *l);
	/* Rewrites the stored lease with l->heartbeat_ms if l->gen is still the
	 * stored generation; PX_EFENCED when it is not. */
	enum px_status (*renew)(void *impl, const struct px_lease *l);
	/* The stored lease of key; PX_ENOTFOUND when none. */
	enum px_status (*get)(void *impl, const char *key, struct px_lease *out);
	/* Removes every trace of key's lease (cleanup after the grace). */
	enum px_status (*drop)(void *impl, const char *key);
	void (*free)(void *impl);
};

struct px_lease_store;

/*
 * A store over ops/impl (takes ownership of impl: ops->free frees it).
 * now_ms NULL: the real wall clock; otherwise a fake for tests, called
 * with clk.
 */
enum px_status px_lease_store_new(const struct px_lease_ops *ops, void *impl,
				  int64_t (*now_ms)(void *clk), void *clk,
				  struct px_lease_store **out) PX_WUR;
void px_lease_store_free(struct px_lease_store *s);

/*
 * The embedded backend: files DIR/KEY.lease.GEN, a claim being an
 * exclusive link() of the next generation's file (atomic on local file
 * systems and NFS), a renewal a rename over one's own generation file.
 * DIR is created if missing. Keys: [A-Za-z0-9._-], other bytes are escaped.
 */
enum px_status px_lease_files_new(const char *dir, int64_t (*now_ms)(void *clk), void *clk,
				  struct px_lease_store **out) PX_WUR;

/* Whether name (a file name, no '/') is one the file backend makes in its
 * directory: KEY.lease.GEN or its temporary .lease-PID-RANDOM.tmp. Used to
 * tell a lease directory an older seamfs made from someone else's. */
int px_lease_files_own(const char *name);

int64_t px_lease_now(const struct px_lease_store *s);

/*
 * Claims key: takes over the stored lease if it is orphaned (or released,
 * or none is stored, or owner already holds it) by compare-and-set, keeping its session id (a new one
 * is made when none was stored). owner is ours. On PX_OK *out is the
 * lease we hold. PX_EFENCED: a live owner holds it, or another claimant
 * won the race; *out then shows the stored lease.
 */
enum px_status px_lease_claim(struct px_lease_store *s, const char *key, const char *owner,
			      int64_t orphan_after_ms, struct px_lease *out) PX_WUR;

/* The raw compare-and-set: stores *l as generation expect_gen + 1 if the
 * stored generation is still expect_gen. PX_EFENCED otherwise. */
enum px_status px_lease_cas(struct px_lease_store *s, uint64_t expect_gen,
			    struct px_lease *l) PX_WUR;

/* Renews l (heartbeat now). PX_EFENCED: the lease was taken over: stop. */
enum px_status px_lease_heartbeat(struct px_lease_store *s, struct px_lease *l) PX_WUR;

/* Marks l released (its holder stops on purpose); keeps the record, whose
 * grace then protects the work files. PX_EFENCED as for heartbeat. */
enum px_status px_lease_release(struct px_lease_store *s, struct px_lease *l) PX_WUR;

/* The stored lease of key; PX_ENOTFOUND when none. */
enum px_status px_lease_get(struct px_lease_store *s, const char *key,
			    struct px_lease *out) PX_WUR;

/* Removes key's lease records. */
enum px_status px_lease_drop(struct px_lease_store *s, const char *key) PX_WUR;

/* Whether l is orphaned at now: released, or no heartbeat for
 * orphan_after_ms. */
int px_lease_orphaned(const struct px_lease *l, int64_t now_ms, int64_t orphan_after_ms);

/* Whether l still protects its work files at now: live, or expired or
 * released less than grace_ms ago. */
int px_lease_protects(const struct px_lease *l, int64_t now_ms, int64_t orphan_after_ms,
		      int64_t grace_ms);

/* "host:pid:random" for this process into buf. */
void px_lease_make_owner(char *buf, size_t cap);
/* The same with host given (cluster mode: the host_id); NULL: the host
 * name. */
void px_lease_make_owner_host(char *buf, size_t cap, const char *host);

#endif
