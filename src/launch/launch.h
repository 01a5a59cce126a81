/*
 * launch.h -- the supervisor: runs one job on this node.
 *
 * launch_run() is `trainctl run`: it records the job, lays out its run
 * folder, builds every worker's environment, starts one worker per device,
 * copies their output line by line to logs/rank-<r>.log and the console,
 * stops the group when a worker fails, restarts it within the job's budget,
 * and records the end with its root cause.
 *
 * Invariants:
 *  (1) A worker runs in its own process group; the supervisor only ever
 *      signals whole groups, so grandchildren go with their worker.
 *  (2) No worker outlives the supervisor: each gets PR_SET_PDEATHSIG, and a
 *      watchdog process (started before any worker) holds the other end of a
 *      pipe; when the supervisor dies, even by SIGKILL, the pipe closes and
 *      the watchdog SIGKILLs every group it was told about.
 *  (3) Log lines are written whole: a rank's partial line waits in its
 *      buffer until its newline (or 1 MiB, or EOF) arrives.
 *  (4) Every state change is written to the store before it is acted on
 *      further; the exit status returned is the one recorded.
 *
 * The environment builder (env.c) and the Ascend rank table writer
 * (ranktable.c) are exposed for the unit tests and other launchers.
 */
#ifndef TC_LAUNCH_H
#define TC_LAUNCH_H

#include <stdarg.h>
#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "spec/spec.h"

struct launch_opts {
	const char *home; /* $TRAINCTL_HOME */
	bool quiet;       /* no worker output on the console */
	bool brief;       /* run -q: on the console only warnings, errors and the result line */
	bool no_metrics;  /* do not read metrics (--no-metrics) */
	bool raw;         /* run --raw: metric lines echoed as printed, no progress lines */
	/*
	 * `trainctl supervise` (started by the server): run the job that
	 * already exists under this id instead of creating one; its first
	 * attempt resumes from the job's newest complete checkpoint when
	 * resume_newest is set (a preempted, paused or lost job run again).
	 * When the supervisor is stopped by SIGTERM and the job's stop_reason
	 * says preempted or paused, that state is recorded instead of killed.
	 */
	const char *job_id;
	bool resume_newest;
	/* one node of a multi-node job (see struct launch_node); NULL: one machine */
	const struct launch_node *node;
	/*
	 * A node, or a server's supervisor (job_id set), that reports to its
	 * job's hub (hub/sink.h, borrowed): its records go there and it opens
	 * no database; what it would read there (a stop's reason, the
	 * checkpoints to resume from) it asks the hub (hub_job_status_json).
	 * NULL: the store of home.
	 */
	struct sink *sink;
	/*
	 * The {secret:} values a server handed this job ("NAME=VALUE",
	 * secret.h: secret_take_env); NULL: secrets come from the local store
	 * of home (`trainctl run`).
	 */
	const struct strvec *secrets;
	/* the run folder (a server's supervisor: TRAINCTL_RUN_DIR); NULL: home/runs/<job> */
	const char *run_dir;
};

/*
 * One node of a multi-node job (`trainctl supervise-node`, started on every
 * node by srun).  The job already exists; its job-level driver
 * (launch_multinode) records the job's states, stages inputs, watches
 * checkpoints and decides restarts.  The node's supervisor runs exactly one
 * attempt of its per_node workers, global ranks node_rank * per_node + i,
 * logs to logs/supervisor-node<n>.log, and leaves the attempt's outcome in
 * launch_node_result_path() for the driver; it never records the job's
 * state itself.
 */
struct launch_node {
	int node_rank, nnodes;
	int attempt;             /* TORCHELASTIC_RESTART_COUNT */
	const char *master_addr; /* node 0's address */
	int master_port;
	const char *resume_from; /* TRAINCTL_RESUME_FROM, or NULL */
	double ranktable_timeout; /* npu: seconds to wait for the merged hccl.json */
};

