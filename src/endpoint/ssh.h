/*
 * ssh.h -- the ssh endpoint (docs/exec.md): an sshd of the job's user on a
 * port of 127.0.0.1, whose sessions run in a rank's worker environment.
 *
 * The pieces, in the order they run:
 *   endpoint_build_ssh  (the supervisor, endpoint.h's kind row) makes the
 *                       endpoint's folder RUN_DIR/endpoints/NAME (the job's
 *                       user's, 0700) and the sidecar's argv:
 *                       `trainctl ssh-serve ...`;
 *   ssh_serve_prepare   (the sidecar, as the job's user) writes into that
 *                       folder a host key of its own (ssh-keygen), the
 *                       authorized keys (the spec's public_key, else the
 *                       user's *.pub files in ~/.ssh), sshd_config, known_hosts and
 *                       ssh.json (host, port, user), and gives the argv of
 *                       `sshd -D -e -f sshd_config`;
 *   ssh-session         (sshd's ForceCommand, one per session) finds the
 *                       rank's worker among the supervisor's children
 *                       (the rank comes from the client's SetEnv
 *                       TRAINCTL_SSH_RANK, 0 when unset) and runs the
 *                       session's command or shell there (jobs/exec.h),
 *                       ending it when the supervisor is gone;
 *   ssh_client_argv     (`trainctl ssh`) the ssh command line that checks
 *                       the job's recorded host key.
 *
 * Invariants: the sshd never runs as anyone but the job's user and lets in
 * only that user (AllowUsers), by key only (no password, no PAM); it listens
 * where the endpoint says (127.0.0.1); its host key is the job's own, so
 * `trainctl ssh` checks it strictly.
 */
#ifndef TC_ENDPOINT_SSH_H
#define TC_ENDPOINT_SSH_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/strvec.h"

/* The variable a client sets (ssh -o SetEnv=) to pick the rank of its session. */
#define SSH_RANK_ENV "TRAINCTL_SSH_RANK"

struct ssh_serve {
	const char *dir;        /* the endpoint's folder */
	const char *job_id;
	const char *listen;     /* the address sshd listens on */
	int port;
	const char *public_key; /* a key line, or a key file's path (~/ expanded); NULL: the *.pub files of ~/.ssh */
	const char *self_exe;   /* this trainctl, for the ForceCommand */
	pid_t sup_pid;          /* the job's supervisor (the workers' parent) */
	unsigned long long sup_ticks;
};

/*
 * Write dir's files for o (run as the job's user; an existing host key is
 * kept) and fill argv with the sshd command line.  TC_ESPEC when no usable
 * public key is found, TC_ESYS when sshd or ssh-keygen is missing or fails.
 */
int ssh_serve_prepare(const struct ssh_serve *o, struct strvec *argv, struct tc_err *err);

/* What ssh.json of an endpoint folder says (heap strings). */
struct ssh_where {
	char *host, *user;
	int port;
};
int ssh_where_read(const char *dir, struct ssh_where *w, struct tc_err *err);
void ssh_where_release(struct ssh_where *w);
/*
 * May this process connect where w says?  ssh.json is written by the job's
 * account, so nothing in it is taken on trust (docs/exec.md): the host
 * must be 127.0.0.1 or localhost (the sidecar listens on the loopback of
 * the job's node, where `trainctl ssh` runs), the user the job's account
 * (job_user, the store's), and, for a caller who is not that account
 * (root, an admin), the port a TCP listener of the account's uid on the
 * loopback (/proc/net/tcp), so that root never logs in to another
 * account's sshd or a system one.  w->host becomes "127.0.0.1".  TC_EUSAGE
 * naming what does not match.
 */
int ssh_where_check(struct ssh_where *w, const char *job_id, const char *job_user,
		    struct tc_err *err);
/*
 * The uid owning the TCP listener on the loopback (or any address) at port,
 * from /proc/net/tcp and tcp6: 0 with *uid, 1 when there is none, -1 when
 * listeners of two uids share it.
 */
int ssh_port_owner(int port, uid_t *uid);
/*
 * The connections open now (ESTABLISHED) to port on the loopback, from
 * /proc/net/tcp and tcp6: an sshd's sessions (limits.idle_minutes).
 */
int ssh_port_sessions(int port);

/*
 * The ssh command line into rank of the endpoint in dir: the port, the
 * folder's known_hosts checked strictly, SetEnv of the rank, then the
 * caller's ssh options (args up to the first word that is no option or
 * option value), user@host, then the rest of args (a remote command).
 */
void ssh_client_argv(const char *dir, const struct ssh_where *w, int rank, char *const *args,
		     int nargs, struct strvec *argv);

#endif
