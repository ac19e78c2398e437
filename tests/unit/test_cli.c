/* test_cli.c - the CLI contract of issues 26 (items 3a, 3c, 3d, 6) and 28 (item 5), each found bug
 * as a regression test: score_mod sources that name other files, NVRTC's messages, the PTX
 * function locator, paths that are not regular files, conflicting or unread flags, bundle lists
 * and folders, help and --opt=value. Most cases run build/fa4gen (FA4GEN) in a shell; the bundle
 * folder's all-or-nothing move is called in process (gen/main.c is included, its main renamed, and
 * gen/cli_kernel.c, for the flag table). */
#define main fa4gen_main
#include "../../gen/main.c"
#undef main
#include "../../gen/cli_kernel.c"

#include "testutil.h"

#include <sys/wait.h>

#include "fa4.h"

static const char *exe(void) { return getenv("FA4GEN") ? getenv("FA4GEN") : "build/fa4gen"; }

/* fa4gen ARGS through sh (ARGS may hold quotes); its stderr in *err (stdout dropped), or its
 * stdout when want_stdout. The exit status (124: it ran 60 s, as on a FIFO it should not block on). */
static int t_run(const char *args, char **text, int want_stdout)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, want_stdout ? "timeout 60 %s %s 2>/dev/null" : "timeout 60 %s %s 2>&1 >/dev/null", exe(),
             args);
    return run_capture(cmd, text);
}

static void t_one_line(const char *out)
{
    size_t n = strlen(out);
    if (!n || out[n - 1] != '\n' || strchr(out, '\n') != out + n - 1) fail_msg("not one line: '%s'", out);
}

/* fa4gen ARGS exits 2 with one line holding every needle (NULL-terminated). */
static void t_refused(const char *args, ...)
{
    char *err = NULL;
    int rc = t_run(args, &err, 0);
    if (rc != 2) fail_msg("'%s': exit %d (want 2): %s", args, rc, err);
    t_one_line(err);
    va_list ap;
    va_start(ap, args);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(err, needle)) fail_msg("'%s': '%s' lacks '%s'", args, err, needle);
    va_end(ap);
    free(err);
}

static void t_write(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

static char *t_listing(const char *dir)
{
    char ls[1100], *listing = NULL;
    snprintf(ls, sizeof ls, "ls -A %s", dir);
    run_capture(ls, &listing);
    return listing;
}

/* ---- issue 26 3(a): a score_mod names no other file ---- */

static void test_source_directives(void **state)
{
    (void)state;
    const struct { const char *src; int line; } refused[] = {
        {"#include \"/etc/passwd\"\n", 1},
        {"__device__ float x;\n  #  include </proc/self/environ>\n", 2},
        {"\n\n%:include \"/etc/passwd\"\n", 3},                   /* digraph */
        {"#/* a comment */include \"/etc/passwd\"\n", 1},
        {"#\\\ninclude \"/etc/passwd\"\n", 1},                    /* a line splice inside the name's line */
        {"#inc\\\nlude \"/etc/passwd\"\n", 1},                    /* ... and inside the name */
        {"/* a comment\n over lines */ #include \"/etc/passwd\"\n", 2}, /* still the line's first token */
        {"#define F \"/etc/passwd\"\n#include F\n", 2},           /* reached through a macro */
        {"#include_next <x>\n", 1},
        {"#import \"x\"\n", 1},
        {"#embed \"/etc/passwd\"\n", 1},
        {"int a;\n#line 1 \"/etc/passwd\"\n", 2},
        {"#if __has_include(\"/etc/shadow\")\n#endif\n", 1},
        {"#define H __has_include_next\n", 1},
        {"x = 1'000'000;\n#include \"y\"\n", 2},                  /* digit separators hold no literal */
        {"s = \"unterminated\n#include \"y\"\n", 2},              /* a string ends at its line's end */
        {"c = '\\'';\n#include \"y\"\n", 2},
        {"r = R\"d(\n)\" not the end\n)d\";\n#include \"y\"\n", 4},
        {"/* never closed\n", 1},
        {"r = R\"x(never closed\n", 1},
    };
    const char *accepted[] = {
        "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux) { return s; }\n",
        "const char *s = \"#include <x>\";\n",
        "// #include \"/etc/passwd\"\n",
        "/* #include \"/etc/passwd\" */\n",
        "const char *r = R\"d(\n#include \"/etc/passwd\"\n)d\";\n",
        "const char *r = u8R\"(\n#line 3\n)\";\n",
        "char c = '#';\n",
        "int x /*\n*/ ; float y = 1.0e+5f, z = .5e-3f;\n",
        "#define NOT_INCLUDE 1\n#pragma unroll\n#if 0\n#endif\n",
        "int include = 1; int line = include;\n",
    };
    char err[256];
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char want[32];
        if (!score_mod_check_source(refused[i].src, err, sizeof err)) fail_msg("accepted: '%s'", refused[i].src);
        snprintf(want, sizeof want, "line %d: ", refused[i].line);
        if (strncmp(err, want, strlen(want))) fail_msg("'%s': '%s' does not start with '%s'", refused[i].src, err, want);
        if (strchr(err, '\n')) fail_msg("'%s': more than one line", err);
    }
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++)
        if (score_mod_check_source(accepted[i], err, sizeof err)) fail_msg("refused '%s': %s", accepted[i], err);
    /* the runtime's path: refused before NVRTC is opened, so with no NVRTC too, and no log */
    char *ptx = NULL, *log = NULL;
    setenv("FA4GEN_NO_NVRTC", "1", 1);
    assert_int_equal(score_mod_compile("#include \"/proc/self/environ\"\n", target_get(TARGET_SM90A), &ptx, &log, err,
                                       sizeof err), MOD_COMPILE_ERROR);
    unsetenv("FA4GEN_NO_NVRTC");
    assert_null(log);
    assert_non_null(strstr(err, "score_mod: line 1: '#include' is not allowed"));
}

/* The CLI: one line naming the source's line, none of the file's text, for explain (no NVRTC) and mha. */
static void test_cli_mod_includes(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4cli-inc-XXXXXX", path[128], args[512], *err = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/evil.cu", dir);
    const char *src = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n{ return s; }\n"
                      "#include \"/proc/self/environ\"\n";
    t_write(path, src, strlen(src));
    const char *cmds[] = {"explain --target sm90a --depth 128 --score-mod %s",
                          "mha --target sm90a --depth 128 --score-mod %s -o %s.ptx"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, cmds[i], path, path);
        assert_int_equal(t_run(args, &err, 0), 2);
        t_one_line(err);
        if (!strstr(err, "line 3: '#include' is not allowed") || strstr(err, "PATH=") || strstr(err, "HOME="))
            fail_msg("%s", err);
        free(err);
    }
    snprintf(args, sizeof args, "%s.ptx", path);
    assert_int_equal(access(args, F_OK), -1);
    remove_tree(dir);
}

