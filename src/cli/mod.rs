//! The command line: one module per command. Every command that talks to a hub takes
//! `--hub URL` (or `AGENT_HUB_URL`) and `--json`.

mod agents;
mod attach;
mod audit;
mod budget;
mod completions;
mod console;
pub mod credential;
mod doctor;
mod engines;
mod external_sessions;
mod hook;
mod land;
pub mod logging;
mod mcp;
mod notify;
mod ops;
mod policy;
mod review;
mod run;
mod serve;
mod token;
mod usage;
mod wait_state;
mod workspace;

use clap::{Args, Parser, Subcommand};

/// Default hub URL for client commands.
pub const DEFAULT_HUB_URL: &str = "http://127.0.0.1:8100";

/// agent-hub: run CLI coding agents and steer their terminals.
#[derive(Debug, Parser)]
#[command(name = "agent-hub", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every client command.
#[derive(Debug, Clone, Args)]
pub struct ClientOpts {
    /// URL of the hub to talk to.
    #[arg(long, env = "AGENT_HUB_URL", default_value = DEFAULT_HUB_URL)]
    pub hub: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// API token. Without it: the file `AGENT_HUB_TOKEN_FILE` names (container agents get
    /// their credential that way), else the owner's token in the hub's data dir (`--data-dir`).
    #[arg(long, env = "AGENT_HUB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The data dir of the hub to talk to, where its owner's token is (default:
    /// $XDG_DATA_HOME/agent-hub, else ~/.local/share/agent-hub).
    #[arg(long, env = "AGENT_HUB_DATA_DIR")]
    pub data_dir: Option<std::path::PathBuf>,
}

