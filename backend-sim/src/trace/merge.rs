//! Merging a run's trace files into one timeline (with an arrow, a flow event pair, from
//! each record to the wait it released) and checking a timeline against the trace event
//! format.
//!
//! Which record released which wait: a traced record numbers itself on the notify's slot
//! just before it lands (`NotifySlot::trace_record_seq`), and a wait reads that number back
//! right after it took the flag (`seen`). The records numbered after the previous wait's
//! `seen` and up to this wait's were all begun in between; the first of them found the flag
//! clear and released this wait, the others landed on a flag already set (merged records,
//! SPEC §1), and are marked so. The numbering and the landing are two steps, so with two
//! records of one notify in flight at once (one numbered between a wait taking the flag and
//! reading the number, or two recorders interleaving) an arrow can be missing or start at the
//! other record; one recorder at a time, as a hand-off protocol has, is always linked right.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::{Map, Value, json};

use super::FILE_PREFIX;

/// A merged timeline.
#[derive(Debug, Default)]
pub struct Timeline {
    /// Every event: the metadata first, then the rest by time.
    pub events: Vec<Value>,
    /// Files read.
    pub files: usize,
    /// Lines that were not an event (a process killed in the middle of a write leaves one).
    pub skipped: usize,
    /// Record → wait arrows.
    pub arrows: usize,
    /// Records that landed on a flag already set (merged into an earlier one).
    pub merged: usize,
}

impl Timeline {
    /// The timeline as the format's JSON object form.
    pub fn to_json(&self) -> String {
        let doc = json!({"traceEvents": self.events, "displayTimeUnit": "ns"});
        serde_json::to_string(&doc).unwrap_or_else(|_| "{}".into())
    }
}

/// What [`validate`] counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Events in the document.
    pub events: usize,
    /// Tracks (pid, tid) that hold events other than metadata.
    pub tracks: usize,
    /// Matched flow start/finish pairs.
    pub flows: usize,
}

/// Reads every trace file of `dir` (`acl-notify-trace-<pid>.json`) and merges them.
pub fn merge_dir(dir: &Path) -> Result<Timeline, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut texts = Vec::new();
    for entry in rd.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(FILE_PREFIX) && name.ends_with(".json") {
            let p = entry.path();
            let text = std::fs::read_to_string(&p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            texts.push(text);
        }
    }
    if texts.is_empty() {
        return Err(format!(
            "{} holds no trace files ({FILE_PREFIX}<pid>.json): was {} set for the run?",
            dir.display(),
            super::ENV_TRACE
        ));
    }
    Ok(merge(&texts))
}

