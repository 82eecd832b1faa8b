//! Integration tests: a real hub on loopback, real PTYs, real tmux, real HTTP and WebSocket
//! clients. One test binary (modules below) keeps link time down.

mod docker_support;
mod support;

mod bad_input;
mod cli;
mod docker;
mod sessions;
mod stream;
mod term_read;
