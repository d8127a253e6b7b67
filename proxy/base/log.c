/*
 * log.c - one line per event, to stderr (foreground), syslog (daemon) or a
 * file (log_file=, either way).
 *
 * A line is formatted into a stack buffer and written with one write(2), so
 * concurrent threads never interleave inside a line. Over-long messages are
 * cut, never split. The log file is one descriptor number for the whole
 * run: a reopen (SIGHUP, after logrotate) dup2()s the new file onto it, so
 * a thread writing meanwhile never sees a closed or reused descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static _Atomic int log_level = PX_LOG_INFO;
static _Atomic int log_syslog;
static _Atomic int log_fd = -1;        /* the log file, -1: none */
static _Atomic int log_stderr = PX_LOG_DEBUG; /* beside the file: up to it */
static char log_path[PATH_MAX];        /* set once, before any thread */

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void px_log_setup(enum px_log_level level, int use_syslog)
{
	log_level = level;
	log_syslog = use_syslog;
	if (use_syslog)
		openlog("seamfs", LOG_PID, LOG_DAEMON);
}

static int open_log(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
}

void px_log_stderr_level(int level)
{
	log_stderr = level;
}

enum px_status px_log_open_file(const char *path)
{
	size_t n = strlen(path);
	if (n >= sizeof(log_path)) {
		errno = ENAMETOOLONG;
		return PX_EIO;
	}
	int fd = open_log(path);
	if (fd < 0)
		return PX_EIO;
	memcpy(log_path, path, n + 1);
	int old = log_fd;
	log_fd = fd;
	if (old >= 0)
		close(old);
	return PX_OK;
}

enum px_status px_log_reopen(void)
{
	int fd = log_fd;
	if (fd < 0)
		return PX_OK;
	int nfd = open_log(log_path);
	if (nfd < 0)
		return PX_EIO;
	int r = dup3(nfd, fd, O_CLOEXEC);
	int saved = errno;
	close(nfd);
	errno = saved;
	return r < 0 ? PX_EIO : PX_OK;
}

const char *px_log_file(void)
{
	return log_fd >= 0 ? log_path : NULL;
}

enum px_status px_log_level_parse(const char *s, enum px_log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum px_log_level)i;
			return PX_OK;
		}
	}
	return PX_EINVAL;
}

int px_log_enabled(enum px_log_level level)
{
	return (int)level <= log_level;
}

void px_logv(enum px_log_level level, const char *component, const char *fmt,
	     va_list ap)
{
	char line[2048];
	int n;

	if (!px_log_enabled(level))
		return;
	int fd = log_fd;
	if (fd < 0 && log_syslog) {
		static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
		n = snprintf(line, sizeof(line), "%s: ", component);
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		syslog(prio[level], "%s", line);
		return;
	}
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		     level_names[level], component);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	/* stderr may be a pipe read by a test; a short write just cuts the line. */
	ssize_t w = write(fd >= 0 ? fd : STDERR_FILENO, line, len);
	/* a log file and stderr: with -f (a daemon with a log file writes
	 * the file only, log_stderr -1) */
	if (fd >= 0 && !log_syslog && (int)level <= log_stderr)
		w = write(STDERR_FILENO, line, len);
	(void)w;
}

void px_log(enum px_log_level level, const char *component, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	px_logv(level, component, fmt, ap);
	va_end(ap);
}
