/*
 * pyxis.c -- image: jobs on Slurm (container.h, docs/containers.md#slurm):
 * which runtime a Slurm job's containers get, and, with pyxis, the srun
 * command line that runs one worker as a Slurm step in the image.
 *
 * pyxis (NVIDIA's SPANK plugin for enroot) runs a process in an image only
 * as a Slurm step started with `srun --container-image`.  The node's
 * supervisor stays on the host (it talks to the hub; the image has no
 * trainctl), so each worker becomes a one-task step of the job on the
 * supervisor's own node (--overlap: it shares the supervisor step's CPUs,
 * memory and GRES).  The srun client is the worker process: it passes
 * SIGTERM, SIGINT and SIGUSR1 to its task, its stdout and stderr are the
 * task's, it exits with the task's status, and a client that is killed
 * (SIGKILL after the grace period, or with a killed supervisor) has its
 * step ended by Slurm; so logs, signals, restarts, grace and "no orphans"
 * hold as for a host worker.
 */
#include "container/container.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

bool container_is_pyxis(const struct spec *s)
{
	return s->container.image && s->container.runtime && !strcmp(s->container.runtime, "pyxis");
}

char *container_pyxis_image(const char *image)
{
	/* a squashfs file or an enroot reference already: as it is */
	if (image[0] == '/' || !strncmp(image, "./", 2) || !strncmp(image, "../", 3) ||
	    strchr(image, '#'))
		return xstrdup(image);
	/*
	 * docker's rule: the first component names a registry when it has a
	 * '.' or a ':' or is "localhost" (docker.io/library/x, localhost:5000/x);
	 * else the reference is Docker Hub's, which enroot takes as it is
	 */
	const char *slash = strchr(image, '/');
	if (!slash)
		return xstrdup(image);
	size_t n = (size_t)(slash - image);
	bool registry = memchr(image, '.', n) || memchr(image, ':', n) ||
			(n == 9 && !strncmp(image, "localhost", 9));
	if (!registry)
		return xstrdup(image);
	struct sbuf sb = SBUF_INIT;
	sbuf_add(&sb, image, n);
	sbuf_addch(&sb, '#');
	sbuf_adds(&sb, slash + 1);
	return sbuf_detach(&sb);
}

/* pyxis splits --container-mounts at ',' and each mount at ':' */
static int mount_ok(const char *path, struct tc_err *err)
{
	if (strpbrk(path, ",:"))
		return tc_error(err, TC_EBACKEND,
				"'%s' cannot be mounted by pyxis (',' and ':' separate its mounts)", path);
	return 0;
}

int container_pyxis_wrapper(const struct container_pyxis *px, struct strvec *out,
			    struct tc_err *err)
{
	const struct spec *s = px->s;
	const struct spec_container *c = &s->container;
	struct sbuf mounts = SBUF_INIT;
	struct strvec seen = STRVEC_INIT;
	int rc = 0;
	/* the job's folders and the workdir at their own paths, then container.mounts */
	struct strvec src = STRVEC_INIT, dst = STRVEC_INIT, flags = STRVEC_INIT;
	for (const char *const *d = px->dirs; d && *d; d++) {
		strvec_push(&src, *d);
		strvec_push(&dst, *d);
		strvec_push(&flags, "");
	}
	strvec_push(&src, s->workdir);
	strvec_push(&dst, s->workdir);
	strvec_push(&flags, "");
	for (size_t i = 0; i < c->nmounts; i++) {
		strvec_push(&src, c->mounts[i].src);
		strvec_push(&dst, c->mounts[i].dst);
		strvec_push(&flags, c->mounts[i].ro ? ":ro" : "");
	}
	for (size_t i = 0; !rc && i < src.nr; i++) {
		bool dup = false;
		for (size_t k = 0; k < seen.nr; k++)
			dup = dup || !strcmp(seen.v[k], dst.v[i]); /* one mount per destination */
		if (dup)
			continue;
		if ((rc = mount_ok(src.v[i], err)) || (rc = mount_ok(dst.v[i], err)))
			break;
		strvec_push(&seen, dst.v[i]);
		sbuf_addf(&mounts, "%s%s:%s%s", mounts.len ? "," : "", src.v[i], dst.v[i], flags.v[i]);
	}
	if (!rc) {
		char *image = container_pyxis_image(c->image);
		strvec_push(out, px->srun);
		strvec_pushv(out, (const char *const[]){ "--overlap", "--nodes=1", "--ntasks=1",
							 "--quiet", "--export=ALL", NULL });
		strvec_pushf(out, "--jobid=%s", px->slurm_job);
		strvec_pushf(out, "--nodelist=%s", px->node);
		if (px->cpus > 0)
			strvec_pushf(out, "--cpus-per-task=%d", px->cpus);
		/* the step's name says whose it is (squeue -s) */
		strvec_pushf(out, "--job-name=trainctl-%s-a%d-r%d", px->job_id, px->attempt, px->rank);
		strvec_pushf(out, "--container-image=%s", image);
		/* one unpacked image per job and node, kept for every worker and restart */
		strvec_pushf(out, "--container-name=trainctl-%s", px->job_id);
		strvec_pushf(out, "--container-mounts=%s", mounts.buf);
		strvec_pushf(out, "--container-workdir=%s", s->workdir);
		/* what a host worker has, no more: the user's home is not the image's */
		strvec_push(out, "--no-container-mount-home");
		strvec_push(out, "--");
		free(image);
	}
	strvec_clear(&src);
	strvec_clear(&dst);
	strvec_clear(&flags);
	strvec_clear(&seen);
	sbuf_release(&mounts);
	return rc;
}

