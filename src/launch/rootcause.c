/*
 * rootcause.c -- why a rank failed, as the supervisor tells it
 * (supervisor_int.h): the one-line cause ("rank 1: KeyError: 'k' (exited
 * with code 1)") from torch's @record error file or the traceback at the end
 * of the rank's log, and the detail under it: the error file's stack and the
 * log's last lines.  Both read files the job's user writes: never through a
 * link, and with the job's secrets masked.
 */
#include "launch/supervisor_int.h"
#include "launch/attempt.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "diag/diag.h"
#include "jobs/runpath.h"

#include <jansson.h>
#include <string.h>

#define TAIL_LINES 20

/* text without its last Python traceback (the error file shows it): once on the screen is enough */
static bool cut_traceback(struct sbuf *text)
{
	static const char mark[] = "Traceback (most recent call last):";
	for (size_t i = text->len; i-- > 0;)
		if ((i == 0 || text->buf[i - 1] == '\n') && text->len - i >= sizeof(mark) - 1 &&
		    !memcmp(text->buf + i, mark, sizeof(mark) - 1)) {
			sbuf_setlen(text, i);
			sbuf_rtrim(text);
			return true;
		}
	return false;
}

/* after_traceback: the error file showed the traceback: the tail stops where the log's own begins */
static void append_log_tail(struct sup *sp, struct sbuf *out, int rank, bool after_traceback)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	run_path(&path, sp->run_dir, NULL, RUN_RANK_LOG, rank);
	bool cut = false;
	if (read_file_nofollow(path.buf, &text, NULL) == 0 && text.len) {
		sbuf_rtrim(&text);
		cut = after_traceback && cut_traceback(&text);
	}
	if (text.len) {
		size_t start = text.len;
		int lines = 0;
		while (start > 0 && lines < TAIL_LINES) {
			start--;
			if (text.buf[start] == '\n')
				lines++;
		}
		if (text.buf[start] == '\n')
			start++;
		int shown = lines < TAIL_LINES ? lines + 1 : TAIL_LINES;
		sbuf_addf(out, "\n--- last %d line%s of rank %d%s (%s) ---\n", shown, shown == 1 ? "" : "s",
			  rank, cut ? " before its traceback" : "", path.buf);
		sbuf_add(out, text.buf + start, text.len - start);
	}
	sbuf_release(&path);
	sbuf_release(&text);
}

/* torch's @record writes {"message": {"message": ..., "extraInfo": {"py_callstack": ...}}} */
static json_t *read_error_file(struct sup *sp, int rank, struct sbuf *path, const char **msg,
			       const char **stack)
{
	run_path(path, sp->run_dir, NULL, RUN_RANK_ERROR, rank);
	/* the job's user writes logs/: read its file, never one a link points at */
	struct sbuf text = SBUF_INIT;
	json_t *root = read_file_nofollow(path->buf, &text, NULL) == 0
			       ? json_loadb(text.buf, text.len, 0, NULL)
			       : NULL;
	sbuf_release(&text);
	*msg = *stack = NULL;
	json_t *m = json_object_get(root, "message");
	if (json_is_object(m)) {
		*msg = json_string_value(json_object_get(m, "message"));
		*stack = json_string_value(json_object_get(json_object_get(m, "extraInfo"), "py_callstack"));
	} else {
		*msg = json_string_value(m);
	}
	return root;
}

/* The error file's stack, or message; true when it showed a traceback. */
static bool append_error_file(struct sup *sp, struct sbuf *out, int rank)
{
	struct sbuf path = SBUF_INIT;
	const char *msg, *stack;
	json_t *root = read_error_file(sp, rank, &path, &msg, &stack);
	if (stack || msg) {
		sbuf_addf(out, "\n--- error reported by rank %d (%s) ---\n", rank, path.buf);
		sbuf_adds(out, stack ? stack : msg);
		sbuf_rtrim(out);
	}
	json_decref(root);
	sbuf_release(&path);
	return stack != NULL;
}

/*
 * The exception rank died of ("KeyError: 'missing_key'"), heap or NULL:
 * @record's error file first, else the traceback at the end of its log.
 */
static char *rank_exception(struct sup *sp, int rank)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	const char *msg, *stack;
	json_t *root = read_error_file(sp, rank, &path, &msg, &stack);
	char *line = msg ? diag_exception_line(msg, strlen(msg), false) : NULL;
	if (!line && stack)
		line = diag_exception_line(stack, strlen(stack), true);
	json_decref(root);
	sbuf_reset(&path);
	run_path(&path, sp->run_dir, NULL, RUN_RANK_LOG, rank);
	if (!line && read_file_nofollow(path.buf, &text, NULL) == 0 && text.len) {
		/* the traceback is at the end: its last 64 KiB are enough */
		size_t from = text.len > 65536 ? text.len - 65536 : 0;
		line = diag_exception_line(text.buf + from, text.len - from, true);
	}
	sbuf_release(&text);
	sbuf_release(&path);
	return line;
}

void sup_rank_cause(struct sup *sp, struct sbuf *cause, int rank, int status)
{
	size_t from = cause->len;
	char *exc = rank_exception(sp, rank);
	if (exc) {
		sbuf_addf(cause, "rank %d: %s (", rank, exc);
		proc_describe_exit(cause, status);
		sbuf_addch(cause, ')');
	} else {
		sbuf_addf(cause, "rank %d ", rank);
		proc_describe_exit(cause, status);
	}
	free(exc);
	sup_mask_secrets(sp, cause, from); /* the exception's text is the job's */
}

void sup_failure_detail(struct sup *sp, struct sbuf *out, int rank)
{
	size_t from = out->len;
	bool traceback = append_error_file(sp, out, rank);
	append_log_tail(sp, out, rank, traceback);
	sup_mask_secrets(sp, out, from); /* the root cause is shown and stored: the error file is the job's */
}

enum attempt_final sup_failure_cause(struct sup *sp, struct sbuf *cause)
{
	/* restart.policy first_step: an exit before any progress is no reason to try again */
	bool early = !sp->fail_why.len && sp->watch && !sup_watch_progressed(sp) &&
		     spec_restart_policy(sp->s) == RESTART_POLICY_FIRST_STEP;
	if (early)
		sbuf_adds(cause, "failed before its first step: ");
	if (sp->fail_why.len) /* a hang or an on_log match (watch.c) */
		sbuf_add(cause, sp->fail_why.buf, sp->fail_why.len);
	else
		sup_rank_cause(sp, cause, sp->fail_rank, sp->fail_status);
	return sp->over_limit ? ATTEMPT_FINAL_LIMIT
	       : early	      ? ATTEMPT_FINAL_FIRST_STEP
	       : sp->fail_final ? ATTEMPT_FINAL_ON_LOG
				: ATTEMPT_MAY_RESTART;
}
