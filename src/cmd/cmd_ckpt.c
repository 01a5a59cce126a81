/* cmd_ckpt.c -- `trainctl ckpt list|inspect|transform` */
#include "cmd/cmd.h"

int cmd_ckpt(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	(void)argc;
	(void)argv;
	(void)ctx;
	return tc_error(err, TC_EUSAGE, "ckpt: not built yet");
}
