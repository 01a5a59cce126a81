/*
 * spec.c -- job spec entry points: load and parse a spec, resolve what
 * the walk leaves open (name, workdir, devices, the planner's split),
 * and free it; see spec.h.
 *
 * The YAML document is loaded whole (yaml_parser_load), then walked with
 * one rule table per mapping (walk.c, rules.c, placement.c).  Each rule
 * names a key, its handler, and, for features not built yet, the reason
 * it is refused.
 */
#include "spec/spec_int.h"
#include "backend/names.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "core/yaml.h"
#include "devices/devices.h"
#include "notify/notify.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- entry points ---- */

void spec_init(struct spec *s)
{
	memset(s, 0, sizeof(*s));
	s->argv = (struct strvec)STRVEC_INIT;
	s->framework = xstrdup("pytorch");
	s->device_type = xstrdup("cpu");
	s->per_node = 1;
	s->nodes = 1;
	s->nodes_min = 1;
	s->nodes_wait = SPEC_NODES_WAIT_DEFAULT;
	s->backend = xstrdup(backend_names[BACKEND_LOCAL]);
	s->max_restarts = 0;
	s->grace_seconds = 30;
	s->ckpt_dir = xstrdup("checkpoints");
	s->resume = RESUME_AUTO;
	s->metrics_format = NULL; /* auto; left unallocated so stack specs need no free */
	s->metrics_files = (struct strvec)STRVEC_INIT;
	s->metrics_tb_dirs = (struct strvec)STRVEC_INIT;
	s->slurm.extra = (struct strvec)STRVEC_INIT;
	s->container.extra = (struct strvec)STRVEC_INIT;
	s->priority = 100;
	s->logs_max_bytes = SPEC_LOGS_MAX_BYTES_DEFAULT;
	/* docs/diagnostics.md says why these */
	s->watchdog.warmup_steps = 10;
	s->watchdog.min_seconds = 900;
	s->watchdog.factor = 5;
	s->watchdog.straggler_percent = 20;
	s->watchdog.straggler_steps = 20;
	s->watchdog.dump_seconds = 10;
}

enum spec_restart_policy spec_restart_policy(const struct spec *s)
{
	if (s->restart_policy != RESTART_POLICY_DEFAULT)
		return s->restart_policy;
	/* without a watchdog a job keeps the rule it had before the key existed */
	return s->watchdog.on ? RESTART_POLICY_FIRST_STEP : RESTART_POLICY_ALWAYS;
}

const char *spec_log_action_name(enum spec_log_action a)
{
	switch (a) {
	case LOG_ACTION_FAIL:
		return "fail";
	case LOG_ACTION_RESTART:
		return "restart";
	case LOG_ACTION_EXCLUDE_NODE:
		return "exclude_node";
	}
	return "?";
}

static const char *const reserved_env[] = {
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
	"GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
	"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
	"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
	"TRAINCTL_JOB_ID", "TRAINCTL_OUTPUT_DIR", "TRAINCTL_CKPT_DIR", "TRAINCTL_DATA_DIR",
	"TRAINCTL_LOG_DIR", "TRAINCTL_RESUME_FROM", "TRAINCTL_TENSORBOARD_DIR",
	"TRAINCTL_DP", "TRAINCTL_TP", "TRAINCTL_PP", "TRAINCTL_MICRO_BATCH", "TRAINCTL_PIPELINE_PARTITION",
	"RANK_ID", "RANK_SIZE", "DEVICE_ID", "RANK_TABLE_FILE",
	"PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
	"PADDLE_CURRENT_ENDPOINT", "TRAINCTL_STACK_DIR", "TRAINCTL_STACK_SIGNAL",
	"TRAINCTL_METRICS_CHANNEL", "TRAINCTL_STOP_FILE", "ASCEND_DEVICE_ID",
	"MINDSPORE_HCCL_CONFIG_PATH", NULL,
};

bool spec_env_reserved(const char *key)
{
	for (const char *const *r = reserved_env; *r; r++)
		if (!strcmp(*r, key))
			return true;
	return false;
}

/*
 * An ad hoc job is named after its program, or after the script an
 * interpreter runs ("python3 train.py" -> "train").
 */
