/* test_spec_watchdog.c -- the spec keys of docs/diagnostics.md: watchdog:,
 * restart.policy and on_log:, their errors, and their way through the
 * stored JSON (spec_to_json, spec_from_json) and job.yaml */
#include "test.h"

#include "spec/spec.h"

static const char *parse_err(const char *text)
{
	static char msg[4096];
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_parse(text, strlen(text), "job.yaml", "/tmp", &s, &err), TC_ESPEC);
	snprintf(msg, sizeof(msg), "%s", err.msg);
	tc_err_release(&err);
	return msg;
}

TEST(watchdog_off_by_default)
{
	struct spec *s = test_spec_ok("command: [true]\n");
	CHECK(!s->watchdog.on);
	CHECK_INT(s->non_log, 0);
	CHECK_INT(spec_restart_policy(s), RESTART_POLICY_ALWAYS);
	char *json = spec_to_json(s);
	CHECK(!strstr(json, "watchdog") && !strstr(json, "on_log") && !strstr(json, "policy"));
	free(json);
	spec_free(s);
}

TEST(watchdog_keys)
{
	struct spec *s = test_spec_ok("command: [true]\n"
				  "watchdog: {progress_pattern: 'iter [0-9]+', warmup_steps: 3,\n"
				  "  min_seconds: 2.5, factor: 4, startup_seconds: 60,\n"
				  "  straggler_percent: 30, straggler_steps: 8, dump_seconds: 5}\n"
				  "restart: {max_restarts: 2, policy: always}\n"
				  "on_log:\n"
				  "  - {pattern: 'CUDA out of memory', action: fail}\n"
				  "  - {pattern: 'uncorrectable ECC', action: exclude_node}\n"
				  "  - {pattern: 'NCCL timeout', action: restart}\n");
	CHECK(s->watchdog.on);
	CHECK_STR(s->watchdog.progress_pattern, "iter [0-9]+");
	CHECK_INT(s->watchdog.warmup_steps, 3);
	CHECK(s->watchdog.min_seconds == 2.5 && s->watchdog.factor == 4);
	CHECK(s->watchdog.startup_seconds == 60 && s->watchdog.dump_seconds == 5);
	CHECK(s->watchdog.straggler_percent == 30 && s->watchdog.straggler_steps == 8);
	CHECK_INT(spec_restart_policy(s), RESTART_POLICY_ALWAYS);
	CHECK_INT(s->non_log, 3);
	CHECK_INT(s->on_log[1].action, LOG_ACTION_EXCLUDE_NODE);
	CHECK_STR(spec_log_action_name(s->on_log[2].action), "restart");
	/* the stored spec gives the same back */
	char *json = spec_to_json(s);
	struct spec *b = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(json, &b, &err), 0);
	CHECK(b->watchdog.on && b->watchdog.min_seconds == 2.5 && b->watchdog.warmup_steps == 3);
	CHECK_STR(b->watchdog.progress_pattern, "iter [0-9]+");
	CHECK_INT(b->non_log, 3);
	CHECK_STR(b->on_log[0].pattern, "CUDA out of memory");
	CHECK_INT(b->restart_policy, RESTART_POLICY_ALWAYS);
	char *json2 = spec_to_json(b);
	CHECK_STR(json2, json);
	/* job.yaml loads again as the same spec */
	char *yaml = spec_to_yaml(s);
	struct spec *c = test_spec_ok(yaml);
	char *json3 = spec_to_json(c);
	CHECK_STR(json3, json);
	free(json);
	free(json2);
	free(json3);
	free(yaml);
	spec_free(s);
	spec_free(b);
	spec_free(c);
}

TEST(watchdog_defaults_and_policy)
{
	struct spec *s = test_spec_ok("command: [true]\nwatchdog: {}\n");
	CHECK(s->watchdog.on);
	CHECK_INT(s->watchdog.warmup_steps, 10);
	CHECK(s->watchdog.min_seconds == 900 && s->watchdog.factor == 5);
	CHECK(s->watchdog.startup_seconds == 0);
	/* with a watchdog, a failure before the first step ends the job */
	CHECK_INT(spec_restart_policy(s), RESTART_POLICY_FIRST_STEP);
	spec_free(s);
	s = test_spec_ok("command: [true]\nwatchdog: true\n");
	CHECK(s->watchdog.on);
	spec_free(s);
	s = test_spec_ok("command: [true]\nwatchdog: false\nrestart: {policy: first_step}\n");
	CHECK(!s->watchdog.on);
	CHECK_INT(spec_restart_policy(s), RESTART_POLICY_FIRST_STEP);
	spec_free(s);
}

TEST(watchdog_errors)
{
	CHECK_CONTAINS(parse_err("command: [true]\nwatchdog: {factor: 0.5}\n"),
		       "job.yaml:2: watchdog.factor: must be a number from 1 to 1000");
	CHECK_CONTAINS(parse_err("command: [true]\nwatchdog: {min_second: 3}\n"),
		       "unknown key 'watchdog.min_second' (did you mean 'watchdog.min_seconds'?)");
	CHECK_CONTAINS(parse_err("command: [true]\nwatchdog: {progress_pattern: 'a[b'}\n"),
		       "watchdog.progress_pattern: 'a[b' is not a regular expression");
	CHECK_CONTAINS(parse_err("command: [true]\nwatchdog: maybe\n"),
		       "watchdog: must be a mapping of its keys, true or false");
	CHECK_CONTAINS(parse_err("command: [true]\nrestart: {policy: never}\n"),
		       "restart.policy: 'never' is not one of: first_step, always");
	CHECK_CONTAINS(parse_err("command: [true]\non_log: [{pattern: x, action: explode}]\n"),
		       "on_log.action: 'explode' is not one of: fail, restart, exclude_node");
	CHECK_CONTAINS(parse_err("command: [true]\non_log: [{pattern: x}]\n"),
		       "on_log: each item needs pattern: and action:");
	CHECK_CONTAINS(parse_err("command: [true]\non_log: {pattern: x, action: fail}\n"),
		       "on_log: must be a list of {pattern, action}");
	CHECK_CONTAINS(parse_err("command: [true]\non_log: [{pattern: '(', action: fail}]\n"),
		       "is not a regular expression");
	/* multi-node jobs are watched too: every node watches its ranks (docs/diagnostics.md) */
	struct spec *mn = test_spec_ok("command: [true]\nnodes: 2\nbackend: slurm\nwatchdog: {}\n"
				   "on_log: [{pattern: ECC, action: exclude_node}]\n");
	CHECK(mn->watchdog.on);
	CHECK_INT((int)mn->non_log, 1);
	spec_free(mn);
}
