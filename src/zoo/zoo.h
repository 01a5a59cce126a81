/*
 * zoo.h -- Tecorigin ModelZoo conventions (docs/formats.md, docs/zoo.md): the
 * structure check of a model folder, the functional test that model.yaml
 * drives, and a conforming skeleton to start from.  docs/zoo.md has the rules.
 *
 *   zoo_check      every missing file and every missing argument (read from
 *                  `python run_scripts/run_<model>.py --help`), all at once;
 *   zoo_cases_load model.yaml parsed and validated up front (case name and
 *                  key in every message), nothing run;
 *   zoo_test       per case: the check, then the run file as a trainctl job
 *                  (logs, metrics, report), judged on its exit status and on
 *                  train.loss and train.ips in its logs;
 *   zoo_new        the skeleton (templates embedded in the binary).
 *
 * A case's run file is one process that starts its own nproc_per_node
 * workers (the ModelZoo's run_<model>.py does), so its job has one trainctl
 * worker; records get their rank from the `rank` key of the log lines.
 */
#ifndef TC_ZOO_H
#define TC_ZOO_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"

/* Arguments every run file must accept ("nnode" is also met by "nnodes"). */
extern const char *const zoo_required_args[];

/*
 * Check model_dir.  Problems (one line each: "missing file run_scripts/
 * argument.py", "run_scripts/run_x.py: missing argument --lr") are appended
 * to problems; an empty list means it conforms.  Returns nonzero only when
 * the check itself cannot run (TC_ENOTFOUND: no such folder).
 */
int zoo_check(const char *model_dir, const char *python, struct strvec *problems,
	      struct tc_err *err);

struct zoo_param {
	char *key;
	char *val; /* the scalar as written */
};

struct zoo_case {
	char *name;
	int line;             /* in model.yaml */
	char *run_dir;        /* absolute, inside the root */
	char *run_file;       /* relative to run_dir, as written */
	struct zoo_param *params; /* others flattened, in order */
	size_t nparams;
	int nproc_per_node;
};

/*
 * Parse and validate model.yaml against root (NULL: the file's folder).
 * TC_ESPEC with one line per problem ("model.yaml:7: case 'x': params.lr:
 * expected a number") when anything is wrong.
 */
int zoo_cases_load(const char *path, const char *root, struct zoo_case **out, size_t *n,
		   struct tc_err *err);
/* The same from len bytes of YAML named path, against root_abs (an absolute folder). */
int zoo_cases_parse(const char *text, size_t len, const char *path, const char *root_abs,
		    struct zoo_case **out, size_t *n, struct tc_err *err);
void zoo_cases_free(struct zoo_case *v, size_t n);

struct zoo_result {
	char *name;
	bool passed;
	char *reason;   /* why it failed, or NULL */
	char *job_id;   /* NULL when nothing ran */
	char *log;      /* the case's output for the JUnit file (structure problems, log tail) */
	double seconds;
};

struct zoo_test_opts {
	const char *home;    /* $TRAINCTL_HOME */
	const char *python;  /* interpreter for run files */
	bool quiet;          /* no worker output on the console */
	void (*progress)(void *ctx, const char *line);
	void *progress_ctx;
};

/* Run every case in order; results has n entries.  Fails only on infrastructure. */
int zoo_test(const struct zoo_test_opts *o, const struct zoo_case *cases, size_t n,
	     struct zoo_result **results, struct tc_err *err);
void zoo_results_free(struct zoo_result *v, size_t n);
/* The result table, and JUnit XML (one testsuite, a testcase per case). */
void zoo_results_table(const struct zoo_result *v, size_t n, struct sbuf *out);
void zoo_junit_xml(const char *suite, const struct zoo_result *v, size_t n, struct sbuf *out);

/*
 * Write the skeleton of model NAME in dir/NAME (created; it must not exist).
 * *created gets the folder (heap).
 */
int zoo_new(const char *name, const char *dir, char **created, struct tc_err *err);

#endif
