//! The byte search every echo row of either benchmark uses to see its token come back.

/// A search for `needle` at or after `from` in a buffer that grows between looks; each look
/// scans only what it has not scanned before.
pub struct Search<'a> {
    needle: &'a [u8],
    from: usize,
    scan: usize,
}

impl<'a> Search<'a> {
    pub fn new(needle: &'a [u8], from: usize) -> Self {
        Search {
            needle,
            from,
            scan: from,
        }
    }

    /// Where `needle` is in `buf`, once it is there.
    pub fn found_in(&mut self, buf: &[u8]) -> Option<usize> {
        let at = buf
            .get(self.scan..)?
            .windows(self.needle.len())
            .position(|w| w == self.needle)
            .map(|i| i + self.scan);
        // Resume where a match could still start.
        self.scan = (buf.len() + 1)
            .saturating_sub(self.needle.len())
            .max(self.from);
        at
    }
}
