/*
 * statedir.h - where seamfs keeps its state when -o state_dir is not given
 * (statedir.c); the mount and `seamfs verify` both use it.
 */
#ifndef SEAMFS_FS_STATEDIR_H
#define SEAMFS_FS_STATEDIR_H

/* The default state directory, chosen from the environment here so the
 * core never reads it: /var/lib/seamfs as root, else
 * $XDG_STATE_HOME/seamfs or ~/.local/state/seamfs. malloc'd; NULL when out
 * of memory. */
char *fs_default_state_dir(void);

#endif
