//! Shared by the bridge tests: the repository root and a Python interpreter that can run the drivers.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What the Python side of the tests imports (numpy, safetensors), pinned.
const REQUIREMENTS: &str = "tests/python/requirements.txt";

/// A Python interpreter with the packages of `tests/python/requirements.txt`.
///
/// `FA3CONFORM_PYTHON` names one (CI points it at the virtual environment `.ci/run` builds). Without
/// it the tests provision their own: a virtual environment under Cargo's test scratch folder, made
/// once from `python3` and reused while the requirements file is unchanged. A machine that can do
/// neither fails the test with the reason: a Python test never passes without running.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let python = match std::env::var_os("FA3CONFORM_PYTHON") {
            Some(path) => PathBuf::from(path),
            None => provision_env(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-env")),
        };
        let check = Command::new(&python)
            .args(["-c", "import numpy, safetensors"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
        assert!(
            check.status.success(),
            "{} lacks numpy or safetensors (pip install -r {REQUIREMENTS}):\n{}",
            python.display(),
            String::from_utf8_lossy(&check.stderr)
        );
        python
    })
}

/// Makes (or reuses) a virtual environment at `dir` holding the requirements, and returns its
/// interpreter. Test binaries run at the same time, so a file lock serialises the making.
fn provision_env(dir: &Path) -> PathBuf {
    let requirements = fs::read_to_string(repo().join(REQUIREMENTS)).expect(REQUIREMENTS);
    let interpreter = dir.join("bin/python");
    let stamp = dir.join("requirements.installed");
    fs::create_dir_all(dir.parent().expect("scratch folder")).expect("creating the scratch folder");
    let lock = File::create(dir.with_extension("lock")).expect("creating the provisioning lock");
    #[allow(
        clippy::incompatible_msrv,
        reason = "tests build with the development toolchain; the MSRV is the library's"
    )]
    lock.lock().expect("locking the Python environment");
    if fs::read_to_string(&stamp).ok().as_deref() != Some(requirements.as_str()) {
        run_provisioning(
            Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(dir),
        );
        run_provisioning(
            Command::new(&interpreter)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "-r",
                ])
                .arg(repo().join(REQUIREMENTS)),
        );
        fs::write(&stamp, &requirements).expect("writing the provisioning stamp");
    }
    interpreter
}

fn run_provisioning(command: &mut Command) {
    let output = command.output().unwrap_or_else(|e| {
        panic!("provisioning Python for the tests: cannot run {command:?}: {e}")
    });
    assert!(
        output.status.success(),
        "provisioning Python for the tests failed ({command:?}); set FA3CONFORM_PYTHON to an \
         interpreter with numpy and safetensors instead:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
