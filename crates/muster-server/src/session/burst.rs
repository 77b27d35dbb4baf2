//! Burst framing: the connection's frame stream wrapped so that a mark ([`Incoming::Drained`])
//! follows the last frame the socket had ready. The session sends the group requests it
//! gathered at that mark, so a pipelining client costs one actor message per read, not per
//! request. The wrapper also gives back the read buffer after a burst with a large frame.

use std::io;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use bytes::BytesMut;
use futures_util::Stream;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

/// What the session reads: frames, and a mark whenever the socket has nothing more to read
/// for now (the end of a burst), when the session sends the group requests it gathered.
pub(super) enum Incoming {
    Frame(Result<BytesMut, io::Error>),
    Drained,
}

/// Turns the frame stream into [`Incoming`]: after one or more frames, a [`Incoming::Drained`]
/// as soon as the next frame is not there yet.
pub(super) struct Bursts<S> {
    frames: S,
    in_burst: bool,
    ended: bool,
    /// A frame of this burst was larger than [`READ_BUF_KEEP`].
    large: bool,
}

impl<S> Bursts<S> {
    pub(super) fn new(frames: S) -> Self {
        Self {
            frames,
            in_burst: false,
            ended: false,
            large: false,
        }
    }
}

/// Read-buffer capacity a connection keeps once a burst with a larger frame is over.
const READ_BUF_KEEP: usize = 64 * 1024;

/// A frame source whose read buffer can be given back between bursts.
pub(super) trait TrimBuffer {
    fn trim(&mut self);
}

impl<R: tokio::io::AsyncRead> TrimBuffer for FramedRead<R, LengthDelimitedCodec> {
    /// One large frame (a 10 000-member leader's SyncGroup is ~1 MB) grows the read buffer, and
    /// the buffer would keep that allocation for the connection's life: start a new one.
    fn trim(&mut self) {
        if self.read_buffer().is_empty() {
            *self.read_buffer_mut() = BytesMut::with_capacity(8 * 1024);
        }
    }
}

impl<S> Stream for Bursts<S>
where
    S: Stream<Item = Result<BytesMut, io::Error>> + TrimBuffer + Unpin,
{
    type Item = Incoming;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Incoming>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let next = Pin::new(&mut self.frames).poll_next(cx);
        match next {
            Poll::Ready(Some(frame)) => {
                self.in_burst = true;
                if frame.as_ref().is_ok_and(|f| f.len() > READ_BUF_KEEP) {
                    self.large = true;
                }
                return Poll::Ready(Some(Incoming::Frame(frame)));
            }
            Poll::Ready(None) => self.ended = true,
            Poll::Pending => {}
        }
        if self.in_burst {
            self.in_burst = false;
            if std::mem::take(&mut self.large) {
                self.frames.trim();
            }
            Poll::Ready(Some(Incoming::Drained))
        } else if self.ended {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;

    use futures_util::StreamExt;

    use super::*;

    /// What the next poll of the scripted frame stream returns.
    enum Step {
        Frame(usize),
        NotYet,
        End,
    }

    /// Frames of the given sizes, filled with `x`; records polls' outcomes and trims in `log`.
    struct Scripted {
        steps: VecDeque<Step>,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl Stream for Scripted {
        type Item = Result<BytesMut, io::Error>;

        fn poll_next(
            mut self: Pin<&mut Self>,
            cx: &mut TaskContext<'_>,
        ) -> Poll<Option<Self::Item>> {
            match self.steps.pop_front() {
                Some(Step::Frame(len)) => {
                    Poll::Ready(Some(Ok(BytesMut::from(&vec![b'x'; len][..]))))
                }
                Some(Step::NotYet) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Some(Step::End) | None => Poll::Ready(None),
            }
        }
    }

    impl TrimBuffer for Scripted {
        fn trim(&mut self) {
            self.log.borrow_mut().push("trim".into());
        }
    }

    /// Polls `steps` through [`Bursts`] ten times; returns what came out (frames by length).
    fn run(steps: Vec<Step>) -> Vec<String> {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut bursts = Bursts::new(Scripted {
            steps: steps.into(),
            log: Rc::clone(&log),
        });
        let waker = futures_util::task::noop_waker();
        let mut cx = TaskContext::from_waker(&waker);
        for _ in 0..10 {
            let seen = match bursts.poll_next_unpin(&mut cx) {
                Poll::Ready(Some(Incoming::Frame(Ok(f)))) => f.len().to_string(),
                Poll::Ready(Some(Incoming::Frame(Err(e)))) => format!("error {e}"),
                Poll::Ready(Some(Incoming::Drained)) => "|".into(),
                Poll::Ready(None) => "end".into(),
                Poll::Pending => "pending".into(),
            };
            log.borrow_mut().push(seen);
        }
        log.take()
    }

    #[test]
    fn a_burst_ends_when_the_next_frame_is_not_there_yet_and_at_the_end() {
        let seen = run(vec![
            Step::Frame(1),
            Step::Frame(2),
            Step::NotYet,
            Step::NotYet,
            Step::Frame(3),
            Step::End,
        ]);
        assert_eq!(
            seen,
            ["1", "2", "|", "pending", "3", "|", "end", "end", "end", "end"]
        );
    }

    #[test]
    fn the_read_buffer_is_trimmed_after_a_burst_with_a_large_frame() {
        let large = READ_BUF_KEEP + 1;
        let seen = run(vec![
            Step::Frame(10),
            Step::NotYet,
            Step::Frame(large),
            Step::Frame(10),
            Step::NotYet,
            Step::Frame(READ_BUF_KEEP),
            Step::End,
        ]);
        let large = large.to_string();
        let keep = READ_BUF_KEEP.to_string();
        assert_eq!(
            seen,
            ["10", "|", &large, "10", "trim", "|", &keep, "|", "end", "end", "end"]
        );
    }
}
