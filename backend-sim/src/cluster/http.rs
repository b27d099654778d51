//! The smallest HTTP/1.1 client the etcd JSON gateway needs: `POST` a JSON body to one
//! endpoint, over a fresh loopback/LAN TCP connection, with every step bounded by a deadline,
//! and read the answer whole (unary calls) or as a stream of newline-separated JSON messages
//! (`/v3/watch`). Plain HTTP only: etcd's client port without TLS, as the simulator's cluster
//! mode documents.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Largest answer accepted (a range over a whole prefix of this simulator stays far below).
const MAX_BODY: usize = 16 << 20;

/// Why a request failed.
#[derive(Debug)]
pub enum HttpError {
    /// No connection, a reset, or no answer before the deadline: try another endpoint.
    Io(io::Error),
    /// The server answered with a non-2xx status; the body (etcd's JSON error) is kept.
    Status(u16, String),
    /// The answer is not HTTP as this client reads it.
    Malformed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Io(e) if e.kind() == io::ErrorKind::WouldBlock => f.write_str("timed out"),
            HttpError::Io(e) => write!(f, "{e}"),
            HttpError::Status(s, body) => write!(f, "HTTP {s}: {}", body.trim()),
            HttpError::Malformed(m) => write!(f, "malformed answer: {m}"),
        }
    }
}

impl From<io::Error> for HttpError {
    fn from(e: io::Error) -> Self {
        HttpError::Io(e)
    }
}

/// An answer being read: its body, de-chunked if the server chunked it.
pub struct Response {
    reader: BufReader<TcpStream>,
    /// `Some(n)`: `n` bytes of a `Content-Length` body left; `None`: chunked.
    left: Option<usize>,
    /// Bytes left in the current chunk (chunked bodies).
    chunk_left: usize,
    done: bool,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("left", &self.left)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

fn remaining(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(io::Error::new(io::ErrorKind::WouldBlock, "deadline passed"))
    } else {
        Ok(left)
    }
}

/// Sends `POST path` with `body` to `addr`. Connecting, sending and reading the status line and
/// headers all end by `deadline`; the body is read by the caller ([`Response::read_all`] within
/// the same deadline, or [`Response::next_line`] with a per-read timeout).
pub fn post(
    addr: &SocketAddr,
    path: &str,
    body: &[u8],
    deadline: Instant,
) -> Result<Response, HttpError> {
    let stream = TcpStream::connect_timeout(addr, remaining(deadline)?)?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(remaining(deadline)?))?;
    stream.set_read_timeout(Some(remaining(deadline)?))?;
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    head.extend_from_slice(body);
    (&stream).write_all(&head)?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    read_line(&mut reader, &mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| HttpError::Malformed(format!("status line {:?}", line.trim())))?;
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        read_line(&mut reader, &mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((name, value)) = l.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| HttpError::Malformed(format!("Content-Length {value:?}")))?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                && value.eq_ignore_ascii_case("chunked")
            {
                chunked = true;
            }
        }
    }
    let left = match (chunked, length) {
        (true, _) => None,
        (false, Some(n)) if n <= MAX_BODY => Some(n),
        (false, Some(n)) => return Err(HttpError::Malformed(format!("{n}-byte body"))),
        // `Connection: close` without a length: the body runs to the end of the stream.
        (false, None) => Some(MAX_BODY),
    };
    let mut r = Response {
        reader,
        left,
        chunk_left: 0,
        done: false,
    };
    if !(200..300).contains(&status) {
        let body = r.read_all(deadline).unwrap_or_default();
        return Err(HttpError::Status(
            status,
            String::from_utf8_lossy(&body).into_owned(),
        ));
    }
    Ok(r)
}

fn read_line(r: &mut BufReader<TcpStream>, line: &mut String) -> Result<(), HttpError> {
    let n = r.by_ref().take(8192).read_line(line)?;
    if n == 0 {
        return Err(HttpError::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed mid-answer",
        )));
    }
    Ok(())
}

