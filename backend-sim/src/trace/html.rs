//! Rendering a merged timeline as one self-contained HTML page: the events embedded as JSON
//! and a script (`viewer.js`, inline) that draws a row per track, a box per event and an arrow
//! per record → wait flow with SVG. Nothing is loaded from the network.

use super::merge::{Checked, Timeline};

/// The drawing script, inlined into every page.
const VIEWER: &str = include_str!("viewer.js");

/// The page for `timeline`. `checked` is what [`validate`](super::merge::validate) counted:
/// the page states the number of tracks it must draw in `data-tracks-expected` on `<body>`,
/// and its script sets `data-tracks-drawn` once it has drawn them.
pub fn render(timeline: &Timeline, checked: &Checked, title: &str) -> String {
    // `</` inside the JSON would end the script element: JSON allows `\/` for `/`.
    let data = timeline.to_json().replace("</", "<\\/");
    let title = escape(title);
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n\
         <style>body{{font-family:sans-serif;margin:8px}} svg{{border:1px solid #ccc}}</style>\n\
         </head>\n<body data-tracks-expected=\"{tracks}\" data-arrows-expected=\"{arrows}\">\n\
         <h3>{title}</h3>\n<p>{tracks} tracks (one per process and stream), {arrows} arrows from a \
         record to the wait it released, {events} events. The same data opens in Perfetto or \
         chrome://tracing as the merged JSON file.</p>\n<div id=\"timeline\"></div>\n\
         <script type=\"application/json\" id=\"trace-data\">{data}</script>\n\
         <script>\n{VIEWER}</script>\n</body></html>\n",
        tracks = checked.tracks,
        arrows = checked.flows,
        events = checked.events,
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
