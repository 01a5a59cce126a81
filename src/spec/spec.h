/*
 * spec.h -- the job spec: parse YAML or JSON, validate, fill defaults.
 *
 * One parser serves both formats: JSON is read through libyaml (a JSON
 * document is a YAML flow document), so every key keeps its line number and
 * every error can say "job.yaml:12: unknown key 'devcies'".  Validation is
 * table-driven: one row per key with its handler; a key whose feature is not
 * built yet has a row saying so and is rejected, never silently ignored.
 *
 * spec_load() either returns a complete, validated struct spec or fails
 * with TC_ESPEC having touched nothing on disk.  The struct owns all its
 * strings; spec_free(NULL) is a no-op.
 */
#ifndef TC_SPEC_H
#define TC_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/strvec.h"
#include "metrics/metrics.h"

struct notify_hook;

/* Where an env: value comes from (docs/formats.md); args: are always values. */
enum spec_env_from {
	ENV_FROM_VALUE = 0, /* val is the value */
	ENV_FROM_SECRET,    /* {secret: NAME}: val is NAME, resolved when the job starts (secret.h) */
	ENV_FROM_FILE,      /* {file: PATH}: val is the absolute PATH, read as the job's user */
};

struct spec_kv {
	char *key;
	char *val; /* NULL for a bare flag (args: {verbose: null}) */
	enum spec_env_from from;
};

enum spec_resume { RESUME_AUTO, RESUME_NEVER, RESUME_PATH };

/* endpoints: one entry (docs/endpoints.md, endpoint/endpoint.h) */
struct spec_endpoint {
	char *name;       /* unique in the job; letters, digits, '_' and '-' (a URL segment) */
	char *kind;       /* a row of endpoint/endpoint.c's kind table: jupyter, tensorboard, ... */
	char *command;    /* generic: a /bin/sh command ($PORT is its port), else NULL */
	int port;         /* generic: a fixed port; 0 = a free one */
	char *public_key; /* ssh: a public key's text or a file, else NULL */
};

/* inputs: one entry (docs/storage.md) */
struct spec_input {
	char *from; /* s3://, obs:// URL or an absolute local path */
	char *to;   /* relative to the run's data dir, or absolute */
};

/* logs.max_bytes: 1 GiB unless the spec says (0: no limit; else at least 4 KiB) */
#define SPEC_LOGS_MAX_BYTES_DEFAULT (1LL << 30)
#define SPEC_LOGS_MAX_BYTES_MIN 4096.0

/* nodes.wait's default: TorchElastic's rendezvous join timeout (600 s) */
#define SPEC_NODES_WAIT_DEFAULT 600L

