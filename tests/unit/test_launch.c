/* test_launch.c -- the environment builder and the Ascend rank table */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "launch/launch.h"

#include <jansson.h>
#include <stdlib.h>

static struct spec *mkspec(const char *type, const char *framework, int n)
{
	struct spec *s = malloc(sizeof(*s));
	spec_init(s);
	free(s->device_type);
	s->device_type = strdup(type);
	free(s->framework);
	s->framework = strdup(framework);
	s->per_node = n;
	s->device_ids = calloc((size_t)n, sizeof(int));
	for (int i = 0; i < n; i++)
		s->device_ids[i] = 4 + i;
	s->name = strdup("t");
	return s;
}

static struct env_plan plan_for(const struct spec *s)
{
	static const int ports[] = { 7001, 7002, 7003, 7004 };
	struct env_plan p = {
		.spec = s, .job_id = "J1", .output_dir = "/r/output", .ckpt_dir = "/r/output/ckpt",
		.data_dir = "/r/data", .log_dir = "/r/logs", .tb_dir = "/r/output/tensorboard",
		.resume_from = NULL, .master_addr = "127.0.0.1", .master_port = 29500,
		.node_rank = 0, .nnodes = 1, .restart_count = 2, .rank_table = NULL,
		.extra_ports = ports,
	};
	return p;
}

