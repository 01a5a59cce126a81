/*
 * err.h -- the one error convention of trainctl.
 *
 * Library functions return 0 on success or a negative TC_E* code and fill a
 * caller-owned struct tc_err with that code and a message.  Only main.c
 * prints the message and turns the code into an exit status.  Codes and exit
 * statuses are contracts: never renumber them, add new ones at the end.
 *
 * Messages follow git's habit: lowercase, no full stop, the thing that
 * failed first ("job.yaml:12: unknown key 'devcies'").
 */
#ifndef TC_CORE_ERR_H
#define TC_CORE_ERR_H

#include <stdarg.h>

/* X(name, value, exit status, description) */
#define TC_ERRORS(X)                                             \
	X(EUSAGE, 1, 2, "bad usage")                             \
	X(ESPEC, 2, 2, "bad spec")                               \
	X(EJOB, 3, 1, "job failed")                              \
	X(ESTORE, 4, 3, "database")                              \
	X(ESTORAGE, 5, 3, "storage")                             \
	X(EBACKEND, 6, 3, "backend")                             \
	X(ESYS, 7, 3, "system call")                             \
	X(ENOTFOUND, 8, 2, "not found")                          \
	X(EINPUT, 9, 2, "bad input")                             \
	X(EBUSY, 10, 3, "devices busy")                          \
	X(EDEVICE, 11, 3, "device unhealthy")

enum tc_code {
	TC_OK = 0,
#define X(name, val, status, desc) TC_##name = -(val),
	TC_ERRORS(X)
#undef X
};

struct tc_err {
	int code;  /* 0 or a TC_E* value */
	char *msg; /* heap string or NULL; owned by the struct */
};
#define TC_ERR_INIT { 0, NULL }

#if defined(__GNUC__)
#define TC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TC_PRINTF(a, b)
#endif

/* Set code and message (replacing any earlier one); returns code. */
int tc_error(struct tc_err *err, int code, const char *fmt, ...) TC_PRINTF(3, 4);
int tc_verror(struct tc_err *err, int code, const char *fmt, va_list ap);
/* Like tc_error, with ": strerror(errno)" appended. */
int tc_error_errno(struct tc_err *err, int code, const char *fmt, ...) TC_PRINTF(3, 4);
/* Prefix the existing message with "prefix: ". */
void tc_error_prefix(struct tc_err *err, const char *fmt, ...) TC_PRINTF(2, 3);
void tc_err_release(struct tc_err *err);

/* The process exit status for a code (0 for TC_OK). */
int tc_exit_status(int code);
const char *tc_code_name(int code);

#endif
