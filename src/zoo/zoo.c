/*
 * zoo.c -- ModelZoo structure check, model.yaml functional tests, skeletons.
 * The rules are in zoo.h and docs/zoo.md.
 */
#include "zoo/zoo.h"
#include "zoo/zoo_int.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "core/yaml.h"
#include "jobs/runpath.h"
#include "launch/launch.h"
#include "spec/spec.h"
#include "store/store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml.h>

#define HELP_TIMEOUT_MS 60000

const char *const zoo_required_args[] = {
	"model_name", "batch_size", "epoch", "step", "dataset_path", "lr", "device", "autocast",
	"nproc_per_node", "nnode", "node_rank", "master_addr", "master_port", NULL,
};

static const char *const required_files[] = {
	"requirements.txt", "README.md", "run_scripts/argument.py", "run_scripts/formate_cmd.py",
	"run_scripts/README.md", NULL,
};

/* ---- running `python run_file --help` ---- */

/*
 * Run argv in dir with stdin from /dev/null, stdout and stderr into out;
 * kill it after timeout_ms.  0 with *status the wait status, or the error
 * that kept it from starting.
 */
static int run_capture(char *const *argv, const char *dir, int timeout_ms, struct sbuf *out,
		       int *status, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_pushv(&p.args, (const char *const *)argv);
	proc_env_inherit(&p.env);
	p.cwd = dir;
	p.in.how = PROC_IO_NULL;
	p.err.how = PROC_IO_STDOUT;
	struct proc_capture c = { .out = out, .timeout_ms = timeout_ms, .max = 1u << 20 };
	int rc = proc_capture(&p, &c, err);
	if (c.timed_out)
		sbuf_adds(out, "\n(killed: no answer in time)\n");
	*status = c.status;
	proc_clear(&p);
	return rc;
}

/* ---- zoo check ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* run_scripts/run_*.py, sorted. */
static void find_run_files(const char *scripts, struct strvec *out)
{
	DIR *d = opendir(scripts);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 7 && !strncmp(e->d_name, "run_", 4) && !strcmp(e->d_name + n - 3, ".py"))
			strvec_pushf(out, "run_scripts/%s", e->d_name);
	}
	closedir(d);
	if (out->nr > 1)
		qsort(out->v, out->nr, sizeof(char *), cmp_str);
}

/* Every --option of a help text, with '-' read as '_' (raw: as written, when not NULL). */
static void help_options(const char *text, struct strvec *opts, struct strvec *raw)
{
	for (const char *p = text; (p = strstr(p, "--"));) {
		if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-')) {
			p += 2;
			continue;
		}
		p += 2;
		const char *s = p;
		while (isalnum((unsigned char)*p) || *p == '_' || *p == '-')
			p++;
		if (p > s) {
			char *o = xstrndup(s, (size_t)(p - s));
			if (raw)
				strvec_push(raw, o);
			for (char *c = o; *c; c++)
				if (*c == '-')
					*c = '_';
			strvec_push_nodup(opts, o);
		}
	}
}

static bool has(const struct strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return true;
	return false;
}

static void last_line(const char *text, struct sbuf *out)
{
	struct sbuf t = SBUF_INIT;
	sbuf_adds(&t, text);
	sbuf_rtrim(&t);
	const char *nl = strrchr(t.buf, '\n');
	sbuf_adds(out, nl ? nl + 1 : t.buf);
	sbuf_release(&t);
}

/* raw, when not NULL, gets the run file's options as its --help writes them. */
static void check_args(const char *model_dir, const char *python, const char *run_file,
		       struct strvec *problems, struct strvec *raw)
{
	struct sbuf out = SBUF_INIT;
	char *argv[] = { (char *)python, (char *)run_file, "--help", NULL };
	struct tc_err e = TC_ERR_INIT;
	int st = 0;
	if (run_capture(argv, model_dir, HELP_TIMEOUT_MS, &out, &st, &e)) {
		strvec_pushf(problems, "%s --help: %s", run_file, e.msg);
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		struct sbuf why = SBUF_INIT;
		last_line(out.buf, &why);
		if (WIFEXITED(st))
			strvec_pushf(problems, "%s --help exited with code %d: %s", run_file,
				     WEXITSTATUS(st), why.buf);
		else
			strvec_pushf(problems, "%s --help was killed by signal %d", run_file, WTERMSIG(st));
		sbuf_release(&why);
	} else {
		struct strvec opts = STRVEC_INIT;
		help_options(out.buf, &opts, raw);
		for (size_t i = 0; zoo_required_args[i]; i++) {
			const char *a = zoo_required_args[i];
			if (!has(&opts, a) && !(!strcmp(a, "nnode") && has(&opts, "nnodes")))
				strvec_pushf(problems, "%s: missing argument --%s", run_file, a);
		}
		strvec_clear(&opts);
	}
	tc_err_release(&e);
	sbuf_release(&out);
}

