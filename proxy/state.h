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

/* Returns 1 and fills size/mtime (mtime -1 if unknown) when remembered. */
int px_state_get(const struct px_state *s, const char *id, int64_t *size, int64_t *mtime);

enum px_status px_state_put(struct px_state *s, const char *id, int64_t size,
			    int64_t mtime) PX_WUR;

/* Writes the file if anything changed. PX_EIO is logged by the caller. */
enum px_status px_state_save(struct px_state *s, char *err, size_t errlen) PX_WUR;

const char *px_state_file(const struct px_state *s);

#endif
