/*
 * exec.h -- `trainctl exec`: run a command in a running job's environment,
 * as `kubectl exec` does in a pod's container.
 *
 * The environment is the one the rank's worker process really has: its
 * /proc/PID/environ, its cwd (/proc/PID/cwd) and its account (the real
 * uid, gid and supplementary groups of /proc/PID/status).  Never the
 * caller's environment.  The job's record (the JSON form of jobs.h, local
 * or from the server) names the worker's pid; the process found there must
 * carry the job's TRAINCTL_JOB_ID and the rank's RANK, so a pid reused by
 * another process, or a pid of another host, is refused rather than
 * entered.
 *
 * Invariants:
 *  (1) Never more privilege than the caller has: a caller that is not root
 *      may exec only into a worker that runs under its own uid; root runs
 *      the command under the worker's uid, gid and groups (it drops to
 *      them, through core/proc, the one place ids change).
 *  (2) Local only: the worker must run on this host (its pid names it
 *      here).  A job of a server on another host is refused, named so.
 *  (3) Nothing here prints; errors go to tc_err.
 *
 * Ownership: struct exec_target owns its strings; exec_target_release
 * frees them (and is a no-op on a zeroed target).
 */
#ifndef TC_JOBS_EXEC_H
#define TC_JOBS_EXEC_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

#include "core/err.h"
#include "core/strvec.h"

/* One rank's running worker, as the command to run in its place sees it. */
struct exec_target {
	char *job_id;
	int rank;
	pid_t pid;
	struct strvec env; /* the worker's environment, "K=V" */
	char *cwd;         /* its working folder */
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* its supplementary groups (heap), ngroups of them */
	size_t ngroups;
};
#define EXEC_TARGET_INIT { .env = STRVEC_INIT, .pid = -1 }

/*
 * The pid of rank's worker of the current attempt in job (the JSON form:
 * id, state, workers, workers_history), and that attempt's number when
 * attempt is not NULL.  rank < 0 means 0.  TC_EUSAGE naming the reason
 * when the job has ended, has not started its workers, has no such rank,
 * or the rank is between attempts.
 */
int exec_pick_worker(json_t *job, long rank, pid_t *pid, int *attempt, struct tc_err *err);

/*
 * Read the worker pid of job_id's rank into t (after EXEC_TARGET_INIT):
 * its environment, cwd and account.  TC_EUSAGE when pid is not that
 * worker on this host (gone, another process, or the caller may not read
 * it), naming which; access is checked as invariant (1) says.
 */
int exec_target_read(pid_t pid, const char *job_id, int rank, struct exec_target *t,
		     struct tc_err *err);

/*
 * Find job_id's rank worker among the children of parent (the job's
 * supervisor): the process whose parent is parent and whose environment
 * has the job's TRAINCTL_JOB_ID and RANK=rank.  TC_EUSAGE when none runs.
 */
int exec_find_child(pid_t parent, const char *job_id, int rank, pid_t *pid, struct tc_err *err);

/*
 * A job in a container image (docs/containers.md): the worker process is
 * the container runtime's client, whose command line names the container
 * (--name=trainctl-JOB-aATTEMPT-rRANK), its user (--user=UID:GID, none for
 * a rootless one: the client's own) and its workdir.
 *
 * exec_container_client checks that pid is the client of job_id's rank,
 * that the caller may use that client's runtime (root, or the client's own
 * account: its containers are that account's), and fills t with the
 * client's environment and account (the runtime's exec runs as them) and
 * argv with `RUNTIME exec -i [-t] --user=U:G --workdir=W NAME` from the
 * client's own command line (-t when tty).  The command that follows gets
 * the container's environment, the worker's.  TC_EUSAGE when pid is not
 * such a client (exec_find_container_child: no child of parent is).
 */
int exec_container_client(pid_t pid, const char *job_id, int rank, bool tty,
			  struct exec_target *t, struct strvec *argv, struct tc_err *err);
int exec_find_container_child(pid_t parent, const char *job_id, int rank, pid_t *pid,
			      struct tc_err *err);

struct exec_opts {
	/* the environment's additions, "K=V" (replacing the worker's K); NULL: none */
	const char *const *extra_env;
	/*
	 * When set, the command is ended (SIGHUP to it and every other process
	 * of our process group, then SIGKILL after two seconds) once this
	 * process (pid and /proc start ticks) is gone: an ssh session, whose
	 * group is its own, ends with its job.
	 */
	pid_t watch_pid;
	unsigned long long watch_ticks;
};

/*
 * Run argv (argv[0] looked up on the worker's PATH) in t's environment,
 * cwd and account, with our stdin, stdout and stderr, and wait for it.
 * While it runs, SIGINT and SIGQUIT are left to it (the terminal sends
 * them to both of us), SIGTERM and SIGHUP are passed on to it.  *status:
 * its exit code, or 128 + the signal that ended it (a shell's habit);
 * 127 when it could not be run (the child said why on stderr).
 */
int exec_run(const struct exec_target *t, char *const *argv, const struct exec_opts *o,
	     int *status, struct tc_err *err);

void exec_target_release(struct exec_target *t);

#endif