static char *default_name(const struct spec *s)
{
	static const char *const interpreters[] = { "python", "python3", "sh", "bash", "perl", NULL };
	const char *prog = s->argv.nr ? path_basename(s->argv.v[0]) : "job";
	for (const char *const *i = interpreters; *i; i++) {
		if (strcmp(*i, prog) != 0)
			continue;
		for (size_t k = 1; k < s->argv.nr; k++) {
			const char *a = s->argv.v[k];
			if (a[0] == '-')
				break;
			if (strchr(a, '.')) {
				a = path_basename(a);
				return xstrndup(a, (size_t)(strrchr(a, '.') - a));
			}
		}
	}
	struct sbuf sb = SBUF_INIT;
	for (const char *c = prog; *c && sb.len < 64; c++)
		sbuf_addch(&sb, strchr("/ \t", *c) ? '-' : *c);
	return sbuf_detach(&sb);
}

int spec_finish(struct spec *s, struct tc_err *err)
{
	if (!s->argv.nr && !s->shell)
		return tc_error(err, TC_EUSAGE, "no command to run");
	if (!device_kind_find(s->device_type))
		return tc_error(err, TC_EUSAGE, "'%s' is not a device type (one of: %s)",
				s->device_type, device_kind_names());
	if (!s->workdir)
		s->workdir = path_absolute(".", NULL);
	if (!s->name)
		s->name = default_name(s);
	struct dev_where dw = { NULL, 1, "devices.per_node" };
	return spec_finish_devices(s, &dw, s->per_node <= 0, err);
}

/* JSON allows tabs between tokens; libyaml does not: blank them out. */
static void detab_json(char *text, size_t len)
{
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		if (in_str) {
			if (text[i] == '\\')
				i++;
			else if (text[i] == '"')
				in_str = false;
		} else if (text[i] == '"') {
			in_str = true;
		} else if (text[i] == '\t') {
			text[i] = ' ';
		}
	}
}

/*
 * What the walk leaves open: --backend over backend:, the checks across
 * keys, the default workdir and name, then devices and the planner.
 */
static int finish_walk(struct walk *w, yaml_node_t *root, const char *backend)
{
	struct spec *s = w->s;
	const char *name = w->file;
	if (backend) {
		free(s->backend);
		s->backend = xstrdup(backend);
	}
	if (!s->argv.nr && !s->shell)
		return tc_error(w->err, TC_ESPEC, "%s:%d: command: is required", name, line_of(root));
	if (s->nodes > 1 && strcmp(s->backend, "slurm") != 0)
		return tc_error(w->err, TC_ESPEC, "%s:%d: nodes: %d nodes need backend: slurm", name,
				w->nodes_line, s->nodes);
	if (w->slurm_line && strcmp(s->backend, "slurm") != 0)
		return tc_error(w->err, TC_ESPEC,
				"%s:%d: slurm: is for backend: slurm (backend is %s)", name,
				w->slurm_line, s->backend);
	if (w->container_line && !s->container.image)
		return tc_error(w->err, TC_ESPEC, "%s:%d: container: needs image:", name,
				w->container_line);
	if (s->container.runtime && !strcmp(s->container.runtime, "pyxis") &&
	    strcmp(s->backend, "slurm") != 0)
		return tc_error(w->err, TC_ESPEC,
				"%s:%d: container.runtime: pyxis runs workers as Slurm steps: it needs "
				"backend: slurm (backend is %s)",
				name, w->runtime_line, s->backend);
	if (spec_check_limits(w))
		return TC_ESPEC;
	if (!s->workdir)
		s->workdir = xstrdup(w->base);
	if (!s->name) {
		const char *b = path_basename(name);
		const char *dot = strrchr(b, '.');
		s->name = xstrndup(b, dot ? (size_t)(dot - b) : strlen(b));
	}
	struct dev_where dw = { name, w->devices_line, "devices" };
	if (w->ids_line) {
		dw.count_line = w->ids_line;
		dw.count_key = "devices.ids";
	} else if (w->per_node_set) {
		dw.count_line = w->per_node_line;
		dw.count_key = "devices.per_node";
	}
	/* a --set of the type asks for the file's count of another kind: the override's fault */
	if (w->type_line >= SPEC_SET_LINE && dw.count_line < SPEC_SET_LINE) {
		dw.count_line = w->type_line;
		dw.count_key = "devices.type";
	}
	int rc = spec_finish_devices(s, &dw, w->per_node_all, w->err);
	if (!rc && s->min_per_node) {
		/* fewer workers than planned: one node, no planner's split (docs/diagnostics.md) */
		const char *why = s->min_per_node > s->per_node ? "is more than devices.per_node"
				  : s->nodes > 1			? "is for one node (nodes: 1)"
				  : s->parallel.on ? "cannot shrink a parallel: strategy auto split"
						   : NULL;
		if (why)
			rc = tc_error(w->err, TC_ESPEC, "%s:%d: devices.min_per_node: %d %s", name,
				      w->devices_line, s->min_per_node, why);
		else if (s->min_per_node == s->per_node)
			s->min_per_node = 0; /* all of them: the default */
	}
	if (!rc && s->parallel.on)
		rc = spec_plan_parallel(w);
	return rc;
}

