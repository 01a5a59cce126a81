/*
 * attempt.h -- what follows an attempt of a job: the one place that
 * decides done or again, for the supervisor of a one-node job
 * (supervisor.c), the driver of a multi-node job (multinode.c) and the
 * server requeueing a job whose supervisor was lost (server.c).
 *
 * NOTES ON THE DESIGN
 * (1) Two halves.  attempt_decide is a pure function of the outcome and
 *     the restart budget: the verdict (again or the job's end), its state,
 *     exit status, webhook event and every reason text.  attempt_record
 *     carries a verdict out through the job's sink and webhooks, the only
 *     effects; the server applies its verdicts through the store itself
 *     (it is the hub, hub/sink.h note 1).
 * (2) The texts differ by who runs the attempt (enum attempt_scope: "the
 *     group" restarts on one node, "every node" on many) and nothing else;
 *     users and tests read them, so they stay word for word.
 * (3) What the driver has to do before a restart (find the checkpoint to
 *     resume from) it does between the two calls; the failure's detail
 *     (the rank's error file and log tail) is read only for an end.
 *
 * Ownership: a verdict's texts are its own; attempt_verdict_release.
 */
#ifndef TC_LAUNCH_ATTEMPT_H
#define TC_LAUNCH_ATTEMPT_H

#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "jobs/state.h"
#include "notify/notify.h"

struct sink;
struct launch_notify;

/* How an attempt ended. */
enum attempt_end {
	ATTEMPT_OK,            /* every worker exited 0 */
	ATTEMPT_UPLOAD_FAILED, /* ... and the final upload failed (cause): the job fails */
	ATTEMPT_FAILED,        /* a rank, a node, a hang, an on_log match (cause) */
	ATTEMPT_STOPPED,       /* a signal stopped it (signal), for the reason asked */
	ATTEMPT_LOST,          /* its supervisor is gone without an end (the server's view) */
};

/* Who runs the attempt: the words of the texts (note 2). */
enum attempt_scope {
	ATTEMPT_ONE_NODE,   /* a supervisor's group of workers */
	ATTEMPT_EVERY_NODE, /* a multi-node driver's nodes */
};

/* Why a failure must not restart although the budget allows it. */
enum attempt_final {
	ATTEMPT_MAY_RESTART,
	ATTEMPT_FINAL_FIRST_STEP, /* restart.policy first_step: it failed before any progress */
	ATTEMPT_FINAL_ON_LOG,     /* an on_log action fail */
	ATTEMPT_FINAL_EITHER,     /* one of the two (a node's report does not say which) */
	ATTEMPT_FINAL_LIMIT,      /* limits.max_runtime is spent: the cause says so */
};

struct attempt_outcome {
	enum attempt_end end;
	enum attempt_scope scope;
	enum attempt_final final; /* ATTEMPT_FAILED */
	const char *cause;        /* FAILED, UPLOAD_FAILED: the root cause's first line; STOPPED
				     by the supervisor itself (asked NONE): why (an idle job) */
	int signal;               /* STOPPED: the signal that stopped the workers */
	enum job_stop asked;      /* STOPPED: what the server asked (JOB_STOP_NONE: a user's signal) */
	int restarts;             /* restarts spent before this attempt */
	int max_restarts;         /* spec restart.max_restarts */
};

struct attempt_verdict {
	bool again;              /* run another attempt (or requeue, for LOST) */
	bool ends;               /* a terminal state: sink_finish, else sink_mark */
	enum job_state state;    /* the job's state after it */
	int exit_code;           /* the job's exit status when it ends, else -1 */
	int restarts;            /* restarts spent after it (again: one more) */
	bool notify;             /* the job's webhooks hear event */
	enum notify_event event;
	const char *notify_state; /* the state word the webhooks get */
	struct sbuf why;          /* the reason: of the state change, the webhook, the result */
	struct sbuf cause;        /* the event's text in the job's record (a failure: its cause) */
	bool root;                /* why (and a failure's detail) is the job's root cause */
};

/* The verdict on o (pure: note 1); release it with attempt_verdict_release. */
void attempt_decide(const struct attempt_outcome *o, struct attempt_verdict *v);
/* Would o run again?  attempt_decide's answer without its texts. */
bool attempt_again(const struct attempt_outcome *o);
void attempt_verdict_release(struct attempt_verdict *v);

/* Where a verdict goes (note 1). */
struct attempt_ctl {
	struct sink *sink;
	struct launch_notify *ln; /* the job's webhooks, or NULL */
	const char *job_id;
	int attempt;              /* the attempt that ended */
	/* a restart's line, said even under run -q */
	void (*say)(void *ctx, const char *msg);
	void *say_ctx;
	struct sbuf *result;      /* the job's outcome line, replaced when it ends */
};

/*
 * Record v: the state change (with detail, the failure's error file and
 * log tail, appended to the root cause; NULL: none), the restart count,
 * the webhook event and the outcome line.  The sink's error; the webhook
 * and the line are given whatever it says.
 */
int attempt_record(const struct attempt_ctl *c, const struct attempt_verdict *v,
		   const char *detail, struct tc_err *err);

#endif
