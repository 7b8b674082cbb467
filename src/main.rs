use clap::Parser;
use fa3conform::cli::{self, Cli};
use fa3conform::report::Status;
use std::process::ExitCode;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!(
            "fa3conform crashed: this is a bug, please report it with the command line and input.\n{info}"
        );
    }));
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let status = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cli::run(cli, &mut stdout.lock())
    }))
    .unwrap_or(Status::Internal);
    ExitCode::from(cli::exit_code(status))
}
