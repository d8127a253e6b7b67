/*
 * session_i.h - what core.c needs of session.c beyond session.h.
 */
#ifndef SEAMFS_SESSION_I_H
#define SEAMFS_SESSION_I_H

#include "context.h"

/* Closes every handle still open (session.c); at shutdown only. */
void px_handles_close_all(struct px_core *core);


/* Closes idle streams of the session's handles so a slot frees (session.c). */
int px_session_yield_idle(struct px_session *s, int unread);

#endif
