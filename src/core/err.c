/* err.c -- the error convention of err.h. */
#include "core/err.h"
#include "core/sbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tc_verror(struct tc_err *err, int code, const char *fmt, va_list ap)
{
	if (!err)
		return code;
	struct sbuf sb = SBUF_INIT;
	sbuf_vaddf(&sb, fmt, ap);
	free(err->msg);
	err->msg = sbuf_detach(&sb);
	err->code = code;
	return code;
}

int tc_error(struct tc_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tc_verror(err, code, fmt, ap);
	va_end(ap);
	return code;
}

int tc_error_errno(struct tc_err *err, int code, const char *fmt, ...)
{
	int saved = errno;
	if (!err)
		return code;
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	sbuf_addf(&sb, ": %s", strerror(saved));
	/* the one failure a user fixes outside trainctl: say what to do, wherever it happened */
	if (saved == ENOSPC)
		sbuf_adds(&sb, " (the file system is full: free space there, then try again)");
	else if (saved == EDQUOT)
		sbuf_adds(&sb, " (the account is over its disk quota there: free space, then try again)");
	free(err->msg);
	err->msg = sbuf_detach(&sb);
	err->code = code;
	return code;
}

void tc_error_prefix(struct tc_err *err, const char *fmt, ...)
{
	if (!err)
		return;
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	sbuf_addf(&sb, ": %s", err->msg ? err->msg : "error");
	free(err->msg);
	err->msg = sbuf_detach(&sb);
}

void tc_err_release(struct tc_err *err)
{
	if (!err)
		return;
	free(err->msg);
	err->msg = NULL;
	err->code = 0;
}

int tc_exit_status(int code)
{
	switch (code) {
	case TC_OK:
		return 0;
#define X(name, val, status, desc) case TC_##name: return status;
	TC_ERRORS(X)
#undef X
	default:
		return 3;
	}
}

const char *tc_code_name(int code)
{
	switch (code) {
	case TC_OK:
		return "ok";
#define X(name, val, status, desc) case TC_##name: return desc;
	TC_ERRORS(X)
#undef X
	default:
		return "unknown error";
	}
}
