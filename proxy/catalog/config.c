/*
 * config.c - parsing and validating the mount's settings.
 *
 * Every option goes through px_config_set(), whether it comes from -o on the
 * command line, from fstab, or from the catalog's "settings" object, so they
 * all accept the same values and fail with the same messages.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hosts.h"
#include "kvstore.h"

const struct px_config_option px_config_options[] = {
	{ "read_timeout", "SECONDS", "bound on one read; EIO when it expires (default 30)" },
	{ "connect_timeout", "SECONDS", "bound on connecting to a source (default 10)" },
	{ "probe_timeout", "SECONDS", "bound on discovering sizes at mount (default 20)" },
	{ "retries", "N", "extra attempts of a failed request on the same source (default 3)" },
	{ "state_dir", "DIR", "where discovered sizes are remembered (default /var/lib/seamfs as root, else $XDG_STATE_HOME/seamfs)" },
	{ "ca_file", "PATH", "CA bundle for https sources (default: the system store)" },
	{ "insecure", NULL, "do not verify TLS certificates (testing only)" },
	{ "keeper", NULL, "a keeper process holds the mount and restarts a worker that dies, with no error for readers (Linux 6.9+; docs/restart.md); on by default, keeper=0: the daemon serves the mount itself" },
	{ "log_level", "LEVEL", "error, warn, info or debug (default info)" },
	{ "log_file", "PATH", "append the log to PATH, reopened on SIGHUP; without -f the log goes there only (default: stderr with -f, else syslog)" },
	{ "readahead_budget", "SIZE", "memory read-ahead windows and cached heads/tails share (default 256M)" },
	{ "readahead_seconds", "SECONDS", "a stream reads at most this many seconds of its reader's pace ahead of the reader (at least 2M); 0: the window alone bounds it (default 60)" },
	{ "head_size", "SIZE", "bytes at the start of each file kept in the shared cache (default 2M)" },
	{ "tail_size", "SIZE", "bytes at the end of each file kept in the shared cache (default 1M)" },
	{ "cache_size", "SIZE", "of that, what cached heads and tails may hold (default 64M)" },
	{ "cache_dir", "DIR", "where heads and tails are kept on disk across remounts and restarts (default STATE_DIR/cache)" },
	{ "cache_max_bytes", "SIZE", "how much of cache_dir heads, tails and indexes may take, least recently used evicted; 0 keeps none on disk (default 1G)" },
	{ "session_ttl", "SECONDS", "a reopen by the same client this soon after its last close joins its session (default 15)" },
	{ "session_key", "KEY", "what makes opens one client: process, thread, uid or open (default process)" },
	{ "admission_timeout", "SECONDS", "how long an open or read waits when every provider is at its limit (default 10)" },
	{ "liveness_ttl", "SECONDS", "a provider failing this long drops out of the choice (default 30)" },
	{ "liveness_interval", "SECONDS", "how often each provider is probed while a session runs or it fails; 0: never (default 10)" },
	{ "liveness_idle", "SECONDS", "an idle mount probes no provider that answers; an open checks one not heard from this long first; 0: probe always (default 600)" },
	{ "stall_timeout", "SECONDS", "no progress this long while a read waits: cut over to a standby (default 3)" },
	{ "stall_min_rate", "SIZE", "bytes a second a transfer must bring while a read waits to count as progress; 0: any byte does (default 64K)" },
	{ "standby_delay", "SECONDS", "playback time before an asset's standbys are verified; 0: at once (default 120)" },
	{ "max_standby", "N", "standbys verified ahead per asset, 0 to 64 (default 5)" },
	{ "copies", "N", "copies of every plain asset kept on the catalog's storages besides its sources, where an asset gives no \"copies\" (default 0)" },
	{ "max_streams", "N", "range transfers one playback may run at once while it waits on a slow source, within its provider's spare slots; 1 disables (default 4)" },
	{ "work_dir", "DIR", "where transcode writers put segments, playlists and leases (default STATE_DIR/transcode)" },
	{ "writer", "PATH", "the seamfs-writer program (default: beside seamfs)" },
	{ "heartbeat", "SECONDS", "how often a writer renews its lease (default 10)" },
	{ "orphan_after", "SECONDS", "a lease not renewed this long is orphaned and taken over (default 3 x heartbeat)" },
	{ "seek_restart_segments", "N", "a read up to N segments beyond the writer's edge waits for it (one that jumped there, up to 1); further, a short probe run writes the segment, and the writer moves there once reads settle (default 3)" },
	{ "max_writers", "N", "transcode writers running at once on this host; others wait in order (default 2)" },
	{ "tail_ahead", NULL, "a transcode's first read starts a probe of its tail beside the head, where a player looks for the duration next; tail_ahead=0: the tail's read does (default on)" },
	{ "writer_max_speed", "X", "pace writers at most X times realtime, 0 for no limit (default 0)" },
	{ "strm_paths", "DIR[:DIR...]", "folders local paths named in .strm and M3U playlists (and added through seamfs ctl) must lie in, after symlinks (default: none, URL sources only)" },
	{ "control_socket", "PATH", "serve the control API (seamfs ctl) on a Unix socket made at PATH, mode 0600 (default: none)" },
	{ "store", "URL", "cluster mode: share leases and hosts through Redis at redis://HOST[:PORT][/DB], redis+unix:///PATH, or the master NAME that Redis Sentinel names at redis-sentinel://HOST:PORT+HOST:PORT+.../NAME; over TLS rediss://... and rediss-sentinel://..., with the URL's query settings tls_ca_file, tls_cert_file, tls_key_file and tls_server_name as needed (default: none, one host)" },
	{ "store_password_file", "PATH", "a file whose first line is the store's password (default: no AUTH)" },
	{ "host_id", "NAME", "this daemon's name in the cluster, unique per store (default: the host name)" },
	{ "peer_listen", "ADDR:PORT", "cluster mode: serve this host's verified copies to the other hosts over HTTP at ADDR:PORT, for requests that carry the cluster's secret (default: none)" },
	{ "peer_url", "URL", "the http://HOST:PORT other hosts reach peer_listen by, advertised through the store (default: http://peer_listen)" },
	{ "cluster_secret_file", "PATH", "a file, not readable by others, whose first line is the secret the hosts' peer requests carry (default: none: no peer reads)" },
	{ "cluster", "NAME", "the prefix of every key in the store, so clusters can share a Redis (default seamfs)" },
	{ "placement", "RULE", "cluster mode: where a transcode's writer runs, least-loaded (the live host with the lowest load) or local (where its first read happened) (default least-loaded)" },
	{ NULL, NULL, NULL }
};

void px_config_init(struct px_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->read_timeout_ms = 30000;
	cfg->connect_timeout_ms = 10000;
	cfg->probe_timeout_ms = 20000;
	cfg->retries = 3;
	cfg->log_level = PX_LOG_INFO;
	cfg->readahead_budget = 256LL << 20;
	cfg->readahead_seconds = 60;
	cfg->head_size = 2LL << 20;
	cfg->tail_size = 1LL << 20;
	cfg->cache_size = 64LL << 20;
	cfg->cache_max_bytes = 1LL << 30;
	cfg->session_ttl_ms = 15000;
	cfg->admission_timeout_ms = 10000;
	cfg->liveness_ttl_ms = 30000;
	cfg->liveness_interval_ms = 10000;
	cfg->liveness_idle_ms = 600000;
	cfg->session_key = PX_KEY_PROCESS;
	cfg->stall_timeout_ms = 3000;
	cfg->stall_min_rate = 64LL << 10;
	/* a crash or an upgrade is a pause for readers, not an unmount */
	cfg->keeper = 1;
	cfg->standby_delay_ms = 120000;
	cfg->max_standby = 5;
	cfg->max_streams = 4;
	cfg->heartbeat_ms = 10000;
	cfg->seek_restart_segments = 3;
	cfg->max_writers = 2;
	cfg->tail_ahead = 1;
}