/* NVRTC's log as the user sees it: line by line, the user's own line numbers and lines, the
 * wrapper named, NVRTC's echo of what it read dropped, the length capped. */
static void test_nvrtc_log_map(void **state)
{
    (void)state;
    const char *src = "__device__ float helper(float x) { return x; }\n"
                      "__device__ float score_mod(float s) { return s + nope; }\n";
    const char *log = "score_mod.cu(2): error: identifier \"nope\" is undefined\n"
                      "  SECRET=what NVRTC echoed\n"
                      "                                                   ^\n\n"
                      "score_mod.cu(5): error: too many arguments in function call\n"
                      "  { return score_mod(s, b, h, q, k, aux); }\n\n"
                      "/etc/passwd(1): error: this declaration has no storage class or type specifier\n"
                      "  root:x:0:0:root:/root:/bin/bash\n"
                      "          detected during instantiation of \"T f(T) [with T=float]\" at line 2\n"
                      "2 errors detected in the compilation of \"score_mod.cu\".\n";
    char *m = score_mod_map_log(src, log);
    assert_non_null(m);
    const char *want = "line 2: error: identifier \"nope\" is undefined\n"
                       "      2 | __device__ float score_mod(float s) { return s + nope; }\n"
                       "in fa4gen's wrapper after line 2: error: too many arguments in function call\n"
                       "  (it calls score_mod(s, b, h, q, k, aux) as float score_mod(float, int, int, int, int, const void *))\n"
                       "in another file: error: this declaration has no storage class or type specifier\n"
                       "  (detected during instantiation of \"T f(T) [with T=float]\" at line 2)";
    assert_string_equal(m, want);
    assert_null(strstr(m, "SECRET"));
    assert_null(strstr(m, "root:"));
    assert_null(strchr(m, '|') == strstr(m, "2 | __dev") + 2 ? NULL : "a '|' join");
    free(m);
    /* many diagnostics and long lines: capped */
    char *big = malloc(200000), *line = malloc(5000);
    size_t o = 0;
    memset(line, 'x', 4000);
    line[4000] = 0;
    snprintf(big, 200000, "%s\n", line);
    for (int i = 0; i < 40; i++) o += (size_t)snprintf(big + 4001 + o, 200000 - 4001 - o, "score_mod.cu(1): error: e%d %s\n", i, line);
    m = score_mod_map_log(line, big + 4001);
    assert_non_null(m);
    assert_true(strlen(m) <= 4096);
    assert_non_null(strstr(m, "more diagnostics not shown)"));
    for (char *l = m; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        assert_true(strcspn(l, "\n") <= 256);
    free(m);
    free(big);
    free(line);
}

/* ---- issue 26 3(c): braces in comments and strings of NVRTC's PTX ---- */

static const char brace_ptx[] =
    ".version 9.0\n.target sm_90a\n.address_size 64\n\n"
    "// fa4_score_mod( { in a comment before anything\n"
    ".extern .func (.param .b32 r) fa4_score_mod(.param .b32 a0, .param .b32 a1, .param .b32 a2, .param .b32 a3, "
    ".param .b32 a4, .param .b64 a5);\n"
    ".visible .func  (.param .b32 func_retval0) helper(\n\t.param .b32 helper_param_0\n)\n{\n"
    "\t.reg .f32 \t%f<2>;\n\t// { fa4_score_mod( {\n\tret;\n\n}\n"
    "/* .global .f32 fake; } */\n"
    "\t// .globl\tfa4_score_mod\n"
    ".visible .func  (.param .b32 func_retval0) fa4_score_mod(\n"
    "\t.param .b32 fa4_score_mod_param_0,\n\t.param .b32 fa4_score_mod_param_1,\n"
    "\t.param .b32 fa4_score_mod_param_2,\n\t.param .b32 fa4_score_mod_param_3,\n"
    "\t.param .b32 fa4_score_mod_param_4,\n\t.param .b64 fa4_score_mod_param_5\n)\n{\n"
    "\t.reg .f32 \t%f<3>;\n\n"
    "\tld.param.f32 \t%f1, [fa4_score_mod_param_0];\n"
    "\t// begin inline asm\n\t// }\n\t// end inline asm\n"
    "\t/* } { */ mul.f32 \t%f2, /* } */ %f1, 0f40000000;\n"
    "\t/* }\n\t} */\n"
    "\tst.param.f32 \t[func_retval0+0], %f2;\n"
    "\tret;\n\n}\n";

static void test_ptx_locator(void **state)
{
    (void)state;
    ScoreMod m;
    char err[256];
    assert_int_equal(score_mod_parse(brace_ptx, MOD_SPLICE, &m, err, sizeof err), 0);
    assert_string_equal(m.body, "ld.param.f32 %f1, [fa4_score_mod_param_0];\nmul.f32 %f2, %f1, 0f40000000;\n"
                                "st.param.f32 [func_retval0+0], %f2;\nret;\n");
    assert_non_null(strstr(m.func, ".visible .func  (.param .b32 func_retval0) fa4_score_mod(") == m.func ? m.func : NULL);
    assert_null(m.globals); /* the .global inside a comment is not module data */
    score_mod_free(&m);
}

/* The mod through NVRTC: its PTX holds "// }" in the body; main's brace counter ended the
 * function there and spliced a body with no return (the score was never written). */
static void test_cli_mod_asm_brace(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4cli-asm-XXXXXX", path[128], args[512], *ptx = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/brace.cu", dir);
    const char *src = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                      "{ asm volatile(\"// }\"); return s * 3.0f; }\n";
    t_write(path, src, strlen(src));
    snprintf(args, sizeof args, "mha --target sm90a --depth 64 --score-mod %s", path);
    int rc = t_run(args, &ptx, 1);
    if (rc == 1) { /* no NVRTC here */
        free(ptx);
        remove_tree(dir);
        skip();
    }
    assert_int_equal(rc, 0);
    /* every site scales by 3 and writes the result back into the score */
    int sites = 0, writes = 0;
    for (const char *p = ptx; (p = strstr(p, "mul.f32 %mod_f2, %mod_f1, 0f40400000;\n")); p++) {
        const char *next = strchr(p, '\n') + 1;
        sites++;
        writes += !strncmp(next + strspn(next, " "), "mov.b32 %s", 10) && strstr(next, ", %mod_f2;\n") == strchr(next, ',');
    }
    if (sites == 0 || writes != sites) fail_msg("%d scaled sites, %d written back", sites, writes);
    free(ptx);
    remove_tree(dir);
}

/* ---- issue 26 3(d): paths that are not regular files ---- */

