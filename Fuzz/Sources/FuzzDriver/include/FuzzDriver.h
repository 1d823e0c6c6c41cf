#ifndef LOGINKIT_FUZZ_DRIVER_H
#define LOGINKIT_FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer's driver (LLVMFuzzerRunDriver) with `argc`/`argv` and `callback` as the fuzzed
/// function. SwiftPM links an executable's `main` to `<module>_main`, so each fuzz target defines
/// that symbol and calls this, instead of relying on libFuzzer's own `main`.
int loginkit_fuzz_run(int argc, char **argv, int (*callback)(const uint8_t *data, size_t size));

#endif