void px_config_release(struct px_config *cfg)
{
	free(cfg->ca_file);
	free(cfg->state_dir);
	free(cfg->strm_paths);
	free(cfg->work_dir);
	free(cfg->cache_dir);
	cfg->cache_dir = NULL;
	free(cfg->writer);
	free(cfg->control_socket);
	free(cfg->store);
	free(cfg->store_password_file);
	free(cfg->host_id);
	free(cfg->cluster);
	free(cfg->peer_listen);
	free(cfg->peer_url);
	free(cfg->cluster_secret_file);
	cfg->peer_listen = cfg->peer_url = cfg->cluster_secret_file = NULL;
	cfg->store = cfg->store_password_file = cfg->host_id = cfg->cluster = NULL;
	free(cfg->log_file);
	cfg->log_file = NULL;
	cfg->ca_file = NULL;
	cfg->state_dir = NULL;
	cfg->strm_paths = NULL;
	cfg->work_dir = NULL;
	cfg->writer = NULL;
	cfg->control_socket = NULL;
}

int px_config_known(const char *name)
{
	for (const struct px_config_option *o = px_config_options; o->name; o++)
		if (strcmp(o->name, name) == 0)
			return 1;
	return 0;
}

/* Seconds, possibly fractional, within (0, max]; stored as milliseconds. */
static int parse_seconds(const char *v, double max, int64_t *out_ms)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || end == v || *end != '\0' || !isfinite(d) || d <= 0 || d > max)
		return -1;
	*out_ms = (int64_t)llround(d * 1000.0);
	if (*out_ms < 1)
		*out_ms = 1;
	return 0;
}

