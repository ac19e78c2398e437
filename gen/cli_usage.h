/* cli_usage.h - the fa4gen command line's help texts (gen/cli_usage.c). */
#ifndef FA4_CLI_USAGE_H
#define FA4_CLI_USAGE_H

/* `fa4gen --help` (on stderr when fa4gen is given no command) and `fa4gen bundle --help`. */
extern const char usage_top[], usage_bundle[];

/* The help of a command: `fa4gen KIND --help`, `fa4gen explain [KIND] --help` (on stdout). */
void help_of(const char *cmd, const char *explain_kind);

#endif
