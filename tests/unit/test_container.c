/* test_container.c -- image: and container: in the spec (errors, JSON both
 * ways), and src/container/: the worker's runtime command line, the device
 * pass-through table per device type, the env file and the clean-up argv */
#include "test.h"

#include "container/container.h"
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

/* argv joined with spaces, for comparing whole command lines */
static char *joined(const struct strvec *v)
{
	struct sbuf sb = SBUF_INIT;
	for (size_t i = 0; i < v->nr; i++)
		sbuf_addf(&sb, "%s%s", i ? " " : "", v->v[i]);
	return sbuf_detach(&sb);
}

static const struct container_runtime podman = { CONTAINER_PODMAN, "podman", "/usr/bin/podman" };
static const struct container_runtime docker = { CONTAINER_DOCKER, "docker", "/usr/bin/docker" };

TEST(no_image_no_keys)
{
	struct spec *s = test_spec_ok("command: [true]\n");
	CHECK(!s->container.image);
	char *json = spec_to_json(s);
	CHECK(!strstr(json, "image") && !strstr(json, "container"));
	free(json);
	spec_free(s);
}

TEST(keys_and_json_round_trip)
{
	struct spec *s = test_spec_ok("command: [python3, train.py]\n"
				  "image: localhost/train:1\n"
				  "container:\n"
				  "  runtime: podman\n"
				  "  pull: never\n"
				  "  network: none\n"
				  "  shm_size: 8g\n"
				  "  mounts: [/data, '/srv/x:/x:ro', '/a:/b:rw']\n"
				  "  extra: [--memory=8g, --pids-limit=100]\n");
	const struct spec_container *c = &s->container;
	CHECK_STR(c->image, "localhost/train:1");
	CHECK_STR(c->runtime, "podman");
	CHECK_STR(c->pull, "never");
	CHECK_STR(c->network, "none");
	CHECK_STR(c->shm_size, "8g");
	CHECK_INT(c->nmounts, 3);
	CHECK_STR(c->mounts[0].src, "/data");
	CHECK_STR(c->mounts[0].dst, "/data");
	CHECK(!c->mounts[0].ro);
	CHECK_STR(c->mounts[1].dst, "/x");
	CHECK(c->mounts[1].ro && !c->mounts[2].ro);
	CHECK_INT(c->extra.nr, 2);
	CHECK(!spec_container_extra_refused(s));
	char *json = spec_to_json(s);
	struct spec *back = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(json, &back, &err), 0);
	CHECK_STR(back->container.image, "localhost/train:1");
	CHECK_INT(back->container.nmounts, 3);
	CHECK_STR(back->container.mounts[1].src, "/srv/x");
	CHECK(back->container.mounts[1].ro);
	CHECK_STR(back->container.pull, "never");
	CHECK_INT(back->container.extra.nr, 2);
	char *json2 = spec_to_json(back);
	CHECK_STR(json2, json);
	free(json);
	free(json2);
	spec_free(back);
	spec_free(s);
}

TEST(key_errors)
{
	CHECK_CONTAINS(parse_err("command: [true]\ncontainer: {pull: never}\n"),
		       "job.yaml:2: container: needs image:");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: x\ncontainer: {pul: never}\n"),
		       "job.yaml:3: unknown key 'container.pul' (did you mean 'container.pull'?)");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: x\ncontainer:\n  runtime: lxc\n"),
		       "job.yaml:4: container.runtime:");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: --privileged\n"),
		       "job.yaml:2: image: '--privileged' is not an image reference");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: x\ncontainer: {mounts: [data]}\n"),
		       "both paths must be absolute");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: x\ncontainer: {mounts: ['/a:/b:/c:ro']}\n"),
		       "must be SRC[:DST][:ro]");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: x\ncontainer: {extra: [privileged]}\n"),
		       "is not a runtime option");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: x\ncontainer: {shm_size: lots}\n"),
		       "container.shm_size: 'lots' is not a size");
	CHECK_CONTAINS(parse_err("command: [true]\nimage: x\ncontainer: {user: 'a b'}\n"),
		       "is not a user");
	CHECK_CONTAINS(parse_err("command: [true]\nimaeg: x\n"), "did you mean 'image'");
}

