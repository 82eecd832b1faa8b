//! The local terminal `agent-hub attach` runs in, where Unix and Windows differ: on Windows
//! (Windows Terminal, conhost) the console must be told to pass keys through as VT sequences
//! and to interpret the VT the session prints, and it has no SIGWINCH, so its size is looked
//! at four times a second. On Unix a raw-mode terminal already speaks VT and SIGWINCH tells
//! of resizes.

/// VT in and out on the console while it lives (nothing to do on Unix).
pub struct VtConsole {
    #[cfg(windows)]
    restore: Vec<(windows_sys::Win32::Foundation::HANDLE, u32)>,
}

#[cfg(unix)]
impl VtConsole {
    pub fn enable() -> Self {
        VtConsole {}
    }
}

#[cfg(windows)]
impl VtConsole {
    /// Keys as VT sequences on stdin, VT interpreted on stdout (each mode put back when
    /// dropped); a handle that is not a console is left alone.
    pub fn enable() -> Self {
        use windows_sys::Win32::System::Console::{
            GetConsoleMode, GetStdHandle, SetConsoleMode, DISABLE_NEWLINE_AUTO_RETURN,
            ENABLE_VIRTUAL_TERMINAL_INPUT, ENABLE_VIRTUAL_TERMINAL_PROCESSING, STD_INPUT_HANDLE,
            STD_OUTPUT_HANDLE,
        };
        let wanted = [
            (STD_INPUT_HANDLE, ENABLE_VIRTUAL_TERMINAL_INPUT),
            (
                STD_OUTPUT_HANDLE,
                ENABLE_VIRTUAL_TERMINAL_PROCESSING | DISABLE_NEWLINE_AUTO_RETURN,
            ),
        ];
        let mut restore = Vec::new();
        for (which, flags) in wanted {
            // SAFETY: plain calls on the process's own standard handles; `mode` outlives them.
            unsafe {
                let handle = GetStdHandle(which);
                let mut mode = 0u32;
                if handle.is_null() || GetConsoleMode(handle, &mut mode) == 0 {
                    continue;
                }
                if SetConsoleMode(handle, mode | flags) != 0 {
                    restore.push((handle, mode));
                }
            }
        }
        VtConsole { restore }
    }
}

#[cfg(windows)]
impl Drop for VtConsole {
    fn drop(&mut self) {
        for (handle, mode) in &self.restore {
            // SAFETY: the handles are the process's standard ones, still open.
            unsafe { windows_sys::Win32::System::Console::SetConsoleMode(*handle, *mode) };
        }
    }
}

/// The local terminal's resizes.
pub struct Resizes {
    #[cfg(unix)]
    winch: tokio::signal::unix::Signal,
    #[cfg(not(unix))]
    last: Option<(u16, u16)>,
}

impl Resizes {
    pub fn new() -> Result<Self, String> {
        #[cfg(unix)]
        return Ok(Resizes {
            winch: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
                .map_err(|e| e.to_string())?,
        });
        #[cfg(not(unix))]
        return Ok(Resizes {
            last: crossterm::terminal::size().ok(),
        });
    }

    /// Waits for the next resize (`None`: no more will be told).
    pub async fn next(&mut self) -> Option<()> {
        #[cfg(unix)]
        return self.winch.recv().await;
        #[cfg(not(unix))]
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            let now = crossterm::terminal::size().ok();
            if now != self.last {
                self.last = now;
                return Some(());
            }
        }
    }
}
