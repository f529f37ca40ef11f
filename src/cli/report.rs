//! `symrun --report [PID]`: asks a running symrun for a hang report and renders it.
//!
//! SIGUSR1 to the symrun process makes it ask PE 0 for a report ([`symmem_bootstrap`'s
//! launcher](symmem_runtime::bootstrap::launcher)); PE 0 appends it, one JSON line, to the
//! job's report file ([`symmem_runtime::bootstrap::report_file`]), found here from the
//! symrun process's environment. The line that appears after the signal is rendered for
//! people: the root, why, each PE's state and the chain of waits.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use symmem_runtime::bootstrap::report_file;

/// How long `--report` waits for the report to appear.
pub const WAIT: Duration = Duration::from_secs(10);

/// The pid of this user's only running symrun (other than this process), or an error
/// listing them (or saying there is none).
pub fn only_symrun() -> Result<u32, String> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let me = std::process::id();
    let entries =
        std::fs::read_dir("/proc").map_err(|e| format!("listing /proc to find symrun: {e}"))?;
    let mut found: Vec<(u32, String)> = entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let dir = e.path();
            let mine = std::fs::metadata(&dir).ok()?.uid() == uid;
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            (pid != me && mine && comm.trim_end() == "symrun").then(|| (pid, command_line(&dir)))
        })
        .collect();
    found.sort();
    match found.as_slice() {
        [(pid, _)] => Ok(*pid),
        [] => Err(format!(
            "no running symrun of user {uid} was found in /proc; name the launcher's pid: symrun --report PID"
        )),
        many => Err(format!(
            "{} symrun processes of user {uid} are running; name one: symrun --report PID\n{}",
            many.len(),
            many.iter()
                .map(|(pid, cmd)| format!("  {pid}  {cmd}"))
                .collect::<Vec<_>>()
                .join("\n")
        )),
    }
}

/// A process's command line, its arguments separated by spaces.
fn command_line(proc_dir: &Path) -> String {
    std::fs::read(proc_dir.join("cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default()
}

/// The environment of process `pid` (`/proc/PID/environ`).
fn environment(pid: u32) -> Result<HashMap<String, OsString>, String> {
    let path = format!("/proc/{pid}/environ");
    let bytes = std::fs::read(&path)
        .map_err(|e| format!("reading {path} (is {pid} a running symrun of this user?): {e}"))?;
    Ok(bytes
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let at = kv.iter().position(|&b| b == b'=')?;
            let key = String::from_utf8(kv[..at].to_vec()).ok()?;
            Some((key, OsString::from_vec(kv[at + 1..].to_vec())))
        })
        .collect())
}

/// The report file of the job that symrun `pid` runs, from its environment.
pub fn file_of(pid: u32) -> Result<PathBuf, String> {
    let env = environment(pid)?;
    Ok(report_file::path(pid, |k| env.get(k).cloned()))
}

