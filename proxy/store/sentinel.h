/*
 * sentinel.h - the store behind Redis Sentinel (internal to proxy/store:
 * kvstore.c is its only user). A sentinel store is named by
 *   redis-sentinel://HOST[:PORT]+HOST[:PORT]+.../NAME
 * ('+' between the sentinels, because -o separates options with commas;
 * PORT 26379 by default; HOST may be [an:ipv6:address]); NAME is the
 * master's name in the sentinels' configuration (sentinel monitor NAME).
 * The sentinels are asked SENTINEL get-master-addr-by-name NAME; kvstore.c
 * then connects to that address and checks ROLE, and keeps a watch on
 * every sentinel's announcements to follow a failover as soon as it is
 * made. rediss-sentinel://...
 * does all of it over TLS (tls.h): the sentinels and the master.
 */
#ifndef SEAMFS_SENTINEL_H
#define SEAMFS_SENTINEL_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

#define PX_SENTINELS_MAX 8
#define PX_SENTINEL_PORT 26379
#define PX_SENTINEL_NAME_MAX 128
#define PX_SENTINEL_SCHEME "redis-sentinel://"
#define PX_SENTINEL_TLS_SCHEME "rediss-sentinel://"

struct px_hostport {
	char host[256];
	int port;
};

struct px_sentinels {
	struct px_hostport at[PX_SENTINELS_MAX];
	int n;
	char name[PX_SENTINEL_NAME_MAX + 1];
	int tls;     /* rediss-sentinel://: sentinels and master over TLS */
};

struct px_tls;

/*
 * Parses "HOST[:PORT]" or "[V6]:PORT" of n bytes at s into *out (port
 * defport when none). Returns NULL on success, else what is wrong ("no
 * host", "bad port", "bad [IPv6] host") for the caller's message.
 */
const char *px_hostport_parse(const char *s, size_t n, int defport, struct px_hostport *out);

/*
 * Parses a redis-sentinel:// URL (above), or a rediss-sentinel:// one
 * (out->tls set; its query, from '?', is left to the caller). PX_EINVAL
 * with err naming the URL and the part that is wrong (no sentinel, a bad
 * port, no NAME, more than PX_SENTINELS_MAX sentinels, user information
 * in it).
 */
enum px_status px_sentinel_parse(const char *url, struct px_sentinels *out, char *err,
				 size_t errlen) PX_WUR;

/*
 * Asks the sentinels for the master of s->name, starting with sentinel
 * *next and going round once; each sentinel gets at most timeout_ms to
 * connect and as much to answer, over TLS when tls is not NULL (the
 * handshake within the connect's timeout). password (NULL: none) is sent
 * only to a sentinel that wants one. PX_OK with *master and *next the sentinel that
 * answered (asked first next time). Else err says what each sentinel
 * answered (the last one in full) and the status is PX_ECONNECT (none
 * answered), PX_ENOTFOUND (they do not know NAME) or PX_EAUTH. Blocking;
 * the caller holds whatever lock guards its connection.
 */
enum px_status px_sentinel_ask(const struct px_sentinels *s, const char *password,
			       struct px_tls *tls, int *next, int64_t timeout_ms,
			       struct px_hostport *master, char *err, size_t errlen) PX_WUR;

/*
 * A subscription to the announcements of the sentinel at at (the design
 * block of sentinel.c): +switch-master, and the leader's naming of the
 * replica it promotes. The connect and each SUBSCRIBE confirmation are
 * bounded by timeout_ms, over TLS when tls is not NULL; password (NULL:
 * none) is sent when the sentinel wants one. PX_OK with *out, to free
 * with px_sentinel_watch_free; else err says why. Blocking; the caller
 * holds whatever lock guards the watch.
 */
struct px_sentinel_watch;
enum px_status px_sentinel_watch_open(const struct px_hostport *at, const char *password,
				      struct px_tls *tls, int64_t timeout_ms,
				      struct px_sentinel_watch **out, char *err, size_t errlen) PX_WUR;
void px_sentinel_watch_free(struct px_sentinel_watch *w);

/* What a watch heard of one master (the last of each kind; port 0: none). */
struct px_sentinel_news {
	struct px_hostport switched;  /* +switch-master: the new master */
	struct px_hostport promoting; /* the replica the leader makes master */
};

/*
 * Takes what the sentinel sent, without waiting. PX_OK with *news when
 * something was said of the master named name, PX_EAGAIN when nothing
 * was, PX_ECONNECT when the connection is gone (free the watch).
 */
enum px_status px_sentinel_watch_read(struct px_sentinel_watch *w, const char *name,
				      struct px_sentinel_news *news) PX_WUR;

/*
 * ROLE of the Redis at at (a replica the leader promotes), on a
 * connection of its own bounded like a sentinel's question: PX_OK when it
 * says master, PX_EAGAIN when it says something else, else why it did
 * not answer. password is sent when it wants one. Blocking.
 */
enum px_status px_sentinel_is_master(const struct px_hostport *at, const char *password,
				     struct px_tls *tls, int64_t timeout_ms) PX_WUR;

/* The watch's socket, readable when something came (to poll, not to read
 * or close). */
int px_sentinel_watch_fd(const struct px_sentinel_watch *w);

#endif
