/*
 * kvstore.h - the shared store of cluster mode: a Redis client (hiredis)
 * that every layer above base may use, and nothing else of seamfs.
 *
 * One store is one Redis database named by a URL:
 *   redis://HOST[:PORT][/DB]     TCP (PORT 6379, DB 0 by default; HOST may
 *                                be [an:ipv6:address])
 *   redis+unix:///PATH[?db=N]    a UNIX socket
 *   redis-sentinel://HOST[:PORT]+HOST[:PORT]+.../NAME
 *                                the master named NAME as Redis Sentinel
 *                                says (sentinel.h; PORT 26379 by default),
 *                                followed through failovers
 *   rediss://HOST[:PORT][/DB][?TLS], rediss-sentinel://...[?TLS]
 *                                the same over TLS; TLS is the CA file,
 *                                client certificate and key, and name to
 *                                verify, as tls.h says
 * A password, when Redis wants one, is read from a file
 * (store_password_file=, first line), never from the URL or a command
 * line: a URL with user information is refused. Every key seamfs writes
 * lives under one prefix (cluster=NAME, default "seamfs"), so that two
 * clusters can share one Redis: px_store_key() makes "NAME:...".
 *
 * Bounds. Connecting is bounded by PX_STORE_CONNECT_MS, every command by
 * PX_STORE_COMMAND_MS. A broken connection is dropped and made again on
 * a later call, with a backoff (250 ms, then PX_STORE_BACKOFF_MAX_MS):
 * while it runs, calls fail at once (PX_ECONNECT, the last error in
 * px_store_state) instead of trying, so a store that is down costs a
 * caller nothing. No call of this layer ever waits longer than
 * PX_STORE_COMMAND_MS for the connection's lock plus PX_STORE_CONNECT_MS
 * + PX_STORE_COMMAND_MS on the wire; behind Sentinel a connect first asks
 * the sentinels, each bounded by 2 x 500 ms (a dead one on loopback
 * refuses at once), and a fencing write adds at most PX_STORE_WAIT_MS.
 *
 * Behind Sentinel the store also keeps watches: a subscription to each
 * sentinel's announcements (sentinel.h), opened by a call on a live
 * connection (one a call, 2 x 500 ms at most; one that cannot be had
 * again after PX_STORE_WATCH_RETRY_MS, PX_STORE_WATCH_SPARE_MS while
 * another is up) and read, without waiting, at the start of every call.
 * An announcement that the master moved ends the backoff and the
 * connection to the old one: that call connects to the new master at once
 * instead of at the next retry. Before it, the leader sentinel names the
 * replica it promotes: calls then ask that replica's ROLE (a connection
 * of its own, bounded like a sentinel's question, at most every
 * PX_STORE_PROMOTE_POLL_MS, for PX_STORE_PROMOTE_MS at most) and the first that hears
 * "master" connects to it likewise. px_store_wait() lets a caller that
 * retries sleep until then.
 *
 * Callers on a latency path (a FUSE read) keep their own answers and ask
 * the store only when a local answer will not do; px_store_up() tells,
 * without a call, whether the last call got an answer.
 *
 * Threads. One connection per store, guarded by a mutex: calls from
 * several threads are serialised (each waits at most PX_STORE_COMMAND_MS
 * for the lock, then fails with PX_ELOCKTIMEOUT). The calls seamfs makes are
 * small and rare (heartbeats, lease and playlist updates), far from a
 * Redis round trip per read; a caller that needs many in parallel makes a
 * store of its own. The state and counters are read under the same lock.
 */
#ifndef SEAMFS_KVSTORE_H
#define SEAMFS_KVSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

#define PX_STORE_CONNECT_MS 1000
#define PX_STORE_COMMAND_MS 1000
#define PX_STORE_BACKOFF_MAX_MS 500 /* a failover is followed this soon */
#define PX_STORE_WAIT_MS 250        /* WAIT 1 after a fencing write */
#define PX_STORE_ROLE_CHECK_MS 1000 /* ROLE again before a call after this */
#define PX_STORE_WATCH_RETRY_MS 5000 /* a sentinel watch again after this */
#define PX_STORE_WATCH_SPARE_MS 30000 /* the same while another one is watched */
#define PX_STORE_PROMOTE_MS 3000     /* a promoted replica's ROLE asked this long */
#define PX_STORE_PROMOTE_POLL_MS 50  /* and this often */
#define PX_STORE_PREFIX_MAX 64
#define PX_STORE_DEFAULT_PREFIX "seamfs"

struct px_store;

/* A reply, copied out of hiredis's (callers never see hiredis). */
enum px_reply_type { PX_REPLY_NIL, PX_REPLY_INT, PX_REPLY_STR, PX_REPLY_STATUS,
		     PX_REPLY_ERR, PX_REPLY_ARRAY };
struct px_reply {
	enum px_reply_type type;
	long long integer;
	char *str;              /* NUL-terminated; STR, STATUS, ERR */
	size_t len;
	struct px_reply *el;    /* ARRAY */
	size_t n;
};
void px_reply_free(struct px_reply *r);
/* Element i of an array reply as a string ("" when not one), or as a
 * number (0 when not one). */
const char *px_reply_str(const struct px_reply *r, size_t i);
long long px_reply_int(const struct px_reply *r, size_t i);

/*
 * Checks a store URL (see above); on PX_EINVAL err says what is wrong.
 * The options parser calls it so that a bad URL is a bad command line.
 */
enum px_status px_store_check_url(const char *url, char *err, size_t errlen) PX_WUR;