/* A name as a person might have meant it: no blanks at the ends, lower case. */
static char *loose_name(const char *name)
{
	while (isspace((unsigned char)*name))
		name++;
	char *s = xstrdup(name);
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	for (char *c = s; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	return s;
}

/*
 * "missing file README.md", and the near-misses beside it that real
 * repositories have: "readme.md", " README.md", "REAMDE.md" (the same name
 * but for case and blanks, or two edits away).
 */
static void missing_file(const char *model_dir, const char *rel, struct strvec *problems)
{
	const char *slash = strrchr(rel, '/');
	const char *base = slash ? slash + 1 : rel;
	struct sbuf dir = SBUF_INIT, found = SBUF_INIT;
	sbuf_addf(&dir, "%s/%.*s", model_dir, slash ? (int)(slash - rel) : 0, rel);
	char *want = loose_name(base);
	DIR *d = opendir(dir.buf);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, base))
			continue;
		char *got = loose_name(e->d_name);
		if (*got && edit_distance(got, want) <= 2)
			sbuf_addf(&found, "%s'%.*s%s'", found.len ? ", " : "", slash ? (int)(slash - rel + 1) : 0,
				  rel, e->d_name);
		free(got);
	}
	if (d)
		closedir(d);
	if (found.len)
		strvec_pushf(problems, "missing file %s (found %s: rename it to %s)", rel, found.buf,
			     base);
	else
		strvec_pushf(problems, "missing file %s", rel);
	free(want);
	sbuf_release(&dir);
	sbuf_release(&found);
}

/* zoo_check; want_opts, when not NULL, gets the options of run file `want` as written. */
static int check_dir(const char *model_dir, const char *python, const char *want,
		     struct strvec *want_opts, struct strvec *problems, struct tc_err *err)
{
	if (!is_dir(model_dir))
		return tc_error(err, TC_ENOTFOUND, "zoo check: %s is not a folder", model_dir);
	struct sbuf p = SBUF_INIT;
	for (size_t i = 0; required_files[i]; i++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", model_dir, required_files[i]);
		if (!path_exists(p.buf))
			missing_file(model_dir, required_files[i], problems);
	}
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/run_scripts", model_dir);
	struct strvec runs = STRVEC_INIT;
	if (!is_dir(p.buf)) {
		strvec_push(problems, "missing folder run_scripts/");
	} else {
		find_run_files(p.buf, &runs);
		if (!runs.nr)
			strvec_push(problems, "missing file run_scripts/run_<model>.py");
	}
	for (size_t i = 0; i < runs.nr; i++)
		check_args(model_dir, python, runs.v[i], problems,
			   want && !strcmp(runs.v[i], want) ? want_opts : NULL);
	strvec_clear(&runs);
	sbuf_release(&p);
	return 0;
}

int zoo_check(const char *model_dir, const char *python, struct strvec *problems,
	      struct tc_err *err)
{
	return check_dir(model_dir, python, NULL, NULL, problems, err);
}

/*
 * The spelling of option `key` that the run file's --help lists: key as
 * written, else with '-' for '_' or the other way, else the other of
 * nnode/nnodes (the ModelZoo's rules say --nnode, many run files take
 * --nnodes); key itself when the help lists none of them.
 */