static int parse_int(const char *v, long min, long max, int *out)
{
	char *end;
	errno = 0;
	long l = strtol(v, &end, 10);
	if (errno || end == v || *end != '\0' || l < min || l > max)
		return -1;
	*out = (int)l;
	return 0;
}

/* Bytes, with an optional K, M or G suffix (powers of 1024), in [min, max]. */
static int parse_size(const char *v, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	int shift = 0;
	if (errno || end == v || n < 0)
		return -1;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (*end != '\0' || n > (max >> shift))
		return -1;
	n <<= shift;
	if (n < min)
		return -1;
	*out = n;
	return 0;
}

static int parse_bool(const char *v, int *out)
{
	if (!v || strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0) {
		*out = 1;
		return 0;
	}
	if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "no") == 0) {
		*out = 0;
		return 0;
	}
	return -1;
}

static int set_string(char **dst, const char *v)
{
	char *copy = strdup(v);
	if (!copy)
		return -1;
	free(*dst);
	*dst = copy;
	return 0;
}

/* The options whose values need more than a range: each sets its field or
 * says what it wants (*want) or fails (err). */
typedef enum px_status (*set_fn)(struct px_config *cfg, const char *name, const char *value,
				 const char **want, char *err, size_t errlen);

static enum px_status out_of_memory(char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory");
	return PX_ENOMEM;
}

static enum px_status set_log_level(struct px_config *cfg, const char *name, const char *value,
				    const char **want, char *err, size_t errlen)
{
	(void)name, (void)err, (void)errlen;
	if (px_log_level_parse(value, &cfg->log_level) != PX_OK)
		*want = "error, warn, info or debug";
	return PX_OK;
}

static enum px_status set_session_key(struct px_config *cfg, const char *name,
				      const char *value, const char **want, char *err,
				      size_t errlen)
{
	static const char *const keys[] = { "process", "thread", "uid", "open" };
	size_t k = 0;
	(void)name, (void)err, (void)errlen;
	while (k < 4 && strcmp(value, keys[k]))
		k++;
	if (k == 4)
		*want = "process, thread, uid or open";
	else
		cfg->session_key = (enum px_session_key)k;
	return PX_OK;
}

static enum px_status set_placement(struct px_config *cfg, const char *name, const char *value,
				    const char **want, char *err, size_t errlen)
{
	(void)name, (void)err, (void)errlen;
	if (strcmp(value, "least-loaded") == 0)
		cfg->placement_local = 0;
	else if (strcmp(value, "local") == 0)
		cfg->placement_local = 1;
	else
		*want = "least-loaded or local";
	return PX_OK;
}

