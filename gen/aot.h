/* aot.h - `fa4gen bundle ... -o FILE.c`: configs -> cubins + PTX in fatbins -> a C source
 * holding them and a table the runtime searches before it generates anything (fa4.h,
 * "AOT bundles"). The CLI's, not the library's: it runs the toolkit's ptxas and fatbinary. */
#ifndef FA4_AOT_H
#define FA4_AOT_H

#include "fa4gen.h"

typedef struct {
    const char *text;  /* canonical config, or any subset of its key=value words */
    const char *from;  /* where it was given, for messages: the list's name or "--config" */
    int line;          /* the list's line number; 0 for --config */
} AotConfig;

typedef struct {
    const AotConfig *configs;
    int n_configs;
    TargetId targets[TARGET_COUNT]; /* each config is compiled for each of these ... */
    int n_targets;                  /* ... or, when 0, for the target it names */
    const char *name;               /* C identifier of the bundle */
    int jobs;                       /* configs compiled at once */
    void (*say)(const char *fmt, ...) FA4_PRINTF(1, 2); /* one line on stderr */
} AotRequest;

/* One config text (a list line or a --config): parsed with its words checked against the kernel
 * they make (config_check_given: a key it lacks, a field given twice, a conflict), target
 * replaced when target >= 0, then planned. 0, or -1 with one sentence in err. */
int aot_plan_text(const char *text, int target, Plan *p, char *err, size_t n);

/* Compile every config and return the C source (malloc'd) in *c_text. Returns the exit
 * status: 0, 1 (a tool or I/O failed) or 2 (invalid input, one line said). Progress goes to
 * stderr, one line per finished kernel. */
int aot_bundle(const AotRequest *r, char **c_text, size_t *len);

#endif
