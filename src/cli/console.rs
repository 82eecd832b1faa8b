//! The local terminal `agent-hub attach` runs in, where Unix and Windows differ: on Windows
//! (Windows Terminal, conhost) the console must be told to pass keys through as VT sequences
//! and to interpret the VT the session prints, and it has no SIGWINCH, so its size is looked
//! at four times a second. On Unix a raw-mode terminal already speaks VT and SIGWINCH tells
//! of resizes.

/// VT in and out on the console while it lives (nothing to do on Unix).
pub struct VtConsole {
    #[cfg(windows)]
    restore: Vec<(windows_sys::Win32::Foundation::HANDLE, u32)>,
    /// The input code page to put back, when it was changed to UTF-8.
    #[cfg(windows)]
    code_page: Option<u32>,
}

#[cfg(unix)]
impl VtConsole {
    pub fn enable() -> Self {
        VtConsole {}
    }
}

#[cfg(windows)]
impl VtConsole {
    /// Keys as VT sequences on stdin, in UTF-8, VT interpreted on stdout (each mode put back
    /// when dropped); a handle that is not a console is left alone.
    pub fn enable() -> Self {
        use windows_sys::Win32::System::Console::{
            GetConsoleCP, GetConsoleMode, GetStdHandle, SetConsoleCP, SetConsoleMode,
            DISABLE_NEWLINE_AUTO_RETURN, ENABLE_VIRTUAL_TERMINAL_INPUT,
            ENABLE_VIRTUAL_TERMINAL_PROCESSING, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
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
        // SAFETY: plain calls on the process's console.
        let code_page = unsafe { GetConsoleCP() };
        // SAFETY: likewise; 65001 is UTF-8.
        let utf8 = code_page != 0 && unsafe { SetConsoleCP(65001) } != 0;
        VtConsole {
            restore,
            code_page: utf8.then_some(code_page),
        }
    }
}

#[cfg(windows)]
impl Drop for VtConsole {
    fn drop(&mut self) {
        for (handle, mode) in &self.restore {
            // SAFETY: the handles are the process's standard ones, still open.
            unsafe { windows_sys::Win32::System::Console::SetConsoleMode(*handle, *mode) };
        }
        if let Some(code_page) = self.code_page {
            // SAFETY: plain call on the process's console.
            unsafe { windows_sys::Win32::System::Console::SetConsoleCP(code_page) };
        }
    }
}

/// Reads the keys typed (bytes, as the terminal sends them); 0 at the input's end.
#[cfg(unix)]
pub fn read_keys(buf: &mut [u8]) -> std::io::Result<usize> {
    std::io::Read::read(&mut std::io::stdin(), buf)
}

/// Reads the keys typed, as the console sends them with VT input on (UTF-8, see
/// [`VtConsole::enable`]); 0 at the input's end. Straight from the handle: std's console
/// reader takes a Ctrl-Z (0x1a) for the input's end, and it is a key here.
#[cfg(windows)]
pub fn read_keys(buf: &mut [u8]) -> std::io::Result<usize> {
    use windows_sys::Win32::Storage::FileSystem::ReadFile;
    use windows_sys::Win32::System::Console::{GetStdHandle, STD_INPUT_HANDLE};
    let mut read = 0u32;
    let len = buf.len().min(u32::MAX as usize) as u32;
    // SAFETY: the process's own stdin; `buf` and `read` outlive the call.
    let ok = unsafe {
        ReadFile(
            GetStdHandle(STD_INPUT_HANDLE),
            buf.as_mut_ptr(),
            len,
            &mut read,
            std::ptr::null_mut(),
        )
    };
    match ok {
        0 => Err(std::io::Error::last_os_error()),
        _ => Ok(read as usize),
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
