/*
 * verify.h - `seamfs verify`: checks an asset's sources against each other
 * from the command line (see verify.c and docs/operations.md "Checking sources").
 */
#ifndef SEAMFS_FS_VERIFY_H
#define SEAMFS_FS_VERIFY_H

/* argv[0] is "verify". Returns the process's exit status: 0 all match
 * (or are their asset's only source), 1 a mismatch or size mismatch, 2 bad
 * command line, 3 bad catalog, 4 inconclusive (and no mismatch or
 * undecided), 5 could not run, 6 undecided: some asset's sources disagree
 * with no majority (and no mismatch). Called from main() before anything
 * else has started. */
int fs_verify_main(int argc, char **argv);

#endif
