//! Line framing: a byte stream cut into lines of bounded length, pure.

/// One unit cut from the input stream by [`LineSplitter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete line (newline and a trailing `\r` removed).
    Line(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded. `seen` is how many were
    /// seen before the limit was crossed (at least the limit plus one).
    TooLong {
        /// Bytes seen when the line was given up on.
        seen: usize,
    },
}

/// Cuts a byte stream into lines of at most `limit` bytes without ever buffering more
/// than `limit` bytes. Pure: feed it chunks, collect frames.
#[derive(Debug)]
pub struct LineSplitter {
    limit: usize,
    buf: Vec<u8>,
    discarding: bool,
}

impl LineSplitter {
    /// A splitter for lines of at most `limit` bytes.
    pub fn new(limit: usize) -> LineSplitter {
        LineSplitter { limit, buf: Vec::new(), discarding: false }
    }

    /// Feed a chunk; complete frames are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !chunk.is_empty() {
            let nl = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, ended) = match nl {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            chunk = rest;
            if self.discarding {
                if ended {
                    self.discarding = false;
                }
                continue;
            }
            if self.buf.len() + part.len() > self.limit {
                out.push(Frame::TooLong { seen: self.buf.len() + part.len() });
                self.buf = Vec::new();
                self.discarding = !ended;
                continue;
            }
            self.buf.extend_from_slice(part);
            if ended {
                out.push(Frame::Line(take_line(&mut self.buf)));
            }
        }
    }

    /// End of input: a last line without a newline is still a line.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        if !self.discarding && !self.buf.is_empty() {
            out.push(Frame::Line(take_line(&mut self.buf)));
        }
        self.discarding = false;
    }
}

fn take_line(buf: &mut Vec<u8>) -> Vec<u8> {
    let mut line = std::mem::take(buf);
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

/// Whether a line holds only whitespace (skipped silently, as JSON-lines readers do).
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_cuts_lines_and_discards_long_ones() {
        let mut s = LineSplitter::new(8);
        let mut out = Vec::new();
        s.push(b"abc\r\nde", &mut out);
        s.push(b"f\n0123456789", &mut out);
        s.push(b"more\nok\n", &mut out);
        s.push(b"tail", &mut out);
        s.finish(&mut out);
        assert_eq!(
            out,
            vec![
                Frame::Line(b"abc".to_vec()),
                Frame::Line(b"def".to_vec()),
                Frame::TooLong { seen: 10 },
                Frame::Line(b"ok".to_vec()),
                Frame::Line(b"tail".to_vec()),
            ]
        );
    }

    #[test]
    fn splitter_limit_is_inclusive_and_long_line_with_newline_in_same_chunk() {
        let mut s = LineSplitter::new(4);
        let mut out = Vec::new();
        s.push(b"1234\n12345\nx\n", &mut out);
        assert_eq!(out, vec![Frame::Line(b"1234".to_vec()), Frame::TooLong { seen: 5 }, Frame::Line(b"x".to_vec())]);
    }
}
