//! Reading a large manifest file a window at a time, so that its text and the objects decoded
//! from it are not all in memory at once (a 150 MiB dump would otherwise hold its whole text
//! beside the objects until the last one is decoded).
//!
//! The result is the one of reading the file whole: the file is cut at the same document
//! markers (`split_documents` cuts greedily from each piece's start, and every window starts at a
//! piece's start), the pieces are processed in order, and a file this cannot read the same way
//! (not UTF-8, or holding directives, which keep a stream in one piece) is read whole.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use super::{Loader, PIECE_BYTES};
use crate::yaml;

/// Files at least this large are read window by window.
pub(super) const STREAM_MIN_BYTES: u64 = 2 * WINDOW_BYTES as u64;

/// How much text is read at a time (a window also holds the unfinished piece carried over).
const WINDOW_BYTES: usize = 512 << 10;

/// The message `read_to_string` gives for text that is not UTF-8.
const NOT_UTF8: &str = "stream did not contain valid UTF-8";

/// Can `path` be read window by window with the result of reading it whole: is it UTF-8 without
/// a directive line (`%YAML`, `%TAG`)? Errors are the reader's.
pub(super) fn streamable(path: &Path) -> std::io::Result<bool> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut tail = Vec::new();
    let mut line_start = true;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(tail.is_empty());
        }
        let chunk = &buf[..n];
        if (line_start && chunk[0] == b'%') || chunk.windows(2).any(|w| w == b"\n%") {
            return Ok(false);
        }
        line_start = chunk[n - 1] == b'\n';
        tail.extend_from_slice(chunk);
        match std::str::from_utf8(&tail) {
            Ok(_) => tail.clear(),
            Err(e) if e.error_len().is_none() => {
                tail.drain(..e.valid_up_to());
            }
            Err(_) => return Ok(false),
        }
    }
}

impl Loader<'_> {
    /// Reads the file at `path` (named `name` in messages) window by window. A read error leaves
    /// nothing of the file, as when it is read whole.
    pub(super) fn add_file_streaming(&mut self, name: &str, path: &Path) {
        self.add_file_in_windows(name, path, WINDOW_BYTES);
    }

    fn add_file_in_windows(&mut self, name: &str, path: &Path, window: usize) {
        let before = self.mark();
        if let Err(e) = self.stream(&name.into(), path, window) {
            self.rollback(before);
            self.error(name, None, format!("cannot read: {e}"));
        }
    }

    fn stream(&mut self, file: &Arc<str>, path: &Path, window: usize) -> std::io::Result<()> {
        let mut reader = std::fs::File::open(path)?;
        let mut bytes: Vec<u8> = Vec::new();
        let mut text = String::new();
        let mut line_base = 0u32;
        loop {
            let eof = read_window(&mut reader, &mut bytes, window)?;
            move_utf8(&mut bytes, &mut text, eof)?;
            let pieces = yaml::split_documents(&text, PIECE_BYTES);
            // Without the end of the file, the last piece may be cut short: it is carried over.
            let whole = if eof { pieces.len() } else { pieces.len() - 1 };
            if whole == 0 {
                continue;
            }
            let end = pieces.get(whole).map_or(text.len(), |p| p.0);
            self.add_pieces(file, &text[..end], &pieces[..whole], line_base);
            let Some(&(carried, lines)) = pieces.get(whole) else { return Ok(()) };
            line_base += lines;
            text.drain(..carried);
        }
    }

    /// How much each list holds, to go back to.
    fn mark(&self) -> Mark {
        Mark {
            objects: self.manifests.objects.len(),
            provided_templates: self.manifests.provided_templates.len(),
            warnings: self.manifests.warnings.len(),
            ignored: self.manifests.ignored.clone(),
            identities: self.identities.len(),
            merged_identities: self.merged_identities.len(),
            errors: self.errors.len(),
        }
    }

    fn rollback(&mut self, m: Mark) {
        self.manifests.objects.truncate(m.objects);
        self.manifests.provided_templates.truncate(m.provided_templates);
        self.manifests.warnings.truncate(m.warnings);
        self.manifests.ignored = m.ignored;
        self.identities.truncate(m.identities);
        self.merged_identities.truncate(m.merged_identities);
        self.errors.truncate(m.errors);
    }
}

