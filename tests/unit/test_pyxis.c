/* test_pyxis.c -- image: jobs on Slurm through pyxis (container/pyxis.c): the
 * enroot form of image references, the srun command line of a worker's step
 * and its environment, container.runtime: pyxis in the spec, and the choice
 * of a Slurm job's runtime on the submit host (with a fake srun). */
#include "test.h"

#include "container/container.h"
#include "core/xalloc.h"
#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char *joined(const struct strvec *v)
{
	struct sbuf sb = SBUF_INIT;
	for (size_t i = 0; i < v->nr; i++)
		sbuf_addf(&sb, "%s%s", i ? " " : "", v->v[i]);
	return sbuf_detach(&sb);
}

static void check_image(const char *in, const char *want)
{
	char *got = container_pyxis_image(in);
	CHECK_STR(got, want);
	free(got);
}

TEST(pyxis_image_names)
{
	check_image("nvcr.io/nvidia/pytorch:23.01-py3", "nvcr.io#nvidia/pytorch:23.01-py3");
	check_image("docker.io/library/python:3.11", "docker.io#library/python:3.11");
	check_image("localhost/train:1", "localhost#train:1");
	check_image("localhost:5000/a/b:2", "localhost:5000#a/b:2");
	check_image("registry.example.com/x@sha256:ab", "registry.example.com#x@sha256:ab");
	/* Docker Hub's (no registry) and enroot's own stay */
	check_image("ubuntu:22.04", "ubuntu:22.04");
	check_image("nvidia/cuda:12.2.0-base", "nvidia/cuda:12.2.0-base");
	check_image("nvcr.io#nvidia/pytorch:23.01", "nvcr.io#nvidia/pytorch:23.01");
	/* squashfs files */
	check_image("/images/pytorch.sqsh", "/images/pytorch.sqsh");
	check_image("./pytorch.sqsh", "./pytorch.sqsh");
	check_image("../img/x.sqsh", "../img/x.sqsh");
}

TEST(pyxis_wrapper_argv)
{
	struct spec *s = test_spec_ok("command: [python3, train.py]\n"
				      "image: localhost/train:1\n"
				      "backend: slurm\n"
				      "workdir: /tmp\n"
				      "container: {runtime: pyxis, mounts: ['/data:/data:ro', '/srv:/x', '/tmp']}\n");
	CHECK(container_is_pyxis(s));
	const char *dirs[] = { "/runs/J", "/ckpt", NULL };
	struct container_pyxis px = { .s = s, .srun = "/usr/bin/srun", .job_id = "J",
				      .slurm_job = "42", .node = "n1", .attempt = 2, .rank = 3,
				      .cpus = 8, .dirs = dirs };
	struct strvec v = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(container_pyxis_wrapper(&px, &v, &err), 0);
	char *j = joined(&v);
	/* the workdir is mounted once (container.mounts names it again) */
	CHECK_STR(j, "/usr/bin/srun --overlap --nodes=1 --ntasks=1 --quiet --export=ALL --jobid=42 "
		     "--nodelist=n1 --cpus-per-task=8 --job-name=trainctl-J-a2-r3 "
		     "--container-image=localhost#train:1 --container-name=trainctl-J "
		     "--container-mounts=/runs/J:/runs/J,/ckpt:/ckpt,/tmp:/tmp,/data:/data:ro,/srv:/x "
		     "--container-workdir=/tmp --no-container-mount-home --");
	free(j);
	strvec_clear(&v);
	/* no CPU count: Slurm's default */
	px.cpus = 0;
	CHECK_INT(container_pyxis_wrapper(&px, &v, &err), 0);
	j = joined(&v);
	CHECK(!strstr(j, "--cpus-per-task"));
	free(j);
	strvec_clear(&v);
	/* pyxis splits its mounts at ',' and ':' */
	const char *bad[] = { "/runs/a:b", NULL };
	px.dirs = bad;
	CHECK_INT(container_pyxis_wrapper(&px, &v, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "'/runs/a:b' cannot be mounted by pyxis");
	tc_err_release(&err);
	strvec_clear(&v);
	spec_free(s);
}

TEST(pyxis_env_drops_the_supervisor_steps_slurm_vars)
{
	struct strvec in = STRVEC_INIT, out = STRVEC_INIT;
	strvec_pushv(&in, (const char *const[]){ "RANK=1", "SLURM_NTASKS=2", "SLURM_CPU_BIND=none",
						"SLURM_STEP_ID=0", "SLURM_CONF=/etc/slurm/x.conf",
						"SLURMD_NODENAME=n1", "PATH=/usr/bin", NULL });
	container_pyxis_env(&in, &out);
	char *j = joined(&out);
	CHECK_STR(j, "RANK=1 SLURM_CONF=/etc/slurm/x.conf SLURMD_NODENAME=n1 PATH=/usr/bin");
	free(j);
	strvec_clear(&in);
	strvec_clear(&out);
}

TEST(pyxis_needs_backend_slurm)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	const char *text = "command: [true]\n"
			   "image: x:1\n"
			   "container:\n"
			   "  runtime: pyxis\n";
	CHECK_INT(spec_parse(text, strlen(text), "job.yaml", "/tmp", &s, &err), TC_ESPEC);
	CHECK_STR(err.msg, "job.yaml:4: container.runtime: pyxis runs workers as Slurm steps: it needs "
			   "backend: slurm (backend is local)");
	tc_err_release(&err);
	CHECK_INT(spec_parse_backend(text, strlen(text), "job.yaml", "/tmp", "slurm", &s, &err), 0);
	CHECK_STR(s->container.runtime, "pyxis");
	spec_free(s);
	/* a misspelt runtime names the three */
	const char *bad = "command: [true]\nimage: x:1\ncontainer: {runtime: pixys}\n";
	CHECK_INT(spec_parse(bad, strlen(bad), "job.yaml", "/tmp", &s, &err), TC_ESPEC);
	CHECK_CONTAINS(err.msg, "pyxis");
	tc_err_release(&err);
}

