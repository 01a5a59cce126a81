/*
 * replay.c -- a main() for the harnesses outside libFuzzer: runs each file
 * named (or each file of each folder named) once through
 * LLVMFuzzerTestOneInput, in name order.  The unit tests use it to replay
 * the corpora, kept crashes included, under gcc and ASan (make unit-asan).
 */
#include "fuzz.h"

#include <dirent.h>
#include <sys/stat.h>

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	size_t alloc = 4096, len = 0;
	uint8_t *buf = malloc(alloc);
	size_t n;
	while (buf && (n = fread(buf + len, 1, alloc - len, f)) > 0) {
		len += n;
		if (len == alloc) {
			alloc *= 2;
			uint8_t *nb = realloc(buf, alloc);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	int bad = ferror(f) || !buf;
	fclose(f);
	if (bad) {
		fprintf(stderr, "%s: cannot read\n", path);
		free(buf);
		return 1;
	}
	/* an exact-size copy, as libFuzzer gives, so reads past the end are caught */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact)
		abort();
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int bad = 0, runs = 0;
	for (int i = 1; i < argc; i++) {
		struct stat sb;
		if (stat(argv[i], &sb) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(sb.st_mode)) {
			bad |= run_file(argv[i]);
			runs++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		if (!d) {
			perror(argv[i]);
			return 1;
		}
		char **names = NULL;
		size_t nn = 0;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char **nv = realloc(names, (nn + 1) * sizeof(*names));
			if (!nv)
				abort();
			names = nv;
			size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
			names[nn] = malloc(l);
			if (!names[nn])
				abort();
			snprintf(names[nn++], l, "%s/%s", argv[i], e->d_name);
		}
		closedir(d);
		qsort(names, nn, sizeof(*names), cmp_names);
		for (size_t k = 0; k < nn; k++) {
			bad |= run_file(names[k]);
			runs++;
			free(names[k]);
		}
		free(names);
	}
	printf("replayed %d inputs\n", runs);
	return bad;
}