static const char *option_spelling(const char *key, const struct strvec *opts, struct sbuf *tmp)
{
	static const char *const twins[][2] = { { "nnode", "nnodes" }, { "nnodes", "nnode" } };
	if (!opts->nr || has(opts, key))
		return key;
	sbuf_reset(tmp);
	for (const char *c = key; *c; c++)
		sbuf_addch(tmp, *c == '_' ? '-' : *c == '-' ? '_' : *c);
	if (has(opts, tmp->buf))
		return tmp->buf;
	for (size_t i = 0; i < sizeof(twins) / sizeof(twins[0]); i++)
		if (!strcmp(key, twins[i][0]) && has(opts, twins[i][1]))
			return twins[i][1];
	return key;
}

/* ---- model.yaml ---- */

enum ptype { P_STR, P_INT, P_INT1, P_NUM, P_BOOL, P_ONE };

static const struct {
	const char *key;
	enum ptype type;
	bool required;
} param_tab[] = {
	{ "model_name", P_STR, true },   { "nproc_per_node", P_INT1, true },
	{ "batch_size", P_INT1, true },  { "epoch", P_INT1, true },
	{ "step", P_INT, true },         { "lr", P_NUM, true },
	{ "device", P_STR, true },       { "autocast", P_BOOL, true },
	{ "dataset_path", P_STR, true }, { "nnodes", P_ONE, false },
	{ "nnode", P_ONE, false },       { "node_rank", P_INT, false },
	{ "master_addr", P_STR, false }, { "master_port", P_INT, false },
};

struct loader {
	yaml_document_t *doc;
	const char *file;
	struct sbuf msgs;
	int nproblems;
	const char *cname; /* current case, for messages */
};

static void problem(struct loader *l, yaml_node_t *n, const char *fmt, ...) TC_PRINTF(3, 4);

static void problem(struct loader *l, yaml_node_t *n, const char *fmt, ...)
{
	va_list ap;
	if (l->nproblems++)
		sbuf_addch(&l->msgs, '\n');
	sbuf_addf(&l->msgs, "%s:%zu: ", l->file, n ? n->start_mark.line + 1 : (size_t)1);
	if (l->cname)
		sbuf_addf(&l->msgs, "case '%s': ", l->cname);
	va_start(ap, fmt);
	sbuf_vaddf(&l->msgs, fmt, ap);
	va_end(ap);
}

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool plain(yaml_node_t *n)
{
	return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static yaml_node_t *map_get(struct loader *l, yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		const char *k = scalar(yaml_document_get_node(l->doc, p->key));
		if (k && !strcmp(k, key))
			return yaml_document_get_node(l->doc, p->value);
	}
	return NULL;
}

static bool bool_word(const char *s)
{
	return !strcasecmp(s, "true") || !strcasecmp(s, "false");
}

static void check_param(struct loader *l, yaml_node_t *n, const char *key, enum ptype t)
{
	const char *v = scalar(n);
	long iv;
	double dv;
	if (!v) {
		problem(l, n, "params.%s: expected a single value, not a %s", key,
			n->type == YAML_MAPPING_NODE ? "mapping" : "list");
		return;
	}
	switch (t) {
	case P_STR:
		if (!*v)
			problem(l, n, "params.%s: is empty", key);
		break;
	case P_INT:
	case P_INT1:
	case P_ONE:
		if (!plain(n) || !parse_long(v, t == P_INT ? -1 : 1, INT_MAX, &iv))
			problem(l, n, "params.%s: expected an integer%s, not '%s'", key,
				t == P_INT ? " >= -1" : " >= 1", v);
		else if (t == P_ONE && iv != 1)
			problem(l, n, "params.%s: %ld nodes: zoo test runs cases on this machine (1)", key, iv);
		break;
	case P_NUM:
		if (!plain(n) || !parse_double(v, &dv) || !isfinite(dv))
			problem(l, n, "params.%s: expected a number, not '%s'", key, v);
		break;
	case P_BOOL:
		if (!plain(n) || !bool_word(v))
			problem(l, n, "params.%s: expected true or false, not '%s'", key, v);
		break;
	}
}

/* Relative, and no ".." that climbs above its start. */
static bool stays_inside(const char *rel)
{
	if (!*rel || rel[0] == '/')
		return false;
	int depth = 0;
	for (const char *p = rel; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && !strncmp(p, "..", 2))
			depth--;
		else if (n && !(n == 1 && *p == '.'))
			depth++;
		if (depth < 0)
			return false;
		p += n + (e ? 1 : 0);
	}
	return true;
}

