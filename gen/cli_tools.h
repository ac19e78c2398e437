/* cli_tools.h - the CLI's commands that run the runtime (libfa4rt) rather than the generator alone:
 * `fa4gen configs` (the configs a workload needs, for `fa4gen bundle -`) and `fa4gen cache` (see,
 * size and empty the kernel cache). Neither needs a GPU or its driver. The CLI's, not the library's. */
#ifndef FA4_CLI_TOOLS_H
#define FA4_CLI_TOOLS_H

#include "fa4gen.h"

/* One line on stderr, "fa4gen: ..." (cli_kernel.c's say). */
typedef void (*CliSay)(const char *fmt, ...) FA4_PRINTF(1, 2);

/* fa4gen configs ... / fa4gen cache ...: the exit status (0 ok, 1 failure, 2 invalid input). argv[1] is
 * the command. */
int cli_configs(int argc, char **argv, CliSay say);
int cli_cache(int argc, char **argv, CliSay say);

/* The options of configs that take no value (the argument splitter must know them). */
int cli_configs_flag_alone(const char *a);

/* Each command's help, and the options it lists (tests/unit/test_cli.c checks they agree). */
extern const char cli_usage_configs[], cli_usage_cache[];
extern const char *const cli_configs_options[];
extern const char *const cli_cache_subcommands[];

#endif