TEST(torchrun_set)
{
	unsetenv("OMP_NUM_THREADS");
	unsetenv("NCCL_ASYNC_ERROR_HANDLING");
	struct spec *s = mkspec("cpu", "pytorch", 2);
	struct env_plan p = plan_for(s);
	struct strvec env = STRVEC_INIT;
	env_common(&p, &env);
	env_rank(&p, 1, &env);
	CHECK_STR(env_get(&env, "RANK"), "1");
	CHECK_STR(env_get(&env, "LOCAL_RANK"), "1");
	CHECK_STR(env_get(&env, "WORLD_SIZE"), "2");
	CHECK_STR(env_get(&env, "LOCAL_WORLD_SIZE"), "2");
	CHECK_STR(env_get(&env, "GROUP_RANK"), "0");
	CHECK_STR(env_get(&env, "GROUP_WORLD_SIZE"), "1");
	CHECK_STR(env_get(&env, "ROLE_RANK"), "1");
	CHECK_STR(env_get(&env, "ROLE_WORLD_SIZE"), "2");
	CHECK_STR(env_get(&env, "ROLE_NAME"), "default");
	CHECK_STR(env_get(&env, "MASTER_ADDR"), "127.0.0.1");
	CHECK_STR(env_get(&env, "MASTER_PORT"), "29500");
	CHECK_STR(env_get(&env, "TORCHELASTIC_RESTART_COUNT"), "2");
	CHECK_STR(env_get(&env, "TORCHELASTIC_MAX_RESTARTS"), "0");
	CHECK_STR(env_get(&env, "TORCHELASTIC_RUN_ID"), "J1");
	CHECK_STR(env_get(&env, "TORCHELASTIC_USE_AGENT_STORE"), "False");
	CHECK_STR(env_get(&env, "TORCHELASTIC_ERROR_FILE"), "/r/logs/error-rank-1.json");
	CHECK_STR(env_get(&env, "OMP_NUM_THREADS"), "1");
	CHECK_STR(env_get(&env, "NCCL_ASYNC_ERROR_HANDLING"), "1");
	CHECK_STR(env_get(&env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
	CHECK_STR(env_get(&env, "TRAINCTL_CKPT_DIR"), "/r/output/ckpt");
	CHECK_STR(env_get(&env, "TRAINCTL_TENSORBOARD_DIR"), "/r/output/tensorboard");
	CHECK(env_get(&env, "TRAINCTL_RESUME_FROM") == NULL);
	CHECK(env_get(&env, "CUDA_VISIBLE_DEVICES") == NULL);
	CHECK(env_get(&env, "DEVICE_ID") == NULL);
	strvec_clear(&env);
	spec_free(s);
}

TEST(omp_kept_when_set)
{
	setenv("OMP_NUM_THREADS", "4", 1);
	struct spec *s = mkspec("cpu", "pytorch", 2);
	struct env_plan p = plan_for(s);
	struct strvec env = STRVEC_INIT;
	env_common(&p, &env);
	CHECK(env_get(&env, "OMP_NUM_THREADS") == NULL); /* inherited as is */
	strvec_clear(&env);
	unsetenv("OMP_NUM_THREADS");
	s->per_node = 1;
	env_common(&p, &env);
	CHECK(env_get(&env, "OMP_NUM_THREADS") == NULL); /* torchrun: only when nproc > 1 */
	strvec_clear(&env);
	spec_free(s);
}

/* One row per device kind: the visibility variable and the device id rule. */
TEST(device_table)
{
	static const struct {
		const char *type, *var, *device_id;
	} rows[] = {
		{ "gpu", "CUDA_VISIBLE_DEVICES", NULL },
		{ "npu", "ASCEND_RT_VISIBLE_DEVICES", "1" }, /* CANN: an index once visible is set */
		{ "sdaa", "SDAA_VISIBLE_DEVICES", NULL },
		{ "mlu", "MLU_VISIBLE_DEVICES", NULL },
		{ "musa", "MUSA_VISIBLE_DEVICES", NULL },
		{ "rocm", "HIP_VISIBLE_DEVICES", NULL },
		{ "xpu", "ZE_AFFINITY_MASK", NULL },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct spec *s = mkspec(rows[i].type, "pytorch", 2);
		struct env_plan p = plan_for(s);
		struct strvec env = STRVEC_INIT;
		env_common(&p, &env);
		env_rank(&p, 1, &env);
		CHECK_STR(env_get(&env, rows[i].var), "4,5");
		if (rows[i].device_id)
			CHECK_STR(env_get(&env, "DEVICE_ID"), rows[i].device_id);
		else
			CHECK(env_get(&env, "DEVICE_ID") == NULL);
		strvec_clear(&env);
		spec_free(s);
	}
}

TEST(mindspore_on_npu)
{
	struct spec *s = mkspec("npu", "mindspore", 2);
	struct env_plan p = plan_for(s);
	p.rank_table = "/r/hccl.json";
	struct strvec env = STRVEC_INIT;
	env_common(&p, &env);
	env_rank(&p, 0, &env);
	CHECK_STR(env_get(&env, "RANK_ID"), "0");
	CHECK_STR(env_get(&env, "RANK_SIZE"), "2");
	CHECK_STR(env_get(&env, "DEVICE_ID"), "4");
	CHECK_STR(env_get(&env, "ASCEND_DEVICE_ID"), "4");
	CHECK_STR(env_get(&env, "RANK_TABLE_FILE"), "/r/hccl.json");
	CHECK_STR(env_get(&env, "MINDSPORE_HCCL_CONFIG_PATH"), "/r/hccl.json");
	CHECK_STR(env_get(&env, "DEVICE_NUM"), "2");
	CHECK_STR(env_get(&env, "SERVER_ID"), "0");
	/* rank-table mode: physical ids, as in hccl.json; no visibility variable */
	CHECK(env_get(&env, "ASCEND_RT_VISIBLE_DEVICES") == NULL);
	strvec_clear(&env);
	spec_free(s);
}

TEST(tensorflow_profile)
{
	struct spec *s = mkspec("npu", "tensorflow", 2);
	struct env_plan p = plan_for(s);
	struct strvec env = STRVEC_INIT;
	env_rank(&p, 1, &env);
	CHECK_STR(env_get(&env, "RANK_ID"), "1");
	CHECK_STR(env_get(&env, "DEVICE_ID"), "5");
	strvec_clear(&env);
	spec_free(s);
}

TEST(paddle_profile)
{
	struct spec *s = mkspec("gpu", "paddle", 2);
	struct env_plan p = plan_for(s);
	struct strvec env = STRVEC_INIT;
	CHECK(env_needs_rank_ports("paddle"));
	CHECK(!env_needs_rank_ports("pytorch"));
	env_rank(&p, 1, &env);
	CHECK_STR(env_get(&env, "PADDLE_TRAINER_ID"), "1");
	CHECK_STR(env_get(&env, "PADDLE_TRAINERS_NUM"), "2");
	CHECK_STR(env_get(&env, "PADDLE_TRAINER_ENDPOINTS"), "127.0.0.1:7001,127.0.0.1:7002");
	CHECK_STR(env_get(&env, "PADDLE_CURRENT_ENDPOINT"), "127.0.0.1:7002");
	strvec_clear(&env);
	spec_free(s);
}

TEST(user_env_and_resume)
{
	struct spec *s = mkspec("cpu", "pytorch", 1);
	s->env = calloc(1, sizeof(*s->env));
	s->env[0].key = strdup("MY_VAR");
	s->env[0].val = strdup("a b'c");
	s->nenv = 1;
	struct env_plan p = plan_for(s);
	p.resume_from = "/r/output/ckpt/epoch-3.pt";
	struct strvec env = STRVEC_INIT;
	env_common(&p, &env);
	CHECK_STR(env_get(&env, "MY_VAR"), "a b'c");
	CHECK_STR(env_get(&env, "TRAINCTL_RESUME_FROM"), "/r/output/ckpt/epoch-3.pt");
	char *text = env_file_text(&p);
	CHECK_CONTAINS(text, "export MY_VAR='a b'\\''c'\n");
	CHECK_CONTAINS(text, "export WORLD_SIZE='1'\n");
	CHECK_CONTAINS(text, "# local rank 0: RANK='0' LOCAL_RANK='0'");
	free(text);
	strvec_clear(&env);
	spec_free(s);
}

TEST(helper_channels)
{
	struct spec *s = mkspec("cpu", "pytorch", 2);
	struct env_plan p = plan_for(s);
	p.node_rank = 1;
	p.nnodes = 2;
	struct strvec env = STRVEC_INIT;
	env_common(&p, &env);
	env_rank(&p, 1, &env);
	/* nothing of them unless the supervisor has them */
	CHECK(!env_get(&env, "TRAINCTL_STOP_FILE"));
	CHECK(!env_get(&env, "TRAINCTL_METRICS_CHANNEL"));
	strvec_clear(&env);
	p.stop_file = "/r/stop-node1";
	p.metrics_channel = true;
	env_common(&p, &env);
	env_rank(&p, 1, &env);
	CHECK_STR(env_get(&env, "TRAINCTL_STOP_FILE"), "/r/stop-node1");
	/* the global rank's channel: the follower's "{rank}" is the same name */
	CHECK_STR(env_get(&env, "TRAINCTL_METRICS_CHANNEL"), "/r/logs/metrics-rank-3.dlll");
	char *tmpl = env_metrics_channel("/r/logs", "{rank}");
	CHECK_STR(tmpl, "/r/logs/metrics-rank-{rank}.dlll");
	free(tmpl);
	strvec_clear(&env);
	spec_free(s);
}

TEST(rank_table)
{
	struct sbuf conf = SBUF_INIT;
	sbuf_addf(&conf, "%s/hccn.conf", test_tmpdir());
	const char *text = "address_4=192.168.100.105\nnetmask_4=255.255.255.0\n"
			   "address_5=192.168.100.106\naddress_0=192.168.100.101\n";
	CHECK_INT(write_file_atomic(conf.buf, text, strlen(text), NULL), 0);
	int ids[] = { 4, 5 };
	char *ips[2];
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ranktable_device_ips(conf.buf, ids, 2, ips, &err), 0);
	CHECK_STR(ips[0], "192.168.100.105");
	char *json = ranktable_json("10.0.0.1", ids, ips, 2, 0);
	json_t *root = json_loads(json, 0, NULL);
	CHECK(root != NULL);
	CHECK_STR(json_string_value(json_object_get(root, "version")), "1.0");
	CHECK_STR(json_string_value(json_object_get(root, "server_count")), "1");
	CHECK_STR(json_string_value(json_object_get(root, "status")), "completed");
	json_t *srv = json_array_get(json_object_get(root, "server_list"), 0);
	CHECK_STR(json_string_value(json_object_get(srv, "server_id")), "10.0.0.1");
	CHECK_STR(json_string_value(json_object_get(srv, "host_nic_ip")), "reserve");
	json_t *d1 = json_array_get(json_object_get(srv, "device"), 1);
	CHECK_STR(json_string_value(json_object_get(d1, "device_id")), "5");
	CHECK_STR(json_string_value(json_object_get(d1, "device_ip")), "192.168.100.106");
	CHECK_STR(json_string_value(json_object_get(d1, "rank_id")), "1");
	json_decref(root);
	free(json);
	free(ips[0]);
	free(ips[1]);

	int missing[] = { 4, 7 };
	CHECK_INT(ranktable_device_ips(conf.buf, missing, 2, ips, &err), TC_ESPEC);
	CHECK_CONTAINS(err.msg, "no address_7 line for npu 7");
	CHECK(ips[0] == NULL);
	tc_err_release(&err);
	sbuf_release(&conf);
}

/* server_id's interface: the default route's, not the first listed (a bridge may come first) */
TEST(route_default_iface)
{
	const char *route =
		"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
		"cni0\t0000580A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
		"wlan0\t00000000\t010200C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
		"eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
	char *iface = route_default_iface(route, strlen(route));
	CHECK_STR(iface, "eth0");
	free(iface);
	const char *none = "Iface\tDestination\tGateway \tFlags\n"
			   "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
	CHECK(route_default_iface(none, strlen(none)) == NULL);
	CHECK(route_default_iface("", 0) == NULL);
}
