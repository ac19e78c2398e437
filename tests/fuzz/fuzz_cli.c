/* fuzz_cli.c - the fa4gen argument vector, in process (gen/main.c): the input is argv[1..],
 * NUL-separated. Properties: exit 2 => one escaped line on stderr and no file; exit 0 for mha
 * or explain => the plan of the flags keeps the plan invariants. Arguments holding '/' or '..'
 * are skipped, so the runs write only inside the sandbox. */
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
    if (rc == 0 && argc > 1 && (!strcmp(argv[1], "mha") || !strcmp(argv[1], "explain"))) {
        Cli cli = {0};
        int first = !strcmp(argv[1], "explain") && argc > 2 && argv[2][0] != '-' ? 3 : 2;
        char err[512];
        static Plan plan;
        if (!parse_flags(&cli, argc, argv, first, USE_OUT | USE_JSON | USE_CONFIG, argv[1]) &&
            !config_set(&cli.cfg, "kind", first == 3 ? argv[2] : "mha", err, sizeof err) &&
            !plan_make(&cli.cfg, &plan, err, sizeof err))
            fuzz_plan_invariants(&plan);
        free(cli.mod_src);
    }
    fz_check_invalid(rc, err);
    fz_write_list(fz_default_list, sizeof fz_default_list - 1); /* -o list may have replaced it */
    free(buf);
    fz_leave();
    return 0;
}
