/*
 * notify.h - telling a service manager (systemd, Type=notify) how the
 * daemon is doing: READY=1 once the mount answers, STATUS= lines,
 * STOPPING=1 on the way down.
 *
 * This is sd_notify(3)'s datagram protocol, written here rather than
 * linked from libsystemd: the protocol is documented as stable (one
 * datagram of newline-separated VAR=value lines to the AF_UNIX socket named
 * by $NOTIFY_SOCKET, "@" for the abstract namespace), it is a dozen lines,
 * and seamfs then builds and runs the same with or without systemd's
 * libraries (containers, minimal hosts) with no optional dependency to test
 * both ways.
 */
#ifndef SEAMFS_NOTIFY_H
#define SEAMFS_NOTIFY_H

struct fs_notify {
	int fd;             /* a datagram socket, -1: no manager to tell */
	char path[108];     /* sun_path; path[0] == '\0' with abstract set */
	int abstract;
	int len;            /* bytes of path that count */
};

/* Reads $NOTIFY_SOCKET and unsets it (so that writers and other children
 * do not inherit it). Returns 1 if a manager waits for READY=1, else 0;
 * a malformed value is ignored (0). Call before any thread starts. */
int fs_notify_open(struct fs_notify *n);

/* Sends one message ("READY=1\nSTATUS=..."); nothing without a manager.
 * Any thread; the socket is only written. */
void fs_notify_send(const struct fs_notify *n, const char *msg);

/* Sends msg with the descriptors fds[0..n) attached (SCM_RIGHTS): systemd's
 * FDSTORE=1. 0, or -1 (no manager, or the send failed: errno). */
int fs_notify_send_fds(const struct fs_notify *n, const char *msg, const int *fds, int nfds);

/* Sends STATUS=<formatted text>. */
void fs_notify_status(const struct fs_notify *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Puts $NOTIFY_SOCKET back into this process's environment (a keeper's
 * child about to exec a worker, which then tells the manager itself).
 * Nothing without a manager. 0, or -1 (setenv failed). */
int fs_notify_export(const struct fs_notify *n);

void fs_notify_close(struct fs_notify *n);

#endif
