/*
 * import.h - catalogs from a directory of Kodi/Jellyfin .strm files or from
 * an M3U/M3U8 VOD playlist (docs/import.md has the rules).
 *
 * Each importer builds the same struct px_catalog the JSON parser builds:
 * sizes left to discovery (-1), implicit providers per host:port ("local"
 * for paths), validated paths. The caller frees it with px_catalog_free().
 * On failure *out stays NULL and err holds one line naming the file and,
 * where there is one, the line: "FILE:LINE: FIELD: what is wrong".
 * Entries skipped on purpose (see docs/import.md) are logged as warnings.
 * Any thread; no global state.
 */
#ifndef SEAMFS_IMPORT_H
#define SEAMFS_IMPORT_H

#include <stddef.h>
#include "catalog.h"

#define PX_IMPORT_MAX_STRM_BYTES (64 * 1024)    /* one .strm file */
#define PX_IMPORT_MAX_M3U_BYTES (16L << 20)     /* one playlist */
#define PX_IMPORT_MAX_LINE 8192                 /* one line of either */
#define PX_IMPORT_MAX_ASSETS 100000
#define PX_IMPORT_MAX_SOURCES 64                /* per asset */
#define PX_IMPORT_MAX_DEPTH 32                  /* directory levels below dir */
#define PX_IMPORT_MAX_ENTRIES 1000000           /* directory entries walked */

/*
 * Walks dir recursively (following symlinks, skipping loops and hidden
 * names) and makes one asset of each *.strm file. Returns PX_EINVAL for bad
 * input (including a tree without any .strm file), PX_EIO when a directory
 * or file cannot be read, PX_ENOMEM.
 */
enum px_status px_import_strm_dir(const char *dir, struct px_catalog **out,
				  char *err, size_t errlen) PX_WUR;

/*
 * Parses the text of one .strm file into a catalog holding its one asset.
 * rel is the file's path relative to the imported directory ("Movies/Heat
 * .strm"): the asset's id, and its path once the extension is replaced.
 * shown names the file in messages. text need not be NUL-terminated.
 */
enum px_status px_import_strm(const char *shown, const char *rel, const char *text,
			      size_t len, struct px_catalog **out,
			      char *err, size_t errlen) PX_WUR;

/*
 * Parses an M3U/M3U8 playlist held in memory (need not be NUL-terminated);
 * file names it in messages. Returns PX_EINVAL for bad input, PX_ENOMEM.
 */
enum px_status px_import_m3u(const char *file, const char *text, size_t len,
			     struct px_catalog **out, char *err, size_t errlen) PX_WUR;

/* Reads the playlist file and parses it as above. Unreadable: PX_EIO. */
enum px_status px_import_m3u_load(const char *file, struct px_catalog **out,
				  char *err, size_t errlen) PX_WUR;

/*
 * Loads a CATALOG argument of the command line by its kind: a directory is
 * imported as .strm files, a file named *.m3u or *.m3u8 (any case) as a
 * playlist, anything else is a JSON catalog (px_catalog_load()). A local
 * path in a .strm or playlist line outside strm_paths (':'-separated
 * folders, NULL: none allowed; px_import_path_allowed()) is left out with
 * a warning naming the file and line, and never stat'ed or opened; a .strm
 * left without a source is not listed. The importers above keep every
 * local path (their callers screen).
 */
enum px_status px_import_load(const char *path, const char *strm_paths,
			      struct px_catalog **out, char *err, size_t errlen) PX_WUR;

/*
 * Whether a local path from a playlist may be used: it lies in one of the
 * ':'-separated folders of strm_paths (NULL: none) by its letters (no "."
 * or ".." component) - a path outside is never touched, so that whoever
 * wrote the line learns nothing of the file - and again once symlinks are
 * resolved. why says what is wrong, never quoting the path. Any thread.
 */
int px_import_path_allowed(const char *strm_paths, const char *path, char *why,
			   size_t whylen);

#endif
