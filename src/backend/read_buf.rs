//! A read buffer for a session's output stream that starts small and grows while reads fill
//! it: an idle session holds 4 KiB instead of 64, a busy one still reads in large chunks.

/// The first size of a [`ReadBuf`].
const FIRST_BYTES: usize = 4 * 1024;

/// A read buffer that doubles, up to its maximum, each time a read fills it.
pub struct ReadBuf {
    buf: Vec<u8>,
    max_bytes: usize,
}

impl ReadBuf {
    /// A buffer that grows up to `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        ReadBuf {
            buf: vec![0; FIRST_BYTES.min(max_bytes)],
            max_bytes,
        }
    }

    /// Where the next read goes.
    pub fn space(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// The `n` bytes a read just returned; a full read makes the buffer grow for the next.
    pub fn filled(&mut self, n: usize) -> &[u8] {
        if n == self.buf.len() && n < self.max_bytes {
            // Growing keeps the bytes already read.
            self.buf.resize((n * 2).min(self.max_bytes), 0);
        }
        &self.buf[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_only_while_reads_fill_it_and_keeps_what_was_read() {
        let mut b = ReadBuf::new(16 * 1024);
        assert_eq!(b.space().len(), 4096);
        b.space()[..3].copy_from_slice(b"abc");
        assert_eq!(b.filled(3), b"abc");
        assert_eq!(b.space().len(), 4096, "a short read does not grow it");
        b.space().fill(b'x');
        assert_eq!(b.filled(4096).len(), 4096);
        assert!(b.filled(4096).iter().all(|&c| c == b'x'));
        assert_eq!(b.space().len(), 8192);
        b.filled(8192);
        b.filled(16384);
        assert_eq!(b.space().len(), 16 * 1024, "never past its maximum");
    }
}