static void test_cli_paths(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4cli-path-XXXXXX", a[2048], fifo[128], list[128];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(list, sizeof list, "%s/list", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    t_write(list, "mha target=sm90a dtype=bf16 qk=64 ov=64\n", 40);
    /* inputs: never blocks on a FIFO (timeout 20 would exit 124) */
    const char *kinds[][2] = {{fifo, "a FIFO"}, {dir, "a directory"}, {"/dev/null", "a character device"}};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "explain --target sm90a --depth 64 --score-mod %s", kinds[i][0]);
        t_refused(a, "--score-mod: '", kinds[i][0], kinds[i][1], "give a regular file", NULL);
        snprintf(a, sizeof a, "bundle %s -d %s/out", kinds[i][0], dir);
        t_refused(a, "bundle: the list: '", kinds[i][1], NULL);
        snprintf(a, sizeof a, "bundle %s -o %s/k.c", kinds[i][0], dir);
        t_refused(a, "bundle: the list: '", kinds[i][1], NULL);
        snprintf(a, sizeof a, "bundle %s -o %s", list, kinds[i][0]);
        t_refused(a, "bundle: -o: '", kinds[i][1], NULL);
    }
    char *out = NULL;
    snprintf(a, sizeof a, "sh -c 'timeout 20 %s explain --target sm90a --depth 64 --score-mod %s; echo $?' 2>/dev/null",
             exe(), fifo);
    run_capture(a, &out);
    assert_string_equal(out, "2\n");
    free(out);
    /* empty names, and - where it is not stdout */
    t_refused("mha --target sm90a --depth 64 -o ''", "-o: the file name is empty", NULL);
    snprintf(a, sizeof a, "bundle %s -d ''", list);
    t_refused(a, "-d: the directory name is empty", NULL);
    snprintf(a, sizeof a, "bundle %s -o ''", list);
    t_refused(a, "bundle: -o: the file name is empty", NULL);
    snprintf(a, sizeof a, "bundle %s -o -", list);
    t_refused(a, "bundle: -o '-'", "give FILE.c", NULL);
    t_refused("explain --target sm90a --depth 64 --score-mod ''", "--score-mod: the file name is empty", NULL);
    snprintf(a, sizeof a, "bundle '' -d %s/out", dir);
    t_refused(a, "bundle: the list: the file name is empty", NULL);
    /* -d onto a FIFO; nothing was made anywhere */
    snprintf(a, sizeof a, "bundle %s -d %s", list, fifo);
    t_refused(a, "bundle: -d '", "is a FIFO", NULL);
    char *ls = t_listing(dir);
    assert_string_equal(ls, "fifo\nlist\n");
    free(ls);
    remove_tree(dir);
}

/* bundle -d into a folder: a kernel's name taken by a directory is refused before anything is
 * written (it left the earlier kernels behind); a move that fails half-way puts back what was there. */
static void test_bundle_dir_all_or_nothing(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4cli-dir-XXXXXX", a[1024], list[128], out[128], *text = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(list, sizeof list, "%s/list", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    const char *two = "mha target=sm90a dtype=bf16 qk=64 ov=64\nmha target=sm90a dtype=bf16 qk=128 ov=128\n";
    t_write(list, two, strlen(two));
    snprintf(a, sizeof a, "bundle %s -d %s", list, out);
    assert_int_equal(t_run(a, &text, 1), 0);
    free(text);
    /* the second kernel's name is now a directory; the first file is old */
    char first[300], second[300], cmd[1400];
    char *names = t_listing(out);
    assert_int_equal(sscanf(names, "%299s %299s", first, second), 2);
    free(names);
    snprintf(cmd, sizeof cmd, "cd %s && echo old > %s && rm %s && mkdir %s", out, first, second, second);
    assert_int_equal(system(cmd), 0);
    t_refused(a, "holds '", second, "which is a directory", NULL);
    snprintf(cmd, sizeof cmd, "cat %s/%s", out, first);
    assert_int_equal(run_capture(cmd, &text), 0);
    assert_string_equal(text, "old\n"); /* untouched */
    free(text);
    names = t_listing(out);
    char want[700];
    snprintf(want, sizeof want, "%s\n%s\n", first, second);
    assert_string_equal(names, want); /* and no temporary folder */
    free(names);
    /* in process: move_into with the second destination a directory fails at it and puts the
     * first file back as it was */
    Plan *plans[2];
    char err[512], tmp[200], path[400];
    for (int i = 0; i < 2; i++) {
        plans[i] = malloc(sizeof *plans[i]);
        assert_int_equal(aot_plan_text(i ? "mha target=sm90a dtype=bf16 qk=128 ov=128" : "mha target=sm90a dtype=bf16 qk=64 ov=64",
                                       -1, plans[i], err, sizeof err), 0);
    }
    snprintf(tmp, sizeof tmp, "%s/tmpXXXXXX", dir);
    assert_non_null(mkdtemp(tmp));
    for (int i = 0; i < 2; i++) {
        kernel_path(path, sizeof path, tmp, plans[i], "");
        t_write(path, "new\n", 4);
    }
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    int rc = move_into(tmp, out, plans, 2);
    dup2(saved, 2);
    close(saved), close(null);
    assert_int_equal(rc, 1);
    snprintf(cmd, sizeof cmd, "cat %s/%s", out, first);
    assert_int_equal(run_capture(cmd, &text), 0);
    assert_string_equal(text, "old\n"); /* restored from its link */
    free(text);
    kernel_path(path, sizeof path, tmp, plans[1], "");
    assert_int_equal(access(path, F_OK), 0); /* the one not moved is still in tmp, for remove_dir */
    remove_dir(tmp, plans, 2);
    assert_int_equal(access(tmp, F_OK), -1);
    free(plans[0]), free(plans[1]);
    remove_tree(dir);
}

/* ---- issue 26 item 6: unread flags and conflicts, one line naming both ---- */