static enum px_status set_writer_speed(struct px_config *cfg, const char *name,
				       const char *value, const char **want, char *err,
				       size_t errlen)
{
	char *end;
	(void)name, (void)err, (void)errlen;
	errno = 0;
	double d = strtod(value, &end);
	if (errno || end == value || *end || !isfinite(d) || d < 0 || d > 1000)
		*want = "a number from 0 to 1000";
	else
		cfg->writer_max_speed = d;
	return PX_OK;
}

static enum px_status set_readahead_seconds(struct px_config *cfg, const char *name,
					    const char *value, const char **want, char *err,
					    size_t errlen)
{
	(void)name, (void)err, (void)errlen;
	/* under 5 s the reader's pace is measured over too short a time to
	 * tell it from the kernel's read-ahead of a megabyte at a time */
	if (strcmp(value, "0") == 0)
		cfg->readahead_seconds = 0;
	else if (parse_int(value, 5, 3600, &cfg->readahead_seconds))
		*want = "0 (off) or a whole number of seconds from 5 to 3600";
	return PX_OK;
}

static enum px_status set_strm_paths(struct px_config *cfg, const char *name,
				     const char *value, const char **want, char *err,
				     size_t errlen)
{
	/* absolute folders, ':' between them */
	int ok = value && value[0] == '/';
	(void)name;
	for (const char *c = value; ok && (c = strchr(c, ':')); c++)
		ok = c[1] == '/';
	if (!ok)
		*want = "absolute folders separated by ':'";
	else if (set_string(&cfg->strm_paths, value))
		return out_of_memory(err, errlen);
	return PX_OK;
}

/* store, host_id and cluster: checked by the store's own rules. */
static enum px_status set_cluster_name(struct px_config *cfg, const char *name,
				       const char *value, const char **want, char *err,
				       size_t errlen)
{
	char why[300];
	enum px_status v = name[0] == 's' ? px_store_check_url(value, why, sizeof(why))
			   : name[0] == 'h' ? px_host_id_check(value, why, sizeof(why))
			   : px_store_check_prefix(value, why, sizeof(why));
	char **dst = name[0] == 's' ? &cfg->store : name[0] == 'h' ? &cfg->host_id
							: &cfg->cluster;
	(void)want;
	if (v != PX_OK) {
		snprintf(err, errlen, "option '%s': %s", name, why);
		return PX_EINVAL;
	}
	if (set_string(dst, value))
		return out_of_memory(err, errlen);
	return PX_OK;
}

static enum px_status set_peer_listen(struct px_config *cfg, const char *name,
				      const char *value, const char **want, char *err,
				      size_t errlen)
{
	const char *colon = strrchr(value, ':');
	int port = 0;
	(void)name;
	if (!colon || colon == value || parse_int(colon + 1, 1, 65535, &port))
		*want = "ADDR:PORT, a port from 1 to 65535";
	else if (set_string(&cfg->peer_listen, value))
		return out_of_memory(err, errlen);
	return PX_OK;
}

static enum px_status set_peer_url(struct px_config *cfg, const char *name, const char *value,
				   const char **want, char *err, size_t errlen)
{
	size_t n = strlen(value);
	(void)name;
	if (strncmp(value, "http://", 7) != 0 || n <= 7 || n > 200 ||
	    strchr(value + 7, '/') || strchr(value, '@') || strpbrk(value, " \t\r\n"))
		*want = "http://HOST:PORT (no path, no credentials)";
	else if (set_string(&cfg->peer_url, value))
		return out_of_memory(err, errlen);
	return PX_OK;
}

/* How an option's value is read into its field. */
enum setter_kind {
	SECONDS,        /* int64_t ms, (0, max] seconds */
	SECONDS0,       /* the same, or "0" */
	WHOLE,          /* int, [min, max] */
	FLAG,           /* int, true or false; no value: true */
	SIZE,           /* int64_t bytes, [min, max] */
	PATH,           /* char *, an absolute path */
	OTHER           /* its own function */
};

struct setter {
	const char *name;
	enum setter_kind kind;
	size_t off;             /* of the field in struct px_config */
	int64_t min, max;
	const char *want;       /* what a bad value is told it should be */
	set_fn set;             /* OTHER */
};

