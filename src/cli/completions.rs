//! `agent-hub completions SHELL`: the shell completion script, generated from the command
//! line's own definition (clap_complete), on stdout.

use clap::{Args, CommandFactory};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

pub fn run(args: CompletionsArgs) -> i32 {
    use std::io::Write;
    let mut command = super::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "agent-hub", &mut script);
    // A closed pipe (`| head`) is the reader's choice, not an error worth a panic.
    match std::io::stdout().write_all(&script) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("agent-hub: cannot write the completion script: {e}");
            1
        }
    }
}
