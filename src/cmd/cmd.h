/*
 * cmd.h -- the subcommands (git's builtin.h).  Each cmd_* parses its own
 * flags, calls one library module and prints.  It returns 0 or a negative
 * TC_E* code with err filled; main.c prints the message and picks the exit
 * status.  A command that wants a specific exit status without a message
 * (e.g. the job's own result) sets *exit_status.
 */
#ifndef TC_CMD_H
#define TC_CMD_H

#include "core/err.h"

struct cmd_ctx {
	const char *home;  /* $TRAINCTL_HOME, resolved */
	int exit_status;   /* used when the command returns 0; default 0 */
};

typedef int (*cmd_fn)(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);

int cmd_run(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_ps(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_show(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_logs(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_devices(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_plan(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_metrics(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_export(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_sync(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_ckpt(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_compare(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_report(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);

#endif