/*
 * Run a validated spec to its end.  Returns 0 with *exit_status set to the
 * job's status (0 succeeded, 1 failed or killed), or a negative TC_E* for
 * an infrastructure failure before or around the job.  *job_id (heap) is
 * set as soon as the job exists, also on failure.
 */
int launch_run(const struct spec *s, const struct launch_opts *o, char **job_id,
	       int *exit_status, struct tc_err *err);

/*
 * `run --resume JOB`: the newest complete checkpoint of JOB that verifies
 * against its recorded sizes and checksums (heap *path), and JOB's resolved
 * spec (heap *spec_path).  Checkpoints skipped and why go to report.
 */
int launch_resume_point(const char *home, const char *job_ref, char **path, char **spec_path,
			struct sbuf *report, struct tc_err *err);

/*
 * A webhook delivery of job_id written down in the store under home
 * (notify_hook.c, through a direct sink like every delivery): the
 * server's own hooks.
 */
struct notify_delivery;
int launch_record_delivery(const char *home, const char *job_id,
			   const struct notify_delivery *d, struct tc_err *err);

/* ---- multi-node jobs (multinode.c) ---- */

/* <run_dir>/attempts/<attempt>/node-<n>.json: one node's outcome (heap). */
char *launch_node_result_path(const char *run_dir, int attempt, int node_rank);
/*
 * <run_dir>/attempts/<attempt>/hang-node-<n>.json: the hang a node's
 * watchdog found, with its ranks' stacks (heap); the driver compares every
 * node's and names the job's likely culprit (docs/diagnostics.md).
 */
char *launch_node_hang_path(const char *run_dir, int attempt, int node_rank);

/*
 * What a multi-node backend does for launch_multinode: start one attempt on
 * every node (each running launch_run with a struct launch_node) and wait
 * for it.  Returns 0 with *failed set when some node failed, or a negative
 * TC_E* when the attempt could not be started; *stopped is set when the job
 * was told to stop (scancel, time limit, preemption) and must not restart.
 */
struct launch_attempt {
	int attempt, nodes;
	const char *master_addr;
	int master_port;
	const char *resume_from; /* NULL: none */
	/*
	 * Hosts whose devices failed their health check in an earlier attempt
	 * ("n1,n3"), or NULL: the backend leaves them out when its allocation
	 * has nodes to spare (Slurm: srun --exclude).
	 */
	const char *exclude;
	/*
	 * The hosts of the attempt by node rank ("n1,n3": n3 is node 1), or
	 * NULL: the backend's choice.  Set when the backend told the driver
	 * its allocation (launch_backend_ops.hosts): the driver keeps the
	 * survivors' ranks and puts a spare in a lost node's place; exclude
	 * is then already applied.
	 */
	const char *hosts;
};
/*
 * A node that left no outcome of an attempt while no stop was asked (its
 * supervisor was killed, its host died): the backend writes its
 * node-<n>.json with LAUNCH_NODE_LOST_KEY true, this cause and the host's name, and the
 * attempt fails (multinode.c: a failure to restart from, never a stop).
 */
#define LAUNCH_NODE_LOST_CAUSE "its supervisor ended without reporting"
#define LAUNCH_NODE_LOST_KEY "node_lost" /* node-<n>.json: true */
/* Is name one item of the comma-separated list ("n1,n3")?  NULL: no. */
bool launch_host_listed(const char *list, const char *name);
struct launch_backend_ops {
	int (*run_attempt)(void *ctx, const struct launch_attempt *a, bool *failed, bool *stopped,
			   struct tc_err *err);
	void *ctx;
	const char *where; /* "n[1-2]": named in the job's events */
	/* the allocation's hosts in the backend's order, or NULL: it does not say */
	int (*hosts)(void *ctx, struct strvec *out);
	/*
	 * May spare host take a node rank (its newest health check did not
	 * fail; *why: the failure)?  NULL: every spare may (docs/slurm.md, "Spares").
	 */
	bool (*spare_usable)(void *spare_ctx, const char *host, struct sbuf *why);
	void *spare_ctx;
	/*
	 * Give host, left out of the job for good, back to the scheduler
	 * (Slurm: the job's node list less it), or NULL: the backend cannot.
	 * 0: given back; else err says why (it stays in the allocation).
	 */
	int (*release)(void *ctx, const char *host, struct tc_err *err);
	/*
	 * Is host, left out earlier, usable again (the scheduler says it
	 * responds and a probe ran on it)?  why: what was seen.  NULL: the
	 * backend cannot tell (the job does not wait for nodes).
	 */
	bool (*usable)(void *ctx, const char *host, struct sbuf *why);
};

