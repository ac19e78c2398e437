/* cli_kernel.h - the fa4gen command line's kernel commands and the pieces the whole CLI shares
 * (gen/cli_kernel.c): one-line messages, files by name, option parsing, atomic writes, emit/explain. */
#ifndef FA4_CLI_KERNEL_H
#define FA4_CLI_KERNEL_H

#include <sys/types.h>

#include "cli_predict.h"
#include "fa4gen.h"

typedef struct {
    Config cfg;
    ConfigGiven given;  /* the fields --config and the flags gave, and how (conflicts, unread keys) */
    char *mod_src;      /* --score-mod FILE's text (owned) */
    const char *mod_name;
    const char *out;    /* -o FILE; NULL: stdout */
    const char *bundle_dir;
    int json;
    PredictArgs predict; /* explain --predict GPU and its shape */
} Cli;

/* One line on stderr, "fa4gen: ...": control and non-ASCII bytes of what it echoes become \xNN. */
void say(const char *fmt, ...) FA4_PRINTF(1, 2);
/* say("%s", msg); returns 2 (invalid input). */
int invalid(const char *msg);

/* What a path that is not a regular file is ("a directory", "a FIFO", ...), for the refusal. */
const char *file_kind(mode_t m);
/* An input named on the command line, opened for reading (a regular file only; a FIFO never blocks):
 * the fd, or -1 after one line with the exit status in *rc (missing_rc when it cannot be opened). */
int open_input(const char *what, const char *name, int missing_rc, int *rc);
/* An output path, checked before anything is made: a new name or a regular file (or a link to one). */
int check_output(const char *what, const char *path, const char *stdout_hint);

/* argv with every --opt=value split into --opt and value, so both spellings reach one parser.
 * Only arguments where an option stands are split (a value may hold '='). The vector and the
 * split names are malloc'd in *keep (free with free_args); NULL after a message. */
typedef struct { char **argv; char **names; int argc, n_names; } Args;
void free_args(Args *a);
int split_args(int argc, char **argv, Args *out);

/* What a command takes besides the config flags. */
enum { USE_OUT = 1, USE_JSON = 2, USE_DIR = 4, USE_CONFIG = 8 };

/* The options of cmd from argv[first] on into cli (config_init first): 0, or the exit status after a message. */
int parse_flags(Cli *cli, int argc, char **argv, int first, int uses, const char *cmd);

mode_t current_umask(void);
/* data to path through a temporary file beside it and a rename (a symlink's target is replaced). */
int write_atomic(const char *path, const char *data, size_t len);

/* The PTX of cli's config (--score-mod compiled and spliced in) and its plan; 0 or the exit status. */
int generate(const Cli *cli, Plan *plan, char **ptx, size_t *len);
/* The parsed kernel command (kind >= 0) or explain (kind -1, explain_kind or NULL): emit or explain. */
int run_cli(Cli *cli, const char *cmd, int kind, const char *explain_kind);

#endif