static void add_param(struct zoo_case *c, size_t *alloc, const char *k, const char *v)
{
	XGROW(c->params, c->nparams + 1, *alloc);
	c->params[c->nparams].key = xstrdup(k);
	c->params[c->nparams].val = xstrdup(v);
	c->nparams++;
}

static void load_case(struct loader *l, yaml_node_t *n, const char *root, struct zoo_case *c)
{
	size_t alloc = 0;
	c->line = (int)n->start_mark.line + 1;
	if (n->type != YAML_MAPPING_NODE) {
		problem(l, n, "a case is a mapping with case_name, desc and params");
		return;
	}
	yaml_node_t *name = map_get(l, n, "case_name");
	if (!scalar(name) || !*scalar(name)) {
		problem(l, name ? name : n, "case_name: %s", name ? "expected a name" : "is required");
		return;
	}
	c->name = xstrdup(scalar(name));
	l->cname = c->name;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		const char *k = scalar(yaml_document_get_node(l->doc, p->key));
		if (!k || (strcmp(k, "case_name") && strcmp(k, "desc") && strcmp(k, "params")))
			problem(l, yaml_document_get_node(l->doc, p->key), "unknown key '%s'", k ? k : "?");
	}
	yaml_node_t *desc = map_get(l, n, "desc");
	if (!desc || desc->type != YAML_MAPPING_NODE) {
		problem(l, desc ? desc : n, "desc: %s", desc ? "expected {run_dir, run_file}" : "is required");
	} else {
		const char *rd = scalar(map_get(l, desc, "run_dir"));
		const char *rf = scalar(map_get(l, desc, "run_file"));
		if (!rd || !*rd)
			problem(l, desc, "desc.run_dir: is required");
		else if (!stays_inside(rd))
			problem(l, map_get(l, desc, "run_dir"), "desc.run_dir: '%s' is outside the root %s", rd, root);
		if (!rf || !*rf)
			problem(l, desc, "desc.run_file: is required");
		else if (!stays_inside(rf))
			problem(l, map_get(l, desc, "run_file"), "desc.run_file: '%s' is outside run_dir", rf);
		if (rd && *rd && stays_inside(rd)) {
			struct sbuf full = SBUF_INIT;
			sbuf_addf(&full, "%s/%s", root, rd);
			c->run_dir = path_absolute(full.buf, NULL);
			/* a symbolic link may still lead out */
			char *real_root = realpath(root, NULL), *real_dir = realpath(full.buf, NULL);
			size_t rl = real_root ? strlen(real_root) : 0;
			if (real_root && real_dir &&
			    (strncmp(real_dir, real_root, rl) || (real_dir[rl] && real_dir[rl] != '/')))
				problem(l, map_get(l, desc, "run_dir"),
					"desc.run_dir: '%s' leads outside the root %s (to %s)", rd, root, real_dir);
			free(real_root);
			free(real_dir);
			sbuf_release(&full);
		}
		if (rf)
			c->run_file = xstrdup(rf);
	}
	yaml_node_t *params = map_get(l, n, "params");
	if (!params || params->type != YAML_MAPPING_NODE) {
		problem(l, params ? params : n, "params: %s", params ? "expected a mapping" : "is required");
		return;
	}
	for (size_t i = 0; i < sizeof(param_tab) / sizeof(param_tab[0]); i++) {
		yaml_node_t *v = map_get(l, params, param_tab[i].key);
		if (!v && param_tab[i].required)
			problem(l, params, "params.%s: is required", param_tab[i].key);
		else if (v)
			check_param(l, v, param_tab[i].key, param_tab[i].type);
	}
	long np;
	if (parse_long(scalar(map_get(l, params, "nproc_per_node")) ? scalar(map_get(l, params, "nproc_per_node")) : "", 1, INT_MAX, &np))
		c->nproc_per_node = (int)np;
	for (yaml_node_pair_t *p = params->data.mapping.pairs.start; p < params->data.mapping.pairs.top; p++) {
		const char *k = scalar(yaml_document_get_node(l->doc, p->key));
		yaml_node_t *v = yaml_document_get_node(l->doc, p->value);
		if (!k)
			continue;
		if (strcmp(k, "others")) {
			if (scalar(v))
				add_param(c, &alloc, k, scalar(v));
			else
				check_param(l, v, k, P_STR); /* reports the wrong shape */
			continue;
		}
		if (v->type != YAML_MAPPING_NODE) {
			problem(l, v, "params.others: expected a mapping");
			continue;
		}
		for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
			const char *ok = scalar(yaml_document_get_node(l->doc, q->key));
			yaml_node_t *ov = yaml_document_get_node(l->doc, q->value);
			if (!ok)
				continue;
			if (!scalar(ov))
				problem(l, ov, "params.others.%s: expected a single value", ok);
			else if (map_get(l, params, ok))
				problem(l, ov, "params.others.%s: repeats params.%s", ok, ok);
			else
				add_param(c, &alloc, ok, scalar(ov));
		}
	}
}

