/*
 * status.c - names of the core's status codes and which are transient.
 */
#include "px.h"

const char *px_strerror(enum px_status st)
{
	switch (st) {
	case PX_OK: return "ok";
	case PX_EOF: return "end of file";
	case PX_EAGAIN: return "try again";
	case PX_ENOMEM: return "out of memory";
	case PX_EINVAL: return "invalid argument";
	case PX_EIO: return "local I/O error";
	case PX_ETIMEDOUT: return "timed out";
	case PX_ECANCELED: return "cancelled";
	case PX_ECONNECT: return "connection failed";
	case PX_ETRANSFER: return "transfer failed";
	case PX_EBADRESP: return "bad response";
	case PX_ESIZE: return "size mismatch";
	case PX_ENOTFOUND: return "not found";
	case PX_EAUTH: return "authentication refused";
	case PX_ESERVER: return "server error";
	case PX_ENOSOURCE: return "no source can serve";
	case PX_ESHUTDOWN: return "shutting down";
	case PX_EBUSY: return "all providers at their limit";
	case PX_ENOTASSET: return "not the asset's bytes";
	case PX_EMISMATCH: return "bytes differ from the asset's reference";
	case PX_EDECLINED: return "not served this way";
	case PX_EEXIST: return "already there";
	case PX_EFENCED: return "fenced: superseded by another holder";
	case PX_EFULL: return "no room";
	case PX_ELOCKTIMEOUT: return "lock not had in time";
	case PX_ENEXT: return "take the next source";
	case PX_EFAILED: return "a transfer failed under the read";
	case PX_STATUS_COUNT: break;
	}
	return "unknown status";
}

int px_status_retryable(enum px_status st)
{
	switch (st) {
	case PX_ETIMEDOUT:
	case PX_ECONNECT:
	case PX_ETRANSFER:
	case PX_EBADRESP:
	case PX_ESERVER:
	case PX_EIO:
		return 1;
	default:
		return 0;
	}
}
