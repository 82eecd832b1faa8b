//! The Windows side of [`super`]: a job object per terminal. [`contain`] opens a handle to a
//! terminal's first process and puts it in a new job that ends its processes when closed;
//! everything that process starts from then on joins the job, so ending the job ends the whole
//! tree. There is no gentler signal for a console's programs from outside the console: every
//! [`TermSignal`] ends the job.
//!
//! Only what [`contain`] holds is ever ended: the held process handle keeps its id from being
//! given to another process, and once [`release`]d (the terminal ended), nothing is left to
//! end, so a later kill or look touches no process that merely has the same id now.
//!
//! A gap remains: the process runs before it is put in its job (neither portable-pty nor
//! tokio starts one suspended), so what it starts in its first instant is not in the job.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::{LazyLock, Mutex};

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_MORE_DATA, HANDLE, STILL_ACTIVE,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicProcessIdList,
    JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, TerminateProcess, CREATE_NEW_PROCESS_GROUP,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SET_QUOTA, PROCESS_TERMINATE,
};

use crate::term::TermSignal;

/// The most processes of one job listed at once.
const MOST_LISTED: usize = 1024;

/// A handle, closed when dropped.
struct Handle(HANDLE);

// SAFETY: a process or job handle may be used and closed from any thread.
unsafe impl Send for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle is this value's own, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// What is held of a terminal: its first process, and its job (none when the process could
/// not be put in one: then only that process is ended).
struct Held {
    process: Handle,
    /// Declared after the process: dropped last, ending what is left in the job.
    job: Option<Handle>,
}

/// What is held of each terminal, by its first process's id.
static HELD: LazyLock<Mutex<HashMap<u32, Held>>> = LazyLock::new(Default::default);

fn held() -> std::sync::MutexGuard<'static, HashMap<u32, Held>> {
    HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Holds process `pid` (a terminal's first) and puts it in a job of its own that ends its
/// processes when closed. Without a job (an error here) the process alone is held and ended.
pub fn contain(pid: u32) -> std::io::Result<()> {
    let access = PROCESS_SET_QUOTA | PROCESS_TERMINATE | PROCESS_QUERY_LIMITED_INFORMATION;
    // SAFETY: plain call; a null handle means no such process (or no access).
    let process = unsafe { OpenProcess(access, 0, pid) };
    if process.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    let process = Handle(process);
    let job = new_job().and_then(|job| {
        // SAFETY: both handles are open.
        match unsafe { AssignProcessToJobObject(job.0, process.0) } {
            0 => Err(std::io::Error::last_os_error()),
            _ => Ok(job),
        }
    });
    let (job, result) = match job {
        Ok(job) => (Some(job), Ok(())),
        Err(e) => (None, Err(e)),
    };
    held().insert(pid, Held { process, job });
    result
}

/// A new job that ends its processes when its last handle is closed.
fn new_job() -> std::io::Result<Handle> {
    // SAFETY: no attributes, no name: a new anonymous job.
    let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if handle.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    let job = Handle(handle);
    // SAFETY: an all-zero limit information is valid; only the flag is set.
    let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: the pointer and size are those of `limits`, which outlives the call.
    let set = unsafe {
        SetInformationJobObject(
            job.0,
            JobObjectExtendedLimitInformation,
            &limits as *const _ as *const c_void,
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        )
    };
    match set {
        0 => Err(std::io::Error::last_os_error()),
        _ => Ok(job),
    }
}

/// Lets go of the terminal whose first process is `pid` (it ended): its job is closed, ending
/// what is left in it, and nothing of it is ended or looked at again.
pub fn release(pid: u32) {
    held().remove(&pid);
}

/// The job's list of process ids, as `QueryInformationJobObject` fills it.
#[repr(C)]
struct ProcessIdList {
    assigned: u32,
    listed: u32,
    ids: [usize; MOST_LISTED],
}

/// Live processes of the terminal whose first process is `sid`: its job's, or its first
/// process alone when it has no job; none once it is released (or was never held).
pub fn session_processes(sid: u32) -> Vec<u32> {
    let held = held();
    let Some(terminal) = held.get(&sid) else {
        return Vec::new();
    };
    let first_alone = || match alive(&terminal.process) {
        true => vec![sid],
        false => Vec::new(),
    };
    let Some(job) = &terminal.job else {
        return first_alone();
    };
    let mut list = Box::new(ProcessIdList {
        assigned: 0,
        listed: 0,
        ids: [0; MOST_LISTED],
    });
    // SAFETY: the pointer and size are those of `list`, which outlives the call.
    let ok = unsafe {
        QueryInformationJobObject(
            job.0,
            JobObjectBasicProcessIdList,
            &mut *list as *mut ProcessIdList as *mut c_void,
            std::mem::size_of::<ProcessIdList>() as u32,
            std::ptr::null_mut(),
        )
    };
    // More than fit: the first ones listed say enough (some are alive).
    // SAFETY: plain call, right after the failed one.
    if ok == 0 && unsafe { GetLastError() } != ERROR_MORE_DATA {
        return first_alone();
    }
    let listed = (list.listed as usize).min(MOST_LISTED);
    list.ids[..listed].iter().map(|id| *id as u32).collect()
}

fn alive(process: &Handle) -> bool {
    let mut code = 0u32;
    // SAFETY: the handle is open and `code` outlives the call.
    let ok = unsafe { GetExitCodeProcess(process.0, &mut code) };
    ok != 0 && code == STILL_ACTIVE as u32
}

/// Ends every process of the terminal whose first process is `sid` (its job, or the process
/// alone); nothing when it is not held.
pub(super) fn signal_all(sid: u32, _sig: TermSignal) {
    let held = held();
    let Some(terminal) = held.get(&sid) else {
        return;
    };
    // SAFETY: the handles are open.
    unsafe {
        match &terminal.job {
            Some(job) => TerminateJobObject(job.0, 1),
            None => TerminateProcess(terminal.process.0, 1),
        }
    };
}

/// Starts `cmd` in a process group of its own (it gets no Ctrl-C meant for the hub); the
/// caller then [`contain`]s it.
pub fn new_group(cmd: &mut tokio::process::Command) {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP);
}

/// Ends the processes of `pid`'s job (one [`new_group`] started and [`contain`]ed) and lets
/// go of it; a second call finds nothing held and does nothing.
pub fn kill_group(pid: u32) {
    signal_all(pid, TermSignal::Kill);
    release(pid);
}

/// No `/proc` to ask: `None`.
pub fn session_of(_pid: u32) -> Option<u32> {
    None
}

/// No `/proc` to read another process's environment from: `None`.
pub fn environ(_pid: u32) -> Option<BTreeMap<String, String>> {
    None
}
