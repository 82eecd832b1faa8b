//! The `agent-hub` binary: parse the command line and run it.

use clap::Parser;

fn main() {
    let cli = agent_hub::cli::Cli::parse();
    std::process::exit(agent_hub::cli::run(cli));
}
