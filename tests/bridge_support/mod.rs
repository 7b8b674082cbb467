//! Shared by the bridge tests: the repository root and Python interpreters that can run the
//! package `fa3conform` (with torch for the device-loop tests).
#![allow(dead_code, reason = "each test crate uses part of it")]

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A command running `interpreter` in the repository root, with the `fa3conform` package
/// (`python/`) importable.
fn command_for(interpreter: &Path) -> Command {
    let mut command = Command::new(interpreter);
    command
        .current_dir(repo())
        .env("PYTHONPATH", repo().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    command
}

/// [`python`] in the repository root, with the `fa3conform` package (`python/`) importable.
pub fn python_command() -> Command {
    command_for(python())
}

/// [`torch_python`] in the repository root, with the `fa3conform` package importable.
pub fn torch_python_command() -> Command {
    command_for(torch_python())
}

/// What a test interpreter needs: a pinned requirements file, the variable that names an
/// interpreter that has them, and an import that proves it.
struct Environment {
    variable: &'static str,
    requirements: &'static str,
    folder: &'static str,
    import: &'static str,
}

/// What the Python side of the tests imports (numpy, safetensors, pytest for the plugin's tests).
const PLAIN: Environment = Environment {
    variable: "FA3CONFORM_PYTHON",
    requirements: "tests/python/requirements.txt",
    folder: "python-env",
    import: "import numpy, safetensors, pytest",
};

/// The same and torch, for the device-loop tests.
const WITH_TORCH: Environment = Environment {
    variable: "FA3CONFORM_TORCH_PYTHON",
    requirements: "tests/python/requirements-torch.txt",
    folder: "torch-env",
    import: "import numpy, safetensors, pytest, torch",
};

/// A Python interpreter with the packages of `tests/python/requirements.txt`.
///
/// `FA3CONFORM_PYTHON` names one (CI points it at the virtual environment `.ci/run` builds). Without
/// it the tests provision their own: a virtual environment under Cargo's test scratch folder, made
/// once from `python3` and reused while the requirements file is unchanged. A machine that can do
/// neither fails the test with the reason: a Python test never passes without running.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| interpreter(&PLAIN))
}

/// [`python`] with torch (`tests/python/requirements-torch.txt`), named by
/// `FA3CONFORM_TORCH_PYTHON` or provisioned the same way.
pub fn torch_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| interpreter(&WITH_TORCH))
}

fn interpreter(env: &Environment) -> PathBuf {
    let python = match std::env::var_os(env.variable) {
        Some(path) => PathBuf::from(path),
        None => provision_env(
            &Path::new(env!("CARGO_TARGET_TMPDIR")).join(env.folder),
            env.requirements,
        ),
    };
    let check = Command::new(&python)
        .args(["-c", env.import])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        check.status.success(),
        "{} cannot `{}` (pip install -r {}):\n{}",
        python.display(),
        env.import,
        env.requirements,
        String::from_utf8_lossy(&check.stderr)
    );
    python
}

/// Makes (or reuses) a virtual environment at `dir` holding `requirements`, and returns its
/// interpreter. Test binaries run at the same time, so a file lock serialises the making.
fn provision_env(dir: &Path, requirements_file: &str) -> PathBuf {
    let requirements = fs::read_to_string(repo().join(requirements_file)).expect(requirements_file);
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
                    "--no-cache-dir",
                    "--disable-pip-version-check",
                    "-r",
                ])
                .arg(repo().join(requirements_file)),
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
        "provisioning Python for the tests failed ({command:?}); set FA3CONFORM_PYTHON (or \
         FA3CONFORM_TORCH_PYTHON) to an interpreter with the requirements instead:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
