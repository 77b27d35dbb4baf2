"""examples/worker.py whose revocation callback announces itself on stdout (``REVOKING``) and
then takes its time (up to 60 s, interruptible): a test sends Ctrl-C while a rebalance waits
for it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import worker  # noqa: E402  (examples/worker.py)
from muster import Consumer, TopicPartition  # noqa: E402

original = worker.Worker.on_revoke


def slow_revoke(self: worker.Worker, consumer: Consumer, revoked: List[TopicPartition]) -> None:
    print("REVOKING", flush=True)
    time.sleep(60)
    original(self, consumer, revoked)


worker.Worker.on_revoke = slow_revoke  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(worker.main())