/* Append the applied sets to the spec's record (spec.h: overrides); a key set again moves last. */
static void record_sets(struct spec *s, const struct strvec *sets)
{
	for (size_t i = 0; sets && i < sets->nr; i++) {
		const char *eq = strchr(sets->v[i], '=');
		size_t klen = (size_t)(eq - sets->v[i]);
		for (size_t j = 0; j < s->noverrides; j++) {
			if (strlen(s->overrides[j].key) != klen ||
			    memcmp(s->overrides[j].key, sets->v[i], klen) != 0)
				continue;
			free(s->overrides[j].key);
			free(s->overrides[j].val);
			memmove(&s->overrides[j], &s->overrides[j + 1],
				(s->noverrides - j - 1) * sizeof(*s->overrides));
			s->noverrides--;
			break;
		}
		s->overrides = xrealloc(s->overrides, (s->noverrides + 1) * sizeof(*s->overrides));
		s->overrides[s->noverrides].key = xstrndup(sets->v[i], klen);
		s->overrides[s->noverrides].val = xstrdup(eq + 1);
		s->noverrides++;
	}
}

/* spec_parse, with backend: replaced by backend when not NULL (--backend) */
static int parse_text(const char *text, size_t len, const char *name, const char *base,
		      const char *backend, const struct strvec *sets, struct spec **out,
		      struct tc_err *err)
{
	/* a NUL would end the copy below early (and YAML forbids it anyway) */
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		size_t line = 1;
		for (const char *p = text; p < nul; p++)
			line += *p == '\n';
		return tc_error(err, TC_ESPEC, "%s:%zu: the spec holds a NUL byte", name, line);
	}
	yaml_parser_t parser;
	yaml_document_t doc;
	bool have_doc = false;
	int rc = 0;
	struct spec *s = xmalloc(sizeof(*s));
	spec_init(s);
	s->source = xstrdup(name);
	char *copy = xstrndup(text, len);
	size_t nlen = strlen(name);
	if (nlen > 5 && !strcmp(name + nlen - 5, ".json"))
		detab_json(copy, strlen(copy));

	if (!yaml_parser_initialize(&parser))
		xdie_oom(sizeof(parser));
	yaml_parser_set_input_string(&parser, (const unsigned char *)copy, strlen(copy));
	if (!yaml_parser_load(&parser, &doc)) {
		if (tc_yaml_tab_problem(&parser, copy, strlen(copy))) {
			rc = tc_error(err, TC_ESPEC, "%s:%zu: " TC_YAML_TAB_HINT, name,
				      parser.problem_mark.line + 1);
			goto out;
		}
		rc = tc_error(err, TC_ESPEC, "%s:%zu: syntax error: %s%s%s", name,
			      parser.problem_mark.line + 1,
			      parser.problem ? parser.problem : "cannot parse",
			      parser.context ? " " : "", parser.context ? parser.context : "");
		goto out;
	}
	have_doc = true;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	struct walk w = { &doc, name, base, s, err, 1, 0, 1, false, false, 1, 0, 0, 1, 1, 0, 1, 1 };
	if (!root) {
		rc = tc_error(err, TC_ESPEC, "%s:1: the spec is empty", name);
		goto out;
	}
	if ((rc = spec_apply_sets(&doc, sets, err)))
		goto out;
	root = yaml_document_get_root_node(&doc); /* the sets' nodes may have moved it */
	if (!(rc = walk_map(&w, root, "", spec_top_rules)))
		rc = finish_walk(&w, root, backend);
	if (rc) {
		spec_set_where(err, name, sets);
		goto out;
	}
	record_sets(s, sets);
	if (s->command_line >= SPEC_SET_LINE)
		s->command_set = xstrdup(sets->v[s->command_line - SPEC_SET_LINE]);
