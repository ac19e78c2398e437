/* score_mod.h - a user's score_mod in MHA kernels: its CUDA C source compiled
 * by NVRTC (opened with dlopen, so nothing needs it until a mod is asked for),
 * the compiled function read back from NVRTC's PTX, and its call sites.
 *
 * The contract (fa4.h): the source defines
 *   __device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)
 * s is the scaled score softmax_scale * q.k (the descales folded in), b the batch, h the query
 * head, q the query row and k the key column in global coordinates, aux the caller's pointer.
 * The kernel calls it on every score of a KV tile before the mask, with q and k clamped into
 * the problem (a score outside is masked afterwards), so a mod may index aux with them.
 *
 * How the kernel reaches it (ScoreModLink, env FA4GEN_SCORE_MOD_LINK):
 *   splice  the generator copies the function's instructions into every call site, its
 *           registers declared once and its labels renamed per site: straight-line code,
 *           nothing for ptxas to decide (the default; the simulator runs this form)
 *   call    the function is spliced into the module as a .func and called
 *   link    the module declares it .extern; nvJitLink links NVRTC's PTX in (a real call)
 */
#ifndef FA4GEN_SCORE_MOD_H
#define FA4GEN_SCORE_MOD_H

#include "fa4gen.h"

typedef enum { MOD_SPLICE, MOD_CALL, MOD_LINK, MOD_LINK_COUNT } ScoreModLink;
extern const char *const score_mod_link_name[MOD_LINK_COUNT];
/* FA4GEN_SCORE_MOD_LINK (splice, call or link; unset = splice); -1 with a sentence for another value. */
int score_mod_link_from_env(ScoreModLink *out, char *err, size_t n);

/* The name the wrapper gives the user's function (extern "C"): the symbol the kernel calls. */
#define SCORE_MOD_SYMBOL "fa4_score_mod"

/* FNV-1a 64 of the source text, never 0 (0 means "no mod" in Config.score_mod). */
uint64_t score_mod_hash(const char *src);

/* The source before NVRTC sees it: 0, or -1 with "line N: ..." in err when it names another file
 * (#include, #include_next, #import, #embed, __has_include, __has_embed), renumbers its lines
 * (#line) or ends inside a comment or raw string (which would swallow the wrapper). A lexer that
 * knows line splices, comments, literals and raw strings finds them, wherever they stand. */
int score_mod_check_source(const char *src, char *err, size_t n);
/* NVRTC's log of src, for the user (malloc'd; NULL when out of memory): each diagnostic as
 * "line N: <message>" and the user's line N (cut), one in the wrapper named as such; NVRTC's own
 * echo of what it read is dropped, and the text is capped. */
char *score_mod_map_log(const char *src, const char *log);

/* NVRTC, opened per call (RTLD_NODELETE keeps it mapped): its version, "nvrtc-13.0". */
enum { MOD_OK = 0, MOD_NO_NVRTC = -2, MOD_COMPILE_ERROR = -1 };
int score_mod_nvrtc_version(char *buf, size_t n, char *err, size_t en);
/* The source (with the extern "C" wrapper appended) -> PTX for target t (malloc'd). A source
 * score_mod_check_source refuses is MOD_COMPILE_ERROR with the reason in err and no log, before
 * NVRTC is opened. On MOD_COMPILE_ERROR *log holds NVRTC's log as score_mod_map_log gives it
 * (malloc'd, lines joined by '\n'); on MOD_NO_NVRTC err says what was tried. */
int score_mod_compile(const char *src, const Target *t, char **ptx, char **log, char *err, size_t en);

/* The wrapped function read from NVRTC's PTX: its register declarations, body lines and the
 * module-level declarations it uses. */
enum { MOD_MAX_REGS = 16, MOD_MAX_LINES = 4096, MOD_MAX_LABELS = 64 };
typedef struct ScoreMod {
    ScoreModLink link;
    const char *ptx;                 /* NVRTC's module text (not owned) */
    struct { char type[16], name[16]; int count; } regs[MOD_MAX_REGS];
    int n_regs;
    char *body;                      /* the body's instruction lines, one per line (owned) */
    char labels[MOD_MAX_LABELS][32]; /* labels the body defines (renamed per call site) */
    int n_labels;
    char *func;                      /* the whole .func text, for MOD_CALL (owned) */
    char *globals;                   /* module-level .global/.const declarations (owned) */
    int sites;                       /* call sites emitted so far (label suffixes) */
} ScoreMod;

/* Read fa4_score_mod out of NVRTC's PTX; -1 with a sentence when it has a form the splice
 * cannot take (it calls another function, uses local memory, an unknown parameter load). */
int score_mod_parse(const char *ptx, ScoreModLink link, ScoreMod *m, char *err, size_t n);
void score_mod_free(ScoreMod *m);

/* Module-level text before the entry: the globals, plus the .func (call) or its .extern
 * declaration (link). */
void score_mod_module_text(const ScoreMod *m, Buf *out);

/* x = score_mod(x * %mod_scale, b, h, q, k, %mod_aux), in the form m->link names. */
void score_mod_site(Emit *e, Reg x, Reg b, Reg h, Reg q, Reg k);

#endif
