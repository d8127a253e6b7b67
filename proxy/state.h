/*
 * state.h - what seamfs remembers between mounts, in the state directory.
 *
 * Today: the size and mtime discovered for each asset, so that a remount
 * lists every file at once, even while its sources are unreachable. One
 * JSON file per catalog (named after the catalog's absolute path), written
 * as tmp + fsync + rename so a crash leaves the old or the new file, never
 * half of one. Not thread-safe: used at mount time by one thread.
 */
#ifndef SEAMFS_STATE_H
#define SEAMFS_STATE_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

struct px_state;

/*
 * Opens (creating dir, mode 0700, if needed) the state of the catalog at
 * catalog_path. An unreadable or corrupt state file is logged and treated
 * as empty. PX_EIO with a message in err when dir cannot be made.
 */
enum px_status px_state_open(const char *dir, const char *catalog_path,
			     struct px_state **out, char *err, size_t errlen) PX_WUR;
void px_state_free(struct px_state *s);

/* Returns 1 and fills size/mtime (mtime -1 if unknown) when remembered
 * for id with these sources: sources is a key of the asset's source list
 * (px_state_sources_key); a record made for other sources (the .strm now
 * points elsewhere), or by an older seamfs without the key, is not
 * returned, so that the size is found again. */
int px_state_get(const struct px_state *s, const char *id, const char *sources,
		 int64_t *size, int64_t *mtime);

enum px_status px_state_put(struct px_state *s, const char *id, const char *sources,
			    int64_t size, int64_t mtime) PX_WUR;

#define PX_STATE_KEY_LEN 17 /* 16 hex digits and the NUL */

/* The key of a source list (URLs or paths, in order) into key. */
void px_state_sources_key(const char *const *names, size_t n, char key[PX_STATE_KEY_LEN]);

/* Writes the file if anything changed. PX_EIO is logged by the caller. */
enum px_status px_state_save(struct px_state *s, char *err, size_t errlen) PX_WUR;

const char *px_state_file(const struct px_state *s);

#endif
