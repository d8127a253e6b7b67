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
};

struct px_source {
	char *url;             /* http:// or https:// URL, or NULL */
	char *path;            /* absolute local path, or NULL */
	size_t provider;       /* index into px_catalog.providers */
};

enum px_asset_kind { PX_ASSET_PLAIN, PX_ASSET_TRANSCODE, PX_ASSET_REMUX };

struct px_asset {
	char *id;
	char *path;            /* relative, '/'-separated, validated */
	int64_t size;          /* -1: not given */
	int64_t mtime;         /* -1: not given */
	char sha256[65];       /* lowercase hex, "" when not given */
	enum px_asset_kind kind;
	char *of;              /* transcode/remux: id of the source asset */
	/* transcode profile (kind PX_ASSET_TRANSCODE); defaults filled in */
	int height;            /* output height in pixels; 0: the source's */
	int64_t video_bitrate; /* bit/s, default 1000000 */
	int64_t audio_bitrate; /* bit/s, default 128000 */
	int segment_seconds;   /* 2..6, default 2 */
	struct px_source *sources;
	size_t nsources;       /* >= 1 for plain assets, 0 otherwise */
};

struct px_catalog {
	char *file;            /* as given, for messages */
	struct px_provider *providers;
	size_t nproviders;
	struct px_asset *assets;
	size_t nassets;
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

#endif
