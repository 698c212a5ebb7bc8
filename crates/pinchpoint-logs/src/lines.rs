//! Lines of a log read in chunks, as `pinchpoint.collect.logs` reads them: a line longer
//! than `max_line` bytes is cut to its first `max_line` bytes (the rest is skipped), the
//! last line may lack its newline, and reading from an offset inside a line skips that
//! line (it predates the offset).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use memchr::memchr;

/// Bytes read from the file at a time.
pub const CHUNK: usize = 1 << 20;

pub struct Lines<R> {
    src: R,
    buf: Vec<u8>,
    chunk: usize,
    max_line: usize,
    pos: usize,
    end: usize,
    eof: bool,
    /// Inside a line whose start was skipped or already given: drop up to its newline.
    skipping: bool,
}

impl<R: Read> Lines<R> {
    /// Lines of `src` from its start; `chunk` bytes are read at a time.
    pub fn new(src: R, chunk: usize, max_line: usize) -> Lines<R> {
        let chunk = chunk.max(1);
        let max_line = max_line.max(1);
        Lines {
            src,
            buf: vec![0; chunk + max_line],
            chunk,
            max_line,
            pos: 0,
            end: 0,
            eof: false,
            skipping: false,
        }
    }

    /// The next line, without its newline (a `\r` before it is kept); None at the end.
    /// The line is `self.line(range)`, valid until the next call.
    pub fn next_line(&mut self) -> io::Result<Option<(usize, usize)>> {
        loop {
            if let Some(off) = memchr(b'\n', &self.buf[self.pos..self.end]) {
                let (start, stop) = (self.pos, self.pos + off);
                self.pos = stop + 1;
                if std::mem::take(&mut self.skipping) {
                    continue;
                }
                return Ok(Some((start, stop.min(start + self.max_line))));
            }
            if self.skipping {
                self.pos = self.end;
            } else if self.end - self.pos >= self.max_line {
                let start = self.pos;
                self.pos += self.max_line;
                self.skipping = true;
                return Ok(Some((start, start + self.max_line)));
            }
            if self.eof {
                if self.pos < self.end {
                    let start = self.pos;
                    self.pos = self.end;
                    return Ok(Some((start, self.end)));
                }
                return Ok(None);
            }
            self.fill()?;
        }
    }

    pub fn line(&self, (start, stop): (usize, usize)) -> &[u8] {
        &self.buf[start..stop]
    }

    /// Moves what is left to the front of the buffer and reads up to a chunk after it.
    fn fill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        let room = (self.buf.len() - self.end).min(self.chunk);
        let n = loop {
            match self.src.read(&mut self.buf[self.end..self.end + room]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        self.end += n;
        self.eof = n == 0;
        Ok(())
    }
}

impl Lines<File> {
    /// The lines of the file at `path` from byte `offset` (from 0 if the file is now
    /// shorter); None if the file does not exist.
    pub fn open(
        path: &Path,
        offset: u64,
        chunk: usize,
        max_line: usize,
    ) -> io::Result<Option<Lines<File>>> {
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let offset = if offset > file.metadata()?.len() {
            0
        } else {
            offset
        };
        let mut cut = false;
        if offset > 0 {
            file.seek(SeekFrom::Start(offset - 1))?;
            let mut byte = [0u8];
            cut = file.read(&mut byte)? == 0 || byte[0] != b'\n';
        }
        let mut lines = Lines::new(file, chunk, max_line);
        lines.skipping = cut;
        Ok(Some(lines))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(data: &[u8], chunk: usize, max_line: usize) -> Vec<Vec<u8>> {
        let mut lines = Lines::new(data, chunk, max_line);
        let mut out = Vec::new();
        while let Some(r) = lines.next_line().unwrap() {
            out.push(lines.line(r).to_vec());
        }
        out
    }

    #[test]
    fn lines_across_chunks_with_a_last_line_without_newline() {
        let data = b"one\ntwo\r\n\nthree";
        for chunk in [1, 2, 3, 5, 64] {
            let got = all(data, chunk, 100);
            assert_eq!(
                got,
                vec![&b"one"[..], b"two\r", b"", b"three"],
                "chunk {chunk}"
            );
        }
        assert!(all(b"", 4, 10).is_empty());
        assert_eq!(all(b"\n", 4, 10), vec![b"".to_vec()]);
    }

    #[test]
    fn long_lines_are_cut_and_their_rest_skipped() {
        let data = b"abcdefgh\nabcd\nabcde\nxyz";
        for chunk in [1, 3, 64] {
            let got = all(data, chunk, 4);
            assert_eq!(
                got,
                vec![&b"abcd"[..], b"abcd", b"abcd", b"xyz"],
                "chunk {chunk}"
            );
        }
        assert_eq!(all(b"abcdefgh", 3, 4), vec![b"abcd".to_vec()]);
    }

    #[test]
    fn an_offset_inside_a_line_skips_that_line() {
        let dir = std::env::temp_dir().join(format!("pp-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        std::fs::write(&path, b"first\nsecond\nthird\n").unwrap();
        let read = |offset| {
            let mut lines = Lines::open(&path, offset, 4, 100).unwrap().unwrap();
            let mut out = Vec::new();
            while let Some(r) = lines.next_line().unwrap() {
                out.push(String::from_utf8(lines.line(r).to_vec()).unwrap());
            }
            out
        };
        assert_eq!(read(0), ["first", "second", "third"]);
        assert_eq!(read(6), ["second", "third"]);
        assert_eq!(read(7), ["third"]);
        assert_eq!(read(19), Vec::<String>::new());
        assert_eq!(read(1000), ["first", "second", "third"]);
        assert!(Lines::open(&dir.join("missing.log"), 0, 4, 100)
            .unwrap()
            .is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
