/*
 * config.h - the mount's settings: one struct, filled from the catalog's
 * "settings" object and then from -o options (the command line wins),
 * validated once, then passed down as const.
 */
#ifndef SEAMFS_CONFIG_H
#define SEAMFS_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "log.h"
#include "px.h"

/* What identifies the client of an open (session_key option). */
enum px_session_key {
	PX_KEY_PROCESS,  /* the caller's process (thread group): the default */
	PX_KEY_THREAD,   /* the calling thread */
	PX_KEY_UID,      /* the caller's user */
	PX_KEY_OPEN,     /* none: every open is a session of its own */
};

struct px_config {
	int64_t read_timeout_ms;    /* bound on one read, default 30 s */
	int64_t connect_timeout_ms; /* TCP+TLS connect, default 10 s */
	int64_t probe_timeout_ms;   /* bound on size discovery at mount, default 20 s */
	int retries;                /* extra attempts of a failed range on one source */
	int insecure;               /* 1: no TLS peer/host verification */
	int keeper;                 /* 1 (default): a keeper holds the mount (fs/keeper.h) */
	char *ca_file;              /* owned; NULL: system CA store */
	char *state_dir;            /* owned; NULL until main fills a default */
	char *strm_paths;           /* owned; ':'-separated folders that local
				     * paths from playlists and seamfs ctl must lie
				     * in; NULL: none (URL sources only) */
	enum px_log_level log_level;
	char *log_file;             /* owned; NULL: stderr (-f) or syslog */
	int64_t readahead_budget;   /* bytes windows and cached heads/tails share, 256 MiB */
	int readahead_seconds;      /* a stream runs at most this many seconds of its
				     * reader's pace ahead of it (stream.c), 60; 0: off */
	int64_t head_size;          /* cached head of every asset, 2 MiB */
	int64_t tail_size;          /* cached tail of every asset, 1 MiB */
	int64_t cache_size;         /* of the budget, at most this for heads/tails, 64 MiB */
	char *cache_dir;            /* owned; heads and tails on disk (disk.c);
				     * NULL: state_dir/cache */
	int64_t cache_max_bytes;    /* of cache_dir, at most this, 1 GiB; 0: none */
	int64_t session_ttl_ms;     /* a closed session lingers this long for reopens, 15 s */
	int64_t admission_timeout_ms; /* wait for a provider slot, 10 s */
	int64_t liveness_ttl_ms;    /* failing this long: a provider drops out, 30 s */
	int64_t liveness_interval_ms; /* active probe per provider, 10 s; 0: none */
	int64_t liveness_idle_ms;   /* no probes after this long without an open
				     * (and none open), 600 s; 0: always */
	enum px_session_key session_key; /* what makes two opens one client */
	int64_t stall_timeout_ms;   /* no progress this long while a reader waits: a cutover, 3 s */
	int64_t stall_min_rate;     /* progress is a rate: bytes a second below which a
				     * transfer makes none (px_progress_add), 64 KiB; 0: any byte */
	int64_t standby_delay_ms;   /* playback before standbys are verified, 120 s */
	int max_standby;            /* standbys verified per asset, 5 */
	int max_streams;            /* transfers per playback while starved, 4 */
	int copies;                 /* copies per asset without "copies", 0 (copies/table.c) */
	/* transcoded assets (proxy/transcode/) */
	char *work_dir;             /* owned; NULL: state_dir/transcode */
	char *writer;               /* owned; NULL: seamfs-writer beside the daemon */
	int64_t heartbeat_ms;       /* writer lease heartbeat, default 10 s */
	int64_t orphan_after_ms;    /* 0: 3 x heartbeat */
	int seek_restart_segments;  /* a read further ahead restarts the writer, 3 */
	int max_writers;            /* concurrent writers on this host, 2 */
	int tail_ahead;             /* a first read's probe of the tail, 1 */
	double writer_max_speed;    /* writer pace as a multiple of realtime, 0: free */
	int placement_local;        /* cluster mode: writers where their first read is
				     * (placement=local), 0: on the least-loaded host */
	char *control_socket;       /* owned; NULL: no control API */
	/* cluster mode (docs/cluster.md); NULL store: one host, nothing shared */
	char *store;                /* owned; redis://HOST:PORT[/DB] or redis+unix:///PATH */
	char *store_password_file;  /* owned; NULL: no AUTH */
	char *host_id;              /* owned; NULL: the host name */
	char *peer_listen;          /* owned; ADDR:PORT the peer endpoint listens on,
				     * NULL: none (docs/copies.md, "Across hosts") */
	char *peer_url;             /* owned; the URL other hosts reach it by, NULL:
				     * http://peer_listen */
	char *cluster_secret_file;  /* owned; the hosts' shared secret, NULL: none */
	char *cluster;              /* owned; the keys' prefix; NULL: "seamfs" */
};

/* One option that the core knows, for --help and the man page
 * (docs/man/mangen.c); tests/docs/check_docs.py holds docs/configuration.md
 * to this table. */
struct px_config_option {
	const char *name;
	const char *arg;   /* NULL for a flag */
	const char *help;
};

/* The core's options, NULL-terminated (name == NULL). */
extern const struct px_config_option px_config_options[];

void px_config_init(struct px_config *cfg);
void px_config_release(struct px_config *cfg);

/* Whether name is one of px_config_options. */
int px_config_known(const char *name);

/*
 * Sets option name to value (value NULL for a bare flag such as "insecure").
 * On PX_EINVAL writes a message naming the option and the value into err.
 */
enum px_status px_config_set(struct px_config *cfg, const char *name,
			     const char *value, char *err, size_t errlen) PX_WUR;

#endif
