//! HTML helpers shared by the evidence section and the report.

/// Text made safe inside HTML elements.
pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
