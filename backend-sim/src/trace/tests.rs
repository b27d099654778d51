//! Tests of the timeline's merge, its check against the trace event format, and the page.

use serde_json::{Value, json};

use super::html;
use super::merge::{Checked, merge, validate};

/// A file as a process writes it: the opening bracket, then one event a line, no closing one.
fn file(events: &[Value]) -> String {
    let mut s = String::from("[\n");
    for e in events {
        s.push_str(&e.to_string());
        s.push_str(",\n");
    }
    s
}

fn meta(pid: i64, tid: i64) -> Vec<Value> {
    vec![
        json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": format!("rank {pid}")}}),
        json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "stream 0x1 (device 0)"}}),
    ]
}

fn x(pid: i64, tid: i64, name: &str, ts: f64, dur: f64, args: Value) -> Value {
    json!({"ph": "X", "cat": "notify", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})
}

/// Process 1 records notify K three times (the third merges into the second); process 2
/// waits twice.
fn two_files() -> Vec<String> {
    let rec = |seq: u64, ts: f64| {
        x(
            1,
            11,
            "record notify 3",
            ts,
            0.5,
            json!({"notify_key": "0/0/3/1", "seq": seq, "result": 0}),
        )
    };
    let wait = |seen: u64, ts: f64, dur: f64| {
        x(
            2,
            21,
            "wait notify 3",
            ts,
            dur,
            json!({"notify_key": "0/0/3/1", "seen": seen, "result": 0}),
        )
    };
    let mut a = meta(1, 11);
    a.extend([rec(1, 10.0), rec(2, 30.0), rec(3, 31.0)]);
    let mut b = meta(2, 21);
    b.extend([wait(1, 5.0, 5.5), wait(3, 20.0, 11.5)]);
    vec![file(&a), file(&b)]
}

#[test]
fn a_merged_timeline_is_valid_and_links_first_records() {
    let t = merge(&two_files());
    let doc: Value = serde_json::from_str(&t.to_json()).unwrap();
    let c = validate(&doc).unwrap();
    assert_eq!((c.tracks, c.flows), (2, 2), "{c:?}");
    assert_eq!((t.arrows, t.merged, t.skipped), (2, 1, 0));
    let ev = doc["traceEvents"].as_array().unwrap();
    // Flow starts sit on records 1 and 2 (their ts), not on the merged record 3.
    let starts: Vec<f64> = ev
        .iter()
        .filter(|e| e["ph"] == "s")
        .map(|e| e["ts"].as_f64().unwrap())
        .collect();
    assert_eq!(starts, vec![10.0, 30.0]);
    let merged: Vec<&Value> = ev.iter().filter(|e| e["args"]["merged"] == true).collect();
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0]["args"]["seq"], 3);
    // Metadata comes first, then events by time.
    assert_eq!(ev[0]["ph"], "M");
    let ts: Vec<f64> = ev
        .iter()
        .filter(|e| e["ph"] != "M")
        .map(|e| e["ts"].as_f64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
}

#[test]
fn failed_tasks_get_no_arrow_and_lost_metadata_is_filled_in() {
    let a = file(&[x(
        7,
        70,
        "record notify 1",
        1.0,
        1.0,
        json!({"notify_key": "k", "seq": 1, "result": 507011}),
    )]);
    let b = file(&[x(
        8,
        80,
        "wait notify 1",
        0.0,
        3.0,
        json!({"notify_key": "k", "seen": 1, "result": 0}),
    )]);
    let t = merge(&[a, b]);
    assert_eq!(t.arrows, 0);
    let doc: Value = serde_json::from_str(&t.to_json()).unwrap();
    assert_eq!(validate(&doc).unwrap().tracks, 2);
}

#[test]
fn a_truncated_last_line_is_skipped() {
    let mut files = two_files();
    files[1].push_str("{\"ph\": \"X\", \"na");
    let t = merge(&files);
    assert_eq!(t.skipped, 1);
    assert!(validate(&serde_json::from_str(&t.to_json()).unwrap()).is_ok());
}

fn invalid(events: Vec<Value>) -> String {
    validate(&Value::Array(events)).expect_err("must be refused")
}

#[test]
fn the_check_refuses_what_the_format_does_not_allow() {
    let m = meta(1, 2);
    let with = |extra: Vec<Value>| m.iter().cloned().chain(extra).collect::<Vec<_>>();
    let ok = x(1, 2, "a", 1.0, 1.0, json!({}));
    assert!(validate(&Value::Array(with(vec![ok.clone()]))).is_ok());
    // X without dur.
    let mut no_dur = ok.clone();
    no_dur.as_object_mut().unwrap().remove("dur");
    assert!(invalid(with(vec![no_dur])).contains("without dur"));
    // No ts, no pid.
    let mut no_ts = ok.clone();
    no_ts.as_object_mut().unwrap().remove("ts");
    assert!(invalid(with(vec![no_ts])).contains("ts"));
    let mut no_pid = ok.clone();
    no_pid.as_object_mut().unwrap().remove("pid");
    assert!(invalid(with(vec![no_pid])).contains("pid"));
    // Time going back on a track.
    assert!(
        invalid(with(vec![x(1, 2, "a", 5.0, 1.0, json!({})), ok.clone()])).contains("goes back")
    );
    // A flow start without its finish, and a finish without a start.
    let s =
        json!({"ph": "s", "cat": "notify", "name": "f", "id": 1, "pid": 1, "tid": 2, "ts": 1.0});
    let f = json!({"ph": "f", "bp": "e", "cat": "notify", "name": "f", "id": 1, "pid": 1, "tid": 2, "ts": 2.0});
    assert!(validate(&Value::Array(with(vec![s.clone(), f.clone()]))).is_ok());
    assert!(invalid(with(vec![s])).contains("flow"));
    assert!(invalid(with(vec![f])).contains("flow"));
    // B without E, E without B.
    let b = json!({"ph": "B", "cat": "c", "name": "b", "pid": 1, "tid": 2, "ts": 1.0});
    let e = json!({"ph": "E", "cat": "c", "name": "b", "pid": 1, "tid": 2, "ts": 2.0});
    assert!(validate(&Value::Array(with(vec![b.clone(), e.clone()]))).is_ok());
    assert!(invalid(with(vec![b])).contains("without E"));
    assert!(invalid(with(vec![e])).contains("without its B"));
    // A track or a process that no metadata names.
    assert!(invalid(with(vec![x(1, 3, "a", 1.0, 1.0, json!({}))])).contains("thread_name"));
    assert!(invalid(vec![m[1].clone(), ok]).contains("process_name"));
    // Not a trace at all.
    assert!(validate(&json!(3)).is_err());
}

#[test]
fn the_page_is_self_contained_and_escapes_the_data() {
    let mut files = two_files();
    files.push(file(&[
        json!({"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "</script><b>"}}),
    ]));
    let t = merge(&files);
    let c: Checked = validate(&serde_json::from_str(&t.to_json()).unwrap()).unwrap();
    let page = html::render(&t, &c, "a <title>");
    assert!(page.contains("data-tracks-expected=\"2\""));
    assert!(page.contains("data-arrows-expected=\"2\""));
    assert!(
        !page.contains("</script><b>"),
        "the data cannot end its script element"
    );
    assert!(page.contains("a &lt;title&gt;"));
    assert!(
        !page.contains(" src=") && !page.contains("href=\"http"),
        "nothing is loaded"
    );
    assert!(
        page.contains("data-tracks-drawn"),
        "the script marks what it drew"
    );
}
