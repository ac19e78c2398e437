/* fuzz_bundle.c - the bundle list reader: the input is the list file of
 * `fa4gen bundle list -d out`, in process. Properties: exit 2 => one escaped line on stderr and
 * nothing written (no out, no temporary folder); exit 0 => out holds one .ptx per kernel and
 * nothing else, and the list had no CR but before an LF (CRLF ends a line; a lone CR is refused). */
#include "fuzz_main.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    fz_init();
    if (size > 8192) return fz_leave(), 0;
    fz_write_list((const char *)data, size);
    char *argv[] = {"fa4gen", "bundle", "list", "-d", "out", NULL};
    fz_begin();
    int rc = fa4gen_main(5, argv);
    const char *err = fz_stderr();
    FUZZ_CHECK(rc == 0 || rc == 1 || rc == 2, "exit %d", rc);
    if (rc == 0) {
        for (size_t i = 0; i < size; i++) /* a CR ends a line only before its LF */
            FUZZ_CHECK(data[i] != '\r' || (i + 1 < size && data[i + 1] == '\n'), "a lone CR at byte %zu was accepted", i);
        DIR *d = opendir("out");
        FUZZ_CHECK(d != NULL, "exit 0 without out/");
        for (struct dirent *e; (e = readdir(d));)
            FUZZ_CHECK(e->d_name[0] == '.' ? !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")
                                           : strlen(e->d_name) > 4 && !strcmp(e->d_name + strlen(e->d_name) - 4, ".ptx"),
                       "out/%s", e->d_name);
        closedir(d);
        char left[300];
        FUZZ_CHECK(fz_leftovers(left, sizeof left) == 1 && !strcmp(left, "out"), "left '%s'", left);
    }
    fz_check_invalid(rc, err);
    fz_leave();
    return 0;
}
