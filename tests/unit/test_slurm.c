/* test_slurm.c -- backend: slurm: the spec's slurm: keys, job.sbatch, the
 * Slurm state table and the multi-node rank table merge (golden file). */
#include "test.h"

#include "backend/backend.h"
#include "backend/slurm_acct.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "launch/launch.h"
#include "spec/spec.h"

#include <stdlib.h>

static void parse_err(const char *text, const char *want)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_parse(text, strlen(text), "job.yaml", "/tmp", &s, &err), TC_ESPEC);
	CHECK(s == NULL);
	CHECK_CONTAINS(err.msg, want);
	tc_err_release(&err);
}

TEST(spec_slurm_keys)
{
	struct spec *s = test_spec_ok("command: [x]\nnodes: 2\nbackend: slurm\n"
				  "slurm: {partition: debug, account: ml, qos: high, time: '1-02:00:00',\n"
				  "        signal: USR1@120, gres: 'gpu:a100:2', extra: [--exclusive, '--constraint=ib']}\n");
	CHECK_INT(s->nodes, 2);
	CHECK_STR(s->backend, "slurm");
	CHECK_STR(s->slurm.partition, "debug");
	CHECK_STR(s->slurm.account, "ml");
	CHECK_STR(s->slurm.qos, "high");
	CHECK_STR(s->slurm.time, "1-02:00:00");
	CHECK_STR(s->slurm.signal, "USR1@120");
	CHECK_STR(s->slurm.gres, "gpu:a100:2");
	CHECK_INT(s->slurm.extra.nr, 2);
	CHECK_STR(s->slurm.extra.v[1], "--constraint=ib");
	/* the resolved spec loads again (job.yaml is what every node reads) */
	char *yaml = spec_to_yaml(s);
	struct spec *again = test_spec_ok(yaml);
	CHECK_STR(again->slurm.time, "1-02:00:00");
	CHECK_INT(again->slurm.extra.nr, 2);
	CHECK_INT(again->nodes, 2);
	free(yaml);
	spec_free(again);
	spec_free(s);
}

TEST(spec_slurm_errors)
{
	parse_err("command: [x]\nbackend: slurm\nslurm: {time: two hours}\n",
		  "job.yaml:3: slurm.time: 'two hours' is not a Slurm time");
	parse_err("command: [x]\nbackend: slurm\nslurm: {partition: \"a\\nb\"}\n",
		  "slurm.partition: must be one line");
	parse_err("command: [x]\nbackend: slurm\nslurm: {extra: [exclusive]}\n",
		  "slurm.extra: 'exclusive' is not an sbatch option");
	parse_err("command: [x]\nbackend: slurm\nslurm: {partiton: debug}\n",
		  "unknown key 'slurm.partiton' (did you mean 'slurm.partition'?)");
	parse_err("command: [x]\nbackend: kubernetes\n", "'kubernetes' is not one of: local, slurm");
}

TEST(sbatch_script)
{
	/* a cpu spec (gpu specs need gpus on this machine); gres given explicitly */
	struct spec *s = test_spec_ok("name: big\ncommand: [x]\nnodes: 4\nbackend: slurm\n"
				  "devices: {type: cpu, per_node: 2}\n"
				  "slurm: {partition: debug, time: '30', gres: 'gpu:2', extra: [--exclusive]}\n");
	struct slurm_script_in in = { s, "J1", "/shared/tc home", "/shared/tc home/runs/J1",
				      "/opt/trainctl" };
	char *text = NULL;
	in.spec = s;
	text = slurm_script(&in);
	CHECK_CONTAINS(text, "#!/bin/sh\n");
	CHECK_CONTAINS(text, "#SBATCH --job-name=big\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n"
			     "#SBATCH --cpus-per-task=2\n#SBATCH --gres=gpu:2\n#SBATCH --time=30\n"
			     "#SBATCH --partition=debug\n");
	CHECK_CONTAINS(text, "#SBATCH --requeue\n");
	CHECK_CONTAINS(text, "#SBATCH --output=/shared/tc home/runs/J1/logs/slurm-%j.out\n");
	CHECK_CONTAINS(text, "#SBATCH --exclusive\n\nTRAINCTL_HOME='/shared/tc home'\n");
	CHECK_CONTAINS(text, "exec '/opt/trainctl' slurm-batch 'J1'\n");
	free(text);
	spec_free(s);
}

