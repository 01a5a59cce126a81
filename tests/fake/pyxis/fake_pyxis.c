/*
 * fake_pyxis.c -- a TEST DOUBLE of pyxis (NVIDIA's SPANK plugin), for
 * tests/e2e/test_containers_pyxis.py only.  It is not pyxis and runs no
 * enroot: it takes the srun options of pyxis that trainctl gives
 * (--container-image, --container-mounts, --container-workdir,
 * --container-name, --[no-]container-mount-home) and, for each task of a
 * step that names an image, runs the task's program inside that image's
 * file system, so that the tests see a worker really run in the image.
 *
 * How (as root, in slurm_spank_task_init_privileged, in the task's own
 * process before Slurm drops to the user and execs the program):
 *   1. the image: the enroot reference ("registry#path:tag") turned back
 *      into podman's ("registry/path:tag"), and `podman image mount` of it
 *      in the ROOT podman store (the tests import their image there);
 *      the mount stays, as pyxis keeps a named container (the tests
 *      unmount it);
 *   2. a mount namespace of the task's own (unshare, / made private), a
 *      tmpfs on /mnt holding a writable overlay of the image at /mnt/root;
 *   3. /proc, /dev, /sys bound in, a tmpfs /tmp, then the requested mounts
 *      (SRC:DST[:ro], comma-separated) at DST;
 *   4. chroot into it and chdir to --container-workdir.
 * Everything but the image mount goes with the task's namespace.
 *
 * Build: gcc -shared -fPIC -o fake_pyxis.so fake_pyxis.c (needs
 * <slurm/spank.h>, Debian's libslurm-dev); load: plugstack.conf
 * "required /path/fake_pyxis.so".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

static char *opt_image, *opt_mounts, *opt_workdir, *opt_name;

static int set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = v ? strdup(v) : NULL;
	return 0;
}

static int cb_image(int val, const char *optarg, int remote)
{
	(void)val, (void)remote;
	return set_str(&opt_image, optarg);
}

static int cb_mounts(int val, const char *optarg, int remote)
{
	(void)val, (void)remote;
	return set_str(&opt_mounts, optarg);
}

static int cb_workdir(int val, const char *optarg, int remote)
{
	(void)val, (void)remote;
	return set_str(&opt_workdir, optarg);
}

static int cb_name(int val, const char *optarg, int remote)
{
	(void)val, (void)remote;
	return set_str(&opt_name, optarg); /* pyxis reuses a named container; the double keeps the image mount */
}

static int cb_flag(int val, const char *optarg, int remote)
{
	(void)val, (void)optarg, (void)remote;
	return 0;
}

struct spank_option spank_options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	  "[pyxis] the image to run the task in (trainctl's test double)", 1, 0, cb_image },
	{ "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[pyxis] bind mounts", 1, 0, cb_mounts },
	{ "container-workdir", "PATH", "[pyxis] working directory inside the container", 1, 0,
	  cb_workdir },
	{ "container-name", "NAME", "[pyxis] name of the container", 1, 0, cb_name },
	{ "container-mount-home", NULL, "[pyxis] bind mount the user's home", 0, 0, cb_flag },
	{ "no-container-mount-home", NULL, "[pyxis] do not bind mount the user's home", 0, 0, cb_flag },
	SPANK_OPTIONS_TABLE_END
};

/* The task's stderr is the srun client's: what goes wrong shows in the job's log. */
static int fail(const char *fmt, const char *a, const char *b)
{
	dprintf(2, "pyxis: ");
	dprintf(2, fmt, a, b ? b : strerror(errno));
	dprintf(2, "\n");
	slurm_error("fake pyxis: failed for image %s", opt_image ? opt_image : "?");
	return -1;
}

/* podman's reference for an enroot one: the first '#' becomes '/'. */
static char *podman_ref(const char *image)
{
	char *r = strdup(image);
	char *hash = r ? strchr(r, '#') : NULL;
	if (hash)
		*hash = '/';
	return r;
}

