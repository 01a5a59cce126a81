/*
 * container.h -- jobs in container images (docs/containers.md): which
 * runtime runs them, the command line that wraps each worker, the device
 * pass-through table, the image check, and the clean-up of containers a
 * supervisor could not stop itself.
 *
 * THE MODEL
 *  One container per worker: the runtime's client (`podman run ...`) is
 *  the worker process the supervisor starts through core/proc's wrapper
 *  hook, so that each rank keeps its own log pipes, exit status, signals
 *  (the client passes them on: --sig-proxy, --init), restarts and grace
 *  period, exactly as a host worker.  The container shares the host's
 *  network (and IPC, for NCCL/HCCL shared memory) by default, mounts the
 *  run, data, output and checkpoint folders and the workdir at the same
 *  paths, runs as the job's user with no capabilities and
 *  no-new-privileges, and gets the worker's environment through an env
 *  file, never the runtime's.
 *
 * INVARIANTS
 *  - A container never gives the user more than the user has: no
 *    --privileged, every capability dropped, no-new-privileges (a setuid
 *    file of the image gains nothing), the job's uid:gid (container.user
 *    may only name that user), container.extra for non-admins limited to
 *    spec_container_extra_refused()'s allowlist.
 *  - Never a silent host fallback: a runtime, image or device row that is
 *    missing is an error (TC_EBACKEND, exit 3) naming what is missing.
 *  - Names: trainctl-<job>-a<attempt>-r<rank> for a worker,
 *    trainctl-<job>-ep-<name> for an endpoint (docs/endpoints.md: an image
 *    job's endpoints run in its image too, each in a container of its
 *    own, built here by the same container_wrapper); every container
 *    carries the label trainctl.job=<job>, by which container_reap_argv
 *    removes what a killed supervisor left running (the runtime's client
 *    dying does not stop its container: conmon or dockerd keeps it).
 *
 * Nothing here prints; strings and vectors are the caller's to free.
 */
#ifndef TC_CONTAINER_H
#define TC_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "spec/spec.h"

enum container_kind { CONTAINER_PODMAN, CONTAINER_DOCKER };

struct container_runtime {
	enum container_kind kind;
	char *name; /* "podman", "docker" */
	char *path; /* absolute */
};

/*
 * The runtime for a job: want ("podman", "docker") or, when NULL, podman
 * then docker, looked up on PATH.  TC_EBACKEND "container runtime 'podman'
 * is not installed (not found on PATH)" when none is.
 */
int container_runtime_find(const char *want, struct container_runtime *rt, struct tc_err *err);
void container_runtime_release(struct container_runtime *rt);

/*
 * The environment the runtime's client itself runs with: PATH, HOME and
 * the runtimes' own settings (CONTAINERS_CONF, DOCKER_HOST, XDG_RUNTIME_DIR,
 * ...) from ours, nothing of the job's (whose LD_PRELOAD must not reach a
 * client that root runs).  Appended to env.
 */
void container_client_env(struct strvec *env);

/*
 * Is the image there, per pull ("never", "missing" (NULL), "always")?
 * Runs `RT image exists|inspect` and `RT pull` with the client env; a
 * failure is TC_EBACKEND quoting the runtime's own message: "image
 * 'x' is not available (pull: never): Error: ...".
 */
int container_image_ready(const struct container_runtime *rt, const char *image, const char *pull,
			  struct tc_err *err);

/* One worker's container, or one endpoint's. */
struct container_worker {
	const struct spec *s;      /* image, container:, device type, workdir */
	const struct container_runtime *rt;
	const char *job_id;
	int attempt, rank;
	/*
	 * Non-NULL: the container of this endpoint, not of a rank (attempt and
	 * rank unused): named trainctl-<job>-ep-<endpoint>, labelled
	 * trainctl.endpoint=<endpoint>, and on the host's network whatever
	 * container.network says, since its port is the host's 127.0.0.1.
	 */
	const char *endpoint;
	uid_t uid;                 /* the job's user */
	gid_t gid;
	bool rootless;             /* the client runs as a user, not root (podman: --userns=keep-id) */
	const char *env_file;      /* the worker's environment, KEY=VALUE lines (container_env_file) */
	const char *const *dirs;   /* folders mounted read-write at their own paths (NULL-ended) */
	const int *device_ids;     /* this node's devices of the job, and how many */
	int ndevices;
	bool private_ipc;          /* no --ipc=host (rootless podman on a host without /dev/mqueue) */
	/* which host paths exist (the device table's optional ones); NULL: all do (tests) */
	bool (*exists)(const char *path);
};

/* "trainctl-<job>-a<attempt>-r<rank>" into sb (reset first). */
void container_name(struct sbuf *sb, const char *job_id, int attempt, int rank);
/* "trainctl-<job>-ep-<endpoint>" into sb (reset first). */
void container_endpoint_name(struct sbuf *sb, const char *job_id, const char *endpoint);

/*
 * The runtime command line that runs one worker (or endpoint), up to and
 * including the image: the worker's argv follows it (proc.h: wrapper).  TC_EBACKEND for
 * a device type without a pass-through row, TC_EUSAGE for a
 * container.user that is not the job's user.
 */
int container_wrapper(const struct container_worker *cw, struct strvec *out, struct tc_err *err);

/*
 * The worker's environment as an env file for --env-file (KEY=VALUE, one a
 * line).  The device visibility variable is renumbered to what the
 * container sees (passthrough.c); a variable whose value holds a newline
 * cannot be written and is left out (its name is added to dropped).
 */
char *container_env_file(const struct container_worker *cw, const struct strvec *env,
			 struct strvec *dropped);