int zoo_cases_load(const char *path, const char *root, struct zoo_case **out, size_t *n,
		   struct tc_err *err)
{
	*out = NULL;
	*n = 0;
	struct sbuf text = SBUF_INIT;
	if (read_file(path, &text, NULL)) {
		errno = errno ? errno : EIO;
		int rc = tc_error_errno(err, TC_ENOTFOUND, "zoo test: cannot open %s", path);
		sbuf_release(&text);
		return rc;
	}
	char *root_abs = root ? path_absolute(root, NULL) : NULL;
	if (!root_abs) {
		char *abs = path_absolute(path, NULL);
		root_abs = path_dirname(abs);
		free(abs);
	}
	int rc = zoo_cases_parse(text.buf, text.len, path, root_abs, out, n, err);
	free(root_abs);
	sbuf_release(&text);
	return rc;
}

int zoo_cases_parse(const char *text, size_t len, const char *path, const char *root_abs,
		    struct zoo_case **out, size_t *n, struct tc_err *err)
{
	*out = NULL;
	*n = 0;
	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser))
		return tc_error(err, TC_ESYS, "zoo test: cannot start the YAML parser");
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		int rc = tc_yaml_tab_problem(&parser, text, len)
				 ? tc_error(err, TC_ESPEC, "%s:%zu: " TC_YAML_TAB_HINT, path,
					    parser.problem_mark.line + 1)
				 : tc_error(err, TC_ESPEC, "%s:%zu: %s", path,
					    parser.problem_mark.line + 1,
					    parser.problem ? parser.problem : "bad YAML");
		yaml_parser_delete(&parser);
		return rc;
	}
	struct loader l = { &doc, path, SBUF_INIT, 0, NULL };
	yaml_node_t *top = yaml_document_get_root_node(&doc);
	struct zoo_case *v = NULL;
	size_t nv = 0;
	if (!top || top->type != YAML_SEQUENCE_NODE || top->data.sequence.items.start == top->data.sequence.items.top) {
		problem(&l, top, "expected a list of cases (- case_name: ..., desc: ..., params: ...)");
	} else {
		size_t cnt = (size_t)(top->data.sequence.items.top - top->data.sequence.items.start);
		v = xcalloc(cnt, sizeof(*v));
		for (yaml_node_item_t *it = top->data.sequence.items.start; it < top->data.sequence.items.top; it++) {
			l.cname = NULL;
			load_case(&l, yaml_document_get_node(&doc, *it), root_abs, &v[nv]);
			for (size_t k = 0; v[nv].name && k < nv; k++)
				if (v[k].name && !strcmp(v[k].name, v[nv].name))
					problem(&l, yaml_document_get_node(&doc, *it),
						"case_name: repeats the case of line %d", v[k].line);
			nv++;
		}
	}
	int rc = 0;
	if (l.nproblems) {
		rc = tc_error(err, TC_ESPEC, "%s", l.msgs.buf);
		zoo_cases_free(v, nv);
	} else {
		*out = v;
		*n = nv;
	}
	sbuf_release(&l.msgs);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

void zoo_cases_free(struct zoo_case *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].run_dir);
		free(v[i].run_file);
		for (size_t k = 0; k < v[i].nparams; k++) {
			free(v[i].params[k].key);
			free(v[i].params[k].val);
		}
		free(v[i].params);
	}
	free(v);
}

