/*
 * cmd_completion.c -- `trainctl completion bash|zsh`: the shell completion
 * scripts.  The scripts know the commands (main.c's table, written in when
 * printed); they ask the binary itself for the rest when completing: the
 * options from `trainctl COMMAND --help`, job ids and names from
 * `trainctl ps -a --format csv -o id,name`, so they never go stale.
 */
#include "cmd/cmd.h"

#include <stdio.h>
#include <string.h>

static const char bash_script[] =
	"# bash completion for trainctl: `trainctl completion bash` prints it.\n"
	"#   in ~/.bashrc:  source <(trainctl completion bash)\n"
	"#   or once:       trainctl completion bash > /etc/bash_completion.d/trainctl\n"
	"# Options come from `trainctl COMMAND --help`, job ids and names from\n"
	"# `trainctl ps -a --format csv -o id,name` (the server's when one is set).\n"
	"_trainctl_commands=\"@COMMANDS@\"\n"
	"\n"
	"_trainctl_jobs() {\n"
	"\t\"$1\" ps -a --format csv -o id,name 2>/dev/null | tail -n +2 | tr ',' '\\n' | awk '!seen[$0]++'\n"
	"}\n"
	"\n"
	"_trainctl_help() {\n"
	"\t\"$1\" \"$2\" --help 2>&1\n"
	"}\n"
	"\n"
	"_trainctl() {\n"
	"\tlocal prog=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=\"\" cmd=\"\" i f\n"
	"\t((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
	"\tCOMPREPLY=()\n"
	"\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	"\t\tcase ${COMP_WORDS[i]} in\n"
	"\t\t-*) ;;\n"
	"\t\t*) cmd=${COMP_WORDS[i]}; break ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"\tif [[ -z $cmd ]]; then\n"
	"\t\tCOMPREPLY=($(compgen -W \"$_trainctl_commands --help --version\" -- \"$cur\"))\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\t# after --: the command to run, then its arguments\n"
	"\tfor ((i = i + 1; i < COMP_CWORD; i++)); do\n"
	"\t\tif [[ ${COMP_WORDS[i]} == -- ]]; then\n"
	"\t\t\tif ((i + 1 == COMP_CWORD)); then\n"
	"\t\t\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n"
	"\t\t\telse\n"
	"\t\t\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
	"\t\t\tfi\n"
	"\t\t\treturn 0\n"
	"\t\tfi\n"
	"\tdone\n"
	"\tcase $prev in\n"
	"\t--resume)\n"
	"\t\tif [[ $cmd == run ]]; then\n"
	"\t\t\tCOMPREPLY=($(compgen -W \"$(_trainctl_jobs \"$prog\")\" -- \"$cur\"))\n"
	"\t\t\treturn 0\n"
	"\t\tfi ;;\n"
	"\t--backend) COMPREPLY=($(compgen -W \"local slurm\" -- \"$cur\")); return 0 ;;\n"
	"\t--format) COMPREPLY=($(compgen -W \"table csv json\" -- \"$cur\")); return 0 ;;\n"
	"\t-d | --device) COMPREPLY=($(compgen -W \"cpu gpu npu\" -- \"$cur\")); return 0 ;;\n"
	"\t--*)\n"
	"\t\t# an option with a value (--name NAME, --set KEY=VALUE): nothing to offer\n"
	"\t\tif _trainctl_help \"$prog\" \"$cmd\" | grep -qE -- \"${prev}[ =][A-Z]\"; then\n"
	"\t\t\treturn 0\n"
	"\t\tfi ;;\n"
	"\tesac\n"
	"\tif [[ $cur == -* ]]; then\n"
	"\t\tCOMPREPLY=($(compgen -W \"$(_trainctl_help \"$prog\" \"$cmd\" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u) --help\" -- \"$cur\"))\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tcase $cmd in\n"
	"\tshow | logs | metrics | export | report | compare | stop | pause | resume | clone | delete | endpoints | exec | ssh)\n"
	"\t\tCOMPREPLY=($(compgen -W \"$(_trainctl_jobs \"$prog\")\" -- \"$cur\")) ;;\n"
	"\tcompletion)\n"
	"\t\tCOMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")) ;;\n"
	"\trun | submit | sweep)\n"
	"\t\twhile IFS= read -r f; do\n"
	"\t\t\t[[ -d $f || $f == *.yaml || $f == *.yml || $f == *.json ]] && COMPREPLY+=(\"$f\")\n"
	"\t\tdone < <(compgen -f -- \"$cur\") ;;\n"
	"\t*)\n"
	"\t\tCOMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
	"\tesac\n"
	"\treturn 0\n"
	"}\n"
	"\n"
	"complete -o filenames -F _trainctl trainctl\n";