#define CFG(f) offsetof(struct px_config, f)
#define SECS_ABOVE(max) "a number of seconds above 0 and at most " #max
#define SECS_FROM0(max) "a number of seconds from 0 to " #max

static const struct setter setters[] = {
	{ "read_timeout", SECONDS, CFG(read_timeout_ms), 0, 86400, SECS_ABOVE(86400), NULL },
	{ "connect_timeout", SECONDS, CFG(connect_timeout_ms), 0, 3600, SECS_ABOVE(3600), NULL },
	{ "probe_timeout", SECONDS, CFG(probe_timeout_ms), 0, 3600, SECS_ABOVE(3600), NULL },
	{ "retries", WHOLE, CFG(retries), 0, 20, "a whole number from 0 to 20", NULL },
	{ "insecure", FLAG, CFG(insecure), 0, 0, "true or false", NULL },
	{ "keeper", FLAG, CFG(keeper), 0, 0, "true or false", NULL },
	{ "log_level", OTHER, 0, 0, 0, NULL, set_log_level },
	{ "readahead_budget", SIZE, CFG(readahead_budget), 4LL << 20, 64LL << 30,
	  "a size from 4M to 64G (bytes, or with K, M or G)", NULL },
	{ "readahead_seconds", OTHER, 0, 0, 0, NULL, set_readahead_seconds },
	{ "head_size", SIZE, CFG(head_size), 0, 256LL << 20,
	  "a size from 0 to 256M (bytes, or with K, M or G)", NULL },
	{ "tail_size", SIZE, CFG(tail_size), 0, 256LL << 20,
	  "a size from 0 to 256M (bytes, or with K, M or G)", NULL },
	{ "cache_size", SIZE, CFG(cache_size), 0, 64LL << 30,
	  "a size from 0 to 64G (bytes, or with K, M or G)", NULL },
	{ "cache_max_bytes", SIZE, CFG(cache_max_bytes), 0, 1LL << 40,
	  "a size from 0 to 1024G (bytes, or with K, M or G)", NULL },
	{ "session_ttl", SECONDS0, CFG(session_ttl_ms), 0, 86400, SECS_FROM0(86400), NULL },
	{ "session_key", OTHER, 0, 0, 0, NULL, set_session_key },
	{ "admission_timeout", SECONDS, CFG(admission_timeout_ms), 0, 3600, SECS_ABOVE(3600),
	  NULL },
	{ "liveness_ttl", SECONDS, CFG(liveness_ttl_ms), 0, 86400, SECS_ABOVE(86400), NULL },
	{ "liveness_interval", SECONDS0, CFG(liveness_interval_ms), 0, 86400, SECS_FROM0(86400),
	  NULL },
	{ "liveness_idle", SECONDS0, CFG(liveness_idle_ms), 0, 86400 * 365,
	  SECS_FROM0(31536000), NULL },
	{ "stall_timeout", SECONDS, CFG(stall_timeout_ms), 0, 3600, SECS_ABOVE(3600), NULL },
	{ "stall_min_rate", SIZE, CFG(stall_min_rate), 0, 1LL << 30,
	  "a rate from 0 to 1G bytes a second (bytes, or with K, M or G)", NULL },
	{ "standby_delay", SECONDS0, CFG(standby_delay_ms), 0, 86400, SECS_FROM0(86400), NULL },
	{ "max_standby", WHOLE, CFG(max_standby), 0, 64, "a whole number from 0 to 64", NULL },
	{ "copies", WHOLE, CFG(copies), 0, 64, "a whole number from 0 to 64", NULL },
	{ "max_streams", WHOLE, CFG(max_streams), 1, 16, "a whole number from 1 to 16", NULL },
	{ "heartbeat", SECONDS, CFG(heartbeat_ms), 0, 3600, SECS_ABOVE(3600), NULL },
	{ "orphan_after", SECONDS, CFG(orphan_after_ms), 0, 3600, SECS_ABOVE(3600), NULL },
	{ "seek_restart_segments", WHOLE, CFG(seek_restart_segments), 0, 1000,
	  "a whole number from 0 to 1000", NULL },
	{ "max_writers", WHOLE, CFG(max_writers), 1, 64, "a whole number from 1 to 64", NULL },
	{ "tail_ahead", FLAG, CFG(tail_ahead), 0, 0, "true or false", NULL },
	{ "placement", OTHER, 0, 0, 0, NULL, set_placement },
	{ "writer_max_speed", OTHER, 0, 0, 0, NULL, set_writer_speed },
	{ "strm_paths", OTHER, 0, 0, 0, NULL, set_strm_paths },
	{ "store", OTHER, 0, 0, 0, NULL, set_cluster_name },
	{ "host_id", OTHER, 0, 0, 0, NULL, set_cluster_name },
	{ "cluster", OTHER, 0, 0, 0, NULL, set_cluster_name },
	{ "peer_listen", OTHER, 0, 0, 0, NULL, set_peer_listen },
	{ "peer_url", OTHER, 0, 0, 0, NULL, set_peer_url },
	{ "state_dir", PATH, CFG(state_dir), 0, 0, NULL, NULL },
	{ "ca_file", PATH, CFG(ca_file), 0, 0, NULL, NULL },
	{ "work_dir", PATH, CFG(work_dir), 0, 0, NULL, NULL },
	{ "writer", PATH, CFG(writer), 0, 0, NULL, NULL },
	{ "control_socket", PATH, CFG(control_socket), 0, 0, NULL, NULL },
	{ "log_file", PATH, CFG(log_file), 0, 0, NULL, NULL },
	{ "store_password_file", PATH, CFG(store_password_file), 0, 0, NULL, NULL },
	{ "cache_dir", PATH, CFG(cache_dir), 0, 0, NULL, NULL },
	{ "cluster_secret_file", PATH, CFG(cluster_secret_file), 0, 0, NULL, NULL },
	{ NULL, OTHER, 0, 0, 0, NULL, NULL }
};