/// Sends SIGUSR1 to symrun `pid` and returns the asked-for report that then appears in
/// `file` (its JSON line), waiting up to `wait`; the error names what it waited for.
pub fn ask(pid: u32, file: &Path, wait: Duration) -> Result<String, String> {
    let start = std::fs::metadata(file).map_or(0, |m| m.len());
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("sending SIGUSR1 to process {pid}: {e}"));
    }
    let deadline = Instant::now() + wait;
    loop {
        if let Some(line) = new_asked_report(file, start) {
            return Ok(line);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no hang report appeared in {} within {} s of SIGUSR1 to process {pid}; \
                 is {pid} a symrun (or a self-launched program's launcher) whose PEs have \
                 initialised with the hang report on (SYMMEM_HANG_REPORT not 0)?",
                file.display(),
                wait.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first complete line past byte `start` of `file` that is an asked-for report.
fn new_asked_report(file: &Path, start: u64) -> Option<String> {
    let bytes = std::fs::read(file).ok()?;
    let fresh = bytes.get(usize::try_from(start).ok()?..)?;
    let text = String::from_utf8_lossy(fresh);
    let complete = &text[..text.rfind('\n')? + 1];
    complete
        .lines()
        .find(|l| l.contains("\"trigger\":\"asked\""))
        .map(str::to_string)
}

/// A JSON report line ([`ask`]) as people read it.
pub fn render(line: &str) -> Result<String, String> {
    let bad = |what: &str| format!("the hang report has no {what}: {line}");
    let v: Value = serde_json::from_str(line)
        .map_err(|e| format!("the hang report is not JSON ({e}): {line}"))?;
    let num = |v: &Value| v.as_u64().map_or("?".to_string(), |n| n.to_string());
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or("?").to_string();
    let reporter = v["reporter"].as_u64().ok_or_else(|| bad("reporter"))?;
    let reason = v["reason"].as_str().ok_or_else(|| bad("reason"))?;
    let summary = v["summary"].as_str().ok_or_else(|| bad("summary"))?;
    let mut out = format!("hang report from PE {reporter}\n");
    if reason == "no hang" {
        out += &format!("{summary}\n");
    } else {
        out += &format!("root: {summary} [{reason}]\n");
    }
    for pe in v["pes"].as_array().ok_or_else(|| bad("pes"))? {
        let secs = pe["secs"].as_f64().unwrap_or(0.0);
        let state = match pe["state"].as_str() {
            Some("waiting") => {
                let within = match pe["team"].as_str() {
                    Some(team) => format!(" ({team}, call #{})", num(&pe["seq"])),
                    None => String::new(),
                };
                format!(
                    "waiting {secs:.1} s in {}{within}: {}",
                    text(pe, "op"),
                    text(pe, "detail")
                )
            }
            Some("outside") => format!("outside symmem (in user code) for {secs:.1} s"),
            Some("not answering") => {
                format!("not answering: dead or stopped ({})", text(pe, "why"))
            }
            _ => format!("in an unknown state: {pe}"),
        };
        out += &format!("  PE {}: {state}\n", num(&pe["pe"]));
    }
    let chain: Vec<String> = v["chain"]
        .as_array()
        .map(|c| c.iter().map(|p| format!("PE {}", num(p))).collect())
        .unwrap_or_default();
    if !chain.is_empty() {
        out += &format!("chain: {}\n", chain.join(" -> "));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_renders_its_root_states_and_chain() {
        let line = r#"{"reporter":0,"trigger":"asked","root":[1],"reason":"in user code","summary":"PE 1 is in user code, outside symmem for 2.0 s","chain":[0,1],"pes":[{"pe":0,"state":"waiting","op":"barrier_all","detail":"PE 1","secs":2.000,"team":"TEAM_WORLD","members":[0,1],"seq":3},{"pe":1,"state":"outside","secs":2.000},{"pe":2,"state":"not answering","why":"timed out"}]}"#;
        let r = render(line).unwrap();
        assert_eq!(
            r,
            "hang report from PE 0\n\
             root: PE 1 is in user code, outside symmem for 2.0 s [in user code]\n  \
             PE 0: waiting 2.0 s in barrier_all (TEAM_WORLD, call #3): PE 1\n  \
             PE 1: outside symmem (in user code) for 2.0 s\n  \
             PE 2: not answering: dead or stopped (timed out)\n\
             chain: PE 0 -> PE 1\n"
        );
        let none = r#"{"reporter":1,"trigger":"asked","root":[],"reason":"no hang","summary":"no hang: every PE is outside symmem or running","chain":[],"pes":[{"pe":0,"state":"outside","secs":1.0}]}"#;
        let r = render(none).unwrap();
        assert!(
            r.starts_with("hang report from PE 1\nno hang: every PE"),
            "{r}"
        );
        assert!(!r.contains("chain"), "{r}");
        let err = render("{\"reporter\":0}").unwrap_err();
        assert!(err.contains("no reason"), "{err}");
    }

    #[test]
    fn only_asked_for_complete_lines_past_the_start_count() {
        let file = std::env::temp_dir().join(format!("symmem-report-{}.jsonl", std::process::id()));
        let old = "{\"reporter\":0,\"trigger\":\"asked\",\"old\":1}\n";
        std::fs::write(&file, old).unwrap();
        let start = old.len() as u64;
        assert_eq!(new_asked_report(&file, start), None);
        let slow = "{\"reporter\":0,\"trigger\":\"slow wait\"}\n";
        let half = "{\"reporter\":0,\"trigger\":\"asked\"";
        std::fs::write(&file, format!("{old}{slow}{half}")).unwrap();
        assert_eq!(
            new_asked_report(&file, start),
            None,
            "an unfinished line waits"
        );
        std::fs::write(&file, format!("{old}{slow}{half}}}\n")).unwrap();
        assert_eq!(
            new_asked_report(&file, start).as_deref(),
            Some("{\"reporter\":0,\"trigger\":\"asked\"}")
        );
        std::fs::remove_file(&file).unwrap();
    }
}
