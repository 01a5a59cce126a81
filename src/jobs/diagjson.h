/*
 * diagjson.h -- the types of run_dir/diagnostics.json (docs/diagnostics.md),
 * checked before the file is served.
 *
 * The job's account owns its run folder, so diagnostics.json is whatever
 * the job wrote: the server, `show` and the web UI must not take its shape
 * on trust.  jobs_diag_typed keeps the keys the supervisor and the
 * multi-node driver write (launch/watch.c, launch/multinode.c), each only
 * with its type: a number is a JSON number (an integer where the writer
 * writes one), text is a string of bounded length (longer ones are cut at a
 * character boundary), a list is an array of objects of their own schema,
 * of bounded length.  A key that is unknown, or of another type, is
 * dropped; so is a list item that is not an object.
 *
 * Ownership: the result is a new object the caller releases; the input is
 * not changed.
 */
#ifndef TC_JOBS_DIAGJSON_H
#define TC_JOBS_DIAGJSON_H

#include <jansson.h>

/* Bytes kept of a text field (a hang's why and message, a log line). */
#define JOBS_DIAG_TEXT_MAX 16384
/* Bytes kept of one rank's stacks in a hang (watch.c reads up to 1 MiB a process). */
#define JOBS_DIAG_STACK_MAX (4u << 20)
/* Items kept of a list (ranks, stragglers, hangs, matches, stacks, nodes). */
#define JOBS_DIAG_LIST_MAX 65536

/* in's known keys of their types (above), or NULL when in is not an object. */
json_t *jobs_diag_typed(const json_t *in);

#endif
