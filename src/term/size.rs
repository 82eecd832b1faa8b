//! A terminal's size.

/// Terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TermSize {
    pub cols: u16,
    pub rows: u16,
}