impl Response {
    /// Reads up to `buf.len()` body bytes; 0 at the end of the body.
    fn read_body(&mut self, buf: &mut [u8]) -> Result<usize, HttpError> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if let Some(left) = self.left {
            let want = buf.len().min(left);
            let n = self.reader.read(&mut buf[..want])?;
            if n == 0 {
                self.done = true;
            }
            self.left = Some(left - n);
            if left - n == 0 {
                self.done = true;
            }
            return Ok(n);
        }
        if self.chunk_left == 0 {
            let mut size = String::new();
            read_line(&mut self.reader, &mut size)?;
            let hex = size.trim().split(';').next().unwrap_or("");
            let n = usize::from_str_radix(hex, 16)
                .map_err(|_| HttpError::Malformed(format!("chunk size {:?}", size.trim())))?;
            if n == 0 {
                self.done = true;
                return Ok(0);
            }
            if n > MAX_BODY {
                return Err(HttpError::Malformed(format!("{n}-byte chunk")));
            }
            self.chunk_left = n;
        }
        let want = buf.len().min(self.chunk_left);
        let n = self.reader.read(&mut buf[..want])?;
        if n == 0 {
            return Err(HttpError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed inside a chunk",
            )));
        }
        self.chunk_left -= n;
        if self.chunk_left == 0 {
            let mut crlf = [0u8; 2];
            self.reader.read_exact(&mut crlf)?;
        }
        Ok(n)
    }

    /// The whole body, read by `deadline`.
    pub fn read_all(&mut self, deadline: Instant) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            self.reader
                .get_ref()
                .set_read_timeout(Some(remaining(deadline)?))?;
            let n = self.read_body(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            if out.len() + n > MAX_BODY {
                return Err(HttpError::Malformed("body too large".into()));
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// The next newline-terminated message of a streamed body, waiting at most `timeout` for
    /// each read: `Ok(None)` at the end of the body, `Err(Io(WouldBlock or TimedOut))` if
    /// nothing came in time (the caller may call again; a partial message is kept in `pending`).
    pub fn next_line(
        &mut self,
        pending: &mut Vec<u8>,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, HttpError> {
        loop {
            if let Some(i) = pending.iter().position(|&b| b == b'\n') {
                let rest = pending.split_off(i + 1);
                let mut line = std::mem::replace(pending, rest);
                line.pop();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(line));
            }
            self.reader.get_ref().set_read_timeout(Some(timeout))?;
            let mut buf = [0u8; 8192];
            let n = self.read_body(&mut buf)?;
            if n == 0 {
                return Ok(None);
            }
            if pending.len() + n > MAX_BODY {
                return Err(HttpError::Malformed("streamed message too large".into()));
            }
            pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Closes the connection (ends a streamed call, such as a watch, from this side).
    pub fn close(self) {
        let _ = self.reader.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

/// Whether `e` is a read that found nothing within its timeout (not a broken connection).
pub fn is_timeout(e: &HttpError) -> bool {
    matches!(e, HttpError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Serves one canned answer on a loopback port.
    fn serve(answer: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            s.write_all(answer).unwrap();
        });
        addr
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn reads_length_and_chunked_bodies() {
        let a = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        let body = post(&a, "/x", b"{}", soon()).unwrap().read_all(soon());
        assert_eq!(body.unwrap(), b"hello");
        let a = serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab\n\r\n4\r\ncd\ne\r\n0\r\n\r\n");
        let mut r = post(&a, "/x", b"{}", soon()).unwrap();
        let mut pending = Vec::new();
        let t = Duration::from_secs(5);
        assert_eq!(r.next_line(&mut pending, t).unwrap().unwrap(), b"ab");
        assert_eq!(r.next_line(&mut pending, t).unwrap().unwrap(), b"cd");
        assert_eq!(r.next_line(&mut pending, t).unwrap(), None);
        assert_eq!(pending, b"e");
    }

    #[test]
    fn an_error_status_keeps_the_body_and_garbage_is_malformed() {
        let a = serve(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\n\r\nnope");
        match post(&a, "/x", b"{}", soon()) {
            Err(HttpError::Status(400, b)) => assert_eq!(b, "nope"),
            other => panic!("{other:?}"),
        }
        let a = serve(b"garbage\r\n\r\n");
        assert!(matches!(
            post(&a, "/x", b"{}", soon()),
            Err(HttpError::Malformed(_))
        ));
        let a = serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        let r = post(&a, "/x", b"{}", soon()).unwrap().read_all(soon());
        assert!(matches!(r, Err(HttpError::Malformed(_))), "{r:?}");
    }

    #[test]
    fn a_silent_server_costs_the_deadline_and_no_more() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let t = Instant::now();
        let r = post(&a, "/x", b"{}", Instant::now() + Duration::from_millis(300));
        assert!(matches!(&r, Err(e) if is_timeout(e)), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        drop(l);
        // Nobody listening at all: refused at once.
        let r = post(&a, "/x", b"{}", soon());
        assert!(matches!(r, Err(HttpError::Io(_))), "{r:?}");
    }
}