/// What a [`Loader`] held before a file.
struct Mark {
    objects: usize,
    provided_templates: usize,
    warnings: usize,
    ignored: std::collections::BTreeMap<(String, String), usize>,
    identities: usize,
    merged_identities: usize,
    errors: usize,
}

/// Appends up to a window of bytes; true at the end of the file.
fn read_window(reader: &mut impl Read, bytes: &mut Vec<u8>, window: usize) -> std::io::Result<bool> {
    let got = reader.by_ref().take(window as u64).read_to_end(bytes)?;
    Ok(got < window)
}

/// Moves the UTF-8 text at the front of `bytes` to `text`, keeping a character cut by the window's
/// end for the next window.
fn move_utf8(bytes: &mut Vec<u8>, text: &mut String, eof: bool) -> std::io::Result<()> {
    let valid = match std::str::from_utf8(bytes) {
        Ok(s) => s.len(),
        Err(e) if e.error_len().is_none() && !eof => e.valid_up_to(),
        Err(_) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, NOT_UTF8)),
    };
    let s = std::str::from_utf8(&bytes[..valid]).map_err(|_| std::io::Error::other(NOT_UTF8))?;
    text.push_str(s);
    bytes.drain(..valid);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump of `n` pods, with a multi-byte character in every name.
    fn dump(n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            s.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-{i}\n  labels: {{a: \"é{i}\"}}\nspec:\n  containers: [{{name: c, image: i}}]\n"
            ));
        }
        s
    }

    fn write(text: &str) -> tempfile_path::TempPath {
        tempfile_path::TempPath::new(text)
    }

    /// A file in the temporary directory, removed when dropped.
    mod tempfile_path {
        pub struct TempPath(pub std::path::PathBuf);
        impl TempPath {
            pub fn new(text: &str) -> TempPath {
                static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let p = std::env::temp_dir().join(format!("muster-stream-{}-{n}.yaml", std::process::id()));
                std::fs::write(&p, text).expect("temp file");
                TempPath(p)
            }
        }
        impl Drop for TempPath {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn a_file_read_window_by_window_loads_as_read_whole() {
        // Many windows (some smaller than a piece), with an error near the end to check its line.
        let mut text = dump(20_000);
        text.push_str("---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: 3}\n");
        let window = PIECE_BYTES + 1000;
        assert!(text.len() > 4 * window);
        let f = write(&text);
        assert!(streamable(&f.0).unwrap());
        let mut streamed = Loader::default();
        streamed.add_file_in_windows("f.yaml", &f.0, window);
        let mut whole = Loader::default();
        whole.add_text("f.yaml", &text);
        assert_eq!(streamed.manifests.objects, whole.manifests.objects);
        assert_eq!(streamed.errors, whole.errors);
        assert_eq!(streamed.errors.len(), 1);
        let ids = |l: &Loader| l.all_identities().map(|i| i.display.to_string()).collect::<Vec<_>>();
        assert_eq!(ids(&streamed), ids(&whole));
    }

    #[test]
    fn directives_or_bytes_that_are_not_utf8_keep_a_file_whole() {
        let f = write("%YAML 1.2\n---\na: 1\n");
        assert!(!streamable(&f.0).unwrap());
        let f = write("---\na: 1\n%TAG ! tag:x,2000:\n---\nb: 2\n");
        assert!(!streamable(&f.0).unwrap());
        let f = tempfile_path::TempPath(std::env::temp_dir().join(format!("muster-stream-bin-{}", std::process::id())));
        std::fs::write(&f.0, b"---\na: \xff\n").unwrap();
        assert!(!streamable(&f.0).unwrap());
    }

    #[test]
    fn a_character_cut_by_a_window_is_kept_for_the_next() {
        let mut bytes = "aé".as_bytes().to_vec();
        bytes.pop();
        let mut text = String::new();
        move_utf8(&mut bytes, &mut text, false).unwrap();
        assert_eq!((text.as_str(), bytes.len()), ("a", 1));
        assert!(move_utf8(&mut bytes, &mut text, true).is_err());
    }
}