TEST(extra_allowlist)
{
	struct spec *s = test_spec_ok("command: [true]\nimage: x\n"
				  "container: {extra: [--cpus=2, -m=4g, '--memory 4g', --privileged]}\n");
	CHECK_STR(spec_container_extra_refused(s), "--privileged");
	spec_free(s);
	s = test_spec_ok("command: [true]\nimage: x\ncontainer: {extra: [--cpus=2, --cap-add=SYS_ADMIN]}\n");
	CHECK_STR(spec_container_extra_refused(s), "--cap-add=SYS_ADMIN");
	spec_free(s);
}

static char *wrapper_of(const char *yaml, const struct container_runtime *rt, int rank,
			const int *ids, int n, int *rc_out)
{
	struct spec *s = test_spec_ok(yaml);
	static const char *const dirs[] = { "/home/u/runs/J", "/ckpt", NULL };
	struct container_worker cw = {
		.s = s, .rt = rt, .job_id = "J", .attempt = 2, .rank = rank, .uid = 1000, .gid = 100,
		.env_file = "/home/u/runs/J/container-rank-1.env", .dirs = dirs, .device_ids = ids,
		.ndevices = n,
	};
	struct strvec argv = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	int rc = container_wrapper(&cw, &argv, &err);
	char *out = rc ? strdup(err.msg) : joined(&argv);
	if (rc_out)
		*rc_out = rc;
	strvec_clear(&argv);
	tc_err_release(&err);
	spec_free(s);
	return out;
}

TEST(wrapper_cpu)
{
	int rc;
	char *w = wrapper_of("command: [true]\nworkdir: /tmp\nimage: localhost/py:1\n", &podman, 1,
			     (const int[]){ 0 }, 1, &rc);
	CHECK_INT(rc, 0);
	CHECK_STR(w, "/usr/bin/podman run --rm --init --pull=never --name=trainctl-J-a2-r1 "
		     "--label=trainctl.job=J --label=trainctl.rank=1 --cap-drop=all "
		     "--security-opt=no-new-privileges --user=1000:100 --network=host --ipc=host "
		     "--env-file=/home/u/runs/J/container-rank-1.env --workdir=/tmp "
		     "-v /home/u/runs/J:/home/u/runs/J -v /ckpt:/ckpt -v /tmp:/tmp localhost/py:1");
	free(w);
	/* the job's folders mounted once each; options of container: in place */
	w = wrapper_of("command: [true]\nworkdir: /tmp\nimage: i\ncontainer:\n"
		       "  {network: none, shm_size: 1g, mounts: ['/ckpt', '/d:/data:ro'], extra: [--cpus=2]}\n",
		       &podman, 0, (const int[]){ 0 }, 1, &rc);
	CHECK_INT(rc, 0);
	CHECK_CONTAINS(w, "--network=none --shm-size=1g --env-file");
	CHECK(!strstr(w, "--ipc=host"));
	CHECK_CONTAINS(w, "-v /tmp:/tmp -v /d:/data:ro --cpus=2 i");
	CHECK(!strstr(strstr(w, "/ckpt:/ckpt") + 1, "/ckpt:/ckpt"));
	free(w);
}

