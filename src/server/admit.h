/*
 * admit.h -- private to src/server/: the one door every job of the server
 * comes in by (docs/security.md, "The admission door").  A submit, a clone,
 * a sweep's trial: each is srv_admit, which parses the spec with the file
 * ids of the account the job will run as, applies every check a non-admin
 * gets, decides that account, and queues the job.  A resume and every start
 * of a supervisor (a requeue, a server that came back) ask srv_job_account
 * again, so no job runs as an account admission would refuse now.
 */
#ifndef TC_SERVER_ADMIT_H
#define TC_SERVER_ADMIT_H

#include <pwd.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/proc.h"
#include "core/strvec.h"

struct srv;
struct who;
struct json_t;

/*
 * The account user's jobs run as (*out, backed by *buf which the caller
 * frees): on a root server the user's own, never uid 0 unless the server was
 * started with --allow-root-jobs; on any other server the server's own.
 * TC_EPERM-like refusals are TC_EUSAGE with a message naming the option.
 */
int srv_job_account(struct srv *s, const char *user, struct passwd *out, char **buf,
		    struct tc_err *err);

/* The file ids of an account while a thread reads as it: struct fs_ids,
 * proc_fs_as and proc_fs_restore (core/proc.h). */
/* srv_fs_as for w's account; an admin or the operator reads as the server. */
bool srv_fs_as_caller(const struct who *w, struct fs_ids *save);

/* What comes in, however it comes. */
struct admit_req {
	const char *owner;        /* whose job it is: the account it runs as (the caller's own
				   * job, the cloned job's owner, the sweep's submitter) */
	bool admin;               /* the admin-only options (container.extra, slurm.extra) may be
				   * given: the caller is an admin or the operator */
	bool owner_reads;         /* read the spec's files as the owner's account even for an
				   * admin (the admin acts on another user's job) */
	const char *text;         /* the spec, YAML or JSON */
	const char *file, *base;  /* its name in messages, and where its relative paths start */
	const char *name;         /* replaces the spec's name, or NULL */
	const struct strvec *sets; /* KEY=VALUE overrides, or NULL */
	int priority;             /* nonzero: replaces the spec's */
	int preemptible;          /* 0 or 1: replaces the spec's; -1: the spec's */
	bool locked;              /* the caller holds s->mu (the main loop: a sweep's round) */
	bool dry;                 /* check only, queue nothing (a sweep's trials when it comes in) */
	const char *team;         /* the team asked for (--team), or NULL: the owner's one or
				   * default team (server/teams.h); one the owner is not in is refused */
};

/*
 * Admit a job: 0 with *id (heap; NULL for dry) and *brief (the job as
 * listed, with its reference; NULL for dry; either may be NULL), or the HTTP
 * status of the refusal (400, 403, 500) with err saying why.
 */
unsigned srv_admit(struct srv *s, const struct admit_req *a, char **id, struct json_t **brief,
		   struct tc_err *err);

#endif
