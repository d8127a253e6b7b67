/*
 * proc.c - reading /proc, and whether a process of this machine is gone
 * (px.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "px.h"

ssize_t px_proc_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		buf[0] = '\0';
		return -1;
	}
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	return n;
}

/* The state letter of task tid of pid (/proc/PID/task/TID/stat, after the
 * command's closing parenthesis), or 0 when it cannot be read. */
static char task_state(int pid, const char *tid)
{
	char path[96], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", pid, tid);
	if (px_proc_read(path, buf, sizeof(buf)) < 0)
		return 0;
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

int px_pid_gone(pid_t pid)
{
	char path[64];
	int gone = 1;
	if (pid <= 0)
		return 0;
	if (kill(pid, 0) && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT;
	struct dirent *de;
	while (gone && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char s = task_state((int)pid, de->d_name);
		gone = s == 'Z' || s == 'X';
	}
	closedir(d);
	return gone;
}

int px_proc_positions(long pid, int mnt_id, struct px_fdpos *out, int cap)
{
	char path[96], buf[512];
	int n = 0;
	if (pid <= 0 || mnt_id <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/fdinfo", pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *de;
	while (n < cap && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/fdinfo/%s", pid, de->d_name);
		if (px_proc_read(path, buf, sizeof(buf)) <= 0)
			continue; /* closed meanwhile */
		const char *pos = strstr(buf, "pos:"), *mnt = strstr(buf, "mnt_id:");
		const char *ino = strstr(buf, "\nino:");
		if (!pos || !mnt || !ino || atoi(mnt + 7) != mnt_id)
			continue;
		out[n].pos = strtoll(pos + 4, NULL, 10);
		out[n].ino = strtoull(ino + 5, NULL, 10);
		n++;
	}
	closedir(d);
	return n;
}