/* An endpoint's container: the same command line, its own name and label, the host's network. */
TEST(wrapper_endpoint)
{
	struct spec *s = test_spec_ok("command: [true]\nworkdir: /tmp\nimage: localhost/py:1\n"
				      "container: {network: none, mounts: ['/d:/data:ro']}\n");
	static const char *const dirs[] = { "/home/u/runs/J", NULL };
	struct container_worker cw = {
		.s = s, .rt = &podman, .job_id = "J", .endpoint = "web", .uid = 1000, .gid = 100,
		.rootless = true, .env_file = "/home/u/runs/J/container-ep-web.env", .dirs = dirs,
		.device_ids = (const int[]){ 0 }, .ndevices = 1,
	};
	struct strvec argv = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(container_wrapper(&cw, &argv, &err), 0);
	char *w = joined(&argv);
	CHECK_STR(w, "/usr/bin/podman run --rm --init --pull=never --name=trainctl-J-ep-web "
		     "--label=trainctl.job=J --label=trainctl.endpoint=web --cap-drop=all "
		     "--security-opt=no-new-privileges --userns=keep-id --network=host --ipc=host "
		     "--env-file=/home/u/runs/J/container-ep-web.env --workdir=/tmp "
		     "-v /home/u/runs/J:/home/u/runs/J -v /tmp:/tmp -v /d:/data:ro localhost/py:1");
	free(w);
	struct sbuf nm = SBUF_INIT;
	container_endpoint_name(&nm, "J", "web");
	CHECK_STR(nm.buf, "trainctl-J-ep-web");
	sbuf_release(&nm);
	strvec_clear(&argv);
	tc_err_release(&err);
	spec_free(s);
}

TEST(wrapper_user_is_the_jobs)
{
	int rc;
	char *w = wrapper_of("command: [true]\nimage: i\ncontainer: {user: '1000:100'}\n", &podman, 0,
			     (const int[]){ 0 }, 1, &rc);
	CHECK_INT(rc, 0);
	free(w);
	w = wrapper_of("command: [true]\nimage: i\ncontainer: {user: '0'}\n", &podman, 0,
		       (const int[]){ 0 }, 1, &rc);
	CHECK_INT(rc, TC_EUSAGE);
	CHECK_CONTAINS(w, "container.user '0' is not the job's user (1000:100)");
	free(w);
}

TEST(devices_nvidia)
{
	int rc;
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:4", 1);
	const char *y = "command: [true]\nimage: i\ndevices: {type: gpu, per_node: 2}\n";
	char *w = wrapper_of(y, &podman, 0, (const int[]){ 3, 1 }, 2, &rc);
	CHECK_INT(rc, 0);
	CHECK_CONTAINS(w, " --device nvidia.com/gpu=3 --device nvidia.com/gpu=1 i");
	free(w);
	w = wrapper_of(y, &docker, 0, (const int[]){ 3, 1 }, 2, &rc);
	CHECK_INT(rc, 0);
	CHECK_CONTAINS(w, " --gpus=\"device=3,1\" i");
	CHECK_CONTAINS(w, "/usr/bin/docker run --rm --init");
	free(w);
	/* the container numbers its GPUs 0..n-1 in host order */
	char *v = container_visible_value("gpu", "3,1");
	CHECK_STR(v, "1,0");
	free(v);
	CHECK(!container_visible_value("gpu", "GPU-8c1e"));
	CHECK(!container_visible_value("npu", "4,5"));
}

TEST(devices_ascend)
{
	struct strvec out = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(container_devices(&podman, "npu", (const int[]){ 4, 5 }, 2, NULL, &out, &err), 0);
	char *j = joined(&out);
	CHECK_STR(j, "--device /dev/davinci4 --device /dev/davinci5 --device /dev/davinci_manager "
		     "--device /dev/devmm_svm --device /dev/hisi_hdc "
		     "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro "
		     "-v /usr/local/dcmi:/usr/local/dcmi:ro "
		     "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro "
		     "-v /etc/ascend_install.info:/etc/ascend_install.info:ro "
		     "-v /usr/local/sbin/npu-smi:/usr/local/sbin/npu-smi:ro");
	free(j);
	strvec_clear(&out);
	tc_err_release(&err);
}

static bool only_driver(const char *p)
{
	return !strcmp(p, "/usr/local/Ascend/driver");
}