static void test_cli_unread_and_conflicts(void **state)
{
    (void)state;
    static const char *const mla100 = "mla-sparse --target sm100a --depth 576";
    const char *unread[][2] = {{"--qtiles 2", "qtiles: '--qtiles 2' is not allowed for mla-sparse on sm100a"},
                               {"--cta 2", "cta: '--cta 2' is not allowed for mla-sparse on sm100a"},
                               {"--rope-split 1", "rope_split: '--rope-split 1' is not allowed"},
                               {"--rope-dtype bf16", "rope_dtype: '--rope-dtype bf16' is not allowed"},
                               {"--pingpong 0", "pingpong: '--pingpong 0' is not allowed"},
                               {"--persistent 1", "persistent: '--persistent 1' is not allowed"},
                               {"--bm 64", "bm: '--bm 64' is not allowed"},
                               {"--sink 0", "sink: '--sink 0' is not allowed"}};
    char a[1024];
    for (size_t i = 0; i < sizeof unread / sizeof unread[0]; i++) {
        snprintf(a, sizeof a, "%s %s", mla100, unread[i][0]);
        t_refused(a, unread[i][1], "its keys:", NULL);
    }
    t_refused("mla-sparse --target sm90a --depth 576 --qtiles 1", "qtiles: '--qtiles 1' is not allowed for mla-sparse on sm90a", NULL);
    t_refused("mla-sparse --target sm100a --qk-depth 576 --ov-depth 576", "ov: '--ov-depth 576'", "uses ov=512", NULL);
    t_refused("mla-sparse --target sm100a --ov-depth 576", "ov: '--ov-depth 576'", "uses ov=512", NULL);
    t_refused("mla-sparse --target sm100a --depth 576 --ov-depth 512", "ov: given twice, as '--depth 576' and '--ov-depth 512'", NULL);
    t_refused("mha --target sm100a --depth 128 --rope-dtype fp16", "rope_dtype: '--rope-dtype fp16'", "rope_split=1", NULL);
    t_refused("mha --target sm90a --depth 128 --rope-dtype bf16", "rope_dtype: '--rope-dtype bf16' is not allowed for mha on sm90a", NULL);
    t_refused("combine --target sm90a --dtype bf16 --ov-depth 128 --rope-dtype fp16", "rope_dtype:", "combine", NULL);
    t_refused("combine --target sm90a --dtype bf16 --depth 128", "qk: '--depth 128' is not allowed for combine", NULL);
    t_refused("mla-sparse --target sm100a --cta-group 2 --q-smem-depth 576 --depth 512", "q_smem_depth: 576", "qk 512", NULL);
    t_refused("explain mla-sparse --target sm100a --cta-group 2 --q-tmem-depth 600 --depth 576", "q_tmem_depth: 600", NULL);
    t_refused("combine --target sm90a --dtype bf16 --ov-depth 128 --config 'mha target=sm90a qk=128 ov=128'",
              "kind: --config names mha but the command is combine", NULL);
    t_refused("explain combine --config 'mha target=sm90a qk=128 ov=128'", "kind: --config names mha", NULL);
    t_refused("mha --config 'mha target=sm90a qk=128 ov=128 mask=causal mask=none'",
              "mask: given twice, as 'mask=causal' and 'mask=none'", NULL);
    t_refused("mha --config 'mha target=sm90a qk=128' --config 'mha target=sm90a qk=64'",
              "--config: given twice ('mha target=sm90a qk=128' and 'mha target=sm90a qk=64')", NULL);
    t_refused("mha --target sm90a --depth 128 --split 0 --cluster 16", "split: '--split 0' conflicts with '--cluster 16'", NULL);
    t_refused("mha --config 'mha target=sm90a qk=128 ov=128 cluster=4' --split 0", "'--split 0' conflicts with 'cluster=4'", NULL);
    t_refused("mha --target sm90a --ov-depth 64 --depth 128", "ov: given twice, as '--ov-depth 64' and '--depth 128'", NULL);
    t_refused("mha --target sm90a --depth 128 --depth 64", "depth: given twice, as '--depth 128' and '--depth 64'", NULL);
    t_refused("mha --target sm90a --depth 128 --mask causal --mask=none", "mask: given twice", NULL);
    t_refused("mha --target sm90a --depth 128 -o a.ptx -o b.ptx", "-o: given twice ('a.ptx' and 'b.ptx')", NULL);
    t_refused("mha --target sm90a --depth 128 --bn -0", "bn: '-0' is not allowed", NULL);
    t_refused("mha --target sm90a --depth 0128", "depth: '0128' is not allowed", NULL);
    t_refused("mha --target sm90a --depth 128 --json=1", "--json: takes no value", NULL);
    t_refused("mha --target sm90a --depth 128 stray", "'stray' is not an option; see fa4gen mha --help", NULL);
    /* flags still refine a --config; equal text stays accepted */
    char *x = NULL, *y = NULL;
    assert_int_equal(t_run("explain --config 'mha target=sm90a qk=128 ov=128 mask=causal' --depth 64", &x, 1), 0);
    assert_int_equal(t_run("explain --target sm90a --depth 64 --mask causal", &y, 1), 0);
    assert_string_equal(x, y);
    free(x), free(y);
    /* the refusals are the config's, so a bundle list says them too */
    char dir[] = "/tmp/fa4cli-cfl-XXXXXX", list[128];
    assert_non_null(mkdtemp(dir));
    snprintf(list, sizeof list, "%s/list", dir);
    const char *text = "mha target=sm90a dtype=bf16 qk=64 ov=64\nmla-sparse target=sm100a qk=576 pingpong=0\n";
    t_write(list, text, strlen(text));
    snprintf(a, sizeof a, "bundle %s -d %s/out", list, dir);
    t_refused(a, "line 2: pingpong: 'pingpong=0' is not allowed for mla-sparse on sm100a", NULL);
    snprintf(a, sizeof a, "bundle --config 'mha target=sm90a qk=64 split=0 cluster=2' -o %s/k.c", dir);
    t_refused(a, "bundle: --config 'mha target=sm90a qk=64 split=0 cluster=2': split: 'split=0' conflicts", NULL);
    remove_tree(dir);
}

/* config_check refuses a field set for a kernel that lacks it, however the Config was made. */
static void test_config_unread_fields(void **state)
{
    (void)state;
    Config c;
    char err[512];
    Plan *p = malloc(sizeof *p);
    config_init(&c);
    c.kind = KIND_MLA_SPARSE, c.target = TARGET_SM100A, c.qk_depth = 576, c.pingpong = 1;
    assert_int_equal(plan_make(&c, p, err, sizeof err), -1);
    assert_non_null(strstr(err, "pingpong: 1 is not allowed for mla-sparse on sm100a"));
    config_init(&c);
    c.target = TARGET_SM100A, c.qk_depth = c.ov_depth = 128, c.rope_dtype = DT_FP16;
    assert_int_equal(plan_make(&c, p, err, sizeof err), -1);
    assert_non_null(strstr(err, "rope_dtype: fp16 is not allowed without rope_split=1"));
    /* every canonical key is one its kernel reads (what key_used prints, config_key_applies has) */
    const char *texts[] = {"mha target=sm90a qk=128", "mha target=sm100a qk=192 ov=128 rope_split=1 split=1",
                           "mla-sparse target=sm90a qk=576", "mla-sparse target=sm100a qk=576 tma_store=1",
                           "combine target=sm100a ov=64", "mha target=sm90a qk=128 cluster=5 varlen=1 page=64 mask=causal",
                           "mha target=sm100a qk=64 page=16 sink=1 poly=6"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        ConfigGiven g;
        assert_int_equal(config_parse_given(texts[i], &c, &g, err, sizeof err), 0);
        if (plan_make(&c, p, err, sizeof err)) fail_msg("'%s': %s", texts[i], err);
        Config d;
        assert_int_equal(config_parse_given(p->canonical, &d, &g, err, sizeof err), 0);
        if (config_check_given(&d, &g, err, sizeof err)) fail_msg("'%s': %s", p->canonical, err);
    }
    free(p);
}

/* ---- bundle lists: CR, duplicates with -o ---- */

