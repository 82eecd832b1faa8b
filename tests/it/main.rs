//! Integration tests: a real hub on loopback, real PTYs, real tmux, real HTTP and WebSocket
//! clients. One test binary (modules below) keeps link time down.

mod support;

mod bad_input;
mod cli;
mod sessions;
mod stream;