/* A folder with an srun that lists --container-image in its help, or not, and nothing else. */
static char *fake_bin(bool pyxis, bool podman)
{
	char tmpl[] = "/tmp/tc-unit-pyxis-XXXXXX";
	char *d = mkdtemp(tmpl);
	CHECK(d != NULL);
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/srun", d);
	FILE *f = fopen(p.buf, "w");
	CHECK(f != NULL);
	fprintf(f, "#!/bin/sh\necho 'Usage: srun [OPTIONS(0)...]'\n%s", pyxis ?
		"echo '      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH'\n" : "");
	fclose(f);
	CHECK_INT(chmod(p.buf, 0755), 0);
	if (podman) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/podman", d);
		f = fopen(p.buf, "w");
		CHECK(f != NULL);
		fprintf(f, "#!/bin/sh\nexit 0\n");
		fclose(f);
		CHECK_INT(chmod(p.buf, 0755), 0);
	}
	sbuf_release(&p);
	return xstrdup(d);
}

static void rm_bin(char *d)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/srun", d);
	unlink(p.buf);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/podman", d);
	unlink(p.buf);
	rmdir(d);
	sbuf_release(&p);
	free(d);
}

/* container_slurm_runtime with PATH = dir only; the runtime chosen, or the error. */
static int choose(const char *dir, const char *spec_text, char **runtime, struct tc_err *err)
{
	char *old = getenv("PATH") ? xstrdup(getenv("PATH")) : NULL;
	setenv("PATH", dir, 1);
	struct spec *s = NULL;
	int prc = spec_parse_backend(spec_text, strlen(spec_text), "job.yaml", "/tmp", "slurm", &s, err);
	if (prc)
		fprintf(stderr, "unexpected: %s\n", err->msg);
	CHECK_INT(prc, 0);
	struct sbuf srun = SBUF_INIT;
	sbuf_addf(&srun, "%s/srun", dir);
	int rc = container_slurm_runtime(s, srun.buf, err);
	*runtime = s->container.runtime ? xstrdup(s->container.runtime) : NULL;
	spec_free(s);
	sbuf_release(&srun);
	if (old) {
		setenv("PATH", old, 1);
		free(old);
	}
	return rc;
}

TEST(slurm_runtime_choice)
{
	const char *plain = "command: [true]\nimage: localhost/x:1\n";
	char *rt = NULL;
	struct tc_err err = TC_ERR_INIT;
	/* pyxis first */
	char *d = fake_bin(true, true);
	CHECK_INT(choose(d, plain, &rt, &err), 0);
	CHECK_STR(rt, "pyxis");
	free(rt);
	/* what pyxis cannot do goes to the local runtime */
	CHECK_INT(choose(d, "command: [true]\nimage: localhost/x:1\ncontainer: {extra: [--memory=8g]}\n",
			 &rt, &err), 0);
	CHECK_STR(rt, "podman");
	free(rt);
	setenv("TRAINCTL_FAKE_DEVICES", "npu:1", 1);
	CHECK_INT(choose(d, "command: [true]\nimage: localhost/x:1\ndevices: {type: npu, per_node: 1}\n",
			 &rt, &err), 0);
	unsetenv("TRAINCTL_FAKE_DEVICES");
	CHECK_STR(rt, "podman");
	free(rt);
	/* and is refused when asked for with pyxis */
	CHECK_INT(choose(d, "command: [true]\nimage: x\ncontainer: {runtime: pyxis, shm_size: 8g}\n",
			 &rt, &err), TC_ESPEC);
	CHECK_CONTAINS(err.msg, "container.shm_size");
	tc_err_release(&err);
	free(rt);
	rm_bin(d);
	/* no pyxis: podman from this host */
	d = fake_bin(false, true);
	CHECK_INT(choose(d, plain, &rt, &err), 0);
	CHECK_STR(rt, "podman");
	free(rt);
	CHECK_INT(choose(d, "command: [true]\nimage: x\ncontainer: {runtime: pyxis}\n", &rt, &err),
		  TC_ESPEC);
	CHECK_CONTAINS(err.msg, "srun has no --container-image");
	tc_err_release(&err);
	free(rt);
	/* a runtime given stays as it is (the nodes check it) */
	CHECK_INT(choose(d, "command: [true]\nimage: x\ncontainer: {runtime: docker}\n", &rt, &err), 0);
	CHECK_STR(rt, "docker");
	free(rt);
	rm_bin(d);
	/* neither: refused, naming both */
	d = fake_bin(false, false);
	CHECK_INT(choose(d, plain, &rt, &err), TC_ESPEC);
	CHECK_STR(err.msg, "image: needs pyxis (srun --container-image) or podman/docker on the "
			   "nodes; none found on this host");
	tc_err_release(&err);
	CHECK(rt == NULL);
	/* no image: nothing to choose */
	CHECK_INT(choose(d, "command: [true]\n", &rt, &err), 0);
	CHECK(rt == NULL);
	rm_bin(d);
}

TEST(exec_into_a_pyxis_job_is_refused)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	const char *text = "command: [true]\nimage: x\ncontainer: {runtime: pyxis}\n";
	CHECK_INT(spec_parse_backend(text, strlen(text), "job.yaml", "/tmp", "slurm", &s, &err), 0);
	struct strvec v = STRVEC_INIT;
	CHECK_INT(container_exec_prefix(s, "J", 0, 0, 1000, 100, false, &v, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "pyxis steps");
	tc_err_release(&err);
	strvec_clear(&v);
	spec_free(s);
}