struct spec {
	char *source;       /* the spec file as given, or NULL (ad hoc) */
	char *name;
	struct strvec argv; /* command as a list (argv[0] is looked up on PATH) */
	char *shell;        /* or: command as a string for /bin/sh -c */
	int command_line;   /* where command: is in source (for messages); 0 = unknown */
	char *command_set;  /* or the --set KEY=VALUE that gave it (for messages); NULL: the file */
	struct spec_kv *args;
	size_t nargs;
	char *workdir;      /* absolute */
	struct spec_kv *env;
	size_t nenv;
	char *framework;    /* pytorch | mindspore | tensorflow | paddle */
	char *device_type;  /* a devices.h kind */
	int per_node;       /* resolved number of workers on the node */
	int *device_ids;    /* per_node entries, the physical ids */
	char *hccn_conf;    /* npu: where device IPs come from ("{node}": the node rank) */
	int nodes;          /* nodes.max with nodes: {min, max}: the allocation and the first attempt */
	int nodes_min;      /* nodes.min: fewer nodes end the job; == nodes unless elastic */
	/* nodes.wait: seconds an elastic job below nodes.min waits for nodes; 0: fails at once */
	long nodes_wait;
	int spares;         /* spares: hosts allocated beyond nodes to replace a lost one */
	enum spec_node_policy {
		NODE_POLICY_REPLACE = 0, /* restart.policy replace: a spare takes a lost node's rank */
		NODE_POLICY_RESTART,     /* restart.policy restart: the same hosts again */
	} node_policy;
	char *backend;      /* local | slurm (nodes > 1 needs slurm) */
	int master_port;    /* 0 = pick a free one */
	int max_restarts;
	int grace_seconds;
	char *ckpt_dir;     /* relative to the output dir, or absolute */
	enum spec_resume resume;
	char *resume_path;  /* when resume == RESUME_PATH (absolute, or an s3:// / obs:// URL) */
	int ckpt_keep;      /* complete checkpoints kept; 0 = all */
	/* inputs: and outputs: (docs/storage.md) */
	struct spec_input *inputs;
	size_t ninputs;
	char *upload_to;          /* outputs.upload_to with {job_id} unexpanded, or NULL */
	int upload_every_seconds; /* 0 = not periodic by time */
	int upload_every_steps;   /* 0 = not periodic by checkpoint step */
	/* metrics: (docs/metrics.md) */
	char *metrics_format;      /* auto | dllogger | tcap | mindformers | none; NULL = auto */
	int metrics_warmup_steps;  /* step records left out of throughput; default 0 */
	int metrics_batch_size;    /* per-rank batch size; 0 = not given */
	char *metrics_accuracy;    /* metric reported as the job's accuracy, or NULL */
	struct strvec metrics_files; /* DLLogger JSON files to follow, as written
					(relative to workdir; "{rank}" expands) */
	struct strvec metrics_tb_dirs; /* metrics.tensorboard_dirs: folders whose
					  TensorBoard event files are read, as written */
	struct metrics_pattern *metrics_patterns; /* metrics.patterns: the job's own regexes */
	size_t metrics_npatterns;
	/* logs.max_bytes: each rank log's cap, bytes (launch/logcap.h); 0 = none */
	long long logs_max_bytes;
	/* parallel: (docs/plan.md): the planner's choice, made at load time */
	struct spec_parallel {
		bool on;          /* strategy: auto */
		char *model;      /* built-in name or a model YAML (absolute) */
		long global_batch;
		char *cluster;    /* cluster YAML (absolute) or NULL */
		double memory;    /* bytes per device; 0 = the cluster's */
		int dp, tp, pp, micro_batch;
		char *partition;  /* layers per stage, comma separated */
		double step_time; /* the planner's estimate, seconds */
	} parallel;
	/* the scheduler of `trainctl server` (docs/server.md); `run` records them */
	int priority;      /* 1..1000, higher first; default 100 */
	bool preemptible;  /* may give its devices to a non-preemptible job */
	/* on_disk_full: wait (pause the workers until space returns), else stop (docs/reliability.md) */
	bool disk_full_wait;
	bool device_ids_given; /* devices.ids was in the spec (the server must use exactly those) */
	/* limits.max_runtime: wall seconds from the first start, restarts included; 0 = none */
	long max_runtime;
	/*
	 * limits.idle_minutes: a job with a jupyter or ssh endpoint is stopped
	 * after this long without activity (launch/idle.c); 0 = never
	 */
	double idle_minutes;
	/*
	 * watchdog:, restart.policy and on_log: (docs/diagnostics.md).  The
	 * watchdog is on when the key is given; its numbers have defaults
	 * either way (spec_init) and are written back only when it is on.
	 */
	struct spec_watchdog {
		bool on;
		char *progress_pattern;   /* POSIX extended regex on log lines, or NULL */
		int warmup_steps;         /* steps before the hang rule applies */
		double min_seconds;       /* the timeout is at least this */
		double factor;            /* ... and at least factor x the median step time */
		double startup_seconds;   /* before the first step; 0 = off */
		double straggler_percent; /* a rank this much slower than the median */
		int straggler_steps;      /* ... over its last this many steps */
		double dump_seconds;      /* how long to wait for the stacks of a hang */
	} watchdog;
	enum spec_restart_policy {
		RESTART_POLICY_DEFAULT = 0, /* first_step with a watchdog, always without */
		RESTART_POLICY_FIRST_STEP,  /* a failure before the attempt's first step ends the job */
		RESTART_POLICY_ALWAYS,      /* every failure spends the budget */
	} restart_policy;
	struct spec_on_log {
		char *pattern; /* POSIX extended regex, checked at load */
		enum spec_log_action { LOG_ACTION_FAIL, LOG_ACTION_RESTART, LOG_ACTION_EXCLUDE_NODE } action;
	} *on_log;
	size_t non_log;
	/* slurm: (backend: slurm, docs/slurm.md); NULL = not given */
	struct spec_slurm {
		char *partition, *account, *qos;
		char *time;         /* Slurm's time limit forms */
		char *signal;       /* sbatch --signal, e.g. USR1@120 */
		char *gres;         /* --gres value; NULL: TYPE:per_node for accelerators; "none" */
		struct strvec extra; /* more sbatch options, one #SBATCH line each */
	} slurm;
	/*
	 * image: and container: (docs/containers.md).  image NULL: the job
	 * runs on the host and the rest is unset.
	 */
	struct spec_container {
		char *image;
		char *runtime;       /* podman | docker | pyxis (slurm only); NULL: whichever is installed */
		struct spec_mount {
			char *src, *dst; /* absolute */
			bool ro;
		} *mounts;           /* besides the run, data, output, checkpoint folders and workdir */
		size_t nmounts;
		char *pull;          /* never | missing | always; NULL: missing */
		char *network;       /* host | none | bridge; NULL: host */
		char *user;          /* "UID[:GID]" or a name; NULL: the job's user (no other may be asked) */
		char *shm_size;      /* --shm-size (a private /dev/shm); NULL: the host's IPC */
		struct strvec extra; /* more runtime options (spec_container_extra_refused) */
	} container;
	/*
	 * The record of --set (spec_load_set): each dotted key an override set,
	 * with its value as given, in order.  Already applied to the fields
	 * above; written back as "overrides" (show, job.yaml) and read as a
	 * record only, never applied again.
	 */
	struct spec_kv *overrides;
	size_t noverrides;
	/* notify: webhooks (notify/notify.h, docs/diagnostics.md); secrets are named, never held */
	struct notify_hook *notify;
	size_t nnotify;
	bool notify_given;  /* notify: was written (even []: the server's defaults do not apply) */
	/* devices.min_per_node: the fewest healthy devices the job may run on; 0 = per_node */
	int min_per_node;
	/* endpoints: services beside the workers (spec/endpoint_rules.c, docs/endpoints.md) */
	struct spec_endpoint *endpoints;
	size_t nendpoints;
};