/* `podman image mount REF`: the image's root, or NULL with podman's message in msg. */
static char *image_mount(const char *ref, char *msg, size_t msglen)
{
	int fds[2];
	if (pipe(fds) < 0)
		return NULL;
	pid_t pid = fork();
	if (pid < 0)
		return NULL;
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		char *const env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", NULL };
		execle("/usr/bin/podman", "podman", "image", "mount", ref, (char *)NULL, env);
		_exit(127);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < msglen && (r = read(fds[0], msg + n, msglen - 1 - n)) > 0)
		n += (size_t)r;
	msg[n] = '\0';
	close(fds[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	msg[strcspn(msg, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || msg[0] != '/')
		return NULL;
	return strdup(msg);
}

static int mkdir_p(const char *path)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -1;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* Bind src at /mnt/root/dst (a directory or a file), read-only on ro. */
static int bind_in(const char *src, const char *dst, int ro)
{
	char target[4096];
	struct stat st;
	if (snprintf(target, sizeof(target), "/mnt/root%s", dst) >= (int)sizeof(target) ||
	    stat(src, &st) < 0)
		return -1;
	if (S_ISDIR(st.st_mode)) {
		if (mkdir_p(target) < 0)
			return -1;
	} else {
		char *slash = strrchr(target, '/');
		*slash = '\0';
		if (mkdir_p(target) < 0)
			return -1;
		*slash = '/';
		int fd = open(target, O_CREAT | O_WRONLY, 0644);
		if (fd < 0)
			return -1;
		close(fd);
	}
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	if (ro && mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
		return -1;
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	if (!opt_image)
		return 0; /* a plain step: nothing to do */
	char msg[4096];
	char *ref = podman_ref(opt_image);
	char *root = ref ? image_mount(ref, msg, sizeof(msg)) : NULL;
	if (!root)
		return fail("failed to import docker image %s: %s", opt_image, msg);
	free(ref);
	/* from here on every mount is the task's own */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail("cannot make a mount namespace for %s: %s", opt_image, NULL);
	char lower[4200];
	snprintf(lower, sizeof(lower), "lowerdir=%s,upperdir=/mnt/upper,workdir=/mnt/work", root);
	free(root);
	if (mount("tmpfs", "/mnt", "tmpfs", 0, "mode=0755") < 0 || mkdir("/mnt/upper", 0755) < 0 ||
	    mkdir("/mnt/work", 0755) < 0 || mkdir("/mnt/root", 0755) < 0 ||
	    mount("overlay", "/mnt/root", "overlay", 0, lower) < 0)
		return fail("cannot lay out the container of %s: %s", opt_image, NULL);
	static const char *const sys[] = { "/proc", "/dev", "/sys" };
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (bind_in(sys[i], sys[i], 0) < 0)
			return fail("cannot mount %s: %s", sys[i], NULL);
	if (mkdir_p("/mnt/root/tmp") < 0 || mount("tmpfs", "/mnt/root/tmp", "tmpfs", 0, "mode=1777") < 0)
		return fail("cannot mount %s: %s", "/tmp", NULL);
	/* SRC:DST[:ro|rw], comma-separated, as pyxis takes them */
	char *list = opt_mounts ? strdup(opt_mounts) : NULL, *save = NULL;
	for (char *m = list ? strtok_r(list, ",", &save) : NULL; m; m = strtok_r(NULL, ",", &save)) {
		char *dst = strchr(m, ':');
		if (!dst)
			return fail("bad mount '%s'%s", m, "");
		*dst++ = '\0';
		char *flags = strchr(dst, ':');
		if (flags)
			*flags++ = '\0';
		if (bind_in(m, dst, flags && !strcmp(flags, "ro")) < 0)
			return fail("cannot mount %s: %s", m, NULL);
	}
	free(list);
	if (chroot("/mnt/root") < 0 || chdir(opt_workdir ? opt_workdir : "/") < 0)
		return fail("cannot enter the container of %s: %s", opt_image, NULL);
	return 0;
}

/* Slurm moves the task to srun's working directory after the privileged hook: the workdir again. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	if (opt_image && opt_workdir && chdir(opt_workdir) < 0)
		return fail("cannot enter %s: %s", opt_workdir, NULL);
	return 0;
}
