/* The floors of the two store layouts docs/storage.md weighs: a durable commit of one profile.
 *
 *   sqlite_commit [sqlite] DIR ROWS COMMITS PROCS
 *       DIR/profiles.db, a table profiles(name TEXT PRIMARY KEY, body BLOB) in WAL mode with
 *       synchronous=FULL, ROWS rows of a ~1.5 KB body each; then PROCS processes, each with its own
 *       connection (busy_timeout 60000), commit COMMITS one-row UPDATEs of a row of their own.
 *   sqlite_commit files DIR ROWS COMMITS PROCS
 *       DIR holds ROWS files p-<i>.json of the same size; then PROCS processes each save their own
 *       file COMMITS times durably (a temporary file created and truncated, written, fsync'd,
 *       renamed over it, the directory fsync'd): the floor of a store with a file per profile.
 *
 * The processes start together once all of them are ready; each commit is timed with
 * CLOCK_MONOTONIC. ROWS below PROCS is raised to PROCS, so that every process has a row of its own.
 * DIR is created if missing; what an earlier run left there is replaced. Prints one JSON line:
 * mode, rows, procs, commits, commit_us_p50, commit_us_p90, commit_us_p99, commit_us_max (over every
 * commit of every process: a process that waits for SQLite's lock sleeps in its busy handler, and the
 * few commits that starve show in the maximum only), wall_ms (from the start to the last process's
 * exit). Built by Benchmarks/run.py with gcc -O2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { BODY_SIZE = 1536 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Bytes that look like a sealed profile (ciphertext): a xorshift stream seeded with `seed`. */
static void fill_body(unsigned char *body, unsigned long long seed) {
    unsigned long long x = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int i = 0; i < BODY_SIZE; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        body[i] = (unsigned char)(x >> 24);
    }
}

static int exec(sqlite3 *db, const char *sql) {
    char *error = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "sqlite_commit: %s: %s\n", sql, error ? error : sqlite3_errmsg(db));
        sqlite3_free(error);
        return -1;
    }
    return 0;
}

