//! A bounded byte ring addressed by absolute offsets. Offset 0 is the first byte a session
//! ever produced; offsets only grow, so any reader can ask for "everything since N" and be told
//! exactly how much was evicted before it. Pure: no locking, no async.

use std::collections::VecDeque;

/// The retained tail of a session's output.
#[derive(Debug)]
pub struct Scrollback {
    bytes: VecDeque<u8>,
    capacity_bytes: usize,
    /// Absolute offset just past the last byte ever appended.
    end_offset: u64,
}

/// A slice of retained output, with where it sits in the absolute stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub bytes: Vec<u8>,
    /// Absolute offset of `bytes[0]`.
    pub start_offset: u64,
    /// Absolute offset just past the last byte of `bytes`.
    pub end_offset: u64,
    /// Bytes between the requested offset and `start_offset` that were evicted and are lost.
    pub dropped_bytes: u64,
}

impl Scrollback {
    /// An empty ring holding at most `capacity_bytes` (at least 1).
    pub fn new(capacity_bytes: usize) -> Self {
        let capacity_bytes = capacity_bytes.max(1);
        Scrollback {
            bytes: VecDeque::with_capacity(capacity_bytes.min(1 << 20)),
            capacity_bytes,
            end_offset: 0,
        }
    }

    /// Appends output, evicting the oldest bytes beyond capacity.
    pub fn append(&mut self, data: &[u8]) {
        self.end_offset += data.len() as u64;
        let data = if data.len() > self.capacity_bytes {
            &data[data.len() - self.capacity_bytes..]
        } else {
            data
        };
        let overflow = (self.bytes.len() + data.len()).saturating_sub(self.capacity_bytes);
        self.bytes.drain(..overflow);
        self.bytes.extend(data);
    }

    /// Absolute offset of the oldest retained byte.
    pub fn start_offset(&self) -> u64 {
        self.end_offset - self.bytes.len() as u64
    }

    /// Absolute offset just past the newest byte.
    pub fn end_offset(&self) -> u64 {
        self.end_offset
    }

    /// Up to `max_bytes` starting at `since` (clamped into the retained range); `dropped_bytes`
    /// counts what was evicted between `since` and the first returned byte.
    pub fn read_since(&self, since: u64, max_bytes: usize) -> Chunk {
        let start = since.clamp(self.start_offset(), self.end_offset);
        let dropped_bytes = start - since.min(start);
        let skip = (start - self.start_offset()) as usize;
        let take = (self.bytes.len() - skip).min(max_bytes);
        self.collect(skip, take, dropped_bytes)
    }

    /// The most recent `max_bytes` (never reports drops: the caller asked for the tail).
    pub fn read_tail(&self, max_bytes: usize) -> Chunk {
        let take = self.bytes.len().min(max_bytes);
        self.collect(self.bytes.len() - take, take, 0)
    }

    fn collect(&self, skip: usize, take: usize, dropped_bytes: u64) -> Chunk {
        let start_offset = self.start_offset() + skip as u64;
        // Copy the (at most two) contiguous runs of the ring, not byte by byte.
        let (front, back) = self.bytes.as_slices();
        let mut bytes = Vec::with_capacity(take);
        let end = skip + take;
        if skip < front.len() {
            bytes.extend_from_slice(&front[skip..end.min(front.len())]);
        }
        if end > front.len() {
            bytes.extend_from_slice(&back[skip.saturating_sub(front.len())..end - front.len()]);
        }
        Chunk {
            end_offset: start_offset + bytes.len() as u64,
            start_offset,
            bytes,
            dropped_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_eviction_and_report_drops_exactly() {
        let mut ring = Scrollback::new(10);
        ring.append(b"0123456789");
        ring.append(b"abcd");
        assert_eq!(ring.start_offset(), 4);
        assert_eq!(ring.end_offset(), 14);
        let c = ring.read_since(1, 100);
        assert_eq!(c.bytes, b"456789abcd");
        assert_eq!((c.start_offset, c.end_offset, c.dropped_bytes), (4, 14, 3));
        let c = ring.read_since(12, 100);
        assert_eq!(c.bytes, b"cd");
        assert_eq!(c.dropped_bytes, 0);
    }

    #[test]
    fn read_since_respects_max_and_future_offsets() {
        let mut ring = Scrollback::new(100);
        ring.append(b"hello world");
        let c = ring.read_since(0, 5);
        assert_eq!((c.bytes.as_slice(), c.end_offset), (&b"hello"[..], 5));
        let c = ring.read_since(50, 5);
        assert!(c.bytes.is_empty());
        assert_eq!((c.start_offset, c.end_offset, c.dropped_bytes), (11, 11, 0));
    }

    #[test]
    fn a_chunk_larger_than_capacity_keeps_its_tail() {
        let mut ring = Scrollback::new(4);
        ring.append(b"abcdefgh");
        assert_eq!(ring.read_tail(100).bytes, b"efgh");
        assert_eq!(ring.read_since(0, 100).dropped_bytes, 4);
        assert_eq!(ring.end_offset(), 8);
    }

    #[test]
    fn tail_returns_most_recent_bytes() {
        let mut ring = Scrollback::new(100);
        ring.append(b"one two three");
        let c = ring.read_tail(5);
        assert_eq!(c.bytes, b"three");
        assert_eq!((c.start_offset, c.end_offset), (8, 13));
    }

    #[test]
    fn many_small_appends_match_a_reference_model() {
        let mut ring = Scrollback::new(37);
        let mut all = Vec::new();
        for i in 0..500u32 {
            let piece: Vec<u8> = (0..(i % 13)).map(|j| (i + j) as u8).collect();
            ring.append(&piece);
            all.extend_from_slice(&piece);
            let since = (all.len() as u64).saturating_sub(50);
            let c = ring.read_since(since, usize::MAX);
            let kept_from = all.len().saturating_sub(37);
            assert_eq!(c.bytes, &all[kept_from.max(since as usize)..]);
            assert_eq!(c.dropped_bytes, (kept_from as u64).saturating_sub(since));
        }
    }
}
