//! Integration tests: a real hub on loopback, real PTYs, real tmux, real HTTP and WebSocket
//! clients. One test binary (modules below) keeps link time down.

mod browser_support;
mod docker_support;
mod hooks;
mod hub_process;
mod model_standin;
mod persist;
mod support;

mod agent_state;
mod api_document;
mod audit;
mod auth;
mod bad_input;
mod bridge;
mod cli;
mod cli_targets;
mod dashboard;
mod dashboard_restart;
mod docker;
mod guard;
mod hub_image;
mod layering;
mod leader;
mod mcp;
mod metrics;
mod ops_cli;
mod policy;
mod policy_support;
mod real_cli;
mod real_cli_aider;
mod real_cli_docker;
mod real_cli_gemini;
mod real_cli_hooks;
mod real_cli_opencode;
mod redaction;
mod resume;
mod routing;
mod scope;
mod secure_default;
mod sessions;
mod stream;
mod tasks;
mod term_read;
mod words;
mod workspace;