/* A connection as every process opens it: synchronous=FULL, a 60 s busy timeout. */
static sqlite3 *open_database(const char *path) {
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_commit: open %s: %s\n", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 60000);
    if (exec(db, "PRAGMA synchronous=FULL") != 0) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

/* A new database of `rows` rows in WAL mode, checkpointed and closed (no connection crosses fork). */
static int prepare_sqlite(const char *path, long rows) {
    const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char stale[PATH_MAX];
        snprintf(stale, sizeof stale, "%s%s", path, suffixes[i]);
        if (unlink(stale) != 0 && errno != ENOENT) {
            perror(stale);
            return -1;
        }
    }
    sqlite3 *db = open_database(path);
    if (!db) return -1;
    sqlite3_stmt *mode = NULL;
    int wal = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &mode, NULL) == SQLITE_OK && sqlite3_step(mode) == SQLITE_ROW
              && strcmp((const char *)sqlite3_column_text(mode, 0), "wal") == 0;
    sqlite3_finalize(mode);
    if (!wal) {
        fprintf(stderr, "sqlite_commit: WAL mode refused: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    if (exec(db, "CREATE TABLE profiles(name TEXT PRIMARY KEY, body BLOB)") != 0 || exec(db, "BEGIN") != 0) {
        sqlite3_close(db);
        return -1;
    }
    sqlite3_stmt *insert = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO profiles(name, body) VALUES(?1, ?2)", -1, &insert, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_commit: INSERT: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    unsigned char body[BODY_SIZE];
    for (long i = 0; i < rows; i++) {
        char name[32];
        snprintf(name, sizeof name, "p-%ld", i);
        fill_body(body, (unsigned long long)i);
        sqlite3_bind_text(insert, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(insert, 2, body, BODY_SIZE, SQLITE_TRANSIENT);
        if (sqlite3_step(insert) != SQLITE_DONE) {
            fprintf(stderr, "sqlite_commit: INSERT: %s\n", sqlite3_errmsg(db));
            sqlite3_finalize(insert);
            sqlite3_close(db);
            return -1;
        }
        sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    int result = exec(db, "COMMIT") == 0 && exec(db, "PRAGMA wal_checkpoint(TRUNCATE)") == 0 ? 0 : -1;
    sqlite3_close(db);
    return result;
}

/* Waits for the start: `ready` gets one byte, then `go` reaches end of file when the parent starts. */
static void wait_for_start(int ready, int go) {
    char byte = 1;
    if (write(ready, &byte, 1) != 1) perror("sqlite_commit: ready");
    close(ready);
    while (read(go, &byte, 1) < 0 && errno == EINTR) {
    }
    close(go);
}

static int commit_sqlite(const char *path, long index, long commits, double *latencies, int ready, int go) {
    sqlite3 *db = open_database(path);
    if (!db) return -1;
    sqlite3_stmt *update = NULL;
    if (sqlite3_prepare_v2(db, "UPDATE profiles SET body = ?1 WHERE name = ?2", -1, &update, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_commit: UPDATE: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    char name[32];
    snprintf(name, sizeof name, "p-%ld", index);
    sqlite3_bind_text(update, 2, name, -1, SQLITE_TRANSIENT);
    unsigned char body[BODY_SIZE];
    fill_body(body, (unsigned long long)index);
    wait_for_start(ready, go);
    int result = 0;
    for (long c = 0; c < commits && result == 0; c++) {
        memcpy(body, &c, sizeof c);
        sqlite3_bind_blob(update, 1, body, BODY_SIZE, SQLITE_STATIC);
        double started = now();
        int rc = sqlite3_step(update);
        latencies[c] = now() - started;
        if (rc != SQLITE_DONE || sqlite3_changes(db) != 1) {
            fprintf(stderr, "sqlite_commit: UPDATE %s: %s\n", name, sqlite3_errmsg(db));
            result = -1;
        }
        sqlite3_reset(update);
    }
    sqlite3_finalize(update);
    sqlite3_close(db);
    return result;
}

/* One durable save of p-<index>.json, as cbench_durable_write (Benchmarks/Sources/CBench) makes it. */
static int save_file(const char *directory, long index, const unsigned char *body) {
    char temporary[PATH_MAX], final[PATH_MAX];
    snprintf(temporary, sizeof temporary, "%s/p-%ld.json.tmp", directory, index);
    snprintf(final, sizeof final, "%s/p-%ld.json", directory, index);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    size_t written = 0;
    while (written < BODY_SIZE) {
        ssize_t n = write(fd, body + written, BODY_SIZE - written);
        if (n < 0) {
            close(fd);
            return -1;
        }
        written += (size_t)n;
    }
    if (fsync(fd) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    if (rename(temporary, final) != 0) return -1;
    int dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -1;
    int result = fsync(dir);
    close(dir);
    return result;
}

/* `rows` files written (not one by one durably), then the file system synced once. */
static int prepare_files(const char *directory, long rows) {
    unsigned char body[BODY_SIZE];
    for (long i = 0; i < rows; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/p-%ld.json", directory, i);
        fill_body(body, (unsigned long long)i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, body, BODY_SIZE) != BODY_SIZE) {
            perror(path);
            if (fd >= 0) close(fd);
            return -1;
        }
        close(fd);
    }
    int dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 || syncfs(dir) != 0) {
        perror(directory);
        if (dir >= 0) close(dir);
        return -1;
    }
    close(dir);
    return 0;
}

static int commit_files(const char *directory, long index, long commits, double *latencies, int ready, int go) {
    unsigned char body[BODY_SIZE];
    fill_body(body, (unsigned long long)index);
    wait_for_start(ready, go);
    for (long c = 0; c < commits; c++) {
        memcpy(body, &c, sizeof c);
        double started = now();
        int rc = save_file(directory, index, body);
        latencies[c] = now() - started;
        if (rc != 0) {
            perror("sqlite_commit: save");
            return -1;
        }
    }
    return 0;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int files = 0, first = 1;
    if (argc == 6 && (strcmp(argv[1], "files") == 0 || strcmp(argv[1], "sqlite") == 0)) {
        files = strcmp(argv[1], "files") == 0;
        first = 2;
    } else if (argc != 5) {
        fprintf(stderr, "usage: sqlite_commit [sqlite|files] DIR ROWS COMMITS PROCS\n");
        return 2;
    }
    const char *directory = argv[first];
    long rows = atol(argv[first + 1]), commits = atol(argv[first + 2]), procs = atol(argv[first + 3]);
    if (rows < 1 || commits < 1 || procs < 1) {
        fprintf(stderr, "sqlite_commit: ROWS, COMMITS and PROCS must be positive\n");
        return 2;
    }
    if (rows < procs) rows = procs;
    if (mkdir(directory, 0700) != 0 && errno != EEXIST) {
        perror(directory);
        return 1;
    }
    char database[PATH_MAX];
    snprintf(database, sizeof database, "%s/profiles.db", directory);
    if ((files ? prepare_files(directory, rows) : prepare_sqlite(database, rows)) != 0) return 1;

    long total = commits * procs;
    double *latencies = mmap(NULL, (size_t)total * sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int ready[2], go[2];
    if (latencies == MAP_FAILED || pipe(ready) != 0 || pipe(go) != 0) {
        perror("sqlite_commit");
        return 1;
    }
    for (long p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("sqlite_commit: fork");
            return 1;
        }
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            double *own = latencies + p * commits;
            int rc = files ? commit_files(directory, p, commits, own, ready[1], go[0])
                           : commit_sqlite(database, p, commits, own, ready[1], go[0]);
            _exit(rc == 0 ? 0 : 1);
        }
    }
    close(ready[1]);
    close(go[0]);
    /* Every process ready (or gone: end of file), then all of them released at once. */
    long ready_count = 0;
    char byte;
    while (ready_count < procs) {
        ssize_t n = read(ready[0], &byte, 1);
        if (n == 0 || (n < 0 && errno != EINTR)) break;
        if (n == 1) ready_count++;
    }
    double started = now();
    close(go[1]);
    int failed = 0, status;
    while (wait(&status) > 0) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    double wall = now() - started;
    if (failed || ready_count < procs) {
        fprintf(stderr, "sqlite_commit: a process failed\n");
        return 1;
    }
    qsort(latencies, (size_t)total, sizeof(double), compare);
    long p90 = (long)(total * 0.9), p99 = (long)(total * 0.99);
    if (p90 > total - 1) p90 = total - 1;
    if (p99 > total - 1) p99 = total - 1;
    printf("{\"mode\": \"%s\", \"rows\": %ld, \"procs\": %ld, \"commits\": %ld, \"commit_us_p50\": %.1f, \"commit_us_p90\": %.1f, "
           "\"commit_us_p99\": %.1f, \"commit_us_max\": %.1f, \"wall_ms\": %.1f}\n",
           files ? "files" : "sqlite", rows, procs, commits, latencies[total / 2] * 1e6, latencies[p90] * 1e6, latencies[p99] * 1e6,
           latencies[total - 1] * 1e6, wall * 1e3);
    return 0;
}
