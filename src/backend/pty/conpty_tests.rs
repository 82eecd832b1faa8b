//! Host sessions through ConPTY, on Windows: `cmd.exe` (the default shell, `%COMSPEC%`) and
//! PowerShell answer lines, the console resizes, Ctrl-C reaches the program, and terminating
//! the session ends every process it started (its job object).
//!
//! Under Wine they skip, saying why: Wine 8's pseudo console does not connect a child's input
//! and output (a probe of `CreatePseudoConsole` showed the child writing to the parent's own
//! stdout, or to nothing). They run on Windows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::PtyBackend;
use crate::backend::{Backend, SpawnSpec, TermSize};
use crate::output::Output;
use crate::term::TermSignal;

const UNDER_WINE: &str = "Wine 8's pseudo console does not connect a child's input and output \
     (CreatePseudoConsole: the child writes to the parent's own stdout, or nowhere); ConPTY \
     sessions are tested on Windows only";

/// Whether this process runs under Wine (its ntdll exports `wine_get_version`).
fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: plain calls with NUL-ended names; ntdll is loaded in every process.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

/// Skips the test under Wine, saying why.
macro_rules! windows_only {
    () => {
        if under_wine() {
            eprintln!("SKIPPED: {UNDER_WINE}");
            return;
        }
    };
}

/// `program` on a ConPTY of 80x25 with the hub's usual environment for sessions.
fn start(program: &str) -> (PtyBackend, Arc<Output>) {
    let env = crate::platform::SESSION_ENV
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .collect();
    let spec = SpawnSpec {
        program: program.to_string(),
        args: Vec::new(),
        env,
        cwd: std::env::temp_dir(),
        size: TermSize { cols: 80, rows: 25 },
    };
    let output = Arc::new(Output::new(1 << 20));
    let backend = PtyBackend::spawn(&spec, output.clone()).expect("a ConPTY session starts");
    (backend, output)
}

/// Waits up to 20 s for `text` in everything the console printed.
async fn printed(output: &Output, text: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let all = output.read(Some(0), 1 << 20);
        if String::from_utf8_lossy(&all.bytes).contains(text) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn cmd_exe_the_default_shell_answers_a_line() {
    windows_only!();
    let shell = crate::platform::default_shell();
    assert!(shell.to_ascii_lowercase().ends_with("cmd.exe"), "{shell}");
    let (backend, output) = start(&shell);
    backend
        .write(b"echo conpty-%OS%-ok\r".to_vec())
        .await
        .unwrap();
    assert!(printed(&output, "conpty-Windows_NT-ok").await);
    backend.terminate(TermSignal::Term).await.unwrap();
}

#[tokio::test]
async fn powershell_answers_a_line_and_the_console_resizes() {
    windows_only!();
    let (backend, output) = start("powershell.exe");
    backend
        .resize(TermSize {
            cols: 101,
            rows: 33,
        })
        .await
        .unwrap();
    backend
        .write(b"Write-Output (\"ps-\" + $Host.UI.RawUI.WindowSize.Width)\r".to_vec())
        .await
        .unwrap();
    assert!(printed(&output, "ps-101").await);
    backend.terminate(TermSignal::Term).await.unwrap();
}

#[tokio::test]
async fn ctrl_c_stops_the_running_program_and_the_shell_goes_on() {
    windows_only!();
    let (backend, output) = start(&crate::platform::default_shell());
    backend
        .write(b"ping -n 60 127.0.0.1 & echo after-%OS%\r".to_vec())
        .await
        .unwrap();
    assert!(printed(&output, "Pinging").await);
    backend.write(b"\x03".to_vec()).await.unwrap();
    backend.write(b"echo still-%OS%\r".to_vec()).await.unwrap();
    assert!(printed(&output, "still-Windows_NT").await);
    backend.terminate(TermSignal::Term).await.unwrap();
}

#[tokio::test]
async fn terminating_a_session_ends_every_process_it_started() {
    windows_only!();
    let (backend, output) = start(&crate::platform::default_shell());
    let pid = backend.pid().expect("the console's first process");
    backend
        .write(b"start /b ping -n 120 127.0.0.1 >NUL & echo started-%OS%\r".to_vec())
        .await
        .unwrap();
    assert!(printed(&output, "started-Windows_NT").await);
    assert!(
        crate::process::session_processes(pid).len() >= 2,
        "the shell and its ping are in its job"
    );
    backend.terminate(TermSignal::Term).await.unwrap();
    assert!(crate::process::session_processes(pid).is_empty());
}