/* Fill defaults; name and command stay unset. */
void spec_init(struct spec *s);
/*
 * Parse and validate a spec file (.yaml, .yml or .json).  Device counts are
 * checked against this machine (devices.h).  On error returns TC_ESPEC with
 * "FILE:LINE: KEY: problem" in err and *out untouched.
 */
int spec_load(const char *path, struct spec **out, struct tc_err *err);
/* spec_load with backend: replaced by backend (--backend); NULL: as written. */
int spec_load_backend(const char *path, const char *backend, struct spec **out,
		      struct tc_err *err);
/* Same, from a string (name is used in messages, base resolves workdir). */
int spec_parse(const char *text, size_t len, const char *name, const char *base,
	       struct spec **out, struct tc_err *err);
/* spec_parse with backend: replaced by backend (server --backend); NULL: as written. */
int spec_parse_backend(const char *text, size_t len, const char *name, const char *base,
		       const char *backend, struct spec **out, struct tc_err *err);
/*
 * --set KEY=VALUE overrides (override.c).  Each set is grafted, in order,
 * into the spec's YAML document before it is walked, so it is checked by
 * the same rules as the file.  KEY is a dotted path of keys (args.lr,
 * devices.per_node, env.NCCL_DEBUG, command) or list indexes (command.1,
 * inputs.0.from); after args. or env. the rest is one name (args.model.lr
 * is the argument "model.lr").  Missing mappings on the way are made.
 * VALUE is one YAML scalar or flow collection ("0.1", "'4'", "[a, b]",
 * "{lr: 0.1}"; empty = null).  Errors name the override instead of a file
 * line: "--set devices.per_nod=4: unknown key 'per_nod' (did you mean
 * 'per_node'?)", TC_ESPEC (exit 2); nothing is touched on disk.  sets may
 * be NULL or empty (then these are spec_load_backend / spec_parse_backend).
 * The applied sets are recorded in spec->overrides.
 */
int spec_load_set(const char *path, const char *backend, const struct strvec *sets,
		  struct spec **out, struct tc_err *err);
int spec_parse_set(const char *text, size_t len, const char *name, const char *base,
		   const char *backend, const struct strvec *sets, struct spec **out,
		   struct tc_err *err);
/*
 * The form of one override alone, without a spec: KEY=VALUE with a
 * well-formed dotted KEY and a VALUE that is one YAML scalar or flow
 * collection.  For early checks (a CLI's flags, a sweep file's keys);
 * whether the key exists and the value fits is spec_load_set's question.
 */