/* ---- zoo test ---- */

static void say(const struct zoo_test_opts *o, const char *fmt, ...) TC_PRINTF(2, 3);

static void say(const struct zoo_test_opts *o, const char *fmt, ...)
{
	if (!o->progress)
		return;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(o->progress, o->progress_ctx, fmt, ap);
	va_end(ap);
}

/* Does the job have a numeric record of metric? */
static int has_metric(struct store *st, const char *job, const char *metric, bool *yes,
		      struct tc_err *err)
{
	struct store_mseries *v = NULL;
	size_t n = 0;
	*yes = false;
	int rc = store_metric_series(st, job, metric, -1, &v, &n, err);
	for (size_t i = 0; !rc && i < n && !*yes; i++)
		for (size_t k = 0; k < v[i].n && !*yes; k++)
			*yes = !v[i].v[k].text;
	store_mseries_free(v, n);
	return rc;
}

/* Judge a finished job: exit status, then train.loss and train.ips. */
static void judge(const struct zoo_test_opts *o, const char *job_id, int status,
		  struct zoo_result *r)
{
	struct tc_err err = TC_ERR_INIT;
	struct store *st = NULL;
	struct job_row j = { 0 };
	bool loss = false, ips = false;
	int rc = store_open(o->home, &st, &err);
	if (!rc)
		rc = store_job_get(st, job_id, &j, &err);
	if (!rc)
		rc = has_metric(st, j.id, "train.loss", &loss, &err);
	if (!rc)
		rc = has_metric(st, j.id, "train.ips", &ips, &err);
	struct sbuf why = SBUF_INIT;
	if (rc) {
		sbuf_addf(&why, "cannot read the job back: %s", err.msg);
	} else if (status) {
		const char *rcause = j.root_cause ? j.root_cause : "no root cause recorded";
		const char *nl = strchr(rcause, '\n');
		sbuf_adds(&why, "run failed: ");
		sbuf_add(&why, rcause, nl ? (size_t)(nl - rcause) : strlen(rcause));
		r->log = xstrdup(rcause);
	} else if (!loss || !ips) {
		sbuf_addf(&why, "no %s%s%s in the logs (tcap_dllogger, DLLogger or MindFormers lines)",
			  loss ? "" : "train.loss", !loss && !ips ? " or " : "", ips ? "" : "train.ips");
		struct sbuf lp = SBUF_INIT, text = SBUF_INIT;
		run_path(&lp, j.run_dir, NULL, RUN_RANK_LOG, 0);
		if (read_file(lp.buf, &text, NULL) == 0) {
			size_t keep = text.len > 4000 ? text.len - 4000 : 0;
			r->log = xstrdup(text.buf + keep);
		}
		sbuf_release(&lp);
		sbuf_release(&text);
	}
	r->passed = !why.len;
	r->reason = why.len ? sbuf_detach(&why) : NULL;
	sbuf_release(&why);
	job_row_release(&j);
	store_close(st);
	tc_err_release(&err);
}