TEST(sbatch_team_account)
{
	/* a team's slurm: {account, qos} replaces the spec's and reaches the #SBATCH lines */
	struct spec *s = test_spec_ok("name: t\ncommand: [x]\nbackend: slurm\n"
				  "devices: {type: cpu, per_node: 1}\n"
				  "slurm: {partition: debug, account: mine}\n");
	struct sbuf said = SBUF_INIT;
	slurm_spec_charge(s, "vision", "high", &said);
	CHECK_STR(said.buf, "slurm.account 'mine' replaced by the team's 'vision'");
	struct slurm_script_in in = { s, "J2", "/h", "/h/runs/J2", "/opt/trainctl" };
	char *text = slurm_script(&in);
	CHECK_CONTAINS(text, "#SBATCH --partition=debug\n#SBATCH --account=vision\n"
			     "#SBATCH --qos=high\n");
	free(text);
	/* no qos in the mapping: the spec's stays; the same account again says nothing */
	sbuf_reset(&said);
	slurm_spec_charge(s, "vision", NULL, &said);
	CHECK_INT(said.len, 0);
	text = slurm_script(&in);
	CHECK_CONTAINS(text, "#SBATCH --account=vision\n#SBATCH --qos=high\n");
	free(text);
	sbuf_release(&said);
	spec_free(s);
	/* without a mapping there is no --account line */
	s = test_spec_ok("name: t\ncommand: [x]\nbackend: slurm\ndevices: {type: cpu, per_node: 1}\n");
	in.spec = s;
	text = slurm_script(&in);
	CHECK(!strstr(text, "--account"));
	free(text);
	spec_free(s);
}