/*
 * The job-level driver of a multi-node job that already exists (state
 * queued): stages inputs, then runs attempts through ops until one
 * succeeds or the job's restart budget (one per job, never per node) is
 * spent, resuming each restart from the newest complete checkpoint; records
 * every state with its reason and the root cause (the first node to fail).
 * *exit_status: 0 succeeded, 1 failed; a stop leaves the state for the
 * backend to map (it knows why) and sets *exit_status to 143.
 */
int launch_multinode(const struct spec *s, const char *home, const char *job_id,
		     const struct launch_backend_ops *ops, int *exit_status, struct tc_err *err);
/*
 * A node that reports to a hub also prints its outcome on stdout, one line:
 * this tag, then node-<n>.json's JSON (compact); the driver, reading its
 * srun's output, writes it to launch_node_result_path in its own run folder.
 */
#define LAUNCH_NODE_RESULT_TAG "trainctl-node-result: "
/*
 * The same for a node's hang report (launch_node_hang_path), sent as soon
 * as the node has dumped its ranks, in parts: each line is this tag, then
 * {"node", "attempt", "part", "parts", "text"}, text being at most
 * LAUNCH_NODE_PART bytes of the report's ASCII JSON; the parts of one node
 * come in order.  (Slurm forwards a longer line in pieces, and the nodes
 * report at about the same moment.)
 */
#define LAUNCH_NODE_HANG_TAG "trainctl-node-hang: "
#define LAUNCH_NODE_PART 400
/*
 * The same for a driver that reports to the job's hub through sink
 * (borrowed) and opens no database: the run folder is home/runs/<job>,
 * restarts already spent come from the caller (the hub's count).
 */
int launch_multinode_remote(const struct spec *s, const char *home, const char *job_id,
			    struct sink *sink, int restarts, const struct launch_backend_ops *ops,
			    int *exit_status, struct tc_err *err);

/* ---- environment (env.c) ---- */

/* What the environment of one node's workers is computed from. */
struct env_plan {
	const struct spec *spec;
	const char *job_id;
	const char *output_dir, *ckpt_dir, *data_dir, *log_dir, *tb_dir;
	const char *resume_from;  /* NULL: not set */
	const char *master_addr;
	int master_port;
	int node_rank, nnodes;    /* 0 and 1 on one machine */
	int restart_count;
	const char *rank_table;   /* npu: path of hccl.json, else NULL */
	const int *extra_ports;   /* paddle: one endpoint port per rank, else NULL */
	/*
	 * Stack dumps of a watched job (docs/diagnostics.md): site_dir goes
	 * first on PYTHONPATH (its sitecustomize.py), TRAINCTL_STACK_DIR and
	 * TRAINCTL_STACK_SIGNAL are set; NULL: none of that.
	 */
	const char *site_dir, *stack_dir;
	int stack_signal;
	/*
	 * The env: values resolved from secrets and files ("KEY=VALUE",
	 * secret.h); NULL: none resolved.  Workers get them; job.env never.
	 */
	const struct strvec *secret_env;
	/*
	 * The job's channels to its in-job helper (docs/python.md): the file
	 * whose existence says a stop is pending (TRAINCTL_STOP_FILE), and
	 * whether each rank gets its metrics file (TRAINCTL_METRICS_CHANNEL,
	 * env_metrics_channel; not when no metrics are read).
	 */
	const char *stop_file;
	bool metrics_channel;
};

