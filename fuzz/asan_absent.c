/*
 * Weak, empty stand-ins for the four AddressSanitizer runtime entry points that the constructor of
 * every ASan-compiled object calls. The C kernel is compiled with ASan (fa3conform's feature
 * `asan-kernel`) and comes, with fa3conform's code, into every fuzz target; the targets that run it
 * link the real runtime (build.rs), whose definitions take precedence over these, and the others
 * link these, so that their Rust code keeps glibc's allocator. Nothing else of the runtime is
 * provided: a target without it that could reach the kernel's checked accesses fails to link.
 */
#include <stddef.h>

__attribute__((weak)) void __asan_init(void) {}
__attribute__((weak)) void __asan_version_mismatch_check_v8(void) {}
__attribute__((weak)) void __asan_register_globals(void *globals, size_t count) {
    (void)globals;
    (void)count;
}
__attribute__((weak)) void __asan_unregister_globals(void *globals, size_t count) {
    (void)globals;
    (void)count;
}
