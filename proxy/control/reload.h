/*
 * reload.h - applying a new catalog while mounted (reload.c).
 */
#ifndef SEAMFS_RELOAD_H
#define SEAMFS_RELOAD_H

#include <stddef.h>
#include "px.h"

#include <stdint.h>

struct px_core;

/* Makes reload.c's state (core->reloads; PX_ENOMEM without memory) and
 * frees it with the catalogs and trees reloads kept: with px_core_new
 * and px_core_free. */
enum px_status px_reloads_new(struct px_core *core) PX_WUR;
void px_reloads_free(struct px_core *core);

/* The catalog file px_reload_file() reads again (borrowed; NULL: none).
 * Before the core serves. */
void px_reload_set_path(struct px_core *core, const char *path);

/* The last reload's outcome, copied under reload_lock (for the status). */
struct px_reload_stats {
	uint64_t n_reloads;
	int reload_ok;
	char reload_msg[1024];
	int64_t reload_when;       /* core clock; 0: never */
};
void px_reload_stats(struct px_core *core, struct px_reload_stats *out);

/*
 * Applies a new, valid catalog while mounted (reload.c): new assets
 * appear, assets gone from it are no longer listed (open files read on),
 * sources of known assets are added and removed, providers' limits and
 * drain apply. Takes ownership of cat (kept until px_core_free). What
 * needs a remount (a known asset's new path, kind or size, a new
 * transcode) is left as it was and said in report, one line. PX_OK when
 * applied; else nothing visible changed. Any thread but a FUSE worker's.
 */
enum px_status px_reload_catalog(struct px_core *core, struct px_catalog *cat, char *report,
			      size_t len) PX_WUR;

/*
 * Reads the catalog file again (JSON, .strm directory or M3U) and applies
 * it with px_reload_catalog(). An unreadable or invalid catalog keeps the old
 * one: the error, naming the file, line and field, is in report, the log
 * and the status. Any thread but a FUSE worker's.
 */
enum px_status px_reload_file(struct px_core *core, char *report, size_t len) PX_WUR;

/*
 * How many catalog readers px_reload_file() gave up on (a file system
 * that stopped answering): each may still sit in the kernel, where even
 * the process's exit waits for it. Any thread.
 */
int px_reload_readers_left(struct px_core *core);
#endif
