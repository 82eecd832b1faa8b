//! The Windows side of [`super`]: a job object per terminal. [`contain`] puts a terminal's
//! first process in a new job that ends its processes when closed; everything that process
//! starts joins the job, so ending the job ends the whole tree. There is no gentler signal
//! for a console's programs from outside the console: every [`TermSignal`] ends the job.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::{LazyLock, Mutex};

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, STILL_ACTIVE};
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

/// A job object's handle, closed (ending what is left in it) when dropped.
struct Job(HANDLE);

// SAFETY: a job handle may be used and closed from any thread.
unsafe impl Send for Job {}

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle is this value's own, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// The jobs of the terminals, by their first process's id.
static JOBS: LazyLock<Mutex<HashMap<u32, Job>>> = LazyLock::new(Default::default);

fn jobs() -> std::sync::MutexGuard<'static, HashMap<u32, Job>> {
    JOBS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A process handle, closed when dropped.
struct Process(HANDLE);

impl Process {
    fn open(pid: u32, access: u32) -> Option<Self> {
        // SAFETY: plain call; a null handle means no such process (or no access).
        let handle = unsafe { OpenProcess(access, 0, pid) };
        (!handle.is_null()).then_some(Process(handle))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: the handle is this value's own, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// Puts process `pid` (a terminal's first) in a job of its own that ends its processes when
/// the job is closed; what it starts from now on joins the job.
pub fn contain(pid: u32) -> std::io::Result<()> {
    // SAFETY: no attributes, no name: a new anonymous job.
    let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if handle.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    let job = Job(handle);
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
    if set == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let process = Process::open(pid, PROCESS_SET_QUOTA | PROCESS_TERMINATE)
        .ok_or_else(std::io::Error::last_os_error)?;
    // SAFETY: both handles are open.
    if unsafe { AssignProcessToJobObject(job.0, process.0) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    jobs().insert(pid, job);
    Ok(())
}

/// Closes the job of the terminal whose first process is `pid`, ending what is left in it.
pub fn release(pid: u32) {
    jobs().remove(&pid);
}

/// The job's list of process ids, as `QueryInformationJobObject` fills it.
#[repr(C)]
struct ProcessIdList {
    assigned: u32,
    listed: u32,
    ids: [usize; MOST_LISTED],
}

/// Live processes of the terminal whose first process is `sid`: its job's, or the process
/// alone when it has no job.
pub fn session_processes(sid: u32) -> Vec<u32> {
    let jobs = jobs();
    let Some(job) = jobs.get(&sid) else {
        return if alive(sid) { vec![sid] } else { Vec::new() };
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
    if ok == 0 {
        return Vec::new();
    }
    let listed = (list.listed as usize).min(MOST_LISTED);
    list.ids[..listed]
        .iter()
        .map(|id| *id as u32)
        .filter(|pid| alive(*pid))
        .collect()
}

fn alive(pid: u32) -> bool {
    let Some(process) = Process::open(pid, PROCESS_QUERY_LIMITED_INFORMATION) else {
        return false;
    };
    let mut code = 0u32;
    // SAFETY: the handle is open and `code` outlives the call.
    let ok = unsafe { GetExitCodeProcess(process.0, &mut code) };
    ok != 0 && code == STILL_ACTIVE as u32
}

/// Ends every process of the terminal whose first process is `sid` (its job, or the process
/// alone).
pub(super) fn signal_all(sid: u32, _sig: TermSignal) {
    if let Some(job) = jobs().get(&sid) {
        // SAFETY: the handle is open.
        unsafe { TerminateJobObject(job.0, 1) };
        return;
    }
    if let Some(process) = Process::open(sid, PROCESS_TERMINATE) {
        // SAFETY: the handle is open.
        unsafe { TerminateProcess(process.0, 1) };
    }
}

/// Starts `cmd` in a process group of its own (it gets no Ctrl-C meant for the hub); the
/// caller then [`contain`]s it.
pub fn new_group(cmd: &mut tokio::process::Command) {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP);
}

/// Ends the processes of the job of `pid` (one [`new_group`] started and [`contain`]ed).
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