int spec_set_check(const char *set, struct tc_err *err);

/* Check a spec built in code (ad hoc `run -- cmd`); resolves devices. */
int spec_finish(struct spec *s, struct tc_err *err);
void spec_free(struct spec *s);
/*
 * A list command's program is there and executable, as the workers will
 * look for it (command.c): a name with a '/' relative to workdir, any
 * other on the PATH of the workers' environment (the spec's env: PATH, else
 * ours).  String commands are the shell's and pass.  TC_ESPEC with
 * "FILE:LINE: command: 'pyhton3' is not found on PATH (did you mean
 * 'python3'?)" (ad hoc specs: "run: ...").  Kept out of spec_load: the
 * program is this machine's question, asked where the workers will run.
 * Each endpoint's program (its kind's, not a generic one's shell command)
 * is looked up too: "endpoints: nb (kind jupyter): 'jupyter-notebook' is
 * not installed (not found on PATH)".
 */
int spec_check_command(const struct spec *s, struct tc_err *err);
/*
 * The argv every worker runs (appended to argv): a list command with the
 * args as --key value; a string command as /bin/sh -c 'CMD "$@"'
 * trainctl-job --key value (args never pass through the shell's parser).
 */
void spec_worker_argv(const struct spec *s, struct strvec *argv);
/*
 * The first slurm.extra option that is not on the allowlist of options a
 * non-admin may give a server (docs/slurm.md: resources and placement,
 * never paths, accounts or the environment), or NULL.
 */
const char *spec_slurm_extra_refused(const struct spec *s);
/*
 * The first container.extra option that is not on the allowlist of options
 * a non-admin may give a server (docs/containers.md: resource limits,
 * never privileges, devices, mounts or namespaces), or NULL.
 */
const char *spec_container_extra_refused(const struct spec *s);
/* Is v a job name: 1 to 128 letters, digits, '.', '_' and '-' (the spec's name: rule)? */
bool spec_name_ok(const char *v);

/*
 * parallel: auto planned for a node count (docs/plan.md): the planner's
 * best split of per_node x nodes devices, the call spec loading makes for
 * nodes.max and each attempt of an elastic job makes for its own nodes.
 * A pure function of the spec and nodes (the planner reads the model and
 * cluster files).  partition is heap (spec_plan_release).
 */
struct spec_plan {
	int dp, tp, pp, micro_batch;
	char *partition;
	double step_time;
};
int spec_plan_for(const struct spec *s, int nodes, struct spec_plan *out, struct tc_err *err);
void spec_plan_release(struct spec_plan *p);
/* s's plan (s->parallel's dp ... partition) replaced by the one for nodes. */
int spec_replan(struct spec *s, int nodes, struct tc_err *err);
/* The resolved spec as JSON text (for job.yaml, show --json); heap string. */
char *spec_to_json(const struct spec *s);
/*
 * A stored spec (spec_to_json's text, jobs.spec_json) back as a struct
 * spec, without validating it again: it was valid when the job was
 * recorded, and its devices need not be this machine's (access.c).  Keys
 * it lacks keep spec_init's defaults.  TC_ESPEC when text is not a JSON
 * object.
 */
int spec_from_json(const char *text, struct spec **out, struct tc_err *err);
/* Has s an endpoint whose activity limits.idle_minutes can see (jupyter, ssh)? */
bool spec_idle_watched(const struct spec *s);
/*
 * A server's --default-idle-minutes: s takes minutes as its
 * limits.idle_minutes when it has none, an endpoint it can watch and runs
 * where it is watched (one node, backend local).  True when it did.
 */
bool spec_idle_default(struct spec *s, double minutes);
/* The resolved spec as YAML text; heap string. */
char *spec_to_yaml(const struct spec *s);

/*
 * The server's default webhooks (`server --notify-file`): a YAML file
 * holding only notify:, checked as a spec's notify: is.  Heap array of n.
 */
int spec_notify_load(const char *path, struct notify_hook **out, size_t *n, struct tc_err *err);
/* The restart policy in effect (RESTART_POLICY_DEFAULT resolved). */
enum spec_restart_policy spec_restart_policy(const struct spec *s);
/* "fail", "restart", "exclude_node" */
const char *spec_log_action_name(enum spec_log_action a);

/* Contract variables a spec's env: may not set (trainctl owns them). */
bool spec_env_reserved(const char *key);

#endif
