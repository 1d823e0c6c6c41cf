// rss_exec REPORT COMMAND [ARGS…]: runs COMMAND (stdin, stdout, stderr inherited), writes its peak
// resident set size in KB to REPORT and exits with its status. Linux counts a child's memory before
// exec in its ru_maxrss; forked from this small program, that is ~1 MB, not the ~17 MB of the
// Python process that runs the benchmarks (Benchmarks/run.py).
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: rss_exec REPORT COMMAND [ARGS...]\n");
        return 2;
    }
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    if (wait4(child, &status, 0, &usage) < 0) return 1;
    FILE *report = fopen(argv[1], "w");
    if (!report) return 1;
    fprintf(report, "%ld\n", usage.ru_maxrss);
    fclose(report);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