static void test_bundle_list_line_ends(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4cli-cr-XXXXXX", list[128], a[1024], *lf = NULL, *crlf = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(list, sizeof list, "%s/list", dir);
    const char *ok_lf = "mha target=sm90a dtype=bf16 qk=64 ov=64\n# c\nmha target=sm90a dtype=bf16 qk=128 ov=128\n";
    const char *ok_crlf = "mha target=sm90a dtype=bf16 qk=64 ov=64\r\n# c\r\nmha target=sm90a dtype=bf16 qk=128 ov=128\r\n";
    t_write(list, ok_lf, strlen(ok_lf));
    snprintf(a, sizeof a, "bundle %s -d %s/lf", list, dir);
    assert_int_equal(t_run(a, &lf, 1), 0);
    t_write(list, ok_crlf, strlen(ok_crlf));
    snprintf(a, sizeof a, "bundle %s -d %s/crlf", list, dir);
    assert_int_equal(t_run(a, &crlf, 1), 0);
    free(lf), free(crlf);
    snprintf(a, sizeof a, "%s/lf", dir);
    lf = t_listing(a);
    snprintf(a, sizeof a, "%s/crlf", dir);
    crlf = t_listing(a);
    assert_string_equal(lf, crlf); /* the same two kernels */
    assert_int_equal(strlen(lf), 2 * strlen("fa4_mha_sm90a_0123456789abcdef.ptx\n"));
    free(lf), free(crlf);
    const struct { const char *text; const char *needle; } bad[] = {
        {"mha target=sm90a dtype=bf16 qk=64 ov=64\rmha target=sm90a dtype=bf16 qk=128 ov=128\r", "line 1: holds a carriage return"},
        {"mha target=sm90a dtype=bf16 qk=64 ov=64\n\nmha target=sm90a\r dtype=bf16 qk=128\n", "line 3: holds a carriage return"},
        {"# a comment\r with a CR\n", "line 1: holds a carriage return"},
        {"mha target=sm90a dtype=bf16 qk=64 ov=64\r\r\n", "line 1: holds a carriage return"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t_write(list, bad[i].text, strlen(bad[i].text));
        snprintf(a, sizeof a, "bundle %s -d %s/bad", list, dir);
        t_refused(a, bad[i].needle, "LF or CRLF", NULL);
        snprintf(a, sizeof a, "bundle %s -o %s/bad.c", list, dir);
        t_refused(a, bad[i].needle, NULL);
    }
    char *ls = t_listing(dir);
    assert_string_equal(ls, "crlf\nlf\nlist\n");
    free(ls);
    remove_tree(dir);
}

/* bundle -o reports a kernel named twice (lines, --config, --targets) before any tool runs. */
static void test_bundle_c_duplicates(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4cli-dup-XXXXXX", list[128], a[1400], *err = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(list, sizeof list, "%s/list", dir);
    const char *text = "mha target=sm90a dtype=bf16 qk=128 ov=128\nmha target=sm90a dtype=bf16 qk=128 ov=128 bn=176\n";
    t_write(list, text, strlen(text));
    snprintf(a, sizeof a, "sh -c 'FA4GEN_PTXAS=/bin/false %s bundle %s --config \"mha target=sm90a dtype=bf16 qk=128\" "
             "-o %s/k.c' 2>&1 >/dev/null", exe(), list, dir);
    assert_int_equal(run_capture(a, &err), 1); /* the stand-in ptxas fails */
    if (!strstr(err, "line 1: the same kernel as --config 'mha target=sm90a dtype=bf16 qk=128' (fa4_mha_sm90a_") ||
        !strstr(err, "line 2: the same kernel as --config") || !strstr(err, "compiling 1 kernel,"))
        fail_msg("%s", err);
    free(err);
    snprintf(a, sizeof a, "bundle %s -o %s/k.c --name a --name=b", list, dir);
    t_refused(a, "bundle: --name: given twice ('a' and 'b')", NULL);
    snprintf(a, sizeof a, "bundle %s -o %s/k.c --jobs=0", list, dir);
    t_refused(a, "bundle: --jobs '0'", NULL);
    snprintf(a, sizeof a, "bundle %s --targets=sm90a,sm91 -o %s/k.c", list, dir);
    t_refused(a, "bundle: --targets 'sm90a,sm91'", NULL);
    char *ls = t_listing(dir);
    assert_string_equal(ls, "list\n");
    free(ls);
    remove_tree(dir);
}

/* ---- issue 28 item 5: help and --opt=value ---- */

static void test_cli_help(void **state)
{
    (void)state;
    char *top = NULL, *h[KIND_COUNT] = {0}, *ex = NULL, a[256];
    assert_int_equal(t_run("--help", &top, 1), 0);
    for (int k = 0; k < KIND_COUNT; k++) {
        char word[32];
        snprintf(word, sizeof word, "  %s ", kind_name[k]);
        if (!strstr(top, word)) fail_msg("--help does not list %s", kind_name[k]);
        snprintf(a, sizeof a, "%s --help", kind_name[k]);
        assert_int_equal(t_run(a, &h[k], 1), 0);
        snprintf(a, sizeof a, "usage: fa4gen %s", kind_name[k]);
        if (strncmp(h[k], a, strlen(a))) fail_msg("%s --help: %.80s", kind_name[k], h[k]);
        /* each kind's help names exactly the flags its kernels read (on either target) */
        for (size_t f = 0; f < sizeof flag_keys / sizeof flag_keys[0]; f++) {
            const char *key = !strcmp(flag_keys[f][1], "depth") ? "qk" : flag_keys[f][1];
            int applies = config_key_applies((Kind)k, TARGET_SM90A, key) || config_key_applies((Kind)k, TARGET_SM100A, key);
            char flag[40];
            snprintf(flag, sizeof flag, "%s ", flag_keys[f][0]);
            if (applies != (strstr(h[k], flag) != NULL))
                fail_msg("%s --help %s %s", kind_name[k], applies ? "lacks" : "lists", flag_keys[f][0]);
        }
    }
    assert_true(strcmp(h[0], h[1]) && strcmp(h[1], h[2]));
    assert_int_equal(t_run("explain mla-sparse --help", &ex, 1), 0);
    assert_string_equal(ex, h[KIND_MLA_SPARSE]);
    free(ex);
    assert_int_equal(t_run("explain --help", &ex, 1), 0);
    assert_non_null(strstr(ex, "usage: fa4gen explain [KIND]"));
    free(ex);
    assert_int_equal(t_run("bundle --help", &ex, 1), 0);
    assert_non_null(strstr(ex, "LF or CRLF"));
    free(ex);
    free(top);
    for (int k = 0; k < KIND_COUNT; k++) free(h[k]);
}

/* configs and cache: listed at the top, each with its own help naming every option / subcommand */
static void test_cli_help_tools(void **state)
{
    (void)state;
    char *top = NULL, *ex = NULL, a[256];
    assert_int_equal(t_run("--help", &top, 1), 0);
    assert_non_null(strstr(top, "  configs "));
    assert_non_null(strstr(top, "  cache "));
    assert_int_equal(t_run("configs --help", &ex, 1), 0);
    assert_string_equal(ex, cli_usage_configs);
    for (int i = 0; cli_configs_options[i]; i++) {
        char opt[40];
        snprintf(opt, sizeof opt, "  %s ", cli_configs_options[i]);
        if (!strstr(ex, opt)) fail_msg("configs --help lacks %s", cli_configs_options[i]);
    }
    free(ex);
    for (int i = 0; cli_cache_subcommands[i]; i++) {
        snprintf(a, sizeof a, "cache %s --help", cli_cache_subcommands[i]);
        assert_int_equal(t_run(a, &ex, 1), 0);
        assert_string_equal(ex, cli_usage_cache);
        char sub[40];
        snprintf(sub, sizeof sub, "  %s ", cli_cache_subcommands[i]);
        if (!strstr(ex, sub)) fail_msg("cache --help lacks %s", cli_cache_subcommands[i]);
        free(ex);
    }
    free(top);
}

static void test_cli_opt_equals(void **state)
{
    (void)state;
    const char *pairs[][2] = {
        {"mha --target sm90a --depth 128 --mask causal", "mha --target=sm90a --depth=128 --mask=causal"},
        {"explain --target sm100a --depth 128 --mask window:64,0 --json", "explain --target=sm100a --depth=128 --mask=window:64,0 --json"},
        {"explain --config 'mha target=sm90a qk=64 ov=64' --bn 64", "explain '--config=mha target=sm90a qk=64 ov=64' --bn=64"},
        {"combine --target sm90a --dtype fp16 --ov-depth 128", "combine --target=sm90a --dtype=fp16 --ov-depth=128"},
        {"explain mla-sparse --target sm100a --depth 576 --cta-group 2", "explain mla-sparse --target=sm100a --depth=576 --cta-group=2"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char *x = NULL, *y = NULL;
        if (t_run(pairs[i][0], &x, 1) || t_run(pairs[i][1], &y, 1)) fail_msg("'%s' / '%s'", pairs[i][0], pairs[i][1]);
        if (strcmp(x, y)) fail_msg("'%s' and '%s' differ", pairs[i][0], pairs[i][1]);
        free(x), free(y);
    }
    /* only where an option stands: a value may hold '=' */
    char *x = NULL;
    assert_int_equal(t_run("explain --config 'mha target=sm90a qk=64 ov=64'", &x, 1), 0);
    free(x);
}

/* ---- issue 28 item 3: fa4gen configs ---- */

static void test_cli_configs(void **state)
{
    (void)state;
    char *out = NULL;
    /* one decode shape per SM count: a cluster split of 8 CTAs on 132 SMs, of 7 on 114 */
    assert_int_equal(t_run("configs --targets sm90a --groups 8 --heads-kv 8 --batch 1 --seqlen-q 1 --seqlen-k 16384 "
                           "--workspace 0 --sm-counts 132,114", &out, 1), 0);
    if (!strstr(out, "# e.g. sm90a (132 SMs) bf16 qk 128 ov 128, causal: batch 1, heads_q 64, heads_kv 8, seqlen_q 1, "
                     "seqlen_k 16384, no workspace\nmha target=sm90a ") ||
        !strstr(out, " split=1 cluster=8 ") || !strstr(out, " split=1 cluster=7 "))
        fail_msg("%s", out);
    free(out);
    /* with a workspace: the split kernel and the combine kernel */
    assert_int_equal(t_run("configs --targets=sm100a --groups=8 --heads-kv=8 --batch=1 --seqlen-q=1 --seqlen-k=16384 "
                           "--workspace=1 --dtype=fp16", &out, 1), 0);
    if (!strstr(out, "\ncombine target=sm100a dtype=fp16 ov=128\n") || !strstr(out, "mha target=sm100a dtype=fp16 "))
        fail_msg("%s", out);
    free(out);
    t_refused("configs --bogus", "configs: '--bogus' is not an option of this command", NULL);
    t_refused("configs --seqlen 5..4", "configs: --seqlen '5..4': give A..B or N", NULL);
    t_refused("configs --seqlen 1..", "configs: --seqlen '1..'", NULL);
    t_refused("configs --paged 48", "configs: --paged '48': give page sizes, powers of two in 16..256", NULL);
    t_refused("configs --targets sm90a,sm90a", "configs: --targets 'sm90a,sm90a'", NULL);
    t_refused("configs --head-dims 72", "configs: --head-dims '72'", NULL);
    t_refused("configs --masks window", "configs: --masks 'window'", NULL);
    t_refused("configs --window 64", "configs: --window '64'", NULL);
    t_refused("configs --dtype bf16 --dtype fp16", "configs: --dtype: given twice", NULL);
    t_refused("configs --decode=4", "--decode: takes no value", NULL);
    t_refused("configs --no-dense", "configs: --no-dense leaves no calls", NULL);
    t_refused("configs --sink 2", "configs: --sink '2': give 0, 1 or both", NULL);
    t_refused("configs --tuning 'bogus=1' --seqlen 1..64", "configs: args->config:", NULL);
    t_refused("configs --targets sm100a --head-dims 256", "configs: no kernel serves any call described: skipped",
              "depth: 256", NULL);
    /* a skip beside listed configs is a note, exit 0 */
    char *err = NULL;
    assert_int_equal(t_run("configs --head-dims 128,256 --seqlen 1..64 --heads-kv 1 --batch 1", &err, 0), 0);
    if (!strstr(err, "configs: skipped 2 cases no kernel serves: depth: 256") || !strstr(err, "configs (sm90a "))
        fail_msg("%s", err);
    free(err);
}

/* ---- issue 28 item 4: fa4gen cache ---- */

void rt_disk_put(fa4_ctx *ctx, const char *key_text, uint64_t key, const void *cubin, size_t size); /* rt_internal.h */
uint64_t rt_fnv1a(const void *data, size_t n, uint64_t h);

static void test_cli_cache(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4cli-cache-XXXXXX", a[1400], *out = NULL;
    assert_non_null(mkdtemp(dir));
    /* path and list of a folder not made yet */
    snprintf(a, sizeof a, "env FA4GEN_CACHE_DIR=%s/sub %s cache path", dir, exe());
    assert_int_equal(run_capture(a, &out), 0);
    snprintf(a, sizeof a, "%s/sub\n", dir);
    assert_string_equal(out, a);
    free(out);
    snprintf(a, sizeof a, "env FA4GEN_CACHE_DIR=%s/sub %s cache list", dir, exe());
    assert_int_equal(run_capture(a, &out), 0);
    assert_non_null(strstr(out, "# 0 entries, 0 B in "));
    free(out);
    /* three entries written as the runtime writes them */
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = dir;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    for (int i = 0; i < 3; i++) {
        char key[300], payload[2048] = "\177ELF";
        snprintf(key, sizeof key, "fa4gen cubin key 1\nconfig=mha target=sm90a qk=64 ov=64 n=%d\ngenerator=%s\n", i,
                 i == 2 ? "0.0.1+0000000000000000" : fa4gen_build_id());
        rt_disk_put(ctx, key, rt_fnv1a(key, strlen(key), 0xcbf29ce484222325ull), payload, sizeof payload);
    }
    fa4_destroy(ctx);
    snprintf(a, sizeof a, "env FA4GEN_CACHE_DIR=%s %s cache list", dir, exe());
    assert_int_equal(run_capture(a, &out), 0);
    if (!strstr(out, "  mha target=sm90a qk=64 ov=64 n=0\n") || !strstr(out, "n=2  (another fa4gen build)\n") ||
        !strstr(out, "# 3 entries, ") || !strstr(out, "; 1 of another fa4gen build") || !strstr(out, "s ago  "))
        fail_msg("%s", out);
    free(out);
    snprintf(a, sizeof a, "env FA4GEN_CACHE_DIR=%s %s cache prune --max-size 3k", dir, exe());
    assert_int_equal(run_capture(a, &out), 0);
    if (!strstr(out, "removed 2 entries (")) fail_msg("%s", out);
    free(out);
    snprintf(a, sizeof a, "env FA4GEN_CACHE_DIR=%s %s cache clear", dir, exe());
    assert_int_equal(run_capture(a, &out), 0);
    if (!strstr(out, "removed 1 entry (")) fail_msg("%s", out);
    free(out);
    /* refusals: one line, exit 2 */
    t_refused("cache", "cache: no subcommand; use path, list, clear or prune --max-size N", NULL);
    t_refused("cache purge", "cache: 'purge' is not a subcommand", NULL);
    t_refused("cache prune", "cache prune: --max-size N is required", NULL);
    t_refused("cache prune --max-size 5X", "cache prune: --max-size '5X'", NULL);
    t_refused("cache prune --max-size=", "cache prune: --max-size ''", NULL);
    t_refused("cache prune --max-size 1M --max-size 2M", "cache prune: --max-size: given twice", NULL);
    t_refused("cache list --all", "cache list: '--all' is not an option of this command (it takes none)", NULL);
    /* a folder others may write: the runtime's warning, exit 1, nothing removed */
    chmod(dir, 0777);
    snprintf(a, sizeof a, "env FA4GEN_CACHE_DIR=%s %s cache clear 2>&1 >/dev/null", dir, exe());
    assert_int_equal(run_capture(a, &out), 1);
    if (!strstr(out, "fa4: warning: cache directory '") || !strstr(out, "writable by group or others") ||
        !strstr(out, "fa4gen: cache clear: cache directory '"))
        fail_msg("%s", out);
    free(out);
    chmod(dir, 0700);
    remove_tree(dir);
}

/* ---- explain --predict: the simulator's timing mode run by the CLI (build/sim/timecase, which make unit builds) ---- */

/* The number after `key` in text (the first), or -1. */
static double t_number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? atof(p + strlen(key)) : -1;
}

static void test_cli_predict(void **state)
{
    (void)state;
    const char *small = "explain --target sm90a --depth 64 --predict h200 --batch 1 --heads 1 --seqlen-q 128 --seqlen-k 512";
    char *a = NULL, *b = NULL, *plan = NULL, *slow = NULL, *err = NULL, args[1024];
    assert_int_equal(t_run(small, &a, 1), 0);
    assert_int_equal(t_run(small, &b, 1), 0);
    assert_string_equal(a, b); /* deterministic: the same text twice */
    assert_int_equal(t_run("explain --target sm90a --depth 64", &plan, 1), 0);
    /* the plan first, unchanged, then the prediction of that plan's kernel */
    assert_int_equal(strncmp(a, plan, strlen(plan)), 0);
    const char *sym = strstr(plan, "symbol   ");
    assert_non_null(sym);
    char want[96];
    snprintf(want, sizeof want, "  launch      %.*s grid=1x1x1", (int)strcspn(sym + 9, "\n"), sym + 9);
    const char *needles[] = {"\nprediction  modelled (", "  gpu         h200 (table ", "/tests/sim/gpus/h200.tbl; ",
                             "  validation  17 sm90a pairs timed on an H200", want,
                             "  shape       batch=1 heads_q=1 heads_kv=1 seqlen_q=128 seqlen_k=512", "  bottleneck  ",
                             "  busy        issue=", " tc=", " tma=", "  total       "};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        if (!strstr(a, needles[i])) fail_msg("--predict output lacks '%s':\n%s", needles[i], a);
    double us = t_number_after(a, "  total       ");
    if (!(us > 1 && us < 1000)) fail_msg("predicted %g us for a 128 x 512 tile", us);
    /* the table decides: half the tensor-core rate (a table file) predicts a longer time */
    const char *tbl = "build/tests/predict_slow.tbl";
    snprintf(args, sizeof args, "sed 's/^tc_macs .*/tc_macs 900 derived half the rate (test)/' tests/sim/gpus/h200.tbl > %s", tbl);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "explain --target sm90a --depth 64 --predict %s --batch 1 --heads 1 --seqlen-q 128 --seqlen-k 512", tbl);
    assert_int_equal(t_run(args, &slow, 1), 0);
    double us2 = t_number_after(slow, "  total       ");
    if (!(us2 > us * 1.05)) fail_msg("half the tensor rate: %g -> %g us", us, us2);
    remove(tbl);
    /* refused before the plan is printed (exit 2, one line) */
    t_refused("explain --target sm100a --depth 128 --predict h100", "--predict h100: an sm90a GPU", "give b200, or --target sm90a", NULL);
    t_refused("explain --target sm90a --depth 128 --predict b300", "an sm103a GPU", "give h100 or h200, or --target sm103a", NULL);
    t_refused("explain --target sm100a --depth 128 --predict b300", "an sm103a GPU", "target is sm100a (give b200,", NULL);
    t_refused("explain --target sm90a --depth 128 --predict a100", "'a100' is not a GPU", NULL);
    t_refused("explain --target sm90a --depth 128 --seqlen-k 4096", "--seqlen-k: a shape for --predict", NULL);
    t_refused("explain --target sm90a --depth 128 --split 1 --predict h100", "a config with split=1 is not predicted", NULL);
    t_refused("explain combine --target sm90a --ov-depth 128 --predict h100", "only mha and mla-sparse", NULL);
    t_refused("explain --target sm90a --depth 128 --group 4 --heads 6 --predict h100", "--heads 6: not a multiple", NULL);
    t_refused("explain --target sm90a --depth 128 --predict h100 --predict h200", "--predict: given twice", NULL);
    t_refused("explain --target sm90a --depth 128 --predict h100 --samples 0", "--samples: '0' is not an integer in 1..64", NULL);
    t_refused("explain mla-sparse --target sm100a --depth 576 --predict b200 --batch 2", "--batch: a sparse MLA call has no batch", NULL);
    t_refused("mha --target sm90a --depth 128 --predict h100", "'--predict' is not an option", NULL);
    /* no simulator: exit 1, one line saying what to build, nothing on stdout */
    assert_int_equal(t_run("explain --target sm90a --depth 64 --predict h100", &err, 0), 0);
    free(err);
    err = NULL;
    setenv("FA4GEN_TIMECASE", "/nonexistent/timecase", 1);
    assert_int_equal(t_run("explain --target sm90a --depth 64 --predict h100", &err, 0), 1);
    unsetenv("FA4GEN_TIMECASE");
    t_one_line(err);
    if (!strstr(err, "the simulator is not built") || !strstr(err, "make build/sim/timecase")) fail_msg("%s", err);
    free(a), free(b), free(plan), free(slow), free(err);
}