/// The events of one file: the array form, one event a line, closing bracket optional.
fn parse_file(text: &str, skipped: &mut usize) -> Vec<Value> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim().trim_end_matches(',');
        let l = l.trim_start_matches('[').trim_end_matches(']').trim();
        if l.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(l.trim_end_matches(',')) {
            Ok(v @ Value::Object(_)) => out.push(v),
            _ => *skipped += 1,
        }
    }
    out
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn int(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

fn text<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn track(v: &Value) -> (i64, i64) {
    (int(v, "pid").unwrap_or(0), int(v, "tid").unwrap_or(0))
}

/// Merges the texts of a run's trace files into one timeline.
pub fn merge(files: &[String]) -> Timeline {
    let mut t = Timeline {
        files: files.len(),
        ..Timeline::default()
    };
    // Metadata: the last name each process and track was given.
    let mut meta: BTreeMap<(i64, i64, String), Value> = BTreeMap::new();
    let mut events = Vec::new();
    for f in files {
        for e in parse_file(f, &mut t.skipped) {
            match text(&e, "ph") {
                Some("M") => {
                    let (pid, tid) = track(&e);
                    let name = text(&e, "name").unwrap_or("").to_owned();
                    meta.insert((pid, tid, name), e);
                }
                Some(_) if num(&e, "ts").is_some() => events.push(e),
                _ => t.skipped += 1,
            }
        }
    }
    events.sort_by(|a, b| {
        (track(a), num(a, "ts").unwrap_or(0.0))
            .partial_cmp(&(track(b), num(b, "ts").unwrap_or(0.0)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let flows = link(&mut events, &mut t);
    // Every process and track used gets a name, even if its metadata was lost.
    let used: BTreeSet<(i64, i64)> = events.iter().map(track).collect();
    for &(pid, tid) in &used {
        meta.entry((pid, 0, "process_name".into()))
            .or_insert_with(|| {
                json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                   "args": {"name": format!("pid {pid}")}})
            });
        meta.entry((pid, tid, "thread_name".into()))
            .or_insert_with(|| {
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                   "args": {"name": format!("thread {tid}")}})
            });
    }
    // Sort keys so that each track's rows come in a stable order (by process, then stream).
    for (i, &(pid, tid)) in used.iter().enumerate() {
        if let Some(m) = meta.get_mut(&(pid, tid, "thread_name".into())) {
            m["args"]["sort_index"] = json!(i);
        }
    }
    let mut all: Vec<Value> = meta.into_values().collect();
    let mut rest: Vec<Value> = events.into_iter().chain(flows).collect();
    rest.sort_by(|a, b| {
        num(a, "ts")
            .unwrap_or(0.0)
            .partial_cmp(&num(b, "ts").unwrap_or(0.0))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    all.extend(rest);
    t.events = all;
    t
}

/// Pairs records with the waits they released (see the module docs) and returns the flow
/// events; marks merged records in their `args`.
fn link(events: &mut [Value], t: &mut Timeline) -> Vec<Value> {
    // notify key → (record seq → event index), and its waits (seen, end ts, index).
    let mut records: HashMap<String, BTreeMap<u64, usize>> = HashMap::new();
    let mut waits: HashMap<String, Vec<(u64, f64, usize)>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let Some(args) = e.get("args") else { continue };
        let Some(key) = text(args, "notify_key") else {
            continue;
        };
        // A record that failed did not land; a wait that failed took nothing.
        if int(args, "result").is_some_and(|c| c != 0) {
            continue;
        }
        match (text(e, "name"), int(args, "seq"), int(args, "seen")) {
            (Some(n), Some(seq), _) if n.starts_with("record") => {
                records
                    .entry(key.to_owned())
                    .or_default()
                    .insert(seq as u64, i);
            }
            (Some(n), _, Some(seen)) if n.starts_with("wait") => {
                let end = num(e, "ts").unwrap_or(0.0) + num(e, "dur").unwrap_or(0.0);
                waits
                    .entry(key.to_owned())
                    .or_default()
                    .push((seen as u64, end, i));
            }
            _ => {}
        }
    }
    let mut flows = Vec::new();
    let mut id: u64 = 0;
    let mut keys: Vec<&String> = waits.keys().collect();
    keys.sort();
    for key in keys {
        let mut ws = waits[key].clone();
        ws.sort_by(|a, b| {
            (a.0, a.1)
                .partial_cmp(&(b.0, b.1))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let Some(recs) = records.get(key) else {
            continue;
        };
        // Before the first wait: every traced record number counts as "after the previous".
        let mut prev = ws.first().map_or(0, |w| {
            recs.range(..=w.0)
                .next()
                .map_or(w.0, |(&s, _)| s.saturating_sub(1))
        });
        for &(seen, _, wi) in &ws {
            let mut between = recs.range(prev + 1..=seen);
            if let Some((_, &ri)) = between.next() {
                let (r, w) = (&events[ri], &events[wi]);
                let (rp, rt) = track(r);
                let (wp, wt) = track(w);
                let rts = num(r, "ts").unwrap_or(0.0);
                let wstart = num(w, "ts").unwrap_or(0.0);
                let wend = wstart + num(w, "dur").unwrap_or(0.0);
                id += 1;
                flows.push(json!({"ph": "s", "cat": "notify", "name": "record → wait",
                    "id": id, "pid": rp, "tid": rt, "ts": rts}));
                flows.push(
                    json!({"ph": "f", "bp": "e", "cat": "notify", "name": "record → wait",
                    "id": id, "pid": wp, "tid": wt, "ts": wend.max(wstart)}),
                );
                t.arrows += 1;
                let ids: Vec<usize> = between.map(|(_, &i)| i).collect();
                for i in ids {
                    if let Some(Value::Object(a)) = events[i].get_mut("args") {
                        a.insert("merged".into(), Value::Bool(true));
                        t.merged += 1;
                    }
                }
            }
            prev = prev.max(seen);
        }
    }
    flows
}

/// Checks a timeline against the trace event format: every event has the fields its phase
/// needs, time stamps never go back on a track, every flow start has its finish (and the
/// other way round), begin and end events balance, and metadata names every process and
/// track that holds events.
pub fn validate(doc: &Value) -> Result<Checked, String> {
    let list = match doc {
        Value::Array(a) => a,
        Value::Object(o) => o
            .get("traceEvents")
            .and_then(Value::as_array)
            .ok_or("the object has no traceEvents array")?,
        _ => return Err("a trace is an array of events or an object with traceEvents".into()),
    };
    let mut last_ts: HashMap<(i64, i64), f64> = HashMap::new();
    let mut open: HashMap<(i64, i64), Vec<String>> = HashMap::new();
    let mut starts: HashMap<String, usize> = HashMap::new();
    let mut finishes: HashMap<String, usize> = HashMap::new();
    let mut named_procs = BTreeSet::new();
    let mut named_tracks = BTreeSet::new();
    let mut used = BTreeSet::new();
    for (i, e) in list.iter().enumerate() {
        let bad = |what: &str| format!("event {i} ({e}): {what}");
        let o: &Map<String, Value> = e.as_object().ok_or_else(|| bad("not an object"))?;
        let ph = text(e, "ph").ok_or_else(|| bad("no ph"))?;
        let pid = int(e, "pid").ok_or_else(|| bad("no integer pid"))?;
        let tid = int(e, "tid").ok_or_else(|| bad("no integer tid"))?;
        let name = text(e, "name").ok_or_else(|| bad("no name"))?;
        if ph == "M" {
            let n = e
                .get("args")
                .and_then(|a| text(a, "name"))
                .ok_or_else(|| bad("metadata without args.name"))?;
            if n.is_empty() {
                return Err(bad("empty metadata name"));
            }
            match name {
                "process_name" => {
                    named_procs.insert(pid);
                }
                "thread_name" => {
                    named_tracks.insert((pid, tid));
                }
                _ => {}
            }
            continue;
        }
        let ts = num(e, "ts").ok_or_else(|| bad("no numeric ts"))?;
        text(e, "cat").ok_or_else(|| bad("no cat"))?;
        used.insert((pid, tid));
        let last = last_ts.entry((pid, tid)).or_insert(f64::MIN);
        if ts < *last {
            return Err(bad(&format!(
                "ts {ts} goes back on its track (after {last})"
            )));
        }
        *last = ts;
        match ph {
            "X" => {
                let dur = num(e, "dur").ok_or_else(|| bad("X without dur"))?;
                if dur < 0.0 {
                    return Err(bad("negative dur"));
                }
            }
            "B" => open.entry((pid, tid)).or_default().push(name.to_owned()),
            "E" => {
                if open.entry((pid, tid)).or_default().pop().is_none() {
                    return Err(bad("E without its B"));
                }
            }
            "s" | "f" | "t" => {
                let id = o.get("id").ok_or_else(|| bad("flow event without id"))?;
                let key = format!("{}:{id}", text(e, "cat").unwrap_or(""));
                if ph == "s" {
                    *starts.entry(key).or_default() += 1;
                } else if ph == "f" {
                    if let Some(bp) = o.get("bp")
                        && bp != "e"
                    {
                        return Err(bad("bp other than \"e\""));
                    }
                    *finishes.entry(key).or_default() += 1;
                }
            }
            "i" | "I" | "C" => {}
            other => return Err(bad(&format!("unknown phase {other:?}"))),
        }
    }
    if let Some((t, names)) = open.iter().find(|(_, v)| !v.is_empty()) {
        return Err(format!(
            "track {t:?}: {} B event(s) without E ({names:?})",
            names.len()
        ));
    }
    for (k, n) in &starts {
        if finishes.get(k) != Some(n) {
            return Err(format!(
                "flow {k}: {n} start(s), {:?} finish(es)",
                finishes.get(k)
            ));
        }
    }
    if let Some(k) = finishes.keys().find(|k| !starts.contains_key(*k)) {
        return Err(format!("flow {k} finishes but never starts"));
    }
    for &(pid, tid) in &used {
        if !named_procs.contains(&pid) {
            return Err(format!("process {pid} has no process_name metadata"));
        }
        if !named_tracks.contains(&(pid, tid)) {
            return Err(format!("track {pid}/{tid} has no thread_name metadata"));
        }
    }
    Ok(Checked {
        events: list.len(),
        tracks: used.len(),
        flows: starts.values().sum(),
    })
}
