/*
 * metrics.h - the Prometheus metrics and the read-latency histogram
 * (metrics.c).
 */
#ifndef SEAMFS_METRICS_H
#define SEAMFS_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

struct px_core;

/*
 * The core's metrics in the Prometheus text exposition format 0.0.4
 * (metrics.c; names in docs/control.md). Returns a malloc'd string the
 * caller frees, or NULL when out of memory. Any thread.
 */
char *px_metrics_text(struct px_core *core);

/* Records one read's duration (microseconds, however it ended) in the
 * read-latency histogram. Any thread, lock-free. */
void px_metrics_note_read(struct px_core *core, int64_t us);
#endif
