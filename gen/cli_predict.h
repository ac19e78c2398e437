/* cli_predict.h - `fa4gen explain --predict GPU`: the config's predicted time on a GPU, from the
 * simulator's timing mode (tests/sim/TIMING.md), run as its own program (gen/cli_predict.c). */
#ifndef FA4_CLI_PREDICT_H
#define FA4_CLI_PREDICT_H

#include <stddef.h>
#include <stdio.h>

#include "fa4gen.h"

/* --predict and the shape it is predicted for (0: the default of the kind, cli_usage.c's help). */
typedef struct {
    const char *gpu;  /* h100 | h200 | b200 | b300 | a table file; NULL: no prediction */
    int batch, heads, seqlen_q, seqlen_k, topk, samples;
    const char *shape_flag; /* the first shape flag given (refused without --predict) */
    int json;               /* --json: the prediction alone, as one JSON object (not the plan) */
} PredictArgs;

/* The target of a GPU --predict names (h100, h200: sm90a; b200: sm100a; b300: sm103a), or -1 (a table file). */
int predict_gpu_target(const char *gpu);

/* 1 when flag a is one of --predict's (its value v parsed into p), 0 when it is not, -1 after a
 * message in err (a bad value). */
int predict_flag(PredictArgs *p, const char *a, const char *v, char *err, size_t n);

/* What can refuse before anything is printed: a config or shape the simulator's case cannot pass, a
 * GPU of another target, the simulator not built. 0, or the exit status with a message in err. */
int predict_check(const PredictArgs *p, const Plan *plan, char *err, size_t n);
/* Runs the simulator's timecase on plan's config for p's shape and prints the prediction to out.
 * 0, or the exit status (1: the simulator is missing or failed, 2: a config or shape it cannot
 * predict) with a message in err. */
int predict_run(const PredictArgs *p, const Plan *plan, FILE *out, char *err, size_t n);

#endif
