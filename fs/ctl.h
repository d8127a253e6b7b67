/*
 * ctl.h - `seamfs ctl`: the control API's command-line client (ctl.c,
 * docs/control.md).
 */
#ifndef SEAMFS_FS_CTL_H
#define SEAMFS_FS_CTL_H

/* argv[0] is "ctl". Returns the process's exit status: 0 done, 1 the
 * daemon answered with an error (printed), 2 bad command line, 3 cannot
 * connect (no socket, permission denied, no answer). Called from main()
 * before anything else has started. */
int fs_ctl_main(int argc, char **argv);

#endif