/* Checks a cluster name: 1 to PX_STORE_PREFIX_MAX of [A-Za-z0-9._-]. */
enum px_status px_store_check_prefix(const char *name, char *err, size_t errlen) PX_WUR;

/*
 * Makes a store for url (password_file NULL: no AUTH; prefix NULL: the
 * default). Reads the password file now (PX_EIO / PX_EAUTH with err
 * naming the file). Does not connect: px_store_connect() does, or the
 * first call.
 */
enum px_status px_store_new(const char *url, const char *password_file, const char *prefix,
			    struct px_store **out, char *err, size_t errlen) PX_WUR;
void px_store_free(struct px_store *s);

/*
 * Connects now (AUTH, SELECT, PING, and the clock's offset by TIME),
 * whatever the backoff says. For the mount, to fail early with a message
 * naming the store: PX_ECONNECT (unreachable), PX_ETIMEDOUT, PX_EAUTH
 * (refused password, or a password wanted), PX_EBADRESP (not a Redis).
 */
enum px_status px_store_connect(struct px_store *s, char *err, size_t errlen) PX_WUR;

/*
 * One command, argv-style (argvlen NULL: strlen of each). *out (NULL
 * allowed: the reply is dropped) is the reply, to free with
 * px_reply_free; an error reply is PX_EBADRESP with *out holding it (an
 * error naming AUTH: PX_EAUTH). PX_ECONNECT / PX_ETIMEDOUT: no answer
 * (the connection is dropped, the next call after the backoff makes it
 * again); PX_ELOCKTIMEOUT: the lock was not had in time.
 */
enum px_status px_store_call(struct px_store *s, int argc, const char **argv,
			     const size_t *argvlen, struct px_reply **out) PX_WUR;

/* EVAL of a Lua script with nkeys keys and nargs arguments, as
 * px_store_call. */
enum px_status px_store_eval(struct px_store *s, const char *script, int nkeys,
			     const char **keys, int nargs, const char **args,
			     struct px_reply **out) PX_WUR;

/*
 * As px_store_eval, for a write that fencing relies on (a lease's claim or
 * renewal, a commit): when ROLE named a replica, WAIT 1 PX_STORE_WAIT_MS
 * follows on the same connection, so that a failover right after the
 * answer keeps the write. The write stands (PX_OK) when no replica
 * acknowledges in time; px_store_state counts it in unacked.
 */
enum px_status px_store_eval_acked(struct px_store *s, const char *script, int nkeys,
				   const char **keys, int nargs, const char **args,
				   struct px_reply **out) PX_WUR;

/* Whether s follows a master through Redis Sentinel (no call). */
int px_store_sentinel(const struct px_store *s);

/* The highest fencing generation this client saw (px_store_note_gen,
 * from any thread): a claim never hands out one at or below it, even
 * from a master that a failover rolled back. */
void px_store_note_gen(struct px_store *s, uint64_t gen);
uint64_t px_store_gen_floor(struct px_store *s);

/* "PREFIX:" + the formatted rest into buf; returns the length, or -1 when
 * it did not fit. */
int px_store_key(const struct px_store *s, char *buf, size_t cap, const char *fmt, ...)
	PX_PRINTF(4, 5);
const char *px_store_prefix(const struct px_store *s);
/* The URL as logs and the status show it (it never holds a password). */
const char *px_store_url(const struct px_store *s);
const char *px_store_password_file(const struct px_store *s);

/* The store's clock, wall milliseconds: this host's clock plus the offset
 * to Redis's TIME measured at the last connect (hosts compare times made
 * on different machines through it). No call. */
int64_t px_store_now_ms(struct px_store *s);

/* When (monotonic ms) the store last answered again after it did not (an
 * outage, a failover), 0: never. Nobody could write to it meanwhile:
 * heartbeats judged by their age must allow for that. Any thread. */
int64_t px_store_back_ms(struct px_store *s);

/*
 * Sleeps ms, or less: behind Sentinel, until a watch has something to
 * read (an announcement: the next call goes to the new master), or while
 * a promoted replica is asked, until its next ROLE is due. For a caller
 * that retries a store that does not answer. Any thread; the store's lock
 * is not held while it waits.
 */
void px_store_wait(struct px_store *s, int64_t ms);

/* Whether the last call got an answer (no call). */
int px_store_up(struct px_store *s);

struct px_store_state {
	int connected;             /* the last call got an answer */
	int64_t latency_us;        /* its round trip; -1 before any */
	char last_error[256];      /* "" when none yet */
	int64_t last_error_age_ms; /* -1: none */
	int64_t down_since_ms;     /* monotonic ms the store stopped answering, 0: up */
	int64_t clock_offset_ms;   /* Redis's TIME minus ours */
	uint64_t calls, errors, connects;
	char master[300];          /* the address in use ("" before any connect) */
	char master_name[129];     /* behind Sentinel: NAME; else "" */
	int sentinels;             /* how many the URL names; 0: not behind Sentinel */
	int replicas;              /* ROLE's connected replicas; -1: unknown */
	uint64_t failovers;        /* master changes seen since the mount */
	int64_t failover_wall_ms;  /* wall ms of the last one, 0: none */
	char failover_from[300], failover_to[300];
	uint64_t unacked;          /* fencing writes no replica acknowledged in time */
	uint64_t announced;        /* sentinels' announcements that the master moved */
	int failover_announced;    /* the last failover was followed on one */
	char watching[300];        /* the first sentinel whose announcements are read, "" none */
};
void px_store_state(struct px_store *s, struct px_store_state *out);

#endif