TEST(devices_optional_paths_and_other_rows)
{
	struct strvec out = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(container_devices(&podman, "npu", (const int[]){ 0 }, 1, only_driver, &out, &err), 0);
	char *j = joined(&out);
	CHECK_CONTAINS(j, "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro");
	CHECK(!strstr(j, "dcmi"));
	free(j);
	strvec_clear(&out);
	CHECK_INT(container_devices(&podman, "rocm", (const int[]){ 0 }, 1, NULL, &out, &err), 0);
	j = joined(&out);
	CHECK_STR(j, "--device /dev/kfd --device /dev/dri");
	free(j);
	strvec_clear(&out);
	CHECK_INT(container_devices(&podman, "mlu", (const int[]){ 2 }, 1, NULL, &out, &err), 0);
	j = joined(&out);
	CHECK_STR(j, "--device /dev/cambricon_dev2 --device /dev/cambricon_ctl");
	free(j);
	strvec_clear(&out);
	CHECK_INT(container_devices(&podman, "cpu", (const int[]){ 0 }, 1, NULL, &out, &err), 0);
	CHECK_INT(out.nr, 0);
	/* a type nobody wrote a row for: an error naming the row, never a bare container */
	CHECK_INT(container_devices(&podman, "sdaa", (const int[]){ 0 }, 1, NULL, &out, &err),
		  TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "no device pass-through row for device type 'sdaa'");
	CHECK_CONTAINS(err.msg, "src/container/passthrough.c");
	size_t n;
	const struct container_dev_info *rows = container_dev_rows(&n);
	CHECK(n >= 6);
	CHECK_STR(rows[1].type, "gpu");
	strvec_clear(&out);
	tc_err_release(&err);
}

TEST(env_file)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:4", 1);
	struct spec *s = test_spec_ok("command: [true]\nimage: i\ndevices: {type: gpu, per_node: 2}\n");
	struct container_worker cw = { .s = s };
	struct strvec env = STRVEC_INIT, dropped = STRVEC_INIT;
	strvec_push(&env, "RANK=1");
	strvec_push(&env, "CUDA_VISIBLE_DEVICES=6,2");
	strvec_push(&env, "BASH_FUNC_f%%=() { echo\n}");
	strvec_push(&env, "EMPTY=");
	char *t = container_env_file(&cw, &env, &dropped);
	CHECK_STR(t, "RANK=1\nCUDA_VISIBLE_DEVICES=1,0\nEMPTY=\n");
	CHECK_INT(dropped.nr, 1);
	CHECK_STR(dropped.v[0], "BASH_FUNC_f%%");
	free(t);
	strvec_clear(&env);
	strvec_clear(&dropped);
	spec_free(s);
}

TEST(exec_rm_and_reap_argv)
{
	struct strvec v = STRVEC_INIT;
	container_exec_argv(&podman, "J", 1, 3, 1000, 100, "/w", true, &v);
	char *j = joined(&v);
	CHECK_STR(j, "/usr/bin/podman exec -i --user=1000:100 --workdir=/w trainctl-J-a1-r3");
	free(j);
	strvec_clear(&v);
	const char *const names[] = { "a", "b" };
	container_rm_argv(&podman, names, 2, &v);
	j = joined(&v);
	CHECK_STR(j, "/usr/bin/podman rm -f --time=0 --ignore a b");
	free(j);
	strvec_clear(&v);
	container_reap_argv(&podman, "J", &v);
	j = joined(&v);
	CHECK_STR(j, "/usr/bin/podman rm -f --time=0 --filter=label=trainctl.job=J");
	free(j);
	strvec_clear(&v);
	container_reap_argv(&docker, "J", &v);
	CHECK_STR(v.v[0], "/bin/sh");
	CHECK_CONTAINS(v.v[2], "ps -aq --filter label=trainctl.job=J");
	CHECK_STR(v.v[3], "/usr/bin/docker");
	strvec_clear(&v);
}

TEST(runtime_missing)
{
	struct container_runtime rt;
	struct tc_err err = TC_ERR_INIT;
	setenv("PATH", "/nonexistent", 1);
	CHECK_INT(container_runtime_find("podman", &rt, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "container runtime 'podman' is not installed");
	CHECK_INT(container_runtime_find(NULL, &rt, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "neither podman nor docker");
	tc_err_release(&err);
}
