//! The `/proc` scan: which stream threads of which processes sleep in `futex` on a word of
//! the notify or count-notify file, and so on which notify.

use std::path::Path;
use std::time::Duration;

use super::*;

/// A thread found in `futex` on a word of one of the files.
pub(super) struct Sleeper {
    pub(super) pid: i32,
    pub(super) tid: i32,
    pub(super) name: String,
    /// Offset of the futex word in the file.
    pub(super) offset: usize,
    /// In the count-notify file (else the notify file).
    pub(super) cnt: bool,
}

/// The mappings of `path` in process `pid`: (start, end, file offset).
fn mappings(pid: i32, path: &Path) -> Vec<(usize, usize, usize)> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let want = path.to_string_lossy();
    let mut v = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(off), Some(_dev), Some(_inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let file: Vec<&str> = f.collect();
        let file = file.join(" ");
        let file = file.strip_suffix(" (deleted)").unwrap_or(&file);
        if file != want {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        if let (Ok(a), Ok(b), Ok(o)) = (
            usize::from_str_radix(a, 16),
            usize::from_str_radix(b, 16),
            usize::from_str_radix(off, 16),
        ) {
            v.push((a, b, o));
        }
    }
    v
}

/// `(syscall number, first argument)` from `/proc/<pid>/task/<tid>/syscall`, `Err` if it
/// cannot be read (permissions), `Ok(None)` if the thread is not in a system call.
fn syscall_of(pid: i32, tid: i32) -> std::io::Result<Option<(i64, usize)>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))?;
    let mut f = s.split_ascii_whitespace();
    let Some(nr) = f.next().and_then(|n| n.parse::<i64>().ok()) else {
        return Ok(None);
    };
    let arg = f
        .next()
        .and_then(|a| usize::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    Ok(arg.map(|a| (nr, a)))
}

pub(super) fn find_sleepers(
    path: &Path,
    cnt_path: Option<&Path>,
    procs: &[ProcSnap],
    problems: &mut Vec<String>,
) -> Vec<Sleeper> {
    let mut out = Vec::new();
    let mut denied = Vec::new();
    for p in procs.iter().filter(|p| p.alive == Liveness::Alive) {
        let maps = mappings(p.pid, path);
        let cnt_maps = cnt_path.map(|c| mappings(p.pid, c)).unwrap_or_default();
        if maps.is_empty() && cnt_maps.is_empty() {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", p.pid)) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let name = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", p.pid))
                .map(|s| s.trim_end().to_owned())
                .unwrap_or_default();
            // Waits sleep in chunks of at most 50 ms: a few samples catch them in futex.
            for attempt in 0..6 {
                match syscall_of(p.pid, tid) {
                    // The thread ended since the directory was listed: nothing to name.
                    Err(e)
                        if e.kind() == std::io::ErrorKind::NotFound
                            || e.raw_os_error() == Some(libc::ESRCH) =>
                    {
                        break;
                    }
                    Err(_) => {
                        if !denied.contains(&p.pid) {
                            denied.push(p.pid);
                        }
                        break;
                    }
                    Ok(Some((nr, addr))) if nr == libc::SYS_futex => {
                        let hit = |ms: &[(usize, usize, usize)]| {
                            ms.iter()
                                .find(|(a, b, _)| (*a..*b).contains(&addr))
                                .map(|(a, _, o)| addr - a + o)
                        };
                        if let Some(offset) = hit(&maps) {
                            out.push(Sleeper {
                                pid: p.pid,
                                tid,
                                name: name.clone(),
                                offset,
                                cnt: false,
                            });
                        } else if let Some(offset) = hit(&cnt_maps) {
                            out.push(Sleeper {
                                pid: p.pid,
                                tid,
                                name: name.clone(),
                                offset,
                                cnt: true,
                            });
                        }
                        break;
                    }
                    _ if attempt < 5 => std::thread::sleep(Duration::from_millis(2)),
                    _ => {}
                }
            }
        }
    }
    if !denied.is_empty() {
        problems.push(format!(
            "cannot read /proc/<pid>/task/*/syscall of pid(s) {denied:?} (ptrace restrictions): \
             their waiting threads are counted but not named"
        ));
    }
    out
}