static void run_case(const struct zoo_test_opts *o, const struct zoo_case *c, struct zoo_result *r)
{
	struct strvec problems = STRVEC_INIT;
	struct strvec opts = STRVEC_INIT; /* the run file's options, as its --help writes them */
	struct tc_err err = TC_ERR_INIT;
	struct sbuf path = SBUF_INIT;
	r->name = xstrdup(c->name);
	if (!is_dir(c->run_dir)) {
		sbuf_addf(&path, "run_dir %s does not exist", c->run_dir);
		r->reason = sbuf_detach(&path);
		goto out;
	}
	if (check_dir(c->run_dir, o->python, c->run_file, &opts, &problems, &err)) {
		r->reason = xstrdup(err.msg);
		goto out;
	}
	sbuf_addf(&path, "%s/%s", c->run_dir, c->run_file);
	if (!path_exists(path.buf))
		strvec_pushf(&problems, "missing file %s (desc.run_file)", c->run_file);
	if (problems.nr) {
		struct sbuf why = SBUF_INIT, log = SBUF_INIT;
		sbuf_addf(&why, "structure: %s", problems.v[0]);
		if (problems.nr > 1)
			sbuf_addf(&why, " (and %zu more)", problems.nr - 1);
		for (size_t i = 0; i < problems.nr; i++)
			sbuf_addf(&log, "%s\n", problems.v[i]);
		r->reason = sbuf_detach(&why);
		r->log = sbuf_detach(&log);
		goto out;
	}
	struct spec *s = xmalloc(sizeof(*s));
	spec_init(s);
	s->name = xstrdup(c->name);
	strvec_push(&s->argv, o->python);
	strvec_push(&s->argv, c->run_file);
	struct sbuf tmp = SBUF_INIT;
	for (size_t i = 0; i < c->nparams; i++) {
		const char *k = option_spelling(c->params[i].key, &opts, &tmp);
		if (strcmp(k, c->params[i].key))
			say(o, "case %s: passing %s as --%s, the spelling %s --help lists", c->name,
			    c->params[i].key, k, c->run_file);
		strvec_pushf(&s->argv, "--%s", k);
		strvec_push(&s->argv, c->params[i].val);
	}
	sbuf_release(&tmp);
	s->workdir = xstrdup(c->run_dir);
	int rc = spec_finish(s, &err);
	char *job_id = NULL;
	int status = 1;
	if (!rc) {
		struct launch_opts lo = { .home = o->home, .quiet = o->quiet };
		say(o, "case %s: cd %s && %s %s ... (%d worker%s)", c->name, c->run_dir, o->python,
		    c->run_file, c->nproc_per_node, c->nproc_per_node == 1 ? "" : "s");
		rc = launch_run(s, &lo, &job_id, &status, &err);
	}
	spec_free(s);
	if (job_id)
		r->job_id = job_id;
	if (rc) {
		sbuf_reset(&path);
		sbuf_addf(&path, "could not run: %s", err.msg ? err.msg : tc_code_name(rc));
		r->reason = sbuf_detach(&path);
		goto out;
	}
	judge(o, job_id, status, r);
out:
	strvec_clear(&opts);
	strvec_clear(&problems);
	sbuf_release(&path);
	tc_err_release(&err);
}

int zoo_test(const struct zoo_test_opts *o, const struct zoo_case *cases, size_t n,
	     struct zoo_result **results, struct tc_err *err)
{
	(void)err; /* every problem belongs to its case */
	struct zoo_result *v = xcalloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		double t0 = now_wall();
		run_case(o, &cases[i], &v[i]);
		v[i].seconds = now_wall() - t0;
		say(o, "case %s: %s%s%s (%.1f s)", v[i].name, v[i].passed ? "PASS" : "FAIL",
		    v[i].reason ? ": " : "", v[i].reason ? v[i].reason : "", v[i].seconds);
	}
	*results = v;
	return 0;
}

void zoo_results_free(struct zoo_result *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].reason);
		free(v[i].job_id);
		free(v[i].log);
	}
	free(v);
}

void zoo_results_table(const struct zoo_result *v, size_t n, struct sbuf *out)
{
	size_t w = 4, passed = 0;
	for (size_t i = 0; i < n; i++)
		if (strlen(v[i].name) > w)
			w = strlen(v[i].name);
	sbuf_addf(out, "%-*s  %-6s %8s  %-24s %s\n", (int)w, "CASE", "RESULT", "SECONDS", "JOB", "REASON");
	for (size_t i = 0; i < n; i++) {
		passed += v[i].passed;
		sbuf_addf(out, "%-*s  %-6s %8.1f  %-24s %s\n", (int)w, v[i].name,
			  v[i].passed ? "PASS" : "FAIL", v[i].seconds, v[i].job_id ? v[i].job_id : "-",
			  v[i].reason ? v[i].reason : "");
	}
	sbuf_addf(out, "%zu passed, %zu failed\n", passed, n - passed);
}

static void xml_escape(struct sbuf *sb, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		switch (ch) {
		case '&': sbuf_adds(sb, "&amp;"); break;
		case '<': sbuf_adds(sb, "&lt;"); break;
		case '>': sbuf_adds(sb, "&gt;"); break;
		case '"': sbuf_adds(sb, "&quot;"); break;
		case '\'': sbuf_adds(sb, "&apos;"); break;
		default:
			/* XML 1.0 has no other control characters than tab, LF and CR */
			if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
				sbuf_addch(sb, '?');
			else
				sbuf_addch(sb, (char)ch);
		}
	}
}