/* Variables every worker of the node shares, in a stable order. */
void env_common(const struct env_plan *p, struct strvec *out);
/* The variables of one local rank (appended after the common ones). */
void env_rank(const struct env_plan *p, int local_rank, struct strvec *out);
/* job.env text: common exports (secret and file values as '***'), then each rank's own as comments. */
char *env_file_text(const struct env_plan *p);
/*
 * The metrics channel of rank (its number, or "{rank}" for the supervisor's
 * follower, metrics/ingest.h): log_dir/metrics-rank-<rank>.dlll, heap.  One
 * DLLogger line per job.log call of the in-job helper.
 */
char *env_metrics_channel(const char *log_dir, const char *rank);
/*
 * Remove from env the variables TRAINCTL_SUPERVISOR_ONLY names (a server's
 * webhook secrets: the supervisor's, never the job's), and that list.
 */
void env_drop_supervisor_only(struct strvec *env);
/* Does the framework profile need one endpoint port per rank? */
bool env_needs_rank_ports(const char *framework);

/* ---- Ascend rank table (ranktable.c) ---- */

/*
 * Read device IPs ("address_<id>=<ip>" lines, /etc/hccn.conf format) for
 * the given ids; ips[i] are heap strings.  A missing id is an error naming
 * the file.
 */
int ranktable_device_ips(const char *hccn_conf, const int *ids, int n, char **ips,
			 struct tc_err *err);
/* The same from len bytes of hccn.conf text, named name in errors. */
int ranktable_parse_ips(const char *conf, size_t len, const char *name, const int *ids, int n,
			char **ips, struct tc_err *err);
/* hccl.json v1.0 text for one server (ranks first_rank .. first_rank+n-1). */
char *ranktable_json(const char *server_id, const int *ids, char *const *ips, int n,
		     int first_rank);
/*
 * This host's address for server_id / MASTER_ADDR defaults: the default
 * route's interface's IPv4 address, else the first non-loopback one, else
 * 127.0.0.1; heap string.
 */
char *host_ipv4(void);
/* The interface of the default route (lowest metric) in /proc/net/route text; heap, or NULL. */
char *route_default_iface(const char *route, size_t len);
/*
 * A port for MASTER_PORT (-1 if none): taken below Linux's ephemeral range
 * (32768 and up), where outgoing connections never land, so that between
 * this check and rank 0's bind only another listener could take it; port 0
 * as a last resort.
 */
int launch_free_port(void);
/*
 * A supervisor message: "trainctl: MSG" on stderr (best effort) and a
 * time-stamped line in the log file logfd (when >= 0).
 */
void launch_vsay(int logfd, const char *fmt, va_list ap);
/* launch_vsay on stderr only: the console lines of Slurm's driver, nodes and hub. */
void launch_say(const char *fmt, ...) TC_PRINTF(1, 2);

/*
 * Multi-node rank tables: each node writes its part (server_id, device ids
 * and IPs) as a one-server hccl.json at part_path; ranktable_merge joins
 * nodes parts in node order into one table, ranks numbered node by node
 * (server_count = nodes).  Heap text, or NULL with err naming the part.
 */
char *ranktable_merge(char *const *part_texts, int nodes, struct tc_err *err);
/*
 * The whole exchange for node node_rank of nodes: write this node's part
 * under dir, then node 0 waits for every part and writes dir/hccl.json;
 * the others wait for that file.  A part or table that does not appear
 * within timeout seconds is a TC_EBACKEND error naming the missing nodes.
 */
int ranktable_exchange(const char *dir, int node_rank, int nodes, const char *part_text,
		       double timeout, struct tc_err *err);

#endif