out:
	if (have_doc)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	free(copy);
	if (rc) {
		spec_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int spec_parse(const char *text, size_t len, const char *name, const char *base,
	       struct spec **out, struct tc_err *err)
{
	return parse_text(text, len, name, base, NULL, NULL, out, err);
}

/* spec_load, with backend: replaced by backend when not NULL */
static int load_file(const char *path, const char *backend, const struct strvec *sets,
		     struct spec **out, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	int rc = read_file(path, &text, err);
	if (rc) {
		rc = tc_error(err, TC_ESPEC, "%s", err->msg);
		goto out;
	}
	if (memchr(text.buf, '\0', text.len)) {
		rc = tc_error(err, TC_ESPEC, "%s:1: the spec holds a NUL byte", path);
		goto out;
	}
	char *abs = path_absolute(path, NULL);
	char *base = path_dirname(abs);
	rc = parse_text(text.buf, text.len, path, base, backend, sets, out, err);
	free(abs);
	free(base);
out:
	sbuf_release(&text);
	return rc;
}

int spec_load(const char *path, struct spec **out, struct tc_err *err)
{
	return load_file(path, NULL, NULL, out, err);
}

static int not_a_backend(const char *backend, struct tc_err *err)
{
	struct sbuf names = SBUF_INIT;
	backend_names_add(&names);
	int rc = tc_error(err, TC_EUSAGE, "'%s' is not a backend (one of: %s)", backend, names.buf);
	sbuf_release(&names);
	return rc;
}

int spec_parse_backend(const char *text, size_t len, const char *name, const char *base,
		       const char *backend, struct spec **out, struct tc_err *err)
{
	return spec_parse_set(text, len, name, base, backend, NULL, out, err);
}

int spec_load_backend(const char *path, const char *backend, struct spec **out,
		      struct tc_err *err)
{
	return spec_load_set(path, backend, NULL, out, err);
}

int spec_parse_set(const char *text, size_t len, const char *name, const char *base,
		   const char *backend, const struct strvec *sets, struct spec **out,
		   struct tc_err *err)
{
	if (backend && backend_lookup(backend) < 0)
		return not_a_backend(backend, err);
	return parse_text(text, len, name, base, backend, sets, out, err);
}

int spec_load_set(const char *path, const char *backend, const struct strvec *sets,
		  struct spec **out, struct tc_err *err)
{
	if (backend && backend_lookup(backend) < 0)
		return not_a_backend(backend, err);
	return load_file(path, backend, sets, out, err);
}

static void free_kv(struct spec_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].val);
	}
	free(kv);
}

void spec_free(struct spec *s)
{
	if (!s)
		return;
	free(s->source);
	free(s->name);
	strvec_clear(&s->argv);
	free(s->shell);
	free(s->command_set);
	free_kv(s->args, s->nargs);
	free(s->workdir);
	free_kv(s->env, s->nenv);
	free(s->framework);
	free(s->device_type);
	free(s->device_ids);
	free(s->hccn_conf);
	free(s->backend);
	notify_hooks_free(s->notify, s->nnotify);
	spec_endpoints_free(s->endpoints, s->nendpoints);
	free(s->slurm.partition);
	free(s->slurm.account);
	free(s->slurm.qos);
	free(s->slurm.time);
	free(s->slurm.signal);
	free(s->slurm.gres);
	strvec_clear(&s->slurm.extra);
	spec_container_free(s);
	free(s->ckpt_dir);
	free(s->resume_path);
	free(s->parallel.model);
	free(s->parallel.cluster);
	free(s->parallel.partition);
	for (size_t i = 0; i < s->ninputs; i++) {
		free(s->inputs[i].from);
		free(s->inputs[i].to);
	}
	free(s->inputs);
	free(s->upload_to);
	free(s->metrics_format);
	free(s->metrics_accuracy);
	strvec_clear(&s->metrics_files);
	strvec_clear(&s->metrics_tb_dirs);
	for (size_t i = 0; i < s->metrics_npatterns; i++)
		metrics_pattern_release(&s->metrics_patterns[i]);
	free(s->metrics_patterns);
	free_kv(s->overrides, s->noverrides);
	free(s->watchdog.progress_pattern);
	for (size_t i = 0; i < s->non_log; i++)
		free(s->on_log[i].pattern);
	free(s->on_log);
	free(s);
}