void zoo_junit_xml(const char *suite, const struct zoo_result *v, size_t n, struct sbuf *out)
{
	size_t failures = 0;
	double total = 0;
	for (size_t i = 0; i < n; i++) {
		failures += !v[i].passed;
		total += v[i].seconds;
	}
	sbuf_adds(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	sbuf_addf(out, "<testsuites tests=\"%zu\" failures=\"%zu\" errors=\"0\" time=\"%.3f\">\n", n,
		  failures, total);
	sbuf_adds(out, "  <testsuite name=\"");
	xml_escape(out, suite);
	sbuf_addf(out, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\" time=\"%.3f\">\n",
		  n, failures, total);
	for (size_t i = 0; i < n; i++) {
		sbuf_adds(out, "    <testcase classname=\"zoo\" name=\"");
		xml_escape(out, v[i].name);
		sbuf_addf(out, "\" time=\"%.3f\">\n", v[i].seconds);
		if (!v[i].passed) {
			sbuf_adds(out, "      <failure message=\"");
			xml_escape(out, v[i].reason ? v[i].reason : "did not pass");
			sbuf_adds(out, "\">");
			xml_escape(out, v[i].log ? v[i].log : (v[i].reason ? v[i].reason : ""));
			sbuf_adds(out, "</failure>\n");
		}
		if (v[i].job_id) {
			sbuf_adds(out, "      <system-out>trainctl job ");
			xml_escape(out, v[i].job_id);
			sbuf_adds(out, " (trainctl show / logs / report)</system-out>\n");
		}
		sbuf_adds(out, "    </testcase>\n");
	}
	sbuf_adds(out, "  </testsuite>\n</testsuites>\n");
}

/* ---- zoo new ---- */

static void expand(struct sbuf *out, const char *text, const char *name, const char *lower)
{
	for (const char *p = text; *p;) {
		if (!strncmp(p, "@NAME@", 6)) {
			sbuf_adds(out, name);
			p += 6;
		} else if (!strncmp(p, "@name@", 6)) {
			sbuf_adds(out, lower);
			p += 6;
		} else {
			sbuf_addch(out, *p++);
		}
	}
}

int zoo_new(const char *name, const char *dir, char **created, struct tc_err *err)
{
	*created = NULL;
	if (!*name)
		return tc_error(err, TC_EUSAGE, "zoo new: the model needs a name");
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
			return tc_error(err, TC_EUSAGE,
					"zoo new: '%s': a model name is letters, digits, '_' and '-'", name);
	char *lower = xstrdup(name);
	for (char *p = lower; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	struct sbuf top = SBUF_INIT, path = SBUF_INIT, text = SBUF_INIT, rel = SBUF_INIT;
	int rc = 0;
	sbuf_addf(&top, "%s/%s", dir, name);
	char *abs = path_absolute(top.buf, NULL);
	if (path_exists(abs)) {
		rc = tc_error(err, TC_EINPUT, "zoo new: %s already exists", abs);
		goto out;
	}
	for (const struct zoo_template *t = zoo_templates; t->path && !rc; t++) {
		sbuf_reset(&rel);
		sbuf_reset(&path);
		sbuf_reset(&text);
		expand(&rel, t->path, name, lower);
		sbuf_addf(&path, "%s/%s", abs, rel.buf);
		expand(&text, t->text, name, lower);
		char *parent = path_dirname(path.buf);
		rc = mkdir_p(parent, err);
		free(parent);
		if (!rc)
			rc = write_file_atomic(path.buf, text.buf, text.len, err);
		if (!rc && chmod(path.buf, (mode_t)t->mode) < 0)
			rc = tc_error_errno(err, TC_ESYS, "zoo new: chmod %s", path.buf);
	}
	if (!rc) {
		*created = abs;
		abs = NULL;
	}
out:
	free(abs);
	free(lower);
	sbuf_release(&top);
	sbuf_release(&path);
	sbuf_release(&text);
	sbuf_release(&rel);
	return rc;
}
