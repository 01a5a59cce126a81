/* cmd_sync.c -- `trainctl sync SRC DST [--jobs N] [--delete] [--dry-run]` */
#include "cmd/cmd.h"
#include "core/util.h"
#include "storage/storage.h"

#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

static const char usage[] =
	"usage: trainctl sync [options] SRC DST\n"
	"\n"
	"Copy what differs from SRC to DST; each is a folder, s3://bucket/prefix/,\n"
	"obs://bucket/prefix/ or file://path (SRC may also be one file).\n"
	"\n"
	"  -j, --jobs N      parallel transfers (default 8)\n"
	"      --delete      remove from DST what SRC does not have\n"
	"      --dry-run     print what would be copied or deleted, change nothing\n"
	"  -v, --verbose     print each copy and delete\n"
	"  -q, --quiet       no progress line\n";

/* A key the destination cannot hold safely: say so on its own line. */
static void warn_refused(void *arg, const char *key, const char *why)
{
	const struct sync_opts *o = arg;
	fprintf(stderr, "%strainctl: warning: skipped '%s': %s, which could write outside the destination\n",
		o->progress ? "\r\033[K" : "", key, why);
}

/* What the sync says: its progress line on stderr, the rest on stdout. */
static int say(void *arg, bool progress, const char *line, size_t len)
{
	(void)arg;
	return write_all(progress ? STDERR_FILENO : STDOUT_FILENO, line, len) < 0 ? -1 : 0;
}

int cmd_sync(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "jobs", required_argument, NULL, 'j' },
		{ "delete", no_argument, NULL, 'D' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	(void)ctx;
	struct sync_opts o = { .jobs = 8, .progress = isatty(STDERR_FILENO) };
	int c;
	long n;
	optind = 1;
	while ((c = getopt_long(argc, argv, "j:vqh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			if (!parse_long(optarg, 1, 256, &n))
				return tc_error(err, TC_EUSAGE, "sync: --jobs must be 1..256, not '%s'", optarg);
			o.jobs = (int)n;
			break;
		case 'D': o.delete_extra = true; break;
		case 'n': o.dry_run = true; break;
		case 'v': o.verbose = true; break;
		case 'q': o.progress = false; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("sync", "j:vqh", argc, argv, opts, err);
		}
	}
	if (argc - optind != 2)
		return tc_error(err, TC_EUSAGE, "sync: give a source and a destination");
	o.on_refused = warn_refused;
	o.arg = &o;
	o.say = say;
	struct sync_stats st;
	int rc = storage_sync(argv[optind], argv[optind + 1], &o, &st, err);
	/* refused keys fail the sync, after the others were copied: sum those up too */
	if (!rc || st.refused) {
		struct sbuf bytes = SBUF_INIT;
		format_bytes(&bytes, (double)st.bytes);
		printf("%s%llu copied, %llu skipped, %llu deleted, %s in %.2f s",
		       o.dry_run ? "dry run: " : "", (unsigned long long)st.copied,
		       (unsigned long long)st.skipped, (unsigned long long)st.deleted, bytes.buf,
		       st.seconds);
		sbuf_release(&bytes);
		if (st.refused)
			printf(", %llu refused", (unsigned long long)st.refused);
		putchar('\n');
	}
	/* an empty or mistyped prefix is not an error (it may fill later), but say so */
	if (!rc && !st.listed)
		fprintf(stderr, "trainctl: warning: nothing at %s (%s): nothing was copied\n", argv[optind],
			storage_is_remote(argv[optind]) ? "no object has that prefix" : "an empty folder");
	return rc;
}
