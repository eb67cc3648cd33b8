"""Decode-ahead, in one place: what a sequential run of reads is (sequential.py, the rule the
--raw core's read-ahead and the adapter's page pushes share), which chunk rows and bands to
decode ahead of each reader of a file and how many bytes to have in flight (policy.py), and
the chunks of a `data` being decoded, for its reads or ahead of them (inflight.py). The
decoded core calls `DecodeAhead.follow` for each read; `DataView` reads through
`ChunksInFlight` and tells the policy its layout in chunk rows, nothing more."""