void container_pyxis_env(const struct strvec *worker_env, struct strvec *out)
{
	for (size_t i = 0; i < worker_env->nr; i++) {
		const char *e = worker_env->v[i];
		/*
		 * The supervisor step's SLURM_* would shape the new step
		 * (SLURM_NTASKS, SLURM_CPU_BIND, SLURM_DISTRIBUTION, SLURM_STEP_*,
		 * ...): srun's own options say what it is; Slurm gives the task
		 * its step's variables.  Where the cluster is stays.
		 */
		if (!strncmp(e, "SLURM_", 6) && strncmp(e, "SLURM_CONF=", 11) != 0)
			continue;
		strvec_push(out, e);
	}
}

/* The keys pyxis cannot honour, or NULL. */
static const char *pyxis_refuses(const struct spec *s)
{
	const struct spec_container *c = &s->container;
	if (c->extra.nr)
		return "container.extra (podman/docker options)";
	if (c->network && strcmp(c->network, "host") != 0)
		return "container.network (a pyxis step has the host's network)";
	if (c->shm_size)
		return "container.shm_size (a pyxis step has the host's IPC)";
	return NULL;
}

int container_slurm_runtime(struct spec *s, const char *srun, struct tc_err *err)
{
	struct spec_container *c = &s->container;
	if (!c->image)
		return 0;
	const char *want = c->runtime;
	if (want && strcmp(want, "pyxis") != 0)
		return 0; /* podman or docker under srun on each node: the nodes check it */
	bool pyxis = container_srun_has_pyxis(srun);
	const char *why = NULL;
	if (want && !pyxis)
		return tc_error(err, TC_ESPEC,
				"container.runtime: pyxis: this cluster's srun has no --container-image "
				"(pyxis is not installed); use podman or docker");
	if (pyxis) {
		why = pyxis_refuses(s);
		bool devices = !strcmp(s->device_type, "cpu") || !strcmp(s->device_type, "gpu");
		if (want && why)
			return tc_error(err, TC_ESPEC, "%s cannot be given with container.runtime: pyxis",
					why);
		if (want && !devices)
			return tc_error(err, TC_ESPEC,
					"container.runtime: pyxis passes NVIDIA GPUs only (enroot's hook), not "
					"%s devices; use podman or docker",
					s->device_type);
		if (!why && devices) {
			free(c->runtime);
			c->runtime = xstrdup("pyxis");
			return 0;
		}
		if (!why)
			why = "its device type (pyxis passes NVIDIA GPUs only)";
	}
	/* the local runtime under srun on each node, found on this host as on the nodes */
	struct container_runtime rt;
	struct tc_err e = TC_ERR_INIT;
	int rc = container_runtime_find(NULL, &rt, &e);
	tc_err_release(&e);
	if (rc && why)
		return tc_error(err, TC_ESPEC,
				"image: pyxis cannot run this job (%s) and neither podman nor docker is on "
				"this host",
				why);
	if (rc)
		return tc_error(err, TC_ESPEC,
				"image: needs pyxis (srun --container-image) or podman/docker on the nodes; "
				"none found on this host");
	c->runtime = xstrdup(rt.name);
	container_runtime_release(&rt);
	return 0;
}
