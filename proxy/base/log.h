/*
 * log.h - the one logger: level + component + message, one line per event.
 *
 * The sink is process-wide (it is the process's stderr, syslog or the file
 * of log_file=, which are process-wide too); everything else in the core is
 * passed down explicitly.
 * Any thread may log. Lines are written with a single write(2) so they are
 * never split or interleaved.
 */
#ifndef SEAMFS_LOG_H
#define SEAMFS_LOG_H

#include <stdarg.h>
#include "px.h"

enum px_log_level { PX_LOG_ERROR, PX_LOG_WARN, PX_LOG_INFO, PX_LOG_DEBUG };

/* Called once by main before any thread starts. use_syslog: log to syslog
 * (daemon mode) instead of stderr. */
void px_log_setup(enum px_log_level level, int use_syslog);

/* Sends every line from now on to the file at path (appended, created 0640)
 * in stderr's format: instead of syslog, and beside stderr while
 * use_syslog is 0 (the foreground, a daemon before it detaches). Called by main before
 * any thread starts. PX_EIO with errno set when it cannot be opened. */
enum px_status px_log_open_file(const char *path) PX_WUR;

/* With a log file, the lines that go to stderr as well: those of level
 * up to `level` (PX_LOG_DEBUG, the default: all, as with -f), or none
 * (-1: a daemon with a log file logs there only, also before it
 * detaches). Before any thread starts. */
void px_log_stderr_level(int level);

/* Opens the log file again under its name (logrotate moved the old one
 * away) and swaps it in atomically: a line written meanwhile lands in one
 * of the two whole. PX_OK without a log file; PX_EIO (the old file stays)
 * when it cannot be opened. Any thread. */
enum px_status px_log_reopen(void) PX_WUR;

/* The log file's path, NULL when there is none. */
const char *px_log_file(void);

/* Parses "error", "warn", "info", "debug". Returns PX_EINVAL otherwise. */
enum px_status px_log_level_parse(const char *s, enum px_log_level *out) PX_WUR;

int px_log_enabled(enum px_log_level level);

void px_log(enum px_log_level level, const char *component, const char *fmt, ...)
	PX_PRINTF(3, 4);
void px_logv(enum px_log_level level, const char *component, const char *fmt,
	     va_list ap) PX_PRINTF(3, 0);

#define px_error(c, ...) px_log(PX_LOG_ERROR, c, __VA_ARGS__)
#define px_warn(c, ...) px_log(PX_LOG_WARN, c, __VA_ARGS__)
#define px_info(c, ...) px_log(PX_LOG_INFO, c, __VA_ARGS__)
#define px_debug(c, ...) \
	do { if (px_log_enabled(PX_LOG_DEBUG)) px_log(PX_LOG_DEBUG, c, __VA_ARGS__); } while (0)

#endif
