//! Shared by the bridge tests: the repository root and whether Python can run the drivers.

use std::path::PathBuf;
use std::process::Command;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `python3` with NumPy and safetensors is available. When it is not, says so on stderr:
/// CI installs them (`pip install numpy safetensors`), so a skip there is visible in the log.
pub fn python_ready() -> bool {
    let ready = Command::new("python3")
        .args(["-c", "import numpy, safetensors"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ready {
        eprintln!(
            "SKIPPED: python3 with numpy and safetensors is not available (pip install numpy safetensors)"
        );
    }
    ready
}
