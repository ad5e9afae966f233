use std::process::ExitCode;

fn main() -> ExitCode {
    tradesim::cli::main()
}
