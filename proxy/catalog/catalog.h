/*
 * catalog.h - the catalog: providers, assets and their sources, settings.
 *
 * The catalog is an immutable value once loaded: its structs are public so
 * the core can read them directly, and nothing writes them after
 * px_catalog_parse() returns. Any thread may read it.
 */
#ifndef SEAMFS_CATALOG_H
#define SEAMFS_CATALOG_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

struct px_provider {
	char *name;
	int max_connections;   /* 0: no limit given */
	char **headers;        /* "Name: value", sent with every request */
	size_t nheaders;
	int implicit;          /* made for sources that name no provider */
	int drained;           /* starts drained: no new sessions */
	int local_disk;        /* holds copies on this host's own disk (copies/serve.c):
				* preferred for new sessions */
	char **header_hosts;   /* where headers may follow a redirect: the origins of
				* its catalog URLs ("https://host:443") and its
				* trust_redirects ("host" or "host:port"); see
				* px_redact_headers_ok. Filled only when it has headers */
	size_t nheader_hosts;
};

struct px_source {
	char *url;             /* http:// or https:// URL, or NULL */
	char *path;            /* absolute local path, or NULL */
	size_t provider;       /* index into px_catalog.providers */
	char *shown;           /* what logs, status, ctl and errors show: the URL
				* without its credentials (px_redact_url), or the path */
	char *key;             /* what files in the state dir name it by: px_redact_key */
	const char *storage;   /* a copy (copies/serve.c): its storage's name, borrowed
				* from the core; NULL for the catalog's sources */
};

enum px_asset_kind { PX_ASSET_PLAIN, PX_ASSET_TRANSCODE, PX_ASSET_REMUX };

struct px_asset {
	char *id;
	char *path;            /* relative, '/'-separated, validated */
	int64_t size;          /* -1: not given */
	int64_t mtime;         /* -1: not given */
	char *sha256;          /* lowercase hex, NULL when not given (a pointer:
				* every asset of a large library pays for the
				* field, few have it) */
	enum px_asset_kind kind;
	char *of;              /* transcode/remux: id of the source asset */
	/* transcode profile (kind PX_ASSET_TRANSCODE); defaults filled in */
	int height;            /* output height in pixels; 0: the source's */
	int64_t video_bitrate; /* bit/s, default 1000000 */
	int64_t audio_bitrate; /* bit/s, default 128000 */
	int segment_seconds;   /* 1..6, default 1 (docs/transcode.md "Seeks") */
	int segment_seconds_default; /* 1: not named, the default above */
	struct px_source *sources;
	size_t nsources;       /* >= 1 for plain assets, 0 otherwise */
	int copies;            /* "copies": copies wanted besides the sources;
				* -1: not given (the copies setting) */
};

/* A place copies of assets go (docs/copies.md). */
struct px_storage {
	char *name;
	char *path;            /* absolute directory */
	char *host;            /* the host_id that owns it; NULL: every host (NFS) */
	int64_t min_free_bytes; /* default 1 GiB */
	int copying;           /* the copying role, default 1 */
};

#define PX_STORAGE_MIN_FREE_DEFAULT (1LL << 30)

#define PX_CATALOG_MAX_PATH 4096           /* bytes of an asset's path */
#define PX_CATALOG_MAX_DEPTH 64            /* components of an asset's path */
#define PX_CATALOG_MAX_SIZE (1LL << 62)    /* an asset's size: offsets never overflow */
#define PX_CATALOG_MAX_COPIES 64           /* an asset's "copies" */

struct px_catalog {
	char *file;            /* as given, for messages */
	struct px_provider *providers;
	size_t nproviders;
	struct px_asset *assets;
	size_t nassets;
	struct px_storage *storages;
	size_t nstorages;
	int from_playlists;    /* made from .strm files or an M3U: local paths in it
				* are held to strm_paths (px_sources_path_allowed) */
	char **setting_names;  /* "settings" members as strings, in file order */
	char **setting_values; /* NULL for a boolean true flag */
	size_t nsettings;
};

/*
 * Parses and validates a catalog held in memory. file names it in messages.
 * On failure returns PX_EINVAL (or PX_ENOMEM) and writes one line into err:
 * "FILE:LINE:COL: FIELD: what is wrong", FIELD being a JSON path such as
 * assets[2].sources[0].url, "(syntax)" for malformed JSON. *out is set only
 * on success; the caller frees it with px_catalog_free().
 */
enum px_status px_catalog_parse(const char *file, const char *text, size_t len,
				struct px_catalog **out, char *err, size_t errlen) PX_WUR;

/* Reads the file and parses it, as above. Unreadable file: PX_EIO. */
enum px_status px_catalog_load(const char *file, struct px_catalog **out,
			       char *err, size_t errlen) PX_WUR;

void px_catalog_free(struct px_catalog *cat);

/* Index of the asset with this id, or -1. */
long px_catalog_find(const struct px_catalog *cat, const char *id);

/* ---- the catalog's checks, also for sources added at run time */

/* Copies src into dst (cap >= 6 bytes), writing control characters as \n,
 * \t or \xNN, so that a message quoting the user's strings stays on one
 * line. Truncates silently. */
void px_catalog_escape(char *dst, size_t cap, const char *src);

/* Checks a relative asset path (the path rules of docs/design.md, "Words").
 * Returns a static message ("has a '.' or '..' component") or NULL when
 * valid. */
const char *px_catalog_bad_path(const char *path);

/* Checks an http(s) URL and writes its "host:port" (lowercase, userinfo
 * dropped) into hostport. Returns a static message or NULL when valid. */
const char *px_catalog_bad_url(const char *url, char *hostport, size_t cap);

/* Checks a local source path: absolute, no control character. Returns a
 * static message or NULL when valid. */
const char *px_catalog_bad_local(const char *path);

#endif