/* ---- the device table (passthrough.c) ---- */

/*
 * Append the pass-through options for device_type's devices ids[0..n) to
 * out.  TC_EBACKEND naming the missing row for a type nobody has written
 * one for.
 */
int container_devices(const struct container_runtime *rt, const char *device_type, const int *ids,
		      int n, bool (*exists)(const char *path), struct strvec *out, struct tc_err *err);
/*
 * The visibility variable's value inside the container, where the
 * runtime has renumbered the devices (NVIDIA: 0..n-1 in host order), or
 * NULL when the host's value stays (heap).
 */
char *container_visible_value(const char *device_type, const char *host_value);
/* One row per type, for docs and tests: the type, and how the row was verified. */
struct container_dev_info {
	const char *type, *verified;
};
const struct container_dev_info *container_dev_rows(size_t *n);

/* ---- reaching a running worker, and cleaning up ---- */

/*
 * The prefix that runs a command inside rank's running container:
 * `RT exec [-i] --user UID:GID -w CWD NAME` (the command follows).
 */
void container_exec_argv(const struct container_runtime *rt, const char *job_id, int attempt,
			 int rank, uid_t uid, gid_t gid, const char *cwd, bool interactive,
			 struct strvec *out);
/*
 * The same for a job from its spec (the runtime looked up as the job's
 * supervisor did, cwd = the spec's workdir): for `trainctl exec` and
 * endpoints.  TC_EUSAGE when the job has no image; TC_EBACKEND when its
 * runtime is not installed here.
 */
int container_exec_prefix(const struct spec *s, const char *job_id, int attempt, int rank,
			  uid_t uid, gid_t gid, bool interactive, struct strvec *out,
			  struct tc_err *err);
/* `RT rm -f [--time 0 --ignore] NAME...`: ends and removes the named containers. */
void container_rm_argv(const struct container_runtime *rt, const char *const *names, size_t n,
		       struct strvec *out);
/*
 * A command that ends and removes every container labelled with job_id,
 * for the supervisor's reaper to run once the supervisor is gone:
 * `podman rm -f --time 0 --filter label=trainctl.job=ID`, and for docker
 * (whose rm has no filter) the same through /bin/sh.
 */
void container_reap_argv(const struct container_runtime *rt, const char *job_id,
			 struct strvec *out);
/* Run an argv built above with the client env; 0, or TC_EBACKEND with its output. */
int container_run(const struct strvec *argv, int timeout_ms, struct tc_err *err);

/*
 * Slurm: pyxis adds --container-image to srun.  Does this srun have it?
 * (Asked by running `srun --help`.)
 */
bool container_srun_has_pyxis(const char *srun);

/* ---- Slurm: pyxis (pyxis.c) ----
 *
 * With container.runtime: pyxis each worker is a one-task Slurm step of the
 * job on its supervisor's node, `srun --overlap ... --container-image=IMG
 * -- ARGV`: the srun client is the worker process (it passes signals on,
 * exits with the task's status, and Slurm ends the step of a client that
 * is killed).  The supervisor stays on the host.
 */

/* Does s run its workers through pyxis (image: and container.runtime: pyxis)? */
bool container_is_pyxis(const struct spec *s);
/*
 * enroot's form of an image reference (heap): a registry's reference
 * "registry/path:tag" is "registry#path:tag" (a first component with '.'
 * or ':', or "localhost", names a registry, as docker says); a Docker Hub
 * reference, a path (/..., ./..., ../...) or one with '#' stays as it is.
 */
char *container_pyxis_image(const char *image);

/* One worker's step. */
struct container_pyxis {
	const struct spec *s;     /* image, container.mounts, workdir */
	const char *srun;         /* absolute */
	const char *job_id;       /* trainctl's: the step's and the container's names */
	const char *slurm_job;    /* SLURM_JOB_ID of the supervisor */
	const char *node;         /* SLURMD_NODENAME: the step runs on our node */
	int attempt, rank;
	int cpus;                 /* --cpus-per-task (the node's CPUs of the job); 0: Slurm's default */
	const char *const *dirs;  /* folders mounted read-write at their own paths (NULL-ended) */
};
/*
 * The srun command line up to and including "--" (the worker's argv
 * follows): --overlap --nodes=1 --ntasks=1 --jobid --nodelist
 * --container-image (container_pyxis_image) --container-name=trainctl-<job>
 * (one unpacked image per job and node) --container-mounts (the dirs, the
 * workdir, container.mounts) --container-workdir --no-container-mount-home.
 * TC_EBACKEND for a path pyxis cannot mount (',' or ':' in it).
 */
int container_pyxis_wrapper(const struct container_pyxis *px, struct strvec *out,
			    struct tc_err *err);
/*
 * The srun client's environment from the worker's (appended to out): the
 * supervisor step's SLURM_* are left out (they would shape the new step;
 * SLURM_CONF stays).  srun --export=ALL hands the rest to the task.
 */
void container_pyxis_env(const struct strvec *worker_env, struct strvec *out);
/*
 * A Slurm job's runtime, chosen on the submit host before anything is
 * recorded and written into s (so show and the nodes see it): the given
 * podman or docker as they are; pyxis when srun (a path or a name on PATH)
 * lists --container-image and the job needs nothing pyxis cannot do
 * (container.extra, network, shm_size, devices other than cpu and gpu),
 * else podman, else docker found here.  TC_ESPEC (exit 2) naming what is
 * missing when none is, or when runtime: pyxis is given and cannot be used.
 * A job without image: is left as it is.
 */
int container_slurm_runtime(struct spec *s, const char *srun, struct tc_err *err);

#endif