TEST(sshare_parse)
{
	/* sshare -P -A cv: the account's row, its users' rows, a parent's word kept */
	const char *text = "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\n"
			   "cv||10|0.500000|1234|0.250000|\n"
			   " cv|alice|parent|1.000000|1200|0.240000|0.812500\n"
			   " cvsub||1|0.1|0|0.0|\n";
	json_t *o = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(slurm_share_parse(text, "cv", &o, &err), 0);
	CHECK_STR(json_string_value(json_object_get(o, "account")), "cv");
	CHECK(json_number_value(json_object_get(o, "raw_shares")) == 10);
	CHECK(json_number_value(json_object_get(o, "norm_shares")) == 0.5);
	CHECK(json_number_value(json_object_get(o, "raw_usage")) == 1234);
	CHECK(json_number_value(json_object_get(o, "effective_usage")) == 0.25);
	CHECK(json_is_null(json_object_get(o, "fair_share"))); /* Slurm left it empty: no number made up */
	json_t *users = json_object_get(o, "users");
	CHECK_INT(json_array_size(users), 1);
	json_t *a = json_array_get(users, 0);
	CHECK_STR(json_string_value(json_object_get(a, "user")), "alice");
	CHECK_STR(json_string_value(json_object_get(a, "raw_shares")), "parent");
	CHECK(json_number_value(json_object_get(a, "fair_share")) == 0.8125);
	json_decref(o);
	/* an account Slurm does not know: a header and nothing else */
	CHECK_INT(slurm_share_parse("Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\n",
				    "nosuch", &o, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "no row for account 'nosuch'");
	CHECK_INT(slurm_share_parse("Account|User|RawShares\ncv||1\n", "cv", &o, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "no column NormShares");
	tc_err_release(&err);
}

TEST(sacct_parse)
{
	const char *text = "JobID|Account|ElapsedRaw|AllocTRES|Submit|Start|End|State\n"
			   "12|cv|90|billing=4,cpu=4,gres/gpu=4,gres/gpu:a100=4,mem=8G,node=2|1000|1010|1100|COMPLETED\n"
			   "13|nlp|0||1000|Unknown|Unknown|PENDING\n"
			   "14|cv|5|billing=1,cpu=1,node=1|1000|1001|Unknown|RUNNING\n";
	struct slurm_acct_row *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(slurm_sacct_parse(text, &v, &n, &err), 0);
	CHECK_INT(n, 3);
	CHECK_STR(v[0].id, "12");
	CHECK_STR(v[0].account, "cv");
	CHECK(v[0].elapsed == 90 && v[0].submit == 1000 && v[0].start == 1010 && v[0].end == 1100);
	CHECK_INT(v[0].nodes, 2);
	CHECK_INT(v[0].cpus, 4);
	CHECK_INT(slurm_acct_gres(&v[0], "gpu"), 4); /* the typed gres/gpu:a100 is the same gpus */
	CHECK_INT(slurm_acct_gres(&v[0], "npu"), -1);
	CHECK_STR(v[0].state, "COMPLETED");
	CHECK(v[1].start == 0 && v[1].end == 0 && v[1].nodes == 0); /* pending: nothing allocated */
	CHECK(v[2].start == 1001 && v[2].end == 0);                /* running: no end yet */
	CHECK_INT(slurm_acct_gres(&v[2], "gpu"), -1);               /* no gres on that cluster */
	slurm_acct_rows_free(v, n);
	CHECK_INT(slurm_sacct_parse("JobID|State\n1|RUNNING\n", &v, &n, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "sacct: its output has no column Account");
	tc_err_release(&err);
}

/* The name of the state slurm_state_map gives, or NULL. */
static const char *slurm_state_map_name(const char *slurm_state, bool *final)
{
	enum job_state s;
	return slurm_state_map(slurm_state, &s, final) ? job_state_name(s) : NULL;
}

TEST(state_table)
{
	bool final;
	CHECK_STR(slurm_state_map_name("PENDING", &final), "queued");
	CHECK(!final);
	CHECK_STR(slurm_state_map_name("RUNNING", &final), "running");
	CHECK(!final);
	CHECK_STR(slurm_state_map_name("COMPLETED", &final), "succeeded");
	CHECK(final);
	CHECK_STR(slurm_state_map_name("CANCELLED by 0", &final), "killed");
	CHECK(final);
	CHECK_STR(slurm_state_map_name("TIMEOUT", &final), "failed");
	CHECK_STR(slurm_state_map_name("NODE_FAIL", &final), "lost");
	CHECK_STR(slurm_state_map_name("SUSPENDED", &final), "paused");
	CHECK(slurm_state_map_name("RUNNINGX", &final) == NULL);
}

static char *golden(const char *name)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	const char *src = getenv("TC_SOURCE_DIR");
	sbuf_addf(&path, "%s/tests/unit/golden/%s", src ? src : ".", name);
	CHECK_INT(read_file(path.buf, &text, NULL), 0);
	sbuf_release(&path);
	return sbuf_detach(&text);
}

TEST(ranktable_merge_golden)
{
	int ids[2] = { 0, 1 };
	char *ips0[2] = { "192.168.100.101", "192.168.100.102" };
	char *ips1[2] = { "192.168.100.103", "192.168.100.104" };
	char *parts[2];
	parts[0] = ranktable_json("10.0.0.1", ids, ips0, 2, 0);
	/* a part's own rank ids do not matter: ranks are numbered node by node */
	parts[1] = ranktable_json("10.0.0.2", ids, ips1, 2, 0);
	struct tc_err err = TC_ERR_INIT;
	char *merged = ranktable_merge(parts, 2, &err);
	CHECK(merged != NULL);
	char *want = golden("hccl_2nodes.json");
	CHECK_STR(merged, want);
	free(want);
	free(merged);
	free(parts[1]);
	parts[1] = "{\"version\": \"1.0\"}";
	CHECK(ranktable_merge(parts, 2, &err) == NULL);
	CHECK_CONTAINS(err.msg, "rank table part of node 1 is not a one-server hccl.json");
	tc_err_release(&err);
	free(parts[0]);
}

TEST(ranktable_exchange_times_out)
{
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/rt", test_tmpdir());
	struct tc_err err = TC_ERR_INIT;
	int ids[1] = { 0 };
	char *ips[1] = { "1.2.3.4" };
	char *part = ranktable_json("10.0.0.1", ids, ips, 1, 0);
	CHECK_INT(ranktable_exchange(dir.buf, 0, 3, part, 0.2, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "node 0 waited 0 s for the parts of nodes 1, 2");
	tc_err_release(&err);
	CHECK_INT(ranktable_exchange(dir.buf, 1, 3, part, 0.2, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "node 1 waited 0 s for node 0 to write");
	tc_err_release(&err);
	/* node 2's part arrives: node 0 merges all three */
	CHECK_INT(ranktable_exchange(dir.buf, 2, 3, part, 0.1, &err), TC_EBACKEND);
	tc_err_release(&err);
	CHECK_INT(ranktable_exchange(dir.buf, 0, 3, part, 0.2, &err), 0);
	struct sbuf text = SBUF_INIT;
	sbuf_addf(&dir, "/hccl.json");
	CHECK_INT(read_file(dir.buf, &text, NULL), 0);
	CHECK_CONTAINS(text.buf, "\"server_count\": \"3\"");
	CHECK_CONTAINS(text.buf, "\"rank_id\": \"2\"");
	sbuf_release(&text);
	sbuf_release(&dir);
	free(part);
}
