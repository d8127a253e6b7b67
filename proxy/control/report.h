/*
 * report.h - the status report: the core's state as one JSON object
 * (report.c).
 */
#ifndef SEAMFS_REPORT_H
#define SEAMFS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

struct px_core;

/*
 * The core's state as one JSON object (providers, sessions, read counters,
 * memory), for the status file. Returns a malloc'd string the caller
 * frees, or NULL when out of memory. Any thread.
 */
char *px_report_json(struct px_core *core);

/* The cluster's part alone: {"clustered", "store", "hosts"} (seamfs ctl
 * hosts). Same ownership. */
char *px_report_hosts(struct px_core *core);
#endif
