//! Integration tests: a real hub on loopback, real PTYs, real tmux, real HTTP and WebSocket
//! clients. One test binary (modules below) keeps link time down.

mod docker_support;
mod support;

mod audit;
mod auth;
mod bad_input;
mod cli;
mod docker;
mod guard;
mod redaction;
mod routing;
mod sessions;
mod stream;
mod tasks;
mod term_read;