/* The number after "key": in a JSON text (the first), or -1. */
static double t_json_number(const char *text, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    return t_number_after(text, k);
}

/* explain --predict GPU --json: the prediction alone as one JSON object, the same numbers as the text form,
 * the same bytes twice; without --target, b300 predicts the sm103a kernel (the one a B300 loads). */
static void test_cli_predict_json(void **state)
{
    (void)state;
    const char *shape = "--batch 1 --heads 1 --seqlen-q 128 --seqlen-k 256";
    char args[512], *a = NULL, *b = NULL, *text = NULL, *b300 = NULL;
    snprintf(args, sizeof args, "explain --target sm90a --depth 64 --predict h200 --json %s", shape);
    assert_int_equal(t_run(args, &a, 1), 0);
    assert_int_equal(t_run(args, &b, 1), 0);
    assert_string_equal(a, b);
    snprintf(args, sizeof args, "explain --target sm90a --depth 64 --predict h200 %s", shape);
    assert_int_equal(t_run(args, &text, 1), 0);
    const char *needles[] = {"{\"evidence\": \"modelled\", \"config\": \"mha target=sm90a dtype=bf16 qk=64 ",
                             "\"gpu\": \"h200\", \"table\": \"", "/tests/sim/gpus/h200.tbl\", \"assumed_values\": ",
                             "\"validation\": \"17 sm90a pairs timed on an H200",
                             "\"shape\": {\"batch\": 1, \"heads_q\": 1, \"heads_kv\": 1, \"seqlen_q\": 128, \"seqlen_k\": 256}",
                             "\"launches\": [{\"kernel\": \"fa4_mha_sm90a_", "\"grid\": [1, 1, 1], \"cluster\": 1, ",
                             "\"bottleneck\": \"", "\"busy_percent\": {\"issue\": ", ", \"tmem\": ", "\"total_us\": "};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        if (!strstr(a, needles[i])) fail_msg("--predict --json lacks '%s':\n%s", needles[i], a);
    if (a[strlen(a) - 1] != '\n' || strchr(a, '\n') != a + strlen(a) - 1) fail_msg("not one line: %s", a);
    if (strstr(a, "fa4gen explain") || strstr(a, "smem map")) fail_msg("the plan is not part of --json's prediction: %s", a);
    double us = t_json_number(a, "total_us"), us_text = t_number_after(text, "  total       ");
    if (!(us > 1) || us != us_text) fail_msg("total_us %g, the text form's total %g", us, us_text);
    if (t_json_number(a, "predicted_us") != us) fail_msg("one launch: predicted_us %g != total_us %g", t_json_number(a, "predicted_us"), us);
    double tc = t_json_number(a, "tc");
    if (!(tc > 0 && tc <= 100)) fail_msg("busy tc %g%%", tc);
    /* a JSON parser reads it (python3 is a test dependency of make unit) */
    FILE *f = fopen("build/tests/predict.json", "w");
    assert_non_null(f);
    fputs(a, f);
    fclose(f);
    assert_int_equal(system("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                            "sys.exit(0 if d[\"evidence\"] == \"modelled\" and d[\"launches\"][0][\"busy_percent\"] else 1)' "
                            "build/tests/predict.json"), 0);
    remove("build/tests/predict.json");
    /* b300 without --target: the sm103a kernel under the B300 table */
    snprintf(args, sizeof args, "explain --depth 64 --predict b300 --json %s", shape);
    assert_int_equal(t_run(args, &b300, 1), 0);
    if (!strstr(b300, "\"config\": \"mha target=sm103a ") || !strstr(b300, "\"kernel\": \"fa4_mha_sm103a_") ||
        !strstr(b300, "\"gpu\": \"b300\""))
        fail_msg("--predict b300 without --target: %s", b300);
    free(a), free(b), free(text), free(b300);
}

/* ---- issue 26 item 6: FA4GEN_COMPILER (runtime/jit.c reads it; the first thing a kernel build asks) ---- */

fa4_status rt_compiler_id(fa4_ctx *ctx, char *buf, size_t n); /* rt_internal.h */

static void test_compiler_env(void **state)
{
    (void)state;
    fa4_ctx *ctx = NULL;
    char id[128];
    assert_int_equal(fa4_create(&ctx, NULL), FA4_OK);
    const char *bad[] = {"driver", "ptxas", "nvjitlink", "driver-ptx "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("FA4GEN_COMPILER", bad[i], 1);
        assert_int_equal(rt_compiler_id(ctx, id, sizeof id), FA4_ERR_INVALID_ARGUMENT);
        const char *msg = fa4_last_error(ctx);
        if (!strstr(msg, "FA4GEN_COMPILER: '") || !strstr(msg, bad[i]) || !strstr(msg, "use driver-ptx"))
            fail_msg("'%s': %s", bad[i], msg);
    }
    unsetenv("FA4GEN_COMPILER");
    fa4_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_source_directives),      cmocka_unit_test(test_cli_mod_includes),
        cmocka_unit_test(test_nvrtc_log_map),          cmocka_unit_test(test_ptx_locator),
        cmocka_unit_test(test_cli_mod_asm_brace),      cmocka_unit_test(test_cli_paths),
        cmocka_unit_test(test_bundle_dir_all_or_nothing), cmocka_unit_test(test_cli_unread_and_conflicts),
        cmocka_unit_test(test_config_unread_fields),   cmocka_unit_test(test_bundle_list_line_ends),
        cmocka_unit_test(test_bundle_c_duplicates),    cmocka_unit_test(test_cli_help),
        cmocka_unit_test(test_cli_opt_equals),        cmocka_unit_test(test_compiler_env),
        cmocka_unit_test(test_cli_help_tools),        cmocka_unit_test(test_cli_configs),
        cmocka_unit_test(test_cli_cache),             cmocka_unit_test(test_cli_predict), cmocka_unit_test(test_cli_predict_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
