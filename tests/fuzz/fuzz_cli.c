/* fuzz_cli.c - the fa4gen argument vector, in process (gen/main.c): the input is argv[1..],
 * NUL-separated (options also as --opt=value). Properties: exit 2 => one escaped line on stderr
 * and no file; exit 0 for mha or explain => the plan of the flags keeps the plan invariants. The
 * sandbox holds a score_mod (mod.cu), one with an #include (inc.cu), a FIFO and a directory, for
 * --score-mod, -o and bundle to meet: a run never blocks on the FIFO, and inc.cu is always
 * refused. Arguments holding '/' or '..' are skipped, so the runs write only inside the sandbox. */
#include "fuzz_main.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    fz_init();
    if (size > 4096) return fz_leave(), 0;
    char *buf = malloc(size + 1), *argv[34] = {"fa4gen"};
    memcpy(buf, data, size);
    buf[size] = 0;
    int argc = 1;
    for (size_t i = 0; i <= size && argc < 33;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    for (int i = 1; i < argc; i++)
        if (strchr(argv[i], '/') || strstr(argv[i], "..")) {
            free(buf);
            fz_leave();
            return 0;
        }
    setenv("FA4GEN_NO_NVRTC", "1", 1); /* --score-mod: a status (exit 1), not a compiler run per input */
    fz_begin();
    int rc = fa4gen_main(argc, argv);
    const char *err = fz_stderr();
    FUZZ_CHECK(rc == 0 || rc == 1 || rc == 2, "exit %d", rc);
    Args split;
    if (rc == 0 && argc > 1 && (!strcmp(argv[1], "mha") || !strcmp(argv[1], "explain")) &&
        !split_args(argc, argv, &split)) { /* --opt=value as the CLI reads it */
        Cli cli = {0};
        char **av = split.argv;
        int ac = split.argc, first = !strcmp(av[1], "explain") && ac > 2 && av[2][0] != '-' ? 3 : 2;
        char err[512];
        static Plan plan;
        if (!parse_flags(&cli, ac, av, first, USE_OUT | USE_JSON | USE_CONFIG, av[1]) &&
            !config_set(&cli.cfg, "kind", first == 3 ? av[2] : "mha", err, sizeof err) &&
            !plan_make(&cli.cfg, &plan, err, sizeof err))
            fuzz_plan_invariants(&plan);
        free(cli.mod_src);
        free_args(&split);
    }
    int help = 0; /* -h / --help prints the help and exits 0 before any file is read */
    for (int i = 1; i < argc; i++) help |= !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
    for (int i = 1; i + 1 < argc && !help; i++) /* the #include never gets through */
        if (!strcmp(argv[i], "--score-mod") && !strcmp(argv[i + 1], "inc.cu")) FUZZ_CHECK(rc == 2, "inc.cu: exit %d", rc);
    fz_check_invalid(rc, err);
    fz_fixtures_reset(); /* -o list may have replaced it, -d dir filled it */
    free(buf);
    fz_leave();
    return 0;
}
