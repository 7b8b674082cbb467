//! When the kernel path and the reference run their loops on rayon's pool.

/// Whether rayon's pool has more than one worker. With one (the fuzz targets, see
/// [`crate::fuzzing::harness::init`]) a parallel loop called from outside the pool only adds a
/// hand-off to that worker and back, twice a kernel call.
pub fn enabled() -> bool {
    rayon::current_num_threads() > 1
}
