#!/usr/bin/env python3
"""Writes the seed corpora for the fuzz targets from docs/protocol.md's golden vectors.

Each ```hex NAME``` block there is a whole frame (length prefix included). Request frames seed
`decode_request` (payload only), response frames `decode_response`, and the whole frames,
concatenated, seed `split_frames`. Run from anywhere; the corpora are rewritten each time.
"""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent
doc = (root.parent / "docs" / "protocol.md").read_text()
blocks = re.findall(r"```hex ([\w-]+)\n(.*?)```", doc, re.S)


def frame_bytes(body: str) -> bytes:
    hexes = "".join(line.split("#", 1)[0] for line in body.splitlines())
    return bytes.fromhex("".join(hexes.split()))


corpus = root / "corpus"
for target in ("decode_request", "decode_response", "split_frames"):
    (corpus / target).mkdir(parents=True, exist_ok=True)

stream = b""
for name, body in blocks:
    frame = frame_bytes(body)
    stream += frame
    kind = "decode_request" if name.endswith("-request") else "decode_response"
    (corpus / kind / f"golden-{name}").write_bytes(frame[4:])
# split_frames takes an arbitrary-derived struct: u16 limit, then the read sizes and the stream.
(corpus / "split_frames" / "golden-stream").write_bytes(b"\xff\xff" + bytes([3, 1, 7]) + stream)
print(f"{len(blocks)} golden frames written")