static const char zsh_script[] =
	"#compdef trainctl\n"
	"# zsh completion for trainctl: `trainctl completion zsh` prints it.\n"
	"#   in ~/.zshrc, after compinit:  source <(trainctl completion zsh)\n"
	"#   or once:  trainctl completion zsh > \"${fpath[1]}/_trainctl\"\n"
	"# Options come from `trainctl COMMAND --help`, job ids and names from\n"
	"# `trainctl ps -a --format csv -o id,name` (the server's when one is set).\n"
	"\n"
	"_trainctl_jobs() {\n"
	"\t${words[1]} ps -a --format csv -o id,name 2>/dev/null | tail -n +2 | tr ',' '\\n' | awk '!seen[$0]++'\n"
	"}\n"
	"\n"
	"_trainctl() {\n"
	"\tlocal -a cmds opts jobs\n"
	"\tcmds=(@ZSH_COMMANDS@)\n"
	"\tif (( CURRENT == 2 )); then\n"
	"\t\t_describe -t commands 'trainctl command' cmds\n"
	"\t\treturn\n"
	"\tfi\n"
	"\tlocal cmd=${words[2]} cur=${words[CURRENT]} prev=${words[CURRENT-1]} i\n"
	"\t# after --: the command to run, then its arguments\n"
	"\tfor (( i = 3; i < CURRENT; i++ )); do\n"
	"\t\tif [[ ${words[i]} == -- ]]; then\n"
	"\t\t\tif (( i + 1 == CURRENT )); then\n"
	"\t\t\t\t_command_names -e\n"
	"\t\t\telse\n"
	"\t\t\t\t_files\n"
	"\t\t\tfi\n"
	"\t\t\treturn\n"
	"\t\tfi\n"
	"\tdone\n"
	"\tcase $prev in\n"
	"\t--resume)\n"
	"\t\tif [[ $cmd == run ]]; then\n"
	"\t\t\tjobs=(${(f)\"$(_trainctl_jobs)\"})\n"
	"\t\t\tcompadd -a jobs\n"
	"\t\t\treturn\n"
	"\t\tfi ;;\n"
	"\t--backend) compadd local slurm; return ;;\n"
	"\t--format) compadd table csv json; return ;;\n"
	"\t-d|--device) compadd cpu gpu npu; return ;;\n"
	"\t--*)\n"
	"\t\t# an option with a value (--name NAME, --set KEY=VALUE): nothing to offer\n"
	"\t\tif ${words[1]} $cmd --help 2>&1 | grep -qE -- \"${prev}[ =][A-Z]\"; then\n"
	"\t\t\treturn\n"
	"\t\tfi ;;\n"
	"\tesac\n"
	"\tif [[ $cur == -* ]]; then\n"
	"\t\topts=(${(f)\"$(${words[1]} $cmd --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)\"} --help)\n"
	"\t\tcompadd -a opts\n"
	"\t\treturn\n"
	"\tfi\n"
	"\tcase $cmd in\n"
	"\tshow|logs|metrics|export|report|compare|stop|pause|resume|clone|delete|endpoints|exec|ssh)\n"
	"\t\tjobs=(${(f)\"$(_trainctl_jobs)\"})\n"
	"\t\tcompadd -a jobs ;;\n"
	"\tcompletion) compadd bash zsh ;;\n"
	"\trun|submit|sweep) _files -g '*.(yaml|yml|json)' ;;\n"
	"\t*) _files ;;\n"
	"\tesac\n"
	"}\n"
	"\n"
	"if [[ $funcstack[1] == _trainctl ]]; then\n"
	"\t_trainctl \"$@\"\n"
	"else\n"
	"\tcompdef _trainctl trainctl\n"
	"fi\n";

static void bash_word(void *arg, const char *name, const char *help)
{
	(void)help;
	int *n = arg;
	printf("%s%s", (*n)++ ? " " : "", name);
}

/* 'name:help', quoted for zsh */
static void zsh_word(void *arg, const char *name, const char *help)
{
	int *n = arg;
	printf("%s'%s:", (*n)++ ? " " : "", name);
	for (const char *c = help; *c; c++)
		if (*c == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*c);
	putchar('\'');
}

/* The script with its @...@ placeholder replaced by the commands. */
static void print_script(const char *script, const char *mark,
			 void (*word)(void *arg, const char *name, const char *help))
{
	const char *at = strstr(script, mark);
	int n = 0;
	fwrite(script, 1, (size_t)(at - script), stdout);
	cmd_each(word, &n);
	fputs(at + strlen(mark), stdout);
}

int cmd_completion(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	(void)ctx;
	if (argc == 2 && !strcmp(argv[1], "bash")) {
		print_script(bash_script, "@COMMANDS@", bash_word);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "zsh")) {
		print_script(zsh_script, "@ZSH_COMMANDS@", zsh_word);
		return 0;
	}
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs("usage: trainctl completion bash|zsh\n"
		      "\nPrints the shell's completion script: commands, options, job ids and names.\n"
		      "  bash: source <(trainctl completion bash)   (in ~/.bashrc)\n"
		      "  zsh:  source <(trainctl completion zsh)    (in ~/.zshrc, after compinit)\n",
		      stdout);
		return 0;
	}
	return tc_error(err, TC_EUSAGE, "completion: give bash or zsh");
}
