/*
 * session_i.h - what core.c needs of session.c beyond session.h.
 */
#ifndef SEAMFS_SESSION_I_H
#define SEAMFS_SESSION_I_H

#include "context.h"

/* Closes every handle still open (session.c); at shutdown only. */
void px_handles_close_all(struct px_core *core);


/* Closes streams of the session's handles so a slot frees (session.c):
 * how PX_YIELD_IDLE those paused for want of a reader, PX_YIELD_UNREAD any
 * no reader is inside (and unread cache fills), PX_YIELD_ALL every one (a
 * reader inside reads its bytes directly after, in its turn): for a
 * cutover that needs a slot its own session holds on the source it
 * leaves, and for a reader that waited its turn long enough while its own
 * session's other readers kept the slot (provider.c wait_turn). How
 * many. */
int px_session_yield_idle(struct px_session *s, int how);

#endif
