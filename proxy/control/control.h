/*
 * control.h - the control API: HTTP with JSON on a Unix socket
 * (libmicrohttpd), the server behind `seamfs ctl`. Routes and errors are
 * in docs/control.md.
 *
 * The request parsing (route matching, percent-decoding of path segments,
 * body checks) is pure and exposed here, so that unit tests and the
 * libFuzzer target drive it without a socket.
 */
#ifndef SEAMFS_CONTROL_H
#define SEAMFS_CONTROL_H

#include <stdarg.h>
#include <stddef.h>
#include "px.h"

/* The running libmicrohttpd's version ("0.9.75"), for --version. */
const char *px_control_library_version(void);

struct px_core;


struct px_control;

/* Bodies above this get 413. */
#define PX_CTL_BODY_MAX (64u * 1024u)
/* A decoded path parameter (a provider name) is at most this long. */
#define PX_CTL_PARAM_MAX 512

enum px_ctl_route {
	PX_CTL_STATUS,     /* GET /v1/status */
	PX_CTL_METRICS,    /* GET /v1/metrics */
	PX_CTL_DRAIN,      /* POST /v1/providers/NAME/drain */
	PX_CTL_RESUME,     /* POST /v1/providers/NAME/resume */
	PX_CTL_ADD_SOURCE, /* POST /v1/assets/ID/sources {"url"|"path", "provider"?} */
	PX_CTL_REMOVE_SOURCE, /* POST /v1/assets/ID/sources/remove {"url"|"path"} */
	PX_CTL_RELOAD,     /* POST /v1/reload */
	PX_CTL_HOSTS,      /* GET /v1/hosts (cluster mode: the store and the hosts) */
	PX_CTL_COPIES,     /* GET /v1/copies */
	PX_CTL_STORAGE_DISABLE, /* POST /v1/storages/NAME/disable */
	PX_CTL_STORAGE_ENABLE,  /* POST /v1/storages/NAME/enable */
	PX_CTL_STORAGE_DRAIN,   /* POST /v1/storages/NAME/drain */
	PX_CTL_RESTART,    /* POST /v1/restart (keeper=1: a new worker from the binary) */
	PX_CTL_NROUTES
};

/* A request as far as parsing takes it. */
struct px_ctl_request {
	enum px_ctl_route route;
	char name[PX_CTL_PARAM_MAX];  /* NAME or ID of the path, decoded; "" if none */
	char reason[256];             /* drain/resume body's "reason", "" if none */
	char where[4096];             /* a source's "url" or "path" */
	char provider[256];           /* add: the body's "provider", "" if none */
};

/* What to answer instead: an HTTP status (4xx or 5xx), a message and the
 * request field it is about ("path", "method", "body", a body key, ...). */
struct px_ctl_error {
	int http;
	char error[256];
	char field[64];
	char allow[32];               /* 405: the methods the path takes */
};

/*
 * Matches method and url (the request target: a path, optionally with a
 * "?query", which is ignored) against the routes and fills req. Returns 0,
 * or -1 with err set: 404 no such path, 405 a path that takes another
 * method (err->allow set), 400 a malformed escape or a control character
 * in a path parameter. Pure; any thread.
 */
int px_ctl_match(const char *method, const char *url, struct px_ctl_request *req,
		 struct px_ctl_error *err);

/*
 * Checks a request body (len bytes, need not be NUL-terminated) against
 * what req's route takes, and stores its fields in req. GET routes take
 * none; drain and resume take none or a JSON object with an optional
 * string "reason"; adding a source takes {"url" or "path", optional
 * "provider"}, removing one {"url" or "path"}. Returns 0, or -1 with a 400 in err naming the field
 * ("body" for malformed JSON or a wrong type, else the key). Pure.
 */
int px_ctl_check_body(struct px_ctl_request *req, const char *body, size_t len,
		      struct px_ctl_error *err);

/*
 * Decodes %XX escapes of in[0..len) into out (NUL-terminated, at most
 * outlen bytes with the NUL). Returns the decoded length, or -1 for a
 * malformed escape, a decoded NUL or control character, or no room.
 * '+' stays '+'. Pure.
 */
long px_ctl_percent_decode(const char *in, size_t len, char *out, size_t outlen);

/* err as the JSON body {"error": ..., "field": ...}, malloc'd, with a
 * trailing newline; NULL when out of memory. */
char *px_ctl_error_json(const struct px_ctl_error *err);

/*
 * Starts the control server on a Unix socket made at path (mode 0600),
 * answering from its own thread (signals blocked). A socket file left by a
 * daemon that died is replaced; anything else at path, or a socket a live
 * daemon answers on, is refused. Each failure is logged with the path.
 * core is borrowed until px_control_stop(). PX_EINVAL for a path that is
 * too long, PX_EIO for socket errors, PX_ENOMEM.
 */
enum px_status px_control_start(struct px_core *core, const char *path,
				struct px_control **out) PX_WUR;

/* Stops the server (waits for its thread) and removes the socket file if
 * it is still the one it made. NULL: nothing. */
void px_control_stop(struct px_control *ctl);

/* libmicrohttpd's error logger for the control socket and the peer
 * endpoint (MHD_OPTION_EXTERNAL_LOGGER): cls is the module name the line
 * is logged under ("control", "peer"); one line, as a warning. */
void px_mhd_log(void *cls, const char *fmt, va_list ap) PX_PRINTF(2, 0);

#endif