impl ClientOpts {
    /// A client for the chosen hub, with the credential found (see [`credential::find`]).
    pub fn client(&self) -> crate::client::HubClient {
        let found = credential::find(self.token.as_deref(), self.data_dir.as_deref());
        crate::client::HubClient::new(&self.hub).with_credential(found.token, found.source)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the hub daemon (REST + WebSocket API).
    Serve(serve::ServeArgs),
    /// List sessions.
    #[command(alias = "list")]
    Ls(ops::LsArgs),
    /// Start a new session (a host PTY, or a tmux session with --tmux).
    New(ops::NewArgs),
    /// Print a session's recent output; with --follow, keep printing new output.
    Read(ops::ReadArgs),
    /// Print what a session's terminal shows (rendered: tail, viewport, or delta since a marker).
    Screen(ops::ScreenArgs),
    /// Find the one live session for an agent id, owner session id or label.
    Resolve(ops::ResolveArgs),
    /// Type one line into a session (or the agent's, with --to-agent) and press Enter.
    Send(ops::SendArgs),
    /// Press named keys in a session (Enter, Escape, Up, C-c, F5, y, ...).
    Keys(ops::KeysArgs),
    /// Run a shell command in a session; prints its output and exits with its exit code.
    Talk(ops::TalkArgs),
    /// Run a command as a task in its own PTY, print its output live and exit with its exit
    /// code (124 on timeout, 130 when cancelled); Ctrl-C cancels it.
    Run(run::RunArgs),
    /// Send a signal (SIGINT writes Ctrl-C, SIGQUIT Ctrl-\, SIGTERM/SIGKILL/SIGHUP terminate).
    Signal(ops::SignalArgs),
    /// Resize a session's terminal.
    Resize(ops::ResizeArgs),
    /// Kill a session: hang-up, then SIGKILL of everything left after a grace period.
    Kill(ops::KillArgs),
    /// Attach your terminal to a session (by session id, agent id or label); the detach key
    /// (default Ctrl-]) returns and leaves it running.
    Attach(attach::AttachArgs),
    /// Register sessions owned by another hub (or any bridge) so this hub lists, resolves and
    /// steers them as its own: `--bridge http://other:8100 --all`.
    Register(external_sessions::RegisterArgs),
    /// Remove a registered external session from this hub (its program is not touched).
    Unregister(external_sessions::UnregisterArgs),
    /// List container agents and their status.
    Agents(agents::AgentsArgs),
    /// Start container agents (several start at once) and wait until each is ready; each
    /// resumes its last conversation unless --fresh.
    Start(agents::StartArgs),
    /// Stop container agents: detach cleanly, then stop their containers.
    Stop(agents::AgentOpArgs),
    /// Restart container agents (resuming their conversations unless --fresh).
    Restart(agents::StartArgs),
    /// What an agent changed in its workspace against its base: commits, committed and
    /// uncommitted files with lines added and removed; --full prints the diffs.
    Diff(workspace::DiffArgs),
    /// An agent's workspace: `remove` deletes its checkout and keeps its branch.
    Workspace(workspace::WorkspaceArgs),
    /// Send a review note to an agent about its branch, on a file and line with --file and
    /// --line: it gets the note with the diff hunk of that line as a prompt (queued while it
    /// works).
    Review(review::ReviewArgs),
    /// Land an agent's branch on its base: merge (default), --squash, --rebase or --ff-only;
    /// --dry-run shows what would land. Refused while the base is checked out with uncommitted
    /// changes (BASE_DIRTY), on a conflict (MERGE_CONFLICT, nothing changed; --to-agent sends
    /// the conflicts to the agent) and while the agent is working unless --force.
    Merge(land::MergeArgs),
    /// Bring an agent's base into its branch (merged, or --rebase), its checkout updated.
    Update(land::UpdateArgs),
    /// Push an agent's branch to a remote of its repository (default origin) with your own git
    /// credentials; prints the branch and the remote's URL, for a pull request.
    Push(land::PushArgs),
    /// What agents spent (tokens by kind, dollars by the price table), read from their CLIs'
    /// own records: one AGENT by model, or every agent with team and fleet totals; --period
    /// today|week, --since/--until, --team, --json.
    Usage(usage::UsageArgs),
    /// Budgets: each agent's (its policy's `budget`) and each team's, what was spent in the
    /// period and when it renews; `set`, `lift` and `reset` change one at run time (admin).
    Budget(budget::BudgetArgs),
    /// The Docker engines the agents name: health, version, CPUs, memory left, and this hub's
    /// agents on each with their memory and CPU (from Docker's own stats); --json.
    Engines(engines::EnginesArgs),
    /// Outgoing webhooks (`[[notify]]`): what became of each one's messages; `test` sends a
    /// test message to each and reports each one's answer (admin).
    Notify(notify::NotifyArgs),
    /// Policies: `check` (dry run: what each policy would do now, and why), `list`, `reload`.
    Policy(policy::PolicyArgs),
    /// Show the audit log (who typed what where, what the guard refused); --follow streams it.
    Audit(audit::AuditArgs),
    /// Check this machine for what a hub needs (tmux, Docker engines and agent images, data
    /// dir, audit log, listen address and auth, a hub at --hub); explains each problem with a fix.
    Doctor(doctor::DoctorArgs),
    /// The owner's admin token: `rotate` it, print a dashboard sign-in `link`, or `show` it.
    Token(token::TokenArgs),
    /// Print a shell completion script: `agent-hub completions bash > /etc/bash_completion.d/agent-hub`.
    Completions(completions::CompletionsArgs),
    /// Wait until a session's (or agent's) state is one of STATES (idle, blocked, limited,
    /// working, stuck, exited); exits 0 when reached, 124 at the timeout.
    WaitState(wait_state::WaitStateArgs),
    /// Tell the hub an agent's own hook fired (run by the agent CLI's hooks, which the hub
    /// configures): `agent-hub hook Notification permission_prompt`. Always exits 0 unless
    /// --strict, so the CLI is never disturbed.
    Hook(hook::HookArgs),
    /// Serve the MCP tools k_pty and k_agents on stdin/stdout for an agent CLI
    /// (`claude mcp add agent-hub -- agent-hub mcp`), talking to the hub at --hub.
    Mcp(mcp::McpArgs),
}

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agent-hub: cannot start the async runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Ls(args) => ops::ls(args).await,
            Command::New(args) => ops::new(args).await,
            Command::Read(args) => ops::read(args).await,
            Command::Screen(args) => ops::screen(args).await,
            Command::Send(args) => ops::send(args).await,
            Command::Resolve(args) => ops::resolve(args).await,
            Command::Keys(args) => ops::keys(args).await,
            Command::Talk(args) => ops::talk(args).await,
            Command::Run(args) => run::run(args).await,
            Command::Signal(args) => ops::signal(args).await,
            Command::Resize(args) => ops::resize(args).await,
            Command::Kill(args) => ops::kill(args).await,
            Command::Attach(args) => attach::run(args).await,
            Command::Register(args) => external_sessions::register(args).await,
            Command::Unregister(args) => external_sessions::unregister(args).await,
            Command::Agents(args) => agents::list(args).await,
            Command::Start(args) => agents::run_op(args.op, "start", args.fresh).await,
            Command::Stop(args) => agents::run_op(args, "stop", false).await,
            Command::Restart(args) => agents::run_op(args.op, "restart", args.fresh).await,
            Command::Diff(args) => workspace::diff(args).await,
            Command::Workspace(args) => workspace::run(args).await,
            Command::Review(args) => review::run(args).await,
            Command::Merge(args) => land::merge(args).await,
            Command::Update(args) => land::update(args).await,
            Command::Push(args) => land::push(args).await,
            Command::Usage(args) => usage::run(args).await,
            Command::Budget(args) => budget::run(args).await,
            Command::Engines(args) => engines::run(args).await,
            Command::Notify(args) => notify::run(args).await,
            Command::Policy(args) => policy::run(args).await,
            Command::Audit(args) => audit::run(args).await,
            Command::Doctor(args) => doctor::run(args).await,
            Command::Completions(args) => completions::run(args),
            Command::Token(args) => token::run(args).await,
            Command::WaitState(args) => wait_state::run(args).await,
            Command::Hook(args) => hook::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
        }
    })
}