/* One row's value into its field: PX_OK (with *want set when the value is
 * not one it takes), or PX_ENOMEM / PX_EINVAL said in err. */
static enum px_status apply(struct px_config *cfg, const struct setter *s, const char *value,
			    const char **want, char *err, size_t errlen)
{
	void *field = (char *)cfg + s->off;
	int bad = 0;
	switch (s->kind) {
	case SECONDS0:
		if (strcmp(value, "0") == 0) {
			*(int64_t *)field = 0;
			break;
		}
		/* fall through */
	case SECONDS:
		bad = parse_seconds(value, (double)s->max, field);
		break;
	case WHOLE:
		bad = parse_int(value, (long)s->min, (long)s->max, field);
		break;
	case FLAG:
		bad = parse_bool(value, field);
		break;
	case SIZE:
		bad = parse_size(value, s->min, s->max, field);
		break;
	case PATH:
		if (value[0] != '/') {
			*want = "an absolute path";
			return PX_OK;
		}
		if (set_string(field, value))
			return out_of_memory(err, errlen);
		break;
	case OTHER:
		return s->set(cfg, s->name, value, want, err, errlen);
	}
	if (bad)
		*want = s->want;
	return PX_OK;
}

enum px_status px_config_set(struct px_config *cfg, const char *name,
			     const char *value, char *err, size_t errlen)
{
	const char *want = NULL;
	const struct setter *s = setters;
	while (s->name && strcmp(s->name, name))
		s++;
	if (!px_config_known(name)) {
		snprintf(err, errlen, "unknown option '%s'", name);
		return PX_EINVAL;
	}
	if (!value && !(s->name && s->kind == FLAG)) {
		snprintf(err, errlen, "option '%s' needs a value (%s=...)", name, name);
		return PX_EINVAL;
	}
	if (s->name) {
		enum px_status st = apply(cfg, s, value, &want, err, errlen);
		if (st != PX_OK)
			return st;
	}
	if (want) {
		snprintf(err, errlen, "option '%s': bad value '%s' (expected %s)",
			 name, value ? value : "", want);
		return PX_EINVAL;
	}
	return PX_OK;
}
